//! A port that mistreats what it receives on purpose: any [`Port`] behind a seeded fault
//! injector, so the binary can be measured and soaked on real DPDK devices under loss,
//! duplication, corruption, reordering and delay (issue 12 item 4), the way the simulations
//! test the sans-IO core in memory.
//!
//! Every fault is applied to received frames, before the caller sees them; transmit is
//! untouched, so faults on the path to the peer are the peer's to inject. Per frame, in order:
//! - **drop**: the frame is lost (its buffer goes back to the device's pool);
//! - **corrupt**: one bit of the frame's first segment is flipped, anywhere in the frame (the
//!   link and IP headers included), as a damaged link would; while corruption is on, the port
//!   says it has no receive checksum offload, since the device's verdict predates the damage;
//! - **duplicate**: a copy of the frame arrives right behind it, or ahead of it when the
//!   original is held back by reordering (frames that do not fit one fresh buffer are not
//!   copied, and counted);
//! - **reorder**: the frame is held back and arrives after the frames of the next receive
//!   burst, so at least one later frame overtakes it when traffic flows;
//! - **delay**: every frame arrives no sooner than this long after the device gave it up.
//!
//! Each RX queue has its own xorshift state (one core owns a queue), so the same seed does the
//! same to the same arrival order. Without faults the wrapper adds one branch a burst.

use crossbeam_utils::CachePadded;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::region::Region;
use super::{
    ChecksumOffload, FlowRule, LinkStatus, PacketBuf, Port, PortStats, SctpFlow, TxOutcome,
};

/// What to inject: the share of received frames each fault strikes (0.0 ..= 1.0), the delay
/// every frame takes, and the seed of the draws.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Faults {
    pub drop: f64,
    pub duplicate: f64,
    pub corrupt: f64,
    pub reorder: f64,
    pub delay: Duration,
    /// Seeds the draws (the same seed does the same to the same traffic).
    pub seed: u64,
}

impl Faults {
    /// True when nothing is injected.
    pub fn is_none(&self) -> bool {
        self.drop <= 0.0
            && self.duplicate <= 0.0
            && self.corrupt <= 0.0
            && self.reorder <= 0.0
            && self.delay.is_zero()
    }
}

/// What a [`Faulty`] port has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Frames passed to the caller (copies included).
    pub kept: u64,
    pub dropped: u64,
    pub corrupted: u64,
    pub duplicated: u64,
    /// Frames that should have been copied but did not fit one buffer (or the pool was dry).
    pub not_duplicated: u64,
    pub reordered: u64,
    /// Frames held for the delay (every frame, when a delay is set).
    pub delayed: u64,
}

/// A port with [`Faults`] injected on receive.
#[derive(Debug)]
pub struct Faulty<P: Port> {
    inner: Arc<P>,
    /// A draw below these (of `u64::MAX`) strikes the frame.
    drop: u64,
    corrupt: u64,
    duplicate: u64,
    reorder: u64,
    delay: Duration,
    /// Whether any fault is on: without, frames pass straight through.
    active: bool,
    queues: Box<[Mutex<QueueState<P::Buf>>]>,
    /// Frames passed up, per RX queue: each queue is polled by one data core, and a counter
    /// of their own (a cache line each) keeps the cores from moving one line between them on
    /// every burst.
    kept: Box<[CachePadded<AtomicU64>]>,
    dropped: AtomicU64,
    corrupted: AtomicU64,
    duplicated: AtomicU64,
    not_duplicated: AtomicU64,
    reordered: AtomicU64,
    delayed: AtomicU64,
}

/// One RX queue's draws and the frames it holds back.
#[derive(Debug)]
struct QueueState<B> {
    rng: u64,
    /// Frames due to the caller, each with the time it may leave, in arrival order.
    due: VecDeque<(Instant, B)>,
    /// Frames held back by `reorder`: they join `due` behind the next burst.
    late: Vec<B>,
    /// A chained frame's bytes, gathered to be copied.
    scratch: Vec<u8>,
}

impl<B> QueueState<B> {
    fn draw(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }
}

/// The draw threshold of a share.
fn threshold(share: f64) -> u64 {
    let share = if share.is_nan() {
        0.0
    } else {
        share.clamp(0.0, 1.0)
    };
    if share >= 1.0 {
        u64::MAX
    } else {
        (share * u64::MAX as f64) as u64
    }
}

