//! Which bytes of an outstanding Read's Data Sink its Read Response has placed (RFC 5040 §5.2).
//!
//! A Read completes when its response has carried the RDMA Read Message Size into the Data
//! Sink. Summing the segments' lengths does not tell it: a peer whose segments overlap can
//! reach the size and leave a gap, whose bytes the ULP would then take for the Data Source's.
//! So each Read keeps the range placed from its sink's first byte ([`Placed::prefix`]), and a
//! stream keeps the ranges placed beyond a gap ([`Ahead`]). DDP over SCTP delivers segments
//! unordered (RFC 5043 §10), so a lost segment leaves a gap until its retransmission fills it;
//! ranges that touch are merged, so a sender that tiles its sink (as every correct one does)
//! holds one range per gap, not one per segment.

/// Ranges beyond the prefixes a stream holds at most: more gaps than any sender's losses in
/// flight leave, so only segments laid out with holes between them reach it. A Read whose
/// response passes it is treated as one that overlapped (never completed as Success), and the
/// memory a hostile peer can make us hold stays bounded.
pub const MAX_RANGES_AHEAD: usize = 1024;

/// One Read's placed bytes, relative to its sink's TO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Placed {
    /// Bytes placed from the sink's first byte, with no gap.
    pub prefix: u64,
    /// A segment landed on bytes already placed, or its ranges ahead passed
    /// `MAX_RANGES_AHEAD`: the response cannot have carried the whole Data Source.
    pub overlapped: bool,
}

impl Placed {
    /// Whether the response placed exactly the `len` bytes of the sink, each once.
    pub fn whole(&self, len: u64) -> bool {
        self.prefix == len && !self.overlapped
    }
}

/// The ranges placed beyond each outstanding Read's prefix, for one stream.
#[derive(Debug, Default)]
pub struct Ahead {
    /// Sorted by (read, start); disjoint, and no two of one Read touch (they are merged).
    ranges: Vec<Range>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    /// The Read's number in its stream's completion order (`OutboundRead::seq`).
    read: u64,
    start: u64,
    end: u64,
}

impl Ahead {
    /// Bytes `start..end` of Read `read`'s sink were placed (the caller has checked they lie
    /// inside the sink).
    pub fn place(&mut self, read: u64, placed: &mut Placed, start: u64, end: u64) {
        if start >= end || placed.overlapped {
            return;
        }
        if start < placed.prefix {
            placed.overlapped = true;
            return;
        }
        let at = self
            .ranges
            .partition_point(|r| (r.read, r.start) < (read, start));
        let before = at.checked_sub(1).filter(|&i| self.ranges[i].read == read);
        let after = Some(at).filter(|&i| i < self.ranges.len() && self.ranges[i].read == read);
        if before.is_some_and(|i| self.ranges[i].end > start)
            || after.is_some_and(|i| self.ranges[i].start < end)
        {
            placed.overlapped = true;
            return;
        }
        let joins_after = after.filter(|&i| self.ranges[i].start == end);
        if start == placed.prefix {
            // Every range ahead starts past the prefix, and none touches another: at most the
            // next one joins it.
            placed.prefix = end;
            if let Some(i) = joins_after {
                placed.prefix = self.ranges.remove(i).end;
            }
            return;
        }
        match (before.filter(|&i| self.ranges[i].end == start), joins_after) {
            (Some(b), Some(a)) => {
                self.ranges[b].end = self.ranges.remove(a).end;
            }
            (Some(b), None) => self.ranges[b].end = end,
            (None, Some(a)) => self.ranges[a].start = start,
            (None, None) if self.ranges.len() >= MAX_RANGES_AHEAD => placed.overlapped = true,
            (None, None) => self.ranges.insert(at, Range { read, start, end }),
        }
    }

    /// Read `read` left the stream (completed, refused or flushed): its ranges go.
    pub fn forget(&mut self, read: u64) {
        self.ranges.retain(|r| r.read != read);
    }

