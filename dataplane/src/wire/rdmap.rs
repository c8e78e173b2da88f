//! RDMAP on the wire (RFC 5040 §4): what RDMAP puts into DDP's RsvdULP field, and the two
//! headers it carries at the start of a ULP Payload.
//!
//! RDMAP has no header of its own in front of DDP's. It owns DDP's RsvdULP (RFC 5041 §4.2,
//! §4.3; RFC 5040 §4.1):
//!
//! ```text
//!  0 1 2 3 4 5 6 7
//! +-+-+-+-+-+-+-+-+
//! |RV |Rsv| Opcode|   RDMAP Control Field: the first RsvdULP octet of every DDP Segment
//! +-+-+-+-+-+-+-+-+
//! then, untagged segments only, RsvdULP[8:39]: the Invalidate STag of a Send with Invalidate
//! or a Send with SE and Invalidate, reserved (zero on transmit) on every other message.
//! ```
//!
//! RV is the RDMAP version, 1 for RFC 5040 ([`RDMAP_VERSION`]); an RV of any other value is
//! "Invalid RDMAP version" (§4.8, 0x2/0x05), so [`Control`] keeps it as read. The two reserved
//! bits are zero on transmit and not checked on receive.
//!
//! Two messages carry an RDMAP header at the start of their DDP ULP Payload (§4.2):
//! - RDMA Read Request ([`ReadRequest`], §4.4): Data Sink STag and TO, RDMA Read Message Size,
//!   Data Source STag and TO, 28 bytes and nothing after them;
//! - Terminate ([`TerminatePacket`], [`TerminateRepr`], §4.8): the Terminate Control (layer,
//!   error type, error code, the M/D/R header flags), then as the flags say the DDP Segment
//!   Length and the DDP header of the segment that caused it, and the RDMA Read Request header
//!   it concerned.
//!
//! Which DDP buffer model and queue carries each message (§4.2) is [`Opcode::tagged`] and
//! [`Opcode::queue`]; the semantics that check a received message against that table live
//! above DDP, not here. Views follow the rest of `wire`: `new_checked` validates lengths once,
//! accessors cannot panic after it, Reprs refuse what they cannot emit back byte for byte.

use core::fmt;

use super::ddp::{header_len as ddp_header_len, read_u32, read_u64, DdpError};
use super::{Error, Result};

/// The RDMAP version of RFC 5040: the RV field's only valid value (§4.1).
pub const RDMAP_VERSION: u8 = 1;

/// Untagged queue of Send, Send with Invalidate, Send with SE, Send with SE and Invalidate
/// (RFC 5040 §4.2, §5.3).
pub const QN_SEND: u32 = 0;
/// Untagged queue of RDMA Read Requests (RFC 5040 §4.2, §5.2).
pub const QN_READ_REQUEST: u32 = 1;
/// Untagged queue of Terminate messages (RFC 5040 §4.2, §5.4).
pub const QN_TERMINATE: u32 = 2;

/// Length of the RDMA Read Request header (RFC 5040 §4.4): 4 + 8 + 4 + 4 + 8 bytes.
pub const READ_REQUEST_LEN: usize = 28;
/// Length of the Terminate Control field (RFC 5040 §4.8).
pub const TERMINATE_CONTROL_LEN: usize = 4;
/// Length of the DDP Segment Length field of a Terminate header (RFC 5040 §4.8).
pub const TERMINATE_SEGMENT_LEN_LEN: usize = 2;

/// RDMAP Control Field bits (RFC 5040 §4.1; bit 0 is the most significant).
mod ctrl {
    pub const RV_SHIFT: u8 = 6;
    pub const OPCODE: u8 = 0x0f;
}

/// An RDMA Message opcode (RFC 5040 §4.2). Unknown values (the reserved 1000b–1111b, until
/// RFC 7306 gives some of them meaning) round-trip as [`Opcode::Unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// 0000b: RDMA Write, tagged.
    Write,
    /// 0001b: RDMA Read Request, untagged on QN 1.
    ReadRequest,
    /// 0010b: RDMA Read Response, tagged, into the requester's Data Sink.
    ReadResponse,
    /// 0011b: Send, untagged on QN 0.
    Send,
    /// 0100b: Send with Invalidate.
    SendInvalidate,
    /// 0101b: Send with Solicited Event.
    SendSe,
    /// 0110b: Send with Solicited Event and Invalidate.
    SendSeInvalidate,
    /// 0111b: Terminate, untagged on QN 2.
    Terminate,
    /// Any other 4-bit value.
    Unknown(u8),
}

impl Opcode {
    /// The opcode of a 4-bit field value (the upper bits of `bits` are ignored).
    pub const fn from_bits(bits: u8) -> Opcode {
        match bits & ctrl::OPCODE {
            0x0 => Opcode::Write,
            0x1 => Opcode::ReadRequest,
            0x2 => Opcode::ReadResponse,
            0x3 => Opcode::Send,
            0x4 => Opcode::SendInvalidate,
            0x5 => Opcode::SendSe,
            0x6 => Opcode::SendSeInvalidate,
            0x7 => Opcode::Terminate,
            other => Opcode::Unknown(other),
        }
    }

