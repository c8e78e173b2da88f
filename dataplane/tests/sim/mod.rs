//! A deterministic simulated network between two SCTP endpoints, in virtual time (DESIGN.md
//! verification ladder step 2; the shape of quinn's `tests/util.rs` `Pair`).
//!
//! Everything random comes from one seed: the network's loss, duplication, reordering, bit
//! corruption and delay, the endpoints' secrets, and the messages. A failing seed reproduces
//! exactly.

#![allow(dead_code)] // each test binary uses its own part of the harness

use std::collections::BinaryHeap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use ddpdk_dataplane::sctp::{
    Association, CloseReason, Config, Endpoint, Event, Instant, Message, Outcome,
};

/// SplitMix64: small, fast, and good enough to drive a simulation.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p && p > 0.0
    }
    pub fn bytes32(&mut self) -> [u8; 32] {
        let mut b = [0u8; 32];
        for c in b.chunks_mut(8) {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        b
    }
}

/// How the network misbehaves; every packet is judged independently.
#[derive(Debug, Clone, Copy)]
pub struct NetConfig {
    pub loss: f64,
    pub duplicate: f64,
    /// Chance that a packet is held back by up to `reorder_extra`.
    pub reorder: f64,
    pub reorder_extra: Duration,
    /// Chance that one random bit of the packet is flipped.
    pub corrupt: f64,
    pub delay: Duration,
    pub jitter: Duration,
    /// Largest SCTP packet the path carries; larger ones are dropped and counted.
    pub mtu: usize,
}

impl NetConfig {
    pub fn perfect(mtu: usize) -> Self {
        NetConfig {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_extra: Duration::ZERO,
            corrupt: 0.0,
            delay: Duration::from_millis(5),
            jitter: Duration::ZERO,
            mtu,
        }
    }

    /// A random hostile network: loss up to 30 %, duplication, reordering, corruption, delay.
    pub fn hostile(rng: &mut Rng) -> Self {
        let mtus = [576 + 28, 1280 - 40, 1500 - 20, 9000 - 20];
        NetConfig {
            loss: rng.below(31) as f64 / 100.0,
            duplicate: rng.below(11) as f64 / 100.0,
            reorder: rng.below(21) as f64 / 100.0,
            reorder_extra: Duration::from_millis(1 + rng.below(100)),
            corrupt: rng.below(6) as f64 / 100.0,
            delay: Duration::from_millis(1 + rng.below(80)),
            jitter: Duration::from_millis(rng.below(10)),
            mtu: mtus[rng.below(mtus.len() as u64) as usize],
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
struct InFlight {
    at: Instant,
    seq: u64,
    to_server: bool,
    bytes: Vec<u8>,
}

impl Ord for InFlight {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        // Earliest first out of a max-heap; ties in send order.
        o.at.cmp(&self.at).then(o.seq.cmp(&self.seq))
    }
}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub struct NetStats {
    pub sent: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub corrupted: u64,
    pub too_big: u64,
}

pub struct Net {
    pub cfg: NetConfig,
    rng: Rng,
    queue: BinaryHeap<InFlight>,
    seq: u64,
    pub stats: NetStats,
}

impl Net {
    pub fn new(cfg: NetConfig, rng: Rng) -> Self {
        Net {
            cfg,
            rng,
            queue: BinaryHeap::new(),
            seq: 0,
            stats: NetStats::default(),
        }
    }

    pub fn send(&mut self, now: Instant, to_server: bool, packet: &[u8]) {
        trace(now, if to_server { "c->s" } else { "s->c" }, packet);
        self.stats.sent += 1;
        if packet.len() > self.cfg.mtu {
            self.stats.too_big += 1;
            return;
        }
        if self.rng.chance(self.cfg.loss) {
            self.stats.lost += 1;
            return;
        }
        let copies = if self.rng.chance(self.cfg.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut bytes = packet.to_vec();
            if self.rng.chance(self.cfg.corrupt) {
                self.stats.corrupted += 1;
                let bit = self.rng.below(bytes.len() as u64 * 8);
                bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
            }
            let mut delay = self.cfg.delay;
            if !self.cfg.jitter.is_zero() {
                delay += Duration::from_nanos(self.rng.below(self.cfg.jitter.as_nanos() as u64));
            }
            if self.rng.chance(self.cfg.reorder) {
                delay += Duration::from_nanos(
                    self.rng.below(self.cfg.reorder_extra.as_nanos() as u64 + 1),
                );
            }
            self.seq += 1;
            self.queue.push(InFlight {
                at: now + delay,
                seq: self.seq,
                to_server,
                bytes,
            });
        }
    }

    pub fn next_at(&self) -> Option<Instant> {
        self.queue.peek().map(|p| p.at)
    }

    pub fn pop_due(&mut self, now: Instant) -> Option<(bool, Vec<u8>)> {
        if self.queue.peek().is_some_and(|p| p.at <= now) {
            self.queue.pop().map(|p| (p.to_server, p.bytes))
        } else {
            None
        }
    }
}

/// One message as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub stream: u16,
    pub ppid: u32,
    pub data: Vec<u8>,
}

/// One side: an endpoint, its association while there is one, and what the application saw.
pub struct Peer {
    pub name: &'static str,
    pub addr: IpAddr,
    pub ep: Endpoint,
    pub assoc: Option<Association>,
    pub received: Vec<Received>,
    pub events: Vec<Event>,
    /// Messages still to queue: (stream, ppid, data).
    pub outbox: std::collections::VecDeque<(u16, u32, Vec<u8>)>,
    /// Counters of associations that have ended, added up.
    pub finished: Vec<ddpdk_dataplane::sctp::Stats>,
}

impl Peer {
    pub fn new(name: &'static str, addr: IpAddr, cfg: Config, secret: [u8; 32]) -> Self {
        Peer {
            name,
            addr,
            ep: Endpoint::new(cfg, secret).expect("valid config"),
            assoc: None,
            received: Vec::new(),
            events: Vec::new(),
            outbox: Default::default(),
            finished: Vec::new(),
        }
    }

