//! What the ULP sees of a connection: its operations, requests, errors, completions,
//! indications and counters (RFC 4296 §2.1.2's ULP interface, polled verbs-style).

use std::fmt;

use ddpdk_dataplane::ddp::TxError;
use ddpdk_dataplane::ddp::{HeaderCopy, RxError};
use ddpdk_dataplane::mem::{Pd, PostedBuffer, Stag};
use ddpdk_dataplane::sctp::CloseReason;
use ddpdk_dataplane::wire::ddp::DdpError;
use ddpdk_dataplane::wire::rdmap::{AtomicOp, AtomicRequest};

use crate::memory::RegionId;
use crate::session::{Event as SessionEvent, LocalError};

/// A ULP operation on a connection, carried out by its owning core (RFC 4296 §2.1.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Initiate {
        stream: u16,
        pd: Pd,
        private_data: Vec<u8>,
    },
    Accept {
        stream: u16,
        pd: Pd,
        private_data: Vec<u8>,
    },
    Reject {
        stream: u16,
        private_data: Vec<u8>,
    },
    Terminate {
        stream: u16,
    },
    PostRecv {
        stream: u16,
        qn: u32,
        wr_id: u64,
        buffer: PostedBuffer,
    },
    PostSend(SendRequest),
    /// [`Connection::initiate_rdmap`](crate::conn::Connection::initiate_rdmap).
    InitiateRdmap {
        stream: u16,
        pd: Pd,
        limits: crate::rdmap::RdmaLimits,
        private_data: Vec<u8>,
    },
    /// [`Connection::accept_rdmap`](crate::conn::Connection::accept_rdmap).
    AcceptRdmap {
        stream: u16,
        pd: Pd,
        limits: crate::rdmap::RdmaLimits,
        private_data: Vec<u8>,
    },
    /// [`Connection::post_rdma`](crate::conn::Connection::post_rdma).
    PostRdma(RdmaRequest),
    /// Graceful SHUTDOWN of the association.
    Shutdown,
    Abort,
}

impl Op {
    /// The stream the operation acts on (none for the association's own).
    pub fn stream(&self) -> Option<u16> {
        match self {
            Op::Initiate { stream, .. }
            | Op::Accept { stream, .. }
            | Op::Reject { stream, .. }
            | Op::Terminate { stream }
            | Op::PostRecv { stream, .. }
            | Op::InitiateRdmap { stream, .. }
            | Op::AcceptRdmap { stream, .. } => Some(*stream),
            Op::PostSend(req) => Some(req.stream),
            Op::PostRdma(req) => Some(req.stream),
            Op::Shutdown | Op::Abort => None,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Op::Initiate { .. } => "initiate",
            Op::Accept { .. } => "accept",
            Op::Reject { .. } => "reject",
            Op::Terminate { .. } => "terminate",
            Op::PostRecv { .. } => "post_recv",
            Op::PostSend(_) => "post_send",
            Op::InitiateRdmap { .. } => "initiate_rdmap",
            Op::AcceptRdmap { .. } => "accept_rdmap",
            Op::PostRdma(_) => "post_rdma",
            Op::Shutdown => "shutdown",
            Op::Abort => "abort",
        }
    }

    /// The work request it posts, if any: what a refusal names.
    pub fn wr_id(&self) -> Option<u64> {
        match self {
            Op::PostRecv { wr_id, .. } => Some(*wr_id),
            Op::PostSend(req) => Some(req.wr_id),
            Op::PostRdma(req) => Some(req.wr_id),
            _ => None,
        }
    }
}

/// What [`Connection::apply`](crate::conn::Connection::apply) did with an [`Op`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Done,
    /// A receive buffer is posted: from now on it can take a message.
    Posted {
        stream: u16,
        qn: u32,
        wr_id: u64,
    },
    /// Its stream's session is away at the control thread: the operation waits, in order
    /// with the stream's chunks, and its result comes from [`Connection::poll_op_result`].
    ///
    /// [`Connection::poll_op_result`]: crate::conn::Connection::poll_op_result
    Deferred,
}

