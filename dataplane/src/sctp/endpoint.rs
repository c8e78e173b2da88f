//! The SCTP endpoint: packets that match no association (RFC 9260 §8.4), answered without
//! keeping any state. An INIT gets an INIT ACK whose State Cookie carries everything (§5.1.3),
//! so an INIT flood costs CPU for an HMAC and no memory; a valid COOKIE ECHO becomes an
//! [`Association`]. This is what the control thread runs; the data cores run associations.

use std::collections::HashSet;
use std::net::IpAddr;

use super::assoc::{Association, Deliver, ADAPTATION_REASON};
use super::config::Config;
use super::cookie::{Cookie, CookieKey, Prf, COOKIE_LEN};
use super::time::Instant;
use crate::wire::crc32c;
use crate::wire::sctp::{
    AbortRepr, CauseRepr, Chunk, ChunkRepr, ChunkType, ErrorChunkRepr, HeaderRepr, InitAckRepr,
    InitChunk, InitRepr, List, ListElement, Packet, PacketBuilder, ParamRepr, ShutdownCompleteRepr,
    HEADER_LEN, INIT_MIN_LEN,
};
/// Longest Cookie Preservative we honour (RFC 9260 §5.2.6 lets the receiver ignore it).
const MAX_PRESERVATIVE_MS: u32 = 60_000;

/// The longest lifespan this endpoint writes into a cookie: its `valid_cookie_life` and the
/// most a Cookie Preservative adds. A cookie claiming more was not issued here, whatever its
/// MAC says (§5.1.3): someone who learnt one period's key could otherwise date a cookie in
/// that period with a lifespan of weeks and use it long after the key was retired.
pub(super) fn longest_issued_lifespan(cfg: &Config) -> core::time::Duration {
    cfg.valid_cookie_life
        .saturating_add(core::time::Duration::from_millis(u64::from(
            MAX_PRESERVATIVE_MS,
        )))
}

/// Host Name Address (RFC 9260 §3.3.2.1): we resolve no names, so the wire layer keeps it as
/// an unknown parameter, and its receiver MUST answer with ABORT.
pub(super) const HOST_NAME_ADDRESS: u16 = 11;
/// Most bytes of address parameters an ABORT reports (Unresolvable Address, Restart of an
/// Association with New Addresses); a longer report goes without its cause.
pub(super) const MAX_REPORTED_ADDRESSES: usize = 256;

/// What an INIT or INIT ACK's parameters say, walked with the §3.2.1 rules.
#[derive(Debug, Clone, Copy)]
pub(super) struct InitParams<'a> {
    pub adaptation: Option<u32>,
    pub cookie: Option<&'a [u8]>,
    pub cookie_preservative: Option<u32>,
    /// The first Host Name Address parameter, whole: (offset, length) within the parameter
    /// bytes (RFC 9260 §3.3.2.1).
    pub host_name: Option<(usize, usize)>,
}

/// Walks the parameters in order. Unknown ones follow their type's upper bits (§3.2.1): `00`
/// stops the walk, `01` stops it and reports, `10` skips, `11` skips and reports. Reports are
/// Unrecognized Parameter in an INIT ACK (answering INIT) or an ERROR bundled with the COOKIE
/// ECHO (answering INIT ACK); [`unrecognized`] walks them.
pub(super) fn walk_init_params<'a>(init: &InitRepr<'a>) -> InitParams<'a> {
    let mut p = InitParams {
        adaptation: None,
        cookie: None,
        cookie_preservative: None,
        host_name: None,
    };
    let mut off = 0;
    for param in init.params.iter() {
        let len = param.param_len();
        match param {
            ParamRepr::AdaptationLayerIndication(v) => {
                p.adaptation.get_or_insert(v);
            }
            ParamRepr::StateCookie(c) => {
                p.cookie.get_or_insert(c);
            }
            ParamRepr::CookiePreservative(ms) => p.cookie_preservative = Some(ms),
            // §3.3.2.1: the chunk is refused whole, so nothing after it matters.
            ParamRepr::Unknown {
                param_type: HOST_NAME_ADDRESS,
                ..
            } => {
                p.host_name = Some((off, len));
                break;
            }
            // An unrecognized parameter whose type says stop (00, 01) ends the walk; the
            // reports are `unrecognized`'s, which stops here too.
            ParamRepr::ForwardTsnSupported | ParamRepr::Unknown { .. }
                if !param.action().continues() =>
            {
                break;
            }
            // Unrecognized parameters that say skip (10, 11), addresses (we are single-homed
            // and reply to the packet's source), Supported Address Types and Supported
            // Extensions (we list none back, so the peer uses none) need nothing here.
            _ => {}
        }
        off += (len + 3) & !3;
    }
    p
}

