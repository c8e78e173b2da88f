//! A port that enforces IPsec policy on every frame it carries: inbound ESP is verified and
//! decrypted before SCTP sees it, outbound SCTP is encrypted after it was framed, and SCTP that
//! policy says must be protected is never taken in the clear (RFC 5043 §13, RFC 4301 §5.1,
//! §5.2).
//!
//! It wraps the device the way [`Faulty`](crate::port::faults::Faulty) does, so the data cores
//! run unchanged on top of it. Its SAs and policies change while the cores run (the shell's
//! `ipsec` commands, a key manager): each change builds a new table and swaps it in whole, so a
//! burst sees one table from start to end and an SA lives until the last burst using it ends.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use arc_swap::ArcSwap;

use super::ipsec::{CryptoDev, EspSa, InlineDev, SaCounts};
use super::mbuf::{Mbuf, Mempool};
use crate::ipsec::{
    Action, Direction, Flow, Framed, IpsecConfig, Mode, PmtuReject, Policy, SaConfig, Spd,
    IPPROTO_ESP, MAX_OVERHEAD,
};
use crate::net::EspTooBig;
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
    /// IP that no policy names, discarded (RFC 4301 §5; not with `--ipsec-default bypass`),
    /// inbound and outbound.
    pub no_policy_in: AtomicU64,
    pub no_policy_out: AtomicU64,
    /// Outbound packets a policy protects with an SA that is not there.
    pub no_sa_out: AtomicU64,
    /// IP whose upper-layer protocol could not be found (truncated, too many extension
    /// headers): policy cannot clear it.
    pub unparsable: AtomicU64,
    /// ICMP PMTU messages quoting ESP that no outbound SA of ours believed: an unknown SPI,
    /// addresses not the SA's, a sequence number it did not send lately, no usable MTU (RFC
    /// 4301 §6.1.2).
    pub pmtu_rejected: AtomicU64,
    /// Frames framed for the NIC to encrypt (inline crypto) under an SA deleted before the
    /// device took them: dropped, never handed to a NIC whose session is gone.
    pub inline_unsent: AtomicU64,
}

/// A snapshot of [`PolicyStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PolicyCounts {
    pub no_sa: u64,
    pub clear_refused: u64,
    pub policy_mismatch: u64,
    pub discarded_in: u64,
    pub discarded_out: u64,
    pub no_policy_in: u64,
    pub no_policy_out: u64,
    pub no_sa_out: u64,
    pub unparsable: u64,
    pub pmtu_rejected: u64,
    pub inline_unsent: u64,
}

/// How long an SA with a NIC session stays after its deletion ([`IpsecPort::sweep_retiring`]):
/// far longer than a device takes the frames in its ring, while the link is up.
pub const RETIRE_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

const OFF: &str = "IPsec is off on this port (start ddpdk with --ipsec, --ipsec-config FILE or \
                   --ipsec-socket PATH)";

fn lock(m: &Mutex<IpsecConfig>) -> MutexGuard<'_, IpsecConfig> {
    // A change that panicked half-way published nothing: the definitions are still whole.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// The SAs and policies one burst works with.
#[derive(Default)]
struct Tables {
    spd: Spd,
    inbound: Vec<Arc<EspSa>>,
    outbound: Vec<Arc<EspSa>>,
    /// Inbound `protect` policies deleted while their SA lives on. An SA's selectors are its
    /// own (RFC 4301 §4.4.2.1), not the SPD's: what it carries is judged by them (§5.2 step
    /// 4) until the SA itself goes, so that deleting a rekey's old policy before its old SA
    /// does not drop what the peer sealed under that SA and is still on its way.
    kept: Vec<Policy>,
}

impl Tables {
    /// Whether frames need looking at: ESP for an SA is opened (and its inner packet checked
    /// against policy) even when no policy is left, and an SPD with no policy discards what
    /// it does not name (RFC 4301 §5) unless told to let it pass.
    fn in_force(&self) -> bool {
        !(self.spd.is_empty()
            && self.spd.unmatched() == Action::Bypass
            && self.inbound.is_empty()
            && self.outbound.is_empty())
    }

    fn sa(&self, direction: Direction, spi: u32) -> Option<&Arc<EspSa>> {
        match direction {
            Direction::In => &self.inbound,
            Direction::Out => &self.outbound,
        }
        .iter()
        .find(|s| s.spi() == spi)
    }

    fn sas_mut(&mut self, direction: Direction) -> &mut Vec<Arc<EspSa>> {
        match direction {
            Direction::In => &mut self.inbound,
            Direction::Out => &mut self.outbound,
        }
    }
}

/// One SA as `show ipsec` lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SaReport {
    pub spi: u32,
    pub direction: String,
    pub algorithm: &'static str,
    pub mode: String,
    pub esn: bool,
    /// Who does the crypto: `inline <port>` where the port's NIC does it as it sends and
    /// receives, else the crypto device's name.
    pub crypto: String,
    /// The soft lifetime is spent: the key manager is to replace the SA (RFC 4301 §4.4.2.1).
    pub rekey_due: bool,
    /// The hard lifetime is spent: every packet of the SA is dropped (counted as expired).
    pub expired: bool,
    /// RFC 4301 §8.2.1: the path MTU (outer IP bytes) ICMP gave for an outbound SA, while
    /// fresh (§8.2.2).
    pub path_mtu: Option<usize>,
    pub counts: SaCounts,
}

