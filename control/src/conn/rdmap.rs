//! RDMAP streams on a connection: where [`crate::rdmap`] meets the DDP stream it runs on.
//!
//! A session opened with [`Connection::initiate_rdmap`] or [`Connection::accept_rdmap`] is an
//! RDMAP stream: its segments pass RDMAP's checks before placement, its queues 1 and 2 are
//! RDMAP's own (inline buffers, RFC 5040 §4.2), its delivered messages mean what RDMAP says
//! (a Read Request is answered here, on the core that owns the association, from the
//! registered region without a copy), and its first receive error goes to the peer as an
//! RDMAP Terminate before the DDP Stream Session ends (RFC 5043 §11.3).

use ddpdk_dataplane::ddp::{self, HeaderCopy, RxError, Target, TxError, Ulp};
use ddpdk_dataplane::mem::{Access, Pd, Stag, StagTable, StreamId};
use ddpdk_dataplane::wire::ddp::{DdpError, SegmentRepr};
use ddpdk_dataplane::wire::rdmap::{
    AtomicRequest, AtomicResponse, Control, Opcode, RdmapError, ReadRequest, QN_ATOMIC_RESPONSE,
    QN_READ_REQUEST, QN_SEND, QN_TERMINATE,
};

use crate::memory::{Place, RegionId, RegionTable};
use crate::rdmap::{
    encode_private_data, rsvd_ulp, terminate_payload, AtomicServe, OutboundAtomic, OutboundRead,
    Placed, RdmaLimits, RdmapStream, ReadResponse, Stags, Upcall, ATOMIC_WORD,
};
use crate::session::LocalError;

use super::api::*;
use super::route::*;
use super::send::*;
use super::stream::*;
use super::*;

/// A request of the peer's to answer: both kinds share queue 1 and IRD (RFC 7306 §5.2), and
/// their responses go out in the order the requests were delivered (§5.2.2 item 8, §7).
pub(super) enum Serve {
    Read(ReadResponse),
    Atomic(AtomicServe),
}

/// The DDP stream's ULP when it is an RDMAP stream: RDMAP's checks, and what its delivered
/// messages mean. What has to wait until DDP is done with the segment (responses to queue, an
/// error found after delivery) is kept here.
pub(super) struct RdmapUlp<'a> {
    pub(super) stream: u16,
    pub(super) rdmap: &'a mut RdmapStream,
    pub(super) posted: &'a mut [std::collections::VecDeque<u64>],
    pub(super) grace: &'a mut Option<u8>,
    pub(super) out: &'a mut Sink,
    pub(super) stags: &'a StagTable,
    /// Where an Atomic Response's value is written.
    pub(super) regions: &'a RegionTable,
    pub(super) sid: StreamId,
    pub(super) pd: Pd,
    /// Read and Atomic Requests found good, to answer in their order.
    pub(super) serve: Vec<Serve>,
    /// An error RDMAP found in a delivered message: the stream fails with it.
    pub(super) fault: Option<(RxError, HeaderCopy, usize, Option<ReadRequest>)>,
    /// The peer's Terminate was delivered: the stream stops here.
    pub(super) peer_terminated: bool,
}

impl<'a> RdmapUlp<'a> {
    /// RDMAP as the ULP of stream `s`'s deliveries, beside its receive path; `None` once
    /// either is gone (the session ended).
    fn of(
        stream: u16,
        s: &'a mut DdpStream,
        memory: Place<'a>,
        out: &'a mut Sink,
    ) -> Option<(&'a mut StreamRx, RdmapUlp<'a>)> {
        let DdpStream {
            rx,
            posted,
            grace,
            rdmap,
            sid,
            ..
        } = s;
        let (Some(rx_path), Some(rdmap)) = (rx.as_mut(), rdmap.as_deref_mut()) else {
            return None;
        };
        let pd = rx_path.pd();
        let ulp = RdmapUlp {
            stream,
            rdmap,
            posted,
            grace,
            out,
            stags: memory.stags,
            regions: memory.regions,
            sid: *sid,
            pd,
            serve: Vec::new(),
            fault: None,
            peer_terminated: false,
        };
        Some((rx_path, ulp))
    }

    /// An Atomic Response arrived (RFC 7306 §5.2.2): the Original Remote Data Value goes into
    /// the Atomic's sink, in this machine's byte order, and the Atomic completes (§5.4 rule 7).
    /// A sink deregistered meanwhile, or invalidated by the peer (RFC 5040 §5.3), in this
    /// packet or an earlier one, takes nothing: the work request completes `LocalProtection`
    /// (the Responder performed the operation, so `Flushed`, "not carried out", would invite a
    /// ULP to post a FetchAdd again and add twice), and no Terminate is sent. Unlike a Read Response (tagged, its Data Sink STag on the wire, so a
    /// sink the peer invalidated is its Invalid STag, RFC 5041 §7.2), an Atomic Response is
    /// untagged on QN 3 and holds only the Request Identifier and the Original Remote Data
    /// Value (§5.2.2 Figure 6), and the Atomic Request names only the Responder's Remote STag
    /// (§5.2.1 Figure 4): the sink is the Requester's own word, named nowhere on the wire, and
    /// a response that echoes the oldest outstanding Request Identifier is valid as received.
    /// The peer did nothing wrong to be told of.
    fn complete_atomic(&mut self, atomic: OutboundAtomic, original: u64) {
        let out = &mut *self.out;
        let stags = Stags {
            table: self.stags,
            revoked: &out.peer_invalidated,
        };
        let written = stags
            .check_access(
                atomic.sink,
                atomic.sink_to,
                ATOMIC_WORD,
                self.sid,
                self.pd,
                Access::LOCAL_WRITE,
            )
            .ok()
            .and_then(|p| {
                let region = self.regions.region(p.region)?;
                region.place(p.offset, &original.to_ne_bytes()).ok()
            })
            .is_some();
        let status = if written {
            out.stats.atomics_completed += 1;
            Status::Success
        } else {
            out.stats.atomic_results_lost += 1;
            // In posting order, as the stream's other work: marked here, reported in turn.
            self.rdmap.fail_local(atomic.seq);
            Status::LocalProtection
        };
        let done = Done {
            wr_id: atomic.wr_id,
            signaled: atomic.signaled,
            seq: Some(atomic.seq),
        };
        report(out, Some(&mut *self.rdmap), self.stream, done, status);
        // An ORD slot is free: a waiting Read or Atomic Request may go.
        out.wake.push(self.stream);
        out.touched.stream(self.stream);
    }
}

