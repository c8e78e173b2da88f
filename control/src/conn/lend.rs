//! The session machine on another thread: a DDP Stream Session Control message leaves with
//! its stream's session ([`SessionCall`]) and comes back; meanwhile only that stream's chunks
//! and operations wait ([`Connection::apply`]).

use std::collections::VecDeque;

use ddpdk_dataplane::sctp::Instant;
use ddpdk_dataplane::wire::ddp::{
    FunctionCode, SessionControlPacket, PPID_DDP_SEGMENT, PPID_SESSION_CONTROL,
};

use crate::memory::Place;
use crate::session::{Session, State};

use super::api::*;
use super::route::*;
use super::stream::*;
use super::*;

/// What happened on a stream while its session was away.
#[derive(Debug)]
pub(super) struct Lent {
    /// The session's state when it left (what [`Connection::session_state`] reports).
    pub(super) state: State,
    /// This stream's DDP chunks that came behind the control message, and the ULP's
    /// operations on the stream, in arrival order, to be applied once the session is back.
    /// Nothing of other streams waits: only the stream whose session is away is parked.
    pub(super) held: VecDeque<Held>,
    /// Our chunks SCTP acknowledged meanwhile (their DDP-SSNs).
    pub(super) acks: Vec<u16>,
    /// The association ended (or the peer restarted) meanwhile.
    pub(super) ended: bool,
    /// It ended gracefully (SHUTDOWN, RFC 9260 §9.2) before anything else ended it: the
    /// stream's end waits for the session, and the DDP segments held, which SCTP
    /// acknowledged, are delivered first.
    pub(super) graceful: bool,
    /// How many of `held` came before the end: after a restart (RFC 9260 §5.2.4) the ones
    /// behind them are the new incarnation's, for the new session.
    pub(super) held_at_end: usize,
    /// How many of `held` came before the ULP asked for a SHUTDOWN: it waits for them (a
    /// peer's message among them is answered first), not for what came after.
    pub(super) before_shutdown: usize,
    /// The stream's receive path failed in the packet that sent the session away, ahead of
    /// the control message: its end (RDMAP's Terminate first, `end_faulted`) waits for the
    /// session.
    pub(super) fault: Option<ddpdk_dataplane::ddp::RxError>,
}

/// A chunk or an operation waiting for its stream's session ([`Lent::held`]).
#[derive(Debug)]
pub(super) enum Held {
    /// `tsn`: its SCTP TSN, which tells an earlier session's late chunk from this one's
    /// ([`super::stream::Crossing`], [`super::stream::DdpStream::final_tsn`]).
    Chunk {
        ppid: u32,
        tsn: u32,
        data: Vec<u8>,
    },
    Op(Op),
}

/// A DDP Stream Session Control message (PPID 17) that a data core hands, with its stream's
/// RFC 5043 §6 session, to the thread that runs the session machine (the control thread):
/// [`SessionCall::run`] applies the message there, and [`Connection::return_session`] takes
/// the session back on the core. Meanwhile the core holds the stream's later chunks, and the
/// connection's packets wait ([`Connection::sessions_lent`]), so the machine still judges every
/// chunk of the stream in arrival order.
#[derive(Debug)]
pub struct SessionCall {
    pub(super) stream: u16,
    pub(super) generation: u32,
    pub(super) session: Box<Session>,
    pub(super) ssn: u16,
    pub(super) function: FunctionCode,
    pub(super) private_data: Vec<u8>,
    pub(super) result: Option<Result<(), crate::session::ProtocolError>>,
}

impl SessionCall {
    /// Runs the session machine on the message (RFC 5043 §6.1–§6.4: its place in the
    /// pattern, the pending-Initiate limit, the events for the ULP, the Terminate owed).
    pub fn run(&mut self) {
        if self.result.is_none() {
            self.result = Some(self.session.on_control(
                self.ssn,
                self.function,
                &self.private_data,
            ));
        }
    }

    pub fn stream(&self) -> u16 {
        self.stream
    }

    pub fn function(&self) -> FunctionCode {
        self.function
    }

    /// What the machine made of the message, once run: `Err` if it broke the §6.1 pattern
    /// (the session then ended).
    pub fn result(&self) -> Option<Result<(), crate::session::ProtocolError>> {
        self.result
    }
}

impl Connection {
    /// Hands every DDP Stream Session Control message (PPID 17), with its stream's session,
    /// to whoever polls [`Connection::poll_session_call`] (the control thread), instead of
    /// running the RFC 5043 §6 machine here. Off by default (one thread runs everything).
    pub fn set_remote_sessions(&mut self, on: bool) {
        self.remote_sessions = on;
    }

    /// The next session lent out with a control message, to run and give back.
    pub fn poll_session_call(&mut self) -> Option<SessionCall> {
        self.sink.calls.pop_front()
    }

