//! The send scheduler and completion accounting: streams take turns handing segments to SCTP
//! (RFC 5041 §5.3 order per stream, cut at the MULPDU of RFC 5043 §9), and a send completes
//! when SCTP's cumulative ack covers its last segment (RFC 5041 §5.4, Data Source).

use ddpdk_dataplane::ddp::{self, emit_segment, emit_segment_header};
use ddpdk_dataplane::ddp::{Target, TxError};
use ddpdk_dataplane::sctp::{ExtRef, SendError};
use ddpdk_dataplane::wire::ddp::{
    Segments, SessionControlPacket, PPID_DDP_SEGMENT, PPID_SESSION_CONTROL,
};

use crate::rdmap::{AnsweredRead, OutboundAtomic, OutboundRead};
use crate::session::{LocalError, State, MAX_ACK_RUN};

use super::api::*;
use super::stream::*;
use super::*;

#[derive(Debug)]
pub(super) struct PendingSend {
    pub(super) req: SendRequest,
    pub(super) target: Target,
    /// Octet offset of the next segment.
    pub(super) offset: u32,
    pub(super) origin: Origin,
    /// Its place in an RDMAP stream's completion order.
    pub(super) seq: Option<u64>,
}

/// A work request of the ULP's that a chunk in flight completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Done {
    pub(super) wr_id: u64,
    /// Whether a success is reported (a failure always is).
    pub(super) signaled: bool,
    /// Its place in an RDMAP stream's completion order.
    pub(super) seq: Option<u64>,
}

/// Whose message a send is: the ULP's, or one RDMAP makes (RFC 5040 §5.2, §5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// The ULP's: it completes its work request when acknowledged (RFC 5041 §5.4).
    Ulp,
    /// An RDMA Read Request: it leaves within ORD, and its work request completes with the
    /// Read Response, not with the acknowledgement.
    Read(OutboundRead),
    /// An RFC 7306 Atomic Request: within ORD like a Read, and its work request completes
    /// with the Atomic Response.
    Atomic(OutboundAtomic),
    /// A Read or Atomic Response: its IRD slot is free once it is wholly with SCTP. A Read
    /// Response with bytes names the Read Request it answers, so that its Data Source can be
    /// checked again while it waits to leave ([`Connection::recheck_read_sources`]).
    Response(Option<AnsweredRead>),
    /// RDMAP's Terminate.
    Terminate,
}

/// A run of our SCTP messages not yet settled: `count` consecutive message numbers from
/// `number`, all on one stream of one session generation, with consecutive DDP-SSNs from
/// `ddp_ssn`. A bulk write's segments make one run, not one record each: the queue stays a
/// few cache lines where a record per segment (16 MiB in flight: 12 000 records, 660 KiB)
/// missed the cache on every push, 7 % of a sending core at MTU 1500.
#[derive(Debug, Clone, Copy)]
pub(super) struct InFlight {
    pub(super) number: u64,
    pub(super) count: u16,
    pub(super) stream: u16,
    pub(super) generation: u32,
    pub(super) ddp_ssn: u16,
    /// The send the run's last message completes, if it is a message's last segment.
    pub(super) completion: Option<Done>,
    /// The completion is a `Flushed` one, held until this chunk settles: the send was cut
    /// short, but its segments already in SCTP's queue read the ULP's region until then.
    pub(super) flushed: bool,
}

impl InFlight {
    /// The number of the run's last message, the one its completion belongs to.
    pub(super) fn last_number(&self) -> u64 {
        self.number + u64::from(self.count) - 1
    }
}

/// Records one message (`number`, `stream`, `generation`, `ddp_ssn`) handed to SCTP, and the
/// send it completes: appended to the last run when it continues it (the next number and
/// DDP-SSN of the same stream and generation, no completion before it).
fn push_in_flight(
    in_flight: &mut VecDeque<InFlight>,
    number: u64,
    stream: u16,
    generation: u32,
    ddp_ssn: u16,
    completion: Option<Done>,
) {
    if let Some(b) = in_flight.back_mut() {
        if b.stream == stream
            && b.generation == generation
            && b.completion.is_none()
            && b.count < MAX_ACK_RUN
            && b.number + u64::from(b.count) == number
            && b.ddp_ssn.wrapping_add(b.count) == ddp_ssn
        {
            b.count += 1;
            b.completion = completion;
            return;
        }
    }
    in_flight.push_back(InFlight {
        number,
        count: 1,
        stream,
        generation,
        ddp_ssn,
        completion,
        flushed: false,
    });
}

