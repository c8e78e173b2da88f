//! The RFC 5043 §6 DDP Stream Session Control state machine of one DDP stream, sans-IO.
//!
//! A DDP stream is the pair of like-numbered SCTP streams of an association (RFC 5043 §6, §8);
//! one [`Session`] follows one DDP Stream Session on it, in both directions. It reads no clock,
//! owns no socket and touches no SCTP state (DESIGN.md, "Protocol cores are sans-IO"):
//!
//! - the ULP drives it with [`Session::initiate`], [`Session::accept`], [`Session::reject`],
//!   [`Session::terminate`], and asks [`Session::next_ddp_ssn`] for the DDP-SSN of every DDP
//!   Segment it sends (PPID 16);
//! - the receive path feeds it every DDP chunk of the stream: [`Session::on_control`] (PPID 17)
//!   and [`Session::on_segment`] (PPID 16, the DDP-SSN only);
//! - SCTP reports delivery with [`Session::on_acked`] / [`Session::acked_through`], and the end
//!   of the association with [`Session::association_ended`];
//! - the caller drains [`Session::poll_transmit`] (control messages to send, each with its
//!   DDP-SSN) and [`Session::poll_event`] (what the ULP must hear).
//!
//! Legality is judged in the *normative* order of RFC 5043 §6.1, the DDP-SSN order, not in the
//! order SCTP happens to deliver unordered chunks: a passive side's segment may arrive at the
//! active side before the Accept that precedes it, and a Terminate may arrive before the last
//! segments; both are legal. Control messages are the exception: §6.6 forbids sending one that
//! may arrive before the sender's previous one, so a Terminate ahead of the passive side's
//! answer is refused. What §6.1 calls a pattern is checked per direction:
//!
//! ```text
//! active  → passive:  Initiate(0) [segments 1.. (only after the Accept arrived)] [Terminate]
//! passive → active:   Accept(0)   [segments 1..]                                [Terminate]
//!                   | Reject(0)                                   (ULP decision, §6.3)
//!                   | Terminate(0)                                (no ULP decision, §6.4)
//! ```
//!
//! Nothing here is on the data path: allocations (event Private Data, the 4 KiB reorder bitmap
//! once chunks arrive out of order) are bounded and happen on the control thread.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use ddpdk_dataplane::ddp::RxError;
use ddpdk_dataplane::wire::ddp::{
    FunctionCode, Message, PrivateData, SessionControlRepr, MAX_PRIVATE_DATA_LEN,
};

/// The receive window of DDP-SSNs: an incoming DDP-SSN must lie in
/// `[lowest not yet received, that + 32768)` (RFC 5043 §10: the DDP-SSN orders chunks "without
/// special logic" while fewer than 32768 are in flight).
pub const SSN_WINDOW: u64 = 32768;

/// At most this many chunks of one stream may be unacknowledged at the sender (RFC 5043 §10:
/// "refrain from sending more than 32767 Data Chunks for a single stream without
/// acknowledgment").
pub const MAX_OUTSTANDING: u64 = 32767;

/// Words of the reorder bitmap: one bit per position of the window.
const BITMAP_WORDS: usize = (SSN_WINDOW / 64) as usize;

/// The DDP-SSN space is 16 bits (RFC 5043 §5.2.1); positions are kept as `u64` counts from the
/// start of the session and only their low 16 bits go on the wire.
const SSN_SPACE: u64 = 1 << 16;

/// Which end of the session this is (RFC 5043 §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Sent the Initiate.
    Active,
    /// Received the Initiate.
    Passive,
}

/// Where the session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// No session on the stream yet.
    Idle,
    /// Active: the Initiate is sent, the response is awaited.
    InitiateSent,
    /// Passive: the Initiate is with the ULP, awaiting its decision (§6.4).
    InitiateReceived,
    /// Accepted: DDP Segments may flow (§6.2).
    Established,
    /// Over; DDP Segments may no longer be sent. Late chunks of the peer that the patterns
    /// allow are still accepted (they were sent before the peer learnt of the end).
    Terminated(TerminationReason),
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TerminationReason {
    /// The local ULP called [`Session::terminate`].
    LocalTerminate,
    /// The peer sent a Terminate.
    PeerTerminate,
    /// The local ULP rejected the Initiate (§6.3).
    LocalReject,
    /// The peer's ULP rejected our Initiate (§6.3).
    PeerReject,
    /// An Initiate arrived with the pending-Initiate limit reached and was answered with a
    /// Terminate without reaching the ULP (§5.2.3, §6.4).
    PendingLimit,
    /// The peer broke the rules (§6.1: "the DDP Stream Session MUST be terminated").
    ProtocolError(ProtocolError),
    /// The SCTP association is gone (§11.3), reported on every stream by the caller.
    AssociationEnded,
    /// The stream's receive path failed (RFC 5041 §7.1, or the adaptation's §9 size check)
    /// and the endpoint's ULP tore the stream down (RFC 5041 §6.2.2) with a Terminate.
    ReceiveError(RxError),
}

impl fmt::Display for TerminationReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TerminationReason::LocalTerminate => f.write_str("terminated by the local ULP"),
            TerminationReason::PeerTerminate => f.write_str("terminated by the peer"),
            TerminationReason::LocalReject => f.write_str("rejected by the local ULP"),
            TerminationReason::PeerReject => f.write_str("rejected by the peer's ULP"),
            TerminationReason::PendingLimit => {
                f.write_str("too many Initiates pending a ULP decision")
            }
            TerminationReason::ProtocolError(e) => write!(f, "protocol error: {e}"),
            TerminationReason::AssociationEnded => f.write_str("association ended"),
            TerminationReason::ReceiveError(e) => write!(f, "receive error: {e}"),
        }
    }
}

/// A received chunk that fits none of the legal patterns (RFC 5043 §6.1) or breaks a format
/// rule (§5.2.3) or the DDP-SSN window (§10). Each one terminates the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtocolError {
    /// DDP-SSN outside `[lowest missing, lowest missing + 32768)` (§10).
    OutOfWindow,
    /// A DDP-SSN already received: SCTP delivers every chunk once, so the peer reused it (§6).
    Duplicate,
    /// A chunk placed after the peer's final Terminate or Reject in DDP-SSN order (§6.2, §6.3).
    AfterFinal,
    /// Something other than an Initiate at DDP-SSN 0 on a stream without a session (§6.2). The
    /// one error that ends nothing: there is no session to terminate (§6.1), the chunk is
    /// dropped and the stream stays Idle.
    NotInitiated,
    /// An Initiate anywhere but DDP-SSN 0 of the passive side's inbound direction (§6.2).
    UnexpectedInitiate,
    /// An Accept anywhere but DDP-SSN 0 of the active side's inbound direction (§6.2).
    UnexpectedAccept,
    /// A Reject anywhere but DDP-SSN 0 of the active side's inbound direction (§6.3).
    UnexpectedReject,
    /// A DDP Segment before the Accept in the pattern (§6.2, §6.6).
    SegmentBeforeAccept,
    /// On the active side, the peer's Terminate at DDP-SSN 1 or later before its answer at
    /// DDP-SSN 0: it may be sent only once the answer can no longer arrive after it (§6.6).
    TerminateBeforeAnswer,
    /// A Function Code RFC 5043 does not define (§5.2.3; no §6.5 extension is enabled).
    UnknownFunction(u16),
    /// More than 512 bytes of Private Data (§5.2.3).
    PrivateDataTooLong,
    /// Private Data on a Terminate (§5.2.3).
    PrivateDataOnTerminate,
    /// A chunk too short for its DDP-SSN and header (§5.2.2, §5.2.3).
    Truncated,
    /// A chunk whose PPID is neither a DDP Segment's (16) nor a session control message's
    /// (17): the association carries only those (§5.1), and a chunk that conforms to none of
    /// the legal patterns ends the session (§6.1).
    UnknownPpid(u32),
    /// On the active side, the peer's segments came but its answer at DDP-SSN 0, sent before
    /// them, did not within the caller's bound ([`Session::give_up_answer`]): §10's validity
    /// check (a gap no unreceived chunk accounts for), by time.
    NoAnswer,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::OutOfWindow => f.write_str("DDP-SSN outside the receive window"),
            ProtocolError::Duplicate => f.write_str("DDP-SSN received twice"),
            ProtocolError::AfterFinal => f.write_str("chunk after the peer's final message"),
            ProtocolError::NotInitiated => f.write_str("chunk on a stream without a session"),
            ProtocolError::UnexpectedInitiate => f.write_str("unexpected Initiate"),
            ProtocolError::UnexpectedAccept => f.write_str("unexpected Accept"),
            ProtocolError::UnexpectedReject => f.write_str("unexpected Reject"),
            ProtocolError::SegmentBeforeAccept => f.write_str("DDP Segment before the Accept"),
            ProtocolError::TerminateBeforeAnswer => {
                f.write_str("Terminate before the answer to our Initiate")
            }
            ProtocolError::UnknownFunction(code) => write!(f, "unknown function code {code:#x}"),
            ProtocolError::PrivateDataTooLong => f.write_str("Private Data over 512 bytes"),
            ProtocolError::PrivateDataOnTerminate => f.write_str("Private Data on a Terminate"),
            ProtocolError::Truncated => f.write_str("chunk shorter than its header"),
            ProtocolError::UnknownPpid(ppid) => write!(f, "chunk of unknown PPID {ppid}"),
            ProtocolError::NoAnswer => {
                f.write_str("DDP Segments without the answer to our Initiate before them")
            }
        }
    }
}

impl std::error::Error for ProtocolError {}

/// A local call the session refuses; nothing changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LocalError {
    /// No session on the stream yet.
    NoSession,
    /// `initiate` on a stream that already has (or had) a session.
    AlreadyStarted,
    /// `accept` / `reject` without an Initiate pending a ULP decision.
    NotPending,
    /// A DDP Segment before the session is accepted (§6.2, §6.6).
    NotEstablished,
    /// The session is over.
    Terminated,
    /// More than 512 bytes of Private Data (§5.2.3).
    PrivateDataTooLong,
    /// Sending would leave 32768 chunks unacknowledged (§10).
    WouldExceedWindow,
    /// An acknowledgement for a DDP-SSN that was never sent.
    NotSent,
}

impl fmt::Display for LocalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LocalError::NoSession => "no session on this stream",
            LocalError::AlreadyStarted => "the stream already has a session",
            LocalError::NotPending => "no Initiate pending a ULP decision",
            LocalError::NotEstablished => "the session is not accepted yet",
            LocalError::Terminated => "the session is terminated",
            LocalError::PrivateDataTooLong => "Private Data over 512 bytes",
            LocalError::WouldExceedWindow => "32767 chunks already unacknowledged",
            LocalError::NotSent => "acknowledgement of a DDP-SSN never sent",
        })
    }
}

impl std::error::Error for LocalError {}

/// Owned ULP Private Data, at most 512 bytes by construction (RFC 5043 §5.2.3).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct OwnedPrivateData(Vec<u8>);

impl OwnedPrivateData {
    /// Copies `bytes`; [`LocalError::PrivateDataTooLong`] over 512 bytes.
    pub fn new(bytes: &[u8]) -> Result<OwnedPrivateData, LocalError> {
        if bytes.len() > MAX_PRIVATE_DATA_LEN {
            Err(LocalError::PrivateDataTooLong)
        } else {
            Ok(OwnedPrivateData(bytes.to_vec()))
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The wire type, for [`SessionControlRepr`].
    pub fn as_wire(&self) -> PrivateData<'_> {
        PrivateData::new(&self.0).expect("OwnedPrivateData holds at most 512 bytes")
    }
}

/// A control message the session asks to send.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ControlMessage {
    Initiate(OwnedPrivateData),
    Accept(OwnedPrivateData),
    Reject(OwnedPrivateData),
    Terminate,
}

impl ControlMessage {
    pub fn function_code(&self) -> FunctionCode {
        match self {
            ControlMessage::Initiate(_) => FunctionCode::Initiate,
            ControlMessage::Accept(_) => FunctionCode::Accept,
            ControlMessage::Reject(_) => FunctionCode::Reject,
            ControlMessage::Terminate => FunctionCode::Terminate,
        }
    }
}

/// One DDP Stream Session Control message (PPID 17) to send on this stream, unordered.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Transmit {
    pub ddp_ssn: u16,
    pub message: ControlMessage,
}

impl Transmit {
    /// The wire representation, ready for [`SessionControlRepr::emit`].
    pub fn repr(&self) -> SessionControlRepr<'_> {
        let message = match &self.message {
            ControlMessage::Initiate(d) => Message::Initiate(d.as_wire()),
            ControlMessage::Accept(d) => Message::Accept(d.as_wire()),
            ControlMessage::Reject(d) => Message::Reject(d.as_wire()),
            ControlMessage::Terminate => Message::Terminate,
        };
        SessionControlRepr {
            ddp_ssn: self.ddp_ssn,
            message,
        }
    }
}

/// What the ULP must hear. Received control messages are reported with their Private Data
/// (§5.2.3: "SHOULD be reported to the ULP ... Private Data MUST be available").
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Event {
    /// Passive: an Initiate awaits [`Session::accept`], [`Session::reject`] or
    /// [`Session::terminate`].
    InitiateReceived { private_data: OwnedPrivateData },
    /// Active: the peer accepted.
    Accepted { private_data: OwnedPrivateData },
    /// Active: the peer's ULP rejected.
    Rejected { private_data: OwnedPrivateData },
    /// The peer sent a Terminate.
    TerminateReceived,
    /// The session is over; reported once.
    SessionTerminated { reason: TerminationReason },
}

