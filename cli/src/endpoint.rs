//! `--ddp-listen` / `--ddp-connect ADDR`: one DDP/SCTP endpoint on the EAL's first port (a
//! NIC, `net_memif`, `net_af_packet` ...), for two `ddpdk` processes or a peer elsewhere, on
//! the runtime the product ships ([`crate::node`]): its data cores on the EAL's worker lcores,
//! or, with none (`--lcores 0@N`), one data core polled by the main lcore between turns of the
//! control side, so that a whole endpoint runs on one CPU.
//!
//! The server (`--ddp-listen`) accepts associations and DDP Stream Sessions; for each session it
//! registers a region of DPDK memory for remote write and hands its STag, TO and length to the
//! client in the Accept's Private Data (RFC 5043 §5.2.3: Private Data is the ULP's; 20 bytes:
//! STag, TO, length, big-endian). The client (`--ddp-connect`) sets up the association and the
//! session, then writes tagged messages of `--ddp-size` bytes across that region,
//! `--ddp-window` in flight, for `--run-for` seconds, terminates the session, shuts the association down and
//! prints its goodput and latency. The server prints what it received when the association
//! ends.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant as Wall};

use ddpdk_control::conn::{
    Indication, Payload, PostError, RdmaOp, RdmaRequest, SendKind, SendRequest, Status,
};
use ddpdk_control::memory::{Memory, MemoryRegistration, RegionId, Registered};
use ddpdk_control::rdmap::{decode_private_data, RdmaLimits};
use ddpdk_control::runtime::{
    Backoff, ConnHandle, Control, CoreReport, CoreStats, Event, IdlePolicy, Op, RuntimeError,
    LIGHT_SLEEP,
};
use ddpdk_control::session::{Event as SessionEvent, LocalError, TerminationReason};
use ddpdk_control::xmit::TxStats;
use ddpdk_dataplane::mem::{Access, Stag};
use ddpdk_dataplane::port::dpdk::Eal;
use ddpdk_dataplane::port::faults::FaultCounts;
use ddpdk_dataplane::port::region::Region;
use ddpdk_dataplane::port::{Port, PortStats};
use ddpdk_dataplane::sctp::{CloseReason, Instant};
use ddpdk_dataplane::trace;
use hdrhistogram::Histogram;

use crate::app::note;
use crate::ipsec::KeySocket;
use crate::node::{exit_status, offer_bytes, Node, NodePort, Placement};
use crate::options::{DdpOp, DdpSource, Options};
use crate::soak::{self, Soak};
use crate::telemetry;
use crate::verify;

const STREAM: u16 = 1;
/// `--ddp-op read` checks one read in this many (and each sink slot's first) against the bytes
/// the server filled its region with: checking all would time the check more than the read.
const READ_CHECK_EVERY: u64 = 64;
/// The ULP's Private Data of a `--ddp-op read` client's RDMAP Initiate (after RDMAP's
/// parameters): it asks the server for a region it may read.
const READS_WANTED: &[u8] = b"ddpdk perf: read";

/// `--ddp-op read`'s check of what the reads brought: each sink slot's first read, and one in
/// [`READ_CHECK_EVERY`] after, against the bytes the server filled its region with
/// (`verify::fill_region`).
struct ReadCheck {
    sink: RegionId,
    size: usize,
    /// Reads in flight: read `r` lands in sink slot `r % window`.
    window: u64,
    /// Slots of the server's region: read `r` reads slot `r % slots`.
    slots: u64,
    got: Vec<u8>,
    want: Vec<u8>,
    checked: u64,
}

impl ReadCheck {
    fn new(sink: RegionId, size: usize, window: usize, slots: u64) -> ReadCheck {
        ReadCheck {
            sink,
            size,
            window: window as u64,
            slots,
            got: vec![0; size],
            want: vec![0; size],
            checked: 0,
        }
    }

    /// Read `r` completed: checks it if it is one to check.
    fn completed(&mut self, memory: &Memory, r: u64) -> Result<(), String> {
        if r >= self.window && !r.is_multiple_of(READ_CHECK_EVERY) {
            return Ok(());
        }
        let size = self.size;
        let from = (r % self.slots) * size as u64;
        memory
            .region(self.sink)
            .ok_or("the read sink is gone")?
            .read((r % self.window) * size as u64, &mut self.got)
            .map_err(|e| e.to_string())?;
        verify::fill_region(from, &mut self.want);
        if let Some(at) = self.got.iter().zip(&self.want).position(|(a, b)| a != b) {
            return Err(format!(
                "RDMA Read {r} of {size} bytes from offset {from} of the server's region \
                 brought a wrong byte at {at}: {:#04x}, not {:#04x}",
                self.got[at], self.want[at]
            ));
        }
        self.checked += 1;
        Ok(())
    }
}

/// Runs the endpoint and returns the exit status.
pub fn run(eal: Eal, opts: &Options, signalled: &AtomicBool) -> i32 {
    let mut counters = None;
    let r = Job::new(&eal, opts).and_then(|mut job| {
        let r = match opts.ddp_connect {
            Some(peer) => job.client(&eal, peer, opts, signalled),
            None => job.server(&eal, opts, signalled),
        };
        // Quiet (the last SHUTDOWN COMPLETE out), then every mbuf back.
        let quiet = Wall::now() + Duration::from_millis(200);
        while Wall::now() < quiet {
            job.poll();
        }
        // A run that failed reports IPsec too: an association that never came up over ESP is
        // most often keys or policies that do not match, and the counters say which.
        // Not after a client's report: a failure of its Terminate or SHUTDOWN comes after the
        // report, which said all of it.
        if r.is_err() && !job.reported {
            if opts.ddp_connect.is_some() {
                counters = job.report_failed_client(opts, signalled);
            }
            job.report_ipsec();
        }
        let left = job.close(&eal);
        r?;
        if left != 0 {
            return Err(format!("{left} mbufs not back in their pool"));
        }
        Ok(())
    });
    exit_status(r, opts.json, counters)
}

/// The endpoint and the ULP's view of it: the control side is polled here, with the data
/// core when it runs inline.
struct Job {
    node: Node,
    control: Control<NodePort>,
    events: VecDeque<Event>,
    /// Associations whose Closed indication has been seen (taken from `events` or not).
    closed: Vec<ConnHandle>,
    idle: Backoff,
    json: bool,
    /// The time of the last turn.
    now: Instant,
    /// The key manager's socket (`--ipsec-socket`); closed before the port.
    key_socket: Option<KeySocket>,
    /// Telemetry commands waiting for a snapshot; answered between turns.
    telemetry: Arc<telemetry::Hub>,
    /// Answering one now (a snapshot's wait for reports turns the loop too).
    answering: bool,
    /// The commands registered on DPDK's telemetry socket (none where it is off).
    _commands: Option<telemetry::Registered>,
    /// The link's state as last told, and when it is looked at next: a change is said (a
    /// memif server's link comes up when its client connects, and nothing said so).
    link_up: bool,
    link_check_at: Instant,
    /// When the link was seen to go down, while it stays down.
    link_down_at: Option<Instant>,
    /// The client's report is out (its counters and IPsec's with it).
    reported: bool,
}

/// How often a job looks at its link's state.
const LINK_CHECK: Duration = Duration::from_millis(250);

/// How long a perf client's link may stay down before the run ends: a memif server that
/// left took the link with it, and the client went on waiting for 10 s of no SACK (an
/// outside-in review); a NIC's link flapping for less goes on.
const LINK_DOWN_ENDS_RUN: Duration = Duration::from_secs(2);

/// How long a perf server's memif link may stay down before it takes its client for gone and
/// aborts the association: a client killed and started again within it re-associates (RFC
/// 9260 §5.2.4), and heartbeats set shorter still find it first.
const LINK_DOWN_ENDS_SERVED: Duration = Duration::from_secs(10);

/// What the perf server counts of the messages placed: by its loop, and after it (what the
/// cores delivered before the loop ended and it never took, counted all the same: the client
/// counts its completions, and each message placed was acknowledged).
#[derive(Default)]
struct Tally {
    delivered: u64,
    errors: u64,
    /// --ddp-verify: each tagged message's bytes are checked.
    verify: bool,
}

