//! The SCTP checksum: CRC32c (Castagnoli) over the whole packet, RFC 9260 §6.8 and Appendix A.
//!
//! The arithmetic comes from the `crc-fast` crate (carry-less multiply folding: PCLMULQDQ /
//! VPCLMULQDQ on x86-64, PMULL on ARMv8, a table fallback elsewhere), chosen over the `crc32c`
//! crate on `benches/benches/crc32c.rs`: on this project's machines it was 2.3 to 4.5 times
//! faster at 1500 and 9000 bytes and on par at 64. This module only knows where the checksum
//! lives in an SCTP packet and in which byte order it is carried.
//!
//! Byte order: RFC 9260 Appendix A computes the CRC with the reflected polynomial and stores
//! the result so that the least significant byte of the CRC value comes first on the wire. With
//! the CRC value as RFC 3720 §B.4 defines it (CRC-32/ISCSI), the four bytes at offset 8
//! of the common header are therefore `crc.to_le_bytes()`. Every frame of the golden captures in
//! `../shared/vectors/` (written by usrsctp) verifies with this convention; see the tests below
//! and `dataplane/tests/vectors_ddp.rs`.

/// Offset of the checksum field in the SCTP common header (RFC 9260 §3.1).
const CHECKSUM: core::ops::Range<usize> = 8..12;

/// Length of the SCTP common header: source port, destination port, verification tag,
/// checksum (RFC 9260 §3.1). Anything shorter is not an SCTP packet.
pub const COMMON_HEADER_LEN: usize = 12;

/// Packets up to this size are checksummed from a copy in one shot ([`sctp_checksum`]).
const SMALL: usize = 256;
/// Packets up to this size (a SACK without gap blocks is 28) are copied into a smaller buffer.
const TINY: usize = 64;

/// CRC32c of `bytes` (initial value all ones, reflected, final XOR all ones: RFC 3720 §B.4).
#[inline]
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(bytes)
}

/// A CRC32c computed piece by piece: a frame whose bytes are not in one buffer (a header
/// followed by region memory sent by reference).
#[derive(Default)]
pub struct Stream(u32);

impl core::fmt::Debug for Stream {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Stream({:#010x})", self.finish())
    }
}

impl Stream {
    pub fn update(&mut self, bytes: &[u8]) {
        self.0 = continued(self.0, bytes);
    }

    /// The CRC32c of everything fed so far.
    pub fn finish(&self) -> u32 {
        self.0
    }
}

/// The CRC32c of what came before (`crc`, 0 for nothing) followed by `bytes`: by the `crc32`
/// lanes in place where the build and the CPU have them (`port::dpdk::crc`), else crc-fast.
#[inline]
fn continued(crc: u32, bytes: &[u8]) -> u32 {
    #[cfg(all(feature = "dpdk", target_arch = "x86_64"))]
    if let Some(c) = crate::port::dpdk::crc::crc32c_update(crc, bytes) {
        return c;
    }
    continued_by_crc_fast(crc, bytes)
}

/// [`continued`] by crc-fast alone: what runs where the lanes do not (another CPU or build),
/// apart so that it is tested on every machine.
fn continued_by_crc_fast(crc: u32, bytes: &[u8]) -> u32 {
    // crc-fast's state is the CRC register before the final inversion (RFC 3720 §B.4), in the
    // low half of its u64.
    let mut digest =
        crc_fast::Digest::new_with_init_state(crc_fast::CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    digest.update(bytes);
    !(digest.get_state() as u32)
}

/// The checksum of an SCTP packet, computed as if its checksum field held zero
/// (RFC 9260 §6.8: "the checksum field is set to zero" for the computation).
///
/// The packet is not copied or modified: the CRC runs over the 12-byte common header rebuilt on
/// the stack with a zero checksum field, then continues over bytes 12.. (two updates of one
/// streaming digest, which holds no heap state). Each update has a fixed cost, so the header is
/// one piece rather than two around the zeros. A packet shorter than the common header has no checksum field; its
/// bytes are taken as they are (callers use [`verify`] or [`fill`], which refuse it).
pub fn sctp_checksum(packet: &[u8]) -> u32 {
    if let Some(crc) = in_place(packet) {
        return crc;
    }
    // A small packet (a SACK, a control chunk, a short segment) is copied with the field zeroed
    // and checksummed in one shot: the fixed cost of each streaming update is much of the work
    // at these sizes (callgrind, a 100-byte packet: 266 instructions in two updates, 191 in one;
    // the crc32c crate's SSE 4.2 path took 254).
    // A SACK or a bare control chunk fits 64 bytes, whose zeroing is a few stores inline
    // rather than a call clearing 256 (1 % of a sending core, one SACK every second packet).
    if (COMMON_HEADER_LEN..=TINY).contains(&packet.len()) {
        return checksum_of_copy::<TINY>(packet);
    }
    if (COMMON_HEADER_LEN..=SMALL).contains(&packet.len()) {
        return checksum_of_copy::<SMALL>(packet);
    }
    match (packet.get(..CHECKSUM.start), packet.get(CHECKSUM.end..)) {
        (Some(head), Some(tail)) => {
            let mut header = [0u8; COMMON_HEADER_LEN];
            header[..CHECKSUM.start].copy_from_slice(head);
            let mut digest = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
            digest.update(&header);
            digest.update(tail);
            // CRC-32 algorithms return the 32-bit value in the low half of the u64.
            digest.finalize() as u32
        }
        _ => crc32c(packet),
    }
}

/// The checksum of a packet by the in-place `crc32` loops (`port::dpdk::crc` says why), where
/// the build and the CPU have them; `None` where they do not, or for a packet they leave to
/// crc-fast.
#[inline]
fn in_place(packet: &[u8]) -> Option<u32> {
    #[cfg(all(feature = "dpdk", target_arch = "x86_64"))]
    return crate::port::dpdk::crc::sctp_checksum(packet);
    #[cfg(not(all(feature = "dpdk", target_arch = "x86_64")))]
    {
        let _ = packet;
        None
    }
}

/// The checksum of `packet` (at most `N` bytes, at least the common header) from a copy with
/// the field zeroed, in one shot.
#[inline]
fn checksum_of_copy<const N: usize>(packet: &[u8]) -> u32 {
    let mut copy = [0u8; N];
    let copy = &mut copy[..packet.len()];
    copy.copy_from_slice(packet);
    copy[CHECKSUM].fill(0);
    crc32c(copy)
}

/// Whether the checksum field of `packet` matches its contents (RFC 9260 §6.8: a receiver that
/// finds a mismatch silently discards the packet). Packets shorter than the 12-byte common header
/// are never valid.
// Not inlined: a call costs a few instructions a packet, and keeps the checksum a stage of its
// own in the instruction counts (benches/callgrind-stages.sh).
#[inline(never)]
pub fn verify(packet: &[u8]) -> bool {
    match packet.get(CHECKSUM) {
        Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]) == sctp_checksum(packet),
        _ => false,
    }
}