impl<P: Port> Faulty<P> {
    pub fn new(inner: Arc<P>, faults: Faults) -> Faulty<P> {
        let queues = (0..inner.nb_rx_queues().max(1))
            .map(|q| {
                Mutex::new(QueueState {
                    rng: splitmix(faults.seed ^ (u64::from(q) << 32)) | 1,
                    due: VecDeque::new(),
                    late: Vec::new(),
                    scratch: Vec::new(),
                })
            })
            .collect::<Box<[_]>>();
        let kept = (0..queues.len()).map(|_| CachePadded::default()).collect();
        Faulty {
            inner,
            drop: threshold(faults.drop),
            corrupt: threshold(faults.corrupt),
            duplicate: threshold(faults.duplicate),
            reorder: threshold(faults.reorder),
            delay: faults.delay,
            active: !faults.is_none(),
            queues,
            kept,
            dropped: AtomicU64::new(0),
            corrupted: AtomicU64::new(0),
            duplicated: AtomicU64::new(0),
            not_duplicated: AtomicU64::new(0),
            reordered: AtomicU64::new(0),
            delayed: AtomicU64::new(0),
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
        self.kept.iter().map(|k| k.load(Relaxed)).sum()
    }

    /// Counts `n` frames passed up from `queue`.
    ///
    /// A load and a store, not a locked add: a queue has one poller (DPDK's rule for an RX
    /// queue, and the runtime's: a queue belongs to one data core), so nothing comes between
    /// the two, and a full barrier right behind the PMD's copy of the burst buys nothing.
    /// (`perf` of a 64-byte write-latency run put 17-20 % of the data core's poll samples
    /// behind the locked add; without it they sit on the next loads and the p50 does not move
    /// measurably: the wait is memif's copy, not the barrier. benches/README.md, "Session 38".)
    /// Were two threads to poll one queue, a count could be lost; nothing else.
    fn count_kept(&self, queue: u16, n: usize) {
        if let Some(k) = self.kept.get(usize::from(queue)) {
            k.store(k.load(Relaxed).wrapping_add(n as u64), Relaxed);
        }
    }

    /// Everything done so far.
    pub fn counts(&self) -> FaultCounts {
        FaultCounts {
            kept: self.kept(),
            dropped: self.dropped.load(Relaxed),
            corrupted: self.corrupted.load(Relaxed),
            duplicated: self.duplicated.load(Relaxed),
            not_duplicated: self.not_duplicated.load(Relaxed),
            reordered: self.reordered.load(Relaxed),
            delayed: self.delayed.load(Relaxed),
        }
    }

    /// Frames held back (reordered or delayed) and not yet passed on.
    pub fn held(&self) -> usize {
        self.queues
            .iter()
            .map(|q| q.lock().map_or(0, |s| s.due.len() + s.late.len()))
            .sum()
    }

    /// Gives every frame held back (reordered or delayed) back to the device's pool: at
    /// shutdown, before the pool's buffers are counted.
    pub fn release_held(&self) {
        for q in self.queues.iter() {
            if let Ok(mut st) = q.lock() {
                let mut bufs: Vec<P::Buf> = st.due.drain(..).map(|(_, b)| b).collect();
                bufs.append(&mut st.late);
                self.inner.free_bulk(&mut bufs);
            }
        }
    }

    /// A copy of `frame` in a fresh buffer of the device's pool, or None.
    fn copy_of(&self, frame: &P::Buf, scratch: &mut Vec<u8>) -> Option<P::Buf> {
        let gathered = frame.gather_into(scratch);
        let bytes: &[u8] = if gathered { scratch } else { frame.data() };
        let mut v = Vec::with_capacity(1);
        if !self.inner.alloc_bulk(&mut v, 1, bytes.len()) {
            return None;
        }
        let mut copy = v.pop()?;
        if copy.len() != bytes.len() {
            let mut back = vec![copy];
            self.inner.free_bulk(&mut back);
            return None;
        }
        copy.data_mut().copy_from_slice(bytes);
        Some(copy)
    }

    /// Applies the faults to the frames `out` holds from `start`, moving what survives into
    /// the queue's `due` line.
    fn strike(&self, st: &mut QueueState<P::Buf>, out: &mut Vec<P::Buf>, start: usize) {
        let now = Instant::now();
        let at = now + self.delay;
        let mut lost = Vec::new();
        // What the last burst held back arrives behind this one.
        let late = std::mem::take(&mut st.late);
        let mut reordered = 0u64;
        let mut scratch = std::mem::take(&mut st.scratch);
        for mut frame in out.drain(start..) {
            if self.drop != 0 && st.draw() < self.drop {
                lost.push(frame);
                continue;
            }
            if !self.delay.is_zero() {
                self.delayed.fetch_add(1, Relaxed);
            }
            if self.corrupt != 0 && st.draw() < self.corrupt && !frame.is_empty() {
                let d = st.draw();
                let data = frame.data_mut();
                let at = (d % data.len() as u64) as usize;
                data[at] ^= 1 << ((d >> 32) % 8);
                self.corrupted.fetch_add(1, Relaxed);
            }
            let copy = if self.duplicate != 0 && st.draw() < self.duplicate {
                let c = self.copy_of(&frame, &mut scratch);
                match c {
                    Some(_) => self.duplicated.fetch_add(1, Relaxed),
                    None => self.not_duplicated.fetch_add(1, Relaxed),
                };
                c
            } else {
                None
            };
            if self.reorder != 0 && st.draw() < self.reorder {
                reordered += 1;
                st.late.push(frame);
            } else {
                st.due.push_back((at, frame));
            }
            if let Some(c) = copy {
                st.due.push_back((at, c));
            }
        }
        for frame in late {
            st.due.push_back((at, frame));
        }
        st.scratch = scratch;
        self.dropped.fetch_add(lost.len() as u64, Relaxed);
        self.reordered.fetch_add(reordered, Relaxed);
        self.inner.free_bulk(&mut lost);
    }
}

/// Frames one RX queue holds back (due or reordered), at most.
const MAX_HELD: usize = 4096;

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
    fn inline_crypto(&self) -> Option<std::ptr::NonNull<std::ffi::c_void>> {
        // A NIC's ICV check vouches for the frame it decrypted, before this wrapper corrupts
        // it; its marks are not on the copies this wrapper makes, and a frame it holds back
        // could reach an SA after the session that verified it went: with any fault on, ESP
        // is opened in software, which sees all of it.
        self.inner.inline_crypto().filter(|_| !self.active)
    }
    fn sctp_checksum_offload(&self) -> ChecksumOffload {
        let mut o = self.inner.sctp_checksum_offload();
        // The device checked the frame before it was corrupted: software must check again.
        o.rx &= self.corrupt == 0;
        o
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
        if !self.active {
            let n = self.inner.rx_burst(queue, out, max);
            // Most polls of an idle core find nothing: no locked add (a full barrier) for them.
            if n > 0 {
                self.count_kept(queue, n);
            }
            return n;
        }
        let start = out.len();
        let Some(cell) = self.queues.get(usize::from(queue)) else {
            return 0;
        };
        let Ok(mut st) = cell.lock() else {
            return 0;
        };
        // What is held is bounded: the device keeps what does not fit (and drops, as a full
        // ring does, what it cannot keep), so duplicates cannot grow the queue without end.
        let room = MAX_HELD
            .saturating_sub(st.due.len() + st.late.len())
            .min(max);
        let n = self.inner.rx_burst(queue, out, room);
        if n > 0 || !st.late.is_empty() {
            self.strike(&mut st, out, start);
        }
        // Pass on what is due, in order, at most `max`.
        let now = Instant::now();
        while out.len() - start < max {
            match st.due.front() {
                Some((at, _)) if *at <= now => {
                    if let Some((_, f)) = st.due.pop_front() {
                        out.push(f);
                    }
                }
                _ => break,
            }
        }
        let kept = out.len() - start;
        self.count_kept(queue, kept);
        kept
    }

