//! The receive side of a connection: each DATA chunk SCTP delivers is routed to its stream's
//! session (PPID 17) or receive path (PPID 16, RFC 5043 §5.2), and what the receive path
//! indicates becomes the ULP's.

use std::collections::VecDeque;

use ddpdk_dataplane::ddp::{self, MessageInfo, RxError};
use ddpdk_dataplane::mem::Stag;
use ddpdk_dataplane::sctp::{serial, Deliver, Instant, Message as SctpMessage};
use ddpdk_dataplane::wire::crc32c;
use ddpdk_dataplane::wire::ddp::{
    FunctionCode, SessionControlPacket, DDP_SSN_LEN, PPID_DDP_SEGMENT, PPID_SESSION_CONTROL,
};
use ddpdk_dataplane::wire::rdmap::{Control, Opcode, RDMAP_VERSION};
use ddpdk_dataplane::wire::sctp::HEADER_LEN as SCTP_HEADER_LEN;

use crate::memory::Place;
use crate::session::{PendingLimit, Session, State, TerminationReason};

use super::api::*;
use super::lend::*;
use super::stream::*;
use super::{receive_limit, Connection};

/// What [`route`] needs to know of the connection besides its streams.
#[derive(Debug, Clone, Copy)]
pub(super) struct Routing {
    /// Session control messages leave with their session ([`Connection::set_remote_sessions`]).
    pub(super) remote: bool,
    /// The association's Connected has been indicated.
    pub(super) connected: bool,
    /// The largest DDP Segment we announced (RFC 5043 §9).
    pub(super) mulpdu: usize,
    /// The receive buffer (the a_rwnd of our INIT).
    pub(super) budget: usize,
    /// Sends may name region bytes ([`Connection::use_regions`]): Read Responses go by
    /// reference.
    pub(super) zero_copy: bool,
    /// Where user messages other than session control go.
    pub(super) service: Service,
    /// The association's Adaptation Indication is DDP's ([`Connection::is_ddp`]).
    pub(super) ddp: bool,
}

/// The connection's side of `Association::handle`: each DATA chunk is routed, and what the
/// connection holds on the peer's behalf is the receive buffer SCTP may not overrun.
pub(super) struct Router<'a, 'm> {
    pub(super) streams: &'a mut [DdpStream],
    pub(super) memory: Place<'m>,
    pub(super) sink: &'a mut Sink,
    pub(super) limit: &'a PendingLimit,
    pub(super) how: Routing,
}

impl Deliver for Router<'_, '_> {
    fn deliver(&mut self, m: SctpMessage<'_>) {
        route(
            m,
            self.streams,
            self.memory,
            self.sink,
            self.limit,
            self.how,
        );
    }

    fn room(&self) -> usize {
        // Routing may leave messages waiting for Delivery chunk by chunk: counted as they are.
        self.sink.room_now(self.how.budget)
    }

    /// The DDP chunk (segment or control message: its DDP-SSN first, RFC 5043 §5.2) a
    /// stream's Placed messages wait for, on a stream whose session is here.
    fn releases(&self, stream: u16, ppid: u32, data: &[u8]) -> bool {
        let (Some(s), Some(ssn)) = (self.streams.get(usize::from(stream)), data.get(..2)) else {
            return false;
        };
        (ppid == ddpdk_dataplane::wire::ddp::PPID_DDP_SEGMENT || ppid == PPID_SESSION_CONTROL)
            && s.lent.is_none()
            && s.rx
                .as_ref()
                .is_some_and(|rx| rx.releases_pending(u16::from_be_bytes([ssn[0], ssn[1]])))
    }

    /// A stream whose session is away holds what comes on it (`Lent::held`: the control
    /// thread's return releases it); one waiting for the peer's answer holds its segments
    /// (`DdpStream::before_answer`), not the answer, which releases them; an echo service
    /// holds what it echoes.
    fn holds(&self, stream: u16, ppid: u32) -> bool {
        let control = ppid == PPID_SESSION_CONTROL;
        self.how.service == Service::Echo && !control
            || self
                .streams
                .get(usize::from(stream))
                .is_some_and(|s| s.lent.is_some() || s.session.answer_pending() && !control)
    }
}