/// Computes the checksum of `packet` and writes it into the checksum field, as the last step of
/// building a packet (RFC 9260 §6.8). The field is zeroed in place first, so the CRC is one pass
/// over the packet. A packet shorter than the common header is left untouched.
pub fn fill(packet: &mut [u8]) {
    if packet.len() < COMMON_HEADER_LEN {
        return;
    }
    if let Some(field) = packet.get_mut(CHECKSUM) {
        field.fill(0);
    }
    // The field is zero now, so the packet is checksummed as it is: in place by the `crc32`
    // loop where there is one and the packet is small, else by crc-fast in one shot.
    let crc = in_place(packet).unwrap_or_else(|| crc32c(packet));
    if let Some(field) = packet.get_mut(CHECKSUM) {
        field.copy_from_slice(&crc.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // RFC 3720 §B.4 (quoted by RFC 9260 Appendix A as the CRC32c reference): the check values of
    // the four 32-byte test patterns.
    #[test]
    fn rfc3720_b4_32_zero_bytes() {
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
    }

    #[test]
    fn rfc3720_b4_32_ones_bytes() {
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62A8_AB43);
    }

    #[test]
    fn rfc3720_b4_32_incrementing_bytes() {
        let b: [u8; 32] = core::array::from_fn(|i| i as u8);
        assert_eq!(crc32c(&b), 0x46DD_794E);
    }

    #[test]
    fn rfc3720_b4_32_decrementing_bytes() {
        let b: [u8; 32] = core::array::from_fn(|i| 31 - i as u8);
        assert_eq!(crc32c(&b), 0x113F_DB5C);
    }

    #[test]
    fn check_value_of_123456789_is_the_catalogue_one() {
        // The CRC catalogue's check value of CRC-32/ISCSI.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    /// `assoc-ddp-default.pcap` frame 4 (server to client), byte for byte as usrsctp sent it:
    /// ports 5002 → 5001, verification tag 0xf5986614, checksum, one 4-byte COOKIE-ACK chunk.
    fn cookie_ack() -> [u8; 16] {
        [
            0x13, 0x8a, 0x13, 0x89, 0xf5, 0x98, 0x66, 0x14, 0x72, 0xb5, 0x8e, 0x9a, 0x0b, 0x00,
            0x00, 0x04,
        ]
    }

    #[test]
    fn usrsctp_packet_carries_crc_least_significant_byte_first() {
        assert_eq!(sctp_checksum(&cookie_ack()), 0x9a8e_b572);
        assert!(verify(&cookie_ack()));
    }

    #[test]
    fn checksum_is_the_crc_of_the_packet_with_a_zero_field() {
        let p = cookie_ack();
        let mut zeroed = p;
        zeroed[8..12].fill(0);
        assert_eq!(sctp_checksum(&p), crc32c(&zeroed));
    }

    /// Where built with DPDK on x86-64, packets take the `crc32` loops in place (three lanes,
    /// or the shim's one up to 384 bytes), elsewhere a copy below [`SMALL`] and crc-fast: all
    /// give the checksum crc-fast computes over a copy with the field zeroed, at every length
    /// around the boundaries and every alignment of the tail.
    #[test]
    fn the_small_packet_path_agrees_with_crc_fast() {
        // The shim's bound without PCLMULQDQ (`port::dpdk::crc::SERIAL_MAX`; that module is
        // not in every build).
        const SHIM_MAX: usize = 384;
        let most = SMALL.max(SHIM_MAX) + 32;
        let bytes: Vec<u8> = (0..most + 8).map(|i| (i * 131 + 7) as u8).collect();
        for start in 0..8 {
            for len in COMMON_HEADER_LEN..most {
                let p = &bytes[start..start + len];
                let mut zeroed = p.to_vec();
                zeroed[CHECKSUM].fill(0);
                assert_eq!(sctp_checksum(p), crc32c(&zeroed), "{len} bytes at {start}");
                let mut filled = p.to_vec();
                fill(&mut filled);
                assert_eq!(
                    filled[CHECKSUM],
                    crc32c(&zeroed).to_le_bytes(),
                    "{len} bytes"
                );
            }
        }
    }

    #[test]
    fn fill_then_verify() {
        let mut p = cookie_ack();
        p[8..12].copy_from_slice(&[0xa5; 4]);
        assert!(!verify(&p));
        fill(&mut p);
        assert_eq!(p, cookie_ack());
        assert!(verify(&p));
    }

    #[test]
    fn every_single_bit_flip_fails_verification() {
        let p = cookie_ack();
        for byte in 0..p.len() {
            for bit in 0..8 {
                let mut q = p;
                q[byte] ^= 1 << bit;
                assert!(!verify(&q), "flip of byte {byte} bit {bit} went unnoticed");
            }
        }
    }

    #[test]
    fn packet_shorter_than_common_header_never_verifies() {
        for len in 0..COMMON_HEADER_LEN {
            assert!(!verify(&[0u8; COMMON_HEADER_LEN][..len]));
        }
    }

    #[test]
    fn fill_leaves_packet_shorter_than_common_header_untouched() {
        for len in 0..COMMON_HEADER_LEN {
            let mut b = [0xa5u8; COMMON_HEADER_LEN];
            fill(&mut b[..len]);
            assert_eq!(b, [0xa5u8; COMMON_HEADER_LEN]);
        }
    }

    #[test]
    fn common_header_alone_is_checksummed() {
        let mut p = [1u8, 2, 3, 4, 5, 6, 7, 8, 0xa5, 0xa5, 0xa5, 0xa5];
        fill(&mut p);
        assert!(verify(&p));
        assert_eq!(
            sctp_checksum(&p),
            crc32c(&[1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0])
        );
    }

    proptest! {
        /// A CRC fed piece by piece (a header, then region spans sent by reference) is the CRC
        /// of the whole, wherever the pieces are cut.
        #[test]
        fn a_stream_in_pieces_is_the_crc_of_the_whole(
            bytes in proptest::collection::vec(any::<u8>(), 0..10_000),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
        ) {
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
            at.sort_unstable();
            let mut crc = Stream::default();
            let mut done = 0;
            for a in at.into_iter().chain([bytes.len()]) {
                crc.update(&bytes[done..a]);
                done = a;
            }
            prop_assert_eq!(crc.finish(), crc32c(&bytes));
        }

        /// The same by crc-fast alone, the path of a CPU or build without the lanes (which
        /// this machine may never take otherwise): its state is handed on, inverted, right.
        #[test]
        fn crc_fast_alone_continues_a_crc_across_a_cut(
            bytes in proptest::collection::vec(any::<u8>(), 0..4_000),
            cut in any::<prop::sample::Index>(),
        ) {
            let (a, b) = bytes.split_at(cut.index(bytes.len() + 1));
            let crc = continued_by_crc_fast(continued_by_crc_fast(0, a), b);
            prop_assert_eq!(crc, crc32c(&bytes));
        }

        #[test]
        fn filled_packets_verify_and_checksum_ignores_the_field(
            mut p in proptest::collection::vec(any::<u8>(), COMMON_HEADER_LEN..10_000),
            junk in any::<[u8; 4]>(),
        ) {
            p[8..12].copy_from_slice(&junk);
            let crc = sctp_checksum(&p);
            let mut zeroed = p.clone();
            zeroed[8..12].fill(0);
            prop_assert_eq!(crc, crc32c(&zeroed));
            fill(&mut p);
            prop_assert!(verify(&p));
            prop_assert_eq!(&p[8..12], &crc.to_le_bytes()[..]);
        }
    }
}