impl Ulp for RdmapUlp<'_> {
    fn check(&mut self, segment: &SegmentRepr<'_>) -> Result<Access, RxError> {
        self.rdmap.check(segment)
    }

    fn revoked(&self) -> &[Stag] {
        &self.out.peer_invalidated
    }

    fn indicate(&mut self, ind: ddp::Indication) {
        let (stream, out) = (self.stream, &mut *self.out);
        match ind {
            ddp::Indication::Delivered {
                message,
                inline,
                buffer,
            } => {
                // After a fault nothing the same segment completed reaches the ULP. Nor does
                // anything delivered behind the peer's Terminate, its last message on the
                // stream (RFC 5040 §5.4): a message with a later DDP-SSN that arrived first is
                // delivered in the same turn, after it, and must not be acted on, an Atomic
                // performed (RFC 7306 §5.2.1) or a Read served above all.
                if self.fault.is_some() || self.peer_terminated {
                    return;
                }
                let inline = inline.as_ref().map(|m| m.as_bytes());
                let stags = Stags {
                    table: self.stags,
                    revoked: &out.peer_invalidated,
                };
                match self
                    .rdmap
                    .on_delivered(&message, inline, stags, self.sid, self.pd)
                {
                    Upcall::Send { invalidate, opcode } => {
                        indicate(stream, self.posted, self.grace, out, ind);
                        // RFC 7306 §6.2: the 8 bytes are the buffer's first; read now, while
                        // they are this message's (a later one may be placed over them before
                        // the ULP looks).
                        if matches!(opcode, Opcode::ImmediateData | Opcode::ImmediateDataSe) {
                            let mut data = [0u8; 8];
                            let read = buffer.and_then(|b| {
                                let r = Regions::region(self.regions, b.memory.region)?;
                                r.read(b.memory.offset, &mut data).ok()
                            });
                            if let Some(Indication::Received { imm_data, .. }) =
                                out.indications.back_mut()
                            {
                                *imm_data = read.map(|()| data);
                            }
                        }
                        if let Some(stag) = invalidate {
                            // RFC 5040 §5.3: invalid for the rest of this packet now, in the
                            // core's table before its next packet, on every core before the
                            // ULP sees the completion (the owner of the tables takes it from
                            // here: `Connection::take_peer_invalidated`).
                            out.peer_invalidated.push(stag);
                            out.stats.stags_invalidated_by_peer += 1;
                            self.rdmap.peer_invalidated(stag);
                            if let Some(Indication::Received { invalidated, .. }) =
                                out.indications.back_mut()
                            {
                                *invalidated = Some(stag);
                            }
                        }
                    }
                    Upcall::Write => {}
                    Upcall::Serve(response) => self.serve.push(Serve::Read(response)),
                    Upcall::Atomic(atomic) => self.serve.push(Serve::Atomic(atomic)),
                    Upcall::AtomicDone { atomic, original } => {
                        self.complete_atomic(atomic, original);
                    }
                    Upcall::ReadDone(read) => {
                        out.stats.reads_completed += 1;
                        let done = Done {
                            wr_id: read.wr_id,
                            signaled: read.signaled,
                            seq: Some(read.seq),
                        };
                        report(out, Some(&mut *self.rdmap), stream, done, Status::Success);
                        // An ORD slot is free: a waiting Read Request may go.
                        out.wake.push(stream);
                        out.touched.stream(stream);
                    }
                    Upcall::PeerTerminate(error) => {
                        out.stats.rdmap_terminates_received += 1;
                        out.indications
                            .push_back(Indication::RdmapTerminate { stream, error });
                        self.rdmap.set_peer_terminated();
                        self.peer_terminated = true;
                        // RFC 5040 §5.4: the Terminate is the last message the peer sends
                        // on the stream, and DDP delivers in DDP-SSN order (RFC 5043 §10):
                        // no response to a Read or Atomic still outstanding can follow. They
                        // end now, flushed, not when (if ever) the session ends.
                        let reads: Vec<_> = self.rdmap.take_outstanding().collect();
                        let atomics: Vec<_> = self.rdmap.take_outstanding_atomics().collect();
                        let flushed = reads
                            .iter()
                            .map(|r| (r.wr_id, r.signaled, r.seq))
                            .chain(atomics.iter().map(|a| (a.wr_id, a.signaled, a.seq)));
                        for (wr_id, signaled, seq) in flushed {
                            out.stats.flushed_sends += 1;
                            let done = Done {
                                wr_id,
                                signaled,
                                seq: Some(seq),
                            };
                            report(out, Some(&mut *self.rdmap), stream, done, Status::Flushed);
                        }
                    }
                    Upcall::Fault {
                        error,
                        header,
                        segment_len,
                        read_request,
                    } => {
                        // On a tagged message RDMAP's one unspecified Remote Operation Error
                        // is a Read Response short of its Read (`RdmapStream::on_delivered`):
                        // counted apart, for the operator, from the other 0x2/0xFF causes.
                        if matches!(message.info, ddp::MessageInfo::Tagged { .. })
                            && error == RxError::Rdmap(RdmapError::OperationUnspecified)
                        {
                            out.stats.reads_short += 1;
                        }
                        self.fault = Some((error, header, segment_len, read_request));
                    }
                }
            }
            ddp::Indication::Error {
                mut error,
                header,
                segment_len,
            } => {
                // The first error is the stream's (RFC 5040 §7, RFC 5041 §7.1): one DDP finds
                // in a message delivered after a fault of this turn (its MSN out of order,
                // say) is not reported, the fault is (`fail` puts it in DDP's place). Nor is
                // one behind the peer's Terminate, its last message: a Terminate answers no
                // Terminate (RFC 5040 §5.4). Before, the later error took the fault's place,
                // and a Terminate of ours answered the peer's.
                if self.fault.is_some() || self.peer_terminated {
                    return;
                }
                // The Read whose sink our ULP revoked under its response fails of its own
                // (`Status::LocalProtection`), not flushed as the stream's other work. Where
                // the peer invalidated that sink itself, the response is its Invalid STag.
                if let RxError::SinkRevoked { stag, to } = error {
                    match self.rdmap.read_into(Stag(stag), to) {
                        Some(r) if r.sink_invalidated_by_peer => {
                            error = RxError::Ddp(DdpError::InvalidStag);
                        }
                        Some(r) => {
                            let seq = r.seq;
                            self.rdmap.fail_local(seq);
                        }
                        None => {}
                    }
                }
                self.rdmap
                    .set_terminate(terminate_payload(error, &header, segment_len, None));
                let ind = ddp::Indication::Error {
                    error,
                    header,
                    segment_len,
                };
                indicate(stream, self.posted, self.grace, out, ind);
            }
        }
    }
}