/// The finite limit on Initiates pending a ULP decision (RFC 5043 §6.4: "There MUST be a finite
/// limit"), shared by the sessions of one endpoint or association: clone it into each.
///
/// A session holds one slot from the Initiate's arrival until the ULP decides, the session
/// ends, or the session is dropped, so a slot can never leak.
#[derive(Debug, Clone)]
pub struct PendingLimit {
    inner: Arc<PendingInner>,
}

#[derive(Debug)]
struct PendingInner {
    max: usize,
    pending: AtomicUsize,
    /// Initiates answered with a Terminate because the limit was reached.
    over_limit: AtomicU64,
}

impl PendingLimit {
    /// At most `max` Initiates pending at once; `0` refuses every Initiate with a Terminate.
    pub fn new(max: usize) -> PendingLimit {
        PendingLimit {
            inner: Arc::new(PendingInner {
                max,
                pending: AtomicUsize::new(0),
                over_limit: AtomicU64::new(0),
            }),
        }
    }

    pub fn max(&self) -> usize {
        self.inner.max
    }

    /// Initiates currently awaiting a ULP decision.
    pub fn pending(&self) -> usize {
        self.inner.pending.load(Ordering::Acquire)
    }

    /// Initiates that found the limit reached and were answered with a Terminate (§6.4),
    /// since the limit was made: what an Initiate flood left behind is this count, not state.
    pub fn over_limit(&self) -> u64 {
        self.inner.over_limit.load(Ordering::Relaxed)
    }

    fn try_acquire(&self) -> Option<PendingSlot> {
        let max = self.inner.max;
        let slot = self
            .inner
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| PendingSlot {
                limit: self.clone(),
            });
        if slot.is_none() {
            self.inner.over_limit.fetch_add(1, Ordering::Relaxed);
        }
        slot
    }
}

/// One pending Initiate; released on drop.
#[derive(Debug)]
struct PendingSlot {
    limit: PendingLimit,
}

