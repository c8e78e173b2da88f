//! The DDP endpoint behind the shell (`ddpdk --ip ADDR ...`): one endpoint on the EAL's first
//! port, in the product's shape. Its data cores run pinned on the EAL's worker lcores (one
//! RX and one TX queue each), its control thread (INIT, COOKIE ECHO, sessions of `--listen`,
//! STags) runs on a thread of its own, and the shell drives both with the DDP commands
//! (`help ddp`): associations, sessions, memory regions, tagged and untagged sends, and the
//! views `show assoc`, `show session`, `show mr`, `show fwd stats all`.
//!
//! Commands that start something wait until it is done (an association up, a session
//! answered, every send completed), so a `--cmdline-file` reads as a sequence of steps.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant as Wall};

use ddpdk_control::conn::{
    AtomicOperation, Indication, Payload, RdmaOp, RdmaRequest, SendKind, SendRequest, Status,
};
use ddpdk_control::memory::{MemoryError, MemoryRegistration, RegionId, Registered};
use ddpdk_control::rdmap::{decode_private_data, RdmaLimits, ATOMIC_WORD};
use ddpdk_control::runtime::{
    self, Clock, ConnHandle, Control, CoreReport, Event as RtEvent, Op, RuntimeError, LIGHT_SLEEP,
};
use ddpdk_control::session::{Event as SessionEvent, State};
use ddpdk_dataplane::mem::{Access, Pd, Stag};
use ddpdk_dataplane::port::dpdk::{DpdkPort, Eal};
use ddpdk_dataplane::port::region::Region;
use ddpdk_dataplane::port::{ChecksumOffload, Port};
use ddpdk_dataplane::sctp::CloseReason;
use ddpdk_dataplane::wire::crc32c::crc32c;
use ddpdk_dataplane::wire::rdmap::{Control as RdmapControl, Opcode, IMMEDIATE_DATA_LEN};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::app::{note, Flow};
use crate::ipsec::KeySocket;
use crate::node::{offer_bytes, parse_offer, Node, NodePort, Placement};
use crate::options::Options;
use crate::shell::WaitArg;
use crate::shell::{
    AccessArg, AssocCmd, AssocId, ClearCmd, ClearPortCmd, Command, DigestArg, MrCmd, PortShow,
    PortTarget, RdmaCmd, RecvCmd, SendCmd, SessionCmd, SetCmd, ShowCmd, ShowConfigCmd, StagArg,
};
use crate::stats::mac_text;
use crate::telemetry::{self, state_name, state_text};
use crate::verify::pattern;

/// How long a command waits for what it started.
const WAIT: Duration = Duration::from_secs(15);
/// Sends in flight per `send` command.
const WINDOW: usize = 64;
/// The most one `send` command writes (it builds the image to report its CRC32c).
const MAX_SEND_BYTES: u64 = 1 << 30;

/// One `send` or `rdma` command: COUNT messages of SIZE bytes.
struct Posting {
    id: AssocId,
    stream: u16,
    size: u32,
    count: u32,
    from: Option<StagArg>,
    verb: Verb,
}

/// What each message of a command is.
#[derive(Debug, Clone, Copy)]
enum Verb {
    /// Plain DDP: tagged to the peer's STag, or untagged to queue `qn`.
    Tagged {
        stag: StagArg,
        to: u64,
    },
    Untagged {
        qn: u32,
    },
    /// RDMAP (RFC 5040 §5): Write, Send, Read into the local region `into`.
    Write {
        stag: StagArg,
        to: u64,
    },
    Send {
        solicited: bool,
        invalidate: Option<StagArg>,
    },
    Read {
        stag: StagArg,
        to: u64,
        into: StagArg,
    },
    /// RFC 7306 §5.1: atomics on the peer's word, the original values into `into`.
    FetchAdd {
        stag: StagArg,
        to: u64,
        add: u64,
        into: StagArg,
    },
    CmpSwap {
        stag: StagArg,
        to: u64,
        compare: u64,
        swap: u64,
        into: StagArg,
    },
    /// RFC 7306 §6: `value`'s 8 bytes, big-endian.
    Immediate {
        value: u64,
        solicited: bool,
    },
}

impl Verb {
    fn name(&self) -> &'static str {
        match self {
            Verb::Tagged { .. } => "tagged",
            Verb::Untagged { .. } => "untagged",
            Verb::Write { .. } => "rdma write",
            Verb::Send { .. } => "rdma send",
            Verb::Read { .. } => "rdma read",
            Verb::FetchAdd { .. } => "rdma fetch-add",
            Verb::CmpSwap { .. } => "rdma cmp-swap",
            Verb::Immediate { .. } => "rdma imm",
        }
    }
}

/// A session as the shell sees it.
#[derive(Debug, Clone, Default)]
struct SessionView {
    state: String,
    /// The region the peer offered in its Accept: STag, TO, length.
    offer: Option<(Stag, u64, u64)>,
    /// An RDMAP stream: the Initiate or Accept carried RDMAP's parameters.
    rdmap: bool,
    /// Untagged messages delivered into our receive buffers (Sends; RFC 5041 §5.4), their
    /// bytes, and of them RFC 7306 Immediate Data: a server shell heard nothing of them.
    received: u64,
    received_bytes: u64,
    immediates: u64,
    /// Tagged messages the peer placed in our regions (RDMA Writes; RFC 5041 §5.4).
    tagged: u64,
    /// The error of the peer's RDMAP Terminate, if one came: why work it flushed failed.
    peer_terminate: Option<String>,
    /// An RDMAP stream's Read limits (RFC 5040 §6.1, RFC 5043 §6.3's RDMA Read Credits): ours
    /// as we sent them, and the peer's from its Initiate or Accept.
    limits: Option<RdmaLimits>,
    peer_limits: Option<RdmaLimits>,
}

/// An RDMAP session's Read limits, for `show session`: how many Reads and Atomics (one
/// count, RFC 7306 §5.2.2) each side may have outstanding: its ORD, at most the other's IRD.
fn limits_text(v: &SessionView) -> String {
    match (v.limits, v.peer_limits) {
        (Some(ours), Some(peer)) => format!(
            "; Reads and Atomics outstanding: ours at most {} (our ORD {}, the peer's IRD {}), \
             the peer's at most {} (its ORD {}, our IRD {})",
            ours.ord.min(peer.ird),
            ours.ord,
            peer.ird,
            peer.ord.min(ours.ird),
            peer.ord,
            ours.ird
        ),
        _ => String::new(),
    }
}

/// What a session brought in, for `show session`: nothing when it brought nothing.
fn received_text(v: &SessionView) -> String {
    let mut parts = Vec::new();
    if v.received > 0 {
        parts.push(format!(
            "{} untagged message(s) received ({} bytes{})",
            v.received,
            v.received_bytes,
            if v.immediates > 0 {
                format!(", {} of them Immediate Data", v.immediates)
            } else {
                String::new()
            }
        ));
    }
    if v.tagged > 0 {
        parts.push(format!("{} tagged message(s) placed by the peer", v.tagged));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("; {}", parts.join(", "))
    }
}

/// An association as the shell sees it, kept up to date by the control thread.
#[derive(Debug, Clone)]
struct ConnView {
    peer: IpAddr,
    peer_port: u16,
    core: usize,
    /// Streams and MULPDU, once up.
    up: Option<(u16, usize)>,
    /// The peer restarted (RFC 9260 §5.2.4): the streams were negotiated again, and no
    /// indication says how many.
    restarted: bool,
    closed: Option<String>,
    sessions: BTreeMap<u16, SessionView>,
    refused: u64,
    /// The last operation the core refused, and why.
    last_refusal: Option<String>,
    /// Commands waiting on this association that end with the core's refusal as their error
    /// ([`AwaitRefusals`]); while one waits, a refusal is its to report, not an event's.
    awaited: u32,
    /// `assoc close` waits for this association's end and says it: the Closed event is then
    /// the command's to print, not a second line of its own.
    close_awaited: bool,
    /// Completions by `wr_id` (true: success), until the command that posted them takes them.
    done: BTreeMap<u64, bool>,
    posted: u64,
}

/// Completions kept for commands that gave up waiting (the oldest go first).
const DONE_KEPT: usize = 1 << 16;

/// What the control thread and the shell share.
struct Shared {
    control: Control<NodePort>,
    json: bool,
    listen: bool,
    pd: Pd,
    /// Offered in the Accept of sessions we accept.
    offer: Option<Registered>,
    /// Receive buffers posted for every session we accept (`recv auto`).
    auto_recv: Option<AutoRecv>,
    conns: BTreeMap<ConnHandle, ConnView>,
    /// Sessions established (by either side) that no `wait session` has reported yet, in the
    /// order they were: a session that came and went between two looks is still seen.
    established: VecDeque<(ConnHandle, u16)>,
    /// Closed associations still in view, oldest first ([`CLOSED_KEPT`] at most).
    closed: VecDeque<ConnHandle>,
    /// Closed associations forgotten to keep `closed` that short.
    forgotten: u64,
    reports: Vec<CoreReport>,
}

/// `count` receive buffers of `len` bytes, one after another from the start of `mr`: it must
/// be memory we may write (the peer's untagged messages land there) and hold them all.
/// `recv auto`: COUNT buffers of LEN bytes on queue QN for each session accepted, from the
/// local region STAG. Each live session has a set of its own, the region cut into as many
/// sets as it holds: one set for all (as it was) had concurrent sessions' messages land in
/// the same bytes (found by an outside-in review).
struct AutoRecv {
    qn: u32,
    stag: Stag,
    len: u32,
    count: u32,
    /// Which session holds each set of the region, in order; None: free. Grown as sessions
    /// come, to `room` sets at most (a large region of small buffers holds millions: a table
    /// made up front for them all took gigabytes, a review).
    sets: Vec<Option<Holder>>,
    room: usize,
}

/// A session holding a set of `recv auto`'s buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Holder {
    conn: ConnHandle,
    stream: u16,
    /// Receives posted on the session and not yet ended (filled or flushed).
    receives: u32,
    /// Its SessionTerminated came. A session the peer ended while DDP-SSNs before its
    /// Terminate were missing keeps its receives until those arrive (RFC 5043 §6.1: order is
    /// by DDP-SSN; the library's `end_flush`): its set is free only once none is left, or a
    /// session accepted meanwhile would be given the bytes the old one's late segments land in.
    ended: bool,
}

impl AutoRecv {
    /// A free set for session `stream` of `conn`: the offset of its first buffer.
    fn take(&mut self, conn: ConnHandle, stream: u16) -> Option<u64> {
        let k = match self.sets.iter().position(Option::is_none) {
            Some(k) => k,
            None if self.sets.len() < self.room => {
                self.sets.push(None);
                self.sets.len() - 1
            }
            None => return None,
        };
        self.sets[k] = Some(Holder {
            conn,
            stream,
            receives: 0,
            ended: false,
        });
        Some(k as u64 * u64::from(self.len) * u64::from(self.count))
    }

    /// Sessions holding a set now.
    fn held(&self) -> usize {
        self.sets.iter().filter(|s| s.is_some()).count()
    }

    /// The set of `conn`'s session `stream`: the live session's, else one ended and waiting.
    fn holder(
        &mut self,
        conn: ConnHandle,
        stream: u16,
        ended: bool,
    ) -> Option<&mut Option<Holder>> {
        self.sets.iter_mut().find(|set| {
            set.is_some_and(|h| h.conn == conn && h.stream == stream && h.ended == ended)
        })
    }

    /// A receive was posted on session `stream` of `conn` (any queue, any buffer: each ends
    /// with one Received or RecvFlushed, which [`AutoRecv::receive_ended`] counts).
    fn posted(&mut self, conn: ConnHandle, stream: u16) {
        if let Some(Some(h)) = self.holder(conn, stream, false) {
            h.receives += 1;
        }
    }

    /// A receive of session `stream` of `conn` was filled or flushed. An ended session's are
    /// counted first: a stream's next session starts only after the last one's receives were
    /// flushed.
    fn receive_ended(&mut self, conn: ConnHandle, stream: u16) {
        let set = self.sets.iter_mut().filter_map(|set| {
            set.filter(|h| h.conn == conn && h.stream == stream && h.receives > 0)
                .map(|h| (h.ended, set))
        });
        let Some((_, set)) = set.max_by_key(|(ended, _)| *ended) else {
            return;
        };
        if let Some(h) = set.as_mut() {
            h.receives -= 1;
            if h.ended && h.receives == 0 {
                *set = None;
            }
        }
    }

    /// Session `stream` of `conn` ended: its set is free once none of its receives is left.
    fn session_ended(&mut self, conn: ConnHandle, stream: u16) {
        if let Some(set) = self.holder(conn, stream, false) {
            if let Some(h) = set.as_mut() {
                h.ended = true;
                if h.receives == 0 {
                    *set = None;
                }
            }
        }
    }

    /// Every set of `conn`'s sessions is free again: the association is over, or its peer
    /// restarted (every session ended and its receives flushed before either is indicated).
    fn give_back(&mut self, conn: ConnHandle) {
        for set in &mut self.sets {
            if set.is_some_and(|h| h.conn == conn) {
                *set = None;
            }
        }
    }
}

fn receive_buffers_fit(mr: &Mr, len: u32, count: u32) -> Result<(), String> {
    // Not a `sink` either: its remote write lets the peer place into the buffers by STag
    // and end them all with one Send with Invalidate (a review).
    if !matches!(mr.access, AccessArg::Local) {
        return Err(format!(
            "STag {} is registered {}, not for local write alone ('mr reg LEN local'): \
             receive buffers are written by the peer's untagged messages only",
            mr.reg.stag,
            access_text(mr.access)
        ));
    }
    if u64::from(len) * u64::from(count) > mr.reg.len {
        return Err(format!(
            "{count} buffer(s) of {len} bytes do not fit STag {} ({} bytes)",
            mr.reg.stag, mr.reg.len
        ));
    }
    Ok(())
}

/// Closed associations kept in view (and in their data core's table): the last few, for
/// `show assoc` and the commands that wait on them. Older ones are forgotten, so a server that
/// has served thousands of clients holds, and its data cores walk every turn, its live
/// associations and these: before, every association it had ever had, up to 256 a core, each
/// with its send queue.
const CLOSED_KEPT: usize = 16;

