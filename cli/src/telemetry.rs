//! ddpdk's commands on DPDK's telemetry socket, next to DPDK's own (`/ethdev/stats`, ...):
//!
//! | command | answer |
//! |---|---|
//! | `/ddpdk/assoc/list[,FIRST]` | the association ids from FIRST on (512 an answer) |
//! | `/ddpdk/assoc/info,ID` | one association: state, peer, streams, cwnd, RTO, windows, retransmissions, ... |
//! | `/ddpdk/session/list[,A/S]` | DDP Stream Sessions not idle: `ASSOC/STREAM` and its state, `count`, `next` |
//! | `/ddpdk/mr/list[,STAG]` | the registered memory: count, bytes, per STag its TO, length, PD, access, `next` |
//! | `/ddpdk/stats` | per data core (`core/N/...`) and the control thread (`control/...`): frames, placed bytes, segments, drops by reason, errors by RFC 5041 §7.2 code, retransmissions; which snapshot answered (`snapshot/number`, `snapshot/age_us`) |
//!
//! The figures come from a [`Snapshot`] the endpoint takes when asked (its data cores report
//! between packets); one snapshot serves every command asked within [`FRESH`], so a scraper
//! that lists associations and then asks for each one sees one moment.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant as Wall};

use ddpdk_control::runtime::{AssocInfo, Clock, Control, ControlStats, CoreReport};
use ddpdk_control::session::State;
use ddpdk_dataplane::mem::{Access, Registration, Stag};
use ddpdk_dataplane::port::dpdk::telemetry::{self, TelValue};
use ddpdk_dataplane::port::dpdk::{IpsecPort, Mbuf, PolicyCounts, SaCounts};
use ddpdk_dataplane::port::Port;

/// How long one snapshot answers for.
pub const FRESH: Duration = Duration::from_millis(200);

/// What the commands report on, taken at one moment.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub reports: Vec<CoreReport>,
    pub control: ControlStats,
    pub mrs: Vec<(Stag, Registration)>,
    /// The port's IPsec counters, when IPsec is on: what it drops never reaches a data core.
    pub ipsec: Option<IpsecTotals>,
    /// What the poll loops' clock reads ([`ddpdk_control::runtime::Clock::source`]): a TSC
    /// dropped for drift or by the kernel shows here, not only on stderr.
    pub clock: &'static str,
    /// Which snapshot of the endpoint's this is (1, 2, ...) and when it was taken, set by the
    /// commands' cache (`SnapshotCache`): answers within [`FRESH`] of each other may come
    /// from one snapshot, and a tool that takes differences between two readings must know.
    pub taken: Option<(u64, Wall)>,
}

/// IPsec's counters for the port: the policy's drops, and its SAs' counts summed by direction.
#[derive(Debug, Clone, Default)]
pub struct IpsecTotals {
    pub drops: PolicyCounts,
    pub inbound: SaCounts,
    pub outbound: SaCounts,
    pub sas: usize,
}

impl IpsecTotals {
    /// `port`'s counters, `None` when IPsec is off on it.
    pub fn of<P: Port<Buf = Mbuf>>(port: &IpsecPort<P>) -> Option<IpsecTotals> {
        if !port.is_enabled() {
            return None;
        }
        // The SAs deleted or rebuilt included: a counter that fell when a key manager deleted
        // an SA (a rekey's last step) would read as a reset.
        let (sas, inbound, outbound) = port.sa_totals();
        Some(IpsecTotals {
            drops: port.policy_counts(),
            inbound,
            outbound,
            sas,
        })
    }
}

/// `/ddpdk/stats`' `ipsec` dict: the policy's drops by reason (RFC 4301 §5.2), the SAs'
/// packets and bytes and their own drops (RFC 4303 §3.4: replay, ICV, ...) by direction.
fn ipsec_stats(t: &IpsecTotals) -> TelValue {
    let d = &t.drops;
    let (i, o) = (&t.inbound, &t.outbound);
    dict(vec![
        ("sas", u(t.sas)),
        (
            "drop",
            dict(vec![
                ("no_sa", u(d.no_sa)),
                ("clear_refused", u(d.clear_refused)),
                ("policy_mismatch", u(d.policy_mismatch)),
                ("discarded_in", u(d.discarded_in)),
                ("discarded_out", u(d.discarded_out)),
                ("no_policy_in", u(d.no_policy_in)),
                ("no_policy_out", u(d.no_policy_out)),
                ("no_sa_out", u(d.no_sa_out)),
                ("unparsable", u(d.unparsable)),
                ("pmtu_rejected", u(d.pmtu_rejected)),
                ("inline_unsent", u(d.inline_unsent)),
            ]),
        ),
        (
            "in",
            dict(vec![
                ("packets", u(i.packets)),
                ("bytes", u(i.bytes)),
                ("replay", u(i.replay)),
                ("auth_failed", u(i.auth_failed)),
                ("malformed", u(i.malformed)),
                ("dummy", u(i.dummy)),
                ("expired", u(i.expired)),
                ("nic", u(i.nic)),
            ]),
        ),
        (
            "out",
            dict(vec![
                ("packets", u(o.packets)),
                ("bytes", u(o.bytes)),
                ("expired", u(o.expired)),
                ("overflow", u(o.overflow)),
                ("no_room", u(o.no_room)),
                ("stalled", u(o.stalled)),
                ("pmtu_accepted", u(o.pmtu_accepted)),
                ("nic", u(o.nic)),
            ]),
        ),
    ])
}

impl Snapshot {
    /// An endpoint of `cores` data cores not yet running: every counter at zero, no
    /// association, no memory registered ([`Early`]).
    pub fn starting(cores: usize, clock: Clock) -> Snapshot {
        Snapshot {
            reports: (0..cores)
                .map(|core| CoreReport {
                    core,
                    ..Default::default()
                })
                .collect(),
            clock: clock.source(),
            ..Default::default()
        }
    }

    /// The data cores' `reports` with what the control side `control` knows: its counters and
    /// the registrations.
    pub fn of<P: Port>(reports: Vec<CoreReport>, control: &Control<P>, clock: Clock) -> Snapshot {
        Snapshot {
            reports,
            ipsec: None,
            taken: None,
            clock: clock.source(),
            control: control.stats(),
            mrs: control
                .memory()
                .stags()
                .iter()
                .map(|(stag, r)| (stag, *r))
                .collect(),
        }
    }
}

/// Takes a snapshot (asks the data cores for their reports and waits for them).
pub type Source = Arc<dyn Fn() -> Result<Snapshot, String> + Send + Sync>;