/// One DDP Segment of an RDMAP stream (the session has passed it). `oversize` is the
/// adaptation's verdict (RFC 5043 §9); `zero_copy`: Read Responses may be sent from the
/// regions by reference.
pub(super) fn receive(
    stream: u16,
    s: &mut DdpStream,
    chunk: &[u8],
    oversize: Option<RxError>,
    memory: Place<'_>,
    out: &mut Sink,
    zero_copy: bool,
) {
    let invalidated = out.peer_invalidated.len();
    let Some((rx_path, mut ulp)) = RdmapUlp::of(stream, s, memory, &mut *out) else {
        out.stats.after_session_end += 1;
        return;
    };
    let dropped = rx_path.stats().dropped_after_error;
    match oversize {
        Some(error) => rx_path.refuse(chunk, error, &mut |i| ulp.indicate(i)),
        None => {
            let before = rx_path.stats().placed_bytes;
            rx_path.on_segment(chunk, memory.stags, memory.regions, &mut ulp);
            ulp.out.stats.placed_bytes += rx_path.stats().placed_bytes - before;
        }
    }
    let RdmapUlp {
        serve,
        fault,
        peer_terminated,
        ..
    } = ulp;
    // As on a DDP stream (route.rs): what the receive path dropped behind the stream's first
    // error is counted with what comes after its end.
    let dropped = rx_path.stats().dropped_after_error - dropped;
    if peer_terminated {
        rx_path.stop(RxError::PeerTerminated);
    }
    out.stats.after_session_end += dropped;
    note_waiting_sinks_invalidated(s, &out.peer_invalidated[invalidated..]);
    answer(stream, s, out, memory, zero_copy, serve, fault);
    hold_for_terminate(stream, s, out);
    if peer_terminated {
        end_at_peers_terminate(stream, s, out);
    }
}

/// The peer invalidated `stags` (RFC 5040 §5.3): a Read still waiting for ORD whose Data Sink
/// is one of them is noted as an outstanding one is ([`RdmapStream::peer_invalidated`]), so
/// the response the peer then sends into it is the peer's Invalid STag, not blamed on our
/// own revocation (`LocalProtection`, a Local Catastrophic Terminate of ours).
fn note_waiting_sinks_invalidated(s: &mut DdpStream, stags: &[Stag]) {
    if stags.is_empty() {
        return;
    }
    for p in s.sends.iter_mut() {
        if let Origin::Read(read) = &mut p.origin {
            if stags.contains(&read.sink) {
                read.sink_invalidated_by_peer = true;
            }
        }
    }
}

/// RFC 5040 §5.4, §7: the peer's Terminate ends the RDMAP Stream, whether or not the peer
/// ends the DDP session after it (RFC 5043 §6.2 leaves that to either side). What is queued
/// of ours goes no further (a Write behind a Read waiting for ORD, a Read Response still
/// reading its Data Source, whose revocation would no longer stop it) and completes Flushed,
/// as do the posted receives (nothing more is placed): a ULP draining its queue pair is not
/// left waiting for a session end the peer may never send. Work SCTP already has completes
/// when SCTP settles it, as before (RFC 5040 §5.1).
fn end_at_peers_terminate(stream: u16, s: &mut DdpStream, out: &mut Sink) {
    flush_sends(stream, s, out);
    flush_posted(stream, s, out);
    out.touched.stream(stream);
}

/// A fault found in what was just received owes the peer RDMAP's Terminate, which
/// `end_faulted` queues once the packet is handled: the session's own Terminate, should the
/// session end before (the peer's session Terminate later in the same packet, say), waits
/// for it (RFC 5043 §6.2, §11.3; `Session::hold_final`).
fn hold_for_terminate(stream: u16, s: &mut DdpStream, out: &Sink) {
    if out.faulted.iter().any(|&(f, _)| f == stream) {
        s.session.hold_final();
    }
}

