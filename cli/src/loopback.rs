//! `--ddp-loopback`: the main job on the embedded default. Two DDP/SCTP endpoints on two DPDK
//! `net_ring` ports wired back to back, in this process, each in the product's shape: data
//! cores on their own threads own the associations and place inline, and a control thread
//! (this one, for both endpoints) answers INITs, hands associations to their cores and
//! manages STags. The client resolves the server by ARP, sets up an association with the DDP
//! adaptation indication, opens a DDP Stream Session, the server registers regions in DPDK
//! hugepage memory, the client moves tagged and untagged messages of several sizes, every
//! placed byte is verified; then, on an RDMAP stream, the client reads the server's memory with
//! RDMA Reads (served by the server's data core from the registered region) and every byte
//! read is verified, then RFC 7306 FetchAdds on one word of the server's (each original value
//! and the sum verified); everything is torn down (STags revoked with every core's
//! acknowledgement), and what happened is printed with throughput and a latency histogram.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant as Wall};

use ddpdk_control::conn::{
    AtomicOperation, Completion, ConnConfig, Indication, Payload, RdmaOp, RdmaRequest, SendKind,
    SendRequest, Status,
};
use ddpdk_control::memory::{MemoryRegistration, RegionId};
use ddpdk_control::rdmap::{RdmaLimits, ATOMIC_WORD};
use ddpdk_control::runtime::{
    self, Clock, ConnHandle, Control, ControlStats, CoreStats, DataCore, Event as RtEvent,
    IdlePolicy, Op, RuntimeConfig,
};
use ddpdk_control::session::{Event, PendingLimit};
use ddpdk_dataplane::mem::{Access, Pd, Stag};
use ddpdk_dataplane::net::Interface;
use ddpdk_dataplane::port::dpdk::{DpdkPort, Eal, LcoreJoin, Mempool, PortConf};
use ddpdk_dataplane::port::region::Region;
use ddpdk_dataplane::port::Port;
use ddpdk_dataplane::sctp::{CloseReason, Config, Endpoint};
use ddpdk_dataplane::wire::crc32c::crc32c;
use hdrhistogram::Histogram;

use crate::app::note;
use crate::node::{exit_status, launch_core, random};
use crate::options::Options;
use crate::verify::{fill_pattern, pattern};

const SCTP_PORT: u16 = 5000;
const CLIENT: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const STREAM: u16 = 1;
/// The RDMAP stream of the RDMA Reads.
const RDMA_STREAM: u16 = 2;
/// RDMA Read sizes, bytes.
const READ_SIZES: [usize; 3] = [64, 16 << 10, 256 << 10];
/// Tagged message sizes, bytes.
const TAGGED_SIZES: [usize; 4] = [1024, 16 << 10, 256 << 10, 4 << 20];
/// Untagged message sizes, bytes (one receive buffer each, of the largest size).
const UNTAGGED_SIZES: [usize; 3] = [64, 1400, 8000];
/// Messages in flight at once.
const WINDOW: usize = 16;
/// A tagged write from a source region carries its work request and offset this often (less
/// than the smallest MULPDU, so every segment carries one).
const STAMP_EVERY: usize = 512;
/// Longest wait for any one step.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs the loopback and returns the exit status.
pub fn run(eal: Eal, opts: &Options, signalled: &AtomicBool) -> i32 {
    let r = Loopback::new(&eal, opts).and_then(|mut l| {
        let r = l.run(&eal, opts, signalled);
        // The data cores stop (and give back their buffers) whatever happened.
        let stats = l.stop(&eal);
        match r {
            Ok(()) => l
                .finish(opts.json, stats)
                .and_then(|()| l.pcap.as_ref().map_or(Ok(()), Pcap::result)),
            // Cut short (a signal, a failed step): the frames still between the two ports
            // go back too, before any region they hold spans of is dropped (SIGINT
            // mid-transfer left "region dropped while 58 mbuf(s) reference it").
            Err(e) => {
                let e = match l.pcap.as_ref().map_or(Ok(()), Pcap::result) {
                    Ok(()) => e,
                    Err(capture) => format!("{e}; {capture}"),
                };
                Err(match l.drain_ports() {
                    Ok(()) => e,
                    Err(more) => format!("{e}; {more}"),
                })
            }
        }
    });
    exit_status(r.map_err(|e| format!("ddp-loopback: {e}")), opts.json, None)
}

/// Where an endpoint's data cores run.
enum Placement {
    /// Polled on this thread, with both control sides and the harness.
    Inline,
    /// Each on a worker lcore of its own (a CPU of its own, as the product runs them).
    Lcores(Vec<u32>),
    /// Each on a plain thread, sharing this thread's CPUs (too few worker lcores for them).
    Threads,
}

/// One endpoint: its control side (polled on this thread) and its data cores, each on a worker
/// lcore while the EAL has enough of them (`make run`'s `-l 0-1` has one: the server's data
/// core gets it, so sender and receiver each have a CPU, as between two processes), else one
/// inline (polled here) or several on threads.
struct Side {
    control: Control<DpdkPort>,
    /// The worker lcores running data cores, and where each core comes back when it stops.
    lcores: Vec<LcoreJoin>,
    returned: Option<mpsc::Receiver<DataCore<DpdkPort>>>,
    threads: Vec<JoinHandle<DataCore<DpdkPort>>>,
    inline: Vec<DataCore<DpdkPort>>,
    /// Events not yet consumed, in arrival order.
    log: Vec<RtEvent>,
}

impl Side {
    fn start(
        eal: &Eal,
        control: Control<DpdkPort>,
        cores: Vec<DataCore<DpdkPort>>,
        (clock, stop, idle): (Clock, &Arc<AtomicBool>, IdlePolicy),
        placement: Placement,
    ) -> Result<Side, String> {
        let mut side = Side {
            control,
            lcores: Vec::new(),
            returned: None,
            threads: Vec::new(),
            inline: Vec::new(),
            log: Vec::new(),
        };
        match placement {
            Placement::Inline => {
                // `Side::poll` reads the events between two turns of the cores.
                side.inline = cores;
                for core in &mut side.inline {
                    core.set_ulp_polls(true);
                }
                // As a core on its own lcore does when it starts (`DataCore::run`).
                if let Some(first) = side.inline.first_mut() {
                    first.announce();
                }
            }
            Placement::Lcores(lcores) => {
                let (give_back, returned) = mpsc::channel();
                side.returned = Some(returned);
                for (core, lcore) in cores.into_iter().zip(lcores) {
                    let give_back = give_back.clone();
                    let job = launch_core(eal, lcore, core, (clock, stop, idle), move |core| {
                        let _ = give_back.send(core);
                    })?;
                    side.lcores.push(job);
                }
            }
            Placement::Threads => {
                side.threads = cores
                    .into_iter()
                    .map(|mut core| {
                        let stop = Arc::clone(stop);
                        std::thread::spawn(move || {
                            // They share this thread's CPUs: an idle core sleeps.
                            core.run(clock, &stop, IdlePolicy::default());
                            core
                        })
                    })
                    .collect();
            }
        }
        Ok(side)
    }

