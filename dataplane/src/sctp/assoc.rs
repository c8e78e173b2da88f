//! One SCTP association, sans-IO (RFC 9260 as specialised for DDP by RFC 5043).
//!
//! The caller owns the clock and the wire: it passes every packet for this association to
//! [`Association::handle`], sends whatever [`Association::poll_transmit`] writes, calls
//! [`Association::handle_timeout`] when [`Association::poll_timeout`] says, and takes
//! [`Event`]s from [`Association::poll_event`]. Messages are handed up during `handle`, straight
//! from the packet buffer, through the caller's [`Deliver`]: nothing is copied or kept on the
//! receive side, which is what lets DDP place payload directly (DESIGN.md).
//!
//! The association is single-homed: one path, with its own MTU, RTO, congestion window and
//! heartbeat. The caller finds the association of a packet by its addresses and ports; an
//! association answers INIT and COOKIE ECHO itself for the collision and restart cases of §5.2,
//! while packets that match no association go to [`super::Endpoint`].
//!
//! # Memory
//!
//! Allocated when the association is made and never again on the data path:
//! `send_slots * max_message` bytes of send buffer plus 48 bytes of book-keeping per slot,
//! `tsn_window / 8` bytes of received-TSN bitmap, the peer's cookie while it is being echoed
//! (handshake only), and five packets of the path MTU for the control chunks that echo the
//! peer (two HEARTBEAT ACKs, an ERROR's causes, an INIT ACK's parameters, a SACK's Gap Ack
//! Blocks: see [`Association::memory`]). With the default configuration (256 slots, 1480-byte path MTU,
//! 8192-TSN window) that is about 385 KiB.

use core::time::Duration;
use std::collections::VecDeque;

use super::config::{self, Config};
use super::cookie::{Cookie, CookieKey, Prf};
use super::endpoint;
use super::plpmtud::{self, Plpmtud};
use super::reassembly::{self, Reassembly};
use super::rto::{self, Rto};
use super::send_queue::{ExtRef, Hole, SendQueue, Slot};
use super::serial;
use super::time::Instant;
use super::tsn_map::{Insert, TsnMap};
use crate::wire::crc32c;
use crate::wire::sctp::{
    AbortRepr, CauseRepr, Chunk, ChunkRepr, ChunkType, CookieEchoRepr, DataChunk, DataRepr,
    ErrorChunkRepr, GapAckBlock, HeaderRepr, HeartbeatAckRepr, HeartbeatRepr, InitAckRepr,
    InitChunk, InitRepr, List, Packet, PacketBuilder, ParamRepr, ParamType, SackRepr,
    ShutdownCompleteRepr, ShutdownRepr, CHUNK_HEADER_LEN, DATA_HEADER_LEN, HEADER_LEN,
    INIT_MIN_LEN, MIN_A_RWND, PARAM_HEADER_LEN, SACK_MIN_LEN,
};

/// A message handed to the layer above: one whole, unordered DATA chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    pub stream: u16,
    pub ppid: u32,
    pub tsn: u32,
    pub data: &'a [u8],
}

/// One DATA chunk [`Association::predict_data`] found the general path would accept alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PredictedData<'a> {
    pub message: Message<'a>,
    /// The chunk's flags (U, B, E, I).
    flags: u8,
}

/// Where received messages go, in the order they arrive (RFC 5043 §10: DDP orders by DDP-SSN
/// itself). Called during [`Association::handle`], with the payload still in the packet.
pub trait Deliver {
    fn deliver(&mut self, msg: Message<'_>);

    /// Bytes the layer above can still take: what it holds of delivered messages and has not
    /// released counts against the association's a_rwnd (RFC 9260 §6.2). A new DATA chunk
    /// above the highest TSN received and larger than this is dropped unacknowledged; a whole
    /// message that fills a gap below it is taken and delivered whatever this says (§6.2: it
    /// frees the window, and nothing is held for reordering to drop instead), so the layer
    /// above must accept a delivery beyond its room, unless it would hold that message
    /// ([`Deliver::holds`]). Each SACK advertises at most this.
    fn room(&self) -> usize {
        usize::MAX
    }

    /// Whether a message on `stream` with `ppid` would be held (copied, waiting) rather than
    /// consumed at delivery: then one that fills a gap (or a fragment of one) is judged
    /// against [`Deliver::room`] as a new one is, and dropped unacknowledged beyond it (§6.2
    /// allows dropping what was not acknowledged), so that holding it cannot take the layer
    /// above past its buffer. A message whose arrival releases what is held must not be
    /// called held: refused, it would never come. Asked only of a chunk larger than the room.
    fn holds(&self, _stream: u16, _ppid: u32) -> bool {
        false
    }

    /// Whether the whole message `data` on `stream` with `ppid` is the one what the layer
    /// above holds waits for (DDP messages Placed behind a missing DDP-SSN): its delivery
    /// releases them, so it is taken beyond [`Deliver::room`] whatever its TSN, or the room
    /// they take would never come back. Asked only of a chunk larger than the room.
    fn releases(&self, _stream: u16, _ppid: u32, _data: &[u8]) -> bool {
        false
    }
}

impl<F: FnMut(Message<'_>)> Deliver for F {
    fn deliver(&mut self, msg: Message<'_>) {
        self(msg)
    }
}

/// Association states (RFC 9260 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    CookieWait,
    CookieEchoed,
    Established,
    ShutdownPending,
    ShutdownSent,
    ShutdownReceived,
    ShutdownAckSent,
    Closed,
}

/// Why an association ended. Every way out of an association produces exactly one
/// [`Event::Closed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// Graceful SHUTDOWN / SHUTDOWN ACK / SHUTDOWN COMPLETE (§9.2), whichever side started it.
    Shutdown,
    /// The peer sent ABORT; the first cause code, if any.
    PeerAbort { cause: Option<u16> },
    /// [`Association::abort`] was called.
    LocalAbort,
    /// The peer's Adaptation Layer Indication was absent (`None`) or not DDP (RFC 5043
    /// §11.1); we sent ABORT.
    AdaptationRefused { peer: Option<u32> },
    /// Association.Max.Retrans consecutive T3-rtx, heartbeat or T2 failures (§8.2).
    Unreachable,
    /// Max.Init.Retransmits exceeded in COOKIE-WAIT or COOKIE-ECHOED (§5.1).
    InitFailed,
    /// The peer broke a rule; we sent ABORT with a Protocol Violation or No User Data cause.
    ProtocolViolation(&'static str),
    /// The peer's INIT ACK could not start the association: a Host Name Address (we sent
    /// ABORT, Unresolvable Address, RFC 9260 §3.3.2.1), zero streams either way or a window
    /// below 1500 (ABORT, Invalid Mandatory Parameter, §3.3.3), or a zero Initiate Tag (no
    /// ABORT can be addressed, §3.3.3).
    InitAckRefused(&'static str),
    /// An ICMP Protocol Unreachable or ICMPv6 "unrecognized Next Header" quoting one of our
    /// packets with its tag: the peer's host has no SCTP, taken as an ABORT (RFC 9260
    /// Appendix C ICMP8, [`Association::icmp_protocol_unreachable`]).
    ProtocolUnreachable,
}

impl CloseReason {
    /// A short, stable name for machines (`--json`'s `reason`, telemetry).
    pub fn kind(&self) -> &'static str {
        match self {
            CloseReason::Shutdown => "shutdown",
            CloseReason::PeerAbort { .. } => "peer_abort",
            CloseReason::LocalAbort => "local_abort",
            CloseReason::AdaptationRefused { .. } => "adaptation_refused",
            CloseReason::Unreachable => "unreachable",
            CloseReason::InitFailed => "init_failed",
            CloseReason::ProtocolViolation(_) => "protocol_violation",
            CloseReason::InitAckRefused(_) => "init_ack_refused",
            CloseReason::ProtocolUnreachable => "protocol_unreachable",
        }
    }
}

/// For people: what happened, in RFC 9260's words.
impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CloseReason::Shutdown => write!(f, "shut down (SHUTDOWN, RFC 9260 §9.2)"),
            CloseReason::PeerAbort { cause: None } => write!(f, "the peer sent ABORT"),
            CloseReason::PeerAbort { cause: Some(c) } => write!(
                f,
                "the peer sent ABORT (cause {c}, {})",
                crate::wire::sctp::CauseCode::from(*c).name()
            ),
            CloseReason::LocalAbort => write!(f, "aborted here (ABORT sent)"),
            CloseReason::AdaptationRefused { peer: None } => write!(
                f,
                "the peer's INIT carried no Adaptation Layer Indication, so no DDP (RFC 5043 \
                 §11.1); ABORT sent"
            ),
            CloseReason::AdaptationRefused { peer: Some(a) } => write!(
                f,
                "the peer's Adaptation Layer Indication is {a:#x}, not DDP's (RFC 5043 §11.1); \
                 ABORT sent"
            ),
            CloseReason::Unreachable => write!(
                f,
                "the peer stopped answering (Association.Max.Retrans, RFC 9260 §8.1)"
            ),
            CloseReason::InitFailed => write!(
                f,
                "no answer to INIT or COOKIE ECHO (Max.Init.Retransmits, RFC 9260 §5.1)"
            ),
            CloseReason::ProtocolViolation(why) => {
                write!(f, "the peer broke a rule: {why}; ABORT sent")
            }
            CloseReason::InitAckRefused(why) => {
                write!(f, "the peer's INIT ACK cannot start an association: {why}")
            }
            CloseReason::ProtocolUnreachable => write!(
                f,
                "the peer's host answered with an ICMP Protocol Unreachable (or ICMPv6 \
                 unrecognized Next Header): no SCTP there, or a kernel there holds the \
                 address too, as when ddpdk shares it on af_packet or a tap (RFC 9260 \
                 Appendix C ICMP8; docs/usage.md, --ip)"
            ),
        }
    }
}

/// What the layer above learns besides messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// COOKIE ACK received or COOKIE ECHO accepted: ESTABLISHED.
    Connected {
        streams: u16,
        peer_adaptation: u32,
    },
    /// The peer restarted (§5.2.4 case A): its new incarnation is connected; `lost` messages
    /// we had queued for the old one were dropped.
    Restarted {
        lost: u64,
    },
    /// The peer started a graceful shutdown: no new messages can be sent.
    ShutdownReceived,
    /// The path went inactive (more than Path.Max.Retrans consecutive failures, §8.2) or
    /// active again (an acknowledgement or a HEARTBEAT ACK, §8.3). With one path the
    /// association keeps sending on it either way.
    PathChange {
        active: bool,
    },
    /// The path MTU (the largest SCTP packet) moved: ICMP lowered it, its age or an RFC 8899
    /// probe raised it, a black hole took it down. New messages are cut for it ([`max_message`]
    /// follows; RFC 5043 §9: "LLPs MUST expose MULPDU and MULPDU changes").
    ///
    /// [`max_message`]: Association::max_message
    PathMtu {
        mtu: usize,
    },
    Closed(CloseReason),
}

/// Why [`Association::send`] refused a message. Nothing was queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// SCTP cannot carry an empty message (RFC 9260 §6.2, No User Data).
    Empty,
    /// Larger than one unfragmented DATA chunk on the path (RFC 5043 §9).
    TooBig { max: usize },
    /// Stream id not below the negotiated number of streams.
    InvalidStream,
    /// Every send slot is in use; retry after acknowledgements.
    Full,
    /// Shutdown started (by us or the peer) or the association is closed.
    NotOpen,
}

impl core::fmt::Display for SendError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SendError::Empty => f.write_str("empty message"),
            SendError::TooBig { max } => {
                write!(f, "message larger than {max} bytes (no SCTP fragmentation)")
            }
            SendError::InvalidStream => f.write_str("stream id beyond the negotiated streams"),
            SendError::Full => f.write_str("send buffer full"),
            SendError::NotOpen => f.write_str("association not open for sending"),
        }
    }
}

impl std::error::Error for SendError {}

/// Why [`Association::handle`] dropped a packet (each is also counted in [`Stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discard {
    BadChecksum,
    Malformed,
    /// Ports are not this association's.
    WrongPorts,
    /// Verification tag rules of §8.5 / §8.5.1.
    BadVerificationTag,
    /// INIT with other chunks or with a non-zero verification tag (§6.10, §8.5.1).
    BadInit,
    Closed,
    /// Out of the blue before the association is up (§8.5.1 E: a SHUTDOWN ACK in
    /// COOKIE-WAIT or COOKIE-ECHOED): answered as §8.4 says, nothing taken, and nothing in it
    /// authenticates its sender.
    OutOfTheBlue,
    /// A COOKIE ECHO leading the packet whose cookie this association did not take: stale
    /// (answered with a Stale Cookie ERROR, §5.1.5 step 3) or of no case of §5.2.4 (an earlier
    /// INIT's, case C; tie-tags of no incarnation here), silently discarded. A cookie that
    /// does not open or carries another tag is `Malformed` or `BadVerificationTag`. Not `Ok`:
    /// the packet passed no tag check (§8.5.1 exempts a COOKIE ECHO), so nothing in it
    /// confirms its sender as the neighbour.
    UnusableCookie,
}

/// Counters: everything dropped, retransmitted or refused is counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub packets_in: u64,
    pub packets_out: u64,
    /// Packets for other ports, handed to this association by mistake.
    pub wrong_ports: u64,
    /// Packets that arrived after the association closed.
    pub after_close: u64,
    /// DATA chunks before COOKIE ACK (COOKIE-WAIT, COOKIE-ECHOED), dropped unacknowledged.
    pub data_not_established: u64,
    pub bad_checksum: u64,
    pub malformed: u64,
    pub bad_vtag: u64,
    pub data_in: u64,
    pub bytes_in: u64,
    pub dup_tsns: u64,
    /// DATA beyond the TSN window, dropped unacknowledged.
    pub tsn_out_of_window: u64,
    /// New DATA larger than the receive buffer left (the a_rwnd the peer was told, or less),
    /// dropped unacknowledged (RFC 9260 §6.2): a peer that ignores a_rwnd is not buffered.
    pub rwnd_dropped: u64,
    /// Fragments held for reassembly, acknowledged in a gap block, then dropped to take a
    /// lower TSN when the reassembly was full (RFC 9260 §6.2's reneging): reported no more,
    /// so the peer sends them again.
    pub reneged: u64,
    /// Our chunks the peer gap-acked and a later SACK no longer covered (RFC 9260 §6.2.1 D
    /// iii: the peer reneged): outstanding again, each with a miss indication.
    pub peer_reneged: u64,
    pub invalid_stream: u64,
    pub data_out: u64,
    pub bytes_out: u64,
    pub t3_expiries: u64,
    pub t3_retransmits: u64,
    pub fast_retransmits: u64,
    /// Window probes (new, or sent again by T3-rtx, into a window that could not hold them)
    /// sent again at once when the peer's window reopened (§6.1 A), not at their backed-off
    /// T3-rtx.
    pub window_probe_recoveries: u64,
    pub sacks_in: u64,
    pub sacks_out: u64,
    /// SACKs older than the cumulative ack point, or acknowledging TSNs never sent.
    pub bad_sacks: u64,
    pub heartbeats_out: u64,
    pub heartbeat_acks_in: u64,
    pub unknown_chunks: u64,
    pub errors_in: u64,
    pub stale_cookies: u64,
    /// COOKIE ECHOs whose cookie, authentic and in time, fits no case of RFC 9260 §5.2.4 this
    /// association takes (an earlier INIT's, case C; tie-tags of no incarnation here):
    /// silently discarded (`Discard::UnusableCookie`).
    pub unusable_cookies: u64,
    pub init_retransmits: u64,
    pub adaptation_refused: u64,
    /// INITs answered with ABORT because they carried a Host Name Address (RFC 9260
    /// §3.3.2.1) or, on an association that exists, listed addresses it does not have
    /// (§5.2.2: Restart of an Association with New Addresses). The association goes on.
    pub inits_refused: u64,
    /// INIT ACKs without a State Cookie, reported in an ERROR (Missing Mandatory Parameter,
    /// §3.3.10.2) and otherwise ignored: T1-init goes on.
    pub init_acks_without_cookie: u64,
    /// Times the path went inactive (Path.Max.Retrans consecutive failures, §8.2).
    pub path_inactive: u64,
    /// DATA fragments taken (a message split by a small-MTU path, RFC 5043 §9), and the
    /// messages put together from them (RFC 9260 §6.9).
    pub fragments_in: u64,
    pub reassembled: u64,
    /// Fragments of runs that could no longer complete (a TSN they needed came as something
    /// else: a broken or hostile peer), dropped so they do not pin the window.
    pub fragments_purged: u64,
    /// DATA that arrived after the peer's own SHUTDOWN (SHUTDOWN-RECEIVED, SHUTDOWN-ACK-SENT):
    /// discarded unacknowledged, as usrsctp does; a peer MUST NOT send new DATA then (§9.2).
    pub data_after_shutdown: u64,
    /// Packets taken by header prediction (`Config::header_prediction`): a lone DATA chunk
    /// next in sequence, or a SACK of its fixed part alone; and DATA packets built by the
    /// send side's prediction. Not drops: the share of the traffic that took the short path.
    pub predicted_in: u64,
    pub predicted_out: u64,
}

/// Timers, indexed into a table (DESIGN.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
enum Timer {
    /// T1-init in COOKIE-WAIT, T1-cookie in COOKIE-ECHOED (§5.1).
    T1,
    /// T2-shutdown (§9.2).
    T2,
    /// T3-rtx (§6.3.2).
    T3,
    /// Heartbeat on an idle path (§8.3).
    Heartbeat,
    /// Delayed SACK (§6.2).
    Sack,
    /// T5-shutdown-guard (§9.2).
    T5,
    /// RFC 8899's PROBE_TIMER or PMTU_RAISE_TIMER ([`Plpmtud::timer`]).
    Plpmtud,
}
const TIMERS: usize = 7;

/// HEARTBEATs answered at once: an RFC 8899 probe and an ordinary HEARTBEAT can arrive in
/// one burst (both timers due at one moment), and each needs its own ACK.
const HB_ACKS: usize = 2;
const HB_INFO_LEN: usize = 16;

/// Gap Ack Blocks one SACK holds in an SCTP packet of `mtu` bytes with `dups` duplicate TSNs
/// (RFC 9260 §3.3.4: a 16-byte chunk header and fields, 4 bytes a block or TSN).
fn gap_room(mtu: usize, dups: usize) -> usize {
    mtu.saturating_sub(HEADER_LEN + 16 + 4 * dups) / 4
}

/// Bytes of one ERROR chunk's causes in an SCTP packet of `mtu` bytes (RFC 9260 §3.3.10).
fn error_room(mtu: usize) -> usize {
    mtu.saturating_sub(HEADER_LEN + CHUNK_HEADER_LEN)
}

/// Bytes of a HEARTBEAT ACK's Heartbeat Information and the TLVs after it in an SCTP packet
/// of `mtu` bytes (RFC 9260 §3.3.6).
fn hb_ack_room(mtu: usize) -> usize {
    mtu.saturating_sub(HEADER_LEN + CHUNK_HEADER_LEN + PARAM_HEADER_LEN)
}

/// HEARTBEAT ACKs owed (RFC 9260 §8.3: "The receiver of the HEARTBEAT ... SHOULD immediately
/// respond with a HEARTBEAT ACK ... copying the Heartbeat Information"), in arrival order. One
/// slot lost the ACK of an RFC 8899 probe whenever the peer's ordinary HEARTBEAT came in the
/// same burst: the probe counted as lost, and the search waited PROBE_TIMER for nothing. A
/// flood beyond [`HB_ACKS`] keeps the first and the latest (each later one overwrites the
/// last slot).
///
/// Each slot holds what one packet of the path MTU can echo ([`hb_ack_room`]): the
/// Heartbeat Information is the sender's to size, and 512 bytes left larger HEARTBEATs
/// unanswered (session 60's review). The slots are allocated with the association
/// ([`HbAcks::reserve`]); a HEARTBEAT only ever fills one, so no peer makes us allocate.
#[derive(Debug, Default)]
struct HbAcks {
    /// Bytes of each: the Heartbeat Info's value, then the TLVs after it.
    bytes: [Vec<u8>; HB_ACKS],
    /// How many of each slot's bytes are the Heartbeat Info's value.
    info_len: [usize; HB_ACKS],
    n: usize,
}

impl HbAcks {
    /// Makes each slot hold at least `room` bytes (a local setting: never on a peer's packet).
    fn reserve(&mut self, room: usize) {
        for b in &mut self.bytes {
            b.reserve_exact(room.saturating_sub(b.len()));
        }
    }

    fn heap_bytes(&self) -> usize {
        self.bytes.iter().map(Vec::capacity).sum()
    }

    /// Owes an ACK echoing `info` and the TLVs after it (`extra`, §8.3); more than a slot
    /// holds is not answered (the caller checked that the ACK fits a packet of ours, which a
    /// slot holds).
    fn push(&mut self, info: &[u8], extra: &[u8]) {
        let k = self.n.min(HB_ACKS - 1);
        let b = &mut self.bytes[k];
        if info.len() + extra.len() > b.capacity() {
            return;
        }
        b.clear();
        b.extend_from_slice(info);
        b.extend_from_slice(extra);
        self.info_len[k] = info.len();
        self.n = (self.n + 1).min(HB_ACKS);
    }

    /// The first ACK owed: (info, extra).
    fn front(&self) -> Option<(&[u8], &[u8])> {
        if self.n == 0 {
            return None;
        }
        let b = &self.bytes[0];
        Some((b.get(..self.info_len[0])?, b.get(self.info_len[0]..)?))
    }

    fn pop_front(&mut self) {
        if self.n == 0 {
            return;
        }
        // The slots' buffers change places, not bytes: the one popped goes last, its capacity
        // kept.
        self.bytes[..self.n].rotate_left(1);
        self.info_len[..self.n].rotate_left(1);
        self.n -= 1;
    }

    fn is_empty(&self) -> bool {
        self.n == 0
    }
}

#[derive(Debug, Clone, Copy)]
enum AbortCause {
    /// Our own giving up (retransmission limits, T5): no cause fits, so none is sent.
    Timeout,
    User,
    Adaptation,
    Violation(&'static str),
    NoUserData(u32),
    /// §3.3.3: an INIT ACK field out of its range.
    InvalidMandatory,
    /// §3.3.2.1: an INIT ACK with a Host Name Address; the parameter, whole, is in
    /// `Pending::init_abort_bytes` (empty: too long to report).
    Unresolvable,
}

/// Why an INIT for an association that exists is answered with ABORT instead of INIT ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InitRefusal {
    /// §3.3.2.1: a Host Name Address (Unresolvable Address).
    HostName,
    /// §5.2.2: addresses the association does not have (Restart of an Association with New
    /// Addresses).
    NewAddresses,
    /// §3.3.2: OS or MIS of 0, or a_rwnd below 1500 (Invalid Mandatory Parameter).
    InvalidMandatory,
    /// RFC 5043 §11.1: no DDP Adaptation Layer Indication (User-Initiated Abort saying so,
    /// as the endpoint answers the same INIT).
    Adaptation,
}

