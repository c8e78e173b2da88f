//! One DDP stream of a connection (RFC 5043 §6: a like-numbered SCTP stream pair): its
//! session, receive path, posted receives and queued sends, and what a session's end flushes;
//! and the [`Sink`] that holds what the ULP is owed.

use std::collections::VecDeque;

use super::fifo::Fifo;
use std::sync::atomic::{AtomicU64, Ordering};

use ddpdk_dataplane::ddp::{RxError, StreamRx};
use ddpdk_dataplane::mem::{Pd, Stag, StreamId};
use ddpdk_dataplane::sctp::Instant;

use crate::rdmap::{decode_private_data, RdmaLimits, RdmapStream};
use crate::session::{Event as SessionEvent, PendingLimit, Session, State, TerminationReason};

use super::api::*;
use super::lend::*;
use super::send::*;

/// Stream identities (RFC 5041 §8.2 "DDP Stream ID", local only) are unique for the life of the
/// process: one per session, whatever the connection, so memory bound to one session is never
/// usable from another, here or on another connection.
pub(super) static NEXT_STREAM_ID: AtomicU64 = AtomicU64::new(1);

#[derive(Debug)]
pub(super) struct DdpStream {
    pub(super) session: Session,
    pub(super) sid: StreamId,
    /// Counts sessions on this stream id, so that late acknowledgements and stream-bound
    /// STags of an earlier session never apply to a later one.
    pub(super) generation: u32,
    pub(super) rx: Option<StreamRx>,
    /// Posted receive `wr_id`s per QN, in posting (= MSN) order.
    pub(super) posted: Vec<VecDeque<u64>>,
    /// Next MSN per QN we send to, from 1 (RFC 5041 §5.1.2); (QN, MSN) pairs.
    pub(super) next_msn: Vec<(u32, u32)>,
    pub(super) sends: VecDeque<PendingSend>,
    /// A control message SCTP had no room for.
    pub(super) control: Option<crate::session::Transmit>,
    /// After a receive error: how many more messages the ULP may post (RFC 5041 §7.1).
    pub(super) grace: Option<u8>,
    /// On the ready list.
    pub(super) ready: bool,
    /// The session is away at the control thread ([`SessionCall`]); `session` holds a
    /// placeholder meanwhile.
    pub(super) lent: Option<Box<Lent>>,
    /// RDMAP's state, if the session is an RDMAP stream ([`super::Connection::initiate_rdmap`]).
    pub(super) rdmap: Option<Box<RdmapStream>>,
    /// The RDMA Read limits the peer's Initiate announced, if it carried RDMAP's parameters.
    pub(super) peer_limits: Option<RdmaLimits>,
    /// On the active side, the peer's segments that came before its answer at DDP-SSN 0
    /// ([`super::route::release_before_answer`]); their bytes count in `Sink::held_bytes`.
    pub(super) before_answer: Vec<Vec<u8>>,
    /// The SCTP TSN of the peer's Terminate in this session, once it came: DDP-SSNs missing
    /// before it are waited for until every TSN up to it has arrived
    /// ([`super::Connection::check_gaps`]).
    pub(super) final_tsn: Option<u32>,
    /// The Terminates of attempts we rejected on this stream id that may still come, oldest
    /// first, at most [`CROSSING_WATCHES`]. Empty but for rejections: no allocation otherwise.
    pub(super) crossings: Vec<Crossing>,
}

/// How many rejected attempts' crossing Terminates a stream watches for at once. A watch
/// ends once SCTP's cumulative TSN passes its bound, so several stay only while SCTP misses a
/// chunk; one per stream was too few (two attempts rejected in a row, each with its Terminate
/// in flight, left the earlier unwatched, and it ended the stream's next session). When full,
/// the oldest is dropped (`ConnStats::crossed_rejects_unwatched`).
pub(super) const CROSSING_WATCHES: usize = 4;

