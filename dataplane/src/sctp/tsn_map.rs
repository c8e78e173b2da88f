//! The receiver's record of DATA TSNs (RFC 9260 §6.2): the cumulative TSN ack point, which TSNs
//! above it arrived (for gap ack blocks) and which arrived twice (for the duplicate TSN list).
//!
//! Memory is fixed at creation: a ring bitmap of `window` bits above the cumulative point and a
//! short duplicate list. A TSN beyond the window is refused, never recorded: the sender will
//! retransmit it once the window has moved (RFC 9260 §6.2 lets a receiver drop DATA it has no
//! room for, as long as it does not acknowledge it).

use super::serial;
use crate::wire::sctp::GapAckBlock;

/// Duplicate TSNs remembered between two SACKs; more are counted but not listed.
pub const MAX_DUP_TSNS: usize = 16;

/// What [`TsnMap::insert`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    /// First arrival: deliver the chunk.
    New,
    /// At or below the cumulative point, or already recorded above it: do not deliver again;
    /// reported in the next SACK's duplicate list.
    Duplicate,
    /// Too far above the cumulative point to record: drop without acknowledging.
    OutOfWindow,
}

#[derive(Debug)]
pub struct TsnMap {
    /// The highest TSN received in sequence (the Cumulative TSN Ack of our SACKs).
    cum_tsn: u32,
    /// Highest TSN recorded, `cum_tsn` when nothing is above it.
    highest: u32,
    /// Bit `(base + d) % window` is TSN `cum_tsn + 1 + d`.
    bits: Box<[u64]>,
    base: usize,
    dups: [u32; MAX_DUP_TSNS],
    n_dups: usize,
}

impl TsnMap {
    /// A map whose first expected TSN is `initial_tsn` (the peer's Initial TSN, RFC 9260
    /// §5.1); `window` is rounded up to a power of two (ring indices are masks, not
    /// divisions, on the per-DATA path) between 64 and 32768, so gap ack offsets fit their 16
    /// bits.
    pub fn new(initial_tsn: u32, window: usize) -> Self {
        let words = window.clamp(64, 32768).next_power_of_two() / 64;
        TsnMap {
            cum_tsn: initial_tsn.wrapping_sub(1),
            highest: initial_tsn.wrapping_sub(1),
            bits: vec![0; words].into_boxed_slice(),
            base: 0,
            dups: [0; MAX_DUP_TSNS],
            n_dups: 0,
        }
    }

    /// TSNs the map can record above the cumulative point.
    pub fn window(&self) -> usize {
        self.bits.len() * 64
    }

    /// How far above the cumulative point the highest recorded TSN is.
    pub fn span(&self) -> usize {
        self.highest.wrapping_sub(self.cum_tsn) as usize
    }

    fn bit(&self, d: usize) -> bool {
        let i = (self.base + d) & (self.window() - 1);
        self.bits[i / 64] & (1 << (i % 64)) != 0
    }

    /// The first offset at or after `d` and before `end` whose bit is `on`; `end` if none.
    /// A word of the ring at a time: a SACK's gap blocks cost the words they span, not one
    /// test per TSN (a peer holding one TSN far ahead and sending duplicates had every packet
    /// SACKed at once, §6.7, each walking the window bit by bit).
    fn next_bit(&self, mut d: usize, on: bool, end: usize) -> usize {
        let mask = self.window() - 1;
        while d < end {
            let i = (self.base + d) & mask;
            let word = self.bits[i / 64];
            let word = if on { word } else { !word };
            let here = word >> (i % 64);
            if here != 0 {
                return (d + here.trailing_zeros() as usize).min(end);
            }
            d += 64 - i % 64;
        }
        end
    }

    /// One past the last offset below `d` whose bit is set; 0 if none. A word at a time, as
    /// [`next_bit`](Self::next_bit): a renege of the highest TSN (§6.2) walks back to the next
    /// recorded one, and a peer holding one TSN far ahead made each such walk cost the window.
    fn prev_set(&self, mut d: usize) -> usize {
        let mask = self.window() - 1;
        while d > 0 {
            let i = (self.base + d - 1) & mask;
            // Bits at and below `i` of its word: offsets `d - 1 - i % 64 ..= d - 1`, or fewer
            // if the walk would pass offset 0.
            let low = (i % 64).min(d - 1);
            let word = self.bits[i / 64] << (63 - i % 64);
            let word = word >> (63 - low) << (63 - low);
            if word != 0 {
                return d - word.leading_zeros() as usize;
            }
            d -= low + 1;
        }
        0
    }

