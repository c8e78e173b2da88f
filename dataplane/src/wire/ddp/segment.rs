//! The DDP Segment Chunk: the user data of an SCTP DATA chunk with PPID 16 (RFC 5043 §5.2.2),
//! a DDP-SSN followed by one DDP Segment (RFC 5041 §4.4).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-------------------------------+-+-+-------+---+---------------+
//! |          DDP-SSN              |T|L| Rsvd  |DV |   RsvdULP     |  tagged, T=1
//! +-------------------------------+-+-+-------+---+---------------+  (RFC 5041 §4.2)
//! |                             STag                              |
//! +---------------------------------------------------------------+
//! |                          TO (64 bits)                         |
//! |                                                               |
//! +---------------------------------------------------------------+
//! |                     ULP Payload (if any) ...                  |
//!
//! +-------------------------------+-+-+-------+---+---------------+
//! |          DDP-SSN              |T|L| Rsvd  |DV | RsvdULP[0:7]  |  untagged, T=0
//! +-------------------------------+-+-+-------+---+---------------+  (RFC 5041 §4.3)
//! |                         RsvdULP[8:39]                         |
//! +---------------------------------------------------------------+
//! |                              QN                               |
//! +---------------------------------------------------------------+
//! |                              MSN                              |
//! +---------------------------------------------------------------+
//! |                              MO                               |
//! +---------------------------------------------------------------+
//! |                     ULP Payload (if any) ...                  |
//! ```
//!
//! The tagged header is 14 bytes and the untagged one 18 (RFC 5041 §5.2 subtracts exactly these
//! from the MULPDU); with the DDP-SSN the payload starts at byte 16 or 20.
//!
//! **DDP version.** [`Packet::new_checked`] validates lengths only, so the control field of a
//! segment of any DV can be read: [`Packet::version`] and [`Packet::tagged`] are what the receive
//! path needs to report "Invalid DDP version" (RFC 5041 §7.2: error 0x1/0x04 on a tagged
//! segment, 0x2/0x06 on an untagged one) with the DDP header ([`Packet::ddp_header`]) that §7.1
//! asks the report to include. [`Repr::parse`] refuses a DV other than 1 with
//! [`Error::Malformed`]: a header of another version cannot be trusted to have this layout. That
//! is the only cause of `Malformed` from this parser, so `Malformed` here means "wrong DDP
//! version". A segment shorter than the version-1 header its T bit names is `Truncated`
//! whatever its DV.
//!
//! **Reserved bits.** The four Rsvd bits of the control field "MUST be set to zero on transmit,
//! and not checked on receive" (RFC 5041 §4.1): [`Packet::control`] shows them, [`Repr`] drops
//! them, [`Repr::emit`] writes zero.

use super::{
    read_u16, read_u32, read_u64, DDP_SSN_LEN, DDP_VERSION, TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN,
};
use crate::wire::{Error, Result};

/// Byte ranges of the DDP Segment Chunk, counted from the DDP-SSN.
pub(crate) mod field {
    pub type Field = core::ops::Range<usize>;

    /// RFC 5043 §5.2.1.
    pub const DDP_SSN: Field = 0..2;
    /// RFC 5041 §4.1, in both header formats.
    pub const CONTROL: usize = 2;

    // Tagged Buffer Model header, RFC 5041 §4.2.
    pub const TAGGED_RSVD_ULP: Field = 3..4;
    pub const STAG: Field = 4..8;
    pub const TO: Field = 8..16;
    pub const TAGGED_PAYLOAD: usize = 16;

    // Untagged Buffer Model header, RFC 5041 §4.3.
    pub const UNTAGGED_RSVD_ULP: Field = 3..8;
    pub const QN: Field = 8..12;
    pub const MSN: Field = 12..16;
    pub const MO: Field = 16..20;
    pub const UNTAGGED_PAYLOAD: usize = 20;
}

// The field table and the header-length constants describe the same layout.
const _: () = assert!(field::TAGGED_PAYLOAD == DDP_SSN_LEN + TAGGED_HEADER_LEN);
const _: () = assert!(field::UNTAGGED_PAYLOAD == DDP_SSN_LEN + UNTAGGED_HEADER_LEN);