    pub fn connected(&self) -> bool {
        self.events
            .iter()
            .any(|e| matches!(e, Event::Connected { .. }))
    }

    pub fn closed(&self) -> Option<CloseReason> {
        self.events.iter().find_map(|e| match e {
            Event::Closed(r) => Some(*r),
            _ => None,
        })
    }

    /// All counters of this peer's associations, current and ended.
    pub fn stats(&self) -> Vec<ddpdk_dataplane::sctp::Stats> {
        let mut v = self.finished.clone();
        if let Some(a) = &self.assoc {
            v.push(*a.stats());
        }
        v
    }
}

pub struct Sim {
    pub now: Instant,
    pub net: Net,
    pub client: Peer,
    pub server: Peer,
    buf: Vec<u8>,
}

pub const CLIENT_PORT: u16 = 5001;
pub const SERVER_PORT: u16 = 5002;

impl Sim {
    pub fn new(net: NetConfig, client_cfg: Config, server_cfg: Config, rng: &mut Rng) -> Self {
        let net_rng = Rng::new(rng.next_u64());
        Sim {
            now: Instant::from_nanos(1_000_000_000),
            net: Net::new(net, net_rng),
            client: Peer::new(
                "client",
                IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
                Config {
                    local_port: CLIENT_PORT,
                    ..client_cfg
                },
                rng.bytes32(),
            ),
            server: Peer::new(
                "server",
                IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
                Config {
                    local_port: SERVER_PORT,
                    ..server_cfg
                },
                rng.bytes32(),
            ),
            buf: vec![0; 65_536],
        }
    }

    /// The client opens the association.
    pub fn connect(&mut self) {
        let a = self
            .client
            .ep
            .connect(self.now, self.server.addr, SERVER_PORT);
        self.client.assoc = Some(a);
    }

    /// Moves both peers' output onto the network, and queues outbox messages while the
    /// association takes them.
    fn flush(&mut self) {
        for to_server in [true, false] {
            let (peer, net, buf, now) = if to_server {
                (&mut self.client, &mut self.net, &mut self.buf, self.now)
            } else {
                (&mut self.server, &mut self.net, &mut self.buf, self.now)
            };
            if let Some(a) = peer.assoc.as_mut() {
                while let Some((stream, ppid, data)) = peer.outbox.front() {
                    if a.state() != ddpdk_dataplane::sctp::State::Established {
                        break;
                    }
                    if a.send(*stream, *ppid, data).is_err() {
                        break;
                    }
                    peer.outbox.pop_front();
                }
                while let Some(n) = a.poll_transmit(now, buf) {
                    net.send(now, to_server, &buf[..n]);
                }
                // RFC 8899 probes, as an endpoint's IP layer sends them (DF, whole): loss
                // taken for a black hole is undone by them.
                while let Some(n) = a.poll_probe(now, buf) {
                    net.send(now, to_server, &buf[..n]);
                }
                while let Some(e) = a.poll_event() {
                    peer.events.push(e);
                }
                if a.is_closed() {
                    peer.finished.push(*a.stats());
                    peer.assoc = None;
                }
            }
        }
    }

