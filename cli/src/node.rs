//! One DDP/SCTP endpoint in the runtime's shape on the EAL's first port, as every DDP job of
//! `ddpdk` brings it up: the port and its pool, SCTP steering (RSS, flow rules or software
//! dispatch), the runtime (`control::runtime`: data cores and the control side), and the data
//! cores running on the EAL's worker lcores, or polled by the caller's own thread where there
//! is no worker lcore for them (one data core then: `--lcores 0@N` runs a whole endpoint on
//! one CPU).

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ddpdk_control::conn::{ConnConfig, Service};
use ddpdk_control::memory::Registered;
use ddpdk_control::runtime::{self, Clock, Control, DataCore, IdlePolicy, RuntimeConfig};
use ddpdk_control::session::PendingLimit;
use ddpdk_dataplane::ipsec::{parse_config, IpsecConfig};
use ddpdk_dataplane::mem::Stag;
use ddpdk_dataplane::net::Interface;
use ddpdk_dataplane::port::dpdk::{
    CryptoDev, DpdkPort, Eal, IpsecPort, LcoreJoin, Mempool, PortConf, PortInfo, SctpSteering,
};
use ddpdk_dataplane::port::faults::Faulty;
use ddpdk_dataplane::port::Port;
use ddpdk_dataplane::sctp::{Config, Endpoint, Instant};

use crate::app::note;
use crate::options::Options;
use crate::telemetry;

/// The port every DDP job runs on: the device behind the fault injector of `--fault-drop`
/// (which passes every frame through unless asked), behind IPsec policy (a pass-through
/// without `--ipsec`). Faults hit the wire, so they see ESP, as a lossy link would.
pub type NodePort = IpsecPort<Faulty<DpdkPort>>;

/// Where the data cores run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// On the EAL's worker lcores only (`--data-cores` of them).
    Workers,
    /// On the worker lcores if the EAL has any, else one data core polled by the caller.
    WorkersOrInline,
}

/// Whether `cores` data cores can run as `placement` places them on an EAL with `workers` worker
/// lcores: `Ok(true)` when the main lcore polls the one data core itself; an error says which
/// `-l` or `--data-cores` fixes it (a usage error: `run` checks it before anything starts).
pub fn lcores_fit(workers: usize, cores: usize, placement: Placement) -> Result<bool, String> {
    let inline = workers == 0 && placement == Placement::WorkersOrInline;
    // The main lcore polls one data core between its control turns, never more.
    if inline && cores > 1 {
        return Err(format!(
            "{cores} data cores but the EAL has only its main lcore; give it {} lcores with -l \
             (the main lcore runs the control side, a worker each data core), or leave \
             --data-cores out and the main lcore polls one",
            cores + 1
        ));
    }
    if !inline && workers < cores {
        return Err(format!(
            "{cores} data cores but the EAL has {workers} worker lcore(s); give it more with -l \
             (the main lcore runs the control side)"
        ));
    }
    Ok(inline)
}

/// The running endpoint, less its control side (the caller polls that).
pub struct Node {
    pub port: Arc<NodePort>,
    pub pool: Arc<Mempool>,
    pub clock: Clock,
    stop: Stop,
    lcores: Vec<LcoreJoin>,
    /// Data cores the caller polls ([`Node::poll_inline`]).
    inline: Vec<DataCore<NodePort>>,
    /// How SCTP is steered to the data cores, in words.
    pub steering: String,
    pub link_up: bool,
    pub cores: usize,
    /// The lcores the data cores run on (empty when polled inline).
    pub core_lcores: Vec<u32>,
    /// The device is closed ([`Node::close_port`]).
    port_closed: bool,
    /// The driver keeps mbufs past its close (af_xdp): the pool is not counted.
    keeps_buffers: bool,
    /// The telemetry commands, answering from before the link wait ([`Node::answer_telemetry`]).
    telemetry: Option<telemetry::Early>,
}

/// The data cores' stop flag, raised when the node goes: a node dropped on an error path
/// without [`Node::halt`] (a key socket that cannot be bound, a core that cannot be launched)
/// must still let its lcores end, or the EAL's drop waits for them forever, every data core
/// spinning.
struct Stop(Arc<AtomicBool>, Arc<[ddpdk_control::runtime::Doorbell]>);

