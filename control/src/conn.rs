//! One DDP connection: an SCTP association whose like-numbered stream pairs are DDP streams
//! (RFC 5043 §6), with the ULP operations of RFC 4296 §2.1.2 on top, polled verbs-style.
//!
//! A [`Connection`] owns the [`Association`] and, per SCTP stream id, the RFC 5043 §6 session
//! ([`Session`]), the receive path ([`StreamRx`]: check, place, deliver) and the queue of send
//! work requests. It is sans-IO like everything under it: the caller feeds packets
//! ([`Connection::handle`]), timers ([`Connection::handle_timeout`]) and ULP calls, and drains
//! packets ([`Connection::poll_transmit`]), send completions ([`Connection::poll_completion`])
//! and indications ([`Connection::poll_indication`]).
//!
//! - **Sending.** [`Connection::post_send`] queues a DDP Message (untagged to a queue, or tagged
//!   to a peer's STag and TO). Messages leave in the order posted on their stream (RFC 5041
//!   §5.3), cut at the MULPDU (RFC 5043 §9) as SCTP has room, each segment one unordered DATA
//!   chunk with the session's next DDP-SSN. A message completes once SCTP's cumulative ack
//!   covers its last segment (RFC 5041 §5.4, Data Source). Untagged MSNs are counted per queue
//!   from 1 (RFC 5041 §5.1.2).
//! - **Receiving.** A segment first passes the session (is it legal in the §6.1 pattern, in
//!   the §10 window?), then [`StreamRx`] (the §7.1 checks, placement, in-order delivery).
//!   Untagged messages complete the posted receive in posting order; tagged ones are
//!   indicated with their STag and RsvdULP (RFC 5041 §5.4).
//! - **Errors.** The first receive error on a stream is indicated with the DDP header and
//!   segment length; later segments are dropped (RFC 5041 §7.1). The ULP may then post one
//!   more message, for example an RDMAP Terminate (§7.1: "SHOULD enable the ULP to send one
//!   additional DDP Message before terminating the DDP Stream"); once everything posted has
//!   gone to SCTP, the session is terminated.
//! - **Session control elsewhere.** With [`Connection::set_remote_sessions`] (the runtime's
//!   data cores), a DDP Stream Session Control message leaves with its stream's session
//!   ([`Connection::poll_session_call`]); the control thread runs the §6 machine on it and the
//!   session comes back ([`Connection::return_session`]). Meanwhile only that stream waits:
//!   its later chunks and the ULP's operations on it ([`Connection::apply`]) are held, in
//!   arrival order, so the machine still sees the stream in order; the other streams and the
//!   association go on.
//! - **Receive buffer.** What the connection holds for the peer (chunks of a stream whose
//!   session is away, indications the ULP has not polled) is its receive buffer: each SACK
//!   advertises what is left (RFC 9260 §6.2), and new DATA beyond it is dropped
//!   unacknowledged and counted, never buffered.
//! - **The association's end** terminates every session (RFC 5043 §11.3), flushes every
//!   queued send and posted receive, and is indicated once. A peer restart does the same to
//!   the sessions (the peer kept none) but the association lives on.

use std::collections::VecDeque;
use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ddpdk_dataplane::ddp::{
    self, emit_segment, emit_segment_header, HeaderCopy, MessageInfo, Regions, RxError, StreamRx,
};
use ddpdk_dataplane::ddp::{Target, TxError};
use ddpdk_dataplane::mem::{Pd, PostedBuffer, QueueFull, Stag, StreamId};
use ddpdk_dataplane::sctp::{
    Association, CloseReason, Deliver, Discard, Endpoint, Event as SctpEvent, ExtRef, Hole,
    Instant, Message as SctpMessage, Outcome, SendError,
};
use ddpdk_dataplane::wire::crc32c;
use ddpdk_dataplane::wire::ddp::{
    max_payload, FunctionCode, Segments, SessionControlPacket, DDP_SSN_LEN, PPID_DDP_SEGMENT,
    PPID_SESSION_CONTROL,
};

use crate::memory::{Place, RegionId, RegionTable};
use crate::session::{
    Event as SessionEvent, LocalError, PendingLimit, Session, State, TerminationReason,
};

/// SCTP chunk type of COOKIE ECHO (RFC 9260 §3.3.11).
const COOKIE_ECHO: u8 = 10;

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
            | Op::PostRecv { stream, .. } => Some(*stream),
            Op::PostSend(req) => Some(req.stream),
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
            Op::Shutdown => "shutdown",
            Op::Abort => "abort",
        }
    }
}

/// What [`Connection::apply`] did with an [`Op`].
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
    Deferred,
}

/// The result of an operation that was [`Applied::Deferred`], once applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpResult {
    pub op: &'static str,
    pub result: Result<Applied, PostError>,
}

/// Sizes fixed when a connection is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnConfig {
    /// Untagged queues per DDP stream: QN 0 .. queues-1 (RFC 5041 §5.1.2; RDMAP uses 3).
    pub queues: u32,
    /// Receive buffers each queue can hold posted.
    pub recv_depth: usize,
    /// Send work requests queued (not yet wholly handed to SCTP) across the connection.
    pub max_sends: usize,
    /// What ends a stream after its first receive error.
    pub on_receive_error: OnReceiveError,
}

