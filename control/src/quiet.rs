//! A data core's connection, and whether its transmit side is known to owe nothing.
//!
//! A poll turn offers every connection of its core a transmit opportunity
//! ([`Connection::poll_transmit_gather`]: its test services, its sessions' pump, its receive
//! window, then SCTP's packet builder), 160 to 260 instructions for one that has nothing to
//! send. A core holding many associations, most of them idle, spent most of its turns there,
//! and a single idle association an eighth of an idle turn. Whether a connection owes a packet
//! depends only on its own state: its timers fall due through [`Connection::handle_timeout`],
//! and everything else that could give it something to send (a packet, a posted operation, an
//! indication taken, a session returned) is a change made through `&mut`. So once it answered
//! "nothing", it answers "nothing" again until something changes it, and [`Quiet`] skips the
//! call until then: its only way to the connection for changes is [`Quiet::get_mut`], which
//! forgets the answer. The one "nothing" that does not last is SCTP's Max.Burst ending a
//! transmit opportunity (RFC 9260 §6.1 D) with DATA still sendable: the next opportunity sends
//! more without any change, so it is not remembered. A packet after which the association
//! owes nothing ([`ddpdk_dataplane::sctp::Association::owes_nothing`]) ends the opportunity
//! at once, as that call's "nothing" would.
//!
//! Debug builds (the test suite, and `make soak`'s release build with debug assertions) still
//! make every skipped call and assert that it found nothing: a source of packets this
//! reasoning missed fails a test instead of stalling an association in production.

use crate::conn::{Completion, Connection, Indication, OpResult, SessionCall};
use ddpdk_dataplane::sctp::{Hole, Instant};

/// A connection and what its last transmit opportunity found.
#[derive(Debug)]
pub(crate) struct Quiet {
    c: Connection,
    /// The last transmit opportunity found nothing, and nothing has changed since.
    quiet: bool,
}

impl Quiet {
    pub(crate) fn new(c: Connection) -> Quiet {
        Quiet { c, quiet: false }
    }

    pub(crate) fn get(&self) -> &Connection {
        &self.c
    }

    /// The connection, to change: whatever is done with it may give it something to send.
    pub(crate) fn get_mut(&mut self) -> &mut Connection {
        self.quiet = false;
        &mut self.c
    }

    /// [`Connection::materialize_region`]: the messages stay the same messages, so what the
    /// connection owes does not change, and a quiet one stays quiet (a revocation asks every
    /// connection of its core).
    pub(crate) fn materialize_region(
        &mut self,
        region: crate::memory::RegionId,
        regions: &crate::memory::RegionTable,
    ) -> usize {
        self.c.materialize_region(region, regions)
    }

    /// [`Connection::poll_transmit_gather`], skipped while the connection is known to owe
    /// nothing.
    pub(crate) fn poll_transmit_gather(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Option<(usize, &[Hole])> {
        if self.quiet {
            #[cfg(debug_assertions)]
            if let Some((len, _)) = self.c.poll_transmit_gather(now, buf) {
                panic!(
                    "a connection that owed nothing, unchanged since, now sends {len} bytes: \
                     a source of packets control::quiet does not know"
                );
            }
            return None;
        }
        let len = match self.c.poll_transmit_gather(now, buf) {
            Some((len, _)) => len,
            None => {
                self.quiet = !self.c.association().burst_ended();
                return None;
            }
        };
        // The packet left nothing owed (a data core's usual answer: one SACK, or one write's
        // DATA): the opportunity ends here, and the call that would find "nothing" is not
        // made (nor its ~100 instructions before the burst goes out on the wire). Max.Burst's
        // end is not taken here (owes_nothing is false then): its call refills the budget.
        if self.c.association().owes_nothing() {
            self.c.end_transmit_opportunity();
            self.quiet = true;
        }
        Some((len, self.c.association().holes()))
    }

    // What a core takes from a connection every turn. Completions, operation results and
    // session calls wait in queues of their own that nothing on the transmit side reads; an
    // indication taken frees receive room, which may call for a window update (RFC 9260
    // §6.2), so taking one is a change.

    pub(crate) fn poll_session_call(&mut self) -> Option<SessionCall> {
        self.c.poll_session_call()
    }

    pub(crate) fn poll_op_result(&mut self) -> Option<OpResult> {
        self.c.poll_op_result()
    }

    pub(crate) fn poll_completion(&mut self) -> Option<Completion> {
        self.c.poll_completion()
    }

    pub(crate) fn poll_indication(&mut self) -> Option<Indication> {
        let i = self.c.poll_indication();
        if i.is_some() {
            self.quiet = false;
        }
        i
    }
}