    /// The 4-bit field value.
    pub const fn bits(self) -> u8 {
        match self {
            Opcode::Write => 0x0,
            Opcode::ReadRequest => 0x1,
            Opcode::ReadResponse => 0x2,
            Opcode::Send => 0x3,
            Opcode::SendInvalidate => 0x4,
            Opcode::SendSe => 0x5,
            Opcode::SendSeInvalidate => 0x6,
            Opcode::Terminate => 0x7,
            Opcode::Unknown(bits) => bits & ctrl::OPCODE,
        }
    }

    /// The DDP buffer model the message must use (RFC 5040 §4.2): `Some(true)` tagged,
    /// `Some(false)` untagged, `None` for an opcode RFC 5040 does not define.
    pub const fn tagged(self) -> Option<bool> {
        match self {
            Opcode::Write | Opcode::ReadResponse => Some(true),
            Opcode::ReadRequest
            | Opcode::Send
            | Opcode::SendInvalidate
            | Opcode::SendSe
            | Opcode::SendSeInvalidate
            | Opcode::Terminate => Some(false),
            Opcode::Unknown(_) => None,
        }
    }

    /// The untagged queue the message must arrive on (RFC 5040 §4.2), `None` for tagged and
    /// unknown opcodes.
    pub const fn queue(self) -> Option<u32> {
        match self {
            Opcode::Send | Opcode::SendInvalidate | Opcode::SendSe | Opcode::SendSeInvalidate => {
                Some(QN_SEND)
            }
            Opcode::ReadRequest => Some(QN_READ_REQUEST),
            Opcode::Terminate => Some(QN_TERMINATE),
            Opcode::Write | Opcode::ReadResponse | Opcode::Unknown(_) => None,
        }
    }

    /// Whether RsvdULP[8:39] holds an STag to invalidate (RFC 5040 §4.1).
    pub const fn carries_invalidate_stag(self) -> bool {
        matches!(self, Opcode::SendInvalidate | Opcode::SendSeInvalidate)
    }

    /// Whether the message asks for a Solicited Event at the Data Sink (RFC 5040 §5.3).
    pub const fn solicited_event(self) -> bool {
        matches!(self, Opcode::SendSe | Opcode::SendSeInvalidate)
    }

    /// The message's name as RFC 5040 §4.2 gives it.
    pub const fn name(self) -> &'static str {
        match self {
            Opcode::Write => "RDMA Write",
            Opcode::ReadRequest => "RDMA Read Request",
            Opcode::ReadResponse => "RDMA Read Response",
            Opcode::Send => "Send",
            Opcode::SendInvalidate => "Send with Invalidate",
            Opcode::SendSe => "Send with Solicited Event",
            Opcode::SendSeInvalidate => "Send with Solicited Event and Invalidate",
            Opcode::Terminate => "Terminate",
            Opcode::Unknown(_) => "unknown opcode",
        }
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Opcode::Unknown(bits) => write!(f, "unknown opcode {bits:#06b}"),
            known => f.write_str(known.name()),
        }
    }
}

/// The RDMAP Control Field (RFC 5040 §4.1), as read: RV is kept whatever its value, so that a
/// receiver can report "Invalid RDMAP version".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Control {
    /// RV, two bits: [`RDMAP_VERSION`] for RFC 5040.
    pub version: u8,
    pub opcode: Opcode,
}

impl Control {
    /// A version-1 control field for `opcode`.
    pub const fn new(opcode: Opcode) -> Control {
        Control {
            version: RDMAP_VERSION,
            opcode,
        }
    }

    /// Reads the first RsvdULP octet; the two reserved bits are not checked (§4.1).
    pub const fn from_byte(byte: u8) -> Control {
        Control {
            version: byte >> ctrl::RV_SHIFT,
            opcode: Opcode::from_bits(byte),
        }
    }

    /// The octet on the wire, reserved bits zero; only the two low bits of `version` fit.
    pub const fn to_byte(self) -> u8 {
        (self.version & 0x3) << ctrl::RV_SHIFT | self.opcode.bits()
    }

    /// The RsvdULP of a tagged segment: the control field alone (RFC 5041 §4.2).
    pub const fn tagged_rsvd_ulp(self) -> u8 {
        self.to_byte()
    }

    /// The RsvdULP of an untagged segment (RFC 5041 §4.3): the control field, then the
    /// Invalidate STag, which RFC 5040 §4.1 wants zero on messages that carry none.
    pub const fn untagged_rsvd_ulp(self, invalidate_stag: u32) -> [u8; 5] {
        let s = invalidate_stag.to_be_bytes();
        [self.to_byte(), s[0], s[1], s[2], s[3]]
    }

    /// The control field of a segment's RsvdULP (1 byte tagged, 5 untagged), or `None` for an
    /// empty slice.
    pub fn from_rsvd_ulp(rsvd_ulp: &[u8]) -> Option<Control> {
        rsvd_ulp.first().map(|&b| Control::from_byte(b))
    }
}

