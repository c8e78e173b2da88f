//! The endpoint in the product's shape: data cores that own associations and run the whole
//! per-packet path, and a control thread that sets associations up and manages memory.
//!
//! ```text
//!  RX queue k ─► DataCore k: rx_burst → Interface (ARP/ND answered) → steer
//!                  ├─ owned by core j ≠ k ───────────────► dispatch ring of core j
//!                  ├─ owned here → Connection: CRC32c, SCTP, DDP check → place → deliver
//!                  └─ no association (INIT, COOKIE ECHO, OOTB) ──► packet ring ─► Control
//!  Control (TX queue `cores`): INIT → INIT ACK; COOKIE ECHO → Connection → Command::Adopt
//!           to its owner; connect(); STag register/revoke (every core acknowledges);
//!           ULP operations → Command::Op; events ◄── event rings ◄── cores
//! ```
//!
//! **Ownership and steering.** An association belongs to the core its SCTP 5-tuple hashes to
//! ([`Steering`]: Toeplitz with the common RSS key, then a 128-entry redirection table filled
//! round-robin, which is how a NIC with SCTP RSS spreads the same packets over its RX queues).
//! A core that receives a packet for another core's association moves the buffer to that core's
//! dispatch ring (virtual devices have no RSS; with a NIC that has it, the ring stays empty).
//!
//! **Rings and back-pressure.** Every ring and queue is bounded. A data core never waits on
//! the control thread: when the packet ring is full the packet is dropped and counted (the
//! peer retransmits its INIT or COOKIE ECHO); when an event ring is full the core keeps the
//! event and stops taking more from its connections until the next poll. What a connection
//! owes the ULP meanwhile is part of its receive buffer, so its SACKs advertise less (RFC 9260
//! §6.2) and DATA beyond it is dropped unacknowledged: a stalled ULP stops the peer instead of
//! growing the core's memory, and no completion or indication is ever lost. With
//! [`MAX_HELD_UPCALLS`] held back the core stops taking commands too. Commands to a core wait
//! in the control thread's outbox, bounded too: a full outbox refuses the ULP's operation
//! ([`RuntimeError::Busy`]).
//!
//! **Memory.** The control thread owns [`Memory`]; each core holds a replica of the STag table
//! ([`CoreStags`]) and a snapshot of the regions ([`RegionTable`], refreshed with the replica; a
//! freed region's slot is reused under a new generation). A deregistration returns only
//! after every core has acknowledged it (RFC 5041 §8.3.1 item 6), so the cores must be polling.
//!
//! **Sessions.** A DDP Stream Session Control message (PPID 17) goes to the control thread with
//! its stream's RFC 5043 §6 machine ([`SessionCall`]), which runs it there and sends the
//! session back. Meanwhile only that stream waits: its later chunks and the ULP's operations
//! on it are held in the connection, in arrival order, and applied when the session is back
//! (so the machine judges the stream's chunks in one sequence, §6.1); the association's other
//! streams, SACKs and heartbeats go on. Session events come up as [`Event::Indication`]s and
//! the ULP's Initiate / Accept / Reject / Terminate go down as [`Op`]s.

use ddpdk_dataplane::channel::{self, Receiver, Sender, TrySendError};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::Duration;

use ddpdk_dataplane::mem::{CoreStags, Revocation};
use ddpdk_dataplane::net::{Interface, InterfaceStats, Rx, TooBig};
use ddpdk_dataplane::port::region::PlacementBatch;
use ddpdk_dataplane::port::{
    prefetch, ChecksumOffload, FlowRule, PacketBuf, Port, RxWaiter, SctpFlow, Woken,
};
use ddpdk_dataplane::sctp::{plpmtud, Association, Endpoint, Instant};
use ddpdk_dataplane::trace;

pub use crate::clock::Clock;
pub use crate::conn::Op;
use crate::conn::{
    Accept, Applied, Completion, ConnConfig, ConnStats, Connection, Indication, Listener,
    PostError, ReceiveErrorCounts, SessionCall,
};
use crate::memory::{Memory, Place, RegionId, RegionTable, SharedRegions};
use crate::quiet::Quiet;
use crate::session::{Event as SessionEvent, LocalError, PendingLimit, State};
use crate::xmit::{Tap, Tx, TxStats, BURST, STOCK};

/// Connections a data core holds at most; closed ones are reclaimed first.
pub const MAX_CONNECTIONS_PER_CORE: usize = 256;
/// Entries in the redirection table [`Steering`] models.
pub const RETA_SIZE: usize = 128;
/// The RSS key most NICs and DPDK's examples use (Microsoft's RSS verification suite), so a
/// NIC programmed with it and a round-robin RETA agrees with [`Steering`]. Public: the
/// product draws its own at start ([`RuntimeConfig::rss_key`]); this one is the default of
/// tests and of library users who leave it.
pub const RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// The Toeplitz hash of `input` under `key` (the RSS hash function).
pub fn toeplitz(key: &[u8; 40], input: &[u8]) -> u32 {
    let mut hash = 0u32;
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    let mut next = 32usize;
    for &byte in input {
        for bit in (0..8).rev() {
            if byte >> bit & 1 == 1 {
                hash ^= window;
            }
            let k = key.get(next / 8).map_or(0, |b| b >> (7 - next % 8) & 1);
            window = window << 1 | u32::from(k);
            next += 1;
        }
    }
    hash
}

/// Which data core owns an association: the RSS hash of its 5-tuple as the peer's packets
/// carry it (source = peer), through a round-robin redirection table.
#[derive(Debug, Clone, Copy)]
pub struct Steering {
    cores: usize,
    reta_size: usize,
    key: [u8; 40],
}

impl Steering {
    /// `cores` data cores behind a [`RETA_SIZE`]-entry table.
    pub fn new(cores: usize) -> Steering {
        Steering::with_reta(cores, RETA_SIZE)
    }

    /// As the device's table of `reta_size` entries holding queue `i % cores` at entry `i`.
    pub fn with_reta(cores: usize, reta_size: usize) -> Steering {
        Steering {
            cores: cores.max(1),
            reta_size: reta_size.max(1),
            key: RSS_KEY,
        }
    }

    /// The same, hashing under `key` (the device's RSS key, when it steers).
    pub fn with_key(self, key: [u8; 40]) -> Steering {
        Steering { key, ..self }
    }

    pub fn owner(&self, peer: IpAddr, local: IpAddr, peer_port: u16, local_port: u16) -> usize {
        if self.cores == 1 {
            return 0;
        }
        let mut input = [0u8; 36];
        let n = match (peer, local) {
            (IpAddr::V4(p), IpAddr::V4(l)) => {
                input[..4].copy_from_slice(&p.octets());
                input[4..8].copy_from_slice(&l.octets());
                8
            }
            (p, l) => {
                input[..16].copy_from_slice(&v6(p).octets());
                input[16..32].copy_from_slice(&v6(l).octets());
                32
            }
        };
        input[n..n + 2].copy_from_slice(&peer_port.to_be_bytes());
        input[n + 2..n + 4].copy_from_slice(&local_port.to_be_bytes());
        let hash = toeplitz(&self.key, &input[..n + 4]);
        (hash as usize % self.reta_size) % self.cores
    }
}

fn v6(a: IpAddr) -> std::net::Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// A connection's name across the runtime (the control thread assigns it; events carry it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnHandle(pub u64);

impl std::fmt::Display for ConnHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What the ULP hears from the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A peer's COOKIE ECHO made a connection; it went to `core`.
    Accepted {
        conn: ConnHandle,
        peer: IpAddr,
        peer_port: u16,
        core: usize,
    },
    Indication {
        conn: ConnHandle,
        indication: Indication,
    },
    Completion {
        conn: ConnHandle,
        completion: Completion,
    },
    /// A receive buffer ([`Op::PostRecv`]) is posted: from now on the core can place into it,
    /// so the ULP may grant the peer credit for it.
    Posted {
        conn: ConnHandle,
        stream: u16,
        qn: u32,
        wr_id: u64,
    },
    /// An [`Op`] the connection refused; nothing changed.
    Refused {
        conn: ConnHandle,
        op: &'static str,
        /// The stream it was for, if any: a work request's number is the ULP's and is unique
        /// only within its stream (two queue pairs may both post a `wr_id` 1).
        stream: Option<u16>,
        /// The work request it would have posted, if any.
        wr_id: Option<u64>,
        error: PostError,
    },
    /// An [`Op`] for a connection its core no longer holds (closed, and its slot given to
    /// another association; or never adopted, its core full); nothing was done. Its stream
    /// and work request, if any, as [`Event::Refused`] names them: a ULP that numbers its
    /// work per stream (verbs) completes that work request from it.
    Unknown {
        conn: ConnHandle,
        op: &'static str,
        stream: Option<u16>,
        wr_id: Option<u64>,
    },
    /// A core's answer to [`Control::request_reports`].
    Report(Box<CoreReport>),
}

/// Why the runtime refused a call. Nothing changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeError {
    /// No such connection (never made, or forgotten).
    NoSuchConnection,
    /// The owning core's command ring and the outbox in front of it are full: retry after
    /// [`Control::poll`].
    Busy,
    /// We have no address of the peer's family.
    NoAddress,
    /// An association to that peer address and port exists already (this one, in any state
    /// but closed): RFC 9260 allows at most one between two endpoints (§1.5.2, §5.2).
    Exists(ConnHandle),
    /// The port has fewer queues than the cores need (RX: one per core; TX: one per core and
    /// one for the control thread).
    Queues { rx: u16, tx: u16, cores: usize },
    /// An address no peer can have on a link (unspecified, loopback, multicast, broadcast),
    /// or one of ours: an association to it could never come up.
    NotAPeer(IpAddr, &'static str),
}

impl std::fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuntimeError::NoSuchConnection => f.write_str("no such connection"),
            RuntimeError::Busy => f.write_str("the owning core's command ring is full"),
            RuntimeError::NoAddress => f.write_str("no local address of the peer's family"),
            RuntimeError::Exists(c) => write!(
                f,
                "association {c} to that peer and port exists already (RFC 9260: one association \
                 between two endpoints)"
            ),
            RuntimeError::NotAPeer(a, why) => write!(f, "{a} cannot be a peer: {why}"),
            RuntimeError::Queues { rx, tx, cores } => write!(
                f,
                "{cores} data cores need {cores} RX and {} TX queues; the port has {rx} and {tx}",
                cores + 1
            ),
        }
    }
}

impl std::error::Error for RuntimeError {}

/// Sizes of the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Data cores: core k polls RX queue k and sends on TX queue k; the control thread sends
    /// on TX queue `cores`.
    pub cores: usize,
    /// Entries of each ring (commands, events, packets to the control thread, dispatch).
    pub ring_depth: usize,
    /// The link MTU: each association's path MTU is it less its IP header.
    pub link_mtu: usize,
    /// Bytes of each packet the path MTU leaves free for IPsec's ESP (0 without IPsec):
    /// associations send that much less, and take segments that much larger.
    pub esp_headroom: usize,
    /// Registrations the STag table holds.
    pub stags: usize,
    /// Seeds STag allocation (RFC 5041 §8.3: pass a real random value).
    pub random: u64,
    /// Entries of the device's RSS redirection table when it steers SCTP (so the software
    /// hash agrees with it); [`RETA_SIZE`] otherwise.
    pub reta_size: usize,
    /// The control thread installs a device flow rule per association
    /// ([`Port::steer_sctp`]) that steers its packets to the owner's RX queue.
    pub flow_rules: bool,
    /// The RSS key of the software hash, and of the device's RSS when it steers SCTP (the
    /// same key). A peer that knows it picks source ports whose associations all land on
    /// one core, filling its slots while the others stay empty: the product draws one at
    /// start. [`RSS_KEY`] by default.
    pub rss_key: [u8; 40],
    /// Live associations one peer address may hold: another it completes (a valid COOKIE
    /// ECHO) is aborted ([`ControlStats::peer_limit_refused`]). Each core has
    /// [`MAX_CONNECTIONS_PER_CORE`] slots, and without a bound one host opening from
    /// ever-new ports takes them all. [`ASSOCIATIONS_PER_PEER`] by default.
    pub associations_per_peer: usize,
}

/// [`RuntimeConfig::associations_per_peer`]'s default: a quarter of one core's slots, so
/// one host (or one NAT) cannot take a core, let alone all of them.
pub const ASSOCIATIONS_PER_PEER: usize = MAX_CONNECTIONS_PER_CORE / 4;

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            cores: 1,
            ring_depth: 1024,
            link_mtu: 1500,
            esp_headroom: 0,
            stags: 4096,
            random: 0x5eed,
            reta_size: RETA_SIZE,
            flow_rules: false,
            rss_key: RSS_KEY,
            associations_per_peer: ASSOCIATIONS_PER_PEER,
        }
    }
}

/// A data core's counters (its interface and connections count their own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoreStats {
    pub frames_in: u64,
    /// Frames that came from a sibling core's dispatch ring.
    pub dispatched_in: u64,
    /// Frames moved to the owning core's dispatch ring.
    pub dispatched_out: u64,
    /// Frames for another core dropped because its dispatch ring was full.
    pub dispatch_dropped: u64,
    /// SCTP packets handed to one of this core's connections (each is then taken or
    /// `discarded`).
    pub to_connections: u64,
    /// Frames the control thread passed back to this core (for a connection it adopted).
    pub from_control: u64,
    /// Packets for no association handed to the control thread.
    pub to_control: u64,
    /// Packets for the control thread dropped because its ring was full.
    pub control_dropped: u64,
    /// Packets a connection's association discarded (bad CRC32c or tag, ...), an
    /// out-of-the-blue one it answered included (a SHUTDOWN ACK before it is up, RFC 9260
    /// §8.5.1 E: `Discard::OutOfTheBlue`).
    pub discarded: u64,
    /// Packets whose CRC32c the device found bad (RX checksum offload); dropped.
    pub checksum_bad: u64,
    /// Control messages sent to the control thread with their session (RFC 5043 §6).
    pub sessions_lent: u64,
    /// Frames that arrived as a buffer chain (a peer's zero-copy frame over `net_ring`, a
    /// jumbo frame in small device buffers) and were copied into one buffer to be parsed.
    pub rx_chained: u64,
    /// Of those, lost because no buffer was free for the copy.
    pub rx_chained_dropped: u64,
    /// Of those, lost because the frame is longer than any buffer of this port holds: a peer
    /// whose link MTU is larger than this end's (the frame came in pieces, as a device with
    /// scatter or memif with its peer's bigger buffers delivers it).
    pub rx_too_long: u64,
    /// Times the event ring was full and the core held its events back.
    pub events_held: u64,
    /// Neighbours this core learnt and did not tell the others: its upcalls were backed up.
    pub learnt_dropped: u64,
    /// Times a packet owed its own SACK and the core transmitted before the next packet of
    /// its burst (RFC 9260 §6.2, §6.7).
    pub sacks_between_packets: u64,
    /// ICMP Fragmentation Needed / Packet Too Big that lowered an association's path MTU
    /// (RFC 9260 §7.3, Appendix C ICMP7).
    pub pmtu_lowered: u64,
    /// Those naming no association of ours, with another verification tag, or that would not
    /// lower its path MTU (Appendix C ICMP5-ICMP6; RFC 1191 §3): ignored. (Those that quote
    /// no SCTP packet of ours are the interface's `icmp_ignored`.)
    pub icmp_ignored: u64,
    /// ICMP Fragmentation Needed / Packet Too Big quoting our ESP that an outbound SA believed
    /// and recorded (RFC 4301 §6.1.2, §8.2.1); those it did not are `icmp_ignored` (and the
    /// port's `pmtu_rejected`).
    pub esp_pmtu_taken: u64,
    /// ICMP Protocol Unreachable / ICMPv6 "unrecognized Next Header" that ended an
    /// association as an ABORT would (RFC 9260 Appendix C ICMP8); those naming no association
    /// or with another tag are `icmp_ignored`.
    pub icmp_aborts: u64,
    /// Associations of this core whose path MTU an SA's PMTU lowered (§8.2.1 propagation).
    pub esp_pmtu_lowered: u64,
    /// Lowered path MTUs taken back up after [`PMTU_AGE`] without a confirming ICMP (RFC 1191
    /// §6.3, RFC 8201 §5.3).
    pub pmtu_raised: u64,
    /// RFC 8899 black holes (T3-rtx again and again on a packet above BASE_PLPMTU, ICMP
    /// silent): path MTUs taken down to BASE_PLPMTU.
    pub plpmtud_black_holes: u64,
    /// RFC 8899 probes (HEARTBEAT + PAD, DF) sent, and path MTUs a probe's HEARTBEAT ACK
    /// raised.
    pub plpmtud_probes: u64,
    pub plpmtud_raised: u64,
    /// IPv4 and IPv6 datagrams reassembled from fragments (RFC 1122 §3.3.2, RFC 8200 §4.5),
    /// each then received as a frame of its own.
    pub reassembled: u64,
    /// Of those, lost because no buffer was free for the copy (or none holds it).
    pub reassembled_dropped: u64,
    /// ESP datagrams reassembled that the IPsec port did not open (its SA counts why).
    pub reassembled_esp_dropped: u64,
    /// Connections adopted from the control thread.
    pub adopted: u64,
    /// Connections the core had no room for (it holds [`MAX_CONNECTIONS_PER_CORE`]); aborted.
    pub refused: u64,
    pub commands: u64,
    /// The core's load: the time between its turns, nanoseconds, split by whether the turn
    /// before did any work (`busy_ns`) or found nothing (`idle_ns`, sleeps included). Read
    /// from the clock each turn already reads; `busy_ns / (busy_ns + idle_ns)` is the share
    /// of the core a workload takes, the figure that says which side of a transfer is the
    /// bound.
    pub busy_ns: u64,
    pub idle_ns: u64,
    /// Turns that did work: frames per busy turn is the batch the core works in, and what
    /// each turn's fixed cost (clock, rings, timers, the flush) is spread over.
    pub busy_turns: u64,
    pub tx: TxStats,
}

impl CoreStats {
    /// The share of the time between `since` and these counters that the core was busy
    /// ([`CoreStats::busy_ns`]); None when no time passed.
    pub fn busy_share(&self, since: &CoreStats) -> Option<f64> {
        let busy = self.busy_ns.saturating_sub(since.busy_ns);
        let idle = self.idle_ns.saturating_sub(since.idle_ns);
        (busy + idle > 0).then(|| busy as f64 / (busy + idle) as f64)
    }

    /// Frames received and sent per busy turn since `since`: the batch the core worked in.
    /// None when no turn did work.
    pub fn frames_per_busy_turn(&self, since: &CoreStats) -> Option<f64> {
        let turns = self.busy_turns.saturating_sub(since.busy_turns);
        let frames = (self.frames_in + self.tx.frames_out)
            .saturating_sub(since.frames_in + since.tx.frames_out);
        (turns > 0).then(|| frames as f64 / turns as f64)
    }
}