/// The device behind IPsec policy.
pub struct IpsecPort<P> {
    /// Per device TX queue ([`Port::tx_device_queue`]), frames already protected that the
    /// device's ring had no room for: sent before anything new on that queue. A frame is
    /// encrypted once (its sequence number used once, RFC 4303 §3.3.3), so it never goes back
    /// to the caller, whose unsent frames are always its own clear ones. Keyed by the device's
    /// queue, not the caller's: two callers that share one (a data core and the control
    /// thread) seal and send under the same lock, so an SA's numbers reach the wire in order,
    /// and neither's sealed frames wait behind the other's newer numbers until they fall out
    /// of the receiver's replay window (§3.4.3). Empty with IPsec off. First, so that these
    /// are freed before the port and the pool they came from.
    held: Box<[Mutex<Vec<Mbuf>>]>,
    inner: Arc<P>,
    pool: Arc<Mempool>,
    /// The crypto device SAs are created on; `None`: IPsec is off and every frame passes.
    dev: Option<Arc<CryptoDev>>,
    /// The device's inline crypto ([`Port::inline_crypto`]), which does the SAs it can.
    inline: Option<Arc<InlineDev>>,
    /// SAs with a session on the NIC that left the tables, and when: a frame sealed inline is
    /// plaintext until the NIC takes it, so the session stays until none can still reach the
    /// NIC ([`IpsecPort::sweep_retiring`]), and goes on the control thread, not on a data
    /// core whose burst happened to hold the SA last.
    retiring: Mutex<Vec<(Arc<EspSa>, Instant)>>,
    /// The NIC sessions were released ([`IpsecPort::release_inline`]): no new one is made.
    released: AtomicBool,
    tables: ArcSwap<Tables>,
    /// The SAs' and policies' definitions; changes are made one at a time under this lock and
    /// published as a new [`Tables`].
    config: Mutex<IpsecConfig>,
    /// Fingerprints of every key an SA of this port has had (taken under `config`'s lock):
    /// a key is never used by a second SA. With AES-GCM the sequence numbers are the nonce
    /// and restart at 1 in a new SA, so the same key again repeats (key, nonce) pairs
    /// (RFC 4106 §8.1, §10), and an inbound SA's new replay window would accept every packet
    /// the old one saw (RFC 4303 §3.4.3).
    used_keys: Mutex<HashSet<[u8; 32]>>,
    /// What the SAs no longer in force counted, inbound's and outbound's (added under
    /// `config`'s lock as [`IpsecPort::publish`] drops them): the port's totals
    /// ([`IpsecPort::sa_totals`]) only grow when an SA is deleted or rebuilt.
    retired: Mutex<[SaCounts; 2]>,
    /// Whether any policy or SA exists: a port without one costs a burst one load.
    active: AtomicBool,
    /// Bytes the path MTU leaves free for ESP: no outbound SA may add more.
    headroom: usize,
    /// This host's addresses ([`IpsecPort::with_local_addresses`]); empty: any.
    local: Vec<IpAddr>,
    /// Moves when an SA's path MTU is lowered ([`Port::esp_pmtu_generation`]).
    pmtu_generation: AtomicU64,
    /// The secret key and counter of the Identifications of sealed IPv6 ESP packets this port
    /// fragments ([`IpsecPort::fragment_sealed`]; RFC 7739 §5.3: a counter from a secret offset).
    frag_key: std::collections::hash_map::RandomState,
    frag_count: AtomicU64,
    pub stats: PolicyStats,
}

impl<P> std::fmt::Debug for IpsecPort<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = self.tables.load();
        f.debug_struct("IpsecPort")
            .field("enabled", &self.dev.is_some())
            .field("policies", &t.spd.policies().len())
            .field("inbound", &t.inbound.len())
            .field("outbound", &t.outbound.len())
            .finish_non_exhaustive()
    }
}

impl<P: Port<Buf = Mbuf>> IpsecPort<P> {
    /// IPsec off: every frame passes untouched, and no SA can be added.
    pub fn passthrough(inner: Arc<P>, pool: Arc<Mempool>) -> IpsecPort<P> {
        IpsecPort {
            inner,
            pool,
            dev: None,
            inline: None,
            retiring: Mutex::new(Vec::new()),
            released: AtomicBool::new(false),
            tables: ArcSwap::from_pointee(Tables::default()),
            config: Mutex::new(IpsecConfig::default()),
            used_keys: Mutex::new(HashSet::new()),
            retired: Mutex::new([SaCounts::default(); 2]),
            active: AtomicBool::new(false),
            headroom: 0,
            local: Vec::new(),
            pmtu_generation: AtomicU64::new(0),
            frag_key: std::collections::hash_map::RandomState::new(),
            frag_count: AtomicU64::new(0),
            stats: PolicyStats::default(),
            held: Box::new([]),
        }
    }

    /// IPsec on, with the SAs and policies of `config` (which may be empty: they can come
    /// later, from the shell or a key manager) on crypto device `dev`. `pool` gives the mbufs
    /// that frames are copied into when they are not the port's to encrypt in place.
    pub fn new(
        inner: Arc<P>,
        pool: Arc<Mempool>,
        config: &IpsecConfig,
        dev: &Arc<CryptoDev>,
    ) -> Result<IpsecPort<P>, String>
    where
        P: 'static,
    {
        let queues = inner.nb_tx_queues();
        // A port whose inline crypto cannot be set up (no memory for its sessions) runs every
        // SA in software, said once; an SA asking for the NIC is then refused.
        let inline = InlineDev::of_port(&inner).unwrap_or_else(|e| {
            crate::errln!(
                "ddpdk: warning: {}: inline crypto not used: {e}",
                inner.name()
            );
            None
        });
        let mut port = IpsecPort::passthrough(inner, pool);
        port.dev = Some(Arc::clone(dev));
        port.inline = inline;
        port.held = (0..queues).map(|_| Mutex::new(Vec::new())).collect();
        let mut tables = Tables::default();
        for sa in &config.sas {
            // An SA protects the family of the policies that name it (IPv4 if none does):
            // rte_ipsec fixes one family per SA.
            let naming: Vec<bool> = config
                .spd
                .policies()
                .iter()
                .filter(|p| p.direction == sa.direction && p.action == Action::Protect(sa.spi))
                .map(Policy::is_ipv6)
                .collect();
            if naming.contains(&true) && naming.contains(&false) {
                return Err(format!(
                    "SA {} {} is named by both IPv4 and IPv6 policies; an SA protects one \
                     family (give each family its own SA)",
                    sa.direction, sa.spi
                ));
            }
            let ipv6 = naming.first().copied().unwrap_or(false);
            let prints = port.unused_keys(sa)?;
            let esp = Arc::new(EspSa::new_on(dev, port.inline.as_ref(), sa, ipv6)?);
            port.rule_in(&esp);
            port.record_keys(prints);
            match sa.direction {
                Direction::In => tables.inbound.push(esp),
                Direction::Out => tables.outbound.push(esp),
            }
        }
        tables.spd = config.spd.clone();
        port.active = AtomicBool::new(tables.in_force());
        port.tables = ArcSwap::from_pointee(tables);
        port.config = Mutex::new(config.clone());
        // What the configured outbound SAs need, or room for any SA if none is configured yet.
        port.headroom = match config.max_overhead() {
            0 => MAX_OVERHEAD,
            n => n,
        };
        Ok(port)
    }

    /// Opens only the ESP addressed to `addrs`, this host's (RFC 4301 §5.2 step 2: IPsec
    /// processes the IPsec traffic "addressed to this device"). ESP for another host passes
    /// unopened to the stack, which drops it as another host's: it is not ours to decrypt,
    /// and opening it would spend its sequence number in our replay window (a copy whose
    /// outer destination an on-path party rewrote, not covered by the ICV in transport mode,
    /// would then make the genuine packet a replay).
    pub fn with_local_addresses(mut self, addrs: &[IpAddr]) -> IpsecPort<P> {
        self.local = addrs.to_vec();
        // Transport-mode SAs on the NIC arrive to these: their rules can be made now.
        for esp in &self.tables.load().inbound {
            self.rule_in(esp);
        }
        self
    }