    /// Every Read left the stream.
    pub fn clear(&mut self) {
        self.ranges.clear();
    }

    /// Ranges held, for all Reads.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.ranges.len()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Places `pieces` (start, end) of one Read in the order given.
    fn run(ahead: &mut Ahead, read: u64, pieces: &[(u64, u64)]) -> Placed {
        let mut placed = Placed::default();
        for &(start, end) in pieces {
            ahead.place(read, &mut placed, start, end);
        }
        placed
    }

    fn permutations(n: usize) -> Vec<Vec<usize>> {
        if n == 0 {
            return vec![Vec::new()];
        }
        let mut out = Vec::new();
        for p in permutations(n - 1) {
            for at in 0..=p.len() {
                let mut q = p.clone();
                q.insert(at, n - 1);
                out.push(q);
            }
        }
        out
    }

    /// RFC 5040 §5.2 with RFC 5043 §10: a response that tiles its sink is whole in whatever
    /// order SCTP delivers its segments, and leaves nothing behind.
    #[test]
    fn a_tiling_is_whole_in_every_order() {
        let tiles = [
            (0, 100),
            (100, 150),
            (150, 400),
            (400, 401),
            (401, 900),
            (900, 1000),
        ];
        for order in permutations(tiles.len()) {
            let mut ahead = Ahead::default();
            let pieces: Vec<_> = order.iter().map(|&i| tiles[i]).collect();
            let placed = run(&mut ahead, 7, &pieces);
            assert!(placed.whole(1000), "{pieces:?}: {placed:?}");
            assert!(ahead.is_empty(), "{pieces:?}: ranges left {ahead:?}");
        }
    }

    /// RFC 5040 §5.2: segments that overlap never make a Read whole, even when their lengths
    /// add up to its size (the gap they leave would reach the ULP as the source's bytes).
    #[test]
    fn an_overlap_is_never_whole_in_any_order() {
        // 1000 bytes in all, [500, 600) twice and [900, 1000) never.
        let pieces = [(0, 300), (300, 600), (500, 600), (600, 900)];
        for order in permutations(pieces.len()) {
            let mut ahead = Ahead::default();
            let mut placed = Placed::default();
            for &i in &order {
                ahead.place(7, &mut placed, pieces[i].0, pieces[i].1);
            }
            // The gap's filler comes last: bytes now all there, but one range came twice.
            ahead.place(7, &mut placed, 900, 1000);
            assert!(placed.overlapped, "{order:?}: {placed:?}");
            assert!(!placed.whole(1000), "{order:?}");
        }
    }

    /// Two Reads' ranges are kept apart: one Read's bytes neither fill nor overlap the other's.
    #[test]
    fn reads_keep_their_own_ranges() {
        let mut ahead = Ahead::default();
        let (mut one, mut two) = (Placed::default(), Placed::default());
        ahead.place(1, &mut one, 500, 1000);
        ahead.place(2, &mut two, 500, 1000);
        ahead.place(2, &mut two, 0, 500);
        assert!(two.whole(1000));
        assert_eq!(ahead.len(), 1, "Read 1's range stays");
        ahead.place(1, &mut one, 0, 500);
        assert!(one.whole(1000));
        assert!(ahead.is_empty());
        ahead.place(3, &mut Placed::default(), 10, 20);
        ahead.place(4, &mut Placed::default(), 10, 20);
        ahead.forget(3);
        assert_eq!(ahead.len(), 1);
    }

    /// A response laid out with holes between its segments cannot make us hold more than
    /// MAX_RANGES_AHEAD ranges; its Read is marked as never whole.
    #[test]
    fn holes_beyond_the_bound_mark_the_read() {
        let mut ahead = Ahead::default();
        let mut placed = Placed::default();
        for i in 0..(MAX_RANGES_AHEAD as u64 + 10) {
            ahead.place(1, &mut placed, 2 * i + 1, 2 * i + 2);
        }
        assert_eq!(ahead.len(), MAX_RANGES_AHEAD);
        assert!(placed.overlapped);
    }
}
