//! One RDMAP Stream: the RDMAP state of one DDP stream (RFC 5040 §5–§7).

use std::collections::VecDeque;

use ddpdk_dataplane::ddp::{Delivered, HeaderCopy, MessageInfo, RxError};
use ddpdk_dataplane::mem::{
    Access, Pd, Placement, RegionSlice, Registration, Stag, StagTable, StreamId, TagFault,
};
use ddpdk_dataplane::wire::ddp::{header_len, DdpError, Header, SegmentRepr, DDP_SSN_LEN};
use ddpdk_dataplane::wire::rdmap::{
    invalidate_stag, AtomicOp, AtomicRequest, AtomicResponse, Control, Opcode, RdmapError,
    ReadRequest, TerminateError, TerminatePacket, TerminateRepr, TerminatedSegment,
    IMMEDIATE_DATA_LEN, QN_ATOMIC_RESPONSE, QN_SEND, RDMAP_VERSION, TERMINATE_CONTROL_LEN,
};

use super::coverage::{Ahead, Placed};
use super::RdmaLimits;

/// A Read Request this side sent, until its Read Response is delivered (RFC 5040 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboundRead {
    /// The work request it completes.
    pub wr_id: u64,
    pub signaled: bool,
    /// Data Sink: where the response is placed, here.
    pub sink: Stag,
    pub sink_to: u64,
    pub len: u32,
    /// Its place in the stream's completion order ([`RdmapStream::begin`]).
    pub seq: u64,
    /// Which bytes of its Data Sink Read Response segments have placed: the Read completes
    /// only when they are its whole length, each byte once ([`RdmapStream::on_delivered`]).
    pub placed: Placed,
    /// Its Data Sink overlaps another outstanding Read's in the same STag: a segment there
    /// cannot be told to be this Read's or the other's (SCTP may deliver a later response's
    /// segment first), so its bytes are not held to its length ([`RdmapStream::read_sent`]).
    pub shared_sink: bool,
    /// The peer invalidated its Data Sink STag (a Send with Invalidate, RFC 5040 §5.3) while
    /// it was outstanding: a response into it is then the peer's error, not ours
    /// ([`RdmapStream::peer_invalidated`]).
    pub sink_invalidated_by_peer: bool,
}

/// A Read Request to answer (RFC 5040 §5.2): its Data Source checked and found readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadResponse {
    /// The requester's Data Sink: the Read Response's STag and TO.
    pub sink: Stag,
    pub sink_to: u64,
    /// The bytes to send, in this endpoint's regions (`None` for a zero-length Read).
    pub source: Option<RegionSlice>,
    pub len: u32,
    /// The Data Source as the request named it: the response may read it only while the STag
    /// stays valid (RFC 5041 §8.3.1 item 5: access the ULP revokes ends here too).
    pub source_stag: Stag,
    pub source_to: u64,
    /// The DDP-SSN and DDP header of the request's segment, and its DDP Segment Length: what
    /// a Terminate that stops this response later reports (RFC 5040 §4.8: M, D and R).
    pub request_header: HeaderCopy,
    pub request_segment_len: usize,
}

/// The Read Request a queued Read Response answers, as a Terminate that stops the response
/// reports it (RFC 5040 §4.8: the DDP Segment Length (M), the request's DDP header (D) and its
/// RDMA Read Request header (R), as when the request is refused on arrival).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnsweredRead {
    pub request: ReadRequest,
    pub header: HeaderCopy,
    pub segment_len: usize,
}

impl ReadResponse {
    /// The Read Request this answers (for the Terminate that reports a failure to serve it,
    /// RFC 5040 §4.8).
    pub fn request(&self) -> ReadRequest {
        ReadRequest {
            sink_stag: self.sink.0,
            sink_to: self.sink_to,
            size: self.len,
            source_stag: self.source_stag.0,
            source_to: self.source_to,
        }
    }

    /// The request with its segment's header, for a Terminate sent while this response waits.
    pub fn answered(&self) -> AnsweredRead {
        AnsweredRead {
            request: self.request(),
            header: self.request_header,
            segment_len: self.request_segment_len,
        }
    }
}

/// An Atomic Request this side sent, until its Atomic Response is delivered (RFC 7306 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboundAtomic {
    /// The work request it completes.
    pub wr_id: u64,
    pub signaled: bool,
    /// Where the Original Remote Data Value goes, here: 8 bytes of a registration with local
    /// write, written in this machine's byte order.
    pub sink: Stag,
    pub sink_to: u64,
    /// The Request Identifier the response echoes (§5.2.2).
    pub request_id: u32,
    /// Its place in the stream's completion order ([`RdmapStream::begin`]).
    pub seq: u64,
}

/// An Atomic Request to execute and answer (RFC 7306 §5.2.1): its target word checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicServe {
    pub request: AtomicRequest,
    /// The word, in this endpoint's regions: 8 bytes with remote atomic right, 64-bit aligned.
    pub target: RegionSlice,
    /// The DDP-SSN and DDP header of the request's segment, and its DDP Segment Length: what
    /// a Terminate reports if this side then fails to execute it (RFC 5040 §4.8: M and D).
    pub header: HeaderCopy,
    pub segment_len: usize,
}