    /// Has the port hand an inbound SA on the NIC its packets ([`EspSa::install_ingress_rules`]
    /// for this host's addresses), saying why where the device refused a rule: a NIC that
    /// installs inbound SAs only from one (ixgbe, txgbe) then decrypts none of them, and the
    /// SA opens them in software (`show ipsec` shows the NIC's share).
    fn rule_in(&self, esp: &EspSa) {
        for why in esp.install_ingress_rules(&self.local) {
            crate::errln!(
                "ddpdk: warning: {}: SA in {}: no ESP rule to {why}; a NIC that installs \
                 inbound SAs only from one (ixgbe, txgbe) leaves its packets to software",
                self.inner.name(),
                esp.spi()
            );
        }
    }

    pub fn inner(&self) -> &Arc<P> {
        &self.inner
    }

    /// Bytes of each packet the path MTU must leave free for ESP (0 with IPsec off).
    pub fn headroom(&self) -> usize {
        self.headroom
    }

    /// Whether IPsec is on (a crypto device is attached), with or without policies yet.
    pub fn is_enabled(&self) -> bool {
        self.dev.is_some()
    }

    /// The held frames of the device queue that carries TX queue `queue` (none with IPsec off).
    /// Asked every burst and every idle turn (`Tx::flush`): with IPsec off it answers before
    /// asking the device which queue that is.
    #[inline]
    fn held_for(&self, queue: u16) -> Option<&Mutex<Vec<Mbuf>>> {
        if self.held.is_empty() {
            return None;
        }
        self.held
            .get(usize::from(self.inner.tx_device_queue(queue)))
    }

    /// Whether any policy or SA is in force (else the port is a pass-through).
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Every SA in force, inbound first.
    pub fn sas(&self) -> Vec<Arc<EspSa>> {
        let t = self.tables.load();
        t.inbound.iter().chain(&t.outbound).cloned().collect()
    }

    /// How many SAs are in force, and what every SA this port has had counted, inbound's and
    /// outbound's summed (those deleted or rebuilt included, so each sum only grows).
    pub fn sa_totals(&self) -> (usize, SaCounts, SaCounts) {
        // Telemetry asks for these now and then, on the control side: deleted SAs' NIC
        // sessions go without waiting for the next change.
        self.sweep_retiring();
        // `config`'s lock: no SA moves from the tables to `retired` while these are read.
        let _one_change_at_a_time = lock(&self.config);
        let t = self.tables.load();
        let [mut inbound, mut outbound] = *self
            .retired
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for sa in &t.inbound {
            inbound.add(&sa.stats.snapshot());
        }
        for sa in &t.outbound {
            outbound.add(&sa.stats.snapshot());
        }
        (t.inbound.len() + t.outbound.len(), inbound, outbound)
    }

    /// Every SA with its counters, inbound first.
    pub fn sa_reports(&self) -> Vec<SaReport> {
        self.sweep_retiring();
        let now = std::time::Instant::now();
        self.sas()
            .iter()
            .map(|s| {
                let c = s.config();
                SaReport {
                    spi: c.spi,
                    direction: c.direction.to_string(),
                    algorithm: c.algorithm.name(),
                    mode: match c.mode {
                        Mode::Transport => "transport".to_owned(),
                        Mode::Tunnel { src, dst } => format!("tunnel {src} -> {dst}"),
                    },
                    esn: c.esn,
                    crypto: match s.inline() {
                        Some(d) => format!("inline {}", d.name()),
                        None => self.dev.as_ref().map_or("-", |d| d.name()).to_owned(),
                    },
                    rekey_due: s.rekey_due(now),
                    expired: s.expired(now) || s.sequence_state().1,
                    path_mtu: s.path_mtu(now),
                    counts: s.stats.snapshot(),
                }
            })
            .collect()
    }

    /// The policies in force, highest priority first (the numbers `remove_policy` takes).
    /// What traffic no policy names gets: `Discard` (RFC 4301 §5) or `Bypass`
    /// (`--ipsec-default bypass`); Neighbor Discovery passes either way
    /// ([`Spd::unmatched_action`]).
    pub fn unmatched(&self) -> Action {
        self.tables.load().spd.unmatched()
    }

    pub fn policies(&self) -> Vec<Policy> {
        self.tables.load().spd.policies().to_vec()
    }