#[derive(Debug)]
struct Pending {
    init: bool,
    cookie_echo: bool,
    /// Bundle new DATA with the next COOKIE ECHO (its first transmission only).
    data_with_cookie: bool,
    cookie_ack: bool,
    shutdown: bool,
    shutdown_ack: bool,
    shutdown_complete: bool,
    heartbeat: bool,
    hb_acks: HbAcks,
    abort: Option<AbortCause>,
    /// The causes of the ERROR owed (RFC 9260 §3.3.10), in wire form, back to back: room for
    /// the causes of one ERROR in a packet of the path MTU ([`error_room`]), allocated with the
    /// association. Empty: no ERROR owed.
    error_bytes: Vec<u8>,
    /// The next packet may carry fast retransmissions regardless of cwnd (§7.2.4 step 3).
    fast_rtx: bool,
    /// SHUTDOWN COMPLETE with the T bit on this tag: a SHUTDOWN ACK that reached us in
    /// COOKIE-WAIT or COOKIE-ECHOED is out of the blue (§8.5.1 E, §8.4 rule 5).
    ootb_shutdown_complete: Option<u32>,
    /// A Stale Cookie ERROR (staleness in µs) on the tag from the cookie (§5.1.5 step 3): the
    /// peer that echoed it may have a new tag.
    stale_cookie: Option<(u32, u32)>,
    /// An ABORT answering an INIT, on that INIT's Initiate Tag; the association it reached
    /// goes on. Its cause's parameters are in `init_abort_bytes`.
    init_abort: Option<(u32, InitRefusal)>,
    init_abort_bytes: Vec<u8>,
    /// An ERROR, Missing Mandatory Parameter (State Cookie), on the tag of the INIT ACK that
    /// lacked it (§3.3.3, §3.3.10.2).
    missing_cookie: Option<u32>,
}

/// The SACK owed (§6.2). Apart from [`Pending`]: the receive path stores these bytes on every
/// DATA packet, and [`Association::owes_nothing_but_sack`] loads Pending's flags several bytes
/// at a time; side by side, that load overlapped stores still in flight and waited for them
/// (perf put 60-90 % of `poll_transmit`'s samples on it; `ddp-rx-bench` conn at 64 B gained
/// ~6 %).
#[derive(Debug, Default)]
struct AckDue {
    sack: bool,
    sack_now: bool,
    data_packets: u32,
}

/// The path's transmission state (§6.3, §7.2, §8.3).
#[derive(Debug)]
struct Path {
    /// Largest SCTP packet.
    mtu: usize,
    cwnd: usize,
    ssthresh: usize,
    partial_bytes_acked: usize,
    flight: usize,
    /// §7.2.3: T3-rtx expired and no DATA has been acknowledged since: "no more than one SCTP
    /// packet will be in flight". `flight < cwnd` alone let a second packet go, since the
    /// flight counts chunks, not the packet around them ([`Path::window_open`]).
    t3_one_packet: bool,
    rto: Rto,
    /// Nonce of the HEARTBEAT awaiting its ACK.
    hb_nonce: Option<u64>,
    /// When that HEARTBEAT left: the RTT is measured from here, not from the time its
    /// information carries, which the peer echoes and could set to anything (§8.3).
    hb_sent: Option<Instant>,
    /// That HEARTBEAT went unanswered for an RTO (its error counted); the next waits
    /// HB.interval, and an ACK of this one is still taken meanwhile.
    hb_overdue: bool,
    /// xorshift64* state for the HEARTBEAT jitter (§8.3): it needs spread, not secrecy.
    hb_jitter: u64,
    /// The current draw, a fraction of 2^32: the wait is HB.interval + RTO/2 + RTO × draw. It
    /// changes once per HEARTBEAT (timer, ACK), not each time DATA pushes the heartbeat back,
    /// so the send path pays a multiply for it.
    hb_draw: u32,
    /// When DATA last went on the path (new or retransmitted): how long it has been idle, for
    /// the congestion window's decay (§7.2.1).
    last_data_at: Instant,
}

impl Path {
    /// Whether the congestion window lets another packet of DATA start (§7.2.1; §7.2.3: one
    /// packet at most in flight after T3-rtx, until DATA is acknowledged).
    #[inline]
    fn window_open(&self) -> bool {
        self.flight < self.cwnd && !(self.t3_one_packet && self.flight > 0)
    }
}

/// One association. See the module documentation.
#[derive(Debug)]
pub struct Association {
    cfg: Config,
    key: CookieKey,
    prf: Prf,
    state: State,
    /// The device fills the CRC32c of what we send (`poll_transmit` leaves it zero).
    tx_checksum_offload: bool,
    local_port: u16,
    peer_port: u16,
    peer_addr: [u8; 16],
    /// The peer's address list from its INIT or INIT ACK ([`endpoint::address_set`]): a
    /// restart INIT that lists the same addresses adds none (§5.2.2).
    peer_addresses: u32,
    local_tag: u32,
    peer_tag: u32,
    streams: u16,
    peer_adaptation: u32,
    local_initial_tsn: u32,
    peer_cookie: Vec<u8>,
    init_retransmits: u32,
    /// Restarts after a Stale Cookie (§5.2.6), bounded by Max.Init.Retransmits (§5.1 C): a
    /// counter of their own, since every INIT ACK restarts `init_retransmits` for T1-cookie.
    stale_restarts: u32,
    /// When the COOKIE ECHO last went out: a Stale Cookie's round trip (§5.2.6).
    cookie_echo_sent: Instant,
    /// The Cookie Preservative (ms) our INITs carry after a Stale Cookie (§5.2.6).
    cookie_preservative: Option<u32>,
    // Send side.
    sq: SendQueue,
    next_tsn: u32,
    cum_ack_point: u32,
    peer_rwnd: u32,
    path: Path,
    fast_recovery_exit: Option<u32>,
    burst_budget: u32,
    /// The last transmit opportunity ended because Max.Burst's budget ran out
    /// ([`Association::burst_ended`]); cleared wherever the budget is refilled outside an
    /// opportunity's end (a SACK, a send to an idle queue), so that it is a function of the
    /// association's state, as the header-prediction tests compare it.
    burst_ended: bool,
    /// A SACK arrived since T3-rtx last fired: the peer is alive (§6.1 A, zero window probes).
    sack_since_t3: bool,
    /// The a_rwnd of the peer's last SACK (its INIT's, or its cookie's, before one): a
    /// window probe (§6.1 A: a chunk sent larger than the window) that did not fit it and
    /// fits a later one, still unacknowledged, was dropped by the peer.
    peer_a_rwnd: u32,
    /// A window probe was sent since [`Association::recover_window_probes`] last looked:
    /// only then does a window update walk the send queue for them.
    window_probes: bool,
    /// The last send-queue sequence number marked a window probe: the walk ends there, not
    /// at the queue's end (after T3-rtx into a closed window, the probes are the first
    /// chunks of a full queue).
    probe_last: u64,
    /// Our ULP asked for SHUTDOWN ([`Association::shutdown`]): a peer restart does not undo
    /// the request (§5.2.4 A, §9.2).
    shutdown_asked: bool,
    /// Outstanding messages a gap ack block covers (slots with `gap_acked`).
    gap_acked: usize,
    /// The TSN being timed for RTT and when it was sent (one measurement per round trip).
    timed: Option<(u32, Instant)>,
    error_count: u32,
    /// Whether the path is active (§8.2: not more than Path.Max.Retrans failures in a row).
    path_active: bool,
    // Receive side.
    rx: TsnMap,
    /// Fragments of messages a small-MTU path split (RFC 5043 §9, RFC 9260 §6.9).
    reasm: Reassembly,
    /// What the layer above can still take ([`Deliver::room`]), as last told.
    rx_room: u32,
    /// The a_rwnd of the last SACK sent.
    rwnd_told: u32,
    /// `stats.bytes_in` when that SACK went: the user data the peer has sent into the window
    /// told since, which moved its right edge as much as room freed here did.
    bytes_in_told: u64,
    /// Room for the Gap Ack Blocks of one SACK in a packet of `ctl_mtu` (RFC 9260 §6.2: "as
    /// many Gap Ack Blocks as can fit in a single SACK chunk limited by the current path
    /// MTU"), and never more than the TSN map can have.
    gaps: Vec<GapAckBlock>,
    pending: Pending,
    ack_due: AckDue,
    pending_init_ack: Option<PendingInitAck>,
    /// The parameters of `pending_init_ack`'s INIT ACK in wire form (the State Cookie and the
    /// Unrecognized Parameter reports of §3.2.2, `endpoint::init_ack_params`), in room for one
    /// INIT ACK in a packet of the path MTU, allocated with the association.
    init_ack_params: Vec<u8>,
    /// The largest SCTP packet the buffers of the control chunks that echo the peer were
    /// sized for (`hb_acks`, `error_bytes`, `init_ack_params`): the association's largest path
    /// MTU, the configured one or the link's ([`Association::set_link_mtu`]). What a peer sends
    /// is echoed up to what one packet of ours can carry back, so each of these holds one
    /// packet's worth and no more: the memory per association stays fixed, whatever peers send.
    ctl_mtu: usize,
    timers: [Option<Instant>; TIMERS],
    events: VecDeque<Event>,
    closed_reported: bool,
    stats: Stats,
    /// Where the packet `poll_transmit` built last misses external bytes.
    holes: [Hole; MAX_HOLES],
    n_holes: usize,
    /// Path MTU discovery without ICMP (RFC 8899); `None` when configured off.
    plpmtud: Option<Plpmtud>,
}

/// External spans ([`ExtRef`]) one packet may miss: bounds the buffer chain a zero-copy
/// transmit builds (one segment per span, one per header run between them).
pub const MAX_HOLES: usize = 4;

/// A receive room as an a_rwnd value.
fn clamp_room(room: usize) -> u32 {
    u32::try_from(room).unwrap_or(u32::MAX)
}

/// Adds one DATA chunk to `b`, leaving a hole for its external tail (recorded in `holes`);
/// false when it does not fit, or the packet has all the holes it may have.
fn push_chunk(
    b: &mut PacketBuilder<'_>,
    d: &DataRepr<'_>,
    ext: Option<ExtRef>,
    holes: &mut [Hole; MAX_HOLES],
    n_holes: &mut usize,
) -> bool {
    let Some(ext) = ext else {
        return b.push(&ChunkRepr::Data(*d)).is_ok();
    };
    if *n_holes == MAX_HOLES {
        return false;
    }
    match b.push_data_with_tail(d, ext.len as usize) {
        Ok(at) => {
            holes[*n_holes] = Hole { at, ext };
            *n_holes += 1;
            true
        }
        Err(_) => false,
    }
}

/// The DATA chunk of message `seq` (slot `s`) on its first transmission, with TSN `tsn`. RFC
/// 7053 §4.1: with `ask_sack`, the last chunk before the sender runs out of data asks for a SACK
/// at once (the I bit), so its acknowledgement does not wait for the peer's delayed-ack timer: a
/// lone message completes in a round trip. A receiver that does not know the bit ignores it
/// (RFC 9260 §3.3.1).
fn first_chunk<'q>(
    sq: &'q SendQueue,
    seq: u64,
    s: &Slot,
    tsn: u32,
    ask_sack: bool,
) -> DataRepr<'q> {
    DataRepr {
        immediate: ask_sack && sq.is_last(seq),
        unordered: true,
        beginning: true,
        ending: true,
        tsn,
        stream_id: s.stream,
        ssn: 0,
        ppid: s.ppid,
        user_data: sq.payload(seq),
    }
}

/// Book size of a message in the flight and the peer's window: the padded DATA chunk.
fn book(len: usize) -> usize {
    (DATA_HEADER_LEN + len + 3) & !3
}

/// Initial cwnd (RFC 9260 §7.2.1).
fn initial_cwnd(mtu: usize) -> usize {
    (4 * mtu).min((2 * mtu).max(4404))
}

impl Association {
    fn blank(cfg: Config, key: CookieKey, label: u64, peer_addr: [u8; 16], peer_port: u16) -> Self {
        let prf = Prf::new(key, label);
        let mut a = Association {
            cfg,
            key,
            prf,
            state: State::Closed,
            tx_checksum_offload: false,
            local_port: cfg.local_port,
            peer_port,
            peer_addr,
            peer_addresses: 0,
            local_tag: 0,
            peer_tag: 0,
            streams: cfg.streams,
            peer_adaptation: 0,
            local_initial_tsn: 0,
            peer_cookie: Vec::new(),
            init_retransmits: 0,
            stale_restarts: 0,
            cookie_echo_sent: Instant::ZERO,
            cookie_preservative: None,
            sq: SendQueue::new(cfg.send_slots, cfg.max_message()),
            next_tsn: 0,
            cum_ack_point: 0,
            peer_rwnd: 0,
            path: Path {
                mtu: cfg.path_mtu,
                cwnd: initial_cwnd(cfg.path_mtu),
                ssthresh: usize::MAX,
                partial_bytes_acked: 0,
                flight: 0,
                t3_one_packet: false,
                rto: Rto::new(cfg.rto_initial, cfg.rto_min, cfg.rto_max),
                hb_nonce: None,
                hb_sent: None,
                hb_overdue: false,
                // A stream of the PRF of its own (the label inverted), so that the association's
                // tags, TSNs and nonces stay what they are without jitter; never zero.
                hb_jitter: Prf::new(key, !label).next_u64() | 1,
                hb_draw: 0,
                last_data_at: Instant::ZERO,
            },
            fast_recovery_exit: None,
            burst_budget: cfg.max_burst,
            burst_ended: false,
            sack_since_t3: false,
            peer_a_rwnd: 0,
            window_probes: false,
            probe_last: 0,
            shutdown_asked: false,
            timed: None,
            gap_acked: 0,
            error_count: 0,
            path_active: true,
            rx: TsnMap::new(0, cfg.tsn_window),
            reasm: Reassembly::default(),
            rx_room: cfg.a_rwnd,
            rwnd_told: cfg.a_rwnd,
            bytes_in_told: 0,
            gaps: Vec::new(),
            pending: Pending {
                init: false,
                cookie_echo: false,
                data_with_cookie: false,
                cookie_ack: false,
                shutdown: false,
                shutdown_ack: false,
                shutdown_complete: false,
                heartbeat: false,
                hb_acks: HbAcks::default(),
                abort: None,
                error_bytes: Vec::new(),
                fast_rtx: false,
                ootb_shutdown_complete: None,
                stale_cookie: None,
                init_abort: None,
                init_abort_bytes: Vec::with_capacity(endpoint::MAX_REPORTED_ADDRESSES),
                missing_cookie: None,
            },
            ack_due: AckDue::default(),
            pending_init_ack: None,
            init_ack_params: Vec::new(),
            ctl_mtu: 0,
            timers: [None; TIMERS],
            events: VecDeque::with_capacity(8),
            closed_reported: false,
            holes: [Hole {
                at: 0,
                ext: ExtRef {
                    key: 0,
                    offset: 0,
                    len: 0,
                },
            }; MAX_HOLES],
            n_holes: 0,
            stats: Stats::default(),
            plpmtud: cfg
                .plpmtud_probe_timer
                .map(|t| Plpmtud::new(cfg.path_mtu, t)),
        };
        a.redraw_hb_jitter();
        a.size_control_buffers(cfg.path_mtu);
        a
    }

    /// Sizes the buffers of the control chunks that echo the peer for packets of `mtu` bytes
    /// (see `ctl_mtu`); they grow, never shrink. At creation and when the link is set: never
    /// on a peer's packet.
    fn size_control_buffers(&mut self, mtu: usize) {
        if mtu <= self.ctl_mtu {
            return;
        }
        self.ctl_mtu = mtu;
        self.pending.hb_acks.reserve(hb_ack_room(mtu));
        let e = &mut self.pending.error_bytes;
        e.reserve_exact(error_room(mtu).saturating_sub(e.len()));
        let p = &mut self.init_ack_params;
        p.reserve_exact(endpoint::init_ack_room(mtu).saturating_sub(p.len()));
        // A map of w TSNs above the cumulative point has at most w / 2 blocks.
        let blocks = gap_room(mtu, 0).min(self.rx.window() / 2);
        self.gaps.resize(
            blocks.max(self.gaps.len()),
            GapAckBlock { start: 0, end: 0 },
        );
    }

    /// Writes the Gap Ack Blocks into `gaps`, as many as a SACK beside the duplicates owed
    /// holds in a packet of the control MTU; returns how many.
    fn gap_blocks(&mut self) -> usize {
        let room = gap_room(self.control_mtu(), self.rx.dups().len()).min(self.gaps.len());
        self.rx.gap_blocks(&mut self.gaps[..room])
    }

    /// The largest packet a control chunk echoing the peer may fill now: one of the path MTU
    /// (RFC 9260 §6.10), within what the buffers were sized for.
    fn control_mtu(&self) -> usize {
        self.path.mtu.min(self.ctl_mtu)
    }

    /// Active open (§5.1 A): COOKIE-WAIT with an INIT to send. `label` must differ between
    /// associations made with one key (it separates their random streams).
    pub(super) fn connect(
        cfg: Config,
        key: CookieKey,
        label: u64,
        now: Instant,
        peer_addr: [u8; 16],
        peer_port: u16,
    ) -> Self {
        let mut a = Self::blank(cfg, key, label, peer_addr, peer_port);
        a.local_tag = a.prf.nonzero_u32();
        a.local_initial_tsn = a.prf.nonzero_u32();
        a.next_tsn = a.local_initial_tsn;
        a.cum_ack_point = a.local_initial_tsn.wrapping_sub(1);
        a.state = State::CookieWait;
        a.pending.init = true;
        a.arm(Timer::T1, now + a.path.rto.rto());
        a
    }

    /// The association a valid COOKIE ECHO describes (§5.1.5 step 4): ESTABLISHED, with a
    /// COOKIE ACK to send.
    pub(super) fn from_cookie(
        cfg: Config,
        key: CookieKey,
        label: u64,
        now: Instant,
        c: &Cookie,
    ) -> Self {
        let mut a = Self::blank(cfg, key, label, c.peer_addr, c.peer_port);
        a.adopt_cookie(c);
        a.state = State::Established;
        a.pending.cookie_ack = true;
        a.events.push_back(Event::Connected {
            streams: a.streams,
            peer_adaptation: a.peer_adaptation,
        });
        a.arm_heartbeat(now);
        a
    }