/// What a delivered DDP Message means to RDMAP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upcall {
    /// A Send of one of the four kinds (RFC 5040 §5.3): it completes the posted receive as
    /// any untagged message does. The STag to invalidate, if it carries one.
    Send {
        opcode: Opcode,
        invalidate: Option<Stag>,
    },
    /// An RDMA Write, placed: the Data Sink's ULP is not told (RFC 5040 §5.1).
    Write,
    /// A Read Request whose Data Source may be read: send the response.
    Serve(ReadResponse),
    /// An Atomic Request whose target may be operated on: execute it, send the response
    /// (RFC 7306 §5.2.1 item 8), in order with the Read Responses (§5.2.2 item 8, §7).
    Atomic(AtomicServe),
    /// The Atomic Response of this Atomic arrived: the Atomic is complete (§5.4 rule 7) and
    /// `original` is the value the word held before it.
    AtomicDone {
        atomic: OutboundAtomic,
        original: u64,
    },
    /// The Read Response of this Read arrived whole: the Read is complete (§5.2).
    ReadDone(OutboundRead),
    /// The peer's Terminate (§5.4): the error it reports. Nothing more will come.
    PeerTerminate(TerminateError),
    /// RDMAP refuses the message: the stream fails with `error`, reported to the peer with
    /// `header` (DDP-SSN and DDP header) and the Read Request concerned, if any (§4.8 R).
    Fault {
        error: RxError,
        header: HeaderCopy,
        segment_len: usize,
        read_request: Option<ReadRequest>,
    },
}

/// The STags a segment is checked against: the table the core places with, less those the peer
/// invalidated in the packet being received (RFC 5040 §5.3: a Send with Invalidate takes
/// effect before the stream's next message, which may sit in the same packet, before the
/// table itself is changed between packets).
#[derive(Debug, Clone, Copy)]
pub struct Stags<'a> {
    pub table: &'a StagTable,
    pub revoked: &'a [Stag],
}

impl Stags<'_> {
    /// Whether `stag` names a live registration here.
    pub fn lookup(&self, stag: Stag) -> Option<&Registration> {
        if self.revoked.contains(&stag) {
            return None;
        }
        self.table.lookup(stag)
    }

    /// [`StagTable::check_access`], an STag revoked in this packet being invalid.
    pub fn check_access(
        &self,
        stag: Stag,
        to: u64,
        len: usize,
        stream: StreamId,
        pd: Pd,
        need: Access,
    ) -> Result<Placement, TagFault> {
        if len > 0 && self.revoked.contains(&stag) {
            return Err(TagFault::InvalidStag);
        }
        self.table.check_access(stag, to, len, stream, pd, need)
    }
}

/// The RDMAP state of one DDP stream. See the module documentation.
#[derive(Debug)]
pub struct RdmapStream {
    ours: RdmaLimits,
    /// Read Requests this side may have outstanding: our ORD, then min(ORD, the peer's IRD)
    /// once the peer's limits are known.
    ord: u16,
    /// The peer's limits arrived (its Initiate, or its Accept on the active side).
    peer_known: bool,
    /// Read Requests sent and not yet answered, oldest first (responses come in order).
    orq: VecDeque<OutboundRead>,
    /// What the Reads in `orq` have placed beyond a gap in their sinks.
    ahead: Ahead,
    /// Atomic Requests sent and not yet answered, oldest first; they share ORD with the Reads
    /// (RFC 7306 §5.2) but their responses may pass Read Responses (§7's table).
    aoq: VecDeque<OutboundAtomic>,
    next_request_id: u32,
    /// Read and Atomic Requests accepted whose responses are not yet wholly with SCTP (they
    /// share IRD, RFC 7306 §5.2).
    serving: u16,
    /// The payload of the Terminate owed for this stream's first error (§4.8).
    terminate: Option<Vec<u8>>,
    /// Our Terminate for the stream's first error was queued (and perhaps sent), or could not
    /// be: it is the stream's one (RFC 5040 §7: the first error is reported), whatever
    /// fails after it.
    terminate_started: bool,
    /// The peer's Terminate arrived ([`RdmapStream::set_peer_terminated`]).
    peer_terminated: bool,
    /// The ULP's work requests in posting order, until reported ([`RdmapStream::begin`]).
    order: VecDeque<Order>,
    next_seq: u64,
    /// The stream is over ([`RdmapStream::flush_order`]): what finishes later is flushed.
    over: bool,
}

/// One work request in the completion order.
#[derive(Debug, Clone, Copy)]
struct Order {
    seq: u64,
    wr_id: u64,
    signaled: bool,
    /// Finished: successfully or not.
    done: Option<bool>,
    /// A send of the ULP's registered memory without a copy: SCTP reads its bytes from the
    /// region as its segments leave, and again for a retransmission.
    zero_copy: bool,
    /// Failed of its own local fault ([`RdmapStream::fail_local`]), not flushed.
    local: bool,
}

