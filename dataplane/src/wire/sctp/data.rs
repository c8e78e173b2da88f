//! Payload Data (DATA) chunk (RFC 9260 §3.3.1): what carries every DDP segment and stream
//! session control message (RFC 5043 §5.2).

use super::chunk::{expect_type, Chunk, ChunkType};
use super::{
    length_field, padded, read_u16, read_u32, tlv_len, write_u16, write_u32, Error, Result,
    DATA_HEADER_LEN,
};

mod field {
    use core::ops::Range;

    pub const FLAGS: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const TSN: Range<usize> = 4..8;
    pub const STREAM_ID: Range<usize> = 8..10;
    pub const SSN: Range<usize> = 10..12;
    pub const PPID: Range<usize> = 12..16;
    pub const USER_DATA: usize = 16;
}

/// DATA flag bits (RFC 9260 §3.3.1): the upper four are reserved.
pub mod flag {
    /// I bit: the receiver should send its SACK without delay (RFC 9260 §3.3.1, from RFC 7053).
    pub const IMMEDIATE: u8 = 0x08;
    /// U bit: unordered; the SSN is then ignored.
    pub const UNORDERED: u8 = 0x04;
    /// B bit: first fragment of a user message.
    pub const BEGINNING: u8 = 0x02;
    /// E bit: last fragment of a user message.
    pub const ENDING: u8 = 0x01;
}

/// A view of a DATA chunk, chunk header included.
///
/// `new_checked` accepts a chunk without user data (length 16) so that its TSN can be read for
/// the No User Data error cause (RFC 9260 §6.2); [`DataRepr::parse`] refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataChunk<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> DataChunk<T> {
    /// Wraps `buffer` without checks; accessors may panic if it is too short.
    pub const fn new_unchecked(buffer: T) -> Self {
        DataChunk { buffer }
    }

    /// Wraps `buffer` after [`DataChunk::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let c = Self::new_unchecked(buffer);
        c.check_len()?;
        Ok(c)
    }

    /// `BadLength` if the chunk length is below the 16-byte DATA header, `Truncated` if the
    /// buffer is shorter than the chunk length (or holds no length field).
    pub fn check_len(&self) -> Result<()> {
        tlv_len(self.buffer.as_ref(), DATA_HEADER_LEN).map(|_| ())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    pub fn immediate(&self) -> bool {
        self.flags() & flag::IMMEDIATE != 0
    }

    pub fn unordered(&self) -> bool {
        self.flags() & flag::UNORDERED != 0
    }

    pub fn beginning(&self) -> bool {
        self.flags() & flag::BEGINNING != 0
    }

    pub fn ending(&self) -> bool {
        self.flags() & flag::ENDING != 0
    }

    pub fn chunk_length(&self) -> u16 {
        read_u16(&self.buffer.as_ref()[field::LENGTH])
    }

    pub fn tsn(&self) -> u32 {
        read_u32(&self.buffer.as_ref()[field::TSN])
    }

    pub fn stream_id(&self) -> u16 {
        read_u16(&self.buffer.as_ref()[field::STREAM_ID])
    }

    pub fn ssn(&self) -> u16 {
        read_u16(&self.buffer.as_ref()[field::SSN])
    }

    /// Payload protocol identifier: 16 for a DDP segment, 17 for DDP stream session control
    /// (RFC 5043 §5.2). Carried in network byte order like every other field.
    pub fn ppid(&self) -> u32 {
        read_u32(&self.buffer.as_ref()[field::PPID])
    }

    /// The user data, up to the chunk length (padding excluded).
    pub fn user_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::USER_DATA..usize::from(self.chunk_length())]
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> DataChunk<&'a T> {
    /// The user data with the lifetime of the underlying buffer.
    pub fn user_data_ref(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::USER_DATA..usize::from(self.chunk_length())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> DataChunk<T> {
    pub fn set_flags(&mut self, flags: u8) {
        self.buffer.as_mut()[field::FLAGS] = flags;
    }

    pub fn set_chunk_length(&mut self, len: u16) {
        write_u16(&mut self.buffer.as_mut()[field::LENGTH], len);
    }

    pub fn set_tsn(&mut self, tsn: u32) {
        write_u32(&mut self.buffer.as_mut()[field::TSN], tsn);
    }

    pub fn set_stream_id(&mut self, id: u16) {
        write_u16(&mut self.buffer.as_mut()[field::STREAM_ID], id);
    }

    pub fn set_ssn(&mut self, ssn: u16) {
        write_u16(&mut self.buffer.as_mut()[field::SSN], ssn);
    }

    pub fn set_ppid(&mut self, ppid: u32) {
        write_u32(&mut self.buffer.as_mut()[field::PPID], ppid);
    }

    /// The user data, up to the chunk length.
    pub fn user_data_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.chunk_length());
        &mut self.buffer.as_mut()[field::USER_DATA..len]
    }
}