    /// Takes every negotiated value from a cookie (new association, restart, collision).
    fn adopt_cookie(&mut self, c: &Cookie) {
        self.local_tag = c.local_tag;
        self.peer_tag = c.peer_tag;
        self.local_initial_tsn = c.local_initial_tsn;
        self.next_tsn = c.local_initial_tsn;
        self.cum_ack_point = c.local_initial_tsn.wrapping_sub(1);
        self.peer_rwnd = c.peer_a_rwnd;
        self.peer_a_rwnd = c.peer_a_rwnd;
        self.streams = c.streams;
        self.peer_adaptation = c.peer_adaptation;
        self.peer_addresses = c.peer_addresses;
        self.rx = TsnMap::new(c.peer_initial_tsn, self.cfg.tsn_window);
        self.reasm.clear();
        // A SACK owed went with the TSN space it acknowledged (§5.2.4 case A: a restart is an
        // ABORT and a new COOKIE ECHO; the timers went too).
        self.ack_due = AckDue::default();
        // The new incarnation was told the configured a_rwnd in INIT or INIT ACK, whatever
        // the old one's last SACK said: a window update is measured from that.
        self.rwnd_told = self.cfg.a_rwnd;
        self.bytes_in_told = self.stats.bytes_in;
        self.path.ssthresh = c.peer_a_rwnd as usize;
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The Adaptation Layer Indication both ends gave (RFC 5061 §4.2.7; an association whose
    /// peer gave another is refused, so it is ours).
    pub fn adaptation_indication(&self) -> u32 {
        self.cfg.adaptation_indication
    }

    /// Streams in each direction (RFC 5043 §8: equal both ways).
    pub fn streams(&self) -> u16 {
        self.streams
    }

    pub fn local_tag(&self) -> u32 {
        self.local_tag
    }

    pub fn peer_tag(&self) -> u32 {
        self.peer_tag
    }

    pub fn peer_port(&self) -> u16 {
        self.peer_port
    }

    /// With `on`, [`Association::poll_transmit`] leaves the CRC32c to the device (TX checksum
    /// offload): the caller must ask the device for it on every packet.
    pub fn set_tx_checksum_offload(&mut self, on: bool) {
        self.tx_checksum_offload = on;
    }

    /// Whether the device fills the CRC32c of what this association sends.
    pub fn tx_checksum_offload(&self) -> bool {
        self.tx_checksum_offload
    }

    pub fn local_port(&self) -> u16 {
        self.local_port
    }

    pub fn peer_addr(&self) -> [u8; 16] {
        self.peer_addr
    }

    pub fn rto(&self) -> Duration {
        self.path.rto.rto()
    }

    /// The cumulative TSN of what we received (RFC 9260 §6.2's Cumulative TSN Ack): every
    /// DATA chunk of the peer's up to it has arrived. A layer above that must know whether a
    /// chunk the peer sent before another can still come compares with this (RFC 5043 §6.6).
    pub fn received_cum_tsn(&self) -> u32 {
        self.rx.cum_tsn()
    }

    /// Whether a DATA chunk of the peer's is missing below one that arrived (a gap above the
    /// cumulative TSN): a chunk the peer sent, in any order, may still be on its way.
    pub fn received_has_gaps(&self) -> bool {
        self.rx.has_gaps()
    }

    /// Smoothed RTT, once measured.
    pub fn srtt(&self) -> Option<Duration> {
        self.path.rto.srtt()
    }

    pub fn cwnd(&self) -> usize {
        self.path.cwnd
    }

    /// Bytes acknowledged toward the next congestion-avoidance step (RFC 9260 §7.2.2): read
    /// by tests, which cannot see the window's growth coming otherwise.
    pub fn partial_bytes_acked(&self) -> usize {
        self.path.partial_bytes_acked
    }

    /// The peer's receive window as we last computed it (its a_rwnd less what is in flight,
    /// RFC 9260 §6.2.1).
    pub fn peer_rwnd(&self) -> u32 {
        self.peer_rwnd
    }

    /// The largest message [`Association::send`] takes on the current path MTU.
    pub fn max_message(&self) -> usize {
        config::max_message(self.path.mtu).min(self.sq.slot_size())
    }

    /// Whether the path is active (RFC 9260 §8.2): false after more than Path.Max.Retrans
    /// consecutive failures, until the next acknowledgement or HEARTBEAT ACK.
    pub fn path_active(&self) -> bool {
        self.path_active
    }

    /// The consecutive failures counted so far (T3-rtx expiries, unanswered HEARTBEATs;
    /// RFC 9260 §8.1, §8.2): the association ends beyond Association.Max.Retrans.
    pub fn error_count(&self) -> u32 {
        self.error_count
    }

    /// The largest SCTP packet for the path (the path MTU less the IP header).
    pub fn path_mtu(&self) -> usize {
        self.path.mtu
    }

    /// A new path MTU (for example from ICMP "packet too big"). Messages already queued that
    /// no longer fit are still sent whole: RFC 5043 §9 prefers IP fragmentation to SCTP's.
    pub fn set_path_mtu(&mut self, mtu: usize) {
        let before = self.path.mtu;
        self.path.mtu = mtu.clamp(config::MIN_PATH_MTU, 65_535);
        if self.next_tsn == self.local_initial_tsn {
            // §7.2.1: the initial cwnd is min(4*MTU, max(2*MTU, 4404)) of the path's MTU: one
            // learnt before any DATA left (the link's, an earlier association's estimate of
            // this peer's path) sizes the first flight, not the configured one.
            self.path.cwnd = initial_cwnd(self.path.mtu);
        }
        if let Some(p) = self.plpmtud.as_mut() {
            p.set(self.path.mtu);
        }
        self.sync_plpmtud_timer();
        self.path_mtu_moved(before);
    }

    /// Tells the layer above of a path MTU other than `before` ([`Event::PathMtu`]), once the
    /// association is up (before, `Connected` carries it).
    fn path_mtu_moved(&mut self, before: usize) {
        if self.path.mtu != before && self.sending_state() {
            self.events.push_back(Event::PathMtu { mtu: self.path.mtu });
        }
    }

    /// The path MTU of the link this association runs on (less what the link keeps for ESP):
    /// its path MTU now, and the largest RFC 8899 discovery probes (MAX_PLPMTU, §5.1.2).
    pub fn set_link_mtu(&mut self, mtu: usize) {
        self.set_path_mtu(mtu);
        // A link larger than the configured path MTU: what the peer sends over it is echoed
        // whole too. A local setting, made once when the association is set up.
        self.size_control_buffers(self.path.mtu);
        if let Some(p) = self.plpmtud.as_mut() {
            p.set_max(self.path.mtu);
        }
    }

    /// RFC 8899 §5.1.2: BASE_PLPMTU for this association's path, where the link adds more
    /// below SCTP than [`plpmtud::BASE_PLPMTU`] leaves room for ([`Plpmtud::set_base`]).
    pub fn set_plpmtud_base(&mut self, base: usize) {
        if let Some(p) = self.plpmtud.as_mut() {
            p.set_base(base);
        }
    }

    /// RFC 8899 path MTU discovery of this association's path, if on.
    pub fn plpmtud(&self) -> Option<&Plpmtud> {
        self.plpmtud.as_ref()
    }

    /// The path MTU, once, after RFC 8899 discovery moved it (a black hole took it down, a
    /// probe confirmed more): the caller's IP layer follows (DF, source fragments).
    pub fn take_plpmtu_change(&mut self) -> Option<usize> {
        self.plpmtud.as_mut()?.changed().map(|_| self.path.mtu)
    }

    /// Whether an RFC 8899 probe waits for [`Association::poll_probe`].
    #[inline]
    pub fn probe_due(&self) -> bool {
        self.plpmtud.as_ref().is_some_and(Plpmtud::probe_due)
    }

    /// Whether discovery has work for the caller: a change of the path MTU to take
    /// ([`Association::take_plpmtu_change`]) or a probe due. Reads only: a caller polling it
    /// every turn leaves an idle association as it was.
    #[inline]
    pub fn plpmtud_wants(&self) -> bool {
        self.plpmtud
            .as_ref()
            .is_some_and(|p| p.has_changed() || p.probe_due())
    }

    /// The RFC 8899 probe due, written into `buf` (CRC32c filled unless offloaded): a
    /// HEARTBEAT whose information is [`plpmtud::PROBE_INFO_LEN`] bytes (nonce, size probed)
    /// and a PAD chunk (RFC 4820) filling the packet to the size probed (§6.2). It is larger
    /// than the path MTU: the caller sends it with DF and never fragments it. `None` if none
    /// is due, the association cannot send HEARTBEATs now (§8.3), or `buf` is too short.
    pub fn poll_probe(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        if !matches!(
            self.state,
            State::Established | State::ShutdownPending | State::ShutdownReceived
        ) || !self.probe_due()
        {
            return None;
        }
        let fresh = self.prf.next_u64();
        let (size, nonce) = self.plpmtud.as_mut()?.take_probe(now, fresh)?;
        self.sync_plpmtud_timer();
        let size = size & !3;
        let room = buf.get_mut(..size)?;
        let mut info = [0u8; plpmtud::PROBE_INFO_LEN];
        info[..8].copy_from_slice(&nonce.to_be_bytes());
        info[8..].copy_from_slice(&(size as u32).to_be_bytes());
        let mut b = PacketBuilder::new(room, &self.header(self.peer_tag)).ok()?;
        b.push(&ChunkRepr::Heartbeat(HeartbeatRepr {
            info: &info,
            extra: &[],
        }))
        .ok()?;
        let pad = b.remaining();
        b.push_padding(pad).ok()?;
        let packet = b.finish();
        if !self.tx_checksum_offload {
            crc32c::fill(packet);
        }
        self.stats.packets_out += 1;
        Some(size)
    }

    /// RFC 8899 §4.6, §6.2.1.4: a validated PTB naming this association whose size (as an
    /// SCTP packet) did not lower the path MTU: one of the probes was too big.
    pub fn plpmtud_ptb(&mut self, now: Instant, sctp_size: usize) {
        if let Some(p) = self.plpmtud.as_mut() {
            p.on_ptb(now, sctp_size);
        }
        self.sync_plpmtud_timer();
    }

    /// Whether RFC 8899 discovery runs on this association's path (then a path MTU is raised
    /// only by a probe that passed: [`Association::plpmtud_search`]).
    pub fn plpmtud_on(&self) -> bool {
        self.plpmtud.is_some()
    }

    /// A lowered path MTU has aged (RFC 1191 §6.3, RFC 8201 §5.3): RFC 8899 discovery searches
    /// up from it ([`Plpmtud::search`]) rather than the caller raising it on trust.
    pub fn plpmtud_search(&mut self, now: Instant) {
        if let Some(p) = self.plpmtud.as_mut() {
            p.search(now);
        }
        self.sync_plpmtud_timer();
    }

    /// The probe due may be `ceiling` bytes at most ([`Plpmtud::limit`]: an ESP SA's path
    /// MTU as an SCTP packet size, RFC 4301 §8.2.1).
    pub fn limit_probe(&mut self, now: Instant, ceiling: usize) {
        if let Some(p) = self.plpmtud.as_mut() {
            p.limit(now, ceiling);
        }
        self.sync_plpmtud_timer();
    }

    fn sync_plpmtud_timer(&mut self) {
        self.timers[Timer::Plpmtud as usize] = self.plpmtud.as_ref().and_then(Plpmtud::timer);
    }

    /// A SACK is owed now, not after the delay (RFC 9260 §6.2: for every second packet with
    /// DATA, at once for a duplicate; §6.7: for every packet while gaps exist). A caller that
    /// handles a burst of packets transmits before it handles the next one, so that each
    /// packet that needs its own SACK gets one (fast retransmit counts them, §7.2.4).
    pub fn sack_due(&self) -> bool {
        self.ack_due.sack && self.ack_due.sack_now
    }

    /// DATA could go now (retransmissions, or new DATA within cwnd and the peer's window,
    /// §6.1): a caller that handles a burst of packets gives the association a transmit
    /// opportunity after a packet that opened the window, as a stack that sends on each SACK
    /// does, rather than once for the whole burst.
    pub fn has_data_to_send(&self) -> bool {
        self.data_ready(false)
    }

    /// Messages queued or awaiting acknowledgement.
    pub fn queued(&self) -> u64 {
        self.sq.queued()
    }

    /// True once the association has ended and has nothing left to send.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed && !self.has_output()
    }

    fn has_output(&self) -> bool {
        self.pending.abort.is_some()
            || self.pending.shutdown_complete
            || self.pending.ootb_shutdown_complete.is_some()
    }

    /// Memory held by this association, in bytes (see the module documentation).
    /// What [`memory`](Self::memory) holds for reassembly now, and the most it may (RFC 9260
    /// §6.9, bounded by a_rwnd): the one part of it that peer input moves.
    pub fn reassembly_memory(&self) -> (usize, usize) {
        (
            self.reasm.heap_bytes(),
            Reassembly::max_heap_bytes(self.cfg.a_rwnd as usize),
        )
    }

    pub fn memory(&self) -> usize {
        core::mem::size_of::<Self>()
            + self.sq.heap_bytes()
            + self.rx.heap_bytes()
            + self.pending.hb_acks.heap_bytes()
            + self.pending.error_bytes.capacity()
            + self.pending.init_abort_bytes.capacity()
            + self.init_ack_params.capacity()
            + self.gaps.capacity() * core::mem::size_of::<GapAckBlock>()
            + self.reasm.heap_bytes()
            + self.peer_cookie.capacity()
            + self.events.capacity() * core::mem::size_of::<Event>()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether [`Association::poll_event`] has an event (it nearly never has, after a packet).
    #[inline]
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Queues a message: one unordered, unfragmented DATA chunk (RFC 5043 §9, §10). Allowed
    /// from COOKIE-WAIT on (it leaves with or after the COOKIE ECHO) until shutdown starts.
    /// Returns the message's number: messages are numbered from 0 in the order queued, and
    /// [`Association::settled_before`] tells which are no longer in SCTP's hands.
    pub fn send(&mut self, stream: u16, ppid: u32, data: &[u8]) -> Result<u64, SendError> {
        self.send_ext(stream, ppid, data, None)
    }

    /// As [`Association::send`], for the message `head` followed by the bytes `ext` names,
    /// which the association does not copy: every packet carrying the message leaves a
    /// [`Hole`] for them ([`Association::holes`]). The caller keeps those bytes unchanged until
    /// the message is settled ([`Association::settled_before`]).
    pub fn send_ext(
        &mut self,
        stream: u16,
        ppid: u32,
        head: &[u8],
        ext: Option<ExtRef>,
    ) -> Result<u64, SendError> {
        self.check_send(stream, head.len() + ext.map_or(0, |e| e.len as usize))?;
        Ok(self.send_ext_checked(stream, ppid, head, ext))
    }

    /// As [`Association::send_ext`] for a message [`Association::check_send`] has just
    /// accepted, with nothing changed since: a caller that numbers its messages itself asks
    /// first and numbers only what SCTP will take (DDP-SSNs, RFC 5043 §6), and the second
    /// check cost ~26 instructions a segment.
    pub fn send_ext_checked(
        &mut self,
        stream: u16,
        ppid: u32,
        head: &[u8],
        ext: Option<ExtRef>,
    ) -> u64 {
        debug_assert_eq!(
            self.check_send(stream, head.len() + ext.map_or(0, |e| e.len as usize)),
            Ok(()),
            "send_ext_checked without a check"
        );
        if self.sq.outstanding() == 0 {
            self.burst_budget = self.cfg.max_burst;
            self.burst_ended = false;
        }
        self.sq.push_ext(stream, ppid, head, ext)
    }

    /// The caller's transmit opportunity ends here: what [`Association::poll_transmit`] does
    /// when it finds nothing, for a caller that knows it would ([`Association::owes_nothing`])
    /// and does not make the call. RFC 9260 §6.1 D: Max.Burst limits the packets of new DATA
    /// one opportunity sends; it does not ration the window across opportunities (a budget
    /// refilled only by SACKs keeps the sender from ever filling its cwnd, so slow start never
    /// grows it).
    pub fn end_transmit_opportunity(&mut self) {
        self.burst_ended = self.burst_budget == 0;
        self.burst_budget = self.cfg.max_burst;
    }

    /// Whether [`Association::poll_transmit`] would now find nothing to send, and not because
    /// Max.Burst ended the opportunity: the first "nothing" of its builder (an established
    /// association owing no chunk but perhaps a delayed SACK, with no DATA it may send). A
    /// caller that has just sent a packet and finds this true can end the opportunity
    /// ([`Association::end_transmit_opportunity`]) without the call that would say so (~100
    /// instructions on a data core, once after every packet it answers). Said only while no
    /// message waits for its first transmission: a bulk sender's every packet asks, and
    /// there the answer must cost one comparison (the whole test cost its burst ~80
    /// instructions a packet for a call saved once an opportunity).
    #[inline]
    pub fn owes_nothing(&self) -> bool {
        self.sq.next_unsent().is_none()
            && self.state == State::Established
            && self.burst_budget > 0
            && !(self.ack_due.sack && self.ack_due.sack_now)
            && self.owes_nothing_but_sack()
            && !self.data_ready(false)
    }

    /// Whether the last [`Association::poll_transmit`] that found nothing to send stopped at
    /// Max.Burst's budget (RFC 9260 §6.1 D): the next transmit opportunity may send more
    /// with nothing else changed. Any other "nothing" lasts until the association changes
    /// (a packet, a send, a timer).
    pub fn burst_ended(&self) -> bool {
        self.burst_ended
    }

    /// The external spans the last packet [`Association::poll_transmit`] built is missing, in
    /// packet order. While there are any, its CRC32c field is zero: whoever fills the holes (or
    /// gathers them into a buffer chain) computes the checksum, or has the device do it.
    pub fn holes(&self) -> &[Hole] {
        &self.holes[..self.n_holes]
    }

    /// Whether [`Association::send`] would take a message of `len` bytes on `stream` now: the
    /// same checks, nothing queued. Lets a caller that numbers its messages itself (DDP-SSNs)
    /// take a number only for a message that will be sent.
    pub fn check_send(&self, stream: u16, len: usize) -> Result<(), SendError> {
        match self.state {
            State::CookieWait | State::CookieEchoed | State::Established => {}
            _ => return Err(SendError::NotOpen),
        }
        if len == 0 {
            return Err(SendError::Empty);
        }
        if len > self.max_message() {
            return Err(SendError::TooBig {
                max: self.max_message(),
            });
        }
        if stream >= self.streams {
            return Err(SendError::InvalidStream);
        }
        if self.sq.is_full() {
            return Err(SendError::Full);
        }
        Ok(())
    }

    /// Copies in the bytes of every held message whose [`ExtRef`] names memory `key`, read
    /// by `read` into the send queue's own storage, so that nothing sent or retransmitted
    /// later reads that memory: for memory one of whose registrations is being revoked.
    /// Returns how many messages were copied.
    pub fn materialize_ext(
        &mut self,
        key: u32,
        read: impl FnMut(&ExtRef, &mut [u8]) -> bool,
    ) -> usize {
        self.sq.materialize(key, read)
    }

    /// Every message numbered below this is settled: acknowledged by the peer's Cumulative TSN
    /// Ack (final, unlike a gap ack, which the peer may renege: RFC 9260 §6.2.1), or dropped by
    /// a peer restart or the end of the association, which [`Event::Restarted`] and
    /// [`Event::Closed`] report. Read the events first: a message below this number that was
    /// not dropped was acknowledged (RFC 5041 §5.4: the Data Source's completion).
    pub fn settled_before(&self) -> u64 {
        self.sq.head()
    }

    /// When [`Event::Restarted`] or [`Event::Closed`] reports that queued messages were
    /// dropped: the number of the first one dropped. Those below it were acknowledged, even if
    /// the acknowledgement came in the same packet as the ABORT or the restarting COOKIE ECHO.
    pub fn dropped_from(&self) -> u64 {
        self.sq.dropped_from()
    }

    /// Whether the fast paths of [`Config::header_prediction`] are on: the layers above take
    /// their own predicted paths under the same switch, so that one flag compares the two.
    pub fn header_prediction(&self) -> bool {
        self.cfg.header_prediction
    }

    /// How many more messages [`Association::send`] takes now.
    pub fn send_room(&self) -> usize {
        self.sq.room()
    }

    /// Graceful shutdown (§9.2): no more sends; SHUTDOWN leaves once everything queued is
    /// acknowledged.
    pub fn shutdown(&mut self, now: Instant) {
        match self.state {
            State::Established => {
                self.shutdown_asked = true;
                self.state = State::ShutdownPending;
                self.progress_shutdown(now);
            }
            State::CookieWait | State::CookieEchoed => self.abort(),
            // The peer's SHUTDOWN came first: ours goes with our SHUTDOWN ACK, but the
            // request stands should the peer restart (§5.2.4 A).
            State::ShutdownReceived => self.shutdown_asked = true,
            _ => {}
        }
    }

    /// RFC 9260 Appendix C ICMP8: an ICMP Protocol Unreachable or an ICMPv6 Parameter Problem
    /// "unrecognized Next Header type encountered" quoting one of our packets, whose quoted
    /// verification tag is `vtag` (and, with a tag of 0, the quoted INIT's Initiate Tag
    /// `init_tag`): "MUST treat this message as an abort with the T bit set if it does not
    /// contain an INIT chunk. If it does contain an INIT chunk and the association is in the
    /// COOKIE-WAIT state, handle the ICMP message like an ABORT." ICMP6 first: a tag other
    /// than the peer's, or 0 without an INIT carrying our Initiate Tag while we wait for its
    /// INIT ACK, is discarded. The association ends as a received ABORT ends it (§9.1: nothing
    /// is sent back); returns whether it did.
    pub fn icmp_protocol_unreachable(&mut self, vtag: u32, init_tag: Option<u32>) -> bool {
        let tag_ok = match vtag {
            0 => self.state == State::CookieWait && init_tag == Some(self.local_tag),
            v => self.state != State::CookieWait && v == self.peer_tag,
        };
        if self.state == State::Closed || !tag_ok {
            return false;
        }
        self.close(CloseReason::ProtocolUnreachable);
        true
    }

    /// ABORT (§9.1) with a User-Initiated Abort cause; queued messages are dropped.
    pub fn abort(&mut self) {
        if self.state == State::Closed {
            return;
        }
        if self.state == State::CookieWait {
            // No peer tag yet: nothing can carry an ABORT the peer would accept.
            self.close(CloseReason::LocalAbort);
            return;
        }
        self.pending.abort = Some(AbortCause::User);
        self.close(CloseReason::LocalAbort);
    }

    fn close(&mut self, why: CloseReason) {
        self.state = State::Closed;
        self.timers = [None; TIMERS];
        self.sq.clear();
        self.gap_acked = 0;
        self.path.flight = 0;
        if !self.closed_reported {
            self.closed_reported = true;
            self.events.push_back(Event::Closed(why));
        }
    }

    fn abort_with(&mut self, cause: AbortCause, why: CloseReason) {
        self.pending.abort = Some(cause);
        self.close(why);
    }

    fn arm(&mut self, t: Timer, at: Instant) {
        self.timers[t as usize] = Some(at);
    }

    fn stop(&mut self, t: Timer) {
        self.timers[t as usize] = None;
    }

    fn running(&self, t: Timer) -> bool {
        self.timers[t as usize].is_some()
    }

    /// One RTO after `now` (a retransmission timer's expiry).
    fn after_rto(&self, now: Instant) -> Instant {
        now.saturating_add_nanos(self.path.rto.rto_nanos())
    }

    /// Pushes the HEARTBEAT back to HB.interval plus a jittered RTO from `now` (§8.3). Runs for
    /// every packet of new DATA (the path is not idle), so in integer nanoseconds: through
    /// `Duration` (a division of one by 2, conversions both ways) it was ~2 % of a bulk
    /// sender's core in `perf`.
    fn arm_heartbeat(&mut self, now: Instant) {
        if let Some(iv) = self.cfg.hb_interval {
            if self.path.hb_nonce.is_none() {
                let wait = rto::nanos(iv).saturating_add(self.hb_rto_jittered_nanos());
                self.arm(Timer::Heartbeat, now.saturating_add_nanos(wait));
            }
        }
    }

    /// The RTO with §8.3's jitter: uniform in [RTO / 2, 3 RTO / 2) over draws, or the RTO
    /// itself with `Config::hb_jitter` off.
    fn hb_rto_jittered(&self) -> Duration {
        Duration::from_nanos(self.hb_rto_jittered_nanos())
    }

    fn hb_rto_jittered_nanos(&self) -> u64 {
        let rto = self.path.rto.rto_nanos();
        if !self.cfg.hb_jitter {
            return rto;
        }
        // rto * draw / 2^32 is below rto: at most one RTO on top of half of one.
        let spread = (u128::from(rto) * u128::from(self.path.hb_draw)) >> 32;
        rto / 2 + u64::try_from(spread).unwrap_or(rto)
    }

    /// The next HEARTBEAT's jitter (xorshift64*).
    fn redraw_hb_jitter(&mut self) {
        let mut x = self.path.hb_jitter;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.path.hb_jitter = x;
        self.path.hb_draw = (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32;
    }

    /// The earliest timer, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.iter().flatten().min().copied()
    }

    // ------------------------------------------------------------------------------------
    // Receive
    // ------------------------------------------------------------------------------------

    /// Processes one SCTP packet (common header and chunks; the IP layer has been removed).
    /// Messages are handed to `rx` as their DATA chunks are processed.
    ///
    /// Call [`Association::poll_transmit`] before the next `handle`: while TSNs are missing,
    /// every packet with DATA is owed its own SACK (RFC 9260 §6.7), and the peer's fast
    /// retransmit counts those SACKs (§7.2.4); polling once per burst would merge them.
    pub fn handle<D: Deliver + ?Sized>(
        &mut self,
        now: Instant,
        packet: &[u8],
        rx: &mut D,
    ) -> Result<(), Discard> {
        self.handle_checked(now, packet, rx, false)
    }

    /// As [`Association::handle`], for a packet whose CRC32c the receiving device already
    /// found good (`checksum_verified`: RX checksum offload); it is not computed again.
    pub fn handle_checked<D: Deliver + ?Sized>(
        &mut self,
        now: Instant,
        packet: &[u8],
        rx: &mut D,
        checksum_verified: bool,
    ) -> Result<(), Discard> {
        if let Some(r) = self.predicted_data(now, packet, rx, checksum_verified) {
            return r;
        }
        if self.cfg.header_prediction {
            if let Some(r) = self.predicted_sack(now, packet, rx, checksum_verified) {
                return r;
            }
        }
        let checked = if checksum_verified {
            Packet::new_checked(packet)
        } else {
            Packet::new_verified(packet)
        };
        let pkt = match checked {
            Ok(p) => p,
            Err(crate::wire::Error::BadChecksum) => {
                self.stats.bad_checksum += 1;
                return Err(Discard::BadChecksum);
            }
            Err(_) => {
                self.stats.malformed += 1;
                return Err(Discard::Malformed);
            }
        };
        if pkt.dst_port() != self.local_port || pkt.src_port() != self.peer_port {
            self.stats.wrong_ports += 1;
            return Err(Discard::WrongPorts);
        }
        if self.state == State::Closed {
            self.stats.after_close += 1;
            return Err(Discard::Closed);
        }
        self.stats.packets_in += 1;
        let vtag = pkt.verification_tag();
        let chunks = pkt.chunks_ref();
        let mut first = chunks.clone();
        let (first_type, first_flags) = match first.next() {
            Some(Ok(c)) => (c.chunk_type(), c.flags()),
            _ => {
                self.stats.malformed += 1;
                return Err(Discard::Malformed);
            }
        };
        // (§8.4 rule 2: a packet that also holds an ABORT is no SHUTDOWN ACK's to answer; the
        // ABORT is judged below by its T bit.)
        let holds = |t: ChunkType| {
            first_type == t || first.clone().any(|c| c.is_ok_and(|c| c.chunk_type() == t))
        };
        if matches!(self.state, State::CookieWait | State::CookieEchoed)
            && holds(ChunkType::ShutdownAck)
            && !holds(ChunkType::Abort)
        {
            // §8.5.1 A: under tag 0 only an INIT is taken; anything else "MUST" be silently
            // discarded (the endpoint does so too, `Ignored::ZeroTag`).
            if vtag == 0 {
                self.stats.bad_vtag += 1;
                return Err(Discard::BadVerificationTag);
            }
            // §8.5.1 E: out of the blue here (a peer still in SHUTDOWN-ACK-SENT from an earlier
            // association on these ports; its SHUTDOWN ACK may follow an ERROR, as ours does
            // after a restart's COOKIE ECHO), so §8.4 rule 5: SHUTDOWN COMPLETE on its tag with
            // the T bit, and no change of state. Not `Ok`: nothing in it is authenticated (the
            // caller takes `Ok` as the neighbour confirmed).
            self.pending.ootb_shutdown_complete = Some(vtag);
            return Err(Discard::OutOfTheBlue);
        }
        // §8.5.1 rule A: INIT travels alone with tag 0.
        if first_type == ChunkType::Init {
            if vtag != 0 || first.next().is_some() {
                self.stats.malformed += 1;
                return Err(Discard::BadInit);
            }
        } else if !matches!(
            first_type,
            ChunkType::Abort | ChunkType::ShutdownComplete | ChunkType::CookieEcho
        ) && vtag != self.local_tag
        {
            // §8.5: every other packet must carry our tag. ABORT and SHUTDOWN COMPLETE are
            // checked per chunk (T bit, rules B and C); COOKIE ECHO against its cookie
            // (§5.2.4).
            self.stats.bad_vtag += 1;
            return Err(Discard::BadVerificationTag);
        }
        // §8.5.1 B and C: when an ABORT or SHUTDOWN COMPLETE fails the T-bit rule "the receiver
        // MUST silently discard the packet", so nothing bundled before it may be taken (DATA
        // before it already breaks §6.10 and §9.1, but carries our tag). A packet it leads is
        // judged by its header; otherwise the loop delivers DATA as it meets it, so the chunk
        // headers after the first are read before it starts. A packet of one chunk, all that
        // header prediction leaves of a bulk transfer, pays a compare; a bundle about 10
        // instructions a further DATA chunk (RELIABILITY.md, the §8.5.1 rows). Either discard
        // gets the same answer, so the caller counts both alike.
        let fails_t_bit_rule =
            if matches!(first_type, ChunkType::Abort | ChunkType::ShutdownComplete) {
                !self.t_bit_tag_ok(first_flags & 1 != 0, vtag)
            } else {
                let rest = pkt
                    .chunk_bytes_ref()
                    .get(first.offset()..)
                    .unwrap_or_default();
                !rest.is_empty() && self.fails_t_bit_rule_later(rest, vtag)
            };
        if fails_t_bit_rule {
            self.stats.bad_vtag += 1;
            return Err(Discard::BadVerificationTag);
        }

        let mut got_data = false;
        let had_gaps = self.rx.has_gaps();
        for (i, c) in chunks.enumerate() {
            let Ok(chunk) = c else {
                self.stats.malformed += 1;
                break;
            };
            if i > 0 && chunk.chunk_type() == ChunkType::Init {
                // §6.10: INIT "MUST NOT be bundled with any other chunk", and §8.5.1 A puts
                // it under tag 0: one behind other chunks under our tag is no INIT a peer
                // sends. Not answered (an INIT ACK would carry a State Cookie to whoever
                // wrote it); what came before it stands.
                self.stats.malformed += 1;
                break;
            }
            match self.handle_chunk(now, vtag, &chunk, rx, &mut got_data) {
                Flow::Continue => {}
                Flow::Stop => break,
                // A COOKIE ECHO first (§6.10 puts it there) vouched for the packet's tag
                // instead of the header: refused, nothing of the packet was taken.
                Flow::Refused(d) if i == 0 => return Err(d),
                // Behind a chunk under our own tag, the packet was the peer's (§8.5).
                Flow::Refused(_) => break,
            }
            if self.state == State::Closed {
                break;
            }
        }
        self.rx_room = clamp_room(rx.room());
        if got_data {
            self.after_data(now, had_gaps && !self.rx.has_gaps());
        } else if self.state == State::ShutdownSent && vtag == self.local_tag {
            // §9.2: "The reception of any packet from its peer ... SHOULD clear the endpoint's
            // retransmission count and restart the T2-shutdown timer" (a packet with DATA did
            // in `after_data`). The peer's: under our tag (an INIT under tag 0 or a COOKIE
            // ECHO under any tag passed the header check, and an off-path sender could keep
            // T2 from ever expiring with them: a review). The count only: §8.2 makes the path
            // active again by an acknowledgement or a HEARTBEAT ACK, not by any packet. The
            // SHUTDOWN goes again with the answer, or a peer talking faster than the RTO
            // would hold its retransmission off until T5-shutdown-guard, which, not restarted,
            // still bounds a peer that keeps talking and never answers.
            self.heard_in_shutdown_sent(now);
        }
        Ok(())
    }

    /// RFC 9260 §9.2: a packet of the peer's in SHUTDOWN-SENT clears the retransmission count
    /// (not the path's state: §8.2), is answered with the SHUTDOWN and restarts T2-shutdown.
    fn heard_in_shutdown_sent(&mut self, now: Instant) {
        self.error_count = 0;
        self.pending.shutdown = true;
        self.arm(Timer::T2, self.after_rto(now));
    }

    /// Header prediction (as Van Jacobson's for TCP): in an established association with
    /// nothing missing, the next packet of a bulk transfer is our ports and tag and exactly one
    /// whole unordered DATA chunk with the next TSN, for a stream that exists, within the
    /// window. Such a packet is taken here with the effect the general path would have (each of
    /// its rules holds trivially: §8.5 tag, §6.2 window and new TSN, §6.5 stream, RFC 5043 §10
    /// unordered), without parsing the packet into chunks. Anything else, `None`: the general
    /// path decides, counts and answers.
    #[inline]
    fn predicted_data<D: Deliver + ?Sized>(
        &mut self,
        now: Instant,
        packet: &[u8],
        rx: &mut D,
        checksum_verified: bool,
    ) -> Option<Result<(), Discard>> {
        let chunk = self.predict_data(packet, rx.room())?;
        if !checksum_verified && !crc32c::verify(packet) {
            self.stats.bad_checksum += 1;
            return Some(Err(Discard::BadChecksum));
        }
        self.take_predicted(&chunk);
        rx.deliver(chunk.message);
        self.finish_predicted(now, rx.room());
        Some(Ok(()))
    }

    /// The first half of [`Association::handle`]'s header prediction, for a layer above that
    /// takes the predicted chunk its own way (a fused receive path): `Some` if `packet` is the
    /// one DATA chunk the general path would accept and deliver alone (the conditions of
    /// `predicted_data`; `room` is what [`Deliver::room`] would say). Nothing is checked of
    /// the CRC32c and nothing changes: the caller verifies the checksum, delivers the message
    /// (the fused path places it first, and declines before anything changed if it cannot),
    /// then calls [`Association::take_predicted`] and [`Association::finish_predicted`], in
    /// that order, with nothing of the association's touched between: `take_predicted` reads
    /// nothing delivery changes.
    #[inline(always)]
    pub fn predict_data<'p>(&self, packet: &'p [u8], room: usize) -> Option<PredictedData<'p>> {
        use crate::wire::sctp::data_flag::{BEGINNING, ENDING, UNORDERED};
        const WHOLE_UNORDERED: u8 = UNORDERED | BEGINNING | ENDING;
        if !self.cfg.header_prediction
            || self.state != State::Established
            || packet.len() < HEADER_LEN + DATA_HEADER_LEN + 1
        {
            return None;
        }
        let chunk = &packet[HEADER_LEN..];
        let len = usize::from(be16(chunk, 2));
        // One chunk, its padding the packet's end (§3.2), with user data (§6.2).
        if chunk[0] != 0
            || chunk[1] & WHOLE_UNORDERED != WHOLE_UNORDERED
            || len <= DATA_HEADER_LEN
            || (len + 3) & !3 != chunk.len()
        {
            return None;
        }
        if !self.predicted_header(packet) {
            return None;
        }
        let tsn = be32(chunk, 4);
        let stream = be16(chunk, 8);
        let data = &chunk[DATA_HEADER_LEN..len];
        // In sequence with nothing above it, no fragment waiting (so nothing to purge), and
        // room for it (§6.2: what does not fit is the general path's to refuse and count).
        if tsn != self.rx.cum_tsn().wrapping_add(1)
            || self.rx.has_gaps()
            || self.reasm.held() != 0
            || stream >= self.streams
            || data.len() > room
        {
            return None;
        }
        Some(PredictedData {
            message: Message {
                stream,
                ppid: be32(chunk, 12),
                tsn,
                data,
            },
            flags: chunk[1],
        })
    }