impl RdmapStream {
    pub fn new(ours: RdmaLimits) -> RdmapStream {
        RdmapStream {
            ours,
            ord: ours.ord,
            peer_known: false,
            orq: VecDeque::new(),
            ahead: Ahead::default(),
            aoq: VecDeque::new(),
            next_request_id: 0,
            serving: 0,
            terminate: None,
            terminate_started: false,
            peer_terminated: false,
            order: VecDeque::new(),
            next_seq: 0,
            over: false,
        }
    }

    /// The peer's limits, from its Initiate or Accept: our outbound reads are held to its IRD.
    pub fn set_peer_limits(&mut self, peer: RdmaLimits) {
        self.ord = self.ours.ord.min(peer.ird);
        self.peer_known = true;
    }

    /// Whether the peer's limits (its IRD) are known: [`RdmapStream::ord`] is final then.
    pub fn peer_limits_known(&self) -> bool {
        self.peer_known
    }

    /// This side's limits as announced.
    pub fn limits(&self) -> RdmaLimits {
        self.ours
    }

    /// Read Requests this side may have outstanding now (min of our ORD and the peer's IRD).
    pub fn ord(&self) -> u16 {
        self.ord
    }

    /// Read Requests sent and not yet answered.
    pub fn outstanding_reads(&self) -> usize {
        self.orq.len()
    }

    /// Read and Atomic Requests being served.
    pub fn serving(&self) -> u16 {
        self.serving
    }

    /// Atomic Requests sent and not yet answered.
    pub fn outstanding_atomics(&self) -> usize {
        self.aoq.len()
    }

    /// Whether another Read Request or Atomic Request may leave now (ORD, RFC 5040 §6.1;
    /// RFC 7306 §5.2: the two share it).
    pub fn may_send_read(&self) -> bool {
        self.orq.len() + self.aoq.len() < usize::from(self.ord)
    }

    /// The Request Identifier of the next Atomic Request (§5.2.1): numbered in posting order.
    pub fn next_request_id(&mut self) -> u32 {
        let id = self.next_request_id;
        self.next_request_id = id.wrapping_add(1);
        id
    }

    /// An Atomic Request went to SCTP: its response is now awaited.
    pub fn atomic_sent(&mut self, atomic: OutboundAtomic) {
        self.aoq.push_back(atomic);
    }

    /// A Read Request went to SCTP: its response is now awaited.
    pub fn read_sent(&mut self, mut read: OutboundRead) {
        let end = |r: &OutboundRead| r.sink_to.saturating_add(u64::from(r.len));
        for other in self.orq.iter_mut().filter(|o| o.sink == read.sink) {
            // An empty range overlaps nothing: a zero-length Read inside another's sink
            // (a fence) used to switch off that Read's whole-response check (RFC 5040 §5.2).
            let empty = read.len == 0 || other.len == 0;
            if !empty && other.sink_to < end(&read) && read.sink_to < end(other) {
                other.shared_sink = true;
                read.shared_sink = true;
            }
        }
        self.orq.push_back(read);
    }

    /// The peer invalidated `stag` (RFC 5040 §5.3): the outstanding Reads whose Data Sink it
    /// is are noted, so that a response into it is reported as the peer's Invalid STag
    /// (RFC 5041 §7.2 0x1/0x00) once the STag has left the tables, as it is while the
    /// invalidation is still this packet's record, and not as our own revocation.
    pub fn peer_invalidated(&mut self, stag: Stag) {
        for r in self.orq.iter_mut().filter(|r| r.sink == stag) {
            r.sink_invalidated_by_peer = true;
        }
    }

    /// A Read Response went wholly to SCTP: its IRD slot is free.
    pub fn response_sent(&mut self) {
        self.serving = self.serving.saturating_sub(1);
    }

