//! The endpoint's own link and network addresses, sans-IO: which received frames are ours,
//! ARP (RFC 826) and IPv6 Neighbor Discovery (RFC 4861 §7) answered for our addresses, and
//! outgoing SCTP packets framed in Ethernet and IPv4 or IPv6, so the endpoint works on a real
//! segment or a veth without static tables.
//!
//! [`Interface::receive`] sorts every frame into: an SCTP packet for one of our addresses, a
//! reply to send (ARP reply, Neighbor Advertisement, ICMP or ICMPv6 Echo Reply), an ICMP
//! Fragmentation Needed / Packet Too Big for the association it names (RFC 9260 §7.3,
//! Appendix C), an IPv4 or IPv6 fragment of an SCTP packet kept for reassembly (RFC 1122
//! §3.3.2, RFC 8200 §4.5), or a drop with its reason, counted. An IPv6 SCTP packet above a
//! path MTU ICMP lowered is cut into source fragments ([`Interface::fragment_ipv6`]).
//!
//! Neighbours live in a small fixed table (no allocation after creation) and are learnt only
//! from what can be trusted: ARP for our address (RFC 826), valid Neighbor Discovery (RFC 4861
//! §7.1, checksum included; advertisements only for addresses we asked about or already know,
//! §7.2.5, and the Override flag obeyed), and, through [`Interface::confirm`], SCTP packets the
//! association has authenticated (CRC32c and verification tag). An SCTP packet is never taken
//! at its word before that, so a forged frame cannot redirect a peer's traffic. Static entries
//! ([`Interface::learn_static`]) are never replaced; when the table is full the least recently
//! confirmed dynamic entry goes.
//!
//! [`Interface::frame_sctp`] writes the Ethernet and IP headers in front of an SCTP packet the
//! caller has already placed at [`Interface::header_len`]; when the neighbour is unknown it
//! writes a solicitation instead, at most one per destination per second (RFC 1122 §2.3.2.1,
//! RFC 4861 §7.2.2), and says so. VLAN-tagged frames are not ours yet: dropped and counted.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use etherparse::Icmpv6Type;

use core::time::Duration;

use crate::sctp::Instant;
use crate::wire::link::{
    self, SctpFrame, ETHERNET_HEADER_LEN, ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6,
    IP_PROTO_SCTP,
};
use crate::wire::Error;

pub const IPV4_HEADER_LEN: usize = 20;
pub const IPV6_HEADER_LEN: usize = 40;
const ARP_LEN: usize = 28;
const ICMPV6: u8 = 58;
const IP_PROTO_ICMP: u8 = 1;
/// ESP (RFC 4303 §2).
const IP_PROTO_ESP: u8 = 50;
/// ESP's header: the SPI and the sequence number (RFC 4303 §2), what RFC 7112 §5 asks the
/// first fragment of an ESP packet to hold.
const ESP_HEADER_LEN: usize = 8;
const ICMP_ECHO_REPLY: u8 = 0;
const ICMP_ECHO: u8 = 8;
const ICMPV6_ECHO: u8 = 128;
const ICMPV6_ECHO_REPLY: u8 = 129;
/// RFC 792 Destination Unreachable, and its code 4 "fragmentation needed and DF set".
const ICMP_UNREACHABLE: u8 = 3;
const ICMP_FRAG_NEEDED: u8 = 4;
/// RFC 4443 §3.2 Packet Too Big.
const ICMPV6_TOO_BIG: u8 = 2;
/// RFC 792 Destination Unreachable code 2, "protocol unreachable"; RFC 4443 §3.4 Parameter
/// Problem, code 1 "unrecognized Next Header type encountered": RFC 9260 Appendix C ICMP8.
const ICMP_PROTOCOL_UNREACHABLE: u8 = 2;
const ICMPV6_PARAMETER_PROBLEM: u8 = 4;
const ICMPV6_UNRECOGNIZED_NEXT_HEADER: u8 = 1;
/// Bytes of the quoted SCTP packet an ICMP error must carry for RFC 9260 Appendix C: source
/// and destination ports and the verification tag (RFC 792 quotes 64 bits of the datagram).
const QUOTED_SCTP_MIN: usize = 8;
const ND_SOLICIT: u8 = 135;
const ND_ADVERT: u8 = 136;
/// RFC 4861 §7.1.1 / §7.1.2: Neighbor Discovery messages must arrive with hop limit 255.
const ND_HOP_LIMIT: u8 = 255;
const BROADCAST: [u8; 6] = [0xff; 6];
/// Hop limit / TTL of the packets we send.
const TTL: u8 = 64;
/// Ethernet frames are at least this long without FCS; shorter ones are padded.
const ETHERNET_MIN: usize = 60;
/// At most one solicitation per destination per this long (RFC 1122 §2.3.2.1: "no more than
/// one ARP request per second"; RFC 4861 §7.2.2 RetransTimer is 1 s).
const SOLICIT_INTERVAL: Duration = Duration::from_secs(1);

/// RFC 5227 §2.4 (c), §1.1 DEFEND_INTERVAL: at most one ARP Announcement defends our address
/// in this long.
pub const DEFEND_INTERVAL: Duration = Duration::from_secs(10);
/// How long a neighbour stays trusted without confirmation while we send to it (RFC 4861
/// §10 REACHABLE_TIME).
pub const REACHABLE_TIME: Duration = Duration::from_secs(30);
/// The longest solicitation [`Interface::solicit`] writes: a Neighbor Solicitation with its
/// source link-layer address option (14 + 40 + 32 bytes); an ARP request is 60.
pub const SOLICITATION_MAX: usize = 86;
/// Destinations being resolved at once.
const PENDING: usize = 16;
/// Peers whose lowered path MTU the interface keeps (for DF and IPv6 source fragmentation,
/// [`Interface::set_path_mtu`]).
const LOWERED: usize = 16;
/// IP datagrams reassembled at once ([`Reassembly`]).
const REASSEMBLIES: usize = 4;
/// A datagram not complete this long after its first fragment came is abandoned, its
/// fragments discarded: RFC 8200 §4.5's 60 seconds ("must be abandoned"), within RFC 1122
/// §3.3.2's 60 to 120 for IPv4.
pub const REASSEMBLY_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest IPv4 payload (IPv6 fragmentable part) reassembled: an IPv4 packet of a
/// 9000-byte link (the largest `--mtu`), whose whole frame fits the data core's reply buffer.
const REASSEMBLY_MAX: usize = 9000 - IPV4_HEADER_LEN;
/// RFC 1122 §3.3.2: EMTU_R, the largest datagram a host reassembles, "MUST be greater than or
/// equal to 576"; RFC 8200 §5: an IPv6 node "must be able to accept a fragmented packet that,
/// after reassembly, is as large as 1500 octets". Floors of [`Interface::set_link_mtu`].
const EMTU_R_MIN_V4: usize = 576;
const EMTU_R_MIN_V6: usize = 1500;
/// RFC 8200 §5: the IPv6 minimum link MTU; no IPv6 path MTU is taken below it (RFC 8201 §4).
pub const IPV6_MIN_MTU: usize = 1280;
/// RFC 8200 §4.5: the Fragment header's Next Header value, and its length.
const IPV6_FRAGMENT: u8 = 44;
const IPV6_FRAGMENT_LEN: usize = 8;
/// RFC 8200 §4.3-§4.6: Hop-by-Hop Options, Routing, Destination Options.
const IPV6_HOP_BY_HOP: u8 = 0;
const IPV6_ROUTING: u8 = 43;
const IPV6_DEST_OPTS: u8 = 60;
/// The SCTP common header (RFC 9260 §3.1): what RFC 7112 §5 asks the first fragment to hold.
const SCTP_COMMON_HEADER_LEN: usize = 12;

/// Why a frame was not ours to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drop {
    /// Neither IPv4, IPv6 nor ARP.
    OtherEtherType,
    /// Addressed to another MAC (not broadcast, not an IPv6 multicast we listen to).
    OtherMac,
    /// An IP packet for an address that is not ours.
    OtherAddress,
    /// IP, but neither SCTP nor Neighbor Discovery.
    OtherProtocol,
    /// An IP fragment not reassembled: one not of an SCTP packet unicast to us, a first IPv6
    /// fragment without the whole header chain (RFC 7112 §5), or one of a datagram too long,
    /// overlapping or inconsistent (IPv4 and IPv6 fragments of SCTP packets to us are
    /// reassembled: [`Rx::Fragment`]).
    Fragment,
    /// IPv4 header checksum wrong.
    BadIpChecksum,
    /// Shorter than its headers, or a header that cannot be.
    Malformed,
    /// ARP that is not a request for one of our IPv4 addresses (replies are only learnt).
    ArpNotForUs,
    /// A VLAN-tagged frame (no VLAN is configured).
    Vlan,
    /// Neighbor Discovery that fails RFC 4861 §7.1 validity (hop limit, code, length) or is
    /// not a solicitation for our address.
    NdNotForUs,
    /// From a source address no sender may use: an Ethernet group address (IEEE 802.3
    /// §3.2.3), or an IP source RFC 1122 §3.2.1.3 and RFC 4291 §2.5.2-§2.5.3 rule out.
    InvalidSource,
    /// An ICMP Fragmentation Needed or ICMPv6 Packet Too Big that does not quote an SCTP
    /// packet we sent (RFC 9260 Appendix C ICMP5-ICMP6): a bad checksum, too short a quote
    /// for the SCTP common header, another protocol, or a quoted source not ours.
    IcmpIgnored,
    /// An ARP or a Neighbor Advertisement from another link address claiming our IP address
    /// (RFC 5227 §2.4, RFC 4862 §5.4.4): another host on the link is configured with it. Not
    /// learnt; an IPv4 one is answered with an ARP Announcement at most once a
    /// [`DEFEND_INTERVAL`] (then it is an ARP reply, not this).
    AddressConflict,
}

/// Counters: every frame lands in exactly one of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InterfaceStats {
    pub sctp: u64,
    pub arp_replies: u64,
    pub nd_adverts: u64,
    /// ARP replies and Neighbor Advertisements for us, learnt; and neighbours' announcements
    /// (an ARP Announcement, RFC 5227 §2.3; an unsolicited Neighbor Advertisement, RFC 4861
    /// §7.2.6), learnt where the neighbour is known.
    pub neighbour_answers: u64,
    pub other_ether_type: u64,
    pub other_mac: u64,
    pub other_address: u64,
    pub other_protocol: u64,
    pub fragments: u64,
    pub bad_ip_checksum: u64,
    pub malformed: u64,
    pub arp_not_for_us: u64,
    pub nd_not_for_us: u64,
    pub vlan: u64,
    /// Frames from a source address no sender may use ([`Drop::InvalidSource`]).
    pub invalid_source: u64,
    /// ICMP and ICMPv6 Echo Requests answered (RFC 1122 §3.2.2.6, RFC 4443 §4.2).
    pub echo_replies: u64,
    /// ICMP Fragmentation Needed and ICMPv6 Packet Too Big quoting one of our SCTP packets,
    /// handed on ([`Rx::TooBig`]) for the association they name to judge.
    pub icmp_too_big: u64,
    /// Those that quote no SCTP packet of ours ([`Drop::IcmpIgnored`]).
    pub icmp_ignored: u64,
    /// ICMP Protocol Unreachable and ICMPv6 "unrecognized Next Header" quoting one of our
    /// SCTP packets, handed on ([`Rx::ProtocolUnreachable`], RFC 9260 Appendix C ICMP8).
    pub icmp_protocol_unreachable: u64,
    /// IPv4 and IPv6 fragments of SCTP packets to us kept for reassembly ([`Rx::Fragment`]).
    pub fragments_kept: u64,
    /// IPv4 and IPv6 datagrams reassembled from them (RFC 791 §3.2, RFC 1122 §3.3.2, RFC
    /// 8200 §4.5).
    pub reassembled: u64,
    /// Datagrams abandoned [`REASSEMBLY_TIMEOUT`] after their first fragment, incomplete
    /// (RFC 8200 §4.5, RFC 1122 §3.3.2).
    pub reassembly_timeouts: u64,
    /// Incomplete datagrams given up to make room for another when every reassembly slot was
    /// taken (the least recently touched, a ping's first): their fragments are lost.
    pub reassembly_evicted: u64,
    /// Frames we sent because a neighbour was unknown (ARP request, Neighbor Solicitation).
    pub solicitations: u64,
    /// Solicitations for neighbours we kept sending to without confirmation.
    pub stale_probes: u64,
    /// ARP Announcements and unsolicited Neighbor Advertisements we sent
    /// ([`Interface::announce`]); sent, not received: outside [`InterfaceStats::frames`].
    pub announcements: u64,
    /// ARPs and Neighbor Advertisements from another link address claiming our IP address
    /// ([`Drop::AddressConflict`], those answered with an announcement included).
    pub address_conflicts: u64,
    /// IPv6 SCTP packets we sent as fragments, above a lowered path MTU (RFC 8200 §4.5,
    /// [`Interface::fragment_ipv6`]); sent, not received: outside [`InterfaceStats::frames`].
    pub source_fragmented: u64,
    /// Learnt neighbours forgotten to make room for another when the table was full (the
    /// least recently confirmed): what a flood of ARP requests from spoofed sources costs the
    /// real peers (a solicitation each, later). Outside [`InterfaceStats::frames`].
    pub neighbours_evicted: u64,
    /// Lowered path MTUs of one peer forgotten to make room for another's
    /// ([`Interface::set_path_mtu`]'s table is small): that peer's packets framed before its
    /// drop then leave whole until its next ICMP. Outside [`InterfaceStats::frames`].
    pub path_mtus_evicted: u64,
}

impl InterfaceStats {
    /// Frames received and classified: each is counted in exactly one of the counters summed.
    pub fn frames(&self) -> u64 {
        self.sctp
            + self.arp_replies
            + self.nd_adverts
            + self.echo_replies
            + self.icmp_too_big
            + self.icmp_ignored
            + self.icmp_protocol_unreachable
            + self.fragments_kept
            + self.neighbour_answers
            + self.other_ether_type
            + self.other_mac
            + self.other_address
            + self.other_protocol
            + self.fragments
            + self.bad_ip_checksum
            + self.malformed
            + self.arp_not_for_us
            + self.nd_not_for_us
            + self.vlan
            + self.invalid_source
            + self.address_conflicts
    }

    /// Frames that were not for this endpoint: another address, MAC, EtherType or protocol,
    /// or from a source no sender may use (the "not ours" of the core reports).
    pub fn not_ours(&self) -> u64 {
        self.other_address
            + self.other_mac
            + self.other_ether_type
            + self.other_protocol
            + self.invalid_source
    }
}

/// What a received frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rx<'a> {
    /// An SCTP packet for one of our addresses (its CRC32c not yet checked).
    Sctp(SctpFrame<'a>),
    /// A reply of this many bytes is in the output buffer: send it.
    Reply(usize),
    /// An IPv4 or IPv6 fragment of an SCTP packet to us, kept (RFC 1122 §3.3.2: a host MUST
    /// reassemble; RFC 8200 §4.5): `Some(n)` when it completed the datagram, which is then in
    /// the output buffer as a whole frame of `n` bytes (Ethernet, a 20-byte IPv4 header or a
    /// 40-byte IPv6 header whose Next Header is SCTP, the SCTP packet) to be received as any
    /// other. With [`Interface::reassemble_esp`], of an ESP packet to us too: the whole ESP
    /// datagram (protocol or Next Header 50) is for the IPsec port to open.
    Fragment(Option<usize>),
    /// An ICMP Fragmentation Needed or ICMPv6 Packet Too Big quoting an SCTP packet we sent:
    /// the association it names lowers its path MTU if the quote holds its tag.
    TooBig(TooBig),
    /// The same ICMP quoting an ESP packet we sent (RFC 4301 §6.1.2): the IPsec port judges
    /// it by the outbound SA its SPI names ([`EspTooBig`]).
    EspTooBig(EspTooBig),
    /// An ICMP Destination Unreachable "protocol unreachable" or an ICMPv6 Parameter Problem
    /// "unrecognized Next Header type encountered" (its pointer on a Next Header that says
    /// SCTP) quoting an SCTP packet we sent: the peer's host has no SCTP. The association it
    /// names treats it as an ABORT if the quote holds its tag (RFC 9260 Appendix C ICMP6,
    /// ICMP8). `mtu` is 0.
    ProtocolUnreachable(TooBig),
    /// Taken by the interface itself (an ARP reply or Neighbor Advertisement for us, learnt);
    /// nothing to send.
    Consumed,
    Dropped(Drop),
}

/// What an ICMP Fragmentation Needed (RFC 1191 §4) or ICMPv6 Packet Too Big (RFC 4443 §3.2)
/// says about one of our SCTP packets, from the packet it quotes (RFC 9260 Appendix C ICMP5:
/// "use the payload of the ICMP message ... to locate the association").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooBig {
    /// Our address, the quoted packet's source.
    pub local: IpAddr,
    /// The peer's, its destination.
    pub peer: IpAddr,
    pub local_port: u16,
    pub peer_port: u16,
    /// The quoted verification tag: the peer's tag, or 0 in an INIT (Appendix C ICMP6).
    pub vtag: u32,
    /// With a tag of 0: the Initiate Tag of the quoted INIT chunk, when enough is quoted to
    /// see that the first chunk is an INIT.
    pub init_tag: Option<u32>,
    /// The MTU of the next hop as the router gives it: RFC 1191 §4's Next-Hop MTU (0 from a
    /// router older than RFC 1191), RFC 4443 §3.2's MTU.
    pub mtu: u32,
    /// The quoted packet's IP length (its IPv4 Total Length; the IPv6 Payload Length plus
    /// the header): what RFC 1191 §5 guesses from when the router gives no MTU.
    pub quoted_len: u16,
}

impl TooBig {
    /// The path MTU (IP packet size) the message supports, if any: the router's MTU, or when
    /// it gives none (a router older than RFC 1191, §5) the largest plateau of RFC 1191 §7
    /// below the quoted packet's length. RFC 1191 §3: an MTU below 68 for IPv4 is ignored;
    /// RFC 8201 §4: a node "MUST NOT reduce its estimate of the Path MTU below the IPv6
    /// minimum link MTU" (1280): a smaller one is ignored. Whether it lowers anything is
    /// the association's to judge (§3/§4: never raise from ICMP).
    pub fn path_mtu(&self) -> Option<usize> {
        icmp_path_mtu(self.local, self.mtu, self.quoted_len)
    }
}

/// What an ICMP Fragmentation Needed or ICMPv6 Packet Too Big says about one of our ESP
/// packets, from the packet it quotes: the outer IP header and the first 8 bytes of ESP, the
/// SPI and the (low 32 bits of the) sequence number (RFC 4303 §2; RFC 792 quotes 64 bits of
/// the datagram's data, just these). RFC 4301 §6.1.2: the message is unauthenticated; the
/// IPsec port maps the SPI to one of our outbound SAs and checks the quote against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EspTooBig {
    /// Our address, the quoted packet's source (a tunnel's local end in tunnel mode).
    pub local: IpAddr,
    /// The quoted packet's destination (the peer, or the tunnel's far end).
    pub peer: IpAddr,
    pub spi: u32,
    /// The quoted sequence number: its low 32 bits under ESN (RFC 4303 §2.2.1).
    pub seq: u32,
    /// As [`TooBig::mtu`].
    pub mtu: u32,
    /// As [`TooBig::quoted_len`].
    pub quoted_len: u16,
}

impl EspTooBig {
    /// As [`TooBig::path_mtu`]: the path MTU (outer IP packet size) the message supports.
    pub fn path_mtu(&self) -> Option<usize> {
        icmp_path_mtu(self.local, self.mtu, self.quoted_len)
    }
}

/// [`TooBig::path_mtu`] for a message about a packet from `local`.
fn icmp_path_mtu(local: IpAddr, mtu: u32, quoted_len: u16) -> Option<usize> {
    // RFC 1191 §7 Table 7-1: the plateaus.
    const PLATEAUS: [u16; 10] = [32000, 17914, 8166, 4352, 2002, 1492, 1006, 508, 296, 68];
    let mtu = match mtu {
        0 => u32::from(*PLATEAUS.iter().find(|p| **p < quoted_len)?),
        // A hop drops a packet for its size only if it is larger than the MTU it reports:
        // a message saying otherwise is inconsistent (RFC 8899 §4.6.2's sanity check, here
        // against the quoted packet), forged or broken, and lowers nothing.
        m if m >= u32::from(quoted_len) => return None,
        m => m,
    };
    let mtu = usize::try_from(mtu).ok()?;
    match local {
        IpAddr::V4(_) => (mtu >= 68).then_some(mtu),
        // RFC 8201 §4: a Packet Too Big below 1280 is no reason to go below it.
        IpAddr::V6(_) => (mtu >= 1280).then_some(mtu),
    }
}

/// [`Interface::frame_sctp`] could not frame the packet: the neighbour's MAC is unknown. A
/// solicitation of this many bytes is in the output buffer instead (send it; 0 when one went
/// out less than a second ago). The SCTP packet is lost, and SCTP retransmits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unresolved {
    pub solicitation: usize,
}

/// How many neighbours are remembered (replaced oldest first).
pub const NEIGHBOURS: usize = 64;

#[derive(Debug, Clone, Copy)]
struct Neighbour {
    ip: IpAddr,
    mac: [u8; 6],
    /// Never replaced by learning.
    fixed: bool,
    /// When it was last learnt or confirmed (a counter): the least recent goes first.
    stamp: u64,
    /// Learnt or confirmed since the last transmission to it (its time is taken then: learning
    /// happens where no clock is passed in).
    fresh: bool,
    /// When a transmission last found it fresh.
    confirmed: Option<Instant>,
}

/// An IP datagram being reassembled (RFC 791 §3.2, RFC 8200 §4.5): a peer's SCTP packet sent
/// without DF (IPv4), or fragmented at its source (IPv6), after its path MTU fell below a DATA
/// chunk it had already sent (RFC 9260 §6.9). A few at a time ([`REASSEMBLIES`]): a fragment
/// of a new datagram takes a free slot or the least recently touched one (whose datagram is
/// lost, and SCTP retransmits it), so one forged fragment cannot evict a datagram under way; a
/// flood of them still can (no timer: bounded memory is floodable, RFC 4963 §4). Overlapping
/// fragments discard the datagram (RFC 5722 §4, IPv6's rule, taken for IPv4 as Linux does:
/// the CRC32c is no MAC), exact duplicates aside. Each data core has its own: fragments of one
/// datagram that a NIC's RSS spreads over cores (a later fragment has no ports to hash) are
/// not reassembled; virtual devices deliver them on one queue.
#[derive(Debug, Clone)]
struct Reassembly {
    /// Source, destination (their family the datagram's), identification (IPv4's 16 bits or
    /// IPv6's 32), protocol: IPv4's (RFC 791 §3.2: SCTP, or ESP when
    /// [`Interface::reassemble_esp`] is on); 0 for IPv6, whose key has none (RFC 8200 §4.5:
    /// only the first fragment's Next Header counts, [`Reassembly::upper`]).
    key: Option<(IpAddr, IpAddr, u32, u8)>,
    data: Box<[u8]>,
    /// The 8-byte units of `data` received.
    have: Box<[u64]>,
    /// The payload's length, once the last fragment (MF clear) came.
    total: Option<usize>,
    /// Where the upper-layer packet starts in `data`, and its protocol (SCTP, or ESP with
    /// [`Interface::reassemble_esp`]), once the first fragment gave them: 0 for IPv4; for
    /// IPv6 past the extension headers of the fragmentable part (RFC 8200 §4.5).
    upper: Option<(usize, u8)>,
    /// When a fragment last came (the interface's fragment count): the least recent goes.
    touched: u64,
    /// When its first fragment came ([`Interface::set_time`]'s clock): the datagram is
    /// abandoned [`REASSEMBLY_TIMEOUT`] later.
    started: Instant,
    /// A ping's datagram ([`Fragment::ping`]; the first fragment's word is final): it gives
    /// way to SCTP's and never takes a slot from one.
    ping: bool,
}

impl Reassembly {
    fn new() -> Reassembly {
        Reassembly {
            key: None,
            data: vec![0; REASSEMBLY_MAX].into_boxed_slice(),
            have: vec![0; REASSEMBLY_MAX.div_ceil(8).div_ceil(64)].into_boxed_slice(),
            total: None,
            upper: None,
            touched: 0,
            started: Instant::ZERO,
            ping: false,
        }
    }

    fn has(&self, u: usize) -> bool {
        self.have[u / 64] >> (u % 64) & 1 == 1
    }

    fn reset(&mut self) {
        self.key = None;
        self.have.fill(0);
        self.total = None;
        self.upper = None;
        self.ping = false;
    }

    fn complete(&self) -> Option<usize> {
        let t = self.total?;
        let units = t.div_ceil(8);
        (0..units).all(|u| self.has(u)).then_some(t)
    }
}

/// One IP fragment as [`Interface::fragment`] read it: its datagram (source, destination,
/// Identification, IPv4's protocol), its offset in bytes, whether more follow, its bytes, and
/// where the upper-layer packet starts in the datagram, with its protocol, if this is the
/// first fragment.
struct Fragment<'f> {
    key: (IpAddr, IpAddr, u32, u8),
    off: usize,
    more: bool,
    payload: &'f [u8],
    upper: Option<(usize, u8)>,
    /// The datagram is a ping's (ICMP or ICMPv6: reassembled for an Echo Request only), as
    /// far as this fragment tells: IPv4's protocol; the Next Header of IPv6's Fragment
    /// header, which every fragment carries though only the first's counts (RFC 8200 §4.5).
    ping: bool,
}

/// One port's addresses and neighbours.
#[derive(Debug, Clone)]
pub struct Interface {
    mac: [u8; 6],
    ipv4: Option<Ipv4Addr>,
    ipv6: Option<Ipv6Addr>,
    neighbours: [Neighbour; NEIGHBOURS],
    used: usize,
    clock: u64,
    /// Destinations we solicited, and when.
    pending: [Option<(IpAddr, Instant)>; PENDING],
    ip_id: u16,
    stats: InterfaceStats,
    /// The last neighbour learnt from the wire, until [`Interface::take_learnt`].
    learnt: Option<(IpAddr, [u8; 6])>,
    /// Peers whose path MTU ICMP lowered, with it ([`Interface::set_path_mtu`]); the next to
    /// replace when full.
    lowered: [Option<(IpAddr, u16)>; LOWERED],
    lowered_next: usize,
    /// What leaves above a lowered path MTU is fragmented after an IPsec port seals it, not
    /// here ([`Interface::fragment_after_sealing`]).
    sealed: bool,
    reassembly: [Reassembly; REASSEMBLIES],
    /// Fragments taken (the reassembly slots' clock).
    fragments_seen: u64,
    /// The time the caller last gave ([`Interface::set_time`]): the reassembly timer's clock.
    now: Instant,
    /// IPv6 datagrams fragmented at the source (a counter), and the secret key their
    /// Identification is drawn with ([`Interface::fragment_ipv6`]).
    fragmented: u64,
    id_key: IdKey,
    /// IPv4 and IPv6 fragments of ESP to us are reassembled too
    /// ([`Interface::reassemble_esp`]).
    esp_fragments: bool,
    /// The link MTU ([`Interface::set_link_mtu`]): the largest IP datagram reassembled
    /// (EMTU_R, RFC 1122 §3.3.2), within the floors RFC 1122 and RFC 8200 set.
    link_mtu: usize,
    /// The frames received are a datagram reassembled from fragments
    /// ([`Interface::set_reassembled`]).
    receiving_reassembled: bool,
    /// The reply just written answers a reassembled IPv6 Echo Request and is larger than
    /// every link carries: send it in fragments of this size ([`Interface::take_reply_fragment_mtu`]).
    reply_fragment_mtu: Option<usize>,
    /// When any clone of this interface (the port's data cores) last defended our IPv4
    /// address (RFC 5227 §2.4 (c)), in nanoseconds plus one (0: never). Shared, so that a port
    /// whose ARP reaches several cores (af_packet's fanout, software dispatch) still sends
    /// "not more than one defensive ARP Announcement every DEFEND_INTERVAL seconds".
    defended: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// RFC 7739 §5's secret for IPv6 Identifications ([`Interface::fragment_ipv6`]) and those of
/// IPv4 packets without DF ([`Interface::ipv4_id`]): SipHash keys
/// std draws from the OS's random source (per thread, then varied per instance). A clone (each
/// data core's interface is one) draws its own: clones sharing key and counter would give two cores' datagrams to one peer the
/// same Identifications, and the peer would reassemble one from pieces of both.
#[derive(Debug)]
struct IdKey(std::collections::hash_map::RandomState);

impl Clone for IdKey {
    fn clone(&self) -> IdKey {
        IdKey(std::collections::hash_map::RandomState::new())
    }
}

impl Interface {
    pub fn new(mac: [u8; 6], ipv4: Option<Ipv4Addr>, ipv6: Option<Ipv6Addr>) -> Interface {
        Interface {
            mac,
            ipv4,
            ipv6,
            neighbours: [Neighbour {
                ip: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                mac: [0; 6],
                fixed: false,
                stamp: 0,
                fresh: false,
                confirmed: None,
            }; NEIGHBOURS],
            used: 0,
            clock: 0,
            pending: [None; PENDING],
            ip_id: 0,
            stats: InterfaceStats::default(),
            learnt: None,
            lowered: [None; LOWERED],
            lowered_next: 0,
            sealed: false,
            reassembly: core::array::from_fn(|_| Reassembly::new()),
            fragments_seen: 0,
            now: Instant::ZERO,
            fragmented: 0,
            id_key: IdKey(std::collections::hash_map::RandomState::new()),
            esp_fragments: false,
            link_mtu: REASSEMBLY_MAX + IPV4_HEADER_LEN,
            receiving_reassembled: false,
            reply_fragment_mtu: None,
            defended: Default::default(),
        }
    }

    /// The link's MTU (`--mtu`): no datagram larger than it (IP header included) is
    /// reassembled. RFC 1122 §3.3.2 leaves EMTU_R to the host ("MUST be greater than or equal
    /// to 576"; RFC 8200 §5: 1500 for IPv6, the floors kept whatever `mtu` says). A peer's
    /// path MTU to us is at most our link's, so no SCTP packet it builds is larger (RFC 9260
    /// §7.3), and a larger one carries what this end refuses anyway (RFC 5043 §9: a DDP
    /// segment over the MULPDU announced from this link). Without this, fragments of SCTP
    /// packets up to 8980 bytes were held and handed on whatever the link's size.
    pub fn set_link_mtu(&mut self, mtu: usize) {
        self.link_mtu = mtu;
    }

    /// The largest IP payload (IPv4) or fragmentable part (IPv6) reassembled for `dst`'s
    /// family: the datagram within the link MTU, or the RFC's floor ([`EMTU_R_MIN_V4`],
    /// [`EMTU_R_MIN_V6`]), never above what a slot holds.
    fn reassembly_max(&self, dst: IpAddr) -> usize {
        let emtu_r = match dst {
            IpAddr::V4(_) => self.link_mtu.max(EMTU_R_MIN_V4),
            IpAddr::V6(_) => self.link_mtu.max(EMTU_R_MIN_V6),
        };
        emtu_r
            .saturating_sub(Interface::ip_header_len(dst))
            .min(REASSEMBLY_MAX)
    }

    /// With `on`, IPv4 and IPv6 fragments of ESP to us are reassembled as SCTP's are (RFC
    /// 4301 §5.2, RFC 4303 §3.4.1: ESP is opened once reassembled; RFC 8200 §4.5): the whole
    /// ESP datagram comes back as [`Rx::Fragment`] for the IPsec port to open. An IPv6 first
    /// fragment must hold the ESP header, SPI and sequence number (RFC 7112 §5). For a port with IPsec on: a peer whose
    /// path MTU fell with ESP packets in flight sends them fragmented (RFC 9260 §7.3).
    pub fn reassemble_esp(&mut self, on: bool) {
        self.esp_fragments = on;
    }

    /// With `on`, packets are sealed with ESP after they leave the interface, and the port
    /// fragments a sealed packet that is larger than its peer's path carries whole (RFC 4301
    /// §7; no source fragments are cut before, whose later pieces carry no ports for the
    /// policy). A lowered IPv6 path MTU is then kept below 1280 bytes: it is the size of the
    /// packet before sealing ([`Interface::sealed_fragment_mtu`]), and the packet sealed is
    /// larger (RFC 8200 §5's 1280 bounds the fragments the port cuts, not this).
    pub fn fragment_after_sealing(&mut self, on: bool) {
        self.sealed = on;
    }

    /// Our address of `peer`'s family, the one packets to `peer` come from.
    pub fn address_for(&self, peer: IpAddr) -> Option<IpAddr> {
        match peer {
            IpAddr::V4(_) => self.ipv4.map(IpAddr::V4),
            IpAddr::V6(_) => self.ipv6.map(IpAddr::V6),
        }
    }

    /// The neighbour the last ARP or Neighbor Discovery frame taught us, once: so that an
    /// endpoint with several interface replicas (one per data core) can share what one of them
    /// heard, wherever the device steered the answer.
    pub fn take_learnt(&mut self) -> Option<(IpAddr, [u8; 6])> {
        self.learnt.take()
    }

    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    pub fn stats(&self) -> &InterfaceStats {
        &self.stats
    }

