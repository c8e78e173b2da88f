//! Reassembly of fragmented user messages (RFC 9260 §6.9). DDP over SCTP avoids SCTP
//! fragmentation, but RFC 5043 §9 forbids it only "unless the alternative is IP
//! fragmentation": a peer on a path with a smaller MTU than the segment it must send may
//! split a DDP segment into DATA fragments, and the receiver takes them. Fragments are rare,
//! so this is simple rather than fast: each held fragment is its own buffer.
//!
//! Unordered fragments of one message carry consecutive TSNs, B on the first and E on the
//! last (§6.9; the SSN means nothing for unordered data). Every fragment is acknowledged when
//! it arrives, so nothing held may be dropped: the bound is the receive window, which counts
//! the held bytes (the association advertises its room less [`Reassembly::held`], and drops
//! new DATA beyond it unacknowledged, §6.2).

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

    /// Forgets everything (a new incarnation of the peer, a new TSN space).
    pub fn clear(&mut self) {
        self.frags.clear();
        self.held = 0;
    }

    /// The last message [`Reassembly::insert`] completed.
    pub fn message(&self) -> &[u8] {
        &self.message
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
        let follows = |a: &Fragment, b: &Fragment| {
            b.tsn == a.tsn.wrapping_add(1) && a.stream == b.stream && !a.last && !b.first
        };
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn tsns_wrap_6_9() {
        let mut r = Reassembly::default();
        assert_eq!(r.insert(0, 0, 16, false, true, b"2"), None);
        let w = r.insert(u32::MAX, 0, 16, true, false, b"1");
        assert_eq!(w.map(|w| w.tsn), Some(u32::MAX));
        assert_eq!(r.message(), b"12");
    }
}
