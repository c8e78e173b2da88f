//! The SCTP checksum of a small packet in one C call (`ddpdk_sctp_crc32c`, dpdk-sys's shim:
//! the SSE 4.2 `crc32` instruction eight bytes at a time, in place, the checksum field taken
//! as zero), for [`crate::wire::crc32c`].
//!
//! A SACK (28 bytes) or a 64-byte segment's packet (about 110) costs crc-fast's folding path
//! more in its set-up than in its arithmetic: callgrind counted 181 instructions to verify a
//! 64-byte segment's packet (the copy with the field zeroed included). DPDK's own
//! `rte_hash_crc` was tried first and counted more (234: it checks its algorithm choice
//! every eight bytes, and the zeroed field took three calls). Longer packets stay with
//! crc-fast, whose carry-less multiply folding is several times faster there (one `crc32`
//! chain waits three cycles an instruction). Rust's own `crc32` intrinsics would need an
//! `unsafe` block outside the port layer (SSE 4.2 target features).

/// The SCTP checksum of `packet` (RFC 9260 §6.8: CRC32c with the checksum field taken as
/// zero), for a packet of at least the 12-byte common header; `None` for a shorter one.
#[inline]
pub fn sctp_checksum(packet: &[u8]) -> Option<u32> {
    if packet.len() < crate::wire::crc32c::COMMON_HEADER_LEN {
        return None;
    }
    let len = u32::try_from(packet.len()).ok()?;
    // SAFETY: the shim reads only within `packet[..len]` (bytes 0..8 and 12..len, through
    // memcpy or byte loads, so at any alignment) and writes nothing; the slice is borrowed for
    // the call. Its `crc32` instructions need SSE 4.2, DPDK's x86-64 baseline (the EAL
    // refuses a CPU without it; this is only called on x86-64). It touches no DPDK state.
    Some(unsafe { dpdk_sys::ddpdk_sctp_crc32c(packet.as_ptr(), len) })
}
