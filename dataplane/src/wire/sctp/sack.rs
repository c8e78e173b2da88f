//! Selective Acknowledgement (SACK) chunk (RFC 9260 §3.3.4).

use super::chunk::{emit_header, expect_type, Chunk, ChunkType};
use super::list::{List, ListElement};
use super::{
    padded, read_u16, read_u32, tlv_len, write_u16, write_u32, Error, Result, CHUNK_HEADER_LEN,
    SACK_MIN_LEN,
};

mod field {
    use core::ops::Range;

    pub const LENGTH: Range<usize> = 2..4;
    pub const CUM_TSN_ACK: Range<usize> = 4..8;
    pub const A_RWND: Range<usize> = 8..12;
    pub const NUM_GAP_ACK_BLOCKS: Range<usize> = 12..14;
    pub const NUM_DUP_TSNS: Range<usize> = 14..16;
    pub const BLOCKS: usize = 16;
}

/// Size of one gap ack block and of one duplicate TSN.
const ENTRY_LEN: usize = 4;

/// A view of a SACK chunk, chunk header included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SackChunk<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SackChunk<T> {
    /// Wraps `buffer` without checks; accessors may panic if it is too short.
    pub const fn new_unchecked(buffer: T) -> Self {
        SackChunk { buffer }
    }

    /// Wraps `buffer` after [`SackChunk::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let c = Self::new_unchecked(buffer);
        c.check_len()?;
        Ok(c)
    }

    /// `BadLength` if the chunk length is below the 16 fixed bytes, `Truncated` if the buffer
    /// is shorter than the chunk length (or holds no length field), then `BadLength` if the
    /// chunk length is not exactly 16 plus 4 bytes per gap ack block and per duplicate TSN
    /// (RFC 9260 §3.3.4: the counts size the chunk).
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        let len = tlv_len(b, SACK_MIN_LEN)?;
        // Two 16-bit counts: the sum times 4 fits a usize on every target.
        let entries = usize::from(read_u16(&b[field::NUM_GAP_ACK_BLOCKS]))
            + usize::from(read_u16(&b[field::NUM_DUP_TSNS]));
        if SACK_MIN_LEN + entries * ENTRY_LEN != len {
            return Err(Error::BadLength);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn chunk_length(&self) -> u16 {
        read_u16(&self.buffer.as_ref()[field::LENGTH])
    }

    /// Cumulative TSN ack: the last TSN received in sequence.
    pub fn cum_tsn_ack(&self) -> u32 {
        read_u32(&self.buffer.as_ref()[field::CUM_TSN_ACK])
    }

    /// Advertised receiver window credit.
    pub fn a_rwnd(&self) -> u32 {
        read_u32(&self.buffer.as_ref()[field::A_RWND])
    }

    pub fn num_gap_ack_blocks(&self) -> u16 {
        read_u16(&self.buffer.as_ref()[field::NUM_GAP_ACK_BLOCKS])
    }

    pub fn num_dup_tsns(&self) -> u16 {
        read_u16(&self.buffer.as_ref()[field::NUM_DUP_TSNS])
    }

    fn dup_start(&self) -> usize {
        field::BLOCKS + usize::from(self.num_gap_ack_blocks()) * ENTRY_LEN
    }

    /// The gap ack blocks, in wire order.
    pub fn gap_ack_blocks(&self) -> List<'_, GapAckBlock> {
        List::from_wire(&self.buffer.as_ref()[field::BLOCKS..self.dup_start()])
    }

    /// The duplicate TSNs, in wire order.
    pub fn dup_tsns(&self) -> List<'_, u32> {
        List::from_wire(&self.buffer.as_ref()[self.dup_start()..usize::from(self.chunk_length())])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> SackChunk<&'a T> {
    /// The gap ack blocks with the lifetime of the underlying buffer.
    pub fn gap_ack_blocks_ref(&self) -> List<'a, GapAckBlock> {
        List::from_wire(&self.buffer.as_ref()[field::BLOCKS..self.dup_start()])
    }

    /// The duplicate TSNs with the lifetime of the underlying buffer.
    pub fn dup_tsns_ref(&self) -> List<'a, u32> {
        List::from_wire(&self.buffer.as_ref()[self.dup_start()..usize::from(self.chunk_length())])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SackChunk<T> {
    pub fn set_chunk_length(&mut self, len: u16) {
        write_u16(&mut self.buffer.as_mut()[field::LENGTH], len);
    }

    pub fn set_cum_tsn_ack(&mut self, tsn: u32) {
        write_u32(&mut self.buffer.as_mut()[field::CUM_TSN_ACK], tsn);
    }

    pub fn set_a_rwnd(&mut self, a_rwnd: u32) {
        write_u32(&mut self.buffer.as_mut()[field::A_RWND], a_rwnd);
    }

    pub fn set_num_gap_ack_blocks(&mut self, n: u16) {
        write_u16(&mut self.buffer.as_mut()[field::NUM_GAP_ACK_BLOCKS], n);
    }

    pub fn set_num_dup_tsns(&mut self, n: u16) {
        write_u16(&mut self.buffer.as_mut()[field::NUM_DUP_TSNS], n);
    }
}

