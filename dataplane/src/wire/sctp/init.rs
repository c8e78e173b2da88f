//! Initiation (INIT) and Initiation Acknowledgement (INIT ACK) chunks (RFC 9260 §3.3.2,
//! §3.3.3): the same fixed fields followed by parameters.

use super::chunk::{emit_header, expect_type, Chunk, ChunkType};
use super::list::List;
use super::param::ParamRepr;
use super::{
    padded, read_u16, read_u32, tlv_len, write_u16, write_u32, Error, Result, CHUNK_HEADER_LEN,
    INIT_MIN_LEN, MIN_A_RWND,
};

mod field {
    use core::ops::Range;

    pub const LENGTH: Range<usize> = 2..4;
    pub const INITIATE_TAG: Range<usize> = 4..8;
    pub const A_RWND: Range<usize> = 8..12;
    pub const OUTBOUND_STREAMS: Range<usize> = 12..14;
    pub const INBOUND_STREAMS: Range<usize> = 14..16;
    pub const INITIAL_TSN: Range<usize> = 16..20;
    pub const PARAMS: usize = 20;
}

/// A view of an INIT or INIT ACK chunk, chunk header included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitChunk<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> InitChunk<T> {
    /// Wraps `buffer` without checks; accessors may panic if it is too short.
    pub const fn new_unchecked(buffer: T) -> Self {
        InitChunk { buffer }
    }

    /// Wraps `buffer` after [`InitChunk::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let c = Self::new_unchecked(buffer);
        c.check_len()?;
        Ok(c)
    }

    /// `BadLength` if the chunk length is below the 20 fixed bytes, `Truncated` if the buffer
    /// is shorter than the chunk length (or holds no length field).
    pub fn check_len(&self) -> Result<()> {
        tlv_len(self.buffer.as_ref(), INIT_MIN_LEN).map(|_| ())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn chunk_length(&self) -> u16 {
        read_u16(&self.buffer.as_ref()[field::LENGTH])
    }

    /// The tag the peer must put in the verification tag of every packet it sends.
    pub fn initiate_tag(&self) -> u32 {
        read_u32(&self.buffer.as_ref()[field::INITIATE_TAG])
    }

    /// Advertised receiver window credit.
    pub fn a_rwnd(&self) -> u32 {
        read_u32(&self.buffer.as_ref()[field::A_RWND])
    }

    /// Number of outbound streams (OS).
    pub fn outbound_streams(&self) -> u16 {
        read_u16(&self.buffer.as_ref()[field::OUTBOUND_STREAMS])
    }

    /// Maximum number of inbound streams (MIS).
    pub fn inbound_streams(&self) -> u16 {
        read_u16(&self.buffer.as_ref()[field::INBOUND_STREAMS])
    }

    pub fn initial_tsn(&self) -> u32 {
        read_u32(&self.buffer.as_ref()[field::INITIAL_TSN])
    }

    /// The parameter bytes, up to the chunk length.
    pub fn params(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PARAMS..usize::from(self.chunk_length())]
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> InitChunk<&'a T> {
    /// The parameter bytes with the lifetime of the underlying buffer.
    pub fn params_ref(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PARAMS..usize::from(self.chunk_length())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> InitChunk<T> {
    pub fn set_chunk_length(&mut self, len: u16) {
        write_u16(&mut self.buffer.as_mut()[field::LENGTH], len);
    }

    pub fn set_initiate_tag(&mut self, tag: u32) {
        write_u32(&mut self.buffer.as_mut()[field::INITIATE_TAG], tag);
    }

    pub fn set_a_rwnd(&mut self, a_rwnd: u32) {
        write_u32(&mut self.buffer.as_mut()[field::A_RWND], a_rwnd);
    }

    pub fn set_outbound_streams(&mut self, n: u16) {
        write_u16(&mut self.buffer.as_mut()[field::OUTBOUND_STREAMS], n);
    }

    pub fn set_inbound_streams(&mut self, n: u16) {
        write_u16(&mut self.buffer.as_mut()[field::INBOUND_STREAMS], n);
    }

    pub fn set_initial_tsn(&mut self, tsn: u32) {
        write_u32(&mut self.buffer.as_mut()[field::INITIAL_TSN], tsn);
    }
}

/// An INIT chunk (RFC 9260 §3.3.2). Also the body of [`InitAckRepr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitRepr<'a> {
    /// Not 0 in a parsed Repr.
    pub initiate_tag: u32,
    /// At least 1500 ([`MIN_A_RWND`]) in a parsed Repr.
    pub a_rwnd: u32,
    /// OS; not 0 in a parsed Repr.
    pub outbound_streams: u16,
    /// MIS; not 0 in a parsed Repr.
    pub inbound_streams: u16,
    pub initial_tsn: u32,
    /// The parameters in wire order, unknown ones included.
    pub params: List<'a, ParamRepr<'a>>,
}

impl<'a> InitRepr<'a> {
    /// Parses an INIT chunk. Lengths first: the view's and every parameter's (`Truncated`,
    /// `BadLength`, `BadPadding`). Then the values RFC 9260 §3.3.2 forbids are `Malformed`: an
    /// initiate tag of 0 (the receiver silently discards), OS or MIS of 0 and a_rwnd below
    /// 1500 (the receiver discards and should answer with ABORT carrying the initiate tag,
    /// which [`InitChunk`] still reads).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(chunk: &Chunk<&'a T>) -> Result<Self> {
        expect_type(chunk, ChunkType::Init)?;
        Self::parse_fields(chunk)
    }

    fn parse_fields<T: AsRef<[u8]> + ?Sized>(chunk: &Chunk<&'a T>) -> Result<Self> {
        let init = InitChunk::new_checked(chunk.bytes_ref())?;
        let params = List::parse(init.params_ref())?;
        if init.initiate_tag() == 0
            || init.outbound_streams() == 0
            || init.inbound_streams() == 0
            || init.a_rwnd() < MIN_A_RWND
        {
            return Err(Error::Malformed);
        }
        Ok(InitRepr {
            initiate_tag: init.initiate_tag(),
            a_rwnd: init.a_rwnd(),
            outbound_streams: init.outbound_streams(),
            inbound_streams: init.inbound_streams(),
            initial_tsn: init.initial_tsn(),
            params,
        })
    }

    /// The value of the first Adaptation Layer Indication parameter, if any (RFC 5043 §5.1:
    /// 1 for DDP).
    pub fn adaptation_indication(&self) -> Option<u32> {
        self.params.iter().find_map(|p| match p {
            ParamRepr::AdaptationLayerIndication(v) => Some(v),
            _ => None,
        })
    }

    /// The first State Cookie parameter, if any.
    pub fn state_cookie(&self) -> Option<&'a [u8]> {
        self.params.iter().find_map(|p| match p {
            ParamRepr::StateCookie(c) => Some(c),
            _ => None,
        })
    }

    /// The chunk length field: the fixed fields and the parameters, the last parameter's
    /// padding not counted (RFC 9260 §3.2).
    pub fn chunk_len(&self) -> usize {
        INIT_MIN_LEN + self.params.wire_len()
    }

    /// Bytes `emit` writes: the chunk and its padding.
    pub fn buffer_len(&self) -> usize {
        padded(self.chunk_len())
    }

    /// Writes the INIT chunk and its zero padding into `buf[..self.buffer_len()]`.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`, or the chunk is longer than 65535 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        self.emit_as(ChunkType::Init, buf);
    }

    fn emit_as(&self, t: ChunkType, buf: &mut [u8]) {
        let value = emit_header(buf, t, 0, self.chunk_len() - CHUNK_HEADER_LEN);
        self.params
            .emit(&mut value[field::PARAMS - CHUNK_HEADER_LEN..]);
        let mut c = InitChunk::new_unchecked(buf);
        c.set_initiate_tag(self.initiate_tag);
        c.set_a_rwnd(self.a_rwnd);
        c.set_outbound_streams(self.outbound_streams);
        c.set_inbound_streams(self.inbound_streams);
        c.set_initial_tsn(self.initial_tsn);
    }
}

