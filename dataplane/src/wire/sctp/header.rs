//! The SCTP common header and the chunk list that follows it (RFC 9260 §3, §3.1).

use core::iter::FusedIterator;

use super::chunk::{Chunk, ChunkRepr};
use super::data::DataRepr;
use super::{
    padded, read_u16, read_u32, split_tlv, write_u16, write_u32, Error, Result, CHUNK_HEADER_LEN,
    HEADER_LEN, PAD_CHUNK_TYPE,
};

mod field {
    use core::ops::Range;

    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const VERIFICATION_TAG: Range<usize> = 4..8;
    pub const CHECKSUM: Range<usize> = 8..12;
    pub const CHUNKS: usize = 12;
}

/// A view of an SCTP packet: the common header and the chunks after it. The buffer is the
/// whole SCTP packet (the IP payload), since the IP length is what delimits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` without checks; accessors may panic if it is too short.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wraps `buffer` after [`Packet::check_len`]. The chunks are checked as [`Packet::chunks`]
    /// walks them, and the checksum is not looked at.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Wraps a received packet after [`Packet::check_len`] and the CRC32c check (RFC 9260 §6.8:
    /// a packet whose checksum does not match is discarded). This is the receive path's entry:
    /// a packet with a bad checksum is identified as [`Error::BadChecksum`] and no view of it is
    /// handed out, so nothing in it is parsed further.
    pub fn new_verified(buffer: T) -> Result<Self> {
        let p = Self::new_checked(buffer)?;
        if crate::wire::crc32c::verify(p.buffer.as_ref()) {
            Ok(p)
        } else {
            Err(Error::BadChecksum)
        }
    }

    /// `Truncated` if the buffer is shorter than the 12-byte common header.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn src_port(&self) -> u16 {
        read_u16(&self.buffer.as_ref()[field::SRC_PORT])
    }

    pub fn dst_port(&self) -> u16 {
        read_u16(&self.buffer.as_ref()[field::DST_PORT])
    }

    pub fn verification_tag(&self) -> u32 {
        read_u32(&self.buffer.as_ref()[field::VERIFICATION_TAG])
    }

    /// The checksum field as the CRC32c value (RFC 9260 Appendix A): the field holds the CRC's
    /// bytes least significant first, so this is `u32::from_le_bytes` of bytes 8..12, directly
    /// comparable with a CRC32c computed over the packet with the field zeroed. Verifying it is
    /// the caller's separate step (`crate::wire::crc32c`).
    pub fn checksum(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::CHECKSUM];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The bytes after the common header: the chunks and their padding.
    pub fn chunk_bytes(&self) -> &[u8] {
        &self.buffer.as_ref()[field::CHUNKS..]
    }

    /// The whole packet.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The chunks in packet order, each checked as described in the module documentation.
    pub fn chunks(&self) -> Chunks<'_> {
        Chunks::new(self.chunk_bytes())
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The bytes after the common header, with the lifetime of the underlying buffer.
    pub fn chunk_bytes_ref(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::CHUNKS..]
    }

    /// The chunks with the lifetime of the underlying buffer.
    pub fn chunks_ref(&self) -> Chunks<'a> {
        Chunks::new(self.chunk_bytes_ref())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, port: u16) {
        write_u16(&mut self.buffer.as_mut()[field::SRC_PORT], port);
    }

    pub fn set_dst_port(&mut self, port: u16) {
        write_u16(&mut self.buffer.as_mut()[field::DST_PORT], port);
    }

    pub fn set_verification_tag(&mut self, tag: u32) {
        write_u32(&mut self.buffer.as_mut()[field::VERIFICATION_TAG], tag);
    }

    /// Stores a CRC32c value in the checksum field, least significant byte first (see
    /// [`Packet::checksum`]).
    pub fn set_checksum(&mut self, crc: u32) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&crc.to_le_bytes());
    }

    /// The bytes after the common header.
    pub fn chunk_bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::CHUNKS..]
    }
}