    /// The families (`"ipv4"`, `"ipv6"`) in which clear SCTP from a host no policy names is
    /// accepted: the first inbound policy, in SPD order, that covers all of that family's
    /// SCTP is a `bypass`, or there is none and traffic no policy names passes
    /// (`--ipsec-default bypass`; RFC 4301 §5 discards it, ddpdk's default). A catch-all
    /// `discard` that a broader-ranked catch-all `bypass` shadows guards nothing.
    pub fn unguarded_families(&self) -> Vec<&'static str> {
        let t = self.tables.load();
        let covers = |p: &Policy, v6: bool| {
            let whole = |x: Option<crate::ipsec::Prefix>| x.is_none_or(|p| p.len == 0);
            p.direction == Direction::In
                && p.is_ipv6() == v6
                && whole(p.selector.src)
                && whole(p.selector.dst)
                && p.selector
                    .proto
                    .is_none_or(|x| x == crate::ipsec::IPPROTO_SCTP)
                && p.selector.sport == (0..=u16::MAX)
                && p.selector.dport == (0..=u16::MAX)
        };
        [("ipv4", false), ("ipv6", true)]
            .into_iter()
            .filter(|(_, v6)| {
                t.spd
                    .policies()
                    .iter()
                    .find(|p| covers(p, *v6))
                    .map_or(t.spd.unmatched(), |p| p.action)
                    == Action::Bypass
            })
            .map(|(name, _)| name)
            .collect()
    }

    /// Adds one SA (RFC 4301 §4.4.2), usable by the next burst of every core.
    pub fn add_sa(&self, sa: SaConfig) -> Result<(), String> {
        let dev = self.dev.as_ref().ok_or(OFF)?;
        let mut cfg = lock(&self.config);
        // A deleted inbound SA's NIC session due to go goes first: its SPI is then free for
        // this one.
        self.sweep_retiring();
        if sa.direction == Direction::Out && sa.overhead() > self.headroom {
            return Err(format!(
                "SA out {} adds up to {} bytes to a packet, and the path MTU leaves room for {} \
                 (the most of --ipsec-config's outbound SAs): configure an SA of its kind at \
                 start-up",
                sa.spi,
                sa.overhead(),
                self.headroom
            ));
        }
        let mut next = cfg.clone();
        next.add_sa(sa.clone())?;
        let prints = self.unused_keys(&sa)?;
        // Policies name their SA, so none names a new one yet: the tunnel's family, or IPv4,
        // until a policy of the other family protects with it (`add_policy` rebuilds it then).
        let ipv6 = matches!(sa.mode, Mode::Tunnel { dst, .. } if dst.is_ipv6());
        let esp = Arc::new(EspSa::new_on(dev, self.inline_dev(), &sa, ipv6)?);
        self.rule_in(&esp);
        // Only a key that an SA holds is used: an SA that could not be made (the session pool
        // spent) never carried a packet, and the same rule is taken once there is room.
        self.record_keys(prints);
        self.publish(&next, |t| t.sas_mut(sa.direction).push(esp));
        *cfg = next;
        Ok(())
    }

    /// The fingerprints of `sa`'s keys ([`key_prints`]), refused if an SA of this port has
    /// had any of them, in the same use or the other ([`crate::ipsec::cross_use_prints`]);
    /// recorded by [`IpsecPort::record_keys`] once the SA exists (both under `config`'s lock).
    fn unused_keys(&self, sa: &SaConfig) -> Result<Vec<[u8; 32]>, String> {
        let prints = crate::ipsec::key_prints(sa);
        let used = self
            .used_keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if crate::ipsec::cross_use_prints(sa)
            .iter()
            .any(|p| used.contains(p))
        {
            return Err(format!(
                "SA {} {}: its key was used by an SA before, in another use (a cipher key as an \
                 HMAC key, or an HMAC key as a cipher key): a key is used once, for one \
                 purpose; give it a new key",
                sa.direction, sa.spi
            ));
        }
        if prints.iter().any(|p| used.contains(p)) {
            return Err(format!(
                "SA {} {}: its key was used by an SA before: a key is used once (a new SA \
                 restarts its sequence numbers, so the same key would repeat AES-GCM nonces, \
                 RFC 4106 §8.1, and reopen the replay window, RFC 4303 §3.4.3; an HMAC key \
                 alone again lets the old SA's packets pass the ICV); give it a new key",
                sa.direction, sa.spi
            ));
        }
        Ok(crate::ipsec::recorded_prints(sa))
    }

    /// Records keys [`IpsecPort::unused_keys`] found unused, now that an SA holds them.
    fn record_keys(&self, prints: Vec<[u8; 32]>) {
        self.used_keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(prints);
    }

    /// Deletes an SA: packets it carried are dropped from the next burst on, and a policy that
    /// protects with it drops what it selects (counted) until an SA of that SPI returns.
    pub fn remove_sa(&self, direction: Direction, spi: u32) -> Result<(), String> {
        let mut cfg = lock(&self.config);
        let mut next = cfg.clone();
        next.remove_sa(direction, spi)?;
        self.publish(&next, |t| {
            t.sas_mut(direction).retain(|s| s.spi() != spi);
            if direction == Direction::In {
                t.kept.retain(|p| p.action != Action::Protect(spi));
            }
        });
        *cfg = next;
        Ok(())
    }

    /// Adds one policy. An SA that has carried nothing yet takes the family of the first
    /// policy that protects with it (rte_ipsec fixes the family of the packets an SA carries:
    /// in a tunnel, the inner ones).
    pub fn add_policy(&self, p: Policy) -> Result<(), String> {
        self.dev.as_ref().ok_or(OFF)?;
        let mut cfg = lock(&self.config);
        self.sweep_retiring();
        let mut next = cfg.clone();
        next.add_policy(p.clone())?;
        let mut rebuilt = None;
        if let Action::Protect(spi) = p.action {
            let t = self.tables.load();
            let sa = t.sa(p.direction, spi).ok_or("the policy's SA is gone")?;
            if sa.is_ipv6() != p.is_ipv6() {
                let named = cfg
                    .spd
                    .policies()
                    .iter()
                    .any(|q| q.direction == p.direction && q.action == Action::Protect(spi));
                if named || sa.stats.snapshot().packets > 0 {
                    return Err(format!(
                        "SA {} {spi} protects {} packets; an SA protects one family (add another \
                         SA for this rule)",
                        p.direction,
                        if sa.is_ipv6() { "IPv6" } else { "IPv4" }
                    ));
                }
                // Its NIC session goes first (no policy selects it, and it carried nothing):
                // the new one shares its SPI and key, and ixgbe and txgbe find the SA table
                // entry a session's destruction clears by SPI alone, so with both alive the
                // old one's destruction would clear the new one's entry, or leave its own.
                // A burst that chose it under tables from before its last policy went holds
                // its queue's lock until it has sent: each taken once, none is left, and
                // what they sealed is counted by now.
                if sa.inline().is_some() {
                    for q in self.held.iter() {
                        drop(q.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
                    }
                    if sa.stats.snapshot().packets > 0 {
                        return Err(format!(
                            "SA {} {spi} has just carried packets; an SA protects one family \
                             (add another SA for this rule)",
                            p.direction
                        ));
                    }
                    sa.release_inline();
                }
                let esp = match sa.for_family(self.inline_dev(), p.is_ipv6()) {
                    Ok(esp) => Arc::new(esp),
                    Err(e) => {
                        // Without its NIC session the old SA would drop what it framed for
                        // the NIC: made again for its own family, with a session of its own.
                        if let Ok(again) = sa.for_family(self.inline_dev(), sa.is_ipv6()) {
                            let again = Arc::new(again);
                            self.rule_in(&again);
                            self.publish(&cfg, |t| {
                                let list = t.sas_mut(p.direction);
                                list.retain(|s| s.spi() != spi);
                                list.push(again);
                            });
                        }
                        return Err(e);
                    }
                };
                self.rule_in(&esp);
                rebuilt = Some(esp);
            }
        }
        self.publish(&next, |t| {
            if let Some(esp) = rebuilt {
                let list = t.sas_mut(p.direction);
                list.retain(|s| s.spi() != esp.spi());
                list.push(esp);
            }
        });
        *cfg = next;
        Ok(())
    }

    /// Deletes the policy at `index` of [`IpsecPort::policies`].
    pub fn remove_policy(&self, index: usize) -> Result<Policy, String> {
        self.delete_policy(|cfg| cfg.remove_policy(index).map(|p| (index, p)))
            .map(|(_, p)| p)
    }

    /// Deletes the policy equal to `p` ([`IpsecConfig::remove_policy_like`]); returns where it
    /// was and what it was.
    pub fn remove_policy_like(&self, p: &Policy) -> Result<(usize, Policy), String> {
        self.delete_policy(|cfg| cfg.remove_policy_like(p))
    }

    /// Deletes a policy with `f` and publishes the rest, as one step under the lock. An
    /// inbound policy that protected with an SA still installed leaves the SA its selectors.
    fn delete_policy(
        &self,
        f: impl FnOnce(&mut IpsecConfig) -> Result<(usize, Policy), String>,
    ) -> Result<(usize, Policy), String> {
        let mut cfg = lock(&self.config);
        let mut next = cfg.clone();
        let (index, gone) = f(&mut next)?;
        self.publish(&next, |t| {
            if let (Direction::In, Action::Protect(spi)) = (gone.direction, gone.action) {
                if t.sa(Direction::In, spi).is_some() && !t.kept.contains(&gone) {
                    t.kept.push(gone.clone());
                }
            }
        });
        *cfg = next;
        Ok((index, gone))
    }

    /// Swaps in the tables of `cfg`: the SAs as they are now (state and counters kept), edited
    /// by `edit`, and `cfg`'s policies.
    fn publish(&self, cfg: &IpsecConfig, edit: impl FnOnce(&mut Tables)) {
        let now = self.tables.load();
        let mut t = Tables {
            spd: cfg.spd.clone(),
            inbound: now.inbound.clone(),
            outbound: now.outbound.clone(),
            kept: now.kept.clone(),
        };
        edit(&mut t);
        // The counts of SAs this drops are kept: a port's totals never go backwards.
        let mut retired = self
            .retired
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (k, (was, is)) in [(&now.inbound, &t.inbound), (&now.outbound, &t.outbound)]
            .into_iter()
            .enumerate()
        {
            for gone in was.iter().filter(|s| !is.iter().any(|n| Arc::ptr_eq(n, s))) {
                retired[k].add(&gone.stats.snapshot());
            }
        }
        drop(retired);
        let leaving: Vec<Arc<EspSa>> = now
            .inbound
            .iter()
            .chain(&now.outbound)
            .filter(|s| s.inline().is_some())
            .filter(|s| {
                !t.inbound
                    .iter()
                    .chain(&t.outbound)
                    .any(|n| Arc::ptr_eq(n, s))
            })
            .cloned()
            .collect();
        self.active.store(t.in_force(), Ordering::Release);
        self.tables.store(Arc::new(t));
        drop(now);
        // The leaving SAs' frames waiting for the ring go now, counted: a burst sealing under
        // the tables before this store holds its queue's lock from before it loaded them until
        // it appends what the ring refused, so once each queue's lock is taken here no such
        // frame can come after. (Matched by SPI: a successor on the same SPI comes in a later
        // change, or, rebuilt for the other family, carried nothing yet.)
        if !leaving.is_empty() {
            self.drop_held_for(|m| leaving.iter().any(|s| s.marks(m)));
        }
        let at = Instant::now();
        self.retiring_sas()
            .extend(leaving.into_iter().map(|s| (s, at)));
        self.sweep_retiring();
    }

    /// The port's inline crypto while it may be used.
    fn inline_dev(&self) -> Option<&Arc<InlineDev>> {
        self.inline
            .as_ref()
            .filter(|_| !self.released.load(Ordering::Acquire))
    }

    fn retiring_sas(&self) -> MutexGuard<'_, Vec<(Arc<EspSa>, Instant)>> {
        self.retiring
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Releases the NIC sessions of deleted SAs once their frames are out of the device's
    /// ring: no burst holds the SA, and [`RETIRE_AFTER`] has passed since it left the tables
    /// (its frames waiting for the ring were dropped then) with the link up whenever a sweep
    /// looked, far longer than a running device takes to drain its ring. Called on the control
    /// side (the changes, the reports, telemetry's totals), never on a data core; the
    /// sessions are destroyed under the list's lock, so [`IpsecPort::release_inline`] finds
    /// none half gone.
    pub fn sweep_retiring(&self) {
        let now = Instant::now();
        let up = self.inner.link().up;
        let mut retiring = self.retiring_sas();
        let mut kept = Vec::with_capacity(retiring.len());
        for (sa, mut at) in retiring.drain(..) {
            if !up {
                at = now;
            }
            if Arc::strong_count(&sa) > 1 || now.duration_since(at) < RETIRE_AFTER {
                kept.push((sa, at));
            }
            // Else dropped here, the last reference: its NIC session is destroyed.
        }
        *retiring = kept;
    }

    /// Drops (counted) the frames waiting for the device that `marked` picks; how many.
    fn drop_held_for(&self, marked: impl Fn(&Mbuf) -> bool) -> usize {
        let mut dropped = 0;
        for q in self.held.iter() {
            let mut q = q.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let before = q.len();
            q.retain(|m| !marked(m));
            dropped += before - q.len();
        }
        self.stats
            .inline_unsent
            .fetch_add(dropped as u64, Ordering::Relaxed);
        dropped
    }

    /// Destroys every SA's session on the NIC, once the device is stopped and before it
    /// closes (a NIC may free its security context at close); frames still waiting for the
    /// NIC are dropped, counted. From then on an SA that the NIC did seals nothing (its frames
    /// are dropped as expired) and opens in software.
    pub fn release_inline(&self) {
        let mut retiring = self.retiring_sas();
        self.released.store(true, Ordering::Release);
        let t = self.tables.load();
        for sa in t.inbound.iter().chain(&t.outbound) {
            sa.release_inline();
        }
        for (sa, _) in retiring.iter() {
            sa.release_inline();
        }
        retiring.clear();
        drop(retiring);
        self.drop_held_for(super::ipsec::marked_for_nic);
    }

    /// The most bytes ESP adds to an outbound packet under the SAs in force.
    pub fn max_overhead(&self) -> usize {
        lock(&self.config).max_overhead()
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
            no_policy_in: r(&s.no_policy_in),
            no_policy_out: r(&s.no_policy_out),
            no_sa_out: r(&s.no_sa_out),
            unparsable: r(&s.unparsable),
            pmtu_rejected: r(&s.pmtu_rejected),
            inline_unsent: r(&s.inline_unsent),
        }
    }

    /// What one received frame needs (RFC 4301 §5.2): to pass, to be opened by an SA, or
    /// nothing (dropped and counted).
    fn inbound<'t>(&self, t: &'t Tables, m: Mbuf) -> Step<'t> {
        let (flow, l4) = match Flow::parse(m.data()) {
            Framed::NotIp => return Step::Pass(m),
            Framed::Unparsable => {
                bump(&self.stats.unparsable);
                return Step::Dropped;
            }
            Framed::Ip(flow, l4) => (flow, l4),
        };
        if flow.proto != IPPROTO_ESP {
            let Some(policy) = t.spd.lookup(Direction::In, &flow) else {
                return unmatched(t, &flow, m, &self.stats.no_policy_in);
            };
            return match policy.action {
                Action::Bypass => Step::Pass(m),
                Action::Protect(_) => {
                    bump(&self.stats.clear_refused);
                    Step::Dropped
                }
                Action::Discard => {
                    bump(&self.stats.discarded_in);
                    Step::Dropped
                }
            };
        }
        if !self.local.is_empty() && !self.local.contains(&flow.dst) {
            return Step::Pass(m);
        }
        // RFC 4301 §5.2, RFC 4303 §3.4.1: ESP is opened once reassembled. The stack does not
        // reassemble: it drops the fragment and counts it as one (`fragments`), where opening
        // it here would count a later fragment as an unknown SPI, or as the SA's failure if
        // four of its bytes happened to be one.
        if flow.fragment {
            return Step::Pass(m);
        }
        let spi = m
            .data()
            .get(l4..l4 + 4)
            .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]));
        match spi.and_then(|spi| t.sa(Direction::In, spi)) {
            Some(sa) => Step::Sa(sa, m),
            None => {
                bump(&self.stats.no_sa);
                Step::Dropped
            }
        }
    }

    /// RFC 4301 §5.2 step 4 and §4.4.1: what came through the SA must be what the ordered SPD
    /// allows through it. Our SPD is not decorrelated, so the inner packet's first match
    /// decides (§4.4.1: "an ordered search of SPD MUST be performed"): a `discard` that
    /// outranks the SA's policy drops it, and so does a policy that names another SA for that
    /// traffic, unless its selector is the very selector of a policy (live, or deleted while
    /// the SA lives) that names this SA: that is a rekey, and the old SA's packets still in
    /// flight are its to accept. Traffic that no policy names, or that a `bypass` lets pass in
    /// clear, is accepted through the SA only where one of its policies covers it.
    ///
    /// An ICMP error that fails this (a router's behind the far gateway of a tunnel SA, which
    /// no policy of the SA names) is judged by the packet it quotes, turned round (RFC 4301
    /// §6.2: the receiver "must extract the header of the triggering packet from the ICMP
    /// payload, and reverse fields ... to determine if the packet is consistent with the
    /// selectors for the SA"): a Packet Too Big about our traffic to the SA's far side reaches
    /// the stack, whose association checks its verification tag (RFC 9260 Appendix C). One
    /// that fails that too is not delivered (§6.2: "MUST NOT forward"), and is counted. An
    /// operator's `discard` that selects the error itself still decides first.
    fn selected(&self, t: &Tables, spi: u32, clear: &Mbuf) -> bool {
        let this_sa =
            |p: &&Policy| p.direction == Direction::In && p.action == Action::Protect(spi);
        let through_this_sa = |flow: &Flow| {
            let mut ours = t.spd.policies().iter().chain(&t.kept).filter(this_sa);
            match t.spd.lookup(Direction::In, flow) {
                Some(first) => match first.action {
                    Action::Protect(x) if x == spi => true,
                    Action::Protect(_) => ours.any(|p| p.selector == first.selector),
                    Action::Discard => false,
                    Action::Bypass => ours.any(|p| p.selector.matches(flow)),
                },
                None => ours.any(|p| p.selector.matches(flow)),
            }
        };
        let ok = match Flow::parse(clear.data()) {
            Framed::Ip(inner, l4) => {
                through_this_sa(&inner)
                    || (!matches!(
                        t.spd.lookup(Direction::In, &inner),
                        Some(Policy {
                            action: Action::Discard,
                            ..
                        })
                    ) && inner
                        .quoted_reversed(clear.data(), l4)
                        .is_some_and(|quoted| through_this_sa(&quoted)))
            }
            Framed::NotIp | Framed::Unparsable => false,
        };
        if !ok {
            bump(&self.stats.policy_mismatch);
        }
        ok
    }

    /// What one frame to send needs: to pass, to be sealed by an SA, or nothing (dropped and
    /// counted).
    fn outbound<'t>(&self, t: &'t Tables, m: Mbuf) -> Step<'t> {
        let flow = match Flow::parse(m.data()) {
            Framed::NotIp => return Step::Pass(m),
            Framed::Unparsable => {
                bump(&self.stats.unparsable);
                return Step::Dropped;
            }
            Framed::Ip(flow, _) => flow,
        };
        // Every outbound frame is judged (RFC 4301 §5: the SPD "MUST be consulted during the
        // processing of all traffic"), ESP included: a frame we sealed never comes back here
        // (`held` keeps the ones the device did not take), so protocol 50 on this path is
        // someone else's, and a `discard` must stop it like any other.
        let Some(policy) = t.spd.lookup(Direction::Out, &flow) else {
            return unmatched(t, &flow, m, &self.stats.no_policy_out);
        };
        match policy.action {
            Action::Bypass => Step::Pass(m),
            Action::Discard => {
                bump(&self.stats.discarded_out);
                Step::Dropped
            }
            Action::Protect(spi) => match t.sa(Direction::Out, spi) {
                Some(sa) => Step::Sa(sa, m),
                None => {
                    bump(&self.stats.no_sa_out);
                    Step::Dropped
                }
            },
        }
    }
}