/// One gap ack block: TSNs `cum_tsn_ack + start ..= cum_tsn_ack + end` were received
/// (RFC 9260 §3.3.4). Offsets are kept as on the wire; whether `start <= end` and blocks are
/// in order is for the association to judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GapAckBlock {
    pub start: u16,
    pub end: u16,
}

impl GapAckBlock {
    /// The first and last TSN the block acknowledges, in serial arithmetic (RFC 9260 §1.6).
    pub fn tsns(&self, cum_tsn_ack: u32) -> (u32, u32) {
        (
            cum_tsn_ack.wrapping_add(u32::from(self.start)),
            cum_tsn_ack.wrapping_add(u32::from(self.end)),
        )
    }
}

impl<'a> ListElement<'a> for GapAckBlock {
    const FIXED_LEN: usize = ENTRY_LEN;

    fn parse_front(bytes: &'a [u8]) -> Result<(Self, usize)> {
        match bytes.get(..ENTRY_LEN) {
            Some(b) => Ok((
                GapAckBlock {
                    start: read_u16(b),
                    end: read_u16(&b[2..]),
                },
                ENTRY_LEN,
            )),
            None => Err(Error::Truncated),
        }
    }

    fn buffer_len(&self) -> usize {
        ENTRY_LEN
    }

    fn emit(&self, buf: &mut [u8]) {
        write_u16(buf, self.start);
        write_u16(&mut buf[2..], self.end);
    }
}

/// A SACK chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SackRepr<'a> {
    pub cum_tsn_ack: u32,
    pub a_rwnd: u32,
    pub gap_ack_blocks: List<'a, GapAckBlock>,
    pub dup_tsns: List<'a, u32>,
}