    /// A chunk [`Association::predict_data`] predicted, whose packet's CRC32c is good: its TSN
    /// is recorded and counted (RFC 9260 §6.2), and its I bit asks for a SACK now (RFC 7053).
    #[inline(always)]
    pub fn take_predicted(&mut self, chunk: &PredictedData<'_>) {
        use crate::wire::sctp::data_flag::IMMEDIATE;
        let recorded = self.rx.insert_next(chunk.message.tsn);
        debug_assert!(recorded, "checked in sequence by predict_data");
        self.stats.packets_in += 1;
        self.stats.predicted_in += 1;
        self.stats.data_in += 1;
        self.stats.bytes_in += chunk.message.data.len() as u64;
        if chunk.flags & IMMEDIATE != 0 {
            self.ack_due.sack_now = true;
        }
    }

    /// After the predicted chunk was delivered: `room` is what the layer above can still take
    /// (the next SACK's a_rwnd), and the SACK is owed now or later (§6.2, §6.7).
    #[inline(always)]
    pub fn finish_predicted(&mut self, now: Instant, room: usize) {
        self.rx_room = clamp_room(room);
        // Predicted only while no gap exists: none was filled.
        self.after_data(now, false);
    }

    /// Whether a packet's common header is this association's: the peer's port to ours, with
    /// our verification tag (RFC 9260 §8.5), as header prediction expects it.
    #[inline(always)]
    fn predicted_header(&self, packet: &[u8]) -> bool {
        be16(packet, 0) == self.peer_port
            && be16(packet, 2) == self.local_port
            && be32(packet, 4) == self.local_tag
    }

    /// Header prediction on the sending side: in an established association, the common packet
    /// a bulk sender receives is our ports and tag and one SACK chunk of its fixed part alone
    /// (RFC 9260 §3.3.4: no Gap Ack Block, no Duplicate TSN), while no TSN is marked
    /// gap-acknowledged (so an empty block list changes nothing, §6.2.1 D and the reneging
    /// rule). Such a packet is taken here with the effect the general path would have: its
    /// checksum, the counts, and [`Association::on_sack`] with the same cumulative TSN Ack and
    /// a_rwnd (which keep their own checks, §6.2.1 D i and ii), without parsing it into chunks.
    /// Anything else, `None`.
    #[inline]
    fn predicted_sack<D: Deliver + ?Sized>(
        &mut self,
        now: Instant,
        packet: &[u8],
        rx: &mut D,
        checksum_verified: bool,
    ) -> Option<Result<(), Discard>> {
        if self.state != State::Established
            || packet.len() != HEADER_LEN + SACK_MIN_LEN
            || self.gap_acked != 0
        {
            return None;
        }
        let chunk = &packet[HEADER_LEN..];
        // Chunk type and length, then the numbers of Gap Ack Blocks and of Duplicate TSNs.
        if chunk[0] != u8::from(ChunkType::Sack)
            || usize::from(be16(chunk, 2)) != SACK_MIN_LEN
            || be16(chunk, 12) != 0
            || be16(chunk, 14) != 0
        {
            return None;
        }
        if !self.predicted_header(packet) {
            return None;
        }
        if !checksum_verified && !crc32c::verify(packet) {
            self.stats.bad_checksum += 1;
            return Some(Err(Discard::BadChecksum));
        }
        self.stats.packets_in += 1;
        self.stats.predicted_in += 1;
        self.stats.sacks_in += 1;
        self.sack_since_t3 = true;
        // False: aborted (§12.4), the ABORT pending; nothing else in the packet.
        let _ = self.on_sack(now, be32(chunk, 4), be32(chunk, 8), None);
        self.rx_room = clamp_room(rx.room());
        Some(Ok(()))
    }

    /// What the layer above can still take, when it changed outside [`Association::handle`]
    /// (it released what it held): the next SACK advertises at most this. A window that
    /// reopens is told at once (RFC 9260 §6.2's window update), so the peer does not wait
    /// for a zero-window probe. Reopens: the window a SACK would advertise now, not the room
    /// alone, which other holders (the TSN map, fragments in reassembly) may keep from it; an
    /// update that would not move the peer's right edge by a step is not sent (it was sent on
    /// every telling, a SACK before every transmit opportunity).
    pub fn set_receive_room(&mut self, room: usize) {
        self.rx_room = clamp_room(room);
        let (budget, told) = (self.cfg.a_rwnd, self.rwnd_told);
        // §6.2's receiver SWS avoidance, "similar to" RFC 1122 §4.2.3.3: the window told moves
        // once it can move by min(RCV.BUFF/2, MSS). At half the buffer only, a peer told a
        // window near 0 waited for its probe's T3-rtx while up to half the buffer was free
        // (an independent review). Each update moves `told`: no storm, though the runtime
        // tells the room before every transmit opportunity. The right edge the peer knows is
        // its cumulative ack plus `told`; DATA it sent since then moved the edge here as much as
        // room freed did, so both count (it was the room alone: a peer that filled the window
        // with an odd packet waited for the delayed SACK, another review).
        // In u64, where nothing overflows: the runtime tells the room every transmit
        // opportunity, so this is on the send path.
        let taken = self.stats.bytes_in.saturating_sub(self.bytes_in_told);
        let told = u64::from(told);
        if told < u64::from(budget / 4) + taken && self.receiving_state() {
            let step = u64::from(budget / 2).min(self.path.mtu as u64);
            if u64::from(self.advertised_rwnd()) + taken >= told + step {
                self.ack_due.sack = true;
                self.ack_due.sack_now = true;
            }
        }
    }

    /// The receive buffer advertised in INIT (the most any SACK advertises).
    pub fn receive_buffer(&self) -> usize {
        self.cfg.a_rwnd as usize
    }

    fn handle_chunk<D: Deliver + ?Sized>(
        &mut self,
        now: Instant,
        vtag: u32,
        chunk: &Chunk<&[u8]>,
        rx: &mut D,
        got_data: &mut bool,
    ) -> Flow {
        let t = chunk.chunk_type();
        if t == ChunkType::Data {
            return self.on_data(chunk, rx, got_data);
        }
        let repr = match ChunkRepr::parse(chunk) {
            Ok(r) => r,
            Err(e) => {
                if t == ChunkType::InitAck && e == crate::wire::Error::Malformed {
                    self.on_unusable_init_ack(chunk);
                }
                if t == ChunkType::Init && e == crate::wire::Error::Malformed {
                    self.on_invalid_init(chunk);
                }
                self.stats.malformed += 1;
                return Flow::Stop;
            }
        };
        match repr {
            ChunkRepr::Data(_) => unreachable!("handled above"),
            ChunkRepr::Init(init) => {
                self.on_init(now, chunk, &init);
                Flow::Stop
            }
            ChunkRepr::InitAck(ack) => {
                self.on_init_ack(now, chunk, &ack);
                Flow::Continue
            }
            ChunkRepr::CookieEcho(ce) => self.on_cookie_echo(now, vtag, ce.cookie),
            ChunkRepr::CookieAck => {
                if self.state == State::CookieEchoed {
                    self.stop(Timer::T1);
                    self.state = State::Established;
                    self.peer_cookie = Vec::new();
                    self.clear_errors();
                    self.events.push_back(Event::Connected {
                        streams: self.streams,
                        peer_adaptation: self.peer_adaptation,
                    });
                    self.arm_heartbeat(now);
                    if self.sq.outstanding() > 0 && !self.running(Timer::T3) {
                        self.arm(Timer::T3, self.after_rto(now));
                    }
                }
                Flow::Continue
            }
            ChunkRepr::Sack(sack) => {
                self.stats.sacks_in += 1;
                self.sack_since_t3 = true;
                if self.sending_state() {
                    let gaps = GapAcks {
                        blocks: sack.gap_ack_blocks,
                    };
                    if !self.on_sack(now, sack.cum_tsn_ack, sack.a_rwnd, Some(&gaps)) {
                        return Flow::Stop;
                    }
                }
                Flow::Continue
            }
            ChunkRepr::Heartbeat(hb) => {
                if self.state != State::CookieWait {
                    self.owe_heartbeat_ack(&hb);
                }
                Flow::Continue
            }
            ChunkRepr::HeartbeatAck(ack) => {
                self.on_heartbeat_ack(now, ack.info);
                Flow::Continue
            }
            ChunkRepr::Abort(abort) => {
                if !self.t_bit_tag_ok(abort.t_bit, vtag) {
                    self.stats.bad_vtag += 1;
                    return Flow::Stop;
                }
                let cause = abort.causes.iter().next().map(|c| u16::from(c.code()));
                self.close(CloseReason::PeerAbort { cause });
                Flow::Stop
            }
            ChunkRepr::Shutdown(s) => {
                if self.on_shutdown(now, s.cum_tsn_ack) {
                    Flow::Continue
                } else {
                    // Aborted (§12.4): nothing else in the packet.
                    Flow::Stop
                }
            }
            ChunkRepr::ShutdownAck => {
                match self.state {
                    // §9.2: SHUTDOWN ACK in SHUTDOWN-SENT, or in SHUTDOWN-ACK-SENT when both
                    // sides shut down at once: answer SHUTDOWN COMPLETE and close.
                    State::ShutdownSent | State::ShutdownAckSent => {
                        self.pending.shutdown_complete = true;
                        self.close(CloseReason::Shutdown);
                    }
                    // In COOKIE-WAIT and COOKIE-ECHOED it was answered before the chunk loop.
                    _ => {}
                }
                Flow::Continue
            }
            ChunkRepr::ShutdownComplete(sc) => {
                if !self.t_bit_tag_ok(sc.t_bit, vtag) {
                    self.stats.bad_vtag += 1;
                    return Flow::Stop;
                }
                if self.state == State::ShutdownAckSent {
                    self.close(CloseReason::Shutdown);
                }
                Flow::Stop
            }
            ChunkRepr::Error(e) => {
                self.on_error(now, &e);
                Flow::Continue
            }
            ChunkRepr::Unknown(u) => {
                self.stats.unknown_chunks += 1;
                let action = u.action();
                if action.reports() {
                    // §3.2 (upper bits 01 or 11): reported in an ERROR, Unrecognized Chunk
                    // Type, which carries the chunk whole (§3.3.10.6).
                    let room = error_room(self.control_mtu());
                    self.queue_cause(
                        &CauseRepr::UnrecognizedChunkType {
                            chunk: chunk.bytes_ref(),
                        },
                        room,
                    );
                }
                if action.continues() {
                    Flow::Continue
                } else {
                    Flow::Stop
                }
            }
        }
    }

    /// Whether one of `chunks` (the chunks after a packet's first, as `Chunks` walks them) is
    /// an ABORT or SHUTDOWN COMPLETE that fails the T-bit rule for the packet's tag `vtag`
    /// (§8.5.1 B, C). Reads chunk headers only: type, flags, length. The walk ends where
    /// `Chunks` would report a framing error (§3.2: a length below 4 or past the packet, a
    /// packet ending inside a chunk's padding) or at a chunk that stops the loop, since the
    /// chunk loop takes nothing from there on, so a chunk there is not one the packet carries.
    /// (A known chunk that fails to parse also stops the loop; the walk does not parse, so an
    /// ABORT behind one still discards the packet: both are a broken peer's.)
    fn fails_t_bit_rule_later(&self, chunks: &[u8], vtag: u32) -> bool {
        // A chunk's type and flags as one number, and which of them fail: ABORT is type 6 and
        // SHUTDOWN COMPLETE 14, the same but for bit 3 (masked off), and the T bit is the
        // lowest flag of both (§3.3.7, §3.3.13). Which T bit fails depends on the packet's tag
        // alone, so each chunk of the walk (mostly DATA, in a bundle) costs one compare.
        const TYPE: u16 = 0xf700;
        const T_BIT: u16 = 0x0001;
        const ABORT_OR_SHUTDOWN_COMPLETE: u16 = 0x0600;
        debug_assert_eq!(u8::from(ChunkType::Abort), 6);
        debug_assert_eq!(u8::from(ChunkType::ShutdownComplete), 6 | 8);
        let (mask, failing) = match (
            self.t_bit_tag_ok(true, vtag),
            self.t_bit_tag_ok(false, vtag),
        ) {
            (true, true) => return false,
            (false, false) => (TYPE, ABORT_OR_SHUTDOWN_COMPLETE),
            (false, true) => (TYPE | T_BIT, ABORT_OR_SHUTDOWN_COMPLETE | T_BIT),
            (true, false) => (TYPE | T_BIT, ABORT_OR_SHUTDOWN_COMPLETE),
        };
        let mut rest = chunks;
        while let [ty, flags, l0, l1, ..] = *rest {
            let len = usize::from(u16::from_be_bytes([l0, l1]));
            // The chunk and its padding, or the chunk ending the packet without it (§3.2).
            let after = match rest.get((len + 3) & !3..) {
                Some(after) if len >= CHUNK_HEADER_LEN => after,
                None if len == rest.len() => &[],
                _ => return false,
            };
            // DATA (type 0), what a bundle mostly carries, is neither kind: one compare.
            if ty != u8::from(ChunkType::Data) {
                if u16::from_be_bytes([ty, flags]) & mask == failing {
                    return true;
                }
                // Where the loop stops, a later chunk is not read, so no ABORT there discards
                // the packet (§3.2): a bundled INIT (§6.10) and an unknown type whose upper
                // bits are 00 or 01 (the known types are 0 to 14).
                if ty < 0x80 && (ty > 14 || ty == 1) {
                    return false;
                }
            }
            rest = after;
        }
        false
    }

    /// Owes the ACK of `hb` (§8.3). The ACK copies the Heartbeat Information and every TLV
    /// after it unchanged, so it is as long as the HEARTBEAT. One that a packet of our path MTU
    /// cannot carry (§6.10; SCTP fragments user messages only, §6.9) goes unanswered, as §8.3's
    /// SHOULD allows: cut, it would not be a copy. Out of line, as `queue_cause` is: a control
    /// chunk's work kept out of the code the DATA path is inlined into (see `data_ready`).
    #[inline(never)]
    fn owe_heartbeat_ack(&mut self, hb: &HeartbeatRepr<'_>) {
        let ack = ChunkRepr::HeartbeatAck(HeartbeatAckRepr {
            info: hb.info,
            extra: hb.extra,
        });
        if HEADER_LEN + ack.buffer_len() <= self.control_mtu() {
            self.pending.hb_acks.push(hb.info, hb.extra);
        }
    }

    /// §8.5.1 rules B (ABORT) and C (SHUTDOWN COMPLETE): our tag without the T bit, or the
    /// peer's tag with it (what a peer without a TCB reflects).
    fn t_bit_tag_ok(&self, t_bit: bool, vtag: u32) -> bool {
        if t_bit {
            vtag == self.peer_tag && self.peer_tag != 0
        } else {
            vtag == self.local_tag
        }
    }

    /// Whether the peer may still send new DATA (RFC 9260 §9.2: not after its SHUTDOWN), so
    /// that a window update serves it.
    fn receiving_state(&self) -> bool {
        matches!(
            self.state,
            State::Established | State::ShutdownPending | State::ShutdownSent
        )
    }

    fn sending_state(&self) -> bool {
        matches!(
            self.state,
            State::Established
                | State::ShutdownPending
                | State::ShutdownSent
                | State::ShutdownReceived
                | State::ShutdownAckSent
        )
    }