/// RsvdULP[8:39] of an untagged segment: the Invalidate STag (RFC 5040 §4.1), or `None` if
/// `rsvd_ulp` is not the 5 bytes of an untagged header.
pub fn invalidate_stag(rsvd_ulp: &[u8]) -> Option<u32> {
    match rsvd_ulp {
        [_, a, b, c, d] => Some(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

/// The RDMA Read Request header (RFC 5040 §4.4), the whole ULP Payload of a Read Request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadRequest {
    /// Data Sink STag: where the Read Response is to be placed, at the requester.
    pub sink_stag: u32,
    /// Data Sink Tagged Offset.
    pub sink_to: u64,
    /// RDMA Read Message Size, in bytes (zero is legal, §5.2).
    pub size: u32,
    /// Data Source STag: the buffer the responder reads, which must allow remote read.
    pub source_stag: u32,
    /// Data Source Tagged Offset.
    pub source_to: u64,
}

impl ReadRequest {
    /// Parses a Read Request's ULP Payload: [`Error::Truncated`] below 28 bytes,
    /// [`Error::BadLength`] above (the message carries the header and nothing else, §4.4).
    pub fn parse(payload: &[u8]) -> Result<ReadRequest> {
        match payload.len() {
            n if n < READ_REQUEST_LEN => Err(Error::Truncated),
            READ_REQUEST_LEN => Ok(ReadRequest::read(payload)),
            _ => Err(Error::BadLength),
        }
    }

    /// The 28 header bytes; `b` holds at least that many.
    fn read(b: &[u8]) -> ReadRequest {
        ReadRequest {
            sink_stag: read_u32(&b[0..4]),
            sink_to: read_u64(&b[4..12]),
            size: read_u32(&b[12..16]),
            source_stag: read_u32(&b[16..20]),
            source_to: read_u64(&b[20..28]),
        }
    }

    /// The header as it goes on the wire.
    pub fn to_bytes(&self) -> [u8; READ_REQUEST_LEN] {
        let mut b = [0u8; READ_REQUEST_LEN];
        b[0..4].copy_from_slice(&self.sink_stag.to_be_bytes());
        b[4..12].copy_from_slice(&self.sink_to.to_be_bytes());
        b[12..16].copy_from_slice(&self.size.to_be_bytes());
        b[16..20].copy_from_slice(&self.source_stag.to_be_bytes());
        b[20..28].copy_from_slice(&self.source_to.to_be_bytes());
        b
    }
}

/// The layer a Terminate blames (RFC 5040 §4.8, 4 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// 0x0: RDMAP.
    Rdmap,
    /// 0x1: DDP.
    Ddp,
    /// 0x2: the LLP (SCTP here).
    Llp,
    /// Any other value.
    Unknown(u8),
}

impl Layer {
    pub const fn from_bits(bits: u8) -> Layer {
        match bits & 0xf {
            0x0 => Layer::Rdmap,
            0x1 => Layer::Ddp,
            0x2 => Layer::Llp,
            other => Layer::Unknown(other),
        }
    }

    pub const fn bits(self) -> u8 {
        match self {
            Layer::Rdmap => 0x0,
            Layer::Ddp => 0x1,
            Layer::Llp => 0x2,
            Layer::Unknown(bits) => bits & 0xf,
        }
    }
}

/// Every RDMAP error number of RFC 5040 §4.8 (layer 0x0): error type and code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RdmapError {
    /// 0x0 / 0x00: Local Catastrophic Error.
    LocalCatastrophic,
    /// 0x1 / 0x00: Remote Protection Error, Invalid STag.
    InvalidStag,
    /// 0x1 / 0x01: Remote Protection Error, Base or bounds violation.
    BaseOrBounds,
    /// 0x1 / 0x02: Remote Protection Error, Access rights violation.
    AccessRights,
    /// 0x1 / 0x03: Remote Protection Error, STag not associated with RDMAP Stream.
    StagNotAssociated,
    /// 0x1 / 0x04: Remote Protection Error, TO wrap.
    ToWrap,
    /// 0x1 / 0x09: Remote Protection Error, STag cannot be invalidated.
    ProtectionCannotInvalidate,
    /// 0x1 / 0xff: Remote Protection Error, unspecified.
    ProtectionUnspecified,
    /// 0x2 / 0x05: Remote Operation Error, Invalid RDMAP version.
    InvalidVersion,
    /// 0x2 / 0x06: Remote Operation Error, Unexpected OpCode.
    UnexpectedOpcode,
    /// 0x2 / 0x07: Remote Operation Error, Catastrophic error localized to the RDMAP Stream.
    CatastrophicStream,
    /// 0x2 / 0x08: Remote Operation Error, Catastrophic error, global.
    CatastrophicGlobal,
    /// 0x2 / 0x09: Remote Operation Error, STag cannot be invalidated.
    OperationCannotInvalidate,
    /// 0x2 / 0xff: Remote Operation Error, unspecified.
    OperationUnspecified,
}

impl RdmapError {
    /// The 4-bit Error Type.
    pub const fn error_type(self) -> u8 {
        use RdmapError::*;
        match self {
            LocalCatastrophic => 0x0,
            InvalidStag
            | BaseOrBounds
            | AccessRights
            | StagNotAssociated
            | ToWrap
            | ProtectionCannotInvalidate
            | ProtectionUnspecified => 0x1,
            InvalidVersion
            | UnexpectedOpcode
            | CatastrophicStream
            | CatastrophicGlobal
            | OperationCannotInvalidate
            | OperationUnspecified => 0x2,
        }
    }

