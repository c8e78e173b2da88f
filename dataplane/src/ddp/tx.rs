//! The send side of one DDP stream: a DDP Message cut into DDP Segment Chunks (RFC 5041 §5.2,
//! RFC 5043 §5.2), each one SCTP message of PPID 16, each with the next DDP-SSN.
//!
//! The segment size is the MULPDU the SCTP adaptation announces (RFC 5043 §9): the largest
//! DATA chunk user data the association carries unfragmented, less the DDP-SSN, less room for a
//! SACK to ride along ("SHOULD set the maximum DDP Segment size below the theoretical maximum
//! in order to allow bundling of Control Chunks"), and never below 516.

use crate::wire::ddp::{
    self, Header, SegmentPacket, SegmentRepr, SegmentSpan, Segments, TaggedHeader, UntaggedHeader,
};

/// Room kept in every DATA chunk's packet for a bundled SACK: its 16 fixed bytes and four gap
/// ack blocks.
pub const SACK_HEADROOM: usize = 16 + 4 * 4;

/// The MULPDU for an association whose largest unfragmented DATA chunk carries
/// `max_user_data` bytes (`sctp::Association::max_message`).
pub fn mulpdu(max_user_data: usize) -> usize {
    ddp::mulpdu(max_user_data.saturating_sub(SACK_HEADROOM))
}

/// Where a message goes at the Data Sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Tagged: to the STag's buffer from `to` (RFC 5041 §5.1.1).
    Tagged { stag: u32, to: u64, rsvd_ulp: u8 },
    /// Untagged: to the `msn`-th buffer posted on queue `qn` (RFC 5041 §5.1.2).
    Untagged {
        qn: u32,
        msn: u32,
        rsvd_ulp: [u8; 5],
    },
}

/// Why a message cannot be sent; nothing was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxError {
    /// RFC 5041 §5.2: a ULP Message must be shorter than 2^32.
    TooLong,
    /// TO + length passes 2^64: the Data Sink would refuse it as TO wrap (RFC 5041 §7.1).
    ToWrap,
    /// The MULPDU leaves no room for payload (below the DDP header).
    MulpduTooSmall,
}

impl core::fmt::Display for TxError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            TxError::TooLong => "DDP message of 2^32 bytes or more",
            TxError::ToWrap => "TO + message length passes 2^64",
            TxError::MulpduTooSmall => "MULPDU below the DDP header",
        })
    }
}

impl std::error::Error for TxError {}

/// One stream's sender: hands out DDP-SSNs, consecutive and wrapping (RFC 5043 §5.2.1).
#[derive(Debug, Clone)]
pub struct StreamTx {
    next_ddp_ssn: u16,
    mulpdu: usize,
}

impl StreamTx {
    /// `first_ddp_ssn`: the DDP-SSN of the first segment (after the session's control
    /// messages); `mulpdu` from [`mulpdu`].
    pub fn new(first_ddp_ssn: u16, mulpdu: usize) -> Self {
        StreamTx {
            next_ddp_ssn: first_ddp_ssn,
            mulpdu,
        }
    }

    pub fn next_ddp_ssn(&self) -> u16 {
        self.next_ddp_ssn
    }

    pub fn mulpdu(&self) -> usize {
        self.mulpdu
    }

    /// Cuts `message` into segment chunk payloads, written one at a time into `buf` (at least
    /// MULPDU + 2 bytes) and handed to `send` in order of increasing offset (RFC 5041 §5.3). All
    /// checks happen before the first segment: on `Err` nothing was sent and no DDP-SSN used.
    pub fn send(
        &mut self,
        target: Target,
        message: &[u8],
        buf: &mut [u8],
        send: &mut impl FnMut(&[u8]),
    ) -> Result<u32, TxError> {
        let len = u32::try_from(message.len()).map_err(|_| TxError::TooLong)?;
        let tagged = matches!(target, Target::Tagged { .. });
        let segments =
            Segments::new(len, self.mulpdu, tagged).map_err(|_| TxError::MulpduTooSmall)?;
        if let Target::Tagged { to, .. } = target {
            to.checked_add(u64::from(len)).ok_or(TxError::ToWrap)?;
        }
        let mut n = 0;
        for span in segments {
            let len = emit_segment(target, message, span, self.next_ddp_ssn, buf)?;
            send(&buf[..len]);
            self.next_ddp_ssn = self.next_ddp_ssn.wrapping_add(1);
            n += 1;
        }
        Ok(n)
    }
}

/// Writes the segment chunk payload (DDP-SSN, DDP header, ULP payload) that carries `span` of
/// `message` to `target` into `buf`; returns its length. The caller has checked the whole
/// message (length below 2^32, no TO wrap) before its first segment, as [`StreamTx::send`]
/// does. [`TxError::MulpduTooSmall`] if `buf` cannot hold the segment.
pub fn emit_segment(
    target: Target,
    message: &[u8],
    span: SegmentSpan,
    ddp_ssn: u16,
    buf: &mut [u8],
) -> Result<usize, TxError> {
    let start = span.offset as usize;
    let payload = message
        .get(start..start + span.len as usize)
        .ok_or(TxError::TooLong)?;
    emit(target, payload, span, ddp_ssn, buf)
}