/// After our Reject (RFC 5043 §6.3) the active side's Terminate may cross it
/// (`Session::peer_terminate_may_cross`), and the stream id may start a new session before it
/// arrives. It was sent before the peer received our Reject, so before anything the peer sends
/// in the new session, which begins only after that Reject is acknowledged: its TSN is below
/// that of the peer's first chunk of the new session (RFC 5043 §6: "Each Data Chunk
/// unambiguously belongs to exactly one session"). Left to the new session, it would end it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Crossing {
    /// The TSN of the peer's first chunk of the new session (its answer to our Initiate, or its
    /// own Initiate), once it came. Before it, a Terminate at DDP-SSN 1 cannot be the new
    /// session's: §6.6 forbids sending it where it may arrive before the DDP-SSN 0 message.
    pub(super) below: Option<u32>,
}

impl DdpStream {
    /// Where RDMAP's Terminate waits among the stream's queued sends, if it does.
    pub(super) fn queued_terminate(&self) -> Option<usize> {
        self.sends
            .iter()
            .position(|p| matches!(p.origin, Origin::Terminate))
    }

    pub(super) fn new(limit: &PendingLimit, generation: u32) -> DdpStream {
        DdpStream {
            session: Session::new(limit.clone()),
            sid: StreamId(NEXT_STREAM_ID.fetch_add(1, Ordering::Relaxed)),
            generation,
            rx: None,
            posted: Vec::new(),
            next_msn: Vec::new(),
            sends: VecDeque::new(),
            control: None,
            grace: None,
            ready: false,
            lent: None,
            rdmap: None,
            peer_limits: None,
            before_answer: Vec::new(),
            final_tsn: None,
            crossings: Vec::new(),
        }
    }

    /// The MSN of the next message this side sends to queue `qn`, counted from 1 (RFC 5041
    /// §5.1.2).
    pub(super) fn take_msn(&mut self, qn: u32) -> u32 {
        match self.next_msn.iter_mut().find(|(q, _)| *q == qn) {
            Some((_, next)) => {
                let m = *next;
                *next = next.wrapping_add(1);
                m
            }
            None => {
                self.next_msn.push((qn, 2));
                1
            }
        }
    }
}

/// The streams whose sessions may have events to move to the ULP
/// ([`super::Connection::session_events`]): a few by number, or all of them.
#[derive(Debug, Default)]
pub(super) struct Touched {
    all: bool,
    streams: Vec<u16>,
}

impl Touched {
    /// Beyond this many, the streams are all visited rather than listed.
    const LISTED: usize = 16;

    pub(super) fn stream(&mut self, stream: u16) {
        if self.all || self.streams.last() == Some(&stream) {
            return;
        }
        if self.streams.len() == Self::LISTED {
            self.all();
        } else {
            self.streams.push(stream);
        }
    }

    pub(super) fn all(&mut self) {
        self.all = true;
        self.streams.clear();
    }

    pub(super) fn is_empty(&self) -> bool {
        !self.all && self.streams.is_empty()
    }

    /// The `k`th stream to visit of an association's `streams`: the `k`th listed, or stream
    /// `k` when all are touched.
    pub(super) fn nth(&self, k: usize, streams: usize) -> Option<u16> {
        if self.all {
            (k < streams).then_some(k as u16)
        } else {
            self.streams.get(k).copied()
        }
    }

    pub(super) fn clear(&mut self) {
        self.all = false;
        self.streams.clear();
    }
}