    /// A work request of the ULP's was posted: its number in the completion order. RDMAP
    /// completes a stream's work in the order it was posted (RFC 5040 §5.5), although a Read
    /// finishes when its response arrives and a Send or Write when SCTP acknowledges it, so a
    /// later Write may finish before an earlier Read: it is held until the Read is reported.
    /// `zero_copy`: it sends from the ULP's registered memory, which SCTP reads as it
    /// transmits ([`RdmapStream::flush_order`] holds its completion for that).
    pub fn begin(&mut self, wr_id: u64, signaled: bool, zero_copy: bool) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.order.push_back(Order {
            seq,
            wr_id,
            signaled,
            done: None,
            zero_copy,
            local: false,
        });
        seq
    }

    /// A Mark ([`crate::conn::RdmaOp::Mark`]) was posted: it takes its place in the
    /// completion order as work already finished with Success, since it does nothing of its
    /// own; it only waits for what was posted before it. Finished here rather than through
    /// [`RdmapStream::finish`], which once the stream is over would flush it.
    pub fn mark(&mut self, wr_id: u64) -> u64 {
        let seq = self.begin(wr_id, true, false);
        if let Some(o) = self.order.back_mut().filter(|o| o.seq == seq) {
            o.done = Some(true);
        }
        seq
    }

    /// The ULP's work requests posted and not yet reported.
    pub fn unreported(&self) -> usize {
        self.order.len()
    }

    /// Work request `seq` finished (`ok`: successfully; once the stream is over, flushed
    /// whatever `ok` says, as the rest of its work). Unknown numbers (reported already) are
    /// ignored.
    pub fn finish(&mut self, seq: u64, ok: bool) {
        let ok = ok && !self.over;
        let Some(first) = self.order.front().map(|o| o.seq) else {
            return;
        };
        let Some(i) = seq.checked_sub(first).and_then(|i| usize::try_from(i).ok()) else {
            return;
        };
        if let Some(o) = self.order.get_mut(i) {
            o.done.get_or_insert(ok);
        }
    }

    /// Work request `seq` (an outstanding Read) failed of a local fault: its Data Sink was
    /// revoked by our ULP under its response (RFC 5040 §4.8 Local Catastrophic). It is
    /// reported so in its turn ([`RdmapStream::pop_done`]'s `local`), not as flushed with the
    /// rest of the stream's work.
    pub fn fail_local(&mut self, seq: u64) {
        let first = self.order.front().map(|o| o.seq);
        let at = first.and_then(|f| usize::try_from(seq.checked_sub(f)?).ok());
        if let Some(o) = at.and_then(|i| self.order.get_mut(i)) {
            if o.done.is_none() {
                o.done = Some(false);
                o.local = true;
            }
        }
    }

    /// The next work request to report, in posting order: `(wr_id, signaled, ok, local)`,
    /// `local` for one that failed of its own local fault ([`RdmapStream::fail_local`]).
    pub fn pop_done(&mut self) -> Option<(u64, bool, bool, bool)> {
        let o = self.order.front()?;
        let ok = o.done?;
        let o = self.order.pop_front()?;
        Some((o.wr_id, o.signaled, ok, o.local))
    }

    /// The stream is over: every work request not finished yet fails (is flushed). Returns
    /// those that may be reported now, in order: `(wr_id, signaled, ok, local)`.
    ///
    /// A zero-copy send not finished yet is the exception: SCTP may still transmit or
    /// retransmit its segments, reading the ULP's memory, and the completion gives the ULP its
    /// buffer back (RFC 4296 §3.2; RFC 5041 §5.4). Reported at once, it let bytes the ULP wrote
    /// after it reach the peer. It finishes (flushed) when its segments settle, acknowledged or
    /// dropped with the association ([`RdmapStream::finish`], which the caller is bound to
    /// call for it), and what was posted after it waits for it (RFC 5040 §5.5's order):
    /// [`RdmapStream::pop_done`] has them then.
    pub fn flush_order(&mut self) -> impl Iterator<Item = (u64, bool, bool, bool)> + '_ {
        self.over = true;
        for o in self.order.iter_mut().filter(|o| !o.zero_copy) {
            o.done.get_or_insert(false);
        }
        std::iter::from_fn(move || self.pop_done())
    }

    /// The peer's Terminate arrived (RFC 5040 §5.4: the last message it sends on the stream):
    /// no new work is taken on the stream.
    pub fn set_peer_terminated(&mut self) {
        self.peer_terminated = true;
    }

    pub fn peer_terminated(&self) -> bool {
        self.peer_terminated
    }

    /// The Terminate payload ([`terminate_payload`]) for the stream's error; only the first
    /// error of a stream is reported.
    pub fn set_terminate(&mut self, payload: Vec<u8>) {
        self.terminate.get_or_insert(payload);
    }

    /// The Terminate payload owed, once.
    pub fn take_terminate(&mut self) -> Option<Vec<u8>> {
        self.terminate.take()
    }

    /// Marks our Terminate queued ([`RdmapStream::terminate_started`]); whether it was
    /// already.
    pub fn start_terminate(&mut self) -> bool {
        core::mem::replace(&mut self.terminate_started, true)
    }

    /// Whether our Terminate is queued or sent: no second one reports a later error.
    pub fn terminate_started(&self) -> bool {
        self.terminate_started
    }

    /// The outstanding Read whose Data Sink holds `to` of STag `stag`, oldest first: the one
    /// a Read Response segment there was let in for ([`RdmapStream::check`]).
    pub fn read_into(&self, stag: Stag, to: u64) -> Option<&OutboundRead> {
        self.orq.iter().find(|r| {
            r.sink == stag
                && to
                    .checked_sub(r.sink_to)
                    .is_some_and(|rel| rel < u64::from(r.len))
        })
    }

    /// The Reads still outstanding, for flushing when the stream ends.
    pub fn take_outstanding(&mut self) -> impl Iterator<Item = OutboundRead> + '_ {
        self.ahead.clear();
        self.orq.drain(..)
    }

    /// The Atomics still outstanding, for flushing when the stream ends.
    pub fn take_outstanding_atomics(&mut self) -> impl Iterator<Item = OutboundAtomic> + '_ {
        self.aoq.drain(..)
    }

    /// RFC 5040's checks of one segment before DDP checks its buffer and places it: the RDMAP
    /// version (§4.1, else Invalid RDMAP version 0x2/0x05), the opcode against the buffer
    /// model and queue of §4.2 (else Unexpected OpCode 0x2/0x06), and for a Read Response
    /// (§5.2) an outstanding Read whose Data Sink holds the segment: none outstanding is
    /// Unexpected OpCode; an STag no outstanding Read names is Invalid STag, and bytes outside
    /// the Read's sink range are Base or bounds (DDP's tagged numbers, RFC 5041 §7.2: the
    /// responder may write only where the Read asked, however large the registration).
    /// Tagged segments need remote write (RDMA Write) or local write (Read Response: the Data
    /// Sink is this side's own buffer, so DDP's STag check failing there is our fault,
    /// `RxError::SinkRevoked`).
    /// A tagged segment naming an STag the peer invalidated earlier in the packet passes here
    /// and fails DDP's check 1 next (`Ulp::revoked`), as one invalidated earlier does.
    ///
    /// A Read Response segment it lets through is recorded in its Read's `placed`: DDP places
    /// it next, or the stream faults and the Read is flushed.
    pub fn check(&mut self, segment: &SegmentRepr<'_>) -> Result<Access, RxError> {
        let rsvd_ulp = match &segment.header {
            Header::Tagged(h) => h.rsvd_ulp,
            Header::Untagged(h) => h.rsvd_ulp[0],
        };
        let control = Control::from_byte(rsvd_ulp);
        if control.version != RDMAP_VERSION {
            return Err(RxError::Rdmap(RdmapError::InvalidVersion));
        }
        match (control.opcode, &segment.header) {
            (Opcode::Write, Header::Tagged(_)) => Ok(Access::REMOTE_WRITE),
            (Opcode::ReadResponse, Header::Tagged(h)) => {
                if self.orq.is_empty() {
                    return Err(RxError::Rdmap(RdmapError::UnexpectedOpcode));
                }
                let len = segment.payload.len() as u64;
                if len == 0 {
                    return Ok(Access::LOCAL_WRITE);
                }
                let mut named = false;
                for read in self.orq.iter_mut().filter(|r| r.sink.0 == h.stag) {
                    named = true;
                    let inside = h.to.checked_sub(read.sink_to).is_some_and(|rel| {
                        rel.checked_add(len)
                            .is_some_and(|end| end <= u64::from(read.len))
                    });
                    if inside {
                        let start = h.to - read.sink_to;
                        self.ahead
                            .place(read.seq, &mut read.placed, start, start + len);
                        return Ok(Access::LOCAL_WRITE);
                    }
                }
                Err(RxError::Ddp(if named {
                    DdpError::BaseOrBounds
                } else {
                    DdpError::InvalidStag
                }))
            }
            // RFC 7306 §5.2.2: an Atomic Response answers an outstanding Atomic Request.
            (Opcode::AtomicResponse, Header::Untagged(h)) if h.qn == QN_ATOMIC_RESPONSE => {
                if self.aoq.is_empty() {
                    Err(RxError::Rdmap(RdmapError::UnexpectedOpcode))
                } else {
                    Ok(Access::REMOTE_WRITE)
                }
            }
            // RFC 7306 §6.3: Immediate Data is exactly 8 bytes, so one whole segment; anything
            // else is refused before DDP places it into the posted receive. RFC 7306 names no
            // code for it: the unspecified Remote Operation Error (0x2/0xFF).
            (Opcode::ImmediateData | Opcode::ImmediateDataSe, Header::Untagged(h))
                if h.qn == QN_SEND
                    && !(h.mo == 0
                        && segment.last
                        && segment.payload.len() == IMMEDIATE_DATA_LEN) =>
            {
                Err(RxError::Rdmap(RdmapError::OperationUnspecified))
            }
            // A queue RDMAP does not use (RFC 5040 §4.2 and RFC 7306 §10.2 use 0-3): DDP's
            // Invalid QN says it (RFC 5041 §7.1, §7.2 untagged error 0x01).
            (_, Header::Untagged(h)) if h.qn > QN_ATOMIC_RESPONSE => Ok(Access::REMOTE_WRITE),
            (op, Header::Untagged(h)) if op.tagged() == Some(false) && op.queue() == Some(h.qn) => {
                Ok(Access::REMOTE_WRITE)
            }
            _ => Err(RxError::Rdmap(RdmapError::UnexpectedOpcode)),
        }
    }

    /// What a message DDP delivered means (every segment of it passed [`RdmapStream::check`]).
    /// `inline` is the message itself when its queue is RDMAP's own (QN 1 and 2); `stags`,
    /// `stream` and `pd` are what a Read Request's Data Source is checked against.
    pub fn on_delivered(
        &mut self,
        message: &Delivered,
        inline: Option<&[u8]>,
        stags: Stags<'_>,
        stream: StreamId,
        pd: Pd,
    ) -> Upcall {
        match message.info {
            MessageInfo::Tagged {
                stag,
                rsvd_ulp,
                last_len,
                ..
            } => {
                if Control::from_byte(rsvd_ulp).opcode != Opcode::ReadResponse {
                    return Upcall::Write;
                }
                // RFC 5041 §5.2: "The STag and TO fields MUST NOT be checked for a zero-length
                // Tagged DDP Message": an empty response names no sink, and answers the oldest
                // outstanding Read whatever STag it carries (responses come in order, RFC 5040
                // §5.2); it is whole only if that Read is zero-length too.
                let zero_length = message.segments == 1 && last_len == 0;
                let answers = |read: &OutboundRead| zero_length || read.sink.0 == stag;
                // Responses come in the order of their Requests (§5.2, §5.5): this one must
                // answer the oldest outstanding Read, and carry its RDMA Read Message Size into
                // its Data Sink: a response that placed less, or some bytes twice, leaves sink
                // bytes the ULP would take for the Data Source's. RFC 5040 names no code for it:
                // the unspecified Remote Operation Error (§4.8), and the Read is flushed. (Not
                // told for Reads whose sinks overlap: `OutboundRead::shared_sink`.)
                match self.orq.front() {
                    Some(read)
                        if answers(read)
                            && (read.placed.whole(u64::from(read.len)) || read.shared_sink) =>
                    {
                        let read = *read;
                        self.orq.pop_front();
                        self.ahead.forget(read.seq);
                        Upcall::ReadDone(read)
                    }
                    front => Upcall::Fault {
                        // Short of its Read, or answering none outstanding: §5.2's "Unexpected
                        // OpCode".
                        error: RxError::Rdmap(if front.is_some_and(answers) {
                            RdmapError::OperationUnspecified
                        } else {
                            RdmapError::UnexpectedOpcode
                        }),
                        // RFC 5040 §4.8: the DDP header of the segment that caused it, the
                        // response's last (the L segment ends it); a Read Response has no
                        // RDMAP header of its own to add (R clear).
                        header: message.last_header(),
                        segment_len: message.last_segment_len(),
                        read_request: None,
                    },
                }
            }
            MessageInfo::Untagged { rsvd_ulp, .. } => {
                let opcode = Control::from_byte(rsvd_ulp[0]).opcode;
                // RFC 5040 §4.8: the DDP header and DDP Segment Length of the message's last
                // segment as it arrived (its true MO), not one rebuilt from the message.
                // Built only for a fault (and a Read Request), not for every Send.
                let header = || message.last_header();
                let segment_len = || message.last_segment_len();
                match opcode {
                    Opcode::ReadRequest => {
                        let bytes = inline.unwrap_or(&[]);
                        let request_len = segment_len();
                        self.serve(bytes, stags, stream, pd, (header(), request_len))
                            .unwrap_or_else(|(error, read_request)| Upcall::Fault {
                                error: RxError::Rdmap(error),
                                header: header(),
                                segment_len: request_len,
                                read_request,
                            })
                    }
                    Opcode::AtomicRequest => {
                        let bytes = inline.unwrap_or(&[]);
                        self.serve_atomic(bytes, stags, stream, pd, (header(), segment_len()))
                            .unwrap_or_else(|error| Upcall::Fault {
                                error: RxError::Rdmap(error),
                                header: header(),
                                segment_len: segment_len(),
                                // RFC 7306 §8.1 item 2: the Terminated RDMA Header is zero.
                                read_request: None,
                            })
                    }
                    Opcode::AtomicResponse => {
                        // RFC 7306 §5.2.2: it echoes the Request Identifier of the oldest
                        // Atomic outstanding (the responder answers in order, item 8); any
                        // other is invalid, and item 7 asks for an error: RFC 7306 names no
                        // code, so the unspecified Remote Operation Error.
                        let response = AtomicResponse::parse(inline.unwrap_or(&[])).ok();
                        match (response, self.aoq.front()) {
                            (Some(r), Some(a)) if r.request_id == a.request_id => {
                                let atomic = *a;
                                self.aoq.pop_front();
                                Upcall::AtomicDone {
                                    atomic,
                                    original: r.original,
                                }
                            }
                            _ => Upcall::Fault {
                                error: RxError::Rdmap(RdmapError::OperationUnspecified),
                                header: header(),
                                segment_len: segment_len(),
                                read_request: None,
                            },
                        }
                    }
                    Opcode::Terminate => {
                        let bytes = inline.unwrap_or(&[]);
                        // The error is the Terminate Control's first 4 octets: read whatever
                        // follows them (a header its flags announce may be cut short; the
                        // peer's layer, type and code were replaced by "unspecified" then).
                        let error = if bytes.len() >= TERMINATE_CONTROL_LEN {
                            TerminatePacket::new_unchecked(bytes).error()
                        } else {
                            // Too short to say which: it ends the stream all the same.
                            TerminateError::Rdmap(RdmapError::OperationUnspecified)
                        };
                        Upcall::PeerTerminate(error)
                    }
                    _ => {
                        let invalidate = opcode
                            .carries_invalidate_stag()
                            .then(|| invalidate_stag(&rsvd_ulp).map(Stag))
                            .flatten();
                        // RFC 5040 §5.3 (Send with Invalidate at the Data Sink): the STag must
                        // name a live registration the stream could use itself (its
                        // protection domain, and its stream if it is bound to one, RFC 5041
                        // §8.2), and one granting a remote right (an advertised buffer, as
                        // InfiniBand's remote invalidation takes an R_Key; a Read's sink told
                        // in its Read Request qualifies when registered with remote write, as
                        // iWARP verbs register sinks). A local-only STag (receive buffers, a
                        // sink of local write alone) is not the peer's to end:
                        // it was, and a peer guessing one revoked the buffers every session
                        // posted (an outside-in review). Anything else is the Remote Protection
                        // Error "STag cannot be invalidated" of §4.8 (the code siw sends), and
                        // the Send does not complete.
                        let allowed = |stag: Stag| {
                            stags.lookup(stag).is_some_and(|r| {
                                r.pd == pd
                                    && r.stream.is_none_or(|s| s == stream)
                                    && r.access.any_remote()
                            })
                        };
                        match invalidate {
                            Some(stag) if !allowed(stag) => Upcall::Fault {
                                error: RxError::Rdmap(RdmapError::ProtectionCannotInvalidate),
                                header: header(),
                                segment_len: segment_len(),
                                read_request: None,
                            },
                            _ => Upcall::Send { opcode, invalidate },
                        }
                    }
                }
            }
        }
    }

    /// RFC 5040 §5.2 at the Data Source: the request is exactly its 28-byte header, within
    /// IRD, and its Data Source is a registration of this stream's protection domain that
    /// grants remote read and holds the whole range (RFC 5041 §7.1's order: STag, domain and
    /// stream, right, base, wrap, bounds). A zero-length Read names no bytes and is not
    /// checked.
    fn serve(
        &mut self,
        bytes: &[u8],
        stags: Stags<'_>,
        stream: StreamId,
        pd: Pd,
        (request_header, request_segment_len): (HeaderCopy, usize),
    ) -> Result<Upcall, (RdmapError, Option<ReadRequest>)> {
        // Not the 28-byte header of RFC 5040 §4.4: no code of §4.8 names that, so the
        // unspecified Remote Operation Error.
        let request =
            ReadRequest::parse(bytes).map_err(|_| (RdmapError::OperationUnspecified, None))?;
        if self.serving >= self.ours.ird {
            // More than we said we would serve at once (siw answers the same).
            return Err((RdmapError::CatastrophicStream, Some(request)));
        }
        let placement = stags
            .check_access(
                Stag(request.source_stag),
                request.source_to,
                request.size as usize,
                stream,
                pd,
                Access::REMOTE_READ,
            )
            .map_err(|f| (f.as_rdmap(), Some(request)))?;
        // RFC 5041 §7.1's TO wrap, for the Data Sink the request names: a Read Response whose
        // TO + size passes 2^64 cannot be sent whole (the requester must refuse its segments,
        // and our sender stops at the wrap, having sent the first ones), so the request is
        // refused here, before any byte is read, with RDMAP's code for it (RFC 5040 §4.8).
        if request
            .sink_to
            .checked_add(u64::from(request.size))
            .is_none()
        {
            return Err((RdmapError::ToWrap, Some(request)));
        }
        self.serving += 1;
        Ok(Upcall::Serve(ReadResponse {
            sink: Stag(request.sink_stag),
            sink_to: request.sink_to,
            source: (request.size > 0).then_some(RegionSlice {
                region: placement.region,
                offset: placement.offset,
            }),
            len: request.size,
            source_stag: Stag(request.source_stag),
            source_to: request.source_to,
            request_header,
            request_segment_len,
        }))
    }
}

