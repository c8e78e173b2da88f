//! The running application: EAL, ports, mempools, the forwarding table and the data lcores.
//! Everything here runs on the main lcore; data lcores only see their `LcoreLoop`.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use ddpdk_dataplane::config::{FwdTable, PortQueues, Topology};
use ddpdk_dataplane::fwd::{
    txonly_frame, FwdMode, LcoreCounters, LcoreLoop, Stream, StreamCounters, StreamSnapshot, TxSpan,
};
use ddpdk_dataplane::port::dpdk::{DpdkPort, Eal, LcoreJoin, Mempool, PortConf, PortInfo};
use ddpdk_dataplane::port::region::Region;
use ddpdk_dataplane::port::{Port, PortStats};
use hdrhistogram::Histogram;
use serde_json::json;

use crate::options::Options;
use crate::shell::{
    ClearCmd, ClearPortCmd, Command, PortShow, PortTarget, SetCmd, ShowCmd, ShowConfigCmd,
};
use crate::stats::{fwd_port_text, mac_text, port_stats_text, Rates};

/// Smallest default pool: with fewer mbufs, a PMD that allocates per packet (memif) runs short of
/// cached buffers under load; 2^14 - 1 is testpmd's order of magnitude at 35 MiB.
const MIN_POOL: u32 = 16_383;
/// Mbufs each lcore may keep in its mempool cache.
const MEMPOOL_CACHE: u32 = 256;
/// Frames a net_ring port can hold (its rte_ring), counted in the pool size.
const RING_PAIR_SIZE: u32 = 1024;

/// Longest wait for a memif peer's link to go down after closing its other end.
const MEMIF_SETTLE: Duration = Duration::from_secs(1);

/// How long a memif port's peer is given to take the frames left in the ring before the
/// port closes (`App::shutdown`).
const MEMIF_RING_GRACE: Duration = Duration::from_millis(20);

/// Frames drained from one RX queue at shutdown, beyond its descriptors: a net_ring holds up to
/// its ring size; anything more is a peer still sending.
const DRAIN_LIMIT_PER_QUEUE: usize = RING_PAIR_SIZE as usize * 4;

/// What the caller should do after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Quit,
}

/// Prints an informational line: on stdout, or on stderr in JSON mode so that stdout carries
/// JSON lines only.
pub fn note(json: bool, msg: std::fmt::Arguments<'_>) {
    if json {
        errln!("{msg}");
    } else {
        outln!("{msg}");
    }
}

struct Running {
    /// ping's round trips (ns).
    rtt: Option<Arc<Mutex<Histogram<u64>>>>,
    mode: FwdMode,
    stop: Arc<AtomicBool>,
    joins: Vec<LcoreJoin>,
    lcores: Vec<(u32, Arc<CachePadded<LcoreCounters>>)>,
    streams: Vec<(
        ddpdk_dataplane::config::FwdStream,
        Arc<CachePadded<StreamCounters>>,
    )>,
    start_stats: BTreeMap<u16, PortStats>,
    started: Instant,
    /// `--txsplit`'s region, kept past the stop ([`App::spent_spans`]).
    tx_span: Option<TxSpan>,
}

/// The whole application. Fields drop in order: ports, then pools, then the EAL.
pub struct App {
    ports: Vec<Arc<DpdkPort>>,
    /// `--txsplit` regions of runs stopped: frames still queued in the devices reference them,
    /// so they go after the drain (`shutdown`) or after the ports (dropped in field order);
    /// dropped with the lcores' last reference, at the stop, each said "region dropped while
    /// 2046 mbuf(s) reference it; not freed" (an outside-in review).
    spent_spans: Vec<TxSpan>,
    pools: Vec<Arc<Mempool>>,
    topo: Topology,
    table: FwdTable,
    mode: FwdMode,
    burst: usize,
    txpkts: usize,
    /// `--txsplit`: txonly frames as chains, their tail attached from a region.
    txsplit: Option<usize>,
    tx_retries: u32,
    ping_frames: usize,
    echo_trim: Option<usize>,
    tx_first: bool,
    json: bool,
    running: Option<Running>,
    last_show: BTreeMap<u16, (Instant, PortStats)>,
    eal: Eal,
}