impl Drop for PendingSlot {
    fn drop(&mut self) {
        self.limit.inner.pending.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The most chunks [`Session::on_acked_run`] takes at once: far inside the §10 window, so a
/// run's first and last DDP-SSN locate unambiguously.
pub const MAX_ACK_RUN: u16 = 4096;

/// Where a DDP-SSN falls relative to a [`SeqWindow`].
enum Position {
    /// In `[base, base + SSN_WINDOW)`, as a position counted from the session start.
    Ahead(u64),
    /// Below `base`: already seen.
    Behind,
    /// Neither.
    OutOfWindow,
}

/// Which positions of one direction have been seen (received, or acknowledged): everything
/// below `base`, plus the bits of a ring over `[base, base + SSN_WINDOW)`. The ring is only
/// allocated when something is seen out of order, so in-order traffic costs no memory.
#[derive(Debug, Clone, Default)]
struct SeqWindow {
    base: u64,
    bits: Vec<u64>,
    /// Bits set in `bits`: while 0, an in-order position needs no bitmap work.
    set: u32,
    highest: Option<u64>,
}

impl SeqWindow {
    fn locate(&self, ssn: u16) -> Position {
        // Modular distance on the 16-bit DDP-SSN (the low 16 bits of `base` are its DDP-SSN).
        let ahead = u64::from(ssn.wrapping_sub((self.base % SSN_SPACE) as u16));
        if ahead < SSN_WINDOW {
            return Position::Ahead(self.base + ahead);
        }
        // The other half of the space: behind `base`, if the session is that long.
        if SSN_SPACE - ahead <= self.base {
            Position::Behind
        } else {
            Position::OutOfWindow
        }
    }

    fn bit(pos: u64) -> (usize, u64) {
        let index = (pos % SSN_WINDOW) as usize;
        (index / 64, 1 << (index % 64))
    }

    fn is_seen(&self, pos: u64) -> bool {
        if pos < self.base {
            return true;
        }
        if self.bits.is_empty() || pos >= self.base + SSN_WINDOW {
            return false;
        }
        let (word, mask) = SeqWindow::bit(pos);
        self.bits[word] & mask != 0
    }

    /// Marks `pos`, which must be in the window and not yet seen.
    fn mark(&mut self, pos: u64) {
        debug_assert!(pos >= self.base && pos < self.base + SSN_WINDOW && !self.is_seen(pos));
        self.highest = Some(self.highest.map_or(pos, |h| h.max(pos)));
        if pos == self.base && self.set == 0 {
            self.base += 1;
            return;
        }
        if self.bits.is_empty() {
            self.bits = vec![0; BITMAP_WORDS];
        }
        let (word, mask) = SeqWindow::bit(pos);
        self.bits[word] |= mask;
        self.set += 1;
        loop {
            let (word, mask) = SeqWindow::bit(self.base);
            if self.bits[word] & mask == 0 {
                break;
            }
            self.bits[word] &= !mask;
            self.set -= 1;
            self.base += 1;
        }
    }
}

/// The DDP Stream Session of one DDP stream (RFC 5043 §6). See the module documentation.
#[derive(Debug)]
pub struct Session {
    role: Option<Role>,
    state: State,
    /// Passive: the Accept is sent; active: the Accept is received.
    accepted: bool,
    /// Our last message is sent or queued (Reject or Terminate), or no longer needed: nothing
    /// more leaves this side (§6.2: "The final User Data Chunk for each side MAY be a ...
    /// Terminate").
    tx_closed: bool,
    /// A Terminate is owed but held back by §6.6 or the §10 window.
    terminate_queued: bool,
    /// Our Terminate waits for the ULP's last message, RDMAP's Terminate (§6.2: the session
    /// Terminate "would follow any RDMAP Terminate message"): [`Session::hold_final`].
    final_held: bool,
    /// A failure of this machine holds our Terminate for the ULP's own
    /// ([`Session::set_terminate_follows_ulp`]).
    terminate_follows_ulp: bool,
    /// Position of the last control message we sent (§6.6).
    last_control: Option<u64>,
    /// Position (DDP-SSN count) of our next chunk.
    tx_next: u64,
    /// Which of our chunks the peer has (SCTP acks, or a response proving receipt).
    tx_acked: SeqWindow,
    /// Which of the peer's chunks arrived.
    rx: SeqWindow,
    /// Position of the peer's final message (Terminate or Reject), once received.
    peer_final: Option<u64>,
    /// The caller gave up waiting for DDP-SSNs missing before the peer's final message
    /// ([`Session::give_up_inbound_gap`]).
    inbound_given_up: bool,
    /// The caller gave up on the peer's answer to our Initiate ([`Session::give_up_answer`]).
    answer_given_up: bool,
    association_ended: bool,
    /// The association ended while this stream had no session: it is Terminated only so that
    /// nothing starts on it, and no session to report ([`Session::never_opened`]).
    idle_at_end: bool,
    limit: PendingLimit,
    slot: Option<PendingSlot>,
    transmits: VecDeque<Transmit>,
    events: VecDeque<Event>,
}

/// What an inbound chunk is, once its format is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inbound {
    Initiate,
    Accept,
    Reject,
    Terminate,
    Segment,
}

impl Session {
    /// A stream without a session. Its role is decided by the first event: [`Session::initiate`]
    /// makes it active, a received Initiate passive. `limit` is the endpoint's (or
    /// association's) shared pending-Initiate limit (§6.4).
    pub fn new(limit: PendingLimit) -> Session {
        Session {
            role: None,
            state: State::Idle,
            accepted: false,
            tx_closed: false,
            terminate_queued: false,
            final_held: false,
            terminate_follows_ulp: false,
            last_control: None,
            tx_next: 0,
            tx_acked: SeqWindow::default(),
            rx: SeqWindow::default(),
            peer_final: None,
            inbound_given_up: false,
            answer_given_up: false,
            association_ended: false,
            idle_at_end: false,
            limit,
            slot: None,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    pub fn role(&self) -> Option<Role> {
        self.role
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn pending_limit(&self) -> &PendingLimit {
        &self.limit
    }

    /// Our chunks sent and not yet acknowledged, counted from the lowest unacknowledged one
    /// (the span the receiver's window must cover, §10).
    pub fn outstanding(&self) -> u64 {
        self.tx_next - self.tx_acked.base
    }

    /// The next control message to send, if any.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// The next event for the ULP, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether an event waits for [`Session::poll_event`].
    pub fn has_event(&self) -> bool {
        !self.events.is_empty()
    }

    // ---- local (ULP) calls ----

    /// Active side: sends the Initiate (DDP-SSN 0, §6.1/§6.2) with `private_data` (§5.2.3: it
    /// MUST be included, MAY be empty, MUST NOT exceed 512 bytes).
    pub fn initiate(&mut self, private_data: &[u8]) -> Result<(), LocalError> {
        if self.state != State::Idle {
            return Err(LocalError::AlreadyStarted);
        }
        let data = OwnedPrivateData::new(private_data)?;
        self.role = Some(Role::Active);
        self.state = State::InitiateSent;
        self.send_control(ControlMessage::Initiate(data));
        Ok(())
    }

    /// Passive side: accepts the pending Initiate (§6.2). DDP Segments may follow at once: §6.6
    /// restricts only the active side, and the active side orders early segments by DDP-SSN.
    pub fn accept(&mut self, private_data: &[u8]) -> Result<(), LocalError> {
        if self.state != State::InitiateReceived {
            return Err(LocalError::NotPending);
        }
        let data = OwnedPrivateData::new(private_data)?;
        self.slot = None;
        self.accepted = true;
        self.state = State::Established;
        self.send_control(ControlMessage::Accept(data));
        Ok(())
    }

    /// Passive side: rejects the pending Initiate (§6.3). This is the only way a Reject is
    /// ever sent: "A DDP Stream Session Reject message MUST NOT be sent unless the rejection
    /// is at the direction of the ULP" (RFC 5043 §6.3), so every refusal the session decides
    /// by itself (limit, protocol error) is a Terminate.
    pub fn reject(&mut self, private_data: &[u8]) -> Result<(), LocalError> {
        if self.state != State::InitiateReceived {
            return Err(LocalError::NotPending);
        }
        let data = OwnedPrivateData::new(private_data)?;
        self.send_control(ControlMessage::Reject(data));
        // §6.3: the Reject is the passive side's only message; nothing follows it.
        self.tx_closed = true;
        self.end(TerminationReason::LocalReject);
        Ok(())
    }

    /// Ends the session with a Terminate (§6.2), or, while an Initiate is pending, refuses it
    /// with a Terminate (the §6.4 pattern). The Terminate may be held back until the previous
    /// control message is known to be received (§6.6) or the §10 window has room; it then
    /// appears in [`Session::poll_transmit`] after the acknowledgement that frees it.
    pub fn terminate(&mut self) -> Result<(), LocalError> {
        self.terminate_with(TerminationReason::LocalTerminate)
    }

    /// As [`Session::terminate`], for the ULP that ends the stream because of a receive
    /// error (RFC 5041 §6.2.2: the DDP Stream ends only when the ULP says so), recorded as
    /// the reason.
    pub fn terminate_for_error(&mut self, error: RxError) -> Result<(), LocalError> {
        self.terminate_with(TerminationReason::ReceiveError(error))
    }

    fn terminate_with(&mut self, reason: TerminationReason) -> Result<(), LocalError> {
        match self.state {
            State::Idle => Err(LocalError::NoSession),
            State::Terminated(_) => Err(LocalError::Terminated),
            State::InitiateSent | State::InitiateReceived | State::Established => {
                self.end(reason);
                self.owe_terminate();
                Ok(())
            }
        }
    }

    /// For a ULP that reports the stream's errors in a last message of its own (RDMAP's
    /// Terminate, RFC 5040 §5.4; RFC 5043 §11.3: it "MUST be generated"): when this machine
    /// ends an established session for a chunk that fits no pattern (§6.1), our Terminate
    /// is held ([`Session::hold_final`]) for the ULP's message to go first.
    pub fn set_terminate_follows_ulp(&mut self, on: bool) {
        self.terminate_follows_ulp = on;
    }

    /// The ULP owes its last message on an established stream (RDMAP's Terminate): our
    /// session Terminate, whenever it is owed (the ULP's end, the peer's Terminate answered,
    /// a failure), waits for [`Session::release_final`], and one more DDP Segment may be sent
    /// meanwhile even once the session has ended. Nothing if our last message has left the
    /// session already (handed to the connection to send).
    pub fn hold_final(&mut self) {
        if self.accepted && (!self.tx_closed || self.terminate_queued) {
            self.final_held = true;
        }
    }

    /// The ULP's last message has gone (or cannot): our Terminate may follow.
    pub fn release_final(&mut self) {
        if core::mem::take(&mut self.final_held) {
            self.flush();
        }
    }

    /// Whether our Terminate waits for the ULP's last message ([`Session::hold_final`]).
    pub fn final_held(&self) -> bool {
        self.final_held
    }

    /// `Ok` if a DDP Segment may be sent now.
    #[inline]
    pub fn may_send_segment(&self) -> Result<(), LocalError> {
        // Every segment of a bulk sender asks (twice): the established case inline, the rest
        // apart (the held final's case made the whole match too big to inline: 6 of the 11
        // instructions a segment it added, `callgrind-tx-stages.sh`).
        if self.state == State::Established {
            return self.window_has_room();
        }
        self.may_send_segment_otherwise()
    }

    #[inline(never)]
    fn may_send_segment_otherwise(&self) -> Result<(), LocalError> {
        match self.state {
            State::Established => {}
            // The ULP's last message, ahead of our Terminate (`hold_final`).
            State::Terminated(_) if self.final_held && !self.association_ended => {}
            State::Idle => return Err(LocalError::NoSession),
            // RFC 5043 §6.2 and §6.6: the active side sends no segment before the Accept has
            // arrived; the passive side none before it accepted.
            State::InitiateSent | State::InitiateReceived => {
                return Err(LocalError::NotEstablished)
            }
            State::Terminated(_) => return Err(LocalError::Terminated),
        }
        self.window_has_room()
    }

    /// Allocates the DDP-SSN of the next DDP Segment (PPID 16) of this stream. DDP-SSNs are
    /// consecutive (§6: "MUST NOT have any gaps"), so call this only for a segment that will
    /// be handed to SCTP.
    pub fn next_ddp_ssn(&mut self) -> Result<u16, LocalError> {
        self.may_send_segment()?;
        let ssn = (self.tx_next % SSN_SPACE) as u16;
        self.tx_next += 1;
        Ok(ssn)
    }

    /// SCTP acknowledged our chunk with DDP-SSN `ssn` (repeats are harmless). May release a
    /// held-back Terminate.
    pub fn on_acked(&mut self, ssn: u16) -> Result<(), LocalError> {
        if self.association_ended {
            return Ok(());
        }
        match self.tx_acked.locate(ssn) {
            Position::Ahead(pos) if pos < self.tx_next => {
                if !self.tx_acked.is_seen(pos) {
                    self.tx_acked.mark(pos);
                }
            }
            Position::Behind => {}
            Position::Ahead(_) | Position::OutOfWindow => return Err(LocalError::NotSent),
        }
        self.flush();
        Ok(())
    }

    /// SCTP acknowledged our `n` chunks with DDP-SSNs `first`, `first + 1`, ... (repeats are
    /// harmless): [`Session::on_acked`] for each, in one step when they are the oldest
    /// unacknowledged ones and nothing above them was acknowledged out of order, a bulk
    /// sender's every acknowledgement. `n` is at most [`MAX_ACK_RUN`].
    pub fn on_acked_run(&mut self, first: u16, n: u16) -> Result<(), LocalError> {
        if self.association_ended || n == 0 {
            return Ok(());
        }
        debug_assert!(n <= MAX_ACK_RUN);
        let last = first.wrapping_add(n - 1);
        let w = &mut self.tx_acked;
        match (w.locate(first), w.locate(last)) {
            (Position::Ahead(p), Position::Ahead(q))
                if p == w.base && w.set == 0 && q >= p && q < self.tx_next =>
            {
                w.highest = Some(w.highest.map_or(q, |h| h.max(q)));
                w.base = q + 1;
                self.flush();
                Ok(())
            }
            _ => (0..n).try_for_each(|k| self.on_acked(first.wrapping_add(k))),
        }
    }

    /// SCTP acknowledged every chunk of ours up to and including DDP-SSN `ssn`.
    pub fn acked_through(&mut self, ssn: u16) -> Result<(), LocalError> {
        if self.association_ended {
            return Ok(());
        }
        match self.tx_acked.locate(ssn) {
            Position::Ahead(pos) if pos < self.tx_next => {
                for p in self.tx_acked.base..=pos {
                    if !self.tx_acked.is_seen(p) {
                        self.tx_acked.mark(p);
                    }
                }
            }
            Position::Behind => {}
            Position::Ahead(_) | Position::OutOfWindow => return Err(LocalError::NotSent),
        }
        self.flush();
        Ok(())
    }

    /// The association ended (§11.3): the session ends without a Terminate (there is nothing
    /// left to carry it), and nothing of it can be outstanding any more.
    pub fn association_ended(&mut self) {
        self.association_ended = true;
        self.transmits.clear();
        self.terminate_queued = false;
        // Nothing more leaves: no message of the ULP's waits to go ahead of ours.
        self.final_held = false;
        self.tx_closed = true;
        self.slot = None;
        match self.state {
            State::Terminated(_) => {}
            State::Idle => {
                self.state = State::Terminated(TerminationReason::AssociationEnded);
                self.idle_at_end = true;
            }
            State::InitiateSent | State::InitiateReceived | State::Established => {
                self.end(TerminationReason::AssociationEnded)
            }
        }
    }

    /// Whether this stream never had a session: idle, or ended with the association while
    /// idle (then Terminated all the same). Telemetry counted each of them as a terminated
    /// session once the association ended (found by an outside-in test).
    pub fn never_opened(&self) -> bool {
        self.state == State::Idle || self.idle_at_end
    }

    /// Whether we may start a new session on this stream id: this one is over and none of its
    /// chunks, ours or the peer's, can still be in flight (§6.6: "MUST NOT be reused ... while
    /// any Data Chunk from a prior session might be outstanding"). Ours must all be
    /// acknowledged; the peer's are known to be all received only once its final message
    /// (Terminate or Reject) and everything before it arrived ([`Session::inbound_complete`]).
    /// A peer that never answers our Terminate leaves the stream id unusable for us.
    pub fn can_reuse(&self) -> bool {
        if !matches!(self.state, State::Terminated(_)) {
            return false;
        }
        if self.association_ended {
            return true;
        }
        self.outbound_complete() && self.inbound_complete()
    }

    /// Whether every chunk of ours is sent and acknowledged, nothing more owed.
    pub fn outbound_complete(&self) -> bool {
        !self.terminate_queued && self.transmits.is_empty() && self.tx_acked.base == self.tx_next
    }

    /// On the active side, whether the peer's answer to our Initiate (its DDP-SSN 0) is still
    /// awaited: until it comes, none of the peer's segments can be told to belong to a session
    /// (RFC 5043 §6.2, §6.3: an Accept starts one, a Reject none), whatever else of the peer's
    /// has arrived (its segments may overtake it, §10; a Terminate ahead of it ends the session
    /// as a protocol error, §6.6, but leaves the answer awaited).
    pub fn answer_pending(&self) -> bool {
        // The flag last: once the answer is in (every segment of an established session),
        // this costs what it did before it.
        self.role == Some(Role::Active)
            && !self.association_ended
            && !self.rx.is_seen(0)
            && !self.answer_given_up
    }

    /// The caller waited long enough for the peer's answer to our Initiate while segments the
    /// peer sent after it were held ([`Session::answer_pending`]): RFC 5043 §10, "SHOULD NOT
    /// allocate resources on the assumption that DDP-SSNs are valid". The session ends as a
    /// protocol error (`ProtocolError::NoAnswer`, with our Terminate, §6.2) and the answer is
    /// no longer awaited: what the peer sends later of it is judged as after the session's
    /// end, and held for nothing.
    ///
    /// Whether it ended the session: one already over (our ULP's Terminate, an earlier
    /// protocol error) stays as it ended, and only stops awaiting the answer.
    pub fn give_up_answer(&mut self) -> bool {
        if !self.answer_pending() {
            return false;
        }
        self.answer_given_up = true;
        if matches!(self.state, State::Terminated(_)) {
            return false;
        }
        let _ = self.fail(ProtocolError::NoAnswer);
        true
    }

    /// On the active side, whether the peer's answer was an Accept.
    pub fn peer_accepted(&self) -> bool {
        self.role == Some(Role::Active) && self.accepted
    }

    /// Whether the session is over and the peer's final message arrived, but DDP-SSNs below
    /// it are still missing: a legal peer's late chunks on their way (SCTP delivers
    /// unordered, RFC 5043 §6.1), or a gap the peer left against RFC 5043 §6 ("MUST NOT have
    /// any gaps"), which nothing will ever fill. Only the caller, with a clock, can tell
    /// them apart ([`Session::give_up_inbound_gap`]).
    pub fn awaits_inbound_gap(&self) -> bool {
        matches!(self.state, State::Terminated(_))
            && !self.inbound_complete()
            && self.peer_final.is_some()
    }

    /// The caller waited long enough for the DDP-SSNs missing before the peer's final message
    /// ([`Session::awaits_inbound_gap`]): the peer's direction counts as complete, so its
    /// receives may be flushed and, once ours are acknowledged, the stream id reused
    /// ([`Session::can_reuse`]). Late chunks of it are still judged by the pattern; placing
    /// them is the caller's business (its receive side is closed by then).
    pub fn give_up_inbound_gap(&mut self) {
        if self.awaits_inbound_gap() {
            self.inbound_given_up = true;
        }
    }

    /// After our Reject (RFC 5043 §6.3), whether the active side's Terminate (its DDP-SSN 1)
    /// may still be on its way: §6.6 lets the active side send it once its Initiate is
    /// acknowledged, so it may cross our Reject, and nothing the active side sends tells us it
    /// did not. The passive side counts the peer's direction complete all the same
    /// ([`Session::inbound_complete`]); the caller tells such a Terminate from a later
    /// session's chunks by its TSN.
    pub fn peer_terminate_may_cross(&self) -> bool {
        self.refused_before_accept() && !self.association_ended && !self.rx.is_seen(1)
    }

    /// The passive side ended the peer's Initiate without accepting it: by our ULP's Reject
    /// (§6.3), or by a Terminate at our DDP-SSN 0 (§6.4: the pending limit, or our ULP's
    /// terminate while the Initiate waited). Either way the active side sends nothing more
    /// but, perhaps, its own Terminate at its DDP-SSN 1, crossing ours (§6.6 lets it send one
    /// once its Initiate is acknowledged; RFC 5043 asks none of it, so we do not wait for it:
    /// a peer that sends none would keep the stream id busy for good).
    fn refused_before_accept(&self) -> bool {
        self.role == Some(Role::Passive)
            && !self.accepted
            && matches!(
                self.state,
                State::Terminated(
                    TerminationReason::LocalReject
                        | TerminationReason::PendingLimit
                        | TerminationReason::LocalTerminate
                )
            )
    }

    /// Whether every chunk the peer will send in this session has arrived: its final message
    /// and everything before it in DDP-SSN order, or, after we refused its Initiate (our
    /// Reject, §6.3, or our Terminate, §6.4), the Initiate itself (the active side sends
    /// nothing more we must wait for: `refused_before_accept`).
    pub fn inbound_complete(&self) -> bool {
        if self.association_ended || self.inbound_given_up || self.refused_before_accept() {
            return true;
        }
        self.peer_final.is_some_and(|f| self.rx.base > f)
    }

    /// Whether an Initiate from the peer (DDP-SSN 0) may start a new session on this stream id:
    /// this session is over and we have nothing left to send in it. The peer starting a new
    /// session asserts that nothing of the old one is outstanding on its side, which is its
    /// §6.6 duty; our unacknowledged chunks, if any, can only be duplicates SCTP will discard.
    pub fn accepts_new_session(&self) -> bool {
        matches!(self.state, State::Terminated(_))
            && !self.terminate_queued
            && self.transmits.is_empty()
    }

    // ---- received chunks ----

    /// A DDP Stream Session Control message (PPID 17) arrived on this stream. `Err` means the
    /// message broke the rules: if the session was not over yet, it is now (a Terminate is
    /// queued and [`Event::SessionTerminated`] reported). On a stream without a session
    /// (Idle, no role) anything but an Initiate at DDP-SSN 0 is dropped and the stream stays
    /// Idle (§6.1 and §6.2: there is no session to terminate).
    pub fn on_control(
        &mut self,
        ssn: u16,
        function: FunctionCode,
        private_data: &[u8],
    ) -> Result<(), ProtocolError> {
        if self.association_ended {
            return Ok(());
        }
        let kind = match function {
            FunctionCode::Initiate => Inbound::Initiate,
            FunctionCode::Accept => Inbound::Accept,
            FunctionCode::Reject => Inbound::Reject,
            FunctionCode::Terminate => Inbound::Terminate,
            // RFC 5043 §6.1/§6.5: no ULP-specific sequence is enabled, so an unknown function
            // fits no pattern.
            FunctionCode::Unknown(code) => {
                return self.refuse(ssn, ProtocolError::UnknownFunction(code))
            }
        };
        // RFC 5043 §5.2.3: "Private Data length MUST NOT exceed 512 bytes in any message."
        if private_data.len() > MAX_PRIVATE_DATA_LEN {
            if kind == Inbound::Initiate && ssn == 0 && self.state == State::Idle {
                // An Initiate starts a session even when it breaks a format rule: the peer
                // awaits an answer, and the §6.4 pattern (Initiate, Terminate) is the one
                // that ends it without the ULP. As the passive side, the peer's answering
                // Terminate then fits our pattern too, and completes its direction.
                self.role = Some(Role::Passive);
            }
            return self.refuse_as(ssn, kind, ProtocolError::PrivateDataTooLong);
        }
        // RFC 5043 §5.2.3: "Private Data MUST NOT be included in the ... Terminate message."
        if kind == Inbound::Terminate && !private_data.is_empty() {
            return self.refuse_as(ssn, kind, ProtocolError::PrivateDataOnTerminate);
        }
        self.receive(ssn, kind, private_data)
    }

    /// A DDP chunk of this stream too short to carry its DDP-SSN and header: it fits no
    /// pattern (§6.1), so the session ends like for any other protocol error.
    pub fn on_truncated(&mut self) -> Result<(), ProtocolError> {
        if self.association_ended {
            return Ok(());
        }
        if self.is_without_session() {
            return Err(ProtocolError::Truncated);
        }
        self.fail(ProtocolError::Truncated)
    }

    /// A chunk of PPID `ppid`, neither 16 nor 17, arrived on this stream: RFC 5043 §5.1 says
    /// the association "will carry only SCTP Data Chunks as defined in this document", and
    /// §6.1 that a chunk conforming to none of the legal patterns terminates the session.
    pub fn on_unknown_ppid(&mut self, ppid: u32) -> Result<(), ProtocolError> {
        if self.association_ended {
            return Ok(());
        }
        if self.is_without_session() {
            return Err(ProtocolError::UnknownPpid(ppid));
        }
        self.fail(ProtocolError::UnknownPpid(ppid))
    }

    /// A DDP Segment Chunk (PPID 16) with DDP-SSN `ssn` arrived on this stream. `Ok` means it
    /// belongs to this session's legal sequence; `Err` as for [`Session::on_control`], and the
    /// segment must not be placed.
    pub fn on_segment(&mut self, ssn: u16) -> Result<(), ProtocolError> {
        if self.association_ended {
            return Ok(());
        }
        if self.is_next_segment(ssn) {
            self.take_next_segment();
            self.flush();
            return Ok(());
        }
        self.receive(ssn, Inbound::Segment, &[])
    }

    /// The common case of [`Session::on_segment`], taken without the general checks (each
    /// holds trivially here): the next DDP-SSN in order, nothing seen out of order, after the
    /// session's first message (§6.2), segments allowed (an Accept seen or sent, §6.6), no
    /// final message yet (§6.2/§6.3). `receive` would mark it and apply nothing.
    #[inline(always)]
    fn is_next_segment(&self, ssn: u16) -> bool {
        let pos = self.rx.base;
        self.rx.set == 0
            && pos != 0
            && ssn == (pos % SSN_SPACE) as u16
            && self.peer_final.is_none()
            && match self.role {
                Some(Role::Active) => true,
                Some(Role::Passive) => self.accepted,
                None => false,
            }
    }

    /// Marks the segment [`Session::is_next_segment`] accepted.
    #[inline(always)]
    fn take_next_segment(&mut self) {
        // Everything seen is below `base` while no bit is set.
        self.rx.highest = Some(self.rx.base);
        self.rx.base += 1;
    }

    /// Whether [`Session::on_segment`] would take the segment with DDP-SSN `ssn` by its
    /// common case and leave nothing else to do: the session open (not Terminated, so the
    /// segment is placed), no Terminate waiting to be sent (which the segment might release).
    /// Then [`Session::take_plain_segment`] has `on_segment`'s effect. For a fused receive
    /// path, which must know before it places anything.
    #[inline(always)]
    pub fn is_plain_segment(&self, ssn: u16) -> bool {
        !self.association_ended
            && !self.terminate_queued
            && !matches!(self.state, State::Terminated(_))
            && self.is_next_segment(ssn)
    }

    /// [`Session::on_segment`] for a segment [`Session::is_plain_segment`] accepted, with
    /// nothing changed since.
    #[inline(always)]
    pub fn take_plain_segment(&mut self) {
        debug_assert!(!self.terminate_queued, "flush would have nothing to do");
        self.take_next_segment();
    }

    fn receive(
        &mut self,
        ssn: u16,
        kind: Inbound,
        private_data: &[u8],
    ) -> Result<(), ProtocolError> {
        // RFC 5043 §6.2: on a stream without a session only an Initiate at DDP-SSN 0 starts
        // one; anything else is dropped (the caller counts it) and the stream stays Idle.
        // §6.1's "MUST be terminated" presumes a session to terminate, and a Terminate of ours
        // at DDP-SSN 0 would fit no pattern at the peer either: it would refuse it with its
        // own, and each side's refusal would leave the other unable to start a session on the
        // stream id.
        if self.is_without_session() && !(kind == Inbound::Initiate && ssn == 0) {
            return Err(ProtocolError::NotInitiated);
        }
        // RFC 5043 §10: the DDP-SSN must be accountable by chunks still in flight.
        let pos = match self.rx.locate(ssn) {
            Position::Ahead(pos) if self.rx.is_seen(pos) => {
                return self.fail(ProtocolError::Duplicate)
            }
            Position::Ahead(pos) => pos,
            Position::Behind => return self.fail(ProtocolError::Duplicate),
            Position::OutOfWindow => return self.fail(ProtocolError::OutOfWindow),
        };
        // RFC 5043 §6.2/§6.3: nothing follows the peer's Terminate or Reject in DDP-SSN order.
        if self.peer_final.is_some_and(|f| pos > f) {
            return self.refuse_at(pos, ProtocolError::AfterFinal);
        }
        // RFC 5043 §6.1-§6.4: the chunk's place in the normative (DDP-SSN) order of the peer's
        // direction must be one its pattern allows.
        let verdict = match (self.role, kind) {
            (None, Inbound::Initiate) if pos == 0 && self.state == State::Idle => Ok(()),
            (None, _) => Err(ProtocolError::NotInitiated),
            // §6.2: one Initiate, from the active side, at DDP-SSN 0 (a second one, or one
            // crossing ours, is illegal).
            (Some(_), Inbound::Initiate) => Err(ProtocolError::UnexpectedInitiate),
            // §6.2-§6.4: the passive side's first message answers the Initiate.
            (Some(Role::Active), Inbound::Accept | Inbound::Reject | Inbound::Terminate)
                if pos == 0 =>
            {
                Ok(())
            }
            (Some(Role::Active), Inbound::Segment) if pos == 0 => {
                Err(ProtocolError::SegmentBeforeAccept)
            }
            (_, Inbound::Accept) => Err(ProtocolError::UnexpectedAccept),
            (_, Inbound::Reject) => Err(ProtocolError::UnexpectedReject),
            // §6.2 and §6.6: the active side sends segments only after the Accept arrived, and
            // we sent none; SCTP cannot deliver them before the Initiate either.
            (Some(Role::Passive), Inbound::Segment) if !self.accepted => {
                Err(ProtocolError::SegmentBeforeAccept)
            }
            // §6.6: the peer's control messages must arrive in their DDP-SSN order, so its
            // Terminate leaves only once its answer cannot arrive after it (SCTP acked it).
            // Its segments are no control messages and may overtake the answer (§10).
            (Some(Role::Active), Inbound::Terminate) if !self.rx.is_seen(0) => {
                Err(ProtocolError::TerminateBeforeAnswer)
            }
            // §6.2: segments, and the optional final Terminate, after the first message.
            (Some(_), Inbound::Segment | Inbound::Terminate) => Ok(()),
        };
        if verdict == Err(ProtocolError::TerminateBeforeAnswer) {
            // Sent too early, it is still the peer's last chunk (§6.2): its direction is
            // complete once the answer and the segments before it are in. Left open, it would
            // never complete, and §6.6 would keep the stream id from being reused.
            self.peer_final.get_or_insert(pos);
        }
        verdict.or_else(|e| self.refuse_at(pos, e))?;
        // §6.2/§6.3/§6.4: a final message must not precede chunks already received.
        let is_final = matches!(kind, Inbound::Terminate | Inbound::Reject);
        if is_final && self.rx.highest.is_some_and(|h| h > pos) {
            // Still the peer's last chunk, as a Terminate sent too early is (above).
            self.peer_final.get_or_insert(pos);
            return self.refuse_at(pos, ProtocolError::AfterFinal);
        }
        self.rx.mark(pos);
        self.apply(pos, kind, private_data);
        self.flush();
        Ok(())
    }

    /// The effects of a legal inbound chunk.
    fn apply(&mut self, pos: u64, kind: Inbound, private_data: &[u8]) {
        // Checked by `on_control`; the fallback is never taken.
        let data = || OwnedPrivateData::new(private_data).unwrap_or_default();
        let live = !matches!(self.state, State::Terminated(_));
        if self.role == Some(Role::Active) && pos == 0 {
            // §6.6: "a responsive DDP Stream Session Control message" proves the Initiate
            // arrived, as an SCTP ack would.
            if !self.tx_acked.is_seen(0) && self.tx_next > 0 {
                self.tx_acked.mark(0);
            }
        }
        match kind {
            Inbound::Initiate => {
                self.role = Some(Role::Passive);
                if let Some(slot) = self.limit.try_acquire() {
                    self.slot = Some(slot);
                    self.state = State::InitiateReceived;
                    self.events.push_back(Event::InitiateReceived {
                        private_data: data(),
                    });
                } else {
                    // RFC 5043 §6.4 (and §5.2.3): over the limit the Initiate is not forwarded
                    // to the ULP and "the passive side MUST respond ... with a DDP Stream
                    // Terminate Message" (not a Reject, §6.3).
                    self.end(TerminationReason::PendingLimit);
                    self.owe_terminate();
                }
            }
            Inbound::Accept => {
                self.accepted = true;
                // A session that already ended (our Terminate, a protocol error) is not
                // accepted after its end for the ULP: the answer only completes the stream's
                // bookkeeping (§6.6 reuse).
                if live {
                    self.events.push_back(Event::Accepted {
                        private_data: data(),
                    });
                }
                if self.state == State::InitiateSent {
                    self.state = State::Established;
                }
            }
            Inbound::Reject | Inbound::Terminate => {
                self.peer_final = Some(pos);
                self.events.push_back(if kind == Inbound::Reject {
                    Event::Rejected {
                        private_data: data(),
                    }
                } else {
                    Event::TerminateReceived
                });
                if kind == Inbound::Reject {
                    // §6.3: Initiate and Reject are the whole sequence; a Terminate we still
                    // owe is dropped and nothing more is sent.
                    self.terminate_queued = false;
                    self.tx_closed = true;
                } else if !self.tx_closed {
                    // §6.2: "The final User Data Chunk for each side MAY be a DDP Stream
                    // Terminate". Ours answers the peer's, so that the peer learns where our
                    // direction ends and may reuse the stream id without guessing (§6.6).
                    self.owe_terminate();
                }
                if live {
                    self.end(if kind == Inbound::Reject {
                        TerminationReason::PeerReject
                    } else {
                        TerminationReason::PeerTerminate
                    });
                }
            }
            Inbound::Segment => {}
        }
    }

    // ---- internals ----

    /// No session on the stream, nor ever was one: Idle, no role (RFC 5043 §6.2: a session
    /// starts with the Initiate).
    fn is_without_session(&self) -> bool {
        self.state == State::Idle && self.role.is_none()
    }

    /// A refused control message with DDP-SSN `ssn`: dropped while the stream has no session,
    /// else counted received if in the window ([`Session::refuse_at`]) and the session ended.
    fn refuse(&mut self, ssn: u16, e: ProtocolError) -> Result<(), ProtocolError> {
        if self.is_without_session() {
            return Err(e);
        }
        match self.rx.locate(ssn) {
            Position::Ahead(pos) if !self.rx.is_seen(pos) => self.refuse_at(pos, e),
            _ => self.fail(e),
        }
    }

    /// [`Session::refuse`] for a control message of `kind` refused for its format: a
    /// Terminate or Reject is the peer's last chunk all the same (§6.2, §6.3), so its
    /// direction completes once everything before it is in (§6.6: the stream id is then free).
    fn refuse_as(
        &mut self,
        ssn: u16,
        kind: Inbound,
        e: ProtocolError,
    ) -> Result<(), ProtocolError> {
        // A Reject stands only as the passive side's answer (§6.3): elsewhere it is no final
        // message. A final position known already stays (as `receive` keeps it): a second
        // final message moved it below DDP-SSNs still missing.
        let final_here = match kind {
            Inbound::Terminate => true,
            Inbound::Reject => self.role == Some(Role::Active) && ssn == 0,
            _ => false,
        };
        if final_here && !self.is_without_session() {
            if let Position::Ahead(pos) = self.rx.locate(ssn) {
                if !self.rx.is_seen(pos) {
                    self.peer_final.get_or_insert(pos);
                }
            }
        }
        self.refuse(ssn, e)
    }

    /// A chunk at position `pos` (in the window, not seen before) that fits no pattern. It
    /// arrived all the same, and the peer will send nothing else with its DDP-SSN (RFC 5043
    /// §6: "MUST NOT have any gaps"): it counts as received, so that its DDP-SSN is no gap
    /// before the peer's final message. Left uncounted, the peer's direction could never
    /// complete ([`Session::inbound_complete`]) and §6.6 would keep us from reusing the
    /// stream id for the rest of the association, after a mere Initiate collision (§6.2).
    fn refuse_at(&mut self, pos: u64, e: ProtocolError) -> Result<(), ProtocolError> {
        self.rx.mark(pos);
        self.fail(e)
    }

    /// RFC 5043 §6.1: a chunk fitting no legal pattern terminates the session (once).
    fn fail(&mut self, e: ProtocolError) -> Result<(), ProtocolError> {
        if !matches!(self.state, State::Terminated(_)) {
            if self.terminate_follows_ulp && self.state == State::Established {
                self.hold_final();
            }
            self.end(TerminationReason::ProtocolError(e));
            self.owe_terminate();
        }
        Err(e)
    }

    fn end(&mut self, reason: TerminationReason) {
        self.state = State::Terminated(reason);
        // The Initiate no longer awaits the ULP (§6.4's count).
        self.slot = None;
        self.events.push_back(Event::SessionTerminated { reason });
    }

    /// Queue our final Terminate unless this side's last message is already out.
    fn owe_terminate(&mut self) {
        if self.tx_closed {
            return;
        }
        self.tx_closed = true;
        self.terminate_queued = true;
        self.flush();
    }

    /// Sends a held-back Terminate once it is allowed. The test is inlined: every in-order
    /// segment calls this, and nearly always nothing is held back.
    #[inline]
    fn flush(&mut self) {
        if self.terminate_queued && !self.association_ended && !self.final_held {
            self.flush_terminate();
        }
    }

    #[inline(never)]
    fn flush_terminate(&mut self) {
        // RFC 5043 §6.6: "A DDP Stream Session Control message MUST NOT be sent if it may be
        // received before a prior DDP Stream Session Control message within the same DDP
        // Stream Session": the previous one must be acknowledged (or answered) first.
        let prior_received = self.last_control.is_none_or(|c| self.tx_acked.is_seen(c));
        // RFC 5043 §10: the Terminate is a chunk like any other.
        if prior_received && self.window_has_room().is_ok() {
            self.terminate_queued = false;
            self.send_control(ControlMessage::Terminate);
        }
    }

    fn window_has_room(&self) -> Result<(), LocalError> {
        // RFC 5043 §10: never more than 32767 chunks without acknowledgment, counted as the
        // span from the lowest unacknowledged one, which is what the receiver's window sees.
        if self.outstanding() >= MAX_OUTSTANDING {
            Err(LocalError::WouldExceedWindow)
        } else {
            Ok(())
        }
    }

    fn send_control(&mut self, message: ControlMessage) {
        let ddp_ssn = (self.tx_next % SSN_SPACE) as u16;
        self.last_control = Some(self.tx_next);
        self.tx_next += 1;
        self.transmits.push_back(Transmit { ddp_ssn, message });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;
    use ddpdk_dataplane::wire::ddp::SessionControlPacket;

    const BIG: &[u8] = &[0xaa; MAX_PRIVATE_DATA_LEN + 1];
    const MAX: &[u8] = &[0x55; MAX_PRIVATE_DATA_LEN];

    fn pd(bytes: &[u8]) -> OwnedPrivateData {
        OwnedPrivateData::new(bytes).unwrap()
    }

    fn events(s: &mut Session) -> Vec<Event> {
        std::iter::from_fn(|| s.poll_event()).collect()
    }

    fn transmits(s: &mut Session) -> Vec<Transmit> {
        std::iter::from_fn(|| s.poll_transmit()).collect()
    }

    fn terminated(reason: TerminationReason) -> Event {
        Event::SessionTerminated { reason }
    }

    /// Feeds one control message through the wire format (emit, then parse as the receive path
    /// does) into `to`.
    fn feed(t: &Transmit, to: &mut Session) -> Result<(), ProtocolError> {
        let repr = t.repr();
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut SessionControlPacket::new_unchecked(&mut buf[..]))
            .unwrap();
        let packet = SessionControlPacket::new_checked(&buf[..]).unwrap();
        to.on_control(
            packet.ddp_ssn(),
            packet.function_code(),
            packet.private_data(),
        )
    }

    /// Delivers every control message `from` has queued (including any that an
    /// acknowledgement releases) to `to`, and acknowledges each to `from` as SCTP would.
    fn deliver(from: &mut Session, to: &mut Session) {
        while let Some(t) = from.poll_transmit() {
            feed(&t, to).unwrap();
            from.on_acked(t.ddp_ssn).unwrap();
        }
    }

    /// One DDP Segment from `from` to `to`, acknowledged; returns its DDP-SSN.
    fn segment(from: &mut Session, to: &mut Session) -> u16 {
        let ssn = from.next_ddp_ssn().unwrap();
        to.on_segment(ssn).unwrap();
        from.on_acked(ssn).unwrap();
        ssn
    }

    /// Active `a` and passive `p`, accepted, everything delivered and acknowledged.
    fn established() -> (Session, Session) {
        let mut a = Session::new(PendingLimit::new(4));
        let mut p = Session::new(PendingLimit::new(4));
        a.initiate(b"hello").unwrap();
        deliver(&mut a, &mut p);
        assert_eq!(
            events(&mut p),
            [Event::InitiateReceived {
                private_data: pd(b"hello")
            }]
        );
        p.accept(b"ok").unwrap();
        deliver(&mut p, &mut a);
        assert_eq!(
            events(&mut a),
            [Event::Accepted {
                private_data: pd(b"ok")
            }]
        );
        assert_eq!(
            (a.state(), p.state()),
            (State::Established, State::Established)
        );
        (a, p)
    }

    /// One step of a generated inbound sequence for a session (`fast_segment_path_...`).
    #[derive(Debug, Clone)]
    enum Step {
        /// A segment at the next DDP-SSN plus this offset.
        Segment(i16),
        /// A control message at the next DDP-SSN plus this offset.
        Control(u16, i16),
        /// The ULP accepts, terminates, or initiates.
        Accept,
        Terminate,
        Initiate,
    }

    fn any_step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            6 => Just(Step::Segment(0)),
            2 => (-3i16..4).prop_map(Step::Segment),
            1 => any::<i16>().prop_map(Step::Segment),
            1 => (1u16..6, -1i16..2).prop_map(|(f, d)| Step::Control(f, d)),
            1 => Just(Step::Accept),
            1 => Just(Step::Terminate),
            1 => Just(Step::Initiate),
        ]
    }

    proptest::proptest! {
        /// RFC 5043 §6.1-§6.4 and §10 as `receive` applies them: `on_segment`'s in-order
        /// shortcut must leave the session exactly as the general path does, for any sequence
        /// (in order, duplicates, gaps, out of window, before the Accept, after a final
        /// message), from a fresh, an active and a passive session.
        #[test]
        fn fast_segment_path_agrees_with_the_general_rules(
            start in 0u8..3,
            steps in proptest::collection::vec(any_step(), 1..60),
        ) {
            let make = || match start {
                0 => Session::new(PendingLimit::new(4)),
                1 => established().0,
                _ => established().1,
            };
            let (mut fast, mut general) = (make(), make());
            for st in steps {
                let next = (fast.rx.base % SSN_SPACE) as u16;
                let (a, b) = match st {
                    Step::Segment(d) => {
                        let ssn = next.wrapping_add(d as u16);
                        (
                            format!("{:?}", fast.on_segment(ssn)),
                            format!("{:?}", if general.association_ended {
                                Ok(())
                            } else {
                                general.receive(ssn, Inbound::Segment, &[])
                            }),
                        )
                    }
                    Step::Control(f, d) => {
                        let (ssn, code) = (next.wrapping_add(d as u16), FunctionCode::from(f));
                        (
                            format!("{:?}", fast.on_control(ssn, code, &[])),
                            format!("{:?}", general.on_control(ssn, code, &[])),
                        )
                    }
                    Step::Accept => (
                        format!("{:?}", fast.accept(b"")),
                        format!("{:?}", general.accept(b"")),
                    ),
                    Step::Terminate => (
                        format!("{:?}", fast.terminate()),
                        format!("{:?}", general.terminate()),
                    ),
                    Step::Initiate => (
                        format!("{:?}", fast.initiate(b"")),
                        format!("{:?}", general.initiate(b"")),
                    ),
                };
                proptest::prop_assert_eq!(a, b);
                proptest::prop_assert_eq!(format!("{fast:?}"), format!("{general:?}"));
            }
        }

        /// RFC 5043 §10 (and §6.6's held-back Terminate) as acknowledgements move them:
        /// `on_acked_run`'s one-step path must leave the session exactly as one `on_acked`
        /// per DDP-SSN does, whatever was acknowledged before (in order, out of order,
        /// repeated), with a Terminate waiting or not, and sends in between.
        #[test]
        fn acked_run_agrees_with_single_acks(
            sent in 1u16..400,
            acks in proptest::collection::vec((0u16..400, 1u16..64, 0u8..8), 1..40),
        ) {
            let (mut run, _) = established();
            let (mut single, _) = established();
            for _ in 0..sent {
                proptest::prop_assert_eq!(run.next_ddp_ssn(), single.next_ddp_ssn());
            }
            // Our DDP-SSNs so far start after the Initiate's (0).
            let first = 1u16;
            for (at, n, what) in acks {
                let sent_now = (run.tx_next - 1) as u16;
                let start = first.wrapping_add(at % sent_now);
                let n = n.min(sent_now - at % sent_now);
                match what {
                    0 => proptest::prop_assert_eq!(
                        format!("{:?}", run.on_acked(start)),
                        format!("{:?}", single.on_acked(start))
                    ),
                    1 => proptest::prop_assert_eq!(
                        format!("{:?}", run.terminate()),
                        format!("{:?}", single.terminate())
                    ),
                    2 => proptest::prop_assert_eq!(
                        format!("{:?}", run.next_ddp_ssn()),
                        format!("{:?}", single.next_ddp_ssn())
                    ),
                    _ => {
                        // Every DDP-SSN acknowledged here was sent: none is refused.
                        for k in 0..n {
                            proptest::prop_assert_eq!(single.on_acked(start.wrapping_add(k)), Ok(()));
                        }
                        proptest::prop_assert_eq!(run.on_acked_run(start, n), Ok(()));
                    }
                }
                proptest::prop_assert_eq!(format!("{run:?}"), format!("{single:?}"));
            }
        }
    }

    #[test]
    fn rfc5043_6_2_accepted_then_active_terminates() {
        let (mut a, mut p) = established();
        // §5.2.1/§6.1: each direction counts from 0 (Initiate/Accept), segments follow 1, 2, ..
        assert_eq!([1, 2, 3].map(|_| segment(&mut a, &mut p)), [1, 2, 3]);
        assert_eq!([1, 2].map(|_| segment(&mut p, &mut a)), [1, 2]);
        a.terminate().unwrap();
        let t = transmits(&mut a);
        assert_eq!(
            t,
            [Transmit {
                ddp_ssn: 4,
                message: ControlMessage::Terminate
            }]
        );
        feed(&t[0], &mut p).unwrap();
        a.on_acked(4).unwrap();
        assert_eq!(
            events(&mut a),
            [terminated(TerminationReason::LocalTerminate)]
        );
        assert_eq!(
            events(&mut p),
            [
                Event::TerminateReceived,
                terminated(TerminationReason::PeerTerminate)
            ]
        );
        // One Terminate suffices (§6.2), but each side MAY end with one: the passive side
        // answers, after its two segments, so the active side learns where its direction ends.
        assert!(
            !a.can_reuse(),
            "the peer's direction is not known complete yet"
        );
        let answer = transmits(&mut p);
        assert_eq!(
            answer,
            [Transmit {
                ddp_ssn: 3,
                message: ControlMessage::Terminate
            }]
        );
        assert!(!p.can_reuse(), "our Terminate is not acknowledged yet");
        feed(&answer[0], &mut a).unwrap();
        p.on_acked(3).unwrap();
        assert_eq!(events(&mut a), [Event::TerminateReceived]);
        assert!(
            transmits(&mut a).is_empty(),
            "a Terminate is not answered twice"
        );
        assert_eq!(a.next_ddp_ssn(), Err(LocalError::Terminated));
        assert_eq!(p.may_send_segment(), Err(LocalError::Terminated));
        assert_eq!(p.terminate(), Err(LocalError::Terminated));
        assert!(a.can_reuse() && p.can_reuse());
    }

    #[test]
    fn rfc5043_6_2_accepted_then_passive_terminates() {
        let (mut a, mut p) = established();
        segment(&mut p, &mut a);
        segment(&mut a, &mut p);
        p.terminate().unwrap();
        deliver(&mut p, &mut a);
        assert_eq!(
            events(&mut p),
            [terminated(TerminationReason::LocalTerminate)]
        );
        assert_eq!(
            events(&mut a),
            [
                Event::TerminateReceived,
                terminated(TerminationReason::PeerTerminate)
            ]
        );
        // The active side answers; only then does the passive side know the stream is clear.
        assert!(!p.can_reuse());
        deliver(&mut a, &mut p);
        assert_eq!(events(&mut p), [Event::TerminateReceived]);
        assert!(a.can_reuse() && p.can_reuse());
    }

    #[test]
    fn rfc5043_6_2_both_sides_terminate_crossing() {
        let (mut a, mut p) = established();
        segment(&mut a, &mut p);
        a.terminate().unwrap();
        p.terminate().unwrap();
        deliver(&mut a, &mut p);
        deliver(&mut p, &mut a);
        // "The final User Data Chunk for each side MAY be a DDP Stream Terminate" (§6.2).
        assert_eq!(
            events(&mut a),
            [
                terminated(TerminationReason::LocalTerminate),
                Event::TerminateReceived
            ]
        );
        assert_eq!(
            events(&mut p),
            [
                terminated(TerminationReason::LocalTerminate),
                Event::TerminateReceived
            ]
        );
        assert_eq!(
            a.state(),
            State::Terminated(TerminationReason::LocalTerminate)
        );
        assert!(a.can_reuse() && p.can_reuse());
    }

    /// RFC 5043 §6.3, §6.6: the active side's Terminate may cross our Reject; until it came,
    /// the caller is told so (the stream id may be reused meanwhile, and that Terminate must
    /// not end the next session).
    #[test]
    fn rfc5043_6_6_after_our_reject_the_peers_terminate_may_cross_it() {
        let mut a = Session::new(PendingLimit::new(4));
        let mut p = Session::new(PendingLimit::new(4));
        a.initiate(b"").unwrap();
        deliver(&mut a, &mut p);
        a.on_acked(0).unwrap();
        a.terminate().unwrap();
        let crossing = transmits(&mut a);
        assert!(!p.peer_terminate_may_cross());
        p.reject(b"").unwrap();
        transmits(&mut p);
        p.on_acked(0).unwrap();
        assert!(p.can_reuse());
        assert!(p.peer_terminate_may_cross());
        feed(&crossing[0], &mut p).unwrap();
        assert!(!p.peer_terminate_may_cross());
    }

    /// RFC 5043 §6.4: "the passive side MUST respond to the Initiate message with a DDP Stream
    /// Terminate Message", and the legal sequence may end there (§6.2 asks one Terminate of
    /// either side). A peer that sends no Terminate of its own after ours must not keep the
    /// stream id busy: our refusal at its DDP-SSN 0 (the pending limit, or our ULP's
    /// terminate while the Initiate waited) completes its direction as a Reject would, and
    /// its Terminate may still cross ours. Before, the stream id waited for that Terminate
    /// for good (an independent review, session 68).
    #[test]
    fn rfc5043_6_4_a_refusal_by_terminate_frees_the_stream_without_the_peers() {
        for over_limit in [true, false] {
            let mut a = Session::new(PendingLimit::new(4));
            let mut p = Session::new(PendingLimit::new(if over_limit { 0 } else { 4 }));
            a.initiate(b"").unwrap();
            deliver(&mut a, &mut p);
            if !over_limit {
                p.terminate().unwrap();
            }
            let t = transmits(&mut p);
            assert_eq!(
                t,
                [Transmit {
                    ddp_ssn: 0,
                    message: ControlMessage::Terminate
                }],
                "over the limit: {over_limit}"
            );
            p.on_acked(0).unwrap();
            assert!(p.can_reuse(), "over the limit: {over_limit}");
            assert!(p.peer_terminate_may_cross(), "over the limit: {over_limit}");
            // The active side's answer, if it sends one, still arrives as the crossing one.
            feed(&t[0], &mut a).unwrap();
            let answer = transmits(&mut a);
            feed(&answer[0], &mut p).unwrap();
            assert!(
                !p.peer_terminate_may_cross(),
                "over the limit: {over_limit}"
            );
            assert!(p.can_reuse(), "over the limit: {over_limit}");
        }
    }

    #[test]
    fn rfc5043_6_3_rejected_by_the_ulp() {
        let mut a = Session::new(PendingLimit::new(4));
        let mut p = Session::new(PendingLimit::new(4));
        a.initiate(b"hello").unwrap();
        deliver(&mut a, &mut p);
        events(&mut p);
        p.reject(b"no").unwrap();
        let t = transmits(&mut p);
        assert_eq!(
            t,
            [Transmit {
                ddp_ssn: 0,
                message: ControlMessage::Reject(pd(b"no"))
            }]
        );
        feed(&t[0], &mut a).unwrap();
        p.on_acked(0).unwrap();
        assert_eq!(
            events(&mut a),
            [
                Event::Rejected {
                    private_data: pd(b"no")
                },
                terminated(TerminationReason::PeerReject)
            ]
        );
        assert_eq!(events(&mut p), [terminated(TerminationReason::LocalReject)]);
        // §6.3: the sequence is Initiate, Reject: no Terminate from either side.
        assert!(transmits(&mut a).is_empty() && transmits(&mut p).is_empty());
        assert!(a.can_reuse() && p.can_reuse());
        assert_eq!(a.may_send_segment(), Err(LocalError::Terminated));
    }

    #[test]
    fn rfc5043_6_4_pending_limit_answered_with_terminate() {
        let limit = PendingLimit::new(1);
        let (mut a1, mut p1) = (Session::new(limit.clone()), Session::new(limit.clone()));
        let (mut a2, mut p2) = (Session::new(limit.clone()), Session::new(limit.clone()));
        a1.initiate(b"one").unwrap();
        deliver(&mut a1, &mut p1);
        assert_eq!(limit.pending(), 1);
        assert_eq!(limit.over_limit(), 0);
        a2.initiate(b"two").unwrap();
        deliver(&mut a2, &mut p2);
        assert_eq!(limit.over_limit(), 1, "counted");
        // Not forwarded to the ULP (§5.2.3), answered with a Terminate at DDP-SSN 0, never a
        // Reject (§6.3, §6.4).
        assert_eq!(
            events(&mut p2),
            [terminated(TerminationReason::PendingLimit)]
        );
        let t = transmits(&mut p2);
        assert_eq!(
            t,
            [Transmit {
                ddp_ssn: 0,
                message: ControlMessage::Terminate
            }]
        );
        feed(&t[0], &mut a2).unwrap();
        p2.on_acked(0).unwrap();
        assert_eq!(
            events(&mut a2),
            [
                Event::TerminateReceived,
                terminated(TerminationReason::PeerTerminate)
            ]
        );
        // The active side answers (§6.2: each side MAY end with a Terminate); then both know
        // the stream id is clear (§6.6).
        deliver(&mut a2, &mut p2);
        assert!(a2.can_reuse() && p2.can_reuse());
        assert_eq!(limit.pending(), 1);
        // The ULP's decision frees the slot; the next Initiate reaches the ULP again.
        p1.accept(b"").unwrap();
        assert_eq!(limit.pending(), 0);
        let (mut a3, mut p3) = (Session::new(limit.clone()), Session::new(limit.clone()));
        a3.initiate(b"three").unwrap();
        deliver(&mut a3, &mut p3);
        assert_eq!(
            events(&mut p3),
            [Event::InitiateReceived {
                private_data: pd(b"three")
            }]
        );
        assert_eq!(limit.pending(), 1);
        // A session dropped while its Initiate is pending cannot leak the slot.
        drop(p3);
        assert_eq!(limit.pending(), 0);
    }

    #[test]
    fn rfc5043_6_4_ulp_or_peer_ends_a_pending_initiate() {
        let limit = PendingLimit::new(2);
        // The ULP refuses with a Terminate: the §6.4 pattern on the wire.
        let (mut a, mut p) = (Session::new(limit.clone()), Session::new(limit.clone()));
        a.initiate(b"").unwrap();
        deliver(&mut a, &mut p);
        p.terminate().unwrap();
        assert_eq!(limit.pending(), 0);
        deliver(&mut p, &mut a);
        assert_eq!(
            a.state(),
            State::Terminated(TerminationReason::PeerTerminate)
        );
        // The active side gives up while the passive ULP decides: the slot is freed.
        let (mut a, mut p) = (Session::new(limit.clone()), Session::new(limit.clone()));
        a.initiate(b"").unwrap();
        deliver(&mut a, &mut p);
        assert_eq!(limit.pending(), 1);
        a.terminate().unwrap();
        deliver(&mut a, &mut p);
        assert_eq!(limit.pending(), 0);
        assert_eq!(
            p.state(),
            State::Terminated(TerminationReason::PeerTerminate)
        );
        assert_eq!(p.accept(b""), Err(LocalError::NotPending));
    }

    #[test]
    fn rfc5043_6_6_terminate_waits_until_the_initiate_is_acked() {
        let mut a = Session::new(PendingLimit::new(4));
        let mut p = Session::new(PendingLimit::new(4));
        a.initiate(b"").unwrap();
        let initiate = transmits(&mut a);
        a.terminate().unwrap();
        // It could overtake the unacknowledged Initiate: held back.
        assert!(transmits(&mut a).is_empty());
        assert!(!a.can_reuse());
        a.on_acked(0).unwrap();
        let terminate = transmits(&mut a);
        assert_eq!(
            terminate,
            [Transmit {
                ddp_ssn: 1,
                message: ControlMessage::Terminate
            }]
        );
        feed(&initiate[0], &mut p).unwrap();
        feed(&terminate[0], &mut p).unwrap();
        assert_eq!(
            p.state(),
            State::Terminated(TerminationReason::PeerTerminate)
        );
    }

    #[test]
    fn rfc5043_6_6_a_response_proves_the_initiate_arrived() {
        let mut a = Session::new(PendingLimit::new(4));
        let mut p = Session::new(PendingLimit::new(4));
        a.initiate(b"").unwrap();
        let initiate = transmits(&mut a);
        a.terminate().unwrap();
        feed(&initiate[0], &mut p).unwrap();
        p.accept(b"").unwrap();
        // The Accept arrives before SCTP's ack of the Initiate: the Terminate may go.
        deliver(&mut p, &mut a);
        let t = transmits(&mut a);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].message, ControlMessage::Terminate);
        feed(&t[0], &mut p).unwrap();
        assert_eq!(
            p.state(),
            State::Terminated(TerminationReason::PeerTerminate)
        );
    }