/// What becomes of a frame no policy names (RFC 4301 §5; [`Spd::unmatched_action`]): passed,
/// or dropped and counted in `dropped`.
fn unmatched<'t>(t: &Tables, flow: &Flow, m: Mbuf, dropped: &AtomicU64) -> Step<'t> {
    match t.spd.unmatched_action(flow) {
        Action::Bypass => Step::Pass(m),
        Action::Discard | Action::Protect(_) => {
            bump(dropped);
            Step::Dropped
        }
    }
}

/// What a frame needs from the port's policy.
enum Step<'t> {
    Pass(Mbuf),
    Sa(&'t Arc<EspSa>, Mbuf),
    Dropped,
}

/// Runs `frames` through `step` into `out`, in their order, handing each run of frames for
/// one SA to `through` at once (one crypto call for the run: `crypto_aesni_mb` works on
/// several buffers in parallel lanes, and a burst is mostly one association's).
fn in_runs<'t>(
    frames: Vec<Mbuf>,
    out: &mut Vec<Mbuf>,
    mut step: impl FnMut(Mbuf) -> Step<'t>,
    mut through: impl FnMut(&'t Arc<EspSa>, Vec<Mbuf>, &mut Vec<Mbuf>),
) {
    let mut run: Vec<Mbuf> = Vec::new();
    let mut sa: Option<&'t Arc<EspSa>> = None;
    for m in frames {
        match step(m) {
            Step::Dropped => {}
            Step::Pass(m) => {
                if let Some(s) = sa.take() {
                    through(s, std::mem::take(&mut run), out);
                }
                out.push(m);
            }
            Step::Sa(s, m) => {
                if sa.is_some_and(|cur| !Arc::ptr_eq(cur, s)) {
                    if let Some(cur) = sa.take() {
                        through(cur, std::mem::take(&mut run), out);
                    }
                }
                sa = Some(s);
                run.push(m);
            }
        }
    }
    if let Some(s) = sa {
        through(s, run, out);
    }
}