/// The result of an operation that was [`Applied::Deferred`], once applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpResult {
    pub op: &'static str,
    /// Its stream, if it has one ([`Op::stream`]).
    pub stream: Option<u16>,
    /// The work request's, if the operation posts one.
    pub wr_id: Option<u64>,
    pub result: Result<Applied, PostError>,
}

/// Sizes fixed when a connection is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnConfig {
    /// Untagged queues per DDP stream: QN 0 .. queues-1 (RFC 5041 §5.1.2; RDMAP uses 3,
    /// and a 4th for RFC 7306's Atomic Responses).
    pub queues: u32,
    /// Receive buffers each queue can hold posted.
    pub recv_depth: usize,
    /// Send work requests queued (not yet wholly handed to SCTP) across the connection.
    pub max_sends: usize,
    /// What ends a stream after its first receive error.
    pub on_receive_error: OnReceiveError,
    /// A test service instead of DDP for user messages ([`Service`]).
    pub service: Service,
}

/// The test services SCTP conformance testers and interop events expect of a system under
/// test, run on a DDP endpoint's associations (which still need DDP's Adaptation Layer
/// Indication, RFC 5043 §11.1, and unordered DATA, §10). DDP Stream Session control (PPID 17)
/// is always answered by the session machine (§6); the rest of the user messages go to the
/// service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Service {
    /// Messages are DDP Segments (PPID 16), checked and placed.
    #[default]
    Ddp,
    /// Every user message goes back on its association and stream with its PPID (and, as all
    /// our DATA, unordered); the bytes wait in the receive buffer until SCTP takes them.
    Echo,
    /// Every user message is taken and dropped (counted).
    Discard,
    /// One message (the time, as text, PPID 0, stream 0) when the association comes up, then
    /// a graceful SHUTDOWN (RFC 867's daytime over SCTP).
    Daytime,
}

impl ConnConfig {
    /// The RDMAP limits a connection of this configuration honours, and sends, for `asked`:
    /// IRD is the depth of the inline Read Request queue, and ORD that of the Atomic Response
    /// queue (RFC 7306 §5.2.2 item 5: a buffer there for every Atomic outstanding), each
    /// `recv_depth`.
    pub fn rdmap_limits(&self, asked: crate::rdmap::RdmaLimits) -> crate::rdmap::RdmaLimits {
        let depth = u16::try_from(self.recv_depth).unwrap_or(u16::MAX);
        crate::rdmap::RdmaLimits {
            ird: asked.ird.min(depth),
            ord: asked.ord.min(depth),
        }
    }
}

impl Default for ConnConfig {
    fn default() -> Self {
        ConnConfig {
            queues: 4,
            recv_depth: 256,
            max_sends: 4096,
            on_receive_error: OnReceiveError::Terminate,
            service: Service::Ddp,
        }
    }
}

/// How the ULP above a connection ends a stream whose receive path failed. DDP itself only
/// indicates the error and drops what follows (RFC 5041 §7.1); the stream ends when the ULP
/// says so (§6.2.2), after at most one more message of its own (§7.1: "DDP SHOULD enable the
/// ULP to send one additional DDP Message before terminating the DDP Stream").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnReceiveError {
    /// The session is terminated as the error is indicated (a Terminate goes to the peer,
    /// queued sends are flushed): the endpoint's ULP has no error message of its own to send.
    Terminate,
    /// The session is terminated once the ULP's one further message has gone to SCTP (an
    /// RDMAP Terminate, say), or when the ULP terminates it.
    AfterLastMessage,
}

/// The buffer model and destination of a message to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendKind {
    /// To the next buffer the peer posted on queue `qn` (RFC 4296 `ddp_send`).
    Untagged { qn: u32, rsvd_ulp: [u8; 5] },
    /// To the peer's registered buffer `stag` from Tagged Offset `to` (RFC 4296 `ddp_send_ddp`).
    /// `rsvd_ulp` reaches the peer's ULP with the delivery (RFC 5041 §5.4): it carries RFC
    /// 4296's `ddp_notify_t` message id, as RDMAP carries its opcode there.
    Tagged { stag: Stag, to: u64, rsvd_ulp: u8 },
}