    #[test]
    fn rfc5043_6_6_passive_terminate_waits_for_the_accept_ack() {
        let mut a = Session::new(PendingLimit::new(4));
        let mut p = Session::new(PendingLimit::new(4));
        a.initiate(b"").unwrap();
        deliver(&mut a, &mut p);
        p.accept(b"").unwrap();
        let accept = transmits(&mut p);
        p.terminate().unwrap();
        assert!(transmits(&mut p).is_empty());
        feed(&accept[0], &mut a).unwrap();
        p.on_acked(0).unwrap();
        deliver(&mut p, &mut a);
        assert_eq!(
            a.state(),
            State::Terminated(TerminationReason::PeerTerminate)
        );
    }

    #[test]
    fn rfc5043_6_6_active_sends_no_segment_before_the_accept() {
        let mut a = Session::new(PendingLimit::new(4));
        assert_eq!(a.may_send_segment(), Err(LocalError::NoSession));
        a.initiate(b"").unwrap();
        a.on_acked(0).unwrap();
        // Even with the Initiate acknowledged: no §6.5 sequence is enabled.
        assert_eq!(a.next_ddp_ssn(), Err(LocalError::NotEstablished));
        a.on_control(0, FunctionCode::Accept, b"").unwrap();
        assert_eq!(a.next_ddp_ssn(), Ok(1));
    }