impl<P: Port<Buf = Mbuf>> IpsecPort<P> {
    /// Returns the frames the device took; every frame of `pkts` is taken (protected, passed
    /// or dropped by policy) unless frames protected earlier still wait for the ring, when
    /// none is and `pkts` is left as it was: the caller's backpressure. What is sealed is
    /// fragmented above the SA's path MTU, or above `ipv6_mtu` where the caller gives one
    /// ([`Port::tx_burst_fragmenting`]).
    fn seal_and_send(&self, queue: u16, pkts: &mut Vec<Mbuf>, ipv6_mtu: Option<usize>) -> usize {
        let Some(held) = self.held_for(queue) else {
            return self.inner.tx_burst(queue, pkts);
        };
        let mut held = held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut sent = 0;
        if !held.is_empty() {
            sent = self.inner.tx_burst(queue, &mut held);
            if !held.is_empty() {
                return sent;
            }
        }
        if self.is_active() && !pkts.is_empty() {
            let now = Instant::now();
            let t = self.tables.load();
            let framed: Vec<Mbuf> = std::mem::take(pkts);
            in_runs(
                framed,
                pkts,
                |m| self.outbound(&t, m),
                |sa, run, out| {
                    let from = out.len();
                    // The smaller of the SA's path MTU from ICMP and the caller's estimate
                    // for these packets' peer (RFC 8899's, which only the caller holds).
                    let mtu = match (sa.path_mtu(now), ipv6_mtu) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    sa.encrypt_burst_within(run, &self.pool, now, mtu, out);
                    if let Some(mtu) = mtu {
                        self.fragment_sealed(sa, out, from, mtu);
                    }
                },
            );
        }
        sent += self.inner.tx_burst(queue, pkts);
        held.append(pkts);
        sent
    }