    /// The 8-bit Error Code.
    pub const fn code(self) -> u8 {
        use RdmapError::*;
        match self {
            LocalCatastrophic | InvalidStag => 0x00,
            BaseOrBounds => 0x01,
            AccessRights => 0x02,
            StagNotAssociated => 0x03,
            ToWrap => 0x04,
            InvalidVersion => 0x05,
            UnexpectedOpcode => 0x06,
            CatastrophicStream => 0x07,
            CatastrophicGlobal => 0x08,
            ProtectionCannotInvalidate | OperationCannotInvalidate => 0x09,
            ProtectionUnspecified | OperationUnspecified => 0xff,
        }
    }

    /// The error a type and code stand for, if RFC 5040 defines it.
    pub const fn from_number(error_type: u8, code: u8) -> Option<RdmapError> {
        use RdmapError::*;
        Some(match (error_type, code) {
            (0x0, 0x00) => LocalCatastrophic,
            (0x1, 0x00) => InvalidStag,
            (0x1, 0x01) => BaseOrBounds,
            (0x1, 0x02) => AccessRights,
            (0x1, 0x03) => StagNotAssociated,
            (0x1, 0x04) => ToWrap,
            (0x1, 0x09) => ProtectionCannotInvalidate,
            (0x1, 0xff) => ProtectionUnspecified,
            (0x2, 0x05) => InvalidVersion,
            (0x2, 0x06) => UnexpectedOpcode,
            (0x2, 0x07) => CatastrophicStream,
            (0x2, 0x08) => CatastrophicGlobal,
            (0x2, 0x09) => OperationCannotInvalidate,
            (0x2, 0xff) => OperationUnspecified,
            _ => return None,
        })
    }
}

impl fmt::Display for RdmapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use RdmapError::*;
        let what = match self {
            LocalCatastrophic => "local catastrophic error",
            InvalidStag => "invalid STag",
            BaseOrBounds => "base or bounds violation",
            AccessRights => "access rights violation",
            StagNotAssociated => "STag not associated with RDMAP stream",
            ToWrap => "TO wrap",
            ProtectionCannotInvalidate | OperationCannotInvalidate => "STag cannot be invalidated",
            ProtectionUnspecified | OperationUnspecified => "unspecified error",
            InvalidVersion => "invalid RDMAP version",
            UnexpectedOpcode => "unexpected opcode",
            CatastrophicStream => "catastrophic error, localized to RDMAP stream",
            CatastrophicGlobal => "catastrophic error, global",
        };
        write!(
            f,
            "{what} (RDMAP error {:#x}/{:#04x})",
            self.error_type(),
            self.code()
        )
    }
}

impl std::error::Error for RdmapError {}

/// What a Terminate reports: the layer, error type and code of its Terminate Control, read as
/// RFC 5040 §4.8 (RDMAP) or RFC 5041 §7.2 (DDP) define them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TerminateError {
    Rdmap(RdmapError),
    Ddp(DdpError),
    /// A number neither RFC defines (the LLP's, or unknown): layer, type, code as read.
    Other {
        layer: Layer,
        error_type: u8,
        code: u8,
    },
}

impl TerminateError {
    /// Reads a (layer, type, code) triple.
    pub const fn from_number(layer: Layer, error_type: u8, code: u8) -> TerminateError {
        let known = match layer {
            Layer::Rdmap => match RdmapError::from_number(error_type, code) {
                Some(e) => Some(TerminateError::Rdmap(e)),
                None => None,
            },
            Layer::Ddp => match DdpError::from_number(error_type, code) {
                Some(e) => Some(TerminateError::Ddp(e)),
                None => None,
            },
            Layer::Llp | Layer::Unknown(_) => None,
        };
        match known {
            Some(e) => e,
            None => TerminateError::Other {
                layer,
                error_type: error_type & 0xf,
                code,
            },
        }
    }

    pub const fn layer(self) -> Layer {
        match self {
            TerminateError::Rdmap(_) => Layer::Rdmap,
            TerminateError::Ddp(_) => Layer::Ddp,
            TerminateError::Other { layer, .. } => layer,
        }
    }

    pub const fn error_type(self) -> u8 {
        match self {
            TerminateError::Rdmap(e) => e.error_type(),
            TerminateError::Ddp(e) => e.error_type(),
            TerminateError::Other { error_type, .. } => error_type & 0xf,
        }
    }

    pub const fn code(self) -> u8 {
        match self {
            TerminateError::Rdmap(e) => e.code(),
            TerminateError::Ddp(e) => e.code(),
            TerminateError::Other { code, .. } => code,
        }
    }
}

impl fmt::Display for TerminateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TerminateError::Rdmap(e) => e.fmt(f),
            TerminateError::Ddp(e) => e.fmt(f),
            TerminateError::Other {
                layer,
                error_type,
                code,
            } => write!(
                f,
                "error {:#x}/{error_type:#x}/{code:#04x} (layer/type/code)",
                layer.bits()
            ),
        }
    }
}