/// The commands, their help, and what renders their answer.
type Render = fn(&Snapshot, &str) -> Result<TelValue, String>;
const COMMANDS: [(&str, &str, Render); 6] = [
    (
        "/ddpdk/assoc/list",
        "Returns SCTP association ids, ascending, 512 at most. Parameters: int first_id (optional)",
        assoc_list,
    ),
    (
        "/ddpdk/assoc/info",
        "Returns an association's state, peer, streams, cwnd, rto, windows, retransmissions. Parameters: int association_id",
        assoc_info,
    ),
    (
        "/ddpdk/session/list",
        "Returns DDP Stream Sessions not idle (assoc/stream: state), count, next. Parameters: first assoc/stream (optional)",
        session_list,
    ),
    (
        "/ddpdk/mr/list",
        "Returns registered memory: count, bytes, per STag its TO, length, PD, access; next. Parameters: first STag (optional)",
        mr_list,
    ),
    (
        "/ddpdk/stats",
        "Returns counters per data core and control thread: frames, bytes placed, drops, DDP errors. Parameters: int core (optional)",
        stats,
    ),
    (
        "/ddpdk/control",
        "Returns the control thread's counters, every one: INITs, forwarded packets, peer invalidations, drops",
        control,
    ),
];

/// The commands answer while this lives; dropped, they answer "not available".
#[derive(Debug)]
pub struct Registered;

impl Drop for Registered {
    fn drop(&mut self) {
        for (cmd, _, _) in COMMANDS {
            telemetry::unregister(cmd);
        }
    }
}

/// The snapshot the commands answer from: taken from a [`Source`] when the last is older
/// than `fresh` ([`FRESH`]), numbered.
struct SnapshotCache {
    source: Source,
    fresh: Duration,
    /// The last snapshot (or why there was none) with when it was taken, and how many were
    /// taken.
    last: Mutex<(Option<Taken>, u64)>,
}

/// A snapshot, or why there was none, and when.
type Taken = (Wall, Result<Arc<Snapshot>, String>);

impl SnapshotCache {
    fn new(source: Source, fresh: Duration) -> SnapshotCache {
        SnapshotCache {
            source,
            fresh,
            last: Mutex::new((None, 0)),
        }
    }

    /// The last snapshot while it is fresh, else a new one. A failure is kept as long as a
    /// snapshot: clients asking at once wait for one call of the source, not one each.
    fn get(&self) -> Result<Arc<Snapshot>, String> {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let (cached, taken) = &mut *last;
        match cached.as_ref() {
            Some((at, s)) if at.elapsed() < self.fresh => s.clone(),
            _ => {
                let at = Wall::now();
                let s = (self.source)().map(|mut s| {
                    *taken += 1;
                    s.taken = Some((*taken, at));
                    Arc::new(s)
                });
                *cached = Some((at, s.clone()));
                s
            }
        }
    }
}

/// Registers the commands, answered from snapshots `source` takes.
pub fn register(source: Source) -> Result<Registered, String> {
    let cache = Arc::new(SnapshotCache::new(source, FRESH));
    for (cmd, help, render) in COMMANDS {
        let cache = Arc::clone(&cache);
        telemetry::register(
            cmd,
            help,
            Arc::new(move |params: &str| render(&*cache.get()?, params)),
        )?;
    }
    Ok(Registered)
}

/// The commands of an endpoint whose port is still coming up, registered before it waits for
/// the link: a memif server's comes up when its client connects, `--link-timeout` later at
/// most, and commands registered after the wait were missing for its length (a scraper saw
/// no ddpdk there). Until [`Early::answer_from`] hands them the endpoint's own source they
/// answer as an endpoint with nothing yet: its data cores at zero, no association, no memory.
pub struct Early {
    late: Arc<OnceLock<Source>>,
    registered: Result<Registered, String>,
}

impl Early {
    /// The commands for an endpoint of `cores` data cores whose poll loops read `clock`.
    pub fn register(cores: usize, clock: Clock) -> Early {
        let late = Arc::new(OnceLock::<Source>::new());
        let source: Source = {
            let late = Arc::clone(&late);
            Arc::new(move || match late.get() {
                Some(source) => source(),
                None => Ok(Snapshot::starting(cores, clock)),
            })
        };
        Early {
            late,
            registered: register(source),
        }
    }

    /// The commands, answered from `source`'s snapshots from now on (or why they could not be
    /// registered).
    pub fn answer_from(self, source: Source) -> Result<Registered, String> {
        // Set once: `self` is taken.
        let _ = self.late.set(source);
        self.registered
    }
}

impl std::fmt::Debug for Early {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Early")
            .field("answering", &self.late.get().is_some())
            .field("registered", &self.registered)
            .finish()
    }
}

/// How long a command waits for the loop that owns the control side to take a snapshot.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// For a loop that owns the control side on its own thread (the endpoint's): a command asks
/// ([`Hub::source`]), the loop sees the request between turns ([`Hub::wanted`], one atomic
/// load) and answers with a snapshot ([`Hub::answer`]).
#[derive(Debug, Default)]
pub struct Hub {
    wanted: AtomicBool,
    asked: AtomicU64,
    answer: Mutex<Option<(u64, Result<Snapshot, String>)>>,
    ready: Condvar,
}

impl Hub {
    /// A source that asks this hub's loop and waits for its answer.
    pub fn source(self: &Arc<Self>) -> Source {
        let hub = Arc::clone(self);
        Arc::new(move || {
            let ask = hub.asked.fetch_add(1, Ordering::AcqRel) + 1;
            hub.wanted.store(true, Ordering::Release);
            let slot = hub.answer.lock().unwrap_or_else(|e| e.into_inner());
            let (slot, _) = hub
                .ready
                .wait_timeout_while(slot, ANSWER_WITHIN, |a| {
                    a.as_ref().is_none_or(|(n, _)| *n < ask)
                })
                .unwrap_or_else(|e| e.into_inner());
            match slot.as_ref() {
                Some((n, answer)) if *n >= ask => answer.clone(),
                _ => Err("the endpoint did not answer in time".into()),
            }
        })
    }

    /// Whether a command is waiting for a snapshot (and the request is taken).
    pub fn wanted(&self) -> bool {
        self.wanted.load(Ordering::Relaxed) && self.wanted.swap(false, Ordering::AcqRel)
    }

    /// The snapshot for every request made so far.
    pub fn answer(&self, snapshot: Result<Snapshot, String>) {
        let asked = self.asked.load(Ordering::Acquire);
        *self.answer.lock().unwrap_or_else(|e| e.into_inner()) = Some((asked, snapshot));
        self.ready.notify_all();
    }
}

fn assocs(s: &Snapshot) -> impl Iterator<Item = (usize, &AssocInfo)> {
    s.reports
        .iter()
        .flat_map(|r| r.assocs.iter().map(move |a| (r.core, a)))
}

