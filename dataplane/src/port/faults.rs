//! A port that loses frames on purpose: any [`Port`] behind a seeded fault injector, so the
//! binary can be measured and soaked under loss on real DPDK devices (a goodput run with 1 %
//! of frames dropped, say) the way the simulations test it in memory.
//!
//! Received frames are dropped, each with probability `drop`, before the caller sees them (the
//! buffers go back to the device's pool); transmit is untouched, so loss on the path to the peer
//! is the peer's to inject. Each RX queue draws from its own xorshift state (one core owns a
//! queue), so the same seed loses the same frames of the same arrival order.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use super::region::Region;
use super::{ChecksumOffload, FlowRule, LinkStatus, Port, PortStats, SctpFlow, TxOutcome};

/// What to inject.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Faults {
    /// The share of received frames dropped, 0.0 ..= 1.0.
    pub drop: f64,
    /// Seeds the draws (the same seed drops the same frames of the same traffic).
    pub seed: u64,
}

/// A port with [`Faults`] injected on receive.
#[derive(Debug)]
pub struct Faulty<P: Port> {
    inner: Arc<P>,
    /// A frame is dropped when a draw is below this (of `u64::MAX`).
    threshold: u64,
    /// One xorshift state per RX queue.
    states: Box<[AtomicU64]>,
    dropped: AtomicU64,
    /// Frames kept for the caller (so `dropped` can be read as a share).
    kept: AtomicU64,
}

impl<P: Port> Faulty<P> {
    pub fn new(inner: Arc<P>, faults: Faults) -> Faulty<P> {
        let drop = faults.drop.clamp(0.0, 1.0);
        let threshold = if drop >= 1.0 {
            u64::MAX
        } else {
            (drop * u64::MAX as f64) as u64
        };
        let states = (0..inner.nb_rx_queues().max(1))
            .map(|q| AtomicU64::new(splitmix(faults.seed ^ (u64::from(q) << 32)) | 1))
            .collect();
        Faulty {
            inner,
            threshold,
            states,
            dropped: AtomicU64::new(0),
            kept: AtomicU64::new(0),
        }
    }

    /// The device underneath.
    pub fn inner(&self) -> &Arc<P> {
        &self.inner
    }

    /// Frames dropped on purpose so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }

    /// Frames passed to the caller so far.
    pub fn kept(&self) -> u64 {
        self.kept.load(Relaxed)
    }

    fn draw(&self, queue: u16) -> u64 {
        let cell = &self.states[usize::from(queue) % self.states.len()];
        let mut x = cell.load(Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        cell.store(x, Relaxed);
        x
    }
}

/// SplitMix64: spreads a seed over the state.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl<P: Port> Port for Faulty<P> {
    type Buf = P::Buf;

