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
//!
//! Whether a hint pays depends on the CPU. On the Xeon of sessions 26-29 asking for the next
//! frame whole took 1438-byte segments from 0.55 to 0.92 of memcpy; on an AMD EPYC (Zen 4)
//! the same hint costs: `ddp-rx-bench`'s `conn` path, four alternating runs of three rounds,
//! 4.70 -> 5.23 M segments a second at 1438 B, 0.60 -> 0.77 M at 8938 B and 9.9 -> 10.2 M at
//! 64 B without it (its hardware streamer finds the frame; the software requests only queue
//! ahead of the stores). So [`frame`] asks on CPUs other than AMD's, and the environment
//! variable `DDPDK_PREFETCH_FRAMES` (`1` or `0`, read once) overrides the choice, for a CPU
//! measured the other way. The placement's write hints pay on both.

/// A cache line on the machines DPDK supports on x86-64 and ARMv8 server parts.
const LINE: usize = 64;

/// Lines of a frame asked for at most: a 9216-byte jumbo frame whole. Measured
/// (`ddp-rx-bench`), asking for a jumbo frame whole beat asking for its first 2 KiB and
/// leaving the rest to the hardware's streamer (0.90 against 0.82 of memcpy at 8938-byte
/// segments). The bound keeps a gathered 64 KiB frame from flooding the line-fill buffers.
pub const FRAME_LINES: usize = 144;

/// Lines of a coming placement asked for at most, for the same reasons.
pub const WRITE_LINES: usize = 144;

/// Whether [`frame`] asks for anything: decided once per process (the module's doc says why).
static ASK_FOR_FRAMES: std::sync::LazyLock<bool> = std::sync::LazyLock::new(|| {
    frames_wanted(
        std::env::var("DDPDK_PREFETCH_FRAMES").ok().as_deref(),
        cpu_is_amd(),
    )
});

/// The policy behind [`ASK_FOR_FRAMES`]: the variable's `1` or `0` if set so, else not on AMD.
fn frames_wanted(setting: Option<&str>, amd: bool) -> bool {
    match setting {
        Some("1") => true,
        Some("0") => false,
        _ => !amd,
    }
}

#[cfg(target_arch = "x86_64")]
fn cpu_is_amd() -> bool {
    // CPUID leaf 0 spells the vendor in EBX, EDX, ECX: "AuthenticAMD" (and Hygon's
    // "HygonGenuine", a Zen licensee, is left with the default).
    // SAFETY: CPUID is part of the x86-64 baseline and only reads identification registers;
    // the toolchains before the intrinsic became safe (rust-version 1.87) need the block.
    #[allow(unused_unsafe)]
    let id = unsafe { std::arch::x86_64::__cpuid(0) };
    [id.ebx, id.edx, id.ecx] == [0x6874_7541, 0x6974_6e65, 0x444d_4163]
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_is_amd() -> bool {
    false
}

/// Asks for the first [`FRAME_LINES`] lines of `frame` to be brought into L1 for reading: a
/// frame the caller will handle next.
#[inline]
pub fn frame(frame: &[u8]) {
    if !*ASK_FOR_FRAMES {
        return;
    }
    let end = frame.len().min(FRAME_LINES * LINE);
    let base = frame.as_ptr();
    let mut at = 0;
    while at < end {
        read_line(base.wrapping_add(at));
        at += LINE;
    }
}

thread_local! {
    /// The write hint [`for_write_later`] set aside on this thread: start address and length.
    static LATER: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// [`for_write`], not now but at this thread's next [`run_later`]; a later call replaces an
/// earlier one not yet run.
///
/// For lines a guess says the *next* message will write. Issuing a hint is not free when its
/// lines are in memory: once the line-fill buffers are full the loop waits for room, like a
/// miss (benches/README.md, "Session 48"). Within a burst of a bulk transfer that wait runs
/// under work that needs the lines anyway; at the end of a lone message it is on the path of
/// the SACK the peer's completion waits for. A data core runs the hint at the end of its
/// turn, when what the turn owed has left (`runtime::DataCore::poll`).
#[inline]
pub(crate) fn for_write_later(start: *const u8, len: usize) {
    LATER.set((start as usize, len));
}

/// The hint [`for_write_later`] set aside on this thread, `(0, 0)` if none.
#[cfg(test)]
pub(crate) fn later() -> (usize, usize) {
    LATER.get()
}

/// Issues the write hint `for_write_later` set aside, if any.
#[inline]
pub fn run_later() {
    let (start, len) = LATER.replace((0, 0));
    if len > 0 {
        for_write(start as *const u8, len);
    }
}

/// Asks for ownership of the lines under `len` bytes (at most [`WRITE_LINES`] lines) from
/// `start`: bytes a placement is about to store. The caller keeps the range inside memory it
/// owns; a range past it would be harmless, but useless.
#[inline]
pub(crate) fn for_write(start: *const u8, len: usize) {
    // From the line holding `start`, so a placement that does not begin on a line boundary
    // still has its first line asked for. The address walks as an integer, not a pointer, so
    // that a profile charges the loop (where the core waits for line-fill buffers) to this
    // file's lines (benches/perf-receiver.sh), not to `wrapping_add`'s; a hint needs no
    // provenance.
    let mut line = start as usize - start as usize % LINE;
    let end = (start as usize).saturating_add(len.min(WRITE_LINES * LINE));
    while line < end {
        write_line(line as *const u8);
        line += LINE;
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
    // SAFETY: as for `read_line`; it changes no byte. _MM_HINT_ET0 asks for the line in a
    // state a store can complete in, but without the `prfchw` target feature (not in the
    // x86-64 baseline) the compiler emits PREFETCHT0, the same read hint as `read_line`: a
    // line no other core holds arrives Exclusive, so the store still needs no second request.
    // PREFETCHW itself, tried on the AMD EPYC of session 36, moved `ddp-rx-bench` no further
    // than its noise (1438 B: 0.72-0.79 of memcpy against 0.71-0.80).
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

    /// A hint set aside waits for `run_later`, the latest replaces an earlier one, and
    /// running it leaves nothing behind.
    #[test]
    fn a_later_hint_waits_for_run_later() {
        let bytes = vec![5u8; 8192];
        for_write_later(bytes.as_ptr(), 4096);
        for_write_later(bytes.as_ptr().wrapping_add(64), 128);
        assert_eq!(later(), (bytes.as_ptr() as usize + 64, 128));
        run_later();
        assert_eq!(later(), (0, 0));
        run_later();
        assert_eq!(bytes, vec![5u8; 8192]);
    }

    /// The override wins either way; without it, AMD's CPUs go without the frame hint.
    #[test]
    fn frame_hint_policy() {
        assert!(frames_wanted(Some("1"), true));
        assert!(!frames_wanted(Some("0"), false));
        assert!(!frames_wanted(None, true));
        assert!(frames_wanted(None, false));
        assert!(
            frames_wanted(Some("yes"), false),
            "anything else leaves the default"
        );
    }
}