    /// Whether this interface is in IPv6 multicast group `g`: all-nodes (ff02::1, RFC 4291
    /// §2.7.1: "all nodes") and the solicited-node group of its address (§2.7.1, which Neighbor
    /// Discovery uses), the groups whose frames the link layer takes (`33:33:...`).
    fn joined(&self, g: Ipv6Addr) -> bool {
        self.ipv6
            .is_some_and(|ours| g == ALL_NODES || g == solicited_node(ours))
    }

    /// Whether `ip` is one of our addresses.
    pub fn is_ours(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => self.ipv4 == Some(a),
            IpAddr::V6(a) => self.ipv6 == Some(a),
        }
    }

    /// The MAC of neighbour `ip`, if known.
    pub fn neighbour(&self, ip: IpAddr) -> Option<[u8; 6]> {
        self.neighbours[..self.used]
            .iter()
            .find(|n| n.ip == ip)
            .map(|n| n.mac)
    }

    /// A static neighbour: never replaced by what is learnt from the wire.
    pub fn learn_static(&mut self, ip: IpAddr, mac: [u8; 6]) {
        self.insert(ip, mac, true);
    }

    /// `mac` sent an SCTP packet from `ip` that its association authenticated (CRC32c and
    /// verification tag): learnt if `ip` is unknown, or confirmed so that it stays in the table
    /// and is not probed. A known neighbour's link address is not changed: the Ethernet header
    /// is outside what SCTP authenticates (a damaged or forged source address must not redirect
    /// an association); upper-layer progress only confirms reachability (RFC 4861 §7.3.1), and a
    /// changed address is learnt from ARP or ND when the entry goes stale.
    pub fn confirm(&mut self, ip: IpAddr, mac: [u8; 6]) {
        // Once per packet: one scan of the table for a known neighbour (the usual case).
        if let Some(n) = self.neighbours[..self.used].iter_mut().find(|n| n.ip == ip) {
            if n.mac == mac && !n.fixed {
                self.clock += 1;
                n.stamp = self.clock;
                n.fresh = true;
            }
            return;
        }
        let learnt = self.learnt;
        self.insert(ip, mac, false);
        // Only what ARP and ND teach is worth sharing: every core confirms its own peers.
        self.learnt = learnt;
    }

    /// What another replica of this interface (another data core's) learnt from ARP or ND:
    /// taken as if this one had heard the answer.
    pub fn learn_shared(&mut self, ip: IpAddr, mac: [u8; 6]) {
        let learnt = self.learnt;
        self.insert(ip, mac, false);
        self.learnt = learnt;
    }

    fn insert(&mut self, ip: IpAddr, mac: [u8; 6], fixed: bool) {
        let broadcast = matches!(ip, IpAddr::V4(a) if a.is_broadcast());
        if ip.is_unspecified() || ip.is_multicast() || broadcast || mac[0] & 1 != 0 {
            return;
        }
        self.clock += 1;
        let stamp = self.clock;
        if !fixed {
            self.learnt = Some((ip, mac));
        }
        for p in self.pending.iter_mut() {
            if p.is_some_and(|(a, _)| a == ip) {
                *p = None;
            }
        }
        if let Some(n) = self.neighbours[..self.used].iter_mut().find(|n| n.ip == ip) {
            if !n.fixed || fixed {
                *n = Neighbour {
                    ip,
                    mac,
                    fixed,
                    stamp,
                    fresh: true,
                    confirmed: n.confirmed,
                };
            }
            return;
        }
        let slot = if self.used < NEIGHBOURS {
            self.used += 1;
            self.used - 1
        } else {
            // The least recently confirmed dynamic entry; if every entry is static, none.
            match self.neighbours[..self.used]
                .iter()
                .enumerate()
                .filter(|(_, n)| !n.fixed)
                .min_by_key(|(_, n)| n.stamp)
            {
                Some((k, _)) => {
                    self.stats.neighbours_evicted += 1;
                    k
                }
                None => return,
            }
        };
        self.neighbours[slot] = Neighbour {
            ip,
            mac,
            fixed,
            stamp,
            fresh: true,
            confirmed: None,
        };
    }

    fn is_pending(&self, ip: IpAddr) -> bool {
        self.pending.iter().any(|p| p.is_some_and(|(a, _)| a == ip))
    }