/// A DATA chunk. `user_data` is never empty in a parsed Repr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataRepr<'a> {
    /// I bit (RFC 9260 §3.3.1): asks for an immediate SACK.
    pub immediate: bool,
    /// U bit: unordered delivery; DDP sends everything unordered (RFC 5043 §5.2).
    pub unordered: bool,
    /// B bit: first fragment of a user message.
    pub beginning: bool,
    /// E bit: last fragment of a user message.
    pub ending: bool,
    pub tsn: u32,
    pub stream_id: u16,
    /// Stream sequence number; ignored when `unordered`.
    pub ssn: u16,
    /// Payload protocol identifier (see [`super::PPID_DDP_SEGMENT`]).
    pub ppid: u32,
    pub user_data: &'a [u8],
}

impl<'a> DataRepr<'a> {
    /// Parses a DATA chunk. A chunk of length 16 carries no user data, which RFC 9260 §6.2
    /// makes a protocol violation answered by ABORT with the No User Data cause: it is
    /// `Malformed` here, and [`DataChunk`] still reads its TSN for that cause. Reserved flag
    /// bits are ignored.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(chunk: &Chunk<&'a T>) -> Result<Self> {
        expect_type(chunk, ChunkType::Data)?;
        let data = DataChunk::new_checked(chunk.bytes_ref())?;
        let user_data = data.user_data_ref();
        if user_data.is_empty() {
            return Err(Error::Malformed);
        }
        Ok(DataRepr {
            immediate: data.immediate(),
            unordered: data.unordered(),
            beginning: data.beginning(),
            ending: data.ending(),
            tsn: data.tsn(),
            stream_id: data.stream_id(),
            ssn: data.ssn(),
            ppid: data.ppid(),
            user_data,
        })
    }

    /// The flags byte: I, U, B, E bits, reserved bits zero.
    pub fn flags(&self) -> u8 {
        let bit = |set: bool, b: u8| if set { b } else { 0 };
        bit(self.immediate, flag::IMMEDIATE)
            | bit(self.unordered, flag::UNORDERED)
            | bit(self.beginning, flag::BEGINNING)
            | bit(self.ending, flag::ENDING)
    }

    /// The chunk length field: 16 plus the user data.
    pub fn chunk_len(&self) -> usize {
        DATA_HEADER_LEN + self.user_data.len()
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
        self.emit_with_tail(buf, 0);
    }

    /// As [`DataRepr::emit`] for a chunk whose user data is `user_data` followed by `tail`
    /// bytes written by someone else (zero-copy transmit): the chunk length counts them, the
    /// padding after them is zeroed, and `buf[DATA_HEADER_LEN + user_data.len()..][..tail]` is
    /// left as it was. `buf` holds `padded(chunk_len() + tail)` bytes.
    ///
    /// # Panics
    /// As [`DataRepr::emit`].
    pub fn emit_with_tail(&self, buf: &mut [u8], tail: usize) {
        let len = self.chunk_len() + tail;
        // The 16 header bytes from one array (RFC 9260 §3.3.1's layout) rather than through the
        // chunk view's setters: every DATA chunk sent comes here, and the setters' bounds checks
        // and type conversions cost about 100 instructions a chunk in callgrind.
        let [t0, t1, t2, t3] = self.tsn.to_be_bytes();
        let [s0, s1] = self.stream_id.to_be_bytes();
        let [q0, q1] = self.ssn.to_be_bytes();
        let [p0, p1, p2, p3] = self.ppid.to_be_bytes();
        let [l0, l1] = length_field(len).to_be_bytes();
        let header = [
            u8::from(ChunkType::Data),
            self.flags(),
            l0,
            l1,
            t0,
            t1,
            t2,
            t3,
            s0,
            s1,
            q0,
            q1,
            p0,
            p1,
            p2,
            p3,
        ];
        buf[..DATA_HEADER_LEN].copy_from_slice(&header);
        buf[DATA_HEADER_LEN..self.chunk_len()].copy_from_slice(self.user_data);
        for b in &mut buf[len..padded(len)] {
            *b = 0;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::super::chunk::tests::{emitted, parse};
    use super::super::chunk::ChunkRepr;
    use super::*;

    /// assoc-ddp-default.pcap frame 5: DDP Initiate, 5 bytes of private data, padded.
    const INITIATE: [u8; 28] = [
        0x00, 0x07, 0x00, 0x19, // DATA, U|B|E, length 25
        0x04, 0x59, 0x17, 0x51, // TSN 72947537
        0x00, 0x03, 0x00, 0x00, // stream 3, SSN 0
        0x00, 0x00, 0x00, 0x11, // PPID 17
        0x00, 0x00, 0x00, 0x01, b'h', b'e', b'l', b'l', b'o', // DDP-SSN 0, Initiate, "hello"
        0x00, 0x00, 0x00, // padding
    ];

    fn initiate() -> DataRepr<'static> {
        DataRepr {
            immediate: false,
            unordered: true,
            beginning: true,
            ending: true,
            tsn: 72947537,
            stream_id: 3,
            ssn: 0,
            ppid: 17,
            user_data: &INITIATE[16..25],
        }
    }

    #[test]
    fn data_chunk_view_fields() {
        let d = DataChunk::new_checked(&INITIATE[..]).unwrap();
        assert_eq!((d.flags(), d.chunk_length(), d.tsn()), (0x07, 25, 72947537));
        assert_eq!((d.stream_id(), d.ssn(), d.ppid()), (3, 0, 17));
        assert!(d.unordered() && d.beginning() && d.ending() && !d.immediate());
        assert_eq!(d.user_data(), &INITIATE[16..25]);
    }

    #[test]
    fn data_chunk_parses_from_usrsctp_bytes() {
        assert_eq!(parse(&INITIATE), Ok(ChunkRepr::Data(initiate())));
    }

    #[test]
    fn data_chunk_emit_writes_every_field_and_zero_padding() {
        assert_eq!(emitted(&ChunkRepr::Data(initiate())), INITIATE);
        let mut buf = [0xa5; 28];
        initiate().emit(&mut buf);
        assert_eq!(buf, INITIATE);
    }

    #[test]
    fn data_flags_map_to_their_bits() {
        let mut r = initiate();
        r.unordered = false;
        r.ending = false;
        r.immediate = true;
        assert_eq!(r.flags(), 0x0a);
        let b = emitted(&ChunkRepr::Data(r));
        assert_eq!(b[1], 0x0a);
        assert_eq!(parse(&b), Ok(ChunkRepr::Data(r)));
    }

    #[test]
    fn data_reserved_flags_are_ignored() {
        let mut b = INITIATE;
        b[1] = 0xf7;
        assert_eq!(parse(&b), Ok(ChunkRepr::Data(initiate())));
    }

    #[test]
    fn data_without_user_data_is_malformed_but_its_tsn_is_readable() {
        // RFC 9260 §6.2: answered by ABORT with No User Data carrying this TSN.
        let b = &INITIATE[..16];
        let mut b = b.to_vec();
        b[3] = 16;
        assert_eq!(parse(&b), Err(Error::Malformed));
        assert_eq!(
            DataChunk::new_checked(&b[..]).map(|d| d.tsn()),
            Ok(72947537)
        );
    }

    #[test]
    fn data_length_below_header_is_bad_length() {
        for len in [4u8, 8, 15] {
            let mut b = INITIATE;
            b[3] = len;
            assert_eq!(parse(&b), Err(Error::BadLength), "length {len}");
        }
    }

    #[test]
    fn data_view_rejects_truncated_header_and_length_past_end() {
        assert_eq!(
            DataChunk::new_checked(&INITIATE[..15]).err(),
            Some(Error::Truncated)
        );
        assert_eq!(
            DataChunk::new_checked(&INITIATE[..24]).err(),
            Some(Error::Truncated)
        );
        assert_eq!(parse(&INITIATE[..24]), Err(Error::Truncated));
    }

    #[test]
    fn data_view_setters_write_the_fields() {
        let mut b = [0xa5u8; 20];
        let mut d = DataChunk::new_unchecked(&mut b[..]);
        d.set_flags(0x03);
        d.set_chunk_length(17);
        d.set_tsn(0x0102_0304);
        d.set_stream_id(0x0506);
        d.set_ssn(0x0708);
        d.set_ppid(16);
        d.user_data_mut()[0] = 0xee;
        assert_eq!(
            b,
            [0xa5, 3, 0, 17, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 16, 0xee, 0xa5, 0xa5, 0xa5]
        );
    }
}
