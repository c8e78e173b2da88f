//! An in-memory port pair for tests that need no DPDK.
//!
//! What one side transmits on TX queue `q` the other side receives on RX queue `q`. Each
//! direction of each queue is bounded, so a full queue behaves like a full descriptor ring: the
//! surplus is not taken by `tx_burst` and stays with the caller.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use super::region::Region;
use super::{ChecksumOffload, FlowRule, LinkStatus, PacketBuf, Port, PortStats, SctpFlow};

/// A poisoned lock only means a test thread panicked; the data is still valid.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A heap-allocated packet buffer, with the offload requests and verdicts a device's
/// descriptor would carry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeapBuf {
    pub bytes: Vec<u8>,
    /// The sender asked the device to fill the SCTP CRC32c; the SCTP header starts here.
    pub sctp_checksum_at: Option<usize>,
    /// What the receiving device found of the L4 checksum (with RX offload on).
    pub l4_verdict: Option<bool>,
    /// Buffers chained into this one ([`PacketBuf::chain`]); their bytes are appended, as
    /// the device would send them.
    pub chained: usize,
}

impl HeapBuf {
    pub fn new(bytes: Vec<u8>) -> HeapBuf {
        HeapBuf {
            bytes,
            ..HeapBuf::default()
        }
    }
}

impl From<Vec<u8>> for HeapBuf {
    fn from(bytes: Vec<u8>) -> HeapBuf {
        HeapBuf::new(bytes)
    }
}

impl PacketBuf for HeapBuf {
    fn data(&self) -> &[u8] {
        &self.bytes
    }
    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
    fn resize(&mut self, len: usize) {
        self.bytes.resize(len, 0);
    }
    fn request_sctp_checksum(&mut self, l2: usize, l3: usize, _ipv6: bool) {
        self.sctp_checksum_at = Some(l2 + l3);
    }
    fn l4_checksum_verdict(&self) -> Option<bool> {
        self.l4_verdict
    }
    fn chain(&mut self, next: HeapBuf) -> Result<(), HeapBuf> {
        self.bytes.extend_from_slice(&next.bytes);
        self.chained += 1 + next.chained;
        Ok(())
    }
}

type Queue = Mutex<VecDeque<HeapBuf>>;

#[derive(Debug, Default)]
struct Counters {
    rx_packets: AtomicU64,
    tx_packets: AtomicU64,
    rx_bytes: AtomicU64,
    tx_bytes: AtomicU64,
    /// SCTP CRC32cs the emulated device filled on transmit.
    crc_filled: AtomicU64,
    /// Region spans handed out by `attach_region`.
    attached: AtomicU64,
}

/// One end of an in-memory wire.
#[derive(Debug)]
pub struct MemPort {
    id: u16,
    name: String,
    mac: [u8; 6],
    capacity: usize,
    rx: Arc<[Queue]>,
    tx: Arc<[Queue]>,
    counters: Counters,
    /// SCTP checksum offload of this port's device, and of the peer's (which checks what
    /// this one sends, as the receiving device would).
    offload: ChecksumOffload,
    peer_offload: ChecksumOffload,
    /// Whether `attach_region` emulates a device that sends region memory in a chain.
    zero_copy: AtomicBool,
    /// What [`Port::link`] says (up by default); frames still move, as a test wants.
    link_down: AtomicBool,
    /// The emulated device's flow rules (`steer_sctp`), when it has them; the peer's sending
    /// side applies them, as this device's receive side would.
    flow_rules: AtomicBool,
    rules: Arc<Mutex<Rules>>,
    peer_rules: Arc<Mutex<Rules>>,
}

/// Installed flow rules: (id, match, RX queue), and the next id.
#[derive(Debug, Default)]
struct Rules {
    installed: Vec<(usize, SctpFlow, u16)>,
    next: usize,
}

/// Two ports wired back to back with `queues` queue pairs, each direction of each queue holding
/// at most `capacity` packets.
pub fn pair(queues: u16, capacity: usize) -> (MemPort, MemPort) {
    pair_with_offload(queues, capacity, ChecksumOffload::default())
}

/// As [`pair`], both devices offering `offload` for SCTP's CRC32c: on transmit a device fills
/// the checksum of a frame whose sender asked ([`PacketBuf::request_sctp_checksum`]), on receive
/// it reports whether the checksum is right ([`PacketBuf::l4_checksum_verdict`]).
pub fn pair_with_offload(
    queues: u16,
    capacity: usize,
    offload: ChecksumOffload,
) -> (MemPort, MemPort) {
    let mk = || -> Arc<[Queue]> { (0..queues).map(|_| Queue::default()).collect() };
    let (a_to_b, b_to_a) = (mk(), mk());
    let (rules_a, rules_b) = (Arc::default(), Arc::default());
    let port = |id: u16,
                rx: &Arc<[Queue]>,
                tx: &Arc<[Queue]>,
                own: &Arc<Mutex<Rules>>,
                peer: &Arc<Mutex<Rules>>| MemPort {
        id,
        name: format!("mem{id}"),
        mac: [0x02, 0, 0, 0, 0, id as u8 + 1],
        capacity,
        rx: Arc::clone(rx),
        tx: Arc::clone(tx),
        counters: Counters::default(),
        offload,
        peer_offload: offload,
        zero_copy: AtomicBool::new(true),
        link_down: AtomicBool::new(false),
        flow_rules: AtomicBool::new(false),
        rules: Arc::clone(own),
        peer_rules: Arc::clone(peer),
    };
    (
        port(0, &b_to_a, &a_to_b, &rules_a, &rules_b),
        port(1, &a_to_b, &b_to_a, &rules_b, &rules_a),
    )
}

