//! The SCTP checksum in place (the checksum field taken as zero, nothing copied), for
//! [`crate::wire::crc32c`], with the SSE 4.2 `crc32` instruction.
//!
//! One `crc32` chain waits three cycles every eight bytes, while the instruction issues every
//! cycle (measured here: 0.82 ns a word on one chain, 0.27 on three). crc-fast folds 384-byte
//! blocks from a 64-byte boundary with carry-less multiplies (VPCLMULQDQ), faster still, but
//! runs what is left on one chain: the bytes before the boundary and a tail of up to 383
//! bytes, half of its time on a 1500-byte packet. So a packet above `ONE_CHAIN_MAX` bytes
//! goes to crc-fast for its whole aligned blocks and to three chains side by side for its
//! head and tail, joined by a carry-less multiply each (PCLMULQDQ). A shorter one (a SACK, a
//! 64-byte segment's packet) takes dpdk-sys's C shim (`ddpdk_sctp_crc32c`, one chain): the
//! joins cost more than they save there. Without PCLMULQDQ (DPDK's x86-64 baseline,
//! `-march=corei7`, does not promise it) packets up to `SERIAL_MAX` bytes take the shim and
//! longer ones crc-fast alone. The 64-byte boundary and the 384-byte blocks are crc-fast's
//! AVX-512 path (VPCLMULQDQ: the AMD EPYC and Intel Xeon VMs measured); on a CPU with
//! PCLMULQDQ but not AVX-512 it takes its SSE path (smaller blocks, its own serial tail), where
//! the split here is still exact (the tests check every split) but not tuned.
//!
//! A SACK (28 bytes) or a 64-byte segment's packet (about 110) costs crc-fast's folding path
//! more in its set-up than in its arithmetic: callgrind counted 181 instructions to verify a
//! 64-byte segment's packet (the copy with the field zeroed included). DPDK's own
//! `rte_hash_crc` was tried first and counted more (234: it checks its algorithm choice
//! every eight bytes, and the zeroed field took three calls).

use core::arch::x86_64::{
    __m128i, _mm_clmulepi64_si128, _mm_crc32_u16, _mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8,
    _mm_cvtsi128_si64, _mm_cvtsi64_si128,
};

/// The longest packet the one-chain shim takes where there is no PCLMULQDQ.
const SERIAL_MAX: usize = 384;

/// The longest packet the one-chain shim takes anyway: a SACK, a 64-byte segment's packet.
/// The lanes' joins cost more than they save there (`ddp-rx-bench` `conn`, 64 bytes:
/// 12.9-13.2 M segments/s with the shim, 12.4-13.0 in lanes or in a Rust chain).
const ONE_CHAIN_MAX: usize = 256;

/// The lane, in 8-byte words, of a full block: three lanes read side by side, so a block
/// (384 bytes) spans six lines at a time and the hardware prefetcher still sees one stream.
/// Lanes far apart (a third of the packet each) stalled on the third lane's misses when
/// the packet was not in cache (`ddp-rx-bench`, 8938 bytes).
const LANE: usize = 16;

/// Lanes shorter than this many words are not worth joining (multiplies and `crc32` on the
/// critical path): a shorter tail runs on one chain.
const MIN_LANE: usize = 5;

/// CRC32c's polynomial, bit-reflected (RFC 3720 §B.4).
const POLY: u32 = 0x82F6_3B78;

/// `x^(64·m − 33) mod P`, bit-reflected, for `m` in `1..=3·LANE` (index `m`): the constant
/// that moves a `crc32` state past `8·m` bytes of zeros (see [`shift`]).
static SHIFTS: [u32; 3 * LANE + 1] = shift_table(64);