    fn set(&mut self, d: usize, on: bool) {
        let i = (self.base + d) & (self.window() - 1);
        if on {
            self.bits[i / 64] |= 1 << (i % 64);
        } else {
            self.bits[i / 64] &= !(1 << (i % 64));
        }
    }

    pub fn cum_tsn(&self) -> u32 {
        self.cum_tsn
    }

    /// The highest TSN received (the cumulative point when nothing is above it).
    pub fn highest(&self) -> u32 {
        self.highest
    }

    /// Whether TSNs above the cumulative point have arrived (RFC 9260 §6.7: while gaps exist,
    /// every arriving DATA is SACKed at once).
    pub fn has_gaps(&self) -> bool {
        self.highest != self.cum_tsn
    }

    /// Records `tsn` if it is the next in sequence and nothing above the cumulative point has
    /// arrived, as [`insert`](Self::insert) would (`Insert::New`); false, and nothing
    /// recorded, otherwise. No bit is set above the point in that case, so the ring only turns.
    #[inline]
    pub fn insert_next(&mut self, tsn: u32) -> bool {
        if self.highest != self.cum_tsn || tsn != self.cum_tsn.wrapping_add(1) {
            return false;
        }
        self.base = (self.base + 1) & (self.window() - 1);
        self.cum_tsn = tsn;
        self.highest = tsn;
        true
    }

    /// Whether `tsn` was received already (at or below the cumulative TSN, or recorded above
    /// it): [`TsnMap::insert`] would call it a duplicate.
    pub fn received(&self, tsn: u32) -> bool {
        if serial::le(tsn, self.cum_tsn) {
            return true;
        }
        let d = tsn.wrapping_sub(self.cum_tsn).wrapping_sub(1) as usize;
        d < self.window() && self.bit(d)
    }

    /// Records `tsn`.
    pub fn insert(&mut self, tsn: u32) -> Insert {
        if serial::le(tsn, self.cum_tsn) {
            self.note_dup(tsn);
            return Insert::Duplicate;
        }
        let d = tsn.wrapping_sub(self.cum_tsn).wrapping_sub(1) as usize;
        if d >= self.window() {
            return Insert::OutOfWindow;
        }
        if self.bit(d) {
            self.note_dup(tsn);
            return Insert::Duplicate;
        }
        self.set(d, true);
        if serial::gt(tsn, self.highest) {
            self.highest = tsn;
        }
        // Move the cumulative point over every TSN now in sequence.
        while self.bit(0) {
            self.set(0, false);
            self.base = (self.base + 1) & (self.window() - 1);
            self.cum_tsn = self.cum_tsn.wrapping_add(1);
        }
        Insert::New
    }

    /// Forgets `tsn`, recorded above the cumulative point: the receiver reneges on it (RFC
    /// 9260 §6.2, a buffer full of data held for reordering), so the next SACK no longer
    /// reports it and the sender sends it again (§6.2.1 D iii). Returns whether it was
    /// recorded.
    pub fn renege(&mut self, tsn: u32) -> bool {
        if serial::le(tsn, self.cum_tsn) {
            return false;
        }
        let d = tsn.wrapping_sub(self.cum_tsn).wrapping_sub(1) as usize;
        if d >= self.window() || !self.bit(d) {
            return false;
        }
        self.set(d, false);
        if tsn == self.highest {
            // The highest is now the next recorded TSN below it, or the cumulative point.
            let e = self.prev_set(d);
            self.highest = self.cum_tsn.wrapping_add(e as u32);
        }
        true
    }

    fn note_dup(&mut self, tsn: u32) {
        if self.n_dups < MAX_DUP_TSNS {
            self.dups[self.n_dups] = tsn;
            self.n_dups += 1;
        }
    }

    /// The duplicates since the last [`TsnMap::clear_dups`].
    pub fn dups(&self) -> &[u32] {
        &self.dups[..self.n_dups]
    }