    fn deliver(&mut self, to_server: bool, bytes: &[u8]) {
        trace(self.now, if to_server { "  ->s" } else { "  ->c" }, bytes);
        let (peer, from_addr, net, buf, now) = if to_server {
            (
                &mut self.server,
                self.client.addr,
                &mut self.net,
                &mut self.buf,
                self.now,
            )
        } else {
            (
                &mut self.client,
                self.server.addr,
                &mut self.net,
                &mut self.buf,
                self.now,
            )
        };
        let received = &mut peer.received;
        let mut rx = |m: Message<'_>| {
            received.push(Received {
                stream: m.stream,
                ppid: m.ppid,
                data: m.data.to_vec(),
            })
        };
        if let Some(a) = peer.assoc.as_mut() {
            let _ = a.handle(now, bytes, &mut rx);
            return;
        }
        match peer.ep.handle(now, from_addr, bytes, buf, &mut rx) {
            Outcome::Reply(n) => net.send(now, !to_server, &buf[..n]),
            Outcome::Accepted(a) => peer.assoc = Some(*a),
            Outcome::Ignored(_) => {}
        }
    }

    /// Runs until nothing is left to happen or `until`; returns false on the time limit.
    pub fn run_until(&mut self, until: Instant, mut app: impl FnMut(&mut Sim)) -> bool {
        loop {
            app(self);
            self.flush();
            let next = [
                self.net.next_at(),
                self.client.assoc.as_ref().and_then(|a| a.poll_timeout()),
                self.server.assoc.as_ref().and_then(|a| a.poll_timeout()),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next else {
                return true;
            };
            if next > until {
                return false;
            }
            self.now = self.now.max(next);
            while let Some((to_server, bytes)) = self.net.pop_due(self.now) {
                self.deliver(to_server, &bytes);
                self.flush();
            }
            for peer in [&mut self.client, &mut self.server] {
                if let Some(a) = peer.assoc.as_mut() {
                    if a.poll_timeout().is_some_and(|t| t <= self.now) {
                        a.handle_timeout(self.now);
                    }
                }
            }
        }
    }
}

/// A message whose bytes prove which message it is and that it is intact: index, length, then
/// a pattern derived from both.
pub fn make_message(index: u32, len: usize) -> Vec<u8> {
    assert!(len >= 8);
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&index.to_be_bytes());
    v.extend_from_slice(&(len as u32).to_be_bytes());
    let mut x = index.wrapping_mul(2_654_435_761) ^ len as u32;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v.push(x as u8);
    }
    v
}

/// The index of an intact message, or `None` if any byte is wrong.
pub fn check_message(data: &[u8]) -> Option<u32> {
    if data.len() < 8 {
        return None;
    }
    let index = u32::from_be_bytes(data[..4].try_into().ok()?);
    let len = u32::from_be_bytes(data[4..8].try_into().ok()?) as usize;
    (len == data.len() && make_message(index, len) == data).then_some(index)
}

/// One line per packet when `SIM_TRACE` is set: direction, time, chunk types.
pub fn trace(now: Instant, what: &str, bytes: &[u8]) {
    if std::env::var_os("SIM_TRACE").is_none() {
        return;
    }
    let types: Vec<u8> = ddpdk_dataplane::wire::sctp::Packet::new_checked(bytes)
        .map(|p| {
            p.chunks()
                .flatten()
                .map(|c| u8::from(c.chunk_type()))
                .collect()
        })
        .unwrap_or_default();
    eprintln!(
        "{:>10.3} ms {what} {types:?} len {}",
        now.as_nanos() as f64 / 1e6,
        bytes.len()
    );
}