/// Where the bytes of a message to send are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// Moved in with the request; SCTP's send queue copies them.
    Bytes(Vec<u8>),
    /// `len` bytes of the local registration `stag` from Tagged Offset `to`: the local buffer
    /// of RFC 4296 §2.1.2, named as verbs name it (an lkey). It must be registered in the
    /// protection domain of the stream's session; local read is implied by any registration,
    /// as in verbs ([`Connection::resolve_local`] checks, and turns it into a
    /// [`Payload::Region`]).
    ///
    /// [`Connection::resolve_local`]: crate::conn::Connection::resolve_local
    Local { stag: Stag, to: u64, len: u32 },
    /// `len` bytes of a region of this endpoint from `offset`, sent without a copy where the
    /// port can chain buffers ([`ddpdk_dataplane::port::Port::attach_region`]). The raw form,
    /// with no protection-domain check: for an application sending its own memory. The ULP
    /// leaves those bytes unchanged until the send completes.
    Region {
        region: RegionId,
        offset: u64,
        len: u32,
    },
}

impl Payload {
    pub fn len(&self) -> usize {
        match self {
            Payload::Bytes(b) => b.len(),
            Payload::Local { len, .. } | Payload::Region { len, .. } => *len as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl From<Vec<u8>> for Payload {
    fn from(bytes: Vec<u8>) -> Payload {
        Payload::Bytes(bytes)
    }
}

/// A send work request. The message is moved in (or named in a region), so posting copies
/// nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendRequest {
    /// Returned in the completion.
    pub wr_id: u64,
    pub stream: u16,
    pub kind: SendKind,
    pub data: Payload,
    /// Whether a successful completion is reported (failures always are).
    pub signaled: bool,
}

/// An RDMA operation (RFC 5040 §5, RFC 4296 §2.2) on an RDMAP stream
/// ([`Connection::initiate_rdmap`], [`Connection::accept_rdmap`]).
///
/// [`Connection::initiate_rdmap`]: crate::conn::Connection::initiate_rdmap
/// [`Connection::accept_rdmap`]: crate::conn::Connection::accept_rdmap
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RdmaOp {
    /// RDMA Write (§5.1): the data into the peer's buffer `stag` from Tagged Offset `to`. The
    /// peer's ULP is not told.
    Write { stag: Stag, to: u64 },
    /// Send (§5.3) into the peer's next posted receive; with a Solicited Event, and with the
    /// peer's STag to invalidate as it is delivered.
    Send {
        solicited: bool,
        invalidate: Option<Stag>,
    },
    /// RDMA Read (§5.2): `len` bytes of the peer's buffer `source` from `source_to` into this
    /// side's registration `sink` (local write) from `sink_to`. Completes when the Read
    /// Response is wholly placed; at most ORD are outstanding, later ones wait in order.
    Read {
        source: Stag,
        source_to: u64,
        sink: Stag,
        sink_to: u64,
        len: u32,
    },
    /// RFC 7306 §5: an Atomic Operation on the peer's 64-bit word at `stag` / `to` (the address
    /// it names 64-bit aligned, which the peer checks, §8.2; the peer's registration grants
    /// remote atomic access). The word's original
    /// value lands in this side's `sink` / `sink_to` (8 bytes of a registration with local
    /// write) in this machine's byte order, and the work request completes when the Atomic
    /// Response arrives. Counted against ORD with the Reads (§5.2).
    Atomic {
        op: AtomicOperation,
        stag: Stag,
        to: u64,
        sink: Stag,
        sink_to: u64,
    },
    /// RFC 7306 §6: 8 bytes of Immediate Data into the peer's next posted receive (with a
    /// Solicited Event if `solicited`). It completes as a Send does (§6.4).
    ImmediateData { data: [u8; 8], solicited: bool },
    /// Nothing on the wire: a place in the stream's completion order (RFC 5040 §5.5). It
    /// completes `Success`, reported whether signaled or not, once every work request posted
    /// before it is reported: at once if none waits, as on a stream whose session is over
    /// (its work was flushed) or that is no RDMAP stream. An unsignaled work request that
    /// succeeds is never reported, so a ULP that must know it is over (verbs, holding a later
    /// work request's error completion behind it) posts a mark after it. Refused only where
    /// every operation is (no such stream, the association not up); not held to the depth
    /// of the stream's completion order, which the marks a ULP posts behind its own work
    /// cannot outgrow more than that work does.
    Mark,
}

/// The two Atomic Operations of RFC 7306 §5.1, with their masks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicOperation {
    /// §5.1.1: adds `add` to the word, field by field; a bit set in `mask` marks the top bit
    /// of a field, whose carry out is discarded (0: one 64-bit add).
    FetchAdd { add: u64, mask: u64 },
    /// §5.1.2: if the word's bits under `compare_mask` equal `compare`'s, its bits under
    /// `swap_mask` become `swap`'s.
    CmpSwap {
        compare: u64,
        compare_mask: u64,
        swap: u64,
        swap_mask: u64,
    },
}

impl AtomicOperation {
    /// The Atomic Request header for it (RFC 7306 §5.2.1; fields an operation does not use are
    /// set as Figure 5 says: Compare Data 0 and Compare Mask all ones for FetchAdd).
    pub fn request(self, request_id: u32, stag: Stag, to: u64) -> AtomicRequest {
        let (op, add_swap, add_swap_mask, compare, compare_mask) = match self {
            AtomicOperation::FetchAdd { add, mask } => (AtomicOp::FetchAdd, add, mask, 0, u64::MAX),
            AtomicOperation::CmpSwap {
                compare,
                compare_mask,
                swap,
                swap_mask,
            } => (AtomicOp::CmpSwap, swap, swap_mask, compare, compare_mask),
        };
        AtomicRequest {
            op,
            request_id,
            stag: stag.0,
            to,
            add_swap,
            add_swap_mask,
            compare,
            compare_mask,
        }
    }
}

/// An RDMA work request: what [`SendRequest`] is to plain DDP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaRequest {
    /// Returned in the completion.
    pub wr_id: u64,
    pub stream: u16,
    pub op: RdmaOp,
    /// The bytes of a Write or a Send (none for a Read).
    pub data: Payload,
    /// Whether a successful completion is reported (failures always are).
    pub signaled: bool,
}