    /// RFC 4301 §7.3 and §8.1, RFC 8200 §4.5: the sealed IPv6 ESP packets of `out[from..]`
    /// larger than their SA's path MTU `mtu` (IP bytes) leave as IPv6 fragments of at most
    /// `mtu`: no IPv6 router fragments them, and the SCTP packet inside cannot be (its later
    /// fragments would carry no ports for the SPD, so an IPsec port sends no source fragments
    /// of SCTP). Only a DATA chunk sent before the path MTU fell makes one (RFC 9260 §6.9).
    /// The peer reassembles before opening (RFC 4303 §3.4.1). A packet whose fragments get no
    /// buffer is lost, and SCTP retransmits it. IPv4 ones are left to the routers: DF clear,
    /// as the SCTP packet had it, and cleared here where it is not (an IPv6 packet in an IPv4
    /// tunnel, whose inner header has no DF to copy, RFC 4301 §8.1), or no router would
    /// fragment it and it would never arrive (RFC 9260 §6.9).
    fn fragment_sealed(&self, sa: &EspSa, out: &mut Vec<Mbuf>, from: usize, mtu: usize) {
        use std::hash::BuildHasher;
        const IP_AT: usize = 14;
        for m in &mut out[from..] {
            let d = m.data();
            if m.frame_len() == m.len()
                && d.get(12..14) == Some(&[0x08, 0x00][..])
                && d.len() > IP_AT + mtu
                && d.get(IP_AT + 6).is_some_and(|f| f & 0x40 != 0)
            {
                let ip = &mut m.data_mut()[IP_AT..];
                ip[6] &= !0x40;
                super::ipsec::fix_ipv4_checksum(ip);
            }
        }
        // RFC 8200 §5: every IPv6 link carries 1280 bytes; no smaller piece is cut.
        let ipv6_mtu = mtu.max(crate::net::IPV6_MIN_MTU);
        let big = |m: &Mbuf| {
            let d = m.data();
            m.frame_len() == m.len()
                && d.get(12..14) == Some(&[0x86, 0xdd][..])
                && d.len() > IP_AT + ipv6_mtu
        };
        if !out[from..].iter().any(big) {
            return;
        }
        let sealed: Vec<Mbuf> = out.drain(from..).collect();
        let mut scratch = vec![0u8; IP_AT + mtu.max(1280)];
        for m in sealed {
            if !big(&m) {
                out.push(m);
                continue;
            }
            let d = m.data();
            let n = self.frag_count.fetch_add(1, Ordering::Relaxed);
            // RFC 7739 §5.3, as `Interface::fragment_ipv6`: a secret offset per pair plus a
            // counter, so no Identification repeats within 2^32 datagrams.
            let offset = self
                .frag_key
                .hash_one((&d[IP_AT + 8..IP_AT + 24], &d[IP_AT + 24..IP_AT + 40]))
                as u32;
            let id = offset.wrapping_add(n as u32);
            let mut pieces: Vec<Mbuf> = Vec::new();
            let mut lost = false;
            crate::net::ipv6_fragments(d, mtu, id, &mut scratch, |f| {
                let mut b = Vec::with_capacity(1);
                if lost || !self.pool.alloc_bulk(&mut b, 1, f.len()) {
                    lost = true;
                    return;
                }
                let mut b = b.pop().expect("one");
                match b.data_mut().get_mut(..f.len()) {
                    Some(room) if room.len() == f.len() => room.copy_from_slice(f),
                    _ => lost = true,
                }
                pieces.push(b);
            });
            if lost {
                // The SA's count of frames it had no mbuf for (`show ipsec`).
                bump(&sa.stats.no_room);
            } else {
                out.append(&mut pieces);
            }
            // Dropping an Mbuf frees it to its pool.
        }
    }
}

impl<P: Port<Buf = Mbuf>> Port for IpsecPort<P> {
    type Buf = Mbuf;