/// The messages a session control message at DDP-SSN `ssn` lets DDP deliver on an RDMAP
/// stream (the active side's first segments wait for the peer's Accept, RFC 5043 §6): through
/// RDMAP, as a segment's deliveries go ([`receive`]). They went to the ULP as plain DDP
/// messages: a Send with Invalidate left its STag valid, a Read Request was never served, a
/// Read Response or Terminate never taken (an independent review).
pub(super) fn release(
    stream: u16,
    s: &mut DdpStream,
    ssn: u16,
    memory: Place<'_>,
    out: &mut Sink,
    zero_copy: bool,
) {
    let invalidated = out.peer_invalidated.len();
    let Some((rx_path, mut ulp)) = RdmapUlp::of(stream, s, memory, &mut *out) else {
        return;
    };
    let _ = rx_path.on_control(ssn, &mut |i| ulp.indicate(i));
    let RdmapUlp {
        serve,
        fault,
        peer_terminated,
        ..
    } = ulp;
    if peer_terminated {
        rx_path.stop(RxError::PeerTerminated);
    }
    note_waiting_sinks_invalidated(s, &out.peer_invalidated[invalidated..]);
    answer(stream, s, out, memory, zero_copy, serve, fault);
    hold_for_terminate(stream, s, out);
    if peer_terminated {
        end_at_peers_terminate(stream, s, out);
    }
}

/// What RDMAP found in the messages DDP just delivered: the stream fails with a fault, or the
/// requests found good are answered, in their order.
fn answer(
    stream: u16,
    s: &mut DdpStream,
    out: &mut Sink,
    memory: Place<'_>,
    zero_copy: bool,
    serve: Vec<Serve>,
    fault: Option<(RxError, HeaderCopy, usize, Option<ReadRequest>)>,
) {
    if let Some((error, header, segment_len, read_request)) = fault {
        fail(
            stream,
            s,
            out,
            (error, header, segment_len, read_request),
            serve.len(),
            true,
        );
        return;
    }
    if out.answers_closed {
        out.stats.after_session_end += serve.len() as u64;
        return;
    }
    let mut serve = serve.into_iter();
    while let Some(request) = serve.next() {
        match request {
            Serve::Read(response) => {
                if response.source.is_some() && !zero_copy {
                    // Without its region table (`Connection::use_regions`) this connection
                    // cannot read the bytes as the response leaves. Said, not swallowed: the
                    // requester would wait for the response forever.
                    out.stats.reads_unservable += 1;
                    let error = RxError::Rdmap(RdmapError::LocalCatastrophic);
                    // RFC 5040 §4.8: the failure is this Read Request's, so the requester
                    // is told which, as a refusal on arrival would: its segment (M, D) and
                    // its Read Request header (R).
                    let request = (
                        error,
                        response.request_header,
                        response.request_segment_len,
                        Some(response.request()),
                    );
                    fail(stream, s, out, request, 1 + serve.len(), false);
                    return;
                }
                // Counted once queued (as an Atomic is once performed): a request behind a
                // fault of the same delivery is never answered, nor one unservable.
                out.stats.reads_served += 1;
                queue_response(stream, s, response, out)
            }
            Serve::Atomic(atomic) => match execute_atomic(&atomic, memory) {
                Some(original) => {
                    out.stats.atomics_served += 1;
                    queue_atomic_response(stream, s, atomic.request, original, out);
                }
                None => {
                    // The checked target is not in this core's regions (or not aligned in
                    // memory): a fault of ours, not the peer's. Nothing was modified.
                    out.stats.atomics_unservable += 1;
                    let error = RxError::Rdmap(RdmapError::LocalCatastrophic);
                    // RFC 5040 §4.8: the requester learns which request failed from its
                    // segment (M, D); RFC 7306 §8.1 item 2 leaves the RDMA header out (R).
                    let request = (error, atomic.header, atomic.segment_len, None);
                    fail(stream, s, out, request, 1 + serve.len(), false);
                    return;
                }
            },
        }
    }
}

/// RDMAP found an error in a delivered message: the stream fails with it (RFC 5040 §7), and
/// the `unanswered` requests accepted before it hand back their IRD slots unanswered. `fault`:
/// the error is a delivered message's own, found as the ULP took it, before any error DDP
/// found later in the same delivery.
fn fail(
    stream: u16,
    s: &mut DdpStream,
    out: &mut Sink,
    (error, header, segment_len, read_request): (RxError, HeaderCopy, usize, Option<ReadRequest>),
    unanswered: usize,
    fault: bool,
) {
    let DdpStream {
        rx,
        posted,
        grace,
        rdmap,
        ..
    } = s;
    if let Some(rx_path) = rx.as_mut() {
        let mut ulp = |i| indicate(stream, posted, grace, out, i);
        if fault {
            // DDP may have stopped the same delivery at a later message's error, which the
            // ULP did not report (`RdmapUlp::indicate`): this earlier one is the stream's.
            rx_path.fail_delivered_first(error, header.as_bytes(), segment_len, &mut ulp);
        } else {
            rx_path.fail_delivered(error, header.as_bytes(), segment_len, &mut ulp);
        }
    }
    if let Some(rdmap) = rdmap.as_deref_mut() {
        rdmap.set_terminate(terminate_payload(error, &header, segment_len, read_request));
        for _ in 0..unanswered {
            rdmap.response_sent();
        }
    }
}