    #[test]
    fn rfc5043_6_1_passive_segments_may_overtake_the_accept() {
        let mut a = Session::new(PendingLimit::new(4));
        let mut p = Session::new(PendingLimit::new(4));
        a.initiate(b"").unwrap();
        deliver(&mut a, &mut p);
        p.accept(b"").unwrap();
        let accept = transmits(&mut p);
        // Normative order is by DDP-SSN (§6.1): segments 1 and 2 follow the Accept at 0 even
        // if SCTP delivers them first.
        let (s1, s2) = (p.next_ddp_ssn().unwrap(), p.next_ddp_ssn().unwrap());
        a.on_segment(s2).unwrap();
        a.on_segment(s1).unwrap();
        assert_eq!(a.state(), State::InitiateSent);
        feed(&accept[0], &mut a).unwrap();
        assert_eq!(a.state(), State::Established);
        assert_eq!(a.rx.base, 3);
    }

    #[test]
    fn rfc5043_6_1_terminate_may_overtake_the_last_segments() {
        let (mut a, mut p) = established();
        let ssns = [1, 2, 3].map(|_| a.next_ddp_ssn().unwrap());
        a.terminate().unwrap();
        let t = transmits(&mut a);
        assert_eq!(t[0].ddp_ssn, 4);
        feed(&t[0], &mut p).unwrap();
        assert_eq!(
            p.state(),
            State::Terminated(TerminationReason::PeerTerminate)
        );
        // The peer's chunks 1..3 are still outstanding: the stream is not reusable yet.
        assert!(!p.can_reuse());
        for ssn in [ssns[1], ssns[0], ssns[2]] {
            p.on_segment(ssn).unwrap();
        }
        assert!(p.inbound_complete());
        assert!(
            !p.can_reuse(),
            "its answering Terminate is not acknowledged yet"
        );
        deliver(&mut p, &mut a);
        assert!(p.can_reuse());
        assert_eq!(p.on_segment(5), Err(ProtocolError::AfterFinal));
    }