    /// Sorts one received frame; a reply, if any, is written to `out` (at least 86 bytes; an
    /// Echo Reply is as long as its request, and one that does not fit `out` is not sent).
    pub fn receive<'a>(&mut self, frame: &'a [u8], out: &mut [u8]) -> Rx<'a> {
        let rx = self.classify(frame, out);
        let s = &mut self.stats;
        match rx {
            Rx::Sctp(_) => s.sctp += 1,
            Rx::Reply(_) => {}
            Rx::TooBig(_) | Rx::EspTooBig(_) => s.icmp_too_big += 1,
            Rx::ProtocolUnreachable(_) => s.icmp_protocol_unreachable += 1,
            Rx::Fragment(_) => s.fragments_kept += 1,
            Rx::Consumed => s.neighbour_answers += 1,
            Rx::Dropped(d) => match d {
                Drop::OtherEtherType => s.other_ether_type += 1,
                Drop::OtherMac => s.other_mac += 1,
                Drop::OtherAddress => s.other_address += 1,
                Drop::OtherProtocol => s.other_protocol += 1,
                Drop::Fragment => s.fragments += 1,
                Drop::BadIpChecksum => s.bad_ip_checksum += 1,
                Drop::Malformed => s.malformed += 1,
                Drop::ArpNotForUs => s.arp_not_for_us += 1,
                Drop::Vlan => s.vlan += 1,
                Drop::NdNotForUs => s.nd_not_for_us += 1,
                Drop::InvalidSource => s.invalid_source += 1,
                Drop::IcmpIgnored => s.icmp_ignored += 1,
                Drop::AddressConflict => s.address_conflicts += 1,
            },
        }
        rx
    }

    fn classify<'a>(&mut self, frame: &'a [u8], out: &mut [u8]) -> Rx<'a> {
        let Some(dst) = frame.get(..6) else {
            return Rx::Dropped(Drop::Malformed);
        };
        // Ours, broadcast, or IPv6 multicast (33:33:..., RFC 2464 §7: solicited-node
        // addresses for Neighbor Discovery).
        let multicast6 = dst[0] == 0x33 && dst[1] == 0x33;
        if dst != self.mac && dst != BROADCAST && !multicast6 {
            return Rx::Dropped(Drop::OtherMac);
        }
        let Some(t) = frame.get(12..14) else {
            return Rx::Dropped(Drop::Malformed);
        };
        // IEEE 802.3 §3.2.3: a source address is always an individual one. A frame "from" a
        // group address is forged, and our answer (an INIT ACK goes to the INIT's source MAC,
        // an ARP reply or a Neighbor Advertisement to the asker's) would reach every host on
        // the segment.
        if frame[6] & 1 != 0 {
            return Rx::Dropped(Drop::InvalidSource);
        }
        match u16::from_be_bytes([t[0], t[1]]) {
            ETHERTYPE_ARP => self.arp(frame, out),
            ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => self.ip(frame, out),
            0x8100 | 0x88a8 | 0x9100 => Rx::Dropped(Drop::Vlan),
            _ => Rx::Dropped(Drop::OtherEtherType),
        }
    }

    fn ip<'a>(&mut self, frame: &'a [u8], out: &mut [u8]) -> Rx<'a> {
        match link::parse_sctp(frame) {
            Ok(f) => {
                if let Err(d) = self.unicast_to_us(f.ip.src(), f.ip.dst(), &frame[..6]) {
                    return Rx::Dropped(d);
                }
                // Not learnt here: the association authenticates the packet first
                // (`Interface::confirm`).
                Rx::Sctp(f)
            }
            Err(Error::Unsupported) => match link::parse_ip(frame) {
                Ok(f) if is_echo_request(&f) => self.echo(f, out),
                Ok(f) if is_too_big(&f) => self.too_big(f),
                Ok(f) if is_protocol_unreachable(&f) => self.protocol_unreachable(f),
                _ => self.neighbour_discovery(frame, out),
            },
            Err(Error::Fragment) => self.fragment(frame, out),
            // RFC 8200 §4.5: a later fragment's Fragment header names the first header of the
            // fragmentable part (Destination Options, say), and the general parser then reads
            // the fragment's data as that header. Its unfragmentable part is checked by
            // `fragment6` instead.
            Err(Error::Truncated | Error::Malformed) if later_ipv6_fragment(frame) => {
                self.fragment(frame, out)
            }
            Err(Error::BadChecksum) => Rx::Dropped(Drop::BadIpChecksum),
            Err(_) => Rx::Dropped(Drop::Malformed),
        }
    }

    /// RFC 826: answer a request for our IPv4 address; learn the sender of any ARP for us.
    fn arp<'a>(&mut self, frame: &'a [u8], out: &mut [u8]) -> Rx<'a> {
        let off = ETHERNET_HEADER_LEN;
        let Some(a) = frame.get(off..off + ARP_LEN) else {
            return Rx::Dropped(Drop::Malformed);
        };
        // Ethernet (1) / IPv4 (0x0800), 6-byte and 4-byte addresses.
        if a[..6] != [0, 1, 0x08, 0x00, 6, 4] {
            return Rx::Dropped(Drop::ArpNotForUs);
        }
        let op = u16::from_be_bytes([a[6], a[7]]);
        let sha: [u8; 6] = a[8..14].try_into().unwrap_or_default();
        let spa = Ipv4Addr::new(a[14], a[15], a[16], a[17]);
        let tpa = Ipv4Addr::new(a[24], a[25], a[26], a[27]);
        // Our own frame come back (a hairpin, a capturing device): RFC 5227 §2.4 takes a
        // packet whose sender hardware address is ours as ours, nothing to learn or answer.
        if sha == self.mac || frame[6..12] == self.mac {
            return Rx::Dropped(Drop::ArpNotForUs);
        }
        // RFC 5227 §2.4: another host sends from our address (configured with it too). Its
        // link address is never learnt for ours, nor its request answered. We keep the
        // address whatever happens (§2.4 (c): ddpdk's address is the operator's) and defend
        // it with one ARP Announcement, "not more than one defensive ARP Announcement every
        // DEFEND_INTERVAL seconds", and count each (two hosts on one address to sort out).
        if self.ipv4 == Some(spa) {
            use std::sync::atomic::Ordering::Relaxed;
            let last = self.defended.load(Relaxed);
            let due = last == 0
                || self.now.saturating_since(Instant::from_nanos(last - 1)) >= DEFEND_INTERVAL;
            // The core that moves the shared time defends; another that saw the same claim
            // in the same instant counts it only.
            if due
                && self
                    .defended
                    .compare_exchange(last, self.now.as_nanos() + 1, Relaxed, Relaxed)
                    .is_ok()
            {
                let n = self.announce(false, out);
                if n > 0 {
                    self.stats.address_conflicts += 1;
                    return Rx::Reply(n);
                }
            }
            return Rx::Dropped(Drop::AddressConflict);
        }
        let Some(ours) = self.ipv4.filter(|ip| *ip == tpa) else {
            // RFC 826: "If the pair <protocol type, sender protocol address> is already in my
            // translation table, update the sender hardware address field of the entry", before
            // and whatever "Am I the target protocol address?" answers: a known peer's
            // gratuitous ARP (RFC 5227 §3) after its link address changed. Only a known,
            // learnt sender (static entries stay), never to a group address (IEEE 802.3
            // §3.2.3).
            let spa = IpAddr::V4(spa);
            let moved = self.neighbours[..self.used]
                .iter()
                .any(|n| n.ip == spa && !n.fixed && n.mac != sha);
            if moved && sha[0] & 1 == 0 {
                self.insert(spa, sha, false);
            }
            // RFC 5227 §2.3, §3: an ARP Announcement (sender and target the same address, a
            // Request or a Reply) is a neighbour telling the segment its link address, as an
            // unsolicited Neighbor Advertisement is: taken as one (`neighbour_answers`), not
            // counted as a frame for another host (an endpoint's peer announces itself).
            if spa == IpAddr::V4(tpa) && matches!(op, 1 | 2) {
                return Rx::Consumed;
            }
            return Rx::Dropped(Drop::ArpNotForUs);
        };
        // IEEE 802.3 §3.2.3, as for the frame's source: the reply goes to the Sender Hardware
        // Address, which a forged request could make every host's.
        if sha[0] & 1 != 0 {
            return Rx::Dropped(Drop::InvalidSource);
        }
        // RFC 826: the sender of an ARP packet for us is merged into the table.
        self.insert(IpAddr::V4(spa), sha, false);
        match op {
            1 => {}
            2 => return Rx::Consumed,
            _ => return Rx::Dropped(Drop::ArpNotForUs),
        }
        let Some(o) = out.get_mut(..ETHERNET_MIN) else {
            return Rx::Dropped(Drop::Malformed);
        };
        o.fill(0);
        ethernet(o, sha, self.mac, ETHERTYPE_ARP);
        write_arp(&mut o[ETHERNET_HEADER_LEN..], 2, self.mac, ours, sha, spa);
        self.stats.arp_replies += 1;
        Rx::Reply(o.len())
    }

    /// RFC 1122 §3.2.2.6 ("Every host MUST implement an ICMP Echo server") and RFC 4443 §4.2
    /// ("Every node MUST implement an ICMPv6 Echo responder function"): an Echo Request to our
    /// address is answered with an Echo Reply carrying its identifier, sequence number and
    /// data whole, from our address to its source, to the frame's source MAC (nothing is
    /// learnt from it). IPv4: only unicast to us (a request to a broadcast or multicast
    /// address "MAY be silently discarded", §3.2.2.6). IPv6: also one to a group this
    /// interface is in ([`Interface::joined`]), as RFC 4443 §4.2 says SHOULD be ("the source
    /// address of the reply MUST be a unicast address belonging to the interface": ours).
    /// IPv4: a request's Record Route and Timestamp options are returned in the reply's
    /// header with this host entered ([`echo_reply_options`], §3.2.2.6's SHOULD).
    fn echo<'a>(&mut self, f: link::IpFrame<'_>, out: &mut [u8]) -> Rx<'a> {
        let (src, dst) = (f.ip.src(), f.ip.dst());
        let group = match dst {
            IpAddr::V6(d6) if self.joined(d6) => Some(d6),
            _ => None,
        };
        let checksum_ok = match (group, src) {
            (Some(g), IpAddr::V6(s6)) => {
                // Sent to the group's MAC (RFC 2464 §7), from a source a host uses: never
                // multicast, unspecified, loopback or ours (RFC 4443 §2.2, RFC 1122 §3.2.1.3),
                // nor IPv4-mapped (RFC 4291 §2.5.5.2), as the unicast path (`unicast_to_us`).
                if mapped(src) {
                    return Rx::Dropped(Drop::OtherAddress);
                }
                if s6.is_multicast() || no_host_sends_from(src) || self.is_ours(src) {
                    return Rx::Dropped(Drop::InvalidSource);
                }
                if f.dst_mac != multicast_mac(g) {
                    return Rx::Dropped(Drop::OtherMac);
                }
                icmpv6_checksum_ok(f.payload, s6, g)
            }
            _ => match self.icmp_to_us(&f) {
                Ok(ok) => ok,
                Err(d) => return Rx::Dropped(d),
            },
        };
        // The reply's source: our unicast address, whatever the request was sent to.
        let dst = match (group, self.ipv6) {
            (Some(_), Some(ours)) => IpAddr::V6(ours),
            _ => dst,
        };
        let icmp = f.payload;
        self.reply_fragment_mtu = None;
        // RFC 792 / RFC 4443 §4.1: code 0, and a checksum that verifies (§2.3: "a node MUST
        // ... discard" one that does not).
        if icmp.len() < 8 || icmp[1] != 0 || !checksum_ok {
            return Rx::Dropped(Drop::Malformed);
        }
        let mut options = [0u8; IPV4_MAX_OPTIONS];
        let ip_len = match dst {
            IpAddr::V4(ours) => {
                let Some(n) = echo_reply_options(f.ipv4_options, ours, &mut options) else {
                    return Rx::Dropped(Drop::Malformed);
                };
                IPV4_HEADER_LEN + n
            }
            IpAddr::V6(_) => IPV6_HEADER_LEN,
        };
        let len = ETHERNET_HEADER_LEN + ip_len + icmp.len();
        // The reply buffer holds the largest frame a port receives; a smaller one cannot
        // answer (§3.2.2.6: the data "MUST be entirely included" in the reply).
        let Some(o) = out.get_mut(..len) else {
            return Rx::Dropped(Drop::OtherProtocol);
        };
        match (src, dst) {
            (IpAddr::V6(s6), IpAddr::V6(d6)) => {
                ethernet(o, f.src_mac, self.mac, ETHERTYPE_IPV6);
                ipv6_header(
                    &mut o[ETHERNET_HEADER_LEN..],
                    d6,
                    s6,
                    ICMPV6,
                    icmp.len(),
                    TTL,
                );
                let reply = &mut o[ETHERNET_HEADER_LEN + IPV6_HEADER_LEN..];
                let fields = [icmp[4], icmp[5], icmp[6], icmp[7]];
                write_icmpv6(reply, ICMPV6_ECHO_REPLY, fields, &icmp[8..], d6, s6);
                // RFC 8200 §5: routers do not fragment. The request came in fragments, so
                // the path back may not carry the reply whole; fragments of the minimum
                // MTU every link carries do.
                if self.receiving_reassembled && IPV6_HEADER_LEN + icmp.len() > IPV6_MIN_MTU {
                    self.reply_fragment_mtu = Some(IPV6_MIN_MTU);
                }
            }
            (IpAddr::V4(s4), IpAddr::V4(d4)) => {
                let reply = &mut o[ETHERNET_HEADER_LEN + ip_len..];
                reply.copy_from_slice(icmp);
                reply[0] = ICMP_ECHO_REPLY;
                reply[2..4].fill(0);
                let sum = internet_checksum(reply);
                reply[2..4].copy_from_slice(&sum.to_be_bytes());
                ethernet(o, f.src_mac, self.mac, ETHERTYPE_IPV4);
                self.ip_id = self.ip_id.wrapping_add(1);
                // Without DF the Identification is one a fragment is reassembled by: RFC 6864
                // §4.1, RFC 7739 §5 (`ipv4_id`), not the bare counter every core starts at 0.
                let id = if self.receiving_reassembled {
                    self.ipv4_id(d4, s4)
                } else {
                    self.ip_id
                };
                ipv4_header_with_options(
                    &mut o[ETHERNET_HEADER_LEN..],
                    d4,
                    s4,
                    IP_PROTO_ICMP,
                    icmp.len(),
                    id,
                    // DF only on a request that came whole: one that came in fragments
                    // crossed a smaller hop, which may fragment the reply on its way back.
                    !self.receiving_reassembled,
                    &options[..ip_len - IPV4_HEADER_LEN],
                );
            }
            _ => return Rx::Dropped(Drop::Malformed),
        }
        self.stats.echo_replies += 1;
        Rx::Reply(len)
    }

    /// RFC 1122 §3.3.2 ("A host MUST be capable of reassembling"), RFC 791 §3.2, RFC 8200
    /// §4.5: an IPv4 fragment (its header checksum already verified) or an IPv6 one (its
    /// unfragmentable extension headers obeyed by [`link::parse_ip`], or by `fragment6` for
    /// a later fragment whose data that parser read as headers) of an SCTP packet (or, with
    /// [`Interface::reassemble_esp`], an ESP one) unicast to us from a valid source is kept;
    /// the one that completes its datagram
    /// gives the whole frame in `out`. Other fragments (other protocols, datagrams longer than
    /// the link MTU, [`Interface::set_link_mtu`], overlapping lengths) are dropped as before. Only a peer whose path
    /// MTU fell while a full-size DATA chunk was in flight sends them (RFC 9260 §6.9).
    fn fragment<'a>(&mut self, frame: &[u8], out: &mut [u8]) -> Rx<'a> {
        let drop = Rx::Dropped(Drop::Fragment);
        if frame[12..14] == ETHERTYPE_IPV6.to_be_bytes() {
            return self.fragment6(frame, out);
        }
        let Some(h) = frame.get(ETHERNET_HEADER_LEN..ETHERNET_HEADER_LEN + IPV4_HEADER_LEN) else {
            return drop;
        };
        // RFC 1122 §3.3.2 with §3.2.2.6: an Echo Request too, so that one a smaller hop
        // fragmented is answered (its first fragment must say Echo Request, below).
        let protocol_ok = h[9] == IP_PROTO_SCTP
            || h[9] == IP_PROTO_ICMP
            || (self.esp_fragments && h[9] == IP_PROTO_ESP);
        if frame[12..14] != ETHERTYPE_IPV4.to_be_bytes() || h[0] >> 4 != 4 || !protocol_ok {
            return drop;
        }
        let ihl = usize::from(h[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
        let Some(payload) = frame.get(ETHERNET_HEADER_LEN + ihl..ETHERNET_HEADER_LEN + total)
        else {
            return drop;
        };
        let src = IpAddr::V4(Ipv4Addr::new(h[12], h[13], h[14], h[15]));
        let dst = IpAddr::V4(Ipv4Addr::new(h[16], h[17], h[18], h[19]));
        if ihl < IPV4_HEADER_LEN || self.unicast_to_us(src, dst, &frame[..6]).is_err() {
            return drop;
        }
        let flags = u16::from_be_bytes([h[6], h[7]]);
        let more = flags & 0x2000 != 0;
        let off = usize::from(flags & 0x1fff) * 8;
        let id = u32::from(u16::from_be_bytes([h[4], h[5]]));
        // IPv4 carries no extension headers: the SCTP (or ESP) packet starts the payload.
        // Of ICMP, only an Echo Request's datagram is reassembled (RFC 1122 §3.2.2.6).
        if off == 0 && h[9] == IP_PROTO_ICMP && payload.first() != Some(&ICMP_ECHO) {
            // Its later fragments may be in already: the datagram is not taken (as RFC 7112
            // §5 has `fragment6` do).
            let key = (src, dst, id, h[9]);
            if let Some(r) = self.reassembly.iter_mut().find(|r| r.key == Some(key)) {
                r.reset();
            }
            return drop;
        }
        let upper = (off == 0).then_some((0, h[9]));
        let f = Fragment {
            key: (src, dst, id, h[9]),
            off,
            more,
            payload,
            upper,
            ping: h[9] == IP_PROTO_ICMP,
        };
        self.reassemble(frame, f, out)
    }

    /// RFC 8200 §4.5: an IPv6 fragment of an SCTP packet (or, with
    /// [`Interface::reassemble_esp`], an ESP one) unicast to us. The unfragmentable part (the
    /// extension headers before the Fragment header) is obeyed again and walked past (one
    /// with a Routing header still to run is dropped); the datagram is keyed by source,
    /// destination and the 32-bit Identification. Only
    /// the first fragment's Next Header counts (§4.5: "Only the value from the Offset zero
    /// fragment packet is used"), and RFC 7112 §5: that fragment must hold the whole header
    /// chain through the SCTP common header (ESP's: the SPI and sequence number), else it is
    /// discarded, and its datagram with it. Destination Options in the fragmentable part are
    /// obeyed as [`link`] obeys them (RFC 8200 §4.2) and left out of the reassembled frame,
    /// whose IPv6 header's Next Header is SCTP (or ESP). (An atomic fragment, offset 0 and M clear, RFC 6946 §4, never gets here:
    /// [`link::parse_sctp`] takes it as the whole packet it is.)
    fn fragment6<'a>(&mut self, frame: &[u8], out: &mut [u8]) -> Rx<'a> {
        let drop = Rx::Dropped(Drop::Fragment);
        let Some(h) = frame.get(ETHERNET_HEADER_LEN..ETHERNET_HEADER_LEN + IPV6_HEADER_LEN) else {
            return drop;
        };
        let payload_len = usize::from(u16::from_be_bytes([h[4], h[5]]));
        let at = ETHERNET_HEADER_LEN + IPV6_HEADER_LEN;
        let Some(p) = frame.get(at..at + payload_len) else {
            return drop;
        };
        let addr =
            |b: &[u8]| IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap_or_default()));
        let (src, dst) = (addr(&h[8..24]), addr(&h[24..40]));
        if h[0] >> 4 != 6 || self.unicast_to_us(src, dst, &frame[..6]).is_err() {
            return drop;
        }
        // The unfragmentable part: Hop-by-Hop, Routing and Destination Options headers, up to
        // the Fragment header.
        // Obeyed here as `link` obeys them (RFC 8200 §4.2, §4.4): a later fragment whose
        // fragmentable part starts with an extension header comes here past `link`
        // (`later_ipv6_fragment`).
        let (mut next, mut i) = (h[6], 0usize);
        while next != IPV6_FRAGMENT {
            let Some(e) = p.get(i..i + 2) else {
                return drop;
            };
            let len = (usize::from(e[1]) + 1) * 8;
            let Some(body) = p.get(i + 2..i + len) else {
                return drop;
            };
            let ok = match next {
                IPV6_HOP_BY_HOP => i == 0 && link::ipv6_options_ok(body).is_ok(),
                IPV6_DEST_OPTS => link::ipv6_options_ok(body).is_ok(),
                // Segments Left zero: no node still to visit.
                IPV6_ROUTING => body.get(1) == Some(&0),
                _ => false,
            };
            if !ok {
                return drop;
            }
            next = e[0];
            i += len;
        }
        let Some(fh) = p.get(i..i + IPV6_FRAGMENT_LEN) else {
            return drop;
        };
        let payload = &p[i + IPV6_FRAGMENT_LEN..];
        let word = u16::from_be_bytes([fh[2], fh[3]]);
        let (off, more) = (usize::from(word >> 3) * 8, word & 1 != 0);
        let key = (
            src,
            dst,
            u32::from_be_bytes([fh[4], fh[5], fh[6], fh[7]]),
            0,
        );
        let upper = match off {
            0 => match upper_start(fh[0], payload, self.esp_fragments) {
                Some(s) => Some(s),
                None => {
                    // RFC 7112 §5: "the receiver SHOULD discard" the first fragment without
                    // the whole chain: its datagram is not taken either.
                    if let Some(r) = self.reassembly.iter_mut().find(|r| r.key == Some(key)) {
                        r.reset();
                    }
                    return drop;
                }
            },
            _ => None,
        };
        let f = Fragment {
            key,
            off,
            more,
            payload,
            upper,
            ping: fh[0] == ICMPV6,
        };
        self.reassemble(frame, f, out)
    }

    /// Keeps fragment `f` of `frame` in its datagram's slot; the fragment completing the
    /// datagram gives it to `out` whole.
    fn reassemble<'a>(&mut self, frame: &[u8], f: Fragment<'_>, out: &mut [u8]) -> Rx<'a> {
        let drop = Rx::Dropped(Drop::Fragment);
        let Fragment {
            key,
            off,
            more,
            payload,
            upper,
            ping,
        } = f;
        let end = off + payload.len();
        // RFC 791 §3.2, RFC 8200 §4.5: every fragment but the last carries a multiple of 8
        // bytes. RFC 1122 §3.3.2: no datagram above EMTU_R, the link's size here
        // (`set_link_mtu`).
        let max = self.reassembly_max(key.1);
        if payload.is_empty() || end > max || (more && payload.len() % 8 != 0) {
            return drop;
        }
        self.fragments_seen += 1;
        // RFC 8200 §4.5, RFC 1122 §3.3.2: a datagram whose fragments did not all come within
        // the timeout is abandoned, before this fragment could join it.
        for r in self.reassembly.iter_mut() {
            if r.key.is_some() && self.now.saturating_since(r.started) >= REASSEMBLY_TIMEOUT {
                r.reset();
                self.stats.reassembly_timeouts += 1;
            }
        }
        let k = match self.reassembly.iter().position(|r| r.key == Some(key)) {
            Some(k) => k,
            None => {
                // A free slot, else the least recently touched datagram gives way, an Echo
                // Request's (ICMP, ICMPv6) first: a ping is never kept at SCTP's expense, and
                // takes only a free slot or another ping's.
                let icmp = |r: &Reassembly| r.key.is_some() && r.ping;
                let k = (0..REASSEMBLIES)
                    .min_by_key(|&k| {
                        let r = &self.reassembly[k];
                        (r.key.is_some(), !icmp(r), r.touched)
                    })
                    .unwrap_or(0);
                let r = &self.reassembly[k];
                if ping && r.key.is_some() && !icmp(r) {
                    return drop;
                }
                if r.key.is_some() {
                    self.stats.reassembly_evicted += 1;
                }
                self.reassembly[k].reset();
                self.reassembly[k].key = Some(key);
                self.reassembly[k].started = self.now;
                self.reassembly[k].ping = ping;
                k
            }
        };
        let r = &mut self.reassembly[k];
        r.touched = self.fragments_seen;
        let units = off / 8..end.div_ceil(8);
        // A fragment past the end a last fragment gave, a second different end, a last
        // fragment ending before bytes already received: not one datagram.
        let past = r.total.is_some_and(|t| end > t || (!more && end != t))
            || (!more && (units.end..REASSEMBLY_MAX.div_ceil(8)).any(|u| r.has(u)));
        // RFC 5722 §4's rule: overlapping fragments discard the datagram, save an exact
        // duplicate (the same bytes at the same place, a copy the network made).
        let overlap = units.clone().any(|u| r.has(u));
        if overlap && units.clone().all(|u| r.has(u)) && r.data[off..end] == *payload && !past {
            return Rx::Fragment(None);
        }
        if past || overlap {
            r.reset();
            return drop;
        }
        if !more {
            r.total = Some(end);
        }
        if upper.is_some() {
            r.upper = upper;
            // RFC 8200 §4.5: the first fragment's Next Header is the datagram's.
            r.ping = ping;
        }
        r.data[off..end].copy_from_slice(payload);
        for u in units {
            r.have[u / 64] |= 1 << (u % 64);
        }
        let (Some(t), Some((at, protocol))) = (r.complete(), r.upper) else {
            return Rx::Fragment(None);
        };
        r.key = None;
        let (src, dst, id, _) = key;
        let Some(upper) = r.data.get(at..t) else {
            return drop;
        };
        let ip_len = Interface::ip_header_len(dst);
        let len = ETHERNET_HEADER_LEN + ip_len + upper.len();
        let Some(o) = out.get_mut(..len) else {
            return drop;
        };
        let mut src_mac = [0u8; 6];
        src_mac.copy_from_slice(&frame[6..12]);
        let (eth, ip) = o.split_at_mut(ETHERNET_HEADER_LEN);
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                ethernet(eth, self.mac, src_mac, ETHERTYPE_IPV4);
                let id = id as u16;
                ipv4_header(ip, s, d, protocol, upper.len(), id, true);
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                ethernet(eth, self.mac, src_mac, ETHERTYPE_IPV6);
                // The last fragment's hop limit: nothing after reassembly reads it.
                let hop = frame[ETHERNET_HEADER_LEN + 7];
                ipv6_header(ip, s, d, protocol, upper.len(), hop);
            }
            _ => return drop,
        }
        o[ETHERNET_HEADER_LEN + ip_len..].copy_from_slice(upper);
        self.stats.reassembled += 1;
        Rx::Fragment(Some(len))
    }

    /// Says that the frames received until it is cleared are a datagram [`Rx::Fragment`]
    /// gave whole (set around receiving it): an Echo Request that came in fragments is
    /// answered for a path that needed them (RFC 1122 §3.2.2.6 with §3.3.2, RFC 8200 §5).
    pub fn set_reassembled(&mut self, on: bool) {
        self.receiving_reassembled = on;
    }

    /// After [`Rx::Reply`]: the size (IP bytes) of the fragments the reply must leave in
    /// ([`Interface::fragment_ipv6`]), when it answers an IPv6 Echo Request that came in
    /// fragments and is larger than the minimum MTU (RFC 8200 §5); `None` to send it whole.
    pub fn take_reply_fragment_mtu(&mut self) -> Option<usize> {
        self.reply_fragment_mtu.take()
    }

    /// The time now, for the reassembly timer ([`REASSEMBLY_TIMEOUT`]); a caller that never
    /// gives it keeps incomplete datagrams until newer ones push them out. A data core gives
    /// it each turn.
    #[inline]
    pub fn set_time(&mut self, now: Instant) {
        self.now = now;
    }

    /// RFC 9260 §6.9 and §7.3: the path MTU (IP bytes) to `peer` ICMP lowered. A packet to
    /// it above this carries a DATA chunk sent before the drop, which cannot be re-chunked
    /// ("IP fragmentation MUST be used"). IPv4: it leaves without DF, for the smaller hop to
    /// fragment; packets within it keep DF. IPv6 routers never fragment (RFC 8200 §5): the
    /// caller sends it as source fragments that fit ([`Interface::ipv6_fragment_mtu`],
    /// [`Interface::fragment_ipv6`]); an IPv6 path MTU is never taken below 1280 (RFC 8201
    /// §4), but on an interface whose packets are sealed after it (the size before sealing,
    /// [`Interface::fragment_after_sealing`]; never below 576).
    pub fn set_path_mtu(&mut self, peer: IpAddr, ip_mtu: usize) {
        let p = peer;
        let ip_mtu = match peer {
            IpAddr::V4(_) => ip_mtu,
            IpAddr::V6(_) if self.sealed => ip_mtu.max(EMTU_R_MIN_V4),
            IpAddr::V6(_) => ip_mtu.max(IPV6_MIN_MTU),
        };
        let mtu = u16::try_from(ip_mtu).unwrap_or(u16::MAX);
        let k = match self
            .lowered
            .iter()
            .position(|l| l.is_some_and(|(a, _)| a == p))
        {
            Some(k) => k,
            None => {
                let k = self.lowered_next;
                self.lowered_next = (k + 1) % LOWERED;
                if self.lowered[k].is_some() {
                    self.stats.path_mtus_evicted += 1;
                }
                k
            }
        };
        self.lowered[k] = Some((p, mtu));
    }

    /// Forgets the path MTU ICMP gave for `peer` (RFC 1191 §6.3, RFC 8201 §5.3: a lowered
    /// estimate ages out, and the next packets try the link's size again): packets to it keep
    /// DF (IPv4) and go whole (IPv6) until another ICMP says otherwise. The table stays packed
    /// from its first entry, which the per-packet checks look at first.
    pub fn forget_path_mtu(&mut self, peer: IpAddr) {
        let Some(k) = self
            .lowered
            .iter()
            .position(|l| l.is_some_and(|(a, _)| a == peer))
        else {
            return;
        };
        self.lowered[k] = None;
        let kept: Vec<(IpAddr, u16)> = self.lowered.iter().flatten().copied().collect();
        self.lowered = [None; LOWERED];
        for (slot, e) in self.lowered.iter_mut().zip(&kept) {
            *slot = Some(*e);
        }
        self.lowered_next = kept.len() % LOWERED;
    }

    /// The path MTU (IP bytes) ICMP last gave for `peer`, if the interface still holds it:
    /// RFC 1191 §5's per-destination cache, for a new association to the same peer.
    pub fn lowered_path_mtu(&self, peer: IpAddr) -> Option<usize> {
        self.lowered
            .iter()
            .flatten()
            .find(|(a, _)| *a == peer)
            .map(|(_, mtu)| usize::from(*mtu))
    }

    /// Whether an IPv4 packet of `len` bytes to `peer` may carry DF: not when it is larger
    /// than the path MTU ICMP gave (`set_path_mtu`). Costs one branch while none was given.
    fn dont_fragment(&self, peer: Ipv4Addr, len: usize) -> bool {
        if self.lowered[0].is_none() {
            return true;
        }
        !self
            .lowered
            .iter()
            .flatten()
            .any(|(a, mtu)| *a == IpAddr::V4(peer) && len > usize::from(*mtu))
    }

    /// Whether any path MTU is lowered ([`Interface::set_path_mtu`]): the table is packed from
    /// its first entry.
    #[inline(always)]
    pub fn any_path_mtu_lowered(&self) -> bool {
        self.lowered[0].is_some()
    }

    /// On an interface whose packets are sealed after it ([`Interface::fragment_after_sealing`]):
    /// the path MTU (IP bytes, before sealing) a packet of `ip_len` bytes to `peer` is above,
    /// when one was lowered below that length: IPv6, or IPv4 leaving without DF (which an
    /// IPv6 tunnel's outer header cannot carry, RFC 4301 §8.1). The port fragments it once
    /// sealed ([`crate::port::Port::tx_burst_fragmenting`]). One branch while none was lowered.
    #[inline]
    pub fn sealed_fragment_mtu(&self, peer: IpAddr, ip_len: usize) -> Option<usize> {
        // The table is packed from its first entry: empty, nothing was lowered.
        self.lowered[0]?;
        self.lowered
            .iter()
            .flatten()
            .find(|(a, mtu)| *a == peer && ip_len > usize::from(*mtu))
            .map(|(_, mtu)| usize::from(*mtu))
    }

    /// RFC 8200 §4.5, RFC 9260 §7.3: the path MTU an IPv6 packet of `ip_len` bytes (header
    /// included) to `peer` must be fragmented to, when ICMP lowered it below that length
    /// ([`Interface::set_path_mtu`]); `None` for a packet that fits, and for IPv4 (a router
    /// fragments it: DF is cleared instead). Costs one branch while no path MTU was lowered.
    #[inline]
    pub fn ipv6_fragment_mtu(&self, peer: IpAddr, ip_len: usize) -> Option<usize> {
        if self.lowered[0].is_none() || peer.is_ipv4() {
            return None;
        }
        self.lowered
            .iter()
            .flatten()
            .find(|(a, mtu)| *a == peer && ip_len > usize::from(*mtu))
            .map(|(_, mtu)| usize::from(*mtu))
    }

    /// RFC 8200 §4.5: sends the IPv6 `frame` (Ethernet, a 40-byte IPv6 header with no
    /// extension header, the whole SCTP packet with its CRC32c already computed over all of
    /// it: no device can fill a checksum spread over fragments) as fragments of at most `mtu`
    /// IP bytes (never taken below 1280), each built in `scratch` and handed to `emit`. Each
    /// carries a Fragment header; every fragment but the last carries a multiple of 8 bytes.
    /// The Identification is RFC 7739 §5.3's kind: a counter from a secret offset, a keyed
    /// hash (SipHash, its key random per interface clone) of the source and destination, so
    /// that no one off the path can predict it and none repeats to a peer within 2^32
    /// datagrams. Returns the fragments made (0 when `frame` is not such a packet, or one
    /// does not fit `scratch`: the packet is lost and SCTP retransmits it).
    pub fn fragment_ipv6(
        &mut self,
        frame: &[u8],
        mtu: usize,
        scratch: &mut [u8],
        emit: impl FnMut(&[u8]),
    ) -> usize {
        use core::hash::BuildHasher;
        let at = ETHERNET_HEADER_LEN + IPV6_HEADER_LEN;
        let Some(h) = frame.get(ETHERNET_HEADER_LEN..at) else {
            return 0;
        };
        if h[6] != IP_PROTO_SCTP && h[6] != ICMPV6 {
            return 0;
        }
        self.fragmented = self.fragmented.wrapping_add(1);
        // RFC 7739 §5.3: a secret offset per source and destination plus a counter. Not
        // predictable from outside, and no Identification repeats to a peer within 2^32 of
        // this clone's datagrams (a hash of a counter would collide by the birthday bound).
        let offset = self.id_key.0.hash_one((&h[8..24], &h[24..40])) as u32;
        let id = offset.wrapping_add(self.fragmented as u32);
        let made = ipv6_fragments(frame, mtu, id, scratch, emit);
        if made > 0 {
            self.stats.source_fragmented += 1;
        }
        made
    }

    /// The Identification of an IPv4 packet that leaves without DF (a router may fragment
    /// it): RFC 6864 §4.1 forbids repeating one within the MSL for a source, destination and
    /// protocol, and RFC 7739 §5 (its reasoning holds for IPv4) asks that no one off the path
    /// predict it, lest forged fragments be spliced into the datagram. The clone's counter
    /// (which no other datagram of this clone to `dst` reuses within 65536 packets) plus a
    /// keyed hash of the pair (SipHash, its key random per clone, [`IdKey`]): each data core's
    /// clone starts elsewhere in the space, where a bare counter from 0 on every core gave two
    /// cores' datagrams to one peer the same Identifications. Packets with DF (atomic, RFC
    /// 6864 §4.1: any value will do) keep the bare counter, with no hash on the fast path
    /// (kept out of line: inlined, the hash's registers cost every framed packet).
    #[cold]
    #[inline(never)]
    fn ipv4_id(&self, src: Ipv4Addr, dst: Ipv4Addr) -> u16 {
        use core::hash::BuildHasher;
        let offset = self.id_key.0.hash_one((src.octets(), dst.octets())) as u16;
        offset.wrapping_add(self.ip_id)
    }

    /// Whether an IP packet from `src` to `dst`, in a frame to `dst_mac`, is ours to take:
    /// to our address (IPv4-mapped IPv6 addresses never appear on the wire, RFC 4291
    /// §2.5.5.2, and a source is never multicast: neither can be answered), from a source a
    /// host may use (RFC 1122 §3.2.1.3) and that is not our own, unicast to our MAC. Why not,
    /// otherwise. SCTP, ICMP and fragments alike.
    #[inline(always)]
    fn unicast_to_us(&self, src: IpAddr, dst: IpAddr, dst_mac: &[u8]) -> Result<(), Drop> {
        if !self.is_ours(dst) || mapped(src) || src.is_multicast() {
            return Err(Drop::OtherAddress);
        }
        // Our own address as the source (dst is ours, so src == dst) never comes off the wire
        // from a peer: it is the LAND forgery, which Linux discards as a martian source. An
        // answer to it (an INIT ACK, an Echo Reply) would be addressed to ourselves.
        if no_host_sends_from(src) || src == dst {
            return Err(Drop::InvalidSource);
        }
        if dst_mac != self.mac {
            return Err(Drop::OtherMac);
        }
        Ok(())
    }

    /// An ICMP or ICMPv6 message unicast to our address and MAC from a source a host may use
    /// (RFC 1122 §3.2.1.3), and whether its checksum verifies (RFC 792; RFC 4443 §2.3, over
    /// the pseudo-header); why it is dropped otherwise.
    fn icmp_to_us(&self, f: &link::IpFrame<'_>) -> Result<bool, Drop> {
        let (src, dst) = (f.ip.src(), f.ip.dst());
        self.unicast_to_us(src, dst, &f.dst_mac)?;
        Ok(match (src, dst) {
            (IpAddr::V6(s6), IpAddr::V6(d6)) => icmpv6_checksum_ok(f.payload, s6, d6),
            _ => internet_checksum(f.payload) == 0,
        })
    }

    /// An ICMP error to our address (Packet Too Big, Protocol Unreachable): its second word
    /// and the quoted invoking packet, once [`Interface::icmp_to_us`] passed it and its
    /// checksum verified (RFC 9260 Appendix C ICMP5, ICMP6 need the quote intact).
    fn icmp_error_to_us<'f>(&self, f: &link::IpFrame<'f>) -> Result<(&'f [u8], &'f [u8]), Drop> {
        let checksum_ok = self.icmp_to_us(f)?;
        let icmp = f.payload;
        match (icmp.get(4..8), icmp.get(8..)) {
            (Some(fields), Some(quoted)) if checksum_ok => Ok((fields, quoted)),
            _ => Err(Drop::IcmpIgnored),
        }
    }

    /// Whether a packet quoted by an ICMP to `dst` is one we sent: from our address, of the
    /// ICMP's family, to an address a peer can have.
    fn sent_by_us(&self, dst: IpAddr, local: IpAddr, peer: IpAddr) -> bool {
        self.is_ours(local)
            && local.is_ipv4() == dst.is_ipv4()
            && !peer.is_multicast()
            && !mapped(peer)
            && !no_host_sends_from(peer)
    }

    /// RFC 9260 Appendix C and §7.3: an ICMP Fragmentation Needed (RFC 1191 §4) or ICMPv6
    /// Packet Too Big (RFC 8201 §4) to our address, checked here as far as the frame goes: a
    /// checksum that verifies (RFC 4443 §2.3; RFC 792), and a quote of a whole-enough SCTP
    /// packet we sent — from our address, to a peer, with the SCTP common header's ports and
    /// verification tag (ICMP5, ICMP6). The association it names judges the tag and the MTU
    /// ([`TooBig`]). Nothing is learnt from the frame and nothing is answered. Other ICMP
    /// errors are ignored (Appendix C ICMP1, ICMP2: "MAY ignore").
    fn too_big<'a>(&mut self, f: link::IpFrame<'_>) -> Rx<'a> {
        let (fields, quoted) = match self.icmp_error_to_us(&f) {
            Ok(parts) => parts,
            Err(d) => return Rx::Dropped(d),
        };
        let dst = f.ip.dst();
        let mtu = match dst {
            // RFC 1191 §4: the Next-Hop MTU is the low-order 16 bits of the second word (the
            // high-order 16 are unused, and zero from an older router).
            IpAddr::V4(_) => u32::from(u16::from_be_bytes([fields[2], fields[3]])),
            // RFC 4443 §3.2: the second word is the MTU.
            IpAddr::V6(_) => u32::from_be_bytes([fields[0], fields[1], fields[2], fields[3]]),
        };
        let sent_by_us = |local, peer| self.sent_by_us(dst, local, peer);
        if let Some(q) = quoted_sctp(quoted) {
            if !sent_by_us(q.local, q.peer) {
                return Rx::Dropped(Drop::IcmpIgnored);
            }
            return Rx::TooBig(TooBig { mtu, ..q });
        }
        // RFC 4301 §6.1.2: under ESP the router quotes the ESP packet, not the SCTP inside.
        match quoted_esp(quoted) {
            Some(e) if sent_by_us(e.local, e.peer) => Rx::EspTooBig(EspTooBig { mtu, ..e }),
            _ => Rx::Dropped(Drop::IcmpIgnored),
        }
    }

    /// RFC 9260 Appendix C ICMP8: an ICMP Protocol Unreachable or ICMPv6 Parameter Problem
    /// "unrecognized Next Header type encountered" to our address, checked as
    /// [`Interface::too_big`] checks a Packet Too Big (checksum, a quote of an SCTP packet we
    /// sent with its ports and verification tag). ICMPv6's pointer (RFC 4443 §3.4: "the octet
    /// offset within the invoking packet where the error was detected") must fall on a Next
    /// Header naming SCTP. The association judges the tag (ICMP6). A quote of ESP is no
    /// SCTP's to judge: ignored.
    fn protocol_unreachable<'a>(&mut self, f: link::IpFrame<'_>) -> Rx<'a> {
        let (fields, quoted) = match self.icmp_error_to_us(&f) {
            Ok(parts) => parts,
            Err(d) => return Rx::Dropped(d),
        };
        if f.ip.dst().is_ipv6() {
            let pointer = u32::from_be_bytes([fields[0], fields[1], fields[2], fields[3]]);
            let names_sctp = usize::try_from(pointer)
                .ok()
                .and_then(|p| quoted.get(p))
                .is_some_and(|&n| n == IP_PROTO_SCTP);
            if !names_sctp {
                return Rx::Dropped(Drop::IcmpIgnored);
            }
        }
        match quoted_sctp(quoted) {
            Some(q) if self.sent_by_us(f.ip.dst(), q.local, q.peer) => Rx::ProtocolUnreachable(q),
            _ => Rx::Dropped(Drop::IcmpIgnored),
        }
    }

    /// RFC 4861 §7.2.3-§7.2.5: answer a valid Neighbor Solicitation for our IPv6 address with a
    /// solicited Neighbor Advertisement carrying our link-layer address; learn from valid
    /// advertisements for addresses we asked about or know.
    fn neighbour_discovery<'a>(&mut self, frame: &'a [u8], out: &mut [u8]) -> Rx<'a> {
        let ip = ETHERNET_HEADER_LEN;
        let Some(h) = frame.get(ip..ip + IPV6_HEADER_LEN) else {
            return Rx::Dropped(Drop::OtherProtocol);
        };
        if frame[12..14] != ETHERTYPE_IPV6.to_be_bytes() || h[0] >> 4 != 6 || h[6] != ICMPV6 {
            return Rx::Dropped(Drop::OtherProtocol);
        }
        let Some(ours) = self.ipv6 else {
            return Rx::Dropped(Drop::NdNotForUs);
        };
        let payload_len = usize::from(u16::from_be_bytes([h[4], h[5]]));
        let src = Ipv6Addr::from(<[u8; 16]>::try_from(&h[8..24]).unwrap_or_default());
        let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&h[24..40]).unwrap_or_default());
        let Some(icmp) = frame.get(ip + IPV6_HEADER_LEN..ip + IPV6_HEADER_LEN + payload_len) else {
            return Rx::Dropped(Drop::Malformed);
        };
        // §7.1.1 / §7.1.2: hop limit 255, a valid ICMP checksum, code 0, at least 24 bytes,
        // a target that is not multicast, a source that is never multicast.
        let kind = icmp.first().copied();
        if h[7] != ND_HOP_LIMIT
            || icmp.len() < 24
            || icmp[1] != 0
            || !matches!(kind, Some(ND_SOLICIT | ND_ADVERT))
            || !icmpv6_checksum_ok(icmp, src, dst)
            || src.is_multicast()
        {
            return Rx::Dropped(Drop::NdNotForUs);
        }
        // RFC 4291 §2.5.3, §2.5.5.2: no node sends from loopback or an IPv4-mapped address,
        // and our answer would go to it on the link ("must never be sent outside of a single
        // node"); `unicast_to_us` refuses them for SCTP and ICMP alike. (The unspecified
        // source is duplicate address detection's, §7.1.1, below.)
        if src.is_loopback() || mapped(IpAddr::V6(src)) {
            return Rx::Dropped(Drop::InvalidSource);
        }
        let target = Ipv6Addr::from(<[u8; 16]>::try_from(&icmp[8..24]).unwrap_or_default());
        if target.is_multicast() {
            return Rx::Dropped(Drop::NdNotForUs);
        }
        // The link-layer address option: source (type 1) in a solicitation, target (type 2) in
        // an advertisement (§4.6.1). Options of length 0 make the message invalid.
        let want_option = if kind == Some(ND_SOLICIT) { 1 } else { 2 };
        let mut link_addr = None;
        let mut opt = &icmp[24..];
        while !opt.is_empty() {
            let len = usize::from(*opt.get(1).unwrap_or(&0)) * 8;
            if len == 0 || len > opt.len() {
                return Rx::Dropped(Drop::NdNotForUs);
            }
            if opt[0] == want_option && len == 8 {
                let mut m = [0u8; 6];
                m.copy_from_slice(&opt[2..8]);
                // IEEE 802.3 §3.2.3: a link-layer address of a node is an individual one; an
                // answer to a group one would reach every host of the segment.
                if m[0] & 1 != 0 {
                    return Rx::Dropped(Drop::InvalidSource);
                }
                link_addr = Some(m);
            }
            opt = &opt[len..];
        }
        if kind == Some(ND_ADVERT) {
            let (solicited, override_flag) = (icmp[4] & 0x40 != 0, icmp[4] & 0x20 != 0);
            // §7.1.2: a solicited advertisement is never sent to a multicast address.
            if solicited && dst.is_multicast() {
                return Rx::Dropped(Drop::NdNotForUs);
            }
            if target == ours {
                // RFC 4862 §5.4.4: an advertisement for our address from another link
                // address: "possibly ... a duplicate", which the node "SHOULD log": counted.
                return match link_addr {
                    Some(m) if m != self.mac => Rx::Dropped(Drop::AddressConflict),
                    _ => Rx::Dropped(Drop::NdNotForUs),
                };
            }
            let t = IpAddr::V6(target);
            match (link_addr, self.neighbour(t)) {
                // §7.2.5: no entry and not being resolved: discard; no link-layer address: no
                // new information for us (we keep no reachability state).
                (None, _) => {}
                (Some(_), None) if !self.is_pending(t) => {}
                // §7.2.5: with O clear, a different address does not replace the cached one.
                (Some(m), Some(old)) if !override_flag && m != old => {}
                (Some(m), _) => self.insert(t, m, false),
            }
            return Rx::Consumed;
        }
        // A solicitation from our own address, whatever its target, is another host
        // configured with it (RFC 4862 §5.4.4, as an advertisement or ARP of it is), or our
        // own frame come back: our address is never learnt as a neighbour's, nor answered
        // (the answer would go to ourselves).
        if src == ours {
            let from = link_addr.unwrap_or_else(|| {
                let mut m = [0u8; 6];
                m.copy_from_slice(&frame[6..12]);
                m
            });
            return match from {
                m if m != self.mac => Rx::Dropped(Drop::AddressConflict),
                _ => Rx::Dropped(Drop::NdNotForUs),
            };
        }
        if target != ours {
            return Rx::Dropped(Drop::NdNotForUs);
        }
        // §7.1.1: a solicitation from the unspecified address (duplicate address detection)
        // carries no source link-layer address, and goes to a solicited-node multicast address
        // (ff02::1:ffXX:XXXX, RFC 4291 §2.7.1).
        let solicited_node =
            dst.segments()[..6] == [0xff02, 0, 0, 0, 0, 1] && dst.octets()[12] == 0xff;
        if src.is_unspecified() && (link_addr.is_some() || !solicited_node) {
            return Rx::Dropped(Drop::NdNotForUs);
        }
        // §7.2.3: the solicitor is learnt from its option only; without one the reply still
        // goes to the frame's source.
        let mut reply_mac = [0u8; 6];
        reply_mac.copy_from_slice(&frame[6..12]);
        if let Some(m) = link_addr {
            self.insert(IpAddr::V6(src), m, false);
            reply_mac = m;
        }
        // §7.2.4: to the solicitor, or to all nodes if it has no address yet.
        let (dst, dst_mac, solicited) = if src.is_unspecified() {
            (ALL_NODES, multicast_mac(ALL_NODES), false)
        } else {
            (src, reply_mac, true)
        };
        let Some(len) = self.write_advert(out, ours, dst, dst_mac, solicited) else {
            return Rx::Dropped(Drop::Malformed);
        };
        self.stats.nd_adverts += 1;
        Rx::Reply(len)
    }

    /// A Neighbor Advertisement for our address `ours` to `dst` at `dst_mac`, with our
    /// link-layer address, Override set (RFC 4861 §4.4, §7.2.4, §7.2.6); its length, or None
    /// when `out` is too small.
    fn write_advert(
        &self,
        out: &mut [u8],
        ours: Ipv6Addr,
        dst: Ipv6Addr,
        dst_mac: [u8; 6],
        solicited: bool,
    ) -> Option<usize> {
        let len = ETHERNET_HEADER_LEN + IPV6_HEADER_LEN + 32;
        let o = out.get_mut(..len)?;
        ethernet(o, dst_mac, self.mac, ETHERTYPE_IPV6);
        ipv6_header(
            &mut o[ETHERNET_HEADER_LEN..],
            ours,
            dst,
            ICMPV6,
            32,
            ND_HOP_LIMIT,
        );
        // R = 0 (not a router), S = solicited, O = override (§4.4).
        let flags = if solicited { 0x60 } else { 0x20 };
        let mut body = [0u8; 24];
        body[..16].copy_from_slice(&ours.octets());
        body[16] = 2; // target link-layer address
        body[17] = 1;
        body[18..24].copy_from_slice(&self.mac);
        let icmp_out = &mut o[ETHERNET_HEADER_LEN + IPV6_HEADER_LEN..];
        write_icmpv6(icmp_out, ND_ADVERT, [flags, 0, 0, 0], &body, ours, dst);
        Some(len)
    }

    /// Our link address for our IPv4 address (`ipv6` false: an ARP Announcement, RFC 5227
    /// §2.3, a broadcast ARP Request whose sender and target are both ours) or our IPv6
    /// address (an unsolicited Neighbor Advertisement to all nodes with Override set, RFC
    /// 4861 §7.2.6), written to `out`; its length, 0 when we have no address of that family or
    /// `out` is too small. Sent at start: a neighbour that cached another link address for
    /// ours (this endpoint restarted on a new MAC, or moved) updates its entry at once (RFC
    /// 826's merge, RFC 4861 §7.2.5) instead of sending to the old one until it goes stale.
    pub fn announce(&mut self, ipv6: bool, out: &mut [u8]) -> usize {
        let len = if ipv6 {
            let Some(ours) = self.ipv6 else { return 0 };
            let all = multicast_mac(ALL_NODES);
            self.write_advert(out, ours, ALL_NODES, all, false)
                .unwrap_or(0)
        } else {
            let Some(ours) = self.ipv4 else { return 0 };
            let Some(o) = out.get_mut(..ETHERNET_MIN) else {
                return 0;
            };
            o.fill(0);
            ethernet(o, BROADCAST, self.mac, ETHERTYPE_ARP);
            write_arp(
                &mut o[ETHERNET_HEADER_LEN..],
                1,
                self.mac,
                ours,
                [0; 6],
                ours,
            );
            ETHERNET_MIN
        };
        if len > 0 {
            self.stats.announcements += 1;
        }
        len
    }

    /// Bytes of Ethernet and IP header in front of an SCTP packet to `dst`.
    pub fn header_len(dst: IpAddr) -> usize {
        ETHERNET_HEADER_LEN + Interface::ip_header_len(dst)
    }

    /// Bytes of IP header in front of an SCTP packet to `dst` (a path MTU is the link MTU less
    /// these).
    pub fn ip_header_len(dst: IpAddr) -> usize {
        match dst {
            IpAddr::V4(_) => IPV4_HEADER_LEN,
            IpAddr::V6(_) => IPV6_HEADER_LEN,
        }
    }

    /// Frames the SCTP packet of `sctp_len` bytes the caller placed at
    /// `out[header_len(dst)..]`, to `dst` from our address of the same family; returns the
    /// frame's length. If the neighbour is unknown, `out` gets a solicitation instead (or
    /// nothing, when one went out less than a second ago).
    ///
    /// # Panics
    ///
    /// If `out` is shorter than the frame, or we have no address of `dst`'s family: both are
    /// the caller's configuration, not peer input.
    pub fn frame_sctp(
        &mut self,
        now: Instant,
        dst: IpAddr,
        sctp_len: usize,
        out: &mut [u8],
    ) -> Result<usize, Unresolved> {
        let Some(mac) = self.neighbour(dst) else {
            return Err(Unresolved {
                solicitation: self.solicit_limited(now, dst, out),
            });
        };
        Ok(self.frame_sctp_to(mac, dst, sctp_len, out))
    }

    /// After a frame to `dst` went out: a solicitation (its length in `out`; 0 for none) when
    /// nothing confirmed `dst` — no ARP or ND answer, no authenticated packet — for
    /// [`REACHABLE_TIME`] while we keep sending to it, at most one a second. A stale entry (the
    /// peer's NIC changed, or a damaged answer taught a wrong address) is re-learnt by the answer
    /// instead of black-holing the association (RFC 4861 §7.3 keeps reachability the same way).
    pub fn probe_if_stale(&mut self, now: Instant, dst: IpAddr, out: &mut [u8]) -> usize {
        match self.slot(dst) {
            Some(k) if self.stale(k, now) => self.probe(now, dst, out),
            _ => 0,
        }
    }

    /// As [`Interface::frame_sctp`] followed by [`Interface::probe_if_stale`], with one
    /// neighbour lookup (the per-packet path): the frame's length, and whether `dst` is stale
    /// (then send [`Interface::probe`] after the frame). A solicitation goes to `solicit_out`
    /// (at least [`SOLICITATION_MAX`] bytes), so the unsent packet in `out` stays whole for a
    /// caller that holds it until the answer.
    pub fn frame_sctp_reachable(
        &mut self,
        now: Instant,
        dst: IpAddr,
        sctp_len: usize,
        out: &mut [u8],
        solicit_out: &mut [u8],
    ) -> Result<(usize, bool), Unresolved> {
        let Some(k) = self.slot(dst) else {
            return Err(Unresolved {
                solicitation: self.solicit_limited(now, dst, solicit_out),
            });
        };
        let (mac, stale) = (self.neighbours[k].mac, self.stale(k, now));
        Ok((self.frame_sctp_to(mac, dst, sctp_len, out), stale))
    }

    /// A solicitation for a stale neighbour (its length in `out`; 0 when one went out less than
    /// a second ago), counted.
    pub fn probe(&mut self, now: Instant, dst: IpAddr, out: &mut [u8]) -> usize {
        self.stats.stale_probes += 1;
        self.solicit_limited(now, dst, out)
    }

    fn slot(&self, ip: IpAddr) -> Option<usize> {
        self.neighbours[..self.used].iter().position(|n| n.ip == ip)
    }

    /// Whether neighbour `k`, sent to at `now`, went unconfirmed for [`REACHABLE_TIME`]; a fresh
    /// confirmation is dated here.
    fn stale(&mut self, k: usize, now: Instant) -> bool {
        let n = &mut self.neighbours[k];
        if n.fixed {
            return false;
        }
        if n.fresh || n.confirmed.is_none() {
            n.fresh = false;
            n.confirmed = Some(now);
            return false;
        }
        n.confirmed
            .is_some_and(|t| now.saturating_since(t) >= REACHABLE_TIME)
    }

    /// An RFC 8899 probe of `sctp_len` bytes for `dst`, framed into `out` with DF set whatever
    /// ICMP said of the path (§6.2: a probe that a smaller hop fragmented would confirm a size
    /// the path does not carry); its length, or `None` while `dst`'s link address is unknown
    /// (the probe is not held: the next one goes later). IPv6 packets are never fragmented
    /// here; the caller must not fragment this one either.
    pub fn frame_sctp_probe(
        &mut self,
        dst: IpAddr,
        sctp_len: usize,
        out: &mut [u8],
    ) -> Option<usize> {
        let mac = self.neighbour(dst)?;
        Some(self.frame_sctp_headers(mac, dst, sctp_len, out, true))
    }

    /// As [`Interface::frame_sctp`], to link address `mac` without consulting the neighbour
    /// table: for a reply that goes back where its request came from (an INIT ACK to the
    /// INIT's source, RFC 9260 §5.1), without learning from an unauthenticated packet.
    ///
    /// # Panics
    ///
    /// As [`Interface::frame_sctp`].
    pub fn frame_sctp_to(
        &mut self,
        mac: [u8; 6],
        dst: IpAddr,
        sctp_len: usize,
        out: &mut [u8],
    ) -> usize {
        self.frame_sctp_headers(mac, dst, sctp_len, out, false)
    }

    /// [`Interface::frame_sctp_to`]; with `probe`, DF whatever the path MTU ICMP gave
    /// ([`Interface::frame_sctp_probe`]).
    #[inline(always)]
    fn frame_sctp_headers(
        &mut self,
        mac: [u8; 6],
        dst: IpAddr,
        sctp_len: usize,
        out: &mut [u8],
        probe: bool,
    ) -> usize {
        let h = Interface::header_len(dst);
        match dst {
            IpAddr::V4(d) => {
                let src = self.ipv4.expect("an IPv4 address to send from");
                ethernet(out, mac, self.mac, ETHERTYPE_IPV4);
                self.ip_id = self.ip_id.wrapping_add(1);
                let df = probe || self.dont_fragment(d, IPV4_HEADER_LEN + sctp_len);
                let id = if df { self.ip_id } else { self.ipv4_id(src, d) };
                ipv4_header(
                    &mut out[ETHERNET_HEADER_LEN..h],
                    src,
                    d,
                    IP_PROTO_SCTP,
                    sctp_len,
                    id,
                    df,
                );
            }
            IpAddr::V6(d) => {
                let src = self.ipv6.expect("an IPv6 address to send from");
                ethernet(out, mac, self.mac, ETHERTYPE_IPV6);
                ipv6_header(
                    &mut out[ETHERNET_HEADER_LEN..h],
                    src,
                    d,
                    IP_PROTO_SCTP,
                    sctp_len,
                    TTL,
                );
            }
        }
        h + sctp_len
    }

    /// A solicitation for `ip`, unless one went out less than [`SOLICIT_INTERVAL`] ago
    /// (then 0 bytes). The destination is remembered as being resolved, so that its answer is
    /// learnt (RFC 4861 §7.2.5).
    fn solicit_limited(&mut self, now: Instant, ip: IpAddr, out: &mut [u8]) -> usize {
        if let Some(Some((_, at))) = self
            .pending
            .iter()
            .find(|p| p.is_some_and(|(a, _)| a == ip))
        {
            if now.saturating_since(*at) < SOLICIT_INTERVAL {
                return 0;
            }
        }
        // Its own slot, a free one, or the oldest.
        let slot = self
            .pending
            .iter()
            .position(|p| p.is_some_and(|(a, _)| a == ip))
            .or_else(|| self.pending.iter().position(Option::is_none))
            .unwrap_or_else(|| {
                (0..PENDING)
                    .min_by_key(|&k| self.pending[k].map(|(_, t)| t))
                    .unwrap_or(0)
            });
        self.pending[slot] = Some((ip, now));
        self.solicit(ip, out)
    }

    /// Writes an ARP request (IPv4) or a Neighbor Solicitation (IPv6) for `ip` to `out`;
    /// returns its length. Not rate-limited: [`Interface::frame_sctp`] is.
    pub fn solicit(&mut self, ip: IpAddr, out: &mut [u8]) -> usize {
        self.stats.solicitations += 1;
        match ip {
            IpAddr::V4(target) => {
                let src = self.ipv4.unwrap_or(Ipv4Addr::UNSPECIFIED);
                out[..ETHERNET_MIN].fill(0);
                ethernet(out, BROADCAST, self.mac, ETHERTYPE_ARP);
                write_arp(
                    &mut out[ETHERNET_HEADER_LEN..],
                    1,
                    self.mac,
                    src,
                    [0; 6],
                    target,
                );
                ETHERNET_MIN
            }
            IpAddr::V6(target) => {
                let src = self.ipv6.unwrap_or(Ipv6Addr::UNSPECIFIED);
                let group = solicited_node(target);
                let dst_mac = multicast_mac(group);
                ethernet(out, dst_mac, self.mac, ETHERTYPE_IPV6);
                ipv6_header(
                    &mut out[ETHERNET_HEADER_LEN..],
                    src,
                    group,
                    ICMPV6,
                    32,
                    ND_HOP_LIMIT,
                );
                let mut body = [0u8; 24];
                body[..16].copy_from_slice(&target.octets());
                body[16] = 1; // source link-layer address
                body[17] = 1;
                body[18..24].copy_from_slice(&self.mac);
                let icmp = &mut out[ETHERNET_HEADER_LEN + IPV6_HEADER_LEN..];
                write_icmpv6(icmp, ND_SOLICIT, [0; 4], &body, src, group);
                ETHERNET_HEADER_LEN + IPV6_HEADER_LEN + 32
            }
        }
    }
}

