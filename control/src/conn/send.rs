//! The send scheduler and completion accounting: streams take turns handing segments to SCTP
//! (RFC 5041 §5.3 order per stream, cut at the MULPDU of RFC 5043 §9), and a send completes
//! when SCTP's cumulative ack covers its last segment (RFC 5041 §5.4, Data Source).

use ddpdk_dataplane::ddp::{self, emit_segment, emit_segment_header};
use ddpdk_dataplane::ddp::{Target, TxError};
use ddpdk_dataplane::sctp::{ExtRef, SendError};
use ddpdk_dataplane::wire::ddp::{
    Segments, SessionControlPacket, PPID_DDP_SEGMENT, PPID_SESSION_CONTROL,
};

use crate::rdmap::{OutboundAtomic, OutboundRead};
use crate::session::{LocalError, State};

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
    /// A Read or Atomic Response: its IRD slot is free once it is wholly with SCTP.
    Response,
    /// RDMAP's Terminate.
    Terminate,
}

/// One of our SCTP messages not yet settled.
#[derive(Debug, Clone, Copy)]
pub(super) struct InFlight {
    pub(super) number: u64,
    pub(super) stream: u16,
    pub(super) generation: u32,
    pub(super) ddp_ssn: u16,
    /// The send it completes, if it is a message's last segment.
    pub(super) completion: Option<Done>,
    /// The completion is a `Flushed` one, held until this chunk settles: the send was cut
    /// short, but its segments already in SCTP's queue read the ULP's region until then.
    pub(super) flushed: bool,
}

pub(super) enum Turn {
    Sent,
    Blocked,
    Done,
}

impl Connection {
    /// Our messages below SCTP's settled mark are acknowledged (events already handled the
    /// dropped ones): tell their sessions, complete their sends.
    pub(super) fn settle(&mut self) {
        let before = self.assoc.settled_before();
        while let Some(f) = self.in_flight.front().copied() {
            if f.number >= before {
                break;
            }
            self.in_flight.pop_front();
            if let Some(s) = self.streams.get_mut(usize::from(f.stream)) {
                if s.generation == f.generation {
                    match s.lent.as_mut() {
                        Some(lent) => lent.acks.push(f.ddp_ssn),
                        // Only ever our own DDP-SSNs: an error here is a bug, not a peer's
                        // doing.
                        None => {
                            let _ = s.session.on_acked(f.ddp_ssn);
                        }
                    }
                    self.sink.touched.stream(f.stream);
                }
            }
            if let Some(done) = f.completion {
                let status = if f.flushed {
                    Status::Flushed
                } else {
                    Status::Success
                };
                let rdmap = self
                    .streams
                    .get_mut(usize::from(f.stream))
                    .filter(|s| s.generation == f.generation)
                    .and_then(|s| s.rdmap.as_deref_mut());
                report(&mut self.sink, rdmap, f.stream, done, status);
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
                _ => {
                    let rdmap = self
                        .streams
                        .get_mut(usize::from(stream))
                        .filter(|s| s.generation == generation)
                        .and_then(|s| s.rdmap.as_deref_mut());
                    report(&mut self.sink, rdmap, stream, done, Status::Flushed);
                }
            }
        }
    }

    /// Hands control messages and segments to SCTP while it has room, streams taking turns
    /// one segment at a time.
    #[inline]
    pub(super) fn pump(&mut self) {
        // Most calls (one after every packet) find nothing ready: leave before the MULPDU,
        // and before the call.
        if self.connected && !self.closed && !self.ready.is_empty() {
            self.pump_ready();
        }
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
            let Some(stream) = self.ready.pop_front() else {
                return;
            };
            match self.send_one(stream, mulpdu) {
                Turn::Sent => {
                    idle_turns = 0;
                    self.ready.push_back(stream);
                }
                Turn::Blocked => {
                    idle_turns += 1;
                    self.ready.push_back(stream);
                }
                Turn::Done => self.streams[usize::from(stream)].ready = false,
            }
            if !self.sink.deferred.is_empty() {
                self.defer_flushed();
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
                    self.in_flight.push_back(InFlight {
                        number,
                        stream,
                        generation: s.generation,
                        ddp_ssn: t.ddp_ssn,
                        completion: None,
                        flushed: false,
                    });
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
                let _ = s.session.terminate();
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
        // their order. A response's arrival frees the slot.
        if matches!(p.origin, Origin::Read(_) | Origin::Atomic(_))
            && !s.rdmap.as_ref().is_some_and(|r| r.may_send_read())
        {
            return Turn::Blocked;
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
        let Ok(number) = self
            .assoc
            .send_ext(stream, PPID_DDP_SEGMENT, &self.segment[..n], ext)
        else {
            // check_send said yes a moment ago; nothing changed in between.
            flush_sends(stream, s, &mut self.sink);
            return Turn::Done;
        };
        self.sink.stats.segments_sent += 1;
        p.offset = span.offset + span.len;
        let mut completion = None;
        if span.last {
            let p = s.sends.pop_front();
            self.sink.queued_sends -= 1;
            self.sink.stats.messages_sent += 1;
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
                Some((Origin::Response, _, _)) => {
                    if let Some(r) = s.rdmap.as_mut() {
                        r.response_sent();
                    }
                }
                Some((Origin::Terminate, _, _)) => self.sink.stats.rdmap_terminates_sent += 1,
                None => {}
            }
        }
        self.in_flight.push_back(InFlight {
            number,
            stream,
            generation: s.generation,
            ddp_ssn,
            completion,
            flushed: false,
        });
        Turn::Sent
    }
}