impl Connection {
    /// The fused receive path: the packet of a bulk tagged transfer (one whole unordered DATA
    /// chunk with the next TSN, `Association::predict_data`) carrying the next DDP Segment of
    /// a stream (PPID 16, RFC 5043 §5.2; its session here and open, the next DDP-SSN,
    /// `Session::is_plain_segment`; on an RDMAP stream, an RDMA Write) within the MULPDU
    /// (§9), tagged and placeable
    /// (`StreamRx::on_tagged_next`: RFC 5041 §7.1's checks passed, the payload placed), is
    /// taken without the chunk walk, the `Deliver` call and the general routing. Each layer
    /// commits only once the segment is placed, with the general path's effect (a
    /// differential test holds them together); `false` with nothing changed for anything
    /// else, and the general path decides. The CRC32c is verified before anything is placed;
    /// once it is, `checksum_verified` says so and the general path does not compute it again
    /// (a bad one is left to the general path, which counts it).
    #[inline(always)]
    pub(super) fn fused_tagged(
        &mut self,
        now: Instant,
        packet: &[u8],
        memory: Place<'_>,
        checksum_verified: &mut bool,
    ) -> bool {
        // A packet whose first chunk is not DATA (a SACK, on a sender) leaves at once, before
        // the receive room is reckoned.
        if self.cfg.service != Service::Ddp || packet.get(SCTP_HEADER_LEN) != Some(&0) {
            return false;
        }
        let budget = self.assoc.receive_buffer();
        let Some(chunk) = self.assoc.predict_data(packet, self.sink.room(budget)) else {
            return false;
        };
        let m = chunk.message;
        // (On an association that is not DDP's no session is ever established, so the
        // plain-segment check below refuses every chunk: `route` discards them.)
        if m.ppid != PPID_DDP_SEGMENT {
            return false;
        }
        let Connection {
            assoc,
            streams,
            sink,
            rx_mulpdu,
            rx_slack,
            ..
        } = self;
        let Some(s) = streams.get_mut(usize::from(m.stream)) else {
            return false;
        };
        let Some(&[hi, lo]) = m.data.get(..DDP_SSN_LEN) else {
            return false;
        };
        // RDMAP's check of a tagged segment (RFC 5040 §4.2, `RdmapStream::check`) passes an
        // RDMA Write of its version whose STag the peer has not invalidated in this packet
        // (none has been: the list is empty), asking remote write, as plain DDP does; its
        // delivery tells the Data Sink's ULP nothing (§5.1, `Upcall::Write`).
        let rdma_write = s.rdmap.is_some();
        if s.lent.is_some()
            || (rdma_write && !(is_rdma_write(m.data) && sink.peer_invalidated.is_empty()))
            || !s.session.is_plain_segment(u16::from_be_bytes([hi, lo]))
            || m.data.len() - DDP_SSN_LEN
                > receive_limit(*rx_mulpdu, assoc.max_message(), *rx_slack)
        {
            return false;
        }
        let DdpStream { rx, session, .. } = s;
        let Some(rx) = rx.as_mut() else {
            return false;
        };
        if !*checksum_verified {
            if !crc32c::verify(packet) {
                return false;
            }
            *checksum_verified = true;
        }
        let Some((placed, delivered)) = rx.on_tagged_next(m.data, memory.stags, memory.regions)
        else {
            return false;
        };
        // The in-order tagged path completes tagged messages only; an RDMA Write's is not
        // indicated.
        if let Some(ddp::Delivered {
            info: MessageInfo::Tagged { stag, rsvd_ulp, .. },
            ..
        }) = delivered.filter(|_| !rdma_write)
        {
            tagged_delivered(m.stream, stag, rsvd_ulp, sink);
        }
        // Placed: each layer below records it as the general path would have.
        assoc.take_predicted(&chunk);
        session.take_plain_segment();
        sink.stats.segments_received += 1;
        sink.stats.fused_segments += 1;
        sink.stats.placed_bytes += placed as u64;
        assoc.finish_predicted(now, sink.room(budget));
        self.after_sctp();
        true
    }
}