/// (offset, length) within the parameter bytes of each parameter of `init` to report, in order:
/// those [`walk_init_params`] meets that are unrecognized and whose type's upper bits say
/// report (`01`, `11`: RFC 9260 §3.2.1). As many as the INIT carries: a walk, not a list, so
/// that no count bounds them (§3.2.2 asks for every one).
pub(super) fn unrecognized<'a>(init: &InitRepr<'a>) -> impl Iterator<Item = (usize, usize)> + 'a {
    let mut off = 0;
    let mut stopped = false;
    init.params
        .iter()
        .map_while(move |param| {
            if stopped {
                return None;
            }
            let len = param.param_len();
            let at = off;
            off += (len + 3) & !3;
            let report = match param {
                // We parse Forward-TSN-Supported but do not implement PR-SCTP: to the
                // association it is unrecognized, and its type bits (11) say skip and report
                // (RFC 3758 §3.1, RFC 9260 §3.2.1). A Host Name Address (type 11, bits 00)
                // stops the walk unreported, as `walk_init_params` stops at it.
                ParamRepr::ForwardTsnSupported | ParamRepr::Unknown { .. } => {
                    let action = param.action();
                    stopped = !action.continues();
                    action.reports()
                }
                _ => false,
            };
            Some(report.then_some((at, len)))
        })
        .flatten()
}

/// Appends `item`'s wire form (padding included) to `buf` if `buf` then holds at most `room`
/// bytes; whether it did. Never beyond `buf`'s capacity: the buffers of peer reports are
/// allocated once, and a report that does not fit is left out rather than grown into.
pub(super) fn append_within<'a, E: ListElement<'a>>(
    buf: &mut Vec<u8>,
    item: &E,
    room: usize,
) -> bool {
    let at = buf.len();
    let n = item.buffer_len();
    if at + n > room.min(buf.capacity()) {
        return false;
    }
    buf.resize(at + n, 0);
    item.emit(&mut buf[at..]);
    true
}

/// The bytes of an INIT ACK's parameters (after its fixed fields) in an SCTP packet of `mtu`
/// bytes.
pub(super) fn init_ack_room(mtu: usize) -> usize {
    mtu.saturating_sub(HEADER_LEN + INIT_MIN_LEN)
}

/// Writes into `out` (cleared) the parameters of the INIT ACK that answers `init` (whose
/// parameter bytes are `params_bytes`), in wire form: our Adaptation Layer Indication (RFC 5043
/// §5.1), the State Cookie (RFC 9260 §3.3.3), then an Unrecognized Parameter for each
/// parameter [`unrecognized`] finds. §3.2.2: the receiver of an INIT "MUST put the
/// 'Unrecognized Parameter' parameter(s) in the INIT ACK chunk sent in response"; and §6.10
/// bounds a packet, IP header included, by the current PMTU (SCTP fragments user messages
/// only, §6.9: an INIT ACK goes whole or not at all). Where both cannot hold (an INIT that came in a
/// larger packet, or in IP fragments, asking for more reports than one packet of ours holds
/// beside the cookie), the reports that would pass `room` bytes of parameters are left out,
/// each whole (a cut parameter would report something the peer never sent); the others go.
/// False if not even the cookie fits (nothing to send).
pub(super) fn init_ack_params(
    out: &mut Vec<u8>,
    room: usize,
    adaptation: u32,
    cookie: &[u8],
    init: &InitRepr<'_>,
    params_bytes: &[u8],
) -> bool {
    out.clear();
    if !(append_within(out, &ParamRepr::AdaptationLayerIndication(adaptation), room)
        && append_within(out, &ParamRepr::StateCookie(cookie), room))
    {
        return false;
    }
    for (off, len) in unrecognized(init) {
        if let Some(p) = params_bytes.get(off..off + len) {
            // §3.3.3: each unrecognized parameter, whole, in an Unrecognized Parameter.
            append_within(out, &ParamRepr::UnrecognizedParameter(p), room);
        }
    }
    true
}

/// The first parameter of type `ty` in the raw parameter bytes of an INIT or INIT ACK, whole
/// (type, length, value), walking the TLVs without parsing them: for a chunk the parser
/// refused. `None` if there is none or the walk meets a bad length first.
pub(super) fn raw_param(params: &[u8], ty: u16) -> Option<&[u8]> {
    let mut off = 0;
    while let Some(h) = params.get(off..off + 4) {
        let (t, len) = (
            u16::from_be_bytes([h[0], h[1]]),
            usize::from(u16::from_be_bytes([h[2], h[3]])),
        );
        if len < 4 {
            return None;
        }
        let whole = params.get(off..off + len)?;
        if t == ty {
            return Some(whole);
        }
        off += len.next_multiple_of(4);
    }
    None
}

