//! The CPU's time-stamp counter, for the poll loops' clock (`ddpdk_control::runtime::Clock`).
//!
//! A poll loop reads the time once a turn. Through the vDSO (`clock_gettime`, which reads the
//! TSC too, under the kernel's sequence lock, and scales it) a read costs 42-49 ns on the VMs
//! measured; RDTSC alone 18-20 ns, a tenth of an idle turn saved. The counter is a clock only where it ticks
//! at one rate whatever the CPU's power state and agrees between CPUs (an invariant,
//! synchronized TSC); [`trusted`] asks the kernel, which checked exactly that before it chose
//! the TSC as its own clock source (and would have fallen back to another at boot if not).

use std::path::Path;

/// The kernel's current clock source.
const CLOCKSOURCE: &str = "/sys/devices/system/clocksource/clocksource0/current_clocksource";

/// The counter now, in ticks.
#[inline]
pub fn read() -> u64 {
    // SAFETY: RDTSC reads a register and has no preconditions on x86-64 (every x86-64 CPU has
    // it; user-mode reads are allowed unless the kernel set CR4.TSD, which Linux does only
    // for a process that asked with PR_SET_TSC, as ddpdk never does).
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Whether the kernel keeps its time on the TSC: it found the counter invariant and the same
/// on every CPU.
pub fn trusted() -> bool {
    trusted_by(Path::new(CLOCKSOURCE))
}

fn trusted_by(clocksource: &Path) -> bool {
    std::fs::read_to_string(clocksource).is_ok_and(|s| s.trim() == "tsc")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_tsc_clock_source_is_trusted() {
        let dir = std::env::temp_dir().join(format!("ddpdk-tsc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let f = dir.join("current_clocksource");
        for (text, want) in [("tsc\n", true), ("kvm-clock\n", false), ("hpet\n", false)] {
            std::fs::write(&f, text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(trusted_by(&f), want, "{text:?}");
        }
        assert!(
            !trusted_by(&dir.join("absent")),
            "no clock source file: not trusted"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_counter_moves_forward() {
        let a = read();
        std::thread::sleep(std::time::Duration::from_millis(1));
        let b = read();
        assert!(b > a, "{a} then {b}");
    }
}