/// Whether a DDP Segment Chunk payload (DDP-SSN onwards) is tagged and carries, in its
/// RsvdULP, RDMAP's control of an RDMA Write of RDMAP's version (RFC 5040 §4.1, §4.2).
#[inline(always)]
fn is_rdma_write(chunk: &[u8]) -> bool {
    // DDP-SSN (2), the control octet (T is its top bit), then the tagged header's RsvdULP.
    matches!(chunk, [_, _, control, rsvd_ulp, ..] if control & 0x80 != 0 && {
        let c = Control::from_byte(*rsvd_ulp);
        c.version == RDMAP_VERSION && c.opcode == Opcode::Write
    })
}

/// One DDP chunk from SCTP, during `Association::handle`.
pub(super) fn route(
    m: SctpMessage<'_>,
    streams: &mut [DdpStream],
    memory: Place<'_>,
    out: &mut Sink,
    limit: &PendingLimit,
    how: Routing,
) {
    let Routing {
        remote, connected, ..
    } = how;
    let stream = m.stream;
    // RFC 5043 §11.1: on an association whose Adaptation Indication is not DDP's, no chunk is
    // DDP's, session control neither: discarded as the Discard service does.
    if !how.ddp {
        out.stats.service_discarded += 1;
        return;
    }
    let Some(s) = streams.get_mut(usize::from(stream)) else {
        out.stats.unknown_stream += 1;
        return;
    };
    if how.service != Service::Ddp && m.ppid != PPID_SESSION_CONTROL {
        match how.service {
            // The queue is bounded by the receive buffer whatever SCTP let through (a message
            // that filled a gap is taken beyond the window, §6.2): past it, counted and dropped.
            Service::Echo if out.held_bytes + held_cost(m.data.len()) > how.budget => {
                out.stats.service_dropped += 1;
            }
            Service::Echo => {
                out.held_bytes += held_cost(m.data.len());
                out.echo.push_back((stream, m.ppid, m.data.to_vec()));
            }
            _ => out.stats.service_discarded += 1,
        }
        return;
    }
    // The session is away with an earlier chunk of the stream: this one waits for it, so the
    // machine sees the stream's chunks in the order they came. The copy counts against the
    // receive buffer until it is routed (SCTP refuses what does not fit: `Router::room`).
    if let Some(lent) = s.lent.as_mut() {
        out.held_bytes += held_cost(m.data.len());
        out.stats.chunks_held += 1;
        lent.held.push_back(Held::Chunk {
            ppid: m.ppid,
            tsn: m.tsn,
            data: m.data.to_vec(),
        });
        return;
    }
    match m.ppid {
        PPID_SESSION_CONTROL => {
            out.stats.control_received += 1;
            out.touched.stream(stream);
            let Ok(p) = SessionControlPacket::new_checked(m.data) else {
                out.stats.control_refused += 1;
                if let Err(e) = s.session.on_truncated() {
                    rdmap_terminate_first(stream, s, e, out);
                }
                count_without_session(&s.session, out);
                return;
            };
            let (ssn, function) = (p.ddp_ssn(), p.function_code());
            if !s.crossings.is_empty() {
                if ssn == 1 && function == FunctionCode::Terminate {
                    // The Terminate of an attempt we rejected (`Crossing`): it belongs to no
                    // session here, and nothing else of that attempt can come. Bounds grow
                    // with each attempt, so the oldest watch it is below is its own.
                    if let Some(k) = s
                        .crossings
                        .iter()
                        .position(|c| c.below.is_none_or(|b| serial::lt(m.tsn, b)))
                    {
                        s.crossings.remove(k);
                        out.stats.crossed_rejects += 1;
                        return;
                    }
                }
                if ssn == 0 {
                    // The peer's first chunk of the session after the latest rejected attempt.
                    for c in s.crossings.iter_mut() {
                        c.below.get_or_insert(m.tsn);
                    }
                }
            }
            // The peer starts a new session on a stream whose previous one is over for us
            // (§6.6: that nothing of its old session is outstanding is the initiator's duty).
            if ssn == 0
                && function == FunctionCode::Initiate
                && s.session.accepts_new_session()
                && s.control.is_none()
            {
                renew(stream, s, limit, out);
                for c in s.crossings.iter_mut() {
                    c.below.get_or_insert(m.tsn);
                }
            }
            if function == FunctionCode::Terminate {
                s.final_tsn.get_or_insert(m.tsn);
            }
            if remote {
                // RFC 5043 §6 on the control thread: the session goes with the message.
                let session = std::mem::replace(&mut s.session, Session::new(limit.clone()));
                s.lent = Some(Box::new(Lent {
                    state: session.state(),
                    held: VecDeque::new(),
                    acks: Vec::new(),
                    ended: false,
                    graceful: false,
                    held_at_end: 0,
                    before_shutdown: 0,
                    fault: None,
                }));
                out.lent += 1;
                out.stats.sessions_lent += 1;
                out.calls.push_back(SessionCall {
                    stream,
                    generation: s.generation,
                    session: Box::new(session),
                    ssn,
                    function,
                    private_data: p.private_data().to_vec(),
                    result: None,
                });
                return;
            }
            let verdict = s.session.on_control(ssn, function, p.private_data());
            // What the message means for the ULP comes before anything behind it in the
            // packet (an Accept before the first delivery it allows), but after the
            // association's own news (a COOKIE ACK earlier in the packet: Connected first).
            if connected && indicate_events(stream, s, out) {
                out.wake.push(stream);
            }
            if let Err(e) = verdict {
                out.stats.control_refused += 1;
                count_without_session(&s.session, out);
                rdmap_terminate_first(stream, s, e, out);
            } else if s.rdmap.is_some() {
                // Messages after it in DDP-SSN order may now be delivered (the active side's
                // first segments wait for the Accept): on an RDMAP stream, through RDMAP.
                super::rdmap::release(stream, s, ssn, memory, out, how.zero_copy);
            } else {
                let DdpStream {
                    rx, posted, grace, ..
                } = s;
                if let Some(rx) = rx.as_mut() {
                    let _ =
                        rx.on_control(ssn, &mut |ind| indicate(stream, posted, grace, out, ind));
                }
            }
            release_before_answer(stream, s, &how, memory, out);
        }
        PPID_DDP_SEGMENT => {
            out.stats.segments_received += 1;
            let Some(ssn) = m.data.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
                out.stats.refused_by_session += 1;
                if let Err(e) = s.session.on_truncated() {
                    rdmap_terminate_first(stream, s, e, out);
                }
                count_without_session(&s.session, out);
                out.touched.stream(stream);
                return;
            };
            if let Err(e) = s.session.on_segment(ssn) {
                out.stats.refused_by_session += 1;
                rdmap_terminate_first(stream, s, e, out);
                count_without_session(&s.session, out);
                out.touched.stream(stream);
                return;
            }
            // RFC 5043 §6.1, §6.3: on the active side, until the peer's answer at DDP-SSN 0
            // (SCTP delivers unordered, §10), a segment's session is not known to exist: the
            // answer may be a Reject, and then the segment belongs to no legal pattern. It
            // waits for the answer (its copy counts against the receive buffer) rather than
            // being placed at once: a tagged segment used to land for good in memory that a
            // rejected session never owned.
            if s.session.answer_pending() {
                if s.before_answer.is_empty() {
                    // Bounded (RFC 5043 §10, `Connection::check_gaps`): the answer was sent
                    // before the segment.
                    note_answer_wait(stream, s, m.tsn, out);
                }
                out.held_bytes += held_cost(m.data.len());
                out.stats.segments_held_for_answer += 1;
                s.before_answer.push(m.data.to_vec());
                return;
            }
            place_segment(stream, s, m.data, &how, memory, out);
        }
        ppid => {
            // It was counted and dropped, the session left open: a peer that spent a DDP-SSN
            // on it stalled every later delivery, unreported (an independent review).
            out.stats.unknown_ppid += 1;
            if let Err(e) = s.session.on_unknown_ppid(ppid) {
                rdmap_terminate_first(stream, s, e, out);
            }
            count_without_session(&s.session, out);
            out.touched.stream(stream);
        }
    }
}