impl<'a> SackRepr<'a> {
    /// Parses a SACK chunk with the length checks of [`SackChunk::check_len`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(chunk: &Chunk<&'a T>) -> Result<Self> {
        expect_type(chunk, ChunkType::Sack)?;
        let sack = SackChunk::new_checked(chunk.bytes_ref())?;
        Ok(SackRepr {
            cum_tsn_ack: sack.cum_tsn_ack(),
            a_rwnd: sack.a_rwnd(),
            gap_ack_blocks: sack.gap_ack_blocks_ref(),
            dup_tsns: sack.dup_tsns_ref(),
        })
    }

    /// The chunk length field: 16 plus 4 per gap ack block and per duplicate TSN.
    pub fn chunk_len(&self) -> usize {
        SACK_MIN_LEN + self.gap_ack_blocks.buffer_len() + self.dup_tsns.buffer_len()
    }

    /// Bytes `emit` writes (a SACK is always a multiple of 4).
    pub fn buffer_len(&self) -> usize {
        padded(self.chunk_len())
    }

    /// Writes the SACK chunk into `buf[..self.buffer_len()]`.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`, or the chunk is longer than 65535 bytes (which
    /// also bounds both counts below 65536).
    pub fn emit(&self, buf: &mut [u8]) {
        let value = emit_header(buf, ChunkType::Sack, 0, self.chunk_len() - CHUNK_HEADER_LEN);
        let blocks = field::BLOCKS - CHUNK_HEADER_LEN;
        let dups = blocks + self.gap_ack_blocks.buffer_len();
        self.gap_ack_blocks.emit(&mut value[blocks..dups]);
        self.dup_tsns.emit(&mut value[dups..]);
        let mut c = SackChunk::new_unchecked(buf);
        c.set_cum_tsn_ack(self.cum_tsn_ack);
        c.set_a_rwnd(self.a_rwnd);
        // Both counts fit: the chunk length, which counts 4 bytes per entry, fit 16 bits.
        c.set_num_gap_ack_blocks(self.gap_ack_blocks.len() as u16);
        c.set_num_dup_tsns(self.dup_tsns.len() as u16);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::super::chunk::tests::{emitted, parse};
    use super::super::chunk::ChunkRepr;
    use super::*;

    /// assoc-loss.pcap frame 40: cum TSN ack 4051400456, blocks [2..3] and [5..5].
    const TWO_GAPS: [u8; 24] = [
        0x03, 0x00, 0x00, 0x18, // SACK, length 24
        0xf1, 0x7b, 0x77, 0x08, // cum TSN ack 4051400456
        0x00, 0x02, 0x00, 0x00, // a_rwnd 131072
        0x00, 0x02, 0x00, 0x00, // 2 gap ack blocks, 0 dup TSNs
        0x00, 0x02, 0x00, 0x03, // [2..3]
        0x00, 0x05, 0x00, 0x05, // [5..5]
    ];

    const GAPS: [GapAckBlock; 2] = [
        GapAckBlock { start: 2, end: 3 },
        GapAckBlock { start: 5, end: 5 },
    ];

    fn two_gaps() -> SackRepr<'static> {
        SackRepr {
            cum_tsn_ack: 4051400456,
            a_rwnd: 131072,
            gap_ack_blocks: List::new(&GAPS),
            dup_tsns: List::empty(),
        }
    }

    #[test]
    fn sack_view_fields() {
        let s = SackChunk::new_checked(&TWO_GAPS[..]).unwrap();
        assert_eq!((s.cum_tsn_ack(), s.a_rwnd()), (4051400456, 131072));
        assert_eq!((s.num_gap_ack_blocks(), s.num_dup_tsns()), (2, 0));
        assert_eq!(s.gap_ack_blocks().iter().collect::<Vec<_>>(), GAPS);
        assert!(s.dup_tsns().is_empty());
    }

    #[test]
    fn sack_parses_gap_blocks_as_offsets() {
        assert_eq!(parse(&TWO_GAPS), Ok(ChunkRepr::Sack(two_gaps())));
        assert_eq!(GAPS[0].tsns(4051400456), (4051400458, 4051400459));
        assert_eq!(GapAckBlock { start: 1, end: 2 }.tsns(u32::MAX), (0, 1));
    }

    #[test]
    fn sack_emit_writes_every_field() {
        assert_eq!(emitted(&ChunkRepr::Sack(two_gaps())), TWO_GAPS);
    }

    #[test]
    fn sack_with_duplicate_tsns() {
        let dups = [7u32, 0xffff_ffff];
        let r = SackRepr {
            dup_tsns: List::new(&dups),
            ..two_gaps()
        };
        let b = emitted(&ChunkRepr::Sack(r));
        assert_eq!(b.len(), 32);
        assert_eq!(b[2..4], [0, 32]);
        assert_eq!(b[12..16], [0, 2, 0, 2]);
        assert_eq!(b[24..], [0, 0, 0, 7, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(parse(&b), Ok(ChunkRepr::Sack(r)));
        let s = SackChunk::new_checked(&b[..]).unwrap();
        assert_eq!(s.dup_tsns().iter().collect::<Vec<_>>(), dups);
    }

    #[test]
    fn sack_counts_that_overflow_the_chunk_are_bad_length() {
        let mut b = TWO_GAPS;
        b[13] = 3; // 3 gap blocks in room for 2
        assert_eq!(parse(&b), Err(Error::BadLength));
        let mut b = TWO_GAPS;
        b[15] = 1; // plus a duplicate TSN
        assert_eq!(parse(&b), Err(Error::BadLength));
        let mut b = TWO_GAPS;
        b[12..16].copy_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(parse(&b), Err(Error::BadLength));
    }

    #[test]
    fn sack_counts_that_leave_bytes_over_are_bad_length() {
        let mut b = TWO_GAPS;
        b[13] = 1;
        assert_eq!(parse(&b), Err(Error::BadLength));
    }

    #[test]
    fn sack_length_not_a_multiple_of_four_is_bad_length() {
        let mut b = TWO_GAPS.to_vec();
        b.push(0);
        b[3] = 25;
        assert_eq!(parse(&b), Err(Error::BadLength));
    }

    #[test]
    fn sack_length_below_sixteen_is_bad_length() {
        let mut b = TWO_GAPS;
        b[3] = 12;
        assert_eq!(parse(&b), Err(Error::BadLength));
    }

    #[test]
    fn sack_view_rejects_truncated_header_and_length_past_end() {
        assert_eq!(
            SackChunk::new_checked(&TWO_GAPS[..15]).err(),
            Some(Error::Truncated)
        );
        assert_eq!(
            SackChunk::new_checked(&TWO_GAPS[..20]).err(),
            Some(Error::Truncated)
        );
        assert_eq!(parse(&TWO_GAPS[..20]), Err(Error::Truncated));
    }

    #[test]
    fn sack_view_setters_write_the_fields() {
        let mut b = [0xa5u8; 16];
        let mut s = SackChunk::new_unchecked(&mut b[..]);
        s.set_chunk_length(16);
        s.set_cum_tsn_ack(1);
        s.set_a_rwnd(2);
        s.set_num_gap_ack_blocks(3);
        s.set_num_dup_tsns(4);
        assert_eq!(b, [0xa5, 0xa5, 0, 16, 0, 0, 0, 1, 0, 0, 0, 2, 0, 3, 0, 4]);
    }
}