impl Stop {
    /// Raises the flag and wakes every data core that sleeps (a core blocked on RX
    /// interrupts would see it only at its next frame or its 100 ms bound).
    fn raise(&self) {
        self.0.store(true, Ordering::Release);
        for bell in self.1.iter() {
            bell.ring();
        }
    }
}

impl Drop for Stop {
    fn drop(&mut self) {
        self.raise();
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("port", &self.port.name())
            .field("cores", &self.cores)
            .field("inline", &self.inline.len())
            .finish()
    }
}

impl Node {
    /// Brings the endpoint up on the EAL's first port with `opts` (`--ip`, `--data-cores`,
    /// `--mtu`, `--streams`, `--sctp-port`, `--idle`, ...). `pool_name` names its mbuf pool.
    pub fn start(
        eal: &Eal,
        opts: &Options,
        pool_name: &str,
        placement: Placement,
        pending: usize,
    ) -> Result<(Node, Control<NodePort>), String> {
        let id = *eal
            .port_ids()
            .first()
            .ok_or("no port: give the EAL a device (--vdev=net_memif0,... or -a PCI)")?;
        let workers = eal.worker_lcores();
        let cores = opts.endpoint_cores();
        let inline = lcores_fit(workers.len(), cores, placement)?;
        let (driver, device_queues) = PortInfo::query(id)
            .map(|i| (i.driver, i.max_rx_queues.min(i.max_tx_queues)))
            .unwrap_or_default();
        let queues = endpoint_queues(&driver, cores, device_queues)?;
        let conf = PortConf {
            nb_rxq: queues,
            nb_txq: queues,
            nb_rxd: opts.rxd,
            nb_txd: opts.txd,
            promiscuous: true,
            // A device with a queue pair a data core and none to spare still carries the
            // endpoint: the control thread sends through the first data core's TX queue.
            share_last_pair: true,
            rx_interrupts: opts.idle == crate::options::IdleArg::Interrupt,
            inline_ipsec: opts.ipsec_on(),
        };
        // The mbufs this end's queues can hold at once: memif's spare queues carry nothing
        // from this end, and its copying receive takes an mbuf per frame, none ahead (its
        // zero-copy mode would fill every ring, but loses frames of attached chains in DPDK
        // 22.11 and is not used: benches/README.md).
        let carrying = (cores + 1) as u32;
        let need = carrying * (u32::from(opts.rxd) + u32::from(opts.txd)) + 8192;
        let pool = Arc::new(
            Mempool::create(
                pool_name,
                (need + 1).next_power_of_two() - 1,
                256,
                opts.ddp_mbuf_size(),
                0,
            )
            .map_err(|e| format!("{e} (with --no-huge, give the EAL more memory: -m 1024)"))?,
        );
        let device =
            start_port(id, conf, &pool, opts).map_err(|e| match queues_devarg(&driver) {
                Some(devarg) if e.contains("queues requested") => format!(
                "{e}: an endpoint with {cores} data core(s) needs {queues} queue pairs (one for \
                 each data core, one for the control thread), or {cores} (the control thread \
                 then sends through the first data core's); {}",
                devarg.replace("{queues}", &queues.to_string())
            ),
                _ => e,
            })?;
        // Drawn, not the well-known default: a peer that knows the key chooses source ports
        // that all hash to one core (it programs the device's RSS and the software hash).
        // DDPDK_RSS_KEY=default keeps the well-known key: for a test that needs to know which
        // core owns an association (its ports fixed), never for a deployment.
        let rss_key = match std::env::var("DDPDK_RSS_KEY").as_deref() {
            Ok("default") => runtime::RSS_KEY,
            _ => random::<40>()?,
        };
        let (reta_size, flow_rules, mut steering) =
            steer(&device, cores, opts.ip.first().copied(), &rss_key);
        if device.shares_last_pair() {
            steering.push_str(&format!(
                "; the device has {cores} queue pair(s), so the control thread sends through the \
                 first data core's queue"
            ));
        }
        let faulty = Arc::new(Faulty::new(device, opts.faults()));
        let port = Arc::new(ipsec_port(faulty, &pool, opts)?);
        let clock = poll_clock();
        // A memif server's link waits for its client: the commands answer meanwhile.
        let telemetry = telemetry::Early::register(cores, clock);
        let link = port.inner().inner().wait_link_up_unless(
            Duration::from_secs_f64(opts.link_timeout),
            &crate::run::signalled,
        );
        if let Some(n) = port.inner().inner().memif_reconnect_note(link.up) {
            note(opts.json, format_args!("{n}"));
        }
        // DPDK 22.11's af_xdp lends the kernel its fill ring's mbufs (and those of frames not
        // yet completed) and forgets them when it closes (xdp_umem_destroy), so what its pool
        // holds afterwards says nothing of the endpoint's own buffers.
        let keeps_buffers = driver == "net_af_xdp";
        // What ESP adds comes off the path MTU (RFC 5043 §9: segments fit what the SCTP
        // packets have left once protected).
        let link_mtu = usize::from(opts.mtu);
        let esp_headroom = port.headroom();
        let v4 = opts.ip.iter().find_map(|a| match a {
            IpAddr::V4(a) => Some(*a),
            IpAddr::V6(_) => None,
        });
        let v6 = opts.ip.iter().find_map(|a| match a {
            IpAddr::V6(a) => Some(*a),
            IpAddr::V4(_) => None,
        });
        let ep = Endpoint::new(
            Config {
                // The link less the IPv4 header; the listener sets each association's from its
                // peer's family (`Listener::set_link`).
                path_mtu: link_mtu - 20 - esp_headroom,
                ..opts.sctp_config()?
            },
            random::<32>()?,
        )?;
        let (control, mut data) = runtime::build(
            Arc::clone(&port),
            Interface::new(opts.mac.unwrap_or(port.mac()), v4, v6),
            ep,
            ConnConfig {
                service: opts.service.map_or(Service::Ddp, Service::from),
                ..ConnConfig::default()
            },
            PendingLimit::new(pending),
            RuntimeConfig {
                cores,
                reta_size,
                flow_rules,
                rss_key,
                link_mtu,
                esp_headroom,
                associations_per_peer: opts.max_assocs_per_peer as usize,
                random: u64::from_ne_bytes(random::<8>()?),
                ..RuntimeConfig::default()
            },
        )
        .map_err(|e| e.to_string())?;
        // The cores' doorbells wake a core blocked on RX interrupts to see the flag.
        let stop = Stop(Arc::new(AtomicBool::new(false)), control.core_doorbells());
        let mut node = Node {
            port,
            pool,
            clock,
            stop,
            lcores: Vec::new(),
            inline: Vec::new(),
            steering,
            link_up: link.up,
            cores,
            core_lcores: Vec::new(),
            port_closed: false,
            keeps_buffers,
            telemetry: Some(telemetry),
        };
        if inline {
            // This thread reads the events between two turns of the cores (`Job::poll`).
            for core in &mut data {
                core.set_ulp_polls(true);
            }
            // As a core on its own lcore does when it starts (`DataCore::run`).
            if let Some(first) = data.first_mut() {
                first.announce();
            }
            node.inline = data;
            return Ok((node, control));
        }
        let idle = opts.idle_policy();
        for (core, &lcore) in data.into_iter().zip(&workers) {
            let job = launch_core(eal, lcore, core, (clock, &node.stop.0, idle), drop)?;
            node.lcores.push(job);
            node.core_lcores.push(lcore);
        }
        Ok((node, control))
    }