/// The most free SCTP slots a packet's pump waits for ([`Connection::pump_batch_due`]).
const PUMP_BATCH: u64 = 32;

pub(super) enum Turn {
    Sent,
    /// A segment of a region send that has more to go.
    Segment,
    Blocked,
    Done,
}

impl Connection {
    /// Our messages below SCTP's settled mark are acknowledged (events already handled the
    /// dropped ones): tell their sessions, complete their sends.
    pub(super) fn settle(&mut self) {
        let before = self.assoc.settled_before();
        while let Some(front) = self.in_flight.front_mut() {
            if front.number >= before {
                break;
            }
            // The settled part of the run: all of it, or its first messages (the rest stays,
            // with the completion).
            let settled = (before - front.number).min(u64::from(front.count)) as u16;
            let f = *front;
            if settled < f.count {
                front.number += u64::from(settled);
                front.count -= settled;
                front.ddp_ssn = front.ddp_ssn.wrapping_add(settled);
            } else {
                self.in_flight.pop_front();
            }
            if let Some(s) = self.streams.get_mut(usize::from(f.stream)) {
                if s.generation == f.generation {
                    match s.lent.as_mut() {
                        Some(lent) => lent
                            .acks
                            .extend((0..settled).map(|k| f.ddp_ssn.wrapping_add(k))),
                        // Only ever our own DDP-SSNs: an error here is a bug, not a peer's
                        // doing.
                        None => {
                            let _ = s.session.on_acked_run(f.ddp_ssn, settled);
                        }
                    }
                    // Drained for events only: an acknowledgement seldom makes one (a
                    // released Terminate's end), and a bulk sender's every SACK would
                    // otherwise walk the touched streams for nothing.
                    if s.lent.is_some() || s.session.has_event() {
                        self.sink.touched.stream(f.stream);
                    }
                }
            }
            if settled < f.count {
                self.mark_ready(f.stream);
                break;
            }
            if let Some(done) = f.completion {
                let status = if f.flushed {
                    Status::Flushed
                } else {
                    Status::Success
                };
                report_settled(
                    &mut self.streams,
                    &mut self.sink,
                    (f.stream, f.generation),
                    done,
                    status,
                );
            }
            // An ack may release a held-back Terminate or widen the §10 window.
            self.mark_ready(f.stream);
        }
    }

    /// Hangs each cut-short region send's Flushed completion on its stream's last chunk in
    /// SCTP's queue, so that it comes when that chunk settles (acknowledged or dropped); at
    /// once if none is left.
    pub(super) fn defer_flushed(&mut self) {
        for (stream, generation, done) in std::mem::take(&mut self.sink.deferred) {
            let last = self
                .in_flight
                .iter_mut()
                .rev()
                .find(|f| f.stream == stream && f.generation == generation);
            match last {
                Some(f) if f.completion.is_none() => {
                    f.completion = Some(done);
                    f.flushed = true;
                }
                _ => report_settled(
                    &mut self.streams,
                    &mut self.sink,
                    (stream, generation),
                    done,
                    Status::Flushed,
                ),
            }
        }
    }

    /// Hands control messages and segments to SCTP while it has room, streams taking turns
    /// one segment at a time. Returns whether it ran (and so may have touched sessions).
    #[inline]
    pub(super) fn pump(&mut self) -> bool {
        // Most calls (one after every packet) find nothing ready: leave before the MULPDU,
        // and before the call.
        let due = self.pump_due();
        if due {
            self.pump_ready();
        }
        due
    }

