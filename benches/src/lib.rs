//! ddpdk benchmarks.
#![forbid(unsafe_code)]

/// Child processes of the two-process benchmarks (`raw-io-bench`, `ddp-goodput-bench`).
pub mod procs {
    use std::process::{Child, Command, Output};
    use std::sync::{Mutex, Once};
    use std::time::{Duration, Instant};

    /// Asks a tool to stop as a user would (SIGINT), so it prints its final statistics.
    pub fn interrupt(child: &Child) {
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
    }

    /// A tool the benchmark started, killed if it is dropped unreaped (an error on the
    /// benchmark's side) or if the benchmark panics: `ddpdk` runs on when the reader of its
    /// output leaves, so a forwarder left behind would spin a CPU for ever and skew every later
    /// figure.
    #[derive(Debug)]
    pub struct Running(Option<Child>);

    /// The tools running now, by pid: a panic aborts (release builds have `panic = "abort"`),
    /// which runs no destructor, so the panic hook kills them.
    static RUNNING: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    static HOOK: Once = Once::new();

    fn tools_running() -> std::sync::MutexGuard<'static, Vec<u32>> {
        RUNNING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    impl Running {
        pub fn new(child: Child) -> Running {
            HOOK.call_once(|| {
                let before = std::panic::take_hook();
                std::panic::set_hook(Box::new(move |info| {
                    for pid in tools_running().drain(..) {
                        let _ = Command::new("kill")
                            .args(["-KILL", &pid.to_string()])
                            .status();
                    }
                    before(info);
                }));
            });
            tools_running().push(child.id());
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
                let pid = c.id();
                tools_running().retain(|p| *p != pid);
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
        let pid = child.id();
        let out = child.wait_with_output();
        tools_running().retain(|p| *p != pid);
        out
    }

    /// The per-second receive rates a `ddpdk --stats-period 1 --json` receiver printed.
    pub fn ddpdk_rx_pps(stdout: &str) -> Vec<u64> {
        stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v.get("rates")?.get("rx_pps")?.as_u64())
            .collect()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn state(pid: u32) -> Option<char> {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            stat.rsplit(')').next()?.trim_start().chars().next()
        }

        /// A panic kills the tools still running: with `panic = "abort"` no destructor runs
        /// (here the `Running` is leaked, as an abort would leave it).
        #[test]
        fn a_panic_kills_the_tools_still_running() {
            let child = Command::new("sleep").arg("60").spawn().expect("sleep");
            let pid = child.id();
            std::mem::forget(Running::new(child));
            // Alive (any state but a zombie's: a process just forked may be in D while it
            // execs, which CI once saw).
            let alive = state(pid);
            assert!(
                alive.is_some_and(|s| s != 'Z'),
                "alive before the panic: {alive:?}"
            );
            assert!(std::panic::catch_unwind(|| panic!("a bench fails")).is_err());
            let t0 = Instant::now();
            // Killed and not reaped (its Child was leaked): a zombie.
            while state(pid) != Some('Z') && t0.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert_eq!(state(pid), Some('Z'), "killed by the panic hook");
        }
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

/// A port that takes every frame and keeps nothing: the device end of a send-path bench
/// (`ddp-tx-bench`), so that the runtime's own transmit side ([`ddpdk_control::xmit::Tx`])
/// runs as it does on a DPDK port, with the device's work left out. Buffers are plain heap
/// buffers; an attached region span is held by length only, as a device would read it
/// when it sends. Its functions are not inlined, so callgrind counts them apart
/// (`callgrind-tx-stages.sh`, the `port` stage).
pub mod sink {
    use ddpdk_dataplane::port::region::Region;
    use ddpdk_dataplane::port::{LinkStatus, PacketBuf, Port, PortStats};
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    /// A frame buffer: its own bytes or a region span it names, and what is chained after it.
    #[derive(Debug, Default)]
    pub struct SinkBuf {
        bytes: Vec<u8>,
        /// The region bytes this buffer names by reference (an attached span), not held.
        span: usize,
        /// Frame bytes of the buffers chained after this one.
        chained: usize,
        /// Region bytes this buffer and its chain name by reference.
        attached: usize,
    }

    impl PacketBuf for SinkBuf {
        fn data(&self) -> &[u8] {
            &self.bytes
        }
        fn data_mut(&mut self) -> &mut [u8] {
            &mut self.bytes
        }
        #[inline(never)]
        fn resize(&mut self, len: usize) {
            self.bytes.resize(len, 0);
        }
        #[inline(never)]
        fn chain(&mut self, next: SinkBuf) -> Result<(), SinkBuf> {
            self.chained += next.frame_len();
            self.attached += next.attached;
            Ok(())
        }
        fn frame_len(&self) -> usize {
            self.bytes.len() + self.span + self.chained
        }
    }

    /// What the sink was given.
    #[derive(Debug, Default)]
    pub struct SinkPort {
        frames: AtomicU64,
        bytes: AtomicU64,
        attached: AtomicU64,
    }

    impl SinkPort {
        /// (frames, frame bytes, bytes sent by reference from regions) taken so far.
        pub fn taken(&self) -> (u64, u64, u64) {
            (
                self.frames.load(Relaxed),
                self.bytes.load(Relaxed),
                self.attached.load(Relaxed),
            )
        }
    }

    impl Port for SinkPort {
        type Buf = SinkBuf;
        fn id(&self) -> u16 {
            0
        }
        fn name(&self) -> &str {
            "sink"
        }
        fn nb_rx_queues(&self) -> u16 {
            1
        }
        fn nb_tx_queues(&self) -> u16 {
            1
        }
        fn mac(&self) -> [u8; 6] {
            [2, 0, 0, 0, 0, 1]
        }
        fn rx_burst(&self, _queue: u16, _out: &mut Vec<SinkBuf>, _max: usize) -> usize {
            0
        }
        #[inline(never)]
        fn tx_burst(&self, _queue: u16, pkts: &mut Vec<SinkBuf>) -> usize {
            let n = pkts.len();
            let (bytes, attached) = pkts.iter().fold((0, 0), |(b, a), p| {
                (b + p.frame_len() as u64, a + p.attached as u64)
            });
            self.frames.fetch_add(n as u64, Relaxed);
            self.bytes.fetch_add(bytes, Relaxed);
            self.attached.fetch_add(attached, Relaxed);
            pkts.clear();
            n
        }
        #[inline(never)]
        fn alloc_bulk(&self, out: &mut Vec<SinkBuf>, n: usize, len: usize) -> bool {
            out.extend((0..n).map(|_| SinkBuf {
                bytes: vec![0; len],
                ..SinkBuf::default()
            }));
            true
        }
        #[inline(never)]
        fn attach_region(&self, region: &Region, offset: u64, len: usize) -> Option<SinkBuf> {
            // The span must lie in the region, as Region::attach_to requires.
            let end = offset.checked_add(len as u64)?;
            (end <= region.len() as u64).then(|| SinkBuf {
                span: len,
                attached: len,
                ..SinkBuf::default()
            })
        }
        #[inline(never)]
        fn attach_region_in(
            &self,
            mut buf: SinkBuf,
            region: &Region,
            offset: u64,
            len: usize,
        ) -> Result<SinkBuf, SinkBuf> {
            match offset.checked_add(len as u64) {
                Some(end) if end <= region.len() as u64 && buf.chained == 0 => {
                    buf.bytes.clear();
                    buf.span = len;
                    buf.attached = len;
                    Ok(buf)
                }
                _ => Err(buf),
            }
        }
        fn link(&self) -> LinkStatus {
            LinkStatus {
                up: true,
                speed_mbps: u32::MAX,
                full_duplex: true,
            }
        }
        fn stats(&self) -> PortStats {
            PortStats::default()
        }
        fn xstats(&self) -> Vec<(String, u64)> {
            Vec::new()
        }
        fn reset_stats(&self) {}
    }
}