/// The session machine ended an RDMAP stream's session for a chunk that fits no pattern
/// (RFC 5043 §6.1, §10) and holds its Terminate (`Session::set_terminate_follows_ulp`):
/// RDMAP's Terminate reports the error first (§11.3: "Other RDMAP-defined Terminate
/// Messages MUST be generated as specified when a DDP stream is terminated"; RFC 5040 §4.8:
/// the stream's catastrophic error, 0x2/0x07, having no number of its own), queued by
/// `end_faulted`, and the session's Terminate follows it. Anything else releases the hold.
pub(super) fn rdmap_terminate_first(
    stream: u16,
    s: &mut DdpStream,
    e: crate::session::ProtocolError,
    out: &mut Sink,
) {
    use crate::session::ProtocolError;
    use ddpdk_dataplane::ddp::DeliveryError;
    if !s.session.final_held() || out.faulted.iter().any(|&(f, _)| f == stream) {
        return;
    }
    let Some(r) = s.rdmap.as_deref() else {
        s.session.release_final();
        return;
    };
    // The stream's Terminate is out or on its way already (its first error's): the hold
    // ends when it has gone, or now if it has.
    if r.terminate_started() {
        if s.queued_terminate().is_none() {
            s.session.release_final();
        }
        return;
    }
    let error = match e {
        ProtocolError::OutOfWindow => RxError::Sequence(DeliveryError::OutOfWindow),
        ProtocolError::Duplicate => RxError::Sequence(DeliveryError::Duplicate),
        _ => RxError::Truncated,
    };
    out.faulted.push((stream, error));
}