impl RdmapStream {
    /// RFC 7306 §5.2.1 at the Responder: the request is exactly its 52-byte header, within IRD
    /// (shared with Read Requests, §5.2), of an Atomic Operation this side performs (item 4:
    /// anything else is an error; RFC 7306 names no code, so the unspecified Remote Operation
    /// Error), on 8 bytes of a registration of this stream's protection domain that grants the
    /// remote atomic right (RFC 5041 §7.1's order: STag, domain and stream, right, base, wrap,
    /// bounds), 64-bit aligned (§8.2: else Catastrophic error localized to the stream, 0x2/0x07).
    /// Memory is not touched here; nothing is when a check fails (§5.1.1, §5.1.2).
    fn serve_atomic(
        &mut self,
        bytes: &[u8],
        stags: Stags<'_>,
        stream: StreamId,
        pd: Pd,
        (header, segment_len): (HeaderCopy, usize),
    ) -> Result<Upcall, RdmapError> {
        let request = AtomicRequest::parse(bytes).map_err(|_| RdmapError::OperationUnspecified)?;
        // RFC 7306 §5.2: Atomic Requests share the Read Requests' IRD flow control; more than
        // we offered at once is refused as a Read Request would be.
        if self.serving >= self.ours.ird {
            return Err(RdmapError::CatastrophicStream);
        }
        if matches!(request.op, AtomicOp::Unknown(_)) {
            return Err(RdmapError::OperationUnspecified);
        }
        let placement = stags
            .check_access(
                Stag(request.stag),
                request.to,
                ATOMIC_WORD,
                stream,
                pd,
                Access::REMOTE_ATOMIC,
            )
            .map_err(|f| f.as_rdmap())?;
        // Regions start on a page, so the offset's alignment is the address's.
        if !placement.offset.is_multiple_of(ATOMIC_WORD as u64) {
            return Err(RdmapError::CatastrophicStream);
        }
        self.serving += 1;
        Ok(Upcall::Atomic(AtomicServe {
            request,
            target: RegionSlice {
                region: placement.region,
                offset: placement.offset,
            },
            header,
            segment_len,
        }))
    }
}

