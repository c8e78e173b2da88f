//! Reassembly of fragmented user messages (RFC 9260 §6.9). DDP over SCTP avoids SCTP
//! fragmentation, but RFC 5043 §9 forbids it only "unless the alternative is IP
//! fragmentation": a peer on a path with a smaller MTU than the segment it must send may
//! split a DDP segment into DATA fragments, and the receiver takes them. Fragments are rare,
//! so this is simple rather than fast: each held fragment is its own buffer.
//!
//! Unordered fragments of one message carry consecutive TSNs, B on the first and E on the
//! last (§6.9; the SSN means nothing for unordered data). A fragment is acknowledged when it
//! arrives; one that can still complete is dropped only to make way for a lower TSN when the
//! reassembly is full (§6.2, [`Reassembly::drop_highest_above`]: the association reneges on it and
//! the peer resends it), so the fragment completing the lowest message always fits; what a
//! fragment may hold is judged
//! before its TSN is taken ([`Reassembly::admits`]): at most [`MAX_FRAGMENTS`] fragments and a
//! byte budget (the association's a_rwnd) whatever the fragment's TSN, and no fragment but a
//! message's last below [`MIN_FRAGMENT`] bytes (a peer fragments at its path MTU; the association
//! aborts on such a fragment before it gets here, saying why). A refused fragment is dropped
//! unacknowledged, as DATA beyond the window is (§6.2). The association
//! advertises its room less [`Reassembly::held`]. Runs that can no longer complete (a TSN
//! they need arrived as something else) are dropped as the cumulative TSN passes them
//! ([`Reassembly::purge`]): a broken or hostile peer cannot pin the window.

use super::serial;

/// One fragment waiting for the rest of its message.
#[derive(Debug)]
struct Fragment {
    tsn: u32,
    stream: u16,
    ppid: u32,
    first: bool,
    last: bool,
    data: Vec<u8>,
}

/// A message put together: its stream, PPID and first TSN; the bytes are
/// [`Reassembly::message`] until the next insertion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Whole {
    pub stream: u16,
    pub ppid: u32,
    pub tsn: u32,
}

/// Fragments held at once, across the association's incomplete messages: enough for a few
/// jumbo DDP segments split at a 1280-byte path, and a bound on the work per fragment.
pub(super) const MAX_FRAGMENTS: usize = 64;
/// The smallest fragment but a message's last: a path MTU of 576 bytes still carries this.
pub(super) const MIN_FRAGMENT: usize = 256;

/// The fragments of an association's incomplete messages, in TSN order.
#[derive(Debug, Default)]
pub(super) struct Reassembly {
    frags: Vec<Fragment>,
    held: usize,
    message: Vec<u8>,
}

impl Reassembly {
    /// User data bytes held in fragments of incomplete messages.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Heap bytes this holds: the fragments, their buffers and the last message put together.
    pub fn heap_bytes(&self) -> usize {
        self.frags.capacity() * core::mem::size_of::<Fragment>()
            + self.frags.iter().map(|f| f.data.capacity()).sum::<usize>()
            + self.message.capacity()
    }

    /// The most [`heap_bytes`](Self::heap_bytes) can reach with a byte budget of `budget`
    /// ([`admits`](Self::admits)): the fragment table at its [`MAX_FRAGMENTS`], fragments
    /// holding the budget, and the last message put together (its fragments were all held at
    /// once, so it is within the budget too). Reassembly is the one part of an association's
    /// memory that moves with peer input; this is its bound.
    pub fn max_heap_bytes(budget: usize) -> usize {
        MAX_FRAGMENTS.next_power_of_two() * core::mem::size_of::<Fragment>() + 2 * budget
    }

    /// Forgets everything (a new incarnation of the peer, a new TSN space).
    pub fn clear(&mut self) {
        self.frags.clear();
        self.held = 0;
    }

    /// The last message [`Reassembly::insert`] completed.
    pub fn message(&self) -> &[u8] {
        &self.message
    }

    /// Whether a new fragment of `len` bytes may be held, `last` if it carries E, with at most
    /// `budget` bytes held in all.
    pub fn admits(&self, len: usize, last: bool, budget: usize) -> bool {
        self.frags.len() < MAX_FRAGMENTS
            && self.held + len <= budget
            && (last || len >= MIN_FRAGMENT)
    }

    /// Whether [`admits`](Self::admits) would take the fragment once every fragment above
    /// `tsn` were dropped: so that none is dropped for a fragment that would not fit anyway.
    pub fn admits_without_above(&self, tsn: u32, len: usize, last: bool, budget: usize) -> bool {
        let above = self
            .frags
            .iter()
            .rev()
            .take_while(|f| serial::gt(f.tsn, tsn));
        let (n, bytes) = above.fold((0, 0), |(n, b), f| (n + 1, b + f.data.len()));
        self.frags.len() - n < MAX_FRAGMENTS
            && self.held - bytes + len <= budget
            && (last || len >= MIN_FRAGMENT)
    }