impl MemPort {
    /// SCTP CRC32cs this port's emulated device filled on transmit.
    pub fn crc_filled(&self) -> u64 {
        self.counters.crc_filled.load(Relaxed)
    }

    /// Region spans [`Port::attach_region`] handed out.
    pub fn attached(&self) -> u64 {
        self.counters.attached.load(Relaxed)
    }

    /// Whether the emulated device has flow rules ([`Port::steer_sctp`]; off by default).
    pub fn set_flow_rules(&self, on: bool) {
        self.flow_rules.store(on, Relaxed);
    }

    /// Flow rules installed now.
    pub fn flow_rules(&self) -> Vec<(SctpFlow, u16)> {
        lock(&self.rules)
            .installed
            .iter()
            .map(|(_, f, q)| (*f, *q))
            .collect()
    }

    /// The RX queue of the peer that a frame sent on TX queue `queue` reaches: the queue of the
    /// peer's flow rule that matches it, else `queue`.
    fn peer_queue(&self, frame: &[u8], queue: u16) -> u16 {
        let rules = lock(&self.peer_rules);
        if rules.installed.is_empty() {
            return queue;
        }
        let Ok(f) = crate::wire::link::parse_sctp(frame) else {
            return queue;
        };
        let Some(&[a, b, c, d]) = f.sctp.get(..4) else {
            return queue;
        };
        let flow = SctpFlow {
            local: f.ip.dst(),
            peer: f.ip.src(),
            local_port: u16::from_be_bytes([c, d]),
            peer_port: u16::from_be_bytes([a, b]),
        };
        rules
            .installed
            .iter()
            .find(|r| r.1 == flow)
            .map_or(queue, |r| r.2)
    }

    /// What [`Port::link`] reports from now on (the queues are unaffected).
    pub fn set_link_up(&self, up: bool) {
        self.link_down.store(!up, Relaxed);
    }

    /// Whether [`Port::attach_region`] works (on by default), to test both transmit paths.
    pub fn set_zero_copy(&self, on: bool) {
        self.zero_copy.store(on, Relaxed);
    }