/// `x^(bits·i − 33) mod P`, bit-reflected, at index `i` from 1 (index 0 unused): the constants
/// that move a `crc32` state past `i` times `bits` bits of zeros ([`shift`]).
const fn shift_table<const N: usize>(bits: usize) -> [u32; N] {
    // In the reflected form bit 31 is the coefficient of x^0: multiplying by x shifts right,
    // and an x^32 shifted out is reduced by P.
    const fn times_x(v: u32) -> u32 {
        (v >> 1) ^ if v & 1 != 0 { POLY } else { 0 }
    }
    let mut table = [0u32; N];
    let mut v = 1u32 << 31; // x^0
    let mut left = bits - 33;
    let mut i = 1;
    while i < N {
        while left > 0 {
            v = times_x(v);
            left -= 1;
        }
        // v = x^(bits·i − 33)
        table[i] = v;
        left = bits;
        i += 1;
    }
    table
}

/// The `crc32` state `crc` moved past `8·m` bytes of zeros, for `k = SHIFTS[m]`: the product
/// of two reflected 32-bit polynomials is the reflected 64-bit one times x^-1, and `crc32`
/// of a 64-bit word with a zero state multiplies it by x^32; hence the 33.
#[inline]
#[target_feature(enable = "sse4.2,pclmulqdq")]
fn shift(crc: u64, k: u32) -> u64 {
    let a: __m128i = _mm_cvtsi64_si128(crc as i64);
    let b: __m128i = _mm_cvtsi64_si128(i64::from(k));
    _mm_crc32_u64(0, _mm_cvtsi128_si64(_mm_clmulepi64_si128::<0>(a, b)) as u64)
}

#[inline]
fn word(bytes: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(bytes);
    u64::from_le_bytes(w)
}

/// The `crc32` state after `bytes`, from state `crc` (no pre- or post-inversion): blocks of
/// three lanes of `n` words, each lane on its own chain from a zero state, joined to the
/// running state (its own chain, off the lanes' path) by linearity:
/// `crc(S ‖ A ‖ B ‖ D) = S·x^(3·64n) ⊕ crc₀(A)·x^(2·64n) ⊕ crc₀(B)·x^(64n) ⊕ crc₀(D)`.
#[target_feature(enable = "sse4.2,pclmulqdq")]
fn update_lanes(crc: u32, mut bytes: &[u8]) -> u32 {
    let mut c = u64::from(crc);
    while bytes.len() >= 24 * MIN_LANE {
        let n = (bytes.len() / 24).min(LANE);
        let (a, rest) = bytes.split_at(8 * n);
        let (b, rest) = rest.split_at(8 * n);
        let (d, rest) = rest.split_at(8 * n);
        let (mut x, mut y, mut z) = (0u64, 0u64, 0u64);
        for ((wa, wb), wd) in a
            .chunks_exact(8)
            .zip(b.chunks_exact(8))
            .zip(d.chunks_exact(8))
        {
            x = _mm_crc32_u64(x, word(wa));
            y = _mm_crc32_u64(y, word(wb));
            z = _mm_crc32_u64(z, word(wd));
        }
        c = shift(c, SHIFTS[3 * n]) ^ shift(x, SHIFTS[2 * n]) ^ shift(y, SHIFTS[n]) ^ z;
        bytes = rest;
    }
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        c = _mm_crc32_u64(c, word(w));
    }
    let mut c = c as u32;
    let mut tail = words.remainder();
    if tail.len() >= 4 {
        c = _mm_crc32_u32(c, u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
        tail = &tail[4..];
    }
    if tail.len() >= 2 {
        c = _mm_crc32_u16(c, u16::from_le_bytes([tail[0], tail[1]]));
        tail = &tail[2..];
    }
    if let Some(&b) = tail.first() {
        c = _mm_crc32_u8(c, b);
    }
    c
}

/// crc-fast's folding block: it folds whole blocks from a 64-byte aligned address and leaves
/// the rest to one `crc32` chain.
const FOLD_BLOCK: usize = 384;

/// Buffers at least this long give crc-fast its whole blocks, the lanes the rest.
const FOLD_MIN: usize = 2 * FOLD_BLOCK;

/// Whole blocks a buffer may have for crc-fast's one-shot CRC to be joined to the running
/// state by one multiply ([`BULK_SHIFTS`]): a jumbo frame's (9216 bytes). Longer buffers go
/// through a `crc_fast::Digest`.
const BULK_MAX: usize = 24;