    fn on_data<D: Deliver + ?Sized>(
        &mut self,
        chunk: &Chunk<&[u8]>,
        rx: &mut D,
        got_data: &mut bool,
    ) -> Flow {
        let Ok(view) = DataChunk::new_checked(chunk.bytes_ref()) else {
            self.stats.malformed += 1;
            return Flow::Stop;
        };
        if !self.sending_state() {
            // DATA before the handshake completed: not ours to take.
            self.stats.data_not_established += 1;
            return Flow::Continue;
        }
        if matches!(self.state, State::ShutdownReceived | State::ShutdownAckSent) {
            // The peer sent SHUTDOWN once all its DATA was acknowledged (§9.2) and MUST NOT
            // send new DATA after it; what comes anyway is discarded, unacknowledged (usrsctp
            // does the same), so the shutdown is not held open by it.
            self.stats.data_after_shutdown += 1;
            return Flow::Continue;
        }
        if view.user_data().is_empty() {
            // §6.2: DATA without user data is answered with ABORT, cause No User Data.
            let tsn = view.tsn();
            self.abort_with(
                AbortCause::NoUserData(tsn),
                CloseReason::ProtocolViolation("DATA chunk without user data (RFC 9260 §6.2)"),
            );
            return Flow::Stop;
        }
        if !view.unordered() {
            self.abort_with(
                AbortCause::Violation(ORDERED_DATA),
                CloseReason::ProtocolViolation(ORDERED_DATA),
            );
            return Flow::Stop;
        }
        // RFC 5043 §9: "SCTP data chunk fragmentation MUST NOT be used unless the alternative
        // is IP fragmentation"; a fragment is how a small-MTU path carries a segment, so it is
        // taken and reassembled (§6.9). The layer above judges the whole message against the
        // MULPDU.
        let whole = view.beginning() && view.ending();
        let tsn = view.tsn();
        if !view.ending()
            && view.user_data().len() < reassembly::MIN_FRAGMENT
            && serial::gt(tsn, self.rx.cum_tsn())
            && !self.rx.received(tsn)
        {
            // The reassembly never holds such a fragment (its message could need more
            // fragments than it holds), so the peer would resend it until Max.Retrans with
            // nothing said; a peer fragments at its path MTU, and no path a DDP segment may
            // be fragmented for (RFC 5043 §9: only where IP fragmentation is the alternative)
            // is this small. Told at once, with the reason.
            self.abort_with(
                AbortCause::Violation(TINY_FRAGMENT),
                CloseReason::ProtocolViolation(TINY_FRAGMENT),
            );
            return Flow::Stop;
        }
        // RFC 9260 §6.2: "When the receiver's advertised window is 0, the receiver MUST drop
        // any new incoming DATA chunk with a TSN larger than the largest TSN received so far";
        // one larger than what is left is dropped alike. A whole message below it fills a gap:
        // nothing is held for reordering, so it is taken (it frees the window). A fragment is
        // held whatever its TSN, so it is judged by the reassembly's own limits (a budget of
        // a_rwnd, a count, a floor on middle fragments) before it is acknowledged.
        let room = rx.room().saturating_sub(self.reasm.held());
        let len = view.user_data().len();
        let above = serial::gt(tsn, self.rx.highest());
        // The window told is the TSN map's share of a_rwnd too (`advertised_rwnd`): judged by
        // the layer's room alone, a chunk above the highest TSN was taken under a window of 0
        // told (session 74's review). The MUST's 0 only: a share below a chunk, with slots
        // left, may be less than the peer was told (small chunks and large ones mixed), and a
        // chunk below the highest fills a gap, the only way the share grows (judged by it, a
        // gap's chunk on a stream that holds its messages was refused for ever: a review). The
        // fragments held for reassembly come off the share as they do in the window told (a
        // share no larger than them told 0 and took the chunk: the session's last review).
        let closed = above && self.map_share() as usize <= self.reasm.held();
        // A fragment received already is a duplicate (reported in the next SACK, §6.2: "the
        // duplicate TSN number(s) SHOULD be reported"), not a new one the full reassembly
        // refuses: it takes no room.
        let refused = closed
            || if whole {
                len > room
                    && (above || !self.rx.received(tsn) && rx.holds(view.stream_id(), view.ppid()))
                    && !rx.releases(view.stream_id(), view.ppid(), view.user_data())
            } else {
                // A fragment for a stream that holds what it is given is judged against the room
                // the reassembly could make (by reneging on fragments above it, §6.2) too.
                serial::gt(tsn, self.rx.cum_tsn())
                    && !self.rx.received(tsn)
                    && (len > room && above
                        || !self.make_room_for_fragment(tsn, len, view.ending())
                        || len > rx.room().saturating_sub(self.reasm.held())
                            && rx.holds(view.stream_id(), view.ppid()))
            };
        if refused {
            self.stats.rwnd_dropped += 1;
            *got_data = true;
            self.ack_due.sack_now = true;
            return Flow::Continue;
        }
        match self.rx.insert(tsn) {
            Insert::New => {
                *got_data = true;
                if view.immediate() {
                    self.ack_due.sack_now = true;
                }
                if view.stream_id() >= self.streams {
                    // §6.5: acknowledge, report Invalid Stream Identifier, discard.
                    self.stats.invalid_stream += 1;
                    let cause = CauseRepr::InvalidStreamIdentifier {
                        stream_id: view.stream_id(),
                    };
                    self.queue_cause(&cause, error_room(self.control_mtu()));
                    return Flow::Continue;
                }
                self.stats.data_in += 1;
                self.stats.bytes_in += view.user_data().len() as u64;
                if whole {
                    rx.deliver(Message {
                        stream: view.stream_id(),
                        ppid: view.ppid(),
                        tsn,
                        data: view.user_data_ref(),
                    });
                } else {
                    self.stats.fragments_in += 1;
                    let done = self.reasm.insert(
                        tsn,
                        view.stream_id(),
                        view.ppid(),
                        view.beginning(),
                        view.ending(),
                        view.user_data(),
                    );
                    if let Some(w) = done {
                        self.stats.reassembled += 1;
                        rx.deliver(Message {
                            stream: w.stream,
                            ppid: w.ppid,
                            tsn: w.tsn,
                            data: self.reasm.message(),
                        });
                    }
                }
                // Runs the cumulative TSN has passed without completing them never will.
                self.stats.fragments_purged += self.reasm.purge(self.rx.cum_tsn()) as u64;
            }
            Insert::Duplicate => {
                // §6.2: a packet with only duplicate DATA is SACKed at once.
                self.stats.dup_tsns += 1;
                *got_data = true;
                self.ack_due.sack_now = true;
            }
            Insert::OutOfWindow => {
                // §6.2: a dropped DATA chunk is answered at once with a SACK, so the sender
                // learns where we are (and our a_rwnd, which shrinks as the map fills).
                self.stats.tsn_out_of_window += 1;
                *got_data = true;
                self.ack_due.sack_now = true;
            }
        }
        Flow::Continue
    }

    /// Whether the reassembly may hold a new fragment of `len` bytes at `tsn` (`last` if it
    /// carries E). RFC 9260 §6.2: "If the new incoming DATA chunk holds a TSN value less than
    /// the largest TSN received so far, then the receiver SHOULD drop the largest TSN held for
    /// reordering and accept the new incoming DATA chunk": when the reassembly is full,
    /// fragments held above `tsn` are dropped, highest first, and reneged on in the TSN map
    /// (the peer sends them again, §6.2.1 D iii) until this one fits. So the fragment that
    /// completes the lowest held message always gets in: a reassembly full of messages each
    /// missing one fragment used to refuse the very fragments that would have emptied it,
    /// and the association stalled until Association.Max.Retrans ended it.
    fn make_room_for_fragment(&mut self, tsn: u32, len: usize, last: bool) -> bool {
        let budget = self.cfg.a_rwnd as usize;
        if self.reasm.admits(len, last, budget) {
            return true;
        }
        // Nothing is dropped for a fragment that would not fit even then (the floor on
        // middle fragments, or a byte budget that what is above cannot free).
        if !self.reasm.admits_without_above(tsn, len, last, budget) {
            return false;
        }
        while !self.reasm.admits(len, last, budget) {
            let Some(dropped) = self.reasm.drop_highest_above(tsn) else {
                return false;
            };
            self.rx.renege(dropped);
            self.stats.reneged += 1;
        }
        true
    }

    /// After a packet that carried DATA: SACK now or later (§6.2, §6.7). `filled_gaps`: the
    /// packet filled the last gap. §6.2 follows RFC 5681 §4.2's delayed acknowledgements,
    /// which send "an immediate ACK when ... a data segment ... fills in all or part of a
    /// gap": the retransmission that repaired a loss waited for the delayed SACK (200 ms),
    /// its sender (one packet in flight after T3-rtx, §7.2.3) with it (an independent review).
    /// A part filled leaves a gap, which §6.7 SACKs at once anyway.
    fn after_data(&mut self, now: Instant, filled_gaps: bool) {
        self.ack_due.sack = true;
        self.ack_due.data_packets += 1;
        if self.ack_due.data_packets >= self.cfg.sack_freq || self.rx.has_gaps() || filled_gaps {
            self.ack_due.sack_now = true;
        }
        if self.state == State::ShutdownSent {
            // §9.2: in SHUTDOWN-SENT every packet with DATA is answered at once with SACK and
            // SHUTDOWN, and T2-shutdown restarts: the peer is alive and draining. The count
            // only, as for any packet of the peer's (§8.2: DATA acknowledges nothing we sent,
            // so it does not make an inactive path active).
            self.ack_due.sack_now = true;
            self.heard_in_shutdown_sent(now);
        }
        if !self.ack_due.sack_now && !self.running(Timer::Sack) {
            self.arm(Timer::Sack, now + self.cfg.sack_delay);
        }
    }

    /// Adds `cause` to the ERROR owed if the causes then take at most `room` bytes: what an
    /// ERROR in one packet of our path MTU holds, or less. A cause that does not fit is not
    /// reported: §3.3.10.6 and §3.3.10.8 carry the chunk or parameters whole, so none is cut;
    /// §6.10 bounds a packet by the PMTU (and SCTP fragments user messages only, §6.9); and an
    /// ERROR reports an operation error, not fatal in itself (§3.3.10): nothing of the
    /// association's operation waits for it. The causes of one ERROR at most are owed at a
    /// time, so what a peer provokes stays one packet. Cold and out of line: reports are rare,
    /// and kept out of the code the DATA path is inlined into (see `data_ready`).
    #[cold]
    #[inline(never)]
    fn queue_cause(&mut self, cause: &CauseRepr<'_>, room: usize) {
        endpoint::append_within(&mut self.pending.error_bytes, cause, room);
    }

    /// A SACK's acknowledgement (or a SHUTDOWN's, without gaps). False if it acknowledged a
    /// TSN never sent: the association is aborted then (§12.4).
    fn on_sack(&mut self, now: Instant, cum: u32, a_rwnd: u32, gaps: Option<&GapAcks<'_>>) -> bool {
        if serial::lt(cum, self.cum_ack_point) {
            // §6.2.1 D i: older than what we know; out of order.
            self.stats.bad_sacks += 1;
            return true;
        }
        // §12.4: "An SCTP implementation MUST abort the association if it receives a SACK
        // chunk acknowledging a TSN that has not been sent", by its Cumulative TSN Ack or by a
        // Gap Ack Block (the peer is broken, or someone with our tag is lying).
        let beyond = |end: u16| serial::ge(cum.wrapping_add(u32::from(end)), self.next_tsn);
        if serial::ge(cum, self.next_tsn)
            || gaps.is_some_and(|g| g.valid().any(|(_, end)| beyond(end)))
        {
            self.stats.bad_sacks += 1;
            self.abort_with(
                AbortCause::Violation(SACK_OF_UNSENT),
                CloseReason::ProtocolViolation(SACK_OF_UNSENT),
            );
            return false;
        }
        // §7.2.1: grown "only if the current congestion window is being fully utilized". After
        // T3-rtx the one packet allowed (§7.2.3) is the whole window: its chunks stay below a
        // cwnd of one MTU (which counts the common header), and the window never grew on its
        // acknowledgement, costing each recovery a round trip (an independent review). Only
        // when something waited behind that packet: an application-limited sender's lone
        // chunk does not use the window (another review).
        let cwnd_full = self.path.flight >= self.path.cwnd
            || (self.path.t3_one_packet
                && self.path.flight > 0
                && (self.sq.has_rtx() || self.sq.next_unsent().is_some()));
        let mut bytes_acked = 0usize;
        let cum_advanced = serial::gt(cum, self.cum_ack_point);
        // Whether this SACK acknowledges any DATA chunk it did not already (§8.1), a chunk
        // acknowledged before a renege included: unlike `bytes_acked`, which counts only
        // chunks never acknowledged before (§7.2.4).
        let mut acked_any = cum_advanced;
        // Cumulative acknowledgement frees slots from the front.
        while let Some(front) = self.sq.front() {
            if serial::gt(front.tsn, cum) {
                break;
            }
            let s = *front;
            if s.in_flight {
                self.path.flight -= book(s.len);
            }
            if s.gap_acked {
                self.gap_acked -= 1;
            }
            // A chunk a Gap Ack Block covered before was counted then, reneged or not.
            if !s.acked_before {
                bytes_acked += book(s.len);
                self.rtt_sample(now, s.tsn, s.tx_count);
            }
            self.sq.pop_front();
        }
        self.cum_ack_point = cum;

        // Gap ack blocks (§6.2.1 D iii-iv): mark what they cover, unmark what they no longer
        // cover (the receiver may renege), and count miss indications (§7.2.4). A SACK without
        // blocks, while nothing is marked, has nothing to do here: the walk over every
        // outstanding slot is skipped (it made each SACK cost O(window)).
        let mut highest_newly_acked = if cum_advanced { Some(cum) } else { None };
        let mut highest_reported: Option<u32> = None;
        let gaps = gaps.filter(|g| self.gap_acked > 0 || g.valid().next().is_some());
        // TSNs this SACK no longer covers though an earlier one did (the receiver reneged):
        // marked in their slots (`Slot::reneged`), no list allocated per SACK.
        // The first and one past the last slot reneged on (none yet: start above end): the
        // walk after HTNA visits those.
        let (mut reneged_from, mut reneged_to) = (u64::MAX, 0);
        if let Some(g) = gaps {
            // Outstanding TSNs rise with the ring and valid blocks rise too: one merge walk,
            // O(slots + blocks), however many blocks a peer crams into a SACK. It ends past
            // the last block and the last slot an earlier SACK covered (none after could
            // change): a peer bundling SACKs of one small block each made every one walk the
            // whole ring (an independent review).
            let mut blocks = g.valid();
            let mut block = blocks.next();
            let mut covered_ahead = self.gap_acked;
            for seq in self.sq.outstanding_seqs() {
                if block.is_none() && covered_ahead == 0 {
                    break;
                }
                let s = *self.sq.slot(seq);
                covered_ahead -= usize::from(s.gap_acked);
                let off = s.tsn.wrapping_sub(cum);
                while block.is_some_and(|(_, end)| u32::from(end) < off) {
                    block = blocks.next();
                }
                let acked = block.is_some_and(|(start, _)| u32::from(start) <= off);
                if acked {
                    highest_reported = Some(s.tsn);
                }
                if acked && !s.gap_acked {
                    acked_any = true;
                    self.sq.set_rtx(seq, false);
                    self.gap_acked += 1;
                    let slot = self.sq.slot_mut(seq);
                    slot.gap_acked = true;
                    slot.acked_before = true;
                    // Marked by Fast Retransmit and acknowledged before it went: a later
                    // retransmission (a renege, a window probe recovered) is no fast one.
                    slot.fast_rtx_due = false;
                    if slot.in_flight {
                        slot.in_flight = false;
                        self.path.flight -= book(s.len);
                    }
                    // §7.2.4: "A newly acknowledged DATA chunk is one not previously
                    // acknowledged in a SACK": one acknowledged again after the receiver
                    // reneged is not, and must not count twice.
                    if !s.acked_before {
                        bytes_acked += book(s.len);
                        highest_newly_acked = Some(s.tsn);
                        self.rtt_sample(now, s.tsn, s.tx_count);
                    }
                } else if !acked && s.gap_acked {
                    self.gap_acked -= 1;
                    // Reneged (§6.2.1 D iii): no longer acknowledged, so outstanding in the
                    // network's view again, and in the flight (§6.1), until a miss marks it
                    // for retransmission or an acknowledgement covers it. Left out, a flight
                    // of 0 would let §6.1 A send into a zero window while it is outstanding.
                    let slot = self.sq.slot_mut(seq);
                    slot.gap_acked = false;
                    slot.reneged = true;
                    self.stats.peer_reneged += 1;
                    if !slot.in_flight {
                        slot.in_flight = true;
                        self.path.flight += book(s.len);
                    }
                    reneged_from = reneged_from.min(seq);
                    reneged_to = seq + 1;
                }
            }
        }

        // HTNA (§7.2.4): misses count below the highest TSN newly acknowledged, or below
        // the highest reported at all when in Fast Recovery and the cumulative point moved.
        let in_fr = self.fast_recovery_exit.is_some();
        let threshold = if in_fr && cum_advanced {
            highest_reported
        } else {
            highest_newly_acked
        };
        let mut new_fast_rtx = false;
        if let Some(th) = threshold {
            for seq in self.sq.outstanding_seqs() {
                let s = self.sq.slot_mut(seq);
                // Outstanding TSNs rise with the ring: none after this one is below `th`.
                if !serial::lt(s.tsn, th) {
                    break;
                }
                if s.gap_acked || s.rtx || s.fast_rtx_done {
                    continue;
                }
                new_fast_rtx |= self.miss_indication(seq);
            }
        }
        // §6.2.1 D iii: a TSN the receiver reneged on may be missing: one miss indication
        // (unless the HTNA walk above just counted this SACK's one), and T3-rtx running.
        if reneged_from < reneged_to {
            self.reneged_misses(reneged_from..reneged_to, threshold, &mut new_fast_rtx);
            // T3-rtx stops only when nothing is outstanding, so it runs here already; kept
            // for the rule's letter, should that ever change.
            if !self.running(Timer::T3) {
                self.arm(Timer::T3, self.after_rto(now));
            }
        }
        debug_assert_eq!(
            self.gap_acked,
            self.sq
                .outstanding_seqs()
                .filter(|&q| self.sq.slot(q).gap_acked)
                .count(),
            "the count of gap-acked slots drifted"
        );
        if let Some(exit) = self.fast_recovery_exit {
            if serial::ge(cum, exit) {
                self.fast_recovery_exit = None;
            }
        }
        // Congestion window growth (§7.2.1, §7.2.2): for every SACK that newly acknowledges
        // bytes, by its Cumulative TSN Ack or by its Gap Ack Blocks, while not in Fast
        // Recovery; slow start only when the window was in use. RFC 9260 dropped RFC 4960's
        // condition that the cumulative point move (RFC 8540 §3.22): with it, bytes first
        // acknowledged by a block were counted nowhere, since `acked_before` keeps the SACK
        // that later covers them cumulatively from counting them again (an independent
        // review). §7.2.4's note: a SACK that also starts Fast Recovery grows the window
        // first ("the cwnd adjustment rules defined in Sections 7.2.1 and 7.2.2 MUST be
        // applied first"), and the cut halves the grown one.
        if bytes_acked > 0 && self.fast_recovery_exit.is_none() {
            let mtu = self.path.mtu;
            if self.path.cwnd <= self.path.ssthresh {
                if cwnd_full {
                    self.path.cwnd += bytes_acked.min(mtu);
                }
            } else {
                self.path.partial_bytes_acked += bytes_acked;
                if self.path.partial_bytes_acked >= self.path.cwnd && cwnd_full {
                    self.path.partial_bytes_acked -= self.path.cwnd;
                    self.path.cwnd += mtu;
                } else if !cwnd_full && self.path.partial_bytes_acked > self.path.cwnd {
                    // §7.2.2: an application-limited sender does not bank credit.
                    self.path.partial_bytes_acked = self.path.cwnd;
                }
            }
        }
        if new_fast_rtx {
            if self.fast_recovery_exit.is_none() {
                // §7.2.4 step 2 / §7.2.3: enter Fast Recovery.
                self.path.ssthresh = (self.path.cwnd / 2).max(4 * self.path.mtu);
                self.path.cwnd = self.path.ssthresh;
                self.path.partial_bytes_acked = 0;
                self.fast_recovery_exit = Some(self.next_tsn.wrapping_sub(1));
                // Step 3: "If not in Fast Recovery", one packet of the earliest marked
                // chunks goes whatever cwnd says. Chunks marked in Fast Recovery go "as soon
                // as cwnd allows" (step 5): each used to take a packet past cwnd of its own
                // (an independent review).
                self.pending.fast_rtx = true;
            }
            self.timed = None;
        }
        // A chunk marked for fast retransmission may be acknowledged before it goes (its
        // original was late, not lost): the leave to ignore cwnd would outlive it and pass to
        // the next T3-rtx retransmission (of a chunk marked beside it, or later), and keep
        // `owes_nothing` false meanwhile. It lasts while a chunk marked by Fast
        // Retransmit waits; looked for only while the leave is held, from the first marked.
        if self.pending.fast_rtx && !self.fast_rtx_waits() {
            self.pending.fast_rtx = false;
        }

        if acked_any {
            // §8.1: "The counter MUST be reset each time a DATA chunk sent to that peer
            // endpoint is acknowledged (by the reception of a SACK)".
            self.clear_errors();
            // §7.2.3: the one packet after T3-rtx was delivered.
            self.path.t3_one_packet = false;
        }
        // RFC 8899 §4.3: the T3-rtx expiries in a row were of the earliest chunk; only its
        // acknowledgement (the cumulative point moving) breaks the row. Small chunks sent
        // beside it and gap-acked are what a black hole of its size lets through.
        if cum_advanced {
            if let Some(p) = self.plpmtud.as_mut() {
                p.on_ack();
            }
        }
        if self.path.flight == 0 {
            self.path.partial_bytes_acked = 0;
        }
        // §6.1 A: the window the peer closed (or kept smaller than the chunk) now holds what
        // went into it meanwhile (the window probe), which is unacknowledged: the peer
        // dropped it. It goes again now, as usrsctp's window probe recovery sends it, not at
        // its T3-rtx, which the probes' expiries have backed off towards RTO.Max (a ULP
        // waiting for its last message's completion waited as long as the window had been
        // closed, up to a minute). A window of 500 bytes to a 1000-byte probe is as closed
        // as one of 0 (an independent review: only 0 was recovered).
        if self.window_probes && a_rwnd > self.peer_a_rwnd {
            self.recover_window_probes(self.peer_a_rwnd, a_rwnd);
        }
        self.peer_a_rwnd = a_rwnd;
        // §6.2.1 D ii: rwnd = a_rwnd - bytes in flight.
        self.peer_rwnd = a_rwnd.saturating_sub(self.path.flight as u32);

        // T3-rtx (§6.3.2 R2, R3).
        if self.sq.outstanding() == 0 {
            self.stop(Timer::T3);
        } else if cum_advanced {
            self.arm(Timer::T3, self.after_rto(now));
        }
        self.burst_budget = self.cfg.max_burst;
        self.burst_ended = false;
        self.progress_shutdown(now);
        true
    }

    /// One miss indication for each slot the SACK just handled reneged on (§6.2.1 D iii),
    /// unless the HTNA walk below `threshold` counted it already; clears their marks. Rare
    /// (a receiver short of buffer), so a walk of its own, over `seqs` (from the first slot
    /// reneged on to the last) only: a peer alternating SACKs with and without one small
    /// block would otherwise make every other SACK walk the whole ring.
    #[cold]
    fn reneged_misses(
        &mut self,
        seqs: core::ops::Range<u64>,
        threshold: Option<u32>,
        new_fast_rtx: &mut bool,
    ) {
        for seq in seqs {
            let s = self.sq.slot_mut(seq);
            if !core::mem::take(&mut s.reneged) {
                continue;
            }
            let counted = threshold.is_some_and(|th| serial::lt(s.tsn, th));
            if !counted && !s.rtx && !s.fast_rtx_done {
                *new_fast_rtx |= self.miss_indication(seq);
            }
        }
    }

    /// Marks the window probes in flight and not acknowledged that the window `before`
    /// (the peer's last a_rwnd) did not hold and `after` (its new one) does, for
    /// retransmission (§6.1 A; their room given back to the flight, §6.2.1 C). Only probes:
    /// chunks sent into an open window are in flight as ever (a window update can overtake
    /// them), and a peer alternating windows of 0 and more would otherwise have the whole
    /// flight resent; a probe still larger than the new window would only be dropped again.
    /// `before` against the chunk alone, as it was marked: a window that grows by a byte
    /// does not resend what the flight may still be carrying to the peer (a review of a
    /// version that counted the flight).
    #[cold]
    fn recover_window_probes(&mut self, before: u32, after: u32) {
        let mut waiting = false;
        let seqs = self.sq.outstanding_seqs();
        for seq in seqs.start..seqs.end.min(self.probe_last + 1) {
            let s = self.sq.slot_mut(seq);
            if s.gap_acked || !s.window_probe {
                continue;
            }
            if !s.in_flight {
                // Marked for retransmission (T3): it goes again, marked afresh as it goes,
                // and is recovered at a later update that holds it.
                waiting = true;
                continue;
            }
            let size = book(s.len);
            if size <= before as usize || size > after as usize {
                waiting |= size > after as usize;
                continue;
            }
            s.window_probe = false;
            // Its misses belonged to the transmission the peer dropped (as after T3).
            s.misses = 0;
            s.in_flight = false;
            let len = s.len;
            self.path.flight -= book(len);
            self.sq.set_rtx(seq, true);
            self.stats.window_probe_recoveries += 1;
        }
        self.window_probes = waiting;
    }