impl Shared {
    fn view(
        &mut self,
        conn: ConnHandle,
        peer: IpAddr,
        peer_port: u16,
        core: usize,
    ) -> &mut ConnView {
        self.conns.entry(conn).or_insert(ConnView {
            peer,
            peer_port,
            core,
            up: None,
            restarted: false,
            closed: None,
            sessions: BTreeMap::new(),
            refused: 0,
            last_refusal: None,
            awaited: 0,
            close_awaited: false,
            done: BTreeMap::new(),
            posted: 0,
        })
    }

    /// Folds one event into the views; answers Initiates (accept with `--listen`, else reject).
    fn on_event(&mut self, e: RtEvent) {
        let json = self.json;
        match e {
            RtEvent::Accepted {
                conn,
                peer,
                peer_port,
                core,
            } => {
                self.view(conn, peer, peer_port, core);
                emit_event(
                    json,
                    "association_accepted",
                    json!({"assoc": conn.0, "peer": peer.to_string(), "port": peer_port,
                        "core": core}),
                    format_args!(
                        "Association {conn} accepted from {peer} port {peer_port} (data core {core})"
                    ),
                );
            }
            RtEvent::Completion { conn, completion } => {
                if let Some(v) = self.conns.get_mut(&conn) {
                    v.done
                        .insert(completion.wr_id, completion.status == Status::Success);
                    if v.done.len() > DONE_KEPT {
                        v.done.pop_first();
                    }
                }
            }
            RtEvent::Posted { conn, stream, .. } => {
                if let Some(v) = self.conns.get_mut(&conn) {
                    v.posted += 1;
                }
                if let Some(auto) = self.auto_recv.as_mut() {
                    auto.posted(conn, stream);
                }
            }
            RtEvent::Refused {
                conn, op, error, ..
            } => {
                let mut awaited = false;
                if let Some(v) = self.conns.get_mut(&conn) {
                    v.refused += 1;
                    v.last_refusal = Some(crate::node::refusal(op, error));
                    awaited = v.awaited > 0;
                }
                let fields = json!({"assoc": conn.0, "op": op, "error": error.to_string()});
                if awaited {
                    // The waiting command fails with it: once on the screen, not twice (nor
                    // once for each of a burst of refused posts).
                    json_event(json, "refused", fields);
                } else {
                    emit_event(
                        json,
                        "refused",
                        fields,
                        format_args!("Association {conn}: {}", crate::node::refusal(op, error)),
                    );
                }
            }
            RtEvent::Unknown { conn, op, .. } => {
                note(
                    json,
                    format_args!("Association {conn}: {op}: no such association on its core"),
                );
            }
            RtEvent::Report(r) => self.reports.push(*r),
            RtEvent::Indication { conn, indication } => {
                let closed = matches!(indication, Indication::Closed(_));
                // A session's receive buffers (`recv auto`) are free for the next once it ended
                // and none of its receives can still be filled.
                if let Some(auto) = self.auto_recv.as_mut() {
                    match &indication {
                        Indication::Closed(_) | Indication::PeerRestarted => auto.give_back(conn),
                        Indication::Session {
                            stream,
                            event: SessionEvent::SessionTerminated { .. },
                        } => auto.session_ended(conn, *stream),
                        Indication::Received { stream, .. }
                        | Indication::RecvFlushed { stream, .. } => {
                            auto.receive_ended(conn, *stream)
                        }
                        _ => {}
                    }
                }
                self.on_indication(conn, indication);
                if closed {
                    self.closed.push_back(conn);
                    while self.closed.len() > CLOSED_KEPT {
                        let Some(old) = self.closed.pop_front() else {
                            break;
                        };
                        // `--reconnect` forgets its own at once; then both are no-ops.
                        if self.conns.remove(&old).is_some() {
                            self.forgotten += 1;
                        }
                        let _ = self.control.forget(old);
                    }
                }
            }
        }
    }

    fn on_indication(&mut self, conn: ConnHandle, i: Indication) {
        let json = self.json;
        let (listen, pd, offer) = (self.listen, self.pd, self.offer);
        let conn_config = self.control.conn_config();
        let Some(v) = self.conns.get_mut(&conn) else {
            return;
        };
        let mut answer = None;
        let mut withdraw_offer = false;
        // Counted for `show session`: one line each would drown a shell under thousands.
        match &i {
            Indication::Received {
                stream,
                len,
                rsvd_ulp,
                ..
            } => {
                if let Some(s) = v.sessions.get_mut(stream) {
                    s.received += 1;
                    s.received_bytes += u64::from(*len);
                    let opcode = RdmapControl::from_byte(rsvd_ulp[0]).opcode;
                    if s.rdmap && matches!(opcode, Opcode::ImmediateData | Opcode::ImmediateDataSe)
                    {
                        s.immediates += 1;
                    }
                }
            }
            Indication::TaggedDelivered { stream, .. } => {
                if let Some(s) = v.sessions.get_mut(stream) {
                    s.tagged += 1;
                }
            }
            _ => {}
        }
        match i {
            Indication::Connected { streams, mulpdu } => {
                v.up = Some((streams, mulpdu));
                // Scripts hear of it; the text shell prints it where it waits (`assoc open`).
                json_event(
                    json,
                    "association_up",
                    json!({"assoc": conn.0, "peer": v.peer.to_string(), "port": v.peer_port,
                            "core": v.core, "streams": streams, "mulpdu": mulpdu}),
                );
            }
            Indication::Closed(reason) => {
                v.closed = Some(reason.to_string());
                let cause = match reason {
                    CloseReason::PeerAbort { cause } => cause,
                    _ => None,
                };
                let fields = json!({"assoc": conn.0, "peer": v.peer.to_string(),
                    "port": v.peer_port, "reason": reason.kind(), "cause": cause,
                    "text": reason.to_string()});
                if std::mem::take(&mut v.close_awaited) {
                    json_event(json, "association_down", fields);
                } else {
                    emit_event(
                        json,
                        "association_down",
                        fields,
                        format_args!(
                            "Association {conn} with {} port {} closed: {reason}",
                            v.peer, v.peer_port
                        ),
                    );
                }
            }
            Indication::PeerRestarted => {
                v.sessions.clear();
                v.restarted = true;
                emit_event(
                    json,
                    "peer_restarted",
                    json!({"assoc": conn.0}),
                    format_args!("Association {conn}: the peer restarted"),
                );
            }
            Indication::MulpduChanged { mulpdu } => emit_event(
                json,
                "mulpdu",
                json!({"assoc": conn.0, "mulpdu": mulpdu}),
                format_args!(
                    "Association {conn}: MULPDU now {mulpdu} (the path MTU moved, RFC 5043 §9)"
                ),
            ),
            Indication::PathChange { active } => emit_event(
                json,
                "path_change",
                json!({"assoc": conn.0, "active": active}),
                format_args!(
                    "Association {conn}: path {} (RFC 9260 §8.2)",
                    if active {
                        "active again"
                    } else {
                        "inactive: Path.Max.Retrans failures in a row"
                    }
                ),
            ),
            // RFC 5040 §5.3: every data core has dropped it by the time this arrives.
            Indication::Received {
                stream,
                invalidated: Some(stag),
                ..
            } => {
                // An invalid STag offered to the next session would end it at its first
                // write (RFC 5041 §7.1 check 2).
                let offered = offer.is_some_and(|o| o.stag == stag);
                emit_event(
                    json,
                    "stag_invalidated",
                    json!({"assoc": conn.0, "stream": stream, "stag": stag.to_string(),
                        "by": "peer", "was_offered": offered}),
                    format_args!(
                        "Association {conn} stream {stream}: the peer invalidated STag {stag}{}",
                        if offered {
                            "; sessions accepted from now on are offered no region"
                        } else {
                            ""
                        }
                    ),
                );
                if offered {
                    withdraw_offer = true;
                }
            }
            // Counted by the core (`show assoc`); the shell has nothing to wait for on them.
            Indication::TaggedDelivered { .. }
            | Indication::Received { .. }
            | Indication::RecvFlushed { .. }
            // This application posts its writes signaled.
            | Indication::SilentSuccesses { .. } => {}
            // The core's connection terminates the session right after (ConnConfig's
            // `on_receive_error`); its SessionTerminated follows.
            Indication::Error { stream, error, .. } => {
                emit_event(
                    json,
                    "segment_refused",
                    json!({"assoc": conn.0, "stream": stream, "error": error.to_string()}),
                    format_args!("Association {conn} stream {stream}: segment refused: {error}"),
                );
            }
            Indication::RdmapTerminate { stream, error } => {
                if let Some(sv) = v.sessions.get_mut(&stream) {
                    sv.peer_terminate = Some(error.to_string());
                }
                emit_event(
                    json,
                    "rdmap_terminate",
                    json!({"assoc": conn.0, "stream": stream, "error": error.to_string()}),
                    format_args!(
                        "Association {conn} stream {stream}: the peer's RDMAP Terminate: {error}"
                    ),
                );
            }
            Indication::Session { stream, event } => {
                let s = v.sessions.entry(stream).or_default();
                match event {
                    SessionEvent::InitiateReceived { private_data } => {
                        // A new session on the stream: nothing of the last one's counts.
                        *s = SessionView::default();
                        s.state = "initiate received".into();
                        s.peer_limits = decode_private_data(private_data.as_bytes()).map(|p| p.0);
                        s.rdmap = s.peer_limits.is_some();
                        // What the answer below sends, if it accepts.
                        s.limits = (s.rdmap && listen)
                            .then(|| conn_config.rdmap_limits(RdmaLimits::default()));
                        answer = Some((stream, s.rdmap));
                    }
                    SessionEvent::Accepted { private_data } => {
                        s.state = "established".into();
                        self.established.push_back((conn, stream));
                        json_event(
                            json,
                            "session_established",
                            json!({"assoc": conn.0, "stream": stream, "by": "peer"}),
                        );
                        // RDMAP's parameters come first; the offer is the ULP's part.
                        let bytes = private_data.as_bytes();
                        let (rdmap, ulp) = match decode_private_data(bytes) {
                            Some((peer, ulp)) => {
                                s.peer_limits = Some(peer);
                                (true, ulp)
                            }
                            None => (false, bytes),
                        };
                        s.rdmap = rdmap;
                        s.offer = parse_offer(ulp);
                    }
                    SessionEvent::Rejected { .. } => {
                        s.state = "rejected".into();
                        // The text shell says so where it waits (`session open`).
                        json_event(
                            json,
                            "session_rejected",
                            json!({"assoc": conn.0, "stream": stream, "by": "peer"}),
                        );
                    }
                    // After ours, the peer's answering Terminate changes nothing (§6.2).
                    SessionEvent::TerminateReceived if !s.state.starts_with("terminated") => {
                        s.state = "terminate received".into()
                    }
                    SessionEvent::TerminateReceived => {}
                    SessionEvent::SessionTerminated { reason } => {
                        s.state = format!("terminated ({reason})");
                        emit_event(
                            json,
                            "session_terminated",
                            json!({"assoc": conn.0, "stream": stream, "reason": reason.to_string()}),
                            format_args!(
                                "Association {conn} stream {stream}: session terminated: {reason}"
                            ),
                        );
                    }
                }
            }
        }
        if withdraw_offer {
            self.offer = None;
        }
        // RFC 5043 §6.4: the passive side's ULP answers every Initiate.
        if let Some((stream, rdmap)) = answer {
            let op = if listen {
                let data = offer.as_ref().map(offer_bytes).unwrap_or_default();
                // An RDMAP Initiate is accepted as an RDMAP stream, with the default limits.
                if rdmap {
                    Op::AcceptRdmap {
                        stream,
                        pd,
                        limits: RdmaLimits::default(),
                        private_data: data,
                    }
                } else {
                    Op::Accept {
                        stream,
                        pd,
                        private_data: data,
                    }
                }
            } else {
                Op::Reject {
                    stream,
                    private_data: b"not listening".to_vec(),
                }
            };
            let accepting = matches!(op, Op::Accept { .. } | Op::AcceptRdmap { .. });
            let submitted = self.control.submit(conn, op);
            // Buffers behind the Accept, in the same command ring: the core posts them before it
            // sends the Accept, so the peer cannot send into a queue still empty.
            let set = match (&submitted, accepting, self.auto_recv.as_mut()) {
                (Ok(()), true, Some(auto)) => {
                    let (qn, stag, len, count, sets) =
                        (auto.qn, auto.stag, auto.len, auto.count, auto.room);
                    match auto.take(conn, stream) {
                        Some(base) => Some((qn, stag, len, count, base)),
                        None => {
                            note(
                                json,
                                format_args!(
                                    "Association {conn}: session {stream} gets no receive \
                                     buffers: STag {stag} holds {sets} session(s)' {count} of \
                                     {len} bytes, all in use ('recv auto' with a larger region)"
                                ),
                            );
                            None
                        }
                    }
                }
                _ => None,
            };
            if let Some((qn, stag, len, count, base)) = set {
                for k in 0..count {
                    let posted = self
                        .control
                        .memory()
                        .receive_buffer(pd, stag, base + u64::from(k) * u64::from(len), len)
                        .map_err(|e| e.to_string())
                        .and_then(|buffer| {
                            let op = Op::PostRecv {
                                stream,
                                qn,
                                wr_id: u64::from(k),
                                buffer,
                            };
                            self.control.submit(conn, op).map_err(|e| e.to_string())
                        });
                    if let Err(e) = posted {
                        note(
                            json,
                            format_args!("Association {conn}: receive buffer {k} not posted: {e}"),
                        );
                        break;
                    }
                }
            }
            if submitted.is_ok() {
                // The text shell said nothing of a session it accepted (found by an outside-in
                // test: a --listen server's operator never saw sessions arrive).
                emit_event(
                    json,
                    if accepting {
                        "session_accepted"
                    } else {
                        "session_rejected"
                    },
                    json!({"assoc": conn.0, "stream": stream, "rdmap": rdmap, "by": "us"}),
                    format_args!(
                        "Session {stream} of association {conn}: {} {}Initiate",
                        if accepting {
                            "accepted the"
                        } else {
                            "rejected the"
                        },
                        if rdmap { "RDMAP " } else { "" }
                    ),
                );
            }
            let state = match submitted {
                Ok(()) if accepting => "established".to_string(),
                Ok(()) => "rejected by us".to_string(),
                Err(e) => {
                    note(
                        json,
                        format_args!("Association {conn}: cannot answer the Initiate: {e}"),
                    );
                    format!("unanswered ({e})")
                }
            };
            if let Some(s) = self
                .conns
                .get_mut(&conn)
                .and_then(|v| v.sessions.get_mut(&stream))
            {
                if accepting && submitted.is_ok() {
                    self.established.push_back((conn, stream));
                }
                s.state = state;
            }
        }
    }
}