    /// What `--idle interrupt` gives this node's data cores, for its start-up line; empty
    /// without it.
    pub fn idle_note(&self, opts: &Options) -> String {
        if opts.idle != crate::options::IdleArg::Interrupt {
            return String::new();
        }
        if self.is_inline() {
            return "; idle: sleep (RX interrupts only for data cores on worker lcores)".into();
        }
        match self.port.inner().inner().rx_interrupt_queues() {
            (0, _) => "; idle: sleep (the device has no RX interrupts)".into(),
            (own, all) if own == all => "; idle: RX interrupts".into(),
            (own, all) => format!(
                "; idle: RX interrupts on {own} of {all} RX queues (the device shares \
                 interrupt vectors: the cores of the others sleep)"
            ),
        }
    }

    /// The telemetry commands, answered from `source`'s snapshots from now on (they answered
    /// as an endpoint with nothing yet since before the link wait); an error if they could not
    /// be registered, or were handed on already.
    pub fn answer_telemetry(
        &mut self,
        source: telemetry::Source,
    ) -> Result<telemetry::Registered, String> {
        self.telemetry
            .take()
            .ok_or("the telemetry commands were handed on already")?
            .answer_from(source)
    }

    /// One turn at `now` of the data cores this thread polls (none when they run on worker
    /// lcores).
    pub fn poll_inline(&mut self, now: Instant) -> usize {
        self.inline.iter_mut().map(|k| k.poll(now)).sum()
    }