    /// Where the table's session starts from; everything it sent is acknowledged.
    #[derive(Debug, Clone, Copy)]
    enum Setup {
        PassiveIdle,
        PassivePending,
        PassiveEstablished,
        PassiveRejected,
        ActiveAwaiting,
        ActiveEstablished,
    }

    #[derive(Debug, Clone, Copy)]
    enum In {
        Ctl(u16, FunctionCode, &'static [u8]),
        Seg(u16),
    }

    fn setup(which: Setup) -> Session {
        let mut s = Session::new(PendingLimit::new(4));
        match which {
            Setup::PassiveIdle => {}
            Setup::PassivePending => {
                s.on_control(0, FunctionCode::Initiate, b"").unwrap();
            }
            Setup::PassiveEstablished => {
                s.on_control(0, FunctionCode::Initiate, b"").unwrap();
                s.accept(b"").unwrap();
                s.on_acked(0).unwrap();
            }
            Setup::PassiveRejected => {
                s.on_control(0, FunctionCode::Initiate, b"").unwrap();
                s.reject(b"").unwrap();
                s.on_acked(0).unwrap();
            }
            Setup::ActiveAwaiting => {
                s.initiate(b"").unwrap();
                s.on_acked(0).unwrap();
            }
            Setup::ActiveEstablished => {
                s.initiate(b"").unwrap();
                s.on_acked(0).unwrap();
                s.on_control(0, FunctionCode::Accept, b"").unwrap();
            }
        }
        events(&mut s);
        transmits(&mut s);
        s
    }

    fn step(s: &mut Session, input: In) -> Result<(), ProtocolError> {
        match input {
            In::Ctl(ssn, f, data) => s.on_control(ssn, f, data),
            In::Seg(ssn) => s.on_segment(ssn),
        }
    }