/// One association as a report shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssocInfo {
    pub conn: ConnHandle,
    pub peer: IpAddr,
    pub peer_port: u16,
    pub state: String,
    /// Closed: kept in view only (`show assoc`, the final reports).
    pub closed: bool,
    pub streams: u16,
    /// Streams with a session that is not idle, and its state.
    pub sessions: Vec<(u16, State)>,
    pub stats: ConnStats,
    /// Bytes of its receive buffer free (the a_rwnd its next SACK may advertise at most).
    pub receive_room: usize,
    /// Its SCTP counters (retransmissions, SACKs, drops by reason: `rwnd_dropped` counts new
    /// DATA beyond the receive buffer, RFC 9260 §6.2).
    pub sctp: ddpdk_dataplane::sctp::Stats,
    /// Its congestion window, bytes.
    pub cwnd: usize,
    /// The peer's receive window as last computed (RFC 9260 §6.2.1), bytes.
    pub peer_rwnd: u32,
    /// RTO and smoothed RTT (RFC 9260 §6.3.1).
    pub rto: Duration,
    pub srtt: Option<Duration>,
    /// Our SCTP port.
    pub local_port: u16,
    /// The largest SCTP packet for its path (the path MTU less the IP header): the link's,
    /// or lower after an ICMP Packet Too Big (RFC 9260 §7.3).
    pub path_mtu: usize,
    /// Whether its one path is active (RFC 9260 §8.2), and the consecutive failures counted
    /// (§8.1): what shows an operator watching telemetry that the peer stopped answering.
    pub path_active: bool,
    pub error_count: u32,
    /// RFC 8899 discovery of its path, if on: its state (§5.2), its BASE_PLPMTU (§5.1.2,
    /// less than 1200 bytes where ESP over IPv6 needs it) and its counters.
    pub plpmtud: Option<PlpmtudInfo>,
}

/// One association's RFC 8899 discovery, as [`AssocInfo`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlpmtudInfo {
    pub state: plpmtud::State,
    pub base: usize,
    pub stats: plpmtud::PlpmtudStats,
}

/// What a data core's connections have counted, over every connection it has held: a
/// connection's counts are kept when it leaves the core, so these only grow (telemetry and
/// Prometheus read them as counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnTotals {
    pub placed_bytes: u64,
    pub segments_in: u64,
    pub segments_out: u64,
    pub messages_out: u64,
    pub t3_retransmits: u64,
    pub fast_retransmits: u64,
    /// SCTP packets discarded for a bad CRC32c or verification tag (RFC 9260 §6.8, §8.5).
    pub sctp_bad_checksum: u64,
    pub sctp_bad_vtag: u64,
    /// New DATA beyond the receive buffer (§6.2) and TSNs outside the map.
    pub sctp_rwnd_dropped: u64,
    pub sctp_tsn_out_of_window: u64,
    /// Fragments acknowledged, then dropped from a full reassembly for a lower TSN (§6.2).
    pub sctp_reneged: u64,
    pub refused_by_session: u64,
    pub after_session_end: u64,
    pub unknown_ppid: u64,
    pub oversize_segments: u64,
    pub receive_errors: ReceiveErrorCounts,
    /// RDMA Read Requests served from local memory (RFC 5040 §5.2).
    pub reads_served: u64,
    /// Read Responses stopped because the ULP revoked their Data Source meanwhile.
    pub reads_source_revoked: u64,
    /// Read Responses of the peer's that ended short of their Read.
    pub reads_short: u64,
    /// Sessions whose peer left DDP-SSNs missing before its Terminate, given up on
    /// (`ConnStats::inbound_gaps_given_up`, RFC 5043 §6).
    pub inbound_gaps_given_up: u64,
    /// Terminates of a rejected attempt that crossed our Reject, dropped so that they do not
    /// end the stream's next session (`ConnStats::crossed_rejects`, RFC 5043 §6.6).
    pub crossed_rejects: u64,
    /// Watches for such Terminates dropped when a stream had too many
    /// (`ConnStats::crossed_rejects_unwatched`, RFC 5043 §6.6).
    pub crossed_rejects_unwatched: u64,
    /// Our Initiates given up while the peer's segments waited for its answer
    /// (`ConnStats::initiates_unanswered`, RFC 5043 §10).
    pub initiates_unanswered: u64,
}

impl ConnTotals {
    pub fn of(c: &ConnStats, s: &ddpdk_dataplane::sctp::Stats) -> ConnTotals {
        ConnTotals {
            placed_bytes: c.placed_bytes,
            segments_in: c.segments_received,
            segments_out: c.segments_sent,
            messages_out: c.messages_sent,
            t3_retransmits: s.t3_retransmits,
            fast_retransmits: s.fast_retransmits,
            sctp_bad_checksum: s.bad_checksum,
            sctp_bad_vtag: s.bad_vtag,
            sctp_rwnd_dropped: s.rwnd_dropped,
            sctp_tsn_out_of_window: s.tsn_out_of_window,
            sctp_reneged: s.reneged,
            refused_by_session: c.refused_by_session,
            after_session_end: c.after_session_end,
            unknown_ppid: c.unknown_ppid,
            oversize_segments: c.oversize_segments,
            receive_errors: c.receive_errors_by_kind,
            reads_served: c.reads_served,
            reads_source_revoked: c.reads_source_revoked,
            reads_short: c.reads_short,
            inbound_gaps_given_up: c.inbound_gaps_given_up,
            crossed_rejects: c.crossed_rejects,
            crossed_rejects_unwatched: c.crossed_rejects_unwatched,
            initiates_unanswered: c.initiates_unanswered,
        }
    }

    pub fn add(&mut self, o: &ConnTotals) {
        self.placed_bytes += o.placed_bytes;
        self.segments_in += o.segments_in;
        self.segments_out += o.segments_out;
        self.messages_out += o.messages_out;
        self.t3_retransmits += o.t3_retransmits;
        self.fast_retransmits += o.fast_retransmits;
        self.sctp_bad_checksum += o.sctp_bad_checksum;
        self.sctp_bad_vtag += o.sctp_bad_vtag;
        self.sctp_rwnd_dropped += o.sctp_rwnd_dropped;
        self.sctp_tsn_out_of_window += o.sctp_tsn_out_of_window;
        self.sctp_reneged += o.sctp_reneged;
        self.refused_by_session += o.refused_by_session;
        self.after_session_end += o.after_session_end;
        self.unknown_ppid += o.unknown_ppid;
        self.oversize_segments += o.oversize_segments;
        self.receive_errors.add(&o.receive_errors);
        self.reads_served += o.reads_served;
        self.reads_source_revoked += o.reads_source_revoked;
        self.reads_short += o.reads_short;
        self.inbound_gaps_given_up += o.inbound_gaps_given_up;
        self.crossed_rejects += o.crossed_rejects;
        self.crossed_rejects_unwatched += o.crossed_rejects_unwatched;
        self.initiates_unanswered += o.initiates_unanswered;
    }
}

/// What one data core holds and has done.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CoreReport {
    pub core: usize,
    pub stats: CoreStats,
    pub iface: InterfaceStats,
    pub assocs: Vec<AssocInfo>,
    /// STags the core's replica holds.
    pub stags: usize,
    /// Its connections' counts, those it no longer holds included.
    pub conn_totals: ConnTotals,
    /// Upcalls held back because the event ring is full (at most about
    /// [`MAX_HELD_UPCALLS`]).
    pub upcalls_held: usize,
}

impl CoreReport {
    /// The associations the core serves: those it keeps in view once closed (for `show assoc`
    /// and the final reports) left out. Telemetry's gauge counted them, so it never fell back
    /// to 0 with nothing live (found by an outside-in test).
    pub fn live_associations(&self) -> usize {
        self.assocs.iter().filter(|a| !a.closed).count()
    }

    /// What the core dropped, by reason, every reason named (zero or not, in a fixed order):
    /// the names telemetry's `drop` dict and the perf tool's summaries use.
    pub fn drops(&self) -> [(&'static str, u64); 26] {
        let (st, i, t) = (&self.stats, &self.iface, &self.conn_totals);
        [
            // Packets an association refused (its checks say which failed).
            ("sctp_discarded", st.discarded),
            ("checksum_bad", st.checksum_bad),
            ("dispatch_full", st.dispatch_dropped),
            ("control_full", st.control_dropped),
            ("rx_chain_no_buffer", st.rx_chained_dropped),
            ("rx_too_long", st.rx_too_long),
            ("tx_refused", st.tx.tx_dropped),
            ("tx_no_buffer", st.tx.no_buffer),
            ("tx_unresolved", st.tx.unresolved),
            ("tx_too_big", st.tx.too_big),
            ("ip_bad_checksum", i.bad_ip_checksum),
            ("ip_fragment", i.fragments),
            ("ip_reassembly_no_buffer", st.reassembled_dropped),
            // Reassembled ESP that did not open (its SA or the policy counts why).
            ("esp_reassembled_not_opened", st.reassembled_esp_dropped),
            ("malformed", i.malformed),
            ("vlan", i.vlan),
            ("arp_nd_not_for_us", i.arp_not_for_us + i.nd_not_for_us),
            ("not_ours", i.not_ours()),
            // Another host on the link claims our address (RFC 5227 §2.4, RFC 4862 §5.4.4).
            ("address_conflict", i.address_conflicts),
            // ICMP Fragmentation Needed / Packet Too Big not taken (RFC 9260 Appendix C).
            ("icmp_ignored", i.icmp_ignored + st.icmp_ignored),
            // With the fragments a full reassembly dropped for a lower TSN: both are data the
            // receive buffer had no room for (one answer holds 256 names; no room for another).
            ("sctp_rwnd", t.sctp_rwnd_dropped + t.sctp_reneged),
            ("sctp_tsn_out_of_window", t.sctp_tsn_out_of_window),
            ("ddp_refused_by_session", t.refused_by_session),
            ("ddp_after_session_end", t.after_session_end),
            ("ddp_unknown_ppid", t.unknown_ppid),
            ("ddp_oversize", t.oversize_segments),
        ]
    }

    /// Where this core's frame counters disagree, in words (empty: every frame is accounted
    /// for). Every frame the core took (from its queues, less chains it had no buffer to copy;
    /// from a sibling core; from the control thread) ended in exactly one of its interface's
    /// outcomes, and every SCTP packet among them in exactly one of the core's: a bad device
    /// checksum, one of its connections, a sibling core, the control thread, or a full ring on
    /// the way to one of those; every ICMP Packet Too Big handed on likewise: a sibling core
    /// (or its full ring), a lowered path MTU, or ignored.
    pub fn unaccounted(&self) -> Vec<String> {
        let st = &self.stats;
        let mut wrong = Vec::new();
        let taken = (st.frames_in + st.dispatched_in + st.from_control + st.reassembled)
            .wrapping_sub(st.rx_chained_dropped + st.rx_too_long);
        let classified = self.iface.frames();
        if taken != classified {
            wrong.push(format!(
                "core {}: {taken} frames taken ({} from the port less {} chains dropped and {} \
                 too long, {} from siblings, {} from the control thread), {classified} \
                 classified by the interface",
                self.core,
                st.frames_in,
                st.rx_chained_dropped,
                st.rx_too_long,
                st.dispatched_in,
                st.from_control
            ));
        }
        let routed = st.checksum_bad
            + st.to_connections
            + st.dispatched_out
            + st.dispatch_dropped
            + st.to_control
            + st.control_dropped
            + st.pmtu_lowered
            + st.esp_pmtu_taken
            + st.icmp_aborts
            + st.icmp_ignored;
        let icmp = self.iface.icmp_too_big + self.iface.icmp_protocol_unreachable;
        if self.iface.sctp + icmp != routed {
            wrong.push(format!(
                "core {}: {} SCTP packets and {} ICMP Packet Too Big or Protocol Unreachable, \
                 {routed} routed ({} bad checksum, {} to connections, {} to siblings, {} \
                 sibling ring full, {} to the control thread, {} its ring full, {} path MTU \
                 lowered, {} taken by an ESP SA, {} ended by ICMP, {} ICMP ignored)",
                self.core,
                self.iface.sctp,
                icmp,
                st.checksum_bad,
                st.to_connections,
                st.dispatched_out,
                st.dispatch_dropped,
                st.to_control,
                st.control_dropped,
                st.pmtu_lowered,
                st.esp_pmtu_taken,
                st.icmp_aborts,
                st.icmp_ignored
            ));
        }
        wrong
    }
}

enum Command<B> {
    Adopt {
        conn: ConnHandle,
        c: Box<Connection>,
        /// Where the COOKIE ECHO came from (the cookie authenticated it).
        peer_mac: Option<[u8; 6]>,
    },
    Op {
        conn: ConnHandle,
        op: Op,
    },
    /// A neighbour another core's interface learnt from ARP or ND.
    Neighbour(IpAddr, [u8; 6]),
    Forget(ConnHandle),
    Report,
    /// A packet for an association this core owns (`conn`) that reached the control thread
    /// (it arrived before the core had adopted the association: a duplicated or retransmitted
    /// COOKIE ECHO, say). Behind the Adopt in the same ring, so it finds the association;
    /// where the association has closed since, the core sends it back named
    /// ([`PacketUp::closed`]).
    Packet {
        buf: B,
        conn: ConnHandle,
    },
    /// A session the control thread ran a control message through, coming back.
    SessionReturn {
        conn: ConnHandle,
        call: Box<SessionCall>,
    },
}

/// A packet a data core hands up to the control thread's endpoint.
struct PacketUp<B> {
    buf: B,
    /// The connection the control thread sent it to ([`Command::Packet`]) when the core holds
    /// no live association for it: closed there, the Closed not yet taken by the control
    /// thread. Without it the control thread's map of live associations sent it back to the
    /// core, and so on until the Closed was taken, which waits for the ULP's events.
    closed: Option<ConnHandle>,
}

/// Where a frame a data core receives comes from.
#[derive(Clone, Copy)]
enum Via {
    /// The core's own RX queues.
    Wire,
    /// A sibling core's dispatch ring (the frame's owner is this core).
    Core,
    /// The control thread, for the connection it names ([`Command::Packet`]).
    Control(ConnHandle),
}

enum Upcall {
    Event(Event),
    /// A DDP Stream Session Control message and its session, for the control thread to run
    /// the RFC 5043 §6 machine on.
    Session {
        conn: ConnHandle,
        call: Box<SessionCall>,
    },
    Learnt {
        core: usize,
        ip: IpAddr,
        mac: [u8; 6],
    },
    /// The association's local Verification Tag after a peer restart (RFC 9260 §5.2.2: the
    /// INIT ACK to a restart carries a new Initiate Tag): the endpoint must know the new one
    /// to keep a packet from the peer's other address from being answered as out of the blue.
    Retagged {
        conn: ConnHandle,
        local_tag: u32,
    },
}

/// What goes up before `indication` of `c`: after a peer restart, the association's new local
/// tag (RFC 9260 §5.2.2), for the endpoint's table of live associations.
fn retagged(conn: ConnHandle, c: &Quiet, indication: &Indication) -> Option<Upcall> {
    matches!(indication, Indication::PeerRestarted).then(|| Upcall::Retagged {
        conn,
        local_tag: c.get().association().local_tag(),
    })
}

/// One connection a core owns. While one of its sessions is at the control thread, only that
/// stream's chunks and operations wait (in the connection, [`Connection::apply`]); its other
/// streams, SACKs and heartbeats go on.
struct Slot {
    conn: ConnHandle,
    c: Quiet,
    peer: IpAddr,
    peer_port: u16,
    /// The association's path MTU before any ICMP lowered it (the link's, less headers and
    /// ESP headroom): where [`PMTU_AGE`] takes it back to.
    link_mtu: usize,
    /// When ICMP (or the SA protecting it) last lowered or confirmed its lowered path MTU.
    pmtu_lowered_at: Option<Instant>,
}

/// RFC 1191 §6.3 and RFC 8201 §5.3 (which recommend 10 minutes, and forbid less than 5): a
/// path MTU lowered by ICMP and not confirmed since for this long is taken back to the link's
/// size, so that a path that grew again (a route back, a tunnel gone) is used whole again. If
/// it did not, the next full-size packet draws the same ICMP and the path MTU falls again: one
/// packet's retransmission, as fragments, each time.
pub const PMTU_AGE: core::time::Duration = core::time::Duration::from_secs(600);

/// The longest reply a data core writes: an Echo Reply is as long as its request (RFC 1122
/// §3.2.2.6), and a jumbo frame is at most 9216 bytes on the NICs ddpdk meets.
const REPLY_MAX: usize = 9216;

/// Upcalls a core holds back when the event ring is full before it stops taking commands
/// (whose results would add more): the control thread that does not drain its events slows
/// its own operations, and the connections' receive buffers shrink the peers' a_rwnd.
pub const MAX_HELD_UPCALLS: usize = 1024;

/// Events the control side keeps for the ULP per entry of a ring ([`Control::events_waiting`]):
/// room for a few polls' worth of upcalls between two of the ULP's turns, and no more.
pub const READY_PER_RING_ENTRY: usize = 4;

/// How a data core waits when a poll turn finds nothing to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdlePolicy {
    /// Poll without pause: a CPU of its own, the lowest latency (testpmd's way).
    Spin,
    /// DPDK `l3fwd-power`'s adaptive back-off: [`SPIN_BEFORE_SLEEP`] after its last work the
    /// core starts to sleep, 1 µs at first, doubling with every empty turn up to [`LIGHT_SLEEP`]; once idle
    /// for [`DEEP_IDLE_AFTER`] it keeps doubling up to `max_sleep`. Every wake-up costs CPU
    /// (on a VM a 50 µs cap costs a quarter of a CPU), so a core that pauses between bursts
    /// answers within tens of µs while an idle one costs little. A command from the control
    /// thread or a frame a sibling core dispatches wakes the core at once ([`Doorbell`]); a
    /// frame from the device waits at most the current sleep, unless the port has RX
    /// interrupts ([`Port::rx_waiter`]): then a core idle for [`DEEP_IDLE_AFTER`] blocks until
    /// a frame, a command or its next timer, whichever comes first.
    Sleep { max_sleep: Duration },
}

impl IdlePolicy {
    /// The default longest sleep of an idle core.
    pub const MAX_SLEEP: Duration = Duration::from_millis(1);
}

impl Default for IdlePolicy {
    fn default() -> Self {
        IdlePolicy::Sleep {
            max_sleep: IdlePolicy::MAX_SLEEP,
        }
    }
}

/// The longest wait of a core blocked on RX interrupts with no timer due sooner: a frame, a
/// command or a timer ends it before; this bounds what a lost interrupt would cost.
pub const INTERRUPT_SLEEP: Duration = Duration::from_millis(100);

/// The shortest wait a core blocks on RX interrupts for: the epoll wait counts milliseconds.
pub const INTERRUPT_MIN: Duration = Duration::from_millis(1);

/// The longest sleep of a core that did something in the last [`DEEP_IDLE_AFTER`].
pub const LIGHT_SLEEP: Duration = Duration::from_micros(50);
/// Idle time after which a sleeping core backs off beyond [`LIGHT_SLEEP`].
pub const DEEP_IDLE_AFTER: Duration = Duration::from_millis(10);