    /// A window probe (§6.1 A) went at send-queue sequence number `seq`: a window update
    /// walks the queue for it, as far as the last one marked.
    fn note_window_probe(&mut self, seq: u64) {
        self.window_probes = true;
        self.probe_last = self.probe_last.max(seq);
    }

    /// Whether a chunk marked by Fast Retransmit still waits to be sent (acknowledged ones are
    /// no longer marked, sent ones no longer due).
    fn fast_rtx_waits(&self) -> bool {
        let Some(from) = self.sq.first_rtx() else {
            return false;
        };
        (from..self.sq.outstanding_seqs().end).any(|q| {
            let s = self.sq.slot(q);
            s.rtx && s.fast_rtx_due
        })
    }

    /// One miss indication for the outstanding TSN at `seq` (RFC 9260 §7.2.4): the third
    /// marks it for Fast Retransmit and takes it out of the flight. Whether it did.
    fn miss_indication(&mut self, seq: u64) -> bool {
        let s = self.sq.slot_mut(seq);
        s.misses += 1;
        if s.misses < 3 {
            return false;
        }
        s.fast_rtx_done = true;
        s.fast_rtx_due = true;
        let len = s.len;
        if s.in_flight {
            s.in_flight = false;
            self.path.flight -= book(len);
        }
        self.sq.set_rtx(seq, true);
        true
    }

    fn rtt_sample(&mut self, now: Instant, tsn: u32, tx_count: u32) {
        if let Some((timed, at)) = self.timed {
            if timed == tsn {
                self.timed = None;
                // Karn's rule (§6.3.1 C5): never from a retransmitted chunk.
                if tx_count == 1 {
                    self.path.rto.sample(now.saturating_since(at));
                }
            }
        }
    }

    fn on_heartbeat_ack(&mut self, now: Instant, info: &[u8]) {
        if info.len() == plpmtud::PROBE_INFO_LEN {
            self.on_probe_ack(now, info);
            return;
        }
        if info.len() != HB_INFO_LEN {
            return;
        }
        let mut n = [0u8; 8];
        n.copy_from_slice(&info[..8]);
        let nonce = u64::from_be_bytes(n);
        if self.path.hb_nonce != Some(nonce) {
            return;
        }
        // The send time is ours, kept here: the one in the information is the peer's echo.
        // Trusted, an echo of 0 made SRTT the clock's age and pinned RTO at RTO.Max; one in
        // the future pulled it to RTO.Min (an independent review).
        let Some(sent) = self.path.hb_sent.take() else {
            return;
        };
        self.stats.heartbeat_acks_in += 1;
        self.path.hb_nonce = None;
        self.path.hb_overdue = false;
        self.clear_errors();
        // §8.3: measure RTT from the ACK. §6.3.1 C3 then sets RTO from SRTT and RTTVAR, which
        // ends a T3 back-off (§6.3.3 E2): decided so for issue 16 finding 7, as Linux and
        // usrsctp do (`rto::tests::a_new_measurement_ends_the_back_off_6_3_1_c3_8_3`).
        self.path.rto.sample(now.saturating_since(sent));
        self.redraw_hb_jitter();
        self.arm_heartbeat(now);
    }

    /// RFC 8899 §6.2: the HEARTBEAT ACK of a probe confirms its size. It says nothing of the
    /// error counter or the RTT (§8.3's heartbeat is the ordinary one): the probe went outside
    /// congestion control, and its information carries no send time.
    fn on_probe_ack(&mut self, now: Instant, info: &[u8]) {
        let nonce = u64::from(be32(info, 0)) << 32 | u64::from(be32(info, 4));
        let size = be32(info, 8) as usize;
        let Some(p) = self.plpmtud.as_mut() else {
            return;
        };
        if p.on_probe_ack(now, nonce, size) {
            let (mtu, before) = (p.plpmtu(), self.path.mtu);
            if mtu > before {
                self.path.mtu = mtu;
                self.path_mtu_moved(before);
            }
        }
        self.sync_plpmtud_timer();
    }

    /// False if it acknowledged a TSN never sent: the association is aborted then.
    fn on_shutdown(&mut self, now: Instant, cum: u32) -> bool {
        // §9.2: the Cumulative TSN Ack of SHUTDOWN acknowledges as a SACK's does, so one past
        // the TSNs sent is §12.4's violation, as in a SACK: the association is aborted (Linux
        // does the same, `sctp_sf_violation_ctsn`). It used to be ignored.
        if matches!(
            self.state,
            State::Established
                | State::ShutdownPending
                | State::ShutdownSent
                | State::ShutdownReceived
        ) && serial::ge(cum, self.next_tsn)
        {
            self.stats.bad_sacks += 1;
            self.abort_with(
                AbortCause::Violation(SHUTDOWN_OF_UNSENT),
                CloseReason::ProtocolViolation(SHUTDOWN_OF_UNSENT),
            );
            return false;
        }
        match self.state {
            State::Established | State::ShutdownPending => {
                self.state = State::ShutdownReceived;
                self.events.push_back(Event::ShutdownReceived);
            }
            State::ShutdownSent => {
                // §9.2: both sides shut down at once: SHUTDOWN ACK at once.
                self.state = State::ShutdownReceived;
            }
            State::ShutdownReceived => {}
            State::ShutdownAckSent => {
                // §9.2: our SHUTDOWN ACK was lost and the peer repeats its SHUTDOWN: answer at
                // once rather than on our own T2. T2 runs on: its expiries are what counts our
                // retransmissions against Association.Max.Retrans (§9.2's SHOULD), and a peer
                // repeating SHUTDOWN faster than the RTO would otherwise hold the association
                // here for ever.
                self.pending.shutdown_ack = true;
                return true;
            }
            _ => return true,
        }
        // §9.2: the Cumulative TSN Ack of SHUTDOWN acknowledges like a SACK's, without gaps.
        if serial::ge(cum, self.cum_ack_point) {
            let rwnd = self.peer_rwnd.saturating_add(self.path.flight as u32);
            // SHUTDOWN carries no a_rwnd: the one made up here is no window update (§6.1 A),
            // and must not send a probe again into a window still closed.
            let (last, probes) = (self.peer_a_rwnd, core::mem::take(&mut self.window_probes));
            // Checked above to be a TSN sent: never the §12.4 abort.
            let _ = self.on_sack(now, cum, rwnd, None);
            (self.peer_a_rwnd, self.window_probes) = (last, probes);
        }
        self.progress_shutdown(now);
        true
    }

    /// Moves a shutdown along once nothing is outstanding (§9.2).
    fn progress_shutdown(&mut self, now: Instant) {
        if !self.sq.is_empty() {
            return;
        }
        match self.state {
            State::ShutdownPending => {
                self.state = State::ShutdownSent;
                self.pending.shutdown = true;
                self.start_t2(now);
            }
            State::ShutdownReceived => {
                self.state = State::ShutdownAckSent;
                self.pending.shutdown_ack = true;
                self.start_t2(now);
            }
            _ => {}
        }
    }

    fn start_t2(&mut self, now: Instant) {
        self.stop(Timer::T3);
        self.stop(Timer::Heartbeat);
        self.arm(Timer::T2, self.after_rto(now));
        // §9.2: the SHUTDOWN sender also starts T5-shutdown-guard; the SHUTDOWN ACK sender is
        // bounded by Association.Max.Retrans on T2 alone.
        if self.state == State::ShutdownSent && !self.running(Timer::T5) {
            self.arm(Timer::T5, now + self.cfg.shutdown_guard);
        }
    }

    fn on_error(&mut self, now: Instant, e: &ErrorChunkRepr<'_>) {
        self.stats.errors_in += 1;
        for cause in e.causes.iter() {
            if let CauseRepr::StaleCookie { staleness } = cause {
                if self.state == State::CookieEchoed {
                    // §5.2.6: start over with a new INIT (a fresh cookie). The restarts are
                    // bounded as T1's retries are (§5.1 C: after Max.Init.Retransmits the
                    // endpoint MUST abort the initialization and report): they have their own
                    // counter, since the INIT ACK each restart brings begins T1-cookie's count
                    // afresh, and a peer answering Stale Cookie every time would otherwise
                    // keep the handshake going forever.
                    self.stats.stale_cookies += 1;
                    self.stale_restarts += 1;
                    if self.stale_restarts > self.cfg.max_init_retransmits {
                        self.close(CloseReason::InitFailed);
                        return;
                    }
                    // §5.2.6: the new INIT "SHOULD" carry a Cookie Preservative, computed from
                    // the RTT of the COOKIE ECHO / ERROR exchange, adding "no more than 1
                    // second beyond the measured RTT": the RTT plus the staleness, the latter
                    // at most 1 s. In milliseconds (§3.3.2.1), rounded up.
                    let rtt = now.saturating_since(self.cookie_echo_sent);
                    let late =
                        Duration::from_micros(u64::from(staleness)).min(Duration::from_secs(1));
                    let ms = (rtt + late).as_micros().div_ceil(1000);
                    self.cookie_preservative = Some(u32::try_from(ms).unwrap_or(u32::MAX));
                    // T1-init counts this INIT's retransmissions from zero.
                    self.init_retransmits = 0;
                    self.state = State::CookieWait;
                    self.pending.cookie_echo = false;
                    self.pending.init = true;
                    self.arm(Timer::T1, self.after_rto(now));
                }
            }
        }
    }

    /// INIT on an existing association (§5.2.1, §5.2.2, §9.2).
    fn on_init(&mut self, now: Instant, chunk: &Chunk<&[u8]>, init: &InitRepr<'_>) {
        if self.state == State::ShutdownAckSent {
            // §9.2: discard and retransmit SHUTDOWN ACK.
            self.pending.shutdown_ack = true;
            return;
        }
        let params = endpoint::walk_init_params(init);
        let params_bytes = chunk.bytes_ref().get(INIT_MIN_LEN..).unwrap_or_default();
        // A refusal still to be sent keeps its cause: this INIT's goes after those bytes until
        // it replaces them.
        let bytes = &mut self.pending.init_abort_bytes;
        let kept = bytes.len();
        if let Some((off, len)) = params.host_name {
            // §3.3.2.1: ABORT, on the INIT's own tag (this association goes on).
            self.report_param(params_bytes.get(off..off + len));
            self.stats.inits_refused += 1;
            self.pending.init_abort = Some((init.initiate_tag, InitRefusal::HostName));
            return;
        }
        // §5.2.2: "before responding, the endpoint MUST check to see if the unexpected INIT
        // adds new addresses to the association. If new addresses are added to the
        // association, the endpoint MUST respond with an ABORT, copying the Initiate Tag of
        // the unexpected INIT into the Verification Tag", with the cause that lists them. The
        // association has the addresses its peer listed when it was set up (kept as a number:
        // a restart listing the same ones is a restart) and the one it talks to.
        // §5.2.1 says the same of COOKIE-ECHOED ("the entire INIT MUST be discarded, and NO
        // changes should be made to the existing association. An ABORT SHOULD be sent"): there
        // the peer's addresses are those of its INIT ACK. Not in COOKIE-WAIT: no INIT ACK has
        // told us the peer's addresses yet, only the one we sent our INIT to, so a colliding
        // INIT that lists others (a multi-homed peer's normal list) adds nothing to a known
        // set, and answering it is what resolves the collision (§5.2.1).
        if self.state != State::CookieWait
            && endpoint::address_set(init) != self.peer_addresses
            && endpoint::new_addresses(init, params_bytes, self.peer_addr, bytes)
        {
            bytes.drain(..kept);
            self.stats.inits_refused += 1;
            self.pending.init_abort = Some((init.initiate_tag, InitRefusal::NewAddresses));
            return;
        }
        bytes.truncate(kept);
        if params.adaptation != Some(self.cfg.adaptation_indication) {
            // RFC 5043 §11.1: refused as the endpoint refuses it, with an ABORT on the INIT's
            // own tag that says why (this association goes on).
            self.stats.adaptation_refused += 1;
            self.pending.init_abort = Some((init.initiate_tag, InitRefusal::Adaptation));
            return;
        }
        // §5.2.1 (COOKIE-WAIT, COOKIE-ECHOED): our own Initiate Tag again; tie-tags are zero
        // in COOKIE-WAIT and the tags we have in COOKIE-ECHOED. §5.2.2 (any later state): a new
        // tag, and the current tags as tie-tags so a COOKIE ECHO can be recognised as a
        // restart.
        let (local_tag, local_tsn, local_tie, peer_tie) = match self.state {
            State::CookieWait => (self.local_tag, self.local_initial_tsn, 0, 0),
            State::CookieEchoed => (
                self.local_tag,
                self.local_initial_tsn,
                self.local_tag,
                self.peer_tag,
            ),
            _ => (
                self.prf.nonzero_u32(),
                self.prf.nonzero_u32(),
                self.local_tag,
                self.peer_tag,
            ),
        };
        let cookie = endpoint::cookie_for_init(
            &self.cfg,
            now,
            init,
            &params,
            self.peer_addr,
            self.peer_port,
            local_tag,
            local_tsn,
            local_tie,
            peer_tie,
        );
        // §3.2.2: "the receiver of the INIT MUST put the 'Unrecognized Parameter'
        // parameter(s) in the INIT ACK chunk sent in response" - for the parameters whose
        // type asks for a report (§3.2.1), as the endpoint does: every one that a packet of
        // the path MTU holds beside the cookie.
        let cookie = cookie.seal(&self.key);
        let room = endpoint::init_ack_room(self.control_mtu());
        let written = endpoint::init_ack_params(
            &mut self.init_ack_params,
            room,
            self.cfg.adaptation_indication,
            &cookie,
            init,
            params_bytes,
        );
        // Not written (no room even for the cookie): no INIT ACK, as when none fits a packet.
        self.pending_init_ack = written.then_some(PendingInitAck {
            peer_tag: init.initiate_tag,
            local_tag,
            local_tsn,
        });
    }

    /// An INIT the parser refused for its values (`Malformed`, §3.3.2), answered as the
    /// endpoint answers one: an Initiate Tag of 0 is silently discarded; OS or MIS of 0, or
    /// an a_rwnd below 1500, "SHOULD" be answered with ABORT, Invalid Mandatory Parameter
    /// (§3.3.10.7), on the INIT's own tag. The association goes on (the INIT is discarded).
    fn on_invalid_init(&mut self, chunk: &Chunk<&[u8]>) {
        if self.state == State::ShutdownAckSent {
            // §9.2: any INIT in SHUTDOWN-ACK-SENT is discarded and the SHUTDOWN ACK repeated.
            self.pending.shutdown_ack = true;
            return;
        }
        let Ok(c) = InitChunk::new_checked(chunk.bytes_ref()) else {
            return;
        };
        let tag = c.initiate_tag();
        if tag == 0 {
            return;
        }
        self.stats.inits_refused += 1;
        self.pending.init_abort = Some((tag, InitRefusal::InvalidMandatory));
    }

    fn on_init_ack(&mut self, now: Instant, chunk: &Chunk<&[u8]>, ack: &InitAckRepr<'_>) {
        if self.state != State::CookieWait {
            // §5.2.3: an unexpected INIT ACK is discarded.
            return;
        }
        let init = &ack.0;
        let params = endpoint::walk_init_params(init);
        self.peer_tag = init.initiate_tag;
        if let Some((off, len)) = params.host_name {
            let params_bytes = chunk.bytes_ref().get(INIT_MIN_LEN..).unwrap_or_default();
            self.abort_for_host_name(params_bytes.get(off..off + len));
            return;
        }
        if params.adaptation != Some(self.cfg.adaptation_indication) {
            // RFC 5043 §11.1: DDP procedures must not run without DDP's indication.
            self.stats.adaptation_refused += 1;
            self.abort_with(
                AbortCause::Adaptation,
                CloseReason::AdaptationRefused {
                    peer: params.adaptation,
                },
            );
            return;
        }
        let Some(cookie) = params.cookie else {
            self.stats.malformed += 1;
            return;
        };
        self.peer_cookie.clear();
        self.peer_cookie.extend_from_slice(cookie);
        self.streams = self
            .cfg
            .streams
            .min(init.outbound_streams)
            .min(init.inbound_streams);
        self.peer_adaptation = params.adaptation.unwrap_or(0);
        self.peer_addresses = endpoint::address_set(init);
        self.peer_rwnd = init.a_rwnd;
        self.peer_a_rwnd = init.a_rwnd;
        self.path.ssthresh = init.a_rwnd as usize;
        self.rx = TsnMap::new(init.initial_tsn, self.cfg.tsn_window);
        self.reasm.clear();
        // §3.2.1, §3.2.2: unrecognized parameters of an INIT ACK are reported in an ERROR
        // bundled with the COOKIE ECHO, so the causes get what a packet of the path MTU holds
        // beside it; those that would not fit are not reported (`queue_cause`).
        let params_bytes = chunk.bytes_ref().get(INIT_MIN_LEN..).unwrap_or_default();
        let echo = (CHUNK_HEADER_LEN + cookie.len()).next_multiple_of(4);
        let room = error_room(self.control_mtu()).saturating_sub(echo);
        for (off, len) in endpoint::unrecognized(init) {
            if let Some(params) = params_bytes.get(off..off + len) {
                self.queue_cause(&CauseRepr::UnrecognizedParameters { params }, room);
            }
        }
        self.state = State::CookieEchoed;
        self.pending.init = false;
        self.pending.cookie_echo = true;
        self.pending.data_with_cookie = true;
        // §5.1 C: T1-cookie retransmits the COOKIE ECHO up to Max.Init.Retransmits times of its
        // own.
        self.init_retransmits = 0;
        self.cookie_echo_sent = now;
        self.arm(Timer::T1, self.after_rto(now));
    }

    /// Keeps `param` (a whole parameter) as the cause of the ABORT to send, unless it is too long
    /// to report (the ABORT then goes without a cause).
    fn report_param(&mut self, param: Option<&[u8]>) {
        let bytes = &mut self.pending.init_abort_bytes;
        bytes.clear();
        if let Some(p) = param.filter(|p| p.len() <= endpoint::MAX_REPORTED_ADDRESSES) {
            bytes.extend_from_slice(p);
        }
    }

    /// §3.3.2.1: "The receiver of an INIT chunk or INIT ACK containing a Host Name Address
    /// parameter MUST send an ABORT": the attempt ends, Unresolvable Address carrying `param`.
    fn abort_for_host_name(&mut self, param: Option<&[u8]>) {
        self.report_param(param);
        self.abort_with(
            AbortCause::Unresolvable,
            CloseReason::InitAckRefused("a Host Name Address (RFC 9260 §3.3.2.1)"),
        );
    }

    /// An INIT ACK the parser refused for its values (`Malformed`), in COOKIE-WAIT. A missing
    /// State Cookie is reported (§3.3.3: mandatory; §3.3.10.2 Missing Mandatory Parameter)
    /// and T1-init goes on, as for any INIT ACK we cannot use. Fields out of range end the
    /// attempt (§3.3.3): a zero Initiate Tag "MUST destroy the association", zero outbound or
    /// inbound streams "SHOULD destroy" it (with an ABORT, which it MAY send; Invalid
    /// Mandatory Parameter, §3.3.10.7), and so does a window below 1500.
    fn on_unusable_init_ack(&mut self, chunk: &Chunk<&[u8]>) {
        if self.state != State::CookieWait {
            return;
        }
        let Ok(c) = InitChunk::new_checked(chunk.bytes_ref()) else {
            return;
        };
        let tag = c.initiate_tag();
        if tag == 0 {
            self.close(CloseReason::InitAckRefused(
                "an Initiate Tag of 0 (RFC 9260 §3.3.3)",
            ));
            return;
        }
        // §3.3.2.1 before anything else the parser refused: a Host Name Address is answered
        // with ABORT even in an INIT ACK that is otherwise unusable.
        if let Some(p) = endpoint::raw_param(c.params_ref(), endpoint::HOST_NAME_ADDRESS) {
            self.peer_tag = tag;
            self.abort_for_host_name(Some(p));
            return;
        }
        if c.outbound_streams() == 0 || c.inbound_streams() == 0 || c.a_rwnd() < MIN_A_RWND {
            self.peer_tag = tag;
            self.abort_with(
                AbortCause::InvalidMandatory,
                CloseReason::InitAckRefused(
                    "zero streams or a window below 1500 (RFC 9260 §3.3.3)",
                ),
            );
            return;
        }
        // The fields are right, so the State Cookie is what is missing. The report goes on the
        // INIT ACK's tag, which does not become the peer's: a responder keeps no state after
        // its INIT ACK (§5.1.3) and may answer our ERROR with an out-of-the-blue ABORT on that
        // tag (§8.4 rule 8), which must not end the attempt.
        self.stats.init_acks_without_cookie += 1;
        self.pending.missing_cookie = Some(tag);
    }

    /// COOKIE ECHO on an existing association (§5.2.4).
    fn on_cookie_echo(&mut self, now: Instant, vtag: u32, bytes: &[u8]) -> Flow {
        let Ok(c) = Cookie::open(bytes, &self.key) else {
            self.stats.malformed += 1;
            return Flow::Refused(Discard::Malformed);
        };
        // §5.1.5 step 2: the packet must carry the tag the cookie gives us.
        if c.local_tag != vtag || c.local_port != self.local_port || c.peer_port != self.peer_port {
            self.stats.bad_vtag += 1;
            return Flow::Refused(Discard::BadVerificationTag);
        }
        // §5.1.3: a lifespan longer than any this endpoint writes was not issued here.
        if c.lifespan > endpoint::longest_issued_lifespan(&self.cfg) {
            self.stats.malformed += 1;
            return Flow::Refused(Discard::Malformed);
        }
        let local_match = c.local_tag == self.local_tag;
        let peer_match = c.peer_tag == self.peer_tag;
        // §5.1.5 step 3, except for case D: when both tags are the current association's,
        // "consider the State Cookie valid even if the lifespan is exceeded" (§5.2.4) - a
        // COOKIE ECHO retransmitted after COOKIE ACKs were lost must still be answered.
        if !(local_match && peer_match) {
            if let Some(staleness) = c.staleness(now) {
                self.stats.stale_cookies += 1;
                self.pending.stale_cookie = Some((c.peer_tag, staleness));
                return Flow::Refused(Discard::UnusableCookie);
            }
        }
        if !local_match
            && !peer_match
            && c.local_tie_tag == self.local_tag
            && c.peer_tie_tag == self.peer_tag
        {
            // Case A: the peer restarted.
            if self.state == State::ShutdownAckSent {
                let room = error_room(self.control_mtu());
                self.queue_cause(&CauseRepr::CookieReceivedWhileShuttingDown, room);
                self.pending.shutdown_ack = true;
                return Flow::Stop;
            }
            let lost = self.sq.clear();
            self.gap_acked = 0;
            self.timers = [None; TIMERS];
            self.path.flight = 0;
            self.path.t3_one_packet = false;
            self.path.cwnd = initial_cwnd(self.path.mtu);
            self.path.partial_bytes_acked = 0;
            self.path.rto = Rto::new(self.cfg.rto_initial, self.cfg.rto_min, self.cfg.rto_max);
            self.path.hb_nonce = None;
            self.path.hb_sent = None;
            self.path.hb_overdue = false;
            self.fast_recovery_exit = None;
            // The old incarnation's marked chunks are gone with the queue.
            self.pending.fast_rtx = false;
            self.timed = None;
            self.clear_errors();
            self.adopt_cookie(&c);
            // The SHUTDOWN our ULP asked for still stands (§9.2): the restart ends the old
            // incarnation, not the request (the peer's own SHUTDOWN, which may have moved us
            // on to SHUTDOWN-RECEIVED since, was the old incarnation's).
            let shutting_down = core::mem::take(&mut self.shutdown_asked);
            self.state = State::Established;
            self.pending.cookie_ack = true;
            self.events.push_back(Event::Restarted { lost });
            self.arm_heartbeat(now);
            // RFC 8899 goes on over the same path: a probe in flight went under the old tags
            // and no answer to it will come, and its timer was cleared with the others (which
            // stopped discovery for good): a search from the size in use starts afresh.
            if let Some(p) = self.plpmtud.as_mut() {
                p.set(self.path.mtu);
                p.search(now);
            }
            self.sync_plpmtud_timer();
            if shutting_down {
                // Nothing is queued now: the SHUTDOWN goes with the COOKIE ACK.
                self.shutdown(now);
            }
            return Flow::Continue;
        }
        if local_match && !peer_match {
            // Case B: simultaneous open; the peer picked a new tag.
            self.peer_tag = c.peer_tag;
            self.adopt_negotiated(&c);
            self.enter_established_from_echo(now);
            return Flow::Continue;
        }
        if !local_match && peer_match && c.local_tie_tag == 0 && c.peer_tie_tag == 0 {
            // Case C: a stale COOKIE ECHO from an earlier INIT; discard.
            self.stats.unusable_cookies += 1;
            return Flow::Refused(Discard::UnusableCookie);
        }
        if local_match && peer_match {
            // Case D: a retransmitted COOKIE ECHO, or ours crossed theirs.
            if self.state == State::CookieWait {
                self.adopt_negotiated(&c);
            }
            self.enter_established_from_echo(now);
            return Flow::Continue;
        }
        // §5.2.4: none of the cases: silently discarded.
        self.stats.unusable_cookies += 1;
        Flow::Refused(Discard::UnusableCookie)
    }

