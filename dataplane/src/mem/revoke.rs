//! STag changes across data cores, with RFC 5041 §8.3.1 item 6's guarantee: once
//! [`Coordinator::revoke`] returns, no data core can place into that registration any more.
//!
//! Each data core holds its own replica of the STag table ([`CoreStags`]), read without locks on
//! the fast path. The control thread's [`Coordinator`] owns the master table and changes the
//! replicas only by message, over one bounded channel per core (DESIGN.md: "The control thread
//! changes a core's state only by message"). A core applies pending commands between packets
//! ([`CoreStags::poll`]), never in the middle of placing one, and acknowledges each invalidation
//! with its epoch. `revoke` removes the STag from the master, sends the invalidation to every
//! core and waits until every core has acknowledged that epoch: after that, a segment naming the
//! STag fails the whole-STag lookup on every core, so nothing more is placed. A core never
//! blocks: if the acknowledgement channel were full it would retry on its next poll.
//!
//! A stalled core's channel fills, and an invalidation may find no room in it. Rather than
//! hold such invalidations back, one per revocation, for as long as the core stays stalled
//! (a list without bound), the coordinator raises that core's resync request to the
//! revocation's epoch: O(1) state per core, however many revocations it misses. The master
//! keeps, beside its table, one atomic word per STag index saying which registration is valid
//! there, by key and generation (`Validity`): the 8-bit key alone comes round after 256
//! reuses of the index, which a long stall can span. A core reads its request before it drains its channel on every poll; when
//! the request moved it drops, after the drain, every STag of its replica that word does not
//! name, then reports the request done. So a core that wakes sees every revocation it missed
//! before it places anything (RFC 5041 §8.3.1 item 6), and on the fast path the request costs
//! one load of a line only the control thread writes, and seldom.

use crate::channel::{self, Receiver, Sender, TrySendError};
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::stag::{RegisterError, Registration, Stag, StagTable};

/// A change to a core's replica.
#[derive(Debug, Clone, Copy)]
pub enum Command {
    /// Insert exactly this STag (index and key as the master chose them), of this generation
    /// ([`StagTable::generation`]).
    Register(Stag, u32, Registration),
    /// Invalidate it, then acknowledge `epoch`.
    Invalidate(Stag, u64),
}

/// The master's word per STag index: [`VALID`] with the generation and key of the
/// registration there, or 0. Written by the control thread only; read by a core only when it
/// resyncs. The generation is there because the key alone repeats: an index reused 256 times
/// while a core was stalled names the same STag again, and the core, comparing keys, kept the
/// old registration (RFC 5041 §8.3.1 item 6). A 32-bit generation does not come round while
/// a core is stalled: every reuse then is a registration withdrawn after `REGISTER_WAIT`.
type Validity = Arc<[AtomicU64]>;

const VALID: u64 = 1 << 40;

fn word(stag: Stag, generation: u32) -> u64 {
    VALID | u64::from(generation) << 8 | u64::from(stag.key())
}

/// A core's resync: requested by the coordinator, done by the core.
#[derive(Debug, Default)]
struct Resync {
    /// The epoch of the latest revocation whose invalidation found the channel full.
    requested: AtomicU64,
    /// The latest request the core has resynced for: every STag revoked at or before it is
    /// gone from its replica, and nothing the channel still holds can bring one back.
    done: AtomicU64,
}

/// One data core's replica.
#[derive(Debug)]
pub struct CoreStags {
    core: usize,
    table: StagTable,
    commands: Receiver<Command>,
    acks: Sender<(usize, u64)>,
    valid: Validity,
    /// Also the coordinator's sign that this core is gone: it holds the only other reference.
    resync: Arc<CachePadded<Resync>>,
    /// The request last resynced for (this core's copy of `resync.done`).
    resynced: u64,
    /// An acknowledgement the channel had no room for, sent again on the next poll.
    unsent_ack: Option<u64>,
    /// Invalidations applied, the coordinator's and local ones ([`CoreStags::invalidations`]).
    invalidations: u64,
}

impl CoreStags {
    /// Whether an acknowledgement waits for room in the channel (sent again at the next
    /// poll): a core that owes one must not sleep long.
    pub fn ack_owed(&self) -> bool {
        self.unsent_ack.is_some()
    }

    /// The table the fast path checks segments against.
    pub fn table(&self) -> &StagTable {
        &self.table
    }

    /// Applies every pending command (call between packets), and resyncs with the master when
    /// asked to. Never blocks. Returns how many.
    pub fn poll(&mut self) -> usize {
        self.poll_revoking(|_| {})
    }

    /// [`CoreStags::poll`], handing `revoked` each registration an invalidation takes away
    /// before the invalidation is acknowledged: what must be done before the coordinator may
    /// tell the ULP the memory is no longer reached (RFC 5041 §8.3.1), such as copying the
    /// bytes queued sends still name out of it.
    pub fn poll_revoking(&mut self, mut revoked: impl FnMut(&Registration)) -> usize {
        // Read before the drain: every command sent before the request is then applied below,
        // ahead of the scan, so a registration still in the channel of an STag revoked since
        // cannot outlive it. One load of a line the control thread seldom writes.
        let requested = self.resync.requested.load(Ordering::Acquire);
        if let Some(epoch) = self.unsent_ack.take() {
            self.ack(epoch);
        }
        let mut n = 0;
        while let Some(cmd) = channel::poll(&self.commands) {
            n += 1;
            match cmd {
                Command::Register(stag, generation, reg) => {
                    // RFC 5041 §8.3.1 item 6: a registration this replaces was revoked while
                    // the revocation's request to resync had not been read yet (it was read
                    // before this drain); the resync will find the new one valid and drop
                    // nothing, so the old one's revocation is finished here.
                    if let Some(old) = self.table.insert(stag, generation, reg) {
                        revoked(&old);
                        self.invalidations += 1;
                    }
                }
                Command::Invalidate(stag, epoch) => {
                    if let Some(reg) = self.table.invalidate(stag) {
                        revoked(&reg);
                    }
                    self.invalidations += 1;
                    self.ack(epoch);
                }
            }
        }
        if requested != self.resynced {
            self.resync_with_master(requested, &mut revoked);
            n += 1;
        }
        n
    }

    /// Drops every STag the master no longer holds valid: the invalidations that found the
    /// channel full, and any others, whatever their number. A registration is marked valid
    /// before it is sent to any core, so nothing the master holds is dropped.
    #[cold]
    fn resync_with_master(&mut self, requested: u64, revoked: &mut impl FnMut(&Registration)) {
        let valid = &self.valid;
        let dropped = self.table.retain(revoked, |stag, generation| {
            // The request's Acquire made the master's words up to it visible; a later one
            // only ever says a registration is no longer valid, or names a newer one. Key and
            // generation: the key alone may have come round to a newer registration's.
            valid
                .get(stag.index() as usize)
                .is_some_and(|w| w.load(Ordering::Relaxed) == word(stag, generation))
        });
        self.invalidations += dropped as u64;
        self.resynced = requested;
        // Release: what this thread placed before comes before the coordinator's seeing it.
        self.resync.done.store(requested, Ordering::Release);
    }

