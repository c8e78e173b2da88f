//! The chunk header common to every chunk, the chunk type codes, and [`ChunkRepr`], the sum of
//! every chunk Repr (RFC 9260 §3.2, §3.3).

use super::control::{
    AbortRepr, CookieEchoRepr, ErrorChunkRepr, HeartbeatAckRepr, HeartbeatRepr,
    ShutdownCompleteRepr, ShutdownRepr,
};
use super::data::DataRepr;
use super::init::{InitAckRepr, InitRepr};
use super::sack::SackRepr;
use super::{
    code_enum, length_field, padded, read_u16, tlv_len, write_u16, zero_padding, Error, Result,
    UnrecognizedAction, CHUNK_HEADER_LEN,
};

code_enum! {
    /// Chunk type (RFC 9260 §3.2): the chunks a DDP endpoint sends or must understand.
    /// Extensions (FORWARD TSN, AUTH, ASCONF, RE-CONFIG, I-DATA, PAD, ...) are `Unknown`.
    pub enum ChunkType(u8) {
        /// Payload Data (§3.3.1).
        Data = 0,
        /// Initiation (§3.3.2).
        Init = 1,
        /// Initiation Acknowledgement (§3.3.3).
        InitAck = 2,
        /// Selective Acknowledgement (§3.3.4).
        Sack = 3,
        /// Heartbeat Request (§3.3.5).
        Heartbeat = 4,
        /// Heartbeat Acknowledgement (§3.3.6).
        HeartbeatAck = 5,
        /// Abort (§3.3.7).
        Abort = 6,
        /// Shutdown (§3.3.8).
        Shutdown = 7,
        /// Shutdown Acknowledgement (§3.3.9).
        ShutdownAck = 8,
        /// Operation Error (§3.3.10).
        Error = 9,
        /// State Cookie (§3.3.11).
        CookieEcho = 10,
        /// Cookie Acknowledgement (§3.3.12).
        CookieAck = 11,
        /// Shutdown Complete (§3.3.13).
        ShutdownComplete = 14,
    }
}

impl ChunkType {
    /// What a receiver that does not recognize this type does with the chunk (RFC 9260 §3.2).
    pub fn action(self) -> UnrecognizedAction {
        UnrecognizedAction::of_chunk_type(self.into())
    }
}

pub(super) mod field {
    use core::ops::Range;

    pub const TYPE: usize = 0;
    pub const FLAGS: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const VALUE: usize = 4;
}

/// A view of one chunk: type, flags, length, value (RFC 9260 §3.2). The buffer may extend past
/// the chunk (padding, next chunks); [`Chunk::value`] ends at the chunk length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Chunk<T> {
    /// Wraps `buffer` without checks; accessors may panic if it is too short.
    pub const fn new_unchecked(buffer: T) -> Self {
        Chunk { buffer }
    }

    /// Wraps `buffer` after [`Chunk::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let c = Self::new_unchecked(buffer);
        c.check_len()?;
        Ok(c)
    }

    /// `Truncated` if the buffer is shorter than the chunk header or than the chunk length,
    /// `BadLength` if the chunk length is below 4 (RFC 9260 §3.2).
    pub fn check_len(&self) -> Result<()> {
        tlv_len(self.buffer.as_ref(), CHUNK_HEADER_LEN).map(|_| ())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn chunk_type(&self) -> ChunkType {
        self.buffer.as_ref()[field::TYPE].into()
    }

    /// The raw flags byte; its meaning depends on the chunk type.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// The chunk length: header and value, without the padding after the chunk.
    pub fn chunk_length(&self) -> u16 {
        read_u16(&self.buffer.as_ref()[field::LENGTH])
    }

    /// The chunk value, up to the chunk length.
    pub fn value(&self) -> &[u8] {
        &self.buffer.as_ref()[field::VALUE..usize::from(self.chunk_length())]
    }

    /// The chunk, header included, up to the chunk length.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buffer.as_ref()[..usize::from(self.chunk_length())]
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Chunk<&'a T> {
    /// The chunk value with the lifetime of the underlying buffer.
    pub fn value_ref(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::VALUE..usize::from(self.chunk_length())]
    }

    /// The chunk bytes, header included, with the lifetime of the underlying buffer.
    pub fn bytes_ref(&self) -> &'a [u8] {
        &self.buffer.as_ref()[..usize::from(self.chunk_length())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Chunk<T> {
    pub fn set_chunk_type(&mut self, t: ChunkType) {
        self.buffer.as_mut()[field::TYPE] = t.into();
    }

    pub fn set_flags(&mut self, flags: u8) {
        self.buffer.as_mut()[field::FLAGS] = flags;
    }

    pub fn set_chunk_length(&mut self, len: u16) {
        write_u16(&mut self.buffer.as_mut()[field::LENGTH], len);
    }

    /// The chunk value, up to the chunk length.
    pub fn value_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.chunk_length());
        &mut self.buffer.as_mut()[field::VALUE..len]
    }
}

