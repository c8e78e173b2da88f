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

    /// A tool the benchmark started, killed if it is dropped unreaped (an error or a panic on
    /// the benchmark's side): `ddpdk` runs on when the reader of its output leaves, so a
    /// forwarder left behind would spin a CPU for ever and skew every later figure.
    #[derive(Debug)]
    pub struct Running(Option<Child>);

    impl Running {
        pub fn new(child: Child) -> Running {
            Running(Some(child))
        }
    }

    impl std::ops::Deref for Running {
        type Target = Child;
        fn deref(&self) -> &Child {
            self.0.as_ref().expect("a child until reaped")
        }
    }

    impl std::ops::DerefMut for Running {
        fn deref_mut(&mut self) -> &mut Child {
            self.0.as_mut().expect("a child until reaped")
        }
    }

    impl Drop for Running {
        fn drop(&mut self) {
            if let Some(c) = self.0.as_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    /// Gives a process `grace` to exit, then kills it, so a stuck tool cannot hang the
    /// benchmark. Its output is small enough to sit in the pipe meanwhile.
    pub fn reap(mut running: Running, grace: Duration) -> std::io::Result<Output> {
        let Some(mut child) = running.0.take() else {
            return Err(std::io::Error::other("reaped already"));
        };
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
            ddpdk_dataplane::errln!("warning: no free huge pages; the region is on normal pages");
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