impl Drop for App {
    fn drop(&mut self) {
        // On any path that skips shutdown(), data lcores must not outlive the ports and the EAL.
        if let Some(r) = self.running.take() {
            r.stop.store(true, Ordering::Release);
            for j in r.joins {
                self.eal.join(j);
            }
        }
    }
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("ports", &self.ports.len())
            .field("mode", &self.mode)
            .finish()
    }
}

/// Nanoseconds as microseconds.
fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// The region rxplace copies payload into (a DDP server's default region size).
const RXPLACE_REGION: usize = 64 << 20;

/// The region `--txsplit` attaches its spans from: the size of the goodput bench's writes from
/// a region, so the device reads the spans from where a DDP sender's come from.
const TXSPLIT_REGION: usize = 1 << 20;

/// Mbufs needed by one port: every RX and TX descriptor full, plus what sits in a net_ring.
fn mbufs_for_port(conf: &PortConf, driver: &str) -> u32 {
    let ring = if driver.contains("ring") {
        RING_PAIR_SIZE * u32::from(conf.nb_txq)
    } else {
        0
    };
    u32::from(conf.nb_rxq) * u32::from(conf.nb_rxd)
        + u32::from(conf.nb_txq) * u32::from(conf.nb_txd)
        + ring
}

/// What the command loop drives: the forwarding engines ([`App`]) or the DDP endpoint
/// ([`crate::ddp_app::DdpApp`]).
pub trait Shell {
    /// Executes one command, printing its output.
    fn execute(&mut self, cmd: &Command) -> Result<Flow, String>;
    fn is_running(&self) -> bool;
    fn start(&mut self, tx_first: bool) -> Result<(), String>;
    /// What `--stats-period` prints.
    fn periodic_stats(&mut self);
    /// Said when running without a shell until a signal.
    fn running_note(&self) -> &'static str;
    /// Called every turn of the command loop (a few times a second), for work of its own.
    fn tick(&mut self) {}
    /// When `--run-for` (`secs`) ends the run: a command still waiting then gives up.
    fn set_deadline(&mut self, _deadline: std::time::Instant, _secs: f64) {}
}

impl Shell for App {
    fn execute(&mut self, cmd: &Command) -> Result<Flow, String> {
        App::execute(self, cmd)
    }
    fn is_running(&self) -> bool {
        App::is_running(self)
    }
    fn start(&mut self, tx_first: bool) -> Result<(), String> {
        App::start(self, tx_first)
    }
    fn periodic_stats(&mut self) {
        App::periodic_stats(self)
    }
    fn running_note(&self) -> &'static str {
        "Forwarding; press Ctrl-C (SIGINT) or send SIGTERM to stop."
    }
}

