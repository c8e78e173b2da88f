//! ddpdk benchmarks.
#![forbid(unsafe_code)]

/// Child processes of the two-process benchmarks (`raw-io-bench`, `ddp-goodput-bench`).
pub mod procs {
    use std::process::{Child, Command, Output};
    use std::time::{Duration, Instant};

    /// Asks a tool to stop as a user would (SIGINT), so it prints its final statistics.
    pub fn interrupt(child: &Child) {
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
    }

    /// Gives a process `grace` to exit, then kills it, so a stuck tool cannot hang the
    /// benchmark. Its output is small enough to sit in the pipe meanwhile.
    pub fn reap(mut child: Child, grace: Duration) -> std::io::Result<Output> {
        let t0 = Instant::now();
        while child.try_wait()?.is_none() {
            if t0.elapsed() > grace {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        child.wait_with_output()
    }

    /// The per-second receive rates a `ddpdk --stats-period 1 --json` receiver printed.
    pub fn ddpdk_rx_pps(stdout: &str) -> Vec<u64> {
        stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v.get("rates")?.get("rx_pps")?.as_u64())
            .collect()
    }
}

/// The registered memory of the in-process DDP benches (`ddp-rx-bench`, `ddp-tx-bench`).
pub mod memory {
    use ddpdk_control::memory::{Memory, MemoryRegistration, RegionId};
    use ddpdk_dataplane::mem::{Access, Pd, Stag};
    use ddpdk_dataplane::port::region::Region;

    /// A [`Memory`] with one region of `len` bytes (huge pages where free), every page
    /// touched with `byte` so no measured path pays first-touch faults another does not, and
    /// a protection domain.
    pub fn with_region(len: usize, byte: u8, seed: u64) -> (Memory, RegionId, Pd) {
        let (mut memory, _) = Memory::new(64, 0, seed);
        let region = Region::new(len).expect("the bench region");
        if !region.huge() {
            eprintln!("warning: no free huge pages; the region is on normal pages");
        }
        region.fill(0, len, byte).expect("in the region");
        let region = memory.add_region(region).expect("an empty region table");
        let pd = memory.alloc_pd();
        (memory, region, pd)
    }

    /// The first `len` bytes of `region` registered in `pd` for remote write, from Tagged
    /// Offset 0.
    pub fn remote_write(memory: &mut Memory, pd: Pd, region: RegionId, len: usize) -> Stag {
        memory
            .register(MemoryRegistration {
                pd,
                region,
                offset: 0,
                len: len as u64,
                access: Access::REMOTE_WRITE,
                stream: None,
                to_base: 0,
            })
            .expect("register")
            .stag
    }
}