/// Bits of the DDP Control Field (RFC 5041 §4.1; the RFC numbers bit 0 as the most
/// significant): T, L, four Rsvd bits, a two-bit DV.
pub(crate) mod ctrl {
    pub const T: u8 = 0x80;
    pub const L: u8 = 0x40;
    pub const DV: u8 = 0x03;
}

/// A read/write view of a DDP Segment Chunk payload (DDP-SSN + DDP Segment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` without looking at it; accessors may panic if it is too short.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps `buffer` after [`Packet::check_len`]: no accessor can panic afterwards.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Packet::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// [`Error::Truncated`] unless the buffer holds the DDP-SSN, the control field and the whole
    /// header of the buffer model its T bit names (16 bytes tagged, 20 untagged). Everything past
    /// the header is ULP Payload, possibly none (RFC 5041 §5.2 allows zero-length messages).
    pub fn check_len(&self) -> Result<()> {
        let data = self.buffer.as_ref();
        match data.get(field::CONTROL) {
            Some(&c) if data.len() >= header_end(c & ctrl::T != 0) => Ok(()),
            _ => Err(Error::Truncated),
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// DDP Source Sequence Number (RFC 5043 §5.2.1).
    pub fn ddp_ssn(&self) -> u16 {
        read_u16(&self.buffer.as_ref()[field::DDP_SSN])
    }

    /// The whole DDP Control Field, reserved bits included (RFC 5041 §4.1).
    pub fn control(&self) -> u8 {
        self.buffer.as_ref()[field::CONTROL]
    }

    /// T: the Tagged Buffer Model (`true`) or the Untagged one (RFC 5041 §4.1).
    pub fn tagged(&self) -> bool {
        self.control() & ctrl::T != 0
    }

    /// L: the last DDP Segment of its DDP Message (RFC 5041 §4.1).
    pub fn last(&self) -> bool {
        self.control() & ctrl::L != 0
    }

    /// DV, the DDP version (RFC 5041 §4.1): 1 for RFC 5041; anything else is reported as
    /// "Invalid DDP version" (§7.2).
    pub fn version(&self) -> u8 {
        self.control() & ctrl::DV
    }

    /// Bytes before the ULP Payload: DDP-SSN plus the tagged or untagged header.
    pub fn header_len(&self) -> usize {
        header_end(self.tagged())
    }

    /// The DDP header (control field through STag/TO or QN/MSN/MO), without the DDP-SSN: what
    /// RFC 5041 §7.1 asks an error report to include.
    pub fn ddp_header(&self) -> &[u8] {
        &self.buffer.as_ref()[DDP_SSN_LEN..self.header_len()]
    }

    /// RsvdULP, opaque to DDP (RFC 5041 §4.2, §4.3): 1 byte when tagged, 5 bytes when untagged.
    pub fn rsvd_ulp(&self) -> &[u8] {
        let data = self.buffer.as_ref();
        if self.tagged() {
            &data[field::TAGGED_RSVD_ULP]
        } else {
            &data[field::UNTAGGED_RSVD_ULP]
        }
    }

    /// STag (RFC 5041 §4.2), or `None` on an untagged segment.
    pub fn stag(&self) -> Option<u32> {
        self.tagged()
            .then(|| read_u32(&self.buffer.as_ref()[field::STAG]))
    }

    /// TO, the Tagged Offset (RFC 5041 §4.2), or `None` on an untagged segment.
    pub fn to(&self) -> Option<u64> {
        self.tagged()
            .then(|| read_u64(&self.buffer.as_ref()[field::TO]))
    }

    /// QN, the Queue Number (RFC 5041 §4.3), or `None` on a tagged segment.
    pub fn qn(&self) -> Option<u32> {
        (!self.tagged()).then(|| read_u32(&self.buffer.as_ref()[field::QN]))
    }

    /// MSN, the Message Sequence Number (RFC 5041 §4.3), or `None` on a tagged segment.
    pub fn msn(&self) -> Option<u32> {
        (!self.tagged()).then(|| read_u32(&self.buffer.as_ref()[field::MSN]))
    }

    /// MO, the Message Offset (RFC 5041 §4.3), or `None` on a tagged segment.
    pub fn mo(&self) -> Option<u32> {
        (!self.tagged()).then(|| read_u32(&self.buffer.as_ref()[field::MO]))
    }

    /// The ULP Payload: everything after the header (its length is the chunk's, RFC 5041 §3
    /// item 7).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

/// Setters. The model-specific ones write at that model's offsets whatever T says: set T first
/// (as [`Repr::emit`] does). Each panics only if the buffer is shorter than the DDP-SSN plus
/// the header of the model whose field it writes, which `new_checked` rules out as long as T is
/// not changed afterwards.
impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_ddp_ssn(&mut self, value: u16) {
        self.buffer.as_mut()[field::DDP_SSN].copy_from_slice(&value.to_be_bytes());
    }

    /// Writes the whole control field, reserved bits included.
    pub fn set_control(&mut self, value: u8) {
        self.buffer.as_mut()[field::CONTROL] = value;
    }

    pub fn set_tagged(&mut self, value: bool) {
        self.set_control_bits(ctrl::T, if value { ctrl::T } else { 0 });
    }

    pub fn set_last(&mut self, value: bool) {
        self.set_control_bits(ctrl::L, if value { ctrl::L } else { 0 });
    }

    /// Sets DV; only the two low bits of `value` fit the field.
    pub fn set_version(&mut self, value: u8) {
        self.set_control_bits(ctrl::DV, value & ctrl::DV);
    }

    /// RsvdULP: 1 byte when tagged, 5 bytes when untagged.
    pub fn rsvd_ulp_mut(&mut self) -> &mut [u8] {
        let range = if self.tagged() {
            field::TAGGED_RSVD_ULP
        } else {
            field::UNTAGGED_RSVD_ULP
        };
        &mut self.buffer.as_mut()[range]
    }

    pub fn set_stag(&mut self, value: u32) {
        self.buffer.as_mut()[field::STAG].copy_from_slice(&value.to_be_bytes());
    }

    pub fn set_to(&mut self, value: u64) {
        self.buffer.as_mut()[field::TO].copy_from_slice(&value.to_be_bytes());
    }

    pub fn set_qn(&mut self, value: u32) {
        self.buffer.as_mut()[field::QN].copy_from_slice(&value.to_be_bytes());
    }

    pub fn set_msn(&mut self, value: u32) {
        self.buffer.as_mut()[field::MSN].copy_from_slice(&value.to_be_bytes());
    }

    pub fn set_mo(&mut self, value: u32) {
        self.buffer.as_mut()[field::MO].copy_from_slice(&value.to_be_bytes());
    }

    /// The ULP Payload, to fill in place.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }

    fn set_control_bits(&mut self, mask: u8, bits: u8) {
        let c = self.control();
        self.set_control((c & !mask) | bits);
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// End of the header (start of the ULP Payload), DDP-SSN included.
const fn header_end(tagged: bool) -> usize {
    if tagged {
        field::TAGGED_PAYLOAD
    } else {
        field::UNTAGGED_PAYLOAD
    }
}

/// The header fields of a tagged DDP Segment (RFC 5041 §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TaggedHeader {
    /// RsvdULP, 8 bits, passed to the ULP unchanged.
    pub rsvd_ulp: u8,
    /// STag: which Tagged Buffer of the Data Sink.
    pub stag: u32,
    /// TO: where in that buffer the ULP Payload goes.
    pub to: u64,
}

/// The header fields of an untagged DDP Segment (RFC 5041 §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UntaggedHeader {
    /// RsvdULP, 40 bits in wire order (`RsvdULP[0:7]` first), passed to the ULP unchanged. An
    /// array rather than an integer so that no value wider than 40 bits can be built.
    pub rsvd_ulp: [u8; 5],
    /// QN: which queue of Untagged Buffers.
    pub qn: u32,
    /// MSN: which DDP Message on that queue (starts at 1, RFC 5041 §4.3).
    pub msn: u32,
    /// MO: offset of this segment's ULP Payload in the message.
    pub mo: u32,
}

/// The buffer model of a segment with its header fields: the T bit decides which exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Header {
    Tagged(TaggedHeader),
    Untagged(UntaggedHeader),
}