/// Header control bits of the Terminate Control (RFC 5040 §4.8), in its third octet.
mod hdrct {
    /// M: the DDP Segment Length field holds the terminated segment's length.
    pub const M: u8 = 0x80;
    /// D: the DDP Segment Length and the terminated DDP header follow.
    pub const D: u8 = 0x40;
    /// R: the terminated RDMA Read Request header follows.
    pub const R: u8 = 0x20;
}

/// A view of a Terminate message's ULP Payload (RFC 5040 §4.8):
///
/// ```text
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// +-------+-------+---------------+-+-+-+-------------------------+
/// | Layer | EType |  Error Code   |M|D|R|       Reserved          |  Terminate Control
/// +-------+-------+---------------+-+-+-+-------------------------+
/// |   DDP Segment Length (D)      |                               |
/// +-------------------------------+                               |
/// |        Terminated DDP Header (D): 14 bytes tagged, 18 untagged|
/// |        Terminated RDMA Header (R): the 28-byte Read Request   |
/// ```
///
/// The DDP Segment Length and the DDP header are present together, when D is set (as
/// Wireshark's dissector and the Linux siw driver read them); M says whether the length is
/// meaningful. Over SCTP the length is that of the whole DDP Segment, header included and the
/// DDP-SSN excluded (the SCTP adaptation's own field, RFC 5043 §5.2.1). The terminated DDP
/// header is RFC 5041 §4's, control octet first; its T bit gives its length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminatePacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TerminatePacket<T> {
    pub const fn new_unchecked(buffer: T) -> TerminatePacket<T> {
        TerminatePacket { buffer }
    }

    /// Wraps `buffer` after [`TerminatePacket::check_len`].
    pub fn new_checked(buffer: T) -> Result<TerminatePacket<T>> {
        let packet = TerminatePacket::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// [`Error::Truncated`] unless the buffer holds the Terminate Control and every part its
    /// D and R flags announce. Bytes past them are allowed here ([`TerminatePacket::trailing`]);
    /// [`TerminateRepr::parse`] refuses them.
    pub fn check_len(&self) -> Result<()> {
        let data = self.buffer.as_ref();
        if data.len() < TERMINATE_CONTROL_LEN {
            return Err(Error::Truncated);
        }
        if self.has_ddp_header() {
            // The DDP header's control octet says which model, hence its length.
            let control_at = TERMINATE_CONTROL_LEN + TERMINATE_SEGMENT_LEN_LEN;
            if data.len() <= control_at {
                return Err(Error::Truncated);
            }
        }
        if data.len() < self.headers_end() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Layer (RFC 5040 §4.8).
    pub fn layer(&self) -> Layer {
        Layer::from_bits(self.buffer.as_ref()[0] >> 4)
    }

    /// EType, the 4-bit error type.
    pub fn error_type(&self) -> u8 {
        self.buffer.as_ref()[0] & 0xf
    }

    /// The 8-bit error code.
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Layer, type and code, read.
    pub fn error(&self) -> TerminateError {
        TerminateError::from_number(self.layer(), self.error_type(), self.code())
    }

    /// M: the DDP Segment Length is valid.
    pub fn segment_len_valid(&self) -> bool {
        self.buffer.as_ref()[2] & hdrct::M != 0
    }

    /// D: the DDP Segment Length and the terminated DDP header are present.
    pub fn has_ddp_header(&self) -> bool {
        self.buffer.as_ref()[2] & hdrct::D != 0
    }

    /// R: the terminated RDMA Read Request header is present.
    pub fn has_rdma_header(&self) -> bool {
        self.buffer.as_ref()[2] & hdrct::R != 0
    }

    /// The 13 reserved bits, as read (zero on transmit, not checked on receive).
    pub fn reserved(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[2], b[3]]) & 0x1fff
    }

    /// The DDP Segment Length field, if D is set.
    pub fn segment_len(&self) -> Option<u16> {
        let b = self.buffer.as_ref();
        self.has_ddp_header()
            .then(|| u16::from_be_bytes([b[4], b[5]]))
    }

    /// The terminated DDP header, if D is set: 14 or 18 bytes, control octet first.
    pub fn ddp_header(&self) -> Option<&[u8]> {
        let start = TERMINATE_CONTROL_LEN + TERMINATE_SEGMENT_LEN_LEN;
        self.has_ddp_header()
            .then(|| &self.buffer.as_ref()[start..self.ddp_end()])
    }

    /// The terminated RDMA Read Request header, if R is set.
    pub fn rdma_header(&self) -> Option<ReadRequest> {
        let start = self.ddp_end();
        self.has_rdma_header()
            .then(|| ReadRequest::read(&self.buffer.as_ref()[start..]))
    }

    /// Bytes after every announced part.
    pub fn trailing(&self) -> &[u8] {
        &self.buffer.as_ref()[self.headers_end()..]
    }

    /// End of the DDP part (of the control field if D is clear). Needs the DDP control octet
    /// when D is set, which `check_len` ensures before any caller runs.
    fn ddp_end(&self) -> usize {
        if !self.has_ddp_header() {
            return TERMINATE_CONTROL_LEN;
        }
        let start = TERMINATE_CONTROL_LEN + TERMINATE_SEGMENT_LEN_LEN;
        let tagged = self.buffer.as_ref()[start] & 0x80 != 0;
        start + ddp_header_len(tagged)
    }

    fn headers_end(&self) -> usize {
        self.ddp_end()
            + if self.has_rdma_header() {
                READ_REQUEST_LEN
            } else {
                0
            }
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for TerminatePacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The terminated segment a Terminate describes (D set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TerminatedSegment<'a> {
    /// DDP Segment Length as sent; meaningful only if M is set.
    pub segment_len: u16,
    /// The DDP header (RFC 5041 §4), control octet first: 14 bytes if its T bit is set, 18 if
    /// not.
    pub ddp_header: &'a [u8],
}

/// A Terminate message's payload, parsed (RFC 5040 §4.8). The 13 reserved bits are dropped and
/// emitted as zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TerminateRepr<'a> {
    pub error: TerminateError,
    /// M: [`TerminatedSegment::segment_len`] is valid.
    pub segment_len_valid: bool,
    /// D: the segment that caused the error.
    pub segment: Option<TerminatedSegment<'a>>,
    /// R: the Read Request it concerned.
    pub read_request: Option<ReadRequest>,
}