/// RFC 7306 §5.1: performs the Atomic on its target word, atomically with respect to every
/// other atomic on this endpoint's memory from any core (§5.3). The original value, or `None`
/// when the word cannot be reached (nothing was read or written).
fn execute_atomic(atomic: &AtomicServe, memory: Place<'_>) -> Option<u64> {
    let region = memory.regions.region(atomic.target.region)?;
    let request = atomic.request;
    region
        .fetch_update_u64(atomic.target.offset, |original| {
            request.result(original).filter(|&new| new != original)
        })
        .ok()
}

/// Queues the Read Response to `response` (RFC 5040 §5.2): a tagged message into the
/// requester's Data Sink, its bytes read from the registered region when it leaves (by
/// reference where the port chains buffers).
fn queue_response(stream: u16, s: &mut DdpStream, response: ReadResponse, out: &mut Sink) {
    let data = match response.source {
        Some(src) => Payload::Region {
            region: RegionId(src.region),
            offset: src.offset,
            len: response.len,
        },
        None => Payload::Bytes(Vec::new()),
    };
    let rsvd_ulp = Control::new(Opcode::ReadResponse).tagged_rsvd_ulp();
    let req = SendRequest {
        wr_id: 0,
        stream,
        kind: SendKind::Tagged {
            stag: response.sink,
            to: response.sink_to,
            rsvd_ulp,
        },
        data,
        signaled: false,
    };
    let target = Target::Tagged {
        stag: response.sink.0,
        to: response.sink_to,
        rsvd_ulp,
    };
    // A response with bytes keeps its request: its source is checked again while it waits.
    let origin = Origin::Response(response.source.map(|_| response.answered()));
    queue_rdmap_response(stream, s, req, target, origin, out);
}

/// Queues the Atomic Response to `request` (RFC 7306 §5.2.2): untagged on queue 3, echoing
/// its Request Identifier, with the value the word held before.
fn queue_atomic_response(
    stream: u16,
    s: &mut DdpStream,
    request: AtomicRequest,
    original: u64,
    out: &mut Sink,
) {
    let rsvd_ulp = rsvd_ulp(Opcode::AtomicResponse, None);
    let response = AtomicResponse {
        request_id: request.request_id,
        original,
    };
    let req = SendRequest {
        wr_id: 0,
        stream,
        kind: SendKind::Untagged {
            qn: QN_ATOMIC_RESPONSE,
            rsvd_ulp,
        },
        data: Payload::Bytes(response.to_bytes().to_vec()),
        signaled: false,
    };
    let target = Target::Untagged {
        qn: QN_ATOMIC_RESPONSE,
        msn: s.take_msn(QN_ATOMIC_RESPONSE),
        rsvd_ulp,
    };
    queue_rdmap_response(stream, s, req, target, Origin::Response(None), out);
}

/// Puts a response to the peer's request on the stream's send queue.
fn queue_rdmap_response(
    stream: u16,
    s: &mut DdpStream,
    req: SendRequest,
    target: Target,
    origin: Origin,
    out: &mut Sink,
) {
    // Responses go ahead of the ULP's queued work (as an RNIC serves its inbound read queue
    // apart from its send queue), in the order of their requests, but never into the middle
    // of a message already partly sent. Behind the ULP's work they could wait forever: a
    // Read Request held back by ORD waits for the peer's response, and the peer's response
    // may be waiting, just the same, for ours.
    let mut at = usize::from(s.sends.front().is_some_and(|p| p.offset > 0));
    while s
        .sends
        .get(at)
        .is_some_and(|p| matches!(p.origin, Origin::Response(_)))
    {
        at += 1;
    }
    s.sends.insert(
        at,
        PendingSend {
            req,
            target,
            offset: 0,
            origin,
            seq: None,
        },
    );
    out.queued_sends += 1;
    out.wake.push(stream);
    out.touched.stream(stream);
}

impl Connection {
    /// Starts an RDMAP stream on `stream` as the active side (RFC 5043 §6 Initiate): its
    /// Private Data carries `limits` (RDMAP's format, [`crate::rdmap`]) and then the ULP's
    /// own `private_data` (at most [`crate::rdmap::MAX_ULP_PRIVATE_DATA`] bytes). IRD is
    /// capped at the queue depth of the connection (`ConnConfig::recv_depth`).
    pub fn initiate_rdmap(
        &mut self,
        stream: u16,
        pd: Pd,
        limits: RdmaLimits,
        private_data: &[u8],
    ) -> Result<(), PostError> {
        let limits = self.rdmap_limits(limits)?;
        let data = encode_private_data(limits, private_data)
            .map_err(|_| PostError::Session(LocalError::PrivateDataTooLong))?;
        self.initiate(stream, pd, &data)?;
        self.open_rdmap(stream, limits, None);
        Ok(())
    }

    /// Accepts the pending Initiate on `stream` as an RDMAP stream: one must be pending
    /// ([`LocalError::NotPending`] otherwise: nothing is sent, and a later Initiate can still be
    /// accepted), and it must have carried RDMAP's parameters ([`PostError::PeerNotRdmap`]
    /// otherwise; reject it then).
    pub fn accept_rdmap(
        &mut self,
        stream: u16,
        pd: Pd,
        limits: RdmaLimits,
        private_data: &[u8],
    ) -> Result<(), PostError> {
        self.check_stream(stream)?;
        let s = &self.streams[usize::from(stream)];
        // An Accept answers the peer's Initiate (RFC 5043 §6.3): without one pending there is
        // no peer to judge, and no Initiate to reject (`PeerNotRdmap` would have the ULP send
        // a Reject for one that never came). The parameters an earlier session's Initiate
        // brought stay behind it, so its state is asked first.
        if s.session.state() != State::InitiateReceived {
            return Err(PostError::Session(LocalError::NotPending));
        }
        let peer = s.peer_limits.ok_or(PostError::PeerNotRdmap)?;
        let limits = self.rdmap_limits(limits)?;
        let data = encode_private_data(limits, private_data)
            .map_err(|_| PostError::Session(LocalError::PrivateDataTooLong))?;
        self.accept(stream, pd, &data)?;
        self.open_rdmap(stream, limits, Some(peer));
        Ok(())
    }