/// The IPv4 and IPv6 Address parameters of an INIT or INIT ACK as one number, whatever their
/// order (a sum of per-address FNV-1a hashes, and their count): 0 when none are listed. Two
/// lists with the same number are taken to be the same list (§5.2.2 compares what a restart
/// lists with what the association has).
pub(super) fn address_set(init: &InitRepr<'_>) -> u32 {
    let (mut sum, mut n) = (0u32, 0u32);
    for param in init.params.iter() {
        let a = match param {
            ParamRepr::Ipv4Address(a) => addr_bytes(IpAddr::V4(a)),
            ParamRepr::Ipv6Address(a) => addr_bytes(IpAddr::V6(a)),
            _ => continue,
        };
        let h = a.iter().fold(0x811c_9dc5u32, |h, &b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
        sum = sum.wrapping_add(h);
        n += 1;
    }
    if n == 0 {
        0
    } else {
        sum.wrapping_add(n.wrapping_mul(0x9e37_79b9)) | 1
    }
}

/// Appends to `out` each IPv4 or IPv6 Address parameter of `init` (whole, from
/// `params_bytes`, the chunk's parameter bytes) that is not `known`: the addresses an INIT
/// would add to an association whose only peer address is `known` (RFC 9260 §5.2.2). Stops
/// at [`MAX_REPORTED_ADDRESSES`] bytes; returns whether any address was new.
pub(super) fn new_addresses(
    init: &InitRepr<'_>,
    params_bytes: &[u8],
    known: [u8; 16],
    out: &mut Vec<u8>,
) -> bool {
    let mut off = 0;
    let mut any = false;
    for param in init.params.iter() {
        let len = param.param_len();
        let addr = match param {
            ParamRepr::Ipv4Address(a) => Some(addr_bytes(IpAddr::V4(a))),
            ParamRepr::Ipv6Address(a) => Some(addr_bytes(IpAddr::V6(a))),
            _ => None,
        };
        if addr.is_some_and(|a| a != known) {
            any = true;
            if let Some(whole) = params_bytes.get(off..off + len) {
                if out.len() + whole.len() <= MAX_REPORTED_ADDRESSES {
                    out.extend_from_slice(whole);
                }
            }
        }
        off += (len + 3) & !3;
    }
    any
}

/// The cookie for an INIT (§5.1.3, and §5.2.1/§5.2.2 with tie-tags).
#[allow(clippy::too_many_arguments)]
pub(super) fn cookie_for_init(
    cfg: &Config,
    now: Instant,
    init: &InitRepr<'_>,
    params: &InitParams<'_>,
    peer_addr: [u8; 16],
    peer_port: u16,
    local_tag: u32,
    local_tsn: u32,
    local_tie_tag: u32,
    peer_tie_tag: u32,
) -> Cookie {
    let extra = params
        .cookie_preservative
        .unwrap_or(0)
        .min(MAX_PRESERVATIVE_MS);
    Cookie {
        created: now,
        lifespan: cfg
            .valid_cookie_life
            .saturating_add(core::time::Duration::from_millis(u64::from(extra))),
        local_tag,
        peer_tag: init.initiate_tag,
        local_initial_tsn: local_tsn,
        peer_initial_tsn: init.initial_tsn,
        peer_a_rwnd: init.a_rwnd,
        local_tie_tag,
        peer_tie_tag,
        peer_adaptation: params.adaptation.unwrap_or(0),
        peer_addresses: address_set(init),
        // RFC 5043 §8: one number both ways, the smallest anyone asked for.
        streams: cfg
            .streams
            .min(init.outbound_streams)
            .min(init.inbound_streams),
        local_port: cfg.local_port,
        peer_port,
        peer_addr,
    }
}

fn is_stale_cookie_error(chunk: &Chunk<&[u8]>) -> bool {
    matches!(ChunkRepr::parse(chunk), Ok(ChunkRepr::Error(e))
        if e.causes.iter().any(|c| matches!(c, CauseRepr::StaleCookie { .. })))
}

/// An address as the 16 bytes cookies bind to.
pub fn addr_bytes(addr: IpAddr) -> [u8; 16] {
    match addr {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// Why the endpoint dropped a packet without answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    BadChecksum,
    Malformed,
    /// §8.4 rule 2: an out-of-the-blue ABORT.
    Abort,
    /// §8.4 rule 6: SHUTDOWN COMPLETE.
    ShutdownComplete,
    /// §8.4 rule 1: the source is not a unicast address.
    NotUnicast,
    /// §8.4 rule 7: COOKIE ACK, or an ERROR reporting a Stale Cookie.
    CookieAckOrError,
    /// INIT with a non-zero tag or bundled with other chunks (§8.5.1 A, §6.10), or with an
    /// Initiate Tag of 0 (§3.3.2).
    BadInit,
    /// COOKIE ECHO whose MAC does not verify, or that does not match the packet's tag, ports
    /// or source address (§5.1.5 steps 1-2).
    BadCookie,
    /// A packet with a live association's verification tag and peer port from another source
    /// address ([`Endpoint::note_live`]).
    OtherPeerAddress,
    /// The answer does not fit the output buffer.
    NoRoom,
    /// §8.5.1 A: a packet with a Verification Tag of 0 that is not an INIT, silently
    /// discarded (it would get a reflected ABORT or SHUTDOWN COMPLETE of tag 0 otherwise).
    ZeroTag,
}

impl Ignored {
    /// Every reason, in [`IgnoredCounts`]' order.
    pub const ALL: [Ignored; 11] = [
        Ignored::BadChecksum,
        Ignored::Malformed,
        Ignored::Abort,
        Ignored::ShutdownComplete,
        Ignored::NotUnicast,
        Ignored::CookieAckOrError,
        Ignored::BadInit,
        Ignored::BadCookie,
        Ignored::OtherPeerAddress,
        Ignored::NoRoom,
        Ignored::ZeroTag,
    ];

    /// The reason's counter name (telemetry's `sctp/ignored_why/NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Ignored::BadChecksum => "bad_checksum",
            Ignored::Malformed => "malformed",
            Ignored::Abort => "ootb_abort",
            Ignored::ShutdownComplete => "ootb_shutdown_complete",
            Ignored::NotUnicast => "not_unicast",
            Ignored::CookieAckOrError => "ootb_cookie_ack_or_error",
            Ignored::BadInit => "bad_init",
            Ignored::BadCookie => "bad_cookie",
            Ignored::OtherPeerAddress => "other_peer_address",
            Ignored::NoRoom => "no_room",
            Ignored::ZeroTag => "zero_tag",
        }
    }
}

