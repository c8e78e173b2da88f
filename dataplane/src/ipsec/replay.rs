//! The anti-replay window of an inbound SA (RFC 4303 §3.4.3, Appendix A).
//!
//! DPDK's `rte_ipsec` keeps a window too, but in 22.11 (and on its main branch as of this
//! writing) `esn_inb_update_sqn` stores the bit of a sequence number in a 32-bit variable
//! before or-ing it into a 64-bit bucket, so sequence numbers whose low six bits are 32-63 are
//! never recorded: half of all replays inside the window pass. This window is the one that
//! decides; rte_ipsec's still runs and can only refuse more, never less.

/// The widest window an SA may ask for: rte_ipsec, whose window still runs beside ours,
/// keeps at most 32 768 buckets of 64 (`WINDOW_BUCKET_MAX` in DPDK's `lib/ipsec/sa.h`).
pub const MAX_REPLAY_WINDOW: u64 = 1 << 21;

/// Received sequence numbers from `top - size + 1` to `top`, one bit each.
#[derive(Debug, Clone)]
pub struct ReplayWindow {
    /// Packets the window spans: a power of two, at least 64.
    size: u64,
    /// The highest sequence number accepted (0: none yet; 0 itself is never valid).
    top: u64,
    /// Bit `s % size` for sequence number `s`.
    bits: Vec<u64>,
}

impl ReplayWindow {
    /// The packets a window asked for `size` spans: a power of two, at least 64.
    pub fn width(size: u32) -> u64 {
        u64::from(size.max(64)).next_power_of_two()
    }