impl Tally {
    fn take(&mut self, i: &Indication, soak: &mut Soak, memory: &Memory) -> Result<(), String> {
        match *i {
            Indication::TaggedDelivered {
                stream,
                stag,
                rsvd_ulp,
            } => {
                self.delivered += 1;
                if self.verify {
                    soak.tagged(memory, stream, stag, rsvd_ulp)?;
                }
            }
            Indication::Error { ref error, .. } => {
                self.errors += 1;
                errln!("ddpdk: segment refused: {error}");
            }
            _ => {}
        }
        Ok(())
    }
}
impl Job {
    fn new(eal: &Eal, opts: &Options) -> Result<Job, String> {
        if opts.ip.is_empty() {
            return Err(
                "perf server and perf client (--ddp-listen, --ddp-connect) need --ip ADDR".into(),
            );
        }
        // A dual-stack endpoint (one --ip of each family) answers on both: the line names both.
        let ip = opts
            .ip
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" and ");
        let (mut node, control) = Node::start(
            eal,
            opts,
            "ddp_endpoint_pool",
            Placement::WorkersOrInline,
            16,
        )?;
        // A listener waits for its peer however long it takes (a memif server's link comes up
        // when the client connects); a client needs the link now.
        if opts.ddp_connect.is_some() && !node.link_up && opts.link_timeout > 0.0 {
            // A memif server that refuses the connection (more rings asked for than it has
            // queues) leaves the link down without a word to its client.
            let hint = if node.port.name().starts_with("net_memif") {
                format!(
                    ": is the memif server up, with {} queue pairs (as every ddpdk endpoint \
                     opens)?",
                    crate::node::MEMIF_QUEUE_PAIRS
                )
            } else {
                String::new()
            };
            return Err(format!(
                "{}: link down after {} s{hint}",
                node.port.name(),
                opts.link_timeout
            ));
        }
        // Where the heap cannot grow, what the ports' buffers left must hold a client's
        // regions: `--region-bytes 1000M` against `-m 1024` passed the check before the EAL and
        // failed at the first client, ending the server (an outside-in review).
        // DPDK's largest free block counts its element header, and an allocation needs one
        // and its alignment on top: a region just under the block failed all the same.
        const MALLOC_SLACK: u64 = 64 << 10;
        if opts.ddp_listen && opts.heap_fixed {
            let free = eal.heap_largest_free();
            if free < opts.server_region_bytes() + MALLOC_SLACK {
                return Err(format!(
                    "{}: the EAL's heap has {} MiB free in one piece once the ports took their \
                     buffers; give the EAL more with -m MB, or a smaller --region-bytes",
                    opts.region_bytes_named(),
                    free >> 20
                ));
            }
        }
        note(
            opts.json,
            format_args!(
                "DDP endpoint {ip} SCTP port {} on {} ({}); link {}; {} data core(s) {}; \
                 steering: {}; clock: {}{}",
                opts.sctp_port,
                node.port.name(),
                if opts.ddp_listen {
                    "listening"
                } else {
                    "connecting"
                },
                // A listener's memif port is the server's (a client's waits for the link,
                // or was told not to: --link-timeout 0).
                match (
                    node.link_up,
                    opts.ddp_listen && node.port.name().starts_with("net_memif"),
                ) {
                    (true, _) => "up",
                    (false, true) => "down until a memif client connects",
                    (false, false) => "down",
                },
                node.cores,
                if node.is_inline() {
                    "polled by the main lcore".to_string()
                } else {
                    format!("on lcore(s) {:?}", node.core_lcores)
                },
                node.steering,
                if node.clock.is_counting() {
                    "TSC"
                } else {
                    "monotonic"
                },
                node.idle_note(opts)
            ),
        );
        // The main lcore waits as an idle data core does (it may be polling one inline), its
        // sleeps ending on time; without the doorbells (nothing else polls the data core to
        // ring them when it runs here).
        let policy = if node.is_inline() {
            if let Err(e) = Eal::set_timer_slack(Duration::from_micros(1)) {
                errln!("ddpdk: {e}; idle sleeps end late");
            }
            opts.idle_policy()
        } else {
            IdlePolicy::default()
        };
        let key_socket = match &opts.ipsec_socket {
            Some(path) => Some(KeySocket::start(path, Arc::clone(&node.port))?),
            None => None,
        };
        crate::ipsec::announce(&node.port, opts.json, opts.ipsec_socket.as_deref());
        let now = node.clock.now();
        let idle = Backoff::new(policy, now);
        let hub = Arc::new(telemetry::Hub::default());
        let commands = match node.answer_telemetry(hub.source()) {
            Ok(r) => Some(r),
            Err(e) => {
                errln!("ddpdk: no telemetry commands: {e}");
                None
            }
        };
        let node_link_up = node.link_up;
        Ok(Job {
            node,
            control,
            events: VecDeque::new(),
            closed: Vec::new(),
            idle,
            json: opts.json,
            now,
            key_socket,
            telemetry: hub,
            answering: false,
            _commands: commands,
            link_up: node_link_up,
            link_check_at: now + LINK_CHECK,
            link_down_at: None,
            reported: false,
        })
    }

    /// Why association `conn` or one of its sessions ended, for a work request that completed
    /// in error (flushed): the Closed or SessionTerminated indication that ended it, which
    /// comes behind the flushed completions, looked for in the events queued and in those of
    /// the next 200 ms; empty when none comes. Without it a run cut short by a link that
    /// stayed down, a restarted peer's ABORT or an ICMP Protocol Unreachable said only "the
    /// session or association ended first".
    fn why_ended(&mut self, conn: ConnHandle) -> String {
        let until = self.node.clock.now() + Duration::from_millis(200);
        loop {
            let mut session = None;
            for e in &self.events {
                match e {
                    Event::Indication {
                        conn: c,
                        indication: Indication::Closed(reason),
                    } if *c == conn => return format!(" (the association closed: {reason})"),
                    Event::Indication {
                        conn: c,
                        indication:
                            Indication::Session {
                                event: SessionEvent::SessionTerminated { reason },
                                ..
                            },
                    } if *c == conn && session.is_none() => {
                        session = Some(format!(" (the session ended: {reason})"));
                    }
                    _ => {}
                }
            }
            // A session ends before its association does ("association ended"): the
            // association's own reason, if it comes, says more.
            if self.node.clock.now() >= until {
                return session.unwrap_or_default();
            }
            self.poll();
        }
    }

    /// One turn: the inline data core, then the control side; events queued. The clock is
    /// read once a turn (a read costs as much as handling a small packet on a VM).
    fn poll(&mut self) -> usize {
        self.now = self.node.clock.now();
        // Down, every turn (nothing else to do, and the link's coming is said before what
        // comes over it); up, four times a second.
        if !self.link_up || self.now >= self.link_check_at {
            self.link_check_at = self.now + LINK_CHECK;
            let up = self.node.port.link().up;
            if up != self.link_up {
                self.link_up = up;
                self.link_down_at = (!up).then_some(self.now);
                note(
                    self.json,
                    format_args!(
                        "{}: link {}",
                        self.node.port.name(),
                        if up { "up" } else { "down" }
                    ),
                );
            }
        }
        let mut n = self.node.poll_inline(self.now);
        n += self.control.poll(self.now);
        while let Some(e) = self.control.poll_event() {
            if let Event::Indication {
                conn,
                indication: Indication::Closed(_),
            } = &e
            {
                // The client asks about its one association; a server's long run keeps the
                // last few only.
                if self.closed.len() == 64 {
                    self.closed.remove(0);
                }
                self.closed.push(*conn);
            }
            self.events.push_back(e);
            n += 1;
        }
        if !self.answering && self.telemetry.wanted() {
            self.answering = true;
            let snapshot = self.snapshot();
            self.telemetry.answer(snapshot);
            self.answering = false;
        }
        n
    }

    /// What the telemetry commands report on, now.
    fn snapshot(&mut self) -> Result<telemetry::Snapshot, String> {
        let reports = self.reports(&AtomicBool::new(false))?;
        let mut snapshot = telemetry::Snapshot::of(reports, &self.control, self.node.clock);
        snapshot.ipsec = telemetry::IpsecTotals::of(&self.node.port);
        Ok(snapshot)
    }

    /// "the link went down N s ago and stayed down (did the `who` leave?)", once it has been
    /// down longer than `grace`: the peer of a memif link has left (a NIC's link flapping for
    /// less goes on). `self.now` is the last turn's: a stale one only shortens what is seen.
    fn link_lost_text(&self, who: &str, grace: Duration) -> Option<String> {
        let down = self.link_down_at.map(|at| self.now.saturating_since(at));
        down.filter(|&d| d > grace).map(|d| {
            format!(
                "{}: the link went down {:.1} s ago and stayed down (did the {who} leave?)",
                self.node.port.name(),
                d.as_secs_f64()
            )
        })
    }

    /// Polls until `done` finds what it waits for in the events (it takes what it uses).
    fn wait_for<T>(
        &mut self,
        what: &str,
        signalled: &AtomicBool,
        timeout: Duration,
        done: impl FnMut(&mut VecDeque<Event>) -> Option<T>,
    ) -> Result<T, String> {
        self.wait_for_peer(what, signalled, timeout, None, done)
    }

    /// [`wait_for`](Self::wait_for) something the peer `who` answers: the wait ends once the
    /// link has been down for [`LINK_DOWN_ENDS_RUN`], not at its timeout (a server that left
    /// after the last completion held its client 30 s for the Terminate and 30 more for the
    /// SHUTDOWN).
    fn wait_for_peer<T>(
        &mut self,
        what: &str,
        signalled: &AtomicBool,
        timeout: Duration,
        who: Option<&str>,
        mut done: impl FnMut(&mut VecDeque<Event>) -> Option<T>,
    ) -> Result<T, String> {
        let deadline = Wall::now() + timeout;
        loop {
            if let Some(t) = done(&mut self.events) {
                return Ok(t);
            }
            if signalled.load(Ordering::Relaxed) {
                return Err(format!("interrupted while waiting for {what}"));
            }
            if let Some(lost) = who.and_then(|who| self.link_lost_text(who, LINK_DOWN_ENDS_RUN)) {
                return Err(format!("{lost}, waiting for {what}"));
            }
            if Wall::now() > deadline {
                return Err(format!(
                    "timed out waiting for {what} ({} s)",
                    timeout.as_secs_f64()
                ));
            }
            let n = self.poll();
            self.pause(n);
        }
    }

    /// After a turn that did `work`: sleeps if the back-off says so, never past an inline
    /// data core's next timer, and briefly while frames wait for the device's ring
    /// ([`ddpdk_control::runtime::DataCore::sleep_limit`]; the control side's likewise).
    fn pause(&mut self, work: usize) {
        if let Some(d) = self.idle.after(self.now, work) {
            let mut d = self
                .node
                .inline_sleep_limit(self.now)
                .map_or(d, |l| d.min(l));
            if self.control.tx_backlogged() {
                d = d.min(LIGHT_SLEEP);
            }
            std::thread::sleep(d);
        }
    }

    /// Whether a session of `conn` was ended by the peer's Terminate, among the events not
    /// yet taken (as `why_ended` left them).
    fn peer_terminated(&self, conn: ConnHandle) -> bool {
        self.events.iter().any(|e| {
            matches!(e, Event::Indication {
                conn: c,
                indication: Indication::Session {
                    event: SessionEvent::SessionTerminated {
                        reason: TerminationReason::PeerTerminate,
                    },
                    ..
                },
            } if *c == conn)
        })
    }

    /// What the cores counted of a run whose writes stopped completing ([`StallFacts`]).
    fn stall_facts(
        &mut self,
        signalled: &AtomicBool,
        conn: ConnHandle,
    ) -> Result<StallFacts, String> {
        let reports = self.reports(signalled)?;
        let a = reports
            .iter()
            .flat_map(|r| &r.assocs)
            .find(|a| a.conn == conn);
        Ok(StallFacts {
            t3: a.map_or(0, |a| a.sctp.t3_expiries),
            sacks: a.map_or(0, |a| a.sctp.sacks_in),
            srtt: a.and_then(|a| a.srtt).unwrap_or_default(),
            cut: reports
                .iter()
                .flat_map(|r| r.drops())
                .filter(|(reason, _)| *reason == "malformed")
                .map(|(_, n)| n)
                .sum(),
        })
    }

    /// The data cores' reports.
    fn reports(&mut self, signalled: &AtomicBool) -> Result<Vec<CoreReport>, String> {
        if self.node.is_inline() {
            return Ok(self.node.inline_reports());
        }
        self.control.request_reports();
        let cores = self.node.cores;
        let mut got: Vec<CoreReport> = Vec::new();
        // No telemetry snapshot starts while this waits: its own request would take these
        // reports (the turns below see `answering`).
        let answering = std::mem::replace(&mut self.answering, true);
        let waited = self.wait_for("the data cores' reports", signalled, WAIT, |events| {
            events.retain(|e| match e {
                Event::Report(r) => {
                    // One a core: a late report of an earlier request is not a second core.
                    if !got.iter().any(|g| g.core == r.core) {
                        got.push((**r).clone());
                    }
                    false
                }
                _ => true,
            });
            (got.len() >= cores).then_some(())
        });
        self.answering = answering;
        waited?;
        got.sort_by_key(|r| r.core);
        Ok(got)
    }

    /// Frames sent, the control thread's with the data cores': it answers INITs and, after an
    /// ABORT, each DATA packet still in flight to the association as out of the blue (RFC
    /// 9260 §8.4 rule 8): a server's report left those out and its peer counted ~700 more
    /// frames in than the server said it sent.
    fn frames_out(&self, reports: &[CoreReport]) -> u64 {
        let cores: u64 = reports.iter().map(|r| r.stats.tx.frames_out).sum();
        cores + self.control.stats().tx.frames_out
    }

    /// The data cores' load counters, summed ([`CoreStats::busy_ns`]): two snapshots give
    /// the busy share between them.
    fn load(&mut self, signalled: &AtomicBool) -> Result<CoreStats, String> {
        Ok(self
            .reports(signalled)?
            .iter()
            .fold(CoreStats::default(), |sum, r| CoreStats {
                busy_ns: sum.busy_ns + r.stats.busy_ns,
                idle_ns: sum.idle_ns + r.stats.idle_ns,
                busy_turns: sum.busy_turns + r.stats.busy_turns,
                frames_in: sum.frames_in + r.stats.frames_in,
                tx: TxStats {
                    frames_out: sum.tx.frames_out + r.stats.tx.frames_out,
                    ..sum.tx
                },
                ..sum
            }))
    }

    /// Stops the data cores and the port; returns the mbufs not back in their pool.
    fn close(self, eal: &Eal) -> u32 {
        let Job {
            mut node,
            control,
            key_socket,
            ..
        } = self;
        drop(key_socket);
        node.halt(eal);
        node.close_port();
        // Buffers still in the control side's rings go back to the pool with it.
        drop(control);
        node.close()
    }

    fn server(&mut self, eal: &Eal, opts: &Options, signalled: &AtomicBool) -> Result<(), String> {
        let mut conn = None;
        let run = self.serve(eal, opts, signalled, &mut conn);
        // Whatever ended the run in error (a client this server cannot serve, a check that
        // failed), the client hears of it at once (RFC 9260 §9.1): a --ddp-verify server
        // refusing a client without it left that client to find out after 10 s.
        if let (Err(_), Some(c)) = (&run, conn) {
            self.abort(c);
        }
        run
    }

    fn serve(
        &mut self,
        eal: &Eal,
        opts: &Options,
        signalled: &AtomicBool,
        conn: &mut Option<ConnHandle>,
    ) -> Result<(), String> {
        let json = opts.json;
        let region_len = usize::try_from(opts.region_bytes).unwrap_or(usize::MAX);
        let mut tally = Tally {
            verify: opts.ddp_verify,
            ..Tally::default()
        };
        let mut deadline = opts
            .run_for
            .map(|s| Wall::now() + Duration::from_secs_f64(s));
        let mut closed = false;
        let mut link_lost_told = false;
        // The client's Terminate came: its run is ending, and SCTP's SHUTDOWN has timers of
        // its own (a frame held past the link's grace must not turn a clean end into an abort).
        let mut client_ending = false;
        // memif's link goes down when its peer's process does; a NIC's may come back.
        let memif = self.node.port.inner().inner().info().driver == "net_memif";
        // The cores' load when the association came up: the busy share is the transfer's.
        let mut load_from = CoreStats::default();
        // The regions offered, to checksum at the end (`mr checksum`).
        let mut offered: Vec<(u16, Stag, RegionId)> = Vec::new();
        // --ddp-verify: each session's message size and receive buffers, and what was checked.
        let mut soak = Soak::default();
        while !closed {
            if signalled.load(Ordering::Relaxed) || deadline.is_some_and(|d| Wall::now() > d) {
                break;
            }
            let n = self.poll();
            self.pause(n);
            // A client that left with its association up (killed) took a memif link with it.
            // The association ends within seconds, not minutes (a server that only
            // acknowledges runs no retransmission timer; only heartbeats, RFC 9260 §8.3, at
            // their default interval of 30 s, would find the client gone); its Closed
            // (LocalAbort) ends the loop below.
            if let Some(c) = conn.filter(|_| memif && !closed && !link_lost_told && !client_ending)
            {
                if let Some(lost) = self.link_lost_text("client", LINK_DOWN_ENDS_SERVED) {
                    note(json, format_args!("{lost}: its association is aborted"));
                    link_lost_told = true;
                    self.abort(c);
                }
            }
            while let Some(e) = self.events.pop_front() {
                let (c, i) = match e {
                    Event::Accepted { conn: c, .. } if conn.is_none() => {
                        // One association at a time: the run ends with it.
                        *conn = Some(c);
                        deadline = None;
                        note(json, format_args!("Association accepted"));
                        load_from = self.load(signalled)?;
                        continue;
                    }
                    Event::Indication {
                        conn: c,
                        indication,
                    } if Some(c) == *conn => (c, indication),
                    // --ddp-verify: a buffer checked and posted again just as the client ended
                    // the session (its last Send raced its Terminate) has nothing to receive.
                    // Likewise a credit sent as the session ended (the server sends nothing
                    // else).
                    Event::Refused {
                        op: "post_recv" | "post_send",
                        error: PostError::Session(LocalError::Terminated) | PostError::NotConnected,
                        ..
                    } => continue,
                    Event::Refused { op, error, .. } => {
                        return Err(crate::node::refusal(op, error));
                    }
                    _ => continue,
                };
                match i {
                    Indication::Session {
                        stream,
                        event: SessionEvent::InitiateReceived { private_data },
                    } => {
                        // An RDMAP Initiate (RFC 5040 §6's parameters first in its Private
                        // Data) gets an RDMAP stream, so RDMA Reads and their checks reach it.
                        let rdmap_ulp = decode_private_data(private_data.as_bytes());
                        let rdmap = rdmap_ulp.is_some();
                        // A perf client that reads (--ddp-op read) asks for it in its Initiate.
                        let reads = rdmap_ulp.is_some_and(|(_, ulp)| ulp == READS_WANTED);
                        if opts.ddp_verify && rdmap && stream == soak::READ_BACK_STREAM {
                            // The client's read-back (soak::ReadBack): it checks what it reads
                            // itself, and RDMA Writes are not indicated here (RFC 5040 §5.1).
                            let access =
                                Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
                            let made =
                                self.offer(eal, c, stream, region_len, (rdmap, false), access);
                            self.or_abort(c, made)?;
                            continue;
                        }
                        // The region of a client that reads (--ddp-op read) may be read, and holds
                        // bytes each read can be checked by; any other is for remote writes
                        // alone (a Read of it is refused: RFC 5040 §7.2).
                        let access = if reads {
                            Access::REMOTE_WRITE | Access::REMOTE_READ
                        } else {
                            Access::REMOTE_WRITE
                        };
                        let made = self.offer(eal, c, stream, region_len, (rdmap, reads), access);
                        let (stag, region, pd) = self.or_abort(c, made)?;
                        offered.push((stream, stag, region));
                        if opts.ddp_verify {
                            let size = soak::message_size(private_data.as_bytes(), region_len)?;
                            let (recv_stag, recv_region) = self.post_receives(
                                eal,
                                c,
                                (stream, pd),
                                soak::RECV_BUFFERS,
                                soak::RECV_LEN,
                            )?;
                            soak.sessions.push(soak::Session::new(
                                stream,
                                (stag, region),
                                region_len,
                                size,
                                (pd, recv_stag, recv_region),
                            ));
                        }
                    }
                    Indication::TaggedDelivered { .. } | Indication::Error { .. } => {
                        tally.take(&i, &mut soak, self.control.memory())?;
                    }
                    Indication::Received {
                        stream, wr_id, len, ..
                    } if opts.ddp_verify => {
                        soak.untagged(self.control.memory(), stream, wr_id, len)?;
                        // The buffer is checked: post it again.
                        let buffer = soak.receive_buffer(self.control.memory(), stream, wr_id)?;
                        let op = Op::PostRecv {
                            stream,
                            qn: 0,
                            wr_id,
                            buffer,
                        };
                        self.control.submit(c, op).map_err(|e| e.to_string())?;
                    }
                    Indication::Session {
                        event: SessionEvent::TerminateReceived,
                        ..
                    } => client_ending = true,
                    Indication::Session {
                        stream,
                        event: SessionEvent::SessionTerminated { reason },
                    } => {
                        // The client's own Terminate; not a restart's AssociationEnded (the
                        // restarted client may leave again).
                        client_ending |= reason == TerminationReason::PeerTerminate;
                        note(json, format_args!("Session {stream} terminated: {reason}"));
                    }
                    Indication::Closed(reason) => {
                        note(json, format_args!("Association closed: {reason}"));
                        closed = true;
                    }
                    // RFC 9260 §5.2.4: the peer came back with a new association on the same
                    // addresses and ports; its sessions ended, and it opens new ones.
                    Indication::PeerRestarted => {
                        // A new client, whose end is still to come.
                        client_ending = false;
                        note(
                            json,
                            format_args!("Association restarted by the peer (RFC 9260 §5.2.4)"),
                        );
                    }
                    _ => {}
                }
            }
            if let Some(c) = conn.filter(|_| opts.ddp_verify) {
                self.send_credits(c, &mut soak, n == 0)?;
            }
        }
        // Interrupted, or out of time, with the association up: an ABORT tells the client at
        // once (RFC 9260 §9.1), instead of its retransmissions giving up seconds later.
        if let Some(c) = conn.filter(|_| !closed) {
            self.abort(c);
        }
        // Its counters alone, all 0, did not say that nobody came (an outside-in review).
        if conn.is_none() {
            note(
                json,
                format_args!(
                    "server: no client came{}",
                    match opts.run_for {
                        Some(s) if !signalled.load(Ordering::Relaxed) =>
                            format!(" in --run-for's {s} s"),
                        _ => " before the signal".to_owned(),
                    }
                ),
            );
        }
        // The packets still on their way (the client's DATA in flight when the ABORT went,
        // each answered as out of the blue by the control thread) are answered before the
        // report counts what was sent: it was taken while the control thread still held some
        // (26 frames short of what the client counted, in a CI run).
        self.quiesce();
        // What the cores delivered before the loop ended (or before the ABORT) and the loop
        // never took is delivered all the same: the client counts its completions (each
        // message placed was acknowledged).
        if let Some(c) = *conn {
            for e in std::mem::take(&mut self.events) {
                if let Event::Indication {
                    conn: from,
                    indication,
                } = e
                {
                    if from == c {
                        tally.take(&indication, &mut soak, self.control.memory())?;
                    }
                }
            }
        }
        let Tally {
            delivered, errors, ..
        } = tally;
        // The report is made whatever ended the run: a signal ends the loop, not the questions
        // to the data cores (on worker lcores they answer through a channel).
        let finishing = AtomicBool::new(false);
        let load = self.load(&finishing)?;
        let (busy, batch) = (
            load.busy_share(&load_from),
            load.frames_per_busy_turn(&load_from),
        );
        // What was placed, for the client to compare with what it wrote.
        let mut regions = Vec::new();
        for (stream, stag, r) in offered {
            if let Some(region) = self.control.memory().region(r) {
                let crc = region.crc32c(0, region.len()).map_err(|e| e.to_string())?;
                regions.push(
                    serde_json::json!({"stream": stream, "stag": stag.to_string(),
                    "crc32c": format!("{crc:#010x}"), "len": region.len()}),
                );
                note(
                    json,
                    format_args!(
                        "Session {stream} region STag {stag}: crc32c {crc:#010x} over {} bytes",
                        region.len()
                    ),
                );
            }
        }
        let reports = self.reports(&finishing)?;
        let drops = Drops::of(&reports, self.node.port.stats());
        let frames_in: u64 = reports.iter().map(|r| r.stats.frames_in).sum();
        let frames_out = self.frames_out(&reports);
        let reads_served: u64 = reports.iter().map(|r| r.conn_totals.reads_served).sum();
        note(
            json,
            format_args!(
                "server: {delivered} tagged messages delivered, {errors} errors{}; {frames_in} frames in, {frames_out} out; {}; data cores busy {}, {} frames a busy turn",
                if reads_served > 0 {
                    format!(", {reads_served} RDMA Reads served")
                } else {
                    String::new()
                },
                faults_text(self.node.port.inner().counts()),
                percent(busy),
                per_turn(batch)
            ),
        );
        if json {
            // The server's half of the run, as the client prints `ddp_goodput`: scripts compare
            // each region's crc32c with the client's `region_crc32c`.
            outln!(
                "{}",
                serde_json::json!({"ddp_server": {
                    "delivered": delivered, "reads_served": reads_served, "errors": errors,
                    "frames_in": frames_in,
                    "frames_out": frames_out, "cores_busy": busy,
                    "frames_per_busy_turn": batch, "regions": regions,
                    "faults": faults_json(self.node.port.inner().counts()),
                    "drops": drops.json(), "cores": cores_json(&reports)}})
            );
        } else if let Some(text) = drops.text(opts.mtu) {
            outln!("server: {text}");
        }
        if opts.ddp_verify {
            soak.report(json);
        }
        accounted(&reports, "server", opts)?;
        self.report_ipsec();
        if errors > 0 {
            return Err(format!("{errors} segments refused"));
        }
        Ok(())
    }

    /// --ddp-verify, the client: the credit in receive buffer `wr_id` of the credit
    /// registration (the count of messages the server has checked), the buffer posted again.
    fn credit(
        &mut self,
        conn: ConnHandle,
        (stag, region): (Stag, RegionId),
        (stream, pd): (u16, ddpdk_dataplane::mem::Pd),
        (wr_id, len): (u64, u32),
    ) -> Result<u64, String> {
        if len as usize != soak::CREDIT_LEN {
            return Err(format!(
                "--ddp-verify: a credit of {len} bytes, not {} (give --ddp-verify to both ends)",
                soak::CREDIT_LEN
            ));
        }
        let at = wr_id * soak::CREDIT_LEN as u64;
        let mut b = [0u8; soak::CREDIT_LEN];
        let mem = self.control.memory();
        mem.region(region)
            .ok_or("--ddp-verify: the credit region is gone")?
            .read(at, &mut b)
            .map_err(|e| e.to_string())?;
        let buffer = mem
            .receive_buffer(pd, stag, at, soak::CREDIT_LEN as u32)
            .map_err(|e| e.to_string())?;
        let op = Op::PostRecv {
            stream,
            qn: 0,
            wr_id,
            buffer,
        };
        match self.control.submit(conn, op) {
            // The core's command ring is full: one credit buffer fewer of 128, not an error.
            Ok(()) | Err(RuntimeError::Busy) => {}
            Err(e) => return Err(e.to_string()),
        }
        Ok(u64::from_be_bytes(b))
    }

    /// --ddp-verify: tells the client how many messages of each session are checked, where a
    /// credit is due (see `soak`); one taken by the core counts as sent.
    fn send_credits(
        &mut self,
        conn: ConnHandle,
        soak: &mut Soak,
        idle: bool,
    ) -> Result<(), String> {
        for s in &mut soak.sessions {
            let Some(credit) = s.credit_due(idle) else {
                continue;
            };
            let op = Op::PostSend(SendRequest {
                wr_id: u64::MAX,
                stream: s.stream(),
                kind: SendKind::Untagged {
                    qn: 0,
                    rsvd_ulp: [0; 5],
                },
                data: credit.to_be_bytes().to_vec().into(),
                signaled: false,
            });
            match self.control.submit(conn, op) {
                Ok(()) => s.credited(credit),
                // The core's command ring is full: next turn.
                Err(RuntimeError::Busy) => return Ok(()),
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(())
    }

    /// --ddp-verify: registers a receive region of `count` buffers of `len` bytes for
    /// `stream`'s untagged messages in its protection domain and posts every buffer of it
    /// (work request k: buffer k); returns the registration.
    fn post_receives(
        &mut self,
        eal: &Eal,
        conn: ConnHandle,
        (stream, pd): (u16, ddpdk_dataplane::mem::Pd),
        count: usize,
        len: usize,
    ) -> Result<(Stag, RegionId), String> {
        let (reg, r) = self.register_new(eal, pd, count * len, Access::LOCAL_WRITE)?;
        for k in 0..count {
            let buffer = self
                .control
                .memory()
                .receive_buffer(pd, reg.stag, (k * len) as u64, len as u32)
                .map_err(|e| e.to_string())?;
            let op = Op::PostRecv {
                stream,
                qn: 0,
                wr_id: k as u64,
                buffer,
            };
            self.control.submit(conn, op).map_err(|e| e.to_string())?;
        }
        Ok((reg.stag, r))
    }

    /// A new region of `len` bytes of DPDK memory, registered whole in `pd` with `access`.
    fn register_new(
        &mut self,
        eal: &Eal,
        pd: ddpdk_dataplane::mem::Pd,
        len: usize,
        access: Access,
    ) -> Result<(Registered, RegionId), String> {
        let m = self.control.memory_mut();
        let region = Region::from_dpdk(eal, len, None).map_err(|e| e.to_string())?;
        let r = m
            .add_region(region)
            .map_err(|_| "region table full".to_string())?;
        let reg = m
            .register(MemoryRegistration {
                pd,
                region: r,
                offset: 0,
                len: len as u64,
                access,
                stream: None,
                to_base: 0,
            })
            .map_err(|e| e.to_string())?;
        Ok((reg, r))
    }

    /// A client run that failed (its association cut short, the server silent) reports what
    /// its counters saw up to then, as a finished run's report does: the frames each way,
    /// the drops by reason, the faults injected, the DDP segments and bytes. In words unless
    /// `--json`; the JSON object is returned for `run_error` (found by an outside-in test: a
    /// failed run printed its error alone, where the counters say why most often).
    fn report_failed_client(
        &mut self,
        opts: &Options,
        signalled: &AtomicBool,
    ) -> Option<serde_json::Value> {
        // A signal cuts the wait for the cores' reports short, as it does a run's.
        let reports = self.reports(signalled).ok()?;
        let drops = Drops::of(&reports, self.node.port.stats());
        let faults = self.node.port.inner().counts();
        let sum = |f: fn(&CoreReport) -> u64| reports.iter().map(f).sum::<u64>();
        let frames_in = sum(|r| r.stats.frames_in);
        let frames_out = self.frames_out(&reports);
        let segments_out = sum(|r| r.conn_totals.segments_out);
        let segments_in = sum(|r| r.conn_totals.segments_in);
        let fast = sum(|r| r.conn_totals.fast_retransmits);
        let t3 = sum(|r| r.conn_totals.t3_retransmits);
        if opts.json {
            return Some(serde_json::json!({
                "frames_in": frames_in, "frames_out": frames_out,
                "ddp_segments_out": segments_out, "ddp_segments_in": segments_in,
                "fast_retransmits": fast, "t3_retransmits": t3,
                "faults": faults_json(faults), "drops": drops.json(),
                "cores": cores_json(&reports)}));
        }
        outln!(
            "client: up to the failure: {frames_in} frames in, {frames_out} out; \
             {segments_out} DDP segments out, {segments_in} in; chunks retransmitted: {fast} \
             fast, {t3} after T3"
        );
        if faults != FaultCounts::default() {
            outln!("client: {}", faults_text(faults));
        }
        if let Some(text) = drops.text(opts.mtu) {
            outln!("client: {text}");
        }
        None
    }

    /// `show ipsec` at the end of a run, when IPsec is on.
    fn report_ipsec(&self) {
        let port = &self.node.port;
        if !port.is_enabled() {
            return;
        }
        if self.json {
            outln!("{}", crate::ipsec::show_json(port));
        } else {
            outln!("{}", crate::ipsec::show_text(port));
        }
    }

    /// Registers a region for the session the peer initiates on `stream` and accepts it,
    /// offering the region in the Accept's Private Data (after RDMAP's parameters when the
    /// session is `rdmap`), first filled with [`verify::fill_region`]'s bytes if `fill`. The
    /// region grants `access`: remote writes only but for a client that asked to read and
    /// the --ddp-verify read-back, so an RDMA Read of it is an access-rights violation (RFC
    /// 5040 §7.2).
    fn offer(
        &mut self,
        eal: &Eal,
        conn: ConnHandle,
        stream: u16,
        len: usize,
        (rdmap, fill): (bool, bool),
        access: Access,
    ) -> Result<(Stag, RegionId, ddpdk_dataplane::mem::Pd), String> {
        let pd = self.control.memory_mut().alloc_pd();
        let (reg, r) = self.register_new(eal, pd, len, access)?;
        // Filled before the Accept can leave: a data core on a lcore of its own may send it
        // at once, and the client's first read may follow at once.
        if fill {
            self.fill_for_reads(r)?;
        }
        let offer = offer_bytes(&reg);
        let op = if rdmap {
            Op::AcceptRdmap {
                stream,
                pd,
                limits: RdmaLimits::default(),
                private_data: offer,
            }
        } else {
            Op::Accept {
                stream,
                pd,
                private_data: offer,
            }
        };
        self.control.submit(conn, op).map_err(|e| e.to_string())?;
        note(
            self.json,
            format_args!(
                "Session {stream} accepted: STag {} TO {} length {}",
                reg.stag, reg.to_base, reg.len
            ),
        );
        Ok((reg.stag, r, pd))
    }

    fn client(
        &mut self,
        eal: &Eal,
        peer: IpAddr,
        opts: &Options,
        signalled: &AtomicBool,
    ) -> Result<(), String> {
        // Its options' conflicts were refused before the EAL (`Options::validate`).
        let now = self.node.clock.now();
        let conn = self
            .control
            .connect(now, peer, opts.sctp_port)
            .map_err(|e| e.to_string())?;
        let run = self.client_run(eal, conn, opts, signalled);
        if run.is_err() {
            // Whatever ended the run (a signal, a refusal, a peer gone quiet), the server
            // hears of it at once (RFC 9260 §9.1) instead of holding the association until
            // its heartbeats give up.
            self.abort(conn);
        }
        run
    }

    /// Sends an ABORT on `conn` unless it is closed already, and waits briefly until it is.
    /// `r`, after aborting `conn` if it failed: a server that cannot offer a session's region
    /// ends, and its client hears so at once (it waited 30 s for an Accept before).
    fn or_abort<T>(&mut self, conn: ConnHandle, r: Result<T, String>) -> Result<T, String> {
        if r.is_err() {
            self.abort(conn);
        }
        r
    }

    /// Turns the loop until nothing has come or been done for 20 ms (500 ms at most): the
    /// frames on their way are in, and answered.
    fn quiesce(&mut self) {
        let quiet_for = Duration::from_millis(20);
        let give_up = Wall::now() + Duration::from_millis(500);
        let mut quiet_since = Wall::now();
        let mut frames_in = self.frames_in_now();
        while Wall::now() < give_up {
            let worked = self.poll() > 0;
            let now_in = self.frames_in_now();
            if worked || now_in != frames_in {
                frames_in = now_in;
                quiet_since = Wall::now();
            } else if quiet_since.elapsed() >= quiet_for {
                return;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Frames the port has received so far (its own counter: the data cores' reports would
    /// take a round trip to each).
    fn frames_in_now(&self) -> u64 {
        self.node.port.stats().rx_packets
    }

    fn abort(&mut self, conn: ConnHandle) {
        // Closed already (the peer aborted, or its ABORT came with the error): nothing to
        // send, and no second Closed to wait for.
        if self.closed.contains(&conn) || self.control.submit(conn, Op::Abort).is_err() {
            return;
        }
        let deadline = Wall::now() + Duration::from_millis(500);
        while Wall::now() < deadline {
            self.poll();
            if self.closed.contains(&conn) {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Fills a region offered to RDMA Reads with [`verify::fill_region`]'s bytes, which the
    /// client checks its reads against.
    fn fill_for_reads(&mut self, r: RegionId) -> Result<(), String> {
        let region = self
            .control
            .memory()
            .region(r)
            .ok_or("the offered region is gone")?;
        let mut chunk = vec![0u8; 1 << 20];
        let len = region.len() as u64;
        let mut at = 0u64;
        while at < len {
            let n = chunk.len().min((len - at) as usize);
            verify::fill_region(at, &mut chunk[..n]);
            region.place(at, &chunk[..n]).map_err(|e| e.to_string())?;
            at += n as u64;
        }
        Ok(())
    }

    /// --ddp-verify: opens the RDMAP read-back session (soak::ReadBack) on its own stream, in
    /// protection domain `pd`, and registers its sink.
    fn read_back(
        &mut self,
        eal: &Eal,
        conn: ConnHandle,
        pd: ddpdk_dataplane::mem::Pd,
        size: usize,
        signalled: &AtomicBool,
    ) -> Result<soak::ReadBack, String> {
        let stream = soak::READ_BACK_STREAM;
        let op = Op::InitiateRdmap {
            stream,
            pd,
            limits: RdmaLimits::default(),
            private_data: Vec::new(),
        };
        self.control.submit(conn, op).map_err(|e| e.to_string())?;
        let accepted = self.wait_for_peer("the read-back Accept", signalled, WAIT, Some("server"), |events| {
            take(events, |e| {
                matches!(e, Event::Indication { conn: c, indication: Indication::Session {
                    stream: s, event: SessionEvent::Accepted { .. } } } if *c == conn && *s == stream)
            })
        })?;
        let bytes = accepted_data(accepted);
        // The offer follows RDMAP's parameters (RFC 5040 §6).
        let offer = decode_private_data(&bytes).map_or(&bytes[..], |(_, ulp)| ulp);
        let (stag, to, len) = offered(offer)?;
        let (sink, sink_region) =
            self.register_new(eal, pd, soak::ReadBack::sink_len(size), Access::LOCAL_WRITE)?;
        soak::ReadBack::new((stag, to, len), size, (sink.stag, sink_region))
    }

    /// `e` (the association never came up) with what the data cores saw: a peer that never
    /// answered ARP or Neighbor Discovery (RFC 1122 §2.3.2.1: the INITs to it were dropped
    /// unresolved), or no frame at all.
    fn why_no_association(&mut self, e: String, opts: &Options, signalled: &AtomicBool) -> String {
        let Ok(reports) = self.reports(signalled) else {
            return e;
        };
        let unresolved: u64 = reports.iter().map(|r| r.stats.tx.unresolved).sum();
        let frames_in: u64 = reports.iter().map(|r| r.stats.frames_in).sum();
        let peer = opts.ddp_connect.map(|a| a.to_string()).unwrap_or_default();
        // DPDK's tap port answers to its kernel interface's Ethernet address, and a kernel
        // bridge takes frames to one of its ports' addresses for itself: on a bridged tap no
        // reply ever reaches the port (docs/usage.md "Other virtual devices").
        let port = self.node.port.name();
        let e = if port.starts_with("net_tap") && opts.mac.is_none() {
            format!(
                "{e} ({port} answers to its kernel interface's Ethernet address: if that \
                 interface is on a kernel bridge, the bridge keeps frames to it for itself; give \
                 the endpoint an Ethernet address of its own with --mac)"
            )
        } else {
            e
        };
        // Frames --fault-drop took never reached IPsec or a core, yet arrived (an outside-in
        // review: `--fault-drop 1` was told "no frame arrived on the port"; the injector is
        // below IPsec, so it goes first).
        let faulted = self.node.port.inner().counts().dropped;
        let ipsec = telemetry::IpsecTotals::of(&self.node.port);
        if faulted > 0 && frames_in == 0 {
            format!(
                "{e}: --fault-drop dropped every frame that arrived, the peer's answers among \
                 them"
            )
        } else if let Some(t) = ipsec.filter(|t| {
            let refused = t.inbound.auth_failed
                + t.inbound.replay
                + t.inbound.malformed
                + t.drops.no_sa
                + t.drops.clear_refused
                + t.drops.policy_mismatch
                + t.drops.no_policy_in
                + t.drops.no_policy_out;
            refused > 0 || t.inbound.packets == 0
        }) {
            // What IPsec dropped never reaches a data core: the usual cause when ESP is on.
            format!(
                "{e}: IPsec sealed {} packet(s) out and opened {} in; it dropped {} failing \
                 their ICV, {} for no SA, {} in the clear where ESP is required, {} against \
                 their SA's policy, {} out and {} in that no policy names (RFC 4301 §5 discards \
                 them): do both ends' SAs (SPIs, keys) and policies match, and name this \
                 peer's traffic? (show ipsec's table)",
                t.outbound.packets,
                t.inbound.packets,
                t.inbound.auth_failed,
                t.drops.no_sa,
                t.drops.clear_refused,
                t.drops.policy_mismatch,
                t.drops.no_policy_out,
                t.drops.no_policy_in
            )
        } else {
            match crate::node::unreached(frames_in, unresolved, &peer, true) {
                Some(why) => format!("{e}: {why}"),
                None => e,
            }
        }
    }

    /// The client's run on the association `conn` (set up from here on): session, writes,
    /// report, Terminate and SHUTDOWN.
    fn client_run(
        &mut self,
        eal: &Eal,
        conn: ConnHandle,
        opts: &Options,
        signalled: &AtomicBool,
    ) -> Result<(), String> {
        let json = opts.json;
        let size = usize::try_from(opts.ddp_size).unwrap_or(usize::MAX);
        let verify = opts.ddp_verify;
        let is = |e: &Event, f: &dyn Fn(&Indication) -> bool| matches!(e, Event::Indication { conn: c, indication } if *c == conn && f(indication));
        // `--run-for` bounds the wait too (3 s at least, for INIT's retransmissions): a peer
        // that never answers (policies that do not match, a server not there) held a 3 s run
        // for 30.
        let setup = opts
            .run_for
            .map_or(WAIT, |s| WAIT.min(Duration::from_secs_f64(s.max(3.0))));
        let up = self
            .wait_for("the association", signalled, setup, |events| {
                take(events, |e| {
                    is(e, &|i| {
                        matches!(i, Indication::Connected { .. } | Indication::Closed(_))
                    })
                })
            })
            .map_err(|e| self.why_no_association(e, opts, signalled))?;
        if let Event::Indication {
            indication: Indication::Closed(reason),
            ..
        } = up
        {
            return Err(match reason {
                // An ABORT in answer to the INIT: nothing listens on that port (§8.4 rule 3).
                CloseReason::PeerAbort { .. } => format!(
                    "the server refused the association ({reason}): is a perf server \
                     listening on SCTP port {}?",
                    opts.sctp_port
                ),
                _ => self.why_no_association(
                    format!("the association ended before it was up: {reason}"),
                    opts,
                    signalled,
                ),
            });
        }
        // RFC 5043 §9: the largest DDP segment this path takes now (a write is cut into
        // segments of it; a path MTU change later moves it), for the session's line.
        let mut mulpdu = None;
        // The streams perf uses must exist (RFC 5043 §8: the least of both ends' counts), or
        // the Initiate is refused and the wait for its Accept ran out its 30 s.
        if let Event::Indication {
            indication: Indication::Connected { streams, mulpdu: m },
            ..
        } = up
        {
            mulpdu = Some(m);
            let needs = if verify {
                soak::READ_BACK_STREAM
            } else {
                STREAM
            } + 1;
            if streams < needs {
                return Err(format!(
                    "the association has {streams} stream(s) (the least of both ends' \
                     --streams): perf needs {needs} (stream {STREAM}{})",
                    if verify {
                        format!(
                            ", and {} for --ddp-verify's read-back",
                            soak::READ_BACK_STREAM
                        )
                    } else {
                        String::new()
                    }
                ));
            }
        }
        let pd = self.control.memory_mut().alloc_pd();
        let reads = opts.ddp_op == DdpOp::Read;
        let op = if reads {
            // RFC 5040 §6: our ORD is the reads we keep in flight; the server's IRD caps it.
            Op::InitiateRdmap {
                stream: STREAM,
                pd,
                limits: RdmaLimits {
                    ord: u16::try_from(opts.ddp_window).unwrap_or(u16::MAX),
                    ..RdmaLimits::default()
                },
                private_data: READS_WANTED.to_vec(),
            }
        } else {
            Op::Initiate {
                stream: STREAM,
                pd,
                // --ddp-verify: the server checks messages of this size.
                private_data: if verify {
                    soak::initiate_data(size)
                } else {
                    Vec::new()
                },
            }
        };
        self.control.submit(conn, op).map_err(|e| e.to_string())?;
        // The Accept, or what ends the wait for it at once: a Reject, the session's end, the
        // association's (a server that cannot offer its region aborts; the wait ran out its
        // 30 s before).
        let offer =
            self.wait_for_peer("the Accept", signalled, WAIT, Some("server"), |events| {
                take(events, |e| {
                    is(e, &|i| {
                        matches!(
                            i,
                            Indication::Session {
                                event: SessionEvent::Accepted { .. }
                                    | SessionEvent::Rejected { .. }
                                    | SessionEvent::TerminateReceived
                                    | SessionEvent::SessionTerminated { .. },
                                ..
                            } | Indication::Closed(_)
                        )
                    })
                })
            })?;
        match &offer {
            Event::Indication {
                indication:
                    Indication::Session {
                        event: SessionEvent::Accepted { .. },
                        ..
                    },
                ..
            } => {}
            Event::Indication {
                indication: Indication::Closed(why),
                ..
            } => return Err(format!("the association ended before the Accept: {why}")),
            Event::Indication {
                indication: Indication::Session { event, .. },
                ..
            } => {
                return Err(match event {
                    SessionEvent::Rejected { .. } => "the server rejected the session".into(),
                    SessionEvent::SessionTerminated { reason } => {
                        format!("the session ended before the Accept: {reason}")
                    }
                    _ => "the server ended the session before accepting it".into(),
                })
            }
            other => return Err(format!("the server did not accept the session: {other:?}")),
        }
        let accepted = accepted_data(offer);
        // An RDMAP Accept carries RDMAP's parameters before the offer (RFC 5040 §6).
        // The server's IRD caps our ORD (RFC 5040 §6): the reads that really travel at once.
        let (offer, peer_ird) = match decode_private_data(&accepted) {
            Some((limits, ulp)) if reads => (ulp, Some(limits.ird)),
            _ => (&accepted[..], None),
        };
        let (stag, to, len) = offered(offer)?;
        // A write (or read) past the offered region would be refused by the server (RFC 5041
        // §7.1 check 4) and end the session: say so before the first one.
        if size as u64 > len {
            return Err(format!(
                "--ddp-size {size} is more than the {len} bytes the server offered; give \
                 --ddp-size at most {len} (or a larger --region-bytes on the server)"
            ));
        }
        let slots = if verify {
            soak::slots(usize::try_from(len).unwrap_or(usize::MAX), size)
        } else {
            (len / size as u64).max(1)
        };
        // Two writes to one slot in flight at once could land in either order (their segments
        // travel unordered): the region's final image would be undefined.
        if verify && opts.ddp_window as u64 > slots {
            return Err(format!(
                "--ddp-verify: {} writes in flight over {slots} slots of the region; give \
                 --ddp-window at most {slots} (or a larger --region-bytes on the server)",
                opts.ddp_window
            ));
        }
        note(
            json,
            format_args!(
                "Session {STREAM} accepted: {} {size}-byte messages {} STag {stag}{}",
                if reads { "reading" } else { "writing" },
                if reads { "from" } else { "to" },
                mulpdu.map_or(String::new(), |m| format!(" (MULPDU {m} bytes)"))
            ),
        );
        // --ddp-verify: the server's credits (soak.rs) arrive in these; at most this many
        // messages beyond the last.
        let credits = if verify {
            Some(self.post_receives(
                eal,
                conn,
                (STREAM, pd),
                soak::CREDIT_BUFFERS,
                soak::CREDIT_LEN,
            )?)
        } else {
            None
        };
        let credit_window = soak::credit_window(slots);
        let mut credited = 0u64;
        // --ddp-verify: the RDMAP read-back beside the checked traffic, and its next request.
        let mut read_back = if verify {
            Some(self.read_back(eal, conn, pd, size, signalled)?)
        } else {
            None
        };
        let mut read_back_next: Option<RdmaRequest> = None;
        // --ddp-op read: where the reads land, a slot for each one in flight (local write).
        let window = opts.ddp_window as usize;
        let sink = if reads {
            Some(self.register_new(eal, pd, size * window, Access::LOCAL_WRITE)?)
        } else {
            None
        };
        let mut read_check = sink
            .as_ref()
            .map(|&(_, region)| ReadCheck::new(region, size, window, slots));

        let data: Vec<u8> = (0..size).map(|i| (i as u8).wrapping_mul(31)).collect();
        // Every write sends the same bytes: from one registered region of DPDK memory (RFC
        // 4296's local buffer, sent by reference where the port chains mbufs), or moved in.
        let source = match opts.ddp_source {
            // --ddp-verify: every message is made for its write, so it is moved in.
            _ if verify || reads => None,
            DdpSource::Region => {
                let r = Region::from_dpdk(eal, size, None).map_err(|e| e.to_string())?;
                r.place(0, &data).map_err(|e| e.to_string())?;
                let region = self
                    .control
                    .memory_mut()
                    .add_region(r)
                    .map_err(|_| "region table full".to_string())?;
                Some(Payload::Region {
                    region,
                    offset: 0,
                    len: u32::try_from(size).map_err(|e| e.to_string())?,
                })
            }
            DdpSource::Bytes => None,
        };
        // Nanoseconds: a lone small write completes in microseconds.
        let mut latency =
            Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).map_err(|e| e.to_string())?;
        // --ddp-messages alone runs until they complete (perftest's --iters): it stopped at the
        // default 5 s and reported the messages done as if they were all (an outside-in
        // review). A year stands for "no limit": the stall checks below still end a run
        // whose peer stopped answering.
        let secs = opts.run_for.unwrap_or(if opts.ddp_messages.is_some() {
            365.0 * 86_400.0
        } else {
            5.0
        });
        self.poll();
        let load_from = self.load(signalled)?;
        let t0 = self.now;
        let end = t0 + Duration::from_secs_f64(secs);
        // (work request, posted at, tagged).
        let mut posted: VecDeque<(u64, Instant, bool)> = VecDeque::new();
        let (mut wr, mut done) = (0u64, 0u64);
        // --ddp-verify: tagged writes and untagged sends posted, and sends completed.
        let (mut tagged, mut untagged, mut untagged_done) = (0u64, 0u64, 0u64);
        // The turn's clock (one read per turn, in `poll`).
        let mut w = t0;
        // The last completion (or the start). A run in which none comes for `quiet`, and no
        // SACK either over the last `quiet` of it, has lost its peer, whatever SCTP's own
        // failure detection (minutes, with RTO.Max) will say later. SACKs still coming mean
        // a live peer and a chunk SCTP is still retransmitting (RTO backoff, a lossy link).
        let mut progress = t0;
        let mut last_done = t0;
        // The last completion of anything (a write, a send, the read-back's).
        let mut last_any = t0;
        let quiet = QUIET.max(Duration::from_millis(opts.rto_min_ms.saturating_mul(4)));
        let drain_least =
            DRAIN_AFTER_RUN.max(Duration::from_millis(opts.rto_min_ms.saturating_mul(4)));
        let mut drain: Option<Duration> = None;
        let mut sacks_seen: Option<u64> = None;
        // What the run's work requests are called in its messages.
        let (one, many) = if opts.ddp_op == DdpOp::Read {
            ("read", "reads")
        } else {
            ("write", "writes")
        };
        // What was done so far, for a run that ends early.
        let so_far = |done: u64, at: Instant| {
            let secs = at.saturating_since(t0).as_secs_f64();
            format!(
                "{done} {many} of {size} bytes completed in {secs:.2} s ({:.1} MB/s)",
                (done * size as u64) as f64 / secs.max(1e-9) / 1e6
            )
        };
        // Posting goes on until --run-for ends or --ddp-messages were posted.
        let limit = opts.ddp_messages;
        let posting = |w: Instant, wr: u64| w < end && limit.is_none_or(|n| wr < n);
        while posting(w, wr)
            || !posted.is_empty()
            || read_back_next.is_some()
            || read_back.as_ref().is_some_and(soak::ReadBack::busy)
        {
            if signalled.load(Ordering::Relaxed) {
                return Err(format!("interrupted: {}", so_far(done, w)));
            }
            if let Some(rb) = read_back.as_mut() {
                read_back_next = read_back_next.or_else(|| rb.next(posting(w, wr)));
            }
            if let Some(req) = read_back_next.take() {
                match self.control.submit(conn, Op::PostRdma(req.clone())) {
                    Ok(()) => {}
                    Err(RuntimeError::Busy) => read_back_next = Some(req),
                    Err(e) => return Err(e.to_string()),
                }
            }
            while posted.len() < window
                && posting(w, wr)
                && (!verify || wr < credited + credit_window)
            {
                let send_untagged = verify && untagged < tagged / soak::UNTAGGED_EVERY;
                let op = if let Some((sink, _)) = &sink {
                    // RFC 5040 §5.2: the next slot of the server's region into this read's
                    // slot of the sink.
                    Op::PostRdma(RdmaRequest {
                        wr_id: wr,
                        stream: STREAM,
                        op: RdmaOp::Read {
                            source: stag,
                            source_to: to + (wr % slots) * size as u64,
                            sink: sink.stag,
                            sink_to: (wr % window as u64) * size as u64,
                            len: u32::try_from(size).map_err(|e| e.to_string())?,
                        },
                        data: Payload::Bytes(Vec::new()),
                        signaled: true,
                    })
                } else {
                    let (kind, payload) = if send_untagged {
                        let mut m = vec![0; soak::untagged_len(untagged)];
                        verify::fill(soak::UNTAGGED + untagged, &mut m);
                        let kind = SendKind::Untagged {
                            qn: 0,
                            rsvd_ulp: [0; 5],
                        };
                        (kind, m.into())
                    } else {
                        let slot = tagged % slots;
                        let payload = if verify {
                            let mut m = vec![0; size];
                            verify::fill(tagged, &mut m);
                            m.into()
                        } else {
                            source.clone().unwrap_or_else(|| data.clone().into())
                        };
                        let kind = SendKind::Tagged {
                            stag,
                            to: to + slot * size as u64,
                            // --ddp-verify: the slot, for the server to check (at most 256).
                            rsvd_ulp: if verify { slot as u8 } else { 0 },
                        };
                        (kind, payload)
                    };
                    Op::PostSend(SendRequest {
                        wr_id: wr,
                        stream: STREAM,
                        kind,
                        data: payload,
                        signaled: true,
                    })
                };
                // ib_write_lat's bounds: from the post to the completion seen by the ULP, each
                // read when it happens rather than at the start of the turn around it. An
                // inline data core takes the write at once and sends it.
                let at = self.node.clock.now();
                trace::mark(trace::Point::Post);
                match self
                    .control
                    .submit_inline(conn, op, self.node.inline_cores(), at)
                {
                    Ok(()) => {}
                    // The core's command ring is full: the rest next turn.
                    Err(RuntimeError::Busy) => break,
                    Err(e) => return Err(e.to_string()),
                }
                posted.push_back((wr, at, !send_untagged));
                wr += 1;
                if send_untagged {
                    untagged += 1;
                } else {
                    tagged += 1;
                }
            }
            self.poll();
            w = self.now;
            while let Some(e) = self.events.pop_front() {
                match e {
                    Event::Completion { completion: c, .. }
                        if c.stream == soak::READ_BACK_STREAM =>
                    {
                        if c.status != Status::Success {
                            return Err(format!(
                                "--ddp-verify: read-back work request {} ended {}{}; {}",
                                c.wr_id,
                                c.status,
                                self.why_ended(conn),
                                so_far(done, w)
                            ));
                        }
                        (progress, last_any) = (w, w);
                        if let Some(rb) = read_back.as_mut() {
                            read_back_next = rb.completed(self.control.memory())?;
                        }
                    }
                    Event::Completion { completion: c, .. } => {
                        if c.status != Status::Success {
                            return Err(format!(
                                "{one} {} ended {}{}; {}",
                                c.wr_id,
                                c.status,
                                self.why_ended(conn),
                                so_far(done, w)
                            ));
                        }
                        (progress, last_done, last_any, sacks_seen) = (w, w, w, None);
                        match posted.pop_front() {
                            Some((_, at, true)) => {
                                let seen = self.node.clock.now();
                                trace::mark(trace::Point::Seen);
                                let _ = latency.record(seen.saturating_since(at).as_nanos() as u64);
                                done += 1;
                                if let Some(check) = read_check.as_mut() {
                                    check.completed(self.control.memory(), c.wr_id)?;
                                }
                            }
                            Some((_, _, false)) => untagged_done += 1,
                            None => done += 1,
                        }
                    }
                    Event::Refused { op, error, .. } => {
                        let why = self.why_ended(conn);
                        let hint = verify_hint(verify && self.peer_terminated(conn));
                        return Err(format!(
                            "{}{why}{hint}; {}",
                            crate::node::refusal(op, error),
                            so_far(done, w)
                        ));
                    }
                    Event::Indication {
                        indication:
                            Indication::Received {
                                stream, wr_id, len, ..
                            },
                        ..
                    } => {
                        if let Some(reg) = credits {
                            let c = self.credit(conn, reg, (stream, pd), (wr_id, len))?;
                            credited = credited.max(c);
                        }
                    }
                    Event::Indication {
                        indication: Indication::Closed(reason),
                        ..
                    } => {
                        return Err(format!(
                            "the association closed: {reason}; {}",
                            so_far(done, w)
                        ))
                    }
                    Event::Indication {
                        indication:
                            Indication::Session {
                                event: SessionEvent::SessionTerminated { reason },
                                ..
                            },
                        ..
                    } => {
                        let hint =
                            verify_hint(verify && reason == TerminationReason::PeerTerminate);
                        return Err(format!(
                            "the session ended: {reason}{hint}; {}",
                            so_far(done, w)
                        ));
                    }
                    _ => {}
                }
            }
            let waiting =
                !posted.is_empty() || read_back.as_ref().is_some_and(soak::ReadBack::busy);
            if let Some(lost) = self.link_lost_text("server", LINK_DOWN_ENDS_RUN) {
                // The rate to the last completion: the seconds since were the link's.
                return Err(format!("{lost}; {}", so_far(done, last_done)));
            }
            // --run-for bounds the run (docs/usage.md): once it is over, what is still
            // outstanding ends the run if nothing completes for 8 smoothed round trips (a lost
            // last packet goes again after T3-rtx, whose RTO is about 2 of them on a steady
            // path), at least 2 s (a loaded machine may hold the peer that long) and 4
            // RTO.Min, at most the stall check's 10 s; a slow run whose writes still complete
            // goes on. Not the RTO itself: a stalled path has backed it off to seconds. A
            // stalled peer held every run for those 10 s (found by an outside-in test:
            // `--run-for 2` against a server of a smaller --mtu took 11.6 s).
            if waiting && w > end && drain.is_none() {
                let srtt = self.stall_facts(signalled, conn)?.srtt;
                drain = Some((srtt * 8).clamp(drain_least, quiet * 2));
            }
            if waiting && drain.is_some_and(|d| w.saturating_since(end.max(last_any)) > d) {
                let facts = self.stall_facts(signalled, conn)?;
                let read_back_busy = read_back.as_ref().is_some_and(soak::ReadBack::busy);
                let what = match (posted.len(), read_back_busy) {
                    (0, _) => "the --ddp-verify read-back".to_owned(),
                    (n, false) => format!("{n} {many}"),
                    (n, true) => format!("{n} {many} and the --ddp-verify read-back"),
                };
                let run = if opts.run_for.is_some() {
                    format!("--run-for's {secs} s")
                } else {
                    format!("the run's {secs} s (the default --run-for)")
                };
                let last = if done == 0 {
                    "none completed".to_owned()
                } else {
                    format!(
                        "the last completed {:.1} s before",
                        w.saturating_since(last_done).as_secs_f64()
                    )
                };
                return Err(format!(
                    "{what} still outstanding {:.1} s after {run} ({last}; {} retransmission \
                     timeouts): did the server stop acknowledging?; {}{}",
                    w.saturating_since(end).as_secs_f64(),
                    facts.t3,
                    so_far(done, w),
                    stall_hint(facts.cut, done, opts.mtu)
                ));
            }
            if waiting && w.saturating_since(progress) > quiet {
                let StallFacts { t3, sacks, cut, .. } = self.stall_facts(signalled, conn)?;
                if sacks_seen.is_some_and(|s| s == sacks) {
                    let hint = stall_hint(cut, done, opts.mtu);
                    return Err(format!(
                        "no {one} completed for {} s and no SACK came for the last {}: the \
                         server stopped acknowledging ({t3} retransmission timeouts); {}{hint}",
                        w.saturating_since(last_done).as_secs(),
                        quiet.as_secs(),
                        so_far(done, w)
                    ));
                }
                // Look again in `quiet`.
                sacks_seen = Some(sacks);
                progress = w;
            }
        }
        // To now, not to the last turn's start: the last completions were seen (and their
        // latencies taken) after it, and a short run of `--ddp-messages` read as 7 reads of
        // 1.3 ms in 24 µs (found by an outside-in test).
        let elapsed = self.node.clock.now().saturating_since(t0).as_secs_f64();
        let load = self.load(signalled)?;
        let (busy, batch) = (
            load.busy_share(&load_from),
            load.frames_per_busy_turn(&load_from),
        );
        // What the offered region must hold now: the message in every slot written at least
        // once, zeros elsewhere (DPDK hands out zeroed memory).
        // --ddp-verify: the last message written to each slot.
        let expected_crc = {
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            let mut image = vec![0u8; len];
            // --ddp-op read: what the server filled it with, which reads leave as it was.
            let written = if reads {
                verify::fill_region(0, &mut image);
                0
            } else {
                done.min(slots) as usize
            };
            for slot in 0..written {
                let at = &mut image[slot * size..(slot + 1) * size];
                if verify {
                    let last = slot as u64 + (done - 1 - slot as u64) / slots * slots;
                    verify::fill(last, at);
                } else {
                    at.copy_from_slice(&data);
                }
            }
            ddpdk_dataplane::wire::crc32c::crc32c(&image)
        };
        let bytes = done * size as u64;
        let goodput = bytes as f64 / elapsed;
        let reports = self.reports(signalled)?;
        let drops = Drops::of(&reports, self.node.port.stats());
        let by_reference: u64 = reports.iter().map(|r| r.stats.tx.zero_copy_spans).sum();
        let copied: u64 = reports.iter().map(|r| r.stats.tx.copied_spans).sum();
        let inlined: u64 = reports.iter().map(|r| r.stats.tx.inlined_spans).sum();
        let sctp = reports
            .iter()
            .flat_map(|r| &r.assocs)
            .find(|a| a.conn == conn)
            .map(|a| (a.sctp, a.cwnd))
            .unwrap_or_default();
        // The session's end and the association's: what fails here (a server that left after
        // the last completion, a signal) is told after the report, whose figures stand (every
        // message counted was acknowledged); it was lost with them.
        let ended = self.end_client_run(conn, signalled, is);
        let reads_checked = read_check.map_or(0, |c| c.checked);
        if json {
            let v = serde_json::json!({
                "ddp_goodput": {
                    "op": if reads { "read" } else { "write" },
                    "reads_checked": reads_checked,
                    "region_crc32c": format!("{expected_crc:#010x}"),
                    "region_len": len,
                    "size": size,
                    "messages": done,
                    // What --ddp-messages asked for: more than `messages` when --run-for
                    // ended the run first.
                    "ddp_messages": opts.ddp_messages,
                    "seconds": elapsed,
                    "bytes_per_s": goodput,
                    // A reader sends no bytes: no source (it said `region`, the default);
                    // --ddp-verify's messages are made for each write and moved in, as
                    // `bytes` (it said `region` too).
                    "source": (!reads).then(|| if verify { "bytes".to_owned() } else {
                        format!("{:?}", opts.ddp_source).to_lowercase() }),
                    "mulpdu": mulpdu,
                    "spans_by_reference": by_reference,
                    "spans_copied": copied,
                    "spans_inlined": inlined,
                    "faults": faults_json(self.node.port.inner().counts()),
                    "drops": drops.json(),
                    "cores": cores_json(&reports),
                    "verify": verify,
                    "untagged": untagged_done,
                    "read_back": read_back.as_ref().map(|rb| serde_json::json!({
                        "writes": rb.writes, "reads": rb.reads, "adds": rb.adds})),
                    "cores_busy": busy,
                    "frames_per_busy_turn": batch,
                    "sctp": {
                        "packets_out": sctp.0.packets_out,
                        "data_out": sctp.0.data_out,
                        "sacks_in": sctp.0.sacks_in,
                        "fast_retransmits": sctp.0.fast_retransmits,
                        "t3_expiries": sctp.0.t3_expiries,
                        "t3_retransmits": sctp.0.t3_retransmits,
                        "cwnd": sctp.1,
                    },
                    // The most in flight: --ddp-window, less where fewer messages never
                    // fill it or the server's IRD caps the reads (it kept --ddp-window).
                    "window": opts.ddp_messages.map_or(window as u64, |n| n.min(window as u64))
                        .min(peer_ird.map_or(u64::MAX, u64::from)),
                    "ddp_window": window,
                    "peer_ird": peer_ird,
                    "latency_us": {
                        "p50": us(latency.value_at_quantile(0.5)),
                        "p99": us(latency.value_at_quantile(0.99)),
                        "max": us(latency.max()),
                    },
                }
            });
            outln!("{v}");
        } else {
            // Fewer messages than the window never fill it (found by an outside-in test:
            // `--ddp-messages 10` said "16 in flight").
            let by_messages = opts.ddp_messages.filter(|&n| n < window as u64);
            let in_flight = match peer_ird {
                Some(ird)
                    if usize::from(ird) < window
                        && by_messages.is_none_or(|n| n >= u64::from(ird)) =>
                {
                    format!("{ird} in flight: --ddp-window {window} capped by the server's IRD")
                }
                _ => match by_messages {
                    Some(n) => format!("at most {n} in flight: --ddp-messages {n}"),
                    None => format!("{window} in flight"),
                },
            };
            outln!(
                "client: {done} {} of {size} bytes in {elapsed:.2} s ({in_flight}): \
                 {:.1} MB/s, latency p50 {:.1} us, p99 {:.1} us",
                if reads { "RDMA Reads" } else { "tagged writes" },
                goodput / 1e6,
                us(latency.value_at_quantile(0.5)),
                us(latency.value_at_quantile(0.99))
            );
            // --ddp-messages counts every post, --ddp-verify's untagged Sends with the writes.
            if let Some(n) = opts.ddp_messages.filter(|&n| done + untagged_done < n) {
                outln!(
                    "client: --run-for {secs} s ended the run after {} of --ddp-messages {n}",
                    done + untagged_done
                );
            }
            outln!("client: the server's region must have crc32c {expected_crc:#010x} over {len} bytes");
            if reads {
                outln!("client: {reads_checked} reads checked byte for byte against the server's region");
            }
            if verify {
                outln!(
                    "client: --ddp-verify: distinct self-checking messages, and {untagged_done} \
                     untagged sends"
                );
                if let Some(rb) = &read_back {
                    outln!(
                        "client: --ddp-verify: {} RDMA Writes read back whole, {} Fetch-and-Adds \
                         counted right (RDMAP stream {})",
                        rb.reads,
                        rb.adds,
                        soak::READ_BACK_STREAM
                    );
                }
            }
            // Only writes from the region have spans to send (reads and --ddp-verify's
            // moved-in messages printed "0, copied 0"), and small writes' go inline in the
            // frame (an outside-in review saw "0, copied 0" after 728060 writes of 64 bytes).
            if source.is_some() {
                outln!(
                    "client: region spans sent by reference {by_reference}, copied {copied}, \
                     inlined {inlined}"
                );
            }
            outln!(
                "client: data cores busy {}, {} frames a busy turn",
                percent(busy),
                per_turn(batch)
            );
            let faults = self.node.port.inner().counts();
            if faults != FaultCounts::default() {
                outln!("client: {}", faults_text(faults));
            }
            if let Some(text) = drops.text(opts.mtu) {
                outln!("client: {text}");
            }
            outln!(
                "client: SCTP {} packets out ({} DATA), {} SACKs in, {} fast retransmits, {} T3 \
                 expiries ({} chunks), cwnd {} bytes",
                sctp.0.packets_out,
                sctp.0.data_out,
                sctp.0.sacks_in,
                sctp.0.fast_retransmits,
                sctp.0.t3_expiries,
                sctp.0.t3_retransmits,
                sctp.1
            );
        }
        let accounted = accounted(&reports, "client", opts);
        self.report_ipsec();
        self.reported = true;
        let ended = ended.map_err(|e| {
            format!("{e} (the figures above stand: each message they count completed)")
        });
        match (accounted, ended) {
            (Err(a), Err(e)) => Err(format!("{a}; {e}")),
            (a, e) => a.and(e),
        }
    }

    /// A client's Terminate of its session (RFC 5043 §6.2), answered by the server's, then
    /// its SHUTDOWN (RFC 9260 §9.2).
    fn end_client_run(
        &mut self,
        conn: ConnHandle,
        signalled: &AtomicBool,
        is: impl Fn(&Event, &dyn Fn(&Indication) -> bool) -> bool,
    ) -> Result<(), String> {
        self.control
            .submit(conn, Op::Terminate { stream: STREAM })
            .map_err(|e| e.to_string())?;
        // The association's end ends either wait too, with its reason (a server interrupted
        // after the last completion sends an ABORT), unless it is the end waited for.
        let ended = |what: &str, e: Event, awaited: Option<CloseReason>| match e {
            Event::Indication {
                indication: Indication::Closed(reason),
                ..
            } if Some(reason) != awaited => Err(format!(
                "the association closed ({reason}), waiting for {what}"
            )),
            _ => Ok(()),
        };
        let what = "the peer's Terminate";
        let e = self.wait_for_peer(what, signalled, WAIT, Some("server"), |events| {
            take(events, |e| {
                is(e, &|i| {
                    matches!(
                        i,
                        Indication::Session {
                            event: SessionEvent::TerminateReceived,
                            ..
                        } | Indication::Closed(_)
                    )
                })
            })
        })?;
        ended(what, e, None)?;
        self.control
            .submit(conn, Op::Shutdown)
            .map_err(|e| e.to_string())?;
        let what = "the SHUTDOWN";
        let e = self.wait_for_peer(what, signalled, WAIT, Some("server"), |events| {
            take(events, |e| is(e, &|i| matches!(i, Indication::Closed(_))))
        })?;
        ended(what, e, Some(CloseReason::Shutdown))?;
        Ok(())
    }
}

/// The Private Data of an Accept event (none for any other).
fn accepted_data(e: Event) -> Vec<u8> {
    match e {
        Event::Indication {
            indication:
                Indication::Session {
                    event: SessionEvent::Accepted { private_data },
                    ..
                },
            ..
        } => private_data.as_bytes().to_vec(),
        _ => Vec::new(),
    }
}

/// The STag, base Tagged Offset and length a server's Accept offers.
fn offered(offer: &[u8]) -> Result<(Stag, u64, u64), String> {
    crate::node::parse_offer(offer).ok_or_else(|| {
        format!(
            "the server's Accept carries {} bytes, not an STag offer",
            offer.len()
        )
    })
}

/// Checks that every frame each data core took is counted once, by its fate
/// ([`CoreReport::unaccounted`]): a warning, or under --ddp-verify (the soak) an error.
fn accounted(reports: &[CoreReport], who: &str, opts: &Options) -> Result<(), String> {
    let wrong: Vec<String> = reports.iter().flat_map(CoreReport::unaccounted).collect();
    if wrong.is_empty() {
        if opts.ddp_verify {
            note(
                opts.json,
                format_args!("{who}: every frame counted once, by its fate"),
            );
        }
        return Ok(());
    }
    let text = format!("{who}: frame counters disagree: {}", wrong.join("; "));
    if opts.ddp_verify {
        return Err(text);
    }
    errln!("ddpdk: {text}");
    Ok(())
}

/// What an end dropped: its data cores' drops by reason ([`CoreReport::drops`]) and its
/// port's own (frames the device missed or refused before ddpdk saw them).
struct Drops {
    by_reason: Vec<(&'static str, u64)>,
    port: [(&'static str, u64); 4],
}

impl Drops {
    fn of(reports: &[CoreReport], port: PortStats) -> Drops {
        let mut by_reason: Vec<(&'static str, u64)> = Vec::new();
        for (name, n) in reports.iter().flat_map(CoreReport::drops) {
            match by_reason.iter_mut().find(|(k, _)| *k == name) {
                Some((_, sum)) => *sum += n,
                None => by_reason.push((name, n)),
            }
        }
        by_reason.retain(|&(_, n)| n > 0);
        Drops {
            by_reason,
            port: [
                ("port_rx_missed", port.rx_missed),
                ("port_rx_errors", port.rx_errors),
                ("port_rx_nombuf", port.rx_nombuf),
                ("port_tx_errors", port.tx_errors),
            ],
        }
    }

    fn all(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        let port = self.port.iter().copied().filter(|&(_, n)| n > 0);
        self.by_reason.iter().copied().chain(port)
    }

    /// One line naming every non-zero drop, and what the likeliest cause of the telling ones
    /// is; `None` when nothing was dropped.
    /// Frames for other hosts on a shared link (a kernel's IPv6 chatter on a veth, say) are
    /// said apart from what this end lost: they were never its traffic.
    fn text(&self, mtu: u16) -> Option<String> {
        let not_for_us = |k: &str| matches!(k, "not_ours" | "arp_nd_not_for_us");
        let list = |ours: bool| -> Vec<String> {
            self.all()
                .filter(|&(k, _)| not_for_us(k) != ours)
                .map(|(k, n)| format!("{k} {n}"))
                .collect()
        };
        let (lost, ignored) = (list(true), list(false));
        let mut parts = Vec::new();
        if !lost.is_empty() {
            let mut text = format!("dropped {}", lost.join(", "));
            if self.all().any(|(k, _)| k == "address_conflict") {
                text.push_str(
                    " (address_conflict: another host on the link sends from this end's --ip; \
                     give one of them another address)",
                );
            }
            if self.all().any(|(k, _)| k == "rx_too_long") {
                text.push_str(&format!(
                    " (rx_too_long: frames longer than this end's buffers: is the peer's \
                     --mtu larger than this end's {mtu}?)"
                ));
            }
            parts.push(text);
        }
        if !ignored.is_empty() {
            parts.push(format!(
                "ignored frames not for this end: {}",
                ignored.join(", ")
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    fn json(&self) -> serde_json::Value {
        serde_json::Value::Object(
            self.all()
                .map(|(k, n)| (k.to_string(), serde_json::Value::from(n)))
                .collect(),
        )
    }
}

/// What the fault injector (`--fault-*`) did to received frames, in words.
/// Each data core's share of the frames, for the JSON reports: what it took from its queue,
/// what it handed to the core that owns the association (software dispatch) and took from
/// others, and what it sent.
fn cores_json(reports: &[CoreReport]) -> serde_json::Value {
    reports
        .iter()
        .map(|r| {
            serde_json::json!({"core": r.core, "frames_in": r.stats.frames_in,
                "dispatched_out": r.stats.dispatched_out, "dispatched_in": r.stats.dispatched_in,
                "dispatch_dropped": r.stats.dispatch_dropped,
                "frames_out": r.stats.tx.frames_out, "associations": r.assocs.len(),
                // Path MTU discovery at work (RFC 9260 §7.3): what ICMP lowered, and the
                // IP fragments a chunk sent before the drop crossed the smaller hop in.
                "pmtu_lowered": r.stats.pmtu_lowered, "esp_pmtu_lowered": r.stats.esp_pmtu_lowered,
                "pmtu_raised": r.stats.pmtu_raised,
                // RFC 8899: black holes (ICMP filtered) found from T3-rtx, and the probes.
                "plpmtud_black_holes": r.stats.plpmtud_black_holes,
                "plpmtud_probes": r.stats.plpmtud_probes,
                "plpmtud_raised": r.stats.plpmtud_raised,
                "ip_source_fragmented": r.iface.source_fragmented,
                // The small tables' evictions: neighbours (spoofed ARP floods) and lowered
                // path MTUs (more peers behind small hops than the table holds).
                "neighbours_evicted": r.iface.neighbours_evicted,
                "path_mtus_evicted": r.iface.path_mtus_evicted,
                "ip_reassembled": r.iface.reassembled,
                "ip_reassembly_timeouts": r.iface.reassembly_timeouts})
        })
        .collect()
}

fn faults_text(c: FaultCounts) -> String {
    format!(
        "received frames faulted on purpose (--fault-*): {} dropped, {} corrupted, {} \
         duplicated ({} not), {} reordered, {} delayed",
        c.dropped, c.corrupted, c.duplicated, c.not_duplicated, c.reordered, c.delayed
    )
}

fn faults_json(c: FaultCounts) -> serde_json::Value {
    serde_json::json!({
        "kept": c.kept, "dropped": c.dropped, "corrupted": c.corrupted,
        "duplicated": c.duplicated, "not_duplicated": c.not_duplicated,
        "reordered": c.reordered, "delayed": c.delayed,
    })
}

/// Nanoseconds as microseconds.
fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// How long a step of the set-up or teardown may take.
const WAIT: Duration = Duration::from_secs(30);
/// How long a perf client waits with writes outstanding and none completing, then again with
/// no SACK arriving either, before it takes the server for gone (at least 4 RTO.Min).
const QUIET: Duration = Duration::from_secs(5);

/// What a `--ddp-verify` client whose session the peer ended should check (`peer_ended`): a
/// server without --ddp-verify posts no receive buffers, so the untagged sends the soak mixes
/// in end its session ("no buffer available", RFC 5041 §7.2). The client said only "send
/// refused: the session is terminated" (found by an outside-in test).
fn verify_hint(peer_ended: bool) -> &'static str {
    if peer_ended {
        "; if the server runs without --ddp-verify, it has no receive buffers for the \
         untagged sends --ddp-verify adds: was it given --ddp-verify too?"
    } else {
        ""
    }
}

/// What the cores counted of a perf client's association whose writes stopped completing.
struct StallFacts {
    /// T3-rtx expiries.
    t3: u64,
    /// SACKs received.
    sacks: u64,
    /// Frames the cores dropped as cut short of their IP length (`malformed`): a peer's
    /// frames longer than ours may be.
    cut: u64,
    /// The smoothed round trip (0 before one was measured).
    srtt: Duration,
}

/// The least a perf client waits, once `--run-for` is over, for what is still outstanding.
const DRAIN_AFTER_RUN: Duration = Duration::from_secs(2);

/// Why a perf client's writes may have stopped completing, from what its cores counted: frames
/// cut short (`cut`, drop `malformed`) or nothing ever acknowledged (`done` 0) both point at
/// the two ends' `--mtu`.
fn stall_hint(cut: u64, done: u64, mtu: u16) -> String {
    if cut > 0 {
        // A peer whose frames are longer than ours may be (a larger --mtu on a link that lets
        // them through) has them cut to our ring's slots (docs/usage.md, net_af_packet), its
        // SACKs bundled with them lost too. Found by an outside-in test: a server at --mtu
        // 9000 and a client at 1500 on a veth of 9000 stalled after 144 writes, the client
        // saying only that the server stopped acknowledging.
        format!(
            "; {cut} frame(s) came cut short of their IP length (drop `malformed`): is the \
             server's --mtu larger than ours, {mtu}?"
        )
    } else if done == 0 {
        // Not one write through, on an association that came up: its small packets pass and
        // its full ones do not, as when the server's link MTU (--mtu) is smaller than ours
        // (SCTP has no PMTU discovery here).
        format!("; nothing was ever acknowledged: is the server's --mtu {mtu} too?")
    } else {
        String::new()
    }
}

/// Removes and returns the first event `f` accepts.
fn take(events: &mut VecDeque<Event>, f: impl Fn(&Event) -> bool) -> Option<Event> {
    let k = events.iter().position(f)?;
    events.remove(k)
}

/// A busy share as a percentage, or "n/a" when no time passed.
/// Frames a busy turn, as the summary lines print it.
fn per_turn(batch: Option<f64>) -> String {
    batch.map_or("-".into(), |b| format!("{b:.1}"))
}

fn percent(share: Option<f64>) -> String {
    share.map_or("n/a".into(), |s| format!("{:.0} %", s * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drops(by_reason: &[(&'static str, u64)], rx_missed: u64) -> Drops {
        Drops {
            by_reason: by_reason.to_vec(),
            port: [
                ("port_rx_missed", rx_missed),
                ("port_rx_errors", 0),
                ("port_rx_nombuf", 0),
                ("port_tx_errors", 0),
            ],
        }
    }

    #[test]
    fn an_accepts_offer_is_read_whole_or_refused() {
        let mut offer = 0x0012_3456u32.to_be_bytes().to_vec();
        offer.extend_from_slice(&0x1000u64.to_be_bytes());
        offer.extend_from_slice(&(64u64 << 20).to_be_bytes());
        assert_eq!(offered(&offer), Ok((Stag(0x0012_3456), 0x1000, 64 << 20)));
        assert!(offered(&offer[..19]).is_err());
        assert!(offered(b"").is_err());
    }

    #[test]
    fn what_was_lost_is_said_apart_from_other_hosts_frames() {
        assert_eq!(drops(&[], 0).text(1500), None);
        assert_eq!(
            drops(&[("not_ours", 6), ("arp_nd_not_for_us", 4)], 0).text(1500),
            Some("ignored frames not for this end: not_ours 6, arp_nd_not_for_us 4".into())
        );
        let t = drops(&[("rx_too_long", 21), ("not_ours", 1)], 3)
            .text(1500)
            .expect("drops");
        assert_eq!(
            t,
            "dropped rx_too_long 21, port_rx_missed 3 (rx_too_long: frames longer than this \
             end's buffers: is the peer's --mtu larger than this end's 1500?); ignored frames \
             not for this end: not_ours 1"
        );
        // JSON keeps every reason, as telemetry does.
        let j = drops(&[("not_ours", 6)], 2).json();
        assert_eq!(j, serde_json::json!({"not_ours": 6, "port_rx_missed": 2}));
    }
}