    /// Drops the highest fragment held if its TSN is above `tsn` (RFC 9260 §6.2: a receiver
    /// out of buffer drops the largest TSN held for reordering to take a lower one); returns
    /// its TSN.
    pub fn drop_highest_above(&mut self, tsn: u32) -> Option<u32> {
        if !serial::gt(self.frags.last()?.tsn, tsn) {
            return None;
        }
        let f = self.frags.pop()?;
        self.held -= f.data.len();
        Some(f.tsn)
    }

    /// Drops the runs that can no longer complete, now that every TSN up to `cum` has arrived:
    /// one without its B fragment whose previous TSN is at or below `cum` (it came as
    /// something else), or without its E fragment whose next TSN is. Returns the fragments
    /// dropped.
    pub fn purge(&mut self, cum: u32) -> usize {
        if self.frags.is_empty() {
            return 0;
        }
        let before = self.frags.len();
        // One bit a fragment (at most MAX_FRAGMENTS of them), set when it is dropped: no
        // allocation on a path a peer's packets reach.
        const _: () = assert!(MAX_FRAGMENTS <= 64);
        let mut dropped = 0u64;
        let mut start = 0;
        while start < before {
            let mut end = start;
            while end + 1 < before && follows(&self.frags[end], &self.frags[end + 1]) {
                end += 1;
            }
            let (first, last) = (&self.frags[start], &self.frags[end]);
            let dead = (!first.first && serial::le(first.tsn.wrapping_sub(1), cum))
                || (!last.last && serial::le(last.tsn.wrapping_add(1), cum));
            if dead {
                // Bits start..=end (end < 64).
                dropped |= (u64::MAX >> (63 - end)) & (u64::MAX << start);
            }
            start = end + 1;
        }
        let mut k = 0;
        let held = &mut self.held;
        self.frags.retain(|f| {
            let kept = dropped & (1 << k) == 0;
            k += 1;
            if !kept {
                *held -= f.data.len();
            }
            kept
        });
        before - self.frags.len()
    }

    /// Takes a new fragment (its TSN not seen before: the TSN map said so). Returns the
    /// message it completes, if any; its bytes are then in [`Reassembly::message`].
    pub fn insert(
        &mut self,
        tsn: u32,
        stream: u16,
        ppid: u32,
        first: bool,
        last: bool,
        data: &[u8],
    ) -> Option<Whole> {
        let at = self.frags.partition_point(|f| serial::lt(f.tsn, tsn));
        self.frags.insert(
            at,
            Fragment {
                tsn,
                stream,
                ppid,
                first,
                last,
                data: data.to_vec(),
            },
        );
        self.held += data.len();
        // The run of consecutive TSNs on one stream around the new fragment, from a B
        // fragment to an E fragment with neither in between.
        let mut start = at;
        while !self.frags[start].first {
            if start == 0 || !follows(&self.frags[start - 1], &self.frags[start]) {
                return None;
            }
            start -= 1;
        }
        let mut end = at;
        while !self.frags[end].last {
            if end + 1 == self.frags.len() || !follows(&self.frags[end], &self.frags[end + 1]) {
                return None;
            }
            end += 1;
        }
        // The first fragment's PPID and TSN stand for the message (§6.9: each fragment
        // carries the message's PPID).
        let whole = Whole {
            stream,
            ppid: self.frags[start].ppid,
            tsn: self.frags[start].tsn,
        };
        self.message.clear();
        for f in self.frags.drain(start..=end) {
            self.held -= f.data.len();
            self.message.extend_from_slice(&f.data);
        }
        Some(whole)
    }
}

