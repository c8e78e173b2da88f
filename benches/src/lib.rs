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