    #[test]
    fn rfc5043_6_1_illegal_sequences_terminate_the_session() {
        use FunctionCode::{Accept, Initiate, Reject, Terminate};
        use ProtocolError as E;
        use Setup::*;
        use TerminationReason as R;
        let pe = R::ProtocolError;
        #[rustfmt::skip]
        let table: &[(&str, Setup, &[In], ProtocolError, TerminationReason)] = &[
            // A stream without a session drops what is not an Initiate at DDP-SSN 0:
            // `rfc5043_6_1_a_stream_without_a_session_drops_stray_chunks`. An Initiate that
            // breaks a format rule still starts one, refused with a Terminate (§6.4).
            ("§5.2.3 Initiate with 513 bytes of Private Data", PassiveIdle, &[In::Ctl(0, Initiate, BIG)], E::PrivateDataTooLong, pe(E::PrivateDataTooLong)),
            ("§6.2/§6.6 segment before our Accept", PassivePending, &[In::Seg(1)], E::SegmentBeforeAccept, pe(E::SegmentBeforeAccept)),
            ("§6.2 a second Initiate", PassivePending, &[In::Ctl(1, Initiate, b"")], E::UnexpectedInitiate, pe(E::UnexpectedInitiate)),
            ("§10 the Initiate's DDP-SSN again", PassivePending, &[In::Ctl(0, Initiate, b"")], E::Duplicate, pe(E::Duplicate)),
            ("§6.2 Accept from the active side", PassivePending, &[In::Ctl(1, Accept, b"")], E::UnexpectedAccept, pe(E::UnexpectedAccept)),
            ("§6.3 Reject from the active side", PassiveEstablished, &[In::Seg(1), In::Ctl(2, Reject, b"")], E::UnexpectedReject, pe(E::UnexpectedReject)),
            ("§5.2.3 Private Data on a Terminate", PassiveEstablished, &[In::Ctl(1, Terminate, b"x")], E::PrivateDataOnTerminate, pe(E::PrivateDataOnTerminate)),
            ("§6.2 an Initiate crossing ours", ActiveAwaiting, &[In::Ctl(0, Initiate, b"")], E::UnexpectedInitiate, pe(E::UnexpectedInitiate)),
            ("§6.2 segment in the Accept's place", ActiveAwaiting, &[In::Seg(0)], E::SegmentBeforeAccept, pe(E::SegmentBeforeAccept)),
            ("§6.2 Accept not at DDP-SSN 0", ActiveAwaiting, &[In::Ctl(1, Accept, b"")], E::UnexpectedAccept, pe(E::UnexpectedAccept)),
            ("§6.3 Reject behind segments already received", ActiveAwaiting, &[In::Seg(1), In::Ctl(0, Reject, b"")], E::AfterFinal, pe(E::AfterFinal)),
            ("§5.2.3 Reject with 513 bytes of Private Data", ActiveAwaiting, &[In::Ctl(0, Reject, BIG)], E::PrivateDataTooLong, pe(E::PrivateDataTooLong)),
            ("§6.6 Terminate ahead of the Accept", ActiveAwaiting, &[In::Ctl(1, Terminate, b"")], E::TerminateBeforeAnswer, pe(E::TerminateBeforeAnswer)),
            ("§6.6 Terminate ahead of the Accept, behind segments", ActiveAwaiting, &[In::Seg(1), In::Ctl(2, Terminate, b"")], E::TerminateBeforeAnswer, pe(E::TerminateBeforeAnswer)),
            ("§6.3 Reject after Accept", ActiveEstablished, &[In::Ctl(1, Reject, b"")], E::UnexpectedReject, pe(E::UnexpectedReject)),
            ("§6.2 a second Accept", ActiveEstablished, &[In::Seg(1), In::Ctl(2, Accept, b"")], E::UnexpectedAccept, pe(E::UnexpectedAccept)),
            ("§10 the Accept's DDP-SSN again", ActiveEstablished, &[In::Ctl(0, Accept, b"")], E::Duplicate, pe(E::Duplicate)),
            ("§10 a segment twice, out of order", ActiveEstablished, &[In::Seg(3), In::Seg(3)], E::Duplicate, pe(E::Duplicate)),
            ("§10 a segment twice, in order", ActiveEstablished, &[In::Seg(1), In::Seg(1)], E::Duplicate, pe(E::Duplicate)),
            ("§10 DDP-SSN out of the window", ActiveEstablished, &[In::Seg(40000)], E::OutOfWindow, pe(E::OutOfWindow)),
            ("§6.2 Terminate behind segments already received", ActiveEstablished, &[In::Seg(5), In::Ctl(3, Terminate, b"")], E::AfterFinal, pe(E::AfterFinal)),
            // The session already ended legally: the reason stays, nothing more is sent.
            ("§6.2 segment after the Terminate", ActiveEstablished, &[In::Ctl(3, Terminate, b""), In::Seg(4)], E::AfterFinal, R::PeerTerminate),
            ("§6.2 control message after the Terminate", ActiveEstablished, &[In::Ctl(1, Terminate, b""), In::Ctl(2, Accept, b"")], E::AfterFinal, R::PeerTerminate),
            ("§6.3 segment after the Reject", ActiveAwaiting, &[In::Ctl(0, Reject, b""), In::Seg(1)], E::AfterFinal, R::PeerReject),
            ("§6.4 segment after a non-ULP Terminate", ActiveAwaiting, &[In::Ctl(0, Terminate, b""), In::Seg(1)], E::AfterFinal, R::PeerTerminate),
            ("§6.3 segment after our Reject", PassiveRejected, &[In::Seg(1)], E::SegmentBeforeAccept, R::LocalReject),
        ];
        for &(rule, which, inputs, error, reason) in table {
            let mut s = setup(which);
            let (last, legal) = inputs.split_last().unwrap();
            for &input in legal {
                assert_eq!(step(&mut s, input), Ok(()), "{rule}: {input:?}");
            }
            assert_eq!(step(&mut s, *last), Err(error), "{rule}");
            assert_eq!(s.state(), State::Terminated(reason), "{rule}");
            let ended = events(&mut s)
                .into_iter()
                .filter(|e| matches!(e, Event::SessionTerminated { .. }))
                .collect::<Vec<_>>();
            // Reported once; for `PassiveRejected` that was during the setup.
            if matches!(which, PassiveRejected) {
                assert!(ended.is_empty(), "{rule}");
            } else {
                assert_eq!(ended, [terminated(reason)], "{rule}");
            }
            let sent = transmits(&mut s);
            if matches!(reason, R::ProtocolError(_) | R::PeerTerminate) {
                // §6.1 "MUST be terminated", and by a Terminate, never a Reject (§6.3); a
                // peer's Terminate is answered by ours (§6.2), once.
                assert_eq!(sent.len(), 1, "{rule}");
                assert_eq!(sent[0].message, ControlMessage::Terminate, "{rule}");
            } else {
                assert!(sent.is_empty(), "{rule}");
            }
        }
    }

    /// RFC 5043 §6.1 terminates a *session* that breaks its pattern, and §6.2 starts one
    /// only with an Initiate at DDP-SSN 0: on a stream that has none, anything else is
    /// dropped, the stream stays Idle, nothing is sent. It used to end the stream in
    /// `ProtocolError(NotInitiated)`, without a role, with a Terminate at DDP-SSN 0 that fits
    /// no pattern at the peer (a ddpdk peer idle on the stream answered it with its own), and
    /// neither side could start a session on that stream id again.
    #[test]
    fn rfc5043_6_1_a_stream_without_a_session_drops_stray_chunks() {
        use FunctionCode::{Accept, Initiate, Reject, Terminate};
        #[rustfmt::skip]
        let strays: &[(&str, In, ProtocolError)] = &[
            ("a segment", In::Seg(0), ProtocolError::NotInitiated),
            ("a later segment", In::Seg(7), ProtocolError::NotInitiated),
            ("an Accept", In::Ctl(0, Accept, b""), ProtocolError::NotInitiated),
            ("a Reject", In::Ctl(0, Reject, b""), ProtocolError::NotInitiated),
            ("a Terminate", In::Ctl(0, Terminate, b""), ProtocolError::NotInitiated),
            ("an Initiate not at DDP-SSN 0", In::Ctl(1, Initiate, b""), ProtocolError::NotInitiated),
            ("an unknown function code", In::Ctl(0, FunctionCode::Unknown(5), b""), ProtocolError::UnknownFunction(5)),
            ("a Terminate with Private Data", In::Ctl(0, Terminate, b"x"), ProtocolError::PrivateDataOnTerminate),
            ("an Accept with 513 bytes of Private Data", In::Ctl(0, Accept, BIG), ProtocolError::PrivateDataTooLong),
        ];
        for &(what, input, error) in strays {
            let mut s = Session::new(PendingLimit::new(4));
            assert_eq!(step(&mut s, input), Err(error), "{what}");
            assert_eq!((s.state(), s.role()), (State::Idle, None), "{what}");
            assert!(events(&mut s).is_empty(), "{what}");
            assert!(transmits(&mut s).is_empty(), "{what}: no Terminate");
            // The stream is as new: the peer may still start a session, or we may.
            let mut p = Session::new(PendingLimit::new(4));
            assert_eq!(step(&mut p, input), Err(error), "{what}");
            p.on_control(0, Initiate, b"").unwrap();
            assert_eq!(p.state(), State::InitiateReceived, "{what}");
            s.initiate(b"").unwrap();
            assert_eq!(s.state(), State::InitiateSent, "{what}");
        }
        let mut s = Session::new(PendingLimit::new(4));
        assert_eq!(s.on_truncated(), Err(ProtocolError::Truncated));
        assert_eq!(s.on_unknown_ppid(18), Err(ProtocolError::UnknownPpid(18)));
        assert_eq!(s.state(), State::Idle);
        assert!(events(&mut s).is_empty() && transmits(&mut s).is_empty());
    }

    /// RFC 5043 §6.2 has one active side: when both ULPs initiate on the same stream, each
    /// Initiate crosses the other and each side refuses it (§6.1) with a Terminate, which is
    /// the last chunk either sends. Once those are exchanged and acknowledged nothing of the
    /// session can be outstanding (§6.6), and both sides may start a new one. The refused
    /// Initiate at DDP-SSN 0 used to stay uncounted, a gap before the peer's Terminate that
    /// kept `can_reuse` false for the rest of the association, on both sides.
    #[test]
    fn rfc5043_6_1_an_initiate_collision_leaves_the_stream_reusable() {
        let mut a = Session::new(PendingLimit::new(4));
        let mut b = Session::new(PendingLimit::new(4));
        a.initiate(b"a").unwrap();
        b.initiate(b"b").unwrap();
        let (ia, ib) = (transmits(&mut a), transmits(&mut b));
        assert_eq!(feed(&ib[0], &mut a), Err(ProtocolError::UnexpectedInitiate));
        assert_eq!(feed(&ia[0], &mut b), Err(ProtocolError::UnexpectedInitiate));
        let refused = State::Terminated(TerminationReason::ProtocolError(
            ProtocolError::UnexpectedInitiate,
        ));
        assert_eq!((a.state(), b.state()), (refused, refused));
        // §6.6: each Terminate waits for its side's Initiate to be acknowledged.
        assert!(transmits(&mut a).is_empty() && transmits(&mut b).is_empty());
        a.on_acked(0).unwrap();
        b.on_acked(0).unwrap();
        let (ta, tb) = (transmits(&mut a), transmits(&mut b));
        assert_eq!(
            ta,
            [Transmit {
                ddp_ssn: 1,
                message: ControlMessage::Terminate
            }]
        );
        assert_eq!(
            tb,
            [Transmit {
                ddp_ssn: 1,
                message: ControlMessage::Terminate
            }]
        );
        // §6.6: not before the peer's final message and everything before it arrived.
        assert!(!a.can_reuse() && !b.can_reuse());
        feed(&tb[0], &mut a).unwrap();
        feed(&ta[0], &mut b).unwrap();
        assert!(a.inbound_complete() && b.inbound_complete());
        // Nor before our own Terminate is acknowledged.
        assert!(!a.can_reuse() && !b.can_reuse());
        a.on_acked(1).unwrap();
        b.on_acked(1).unwrap();
        assert!(a.can_reuse() && b.can_reuse());
        // The Terminates are not answered again.
        assert!(transmits(&mut a).is_empty() && transmits(&mut b).is_empty());
    }

    /// RFC 5043 §6: a session's DDP-SSNs have no gaps, so a chunk the pattern refuses still
    /// takes its place in the peer's direction; the peer's Terminate after it completes the
    /// direction (§6.6), as it does after any other chunk.
    #[test]
    fn rfc5043_6_a_refused_chunk_is_no_gap_before_the_peers_terminate() {
        use FunctionCode::{Accept, Initiate, Terminate};
        #[rustfmt::skip]
        let cases: &[(&str, Setup, &[In])] = &[
            ("a second Accept", Setup::ActiveEstablished, &[In::Seg(1), In::Ctl(2, Accept, b""), In::Ctl(3, Terminate, b"")]),
            ("an unknown function code", Setup::ActiveEstablished, &[In::Ctl(1, FunctionCode::Unknown(9), b""), In::Ctl(2, Terminate, b"")]),
            // (A Terminate refused for its Private Data is the peer's last chunk itself:
            // `rfc5043_6_6_a_refused_final_message_still_completes_the_peers_direction`.)
            ("a segment before our Accept", Setup::PassivePending, &[In::Seg(1), In::Ctl(2, Terminate, b"")]),
            ("an oversized Initiate", Setup::PassiveIdle, &[In::Ctl(0, Initiate, BIG), In::Ctl(1, Terminate, b"")]),
            // The refused Terminate is still the peer's last chunk: the answer completes it.
            ("a Terminate ahead of the Accept", Setup::ActiveAwaiting, &[In::Ctl(2, Terminate, b""), In::Seg(1), In::Ctl(0, Accept, b"")]),
        ];
        for &(what, which, inputs) in cases {
            let mut s = setup(which);
            let (last, before) = inputs.split_last().unwrap();
            for &input in before {
                let _ = step(&mut s, input);
            }
            assert!(
                matches!(
                    s.state(),
                    State::Terminated(TerminationReason::ProtocolError(_))
                ),
                "{what}"
            );
            assert!(!s.inbound_complete(), "{what}");
            assert_eq!(step(&mut s, *last), Ok(()), "{what}");
            assert!(s.inbound_complete(), "{what}");
            let sent = transmits(&mut s);
            assert_eq!(sent.len(), 1, "{what}: one Terminate");
            s.on_acked(sent[0].ddp_ssn).unwrap();
            assert!(s.can_reuse(), "{what}");
        }
    }