fn dict(entries: Vec<(&str, TelValue)>) -> TelValue {
    TelValue::Dict(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

fn u(x: impl TryInto<u64>) -> TelValue {
    TelValue::U64(x.try_into().unwrap_or(u64::MAX))
}

/// Association ids one answer lists: DPDK 22.11 takes 512 entries a list. An answer that
/// full may have more behind it: the next asks from its last id + 1.
const ASSOCS_LISTED: usize = 512;

/// The association ids from `params` (an id; 0 when empty) on, ascending, at most
/// `ASSOCS_LISTED`: an endpoint with more is read a page at a time, none left out.
pub fn assoc_list(s: &Snapshot, params: &str) -> Result<TelValue, String> {
    let from = match params.trim() {
        "" => 0,
        p => p.parse::<u64>().map_err(|_| {
            "usage: /ddpdk/assoc/list[,FIRST_ID] (ids from FIRST_ID on, 512 at most)".to_string()
        })?,
    };
    let mut ids: Vec<u64> = assocs(s)
        .map(|(_, a)| a.conn.0)
        .filter(|&id| id >= from)
        .collect();
    ids.sort_unstable();
    ids.truncate(ASSOCS_LISTED);
    Ok(TelValue::List(ids.into_iter().map(TelValue::U64).collect()))
}

pub fn assoc_info(s: &Snapshot, params: &str) -> Result<TelValue, String> {
    let id: u64 = params
        .trim()
        .parse()
        .map_err(|_| "usage: /ddpdk/assoc/info,ID (an id from /ddpdk/assoc/list)".to_string())?;
    let (core, a) = assocs(s)
        .find(|(_, a)| a.conn.0 == id)
        .ok_or_else(|| format!("no association {id}"))?;
    let sc = &a.sctp;
    Ok(dict(vec![
        ("id", TelValue::U64(id)),
        ("core", u(core)),
        ("state", TelValue::Str(a.state.clone())),
        ("peer", TelValue::Str(a.peer.to_string())),
        ("peer_port", u(a.peer_port)),
        ("local_port", u(a.local_port)),
        ("streams", u(a.streams)),
        ("sessions", u(a.sessions.len())),
        ("cwnd", u(a.cwnd)),
        ("path_mtu", u(a.path_mtu)),
        ("path_active", u(u8::from(a.path_active))),
        ("error_count", u(a.error_count)),
        ("path_inactive", u(sc.path_inactive)),
        ("rto_us", u(a.rto.as_micros())),
        ("srtt_us", u(a.srtt.map_or(0, |d| d.as_micros()))),
        ("peer_rwnd", u(a.peer_rwnd)),
        ("a_rwnd", u(a.receive_room)),
        ("packets_in", u(sc.packets_in)),
        ("packets_out", u(sc.packets_out)),
        ("data_in", u(sc.data_in)),
        ("data_out", u(sc.data_out)),
        ("sacks_in", u(sc.sacks_in)),
        ("sacks_out", u(sc.sacks_out)),
        ("t3_expiries", u(sc.t3_expiries)),
        ("t3_retransmits", u(sc.t3_retransmits)),
        ("fast_retransmits", u(sc.fast_retransmits)),
        ("segments_in", u(a.stats.segments_received)),
        ("segments_out", u(a.stats.segments_sent)),
        ("placed_bytes", u(a.stats.placed_bytes)),
        ("receive_errors", u(a.stats.receive_errors)),
        // RFC 8899 discovery (absent when off): "Base", "Searching", "SearchComplete" or
        // "Error" (§5.2), BASE_PLPMTU, and its counters.
        (
            "plpmtud_state",
            TelValue::Str(a.plpmtud.map_or("off".into(), |p| format!("{:?}", p.state))),
        ),
        ("plpmtud_base", u(a.plpmtud.map_or(0, |p| p.base))),
        (
            "plpmtud_black_holes",
            u(a.plpmtud.map_or(0, |p| p.stats.black_holes)),
        ),
        (
            "plpmtud_probes_out",
            u(a.plpmtud.map_or(0, |p| p.stats.probes_out)),
        ),
        (
            "plpmtud_probes_acked",
            u(a.plpmtud.map_or(0, |p| p.stats.probes_acked)),
        ),
        (
            "plpmtud_probes_lost",
            u(a.plpmtud.map_or(0, |p| p.stats.probes_lost)),
        ),
        ("plpmtud_raised", u(a.plpmtud.map_or(0, |p| p.stats.raised))),
    ]))
}

/// Sessions one answer lists, beside `count` and `next`: DPDK 22.11 takes 256 names a dict.
const SESSIONS_LISTED: usize = 254;
/// And the bytes they may take: DPDK 22.11 writes an answer into 16 KiB and leaves out, without
/// a word, an entry that does not fit (a Terminated session's reason runs to 127 bytes).
const SESSION_PAGE_BYTES: usize = 12 * 1024;

/// The sessions not idle from `params` (`ASSOC/STREAM` or `ASSOC`; the first when empty) on,
/// in association then stream order, at most `SESSIONS_LISTED`; `count` is every session
/// not idle, and `next` (when more are left) is where the next answer starts.
pub fn session_list(s: &Snapshot, params: &str) -> Result<TelValue, String> {
    let usage =
        || "usage: /ddpdk/session/list[,ASSOC[/STREAM]] (sessions from there on)".to_string();
    let from: (u64, u16) = match params.trim() {
        "" => (0, 0),
        p => match p.split_once('/') {
            Some((a, st)) => (
                a.parse().map_err(|_| usage())?,
                st.parse().map_err(|_| usage())?,
            ),
            None => (p.parse().map_err(|_| usage())?, 0),
        },
    };
    let mut all: Vec<((u64, u16), State)> = assocs(s)
        .flat_map(|(_, a)| {
            a.sessions
                .iter()
                .map(move |(stream, state)| ((a.conn.0, *stream), *state))
        })
        .collect();
    all.sort_unstable_by_key(|(key, _)| *key);
    let mut entries = vec![("count".to_string(), u(all.len()))];
    let mut listed = all.iter().filter(|(key, _)| *key >= from).peekable();
    let (mut n, mut bytes) = (0, 0);
    while let Some(((a, st), state)) = listed.peek() {
        let (name, text) = (format!("{a}/{st}"), state_text(*state));
        // As DPDK writes it: "name":"text", with the text clipped to 127 bytes.
        let size = name.len() + text.len().min(127) + 6;
        if n == SESSIONS_LISTED || bytes + size > SESSION_PAGE_BYTES {
            break;
        }
        entries.push((name, TelValue::Str(text)));
        (n, bytes) = (n + 1, bytes + size);
        listed.next();
    }
    if let Some(((a, st), _)) = listed.next() {
        entries.push(("next".to_string(), TelValue::Str(format!("{a}/{st}"))));
    }
    Ok(TelValue::Dict(entries))
}

/// A session state's name, without what it carries: a stable value for JSON (`show session`
/// gave the Rust `Debug` form, `Terminated(ReceiveError(Ddp(NoBuffer)))`, which changes with
/// internal types: found by an outside-in test).
pub fn state_name(state: State) -> &'static str {
    match state {
        State::Idle => "Idle",
        State::InitiateSent => "InitiateSent",
        State::InitiateReceived => "InitiateReceived",
        State::Established => "Established",
        State::Terminated(_) => "Terminated",
    }
}

/// A session's state in words (`Terminated (terminated by the local ULP)`).
pub fn state_text(state: State) -> String {
    match state {
        State::Terminated(reason) => format!("Terminated ({reason})"),
        other => format!("{other:?}"),
    }
}

/// Access rights as their names, `+`-joined.
fn access_text(a: Access) -> String {
    [
        (Access::LOCAL_READ, "local_read"),
        (Access::LOCAL_WRITE, "local_write"),
        (Access::REMOTE_WRITE, "remote_write"),
        (Access::REMOTE_READ, "remote_read"),
        (Access::REMOTE_ATOMIC, "remote_atomic"),
    ]
    .iter()
    .filter(|(bit, _)| a.contains(*bit))
    .map(|(_, n)| *n)
    .collect::<Vec<_>>()
    .join("+")
}

/// MRs listed beside `count`, `bytes` and `next`: DPDK takes 256 names a dict, four per MR.
const MRS_LISTED: usize = 63;

/// The registrations from `params` (an STag, `0x...` or decimal; the first when empty) on, in
/// STag order, at most `MRS_LISTED`; `count` and `bytes` cover them all, and `next` (when
/// more are left) is where the next answer starts.
pub fn mr_list(s: &Snapshot, params: &str) -> Result<TelValue, String> {
    let p = params.trim();
    let from = if p.is_empty() {
        0
    } else {
        let n = match p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16),
            None => p.parse::<u32>(),
        };
        n.map_err(|_| "usage: /ddpdk/mr/list[,FIRST_STAG] (STags from there on)".to_string())?
    };
    let mut mrs: Vec<&(Stag, Registration)> = s.mrs.iter().filter(|(st, _)| st.0 >= from).collect();
    mrs.sort_unstable_by_key(|(st, _)| st.0);
    let mut entries = vec![
        ("count".to_string(), u(s.mrs.len())),
        (
            "bytes".to_string(),
            TelValue::U64(s.mrs.iter().map(|(_, r)| r.len).sum()),
        ),
    ];
    for (stag, r) in mrs.iter().take(MRS_LISTED) {
        entries.push((
            stag.to_string(),
            dict(vec![
                ("to", TelValue::U64(r.to_base)),
                ("len", TelValue::U64(r.len)),
                ("pd", u(r.pd.0)),
                ("access", TelValue::Str(access_text(r.access))),
            ]),
        ));
    }
    if let Some((next, _)) = mrs.get(MRS_LISTED) {
        entries.push(("next".to_string(), TelValue::Str(next.to_string())));
    }
    Ok(TelValue::Dict(entries))
}

