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
//!
//! [`Session`]: crate::session::Session

mod api;
mod fifo;
mod lend;
mod listener;
mod rdmap;
mod route;
mod send;
mod stream;

pub use api::*;
pub use lend::SessionCall;
pub use listener::{Accept, Listener};
pub use stream::{HELD_ITEM_COST, MAX_HELD_OPS};

use route::*;
use send::*;
use stream::*;

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::Arc;

use ddpdk_dataplane::ddp::{self, Regions, StreamRx};
use ddpdk_dataplane::ddp::{Target, TxError};
use ddpdk_dataplane::mem::{Pd, PostedBuffer, QueueFull, StreamId};
use ddpdk_dataplane::net::Interface;
use ddpdk_dataplane::sctp::{
    serial, Association, CloseReason, Discard, Event as SctpEvent, Hole, Instant,
    Message as SctpMessage, SendError,
};
use ddpdk_dataplane::wire::crc32c;
use ddpdk_dataplane::wire::ddp::max_payload;
use ddpdk_dataplane::wire::sctp::ADAPTATION_INDICATION_DDP;

use crate::memory::{Place, RegionId, RegionTable, SharedRegions};
use crate::session::{Event as SessionEvent, LocalError, PendingLimit, State, TerminationReason};

/// SCTP chunk type of COOKIE ECHO (RFC 9260 §3.3.11).
const COOKIE_ECHO: u8 = 10;

/// How many retransmission timeouts a stream waits for DDP-SSNs missing before the peer's
/// final message, once our side is acknowledged and SCTP misses nothing
/// (`Connection::check_gaps`): what is still missing then was first sent after the
/// Terminate (RFC 5043 §10: the peer's SCTP need not send unordered chunks in the order
/// presented), and its losses leave no hole to see. As for the answer
/// ([`ANSWER_GRACE_RTOS`]), 64 cover six losses in a row as the peer's timer doubles (1 + 2 +
/// ... + 32, RFC 9260 §6.3.3 E2); four, before, covered two, and a segment lost three times
/// was dropped with its receive flushed (an independent review, session 60).
pub const GAP_GRACE_RTOS: u32 = 64;

/// How many retransmission timeouts the active side waits for the peer's answer to its
/// Initiate while segments the peer sent after it are held, once SCTP misses nothing up to
/// them (`Connection::check_gaps`). As long as [`GAP_GRACE_RTOS`]: an answer the peer's
/// SCTP sent after the segments (RFC 5043 §10 lets it) and lost leaves no hole to see, so only
/// time covers it; 63 covers six losses in a row as the peer's timer doubles (1 + 2 + ... +
/// 32, RFC 9260 §6.3.3 E2). What the peer holds meanwhile is within our receive buffer, as
/// a hole in SCTP's own sequence would be.
pub const ANSWER_GRACE_RTOS: u32 = 64;