    /// The longest the caller may sleep before polling the inline data cores again
    /// ([`DataCore::sleep_limit`]); `None` when nothing limits it (or no core is inline).
    pub fn inline_sleep_limit(&self, now: Instant) -> Option<Duration> {
        self.inline.iter().filter_map(|k| k.sleep_limit(now)).min()
    }

    /// The data cores this thread polls (none where they have lcores of their own), for
    /// [`runtime::Control::submit_inline`].
    pub fn inline_cores(&mut self) -> &mut [DataCore<NodePort>] {
        &mut self.inline
    }

    /// Whether the data cores are polled by this thread.
    pub fn is_inline(&self) -> bool {
        !self.inline.is_empty()
    }

    /// The reports of the data cores this thread polls.
    pub fn inline_reports(&self) -> Vec<runtime::CoreReport> {
        self.inline.iter().map(DataCore::report).collect()
    }

    /// Stops the data cores and waits for them.
    pub fn halt(&mut self, eal: &Eal) {
        self.stop.raise();
        for job in self.lcores.drain(..) {
            eal.join(job);
        }
    }

    /// After [`Node::halt`]: drains the RX queues, then stops and closes the device, which
    /// gives back every buffer it still holds. Some drivers keep receive buffers posted and
    /// sent frames unreclaimed until they close (virtio_user, net_tap, a memif client in
    /// zero-copy mode: thousands of mbufs), and a sent frame may still reference a region: so
    /// this comes before the control side, and the regions it owns, are dropped.
    pub fn close_port(&mut self) {
        if std::mem::replace(&mut self.port_closed, true) {
            return;
        }
        let mut left = Vec::new();
        // From the device itself: the fault injector may hold frames back and answer 0 while
        // the device still has some.
        let device = self.port.inner().inner();
        for q in 0..device.nb_rx_queues() {
            // Bounded: a peer that keeps sending cannot hold the shutdown.
            for _ in 0..DRAIN_BURSTS {
                if device.rx_burst(q, &mut left, 64) == 0 {
                    break;
                }
                left.clear();
            }
        }
        // Frames the fault injector still holds back go back too.
        self.port.inner().release_held();
        // The NIC's IPsec sessions once the device has stopped sending (frames it still
        // holds would otherwise meet a session gone) and before it closes (a NIC may free its
        // security context then).
        if let Err(e) = device.stop() {
            errln!("ddpdk: warning: stopping {}: {e}", device.name());
        }
        self.port.release_inline();
        if let Err(e) = device.close() {
            errln!("ddpdk: warning: closing {}: {e}", device.name());
        }
    }

    /// After [`Node::close_port`] and once the control side is dropped (buffers still in its
    /// rings go back to the pool with it): the mbufs not back in their pool.
    pub fn close(mut self) -> u32 {
        self.close_port();
        drop(std::mem::take(&mut self.inline));
        let Node {
            port,
            pool,
            keeps_buffers,
            ..
        } = self;
        let in_use = if keeps_buffers {
            errln!(
                "ddpdk: note: {} keeps {} mbuf(s) past its close (DPDK 22.11's af_xdp does not \
                 give back its fill ring): the pool is not counted",
                port.inner().inner().name(),
                pool.in_use_count()
            );
            0
        } else {
            pool.in_use_count()
        };
        // Port before its pool.
        drop(port);
        drop(pool);
        in_use
    }
}

/// How to give a virtual device that opens one queue pair unless told otherwise the queue
/// pairs an endpoint needs (`{queues}` stands for their number), by driver.
fn queues_devarg(driver: &str) -> Option<&'static str> {
    Some(match driver {
        "net_af_packet" => {
            "give the net_af_packet --vdev qpairs={queues}, or no qpairs and ddpdk sets it"
        }
        "net_vhost" => "give the net_vhost --vdev queues={queues}, and its virtio peer as many",
        "net_virtio_user" => {
            "give the net_virtio_user --vdev queues={queues}, and its vhost peer as many"
        }
        "net_pcap" => {
            "give the net_pcap --vdev {queues} rx_pcap= and {queues} tx_pcap= (or rx_iface= \
             and tx_iface=), one a queue"
        }
        "net_af_xdp" => {
            "give the net_af_xdp --vdev queue_count={queues}; the interface needs as many \
             combined channels (ethtool -L IFACE combined {queues})"
        }
        _ => return None,
    })
}