    /// Invalidates `stag` in this replica at once, ahead of the coordinator's revocation: the
    /// peer invalidated it with a Send with Invalidate (RFC 5040 §5.3), and the next segment
    /// of the stream, here, must already find it invalid. The coordinator's revocation follows
    /// for the other cores (and is acknowledged here as usual).
    pub fn invalidate_local(&mut self, stag: Stag) -> Option<Registration> {
        self.invalidations += 1;
        self.table.invalidate(stag)
    }

    /// How many invalidations this replica has applied: what a registration no longer
    /// grants is looked for again only when this moved (a registration takes nothing away).
    pub fn invalidations(&self) -> u64 {
        self.invalidations
    }

    fn ack(&mut self, epoch: u64) {
        match self.acks.try_send((self.core, epoch)) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(_)) => self.unsent_ack = Some(epoch),
        }
    }
}

/// Why a revocation did not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevokeError {
    /// No such registration.
    Unknown,
    /// A core did not acknowledge within the timeout (stalled or gone). The STag is already
    /// refused by every core that did acknowledge and by the master; the caller must not reuse
    /// the memory until the core is known dead.
    Timeout { acked: usize, cores: usize },
}

impl core::fmt::Display for RevokeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RevokeError::Unknown => f.write_str("no such STag"),
            RevokeError::Timeout { acked, cores } => {
                write!(
                    f,
                    "only {acked} of {cores} data cores acknowledged the revocation"
                )
            }
        }
    }
}

impl std::error::Error for RevokeError {}

/// How long a registration waits for room in a core's channel.
const REGISTER_WAIT: Duration = Duration::from_secs(1);

enum SendBy {
    Gone,
    Timeout,
}

/// Sends without blocking past `deadline` (a core drains its channel between packets; one that
/// does not for that long is stalled).
fn send_by(core: &Sender<Command>, mut cmd: Command, deadline: Instant) -> Result<(), SendBy> {
    loop {
        match core.try_send(cmd) {
            Ok(()) => return Ok(()),
            Err(TrySendError::Disconnected(_)) => return Err(SendBy::Gone),
            Err(TrySendError::Full(c)) if Instant::now() < deadline => {
                cmd = c;
                std::thread::sleep(Duration::from_micros(50));
            }
            Err(TrySendError::Full(_)) => return Err(SendBy::Timeout),
        }
    }
}

/// The control thread's side.
#[derive(Debug)]
pub struct Coordinator {
    master: StagTable,
    /// The master's validity, one word per index, for cores that resync.
    valid: Validity,
    cores: Vec<Sender<Command>>,
    resync: Vec<Arc<CachePadded<Resync>>>,
    acks: Receiver<(usize, u64)>,
    epoch: u64,
    inflight: Vec<Inflight>,
    /// Regions named by revocations answered late ([`RevokeError::Timeout`]), each with the
    /// resync epoch every core that had not acknowledged must still reach: until then such a
    /// core may yet read or place into the region (copy a queued send out of it, RFC 5041
    /// §8.3.1), so the region must not be freed ([`Coordinator::revoking_region`]). One entry
    /// a region, not a revocation: bounded however long a core stays stalled.
    late: Vec<LateRegion>,
    /// How long a registration waits for room in a core's channel ([`REGISTER_WAIT`]; a
    /// test shortens it).
    register_wait: Duration,
    /// Wakes core k after a command or a resync request was left for it: a core blocked
    /// while idle (on RX interrupts) would otherwise find it only at its next frame or timer.
    wake: Option<CoreWake>,
}

/// How the coordinator wakes a data core it left a command for ([`Coordinator::set_wake`]).
#[derive(Clone)]
pub struct CoreWake(pub Arc<dyn Fn(usize) + Send + Sync>);

impl std::fmt::Debug for CoreWake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CoreWake")
    }
}

impl Coordinator {
    /// A master table of `capacity` STags and `cores` replicas, each with a command channel of
    /// `depth` entries.
    pub fn new(
        capacity: usize,
        random: u64,
        cores: usize,
        depth: usize,
    ) -> (Coordinator, Vec<CoreStags>) {
        let (ack_tx, ack_rx) = channel::bounded(cores * depth.max(1));
        let master = StagTable::new(capacity, random);
        let valid: Validity = (0..master.capacity()).map(|_| AtomicU64::new(0)).collect();
        let mut senders = Vec::new();
        let mut resyncs = Vec::new();
        let mut replicas = Vec::new();
        for core in 0..cores {
            let (tx, rx) = channel::bounded(depth.max(1));
            let resync = Arc::new(CachePadded::new(Resync::default()));
            senders.push(tx);
            resyncs.push(Arc::clone(&resync));
            replicas.push(CoreStags {
                core,
                table: StagTable::replica(capacity),
                commands: rx,
                acks: ack_tx.clone(),
                valid: Arc::clone(&valid),
                resync,
                resynced: 0,
                unsent_ack: None,
                invalidations: 0,
            });
        }
        (
            Coordinator {
                master,
                valid,
                cores: senders,
                resync: resyncs,
                acks: ack_rx,
                epoch: 0,
                inflight: Vec::new(),
                late: Vec::new(),
                register_wait: REGISTER_WAIT,
                wake: None,
            },
            replicas,
        )
    }

    pub fn master(&self) -> &StagTable {
        &self.master
    }

    /// Has `wake(k)` called each time a command or a resync request is left for core `k`.
    pub fn set_wake(&mut self, wake: CoreWake) {
        self.wake = Some(wake);
    }

    fn wake(&self, core: usize) {
        if let Some(w) = &self.wake {
            (w.0)(core);
        }
    }

    /// Registers in the master and tells every core; the caller may advertise the STag once
    /// this returns. The command is in every live core's channel by then, and a core applies
    /// its channel after it receives a burst and before it looks at one frame of it, so no
    /// segment the peer sends after learning the STag can meet a core that does not know it:
    /// a legitimate write is never answered with Invalid STag. A core whose channel stays full
    /// past the wait (stalled) cannot be told: the registration is withdrawn
    /// ([`RegisterError::CoreUnreachable`]) rather than left half made.
    pub fn register(&mut self, reg: Registration) -> Result<Stag, RegisterError> {
        let stag = self.master.register(reg)?;
        let generation = self.master.generation(stag);
        // Before any core can hold it: a core that resyncs must find it valid.
        self.set_valid(stag, true);
        let now = Instant::now();
        let deadline = now + self.register_wait;
        for (k, core) in self.cores.iter().enumerate() {
            // A core known stalled is not waited for again: one whose channel is full
            // refuses at once, not after a second of the control thread's time each call.
            let by = if self.known_stalled(k) { now } else { deadline };
            let sent = send_by(core, Command::Register(stag, generation, reg), by);
            self.wake(k);
            match sent {
                // Gone: it places nothing any more.
                Ok(()) | Err(SendBy::Gone) => {}
                Err(SendBy::Timeout) => {
                    // Withdraw: the master forgets it, every core that has room gets the
                    // invalidation behind the registration, and the stalled one a resync
                    // request. Nobody waits for it: it is forgotten in `progress`.
                    if self.start_revoke(stag, self.register_wait).is_ok() {
                        if let Some(r) = self.inflight.last_mut() {
                            r.detached = true;
                            r.withdrawn = true;
                            r.waiters = 0;
                        }
                    }
                    return Err(RegisterError::CoreUnreachable);
                }
            }
        }
        Ok(stag)
    }