impl Default for ConnConfig {
    fn default() -> Self {
        ConnConfig {
            queues: 3,
            recv_depth: 256,
            max_sends: 4096,
            on_receive_error: OnReceiveError::Terminate,
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
    /// After a receive error the one further message is already posted (RFC 5041 §7.1).
    StreamFailed,
    /// QN beyond the stream's queues (receive side).
    InvalidQn,
    /// The queue or the connection's send queue is full.
    Full,
    Tx(TxError),
    /// A [`Payload::Region`] names no region of this endpoint, or bytes outside it.
    BadRegion,
    /// A [`Payload::Local`] names no registration of this endpoint, one of another protection
    /// domain than the stream's session, or bytes outside it (or was posted unresolved).
    BadLocalStag,
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
    },
    /// A posted receive returned unused: its session ended.
    RecvFlushed { stream: u16, qn: u32, wr_id: u64 },
    /// The peer restarted (RFC 9260 §5.2.4): every session ended; the association continues.
    PeerRestarted,
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

/// Counters: everything dropped is counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnStats {
    pub segments_sent: u64,
    pub control_sent: u64,
    pub segments_received: u64,
    pub control_received: u64,
    /// Chunks whose PPID is neither 16 nor 17 (RFC 5043 §5.2).
    pub unknown_ppid: u64,
    /// Segments the session refused (illegal in the §6.1 pattern or outside the §10 window).
    pub refused_by_session: u64,
    /// Segments that arrived after this side's session ended.
    pub after_session_end: u64,
    pub messages_sent: u64,
    pub flushed_sends: u64,
    pub flushed_receives: u64,
    /// DDP chunks on a stream we keep no state for (SCTP checks stream ids, so none expected).
    pub unknown_stream: u64,
    /// Session control messages the session refused (each ends the session, RFC 5043 §6.1).
    pub control_refused: u64,
    /// Control messages SCTP no longer took (the association was closing).
    pub control_lost: u64,
    /// Control messages whose session machine ran on another thread ([`SessionCall`]).
    pub sessions_lent: u64,
    /// Streams whose receive path failed: the first error of each, indicated to the ULP
    /// (RFC 5041 §7.1; the segments after it are counted per stream, `RxStats`).
    pub receive_errors: u64,
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
}

#[derive(Debug)]
struct PendingSend {
    req: SendRequest,
    target: Target,
    /// Octet offset of the next segment.
    offset: u32,
}

/// Stream identities (RFC 5041 §8.2 "DDP Stream ID", local only) are unique for the life of the
/// process: one per session, whatever the connection, so memory bound to one session is never
/// usable from another, here or on another connection.
static NEXT_STREAM_ID: AtomicU64 = AtomicU64::new(1);

#[derive(Debug)]
struct DdpStream {
    session: Session,
    sid: StreamId,
    /// Counts sessions on this stream id, so that late acknowledgements and stream-bound
    /// STags of an earlier session never apply to a later one.
    generation: u32,
    rx: Option<StreamRx>,
    /// Posted receive `wr_id`s per QN, in posting (= MSN) order.
    posted: Vec<VecDeque<u64>>,
    /// Next MSN per QN we send to, from 1 (RFC 5041 §5.1.2); (QN, MSN) pairs.
    next_msn: Vec<(u32, u32)>,
    sends: VecDeque<PendingSend>,
    /// A control message SCTP had no room for.
    control: Option<crate::session::Transmit>,
    /// After a receive error: how many more messages the ULP may post (RFC 5041 §7.1).
    grace: Option<u8>,
    /// On the ready list.
    ready: bool,
    /// The session is away at the control thread ([`SessionCall`]); `session` holds a
    /// placeholder meanwhile.
    lent: Option<Box<Lent>>,
}

/// What happened on a stream while its session was away.
#[derive(Debug)]
struct Lent {
    /// The session's state when it left (what [`Connection::session_state`] reports).
    state: State,
    /// This stream's DDP chunks that came behind the control message, and the ULP's
    /// operations on the stream, in arrival order, to be applied once the session is back.
    /// Nothing of other streams waits: only the stream whose session is away is parked.
    held: VecDeque<Held>,
    /// Our chunks SCTP acknowledged meanwhile (their DDP-SSNs).
    acks: Vec<u16>,
    /// The association ended (or the peer restarted) meanwhile.
    ended: bool,
}

/// A chunk or an operation waiting for its stream's session ([`Lent::held`]).
#[derive(Debug)]
enum Held {
    Chunk { ppid: u32, data: Vec<u8> },
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
    stream: u16,
    generation: u32,
    session: Box<Session>,
    ssn: u16,
    function: FunctionCode,
    private_data: Vec<u8>,
    result: Option<Result<(), crate::session::ProtocolError>>,
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

impl DdpStream {
    fn new(limit: &PendingLimit, generation: u32) -> DdpStream {
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
        }
    }
}

/// One of our SCTP messages not yet settled.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    number: u64,
    stream: u16,
    generation: u32,
    ddp_ssn: u16,
    /// The send it completes, if it is a message's last segment: its `wr_id` and whether a
    /// success is reported (a failure always is).
    completion: Option<(u64, bool)>,
    /// The completion is a `Flushed` one, held until this chunk settles: the send was cut
    /// short, but its segments already in SCTP's queue read the ULP's region until then.
    flushed: bool,
}

/// See the module documentation.
#[derive(Debug)]
pub struct Connection {
    assoc: Association,
    cfg: ConnConfig,
    limit: PendingLimit,
    streams: Vec<DdpStream>,
    ready: VecDeque<u16>,
    in_flight: VecDeque<InFlight>,
    sink: Sink,
    segment: Vec<u8>,
    /// Where [`Payload::Region`] sends read from ([`Connection::use_regions`]).
    regions: Option<Arc<RegionTable>>,
    /// Session control messages go to another thread with their session
    /// ([`Connection::set_remote_sessions`]).
    remote_sessions: bool,
    connected: bool,
    closed: bool,
    /// The largest MULPDU announced to the ULP (RFC 5043 §9): segments above it are refused.
    /// A path MTU that shrinks later lowers what we send, not what the peer was told it may.
    rx_mulpdu: usize,
    /// The ULP asked for a SHUTDOWN while a session was away ([`Connection::apply`]).
    shutdown_deferred: bool,
}

impl Connection {
    /// Wraps an association (connecting, or just accepted by an `Endpoint`). `limit` is the
    /// endpoint's pending-Initiate limit (RFC 5043 §6.4), shared by its connections.
    pub fn new(assoc: Association, cfg: ConnConfig, limit: PendingLimit) -> Connection {
        let mut c = Connection {
            assoc,
            cfg,
            limit,
            streams: Vec::new(),
            ready: VecDeque::new(),
            in_flight: VecDeque::new(),
            sink: Sink::default(),
            segment: Vec::new(),
            regions: None,
            remote_sessions: false,
            connected: false,
            closed: false,
            rx_mulpdu: 0,
            shutdown_deferred: false,
        };
        c.after_sctp();
        c
    }

    /// The endpoint's regions, so that sends may name their bytes there ([`Payload::Region`]).
    pub fn use_regions(&mut self, regions: Arc<RegionTable>) {
        self.regions = Some(regions);
    }