/// What the ULP is owed, kept apart from the streams so both can be borrowed at once.
#[derive(Debug, Default)]
pub(super) struct Sink {
    pub(super) indications: Fifo<Indication>,
    pub(super) completions: Fifo<Completion>,
    pub(super) stats: ConnStats,
    /// Send work requests not yet wholly handed to SCTP.
    pub(super) queued_sends: usize,
    /// Sessions that may have events: noted wherever a session is called for anything but an
    /// in-order segment, so neither the per-packet path nor a posted work request visits
    /// every stream for nothing.
    pub(super) touched: Touched,
    /// Flushed region sends (stream, generation, work request) whose Flushed completion waits
    /// for their segments already in SCTP's queue ([`super::Connection::defer_flushed`]).
    pub(super) deferred: Vec<(u16, u32, Done)>,
    /// The completion order of RDMAP streams renewed while some of their work still waited
    /// for its segments to settle ([`renew`], [`report_settled`]).
    pub(super) retired: Vec<Retired>,
    /// Sessions lent out with a control message, not yet polled.
    pub(super) calls: VecDeque<SessionCall>,
    /// Streams whose session is away.
    pub(super) lent: usize,
    /// Streams whose session events were drained where they arose (a control message's, in
    /// the middle of a packet): they may have a control message to send.
    pub(super) wake: Vec<u16>,
    /// Streams (and their generation) whose session ended in the middle of a packet: what the
    /// end flushes waits for the packet's acknowledgements, so completions keep their order.
    pub(super) end_flush: Vec<(u16, u32)>,
    /// Streams whose receive path failed in the middle of a packet (or, on an RDMAP stream,
    /// whose session the machine ended for a refused chunk: `rdmap_terminate_first`), and
    /// why: with
    /// [`OnReceiveError::Terminate`] their sessions end once the packet is through.
    pub(super) faulted: Vec<(u16, RxError)>,
    /// The association has closed under what is being routed (a returning session's held
    /// chunks, `replay_after_close`): requests are delivered, keeping the stream's order,
    /// but not answered (a Read served or an Atomic performed could never say so).
    pub(super) answers_closed: bool,
    /// Bytes of chunks held for sessions that are away ([`Lent::held`]): they count against
    /// the receive buffer.
    pub(super) held_bytes: usize,
    /// Messages every stream's receive path holds for Delivery behind a missing DDP-SSN
    /// (`StreamDelivery::set_charge`): each takes `PENDING_ENTRY_BYTES` of the receive buffer.
    pub(super) pending_entries: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Their bytes when last looked at ([`Sink::sync_pending`]: after each packet the general
    /// receive path took, a session's return, and before each a_rwnd is told): only the
    /// general path adds to them (the fused path delivers in order, adding none).
    pub(super) pending_bytes: usize,
    /// Operations held for sessions that are away.
    pub(super) held_ops: usize,
    /// RDMAP streams whose peer accepted without RDMAP's parameters: their sessions end.
    pub(super) not_rdmap: Vec<u16>,
    /// Results of held operations, once applied.
    pub(super) op_results: VecDeque<OpResult>,
    /// STags the peer invalidated (Send with Invalidate, RFC 5040 §5.3) and the owner of the
    /// STag tables has not taken yet: RDMAP's checks treat them as invalid meanwhile.
    pub(super) peer_invalidated: Vec<Stag>,
    /// Messages the echo service sends back (stream, PPID, bytes), in order; their bytes count
    /// in `held_bytes` until SCTP takes them, so a fast peer is slowed by its window.
    pub(super) echo: VecDeque<(u16, u32, Vec<u8>)>,
    /// Streams (and their generation) whose [`DdpStream::crossings`] wait for SCTP's cumulative
    /// TSN to pass their bound ([`super::Connection::check_crossings`]).
    pub(super) crossings: Vec<(u16, u32)>,
    /// Streams whose session is over with DDP-SSNs missing before the peer's final message
    /// (`Session::awaits_inbound_gap`), waited for a bounded time
    /// ([`super::Connection::check_gaps`]).
    pub(super) gaps: Vec<GapWait>,
    /// By stream, the work request of its latest success if that was unsignaled, so reported
    /// to nobody ([`push_completion`]): told at the stream's end
    /// ([`Indication::SilentSuccesses`]). Indexed, so a completion costs one store.
    pub(super) silent: Vec<Option<u64>>,
}

/// An earlier session's RDMAP completion order, kept past its stream's renewal: the peer may
/// start a new session while chunks of ours are unacknowledged
/// (`Session::accepts_new_session`), and a zero-copy send among them completes only once they
/// settle ([`RdmapStream::flush_order`]), with what was posted after it.
#[derive(Debug)]
pub(super) struct Retired {
    pub(super) stream: u16,
    pub(super) generation: u32,
    pub(super) rdmap: Box<RdmapStream>,
}

/// A stream waiting for the peer's chunks missing before its final message, or (`answer`)
/// for the peer's answer to our Initiate while segments it sent after it are held.
#[derive(Debug, Clone, Copy)]
pub(super) struct GapWait {
    pub(super) stream: u16,
    pub(super) generation: u32,
    /// The wait is for the answer at DDP-SSN 0 ([`note_answer_wait`]).
    pub(super) answer: bool,
    /// For the answer: the TSN of the first segment held for it. The answer was submitted
    /// before it on the same SCTP stream, so while SCTP's cumulative TSN of what we received
    /// is below this, the answer may be a chunk still missing (lost, being retransmitted).
    pub(super) held_tsn: u32,
    /// When the wait is given up; set once our own side of the session is acknowledged.
    pub(super) deadline: Option<Instant>,
    /// SCTP misses chunks (one the peer sent before its Terminate, or any): the wait goes on
    /// with no timer, its deadline a whole grace from the last look.
    pub(super) expired: bool,
}

/// A stream that starts holding the peer's segments for its answer to our Initiate
/// (`DdpStream::before_answer`, empty until now) is noted in [`Sink::gaps`]: the segments'
/// copies take receive buffer, and a peer that never answers would keep it until the stream
/// is flushed (RFC 5043 §10: "SHOULD NOT allocate resources on the assumption that DDP-SSNs
/// are valid"). The wait is bounded in [`super::Connection::check_gaps`].
pub(super) fn note_answer_wait(stream: u16, s: &DdpStream, tsn: u32, out: &mut Sink) {
    if !out
        .gaps
        .iter()
        .any(|g| g.answer && g.stream == stream && g.generation == s.generation)
    {
        out.gaps.push(GapWait {
            stream,
            generation: s.generation,
            answer: true,
            held_tsn: tsn,
            deadline: None,
            expired: false,
        });
    }
}

/// Streams whose session awaits the peer's missing chunks are noted in [`Sink::gaps`], once.
pub(super) fn note_gap(stream: u16, s: &DdpStream, out: &mut Sink) {
    if s.lent.is_none()
        && s.session.awaits_inbound_gap()
        && !out
            .gaps
            .iter()
            .any(|g| !g.answer && g.stream == stream && g.generation == s.generation)
    {
        out.gaps.push(GapWait {
            stream,
            generation: s.generation,
            answer: false,
            held_tsn: 0,
            deadline: None,
            expired: false,
        });
    }
}

/// Memory one indication owed to the ULP takes, counted against the receive buffer: a peer
/// whose messages the ULP does not take fast enough is told a smaller a_rwnd.
pub(super) const INDICATION_COST: usize = std::mem::size_of::<Indication>();

/// What holding one of the peer's chunks costs beyond its bytes (behind a session that is
/// away, ahead of an answer, to be echoed): its queue entry and its copy's heap block (the
/// allocator's own 16 bytes at least). Counted with the bytes against the receive buffer, so
/// that a peer's one-byte chunks hold about a hundred bytes each within a_rwnd, not one
/// (RFC 9260 §6.2: a_rwnd is the memory the receiver has for the peer's data).
pub const HELD_ITEM_COST: usize = std::mem::size_of::<super::lend::Held>() + 16;

/// What a held chunk of `len` bytes takes of the receive buffer ([`HELD_ITEM_COST`]).
#[inline]
pub(super) fn held_cost(len: usize) -> usize {
    len + HELD_ITEM_COST
}

/// Operations a connection holds for its sessions that are away; more are refused
/// ([`PostError::Full`]).
pub const MAX_HELD_OPS: usize = 4096;

impl Sink {
    /// Bytes of the receive buffer (`budget`) not taken by held chunks and owed indications.
    pub(super) fn room(&self, budget: usize) -> usize {
        budget.saturating_sub(
            self.held_bytes + self.indications.len() * INDICATION_COST + self.pending_bytes,
        )
    }