/// What the endpoint ignored, a counter per [`Ignored`] reason (their sum is
/// [`EndpointStats::ignored`]): an operator told only "ignored" cannot tell a probe of closed
/// ports from a peer whose packets are malformed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IgnoredCounts([u64; Ignored::ALL.len()]);

impl IgnoredCounts {
    pub fn get(&self, why: Ignored) -> u64 {
        self.0[why as usize]
    }

    /// (name, count) of every reason.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Ignored::ALL.iter().map(|&w| (w.name(), self.get(w)))
    }
}

/// The endpoint's answer to a packet that matched no association.
#[derive(Debug)]
pub enum Outcome {
    /// Nothing to send (counted).
    Ignored(Ignored),
    /// A reply of this many bytes is in the output buffer (INIT ACK, ABORT, SHUTDOWN
    /// COMPLETE, ERROR), CRC32c filled, to the packet's source.
    Reply(usize),
    /// A valid COOKIE ECHO made an association. It has processed the whole packet (DATA
    /// bundled with the COOKIE ECHO was delivered) and has its COOKIE ACK to send.
    Accepted(Box<Association>),
}

/// Counters of everything the endpoint saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointStats {
    pub packets_in: u64,
    pub inits: u64,
    pub init_acks_out: u64,
    pub cookies_accepted: u64,
    pub bad_cookies: u64,
    pub stale_cookies: u64,
    /// INITs refused for their Adaptation Layer Indication (RFC 5043 §11.1).
    pub adaptation_refused: u64,
    /// INITs refused for a zero OS/MIS or a_rwnd below 1500 (§3.3.2).
    pub invalid_inits: u64,
    /// INITs refused with ABORT for a Host Name Address (§3.3.2.1).
    pub host_name_refused: u64,
    pub ootb_aborts_out: u64,
    /// INITs to an SCTP port with no endpoint on it, answered with ABORT (§8.4 rule 3).
    pub closed_port_aborts_out: u64,
    pub ootb_shutdown_completes_out: u64,
    pub ignored: u64,
    /// [`EndpointStats::ignored`] by reason.
    pub ignored_why: IgnoredCounts,
    pub bad_checksum: u64,
    /// Packets of a live association from another of the peer's addresses, dropped, not
    /// answered ([`Endpoint::note_live`]).
    pub other_peer_address: u64,
}

/// The endpoint of one local port.
#[derive(Debug)]
pub struct Endpoint {
    cfg: Config,
    key: CookieKey,
    prf: Prf,
    next_label: u64,
    stats: EndpointStats,
    /// (Our verification tag, the peer's port) of each live association of this port.
    live: HashSet<(u32, u16)>,
    /// The parameters of the INIT ACK being written ([`init_ack_params`]): room for one packet
    /// of `cfg.path_mtu`, the largest INIT ACK we send, allocated with the endpoint (and again
    /// only if `set_config` raises the path MTU), so that an INIT flood allocates nothing.
    init_ack: Vec<u8>,
}