    pub fn clear_dups(&mut self) {
        self.n_dups = 0;
    }

    /// Writes the gap ack blocks (RFC 9260 §3.3.4: offsets from the cumulative TSN, in order)
    /// into `out` and returns how many; stops when `out` is full (the SACK then reports fewer
    /// blocks, which the sender reads as "not yet received", never as acknowledged).
    pub fn gap_blocks(&self, out: &mut [GapAckBlock]) -> usize {
        let span = self.highest.wrapping_sub(self.cum_tsn) as usize;
        let mut n = 0;
        let mut d = 0;
        while d < span && n < out.len() {
            let start = self.next_bit(d, true, span);
            if start >= span {
                break;
            }
            d = self.next_bit(start, false, span);
            // Offsets are 1-based (TSN cum+1 is offset 1); window <= 32768 keeps them in u16.
            out[n] = GapAckBlock {
                start: (start + 1) as u16,
                end: d as u16,
            };
            n += 1;
        }
        n
    }

    /// Memory held, for the per-association bound.
    pub fn heap_bytes(&self) -> usize {
        self.bits.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gap blocks as RFC 9260 §3.3.4 defines them, one TSN at a time.
    fn gap_blocks_by_tsn(m: &TsnMap) -> Vec<(u16, u16)> {
        let mut v: Vec<(u16, u16)> = Vec::new();
        for d in 0..m.span() {
            if !m.received(m.cum_tsn().wrapping_add(1 + d as u32)) {
                continue;
            }
            match v.last_mut() {
                Some(b) if usize::from(b.1) == d => b.1 += 1,
                _ => v.push(((d + 1) as u16, (d + 1) as u16)),
            }
        }
        v
    }

    proptest::proptest! {
        /// RFC 9260 §3.3.4: the gap blocks found a word at a time are those found one TSN at
        /// a time, wherever the ring's base stands (it wraps) and however the TSNs came.
        #[test]
        fn gap_blocks_found_a_word_at_a_time_are_the_rfcs(
            initial in proptest::prelude::any::<u32>(),
            turns in 0usize..300,
            tsns in proptest::collection::vec(0u32..600, 0..200),
        ) {
            let mut m = TsnMap::new(initial, 512);
            // Move the base round the ring first.
            for k in 0..turns as u32 {
                assert!(m.insert_next(initial.wrapping_add(k)));
            }
            let from = initial.wrapping_add(turns as u32);
            for t in tsns {
                let _ = m.insert(from.wrapping_add(t));
            }
            let mut out = [GapAckBlock { start: 0, end: 0 }; 600];
            let n = m.gap_blocks(&mut out);
            let got: Vec<(u16, u16)> = out[..n].iter().map(|b| (b.start, b.end)).collect();
            proptest::prop_assert_eq!(got, gap_blocks_by_tsn(&m));
        }
    }

    proptest::proptest! {
        /// RFC 9260 §6.2: after a renege the highest TSN is the highest still recorded above the
        /// cumulative point (found a word at a time), or that point when none is, wherever
        /// the ring's base stands; the gap blocks stay the per-TSN definition's.
        #[test]
        fn the_highest_after_a_renege_is_the_highest_still_recorded_6_2(
            initial in proptest::prelude::any::<u32>(),
            window_log in 6u32..12,
            turns in 0usize..3000,
            tsns in proptest::collection::vec(0u32..4096, 0..200),
            reneges in proptest::collection::vec(0u32..4096, 0..60),
        ) {
            let window = 1usize << window_log;
            let mut m = TsnMap::new(initial, window);
            for k in 0..turns as u32 {
                assert!(m.insert_next(initial.wrapping_add(k)));
            }
            let from = initial.wrapping_add(turns as u32);
            for t in tsns {
                let _ = m.insert(from.wrapping_add(t % window as u32));
            }
            for r in reneges {
                // Mostly the highest, the case that walks back; sometimes another.
                let tsn = if r % 3 == 0 { from.wrapping_add(r) } else { m.highest() };
                let _ = m.renege(tsn);
                let cum = m.cum_tsn();
                let highest_by_tsn = (1..=m.window() as u32)
                    .rev()
                    .map(|k| cum.wrapping_add(k))
                    .find(|&t| m.received(t))
                    .unwrap_or(cum);
                proptest::prop_assert_eq!(m.highest(), highest_by_tsn);
            }
            let mut out = [GapAckBlock { start: 0, end: 0 }; 2048];
            let n = m.gap_blocks(&mut out);
            let got: Vec<(u16, u16)> = out[..n].iter().map(|b| (b.start, b.end)).collect();
            proptest::prop_assert_eq!(got, gap_blocks_by_tsn(&m));
        }
    }

    /// RFC 9260 §6.2: a TSN reneged on is reported no more, the highest falls back to the
    /// next recorded one, and it is new again when it comes back.
    #[test]
    fn a_reneged_tsn_is_forgotten_6_2() {
        let mut m = TsnMap::new(100, 64);
        for tsn in [102, 103, 106] {
            assert_eq!(m.insert(tsn), Insert::New);
        }
        assert!(m.renege(106));
        assert_eq!(m.highest(), 103);
        assert_eq!(blocks(&m), [(3, 4)]);
        assert!(m.renege(103) && m.renege(102));
        assert_eq!(m.highest(), 99);
        assert!(!m.has_gaps());
        assert!(!m.renege(102), "not recorded");
        assert!(
            !m.renege(99),
            "at the cumulative point: delivered, never reneged"
        );
        assert_eq!(m.insert(102), Insert::New);
        assert_eq!(m.insert(100), Insert::New);
        assert_eq!(m.insert(101), Insert::New);
        assert_eq!(m.cum_tsn(), 102);
    }

    fn blocks(m: &TsnMap) -> Vec<(u16, u16)> {
        let mut out = [GapAckBlock { start: 0, end: 0 }; 8];
        let n = m.gap_blocks(&mut out);
        out[..n].iter().map(|b| (b.start, b.end)).collect()
    }

    /// RFC 9260 §3.3.4's own example: received 1..=2 (cum 2), then 4, 5, 7, and 2 twice.
    #[test]
    fn rfc_9260_3_3_4_example() {
        let mut m = TsnMap::new(1, 256);
        assert_eq!(m.insert(1), Insert::New);
        assert_eq!(m.insert(2), Insert::New);
        assert_eq!(m.insert(4), Insert::New);
        assert_eq!(m.insert(5), Insert::New);
        assert_eq!(m.insert(7), Insert::New);
        assert_eq!(m.insert(2), Insert::Duplicate);
        assert_eq!(m.cum_tsn(), 2);
        assert_eq!(blocks(&m), vec![(2, 3), (5, 5)]);
        assert_eq!(m.dups(), &[2]);
        assert!(m.has_gaps());
        assert_eq!(m.insert(3), Insert::New);
        assert_eq!(m.cum_tsn(), 5);
        assert_eq!(blocks(&m), vec![(2, 2)]);
        assert_eq!(m.insert(6), Insert::New);
        assert_eq!(m.cum_tsn(), 7);
        assert!(!m.has_gaps());
        assert!(blocks(&m).is_empty());
    }

    #[test]
    fn wraps_tsn_and_ring() {
        let mut m = TsnMap::new(u32::MAX - 100, 64);
        for i in 0..1000u32 {
            assert_eq!(m.insert((u32::MAX - 100).wrapping_add(i)), Insert::New);
        }
        assert_eq!(m.cum_tsn(), (u32::MAX - 100).wrapping_add(999));
    }

    #[test]
    fn refuses_beyond_window_without_recording() {
        let mut m = TsnMap::new(10, 64);
        assert_eq!(m.insert(10 + 64), Insert::OutOfWindow);
        assert_eq!(m.insert(10 + 63), Insert::New);
        assert!(m.has_gaps());
        assert_eq!(m.cum_tsn(), 9);
    }

    #[test]
    fn duplicate_list_is_bounded() {
        let mut m = TsnMap::new(1, 64);
        m.insert(1);
        for _ in 0..40 {
            assert_eq!(m.insert(1), Insert::Duplicate);
        }
        assert_eq!(m.dups().len(), MAX_DUP_TSNS);
        m.clear_dups();
        assert!(m.dups().is_empty());
    }
}