/// The word an Atomic Operation reads and writes (RFC 7306 §5: 64 bits).
pub const ATOMIC_WORD: usize = 8;

/// The error a Terminate reports for the receive error `error` (see [`terminate_payload`]).
pub fn terminate_error(error: RxError) -> TerminateError {
    match error {
        RxError::Ddp(e) => TerminateError::Ddp(e),
        // RFC 5041 §7.1 check 4: the peer's message too long for the buffer (0x2/0x05); which
        // buffer is ours to know, not the Terminate's.
        RxError::MessageTooLong { .. } => TerminateError::Ddp(DdpError::TooLong),
        // Our own fault (RFC 5041 §7.1 check 2 on a buffer we revoked): the peer is told of a
        // local error, as siw does for an invalid lkey, not that its flow control failed.
        RxError::BufferRevoked { .. } => TerminateError::Ddp(DdpError::LocalCatastrophic),
        // A Read Response where our Read asked for it, into a sink our ULP revoked meanwhile:
        // our fault, reported as RDMAP's Local Catastrophic error (RFC 5040 §4.8 layer 0x0,
        // type 0x0), not DDP's Invalid STag, which blames the peer.
        RxError::SinkRevoked { .. } => TerminateError::Rdmap(RdmapError::LocalCatastrophic),
        RxError::Rdmap(e) => TerminateError::Rdmap(e),
        RxError::Sequence(_)
        | RxError::Truncated
        | RxError::Oversize { .. }
        | RxError::PeerTerminated => TerminateError::Rdmap(RdmapError::CatastrophicStream),
    }
}