/// How long a core with [`IdlePolicy::Sleep`] keeps polling after its last work before it
/// starts to sleep: a transfer whose packets pause for a round trip finds it still polling
/// (sleeping there would stretch every round trip by a sleep and a wake-up).
pub const SPIN_BEFORE_SLEEP: Duration = Duration::from_micros(200);

/// The back-off of [`IdlePolicy::Sleep`], for any loop that polls (a data core's, or a thread
/// that polls one inline with other work).
#[derive(Debug, Clone)]
pub struct Backoff {
    policy: IdlePolicy,
    /// When the loop last did something.
    busy: Instant,
    /// The next sleep.
    sleep: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_micros(1);

    pub fn new(policy: IdlePolicy, now: Instant) -> Backoff {
        Backoff {
            policy,
            busy: now,
            sleep: Backoff::FIRST,
        }
    }

    /// Whether the loop has been idle for [`DEEP_IDLE_AFTER`] at `now`.
    pub fn deep(&self, now: Instant) -> bool {
        now.saturating_since(self.busy) >= DEEP_IDLE_AFTER
    }

    /// After a turn at `now` that did `work`: how long to sleep before the next one, if at
    /// all. Polling goes on for [`SPIN_BEFORE_SLEEP`] after the last work; then sleeps double
    /// from 1 µs up to [`LIGHT_SLEEP`], and after [`DEEP_IDLE_AFTER`] up to the policy's
    /// `max_sleep`.
    pub fn after(&mut self, now: Instant, work: usize) -> Option<Duration> {
        let IdlePolicy::Sleep { max_sleep } = self.policy else {
            return None;
        };
        if work > 0 {
            (self.busy, self.sleep) = (now, Backoff::FIRST);
            return None;
        }
        let idle = now.saturating_since(self.busy);
        if idle < SPIN_BEFORE_SLEEP {
            std::hint::spin_loop();
            return None;
        }
        let cap = if idle < DEEP_IDLE_AFTER {
            max_sleep.min(LIGHT_SLEEP)
        } else {
            max_sleep
        };
        let sleep = self.sleep.min(cap);
        self.sleep = (self.sleep * 2).min(cap);
        Some(sleep)
    }
}

/// An RX queue that has carried nothing for this long goes cold: it is polled at most every
/// [`COLD_RX_POLL`]. A ring device delivers on the queue its peer sent on, so a core polls
/// queues that a peer with fewer data cores never uses (a memif endpoint opens
/// `MEMIF_QUEUE_PAIRS`); an empty poll costs ~40 ns, and three of them were a third of an
/// idle turn, which every frame waits out half of on average before it is seen.
pub const COLD_RX_AFTER: Duration = Duration::from_millis(100);

/// How often a cold RX queue is polled: its first frame waits at most this long (then the
/// queue is hot again). A sleeping core's turns are longer than this, so they poll every
/// queue.
pub const COLD_RX_POLL: Duration = Duration::from_micros(2);

/// A cold RX queue is polled on every this many turns as well, whatever the clock says: a
/// loop whose clock stands still (a simulation's turns at one instant) still reads it.
pub const COLD_RX_TURNS: u8 = 8;

/// One RX queue of a data core, and when it goes cold.
#[derive(Debug)]
struct RxQueue {
    id: u16,
    /// [`COLD_RX_AFTER`] after the turn that last found frames in it (or after the first turn);
    /// zero before the first.
    cold_at: Instant,
    /// When it is next polled: at or before any turn while it is hot.
    next: Instant,
    /// Turns since it was last polled.
    skipped: u8,
}

/// In nanoseconds, as an [`Instant`] adds them (the per-turn arithmetic stays on integers).
const COLD_RX_AFTER_NS: u64 = COLD_RX_AFTER.as_nanos() as u64;
const COLD_RX_POLL_NS: u64 = COLD_RX_POLL.as_nanos() as u64;

impl RxQueue {
    fn new(id: u16) -> RxQueue {
        RxQueue {
            id,
            cold_at: Instant::ZERO,
            next: Instant::ZERO,
            skipped: 0,
        }
    }

    /// Whether a turn at `now` polls this queue: while hot, every turn.
    fn due(&mut self, now: Instant) -> bool {
        if now >= self.next || self.skipped + 1 >= COLD_RX_TURNS {
            self.skipped = 0;
            return true;
        }
        self.skipped += 1;
        false
    }

    /// After a poll at `now` that found `n` frames.
    fn polled(&mut self, now: Instant, n: usize) {
        if n > 0 || self.cold_at == Instant::ZERO {
            self.cold_at = now.saturating_add_nanos(COLD_RX_AFTER_NS);
            self.next = Instant::ZERO;
        } else if now >= self.cold_at {
            self.next = now.saturating_add_nanos(COLD_RX_POLL_NS);
        }
    }
}

/// Wakes a thread that sleeps while idle (a data core, the control thread): whoever puts work
/// in one of its rings rings its doorbell.
#[derive(Debug, Default)]
pub struct Doorbell {
    sleeping: AtomicBool,
    thread: OnceLock<Thread>,
    /// The RX-interrupt wait the thread may block in instead of parking; taken back when the
    /// thread's loop ends, so that the waiter is dropped on the thread whose epoll holds it.
    waiter: std::sync::Mutex<Option<Arc<dyn RxWaiter>>>,
}

impl Doorbell {
    /// Makes the calling thread the one this doorbell wakes (once; later calls change nothing).
    pub fn attach(&self) {
        let _ = self.thread.set(std::thread::current());
    }

    /// After work was put in the thread's ring. With the fences, either this sees the thread
    /// asleep (and unparks it), or the thread, which looks at its rings after saying it
    /// sleeps ([`Doorbell::sleep_unless`]), sees the work.
    pub fn ring(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
            // Only while the thread sleeps: the lock is off every busy path.
            if let Some(w) = self.waiter.lock().ok().and_then(|w| w.clone()) {
                w.bell();
            }
        }
    }

    /// Makes a ring also end the attached thread's [`RxWaiter::wait`].
    pub fn attach_waiter(&self, waiter: Arc<dyn RxWaiter>) {
        if let Ok(mut w) = self.waiter.lock() {
            *w = Some(waiter);
        }
    }

    /// Takes the waiter back ([`Doorbell::attach_waiter`]), when the thread stops using it.
    pub fn detach_waiter(&self) -> Option<Arc<dyn RxWaiter>> {
        self.waiter.lock().ok().and_then(|mut w| w.take())
    }

    /// Sleeps the attached thread for at most `d` (a ring wakes it), unless `work`, run after
    /// the sleep is announced, finds something to do. Returns what `work` did.
    pub fn sleep_unless(&self, d: Duration, work: impl FnOnce() -> usize) -> usize {
        self.sleep_unless_with(d, work, std::thread::park_timeout)
    }

    /// As [`Doorbell::sleep_unless`], blocking with `block` (an [`RxWaiter::wait`], which a
    /// ring ends too once [`Doorbell::attach_waiter`] gave it).
    pub fn sleep_unless_with(
        &self,
        d: Duration,
        work: impl FnOnce() -> usize,
        block: impl FnOnce(Duration),
    ) -> usize {
        self.sleeping.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let n = work();
        if n == 0 {
            block(d);
        }
        self.sleeping.store(false, Ordering::Relaxed);
        n
    }
}

/// Counters of a core's idle time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IdleStats {
    /// Times the core slept.
    pub sleeps: u64,
    /// Times it was about to sleep and found work when it looked again.
    pub sleeps_avoided: u64,
    /// Sleeps blocked on the RX queues' interrupts ([`Port::rx_waiter`]), those a frame ended
    /// (an interrupt), and those the doorbell ended (a command, an STag change, a stop).
    pub interrupt_sleeps: u64,
    pub interrupt_wakes: u64,
    pub interrupt_bells: u64,
}

/// One data core: see the module documentation. Move it to its thread and call
/// [`DataCore::poll`] in a loop (or [`DataCore::run`]).
pub struct DataCore<P: Port> {
    index: usize,
    port: Arc<P>,
    /// What the device does for SCTP's CRC32c.
    offload: ChecksumOffload,
    /// The RX queues this core polls: its own, and every `cores`-th one after it, so a port
    /// with more RX queues than cores (a ring-based virtual device delivers on the queue
    /// number its peer sent on, the peer's control queue included) has every queue polled.
    rx_queues: Vec<RxQueue>,
    iface: Interface,
    steer: Steering,
    slots: Vec<Option<Slot>>,
    stags: CoreStags,
    /// The latest region snapshot this core took from `shared_regions` (refreshed with the
    /// STag replica, so every region its STags name is in it; it keeps them alive).
    regions: Arc<RegionTable>,
    shared_regions: Arc<SharedRegions>,
    /// The publication `regions` came with.
    regions_generation: u64,
    /// The port's [`Port::esp_pmtu_generation`] when this core last propagated the SAs' path
    /// MTUs to its associations.
    esp_pmtu_generation: u64,
    commands: Receiver<Command<P::Buf>>,
    packets_up: Sender<PacketUp<P::Buf>>,
    events_up: Sender<Upcall>,
    /// Upcalls the event ring had no room for, sent first, in order, on the next poll; while
    /// any wait, nothing more is taken from the connections.
    held: VecDeque<Upcall>,
    /// The slot [`DataCore::upcalls`] serves first: the one after the slot whose event found
    /// the ring full, so that with a ULP slow to take its events a busy connection in a low
    /// slot does not fill the ring again every time it is emptied, ahead of every other.
    upcall_first: usize,
    dispatch_in: Receiver<P::Buf>,
    dispatch_out: Vec<Sender<P::Buf>>,
    /// Every core's doorbell (this one's at `index`): a frame dispatched to a sibling wakes it.
    doorbells: Arc<[Doorbell]>,
    /// The control thread's: rung after a turn that handed it packets or upcalls.
    control_bell: Arc<Doorbell>,
    /// This turn handed the control thread something.
    rang_control: bool,
    out: Tx<P>,
    rx: Vec<P::Buf>,
    /// Received frames done with, freed together after each burst (`rte_pktmbuf_free_bulk`:
    /// one return to the pool for the lot, not one call a frame).
    spent: Vec<P::Buf>,
    /// Where a received chain is gathered, and the buffer it is copied to.
    linear: Vec<u8>,
    linear_buf: Vec<P::Buf>,
    /// Where the interface writes an ARP or ND answer or an Echo Reply ([`REPLY_MAX`] bytes,
    /// allocated once).
    reply: Box<[u8]>,
    stats: CoreStats,
    /// The counts of the connections that have left the core ([`ConnTotals`]).
    retired: ConnTotals,
    idle: IdleStats,
    /// When the last turn began, and whether it did any work (the load counters).
    last_turn: Option<Instant>,
    last_worked: bool,
    /// The thread that polls this core is the ULP's own ([`DataCore::set_ulp_polls`]).
    ulp_polls: bool,
    /// What a burst called for is framed and sent when the ULP is back: at its next
    /// operation (which it may then share a packet with) or at the start of the next turn.
    send_owed: bool,
    /// Another frame of the burst follows the one being handled (true outside RX bursts).
    burst_goes_on: bool,
    /// The announcing core's schedule ([`DataCore::announce`]); `None` on the others.
    announcing: Option<Announcing>,
}

/// RFC 5227 §2.3: "ANNOUNCE_NUM" ARP Announcements, "ANNOUNCE_INTERVAL" apart (its §1.1's
/// constants), each sent with RFC 4861 §7.2.6's unsolicited Neighbor Advertisement (which
/// allows up to three).
pub const ANNOUNCE_NUM: u8 = 2;
pub const ANNOUNCE_INTERVAL: Duration = Duration::from_secs(2);
/// How often the announcing core reads the link's state while it has nothing to announce: a
/// link that comes back up is announced on afresh (the neighbours may have been moved to
/// another host while it was down, or have flushed their entries), and a link that is down is
/// not offered announcements it cannot carry.
pub const LINK_WATCH: Duration = Duration::from_millis(100);

/// Where the announcing core is in [`ANNOUNCE_NUM`] announcements of a link-up period.
#[derive(Clone, Copy, Debug)]
struct Announcing {
    /// When the core next reads the link, and announces if one is owed.
    due: Instant,
    /// Announcements still owed in this link-up period.
    left: u8,
    /// The link was up when last read; false at start, so the first up counts as a rise.
    up: bool,
}

/// Whether a reassembled frame (Ethernet, then the IPv4 or IPv6 header `Interface::fragment`
/// writes, with no extension header) is an ESP datagram: IPv4's protocol or IPv6's Next
/// Header is ESP's.
fn reassembled_esp(frame: &[u8]) -> bool {
    const IPPROTO_ESP: u8 = 50;
    let at = match frame.get(12..14) {
        Some([0x86, 0xdd]) => 14 + 6,
        _ => 14 + 9,
    };
    frame.get(at) == Some(&IPPROTO_ESP)
}

/// Builds the control side and `cfg.cores` data cores of one endpoint on `port`.
pub fn build<P: Port>(
    port: Arc<P>,
    mut iface: Interface,
    endpoint: Endpoint,
    conn_cfg: ConnConfig,
    limit: PendingLimit,
    cfg: RuntimeConfig,
) -> Result<(Control<P>, Vec<DataCore<P>>), RuntimeError> {
    let cores = cfg.cores.max(1);
    let (rxq, txq) = (port.nb_rx_queues(), port.nb_tx_queues());
    if usize::from(rxq) < cores || usize::from(txq) < cores + 1 {
        return Err(RuntimeError::Queues {
            rx: rxq,
            tx: txq,
            cores,
        });
    }
    let depth = cfg.ring_depth.max(1);
    // ESP fragments to us are reassembled for the IPsec port to open (RFC 4303 §3.4.1).
    iface.reassemble_esp(port.opens_esp());
    // RFC 4301 §7: with IPsec, packets above a lowered path MTU are fragmented by the port
    // once sealed (`Tx::with_source_fragments` below).
    iface.fragment_after_sealing(cfg.esp_headroom > 0);
    // RFC 1122 §3.3.2 EMTU_R: no datagram above the link's size is reassembled.
    iface.set_link_mtu(cfg.link_mtu);
    let (mut memory, replicas) = Memory::new(cfg.stags, cores, cfg.random);
    let (packets_tx, packets_rx) = channel::bounded(depth);
    let (events_tx, events_rx) = channel::bounded(depth);
    let mut dispatch_tx = Vec::new();
    let mut dispatch_rx = Vec::new();
    for _ in 0..cores {
        let (t, r) = channel::bounded(depth);
        dispatch_tx.push(t);
        dispatch_rx.push(r);
    }
    let steer = Steering::with_reta(cores, cfg.reta_size).with_key(cfg.rss_key);
    let doorbells: Arc<[Doorbell]> = (0..cores).map(|_| Doorbell::default()).collect();
    // An STag command or resync request wakes its core: one blocked on RX interrupts would
    // find it only at its next frame or timer (a deregistration waited up to 100 ms).
    memory.set_core_wake(ddpdk_dataplane::mem::revoke::CoreWake(Arc::new({
        let bells = Arc::clone(&doorbells);
        move |k| {
            if let Some(b) = bells.get(k) {
                b.ring();
            }
        }
    })));
    let control_bell = Arc::new(Doorbell::default());
    let mut links = Vec::new();
    let mut data = Vec::new();
    for (index, (stags, dispatch_in)) in replicas.into_iter().zip(dispatch_rx).enumerate() {
        let (cmd_tx, cmd_rx) = channel::bounded(depth);
        links.push(CoreLink {
            commands: cmd_tx,
            outbox: VecDeque::new(),
        });
        data.push(DataCore {
            index,
            offload: port.sctp_checksum_offload(),
            port: Arc::clone(&port),
            rx_queues: (index..usize::from(rxq))
                .step_by(cores)
                .map(|q| RxQueue::new(q as u16))
                .collect(),
            iface: iface.clone(),
            steer,
            slots: Vec::new(),
            stags,
            regions_generation: memory.region_table().generation(),
            esp_pmtu_generation: 0,
            announcing: None,
            regions: memory.region_table().load_full(),
            shared_regions: Arc::clone(memory.region_table()),
            commands: cmd_rx,
            packets_up: packets_tx.clone(),
            events_up: events_tx.clone(),
            held: VecDeque::new(),
            upcall_first: 0,
            dispatch_in,
            dispatch_out: dispatch_tx.clone(),
            doorbells: Arc::clone(&doorbells),
            control_bell: Arc::clone(&control_bell),
            rang_control: false,
            // RFC 4301 §7: with IPsec, fragments are cut after ESP, not before
            // (`Tx::with_source_fragments`).
            out: Tx::with_stock(Arc::clone(&port), index as u16, STOCK)
                .with_source_fragments(cfg.esp_headroom == 0),
            rx: Vec::with_capacity(BURST),
            spent: Vec::with_capacity(BURST),
            linear: Vec::new(),
            linear_buf: Vec::with_capacity(1),
            reply: vec![0; REPLY_MAX].into_boxed_slice(),
            stats: CoreStats::default(),
            retired: ConnTotals::default(),
            idle: IdleStats::default(),
            last_turn: None,
            last_worked: false,
            ulp_polls: false,
            send_owed: false,
            burst_goes_on: true,
        });
    }
    let control = Control {
        out: Tx::new(Arc::clone(&port), cores as u16).with_source_fragments(cfg.esp_headroom == 0),
        iface,
        listener: {
            let mut l = Listener::new(endpoint, conn_cfg, limit);
            l.set_link(cfg.link_mtu, cfg.esp_headroom);
            l
        },
        memory,
        steer,
        cores: links,
        doorbells,
        bell: control_bell,
        outbox_limit: depth,
        event_budget: depth,
        ready_limit: depth.saturating_mul(READY_PER_RING_ENTRY),
        associations_per_peer: cfg.associations_per_peer.max(1),
        packets: packets_rx,
        events: events_rx,
        next_conn: 1,
        owners: FxHashMap::default(),
        live: HashMap::new(),
        live_tags: HashMap::new(),
        closing: FxHashMap::default(),
        flow_rules: cfg.flow_rules,
        flows: FxHashMap::default(),
        ready: VecDeque::new(),
        gated: VecDeque::new(),
        initiates: FxHashSet::default(),
        answered: FxHashSet::default(),
        closed: FxHashSet::default(),
        initiates_received: FxHashMap::default(),
        stats: ControlStats::default(),
    };
    Ok((control, data))
}

/// The stream whose pending Initiate `op` answers, if it answers one (RFC 5043 §6.3: an
/// Accept or a Reject; §6.2: a Terminate ends the session instead).
fn answered_initiate(op: &Op) -> Option<u16> {
    match op {
        Op::Accept { stream, .. }
        | Op::AcceptRdmap { stream, .. }
        | Op::Reject { stream, .. }
        | Op::Terminate { stream } => Some(*stream),
        _ => None,
    }
}