    /// Case B and D: the peer's values from the cookie, keeping our send side.
    fn adopt_negotiated(&mut self, c: &Cookie) {
        self.streams = c.streams;
        self.peer_adaptation = c.peer_adaptation;
        if matches!(self.state, State::CookieWait | State::CookieEchoed) {
            // §6.2.1 D ii: the advertised window less what is in flight (DATA bundled with
            // our COOKIE ECHO). An association already established (a collision's COOKIE
            // ECHO, case B) keeps its last SACK's window: the cookie's a_rwnd is the peer's
            // INIT's, from before anything in flight or any SACK since (an independent
            // review: it took it whole).
            self.peer_rwnd = c.peer_a_rwnd.saturating_sub(self.path.flight as u32);
            self.peer_a_rwnd = c.peer_a_rwnd;
            self.rx = TsnMap::new(c.peer_initial_tsn, self.cfg.tsn_window);
            self.reasm.clear();
            self.path.ssthresh = c.peer_a_rwnd as usize;
        }
    }

    fn enter_established_from_echo(&mut self, now: Instant) {
        if matches!(self.state, State::CookieWait | State::CookieEchoed) {
            self.stop(Timer::T1);
            self.state = State::Established;
            self.pending.init = false;
            self.pending.cookie_echo = false;
            self.events.push_back(Event::Connected {
                streams: self.streams,
                peer_adaptation: self.peer_adaptation,
            });
            self.arm_heartbeat(now);
        }
        self.pending.cookie_ack = true;
    }

    // ------------------------------------------------------------------------------------
    // Timers
    // ------------------------------------------------------------------------------------