    fn tx_held(&self, queue: u16) -> usize {
        self.inner.tx_held(queue)
    }
    fn discard_held(&self, queue: u16) -> usize {
        self.inner.discard_held(queue)
    }
    fn tx_device_queue(&self, queue: u16) -> u16 {
        self.inner.tx_device_queue(queue)
    }

    fn tx_burst(&self, queue: u16, pkts: &mut Vec<Self::Buf>) -> usize {
        self.inner.tx_burst(queue, pkts)
    }
    fn tx_burst_fragmenting(
        &self,
        queue: u16,
        pkts: &mut Vec<Self::Buf>,
        ipv6_mtu: usize,
    ) -> usize {
        self.inner.tx_burst_fragmenting(queue, pkts, ipv6_mtu)
    }
    fn alloc_bulk(&self, out: &mut Vec<Self::Buf>, n: usize, len: usize) -> bool {
        self.inner.alloc_bulk(out, n, len)
    }
    fn attach_region(&self, region: &Region, offset: u64, len: usize) -> Option<Self::Buf> {
        self.inner.attach_region(region, offset, len)
    }
    fn attach_region_in(
        &self,
        buf: Self::Buf,
        region: &Region,
        offset: u64,
        len: usize,
    ) -> Result<Self::Buf, Self::Buf> {
        self.inner.attach_region_in(buf, region, offset, len)
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
    fn esp_ingress_rule(
        &self,
        esp: &super::EspIngress,
        session: std::ptr::NonNull<std::ffi::c_void>,
    ) -> Result<FlowRule, String> {
        self.inner.esp_ingress_rule(esp, session)
    }
    fn remove_esp_ingress_rule(&self, rule: FlowRule) -> Result<(), String> {
        self.inner.remove_esp_ingress_rule(rule)
    }
    fn free_bulk(&self, bufs: &mut Vec<Self::Buf>) {
        self.inner.free_bulk(bufs)
    }
    fn rx_waiter(&self, queues: &[u16]) -> Option<Arc<dyn crate::port::RxWaiter>> {
        // Frames held back (reordered, delayed) come out only when polled, and no interrupt
        // says when: with faults on, the core sleeps on its timer as without interrupts.
        if self.active {
            return None;
        }
        self.inner.rx_waiter(queues)
    }
    fn link(&self) -> LinkStatus {
        self.inner.link()
    }
    fn stats(&self) -> PortStats {
        self.inner.stats()
    }
    fn xstats(&self) -> Vec<(String, u64)> {
        let mut v = self.inner.xstats();
        let c = self.counts();
        v.extend([
            ("fault_rx_dropped".into(), c.dropped),
            ("fault_rx_corrupted".into(), c.corrupted),
            ("fault_rx_duplicated".into(), c.duplicated),
            ("fault_rx_not_duplicated".into(), c.not_duplicated),
            ("fault_rx_reordered".into(), c.reordered),
            ("fault_rx_delayed".into(), c.delayed),
        ]);
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
            let b = Faulty::new(
                Arc::new(b),
                Faults {
                    drop: 0.1,
                    seed,
                    ..Faults::default()
                },
            );
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
        let b = Faulty::new(Arc::new(b), Faults::default());
        let mut out = frames(100);
        a.tx_burst_all(0, &mut out, 0);
        let mut got = Vec::new();
        assert_eq!(b.rx_burst(0, &mut got, 1000), 100);
        assert_eq!(b.dropped(), 0);
    }

    /// Sends `n` indexed frames through a port with `faults` and returns what arrives, in
    /// arrival order, once every frame is accounted for (bursts of 32).
    fn through(faults: Faults, n: u32) -> (Vec<HeapBuf>, FaultCounts) {
        let (a, b) = pair(1, 20_000);
        let b = Faulty::new(Arc::new(b), faults);
        let mut out = frames(n);
        a.tx_burst_all(0, &mut out, 0);
        let mut got = Vec::new();
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            b.rx_burst(0, &mut got, 32);
            let c = b.counts();
            if c.dropped + c.kept == u64::from(n) + c.duplicated && b.held() == 0 {
                return (got, c);
            }
            assert!(Instant::now() < give_up, "frames stuck: {c:?}");
        }
    }