/// The RDMA Read state of an RDMAP stream ([`Connection::rdma_status`]).
///
/// [`Connection::rdma_status`]: crate::conn::Connection::rdma_status
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdmaStatus {
    /// This side's limits as announced (IRD capped at the queue depth).
    pub limits: crate::rdmap::RdmaLimits,
    /// Read Requests this side may have outstanding: min(our ORD, the peer's IRD).
    pub ord: u16,
    /// Ours sent and not yet answered.
    pub outstanding_reads: usize,
    /// RFC 7306 Atomics of ours sent and not yet answered (they share ORD with the Reads).
    pub outstanding_atomics: usize,
    /// The peer's being answered.
    pub serving: u16,
}

/// Why a ULP call was refused. Nothing changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostError {
    /// The association is not established yet, or is over.
    NotConnected,
    /// No such stream on this association.
    InvalidStream,
    /// The session does not allow it (state, Private Data size).
    Session(LocalError),
    /// A previous session's chunks may still be outstanding (RFC 5043 §6.6).
    StreamBusy,
    /// The association's Adaptation Indication is not DDP's: no DDP procedure runs on it
    /// (RFC 5043 §11.1).
    NotDdp,
    /// After a receive error the one further message is already posted (RFC 5041 §7.1).
    StreamFailed,
    /// QN beyond the stream's queues ([`ConnConfig::queues`]): a receive posted to one, or a
    /// plain DDP stream's untagged send naming one.
    InvalidQn,
    /// The queue or the connection's send queue is full.
    Full,
    Tx(TxError),
    /// A [`Payload::Region`] names no region of this endpoint, or bytes outside it.
    BadRegion,
    /// A [`Payload::Local`] names no registration of this endpoint, one of another protection
    /// domain than the stream's session, or bytes outside it (or was posted unresolved).
    BadLocalStag,
    /// An RDMA operation on a stream that is not an RDMAP stream, or a plain DDP send (or a
    /// receive on a queue other than 0) on one that is: RDMAP owns its RsvdULP and queues.
    NotRdmap,
    /// The peer's Initiate did not carry RDMAP's parameters: it is no RDMAP peer.
    PeerNotRdmap,
    /// The RDMA Read's (or Atomic's) Data Sink, or a posted receive's buffer, is not a
    /// registration of this stream's protection domain that grants local write and holds the
    /// range.
    BadSink,
    /// An RDMA Read or Atomic on a stream whose ORD is 0 (ours, or the peer's IRD: RFC 5040
    /// §6.1, RFC 7306 §5.2): none may ever be outstanding, so it would wait forever.
    NoOrd,
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PostError::NotConnected => f.write_str("association not established"),
            PostError::InvalidStream => f.write_str("no such stream"),
            PostError::Session(e) => e.fmt(f),
            PostError::StreamBusy => {
                f.write_str("the previous session's chunks may still be outstanding")
            }
            PostError::NotDdp => f.write_str(
                "the association's Adaptation Indication is not DDP's: no DDP procedures on it \
                 (RFC 5043 §11.1)",
            ),
            PostError::StreamFailed => {
                f.write_str("stream failed: its one last message is already posted")
            }
            PostError::InvalidQn => f.write_str("no such queue"),
            PostError::Full => f.write_str("queue full"),
            PostError::Tx(e) => e.fmt(f),
            PostError::BadRegion => f.write_str("source span outside the registered regions"),
            PostError::BadLocalStag => {
                f.write_str("source STag unknown, of another protection domain, or too short")
            }
            PostError::NotRdmap => {
                f.write_str("RDMA operations go on an RDMAP stream, plain DDP sends on a plain DDP one")
            }
            PostError::PeerNotRdmap => f.write_str("the peer's Initiate carries no RDMAP parameters"),
            PostError::BadSink => f.write_str(
                "sink STag unknown, of another protection domain, without local write, or too short",
            ),
            PostError::NoOrd => f.write_str(
                "ORD is 0 (ours, or the peer's IRD): no RDMA Read or Atomic may be outstanding",
            ),
        }
    }
}