/// The counters of one data core: its own, its interface's, and its connections' (those it
/// no longer holds included, so every one only grows).
fn core_stats(r: &CoreReport) -> TelValue {
    let st = &r.stats;
    let t = &r.conn_totals;
    let ddp_errors = t
        .receive_errors
        .named()
        .map(|(n, v)| (n.to_string(), TelValue::U64(v)))
        .collect();
    dict(vec![
        ("frames_in", u(st.frames_in)),
        ("frames_out", u(st.tx.frames_out)),
        // Backpressure, not drops: a full ring held the core back (`tx_refused` is the loss).
        ("tx_ring_full", u(st.tx.tx_ring_full)),
        ("tx_backlog_peak", u(st.tx.backlog_peak)),
        ("associations", u(r.live_associations())),
        // Associations handed to this core that it had no room for: aborted (the peer hears
        // an ABORT), so one the control thread accepted never shows in the list.
        ("associations_refused", u(st.refused)),
        ("stags", u(r.stags)),
        ("busy_ns", u(st.busy_ns)),
        ("idle_ns", u(st.idle_ns)),
        ("placed_bytes", u(t.placed_bytes)),
        ("segments_in", u(t.segments_in)),
        ("segments_out", u(t.segments_out)),
        ("messages_out", u(t.messages_out)),
        ("reads_served", u(t.reads_served)),
        ("reads_source_revoked", u(t.reads_source_revoked)),
        ("reads_short", u(t.reads_short)),
        ("inbound_gaps_given_up", u(t.inbound_gaps_given_up)),
        ("crossed_rejects", u(t.crossed_rejects)),
        ("crossed_rejects_unwatched", u(t.crossed_rejects_unwatched)),
        ("initiates_unanswered", u(t.initiates_unanswered)),
        ("t3_retransmits", u(t.t3_retransmits)),
        ("fast_retransmits", u(t.fast_retransmits)),
        ("pmtu_lowered", u(st.pmtu_lowered)),
        ("esp_pmtu_lowered", u(st.esp_pmtu_lowered)),
        // Raised by ICMP's aging or by an RFC 8899 probe: one name, as a dict holds 256 and
        // three cores' counters fill it (`stats_of_three_cores_fit_one_dict`); RFC 8899's
        // probes and the reassembly timeouts are in the JSON reports and `show` instead.
        ("pmtu_raised", u(st.pmtu_raised + st.plpmtud_raised)),
        ("plpmtud_black_holes", u(st.plpmtud_black_holes)),
        // Associations an ICMP Protocol Unreachable ended (RFC 9260 Appendix C ICMP8).
        ("icmp_aborts", u(st.icmp_aborts)),
        ("ip_reassembled", u(r.iface.reassembled)),
        ("ip_source_fragmented", u(r.iface.source_fragmented)),
        (
            "drop",
            dict(
                r.drops()
                    .into_iter()
                    .map(|(n, v)| (n, u(v)))
                    // Datagrams given up incomplete: timed out (RFC 8200 §4.5, RFC 1122
                    // §3.3.2) or evicted from a full reassembly table. One name: three cores'
                    // counters come close to DPDK's 256 a dict.
                    .chain([(
                        "ip_reassembly_abandoned",
                        u(r.iface.reassembly_timeouts + r.iface.reassembly_evicted),
                    )])
                    .collect(),
            ),
        ),
        ("ddp_error", TelValue::Dict(ddp_errors)),
        // Failed SCTP checks (RFC 9260 §6.8, §8.5): not drop reasons of their own, since a
        // packet with a bad tag is sometimes refused whole and sometimes only stops there.
        (
            "sctp_check",
            dict(vec![
                ("bad_checksum", u(t.sctp_bad_checksum)),
                ("bad_vtag", u(t.sctp_bad_vtag)),
            ]),
        ),
    ])
}