/// RFC 8200 §4.5: the IPv6 `frame` (Ethernet, a 40-byte IPv6 header with no extension
/// header, then the whole upper-layer packet its Next Header names: SCTP for
/// [`Interface::fragment_ipv6`], ESP for the IPsec port's sealed packets, RFC 4301 §7.3 and
/// §8.1) as fragments of at most `mtu` IP bytes (never taken below 1280) with Identification
/// `id`, each built in `scratch` and handed to `emit`. Every fragment but the last carries a
/// multiple of 8 bytes. Returns the fragments made: 0 when `frame` is not such a packet, or
/// a fragment does not fit `scratch`.
pub fn ipv6_fragments(
    frame: &[u8],
    mtu: usize,
    id: u32,
    scratch: &mut [u8],
    mut emit: impl FnMut(&[u8]),
) -> usize {
    let at = ETHERNET_HEADER_LEN + IPV6_HEADER_LEN;
    let Some(h) = frame.get(ETHERNET_HEADER_LEN..at) else {
        return 0;
    };
    // The fragmentable part each fragment carries: what fits after the IPv6 and Fragment
    // headers, a multiple of 8 bytes.
    let part = (mtu.max(IPV6_MIN_MTU) - IPV6_HEADER_LEN - IPV6_FRAGMENT_LEN) & !7;
    let next = h[6];
    let extension = matches!(
        next,
        IPV6_HOP_BY_HOP | IPV6_ROUTING | IPV6_FRAGMENT | IPV6_DEST_OPTS
    );
    if h[0] >> 4 != 6 || extension || scratch.len() < at + IPV6_FRAGMENT_LEN + part {
        return 0;
    }
    let payload = &frame[at..];
    let mut made = 0;
    for (n, piece) in payload.chunks(part).enumerate() {
        let off = n * part;
        let more = off + piece.len() < payload.len();
        let o = &mut scratch[..at + IPV6_FRAGMENT_LEN + piece.len()];
        o[..at].copy_from_slice(&frame[..at]);
        let ip = &mut o[ETHERNET_HEADER_LEN..at];
        ip[4..6].copy_from_slice(&((IPV6_FRAGMENT_LEN + piece.len()) as u16).to_be_bytes());
        ip[6] = IPV6_FRAGMENT;
        // Next Header, reserved, the offset in 8-byte units with M in the low bit (the
        // offset is a multiple of 8 already), the Identification.
        let word = off as u16 | u16::from(more);
        o[at..at + 2].copy_from_slice(&[next, 0]);
        o[at + 2..at + 4].copy_from_slice(&word.to_be_bytes());
        o[at + 4..at + 8].copy_from_slice(&id.to_be_bytes());
        o[at + IPV6_FRAGMENT_LEN..].copy_from_slice(piece);
        emit(o);
        made += 1;
    }
    made
}

/// RFC 7112 §5, RFC 8200 §4.5: where the SCTP packet starts in the first fragment's
/// fragmentable part `f`, whose first header is `next`: past any Destination Options headers
/// (their options obeyed as RFC 8200 §4.2 asks, [`link::ipv6_options_ok`]), provided the whole
/// chain and the SCTP common header are in `f`; with it, the protocol. With `esp` (the
/// interface's [`Interface::reassemble_esp`]), an ESP packet too, provided its header (SPI
/// and sequence number, RFC 4303 §2) is in `f` (RFC 4303 §3.4.1: ESP is opened once
/// reassembled). `None` for any other chain.
fn upper_start(mut next: u8, f: &[u8], esp: bool) -> Option<(usize, u8)> {
    let mut i = 0;
    while next == IPV6_DEST_OPTS {
        let e = f.get(i..i + 2)?;
        let len = (usize::from(e[1]) + 1) * 8;
        link::ipv6_options_ok(f.get(i + 2..i + len)?).ok()?;
        next = e[0];
        i += len;
    }
    let header = match next {
        IP_PROTO_SCTP => SCTP_COMMON_HEADER_LEN,
        IP_PROTO_ESP if esp => ESP_HEADER_LEN,
        // An Echo Request (RFC 8200 §4.5 with RFC 4443 §4.2); never Neighbor Discovery,
        // which RFC 6980 §5 says to ignore fragmented.
        ICMPV6 if f.get(i) == Some(&ICMPV6_ECHO) => 8,
        _ => return None,
    };
    (f.len() >= i + header).then_some((i, next))
}

/// Whether `frame` is an IPv6 fragment other than the first (offset non-zero): its header
/// chain walked (Hop-by-Hop, Routing, Destination Options) up to a Fragment header. Only on
/// the error path of a frame the general parser refused.
fn later_ipv6_fragment(frame: &[u8]) -> bool {
    let at = ETHERNET_HEADER_LEN + IPV6_HEADER_LEN;
    let Some(h) = frame.get(ETHERNET_HEADER_LEN..at) else {
        return false;
    };
    if frame[12..14] != ETHERTYPE_IPV6.to_be_bytes() || h[0] >> 4 != 6 {
        return false;
    }
    let (mut next, mut i) = (h[6], at);
    loop {
        match next {
            IPV6_HOP_BY_HOP | IPV6_ROUTING | IPV6_DEST_OPTS => {
                let Some(e) = frame.get(i..i + 2) else {
                    return false;
                };
                next = e[0];
                i += (usize::from(e[1]) + 1) * 8;
            }
            IPV6_FRAGMENT => {
                return frame
                    .get(i + 2..i + 4)
                    .is_some_and(|w| u16::from_be_bytes([w[0], w[1]]) & !7 != 0);
            }
            _ => return false,
        }
    }
}

/// RFC 1122 §3.2.1.3: "A host MUST silently discard an incoming datagram containing an IP
/// source address that is invalid by the rules of this section": {0, \<Host-number\>} (this
/// network; 0.0.0.0 only while a host learns its address), {-1, -1} (limited broadcast) and
/// {127, \<any\>} (loopback, never outside a host). RFC 4291 §2.5.2 and §2.5.3 rule out IPv6's
/// unspecified and loopback sources the same way. SCTP's answer would go to an address no peer
/// has. (Multicast sources are refused with the destination check.)
/// RFC 4291 §2.7.1: the all-nodes link-local multicast group.
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// RFC 4291 §2.7.1: the solicited-node multicast group of `a` (ff02::1:ff00:0/104 and its low
/// 24 bits).
fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::from([
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, o[13], o[14], o[15],
    ])
}

/// RFC 2464 §7: the Ethernet address of IPv6 multicast group `g` (33:33 and its last 32 bits).
fn multicast_mac(g: Ipv6Addr) -> [u8; 6] {
    let o = g.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}

/// RFC 1122 §3.2.1.3 ("this network" 0/8, loopback 127/8, limited broadcast), RFC 6890
/// §2.2.2 (240.0.0.0/4, "Reserved": Source False; the limited broadcast is its last
/// address), RFC 4291 §2.5.2-§2.5.3 (`::`, `::1`): sources no host sends from.
fn no_host_sends_from(src: IpAddr) -> bool {
    match src {
        IpAddr::V4(a) => matches!(a.octets()[0], 0 | 127 | 240..=255),
        IpAddr::V6(a) => a.is_unspecified() || a.is_loopback(),
    }
}

/// An ICMP Echo Request over IPv4 (RFC 792) or an ICMPv6 one over IPv6 (RFC 4443 §4.1).
fn is_echo_request(f: &link::IpFrame<'_>) -> bool {
    match f.ip {
        link::IpInfo::V4 { .. } => {
            f.protocol == IP_PROTO_ICMP && f.payload.first() == Some(&ICMP_ECHO)
        }
        link::IpInfo::V6 { .. } => f.protocol == ICMPV6 && f.payload.first() == Some(&ICMPV6_ECHO),
    }
}

/// An ICMP Destination Unreachable "fragmentation needed and DF set" (RFC 792, RFC 1191 §4)
/// or an ICMPv6 Packet Too Big (RFC 4443 §3.2, any code: §3.2 gives only 0).
fn is_too_big(f: &link::IpFrame<'_>) -> bool {
    match f.ip {
        link::IpInfo::V4 { .. } => {
            f.protocol == IP_PROTO_ICMP
                && f.payload.get(..2) == Some(&[ICMP_UNREACHABLE, ICMP_FRAG_NEEDED])
        }
        link::IpInfo::V6 { .. } => {
            f.protocol == ICMPV6 && f.payload.first() == Some(&ICMPV6_TOO_BIG)
        }
    }
}

/// An ICMP Destination Unreachable "protocol unreachable" (RFC 792) or an ICMPv6 Parameter
/// Problem "unrecognized Next Header type encountered" (RFC 4443 §3.4): RFC 9260 Appendix C
/// ICMP8.
fn is_protocol_unreachable(f: &link::IpFrame<'_>) -> bool {
    match f.ip {
        link::IpInfo::V4 { .. } => {
            f.protocol == IP_PROTO_ICMP
                && f.payload.get(..2) == Some(&[ICMP_UNREACHABLE, ICMP_PROTOCOL_UNREACHABLE])
        }
        link::IpInfo::V6 { .. } => {
            f.protocol == ICMPV6
                && f.payload.get(..2)
                    == Some(&[ICMPV6_PARAMETER_PROBLEM, ICMPV6_UNRECOGNIZED_NEXT_HEADER])
        }
    }
}

/// The IP header of the packet an ICMP error quotes (the bytes after its first 8): our
/// address, the peer's, the upper-layer protocol, where its header starts in the quote, and
/// the quoted packet's IP length; `None` for a later fragment, whose quote holds no
/// upper-layer header. We send SCTP or ESP right after the IP header, or (IPv6) after the
/// Fragment header of the first fragment we cut (`Interface::fragment_ipv6`, the IPsec port's
/// sealed fragments, RFC 4301 §7.3): a hop further on with a smaller MTU quotes that first
/// fragment (offset 0), whose upper-layer header follows. IPv4 fragments are a router's (of a
/// packet sent without DF). SCTP's and ESP's quotes alike (RFC 9260 Appendix C, RFC 4301
/// §6.1.2).
fn quoted_ip(q: &[u8]) -> Option<(IpAddr, IpAddr, u8, usize, u16)> {
    match q.first()? >> 4 {
        4 => {
            let h = q.get(..IPV4_HEADER_LEN)?;
            let ihl = usize::from(h[0] & 0x0f) * 4;
            let offset = u16::from_be_bytes([h[6], h[7]]) & 0x1fff;
            if ihl < IPV4_HEADER_LEN || offset != 0 {
                return None;
            }
            let src = Ipv4Addr::new(h[12], h[13], h[14], h[15]);
            let dst = Ipv4Addr::new(h[16], h[17], h[18], h[19]);
            let total = u16::from_be_bytes([h[2], h[3]]);
            Some((IpAddr::V4(src), IpAddr::V4(dst), h[9], ihl, total))
        }
        6 => {
            let h = q.get(..IPV6_HEADER_LEN)?;
            let src = Ipv6Addr::from(<[u8; 16]>::try_from(&h[8..24]).ok()?);
            let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&h[24..40]).ok()?);
            let total = u16::from_be_bytes([h[4], h[5]]).saturating_add(IPV6_HEADER_LEN as u16);
            let (protocol, header) = match h[6] {
                IPV6_FRAGMENT => {
                    let fh = q.get(IPV6_HEADER_LEN..IPV6_HEADER_LEN + IPV6_FRAGMENT_LEN)?;
                    if u16::from_be_bytes([fh[2], fh[3]]) & !7 != 0 {
                        return None;
                    }
                    (fh[0], IPV6_HEADER_LEN + IPV6_FRAGMENT_LEN)
                }
                p => (p, IPV6_HEADER_LEN),
            };
            Some((IpAddr::V6(src), IpAddr::V6(dst), protocol, header, total))
        }
        _ => None,
    }
}

/// The SCTP packet an ICMP error quotes (the bytes after its first 8), if the quote holds
/// its IP header and the first [`QUOTED_SCTP_MIN`] bytes of an SCTP packet that is not a
/// later IP fragment (RFC 9260 Appendix C ICMP5-ICMP6). `mtu` is left 0.
fn quoted_sctp(q: &[u8]) -> Option<TooBig> {
    let (local, peer, protocol, header, quoted_len) = quoted_ip(q)?;
    if protocol != IP_PROTO_SCTP {
        return None;
    }
    let sctp = q.get(header..)?;
    let common = sctp.get(..QUOTED_SCTP_MIN)?;
    let vtag = u32::from_be_bytes([common[4], common[5], common[6], common[7]]);
    // Appendix C ICMP6: a tag of 0 is an INIT's; the first chunk (after the 12-byte common
    // header) must be seen to be an INIT (type 1), with its Initiate Tag.
    let init_tag = match sctp.get(12..20) {
        Some(c) if vtag == 0 && c[0] == 1 => Some(u32::from_be_bytes([c[4], c[5], c[6], c[7]])),
        _ => None,
    };
    Some(TooBig {
        local,
        peer,
        local_port: u16::from_be_bytes([common[0], common[1]]),
        peer_port: u16::from_be_bytes([common[2], common[3]]),
        vtag,
        init_tag,
        mtu: 0,
        quoted_len,
    })
}

/// The ESP packet an ICMP error quotes (the bytes after its first 8), if the quote holds its
/// IP header (protocol 50, not a later fragment) and the ESP header's SPI and sequence number
/// (RFC 4303 §2: 4 + 4 bytes right after the IP header, or after the Fragment header of the
/// first IPv6 fragment the IPsec port cut, RFC 4301 §7.3). `mtu` is left 0.
fn quoted_esp(q: &[u8]) -> Option<EspTooBig> {
    let (local, peer, protocol, header, quoted_len) = quoted_ip(q)?;
    if protocol != IP_PROTO_ESP {
        return None;
    }
    let esp = q.get(header..header + 8)?;
    Some(EspTooBig {
        local,
        peer,
        spi: u32::from_be_bytes([esp[0], esp[1], esp[2], esp[3]]),
        seq: u32::from_be_bytes([esp[4], esp[5], esp[6], esp[7]]),
        mtu: 0,
        quoted_len,
    })
}

