//! SCTP wire formats (RFC 9260): the common header, chunks, parameters and error causes.
//!
//! Layout of an SCTP packet (RFC 9260 §3): a 12-byte common header ([`Packet`], [`HeaderRepr`])
//! followed by one or more chunks, each a type-length-value element padded to 4 bytes
//! ([`Chunk`], [`ChunkRepr`], iterated by [`Chunks`]). INIT and INIT ACK carry parameters
//! ([`Param`], [`ParamRepr`]); ABORT and ERROR carry error causes ([`Cause`], [`CauseRepr`]).
//!
//! Everything borrows: a `Repr` holds `&'a [u8]` for variable-length parts and a [`List`] for
//! repeated parts, which is either the validated wire bytes (after `parse`) or a slice of
//! element Reprs (to emit). Nothing here allocates, and no accessor of a view built by
//! `new_checked` can panic. The checksum is not computed here: the caller verifies or fills it
//! with `crate::wire::crc32c` over the whole packet ([`Packet::checksum`] reads the field).
//!
//! # Padding and length rules (one rule for chunks, parameters and error causes)
//!
//! RFC 9260 §3.2 and §3.2.1: the length field counts the header and value but not the padding;
//! the sender pads to a multiple of 4 with at most 3 zero bytes; the receiver ignores the
//! padding bytes' values. A chunk's length "does include any padding of variable-length
//! parameters other than the last parameter", and "a robust implementation is expected to
//! accept the chunk whether or not the final padding has been included in the Chunk Length".
//! So, after an element of length `L` inside an enclosing buffer, this module accepts exactly:
//!
//! - the buffer ends at `L`: the last element with its padding left out (tolerated; for the
//!   last chunk of a packet this accepts a packet whose final padding is missing, as Linux
//!   does), or
//! - the buffer holds the full padding: the next element, if any, starts at `L` rounded up to 4.
//!
//! A buffer that ends inside the padding is [`Error::BadPadding`]; a length below the header size
//! (or the type's minimum) is [`Error::BadLength`]; a length running past the buffer, or 1 to 3
//! stray bytes where an element header should start, is [`Error::Truncated`]. Emitting always
//! writes the padding as zeros and never counts the last element's padding in the enclosing
//! length, which is what usrsctp does (see `tests/vectors_sctp.rs`).

mod cause;
mod chunk;
mod control;
mod data;
mod header;
mod init;
mod list;
mod param;
mod sack;

pub use cause::{Cause, CauseCode, CauseRepr};
pub use chunk::{Chunk, ChunkRepr, ChunkType, UnknownChunkRepr};
pub use control::{
    AbortRepr, CookieEchoRepr, ErrorChunkRepr, HeartbeatAckRepr, HeartbeatRepr,
    ShutdownCompleteRepr, ShutdownRepr,
};
pub use data::{flag as data_flag, DataChunk, DataRepr};
pub use header::{Chunks, HeaderRepr, Packet, PacketBuilder};
pub use init::{InitAckRepr, InitChunk, InitRepr};
pub use list::{List, ListElement, ListIter};
pub use param::{Param, ParamRepr, ParamType};
pub use sack::{GapAckBlock, SackChunk, SackRepr};

use super::{Error, Result};

/// Length of the SCTP common header (RFC 9260 §3.1).
pub const HEADER_LEN: usize = 12;
/// Length of the chunk header: type, flags, length (RFC 9260 §3.2).
pub const CHUNK_HEADER_LEN: usize = 4;
/// The PAD chunk's type (RFC 4820 §3): its upper bits "10" make a receiver that does not know
/// it skip it and go on, unreported (RFC 9260 §3.2).
pub const PAD_CHUNK_TYPE: u8 = 0x84;
/// Length of a DATA chunk without user data (RFC 9260 §3.3.1); a valid DATA chunk is longer.
pub const DATA_HEADER_LEN: usize = 16;
/// Length of an INIT or INIT ACK chunk without parameters (RFC 9260 §3.3.2, §3.3.3).
pub const INIT_MIN_LEN: usize = 20;
/// Length of a SACK chunk without gap ack blocks or duplicate TSNs (RFC 9260 §3.3.4).
pub const SACK_MIN_LEN: usize = 16;
/// Length of a parameter header: type, length (RFC 9260 §3.2.1).
pub const PARAM_HEADER_LEN: usize = 4;
/// Length of an error cause header: code, length (RFC 9260 §3.3.10).
pub const CAUSE_HEADER_LEN: usize = 4;
/// The smallest a_rwnd an INIT or INIT ACK may advertise (RFC 9260 §3.3.2, §3.3.3).
pub const MIN_A_RWND: u32 = 1500;
/// Payload protocol identifier of a DDP segment (RFC 5043 §5.2.2).
pub const PPID_DDP_SEGMENT: u32 = 16;
/// Payload protocol identifier of DDP stream session control (RFC 5043 §5.2.3).
pub const PPID_DDP_STREAM_SESSION_CONTROL: u32 = 17;
/// Adaptation Layer Indication value assigned to DDP (RFC 5043 §5.1).
pub const ADAPTATION_INDICATION_DDP: u32 = 1;

