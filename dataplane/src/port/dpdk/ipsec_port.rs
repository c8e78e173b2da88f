//! A port that enforces IPsec policy on every frame it carries: inbound ESP is verified and
//! decrypted before SCTP sees it, outbound SCTP is encrypted after it was framed, and SCTP that
//! policy says must be protected is never taken in the clear (RFC 5043 §13, RFC 4301 §5.1,
//! §5.2).
//!
//! It wraps the device the way [`Faulty`](crate::port::faults::Faulty) does, so the data cores
//! run unchanged on top of it. With no policy it passes every frame through untouched.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::ipsec::{CryptoDev, EspSa};
use super::mbuf::{Mbuf, Mempool};
use crate::ipsec::{Action, Direction, Flow, IpsecConfig, Spd, IPPROTO_ESP};
use crate::port::region::Region;
use crate::port::{ChecksumOffload, FlowRule, LinkStatus, PacketBuf, Port, PortStats, SctpFlow};

/// Frames the policy stopped, by reason (the SAs count their own drops).
#[derive(Debug, Default)]
pub struct PolicyStats {
    /// ESP for an SPI we have no inbound SA for (RFC 4303 §3.4.2: an auditable event).
    pub no_sa: AtomicU64,
    /// Clear SCTP that policy says must arrive protected.
    pub clear_refused: AtomicU64,
    /// ESP that decrypted to a packet its SA's policy does not select (RFC 4301 §5.2 step 4).
    pub policy_mismatch: AtomicU64,
    /// `discard` policies, inbound and outbound.
    pub discarded_in: AtomicU64,
    pub discarded_out: AtomicU64,
    /// Outbound packets a policy protects with an SA that is not there.
    pub no_sa_out: AtomicU64,
}

/// A snapshot of [`PolicyStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PolicyCounts {
    pub no_sa: u64,
    pub clear_refused: u64,
    pub policy_mismatch: u64,
    pub discarded_in: u64,
    pub discarded_out: u64,
    pub no_sa_out: u64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// The device behind IPsec policy.
pub struct IpsecPort<P> {
    inner: Arc<P>,
    pool: Arc<Mempool>,
    spd: Spd,
    inbound: Vec<Arc<EspSa>>,
    outbound: Vec<Arc<EspSa>>,
    pub stats: PolicyStats,
}

impl<P> std::fmt::Debug for IpsecPort<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpsecPort")
            .field("policies", &self.spd.policies().len())
            .field("inbound", &self.inbound.len())
            .field("outbound", &self.outbound.len())
            .finish_non_exhaustive()
    }
}

impl<P: Port<Buf = Mbuf>> IpsecPort<P> {
    /// No policy: every frame passes untouched.
    pub fn passthrough(inner: Arc<P>, pool: Arc<Mempool>) -> IpsecPort<P> {
        IpsecPort {
            inner,
            pool,
            spd: Spd::new(),
            inbound: Vec::new(),
            outbound: Vec::new(),
            stats: PolicyStats::default(),
        }
    }

    /// The SAs and policies of `config` on `dev`. An SA protects the family of the first
    /// policy that names it (IPv4 when none does). `pool` gives the mbufs that frames are
    /// copied into when they are not the port's to encrypt in place.
    pub fn new(
        inner: Arc<P>,
        pool: Arc<Mempool>,
        config: &IpsecConfig,
        dev: &Arc<CryptoDev>,
    ) -> Result<IpsecPort<P>, String> {
        let mut port = IpsecPort::passthrough(inner, pool);
        for sa in &config.sas {
            let ipv6 = config
                .spd
                .policies()
                .iter()
                .find(|p| p.direction == sa.direction && p.action == Action::Protect(sa.spi))
                .and_then(|p| p.selector.src.or(p.selector.dst))
                .is_some_and(|prefix| prefix.addr.is_ipv6());
            let esp = Arc::new(EspSa::new(dev, sa, ipv6)?);
            match sa.direction {
                Direction::In => port.inbound.push(esp),
                Direction::Out => port.outbound.push(esp),
            }
        }
        port.spd = config.spd.clone();
        Ok(port)
    }

    pub fn inner(&self) -> &Arc<P> {
        &self.inner
    }

    /// Whether any policy applies (else the port is a pass-through).
    pub fn is_active(&self) -> bool {
        !self.spd.is_empty()
    }

    pub fn sas(&self) -> impl Iterator<Item = &Arc<EspSa>> {
        self.inbound.iter().chain(&self.outbound)
    }

    pub fn policy_counts(&self) -> PolicyCounts {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let s = &self.stats;
        PolicyCounts {
            no_sa: r(&s.no_sa),
            clear_refused: r(&s.clear_refused),
            policy_mismatch: r(&s.policy_mismatch),
            discarded_in: r(&s.discarded_in),
            discarded_out: r(&s.discarded_out),
            no_sa_out: r(&s.no_sa_out),
        }
    }