/// Writes a chunk header for a value of `value_len` bytes and zeroes the chunk padding; returns
/// `buf` from the value to the end of the padding. The room past `value_len` lets a parameter
/// or cause list write its last element's padding, which the chunk length does not count
/// (RFC 9260 §3.2) and which is the chunk padding.
pub(super) fn emit_header(buf: &mut [u8], t: ChunkType, flags: u8, value_len: usize) -> &mut [u8] {
    let len = CHUNK_HEADER_LEN + value_len;
    zero_padding(buf, len);
    let mut c = Chunk::new_unchecked(&mut buf[..len]);
    c.set_chunk_type(t);
    c.set_flags(flags);
    c.set_chunk_length(length_field(len));
    &mut buf[field::VALUE..padded(len)]
}

/// The first step of every chunk Repr's `parse`: the chunk's own length checks (the view may
/// have been made with `new_unchecked`), then `Unsupported` unless the chunk has type `t` (a
/// Repr's `parse` called on another chunk type).
pub(super) fn expect_type<T: AsRef<[u8]>>(chunk: &Chunk<T>, t: ChunkType) -> Result<()> {
    chunk.check_len()?;
    if chunk.chunk_type() == t {
        Ok(())
    } else {
        Err(Error::Unsupported)
    }
}

/// A chunk whose type this module does not implement, kept whole so that it round-trips and can
/// be reported (Unrecognized Chunk Type, RFC 9260 §3.3.10.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownChunkRepr<'a> {
    /// Must not be one of the [`ChunkType`] codes (they parse as their own Repr).
    pub chunk_type: u8,
    pub flags: u8,
    pub value: &'a [u8],
}

impl UnknownChunkRepr<'_> {
    /// What to do with this chunk (RFC 9260 §3.2).
    pub fn action(&self) -> UnrecognizedAction {
        UnrecognizedAction::of_chunk_type(self.chunk_type)
    }
}