    /// Whether a pump that has something to do ([`Connection::pump_due`]) runs after a
    /// packet or a timer, or before a packet is sent: once a batch of SCTP's slots is free (a
    /// quarter of them, at most [`PUMP_BATCH`]; `send_room + queued` is the slot count). A
    /// bulk sender's every SACK frees a slot or two; refilling them at once ran a whole turn
    /// (the first segment's checks, `send_one`) for every other segment, where a batch gives
    /// one turn and a run of continued segments ([`Connection::continue_region_send`]).
    ///
    /// What it costs: while SCTP's queue is what limits the flight (not cwnd or the peer's
    /// window), the flight is up to a batch short of the queue's length (32 of 1024 slots,
    /// 3 %); and what a received packet makes to send (a Read Response, a Terminate an
    /// acknowledgement releases) waits for the batch, a few SACKs at most. It cannot wait for
    /// ever: room below the batch means SCTP holds three quarters of its slots, which leave
    /// only through acknowledgements, a restart or the association's end, each of which
    /// comes through here. With 7 slots or fewer the batch is one slot, as before. The ULP's
    /// posts and commands pump at once ([`Connection::pump`] from `progress`).
    #[inline]
    pub(super) fn pump_batch_due(&self) -> bool {
        let room = self.assoc.send_room() as u64;
        let batch = ((room + self.assoc.queued()) / 4).clamp(1, PUMP_BATCH);
        room >= batch
    }

    /// [`Connection::pump`] once a batch of SCTP's slots is free
    /// ([`Connection::pump_batch_due`]): after a packet, and before each packet sent. Whether
    /// it ran.
    #[inline]
    pub(super) fn pump_batched(&mut self) -> bool {
        let due = self.pump_due() && self.pump_batch_due();
        if due {
            self.pump_ready();
        }
        due
    }

    /// Whether [`Connection::pump`] has anything to do.
    #[inline(always)]
    pub(super) fn pump_due(&self) -> bool {
        self.connected && !self.closed && !self.ready.is_empty()
    }

    #[inline(never)]
    fn pump_ready(&mut self) {
        let mulpdu = ddp::mulpdu(self.assoc.max_message());
        if self.segment.len() < mulpdu + 2 {
            self.segment.resize(mulpdu + 2, 0);
        }
        let mut idle_turns = 0;
        while idle_turns < self.ready.len() {
            if self.assoc.send_room() == 0 {
                return;
            }
            // The stream stays in the queue while it sends and goes to its back after (one
            // segment a turn, in turn); a lone stream is already there.
            let Some(&stream) = self.ready.front() else {
                return;
            };
            match self.send_one(stream, mulpdu) {
                Turn::Sent => {
                    idle_turns = 0;
                    self.rotate_ready();
                }
                Turn::Segment => {
                    idle_turns = 0;
                    if self.ready.len() == 1 && self.assoc.header_prediction() {
                        self.continue_region_send(stream, mulpdu);
                    } else {
                        self.rotate_ready();
                    }
                }
                Turn::Blocked => {
                    idle_turns += 1;
                    self.rotate_ready();
                }
                Turn::Done => {
                    self.ready.pop_front();
                    self.streams[usize::from(stream)].ready = false;
                }
            }
            if !self.sink.deferred.is_empty() {
                self.defer_flushed();
            }
        }
    }

    /// The stream at the front of the ready queue to its back.
    #[inline]
    fn rotate_ready(&mut self) {
        if self.ready.len() > 1 {
            if let Some(stream) = self.ready.pop_front() {
                self.ready.push_back(stream);
            }
        }
    }