/// The payload of the Terminate that reports `error` (RFC 5040 §4.8): the layer, type and
/// code; the DDP Segment Length and DDP header of the segment that caused it (`header`, as
/// DDP copied it: DDP-SSN first) where its layout is known; and the Read Request concerned.
///
/// Errors with no number of their own in RFC 5040 or RFC 5041 (a DDP-SSN outside the window,
/// RFC 5043 §10; a segment over the MULPDU, §9; one shorter than its header) are reported as
/// RDMAP's Catastrophic error localized to the stream (0x2/0x07).
pub fn terminate_payload(
    error: RxError,
    header: &HeaderCopy,
    segment_len: usize,
    read_request: Option<ReadRequest>,
) -> Vec<u8> {
    let reported = terminate_error(error);
    // The DDP header is the segment's layout only if its DDP version was understood.
    let layout_known = !matches!(
        error,
        RxError::Ddp(DdpError::TaggedVersion | DdpError::UntaggedVersion)
    );
    let bytes = header.as_bytes();
    let segment = bytes
        .get(DDP_SSN_LEN..)
        .filter(|h| {
            layout_known
                && h.first()
                    .is_some_and(|&c| h.len() == header_len(c & 0x80 != 0))
        })
        .map(|ddp_header| TerminatedSegment {
            segment_len: u16::try_from(segment_len).unwrap_or(u16::MAX),
            ddp_header,
        });
    // RFC 5040 §4.8: M says the Terminated DDP Segment Length is the segment's. A segment
    // longer than its 16 bits can hold (SCTP's MULPDU may exceed 0xFFFF) is copied saturated,
    // which is not its length: M stays clear then, D still says the header is there.
    let segment_len_valid = segment.is_some() && u16::try_from(segment_len).is_ok();
    let repr = TerminateRepr {
        error: reported,
        segment_len_valid,
        segment,
        read_request,
    };
    let mut out = vec![0u8; repr.buffer_len()];
    // The header was checked against its T bit above and the buffer is `buffer_len` long.
    let _ = repr.emit(&mut out);
    out
}