/// The text of `--ipsec-config PATH`, read and checked (it parses).
pub fn read_ipsec_config(path: &std::path::Path) -> Result<String, String> {
    let fail = |e: &dyn std::fmt::Display| format!("--ipsec-config {}: {e}", path.display());
    let bytes = std::fs::read(path).map_err(|e| fail(&e))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = 1 + good.iter().filter(|&&b| b == b'\n').count();
        fail(&format_args!(
            "line {line}: not UTF-8 (a byte that is no character, even in a comment)"
        ))
    })?;
    parse_config(&text).map_err(|e| format!("--ipsec-config {}: {e}", path.display()))?;
    Ok(text)
}

/// The port behind IPsec policy: with `--ipsec` (or what implies it) on the crypto device,
/// with `--ipsec-config`'s SAs and policies; a pass-through otherwise.
fn ipsec_port(
    port: Arc<Faulty<DpdkPort>>,
    pool: &Arc<Mempool>,
    opts: &Options,
) -> Result<NodePort, String> {
    if !opts.ipsec_on() {
        return Ok(IpsecPort::passthrough(port, Arc::clone(pool)));
    }
    let config = match &opts.ipsec_config {
        Some(path) => {
            let text = match &opts.ipsec_config_text {
                Some(t) => t.clone(),
                None => read_ipsec_config(path)?,
            };
            parse_config(&text).map_err(|e| format!("--ipsec-config {}: {e}", path.display()))?
        }
        None => IpsecConfig::default(),
    };
    let mut config = config;
    if let Some(d) = opts.ipsec_default {
        config.spd.set_unmatched(d.into())?;
    }
    let dev = CryptoDev::open(&opts.ipsec_crypto_dev)
        .map_err(|e| format!("--ipsec-crypto-dev {}: {e}", opts.ipsec_crypto_dev))?;
    IpsecPort::new(port, Arc::clone(pool), &config, &dev)
        .map(|p| p.with_local_addresses(&opts.ip))
        .map_err(|e| format!("--ipsec: {e}"))
}

/// Bursts drained from each RX queue at shutdown, at most.
const DRAIN_BURSTS: usize = 256;

/// Queue pairs of a DDP endpoint on a `net_memif` port, whatever its data cores.
///
/// A memif's rings are point to point: what one end sends on its queue i arrives on the
/// other's queue i, and the client's count of rings is the connection's. DPDK 22.11's memif
/// gives a server queue beyond that count no ring of its own: it sends into, and receives
/// from, the client's first ring (a second producer and consumer on one shared ring), and a
/// client with more rings than the server's queues is refused ("Invalid ring index": link
/// down). Two endpoints with different `--data-cores` (each one queue pair a data core and
/// one for the control thread) would meet one or the other. With the same count on every
/// endpoint they cannot, whatever each end's data cores: each data core sends on its own
/// queue and the control thread on the one after them, and the data cores poll every queue
/// between them (runtime.rs), so whatever the peer sends on any of them is read.
pub const MEMIF_QUEUE_PAIRS: u16 = 4;

/// The queue pairs an endpoint with `cores` data cores opens on a port of `driver` that
/// offers `device_queues`: one a data core and one for the control thread; on a memif
/// [`MEMIF_QUEUE_PAIRS`]; on vhost-user and virtio-user every pair the device has (`queues=`),
/// if more. A vhost-user pair's queue *i* is the virtio end's queue *i*, and only the queues
/// the virtio end opens carry anything: ends with different data cores each opening what they
/// need lost what one end sent on a queue the other never opened (the association never came
/// up). With both ends opening every pair `queues=` gives, they agree whatever their cores.
fn endpoint_queues(driver: &str, cores: usize, device_queues: u16) -> Result<u16, String> {
    let needed = u16::try_from(cores + 1).map_err(|_| format!("{cores} data cores"))?;
    if matches!(driver, "net_vhost" | "net_virtio_user") {
        return Ok(needed.max(device_queues));
    }
    if driver != "net_memif" {
        return Ok(needed);
    }
    if needed > MEMIF_QUEUE_PAIRS {
        return Err(format!(
            "{cores} data cores on a net_memif port: at most {} (a DDP endpoint opens \
             {MEMIF_QUEUE_PAIRS} queue pairs on every memif, one a data core and one for the \
             control thread, so that both ends of a memif have the same rings whatever their \
             --data-cores)",
            MEMIF_QUEUE_PAIRS - 1
        ));
    }
    Ok(MEMIF_QUEUE_PAIRS)
}