/// Why no peer can have `a` on a link, if none can: its packets would never reach a peer, or
/// never come back from one.
pub fn not_a_peer(a: IpAddr) -> Option<&'static str> {
    if a.is_unspecified() {
        Some("the unspecified address")
    } else if a.is_loopback() {
        Some("a loopback address")
    } else if a.is_multicast() {
        Some("a multicast address")
    } else if a == IpAddr::V4(std::net::Ipv4Addr::BROADCAST) {
        Some("the broadcast address")
    } else if matches!(a, IpAddr::V4(v4) if v4.octets()[0] >= 240) {
        // RFC 6890 §2.2.2: 240.0.0.0/4 is Reserved, neither a source nor a destination.
        Some("a reserved address (240.0.0.0/4)")
    } else {
        None
    }
}

impl<P: Port> DataCore<P> {
    pub fn index(&self) -> usize {
        self.index
    }

    pub fn stats(&self) -> CoreStats {
        CoreStats {
            tx: self.out.stats,
            ..self.stats
        }
    }

    /// This core's interface: its addresses, the neighbours it knows, its counters.
    pub fn interface(&self) -> &Interface {
        &self.iface
    }

    /// The earliest timer of this core's associations (a simulation skips idle time to it).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.slots
            .iter()
            .flatten()
            .filter_map(|s| s.c.get().poll_timeout())
            .min()
    }

    /// The longest this core may sleep at `now`, if anything limits it: never past its next
    /// SCTP timer, and no longer than [`LIGHT_SLEEP`] while frames wait for room in the
    /// device's ring and its link is up. A turn that finds the ring still full sends nothing
    /// and so counts as idle, and nothing rings a doorbell when the ring drains: without the
    /// cap, a core held back for [`DEEP_IDLE_AFTER`] would retry only every `max_sleep`. A
    /// link that is down drains nothing: the core backs off as an idle one does. The same
    /// for upcalls held because the event ring was full: the control thread rings no doorbell
    /// when it drains the ring, so a deep sleep would hold the completions (and, past
    /// [`MAX_HELD_UPCALLS`], the commands) for up to `max_sleep`.
    pub fn sleep_limit(&self, now: Instant) -> Option<Duration> {
        if self.send_owed {
            return Some(Duration::ZERO);
        }
        // The announcer's next look at the link counts as a timer.
        let timer = self
            .poll_timeout()
            .into_iter()
            .chain(self.announcing.map(|a| a.due))
            .min()
            .map(|t| t.saturating_since(now));
        // An STag acknowledgement the channel had no room for is sent again at the next poll.
        let backlog = (self.out.retry_soon() || !self.held.is_empty() || self.stags.ack_owed())
            .then_some(LIGHT_SLEEP);
        match (timer, backlog) {
            (Some(t), Some(b)) => Some(t.min(b)),
            (t, b) => t.or(b),
        }
    }

    /// Makes the next turn read every RX queue, cold ones included.
    fn rx_all_due(&mut self) {
        for q in &mut self.rx_queues {
            q.next = Instant::ZERO;
        }
    }

    /// Whether frames this core made wait for room in the device's ring, or wait for the
    /// ULP's next turn ([`DataCore::set_ulp_polls`]).
    pub fn tx_backlogged(&self) -> bool {
        self.out.congested() || self.send_owed
    }

    /// Says that the thread polling this core is the ULP's own, which reads the core's events
    /// between two of its turns (an inline data core, `cli`'s `Node`). A turn that handed
    /// the ULP a completion then leaves before sending what its bursts called for: the ULP
    /// hears of its operation before a transmit (a memif burst costs 0.1-0.4 us here), and a
    /// SACK owed for the packet that completed it (RFC 7053's I bit on a Read Response)
    /// rides on the ULP's next operation when there is one (RFC 9260 §6: bundled with its
    /// DATA) instead of taking a packet of its own. Only after a completion: a turn that
    /// completed nothing of the ULP's sends at once, since a SACK owed for the peer's writes
    /// or sends is the peer's completion, on its latency path. Held frames leave at the ULP's
    /// next operation ([`DataCore::apply_now`]) or at the start of the next turn, whichever
    /// comes first: one turn of the ULP's loop, no timer. Only for a caller that polls the
    /// core again as soon as it has read the events.
    pub fn set_ulp_polls(&mut self, on: bool) {
        self.ulp_polls = on;
    }

    /// Shows every frame this core queues for transmission to `tap`.
    pub fn set_tap(&mut self, tap: Tap) {
        self.out.tap = Some(tap);
    }

    /// Polls until `stop` is set, on the calling thread; an idle core waits as `idle` says.
    pub fn run(&mut self, clock: Clock, stop: &AtomicBool, idle: IdlePolicy) {
        let doorbell = Arc::clone(&self.doorbells);
        let doorbell = &doorbell[self.index];
        doorbell.attach();
        if self.index == 0 {
            self.announce();
        }
        let mut backoff = Backoff::new(idle, clock.now());
        // RX interrupts, where the device has them: made here, on the thread that waits.
        let mut waiter = match idle {
            IdlePolicy::Sleep { .. } => {
                let queues: Vec<u16> = self.rx_queues.iter().map(|q| q.id).collect();
                self.port.rx_waiter(&queues)
            }
            IdlePolicy::Spin => None,
        };
        if let Some(w) = &waiter {
            doorbell.attach_waiter(Arc::clone(w));
        }
        while !stop.load(Ordering::Acquire) {
            let now = clock.now();
            let work = self.poll(now);
            let Some(sleep) = backoff.after(now, work) else {
                continue;
            };
            let limit = self.sleep_limit(now);
            let d = limit.map_or(INTERRUPT_SLEEP, |l| l.min(INTERRUPT_SLEEP));
            // Blocking pays only past the millisecond the wait is counted in; shorter limits
            // (a backlog retried every LIGHT_SLEEP, a timer due) sleep as without interrupts.
            let deep = waiter
                .as_ref()
                .filter(|_| backoff.deep(now) && d >= INTERRUPT_MIN);
            // The rings are looked at once more after the sleep is announced: work put there
            // before a doorbell could see us asleep is found then; with interrupts armed
            // first, and every RX queue read whether or not it is cold, so that a frame that
            // came before them (which a device may never signal) is found then too.
            let found = match deep {
                Some(w) if w.arm(true) => {
                    self.rx_all_due();
                    let mut woken = Woken::Timeout;
                    let found =
                        doorbell.sleep_unless_with(d, || self.poll(now), |d| woken = w.wait(d));
                    w.arm(false);
                    // An interrupt's frame is read at the next turn, cold queue or not.
                    self.rx_all_due();
                    if found == 0 {
                        self.idle.interrupt_sleeps += 1;
                        self.idle.interrupt_wakes += u64::from(woken == Woken::Rx);
                        self.idle.interrupt_bells += u64::from(woken == Woken::Bell);
                    }
                    if woken == Woken::Failed {
                        waiter = None;
                        doorbell.detach_waiter();
                    }
                    found
                }
                Some(_) => {
                    // The device would not arm (it undid what it had armed): poll from now on.
                    waiter = None;
                    doorbell.detach_waiter();
                    doorbell.sleep_unless(sleep.min(d), || self.poll(now))
                }
                None => {
                    let sleep = limit.map_or(sleep, |l| sleep.min(l));
                    doorbell.sleep_unless(sleep, || self.poll(now))
                }
            };
            if found > 0 {
                self.idle.sleeps_avoided += 1;
                backoff.after(now, 1);
            } else {
                self.idle.sleeps += 1;
            }
        }
        // The waiter is dropped here, on the thread whose epoll instance holds its events.
        doorbell.detach_waiter();
        drop(waiter);
        self.out.flush();
        self.out.discard_backlog();
    }

    /// Makes this core the port's announcer: our link address for each of our IP addresses
    /// (RFC 5227 §2.3's ARP Announcement, RFC 4861 §7.2.6's unsolicited Neighbor
    /// Advertisement; [`Interface::announce`]), [`ANNOUNCE_NUM`] times [`ANNOUNCE_INTERVAL`]
    /// apart from the first turn that finds the link up, and again each time the link comes
    /// back up. A neighbour that cached another link address for ours (this endpoint restarted
    /// on a new MAC, or moved) updates its entry at once instead of sending to the old one
    /// until it goes stale; the second announcement covers a lost first. Nothing is offered
    /// to a link that is down (a device that refuses it would be offered it every turn). One
    /// core announces for the port: [`DataCore::run`] has core 0 do it; a caller that polls
    /// its cores itself calls this on its first core before the first turn.
    pub fn announce(&mut self) {
        self.announcing = Some(Announcing {
            due: Instant::ZERO,
            left: 0,
            up: false,
        });
    }

    /// The announcer's turn when its time came: reads the link, and announces if owed.
    #[cold]
    fn announce_due(&mut self, now: Instant) {
        let Some(mut a) = self.announcing else {
            return;
        };
        let up = self.port.link().up;
        if up && !a.up {
            a.left = ANNOUNCE_NUM;
        }
        a.up = up;
        a.due = now + LINK_WATCH;
        if up && a.left > 0 {
            let mut frame = [0u8; 128];
            for ipv6 in [false, true] {
                let n = self.iface.announce(ipv6, &mut frame);
                if n > 0 {
                    self.out.send_raw(&frame[..n]);
                }
            }
            self.out.flush();
            a.left -= 1;
            if a.left > 0 {
                a.due = now + ANNOUNCE_INTERVAL;
            }
        }
        self.announcing = Some(a);
    }

    /// How often this core slept ([`DataCore::run`] with [`IdlePolicy::Sleep`]).
    pub fn idle_stats(&self) -> IdleStats {
        self.idle
    }

    /// Applies the STag changes the control thread sent, then takes the latest region snapshot
    /// (one pointer comparison when nothing changed): a region is published before any STag
    /// naming it is registered, so the snapshot has every region the replica names.
    fn memory_changes(&mut self) -> usize {
        // A revocation acknowledged promises no later store into the STag's memory: what this
        // thread placed around the cache is fenced first (`PlacementBatch`).
        PlacementBatch::settle();
        let invalidated = self.stags.invalidations();
        let (slots, regions) = (&mut self.slots, &*self.regions);
        let n = self.stags.poll_revoking(|reg| {
            materialize(slots, regions, RegionId(reg.memory.region));
        });
        if self.stags.invalidations() != invalidated {
            self.recheck_read_sources();
        }
        // After the STag commands: a table published before a registration was sent is seen
        // with it (`SharedRegions::generation`).
        let generation = self.shared_regions.generation();
        if generation != self.regions_generation {
            self.regions_generation = generation;
            self.regions = self.shared_regions.load_full();
        }
        n
    }

    /// Read Responses waiting to leave whose Data Source this core's table no longer grants
    /// stop ([`Connection::recheck_read_sources`]): after an STag was invalidated, before
    /// anything more is framed on this thread. Their Terminates leave with the turn's answer.
    fn recheck_read_sources(&mut self) {
        let table = self.stags.table();
        for s in self.slots.iter_mut().flatten() {
            s.c.get_mut().recheck_read_sources(table);
        }
    }

    /// One turn of the poll loop at `now`: commands and STag changes applied, frames from
    /// sibling cores and from the RX queue handled, due timers run, everything to send framed
    /// and transmitted, what the connections owe the ULP sent up. Returns the work done.
    pub fn poll(&mut self, now: Instant) -> usize {
        self.account_load(now);
        self.iface.set_time(now);
        // STag changes apply between packets, never in the middle of placing one.
        let mut work = self.memory_changes();
        let commands = self.commands(now);
        work += commands;
        if commands > 0 || self.send_owed {
            // What the commands posted leaves now, not after this turn's RX polls, with what
            // the last turn left for after the ULP's events (`set_ulp_polls`): an owed SACK
            // shares a packet with a posted operation's DATA.
            work += self.answer(now, false);
        }
        // Placements of the frames below share one store fence, when the batch ends: before
        // the events for them go up (`PlacementBatch`: what may leave within it).
        let batch = PlacementBatch::begin();
        for i in 0..BURST {
            match channel::poll(&self.dispatch_in) {
                Some(b) => {
                    // As for a burst below: the STag changes made before this frame was sent.
                    if i == 0 {
                        work += self.memory_changes();
                    }
                    self.stats.dispatched_in += 1;
                    self.frame_in(now, b, Via::Core);
                    work += 1;
                }
                None => break,
            }
        }
        drop(batch);
        self.free_spent();
        let mut rx = std::mem::take(&mut self.rx);
        for k in 0..self.rx_queues.len() {
            if !self.rx_queues[k].due(now) {
                continue;
            }
            let n = self.port.rx_burst(self.rx_queues[k].id, &mut rx, BURST);
            self.rx_queues[k].polled(now, n);
            work += n;
            // A registration is in this core's channel before the peer can learn its STag,
            // so before any frame naming it can be in this burst: applying the channel now,
            // after the burst and before its frames, means a legitimate write never meets a
            // replica that does not know its STag yet (`Coordinator::register`).
            if n > 0 {
                work += self.memory_changes();
            }
            let batch = PlacementBatch::begin();
            let mut frames = rx.drain(..).peekable();
            while let Some(b) = frames.next() {
                // The next frame's lines are asked for now, so that their misses run under
                // the work on this one (`port::prefetch`).
                let next = frames.peek();
                if let Some(next) = next {
                    prefetch::frame(next.data());
                }
                self.burst_goes_on = next.is_some();
                self.stats.frames_in += 1;
                if let Some(b) = self.single_segment(b) {
                    self.frame_in(now, b, Via::Wire);
                }
            }
            self.burst_goes_on = true;
            drop(batch);
            self.free_spent();
            if n > 0 {
                // What this burst called for (a SACK, the DATA a SACK let go, a completion)
                // goes before the next queue is polled (or, to a ULP that polls this core,
                // the events at once and the frames when it is back: `set_ulp_polls`).
                work += self.answer(now, true);
            }
        }
        self.rx = rx;
        // Packets that waited for an ARP or ND answer go first, in the order they were made.
        work += self.out.release_held(now, &mut self.iface);
        // RFC 4301 §8.2.1: a path MTU an ESP SA learnt, on whichever core the ICMP came in,
        // reaches the associations the SA protects on this one. One load a turn while none
        // changes; the per-packet path is untouched.
        let g = self.port.esp_pmtu_generation();
        if g != self.esp_pmtu_generation {
            self.esp_pmtu_generation = g;
            for k in 0..self.slots.len() {
                self.esp_path_mtu(now, k);
            }
        }
        for k in 0..self.slots.len() {
            let Some(s) = self.slots[k].as_mut() else {
                continue;
            };
            if s.c.get().poll_timeout().is_some_and(|t| t <= now) {
                s.c.get_mut().handle_timeout(now);
            }
            if s.pmtu_lowered_at
                .is_some_and(|t| now.saturating_since(t) >= PMTU_AGE)
            {
                self.raise_path_mtu(now, k);
            }
            self.plpmtud(now, k);
        }
        if self.announcing.is_some_and(|a| a.due <= now) {
            self.announce_due(now);
        }
        let work = work + self.answer(now, true);
        // The next message's lines, now that what this turn owed has left.
        prefetch::run_later();
        self.last_worked |= work > 0;
        work
    }

    /// What the turn so far called for leaves: sessions lent, packets framed and sent, events
    /// up. Run after commands and after each RX burst as well as at the end of a turn: a
    /// one-outstanding-write exchange (issue 13 item 4) otherwise waits for the turn's other
    /// queue polls and timers at both ends. Packets go first, a SACK the peer's completion
    /// waits for ahead of the events for our ULP; but when an operation of ours completed,
    /// its completion goes first (the ULP waits for it, and may answer with a packet), and
    /// with `ulp_first`, after a burst and at the end of a turn of a core the ULP polls
    /// ([`DataCore::set_ulp_polls`]), the packets wait for the ULP's return. Returns the
    /// packets and events.
    fn answer(&mut self, now: Instant, ulp_first: bool) -> usize {
        self.lend_sessions();
        let deferring = ulp_first && self.send_owed;
        // Already deferring, the answer is the same whatever completed: no scan.
        let completed = || {
            self.slots
                .iter()
                .flatten()
                .any(|s| s.c.get().owes_completion())
        };
        if !deferring && !completed() {
            let sent = self.send(now);
            return sent + self.events_up();
        }
        let events = self.events_up();
        if ulp_first && self.ulp_polls {
            self.send_owed = true;
            return events;
        }
        // What framing produced for the ULP (a send the pump failed, say) in this answer too.
        events + self.send(now) + self.events_up()
    }

    /// Hands the control thread what the connections owe the ULP, and rings its bell if
    /// anything went. Returns the upcalls.
    fn events_up(&mut self) -> usize {
        let n = self.upcalls();
        if std::mem::take(&mut self.rang_control) {
            self.control_bell.ring();
        }
        n
    }

    /// Frames what every connection has to send and hands the batch to the device. Returns
    /// the packets.
    fn send(&mut self, now: Instant) -> usize {
        self.send_owed = false;
        let mut work = 0;
        if self.out.congested() {
            // The ring may have drained since the last burst: room first, then new packets.
            // Frames sent are work: a core with frames waiting does not idle while they go.
            work += self.out.flush();
        }
        for k in 0..self.slots.len() {
            work += self.transmit(now, k);
        }
        self.out.flush();
        work
    }

    fn free_spent(&mut self) {
        if !self.spent.is_empty() {
            self.port.free_bulk(&mut self.spent);
        }
    }

    /// Charges the time since the last turn began to busy or idle, by what that turn did.
    /// A turn at the same instant (the look after a sleep is announced) only adds its work.
    fn account_load(&mut self, now: Instant) {
        let Some(last) = self.last_turn else {
            self.last_turn = Some(now);
            return;
        };
        if now <= last {
            return;
        }
        let ns = u64::try_from(now.saturating_since(last).as_nanos()).unwrap_or(u64::MAX);
        if self.last_worked {
            self.stats.busy_ns = self.stats.busy_ns.saturating_add(ns);
            self.stats.busy_turns += 1;
        } else {
            self.stats.idle_ns = self.stats.idle_ns.saturating_add(ns);
        }
        self.last_turn = Some(now);
        self.last_worked = false;
    }

    /// Frames everything the connection in slot `k` has to send into the TX batch. Returns
    /// the packets.
    fn transmit(&mut self, now: Instant, k: usize) -> usize {
        let Some(s) = self.slots[k].as_mut() else {
            return 0;
        };
        let h = Interface::header_len(s.peer);
        let mut n = 0;
        // A full device ring is backpressure: nothing more is framed until it drains, and the
        // association keeps what it has not sent (no packet freed, no retransmission timer).
        while !self.out.congested() {
            let Some((len, holes)) = s.c.poll_transmit_gather(now, &mut self.out.frame[h..]) else {
                break;
            };
            n += 1;
            self.out.send_sctp_gather(
                now,
                &mut self.iface,
                s.peer,
                len,
                holes,
                &self.regions,
                self.offload.tx,
            );
        }
        n
    }

    /// `buf` as one segment: a received chain is copied into a fresh buffer, so that the
    /// parsers, the dispatch rings and the control thread all see whole frames.
    fn single_segment(&mut self, buf: P::Buf) -> Option<P::Buf> {
        if !buf.gather_into(&mut self.linear) {
            return Some(buf);
        }
        self.stats.rx_chained += 1;
        let mut too_long = false;
        let copy = self
            .port
            .alloc_bulk(&mut self.linear_buf, 1, self.linear.len())
            .then(|| self.linear_buf.pop())
            .flatten()
            .and_then(|mut b| {
                // A fresh buffer shorter than asked for is as long as this port's buffers get.
                let Some(room) = b.data_mut().get_mut(..self.linear.len()) else {
                    too_long = true;
                    return None;
                };
                room.copy_from_slice(&self.linear);
                Some(b)
            });
        match copy {
            Some(b) => Some(b),
            None if too_long => {
                self.stats.rx_too_long += 1;
                None
            }
            None => {
                self.stats.rx_chained_dropped += 1;
                None
            }
        }
    }

    /// A session back from the control thread: into its connection, which applies what waited
    /// for it (the stream's chunks and operations, in order).
    fn session_return(&mut self, now: Instant, conn: ConnHandle, call: SessionCall) {
        let Some(k) = self.find(conn) else {
            return;
        };
        let Some(s) = self.slots[k].as_mut() else {
            return;
        };
        let place = Place {
            stags: self.stags.table(),
            regions: &self.regions,
        };
        s.c.get_mut().return_session(now, call, place);
        for stag in s.c.get_mut().take_peer_invalidated() {
            if let Some(reg) = self.stags.invalidate_local(stag) {
                let region = RegionId(reg.memory.region);
                materialize(&mut self.slots, &self.regions, region);
            }
        }
        self.op_results(conn, k);
        self.lend_sessions();
    }

    /// Reports the results of operations that waited for a session.
    fn op_results(&mut self, conn: ConnHandle, k: usize) {
        while let Some(r) = self.slots[k].as_mut().and_then(|s| s.c.poll_op_result()) {
            self.op_event(conn, r.op, r.stream, r.wr_id, r.result);
        }
    }

    /// What the ULP hears of an operation: a refusal, or a receive buffer posted.
    fn op_event(
        &mut self,
        conn: ConnHandle,
        op: &'static str,
        stream: Option<u16>,
        wr_id: Option<u64>,
        result: Result<Applied, PostError>,
    ) {
        let e = match result {
            Err(error) => Event::Refused {
                conn,
                op,
                stream,
                wr_id,
                error,
            },
            Ok(Applied::Posted { stream, qn, wr_id }) => Event::Posted {
                conn,
                stream,
                qn,
                wr_id,
            },
            Ok(Applied::Done | Applied::Deferred) => return,
        };
        let _ = self.up(Upcall::Event(e));
    }

    /// An SCTP packet for the connection in slot `k`, checked and placed against this core's
    /// STag replica. Only a packet its association authenticated (CRC32c, verification tag)
    /// teaches us where the peer is.
    fn deliver(
        &mut self,
        now: Instant,
        k: usize,
        sctp: &[u8],
        peer: IpAddr,
        src_mac: [u8; 6],
        verified: bool,
    ) {
        let place = Place {
            stags: self.stags.table(),
            regions: &self.regions,
        };
        let Some(s) = self.slots[k].as_mut() else {
            return;
        };
        let handled = s.c.get_mut().handle_checked(now, sctp, place, verified);
        trace::mark(trace::Point::Handled);
        match handled {
            Ok(()) => self.iface.confirm(peer, src_mac),
            Err(_) => self.stats.discarded += 1,
        }
        // RFC 5040 §5.3: what the peer invalidated is invalid here before the next packet; the
        // control thread revokes it on every core before the ULP hears of the Send.
        let peer_invalidated = s.c.get_mut().take_peer_invalidated();
        let mut revoked = Vec::new();
        for &stag in &peer_invalidated {
            if let Some(reg) = self.stags.invalidate_local(stag) {
                revoked.push(RegionId(reg.memory.region));
            }
        }
        // This connection's responses from it stop now; other connections' when the control
        // thread's revocation reaches this core (`memory_changes`).
        if !peer_invalidated.is_empty() {
            s.c.get_mut().recheck_read_sources(self.stags.table());
        }
        // What SCTP holds of that memory no longer reads it ([`materialize`]).
        for region in revoked {
            materialize(&mut self.slots, &self.regions, region);
        }
        let Some(s) = self.slots[k].as_mut() else {
            return;
        };
        // RFC 9260 §6.2 / §6.7: a packet that needs its own SACK (every second one, a
        // duplicate, any while gaps exist) gets it before the next packet of the burst is
        // handled; otherwise SACKs of a whole burst merge into one. A packet that opened the
        // window (a SACK) is a transmit opportunity too (§6.1: Max.Burst per opportunity).
        // On a core the ULP polls, the answer frames what the burst's last packet calls for,
        // behind the completions it made (`answer`, `set_ulp_polls`): a SACK owed for a Read
        // Response can then share the ULP's next packet.
        if self.burst_goes_on || !self.ulp_polls {
            if s.c.get().sack_due() {
                self.stats.sacks_between_packets += 1;
                self.transmit(now, k);
            } else if s.c.get().association().has_data_to_send() {
                self.transmit(now, k);
            }
        }
    }

    /// Sends the control messages connections set aside, with their sessions, to the control
    /// thread (events ring; held in order when it is full, never dropped).
    fn lend_sessions(&mut self) {
        for k in 0..self.slots.len() {
            while let Some(call) = self.slots[k].as_mut().and_then(|s| s.c.poll_session_call()) {
                let Some(conn) = self.slots[k].as_ref().map(|s| s.conn) else {
                    break;
                };
                self.stats.sessions_lent += 1;
                let _ = self.up(Upcall::Session {
                    conn,
                    call: Box::new(call),
                });
            }
        }
    }

    fn commands(&mut self, now: Instant) -> usize {
        let mut n = 0;
        while self.held.len() < MAX_HELD_UPCALLS {
            let Some(cmd) = channel::poll(&self.commands) else {
                break;
            };
            n += 1;
            self.stats.commands += 1;
            match cmd {
                Command::Adopt { conn, c, peer_mac } => self.adopt(now, conn, *c, peer_mac),
                Command::Op { conn, op } => {
                    // The STag changes the ULP made before submitting it (a `reg_mr` then a
                    // `post_recv` naming it), as `apply_now` does: the turn's first look may
                    // have come before them, and the op's checks read this core's table.
                    self.memory_changes();
                    self.op(now, conn, op)
                }
                Command::Neighbour(ip, mac) => self.iface.learn_shared(ip, mac),
                Command::Forget(conn) => {
                    if let Some(k) = self.find(conn) {
                        // Frames it was holding for the ULP's return (`set_ulp_polls`: the
                        // ULP heard the Closed and forgot it before this turn sent them) go
                        // into the batch first, and what it still owes the ULP goes up.
                        if self.send_owed {
                            self.transmit(now, k);
                        }
                        self.abort_live(now, k);
                        // Sessions away at the control thread never come back to a forgotten
                        // connection: what waited for them is reported now.
                        if let Some(s) = self.slots[k].as_mut() {
                            s.c.get_mut().abandon_lent();
                        }
                        self.op_results(conn, k);
                        if let Some(mut s) = self.slots[k].take() {
                            self.drain_owed(conn, &mut s.c);
                            self.retire(&s);
                        }
                    }
                }
                Command::Packet { buf, conn } => {
                    self.stats.from_control += 1;
                    self.frame_in(now, buf, Via::Control(conn));
                }
                Command::SessionReturn { conn, call } => self.session_return(now, conn, *call),
                Command::Report => {
                    let report = self.report();
                    let _ = self.up(Upcall::Event(Event::Report(Box::new(report))));
                }
            }
        }
        n
    }

    /// The ULP forgets the connection in slot `k` while its association is still open: it is
    /// aborted first (RFC 9260 §9.1), as dropping it silently would leave the peer's end open
    /// until its retransmissions or heartbeats fail, and our ULP's work on it outstanding for
    /// ever. The ABORT goes out at once, even past a backlogged ring (the association's last
    /// packet, as for one refused a slot in `adopt`), and the Closed, with every completion
    /// and flushed receive it brings (`docs/verbs.md`: outstanding work completes Flushed),
    /// is what `drain_owed` then sends up.
    fn abort_live(&mut self, now: Instant, k: usize) {
        let Some(s) = self.slots[k].as_mut() else {
            return;
        };
        if s.c.get().is_closed() {
            return;
        }
        let peer = s.peer;
        let c = s.c.get_mut();
        c.abort();
        let h = Interface::header_len(peer);
        while let Some(len) = c.poll_transmit(now, &mut self.out.frame[h..]) {
            self.out
                .send_sctp(now, &mut self.iface, peer, len, self.offload.tx);
        }
    }

    fn find(&self, conn: ConnHandle) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.conn == conn))
    }

    fn adopt(
        &mut self,
        now: Instant,
        conn: ConnHandle,
        mut c: Connection,
        peer_mac: Option<[u8; 6]>,
    ) {
        let peer = c.peer_ip();
        c.set_tx_checksum_offload(self.offload.tx);
        c.use_regions(Arc::clone(&self.shared_regions));
        // DESIGN.md: PPID 17 goes to the control thread, which runs the §6 machine.
        c.set_remote_sessions(true);
        let slot = match self.slots.iter().position(Option::is_none) {
            Some(k) => Some(k),
            None if self.slots.len() < MAX_CONNECTIONS_PER_CORE => {
                self.slots.push(None);
                Some(self.slots.len() - 1)
            }
            // A closed connection's slot, once it has told the ULP everything.
            None => self.slots.iter().position(|s| {
                s.as_ref().is_some_and(|s| {
                    s.c.get().is_closed() && !s.c.get().owes_ulp() && !s.c.get().sessions_lent()
                })
            }),
        };
        if let Some(mac) = peer_mac {
            self.iface.confirm(peer, mac);
        }
        // RFC 1191 §5: the path MTU ICMP gave for this peer is the path's, not an earlier
        // association's: a new one starts there rather than sending full-size packets the
        // small hop fragments (their DF cleared by the interface's table) for good. Where the
        // outbound SA protecting the association holds a path MTU, that one is the path's
        // (`esp_path_mtu` below, RFC 4301 §8.2.1), and the interface's entry only the inner
        // IP size `esp_path_mtu` told it.
        let under_sa = sa_sctp_mtu(&self.iface, &*self.port, peer, c.association()).is_some();
        let link_mtu = c.association().path_mtu();
        let mut pmtu_lowered_at = None;
        if let Some(mtu) = self.iface.lowered_path_mtu(peer).filter(|_| !under_sa) {
            // The entry is an SCTP size plus the IP header, the link's ESP headroom already
            // off (`path_too_big`, `plpmtud`): not `lower_path_mtu`, which takes it off again.
            // The fragmentation floor is no measurement (RFC 8899 §5.4: an association's
            // BASE_PLPMTU was unconfirmed, perhaps when it closed): a new association starts
            // at BASE_PLPMTU, the smallest size discovery uses (§5.1.2), and the floor stays.
            let sctp = if peer.is_ipv4() && mtu == IPV4_FRAGMENT_FLOOR {
                plpmtud::BASE_PLPMTU
            } else {
                mtu.saturating_sub(Interface::ip_header_len(peer))
            };
            if c.lower_sctp_mtu(sctp) {
                pmtu_lowered_at = Some(now);
            }
        }
        let Some(k) = slot else {
            self.stats.refused += 1;
            // The peer hears an ABORT rather than silence, and the ULP hears Closed.
            c.abort();
            let h = Interface::header_len(peer);
            while let Some(len) = c.poll_transmit(now, &mut self.out.frame[h..]) {
                self.out
                    .send_sctp(now, &mut self.iface, peer, len, self.offload.tx);
            }
            self.drain_owed(conn, &mut Quiet::new(c));
            return;
        };
        self.stats.adopted += 1;
        let peer_port = c.association().peer_port();
        if let Some(old) = self.slots[k].take() {
            self.retire(&old);
        }
        self.slots[k] = Some(Slot {
            conn,
            c: Quiet::new(c),
            peer,
            peer_port,
            link_mtu,
            pmtu_lowered_at,
        });
        // RFC 4301 §8.2.1: a path MTU the SA protecting it already holds applies from the
        // start, as the interface's per-peer one above (RFC 1191 §5).
        self.esp_path_mtu(now, k);
    }

    /// An operation from the ULP, applied by its connection (or held there, in order, while
    /// its stream's session is at the control thread).
    /// An operation of the ULP's applied now by the thread that polls this core with the ULP
    /// (an inline data core), and what it calls for sent at once: the command ring's hand-off
    /// and the wait for the next turn saved (a write's post, issue 13 item 4). Given back, for
    /// the ring, while commands wait there (they came first) or upcalls are held (as
    /// [`DataCore::poll`] takes no command then).
    pub fn apply_now(&mut self, now: Instant, conn: ConnHandle, op: Op) -> Result<(), Op> {
        if !self.commands.is_empty() || self.held.len() >= MAX_HELD_UPCALLS {
            return Err(op);
        }
        self.stats.commands += 1;
        // As a turn does: the STag changes made before the operation first.
        self.memory_changes();
        self.op(now, conn, op);
        trace::mark(trace::Point::Applied);
        // With what earlier bursts left for the ULP's return (`set_ulp_polls`): a SACK owed
        // is bundled with this operation's DATA.
        self.answer(now, false);
        // The time since the turn began is busy time (the load counters).
        self.last_worked = true;
        Ok(())
    }

    fn op(&mut self, now: Instant, conn: ConnHandle, op: Op) {
        let (name, stream, wr_id) = (op.name(), op.stream(), op.wr_id());
        let Some(k) = self.find(conn) else {
            let _ = self.up(Upcall::Event(Event::Unknown {
                conn,
                op: name,
                stream,
                wr_id,
            }));
            return;
        };
        let Some(s) = self.slots[k].as_mut() else {
            return;
        };
        let result = s.c.get_mut().apply(now, op, self.stags.table());
        self.op_event(conn, name, stream, wr_id, result);
    }

    fn frame_in(&mut self, now: Instant, buf: P::Buf, via: Via) {
        let dispatched = !matches!(via, Via::Wire);
        enum Next {
            Done,
            Dispatch(usize),
            ToControl,
            /// A datagram reassembled from IPv4 or IPv6 fragments, whole in the reply buffer.
            Whole(usize),
        }
        // RFC 9260 App. A checked by the device (RX checksum offload), or by software below.
        let verdict = if self.offload.rx {
            buf.l4_checksum_verdict()
        } else {
            None
        };
        // The reply buffer is the core's, not zeroed per frame: a reply writes all it sends.
        let rx = self.iface.receive(buf.data(), &mut self.reply);
        let next = match rx {
            Rx::Reply(n) => {
                match self.iface.take_reply_fragment_mtu() {
                    // An IPv6 Echo Reply to a request that came in fragments (RFC 8200 §5).
                    Some(mtu) => {
                        self.out
                            .send_raw_fragments(&mut self.iface, &self.reply[..n], mtu)
                    }
                    None => self.out.send_raw(&self.reply[..n]),
                }
                Next::Done
            }
            Rx::Consumed | Rx::Dropped(_) | Rx::Fragment(None) => Next::Done,
            Rx::Fragment(Some(n)) => Next::Whole(n),
            // RFC 9260 Appendix C ICMP5: the association the quoted packet names, on the core
            // that owns it (the peer's packets of that 5-tuple are steered there).
            // RFC 4301 §6.1.2: the IPsec port judges it by the SA its SPI names, and records
            // the PMTU there; every core's associations under that SA take it at their next
            // turn (`esp_pmtu_generation`), so no dispatch to an owner.
            Rx::EspTooBig(e) => {
                if self.port.esp_too_big(&e) {
                    self.stats.esp_pmtu_taken += 1;
                } else {
                    self.stats.icmp_ignored += 1;
                }
                Next::Done
            }
            Rx::TooBig(t) | Rx::ProtocolUnreachable(t) => {
                match self.assoc_of(t.peer, t.peer_port, t.local_port) {
                    Some(k) if matches!(rx, Rx::TooBig(_)) => {
                        self.path_too_big(now, k, &t);
                        Next::Done
                    }
                    // RFC 9260 Appendix C ICMP8: the peer's host has no SCTP; an ABORT with the T
                    // bit, if the quoted tag is the peer's (or our INIT's, in COOKIE-WAIT: ICMP6).
                    Some(k) => {
                        let ended = self.slots[k].as_mut().is_some_and(|s| {
                            s.c.get_mut().icmp_protocol_unreachable(t.vtag, t.init_tag)
                        });
                        if ended {
                            self.stats.icmp_aborts += 1;
                        } else {
                            self.stats.icmp_ignored += 1;
                        }
                        Next::Done
                    }
                    None => match self.steer.owner(t.peer, t.local, t.peer_port, t.local_port) {
                        owner if owner != self.index && !dispatched => Next::Dispatch(owner),
                        _ => {
                            self.stats.icmp_ignored += 1;
                            Next::Done
                        }
                    },
                }
            }
            Rx::Sctp(f) => {
                let peer = f.ip.src();
                let (peer_port, local_port) = match f.sctp.get(..4) {
                    Some(p) => (
                        u16::from_be_bytes([p[0], p[1]]),
                        u16::from_be_bytes([p[2], p[3]]),
                    ),
                    // Too short for a common header: the control thread's endpoint counts it.
                    None => (0, 0),
                };
                // A connection held here is this core's (only its owner adopts it), so the
                // RSS hash is computed only for frames of no connection here.
                // Our port too: an INIT to another port of ours from a peer that has an
                // association here is out of the blue, for the control thread's endpoint to
                // answer (RFC 9260 §8.4 rule 3); the association discarded it.
                let found = self.slots.iter().position(|s| {
                    s.as_ref().is_some_and(|s| {
                        s.peer == peer
                            && s.peer_port == peer_port
                            && s.c.get().association().local_port() == local_port
                            && !s.c.get().association().is_closed()
                    })
                });
                let owner = match found {
                    Some(_) => self.index,
                    None if dispatched => self.index,
                    None => self.steer.owner(peer, f.ip.dst(), peer_port, local_port),
                };
                match found {
                    _ if owner != self.index => Next::Dispatch(owner),
                    _ if verdict == Some(false) => {
                        self.stats.checksum_bad += 1;
                        Next::Done
                    }
                    Some(k) => {
                        self.stats.to_connections += 1;
                        self.deliver(now, k, f.sctp, peer, f.src_mac, verdict == Some(true));
                        Next::Done
                    }
                    None => Next::ToControl,
                }
            }
        };
        // Whatever ARP or ND taught this core, every core should know: the answer to one
        // core's solicitation may arrive on another core's queue.
        // With upcalls backed up, the news is dropped (counted): the other cores learn the
        // neighbour from their own ARP or ND, later.
        if let Some((ip, mac)) = self.iface.take_learnt() {
            if self.held.len() < MAX_HELD_UPCALLS {
                let _ = self.up(Upcall::Learnt {
                    core: self.index,
                    ip,
                    mac,
                });
            } else {
                self.stats.learnt_dropped += 1;
            }
        }
        match next {
            // Freed with the rest of the burst (`free_spent`).
            Next::Done => self.spent.push(buf),
            // RFC 1122 §3.3.2: the reassembled packet, copied to a buffer of its own, is
            // received as any whole frame (it is no fragment: this goes one level deep).
            Next::Whole(n) => {
                self.spent.push(buf);
                let fresh = self
                    .port
                    .alloc_bulk(&mut self.linear_buf, 1, n)
                    .then(|| self.linear_buf.pop())
                    .flatten();
                // The fragments are counted by the interface: a datagram lost here is counted
                // apart from the frames taken (`unaccounted`).
                match fresh {
                    Some(mut b) => match b.data_mut().get_mut(..n) {
                        Some(room) => {
                            room.copy_from_slice(&self.reply[..n]);
                            // RFC 4301 §5.2, RFC 4303 §3.4.1: a reassembled ESP datagram
                            // (`Interface::reassemble_esp`) is opened by the IPsec port, then
                            // received as any frame; one that does not open is its SA's drop.
                            let esp = reassembled_esp(&self.reply[..n]);
                            match if esp { self.port.open_esp(b) } else { Some(b) } {
                                Some(b) => {
                                    self.stats.reassembled += 1;
                                    // What answers it knows it came in fragments.
                                    self.iface.set_reassembled(true);
                                    self.frame_in(now, b, via);
                                    self.iface.set_reassembled(false);
                                }
                                None => self.stats.reassembled_esp_dropped += 1,
                            }
                        }
                        None => {
                            self.stats.reassembled_dropped += 1;
                            self.spent.push(b);
                        }
                    },
                    None => self.stats.reassembled_dropped += 1,
                }
            }
            Next::Dispatch(k) => match self.dispatch_out[k].try_send(buf) {
                Ok(()) => {
                    self.stats.dispatched_out += 1;
                    self.doorbells[k].ring();
                }
                Err(_) => self.stats.dispatch_dropped += 1,
            },
            Next::ToControl => match self.packets_up.try_send(PacketUp {
                buf,
                closed: match via {
                    Via::Control(conn) => Some(conn),
                    Via::Wire | Via::Core => None,
                },
            }) {
                Ok(()) => {
                    self.stats.to_control += 1;
                    self.rang_control = true;
                }
                Err(_) => self.stats.control_dropped += 1,
            },
        }
    }

    /// The slot of this core's live association with `peer`:`peer_port` on `local_port`.
    fn assoc_of(&self, peer: IpAddr, peer_port: u16, local_port: u16) -> Option<usize> {
        self.slots.iter().position(|s| {
            s.as_ref().is_some_and(|s| {
                let a = s.c.get().association();
                s.peer == peer
                    && s.peer_port == peer_port
                    && a.local_port() == local_port
                    && !a.is_closed()
            })
        })
    }

    /// RFC 9260 Appendix C ICMP6-ICMP7 and §7.3: a Fragmentation Needed or Packet Too Big
    /// naming the association in slot `k` lowers its path MTU if the quoted verification tag
    /// is the one we send it with (the peer's), or is 0 in a quoted INIT whose Initiate Tag is
    /// ours; otherwise, or if it would not lower the path MTU (RFC 1191 §3, RFC 8201 §4: never
    /// raised from ICMP; below the minimum), it is ignored, counted.
    fn path_too_big(&mut self, now: Instant, k: usize, t: &TooBig) {
        let Some(s) = self.slots[k].as_mut() else {
            return;
        };
        let c = s.c.get_mut();
        let a = c.association();
        let tag_ok = match t.vtag {
            0 => t.init_tag == Some(a.local_tag()),
            v => v == a.peer_tag(),
        };
        let peer = s.peer;
        // Whether the ICMP lowered the path MTU or named the size in use: only such an ICMP
        // confirms the lowered estimate (RFC 1191 §6.3). A PTB above it answered a probe.
        let mut confirms = false;
        match t.path_mtu() {
            Some(mtu) if tag_ok && c.lower_path_mtu(mtu, peer) => {
                self.stats.pmtu_lowered += 1;
                confirms = true;
            }
            Some(mtu) if tag_ok => {
                // RFC 8899 §6.2.1.4: not below the path MTU, so about a probe above it.
                let sctp = c.plpmtud_ptb(now, mtu, peer);
                self.stats.icmp_ignored += 1;
                confirms = sctp <= c.association().path_mtu();
            }
            _ => self.stats.icmp_ignored += 1,
        }
        if confirms && c.association().path_mtu() < s.link_mtu {
            // RFC 1191 §6.3: a valid ICMP confirms the lowered estimate; it ages from now.
            s.pmtu_lowered_at = Some(now);
        }
        if confirms {
            // §6.9: a chunk sent before the drop, larger than the new path MTU, leaves without
            // DF from now on (IPv4), or as source fragments (IPv6, RFC 8200 §4.5: no router
            // fragments it): the interface learns where the path MTU lies. Renewed by
            // every valid ICMP, should the interface's small table have let it go. The hop's
            // own MTU where it is below what the association may go to (its minimum): a
            // packet of that minimum must then be fragmented too (RFC 1191 §3 goes to 68).
            let ip_mtu = c.association().path_mtu() + Interface::ip_header_len(peer);
            let ip_mtu = t.path_mtu().map_or(ip_mtu, |m| m.min(ip_mtu));
            self.iface.set_path_mtu(peer, ip_mtu);
            // RFC 1191 §6.3, RFC 8201 §5.3: the interface's estimate is the peer's (the path's),
            // not this association's; every association to the peer whose lowered estimate
            // ages (and would make the interface forget it) ages from this ICMP too.
            for s in self.slots.iter_mut().flatten() {
                if s.peer == peer && s.pmtu_lowered_at.is_some() {
                    s.pmtu_lowered_at = Some(now);
                }
            }
        }
        // RFC 1191 §5, RFC 8201 §5, RFC 9260 §7.3: the estimate is the destination's. The
        // other associations of this core to the peer take the hop's size too, whether or
        // not it lowered the one the ICMP named (already below it, or probing above it):
        // their packets above the interface's entry would otherwise leave without DF (or as
        // our IPv6 fragments), their path MTU and MULPDU unmoved and no ICMP of their own to
        // tell them (an independent review). Other cores' associations learn it from their
        // own ICMP: each core keeps its own interface.
        if let Some(mtu) = t.path_mtu().filter(|_| tag_ok) {
            for (j, o) in self.slots.iter_mut().enumerate() {
                let Some(o) = o.as_mut().filter(|o| j != k && o.peer == peer) else {
                    continue;
                };
                let oc = o.c.get_mut();
                if !oc.association().is_closed() && oc.lower_path_mtu(mtu, peer) {
                    self.stats.pmtu_lowered += 1;
                    o.pmtu_lowered_at = Some(now);
                }
            }
        }
    }

    /// RFC 4301 §8.2.1 (propagation) with RFC 9260 §7.3: the association in slot `k` takes
    /// the path MTU of the outbound SA protecting it, less that SA's overhead and the inner IP
    /// header ([`Port::esp_sctp_mtu`]); lowered only. An IPv4 packet framed before, now too
    /// large, leaves without DF (`Interface::set_path_mtu`, on the inner header: in transport
    /// mode it is the outer one, so the ESP packet crosses the small hop fragmented).
    fn esp_path_mtu(&mut self, now: Instant, k: usize) {
        let Some(s) = self.slots[k].as_mut() else {
            return;
        };
        let c = s.c.get_mut();
        let a = c.association();
        if a.is_closed() {
            return;
        }
        let peer = s.peer;
        let Some(local) = self.iface.address_for(peer) else {
            return;
        };
        let (lport, pport) = (a.local_port(), a.peer_port());
        let Some(sctp) = self.port.esp_sctp_mtu(local, peer, lport, pport) else {
            return;
        };
        if c.lower_sctp_mtu(sctp) {
            self.stats.esp_pmtu_lowered += 1;
            s.pmtu_lowered_at = Some(now);
        }
        let ip_mtu = c.association().path_mtu() + Interface::ip_header_len(peer);
        let ip_mtu = ip_mtu.min(sctp + Interface::ip_header_len(peer));
        // RFC 8899 §5.4: while BASE_PLPMTU is unconfirmed the entry keeps letting routers
        // fragment (`plpmtud`); an SA's news, which any SA on any core may bring, is no
        // confirmation.
        let floor = peer.is_ipv4() && fragments_allowed(c.association());
        self.iface.set_path_mtu(
            peer,
            if floor {
                ip_mtu.min(IPV4_FRAGMENT_FLOOR)
            } else {
                ip_mtu
            },
        );
    }

    /// [`PMTU_AGE`] after ICMP last lowered or confirmed the path MTU of the association in
    /// slot `k` (RFC 1191 §6.3, RFC 8201 §5.3): it goes back to the link's size, or to what the
    /// SA protecting it still allows (its own PMTU ages out the same way, RFC 4301 §8.2.2),
    /// and the interface forgets the lowered estimate (DF again over IPv4, no source
    /// fragments over IPv6). New DATA and DDP segments are cut at the larger size (RFC 5043
    /// §9: the MULPDU follows). With RFC 8899 discovery on, its probes search up instead,
    /// and only what they confirm is raised.
    fn raise_path_mtu(&mut self, now: Instant, k: usize) {
        let Some(s) = self.slots[k].as_mut() else {
            return;
        };
        let peer = s.peer;
        let c = s.c.get_mut();
        let closed = c.association().is_closed();
        if c.plpmtud_on() && !closed {
            // RFC 8899 §4.6.2, §5.1.1: with discovery on, only a probe that passed raises the
            // path MTU. The search starts here (its probe no larger than the SA allows,
            // `plpmtud`); what it confirms reaches the interface there, and discovery's own
            // PMTU_RAISE_TIMER takes over from ICMP's aging.
            s.pmtu_lowered_at = None;
            c.plpmtud_search(now);
            return;
        }
        let sa_cap = sa_sctp_mtu(&self.iface, &*self.port, peer, c.association());
        let to = sa_cap.map_or(s.link_mtu, |cap| cap.min(s.link_mtu));
        let before = c.association().path_mtu();
        // Still capped by a fresh SA PMTU: confirmed, it ages from now. A closed association
        // ages the peer's estimate once, for the associations after it (RFC 1191 §5), and
        // nothing of its own is raised or counted.
        s.pmtu_lowered_at = (to < s.link_mtu && !closed).then_some(now);
        if !closed {
            if to <= before {
                return;
            }
            c.set_path_mtu(to);
            self.stats.pmtu_raised += 1;
        }
        match sa_cap {
            Some(_) if to < s.link_mtu => self
                .iface
                .set_path_mtu(peer, to + Interface::ip_header_len(peer)),
            _ => self.iface.forget_path_mtu(peer),
        }
    }

    /// RFC 8899 for the association in slot `k`: a path MTU its discovery moved reaches the
    /// interface (DF and source fragments follow it; PLPMTUD's own PMTU_RAISE_TIMER takes
    /// over from ICMP's aging), and a probe due goes, with DF and whole. One test a turn while
    /// neither is.
    fn plpmtud(&mut self, now: Instant, k: usize) {
        let Some(s) = self.slots[k].as_mut() else {
            return;
        };
        // Asked without `get_mut`, which marks the connection as one to transmit for: this
        // runs for every slot every turn, and took every idle association off the quiet
        // path (a transmit call each, every turn).
        if !s.c.get().association().plpmtud_wants() {
            return;
        }
        let c = s.c.get_mut();
        let peer = s.peer;
        if let Some(mtu) = c.take_plpmtu_change() {
            let Some(p) = c.association().plpmtud() else {
                return;
            };
            s.pmtu_lowered_at = None;
            if p.fragments_allowed() && peer.is_ipv4() {
                // RFC 8899 §5.4: BASE_PLPMTU unconfirmed, what is not a probe leaves without
                // DF above RFC 791's 576 bytes, for a silent hop below BASE_PLPMTU to fragment.
                self.iface.set_path_mtu(peer, IPV4_FRAGMENT_FLOOR);
            } else if mtu >= s.link_mtu & !3 {
                // MAX_PLPMTU is the link's size in whole words: a search that reached it is
                // at the link's size.
                self.iface.forget_path_mtu(peer);
            } else {
                self.iface
                    .set_path_mtu(peer, mtu + Interface::ip_header_len(peer));
            }
            match p.last_change() {
                plpmtud::Change::BlackHole => self.stats.plpmtud_black_holes += 1,
                plpmtud::Change::Raised => self.stats.plpmtud_raised += 1,
                plpmtud::Change::BaseConfirmed => {}
            }
        }
        if !c.probe_due() {
            return;
        }
        // RFC 4301 §8.2.1: a probe sealed above the SA's path MTU would leave in fragments (or
        // without a tunnel's DF) and confirm a size that crosses only so.
        if let Some(ceiling) = sa_sctp_mtu(&self.iface, &*self.port, peer, c.association()) {
            c.limit_probe(now, ceiling);
        }
        let h = Interface::header_len(peer);
        if let Some(len) = c.poll_probe(now, &mut self.out.frame[h..]) {
            if self
                .out
                .send_sctp_probe(&mut self.iface, peer, len, self.offload.tx)
            {
                self.stats.plpmtud_probes += 1;
            }
        }
    }

    /// Sends an upcall, or holds it (behind any already held) if the ring is full. Returns
    /// whether it went.
    fn up(&mut self, u: Upcall) -> bool {
        if !self.held.is_empty() {
            self.held.push_back(u);
            return false;
        }
        match self.events_up.try_send(u) {
            Ok(()) => {
                self.rang_control = true;
                true
            }
            Err(TrySendError::Disconnected(_)) => true,
            Err(TrySendError::Full(u)) => {
                self.stats.events_held += 1;
                self.held.push_back(u);
                false
            }
        }
    }

    /// Moves what the connections owe the ULP to the event ring, in order, until it is full.
    /// Returns how many went.
    fn upcalls(&mut self) -> usize {
        let mut n = 0;
        while let Some(u) = self.held.pop_front() {
            match self.events_up.try_send(u) {
                Ok(()) => {
                    n += 1;
                    self.rang_control = true;
                }
                Err(TrySendError::Disconnected(_)) => n += 1,
                Err(TrySendError::Full(u)) => {
                    self.held.push_front(u);
                    return n;
                }
            }
        }
        let slots = self.slots.len();
        let first = if self.upcall_first < slots {
            self.upcall_first
        } else {
            0
        };
        // Two plain loops, not a chained iterator: this runs every turn of an idle core.
        for k in first..slots {
            if !self.upcalls_of(k, &mut n) {
                return n;
            }
        }
        for k in 0..first {
            if !self.upcalls_of(k, &mut n) {
                return n;
            }
        }
        n
    }

    /// Moves what the connection in slot `k` owes the ULP to the event ring, counting them
    /// in `n`; false once the ring is full (the slot is then served last next time).
    #[inline(always)]
    fn upcalls_of(&mut self, k: usize, n: &mut usize) -> bool {
        while let Some(s) = self.slots[k].as_mut() {
            let conn = s.conn;
            // Completions first: a Closed indication must not overtake the completions of
            // sends it ended (the ULP may forget the connection on Closed).
            let e = if let Some(completion) = s.c.poll_completion() {
                Event::Completion { conn, completion }
            } else if let Some(indication) = s.c.poll_indication() {
                // Held in order with the indication if the ring is full.
                if let Some(u) = retagged(conn, &s.c, &indication) {
                    let _ = self.up(u);
                }
                Event::Indication { conn, indication }
            } else {
                break;
            };
            if !self.up(Upcall::Event(e)) {
                self.upcall_first = k + 1;
                return false;
            }
            *n += 1;
        }
        true
    }

    /// Sends up (or holds) everything `c` still owes the ULP, completions first.
    fn drain_owed(&mut self, conn: ConnHandle, c: &mut Quiet) {
        while let Some(completion) = c.poll_completion() {
            let _ = self.up(Upcall::Event(Event::Completion { conn, completion }));
        }
        while let Some(indication) = c.poll_indication() {
            if let Some(u) = retagged(conn, c, &indication) {
                let _ = self.up(u);
            }
            let _ = self.up(Upcall::Event(Event::Indication { conn, indication }));
        }
    }

    /// What `show fwd stats` and `show assoc` show: counters, interface, associations.
    /// Keeps the counts of a connection that leaves the core.
    fn retire(&mut self, s: &Slot) {
        self.retired.add(&ConnTotals::of(
            s.c.get().stats(),
            s.c.get().association().stats(),
        ));
    }

    pub fn report(&self) -> CoreReport {
        let mut conn_totals = self.retired;
        for s in self.slots.iter().flatten() {
            conn_totals.add(&ConnTotals::of(
                s.c.get().stats(),
                s.c.get().association().stats(),
            ));
        }
        CoreReport {
            conn_totals,
            core: self.index,
            stats: self.stats(),
            iface: *self.iface.stats(),
            assocs: self
                .slots
                .iter()
                .flatten()
                .map(|s| AssocInfo {
                    conn: s.conn,
                    peer: s.peer,
                    peer_port: s.peer_port,
                    state: format!("{:?}", s.c.get().association().state()),
                    closed: s.c.get().association().state() == ddpdk_dataplane::sctp::State::Closed,
                    streams: s.c.get().association().streams(),
                    sessions: (0..s.c.get().association().streams())
                        .filter_map(|k| s.c.get().opened_session_state(k).map(|st| (k, st)))
                        .collect(),
                    stats: *s.c.get().stats(),
                    receive_room: s.c.get().receive_room(),
                    sctp: *s.c.get().association().stats(),
                    cwnd: s.c.get().association().cwnd(),
                    peer_rwnd: s.c.get().association().peer_rwnd(),
                    rto: s.c.get().association().rto(),
                    srtt: s.c.get().association().srtt(),
                    local_port: s.c.get().association().local_port(),
                    path_mtu: s.c.get().association().path_mtu(),
                    path_active: s.c.get().association().path_active(),
                    error_count: s.c.get().association().error_count(),
                    plpmtud: s.c.get().association().plpmtud().map(|p| PlpmtudInfo {
                        state: p.state(),
                        base: p.base(),
                        stats: p.stats,
                    }),
                })
                .collect(),
            stags: self.stags.table().len(),
            upcalls_held: self.held.len(),
        }
    }
}