/// The peer's segments that came ahead of its answer to our Initiate, once the answer is in
/// (RFC 5043 §6.1, §6.3): placed, in the order they came, when the answer was an Accept (as
/// the session then stands: ended by the peer's own Terminate, its last segments are still
/// placed); dropped otherwise (a Reject: they fit no legal pattern). Nothing while the answer
/// is still awaited, even when a Terminate ahead of it has ended the session (§6.6): then they
/// are dropped when it comes, whatever it is.
pub(super) fn release_before_answer(
    stream: u16,
    s: &mut DdpStream,
    how: &Routing,
    memory: Place<'_>,
    out: &mut Sink,
) {
    if s.before_answer.is_empty() || s.session.answer_pending() {
        return;
    }
    let accepted = s.session.peer_accepted();
    for data in std::mem::take(&mut s.before_answer) {
        out.held_bytes -= held_cost(data.len());
        if accepted {
            place_segment(stream, s, &data, how, memory, out);
        } else {
            out.stats.after_session_end += 1;
        }
    }
}

/// Places one DDP Segment (PPID 16) its session has passed ([`Session::on_segment`]).
#[inline(always)]
fn place_segment(
    stream: u16,
    s: &mut DdpStream,
    data: &[u8],
    how: &Routing,
    memory: Place<'_>,
    out: &mut Sink,
) {
    // After the session ended, only the peer's own last segments, overtaken by its
    // Terminate, are still placed (the receive side stays open for exactly those).
    if let State::Terminated(reason) = s.session.state() {
        if reason != TerminationReason::PeerTerminate {
            out.stats.after_session_end += 1;
            return;
        }
    }
    // RFC 5043 §9: "The SCTP adaptation layer MUST reject DDP Segments that are larger
    // than the maximum size specified", whether or not SCTP had to fragment them. The
    // session counted its DDP-SSN above, so the window moves on; the stream stops.
    let segment_len = data.len() - DDP_SSN_LEN;
    let oversize = (segment_len > how.mulpdu).then(|| RxError::Oversize {
        len: u32::try_from(segment_len).unwrap_or(u32::MAX),
        max: u32::try_from(how.mulpdu).unwrap_or(u32::MAX),
    });
    // Counted as oversize unless the stream had already failed (then it is one of
    // those dropped after the stream's end, counted there).
    if oversize.is_some() && s.rx.as_ref().is_some_and(|rx| rx.failed().is_none()) {
        out.stats.oversize_segments += 1;
    }
    if s.rdmap.is_some() {
        super::rdmap::receive(stream, s, data, oversize, memory, out, how.zero_copy);
    } else {
        let DdpStream {
            rx, posted, grace, ..
        } = s;
        let Some(rx_path) = rx.as_mut() else {
            out.stats.after_session_end += 1;
            return;
        };
        let dropped = rx_path.stats().dropped_after_error;
        let mut ulp = |ind| indicate(stream, posted, grace, out, ind);
        match oversize {
            Some(error) => rx_path.refuse(data, error, &mut ulp),
            None => {
                let before = rx_path.stats().placed_bytes;
                rx_path.on_segment(data, memory.stags, memory.regions, &mut ulp);
                out.stats.placed_bytes += rx_path.stats().placed_bytes - before;
            }
        }
        // Segments behind the stream's first error (in the same packet, before the
        // session's end is recorded) are dropped by the receive path (RFC 5041 §7.1:
        // nothing more is placed); they count with those after the end. The attack
        // matrix found them uncounted: 14 of 2^20.
        out.stats.after_session_end += rx_path.stats().dropped_after_error - dropped;
    }
    if matches!(s.session.state(), State::Terminated(_)) && s.session.inbound_complete() {
        flush_receives(stream, s, out);
    }
}