    /// The RDMA Read state of `stream`, if it is an RDMAP stream.
    pub fn rdma_status(&self, stream: u16) -> Option<RdmaStatus> {
        let r = self.streams.get(usize::from(stream))?.rdmap.as_deref()?;
        Some(RdmaStatus {
            limits: r.limits(),
            ord: r.ord(),
            outstanding_reads: r.outstanding_reads(),
            outstanding_atomics: r.outstanding_atomics(),
            serving: r.serving(),
        })
    }

    /// RFC 4296 §2.2's RDMA operations (RFC 5040 §5): an RDMA Write, a Send of one of its
    /// four kinds, or an RDMA Read, on an RDMAP stream. A local STag of a Write or Send is
    /// resolved against `stags` ([`Connection::resolve_local`]); a Read's Data Sink must be a
    /// registration of the stream's protection domain with local write that holds the range.
    /// Reads beyond ORD wait, in order with what is posted after them.
    pub fn post_rdma(&mut self, req: RdmaRequest, stags: &StagTable) -> Result<(), PostError> {
        self.check_stream(req.stream)?;
        if req.op == RdmaOp::Mark {
            self.mark(req.stream, req.wr_id);
            return Ok(());
        }
        let s = &self.streams[usize::from(req.stream)];
        let Some(r) = s.rdmap.as_deref() else {
            return Err(PostError::NotRdmap);
        };
        // A session that is over says so (not "not accepted yet"); so does a stream the peer's
        // Terminate ended (RFC 5040 §5.4), before its session has.
        if matches!(s.session.state(), State::Terminated(_)) || r.peer_terminated() {
            return Err(PostError::Session(LocalError::Terminated));
        }
        // Reads and Atomics are bounded by the peer's IRD (RFC 5040 §6.1, RFC 7306 §5.2),
        // which its Accept brings: until then none is taken (with an IRD of 0 it would wait
        // forever), and with an ORD of 0 none ever is.
        if matches!(req.op, RdmaOp::Read { .. } | RdmaOp::Atomic { .. }) {
            if !r.peer_limits_known() {
                return Err(PostError::Session(LocalError::NotEstablished));
            }
            if r.ord() == 0 {
                return Err(PostError::NoOrd);
            }
        }
        let RdmaRequest {
            wr_id,
            stream,
            op,
            data,
            signaled,
        } = req;
        let (kind, data, origin) = match op {
            RdmaOp::Write { stag, to } => (
                SendKind::Tagged {
                    stag,
                    to,
                    rsvd_ulp: Control::new(Opcode::Write).tagged_rsvd_ulp(),
                },
                self.resolve_local(stream, data, stags)?,
                Origin::Ulp,
            ),
            RdmaOp::Send {
                solicited,
                invalidate,
            } => {
                let opcode = match (solicited, invalidate.is_some()) {
                    (false, false) => Opcode::Send,
                    (false, true) => Opcode::SendInvalidate,
                    (true, false) => Opcode::SendSe,
                    (true, true) => Opcode::SendSeInvalidate,
                };
                (
                    SendKind::Untagged {
                        qn: 0,
                        rsvd_ulp: rsvd_ulp(opcode, invalidate),
                    },
                    self.resolve_local(stream, data, stags)?,
                    Origin::Ulp,
                )
            }
            RdmaOp::Read {
                source,
                source_to,
                sink,
                sink_to,
                len,
            } => {
                let (sid, pd) = (s.sid, s.rx.as_ref().map(|rx| rx.pd()));
                let pd = pd.ok_or(PostError::Session(LocalError::NotEstablished))?;
                stags
                    .check_access(sink, sink_to, len as usize, sid, pd, Access::LOCAL_WRITE)
                    .map_err(|_| PostError::BadSink)?;
                // RFC 5041 §7.1 check 5, knowable here: a Data Source range whose TO + size
                // passes 2^64 is refused by the responder (RFC 5040 §4.8 TO Wrap), which then
                // ends the whole stream. Refused at post instead, as an RDMA Write's sink is
                // (`Connection::queue_send`), nothing sent.
                source_to
                    .checked_add(u64::from(len))
                    .ok_or(PostError::Tx(TxError::ToWrap))?;
                let request = ReadRequest {
                    sink_stag: sink.0,
                    sink_to,
                    size: len,
                    source_stag: source.0,
                    source_to,
                };
                (
                    SendKind::Untagged {
                        qn: QN_READ_REQUEST,
                        rsvd_ulp: rsvd_ulp(Opcode::ReadRequest, None),
                    },
                    Payload::Bytes(request.to_bytes().to_vec()),
                    Origin::Read(OutboundRead {
                        wr_id,
                        signaled,
                        sink,
                        sink_to,
                        len,
                        seq: 0,
                        placed: Placed::default(),
                        shared_sink: false,
                        sink_invalidated_by_peer: false,
                    }),
                )
            }
            RdmaOp::Atomic {
                op,
                stag,
                to,
                sink,
                sink_to,
            } => {
                // The Atomic Response arrives on queue 3 (RFC 7306 §5.2.2 item 5).
                if self.cfg.queues <= QN_ATOMIC_RESPONSE {
                    return Err(PostError::InvalidQn);
                }
                // Alignment is the peer's to check: §5.2.1 lets the Tagged Offset start
                // anywhere as long as the address it names is 64-bit aligned, and only the
                // peer knows the address.
                let (sid, pd) = (s.sid, s.rx.as_ref().map(|rx| rx.pd()));
                let pd = pd.ok_or(PostError::Session(LocalError::NotEstablished))?;
                stags
                    .check_access(sink, sink_to, ATOMIC_WORD, sid, pd, Access::LOCAL_WRITE)
                    .map_err(|_| PostError::BadSink)?;
                let request_id = self.streams[usize::from(stream)]
                    .rdmap
                    .as_deref_mut()
                    .map_or(0, RdmapStream::next_request_id);
                let request = op.request(request_id, stag, to);
                (
                    SendKind::Untagged {
                        qn: QN_READ_REQUEST,
                        rsvd_ulp: rsvd_ulp(Opcode::AtomicRequest, None),
                    },
                    Payload::Bytes(request.to_bytes().to_vec()),
                    Origin::Atomic(OutboundAtomic {
                        wr_id,
                        signaled,
                        sink,
                        sink_to,
                        request_id,
                        seq: 0,
                    }),
                )
            }
            // Taken before the checks above, which a mark is not held to.
            RdmaOp::Mark => return Ok(()),
            RdmaOp::ImmediateData { data, solicited } => {
                let opcode = if solicited {
                    Opcode::ImmediateDataSe
                } else {
                    Opcode::ImmediateData
                };
                (
                    SendKind::Untagged {
                        qn: QN_SEND,
                        rsvd_ulp: rsvd_ulp(opcode, None),
                    },
                    Payload::Bytes(data.to_vec()),
                    Origin::Ulp,
                )
            }
        };
        self.queue_send(
            SendRequest {
                wr_id,
                stream,
                kind,
                data,
                signaled,
            },
            origin,
        )
    }