impl std::error::Error for PostError {}

impl From<LocalError> for PostError {
    fn from(e: LocalError) -> Self {
        PostError::Session(e)
    }
}

/// How a send ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// SCTP's cumulative ack covers the whole message (RFC 5041 §5.4, Data Source).
    Success,
    /// Not (wholly) sent, or its delivery is unknown: the session or association ended first.
    Flushed,
    /// It failed of this side's local memory, not of a peer's error: an RDMA Read whose Data Sink the
    /// ULP deregistered or invalidated while it was outstanding, its response then placing
    /// nothing ([`RxError::SinkRevoked`]; RFC 5040 §4.8 Local Catastrophic; the stream ends);
    /// or an Atomic whose result buffer was deregistered, or invalidated by the peer, before
    /// its response came: the Responder performed it, its Original Remote Data Value had
    /// nowhere to go (RFC 7306 §5.2.2; the stream goes on).
    LocalProtection,
}

/// For people: RFC 4296's words for a completion that did not succeed.
impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Status::Success => "successfully",
            Status::Flushed => "flushed: the session or association ended first",
            Status::LocalProtection => "failed: its local memory was revoked under it",
        })
    }
}

/// A send completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub wr_id: u64,
    pub stream: u16,
    pub status: Status,
}

/// What the ULP hears (RFC 4296 `ddp_ind_t` and the session events of RFC 5043 §5.2.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Indication {
    /// The association is established; `mulpdu` is the largest DDP Segment (RFC 5043 §9).
    Connected { streams: u16, mulpdu: usize },
    /// A session event on a stream.
    Session { stream: u16, event: SessionEvent },
    /// An untagged message filled the posted receive `wr_id` (RFC 5041 §5.4: with its length
    /// and RsvdULP).
    Received {
        stream: u16,
        wr_id: u64,
        qn: u32,
        msn: u32,
        len: u32,
        rsvd_ulp: [u8; 5],
        /// The STag a Send with Invalidate invalidated (RFC 5040 §5.3). In the runtime this
        /// indication reaches the ULP only once every data core has acknowledged the
        /// invalidation; a caller driving a [`Connection`] itself must first revoke it
        /// ([`Connection::take_peer_invalidated`]). `None` too when a core did not acknowledge
        /// in time (`ControlStats::invalidation_timeouts`): the invalidation is not vouched for.
        ///
        /// [`Connection`]: crate::conn::Connection
        /// [`Connection::take_peer_invalidated`]: crate::conn::Connection::take_peer_invalidated
        invalidated: Option<Stag>,
        /// RFC 7306 §6.2: an Immediate Data message's 8 bytes, read from its buffer when it
        /// was delivered, before a later message could be placed over them (receive buffers
        /// may overlap). `None` for other messages.
        imm_data: Option<[u8; 8]>,
    },
    /// A tagged message was delivered (RFC 5041 §5.4).
    TaggedDelivered {
        stream: u16,
        stag: Stag,
        rsvd_ulp: u8,
    },
    /// The stream's first receive error (RFC 5041 §7.1): nothing of the segment was placed.
    Error {
        stream: u16,
        error: RxError,
        header: HeaderCopy,
        segment_len: usize,
        /// The posted receive the error is local to ([`RxError::BufferRevoked`]: its memory
        /// was revoked since it was posted; [`RxError::MessageTooLong`]: the message was too
        /// long for it). It still returns with the session's end
        /// ([`Indication::RecvFlushed`]), like the other receives; this says it failed.
        recv: Option<u64>,
    },
    /// A posted receive returned unused: its session ended.
    RecvFlushed { stream: u16, qn: u32, wr_id: u64 },
    /// The stream's session is ending and its latest work request to succeed, `through`, was
    /// unsignaled (so nothing reported it): every send work request of the stream posted up
    /// to `through` and not reported otherwise succeeded. Told as the session ends (again
    /// if work its end releases later succeeded silently too) and before the association's
    /// `Closed`, so that a layer counting work (verbs) can tell silent successes from work
    /// the stream never took (which completes `Flushed` by then, or was never taken); a ULP
    /// that posts nothing unsignaled never sees it.
    SilentSuccesses { stream: u16, through: u64 },
    /// The peer's RDMAP Terminate (RFC 5040 §5.4): the error it reports on the stream. The
    /// stream's work ends; its session's end follows.
    RdmapTerminate {
        stream: u16,
        error: ddpdk_dataplane::wire::rdmap::TerminateError,
    },
    /// The peer restarted (RFC 9260 §5.2.4): every session ended; the association continues.
    PeerRestarted,
    /// The path went inactive after Path.Max.Retrans consecutive failures, or active again
    /// (RFC 9260 §8.2: the upper layer is told). The association keeps sending on its one path.
    PathChange { active: bool },
    /// The MULPDU moved with the path MTU (RFC 5043 §9 item 1: "LLPs MUST expose MULPDU and
    /// MULPDU changes"): ICMP lowered it, its age or an RFC 8899 probe raised it, a black hole
    /// took it down. New messages are cut for it; segments already cut go as they are (item
    /// 2: DDP need not re-segment, IP fragments them).
    MulpduChanged { mulpdu: usize },
    /// The association is over (after every stream's session ended).
    Closed(CloseReason),
}