/// The largest DDP segment taken (RFC 5043 §9's "maximum size specified"): the largest
/// MULPDU announced (`rx_mulpdu`, or today's from SCTP's `max_message`) with the room our
/// sender keeps for a bundled SACK given back, and the ESP `slack`. That room is §9's SHOULD
/// for the sender ("below the theoretical maximum"), not the receiver's limit: a peer that
/// keeps none fills one unfragmented DATA chunk, and refusing its segment ended the stream
/// (an independent review, session 60).
pub(crate) fn receive_limit(rx_mulpdu: usize, max_message: usize, slack: usize) -> usize {
    rx_mulpdu.max(ddp::mulpdu(max_message)) + ddp::SACK_HEADROOM + slack
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
    regions: Option<Arc<SharedRegions>>,
    /// Session control messages go to another thread with their session
    /// ([`Connection::set_remote_sessions`]).
    remote_sessions: bool,
    connected: bool,
    closed: bool,
    /// The largest MULPDU announced to the ULP (RFC 5043 §9): segments above it are refused.
    /// A path MTU that shrinks later lowers what we send, not what the peer was told it may;
    /// nor does one lowered before the association was up (`lower_sctp_mtu` keeps the MULPDU
    /// it had before here).
    rx_mulpdu: usize,
    /// The MULPDU the ULP was last told (`Connected`, `MulpduChanged`).
    told_mulpdu: usize,
    /// Bytes a received segment may exceed the MULPDU by: packets this end protects with
    /// ESP leave that much room, which a peer whose ESP adds less (or none) uses, and its
    /// segments still arrived unfragmented (RFC 5043 §9: the largest size "that can be
    /// supported without use of IP or SCTP fragmentation").
    rx_slack: usize,
    /// The association closed gracefully while sessions were away: the ULP hears it once
    /// they are back with what SCTP acknowledged behind them ([`Lent::graceful`]).
    closed_untold: Option<CloseReason>,
    /// What a returning session held from before a graceful close is being applied
    /// ([`Connection::return_session`]): the ULP's operations among it are taken as they
    /// would have been then.
    replaying: bool,
    /// The ULP asked for a SHUTDOWN while a session was away ([`Connection::apply`]).
    shutdown_deferred: bool,
    /// The streams whose sessions were away when it asked: the SHUTDOWN waits for them (and
    /// for the ULP's operations held behind them), not for sessions the peer's later
    /// control messages send away, or a peer could put it off for ever.
    shutdown_waits_for: Vec<u16>,
    /// The daytime service owes its message and SHUTDOWN ([`Service::Daytime`]).
    daytime_due: bool,
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
            told_mulpdu: 0,
            rx_slack: 0,
            closed_untold: None,
            replaying: false,
            shutdown_deferred: false,
            shutdown_waits_for: Vec::new(),
            daytime_due: false,
        };
        c.after_sctp();
        c
    }

    /// The endpoint's regions, so that sends may name their bytes there ([`Payload::Region`]).
    pub fn use_regions(&mut self, regions: Arc<SharedRegions>) {
        self.regions = Some(regions);
    }

    /// Copies into SCTP's send queue the bytes of every message there that names `region`
    /// (a Read Response's or a posted send's, sent and awaiting acknowledgement or not yet
    /// sent), read from `regions` now. For a registration of that memory being revoked:
    /// RFC 5041 §8.3.1 lets the ULP take remote access away at any time, and once the
    /// revocation is acknowledged neither a later transmission nor a retransmission may read
    /// the memory, which the ULP may change or free; before, they read it at each
    /// transmission, and a response whose region was freed went out as zeros under a good
    /// CRC32c, the peer's Read completing Success over them. Returns how many messages.
    pub fn materialize_region(&mut self, region: RegionId, regions: &RegionTable) -> usize {
        self.assoc.materialize_ext(region.0, |e, out| {
            regions
                .region(e.key)
                .is_some_and(|r| r.read(e.offset, out).is_ok())
        })
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

    /// Whether DDP runs on the association: its Adaptation Indication is DDP's. With any other
    /// (§7.1 lets the ULP choose one), "DDP procedures MUST NOT be performed upon this
    /// association" (RFC 5043 §11.1): no chunk is taken as DDP and no post is.
    pub fn is_ddp(&self) -> bool {
        self.assoc.adaptation_indication() == ADAPTATION_INDICATION_DDP
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

    /// A new path MTU (RFC 5043 §9: the MULPDU follows it for the next segments), and the
    /// MULPDU change told to the ULP at once (RFC 5041 §3 item 1: "LLPs MUST expose MULPDU and
    /// MULPDU changes"), not at the association's next packet or timer.
    pub fn set_path_mtu(&mut self, mtu: usize) {
        self.assoc.set_path_mtu(mtu);
        self.after_sctp();
    }

    /// RFC 9260 §7.3 and Appendix C ICMP7: an ICMP Fragmentation Needed or Packet Too Big for
    /// this association says the path to `peer` carries IP packets of `ip_mtu` bytes at most.
    /// The SCTP packet size follows, less the IP header and the ESP headroom kept on this link
    /// (the receive slack, as `Listener::set_link` computes the first path MTU), never below
    /// the association's minimum. Only ever lowers it (RFC 1191 §3, RFC 8201 §4: a PMTU is
    /// never raised from ICMP); returns whether it did. New DATA is framed at the new size and
    /// new DDP segments are cut at the MULPDU it gives (RFC 5043 §9, `max_sizes`).
    pub fn lower_path_mtu(&mut self, ip_mtu: usize, peer: IpAddr) -> bool {
        self.lower_sctp_mtu(self.icmp_sctp_size(ip_mtu, peer))
    }

    /// The SCTP packet size an ICMP's `ip_mtu` for `peer` leaves: less the IP header and the
    /// ESP headroom kept on this link (the receive slack). ICMP's lowering and a probe's PTB
    /// read it alike.
    fn icmp_sctp_size(&self, ip_mtu: usize, peer: IpAddr) -> usize {
        ip_mtu
            .saturating_sub(Interface::ip_header_len(peer))
            .saturating_sub(self.rx_slack)
    }

    /// [`Connection::lower_path_mtu`] given the SCTP packet size itself: what the ESP SA
    /// protecting the association leaves of its path MTU (RFC 4301 §8.2.1: its own overhead,
    /// not the link's headroom). Only ever lowers; returns whether it did.
    pub fn lower_sctp_mtu(&mut self, sctp: usize) -> bool {
        let before = self.assoc.path_mtu();
        if sctp >= before {
            return false;
        }
        // What we receive is the peer's path, not ours: a path MTU lowered before the
        // association was up (the interface's estimate, RFC 1191 §5) or aged out later (RFC
        // 1191 §6.3) must not make segments the peer cuts at the link's MULPDU oversize.
        self.rx_mulpdu = self.rx_mulpdu.max(ddp::mulpdu(self.assoc.max_message()));
        self.assoc.set_path_mtu(sctp);
        // The ULP hears of the new MULPDU now (RFC 5041 §3 item 1), not at the next packet
        // or timer of an association that may be idle.
        self.after_sctp();
        self.assoc.path_mtu() < before
    }

    /// The path MTU, once, after RFC 8899 discovery moved it ([`Association::take_plpmtu_change`]).
    pub fn take_plpmtu_change(&mut self) -> Option<usize> {
        self.assoc.take_plpmtu_change()
    }

    /// Whether an RFC 8899 probe waits for [`Connection::poll_probe`].
    #[inline]
    pub fn probe_due(&self) -> bool {
        self.assoc.probe_due()
    }

    /// [`Association::poll_probe`]: the probe due, larger than the path MTU, for the caller to
    /// send with DF and unfragmented.
    pub fn poll_probe(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.assoc.poll_probe(now, buf)
    }

    /// [`Association::plpmtud_ptb`]: a validated ICMP for this association saying the path to
    /// `peer` carries `ip_mtu` bytes, which did not lower the path MTU (a probe was too big).
    /// Its size as an SCTP packet is the one [`Connection::lower_path_mtu`] takes from the
    /// same ICMP (less the link's ESP headroom): the search and ICMP's lowering agree on what
    /// a hop allows, so a probe the PTB names is never followed by one ICMP would lower again.
    /// Returns that size.
    pub fn plpmtud_ptb(&mut self, now: Instant, ip_mtu: usize, peer: IpAddr) -> usize {
        let sctp = self.icmp_sctp_size(ip_mtu, peer);
        self.assoc.plpmtud_ptb(now, sctp);
        sctp
    }

    /// Whether RFC 8899 discovery runs on this association's path.
    pub fn plpmtud_on(&self) -> bool {
        self.assoc.plpmtud_on()
    }

    /// [`Association::plpmtud_search`]: an aged, lowered path MTU is searched up by probes.
    pub fn plpmtud_search(&mut self, now: Instant) {
        self.assoc.plpmtud_search(now);
    }

    /// [`Association::limit_probe`]: no probe above `ceiling` (an SA's path MTU, as SCTP).
    pub fn limit_probe(&mut self, now: Instant, ceiling: usize) {
        self.assoc.limit_probe(now, ceiling);
    }

    /// What the link carries beyond the path MTU this end sends with (IPsec's headroom): a
    /// segment up to that much over the MULPDU arrived unfragmented and is taken.
    pub fn set_receive_slack(&mut self, bytes: usize) {
        self.rx_slack = bytes;
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

    /// [`Association::icmp_protocol_unreachable`]: an ICMP saying the peer's host has no SCTP
    /// (RFC 9260 Appendix C ICMP8) ends the association as an ABORT would, if its quote holds
    /// the tag; returns whether it did.
    pub fn icmp_protocol_unreachable(&mut self, vtag: u32, init_tag: Option<u32>) -> bool {
        let ended = self.assoc.icmp_protocol_unreachable(vtag, init_tag);
        self.after_sctp();
        ended
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

    /// The state of `stream`'s session, if it ever had one
    /// ([`Session::never_opened`](crate::session::Session::never_opened)): what reports and
    /// telemetry count.
    pub fn opened_session_state(&self, stream: u16) -> Option<State> {
        let s = self.streams.get(usize::from(stream))?;
        if s.lent.is_none() && s.session.never_opened() {
            return None;
        }
        // A session lent with the peer's Initiate is Idle until it comes back (a review).
        self.session_state(stream).filter(|st| *st != State::Idle)
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

    // ---- sessions (RFC 5043 §6) ----

    /// Starts a session on `stream` as the active side, for protection domain `pd` (RFC 5043
    /// §6: one PD per session). A stream whose previous session is over may be reused once
    /// none of its chunks can be outstanding (§6.6).
    pub fn initiate(&mut self, stream: u16, pd: Pd, private_data: &[u8]) -> Result<(), PostError> {
        self.reuse_if_over(stream)?;
        let s = &mut self.streams[usize::from(stream)];
        s.session.initiate(private_data)?;
        open_receive(s, pd, &self.cfg, true, &self.sink);
        self.mark_ready(stream);
        self.progress(stream);
        Ok(())
    }

    /// Accepts the Initiate pending on `stream` for protection domain `pd` (§6.2).
    pub fn accept(&mut self, stream: u16, pd: Pd, private_data: &[u8]) -> Result<(), PostError> {
        self.check_stream(stream)?;
        let s = &mut self.streams[usize::from(stream)];
        s.session.accept(private_data)?;
        open_receive(s, pd, &self.cfg, false, &self.sink);
        self.mark_ready(stream);
        self.progress(stream);
        Ok(())
    }

    /// Rejects the Initiate pending on `stream` (§6.3).
    pub fn reject(&mut self, stream: u16, private_data: &[u8]) -> Result<(), PostError> {
        self.check_stream(stream)?;
        self.streams[usize::from(stream)]
            .session
            .reject(private_data)?;
        self.mark_ready(stream);
        self.progress(stream);
        Ok(())
    }

    /// Ends the session on `stream` with a Terminate (§6.2), or refuses a pending Initiate
    /// with one (§6.4). Sends not yet handed to SCTP are flushed (but an RDMAP Terminate
    /// owed for the stream's error, which goes first: `Session::hold_final`); the
    /// association goes on (RFC 5043 §11.3).
    pub fn terminate(&mut self, stream: u16) -> Result<(), PostError> {
        self.check_stream(stream)?;
        self.streams[usize::from(stream)].session.terminate()?;
        self.mark_ready(stream);
        self.progress(stream);
        Ok(())
    }

    // ---- data (RFC 4296 §2.1.2) ----

    /// RFC 4296 `ddp_post_recv`: `buffer` (from [`Memory::receive_buffer`]) takes the next
    /// untagged message on queue `qn` of `stream`; its MSN is the number of buffers posted to
    /// the queue before it, plus one.
    ///
    /// [`Memory::receive_buffer`]: crate::memory::Memory::receive_buffer
    pub fn post_recv(
        &mut self,
        stream: u16,
        qn: u32,
        wr_id: u64,
        buffer: PostedBuffer,
    ) -> Result<(), PostError> {
        self.post_recv_checked(stream, qn, wr_id, buffer, None)
    }

    /// [`Connection::post_recv`], the buffer checked against `stags` (placement's table)
    /// after the stream's own checks, so that a receive on an ended stream is refused for
    /// that.
    pub(super) fn post_recv_checked(
        &mut self,
        stream: u16,
        qn: u32,
        wr_id: u64,
        buffer: PostedBuffer,
        stags: Option<&ddpdk_dataplane::mem::StagTable>,
    ) -> Result<(), PostError> {
        self.check_stream(stream)?;
        let s = &mut self.streams[usize::from(stream)];
        // Nor after the peer's RDMAP Terminate (RFC 5040 §5.4), as a post of work is not: a
        // receive taken then would wait for a session end the peer need never send, and hold
        // every later one behind it.
        if matches!(s.session.state(), State::Terminated(_))
            || s.rdmap.as_deref().is_some_and(|r| r.peer_terminated())
        {
            return Err(PostError::Session(LocalError::Terminated));
        }
        // RDMAP keeps queues 1 and 2 for itself (RFC 5040 §4.2): Sends arrive on 0.
        if s.rdmap.is_some() && qn != 0 {
            return Err(PostError::InvalidQn);
        }
        let rx =
            s.rx.as_mut()
                .ok_or(PostError::Session(LocalError::NotEstablished))?;
        let posted = s.posted.get_mut(qn as usize).ok_or(PostError::InvalidQn)?;
        // Placement re-checks a posted buffer against its registration (RFC 5041 §8.3.1 item
        // 6: deregistering stops it), so one without a registration could never be stopped;
        // against the caller's table (placement's), one that placement would refuse is
        // refused now, rather than ending the stream at the peer's first Send
        // (`BufferRevoked`).
        let placeable = buffer
            .stag
            .is_some_and(|stag| stags.is_none_or(|t| t.allows_receive(stag, rx.pd(), &buffer)));
        if !placeable {
            return Err(PostError::BadSink);
        }
        rx.post(qn, buffer).map_err(|QueueFull| PostError::Full)?;
        posted.push_back(wr_id);
        Ok(())
    }

    /// RFC 4296 `ddp_send` / `ddp_send_ddp`: queues a message on its stream. It leaves once
    /// the session allows segments (§6.2, §6.6), in posting order.
    pub fn post_send(&mut self, req: SendRequest) -> Result<(), PostError> {
        self.check_stream(req.stream)?;
        // An RDMAP stream's RsvdULP and queues are RDMAP's: [`Connection::post_rdma`].
        if self.streams[usize::from(req.stream)].rdmap.is_some() {
            return Err(PostError::NotRdmap);
        }
        // RFC 5041 §5.1.2: the ULP names a queue the stream has (QN 0 .. queues-1, as a
        // receive does). One beyond it would reach the peer as Invalid QN (§7.2 0x2/0x01) and
        // add an MSN count to the stream's list, searched on every later post.
        if matches!(req.kind, SendKind::Untagged { qn, .. } if qn >= self.cfg.queues) {
            return Err(PostError::InvalidQn);
        }
        self.queue_send(req, Origin::Ulp)
    }

    /// Queues a message of the ULP's, or one RDMAP makes, after the checks every send passes.
    fn queue_send(&mut self, req: SendRequest, origin: Origin) -> Result<(), PostError> {
        self.check_stream(req.stream)?;
        // RDMAP's Terminate is no work of the ULP's (one a stream, its last message): the
        // limit on queued work does not refuse it (RFC 5043 §11.3 "MUST be generated").
        if self.sink.queued_sends >= self.cfg.max_sends && !matches!(origin, Origin::Terminate) {
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
            let table = self.regions.as_deref().map(|t| t.load());
            let r = table
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
            // RDMAP's Terminate ahead of the session's own (`Session::hold_final`).
            State::Terminated(_)
                if matches!(origin, Origin::Terminate) && s.session.final_held() => {}
            State::Terminated(_) => return Err(LocalError::Terminated.into()),
        }
        // RFC 5040 §5.5: the ULP's work on an RDMAP stream is reported in posting order, so
        // one Read the peer leaves unanswered holds every later completion. What waits to be
        // reported is bounded as the queued sends are (a verbs provider's send queue depth),
        // not by the ULP's patience.
        if matches!(origin, Origin::Ulp | Origin::Read(_) | Origin::Atomic(_))
            && s.rdmap
                .as_deref()
                .is_some_and(|r| r.unreported() >= self.cfg.max_sends)
        {
            return Err(PostError::Full);
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
            SendKind::Untagged { qn, rsvd_ulp } => Target::Untagged {
                qn,
                msn: s.take_msn(qn),
                rsvd_ulp,
            },
        };
        if let Some(g) = s.grace.as_mut() {
            *g -= 1;
        }
        // The ULP's work on an RDMAP stream completes in posting order (RFC 5040 §5.5). A
        // Read's or an Atomic's request is bytes of its own: only a send's data may be read
        // from the ULP's memory as it leaves.
        let mut origin = origin;
        let seq = match (&mut origin, s.rdmap.as_deref_mut()) {
            (Origin::Ulp, Some(r)) => {
                let zero_copy = matches!(req.data, Payload::Region { len, .. } if len > 0);
                Some(r.begin(req.wr_id, req.signaled, zero_copy))
            }
            (Origin::Read(read), Some(r)) => {
                read.seq = r.begin(read.wr_id, read.signaled, false);
                Some(read.seq)
            }
            (Origin::Atomic(atomic), Some(r)) => {
                atomic.seq = r.begin(atomic.wr_id, atomic.signaled, false);
                Some(atomic.seq)
            }
            _ => None,
        };
        s.sends.push_back(PendingSend {
            req,
            target,
            offset: 0,
            origin,
            seq,
        });
        self.sink.queued_sends += 1;
        self.mark_ready(stream);
        self.progress(stream);
        Ok(())
    }

    /// Whether completions or indications wait to be polled.
    pub fn owes_ulp(&self) -> bool {
        !self.sink.completions.is_empty()
            || !self.sink.indications.is_empty()
            || !self.sink.op_results.is_empty()
    }

    /// Whether completions of the ULP's operations wait to be polled.
    pub fn owes_completion(&self) -> bool {
        !self.sink.completions.is_empty()
    }

    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.sink.completions.pop_front()
    }

    pub fn poll_indication(&mut self) -> Option<Indication> {
        self.sink.indications.pop_front()
    }

    /// The STags the peer invalidated (Send with Invalidate, RFC 5040 §5.3) since the last
    /// call, for the owner of the STag tables to invalidate: in the table this connection is
    /// placed with before its next packet, and everywhere before the ULP is given the
    /// `Received` that names it. Until taken, this connection's RDMAP checks already treat
    /// them as invalid.
    pub fn take_peer_invalidated(&mut self) -> Vec<ddpdk_dataplane::mem::Stag> {
        std::mem::take(&mut self.sink.peer_invalidated)
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
                &mut |m: SctpMessage<'_>| early.push((m.stream, m.ppid, m.tsn, m.data.to_vec())),
                checksum_verified,
            );
            self.after_sctp();
            for (stream, ppid, tsn, data) in early {
                self.route_one(stream, ppid, tsn, &data, memory);
            }
            self.gaps_due(now);
            return r;
        }
        self.grow_streams();
        let mut checksum_verified = checksum_verified;
        if self.fused_tagged(now, packet, memory, &mut checksum_verified) {
            return Ok(());
        }
        let how = self.routing();
        let Connection {
            assoc,
            streams,
            sink,
            limit,
            ..
        } = self;
        let mut router = Router {
            streams,
            memory,
            sink,
            limit,
            how,
        };
        let r = assoc.handle_checked(now, packet, &mut router, checksum_verified);
        self.after_sctp();
        self.gaps_due(now);
        self.sink.sync_pending();
        r
    }

    /// A chunk that reached us outside [`Connection::handle`] (bundled with the COOKIE ECHO
    /// that created the association).
    /// How DATA is routed now.
    fn routing(&self) -> Routing {
        Routing {
            remote: self.remote_sessions,
            connected: self.connected,
            mulpdu: receive_limit(self.rx_mulpdu, self.assoc.max_message(), self.rx_slack),
            budget: self.assoc.receive_buffer(),
            zero_copy: self.regions.is_some(),
            service: self.cfg.service,
            ddp: self.is_ddp(),
        }
    }

    fn route_one(&mut self, stream: u16, ppid: u32, tsn: u32, data: &[u8], memory: Place<'_>) {
        self.grow_streams();
        let m = SctpMessage {
            stream,
            ppid,
            tsn,
            data,
        };
        let how = self.routing();
        route(
            m,
            &mut self.streams,
            memory,
            &mut self.sink,
            &self.limit,
            how,
        );
        self.sink.sync_pending();
        self.progress(stream);
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        // A stream whose session is away is checked when it is back.
        let gaps = self
            .sink
            .gaps
            .iter()
            .filter(|g| {
                self.streams
                    .get(usize::from(g.stream))
                    .is_some_and(|s| s.lent.is_none())
            })
            .filter(|g| !g.expired)
            .filter_map(|g| g.deadline)
            .min();
        match (self.assoc.poll_timeout(), gaps) {
            (Some(a), Some(g)) => Some(a.min(g)),
            (a, g) => a.or(g),
        }
    }

    /// A SACK is owed before the next packet is handled ([`Association::sack_due`]).
    pub fn sack_due(&self) -> bool {
        self.assoc.sack_due()
    }

    /// [`Association::end_transmit_opportunity`]: for a caller that knows the next
    /// [`Connection::poll_transmit_gather`] would find nothing ([`Association::owes_nothing`];
    /// the connection's own sources, its sessions' pump, its services, its receive window,
    /// had their turn before the packet it just took and changed nothing since).
    pub fn end_transmit_opportunity(&mut self) {
        self.assoc.end_transmit_opportunity();
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        // RFC 8899 black hole detection may lower the path MTU from T3-rtx: what we receive
        // is the peer's path, and its segments cut at today's MULPDU stay welcome (as in
        // `lower_sctp_mtu`).
        self.rx_mulpdu = self.rx_mulpdu.max(ddp::mulpdu(self.assoc.max_message()));
        self.assoc.handle_timeout(now);
        self.after_sctp();
        self.gaps_due(now);
    }

    /// [`Connection::check_crossings`] and [`Connection::check_gaps`], if any stream needs them.
    #[inline(always)]
    fn gaps_due(&mut self, now: Instant) {
        if !self.sink.crossings.is_empty() {
            self.check_crossings(self.assoc.received_cum_tsn());
        }
        if !self.sink.gaps.is_empty() {
            self.check_gaps(now);
        }
    }

    /// Bounds the wait for DDP-SSNs missing before the peer's final message.
    ///
    /// The peer's Terminate may overtake its last segments (RFC 5043 §6.1: the normative order
    /// is the DDP-SSN's, SCTP delivers unordered), so its receives stay posted until they
    /// came, and the stream id is not reused before (§6.6). But a peer that left a gap before
    /// its Terminate broke RFC 5043 §6 ("The DDP-SSNs assigned to the Data Chunks for a
    /// session MUST NOT have any gaps"), and nothing will fill it: the receives, Reads and the
    /// stream id would wait for the rest of the association. SCTP retransmits a chunk sent
    /// before the Terminate until it arrives (RFC 9260 §6.3.3), so a legal peer's late chunk
    /// comes within a few retransmission timeouts of the Terminate. The wait starts once our
    /// own side of the session is acknowledged (nothing of ours is outstanding, and the
    /// path has carried a round trip since the peer's Terminate) and lasts
    /// [`GAP_GRACE_RTOS`] RTOs (at least RTO.min each, RFC 9260 §6.3.1); then the receives
    /// are flushed and the peer's direction counts as complete
    /// (`Session::give_up_inbound_gap`). A chunk later still is dropped as one after the
    /// session's end.
    ///
    /// Time alone proves nothing: a legal peer's chunk may be delayed longer, and once the
    /// stream id is reused it would be judged by the next session's window. It was transmitted
    /// before the Terminate, so its TSN is below the Terminate's ([`DdpStream::final_tsn`]):
    /// the wait also lasts until SCTP's cumulative TSN of what we received has passed that,
    /// when every chunk the peer sent before its Terminate is in. The time bound stays for a
    /// DDP-SSN the peer's SCTP first sent after the Terminate (RFC 5043 §5.2.1: the TSN need
    /// not follow the submission order).
    fn check_gaps(&mut self, now: Instant) {
        let cum = self.assoc.received_cum_tsn();
        let holes = self.assoc.received_has_gaps();
        let grace = self.assoc.rto() * GAP_GRACE_RTOS;
        let answer_grace = self.assoc.rto() * ANSWER_GRACE_RTOS;
        let mut k = 0;
        while let Some(&g) = self.sink.gaps.get(k) {
            let Some(s) = self
                .streams
                .get_mut(usize::from(g.stream))
                .filter(|s| s.generation == g.generation)
            else {
                self.sink.gaps.swap_remove(k);
                continue;
            };
            if s.lent.is_some() {
                k += 1;
                continue;
            }
            if g.answer {
                // The peer's answer to our Initiate (its DDP-SSN 0), submitted before the
                // segments held for it on the same SCTP stream: while SCTP still misses a
                // chunk below the first of them, the answer may be that chunk, lost and
                // being retransmitted, and it is waited for (a legal peer's Accept lost
                // several times must not fail the session). Once SCTP misses nothing, the
                // answer may still have been sent after the segments and lost (§10: unordered
                // chunks need not leave in the order presented): [`ANSWER_GRACE_RTOS`] RTOs
                // more, then the attempt fails and the held segments give their receive
                // buffer back (RFC 5043 §10).
                if !s.session.answer_pending() || s.before_answer.is_empty() {
                    self.sink.gaps.swap_remove(k);
                    continue;
                }
                match g.deadline {
                    // The time bound starts once SCTP has caught up and misses nothing: the
                    // peer's SCTP need not send unordered chunks in the order presented (§10),
                    // so the answer may be any chunk still missing.
                    _ if serial::lt(cum, g.held_tsn) || holes => {
                        self.sink.gaps[k].deadline = None;
                        k += 1;
                    }
                    None => {
                        self.sink.gaps[k].deadline = Some(now + answer_grace);
                        k += 1;
                    }
                    Some(deadline) if now >= deadline => {
                        // Counted only where the session was live: one our ULP (or an earlier
                        // protocol error) ended is no Initiate given up for want of an answer.
                        if s.session.give_up_answer() {
                            self.sink.stats.initiates_unanswered += 1;
                        }
                        drop_held_for_answer(s, &mut self.sink);
                        self.sink.touched.stream(g.stream);
                        self.sink.gaps.swap_remove(k);
                    }
                    Some(_) => k += 1,
                }
                continue;
            }
            if !s.session.awaits_inbound_gap() {
                // Filled: the receive path flushed what it had to.
                self.sink.gaps.swap_remove(k);
                continue;
            }
            // While SCTP misses a chunk the peer sent before its Terminate, or any chunk (the
            // missing DDP-SSN may be it), the wait has no timer; the grace runs whole from
            // when SCTP misses nothing.
            let sctp_misses = holes || s.final_tsn.is_some_and(|t| serial::lt(cum, t));
            match g.deadline {
                None if s.session.outbound_complete() => {
                    self.sink.gaps[k].deadline = Some(now + grace);
                    k += 1;
                }
                Some(_) if sctp_misses => {
                    self.sink.gaps[k].deadline = Some(now + grace);
                    self.sink.gaps[k].expired = true;
                    k += 1;
                }
                Some(_) if self.sink.gaps[k].expired => {
                    self.sink.gaps[k].expired = false;
                    k += 1;
                }
                Some(deadline) if now >= deadline => {
                    s.session.give_up_inbound_gap();
                    self.sink.stats.inbound_gaps_given_up += 1;
                    flush_receives(g.stream, s, &mut self.sink);
                    self.sink.touched.stream(g.stream);
                    self.sink.gaps.swap_remove(k);
                }
                _ => k += 1,
            }
        }
        self.session_events();
    }

    /// Watches ([`Crossing`]) whose bound SCTP's cumulative TSN `cum` has passed: the rejected
    /// attempt's Terminate arrived, or it never was sent; either way the watch ends before the
    /// TSN comparison could wrap.
    fn check_crossings(&mut self, cum: u32) {
        let streams = &mut self.streams;
        self.sink.crossings.retain(|&(stream, generation)| {
            let Some(s) = streams
                .get_mut(usize::from(stream))
                .filter(|s| s.generation == generation)
            else {
                return false;
            };
            s.crossings
                .retain(|c| !c.below.is_some_and(|b| serial::ge(cum, b)));
            !s.crossings.is_empty()
        });
    }

    /// The next SCTP packet to send, written to `buf` whole: region bytes of
    /// [`Payload::Region`] sends are copied in, and the CRC32c filled (unless the device
    /// computes it).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.serve(now);
        self.pump_batched();
        self.session_events();
        self.gaps_due(now);
        self.tell_room();
        let n = self.assoc.poll_transmit(now, buf)?;
        let holes = self.assoc.holes();
        if holes.is_empty() {
            return Some(n);
        }
        // Spans were checked against the regions when posted; a read fails only if the ULP
        // freed the region under its own send (`Memory::free_region`).
        if let Some(regions) = self.regions.as_deref().map(|t| t.load()) {
            for h in holes {
                let span = &mut buf[h.at..h.at + h.ext.len as usize];
                // A region freed under its send: zeros, not an earlier packet's bytes.
                let read = regions
                    .region(h.ext.key)
                    .map(|r| r.read(h.ext.offset, span));
                if !matches!(read, Some(Ok(()))) {
                    span.fill(0);
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
        self.serve(now);
        self.pump_batched();
        self.session_events();
        self.gaps_due(now);
        self.tell_room();
        let n = self.assoc.poll_transmit(now, buf)?;
        Some((n, self.assoc.holes()))
    }

    /// What a test service owes ([`Service`]): echoes handed to SCTP while it takes them (in
    /// order; what it cannot take waits, its bytes still held against the receive window), the
    /// daytime message and its SHUTDOWN.
    fn serve(&mut self, now: Instant) {
        while let Some((stream, ppid, data)) = self.sink.echo.front() {
            let (stream, ppid, len) = (*stream, *ppid, data.len());
            match self.assoc.send(stream, ppid, data) {
                Ok(_) => self.sink.stats.service_echoed += 1,
                Err(SendError::Full) => return,
                // Larger than one DATA chunk here (we do not fragment, RFC 5043 §9), or the
                // association is closing: not echoed, counted.
                Err(_) => self.sink.stats.service_dropped += 1,
            }
            self.sink.echo.pop_front();
            self.sink.held_bytes -= held_cost(len);
        }
        if std::mem::take(&mut self.daytime_due) {
            let text = daytime(std::time::SystemTime::now());
            match self.assoc.send(0, 0, text.as_bytes()) {
                Ok(_) => self.sink.stats.service_echoed += 1,
                Err(_) => self.sink.stats.service_dropped += 1,
            }
            self.shutdown(now);
        }
    }

    /// Tells SCTP how much of the receive buffer is free now, for the a_rwnd of the next
    /// SACK: the ULP may have taken indications since the last packet.
    fn tell_room(&mut self) {
        // A stream's end (a ULP call, a timer) may have dropped messages waiting for Delivery
        // since the last packet: looked at again before the a_rwnd is told.
        self.sink.sync_pending();
        let room = self.sink.room(self.assoc.receive_buffer());
        self.assoc.set_receive_room(room);
    }

    /// The receive buffer not taken by what the connection holds for the ULP (chunks of
    /// streams whose session is away, indications not yet polled).
    pub fn receive_room(&self) -> usize {
        self.sink.room_now(self.assoc.receive_buffer())
    }

    /// The regions sends may read from.
    pub fn regions(&self) -> Option<&Arc<SharedRegions>> {
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
            .ok_or_else(|| {
                PostError::Session(match self.session_state(stream) {
                    // The reason a send without a local STag gets (it said "not accepted yet"
                    // of a session that was over).
                    Some(State::Terminated(_)) => LocalError::Terminated,
                    Some(State::Idle) | None => LocalError::NoSession,
                    Some(_) => LocalError::NotEstablished,
                })
            })?;
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
        // (An operation posted before a graceful close, held behind a session that was away,
        // is applied as it would have been then: `replaying`.)
        if !self.connected || (self.closed && !self.replaying) {
            return Err(PostError::NotConnected);
        }
        if !self.is_ddp() {
            return Err(PostError::NotDdp);
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

    #[inline]
    fn grow_streams(&mut self) {
        let n = usize::from(self.assoc.streams());
        while self.streams.len() < n {
            self.streams.push(DdpStream::new(&self.limit, 0));
        }
    }

    /// After anything SCTP did: its events, then what its acknowledgements settled, then the
    /// sessions' events, then more to send.
    ///
    /// Inlined, the steps' tests first: after nearly every packet a receiver takes none has
    /// anything to do (the call and its frame were half of the 62 instructions a packet). A
    /// sender's SACK has (settle, pump): one call does them all.
    #[inline(always)]
    fn after_sctp(&mut self) {
        self.grow_streams();
        let settle_due = self
            .in_flight
            .front()
            .is_some_and(|f| f.number < self.assoc.settled_before());
        if settle_due
            || self.assoc.has_events()
            || self.session_events_pending()
            || (self.pump_due() && self.pump_batch_due())
        {
            self.after_sctp_steps();
        }
    }

    #[inline(never)]
    fn after_sctp_steps(&mut self) {
        if self.assoc.has_events() {
            self.sctp_events();
        }
        self.settle();
        self.session_events();
        // Nothing since the first look touched a session unless the pump ran.
        if self.pump_batched() {
            self.session_events();
        }
    }

    /// The association's events, for the ULP.
    #[inline(never)]
    fn sctp_events(&mut self) {
        while let Some(e) = self.assoc.poll_event() {
            match e {
                SctpEvent::Connected { streams, .. } => {
                    self.connected = true;
                    self.daytime_due = self.cfg.service == Service::Daytime;
                    let mulpdu = self.max_sizes().mulpdu;
                    self.rx_mulpdu = self.rx_mulpdu.max(mulpdu);
                    self.told_mulpdu = mulpdu;
                    self.sink
                        .indications
                        .push_back(Indication::Connected { streams, mulpdu });
                }
                SctpEvent::Restarted { .. } => {
                    // The peer kept no DDP state; what we had queued for it is gone.
                    self.end_all_sessions(false);
                    self.sink.indications.push_back(Indication::PeerRestarted);
                }
                SctpEvent::ShutdownReceived => {}
                SctpEvent::PathChange { active } => {
                    self.sink
                        .indications
                        .push_back(Indication::PathChange { active });
                }
                // RFC 5043 §9 item 1: "LLPs MUST expose MULPDU and MULPDU changes".
                SctpEvent::PathMtu { .. } => {
                    let mulpdu = self.max_sizes().mulpdu;
                    if self.connected && mulpdu != self.told_mulpdu {
                        self.told_mulpdu = mulpdu;
                        self.sink
                            .indications
                            .push_back(Indication::MulpduChanged { mulpdu });
                    }
                }
                SctpEvent::Closed(reason) => {
                    let graceful = reason == CloseReason::Shutdown;
                    self.end_all_sessions(graceful);
                    stream::tell_all_silent(&mut self.sink);
                    self.closed = true;
                    let waits = self
                        .streams
                        .iter()
                        .any(|s| s.lent.as_ref().is_some_and(|l| l.graceful));
                    if waits {
                        self.closed_untold = Some(reason);
                    } else {
                        self.sink.indications.push_back(Indication::Closed(reason));
                    }
                }
            }
        }
    }

    /// Ends every stream's session with the association (`graceful`: a SHUTDOWN, not an
    /// ABORT, a failure or the peer's restart).
    fn end_all_sessions(&mut self, graceful: bool) {
        // Messages below `dropped_from` were acknowledged before the restart or close (perhaps
        // by a SACK in the same packet); the rest were dropped.
        let acked_before = self.assoc.dropped_from();
        for f in std::mem::take(&mut self.in_flight) {
            let Some(done) = f.completion else {
                continue;
            };
            let status = if f.flushed {
                // Cut short earlier (and counted then); its segments have settled now.
                Status::Flushed
            } else if f.last_number() < acked_before {
                Status::Success
            } else {
                self.sink.stats.flushed_sends += 1;
                Status::Flushed
            };
            report_settled(
                &mut self.streams,
                &mut self.sink,
                (f.stream, f.generation),
                done,
                status,
            );
        }
        // No chunk of before a restart or close can arrive after it, and a restarted peer's
        // TSNs start anew: a watch for a Terminate crossing our Reject would compare the new
        // incarnation's TSNs with the old one's bound and drop a genuine Terminate (RFC 5043
        // §6.2) half the time.
        self.sink.crossings.clear();
        for (i, s) in self.streams.iter_mut().enumerate() {
            s.control = None;
            s.crossings.clear();
            match s.lent.as_mut() {
                // The session is at the control thread and the association shut down: what
                // SCTP acknowledged behind it is the peer's to have delivered (RFC 9260 §9.2,
                // RFC 5041 §2's graceful teardown). The stream ends once the session is back
                // and that is delivered, as where the session machine runs in place, and the
                // ULP hears Closed after it.
                Some(lent) if !lent.ended && graceful => {
                    lent.ended = true;
                    lent.graceful = true;
                    lent.held_at_end = lent.held.len();
                }
                // The session is at the control thread: the ULP hears the end now, in order
                // with the association's (§11.3), and the session is ended when it is back.
                Some(lent) if !lent.ended => {
                    lent.ended = true;
                    lent.held_at_end = lent.held.len();
                    end_lent_now(i as u16, s, &mut self.sink);
                }
                // Ended before (an earlier restart) and still away: what it holds now came
                // before this end too, and is no newer incarnation's.
                Some(lent) => lent.held_at_end = lent.held.len(),
                None => end_with_association(i as u16, s, &mut self.sink),
            }
        }
        self.sink.touched.all();
        self.session_events();
    }

    /// After a ULP call on `stream`: its session events, more to send, and what sending
    /// caused.
    fn progress(&mut self, stream: u16) {
        self.sink.touched.stream(stream);
        self.session_events();
        self.pump();
        self.session_events();
    }

    /// Moves session events to the ULP; a session that ended flushes its stream.
    ///
    /// Called several times a packet and nearly always with nothing to do: the test is
    /// inlined, the work is not (its prologue alone was 20 instructions a call).
    #[inline]
    fn session_events(&mut self) {
        if self.session_events_pending() {
            self.session_events_due();
        }
    }

    /// Whether [`Connection::session_events`] has anything to do.
    #[inline(always)]
    fn session_events_pending(&self) -> bool {
        !self.sink.faulted.is_empty()
            || !self.sink.not_rdmap.is_empty()
            || !self.sink.touched.is_empty()
    }

    #[inline(never)]
    fn session_events_due(&mut self) {
        if !self.sink.faulted.is_empty() {
            self.end_faulted();
        }
        if !self.sink.not_rdmap.is_empty() {
            self.end_not_rdmap();
        }
        if self.sink.touched.is_empty() {
            return;
        }
        // Any event may come with a control message to send (an Accept proving the Initiate
        // arrived releases a held-back Terminate, §6.6). Draining touches no stream.
        let mut k = 0;
        while let Some(i) = self.sink.touched.nth(k, self.streams.len()) {
            k += 1;
            if let Some(s) = self.streams.get_mut(usize::from(i)) {
                if drain_events(i, s, &mut self.sink) && !s.ready {
                    s.ready = true;
                    self.ready.push_back(i);
                }
                note_gap(i, s, &mut self.sink);
            }
        }
        self.sink.touched.clear();
        for (i, generation) in std::mem::take(&mut self.sink.end_flush) {
            if let Some(s) = self.streams.get_mut(usize::from(i)) {
                if s.generation == generation {
                    end_flush(i, s, &mut self.sink);
                }
            }
        }
        // Drained in place: a Read's completion wakes its stream, and the buffer is kept.
        for i in self.sink.wake.drain(..) {
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
    /// the Terminate tells the peer that nothing more on the stream will be placed. An
    /// RDMAP stream's session the session machine ended for a chunk it refused is here too
    /// (`rdmap_terminate_first`, nothing indicated): its RDMAP Terminate goes first.
    fn end_faulted(&mut self) {
        let faulted = std::mem::take(&mut self.sink.faulted);
        for (stream, error) in faulted {
            let Some(s) = self.streams.get_mut(usize::from(stream)) else {
                continue;
            };
            // The packet sent the session away after the fault: its end waits for the
            // session's return (`return_session`), which holds our Terminate meanwhile if
            // RDMAP's is owed (`Session::hold_final`).
            if let Some(lent) = s.lent.as_mut() {
                lent.fault.get_or_insert(error);
                continue;
            }
            // An RDMAP stream tells the peer what went wrong first (RFC 5040 §5.4).
            if s.rdmap.is_some() {
                self.send_rdmap_terminate(stream, error);
                continue;
            }
            if self.cfg.on_receive_error != OnReceiveError::Terminate {
                continue;
            }
            if s.session.terminate_for_error(error).is_ok() {
                self.sink.stats.sessions_faulted += 1;
                self.sink.touched.stream(stream);
                self.mark_ready(stream);
            }
        }
    }
}

/// The daytime service's message: the UTC time as `YYYY-MM-DD HH:MM:SS UTC` and a newline
/// (RFC 867 leaves the format free).
fn daytime(now: std::time::SystemTime) -> String {
    let secs = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (the proleptic Gregorian calendar).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC\n",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// A stream whose session is away ends with the association now: the ULP hears the end, and
/// what the stream holds is flushed (the session is ended when it is back).
fn end_lent_now(stream: u16, s: &mut DdpStream, sink: &mut Sink) {
    if let Some(lent) = s.lent.as_mut() {
        if !matches!(lent.state, State::Terminated(_)) {
            lent.state = State::Terminated(TerminationReason::AssociationEnded);
            sink.indications.push_back(Indication::Session {
                stream,
                event: SessionEvent::SessionTerminated {
                    reason: TerminationReason::AssociationEnded,
                },
            });
        }
    }
    flush(stream, s, sink);
}

/// A stream's session ends with the association (the session here, not away).
fn end_with_association(stream: u16, s: &mut DdpStream, sink: &mut Sink) {
    // A session the peer's Terminate ended while chunks of its before it were missing kept
    // its receives, Reads and Atomics for them (`end_flush`); none can come now, and its end
    // was indicated already, so no event will flush them.
    let waiting = s.session.state() == State::Terminated(TerminationReason::PeerTerminate)
        && !s.session.inbound_complete();
    s.session.association_ended();
    // RDMAP's Terminate still queued can never leave now (its hold ends with the session).
    if let Some(k) = s.queued_terminate() {
        s.sends.remove(k);
        sink.queued_sends -= 1;
    }
    if waiting {
        flush_receives(stream, s, sink);
    }
    // Held for an answer that cannot come now, of a session already over (which no event
    // will flush): their receive buffer back.
    drop_held_for_answer(s, sink);
}

#[cfg(test)]
mod daytime_tests {
    use super::daytime;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn daytime_is_the_civil_utc_time() {
        assert_eq!(daytime(UNIX_EPOCH), "1970-01-01 00:00:00 UTC\n");
        // 2026-11-26 06:00:00 UTC, a leap-year February 29 and the day after.
        let at = |s: u64| daytime(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(1_795_672_800), "2026-11-26 06:00:00 UTC\n");
        assert_eq!(at(951_782_400), "2000-02-29 00:00:00 UTC\n");
        assert_eq!(at(951_868_799), "2000-02-29 23:59:59 UTC\n");
        assert_eq!(at(951_868_800), "2000-03-01 00:00:00 UTC\n");
    }
}