    fn index(f: &HeapBuf) -> u32 {
        u32::from_be_bytes([f.bytes[0], f.bytes[1], f.bytes[2], f.bytes[3]])
    }

    /// Duplication: each struck frame arrives twice, the copy right behind its original and
    /// byte for byte the same; nothing else changes.
    #[test]
    fn duplicates_arrive_right_behind_their_originals() {
        let (got, c) = through(
            Faults {
                duplicate: 0.25,
                seed: 3,
                ..Faults::default()
            },
            4_000,
        );
        assert!((800..1200).contains(&c.duplicated), "{c:?}");
        assert_eq!(got.len() as u64, 4_000 + c.duplicated);
        let mut pairs = 0;
        let mut next = 0;
        let mut k = 0;
        while k < got.len() {
            assert_eq!(index(&got[k]), next, "in order");
            if got.get(k + 1).is_some_and(|g| g.bytes == got[k].bytes) {
                pairs += 1;
                k += 1;
            }
            next += 1;
            k += 1;
        }
        assert_eq!(pairs, c.duplicated);
    }

    /// Corruption: a struck frame differs from what was sent in exactly one bit; the others
    /// are untouched; and the device's checksum verdict is no longer offered.
    #[test]
    fn corruption_flips_one_bit_and_withdraws_rx_checksum_offload() {
        let (got, c) = through(
            Faults {
                corrupt: 0.5,
                seed: 4,
                ..Faults::default()
            },
            2_000,
        );
        let sent = frames(2_000);
        let mut flipped = 0u64;
        // A flip in the index bytes changes which frame it seems to be: compare by position.
        for (g, s) in got.iter().zip(&sent) {
            let bits: u32 = g
                .bytes
                .iter()
                .zip(&s.bytes)
                .map(|(x, y)| (x ^ y).count_ones())
                .sum();
            assert!(bits <= 1);
            flipped += u64::from(bits);
        }
        assert_eq!(flipped, c.corrupted);
        assert!((800..1200).contains(&flipped), "{c:?}");
        let (_, b) =
            crate::port::mem::pair_with_offload(1, 8, ChecksumOffload { tx: true, rx: true });
        let b = Arc::new(b);
        let plain = Faulty::new(Arc::clone(&b), Faults::default());
        assert!(plain.sctp_checksum_offload().rx);
        let corrupting = Faulty::new(
            b,
            Faults {
                corrupt: 0.01,
                ..Faults::default()
            },
        );
        assert!(!corrupting.sctp_checksum_offload().rx);
        assert!(corrupting.sctp_checksum_offload().tx);
    }