struct CoreLink<B> {
    commands: Sender<Command<B>>,
    /// Commands the core's ring had no room for, in order.
    outbox: VecDeque<Command<B>>,
}

/// The control thread's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ControlStats {
    /// Packets the cores handed up.
    pub packets: u64,
    /// INIT ACKs, ABORTs and other replies sent.
    pub replies: u64,
    /// Packets the endpoint ignored (it counts why).
    pub ignored: u64,
    /// Connections made from COOKIE ECHOs.
    pub accepted: u64,
    /// Connections opened by the ULP.
    pub connected: u64,
    /// Neighbours learnt by one core and shared with the others (one per core told).
    pub neighbours_shared: u64,
    /// Packets of a live association that reached the control thread and went to its core.
    pub forwarded: u64,
    /// Of those, dropped because the core's command queue was full.
    pub forward_dropped: u64,
    /// Of the packets forwarded, those the core sent back: the association had closed there,
    /// its Closed not yet taken here; then answered as out of the blue (RFC 9260 §8.4).
    pub returned_closed: u64,
    /// DDP Stream Session Control messages (PPID 17) the cores forwarded, each run through its
    /// stream's RFC 5043 §6 session machine here.
    pub session_messages: u64,
    /// Device flow rules installed for associations (with `flow_rules` on), refused by the
    /// device (software dispatch then steers those), and removed when they ended.
    pub flow_rules: u64,
    pub flow_rules_refused: u64,
    pub flow_rules_removed: u64,
    /// Rules the device would not remove (they stay until the port closes).
    pub flow_rules_remove_failed: u64,
    /// Initiates pending a ULP decision now, and those answered with a Terminate because
    /// the pending-Initiate limit was reached (RFC 5043 §6.4), every core's.
    pub initiates_pending: u64,
    pub initiates_over_limit: u64,
    /// Associations a peer completed beyond [`RuntimeConfig::associations_per_peer`] live
    /// ones from its address, aborted.
    pub peer_limit_refused: u64,
    /// Remote invalidations (Send with Invalidate) revoked on every core before the ULP heard.
    pub peer_invalidations: u64,
    /// Of those, revocations a core did not acknowledge in time (it is stalled): their
    /// receives reach the ULP without the STag (`Indication::Received::invalidated`).
    pub invalidation_timeouts: u64,
    pub tx: TxStats,
    /// The SCTP endpoint's own: INITs answered or refused and why, cookies, out-of-the-blue
    /// replies (RFC 9260 §5.1, §8.4).
    pub endpoint: ddpdk_dataplane::sctp::EndpointStats,
}