    /// Stops nothing: collects the data cores once `stop` is set.
    fn join(&mut self, eal: &Eal) -> Vec<DataCore<DpdkPort>> {
        for job in self.lcores.drain(..) {
            eal.join(job);
        }
        let mut cores: Vec<_> = self
            .returned
            .take()
            .map(|r| r.try_iter().collect())
            .unwrap_or_default();
        cores.extend(self.threads.drain(..).filter_map(|t| t.join().ok()));
        cores.append(&mut self.inline);
        cores.sort_by_key(|c| c.index());
        cores
    }

    fn poll(&mut self, clock: Clock) -> usize {
        let now = clock.now();
        let mut n: usize = self.inline.iter_mut().map(|k| k.poll(now)).sum();
        n += self.control.poll(now);
        while let Some(e) = self.control.poll_event() {
            self.log.push(e);
        }
        n
    }

    /// Removes and returns the completions logged so far.
    fn completions(&mut self) -> Vec<Completion> {
        let mut out = Vec::new();
        self.log.retain(|e| match e {
            RtEvent::Completion { completion, .. } => {
                out.push(*completion);
                false
            }
            _ => true,
        });
        out
    }

    /// Removes and returns the indications logged so far, failing on a refused operation.
    fn indications(&mut self) -> Result<Vec<Indication>, String> {
        let mut out = Vec::new();
        let mut refused = None;
        self.log.retain(|e| match e {
            RtEvent::Indication { indication, .. } => {
                out.push(indication.clone());
                false
            }
            RtEvent::Refused { op, error, .. } => {
                refused = Some(crate::node::refusal(op, error));
                false
            }
            _ => true,
        });
        refused.map_or(Ok(out), Err)
    }

    /// Removes the `Posted` events logged so far; returns how many.
    fn posted(&mut self) -> usize {
        let before = self.log.len();
        self.log.retain(|e| !matches!(e, RtEvent::Posted { .. }));
        before - self.log.len()
    }
}

struct Loopback {
    /// `--pcap`'s capture.
    pcap: Option<Pcap>,
    clock: Clock,
    client: Side,
    server: Side,
    stop: Arc<AtomicBool>,
    ports: Vec<Arc<DpdkPort>>,
    pool: Arc<Mempool>,
    cores: usize,
}

/// An STag to deregister at the end, and whether it is the server's.
type OwnedStag = (bool, Stag);

/// One size's results.
struct Row {
    kind: &'static str,
    size: usize,
    messages: usize,
    secs: f64,
    latency: Histogram<u64>,
}

/// Everything an endpoint's threads did, for the summary.
struct SideStats {
    cores: Vec<CoreStats>,
    control: ControlStats,
}

impl Loopback {
    fn new(eal: &Eal, opts: &Options) -> Result<Loopback, String> {
        let cores = usize::from(opts.data_cores);
        // A queue pair per data core and one more for the control thread's transmissions.
        let queues = (cores + 1) as u16;
        let (a, b) = eal
            .create_ring_pair("ddpdk_ddp", 1024, queues)
            .map_err(|e| format!("cannot create the ring pair: {e}"))?;
        let pool = Arc::new(
            Mempool::create(
                "ddp_loopback_pool",
                8191 * u32::from(queues),
                256,
                dpdk_sys::RTE_MBUF_DEFAULT_BUF_SIZE as u16,
                0,
            )
            .map_err(|e| format!("{e} (with --no-huge, give the EAL more memory: -m 1024)"))?,
        );
        let conf = PortConf {
            nb_rxq: queues,
            nb_txq: queues,
            nb_rxd: 1024,
            nb_txd: 1024,
            promiscuous: true,
            ..PortConf::default()
        };
        let mut ports = Vec::new();
        for id in [a, b] {
            let p = DpdkPort::configure(id, conf, Arc::clone(&pool)).map_err(|e| e.to_string())?;
            p.start().map_err(|e| e.to_string())?;
            let link = p.wait_link_up_unless(Duration::from_secs(5), &crate::run::signalled);
            if !link.up && crate::run::signalled() {
                return Err(format!("interrupted while waiting for {}'s link", p.name()));
            }
            if !link.up {
                return Err(format!("{}: link down", p.name()));
            }
            ports.push(Arc::new(p));
        }
        let mut macs = [ports[0].mac(), ports[1].mac()];
        if macs[0] == macs[1] {
            macs[1][5] ^= 1;
        }
        let (tap, pcap) = opts.pcap.as_deref().map(pcap_tap).transpose()?.unzip();
        let clock = crate::node::poll_clock();
        let stop = Arc::new(AtomicBool::new(false));
        type Parts = (Control<DpdkPort>, Vec<DataCore<DpdkPort>>);
        let make = |k: usize, ip: Ipv4Addr| -> Result<Parts, String> {
            let ep = Endpoint::new(
                Config {
                    local_port: SCTP_PORT,
                    // A 1500-byte link (the runtime sets each association's path MTU from the
                    // link MTU and the peer's address family); frames fit one mbuf.
                    path_mtu: 1480,
                    send_slots: 1024,
                    ..Config::default()
                },
                random::<32>()?,
            )?;
            let (mut control, mut data) = runtime::build(
                Arc::clone(&ports[k]),
                Interface::new(macs[k], Some(ip), None),
                ep,
                ConnConfig::default(),
                PendingLimit::new(16),
                RuntimeConfig {
                    cores,
                    random: u64::from_ne_bytes(random::<8>()?),
                    ..RuntimeConfig::default()
                },
            )
            .map_err(|e| e.to_string())?;
            if let Some(tap) = &tap {
                control.set_tap(Arc::clone(tap));
                for d in &mut data {
                    d.set_tap(Arc::clone(tap));
                }
            }
            Ok((control, data))
        };
        let (client, server) = (make(0, CLIENT)?, make(1, SERVER)?);
        // Worker lcores go to the server's cores first: with one worker (`make run`), sender
        // and receiver each get a CPU of their own.
        let mut workers = eal.worker_lcores().into_iter();
        let mut placement = |n: usize| {
            if workers.len() >= n {
                Placement::Lcores(workers.by_ref().take(n).collect())
            } else if n == 1 {
                Placement::Inline
            } else {
                Placement::Threads
            }
        };
        let run = (clock, &stop, opts.idle_policy());
        let sp = placement(cores);
        let cp = placement(cores);
        let where_ = |p: &Placement| match p {
            Placement::Inline => "on the main thread".to_string(),
            Placement::Lcores(l) => format!("on lcore(s) {l:?}"),
            Placement::Threads => "on threads sharing the main thread's CPUs".to_string(),
        };
        let placed = format!("server's {}, client's {}", where_(&sp), where_(&cp));
        let server = Side::start(eal, server.0, server.1, run, sp)?;
        let client = Side::start(eal, client.0, client.1, run, cp)?;
        note(
            opts.json,
            format_args!(
                "DDP loopback: client {CLIENT} on {}, server {SERVER} on {}, SCTP port \
                 {SCTP_PORT}; {cores} data core(s) each ({placed}), control threads on the \
                 main thread",
                ports[0].name(),
                ports[1].name()
            ),
        );
        Ok(Loopback {
            pcap,
            clock,
            client,
            server,
            stop,
            ports,
            pool,
            cores,
        })
    }