    fn id(&self) -> u16 {
        self.inner.id()
    }
    fn sctp_checksum_offload(&self) -> ChecksumOffload {
        self.inner.sctp_checksum_offload()
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn nb_rx_queues(&self) -> u16 {
        self.inner.nb_rx_queues()
    }
    fn nb_tx_queues(&self) -> u16 {
        self.inner.nb_tx_queues()
    }
    fn mac(&self) -> [u8; 6] {
        self.inner.mac()
    }

    fn rx_burst(&self, queue: u16, out: &mut Vec<Self::Buf>, max: usize) -> usize {
        let start = out.len();
        let n = self.inner.rx_burst(queue, out, max);
        if n == 0 || self.threshold == 0 {
            self.kept.fetch_add(n as u64, Relaxed);
            return n;
        }
        let mut lost = Vec::new();
        let mut k = start;
        while k < out.len() {
            if self.draw(queue) < self.threshold {
                lost.push(out.remove(k));
            } else {
                k += 1;
            }
        }
        let kept = out.len() - start;
        self.dropped.fetch_add(lost.len() as u64, Relaxed);
        self.kept.fetch_add(kept as u64, Relaxed);
        self.inner.free_bulk(&mut lost);
        kept
    }

    fn tx_burst(&self, queue: u16, pkts: &mut Vec<Self::Buf>) -> usize {
        self.inner.tx_burst(queue, pkts)
    }
    fn alloc_bulk(&self, out: &mut Vec<Self::Buf>, n: usize, len: usize) -> bool {
        self.inner.alloc_bulk(out, n, len)
    }
    fn attach_region(&self, region: &Region, offset: u64, len: usize) -> Option<Self::Buf> {
        self.inner.attach_region(region, offset, len)
    }
    fn max_tx_segments(&self) -> usize {
        self.inner.max_tx_segments()
    }
    fn steer_sctp(&self, flow: &SctpFlow, queue: u16) -> Result<FlowRule, String> {
        self.inner.steer_sctp(flow, queue)
    }
    fn unsteer_sctp(&self, rule: FlowRule) -> Result<(), String> {
        self.inner.unsteer_sctp(rule)
    }
    fn free_bulk(&self, bufs: &mut Vec<Self::Buf>) {
        self.inner.free_bulk(bufs)
    }
    fn link(&self) -> LinkStatus {
        self.inner.link()
    }
    fn stats(&self) -> PortStats {
        self.inner.stats()
    }
    fn xstats(&self) -> Vec<(String, u64)> {
        let mut v = self.inner.xstats();
        v.push(("fault_rx_dropped".into(), self.dropped()));
        v
    }
    fn reset_stats(&self) {
        self.inner.reset_stats()
    }
    fn tx_burst_all(&self, queue: u16, pkts: &mut Vec<Self::Buf>, retries: u32) -> TxOutcome {
        self.inner.tx_burst_all(queue, pkts, retries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::mem::{pair, HeapBuf};

    /// `n` frames, each carrying its index in its first four bytes.
    fn frames(n: u32) -> Vec<HeapBuf> {
        (0..n)
            .map(|i| {
                let mut f = vec![0u8; 64];
                f[..4].copy_from_slice(&i.to_be_bytes());
                HeapBuf::new(f)
            })
            .collect()
    }

    /// About the asked share is dropped, the rest arrive in order, and the same seed drops the
    /// same frames.
    #[test]
    fn drops_the_asked_share_in_order_and_reproducibly() {
        let run = |seed: u64| -> (Vec<u32>, u64) {
            let (a, b) = pair(1, 20_000);
            let b = Faulty::new(Arc::new(b), Faults { drop: 0.1, seed });
            let mut out = frames(10_000);
            a.tx_burst_all(0, &mut out, 0);
            let mut got = Vec::new();
            while b.rx_burst(0, &mut got, 32) > 0 || b.kept() + b.dropped() < 10_000 {}
            let index = got
                .iter()
                .map(|f| u32::from_be_bytes([f.bytes[0], f.bytes[1], f.bytes[2], f.bytes[3]]))
                .collect();
            (index, b.dropped())
        };
        let (kept, dropped) = run(7);
        assert!(
            (800..1200).contains(&dropped),
            "{dropped} of 10000 dropped at 10 %"
        );
        assert_eq!(kept.len() as u64 + dropped, 10_000);
        assert!(
            kept.windows(2).all(|w| w[0] < w[1]),
            "kept frames keep their order"
        );
        assert_eq!(run(7), (kept, dropped), "the same seed, the same losses");
        assert_ne!(run(8).1, 0);
    }

    /// No faults: every frame goes through.
    #[test]
    fn no_faults_drop_nothing() {
        let (a, b) = pair(1, 1024);
        let b = Faulty::new(Arc::new(b), Faults { drop: 0.0, seed: 1 });
        let mut out = frames(100);
        a.tx_burst_all(0, &mut out, 0);
        let mut got = Vec::new();
        assert_eq!(b.rx_burst(0, &mut got, 1000), 100);
        assert_eq!(b.dropped(), 0);
    }
}