/// The RsvdULP of an RDMAP message (RFC 5040 §4.1): control field, and for an untagged one the
/// Invalidate STag (zero unless it carries one).
pub fn rsvd_ulp(opcode: Opcode, invalidate: Option<Stag>) -> [u8; 5] {
    Control::new(opcode).untagged_rsvd_ulp(invalidate.map_or(0, |s| s.0))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;

    /// RFC 5040 §4.8: M ("DDP Segment Length valid") only when the 16-bit field holds the
    /// segment's true length; a 70 000-byte segment is copied saturated (0xFFFF), M clear, its
    /// DDP header still copied (D).
    #[test]
    fn terminate_m_flag_only_for_a_length_that_fits_5040_4_8() {
        // DDP-SSN, then a tagged DDP header (control with T and DV 1, RsvdULP, STag, TO).
        let mut bytes = vec![0, 7, 0x81, 0x41];
        bytes.extend_from_slice(&[0; 12]);
        let header = HeaderCopy::from_bytes(&bytes);
        let error = RxError::Ddp(DdpError::InvalidStag);
        for (len, m) in [
            (70_000, false),
            (0x1_0000, false),
            (0xFFFF, true),
            (100, true),
        ] {
            let payload = terminate_payload(error, &header, len, None);
            let t = TerminatePacket::new_checked(&payload[..]).unwrap();
            assert_eq!(t.segment_len_valid(), m, "segment of {len} bytes");
            assert!(t.has_ddp_header(), "segment of {len} bytes: D");
            assert_eq!(
                t.segment_len(),
                Some(u16::try_from(len).unwrap_or(u16::MAX)),
                "segment of {len} bytes"
            );
        }
    }
}