    /// Polls both control sides until `done`, or fails after the step timeout or on a signal.
    fn poll_until(
        &mut self,
        what: &str,
        signalled: &AtomicBool,
        mut done: impl FnMut(&mut Loopback) -> Result<bool, String>,
    ) -> Result<(), String> {
        let deadline = Wall::now() + STEP_TIMEOUT;
        // The signal first: a busy transfer finds something done on every call, and a check
        // only while waiting let a SIGINT go unheard to the loopback's end (minutes).
        loop {
            if signalled.load(Ordering::Relaxed) {
                return Err(format!("interrupted while waiting for {what}"));
            }
            if done(self)? {
                break;
            }
            if Wall::now() > deadline {
                return Err(format!("timed out waiting for {what}"));
            }
            if self.client.poll(self.clock) + self.server.poll(self.clock) == 0 {
                std::thread::yield_now();
            }
        }
        Ok(())
    }

    /// Submits `op` to the server's control side (`to_server`) or the client's; while the
    /// owning core's command ring is full, both endpoints keep running until it has room.
    fn submit(&mut self, to_server: bool, conn: ConnHandle, op: Op) -> Result<(), String> {
        let deadline = Wall::now() + STEP_TIMEOUT;
        loop {
            let side = if to_server {
                &mut self.server
            } else {
                &mut self.client
            };
            match side.control.submit(conn, op.clone()) {
                Ok(()) => return Ok(()),
                // The core's command ring is full: let it catch up.
                Err(runtime::RuntimeError::Busy) if Wall::now() < deadline => {
                    if self.client.poll(self.clock) + self.server.poll(self.clock) == 0 {
                        std::thread::yield_now();
                    }
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    fn run(&mut self, eal: &Eal, opts: &Options, signalled: &AtomicBool) -> Result<(), String> {
        let json = opts.json;
        // Association: the client's control thread hands it to the owning data core, which
        // sends the INIT; the server's control thread answers it and adopts the COOKIE ECHO.
        let cc = self
            .client
            .control
            .connect(self.clock.now(), IpAddr::V4(SERVER), SCTP_PORT)
            .map_err(|e| e.to_string())?;
        let mut client_log = Vec::new();
        let mut sc = None;
        self.poll_until("the association", signalled, |l| {
            client_log.extend(l.client.indications()?);
            for e in &l.server.log {
                if let RtEvent::Accepted { conn, .. } = e {
                    sc = Some(*conn);
                }
            }
            Ok(connected(&client_log).is_some() && sc.is_some())
        })?;
        let sc = sc.ok_or("no server connection")?;
        let (streams, mulpdu) = connected(&client_log).unwrap_or_default();
        let (core_c, core_s) = (
            self.client.control.owner(cc).unwrap_or(0),
            self.server.control.owner(sc).unwrap_or(0),
        );
        note(
            json,
            format_args!(
                "Association up: {streams} streams, adaptation indication DDP, MULPDU {mulpdu} \
                 (client core {core_c}, server core {core_s}; the client resolved the server \
                 by ARP)"
            ),
        );

        // A DDP Stream Session on stream 1.
        let cpd = self.client.control.memory_mut().alloc_pd();
        let spd = self.server.control.memory_mut().alloc_pd();
        self.submit(
            false,
            cc,
            Op::Initiate {
                stream: STREAM,
                pd: cpd,
                private_data: b"ddpdk loopback".to_vec(),
            },
        )?;
        let mut server_log = Vec::new();
        self.poll_until("the Initiate", signalled, |l| {
            server_log.extend(l.server.indications()?);
            Ok(has_session_event(&server_log, |e| {
                matches!(e, Event::InitiateReceived { .. })
            }))
        })?;
        self.submit(
            true,
            sc,
            Op::Accept {
                stream: STREAM,
                pd: spd,
                private_data: b"welcome".to_vec(),
            },
        )?;
        self.poll_until("the Accept", signalled, |l| {
            client_log.extend(l.client.indications()?);
            Ok(has_session_event(&client_log, |e| {
                matches!(e, Event::Accepted { .. })
            }))
        })?;
        note(json, format_args!("DDP Stream Session {STREAM} accepted"));

        // Server memory from DPDK's heap: one tagged region per window slot of the largest
        // message, and receive buffers.
        let largest = *TAGGED_SIZES.iter().max().unwrap_or(&0);
        let tagged_len = WINDOW * largest;
        let untagged_len = 2 * WINDOW * UNTAGGED_SIZES.iter().max().unwrap_or(&0);
        let tr = self.dpdk_region(eal, tagged_len)?;
        let ur = self.dpdk_region(eal, untagged_len)?;
        // The client's tagged writes leave from a region of its own (RFC 4296's local
        // buffer), sent by reference where the port chains buffers (zero-copy transmit).
        let source = Region::from_dpdk(eal, tagged_len, None).map_err(|e| e.to_string())?;
        source
            .place(0, &pattern(0x50_75ce, tagged_len))
            .map_err(|e| e.to_string())?;
        let src = self
            .client
            .control
            .memory_mut()
            .add_region(source)
            .map_err(|_| "region table full".to_string())?;
        let m = self.server.control.memory_mut();
        let treg = m
            .register(registration(spd, tr, tagged_len, Access::REMOTE_WRITE))
            .map_err(|e| e.to_string())?;
        let ureg = m
            .register(registration(spd, ur, untagged_len, Access::LOCAL_WRITE))
            .map_err(|e| e.to_string())?;
        let huge = m.region(tr).map(|r| r.huge()).unwrap_or(false);
        note(
            json,
            format_args!(
                "Registered STag {} (tagged, {} bytes, remote write) and STag {} (receive \
                 buffers, {} bytes) in DPDK memory{}",
                treg.stag,
                treg.len,
                ureg.stag,
                ureg.len,
                if huge {
                    " on huge pages"
                } else {
                    " (normal pages: --no-huge)"
                }
            ),
        );

        let budget = usize::try_from(opts.ddp_bytes).unwrap_or(usize::MAX);
        let mut rows = Vec::new();
        let mut wr = 0u64;
        // A run that fails or is interrupted part-way still prints the rows it measured (an
        // interrupted run printed none: found by an outside-in test): they are kept as they
        // come, whatever ends the measurements.
        let measured = (|| {
            for &size in &TAGGED_SIZES {
                let n = (budget / size).clamp(1, 4096);
                rows.push(self.tagged(size, n, (treg.stag, tr), src, &mut wr, cc, signalled)?);
            }
            for &size in &UNTAGGED_SIZES {
                let n = (budget / size).clamp(1, 4096);
                rows.push(self.untagged(size, n, spd, ureg.stag, ur, &mut wr, cc, sc, signalled)?);
            }
            // RDMA Reads on an RDMAP stream: the server's memory, read by the client.
            let (read_rows, read_stags) =
                self.reads(eal, json, budget, (cpd, spd), &mut wr, (cc, sc), signalled)?;
            rows.extend(read_rows);
            Ok::<_, String>(read_stags)
        })();
        if !rows.is_empty() {
            print_rows(json, &rows);
        }
        let read_stags = measured?;

        // Teardown: the client terminates the sessions, the server answers; SHUTDOWN; the
        // server revokes its STags, each revocation acknowledged by every data core.
        for stream in [STREAM, RDMA_STREAM] {
            self.submit(false, cc, Op::Terminate { stream })?;
            server_log.clear();
            self.poll_until("the Terminate", signalled, |l| {
                server_log.extend(l.server.indications()?);
                Ok(server_log.iter().any(|i| {
                    matches!(i, Indication::Session { stream: s, event: Event::TerminateReceived } if *s == stream)
                }))
            })?;
        }
        self.submit(false, cc, Op::Shutdown)?;
        client_log.clear();
        server_log.clear();
        self.poll_until("the SHUTDOWN", signalled, |l| {
            client_log.extend(l.client.indications()?);
            server_log.extend(l.server.indications()?);
            Ok(closed(&client_log) && closed(&server_log))
        })?;
        note(
            json,
            format_args!("Session terminated, association shut down"),
        );
        for (server, stag) in [(true, treg.stag), (true, ureg.stag)]
            .into_iter()
            .chain(read_stags)
        {
            // Cores polled on this thread must turn to acknowledge the revocation.
            let Side {
                control, inline, ..
            } = if server {
                &mut self.server
            } else {
                &mut self.client
            };
            let clock = self.clock;
            control
                .memory_mut()
                .deregister_polling(stag, &mut || {
                    for k in inline.iter_mut() {
                        k.poll(clock.now());
                    }
                })
                .map_err(|e| format!("deregistering STag {stag}: {e}"))?;
        }
        note(
            json,
            format_args!(
                "Deregistered STags {} and {} and those of the RDMA Reads and Atomics (all {} data core(s) \
                 of each side acknowledged)",
                treg.stag, ureg.stag, self.cores
            ),
        );
        // Quiet: the cores keep polling until nothing moves, so every frame in flight is
        // received and its buffer freed.
        let mut quiet = Wall::now();
        let deadline = Wall::now() + STEP_TIMEOUT;
        while quiet.elapsed() < Duration::from_millis(50) && Wall::now() < deadline {
            if self.client.poll(self.clock) + self.server.poll(self.clock) > 0 {
                quiet = Wall::now();
            }
            std::thread::yield_now();
        }
        Ok(())
    }

    /// Stops and joins every data core; returns what each side did.
    fn stop(&mut self, eal: &Eal) -> [SideStats; 2] {
        self.stop.store(true, Ordering::Release);
        let mut out = Vec::new();
        for side in [&mut self.client, &mut self.server] {
            let cores = side.join(eal).iter().map(DataCore::stats).collect();
            out.push(SideStats {
                cores,
                control: side.control.stats(),
            });
        }
        let server = out.pop();
        let client = out.pop();
        [
            client.unwrap_or(SideStats {
                cores: Vec::new(),
                control: ControlStats::default(),
            }),
            server.unwrap_or(SideStats {
                cores: Vec::new(),
                control: ControlStats::default(),
            }),
        ]
    }

    /// The summary, and every mbuf back in its pool.
    fn finish(&mut self, json: bool, stats: [SideStats; 2]) -> Result<(), String> {
        if json {
            // Data, not commentary: on stdout with the rows (they were text on stderr).
            print_counters_json(&stats);
        } else {
            print_counters_text(&stats);
        }
        self.drain_ports()
    }

    /// The rings between threads went with the data cores; drains what the devices still hold
    /// (nothing, after the quiet period, unless a step failed or a signal cut a transfer
    /// short: frames on their way, some holding spans of a region), stops them, and checks
    /// that every mbuf is back in its pool.
    fn drain_ports(&self) -> Result<(), String> {
        let mut left = Vec::new();
        for p in &self.ports {
            for q in 0..p.nb_rx_queues() {
                while p.rx_burst(q, &mut left, 64) > 0 {
                    left.clear();
                }
            }
        }
        for p in &self.ports {
            let _ = p.stop();
        }
        if self.pool.in_use_count() != 0 {
            return Err(format!(
                "{} mbufs not back in their pool",
                self.pool.in_use_count()
            ));
        }
        Ok(())
    }

    /// Opens an RDMAP stream and has the client read the server's memory: for each size, `n`
    /// RDMA Reads (at most ORD in flight) of their own slot of a server region that grants
    /// remote read into the same slot of a client region, each slot checked once its Read
    /// completes. Returns the rows and the STags to deregister (`true`: the server's).
    #[allow(clippy::too_many_arguments)]
    fn reads(
        &mut self,
        eal: &Eal,
        json: bool,
        budget: usize,
        (cpd, spd): (Pd, Pd),
        wr: &mut u64,
        (cc, sc): (ConnHandle, ConnHandle),
        signalled: &AtomicBool,
    ) -> Result<(Vec<Row>, Vec<OwnedStag>), String> {
        let limits = RdmaLimits { ird: 16, ord: 16 };
        self.submit(
            false,
            cc,
            Op::InitiateRdmap {
                stream: RDMA_STREAM,
                pd: cpd,
                limits,
                private_data: Vec::new(),
            },
        )?;
        let mut log = Vec::new();
        self.poll_until("the RDMAP Initiate", signalled, |l| {
            log.extend(l.server.indications()?);
            Ok(log.iter().any(|i| {
                matches!(
                    i,
                    Indication::Session {
                        stream: RDMA_STREAM,
                        event: Event::InitiateReceived { .. }
                    }
                )
            }))
        })?;
        self.submit(
            true,
            sc,
            Op::AcceptRdmap {
                stream: RDMA_STREAM,
                pd: spd,
                limits,
                private_data: Vec::new(),
            },
        )?;
        log.clear();
        self.poll_until("the RDMAP Accept", signalled, |l| {
            log.extend(l.client.indications()?);
            Ok(log.iter().any(|i| {
                matches!(
                    i,
                    Indication::Session {
                        stream: RDMA_STREAM,
                        event: Event::Accepted { .. }
                    }
                )
            }))
        })?;
        let largest = *READ_SIZES.iter().max().unwrap_or(&0);
        let len = usize::from(limits.ord) * largest;
        // The server's source, filled with a pattern; the client's sink.
        let src = self.dpdk_region(eal, len)?;
        let sm = self.server.control.memory_mut();
        let source = pattern(0x5eed, len);
        sm.region(src)
            .ok_or("source region gone")?
            .place(0, &source)
            .map_err(|e| e.to_string())?;
        let sreg = sm
            .register(registration(spd, src, len, Access::REMOTE_READ))
            .map_err(|e| e.to_string())?;
        let sink = Region::from_dpdk(eal, len, None).map_err(|e| e.to_string())?;
        let cm = self.client.control.memory_mut();
        let dst = cm
            .add_region(sink)
            .map_err(|_| "region table full".to_string())?;
        let creg = cm
            .register(registration(cpd, dst, len, Access::LOCAL_WRITE))
            .map_err(|e| e.to_string())?;
        note(
            json,
            format_args!(
                "RDMAP stream {RDMA_STREAM} accepted (IRD {}, ORD {}): the client reads STag {} \
                 into STag {}",
                limits.ird, limits.ord, sreg.stag, creg.stag
            ),
        );
        let window = usize::from(limits.ord);
        let mut rows = Vec::new();
        for &size in &READ_SIZES {
            let n = (budget / size).clamp(1, 4096);
            let mut latency = hist()?;
            let t0 = Wall::now();
            let (mut sent, mut done) = (0usize, 0usize);
            let mut inflight: Vec<InFlight<usize>> = Vec::new();
            while done < n {
                while sent < n && inflight.len() < window {
                    let slot = sent % window;
                    let at = (slot * size) as u64;
                    *wr += 1;
                    let req = RdmaRequest {
                        wr_id: *wr,
                        stream: RDMA_STREAM,
                        op: RdmaOp::Read {
                            source: sreg.stag,
                            source_to: at,
                            sink: creg.stag,
                            sink_to: at,
                            len: u32::try_from(size).map_err(|e| e.to_string())?,
                        },
                        data: Payload::Bytes(Vec::new()),
                        signaled: true,
                    };
                    self.submit(false, cc, Op::PostRdma(req))?;
                    inflight.push((*wr, Wall::now(), slot));
                    sent += 1;
                }
                for c in self.rdma_completions("RDMA Read", signalled)? {
                    let slot = settle(&mut inflight, c.wr_id, &mut latency, "Read")?;
                    let at = slot * size;
                    let got = self
                        .client
                        .control
                        .memory()
                        .region(dst)
                        .ok_or("sink region gone")?
                        .crc32c(at as u64, size)
                        .map_err(|e| e.to_string())?;
                    if got != crc32c(&source[at..at + size]) {
                        return Err(format!("RDMA Read of {size} bytes: bytes read differ"));
                    }
                    // A slot is read again only after this check.
                    done += 1;
                }
            }
            rows.push(Row {
                kind: "read",
                size,
                messages: n,
                secs: t0.elapsed().as_secs_f64(),
                latency,
            });
        }
        // RFC 7306 FetchAdds of 1 on one word of a server region that grants remote atomic
        // access, at most ORD in flight (they share it with Reads, §5.2): performed in order by
        // the server's data core, each returns the count before it, and the word ends at the
        // count.
        let words = self.dpdk_region(eal, 4096)?;
        let wreg = self
            .server
            .control
            .memory_mut()
            .register(registration(spd, words, 4096, Access::REMOTE_ATOMIC))
            .map_err(|e| e.to_string())?;
        let n = (budget / ATOMIC_WORD).clamp(1, len / ATOMIC_WORD).min(4096);
        let mut latency = hist()?;
        let t0 = Wall::now();
        let (mut sent, mut done) = (0usize, 0usize);
        let mut inflight: Vec<InFlight<()>> = Vec::new();
        while done < n {
            while sent < n && inflight.len() < window {
                *wr += 1;
                let req = RdmaRequest {
                    wr_id: *wr,
                    stream: RDMA_STREAM,
                    op: RdmaOp::Atomic {
                        op: AtomicOperation::FetchAdd { add: 1, mask: 0 },
                        stag: wreg.stag,
                        to: 0,
                        sink: creg.stag,
                        sink_to: (sent * ATOMIC_WORD) as u64,
                    },
                    data: Payload::Bytes(Vec::new()),
                    signaled: true,
                };
                self.submit(false, cc, Op::PostRdma(req))?;
                inflight.push((*wr, Wall::now(), ()));
                sent += 1;
            }
            for c in self.rdma_completions("FetchAdd", signalled)? {
                settle(&mut inflight, c.wr_id, &mut latency, "FetchAdd")?;
                done += 1;
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        let word = |memory: &ddpdk_control::memory::Memory, r: RegionId, at: usize| {
            let mut b = [0u8; ATOMIC_WORD];
            memory
                .region(r)
                .ok_or("region gone")?
                .read(at as u64, &mut b)
                .map_err(|e| e.to_string())?;
            Ok::<u64, String>(u64::from_ne_bytes(b))
        };
        for k in 0..n {
            let original = word(self.client.control.memory(), dst, k * ATOMIC_WORD)?;
            if original != k as u64 {
                return Err(format!("FetchAdd {k} returned {original}, not {k}"));
            }
        }
        let total = word(self.server.control.memory(), words, 0)?;
        if total != n as u64 {
            return Err(format!("{n} FetchAdds of 1 left the word at {total}"));
        }
        rows.push(Row {
            kind: "fetchadd",
            size: ATOMIC_WORD,
            messages: n,
            secs,
            latency,
        });
        Ok((
            rows,
            vec![(true, sreg.stag), (false, creg.stag), (true, wreg.stag)],
        ))
    }

    /// The client's next completions on the RDMAP stream (at least one), each successful; the
    /// server's Terminate, or a failed work request, is an error.
    fn rdma_completions(
        &mut self,
        what: &str,
        signalled: &AtomicBool,
    ) -> Result<Vec<Completion>, String> {
        let mut completed = Vec::new();
        self.poll_until(&format!("{what} completions"), signalled, |l| {
            completed.extend(l.client.completions());
            for i in l.client.indications()? {
                if let Indication::RdmapTerminate { error, .. } = i {
                    return Err(format!("the server terminated the RDMAP stream: {error}"));
                }
            }
            Ok(!completed.is_empty())
        })?;
        match completed.iter().find(|c| c.status != Status::Success) {
            Some(c) => Err(format!("{what} {} ended {}", c.wr_id, c.status)),
            None => Ok(completed),
        }
    }

    /// A region of DPDK hugepage memory (normal pages under `--no-huge`), added to the
    /// server's memory. It is freed with the last holder of the region table, before the EAL.
    fn dpdk_region(&mut self, eal: &Eal, len: usize) -> Result<RegionId, String> {
        let r = Region::from_dpdk(eal, len, None).map_err(|e| e.to_string())?;
        self.server
            .control
            .memory_mut()
            .add_region(r)
            .map_err(|_| "region table full".to_string())
    }

    /// Posts the client's next message (work request `wr` + 1) of `size` bytes on the stream,
    /// from `source` (a client region and offset, stamped first) or moved in; returns the
    /// CRC32c its bytes must have once placed.
    ///
    /// A source slot is filled with a pattern once ([`Loopback::run`]); each message then
    /// stamps its work request and offset into every [`STAMP_EVERY`] bytes of it rather than
    /// remaking every byte, so the harness is not what the row measures. Every DDP segment of
    /// a message spans a stamp (segments are longer than the interval, or the message is one
    /// segment), so a segment that was lost, misplaced or left over from an earlier message in
    /// the slot still changes the CRC32c.
    fn post_send(
        &mut self,
        cc: ConnHandle,
        wr: &mut u64,
        kind: SendKind,
        size: usize,
        source: Option<(RegionId, u64)>,
    ) -> Result<u32, String> {
        *wr += 1;
        let (crc, data) = match source {
            Some((region, offset)) => {
                let r = self
                    .client
                    .control
                    .memory()
                    .region(region)
                    .ok_or("source region gone")?;
                for at in (0..size).step_by(STAMP_EVERY) {
                    let mut stamp = [0u8; 16];
                    stamp[..8].copy_from_slice(&wr.to_le_bytes());
                    stamp[8..].copy_from_slice(&(at as u64).to_le_bytes());
                    let n = stamp.len().min(size - at);
                    r.place(offset + at as u64, &stamp[..n])
                        .map_err(|e| e.to_string())?;
                }
                let crc = r.crc32c(offset, size).map_err(|e| e.to_string())?;
                let len = u32::try_from(size).map_err(|e| e.to_string())?;
                (
                    crc,
                    Payload::Region {
                        region,
                        offset,
                        len,
                    },
                )
            }
            None => {
                let mut data = vec![0; size];
                fill_pattern(*wr, &mut data);
                (crc32c(&data), data.into())
            }
        };
        let req = SendRequest {
            wr_id: *wr,
            stream: STREAM,
            kind,
            data,
            signaled: true,
        };
        self.submit(false, cc, Op::PostSend(req))?;
        Ok(crc)
    }

    /// `n` tagged writes of `size` bytes, WINDOW in flight, each from its own slot of the
    /// client's `src` region to its own slot of the server's; every message's bytes are
    /// checked once it is delivered.
    #[allow(clippy::too_many_arguments)]
    fn tagged(
        &mut self,
        size: usize,
        n: usize,
        (stag, region): (Stag, RegionId),
        src: RegionId,
        wr: &mut u64,
        cc: ConnHandle,
        signalled: &AtomicBool,
    ) -> Result<Row, String> {
        let mut latency = hist()?;
        let t0 = Wall::now();
        let mut sent = 0usize;
        let mut inflight: Vec<InFlight<(usize, u32)>> = Vec::new();
        let mut done = 0usize;
        while done < n {
            while sent < n && inflight.len() < WINDOW {
                let slot = sent % WINDOW;
                let kind = SendKind::Tagged {
                    stag,
                    to: (slot * size) as u64,
                    rsvd_ulp: 0,
                };
                let from = (src, (slot * size) as u64);
                let crc = self.post_send(cc, wr, kind, size, Some(from))?;
                inflight.push((*wr, Wall::now(), (slot, crc)));
                sent += 1;
            }
            let mut completed = Vec::new();
            self.poll_until("tagged completions", signalled, |l| {
                completed.extend(l.client.completions());
                if let Some(e) = l.client.indications()?.into_iter().find_map(|i| match i {
                    Indication::Error { error, .. } => Some(error),
                    _ => None,
                }) {
                    return Err(format!("client refused a segment: {e}"));
                }
                Ok(!completed.is_empty())
            })?;
            for c in completed {
                if c.status != Status::Success {
                    return Err(format!("tagged write {} ended {}", c.wr_id, c.status));
                }
                let (slot, crc) = settle(&mut inflight, c.wr_id, &mut latency, "write")?;
                // Acknowledged by SCTP means received by the server's SCTP; its data core
                // placed it before acknowledging. Verify the bytes in the region.
                let r = self
                    .server
                    .control
                    .memory()
                    .region(region)
                    .ok_or("region gone")?;
                let got = r
                    .crc32c((slot * size) as u64, size)
                    .map_err(|e| e.to_string())?;
                if got != crc {
                    return Err(format!("tagged write of {size} bytes: placed bytes differ"));
                }
                done += 1;
            }
            // The deliveries the server's ULP is told about.
            for i in self.server.indications()? {
                if let Indication::Error { error, .. } = i {
                    return Err(format!("server refused a segment: {error}"));
                }
            }
        }
        Ok(Row {
            kind: "tagged",
            size,
            messages: n,
            secs: t0.elapsed().as_secs_f64(),
            latency,
        })
    }

    /// `n` untagged sends of `size` bytes, each into a buffer the server posted. The client
    /// sends a message only when the server's core has confirmed the buffer for it (the
    /// server's ULP grants credit after its post takes effect, as RDMA ULPs do).
    #[allow(clippy::too_many_arguments)]
    fn untagged(
        &mut self,
        size: usize,
        n: usize,
        pd: Pd,
        stag: Stag,
        region: RegionId,
        wr: &mut u64,
        cc: ConnHandle,
        sc: ConnHandle,
        signalled: &AtomicBool,
    ) -> Result<Row, String> {
        let slot_len = *UNTAGGED_SIZES.iter().max().unwrap_or(&0);
        let slots = 2 * WINDOW;
        let mut latency = hist()?;
        let t0 = Wall::now();
        let (mut posted, mut credit, mut sent, mut done, mut received) = (0, 0, 0, 0, 0);
        // (wr_id, posted at, slot, crc), in posting order = MSN order.
        let mut inflight: Vec<(u64, Wall, usize, u32)> = Vec::new();
        while done < n || received < n {
            // Receive buffers: as many as there are slots not holding an undelivered message.
            while posted < n && posted - received < slots {
                let slot = posted % slots;
                let buf = self
                    .server
                    .control
                    .memory()
                    .receive_buffer(pd, stag, (slot * slot_len) as u64, slot_len as u32)
                    .map_err(|e| e.to_string())?;
                self.submit(
                    true,
                    sc,
                    Op::PostRecv {
                        stream: STREAM,
                        qn: 0,
                        wr_id: slot as u64,
                        buffer: buf,
                    },
                )?;
                posted += 1;
            }
            credit += self.server.posted();
            while sent < credit && inflight.len() < WINDOW {
                let slot = sent % slots;
                let kind = SendKind::Untagged {
                    qn: 0,
                    rsvd_ulp: [0; 5],
                };
                let crc = self.post_send(cc, wr, kind, size, None)?;
                inflight.push((*wr, Wall::now(), slot, crc));
                sent += 1;
            }
            let mut events = Vec::new();
            let mut completions = Vec::new();
            self.poll_until("untagged messages", signalled, |l| {
                completions.extend(l.client.completions());
                events.extend(l.server.indications()?);
                let posts = l
                    .server
                    .log
                    .iter()
                    .any(|e| matches!(e, RtEvent::Posted { .. }));
                Ok(!completions.is_empty() || !events.is_empty() || posts)
            })?;
            for c in completions {
                if c.status != Status::Success {
                    return Err(format!("untagged send {} ended {}", c.wr_id, c.status));
                }
                done += 1;
            }
            for i in events {
                match i {
                    Indication::Received { wr_id, len, .. } => {
                        if inflight.is_empty() {
                            return Err("a message nobody sent".into());
                        }
                        let (_, at, slot, crc) = inflight.remove(0);
                        if wr_id != slot as u64 || len as usize != size {
                            return Err(format!(
                                "untagged message in buffer {wr_id}, {len} bytes; expected \
                                 buffer {slot}, {size} bytes"
                            ));
                        }
                        let r = self
                            .server
                            .control
                            .memory()
                            .region(region)
                            .ok_or("region gone")?;
                        let got = r
                            .crc32c((slot * slot_len) as u64, size)
                            .map_err(|e| e.to_string())?;
                        if got != crc {
                            return Err(format!("untagged message of {size} bytes differs"));
                        }
                        latency
                            .record(at.elapsed().as_nanos() as u64 / 1000)
                            .map_err(|e| e.to_string())?;
                        received += 1;
                    }
                    Indication::Error { error, .. } => {
                        return Err(format!("server refused a segment: {error}"))
                    }
                    _ => {}
                }
            }
        }
        // Every buffer posted was used: the credit matches.
        credit += self.server.posted();
        if credit != n {
            return Err(format!(
                "{credit} receive buffers confirmed for {n} messages"
            ));
        }
        Ok(Row {
            kind: "untagged",
            size,
            messages: n,
            secs: t0.elapsed().as_secs_f64(),
            latency,
        })
    }
}

/// What a `--pcap` tap wrote: frames, frames lost, and the first write error, for the run's
/// end to report (a full disk or `/dev/full` gave a cut capture and exit 0 without a word).
#[derive(Debug, Default)]
struct PcapState {
    written: u64,
    lost: u64,
    error: Option<String>,
}

/// The capture of a run, and what became of it.
struct Pcap {
    path: std::path::PathBuf,
    state: Arc<std::sync::Mutex<PcapState>>,
}

impl Pcap {
    /// An error if any frame was not written: the capture is incomplete.
    fn result(&self) -> Result<(), String> {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match &s.error {
            None => Ok(()),
            Some(e) => Err(format!(
                "--pcap {}: {} of {} frame(s) not written ({e}): the capture is incomplete",
                self.path.display(),
                s.lost,
                s.written + s.lost
            )),
        }
    }
}

/// A tap that writes every frame to a pcap file (microsecond timestamps, Ethernet link type):
/// what both endpoints transmit, so every frame on the wire once.
fn pcap_tap(path: &std::path::Path) -> Result<(ddpdk_control::xmit::Tap, Pcap), String> {
    use std::io::Write;
    let file =
        std::fs::File::create(path).map_err(|e| format!("--pcap {}: {e}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    // Global header: magic, version 2.4, GMT offset, accuracy, snaplen, LINKTYPE_ETHERNET.
    let mut header = Vec::new();
    header.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    header.extend_from_slice(&2u16.to_le_bytes());
    header.extend_from_slice(&4u16.to_le_bytes());
    for v in [0u32, 0, 65535, 1] {
        header.extend_from_slice(&v.to_le_bytes());
    }
    w.write_all(&header).map_err(|e| e.to_string())?;
    let pcap = Pcap {
        path: path.to_path_buf(),
        state: Arc::default(),
    };
    let state = Arc::clone(&pcap.state);
    let tap = move |frame: &[u8]| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let len = frame.len() as u32;
        let mut rec = Vec::with_capacity(16 + frame.len());
        for v in [t.as_secs() as u32, t.subsec_micros(), len, len] {
            rec.extend_from_slice(&v.to_le_bytes());
        }
        rec.extend_from_slice(frame);
        // A full disk loses capture records, never the transfer; the run's end says so.
        let written = w.write_all(&rec).and_then(|_| w.flush());
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        match written {
            Ok(()) => s.written += 1,
            Err(e) => {
                s.lost += 1;
                s.error.get_or_insert_with(|| e.to_string());
            }
        }
    };
    Ok((Arc::new(std::sync::Mutex::new(tap)), pcap))
}

/// A posted work request awaiting its completion: its id, when it was posted, and what the
/// check of its result needs.
type InFlight<T> = (u64, Wall, T);

/// Takes the completed work request `wr_id` out of `inflight`, records its latency in µs, and
/// returns what its check needs.
fn settle<T>(
    inflight: &mut Vec<InFlight<T>>,
    wr_id: u64,
    latency: &mut Histogram<u64>,
    what: &str,
) -> Result<T, String> {
    let k = inflight
        .iter()
        .position(|f| f.0 == wr_id)
        .ok_or_else(|| format!("completion of an unknown {what}"))?;
    let (_, posted, check) = inflight.remove(k);
    latency
        .record(posted.elapsed().as_nanos() as u64 / 1000)
        .map_err(|e| e.to_string())?;
    Ok(check)
}

fn hist() -> Result<Histogram<u64>, String> {
    Histogram::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())
}

/// Each side's data cores and control thread in words.
fn print_counters_text(stats: &[SideStats; 2]) {
    for (label, s) in ["client", "server"].iter().zip(stats) {
        for (k, c) in s.cores.iter().enumerate() {
            outln!(
                "{label} core {k}: {} frames in ({} chained), {} out, {} dispatched to / \
                 {} from other cores, {} to control ({} dropped), {} tx dropped, {} \
                 unresolved ({} held for ARP/ND, then sent); region spans sent by \
                 reference {}, inlined {}, copied {}",
                c.frames_in,
                c.rx_chained,
                c.tx.frames_out,
                c.dispatched_out,
                c.dispatched_in,
                c.to_control,
                c.control_dropped,
                c.tx.tx_dropped,
                c.tx.unresolved,
                c.tx.held_sent,
                c.tx.zero_copy_spans,
                c.tx.inlined_spans,
                c.tx.copied_spans,
            );
        }
        outln!(
            "{label} control: {} packets, {} replies, {} associations accepted, {} \
             opened, {} frames out",
            s.control.packets,
            s.control.replies,
            s.control.accepted,
            s.control.connected,
            s.control.tx.frames_out
        );
    }
}

/// Each side's data cores and control thread as JSON lines (`data_core` and `control`
/// objects, their counters named as in `show fwd stats all`; docs/telemetry.md). Not rows:
/// those carry `kind`, and a script reading every line with one as a row stays right.
fn print_counters_json(stats: &[SideStats; 2]) {
    for (side, s) in ["client", "server"].iter().zip(stats) {
        for (k, c) in s.cores.iter().enumerate() {
            let v = serde_json::json!({"data_core": {
                "side": side, "core": k,
                "frames_in": c.frames_in, "rx_chained": c.rx_chained,
                "frames_out": c.tx.frames_out,
                "dispatched_out": c.dispatched_out, "dispatched_in": c.dispatched_in,
                "to_control": c.to_control, "control_dropped": c.control_dropped,
                "tx_dropped": c.tx.tx_dropped, "unresolved": c.tx.unresolved,
                "held_sent": c.tx.held_sent,
                "zero_copy_spans": c.tx.zero_copy_spans,
                "inlined_spans": c.tx.inlined_spans, "copied_spans": c.tx.copied_spans,
            }});
            outln!("{v}");
        }
        let c = &s.control;
        let v = serde_json::json!({"control": {
            "side": side,
            "packets": c.packets, "replies": c.replies, "accepted": c.accepted,
            "connected": c.connected, "frames_out": c.tx.frames_out,
        }});
        outln!("{v}");
    }
}

fn print_rows(json: bool, rows: &[Row]) {
    if json {
        for r in rows {
            let v = serde_json::json!({
                "kind": r.kind,
                "size": r.size,
                "messages": r.messages,
                "seconds": r.secs,
                "mb_per_s": (r.size * r.messages) as f64 / r.secs / 1e6,
                "latency_us": {
                    "p50": r.latency.value_at_quantile(0.5),
                    "p99": r.latency.value_at_quantile(0.99),
                    "max": r.latency.max(),
                },
                "verified": true,
            });
            outln!("{v}");
        }
        return;
    }
    outln!(
        "  {:<8} {:>9} {:>8} {:>10} | latency us: {:>7} {:>7} {:>7} | bytes",
        "kind",
        "size",
        "msgs",
        "MB/s",
        "p50",
        "p99",
        "max"
    );
    for r in rows {
        outln!(
            "  {:<8} {:>9} {:>8} {:>10.1} |             {:>7} {:>7} {:>7} | verified",
            r.kind,
            r.size,
            r.messages,
            (r.size * r.messages) as f64 / r.secs / 1e6,
            r.latency.value_at_quantile(0.5),
            r.latency.value_at_quantile(0.99),
            r.latency.max()
        );
    }
}

fn registration(pd: Pd, region: RegionId, len: usize, access: Access) -> MemoryRegistration {
    MemoryRegistration {
        pd,
        region,
        offset: 0,
        len: len as u64,
        access,
        stream: None,
        to_base: 0,
    }
}

fn connected(log: &[Indication]) -> Option<(u16, usize)> {
    log.iter().find_map(|i| match i {
        Indication::Connected { streams, mulpdu } => Some((*streams, *mulpdu)),
        _ => None,
    })
}

fn has_session_event(log: &[Indication], f: impl Fn(&Event) -> bool) -> bool {
    log.iter()
        .any(|i| matches!(i, Indication::Session { stream: STREAM, event } if f(event)))
}

fn closed(log: &[Indication]) -> bool {
    log.iter().any(|i| {
        matches!(
            i,
            Indication::Closed(CloseReason::Shutdown | CloseReason::PeerAbort { .. })
        )
    })
}