/// `x^(64·48·k − 33) mod P`, bit-reflected, for `k` in `1..=BULK_MAX` (index `k`): the
/// constant that moves a `crc32` state past `k` blocks of zeros ([`shift`]).
static BULK_SHIFTS: [u32; BULK_MAX + 1] = shift_table(8 * FOLD_BLOCK);

/// The `crc32` state after `bytes` from state `crc`: crc-fast's carry-less multiply folding
/// (VPCLMULQDQ, several times the lanes' rate in cache at 9000 bytes) over the whole aligned
/// blocks of a long buffer, the lanes over what it would run on one chain: the bytes before
/// the first 64-byte boundary and the tail after the last block (up to 383 bytes, half of
/// crc-fast's time on a 1500-byte packet).
#[target_feature(enable = "sse4.2,pclmulqdq")]
fn update(crc: u32, bytes: &[u8]) -> u32 {
    if bytes.len() < FOLD_MIN {
        return update_lanes(crc, bytes);
    }
    let head = bytes.as_ptr().align_offset(64).min(bytes.len());
    let (head, rest) = bytes.split_at(head);
    let (bulk, tail) = rest.split_at(rest.len() / FOLD_BLOCK * FOLD_BLOCK);
    let c = update_lanes(crc, head);
    let blocks = bulk.len() / FOLD_BLOCK;
    let c = match BULK_SHIFTS.get(blocks) {
        // crc-fast's one-shot CRC (its static parameters; a `Digest` copies them in, ~240
        // bytes a packet) from its standard state !0, moved onto `c` by linearity:
        // `crc(c ‖ B) = crc(!0 ‖ B) ⊕ (c ⊕ !0)·x^(8·|B|)`. (No block at all cannot happen
        // above FOLD_MIN; the table has no constant for it.)
        Some(&k) if blocks > 0 => {
            (crc_fast::crc32_iscsi(bulk) ^ u32::MAX) ^ shift(u64::from(c ^ u32::MAX), k) as u32
        }
        _ => {
            let mut fold = crc_fast::Digest::new_with_init_state(
                crc_fast::CrcAlgorithm::Crc32Iscsi,
                u64::from(c),
            );
            fold.update(bulk);
            // A CRC-32 state is the low half of crc-fast's u64.
            fold.get_state() as u32
        }
    };
    update_lanes(c, tail)
}

/// The SCTP checksum of `packet` (at least the common header).
#[target_feature(enable = "sse4.2,pclmulqdq")]
fn sctp_checksum_lanes(packet: &[u8]) -> u32 {
    // Ports and verification tag, then the checksum field as four zero bytes.
    let c = _mm_crc32_u64(u64::from(u32::MAX), word(&packet[..8])) as u32;
    let c = _mm_crc32_u32(c, 0);
    !update(c, &packet[12..])
}

/// Whether this CPU has what the three lanes need (checked once by std, then a load).
#[inline]
fn has_lanes() -> bool {
    std::is_x86_feature_detected!("sse4.2") && std::is_x86_feature_detected!("pclmulqdq")
}

/// CRC32c of `bytes` continued from the value `crc` of what came before (0 for nothing:
/// the RFC 3720 §B.4 conditioning is applied here), or `None` without PCLMULQDQ.
#[inline]
pub fn crc32c_update(crc: u32, bytes: &[u8]) -> Option<u32> {
    if !has_lanes() {
        return None;
    }
    // SAFETY: SSE 4.2 and PCLMULQDQ are present (checked above), all the target features
    // `update` enables; it reads only `bytes`, through safe slices.
    Some(!unsafe { update(!crc, bytes) })
}

/// The SCTP checksum of `packet` (RFC 9260 §6.8: CRC32c with the checksum field taken as
/// zero), for a packet of at least the 12-byte common header; `None` for a shorter one, and
/// for one longer than `SERIAL_MAX` on a CPU without PCLMULQDQ (crc-fast's then).
#[inline]
pub fn sctp_checksum(packet: &[u8]) -> Option<u32> {
    if packet.len() < crate::wire::crc32c::COMMON_HEADER_LEN {
        return None;
    }
    if packet.len() > ONE_CHAIN_MAX && has_lanes() {
        // SAFETY: SSE 4.2 and PCLMULQDQ are present (checked above), all the target features
        // `sctp_checksum_lanes` enables; it reads only `packet` (at least 12 bytes, checked
        // above), through safe slices.
        return Some(unsafe { sctp_checksum_lanes(packet) });
    }
    if packet.len() > SERIAL_MAX {
        return None;
    }
    one_chain(packet)
}