    fn queue<'a>(qs: &'a [Queue], q: u16) -> std::sync::MutexGuard<'a, VecDeque<HeapBuf>> {
        // A poisoned queue only means a test thread panicked mid-burst; the data is still valid.
        qs[usize::from(q)]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Port for MemPort {
    type Buf = HeapBuf;

    fn sctp_checksum_offload(&self) -> ChecksumOffload {
        self.offload
    }

    fn id(&self) -> u16 {
        self.id
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn nb_rx_queues(&self) -> u16 {
        self.rx.len() as u16
    }
    fn nb_tx_queues(&self) -> u16 {
        self.tx.len() as u16
    }
    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn rx_burst(&self, queue: u16, out: &mut Vec<HeapBuf>, max: usize) -> usize {
        let mut q = Self::queue(&self.rx, queue);
        let n = max.min(q.len());
        let mut bytes = 0;
        for b in q.drain(..n) {
            bytes += b.bytes.len() as u64;
            out.push(b);
        }
        self.counters.rx_packets.fetch_add(n as u64, Relaxed);
        self.counters.rx_bytes.fetch_add(bytes, Relaxed);
        n
    }

    fn tx_burst(&self, queue: u16, pkts: &mut Vec<HeapBuf>) -> usize {
        let mut n = 0;
        let mut bytes = 0;
        // In order; the first packet whose queue is full stops the burst (it and the rest stay
        // with the caller).
        while let Some(first) = pkts.first() {
            let target = self.peer_queue(&first.bytes, queue);
            let mut q = Self::queue(&self.tx, target);
            if q.len() >= self.capacity {
                break;
            }
            let mut b = pkts.remove(0);
            n += 1;
            bytes += b.bytes.len() as u64;
            // The emulated device: it fills the CRC32c it was asked for (RFC 9260 App. A) and
            // the receiving one checks it, as hardware with SCTP checksum offload does.
            if let Some(at) = b.sctp_checksum_at.take() {
                if self.offload.tx {
                    if let Some(sctp) = b.bytes.get_mut(at..) {
                        crate::wire::crc32c::fill(sctp);
                        self.counters.crc_filled.fetch_add(1, Relaxed);
                    }
                }
            }
            b.l4_verdict = None;
            if self.peer_offload.rx {
                if let Ok(f) = crate::wire::link::parse_sctp(&b.bytes) {
                    b.l4_verdict = Some(crate::wire::crc32c::verify(f.sctp));
                }
            }
            q.push_back(b);
        }
        self.counters.tx_packets.fetch_add(n as u64, Relaxed);
        self.counters.tx_bytes.fetch_add(bytes, Relaxed);
        // Like DPDK's net_ring, a packet refused because the queue is full is not a device TX
        // error: it stays with the caller, which counts what it finally drops.
        n
    }

    fn alloc_bulk(&self, out: &mut Vec<HeapBuf>, n: usize, len: usize) -> bool {
        out.extend((0..n).map(|_| HeapBuf::new(vec![0; len])));
        true
    }

    /// The emulated device reads the region when the buffer is made rather than when it is
    /// sent; to the sender the contract is the same (the bytes stay put until acknowledged).
    fn attach_region(&self, region: &Region, offset: u64, len: usize) -> Option<HeapBuf> {
        if !self.zero_copy.load(Relaxed) {
            return None;
        }
        let mut bytes = vec![0; len];
        region.read(offset, &mut bytes).ok()?;
        self.counters.attached.fetch_add(1, Relaxed);
        Some(HeapBuf::new(bytes))
    }

    fn steer_sctp(&self, flow: &SctpFlow, queue: u16) -> Result<FlowRule, String> {
        if !self.flow_rules.load(Relaxed) {
            return Err("the emulated device has no flow rules".into());
        }
        if usize::from(queue) >= self.rx.len() {
            return Err(format!("no RX queue {queue}"));
        }
        let mut rules = lock(&self.rules);
        let id = rules.next;
        rules.next += 1;
        rules.installed.push((id, *flow, queue));
        Ok(FlowRule::new(id))
    }

    fn unsteer_sctp(&self, rule: FlowRule) -> Result<(), String> {
        lock(&self.rules).installed.retain(|r| r.0 != rule.id());
        Ok(())
    }

    fn link(&self) -> LinkStatus {
        LinkStatus {
            up: !self.link_down.load(Relaxed),
            speed_mbps: 0,
            full_duplex: true,
        }
    }

    fn stats(&self) -> PortStats {
        let c = &self.counters;
        PortStats {
            rx_packets: c.rx_packets.load(Relaxed),
            tx_packets: c.tx_packets.load(Relaxed),
            rx_bytes: c.rx_bytes.load(Relaxed),
            tx_bytes: c.tx_bytes.load(Relaxed),
            ..PortStats::default()
        }
    }

    fn xstats(&self) -> Vec<(String, u64)> {
        let s = self.stats();
        vec![
            ("rx_good_packets".into(), s.rx_packets),
            ("tx_good_packets".into(), s.tx_packets),
            ("rx_good_bytes".into(), s.rx_bytes),
            ("tx_good_bytes".into(), s.tx_bytes),
        ]
    }

    fn reset_stats(&self) {
        let c = &self.counters;
        for a in [&c.rx_packets, &c.tx_packets, &c.rx_bytes, &c.tx_bytes] {
            a.store(0, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bufs(n: u8) -> Vec<HeapBuf> {
        (0..n)
            .map(|i| HeapBuf::new(vec![i; 60 + usize::from(i)]))
            .collect()
    }

    #[test]
    fn what_one_side_sends_the_other_receives_intact_and_in_order() {
        let (a, b) = pair(2, 64);
        let mut out = bufs(10);
        let sent_copy = out.clone();
        assert_eq!(a.tx_burst(1, &mut out), 10);
        assert!(out.is_empty());
        let mut rx = Vec::new();
        assert_eq!(
            b.rx_burst(0, &mut rx, 32),
            0,
            "queue 0 must not see queue 1's traffic"
        );
        assert_eq!(b.rx_burst(1, &mut rx, 32), 10);
        assert_eq!(rx, sent_copy);
        assert_eq!(a.stats().tx_packets, 10);
        assert_eq!(b.stats().rx_packets, 10);
        assert_eq!(a.stats().tx_bytes, b.stats().rx_bytes);
    }

    #[test]
    fn full_queue_leaves_the_surplus_with_the_caller() {
        let (a, _b) = pair(1, 4);
        let mut out = bufs(6);
        assert_eq!(a.tx_burst(0, &mut out), 4);
        assert_eq!(out.len(), 2);
        assert_eq!(
            out[0].bytes[0], 4,
            "the untaken packets are the last ones, in order"
        );
        let outcome = a.tx_burst_all(0, &mut out, 3);
        assert_eq!(
            outcome,
            crate::port::TxOutcome {
                sent: 0,
                dropped: 2,
                dropped_bytes: 64 + 65
            }
        );
        assert!(out.is_empty());
    }
}