/// RFC 4296 `msizes_t`: the largest message of each model that fits one DDP Segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxSizes {
    pub mulpdu: usize,
    pub untagged: usize,
    pub tagged: usize,
}

/// Receive errors by what they were: each RFC 5041 §7.2 number, and the errors that have
/// none (DDP-SSN, truncation, RFC 5043 §9's oversize, RDMAP's own checks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiveErrorCounts {
    /// By [`DdpError::index`].
    pub ddp: [u64; DdpError::ALL.len()],
    /// A DDP-SSN that was a duplicate or outside the window (RFC 5043 §10).
    pub sequence: u64,
    pub truncated: u64,
    pub oversize: u64,
    pub rdmap: u64,
}

impl ReceiveErrorCounts {
    pub fn count(&mut self, e: &RxError) {
        match e {
            RxError::Ddp(d) => self.ddp[d.index()] += 1,
            RxError::BufferRevoked { .. } => self.ddp[DdpError::LocalCatastrophic.index()] += 1,
            RxError::MessageTooLong { .. } => self.ddp[DdpError::TooLong.index()] += 1,
            RxError::Sequence(_) => self.sequence += 1,
            RxError::Truncated => self.truncated += 1,
            RxError::Oversize { .. } => self.oversize += 1,
            RxError::Rdmap(_) | RxError::SinkRevoked { .. } | RxError::PeerTerminated => {
                self.rdmap += 1
            }
        }
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &ReceiveErrorCounts) {
        for (a, b) in self.ddp.iter_mut().zip(other.ddp) {
            *a += b;
        }
        self.sequence += other.sequence;
        self.truncated += other.truncated;
        self.oversize += other.oversize;
        self.rdmap += other.rdmap;
    }

