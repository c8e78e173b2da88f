//! Timestamps at fixed points of a tagged write's round trip, for seeing where a write's latency
//! goes leg by leg between two processes (issue 13 item 4; `benches/latency-trace.sh`).
//!
//! Only with the `trace` feature: without it [`mark`] and [`dump`] are empty and inlined away.
//! With it, a mark stores the TSC and its [`Point`] in a process-wide array (the first
//! [`CAPACITY`] marks are kept) and [`dump`] writes them to the file `DDPDK_TRACE` names. A mark
//! costs an RDTSC (18-20 ns on the VMs measured, `port::dpdk::tsc`) and an atomic add, so a traced
//! round trip is longer by that much a mark: compare legs, and the total with an untraced run.

/// Where a mark is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Point {
    /// The ULP posts a write (where the latency client reads its clock).
    Post = 1,
    /// A data core applied a ULP operation (the send queued with SCTP), before framing.
    Applied = 2,
    /// The device took a burst (`rte_eth_tx_burst` took at least one packet).
    TxDone = 3,
    /// A burst arrived (`rte_eth_rx_burst` gave at least one packet).
    RxGot = 4,
    /// A connection handled a packet (SCTP, DDP's checks, placement; a SACK's acknowledgement),
    /// before what it owes in return is framed.
    Handled = 5,
    /// The ULP took the write's completion.
    Seen = 6,
}

/// Marks kept.
pub const CAPACITY: usize = 1 << 22;

#[cfg(feature = "trace")]
mod on {
    use super::{Point, CAPACITY};
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

    static NEXT: AtomicUsize = AtomicUsize::new(0);
    static MARKS: [AtomicU64; CAPACITY] = [const { AtomicU64::new(0) }; CAPACITY];

    #[inline]
    pub fn mark(p: Point) {
        let i = NEXT.fetch_add(1, Ordering::Relaxed);
        if let Some(m) = MARKS.get(i) {
            m.store(
                (crate::port::dpdk::tsc::read() << 8) | p as u64,
                Ordering::Relaxed,
            );
        }
    }

    pub fn dump() -> std::io::Result<()> {
        let Some(path) = std::env::var_os("DDPDK_TRACE") else {
            return Ok(());
        };
        // The marks' clock rate, counted against the monotonic clock (the TSC runs at one rate
        // on the CPUs this is for: `tsc::trusted`).
        let (t0, c0) = (std::time::Instant::now(), crate::port::dpdk::tsc::read());
        std::thread::sleep(std::time::Duration::from_millis(200));
        let (t1, c1) = (std::time::Instant::now(), crate::port::dpdk::tsc::read());
        let hz = (c1 - c0) as f64 / (t1 - t0).as_secs_f64();
        let n = NEXT.load(Ordering::Relaxed).min(CAPACITY);
        let mut out = String::with_capacity(n * 20);
        out.push_str(&format!("# tsc_hz {hz:.0}\n"));
        for m in &MARKS[..n] {
            let v = m.load(Ordering::Relaxed);
            out.push_str(&format!("{} {}\n", v >> 8, v & 0xff));
        }
        std::fs::write(path, out)
    }
}

#[cfg(feature = "trace")]
pub use on::{dump, mark};

/// Records that `_p` was reached now (nothing without the `trace` feature).
#[cfg(not(feature = "trace"))]
#[inline(always)]
pub fn mark(_p: Point) {}

/// Writes the marks, one `TSC POINT` line each after a `# tsc_hz RATE` line, to the file `DDPDK_TRACE` names, if it is set
/// (nothing without the `trace` feature).
#[cfg(not(feature = "trace"))]
pub fn dump() -> std::io::Result<()> {
    Ok(())
}