/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`).
fn mapped(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(a) if a.to_ipv4_mapped().is_some())
}

/// RFC 4443 §2.3: the ICMPv6 checksum over the pseudo-header verifies.
fn icmpv6_checksum_ok(icmp: &[u8], src: Ipv6Addr, dst: Ipv6Addr) -> bool {
    let (Some(&ty), Some(&code), Some(sum), Some(fields), Some(body)) = (
        icmp.first(),
        icmp.get(1),
        icmp.get(2..4),
        icmp.get(4..8),
        icmp.get(8..),
    ) else {
        return false;
    };
    let t = Icmpv6Type::Unknown {
        type_u8: ty,
        code_u8: code,
        bytes5to8: [fields[0], fields[1], fields[2], fields[3]],
    };
    t.calc_checksum(src.octets(), dst.octets(), body)
        .is_ok_and(|c| c == u16::from_be_bytes([sum[0], sum[1]]))
}

fn ethernet(out: &mut [u8], dst: [u8; 6], src: [u8; 6], ether_type: u16) {
    out[..6].copy_from_slice(&dst);
    out[6..12].copy_from_slice(&src);
    out[12..14].copy_from_slice(&ether_type.to_be_bytes());
}

fn write_arp(out: &mut [u8], op: u16, sha: [u8; 6], spa: Ipv4Addr, tha: [u8; 6], tpa: Ipv4Addr) {
    out[..6].copy_from_slice(&[0, 1, 0x08, 0x00, 6, 4]);
    out[6..8].copy_from_slice(&op.to_be_bytes());
    out[8..14].copy_from_slice(&sha);
    out[14..18].copy_from_slice(&spa.octets());
    out[18..24].copy_from_slice(&tha);
    out[24..28].copy_from_slice(&tpa.octets());
}

/// An IPv4 header without options, TTL 64, Don't Fragment set when `df` (RFC 5043 §9: DDP
/// segments are sized not to need IP fragmentation; see [`Interface::set_path_mtu`]).
fn ipv4_header(
    out: &mut [u8],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: u8,
    payload: usize,
    id: u16,
    df: bool,
) {
    let total = (IPV4_HEADER_LEN + payload) as u16;
    out[0] = 0x45;
    out[1] = 0;
    out[2..4].copy_from_slice(&total.to_be_bytes());
    out[4..6].copy_from_slice(&id.to_be_bytes());
    out[6..8].copy_from_slice(&(if df { 0x4000u16 } else { 0 }).to_be_bytes());
    out[8] = TTL;
    out[9] = protocol;
    out[10..12].copy_from_slice(&[0, 0]);
    out[12..16].copy_from_slice(&src.octets());
    out[16..20].copy_from_slice(&dst.octets());
    let sum = internet_checksum(&out[..IPV4_HEADER_LEN]);
    out[10..12].copy_from_slice(&sum.to_be_bytes());
}

/// An IPv4 header followed by `options` (whole words, at most [`IPV4_MAX_OPTIONS`] bytes):
/// [`ipv4_header`]'s, which every SCTP packet pays for, with the length fields and checksum
/// made again (Echo Replies only).
#[allow(clippy::too_many_arguments)]
fn ipv4_header_with_options(
    out: &mut [u8],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: u8,
    payload: usize,
    id: u16,
    df: bool,
    options: &[u8],
) {
    debug_assert!(options.len().is_multiple_of(4) && options.len() <= IPV4_MAX_OPTIONS);
    ipv4_header(out, src, dst, protocol, options.len() + payload, id, df);
    let header = IPV4_HEADER_LEN + options.len();
    out[0] = 0x40 | (header / 4) as u8;
    out[IPV4_HEADER_LEN..header].copy_from_slice(options);
    out[10..12].copy_from_slice(&[0, 0]);
    let sum = internet_checksum(&out[..header]);
    out[10..12].copy_from_slice(&sum.to_be_bytes());
}

/// The most option bytes an IPv4 header holds (IHL 15).
const IPV4_MAX_OPTIONS: usize = 40;

/// RFC 1122 §3.2.2.6: "If a Record Route and/or Time Stamp option is received in an ICMP Echo
/// Request, this option (these options) SHOULD be updated to include the current host and
/// included in the IP header of the Echo Reply message, without truncation". Writes the
/// reply's options into `out` from the request's (`request`, already walked by
/// `link::parse_ip`): each Record Route and Timestamp option copied whole with `ours` entered
/// once, as RFC 791 §3.1 has a module enter itself (the request's path ends here and the
/// reply's starts here: one entry for both), padded with End of Option List to whole words.
/// Other options (NOP, Security, Stream ID) are not echoed. Returns the options' length, or
/// None for a request RFC 791 has discarded: a pointer below its option's first slot, a
/// Timestamp flag it does not define, or a Timestamp overflow count that would overflow.
fn echo_reply_options(
    request: &[u8],
    ours: Ipv4Addr,
    out: &mut [u8; IPV4_MAX_OPTIONS],
) -> Option<usize> {
    const END: u8 = 0;
    const NOP: u8 = 1;
    const RECORD_ROUTE: u8 = 7;
    const TIMESTAMP: u8 = 68;
    let mut n = 0;
    let mut opts = request;
    while let Some(&ty) = opts.first() {
        let len = match ty {
            END => break,
            NOP => 1,
            _ => usize::from(*opts.get(1)?),
        };
        let (opt, rest) = opts.split_at_checked(len)?;
        opts = rest;
        if ty != RECORD_ROUTE && ty != TIMESTAMP {
            continue;
        }
        let o = out.get_mut(n..n + len)?;
        o.copy_from_slice(opt);
        n += len;
        // The pointer is 1-based from the option's type octet.
        let ptr = usize::from(*o.get(2)?);
        match ty {
            RECORD_ROUTE => {
                // §3.1: the pointer's least legal value is 4; a full route is left as it is.
                if ptr < 4 {
                    return None;
                }
                if let Some(slot) = o.get_mut(ptr - 1..ptr + 3) {
                    slot.copy_from_slice(&ours.octets());
                    o[2] += 4;
                }
            }
            _ => {
                // §3.1 Internet Timestamp: the pointer's least legal value is 5; flag 0 is
                // timestamps only, 1 an address and a timestamp each, 3 timestamps at the
                // addresses prespecified, ours among them.
                let (overflow, flag) = (o.get(3)? >> 4, o.get(3)? & 0x0f);
                if ptr < 5 {
                    return None;
                }
                let entry = match flag {
                    0 => 4,
                    1 | 3 => 8,
                    _ => return None,
                };
                let at = ptr - 1;
                let Some(slot) = o.get_mut(at..at + entry) else {
                    // "If the timestamp data area is already full ... the overflow count is
                    // incremented by one"; "If the overflow count itself overflows, the
                    // original datagram is considered to be in error and is discarded."
                    if overflow == 0x0f {
                        return None;
                    }
                    o[3] += 0x10;
                    continue;
                };
                let ts = ms_since_midnight_ut().to_be_bytes();
                match flag {
                    0 => slot.copy_from_slice(&ts),
                    1 => {
                        slot[..4].copy_from_slice(&ours.octets());
                        slot[4..].copy_from_slice(&ts);
                    }
                    // Only where the next prespecified address is ours.
                    _ if slot[..4] == ours.octets() => slot[4..].copy_from_slice(&ts),
                    _ => continue,
                }
                o[2] += entry as u8;
            }
        }
    }
    // End of Option List pads to whole words (`out` is zeroed).
    Some(n.next_multiple_of(4))
}

/// RFC 791 §3.1's timestamp: "milliseconds since midnight UT"; where the time cannot be had
/// so, any time "provided the high order bit of the timestamp field is set to one".
fn ms_since_midnight_ut() -> u32 {
    const DAY_MS: u128 = 86_400_000;
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        // UTC days are 86 400 s long in Unix time (leap seconds are not counted).
        Ok(t) => (t.as_millis() % DAY_MS) as u32,
        Err(_) => 1 << 31,
    }
}

fn ipv6_header(
    out: &mut [u8],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    next: u8,
    payload: usize,
    hop_limit: u8,
) {
    out[..4].copy_from_slice(&[0x60, 0, 0, 0]);
    out[4..6].copy_from_slice(&(payload as u16).to_be_bytes());
    out[6] = next;
    out[7] = hop_limit;
    out[8..24].copy_from_slice(&src.octets());
    out[24..40].copy_from_slice(&dst.octets());
}

/// An ICMPv6 message: type, code 0, checksum (RFC 4443 §2.3, computed by etherparse over the
/// pseudo-header), four bytes of type-specific fields, then `body`.
fn write_icmpv6(
    out: &mut [u8],
    ty: u8,
    fields: [u8; 4],
    body: &[u8],
    src: Ipv6Addr,
    dst: Ipv6Addr,
) {
    let t = Icmpv6Type::Unknown {
        type_u8: ty,
        code_u8: 0,
        bytes5to8: fields,
    };
    // The body is at most 24 bytes, far below the 2^32 limit: the computation cannot fail.
    let sum = t
        .calc_checksum(src.octets(), dst.octets(), body)
        .unwrap_or(0);
    out[0] = ty;
    out[1] = 0;
    out[2..4].copy_from_slice(&sum.to_be_bytes());
    out[4..8].copy_from_slice(&fields);
    out[8..8 + body.len()].copy_from_slice(body);
}

/// RFC 1071 ones' complement sum over an even-length header.
fn internet_checksum(b: &[u8]) -> u16 {
    let mut sum = 0u32;
    for w in b.chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;
    use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};

    const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
    const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
    const IP4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const PEER4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
    const IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    const PEER6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

    const T0: Instant = Instant::from_nanos(1_000_000_000);

    fn iface() -> Interface {
        Interface::new(MAC, Some(IP4), Some(IP6))
    }

    fn arp_frame(op: u16, dst_mac: [u8; 6], spa: Ipv4Addr, tpa: Ipv4Addr) -> Vec<u8> {
        let mut f = vec![0u8; ETHERNET_HEADER_LEN + ARP_LEN];
        ethernet(&mut f, dst_mac, PEER_MAC, ETHERTYPE_ARP);
        write_arp(
            &mut f[ETHERNET_HEADER_LEN..],
            op,
            PEER_MAC,
            spa,
            [0; 6],
            tpa,
        );
        f
    }

    fn sctp4(dst: Ipv4Addr, dst_mac: [u8; 6]) -> Vec<u8> {
        let mut f = Vec::new();
        PacketBuilder::ethernet2(PEER_MAC, dst_mac)
            .ipv4(PEER4.octets(), dst.octets(), 64)
            .write(&mut f, IpNumber(IP_PROTO_SCTP), &[0u8; 28])
            .unwrap();
        f
    }

    use etherparse::IpNumber;

    /// RFC 4861 §7.3.1: an authenticated packet confirms a known neighbour but does not change
    /// its link address (the Ethernet header is outside SCTP's CRC32c and verification tag); an
    /// unknown one is learnt from it, and ARP still updates a known one.
    #[test]
    fn confirmation_never_changes_a_known_link_address() {
        let mut a = iface();
        let peer = IpAddr::V4(PEER4);
        a.confirm(peer, PEER_MAC);
        assert_eq!(a.neighbour(peer), Some(PEER_MAC), "learnt when unknown");
        a.confirm(peer, [0x02, 0, 0, 0x02, 0, 0x02]);
        assert_eq!(
            a.neighbour(peer),
            Some(PEER_MAC),
            "a damaged source is not taken"
        );
        let mut out = [0u8; 128];
        let mut b = iface();
        b.confirm(peer, [0x02, 0, 0, 0, 0, 0x66]);
        let reply = arp_frame(2, MAC, PEER4, IP4);
        b.solicit(peer, &mut out);
        assert_eq!(b.receive(&reply, &mut out), Rx::Consumed);
        assert_eq!(b.neighbour(peer), Some(PEER_MAC), "ARP updates it");
        b.learn_shared(peer, [0x02, 0, 0, 0, 0, 0x77]);
        assert_eq!(
            b.neighbour(peer),
            Some([0x02, 0, 0, 0, 0, 0x77]),
            "as does a shared answer"
        );
    }

    /// RFC 4861 §7.3 reachability, for ARP too: a neighbour we keep sending to that nothing
    /// confirms for REACHABLE_TIME is solicited again (at most once a second), and its answer
    /// replaces a wrong address; a confirmed one is left alone, a static one never probed.
    #[test]
    fn a_neighbour_unconfirmed_for_reachable_time_is_solicited_again() {
        let mut a = iface();
        let peer = IpAddr::V4(PEER4);
        // A wrong address, learnt (say from a damaged answer).
        a.confirm(peer, [0x02, 0, 0, 0, 0, 0x66]);
        let mut out = [0u8; 128];
        let at = |s: u64| T0 + Duration::from_millis(s);
        assert_eq!(a.probe_if_stale(at(0), peer, &mut out), 0, "fresh");
        assert_eq!(a.probe_if_stale(at(29_000), peer, &mut out), 0);
        let n = a.probe_if_stale(at(30_000), peer, &mut out);
        assert_eq!(n, ETHERNET_MIN, "an ARP request after REACHABLE_TIME");
        assert_eq!(&out[..6], &BROADCAST);
        assert_eq!(
            a.probe_if_stale(at(30_500), peer, &mut out),
            0,
            "one a second"
        );
        assert_eq!(a.stats().stale_probes, 2);
        // The answer corrects the entry; then it is fresh again.
        let reply = arp_frame(2, MAC, PEER4, IP4);
        assert_eq!(a.receive(&reply, &mut out), Rx::Consumed);
        assert_eq!(a.neighbour(peer), Some(PEER_MAC));
        assert_eq!(a.probe_if_stale(at(31_000), peer, &mut out), 0);
        assert_eq!(
            a.probe_if_stale(at(60_000), peer, &mut out),
            0,
            "confirmed at 31 s"
        );
        // Authenticated traffic keeps it confirmed.
        a.confirm(peer, PEER_MAC);
        assert_eq!(a.probe_if_stale(at(75_000), peer, &mut out), 0);
        // A static entry is never probed.
        let mut b = iface();
        b.learn_static(peer, PEER_MAC);
        assert_eq!(b.probe_if_stale(at(0), peer, &mut out), 0);
        assert_eq!(b.probe_if_stale(at(100_000), peer, &mut out), 0);
    }

    /// RFC 826: a request for our address is answered with our MAC, to the requester, and
    /// teaches us the requester; a request for another address is not answered.
    #[test]
    fn arp_request_for_us_is_answered_rfc826() {
        let mut i = iface();
        let mut out = [0u8; 128];
        let Rx::Reply(n) = i.receive(&arp_frame(1, BROADCAST, PEER4, IP4), &mut out) else {
            panic!()
        };
        let r = &out[..n];
        assert_eq!(&r[..6], &PEER_MAC, "to the requester");
        assert_eq!(&r[6..12], &MAC);
        assert_eq!(&r[12..14], &ETHERTYPE_ARP.to_be_bytes());
        let a = &r[ETHERNET_HEADER_LEN..];
        assert_eq!(u16::from_be_bytes([a[6], a[7]]), 2, "a reply");
        assert_eq!(&a[8..14], &MAC, "sender hardware address: ours");
        assert_eq!(&a[14..18], &IP4.octets());
        assert_eq!(&a[18..24], &PEER_MAC);
        assert_eq!(&a[24..28], &PEER4.octets());
        assert_eq!(i.neighbour(IpAddr::V4(PEER4)), Some(PEER_MAC));
        let other = Ipv4Addr::new(198, 18, 0, 9);
        assert_eq!(
            i.receive(&arp_frame(1, BROADCAST, PEER4, other), &mut out),
            Rx::Dropped(Drop::ArpNotForUs)
        );
        // A reply to us is learnt, not answered.
        let mut j = iface();
        assert_eq!(
            j.receive(&arp_frame(2, MAC, PEER4, IP4), &mut out),
            Rx::Consumed
        );
        assert_eq!(j.neighbour(IpAddr::V4(PEER4)), Some(PEER_MAC));
        assert_eq!((i.stats().arp_replies, i.stats().arp_not_for_us), (1, 1));
    }

    /// An ICMP Echo Request from the peer to `dst` behind `dst_mac`, `data` after its id 0x1234
    /// and sequence 7.
    /// RFC 826's receive algorithm merges before it asks who the target is: "If the pair
    /// <protocol type, sender protocol address> is already in my translation table, update the
    /// sender hardware address field of the entry with the new information in the packet";
    /// only adding a new entry needs "Am I the target protocol address?". A peer whose link
    /// address changed (a failover, a new NIC) announces it by a gratuitous ARP (RFC 5227 §3,
    /// its sender and target both its own address); it was dropped unread, and the peer's
    /// packets went to the old address until the entry went stale (`REACHABLE_TIME`, 30 s)
    /// and a solicitation was answered. An unknown sender is still not added, and a static
    /// entry still not replaced. Found by an independent review of the host layer (session 62).
    #[test]
    fn an_arp_from_a_known_sender_updates_its_entry_whoever_the_target_rfc826() {
        let mut i = iface();
        let mut out = [0u8; 128];
        i.confirm(IpAddr::V4(PEER4), PEER_MAC);
        let moved = [0x02, 0, 0, 0, 0, 0x22];
        let announce = |sha: [u8; 6], spa: Ipv4Addr| {
            let mut f = arp_frame(1, BROADCAST, spa, spa);
            f[6..12].copy_from_slice(&sha);
            f[ETHERNET_HEADER_LEN + 8..ETHERNET_HEADER_LEN + 14].copy_from_slice(&sha);
            f
        };
        assert_eq!(
            i.receive(&announce(moved, PEER4), &mut out),
            Rx::Consumed,
            "an announcement (RFC 5227 §2.3): taken, not answered"
        );
        assert_eq!(
            i.neighbour(IpAddr::V4(PEER4)),
            Some(moved),
            "the announced link address is not used"
        );
        // An unknown sender asking for another is not added; a static entry stays.
        let stranger = Ipv4Addr::new(198, 18, 0, 77);
        i.receive(&announce(moved, stranger), &mut out);
        assert_eq!(i.neighbour(IpAddr::V4(stranger)), None);
        let fixed = Ipv4Addr::new(198, 18, 0, 78);
        i.learn_static(IpAddr::V4(fixed), PEER_MAC);
        i.receive(&announce(moved, fixed), &mut out);
        assert_eq!(i.neighbour(IpAddr::V4(fixed)), Some(PEER_MAC));
    }

    /// RFC 5227 §2.3 and RFC 4861 §7.2.6, read by the peer as RFC 826 and RFC 4861 §7.2.5
    /// read them: an endpoint restarted on a new link address announces it, and a neighbour
    /// that cached the old one takes the new one at once, from either family's announcement.
    #[test]
    fn an_announcement_moves_a_neighbours_cached_link_address_rfc5227_2_3_rfc4861_7_2_6() {
        let moved = [0x02, 0, 0, 0, 0, 0x33];
        let mut restarted = Interface::new(moved, Some(PEER4), Some(PEER6));
        let mut i = iface();
        i.confirm(IpAddr::V4(PEER4), PEER_MAC);
        i.confirm(IpAddr::V6(PEER6), PEER_MAC);
        let mut out = [0u8; 128];
        let mut sent = [0u8; 128];

        let n = restarted.announce(false, &mut sent);
        assert_eq!(n, ETHERNET_MIN);
        let f = &sent[..n];
        assert_eq!(f[..6], BROADCAST, "RFC 5227 §2.3: broadcast");
        let arp = &f[ETHERNET_HEADER_LEN..];
        assert_eq!(arp[6..8], [0, 1], "RFC 5227 §3: an ARP Request");
        assert_eq!(arp[8..14], moved);
        assert_eq!(arp[14..18], PEER4.octets(), "sender: the announced address");
        assert_eq!(arp[24..28], PEER4.octets(), "target: the same address");
        assert_eq!(i.receive(f, &mut out), Rx::Consumed, "taken, not answered");
        assert_eq!(i.neighbour(IpAddr::V4(PEER4)), Some(moved));
        // A host not in the table is not added (RFC 826), and its announcement is no frame
        // "for another host" either: the endpoint's peer announces itself at its start.
        let mut fresh = iface();
        assert_eq!(fresh.receive(f, &mut out), Rx::Consumed);
        assert_eq!(fresh.neighbour(IpAddr::V4(PEER4)), None);
        assert_eq!(fresh.stats().arp_not_for_us, 0);
        assert_eq!(i.neighbour(IpAddr::V6(PEER6)), Some(PEER_MAC));

        let n = restarted.announce(true, &mut sent);
        let f = &sent[..n];
        assert_eq!(f[..6], multicast_mac(ALL_NODES), "§7.2.6: to all nodes");
        let h = &f[ETHERNET_HEADER_LEN..ETHERNET_HEADER_LEN + IPV6_HEADER_LEN];
        assert_eq!(h[7], ND_HOP_LIMIT);
        assert_eq!(h[24..40], ALL_NODES.octets());
        let icmp = &f[ETHERNET_HEADER_LEN + IPV6_HEADER_LEN..];
        assert_eq!(icmp[0], ND_ADVERT);
        assert_eq!(icmp[4], 0x20, "§7.2.6: Solicited clear, Override set");
        assert_eq!(i.receive(f, &mut out), Rx::Consumed);
        assert_eq!(i.neighbour(IpAddr::V6(PEER6)), Some(moved));
        assert_eq!(restarted.stats().announcements, 2);
        assert_eq!(restarted.stats().frames(), 0, "sent, not received");

        // An interface without an address of a family announces nothing for it.
        let mut v4_only = Interface::new(moved, Some(PEER4), None);
        assert_eq!(v4_only.announce(true, &mut sent), 0);
        assert_eq!(v4_only.stats().announcements, 0);
    }

    /// RFC 5227 §2.4 and RFC 4862 §5.4.4: another host on the link configured with our
    /// address announces it. Its link address is never learnt for ours (our peers would
    /// keep reaching us; a neighbour table holding our own address would be wrong anyway),
    /// each such frame is counted, and an IPv4 one is answered with our own ARP Announcement
    /// at most once a DEFEND_INTERVAL (§2.4 (c)), so that neighbours that took the other
    /// host's link address take ours back.
    #[test]
    fn another_host_claiming_our_address_is_counted_and_defended_rfc5227_2_4() {
        let mut i = iface();
        // Another data core's copy of the port's interface, made when the cores were.
        let mut other_core = i.clone();
        i.set_time(T0);
        let mut out = [0u8; 128];
        let claim = arp_frame(1, BROADCAST, IP4, IP4);
        let Rx::Reply(n) = i.receive(&claim, &mut out) else {
            panic!("defended");
        };
        let arp = &out[ETHERNET_HEADER_LEN..n];
        assert_eq!(out[..6], BROADCAST);
        assert_eq!(arp[6..8], [0, 1], "an ARP Announcement: a Request");
        assert_eq!(arp[8..14], MAC, "our link address");
        assert_eq!(arp[14..18], IP4.octets());
        assert_eq!(arp[24..28], IP4.octets());
        assert_eq!(i.neighbour(IpAddr::V4(IP4)), None, "never learnt for ours");
        // Within DEFEND_INTERVAL: counted, not answered; a request for our address from
        // the other host (its sender our address) is no request to answer either.
        assert_eq!(
            i.receive(&claim, &mut out),
            Rx::Dropped(Drop::AddressConflict)
        );
        let asks = arp_frame(1, BROADCAST, IP4, Ipv4Addr::new(198, 18, 0, 9));
        assert_eq!(
            i.receive(&asks, &mut out),
            Rx::Dropped(Drop::AddressConflict)
        );
        assert_eq!(i.stats().address_conflicts, 3);
        assert_eq!(i.stats().frames(), 3, "each frame counted once");
        // The claim reaches the other core too (af_packet's fanout, say): the port has
        // defended within DEFEND_INTERVAL already.
        other_core.set_time(T0 + DEFEND_INTERVAL / 2);
        assert_eq!(
            other_core.receive(&claim, &mut out),
            Rx::Dropped(Drop::AddressConflict),
            "one defence a DEFEND_INTERVAL for the port, not for each core"
        );
        i.set_time(T0 + DEFEND_INTERVAL);
        assert!(
            matches!(i.receive(&claim, &mut out), Rx::Reply(_)),
            "defended again"
        );
        // The peer's own request for our address is still answered.
        assert!(matches!(
            i.receive(&arp_frame(1, BROADCAST, PEER4, IP4), &mut out),
            Rx::Reply(_)
        ));
        // IPv6: an advertisement for our address from another link address.
        let mut other = Interface::new(PEER_MAC, None, Some(IP6));
        let mut na = [0u8; 128];
        let m = other.announce(true, &mut na);
        assert_eq!(
            i.receive(&na[..m], &mut out),
            Rx::Dropped(Drop::AddressConflict)
        );
        assert_eq!(i.neighbour(IpAddr::V6(IP6)), None);
        assert_eq!(i.stats().address_conflicts, 5);
        // A solicitation from our address by the other host: neither learnt nor answered
        // (an independent review: it put our address in the table and advertised to us).
        let mut ns = [0u8; 128];
        let m = other.solicit(IpAddr::V6(IP6), &mut ns);
        assert_eq!(
            i.receive(&ns[..m], &mut out),
            Rx::Dropped(Drop::AddressConflict)
        );
        assert_eq!(i.neighbour(IpAddr::V6(IP6)), None);
        assert_eq!(i.stats().address_conflicts, 6);
        // One for another target from our address is the same conflict.
        let m = other.solicit(IpAddr::V6(PEER6), &mut ns);
        assert_eq!(
            i.receive(&ns[..m], &mut out),
            Rx::Dropped(Drop::AddressConflict)
        );
        assert_eq!(i.stats().address_conflicts, 7);
    }

    fn ping4(dst: Ipv4Addr, dst_mac: [u8; 6], data: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        PacketBuilder::ethernet2(PEER_MAC, dst_mac)
            .ipv4(PEER4.octets(), dst.octets(), 64)
            .icmpv4_echo_request(0x1234, 7)
            .write(&mut f, data)
            .unwrap();
        f
    }

    /// RFC 1122 §3.3.2 ("A host MUST be capable of reassembling"; EMTU_R "MUST be greater
    /// than or equal to 576", whatever the protocol) with §3.2.2.6 (an Echo Reply's data
    /// "MUST be entirely included"): an Echo Request a smaller hop fragmented (576 bytes of IP
    /// through a 300-byte hop) is reassembled and answered whole, without DF, for that hop to
    /// fragment on the way back. Found by an independent review of the host layer (session
    /// 62): only fragments of SCTP and ESP were reassembled, and the request went unanswered.
    #[test]
    fn rfc1122_3_3_2_a_fragmented_echo_request_is_reassembled_and_answered() {
        let mut i = iface();
        let mut out = vec![0u8; 9216];
        let data: Vec<u8> = (0..548u32).map(|k| k as u8).collect();
        let whole = ping4(IP4, MAC, &data);
        let icmp = &whole[ETHERNET_HEADER_LEN + IPV4_HEADER_LEN..];
        let mut answered = None;
        for (k, part) in icmp.chunks(280).enumerate() {
            let f = icmp_frag4(0x77, k * 280, (k + 1) * 280 < icmp.len(), part);
            match i.receive(&f, &mut out) {
                Rx::Fragment(Some(n)) => {
                    let reassembled = out[..n].to_vec();
                    i.set_reassembled(true);
                    if let Rx::Reply(m) = i.receive(&reassembled, &mut out) {
                        answered = Some(out[..m].to_vec());
                    }
                    i.set_reassembled(false);
                }
                Rx::Reply(m) => answered = Some(out[..m].to_vec()),
                _ => {}
            }
        }
        let reply = answered.expect("the fragmented Echo Request was not answered");
        assert!(
            reply.ends_with(&data),
            "the reply carries the request's data whole"
        );
        let ip = &reply[ETHERNET_HEADER_LEN..];
        assert_eq!(ip[6] & 0x40, 0, "no DF: the smaller hop may fragment it");
        assert_eq!(i.stats().echo_replies, 1);
        // A request that came whole is answered with DF, as before.
        let Rx::Reply(m) = i.receive(&ping4(IP4, MAC, &data), &mut out) else {
            panic!("a whole Echo Request is answered");
        };
        assert_eq!(out[ETHERNET_HEADER_LEN + 6] & 0x40, 0x40, "DF");
        assert!(m > 576);
    }

    /// The ICMP datagram `icmp`'s IPv4 fragment at `off` (Identification `id`) from the peer.
    fn icmp_frag4(id: u16, off: usize, more: bool, part: &[u8]) -> Vec<u8> {
        let mut f = frag4_review(PEER4, id, off, more, part);
        f[ETHERNET_HEADER_LEN + 9] = IP_PROTO_ICMP;
        f[ETHERNET_HEADER_LEN + 10..ETHERNET_HEADER_LEN + 12].fill(0);
        let sum = internet_checksum(&f[ETHERNET_HEADER_LEN..ETHERNET_HEADER_LEN + 20]);
        f[ETHERNET_HEADER_LEN + 10..ETHERNET_HEADER_LEN + 12].copy_from_slice(&sum.to_be_bytes());
        f
    }

    /// Review (session 63) of the reassembled-datagram mark and the Echo Reply to one:
    /// RFC 1122 §3.2.2.6 with RFC 6864 §4.1 and RFC 7739 §5. A datagram completed but never
    /// received as one (no buffer for it) leaves nothing on the next frame: the mark is the
    /// receiver's to set around the datagram (`set_reassembled`), and a whole request's reply
    /// keeps DF. A reply without DF takes a keyed Identification, not the counter every
    /// core's interface starts at 0: two cores answering the same peer give different ones.
    #[test]
    fn the_reassembled_mark_and_the_replys_identification_rfc6864_4_1() {
        let data: Vec<u8> = (0..548u32).map(|k| k as u8).collect();
        let whole = ping4(IP4, MAC, &data);
        let icmp = whole[ETHERNET_HEADER_LEN + IPV4_HEADER_LEN..].to_vec();
        let fragments = |id: u16| -> Vec<Vec<u8>> {
            icmp.chunks(280)
                .enumerate()
                .map(|(k, part)| icmp_frag4(id, k * 280, (k + 1) * 280 < icmp.len(), part))
                .collect()
        };
        let mut out = vec![0u8; 9216];
        let mut i = iface();
        for f in fragments(0x51) {
            i.receive(&f, &mut out);
        }
        let Rx::Reply(_) = i.receive(&whole, &mut out) else {
            panic!("answered");
        };
        assert_eq!(
            out[ETHERNET_HEADER_LEN + 6] & 0x40,
            0x40,
            "DF: it came whole"
        );
        let reply_id = |i: &mut Interface, id: u16| -> u16 {
            let mut out = vec![0u8; 9216];
            let mut got = None;
            for f in fragments(id) {
                if let Rx::Fragment(Some(n)) = i.receive(&f, &mut out) {
                    let r = out[..n].to_vec();
                    i.set_reassembled(true);
                    if let Rx::Reply(m) = i.receive(&r, &mut out) {
                        got = Some(out[..m].to_vec());
                    }
                    i.set_reassembled(false);
                }
            }
            let reply = got.expect("answered");
            assert_eq!(reply[ETHERNET_HEADER_LEN + 6] & 0x40, 0, "no DF");
            u16::from_be_bytes([
                reply[ETHERNET_HEADER_LEN + 4],
                reply[ETHERNET_HEADER_LEN + 5],
            ])
        };
        let (mut a, mut b) = (iface(), iface().clone());
        assert_ne!(reply_id(&mut a, 0x52), reply_id(&mut b, 0x52));
    }

    /// Review (session 63), RFC 1122 §3.3.2: an Echo Request's fragments never take a slot
    /// from a datagram of SCTP (four slots a core): with every slot holding SCTP, a ping's
    /// fragments are dropped and the SCTP datagrams still complete; and a rejected first
    /// ICMP fragment (not an Echo Request) takes its datagram's later fragments with it.
    #[test]
    fn echo_fragments_never_evict_sctp_reassembly_rfc1122_3_3_2() {
        let mut i = iface();
        let mut out = vec![0u8; 9216];
        let sctp: Vec<u8> = (0..64u32).map(|k| k as u8).collect();
        for id in 1..=REASSEMBLIES as u16 {
            let f = frag4_review(PEER4, id, 0, true, &sctp[..32]);
            assert_eq!(i.receive(&f, &mut out), Rx::Fragment(None));
        }
        let data: Vec<u8> = vec![7; 548];
        let whole = ping4(IP4, MAC, &data);
        let icmp = &whole[ETHERNET_HEADER_LEN + IPV4_HEADER_LEN..];
        let f = icmp_frag4(0x99, 280, false, &icmp[280..]);
        assert_eq!(i.receive(&f, &mut out), Rx::Dropped(Drop::Fragment));
        for id in 1..=REASSEMBLIES as u16 {
            let f = frag4_review(PEER4, id, 32, false, &sctp[32..]);
            assert!(
                matches!(i.receive(&f, &mut out), Rx::Fragment(Some(_))),
                "SCTP datagram {id} completes"
            );
        }
        // Slots free again: a non-Echo ICMP datagram's later fragment is kept, then its
        // first fragment is refused and the slot emptied.
        let mut other = vec![ICMP_UNREACHABLE, 3, 0, 0, 0, 0, 0, 0];
        other.resize(600, 0);
        let later = icmp_frag4(0x77, 296, false, &other[296..]);
        assert_eq!(i.receive(&later, &mut out), Rx::Fragment(None));
        let first = icmp_frag4(0x77, 0, true, &other[..296]);
        assert_eq!(i.receive(&first, &mut out), Rx::Dropped(Drop::Fragment));
        assert!(
            i.reassembly.iter().all(|r| r.key.is_none()),
            "the slot is free"
        );
    }

    /// The same for IPv6 (session 63's list: its key has no protocol, RFC 8200 §4.5, so a
    /// ping's datagram took slots as SCTP's did): the Fragment header's Next Header, which
    /// every fragment carries, tells a ping's fragments, and they never take a slot from
    /// SCTP's datagrams; a later fragment that said SCTP is a ping's once its first says so.
    #[test]
    fn icmpv6_echo_fragments_never_evict_sctp_reassembly_rfc8200_4_5() {
        let mut i = iface();
        let mut out = vec![0u8; 9216];
        let sctp: Vec<u8> = (0..64u32).map(|k| k as u8).collect();
        for id in 1..=REASSEMBLIES as u32 {
            let f = frag6(id, 0, true, IP_PROTO_SCTP, &sctp[..32], false);
            assert_eq!(i.receive(&f, &mut out), Rx::Fragment(None));
        }
        let data: Vec<u8> = vec![7; 1392];
        let whole = ping6(IP6, MAC, &data);
        let icmp = &whole[ETHERNET_HEADER_LEN + IPV6_HEADER_LEN..];
        let later = frag6(0x99, 1232, false, ICMPV6, &icmp[1232..], false);
        assert_eq!(
            i.receive(&later, &mut out),
            Rx::Dropped(Drop::Fragment),
            "no SCTP datagram gives way to a ping's"
        );
        for id in 1..=REASSEMBLIES as u32 {
            let f = frag6(id, 32, false, IP_PROTO_SCTP, &sctp[32..], false);
            let got = i.receive(&f, &mut out);
            assert!(
                matches!(got, Rx::Fragment(Some(_))),
                "SCTP datagram {id} completes: {got:?}"
            );
        }
        // A ping's datagram whose later fragment claimed SCTP is a ping's once its first
        // fragment says ICMPv6: it gives way to a new SCTP datagram when the slots are full.
        let claimed = frag6(0x98, 1232, false, IP_PROTO_SCTP, &icmp[1232..], false);
        assert_eq!(i.receive(&claimed, &mut out), Rx::Fragment(None));
        let first = frag6(0x98, 0, true, ICMPV6, &icmp[..616], false);
        assert_eq!(i.receive(&first, &mut out), Rx::Fragment(None));
        for id in 10..10 + REASSEMBLIES as u32 - 1 {
            let f = frag6(id, 0, true, IP_PROTO_SCTP, &sctp[..32], false);
            assert_eq!(i.receive(&f, &mut out), Rx::Fragment(None));
        }
        let f = frag6(20, 0, true, IP_PROTO_SCTP, &sctp[..32], false);
        assert_eq!(i.receive(&f, &mut out), Rx::Fragment(None));
        assert!(
            i.reassembly.iter().all(|r| !r.ping),
            "the ping's datagram gave way, not an SCTP one"
        );
    }

    /// RFC 5227 §2.4: a packet whose sender hardware address is ours is ours (a hairpin or a
    /// capturing device sends our announcement back): neither a conflict nor a request to
    /// answer, and our address is not learnt.
    #[test]
    fn our_own_announcement_come_back_is_not_taken_rfc5227_2_4() {
        let mut i = iface();
        let mut own = [0u8; 128];
        let n = i.announce(false, &mut own);
        let mut out = [0u8; 128];
        assert_eq!(
            i.receive(&own[..n], &mut out),
            Rx::Dropped(Drop::ArpNotForUs)
        );
        assert_eq!(i.neighbour(IpAddr::V4(IP4)), None);
        assert_eq!(i.stats().address_conflicts, 0);
    }

    /// RFC 1122 §3.2.2.6 bounds what ICMP is reassembled: an Echo Request's datagram. The
    /// first fragment of another ICMP message (a Destination Unreachable) is dropped as any
    /// other fragment; it is nothing this host answers.
    #[test]
    fn only_an_echo_requests_icmp_fragments_are_reassembled_rfc1122_3_2_2_6() {
        let mut i = iface();
        let mut out = vec![0u8; 9216];
        let mut icmp = vec![ICMP_UNREACHABLE, 3, 0, 0, 0, 0, 0, 0];
        icmp.resize(600, 0);
        let first = icmp_frag4(0x78, 0, true, &icmp[..296]);
        assert_eq!(i.receive(&first, &mut out), Rx::Dropped(Drop::Fragment));
        assert_eq!(i.stats().fragments_kept, 0);
    }

    /// RFC 8200 §4.5 and §5 with RFC 4443 §4.2: an ICMPv6 Echo Request that came in
    /// fragments is reassembled and answered; the reply, larger than the minimum MTU, must
    /// leave in fragments of 1280 bytes (routers do not fragment, and the path that needed
    /// fragments one way may not carry the reply whole the other), which the interface says.
    /// A whole request's reply leaves whole.
    #[test]
    fn a_fragmented_icmpv6_echo_request_is_answered_in_fragments_rfc8200_5() {
        let mut i = iface();
        let mut out = vec![0u8; 9216];
        let data: Vec<u8> = (0..1392u32).map(|k| (k * 7) as u8).collect();
        let whole = ping6(IP6, MAC, &data);
        let icmp = &whole[ETHERNET_HEADER_LEN + IPV6_HEADER_LEN..];
        let frames: Vec<Vec<u8>> = icmp
            .chunks(1232)
            .enumerate()
            .map(|(k, part)| {
                frag6(
                    0x99,
                    k * 1232,
                    (k + 1) * 1232 < icmp.len(),
                    ICMPV6,
                    part,
                    false,
                )
            })
            .collect();
        let n = feed(&mut i, &frames.iter().collect::<Vec<_>>(), &mut out).expect("reassembled");
        let reassembled = out[..n].to_vec();
        i.set_reassembled(true);
        let Rx::Reply(m) = i.receive(&reassembled, &mut out) else {
            panic!("answered");
        };
        i.set_reassembled(false);
        assert!(out[..m].ends_with(&data), "the data whole");
        assert_eq!(i.take_reply_fragment_mtu(), Some(IPV6_MIN_MTU));
        assert_eq!(i.take_reply_fragment_mtu(), None, "once");
        // The interface cuts it: each fragment fits 1280 bytes and they make the reply.
        let reply = out[..m].to_vec();
        let mut pieces = Vec::new();
        let mut scratch = vec![0u8; 9216];
        let made = i.fragment_ipv6(&reply, IPV6_MIN_MTU, &mut scratch, |f| {
            pieces.push(f.to_vec())
        });
        assert!(made >= 2, "{made}");
        assert!(pieces
            .iter()
            .all(|f| f.len() - ETHERNET_HEADER_LEN <= IPV6_MIN_MTU));
        // Whole, the same request's reply leaves whole.
        assert!(matches!(i.receive(&whole, &mut out), Rx::Reply(_)));
        assert_eq!(i.take_reply_fragment_mtu(), None);
    }

    fn ping6(dst: Ipv6Addr, dst_mac: [u8; 6], data: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        PacketBuilder::ethernet2(PEER_MAC, dst_mac)
            .ipv6(PEER6.octets(), dst.octets(), 64)
            .icmpv6_echo_request(0x1234, 7)
            .write(&mut f, data)
            .unwrap();
        f
    }

    /// RFC 1122 §3.2.2.6: "Every host MUST implement an ICMP Echo server function that
    /// receives Echo Requests and sends corresponding Echo Replies", and "Data received in an
    /// ICMP Echo Request MUST be entirely included in the resulting Echo Reply". The reply goes
    /// from our address to the asker's, to its MAC, with the identifier, sequence number and
    /// every byte of data, and an ICMP checksum and IP header that verify; an odd length too.
    #[test]
    fn an_echo_request_is_answered_whole_rfc1122_3_2_2_6() {
        for len in [0usize, 56, 1001, 1472] {
            let data: Vec<u8> = (0..len).map(|k| (k * 7) as u8).collect();
            let mut i = iface();
            let mut out = vec![0u8; 2048];
            let Rx::Reply(n) = i.receive(&ping4(IP4, MAC, &data), &mut out) else {
                panic!("len {len}: not answered")
            };
            let r = &out[..n];
            assert_eq!((&r[..6], &r[6..12]), (&PEER_MAC[..], &MAC[..]));
            let f = link::parse_ip(r).expect("a valid IPv4 header");
            assert_eq!(f.ip.src(), IpAddr::V4(IP4));
            assert_eq!(f.ip.dst(), IpAddr::V4(PEER4));
            assert_eq!(f.protocol, IP_PROTO_ICMP);
            let icmp = f.payload;
            assert_eq!(&icmp[..2], &[ICMP_ECHO_REPLY, 0], "an Echo Reply");
            assert_eq!(internet_checksum(icmp), 0, "its checksum verifies");
            assert_eq!(&icmp[4..8], &[0x12, 0x34, 0, 7], "identifier and sequence");
            assert_eq!(&icmp[8..], &data[..], "the data, whole");
            assert_eq!(i.stats().echo_replies, 1);
            // No neighbour is learnt from it: SCTP authenticates its peers first.
            assert_eq!(i.neighbour(IpAddr::V4(PEER4)), None);
        }
    }

    /// RFC 4443 §4.2: "Every node MUST implement an ICMPv6 Echo responder function"; "The data
    /// received in the ICMPv6 Echo Request message MUST be returned entirely and unmodified in
    /// the ICMPv6 Echo Reply message", with a checksum over the pseudo-header (§2.3).
    #[test]
    fn an_icmpv6_echo_request_is_answered_whole_rfc4443_4_2() {
        let data: Vec<u8> = (0..1001).map(|k| (k * 3) as u8).collect();
        let mut i = iface();
        let mut out = vec![0u8; 2048];
        let Rx::Reply(n) = i.receive(&ping6(IP6, MAC, &data), &mut out) else {
            panic!("not answered")
        };
        let r = &out[..n];
        assert_eq!(&r[..6], &PEER_MAC);
        let f = link::parse_ip(r).expect("a valid IPv6 header");
        assert_eq!(f.ip.src(), IpAddr::V6(IP6));
        assert_eq!(f.ip.dst(), IpAddr::V6(PEER6));
        assert_eq!(f.protocol, ICMPV6);
        let icmp = f.payload;
        assert_eq!(&icmp[..2], &[ICMPV6_ECHO_REPLY, 0]);
        assert!(
            icmpv6_checksum_ok(icmp, IP6, PEER6),
            "its checksum verifies"
        );
        assert_eq!(&icmp[4..8], &[0x12, 0x34, 0, 7]);
        assert_eq!(&icmp[8..], &data[..]);
        assert_eq!(i.stats().echo_replies, 1);
    }

    /// RFC 4443 §4.2: "An Echo Reply SHOULD be sent in response to an Echo Request message
    /// sent to an IPv6 multicast or anycast address. In this case, the source address of the
    /// reply MUST be a unicast address belonging to the interface on which the Echo Request
    /// message was received." `ping ff02::1%eth0` is how an operator finds the nodes on a
    /// link: all-nodes and our solicited-node group are answered from our address; a group we
    /// are not in (all-routers), a multicast source, or the wrong group MAC is not.
    #[test]
    fn an_echo_request_to_our_multicast_groups_is_answered_from_our_address_rfc4443_4_2() {
        let all_nodes = ALL_NODES;
        let o = IP6.octets();
        let data: Vec<u8> = (0..100).map(|k| k as u8).collect();
        // The groups and their MACs written out, not derived by the helpers under test.
        for (group, mac) in [
            (all_nodes, [0x33, 0x33, 0, 0, 0, 1]),
            (
                Ipv6Addr::from([
                    0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, o[13], o[14], o[15],
                ]),
                [0x33, 0x33, 0xff, o[13], o[14], o[15]],
            ),
        ] {
            let mut i = iface();
            let mut out = vec![0u8; 2048];
            let Rx::Reply(n) = i.receive(&ping6(group, mac, &data), &mut out) else {
                panic!("{group}: not answered")
            };
            let r = &out[..n];
            assert_eq!(&r[..6], &PEER_MAC);
            let f = link::parse_ip(r).expect("a valid IPv6 header");
            assert_eq!(f.ip.src(), IpAddr::V6(IP6), "from our unicast address");
            assert_eq!(f.ip.dst(), IpAddr::V6(PEER6));
            let icmp = f.payload;
            assert_eq!(&icmp[..2], &[ICMPV6_ECHO_REPLY, 0]);
            assert!(
                icmpv6_checksum_ok(icmp, IP6, PEER6),
                "its checksum verifies"
            );
            assert_eq!(&icmp[8..], &data[..]);
            assert_eq!(i.stats().echo_replies, 1);
        }
        let mut i = iface();
        let mut out = vec![0u8; 2048];
        let all_routers = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);
        assert_eq!(
            i.receive(
                &ping6(all_routers, [0x33, 0x33, 0, 0, 0, 2], b"x"),
                &mut out
            ),
            Rx::Dropped(Drop::OtherAddress),
            "not a group of ours"
        );
        assert_eq!(
            i.receive(&ping6(all_nodes, [0x33, 0x33, 0, 0, 0, 2], b"x"), &mut out),
            Rx::Dropped(Drop::OtherMac),
            "the group's own MAC"
        );
        let mut bad = ping6(all_nodes, [0x33, 0x33, 0, 0, 0, 1], b"0123");
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert_eq!(i.receive(&bad, &mut out), Rx::Dropped(Drop::Malformed));
        assert_eq!(i.stats().echo_replies, 0);
    }

    /// (Review) The unicast path refuses an IPv4-mapped source (RFC 4291 §2.5.5.2:
    /// never on the wire; `unicast_to_us`: `Drop::OtherAddress`). A request to all-nodes from
    /// one must be refused too, not answered from our address to `::ffff:192.0.2.1`.
    #[test]
    fn an_echo_request_to_all_nodes_from_a_mapped_source_is_not_answered_rfc4291_2_5_5_2() {
        let all_nodes = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
        let forged = Ipv6Addr::from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1]);
        let ping = |dst: Ipv6Addr, dst_mac: [u8; 6]| {
            let mut f = Vec::new();
            PacketBuilder::ethernet2(PEER_MAC, dst_mac)
                .ipv6(forged.octets(), dst.octets(), 64)
                .icmpv6_echo_request(0x1234, 7)
                .write(&mut f, b"x")
                .unwrap();
            f
        };
        let mut i = iface();
        let mut out = vec![0u8; 2048];
        let (u, g) = (ping(IP6, MAC), ping(all_nodes, [0x33, 0x33, 0, 0, 0, 1]));
        let unicast = i.receive(&u, &mut out);
        assert!(matches!(unicast, Rx::Dropped(_)), "unicast: {unicast:?}");
        let group = i.receive(&g, &mut out);
        assert!(matches!(group, Rx::Dropped(_)), "all-nodes: {group:?}");
        assert_eq!(i.stats().echo_replies, 0);
    }

    /// What the echo server does not answer, each counted: a request whose ICMP checksum fails
    /// (RFC 4443 §2.3 and RFC 1122 §3.2.2: discarded), one to a broadcast MAC or another
    /// address (§3.2.2.6: a request to a broadcast or multicast address "MAY be silently
    /// discarded"), one from a source no host sends from (§3.2.1.3), an Echo Reply (nothing
    /// to answer), and one whose reply would not fit the buffer (not truncated: the data must
    /// be whole).
    #[test]
    fn echo_requests_not_to_answer_are_dropped_and_counted_rfc1122_3_2_2_6() {
        let mut i = iface();
        let mut out = vec![0u8; 2048];
        let mut bad = ping4(IP4, MAC, b"0123456789");
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert_eq!(i.receive(&bad, &mut out), Rx::Dropped(Drop::Malformed));
        let mut bad6 = ping6(IP6, MAC, b"0123456789");
        let last = bad6.len() - 1;
        bad6[last] ^= 1;
        assert_eq!(i.receive(&bad6, &mut out), Rx::Dropped(Drop::Malformed));
        assert_eq!(
            i.receive(&ping4(IP4, BROADCAST, b"x"), &mut out),
            Rx::Dropped(Drop::OtherMac)
        );
        assert_eq!(
            i.receive(&ping4(Ipv4Addr::BROADCAST, BROADCAST, b"x"), &mut out),
            Rx::Dropped(Drop::OtherAddress)
        );
        assert_eq!(
            i.receive(&ping4(Ipv4Addr::new(198, 18, 0, 9), MAC, b"x"), &mut out),
            Rx::Dropped(Drop::OtherAddress)
        );
        let mut from_loopback = Vec::new();
        PacketBuilder::ethernet2(PEER_MAC, MAC)
            .ipv4([127, 0, 0, 1], IP4.octets(), 64)
            .icmpv4_echo_request(1, 1)
            .write(&mut from_loopback, b"x")
            .unwrap();
        assert_eq!(
            i.receive(&from_loopback, &mut out),
            Rx::Dropped(Drop::InvalidSource)
        );
        let mut reply = Vec::new();
        PacketBuilder::ethernet2(PEER_MAC, MAC)
            .ipv4(PEER4.octets(), IP4.octets(), 64)
            .icmpv4_echo_reply(1, 1)
            .write(&mut reply, b"x")
            .unwrap();
        assert_eq!(
            i.receive(&reply, &mut out),
            Rx::Dropped(Drop::OtherProtocol)
        );
        let mut small = [0u8; 128];
        assert_eq!(
            i.receive(&ping4(IP4, MAC, &[0u8; 200]), &mut small),
            Rx::Dropped(Drop::OtherProtocol)
        );
        assert_eq!(i.stats().echo_replies, 0);
        let s = i.stats();
        assert_eq!(
            (
                s.malformed,
                s.other_mac,
                s.other_address,
                s.invalid_source,
                s.other_protocol
            ),
            (2, 1, 2, 1, 2)
        );
        assert_eq!(s.frames(), 8);
    }

    /// Every frame that is not for us lands in one counter, and nothing is handed on.
    #[test]
    fn frames_not_for_us_are_counted_by_reason() {
        let mut i = iface();
        let mut out = [0u8; 128];
        let other_ip = Ipv4Addr::new(198, 18, 0, 9);
        assert_eq!(
            i.receive(&sctp4(IP4, [0x02, 9, 9, 9, 9, 9]), &mut out),
            Rx::Dropped(Drop::OtherMac)
        );
        assert_eq!(
            i.receive(&sctp4(other_ip, MAC), &mut out),
            Rx::Dropped(Drop::OtherAddress)
        );
        let mut udp = Vec::new();
        PacketBuilder::ethernet2(PEER_MAC, MAC)
            .ipv4(PEER4.octets(), IP4.octets(), 64)
            .udp(1, 2)
            .write(&mut udp, &[1, 2, 3])
            .unwrap();
        assert_eq!(i.receive(&udp, &mut out), Rx::Dropped(Drop::OtherProtocol));
        let mut bad = sctp4(IP4, MAC);
        bad[ETHERNET_HEADER_LEN + 10] ^= 0xff;
        assert_eq!(i.receive(&bad, &mut out), Rx::Dropped(Drop::BadIpChecksum));
        let mut vlan_other = sctp4(IP4, MAC);
        vlan_other[12..14].copy_from_slice(&0x88ccu16.to_be_bytes()); // LLDP
        assert_eq!(
            i.receive(&vlan_other, &mut out),
            Rx::Dropped(Drop::OtherEtherType)
        );
        assert_eq!(
            i.receive(&[1, 2, 3], &mut out),
            Rx::Dropped(Drop::Malformed)
        );
        let good = sctp4(IP4, MAC);
        let Rx::Sctp(f) = i.receive(&good, &mut out) else {
            panic!()
        };
        assert_eq!(f.sctp.len(), 28);
        // An SCTP packet is not taken at its word: its sender is learnt only once the
        // association has authenticated it (`confirm`).
        assert_eq!(i.neighbour(IpAddr::V4(PEER4)), None);
        // VLAN-tagged frames are not ours (no VLAN configured).
        let mut tagged = good[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x64]);
        tagged.extend_from_slice(&good[12..]);
        assert_eq!(i.receive(&tagged, &mut out), Rx::Dropped(Drop::Vlan));
        // An IPv4-mapped IPv6 source never appears on the wire.
        let mut mapped6 = Vec::new();
        PacketBuilder::ethernet2(PEER_MAC, MAC)
            .ipv6(
                Ipv4Addr::new(198, 18, 0, 2).to_ipv6_mapped().octets(),
                IP6.octets(),
                64,
            )
            .write(&mut mapped6, IpNumber(IP_PROTO_SCTP), &[0u8; 28])
            .unwrap();
        assert_eq!(
            i.receive(&mapped6, &mut out),
            Rx::Dropped(Drop::OtherAddress)
        );
        let s = i.stats();
        assert_eq!(
            (
                s.other_mac,
                s.other_address,
                s.other_protocol,
                s.bad_ip_checksum,
                s.other_ether_type,
                s.malformed,
                s.sctp,
                s.vlan
            ),
            (1, 2, 1, 1, 1, 1, 1, 1)
        );
    }

    /// IEEE 802.3 §3.2.3: a source address is always an individual one. A frame "from" a group
    /// (multicast or broadcast) MAC is forged, and an answer to it (an INIT ACK to the INIT's
    /// source MAC, an ARP reply, a Neighbor Advertisement) would go to every host of the
    /// segment: nothing from one is taken or answered.
    #[test]
    fn a_frame_from_an_ethernet_group_address_is_dropped_ieee802_3_3_2_3() {
        let mut i = iface();
        let mut out = [0u8; 128];
        for src_mac in [
            BROADCAST,
            [0x01, 0, 0x5e, 0, 0, 1],
            [0x33, 0x33, 0, 0, 0, 1],
        ] {
            let mut f = sctp4(IP4, MAC);
            f[6..12].copy_from_slice(&src_mac);
            assert_eq!(
                i.receive(&f, &mut out),
                Rx::Dropped(Drop::InvalidSource),
                "{src_mac:02x?}"
            );
            let mut arp = arp_frame(1, BROADCAST, PEER4, IP4);
            arp[6..12].copy_from_slice(&src_mac);
            assert_eq!(i.receive(&arp, &mut out), Rx::Dropped(Drop::InvalidSource));
        }
        assert_eq!(i.stats().invalid_source, 6);
        assert_eq!(i.stats().frames(), 6);
        assert_eq!(i.stats().arp_replies, 0);
    }

    /// RFC 1122 §3.2.1.3: a host MUST silently discard a datagram whose IP source address no
    /// host may send from: {0, <Host-number>} (this network), {-1, -1} (limited broadcast),
    /// {127, <any>} (loopback, never outside a host). RFC 4291 §2.5.2 and §2.5.3 say the same
    /// of IPv6's unspecified and loopback addresses. None reaches SCTP, whose answer would go
    /// to an address no peer has.
    #[test]
    fn an_ip_source_no_host_may_send_from_is_discarded_rfc1122_3_2_1_3() {
        let mut i = iface();
        let mut out = [0u8; 128];
        for src in [
            Ipv4Addr::UNSPECIFIED,
            Ipv4Addr::new(0, 18, 0, 2),
            Ipv4Addr::BROADCAST,
            Ipv4Addr::LOCALHOST,
            Ipv4Addr::new(127, 1, 2, 3),
            // RFC 6890 §2.2.2: 240.0.0.0/4 is Reserved, "Source: False".
            Ipv4Addr::new(240, 0, 0, 1),
            Ipv4Addr::new(250, 18, 0, 2),
        ] {
            let mut f = Vec::new();
            PacketBuilder::ethernet2(PEER_MAC, MAC)
                .ipv4(src.octets(), IP4.octets(), 64)
                .write(&mut f, IpNumber(IP_PROTO_SCTP), &[0u8; 28])
                .unwrap();
            assert_eq!(
                i.receive(&f, &mut out),
                Rx::Dropped(Drop::InvalidSource),
                "{src}"
            );
        }
        for src in [Ipv6Addr::UNSPECIFIED, Ipv6Addr::LOCALHOST] {
            let mut f = Vec::new();
            PacketBuilder::ethernet2(PEER_MAC, MAC)
                .ipv6(src.octets(), IP6.octets(), 64)
                .write(&mut f, IpNumber(IP_PROTO_SCTP), &[0u8; 28])
                .unwrap();
            assert_eq!(
                i.receive(&f, &mut out),
                Rx::Dropped(Drop::InvalidSource),
                "{src}"
            );
        }
        assert_eq!(i.stats().invalid_source, 9);
        assert!(matches!(i.receive(&sctp4(IP4, MAC), &mut out), Rx::Sctp(_)));
    }

    /// A packet whose source is our own address (the LAND forgery: Linux drops it as a
    /// martian source) is discarded like one from an address no host may use: SCTP, ICMP Echo
    /// and a Packet Too Big alike, for both families; none is answered.
    #[test]
    fn a_packet_from_our_own_address_is_discarded_as_a_land_forgery() {
        let mut i = iface();
        let mut out = [0u8; 256];
        for (src, dst) in [
            (IpAddr::V4(IP4), IpAddr::V4(IP4)),
            (IpAddr::V6(IP6), IpAddr::V6(IP6)),
        ] {
            let mut sctp = Vec::new();
            let b = PacketBuilder::ethernet2(PEER_MAC, MAC);
            let b = match (src, dst) {
                (IpAddr::V4(s), IpAddr::V4(d)) => b.ipv4(s.octets(), d.octets(), 64),
                (IpAddr::V6(s), IpAddr::V6(d)) => b.ipv6(s.octets(), d.octets(), 64),
                _ => unreachable!(),
            };
            b.write(&mut sctp, IpNumber(IP_PROTO_SCTP), &[0u8; 28])
                .unwrap();
            assert_eq!(
                i.receive(&sctp, &mut out),
                Rx::Dropped(Drop::InvalidSource),
                "{src}"
            );
        }
        let mut ping = Vec::new();
        PacketBuilder::ethernet2(PEER_MAC, MAC)
            .ipv4(IP4.octets(), IP4.octets(), 64)
            .icmpv4_echo_request(0x1234, 7)
            .write(&mut ping, b"land")
            .unwrap();
        assert_eq!(i.receive(&ping, &mut out), Rx::Dropped(Drop::InvalidSource));
        assert_eq!(i.stats().invalid_source, 3);
        assert_eq!(i.stats().echo_replies, 0);
        assert!(matches!(i.receive(&sctp4(IP4, MAC), &mut out), Rx::Sctp(_)));
    }

    /// SCTP packets leave in Ethernet + IPv4 (DF, TTL 64, correct header checksum) or IPv6,
    /// from our address to the neighbour's MAC, and parse back to the same SCTP bytes.
    #[test]
    fn sctp_packets_are_framed_for_both_families() {
        let mut i = iface();
        let sctp: Vec<u8> = (0..40u8).collect();
        for (dst, mac) in [(IpAddr::V4(PEER4), PEER_MAC), (IpAddr::V6(PEER6), PEER_MAC)] {
            let mut out = vec![0u8; 256];
            let h = Interface::header_len(dst);
            out[h..h + sctp.len()].copy_from_slice(&sctp);
            assert!(
                i.frame_sctp(T0, dst, sctp.len(), &mut out).is_err(),
                "unknown yet"
            );
            i.learn_static(dst, mac);
            out[h..h + sctp.len()].copy_from_slice(&sctp);
            let n = i.frame_sctp(T0, dst, sctp.len(), &mut out).unwrap();
            let f = link::parse_sctp(&out[..n]).unwrap();
            assert_eq!(f.sctp, &sctp[..]);
            assert_eq!((f.dst_mac, f.src_mac), (mac, MAC));
            assert_eq!(f.ip.dst(), dst);
            assert!(i.is_ours(f.ip.src()));
            if let IpInfo::V4 {
                dont_fragment, ttl, ..
            } = f.ip
            {
                assert!(dont_fragment && ttl == 64);
            }
        }
        assert_eq!(i.stats().solicitations, 2);
    }

    use crate::wire::link::IpInfo;

    /// An unknown neighbour gets an ARP request (IPv4) or a Neighbor Solicitation to its
    /// solicited-node group (IPv6, RFC 4861 §7.2.2) instead of the packet; another
    /// `Interface` answers it, and the answer teaches the first one the MAC.
    #[test]
    fn unresolved_neighbours_are_solicited_and_learnt() {
        let mut a = iface();
        let mut b = Interface::new(PEER_MAC, Some(PEER4), Some(PEER6));
        for dst in [IpAddr::V4(PEER4), IpAddr::V6(PEER6)] {
            let mut out = vec![0u8; 256];
            let Err(Unresolved { solicitation }) = a.frame_sctp(T0, dst, 10, &mut out) else {
                panic!()
            };
            let mut reply = vec![0u8; 256];
            let Rx::Reply(n) = b.receive(&out[..solicitation], &mut reply) else {
                panic!("{dst}: not answered: {:?}", b.stats())
            };
            // The solicitor is learnt from its solicitation.
            assert_eq!(
                b.neighbour(if dst.is_ipv4() {
                    IpAddr::V4(IP4)
                } else {
                    IpAddr::V6(IP6)
                }),
                Some(MAC)
            );
            let mut sink = vec![0u8; 256];
            assert_eq!(a.receive(&reply[..n], &mut sink), Rx::Consumed);
            assert_eq!(a.neighbour(dst), Some(PEER_MAC), "{dst}");
            assert!(a.frame_sctp(T0, dst, 10, &mut out).is_ok());
        }
        assert_eq!((b.stats().arp_replies, b.stats().nd_adverts), (1, 1));
    }

    /// RFC 4861 §7.2.4: the advertisement answers the solicitor, is solicited and override,
    /// hop limit 255, carries our link-layer address, and its ICMPv6 checksum verifies
    /// (checked by etherparse, independently of how we wrote it). §7.1.1: a solicitation with
    /// another hop limit is not valid and is not answered.
    /// RFC 4291 §2.5.3: "An IPv6 packet with a destination address of loopback must never be
    /// sent outside of a single node", and §2.5.5.2: IPv4-mapped addresses never appear on the
    /// wire. A Neighbor Solicitation "from" `::1` (or `::ffff:a.b.c.d`) for our address was
    /// answered with a Neighbor Advertisement to `::1` on the link, and the source learnt as
    /// a neighbour; SCTP and ICMP drop these sources (`unicast_to_us`), ND did not. Found by
    /// an independent review of the host layer (session 62).
    #[test]
    fn a_neighbor_solicitation_from_loopback_or_a_mapped_address_is_not_answered_rfc4291_2_5_3() {
        let mut a = iface();
        let mut out = vec![0u8; 256];
        let mapped = Ipv4Addr::new(198, 18, 0, 2).to_ipv6_mapped();
        for src in [Ipv6Addr::LOCALHOST, mapped] {
            let mut b = Interface::new(PEER_MAC, None, Some(src));
            let mut ns = vec![0u8; 256];
            let n = b.solicit(IpAddr::V6(IP6), &mut ns);
            assert_eq!(
                a.receive(&ns[..n], &mut out),
                Rx::Dropped(Drop::InvalidSource),
                "a solicitation from {src} was not dropped"
            );
            assert_eq!(a.neighbour(IpAddr::V6(src)), None, "{src} learnt");
        }
    }

    #[test]
    fn neighbor_solicitation_is_answered_rfc4861_7_2_4() {
        let mut a = iface();
        let mut b = Interface::new(PEER_MAC, Some(PEER4), Some(PEER6));
        let mut ns = vec![0u8; 256];
        let n = b.solicit(IpAddr::V6(IP6), &mut ns);
        let mut out = vec![0u8; 256];
        let Rx::Reply(m) = a.receive(&ns[..n], &mut out) else {
            panic!()
        };
        let p = SlicedPacket::from_ethernet(&out[..m]).unwrap();
        let Some(NetSlice::Ipv6(v6)) = &p.net else {
            panic!()
        };
        assert_eq!(v6.header().hop_limit(), 255);
        assert_eq!(Ipv6Addr::from(v6.header().destination()), PEER6);
        let Some(TransportSlice::Icmpv6(icmp)) = &p.transport else {
            panic!()
        };
        assert_eq!(icmp.type_u8(), ND_ADVERT);
        let want = icmp
            .icmp_type()
            .calc_checksum(
                v6.header().source(),
                v6.header().destination(),
                icmp.payload(),
            )
            .unwrap();
        assert_eq!(icmp.checksum(), want, "ICMPv6 checksum");
        assert_eq!(icmp.bytes5to8()[0], 0x60, "solicited, override");
        assert_eq!(&icmp.payload()[..16], &IP6.octets());
        assert_eq!(&icmp.payload()[18..24], &MAC);
        // The same solicitation with hop limit 64 is invalid.
        let mut bad = ns[..n].to_vec();
        bad[ETHERNET_HEADER_LEN + 7] = 64;
        assert_eq!(a.receive(&bad, &mut out), Rx::Dropped(Drop::NdNotForUs));
        assert_eq!(a.neighbour(IpAddr::V6(PEER6)), Some(PEER_MAC));
    }

    /// RFC 4861 §7.1.1: "If the IP source address is the unspecified address, the IP
    /// destination address is a solicited-node multicast address." A duplicate address
    /// detection probe for our address sent to the group is answered (to all nodes, RFC 4862
    /// §5.4.3); one sent to any other address is not valid and is silently discarded.
    #[test]
    fn an_unspecified_source_solicits_only_through_the_solicited_node_group_rfc4861_7_1_1() {
        let t = IP6.octets();
        let group = Ipv6Addr::from([
            0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, t[13], t[14], t[15],
        ]);
        let all_nodes = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
        let ns = |dst: Ipv6Addr, dst_mac: [u8; 6]| {
            let mut f = vec![0u8; ETHERNET_HEADER_LEN + IPV6_HEADER_LEN + 24];
            ethernet(&mut f, dst_mac, PEER_MAC, ETHERTYPE_IPV6);
            let src = Ipv6Addr::UNSPECIFIED;
            ipv6_header(
                &mut f[ETHERNET_HEADER_LEN..],
                src,
                dst,
                ICMPV6,
                24,
                ND_HOP_LIMIT,
            );
            let icmp = &mut f[ETHERNET_HEADER_LEN + IPV6_HEADER_LEN..];
            write_icmpv6(icmp, ND_SOLICIT, [0; 4], &IP6.octets(), src, dst);
            f
        };
        let mut i = iface();
        let mut out = [0u8; 128];
        let to_group = ns(group, [0x33, 0x33, 0xff, t[13], t[14], t[15]]);
        let Rx::Reply(n) = i.receive(&to_group, &mut out) else {
            panic!("the probe to the group is answered")
        };
        assert_eq!(
            &out[ETHERNET_HEADER_LEN + 24..ETHERNET_HEADER_LEN + 40],
            &all_nodes.octets()
        );
        assert!(n > 0);
        for (dst, dst_mac) in [(IP6, MAC), (all_nodes, [0x33, 0x33, 0, 0, 0, 1])] {
            assert_eq!(
                i.receive(&ns(dst, dst_mac), &mut out),
                Rx::Dropped(Drop::NdNotForUs),
                "to {dst}"
            );
        }
        assert_eq!((i.stats().nd_adverts, i.stats().nd_not_for_us), (1, 2));
    }

    /// The table is fixed: beyond its size the least recently confirmed dynamic entry makes
    /// room, static entries stay, and a peer that keeps confirming stays.
    #[test]
    fn neighbour_table_is_bounded_and_keeps_what_is_used() {
        let mut i = iface();
        i.learn_static(IpAddr::V4(PEER4), PEER_MAC);
        let live = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 7));
        for k in 0..(NEIGHBOURS as u32 * 3) {
            i.confirm(
                IpAddr::V4(Ipv4Addr::from(0xc612_1000 + k)),
                [2, 0, 0, 0, 0, 1],
            );
            i.confirm(live, [2, 0, 0, 0, 0, 7]);
        }
        assert_eq!(i.used, NEIGHBOURS);
        assert!(i
            .neighbour(IpAddr::V4(Ipv4Addr::from(0xc612_1000)))
            .is_none());
        assert_eq!(
            i.neighbour(IpAddr::V4(PEER4)),
            Some(PEER_MAC),
            "static stays"
        );
        assert_eq!(
            i.neighbour(live),
            Some([2, 0, 0, 0, 0, 7]),
            "the live peer stays"
        );
        // A static entry is not replaced by what is learnt.
        i.confirm(IpAddr::V4(PEER4), [2, 9, 9, 9, 9, 9]);
        assert_eq!(i.neighbour(IpAddr::V4(PEER4)), Some(PEER_MAC));
        // Multicast and broadcast are never learnt.
        let mut j = iface();
        j.confirm(IpAddr::V4(PEER4), BROADCAST);
        j.confirm(IpAddr::V4(Ipv4Addr::BROADCAST), PEER_MAC);
        assert_eq!(j.used, 0);
    }

    /// RFC 1122 §2.3.2.1: at most one solicitation per destination per second.
    #[test]
    fn solicitations_are_rate_limited_rfc1122_2_3_2_1() {
        let mut i = iface();
        let mut out = vec![0u8; 256];
        let dst = IpAddr::V4(PEER4);
        let sizes: Vec<usize> = (0..5)
            .map(|k| {
                let now = T0 + Duration::from_millis(100 * k);
                i.frame_sctp(now, dst, 10, &mut out)
                    .unwrap_err()
                    .solicitation
            })
            .collect();
        assert_eq!(
            sizes,
            [60, 0, 0, 0, 0],
            "one ARP request, padded to 60 bytes"
        );
        let again = i.frame_sctp(T0 + Duration::from_millis(1000), dst, 10, &mut out);
        assert_eq!(again, Err(Unresolved { solicitation: 60 }));
        assert_eq!(i.stats().solicitations, 2);
    }

    /// (An independent review, session 55.) the commit drops frames whose Ethernet source is a group address
    /// because "an ARP reply or a Neighbor Advertisement [goes] to the asker's" MAC and one
    /// forged frame would make us send to every host on the segment. But the ARP reply goes
    /// to the ARP Sender Hardware Address, and the advertisement to the solicitation's Source
    /// Link-Layer Address option, neither of which is checked: a frame from an individual
    /// MAC naming the broadcast address there is still answered to every host (IEEE 802.3
    /// §3.2.3: a sender's address is an individual one).
    #[test]
    fn arp_and_nd_answers_never_go_to_a_group_address_ieee802_3_3_2_3() {
        let mut i = iface();
        let mut out = vec![0u8; 256];
        // An ARP request from PEER_MAC (individual) whose Sender Hardware Address is broadcast.
        let mut arp = arp_frame(1, BROADCAST, PEER4, IP4);
        arp[ETHERNET_HEADER_LEN + 8..ETHERNET_HEADER_LEN + 14].copy_from_slice(&BROADCAST);
        if let Rx::Reply(n) = i.receive(&arp, &mut out) {
            assert_eq!(
                out[0] & 1,
                0,
                "ARP reply sent to group address {:02x?}",
                &out[..6.min(n)]
            );
        }
        // A Neighbor Solicitation from PEER_MAC whose Source Link-Layer Address option is a
        // multicast MAC (the option is inside the ICMPv6 checksum, the Ethernet source not).
        let group = [0x33, 0x33, 0, 0, 0, 1];
        let mut b = Interface::new(group, Some(PEER4), Some(PEER6));
        let mut ns = vec![0u8; 256];
        let n = b.solicit(IpAddr::V6(IP6), &mut ns);
        let mut ns = ns[..n].to_vec();
        ns[6..12].copy_from_slice(&PEER_MAC);
        if let Rx::Reply(m) = i.receive(&ns, &mut out) {
            assert_eq!(
                out[0] & 1,
                0,
                "Neighbor Advertisement sent to group address {:02x?}",
                &out[..6.min(m)]
            );
        }
    }

    /// (An independent review, session 55.) RFC 1122 §3.2.2.6: "If a Source Route option is received in an ICMP
    /// Echo Request, the return route MUST be reversed and used as a Source Route option for
    /// the Echo Reply message" (and §3.2.1.8: a completed source route is passed up for the
    /// reply). An Echo Request with a completed Loose Source Route is answered with a reply
    /// carrying no source route at all. (Either fix passes: the reversed route in the reply,
    /// or the request discarded.)
    #[test]
    fn a_source_routed_echo_request_is_not_answered_without_its_route_rfc1122_3_2_2_6() {
        let mut i = iface();
        let mut out = vec![0u8; 2048];
        let gw = Ipv4Addr::new(192, 0, 2, 1);
        // LSRR (131), length 7, pointer 8 (past the one address: completed), then End of list.
        let mut opts = vec![131u8, 7, 8];
        opts.extend_from_slice(&gw.octets());
        opts.push(0);
        let f = echo_request_with_options(&opts);
        match i.receive(&f, &mut out) {
            Rx::Reply(n) => {
                let ip = &out[ETHERNET_HEADER_LEN..n];
                let ihl = usize::from(ip[0] & 0x0f) * 4;
                let has_route = ip[20..ihl].iter().any(|&b| b == 131 || b == 137);
                assert!(
                    has_route,
                    "the Echo Reply carries no (reversed) source route: header {:02x?}",
                    &ip[..ihl]
                );
            }
            // Discarding a source-routed request (as a host that ignores source routes
            // does) is no reply without the route either.
            Rx::Dropped(_) => {}
            other => panic!("{other:?}"),
        }
    }

    /// An ICMP Echo Request from the peer to us whose IPv4 header carries `opts` (whole
    /// words), with the four data bytes "abcd".
    fn echo_request_with_options(opts: &[u8]) -> Vec<u8> {
        assert!(opts.len().is_multiple_of(4));
        let ihl = (20 + opts.len()) / 4;
        let icmp_len = 8 + 4;
        let mut f = vec![0u8; ETHERNET_HEADER_LEN];
        ethernet(&mut f, MAC, PEER_MAC, ETHERTYPE_IPV4);
        let mut h = vec![0u8; ihl * 4];
        h[0] = 0x40 | ihl as u8;
        h[2..4].copy_from_slice(&((ihl * 4 + icmp_len) as u16).to_be_bytes());
        h[8] = 64;
        h[9] = IP_PROTO_ICMP;
        h[12..16].copy_from_slice(&PEER4.octets());
        h[16..20].copy_from_slice(&IP4.octets());
        h[20..].copy_from_slice(opts);
        let sum = internet_checksum(&h);
        h[10..12].copy_from_slice(&sum.to_be_bytes());
        f.extend_from_slice(&h);
        let mut icmp = vec![ICMP_ECHO, 0, 0, 0, 0x12, 0x34, 0, 7, b'a', b'b', b'c', b'd'];
        let sum = internet_checksum(&icmp);
        icmp[2..4].copy_from_slice(&sum.to_be_bytes());
        f.extend_from_slice(&icmp);
        f
    }

    /// The reply to `f`: its IPv4 header's options, after checking the header's checksum and
    /// that the Echo Reply behind it carries the request's identifier, sequence and data.
    fn echo_reply_options_of(i: &mut Interface, f: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; 2048];
        let Rx::Reply(n) = i.receive(f, &mut out) else {
            panic!("the request is answered");
        };
        let ip = &out[ETHERNET_HEADER_LEN..n];
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        assert_eq!(ip[0] >> 4, 4);
        assert_eq!(
            usize::from(u16::from_be_bytes([ip[2], ip[3]])),
            ip.len(),
            "total length"
        );
        assert_eq!(
            internet_checksum(&ip[..ihl]),
            0,
            "the header checksum covers the options"
        );
        assert_eq!(&ip[12..20], &[IP4.octets(), PEER4.octets()].concat()[..]);
        let icmp = &ip[ihl..];
        assert_eq!(icmp[0], ICMP_ECHO_REPLY);
        assert_eq!(&icmp[4..], &[0x12, 0x34, 0, 7, b'a', b'b', b'c', b'd']);
        assert_eq!(internet_checksum(icmp), 0);
        ip[20..ihl].to_vec()
    }

    /// RFC 1122 §3.2.2.6: "If a Record Route and/or Time Stamp option is received in an ICMP
    /// Echo Request, this option (these options) SHOULD be updated to include the current
    /// host and included in the IP header of the Echo Reply message, without truncation".
    /// Record Route (RFC 791 §3.1): our address enters at the pointer, which moves on by 4; a
    /// full route comes back as it was; a pointer below 4 is an error, discarded. Options
    /// other than these two are not echoed.
    #[test]
    fn an_echo_requests_record_route_comes_back_with_this_host_rfc1122_3_2_2_6() {
        let mut i = iface();
        // `ping -R`: nine slots, the pinging host's own address in the first (pointer 8);
        // a NOP before it, which is not echoed, and an End of Option List to fill the word.
        let mut rr = vec![1u8, 7, 39, 8];
        rr.extend_from_slice(&PEER4.octets());
        rr.resize(40, 0);
        let got = echo_reply_options_of(&mut i, &echo_request_with_options(&rr));
        let mut want = vec![7u8, 39, 12];
        want.extend_from_slice(&PEER4.octets());
        want.extend_from_slice(&IP4.octets());
        want.resize(40, 0);
        assert_eq!(
            got, want,
            "the route with this host entered, NOP dropped, padded"
        );

        // A full route (two slots, pointer past them) comes back untouched.
        let mut full = vec![7u8, 11, 12];
        full.extend_from_slice(&PEER4.octets());
        full.extend_from_slice(&Ipv4Addr::new(192, 0, 2, 9).octets());
        full.push(0);
        assert_eq!(
            echo_reply_options_of(&mut i, &echo_request_with_options(&full)),
            full
        );

        // A request without options has none in the reply (IHL 5).
        assert!(echo_reply_options_of(&mut i, &echo_request_with_options(&[])).is_empty());

        // Pointer 3 is below the first slot: discarded, counted, no reply.
        let mut out = vec![0u8; 2048];
        let bad = echo_request_with_options(&[7, 7, 3, 0, 0, 0, 0, 0]);
        assert!(matches!(
            i.receive(&bad, &mut out),
            Rx::Dropped(Drop::Malformed)
        ));
        assert_eq!(i.stats().echo_replies, 3);
    }

    /// RFC 1122 §3.2.2.6 with RFC 791 §3.1's Internet Timestamp: flag 0 enters a timestamp,
    /// flag 1 our address and a timestamp, flag 3 a timestamp only where the next prespecified
    /// address is ours; a full option has its overflow count raised by one, and a count that
    /// would overflow discards the request. The timestamp is milliseconds since midnight UT.
    #[test]
    fn an_echo_requests_timestamp_comes_back_with_this_host_rfc1122_3_2_2_6() {
        let mut i = iface();
        let ms = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let within = |ts: u32, before: u32, after: u32| {
            // The day may turn between the two readings.
            if before <= after {
                (before..=after).contains(&ts)
            } else {
                ts >= before || ts <= after
            }
        };

        // Flag 0, three slots, the first used (pointer 9).
        let opts = [68u8, 16, 9, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        let before = ms_since_midnight_ut();
        let got = echo_reply_options_of(&mut i, &echo_request_with_options(&opts));
        let after = ms_since_midnight_ut();
        assert_eq!(
            &got[..4],
            &[68, 16, 13, 0],
            "pointer past our entry, no overflow"
        );
        assert_eq!(ms(&got[4..]), 1, "the entry before ours is kept");
        assert!(
            within(ms(&got[8..]), before, after),
            "ours: {}",
            ms(&got[8..])
        );
        assert!(
            before < 86_400_000 && ms(&got[8..]) < 86_400_000,
            "a standard value"
        );
        assert_eq!(&got[12..], &[0, 0, 0, 0], "the next slot is left free");

        // Flag 1: address and timestamp.
        let opts = [68u8, 12, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        let before = ms_since_midnight_ut();
        let got = echo_reply_options_of(&mut i, &echo_request_with_options(&opts));
        let after = ms_since_midnight_ut();
        assert_eq!(&got[..4], &[68, 12, 13, 1]);
        assert_eq!(&got[4..8], &IP4.octets());
        assert!(within(ms(&got[8..]), before, after));

        // Flag 3: entered only at our prespecified address.
        let mut pre = vec![68u8, 20, 5, 3];
        pre.extend_from_slice(&IP4.octets());
        pre.extend_from_slice(&[0; 4]);
        pre.extend_from_slice(&PEER4.octets());
        pre.extend_from_slice(&[0; 4]);
        let got = echo_reply_options_of(&mut i, &echo_request_with_options(&pre));
        assert_eq!(got[2], 13, "ours was next: entered");
        assert_ne!(ms(&got[8..]), 0);
        let mut not_ours = pre.clone();
        not_ours[2] = 13;
        let got = echo_reply_options_of(&mut i, &echo_request_with_options(&not_ours));
        assert_eq!(got, not_ours, "the peer's address is next: nothing entered");

        // Full: the overflow count goes up by one, the entries are kept.
        let full = [68u8, 8, 9, 0x20, 0, 0, 0, 5];
        assert_eq!(
            echo_reply_options_of(&mut i, &echo_request_with_options(&full)),
            [68, 8, 9, 0x30, 0, 0, 0, 5]
        );
        let replies = i.stats().echo_replies;
        // The count at 15 cannot go up: the request is in error, discarded; so is a flag
        // RFC 791 does not define.
        let mut out = vec![0u8; 2048];
        for bad in [[68u8, 8, 9, 0xf0, 0, 0, 0, 5], [68, 8, 5, 2, 0, 0, 0, 0]] {
            let f = echo_request_with_options(&bad);
            assert!(matches!(
                i.receive(&f, &mut out),
                Rx::Dropped(Drop::Malformed)
            ));
        }
        assert_eq!(i.stats().echo_replies, replies);
    }

    /// (An independent review, session 55.) (a7647df, f592a10): the IPv6 Routing header with Segments Left is now discarded
    /// (we are not the final destination, RFC 8200 §4.4), but IPv4's equivalent is not: a
    /// Loose or Strict Source Route option whose pointer has not passed its last address says
    /// the destination field is only the next hop (RFC 791 §3.1; RFC 1122 §3.2.1.8(c): only a
    /// completed source route has "reached its final destination"; §3.3.5: a host forwards
    /// one only under a gateway's rules, which ddpdk does not implement). Such an SCTP packet
    /// is handed to SCTP and answered from this host.
    #[test]
    fn an_ipv4_source_route_still_to_run_is_not_for_us_rfc1122_3_2_1_8() {
        let mut i = iface();
        let mut out = vec![0u8; 2048];
        let next_hop = Ipv4Addr::new(192, 0, 2, 1);
        for kind in [131u8, 137] {
            // LSRR / SSRR, length 7, pointer 4: the address at 4 is still to visit.
            let mut opts = vec![kind, 7, 4];
            opts.extend_from_slice(&next_hop.octets());
            opts.push(0);
            let ihl = (20 + opts.len()) / 4;
            let sctp = [0u8; 28];
            let mut f = vec![0u8; ETHERNET_HEADER_LEN];
            ethernet(&mut f, MAC, PEER_MAC, ETHERTYPE_IPV4);
            let mut h = vec![0u8; ihl * 4];
            h[0] = 0x40 | ihl as u8;
            h[2..4].copy_from_slice(&((ihl * 4 + sctp.len()) as u16).to_be_bytes());
            h[8] = 64;
            h[9] = IP_PROTO_SCTP;
            h[12..16].copy_from_slice(&PEER4.octets());
            h[16..20].copy_from_slice(&IP4.octets());
            h[20..].copy_from_slice(&opts);
            let sum = internet_checksum(&h);
            h[10..12].copy_from_slice(&sum.to_be_bytes());
            f.extend_from_slice(&h);
            f.extend_from_slice(&sctp);
            let rx = i.receive(&f, &mut out);
            assert!(
                !matches!(rx, Rx::Sctp(_)),
                "option {kind}: a packet still on its source route reached SCTP"
            );
        }
    }

    /// The start of an SCTP packet we sent to the peer from `local`: IP header, common header
    /// with ports 5000 -> 6000 and `vtag`, then `chunk` (DF set, as `frame_sctp_to` writes).
    fn our_sctp(local: IpAddr, peer: IpAddr, vtag: u32, chunk: &[u8], ip_len: u16) -> Vec<u8> {
        let mut q = Vec::new();
        let mut sctp = Vec::new();
        sctp.extend_from_slice(&5000u16.to_be_bytes());
        sctp.extend_from_slice(&6000u16.to_be_bytes());
        sctp.extend_from_slice(&vtag.to_be_bytes());
        sctp.extend_from_slice(&[0; 4]);
        sctp.extend_from_slice(chunk);
        match (local, peer) {
            (IpAddr::V4(l), IpAddr::V4(p)) => {
                q.resize(IPV4_HEADER_LEN, 0);
                ipv4_header(
                    &mut q,
                    l,
                    p,
                    IP_PROTO_SCTP,
                    usize::from(ip_len) - 20,
                    1,
                    true,
                );
            }
            (IpAddr::V6(l), IpAddr::V6(p)) => {
                q.resize(IPV6_HEADER_LEN, 0);
                ipv6_header(&mut q, l, p, IP_PROTO_SCTP, usize::from(ip_len) - 40, 64);
            }
            _ => unreachable!(),
        }
        q.extend_from_slice(&sctp);
        q
    }

    /// An ICMP error from `router` to us quoting `quoted`: type/code and second word as given.
    fn icmp_error(
        router: IpAddr,
        to: IpAddr,
        ty: u8,
        code: u8,
        word: [u8; 4],
        quoted: &[u8],
    ) -> Vec<u8> {
        let mut f = Vec::new();
        let b = PacketBuilder::ethernet2(PEER_MAC, MAC);
        match (router, to) {
            (IpAddr::V4(r), IpAddr::V4(t)) => b
                .ipv4(r.octets(), t.octets(), 64)
                .icmpv4(etherparse::Icmpv4Type::Unknown {
                    type_u8: ty,
                    code_u8: code,
                    bytes5to8: word,
                })
                .write(&mut f, quoted)
                .unwrap(),
            (IpAddr::V6(r), IpAddr::V6(t)) => b
                .ipv6(r.octets(), t.octets(), 64)
                .icmpv6(Icmpv6Type::Unknown {
                    type_u8: ty,
                    code_u8: code,
                    bytes5to8: word,
                })
                .write(&mut f, quoted)
                .unwrap(),
            _ => unreachable!(),
        }
        f
    }

    const ROUTER4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 254);
    const ROUTER6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0xfe);

    /// RFC 1191 §4 and RFC 8201 §4 with RFC 9260 Appendix C ICMP5 and ICMP7: a Fragmentation
    /// Needed (type 3 code 4, Next-Hop MTU in the low 16 bits of the second word) or a Packet
    /// Too Big (type 2, MTU in the second word) from a router, quoting an SCTP packet we sent,
    /// is handed on with the addresses and ports that locate the association, the quoted
    /// verification tag, the reported MTU and the quoted length. A quoted INIT (tag 0) gives
    /// its Initiate Tag (ICMP6).
    #[test]
    fn a_too_big_quoting_our_sctp_packet_is_handed_on_rfc9260_appendix_c() {
        let mut i = iface();
        let mut out = vec![0u8; 2048];
        let q = our_sctp(
            IpAddr::V4(IP4),
            IpAddr::V4(PEER4),
            0xabcd_0123,
            &[0; 8],
            1500,
        );
        let f = icmp_error(
            IpAddr::V4(ROUTER4),
            IpAddr::V4(IP4),
            3,
            4,
            [0, 0, 0x05, 0x78],
            &q,
        );
        let want = TooBig {
            local: IpAddr::V4(IP4),
            peer: IpAddr::V4(PEER4),
            local_port: 5000,
            peer_port: 6000,
            vtag: 0xabcd_0123,
            init_tag: None,
            mtu: 1400,
            quoted_len: 1500,
        };
        assert_eq!(i.receive(&f, &mut out), Rx::TooBig(want));
        // RFC 792: only the IP header and 64 bits of the datagram need be quoted.
        let f = icmp_error(
            IpAddr::V4(ROUTER4),
            IpAddr::V4(IP4),
            3,
            4,
            [0, 0, 0, 0],
            &q[..28],
        );
        assert_eq!(
            i.receive(&f, &mut out),
            Rx::TooBig(TooBig { mtu: 0, ..want })
        );
        let q6 = our_sctp(
            IpAddr::V6(IP6),
            IpAddr::V6(PEER6),
            0,
            &[1, 0, 0, 20, 0xfe, 0xed, 0xbe, 0xef],
            1500,
        );
        let f = icmp_error(
            IpAddr::V6(ROUTER6),
            IpAddr::V6(IP6),
            2,
            0,
            1280u32.to_be_bytes(),
            &q6,
        );
        assert_eq!(
            i.receive(&f, &mut out),
            Rx::TooBig(TooBig {
                local: IpAddr::V6(IP6),
                peer: IpAddr::V6(PEER6),
                vtag: 0,
                init_tag: Some(0xfeed_beef),
                mtu: 1280,
                ..want
            })
        );
        assert_eq!(i.stats().icmp_too_big, 3);
        assert_eq!(i.stats().frames(), 3);
    }

    /// RFC 4301 §6.1.2 and §8.2: under ESP a router quotes the ESP packet (outer IP header,
    /// SPI, sequence number), not the SCTP packet inside it. The interface hands on the SPI
    /// and sequence number, with the quoted addresses and the MTU, for the IPsec port to map
    /// to one of our outbound SAs; a quote of ESP from another host's address, one too short
    /// to hold the SPI and sequence number, or a later fragment, is ignored and counted.
    #[test]
    fn a_too_big_quoting_our_esp_packet_is_handed_on_rfc4301_6_1_2() {
        let esp = |local: IpAddr, peer: IpAddr, flags: u16, esp: &[u8]| {
            let mut q = vec![0u8; IPV4_HEADER_LEN];
            let (IpAddr::V4(l), IpAddr::V4(p)) = (local, peer) else {
                unreachable!()
            };
            ipv4_header(&mut q, l, p, IP_PROTO_ESP, 1480, 1, true);
            q[6..8].copy_from_slice(&flags.to_be_bytes());
            q.extend_from_slice(esp);
            q
        };
        let spi_seq = [0x00, 0x00, 0x03, 0xe8, 0x00, 0x01, 0x02, 0x03];
        let mut i = iface();
        let mut out = vec![0u8; 2048];
        let q = esp(IpAddr::V4(IP4), IpAddr::V4(PEER4), 0x4000, &spi_seq);
        let frag_needed = |q: &[u8]| {
            icmp_error(
                IpAddr::V4(ROUTER4),
                IpAddr::V4(IP4),
                3,
                4,
                [0, 0, 0x05, 0x78],
                q,
            )
        };
        let want = EspTooBig {
            local: IpAddr::V4(IP4),
            peer: IpAddr::V4(PEER4),
            spi: 1000,
            seq: 0x0001_0203,
            mtu: 1400,
            quoted_len: 1500,
        };
        assert_eq!(i.receive(&frag_needed(&q), &mut out), Rx::EspTooBig(want));
        assert_eq!(want.path_mtu(), Some(1400));
        // IPv6: the Packet Too Big quotes the ESP header right after the IPv6 header.
        let mut q6 = vec![0u8; IPV6_HEADER_LEN];
        ipv6_header(&mut q6, IP6, PEER6, IP_PROTO_ESP, 1460, 64);
        q6.extend_from_slice(&spi_seq);
        let f = icmp_error(
            IpAddr::V6(ROUTER6),
            IpAddr::V6(IP6),
            2,
            0,
            1280u32.to_be_bytes(),
            &q6,
        );
        assert_eq!(
            i.receive(&f, &mut out),
            Rx::EspTooBig(EspTooBig {
                local: IpAddr::V6(IP6),
                peer: IpAddr::V6(PEER6),
                mtu: 1280,
                ..want
            })
        );
        assert_eq!(i.stats().icmp_too_big, 2);
        // Not from our address; the sequence number cut off; a later fragment.
        let other = Ipv4Addr::new(198, 18, 0, 77);
        for q in [
            esp(IpAddr::V4(other), IpAddr::V4(PEER4), 0x4000, &spi_seq),
            esp(IpAddr::V4(IP4), IpAddr::V4(PEER4), 0x4000, &spi_seq[..7]),
            esp(IpAddr::V4(IP4), IpAddr::V4(PEER4), 0x2000 | 185, &spi_seq),
        ] {
            assert_eq!(
                i.receive(&frag_needed(&q), &mut out),
                Rx::Dropped(Drop::IcmpIgnored)
            );
        }
        assert_eq!((i.stats().icmp_too_big, i.stats().icmp_ignored), (2, 3));
    }

    /// RFC 4301 §6.1.2 and §7.3 (review): the IPsec port now sends a sealed IPv6 ESP packet
    /// above its SA's path MTU as IPv6 fragments (`ipv6_fragments`). When the path shrinks
    /// further, the router's Packet Too Big quotes the first of them: the IPv6 header, a
    /// Fragment header (offset 0, Next Header ESP), then the SPI and sequence number.
    /// `quoted_sctp` walks such a Fragment header for exactly this reason; `quoted_esp` must
    /// too, or the SA never learns the smaller MTU from its fragmented packets.
    #[test]
    fn a_too_big_quoting_our_first_esp_fragment_is_handed_on_rfc4301_6_1_2() {
        let spi_seq = [0x00, 0x00, 0x03, 0xe8, 0x00, 0x01, 0x02, 0x03];
        let mut i = iface();
        let mut out = vec![0u8; 2048];
        let mut q6 = vec![0u8; IPV6_HEADER_LEN];
        ipv6_header(&mut q6, IP6, PEER6, IPV6_FRAGMENT, 1352, 64);
        // Fragment header: Next Header ESP, offset 0 with M set, an Identification.
        q6.extend_from_slice(&[IP_PROTO_ESP, 0, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef]);
        q6.extend_from_slice(&spi_seq);
        let f = icmp_error(
            IpAddr::V6(ROUTER6),
            IpAddr::V6(IP6),
            2,
            0,
            1300u32.to_be_bytes(),
            &q6,
        );
        assert_eq!(
            i.receive(&f, &mut out),
            Rx::EspTooBig(EspTooBig {
                local: IpAddr::V6(IP6),
                peer: IpAddr::V6(PEER6),
                spi: 1000,
                seq: 0x0001_0203,
                mtu: 1300,
                quoted_len: 1392,
            })
        );
        // A later fragment quotes ciphertext, not the ESP header: ignored.
        let mut later = q6.clone();
        later[IPV6_HEADER_LEN + 2..IPV6_HEADER_LEN + 4].copy_from_slice(&[0x00, 0xa8]);
        let f = icmp_error(
            IpAddr::V6(ROUTER6),
            IpAddr::V6(IP6),
            2,
            0,
            1300u32.to_be_bytes(),
            &later,
        );
        assert_eq!(i.receive(&f, &mut out), Rx::Dropped(Drop::IcmpIgnored));
    }

    /// RFC 9260 Appendix C ICMP5-ICMP6 (the quote must hold the SCTP common header of a packet
    /// we sent) and RFC 4443 §2.3 (a checksum that fails is discarded), RFC 1122 §3.2.1.3 (no
    /// host sends from 127/8): what is not handed on, each counted.
    #[test]
    fn a_too_big_quoting_too_little_or_not_ours_is_ignored_rfc9260_appendix_c() {
        let mut i = iface();
        let mut out = vec![0u8; 2048];
        let (r4, us4) = (IpAddr::V4(ROUTER4), IpAddr::V4(IP4));
        let q = our_sctp(us4, IpAddr::V4(PEER4), 7, &[0; 8], 1500);
        // Too little quoted: the verification tag cut off.
        let short = icmp_error(r4, us4, 3, 4, [0, 0, 5, 0x78], &q[..27]);
        // Not SCTP.
        let mut udp = q.clone();
        udp[9] = 17;
        udp[10..12].fill(0);
        let sum = internet_checksum(&udp[..20]);
        udp[10..12].copy_from_slice(&sum.to_be_bytes());
        let udp = icmp_error(r4, us4, 3, 4, [0, 0, 5, 0x78], &udp);
        // A packet we did not send (its source is the peer's).
        let theirs = our_sctp(IpAddr::V4(PEER4), us4, 7, &[0; 8], 1500);
        let theirs = icmp_error(r4, us4, 3, 4, [0, 0, 5, 0x78], &theirs);
        // A bad ICMP checksum.
        let mut bad = icmp_error(r4, us4, 3, 4, [0, 0, 5, 0x78], &q);
        let last = bad.len() - 1;
        bad[last] ^= 1;
        // The same for IPv6: a quote without the verification tag.
        let q6 = our_sctp(IpAddr::V6(IP6), IpAddr::V6(PEER6), 7, &[], 1500);
        let short6 = icmp_error(
            IpAddr::V6(ROUTER6),
            IpAddr::V6(IP6),
            2,
            0,
            1280u32.to_be_bytes(),
            &q6[..46],
        );
        for f in [&short, &udp, &theirs, &bad, &short6] {
            assert_eq!(i.receive(f, &mut out), Rx::Dropped(Drop::IcmpIgnored));
        }
        // From a source no host may use.
        let lo = icmp_error(
            IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
            us4,
            3,
            4,
            [0, 0, 5, 0x78],
            &q,
        );
        assert_eq!(i.receive(&lo, &mut out), Rx::Dropped(Drop::InvalidSource));
        // Another Destination Unreachable (port unreachable, Appendix C ICMP3): not ours to
        // take, as before.
        let port = icmp_error(r4, us4, 3, 3, [0; 4], &q);
        assert_eq!(i.receive(&port, &mut out), Rx::Dropped(Drop::OtherProtocol));
        let s = i.stats();
        assert_eq!(
            (s.icmp_ignored, s.invalid_source, s.icmp_too_big),
            (5, 1, 0)
        );
        assert_eq!(s.frames(), 7);
    }

    /// RFC 9260 Appendix C ICMP8 (found by an independent review, session 62): an ICMP
    /// Protocol Unreachable (type 3 code 2) or an ICMPv6 Parameter Problem "unrecognized Next
    /// Header type encountered" (type 4 code 1, RFC 4443 §3.4) quoting an SCTP packet we sent
    /// is handed on for the association to treat as an ABORT; they were dropped as
    /// `other_protocol`. ICMPv6's pointer must fall on the Next Header that says SCTP; a quote
    /// of a packet we did not send is ignored, as for a Packet Too Big.
    #[test]
    fn a_protocol_unreachable_quoting_our_sctp_is_handed_on_rfc9260_appendix_c_icmp8() {
        let mut i = iface();
        let mut out = vec![0u8; 2048];
        let (r4, us4, peer4) = (IpAddr::V4(PEER4), IpAddr::V4(IP4), IpAddr::V4(PEER4));
        let (r6, us6, peer6) = (IpAddr::V6(PEER6), IpAddr::V6(IP6), IpAddr::V6(PEER6));
        let q4 = our_sctp(us4, peer4, 0x1234, &[4, 0, 0, 8, 0, 1, 0, 4], 48);
        let q6 = our_sctp(us6, peer6, 0x1234, &[4, 0, 0, 8, 0, 1, 0, 4], 68);
        let want = |local, peer| TooBig {
            local,
            peer,
            local_port: 5000,
            peer_port: 6000,
            vtag: 0x1234,
            init_tag: None,
            mtu: 0,
            quoted_len: 0,
        };
        let got = |rx: Rx<'_>| match rx {
            Rx::ProtocolUnreachable(t) => Some(TooBig { quoted_len: 0, ..t }),
            _ => None,
        };
        let f = icmp_error(r4, us4, 3, 2, [0; 4], &q4);
        assert_eq!(got(i.receive(&f, &mut out)), Some(want(us4, peer4)));
        // The pointer: octet 6 of the quoted IPv6 header, its Next Header (132).
        let f = icmp_error(r6, us6, 4, 1, 6u32.to_be_bytes(), &q6);
        assert_eq!(got(i.receive(&f, &mut out)), Some(want(us6, peer6)));
        // A pointer on anything but a Next Header naming SCTP; a packet we did not send.
        let f = icmp_error(r6, us6, 4, 1, 7u32.to_be_bytes(), &q6);
        assert_eq!(i.receive(&f, &mut out), Rx::Dropped(Drop::IcmpIgnored));
        let theirs = our_sctp(peer4, us4, 0x1234, &[], 40);
        let f = icmp_error(r4, us4, 3, 2, [0; 4], &theirs);
        assert_eq!(i.receive(&f, &mut out), Rx::Dropped(Drop::IcmpIgnored));
        let s = i.stats();
        assert_eq!((s.icmp_protocol_unreachable, s.icmp_ignored), (2, 2));
        assert_eq!(s.frames(), 4);
    }

    /// An SCTP packet of `len` bytes from the peer to us, cut into IPv4 fragments of at most
    /// `chunk` payload bytes (a multiple of 8), as a router on a smaller hop cuts a packet
    /// sent without DF.
    fn fragments4(payload: &[u8], chunk: usize, id: u16) -> Vec<Vec<u8>> {
        payload
            .chunks(chunk)
            .enumerate()
            .map(|(k, part)| {
                let mut f = vec![0u8; ETHERNET_HEADER_LEN + IPV4_HEADER_LEN];
                ethernet(&mut f, MAC, PEER_MAC, ETHERTYPE_IPV4);
                ipv4_header(
                    &mut f[ETHERNET_HEADER_LEN..],
                    PEER4,
                    IP4,
                    IP_PROTO_SCTP,
                    part.len(),
                    id,
                    false,
                );
                let more = (k + 1) * chunk < payload.len();
                let flags = ((k * chunk / 8) as u16) | if more { 0x2000 } else { 0 };
                f[ETHERNET_HEADER_LEN + 6..ETHERNET_HEADER_LEN + 8]
                    .copy_from_slice(&flags.to_be_bytes());
                f[ETHERNET_HEADER_LEN + 10..ETHERNET_HEADER_LEN + 12].fill(0);
                let sum = internet_checksum(&f[ETHERNET_HEADER_LEN..ETHERNET_HEADER_LEN + 20]);
                f[ETHERNET_HEADER_LEN + 10..ETHERNET_HEADER_LEN + 12]
                    .copy_from_slice(&sum.to_be_bytes());
                f.extend_from_slice(part);
                f
            })
            .collect()
    }

    /// RFC 4301 §5.2 and RFC 4303 §3.4.1: ESP is opened once reassembled. A peer whose path
    /// MTU fell with ESP packets in flight sends them fragmented (RFC 9260 §7.3 under ESP):
    /// with `reassemble_esp` on (a port that opens ESP) the fragments give the whole ESP
    /// datagram, protocol 50, for the port to open; off, they are dropped as before. A
    /// fragment of ESP never completes an SCTP datagram of the same identification (RFC 791
    /// §3.2: the protocol is part of the key).
    #[test]
    fn ipv4_fragments_of_esp_are_reassembled_for_the_port_rfc4303_3_4_1() {
        let esp_fragments = |payload: &[u8], id: u16| {
            let mut frags = fragments4(payload, 680, id);
            for f in &mut frags {
                let h = ETHERNET_HEADER_LEN;
                f[h + 9] = IP_PROTO_ESP;
                f[h + 10..h + 12].fill(0);
                let sum = internet_checksum(&f[h..h + IPV4_HEADER_LEN]);
                f[h + 10..h + 12].copy_from_slice(&sum.to_be_bytes());
            }
            frags
        };
        let esp: Vec<u8> = (0..1480u32).map(|k| (k * 11) as u8).collect();
        let mut out = vec![0u8; 9216];
        let mut off = iface();
        for f in esp_fragments(&esp, 5) {
            assert_eq!(off.receive(&f, &mut out), Rx::Dropped(Drop::Fragment));
        }
        let mut i = iface();
        i.reassemble_esp(true);
        let frags = esp_fragments(&esp, 5);
        assert_eq!(i.receive(&frags[2], &mut out), Rx::Fragment(None));
        assert_eq!(i.receive(&frags[0], &mut out), Rx::Fragment(None));
        let Rx::Fragment(Some(n)) = i.receive(&frags[1], &mut out) else {
            panic!("the ESP datagram is whole")
        };
        let h = ETHERNET_HEADER_LEN;
        assert_eq!(out[h + 9], IP_PROTO_ESP);
        assert_eq!(&out[h + IPV4_HEADER_LEN..n], &esp[..]);
        assert_eq!(internet_checksum(&out[h..h + IPV4_HEADER_LEN]), 0);
        // SCTP and ESP fragments of one identification are two datagrams.
        let sctp: Vec<u8> = (0..1480u32).map(|k| (k * 3) as u8).collect();
        let s = fragments4(&sctp, 680, 9);
        let e = esp_fragments(&esp, 9);
        for f in [&s[0], &e[1], &s[2]] {
            assert_eq!(i.receive(f, &mut out), Rx::Fragment(None));
        }
        assert!(matches!(i.receive(&s[1], &mut out), Rx::Fragment(Some(_))));
        assert_eq!(out[h + 9], IP_PROTO_SCTP);
    }

    /// RFC 4301 §7.3 and RFC 8200 §4.5: `ipv6_fragments` cuts any upper-layer packet (the
    /// IPsec port's sealed ESP here, as `Interface::fragment_ipv6` cuts SCTP) into fragments
    /// within the MTU whose Fragment header names it; reassembled with `reassemble_esp` they
    /// give the ESP packet back. A frame with an extension header is not cut.
    #[test]
    fn ipv6_fragments_of_a_sealed_esp_packet_reassemble_to_it_rfc4301_7_3() {
        let esp: Vec<u8> = (0..1460u32).map(|k| (k * 7) as u8).collect();
        let mut frame = vec![0u8; ETHERNET_HEADER_LEN + IPV6_HEADER_LEN];
        ethernet(&mut frame, MAC, PEER_MAC, ETHERTYPE_IPV6);
        ipv6_header(
            &mut frame[ETHERNET_HEADER_LEN..],
            PEER6,
            IP6,
            IP_PROTO_ESP,
            esp.len(),
            64,
        );
        frame.extend_from_slice(&esp);
        let mut scratch = vec![0u8; 2048];
        let mut frags = Vec::new();
        let made = ipv6_fragments(&frame, 1280, 0x1234_5678, &mut scratch, |f| {
            frags.push(f.to_vec())
        });
        assert_eq!(made, 2);
        for f in &frags {
            assert!(f.len() - ETHERNET_HEADER_LEN <= 1280);
            let at = ETHERNET_HEADER_LEN + IPV6_HEADER_LEN;
            assert_eq!(f[ETHERNET_HEADER_LEN + 6], IPV6_FRAGMENT);
            assert_eq!(f[at], IP_PROTO_ESP);
            assert_eq!(f[at + 4..at + 8], 0x1234_5678u32.to_be_bytes());
        }
        let mut i = iface();
        i.reassemble_esp(true);
        let mut out = vec![0u8; 9216];
        let Some(n) = feed(&mut i, &[&frags[1], &frags[0]], &mut out) else {
            panic!("the ESP packet is whole again")
        };
        assert_eq!(&out[ETHERNET_HEADER_LEN..n], &frame[ETHERNET_HEADER_LEN..]);
        let mut hop = frame.clone();
        hop[ETHERNET_HEADER_LEN + 6] = IPV6_HOP_BY_HOP;
        assert_eq!(ipv6_fragments(&hop, 1280, 1, &mut scratch, |_| {}), 0);
    }

    /// RFC 4303 §3.4.1 and RFC 8200 §4.5: IPv6 fragments of ESP to us, with
    /// `reassemble_esp` on, give the whole ESP datagram, Next Header 50, for the port to open,
    /// as IPv4's do; off, the first fragment is discarded (RFC 7112 §5: no SCTP header) and
    /// its datagram never completes. RFC 7112 §5 for ESP: a first fragment that cuts the ESP
    /// header (SPI and sequence number, 8 bytes) is discarded, and its datagram with it.
    #[test]
    fn ipv6_fragments_of_esp_are_reassembled_for_the_port_rfc4303_3_4_1() {
        let esp: Vec<u8> = (0..1480u32).map(|k| (k * 13) as u8).collect();
        let frags = |id: u32| -> Vec<Vec<u8>> {
            esp.chunks(680)
                .enumerate()
                .map(|(k, part)| {
                    let more = (k + 1) * 680 < esp.len();
                    frag6(id, k * 680, more, IP_PROTO_ESP, part, false)
                })
                .collect()
        };
        let mut out = vec![0u8; 9216];
        let mut off = iface();
        let f = frags(5);
        assert_eq!(off.receive(&f[0], &mut out), Rx::Dropped(Drop::Fragment));
        assert_eq!(off.receive(&f[1], &mut out), Rx::Fragment(None));
        assert_eq!(off.receive(&f[2], &mut out), Rx::Fragment(None));
        let mut i = iface();
        i.reassemble_esp(true);
        let f = frags(5);
        let Some(n) = feed(&mut i, &[&f[2], &f[0], &f[1]], &mut out) else {
            panic!("the ESP datagram is whole")
        };
        let h = ETHERNET_HEADER_LEN;
        assert_eq!(out[12..14], ETHERTYPE_IPV6.to_be_bytes());
        assert_eq!(out[h + 6], IP_PROTO_ESP);
        assert_eq!(
            usize::from(u16::from_be_bytes([out[h + 4], out[h + 5]])),
            esp.len()
        );
        assert_eq!(&out[h + IPV6_HEADER_LEN..n], &esp[..]);
        assert_eq!(i.stats().reassembled, 1);
        // A first fragment holding a Destination Options header whose Next Header is ESP,
        // and no ESP header: discarded, and the datagram's other fragment completes nothing.
        let opts = [IP_PROTO_ESP, 0, 1, 4, 0, 0, 0, 0];
        let cut = frag6(6, 0, true, IPV6_DEST_OPTS, &opts, false);
        assert_eq!(i.receive(&cut, &mut out), Rx::Dropped(Drop::Fragment));
        let rest = frag6(6, 8, false, IPV6_DEST_OPTS, &esp, false);
        assert_eq!(i.receive(&rest, &mut out), Rx::Fragment(None));
        assert_eq!(i.stats().reassembled, 1);
    }

    /// RFC 1122 §3.3.2 ("A host MUST be capable of reassembling"; RFC 791 §3.2): the
    /// fragments of an SCTP packet to us, in any order, give the whole packet as one frame,
    /// which then parses as the SCTP packet it was; a lost fragment gives nothing, and a
    /// fragment of another datagram starts over.
    #[test]
    fn ipv4_fragments_of_an_sctp_packet_are_reassembled_rfc1122_3_3_2() {
        let mut i = iface();
        let mut out = vec![0u8; 9216];
        let sctp: Vec<u8> = (0..1452u32).map(|k| (k * 7) as u8).collect();
        for order in [vec![0, 1, 2], vec![2, 0, 1]] {
            let frags = fragments4(&sctp, 680, 99);
            let mut got = None;
            for k in order {
                match i.receive(&frags[k], &mut out) {
                    Rx::Fragment(None) => {}
                    Rx::Fragment(Some(n)) => got = Some(n),
                    other => panic!("{other:?}"),
                }
            }
            let n = got.expect("reassembled");
            let whole = out[..n].to_vec();
            let Rx::Sctp(f) = i.receive(&whole, &mut [0u8; 128]) else {
                panic!("the whole packet is SCTP")
            };
            assert_eq!(f.sctp, &sctp[..]);
            assert_eq!(f.ip.src(), IpAddr::V4(PEER4));
        }
        // One fragment lost, then another datagram: nothing from the first.
        let a = fragments4(&sctp, 680, 1);
        let b = fragments4(&sctp, 680, 2);
        assert_eq!(i.receive(&a[0], &mut out), Rx::Fragment(None));
        assert_eq!(i.receive(&a[1], &mut out), Rx::Fragment(None));
        assert_eq!(i.receive(&b[2], &mut out), Rx::Fragment(None));
        assert_eq!(i.receive(&b[0], &mut out), Rx::Fragment(None));
        assert!(matches!(i.receive(&b[1], &mut out), Rx::Fragment(Some(_))));
        assert_eq!(i.stats().reassembled, 3);
    }

    /// RFC 1122 §3.3.2 (EMTU_R, the host's to set, at least 576; RFC 8200 §5: IPv6 at least
    /// 1500): on a link of `--mtu 1500` no datagram larger than 1500 bytes is reassembled; the
    /// fragments of a 2000-byte SCTP packet were held and the packet handed on (8980 bytes
    /// taken whatever the link). Within the link it is; and an IPv6 link below 1500 still
    /// takes 1500-byte datagrams.
    #[test]
    fn reassembly_takes_no_datagram_above_the_link_mtu_rfc1122_3_3_2() {
        let mut i = iface();
        i.set_link_mtu(1500);
        let mut out = vec![0u8; 9216];
        let whole = |i: &mut Interface, frames: &[Vec<u8>], out: &mut [u8]| {
            frames
                .iter()
                .any(|f| matches!(i.receive(f, out), Rx::Fragment(Some(_))))
        };
        let big: Vec<u8> = (0..2000u32).map(|k| k as u8).collect();
        assert!(
            !whole(&mut i, &fragments4(&big, 680, 1), &mut out),
            "a 2020-byte IPv4 datagram reassembled on a 1500-byte link"
        );
        assert!(
            !whole(&mut i, &fragments6(&big, 680, 1, false), &mut out),
            "a 2040-byte IPv6 datagram reassembled on a 1500-byte link"
        );
        // The largest the link carries: 1480 bytes of SCTP over IPv4, 1460 over IPv6.
        assert!(whole(&mut i, &fragments4(&big[..1480], 680, 2), &mut out));
        assert!(whole(
            &mut i,
            &fragments6(&big[..1460], 680, 2, false),
            &mut out
        ));
        assert!(!whole(&mut i, &fragments4(&big[..1488], 680, 3), &mut out));
        // RFC 8200 §5 whatever the link: 1460 bytes of SCTP in a 1500-byte IPv6 datagram.
        i.set_link_mtu(1280);
        assert!(whole(
            &mut i,
            &fragments6(&big[..1460], 680, 4, false),
            &mut out
        ));
        assert!(!whole(&mut i, &fragments4(&big[..1460], 680, 4), &mut out));
    }

    /// RFC 8200 §4.5 ("If insufficient fragments are received to complete reassembly of a
    /// packet within 60 seconds of the reception of the first-arriving fragment of that
    /// packet, reassembly of that packet must be abandoned and all the fragments that have
    /// been received for that packet must be discarded"), RFC 1122 §3.3.2 for IPv4: the last
    /// fragment 60 s after the first completes nothing; within 60 s it does.
    #[test]
    fn a_datagram_incomplete_after_60_seconds_is_abandoned_rfc8200_4_5() {
        let mut i = iface();
        let mut out = vec![0u8; 9216];
        let sctp: Vec<u8> = (0..1452u32).map(|k| (k * 7) as u8).collect();
        let t0 = Instant::from_nanos(1_000_000_000);
        for (id, late, whole) in [
            (7, REASSEMBLY_TIMEOUT - Duration::from_millis(1), true),
            (8, REASSEMBLY_TIMEOUT, false),
        ] {
            let frags = fragments4(&sctp, 680, id);
            i.set_time(t0);
            assert_eq!(i.receive(&frags[0], &mut out), Rx::Fragment(None));
            assert_eq!(i.receive(&frags[1], &mut out), Rx::Fragment(None));
            i.set_time(t0 + late);
            let got = i.receive(&frags[2], &mut out);
            assert_eq!(
                matches!(got, Rx::Fragment(Some(_))),
                whole,
                "{late:?}: {got:?}"
            );
        }
        assert_eq!(i.stats().reassembled, 1);
        assert_eq!(i.stats().reassembly_timeouts, 1);
        // The late fragment started a datagram of its own, which the first two complete no
        // more (they were discarded): sent again, they do.
        let frags = fragments4(&sctp, 680, 8);
        assert_eq!(i.receive(&frags[0], &mut out), Rx::Fragment(None));
        assert!(matches!(
            i.receive(&frags[1], &mut out),
            Rx::Fragment(Some(_))
        ));
    }

    /// RFC 9260 §6.9 ("if the PMTU has been reduced, then IP fragmentation MUST be used") with
    /// §7.3: once ICMP lowered the path MTU to a peer, an IPv4 packet above it (a DATA chunk
    /// sent before) leaves without DF; one within it, and every packet to another peer, keep
    /// DF.
    #[test]
    fn a_packet_above_a_lowered_path_mtu_leaves_without_df_rfc9260_6_9() {
        let mut i = iface();
        i.learn_static(IpAddr::V4(PEER4), PEER_MAC);
        let other = Ipv4Addr::new(198, 18, 0, 3);
        i.learn_static(IpAddr::V4(other), PEER_MAC);
        i.set_path_mtu(IpAddr::V4(PEER4), 1280);
        let mut out = vec![0u8; 2048];
        let df = |i: &mut Interface, to: Ipv4Addr, sctp_len: usize, out: &mut Vec<u8>| {
            let n = i.frame_sctp(T0, IpAddr::V4(to), sctp_len, out).unwrap();
            let f = link::parse_ip(&out[..n]).unwrap();
            matches!(
                f.ip,
                IpInfo::V4 {
                    dont_fragment: true,
                    ..
                }
            )
        };
        assert!(!df(&mut i, PEER4, 1400, &mut out), "above: no DF");
        assert!(df(&mut i, PEER4, 1260, &mut out), "within: DF");
        assert!(df(&mut i, other, 1400, &mut out), "another peer: DF");
    }

    /// RFC 1191 §6.3: a forgotten path MTU lets packets to that peer keep DF again, and the
    /// others' entries keep working whichever entry went (the per-packet check looks at the
    /// table's first entry before the rest).
    #[test]
    fn a_forgotten_path_mtu_gives_df_back_and_keeps_the_others_rfc1191_6_3() {
        let mut i = iface();
        let peers = [2u8, 3, 4].map(|h| Ipv4Addr::new(198, 18, 0, h));
        for p in peers {
            i.learn_static(IpAddr::V4(p), PEER_MAC);
            i.set_path_mtu(IpAddr::V4(p), 1280);
        }
        let mut out = vec![0u8; 2048];
        let mut df = |i: &mut Interface, to: Ipv4Addr| {
            let n = i.frame_sctp(T0, IpAddr::V4(to), 1400, &mut out).unwrap();
            out[ETHERNET_HEADER_LEN + 6] & 0x40 != 0 && n > 0
        };
        i.forget_path_mtu(IpAddr::V4(peers[0]));
        assert!(df(&mut i, peers[0]), "forgotten: DF again");
        assert!(
            !df(&mut i, peers[1]) && !df(&mut i, peers[2]),
            "the others kept"
        );
        assert_eq!(i.lowered_path_mtu(IpAddr::V4(peers[0])), None);
        assert_eq!(i.lowered_path_mtu(IpAddr::V4(peers[2])), Some(1280));
        i.forget_path_mtu(IpAddr::V4(peers[2]));
        i.forget_path_mtu(IpAddr::V4(peers[1]));
        assert!(peers.iter().all(|p| df(&mut i, *p)));
    }

    /// RFC 6864 §4.1 and RFC 7739 §5: IPv4 packets that leave without DF (routers may
    /// fragment them) never repeat an Identification to a peer within 65536 of them, and two
    /// clones of an interface (two data cores) do not give theirs the same ones: each starts
    /// at its own secret place. Packets with DF keep the bare counter.
    #[test]
    fn ipv4_identifications_without_df_differ_between_clones_rfc6864_4_1() {
        let mut a = iface();
        a.learn_static(IpAddr::V4(PEER4), PEER_MAC);
        a.set_path_mtu(IpAddr::V4(PEER4), 1280);
        let mut b = a.clone();
        let mut out = vec![0u8; 2048];
        let id = |i: &mut Interface, sctp_len: usize, out: &mut Vec<u8>| {
            let n = i.frame_sctp(T0, IpAddr::V4(PEER4), sctp_len, out).unwrap();
            let ip = &out[ETHERNET_HEADER_LEN..n];
            (u16::from_be_bytes([ip[4], ip[5]]), ip[6] & 0x40 != 0)
        };
        let from_a: Vec<u16> = (0..64).map(|_| id(&mut a, 1400, &mut out).0).collect();
        let from_b: Vec<u16> = (0..64).map(|_| id(&mut b, 1400, &mut out).0).collect();
        // Within a clone, a counter: no repeat before 65536 packets.
        for ids in [&from_a, &from_b] {
            assert!(
                ids.windows(2).all(|w| w[1] == w[0].wrapping_add(1)),
                "{ids:?}"
            );
        }
        // Between clones, their own secret offsets (equal by chance once in 65536 runs).
        assert_ne!(from_a[0], from_b[0], "two clones start at one place");
        let (with_df, df) = id(&mut a, 1000, &mut out);
        assert!(df);
        assert_eq!(with_df, 65, "DF packets: the counter");
    }

    /// One IPv6 fragment from PEER6 to us: Identification `id`, at byte offset `off`, M as
    /// `more`, its Fragment header's Next Header `next`, carrying `part`; with `hop_by_hop` a
    /// Hop-by-Hop Options header (PadN only) precedes the Fragment header (the unfragmentable
    /// part, RFC 8200 §4.5).
    fn frag6(id: u32, off: usize, more: bool, next: u8, part: &[u8], hop_by_hop: bool) -> Vec<u8> {
        let mut f = vec![0u8; ETHERNET_HEADER_LEN + IPV6_HEADER_LEN];
        ethernet(&mut f, MAC, PEER_MAC, ETHERTYPE_IPV6);
        let mut ext = Vec::new();
        if hop_by_hop {
            ext.extend_from_slice(&[IPV6_FRAGMENT, 0, 1, 4, 0, 0, 0, 0]);
        }
        ext.extend_from_slice(&[next, 0]);
        ext.extend_from_slice(&(off as u16 | u16::from(more)).to_be_bytes());
        ext.extend_from_slice(&id.to_be_bytes());
        let first = if hop_by_hop { 0 } else { IPV6_FRAGMENT };
        let ip = &mut f[ETHERNET_HEADER_LEN..];
        ipv6_header(ip, PEER6, IP6, first, ext.len() + part.len(), 64);
        f.extend_from_slice(&ext);
        f.extend_from_slice(part);
        f
    }

    /// `sctp` cut into IPv6 fragments of `chunk` bytes (a multiple of 8).
    fn fragments6(sctp: &[u8], chunk: usize, id: u32, hop_by_hop: bool) -> Vec<Vec<u8>> {
        sctp.chunks(chunk)
            .enumerate()
            .map(|(k, part)| {
                let more = (k + 1) * chunk < sctp.len();
                frag6(id, k * chunk, more, IP_PROTO_SCTP, part, hop_by_hop)
            })
            .collect()
    }

    /// Feeds `frames` in turn: the length of the whole frame the last one completed.
    fn feed(i: &mut Interface, frames: &[&Vec<u8>], out: &mut [u8]) -> Option<usize> {
        let mut got = None;
        for f in frames {
            match i.receive(f, out) {
                Rx::Fragment(None) => {}
                Rx::Fragment(Some(n)) => got = Some(n),
                other => panic!("{other:?}"),
            }
        }
        got
    }

    /// RFC 8200 §4.5: the IPv6 fragments of an SCTP packet to us, in order or not, behind a
    /// Hop-by-Hop header or not, give the whole packet as one frame with an IPv6 header whose
    /// Next Header is SCTP, received as any other; a lost fragment gives nothing.
    #[test]
    fn ipv6_fragments_of_an_sctp_packet_are_reassembled_rfc8200_4_5() {
        let mut i = iface();
        let mut out = vec![0u8; 9216];
        let sctp: Vec<u8> = (0..1452u32).map(|k| (k * 7) as u8).collect();
        for (order, hbh) in [([0, 1, 2], false), ([2, 0, 1], false), ([1, 2, 0], true)] {
            let frags = fragments6(&sctp, 680, 0xdead_beef, hbh);
            let n = feed(&mut i, &order.map(|k| &frags[k]), &mut out).expect("reassembled");
            let whole = out[..n].to_vec();
            assert_eq!(whole[ETHERNET_HEADER_LEN + 6], IP_PROTO_SCTP);
            let Rx::Sctp(f) = i.receive(&whole, &mut [0u8; 128]) else {
                panic!("the whole packet is SCTP")
            };
            assert_eq!(f.sctp, &sctp[..]);
            assert_eq!(f.ip.src(), IpAddr::V6(PEER6));
        }
        assert_eq!(i.stats().reassembled, 3);
        // A 32-bit Identification: two datagrams whose ids share their low 16 bits are two.
        let a = fragments6(&sctp, 680, 0x0001_0007, false);
        let b = fragments6(&sctp, 680, 0x0002_0007, false);
        assert_eq!(feed(&mut i, &[&a[0], &a[1], &b[2], &b[0]], &mut out), None);
        assert!(feed(&mut i, &[&b[1]], &mut out).is_some());
        assert!(feed(&mut i, &[&a[2]], &mut out).is_some());
        assert_eq!(i.stats().reassembled, 5);
    }

    /// RFC 5722 §4: "if any of the fragments being reassembled overlap with any other
    /// fragments being reassembled for the same packet, reassembly of that packet must be
    /// abandoned and all the fragments that have been received for that packet must be
    /// discarded". An exact duplicate is a copy the network made, kept once.
    #[test]
    fn overlapping_ipv6_fragments_discard_the_datagram_rfc5722_4() {
        let mut i = iface();
        let mut out = vec![0u8; 9216];
        let sctp: Vec<u8> = (0..1452u32).map(|k| (k * 3) as u8).collect();
        let frags = fragments6(&sctp, 680, 5, false);
        // The second fragment again, eight bytes earlier, with other bytes there.
        let mut forged = sctp[672..1360].to_vec();
        forged[..8].fill(0xee);
        let overlap = frag6(5, 672, true, IP_PROTO_SCTP, &forged, false);
        assert_eq!(feed(&mut i, &[&frags[0]], &mut out), None);
        assert_eq!(i.receive(&overlap, &mut out), Rx::Dropped(Drop::Fragment));
        assert_eq!(
            feed(&mut i, &[&frags[1], &frags[2]], &mut out),
            None,
            "discarded"
        );
        assert_eq!(i.stats().reassembled, 0);
        // A fresh datagram with a duplicate fragment completes.
        let frags = fragments6(&sctp, 680, 6, false);
        let n = feed(
            &mut i,
            &[&frags[0], &frags[0], &frags[2], &frags[1]],
            &mut out,
        );
        assert!(n.is_some());
        // A non-last fragment not a multiple of 8 bytes is no fragment of ours.
        let odd = frag6(7, 0, true, IP_PROTO_SCTP, &sctp[..100], false);
        assert_eq!(i.receive(&odd, &mut out), Rx::Dropped(Drop::Fragment));
        // Nor a last fragment ending before bytes already received.
        let frags = fragments6(&sctp, 680, 8, false);
        let short = frag6(8, 680, false, IP_PROTO_SCTP, &sctp[680..1000], false);
        assert_eq!(feed(&mut i, &[&frags[2]], &mut out), None);
        assert_eq!(i.receive(&short, &mut out), Rx::Dropped(Drop::Fragment));
    }

    /// RFC 7112 §5: a first fragment that does not hold the whole header chain through the
    /// upper-layer header (here the SCTP common header, RFC 9260 §3.1) is discarded, and its
    /// datagram never completes. A chain that is whole (Destination Options, then SCTP) is
    /// reassembled, the options obeyed (RFC 8200 §4.2) and left out of the frame.
    #[test]
    fn a_first_ipv6_fragment_without_the_sctp_header_is_discarded_rfc7112_5() {
        let mut i = iface();
        let mut out = vec![0u8; 9216];
        let sctp: Vec<u8> = (0..1452u32).map(|k| (k * 5) as u8).collect();
        // Eight bytes of Destination Options fill the first fragment: no SCTP header in it.
        let opts = [IP_PROTO_SCTP, 0, 1, 4, 0, 0, 0, 0];
        let mut payload = opts.to_vec();
        payload.extend_from_slice(&sctp);
        let first = frag6(9, 0, true, IPV6_DEST_OPTS, &payload[..8], false);
        let rest = frag6(9, 8, false, IP_PROTO_SCTP, &payload[8..], false);
        assert_eq!(i.receive(&first, &mut out), Rx::Dropped(Drop::Fragment));
        assert_eq!(
            i.receive(&rest, &mut out),
            Rx::Fragment(None),
            "never completes"
        );
        // Eight bytes of the SCTP header only (it is twelve).
        let first = frag6(10, 0, true, IP_PROTO_SCTP, &sctp[..8], false);
        let rest = frag6(10, 8, false, IP_PROTO_SCTP, &sctp[8..], false);
        assert_eq!(i.receive(&rest, &mut out), Rx::Fragment(None));
        assert_eq!(i.receive(&first, &mut out), Rx::Dropped(Drop::Fragment));
        // Another upper layer in the first fragment: not SCTP, not taken.
        let first = frag6(11, 0, true, 6, &sctp[..680], false);
        assert_eq!(i.receive(&first, &mut out), Rx::Dropped(Drop::Fragment));
        assert_eq!(i.stats().reassembled, 0);
        // The whole chain in the first fragment: reassembled, the options left out.
        let first = frag6(12, 0, true, IPV6_DEST_OPTS, &payload[..680], false);
        let rest = frag6(12, 680, false, IP_PROTO_SCTP, &payload[680..], false);
        let n = feed(&mut i, &[&rest, &first], &mut out).expect("reassembled");
        let whole = out[..n].to_vec();
        let Rx::Sctp(f) = i.receive(&whole, &mut [0u8; 128]) else {
            panic!("the whole packet is SCTP")
        };
        assert_eq!(f.sctp, &sctp[..]);
        // Destination Options with an option we must not skip (type 0x80): discarded.
        let mut bad = payload[..680].to_vec();
        bad[2] = 0x80;
        // (`link` may already read the first fragment's chain that far: dropped either way.)
        let first = frag6(13, 0, true, IPV6_DEST_OPTS, &bad, false);
        assert!(matches!(i.receive(&first, &mut out), Rx::Dropped(_)));
        let rest = frag6(13, 680, false, IP_PROTO_SCTP, &payload[680..], false);
        assert_eq!(
            i.receive(&rest, &mut out),
            Rx::Fragment(None),
            "never completes"
        );
    }

    /// RFC 6946 §4 (RFC 8200 §4.5): an atomic fragment, offset 0 and M clear, is processed as
    /// a whole packet, outside reassembly: no slot is taken, nothing waits.
    #[test]
    fn an_ipv6_atomic_fragment_is_a_whole_packet_rfc6946_4() {
        let mut i = iface();
        let sctp: Vec<u8> = (0..200u32).map(|k| k as u8).collect();
        let atomic = frag6(14, 0, false, IP_PROTO_SCTP, &sctp, false);
        let Rx::Sctp(f) = i.receive(&atomic, &mut [0u8; 128]) else {
            panic!("an atomic fragment is the whole SCTP packet")
        };
        assert_eq!(f.sctp, &sctp[..]);
        assert_eq!((i.stats().fragments_kept, i.stats().reassembled), (0, 0));
    }

    /// RFC 8200 §4.5 and §5, RFC 9260 §6.9/§7.3: once ICMP lowered the IPv6 path MTU to a peer
    /// (never below 1280, RFC 8201 §4), a packet above it (a DATA chunk sent before) goes as
    /// fragments that each fit it, offsets multiples of 8, one Identification a datagram and
    /// another for the next; they reassemble, in any order, to the packet. A packet within it,
    /// and one to another peer or over IPv4, is not fragmented.
    #[test]
    fn an_ipv6_packet_above_a_lowered_path_mtu_is_sent_as_fragments_rfc8200_4_5() {
        let mut a = iface();
        a.learn_static(IpAddr::V6(PEER6), PEER_MAC);
        let other = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 3);
        assert_eq!(
            a.ipv6_fragment_mtu(IpAddr::V6(PEER6), 9000),
            None,
            "none lowered"
        );
        a.set_path_mtu(IpAddr::V6(PEER6), 1000);
        assert_eq!(
            a.lowered_path_mtu(IpAddr::V6(PEER6)),
            Some(1280),
            "never below 1280"
        );
        assert_eq!(
            a.ipv6_fragment_mtu(IpAddr::V6(PEER6), 1280),
            None,
            "within it"
        );
        assert_eq!(
            a.ipv6_fragment_mtu(IpAddr::V6(other), 1500),
            None,
            "another peer"
        );
        assert_eq!(
            a.ipv6_fragment_mtu(IpAddr::V4(PEER4), 1500),
            None,
            "IPv4: no DF instead"
        );
        let mtu = a
            .ipv6_fragment_mtu(IpAddr::V6(PEER6), 1500)
            .expect("above it");
        let mut b = Interface::new(PEER_MAC, None, Some(PEER6));
        let mut out = vec![0u8; 9216];
        let mut scratch = vec![0u8; 9216];
        let mut ids = Vec::new();
        for len in [1460usize, 3000, 1289] {
            let sctp: Vec<u8> = (0..len as u32).map(|k| (k * 13 + 1) as u8).collect();
            let mut frame = vec![0u8; 9216];
            let h = Interface::header_len(IpAddr::V6(PEER6));
            frame[h..h + len].copy_from_slice(&sctp);
            let n = a
                .frame_sctp(T0, IpAddr::V6(PEER6), len, &mut frame)
                .unwrap();
            let mut frags = Vec::new();
            let made = a.fragment_ipv6(&frame[..n], mtu, &mut scratch, |f| frags.push(f.to_vec()));
            assert_eq!(made, frags.len());
            assert!(made >= 2, "{len} bytes need fragments");
            let mut next_off = 0;
            for (k, f) in frags.iter().enumerate() {
                assert!(
                    f.len() - ETHERNET_HEADER_LEN <= 1280,
                    "each fits the path MTU"
                );
                assert_eq!(&f[..6], &PEER_MAC);
                let ip = &f[ETHERNET_HEADER_LEN..];
                assert_eq!(
                    ip[6], IPV6_FRAGMENT,
                    "a Fragment header follows the IPv6 header"
                );
                assert_eq!(
                    usize::from(u16::from_be_bytes([ip[4], ip[5]])),
                    ip.len() - 40
                );
                let fh = &ip[40..48];
                assert_eq!(fh[0], IP_PROTO_SCTP);
                let word = u16::from_be_bytes([fh[2], fh[3]]);
                assert_eq!(
                    usize::from(word & !7),
                    next_off,
                    "contiguous, multiples of 8"
                );
                assert_eq!(word & 1 == 1, k + 1 < frags.len(), "M on all but the last");
                if k + 1 < frags.len() {
                    assert_eq!((ip.len() - 48) % 8, 0);
                }
                next_off += ip.len() - 48;
                ids.push((len, u32::from_be_bytes([fh[4], fh[5], fh[6], fh[7]])));
                assert!(
                    link::parse_ip(f).is_err(),
                    "no fragment passes as a whole packet"
                );
            }
            assert_eq!(next_off, len);
            let rev: Vec<&Vec<u8>> = frags.iter().rev().collect();
            let n = feed(&mut b, &rev, &mut out).expect("reassembled");
            let whole = out[..n].to_vec();
            let Rx::Sctp(f) = b.receive(&whole, &mut [0u8; 128]) else {
                panic!("the whole packet is SCTP")
            };
            assert_eq!(f.sctp, &sctp[..]);
            assert_eq!(f.ip.src(), IpAddr::V6(IP6));
        }
        ids.dedup();
        assert_eq!(
            ids.len(),
            3,
            "one Identification a datagram, each its own: {ids:?}"
        );
        assert_eq!(a.stats().source_fragmented, 3);
        assert_eq!(b.stats().reassembled, 3);
    }

    /// RFC 7739 §5.3: IPv6 Identifications start at a secret offset, and two interfaces cloned
    /// from one (each data core's) never walk one sequence: the same packets, to the same
    /// peer, from a clone and its original get other Identifications (equal offsets by chance
    /// once in 2^32 runs).
    #[test]
    fn a_cloned_interface_draws_its_own_ipv6_identifications_rfc7739_5() {
        let mut a = iface();
        a.learn_static(IpAddr::V6(PEER6), PEER_MAC);
        a.set_path_mtu(IpAddr::V6(PEER6), 1280);
        let mut c = a.clone();
        let mut frame = vec![0u8; 4096];
        let n = a
            .frame_sctp(T0, IpAddr::V6(PEER6), 2000, &mut frame)
            .unwrap();
        let mut scratch = vec![0u8; 9216];
        let mut ids = |i: &mut Interface| -> Vec<u32> {
            (0..4)
                .map(|_| {
                    let mut id = 0;
                    i.fragment_ipv6(&frame[..n], 1280, &mut scratch, |f| {
                        let fh = &f[ETHERNET_HEADER_LEN + IPV6_HEADER_LEN..];
                        id = u32::from_be_bytes([fh[4], fh[5], fh[6], fh[7]]);
                    });
                    id
                })
                .collect()
        };
        let (ours, theirs) = (ids(&mut a), ids(&mut c));
        assert!(
            ours.iter().all(|id| !theirs.contains(id)),
            "{ours:?} {theirs:?}"
        );
        // RFC 7739 §5.3: within a clone, a counter from a secret offset: no repeat to a peer
        // within 2^32 datagrams.
        for seq in [&ours, &theirs] {
            assert!(
                seq.windows(2).all(|w| w[1] == w[0].wrapping_add(1)),
                "{seq:?}"
            );
        }
    }

    /// (An independent review, session 55.) one IPv4 fragment of SCTP to us, from `src`, with `id`, at byte offset `off`
    /// (a multiple of 8), MF as `more`, carrying `part`.
    fn frag4_review(src: Ipv4Addr, id: u16, off: usize, more: bool, part: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; ETHERNET_HEADER_LEN + IPV4_HEADER_LEN];
        ethernet(&mut f, MAC, PEER_MAC, ETHERTYPE_IPV4);
        ipv4_header(
            &mut f[ETHERNET_HEADER_LEN..],
            src,
            IP4,
            IP_PROTO_SCTP,
            part.len(),
            id,
            false,
        );
        let flags = ((off / 8) as u16) | if more { 0x2000 } else { 0 };
        f[ETHERNET_HEADER_LEN + 6..ETHERNET_HEADER_LEN + 8].copy_from_slice(&flags.to_be_bytes());
        f[ETHERNET_HEADER_LEN + 10..ETHERNET_HEADER_LEN + 12].fill(0);
        let sum = internet_checksum(&f[ETHERNET_HEADER_LEN..ETHERNET_HEADER_LEN + 20]);
        f[ETHERNET_HEADER_LEN + 10..ETHERNET_HEADER_LEN + 12].copy_from_slice(&sum.to_be_bytes());
        f.extend_from_slice(part);
        f
    }

    /// What the small tables forget to make room is counted: a learnt neighbour evicted by
    /// another (a flood of ARP from spoofed sources costs the real peers a solicitation each)
    /// and one peer's lowered path MTU evicted by another's (its old-size packets then leave
    /// whole). Renewing an entry evicts nothing; a static neighbour is never evicted.
    #[test]
    fn entries_the_small_tables_forget_to_make_room_are_counted() {
        let mut i = iface();
        let host = |k: usize| {
            IpAddr::V4(Ipv4Addr::new(
                198,
                18,
                1 + (k / 250) as u8,
                (k % 250) as u8 + 1,
            ))
        };
        i.learn_static(host(1000), PEER_MAC);
        for k in 0..NEIGHBOURS - 1 {
            i.learn_shared(host(k), PEER_MAC);
        }
        i.learn_shared(host(0), PEER_MAC);
        assert_eq!(
            i.stats().neighbours_evicted,
            0,
            "full, nothing forgotten yet"
        );
        i.learn_shared(host(NEIGHBOURS), PEER_MAC);
        assert_eq!(i.stats().neighbours_evicted, 1);
        assert_eq!(
            i.neighbour(host(1000)),
            Some(PEER_MAC),
            "static entries stay"
        );
        for k in 0..LOWERED {
            i.set_path_mtu(host(k), 1280);
        }
        i.set_path_mtu(host(0), 1200);
        assert_eq!(i.stats().path_mtus_evicted, 0, "a slot each, one renewed");
        i.set_path_mtu(host(LOWERED), 1280);
        assert_eq!(i.stats().path_mtus_evicted, 1);
        assert_eq!(i.lowered_path_mtu(host(0)), None, "the oldest went");
        assert_eq!(i.stats().frames(), 0, "counted apart from frames received");
    }

    /// Every drop is counted: a datagram whose fragments waited in a slot another datagram
    /// took (every slot in use) was lost without a count.
    #[test]
    fn a_datagram_evicted_from_a_full_reassembly_table_is_counted() {
        let mut i = iface();
        let mut out = vec![0u8; 9216];
        let sctp: Vec<u8> = (0..1452u32).map(|k| (k * 7) as u8).collect();
        for id in 1..=REASSEMBLIES as u16 {
            let a = fragments4(&sctp, 680, id);
            assert_eq!(i.receive(&a[0], &mut out), Rx::Fragment(None));
        }
        assert_eq!(i.stats().reassembly_evicted, 0, "a slot each");
        let a = fragments4(&sctp, 680, 99);
        assert_eq!(i.receive(&a[0], &mut out), Rx::Fragment(None));
        assert_eq!(i.stats().reassembly_evicted, 1);
    }

    /// (An independent review, session 55: RFC 3128 / RFC 5722 style, RFC 1122 §3.3.2): a single forged fragment of another
    /// datagram (any valid source, any ID: an off-path attacker needs nothing) arriving between
    /// the fragments of the peer's datagram must not make us lose the peer's datagram. With one
    /// reassembly slot that any fragment evicts, one spoofed fragment per packet time blocks
    /// every fragmented packet of every peer.
    #[test]
    fn a_forged_fragment_of_another_datagram_does_not_evict_the_peers_datagram() {
        let mut i = iface();
        let mut out = vec![0u8; 9216];
        let sctp: Vec<u8> = (0..1452u32).map(|k| (k * 7) as u8).collect();
        let a = fragments4(&sctp, 680, 1);
        assert_eq!(i.receive(&a[0], &mut out), Rx::Fragment(None));
        assert_eq!(i.receive(&a[1], &mut out), Rx::Fragment(None));
        // The attacker: a 8-byte first fragment from another (spoofed) host.
        let x = frag4_review(Ipv4Addr::new(198, 51, 100, 9), 0x4242, 0, true, &[0; 8]);
        assert_eq!(i.receive(&x, &mut out), Rx::Fragment(None));
        assert!(
            matches!(i.receive(&a[2], &mut out), Rx::Fragment(Some(_))),
            "the peer's datagram was evicted by one forged fragment"
        );
    }

    /// (An independent review, session 55: RFC 5722 §4 by analogy, RFC 1858, Linux since CVE-2018-5391: overlapping IPv4
    /// fragments discard the datagram): a fragment that overlaps one already received with
    /// different bytes rewrites the datagram. CRC32c is linear, not a MAC: an attacker who
    /// knows the bytes it overwrites can pick a replacement with the same CRC, so the CRC does
    /// not stand in for the overlap check. The reassembled datagram must not be handed on.
    #[test]
    fn overlapping_fragments_with_other_bytes_are_not_reassembled() {
        let mut i = iface();
        let mut out = vec![0u8; 9216];
        let sctp: Vec<u8> = (0..1452u32).map(|k| (k * 7) as u8).collect();
        let a = fragments4(&sctp, 680, 7);
        assert_eq!(i.receive(&a[0], &mut out), Rx::Fragment(None));
        // Overlaps bytes 672..688 (the end of fragment 0, the start of fragment 1) with others.
        let forged = frag4_review(PEER4, 7, 672, true, &[0xee; 16]);
        // Kept or dropped (with the datagram): never a completion.
        assert!(!matches!(
            i.receive(&forged, &mut out),
            Rx::Fragment(Some(_))
        ));
        assert_eq!(i.receive(&a[1], &mut out), Rx::Fragment(None));
        if let Rx::Fragment(Some(n)) = i.receive(&a[2], &mut out) {
            panic!(
                "reassembled despite overlap; bytes 672..680 now {:?}",
                &out[n - 1452 + 672..n - 1452 + 680]
            );
        }
    }

    /// (An independent review, session 55.) a datagram whose fragments disagree on where it ends (a fragment reaches byte
    /// 1480, the last fragment says it ends at 800) is "not one datagram" — the code drops it
    /// when the last fragment comes first (`past`) but reassembles an 800-byte datagram when it
    /// comes after: the outcome depends on arrival order, and bytes the sender placed beyond
    /// 800 are silently ignored. Linux (ip_frag_queue: end < len -> discard) drops both ways.
    #[test]
    fn a_last_fragment_ending_before_data_already_received_is_not_reassembled() {
        let mut i = iface();
        let mut out = vec![0u8; 9216];
        // Order 1: the last fragment before the one past its end — dropped by the code.
        let beyond = frag4_review(PEER4, 9, 1000, true, &[1; 480]);
        let head = frag4_review(PEER4, 9, 0, true, &[2; 800]);
        let last = frag4_review(PEER4, 9, 800, false, &[3; 8]);
        let mut order1 = Vec::new();
        for f in [&last, &beyond, &head] {
            order1.push(i.receive(f, &mut out));
        }
        assert!(!order1.iter().any(|r| matches!(r, Rx::Fragment(Some(_)))));
        // Order 2: the fragment past the end first — must be dropped as well.
        let mut j = iface();
        for f in [&beyond, &head, &last] {
            assert!(
                !matches!(j.receive(f, &mut out), Rx::Fragment(Some(_))),
                "an inconsistent datagram was reassembled (order-dependent)"
            );
        }
    }

    /// (An independent review, session 55: RFC 8201 §4): "If a node receives a Packet Too Big message reporting a next-hop
    /// MTU that is less than the IPv6 minimum link MTU, it must discard it." The code lowers
    /// the path MTU to 1280 instead (RFC 1981's old rule; Linux fixed this, TAHI v6LC.4.1.6).
    #[test]
    fn a_packet_too_big_below_1280_is_discarded_rfc8201_4() {
        let t = TooBig {
            local: IpAddr::V6(IP6),
            peer: IpAddr::V6(PEER6),
            local_port: 5000,
            peer_port: 6000,
            vtag: 1,
            init_tag: None,
            mtu: 600,
            quoted_len: 1500,
        };
        assert_eq!(t.path_mtu(), None, "a PTB below 1280 must be discarded");
    }

    /// A hop drops a packet for its size only if it is larger than the MTU the hop reports:
    /// a Fragmentation Needed quoting a 100-byte SACK that reports 1000, or one reporting the
    /// quoted packet's own size, is inconsistent (RFC 8899 §4.6.2's sanity check) and lowers
    /// nothing; it used to be believed. One size below the quoted packet still counts.
    #[test]
    fn a_too_big_reporting_no_less_than_the_quoted_packet_is_ignored_rfc8899_4_6_2() {
        let t = |mtu, quoted_len| TooBig {
            local: IpAddr::V4(IP4),
            peer: IpAddr::V4(PEER4),
            local_port: 5000,
            peer_port: 6000,
            vtag: 1,
            init_tag: None,
            mtu,
            quoted_len,
        };
        assert_eq!(t(1000, 100).path_mtu(), None);
        assert_eq!(t(1500, 1500).path_mtu(), None);
        assert_eq!(t(1499, 1500).path_mtu(), Some(1499));
        // No MTU given (a router older than RFC 1191): the plateau below the quoted size.
        assert_eq!(t(0, 1500).path_mtu(), Some(1492));
    }

    /// (An independent review, session 56: RFC 8201 §4, RFC 9260 Appendix C ICMP5.) Once we
    /// send IPv6 source fragments (a path MTU lowered to 1400, say), a hop further on with a
    /// smaller MTU (1300) drops them and its Packet Too Big quotes the first fragment: our
    /// IPv6 header, our Fragment header (offset 0), then our SCTP common header. It must be
    /// handed on like any other: otherwise the path MTU is never lowered below 1400 and a
    /// chunk that only goes as fragments (the one retransmission T3 allows) never arrives.
    #[test]
    fn a_ptb_quoting_our_first_source_fragment_is_handed_on_rfc8201_4() {
        let mut a = iface();
        let peer = IpAddr::V6(PEER6);
        a.learn_static(peer, PEER_MAC);
        a.set_path_mtu(peer, 1400);
        let len = 3000;
        let h = Interface::header_len(peer);
        let mut frame = vec![0u8; 9216];
        frame[h..h + 2].copy_from_slice(&5000u16.to_be_bytes());
        frame[h + 2..h + 4].copy_from_slice(&6000u16.to_be_bytes());
        frame[h + 4..h + 8].copy_from_slice(&0x5eed_0001u32.to_be_bytes());
        let n = a.frame_sctp(T0, peer, len, &mut frame).unwrap();
        let mtu = a.ipv6_fragment_mtu(peer, IPV6_HEADER_LEN + len).unwrap();
        let mut scratch = vec![0u8; 9216];
        let mut frags = Vec::new();
        a.fragment_ipv6(&frame[..n], mtu, &mut scratch, |f| frags.push(f.to_vec()));
        // RFC 4443 §3.2: as much of the packet as fits in 1280 bytes is quoted.
        let first = &frags[0][ETHERNET_HEADER_LEN..];
        let quoted = &first[..first.len().min(1280 - IPV6_HEADER_LEN - 8)];
        let f = icmp_error(
            IpAddr::V6(ROUTER6),
            IpAddr::V6(IP6),
            2,
            0,
            1300u32.to_be_bytes(),
            quoted,
        );
        let mut out = vec![0u8; 2048];
        let got = a.receive(&f, &mut out);
        assert_eq!(
            got,
            Rx::TooBig(TooBig {
                local: IpAddr::V6(IP6),
                peer,
                local_port: 5000,
                peer_port: 6000,
                vtag: 0x5eed_0001,
                init_tag: None,
                mtu: 1300,
                quoted_len: 1400,
            }),
            "a Packet Too Big quoting our first fragment is ignored"
        );
    }

    /// (An independent review, session 56: RFC 8200 §4.5.) The Fragment header of every
    /// fragment names the first header of the fragmentable part ("Next Header ... Identifies
    /// the initial header type of the Fragmentable Part of the original packet"): a sender
    /// with Destination Options there puts 60 in each fragment, not only in the first. A later
    /// fragment's bytes are SCTP data, not a header chain: the datagram must still be
    /// reassembled, whatever bytes the data holds (here a 0xff where a header length would
    /// be).
    #[test]
    fn later_ipv6_fragments_after_destination_options_are_kept_rfc8200_4_5() {
        let mut i = iface();
        let mut out = vec![0u8; 9216];
        let mut sctp: Vec<u8> = (0..1452u32).map(|k| (k * 5) as u8).collect();
        // The first bytes of the second fragment (672 bytes into the SCTP packet).
        sctp[672] = 0;
        sctp[673] = 0xff;
        let opts = [IP_PROTO_SCTP, 0, 1, 4, 0, 0, 0, 0];
        let mut payload = opts.to_vec();
        payload.extend_from_slice(&sctp);
        let first = frag6(21, 0, true, IPV6_DEST_OPTS, &payload[..680], false);
        let rest = frag6(21, 680, false, IPV6_DEST_OPTS, &payload[680..], false);
        assert_eq!(i.receive(&first, &mut out), Rx::Fragment(None));
        let got = i.receive(&rest, &mut out);
        let Rx::Fragment(Some(n)) = got else {
            panic!("the later fragment was not kept: {got:?}");
        };
        let whole = out[..n].to_vec();
        let Rx::Sctp(f) = i.receive(&whole, &mut [0u8; 128]) else {
            panic!("the whole packet is SCTP")
        };
        assert_eq!(f.sctp, &sctp[..]);
    }
}