/// The control side of the endpoint: see the module documentation. It runs on the thread that
/// calls [`Control::poll`] (the application's, or one of its own).
pub struct Control<P: Port> {
    out: Tx<P>,
    iface: Interface,
    listener: Listener,
    memory: Memory,
    steer: Steering,
    cores: Vec<CoreLink<P::Buf>>,
    /// Rung after a command is put in a core's ring.
    doorbells: Arc<[Doorbell]>,
    /// The cores ring this one after handing the control thread work.
    bell: Arc<Doorbell>,
    outbox_limit: usize,
    /// Upcalls taken from the cores' event ring a poll: its depth.
    event_budget: usize,
    /// Events waiting for the ULP ([`Control::poll_event`]) beyond which no more upcalls are
    /// taken from the cores: they wait in the cores' ring and then in their connections,
    /// whose a_rwnd closes (RFC 9260 §6.2), so a ULP that polls but does not take its events
    /// holds the peers back instead of growing this queue with every message they send.
    ready_limit: usize,
    /// [`RuntimeConfig::associations_per_peer`].
    associations_per_peer: usize,
    /// Live associations by peer address and port: a packet of one that reaches the control
    /// thread goes to its core (never a second association for the same peer). Keyed by what
    /// a peer chooses, so std's keyed hasher; the tables keyed by our own handles use FxHash.
    live: HashMap<(IpAddr, u16), ConnHandle>,
    /// Each live connection's verification tag and peer port, as the endpoint was told them
    /// (`Endpoint::note_live`): a packet of the association from another address of the
    /// peer is then dropped, not answered with an ABORT that would end it.
    live_tags: HashMap<ConnHandle, (u32, u16)>,
    /// Connections a core sent a packet back for, their association closed there
    /// ([`PacketUp::closed`]) and out of `live`, until their Closed is taken (or they are
    /// forgotten): the peer address of each, which they still count against
    /// ([`RuntimeConfig::associations_per_peer`]; their slots are still held).
    closing: FxHashMap<ConnHandle, IpAddr>,
    packets: Receiver<PacketUp<P::Buf>>,
    events: Receiver<Upcall>,
    next_conn: u64,
    /// Which core owns each connection.
    owners: FxHashMap<ConnHandle, usize>,
    /// Associations are steered by device flow rules, and the rule of each.
    flow_rules: bool,
    flows: FxHashMap<ConnHandle, FlowRule>,
    ready: VecDeque<Event>,
    /// Events waiting behind a remote invalidation's revocation ([`Control::gate`]).
    gated: VecDeque<(Event, Option<Revocation>)>,
    /// The streams with an Initiate of the peer's waiting for the ULP's answer (RFC 5043
    /// §6.3), from the `InitiateReceived` its core sent up until the ULP answers it through
    /// [`Control::submit`] (Accept, Reject or Terminate, whoever calls it: verbs' `accept_qp`
    /// or the application itself), its session ends, or its connection closes or is
    /// forgotten ([`Control::initiate_pending`]).
    initiates: FxHashSet<(ConnHandle, u16)>,
    /// Of those, the ones answered and not yet ended: a refusal of the answer leaves the
    /// Initiate pending ([`Event::Refused`]: nothing changed), and it is pending here again.
    answered: FxHashSet<(ConnHandle, u16)>,
    /// Connections whose [`Indication::Closed`] came up from their core and that are not
    /// forgotten yet ([`Control::is_closed`]).
    closed: FxHashSet<ConnHandle>,
    /// How many Initiates of the peer's each stream's core sent up, counted as this side
    /// takes their events in ([`Control::initiates_received`]), until the connection is
    /// forgotten.
    initiates_received: FxHashMap<(ConnHandle, u16), u64>,
    stats: ControlStats,
}