    /// Runs every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        for i in 0..TIMERS {
            match self.timers[i] {
                Some(at) if at <= now => {}
                _ => continue,
            }
            self.timers[i] = None;
            if self.state == State::Closed {
                return;
            }
            match i {
                x if x == Timer::T1 as usize => self.on_t1(now),
                x if x == Timer::T2 as usize => self.on_t2(now),
                x if x == Timer::T3 as usize => self.on_t3(now),
                x if x == Timer::Heartbeat as usize => self.on_heartbeat_timer(now),
                x if x == Timer::Plpmtud as usize => {
                    if let Some(p) = self.plpmtud.as_mut() {
                        p.on_timer(now);
                    }
                    self.sync_plpmtud_timer();
                }
                x if x == Timer::Sack as usize => {
                    if self.ack_due.sack {
                        self.ack_due.sack_now = true;
                    }
                }
                _ => {
                    // T5-shutdown-guard (§9.2): give up and ABORT.
                    self.abort_with(AbortCause::Timeout, CloseReason::Unreachable);
                }
            }
        }
    }

    fn on_t1(&mut self, now: Instant) {
        self.init_retransmits += 1;
        self.stats.init_retransmits += 1;
        if self.init_retransmits > self.cfg.max_init_retransmits {
            self.close(CloseReason::InitFailed);
            return;
        }
        self.path.rto.back_off();
        match self.state {
            State::CookieWait => self.pending.init = true,
            State::CookieEchoed => {
                self.pending.cookie_echo = true;
                self.cookie_echo_sent = now;
            }
            _ => return,
        }
        self.arm(Timer::T1, self.after_rto(now));
    }

    fn on_t2(&mut self, now: Instant) {
        if self.count_error() {
            return;
        }
        self.path.rto.back_off();
        match self.state {
            State::ShutdownSent => self.pending.shutdown = true,
            State::ShutdownAckSent => self.pending.shutdown_ack = true,
            _ => return,
        }
        self.arm(Timer::T2, self.after_rto(now));
    }

    /// An acknowledgement or a HEARTBEAT ACK: the error counter starts over (§8.1, §8.3), and
    /// an inactive path is active again (§8.2).
    fn clear_errors(&mut self) {
        self.error_count = 0;
        if !self.path_active {
            self.path_active = true;
            self.events.push_back(Event::PathChange { active: true });
        }
    }

    /// One more consecutive failure (§8.2); true if the association is now gone.
    fn count_error(&mut self) -> bool {
        self.error_count += 1;
        if self.error_count > self.cfg.path_max_retrans && self.path_active {
            // §8.2: "mark the destination transport address as inactive, and notify the
            // upper layer".
            self.path_active = false;
            self.stats.path_inactive += 1;
            self.events.push_back(Event::PathChange { active: false });
        }
        if self.error_count > self.cfg.assoc_max_retrans {
            self.abort_with(AbortCause::Timeout, CloseReason::Unreachable);
            true
        } else {
            false
        }
    }

    fn on_t3(&mut self, now: Instant) {
        if self.sq.outstanding() == 0 {
            return;
        }
        self.stats.t3_expiries += 1;
        if matches!(self.state, State::CookieWait | State::CookieEchoed) {
            // DATA that went with the COOKIE ECHO waits for the handshake (T1 drives it).
            self.arm(Timer::T3, self.after_rto(now));
            return;
        }
        // §6.1 A: while the peer keeps answering zero window probes with SACKs, the
        // unacknowledged probes do not count against the association.
        let probing_live_peer = self.peer_rwnd == 0 && self.sack_since_t3;
        self.sack_since_t3 = false;
        if !probing_live_peer && self.count_error() {
            return;
        }
        // RFC 8899 §4.3: T3 again and again on a packet above BASE_PLPMTU is a black hole
        // (ICMP filtered on the path) more likely than loss: the path MTU falls to
        // BASE_PLPMTU, the chunks already sent larger go as IP fragments (§6.9), and a probe
        // confirms it.
        // The size lost is the packet's: E3 below retransmits the earliest chunks bundled as
        // many as fit, so small chunks make a full-size packet too (§6.10).
        // A peer answering zero window probes (§6.1 A) got them: no black hole, and the
        // expiries before this one are not in a row.
        if let Some(p) = self.plpmtud.as_mut().filter(|_| !probing_live_peer) {
            let base = p.base();
            let mut packet = HEADER_LEN;
            for seq in self.sq.outstanding_seqs() {
                let s = self.sq.slot(seq);
                if s.gap_acked {
                    continue;
                }
                let b = book(s.len);
                if packet > HEADER_LEN && packet + b > self.path.mtu {
                    break;
                }
                packet += b;
                if packet > base {
                    break;
                }
            }
            if p.on_t3(packet, self.cfg.assoc_max_retrans) {
                let before = self.path.mtu;
                self.path.mtu = p.plpmtu().clamp(config::MIN_PATH_MTU, before);
                self.path_mtu_moved(before);
            }
        } else if let Some(p) = self.plpmtud.as_mut() {
            p.on_ack();
        }
        // §6.3.3 E1: ssthresh = max(cwnd/2, 4 MTU), cwnd = 1 MTU.
        self.path.ssthresh = (self.path.cwnd / 2).max(4 * self.path.mtu);
        self.path.cwnd = self.path.mtu;
        self.path.partial_bytes_acked = 0;
        // §7.2.3: "ensure that no more than one SCTP packet will be in flight for that address
        // until the endpoint receives acknowledgement for successful delivery of data".
        self.path.t3_one_packet = self.cfg.one_packet_after_t3;
        // E2.
        self.path.rto.back_off();
        // E3: everything outstanding and not gap-acked is retransmitted.
        for seq in self.sq.outstanding_seqs() {
            let s = self.sq.slot_mut(seq);
            // A fast retransmission still waiting goes by E3's rules now (below).
            s.fast_rtx_due = false;
            if !s.gap_acked {
                s.in_flight = false;
                // Miss indications start afresh with the retransmission (usrsctp's reading;
                // RFC 9260 leaves it open): those counted belonged to the transmission T3
                // gave up on, and with them one more miss, of a retransmission barely sent,
                // fast-retransmitted it again at once.
                s.misses = 0;
                self.sq.set_rtx(seq, true);
            }
        }
        // §6.2.1 C: "Any time a DATA chunk is marked for retransmission, either via T3-rtx
        // timer expiration ... or via Fast Retransmit ..., add the data size of those chunks
        // to the rwnd." What was in flight is now marked; rule B takes it again as each goes
        // (a fast retransmission's SACK recomputes the window from the flight instead). The
        // window used to count it twice until the next SACK (an independent review).
        self.peer_rwnd = self.peer_rwnd.saturating_add(self.path.flight as u32);
        self.path.flight = 0;
        self.fast_recovery_exit = None;
        // What is marked now goes by E3's rules, within the 1-MTU cwnd: a fast retransmission
        // still waiting is one of them.
        self.pending.fast_rtx = false;
        self.timed = None;
        self.arm(Timer::T3, self.after_rto(now));
    }

    fn on_heartbeat_timer(&mut self, now: Instant) {
        if !matches!(
            self.state,
            State::Established | State::ShutdownPending | State::ShutdownReceived
        ) {
            return;
        }
        if self.path.hb_nonce.is_some() && !self.path.hb_overdue {
            // The last HEARTBEAT went unanswered for an RTO (§8.3: "increment the respective
            // error counter ... each time a HEARTBEAT is sent to that address and not
            // acknowledged within one RTO").
            if self.count_error() {
                return;
            }
            // The RTO just waited, with its jitter, is taken before the RTO backs off.
            self.redraw_hb_jitter();
            let waited = self.path.rto.rto();
            let jittered = self.hb_rto_jittered();
            self.path.rto.back_off();
            // §8.3: HEARTBEATs go "once per RTO ... plus ... HB.interval", the RTO backed off
            // when the last went unanswered: the next one waits HB.interval more, as a first
            // one does (arm_heartbeat), rather than following at once. Its nonce stays: a
            // late ACK still clears the error counter.
            if let Some(iv) = self.cfg.hb_interval {
                self.path.hb_overdue = true;
                // The waited RTO has passed; with the jitter (±RTO/2) the gap between the two
                // HEARTBEATs is HB.interval + RTO ± RTO/2, never less than now.
                let wait = (iv + jittered).saturating_sub(waited);
                self.arm(Timer::Heartbeat, now + wait);
                return;
            }
        }
        self.path.hb_overdue = false;
        self.path.hb_nonce = Some(self.prf.next_u64());
        self.path.hb_sent = None;
        self.redraw_hb_jitter();
        self.pending.heartbeat = true;
        self.arm(Timer::Heartbeat, self.after_rto(now));
    }

    // ------------------------------------------------------------------------------------
    // Transmit
    // ------------------------------------------------------------------------------------

    /// Writes the next packet to send into `buf` and returns its length (CRC32c filled), or
    /// `None` when there is nothing to send now. Call until `None`.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.n_holes = 0;
        let Some(len) = self.build(now, buf) else {
            self.end_transmit_opportunity();
            return None;
        };
        if self.tx_checksum_offload || self.n_holes > 0 {
            // RFC 9260 App. A: the checksum field is zero while the device computes it.
            buf[8..12].fill(0);
        } else {
            crc32c::fill(&mut buf[..len]);
        }
        self.stats.packets_out += 1;
        Some(len)
    }

    fn header(&self, vtag: u32) -> HeaderRepr {
        HeaderRepr {
            src_port: self.local_port,
            dst_port: self.peer_port,
            verification_tag: vtag,
        }
    }

    /// Packets that travel alone: ABORT, out-of-the-blue answers, SHUTDOWN COMPLETE,
    /// INIT ACK, INIT.
    fn build_lone(&mut self, buf: &mut [u8]) -> Option<usize> {
        if let Some(cause) = self.pending.abort.take() {
            return self.build_abort(buf, cause);
        }
        if let Some((tag, why)) = self.pending.init_abort.take() {
            let bytes = &self.pending.init_abort_bytes;
            let (cause, reported) = match why {
                InitRefusal::HostName => (
                    CauseRepr::UnresolvableAddress { address: bytes },
                    !bytes.is_empty(),
                ),
                InitRefusal::NewAddresses => (
                    CauseRepr::RestartWithNewAddresses { addresses: bytes },
                    !bytes.is_empty(),
                ),
                InitRefusal::InvalidMandatory => (CauseRepr::InvalidMandatoryParameter, true),
                InitRefusal::Adaptation => (
                    CauseRepr::UserInitiatedAbort {
                        reason: ADAPTATION_REASON.as_bytes(),
                    },
                    true,
                ),
            };
            let causes = [cause];
            let abort = ChunkRepr::Abort(AbortRepr {
                t_bit: false,
                causes: List::new(&causes[..usize::from(reported)]),
            });
            let mut b = PacketBuilder::new(buf, &self.header(tag)).ok()?;
            b.push(&abort).ok()?;
            return Some(b.packet_len());
        }
        if let Some(tag) = self.pending.missing_cookie.take() {
            let causes = [CauseRepr::MissingMandatoryParameter {
                params: List::new(&[ParamType::StateCookie]),
            }];
            let e = ChunkRepr::Error(ErrorChunkRepr {
                causes: List::new(&causes),
            });
            let mut b = PacketBuilder::new(buf, &self.header(tag)).ok()?;
            b.push(&e).ok()?;
            return Some(b.packet_len());
        }
        if let Some(tag) = self.pending.ootb_shutdown_complete.take() {
            let mut b = PacketBuilder::new(buf, &self.header(tag)).ok()?;
            b.push(&ChunkRepr::ShutdownComplete(ShutdownCompleteRepr {
                t_bit: true,
            }))
            .ok()?;
            return Some(b.packet_len());
        }
        if let Some((tag, staleness)) = self.pending.stale_cookie.take() {
            let causes = [CauseRepr::StaleCookie { staleness }];
            let e = ChunkRepr::Error(ErrorChunkRepr {
                causes: List::new(&causes),
            });
            let mut b = PacketBuilder::new(buf, &self.header(tag)).ok()?;
            b.push(&e).ok()?;
            return Some(b.packet_len());
        }
        if self.pending.shutdown_complete {
            self.pending.shutdown_complete = false;
            let mut b = PacketBuilder::new(buf, &self.header(self.peer_tag)).ok()?;
            b.push(&ChunkRepr::ShutdownComplete(ShutdownCompleteRepr {
                t_bit: false,
            }))
            .ok()?;
            return Some(b.packet_len());
        }
        if self.state == State::Closed {
            return None;
        }
        if let Some(ack) = self.pending_init_ack.take() {
            return self.build_init_ack(buf, &ack);
        }
        if self.pending.init && self.state == State::CookieWait {
            self.pending.init = false;
            // §5.2.6: after a Stale Cookie, the INIT suggests a longer cookie life-span.
            let params = [
                ParamRepr::AdaptationLayerIndication(self.cfg.adaptation_indication),
                ParamRepr::CookiePreservative(self.cookie_preservative.unwrap_or(0)),
            ];
            let n = 1 + usize::from(self.cookie_preservative.is_some());
            let init = InitRepr {
                initiate_tag: self.local_tag,
                a_rwnd: self.cfg.a_rwnd,
                outbound_streams: self.cfg.streams,
                inbound_streams: self.cfg.streams,
                initial_tsn: self.local_initial_tsn,
                params: List::new(&params[..n]),
            };
            let mut b = PacketBuilder::new(buf, &self.header(0)).ok()?;
            b.push(&ChunkRepr::Init(init)).ok()?;
            return Some(b.packet_len());
        }
        None
    }

    fn build(&mut self, now: Instant, full: &mut [u8]) -> Option<usize> {
        let limit = full.len().min(self.path.mtu);
        // A receiving core's usual turn, first and cheap: nothing is owed but perhaps a SACK,
        // and no DATA may go. The packet is a bare SACK (RFC 9260 §3.3.4, no gap blocks or
        // duplicates) or nothing, exactly as the general builder below would make it.
        if self.state == State::Established && self.owes_nothing_but_sack() {
            if !self.data_ready(false) {
                if !(self.ack_due.sack && self.ack_due.sack_now) {
                    return None;
                }
                // A fast path of `header_prediction`'s: without it the builder below writes
                // the same SACK, and a connection compared both ways compares the two.
                if self.cfg.header_prediction
                    && self.rx.span() == 0
                    && self.rx.dups().is_empty()
                    && limit >= HEADER_LEN + SACK_MIN_LEN
                {
                    return Some(self.write_bare_sack(full));
                }
            } else if self.cfg.header_prediction
                && !self.ack_due.sack
                && self.sq.first_rtx().is_none()
            {
                if let Some(n) = self.build_data_predicted(now, full, limit) {
                    self.stats.predicted_out += 1;
                    return Some(n);
                }
            }
        }
        if let Some(n) = self.build_lone(&mut full[..limit]) {
            return Some(n);
        }
        if self.state == State::Closed {
            return None;
        }
        if let Some(n) = self.build_oversized(now, full) {
            return Some(n);
        }
        let buf = &mut full[..limit];
        let mut b = PacketBuilder::new(buf, &self.header(self.peer_tag)).ok()?;
        let mut any = false;
        let mut cookie_packet = false;
        if self.pending.cookie_echo && self.state == State::CookieEchoed {
            let ce = ChunkRepr::CookieEcho(CookieEchoRepr {
                cookie: &self.peer_cookie,
            });
            if b.push(&ce).is_ok() {
                self.pending.cookie_echo = false;
                any = true;
                cookie_packet = true;
            }
        }
        if self.pending.cookie_ack && b.push(&ChunkRepr::CookieAck).is_ok() {
            self.pending.cookie_ack = false;
            any = true;
        }
        let data_next = self.data_ready(cookie_packet);
        // §7.2.4 step 3: a fast retransmission goes at once; a SACK that would leave no room
        // for it waits for the next packet.
        let crowds_rtx = self.pending.fast_rtx
            && self.sq.first_rtx().is_some_and(|q| {
                let n = self.gap_blocks();
                let sack = 16 + 4 * n + 4 * self.rx.dups().len();
                b.remaining() < sack + book(self.sq.slot(q).len)
            });
        if self.ack_due.sack && (self.ack_due.sack_now || data_next || any) && !crowds_rtx {
            any |= self.push_sack(&mut b);
        }
        // §5.1 C: until the COOKIE ACK comes, "the sender MUST NOT send any other packets to
        // the peer" than the COOKIE ECHO: a HEARTBEAT's ACK goes only beside it (or not at
        // all: the peer heartbeats again), an ERROR waits for it or for the COOKIE ACK. (The
        // answers to an INIT that §5.2.1 asks for are not this packet's.)
        let echoed_alone = self.state == State::CookieEchoed && !cookie_packet;
        if echoed_alone {
            while self.pending.hb_acks.front().is_some() {
                self.pending.hb_acks.pop_front();
            }
        }
        while let Some((info, extra)) = self.pending.hb_acks.front() {
            let ack = ChunkRepr::HeartbeatAck(HeartbeatAckRepr { info, extra });
            if b.push(&ack).is_ok() {
                any = true;
            } else if HEADER_LEN + ack.buffer_len() <= limit {
                // The next packet has room for it.
                break;
            }
            // Sent, or too big for any packet of ours now (the path MTU fell since the
            // HEARTBEAT came: §6.10, §8.3's SHOULD): not owed any more, so that it never holds
            // back the ACKs after it.
            self.pending.hb_acks.pop_front();
        }
        if self.pending.heartbeat {
            if let Some(nonce) = self.path.hb_nonce {
                let mut info = [0u8; HB_INFO_LEN];
                info[..8].copy_from_slice(&nonce.to_be_bytes());
                info[8..].copy_from_slice(&now.as_nanos().to_be_bytes());
                if b.push(&ChunkRepr::Heartbeat(HeartbeatRepr {
                    info: &info,
                    extra: &[],
                }))
                .is_ok()
                {
                    self.path.hb_sent = Some(now);
                    self.pending.heartbeat = false;
                    self.stats.heartbeats_out += 1;
                    any = true;
                }
            } else {
                self.pending.heartbeat = false;
            }
        }
        if !self.pending.error_bytes.is_empty() {
            // Only INIT may carry tag 0 (§8.5.1 A): reports made before the peer's tag is
            // known are dropped.
            if self.peer_tag == 0 {
                self.pending.error_bytes.clear();
            } else if !echoed_alone {
                // §3.2.2: an ERROR reporting an INIT ACK's parameters goes with the COOKIE
                // ECHO, or not before the COOKIE ACK; one that did not fit beside it is not
                // kept for the next packet.
                any |= self.push_error(&mut b, limit, any && !cookie_packet);
            }
        }
        if self.pending.shutdown && self.state == State::ShutdownSent {
            let s = ChunkRepr::Shutdown(ShutdownRepr {
                cum_tsn_ack: self.rx.cum_tsn(),
            });
            if b.push(&s).is_ok() {
                self.pending.shutdown = false;
                any = true;
            }
        } else {
            self.pending.shutdown = false;
        }
        if self.pending.shutdown_ack && self.state == State::ShutdownAckSent {
            if b.push(&ChunkRepr::ShutdownAck).is_ok() {
                self.pending.shutdown_ack = false;
                any = true;
            }
        } else {
            self.pending.shutdown_ack = false;
        }
        if data_next {
            any |= self.push_data(now, &mut b, cookie_packet);
        }
        if any {
            Some(b.packet_len())
        } else {
            None
        }
    }

    /// A bulk sender's every packet: new DATA and nothing else, not even a SACK, with no
    /// retransmission waiting (the caller checked that much). Built as `build` below would
    /// build it, without its walk over every kind of chunk it might owe (none, here): the
    /// send-side half of header prediction. Where the packet is the next message's one DATA
    /// chunk (a bulk sender's every packet: its segment fills the packet, or nothing follows
    /// it), the chunk is written here directly, without the packet builder and
    /// [`Association::push_data`]'s loop; where another message would be bundled beside it
    /// (§6.10), `push_data` builds it. `None` where `build` would go another way (a message
    /// larger than a packet, `build_oversized`) or send nothing.
    fn build_data_predicted(
        &mut self,
        now: Instant,
        full: &mut [u8],
        limit: usize,
    ) -> Option<usize> {
        let seq = self.sq.next_unsent()?;
        if self.path.flight == 0 {
            self.decay_idle_cwnd(now);
        }
        let s = *self.sq.slot(seq);
        let size = book(s.len);
        if HEADER_LEN + size > self.path.mtu {
            return None;
        }
        let end = HEADER_LEN + size;
        let bundles =
            !self.sq.is_last(seq) && end + DATA_HEADER_LEN + self.sq.slot(seq + 1).len <= limit;
        if bundles || end > limit {
            let mut b = PacketBuilder::new(&mut full[..limit], &self.header(self.peer_tag)).ok()?;
            return self.push_data(now, &mut b, false).then(|| b.packet_len());
        }
        // data_ready said the windows take this message (§6.1 A: the peer's; B: cwnd):
        // push_data's first iteration, which would send it, and whose next one would stop for
        // want of room.
        self.header(self.peer_tag).emit(&mut full[..HEADER_LEN]);
        let tail = s.ext.map_or(0, |e| e.len as usize);
        let d = first_chunk(
            &self.sq,
            seq,
            &s,
            self.next_tsn,
            self.cfg.immediate_sack_when_idle,
        );
        d.emit_with_tail(&mut full[HEADER_LEN..end], tail);
        if let Some(ext) = s.ext {
            self.holes[0] = Hole {
                at: HEADER_LEN + d.chunk_len(),
                ext,
            };
            self.n_holes = 1;
        }
        self.new_data_sent(now, seq, &s);
        self.new_data_burst(now);
        Some(end)
    }

    /// The next DATA chunk to go (the oldest marked for retransmission, else the next new
    /// one) if sending is allowed now, with its sequence number.
    fn next_data(&self) -> Option<u64> {
        if !matches!(
            self.state,
            State::Established | State::ShutdownPending | State::ShutdownReceived
        ) {
            return None;
        }
        if let Some(seq) = self.sq.first_rtx() {
            return (self.pending.fast_rtx || self.path.window_open()).then_some(seq);
        }
        let seq = self.sq.next_unsent()?;
        let size = book(self.sq.slot(seq).len);
        (self.burst_budget > 0
            && self.path.window_open()
            && (size <= self.peer_rwnd as usize || self.sq.outstanding() == 0))
            .then_some(seq)
    }

    /// A message queued before the path MTU dropped can be larger than a packet now. It goes
    /// alone, in a packet above the path MTU that IP fragments: RFC 5043 §9 allows IP
    /// fragmentation where SCTP's would be the alternative, and the queue must not stall
    /// behind it. It goes, as a packet within the MTU does, only while the flight is below
    /// cwnd, so §6.1 B's MUSTs hold (nothing new with cwnd + PMTU - 1 or more outstanding; one
    /// packet the breach): a bound of cwnd + PMTU - 1 on the flight it makes (session 74's
    /// review) was tried and dropped, as one message in flight below cwnd never grew it and
    /// such a backlog drained at one message a round trip and a delayed SACK (another review).
    fn build_oversized(&mut self, now: Instant, full: &mut [u8]) -> Option<usize> {
        let seq = self.next_data()?;
        let size = HEADER_LEN + book(self.sq.slot(seq).len);
        if size <= self.path.mtu || size > full.len() {
            return None;
        }
        let mut b = PacketBuilder::new(&mut full[..size], &self.header(self.peer_tag)).ok()?;
        self.push_data(now, &mut b, false).then(|| b.packet_len())
    }

    /// Whether DATA can go in the next packet (retransmissions or new data, §6.1). Inline: the
    /// receive path asks it after every packet (`owes_nothing`), and the compiler stopped
    /// inlining it there when the chunk handlers grew (HEARTBEAT ACKs and ERRORs of a path
    /// MTU): a call per packet. With this, `owe_heartbeat_ack` and `queue_cause` out of line,
    /// benches/callgrind-stages.sh counts 943 instructions a 64-byte segment and 2348 a
    /// 1438-byte one, against 972 and 2376 before those grew (960 and 2365 with this alone).
    #[inline]
    fn data_ready(&self, cookie_packet: bool) -> bool {
        let open = match self.state {
            State::Established | State::ShutdownPending | State::ShutdownReceived => true,
            State::CookieEchoed => cookie_packet && self.pending.data_with_cookie,
            _ => false,
        };
        if !open {
            return false;
        }
        if self.sq.has_rtx() && (self.pending.fast_rtx || self.path.window_open()) {
            return true;
        }
        if let Some(seq) = self.sq.next_unsent() {
            let size = book(self.sq.slot(seq).len);
            return self.burst_budget > 0
                && self.path.window_open()
                && (size <= self.peer_rwnd as usize || self.sq.outstanding() == 0);
        }
        false
    }

    /// The a_rwnd a SACK tells: the least of the TSN map's share (`map_share`) and the layer
    /// above's room, less the fragments held for reassembly (§6.2 lets a_rwnd fall).
    fn advertised_rwnd(&self) -> u32 {
        // Fragments held for reassembly take receive buffer until their message is whole.
        self.map_share()
            .min(self.rx_room)
            .saturating_sub(u32::try_from(self.reasm.held()).unwrap_or(u32::MAX))
    }

    /// The TSN map's share of a_rwnd: all of it until the TSNs recorded above the cumulative
    /// point fill half the map, then shrinking to 0 as the map fills.
    fn map_share(&self) -> u32 {
        let (span, window) = (self.rx.span(), self.rx.window());
        if span <= window / 2 {
            self.cfg.a_rwnd
        } else {
            let left = window.saturating_sub(span) as u64;
            (u64::from(self.cfg.a_rwnd) * left / (window as u64 / 2)) as u32
        }
    }

    /// Whether nothing but a SACK is owed: no handshake or teardown chunk, no HEARTBEAT or
    /// its ACK, no ERROR, no ABORT, no fast retransmission.
    fn owes_nothing_but_sack(&self) -> bool {
        // Every field named (no `..`): a chunk added to `Pending` must be weighed here, or the
        // short path of `build` would never send it.
        let Pending {
            init,
            cookie_echo,
            data_with_cookie: _,
            cookie_ack,
            shutdown,
            shutdown_ack,
            shutdown_complete,
            heartbeat,
            hb_acks,
            abort,
            error_bytes,
            fast_rtx,
            ootb_shutdown_complete,
            stale_cookie,
            init_abort,
            init_abort_bytes: _,
            missing_cookie,
        } = &self.pending;
        !(*init
            || *cookie_echo
            || *cookie_ack
            || *shutdown
            || *shutdown_ack
            || *shutdown_complete
            || *heartbeat
            || *fast_rtx)
            && hb_acks.is_empty()
            && abort.is_none()
            && error_bytes.is_empty()
            && ootb_shutdown_complete.is_none()
            && stale_cookie.is_none()
            && init_abort.is_none()
            && missing_cookie.is_none()
            && self.pending_init_ack.is_none()
    }

    /// Writes a packet of one SACK without gap blocks or duplicate TSNs into `buf` (at least
    /// 28 bytes), checksum zero; returns its length. The bytes [`PacketBuilder`] would write
    /// for the same SACK, without its generality.
    fn write_bare_sack(&mut self, buf: &mut [u8]) -> usize {
        let a_rwnd = self.advertised_rwnd();
        let len = HEADER_LEN + SACK_MIN_LEN;
        let p = &mut buf[..len];
        p[0..2].copy_from_slice(&self.local_port.to_be_bytes());
        p[2..4].copy_from_slice(&self.peer_port.to_be_bytes());
        p[4..8].copy_from_slice(&self.peer_tag.to_be_bytes());
        p[8..12].fill(0);
        p[12] = u8::from(ChunkType::Sack);
        p[13] = 0;
        p[14..16].copy_from_slice(&(SACK_MIN_LEN as u16).to_be_bytes());
        p[16..20].copy_from_slice(&self.rx.cum_tsn().to_be_bytes());
        p[20..24].copy_from_slice(&a_rwnd.to_be_bytes());
        // Number of gap ack blocks, number of duplicate TSNs.
        p[24..28].fill(0);
        self.sack_sent(a_rwnd);
        len
    }

    /// Bookkeeping once a SACK advertising `a_rwnd` is in a packet.
    fn sack_sent(&mut self, a_rwnd: u32) {
        self.rx.clear_dups();
        self.rwnd_told = a_rwnd;
        self.bytes_in_told = self.stats.bytes_in;
        self.ack_due.sack = false;
        self.ack_due.sack_now = false;
        self.ack_due.data_packets = 0;
        self.stop(Timer::Sack);
        self.stats.sacks_out += 1;
    }

    fn push_sack(&mut self, b: &mut PacketBuilder<'_>) -> bool {
        let n = self.gap_blocks();
        let a_rwnd = self.advertised_rwnd();
        let sack = ChunkRepr::Sack(SackRepr {
            cum_tsn_ack: self.rx.cum_tsn(),
            a_rwnd,
            gap_ack_blocks: List::new(&self.gaps[..n]),
            dup_tsns: List::new(self.rx.dups()),
        });
        if b.push(&sack).is_err() {
            return false;
        }
        self.sack_sent(a_rwnd);
        true
    }

    /// Pushes the ERROR owed; whether it went. One that does not fit this packet waits for
    /// the next if `keep` (this packet holds other chunks) and a packet of `limit` bytes holds
    /// it; otherwise it is not sent (`queue_cause` says why that is allowed).
    fn push_error(&mut self, b: &mut PacketBuilder<'_>, limit: usize, keep: bool) -> bool {
        // The causes were written by `queue_cause`, so they parse; the check is a walk of the
        // causes, on this rare path only, and keeps a mistake from becoming a panic.
        let Ok(causes) = List::parse(&self.pending.error_bytes) else {
            self.pending.error_bytes.clear();
            return false;
        };
        let e = ChunkRepr::Error(ErrorChunkRepr { causes });
        if b.push(&e).is_ok() {
            self.pending.error_bytes.clear();
            return true;
        }
        if !(keep && HEADER_LEN + e.buffer_len() <= limit) {
            self.pending.error_bytes.clear();
        }
        false
    }

    fn push_data(&mut self, now: Instant, b: &mut PacketBuilder<'_>, cookie_packet: bool) -> bool {
        let mut any = false;
        // §7.2.3: after T3-rtx one packet (E3's, as many chunks as it holds) until DATA is
        // acknowledged. Asked once a packet: its first chunk makes the flight non-zero.
        let after_t3 = self.path.t3_one_packet && self.path.flight > 0;
        // Retransmissions first, oldest first (§6.3.3 E3, §7.2.4 step 3).
        let fast = self.pending.fast_rtx;
        let from = self
            .sq
            .first_rtx()
            .unwrap_or(self.sq.outstanding_seqs().end);
        for seq in from..self.sq.outstanding_seqs().end {
            let s = *self.sq.slot(seq);
            if !s.rtx {
                continue;
            }
            if !fast && (after_t3 || self.path.flight >= self.path.cwnd) {
                break;
            }
            let d = DataRepr {
                immediate: false,
                unordered: true,
                beginning: true,
                ending: true,
                tsn: s.tsn,
                stream_id: s.stream,
                ssn: 0,
                ppid: s.ppid,
                user_data: self.sq.payload(seq),
            };
            if !push_chunk(b, &d, s.ext, &mut self.holes, &mut self.n_holes) {
                break;
            }
            self.sq.set_rtx(seq, false);
            let slot = self.sq.slot_mut(seq);
            slot.in_flight = true;
            slot.fast_rtx_due = false;
            slot.tx_count += 1;
            slot.sent_at = now;
            self.path.flight += book(s.len);
            // Marked by Fast Retransmit (§7.2.4) whether it goes on the leave or as cwnd
            // allows; T3-rtx clears the mark of what it takes over (§6.3.3).
            if s.fast_rtx_due {
                self.stats.fast_retransmits += 1;
                self.sq.slot_mut(seq).window_probe = false;
            } else {
                self.stats.t3_retransmits += 1;
                // §6.1 A: T3 (and a probe's recovery) sends whatever the window, so into a
                // window that cannot hold it the chunk is a window probe, recovered by the
                // update that holds it. It was one only if first sent so: a chunk the peer
                // dropped as its window closed went again at each backed-off T3, and after
                // the window opened waited for the next (up to RTO.Max). Not a fast
                // retransmission: the peer takes those below its highest TSN whatever its
                // window. The peer's last window against the chunk alone, as a new probe
                // (sent with nothing outstanding) is: counting the flight, the chunks a T3
                // packet crowded out were marked, and any growth of the window resent them
                // while the flight could still be carrying them (a review). Not `peer_rwnd`,
                // which T3 raised by the whole flight it gave back (§6.2.1 C).
                let probe = book(s.len) > self.peer_a_rwnd as usize;
                let slot = self.sq.slot_mut(seq);
                slot.window_probe = probe;
                if probe {
                    self.note_window_probe(seq);
                }
            }
            // §6.2.1 B: "Any time a DATA chunk is transmitted (or retransmitted) to a peer, the
            // endpoint subtracts the data size of the chunk from the rwnd of that peer." The
            // SACK that marked it gave its room back (rule C counts only what is in flight).
            self.peer_rwnd = self.peer_rwnd.saturating_sub(book(s.len) as u32);
            any = true;
            // §7.2.4 step 4 / §6.3.2 R4: restart T3 when the earliest outstanding TSN goes
            // again, start it if it is not running.
            if seq == self.sq.outstanding_seqs().start || !self.running(Timer::T3) {
                self.arm(Timer::T3, self.after_rto(now));
            }
        }
        if any {
            self.path.last_data_at = now;
            self.pending.fast_rtx = false;
            // A packet with retransmissions carries no new data (keeps the cwnd rules simple
            // and the retransmission small, §7.2.4 step 3).
            return true;
        }
        // §6.1 C: "before sending new DATA chunks, the sender MUST first transmit any
        // outstanding DATA chunks that are marked for retransmission (limited by the current
        // cwnd)". One that did not fit this packet (behind its control chunks) or the cwnd
        // goes first in a later one; new data used to slip past it (an independent review).
        if self.sq.has_rtx() {
            return false;
        }
        // New data.
        if self.path.flight == 0 {
            self.decay_idle_cwnd(now);
        }
        // §6.1 B: "the sender SHOULD exceed cwnd by up to (PMTU-1) bytes on a new data
        // transmission if the flightsize does not currently reach cwnd. The breach of cwnd
        // MUST constitute one packet only": decided once for the packet, which then holds as
        // many chunks as fit. Asked before each chunk, the packet that crossed cwnd stopped at
        // its first chunk past it: small messages went two to that packet where eighteen fit
        // (an independent review).
        if after_t3 || self.path.flight >= self.path.cwnd {
            return false;
        }
        let mut sent_new = false;
        while let Some(seq) = self.sq.next_unsent() {
            let s = *self.sq.slot(seq);
            let size = book(s.len);
            // §6.1 A: a message the peer's window cannot take goes only as a zero window
            // probe, "when all outstanding DATA chunks have been cumulatively acknowledged and
            // no DATA chunks are in flight": with nothing in flight but chunks gap-acked, a
            // peer that kept its window at 0 was sent one new chunk per SACK.
            if size > self.peer_rwnd as usize && self.sq.outstanding() > 0 {
                break;
            }
            if cookie_packet && !self.pending.data_with_cookie {
                break;
            }
            // The packet is full for this message (a bulk sender's every packet ends here,
            // its one segment filling it): no chunk to build and refuse.
            if DATA_HEADER_LEN + s.len > b.remaining() {
                break;
            }
            let d = first_chunk(
                &self.sq,
                seq,
                &s,
                self.next_tsn,
                self.cfg.immediate_sack_when_idle,
            );
            if !push_chunk(b, &d, s.ext, &mut self.holes, &mut self.n_holes) {
                break;
            }
            self.new_data_sent(now, seq, &s);
            sent_new = true;
        }
        if cookie_packet {
            self.pending.data_with_cookie = false;
        }
        if sent_new {
            self.new_data_burst(now);
        }
        sent_new
    }

    /// New DATA is about to go on a path with nothing in flight: the congestion window forgets
    /// what it learnt while the path was idle. §7.2.1: "When the endpoint does not transmit
    /// data on a given transport address, the cwnd of the transport address SHOULD be adjusted
    /// to max(cwnd/2, 4*MTU) per RTO", and it "MUST be set to" the initial cwnd "after a
    /// sufficiently long idle period": here, once the halving has reached its floor. Done when
    /// the path is next used, as if done per RTO meanwhile. A cwnd already below the floor
    /// (after a T3 expiry, say) is set to the initial one too (max(cwnd/2, 4*MTU) raises it;
    /// TCP's restart window, min(IW, cwnd), kept it small: an independent review).
    fn decay_idle_cwnd(&mut self, now: Instant) {
        let rto = self.path.rto.rto().as_nanos().max(1);
        let idle = now.saturating_since(self.path.last_data_at).as_nanos();
        if idle < rto || self.path.last_data_at == Instant::ZERO {
            return;
        }
        let halvings = (idle / rto).min(63) as u32;
        let floor = 4 * self.path.mtu;
        let decayed = (self.path.cwnd >> halvings).max(floor);
        let cwnd = if decayed == floor {
            initial_cwnd(self.path.mtu)
        } else {
            decayed
        };
        self.path.cwnd = cwnd;
        self.path.partial_bytes_acked = 0;
        // One decay per idle period.
        self.path.last_data_at = now;
    }

    /// Message `seq` (slot `s`) went in a packet for the first time, with the next TSN.
    #[inline(always)]
    fn new_data_sent(&mut self, now: Instant, seq: u64, s: &Slot) {
        let size = book(s.len);
        let tsn = self.next_tsn;
        self.next_tsn = tsn.wrapping_add(1);
        let slot = self.sq.slot_mut(seq);
        slot.tsn = tsn;
        slot.tx_count = 1;
        slot.sent_at = now;
        slot.in_flight = true;
        slot.window_probe = size > self.peer_rwnd as usize;
        if slot.window_probe {
            self.note_window_probe(seq);
        }
        self.sq.mark_sent();
        self.path.flight += size;
        self.peer_rwnd = self.peer_rwnd.saturating_sub(size as u32);
        self.stats.data_out += 1;
        self.stats.bytes_out += s.len as u64;
        if self.timed.is_none() {
            self.timed = Some((tsn, now));
        }
    }

    /// A packet with new DATA went: one of Max.Burst's packets (§6.1 D), T3-rtx running
    /// (§6.3.2 R1), and the path not idle (§8.3: the heartbeat pushed back).
    #[inline(always)]
    fn new_data_burst(&mut self, now: Instant) {
        self.burst_budget = self.burst_budget.saturating_sub(1);
        self.path.last_data_at = now;
        if !self.running(Timer::T3) {
            self.arm(Timer::T3, self.after_rto(now));
        }
        if self.path.hb_nonce.is_none() {
            self.arm_heartbeat(now);
        }
    }

    fn build_abort(&mut self, buf: &mut [u8], cause: AbortCause) -> Option<usize> {
        let c = match cause {
            AbortCause::Timeout => None,
            AbortCause::User => Some(CauseRepr::UserInitiatedAbort { reason: &[] }),
            AbortCause::Adaptation => Some(CauseRepr::UserInitiatedAbort {
                reason: ADAPTATION_REASON.as_bytes(),
            }),
            AbortCause::Violation(info) => Some(CauseRepr::ProtocolViolation {
                info: info.as_bytes(),
            }),
            AbortCause::NoUserData(tsn) => Some(CauseRepr::NoUserData { tsn }),
            AbortCause::InvalidMandatory => Some(CauseRepr::InvalidMandatoryParameter),
            AbortCause::Unresolvable => (!self.pending.init_abort_bytes.is_empty()).then_some(
                CauseRepr::UnresolvableAddress {
                    address: &self.pending.init_abort_bytes,
                },
            ),
        };
        let causes = [c.unwrap_or(CauseRepr::OutOfResource)];
        let abort = ChunkRepr::Abort(AbortRepr {
            t_bit: false,
            causes: List::new(&causes[..usize::from(c.is_some())]),
        });
        let mut b = PacketBuilder::new(buf, &self.header(self.peer_tag)).ok()?;
        b.push(&abort).ok()?;
        Some(b.packet_len())
    }

    fn build_init_ack(&mut self, buf: &mut [u8], ack: &PendingInitAck) -> Option<usize> {
        // The parameters were written for a packet of the path MTU (`on_init`); if it fell
        // since, the reports at the end that no longer fit are left out, whole (§6.10).
        let end = whole_params_within(&self.init_ack_params, endpoint::init_ack_room(buf.len()));
        let params = self.init_ack_params.get(..end)?;
        let init_ack = InitAckRepr(InitRepr {
            initiate_tag: ack.local_tag,
            a_rwnd: self.cfg.a_rwnd,
            outbound_streams: self.cfg.streams,
            inbound_streams: self.cfg.streams,
            initial_tsn: ack.local_tsn,
            params: List::parse(params).ok()?,
        });
        // Not even the cookie fits: no INIT ACK (as when the packet cannot hold it).
        init_ack.state_cookie()?;
        let mut b = PacketBuilder::new(buf, &self.header(ack.peer_tag)).ok()?;
        b.push(&ChunkRepr::InitAck(init_ack)).ok()?;
        Some(b.packet_len())
    }
}

/// What to do with the rest of a packet after a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
    /// Stop, and the chunk did not authenticate the packet (a COOKIE ECHO refused).
    Refused(Discard),
}

const ORDERED_DATA: &str = "ordered DATA on a DDP association (RFC 5043 §10)";
const TINY_FRAGMENT: &str =
    "a DATA fragment but a message's last under 256 bytes (RFC 5043 §9, RFC 9260 §6.9)";
const SACK_OF_UNSENT: &str = "SACK acknowledging a TSN not sent (RFC 9260 §12.4)";
const SHUTDOWN_OF_UNSENT: &str = "SHUTDOWN acknowledging a TSN not sent (RFC 9260 §9.2, §12.4)";
/// The reason carried in the ABORT that refuses a peer without DDP's adaptation indication.
pub const ADAPTATION_REASON: &str =
    "RFC 5043 §11.1: DDP requires Adaptation Layer Indication 0x00000001";

/// An INIT ACK an association owes (§5.2.1, §5.2.2); its parameters, the State Cookie among
/// them, are in `Association::init_ack_params`.
#[derive(Debug, Clone, Copy)]
struct PendingInitAck {
    peer_tag: u32,
    local_tag: u32,
    local_tsn: u32,
}

/// The length of the longest run of whole parameters (each padded, §3.2) at the start of
/// `params` that takes at most `room` bytes.
fn whole_params_within(params: &[u8], room: usize) -> usize {
    let mut end = 0;
    while let Some(h) = params.get(end + 2..end + 4) {
        let len = usize::from(u16::from_be_bytes([h[0], h[1]]));
        let padded = len.next_multiple_of(4);
        if len < 4 || end + padded > room.min(params.len()) {
            break;
        }
        end += padded;
    }
    end
}

/// The big-endian 16-bit field at `at` of a packet whose length the caller checked (header
/// prediction reads fixed offsets).
#[inline(always)]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// As [`be16`], 32 bits.
#[inline(always)]
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The gap ack blocks of a SACK, checked: blocks that are empty, reversed or out of order are
/// ignored (they acknowledge nothing).
#[derive(Debug, Clone, Copy)]
pub(super) struct GapAcks<'a> {
    blocks: List<'a, GapAckBlock>,
}

impl<'a> GapAcks<'a> {
    /// The blocks as (start, end) offsets, keeping only those that are non-empty, start above
    /// the cumulative TSN and lie above the previous block (§3.3.4: blocks are in order and
    /// do not overlap); a peer's malformed block acknowledges nothing.
    fn valid(&self) -> impl Iterator<Item = (u16, u16)> + 'a {
        let mut prev_end = 0u16;
        self.blocks.iter().filter_map(move |g| {
            if g.start == 0 || g.start > g.end || g.start <= prev_end {
                return None;
            }
            prev_end = g.end;
            Some((g.start, g.end))
        })
    }
}