    /// Every counter with its name ([`DdpError::name`], or `ddp_ssn`, `truncated`,
    /// `oversize`, `rdmap`).
    pub fn named(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        DdpError::ALL
            .iter()
            .map(|e| (e.name(), self.ddp[e.index()]))
            .chain([
                ("ddp_ssn", self.sequence),
                ("truncated", self.truncated),
                ("oversize", self.oversize),
                ("rdmap", self.rdmap),
            ])
    }
}

/// Counters: everything dropped is counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnStats {
    /// User messages a test service echoed, discarded, or could not echo (too large for one
    /// DATA chunk, or the association closing) ([`Service`]).
    pub service_echoed: u64,
    pub service_discarded: u64,
    pub service_dropped: u64,
    pub segments_sent: u64,
    /// Of `segments_sent`, those a lone stream's region send gave SCTP straight after its
    /// previous segment, without a scheduling turn of their own (the send side's prediction,
    /// `sctp::Config::header_prediction`): a bulk sender's common case.
    pub segments_continued: u64,
    pub control_sent: u64,
    pub segments_received: u64,
    /// Of `segments_received`, those the fused receive path took (the next tagged segment of
    /// a stream, an RDMA Write on an RDMAP one, in a packet of its own: a bulk transfer's
    /// common case). Far below `segments_received` in a bulk transfer, the traffic misses it
    /// (reordering, untagged messages, bundled chunks).
    pub fused_segments: u64,
    /// Payload bytes the receive path placed into registered memory (tagged and untagged),
    /// over every stream, RDMAP's included; not what RDMAP's own inline queues take (Read
    /// Requests, Terminates: `RxStats::placed_bytes`).
    pub placed_bytes: u64,
    pub control_received: u64,
    /// Chunks whose PPID is neither 16 nor 17 (RFC 5043 §5.2).
    pub unknown_ppid: u64,
    /// Segments the session refused (illegal in the §6.1 pattern or outside the §10 window).
    pub refused_by_session: u64,
    /// Segments that arrived after this side's session ended.
    pub after_session_end: u64,
    /// On the active side, the peer's segments that arrived ahead of its answer to our
    /// Initiate and waited for it: placed after an Accept, dropped after a Reject (counted in
    /// `after_session_end` then), RFC 5043 §6.1, §6.3.
    pub segments_held_for_answer: u64,
    /// Our Initiates whose answer (the peer's DDP-SSN 0) did not come within
    /// `ANSWER_GRACE_RTOS` RTOs of SCTP having received every chunk up to the peer's first
    /// segment held for it (a lost answer still being retransmitted is waited for): the
    /// session ended
    /// (`ProtocolError::NoAnswer`, our Terminate) and the held segments were dropped, counted
    /// in `after_session_end` (RFC 5043 §10: a peer must not hold the receive buffer that way).
    pub initiates_unanswered: u64,
    /// DDP chunks (segments, control messages other than an Initiate at DDP-SSN 0, chunks of
    /// unknown PPID, truncated ones) on a stream that has no session, dropped, the stream left
    /// without one (RFC 5043 §6.1, §6.2: there is no session to terminate). Counted also
    /// among `refused_by_session`, `control_refused` or `unknown_ppid`.
    pub without_session: u64,
    /// Sessions whose peer's final message came with DDP-SSNs missing before it (RFC 5043 §6:
    /// "MUST NOT have any gaps") that never arrived: not by the time every TSN up to the
    /// Terminate's had, nor within the grace (`GAP_GRACE_RTOS` retransmission timeouts once our
    /// side was acknowledged). The receives were flushed, the stream freed.
    pub inbound_gaps_given_up: u64,
    /// Terminates of an attempt we rejected that arrived after the stream id started a new
    /// session (RFC 5043 §6.3, §6.6: sent before the peer had our Reject): dropped, so that
    /// they do not end the new session.
    pub crossed_rejects: u64,
    /// Watches for such Terminates dropped, the oldest first, when a stream had
    /// `CROSSING_WATCHES` (4) already (attempts rejected again and again while SCTP missed a
    /// chunk): the Terminate so unwatched, if it comes, ends the stream's next session.
    pub crossed_rejects_unwatched: u64,
    pub messages_sent: u64,
    pub flushed_sends: u64,
    pub flushed_receives: u64,
    /// DDP chunks on a stream we keep no state for (SCTP checks stream ids, so none expected).
    pub unknown_stream: u64,
    /// Session control messages the session refused (each ends the session, RFC 5043 §6.1,
    /// if there is one: `without_session`).
    pub control_refused: u64,
    /// Control messages SCTP no longer took (the association was closing).
    pub control_lost: u64,
    /// Control messages whose session machine ran on another thread
    /// ([`SessionCall`](crate::conn::SessionCall)).
    pub sessions_lent: u64,
    /// Streams whose receive path failed: the first error of each, indicated to the ULP
    /// (RFC 5041 §7.1; the segments after it are counted per stream, `RxStats`).
    pub receive_errors: u64,
    /// The same errors by kind.
    pub receive_errors_by_kind: ReceiveErrorCounts,
    /// DDP Segments larger than the MULPDU we announced, rejected (RFC 5043 §9); each stops
    /// its stream as a receive error.
    pub oversize_segments: u64,
    /// Sessions terminated because their stream's receive path failed
    /// ([`OnReceiveError::Terminate`]).
    pub sessions_faulted: u64,
    /// Chunks of a stream whose session was away, held (copied) until it came back.
    pub chunks_held: u64,
    /// Operations on such a stream, held likewise.
    pub ops_held: u64,
    /// RDMA Read Requests served (RFC 5040 §5.2): the Data Source checked, the response queued.
    pub reads_served: u64,
    /// RDMA Reads of ours completed by their Read Response.
    pub reads_completed: u64,
    /// Read Requests this connection could not answer because it has no region table
    /// ([`Connection::use_regions`]): each ended its stream with RDMAP's Local Catastrophic
    /// Error.
    ///
    /// [`Connection::use_regions`]: crate::conn::Connection::use_regions
    pub reads_unservable: u64,
    /// Read Responses stopped before their last segment because the ULP revoked their Data
    /// Source STag meanwhile ([`Connection::recheck_read_sources`]): each ended its stream
    /// with RDMAP's Invalid STag.
    ///
    /// [`Connection::recheck_read_sources`]: crate::conn::Connection::recheck_read_sources
    pub reads_source_revoked: u64,
    /// Read Responses that ended short of their Read's size (RFC 5040 §5.2): each ended its
    /// stream with the unspecified Remote Operation Error, the Read Flushed.
    pub reads_short: u64,
    /// RFC 7306 Atomic Requests performed and answered.
    pub atomics_served: u64,
    /// Atomic Requests that passed every check but whose target this core could not reach
    /// (not in its region table): each ended its stream with RDMAP's Local Catastrophic Error.
    pub atomics_unservable: u64,
    /// Atomics of ours completed by their Atomic Response.
    pub atomics_completed: u64,
    /// Atomic Responses whose sink was no longer a writable registration of the stream: the
    /// value was dropped and the work request completed in error.
    pub atomic_results_lost: u64,
    /// RDMAP Terminates sent, one per failed RDMAP stream (RFC 5040 §5.4).
    pub rdmap_terminates_sent: u64,
    /// RDMAP Terminates received.
    pub rdmap_terminates_received: u64,
    /// Sessions whose peer turned out not to speak RDMAP (no parameters in its Accept), ended.
    pub rdmap_refused: u64,
    /// STags the peer invalidated with a Send with Invalidate (RFC 5040 §5.3).
    pub stags_invalidated_by_peer: u64,
}