impl Header {
    /// T as it goes on the wire.
    pub const fn is_tagged(&self) -> bool {
        matches!(self, Header::Tagged(_))
    }

    /// The DDP header length of this model: 14 or 18, without the DDP-SSN.
    pub const fn wire_len(&self) -> usize {
        super::header_len(self.is_tagged())
    }
}

/// A DDP Segment Chunk payload, parsed. The DDP version is not a field: a `Repr` is always
/// DV = 1 (RFC 5041 §4.1), and the reserved control bits are always zero on emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr<'a> {
    /// DDP-SSN (RFC 5043 §5.2.1).
    pub ddp_ssn: u16,
    /// L, the Last flag (RFC 5041 §4.1).
    pub last: bool,
    /// T and the header fields of that model.
    pub header: Header,
    /// The ULP Payload, borrowed from the packet.
    pub payload: &'a [u8],
}

impl<'a> Repr<'a> {
    /// Parses a DDP Segment Chunk payload.
    ///
    /// [`Error::Truncated`] if the buffer is shorter than its header; [`Error::Malformed`] if DV
    /// is not 1 (look at [`Packet::version`] and [`Packet::tagged`] to report RFC 5041 §7.2
    /// "Invalid DDP version").
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Repr<'a>> {
        packet.check_len()?;
        if packet.version() != DDP_VERSION {
            return Err(Error::Malformed);
        }
        let data: &'a [u8] = packet.buffer.as_ref();
        let header = if packet.tagged() {
            Header::Tagged(TaggedHeader {
                rsvd_ulp: data[field::TAGGED_RSVD_ULP.start],
                stag: read_u32(&data[field::STAG]),
                to: read_u64(&data[field::TO]),
            })
        } else {
            let r = &data[field::UNTAGGED_RSVD_ULP];
            Header::Untagged(UntaggedHeader {
                rsvd_ulp: [r[0], r[1], r[2], r[3], r[4]],
                qn: read_u32(&data[field::QN]),
                msn: read_u32(&data[field::MSN]),
                mo: read_u32(&data[field::MO]),
            })
        };
        Ok(Repr {
            ddp_ssn: packet.ddp_ssn(),
            last: packet.last(),
            header,
            payload: &data[header_end(packet.tagged())..],
        })
    }

    /// DDP-SSN plus the DDP header: 16 tagged, 20 untagged.
    pub const fn header_len(&self) -> usize {
        header_end(self.header.is_tagged())
    }

    /// The whole chunk payload: header and ULP Payload.
    pub const fn buffer_len(&self) -> usize {
        self.header_len() + self.payload.len()
    }

    /// Writes the header and copies the ULP Payload into `packet`, whose buffer must hold at
    /// least [`Repr::buffer_len`] bytes ([`Error::Truncated`] otherwise, and nothing is
    /// written). Bytes past `buffer_len` are left as they are.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        let start = self.header_len();
        let end = self.buffer_len();
        let buf = packet.buffer.as_mut();
        if buf.len() < end {
            return Err(Error::Truncated);
        }
        buf[start..end].copy_from_slice(self.payload);
        self.write_header(packet);
        Ok(())
    }

    /// Writes only the DDP-SSN and the DDP header into `packet` (at least
    /// [`Repr::header_len`] bytes, [`Error::Truncated`] otherwise), for a sender that chains the
    /// ULP Payload as a separate buffer instead of copying it.
    pub fn emit_header<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        if packet.buffer.as_ref().len() < self.header_len() {
            return Err(Error::Truncated);
        }
        self.write_header(packet);
        Ok(())
    }

    /// The buffer holds at least `header_len` bytes.
    fn write_header<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_ddp_ssn(self.ddp_ssn);
        // Reserved bits zero on transmit (RFC 5041 §4.1).
        let mut control = DDP_VERSION;
        if self.header.is_tagged() {
            control |= ctrl::T;
        }
        if self.last {
            control |= ctrl::L;
        }
        packet.set_control(control);
        match self.header {
            Header::Tagged(h) => {
                packet.rsvd_ulp_mut().copy_from_slice(&[h.rsvd_ulp]);
                packet.set_stag(h.stag);
                packet.set_to(h.to);
            }
            Header::Untagged(h) => {
                packet.rsvd_ulp_mut().copy_from_slice(&h.rsvd_ulp);
                packet.set_qn(h.qn);
                packet.set_msn(h.msn);
                packet.set_mo(h.mo);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// As in `assoc-ddp-default.pcap` frame 9, with a 4-byte payload: DDP-SSN 1, control 0x81
    /// (T=1 L=0 DV=1), RsvdULP 0, STag 0x00012a05, TO 0x1000.
    const TAGGED: [u8; 20] = [
        0x00, 0x01, 0x81, 0x00, 0x00, 0x01, 0x2a, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
        0x00, b'0', b'1', b'2', b'3',
    ];

    /// As in `assoc-ddp-default.pcap` frame 11, third chunk, with a 3-byte payload: DDP-SSN 4,
    /// control 0x41 (T=0 L=1 DV=1), RsvdULP 0, QN 0, MSN 1, MO 0.
    const UNTAGGED: [u8; 23] = [
        0x00, 0x04, 0x41, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x01, 0x00, 0x00, 0x00, 0x00, b'7', b'8', b'9',
    ];

    /// Every field distinct, so a swapped or misplaced field shows.
    const TAGGED_DISTINCT: [u8; 18] = [
        0xbe, 0xef, 0xc1, 0x5a, 0x11, 0x22, 0x33, 0x44, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
        0x08, 0xde, 0xad,
    ];

    fn tagged_distinct_repr() -> Repr<'static> {
        Repr {
            ddp_ssn: 0xbeef,
            last: true,
            header: Header::Tagged(TaggedHeader {
                rsvd_ulp: 0x5a,
                stag: 0x1122_3344,
                to: 0x0102_0304_0506_0708,
            }),
            payload: &[0xde, 0xad],
        }
    }

    const UNTAGGED_DISTINCT: [u8; 21] = [
        0x12, 0x34, 0x01, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0x0a, 0x0b, 0x0c, 0x0d, 0x10, 0x20, 0x30,
        0x40, 0x50, 0x60, 0x70, 0x80, 0x99,
    ];

    fn untagged_distinct_repr() -> Repr<'static> {
        Repr {
            ddp_ssn: 0x1234,
            last: false,
            header: Header::Untagged(UntaggedHeader {
                rsvd_ulp: [0xa1, 0xa2, 0xa3, 0xa4, 0xa5],
                qn: 0x0a0b_0c0d,
                msn: 0x1020_3040,
                mo: 0x5060_7080,
            }),
            payload: &[0x99],
        }
    }

    #[test]
    fn tagged_view_reads_every_field_of_rfc5041_4_2() {
        let p = Packet::new_checked(&TAGGED[..]).unwrap();
        assert_eq!(p.ddp_ssn(), 1);
        assert_eq!(p.control(), 0x81);
        assert!(p.tagged() && !p.last());
        assert_eq!(p.version(), 1);
        assert_eq!(p.header_len(), 16);
        assert_eq!(p.ddp_header(), &TAGGED[2..16]);
        assert_eq!(p.rsvd_ulp(), &[0]);
        assert_eq!(p.stag(), Some(0x0001_2a05));
        assert_eq!(p.to(), Some(0x1000));
        assert_eq!(p.payload(), b"0123");
    }

    #[test]
    fn untagged_view_reads_every_field_of_rfc5041_4_3() {
        let p = Packet::new_checked(&UNTAGGED[..]).unwrap();
        assert_eq!(p.ddp_ssn(), 4);
        assert_eq!(p.control(), 0x41);
        assert!(!p.tagged() && p.last());
        assert_eq!(p.version(), 1);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.ddp_header(), &UNTAGGED[2..20]);
        assert_eq!(p.rsvd_ulp(), &[0; 5]);
        assert_eq!((p.qn(), p.msn(), p.mo()), (Some(0), Some(1), Some(0)));
        assert_eq!(p.payload(), b"789");
    }

    #[test]
    fn fields_of_the_other_buffer_model_are_none() {
        let t = Packet::new_checked(&TAGGED[..]).unwrap();
        assert_eq!((t.qn(), t.msn(), t.mo()), (None, None, None));
        let u = Packet::new_checked(&UNTAGGED[..]).unwrap();
        assert_eq!((u.stag(), u.to()), (None, None));
    }

    #[test]
    fn parse_tagged_fixture() {
        let r = Repr::parse(&Packet::new_checked(&TAGGED[..]).unwrap()).unwrap();
        assert_eq!(
            r,
            Repr {
                ddp_ssn: 1,
                last: false,
                header: Header::Tagged(TaggedHeader {
                    rsvd_ulp: 0,
                    stag: 0x0001_2a05,
                    to: 0x1000
                }),
                payload: b"0123",
            }
        );
        assert_eq!((r.header.wire_len(), r.header_len()), (14, 16));
        assert_eq!(r.buffer_len(), TAGGED.len());
    }

    #[test]
    fn parse_untagged_fixture() {
        let r = Repr::parse(&Packet::new_checked(&UNTAGGED[..]).unwrap()).unwrap();
        assert_eq!(
            r,
            Repr {
                ddp_ssn: 4,
                last: true,
                header: Header::Untagged(UntaggedHeader {
                    rsvd_ulp: [0; 5],
                    qn: 0,
                    msn: 1,
                    mo: 0
                }),
                payload: b"789",
            }
        );
        assert_eq!((r.header.wire_len(), r.header_len()), (18, 20));
        assert_eq!(r.buffer_len(), UNTAGGED.len());
    }

    #[test]
    fn parse_fields_are_big_endian_and_in_rfc_order() {
        let t = Repr::parse(&Packet::new_unchecked(&TAGGED_DISTINCT[..])).unwrap();
        assert_eq!(t, tagged_distinct_repr());
        let u = Repr::parse(&Packet::new_unchecked(&UNTAGGED_DISTINCT[..])).unwrap();
        assert_eq!(u, untagged_distinct_repr());
    }

    #[test]
    fn emit_tagged_writes_every_byte() {
        let r = tagged_distinct_repr();
        let mut buf = [0xa5u8; 18];
        r.emit(&mut Packet::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf, TAGGED_DISTINCT);
    }

    #[test]
    fn emit_untagged_writes_every_byte() {
        let r = untagged_distinct_repr();
        let mut buf = [0xa5u8; 21];
        r.emit(&mut Packet::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf, UNTAGGED_DISTINCT);
    }

    #[test]
    fn emit_reproduces_the_capture_fixtures() {
        for fixture in [&TAGGED[..], &UNTAGGED[..]] {
            let r = Repr::parse(&Packet::new_checked(fixture).unwrap()).unwrap();
            let mut buf = vec![0xa5u8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut buf[..])).unwrap();
            assert_eq!(buf, fixture);
        }
    }

    #[test]
    fn emit_header_leaves_the_payload_bytes_alone() {
        let r = untagged_distinct_repr();
        let mut buf = [0xa5u8; 21];
        r.emit_header(&mut Packet::new_unchecked(&mut buf[..20]))
            .unwrap();
        assert_eq!(buf[..20], UNTAGGED_DISTINCT[..20]);
        assert_eq!(buf[20], 0xa5);
    }

    #[test]
    fn emit_into_a_short_buffer_is_truncated_and_writes_nothing() {
        let r = tagged_distinct_repr();
        let mut buf = [0xa5u8; 17];
        let e = r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(e, Err(Error::Truncated));
        assert_eq!(buf, [0xa5u8; 17]);
        let e = r.emit_header(&mut Packet::new_unchecked(&mut buf[..15]));
        assert_eq!(e, Err(Error::Truncated));
        assert_eq!(buf, [0xa5u8; 17]);
    }

    #[test]
    fn rfc5041_4_2_truncated_tagged_header_is_refused() {
        for len in 0..16 {
            let e = Packet::new_checked(&TAGGED[..len]).unwrap_err();
            assert_eq!(e, Error::Truncated, "length {len}");
            let e = Repr::parse(&Packet::new_unchecked(&TAGGED[..len])).unwrap_err();
            assert_eq!(e, Error::Truncated, "length {len}");
        }
    }

    #[test]
    fn rfc5041_4_3_truncated_untagged_header_is_refused() {
        for len in 0..20 {
            let e = Packet::new_checked(&UNTAGGED[..len]).unwrap_err();
            assert_eq!(e, Error::Truncated, "length {len}");
            let e = Repr::parse(&Packet::new_unchecked(&UNTAGGED[..len])).unwrap_err();
            assert_eq!(e, Error::Truncated, "length {len}");
        }
    }

    #[test]
    fn rfc5041_5_2_zero_length_segments_parse_with_an_empty_payload() {
        let t = Repr::parse(&Packet::new_checked(&TAGGED[..16]).unwrap()).unwrap();
        assert!(t.payload.is_empty());
        let u = Repr::parse(&Packet::new_checked(&UNTAGGED[..20]).unwrap()).unwrap();
        assert!(u.payload.is_empty());
    }

    #[test]
    fn rfc5041_4_1_reserved_bits_are_ignored_on_receive_and_zero_on_transmit() {
        let mut b = TAGGED;
        b[2] = 0x81 | 0x3c; // all four Rsvd bits set
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.control(), 0xbd);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr::parse(&Packet::new_checked(&TAGGED[..]).unwrap()).unwrap()
        );
        let mut out = [0xa5u8; 20];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, TAGGED);
    }

    #[test]
    fn rfc5041_7_2_other_ddp_version_is_identifiable_and_refused_by_repr() {
        for (fixture, tagged) in [(&TAGGED[..], true), (&UNTAGGED[..], false)] {
            for dv in [0u8, 2, 3] {
                let mut b = fixture.to_vec();
                b[2] = (b[2] & !0x03) | dv;
                // The view still opens, so the receive path can pick error 0x1/0x04 (tagged)
                // or 0x2/0x06 (untagged) and include the header in the report.
                let p = Packet::new_checked(&b[..]).unwrap();
                assert_eq!((p.version(), p.tagged()), (dv, tagged));
                assert_eq!(p.ddp_header(), &b[2..p.header_len()]);
                assert_eq!(Repr::parse(&p), Err(Error::Malformed));
            }
        }
    }

    #[test]
    fn setters_write_what_getters_read() {
        let mut buf = [0u8; 24];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_ddp_ssn(0xfffe);
        p.set_tagged(false);
        p.set_last(true);
        p.set_version(1);
        p.rsvd_ulp_mut().copy_from_slice(&[1, 2, 3, 4, 5]);
        p.set_qn(7);
        p.set_msn(8);
        p.set_mo(9);
        p.payload_mut().copy_from_slice(b"abcd");
        assert_eq!(p.control(), 0x41);
        assert_eq!(
            (p.ddp_ssn(), p.qn(), p.msn(), p.mo()),
            (0xfffe, Some(7), Some(8), Some(9))
        );
        assert_eq!(p.rsvd_ulp(), &[1, 2, 3, 4, 5]);
        assert_eq!(p.payload(), b"abcd");
        p.set_tagged(true);
        p.set_last(false);
        p.rsvd_ulp_mut()[0] = 0x77;
        p.set_stag(0xdead_beef);
        p.set_to(u64::MAX - 1);
        assert_eq!(p.control(), 0x81);
        assert_eq!(
            (p.rsvd_ulp(), p.stag(), p.to()),
            (&[0x77][..], Some(0xdead_beef), Some(u64::MAX - 1))
        );
        assert_eq!(p.payload().len(), 8);
        p.set_version(0xff);
        assert_eq!(p.version(), 3);
        assert_eq!(p.control(), 0x83);
    }

    fn arb_header() -> impl Strategy<Value = Header> {
        prop_oneof![
            (any::<u8>(), any::<u32>(), any::<u64>()).prop_map(|(rsvd_ulp, stag, to)| {
                Header::Tagged(TaggedHeader { rsvd_ulp, stag, to })
            }),
            (any::<[u8; 5]>(), any::<u32>(), any::<u32>(), any::<u32>()).prop_map(
                |(rsvd_ulp, qn, msn, mo)| Header::Untagged(UntaggedHeader {
                    rsvd_ulp,
                    qn,
                    msn,
                    mo
                })
            ),
        ]
    }

    proptest! {
        #[test]
        fn repr_emit_parse_round_trips(
            ddp_ssn in any::<u16>(),
            last in any::<bool>(),
            header in arb_header(),
            payload in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let repr = Repr { ddp_ssn, last, header, payload: &payload };
            let mut buf = vec![0xa5u8; repr.buffer_len()];
            repr.emit(&mut Packet::new_unchecked(&mut buf[..])).unwrap();
            let parsed = Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap();
            prop_assert_eq!(parsed, repr);
        }

        #[test]
        fn any_bytes_parse_or_fail_without_panicking(
            bytes in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = (p.ddp_ssn(), p.rsvd_ulp(), p.stag(), p.to(), p.qn(), p.msn(), p.mo());
                let _ = (p.ddp_header(), p.payload());
                if let Ok(r) = Repr::parse(&p) {
                    prop_assert_eq!(r.buffer_len(), bytes.len());
                }
            }
        }
    }
}