/// As [`emit_segment`] without the ULP payload: the DDP-SSN and DDP header only, for a
/// segment whose `span.len` payload bytes follow from elsewhere (zero-copy transmit from a
/// registered region). DDP headers carry no length (RFC 5041 §4), so the header is the same.
pub fn emit_segment_header(
    target: Target,
    span: SegmentSpan,
    ddp_ssn: u16,
    buf: &mut [u8],
) -> Result<usize, TxError> {
    emit(target, &[], span, ddp_ssn, buf)
}

fn emit(
    target: Target,
    payload: &[u8],
    span: SegmentSpan,
    ddp_ssn: u16,
    buf: &mut [u8],
) -> Result<usize, TxError> {
    let header = match target {
        Target::Tagged { stag, to, rsvd_ulp } => Header::Tagged(TaggedHeader {
            rsvd_ulp,
            stag,
            to: span.to(to).ok_or(TxError::ToWrap)?,
        }),
        Target::Untagged { qn, msn, rsvd_ulp } => Header::Untagged(UntaggedHeader {
            rsvd_ulp,
            qn,
            msn,
            mo: span.offset,
        }),
    };
    let repr = SegmentRepr {
        ddp_ssn,
        last: span.last,
        header,
        payload,
    };
    let out = buf
        .get_mut(..repr.buffer_len())
        .ok_or(TxError::MulpduTooSmall)?;
    repr.emit(&mut SegmentPacket::new_unchecked(&mut *out))
        .map_err(|_| TxError::MulpduTooSmall)?;
    Ok(out.len())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;

    /// RFC 5043 §9: room for a SACK below the theoretical maximum, and never below 516.
    #[test]
    fn mulpdu_keeps_sack_room_and_the_516_floor() {
        // A 1480-byte SCTP packet carries 1452 bytes of user data.
        assert_eq!(mulpdu(1452), 1452 - SACK_HEADROOM - 2);
        assert_eq!(mulpdu(300), 516);
    }

    /// RFC 5043 §9 at the smallest path MTU we accept: a 516-byte segment with its DDP-SSN
    /// still goes in one DATA chunk (the MULPDU is never below 516 and never needs SCTP
    /// fragmentation).
    #[test]
    fn the_516_floor_fits_the_smallest_path_mtu() {
        use crate::sctp::{max_message, MIN_PATH_MTU};
        let max = max_message(MIN_PATH_MTU);
        assert_eq!(mulpdu(max), 516);
        assert!(mulpdu(max) + 2 <= max, "{} + 2 > {max}", mulpdu(max));
        assert!(mulpdu(max_message(MIN_PATH_MTU - 1)) + 2 > max_message(MIN_PATH_MTU - 1));
    }

    /// RFC 5041 §5.2 tagged example: 2048 octets, initial TO 16384, MULPDU 1500: two segments,
    /// TO 16384 with 1486 octets and TO 17870 with 562, L on the second; DDP-SSNs consecutive.
    #[test]
    fn rfc5041_5_2_tagged_example_through_the_sender() {
        let mut tx = StreamTx::new(u16::MAX, 1500);
        let msg = vec![9u8; 2048];
        let mut buf = vec![0u8; 1502];
        let mut got = Vec::new();
        let target = Target::Tagged {
            stag: 0x1234,
            to: 16384,
            rsvd_ulp: 0,
        };
        let n = tx
            .send(target, &msg, &mut buf, &mut |c| {
                let p = SegmentPacket::new_checked(c).unwrap();
                let r = SegmentRepr::parse(&p).unwrap();
                let Header::Tagged(h) = r.header else {
                    panic!()
                };
                got.push((r.ddp_ssn, h.to, r.payload.len(), r.last));
            })
            .unwrap();
        assert_eq!(n, 2);
        assert_eq!(
            got,
            vec![(u16::MAX, 16384, 1486, false), (0, 17870, 562, true)]
        );
        assert_eq!(tx.next_ddp_ssn(), 1, "wraps 65535 -> 0 -> 1");
    }

    /// Zero-length messages are one empty L segment (RFC 5041 §5.2); TO wrap and length
    /// limits are refused before anything is sent.
    #[test]
    fn zero_length_and_refusals_at_the_source() {
        let mut tx = StreamTx::new(1, 1500);
        let mut buf = vec![0u8; 1502];
        let mut sent = 0;
        let untagged = Target::Untagged {
            qn: 0,
            msn: 1,
            rsvd_ulp: [0; 5],
        };
        assert_eq!(tx.send(untagged, &[], &mut buf, &mut |_| sent += 1), Ok(1));
        assert_eq!(sent, 1);
        let wrap = Target::Tagged {
            stag: 1,
            to: u64::MAX - 5,
            rsvd_ulp: 0,
        };
        assert_eq!(
            tx.send(wrap, &[0; 10], &mut buf, &mut |_| sent += 1),
            Err(TxError::ToWrap)
        );
        assert_eq!(
            (sent, tx.next_ddp_ssn()),
            (1, 2),
            "nothing sent, no DDP-SSN used"
        );
        let mut tiny = StreamTx::new(1, 14);
        assert_eq!(
            tiny.send(wrap, &[0; 1], &mut buf, &mut |_| ()),
            Err(TxError::MulpduTooSmall)
        );
    }
}