/// Where the device can hash SCTP it steers each association to its owning core itself (same
/// key and table as the software hash); where it matches SCTP in rte_flow rules it gets one
/// rule per association; otherwise the cores hand packets over. Returns the redirection
/// table size, whether flow rules steer, and what steers, in words.
fn steer(
    port: &DpdkPort,
    cores: usize,
    local: Option<IpAddr>,
    key: &[u8; 40],
) -> (usize, bool, String) {
    // A device that refuses the programming still works: the cores dispatch in software.
    let rss = port
        .program_sctp_rss(key, cores as u16)
        .unwrap_or(SctpSteering::None("the device refused the RSS programming"));
    let flow_rules = match (&rss, local) {
        (SctpSteering::None(_), Some(local)) => port.enable_sctp_flow_rules(local, cores as u16),
        (SctpSteering::None(_), None) => Err("no local address".to_string()),
        _ => Err("RSS steers SCTP".to_string()),
    };
    match rss {
        SctpSteering::None(_) if flow_rules.is_ok() => (
            runtime::RETA_SIZE,
            true,
            "rte_flow rules: one per association, to its owning core's queue".to_string(),
        ),
        SctpSteering::Rss { hash, reta_size } => (
            usize::from(reta_size),
            false,
            format!(
                "RSS on the SCTP 5-tuple (hash types {hash:#x}, {reta_size}-entry table over \
                 {cores} queue(s))"
            ),
        ),
        SctpSteering::None(why) => (
            runtime::RETA_SIZE,
            false,
            format!(
                "software dispatch between data cores (no SCTP RSS: {why}; no rte_flow: {})",
                flow_rules.as_ref().err().map_or("", String::as_str)
            ),
        ),
    }
}

/// Runs data core `core` on worker `lcore` with `idle` until `stop`, then hands it to `done`
/// (its counters, its buffers).
pub(crate) fn launch_core<P>(
    eal: &Eal,
    lcore: u32,
    mut core: DataCore<P>,
    (clock, stop, idle): (Clock, &Arc<AtomicBool>, IdlePolicy),
    done: impl FnOnce(DataCore<P>) + Send + 'static,
) -> Result<LcoreJoin, String>
where
    P: Port,
    DataCore<P>: Send + 'static,
{
    let stop = Arc::clone(stop);
    let k = core.index();
    eal.launch(lcore, move || {
        if let IdlePolicy::Sleep { .. } = idle {
            // Sleeps of a few µs must not end 50 µs late (the default slack).
            if let Err(e) = Eal::set_timer_slack(Duration::from_micros(1)) {
                errln!("ddpdk: data core {k}: {e}; idle sleeps end late");
            }
        }
        core.run(clock, &stop, idle);
        done(core);
        0
    })
    .map_err(|e| format!("data core {k} on lcore {lcore}: {e}"))
}

/// The poll loops' clock: the CPU's time-stamp counter where the kernel trusts it as its own
/// clock source (`port::dpdk::tsc`), calibrated over 10 ms and watched once a second (the
/// kernel may give the TSC up later: `ddpdk_control::clock`); the monotonic clock elsewhere.
pub fn poll_clock() -> Clock {
    #[cfg(target_arch = "x86_64")]
    if ddpdk_dataplane::port::dpdk::tsc::trusted() {
        if let Some(c) = Clock::counting(
            ddpdk_dataplane::port::dpdk::tsc::read,
            Duration::from_millis(10),
        ) {
            c.watch(ddpdk_dataplane::port::dpdk::tsc::trusted, |why| {
                errln!("ddpdk: {why}; the poll loops' clock follows the monotonic clock from now")
            });
            return c;
        }
    }
    Clock::new()
}