    /// One control message or segment of `stream` to SCTP.
    pub(super) fn send_one(&mut self, stream: u16, mulpdu: usize) -> Turn {
        let i = usize::from(stream);
        let s = &mut self.streams[i];
        // Nothing of the stream leaves while its session is away.
        if s.lent.is_some() {
            return Turn::Blocked;
        }
        // Control messages first: they open and close the session.
        if let Some(t) = s.control.take().or_else(|| s.session.poll_transmit()) {
            self.sink.touched.stream(stream);
            let repr = t.repr();
            let mut buf = [0u8; 4 + 512];
            let n = repr.buffer_len();
            if repr
                .emit(&mut SessionControlPacket::new_unchecked(&mut buf[..n]))
                .is_err()
            {
                return Turn::Done;
            }
            // The session counted the message as sent; if the association is closing or the
            // stream is gone, the association's end ends the session too.
            return match self.assoc.send(stream, PPID_SESSION_CONTROL, &buf[..n]) {
                Ok(number) => {
                    self.sink.stats.control_sent += 1;
                    push_in_flight(
                        &mut self.in_flight,
                        number,
                        stream,
                        s.generation,
                        t.ddp_ssn,
                        None,
                    );
                    Turn::Sent
                }
                Err(SendError::Full) => {
                    s.control = Some(t);
                    Turn::Blocked
                }
                // The association is closing: nothing more will leave.
                Err(_) => {
                    self.sink.stats.control_lost += 1;
                    Turn::Done
                }
            };
        }
        let Some(p) = s.sends.front_mut() else {
            // §7.1: the one further message after a receive error has gone; end the session.
            if s.grace == Some(0) && !matches!(s.session.state(), State::Terminated(_)) {
                // The reason is the receive error, not the ULP's wish.
                let _ = match s.rx.as_ref().and_then(|rx| rx.failed()) {
                    Some(error) => s.session.terminate_for_error(error),
                    None => s.session.terminate(),
                };
                self.sink.touched.stream(stream);
                return Turn::Sent;
            }
            return Turn::Done;
        };
        match s.session.may_send_segment() {
            Ok(()) => {}
            // Waiting for the Accept (§6.6) or for acknowledgements (§10).
            Err(LocalError::NotEstablished | LocalError::WouldExceedWindow) => {
                return Turn::Blocked
            }
            // The session ended: its event flushes the queue.
            Err(_) => return Turn::Done,
        }
        // A Read Request leaves only within ORD (RFC 5040 §6.1), and so does an Atomic
        // Request (RFC 7306 §5.2); what is behind it waits, so the stream's messages keep
        // their order. A response's arrival frees the slot. After the peer's Terminate none
        // leaves: no response could follow it (RFC 5040 §5.4). It ends flushed at once, as
        // the outstanding ones did: waiting for the session's end, it held everything behind
        // it for as long as a peer that never sends its session Terminate likes.
        if matches!(p.origin, Origin::Read(_) | Origin::Atomic(_)) {
            let (may, terminated) = s
                .rdmap
                .as_ref()
                .map_or((false, false), |r| (r.may_send_read(), r.peer_terminated()));
            if terminated {
                if let Some(p) = s.sends.pop_front() {
                    let wr_id = match p.origin {
                        Origin::Read(read) => read.wr_id,
                        Origin::Atomic(atomic) => atomic.wr_id,
                        _ => p.req.wr_id,
                    };
                    self.sink.queued_sends -= 1;
                    self.sink.stats.flushed_sends += 1;
                    let done = Done {
                        wr_id,
                        signaled: p.req.signaled,
                        seq: p.seq,
                    };
                    report(
                        &mut self.sink,
                        s.rdmap.as_deref_mut(),
                        stream,
                        done,
                        Status::Flushed,
                    );
                }
                return Turn::Sent;
            }
            if !may {
                return Turn::Blocked;
            }
        }
        let tagged = matches!(p.target, Target::Tagged { .. });
        let len = p.req.data.len() as u32;
        let Some(span) = Segments::resume(len, mulpdu, tagged, p.offset)
            .ok()
            .and_then(|mut it| it.next())
        else {
            return Turn::Done;
        };
        // The DDP-SSN is taken only once SCTP is sure to take the segment: DDP-SSNs have no
        // gaps (RFC 5043 §6).
        // A region's bytes stay where they are: SCTP holds the header and a reference.
        let (emitted, ext) = match p.req.data {
            Payload::Bytes(ref data) => (
                emit_segment(p.target, data, span, 0, &mut self.segment),
                None,
            ),
            Payload::Region { region, offset, .. } => (
                emit_segment_header(p.target, span, 0, &mut self.segment),
                (span.len > 0).then_some(ExtRef {
                    key: region.0,
                    offset: offset + u64::from(span.offset),
                    len: span.len,
                }),
            ),
            // Refused by post_send: never queued.
            Payload::Local { .. } => (Err(TxError::TooLong), None),
        };
        let n = match emitted {
            Ok(n) => n,
            Err(_) => {
                flush_sends(stream, s, &mut self.sink);
                return Turn::Done;
            }
        };
        let whole = n + ext.map_or(0, |e| e.len as usize);
        match self.assoc.check_send(stream, whole) {
            Ok(()) => {}
            Err(SendError::Full) => return Turn::Blocked,
            // Shutdown started, the stream is gone, or (a bug) the MULPDU does not fit: the
            // message cannot leave.
            Err(_) => {
                flush_sends(stream, s, &mut self.sink);
                return Turn::Done;
            }
        }
        let Ok(ddp_ssn) = s.session.next_ddp_ssn() else {
            return Turn::Blocked;
        };
        self.segment[..2].copy_from_slice(&ddp_ssn.to_be_bytes());
        // check_send said yes a moment ago; nothing changed in between.
        let number = self
            .assoc
            .send_ext_checked(stream, PPID_DDP_SEGMENT, &self.segment[..n], ext);
        p.offset = span.offset + span.len;
        segment_sent(
            stream,
            s,
            &mut self.sink,
            &mut self.in_flight,
            number,
            ddp_ssn,
            span.last,
        );
        if !span.last && ext.is_some() {
            Turn::Segment
        } else {
            Turn::Sent
        }
    }

