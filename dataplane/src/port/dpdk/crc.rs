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
    // SAFETY: the shim reads exactly `len` bytes from `packet` (8, 4, 2 and 1 at a time
    // through memcpy, so at any alignment) and writes nothing; all `len` bytes are borrowed
    // for the call. It touches no DPDK state and needs no EAL.
    Some(unsafe { dpdk_sys::ddpdk_sctp_crc32c(packet.as_ptr(), len) })
}