/// Configures port `id` of a DDP endpoint with `conf` and `pool`, sets its MTU to `--mtu`
/// (a device without an MTU setting, such as net_memif, is noted and used: it carries what fits
/// its buffers, and the mbufs are sized for the frame), and starts it.
pub(crate) fn start_port(
    id: u16,
    conf: PortConf,
    pool: &Arc<Mempool>,
    opts: &Options,
) -> Result<Arc<DpdkPort>, String> {
    let port =
        Arc::new(DpdkPort::configure(id, conf, Arc::clone(pool)).map_err(|e| e.to_string())?);
    set_mtu(&port, opts)?;
    port.start().map_err(|e| {
        // A device may take RX interrupts at configuration and fail to set them up at the
        // start (ixgbe with more than 15 queues, a vector allocation refused).
        if port.conf().rx_interrupts {
            format!("{e} (with --idle interrupt: the device may not have the RX interrupts asked for; try --idle sleep)")
        } else {
            e.to_string()
        }
    })?;
    Ok(port)
}

/// Sets a configured, stopped port's MTU to `--mtu` (a DDP endpoint's and `fwd`'s ports). A
/// device without an MTU setting (net_memif, net_ring) is noted and used as it is: memif's
/// and af_packet's buffers were sized for the frames before the EAL started (`fit_devices`).
pub(crate) fn set_mtu(port: &DpdkPort, opts: &Options) -> Result<(), String> {
    if opts.mtu != 1500 && port.name().starts_with("net_af_packet") {
        // DPDK 22.11's af_packet declares 1518-byte frames (ethdev refuses a larger MTU) and
        // sets a smaller one on the kernel interface itself. Its slots were sized for the
        // frames and the interface's MTU checked before the EAL started (af_packet.rs); the
        // interface is the operator's and is left as it is.
        note(
            opts.json,
            format_args!(
                "{}: the interface's own MTU applies; frames up to {} bytes fit the ring's slots",
                port.name(),
                u32::from(opts.mtu) + 14
            ),
        );
    } else if opts.mtu != 1500 {
        match port.set_mtu(opts.mtu) {
            Ok(()) => {}
            Err(e) if e.errno == 95 => note(
                opts.json,
                format_args!(
                    "{}: no MTU setting; frames up to {} bytes",
                    port.name(),
                    opts.mtu
                ),
            ),
            Err(e) => return Err(format!("{}: --mtu {}: {e}", port.name(), opts.mtu)),
        }
    }
    Ok(())
}

/// Random bytes from the kernel: the cookie secrets and the STag tables' starting points must
/// not be guessable (RFC 9260 §5.1.3, RFC 5041 §8.3).
pub(crate) fn random<const N: usize>() -> Result<[u8; N], String> {
    use std::io::Read;
    let mut b = [0u8; N];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| format!("/dev/urandom: {e}"))?;
    Ok(b)
}

/// The process exit status of a DDP mode's result, with its last words; with `--json` a
/// failure's `counters` (what the run saw up to it) go into its `run_error` object.
pub(crate) fn exit_status(
    r: Result<(), String>,
    json: bool,
    counters: Option<serde_json::Value>,
) -> i32 {
    match r {
        Ok(()) => {
            note(json, format_args!("Bye..."));
            0
        }
        Err(e) => {
            errln!("ddpdk: {e}");
            // With --json a run that failed says so on stdout too, where its report would
            // have been (found by an outside-in test: a perf client cut short by a link down,
            // a restarted peer or an ICMP left a program reading its JSON nothing at all).
            if json {
                let mut error = serde_json::json!({"error": e});
                if let Some(c) = counters {
                    error["counters"] = c;
                }
                outln!("{}", serde_json::json!({ "run_error": error }));
            }
            1
        }
    }
}

/// Why an association to `peer` never came up, from the port's link and what the cores
/// counted (`frames_in`, and packets dropped for want of a link-layer address): a link down,
/// no frame at all, or ARP or Neighbor Discovery unanswered (RFC 1122 §2.3.2.1: the INITs were
/// dropped unresolved). None if none of these applies.
pub(crate) fn unreached(
    frames_in: u64,
    unresolved: u64,
    peer: &str,
    link_up: bool,
) -> Option<String> {
    if !link_up {
        Some("the port's link is down: is the peer's end of it up?".into())
    } else if frames_in == 0 {
        Some(format!(
            "no frame arrived on the port, not even an answer to ARP or Neighbor Discovery for \
             {peer}: is the link up, and a server at that address on it?"
        ))
    } else if unresolved > 0 {
        Some(format!(
            "{peer} never answered ARP or Neighbor Discovery ({unresolved} packet(s) to it \
             dropped unresolved by then), though other frames arrived: is a server at that \
             address?"
        ))
    } else {
        None
    }
}