/// One event for scripts (`--json`): a JSON line on stdout, `{"event": KIND, ...fields}`, in
/// the order the shell learns of them; without `--json`, the `text` line as before.
fn emit_event(json: bool, kind: &str, fields: serde_json::Value, text: std::fmt::Arguments<'_>) {
    if json {
        let mut v = fields;
        if let Some(o) = v.as_object_mut() {
            o.insert("event".into(), kind.into());
        }
        outln!("{v}");
    } else {
        outln!("{text}");
    }
}

/// An event scripts hear of and the text shell does not (it prints it where it waits).
fn json_event(json: bool, kind: &str, fields: serde_json::Value) {
    if json {
        emit_event(json, kind, fields, format_args!(""));
    }
}

/// A region the shell registered.
#[derive(Debug, Clone, Copy)]
struct Mr {
    region: RegionId,
    reg: Registered,
    access: AccessArg,
}

/// See the module documentation.
pub struct DdpApp {
    json: bool,
    port: Arc<DpdkPort>,
    /// The same port behind IPsec policy (`show ipsec`, `ipsec ...`).
    ipsec: Arc<NodePort>,
    /// The key manager's socket (`--ipsec-socket`); closed before the port.
    _key_socket: Option<KeySocket>,
    /// The port, its pool and the data cores (taken at shutdown).
    node: Option<Node>,
    shared: Arc<Mutex<Shared>>,
    clock: Clock,
    /// Stops the control thread.
    stop: Arc<AtomicBool>,
    control_thread: Option<JoinHandle<()>>,
    sctp_port: u16,
    pd: Pd,
    mrs: BTreeMap<u32, Mr>,
    /// Messages sent so far, so every message's bytes differ.
    sent: u64,
    /// The STag registered last (`last`).
    last_mr: Option<u32>,
    eal: Eal,
    /// `--reconnect`: the peer kept associated, the association of the current attempt, and
    /// when the next attempt may start.
    reconnect: Option<(IpAddr, u16)>,
    reconnect_conn: Option<ConnHandle>,
    reconnect_at: Wall,
    /// One report request at a time: the shell's `show` and the telemetry commands.
    reports_gate: Arc<Mutex<()>>,
    /// Raised by SIGINT/SIGTERM ([`DdpApp::watch_signals`]): a command waiting (for the
    /// peer, for completions) gives up, so one Ctrl-C stops the endpoint.
    signalled: Arc<AtomicBool>,
    /// When `--run-for` ends the run, and its seconds: a waiting command gives up then too.
    deadline: Option<(Wall, f64)>,
    /// The commands registered on DPDK's telemetry socket.
    _telemetry: Option<telemetry::Registered>,
}

impl std::fmt::Debug for DdpApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DdpApp")
            .field("port", &self.port.name())
            .field("node", &self.node)
            .field("regions", &self.mrs.len())
            .finish()
    }
}

/// A command's claim on the refusals of an association while it waits (see
/// [`DdpApp::refusals`]); dropped when the command is done.
struct AwaitRefusals {
    shared: Arc<Mutex<Shared>>,
    conn: ConnHandle,
}

impl Drop for AwaitRefusals {
    fn drop(&mut self) {
        if let Some(v) = lock(&self.shared).conns.get_mut(&self.conn) {
            v.awaited = v.awaited.saturating_sub(1);
        }
    }
}

