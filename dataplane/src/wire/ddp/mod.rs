//! DDP carried over SCTP: the two payloads of RFC 5043 §5.2 and the segmentation arithmetic of
//! RFC 5041 §5.2.
//!
//! Every SCTP DATA chunk of a DDP association starts with the 16-bit DDP Source Sequence Number
//! (DDP-SSN, RFC 5043 §5.2.1), and its Payload Protocol Identifier says what follows:
//!
//! - PPID 16, DDP Segment Chunk ([`segment`]): DDP-SSN, then one DDP Segment (RFC 5041 §4): a
//!   tagged header (control, RsvdULP, STag, TO: 14 bytes) or an untagged header (control,
//!   RsvdULP, QN, MSN, MO: 18 bytes), then the ULP Payload.
//! - PPID 17, DDP Stream Session Control ([`session`]): DDP-SSN, a 16-bit Function Code and
//!   Private Data (at most 512 bytes, none on Terminate).
//!
//! The SCTP chunk itself (TSN, stream, flags, PPID) is parsed by [`super::sctp`]; the views here
//! start at the first byte of the chunk's user data. Neither DDP payload carries a length: the
//! LLP provides it (RFC 5041 §3 item 7), so a view's length is the user data length.
//!
//! Sizes here follow one convention: a *DDP Segment* (and so the MULPDU, RFC 5041 §2.2) excludes
//! the DDP-SSN, which belongs to the SCTP adaptation; a *chunk payload* includes it.

pub mod error;
pub mod segment;
pub mod session;

pub use error::DdpError;

pub use segment::{
    Header, Packet as SegmentPacket, Repr as SegmentRepr, TaggedHeader, UntaggedHeader,
};
pub use session::{
    FunctionCode, Message, Packet as SessionControlPacket, PrivateData, Repr as SessionControlRepr,
};

use super::{Error, Result};

/// PPID of a DDP Segment Chunk (RFC 5043 §5.2, IANA-assigned).
pub const PPID_DDP_SEGMENT: u32 = 16;
/// PPID of a DDP Stream Session Control message (RFC 5043 §5.2, IANA-assigned).
pub const PPID_SESSION_CONTROL: u32 = 17;

/// Length of the DDP-SSN that starts every DDP chunk payload (RFC 5043 §5.2.1).
pub const DDP_SSN_LEN: usize = 2;
/// Length of the DDP Tagged Buffer Model header: control 8 + RsvdULP 8 + STag 32 + TO 64 bits
/// (RFC 5041 §4.2, and the 14 of the §5.2 example).
pub const TAGGED_HEADER_LEN: usize = 14;
/// Length of the DDP Untagged Buffer Model header: control 8 + RsvdULP 40 + QN 32 + MSN 32 +
/// MO 32 bits (RFC 5041 §4.3, and the 18 of the §5.2 example).
pub const UNTAGGED_HEADER_LEN: usize = 18;
/// The DDP version (DV) this implementation speaks, the only one defined (RFC 5041 §4.1).
pub const DDP_VERSION: u8 = 1;

/// DDP-SSN and Function Code: the fixed part of a Stream Session Control message
/// (RFC 5043 §5.2.3).
pub const SESSION_CONTROL_HEADER_LEN: usize = 4;
/// "Private Data length MUST NOT exceed 512 bytes in any message" (RFC 5043 §5.2.3).
pub const MAX_PRIVATE_DATA_LEN: usize = 512;
/// The smallest maximum DDP Segment size the adaptation may announce (RFC 5043 §9): room for a
/// Stream Session Control message with 512 bytes of Private Data.
pub const MIN_MULPDU: usize = 516;

/// Length of the DDP header of the tagged (`true`) or untagged buffer model, without the DDP-SSN.
#[inline]
pub const fn header_len(tagged: bool) -> usize {
    if tagged {
        TAGGED_HEADER_LEN
    } else {
        UNTAGGED_HEADER_LEN
    }
}