    /// RFC 5043 §6: "The DDP-SSNs assigned to the Data Chunks for a session MUST NOT have any
    /// gaps". A peer's Terminate with DDP-SSNs missing before it leaves its direction
    /// incomplete (they may be late, §6.1) and the stream id unusable (§6.6) until they come,
    /// or until the caller, which has a clock, gives up on them.
    #[test]
    fn rfc5043_6_a_gap_before_the_peers_terminate_can_be_given_up() {
        let mut s = setup(Setup::PassiveEstablished);
        s.give_up_inbound_gap();
        assert!(
            !s.inbound_complete(),
            "nothing to give up while established"
        );
        s.on_segment(1).unwrap();
        s.on_control(5, FunctionCode::Terminate, b"").unwrap();
        assert!(s.awaits_inbound_gap() && !s.inbound_complete());
        let t = transmits(&mut s);
        assert_eq!(t.len(), 1, "our answering Terminate");
        s.on_acked(t[0].ddp_ssn).unwrap();
        assert!(s.outbound_complete() && !s.can_reuse());
        s.give_up_inbound_gap();
        assert!(!s.awaits_inbound_gap() && s.inbound_complete() && s.can_reuse());
        // A chunk later still is one the pattern allows; the caller no longer places it.
        assert_eq!(s.on_segment(3), Ok(()));
        // Without a gap there is nothing to wait for.
        let mut s = setup(Setup::PassiveEstablished);
        s.on_control(1, FunctionCode::Terminate, b"").unwrap();
        assert!(!s.awaits_inbound_gap() && s.inbound_complete());
    }

    #[test]
    fn rfc5043_10_gap_filled_out_of_order() {
        let mut s = setup(Setup::ActiveEstablished);
        for ssn in [4, 2, 3] {
            s.on_segment(ssn).unwrap();
        }
        assert_eq!(s.rx.base, 1);
        s.on_segment(1).unwrap();
        assert_eq!((s.rx.base, s.rx.set), (5, 0));
        // Below the window's base: already received.
        assert_eq!(s.on_segment(2), Err(ProtocolError::Duplicate));
    }

    #[test]
    fn rfc5043_10_receive_window_edges() {
        // After the Accept (0) the lowest missing is 1: [1, 32769) is acceptable.
        let mut s = setup(Setup::ActiveEstablished);
        s.on_segment(32768).unwrap();
        s.on_segment(1).unwrap();
        let mut s = setup(Setup::ActiveEstablished);
        assert_eq!(s.on_segment(32769), Err(ProtocolError::OutOfWindow));
        // The same for a control message.
        let mut s = setup(Setup::ActiveEstablished);
        assert_eq!(
            s.on_control(32769, FunctionCode::Terminate, b""),
            Err(ProtocolError::OutOfWindow)
        );
    }

    #[test]
    fn rfc5043_5_2_1_ddp_ssn_wraps_without_gaps() {
        let (mut a, mut p) = established();
        let mut last = 0u16;
        for _ in 0..70_000 {
            let ssn = segment(&mut a, &mut p);
            assert_eq!(ssn, last.wrapping_add(1));
            last = ssn;
        }
        // Far behind the window after the wrap: a repeat, not a new chunk.
        assert_eq!(
            p.on_segment(last.wrapping_sub(100)),
            Err(ProtocolError::Duplicate)
        );
    }

    #[test]
    fn rfc5043_10_sender_window_of_32767() {
        let (mut a, mut p) = established();
        for i in 1..=32767u16 {
            let ssn = p.next_ddp_ssn().unwrap();
            assert_eq!(ssn, i);
            a.on_segment(ssn).unwrap();
        }
        assert_eq!(p.outstanding(), 32767);
        assert_eq!(p.may_send_segment(), Err(LocalError::WouldExceedWindow));
        assert_eq!(p.next_ddp_ssn(), Err(LocalError::WouldExceedWindow));
        // An acknowledgement above the lowest outstanding chunk does not open the window:
        // the receiver's window starts at the lowest chunk it misses.
        p.on_acked(2).unwrap();
        assert_eq!(p.next_ddp_ssn(), Err(LocalError::WouldExceedWindow));
        p.on_acked(1).unwrap();
        for expected in [32768, 32769] {
            let ssn = p.next_ddp_ssn().unwrap();
            assert_eq!(ssn, expected);
            a.on_segment(ssn).unwrap();
        }
        assert_eq!(p.next_ddp_ssn(), Err(LocalError::WouldExceedWindow));
        // The Terminate is a chunk too: held back until there is room.
        p.terminate().unwrap();
        assert!(transmits(&mut p).is_empty());
        p.acked_through(100).unwrap();
        let t = transmits(&mut p);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].ddp_ssn, 32770);
        feed(&t[0], &mut a).unwrap();
        assert_eq!(
            a.state(),
            State::Terminated(TerminationReason::PeerTerminate)
        );
        deliver(&mut a, &mut p);
        assert!(p.inbound_complete());
        assert!(!p.can_reuse(), "its own chunks are not all acknowledged");
        p.acked_through(32770).unwrap();
        assert!(p.can_reuse());
    }

    #[test]
    fn rfc5043_5_2_3_private_data_limits_at_the_source() {
        let mut a = Session::new(PendingLimit::new(4));
        assert_eq!(a.initiate(BIG), Err(LocalError::PrivateDataTooLong));
        assert_eq!(a.state(), State::Idle);
        assert!(transmits(&mut a).is_empty());
        a.initiate(MAX).unwrap();
        let t = transmits(&mut a);
        assert_eq!(t[0].repr().buffer_len(), 4 + MAX_PRIVATE_DATA_LEN);

        let mut p = setup(Setup::PassivePending);
        assert_eq!(p.accept(BIG), Err(LocalError::PrivateDataTooLong));
        assert_eq!(p.reject(BIG), Err(LocalError::PrivateDataTooLong));
        assert_eq!(p.state(), State::InitiateReceived);
        assert!(transmits(&mut p).is_empty());
        // "MAY be of zero length" (§5.2.3).
        p.accept(b"").unwrap();
        assert_eq!(
            transmits(&mut p)[0].repr().message,
            Message::Accept(PrivateData::EMPTY)
        );
        assert!(OwnedPrivateData::new(BIG).is_err());
    }

    #[test]
    fn rfc5043_5_2_3_private_data_reported_on_receipt() {
        let mut p = setup(Setup::PassiveIdle);
        p.on_control(0, FunctionCode::Initiate, MAX).unwrap();
        assert_eq!(
            events(&mut p),
            [Event::InitiateReceived {
                private_data: pd(MAX)
            }]
        );
    }

    #[test]
    fn rfc5043_6_6_can_reuse_only_after_termination_and_acknowledgement() {
        let (mut a, mut p) = established();
        assert!(!a.can_reuse() && !p.can_reuse());
        let ssn = a.next_ddp_ssn().unwrap();
        a.terminate().unwrap();
        let t = transmits(&mut a);
        assert_eq!(t[0].ddp_ssn, 2);
        assert!(!a.can_reuse());
        a.on_acked(2).unwrap();
        // The segment is still unacknowledged.
        assert!(!a.can_reuse());
        a.on_acked(ssn).unwrap();
        // Ours are all acknowledged, but the peer may still have chunks of this session in
        // flight until its own final message arrives.
        assert!(!a.can_reuse() && !a.inbound_complete());
        // The passive side learns of the end before the segment: not reusable until it came.
        feed(&t[0], &mut p).unwrap();
        assert!(!p.inbound_complete());
        p.on_segment(ssn).unwrap();
        assert!(p.inbound_complete());
        // Its answering Terminate tells the active side that the peer's direction is done.
        deliver(&mut p, &mut a);
        assert!(a.can_reuse() && p.can_reuse());
    }

    /// §6.6: a peer's new Initiate on a stream whose session is over starts a new session as
    /// soon as we owe nothing more in the old one; before that it belongs to the old one.
    #[test]
    fn rfc5043_6_6_new_initiate_accepted_once_we_owe_nothing() {
        let (mut a, mut p) = established();
        assert!(!p.accepts_new_session(), "still established");
        a.terminate().unwrap();
        let t = transmits(&mut a);
        feed(&t[0], &mut p).unwrap();
        // p owes its answering Terminate: not yet.
        assert!(!p.accepts_new_session());
        let answer = transmits(&mut p);
        assert_eq!(answer.len(), 1);
        assert!(p.accepts_new_session());
    }

    #[test]
    fn rfc5043_11_3_association_end_terminates_every_session() {
        let (mut a, _p) = established();
        let _ = a.next_ddp_ssn().unwrap();
        a.association_ended();
        assert_eq!(
            events(&mut a),
            [terminated(TerminationReason::AssociationEnded)]
        );
        assert!(transmits(&mut a).is_empty());
        // Nothing of a dead association can be outstanding.
        assert!(a.can_reuse());

        let limit = PendingLimit::new(1);
        let mut p = Session::new(limit.clone());
        p.on_control(0, FunctionCode::Initiate, b"").unwrap();
        p.association_ended();
        assert_eq!(limit.pending(), 0);
        assert_eq!(
            p.state(),
            State::Terminated(TerminationReason::AssociationEnded)
        );

        // A stream that never had a session reports nothing, and says it never had one.
        let mut idle = Session::new(limit);
        assert!(idle.never_opened());
        idle.association_ended();
        assert!(events(&mut idle).is_empty());
        assert!(idle.never_opened());
        assert!(!a.never_opened() && !p.never_opened());
    }

    #[test]
    fn local_calls_out_of_place_are_refused() {
        let mut s = Session::new(PendingLimit::new(4));
        assert_eq!(s.accept(b""), Err(LocalError::NotPending));
        assert_eq!(s.reject(b""), Err(LocalError::NotPending));
        assert_eq!(s.terminate(), Err(LocalError::NoSession));
        assert_eq!(s.on_acked(0), Err(LocalError::NotSent));
        s.initiate(b"").unwrap();
        assert_eq!(s.initiate(b""), Err(LocalError::AlreadyStarted));
        // §6.3: a Reject only from the passive side's ULP.
        assert_eq!(s.reject(b""), Err(LocalError::NotPending));
        assert_eq!(s.on_acked(1), Err(LocalError::NotSent));
        assert_eq!(s.acked_through(5), Err(LocalError::NotSent));
        s.on_acked(0).unwrap();
        s.on_acked(0).unwrap();
    }

    #[test]
    fn errors_display() {
        for e in [
            ProtocolError::OutOfWindow,
            ProtocolError::UnknownFunction(7),
            ProtocolError::PrivateDataOnTerminate,
        ] {
            assert!(!e.to_string().is_empty());
            assert!(TerminationReason::ProtocolError(e)
                .to_string()
                .contains(&e.to_string()));
        }
        assert_eq!(
            TerminationReason::AssociationEnded.to_string(),
            "association ended"
        );
        assert!(!LocalError::WouldExceedWindow.to_string().is_empty());
    }

    /// RFC 5043 §6.2 and §6.6: a Terminate or Reject refused for its format (Private Data on a
    /// Terminate, more than 512 bytes) or for its place (behind chunks already received) is
    /// still the peer's last chunk: once it and everything before it are in, and ours are
    /// acknowledged, the stream id may be reused. It was never counted final, so the stream
    /// id stayed busy for us until the association ended (an independent review).
    #[test]
    fn rfc5043_6_6_a_refused_final_message_still_completes_the_peers_direction() {
        use FunctionCode::{Reject, Terminate};
        let cases: [(Setup, &[In]); 4] = [
            (Setup::PassiveEstablished, &[In::Ctl(1, Terminate, b"x")]),
            (Setup::PassiveEstablished, &[In::Ctl(1, Terminate, BIG)]),
            (Setup::ActiveAwaiting, &[In::Ctl(0, Reject, BIG)]),
            (
                Setup::PassiveEstablished,
                &[In::Seg(2), In::Ctl(1, Terminate, b"")],
            ),
        ];
        for (k, (which, inputs)) in cases.into_iter().enumerate() {
            let mut s = setup(which);
            let mut last = Ok(());
            for &input in inputs {
                last = step(&mut s, input);
            }
            assert!(last.is_err(), "case {k}: refused");
            for t in transmits(&mut s) {
                s.on_acked(t.ddp_ssn).unwrap();
            }
            assert!(
                s.inbound_complete(),
                "case {k}: the peer's direction is complete"
            );
            assert!(s.can_reuse(), "case {k}");
        }
        // A second final message, refused for its Private Data, does not move the first one's
        // place: DDP-SSN 2 is still missing before the Terminate at 3.
        let mut s = setup(Setup::PassiveEstablished);
        assert_eq!(step(&mut s, In::Ctl(3, Terminate, b"")), Ok(()));
        assert!(step(&mut s, In::Ctl(1, Terminate, b"x")).is_err());
        assert!(!s.inbound_complete(), "DDP-SSN 2 is missing");
    }

    /// RFC 5043 §6.2: our Terminate held for the ULP's last message (RDMAP's Terminate,
    /// `hold_final`) while the session is established, then released when that has gone; a
    /// failure of the machine on such a stream holds it by itself; the association's end
    /// (a restart, a close) ends the hold, as nothing more leaves (a review: it stayed, and
    /// the connection kept the ULP's queued Terminate, counted, for a session gone).
    #[test]
    fn rfc5043_6_2_our_terminate_waits_for_the_ulps_last_message() {
        let mut s = setup(Setup::PassiveEstablished);
        s.hold_final();
        s.terminate().unwrap();
        assert!(transmits(&mut s).is_empty(), "held");
        assert_eq!(
            s.may_send_segment(),
            Ok(()),
            "the ULP's last message may go"
        );
        s.release_final();
        let sent = transmits(&mut s);
        assert!(matches!(
            sent[..],
            [Transmit {
                message: ControlMessage::Terminate,
                ..
            }]
        ));
        assert!(s.may_send_segment().is_err(), "nothing after our Terminate");

        let mut s = setup(Setup::PassiveEstablished);
        s.set_terminate_follows_ulp(true);
        assert_eq!(s.on_segment(40_000), Err(ProtocolError::OutOfWindow));
        assert!(
            s.final_held() && transmits(&mut s).is_empty(),
            "held by the failure"
        );
        s.association_ended();
        assert!(!s.final_held(), "the association's end ends the hold");
    }
}