    /// [`Sink::room`] with the messages waiting for Delivery counted as they are now.
    pub(super) fn room_now(&self, budget: usize) -> usize {
        budget.saturating_sub(
            self.held_bytes + self.indications.len() * INDICATION_COST + self.pending_now(),
        )
    }

    fn pending_now(&self) -> usize {
        self.pending_entries
            .load(std::sync::atomic::Ordering::Relaxed)
            * ddpdk_dataplane::ddp::StreamDelivery::PENDING_ENTRY_BYTES
    }

    /// Looks again at the messages waiting for Delivery ([`Sink::pending_bytes`]).
    pub(super) fn sync_pending(&mut self) {
        self.pending_bytes = self.pending_now();
    }
}

/// Moves one stream's session events to the ULP and, once its session has ended, flushes its
/// queued sends and posted receives. Returns whether there was any event.
pub(super) fn drain_events(stream: u16, s: &mut DdpStream, out: &mut Sink) -> bool {
    let mut any = false;
    while let Some(event) = s.session.poll_event() {
        any = true;
        note_rdmap_parameters(stream, s, &event, out);
        let ended = matches!(event, SessionEvent::SessionTerminated { .. });
        out.indications
            .push_back(Indication::Session { stream, event });
        if ended {
            end_flush(stream, s, out);
        }
    }
    any
}

/// As [`drain_events`] in the middle of a packet: a session's end is indicated now, and what
/// it flushes later ([`Sink::end_flush`]).
pub(super) fn indicate_events(stream: u16, s: &mut DdpStream, out: &mut Sink) -> bool {
    let mut any = false;
    while let Some(event) = s.session.poll_event() {
        any = true;
        note_rdmap_parameters(stream, s, &event, out);
        if matches!(event, SessionEvent::SessionTerminated { .. }) {
            out.end_flush.push((stream, s.generation));
        }
        out.indications
            .push_back(Indication::Session { stream, event });
    }
    any
}

/// RDMAP's parameters in a session event's Private Data: the peer's Read limits. An RDMAP
/// stream whose peer accepted without them is no RDMAP stream; its session is ended
/// ([`Sink::not_rdmap`]).
fn note_rdmap_parameters(stream: u16, s: &mut DdpStream, event: &SessionEvent, out: &mut Sink) {
    match event {
        SessionEvent::InitiateReceived { private_data } => {
            s.peer_limits = decode_private_data(private_data.as_bytes()).map(|(l, _)| l);
        }
        SessionEvent::Accepted { private_data } => {
            if let Some(r) = s.rdmap.as_mut() {
                match decode_private_data(private_data.as_bytes()) {
                    Some((peer, _)) => {
                        s.peer_limits = Some(peer);
                        r.set_peer_limits(peer);
                    }
                    None => out.not_rdmap.push(stream),
                }
            }
        }
        _ => {}
    }
}

/// What a session's end flushes: its queued sends, and its posted receives once nothing more
/// can come for them.
pub(super) fn end_flush(stream: u16, s: &mut DdpStream, out: &mut Sink) {
    flush_sends(stream, s, out);
    // The peer's Terminate may overtake its last segments (RFC 5043 §6.1: order is by
    // DDP-SSN): they are still placed and delivered, until its direction is done.
    let peer_ended = s.session.state() == State::Terminated(TerminationReason::PeerTerminate);
    if !peer_ended || s.session.inbound_complete() {
        flush_receives(stream, s, out);
    }
}

pub(super) fn flush(stream: u16, s: &mut DdpStream, out: &mut Sink) {
    flush_sends(stream, s, out);
    flush_receives(stream, s, out);
}

pub(super) fn flush_sends(stream: u16, s: &mut DdpStream, out: &mut Sink) {
    tell_silent(stream, out);
    // RDMAP's Terminate, once queued, goes whatever ends the session meanwhile (our ULP, the
    // peer's session Terminate): the session's own waits for it (`Session::hold_final`).
    let keep = s.session.final_held();
    let mut kept = None;
    for p in s.sends.drain(..) {
        if keep && kept.is_none() && matches!(p.origin, Origin::Terminate) {
            kept = Some(p);
            continue;
        }
        out.queued_sends -= 1;
        out.stats.flushed_sends += 1;
        let wr_id = match p.origin {
            Origin::Ulp => p.req.wr_id,
            Origin::Read(read) => read.wr_id,
            Origin::Atomic(atomic) => atomic.wr_id,
            // RDMAP's own messages complete no work request of the ULP's.
            Origin::Response(_) => {
                if let Some(r) = s.rdmap.as_mut() {
                    r.response_sent();
                }
                continue;
            }
            Origin::Terminate => continue,
        };
        let done = Done {
            wr_id,
            signaled: p.req.signaled,
            seq: p.seq,
        };
        // Part of a region send is in SCTP's queue, still to be read from the region: the ULP
        // gets its buffer back (the completion) only once that part has settled.
        if p.offset > 0 && matches!(p.req.data, Payload::Region { .. }) {
            out.deferred.push((stream, s.generation, done));
            continue;
        }
        report(out, s.rdmap.as_deref_mut(), stream, done, Status::Flushed);
    }
    if let Some(p) = kept {
        s.sends.push_back(p);
    }
}

/// A work request of the ULP's is over: its completion goes to the ULP at once (if signaled,
/// or failed), or on an RDMAP stream once every work request posted before it is reported
/// (RFC 5040 §5.5, [`RdmapStream::begin`]).
pub(super) fn report(
    out: &mut Sink,
    rdmap: Option<&mut RdmapStream>,
    stream: u16,
    done: Done,
    status: Status,
) {
    match (rdmap, done.seq) {
        (Some(r), Some(seq)) => {
            r.finish(seq, status == Status::Success);
            // The order runs across the stream's sessions: an earlier one's work still to
            // report goes first, and [`report_in_order`] reports this session's once it has.
            if !held_by_retired(out, stream) {
                report_done(out, stream, r);
            }
        }
        _ => push_completion(
            out,
            stream,
            done.wr_id,
            done.signaled,
            (status == Status::Success, status == Status::LocalProtection),
        ),
    }
}

/// [`report`] for work whose chunk settled in SCTP's queue (or was given up with the
/// association): by `stream` and session `generation`, in the completion order of that session,
/// which the stream holds still or [`Sink::retired`] keeps.
pub(super) fn report_settled(
    streams: &mut [DdpStream],
    out: &mut Sink,
    (stream, generation): (u16, u32),
    done: Done,
    status: Status,
) {
    if let Some(s) = streams
        .get_mut(usize::from(stream))
        .filter(|s| s.generation == generation)
    {
        return report(out, s.rdmap.as_deref_mut(), stream, done, status);
    }
    let retired = out
        .retired
        .iter()
        .position(|r| r.stream == stream && r.generation == generation);
    match retired {
        Some(k) => {
            match done.seq {
                Some(seq) => out.retired[k].rdmap.finish(seq, status == Status::Success),
                None => report(out, None, stream, done, status),
            }
            report_in_order(streams, out, stream);
        }
        // An RDMAP stream's work (it has its place in the order, `seq`) whose session was
        // renewed with nothing left to report: its end reported this one already, and a late
        // acknowledgement must not complete it a second time.
        None if done.seq.is_some() => {}
        None => report(out, None, stream, done, status),
    }
}

/// Whether an earlier session of `stream` still has work to report ([`Sink::retired`]): RFC
/// 5040 §5.5's order (and a Mark's, which waits for everything posted before it) holds across
/// a renewal, so the later session's completions wait until the earlier ones are reported.
pub(super) fn held_by_retired(out: &Sink, stream: u16) -> bool {
    out.retired.iter().any(|r| r.stream == stream)
}

/// Reports what `stream` may report now, in its completion order across sessions: the oldest
/// retired order first ([`Sink::retired`] keeps a stream's in renewal order), each in turn
/// once it is wholly reported, then the current session's.
pub(super) fn report_in_order(streams: &mut [DdpStream], out: &mut Sink, stream: u16) {
    while let Some(k) = out.retired.iter().position(|r| r.stream == stream) {
        // Taken out for the while: reporting needs the sink, which holds it.
        let mut r = out.retired.remove(k);
        report_done(out, stream, &mut r.rdmap);
        if r.rdmap.unreported() > 0 {
            // Back in its place, so the stream's retired orders keep their order.
            out.retired.insert(k, r);
            return;
        }
    }
    if let Some(r) = streams
        .get_mut(usize::from(stream))
        .and_then(|s| s.rdmap.as_deref_mut())
    {
        report_done(out, stream, r);
    }
}

/// The completions at the front of `r`'s order that are finished.
fn report_done(out: &mut Sink, stream: u16, r: &mut RdmapStream) {
    while let Some((wr_id, signaled, ok, local)) = r.pop_done() {
        push_completion(out, stream, wr_id, signaled, (ok, local));
    }
}

/// `ok`: it succeeded; `local`: it failed of its own local fault, not flushed.
fn push_completion(
    out: &mut Sink,
    stream: u16,
    wr_id: u64,
    signaled: bool,
    (ok, local): (bool, bool),
) {
    if signaled || !ok {
        out.completions.push_back(Completion {
            wr_id,
            stream,
            status: match (ok, local) {
                (true, _) => Status::Success,
                (false, true) => Status::LocalProtection,
                (false, false) => Status::Flushed,
            },
        });
        if let Some(x) = out.silent.get_mut(usize::from(stream)) {
            *x = None;
        }
    } else {
        let k = usize::from(stream);
        if out.silent.len() <= k {
            out.silent.resize(k + 1, None);
        }
        out.silent[k] = Some(wr_id);
    }
}

/// Segments held for an answer that will never release them: dropped as after the session's
/// end, their receive buffer given back.
pub(super) fn drop_held_for_answer(s: &mut DdpStream, out: &mut Sink) {
    for data in s.before_answer.drain(..) {
        out.held_bytes -= held_cost(data.len());
        out.stats.after_session_end += 1;
    }
}

pub(super) fn flush_receives(stream: u16, s: &mut DdpStream, out: &mut Sink) {
    // Segments that waited for an answer that never came (the session ended first).
    drop_held_for_answer(s, out);
    // Reads whose responses can no longer come end with the receive side (RFC 5040 §5.4),
    // and with them the stream's work: what is not reported yet is, in posting order, save
    // zero-copy sends whose segments SCTP may still read and what follows them: they come
    // once those segments settle ([`RdmapStream::flush_order`]).
    if let Some(r) = s.rdmap.as_deref_mut() {
        out.stats.flushed_sends += r.take_outstanding().count() as u64;
        out.stats.flushed_sends += r.take_outstanding_atomics().count() as u64;
        // Behind an earlier session's order, they wait for it ([`report_in_order`]).
        let held = held_by_retired(out, stream);
        let flushed = r.flush_order();
        if !held {
            for (wr_id, signaled, ok, local) in flushed {
                push_completion(out, stream, wr_id, signaled, (ok, local));
            }
        }
    }
    // Work the order held behind a Read or an Atomic, released above, may have succeeded
    // silently too.
    tell_silent(stream, out);
    flush_posted(stream, s, out);
    s.rx = None;
}

/// How far `stream`'s unsignaled work got, told as its session ends (and again if more of
/// it is released later, and for every stream before the association's `Closed`,
/// [`tell_all_silent`]): without it an unsignaled Send that succeeded looked, at the
/// association's end, like one never taken, and was completed Flushed (a ULP resending
/// flushed work sent it twice). The note is the stream's, not a session's: a late success
/// of an earlier session may be told at a later session's end (verbs numbers each queue
/// pair's work apart, so it finds nothing of its own under it).
pub(super) fn tell_silent(stream: u16, out: &mut Sink) {
    if let Some(through) = out
        .silent
        .get_mut(usize::from(stream))
        .and_then(Option::take)
    {
        out.indications
            .push_back(Indication::SilentSuccesses { stream, through });
    }
}

/// [`tell_silent`] for every stream: the association is over.
pub(super) fn tell_all_silent(out: &mut Sink) {
    for stream in 0..out.silent.len() {
        tell_silent(stream as u16, out);
    }
}

/// The receives posted on `stream`, flushed.
pub(super) fn flush_posted(stream: u16, s: &mut DdpStream, out: &mut Sink) {
    for (qn, q) in s.posted.iter_mut().enumerate() {
        for wr_id in q.drain(..) {
            out.stats.flushed_receives += 1;
            out.indications.push_back(Indication::RecvFlushed {
                stream,
                qn: qn as u32,
                wr_id,
            });
        }
    }
}

/// Replaces a stream whose session is over with a fresh one for the next session, after
/// anything the old one still had to say.
pub(super) fn renew(stream: u16, s: &mut DdpStream, limit: &PendingLimit, out: &mut Sink) {
    drain_events(stream, s, out);
    flush(stream, s, out);
    // Work of the old session whose segments SCTP has not settled yet still completes, in
    // its order, when they do.
    if let Some(rdmap) = s.rdmap.take().filter(|r| r.unreported() > 0) {
        out.retired.push(Retired {
            stream,
            generation: s.generation,
            rdmap,
        });
    }
    // Its id may be on the ready list: keep the flag that says so.
    let ready = s.ready;
    // A Terminate crossing our Reject is told apart in the sessions that follow, until it came
    // or can no longer come; those of earlier rejected attempts still are too (RFC 5043 §6.6).
    let mut crossings = std::mem::take(&mut s.crossings);
    if s.session.peer_terminate_may_cross() {
        if crossings.len() >= CROSSING_WATCHES {
            // Bounded: a peer rejected again and again while SCTP misses a chunk of its.
            crossings.remove(0);
            out.stats.crossed_rejects_unwatched += 1;
        }
        crossings.push(Crossing { below: None });
    }
    // (Nothing is left queued after the flush but a Terminate the session's end still
    // holds, which goes with the old state.)
    out.queued_sends -= s.sends.len();
    *s = DdpStream::new(limit, s.generation.wrapping_add(1));
    s.ready = ready;
    s.crossings = crossings;
    if !s.crossings.is_empty() {
        out.crossings.push((stream, s.generation));
    }
}

/// Gives a stream its receive path for protection domain `pd`. The peer's direction starts
/// with its control message at DDP-SSN 0 (§6.1): the passive side has it already (the
/// Initiate) and expects segments from 1; the active side expects the Accept at 0, and
/// delivers nothing that follows it until it has arrived.
pub(super) fn open_receive(s: &mut DdpStream, pd: Pd, cfg: &ConnConfig, active: bool, out: &Sink) {
    let mut rx = StreamRx::new(
        s.sid,
        pd,
        u16::from(!active),
        cfg.queues as usize,
        cfg.recv_depth,
    );
    rx.set_pending_charge(std::sync::Arc::clone(&out.pending_entries));
    s.rx = Some(rx);
    s.posted = (0..cfg.queues).map(|_| VecDeque::new()).collect();
}