    /// Whether a session is away: the caller holds this connection's packets and ULP calls
    /// until it is back (they are judged in order then).
    pub fn sessions_lent(&self) -> bool {
        self.sink.lent > 0
    }

    /// Takes back a session lent out with `call`, once run: what happened meanwhile is
    /// applied to it (acknowledgements, the association's end), the message takes effect on
    /// the receive path, and the stream's chunks held behind it are routed.
    pub fn return_session<'m>(
        &mut self,
        now: Instant,
        mut call: SessionCall,
        place: impl Into<Place<'m>>,
    ) {
        let memory = place.into();
        let stream = call.stream;
        let how = self.routing();
        let Some(s) = self.streams.get_mut(usize::from(stream)) else {
            return;
        };
        let Some(lent) = s.lent.take() else {
            return;
        };
        self.shutdown_waits_for.retain(|&w| w != stream);
        self.sink.lent -= 1;
        // Not this stream's session any more (nothing renews a stream while its session is
        // away, so this is only defence): the stream is free again, the old session dropped.
        if s.generation != call.generation {
            self.release_held(lent.held);
            self.shutdown_if_due(now);
            self.tell_closed_once_back();
            return;
        }
        call.run();
        s.session = *call.session;
        if let Some(error) = lent.fault.filter(|_| !lent.ended) {
            self.sink.faulted.push((stream, error));
        }
        for ssn in lent.acks {
            let _ = s.session.on_acked(ssn);
        }
        if lent.ended && !lent.graceful {
            // Its end was told when the association ended; what the machine said of the
            // message since is moot.
            s.session.association_ended();
            while s.session.poll_event().is_some() {}
        }
        // The message's events come before anything it or the chunks behind it deliver.
        if indicate_events(stream, s, &mut self.sink) {
            self.sink.wake.push(stream);
        }
        // After a graceful close, what the message releases (requests that overtook it)
        // is delivered, not answered, as what was held behind it (`replay_after_close`).
        self.sink.answers_closed = lent.graceful;
        if call.result == Some(Ok(())) {
            // Messages after it in DDP-SSN order may now be delivered (the active side's
            // first segments wait for the Accept): on an RDMAP stream, through RDMAP.
            if s.rdmap.is_some() {
                let zero_copy = self.regions.is_some();
                super::rdmap::release(stream, s, call.ssn, memory, &mut self.sink, zero_copy);
            } else {
                let DdpStream {
                    rx, posted, grace, ..
                } = s;
                if let Some(rx) = rx.as_mut() {
                    let sink = &mut self.sink;
                    let _ = rx.on_control(call.ssn, &mut |ind| {
                        indicate(stream, posted, grace, sink, ind)
                    });
                }
            }
        } else {
            self.sink.stats.control_refused += 1;
            count_without_session(&s.session, &mut self.sink);
            if let Some(Err(e)) = call.result {
                rdmap_terminate_first(stream, s, e, &mut self.sink);
            }
        }
        release_before_answer(stream, s, &how, memory, &mut self.sink);
        self.sink.answers_closed = false;
        self.sink.touched.stream(stream);
        // Its Read Responses were not checked against STags revoked while it was away.
        self.recheck_read_sources(memory.stags);
        // What waited for the session, in arrival order, until a control message among it
        // sends the session away again (the rest then waits for that one).
        let (mut held, ended, graceful) = (lent.held, lent.ended, lent.graceful);
        let mut before_end = if ended { lent.held_at_end } else { 0 };
        let mut before_shutdown = lent.before_shutdown;
        while let Some(item) = held.pop_front() {
            let old_incarnation = before_end > 0;
            before_end = before_end.saturating_sub(1);
            let asked_before_shutdown = before_shutdown > 0;
            before_shutdown = before_shutdown.saturating_sub(1);
            match item {
                Held::Chunk { ppid, tsn, data } => {
                    self.sink.held_bytes -= held_cost(data.len());
                    // Chunks behind the message of an association that has ended meanwhile
                    // start nothing (a held Initiate would open a session on a closed
                    // association); after a restart, those that came before it were the
                    // old incarnation's, and the new one's go to the new session. After a
                    // SHUTDOWN, the DDP segments SCTP acknowledged are delivered.
                    if !ended || !(old_incarnation || self.closed) {
                        self.route_one(stream, ppid, tsn, &data, memory);
                    } else if graceful && old_incarnation {
                        self.replay_after_close(stream, ppid, tsn, &data, memory);
                    } else {
                        self.sink.stats.after_session_end += 1;
                    }
                }
                Held::Op(op) => {
                    self.sink.held_ops -= 1;
                    let (name, stream, wr_id) = (op.name(), op.stream(), op.wr_id());
                    // Posted before the graceful close: applied as it was then (a receive
                    // for the Send held behind it, say).
                    self.replaying = graceful && old_incarnation;
                    let result = self.apply_stream_op(op, memory.stags);
                    self.replaying = false;
                    self.sink.op_results.push_back(OpResult {
                        op: name,
                        stream,
                        wr_id,
                        result,
                    });
                }
            }
            if let Some(again) = self.streams[usize::from(stream)].lent.as_mut() {
                // The rest waits for it, whole: moved, not item by item (a peer sending a
                // control message behind every few chunks made each return of the session
                // copy everything still held, quadratic in what it held).
                if again.held.is_empty() {
                    again.held = held;
                } else {
                    again.held.append(&mut held);
                }
                // The message that sent the session away again came before the SHUTDOWN was
                // asked for: its answer goes first, and what else came before it.
                if asked_before_shutdown {
                    again.before_shutdown = before_shutdown;
                    if !self.shutdown_waits_for.contains(&stream) {
                        self.shutdown_waits_for.push(stream);
                    }
                }
                break;
            }
        }
        if graceful {
            // The end the SHUTDOWN brought, once what it held is delivered (nothing held can
            // send the session away again: control messages are not routed after the end).
            let s = &mut self.streams[usize::from(stream)];
            super::end_with_association(stream, s, &mut self.sink);
        }
        self.sink.sync_pending();
        // What the session's return owes the peer (RDMAP's Terminate for a fault parked in
        // `Lent::fault`, messages it released) goes before a SHUTDOWN deferred behind it:
        // once SCTP is shutting down it takes nothing new.
        self.progress(stream);
        self.shutdown_if_due(now);
        self.gaps_due(now);
        self.tell_closed_once_back();
    }

    /// A chunk SCTP acknowledged before a graceful close, held behind a session that was
    /// away (RFC 9260 §9.2: delivered before the association terminates): DDP segments are
    /// routed, and the peer's final message (Terminate, Reject) taken by the session machine
    /// in place, as they were where the machine runs in place. What needs an answer the
    /// closed association cannot carry (an RDMAP Read or Atomic Request, RFC 5040 §5.2, RFC
    /// 7306 §5.2) is delivered, keeping the stream's order, but not answered
    /// (`Sink::answers_closed`); a control message that would start anything is dropped.
    fn replay_after_close(
        &mut self,
        stream: u16,
        ppid: u32,
        tsn: u32,
        data: &[u8],
        memory: Place<'_>,
    ) {
        let take = match ppid {
            PPID_DDP_SEGMENT => true,
            PPID_SESSION_CONTROL => SessionControlPacket::new_checked(data).is_ok_and(|p| {
                matches!(
                    p.function_code(),
                    FunctionCode::Terminate | FunctionCode::Reject
                )
            }),
            _ => false,
        };
        if !take {
            self.sink.stats.after_session_end += 1;
            return;
        }
        let remote = core::mem::replace(&mut self.remote_sessions, false);
        self.sink.answers_closed = true;
        self.route_one(stream, ppid, tsn, data, memory);
        self.sink.answers_closed = false;
        self.remote_sessions = remote;
    }

    /// The ULP hears a graceful close once the sessions away at it are back and what they
    /// held is delivered ([`Lent::graceful`]).
    fn tell_closed_once_back(&mut self) {
        if self.sink.lent == 0 {
            if let Some(reason) = self.closed_untold.take() {
                self.sink.indications.push_back(Indication::Closed(reason));
            }
        }
    }

    /// A deferred SHUTDOWN goes once the sessions away at the request are back with what
    /// came before it: sessions away since (the peer's later control messages) do not hold
    /// it; the ULP's operations posted before it do.
    fn shutdown_if_due(&mut self, now: Instant) {
        let ops_held = self
            .streams
            .iter()
            .filter_map(|s| s.lent.as_ref())
            .any(|l| {
                l.held
                    .iter()
                    .take(l.before_shutdown)
                    .any(|h| matches!(h, Held::Op(_)))
            });
        if self.shutdown_deferred && self.shutdown_waits_for.is_empty() && !ops_held {
            self.shutdown_deferred = false;
            self.shutdown(now);
        }
    }

    /// Applies a ULP operation. One on a stream whose session is away at the control thread
    /// waits for it, in order with the stream's chunks ([`Applied::Deferred`]; its result
    /// comes from [`Connection::poll_op_result`]); the other streams go on. A local STag of
    /// a send is resolved against `stags` (the caller's STag table) when the send is applied.
    /// A SHUTDOWN waits for the sessions away when it is asked for, and for what came
    /// before it behind them (not for sessions the peer sends away later); an ABORT never
    /// waits.
    pub fn apply(
        &mut self,
        now: Instant,
        op: Op,
        stags: &ddpdk_dataplane::mem::StagTable,
    ) -> Result<Applied, PostError> {
        match op {
            Op::Abort => {
                self.abort();
                Ok(Applied::Done)
            }
            Op::Shutdown if self.sessions_lent() => {
                self.shutdown_deferred = true;
                self.shutdown_waits_for.clear();
                for (i, s) in self.streams.iter_mut().enumerate() {
                    if let Some(lent) = s.lent.as_mut() {
                        lent.before_shutdown = lent.held.len();
                        self.shutdown_waits_for.push(i as u16);
                    }
                }
                self.sink.stats.ops_held += 1;
                Ok(Applied::Deferred)
            }
            Op::Shutdown => {
                self.shutdown(now);
                Ok(Applied::Done)
            }
            op => {
                let stream = op.stream().unwrap_or(0);
                let lent = self
                    .streams
                    .get_mut(usize::from(stream))
                    .and_then(|s| s.lent.as_mut());
                if let Some(lent) = lent {
                    if self.sink.held_ops >= MAX_HELD_OPS {
                        return Err(PostError::Full);
                    }
                    lent.held.push_back(Held::Op(op));
                    self.sink.held_ops += 1;
                    self.sink.stats.ops_held += 1;
                    return Ok(Applied::Deferred);
                }
                self.apply_stream_op(op, stags)
            }
        }
    }

    /// The ULP forgets the connection while sessions of it are away at the control thread:
    /// they never come back, so the operations that waited for them will never apply. Each is
    /// reported refused (`NotConnected`: the association ended first), as its result, so a
    /// receive buffer posted meanwhile returns to the ULP (`Control::forget` promises what the
    /// connection owes still comes); the chunks held with them give their room back.
    pub fn abandon_lent(&mut self) {
        for stream in 0..self.streams.len() {
            // A graceful end deferred for the session's return (`Lent::graceful`) happens
            // now: the ULP hears it, and what the stream holds is flushed.
            if self.streams[stream]
                .lent
                .as_ref()
                .is_some_and(|l| l.graceful)
            {
                super::end_lent_now(stream as u16, &mut self.streams[stream], &mut self.sink);
            }
            let Some(lent) = self.streams[stream].lent.take() else {
                continue;
            };
            self.sink.lent -= 1;
            self.release_held(lent.held);
        }
        self.tell_closed_once_back();
    }

    /// Drops what waited for a session that will not apply it: the chunks give their room
    /// back, the operations are reported refused (`NotConnected`) as their results.
    fn release_held(&mut self, held: VecDeque<Held>) {
        for item in held {
            match item {
                Held::Chunk { data, .. } => self.sink.held_bytes -= held_cost(data.len()),
                Held::Op(op) => {
                    self.sink.held_ops -= 1;
                    self.sink.op_results.push_back(OpResult {
                        op: op.name(),
                        stream: op.stream(),
                        wr_id: op.wr_id(),
                        result: Err(PostError::NotConnected),
                    });
                }
            }
        }
    }

    /// The result of an operation that [`Connection::apply`] deferred, once applied.
    pub fn poll_op_result(&mut self) -> Option<OpResult> {
        self.sink.op_results.pop_front()
    }

    pub(super) fn apply_stream_op(
        &mut self,
        op: Op,
        stags: &ddpdk_dataplane::mem::StagTable,
    ) -> Result<Applied, PostError> {
        match op {
            Op::Initiate {
                stream,
                pd,
                private_data,
            } => self.initiate(stream, pd, &private_data),
            Op::Accept {
                stream,
                pd,
                private_data,
            } => self.accept(stream, pd, &private_data),
            Op::Reject {
                stream,
                private_data,
            } => self.reject(stream, &private_data),
            Op::Terminate { stream } => self.terminate(stream),
            Op::PostRecv {
                stream,
                qn,
                wr_id,
                buffer,
            } => {
                self.post_recv_checked(stream, qn, wr_id, buffer, Some(stags))?;
                return Ok(Applied::Posted { stream, qn, wr_id });
            }
            Op::PostSend(mut req) => {
                // A local STag is checked against the caller's STag table, as placement is.
                let data = std::mem::replace(&mut req.data, Payload::Bytes(Vec::new()));
                req.data = self.resolve_local(req.stream, data, stags)?;
                self.post_send(req)
            }
            Op::InitiateRdmap {
                stream,
                pd,
                limits,
                private_data,
            } => self.initiate_rdmap(stream, pd, limits, &private_data),
            Op::AcceptRdmap {
                stream,
                pd,
                limits,
                private_data,
            } => self.accept_rdmap(stream, pd, limits, &private_data),
            Op::PostRdma(req) => self.post_rdma(req, stags),
            // Not a stream's: `apply` takes them.
            Op::Shutdown | Op::Abort => Ok(()),
        }
        .map(|()| Applied::Done)
    }
}