    /// Reordering: every frame arrives once, some after frames sent behind them, and the same
    /// seed gives the same order.
    #[test]
    fn reordered_frames_are_overtaken_and_none_is_lost() {
        let run = |seed| {
            let (got, c) = through(
                Faults {
                    reorder: 0.1,
                    seed,
                    ..Faults::default()
                },
                5_000,
            );
            (got.iter().map(index).collect::<Vec<_>>(), c)
        };
        let (order, c) = run(5);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..5_000).collect::<Vec<_>>(), "each frame once");
        let overtaken = order.windows(2).filter(|w| w[0] > w[1]).count() as u64;
        assert!(
            overtaken > 0 && overtaken <= c.reordered,
            "{overtaken} {c:?}"
        );
        assert!((350..650).contains(&c.reordered), "{c:?}");
        assert_eq!(run(5).0, order, "the same seed, the same order");
    }

    /// Delay: nothing arrives before its time; everything arrives after it, in order.
    #[test]
    fn delayed_frames_wait_their_time() {
        let (a, b) = pair(1, 1024);
        let delay = Duration::from_millis(30);
        let b = Faulty::new(
            Arc::new(b),
            Faults {
                delay,
                ..Faults::default()
            },
        );
        let mut out = frames(100);
        let sent = Instant::now();
        a.tx_burst_all(0, &mut out, 0);
        let mut got = Vec::new();
        while got.len() < 100 {
            b.rx_burst(0, &mut got, 32);
            if got.is_empty() {
                assert!(b.held() > 0, "taken from the device and held");
            } else {
                assert!(sent.elapsed() >= delay, "a frame arrived early");
            }
            assert!(sent.elapsed() < Duration::from_secs(10), "frames stuck");
        }
        assert!(got.iter().map(index).eq(0..100));
        assert_eq!(b.counts().delayed, 100);
    }

    /// Frames held back go back to the pool at shutdown.
    #[test]
    fn held_frames_are_released() {
        let (a, b) = pair(1, 1024);
        let b = Faulty::new(
            Arc::new(b),
            Faults {
                delay: Duration::from_secs(3600),
                ..Faults::default()
            },
        );
        let mut out = frames(10);
        a.tx_burst_all(0, &mut out, 0);
        let mut got = Vec::new();
        assert_eq!(b.rx_burst(0, &mut got, 32), 0);
        assert_eq!(b.held(), 10);
        b.release_held();
        assert_eq!(b.held(), 0);
    }
}