/// Iterator over the chunks of a packet (RFC 9260 §3.2). Yields each chunk view, exactly the
/// chunk length long, or the first framing error, after which it ends: a chunk length below 4
/// is `BadLength`; a chunk length past the end, or 1 to 3 bytes left where a chunk header
/// should be, is `Truncated`; a packet ending inside a chunk's padding is `BadPadding`. A last
/// chunk whose padding is missing altogether is accepted (see the module documentation).
#[derive(Debug, Clone)]
pub struct Chunks<'a> {
    rest: &'a [u8],
    offset: usize,
}

impl<'a> Chunks<'a> {
    /// Walks the chunks in `bytes` (what follows the common header).
    pub const fn new(bytes: &'a [u8]) -> Self {
        Chunks {
            rest: bytes,
            offset: 0,
        }
    }

    /// Where the next chunk starts, relative to the first chunk.
    pub const fn offset(&self) -> usize {
        self.offset
    }
}

impl<'a> Iterator for Chunks<'a> {
    type Item = Result<Chunk<&'a [u8]>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match split_tlv(self.rest, CHUNK_HEADER_LEN) {
            Ok((chunk, used)) => {
                self.rest = self.rest.get(used..).unwrap_or_default();
                self.offset += used;
                Some(Ok(Chunk::new_unchecked(chunk)))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

impl FusedIterator for Chunks<'_> {}

/// The common header (RFC 9260 §3.1), checksum aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeaderRepr {
    pub src_port: u16,
    pub dst_port: u16,
    pub verification_tag: u32,
}

impl HeaderRepr {
    /// Reads the header; a source or destination port of 0 is `Malformed` (RFC 9260 §3.1: "The
    /// ... Port Number 0 MUST NOT be used"). Does not verify the checksum.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        if packet.src_port() == 0 || packet.dst_port() == 0 {
            return Err(Error::Malformed);
        }
        Ok(HeaderRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            verification_tag: packet.verification_tag(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into `buf[..12]` with a zero checksum, to be filled over the whole
    /// packet afterwards (RFC 9260 §6.8).
    ///
    /// # Panics
    /// If `buf` is shorter than 12 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = Packet::new_unchecked(&mut buf[..HEADER_LEN]);
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_verification_tag(self.verification_tag);
        p.set_checksum(0);
    }
}

/// Builds a packet in a caller's buffer without allocating: the header, then chunks appended
/// one by one (bundling, RFC 9260 §6.10). The checksum is left 0 for the caller to fill.
#[derive(Debug)]
pub struct PacketBuilder<'b> {
    buf: &'b mut [u8],
    len: usize,
}

impl<'b> PacketBuilder<'b> {
    /// Writes `header` at the start of `buf`; `Truncated` if `buf` cannot hold it.
    pub fn new(buf: &'b mut [u8], header: &HeaderRepr) -> Result<Self> {
        let h = buf.get_mut(..HEADER_LEN).ok_or(Error::Truncated)?;
        header.emit(h);
        Ok(PacketBuilder {
            buf,
            len: HEADER_LEN,
        })
    }

    /// Appends `chunk` with its padding. `Truncated` if it does not fit the buffer, `BadLength`
    /// if its length does not fit the 16-bit chunk length; nothing is written then.
    pub fn push(&mut self, chunk: &ChunkRepr<'_>) -> Result<()> {
        if chunk.chunk_len() > usize::from(u16::MAX) {
            return Err(Error::BadLength);
        }
        let n = chunk.buffer_len();
        let end = self.len.checked_add(n).ok_or(Error::Truncated)?;
        let room = self.buf.get_mut(self.len..end).ok_or(Error::Truncated)?;
        chunk.emit(room);
        self.len = end;
        Ok(())
    }

    /// Appends a DATA chunk whose user data ends with `tail` bytes this builder does not
    /// write ([`DataRepr::emit_with_tail`]); returns where they go in the packet. Errors as for
    /// [`PacketBuilder::push`].
    pub fn push_data_with_tail(&mut self, chunk: &DataRepr<'_>, tail: usize) -> Result<usize> {
        let len = chunk.chunk_len() + tail;
        if len > usize::from(u16::MAX) {
            return Err(Error::BadLength);
        }
        let end = self.len.checked_add(padded(len)).ok_or(Error::Truncated)?;
        let room = self.buf.get_mut(self.len..end).ok_or(Error::Truncated)?;
        chunk.emit_with_tail(room, tail);
        let at = self.len + chunk.chunk_len();
        self.len = end;
        Ok(at)
    }