/// Data cores whose counters fit one answer with the control thread's.
const CORES_IN_ONE_ANSWER: usize = 3;

/// Every data core's counters and the control thread's; with a core number, that core's
/// alone (a dict holds 256 names: three cores' worth with the control thread's, or two with IPsec's).
pub fn stats(s: &Snapshot, params: &str) -> Result<TelValue, String> {
    let only = match params.trim() {
        "" => None,
        p => Some(
            p.parse::<usize>()
                .map_err(|_| "usage: /ddpdk/stats[,CORE]".to_string())?,
        ),
    };
    match only {
        Some(k) if !s.reports.iter().any(|r| r.core == k) => {
            return Err(format!("no data core {k}"))
        }
        // DPDK cuts a dict at 256 names; more cores than fit are asked for one by one.
        None if s.reports.len() > CORES_IN_ONE_ANSWER => {
            return Err(format!(
                "{} data cores: ask /ddpdk/stats,CORE for each (0 to {})",
                s.reports.len(),
                s.reports.len() - 1
            ))
        }
        _ => {}
    }
    let answer = all_stats(s, only);
    // Counted, not estimated: three cores' names with the control thread's, IPsec's and the
    // snapshot's came to 257, and DPDK cut the last one off without a word.
    let names = name_count(&answer);
    if only.is_none() && names > DICT_NAMES {
        return Err(format!(
            "{} data cores' counters with the rest are {names} names, over the {DICT_NAMES} one \
             answer holds: ask /ddpdk/stats,CORE for each (0 to {})",
            s.reports.len(),
            s.reports.len().saturating_sub(1)
        ));
    }
    Ok(answer)
}

/// The control thread's counters: in `/ddpdk/stats` (`full` false) those that fit beside
/// three cores' in DPDK's 256 names; in `/ddpdk/control` (`full`) every one.
fn control_stats(s: &Snapshot, full: bool) -> TelValue {
    let c = &s.control;
    let e = &c.endpoint;
    let mut sctp = vec![
        ("inits", u(e.inits)),
        ("init_acks_out", u(e.init_acks_out)),
        ("cookies_accepted", u(e.cookies_accepted)),
        ("bad_cookies", u(e.bad_cookies)),
        ("stale_cookies", u(e.stale_cookies)),
        ("adaptation_refused", u(e.adaptation_refused)),
        ("invalid_inits", u(e.invalid_inits)),
        ("ootb_aborts_out", u(e.ootb_aborts_out)),
        ("closed_port_aborts_out", u(e.closed_port_aborts_out)),
        ("bad_checksum", u(e.bad_checksum)),
        ("other_peer_address", u(e.other_peer_address)),
    ];
    if full {
        sctp.extend([
            ("packets_in", u(e.packets_in)),
            ("host_name_refused", u(e.host_name_refused)),
            (
                "ootb_shutdown_completes_out",
                u(e.ootb_shutdown_completes_out),
            ),
            ("ignored", u(e.ignored)),
            (
                "ignored_why",
                dict(e.ignored_why.iter().map(|(n, v)| (n, u(v))).collect()),
            ),
        ]);
    }
    let mut v = match dict(vec![
        ("packets_in", u(c.packets)),
        ("replies", u(c.replies)),
        ("ignored", u(c.ignored)),
        ("accepted", u(c.accepted)),
        ("connected", u(c.connected)),
        ("frames_out", u(c.tx.frames_out)),
        ("session_messages", u(c.session_messages)),
        ("initiates_pending", u(c.initiates_pending)),
        ("initiates_over_limit", u(c.initiates_over_limit)),
        ("flow_rules", u(c.flow_rules)),
        ("flow_rules_refused", u(c.flow_rules_refused)),
        // A rule the device would not remove stays until the port closes:
        // shown, so that rules leaking on a device can be seen.
        ("flow_rules_removed", u(c.flow_rules_removed)),
        ("flow_rules_remove_failed", u(c.flow_rules_remove_failed)),
        ("forward_dropped", u(c.forward_dropped)),
        // A stalled core's revocation not acknowledged in time: the ULP heard
        // of the Send with Invalidate without the STag vouched revoked.
        ("invalidation_timeouts", u(c.invalidation_timeouts)),
        // The control thread's own sends (INIT ACKs, ABORTs, ...) lost, by
        // reason, named as a core's: every drop counted somewhere.
        (
            "drop",
            dict(vec![
                ("tx_refused", u(c.tx.tx_dropped)),
                ("tx_no_buffer", u(c.tx.no_buffer)),
                ("tx_unresolved", u(c.tx.unresolved)),
                ("tx_too_big", u(c.tx.too_big)),
            ]),
        ),
        ("clock", TelValue::Str(s.clock.into())),
        ("sctp", dict(sctp)),
    ]) {
        TelValue::Dict(entries) => entries,
        other => return other,
    };
    if full {
        let t = &c.tx;
        v.extend(
            [
                ("neighbours_shared", u(c.neighbours_shared)),
                ("forwarded", u(c.forwarded)),
                // Forwarded packets a core sent back, the association closed there.
                ("returned_closed", u(c.returned_closed)),
                ("peer_invalidations", u(c.peer_invalidations)),
                ("peer_limit_refused", u(c.peer_limit_refused)),
                ("tx_ring_full", u(t.tx_ring_full)),
                ("tx_backlog_peak", u(t.backlog_peak)),
                ("tx_held_sent", u(t.held_sent)),
            ]
            .map(|(k, v)| (k.to_string(), v)),
        );
    }
    TelValue::Dict(v)
}

/// `/ddpdk/control`: the control thread's counters, every one (`/ddpdk/stats` has room for
/// only some beside three cores').
fn control(s: &Snapshot, params: &str) -> Result<TelValue, String> {
    if !params.trim().is_empty() {
        return Err("usage: /ddpdk/control (no parameters)".into());
    }
    Ok(control_stats(s, true))
}

/// The names a telemetry dict holds at most (DPDK's `RTE_TEL_MAX_DICT_ENTRIES`).
const DICT_NAMES: usize = 256;

/// The names `v` comes to once flattened (`a/b/c`), as DPDK's dict receives them.
fn name_count(v: &TelValue) -> usize {
    match v {
        TelValue::Dict(entries) => entries.iter().map(|(_, v)| name_count(v).max(1)).sum(),
        _ => 0,
    }
}