/// What a receiver does with a chunk type or parameter type it does not recognize: the action
/// is encoded in the upper two bits of the type (RFC 9260 §3.2 for chunks, §3.2.1 for
/// parameters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnrecognizedAction {
    /// `00`: stop processing (the packet for a chunk, the chunk's parameters for a parameter)
    /// and discard it; do not report.
    Discard,
    /// `01`: as `Discard`, and report it (ERROR with Unrecognized Chunk Type for a chunk,
    /// Unrecognized Parameter for a parameter).
    DiscardAndReport,
    /// `10`: skip it and continue processing; do not report.
    Skip,
    /// `11`: skip it, continue processing, and report it.
    SkipAndReport,
}

impl UnrecognizedAction {
    /// The action encoded in a chunk type (RFC 9260 §3.2).
    pub const fn of_chunk_type(chunk_type: u8) -> Self {
        Self::from_bits(chunk_type >> 6)
    }

    /// The action encoded in a parameter type (RFC 9260 §3.2.1).
    pub const fn of_param_type(param_type: u16) -> Self {
        // The upper two bits of a 16-bit value always fit in a u8.
        Self::from_bits((param_type >> 14) as u8)
    }

    const fn from_bits(bits: u8) -> Self {
        match bits & 0b11 {
            0b00 => Self::Discard,
            0b01 => Self::DiscardAndReport,
            0b10 => Self::Skip,
            _ => Self::SkipAndReport,
        }
    }

    /// Whether processing continues after the unrecognized element (upper bit set).
    pub const fn continues(self) -> bool {
        matches!(self, Self::Skip | Self::SkipAndReport)
    }

    /// Whether the unrecognized element is reported to the sender (lower bit set).
    pub const fn reports(self) -> bool {
        matches!(self, Self::DiscardAndReport | Self::SkipAndReport)
    }
}