    /// Appends a PAD chunk (RFC 4820) of `len` bytes, header included (a multiple of 4, at
    /// least 4), its padding data zero: a path MTU probe's filler (RFC 8899 §6.2). Errors as
    /// for [`PacketBuilder::push`]; `BadLength` for a length not so.
    pub fn push_padding(&mut self, len: usize) -> Result<()> {
        if len < 4 || !len.is_multiple_of(4) || len > usize::from(u16::MAX) {
            return Err(Error::BadLength);
        }
        let end = self.len.checked_add(len).ok_or(Error::Truncated)?;
        let room = self.buf.get_mut(self.len..end).ok_or(Error::Truncated)?;
        room.fill(0);
        room[0] = PAD_CHUNK_TYPE;
        room[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        self.len = end;
        Ok(())
    }

    /// Bytes written so far, header included.
    pub fn packet_len(&self) -> usize {
        self.len
    }

    /// Bytes still free in the buffer.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.len
    }

    /// The packet written, ready for the checksum.
    pub fn finish(self) -> &'b mut [u8] {
        let len = self.len;
        &mut self.buf[..len]
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::super::chunk::tests::{chunk_spec, ChunkSpec};
    use super::super::chunk::ChunkType;
    use super::super::control::ShutdownCompleteRepr;
    use super::super::data::DataRepr;
    use super::*;
    use proptest::prelude::*;

    /// assoc-ddp-default.pcap frame 17: SHUTDOWN COMPLETE, T=0.
    const SHUTDOWN_COMPLETE: [u8; 16] = [
        0x13, 0x89, 0x13, 0x8a, 0xf8, 0x01, 0xd0, 0x59, 0x76, 0x57, 0x1a, 0x24, 0x0e, 0x00, 0x00,
        0x04,
    ];

    fn header() -> HeaderRepr {
        HeaderRepr {
            src_port: 5001,
            dst_port: 5002,
            verification_tag: 0xf801d059,
        }
    }

    #[test]
    fn header_view_fields() {
        let p = Packet::new_checked(&SHUTDOWN_COMPLETE[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port()), (5001, 5002));
        assert_eq!(p.verification_tag(), 0xf801d059);
        assert_eq!(p.checksum(), 0x241a5776);
        assert_eq!(p.chunk_bytes(), &SHUTDOWN_COMPLETE[12..]);
        assert_eq!(HeaderRepr::parse(&p), Ok(header()));
    }

    #[test]
    fn header_emit_writes_every_field_and_a_zero_checksum() {
        let mut buf = [0xa5; 12];
        header().emit(&mut buf);
        assert_eq!(
            buf,
            [0x13, 0x89, 0x13, 0x8a, 0xf8, 0x01, 0xd0, 0x59, 0, 0, 0, 0]
        );
    }

    #[test]
    fn checksum_is_stored_least_significant_byte_first() {
        let mut buf = [0u8; 12];
        Packet::new_unchecked(&mut buf[..]).set_checksum(0x0102_0304);
        assert_eq!(buf[8..], [4, 3, 2, 1]);
        assert_eq!(Packet::new_unchecked(&buf[..]).checksum(), 0x0102_0304);
    }

    #[test]
    fn truncated_common_header() {
        for n in 0..HEADER_LEN {
            assert_eq!(
                Packet::new_checked(&SHUTDOWN_COMPLETE[..n]).err(),
                Some(Error::Truncated)
            );
        }
        let p = Packet::new_checked(&SHUTDOWN_COMPLETE[..12]).unwrap();
        assert_eq!(p.chunks().count(), 0);
    }

    #[test]
    fn zero_ports_are_malformed() {
        for at in [0, 2] {
            let mut b = SHUTDOWN_COMPLETE;
            b[at..at + 2].copy_from_slice(&[0, 0]);
            assert_eq!(
                HeaderRepr::parse(&Packet::new_checked(&b[..]).unwrap()),
                Err(Error::Malformed)
            );
        }
    }