impl<P: Port> Control<P> {
    /// The sizes of the connections this endpoint makes (untagged queues, their depth, ...).
    pub fn conn_config(&self) -> ConnConfig {
        self.listener.config()
    }

    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    /// The data cores' doorbells: ringing them wakes sleeping cores (to see a stop flag, say).
    pub fn core_doorbells(&self) -> Arc<[Doorbell]> {
        Arc::clone(&self.doorbells)
    }

    /// Registering and deregistering go through here; a deregistration waits for every core.
    pub fn memory_mut(&mut self) -> &mut Memory {
        &mut self.memory
    }

    pub fn listener(&self) -> &Listener {
        &self.listener
    }

    /// The SCTP settings of associations opened or accepted from now on (RFC 9260 §16's
    /// parameters); existing ones keep theirs, as with a sysctl.
    pub fn set_sctp_config(
        &mut self,
        cfg: ddpdk_dataplane::sctp::Config,
    ) -> Result<(), &'static str> {
        self.listener.endpoint_mut().set_config(cfg)
    }

    pub fn stats(&self) -> ControlStats {
        ControlStats {
            tx: self.out.stats,
            initiates_pending: self.listener.pending_limit().pending() as u64,
            initiates_over_limit: self.listener.pending_limit().over_limit(),
            endpoint: *self.listener.endpoint().stats(),
            ..self.stats
        }
    }

    pub fn cores(&self) -> usize {
        self.cores.len()
    }

    /// Shows every frame the control thread queues for transmission to `tap`.
    pub fn set_tap(&mut self, tap: Tap) {
        self.out.tap = Some(tap);
    }

    /// The doorbell the data cores ring when they hand the control thread packets or events:
    /// the thread that polls this `Control` attaches to it and sleeps on it when idle.
    pub fn doorbell(&self) -> Arc<Doorbell> {
        Arc::clone(&self.bell)
    }

    /// The core that owns `conn`.
    pub fn owner(&self, conn: ConnHandle) -> Option<usize> {
        self.owners.get(&conn).copied()
    }

    /// Whether `conn`'s association is over: its [`Indication::Closed`] came up from its core
    /// (this side's [`Control::poll`] took it in, whether or not the ULP has polled the
    /// event yet), and it is not forgotten. Its core may still hold the connection, but
    /// nothing will ever run on it again (RFC 9260 §9, §10: a closed association carries no
    /// more data): verbs' `create_qp` refuses a queue pair on it. A handle is never reused,
    /// so the answer never goes back to `false` but with [`Control::forget`] (then the handle
    /// is unknown: [`Control::owner`] answers `None`).
    pub fn is_closed(&self, conn: ConnHandle) -> bool {
        self.closed.contains(&conn)
    }

    /// Connections made and not forgotten.
    pub fn connections(&self) -> impl Iterator<Item = (ConnHandle, usize)> + '_ {
        self.owners.iter().map(|(c, k)| (*c, *k))
    }

    /// Opens an association to `peer`, `port`; it goes to its owning core, which sends the
    /// INIT. [`RuntimeError::Busy`] while that core takes no commands (its ring and the
    /// outbox in front of it full).
    pub fn connect(
        &mut self,
        now: Instant,
        peer: IpAddr,
        port: u16,
    ) -> Result<ConnHandle, RuntimeError> {
        // An IPv4-mapped peer is an IPv4 peer: its packets come as IPv4 and are steered so.
        let peer = match peer {
            IpAddr::V6(a) => a.to_ipv4_mapped().map_or(peer, IpAddr::V4),
            v4 => v4,
        };
        if let Some(why) = not_a_peer(peer) {
            return Err(RuntimeError::NotAPeer(peer, why));
        }
        if self.iface.is_ours(peer) {
            return Err(RuntimeError::NotAPeer(peer, "it is our own address"));
        }
        let local = self
            .iface
            .address_for(peer)
            .ok_or(RuntimeError::NoAddress)?;
        // One association between two endpoints (RFC 9260 §5.2: an INIT for one that exists is
        // a restart or a collision, never a second association).
        if let Some(&c) = self.live.get(&(peer, port)) {
            return Err(RuntimeError::Exists(c));
        }
        let c = self.listener.connect(now, peer, port);
        let core = self
            .steer
            .owner(peer, local, port, c.association().local_port());
        if self.cores[core].outbox.len() >= self.outbox_limit {
            // Its core takes no commands now: a connection queued for it would wait as long.
            return Err(RuntimeError::Busy);
        }
        let conn = self.new_handle(core);
        self.live.insert((peer, port), conn);
        self.note_live(conn, &c);
        self.steer_flow(conn, local, &c, core);
        self.stats.connected += 1;
        self.command(
            core,
            Command::Adopt {
                conn,
                c: Box::new(c),
                peer_mac: None,
            },
            true,
        )?;
        Ok(conn)
    }

    /// Hands `op` to the connection's core. Its refusal, if any, comes back as
    /// [`Event::Refused`].
    pub fn submit(&mut self, conn: ConnHandle, op: Op) -> Result<(), RuntimeError> {
        let core = self.owner(conn).ok_or(RuntimeError::NoSuchConnection)?;
        let answer = answered_initiate(&op);
        self.command(core, Command::Op { conn, op }, false)?;
        self.answering(conn, answer);
        Ok(())
    }

    /// Whether an Initiate of the peer's on `stream` of `conn` waits for the ULP's answer
    /// (RFC 5043 §6.3): its `InitiateReceived` came up, and since then no Accept, Reject or
    /// Terminate of the stream was submitted (by anyone holding this `Control`), its session
    /// did not end, its connection is neither closed nor forgotten. What the core would take
    /// an Accept for, as far as this thread can know: verbs' `accept_qp` answers
    /// `NoPendingInitiate` at once, rather than leave the core to refuse it later (and also
    /// while the application has not polled the Initiate's event,
    /// [`Control::initiates_received`]).
    pub fn initiate_pending(&self, conn: ConnHandle, stream: u16) -> bool {
        self.initiates.contains(&(conn, stream))
    }

    /// How many `InitiateReceived` events of `stream` of `conn` this side has taken in from
    /// the core (its [`Control::poll`]), the one [`Control::initiate_pending`] answers for
    /// the last of them. A ULP that counts the ones it has polled ([`Control::poll_event`])
    /// knows whether it has seen the pending one: verbs' `accept_qp` takes only an Initiate
    /// whose event the application polled.
    pub fn initiates_received(&self, conn: ConnHandle, stream: u16) -> u64 {
        self.initiates_received
            .get(&(conn, stream))
            .copied()
            .unwrap_or(0)
    }

    /// An answer to the peer's Initiate on `stream` went to its core: no longer pending
    /// (RFC 5043 §6.3: one answer to an Initiate).
    fn answering(&mut self, conn: ConnHandle, stream: Option<u16>) {
        if let Some(stream) = stream {
            if self.initiates.remove(&(conn, stream)) {
                self.answered.insert((conn, stream));
            }
        }
    }

    /// Keeps [`Control::initiates`] as the cores report: an Initiate comes up, its session
    /// ends, its association closes, or the core refuses the ULP's answer to it (nothing
    /// changed, so it is still pending, unless it was not: `NotPending`).
    fn track_initiates(&mut self, e: &Event) {
        match e {
            Event::Indication {
                conn,
                indication: Indication::Session { stream, event },
            } => match event {
                SessionEvent::InitiateReceived { .. } => {
                    self.answered.remove(&(*conn, *stream));
                    self.initiates.insert((*conn, *stream));
                    // Not for a connection forgotten meanwhile (the entry would stay).
                    if self.owners.contains_key(conn) {
                        *self.initiates_received.entry((*conn, *stream)).or_insert(0) += 1;
                    }
                }
                // Withdrawn by the peer's Terminate (§6.4), refused over the pending limit,
                // answered and ended, ended with the association.
                SessionEvent::SessionTerminated { .. } => {
                    self.initiates.remove(&(*conn, *stream));
                    self.answered.remove(&(*conn, *stream));
                }
                _ => {}
            },
            Event::Indication {
                conn,
                indication: Indication::Closed(_),
            } => self.forget_initiates(*conn),
            Event::Refused {
                conn,
                op: "accept" | "accept_rdmap" | "reject" | "terminate",
                stream: Some(stream),
                error,
                ..
            } => {
                let key = (*conn, *stream);
                if self.answered.remove(&key)
                    && *error != PostError::Session(LocalError::NotPending)
                {
                    self.initiates.insert(key);
                }
            }
            _ => {}
        }
    }

    fn forget_initiates(&mut self, conn: ConnHandle) {
        self.initiates.retain(|&(c, _)| c != conn);
        self.answered.retain(|&(c, _)| c != conn);
    }

    /// [`Control::submit`] from the thread that also polls `inline` (data cores run by the
    /// ULP's own loop): an operation for one of them is applied at once
    /// ([`DataCore::apply_now`]) when nothing for that core waits ahead of it, here or in its
    /// ring; otherwise, and for any other core, it goes through the ring.
    pub fn submit_inline(
        &mut self,
        conn: ConnHandle,
        op: Op,
        inline: &mut [DataCore<P>],
        now: Instant,
    ) -> Result<(), RuntimeError> {
        let core = self.owner(conn).ok_or(RuntimeError::NoSuchConnection)?;
        let op = match inline.iter_mut().find(|k| k.index() == core) {
            Some(k) if self.cores[core].outbox.is_empty() => {
                let answer = answered_initiate(&op);
                match k.apply_now(now, conn, op) {
                    Ok(()) => {
                        self.answering(conn, answer);
                        return Ok(());
                    }
                    Err(op) => op,
                }
            }
            _ => op,
        };
        let answer = answered_initiate(&op);
        self.command(core, Command::Op { conn, op }, false)?;
        self.answering(conn, answer);
        Ok(())
    }

    /// Drops a connection from its core; the handle is unknown from here on. One whose
    /// association is not closed yet is aborted first (RFC 9260 §9.1: the peer hears an ABORT
    /// and its end closes too), and what it owes the ULP still comes, in order, after this
    /// returns: its completions, the sends and receives it ends `Flushed`, and its
    /// [`Indication::Closed`] (`LocalAbort`), so that a queue pair on it moves to Error with
    /// its work completed once (`docs/verbs.md`, "Errors end the stream"). After the `Closed`
    /// (the usual time to call it) it only drops the connection.
    pub fn forget(&mut self, conn: ConnHandle) -> Result<(), RuntimeError> {
        let core = self.owner(conn).ok_or(RuntimeError::NoSuchConnection)?;
        self.command(core, Command::Forget(conn), true)?;
        self.owners.remove(&conn);
        self.closed.remove(&conn);
        self.forget_initiates(conn);
        self.initiates_received.retain(|&(c, _), _| c != conn);
        self.live.retain(|_, c| *c != conn);
        self.closing.remove(&conn);
        self.forget_live(conn);
        self.unsteer_flow(conn);
        Ok(())
    }

    fn note_live(&mut self, conn: ConnHandle, c: &Connection) {
        let a = c.association();
        let key = (a.local_tag(), a.peer_port());
        self.listener.endpoint_mut().note_live(key.0, key.1);
        self.live_tags.insert(conn, key);
    }

    /// A live association's local tag changed (a peer restart): the endpoint forgets the old
    /// one and knows the new.
    fn retag_live(&mut self, conn: ConnHandle, local_tag: u32) {
        if let Some((tag, port)) = self.live_tags.get(&conn).copied() {
            let endpoint = self.listener.endpoint_mut();
            endpoint.forget_live(tag, port);
            endpoint.note_live(local_tag, port);
            self.live_tags.insert(conn, (local_tag, port));
        }
    }

    fn forget_live(&mut self, conn: ConnHandle) {
        if let Some((tag, port)) = self.live_tags.remove(&conn) {
            self.listener.endpoint_mut().forget_live(tag, port);
        }
    }

    /// With flow rules on, has the device steer `c`'s packets (to `local`) to `core`'s RX
    /// queue, before the core adopts it. A refused rule leaves the software dispatch to it.
    fn steer_flow(&mut self, conn: ConnHandle, local: IpAddr, c: &Connection, core: usize) {
        if !self.flow_rules {
            return;
        }
        let flow = SctpFlow {
            local,
            peer: c.peer_ip(),
            local_port: c.association().local_port(),
            peer_port: c.association().peer_port(),
        };
        match self.out.port().steer_sctp(&flow, core as u16) {
            Ok(rule) => {
                self.stats.flow_rules += 1;
                self.flows.insert(conn, rule);
            }
            Err(_) => self.stats.flow_rules_refused += 1,
        }
    }

    /// Removes the flow rule of an association that is over.
    fn unsteer_flow(&mut self, conn: ConnHandle) {
        if let Some(rule) = self.flows.remove(&conn) {
            match self.out.port().unsteer_sctp(rule) {
                Ok(()) => self.stats.flow_rules_removed += 1,
                Err(_) => self.stats.flow_rules_remove_failed += 1,
            }
        }
    }

    /// Commands waiting in the control side's outbox for room in core `core`'s command ring:
    /// a stalled core's (nothing a peer sends reaches the control thread through it) grow
    /// only by the ULP's commands, which `connect` and `submit` refuse past the ring's depth.
    pub fn commands_waiting(&self, core: usize) -> usize {
        self.cores.get(core).map_or(0, |l| l.outbox.len())
    }

    /// Asks every core for a [`CoreReport`]; they come back as [`Event::Report`]. A core
    /// whose outbox already holds a request answers that one: no second is queued
    /// (a stalled core's requests would pile up without bound; callers take one report a
    /// core).
    pub fn request_reports(&mut self) {
        for k in 0..self.cores.len() {
            if self.cores[k]
                .outbox
                .iter()
                .any(|c| matches!(c, Command::Report))
            {
                continue;
            }
            let _ = self.command(k, Command::Report, true);
        }
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.ready.pop_front()
    }

    /// Events taken from the cores that the ULP has not taken yet ([`Control::poll_event`]),
    /// those behind a revocation included. At [`RuntimeConfig::ring_depth`] ×
    /// [`READY_PER_RING_ENTRY`] [`Control::poll`] takes no more until the ULP does.
    pub fn events_waiting(&self) -> usize {
        self.ready.len() + self.gated.len()
    }

    fn new_handle(&mut self, core: usize) -> ConnHandle {
        let conn = ConnHandle(self.next_conn);
        self.next_conn += 1;
        self.owners.insert(conn, core);
        conn
    }

    /// Queues a command to core `k`. `must` commands (a connection, a forget, a report) are
    /// never refused: losing one would lose an association.
    fn command(&mut self, k: usize, cmd: Command<P::Buf>, must: bool) -> Result<(), RuntimeError> {
        let link = &mut self.cores[k];
        if link.outbox.is_empty() {
            match link.commands.try_send(cmd) {
                Ok(()) => {
                    self.doorbells[k].ring();
                    return Ok(());
                }
                Err(TrySendError::Disconnected(_)) => return Ok(()),
                Err(TrySendError::Full(cmd)) => {
                    link.outbox.push_back(cmd);
                    return Ok(());
                }
            }
        }
        if !must && link.outbox.len() >= self.outbox_limit {
            return Err(RuntimeError::Busy);
        }
        link.outbox.push_back(cmd);
        Ok(())
    }

    /// One turn of the control loop: packets the cores handed up (INIT, COOKIE ECHO, OOTB),
    /// upcalls, queued commands. Returns the work done.
    pub fn poll(&mut self, now: Instant) -> usize {
        let mut work = 0;
        for _ in 0..BURST {
            let Some(b) = channel::poll(&self.packets) else {
                break;
            };
            work += 1;
            self.stats.packets += 1;
            self.packet(now, b.buf, b.closed);
        }
        // At most a ring's worth a poll: the cores refill the ring while it drains (a peer
        // whose control messages make the round trip keeps it full), and a poll that never
        // returned answered no INIT and let the ULP reach no completion queue (an
        // independent review). What is left is taken at the next poll; work says so. None
        // while the ULP has not taken what it was given ([`Control::events_waiting`]): then
        // work does not count what waits in the ring, which only the ULP's taking frees.
        let room = self.ready_limit.saturating_sub(self.events_waiting());
        for _ in 0..self.event_budget.min(room) {
            let Some(u) = channel::poll(&self.events) else {
                break;
            };
            work += 1;
            match u {
                Upcall::Event(e) => {
                    if let Event::Indication {
                        conn,
                        indication: Indication::Closed(_),
                    } = &e
                    {
                        let conn = *conn;
                        // Not once forgotten: the Closed of a connection forgotten before it
                        // closed still comes, and the handle is unknown by then.
                        if self.owners.contains_key(&conn) {
                            self.closed.insert(conn);
                        }
                        self.live.retain(|_, c| *c != conn);
                        self.closing.remove(&conn);
                        self.forget_live(conn);
                        self.unsteer_flow(conn);
                    }
                    self.track_initiates(&e);
                    self.gate(e);
                }
                Upcall::Session { conn, mut call } => {
                    // RFC 5043 §6: the session machine runs here, then the session goes back
                    // to the core that holds the stream's later chunks for it.
                    call.run();
                    self.stats.session_messages += 1;
                    if let Some(core) = self.owner(conn) {
                        let _ = self.command(core, Command::SessionReturn { conn, call }, true);
                    }
                }
                Upcall::Retagged { conn, local_tag } => self.retag_live(conn, local_tag),
                Upcall::Learnt { core, ip, mac } => {
                    for k in (0..self.cores.len()).filter(|&k| k != core) {
                        if self.command(k, Command::Neighbour(ip, mac), false).is_ok() {
                            self.stats.neighbours_shared += 1;
                        }
                    }
                }
            }
        }
        work += self.release_gated();
        for (link, doorbell) in self.cores.iter_mut().zip(self.doorbells.iter()) {
            while let Some(cmd) = link.outbox.pop_front() {
                match link.commands.try_send(cmd) {
                    Ok(()) => {
                        work += 1;
                        doorbell.ring();
                    }
                    Err(TrySendError::Disconnected(_)) => work += 1,
                    Err(TrySendError::Full(cmd)) => {
                        link.outbox.push_front(cmd);
                        break;
                    }
                }
            }
        }
        // Frames sent are work: a loop with frames waiting for the ring does not back off
        // while they go.
        work + self.out.flush()
    }

    /// Whether frames this control side made wait for room in the device's ring (its loop
    /// retries within [`LIGHT_SLEEP`] then, as a data core does: nothing wakes it when the
    /// ring drains), or commands wait in an outbox for room in a core's command ring (a
    /// session's return among them, its stream stalled meanwhile), which nothing rings for
    /// either when the core drains it.
    pub fn tx_backlogged(&self) -> bool {
        self.out.retry_soon() || self.cores.iter().any(|l| !l.outbox.is_empty())
    }

    /// An event from a core on its way to the ULP. A Send with Invalidate's `Received` waits
    /// until every core has acknowledged the STag's revocation (RFC 5040 §5.3 with RFC 5041
    /// §8.3.1 item 6's guarantee: once the ULP hears that the peer invalidated it, nothing is
    /// placed through it anywhere), and every event after it waits behind it, so the ULP sees
    /// them in the order they came. The revocation does not block this thread: the cores may
    /// be polled by it.
    fn gate(&mut self, e: Event) {
        let revocation = match &e {
            Event::Indication {
                indication:
                    Indication::Received {
                        invalidated: Some(stag),
                        ..
                    },
                ..
            } => {
                self.stats.peer_invalidations += 1;
                // Unknown: the ULP deregistered it meanwhile, which every core acknowledged.
                // A revocation of it already under way (a Local Invalidate) is joined.
                self.memory.start_revoke(*stag).ok()
            }
            _ => None,
        };
        if revocation.is_none() && self.gated.is_empty() {
            self.ready.push_back(e);
        } else {
            self.gated.push_back((e, revocation));
        }
    }

    /// Lets gated events through as their revocations complete. A revocation some core never
    /// acknowledged (stalled past the revocation timeout) lets its event through all the same,
    /// counted in [`ControlStats::invalidation_timeouts`] (holding every later event forever
    /// would stop the endpoint), but without the STag: the ULP is not told it was invalidated,
    /// since a core may still place through it (RFC 5041 §8.3.1 item 6). That core has the
    /// invalidation in its channel or a resync request, so it drops the STag before its next
    /// packet once it runs again.
    fn release_gated(&mut self) -> usize {
        self.memory.tend_revocations();
        let mut n = 0;
        while let Some((_, revocation)) = self.gated.front() {
            let mut late = false;
            if let Some(r) = *revocation {
                match self.memory.revocation(r) {
                    None => break,
                    Some(Ok(())) => {}
                    Some(Err(_)) => late = true,
                }
            }
            if let Some((mut e, _)) = self.gated.pop_front() {
                if late {
                    self.stats.invalidation_timeouts += 1;
                    if let Event::Indication {
                        indication: Indication::Received { invalidated, .. },
                        ..
                    } = &mut e
                    {
                        *invalidated = None;
                    }
                }
                self.ready.push_back(e);
                n += 1;
            }
        }
        n
    }

    fn packet(&mut self, now: Instant, buf: P::Buf, closed: Option<ConnHandle>) {
        let mut reply = [0u8; 128];
        let Rx::Sctp(f) = self.iface.receive(buf.data(), &mut reply) else {
            // Cores hand up only SCTP packets for our addresses.
            self.stats.ignored += 1;
            return;
        };
        let peer = f.ip.src();
        let peer_port = f.sctp.get(..2).map(|p| u16::from_be_bytes([p[0], p[1]]));
        // Its association closed on its core: from now on out of the blue to the endpoint
        // (RFC 9260 §8.4), so that a SHUTDOWN ACK the peer repeats because our SHUTDOWN
        // COMPLETE was lost is answered (rule 5) while the ULP lags behind the Closed.
        if let Some(conn) = closed {
            self.stats.returned_closed += 1;
            let closing = &mut self.closing;
            self.live.retain(|&(ip, _), c| {
                if *c == conn {
                    closing.insert(conn, ip);
                }
                *c != conn
            });
            self.forget_live(conn);
            self.unsteer_flow(conn);
        }
        // A live association's, unless it is for another port of ours (out of the blue, as
        // on the data core).
        let ours = f.sctp.get(2..4).map(|p| u16::from_be_bytes([p[0], p[1]]))
            == Some(self.listener.endpoint().config().local_port);
        if let Some(&conn) = peer_port
            .filter(|_| ours)
            .and_then(|p| self.live.get(&(peer, p)))
        {
            if let Some(core) = self.owner(conn) {
                self.stats.forwarded += 1;
                if self
                    .command(core, Command::Packet { buf, conn }, false)
                    .is_err()
                {
                    self.stats.forward_dropped += 1;
                }
                return;
            }
        }
        let h = Interface::header_len(peer);
        let mut out = std::mem::take(&mut self.out.frame);
        let accept = self
            .listener
            .handle(now, peer, f.sctp, &mut out[h..], self.memory.place());
        self.out.frame = out;
        match accept {
            Accept::Ignored => self.stats.ignored += 1,
            // RFC 9260 §5.1: the INIT ACK goes to the INIT's source; its link address is
            // where the INIT came from, and nothing is learnt from an unauthenticated packet.
            Accept::Reply(n) => {
                self.stats.replies += 1;
                self.out.send_sctp_to(&mut self.iface, f.src_mac, peer, n);
            }
            Accept::Connection(c)
                if self.live.keys().filter(|(p, _)| *p == peer).count()
                    + self.closing.values().filter(|&&p| p == peer).count()
                    >= self.associations_per_peer =>
            {
                // One peer address may not take every slot: the association it completed is
                // aborted at once (the peer hears why not as it would from a full core), and
                // the ULP hears nothing of it.
                self.stats.peer_limit_refused += 1;
                self.refuse(now, c, peer, f.src_mac);
            }
            Accept::Connection(c) => {
                let peer_port = c.association().peer_port();
                let core =
                    self.steer
                        .owner(peer, f.ip.dst(), peer_port, c.association().local_port());
                self.stats.accepted += 1;
                let conn = self.new_handle(core);
                self.live.insert((peer, peer_port), conn);
                self.note_live(conn, &c);
                self.steer_flow(conn, f.ip.dst(), &c, core);
                let _ = self.command(
                    core,
                    Command::Adopt {
                        conn,
                        c,
                        peer_mac: Some(f.src_mac),
                    },
                    true,
                );
                self.ready.push_back(Event::Accepted {
                    conn,
                    peer,
                    peer_port,
                    core,
                });
            }
        }
    }
}