fn lock(m: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // A panic on another thread leaves the views as they were; they are still usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl DdpApp {
    pub fn new(eal: Eal, opts: &Options) -> Result<DdpApp, String> {
        let (mut node, mut control) =
            Node::start(&eal, opts, "ddp_app_pool", Placement::Workers, 64)?;
        let pd = control.memory_mut().alloc_pd();
        let clock = node.clock;
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Mutex::new(Shared {
            control,
            json: opts.json,
            listen: opts.listen,
            pd,
            offer: None,
            auto_recv: None,
            conns: BTreeMap::new(),
            established: VecDeque::new(),
            closed: VecDeque::new(),
            forgotten: 0,
            reports: Vec::new(),
        }));
        let ipsec = Arc::clone(&node.port);
        let port = Arc::clone(ipsec.inner().inner());
        let key_socket = match &opts.ipsec_socket {
            Some(path) => Some(KeySocket::start(path, Arc::clone(&ipsec))?),
            None => None,
        };
        let control_thread = {
            let shared = Arc::clone(&shared);
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("ddpdk-control".into())
                .spawn(move || control_loop(&shared, clock, &stop))
                .map_err(|e| format!("cannot start the control thread: {e}"))?
        };
        note(
            opts.json,
            format_args!(
                "DDP endpoint on port {} ({}, {}, link {}): {} SCTP port {}, {} streams, {} \
                 data core(s) on lcore(s) {:?}, control thread{}; steering: {}; \
                 SCTP CRC32c: {}{}",
                port.id(),
                port.name(),
                mac_text(&opts.mac.unwrap_or(port.mac())),
                if node.link_up { "up" } else { "down" },
                opts.ip
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" and "),
                opts.sctp_port,
                opts.streams,
                node.cores,
                node.core_lcores,
                if opts.listen {
                    "; accepting sessions (--listen)"
                } else {
                    ""
                }
                .to_string()
                    + &opts
                        .service
                        .map(|s| format!("; the {s:?} service").to_lowercase())
                        .unwrap_or_default(),
                node.steering,
                match ipsec.sctp_checksum_offload() {
                    ChecksumOffload { tx: true, rx: true } => "device (TX and RX)",
                    ChecksumOffload {
                        tx: true,
                        rx: false,
                    } => "device on TX, software on RX",
                    ChecksumOffload {
                        tx: false,
                        rx: true,
                    } => "software on TX, device on RX",
                    ChecksumOffload { .. } => "software",
                },
                node.idle_note(opts),
            ),
        );
        crate::ipsec::announce(&ipsec, opts.json, opts.ipsec_socket.as_deref());
        let reports_gate = Arc::new(Mutex::new(()));
        let source: telemetry::Source = {
            // Weak: the commands must not keep the control side (its buffers, its regions)
            // alive past `shutdown`, which frees them before the EAL.
            let (shared, gate) = (Arc::downgrade(&shared), Arc::clone(&reports_gate));
            let port = Arc::downgrade(&ipsec);
            Arc::new(move || {
                let shared = shared.upgrade().ok_or("the endpoint is shutting down")?;
                let mut snapshot = snapshot(&shared, &gate, clock)?;
                snapshot.ipsec = port.upgrade().and_then(|p| telemetry::IpsecTotals::of(&p));
                Ok(snapshot)
            })
        };
        let commands = match node.answer_telemetry(source) {
            Ok(r) => Some(r),
            Err(e) => {
                errln!("ddpdk: no telemetry commands: {e}");
                None
            }
        };
        Ok(DdpApp {
            json: opts.json,
            port,
            ipsec,
            _key_socket: key_socket,
            node: Some(node),
            shared,
            clock,
            stop,
            control_thread: Some(control_thread),
            sctp_port: opts.sctp_port,
            pd,
            mrs: BTreeMap::new(),
            sent: 0,
            last_mr: None,
            eal,
            reconnect: opts
                .reconnect
                .map(|a| (a, opts.reconnect_port.unwrap_or(opts.sctp_port))),
            reconnect_conn: None,
            reconnect_at: Wall::now(),
            reports_gate,
            signalled: Arc::new(AtomicBool::new(false)),
            deadline: None,
            _telemetry: commands,
        })
    }

    /// The flag SIGINT and SIGTERM raise: commands that wait give up when it is.
    pub fn watch_signals(&mut self, signalled: Arc<AtomicBool>) {
        self.signalled = signalled;
    }

    /// A waiting command's error once a signal came, or `--run-for` ran out (a script's
    /// `wait closed` held the process past it for as long as the peer took: found by an
    /// outside-in test).
    fn interrupted(&self, what: &str) -> Result<(), String> {
        if self.signalled.load(Ordering::Relaxed) {
            return Err(format!("interrupted by a signal while waiting for {what}"));
        }
        if let Some((at, secs)) = self.deadline {
            if Wall::now() >= at {
                return Err(format!(
                    "--run-for's {secs} s ran out while waiting for {what}"
                ));
            }
        }
        Ok(())
    }

    /// Waits until `f` has an answer, with the views locked while it looks.
    fn wait<T>(
        &self,
        what: &str,
        mut f: impl FnMut(&mut Shared) -> Option<Result<T, String>>,
    ) -> Result<T, String> {
        let deadline = Wall::now() + WAIT;
        loop {
            if let Some(r) = f(&mut lock(&self.shared)) {
                return r;
            }
            self.interrupted(what)?;
            if Wall::now() > deadline {
                return Err(format!("timed out waiting for {what}"));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn conn(&self, id: AssocId) -> Result<ConnHandle, String> {
        let c = ConnHandle(id);
        if lock(&self.shared).conns.contains_key(&c) {
            Ok(c)
        } else {
            Err(format!("no association {id} (see 'show assoc')"))
        }
    }

    /// An association a command can still use: a closed one is said to be closed before
    /// anything the command would lack on it (a send to a closed association named the
    /// peer's missing offer first).
    fn open_conn(&self, id: AssocId) -> Result<ConnHandle, String> {
        let conn = self.conn(id)?;
        match lock(&self.shared)
            .conns
            .get(&conn)
            .and_then(|v| v.closed.clone())
        {
            Some(r) => Err(format!("association {conn} is closed already: {r}")),
            None => Ok(conn),
        }
    }

    /// `stream` is one of the association's (RFC 9260 §5.1: the number both ends agreed at
    /// its set-up): a command for another was answered as if the stream merely lacked a
    /// session or an offer.
    fn has_stream(&self, conn: ConnHandle, stream: u16) -> Result<(), String> {
        let s = lock(&self.shared);
        match s
            .conns
            .get(&conn)
            .filter(|v| !v.restarted)
            .and_then(|v| v.up)
        {
            Some((streams, _)) if stream >= streams => Err(format!(
                "association {conn} has streams 0 to {} (agreed at its set-up, RFC 9260 §5.1)",
                streams.saturating_sub(1)
            )),
            _ => Ok(()),
        }
    }

    /// After a refusal ends a command: waits (a second at most) until each of the `posted`
    /// work requests from `first` on completed or was refused, so that the refusals of the
    /// rest are the command's too, not events printed after it returned.
    fn settle(&self, conn: ConnHandle, first: u64, posted: u64, base_refused: u64) {
        let deadline = Wall::now() + Duration::from_secs(1);
        while Wall::now() < deadline {
            let settled = lock(&self.shared).conns.get(&conn).is_none_or(|v| {
                let done = v.done.range(first..).count() as u64;
                done + v.refused.saturating_sub(base_refused) >= posted || v.closed.is_some()
            });
            if settled {
                return;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Operations of `conn` the core refused so far (a command fails on a new one), and the
    /// mark that this command reports the next ones itself, held while it waits.
    fn refusals(&self, conn: ConnHandle) -> (u64, AwaitRefusals) {
        let mut s = lock(&self.shared);
        let refused = match s.conns.get_mut(&conn) {
            Some(v) => {
                v.awaited += 1;
                v.refused
            }
            None => 0,
        };
        (
            refused,
            AwaitRefusals {
                shared: Arc::clone(&self.shared),
                conn,
            },
        )
    }

    fn mr(&self, stag: StagArg) -> Result<Mr, String> {
        match stag {
            StagArg::Value(v) => self
                .mrs
                .get(&v)
                .copied()
                .ok_or_else(|| format!("no local region with STag {:#010x} (see 'show mr')", v)),
            StagArg::Last => match self.last_mr {
                None => Err("no region registered here yet ('mr reg')".to_string()),
                Some(v) => self.mrs.get(&v).copied().ok_or_else(|| {
                    format!(
                        "the region registered last (STag {:#010x}) was deregistered: name \
                         another by its STag (see 'show mr')",
                        v
                    )
                }),
            },
            StagArg::Offer => Err("'offer' names the peer's region; give a local STag".into()),
            StagArg::All => Err("'all' is for 'mr checksum' only".into()),
        }
    }

    fn submit(&self, conn: ConnHandle, op: Op) -> Result<(), String> {
        let deadline = Wall::now() + WAIT;
        loop {
            match lock(&self.shared).control.submit(conn, op.clone()) {
                Ok(()) => return Ok(()),
                Err(runtime::RuntimeError::Busy) if Wall::now() < deadline => {}
                Err(e) => return Err(e.to_string()),
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// This endpoint has one port: `all` names it, and so does its number.
    fn port_target(&self, target: PortTarget) -> Result<(), String> {
        match target {
            PortTarget::Port(id) if id != self.port.id() => Err(format!(
                "no port {id}: this endpoint runs on port {}",
                self.port.id()
            )),
            _ => Ok(()),
        }
    }

    /// Executes one command, printing its output.
    pub fn execute(&mut self, cmd: &Command) -> Result<Flow, String> {
        match cmd {
            Command::Quit => return Ok(Flow::Quit),
            Command::Start { .. } => note(
                self.json,
                format_args!("The DDP endpoint runs from start-up; 'quit' stops it"),
            ),
            // testpmd's `stop` prints the statistics as it stops forwarding; an endpoint
            // does not stop (its peers would see their associations die), so it says so
            // first, as `start` does (it printed the statistics alone, as if it had stopped).
            Command::Stop => {
                note(
                    self.json,
                    format_args!(
                        "The DDP endpoint runs until 'quit'; its statistics ('show fwd stats'):"
                    ),
                );
                self.show_fwd_stats()?;
            }
            Command::Help { section } => note(
                self.json,
                format_args!("{}", crate::shell::help(*section).trim_end()),
            ),
            Command::Assoc { what } => self.assoc(what)?,
            Command::Session { what } => self.session(what)?,
            Command::Mr { what } => self.mr_cmd(what)?,
            Command::Send { what } => self.send(what)?,
            Command::Rdma { what } => self.rdma(what)?,
            Command::Ipsec { words } => {
                let words: Vec<&str> = words.iter().map(String::as_str).collect();
                // The key manager socket's spelling, which the usage line offers: the same
                // as `show ipsec` (it was refused as a failed command).
                if words == ["show"] {
                    if self.json {
                        outln!("{}", crate::ipsec::show_json(&self.ipsec));
                    } else {
                        outln!("{}", crate::ipsec::show_text(&self.ipsec));
                    }
                    return Ok(Flow::Continue);
                }
                let done = crate::ipsec::command(&self.ipsec, &words)?;
                if !self.json {
                    note(false, format_args!("{done}"));
                } else if words == ["expiring"] {
                    // What a script polls: the SAs, not a sentence to parse.
                    let (due, expired) = crate::ipsec::expiring_sas(&self.ipsec);
                    outln!("{}", json!({"expiring": {"due": due, "expired": expired}}));
                } else {
                    // The command's first words only: the rest may hold a key.
                    let command = words.iter().take(2).copied().collect::<Vec<_>>().join(" ");
                    outln!(
                        "{}",
                        json!({"ipsec_answer": {"command": command, "answer": done}})
                    );
                }
            }
            Command::Recv {
                what:
                    RecvCmd::Post {
                        id,
                        stream,
                        qn,
                        stag,
                        len,
                        count,
                    },
            } => self.recv_post(*id, *stream, *qn, *stag, *len, count.unwrap_or(1))?,
            Command::Recv {
                what:
                    RecvCmd::Auto {
                        qn,
                        stag,
                        len,
                        count,
                    },
            } => {
                self.fits_a_queue(*qn, *count)?;
                let mr = self.mr(*stag)?;
                // Checked now, not when a session is accepted: there the refusal is one note per
                // session, and each accepted session's queue stays empty.
                receive_buffers_fit(&mr, *len, *count)?;
                // Each session a set of its own, as many as the region holds. A second `recv
                // auto` replaces the first, which is said; not while sessions hold sets of the
                // first (a review: the new table, all free, handed the same bytes out again).
                let sets =
                    usize::try_from(mr.reg.len / (u64::from(*len) * u64::from(*count)).max(1))
                        .unwrap_or(usize::MAX);
                let before = {
                    let mut s = lock(&self.shared);
                    if let Some(held) = s.auto_recv.as_ref().map(AutoRecv::held).filter(|&n| n > 0)
                    {
                        return Err(format!(
                            "{held} session(s) still hold receive buffers of the 'recv auto' \
                             in force: it can change once they end"
                        ));
                    }
                    s.auto_recv.replace(AutoRecv {
                        qn: *qn,
                        stag: mr.reg.stag,
                        len: *len,
                        count: *count,
                        sets: Vec::new(),
                        room: sets,
                    })
                };
                note(
                    self.json,
                    format_args!(
                        "Sessions we accept get {count} receive buffer(s) of {len} bytes on \
                         queue {qn} from STag {}, each its own ({sets} at once){}",
                        mr.reg.stag,
                        before.map_or(String::new(), |a| format!(
                            " (instead of {} of {} bytes on queue {} from STag {})",
                            a.count, a.len, a.qn, a.stag
                        ))
                    ),
                );
            }
            Command::Show { what } => match what {
                ShowCmd::Assoc => self.show_assoc()?,
                ShowCmd::Session => self.show_session()?,
                ShowCmd::Mr => self.show_mr(),
                ShowCmd::Ipsec => {
                    if self.json {
                        outln!("{}", crate::ipsec::show_json(&self.ipsec));
                    } else {
                        outln!("{}", crate::ipsec::show_text(&self.ipsec));
                    }
                }
                ShowCmd::Fwd { .. } => self.show_fwd_stats()?,
                ShowCmd::Config {
                    what: ShowConfigCmd::Sctp,
                } => {
                    let cfg = *lock(&self.shared).control.listener().endpoint().config();
                    if self.json {
                        outln!("{}", crate::sctp_params::show_json(&cfg));
                    } else {
                        out!("{}", crate::sctp_params::show_text(&cfg));
                    }
                }
                ShowCmd::Config { .. } => {
                    return Err(
                        "show config fwd: a DDP endpoint has no forwarding engine (see show \
                         config sctp)"
                            .into(),
                    )
                }
                ShowCmd::Port { what, target } => {
                    self.port_target(*target)?;
                    let p = &self.port;
                    match what {
                        PortShow::Info => crate::app::show_port_info(self.json, p),
                        PortShow::Xstats => {
                            crate::app::show_xstats(self.json, p.id(), self.ipsec.inner().xstats())
                        }
                        PortShow::Stats => {
                            crate::app::print_port_stats(self.json, p, &p.stats(), None)
                        }
                    }
                }
            },
            Command::Wait {
                what: WaitArg::Session,
                secs,
            } => {
                let deadline = Wall::now() + Duration::from_secs(u64::from(secs.unwrap_or(60)));
                // Each wait reports the next session established, whether it is still up or
                // already ended: a script waiting for client after client (`wait session`,
                // `wait closed`) missed a client whose whole session fell between two looks,
                // then waited for the next one.
                loop {
                    let found = {
                        let mut s = lock(&self.shared);
                        s.established.pop_front().map(|(c, k)| {
                            let now = s
                                .conns
                                .get(&c)
                                .and_then(|v| v.sessions.get(&k))
                                .map_or_else(|| "forgotten".to_string(), |v| v.state.clone());
                            (c, k, now)
                        })
                    };
                    if let Some((c, k, now)) = found {
                        if now == "established" {
                            note(
                                self.json,
                                format_args!("Session {k} of association {c} is established"),
                            );
                        } else {
                            note(
                                self.json,
                                format_args!(
                                    "Session {k} of association {c} was established (now: {now})"
                                ),
                            );
                        }
                        break;
                    }
                    self.interrupted("a session")?;
                    if Wall::now() > deadline {
                        return Err("timed out waiting for a session".into());
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            Command::Wait {
                what: WaitArg::Closed,
                secs,
            } => {
                let deadline = Wall::now() + Duration::from_secs(u64::from(secs.unwrap_or(60)));
                loop {
                    let (seen, open) = {
                        let s = lock(&self.shared);
                        let open = s.conns.values().filter(|v| v.closed.is_none()).count();
                        (s.conns.len() as u64 + s.forgotten, open)
                    };
                    if seen > 0 && open == 0 {
                        note(self.json, format_args!("All {seen} association(s) closed"));
                        break;
                    }
                    self.interrupted("the associations to close")?;
                    if Wall::now() > deadline {
                        return Err(format!(
                            "timed out: {seen} association(s) seen, {open} still open"
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            Command::Set {
                what: SetCmd::Sctp { name, value },
            } => {
                let mut s = lock(&self.shared);
                let mut cfg = *s.control.listener().endpoint().config();
                crate::sctp_params::set(&mut cfg, name, value)?;
                s.control.set_sctp_config(cfg).map_err(str::to_string)?;
                note(
                    self.json,
                    format_args!("SCTP {name} = {value} for associations made from now on"),
                );
            }
            Command::Clear {
                what:
                    ClearCmd::Port {
                        what: ClearPortCmd::Stats { target },
                    },
            } => {
                self.port_target(*target)?;
                self.port.reset_stats();
                note(
                    self.json,
                    format_args!("  NIC statistics for port {} cleared", self.port.id()),
                );
            }
            Command::Set { .. } => {
                return Err("a forwarding command: this ddpdk is a DDP endpoint".into())
            }
        }
        let _ = std::io::stdout().flush();
        Ok(Flow::Continue)
    }

    fn assoc(&mut self, what: &AssocCmd) -> Result<(), String> {
        match *what {
            AssocCmd::Open { addr, port } => {
                let port = port.unwrap_or(self.sctp_port);
                // What the cores counted so far, so that a failure is judged on this attempt's
                // frames alone (a review: a long-lived shell's totals told of another peer).
                let counted = |reports: &[CoreReport]| -> (u64, u64) {
                    (
                        reports.iter().map(|r| r.stats.frames_in).sum(),
                        reports.iter().map(|r| r.stats.tx.unresolved).sum(),
                    )
                };
                let before = self.reports_for_diagnosis().map(|r| counted(&r));
                let opened = Wall::now();
                let conn = {
                    let mut s = lock(&self.shared);
                    let now = self.clock.now();
                    let c = s
                        .control
                        .connect(now, addr, port)
                        .map_err(|e| e.to_string())?;
                    let core = s.control.owner(c).unwrap_or(0);
                    s.view(c, addr, port, core);
                    c
                };
                let up = self.wait("the association", |s| {
                    let v = s.conns.get(&conn)?;
                    if let Some(r) = &v.closed {
                        return Some(Err(format!("association to {addr} failed: {r}")));
                    }
                    v.up.map(|(st, m)| Ok((st, m, v.core)))
                });
                let (streams, mulpdu, core) = match up {
                    Ok(up) => up,
                    Err(e) => {
                        let open = lock(&self.shared)
                            .conns
                            .get(&conn)
                            .is_some_and(|v| v.closed.is_none());
                        if !open {
                            return Err(e);
                        }
                        // Why, as `perf client` says it (found by an outside-in test: the
                        // shell said only that it timed out, with the link down or ARP
                        // unanswered).
                        // The link's state always tells; the counts only once an INIT had
                        // time for an answer (a second), and only this attempt's.
                        let link_up = self.node.as_ref().is_some_and(|n| n.port.link().up);
                        let why = if !link_up {
                            crate::node::unreached(0, 0, &addr.to_string(), false)
                        } else if Wall::now().saturating_duration_since(opened)
                            < Duration::from_secs(1)
                        {
                            None
                        } else {
                            before
                                .zip(self.reports_for_diagnosis().map(|r| counted(&r)))
                                .and_then(|((f0, u0), (f1, u1))| {
                                    crate::node::unreached(
                                        f1.saturating_sub(f0),
                                        u1.saturating_sub(u0),
                                        &addr.to_string(),
                                        true,
                                    )
                                })
                        };
                        // Given up on: it must not go on sending INITs behind the user's back,
                        // nor stand in the way of the next `assoc open` to the same peer.
                        let _ = self.submit(conn, Op::Abort);
                        return Err(format!(
                            "{e}{}; association {conn} aborted",
                            why.map(|w| format!(": {w}")).unwrap_or_default()
                        ));
                    }
                };
                note(
                    self.json,
                    format_args!(
                        "Association {conn} up: to {addr} port {port} on data core {core}, \
                         {streams} streams, adaptation indication DDP, MULPDU {mulpdu}"
                    ),
                );
            }
            AssocCmd::Close { id, how } => {
                let conn = self.open_conn(id)?;
                let op = if how.is_some() {
                    Op::Abort
                } else {
                    Op::Shutdown
                };
                if let Some(v) = lock(&self.shared).conns.get_mut(&conn) {
                    v.close_awaited = true;
                }
                let r = self.submit(conn, op).and_then(|()| {
                    self.wait("the association to close", |s| {
                        s.conns.get(&conn)?.closed.clone().map(Ok)
                    })
                });
                // A close that failed or gave up waiting leaves the event its own line.
                if let Some(v) = lock(&self.shared).conns.get_mut(&conn) {
                    v.close_awaited = false;
                }
                note(self.json, format_args!("Association {conn} closed: {}", r?));
            }
        }
        Ok(())
    }

    fn session(&mut self, what: &SessionCmd) -> Result<(), String> {
        match what {
            SessionCmd::Open {
                id,
                stream,
                text,
                rdmap,
                ird,
                ord,
            } => {
                // A closed association is said now, as 'assoc close' does, not by the core's
                // refusal after the next commands.
                let conn = self.open_conn(*id)?;
                let stream = *stream;
                let (refused, _awaiting) = self.refusals(conn);
                let view = SessionView {
                    limits: rdmap.then(|| {
                        lock(&self.shared)
                            .control
                            .conn_config()
                            .rdmap_limits(RdmaLimits {
                                ird: *ird,
                                ord: *ord,
                            })
                    }),
                    ..SessionView::default()
                };
                let previous = lock(&self.shared)
                    .conns
                    .get_mut(&conn)
                    .and_then(|v| v.sessions.insert(stream, view));
                let private_data = text.clone().unwrap_or_default().into_bytes();
                let op = if *rdmap {
                    Op::InitiateRdmap {
                        stream,
                        pd: self.pd,
                        limits: RdmaLimits {
                            ird: *ird,
                            ord: *ord,
                        },
                        private_data,
                    }
                } else {
                    Op::Initiate {
                        stream,
                        pd: self.pd,
                        private_data,
                    }
                };
                self.submit(conn, op)?;
                let answer = self.wait("the peer's answer", |s| {
                    let v = s.conns.get(&conn)?;
                    if v.closed.is_some() {
                        return Some(Err("the association closed".into()));
                    }
                    if v.refused > refused {
                        return Some(Err(v.last_refusal.clone().unwrap_or_default()));
                    }
                    let st = v.sessions.get(&stream)?;
                    (st.state == "established"
                        || st.state == "rejected"
                        || st.state.starts_with("terminated"))
                    .then(|| Ok(st.clone()))
                });
                let s = match answer {
                    Ok(s) => s,
                    Err(e) => {
                        // A refused Initiate changed nothing: the view of a session that is
                        // still there comes back.
                        if let (Some(p), Some(v)) =
                            (previous, lock(&self.shared).conns.get_mut(&conn))
                        {
                            v.sessions.insert(stream, p);
                        }
                        return Err(e);
                    }
                };
                match s.offer {
                    Some((stag, to, len)) => note(
                        self.json,
                        format_args!(
                            "Session {stream} of association {conn}: {}; the peer offers STag \
                             {stag} TO {to:#x} length {len}",
                            s.state
                        ),
                    ),
                    None => note(
                        self.json,
                        format_args!("Session {stream} of association {conn}: {}", s.state),
                    ),
                }
                if s.state != "established" {
                    return Err(format!("session {stream} {}", s.state));
                }
            }
            SessionCmd::Close { id, stream } => {
                let conn = self.conn(*id)?;
                let stream = *stream;
                let over = lock(&self.shared)
                    .conns
                    .get(&conn)
                    .and_then(|v| v.sessions.get(&stream))
                    .map(|st| st.state.clone())
                    .filter(|st| st.starts_with("terminated"));
                if let Some(st) = over {
                    return Err(format!(
                        "session {stream} of association {conn} is over already: {st}"
                    ));
                }
                let (refused, _awaiting) = self.refusals(conn);
                self.submit(conn, Op::Terminate { stream })?;
                let state = self.wait("the session to end", |s| {
                    let v = s.conns.get(&conn)?;
                    // The end first: a session the peer ended while our Terminate was on its
                    // way is refused by the core after its end's event, and what the user
                    // asked for (the session over) is what happened.
                    let st = v.sessions.get(&stream);
                    if let Some(st) = st.filter(|st| st.state.starts_with("terminated")) {
                        return Some(Ok(st.state.clone()));
                    }
                    (v.refused > refused).then(|| Err(v.last_refusal.clone().unwrap_or_default()))
                })?;
                note(
                    self.json,
                    format_args!("Session {stream} of association {conn}: {state}"),
                );
            }
            SessionCmd::Offer { stag } => {
                let mr = self.mr(*stag)?;
                // An offered STag is for the peer's tagged writes (or reads): one of local
                // access only would fail every one of them (RFC 5041 §7.1 check 2, an access
                // error ending the stream), so it is not offered.
                if matches!(mr.access, AccessArg::Local) {
                    return Err(format!(
                        "STag {} grants local access only: the peer could not write or read \
                         it; offer a region registered with remote access ('mr reg LEN \
                         remote-write')",
                        mr.reg.stag
                    ));
                }
                let listen = {
                    let mut s = lock(&self.shared);
                    s.offer = Some(mr.reg);
                    s.listen
                };
                note(
                    self.json,
                    format_args!(
                        "Sessions we accept are offered STag {} TO {:#x} length {}{}",
                        mr.reg.stag,
                        mr.reg.to_base,
                        mr.reg.len,
                        if listen {
                            ""
                        } else {
                            " (this shell accepts none: it rejects the peer's sessions \
                             without --listen)"
                        }
                    ),
                );
            }
        }
        Ok(())
    }

    fn mr_cmd(&mut self, what: &MrCmd) -> Result<(), String> {
        match *what {
            MrCmd::Reg { len, access } => {
                let access = access.unwrap_or(AccessArg::RemoteWrite);
                let bytes = usize::try_from(len).map_err(|_| "length too large")?;
                if bytes == 0 {
                    return Err("a region needs at least one byte".into());
                }
                let region = Region::from_dpdk(&self.eal, bytes, None)
                    .map_err(|e| format!("{e} ({})", region_memory_hint(len)))?;
                let huge = region.huge();
                let mut s = lock(&self.shared);
                let m = s.control.memory_mut();
                let id = m.add_region(region).map_err(|_| "region table full")?;
                let rights = match access {
                    AccessArg::RemoteWrite => Access::REMOTE_WRITE,
                    AccessArg::RemoteRead => Access::REMOTE_READ,
                    AccessArg::Remote => Access::REMOTE_WRITE | Access::REMOTE_READ,
                    AccessArg::RemoteAtomic => {
                        Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC
                    }
                    AccessArg::Local => Access::LOCAL_WRITE,
                    AccessArg::Sink => Access::LOCAL_WRITE | Access::REMOTE_WRITE,
                };
                let reg = m
                    .register(MemoryRegistration {
                        pd: self.pd,
                        region: id,
                        offset: 0,
                        len,
                        access: rights,
                        stream: None,
                        to_base: 0,
                    })
                    .map_err(|e| e.to_string())?;
                drop(s);
                self.last_mr = Some(reg.stag.0);
                self.mrs.insert(
                    reg.stag.0,
                    Mr {
                        region: id,
                        reg,
                        access,
                    },
                );
                if self.json {
                    outln!(
                        "{}",
                        json!({"mr": {"stag": reg.stag.to_string(), "to": reg.to_base, "len": reg.len,
                            "access": access_text(access), "huge": huge}})
                    );
                } else {
                    note(
                        false,
                        format_args!(
                            "MR registered: STag {} TO {:#x} length {} {} ({} pages)",
                            reg.stag,
                            reg.to_base,
                            reg.len,
                            access_text(access),
                            if huge { "huge" } else { "normal" }
                        ),
                    );
                }
            }
            MrCmd::Dereg { stag } => {
                let mr = self.mr(stag)?;
                let cores = {
                    let mut s = lock(&self.shared);
                    let m = s.control.memory_mut();
                    // Already invalidated (by the peer's Send with Invalidate, or by an
                    // earlier `mr dereg` whose region could not be freed yet): the memory is
                    // still this MR's to free.
                    match m.deregister(mr.reg.stag) {
                        Ok(()) | Err(MemoryError::NoSuchStag) => {}
                        Err(e) => return Err(e.to_string()),
                    }
                    // Its region was the MR's own: its slot is free for the next `mr reg`.
                    m.free_region(mr.region).map_err(|e| e.to_string())?;
                    // What named it goes with it, and says so: an offer of it would end the
                    // next session at its first write, receive buffers in it are refused.
                    let mut also = String::new();
                    if s.offer.is_some_and(|o| o.stag == mr.reg.stag) {
                        s.offer = None;
                        also += "; sessions accepted from now on are offered no region";
                    }
                    if s.auto_recv.as_ref().is_some_and(|a| a.stag == mr.reg.stag) {
                        s.auto_recv = None;
                        also += "; sessions accepted from now on get no receive buffers \
                                 ('recv auto' cleared)";
                    }
                    (s.control.cores(), also)
                };
                let (cores, also) = cores;
                self.mrs.remove(&mr.reg.stag.0);
                emit_event(
                    self.json,
                    "stag_revoked",
                    json!({"stag": mr.reg.stag.to_string(), "cores_acknowledged": cores}),
                    format_args!(
                        "MR STag {} deregistered (all {cores} data core(s) acknowledged){also}",
                        mr.reg.stag
                    ),
                );
            }
            MrCmd::Fill { stag, byte } => {
                let mr = self.mr(stag)?;
                let s = lock(&self.shared);
                let r = s.control.memory().region(mr.region).ok_or("region gone")?;
                r.fill(0, mr.reg.len as usize, byte)
                    .map_err(|e| e.to_string())?;
                note(
                    self.json,
                    format_args!(
                        "MR STag {}: {} bytes set to {byte:#04x}",
                        mr.reg.stag, mr.reg.len
                    ),
                );
            }
            MrCmd::Checksum {
                stag: StagArg::All,
                digest,
            } => {
                let all: Vec<u32> = self.mrs.keys().copied().collect();
                for v in all {
                    self.mr_cmd(&MrCmd::Checksum {
                        stag: StagArg::Value(v),
                        digest,
                    })?;
                }
            }
            MrCmd::Checksum { stag, digest } => {
                let mr = self.mr(stag)?;
                let s = lock(&self.shared);
                let r = s.control.memory().region(mr.region).ok_or("region gone")?;
                let len = mr.reg.len as usize;
                let (name, value) = match digest.unwrap_or(DigestArg::Crc32c) {
                    DigestArg::Crc32c => (
                        "crc32c",
                        format!("{:#010x}", r.crc32c(0, len).map_err(|e| e.to_string())?),
                    ),
                    DigestArg::Sha256 => {
                        let mut h = Sha256::new();
                        let mut buf = vec![0u8; 1 << 16];
                        let mut off = 0usize;
                        while off < len {
                            let n = (len - off).min(buf.len());
                            r.read(off as u64, &mut buf[..n])
                                .map_err(|e| e.to_string())?;
                            h.update(&buf[..n]);
                            off += n;
                        }
                        let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
                        ("sha256", hex)
                    }
                };
                if self.json {
                    outln!(
                        "{}",
                        json!({"checksum": {"stag": mr.reg.stag.to_string(), "len": len, name: value}})
                    );
                } else {
                    note(
                        false,
                        format_args!("MR STag {} {name} {value} over {len} bytes", mr.reg.stag),
                    );
                }
            }
        }
        Ok(())
    }

    fn send(&mut self, what: &SendCmd) -> Result<(), String> {
        let posting = match *what {
            SendCmd::Tagged {
                id,
                stream,
                stag,
                to,
                size,
                count,
                from,
            } => Posting {
                id,
                stream,
                size,
                count: count.unwrap_or(1),
                from,
                verb: Verb::Tagged { stag, to },
            },
            SendCmd::Untagged {
                id,
                stream,
                qn,
                size,
                count,
                from,
            } => Posting {
                id,
                stream,
                size,
                count: count.unwrap_or(1),
                from,
                verb: Verb::Untagged { qn },
            },
        };
        self.post(posting)
    }

    fn rdma(&mut self, what: &RdmaCmd) -> Result<(), String> {
        let posting = match *what {
            RdmaCmd::Write {
                id,
                stream,
                stag,
                to,
                size,
                count,
                from,
            } => Posting {
                id,
                stream,
                size,
                count: count.unwrap_or(1),
                from,
                verb: Verb::Write { stag, to },
            },
            RdmaCmd::Read {
                id,
                stream,
                stag,
                to,
                size,
                count,
                into,
            } => Posting {
                id,
                stream,
                size,
                count: count.unwrap_or(1),
                from: None,
                verb: Verb::Read { stag, to, into },
            },
            RdmaCmd::Send {
                id,
                stream,
                size,
                count,
                solicited,
                invalidate,
                from,
            } => Posting {
                id,
                stream,
                size,
                count: count.unwrap_or(1),
                from,
                verb: Verb::Send {
                    solicited,
                    invalidate,
                },
            },
            RdmaCmd::FetchAdd {
                id,
                stream,
                stag,
                to,
                add,
                count,
                into,
            } => Posting {
                id,
                stream,
                size: ATOMIC_WORD as u32,
                count: count.unwrap_or(1),
                from: None,
                verb: Verb::FetchAdd {
                    stag,
                    to,
                    add: add.0,
                    into,
                },
            },
            RdmaCmd::CmpSwap {
                id,
                stream,
                stag,
                to,
                compare,
                swap,
                into,
            } => Posting {
                id,
                stream,
                size: ATOMIC_WORD as u32,
                count: 1,
                from: None,
                verb: Verb::CmpSwap {
                    stag,
                    to,
                    compare: compare.0,
                    swap: swap.0,
                    into,
                },
            },
            RdmaCmd::Imm {
                id,
                stream,
                value,
                count,
                solicited,
            } => Posting {
                id,
                stream,
                size: IMMEDIATE_DATA_LEN as u32,
                count: count.unwrap_or(1),
                from: None,
                verb: Verb::Immediate {
                    value: value.0,
                    solicited,
                },
            },
        };
        self.post(posting)
    }

    /// The peer's STag and TO a command names: a value, or `offer` (the region the peer
    /// offered on the stream, TO counted from its base).
    /// `bytes` from offset `to` of the peer's region `stag`: where the peer offered it, the
    /// range must lie inside what it offered, or the peer would refuse it (RFC 5041 §7.1
    /// check 4) after this end had reported the write as sent.
    fn remote(
        &self,
        conn: ConnHandle,
        stream: u16,
        stag: StagArg,
        to: u64,
        bytes: u64,
    ) -> Result<(Stag, u64), String> {
        match stag {
            StagArg::Value(v) => Ok((Stag(v), to)),
            StagArg::Last | StagArg::All => Ok((self.mr(stag)?.reg.stag, to)),
            StagArg::Offer => {
                let s = lock(&self.shared);
                let (st, base, len) = s
                    .conns
                    .get(&conn)
                    .and_then(|v| v.sessions.get(&stream))
                    .and_then(|s| s.offer)
                    .ok_or(format!("the peer offered no region on stream {stream}"))?;
                if to.checked_add(bytes).is_none_or(|end| end > len) {
                    return Err(format!(
                        "offset {to} + {bytes} bytes is past the {len} bytes the peer offered \
                         on stream {stream} (it would refuse them: RFC 5041 §7.1 check 4)"
                    ));
                }
                let to = base
                    .checked_add(to)
                    .ok_or("the peer's offered TO + the offset wraps (RFC 5041 §7.1 check 5)")?;
                Ok((st, to))
            }
        }
    }

    /// COUNT messages (or Reads) of SIZE bytes, at most `WINDOW` in flight; waits for every
    /// completion and reports the rate and the CRC32c of the bytes sent, written or read.
    fn post(&mut self, p: Posting) -> Result<(), String> {
        let Posting {
            id,
            stream,
            size,
            count,
            from,
            verb,
        } = p;
        // A local source region: whole SIZE slots of it, used in turn.
        let slots_of = |mr: &Mr| -> Result<u64, String> {
            let slots = mr.reg.len / u64::from(size.max(1));
            if slots == 0 {
                return Err(format!(
                    "the local region holds {} bytes, less than one message",
                    mr.reg.len
                ));
            }
            Ok(slots)
        };
        let source = match from {
            Some(s) => {
                let mr = self.mr(s)?;
                Some((mr.region, mr.reg, slots_of(&mr)?))
            }
            None => None,
        };
        let conn = self.open_conn(id)?;
        self.has_stream(conn, stream)?;
        let total = u64::from(size) * u64::from(count);
        if total > MAX_SEND_BYTES {
            return Err(format!("at most {MAX_SEND_BYTES} bytes per command"));
        }
        let target = match verb {
            Verb::Tagged { stag, to } | Verb::Write { stag, to } | Verb::Read { stag, to, .. } => {
                let (stag, to) = self.remote(conn, stream, stag, to, total)?;
                to.checked_add(total)
                    .ok_or("TO + bytes wraps (RFC 5041 §7.1 check 5)")?;
                Some((stag, to))
            }
            // Every atomic of the command names the same word, which the responder refuses
            // unless 64-bit aligned (RFC 7306 §8.2: a Terminate that ends the stream), so a
            // typo is refused here, as the region's bounds are.
            Verb::FetchAdd { stag, to, .. } | Verb::CmpSwap { stag, to, .. } => {
                let (stag, to) = self.remote(conn, stream, stag, to, ATOMIC_WORD as u64)?;
                if to % ATOMIC_WORD as u64 != 0 {
                    return Err(format!(
                        "the word at TO {to} is not 8-byte aligned: the peer would end the \
                         stream (RFC 7306 §8.2)"
                    ));
                }
                Some((stag, to))
            }
            Verb::Untagged { qn } => {
                self.has_queue(qn)?;
                None
            }
            Verb::Send { .. } | Verb::Immediate { .. } => None,
        };
        let sink = match verb {
            Verb::Read { into, .. } | Verb::FetchAdd { into, .. } | Verb::CmpSwap { into, .. } => {
                let mr = self.mr(into)?;
                // Said here, where the shell knows which: the core's refusal names every
                // cause a sink can have (RFC 5040 §5.2: the Read Response is placed into
                // the local STag, which must let us write it).
                if !mr.access.local_write() {
                    return Err(format!(
                        "STag {} is registered {}, without local write: a {} writes its \
                         result into the --into region ('mr reg LEN local', or 'sink' for \
                         one the peer may invalidate)",
                        mr.reg.stag,
                        access_text(mr.access),
                        verb.name()
                    ));
                }
                let slots = slots_of(&mr)?;
                Some((mr, slots))
            }
            _ => None,
        };
        let invalidate = match verb {
            Verb::Send {
                invalidate: Some(stag),
                ..
            } => Some(self.remote(conn, stream, stag, 0, 0)?.0),
            _ => None,
        };
        // This command's work requests: wr_ids first.., one per message. Only their completions
        // count, and a refusal by the core ends the command with its reason.
        let first = self.sent + 1;
        if !lock(&self.shared).conns.contains_key(&conn) {
            return Err("association gone".into());
        }
        let (base_refused, _awaiting) = self.refusals(conn);
        let progress = |s: &Shared| -> Result<(u64, u64), String> {
            let v = s.conns.get(&conn).ok_or("association gone")?;
            if v.refused > base_refused {
                return Err(v.last_refusal.clone().unwrap_or_else(|| "refused".into()));
            }
            let ours = v.done.range(first..);
            let (done, failed) = ours.fold((0, 0), |(d, f), (_, ok)| (d + 1, f + u64::from(!ok)));
            if done < u64::from(count) {
                if let Some(r) = &v.closed {
                    return Err(format!("association closed: {r}"));
                }
            }
            Ok((done, failed))
        };
        let mut image_crc = Vec::new();
        let t0 = Wall::now();
        let mut posted = 0u32;
        let mut stalled = Wall::now();
        while posted < count {
            // Bound first: the scrutinee's lock guard would live through the match arms, and
            // `settle` locks again.
            let now_done = progress(&lock(&self.shared));
            let (done, _) = match now_done {
                Ok(p) => p,
                Err(e) => {
                    self.settle(conn, first, u64::from(posted), base_refused);
                    return Err(e);
                }
            };
            if let Err(e) = self.interrupted("room to post") {
                self.settle(conn, first, u64::from(posted), base_refused);
                return Err(e);
            }
            if u64::from(posted) - done >= WINDOW as u64 {
                if stalled.elapsed() > WAIT {
                    return Err(format!(
                        "timed out: {done} of {posted} posted work requests completed"
                    ));
                }
                std::thread::sleep(Duration::from_micros(50));
                continue;
            }
            stalled = Wall::now();
            self.sent += 1;
            let at = u64::from(posted) * u64::from(size);
            let data = match (source, &verb) {
                (_, Verb::Read { .. } | Verb::FetchAdd { .. } | Verb::CmpSwap { .. }) => {
                    Payload::Bytes(Vec::new())
                }
                (_, Verb::Immediate { value, .. }) => {
                    image_crc.extend_from_slice(&value.to_be_bytes());
                    Payload::Bytes(Vec::new())
                }
                (Some((region, reg, slots)), _) => {
                    let offset = (u64::from(posted) % slots) * u64::from(size);
                    // What the message carries, for the command's CRC32c; the message itself
                    // leaves from the region.
                    let mut bytes = vec![0; size as usize];
                    lock(&self.shared)
                        .control
                        .memory()
                        .region(region)
                        .ok_or("source region gone")?
                        .read(offset, &mut bytes)
                        .map_err(|e| e.to_string())?;
                    image_crc.extend_from_slice(&bytes);
                    // Named by its STag, as verbs name a local buffer: the core checks it
                    // (protection domain, bounds) before anything is sent.
                    Payload::Local {
                        stag: reg.stag,
                        to: reg.to_base + offset,
                        len: size,
                    }
                }
                (None, _) => {
                    let data = pattern(self.sent, size as usize);
                    image_crc.extend_from_slice(&data);
                    data.into()
                }
            };
            let (stag, to) = target.unwrap_or((Stag(0), 0));
            // Atomic k of the command names the word; its original value goes to sink slot k.
            let atomic = |op, sink: Option<(Mr, u64)>, k: u32| -> Result<RdmaOp, String> {
                let (mr, slots) = sink.ok_or("no sink")?;
                Ok(RdmaOp::Atomic {
                    op,
                    stag,
                    to,
                    sink: mr.reg.stag,
                    sink_to: mr.reg.to_base + (u64::from(k) % slots) * u64::from(size),
                })
            };
            // Each message's bytes move into its request: no copy here.
            let rdma = |op, data| {
                Op::PostRdma(RdmaRequest {
                    wr_id: self.sent,
                    stream,
                    op,
                    data,
                    signaled: true,
                })
            };
            let op = match verb {
                Verb::Tagged { .. } => Op::PostSend(SendRequest {
                    wr_id: self.sent,
                    stream,
                    kind: SendKind::Tagged {
                        stag,
                        to: to + at,
                        rsvd_ulp: 0,
                    },
                    data,
                    signaled: true,
                }),
                Verb::Untagged { qn } => Op::PostSend(SendRequest {
                    wr_id: self.sent,
                    stream,
                    kind: SendKind::Untagged {
                        qn,
                        rsvd_ulp: [0; 5],
                    },
                    data,
                    signaled: true,
                }),
                Verb::Write { .. } => rdma(RdmaOp::Write { stag, to: to + at }, data),
                Verb::Send { solicited, .. } => rdma(
                    RdmaOp::Send {
                        solicited,
                        invalidate,
                    },
                    data,
                ),
                Verb::FetchAdd { add, .. } => {
                    let op = AtomicOperation::FetchAdd { add, mask: 0 };
                    rdma(atomic(op, sink, posted)?, data)
                }
                Verb::CmpSwap { compare, swap, .. } => {
                    let op = AtomicOperation::CmpSwap {
                        compare,
                        compare_mask: u64::MAX,
                        swap,
                        swap_mask: u64::MAX,
                    };
                    rdma(atomic(op, sink, posted)?, data)
                }
                Verb::Immediate { value, solicited } => rdma(
                    RdmaOp::ImmediateData {
                        data: value.to_be_bytes(),
                        solicited,
                    },
                    data,
                ),
                Verb::Read { .. } => {
                    let (mr, slots) = sink.ok_or("no sink")?;
                    rdma(
                        RdmaOp::Read {
                            source: stag,
                            source_to: to + at,
                            sink: mr.reg.stag,
                            sink_to: mr.reg.to_base + (u64::from(posted) % slots) * u64::from(size),
                            len: size,
                        },
                        data,
                    )
                }
            };
            self.submit(conn, op)?;
            posted += 1;
        }
        let failed = self
            .wait("every completion", |s| match progress(s) {
                Err(e) => Some(Err(e)),
                Ok((done, failed)) => (done >= u64::from(count)).then_some(Ok(failed)),
            })
            .inspect_err(|_| self.settle(conn, first, u64::from(posted), base_refused))?;
        if let Some(v) = lock(&self.shared).conns.get_mut(&conn) {
            v.done.retain(|wr, _| *wr < first);
        }
        // No rate and no CRC32c for a command whose work did not all happen.
        if failed > 0 {
            // The cause, where the peer gave one (an outside-in review: a script's error, and
            // JSON's command_error, said only "flushed", the cause in an earlier event).
            let cause = lock(&self.shared)
                .conns
                .get(&conn)
                .and_then(|v| v.sessions.get(&stream)?.peer_terminate.clone())
                .map(|e| format!(": the peer's RDMAP Terminate: {e}"))
                .unwrap_or_default();
            return Err(format!(
                "{failed} of {count} work request(s) flushed{cause}"
            ));
        }
        let secs = t0.elapsed().as_secs_f64();
        // A DDP send completes when SCTP has delivered it, not when the peer placed it: a peer
        // that refused a segment (an unknown STag, a queue with no buffer: RFC 5041 §7.1) ends
        // the session, and its Terminate comes after the SACK that completed the send (it goes
        // through the peer's control thread). So the command gives it SETTLE to come: a session
        // ended while the command ran is the command's failure, not "Sent" with a checksum.
        // (A Terminate slower than that is reported by the next command on the session.)
        const SETTLE: Duration = Duration::from_millis(20);
        let settle_until = Wall::now() + SETTLE;
        loop {
            let ended = lock(&self.shared)
                .conns
                .get(&conn)
                .and_then(|v| v.sessions.get(&stream))
                .map(|s| s.state.clone())
                .filter(|st| st.starts_with("terminate"));
            if let Some(state) = ended {
                return Err(format!(
                    "the session ended while the command ran ({state}): what it sent may not \
                     have been placed"
                ));
            }
            if Wall::now() > settle_until {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        // An atomic's result: the original value of the last one, in the sink's last slot.
        let mut original = None;
        if let (Some((mr, slots)), Verb::FetchAdd { .. } | Verb::CmpSwap { .. }) = (sink, verb) {
            let slot = (u64::from(count.saturating_sub(1)) % slots) * u64::from(size);
            let mut b = [0u8; ATOMIC_WORD];
            lock(&self.shared)
                .control
                .memory()
                .region(mr.region)
                .ok_or("sink region gone")?
                .read(slot, &mut b)
                .map_err(|e| e.to_string())?;
            original = Some(u64::from_ne_bytes(b));
        }
        // A Read's bytes are those its sink now holds: all of them when the sink held every
        // read, else (reads wrapped over its slots) only the last pass's, which is said.
        let mut sink_wrapped = None;
        if let (Some((mr, slots)), Verb::Read { .. }) = (sink, verb) {
            if u64::from(count) > slots {
                sink_wrapped = Some(slots);
            }
            let n = (u64::from(count).min(slots) * u64::from(size)) as usize;
            let mut bytes = vec![0u8; n];
            lock(&self.shared)
                .control
                .memory()
                .region(mr.region)
                .ok_or("sink region gone")?
                .read(0, &mut bytes)
                .map_err(|e| e.to_string())?;
            image_crc = bytes;
        }
        let crc = (!image_crc.is_empty()).then(|| crc32c(&image_crc));
        let (what, verb_text) = match verb {
            Verb::Tagged { .. } => ("written", "Sent"),
            Verb::Write { .. } => ("written", "Wrote"),
            Verb::Untagged { .. } | Verb::Send { .. } => ("sent", "Sent"),
            Verb::Read { .. } => ("read", "Read"),
            Verb::FetchAdd { .. } => ("fetched", "FetchAdd"),
            Verb::CmpSwap { .. } => ("fetched", "CmpSwap"),
            Verb::Immediate { .. } => ("sent", "Sent Immediate Data"),
        };
        let result = match (verb, original) {
            (Verb::CmpSwap { compare, .. }, Some(v)) => format!(
                "; original value {v:#018x}, {}",
                if v == compare {
                    "swapped"
                } else {
                    "not swapped"
                }
            ),
            (_, Some(v)) => format!("; last original value {v:#018x}"),
            _ => String::new(),
        };
        if self.json {
            outln!(
                "{}",
                json!({"send": {"assoc": id, "stream": stream, "messages": count,
                    "size": size, "seconds": secs, "mb_per_s": total as f64 / secs / 1e6,
                    "crc32c": crc.map(|c| format!("{c:#010x}")), "failed": failed,
                    "crc32c_of_last_reads": sink_wrapped,
                    "op": verb.name(),
                    // As the text says it (found by an outside-in test: the JSON lacked it).
                    "swapped": match (verb, original) {
                        (Verb::CmpSwap { compare, .. }, Some(v)) => Some(v == compare),
                        _ => None,
                    },
                    // A string, as in the text: a 64-bit word loses its low bits as a JSON
                    // number in a reader that holds numbers as doubles (jq, JavaScript).
                    "original": original.map(|v| format!("{v:#018x}"))}})
            );
        } else {
            note(
                false,
                format_args!(
                    "{verb_text} {count} x {size} bytes on association {id} stream {stream} in \
                     {:.3} s ({:.1} MB/s, {:.1} µs each){}",
                    secs,
                    total as f64 / secs / 1e6,
                    secs * 1e6 / f64::from(count.max(1)),
                    if original.is_some() {
                        result
                    } else if let (Some(c), Some(slots)) = (crc, sink_wrapped) {
                        format!(
                            "; the sink holds only the last {slots} reads (each overwrote the \
                             one {slots} before it): crc32c of the sink {c:#010x}"
                        )
                    } else {
                        crc.map(|c| format!("; crc32c of the bytes {what} {c:#010x}"))
                            .unwrap_or_default()
                    }
                ),
            );
        }
        Ok(())
    }

    /// `count` buffers on queue `qn` is something a stream of ours could hold: refused here
    /// with one line, not by the core once per buffer over the queue's depth.
    fn fits_a_queue(&self, qn: u32, count: u32) -> Result<(), String> {
        self.has_queue(qn)?;
        let cfg = lock(&self.shared).control.conn_config();
        if count as usize > cfg.recv_depth {
            return Err(format!(
                "{count} buffer(s) do not fit queue {qn}: it holds at most {} posted",
                cfg.recv_depth
            ));
        }
        Ok(())
    }

    /// A stream has untagged queue `qn` (RFC 5041 §5.1.2): a segment for another ends the
    /// stream at the peer (invalid QN, 0x2/0x01).
    fn has_queue(&self, qn: u32) -> Result<(), String> {
        let queues = lock(&self.shared).control.conn_config().queues;
        if qn >= queues {
            return Err(format!(
                "no queue {qn}: a stream has untagged queues 0 to {} (RFC 5041 §5.1.2)",
                queues.saturating_sub(1)
            ));
        }
        Ok(())
    }

    fn recv_post(
        &mut self,
        id: AssocId,
        stream: u16,
        qn: u32,
        stag: StagArg,
        len: u32,
        count: u32,
    ) -> Result<(), String> {
        let conn = self.conn(id)?;
        self.fits_a_queue(qn, count)?;
        self.has_stream(conn, stream)?;
        {
            let s = lock(&self.shared);
            let session = s.conns.get(&conn).and_then(|v| v.sessions.get(&stream));
            match session {
                // The core's refusal said "the session is not accepted yet".
                None => {
                    return Err(format!(
                        "no session on stream {stream} of association {conn}: receives are \
                         posted to a session ('session open', or one the peer opens)"
                    ))
                }
                // RFC 5040 §4.2: on an RDMAP stream queue 1 holds the peer's Read Requests
                // and queue 2 its Terminates, RDMAP's own; the core refused them as past a
                // full queue.
                Some(v) if v.rdmap && v.state == "established" && qn != 0 => {
                    return Err(format!(
                        "queue {qn} of RDMAP stream {stream} is RDMAP's own (RFC 5040 §4.2: 1 \
                         Read Requests, 2 Terminates): the peer's Sends land on queue 0"
                    ))
                }
                Some(_) => {}
            }
        }
        let mr = self.mr(stag)?;
        // The region's room is checked before the first is posted (the memory's answer came
        // after some had been, with no STag and no count). The queue's room is the core's to
        // know (buffers posted earlier may still wait there): a refusal says how many of these
        // went before it.
        receive_buffers_fit(&mr, len, count)?;
        let base = lock(&self.shared).conns.get(&conn).map_or(0, |v| v.posted);
        let depth = lock(&self.shared).control.conn_config().recv_depth;
        let (refused, _awaiting) = self.refusals(conn);
        for k in 0..count {
            let buf = lock(&self.shared)
                .control
                .memory()
                .receive_buffer(self.pd, mr.reg.stag, u64::from(k) * u64::from(len), len)
                .map_err(|e| e.to_string())?;
            self.submit(
                conn,
                Op::PostRecv {
                    stream,
                    qn,
                    wr_id: u64::from(k),
                    buffer: buf,
                },
            )?;
        }
        self.wait("the receive buffers", |s| {
            let v = s.conns.get(&conn)?;
            if v.refused > refused {
                let why = v.last_refusal.clone().unwrap_or_default();
                return Some(Err(format!(
                    "{why}: {} of the {count} buffer(s) were posted before it (a queue holds {} \
                     at a time, those posted earlier and not yet used among them)",
                    v.posted - base,
                    depth
                )));
            }
            (v.posted - base >= u64::from(count)).then_some(Ok(()))
        })?;
        note(
            self.json,
            format_args!(
                "Posted {count} receive buffer(s) of {len} bytes on association {id} stream \
                 {stream} queue {qn}"
            ),
        );
        Ok(())
    }

    /// Asks every core for its report and waits for them.
    fn reports(&self) -> Result<Vec<CoreReport>, String> {
        let _one_at_a_time = self.reports_gate.lock().unwrap_or_else(|e| e.into_inner());
        let cores = request_reports(&self.shared);
        self.wait("the data cores' reports", |s| {
            one_report_a_core(&mut s.reports, cores).map(Ok)
        })
    }

    /// The cores' reports for the diagnosis of a command that failed: within a second, even
    /// once a signal came or `--run-for` ran out (which end [`DdpApp::reports`]' wait).
    fn reports_for_diagnosis(&self) -> Option<Vec<CoreReport>> {
        await_reports(
            &self.shared,
            &self.reports_gate,
            Duration::from_secs(1),
            |r, _| r,
        )
    }

    fn show_assoc(&self) -> Result<(), String> {
        let reports = self.reports()?;
        if !self.json {
            outln!(
                "  {:>4} {:<28} {:>5} {:>4} {:<16} {:>7} {:>10} {:>10} {:>8} {:>8} {:>8} {:>6}",
                "id",
                "peer",
                "port",
                "core",
                "state",
                "streams",
                "seg in",
                "seg out",
                "errors",
                "oversize",
                "faulted",
                "drops"
            );
        }
        // By association id: a forgotten association's successor reuses its slot.
        let mut rows: Vec<_> = reports
            .iter()
            .flat_map(|r| r.assocs.iter().map(move |a| (r, a)))
            .collect();
        rows.sort_by_key(|(_, a)| a.conn.0);
        for (r, a) in rows {
            let st = &a.stats;
            let drops =
                st.refused_by_session + st.after_session_end + st.unknown_ppid + st.unknown_stream;
            if self.json {
                outln!(
                    "{}",
                    json!({"assoc": a.conn.0, "peer": a.peer.to_string(),
                            "port": a.peer_port, "core": r.core, "state": a.state,
                            "streams": a.streams, "segments_in": st.segments_received,
                            "segments_out": st.segments_sent, "errors": st.receive_errors,
                            "oversize": st.oversize_segments,
                            "sessions_faulted": st.sessions_faulted, "drops": drops})
                );
            } else {
                outln!(
                    "  {:>4} {:<28} {:>5} {:>4} {:<16} {:>7} {:>10} {:>10} {:>8} {:>8} {:>8} {:>6}",
                    a.conn.0,
                    a.peer.to_string(),
                    a.peer_port,
                    r.core,
                    a.state,
                    a.streams,
                    st.segments_received,
                    st.segments_sent,
                    st.receive_errors,
                    st.oversize_segments,
                    st.sessions_faulted,
                    drops
                );
            }
        }
        let forgotten = lock(&self.shared).forgotten;
        if forgotten > 0 {
            note(
                self.json,
                format_args!(
                    "({forgotten} older closed association(s) not shown: the last \
                     {CLOSED_KEPT} closed are kept)"
                ),
            );
        }
        Ok(())
    }

    fn show_session(&self) -> Result<(), String> {
        let reports = self.reports()?;
        let s = lock(&self.shared);
        let mut assocs: Vec<_> = reports.iter().flat_map(|r| &r.assocs).collect();
        assocs.sort_by_key(|a| a.conn.0);
        let mut shown = 0;
        for a in assocs {
            for (stream, state) in &a.sessions {
                // A session the shell has not heard of yet (its event still on the way).
                let Some(view) = s.conns.get(&a.conn).and_then(|v| v.sessions.get(stream)) else {
                    continue;
                };
                shown += 1;
                let (offer, rdmap) = (view.offer, view.rdmap);
                if self.json {
                    outln!(
                        "{}",
                        json!({"assoc": a.conn.0, "stream": stream,
                                "state": state_name(*state), "text": state_text(*state),
                                "reason": match state {
                                    State::Terminated(r) => Some(r.to_string()),
                                    _ => None,
                                },
                                "rdmap": rdmap,
                                "offer": offer.map(|(st, to, len)| json!({"stag": st.to_string(), "to": to, "len": len})),
                                "received": view.received, "received_bytes": view.received_bytes,
                                "immediates": view.immediates, "tagged_delivered": view.tagged,
                                "ird": view.limits.map(|l| l.ird), "ord": view.limits.map(|l| l.ord),
                                "peer_ird": view.peer_limits.map(|l| l.ird),
                                "peer_ord": view.peer_limits.map(|l| l.ord)})
                    );
                } else {
                    outln!(
                        "  association {} stream {stream}: {}{}{}{}{}",
                        a.conn.0,
                        state_text(*state),
                        if rdmap { " (RDMAP)" } else { "" },
                        offer
                            .map(|(st, to, len)| format!(
                                "; peer offers STag {st} TO {to:#x} length {len}"
                            ))
                            .unwrap_or_default(),
                        if matches!(state, State::Terminated(_)) {
                            String::new()
                        } else {
                            limits_text(view)
                        },
                        received_text(view)
                    );
                }
            }
        }
        // Scripts read one object a session (none when none); a person reads a sentence.
        if shown == 0 && !self.json {
            outln!("  no sessions");
        }
        Ok(())
    }

    fn show_mr(&self) {
        let s = lock(&self.shared);
        let offered = s.offer.map(|o| o.stag);
        for mr in self.mrs.values() {
            // The peer may have invalidated it (an RDMAP Send with Invalidate, RFC 5040 §5.3).
            let valid = s.control.memory().stags().lookup(mr.reg.stag).is_some();
            if self.json {
                outln!(
                    "{}",
                    json!({"mr": {"stag": mr.reg.stag.to_string(), "to": mr.reg.to_base,
                        "len": mr.reg.len, "access": access_text(mr.access),
                        "offered": offered == Some(mr.reg.stag), "valid": valid}})
                );
            } else {
                outln!(
                    "  STag {}  TO {:#x}  length {}  {}{}{}",
                    mr.reg.stag,
                    mr.reg.to_base,
                    mr.reg.len,
                    access_text(mr.access),
                    if offered == Some(mr.reg.stag) {
                        "  (offered)"
                    } else {
                        ""
                    },
                    if valid {
                        ""
                    } else {
                        "  (invalidated by the peer)"
                    }
                );
            }
        }
        if self.mrs.is_empty() && !self.json {
            outln!("  no memory regions registered (mr reg LEN)");
        }
    }

    fn show_fwd_stats(&self) -> Result<(), String> {
        let reports = self.reports()?;
        let c = lock(&self.shared).control.stats();
        for r in &reports {
            let st = &r.stats;
            if self.json {
                outln!(
                    "{}",
                    json!({"core": r.core, "frames_in": st.frames_in,
                        "frames_out": st.tx.frames_out, "dispatched_in": st.dispatched_in,
                        "dispatched_out": st.dispatched_out,
                        "dispatch_dropped": st.dispatch_dropped, "to_control": st.to_control,
                        "control_dropped": st.control_dropped, "discarded": st.discarded,
                        "tx_dropped": st.tx.tx_dropped, "tx_ring_full": st.tx.tx_ring_full, "tx_backlog_peak": st.tx.backlog_peak,
                        "no_buffer": st.tx.no_buffer,
                        "unresolved": st.tx.unresolved, "held_sent": st.tx.held_sent,
                        "associations": r.live_associations(),
                        "associations_closed_kept": r.assocs.len() - r.live_associations(),
                        "zero_copy_spans": st.tx.zero_copy_spans,
                        "copied_spans": st.tx.copied_spans,
                        "inlined_spans": st.tx.inlined_spans, "rx_chained": st.rx_chained,
                        "rx_chained_dropped": st.rx_chained_dropped,
                        "rx_too_long": st.rx_too_long,
                        "stags": r.stags, "arp_replies": r.iface.arp_replies,
                        "echo_replies": r.iface.echo_replies,
                        "pmtu_lowered": st.pmtu_lowered,
                        "esp_pmtu_lowered": st.esp_pmtu_lowered,
                        "pmtu_raised": st.pmtu_raised,
                        "plpmtud_black_holes": st.plpmtud_black_holes,
                        "plpmtud_probes": st.plpmtud_probes,
                        "plpmtud_raised": st.plpmtud_raised,
                        "ip_reassembled": r.iface.reassembled,
                        "ip_reassembly_timeouts": r.iface.reassembly_timeouts,
                        "ip_source_fragmented": r.iface.source_fragmented,
                        "neighbours_evicted": r.iface.neighbours_evicted,
                        "path_mtus_evicted": r.iface.path_mtus_evicted,
                        "icmp_ignored": st.icmp_ignored + r.iface.icmp_ignored,
                        "icmp_aborts": st.icmp_aborts,
                        "busy_ns": st.busy_ns, "idle_ns": st.idle_ns,
                        "not_ours": r.iface.not_ours()})
                );
            } else {
                outln!(
                    "  ------- Data core {} (associations {}{}, STags {}) -------\n  \
                     RX-frames: {:<12} TX-frames: {:<12} TX-dropped: {:<8} no-buffer: {:<8} \
                     TX ring full: {} (most waiting {})\n  \
                     dispatched in: {:<8} out: {:<8} dropped: {:<8} to control: {} (dropped {})\n  \
                     discarded: {:<8} unresolved: {:<8} held, then sent: {:<8} \
                     ARP/ND/echo answered: {} not ours: {}\n  \
                     path MTU lowered by ICMP: {} (through an ESP SA: {}) ICMP ignored: {} \
                     ended by ICMP Protocol Unreachable: {} black holes (RFC 8899): {} probes: {} raised by a probe: {}\n  \
                     region spans by reference: {:<8} inlined: {:<8} copied: {:<8} \
                     RX chains gathered: {} \
                     (dropped: no buffer {}, too long {})\n  \
                     busy since start: {}",
                    r.core,
                    r.live_associations(),
                    match r.assocs.len() - r.live_associations() {
                        0 => String::new(),
                        n => format!(", {n} closed kept in view"),
                    },
                    r.stags,
                    st.frames_in,
                    st.tx.frames_out,
                    st.tx.tx_dropped,
                    st.tx.no_buffer,
                    st.tx.tx_ring_full,
                    st.tx.backlog_peak,
                    st.dispatched_in,
                    st.dispatched_out,
                    st.dispatch_dropped,
                    st.to_control,
                    st.control_dropped,
                    st.discarded,
                    st.tx.unresolved,
                    st.tx.held_sent,
                    r.iface.arp_replies + r.iface.nd_adverts + r.iface.echo_replies,
                    r.iface.not_ours(),
                    st.pmtu_lowered,
                    st.esp_pmtu_lowered,
                    st.icmp_ignored + r.iface.icmp_ignored,
                    st.icmp_aborts,
                    st.plpmtud_black_holes,
                    st.plpmtud_probes,
                    st.plpmtud_raised,
                    st.tx.zero_copy_spans,
                    st.tx.inlined_spans,
                    st.tx.copied_spans,
                    st.rx_chained,
                    st.rx_chained_dropped,
                    st.rx_too_long,
                    st.busy_share(&Default::default())
                        .map_or("n/a".into(), |b| format!("{:.1} %", b * 100.0))
                );
            }
        }
        if self.json {
            outln!(
                "{}",
                json!({"control": {"packets": c.packets, "replies": c.replies,
                    "ignored": c.ignored, "accepted": c.accepted, "connected": c.connected,
                    "frames_out": c.tx.frames_out, "flow_rules": c.flow_rules,
                    "flow_rules_refused": c.flow_rules_refused,
                    "flow_rules_removed": c.flow_rules_removed}})
            );
        } else {
            outln!(
                "  ------- Control thread -------\n  packets: {:<8} replies: {:<8} ignored: {:<8} \
                 accepted: {:<6} opened: {:<6} TX-frames: {}\n  \
                 flow rules installed: {:<6} refused: {:<6} removed: {}",
                c.packets,
                c.replies,
                c.ignored,
                c.accepted,
                c.connected,
                c.tx.frames_out,
                c.flow_rules,
                c.flow_rules_refused,
                c.flow_rules_removed
            );
        }
        Ok(())
    }

    /// Stops the data cores and the control thread; returns the mbufs not back in their pool.
    pub fn shutdown(self) -> Result<u32, String> {
        let DdpApp {
            port,
            ipsec,
            _key_socket: key_socket,
            node,
            shared,
            stop,
            control_thread,
            eal,
            _telemetry: telemetry,
            ..
        } = self;
        // No telemetry question reaches the control side from now on, and no key manager
        // changes SAs while the endpoint goes down. A question already being answered holds
        // the control side for at most its wait: it must let go before the EAL does.
        drop(telemetry);
        // Ours and the control thread's are the references that stay; a third is an answer
        // under way. (Counting the control thread's as an answer made every quit wait the
        // whole deadline, 4 s.)
        let resident = 1 + usize::from(control_thread.is_some());
        let deadline = Wall::now() + telemetry::ANSWER_WITHIN * 2;
        while Arc::strong_count(&shared) > resident && Wall::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(key_socket);
        // Associations still up end with an ABORT, so the peer is not left waiting.
        let open: Vec<ConnHandle> = lock(&shared)
            .conns
            .iter()
            .filter(|(_, v)| v.closed.is_none())
            .map(|(c, _)| *c)
            .collect();
        for c in open {
            let _ = lock(&shared).control.submit(c, Op::Abort);
        }
        std::thread::sleep(Duration::from_millis(50));
        stop.store(true, Ordering::Release);
        if let Some(t) = control_thread {
            let _ = t.join();
        }
        let Some(mut node) = node else {
            return Ok(0);
        };
        node.halt(&eal);
        node.close_port();
        // The control side next: buffers still in its rings (handed up after its last poll)
        // go back to the pool with it, and the regions are freed before the EAL.
        drop(shared);
        drop(port);
        drop(ipsec);
        let in_use = node.close();
        drop(eal);
        Ok(in_use)
    }
}

fn control_loop(shared: &Mutex<Shared>, clock: Clock, stop: &AtomicBool) {
    /// Control work is rare, and the cores ring the thread's doorbell when they hand it some:
    /// an idle thread sleeps up to this long (briefly while a command outbox is not empty:
    /// nobody rings for it).
    const MAX_SLEEP: Duration = Duration::from_millis(5);
    let turn = || {
        let mut s = lock(shared);
        let n = s.control.poll(clock.now());
        let mut events = 0;
        while let Some(e) = s.control.poll_event() {
            events += 1;
            s.on_event(e);
        }
        n + events
    };
    let doorbell = lock(shared).control.doorbell();
    doorbell.attach();
    let mut sleep = Duration::from_micros(50);
    while !stop.load(Ordering::Acquire) {
        if turn() > 0 || doorbell.sleep_unless(sleep, turn) > 0 {
            sleep = Duration::from_micros(50);
        } else if lock(shared).control.tx_backlogged() {
            // Frames wait for the ring, or commands for a core's, and neither rings a
            // doorbell when it drains.
            sleep = LIGHT_SLEEP;
        } else {
            sleep = (sleep * 2).min(MAX_SLEEP);
        }
    }
}

/// The reports taken from `reports`, in core order, once every one of `cores` data cores has
/// sent one; a late report of an earlier request that timed out (a telemetry snapshot's, or a
/// `show`'s) is not a second core's, so a core is never shown or summed twice.
fn one_report_a_core(reports: &mut Vec<CoreReport>, cores: usize) -> Option<Vec<CoreReport>> {
    let mut seen: Vec<usize> = reports.iter().map(|r| r.core).collect();
    seen.sort_unstable();
    seen.dedup();
    if seen.len() < cores {
        return None;
    }
    let mut r = std::mem::take(reports);
    // Latest first within a core (the sort is stable), so the fresh report is the one kept.
    r.reverse();
    r.sort_by_key(|x| x.core);
    r.dedup_by_key(|x| x.core);
    Some(r)
}

/// What the telemetry commands report on, from the control thread's view: the data cores'
/// reports (asked for and waited on, as `show` does), the control counters, the STags.
fn snapshot(
    shared: &Arc<Mutex<Shared>>,
    gate: &Arc<Mutex<()>>,
    clock: Clock,
) -> Result<telemetry::Snapshot, String> {
    await_reports(shared, gate, telemetry::ANSWER_WITHIN, |reports, s| {
        telemetry::Snapshot::of(reports, &s.control, clock)
    })
    .ok_or_else(|| "timed out waiting for the data cores' reports".into())
}

/// Asks every core for its report; returns how many cores answer.
fn request_reports(shared: &Arc<Mutex<Shared>>) -> usize {
    let mut s = lock(shared);
    s.reports.clear();
    s.control.request_reports();
    s.control.cores()
}

/// Every core's report within `within` (one request at a time: `gate`), handed to `then` with
/// the shared state still locked; None if a core did not answer in time. Neither a signal nor
/// `--run-for` ends the wait, which is bounded.
fn await_reports<T>(
    shared: &Arc<Mutex<Shared>>,
    gate: &Arc<Mutex<()>>,
    within: Duration,
    then: impl FnOnce(Vec<CoreReport>, &Shared) -> T,
) -> Option<T> {
    let _one_at_a_time = gate.lock().unwrap_or_else(|e| e.into_inner());
    let cores = request_reports(shared);
    let deadline = Wall::now() + within;
    loop {
        {
            let mut s = lock(shared);
            if let Some(reports) = one_report_a_core(&mut s.reports, cores) {
                return Some(then(reports, &s));
            }
        }
        if Wall::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn access_text(a: AccessArg) -> &'static str {
    match a {
        AccessArg::RemoteWrite => "remote-write",
        AccessArg::RemoteRead => "remote-read",
        AccessArg::Remote => "remote",
        AccessArg::RemoteAtomic => "remote-atomic",
        AccessArg::Local => "local",
        AccessArg::Sink => "sink",
    }
}

impl crate::app::Shell for DdpApp {
    fn execute(&mut self, cmd: &Command) -> Result<Flow, String> {
        DdpApp::execute(self, cmd)
    }
    fn is_running(&self) -> bool {
        true
    }
    fn start(&mut self, _tx_first: bool) -> Result<(), String> {
        Ok(())
    }
    fn periodic_stats(&mut self) {
        if let Err(e) = self.show_fwd_stats() {
            errln!("ddpdk: {e}");
        }
    }
    fn running_note(&self) -> &'static str {
        "DDP endpoint running; press Ctrl-C (SIGINT) or send SIGTERM to stop."
    }
    fn tick(&mut self) {
        self.keep_associated();
    }
    fn set_deadline(&mut self, deadline: Wall, secs: f64) {
        self.deadline = Some((deadline, secs));
    }
}

/// How long `--reconnect` waits after an association ended before it opens the next.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

impl DdpApp {
    /// `--reconnect`: opens an association to the peer when none is open, a second after the
    /// last one ended (ABORT, shutdown, or an attempt that failed).
    fn keep_associated(&mut self) {
        let Some((addr, port)) = self.reconnect else {
            return;
        };
        let mut s = lock(&self.shared);
        if let Some(c) = self.reconnect_conn {
            match s.conns.get(&c) {
                Some(v) if v.closed.is_none() => return,
                _ => {
                    // Over: its view and handle go, so attempts every second for days keep
                    // nothing (the association's end was printed when it came).
                    s.conns.remove(&c);
                    let _ = s.control.forget(c);
                    self.reconnect_conn = None;
                    self.reconnect_at = Wall::now() + RECONNECT_AFTER;
                    return;
                }
            }
        }
        if Wall::now() < self.reconnect_at {
            return;
        }
        let now = self.clock.now();
        match s.control.connect(now, addr, port) {
            Ok(c) => {
                let core = s.control.owner(c).unwrap_or(0);
                s.view(c, addr, port, core);
                self.reconnect_conn = Some(c);
                drop(s);
                note(
                    self.json,
                    format_args!("Association {c}: opening to {addr} port {port} (--reconnect)"),
                );
            }
            // The peer associated first (or an `assoc open` did): that one is kept.
            Err(RuntimeError::Exists(c)) => self.reconnect_conn = Some(c),
            // Never to succeed: said once, and no more attempts.
            Err(e @ (RuntimeError::NotAPeer(..) | RuntimeError::NoAddress)) => {
                drop(s);
                self.reconnect = None;
                errln!("ddpdk: --reconnect to {addr}: {e}; not retried");
            }
            Err(e) => {
                drop(s);
                self.reconnect_at = Wall::now() + RECONNECT_AFTER;
                note(self.json, format_args!("--reconnect to {addr}: {e}"));
            }
        }
    }
}

/// What to do about a region the EAL's heap could not supply: more EAL memory helps only
/// where the machine has it (a `mr reg` of 2^64-1 bytes was told to give the EAL more).
fn region_memory_hint(len: u64) -> String {
    let machine = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let kib = m.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
            kib.trim().trim_end_matches("kB").trim().parse::<u64>().ok()
        })
        .map(|kib| kib.saturating_mul(1024));
    match machine {
        Some(total) if len > total => {
            format!("larger than this machine's memory, {} MiB", total >> 20)
        }
        _ => "give the EAL more memory: -m MB with --no-huge, or more hugepages".into(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

    use super::*;

    fn report(core: usize, frames_in: u64) -> CoreReport {
        let mut r = CoreReport {
            core,
            ..Default::default()
        };
        r.stats.frames_in = frames_in;
        r
    }

    fn auto(room: usize) -> AutoRecv {
        AutoRecv {
            qn: 0,
            stag: Stag::new(1, 0),
            len: 1000,
            count: 2,
            sets: Vec::new(),
            room,
        }
    }

    /// RFC 5043 §6.1 (order is by DDP-SSN) with `recv auto`: a session the peer's Terminate
    /// ended while DDP-SSNs before it were missing keeps its posted receives until those
    /// arrive; its set was free at its SessionTerminated, so a session accepted meanwhile was
    /// given the bytes the old one's late segments then landed in. The set is free only once
    /// every receive of it was filled or flushed.
    #[test]
    fn recv_auto_holds_a_set_until_its_ended_sessions_receives_are_done_6_1() {
        let (a, b) = (ConnHandle(1), ConnHandle(2));
        let mut auto = auto(1);
        assert_eq!(auto.take(a, 3), Some(0));
        auto.posted(a, 3);
        auto.posted(a, 3);
        auto.receive_ended(a, 3); // the first message filled its buffer
        auto.session_ended(a, 3);
        assert_eq!(auto.held(), 1, "one receive is still posted");
        assert_eq!(
            auto.take(b, 3),
            None,
            "the one set is still the ended session's"
        );
        auto.receive_ended(b, 3); // another association's: not this set's
        auto.receive_ended(a, 4); // another stream's
        assert_eq!(auto.held(), 1);
        auto.receive_ended(a, 3); // the late segment's message, or the flush
        assert_eq!(auto.held(), 0, "free once none of its receives is left");
        assert_eq!(auto.take(b, 3), Some(0));
    }

    /// A session that ended with nothing posted, or with everything done, gives its set back
    /// at once; a stream's next session counts its own receives apart from the ended one's;
    /// the association's end and a peer's restart give every set back.
    #[test]
    fn recv_auto_gives_sets_back_at_session_and_association_end() {
        let a = ConnHandle(1);
        let mut auto = auto(2);
        assert_eq!(auto.take(a, 3), Some(0));
        auto.session_ended(a, 3);
        assert_eq!(auto.held(), 0, "nothing posted: free at its end");
        assert_eq!(auto.take(a, 3), Some(0));
        auto.posted(a, 3);
        auto.session_ended(a, 3);
        // The stream's next session, on the other set.
        assert_eq!(auto.take(a, 3), Some(2000));
        auto.posted(a, 3);
        auto.posted(a, 3);
        // The ended session's flush counts against it, not the live one.
        auto.receive_ended(a, 3);
        assert_eq!(auto.held(), 1);
        assert_eq!(auto.take(a, 5), Some(0), "the ended session's set is free");
        auto.give_back(a);
        assert_eq!(auto.held(), 0);
    }

    /// `show`'s reports are one a core: a late report of a request that timed out, with a
    /// fresh one of the same core, counted as two cores, so `show` listed that core twice
    /// (and summed it twice) and another core not at all.
    #[test]
    fn reports_are_one_a_core_whatever_came_late() {
        let mut got = vec![report(0, 1), report(0, 2)];
        assert!(
            one_report_a_core(&mut got, 2).is_none(),
            "core 1 has not answered"
        );
        assert_eq!(got.len(), 2, "nothing taken yet");
        got.push(report(1, 3));
        let r = one_report_a_core(&mut got, 2).unwrap();
        assert_eq!(r.iter().map(|r| r.core).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(
            r[0].stats.frames_in, 2,
            "core 0's fresh report, not the late one"
        );
        assert!(got.is_empty());
    }
}