/// An INIT ACK chunk (RFC 9260 §3.3.3): the INIT fields of the responder. A parsed INIT ACK
/// has a State Cookie parameter; whoever builds one must include it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitAckRepr<'a>(pub InitRepr<'a>);

impl<'a> InitAckRepr<'a> {
    /// Parses an INIT ACK chunk with the checks of [`InitRepr::parse`]; a missing State Cookie
    /// is `Malformed` too (it is mandatory, RFC 9260 §3.3.3; the endpoint reports it with the
    /// Missing Mandatory Parameter cause, §3.3.10.2).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(chunk: &Chunk<&'a T>) -> Result<Self> {
        expect_type(chunk, ChunkType::InitAck)?;
        let init = InitRepr::parse_fields(chunk)?;
        if init.state_cookie().is_none() {
            return Err(Error::Malformed);
        }
        Ok(InitAckRepr(init))
    }

    /// The State Cookie to echo in COOKIE ECHO.
    pub fn state_cookie(&self) -> Option<&'a [u8]> {
        self.0.state_cookie()
    }

    pub fn chunk_len(&self) -> usize {
        self.0.chunk_len()
    }

    pub fn buffer_len(&self) -> usize {
        self.0.buffer_len()
    }

    /// Writes the INIT ACK chunk and its zero padding into `buf[..self.buffer_len()]`.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`, or the chunk is longer than 65535 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        self.0.emit_as(ChunkType::InitAck, buf);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::super::chunk::tests::{emitted, parse};
    use super::super::chunk::ChunkRepr;
    use super::super::param::ParamType;
    use super::super::UnrecognizedAction;
    use super::*;

    /// assoc-ddp-minimal.pcap frame 1: INIT with only the Adaptation Layer Indication.
    const MINIMAL_INIT: [u8; 28] = [
        0x01, 0x00, 0x00, 0x1c, // INIT, length 28
        0x22, 0x92, 0x49, 0xcf, // initiate tag
        0x00, 0x02, 0x00, 0x00, // a_rwnd 131072
        0x00, 0x08, 0x00, 0x08, // OS 8, MIS 8
        0x9c, 0x72, 0xb7, 0x73, // initial TSN 2624763763
        0xc0, 0x06, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01, // ALI 1
    ];

    fn minimal_params() -> [ParamRepr<'static>; 1] {
        [ParamRepr::AdaptationLayerIndication(1)]
    }

    fn minimal<'a>(params: &'a [ParamRepr<'a>]) -> InitRepr<'a> {
        InitRepr {
            initiate_tag: 0x229249cf,
            a_rwnd: 131072,
            outbound_streams: 8,
            inbound_streams: 8,
            initial_tsn: 2624763763,
            params: List::new(params),
        }
    }

    /// An INIT ACK with the ALI, an unknown skip-parameter of odd length and a 5-byte cookie
    /// last, whose padding is outside the chunk length.
    const INIT_ACK: [u8; 48] = [
        0x02, 0x00, 0x00, 0x2d, // INIT ACK, length 45
        0xb4, 0x30, 0xcb, 0x8d, 0x00, 0x00, 0x05, 0xdc, // tag, a_rwnd 1500
        0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, // OS 1, MIS 2, initial TSN 0
        0xc0, 0x06, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01, // ALI 1
        0x80, 0x03, 0x00, 0x06, 0x80, 0xc1, 0x00, 0x00, // CHUNKS (unknown), padded
        0x00, 0x07, 0x00, 0x09, 1, 2, 3, 4, 5, 0, 0, 0, // State Cookie, 3 bytes padding
    ];

    #[test]
    fn init_view_fields() {
        let c = InitChunk::new_checked(&MINIMAL_INIT[..]).unwrap();
        assert_eq!(
            (c.chunk_length(), c.initiate_tag(), c.a_rwnd()),
            (28, 0x229249cf, 131072)
        );
        assert_eq!((c.outbound_streams(), c.inbound_streams()), (8, 8));
        assert_eq!(c.initial_tsn(), 2624763763);
        assert_eq!(c.params(), &MINIMAL_INIT[20..]);
    }

    #[test]
    fn init_parses_from_usrsctp_bytes() {
        let params = minimal_params();
        let r = parse(&MINIMAL_INIT).unwrap();
        assert_eq!(r, ChunkRepr::Init(minimal(&params)));
        let ChunkRepr::Init(init) = r else {
            unreachable!()
        };
        assert_eq!(init.adaptation_indication(), Some(1));
        assert_eq!(init.state_cookie(), None);
    }

    #[test]
    fn init_emit_writes_every_field() {
        let params = minimal_params();
        assert_eq!(emitted(&ChunkRepr::Init(minimal(&params))), MINIMAL_INIT);
        let mut buf = [0xa5; 28];
        minimal(&params).emit(&mut buf);
        assert_eq!(buf, MINIMAL_INIT);
    }

    #[test]
    fn init_without_parameters_is_twenty_bytes() {
        let r = minimal(&[]);
        assert_eq!((r.chunk_len(), r.buffer_len()), (INIT_MIN_LEN, 20));
        let b = emitted(&ChunkRepr::Init(r));
        assert_eq!(b[..4], [1, 0, 0, 20]);
        assert_eq!(parse(&b), Ok(ChunkRepr::Init(r)));
    }

    #[test]
    fn init_ack_last_parameter_padding_is_chunk_padding() {
        let params = [
            ParamRepr::AdaptationLayerIndication(1),
            ParamRepr::Unknown {
                param_type: 0x8003,
                value: &[0x80, 0xc1],
            },
            ParamRepr::StateCookie(&[1, 2, 3, 4, 5]),
        ];
        let r = InitAckRepr(InitRepr {
            initiate_tag: 0xb430cb8d,
            a_rwnd: 1500,
            outbound_streams: 1,
            inbound_streams: 2,
            initial_tsn: 0,
            params: List::new(&params),
        });
        assert_eq!((r.chunk_len(), r.buffer_len()), (45, 48));
        assert_eq!(emitted(&ChunkRepr::InitAck(r)), INIT_ACK);
        let parsed = parse(&INIT_ACK).unwrap();
        assert_eq!(parsed, ChunkRepr::InitAck(r));
        let ChunkRepr::InitAck(ack) = parsed else {
            unreachable!()
        };
        assert_eq!(ack.state_cookie(), Some(&[1u8, 2, 3, 4, 5][..]));
        let kinds: Vec<_> = ack.0.params.iter().map(|p| p.param_type()).collect();
        assert_eq!(
            kinds,
            [
                ParamType::AdaptationLayerIndication,
                ParamType::Unknown(0x8003),
                ParamType::StateCookie
            ]
        );
        assert_eq!(
            ack.0.params.iter().nth(1).map(|p| p.action()),
            Some(UnrecognizedAction::Skip)
        );
    }

    #[test]
    fn init_ack_chunk_length_including_final_padding_is_accepted() {
        let mut b = INIT_ACK;
        b[3] = 48;
        assert_eq!(parse(&b), parse(&INIT_ACK));
    }

    #[test]
    fn init_ack_chunk_length_ending_inside_parameter_padding_is_bad_padding() {
        let mut b = INIT_ACK;
        b[3] = 46;
        assert_eq!(parse(&b), Err(Error::BadPadding));
    }

    #[test]
    fn init_ack_without_state_cookie_is_malformed() {
        let without_cookie = {
            let mut v = INIT_ACK[..36].to_vec();
            v[3] = 36;
            v
        };
        assert_eq!(parse(&without_cookie), Err(Error::Malformed));
        // The same bytes as an INIT are fine.
        let mut as_init = without_cookie.clone();
        as_init[0] = 1;
        assert!(matches!(parse(&as_init), Ok(ChunkRepr::Init(_))));
    }

    #[test]
    fn init_zero_initiate_tag_streams_and_small_a_rwnd_are_malformed() {
        for (at, v) in [(4..8, 0u32), (8..12, 1499)] {
            let mut b = MINIMAL_INIT;
            b[at].copy_from_slice(&v.to_be_bytes());
            assert_eq!(parse(&b), Err(Error::Malformed));
            assert!(
                InitChunk::new_checked(&b[..]).is_ok(),
                "the view still reads it"
            );
        }
        for at in [12..14, 14..16] {
            let mut b = MINIMAL_INIT;
            b[at].copy_from_slice(&[0, 0]);
            assert_eq!(parse(&b), Err(Error::Malformed));
        }
    }

    #[test]
    fn init_length_below_twenty_is_bad_length() {
        let mut b = MINIMAL_INIT;
        b[3] = 19;
        assert_eq!(parse(&b), Err(Error::BadLength));
        assert_eq!(InitChunk::new_checked(&b[..]).err(), Some(Error::BadLength));
    }

    #[test]
    fn init_view_rejects_truncated_fixed_fields_and_length_past_end() {
        assert_eq!(
            InitChunk::new_checked(&MINIMAL_INIT[..19]).err(),
            Some(Error::Truncated)
        );
        assert_eq!(
            InitChunk::new_checked(&MINIMAL_INIT[..27]).err(),
            Some(Error::Truncated)
        );
    }

    #[test]
    fn init_parameter_errors_fail_the_chunk() {
        // ALI with length 6: BadLength from the parameter.
        let mut b = MINIMAL_INIT.to_vec();
        b[23] = 6;
        b[3] = 26;
        b.truncate(26);
        assert_eq!(parse(&b), Err(Error::BadLength));
        // A parameter length running past the chunk.
        let mut b = MINIMAL_INIT;
        b[23] = 12;
        assert_eq!(parse(&b), Err(Error::Truncated));
        // A parameter length below 4.
        let mut b = MINIMAL_INIT;
        b[23] = 3;
        assert_eq!(parse(&b), Err(Error::BadLength));
        // 1 to 3 stray bytes after the last parameter.
        let mut b = MINIMAL_INIT.to_vec();
        b.extend_from_slice(&[0, 0]);
        b[3] = 30;
        assert_eq!(parse(&b), Err(Error::Truncated));
    }

    #[test]
    fn init_view_setters_write_the_fields() {
        let mut b = [0xa5u8; 20];
        let mut c = InitChunk::new_unchecked(&mut b[..]);
        c.set_chunk_length(20);
        c.set_initiate_tag(1);
        c.set_a_rwnd(2);
        c.set_outbound_streams(3);
        c.set_inbound_streams(4);
        c.set_initial_tsn(5);
        assert_eq!(
            b,
            [0xa5, 0xa5, 0, 20, 0, 0, 0, 1, 0, 0, 0, 2, 0, 3, 0, 4, 0, 0, 0, 5]
        );
    }
}