impl<'a> TerminateRepr<'a> {
    /// Parses a Terminate payload: [`Error::Truncated`] if a part its flags announce is
    /// missing, [`Error::BadLength`] if bytes follow the last one.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &TerminatePacket<&'a T>) -> Result<Self> {
        packet.check_len()?;
        if !packet.trailing().is_empty() {
            return Err(Error::BadLength);
        }
        let data: &'a [u8] = packet.buffer.as_ref();
        let segment = packet.segment_len().map(|segment_len| TerminatedSegment {
            segment_len,
            ddp_header: &data[TERMINATE_CONTROL_LEN + TERMINATE_SEGMENT_LEN_LEN..packet.ddp_end()],
        });
        Ok(TerminateRepr {
            error: packet.error(),
            segment_len_valid: packet.segment_len_valid(),
            segment,
            read_request: packet.rdma_header(),
        })
    }

    /// The payload's length.
    pub fn buffer_len(&self) -> usize {
        TERMINATE_CONTROL_LEN
            + self
                .segment
                .map_or(0, |s| TERMINATE_SEGMENT_LEN_LEN + s.ddp_header.len())
            + self.read_request.map_or(0, |_| READ_REQUEST_LEN)
    }

    /// Writes the payload into the first [`TerminateRepr::buffer_len`] bytes of `buf`.
    /// [`Error::Truncated`] if `buf` is shorter, [`Error::Malformed`] if the terminated DDP
    /// header's length is not the one its T bit names (nothing is written in either case).
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if let Some(s) = self.segment {
            let tagged = s.ddp_header.first().ok_or(Error::Malformed)? & 0x80 != 0;
            if s.ddp_header.len() != ddp_header_len(tagged) {
                return Err(Error::Malformed);
            }
        }
        if buf.len() < self.buffer_len() {
            return Err(Error::Truncated);
        }
        let mut flags = 0u8;
        if self.segment_len_valid {
            flags |= hdrct::M;
        }
        if self.segment.is_some() {
            flags |= hdrct::D;
        }
        if self.read_request.is_some() {
            flags |= hdrct::R;
        }
        buf[0] = self.error.layer().bits() << 4 | self.error.error_type();
        buf[1] = self.error.code();
        buf[2] = flags;
        buf[3] = 0;
        let mut at = TERMINATE_CONTROL_LEN;
        if let Some(s) = self.segment {
            buf[at..at + 2].copy_from_slice(&s.segment_len.to_be_bytes());
            at += TERMINATE_SEGMENT_LEN_LEN;
            buf[at..at + s.ddp_header.len()].copy_from_slice(s.ddp_header);
            at += s.ddp_header.len();
        }
        if let Some(r) = self.read_request {
            buf[at..at + READ_REQUEST_LEN].copy_from_slice(&r.to_bytes());
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// RFC 5040 §4.2's table: opcode, buffer model, queue, Invalidate STag, solicited event.
    #[test]
    fn rfc5040_4_2_message_table() {
        let table = [
            (Opcode::Write, 0b0000, Some(true), None, false, false),
            (
                Opcode::ReadRequest,
                0b0001,
                Some(false),
                Some(1),
                false,
                false,
            ),
            (Opcode::ReadResponse, 0b0010, Some(true), None, false, false),
            (Opcode::Send, 0b0011, Some(false), Some(0), false, false),
            (
                Opcode::SendInvalidate,
                0b0100,
                Some(false),
                Some(0),
                true,
                false,
            ),
            (Opcode::SendSe, 0b0101, Some(false), Some(0), false, true),
            (
                Opcode::SendSeInvalidate,
                0b0110,
                Some(false),
                Some(0),
                true,
                true,
            ),
            (
                Opcode::Terminate,
                0b0111,
                Some(false),
                Some(2),
                false,
                false,
            ),
        ];
        for (op, bits, tagged, qn, inval, se) in table {
            assert_eq!(op.bits(), bits, "{op}");
            assert_eq!(Opcode::from_bits(bits), op);
            assert_eq!(op.tagged(), tagged, "{op}");
            assert_eq!(op.queue(), qn, "{op}");
            assert_eq!(op.carries_invalidate_stag(), inval, "{op}");
            assert_eq!(op.solicited_event(), se, "{op}");
        }
        for bits in 0b1000..=0b1111 {
            let op = Opcode::from_bits(bits);
            assert_eq!(op, Opcode::Unknown(bits));
            assert_eq!((op.bits(), op.tagged(), op.queue()), (bits, None, None));
        }
    }

    /// RFC 5040 §4.1: RV in the two high bits, two reserved bits, the opcode in the low four.
    #[test]
    fn rfc5040_4_1_control_field_layout() {
        assert_eq!(Control::new(Opcode::Write).to_byte(), 0x40);
        assert_eq!(Control::new(Opcode::ReadRequest).to_byte(), 0x41);
        assert_eq!(Control::new(Opcode::Terminate).to_byte(), 0x47);
        // Reserved bits set on receive are ignored; a version of 2 is kept to be reported.
        assert_eq!(Control::from_byte(0x73), Control::new(Opcode::Send));
        let v2 = Control::from_byte(0x83);
        assert_eq!((v2.version, v2.opcode), (2, Opcode::Send));
        assert_eq!(v2.to_byte(), 0x83);
    }

    /// A Send with Invalidate's untagged RsvdULP: control, then the STag to invalidate.
    #[test]
    fn rfc5040_4_1_invalidate_stag_in_rsvd_ulp_8_39() {
        let r = Control::new(Opcode::SendSeInvalidate).untagged_rsvd_ulp(0x1122_3344);
        assert_eq!(r, [0x46, 0x11, 0x22, 0x33, 0x44]);
        assert_eq!(invalidate_stag(&r), Some(0x1122_3344));
        assert_eq!(
            Control::from_rsvd_ulp(&r),
            Some(Control::new(Opcode::SendSeInvalidate))
        );
        assert_eq!(invalidate_stag(&[0x40]), None, "a tagged RsvdULP has none");
        assert_eq!(Control::from_rsvd_ulp(&[]), None);
    }

    /// Every field distinct, in RFC 5040 §4.4 order.
    const READ_REQUEST: [u8; 28] = [
        0x11, 0x22, 0x33, 0x44, // Data Sink STag
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // Data Sink TO
        0x00, 0x01, 0x00, 0x00, // RDMA Read Message Size: 65536
        0x55, 0x66, 0x77, 0x88, // Data Source STag
        0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, // Data Source TO
    ];

    #[test]
    fn rfc5040_4_4_read_request_fields() {
        let r = ReadRequest::parse(&READ_REQUEST).unwrap();
        assert_eq!(
            r,
            ReadRequest {
                sink_stag: 0x1122_3344,
                sink_to: 0x0102_0304_0506_0708,
                size: 65536,
                source_stag: 0x5566_7788,
                source_to: 0x0a0b_0c0d_0e0f_1011,
            }
        );
        assert_eq!(r.to_bytes(), READ_REQUEST);
        assert_eq!(
            ReadRequest::parse(&READ_REQUEST[..27]),
            Err(Error::Truncated)
        );
        let mut long = READ_REQUEST.to_vec();
        long.push(0);
        assert_eq!(ReadRequest::parse(&long), Err(Error::BadLength));
    }

    /// A Terminate for an RDMA Read Request whose Data Source STag was invalid: layer RDMAP,
    /// Remote Protection Error, Invalid STag, with M, D and R, the untagged DDP header of the
    /// request (QN 1, MSN 7, MO 0) and its Read Request header.
    fn terminate_fixture() -> Vec<u8> {
        let mut t = vec![
            0x01, 0x00, 0xe0, 0x00, // RDMAP / 0x1 / 0x00, M D R
            0x00, 0x2e, // DDP Segment Length: 18 + 28
            0x41, 0x41, 0x00, 0x00, 0x00, 0x00, // DDP control (T=0 L=1 DV=1), RsvdULP
            0x00, 0x00, 0x00, 0x01, // QN 1
            0x00, 0x00, 0x00, 0x07, // MSN 7
            0x00, 0x00, 0x00, 0x00, // MO 0
        ];
        t.extend_from_slice(&READ_REQUEST);
        t
    }

    #[test]
    fn rfc5040_4_8_terminate_with_both_headers() {
        let bytes = terminate_fixture();
        let p = TerminatePacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.layer(), Layer::Rdmap);
        assert_eq!(p.error(), TerminateError::Rdmap(RdmapError::InvalidStag));
        assert!(p.segment_len_valid() && p.has_ddp_header() && p.has_rdma_header());
        assert_eq!(p.segment_len(), Some(46));
        assert_eq!(p.ddp_header().unwrap().len(), 18);
        assert_eq!(
            p.ddp_header().unwrap()[1],
            0x41,
            "the request's RDMAP control"
        );
        assert_eq!(p.rdma_header().unwrap().source_stag, 0x5566_7788);
        let repr = TerminateRepr::parse(&p).unwrap();
        assert_eq!(repr.buffer_len(), bytes.len());
        let mut out = vec![0xa5; repr.buffer_len()];
        repr.emit(&mut out).unwrap();
        assert_eq!(out, bytes);
    }

    /// A DDP-layer Terminate for a tagged segment (14-byte header) and none at all.
    #[test]
    fn rfc5040_4_8_terminate_lengths_follow_the_flags() {
        let tagged = [
            0x11, 0x01, 0xc0, 0x00, // DDP / tagged buffer / base or bounds, M D
            0x00, 0x20, // 32 bytes
            0x81, 0x40, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0, 0, 0x10, 0x00,
        ];
        let p = TerminatePacket::new_checked(&tagged[..]).unwrap();
        assert_eq!(p.error(), TerminateError::Ddp(DdpError::BaseOrBounds));
        assert_eq!(p.ddp_header().unwrap().len(), 14);
        assert_eq!(p.rdma_header(), None);
        assert_eq!(
            TerminatePacket::new_checked(&tagged[..19]).err(),
            Some(Error::Truncated)
        );
        // D set but not even the DDP control octet: truncated, not a panic.
        assert_eq!(
            TerminatePacket::new_checked(&tagged[..6]).err(),
            Some(Error::Truncated)
        );

        let bare = [0x02, 0x07, 0x00, 0x00];
        let p = TerminatePacket::new_checked(&bare[..]).unwrap();
        assert_eq!(
            p.error(),
            TerminateError::Rdmap(RdmapError::CatastrophicStream)
        );
        let r = TerminateRepr::parse(&p).unwrap();
        assert_eq!((r.segment, r.read_request, r.buffer_len()), (None, None, 4));
        assert_eq!(
            TerminatePacket::new_checked(&bare[..3]).err(),
            Some(Error::Truncated)
        );
        let mut long = bare.to_vec();
        long.push(0);
        let p = TerminatePacket::new_checked(&long[..]).unwrap();
        assert_eq!(p.trailing(), &[0]);
        assert_eq!(TerminateRepr::parse(&p), Err(Error::BadLength));
    }

    /// RFC 5040 §4.8's table of RDMAP numbers, and unknown numbers kept as read.
    #[test]
    fn rfc5040_4_8_rdmap_error_numbers() {
        use RdmapError::*;
        let table = [
            (LocalCatastrophic, 0x0, 0x00),
            (InvalidStag, 0x1, 0x00),
            (BaseOrBounds, 0x1, 0x01),
            (AccessRights, 0x1, 0x02),
            (StagNotAssociated, 0x1, 0x03),
            (ToWrap, 0x1, 0x04),
            (ProtectionCannotInvalidate, 0x1, 0x09),
            (ProtectionUnspecified, 0x1, 0xff),
            (InvalidVersion, 0x2, 0x05),
            (UnexpectedOpcode, 0x2, 0x06),
            (CatastrophicStream, 0x2, 0x07),
            (CatastrophicGlobal, 0x2, 0x08),
            (OperationCannotInvalidate, 0x2, 0x09),
            (OperationUnspecified, 0x2, 0xff),
        ];
        for (e, t, c) in table {
            assert_eq!((e.error_type(), e.code()), (t, c), "{e:?}");
            assert_eq!(RdmapError::from_number(t, c), Some(e));
            assert_eq!(
                TerminateError::from_number(Layer::Rdmap, t, c),
                TerminateError::Rdmap(e)
            );
        }
        assert_eq!(RdmapError::from_number(0x1, 0x05), None);
        assert_eq!(
            TerminateError::from_number(Layer::Llp, 0x0, 0x01),
            TerminateError::Other {
                layer: Layer::Llp,
                error_type: 0,
                code: 1
            }
        );
    }

    #[test]
    fn emit_refuses_a_ddp_header_of_the_wrong_length() {
        let header = [0x81u8; 18]; // T set, so 14 bytes expected
        let repr = TerminateRepr {
            error: TerminateError::Ddp(DdpError::InvalidStag),
            segment_len_valid: true,
            segment: Some(TerminatedSegment {
                segment_len: 18,
                ddp_header: &header,
            }),
            read_request: None,
        };
        let mut out = [0u8; 64];
        assert_eq!(repr.emit(&mut out), Err(Error::Malformed));
        assert_eq!(out, [0u8; 64], "nothing written");
    }

    proptest! {
        /// Whatever bytes a peer sends: the view never panics, and what parses emits back
        /// exactly.
        #[test]
        fn terminate_parse_emit_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = TerminatePacket::new_checked(&bytes[..]) {
                let _ = (p.error(), p.reserved(), p.segment_len(), p.ddp_header(), p.rdma_header());
                if let Ok(repr) = TerminateRepr::parse(&p) {
                    let mut out = vec![0u8; repr.buffer_len()];
                    repr.emit(&mut out).unwrap();
                    // Reserved bits are dropped: compare with them cleared.
                    let mut expect = bytes.clone();
                    expect[2] &= 0xe0;
                    expect[3] = 0;
                    prop_assert_eq!(out, expect);
                }
            }
        }

        #[test]
        fn read_request_round_trips(sink_stag: u32, sink_to: u64, size: u32, source_stag: u32, source_to: u64) {
            let r = ReadRequest { sink_stag, sink_to, size, source_stag, source_to };
            prop_assert_eq!(ReadRequest::parse(&r.to_bytes()), Ok(r));
        }

        #[test]
        fn control_round_trips(byte: u8) {
            let c = Control::from_byte(byte);
            prop_assert_eq!(c.to_byte(), byte & 0xcf, "reserved bits cleared, the rest kept");
        }
    }
}