/// The SCTP checksum of `packet` (12 bytes or more) by the C shim's one `crc32` chain, or
/// `None` on a CPU without SSE 4.2 (crc-fast's then).
#[inline]
fn one_chain(packet: &[u8]) -> Option<u32> {
    // The EAL refuses such a CPU, but this runs without the EAL too (unit tests, `MemPort`,
    // the tools): there it would be an illegal instruction. Checked once by std, then a load.
    if !std::is_x86_feature_detected!("sse4.2") {
        return None;
    }
    let len = u32::try_from(packet.len()).ok()?;
    // SAFETY: the shim reads only within `packet[..len]` (bytes 0..8 and 12..len, through
    // memcpy or byte loads, so at any alignment; it returns 0 for fewer than 12) and writes
    // nothing; the slice is borrowed for the call. Its `crc32` instructions need SSE 4.2,
    // present (checked above). It touches no DPDK state.
    Some(unsafe { dpdk_sys::ddpdk_sctp_crc32c(packet.as_ptr(), len) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic, non-trivial bytes.
    fn bytes(len: usize) -> Vec<u8> {
        let mut x: u32 = 0x1234_5678;
        (0..len)
            .map(|_| {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (x >> 24) as u8
            })
            .collect()
    }

    /// Each constant moves a state past its bytes of zeros exactly as `crc32` over those zeros
    /// does: what joining the lanes rests on.
    #[test]
    fn each_shift_constant_is_that_many_zero_bytes() {
        if !has_lanes() {
            eprintln!("skipped: this CPU has no SSE 4.2 and PCLMULQDQ (no lanes to check)");
            return;
        }
        for (m, &k) in SHIFTS.iter().enumerate().skip(1) {
            for state in [1u64, 0xdead_beef, 0xffff_ffff, 0x8000_0000] {
                let mut by_zeros = state;
                for _ in 0..m {
                    // SAFETY: has_lanes() checked SSE 4.2, which `crc32_word` enables.
                    by_zeros = unsafe { crc32_word(by_zeros, 0) };
                }
                // SAFETY: has_lanes() checked the target features `shift` enables.
                let by_shift = unsafe { shift(state, k) };
                assert_eq!(by_shift, by_zeros, "{m} words from {state:#x}");
            }
        }
    }

    /// Each block constant moves a state past that many 384-byte blocks of zeros, as the
    /// one-block word constant applied block by block does.
    #[test]
    fn each_bulk_shift_constant_is_that_many_zero_blocks() {
        if !has_lanes() {
            eprintln!("skipped: this CPU has no SSE 4.2 and PCLMULQDQ (no lanes to check)");
            return;
        }
        assert_eq!(BULK_SHIFTS[1], SHIFTS[FOLD_BLOCK / 8]);
        for (k, &c) in BULK_SHIFTS.iter().enumerate().skip(1) {
            for state in [1u64, 0xdead_beef, 0xffff_ffff, 0x8000_0000] {
                let mut by_blocks = state;
                for _ in 0..k {
                    // SAFETY: has_lanes() checked the target features `shift` enables.
                    by_blocks = unsafe { shift(by_blocks, SHIFTS[FOLD_BLOCK / 8]) };
                }
                // SAFETY: as above.
                let at_once = unsafe { shift(state, c) };
                assert_eq!(at_once, by_blocks, "{k} blocks from {state:#x}");
            }
        }
    }

    #[target_feature(enable = "sse4.2")]
    fn crc32_word(state: u64, w: u64) -> u64 {
        _mm_crc32_u64(state, w)
    }

    /// The lanes, the fold and the tails give crc-fast's CRC32c at every length from nothing to
    /// past a jumbo frame (blocks, partial blocks, every tail), at every alignment of the
    /// start, and continued from any earlier CRC.
    #[test]
    fn lanes_and_fold_agree_with_crc_fast_at_every_length_and_alignment() {
        if !has_lanes() {
            eprintln!("skipped: this CPU has no SSE 4.2 and PCLMULQDQ (no lanes to check)");
            return;
        }
        let data = bytes(10_000 + 64);
        for len in (0..1200).chain((1200..10_000).step_by(37)) {
            for start in [0, 1, 7, 8, 13, 63] {
                let b = &data[start..start + len];
                let whole = crc_fast::crc32_iscsi(b);
                assert_eq!(crc32c_update(0, b), Some(whole), "{len} bytes at {start}");
                let (x, y) = b.split_at(len / 3);
                let first = crc32c_update(0, x).unwrap_or_default();
                assert_eq!(crc32c_update(first, y), Some(whole), "{len} in two");
            }
        }
    }

    /// The SCTP checksum (field taken as zero) at every packet length around the shim's bound
    /// and the fold's, against crc-fast over a copy with the field zeroed.
    #[test]
    fn sctp_checksum_agrees_with_crc_fast_over_a_zeroed_copy() {
        let data = bytes(9_100);
        for len in (12..2000).chain((2000..9_100).step_by(41)) {
            let p = &data[..len];
            let mut zeroed = p.to_vec();
            zeroed[8..12].fill(0);
            if let Some(crc) = sctp_checksum(p) {
                assert_eq!(crc, crc_fast::crc32_iscsi(&zeroed), "{len} bytes");
            } else {
                assert!(len > SERIAL_MAX && !has_lanes(), "{len} bytes refused");
            }
        }
    }

    /// A 64-byte-aligned copy of `data` starting `offset` bytes past a line boundary: the
    /// head before crc-fast's aligned blocks is then `(64 - offset) % 64` bytes, every length
    /// of it checked, not whatever the allocator happened to give.
    fn at_line_offset(data: &[u8], offset: usize) -> (Vec<u8>, usize) {
        let mut buf = vec![0u8; data.len() + 128];
        let start = buf.as_ptr().align_offset(64) + offset;
        buf[start..start + data.len()].copy_from_slice(data);
        (buf, start)
    }

    /// Every head length (0 to 63 bytes before the first line boundary) with the lengths
    /// around the fold's bound and a block's multiples.
    #[test]
    fn lanes_agree_with_crc_fast_at_every_head_length() {
        if !has_lanes() {
            eprintln!("skipped: this CPU has no SSE 4.2 and PCLMULQDQ (no lanes to check)");
            return;
        }
        let data = bytes(2_400);
        for offset in 0..64 {
            for len in [
                257, 383, 384, 385, 700, 767, 768, 769, 800, 1151, 1152, 1153, 1438, 1480, 2304,
                2400,
            ] {
                let (buf, start) = at_line_offset(&data[..len], offset);
                let b = &buf[start..start + len];
                assert_eq!(
                    crc32c_update(0, b),
                    Some(crc_fast::crc32_iscsi(b)),
                    "{len} bytes, {offset} past a line"
                );
            }
        }
    }

    /// The C shim's one chain, which a CPU with PCLMULQDQ never gives a packet above 256
    /// bytes, at every length it may take (up to [`SERIAL_MAX`]) and several alignments.
    #[test]
    fn the_one_chain_shim_agrees_with_crc_fast_up_to_its_bound() {
        let Some(_) = one_chain(&[0u8; 12]) else {
            eprintln!("skipped: this CPU has no SSE 4.2 (the shim is never called)");
            return;
        };
        let data = bytes(SERIAL_MAX + 64);
        for offset in [0, 1, 3, 8, 61] {
            for len in 12..=SERIAL_MAX {
                let (buf, start) = at_line_offset(&data[..len], offset);
                let p = &buf[start..start + len];
                let mut zeroed = p.to_vec();
                zeroed[8..12].fill(0);
                assert_eq!(
                    one_chain(p),
                    Some(crc_fast::crc32_iscsi(&zeroed)),
                    "{len} bytes, {offset} past a line"
                );
            }
        }
    }
}