/// Defines a code enum whose unknown values round-trip through `Unknown`.
macro_rules! code_enum {
    (
        $(#[$attr:meta])*
        pub enum $name:ident($ty:ty) {
            $( $(#[$vattr:meta])* $variant:ident = $value:expr, )+
        }
    ) => {
        $(#[$attr])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vattr])* $variant, )+
            /// A code this module does not name; kept as is so that it round-trips.
            Unknown($ty),
        }

        impl From<$ty> for $name {
            fn from(value: $ty) -> Self {
                match value {
                    $( $value => $name::$variant, )+
                    other => $name::Unknown(other),
                }
            }
        }

        impl From<$name> for $ty {
            fn from(value: $name) -> Self {
                match value {
                    $( $name::$variant => $value, )+
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}
pub(crate) use code_enum;

/// Bytes of padding after an element of `len` bytes (RFC 9260 §3.2: at most 3).
const fn pad_len(len: usize) -> usize {
    (4 - len % 4) % 4
}

/// `len` rounded up to a multiple of 4.
const fn padded(len: usize) -> usize {
    len + pad_len(len)
}

/// Reads a big-endian u16 from the first two bytes; callers pass a range already checked.
fn read_u16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

/// Reads a big-endian u32 from the first four bytes; callers pass a range already checked.
fn read_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn write_u16(b: &mut [u8], v: u16) {
    b[..2].copy_from_slice(&v.to_be_bytes());
}

fn write_u32(b: &mut [u8], v: u32) {
    b[..4].copy_from_slice(&v.to_be_bytes());
}

/// The length field of an emitted element. Emitters are called with Reprs their caller built;
/// a length that does not fit the 16-bit field cannot be encoded, which is a caller bug.
fn length_field(len: usize) -> u16 {
    match u16::try_from(len) {
        Ok(l) => l,
        Err(_) => panic!("SCTP element of {len} bytes does not fit a 16-bit length field"),
    }
}

/// Splits the first type-length-value element (chunk, parameter or error cause) off `bytes`,
/// with the padding rule of the module documentation. Returns the element's `length` bytes and
/// how many bytes it occupies with its padding.
fn split_tlv(bytes: &[u8], min_len: usize) -> Result<(&[u8], usize)> {
    let len = tlv_len(bytes, min_len)?;
    let element = bytes.get(..len).ok_or(Error::Truncated)?;
    let with_padding = padded(len);
    let occupied = if bytes.len() >= with_padding {
        with_padding
    } else if bytes.len() == len {
        len
    } else {
        return Err(Error::BadPadding);
    };
    Ok((element, occupied))
}

/// The length rule shared by every type-length-value element, chunk (RFC 9260 §3.2), parameter
/// (§3.2.1) and error cause (§3.3.10): a 4-byte header with the 16-bit length at offset 2,
/// counting header and value but not padding. Returns that length, or `Truncated` if `bytes`
/// holds no length field or fewer bytes than it says, `BadLength` if it is below `min_len`.
/// The length is checked before the buffer size, so a too-short length is always `BadLength`.
fn tlv_len(bytes: &[u8], min_len: usize) -> Result<usize> {
    let len = bytes.get(2..4).map(read_u16).ok_or(Error::Truncated)?;
    let len = usize::from(len);
    if len < min_len {
        Err(Error::BadLength)
    } else if bytes.len() < len {
        Err(Error::Truncated)
    } else {
        Ok(len)
    }
}

/// Writes zeros over the padding after an element of `len` bytes (RFC 9260 §3.2: "the sender
/// MUST pad the chunk with all zero bytes").
fn zero_padding(buf: &mut [u8], len: usize) {
    buf[len..padded(len)].fill(0);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;

    #[test]
    fn unrecognized_action_is_the_upper_two_bits_of_a_chunk_type() {
        assert_eq!(
            UnrecognizedAction::of_chunk_type(0x3f),
            UnrecognizedAction::Discard
        );
        assert_eq!(
            UnrecognizedAction::of_chunk_type(0x40),
            UnrecognizedAction::DiscardAndReport
        );
        assert_eq!(
            UnrecognizedAction::of_chunk_type(0x84),
            UnrecognizedAction::Skip
        );
        assert_eq!(
            UnrecognizedAction::of_chunk_type(0xc1),
            UnrecognizedAction::SkipAndReport
        );
    }

    #[test]
    fn unrecognized_action_is_the_upper_two_bits_of_a_param_type() {
        assert_eq!(
            UnrecognizedAction::of_param_type(0x000b),
            UnrecognizedAction::Discard
        );
        assert_eq!(
            UnrecognizedAction::of_param_type(0x4001),
            UnrecognizedAction::DiscardAndReport
        );
        // usrsctp's ECN Capable, RANDOM, HMAC-ALGO, CHUNKS: skip, do not report.
        for t in [0x8000, 0x8002, 0x8003, 0x8004] {
            assert_eq!(
                UnrecognizedAction::of_param_type(t),
                UnrecognizedAction::Skip
            );
        }
        assert_eq!(
            UnrecognizedAction::of_param_type(0xc006),
            UnrecognizedAction::SkipAndReport
        );
    }

    #[test]
    fn unrecognized_action_continue_and_report_bits() {
        use UnrecognizedAction::*;
        let table = [
            (Discard, false, false),
            (DiscardAndReport, false, true),
            (Skip, true, false),
            (SkipAndReport, true, true),
        ];
        for (a, continues, reports) in table {
            assert_eq!((a.continues(), a.reports()), (continues, reports), "{a:?}");
        }
    }

    #[test]
    fn padding_is_at_most_three_bytes() {
        assert_eq!([0, 1, 2, 3, 4, 5].map(pad_len), [0, 3, 2, 1, 0, 3]);
        assert_eq!([0, 1, 4, 25].map(padded), [0, 4, 4, 28]);
    }

    #[test]
    fn split_tlv_accepts_full_or_omitted_final_padding() {
        // Length 5: full padding present, followed by another element.
        let b = [0, 0, 0, 5, 0xee, 0, 0, 0, 9, 9, 0, 4];
        assert_eq!(split_tlv(&b, 4), Ok((&b[..5], 8)));
        // Final element with its padding left out.
        assert_eq!(split_tlv(&b[..5], 4), Ok((&b[..5], 5)));
        // Padding bytes' values are ignored (RFC 9260 §3.2).
        let b = [0, 0, 0, 5, 0xee, 1, 2, 3];
        assert_eq!(split_tlv(&b, 4), Ok((&b[..5], 8)));
    }

    #[test]
    fn split_tlv_rejects_padding_cut_short() {
        let b = [0, 0, 0, 5, 0xee, 0, 0];
        assert_eq!(split_tlv(&b[..6], 4), Err(Error::BadPadding));
        assert_eq!(split_tlv(&b[..7], 4), Err(Error::BadPadding));
    }

    #[test]
    fn split_tlv_rejects_length_below_header() {
        for len in 0..4u8 {
            assert_eq!(
                split_tlv(&[0, 0, 0, len, 0, 0, 0, 0], 4),
                Err(Error::BadLength)
            );
        }
    }

    #[test]
    fn split_tlv_rejects_length_past_end_and_cut_header() {
        assert_eq!(
            split_tlv(&[0, 0, 0, 9, 1, 2, 3, 4], 4),
            Err(Error::Truncated)
        );
        for n in 0..4 {
            assert_eq!(split_tlv(&[0, 0, 0, 4][..n], 4), Err(Error::Truncated));
        }
    }
}