    fn id(&self) -> u16 {
        self.inner.id()
    }
    fn sctp_checksum_offload(&self) -> ChecksumOffload {
        // The device sees only ESP once a policy protects, and policies may come at any time:
        // with IPsec on, SCTP's CRC32c is computed and checked in software.
        if self.is_enabled() {
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
        let t = self.tables.load();
        let received: Vec<Mbuf> = out.drain(start..).collect();
        in_runs(
            received,
            out,
            |m| self.inbound(&t, m),
            |sa, run, out| {
                for clear in sa.decrypt_burst(run, &self.pool, now).into_iter().flatten() {
                    if self.selected(&t, sa.spi(), &clear) {
                        out.push(clear);
                    }
                }
            },
        );
        out.len() - start
    }
    fn tx_device_queue(&self, queue: u16) -> u16 {
        self.inner.tx_device_queue(queue)
    }
    /// RFC 4301 §6.1.2: the ICMP is unauthenticated. It is believed only for one of our
    /// outbound SAs (the SPI), with that SA's outer addresses, quoting a sequence number the
    /// SA sent lately ([`SaConfig::pmtu_quote_check`]), with an MTU that leaves room for the
    /// SA's overhead; the SA then records the PMTU (§8.2.1). Otherwise counted, and ignored.
    fn esp_too_big(&self, e: &EspTooBig) -> bool {
        if !self.is_enabled() {
            return false;
        }
        let now = Instant::now();
        let t = self.tables.load();
        let taken = match t.sa(Direction::Out, e.spi) {
            None => Err(PmtuReject::NoSa),
            Some(sa) => {
                let sent = sa.stats.sequence.load(Ordering::Relaxed);
                let c = sa.config();
                c.pmtu_quote_check(t.spd.policies(), e.local, e.peer, e.seq, sent)
                    .and_then(|()| {
                        e.path_mtu()
                            .filter(|m| c.sctp_mtu(*m, sa.is_ipv6()).is_some())
                            .ok_or(PmtuReject::Mtu)
                    })
                    .map(|mtu| sa.record_path_mtu(mtu, now))
            }
        };
        match taken {
            Ok(lowered) => {
                if lowered {
                    self.pmtu_generation.fetch_add(1, Ordering::Release);
                }
                true
            }
            Err(_) => {
                bump(&self.stats.pmtu_rejected);
                false
            }
        }
    }
    fn opens_esp(&self) -> bool {
        self.is_enabled()
    }
    /// The datagram goes the way a received frame goes (`rx_burst`): policy, the SA its SPI
    /// names, then the inner packet checked against the SA's policy (RFC 4301 §5.2 step 4).
    fn open_esp(&self, frame: Mbuf) -> Option<Mbuf> {
        if !self.is_active() {
            return None;
        }
        let t = self.tables.load();
        match self.inbound(&t, frame) {
            Step::Pass(m) => Some(m),
            Step::Dropped => None,
            Step::Sa(sa, m) => {
                let clear = sa
                    .decrypt_burst(vec![m], &self.pool, Instant::now())
                    .into_iter()
                    .next()?
                    .ok()?;
                self.selected(&t, sa.spi(), &clear).then_some(clear)
            }
        }
    }
    fn esp_pmtu_generation(&self) -> u64 {
        self.pmtu_generation.load(Ordering::Acquire)
    }
    /// RFC 4301 §8.2.1: the PMTU of the SA that the SPD's ordered search (§4.4.1) gives this
    /// association's SCTP, less that SA's overhead and the inner IP header.
    fn esp_sctp_mtu(
        &self,
        local: IpAddr,
        peer: IpAddr,
        local_port: u16,
        peer_port: u16,
    ) -> Option<usize> {
        if !self.is_active() {
            return None;
        }
        let t = self.tables.load();
        let flow = Flow {
            src: local,
            dst: peer,
            proto: crate::ipsec::IPPROTO_SCTP,
            sport: local_port,
            dport: peer_port,
            ports: true,
            fragment: false,
            icmp: None,
        };
        let Action::Protect(spi) = t.spd.action(Direction::Out, &flow) else {
            return None;
        };
        let sa = t.sa(Direction::Out, spi)?;
        sa.config()
            .sctp_mtu(sa.path_mtu(Instant::now())?, local.is_ipv6())
    }
    #[inline]
    fn tx_held(&self, queue: u16) -> usize {
        self.held_for(queue).map_or(0, |h| {
            h.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .len()
        })
    }
    fn discard_held(&self, queue: u16) -> usize {
        // A device queue two callers share (a data core and the control thread,
        // `share_last_pair`) holds the other's sealed frames too, which that caller may still
        // be sending (a shutdown's ABORTs): they stay, and go or are freed with the port.
        let device = self.inner.tx_device_queue(queue);
        let callers = (0..self.inner.nb_tx_queues())
            .filter(|&q| self.inner.tx_device_queue(q) == device)
            .count();
        if callers > 1 {
            return 0;
        }
        self.held_for(queue).map_or(0, |h| {
            let frames =
                std::mem::take(&mut *h.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
            // Dropping an Mbuf frees it to its pool.
            frames.len()
        })
    }

    /// Seals what policy protects and sends (`seal_and_send`).
    fn tx_burst(&self, queue: u16, pkts: &mut Vec<Mbuf>) -> usize {
        self.seal_and_send(queue, pkts, None)
    }
    fn tx_burst_fragmenting(&self, queue: u16, pkts: &mut Vec<Mbuf>, ipv6_mtu: usize) -> usize {
        self.seal_and_send(queue, pkts, Some(ipv6_mtu))
    }
    fn alloc_bulk(&self, out: &mut Vec<Mbuf>, n: usize, len: usize) -> bool {
        self.inner.alloc_bulk(out, n, len)
    }
    fn attach_region(&self, region: &Region, offset: u64, len: usize) -> Option<Mbuf> {
        self.inner.attach_region(region, offset, len)
    }
    fn attach_region_in(
        &self,
        buf: Mbuf,
        region: &Region,
        offset: u64,
        len: usize,
    ) -> Result<Mbuf, Mbuf> {
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
    fn free_bulk(&self, bufs: &mut Vec<Mbuf>) {
        self.inner.free_bulk(bufs)
    }
    fn rx_waiter(&self, queues: &[u16]) -> Option<Arc<dyn crate::port::RxWaiter>> {
        // ESP is opened inside rx_burst from the device's own queues: their interrupts wake.
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
        if self.is_enabled() {
            let c = self.policy_counts();
            v.extend([
                ("ipsec_no_sa".to_owned(), c.no_sa),
                ("ipsec_clear_refused".to_owned(), c.clear_refused),
                ("ipsec_policy_mismatch".to_owned(), c.policy_mismatch),
                ("ipsec_discarded_in".to_owned(), c.discarded_in),
                ("ipsec_discarded_out".to_owned(), c.discarded_out),
                ("ipsec_no_policy_in".to_owned(), c.no_policy_in),
                ("ipsec_no_policy_out".to_owned(), c.no_policy_out),
                ("ipsec_no_sa_out".to_owned(), c.no_sa_out),
                ("ipsec_unparsable".to_owned(), c.unparsable),
                ("ipsec_pmtu_rejected".to_owned(), c.pmtu_rejected),
            ]);
        }
        v
    }
    fn reset_stats(&self) {
        self.inner.reset_stats()
    }
}