/// What an operator reads when the data core refuses an op: the op in the shell's words, not
/// the library's name for it (`post_rdma`), which stays the `op` field of the JSON event.
pub(crate) fn refusal(op: &str, error: impl std::fmt::Display) -> String {
    let words = match op {
        "initiate" | "initiate_rdmap" => "session Initiate",
        "accept" | "accept_rdmap" => "session Accept",
        "reject" => "session Reject",
        "terminate" => "session Terminate",
        "post_recv" => "receive buffer",
        "post_send" => "send",
        "post_rdma" => "RDMA operation",
        "shutdown" => "SHUTDOWN",
        "abort" => "ABORT",
        other => other,
    };
    format!("{words} refused: {error}")
}

/// An Accept's Private Data offering a region (the convention of the shell's and `perf`'s
/// servers): its STag, base Tagged Offset and length, 20 bytes, big endian.
const OFFER_LEN: usize = 20;

/// The Private Data of an Accept that offers `reg`.
pub(crate) fn offer_bytes(reg: &Registered) -> Vec<u8> {
    let mut offer = Vec::with_capacity(OFFER_LEN);
    offer.extend_from_slice(&reg.stag.0.to_be_bytes());
    offer.extend_from_slice(&reg.to_base.to_be_bytes());
    offer.extend_from_slice(&reg.len.to_be_bytes());
    offer
}

/// The STag, base Tagged Offset and length an Accept's Private Data offers (20 bytes, big
/// endian: the convention of the shell's and `perf`'s servers).
pub(crate) fn parse_offer(b: &[u8]) -> Option<(Stag, u64, u64)> {
    if b.len() != OFFER_LEN {
        return None;
    }
    let u64_at = |k: usize| {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[k..k + 8]);
        u64::from_be_bytes(x)
    };
    Some((
        Stag(u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
        u64_at(4),
        u64_at(12),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A byte that is no UTF-8 character is refused with its line, even in a comment (it was
    /// refused with no line: found by an outside-in test).
    #[test]
    fn a_configuration_byte_that_is_not_utf8_is_named_by_its_line() {
        let path = std::env::temp_dir().join(format!("ddpdk-cfg-utf8-{}", std::process::id()));
        std::fs::write(&path, b"# one\nsp ipv4 in esp discard\n# caf\xe9\n").expect("write");
        let e = read_ipsec_config(&path).expect_err("not UTF-8");
        let _ = std::fs::remove_file(&path);
        assert!(e.contains("line 3: not UTF-8"), "{e}");
    }

    #[test]
    fn every_memif_endpoint_opens_the_same_queue_pairs_whatever_its_data_cores() {
        for cores in 1..usize::from(MEMIF_QUEUE_PAIRS) {
            assert_eq!(
                endpoint_queues("net_memif", cores, 8),
                Ok(MEMIF_QUEUE_PAIRS)
            );
        }
        let e = endpoint_queues("net_memif", usize::from(MEMIF_QUEUE_PAIRS), 8)
            .expect_err("more data cores than a memif has queue pairs for");
        assert!(e.contains("at most 3"), "{e}");
        // Other devices: one a data core and one for the control thread.
        assert_eq!(endpoint_queues("net_af_packet", 1, 16), Ok(2));
        assert_eq!(endpoint_queues("net_ice", 7, 64), Ok(8));
    }

    #[test]
    fn vhost_user_endpoints_open_every_pair_their_queues_give() {
        for driver in ["net_vhost", "net_virtio_user"] {
            // queues=3: one data core or two, three pairs either way.
            assert_eq!(endpoint_queues(driver, 1, 3), Ok(3));
            assert_eq!(endpoint_queues(driver, 2, 3), Ok(3));
            // Fewer than a data core each and one for control: what the cores need (the
            // port shares the last pair, or refuses).
            assert_eq!(endpoint_queues(driver, 2, 1), Ok(3));
        }
    }
}