impl<P: Port> Control<P> {
    /// Aborts the association `c` the control thread will not hand to a core (RFC 9260
    /// §9.1): the ABORT goes to the peer at `mac`; the ULP hears nothing of it.
    fn refuse(&mut self, now: Instant, mut c: Box<Connection>, peer: IpAddr, mac: [u8; 6]) {
        c.abort();
        let h = Interface::header_len(peer);
        while let Some(n) = c.poll_transmit(now, &mut self.out.frame[h..]) {
            self.out.send_sctp_to(&mut self.iface, mac, peer, n);
        }
    }
}

impl<P: Port> std::fmt::Debug for Control<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("cores", &self.cores.len())
            .field("connections", &self.owners.len())
            .field("stats", &self.stats)
            .finish()
    }
}

impl<P: Port> std::fmt::Debug for DataCore<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataCore")
            .field("index", &self.index)
            .field("connections", &self.slots.iter().flatten().count())
            .field("stats", &self.stats)
            .finish()
    }
}

/// RFC 791 §3.1: "Every internet destination must be able to receive a datagram of 576
/// octets". While RFC 8899 discovery has BASE_PLPMTU unconfirmed, IPv4 packets to the peer
/// above it leave without DF (RFC 8899 §5.4).
const IPV4_FRAGMENT_FLOOR: usize = 576;

/// Whether RFC 8899 discovery of association `a` has BASE_PLPMTU unconfirmed (§5.4).
fn fragments_allowed(a: &Association) -> bool {
    a.plpmtud().is_some_and(plpmtud::Plpmtud::fragments_allowed)
}

/// RFC 4301 §8.2.1: the SCTP packet size the outbound SA protecting association `a` to `peer`
/// leaves of its path MTU ([`Port::esp_sctp_mtu`]), if it holds one.
fn sa_sctp_mtu<P: Port>(
    iface: &Interface,
    port: &P,
    peer: IpAddr,
    a: &Association,
) -> Option<usize> {
    let local = iface.address_for(peer)?;
    port.esp_sctp_mtu(local, peer, a.local_port(), a.peer_port())
}

/// What this core's associations hold of `region` in SCTP's send queues is copied in there
/// ([`Connection::materialize_region`]): a registration of it is being revoked, and what is
/// sent afterwards must not read it.
fn materialize(slots: &mut [Option<Slot>], regions: &RegionTable, region: RegionId) {
    for s in slots.iter_mut().flatten() {
        s.c.materialize_region(region, regions);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// The RSS verification vectors (Microsoft, "Verifying the RSS Hash Calculation"): the
    /// software hash agrees with what a NIC computes, so a NIC with SCTP RSS and this key
    /// steers each association to the core [`Steering`] names.
    #[test]
    fn toeplitz_matches_the_rss_verification_vectors() {
        let v4 = |src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16| {
            let mut i = Vec::new();
            i.extend_from_slice(&src);
            i.extend_from_slice(&dst);
            i.extend_from_slice(&sp.to_be_bytes());
            i.extend_from_slice(&dp.to_be_bytes());
            toeplitz(&RSS_KEY, &i)
        };
        assert_eq!(
            v4([66, 9, 149, 187], [161, 142, 100, 80], 2794, 1766),
            0x51cc_c178
        );
        assert_eq!(
            v4([199, 92, 111, 2], [65, 69, 140, 83], 14230, 4739),
            0xc626_b0ea
        );
        assert_eq!(
            v4([24, 19, 198, 95], [12, 22, 207, 184], 12898, 38024),
            0x5c2b_394a
        );
        let src: Ipv6Addr = "3ffe:2501:200:1fff::7"
            .parse()
            .unwrap_or(Ipv6Addr::UNSPECIFIED);
        let dst: Ipv6Addr = "3ffe:2501:200:3::1"
            .parse()
            .unwrap_or(Ipv6Addr::UNSPECIFIED);
        let mut i = Vec::new();
        i.extend_from_slice(&src.octets());
        i.extend_from_slice(&dst.octets());
        i.extend_from_slice(&2794u16.to_be_bytes());
        i.extend_from_slice(&1766u16.to_be_bytes());
        assert_eq!(toeplitz(&RSS_KEY, &i), 0x4020_7d3d);
    }

    /// A doorbell wakes its sleeping thread, and work put in the ring just before the thread
    /// announced its sleep is never lost (the thread's look at its ring after the
    /// announcement finds it). The sleeper sleeps an hour unless woken: each of the 2000 rounds
    /// ends only through the protocol, racing the ring against the sleep.
    #[test]
    fn doorbell_wakes_its_sleeper_and_loses_no_work() {
        use std::sync::atomic::AtomicU64;
        let bell = Arc::new(Doorbell::default());
        let pending = Arc::new(AtomicU64::new(0));
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let sleeper = {
            let (bell, pending) = (Arc::clone(&bell), Arc::clone(&pending));
            std::thread::spawn(move || {
                bell.attach();
                let mut handled = 0u64;
                while handled < 2000 {
                    let take = || pending.swap(0, Ordering::AcqRel) as usize;
                    let n = match take() {
                        0 => bell.sleep_unless(Duration::from_secs(3600), take),
                        n => n,
                    };
                    handled += n as u64;
                    if n > 0 {
                        let _ = done_tx.send(handled);
                    }
                }
            })
        };
        for round in 1..=2000u64 {
            pending.fetch_add(1, Ordering::AcqRel);
            bell.ring();
            let got = done_rx
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("round {round}: the sleeper was never woken"));
            assert_eq!(got, round);
        }
        sleeper.join().unwrap_or_else(|_| panic!("sleeper"));
    }

    /// The key is the steering's: ports that all land on one core under the well-known key
    /// (what a peer who knows it would choose) spread under another. Under a key the
    /// product draws at start a peer cannot aim its associations at one core (an
    /// independent review: the default key let 256 of them fill one core's slots).
    #[test]
    fn steering_follows_its_key() {
        let local = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
        let peer = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
        let known = Steering::new(2);
        let aimed: Vec<u16> = (1..=u16::MAX)
            .filter(|&p| known.owner(peer, local, p, 5000) == 0)
            .take(64)
            .collect();
        let drawn = Steering::new(2).with_key([0x3c; 40]);
        let on_1 = aimed
            .iter()
            .filter(|&&p| drawn.owner(peer, local, p, 5000) == 1)
            .count();
        assert!(on_1 > 8 && on_1 < 56, "{on_1} of 64 on core 1");
    }

    /// Ownership depends on the whole 5-tuple and spreads associations over the cores.
    #[test]
    fn steering_spreads_associations_over_cores() {
        let s = Steering::new(2);
        let local = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
        let mut seen = [0usize; 2];
        for k in 0..64u8 {
            let peer = IpAddr::V4(Ipv4Addr::new(198, 18, 1, k));
            seen[s.owner(peer, local, 5000, 5000)] += 1;
        }
        assert!(seen[0] > 8 && seen[1] > 8, "{seen:?}");
        assert_eq!(Steering::new(1).owner(local, local, 1, 2), 0);
        // A device's larger table: entry hash % 512, queue entry % cores.
        let (s3, t3) = (Steering::with_reta(3, 512), Steering::with_reta(3, 128));
        let peer = IpAddr::V4(Ipv4Addr::new(66, 9, 149, 187));
        let dst = IpAddr::V4(Ipv4Addr::new(161, 142, 100, 80));
        // 0x51ccc178 % 512 = 376 -> queue 1; % 128 = 120 -> queue 0.
        assert_eq!(s3.owner(peer, dst, 2794, 1766), 376 % 3);
        assert_eq!(t3.owner(peer, dst, 2794, 1766), 120 % 3);
    }
}