    /// Invalidates `stag` everywhere; returns once every core has acknowledged, so no core can
    /// place into the registration afterwards (RFC 5041 §8.3.1 item 6).
    pub fn revoke(&mut self, stag: Stag, timeout: Duration) -> Result<Registration, RevokeError> {
        self.revoke_with(stag, timeout, None)
    }

    /// As [`Coordinator::revoke`], for a caller that polls data cores itself (on the same
    /// thread): `poll` runs while the acknowledgements are awaited, so those cores can give them.
    pub fn revoke_polling(
        &mut self,
        stag: Stag,
        timeout: Duration,
        poll: &mut dyn FnMut(),
    ) -> Result<Registration, RevokeError> {
        self.revoke_with(stag, timeout, Some(poll))
    }

    fn revoke_with(
        &mut self,
        stag: Stag,
        timeout: Duration,
        mut poll: Option<&mut dyn FnMut()>,
    ) -> Result<Registration, RevokeError> {
        let (reg, revocation) = self.start_revoke(stag, timeout)?;
        // A caller that polls the cores itself is about to run the stalled one too.
        let give_up_on_stalled = poll.is_none();
        loop {
            if let Some(done) = self.answer(revocation, give_up_on_stalled) {
                return done.map(|()| reg);
            }
            match poll.as_mut() {
                // The cores run on this thread: turn them while waiting.
                Some(poll) => poll(),
                None => {
                    let left = self
                        .inflight
                        .iter()
                        .find(|r| r.epoch == revocation.0)
                        .map_or(Duration::ZERO, |r| {
                            r.deadline.saturating_duration_since(Instant::now())
                        });
                    // Sleep on the channel (not a spin); a short slice, so a core's unsent
                    // command is retried soon.
                    if let Ok(ack) = self.acks.recv_timeout(left.min(Duration::from_millis(1))) {
                        self.credit(ack);
                    }
                }
            }
        }
    }

    /// Starts revoking `stag` without waiting: the master forgets it at once and every core is
    /// sent the invalidation (a core whose channel is full is asked to resync instead, and
    /// drops the STag on its next poll, however late, before it places anything). The caller
    /// asks [`Coordinator::revocation`] until it answers; only then may it act as if no core
    /// can place through `stag` (a remote invalidation's completion waits for this, RFC 5040
    /// §5.3, as a deregistration does).
    ///
    /// An STag whose revocation is already under way (a Local Invalidate, say, when the peer's
    /// Send with Invalidate names it too) is not unknown: the caller joins that revocation and
    /// hears its outcome, so neither is told before every core has dropped it (RFC 5041
    /// §8.3.1 item 6).
    pub fn start_revoke(
        &mut self,
        stag: Stag,
        timeout: Duration,
    ) -> Result<(Registration, Revocation), RevokeError> {
        let Some(reg) = self.master.invalidate(stag) else {
            let r = self
                .inflight
                .iter_mut()
                .find(|r| r.stag == stag)
                .ok_or(RevokeError::Unknown)?;
            r.waiters += 1;
            r.detached = false;
            r.deadline = r.deadline.max(Instant::now() + timeout);
            return Ok((r.reg, Revocation(r.epoch)));
        };
        // Before the request of any core that resyncs for this revocation.
        self.set_valid(stag, false);
        self.epoch += 1;
        let epoch = self.epoch;
        let mut r = Inflight {
            epoch,
            stag,
            reg,
            waiters: 1,
            deadline: Instant::now() + timeout,
            cores: vec![CoreWait::Waiting; self.cores.len()],
            detached: false,
            withdrawn: false,
        };
        for (k, core) in self.cores.iter().enumerate() {
            match core.try_send(Command::Invalidate(stag, epoch)) {
                Ok(()) => {}
                // The core is gone: it places nothing any more.
                Err(TrySendError::Disconnected(_)) => r.cores[k] = CoreWait::Gone,
                // Stalled, or busy: one request per core, raised to the newest epoch, covers
                // this invalidation and every earlier one it missed.
                Err(TrySendError::Full(_)) => {
                    self.resync[k].requested.store(epoch, Ordering::Release);
                }
            }
            self.wake(k);
        }
        self.inflight.push(r);
        Ok((reg, Revocation(epoch)))
    }

    fn set_valid(&self, stag: Stag, valid: bool) {
        if let Some(w) = self.valid.get(stag.index() as usize) {
            let v = if valid {
                word(stag, self.master.generation(stag))
            } else {
                0
            };
            w.store(v, Ordering::Relaxed);
        }
    }

    /// Where `revocation` stands: `None` while cores have yet to acknowledge; `Some(Ok)` once
    /// every live core has (and for a revocation no longer known, answered before);
    /// `Some(Err(Timeout))` when its deadline passed first. Each caller of
    /// [`Coordinator::start_revoke`] is answered once, and the revocation is forgotten once
    /// every caller was: a core that never acknowledged still drops the STag before its next
    /// packet, from its channel or its resync request. Never blocks.
    pub fn revocation(&mut self, revocation: Revocation) -> Option<Result<(), RevokeError>> {
        self.answer(revocation, true)
    }

    /// [`Coordinator::revocation`]; `give_up_on_stalled`: answer Timeout at once when only
    /// cores known stalled still owe it (not for a caller that polls the cores itself).
    fn answer(
        &mut self,
        revocation: Revocation,
        give_up_on_stalled: bool,
    ) -> Option<Result<(), RevokeError>> {
        self.progress();
        let Some(i) = self.inflight.iter().position(|r| r.epoch == revocation.0) else {
            return Some(Ok(()));
        };
        // Cores still owing this revocation that are known stalled (one already let a
        // revocation time out and has not resynced since) are not waited for again: each
        // deregistration would otherwise hold the control thread for its whole timeout,
        // answering no INIT and returning no session meanwhile (an independent review).
        let r = &self.inflight[i];
        let only_stalled =
            give_up_on_stalled && !r.done() && r.waiting().all(|k| self.known_stalled(k));
        let r = &mut self.inflight[i];
        let result = if r.done() {
            Ok(())
        } else if only_stalled || Instant::now() >= r.deadline {
            let late = (
                r.reg.memory.region,
                r.epoch,
                r.waiting().collect::<Vec<_>>(),
            );
            let result = Err(RevokeError::Timeout {
                acked: r.acked(),
                cores: self.cores.len(),
            });
            self.answered_late(late);
            result
        } else {
            return None;
        };
        let r = &mut self.inflight[i];
        r.waiters = r.waiters.saturating_sub(1);
        if r.waiters == 0 {
            self.inflight.swap_remove(i);
        }
        Some(result)
    }