    /// The peer's address as packets carry it (the association keeps IPv4 as v4-mapped IPv6).
    pub fn peer_ip(&self) -> IpAddr {
        let v6 = std::net::Ipv6Addr::from(self.assoc.peer_addr());
        match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        }
    }

    pub fn association(&self) -> &Association {
        &self.assoc
    }

    pub fn stats(&self) -> &ConnStats {
        &self.sink.stats
    }

    /// Whether the association has ended.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// With `on`, the device computes the CRC32c of every packet this connection sends.
    pub fn set_tx_checksum_offload(&mut self, on: bool) {
        self.assoc.set_tx_checksum_offload(on);
    }

    /// A new path MTU (RFC 5043 §9: the MULPDU follows it for the next segments).
    pub fn set_path_mtu(&mut self, mtu: usize) {
        self.assoc.set_path_mtu(mtu);
    }

    /// Graceful SCTP shutdown once everything queued is acknowledged.
    pub fn shutdown(&mut self, now: Instant) {
        self.assoc.shutdown(now);
        self.after_sctp();
    }

    pub fn abort(&mut self) {
        self.assoc.abort();
        self.after_sctp();
    }

    /// RFC 4296 `ddp_max_msizes`: the MULPDU and the largest untagged and tagged messages one
    /// segment carries, for the path as it is now.
    pub fn max_sizes(&self) -> MaxSizes {
        let mulpdu = ddp::mulpdu(self.assoc.max_message());
        MaxSizes {
            mulpdu,
            untagged: max_payload(mulpdu, false),
            tagged: max_payload(mulpdu, true),
        }
    }

    /// The local identity of the current session on `stream`, for registrations bound to it
    /// (RFC 5041 §8.2): unique per session, across connections.
    pub fn stream_id(&self, stream: u16) -> Option<StreamId> {
        Some(self.streams.get(usize::from(stream))?.sid)
    }

    /// The session state of `stream`.
    pub fn session_state(&self, stream: u16) -> Option<State> {
        let s = self.streams.get(usize::from(stream))?;
        Some(
            s.lent
                .as_ref()
                .map_or_else(|| s.session.state(), |l| l.state),
        )
    }

    // ---- the session machine on another thread ----

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
        let Some(s) = self.streams.get_mut(usize::from(stream)) else {
            return;
        };
        let Some(lent) = s.lent.take() else {
            return;
        };
        self.sink.lent -= 1;
        // Not this stream's session any more (nothing renews a stream while its session is
        // away, so this is only defence): the stream is free again, the old session dropped.
        if s.generation != call.generation {
            return;
        }
        call.run();
        s.session = *call.session;
        for ssn in lent.acks {
            let _ = s.session.on_acked(ssn);
        }
        if lent.ended {
            // Its end was told when the association ended; what the machine said of the
            // message since is moot.
            s.session.association_ended();
            while s.session.poll_event().is_some() {}
        }
        // The message's events come before anything it or the chunks behind it deliver.
        if indicate_events(stream, s, &mut self.sink) {
            self.sink.wake.push(stream);
        }
        if call.result == Some(Ok(())) {
            // Messages after it in DDP-SSN order may now be delivered (the active side's
            // first segments wait for the Accept).
            let DdpStream {
                rx, posted, grace, ..
            } = s;
            if let Some(rx) = rx.as_mut() {
                let sink = &mut self.sink;
                let _ = rx.on_control(call.ssn, &mut |ind| {
                    indicate(stream, posted, grace, sink, ind)
                });
            }
        } else {
            self.sink.stats.control_refused += 1;
        }
        self.sink.touched = true;
        // What waited for the session, in arrival order, until a control message among it
        // sends the session away again (the rest then waits for that one).
        let (mut held, ended) = (lent.held, lent.ended);
        while let Some(item) = held.pop_front() {
            match item {
                Held::Chunk { ppid, data } => {
                    self.sink.held_bytes -= data.len();
                    // Chunks behind the message of an association that has ended meanwhile
                    // start nothing (a held Initiate would open a session on a closed
                    // association).
                    if !ended {
                        self.route_one(stream, ppid, &data, memory);
                    }
                }
                Held::Op(op) => {
                    self.sink.held_ops -= 1;
                    let name = op.name();
                    let result = self.apply_stream_op(op, memory.stags);
                    self.sink
                        .op_results
                        .push_back(OpResult { op: name, result });
                }
            }
            if let Some(again) = self.streams[usize::from(stream)].lent.as_mut() {
                again.held.extend(held.drain(..));
                break;
            }
        }
        if self.shutdown_deferred && !self.sessions_lent() {
            self.shutdown_deferred = false;
            self.shutdown(now);
        }
        self.progress();
    }

    // ---- the ULP's operations, as the runtime's cores apply them ----

    /// Applies a ULP operation. One on a stream whose session is away at the control thread
    /// waits for it, in order with the stream's chunks ([`Applied::Deferred`]; its result
    /// comes from [`Connection::poll_op_result`]); the other streams go on. A local STag of
    /// a send is resolved against `stags` (the caller's STag table) when the send is applied.
    /// A SHUTDOWN waits until no session is away; an ABORT never waits.
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

    /// The result of an operation that [`Connection::apply`] deferred, once applied.
    pub fn poll_op_result(&mut self) -> Option<OpResult> {
        self.sink.op_results.pop_front()
    }

    fn apply_stream_op(
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
                self.post_recv(stream, qn, wr_id, buffer)?;
                return Ok(Applied::Posted { stream, qn, wr_id });
            }
            Op::PostSend(mut req) => {
                // A local STag is checked against the caller's STag table, as placement is.
                let data = std::mem::replace(&mut req.data, Payload::Bytes(Vec::new()));
                req.data = self.resolve_local(req.stream, data, stags)?;
                self.post_send(req)
            }
            // Not a stream's: `apply` takes them.
            Op::Shutdown | Op::Abort => Ok(()),
        }
        .map(|()| Applied::Done)
    }

    // ---- sessions (RFC 5043 §6) ----

    /// Starts a session on `stream` as the active side, for protection domain `pd` (RFC 5043
    /// §6: one PD per session). A stream whose previous session is over may be reused once
    /// none of its chunks can be outstanding (§6.6).
    pub fn initiate(&mut self, stream: u16, pd: Pd, private_data: &[u8]) -> Result<(), PostError> {
        self.reuse_if_over(stream)?;
        let s = &mut self.streams[usize::from(stream)];
        s.session.initiate(private_data)?;
        open_receive(s, pd, &self.cfg, true);
        self.mark_ready(stream);
        self.progress();
        Ok(())
    }

    /// Accepts the Initiate pending on `stream` for protection domain `pd` (§6.2).
    pub fn accept(&mut self, stream: u16, pd: Pd, private_data: &[u8]) -> Result<(), PostError> {
        self.check_stream(stream)?;
        let s = &mut self.streams[usize::from(stream)];
        s.session.accept(private_data)?;
        open_receive(s, pd, &self.cfg, false);
        self.mark_ready(stream);
        self.progress();
        Ok(())
    }

    /// Rejects the Initiate pending on `stream` (§6.3).
    pub fn reject(&mut self, stream: u16, private_data: &[u8]) -> Result<(), PostError> {
        self.check_stream(stream)?;
        self.streams[usize::from(stream)]
            .session
            .reject(private_data)?;
        self.mark_ready(stream);
        self.progress();
        Ok(())
    }

    /// Ends the session on `stream` with a Terminate (§6.2), or refuses a pending Initiate
    /// with one (§6.4). Sends not yet handed to SCTP are flushed; the association goes on
    /// (RFC 5043 §11.3).
    pub fn terminate(&mut self, stream: u16) -> Result<(), PostError> {
        self.check_stream(stream)?;
        self.streams[usize::from(stream)].session.terminate()?;
        self.mark_ready(stream);
        self.progress();
        Ok(())
    }

    // ---- data (RFC 4296 §2.1.2) ----

    /// RFC 4296 `ddp_post_recv`: `buffer` (from [`Memory::receive_buffer`]) takes the next
    /// untagged message on queue `qn` of `stream`; its MSN is the number of buffers posted to
    /// the queue before it, plus one.
    pub fn post_recv(
        &mut self,
        stream: u16,
        qn: u32,
        wr_id: u64,
        buffer: PostedBuffer,
    ) -> Result<(), PostError> {
        self.check_stream(stream)?;
        let s = &mut self.streams[usize::from(stream)];
        if matches!(s.session.state(), State::Terminated(_)) {
            return Err(PostError::Session(LocalError::Terminated));
        }
        let rx =
            s.rx.as_mut()
                .ok_or(PostError::Session(LocalError::NotEstablished))?;
        let posted = s.posted.get_mut(qn as usize).ok_or(PostError::InvalidQn)?;
        rx.post(qn, buffer).map_err(|QueueFull| PostError::Full)?;
        posted.push_back(wr_id);
        Ok(())
    }

    /// RFC 4296 `ddp_send` / `ddp_send_ddp`: queues a message on its stream. It leaves once
    /// the session allows segments (§6.2, §6.6), in posting order.
    pub fn post_send(&mut self, req: SendRequest) -> Result<(), PostError> {
        self.check_stream(req.stream)?;
        if self.sink.queued_sends >= self.cfg.max_sends {
            return Err(PostError::Full);
        }
        let len = u32::try_from(req.data.len()).map_err(|_| PostError::Tx(TxError::TooLong))?;
        if matches!(req.data, Payload::Local { .. }) {
            return Err(PostError::BadLocalStag);
        }
        if let Payload::Region {
            region,
            offset,
            len,
        } = req.data
        {
            let r = self
                .regions
                .as_deref()
                .and_then(|t| t.region(region.0))
                .ok_or(PostError::BadRegion)?;
            if offset
                .checked_add(u64::from(len))
                .is_none_or(|end| end > r.len() as u64)
            {
                return Err(PostError::BadRegion);
            }
        }
        let stream = req.stream;
        let s = &mut self.streams[usize::from(stream)];
        if s.grace == Some(0) {
            return Err(PostError::StreamFailed);
        }
        match s.session.state() {
            State::Established | State::InitiateSent => {}
            State::Idle => return Err(LocalError::NoSession.into()),
            State::InitiateReceived => return Err(LocalError::NotEstablished.into()),
            State::Terminated(_) => return Err(LocalError::Terminated.into()),
        }
        let target = match req.kind {
            SendKind::Tagged { stag, to, rsvd_ulp } => {
                // RFC 5041 §7.1 check 5 at the source: the Data Sink would refuse it.
                to.checked_add(u64::from(len))
                    .ok_or(PostError::Tx(TxError::ToWrap))?;
                Target::Tagged {
                    stag: stag.0,
                    to,
                    rsvd_ulp,
                }
            }
            SendKind::Untagged { qn, rsvd_ulp } => {
                let msn = match s.next_msn.iter_mut().find(|(q, _)| *q == qn) {
                    Some((_, next)) => {
                        let m = *next;
                        *next = next.wrapping_add(1);
                        m
                    }
                    None => {
                        s.next_msn.push((qn, 2));
                        1
                    }
                };
                Target::Untagged { qn, msn, rsvd_ulp }
            }
        };
        if let Some(g) = s.grace.as_mut() {
            *g -= 1;
        }
        s.sends.push_back(PendingSend {
            req,
            target,
            offset: 0,
        });
        self.sink.queued_sends += 1;
        self.mark_ready(stream);
        self.progress();
        Ok(())
    }

    /// Whether completions or indications wait to be polled.
    pub fn owes_ulp(&self) -> bool {
        !self.sink.completions.is_empty()
            || !self.sink.indications.is_empty()
            || !self.sink.op_results.is_empty()
    }

    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.sink.completions.pop_front()
    }

    pub fn poll_indication(&mut self) -> Option<Indication> {
        self.sink.indications.pop_front()
    }

    // ---- SCTP ----

    /// One SCTP packet for this association. Its DDP chunks are checked against `place`'s STag
    /// table (the master, `&Memory`, or a data core's replica), placed into its regions
    /// and delivered before this returns.
    pub fn handle<'m>(
        &mut self,
        now: Instant,
        packet: &[u8],
        place: impl Into<Place<'m>>,
    ) -> Result<(), Discard> {
        self.handle_checked(now, packet, place, false)
    }

    /// As [`Connection::handle`], for a packet whose CRC32c the receiving device already found
    /// good (RX checksum offload).
    pub fn handle_checked<'m>(
        &mut self,
        now: Instant,
        packet: &[u8],
        place: impl Into<Place<'m>>,
        checksum_verified: bool,
    ) -> Result<(), Discard> {
        let memory = place.into();
        // A COOKIE ECHO comes first in its packet (RFC 9260 §5.1) and may restart the
        // association (§5.2.4): the DDP chunks bundled with it belong to the peer's new
        // incarnation, so they are routed only after the restart has ended the old sessions.
        // Rare, so the copy does not matter.
        if packet.get(12) == Some(&COOKIE_ECHO) {
            let mut early = Vec::new();
            let r = self.assoc.handle_checked(
                now,
                packet,
                &mut |m: SctpMessage<'_>| early.push((m.stream, m.ppid, m.data.to_vec())),
                checksum_verified,
            );
            self.after_sctp();
            for (stream, ppid, data) in early {
                self.route_one(stream, ppid, &data, memory);
            }
            return r;
        }
        self.grow_streams();
        let Connection {
            assoc,
            streams,
            sink,
            limit,
            remote_sessions,
            connected,
            rx_mulpdu,
            ..
        } = self;
        let how = Routing {
            remote: *remote_sessions,
            connected: *connected,
            mulpdu: (*rx_mulpdu).max(ddp::mulpdu(assoc.max_message())),
            budget: assoc.receive_buffer(),
        };
        let mut router = Router {
            streams,
            memory,
            sink,
            limit,
            how,
        };
        let r = assoc.handle_checked(now, packet, &mut router, checksum_verified);
        self.after_sctp();
        r
    }

    /// A chunk that reached us outside [`Connection::handle`] (bundled with the COOKIE ECHO
    /// that created the association).
    fn route_one(&mut self, stream: u16, ppid: u32, data: &[u8], memory: Place<'_>) {
        self.grow_streams();
        let m = SctpMessage {
            stream,
            ppid,
            tsn: 0,
            data,
        };
        let how = Routing {
            remote: self.remote_sessions,
            connected: self.connected,
            mulpdu: self.rx_mulpdu.max(ddp::mulpdu(self.assoc.max_message())),
            budget: self.assoc.receive_buffer(),
        };
        route(
            m,
            &mut self.streams,
            memory,
            &mut self.sink,
            &self.limit,
            how,
        );
        self.progress();
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.assoc.poll_timeout()
    }

    /// A SACK is owed before the next packet is handled ([`Association::sack_due`]).
    pub fn sack_due(&self) -> bool {
        self.assoc.sack_due()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.assoc.handle_timeout(now);
        self.after_sctp();
    }

    /// The next SCTP packet to send, written to `buf` whole: region bytes of
    /// [`Payload::Region`] sends are copied in, and the CRC32c filled (unless the device
    /// computes it).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.pump();
        self.session_events();
        self.tell_room();
        let n = self.assoc.poll_transmit(now, buf)?;
        let holes = self.assoc.holes();
        if holes.is_empty() {
            return Some(n);
        }
        // Spans were checked against the regions when posted, and regions are never removed,
        // so every read succeeds (only swapping in another table with `use_regions` after
        // posting could make one fail, leaving stale bytes in the packet).
        if let Some(regions) = self.regions.as_deref() {
            for h in holes {
                if let Some(r) = regions.region(h.ext.key) {
                    let _ = r.read(h.ext.offset, &mut buf[h.at..h.at + h.ext.len as usize]);
                }
            }
        }
        if !self.assoc.tx_checksum_offload() {
            crc32c::fill(&mut buf[..n]);
        }
        Some(n)
    }

    /// As [`Connection::poll_transmit`], leaving region bytes out: the packet has a hole for
    /// each span (in order), and while there are holes its CRC32c is zero. The caller sends
    /// the spans by reference (a buffer chain) and computes the checksum, or has the device
    /// do it. Spans are within the regions of [`Connection::use_regions`] (checked when
    /// posted) and unchanged until their sends complete.
    pub fn poll_transmit_gather(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Option<(usize, &[Hole])> {
        self.pump();
        self.session_events();
        self.tell_room();
        let n = self.assoc.poll_transmit(now, buf)?;
        Some((n, self.assoc.holes()))
    }

    /// Tells SCTP how much of the receive buffer is free now, for the a_rwnd of the next
    /// SACK: the ULP may have taken indications since the last packet.
    fn tell_room(&mut self) {
        let room = self.sink.room(self.assoc.receive_buffer());
        self.assoc.set_receive_room(room);
    }

    /// The receive buffer not taken by what the connection holds for the ULP (chunks of
    /// streams whose session is away, indications not yet polled).
    pub fn receive_room(&self) -> usize {
        self.sink.room(self.assoc.receive_buffer())
    }

    /// The regions sends may read from.
    pub fn regions(&self) -> Option<&Arc<RegionTable>> {
        self.regions.as_ref()
    }

    /// Resolves a [`Payload::Local`] of a send on `stream` against `stags` (the STag table
    /// the caller places with) into the [`Payload::Region`] it names, after the checks a verbs
    /// provider makes of a local key: the STag is valid (index and key), in the protection
    /// domain of the stream's session, and holds `[to, to + len)`. Local read needs no access
    /// bit (verbs grant it to every registration). Other payloads are returned as they are.
    pub fn resolve_local(
        &self,
        stream: u16,
        data: Payload,
        stags: &ddpdk_dataplane::mem::StagTable,
    ) -> Result<Payload, PostError> {
        let Payload::Local { stag, to, len } = data else {
            return Ok(data);
        };
        let pd = self
            .streams
            .get(usize::from(stream))
            .and_then(|s| s.rx.as_ref())
            .map(StreamRx::pd)
            .ok_or(PostError::Session(LocalError::NotEstablished))?;
        let reg = stags.lookup(stag).ok_or(PostError::BadLocalStag)?;
        let inside = to.checked_sub(reg.to_base).filter(|rel| {
            rel.checked_add(u64::from(len))
                .is_some_and(|end| end <= reg.len)
        });
        match inside {
            Some(rel) if reg.pd == pd => Ok(Payload::Region {
                region: RegionId(reg.memory.region),
                offset: reg.memory.offset + rel,
                len,
            }),
            _ => Err(PostError::BadLocalStag),
        }
    }

    // ---- internals ----

    fn check_stream(&self, stream: u16) -> Result<(), PostError> {
        if !self.connected || self.closed {
            return Err(PostError::NotConnected);
        }
        // A restart may have negotiated fewer streams than we have state for.
        if usize::from(stream) >= self.streams.len() || stream >= self.assoc.streams() {
            return Err(PostError::InvalidStream);
        }
        // The session is away at the control thread: the caller retries once it is back.
        if self.streams[usize::from(stream)].lent.is_some() {
            return Err(PostError::StreamBusy);
        }
        Ok(())
    }

    fn reuse_if_over(&mut self, stream: u16) -> Result<(), PostError> {
        self.check_stream(stream)?;
        let s = &mut self.streams[usize::from(stream)];
        if matches!(s.session.state(), State::Terminated(_)) {
            if !s.session.can_reuse() || s.control.is_some() {
                return Err(PostError::StreamBusy);
            }
            renew(stream, s, &self.limit, &mut self.sink);
        }
        Ok(())
    }

    fn mark_ready(&mut self, stream: u16) {
        if let Some(s) = self.streams.get_mut(usize::from(stream)) {
            if !s.ready {
                s.ready = true;
                self.ready.push_back(stream);
            }
        }
    }

    fn grow_streams(&mut self) {
        let n = usize::from(self.assoc.streams());
        while self.streams.len() < n {
            self.streams.push(DdpStream::new(&self.limit, 0));
        }
    }

    /// After anything SCTP did: its events, then what its acknowledgements settled, then the
    /// sessions' events, then more to send.
    fn after_sctp(&mut self) {
        self.grow_streams();
        while let Some(e) = self.assoc.poll_event() {
            match e {
                SctpEvent::Connected { streams, .. } => {
                    self.connected = true;
                    let mulpdu = self.max_sizes().mulpdu;
                    self.rx_mulpdu = self.rx_mulpdu.max(mulpdu);
                    self.sink
                        .indications
                        .push_back(Indication::Connected { streams, mulpdu });
                }
                SctpEvent::Restarted { .. } => {
                    // The peer kept no DDP state; what we had queued for it is gone.
                    self.end_all_sessions();
                    self.sink.indications.push_back(Indication::PeerRestarted);
                }
                SctpEvent::ShutdownReceived => {}
                SctpEvent::Closed(reason) => {
                    self.end_all_sessions();
                    self.closed = true;
                    self.sink.indications.push_back(Indication::Closed(reason));
                }
            }
        }
        self.settle();
        self.session_events();
        self.pump();
        self.session_events();
    }

    fn end_all_sessions(&mut self) {
        // Messages below `dropped_from` were acknowledged before the restart or close (perhaps
        // by a SACK in the same packet); the rest were dropped.
        let acked_before = self.assoc.dropped_from();
        for f in self.in_flight.drain(..) {
            let Some((wr_id, signaled)) = f.completion else {
                continue;
            };
            let status = if f.flushed {
                // Cut short earlier (and counted then); its segments have settled now.
                Status::Flushed
            } else if f.number < acked_before {
                Status::Success
            } else {
                self.sink.stats.flushed_sends += 1;
                Status::Flushed
            };
            if signaled || status == Status::Flushed {
                self.sink.completions.push_back(Completion {
                    wr_id,
                    stream: f.stream,
                    status,
                });
            }
        }
        for (i, s) in self.streams.iter_mut().enumerate() {
            s.control = None;
            match s.lent.as_mut() {
                // The session is at the control thread: the ULP hears the end now, in order
                // with the association's (§11.3), and the session is ended when it is back.
                Some(lent) if !lent.ended => {
                    lent.ended = true;
                    if !matches!(lent.state, State::Terminated(_)) {
                        lent.state = State::Terminated(TerminationReason::AssociationEnded);
                        self.sink.indications.push_back(Indication::Session {
                            stream: i as u16,
                            event: SessionEvent::SessionTerminated {
                                reason: TerminationReason::AssociationEnded,
                            },
                        });
                    }
                    flush(i as u16, s, &mut self.sink);
                }
                Some(_) => {}
                None => s.session.association_ended(),
            }
        }
        self.sink.touched = true;
        self.session_events();
    }

    /// Our messages below SCTP's settled mark are acknowledged (events already handled the
    /// dropped ones): tell their sessions, complete their sends.
    fn settle(&mut self) {
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
                    self.sink.touched = true;
                }
            }
            match f.completion {
                Some((wr_id, _)) if f.flushed => self.sink.completions.push_back(Completion {
                    wr_id,
                    stream: f.stream,
                    status: Status::Flushed,
                }),
                Some((wr_id, true)) => self.sink.completions.push_back(Completion {
                    wr_id,
                    stream: f.stream,
                    status: Status::Success,
                }),
                _ => {}
            }
            // An ack may release a held-back Terminate or widen the §10 window.
            self.mark_ready(f.stream);
        }
    }

    /// Hangs each cut-short region send's Flushed completion on its stream's last chunk in
    /// SCTP's queue, so that it comes when that chunk settles (acknowledged or dropped); at
    /// once if none is left.
    fn defer_flushed(&mut self) {
        for (stream, generation, wr_id) in std::mem::take(&mut self.sink.deferred) {
            let last = self
                .in_flight
                .iter_mut()
                .rev()
                .find(|f| f.stream == stream && f.generation == generation);
            match last {
                Some(f) if f.completion.is_none() => {
                    f.completion = Some((wr_id, true));
                    f.flushed = true;
                }
                _ => self.sink.completions.push_back(Completion {
                    wr_id,
                    stream,
                    status: Status::Flushed,
                }),
            }
        }
    }

    /// After a ULP call: its session events, more to send, and what sending caused.
    fn progress(&mut self) {
        self.sink.touched = true;
        self.session_events();
        self.pump();
        self.session_events();
    }

    /// Moves session events to the ULP; a session that ended flushes its stream.
    fn session_events(&mut self) {
        if !self.sink.faulted.is_empty() {
            self.end_faulted();
        }
        if !std::mem::take(&mut self.sink.touched) {
            return;
        }
        for (i, s) in self.streams.iter_mut().enumerate() {
            // Any event may come with a control message to send (an Accept proving the
            // Initiate arrived releases a held-back Terminate, §6.6).
            if drain_events(i as u16, s, &mut self.sink) && !s.ready {
                s.ready = true;
                self.ready.push_back(i as u16);
            }
        }
        for (i, generation) in std::mem::take(&mut self.sink.end_flush) {
            if let Some(s) = self.streams.get_mut(usize::from(i)) {
                if s.generation == generation {
                    end_flush(i, s, &mut self.sink);
                }
            }
        }
        for i in std::mem::take(&mut self.sink.wake) {
            if let Some(s) = self.streams.get_mut(usize::from(i)) {
                if !s.ready {
                    s.ready = true;
                    self.ready.push_back(i);
                }
            }
        }
        if !self.sink.deferred.is_empty() {
            self.defer_flushed();
        }
    }

    /// Ends the sessions of streams whose receive path failed, as the endpoint's ULP
    /// ([`OnReceiveError::Terminate`]; RFC 5041 §6.2.2): the error was indicated first, and
    /// the Terminate tells the peer that nothing more on the stream will be placed.
    fn end_faulted(&mut self) {
        let faulted = std::mem::take(&mut self.sink.faulted);
        if self.cfg.on_receive_error != OnReceiveError::Terminate {
            return;
        }
        for (stream, error) in faulted {
            let Some(s) = self.streams.get_mut(usize::from(stream)) else {
                continue;
            };
            if s.lent.is_none() && s.session.terminate_for_error(error).is_ok() {
                self.sink.stats.sessions_faulted += 1;
                self.sink.touched = true;
                self.mark_ready(stream);
            }
        }
    }

    /// Hands control messages and segments to SCTP while it has room, streams taking turns
    /// one segment at a time.
    fn pump(&mut self) {
        if !self.connected || self.closed {
            return;
        }
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
    fn send_one(&mut self, stream: u16, mulpdu: usize) -> Turn {
        let i = usize::from(stream);
        let s = &mut self.streams[i];
        // Nothing of the stream leaves while its session is away.
        if s.lent.is_some() {
            return Turn::Blocked;
        }
        // Control messages first: they open and close the session.
        if let Some(t) = s.control.take().or_else(|| s.session.poll_transmit()) {
            self.sink.touched = true;
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
                self.sink.touched = true;
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
            let p = s.sends.pop_front().map(|p| p.req);
            self.sink.queued_sends -= 1;
            self.sink.stats.messages_sent += 1;
            if let Some(req) = p {
                completion = Some((req.wr_id, req.signaled));
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

/// The DDP side of an SCTP endpoint: makes [`Connection`]s, actively ([`Listener::connect`])
/// or from a peer's COOKIE ECHO ([`Listener::handle`]), all sharing one pending-Initiate
/// limit (RFC 5043 §6.4).
#[derive(Debug)]
pub struct Listener {
    endpoint: Endpoint,
    cfg: ConnConfig,
    limit: PendingLimit,
    early: Vec<(u16, u32, Vec<u8>)>,
}

/// What [`Listener::handle`] made of a packet that matched no connection.
#[derive(Debug)]
pub enum Accept {
    /// Nothing to send (the endpoint counts why).
    Ignored,
    /// A reply of this many bytes is in the output buffer, to the packet's source.
    Reply(usize),
    /// A new connection; it holds its COOKIE ACK to send.
    Connection(Box<Connection>),
}

impl Listener {
    pub fn new(endpoint: Endpoint, cfg: ConnConfig, limit: PendingLimit) -> Listener {
        Listener {
            endpoint,
            cfg,
            limit,
            early: Vec::new(),
        }
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Starts an association to `peer`.
    pub fn connect(&mut self, now: Instant, peer: IpAddr, port: u16) -> Connection {
        let assoc = self.endpoint.connect(now, peer, port);
        Connection::new(assoc, self.cfg, self.limit.clone())
    }

    /// A packet from `peer` that matched no connection. DDP chunks bundled with a COOKIE ECHO
    /// (an Initiate sent from COOKIE-WAIT) reach the new connection's sessions.
    pub fn handle<'m>(
        &mut self,
        now: Instant,
        peer: IpAddr,
        packet: &[u8],
        out: &mut [u8],
        place: impl Into<Place<'m>>,
    ) -> Accept {
        let memory = place.into();
        let early = &mut self.early;
        early.clear();
        let outcome = self
            .endpoint
            .handle(now, peer, packet, out, &mut |m: SctpMessage<'_>| {
                early.push((m.stream, m.ppid, m.data.to_vec()))
            });
        match outcome {
            Outcome::Ignored(_) => Accept::Ignored,
            Outcome::Reply(n) => Accept::Reply(n),
            Outcome::Accepted(assoc) => {
                let mut c = Connection::new(*assoc, self.cfg, self.limit.clone());
                for (stream, ppid, data) in self.early.drain(..) {
                    c.route_one(stream, ppid, &data, memory);
                }
                Accept::Connection(Box::new(c))
            }
        }
    }
}

/// What the ULP is owed, kept apart from the streams so both can be borrowed at once.
#[derive(Debug, Default)]
struct Sink {
    indications: VecDeque<Indication>,
    completions: VecDeque<Completion>,
    stats: ConnStats,
    /// Send work requests not yet wholly handed to SCTP.
    queued_sends: usize,
    /// A session may have events: set wherever a session is called for anything but an
    /// in-order segment, so the per-packet path does not visit every stream for nothing.
    touched: bool,
    /// Flushed region sends (stream, generation, wr_id) whose Flushed completion waits for
    /// their segments already in SCTP's queue ([`Connection::defer_flushed`]).
    deferred: Vec<(u16, u32, u64)>,
    /// Sessions lent out with a control message, not yet polled.
    calls: VecDeque<SessionCall>,
    /// Streams whose session is away.
    lent: usize,
    /// Streams whose session events were drained where they arose (a control message's, in
    /// the middle of a packet): they may have a control message to send.
    wake: Vec<u16>,
    /// Streams (and their generation) whose session ended in the middle of a packet: what the
    /// end flushes waits for the packet's acknowledgements, so completions keep their order.
    end_flush: Vec<(u16, u32)>,
    /// Streams whose receive path failed in the middle of a packet, and why: with
    /// [`OnReceiveError::Terminate`] their sessions end once the packet is through.
    faulted: Vec<(u16, RxError)>,
    /// Bytes of chunks held for sessions that are away ([`Lent::held`]): they count against
    /// the receive buffer.
    held_bytes: usize,
    /// Operations held for sessions that are away.
    held_ops: usize,
    /// Results of held operations, once applied.
    op_results: VecDeque<OpResult>,
}

/// Memory one indication owed to the ULP takes, counted against the receive buffer: a peer
/// whose messages the ULP does not take fast enough is told a smaller a_rwnd.
const INDICATION_COST: usize = std::mem::size_of::<Indication>();

/// Operations a connection holds for its sessions that are away; more are refused
/// ([`PostError::Full`]).
pub const MAX_HELD_OPS: usize = 4096;

impl Sink {
    /// Bytes of the receive buffer (`budget`) not taken by held chunks and owed indications.
    fn room(&self, budget: usize) -> usize {
        budget.saturating_sub(self.held_bytes + self.indications.len() * INDICATION_COST)
    }
}

/// Moves one stream's session events to the ULP and, once its session has ended, flushes its
/// queued sends and posted receives. Returns whether there was any event.
fn drain_events(stream: u16, s: &mut DdpStream, out: &mut Sink) -> bool {
    let mut any = false;
    while let Some(event) = s.session.poll_event() {
        any = true;
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
fn indicate_events(stream: u16, s: &mut DdpStream, out: &mut Sink) -> bool {
    let mut any = false;
    while let Some(event) = s.session.poll_event() {
        any = true;
        if matches!(event, SessionEvent::SessionTerminated { .. }) {
            out.end_flush.push((stream, s.generation));
        }
        out.indications
            .push_back(Indication::Session { stream, event });
    }
    any
}

/// What a session's end flushes: its queued sends, and its posted receives once nothing more
/// can come for them.
fn end_flush(stream: u16, s: &mut DdpStream, out: &mut Sink) {
    flush_sends(stream, s, out);
    // The peer's Terminate may overtake its last segments (RFC 5043 §6.1: order is by
    // DDP-SSN): they are still placed and delivered, until its direction is done.
    let peer_ended = s.session.state() == State::Terminated(TerminationReason::PeerTerminate);
    if !peer_ended || s.session.inbound_complete() {
        flush_receives(stream, s, out);
    }
}

fn flush(stream: u16, s: &mut DdpStream, out: &mut Sink) {
    flush_sends(stream, s, out);
    flush_receives(stream, s, out);
}

fn flush_sends(stream: u16, s: &mut DdpStream, out: &mut Sink) {
    for p in s.sends.drain(..) {
        out.queued_sends -= 1;
        out.stats.flushed_sends += 1;
        // Part of a region send is in SCTP's queue, still to be read from the region: the ULP
        // gets its buffer back (the completion) only once that part has settled.
        if p.offset > 0 && matches!(p.req.data, Payload::Region { .. }) {
            out.deferred.push((stream, s.generation, p.req.wr_id));
            continue;
        }
        out.completions.push_back(Completion {
            wr_id: p.req.wr_id,
            stream,
            status: Status::Flushed,
        });
    }
}

fn flush_receives(stream: u16, s: &mut DdpStream, out: &mut Sink) {
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
    s.rx = None;
}

/// Replaces a stream whose session is over with a fresh one for the next session, after
/// anything the old one still had to say.
fn renew(stream: u16, s: &mut DdpStream, limit: &PendingLimit, out: &mut Sink) {
    drain_events(stream, s, out);
    flush(stream, s, out);
    // Its id may be on the ready list: keep the flag that says so.
    let ready = s.ready;
    *s = DdpStream::new(limit, s.generation.wrapping_add(1));
    s.ready = ready;
}

enum Turn {
    Sent,
    Blocked,
    Done,
}

/// Gives a stream its receive path for protection domain `pd`. The peer's direction starts
/// with its control message at DDP-SSN 0 (§6.1): the passive side has it already (the
/// Initiate) and expects segments from 1; the active side expects the Accept at 0, and
/// delivers nothing that follows it until it has arrived.
fn open_receive(s: &mut DdpStream, pd: Pd, cfg: &ConnConfig, active: bool) {
    s.rx = Some(StreamRx::new(
        s.sid,
        pd,
        u16::from(!active),
        cfg.queues as usize,
        cfg.recv_depth,
    ));
    s.posted = (0..cfg.queues).map(|_| VecDeque::new()).collect();
}

/// What [`route`] needs to know of the connection besides its streams.
#[derive(Debug, Clone, Copy)]
struct Routing {
    /// Session control messages leave with their session ([`Connection::set_remote_sessions`]).
    remote: bool,
    /// The association's Connected has been indicated.
    connected: bool,
    /// The largest DDP Segment we announced (RFC 5043 §9).
    mulpdu: usize,
    /// The receive buffer (the a_rwnd of our INIT).
    budget: usize,
}

/// The connection's side of `Association::handle`: each DATA chunk is routed, and what the
/// connection holds on the peer's behalf is the receive buffer SCTP may not overrun.
struct Router<'a, 'm> {
    streams: &'a mut [DdpStream],
    memory: Place<'m>,
    sink: &'a mut Sink,
    limit: &'a PendingLimit,
    how: Routing,
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
        self.sink.room(self.how.budget)
    }
}

/// One DDP chunk from SCTP, during `Association::handle`.
fn route(
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
    let Some(s) = streams.get_mut(usize::from(stream)) else {
        out.stats.unknown_stream += 1;
        return;
    };
    // The session is away with an earlier chunk of the stream: this one waits for it, so the
    // machine sees the stream's chunks in the order they came. The copy counts against the
    // receive buffer until it is routed (SCTP refuses what does not fit: `Router::room`).
    if let Some(lent) = s.lent.as_mut() {
        out.held_bytes += m.data.len();
        out.stats.chunks_held += 1;
        lent.held.push_back(Held::Chunk {
            ppid: m.ppid,
            data: m.data.to_vec(),
        });
        return;
    }
    match m.ppid {
        PPID_SESSION_CONTROL => {
            out.stats.control_received += 1;
            out.touched = true;
            let Ok(p) = SessionControlPacket::new_checked(m.data) else {
                out.stats.control_refused += 1;
                let _ = s.session.on_truncated();
                return;
            };
            let (ssn, function) = (p.ddp_ssn(), p.function_code());
            // The peer starts a new session on a stream whose previous one is over for us
            // (§6.6: that nothing of its old session is outstanding is the initiator's duty).
            if ssn == 0
                && function == FunctionCode::Initiate
                && s.session.accepts_new_session()
                && s.control.is_none()
            {
                renew(stream, s, limit, out);
            }
            if remote {
                // RFC 5043 §6 on the control thread: the session goes with the message.
                let session = std::mem::replace(&mut s.session, Session::new(limit.clone()));
                s.lent = Some(Box::new(Lent {
                    state: session.state(),
                    held: VecDeque::new(),
                    acks: Vec::new(),
                    ended: false,
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
            if verdict.is_err() {
                out.stats.control_refused += 1;
            } else {
                // Messages after it in DDP-SSN order may now be delivered (the active side's
                // first segments wait for the Accept).
                let DdpStream {
                    rx, posted, grace, ..
                } = s;
                if let Some(rx) = rx.as_mut() {
                    let _ =
                        rx.on_control(ssn, &mut |ind| indicate(stream, posted, grace, out, ind));
                }
            }
        }
        PPID_DDP_SEGMENT => {
            out.stats.segments_received += 1;
            let Some(ssn) = m.data.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
                out.stats.refused_by_session += 1;
                let _ = s.session.on_truncated();
                out.touched = true;
                return;
            };
            if s.session.on_segment(ssn).is_err() {
                out.stats.refused_by_session += 1;
                out.touched = true;
                return;
            }
            // After the session ended, only the peer's own last segments, overtaken by its
            // Terminate, are still placed (the receive side stays open for exactly those).
            if let State::Terminated(reason) = s.session.state() {
                if reason != TerminationReason::PeerTerminate {
                    out.stats.after_session_end += 1;
                    return;
                }
            }
            let DdpStream {
                rx, posted, grace, ..
            } = s;
            let Some(rx_path) = rx.as_mut() else {
                out.stats.after_session_end += 1;
                return;
            };
            // RFC 5043 §9: "The SCTP adaptation layer MUST reject DDP Segments that are larger
            // than the maximum size specified", whether or not SCTP had to fragment them. The
            // session counted its DDP-SSN above, so the window moves on; the stream stops.
            let segment_len = m.data.len() - DDP_SSN_LEN;
            if segment_len > how.mulpdu {
                out.stats.oversize_segments += 1;
                let error = RxError::Oversize {
                    len: u32::try_from(segment_len).unwrap_or(u32::MAX),
                    max: u32::try_from(how.mulpdu).unwrap_or(u32::MAX),
                };
                rx_path.refuse(m.data, error, &mut |ind| {
                    indicate(stream, posted, grace, out, ind)
                });
                return;
            }
            rx_path.on_segment(m.data, memory.stags, memory.regions, &mut |ind| {
                indicate(stream, posted, grace, out, ind)
            });
            if matches!(s.session.state(), State::Terminated(_)) && s.session.inbound_complete() {
                flush_receives(stream, s, out);
            }
        }
        _ => out.stats.unknown_ppid += 1,
    }
}

/// One receive-path indication to the ULP.
fn indicate(
    stream: u16,
    posted: &mut [VecDeque<u64>],
    grace: &mut Option<u8>,
    out: &mut Sink,
    ind: ddp::Indication,
) {
    match ind {
        ddp::Indication::Delivered { message, .. } => match message.info {
            MessageInfo::Tagged { stag, rsvd_ulp } => {
                out.indications.push_back(Indication::TaggedDelivered {
                    stream,
                    stag: Stag(stag),
                    rsvd_ulp,
                })
            }
            MessageInfo::Untagged {
                qn,
                msn,
                message_len,
                rsvd_ulp,
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
            out.faulted.push((stream, error));
            out.indications.push_back(Indication::Error {
                stream,
                error,
                header,
                segment_len,
            })
        }
    }
}