impl Endpoint {
    /// `secret` keys the cookie MAC and every random value (verification tags, initial TSNs,
    /// heartbeat nonces); it must come from a real random source in production.
    pub fn new(cfg: Config, secret: [u8; 32]) -> Result<Self, &'static str> {
        cfg.validate()?;
        let key = CookieKey::new(secret);
        Ok(Endpoint {
            cfg,
            key,
            prf: Prf::new(key, u64::MAX),
            next_label: 0,
            stats: EndpointStats::default(),
            live: HashSet::new(),
            init_ack: Vec::with_capacity(init_ack_room(cfg.path_mtu)),
        })
    }

    /// Tells the endpoint an association lives with our verification tag `local_tag` and the
    /// peer's port `peer_port`, until [`Endpoint::forget_live`].
    ///
    /// Associations are found by the peer's address and port, and this end is single-homed:
    /// it keeps the peer's other addresses (its INIT's Address parameters) only as a checksum
    /// (RFC 9260 §5.1.2 C asks them recorded). A packet from another of them (a multihomed
    /// peer failing over, a route change) reached the endpoint as out of the blue, and §8.4
    /// rule 8's ABORT, reflecting the tag the packet carried, ended the association: the
    /// peer took it as ours. A packet that carries a live association's tag and peer port is
    /// that association's, whatever its source: it is dropped and counted
    /// (`other_peer_address`), and the peer's SCTP goes back to the address the association
    /// answers on (found by an independent review, session 60). A SHUTDOWN ACK is answered
    /// all the same (RFC 9260 §8.4 rule 5: the association may have just closed). The tag is what proves a
    /// packet is the peer's (§8.5); one who knows it could end the association from the
    /// right address anyway.
    pub fn note_live(&mut self, local_tag: u32, peer_port: u16) {
        self.live.insert((local_tag, peer_port));
    }

    /// The association of [`Endpoint::note_live`] has ended.
    pub fn forget_live(&mut self, local_tag: u32, peer_port: u16) {
        self.live.remove(&(local_tag, peer_port));
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Replaces the settings associations made from now on start with (an operator's `set
    /// sctp`); those that exist keep theirs. The port and the cookie key stay.
    pub fn set_config(&mut self, cfg: Config) -> Result<(), &'static str> {
        if cfg.local_port != self.cfg.local_port {
            return Err("the SCTP port of an endpoint does not change");
        }
        cfg.validate()?;
        self.cfg = cfg;
        let room = init_ack_room(cfg.path_mtu);
        self.init_ack
            .reserve_exact(room.saturating_sub(self.init_ack.len()));
        Ok(())
    }

    pub fn stats(&self) -> &EndpointStats {
        &self.stats
    }

    fn label(&mut self) -> u64 {
        self.next_label += 1;
        self.next_label
    }

    /// Active open towards `peer`: an association in COOKIE-WAIT whose first
    /// `poll_transmit` is the INIT.
    pub fn connect(&mut self, now: Instant, peer: IpAddr, peer_port: u16) -> Association {
        let label = self.label();
        Association::connect(self.cfg, self.key, label, now, addr_bytes(peer), peer_port)
    }

    fn ignore(&mut self, why: Ignored) -> Outcome {
        self.stats.ignored += 1;
        self.stats.ignored_why.0[why as usize] += 1;
        Outcome::Ignored(why)
    }

    /// A packet from `peer` that matched no association (§8.4). A reply goes into `out`.
    pub fn handle<D: Deliver + ?Sized>(
        &mut self,
        now: Instant,
        peer: IpAddr,
        packet: &[u8],
        out: &mut [u8],
        rx: &mut D,
    ) -> Outcome {
        self.stats.packets_in += 1;
        let unicast = match peer {
            IpAddr::V4(a) => !(a.is_broadcast() || a.is_multicast() || a.is_unspecified()),
            IpAddr::V6(a) => !(a.is_multicast() || a.is_unspecified()),
        };
        if !unicast {
            // §8.4 rule 1: nothing from a non-unicast source is answered.
            return self.ignore(Ignored::NotUnicast);
        }
        let pkt = match Packet::new_verified(packet) {
            Ok(p) => p,
            Err(crate::wire::Error::BadChecksum) => {
                self.stats.bad_checksum += 1;
                return self.ignore(Ignored::BadChecksum);
            }
            Err(_) => return self.ignore(Ignored::Malformed),
        };
        let Ok(hdr) = HeaderRepr::parse(&pkt) else {
            return self.ignore(Ignored::Malformed);
        };
        // Ours is the only SCTP endpoint of this address (the host's kernel has none), so a
        // packet for another port is out of the blue for the host: it is answered by §8.4's
        // rules as a host with nothing on that port answers (an INIT with an ABORT, rule 3),
        // so that a peer that dialled the wrong port hears so at once.
        let ours = hdr.dst_port == self.cfg.local_port;
        let mut n_chunks = 0;
        let mut first = None;
        // §8.4 rules 5-7 ask whether the packet "contains" these, wherever they stand.
        let (mut shutdown_ack, mut shutdown_complete, mut spared) = (false, false, false);
        for c in pkt.chunks_ref() {
            let Ok(c) = c else {
                return self.ignore(Ignored::Malformed);
            };
            match c.chunk_type() {
                ChunkType::Abort => return self.ignore(Ignored::Abort),
                ChunkType::ShutdownAck => shutdown_ack = true,
                ChunkType::ShutdownComplete => shutdown_complete = true,
                ChunkType::CookieAck => spared = true,
                // Rule 7 spares an ERROR only when it reports a Stale Cookie; any other is
                // answered by rule 8.
                ChunkType::Error if is_stale_cookie_error(&c) => spared = true,
                _ => {}
            }
            if first.is_none() {
                first = Some(c);
            }
            n_chunks += 1;
        }
        let Some(first) = first else {
            return self.ignore(Ignored::Malformed);
        };
        let reply_hdr = HeaderRepr {
            src_port: hdr.dst_port,
            dst_port: hdr.src_port,
            verification_tag: hdr.verification_tag,
        };
        // A SHUTDOWN ACK is answered whatever the tag (§8.4 rule 5): a peer whose SHUTDOWN
        // COMPLETE was lost retransmits it from SHUTDOWN-ACK-SENT, and an association that
        // just closed here may stay in the live set until the control thread hears of its end
        // (which waits for the ULP's events; the runtime forgets it sooner, when its core
        // sends a packet back). Unanswered, that peer ended at Association.Max.Retrans,
        // unreachable, instead of shut down (an independent review). A live association's
        // peer sends one only after our SHUTDOWN, so the answer ends nothing it would keep.
        if ours
            && !shutdown_ack
            && !matches!(first.chunk_type(), ChunkType::Init | ChunkType::CookieEcho)
            && self.live.contains(&(hdr.verification_tag, hdr.src_port))
        {
            self.stats.other_peer_address += 1;
            return self.ignore(Ignored::OtherPeerAddress);
        }
        match first.chunk_type() {
            ChunkType::Init => {
                if hdr.verification_tag != 0 || n_chunks != 1 {
                    return self.ignore(Ignored::BadInit);
                }
                if !ours {
                    // §8.4 rule 3: the ABORT carries the INIT's Initiate Tag, T bit clear.
                    let tag = InitChunk::new_checked(first.bytes_ref())
                        .map(|c| c.initiate_tag())
                        .unwrap_or(0);
                    if tag == 0 {
                        return self.ignore(Ignored::BadInit);
                    }
                    self.stats.closed_port_aborts_out += 1;
                    return self.abort_reply(out, hdr, tag, &[]);
                }
                self.on_init(now, peer, hdr, &first, out)
            }
            // §8.5.1 A: "Otherwise, the receiver MUST silently discard the packet."
            _ if hdr.verification_tag == 0 => self.ignore(Ignored::ZeroTag),
            ChunkType::CookieEcho if ours => {
                self.on_cookie_echo(now, peer, hdr, &first, packet, out, rx)
            }
            _ if shutdown_ack => {
                // §8.4 rule 5: SHUTDOWN COMPLETE, tag reflected, T bit set.
                self.stats.ootb_shutdown_completes_out += 1;
                let sc = ChunkRepr::ShutdownComplete(ShutdownCompleteRepr { t_bit: true });
                self.reply(out, &reply_hdr, &sc)
            }
            // Rules 6 and 7.
            _ if shutdown_complete => self.ignore(Ignored::ShutdownComplete),
            _ if spared => self.ignore(Ignored::CookieAckOrError),
            _ => {
                // §8.4 rule 8: ABORT, tag reflected, T bit set.
                self.stats.ootb_aborts_out += 1;
                let abort = ChunkRepr::Abort(AbortRepr {
                    t_bit: true,
                    causes: List::empty(),
                });
                self.reply(out, &reply_hdr, &abort)
            }
        }
    }

    fn reply(&mut self, out: &mut [u8], hdr: &HeaderRepr, chunk: &ChunkRepr<'_>) -> Outcome {
        let Ok(mut b) = PacketBuilder::new(out, hdr) else {
            return self.ignore(Ignored::NoRoom);
        };
        if b.push(chunk).is_err() {
            return self.ignore(Ignored::NoRoom);
        }
        let len = b.packet_len();
        crc32c::fill(&mut out[..len]);
        Outcome::Reply(len)
    }

    fn on_init(
        &mut self,
        now: Instant,
        peer: IpAddr,
        hdr: HeaderRepr,
        chunk: &Chunk<&[u8]>,
        out: &mut [u8],
    ) -> Outcome {
        self.stats.inits += 1;
        let init = match InitRepr::parse(chunk) {
            Ok(i) => i,
            Err(crate::wire::Error::Malformed) => {
                // §3.3.2: tag 0 is dropped; OS or MIS of 0, or a_rwnd below 1500, is answered
                // with ABORT (Invalid Mandatory Parameter) on the INIT's own tag.
                let tag = InitChunk::new_checked(chunk.bytes_ref())
                    .map(|c| c.initiate_tag())
                    .unwrap_or(0);
                if tag == 0 {
                    return self.ignore(Ignored::BadInit);
                }
                self.stats.invalid_inits += 1;
                let causes = [CauseRepr::InvalidMandatoryParameter];
                return self.abort_reply(out, hdr, tag, &causes);
            }
            Err(_) => return self.ignore(Ignored::Malformed),
        };
        let params = walk_init_params(&init);
        if let Some((off, len)) = params.host_name {
            // §3.3.2.1: "The receiver of an INIT chunk or INIT ACK containing a Host Name
            // Address parameter MUST send an ABORT and MAY include an Unresolvable Address
            // error cause": the parameter, whole, when it is short enough to report.
            self.stats.host_name_refused += 1;
            let address = chunk
                .bytes_ref()
                .get(INIT_MIN_LEN + off..INIT_MIN_LEN + off + len)
                .unwrap_or_default();
            let causes = [CauseRepr::UnresolvableAddress { address }];
            let n = usize::from(!address.is_empty() && len <= MAX_REPORTED_ADDRESSES);
            return self.abort_reply(out, hdr, init.initiate_tag, &causes[..n]);
        }
        if params.adaptation != Some(self.cfg.adaptation_indication) {
            // RFC 5043 §11.1 (and §7.1: an endpoint restricted to DDP refuses the rest).
            self.stats.adaptation_refused += 1;
            let causes = [CauseRepr::UserInitiatedAbort {
                reason: ADAPTATION_REASON.as_bytes(),
            }];
            return self.abort_reply(out, hdr, init.initiate_tag, &causes);
        }
        let local_tag = self.prf.nonzero_u32();
        let local_tsn = self.prf.nonzero_u32();
        let cookie = cookie_for_init(
            &self.cfg,
            now,
            &init,
            &params,
            addr_bytes(peer),
            hdr.src_port,
            local_tag,
            local_tsn,
            0,
            0,
        )
        .seal(&self.key);
        let params_bytes = chunk.bytes_ref().get(INIT_MIN_LEN..).unwrap_or_default();
        // The INIT ACK fits a packet of the path MTU new associations start with (and the
        // caller's buffer).
        let room = init_ack_room(self.cfg.path_mtu.min(out.len()));
        let mut bytes = core::mem::take(&mut self.init_ack);
        let written = init_ack_params(
            &mut bytes,
            room,
            self.cfg.adaptation_indication,
            &cookie,
            &init,
            params_bytes,
        );
        // Written by `init_ack_params` just now, so they parse; the check costs an INIT ACK's
        // walk, and keeps a mistake from becoming a panic.
        let r = match (written, List::parse(&bytes)) {
            (true, Ok(params)) => {
                let ack = ChunkRepr::InitAck(InitAckRepr(InitRepr {
                    initiate_tag: local_tag,
                    a_rwnd: self.cfg.a_rwnd,
                    outbound_streams: self.cfg.streams,
                    inbound_streams: self.cfg.streams,
                    initial_tsn: local_tsn,
                    params,
                }));
                let reply_hdr = HeaderRepr {
                    src_port: hdr.dst_port,
                    dst_port: hdr.src_port,
                    verification_tag: init.initiate_tag,
                };
                self.reply(out, &reply_hdr, &ack)
            }
            _ => self.ignore(Ignored::NoRoom),
        };
        self.init_ack = bytes;
        if matches!(r, Outcome::Reply(_)) {
            self.stats.init_acks_out += 1;
        }
        r
    }

    fn abort_reply(
        &mut self,
        out: &mut [u8],
        hdr: HeaderRepr,
        tag: u32,
        causes: &[CauseRepr<'_>],
    ) -> Outcome {
        let reply_hdr = HeaderRepr {
            src_port: hdr.dst_port,
            dst_port: hdr.src_port,
            verification_tag: tag,
        };
        let abort = ChunkRepr::Abort(AbortRepr {
            t_bit: false,
            causes: List::new(causes),
        });
        self.reply(out, &reply_hdr, &abort)
    }

    #[allow(clippy::too_many_arguments)]
    fn on_cookie_echo<D: Deliver + ?Sized>(
        &mut self,
        now: Instant,
        peer: IpAddr,
        hdr: HeaderRepr,
        chunk: &Chunk<&[u8]>,
        packet: &[u8],
        out: &mut [u8],
        rx: &mut D,
    ) -> Outcome {
        let bytes = chunk.value_ref();
        if bytes.len() != COOKIE_LEN {
            self.stats.bad_cookies += 1;
            return self.ignore(Ignored::BadCookie);
        }
        let Ok(c) = Cookie::open(bytes, &self.key) else {
            self.stats.bad_cookies += 1;
            return self.ignore(Ignored::BadCookie);
        };
        // §5.1.5 step 2: the packet's tag and ports, and (single-homed) its source, must be
        // those the cookie was issued for.
        if c.local_tag != hdr.verification_tag
            || c.local_port != hdr.dst_port
            || c.peer_port != hdr.src_port
            || c.peer_addr != addr_bytes(peer)
            || c.lifespan > longest_issued_lifespan(&self.cfg)
        {
            self.stats.bad_cookies += 1;
            return self.ignore(Ignored::BadCookie);
        }
        if let Some(staleness) = c.staleness(now) {
            // §5.1.5 step 3: ERROR with Stale Cookie, on the peer's tag.
            self.stats.stale_cookies += 1;
            let causes = [CauseRepr::StaleCookie { staleness }];
            let reply_hdr = HeaderRepr {
                src_port: hdr.dst_port,
                dst_port: hdr.src_port,
                verification_tag: c.peer_tag,
            };
            let e = ChunkRepr::Error(ErrorChunkRepr {
                causes: List::new(&causes),
            });
            return self.reply(out, &reply_hdr, &e);
        }
        self.stats.cookies_accepted += 1;
        let label = self.label();
        let mut a = Association::from_cookie(self.cfg, self.key, label, now, &c);
        // The association takes the packet again: its COOKIE ECHO is case D of §5.2.4 (a
        // no-op), then any DATA bundled after it is delivered and acknowledged.
        let _ = a.handle(now, packet, rx);
        Outcome::Accepted(Box::new(a))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;
    use crate::wire::sctp::CookieEchoRepr;
    use core::time::Duration;
    use std::net::Ipv4Addr;

    /// [`IgnoredCounts`] indexes by the reason's discriminant: `ALL` must list every reason
    /// in the enum's order, once.
    #[test]
    fn every_ignored_reason_has_its_own_counter() {
        for (i, w) in Ignored::ALL.iter().enumerate() {
            assert_eq!(*w as usize, i, "{w:?}");
        }
        let names: std::collections::HashSet<_> = Ignored::ALL.iter().map(|w| w.name()).collect();
        assert_eq!(names.len(), Ignored::ALL.len());
    }

    /// RFC 9260 §5.1.3: the key changes every period so that one leaked key forges cookies
    /// of its period only. A cookie sealed under one period's key and claiming a lifespan no
    /// cookie of ours carries (weeks) was accepted weeks after that key was retired; now a
    /// lifespan beyond the longest this endpoint writes is refused like a bad MAC. One it
    /// does write is still taken (an independent review).
    #[test]
    fn a_cookie_claiming_a_lifespan_never_issued_is_refused_5_1_3() {
        let cfg = Config {
            local_port: 5002,
            ..Config::default()
        };
        let mut ep = Endpoint::new(cfg, [7; 32]).unwrap();
        let peer = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
        let t0 = Instant::from_nanos(1_000_000_000);
        let cookie = |lifespan, local_tag| Cookie {
            created: t0,
            lifespan,
            local_tag,
            peer_tag: 0x2222,
            local_initial_tsn: 1,
            peer_initial_tsn: 1,
            peer_a_rwnd: 65536,
            local_tie_tag: 0,
            peer_tie_tag: 0,
            peer_adaptation: 1,
            streams: 4,
            local_port: 5002,
            peer_port: 5001,
            peer_addr: addr_bytes(peer),
            peer_addresses: 0,
        };
        let echo = |ep: &mut Endpoint, c: Cookie, now: Instant| {
            let sealed = c.seal(&ep.key);
            let hdr = HeaderRepr {
                src_port: 5001,
                dst_port: 5002,
                verification_tag: c.local_tag,
            };
            let mut pkt = vec![0u8; 512];
            let mut b = PacketBuilder::new(&mut pkt, &hdr).unwrap();
            b.push(&ChunkRepr::CookieEcho(CookieEchoRepr { cookie: &sealed }))
                .unwrap();
            let len = b.packet_len();
            pkt.truncate(len);
            crc32c::fill(&mut pkt);
            let mut out = vec![0u8; 2048];
            let mut rx = |_: super::super::Message<'_>| {};
            matches!(
                ep.handle(now, peer, &pkt, &mut out, &mut rx),
                Outcome::Accepted(_)
            )
        };
        let weeks = Duration::from_millis(u64::from(u32::MAX));
        let later = t0 + Duration::from_secs(7 * 24 * 3600);
        assert!(
            !echo(&mut ep, cookie(weeks, 0x1111), later),
            "a week and 168 key periods later"
        );
        assert_eq!(ep.stats().bad_cookies, 1);
        let longest = longest_issued_lifespan(&cfg);
        assert!(echo(&mut ep, cookie(longest, 0x3333), t0 + longest));
    }
}