    /// Takes the acknowledgements that came and forgets the revocations nobody waits for
    /// that are over: for a caller with no revocation of its own to ask about (each control
    /// turn).
    pub fn tend(&mut self) {
        if !self.inflight.is_empty() {
            self.progress();
        }
    }

    /// Revocations started and not yet answered.
    pub fn revocations_in_flight(&self) -> usize {
        self.inflight.len()
    }

    /// Whether a revocation naming `region` (a [`RegionSlice::region`]) has yet to be
    /// acknowledged by some live core, answered or not: that core may still place into the
    /// region or copy queued sends out of it, so the region must not be freed or reused yet.
    ///
    /// [`RegionSlice::region`]: super::RegionSlice
    pub fn revoking_region(&mut self, region: u32) -> bool {
        self.progress();
        self.inflight
            .iter()
            .any(|r| r.reg.memory.region == region && !r.done() && !r.withdrawn)
            || self.late.iter().any(|l| l.region == region)
    }

    /// Whether core `k` let a revocation time out and has not resynced since: it is not
    /// running its poll loop, and waiting for it again only stalls the caller.
    fn known_stalled(&self, k: usize) -> bool {
        // Read live, not from `late` alone, which only `progress` clears: a core that ran
        // again since must not be refused for a moment's full channel.
        let Some(resync) = self.resync.get(k) else {
            return false;
        };
        let done = resync.done.load(Ordering::Acquire);
        Arc::strong_count(resync) > 1
            && self
                .late
                .iter()
                .any(|l| l.epochs.get(k).is_some_and(|&e| e != 0 && done < e))
    }

    /// A revocation of `region` at `epoch` was answered with a timeout while `cores` had not
    /// acknowledged it. Each such core is asked to resync up to that epoch: a resync done
    /// covers every invalidation up to its epoch however it was sent, so its `done` alone
    /// says when the core is through, with no record a revocation.
    fn answered_late(&mut self, (region, epoch, cores): (u32, u64, Vec<usize>)) {
        let i = match self.late.iter().position(|l| l.region == region) {
            Some(i) => i,
            None => {
                self.late.push(LateRegion {
                    region,
                    epochs: vec![0; self.cores.len()],
                });
                self.late.len() - 1
            }
        };
        for k in cores {
            self.resync[k].requested.fetch_max(epoch, Ordering::AcqRel);
            let e = &mut self.late[i].epochs[k];
            *e = (*e).max(epoch);
            self.wake(k);
        }
    }

    /// Credits every acknowledgement that came and every resync done, and forgets what
    /// nobody waits for once it is over.
    fn progress(&mut self) {
        while let Ok(ack) = self.acks.try_recv() {
            self.credit(ack);
        }
        for (k, resync) in self.resync.iter().enumerate() {
            // A resync done for epoch e covers every revocation up to e, however it was sent:
            // its STag was marked invalid before e was requested, and the core drained its
            // channel before it scanned.
            let done = resync.done.load(Ordering::Acquire);
            // Nothing else holds the core's replica: it places nothing any more. strong_count
            // promises no ordering; the fence orders the replica's drop (a Release decrement),
            // and so everything the core placed before it, ahead of the revocation's end.
            let gone = Arc::strong_count(resync) == 1;
            if gone {
                std::sync::atomic::fence(Ordering::Acquire);
            }
            for r in &mut self.inflight {
                if let Some(w) = r.cores.get_mut(k).filter(|w| **w == CoreWait::Waiting) {
                    if done >= r.epoch {
                        *w = CoreWait::Acked;
                    } else if gone {
                        *w = CoreWait::Gone;
                    }
                }
            }
        }
        let now = Instant::now();
        self.inflight
            .retain(|r| !(r.detached && (r.done() || now >= r.deadline)));
        if !self.late.is_empty() {
            let resync = &self.resync;
            self.late.retain_mut(|l| {
                for (k, e) in l.epochs.iter_mut().enumerate() {
                    // Through once its resync reached the epoch, or gone (see above).
                    if *e != 0
                        && (resync[k].done.load(Ordering::Acquire) >= *e
                            || Arc::strong_count(&resync[k]) == 1)
                    {
                        *e = 0;
                    }
                }
                l.epochs.iter().any(|e| *e != 0)
            });
        }
    }

    /// Credits one core's acknowledgement to the revocation of its epoch. One of a revocation
    /// that already timed out is dropped.
    fn credit(&mut self, (core, epoch): (usize, u64)) {
        if let Some(r) = self.inflight.iter_mut().find(|r| r.epoch == epoch) {
            if let Some(w) = r.cores.get_mut(core).filter(|w| **w == CoreWait::Waiting) {
                *w = CoreWait::Acked;
            }
        }
    }
}

/// A revocation under way ([`Coordinator::start_revoke`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Revocation(u64);

/// One revocation awaiting acknowledgements.
#[derive(Debug)]
struct Inflight {
    epoch: u64,
    stag: Stag,
    /// What the master held: a caller joining the revocation gets it too.
    reg: Registration,
    /// Callers of `start_revoke` not yet answered (one that joined counts too).
    waiters: u32,
    /// One deadline for all the cores together: waiting afresh for each acknowledgement would
    /// let slow cores (or stale acknowledgements of an earlier revocation) stretch the wait to
    /// cores × timeout, or forever.
    deadline: Instant,
    cores: Vec<CoreWait>,
    /// Nobody asks for its outcome (a withdrawn registration): forgotten once every core has
    /// acknowledged it or it is late. Each core still drops the STag, from its channel or its
    /// resync request, so nothing has to be kept for one that is late.
    detached: bool,
    /// A registration withdrawn before its STag was given to anyone
    /// ([`RegisterError::CoreUnreachable`]): no peer can name it, and the stalled core it
    /// waits for never had it, so its region is no revocation's ([`Coordinator::revoking_region`]).
    withdrawn: bool,
}

impl Inflight {
    fn done(&self) -> bool {
        !self.cores.contains(&CoreWait::Waiting)
    }

    /// The cores yet to acknowledge.
    fn waiting(&self) -> impl Iterator<Item = usize> + '_ {
        self.cores
            .iter()
            .enumerate()
            .filter(|(_, w)| **w == CoreWait::Waiting)
            .map(|(k, _)| k)
    }

    fn acked(&self) -> usize {
        self.cores.iter().filter(|w| **w == CoreWait::Acked).count()
    }
}

/// A region a revocation answered late still names: per core, the resync epoch it must reach
/// (0 once through).
#[derive(Debug)]
struct LateRegion {
    region: u32,
    epochs: Vec<u64>,
}