    /// A lone stream's region send, on from the segment [`Connection::send_one`] just gave
    /// SCTP, while SCTP has room: with no other stream waiting for a turn and nothing arriving
    /// in between, what a turn checks first (a lent session, control messages before
    /// segments, ORD, the association's state, the segment's size) cannot change between the
    /// send's segments, so each further one costs only what is its own: a DDP-SSN within the
    /// RFC 5043 §10 window, its header, a slot, its place in the in-flight run. A bulk
    /// sender's pump ran the whole turn for every segment. Anything unusual stops the run and
    /// leaves it to the next turn.
    fn continue_region_send(&mut self, stream: u16, mulpdu: usize) {
        let s = &mut self.streams[usize::from(stream)];
        let Some(p) = s.sends.front() else {
            return;
        };
        let Payload::Region { region, offset, .. } = p.req.data else {
            return;
        };
        let target = p.target;
        let tagged = matches!(target, Target::Tagged { .. });
        let Ok(mut spans) = Segments::resume(p.req.data.len() as u32, mulpdu, tagged, p.offset)
        else {
            return;
        };
        while self.assoc.send_room() > 0 {
            let Some(span) = spans.next() else {
                return;
            };
            // A zero-length span is only ever a whole message's, never a continuation.
            if span.len == 0 {
                return;
            }
            let Ok(n) = emit_segment_header(target, span, 0, &mut self.segment) else {
                return;
            };
            // RFC 5043 §6: the DDP-SSN only once SCTP is sure to take the segment (room was
            // checked above; state, stream and size were by send_one).
            let Ok(ddp_ssn) = s.session.next_ddp_ssn() else {
                return;
            };
            self.segment[..2].copy_from_slice(&ddp_ssn.to_be_bytes());
            let ext = ExtRef {
                key: region.0,
                offset: offset + u64::from(span.offset),
                len: span.len,
            };
            let number = self.assoc.send_ext_checked(
                stream,
                PPID_DDP_SEGMENT,
                &self.segment[..n],
                Some(ext),
            );
            if let Some(p) = s.sends.front_mut() {
                p.offset = span.offset + span.len;
            }
            self.sink.stats.segments_continued += 1;
            segment_sent(
                stream,
                s,
                &mut self.sink,
                &mut self.in_flight,
                number,
                ddp_ssn,
                span.last,
            );
            if span.last {
                return;
            }
        }
    }
}

/// RDMAP's Terminate is with SCTP: the session's Terminate may follow it now
/// (`Session::hold_final`). Once a stream, apart from the bulk path.
#[cold]
fn terminate_sent(stream: u16, s: &mut DdpStream, sink: &mut Sink) {
    sink.stats.rdmap_terminates_sent += 1;
    s.session.release_final();
    sink.touched.stream(stream);
}