/// The MULPDU the SCTP adaptation announces to DDP (RFC 5041 §3 item 1, RFC 5043 §9), from the
/// largest DATA chunk user data the association can send without IP or SCTP fragmentation.
///
/// The DDP-SSN takes two bytes of that user data; the rest is the largest DDP Segment. RFC 5043
/// §9 then raises the value to 516 if the path is smaller ("or 516 bytes, whichever is larger"),
/// accepting SCTP fragmentation in that case. The 516 floor is applied to the DDP Segment size
/// itself, as the RFC words it, so user data of 518 always fits the largest Stream Session
/// Control message (516 bytes with its DDP-SSN). Callers that keep room for bundled control
/// chunks (RFC 5043 §9 "SHOULD set the maximum DDP Segment size below the theoretical maximum")
/// subtract it from `max_user_data` first.
#[inline]
pub const fn mulpdu(max_user_data: usize) -> usize {
    let segment = max_user_data.saturating_sub(DDP_SSN_LEN);
    if segment > MIN_MULPDU {
        segment
    } else {
        MIN_MULPDU
    }
}

/// The most ULP Payload one DDP Segment can carry: MULPDU minus the DDP header
/// (RFC 5041 §5.2: "1486 = 1500 (MULPDU) - 14", "1482 = 1500 (MULPDU) - 18"). Zero if the
/// MULPDU does not even hold the header.
#[inline]
pub const fn max_payload(mulpdu: usize, tagged: bool) -> usize {
    mulpdu.saturating_sub(header_len(tagged))
}

/// One DDP Segment of a DDP Message as the Data Source cuts it (RFC 5041 §5.2): which octets of
/// the ULP Message it carries and whether it is the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSpan {
    /// Octet offset of the first payload octet from the start of the ULP Message: the MO of an
    /// untagged segment as it is.
    pub offset: u32,
    /// ULP Payload octets in this segment.
    pub len: u32,
    /// The L flag: set on the last segment of the message and on no other (RFC 5041 §4.1).
    pub last: bool,
}

impl SegmentSpan {
    /// The TO of this segment in a tagged message whose first octet goes to `initial_to`
    /// (RFC 5041 §5.2). `None` if the 64-bit sum wraps, which the Data Sink would refuse
    /// ("TO wrap", RFC 5041 §7.1 tagged check 5, §7.2 error 0x1/0x03), so nothing should be sent.
    #[inline]
    pub const fn to(&self, initial_to: u64) -> Option<u64> {
        initial_to.checked_add(self.offset as u64)
    }
}

/// The segments of one DDP Message, in the order RFC 5041 §5.3 asks for (increasing TO/MO),
/// each as full as the MULPDU allows. A zero-length message is exactly one empty segment
/// (RFC 5041 §5.2). No allocation: an iterator of [`SegmentSpan`]s.
#[derive(Debug, Clone)]
pub struct Segments {
    message_len: u32,
    max_payload: u32,
    next_offset: Option<u32>,
}

impl Segments {
    /// Cuts a ULP Message of `message_len` octets (a `u32`: RFC 5041 §5.2 "The ULP Message
    /// Length MUST be less than 2^32") for a MULPDU of `mulpdu` bytes.
    ///
    /// [`Error::BadLength`] if the MULPDU leaves no room for ULP Payload after the header: every
    /// segment would be empty and the message could never be sent.
    pub fn new(message_len: u32, mulpdu: usize, tagged: bool) -> Result<Segments> {
        let max = max_payload(mulpdu, tagged);
        if max == 0 {
            return Err(Error::BadLength);
        }
        Ok(Segments {
            message_len,
            max_payload: u32::try_from(max).unwrap_or(u32::MAX),
            next_offset: Some(0),
        })
    }

    /// The segments from octet `offset` of the message on: a sender that hands segments to
    /// the LLP as room frees up resumes where it stopped, without recounting from the start.
    /// [`Error::BadLength`] if `offset` lies past the message.
    pub fn resume(message_len: u32, mulpdu: usize, tagged: bool, offset: u32) -> Result<Segments> {
        if offset > message_len {
            return Err(Error::BadLength);
        }
        let mut s = Segments::new(message_len, mulpdu, tagged)?;
        s.next_offset = Some(offset);
        Ok(s)
    }
}