    /// A packet with a DATA chunk of 5 bytes of user data (3 bytes of padding) then a
    /// SHUTDOWN COMPLETE.
    fn two_chunks() -> Vec<u8> {
        let mut b = SHUTDOWN_COMPLETE[..12].to_vec();
        b.extend_from_slice(&[
            0, 7, 0, 21, 0, 0, 0, 1, 0, 3, 0, 0, 0, 0, 0, 17, 1, 2, 3, 4, 5, 0, 0, 0,
        ]);
        b.extend_from_slice(&[14, 0, 0, 4]);
        b
    }

    fn kinds(b: &[u8]) -> Vec<Result<ChunkType>> {
        Packet::new_checked(b)
            .unwrap()
            .chunks()
            .map(|c| c.map(|c| c.chunk_type()))
            .collect()
    }

    #[test]
    fn chunks_follow_the_padding_rule() {
        let b = two_chunks();
        assert_eq!(
            kinds(&b),
            [Ok(ChunkType::Data), Ok(ChunkType::ShutdownComplete)]
        );
        let p = Packet::new_checked(&b[..]).unwrap();
        let mut it = p.chunks();
        assert_eq!(
            it.next().map(|c| c.map(|c| c.as_bytes().len())),
            Some(Ok(21))
        );
        assert_eq!(it.offset(), 24);
    }

    #[test]
    fn last_chunk_without_padding_is_accepted() {
        let b = two_chunks();
        // Only the DATA chunk, its 3 padding bytes missing.
        assert_eq!(kinds(&b[..12 + 21]), [Ok(ChunkType::Data)]);
    }

    #[test]
    fn last_chunk_with_padding_cut_short_is_bad_padding() {
        let b = two_chunks();
        assert_eq!(kinds(&b[..12 + 22]), [Err(Error::BadPadding)]);
        assert_eq!(kinds(&b[..12 + 23]), [Err(Error::BadPadding)]);
    }

    #[test]
    fn padding_bytes_are_ignored() {
        let mut b = two_chunks();
        b[12 + 21..12 + 24].copy_from_slice(&[0xff, 0xee, 0xdd]);
        assert_eq!(
            kinds(&b),
            [Ok(ChunkType::Data), Ok(ChunkType::ShutdownComplete)]
        );
    }

    #[test]
    fn chunk_length_below_four_is_bad_length_and_ends_iteration() {
        let mut b = two_chunks();
        b[12 + 3] = 3;
        assert_eq!(kinds(&b), [Err(Error::BadLength)]);
        let mut b = two_chunks();
        b[12 + 24 + 3] = 0;
        assert_eq!(kinds(&b), [Ok(ChunkType::Data), Err(Error::BadLength)]);
    }

    #[test]
    fn chunk_length_past_end_is_truncated() {
        let mut b = two_chunks();
        b[12 + 24 + 3] = 8;
        assert_eq!(kinds(&b), [Ok(ChunkType::Data), Err(Error::Truncated)]);
    }

    #[test]
    fn stray_bytes_after_the_last_chunk_are_truncated() {
        for extra in 1..4 {
            let mut b = two_chunks();
            b.resize(b.len() + extra, 0);
            assert_eq!(
                kinds(&b),
                [
                    Ok(ChunkType::Data),
                    Ok(ChunkType::ShutdownComplete),
                    Err(Error::Truncated)
                ]
            );
        }
        // Four zero bytes more than the padding look like a chunk of length 0.
        let mut b = two_chunks();
        b.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(kinds(&b)[2], Err(Error::BadLength));
    }

    #[test]
    fn builder_writes_header_chunks_and_padding() {
        let data = ChunkRepr::Data(DataRepr {
            immediate: false,
            unordered: true,
            beginning: true,
            ending: true,
            tsn: 1,
            stream_id: 3,
            ssn: 0,
            ppid: 17,
            user_data: &[1, 2, 3, 4, 5],
        });
        let done = ChunkRepr::ShutdownComplete(ShutdownCompleteRepr { t_bit: false });
        let mut buf = [0xa5; 64];
        let mut pb = PacketBuilder::new(&mut buf, &header()).unwrap();
        pb.push(&data).unwrap();
        pb.push(&done).unwrap();
        assert_eq!((pb.packet_len(), pb.remaining()), (40, 24));
        let packet = pb.finish();
        let mut expected = two_chunks();
        expected[8..12].fill(0);
        assert_eq!(packet, &expected[..]);
    }

