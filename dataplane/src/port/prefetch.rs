//! Software prefetch on the receive path: the lines of the next frame of a burst, and the
//! lines a sequential placement will write next.
//!
//! A data core verifies a packet's CRC32c before anything else reads it (RFC 9260 §6.8), so
//! the first pass over a frame that is not in cache waits for memory, and placement's stores
//! into region memory wait for their lines' ownership (the read-for-ownership of every line).
//! Stores leave the store buffer in program order, so the protocol work after a placement
//! stalls behind those misses. Asking for the next frame's lines and for the next placement's
//! lines one packet early lets both misses run under the current packet's work
//! (benches/README.md, "Session 26": 0.55 -> 0.92 of memcpy at 1438-byte segments).
//!
//! A prefetch is a hint: it never faults, reads nothing architecturally and changes no byte,
//! so a wrong guess costs memory bandwidth and nothing else.

/// A cache line on the machines DPDK supports on x86-64 and ARMv8 server parts.
const LINE: usize = 64;

/// Lines of a frame asked for at most: a 9216-byte jumbo frame whole. Measured
/// (`ddp-rx-bench`), asking for a jumbo frame whole beat asking for its first 2 KiB and
/// leaving the rest to the hardware's streamer (0.90 against 0.82 of memcpy at 8938-byte
/// segments). The bound keeps a gathered 64 KiB frame from flooding the line-fill buffers.
pub const FRAME_LINES: usize = 144;

/// Lines of a coming placement asked for at most, for the same reasons.
pub const WRITE_LINES: usize = 144;

/// Asks for the first [`FRAME_LINES`] lines of `frame` to be brought into L1 for reading: a
/// frame the caller will handle next.
#[inline]
pub fn frame(frame: &[u8]) {
    let end = frame.len().min(FRAME_LINES * LINE);
    let base = frame.as_ptr();
    let mut at = 0;
    while at < end {
        read_line(base.wrapping_add(at));
        at += LINE;
    }
}

/// Asks for ownership of the lines under `len` bytes (at most [`WRITE_LINES`] lines) from
/// `start`: bytes a placement is about to store. The caller keeps the range inside memory it
/// owns; a range past it would be harmless, but useless.
#[inline]
pub(crate) fn for_write(start: *const u8, len: usize) {
    // From the line holding `start`, so a placement that does not begin on a line boundary
    // still has its first line asked for.
    let mut line = start.wrapping_sub(start as usize % LINE);
    let end = start.wrapping_add(len.min(WRITE_LINES * LINE));
    while line < end {
        write_line(line);
        line = line.wrapping_add(LINE);
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn read_line(p: *const u8) {
    use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: PREFETCHT0 is an SSE instruction, part of the x86-64 baseline, so the target
    // feature the intrinsic names is always present. A prefetch performs no architectural
    // access: it cannot fault and reads nothing the program sees, whatever the address.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn write_line(p: *const u8) {
    use core::arch::x86_64::{_mm_prefetch, _MM_HINT_ET0};
    // SAFETY: as for `read_line`. _MM_HINT_ET0 is PREFETCHW, which a CPU without it executes
    // as a NOP; it asks for the line in a state a store can complete in, and changes no byte.
    unsafe { _mm_prefetch::<_MM_HINT_ET0>(p.cast()) }
}

// Elsewhere the hints are left to the hardware's prefetchers.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn read_line(_: *const u8) {}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn write_line(_: *const u8) {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hint changes no byte, whatever the range: past the end, unaligned, empty.
    #[test]
    fn prefetch_changes_nothing() {
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let before = bytes.clone();
        frame(&bytes);
        frame(&bytes[3..3]);
        for_write(bytes.as_ptr().wrapping_add(13), 4000);
        for_write(bytes.as_ptr().wrapping_add(bytes.len()), 1 << 20);
        for_write(core::ptr::null(), 64);
        assert_eq!(bytes, before);
    }
}