impl Iterator for Segments {
    type Item = SegmentSpan;

    fn next(&mut self) -> Option<SegmentSpan> {
        let offset = self.next_offset?;
        // offset <= message_len always holds, so neither line can overflow.
        let len = (self.message_len - offset).min(self.max_payload);
        let end = offset + len;
        let last = end == self.message_len;
        self.next_offset = if last { None } else { Some(end) };
        Some(SegmentSpan { offset, len, last })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match self.next_offset {
            None => 0,
            Some(offset) => {
                let left = u64::from(self.message_len - offset);
                // At least one (a zero-length tail is still a segment), else ceil(left / max).
                left.div_ceil(u64::from(self.max_payload)).max(1)
            }
        };
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl ExactSizeIterator for Segments {}

impl core::iter::FusedIterator for Segments {}

// Big-endian field access for the views of this module. The ranges are constants of the right
// width, read only after `check_len`, so the slices always exist.
#[inline]
pub(crate) fn read_u16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

#[inline]
pub(crate) fn read_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

#[inline]
pub(crate) fn read_u64(b: &[u8]) -> u64 {
    u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn header_lengths_are_those_of_rfc5041_figures_4_and_5() {
        assert_eq!((TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN), (14, 18));
        assert_eq!((header_len(true), header_len(false)), (14, 18));
        // With the DDP-SSN, as the golden captures show (README: tagged = DDP-SSN(2) + 14).
        assert_eq!(DDP_SSN_LEN + TAGGED_HEADER_LEN, 16);
        assert_eq!(DDP_SSN_LEN + UNTAGGED_HEADER_LEN, 20);
    }

    #[test]
    fn rfc5041_5_2_mulpdu_1500_leaves_1486_tagged_and_1482_untagged_payload_octets() {
        assert_eq!(max_payload(1500, true), 1486);
        assert_eq!(max_payload(1500, false), 1482);
    }

    #[test]
    fn rfc5041_5_2_untagged_example_2048_octets_mulpdu_1500() {
        // "two DDP Segments, one with MO = 0, containing 1482 octets of ULP Payload, and a second
        // with MO = 1482, containing 566 octets of ULP Payload."
        let segs: Vec<_> = Segments::new(2048, 1500, false).unwrap().collect();
        assert_eq!(
            segs,
            [
                SegmentSpan {
                    offset: 0,
                    len: 1482,
                    last: false
                },
                SegmentSpan {
                    offset: 1482,
                    len: 566,
                    last: true
                },
            ]
        );
    }

    #[test]
    fn rfc5041_5_2_tagged_example_2048_octets_initial_to_16384_mulpdu_1500() {
        // "one with TO = 16384, containing the first 1486 octets of ULP payload, and a second
        // with TO = 17870, containing 562 octets of ULP payload."
        let segs: Vec<_> = Segments::new(2048, 1500, true)
            .unwrap()
            .map(|s| (s.to(16384).unwrap(), s.len, s.last))
            .collect();
        assert_eq!(segs, [(16384, 1486, false), (17870, 562, true)]);
    }

    #[test]
    fn rfc5041_5_2_zero_length_message_consumes_exactly_one_segment() {
        let mut it = Segments::new(0, 1500, true).unwrap();
        assert_eq!(it.len(), 1);
        assert_eq!(
            it.next(),
            Some(SegmentSpan {
                offset: 0,
                len: 0,
                last: true
            })
        );
        assert_eq!(it.next(), None);
        assert_eq!(it.next(), None);
    }

    /// Resuming at any segment boundary yields exactly the rest of the full cut; past the end
    /// is refused.
    #[test]
    fn resume_at_a_boundary_continues_the_same_cut() {
        for (len, tagged) in [
            (0u32, true),
            (2048, false),
            (10_000, true),
            (1486 * 3, true),
        ] {
            let all: Vec<_> = Segments::new(len, 1500, tagged).unwrap().collect();
            for (i, s) in all.iter().enumerate() {
                let rest: Vec<_> = Segments::resume(len, 1500, tagged, s.offset)
                    .unwrap()
                    .collect();
                assert_eq!(rest, all[i..], "len {len} from {}", s.offset);
            }
        }
        assert!(Segments::resume(10, 1500, true, 11).is_err());
    }

    #[test]
    fn exact_multiple_of_max_payload_has_no_empty_trailing_segment() {
        let segs: Vec<_> = Segments::new(2 * 1482, 1500, false).unwrap().collect();
        assert_eq!(segs.len(), 2);
        assert!(segs[1].last && segs[1].len == 1482);
    }

    #[test]
    fn largest_ulp_message_is_cut_without_overflow() {
        let it = Segments::new(u32::MAX, 1500, true).unwrap();
        assert_eq!(it.len(), (u32::MAX as usize).div_ceil(1486));
        let last = it.last().unwrap();
        assert!(last.last);
        assert_eq!(
            u64::from(last.offset) + u64::from(last.len),
            u64::from(u32::MAX)
        );
    }

    #[test]
    fn mulpdu_without_room_for_payload_is_refused() {
        assert_eq!(Segments::new(10, 14, true).unwrap_err(), Error::BadLength);
        assert_eq!(Segments::new(10, 18, false).unwrap_err(), Error::BadLength);
        assert!(Segments::new(10, 15, true).is_ok());
        assert!(Segments::new(10, 19, false).is_ok());
    }

    #[test]
    fn rfc5041_7_1_tagged_offset_that_would_wrap_is_none() {
        let s = SegmentSpan {
            offset: 1,
            len: 1,
            last: true,
        };
        assert_eq!(s.to(u64::MAX - 1), Some(u64::MAX));
        assert_eq!(s.to(u64::MAX), None);
    }

    #[test]
    fn rfc5043_9_mulpdu_is_user_data_less_ddp_ssn() {
        // IPv4 path MTU 1500: 1500 - 20 (IPv4) - 12 (SCTP common header) - 16 (DATA chunk
        // header) = 1452 bytes of user data, of which the DDP-SSN takes 2.
        assert_eq!(mulpdu(1452), 1450);
        assert_eq!(mulpdu(9000 - 40 - 12 - 16), 8930);
    }

    #[test]
    fn rfc5043_9_mulpdu_is_at_least_516() {
        assert_eq!(mulpdu(0), MIN_MULPDU);
        assert_eq!(mulpdu(300), MIN_MULPDU);
        assert_eq!(mulpdu(518), 516);
        assert_eq!(mulpdu(519), 517);
        // The floor holds the largest session control message with its DDP-SSN.
        assert!(mulpdu(0) + DDP_SSN_LEN >= SESSION_CONTROL_HEADER_LEN + MAX_PRIVATE_DATA_LEN);
    }

    proptest! {
        #[test]
        fn segments_tile_the_message_in_order_and_only_the_final_one_is_last(
            message_len in 0u32..20_000,
            mulpdu in 15usize..3000,
            tagged in any::<bool>(),
        ) {
            let it = Segments::new(message_len, mulpdu, tagged);
            if mulpdu <= header_len(tagged) {
                prop_assert!(it.is_err());
                return Ok(());
            }
            let it = it.unwrap();
            let expected = it.len();
            let mut next = 0u32;
            let mut count = 0usize;
            for s in it {
                prop_assert_eq!(s.offset, next);
                prop_assert!(s.len as usize <= max_payload(mulpdu, tagged));
                prop_assert!(s.len > 0 || message_len == 0);
                next = s.offset + s.len;
                prop_assert_eq!(s.last, next == message_len);
                count += 1;
            }
            prop_assert_eq!(next, message_len);
            prop_assert_eq!(count, expected);
        }
    }
}