    /// [`RdmaOp::Mark`]: a completion in the stream's completion order behind everything
    /// posted before it, the work of sessions the stream had before too ([`Sink::retired`]).
    /// Taken in any state of the session: a mark's purpose is to learn that earlier work is
    /// over, which a stream that ended has reported already (its flush) unless some of it
    /// waits for its segments to settle, so with nothing unreported it completes at once. It
    /// completes Success even behind flushed work: it did nothing that could fail
    /// ([`RdmapStream::mark`]).
    fn mark(&mut self, stream: u16, wr_id: u64) {
        let s = &mut self.streams[usize::from(stream)];
        // The latest retired order: it follows the stream's earlier ones.
        let retired = self.sink.retired.iter().rposition(|r| r.stream == stream);
        let current = s
            .rdmap
            .as_deref_mut()
            .filter(|r| retired.is_some() || r.unreported() > 0);
        match (current, retired) {
            (Some(r), _) => {
                r.mark(wr_id);
            }
            // Renewed, no RDMAP session yet: the mark follows the last session's work.
            (None, Some(k)) => {
                self.sink.retired[k].rdmap.mark(wr_id);
            }
            (None, None) => {
                let done = Done {
                    wr_id,
                    signaled: true,
                    seq: None,
                };
                return report(&mut self.sink, None, stream, done, Status::Success);
            }
        }
        report_in_order(&mut self.streams, &mut self.sink, stream);
    }

    /// Limits this connection can honour (`ConnConfig::rdmap_limits`).
    fn rdmap_limits(&self, limits: RdmaLimits) -> Result<RdmaLimits, PostError> {
        // RDMAP needs queues 0, 1 and 2 (RFC 5040 §4.2).
        if self.cfg.queues <= QN_TERMINATE {
            return Err(PostError::InvalidQn);
        }
        Ok(self.cfg.rdmap_limits(limits))
    }

    /// Makes the freshly opened session on `stream` an RDMAP stream: RDMAP's state, and its
    /// queues 1 (IRD Read and Atomic Requests), 2 (one Terminate) and, where configured, 3
    /// (ORD Atomic Responses) filled from the stream's own memory.
    fn open_rdmap(&mut self, stream: u16, limits: RdmaLimits, peer: Option<RdmaLimits>) {
        let s = &mut self.streams[usize::from(stream)];
        let mut r = RdmapStream::new(limits);
        if let Some(peer) = peer {
            r.set_peer_limits(peer);
        }
        s.rdmap = Some(Box::new(r));
        // RFC 5043 §11.3: a stream the session machine ends for a chunk that fits no
        // pattern (§6.1, §10) reports it in RDMAP's Terminate first, as any other error.
        s.session.set_terminate_follows_ulp(true);
        if let Some(rx) = s.rx.as_mut() {
            // Fresh queues of the configured depth, those the stream has (RDMAP needs 3; RFC
            // 7306 §5.2.2 item 5's 4th, room for an Atomic Response per Atomic within ORD,
            // only where configured): it cannot fail but for want of memory.
            let queues: Vec<(u32, usize)> = [
                (QN_READ_REQUEST, usize::from(limits.ird.max(1))),
                (QN_TERMINATE, 1),
                (QN_ATOMIC_RESPONSE, usize::from(limits.ord.max(1))),
            ]
            .into_iter()
            .filter(|&(qn, _)| rx.has_queue(qn))
            .collect();
            let _ = rx.set_inline_queues(&queues);
        }
    }