/// Books segment `number` (DDP-SSN `ddp_ssn`) of the front send of `stream`, just given to
/// SCTP: its place in the in-flight runs and, if it was the send's `last`, the send's end (the
/// completion it owes when acknowledged, RFC 5041 §5.4, or RDMAP's bookkeeping).
#[inline(always)]
fn segment_sent(
    stream: u16,
    s: &mut DdpStream,
    sink: &mut Sink,
    in_flight: &mut VecDeque<InFlight>,
    number: u64,
    ddp_ssn: u16,
    last: bool,
) {
    sink.stats.segments_sent += 1;
    let mut completion = None;
    if last {
        let p = s.sends.pop_front();
        sink.queued_sends -= 1;
        sink.stats.messages_sent += 1;
        match p.map(|p| (p.origin, p.req, p.seq)) {
            Some((Origin::Ulp, req, seq)) => {
                completion = Some(Done {
                    wr_id: req.wr_id,
                    signaled: req.signaled,
                    seq,
                })
            }
            Some((Origin::Read(read), _, _)) => {
                if let Some(r) = s.rdmap.as_mut() {
                    r.read_sent(read);
                }
            }
            Some((Origin::Atomic(atomic), _, _)) => {
                if let Some(r) = s.rdmap.as_mut() {
                    r.atomic_sent(atomic);
                }
            }
            Some((Origin::Response(_), _, _)) => {
                if let Some(r) = s.rdmap.as_mut() {
                    r.response_sent();
                }
            }
            Some((Origin::Terminate, _, _)) => terminate_sent(stream, s, sink),
            None => {}
        }
    }
    push_in_flight(in_flight, number, stream, s.generation, ddp_ssn, completion);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(wr_id: u64) -> Option<Done> {
        Some(Done {
            wr_id,
            signaled: true,
            seq: None,
        })
    }

    fn runs(q: &VecDeque<InFlight>) -> Vec<(u64, u16, u16, u16, Option<u64>)> {
        q.iter()
            .map(|f| {
                let wr = f.completion.map(|d| d.wr_id);
                (f.number, f.count, f.stream, f.ddp_ssn, wr)
            })
            .collect()
    }

    #[test]
    fn a_run_holds_consecutive_messages_of_one_stream_up_to_a_completion() {
        let mut q = VecDeque::new();
        // One write of three segments on stream 1, DDP-SSNs 7, 8, 9: one run, completed by
        // its last.
        push_in_flight(&mut q, 10, 1, 0, 7, None);
        push_in_flight(&mut q, 11, 1, 0, 8, None);
        push_in_flight(&mut q, 12, 1, 0, 9, done(100));
        // A completion ends the run: the next write starts another.
        push_in_flight(&mut q, 13, 1, 0, 10, None);
        // Another stream, a gap in the message numbers, a gap in the DDP-SSNs, another
        // generation of the stream: each a run of its own.
        push_in_flight(&mut q, 14, 2, 0, 0, None);
        push_in_flight(&mut q, 16, 2, 0, 1, None);
        push_in_flight(&mut q, 17, 2, 0, 3, None);
        push_in_flight(&mut q, 18, 2, 1, 4, None);
        assert_eq!(
            runs(&q),
            [
                (10, 3, 1, 7, Some(100)),
                (13, 1, 1, 10, None),
                (14, 1, 2, 0, None),
                (16, 1, 2, 1, None),
                (17, 1, 2, 3, None),
                (18, 1, 2, 4, None),
            ]
        );
        assert_eq!(q[0].last_number(), 12);
    }

    #[test]
    fn a_run_wraps_its_ddp_ssn_and_stops_at_the_largest_run() {
        let mut q = VecDeque::new();
        push_in_flight(&mut q, 0, 0, 0, u16::MAX, None);
        push_in_flight(&mut q, 1, 0, 0, 0, None);
        assert_eq!(runs(&q), [(0, 2, 0, u16::MAX, None)]);
        for n in 2..u64::from(MAX_ACK_RUN) + 1 {
            push_in_flight(&mut q, n, 0, 0, (n as u16).wrapping_sub(1), None);
        }
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].count, MAX_ACK_RUN);
        assert_eq!(q[1].count, 1);
    }
}