/// `/ddpdk/stats`'s answer: every core's counters (or core `only`'s) with the control
/// thread's, IPsec's and the snapshot's.
fn all_stats(s: &Snapshot, only: Option<usize>) -> TelValue {
    let ipsec = s.ipsec.as_ref().map(|t| ("ipsec", ipsec_stats(t)));
    let snapshot = s.taken.map(|(number, at)| {
        (
            "snapshot",
            dict(vec![
                ("number", TelValue::U64(number)),
                ("age_us", u(at.elapsed().as_micros())),
            ]),
        )
    });
    dict(
        ipsec
            .into_iter()
            .chain(snapshot)
            .chain([
                (
                    "core",
                    TelValue::Dict(
                        s.reports
                            .iter()
                            .filter(|r| only.is_none_or(|k| r.core == k))
                            .map(|r| (r.core.to_string(), core_stats(r)))
                            .collect(),
                    ),
                ),
                ("control", control_stats(s, false)),
            ])
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

    use super::*;

    /// The entries of the dict at `path` (keys from the top) in `v`, a test's failure if any
    /// step is missing or not a dict.
    fn dict_at<'a>(v: &'a TelValue, path: &[&str]) -> &'a [(String, TelValue)] {
        let TelValue::Dict(top) = v else {
            panic!("not a dict: {v:?}")
        };
        let mut d: &[(String, TelValue)] = top;
        for key in path {
            let Some((_, TelValue::Dict(next))) = d.iter().find(|(k, _)| k == key) else {
                panic!("no dict {key} in {d:?}")
            };
            d = next;
        }
        d
    }

    fn core(n: usize) -> CoreReport {
        CoreReport {
            core: n,
            stats: Default::default(),
            iface: Default::default(),
            assocs: Vec::new(),
            stags: 0,
            conn_totals: Default::default(),
            upcalls_held: 0,
        }
    }

    /// Every leaf of `v` with its path of keys joined by `/`, under `prefix`.
    fn values(v: &TelValue, prefix: &str, out: &mut Vec<(String, TelValue)>) {
        if let TelValue::Dict(entries) = v {
            for (k, v) in entries {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}/{k}")
                };
                match v {
                    TelValue::Dict(_) => values(v, &name, out),
                    _ => out.push((name, v.clone())),
                }
            }
        }
    }

    /// The names of [`values`].
    fn names(v: &TelValue, prefix: &str, out: &mut Vec<String>) {
        let mut all = Vec::new();
        values(v, prefix, &mut all);
        out.extend(all.into_iter().map(|(name, _)| name));
    }

    /// A snapshot answers while it is fresh; after, the next one is taken and numbered on,
    /// and `/ddpdk/stats` says which one answered and how old it is.
    #[test]
    fn snapshots_are_numbered_and_answer_while_fresh() {
        let calls = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&calls);
        let source: Source = Arc::new(move || {
            counted.fetch_add(1, Ordering::Relaxed);
            Ok(Snapshot::default())
        });
        let held = SnapshotCache::new(Arc::clone(&source), Duration::from_secs(3600));
        let a = held.get().unwrap();
        let b = held.get().unwrap();
        assert_eq!(calls.load(Ordering::Relaxed), 1, "one snapshot while fresh");
        assert_eq!((a.taken.unwrap().0, b.taken.unwrap().0), (1, 1));
        let stale = SnapshotCache::new(source, Duration::ZERO);
        let numbers: Vec<u64> = (0..3)
            .map(|_| stale.get().unwrap().taken.unwrap().0)
            .collect();
        assert_eq!(numbers, [1, 2, 3]);
        assert_eq!(calls.load(Ordering::Relaxed), 4);
        let mut n = Vec::new();
        names(&stats(&a, "").unwrap(), "", &mut n);
        assert!(n.contains(&"snapshot/number".to_string()), "{n:?}");
        assert!(n.contains(&"snapshot/age_us".to_string()), "{n:?}");
        let all = stats(&a, "").unwrap();
        let snap = dict_at(&all, &["snapshot"]);
        assert!(snap.contains(&("number".to_string(), TelValue::U64(1))));
    }

    /// `/ddpdk/control` has every control-thread counter, the three that `/ddpdk/stats` has
    /// no room for beside three cores' included (before, they were not exported at all), with
    /// the values of the snapshot; it takes no parameter.
    #[test]
    fn the_control_command_answers_every_control_counter() {
        let s = Snapshot {
            reports: (0..CORES_IN_ONE_ANSWER).map(core).collect(),
            control: ControlStats {
                neighbours_shared: 3,
                forwarded: 5,
                returned_closed: 13,
                peer_invalidations: 7,
                packets: 11,
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = control(&s, "").unwrap();
        let mut n = Vec::new();
        names(&answer, "", &mut n);
        for (name, want) in [
            ("neighbours_shared", 3),
            ("forwarded", 5),
            ("returned_closed", 13),
            ("peer_invalidations", 7),
            ("packets_in", 11),
        ] {
            assert!(n.contains(&name.to_string()), "{name}: {n:?}");
            let got = dict_at(&answer, &[])
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone());
            assert_eq!(got, Some(TelValue::U64(want)), "{name}");
        }
        for name in [
            "sctp/bad_checksum",
            "sctp/host_name_refused",
            "sctp/ootb_shutdown_completes_out",
            "sctp/ignored",
            "sctp/ignored_why/zero_tag",
            "sctp/ignored_why/malformed",
            "sctp/packets_in",
            "drop/tx_refused",
            "tx_ring_full",
            "tx_backlog_peak",
            "tx_held_sent",
        ] {
            assert!(n.contains(&name.to_string()), "{name}: {n:?}");
        }
        assert!(n.len() <= DICT_NAMES);
        let mut in_stats = Vec::new();
        names(&stats(&s, "").unwrap(), "", &mut in_stats);
        assert!(!in_stats.contains(&"control/peer_invalidations".to_string()));
        assert!(control(&s, "1").unwrap_err().contains("no parameters"));
    }

    /// DPDK 22.11 refuses a command of 56 bytes or more, or help of 128 or more.
    #[test]
    fn commands_fit_dpdks_limits() {
        for (cmd, help, _) in COMMANDS {
            assert!(cmd.len() < 56 && cmd.starts_with("/ddpdk/"), "{cmd}");
            assert!(help.len() < 128, "{cmd}: help of {} bytes", help.len());
        }
    }

    /// A dict holds at most 256 names: /ddpdk/stats for three data cores fits, IPsec's
    /// counters with them, and every name is made of what DPDK accepts.
    #[test]
    fn stats_of_three_cores_fit_one_dict() {
        // With IPsec and the snapshot's own names three cores' counters are 257 names: one
        // more than a dict holds, which DPDK cut without a word (the last, the control
        // thread's SCTP checks). Refused now, with the way to ask.
        let full = Snapshot {
            reports: (0..CORES_IN_ONE_ANSWER).map(core).collect(),
            ipsec: Some(IpsecTotals::default()),
            taken: Some((1, std::time::Instant::now())),
            ..Default::default()
        };
        match stats(&full, "") {
            Ok(v) => assert!(name_count(&v) <= DICT_NAMES, "{} names", name_count(&v)),
            Err(e) => assert!(e.contains("ask /ddpdk/stats,CORE for each (0 to 2)"), "{e}"),
        }
        let mut each = Vec::new();
        names(&stats(&full, "2").unwrap(), "", &mut each);
        assert!(each.contains(&"control/sctp/bad_checksum".to_string()));
        let s = Snapshot {
            reports: (0..CORES_IN_ONE_ANSWER).map(core).collect(),
            taken: Some((1, std::time::Instant::now())),
            ..Default::default()
        };
        let mut n = Vec::new();
        names(&stats(&s, "").unwrap(), "", &mut n);
        assert_eq!(n.len(), name_count(&stats(&s, "").unwrap()));
        assert!(n.contains(&"control/sctp/bad_checksum".to_string()));
        assert!(n.len() <= 256, "{} names", n.len());
        assert!(n.contains(&"core/2/ddp_error/invalid_stag".to_string()));
        assert!(n.contains(&"core/2/tx_backlog_peak".to_string()));
        assert!(n.contains(&"core/2/icmp_aborts".to_string()));
        let more = Snapshot {
            reports: (0..=CORES_IN_ONE_ANSWER).map(core).collect(),
            ..Default::default()
        };
        assert!(stats(&more, "")
            .unwrap_err()
            .contains("ask /ddpdk/stats,CORE"));
        assert!(n.contains(&"core/0/drop/checksum_bad".to_string()));
        let mut with_ipsec = Vec::new();
        let two = Snapshot {
            reports: (0..2).map(core).collect(),
            ipsec: Some(IpsecTotals::default()),
            taken: Some((1, std::time::Instant::now())),
            ..Default::default()
        };
        names(&stats(&two, "").unwrap(), "", &mut with_ipsec);
        assert!(with_ipsec.contains(&"ipsec/drop/clear_refused".to_string()));
        for name in &n {
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '/'),
                "{name}"
            );
        }
    }

    #[test]
    fn stats_of_one_core() {
        let s = Snapshot {
            reports: (0..2).map(core).collect(),
            ..Default::default()
        };
        let mut n = Vec::new();
        names(&stats(&s, "1").unwrap(), "", &mut n);
        assert!(n.iter().any(|x| x.starts_with("core/1/")));
        assert!(!n.iter().any(|x| x.starts_with("core/0/")));
        assert_eq!(stats(&s, "5").unwrap_err(), "no data core 5");
    }

    /// Every drop is counted where telemetry shows it: what the control thread failed to send
    /// (its INIT ACKs, ABORTs, ...) was counted in its TX stats and shown nowhere.
    #[test]
    fn stats_count_the_control_threads_transmit_drops() {
        let mut s = Snapshot {
            reports: (0..CORES_IN_ONE_ANSWER).map(core).collect(),
            taken: Some((1, std::time::Instant::now())),
            ..Default::default()
        };
        s.control.tx.tx_dropped = 1;
        s.control.tx.no_buffer = 2;
        s.control.tx.unresolved = 3;
        s.control.tx.too_big = 4;
        let mut flat = Vec::new();
        // Three cores still fit one answer with them.
        values(&stats(&s, "").unwrap(), "", &mut flat);
        for (name, want) in [
            ("control/drop/tx_refused", 1),
            ("control/drop/tx_no_buffer", 2),
            ("control/drop/tx_unresolved", 3),
            ("control/drop/tx_too_big", 4),
        ] {
            assert!(
                flat.contains(&(name.to_string(), TelValue::U64(want))),
                "{name} missing: {flat:?}"
            );
        }
    }

    /// Every count of the control thread's that says something went wrong is shown: flow
    /// rules the device would not remove and revocations a core did not acknowledge in time
    /// were in its stats alone; three cores still fit one answer with them.
    #[test]
    fn stats_show_flow_rules_not_removed_and_invalidations_not_acknowledged() {
        let mut s = Snapshot {
            reports: (0..CORES_IN_ONE_ANSWER).map(core).collect(),
            taken: Some((1, std::time::Instant::now())),
            ..Default::default()
        };
        s.control.flow_rules_removed = 5;
        s.control.flow_rules_remove_failed = 6;
        s.control.invalidation_timeouts = 7;
        let mut flat = Vec::new();
        values(&stats(&s, "").unwrap(), "", &mut flat);
        assert!(flat.len() <= DICT_NAMES, "{} names", flat.len());
        for (name, want) in [
            ("control/flow_rules_removed", 5),
            ("control/flow_rules_remove_failed", 6),
            ("control/invalidation_timeouts", 7),
            // The last name DPDK would cut first is still there.
            ("control/sctp/other_peer_address", 0),
        ] {
            assert!(
                flat.contains(&(name.to_string(), TelValue::U64(want))),
                "{name} missing: {flat:?}"
            );
        }
    }

    /// Every drop is counted where telemetry shows it: datagrams given up incomplete, timed out
    /// or evicted from a full reassembly table, were in no `drop/` name (the timeouts in the
    /// JSON reports alone, the evictions nowhere).
    #[test]
    fn stats_count_datagrams_given_up_incomplete_as_drops() {
        let mut c = core(0);
        c.iface.reassembly_timeouts = 2;
        c.iface.reassembly_evicted = 3;
        let s = Snapshot {
            reports: vec![c, core(1), core(2)],
            taken: Some((1, std::time::Instant::now())),
            ..Default::default()
        };
        let all = stats(&s, "").unwrap();
        let drops = dict_at(&all, &["core", "0", "drop"]);
        assert!(
            drops.contains(&("ip_reassembly_abandoned".to_string(), TelValue::U64(5))),
            "{drops:?}"
        );
    }

    /// An association a full data core aborted is counted where telemetry shows it (it was
    /// only in the core's own stats: accepted by the control thread, then gone without a
    /// trace).
    #[test]
    fn stats_count_the_associations_a_full_core_refused() {
        let mut c = core(1);
        c.stats.refused = 7;
        let s = Snapshot {
            reports: vec![core(0), c, core(2)],
            taken: Some((1, std::time::Instant::now())),
            ..Default::default()
        };
        let mut n = Vec::new();
        names(&stats(&s, "").unwrap(), "", &mut n);
        assert!(n.len() <= DICT_NAMES, "{} names", n.len());
        let all = stats(&s, "1").unwrap();
        let one = dict_at(&all, &["core", "1"]);
        assert!(
            one.contains(&("associations_refused".to_string(), TelValue::U64(7))),
            "{one:?}"
        );
    }

    /// A TSC the clock's watch dropped shows in the stats, not only on stderr.
    #[test]
    fn stats_say_what_the_clock_reads() {
        let s = Snapshot {
            reports: vec![core(0)],
            clock: "monotonic, TSC dropped",
            ..Default::default()
        };
        let all = stats(&s, "").unwrap();
        let control = dict_at(&all, &["control"]);
        assert!(control
            .iter()
            .any(|(k, v)| k == "clock" && *v == TelValue::Str("monotonic, TSC dropped".into())));
    }

    /// `n` associations spread over two cores (ids not in order across them), each with
    /// sessions on streams 1 and 2, and `mrs` registrations in no STag order.
    fn crowded(n: u64, mrs: u32) -> Snapshot {
        let mut reports = vec![core(0), core(1)];
        for id in (1..=n).rev() {
            reports[(id % 2) as usize].assocs.push(AssocInfo {
                conn: ddpdk_control::runtime::ConnHandle(id),
                peer: std::net::IpAddr::from([198, 18, 0, 2]),
                peer_port: 5000,
                state: "Established".into(),
                closed: false,
                streams: 8,
                sessions: vec![(2, State::Established), (1, State::InitiateSent)],
                stats: Default::default(),
                receive_room: 0,
                sctp: Default::default(),
                cwnd: 0,
                peer_rwnd: 0,
                rto: Duration::from_secs(1),
                srtt: None,
                local_port: 5001,
                path_mtu: 1480,
                path_active: true,
                error_count: 0,
                plpmtud: None,
            });
        }
        let mrs = (0..mrs)
            .rev()
            .map(|k| {
                (
                    Stag(0x100 * (k + 1)),
                    Registration {
                        pd: ddpdk_dataplane::mem::Pd(1),
                        access: Access::REMOTE_WRITE,
                        stream: None,
                        to_base: 0,
                        len: 4096,
                        memory: ddpdk_dataplane::mem::RegionSlice {
                            region: 0,
                            offset: 0,
                        },
                    },
                )
            })
            .collect();
        Snapshot {
            reports,
            mrs,
            ..Default::default()
        }
    }

    /// Every entry of a dict command that pages, read from cursor to cursor (each page
    /// within DPDK's 256 names), and the command's own names (`count`, `bytes`).
    fn every_page(
        cmd: impl Fn(&str) -> Result<TelValue, String>,
    ) -> (Vec<String>, std::collections::BTreeMap<String, u64>) {
        let mut own = std::collections::BTreeMap::new();
        let (mut keys, mut cursor) = (Vec::new(), String::new());
        loop {
            let page = cmd(&cursor).unwrap();
            let mut n = Vec::new();
            names(&page, "", &mut n);
            assert!(n.len() <= 256, "{} names", n.len());
            let TelValue::Dict(entries) = page else {
                panic!("a dict")
            };
            let mut next = None;
            for (k, v) in entries {
                match (k.as_str(), v) {
                    ("next", TelValue::Str(c)) => next = Some(c),
                    ("count" | "bytes", TelValue::U64(x)) => {
                        own.insert(k, x);
                    }
                    _ => keys.push(k),
                }
            }
            match next {
                Some(c) => cursor = c,
                None => return (keys, own),
            }
        }
    }

    /// Every list command answers within DPDK's limits (512 entries a list, 256 names a
    /// dict) and pages through the rest: read from the cursor each answer gives, every
    /// association, session and STag comes once, in order, none left out (a list used to
    /// stop at the limit without a word).
    #[test]
    fn list_commands_page_through_more_than_one_answer_holds() {
        let s = crowded(1300, 200);
        let (mut ids, mut from) = (Vec::new(), 0);
        loop {
            let TelValue::List(page) = assoc_list(&s, &from.to_string()).unwrap() else {
                panic!("a list")
            };
            assert!(page.len() <= 512);
            ids.extend(page.iter().map(|v| match v {
                TelValue::U64(x) => *x,
                other => panic!("{other:?}"),
            }));
            match ids.last() {
                Some(&last) if page.len() == 512 => from = last + 1,
                _ => break,
            }
        }
        assert_eq!(ids, (1..=1300).collect::<Vec<u64>>());
        assert!(assoc_list(&s, "x").unwrap_err().contains("usage"));

        let (sessions, own) = every_page(|c| session_list(&s, c));
        assert_eq!(own.get("count"), Some(&2600));
        // Long states (a Terminated session's reason): each page within DPDK's 16 KiB, which
        // leaves out what does not fit without a word, and still every session listed.
        let mut long = crowded(1300, 0);
        for r in &mut long.reports {
            for a in &mut r.assocs {
                for (_, st) in &mut a.sessions {
                    *st =
                        State::Terminated(ddpdk_control::session::TerminationReason::PendingLimit);
                }
            }
        }
        let (mut cursor, mut listed) = (String::new(), 0);
        loop {
            let TelValue::Dict(page) = session_list(&long, &cursor).unwrap() else {
                panic!("a dict")
            };
            let json: usize = page
                .iter()
                .map(|(k, v)| {
                    let v = match v {
                        TelValue::Str(t) => t.len().min(127),
                        TelValue::U64(x) => x.to_string().len(),
                        other => panic!("{other:?}"),
                    };
                    k.len() + v + 6
                })
                .sum();
            assert!(json < 15 * 1024, "a page of {json} bytes");
            listed += page.iter().filter(|(k, _)| k.contains('/')).count();
            match page.into_iter().find(|(k, _)| k == "next") {
                Some((_, TelValue::Str(c))) => cursor = c,
                _ => break,
            }
        }
        assert_eq!(listed, 2600);
        let want: Vec<String> = (1..=1300u64)
            .flat_map(|a| [format!("{a}/1"), format!("{a}/2")])
            .collect();
        assert_eq!(sessions, want);
        assert!(session_list(&s, "1/x").unwrap_err().contains("usage"));

        let (stags, own) = every_page(|c| mr_list(&s, c));
        assert_eq!(own.get("count"), Some(&200));
        assert_eq!(own.get("bytes"), Some(&(200 * 4096)));
        let want: Vec<String> = (1..=200u32).map(|k| Stag(0x100 * k).to_string()).collect();
        assert_eq!(stags, want);
        assert!(mr_list(&s, "0xzz").unwrap_err().contains("usage"));
    }

    #[test]
    fn assoc_info_wants_a_known_id() {
        let s = Snapshot::default();
        assert!(assoc_info(&s, "x").unwrap_err().contains("usage"));
        assert_eq!(assoc_info(&s, "7").unwrap_err(), "no association 7");
    }
}