    /// The first receive error of an RDMAP stream: what was queued is flushed, the Terminate
    /// that reports the error goes to the peer (RFC 5040 §5.4, §4.8; untagged on QN 2) as the
    /// one further message DDP allows (RFC 5041 §7.1), and once it has gone to SCTP the DDP
    /// Stream Session is terminated.
    pub(super) fn send_rdmap_terminate(&mut self, stream: u16, error: RxError) {
        let Some(s) = self.streams.get_mut(usize::from(stream)) else {
            return;
        };
        // RFC 5040 §5.4: a Terminate answers no Terminate. After the peer's, an error of ours
        // (a chunk of its the session refuses) ends the session with the session's own.
        if s.rdmap.as_deref().is_some_and(|r| r.peer_terminated()) {
            s.session.release_final();
            if s.session.terminate_for_error(error).is_ok() {
                self.sink.stats.sessions_faulted += 1;
            }
            self.sink.touched.stream(stream);
            return;
        }
        let Some(r) = s.rdmap.as_deref_mut() else {
            return;
        };
        // One a stream, for its first error (RFC 5040 §7): a later refusal (a duplicate
        // behind it, say) neither queues another nor lets the session's go ahead of it.
        if r.start_terminate() {
            return;
        }
        let payload = r
            .take_terminate()
            .unwrap_or_else(|| terminate_payload(error, &HeaderCopy::from_bytes(&[]), 0, None));
        flush_sends(stream, s, &mut self.sink);
        // The session's Terminate, if the session ends meanwhile, follows this one (RFC 5043
        // §6.2): held until it has gone.
        s.session.hold_final();
        let rsvd_ulp = rsvd_ulp(Opcode::Terminate, None);
        let req = SendRequest {
            wr_id: 0,
            stream,
            kind: SendKind::Untagged {
                qn: QN_TERMINATE,
                rsvd_ulp,
            },
            data: Payload::Bytes(payload),
            signaled: false,
        };
        if self.queue_send(req, Origin::Terminate).is_err() {
            // The session cannot carry it (its last message is out already): end it all the
            // same.
            let s = &mut self.streams[usize::from(stream)];
            s.session.release_final();
            if s.session.terminate_for_error(error).is_ok() {
                self.sink.stats.sessions_faulted += 1;
            }
        } else {
            self.sink.stats.sessions_faulted += 1;
        }
        self.sink.touched.stream(stream);
    }

    /// RFC 5041 §8.3.1 item 5: the ULP may revoke remote access to its memory at any time,
    /// and a Read Response reads its Data Source as its segments leave (zero copy). Called
    /// when the STag table changed (a deregistration, an invalidation): a response still
    /// waiting to leave whose Data Source STag no longer grants remote read of its remaining
    /// bytes, in the same memory, sends nothing more. Its stream fails with what a Read Request
    /// naming the STag now would get, Invalid STag (RFC 5040 §4.8, 0x1/0x00, the request
    /// copied), as siw fails a response whose source no longer checks; the requester's Read
    /// completes in error, never Success over bytes read after the revocation. Segments
    /// already with SCTP go as they are, their bytes copied in from the region before the
    /// core acknowledged the revocation ([`Connection::materialize_region`]). A stream
    /// whose session is away is checked when it returns, before anything of it is sent; one
    /// that failed already sends no more responses. Returns the responses stopped.
    pub fn recheck_read_sources(&mut self, stags: &StagTable) -> usize {
        let mut stopped = 0;
        for stream in 0..self.streams.len() {
            let s = &self.streams[stream];
            if s.rdmap.is_none() || s.lent.is_some() {
                continue;
            }
            let Some(rx) = s.rx.as_ref().filter(|rx| rx.failed().is_none()) else {
                continue;
            };
            let pd = rx.pd();
            let revoked = s.sends.iter().find_map(|p| {
                let Origin::Response(Some(answered)) = p.origin else {
                    return None;
                };
                let request = answered.request;
                let Payload::Region {
                    region,
                    offset,
                    len,
                } = p.req.data
                else {
                    return None;
                };
                let done = u64::from(p.offset);
                let left = len.saturating_sub(p.offset) as usize;
                let readable = left == 0
                    || stags
                        .check_access(
                            Stag(request.source_stag),
                            request.source_to.wrapping_add(done),
                            left,
                            s.sid,
                            pd,
                            Access::REMOTE_READ,
                        )
                        .is_ok_and(|at| at.region == region.0 && at.offset == offset + done);
                (!readable).then_some(answered)
            });
            let Some(answered) = revoked else {
                continue;
            };
            // As an error in a delivered message: the ULP hears it, the Terminate (carrying the
            // request's DDP header and Read Request header, RFC 5040 §4.8, as a refusal on
            // arrival would) is the stream's one further message, then its session ends. The
            // stopped response hands its IRD slot back as the queue is flushed.
            let error = RxError::Rdmap(RdmapError::InvalidStag);
            self.sink.stats.reads_source_revoked += 1;
            stopped += 1;
            // `stream` indexes `streams`, whose length is a u16 stream count.
            let s = &mut self.streams[stream];
            fail(
                stream as u16,
                s,
                &mut self.sink,
                (
                    error,
                    answered.header,
                    answered.segment_len,
                    Some(answered.request),
                ),
                0,
                false,
            );
        }
        if stopped > 0 {
            // The Terminate is queued now, the stopped responses flushed with the queue: a
            // post of the ULP's in the same turn would take the stream's one further message
            // (RFC 5041 §7.1), and a pump before the session events would send more of them.
            self.session_events();
        }
        stopped
    }

    /// RDMAP streams whose peer accepted without RDMAP's parameters: no RDMAP peer, so the
    /// session ends before any RDMAP message is sent.
    pub(super) fn end_not_rdmap(&mut self) {
        for stream in std::mem::take(&mut self.sink.not_rdmap) {
            if let Some(s) = self.streams.get_mut(usize::from(stream)) {
                if s.session.terminate().is_ok() {
                    self.sink.stats.rdmap_refused += 1;
                    self.sink.touched.stream(stream);
                    self.mark_ready(stream);
                }
            }
        }
    }
}