/// Where one core stands in a revocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CoreWait {
    Waiting,
    Acked,
    /// It places nothing any more, and is not counted as having acknowledged.
    Gone,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::mem::{Access, Pd, RegionSlice, StreamId};
    use crate::port::region::Region;

    fn reg() -> Registration {
        Registration {
            pd: Pd(1),
            access: Access::REMOTE_WRITE,
            stream: None,
            to_base: 0,
            len: 4096,
            memory: RegionSlice {
                region: 0,
                offset: 0,
            },
        }
    }

    /// A core that let a revocation time out and has not run since is not waited for
    /// again: a second revocation it owes is answered Timeout at once, not after its own
    /// timeout (each deregistration held the control thread a second, answering no INIT
    /// meanwhile; an independent review). Once the core runs again (it resyncs), it is
    /// waited for as before; the region stays unfreeable until then either way.
    #[test]
    fn a_core_known_stalled_is_not_waited_for_again() {
        let (mut coord, mut replicas) = Coordinator::new(64, 7, 2, 16);
        let stags: Vec<Stag> = (0..3).map(|_| coord.register(reg()).unwrap()).collect();
        for r in &mut replicas {
            r.poll();
        }
        // Core 1 stops. The first revocation waits out its (short) timeout.
        let mut poll0 = || {
            replicas[0].poll();
        };
        let first = coord.revoke_polling(stags[0], Duration::from_millis(20), &mut poll0);
        assert!(matches!(
            first,
            Err(RevokeError::Timeout { acked: 1, cores: 2 })
        ));
        // The second owes only core 1 once core 0 has acknowledged: answered at once,
        // however long its own timeout.
        let (_, second) = coord
            .start_revoke(stags[1], Duration::from_secs(3600))
            .unwrap();
        replicas[0].poll();
        assert!(matches!(
            coord.revocation(second),
            Some(Err(RevokeError::Timeout { acked: 1, cores: 2 }))
        ));
        assert!(
            coord.revoking_region(0),
            "core 1 may still reach the region"
        );
        // Core 1 runs again: it resyncs, and is waited for as before.
        replicas[1].poll();
        assert!(!coord.revoking_region(0));
        let (_, third) = coord
            .start_revoke(stags[2], Duration::from_secs(3600))
            .unwrap();
        replicas[0].poll();
        assert_eq!(
            coord.revocation(third),
            None,
            "core 1 owes it and is running"
        );
        replicas[1].poll();
        assert_eq!(coord.revocation(third), Some(Ok(())));
    }

    /// RFC 5041 §8.3.1 item 6: a core whose invalidation went by resync (its channel full)
    /// and who read the request just before it was raised drains a Register that reuses the
    /// revoked STag's index; the resync then finds the new registration valid and drops
    /// nothing. The registration the Register replaced is the revoked one: it is handed to
    /// the caller (who stops queued reads of its memory) and counted, before the revocation
    /// can be acknowledged. It was overwritten unseen (an independent review).
    #[test]
    fn a_registration_a_register_replaces_is_handed_over_8_3_1_item_6() {
        let (mut coord, mut replicas) = Coordinator::new(2, 5, 2, 1);
        let old = coord.register(reg()).unwrap();
        for r in &mut replicas {
            r.poll();
        }
        // Core 1's channel (one command deep) is full with this one.
        let _other = coord.register(reg()).unwrap();
        replicas[0].poll();
        let (_, rev) = coord.start_revoke(old, Duration::from_secs(30)).unwrap();
        replicas[0].poll();
        // Core 1 read its request just before it was raised: it drains without resyncing.
        let (saved, req) = (
            replicas[1].resynced,
            replicas[1].resync.requested.load(Ordering::Acquire),
        );
        replicas[1].resynced = req;
        replicas[1].poll();
        replicas[1].resynced = saved;
        let fresh = Registration {
            memory: RegionSlice {
                region: 9,
                offset: 0,
            },
            ..reg()
        };
        let new = coord.register(fresh).unwrap();
        assert_eq!(new.index(), old.index(), "the index is reused");
        let before = replicas[1].invalidations();
        let mut handed = Vec::new();
        replicas[1].poll_revoking(|r| handed.push(*r));
        assert_eq!(handed, vec![reg()], "the revoked registration handed over");
        assert!(replicas[1].invalidations() > before);
        assert_eq!(coord.revocation(rev), Some(Ok(())));
    }

    /// RFC 5041 §8.3.1 item 6 with two data cores placing as fast as they can. Once revoke()
    /// returns, the region is wiped; each core then completes many more placement attempts
    /// (counted, so the test waits for work, not for time). Any byte placed after the revoke
    /// would survive the wipe: the region must still be all zeros.
    #[test]
    fn nothing_is_placed_after_revoke_returns() {
        let (mut coord, replicas) = Coordinator::new(64, 7, 2, 16);
        let region = Arc::new(Region::new(4096).unwrap());
        let stag = coord.register(reg()).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let attempts: Vec<Arc<AtomicU64>> = (0..2).map(|_| Arc::new(AtomicU64::new(0))).collect();
        let placed: Vec<Arc<AtomicU64>> = (0..2).map(|_| Arc::new(AtomicU64::new(0))).collect();
        let threads: Vec<_> = replicas
            .into_iter()
            .enumerate()
            .map(|(i, mut core)| {
                let (region, stop) = (region.clone(), stop.clone());
                let (attempts, placed) = (attempts[i].clone(), placed[i].clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        // Between packets: commands first.
                        core.poll();
                        // One "segment": check, then place.
                        if let Ok(p) =
                            core.table()
                                .check_tagged(stag, 0, 64, StreamId(i as u64), Pd(1))
                        {
                            region.place(p.offset + 64 * i as u64, &[0xee; 64]).unwrap();
                            placed.fetch_add(1, Ordering::Relaxed);
                        }
                        attempts.fetch_add(1, Ordering::Release);
                    }
                })
            })
            .collect();
        // Let both cores place for a while (by count, not by time).
        while placed.iter().any(|p| p.load(Ordering::Relaxed) < 1000) {
            std::thread::yield_now();
        }
        coord.revoke(stag, Duration::from_secs(30)).unwrap();
        region.fill(0, 4096, 0).unwrap();
        let after: Vec<u64> = attempts.iter().map(|a| a.load(Ordering::Acquire)).collect();
        while attempts
            .iter()
            .zip(&after)
            .any(|(a, &b)| a.load(Ordering::Acquire) < b + 10_000)
        {
            std::thread::yield_now();
        }
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(
            region.crc32c(0, 4096).unwrap(),
            crate::wire::crc32c::crc32c(&[0; 4096])
        );
        assert_eq!(
            coord.revoke(stag, Duration::from_secs(1)),
            Err(RevokeError::Unknown)
        );
    }

    /// A core that never polls makes revoke time out, and says how many acknowledged.
    #[test]
    fn a_stalled_core_is_reported() {
        let (mut coord, mut replicas) = Coordinator::new(8, 1, 2, 4);
        let stag = coord.register(reg()).unwrap();
        let mut live = replicas.remove(0);
        // The live core turns until it has applied the invalidation (its first poll may find
        // only the registration).
        let t = std::thread::spawn(move || {
            while live.invalidations() == 0 {
                live.poll();
                std::thread::yield_now();
            }
            live
        });
        // Long enough for the live core to answer on a loaded machine; the stalled one never does.
        let r = coord.revoke(stag, Duration::from_secs(2));
        assert_eq!(r, Err(RevokeError::Timeout { acked: 1, cores: 2 }));
        let live = t.join().unwrap();
        assert!(live.table().lookup(stag).is_none());
        drop(replicas);
    }

    /// A caller that polls its data cores on its own thread revokes with them turning meanwhile
    /// (the plain revoke, which only waits, times out with those cores unpolled).
    #[test]
    fn a_revocation_can_turn_cores_polled_on_the_same_thread() {
        let (mut coord, mut replicas) = Coordinator::new(8, 1, 1, 4);
        let stag = coord.register(reg()).unwrap();
        let mut polls = 0;
        let r = coord.revoke_polling(stag, Duration::from_secs(5), &mut || {
            polls += 1;
            replicas[0].poll();
        });
        assert!(r.is_ok(), "{r:?}");
        assert!(polls >= 1);
        assert!(replicas[0].table().lookup(stag).is_none());
        let stag = coord.register(reg()).unwrap();
        assert_eq!(
            coord.revoke(stag, Duration::from_millis(50)),
            Err(RevokeError::Timeout { acked: 0, cores: 1 })
        );
    }

    /// The timeout bounds the whole revocation, not each acknowledgement: a core that keeps
    /// sending acknowledgements of an earlier epoch (late answers to a revocation that timed
    /// out, say) must not keep a stalled revocation waiting. The chatty core acknowledges an
    /// old epoch every 10 ms for 20 s; the revocation gives up after its 200 ms, while the
    /// chatter still runs (each stale acknowledgement used to restart the wait).
    #[test]
    fn one_deadline_bounds_the_whole_revocation() {
        let (mut coord, mut replicas) = Coordinator::new(8, 1, 2, 4);
        let stag = coord.register(reg()).unwrap();
        let chatty = replicas.remove(0);
        let acks = chatty.acks.clone();
        let chatting = Arc::new(AtomicBool::new(true));
        let flag = Arc::clone(&chatting);
        let t = std::thread::spawn(move || {
            for _ in 0..2000 {
                if !flag.load(Ordering::Relaxed) {
                    break;
                }
                let _ = acks.try_send((0, 0));
                std::thread::sleep(Duration::from_millis(10));
            }
            flag.store(false, Ordering::Relaxed);
        });
        let r = coord.revoke(stag, Duration::from_millis(200));
        let still_chatting = chatting.swap(false, Ordering::Relaxed);
        t.join().unwrap();
        assert_eq!(r, Err(RevokeError::Timeout { acked: 0, cores: 2 }));
        assert!(
            still_chatting,
            "the revocation waited until the stale acknowledgements stopped"
        );
        drop((chatty, replicas));
    }

    /// Revocations under way side by side, and a blocking one among them, share the one
    /// acknowledgement channel: each acknowledgement is credited to its own revocation, none
    /// is lost to another's wait, and each answers only once every core has acknowledged it.
    #[test]
    fn revocations_in_flight_keep_their_own_acknowledgements() {
        let (mut coord, mut replicas) = Coordinator::new(8, 1, 2, 4);
        let (a, b, c) = (
            coord.register(reg()).unwrap(),
            coord.register(reg()).unwrap(),
            coord.register(reg()).unwrap(),
        );
        for r in &mut replicas {
            r.poll();
        }
        let (_, ra) = coord.start_revoke(a, Duration::from_secs(5)).unwrap();
        let (_, rb) = coord.start_revoke(b, Duration::from_secs(5)).unwrap();
        assert_eq!(coord.revocation(ra), None, "no core has acknowledged");
        assert!(
            coord.master().lookup(a).is_none(),
            "the master forgot it at once"
        );
        replicas[0].poll();
        assert_eq!(coord.revocation(rb), None, "one core of two");
        // A blocking revocation turns both cores: it must leave a's and b's acknowledgements
        // to them.
        let r = coord.revoke_polling(c, Duration::from_secs(5), &mut || {
            for r in &mut replicas {
                r.poll();
            }
        });
        assert!(r.is_ok());
        assert_eq!(coord.revocation(rb), Some(Ok(())));
        assert_eq!(coord.revocation(ra), Some(Ok(())));
        assert_eq!(coord.revocations_in_flight(), 0);
        for r in &replicas {
            assert!([a, b, c].iter().all(|s| r.table().lookup(*s).is_none()));
        }
    }

    /// RFC 5041 §8.3.1 item 6: a revocation that timed out while a core's channel was full
    /// still reaches that core. Its invalidation used to be dropped with the timed-out
    /// revocation, and the stalled core, once it ran again, kept placing through the STag.
    #[test]
    fn a_late_revocation_still_reaches_a_stalled_core_8_3_1_item_6() {
        let (mut coord, mut replicas) = Coordinator::new(8, 1, 2, 2);
        // Core 1 stalls with its channel of 2 full.
        let a = coord.register(reg()).unwrap();
        let _b = coord.register(reg()).unwrap();
        replicas[0].poll();
        let (_, r) = coord.start_revoke(a, Duration::from_millis(10)).unwrap();
        replicas[0].poll();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(
            coord.revocation(r),
            Some(Err(RevokeError::Timeout { acked: 1, cores: 2 }))
        );
        // Core 1 runs again: it learns a, and finds its invalidation right behind it.
        replicas[1].poll();
        coord.tend();
        replicas[1].poll();
        assert!(replicas[1].table().lookup(a).is_none());
        coord.tend();
        assert_eq!(coord.revocations_in_flight(), 0, "forgotten once sent");
    }

    /// RFC 5041 §8.3.1 item 6 with RFC 5040 §5.3: the peer's Send with Invalidate names an
    /// STag whose Local Invalidate is under way. Its revocation joins that one and answers
    /// only once every core has acknowledged; it used to be Unknown, and the Send's
    /// completion went to the ULP while a core could still place through the STag.
    #[test]
    fn a_revocation_under_way_is_joined_8_3_1_item_6() {
        let (mut coord, mut replicas) = Coordinator::new(8, 1, 2, 4);
        let a = coord.register(reg()).unwrap();
        for r in &mut replicas {
            r.poll();
        }
        let (_, first) = coord.start_revoke(a, Duration::from_secs(5)).unwrap();
        let (reg_again, second) = coord.start_revoke(a, Duration::from_secs(5)).unwrap();
        assert_eq!(reg_again, reg());
        assert_eq!(coord.revocation(second), None);
        replicas[0].poll();
        assert_eq!(coord.revocation(second), None, "one core of two");
        replicas[1].poll();
        assert_eq!(coord.revocation(second), Some(Ok(())));
        assert_eq!(coord.revocation(first), Some(Ok(())));
        assert_eq!(coord.revocations_in_flight(), 0);
        assert_eq!(
            coord.start_revoke(a, Duration::from_secs(5)).err(),
            Some(RevokeError::Unknown),
            "once done, it is unknown again"
        );
    }

    /// A data core that never drains its channel cannot learn a registration: the
    /// registration fails and is withdrawn from the master, instead of leaving a core that
    /// would answer the peer's legitimate writes with Invalid STag.
    #[test]
    fn a_registration_no_core_can_miss() {
        let (mut coord, mut replicas) = Coordinator::new(64, 7, 2, 2);
        // Core 1 stalls: its channel of 2 fills and stays full.
        let a = coord.register(reg()).unwrap();
        let b = coord.register(reg()).unwrap();
        replicas[0].poll();
        let before = std::time::Instant::now();
        assert_eq!(coord.register(reg()), Err(RegisterError::CoreUnreachable));
        assert!(
            before.elapsed() >= REGISTER_WAIT,
            "it waited for room first"
        );
        assert_eq!(coord.master().len(), 2, "withdrawn from the master");
        // No peer was told the STag and the stalled core never had it: its region may be
        // freed at once (a refused `reg_mr` gives its slot back).
        assert!(!coord.revoking_region(reg().memory.region));
        // The live core was told, then told to forget: it knows a and b only.
        replicas[0].poll();
        assert_eq!(replicas[0].table().len(), 2);
        assert!(replicas[0].table().lookup(a).is_some() && replicas[0].table().lookup(b).is_some());
    }

    /// A revocation against stalled core 1 timed out: core 0 acknowledged if it was polled
    /// within the wait (a test thread descheduled longer, on a loaded machine, sees none),
    /// core 1 never.
    fn timed_out_without_core_1(r: &Result<Registration, RevokeError>) {
        assert!(
            matches!(
                r,
                Err(RevokeError::Timeout {
                    acked: 0 | 1,
                    cores: 2
                })
            ),
            "{r:?}"
        );
    }

    /// Registers `n` STags with core 0 polled and core 1 stalled: core 1's channel, of
    /// exactly `n`, is then full of their registrations.
    fn stall_core_1(n: usize) -> (Coordinator, Vec<CoreStags>, Vec<Stag>) {
        let (mut coord, mut replicas) = Coordinator::new(4 * n, 3, 2, n);
        let stags = (0..n)
            .map(|_| {
                let s = coord.register(reg()).unwrap();
                replicas[0].poll();
                s
            })
            .collect();
        (coord, replicas, stags)
    }

    /// RFC 5041 §8.3.1 item 6, bounded: revocations that time out against a stalled core
    /// leave nothing behind per revocation. Each used to stay in flight, holding its unsent
    /// invalidation until the core's channel had room: a list that grew with every
    /// revocation for as long as the core stayed stalled.
    #[test]
    fn revocations_against_a_stalled_core_keep_bounded_state_8_3_1_item_6() {
        let (mut coord, mut replicas, stags) = stall_core_1(64);
        for &stag in &stags {
            let r = coord.revoke_polling(stag, Duration::from_millis(2), &mut || {
                replicas[0].poll();
            });
            timed_out_without_core_1(&r);
            coord.tend();
            assert_eq!(coord.revocations_in_flight(), 0, "held per revocation");
        }
    }

    /// RFC 5041 §8.3.1 item 6: the region of a revocation answered late stays named until
    /// the stalled core has resynced past it (it may still copy queued sends out of the
    /// region), with one record a region however many revocations time out against it; a
    /// region no late revocation names is free at once.
    #[test]
    fn a_late_revocations_region_stays_named_until_the_stalled_core_resyncs_8_3_1_item_6() {
        let (mut coord, mut replicas, stags) = stall_core_1(16);
        for &stag in &stags {
            let r = coord.revoke_polling(stag, Duration::from_millis(2), &mut || {
                replicas[0].poll();
            });
            timed_out_without_core_1(&r);
            assert!(coord.revoking_region(reg().memory.region));
            assert_eq!(coord.late.len(), 1, "one record for the region");
        }
        assert!(!coord.revoking_region(reg().memory.region + 1));
        // Core 0's late acknowledgements free nothing: core 1 is the one that may reach it.
        replicas[0].poll();
        assert!(coord.revoking_region(reg().memory.region));
        replicas[1].poll();
        assert!(!coord.revoking_region(reg().memory.region));
        assert!(coord.late.is_empty());
    }

    /// A revocation still waiting names its region too, and stops once every core has
    /// acknowledged it.
    #[test]
    fn a_revocation_under_way_names_its_region() {
        let (mut coord, mut replicas) = Coordinator::new(8, 1, 2, 4);
        let a = coord.register(reg()).unwrap();
        for r in &mut replicas {
            r.poll();
        }
        let (_, r) = coord.start_revoke(a, Duration::from_secs(30)).unwrap();
        assert!(coord.revoking_region(reg().memory.region));
        for r in &mut replicas {
            r.poll();
        }
        assert!(!coord.revoking_region(reg().memory.region));
        assert_eq!(coord.revocation(r), Some(Ok(())));
    }

    /// RELIABILITY.md's case: a ULP that keeps registering while a core is stalled. Each
    /// registration is withdrawn after its wait; the withdrawal is forgotten once its own
    /// deadline passed, rather than kept until the stalled core's channel has room.
    #[test]
    fn registrations_while_a_core_is_stalled_keep_bounded_state_8_3_1_item_6() {
        let (mut coord, mut replicas, _) = stall_core_1(2);
        for _ in 0..3 {
            assert_eq!(coord.register(reg()), Err(RegisterError::CoreUnreachable));
            replicas[0].poll();
            coord.tend();
            assert!(
                coord.revocations_in_flight() <= 1,
                "{} withdrawals held",
                coord.revocations_in_flight()
            );
        }
    }

    /// RFC 5041 §8.3.1 item 6 once the stalled core runs again: on its first poll, before it
    /// places anything, it refuses every STag revoked while it was stalled, and still accepts
    /// the STags that stayed valid and those registered since. Only a few of the
    /// invalidations fit in its channel; the others used to wait in the coordinator for its
    /// next control turn while the woken core went on placing through them.
    #[test]
    fn a_woken_core_refuses_every_stag_revoked_while_it_was_stalled_8_3_1_item_6() {
        let (mut coord, mut replicas, stags) = stall_core_1(48);
        // Core 1 drains nothing; its channel holds the 48 registrations.
        let (revoked, kept) = stags.split_at(40);
        for &stag in revoked {
            let r = coord.revoke_polling(stag, Duration::from_millis(2), &mut || {
                replicas[0].poll();
            });
            timed_out_without_core_1(&r);
        }
        replicas[1].poll();
        let table = replicas[1].table();
        for &stag in revoked {
            assert!(
                table.check_tagged(stag, 0, 64, StreamId(0), Pd(1)).is_err(),
                "{stag} revoked while the core was stalled is still placed into"
            );
        }
        for &stag in kept {
            assert!(table.check_tagged(stag, 0, 64, StreamId(0), Pd(1)).is_ok());
        }
        assert_eq!(table.len(), kept.len());
        let fresh = coord.register(reg()).unwrap();
        replicas[1].poll();
        assert!(replicas[1]
            .table()
            .check_tagged(fresh, 0, 64, StreamId(0), Pd(1))
            .is_ok());
        assert!(replicas[1].invalidations() >= revoked.len() as u64);
    }

    /// The core has done what it must with a revoked registration before the coordinator
    /// hears its acknowledgement: the callback of `poll_revoking` runs first.
    #[test]
    fn a_revoked_registration_reaches_the_core_before_its_acknowledgement() {
        let (mut coord, mut replicas) = Coordinator::new(8, 1, 1, 4);
        let stag = coord.register(reg()).unwrap();
        replicas[0].poll();
        let (_, r) = coord.start_revoke(stag, Duration::from_secs(30)).unwrap();
        let mut seen = 0;
        replicas[0].poll_revoking(|_| {
            assert_eq!(
                coord.revocation(r),
                None,
                "acknowledged before the core was done"
            );
            seen += 1;
        });
        assert_eq!(seen, 1);
        assert_eq!(coord.revocation(r), Some(Ok(())));
    }

    /// What a core drops is handed to its caller (`poll_revoking`), by command and by the
    /// resync of a core whose channel was full alike: once per revoked registration, none for
    /// those that stay, so the core can copy queued sends out of the memory before it
    /// acknowledges (RFC 5041 §8.3.1).
    #[test]
    fn every_registration_a_core_drops_is_handed_to_its_caller() {
        let (mut coord, mut replicas, stags) = stall_core_1(48);
        let (revoked, _kept) = stags.split_at(40);
        let mut by_command = 0;
        for &stag in revoked {
            let r = coord.revoke_polling(stag, Duration::from_millis(2), &mut || {
                replicas[0].poll_revoking(|_| by_command += 1);
            });
            timed_out_without_core_1(&r);
        }
        assert_eq!(by_command, revoked.len());
        let mut dropped = 0;
        replicas[1].poll_revoking(|r| {
            assert_eq!(r.memory.region, reg().memory.region);
            dropped += 1;
        });
        assert_eq!(dropped, revoked.len(), "by command and by resync together");
        replicas[1].poll_revoking(|_| panic!("nothing more was revoked"));
    }

    /// RFC 5041 §8.3.1 item 6: a revocation still waiting when the stalled core runs again is
    /// done once that core has polled (its channel full all along): nothing else has to
    /// turn first.
    #[test]
    fn a_revocation_completes_when_the_stalled_core_polls_8_3_1_item_6() {
        let (mut coord, mut replicas, stags) = stall_core_1(4);
        let (_, r) = coord
            .start_revoke(stags[0], Duration::from_secs(30))
            .unwrap();
        replicas[0].poll();
        assert_eq!(coord.revocation(r), None, "core 1 has not run");
        replicas[1].poll();
        assert_eq!(coord.revocation(r), Some(Ok(())));
        assert!(replicas[1].table().lookup(stags[0]).is_none());
        assert_eq!(coord.revocations_in_flight(), 0);
    }

    /// RFC 5041 §8.3.1 item 6 (and §8.3 item 2) when an index's 8-bit key comes round while
    /// a core is stalled: the STag revoked then reused 256 times (each reuse withdrawn, the
    /// core unreachable) names the same index and key as the old one. The core wakes while
    /// the 256th registration waits for room in its channel; its resync used to compare
    /// index and key only, found the master's word naming that key again, and kept the OLD
    /// registration (other memory, other bounds) until its next poll: a tagged segment was
    /// placed under it meanwhile.
    #[test]
    fn a_woken_core_drops_a_registration_whose_key_came_round_8_3_1_item_6() {
        // Two STags, channels of one command: core 1 stalls with it full.
        let (mut coord, mut replicas) = Coordinator::new(2, 5, 2, 1);
        coord.register_wait = Duration::from_millis(1);
        let old = coord.register(reg()).unwrap();
        for r in &mut replicas {
            r.poll();
        }
        let _other = coord.register(reg()).unwrap();
        replicas[0].poll();
        // Revoked, its answer not asked for: core 1 is not known stalled yet (a revocation
        // answered late would make registrations give up on it at once), so the 256th
        // registration below waits for room in its channel while it wakes.
        let (_, _revocation) = coord.start_revoke(old, Duration::from_secs(30)).unwrap();
        replicas[0].poll();
        // 255 reuses of old's index, each withdrawn (core 1 cannot be told): each takes the
        // next key.
        for _ in 0..255 {
            assert_eq!(coord.register(reg()), Err(RegisterError::CoreUnreachable));
            replicas[0].poll();
            coord.tend();
        }
        // The 256th comes back to old's key; core 1 polls once the master holds it valid
        // and before its registration is in core 1's channel (there is no room yet).
        let valid = Arc::clone(&coord.valid);
        let mut core1 = replicas.pop().unwrap();
        let index = old.index() as usize;
        let t = std::thread::spawn(move || {
            while valid[index].load(Ordering::Acquire) == 0 {
                std::thread::yield_now();
            }
            core1.poll();
            let placed = core1
                .table()
                .check_tagged(old, 0, 64, StreamId(0), Pd(1))
                .ok();
            (placed, core1)
        });
        let fresh = Registration {
            len: 64,
            memory: RegionSlice {
                region: 9,
                offset: 8192,
            },
            ..reg()
        };
        coord.register_wait = Duration::from_secs(30);
        replicas[0].poll();
        let new = coord.register(fresh).unwrap();
        assert_eq!(new, old, "the key came round");
        let (placed, mut core1) = t.join().unwrap();
        assert!(
            placed.is_none_or(|p| p.region == 9),
            "a segment for {old} was placed under the revoked registration: {placed:?}"
        );
        core1.poll();
        assert_eq!(core1.table().lookup(new), Some(&fresh));
    }

    /// A core that stops for good (its replica dropped) while a revocation waits on it
    /// holds that revocation up no longer: it places nothing any more.
    #[test]
    fn a_core_gone_while_stalled_does_not_hold_a_revocation() {
        let (mut coord, mut replicas, stags) = stall_core_1(4);
        let (_, r) = coord
            .start_revoke(stags[0], Duration::from_secs(30))
            .unwrap();
        replicas[0].poll();
        assert_eq!(coord.revocation(r), None);
        drop(replicas.pop());
        assert_eq!(coord.revocation(r), Some(Ok(())));
    }
}