    #[test]
    fn builder_refuses_what_does_not_fit() {
        let mut small = [0u8; 11];
        assert_eq!(
            PacketBuilder::new(&mut small, &header()).err(),
            Some(Error::Truncated)
        );
        let mut buf = [0xa5u8; 15];
        let mut pb = PacketBuilder::new(&mut buf, &header()).unwrap();
        assert_eq!(pb.push(&ChunkRepr::CookieAck), Err(Error::Truncated));
        assert_eq!(pb.packet_len(), 12);
        assert_eq!(buf[12..], [0xa5; 3], "nothing written");
    }

    #[test]
    fn builder_refuses_a_chunk_longer_than_the_length_field() {
        let big = vec![0u8; 70_000];
        let chunk = ChunkRepr::CookieEcho(super::super::CookieEchoRepr { cookie: &big });
        let mut buf = vec![0u8; 80_000];
        let mut pb = PacketBuilder::new(&mut buf, &header()).unwrap();
        assert_eq!(pb.push(&chunk), Err(Error::BadLength));
    }

    /// Parses everything in `bytes` that parses; whatever parses re-emits to bytes that parse
    /// to the same Repr. Must not panic, whatever the bytes.
    fn parse_all_and_re_emit(bytes: &[u8]) -> core::result::Result<(), TestCaseError> {
        let Ok(p) = Packet::new_checked(bytes) else {
            return Ok(());
        };
        let _ = HeaderRepr::parse(&p);
        for c in p.chunks_ref() {
            let Ok(c) = c else { break };
            let _ = (c.chunk_type(), c.flags(), c.value());
            if let Ok(r) = ChunkRepr::parse(&c) {
                let mut buf = vec![0xa5; r.buffer_len()];
                r.emit(&mut buf);
                prop_assert_eq!(
                    ChunkRepr::parse(&Chunk::new_checked(&buf[..]).unwrap()),
                    Ok(r)
                );
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            parse_all_and_re_emit(&bytes)?;
        }

        #[test]
        fn corrupted_packets_never_panic(
            specs in proptest::collection::vec(chunk_spec(), 1..3),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
            cut in any::<usize>(),
        ) {
            let header = HeaderRepr { src_port: 1, dst_port: 2, verification_tag: 3 };
            let parts: Vec<_> = specs.iter().map(ChunkSpec::parts).collect();
            let mut buf = vec![0; 2048];
            let mut pb = PacketBuilder::new(&mut buf, &header).unwrap();
            for (s, p) in specs.iter().zip(&parts) {
                pb.push(&s.repr(p)).unwrap();
            }
            let packet = pb.finish();
            for (at, v) in flips {
                let len = packet.len();
                packet[at % len] = v;
            }
            let end = HEADER_LEN + cut % (packet.len() - HEADER_LEN + 1);
            parse_all_and_re_emit(&packet[..end])?;
        }

        #[test]
        fn packet_round_trips(
            (src_port, dst_port, verification_tag) in (1..=u16::MAX, 1..=u16::MAX, any::<u32>()),
            specs in proptest::collection::vec(chunk_spec(), 1..4),
        ) {
            let header = HeaderRepr { src_port, dst_port, verification_tag };
            let parts: Vec<_> = specs.iter().map(ChunkSpec::parts).collect();
            let reprs: Vec<ChunkRepr<'_>> = specs.iter().zip(&parts).map(|(s, p)| s.repr(p)).collect();
            let mut buf = vec![0xa5; 2048];
            let mut pb = PacketBuilder::new(&mut buf, &header).unwrap();
            for r in &reprs {
                pb.push(r).unwrap();
            }
            let packet = pb.finish();
            prop_assert_eq!(packet.len() % 4, 0);
            let p = Packet::new_checked(&packet[..]).unwrap();
            prop_assert_eq!(HeaderRepr::parse(&p), Ok(header));
            prop_assert_eq!(p.checksum(), 0);
            let parsed: Result<Vec<ChunkRepr<'_>>> =
                p.chunks_ref().map(|c| c.and_then(|c| ChunkRepr::parse(&c))).collect();
            prop_assert_eq!(parsed, Ok(reprs));
        }
    }
}