/// After the session refused a chunk: if the stream has no session, the chunk was dropped and
/// the stream left as it was (RFC 5043 §6.1 terminates a session, and there is none).
pub(super) fn count_without_session(session: &Session, out: &mut Sink) {
    if session.state() == State::Idle {
        out.stats.without_session += 1;
    }
}

/// A tagged message delivered (RFC 5041 §5.4: its STag and RsvdULP), to the ULP.
#[inline(always)]
fn tagged_delivered(stream: u16, stag: u32, rsvd_ulp: u8, out: &mut Sink) {
    out.indications.push_back(Indication::TaggedDelivered {
        stream,
        stag: Stag(stag),
        rsvd_ulp,
    });
}

/// One receive-path indication to the ULP.
pub(super) fn indicate(
    stream: u16,
    posted: &mut [VecDeque<u64>],
    grace: &mut Option<u8>,
    out: &mut Sink,
    ind: ddp::Indication,
) {
    match ind {
        ddp::Indication::Delivered { message, .. } => match message.info {
            MessageInfo::Tagged { stag, rsvd_ulp, .. } => {
                tagged_delivered(stream, stag, rsvd_ulp, out)
            }
            MessageInfo::Untagged {
                qn,
                msn,
                message_len,
                rsvd_ulp,
                ..
            } => {
                // The queue's buffers complete in MSN order, which is posting order.
                let wr_id = posted
                    .get_mut(qn as usize)
                    .and_then(|q| q.pop_front())
                    .unwrap_or(u64::MAX);
                out.indications.push_back(Indication::Received {
                    stream,
                    wr_id,
                    qn,
                    msn,
                    len: message_len,
                    rsvd_ulp,
                    invalidated: None,
                    imm_data: None,
                })
            }
        },
        ddp::Indication::Error {
            error,
            header,
            segment_len,
        } => {
            *grace = Some(1);
            out.stats.receive_errors += 1;
            out.stats.receive_errors_by_kind.count(&error);
            out.faulted.push((stream, error));
            // The queue's buffers and their receives are in the same (posting) order. An
            // inline queue's buffers are the stream's own, with no receive: none is found.
            let recv = match error {
                RxError::BufferRevoked { qn, position }
                | RxError::MessageTooLong { qn, position } => posted
                    .get(qn as usize)
                    .and_then(|q| q.get(position as usize))
                    .copied(),
                _ => None,
            };
            out.indications.push_back(Indication::Error {
                stream,
                error,
                header,
                segment_len,
                recv,
            })
        }
    }
}