/// Whether `b` continues `a`'s message: the next TSN, the same stream, no boundary between.
fn follows(a: &Fragment, b: &Fragment) -> bool {
    b.tsn == a.tsn.wrapping_add(1) && a.stream == b.stream && !a.last && !b.first
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9260 §6.9 lets a receiver bound what it holds for reassembly; ours holds at most
    /// its budget, and its memory stays under `max_heap_bytes` however a peer fragments
    /// (the sctp_assoc fuzz target found the memory moving, and now checks this bound).
    #[test]
    fn reassembly_memory_is_bounded_by_its_budget_6_9() {
        let budget = 4096;
        let mut r = Reassembly::default();
        let mut tsn = 0u32;
        for round in 0..50usize {
            // Runs that never complete, of every fragment size the rules admit, then one that
            // completes as large as the budget allows.
            for len in [MIN_FRAGMENT, 300, 1000, MIN_FRAGMENT + round] {
                if r.admits(len, false, budget) {
                    tsn += 2;
                    r.insert(tsn, 1, 16, tsn.is_multiple_of(4), false, &vec![1; len]);
                }
                assert!(r.held() <= budget);
                assert!(r.heap_bytes() <= Reassembly::max_heap_bytes(budget));
            }
            r.purge(tsn);
            let room = budget - r.held();
            if room >= 2 * MIN_FRAGMENT && r.admits(room - MIN_FRAGMENT, false, budget) {
                tsn += 10;
                r.insert(tsn, 2, 16, true, false, &vec![2; room - MIN_FRAGMENT]);
                assert!(r.admits(MIN_FRAGMENT, true, budget));
                assert!(r
                    .insert(tsn + 1, 2, 16, false, true, &vec![3; MIN_FRAGMENT])
                    .is_some());
            }
            assert!(r.heap_bytes() <= Reassembly::max_heap_bytes(budget));
        }
        assert!(r.heap_bytes() > 0, "the test did reassemble");
    }

    #[test]
    fn fragments_in_any_order_make_one_message_6_9() {
        let mut r = Reassembly::default();
        // TSNs 10 (B), 11, 12 (E) arrive 12, 10, 11; 20 (B) waits for its E.
        assert_eq!(r.insert(12, 1, 16, false, true, b"cc"), None);
        assert_eq!(r.insert(20, 1, 16, true, false, b"x"), None);
        assert_eq!(r.insert(10, 1, 16, true, false, b"aa"), None);
        assert_eq!(r.held(), 5);
        let w = r.insert(11, 1, 16, false, false, b"bb");
        assert_eq!(
            w,
            Some(Whole {
                stream: 1,
                ppid: 16,
                tsn: 10
            })
        );
        assert_eq!(r.message(), b"aabbcc");
        assert_eq!(r.held(), 1, "the other message's fragment stays");
    }

    #[test]
    fn a_run_needs_one_stream_and_no_inner_boundary_6_9() {
        let mut r = Reassembly::default();
        // Another stream in the middle, or a B fragment inside the run, never completes.
        assert_eq!(r.insert(1, 1, 16, true, false, b"a"), None);
        assert_eq!(r.insert(2, 2, 16, false, false, b"b"), None);
        assert_eq!(r.insert(3, 1, 16, false, true, b"c"), None);
        assert_eq!(r.insert(5, 1, 16, true, false, b"d"), None);
        assert_eq!(r.insert(6, 1, 16, true, false, b"e"), None);
        assert_eq!(
            r.insert(7, 1, 16, false, true, b"f"),
            Some(Whole {
                stream: 1,
                ppid: 16,
                tsn: 6
            })
        );
        assert_eq!(r.message(), b"ef");
        assert_eq!(r.held(), 4);
        r.clear();
        assert_eq!(r.held(), 0);
    }

    #[test]
    fn limits_are_judged_before_a_fragment_is_taken() {
        let mut r = Reassembly::default();
        assert!(!r.admits(100, false, 1 << 20), "a small middle fragment");
        assert!(r.admits(100, true, 1 << 20), "a small last fragment");
        assert!(!r.admits(2000, false, 1500), "over the byte budget");
        for k in 0..MAX_FRAGMENTS as u32 {
            assert!(r.admits(300, false, 1 << 20));
            assert_eq!(r.insert(1000 + 2 * k, 0, 16, true, false, &[0; 300]), None);
        }
        assert!(!r.admits(300, true, 1 << 20), "the fragment count");
    }

    #[test]
    fn runs_that_cannot_complete_are_purged_as_the_cumulative_tsn_passes() {
        let mut r = Reassembly::default();
        // 10 (B) waits for 11; 21 (E) waits for 20; 30 (B) and 31 wait for 32.
        assert_eq!(r.insert(10, 0, 16, true, false, b"a"), None);
        assert_eq!(r.insert(21, 0, 16, false, true, b"b"), None);
        assert_eq!(r.insert(30, 0, 16, true, false, b"c"), None);
        assert_eq!(r.insert(31, 0, 16, false, false, b"d"), None);
        assert_eq!(r.purge(10), 0, "11 may still come");
        // 11 came as a whole message: 10's run is dead. 20 and 32 not yet.
        assert_eq!(r.purge(11), 1);
        assert_eq!(r.purge(19), 0, "20 may still be 21's B");
        assert_eq!(r.purge(20), 1, "20 came as something else");
        assert_eq!(r.purge(31), 0, "32 may still be the E");
        assert_eq!(r.purge(32), 2);
        assert_eq!(r.held(), 0);
    }

    #[test]
    fn tsns_wrap_6_9() {
        let mut r = Reassembly::default();
        assert_eq!(r.insert(0, 0, 16, false, true, b"2"), None);
        let w = r.insert(u32::MAX, 0, 16, true, false, b"1");
        assert_eq!(w.map(|w| w.tsn), Some(u32::MAX));
        assert_eq!(r.message(), b"12");
    }
}