impl App {
    /// Sets up ports, pools and the forwarding table from the options. Nothing starts yet.
    pub fn new(eal: Eal, opts: &Options) -> Result<App, String> {
        if opts.ring_pair {
            eal.create_ring_pair("ddpdk_ring", RING_PAIR_SIZE, opts.rxq.max(opts.txq))
                .map_err(|e| format!("cannot create the ring pair: {e}"))?;
        }
        let ids = eal.port_ids();
        if ids.is_empty() {
            return Err(
                "no ports: give the EAL a device (-a PCI, --vdev=net_...) or pass --ring-pair"
                    .into(),
            );
        }
        let infos: Vec<PortInfo> = ids
            .iter()
            .map(|&p| PortInfo::query(p).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        let conf = PortConf {
            nb_rxq: opts.rxq,
            nb_txq: opts.txq,
            nb_rxd: opts.rxd,
            nb_txd: opts.txd,
            promiscuous: true,
            ..PortConf::default()
        };
        let burst = u32::from(opts.burst);
        let nb_lcores = eal.worker_lcores().len() as u32 + 1;
        // One pool per NUMA socket, sized as testpmd does: descriptors of the ports on that socket
        // plus per-lcore caches and in-flight bursts.
        let mut need: BTreeMap<i32, u32> = BTreeMap::new();
        for i in &infos {
            *need.entry(i.socket.max(0)).or_default() += mbufs_for_port(&conf, &i.driver);
        }
        let mut pools: BTreeMap<i32, Arc<Mempool>> = BTreeMap::new();
        for (&socket, &n) in &need {
            let n = opts.total_num_mbufs.unwrap_or_else(|| {
                let total = n + nb_lcores * (MEMPOOL_CACHE + 2 * burst);
                // Mempools are most memory-efficient at 2^k - 1 elements.
                ((total + 1).next_power_of_two() - 1).max(MIN_POOL)
            });
            let pool = Mempool::create(
                &format!("mbuf_pool_socket_{socket}"),
                n,
                MEMPOOL_CACHE,
                opts.mbuf_size,
                socket,
            )
            .map_err(|e| {
                format!(
                    "{e} ({})",
                    pool_memory_hint(n, opts.mbuf_size, machine_bytes())
                )
            })?;
            note(
                opts.json,
                format_args!(
                    "ddpdk: created mbuf pool <{}>: n={n}, size={}, socket={socket}",
                    pool.name(),
                    opts.mbuf_size
                ),
            );
            pools.insert(socket, Arc::new(pool));
        }
        let mut ports = Vec::new();
        for i in &infos {
            let pool = Arc::clone(&pools[&i.socket.max(0)]);
            note(
                opts.json,
                format_args!(
                    "Configuring Port {} ({}, socket {})",
                    i.port_id, i.name, i.socket
                ),
            );
            let p = DpdkPort::configure(i.port_id, conf, pool).map_err(|e| e.to_string())?;
            ports.push(Arc::new(p));
        }
        let mut lcores = eal.worker_lcores();
        lcores.push(eal.main_lcore());
        let topo = Topology {
            ports: ports
                .iter()
                .map(|p| {
                    (
                        p.id(),
                        PortQueues {
                            nb_rxq: p.nb_rx_queues(),
                            nb_txq: p.nb_tx_queues(),
                        },
                    )
                })
                .collect(),
            lcores,
            main_lcore: eal.main_lcore(),
        };
        let table = FwdTable::testpmd_default(&topo, usize::from(opts.nb_cores))
            .map_err(|e| e.to_string())?;
        if usize::from(opts.nb_cores) > topo.worker_lcores().len() {
            return Err(format!(
                "--nb-cores {} but the EAL has {} worker lcore(s); give it more with -l",
                opts.nb_cores,
                topo.worker_lcores().len()
            ));
        }
        let app = App {
            ports,
            spent_spans: Vec::new(),
            pools: pools.into_values().collect(),
            topo,
            table,
            mode: opts.forward_mode.into(),
            burst: usize::from(opts.burst),
            txpkts: usize::from(opts.txpkts),
            txsplit: opts.txsplit.map(usize::from),
            tx_retries: opts.tx_retry,
            ping_frames: usize::from(opts.ping_frames),
            echo_trim: opts.echo_trim.map(usize::from),
            tx_first: opts.tx_first,
            json: opts.json,
            running: None,
            last_show: BTreeMap::new(),
            eal,
        };
        for p in &app.ports {
            // testpmd's `port config mtu`: a NIC takes frames above 1500 bytes only so.
            crate::node::set_mtu(p, opts)?;
            p.start().map_err(|e| e.to_string())?;
        }
        let timeout = Duration::from_secs_f64(opts.link_timeout);
        for p in &app.ports {
            let link = p.wait_link_up_unless(timeout, &crate::run::signalled);
            note(
                opts.json,
                format_args!("Port {}: {} link {}", p.id(), mac_text(&p.mac()), link),
            );
            if let Some(n) = p.memif_reconnect_note(link.up) {
                note(opts.json, format_args!("{n}"));
            }
        }
        Ok(app)
    }

    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    fn port(&self, id: u16) -> Result<&Arc<DpdkPort>, String> {
        self.ports.iter().find(|p| p.id() == id).ok_or_else(|| {
            let ids: Vec<String> = self.ports.iter().map(|p| p.id().to_string()).collect();
            format!("port {id} does not exist (ports: {})", ids.join(", "))
        })
    }

    fn targets(&self, t: PortTarget) -> Result<Vec<Arc<DpdkPort>>, String> {
        match t {
            PortTarget::All => Ok(self.ports.clone()),
            PortTarget::Port(id) => Ok(vec![Arc::clone(self.port(id)?)]),
        }
    }

    /// Executes one command, printing its output.
    pub fn execute(&mut self, cmd: &Command) -> Result<Flow, String> {
        match cmd {
            Command::Start { tx_first } => self.start(tx_first.is_some())?,
            Command::Stop => self.stop()?,
            Command::Quit => return Ok(Flow::Quit),
            Command::Help { section } => note(
                self.json,
                format_args!("{}", crate::shell::help(*section).trim_end()),
            ),
            Command::Set {
                what: SetCmd::Fwd { mode },
            } => {
                if self.running.is_some() {
                    return Err("stop forwarding first ('stop')".into());
                }
                self.mode = (*mode).into();
                note(
                    self.json,
                    format_args!("Set {} packet forwarding mode", self.mode),
                );
            }
            Command::Show {
                what:
                    ShowCmd::Config {
                        what: ShowConfigCmd::Fwd,
                    },
            } => self.show_config_fwd(),
            Command::Show {
                what: ShowCmd::Port { what, target },
            } => {
                for p in self.targets(*target)? {
                    match what {
                        PortShow::Info => show_port_info(self.json, &p),
                        PortShow::Stats => self.show_port_stats(&p),
                        PortShow::Xstats => show_port_xstats(self.json, &p),
                    }
                }
            }
            Command::Clear {
                what:
                    ClearCmd::Port {
                        what: ClearPortCmd::Stats { target },
                    },
            } => {
                for p in self.targets(*target)? {
                    p.reset_stats();
                    self.last_show.remove(&p.id());
                    // Forwarding statistics at stop count from the clear on.
                    if let Some(r) = self.running.as_mut() {
                        r.start_stats.insert(p.id(), PortStats::default());
                    }
                    note(
                        self.json,
                        format_args!("  NIC statistics for port {} cleared", p.id()),
                    );
                }
            }
            // testpmd's `show fwd stats all`: the forwarding statistics so far.
            Command::Show {
                what: ShowCmd::Fwd { .. },
            } => match self.running.as_ref() {
                Some(r) => self.forward_stats(r),
                None => return Err("packet forwarding not started".into()),
            },
            Command::Show {
                what:
                    ShowCmd::Assoc
                    | ShowCmd::Session
                    | ShowCmd::Mr
                    | ShowCmd::Ipsec
                    | ShowCmd::Config {
                        what: ShowConfigCmd::Sctp,
                    },
            }
            | Command::Set {
                what: SetCmd::Sctp { .. },
            }
            | Command::Assoc { .. }
            | Command::Session { .. }
            | Command::Mr { .. }
            | Command::Send { .. }
            | Command::Recv { .. }
            | Command::Rdma { .. }
            | Command::Ipsec { .. }
            | Command::Wait { .. } => {
                return Err(
                    "not a DDP endpoint: start ddpdk with --ip ADDR for the DDP commands".into(),
                )
            }
        }
        let _ = std::io::stdout().flush();
        Ok(Flow::Continue)
    }

    /// Launches the forwarding engine on every lcore of the table. `--tx-first` applies to the
    /// first start only, as in testpmd; later ones send a first burst when asked (`start tx_first`).
    pub fn start(&mut self, tx_first: bool) -> Result<(), String> {
        if self.running.is_some() {
            return Err("packet forwarding already started".into());
        }
        let tx_first = tx_first || std::mem::take(&mut self.tx_first);
        self.table.validate(&self.topo).map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let template_src = self.ports.first().map(|p| p.mac()).unwrap_or_default();
        let template = txonly_frame(template_src, [0x02, 0, 0, 0, 0, 0x02], self.txpkts);
        let start_stats: BTreeMap<u16, PortStats> =
            self.ports.iter().map(|p| (p.id(), p.stats())).collect();
        let now = Instant::now();
        for (&id, s) in &start_stats {
            self.last_show.entry(id).or_insert((now, *s));
        }
        // rxplace copies into one region in DPDK memory (hugepages where the EAL has them),
        // as large as a DDP server's, so the copies are not cache-resident.
        let region = match self.mode {
            FwdMode::RxPlace => Some(Arc::new(
                Region::from_dpdk(&self.eal, RXPLACE_REGION, None).map_err(|e| e.to_string())?,
            )),
            _ => None,
        };
        // --txsplit: txonly's spans come from one region in DPDK memory, filled once.
        let tx_span = match self.txsplit {
            Some(at) if matches!(self.mode, FwdMode::TxOnly) || tx_first => {
                let r = Region::from_dpdk(&self.eal, TXSPLIT_REGION, None)
                    .map_err(|e| e.to_string())?;
                let fill: Vec<u8> = (0..TXSPLIT_REGION)
                    .map(|i| (i as u8).wrapping_mul(31))
                    .collect();
                r.place(0, &fill).map_err(|e| e.to_string())?;
                Some(TxSpan::new(at, Arc::new(r)))
            }
            _ => None,
        };
        // ping's round trips, in nanoseconds, from every lcore.
        let rtt = (self.mode == FwdMode::Ping)
            .then(|| Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).ok())
            .flatten()
            .map(|h| Arc::new(Mutex::new(h)));
        let mut joins = Vec::new();
        let mut counters = Vec::new();
        let mut stream_counters = Vec::new();
        for (lcore, specs) in self.table.by_lcore() {
            let streams = specs
                .iter()
                .map(|s| -> Result<Stream<DpdkPort>, String> {
                    Ok(Stream {
                        spec: *s,
                        rx: Arc::clone(self.port(s.rx_port)?),
                        tx: Arc::clone(self.port(s.tx_port)?),
                        counters: Arc::default(),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            stream_counters.extend(streams.iter().map(|s| (s.spec, Arc::clone(&s.counters))));
            let c: Arc<CachePadded<LcoreCounters>> = Arc::default();
            let l = LcoreLoop {
                streams,
                mode: self.mode,
                burst: self.burst,
                tx_retries: self.tx_retries,
                template: template.clone(),
                counters: Arc::clone(&c),
                stop: Arc::clone(&stop),
                region: region.clone(),
                rtt: rtt.clone(),
                tx_span: tx_span.clone(),
                ping_frames: self.ping_frames,
                ping_timeout: ddpdk_dataplane::fwd::PING_TIMEOUT,
                echo_trim: self.echo_trim,
            };
            match self.eal.launch(lcore, move || l.run_tx_first(tx_first)) {
                Ok(j) => joins.push(j),
                Err(e) => {
                    // Do not leave the lcores already launched running.
                    stop.store(true, Ordering::Release);
                    for j in joins {
                        self.eal.join(j);
                    }
                    return Err(e.to_string());
                }
            }
            counters.push((lcore, c));
        }
        note(
            self.json,
            format_args!(
                "Start {} packet forwarding on {} lcore(s), burst {}",
                self.mode,
                joins.len(),
                self.burst
            ),
        );
        self.running = Some(Running {
            rtt,
            mode: self.mode,
            stop,
            joins,
            lcores: counters,
            streams: stream_counters,
            start_stats,
            started: Instant::now(),
            tx_span,
        });
        Ok(())
    }

    /// Stops the data lcores, waits for them and prints the forwarding statistics.
    ///
    /// Per port, as testpmd: RX-packets are what the streams polling the port received,
    /// RX-dropped what the device missed or could not buffer; TX-packets what the streams
    /// transmitting on the port sent, TX-dropped what they freed after tx_burst refused it plus
    /// the device's own TX errors.
    pub fn stop(&mut self) -> Result<(), String> {
        let Some(mut r) = self.running.take() else {
            return Err("packet forwarding not started".into());
        };
        note(self.json, format_args!("Telling cores to stop..."));
        r.stop.store(true, Ordering::Release);
        note(self.json, format_args!("Waiting for lcores to finish..."));
        for j in std::mem::take(&mut r.joins) {
            self.eal.join(j);
        }
        self.spent_spans.extend(r.tx_span.take());
        self.forward_stats(&r);
        if !self.json {
            outln!("Done.");
        }
        Ok(())
    }

    /// The forwarding statistics of run `r` so far (testpmd's, at `stop` and by `show fwd
    /// stats all`; ping's round trips are the lcores' once they stopped).
    fn forward_stats(&self, r: &Running) {
        let elapsed = r.started.elapsed();
        let mut total = StreamSnapshot::default();
        for (_, c) in &r.streams {
            total += c.snapshot();
        }
        let mut per_port = Vec::new();
        for p in &self.ports {
            let (id, now) = (p.id(), p.stats());
            let base = r.start_stats.get(&id).copied().unwrap_or_default();
            let d = |a: u64, b: u64| a.saturating_sub(b);
            let (mut rx, mut tx, mut tx_dropped) = (0, 0, d(now.tx_errors, base.tx_errors));
            for (spec, c) in &r.streams {
                let c = c.snapshot();
                if spec.rx_port == id {
                    rx += c.rx_packets;
                }
                if spec.tx_port == id {
                    tx += c.tx_packets;
                    tx_dropped += c.tx_dropped;
                }
            }
            let rx_dropped = d(now.rx_missed, base.rx_missed) + d(now.rx_nombuf, base.rx_nombuf);
            per_port.push((id, rx, rx_dropped, tx, tx_dropped));
        }
        if self.json {
            let ports: Vec<_> = per_port
                .iter()
                .map(|&(p, rx, rxd, tx, txd)| json!({"port": p, "rx_packets": rx, "rx_dropped": rxd, "tx_packets": tx, "tx_dropped": txd}))
                .collect();
            let lcores: Vec<_> = r
                .lcores
                .iter()
                .map(|(l, c)| {
                    json!({"lcore": l, "polls": c.polls.load(Ordering::Relaxed),
                           "idle_polls": c.idle_polls.load(Ordering::Relaxed)})
                })
                .collect();
            let streams: Vec<_> = r
                .streams
                .iter()
                .map(|(spec, c)| json!({"stream": spec, "counters": c.snapshot()}))
                .collect();
            let rtt = r.rtt.as_ref().map(|h| {
                let h = h.lock().unwrap_or_else(PoisonError::into_inner);
                json!({"count": h.len(), "p50": us(h.value_at_quantile(0.5)),
                       "p99": us(h.value_at_quantile(0.99)), "max": us(h.max())})
            });
            outln!(
                "{}",
                json!({"event": "forward_stats", "mode": r.mode, "seconds": elapsed.as_secs_f64(),
                       "ports": ports, "streams": streams, "lcores": lcores, "total": total,
                       "rtt_us": rtt})
            );
        } else {
            for &(p, rx, rxd, tx, txd) in &per_port {
                out!("{}", fwd_port_text(p, rx, rxd, tx, txd));
            }
            let secs = elapsed.as_secs_f64().max(1e-9);
            outln!(
                "  {:+^76}",
                " Accumulated forward statistics for all ports "
            );
            outln!(
                "  RX-packets: {:<14} TX-packets: {:<14} TX-dropped: {}",
                total.rx_packets,
                total.tx_packets,
                total.tx_dropped
            );
            outln!(
                "  Over {:.*} s: RX {:.0} pps, TX {:.0} pps",
                // A short interactive run said "Over 0.000 s".
                if secs < 0.1 { 6 } else { 3 },
                secs,
                total.rx_packets as f64 / secs,
                total.tx_packets as f64 / secs,
            );
            if let Some(h) = r.rtt.as_ref() {
                let h = h.lock().unwrap_or_else(PoisonError::into_inner);
                outln!(
                    "  Round trips: {} (lost {}), p50 {:.1} us, p99 {:.1} us, max {:.1} us",
                    h.len(),
                    total.ping_lost,
                    us(h.value_at_quantile(0.5)),
                    us(h.value_at_quantile(0.99)),
                    us(h.max())
                );
            }
            if r.mode == FwdMode::RxPlace {
                // "(0 matched)" read like a failure, while txonly's frames (UDP) carry no
                // SCTP checksum to match: the work measured is the same (an outside-in review).
                outln!(
                    "  Placed {} payload bytes ({:.1} MB/s) into a {} MiB region; CRC32c \
                     computed over every frame ({} of {} held a valid SCTP checksum{})",
                    total.placed_bytes,
                    total.placed_bytes as f64 / secs / 1e6,
                    RXPLACE_REGION >> 20,
                    total.crc_matched,
                    total.rx_packets,
                    if total.crc_matched < total.rx_packets {
                        ": frames of txonly hold none, which costs the same"
                    } else {
                        ""
                    }
                );
            }
            outln!("  {}", "+".repeat(76));
        }
    }

    fn show_config_fwd(&self) {
        if self.json {
            outln!(
                "{}",
                json!({"mode": self.mode, "burst": self.burst, "ports": self.ports.len(),
                       "cores": self.table.by_lcore().len(), "streams": self.table.streams})
            );
            return;
        }
        outln!(
            "{} packet forwarding - ports={} - cores={} - streams={} - burst={}",
            self.mode,
            self.ports.len(),
            self.table.by_lcore().len(),
            self.table.streams.len(),
            self.burst
        );
        out!("{}", self.table);
    }

    fn show_port_stats(&mut self, p: &DpdkPort) {
        let now = Instant::now();
        let s = p.stats();
        let rates = match self.last_show.insert(p.id(), (now, s)) {
            Some((t, prev)) => Rates::between(&prev, &s, now - t),
            None => Rates::default(),
        };
        print_port_stats(self.json, p, &s, Some(&rates));
    }

    /// Periodic statistics (--stats-period): every port's stats block.
    pub fn periodic_stats(&mut self) {
        for p in self.ports.clone() {
            self.show_port_stats(&p);
        }
        let _ = std::io::stdout().flush();
    }

    /// Stops forwarding if it runs, stops and closes every port, and checks that every mbuf is
    /// back in its pool. Returns the number of mbufs missing (0 when nothing leaked).
    pub fn shutdown(mut self) -> Result<u32, String> {
        if self.running.is_some() {
            self.stop()?;
        }
        // Frames still queued in a device (a net_ring holds what was sent and not yet received)
        // are received and freed first, so every mbuf is accounted for. Bounded: a peer that keeps
        // sending must not hold up the shutdown.
        let mut drained = 0usize;
        let mut bufs = Vec::with_capacity(self.burst);
        for p in &self.ports {
            let limit = DRAIN_LIMIT_PER_QUEUE + usize::from(p.conf().nb_rxd);
            for q in 0..p.nb_rx_queues() {
                let mut from_queue = 0;
                while from_queue < limit {
                    let n = p.rx_burst(q, &mut bufs, self.burst);
                    p.free_bulk(&mut bufs);
                    if n == 0 {
                        break;
                    }
                    from_queue += n;
                }
                drained += from_queue;
            }
        }
        if drained > 0 {
            note(
                self.json,
                format_args!("Drained {drained} packet(s) left in the RX queues"),
            );
        }
        // No frame in a queue references them now.
        self.spent_spans.clear();
        // What a memif port sent last may still wait in the shared ring for a peer that is
        // still polling: closing at once took the ring away with it (a txonly client's last
        // 1024 frames, counted sent and never received, an outside-in review). The peer takes
        // a ring of them in well under a millisecond.
        if self
            .ports
            .iter()
            .any(|p| p.info().driver == "net_memif" && p.link().up)
        {
            std::thread::sleep(MEMIF_RING_GRACE);
        }
        let mut first_err = None;
        for (i, p) in self.ports.iter().enumerate() {
            note(self.json, format_args!("Stopping port {}...", p.id()));
            if let Err(e) = p.close() {
                first_err.get_or_insert(e.to_string());
            }
            note(self.json, format_args!("Port {} is closed", p.id()));
            // DPDK 22.11's memif PMD: closing one end makes the interrupt thread tear down its
            // peer; closing that peer from this thread at the same moment frees the same memory
            // twice. Let the teardown finish (link down, then a grace period) before going on.
            if p.info().driver.contains("memif") {
                for q in &self.ports[i + 1..] {
                    let t0 = Instant::now();
                    while q.link().up && t0.elapsed() < MEMIF_SETTLE {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
                if i + 1 < self.ports.len() {
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
        self.ports.clear();
        let missing: u32 = self.pools.iter().map(|p| p.in_use_count()).sum();
        if missing > 0 {
            errln!(
                "ddpdk: warning: {missing} mbuf(s) not back in their pool after closing the ports"
            );
        }
        self.pools.clear();
        match first_err {
            Some(e) => Err(e),
            None => Ok(missing),
        }
    }
}

/// `show port stats` of port `p`: its counters `s` (and `rates` since the last, in `fwd`).
pub(crate) fn print_port_stats(json: bool, p: &DpdkPort, s: &PortStats, rates: Option<&Rates>) {
    // DPDK 22.11's memif reports no counters while its peer is away (they read 0 once a
    // client left: an outside-in review); the forwarding's and data cores' own counts go on.
    let away = (p.info().driver == "net_memif" && !p.link().up)
        .then_some("net_memif reports no counters while its peer is away");
    if json {
        let mut v = json!({"port": p.id(), "stats": s});
        if let Some(r) = rates {
            v["rates"] = json!(r);
        }
        if let Some(why) = away {
            v["counters_unavailable"] = why.into();
        }
        outln!("{v}");
    } else {
        out!(
            "{}",
            port_stats_text(p.id(), s, rates.unwrap_or(&Rates::default()))
        );
        if let Some(why) = away {
            outln!("  ({why}: `show fwd stats all` counts what was received)");
        }
    }
}

/// `show port info`: what testpmd prints for a port.
pub(crate) fn show_port_info(json: bool, p: &DpdkPort) {
    let i = p.info();
    let c = p.conf();
    let link = p.link();
    if json {
        outln!(
            "{}",
            json!({"port": i.port_id, "name": i.name, "driver": i.driver, "socket": i.socket,
                   "mac": mac_text(&i.mac), "mtu": p.mtu(), "link": link, "nb_rxq": c.nb_rxq, "nb_txq": c.nb_txq,
                   "nb_rxd": c.nb_rxd, "nb_txd": c.nb_txd, "max_rx_queues": i.max_rx_queues,
                   "max_tx_queues": i.max_tx_queues, "rss_offloads": i.rss_offloads})
        );
        return;
    }
    let title = format!(" Infos for port {} ", i.port_id);
    outln!("\n  {:*^76}", title);
    outln!("  MAC address: {}", mac_text(&i.mac));
    outln!("  Device name: {}", i.name);
    outln!("  Driver name: {}", i.driver);
    outln!("  Connect to socket: {}", i.socket);
    outln!("  Link status: {}", if link.up { "up" } else { "down" });
    // RTE_ETH_SPEED_NUM_UNKNOWN (virtio-user, for one) is all ones.
    match link.speed_mbps {
        u32::MAX => outln!("  Link speed: unknown"),
        mbps => outln!("  Link speed: {mbps} Mbps"),
    }
    outln!(
        "  Link duplex: {}",
        if link.full_duplex {
            "full-duplex"
        } else {
            "half-duplex"
        }
    );
    outln!("  MTU: {}", p.mtu());
    outln!(
        "  Current number of RX queues: {} ({} descriptors)",
        c.nb_rxq,
        c.nb_rxd
    );
    outln!("  Max possible RX queues: {}", i.max_rx_queues);
    outln!(
        "  Current number of TX queues: {} ({} descriptors)",
        c.nb_txq,
        c.nb_txd
    );
    outln!("  Max possible TX queues: {}", i.max_tx_queues);
    outln!("  Supported RSS offload flow types: {:#x}", i.rss_offloads);
}

/// `show port xstats`: the device's extended statistics.
pub(crate) fn show_port_xstats(json: bool, p: &DpdkPort) {
    show_xstats(json, p.id(), p.xstats());
}

/// `show port xstats` of port `id` with statistics `x`: a DDP endpoint's include the fault
/// injector's (`fault_rx_*`), which sits above the device.
pub(crate) fn show_xstats(json: bool, id: u16, x: Vec<(String, u64)>) {
    if json {
        let m: serde_json::Map<String, serde_json::Value> =
            x.into_iter().map(|(k, v)| (k, v.into())).collect();
        outln!("{}", json!({"port": id, "xstats": m}));
        return;
    }
    outln!("###### NIC extended statistics for port {id:<2}");
    for (k, v) in x {
        outln!("{k}: {v}");
    }
    outln!("#########################################################################");
}

/// This machine's memory, bytes (`MemTotal`).
pub(crate) fn machine_bytes() -> Option<u64> {
    let m = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = m.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let kib = kib
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kib.saturating_mul(1024))
}

/// What to do about an mbuf pool the EAL's heap could not supply: more EAL memory helps only
/// where the machine has it (`--total-num-mbufs 4000000000`, terabytes, was told to give the
/// EAL `-m 1024`).
fn pool_memory_hint(n: u32, mbuf_size: u16, machine: Option<u64>) -> String {
    // Each element: the 128-byte rte_mbuf and its buffer.
    let bytes = u64::from(n) * (128 + u64::from(mbuf_size));
    match machine {
        Some(total) if bytes > total => format!(
            "{n} mbufs of {mbuf_size} bytes are {} MiB, more than this machine's {} MiB: give a \
             smaller --total-num-mbufs",
            bytes >> 20,
            total >> 20
        ),
        _ => "with --no-huge, give the EAL more memory: -m 1024".into(),
    }
}

#[cfg(test)]
mod pool_tests {
    use super::pool_memory_hint;

    /// A pool larger than the machine is blamed on --total-num-mbufs, not on the EAL's -m.
    #[test]
    fn a_pool_larger_than_the_machine_names_total_num_mbufs_not_eal_memory() {
        let machine = Some(8u64 << 30);
        let h = pool_memory_hint(4_000_000_000, 2176, machine);
        assert!(
            h.contains("more than this machine's 8192 MiB")
                && h.contains("--total-num-mbufs")
                && !h.contains("-m 1024"),
            "{h}"
        );
        assert!(pool_memory_hint(16383, 2176, machine).contains("-m 1024"));
        assert!(pool_memory_hint(4_000_000_000, 2176, None).contains("-m 1024"));
    }
}