    /// A window of at least `size` packets.
    pub fn new(size: u32) -> ReplayWindow {
        let size = ReplayWindow::width(size);
        ReplayWindow {
            size,
            top: 0,
            bits: vec![0; (size / 64) as usize],
        }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// The highest sequence number accepted so far.
    pub fn top(&self) -> u64 {
        self.top
    }

    /// The full 64-bit sequence number of a packet carrying `low` under ESN (RFC 4303
    /// Appendix A2.2): the high half that puts it in or right of the window. Integrity then
    /// tells whether the guess was right.
    pub fn infer_esn(&self, low: u32) -> u64 {
        let w = self.size.min(1 << 31) as u32;
        let tl = self.top as u32;
        let th = (self.top >> 32) as u32;
        let bottom = tl.wrapping_sub(w).wrapping_add(1);
        let high = if tl >= w - 1 {
            // Case A: the window lies within one 2^32 subspace.
            if low >= bottom {
                th
            } else {
                th.wrapping_add(1)
            }
        } else if low >= bottom && th > 0 {
            // Case B: the window spans two subspaces and `low` is in the lower one. In the
            // first subspace there is none below: such a `low` lies right of the window in
            // this one (as rte_ipsec's reconstruct_esn has it).
            th - 1
        } else {
            th
        };
        (u64::from(high) << 32) | u64::from(low)
    }

    fn bit(&self, seq: u64) -> (usize, u64) {
        let i = seq & (self.size - 1);
        ((i / 64) as usize, 1 << (i % 64))
    }

    /// Forgets the `n` (less than the window) sequence numbers from `from` on, the ones a new
    /// highest slides past: a 64-bit word at a time, as RFC 6479 §2 clears its blocks, with
    /// a mask at each end. One bit at a time, a peer stepping its (authenticated) sequence
    /// number by 2^21 - 1 cost the data core 2 million operations a packet at the widest
    /// window (RFC 4303 §3.4.3 leaves the window's bookkeeping to the receiver).
    fn clear(&mut self, from: u64, mut n: u64) {
        let mut at = from & (self.size - 1);
        while n > 0 {
            let (word, offset) = ((at / 64) as usize, at % 64);
            let take = n.min(64 - offset);
            let mask = if take == 64 {
                u64::MAX
            } else {
                ((1u64 << take) - 1) << offset
            };
            self.bits[word] &= !mask;
            // The window is a ring: past its last word, on from its first.
            at = (at + take) & (self.size - 1);
            n -= take;
        }
    }

    /// Whether `seq` may be new: right of the window, or inside it and not yet seen
    /// (RFC 4303 §3.4.3). Checked before the ICV, to spend no crypto on replays.
    pub fn check(&self, seq: u64) -> bool {
        if seq == 0 {
            return false;
        }
        if seq > self.top {
            return true;
        }
        if seq.saturating_add(self.size) <= self.top {
            return false;
        }
        let (w, b) = self.bit(seq);
        self.bits[w] & b == 0
    }

    /// Records `seq`, whose ICV verified, sliding the window if it is the new highest; false
    /// if it had been seen after all (and nothing changes).
    pub fn accept(&mut self, seq: u64) -> bool {
        if !self.check(seq) {
            return false;
        }
        if seq > self.top {
            let gap = seq - self.top;
            if gap >= self.size {
                self.bits.fill(0);
            } else {
                self.clear(self.top + 1, gap - 1);
            }
            self.top = seq;
        }
        let (w, b) = self.bit(seq);
        self.bits[w] |= b;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4303 §3.4.3: each sequence number is taken once; every bit position of a 64-bit
    /// word counts (the positions 32-63 that rte_ipsec 22.11 drops).
    #[test]
    fn every_number_in_the_window_is_taken_once_4303_3_4_3() {
        let mut w = ReplayWindow::new(64);
        for s in 1..=200u64 {
            assert!(w.accept(s), "{s} is new");
            assert!(!w.accept(s), "{s} again");
            // Everything still inside the window has been seen.
            for old in s.saturating_sub(63).max(1)..=s {
                assert!(!w.check(old), "{old} replayed after {s}");
            }
        }
    }

    #[test]
    fn out_of_order_inside_the_window_is_taken_and_left_of_it_is_not() {
        let mut w = ReplayWindow::new(64);
        assert!(w.accept(100));
        assert!(w.accept(40), "inside the window, unseen");
        assert!(!w.accept(40));
        assert!(!w.check(36), "left of the window (100 - 64)");
        assert!(w.check(37));
        assert!(
            !w.check(0),
            "sequence number 0 is never sent (RFC 4303 §3.3.3)"
        );
        // A jump larger than the window forgets everything below it.
        assert!(w.accept(1000));
        assert!(w.check(999) && !w.check(936) && w.check(937));
    }

    #[test]
    fn sizes_round_up_to_powers_of_two() {
        assert_eq!(ReplayWindow::new(0).size(), 64);
        assert_eq!(ReplayWindow::new(100).size(), 128);
        assert_eq!(ReplayWindow::new(1024).size(), 1024);
    }

    /// RFC 4303 Appendix A2.2, both cases and both answers of each.
    #[test]
    fn esn_high_bits_are_inferred_as_appendix_a2_2_says() {
        let mut w = ReplayWindow::new(64);
        // Case A, Tl >= W - 1.
        w.accept((5 << 32) | 1000);
        assert_eq!(w.infer_esn(990), (5 << 32) | 990);
        assert_eq!(w.infer_esn(2000), (5 << 32) | 2000);
        assert_eq!(
            w.infer_esn(10),
            (6 << 32) | 10,
            "below the window: the next subspace"
        );
        // Case B, Tl < W - 1: the window reaches into the previous subspace.
        let mut w = ReplayWindow::new(64);
        w.accept((7 << 32) | 10);
        assert_eq!(
            w.infer_esn(u32::MAX - 5),
            (6 << 32) | u64::from(u32::MAX - 5)
        );
        assert_eq!(w.infer_esn(5), (7 << 32) | 5);
        assert_eq!(w.infer_esn(500), (7 << 32) | 500);
    }

    /// Appendix A2.2's case B in the first 2^32 subspace: there is no subspace below it, so a
    /// `low` above the window's wrapped bottom is a packet right of the window, high half 0
    /// (it had high half 2^32 - 1: the window then jumped to the end of the 64-bit space, and
    /// every later packet was a replay). Found by an independent review.
    #[test]
    fn case_b_in_the_first_subspace_stays_in_it_4303_a2_2() {
        let mut w = ReplayWindow::new(64);
        assert!(w.accept(10));
        assert_eq!(w.infer_esn(u32::MAX), u64::from(u32::MAX));
        assert_eq!(w.infer_esn(u32::MAX - 60), u64::from(u32::MAX - 60));
        assert_eq!(w.infer_esn(5), 5);
        // Before any packet at all (top 0).
        assert_eq!(
            ReplayWindow::new(64).infer_esn(u32::MAX),
            u64::from(u32::MAX)
        );
    }

    /// Sequence numbers near 2^64 are checked without overflow (a panic in a debug build).
    #[test]
    fn the_window_holds_at_the_end_of_the_64_bit_space() {
        let mut w = ReplayWindow::new(64);
        assert!(w.accept(u64::MAX - 1));
        assert!(!w.check(u64::MAX - 1), "seen");
        assert!(w.check(u64::MAX - 10), "inside, unseen");
        assert!(w.check(u64::MAX - 64), "its lowest");
        assert!(!w.check(u64::MAX - 65), "left of it");
        assert!(w.accept(u64::MAX));
    }

    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// The rule `accept` had: clear each bit skipped, one at a time.
    fn accept_bit_by_bit(w: &mut ReplayWindow, seq: u64) -> bool {
        if !w.check(seq) {
            return false;
        }
        if seq > w.top {
            if seq - w.top >= w.size {
                w.bits.fill(0);
            } else {
                for s in w.top + 1..seq {
                    let (i, b) = w.bit(s);
                    w.bits[i] &= !b;
                }
            }
            w.top = seq;
        }
        let (i, b) = w.bit(seq);
        w.bits[i] |= b;
        true
    }

    /// Clearing a word at a time forgets exactly the bits that clearing one at a time did:
    /// from every position of a 128-packet window (both words, and across the ring's end),
    /// every step forward, on a window full of seen numbers. RFC 4303 §3.4.3.
    #[test]
    fn sliding_by_words_forgets_what_sliding_by_bits_did_4303_3_4_3() {
        for top in 128..384u64 {
            for step in 1..=130u64 {
                let mut full = ReplayWindow::new(128);
                full.top = top;
                full.bits.fill(u64::MAX);
                let mut by_bits = full.clone();
                assert_eq!(
                    full.accept(top + step),
                    accept_bit_by_bit(&mut by_bits, top + step)
                );
                assert_eq!(full.bits, by_bits.bits, "top {top} step {step}");
                assert_eq!(full.top, by_bits.top);
            }
        }
    }

    proptest! {
        /// The same against random arrivals, at every width up to the widest rte_ipsec keeps.
        #[test]
        fn sliding_by_words_matches_sliding_by_bits_4303_3_4_3(
            size in prop::sample::select(vec![64u32, 128, 256, 4096]),
            start in 1u64..(1 << 40),
            steps in prop::collection::vec(
                prop_oneof![4 => -300i64..300, 1 => -5000i64..5000],
                1..200,
            ),
        ) {
            let mut w = ReplayWindow::new(size);
            let mut by_bits = w.clone();
            let mut top = start;
            for (k, d) in steps.into_iter().enumerate() {
                let seq = if k == 0 { start } else { top.saturating_add_signed(d) };
                prop_assert_eq!(w.accept(seq), accept_bit_by_bit(&mut by_bits, seq));
                prop_assert_eq!(&w.bits, &by_bits.bits);
                top = w.top().max(1);
            }
        }
    }

    proptest! {
        /// RFC 4303 §3.4.3 against the rule's plain reading, for any order of arrival: a
        /// packet is new if it is right of the window, or inside it and not received before;
        /// left of the window (more than the window's size below the highest) it is a
        /// replay; 0 never. `steps` move around the highest received so far, so most land
        /// near the window's edges, and some jump past it.
        #[test]
        fn the_window_takes_exactly_what_rfc4303_3_4_3_allows(
            size in prop::sample::select(vec![64u32, 128, 1024]),
            start in 0u64..(1 << 40),
            steps in prop::collection::vec(
                prop_oneof![4 => -70i64..70, 1 => -1100i64..1100],
                1..300,
            ),
        ) {
            let mut w = ReplayWindow::new(size);
            let width = w.size();
            let mut seen = BTreeSet::new();
            let mut top = 0u64;
            for (k, d) in steps.into_iter().enumerate() {
                let seq = if k == 0 { start } else { top.saturating_add_signed(d) };
                let new = seq != 0
                    && (seq > top || (seq + width > top && !seen.contains(&seq)));
                prop_assert_eq!(w.check(seq), new, "check {} (top {})", seq, top);
                prop_assert_eq!(w.accept(seq), new, "accept {} (top {})", seq, top);
                if new {
                    seen.insert(seq);
                    top = top.max(seq);
                }
                prop_assert_eq!(w.top(), top);
            }
        }

        /// RFC 4303 Appendix A2.2: with only the low 32 bits on the wire, the receiver finds
        /// the sequence number of every packet inside its window or right of it by less than
        /// 2^32 less the window (the sender cannot be further ahead without loss of
        /// synchronisation, §A2.3).
        #[test]
        fn esn_is_inferred_for_every_packet_in_or_right_of_the_window_4303_a2_2(
            size in prop::sample::select(vec![64u32, 1024]),
            top in 1u64..(1 << 36),
            ahead in any::<u32>(),
            behind in 0u64..1024,
            right in any::<bool>(),
        ) {
            let mut w = ReplayWindow::new(size);
            prop_assert!(w.accept(top));
            let width = w.size();
            let seq = if right {
                top + u64::from(ahead) % ((1 << 32) - width)
            } else {
                top.saturating_sub(behind % width).max(1)
            };
            prop_assert_eq!(w.infer_esn(seq as u32), seq, "top {}", top);
        }
    }
}