/// Any chunk. `parse` dispatches on the chunk type; `emit` writes the chunk header, value and
/// zero padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkRepr<'a> {
    Data(DataRepr<'a>),
    Init(InitRepr<'a>),
    InitAck(InitAckRepr<'a>),
    Sack(SackRepr<'a>),
    Heartbeat(HeartbeatRepr<'a>),
    HeartbeatAck(HeartbeatAckRepr<'a>),
    Abort(AbortRepr<'a>),
    Shutdown(ShutdownRepr),
    /// SHUTDOWN ACK (§3.3.9): no value.
    ShutdownAck,
    Error(ErrorChunkRepr<'a>),
    CookieEcho(CookieEchoRepr<'a>),
    /// COOKIE ACK (§3.3.12): no value.
    CookieAck,
    ShutdownComplete(ShutdownCompleteRepr),
    Unknown(UnknownChunkRepr<'a>),
}

impl<'a> ChunkRepr<'a> {
    /// Parses any chunk; the errors are those of the chunk type's own Repr. Reserved flag bits
    /// are ignored (RFC 9260 §3.2: "MUST be ignored on receipt") and not kept.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(chunk: &Chunk<&'a T>) -> Result<Self> {
        chunk.check_len()?;
        Ok(match chunk.chunk_type() {
            ChunkType::Data => ChunkRepr::Data(DataRepr::parse(chunk)?),
            ChunkType::Init => ChunkRepr::Init(InitRepr::parse(chunk)?),
            ChunkType::InitAck => ChunkRepr::InitAck(InitAckRepr::parse(chunk)?),
            ChunkType::Sack => ChunkRepr::Sack(SackRepr::parse(chunk)?),
            ChunkType::Heartbeat => ChunkRepr::Heartbeat(HeartbeatRepr::parse(chunk)?),
            ChunkType::HeartbeatAck => ChunkRepr::HeartbeatAck(HeartbeatAckRepr::parse(chunk)?),
            ChunkType::Abort => ChunkRepr::Abort(AbortRepr::parse(chunk)?),
            ChunkType::Shutdown => ChunkRepr::Shutdown(ShutdownRepr::parse(chunk)?),
            ChunkType::ShutdownAck => {
                parse_empty(chunk)?;
                ChunkRepr::ShutdownAck
            }
            ChunkType::Error => ChunkRepr::Error(ErrorChunkRepr::parse(chunk)?),
            ChunkType::CookieEcho => ChunkRepr::CookieEcho(CookieEchoRepr::parse(chunk)?),
            ChunkType::CookieAck => {
                parse_empty(chunk)?;
                ChunkRepr::CookieAck
            }
            ChunkType::ShutdownComplete => {
                ChunkRepr::ShutdownComplete(ShutdownCompleteRepr::parse(chunk)?)
            }
            ChunkType::Unknown(chunk_type) => ChunkRepr::Unknown(UnknownChunkRepr {
                chunk_type,
                flags: chunk.flags(),
                value: chunk.value_ref(),
            }),
        })
    }

    pub fn chunk_type(&self) -> ChunkType {
        match self {
            ChunkRepr::Data(_) => ChunkType::Data,
            ChunkRepr::Init(_) => ChunkType::Init,
            ChunkRepr::InitAck(_) => ChunkType::InitAck,
            ChunkRepr::Sack(_) => ChunkType::Sack,
            ChunkRepr::Heartbeat(_) => ChunkType::Heartbeat,
            ChunkRepr::HeartbeatAck(_) => ChunkType::HeartbeatAck,
            ChunkRepr::Abort(_) => ChunkType::Abort,
            ChunkRepr::Shutdown(_) => ChunkType::Shutdown,
            ChunkRepr::ShutdownAck => ChunkType::ShutdownAck,
            ChunkRepr::Error(_) => ChunkType::Error,
            ChunkRepr::CookieEcho(_) => ChunkType::CookieEcho,
            ChunkRepr::CookieAck => ChunkType::CookieAck,
            ChunkRepr::ShutdownComplete(_) => ChunkType::ShutdownComplete,
            ChunkRepr::Unknown(u) => ChunkType::Unknown(u.chunk_type),
        }
    }

    /// The chunk length field this chunk is emitted with (padding not counted).
    pub fn chunk_len(&self) -> usize {
        match self {
            ChunkRepr::Data(r) => r.chunk_len(),
            ChunkRepr::Init(r) => r.chunk_len(),
            ChunkRepr::InitAck(r) => r.chunk_len(),
            ChunkRepr::Sack(r) => r.chunk_len(),
            ChunkRepr::Heartbeat(r) => r.chunk_len(),
            ChunkRepr::HeartbeatAck(r) => r.chunk_len(),
            ChunkRepr::Abort(r) => r.chunk_len(),
            ChunkRepr::Shutdown(r) => r.chunk_len(),
            ChunkRepr::ShutdownAck | ChunkRepr::CookieAck => CHUNK_HEADER_LEN,
            ChunkRepr::Error(r) => r.chunk_len(),
            ChunkRepr::CookieEcho(r) => r.chunk_len(),
            ChunkRepr::ShutdownComplete(r) => r.chunk_len(),
            ChunkRepr::Unknown(u) => CHUNK_HEADER_LEN + u.value.len(),
        }
    }

    /// Bytes `emit` writes: the chunk and its padding.
    pub fn buffer_len(&self) -> usize {
        padded(self.chunk_len())
    }

    /// Writes the chunk and its zero padding into `buf[..self.buffer_len()]`.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`, or the chunk is longer than 65535 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        match self {
            ChunkRepr::Data(r) => r.emit(buf),
            ChunkRepr::Init(r) => r.emit(buf),
            ChunkRepr::InitAck(r) => r.emit(buf),
            ChunkRepr::Sack(r) => r.emit(buf),
            ChunkRepr::Heartbeat(r) => r.emit(buf),
            ChunkRepr::HeartbeatAck(r) => r.emit(buf),
            ChunkRepr::Abort(r) => r.emit(buf),
            ChunkRepr::Shutdown(r) => r.emit(buf),
            ChunkRepr::ShutdownAck => {
                emit_header(buf, ChunkType::ShutdownAck, 0, 0);
            }
            ChunkRepr::Error(r) => r.emit(buf),
            ChunkRepr::CookieEcho(r) => r.emit(buf),
            ChunkRepr::CookieAck => {
                emit_header(buf, ChunkType::CookieAck, 0, 0);
            }
            ChunkRepr::ShutdownComplete(r) => r.emit(buf),
            ChunkRepr::Unknown(u) => {
                let t = ChunkType::Unknown(u.chunk_type);
                emit_header(buf, t, u.flags, u.value.len())[..u.value.len()]
                    .copy_from_slice(u.value);
            }
        }
    }
}

/// SHUTDOWN ACK and COOKIE ACK have no value: their length must be exactly 4.
fn parse_empty<T: AsRef<[u8]> + ?Sized>(chunk: &Chunk<&T>) -> Result<()> {
    if chunk.value().is_empty() {
        Ok(())
    } else {
        Err(Error::BadLength)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
pub(super) mod tests {
    use super::super::cause::tests::{cause_spec, CauseSpec};
    use super::super::cause::CauseRepr;
    use super::super::param::tests::{bytes, param_spec, ParamSpec};
    use super::super::param::ParamRepr;
    use super::super::sack::GapAckBlock;
    use super::super::List;
    use super::*;
    use proptest::prelude::*;

    pub(crate) fn parse(bytes: &[u8]) -> Result<ChunkRepr<'_>> {
        ChunkRepr::parse(&Chunk::new_checked(bytes)?)
    }

    pub(crate) fn emitted(c: &ChunkRepr<'_>) -> Vec<u8> {
        let mut buf = vec![0xa5; c.buffer_len()];
        c.emit(&mut buf);
        buf
    }

    #[test]
    fn chunk_view_fields() {
        let b = [0x0e, 0x01, 0x00, 0x04, 0xff];
        let c = Chunk::new_checked(&b[..]).unwrap();
        assert_eq!(c.chunk_type(), ChunkType::ShutdownComplete);
        assert_eq!((c.flags(), c.chunk_length()), (1, 4));
        assert!(c.value().is_empty());
        assert_eq!(c.as_bytes(), &b[..4]);
    }

    #[test]
    fn chunk_view_rejects_truncated_header() {
        for n in 0..4 {
            assert_eq!(
                Chunk::new_checked(&[0x0b, 0, 0, 4][..n]).err(),
                Some(Error::Truncated)
            );
        }
    }

    #[test]
    fn chunk_view_rejects_length_below_four() {
        for len in 0..4 {
            assert_eq!(
                Chunk::new_checked(&[0x0b, 0, 0, len][..]).err(),
                Some(Error::BadLength)
            );
        }
    }

    #[test]
    fn chunk_view_rejects_length_past_end() {
        assert_eq!(
            Chunk::new_checked(&[0x0a, 0, 0, 9, 1, 2, 3, 4][..]).err(),
            Some(Error::Truncated)
        );
    }

    #[test]
    fn chunk_view_setters_write_the_header() {
        let mut b = [0xa5u8; 6];
        let mut c = Chunk::new_unchecked(&mut b[..]);
        c.set_chunk_type(ChunkType::CookieEcho);
        c.set_flags(0);
        c.set_chunk_length(5);
        c.value_mut()[0] = 7;
        assert_eq!(b, [10, 0, 0, 5, 7, 0xa5]);
    }

    #[test]
    fn shutdown_ack_and_cookie_ack_are_four_bytes() {
        assert_eq!(parse(&[8, 0, 0, 4]), Ok(ChunkRepr::ShutdownAck));
        assert_eq!(parse(&[11, 0, 0, 4]), Ok(ChunkRepr::CookieAck));
        assert_eq!(emitted(&ChunkRepr::ShutdownAck), [8, 0, 0, 4]);
        assert_eq!(emitted(&ChunkRepr::CookieAck), [11, 0, 0, 4]);
        assert_eq!(parse(&[8, 0, 0, 8, 0, 0, 0, 0]), Err(Error::BadLength));
        assert_eq!(parse(&[11, 0, 0, 5, 0]), Err(Error::BadLength));
    }

    #[test]
    fn reserved_flags_are_ignored_on_receipt_and_zero_on_send() {
        assert_eq!(parse(&[11, 0xff, 0, 4]), Ok(ChunkRepr::CookieAck));
        assert_eq!(emitted(&ChunkRepr::CookieAck)[1], 0);
    }

    #[test]
    fn unknown_chunk_round_trips_with_flags_and_padding() {
        // FORWARD TSN (192): skip and report. Value of 5 bytes, 3 bytes padding.
        let b = [0xc0, 0x5a, 0x00, 0x09, 1, 2, 3, 4, 5, 0, 0, 0];
        let c = parse(&b).unwrap();
        let ChunkRepr::Unknown(u) = c else {
            panic!("{c:?}")
        };
        assert_eq!(
            (u.chunk_type, u.flags, u.value),
            (0xc0, 0x5a, &[1u8, 2, 3, 4, 5][..])
        );
        assert_eq!(u.action(), UnrecognizedAction::SkipAndReport);
        assert_eq!(c.chunk_type(), ChunkType::Unknown(0xc0));
        assert_eq!(emitted(&c), b);
    }

    #[test]
    fn unknown_chunk_actions() {
        for (t, a) in [
            (0x0c, UnrecognizedAction::Discard),
            (0x40, UnrecognizedAction::DiscardAndReport),
            (0x84, UnrecognizedAction::Skip),
            (0xc1, UnrecognizedAction::SkipAndReport),
        ] {
            let b = [t, 0, 0, 4];
            let c = parse(&b).unwrap();
            let ChunkRepr::Unknown(u) = c else {
                panic!("{c:?}")
            };
            assert_eq!(u.action(), a);
            assert_eq!(ChunkType::from(t).action(), a);
        }
    }

    #[test]
    fn chunk_type_codes() {
        let known = [0u8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 14];
        for t in 0..=255u8 {
            let ct = ChunkType::from(t);
            assert_eq!(u8::from(ct), t);
            assert_eq!(
                matches!(ct, ChunkType::Unknown(_)),
                !known.contains(&t),
                "{t}"
            );
        }
        assert_eq!(ChunkType::from(3), ChunkType::Sack);
    }

    #[test]
    fn repr_parse_on_another_chunk_type_is_unsupported() {
        let c = Chunk::new_checked(&[11u8, 0, 0, 4][..]).unwrap();
        assert_eq!(DataRepr::parse(&c), Err(Error::Unsupported));
        assert_eq!(SackRepr::parse(&c), Err(Error::Unsupported));
        assert_eq!(InitRepr::parse(&c), Err(Error::Unsupported));
        assert_eq!(InitAckRepr::parse(&c), Err(Error::Unsupported));
        assert_eq!(AbortRepr::parse(&c), Err(Error::Unsupported));
        assert_eq!(ShutdownRepr::parse(&c), Err(Error::Unsupported));
    }

    #[test]
    fn repr_parse_checks_an_unchecked_view() {
        let short = Chunk::new_unchecked(&[0u8, 7][..]);
        assert_eq!(DataRepr::parse(&short), Err(Error::Truncated));
        assert_eq!(ChunkRepr::parse(&short), Err(Error::Truncated));
        let past_end = Chunk::new_unchecked(&[6u8, 0, 0, 8][..]);
        assert_eq!(AbortRepr::parse(&past_end), Err(Error::Truncated));
        assert_eq!(
            ShutdownCompleteRepr::parse(&past_end),
            Err(Error::Truncated)
        );
        let p = super::super::Param::new_unchecked(&[0u8, 5, 0][..]);
        assert_eq!(ParamRepr::parse(&p), Err(Error::Truncated));
        let c = super::super::Cause::new_unchecked(&[0u8, 12, 0, 2][..]);
        assert_eq!(CauseRepr::parse(&c), Err(Error::BadLength));
    }

    /// Owned description of any chunk, for proptest.
    #[derive(Debug, Clone)]
    pub(crate) enum ChunkSpec {
        Data {
            flags: [bool; 4],
            tsn: u32,
            sid: u16,
            ssn: u16,
            ppid: u32,
            user_data: Vec<u8>,
        },
        Init {
            ack: bool,
            fixed: (u32, u32, u16, u16, u32),
            params: Vec<ParamSpec>,
        },
        Sack {
            cum: u32,
            a_rwnd: u32,
            gaps: Vec<GapAckBlock>,
            dups: Vec<u32>,
        },
        Heartbeat {
            ack: bool,
            info: Vec<u8>,
        },
        Abort {
            t_bit: bool,
            causes: Vec<CauseSpec>,
        },
        Shutdown(u32),
        ShutdownAck,
        Error(Vec<CauseSpec>),
        CookieEcho(Vec<u8>),
        CookieAck,
        ShutdownComplete(bool),
        Unknown {
            chunk_type: u8,
            flags: u8,
            value: Vec<u8>,
        },
    }

    /// Borrowed parts a `ChunkRepr` of a `ChunkSpec` points into.
    pub(crate) struct ChunkParts<'s> {
        params: Vec<ParamRepr<'s>>,
        causes: Vec<CauseRepr<'s>>,
    }

    impl ChunkSpec {
        pub(crate) fn parts(&self) -> ChunkParts<'_> {
            match self {
                ChunkSpec::Init { params, .. } => ChunkParts {
                    params: params.iter().map(ParamSpec::repr).collect(),
                    causes: vec![],
                },
                ChunkSpec::Abort { causes, .. } | ChunkSpec::Error(causes) => ChunkParts {
                    params: vec![],
                    causes: causes.iter().map(CauseSpec::repr).collect(),
                },
                _ => ChunkParts {
                    params: vec![],
                    causes: vec![],
                },
            }
        }

        pub(crate) fn repr<'s>(&'s self, parts: &'s ChunkParts<'s>) -> ChunkRepr<'s> {
            match self {
                ChunkSpec::Data {
                    flags,
                    tsn,
                    sid,
                    ssn,
                    ppid,
                    user_data,
                } => ChunkRepr::Data(DataRepr {
                    immediate: flags[0],
                    unordered: flags[1],
                    beginning: flags[2],
                    ending: flags[3],
                    tsn: *tsn,
                    stream_id: *sid,
                    ssn: *ssn,
                    ppid: *ppid,
                    user_data,
                }),
                ChunkSpec::Init {
                    ack,
                    fixed: (tag, a_rwnd, os, mis, tsn),
                    ..
                } => {
                    let init = InitRepr {
                        initiate_tag: *tag,
                        a_rwnd: *a_rwnd,
                        outbound_streams: *os,
                        inbound_streams: *mis,
                        initial_tsn: *tsn,
                        params: List::new(&parts.params),
                    };
                    if *ack {
                        ChunkRepr::InitAck(InitAckRepr(init))
                    } else {
                        ChunkRepr::Init(init)
                    }
                }
                ChunkSpec::Sack {
                    cum,
                    a_rwnd,
                    gaps,
                    dups,
                } => ChunkRepr::Sack(SackRepr {
                    cum_tsn_ack: *cum,
                    a_rwnd: *a_rwnd,
                    gap_ack_blocks: List::new(gaps),
                    dup_tsns: List::new(dups),
                }),
                ChunkSpec::Heartbeat { ack: false, info } => {
                    ChunkRepr::Heartbeat(HeartbeatRepr { info, extra: &[] })
                }
                ChunkSpec::Heartbeat { ack: true, info } => {
                    ChunkRepr::HeartbeatAck(HeartbeatAckRepr { info, extra: &[] })
                }
                ChunkSpec::Abort { t_bit, .. } => ChunkRepr::Abort(AbortRepr {
                    t_bit: *t_bit,
                    causes: List::new(&parts.causes),
                }),
                ChunkSpec::Shutdown(cum) => ChunkRepr::Shutdown(ShutdownRepr { cum_tsn_ack: *cum }),
                ChunkSpec::ShutdownAck => ChunkRepr::ShutdownAck,
                ChunkSpec::Error(_) => ChunkRepr::Error(ErrorChunkRepr {
                    causes: List::new(&parts.causes),
                }),
                ChunkSpec::CookieEcho(cookie) => ChunkRepr::CookieEcho(CookieEchoRepr { cookie }),
                ChunkSpec::CookieAck => ChunkRepr::CookieAck,
                ChunkSpec::ShutdownComplete(t_bit) => {
                    ChunkRepr::ShutdownComplete(ShutdownCompleteRepr { t_bit: *t_bit })
                }
                ChunkSpec::Unknown {
                    chunk_type,
                    flags,
                    value,
                } => ChunkRepr::Unknown(UnknownChunkRepr {
                    chunk_type: *chunk_type,
                    flags: *flags,
                    value,
                }),
            }
        }
    }

    fn init_spec() -> impl Strategy<Value = ChunkSpec> {
        let fixed = (
            1..=u32::MAX,
            1500..=u32::MAX,
            1..=u16::MAX,
            1..=u16::MAX,
            any::<u32>(),
        );
        let params = proptest::collection::vec(param_spec(), 0..6);
        (any::<bool>(), fixed, params, bytes(40)).prop_map(|(ack, fixed, mut params, cookie)| {
            // An INIT ACK carries a State Cookie (RFC 9260 §3.3.3).
            if ack {
                params.push(ParamSpec::StateCookie(cookie));
            }
            ChunkSpec::Init { ack, fixed, params }
        })
    }

    pub(crate) fn chunk_spec() -> impl Strategy<Value = ChunkSpec> {
        let unknown_type = any::<u8>().prop_filter("known type", |t| {
            matches!(ChunkType::from(*t), ChunkType::Unknown(_))
        });
        let gap = (any::<u16>(), any::<u16>()).prop_map(|(start, end)| GapAckBlock { start, end });
        prop_oneof![
            (
                any::<[bool; 4]>(),
                any::<u32>(),
                any::<u16>(),
                any::<u16>(),
                any::<u32>(),
                proptest::collection::vec(any::<u8>(), 1..64)
            )
                .prop_map(|(flags, tsn, sid, ssn, ppid, user_data)| ChunkSpec::Data {
                    flags,
                    tsn,
                    sid,
                    ssn,
                    ppid,
                    user_data
                }),
            init_spec(),
            (
                any::<u32>(),
                any::<u32>(),
                proptest::collection::vec(gap, 0..6),
                proptest::collection::vec(any::<u32>(), 0..6)
            )
                .prop_map(|(cum, a_rwnd, gaps, dups)| ChunkSpec::Sack {
                    cum,
                    a_rwnd,
                    gaps,
                    dups
                }),
            (any::<bool>(), bytes(40)).prop_map(|(ack, info)| ChunkSpec::Heartbeat { ack, info }),
            (any::<bool>(), proptest::collection::vec(cause_spec(), 0..4))
                .prop_map(|(t_bit, causes)| ChunkSpec::Abort { t_bit, causes }),
            any::<u32>().prop_map(ChunkSpec::Shutdown),
            Just(ChunkSpec::ShutdownAck),
            proptest::collection::vec(cause_spec(), 1..4).prop_map(ChunkSpec::Error),
            bytes(80).prop_map(ChunkSpec::CookieEcho),
            Just(ChunkSpec::CookieAck),
            any::<bool>().prop_map(ChunkSpec::ShutdownComplete),
            (unknown_type, any::<u8>(), bytes(30)).prop_map(|(chunk_type, flags, value)| {
                ChunkSpec::Unknown {
                    chunk_type,
                    flags,
                    value,
                }
            }),
        ]
    }

    proptest! {
        #[test]
        fn chunk_repr_round_trips(spec in chunk_spec()) {
            let parts = spec.parts();
            let repr = spec.repr(&parts);
            let buf = emitted(&repr);
            prop_assert_eq!(buf.len(), repr.buffer_len());
            prop_assert_eq!(usize::from(u16::from_be_bytes([buf[2], buf[3]])), repr.chunk_len());
            prop_assert!(buf[repr.chunk_len()..].iter().all(|&b| b == 0), "padding is zero");
            prop_assert_eq!(parse(&buf), Ok(repr));
            // The last chunk of a packet may come without its padding.
            prop_assert_eq!(parse(&buf[..repr.chunk_len()]), Ok(repr));
        }
    }
}