    /// What becomes of one received frame: itself (not IP, or bypassed), the packet its ESP
    /// carried, or nothing (dropped and counted).
    fn receive(&self, m: Mbuf, now: Instant) -> Option<Mbuf> {
        let Some(flow) = Flow::of_frame(m.data()) else {
            return Some(m);
        };
        if flow.proto != IPPROTO_ESP {
            return match self.spd.action(Direction::In, &flow) {
                Action::Bypass => Some(m),
                Action::Protect(_) => {
                    bump(&self.stats.clear_refused);
                    None
                }
                Action::Discard => {
                    bump(&self.stats.discarded_in);
                    None
                }
            };
        }
        let Some(spi) = esp_spi(m.data()) else {
            bump(&self.stats.no_sa);
            return None;
        };
        let Some(sa) = self.inbound.iter().find(|s| s.spi() == spi) else {
            bump(&self.stats.no_sa);
            return None;
        };
        let clear = sa.decrypt(m, &self.pool, now).ok()?;
        // RFC 4301 §5.2 step 4: what came through the SA must be what its policy selects.
        let inner = Flow::of_frame(clear.data()).map(|f| self.spd.action(Direction::In, &f));
        if inner == Some(Action::Protect(spi)) {
            Some(clear)
        } else {
            bump(&self.stats.policy_mismatch);
            None
        }
    }

    /// What goes out for one frame to send: itself, its ESP, or nothing (dropped and counted).
    fn send(&self, m: Mbuf, now: Instant) -> Option<Mbuf> {
        let Some(flow) = Flow::of_frame(m.data()) else {
            return Some(m);
        };
        // Protected already: a frame the device did not take, offered again.
        if flow.proto == IPPROTO_ESP {
            return Some(m);
        }
        match self.spd.action(Direction::Out, &flow) {
            Action::Bypass => Some(m),
            Action::Discard => {
                bump(&self.stats.discarded_out);
                None
            }
            Action::Protect(spi) => {
                let Some(sa) = self.outbound.iter().find(|s| s.spi() == spi) else {
                    bump(&self.stats.no_sa_out);
                    return None;
                };
                sa.encrypt(m, &self.pool, now).ok()
            }
        }
    }
}

/// The SPI of an ESP packet in an Ethernet frame (IPv4 with options, or IPv6 with ESP as the
/// first next header).
fn esp_spi(frame: &[u8]) -> Option<u32> {
    let at = match frame.get(12..14)? {
        [0x08, 0x00] => 14 + usize::from(frame.get(14)? & 0x0f) * 4,
        _ => 14 + 40,
    };
    let s = frame.get(at..at + 4)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

impl<P: Port<Buf = Mbuf>> Port for IpsecPort<P> {
    type Buf = Mbuf;

    fn id(&self) -> u16 {
        self.inner.id()
    }
    fn sctp_checksum_offload(&self) -> ChecksumOffload {
        // The device sees only ESP once a policy protects: SCTP's CRC32c is computed and
        // checked in software.
        if self.is_active() {
            ChecksumOffload::default()
        } else {
            self.inner.sctp_checksum_offload()
        }
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
    fn rx_burst(&self, queue: u16, out: &mut Vec<Mbuf>, max: usize) -> usize {
        let start = out.len();
        let n = self.inner.rx_burst(queue, out, max);
        if n == 0 || !self.is_active() {
            return n;
        }
        let now = Instant::now();
        let received: Vec<Mbuf> = out.drain(start..).collect();
        out.extend(received.into_iter().filter_map(|m| self.receive(m, now)));
        out.len() - start
    }
    fn tx_burst(&self, queue: u16, pkts: &mut Vec<Mbuf>) -> usize {
        if self.is_active() && !pkts.is_empty() {
            let now = Instant::now();
            let framed: Vec<Mbuf> = std::mem::take(pkts);
            pkts.extend(framed.into_iter().filter_map(|m| self.send(m, now)));
        }
        self.inner.tx_burst(queue, pkts)
    }
    fn alloc_bulk(&self, out: &mut Vec<Mbuf>, n: usize, len: usize) -> bool {
        self.inner.alloc_bulk(out, n, len)
    }
    fn attach_region(&self, region: &Region, offset: u64, len: usize) -> Option<Mbuf> {
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
    fn free_bulk(&self, bufs: &mut Vec<Mbuf>) {
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
        if self.is_active() {
            let c = self.policy_counts();
            v.extend([
                ("ipsec_no_sa".to_owned(), c.no_sa),
                ("ipsec_clear_refused".to_owned(), c.clear_refused),
                ("ipsec_policy_mismatch".to_owned(), c.policy_mismatch),
                ("ipsec_discarded_in".to_owned(), c.discarded_in),
                ("ipsec_discarded_out".to_owned(), c.discarded_out),
            ]);
        }
        v
    }
    fn reset_stats(&self) {
        self.inner.reset_stats()
    }
}
