//! The security policy database (RFC 4301 §4.4.1) with the selectors RFC 5043 §13 asks for:
//! addresses, protocol 132 and SCTP ports.

use std::net::IpAddr;
use std::ops::RangeInclusive;

use super::{Direction, IPPROTO_SCTP};

/// IP protocol numbers of TCP and UDP, whose ports a selector may name too.
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
/// ICMP and ICMPv6, whose message type and code RFC 4301 §4.4.1.1 makes selectors.
const IPPROTO_ICMP: u8 = 1;
const IPPROTO_ICMPV6: u8 = 58;
/// ICMPv6 Neighbor Solicitation and Advertisement (RFC 4861 §4.3, §4.4).
const NEIGHBOR_SOLICITATION: u8 = 135;
const NEIGHBOR_ADVERTISEMENT: u8 = 136;
/// The path MTU's messages: ICMP Destination Unreachable, Fragmentation Needed (RFC 1191 §4)
/// and ICMPv6 Packet Too Big (RFC 4443 §3.2).
const ICMP_UNREACHABLE: u8 = 3;
const ICMP_FRAGMENTATION_NEEDED: u8 = 4;
const ICMPV6_PACKET_TOO_BIG: u8 = 2;

/// What policy says of a packet (RFC 4301 §4.4.1: PROTECT, BYPASS, DISCARD).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Through the SA with this SPI: outbound, encrypt with it; inbound, the packet must have
    /// arrived through it.
    Protect(u32),
    Bypass,
    Discard,
}

/// An address and prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl Prefix {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                u32::from(p) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                u128::from(p) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

impl std::str::FromStr for Prefix {
    type Err = String;
    fn from_str(s: &str) -> Result<Prefix, String> {
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.parse().map_err(|_| format!("{a:?} is not an address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        // No `/`: the one host. A `/` with nothing (or `+8`) after it is a length left out or
        // mistyped, not a host: `10.0.0.0/` was read as 10.0.0.0/32.
        let len = match l {
            None => max,
            Some(l) => l
                .parse::<u8>()
                .ok()
                .filter(|n| *n <= max && l.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| format!("{l:?} is not a prefix length (0-{max})"))?,
        };
        // Kept as the network, host bits cleared: two rules for the same traffic compare
        // equal however they were written (the rekey exception matches selectors exactly,
        // and `sp del RULE` finds the policy by its rule).
        let addr = match addr {
            IpAddr::V4(a) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
                IpAddr::V4((u32::from(a) & mask).into())
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
                IpAddr::V6((u128::from(a) & mask).into())
            }
        };
        Ok(Prefix { addr, len })
    }
}

/// A packet's selectors, as seen from this end: inbound, `src` is the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: u8,
    /// The upper layer's ports (SCTP, TCP, UDP); 0 where `ports` is false.
    pub sport: u16,
    pub dport: u16,
    /// Whether the packet carries ports: not a non-initial fragment, and a protocol with
    /// ports. RFC 4301 §4.4.1.1: a port selector other than ANY (or OPAQUE) "cannot match"
    /// a packet without them, so a range that holds 0 must not catch it.
    pub ports: bool,
    /// A fragment, first or later (IPv4 MF or an offset; an IPv6 Fragment header that is not
    /// atomic): IPsec works on reassembled packets (RFC 4301 §5.2, RFC 4303 §3.4.1).
    pub fragment: bool,
    /// ICMP's (over IPv4) or ICMPv6's (over IPv6) message type and code, where the packet
    /// holds them (RFC 4301 §4.4.1.1 names them as selectors): what tells Neighbor Discovery
    /// apart ([`Spd::unmatched_action`]).
    pub icmp: Option<(u8, u8)>,
}

/// What an Ethernet frame is, to policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framed {
    /// Not IP (ARP, say): policy does not apply.
    NotIp,
    /// IP that cannot be followed to its upper-layer protocol (truncated, too many extension
    /// headers): policy cannot clear it, so it is dropped.
    Unparsable,
    /// IP with its selectors and where its upper-layer header starts in the frame.
    Ip(Flow, usize),
}

/// IPv6 extension headers walked to find the upper-layer protocol (RFC 8200 §4), and AH
/// (51), whose payload is what a policy selects: the stack skips an AH it does not verify,
/// so policy must see through it too.
const HOP_BY_HOP: u8 = 0;
const ROUTING: u8 = 43;
const FRAGMENT: u8 = 44;
const AH: u8 = 51;
const DEST_OPTS: u8 = 60;
/// More headers than this before the upper layer: not a packet of ours.
const MAX_EXTENSIONS: usize = 8;

impl Flow {
    /// The selectors of an Ethernet frame carrying IPv4 or IPv6 (extension headers and AH
    /// walked, RFC 4301 §4.4.1.1: the next layer protocol is the one after them), `None` for
    /// anything else (ARP, a truncated packet).
    pub fn of_frame(frame: &[u8]) -> Option<Flow> {
        match Flow::parse(frame) {
            Framed::Ip(f, _) => Some(f),
            Framed::NotIp | Framed::Unparsable => None,
        }
    }

    /// What `frame` is to policy (see [`Framed`]).
    pub fn parse(frame: &[u8]) -> Framed {
        Flow::walk(frame).unwrap_or(Framed::Unparsable)
    }

    /// Whether this is an ICMP error message, which quotes the packet that triggered it after
    /// its first 8 bytes: Destination Unreachable, Time Exceeded and Parameter Problem (RFC
    /// 792), and ICMPv6's four error types, Packet Too Big among them (RFC 4443 §3).
    pub fn is_icmp_error(&self) -> bool {
        match (self.proto, self.icmp) {
            (IPPROTO_ICMP, Some((t, _))) => matches!(t, ICMP_UNREACHABLE | 11 | 12),
            (IPPROTO_ICMPV6, Some((t, _))) => matches!(t, 1..=4),
            _ => false,
        }
    }

    /// RFC 4301 §6.2: the packet an ICMP error quotes, turned round as the receiver of an
    /// error "on an SA" must turn it ("reverse the source and destination IP address fields
    /// ... and reverses the port fields"), for `self`, the error's own flow, whose ICMP header
    /// starts at `l4` in `frame`: the flow of the traffic the error is about, as that traffic
    /// arrives here. `None` for anything but an ICMP error, and for a quote of the other IP
    /// family or one that cannot be followed to its ports.
    pub fn quoted_reversed(&self, frame: &[u8], l4: usize) -> Option<Flow> {
        if !self.is_icmp_error() {
            return None;
        }
        match Flow::walk_ip(frame, l4 + 8, self.src.is_ipv6())? {
            Framed::Ip(q, _) => Some(Flow {
                src: q.dst,
                dst: q.src,
                sport: q.dport,
                dport: q.sport,
                ..q
            }),
            Framed::NotIp | Framed::Unparsable => None,
        }
    }

    fn walk(frame: &[u8]) -> Option<Framed> {
        match frame.get(12..14) {
            Some([0x08, 0x00]) => Flow::walk_ip(frame, 14, false),
            Some([0x86, 0xdd]) => Flow::walk_ip(frame, 14, true),
            _ => Some(Framed::NotIp),
        }
    }

    /// The selectors of the IPv4 (`v6` false) or IPv6 packet whose header starts at `ip` in
    /// `frame`; `None` where it cannot be followed to its upper layer, or is not of that
    /// version.
    fn walk_ip(frame: &[u8], ip: usize, v6: bool) -> Option<Framed> {
        let mut fragment = false;
        let (src, dst, mut proto, mut at, mut first) = if v6 {
            let h = frame.get(ip..ip + 40)?;
            if h[0] >> 4 != 6 {
                return None;
            }
            let src = IpAddr::from(<[u8; 16]>::try_from(&h[8..24]).ok()?);
            let dst = IpAddr::from(<[u8; 16]>::try_from(&h[24..40]).ok()?);
            (src, dst, h[6], ip + 40, true)
        } else {
            let h = frame.get(ip..ip + 20)?;
            let ihl = usize::from(h[0] & 0x0f) * 4;
            if h[0] >> 4 != 4 || ihl < 20 {
                return None;
            }
            let src = IpAddr::from(<[u8; 4]>::try_from(&h[12..16]).ok()?);
            let dst = IpAddr::from(<[u8; 4]>::try_from(&h[16..20]).ok()?);
            // A non-first fragment has no upper-layer header.
            let frag_off = u16::from_be_bytes([h[6], h[7]]) & 0x1fff;
            fragment = frag_off != 0 || h[6] & 0x20 != 0;
            (src, dst, h[9], ip + ihl, frag_off == 0)
        };
        for _ in 0..MAX_EXTENSIONS {
            let h = match proto {
                AH if first => frame.get(at..at + 2)?,
                HOP_BY_HOP | ROUTING | DEST_OPTS | FRAGMENT if v6 && first => {
                    frame.get(at..at + 4)?
                }
                _ => break,
            };
            let len = match proto {
                AH => (usize::from(h[1]) + 2) * 4,
                FRAGMENT => {
                    first = u16::from_be_bytes([h[2], h[3]]) >> 3 == 0;
                    // Offset 0 and M clear: an atomic fragment (RFC 8200 §4.5), a whole packet.
                    fragment |= !first || h[3] & 1 != 0;
                    8
                }
                _ => (usize::from(h[1]) + 1) * 8,
            };
            proto = h[0];
            at += len;
        }
        let extension =
            proto == AH || (v6 && matches!(proto, HOP_BY_HOP | ROUTING | DEST_OPTS | FRAGMENT));
        // Headers that claim more than the frame holds (an IPv4 IHL, an extension's length):
        // a cut packet, not one to judge by its addresses alone (the `ipsec_flow` fuzz target).
        if (first && extension) || at > frame.len() {
            return None;
        }
        // SCTP, TCP and UDP all start with the two ports (RFC 4301 §4.4.1.1 names them).
        let ports = first && matches!(proto, IPPROTO_SCTP | IPPROTO_TCP | IPPROTO_UDP);
        let (sport, dport) = if ports {
            let p = frame.get(at..at + 4)?;
            (
                u16::from_be_bytes([p[0], p[1]]),
                u16::from_be_bytes([p[2], p[3]]),
            )
        } else {
            (0, 0)
        };
        let icmp = match proto {
            IPPROTO_ICMP if !v6 && first => frame.get(at..at + 2).map(|h| (h[0], h[1])),
            IPPROTO_ICMPV6 if v6 && first => frame.get(at..at + 2).map(|h| (h[0], h[1])),
            _ => None,
        };
        Some(Framed::Ip(
            Flow {
                src,
                dst,
                proto,
                sport,
                dport,
                ports,
                fragment,
                icmp,
            },
            at,
        ))
    }
}

/// What a policy matches; an absent field matches anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    pub src: Option<Prefix>,
    pub dst: Option<Prefix>,
    pub proto: Option<u8>,
    pub sport: RangeInclusive<u16>,
    pub dport: RangeInclusive<u16>,
    /// ICMP's (or ICMPv6's) message type and code (RFC 4301 §4.4.1.1), for a rule of
    /// protocol 1 (IPv4) or 58 (IPv6): a packet without them (truncated) matches neither.
    pub icmp_type: Option<u8>,
    pub icmp_code: Option<u8>,
}

impl Default for Selector {
    fn default() -> Selector {
        Selector {
            src: None,
            dst: None,
            proto: None,
            sport: 0..=u16::MAX,
            dport: 0..=u16::MAX,
            icmp_type: None,
            icmp_code: None,
        }
    }
}

impl Selector {
    pub fn matches(&self, f: &Flow) -> bool {
        let any = 0..=u16::MAX;
        self.src.is_none_or(|p| p.contains(f.src))
            && self.dst.is_none_or(|p| p.contains(f.dst))
            && self.proto.is_none_or(|p| p == f.proto)
            && (f.ports || (self.sport == any && self.dport == any))
            && self.sport.contains(&f.sport)
            && self.dport.contains(&f.dport)
            && self
                .icmp_type
                .is_none_or(|t| f.icmp.is_some_and(|(ft, _)| ft == t))
            && self
                .icmp_code
                .is_none_or(|c| f.icmp.is_some_and(|(_, fc)| fc == c))
    }
}

/// One SPD entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub direction: Direction,
    /// The higher wins; among equals, the first configured.
    pub priority: u32,
    pub selector: Selector,
    pub action: Action,
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl Policy {
    /// The family of the packets it selects (every rule names one: `sp ipv4` or `sp ipv6`).
    pub fn is_ipv6(&self) -> bool {
        self.selector
            .src
            .or(self.selector.dst)
            .is_some_and(|p| p.addr.is_ipv6())
    }
}

/// The rule as the configuration file writes it: what `show ipsec` prints, and what
/// `parse_rule` reads back into the same policy.
impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let family = if self.is_ipv6() { "ipv6" } else { "ipv4" };
        write!(f, "sp {family} {} esp ", self.direction)?;
        match self.action {
            Action::Protect(spi) => write!(f, "protect {spi}")?,
            Action::Bypass => f.write_str("bypass")?,
            Action::Discard => f.write_str("discard")?,
        }
        write!(f, " pri {}", self.priority)?;
        let s = &self.selector;
        // A whole family's prefix is what the rule starts from: not worth printing.
        for (key, p) in [("src", s.src), ("dst", s.dst)] {
            if let Some(p) = p.filter(|p| p.len > 0) {
                write!(f, " {key} {p}")?;
            }
        }
        match s.proto {
            Some(IPPROTO_SCTP) => f.write_str(" proto sctp")?,
            Some(p) => write!(f, " proto {p}")?,
            None => {}
        }
        for (key, v) in [("type", s.icmp_type), ("code", s.icmp_code)] {
            if let Some(v) = v {
                write!(f, " {key} {v}")?;
            }
        }
        for (key, r) in [("sport", &s.sport), ("dport", &s.dport)] {
            if *r != (0..=u16::MAX) {
                write!(f, " {key} {}:{}", r.start(), r.end())?;
            }
        }
        Ok(())
    }
}

/// The ordered policies of both directions, and what happens to traffic none of them names.
#[derive(Debug, Clone)]
pub struct Spd {
    policies: Vec<Policy>,
    /// `Discard` (RFC 4301 §5) or `Bypass` (`--ipsec-default bypass`).
    unmatched: Action,
}

/// RFC 4301 §5: "If no policy is found in the SPD that matches a packet (for either inbound
/// or outbound traffic), the packet MUST be discarded."
impl Default for Spd {
    fn default() -> Spd {
        Spd {
            policies: Vec::new(),
            unmatched: Action::Discard,
        }
    }
}

impl Spd {
    pub fn new() -> Spd {
        Spd::default()
    }

    /// What traffic no policy names gets: `Discard` (RFC 4301 §5, the default) or `Bypass`.
    /// Anything else is refused.
    pub fn set_unmatched(&mut self, action: Action) -> Result<(), String> {
        match action {
            Action::Discard | Action::Bypass => {
                self.unmatched = action;
                Ok(())
            }
            Action::Protect(_) => Err("traffic no policy names is discarded or bypassed".into()),
        }
    }

    /// See [`Spd::set_unmatched`].
    pub fn unmatched(&self) -> Action {
        self.unmatched
    }

    pub fn add(&mut self, p: Policy) {
        // After every entry of the same or higher priority: equal priorities keep their order.
        let at = self.policies.partition_point(|q| q.priority >= p.priority);
        self.policies.insert(at, p);
    }

    /// Takes out the policy at `index` of [`Spd::policies`].
    pub fn remove(&mut self, index: usize) -> Option<Policy> {
        (index < self.policies.len()).then(|| self.policies.remove(index))
    }

    pub fn policies(&self) -> &[Policy] {
        &self.policies
    }

    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// The first policy for `dir` that matches, by priority.
    pub fn lookup(&self, dir: Direction, flow: &Flow) -> Option<&Policy> {
        self.policies
            .iter()
            .find(|p| p.direction == dir && p.selector.matches(flow))
    }

    /// What happens to `flow` going `dir`: its first policy's action, or
    /// [`Spd::unmatched_action`].
    pub fn action(&self, dir: Direction, flow: &Flow) -> Action {
        self.lookup(dir, flow)
            .map_or_else(|| self.unmatched_action(flow), |p| p.action)
    }

    /// What happens to `flow` when no policy names it: [`Spd::unmatched`], except for two
    /// kinds of ICMP that pass, each checked where it lands:
    /// - Neighbor Solicitations and Advertisements: without them no IPv6 peer's link address
    ///   is ever learnt, and nothing, protected or not, reaches it (ARP, which is not IP, is
    ///   not policy's to judge either). The stack applies RFC 4861 §7.1's checks (hop limit
    ///   255, code 0), so a solicitation from off the link is dropped there.
    /// - The path MTU's messages (Fragmentation Needed, Packet Too Big), which RFC 4301 §8.2
    ///   has IPsec act on: one quoting our ESP is believed only as §6.1.2 says (the SA's SPI,
    ///   addresses and a sequence number it sent lately), one quoting clear SCTP only with the
    ///   association's verification tag (RFC 9260 Appendix C).
    ///
    /// An operator's policy that names them (a catch-all `discard` with no protocol, say)
    /// still decides first. Other ICMP, ping and Protocol Unreachable among it, needs a
    /// policy.
    pub fn unmatched_action(&self, flow: &Flow) -> Action {
        match (flow.proto, flow.icmp) {
            (IPPROTO_ICMPV6, Some((NEIGHBOR_SOLICITATION | NEIGHBOR_ADVERTISEMENT, _)))
            | (IPPROTO_ICMPV6, Some((ICMPV6_PACKET_TOO_BIG, _)))
            | (IPPROTO_ICMP, Some((ICMP_UNREACHABLE, ICMP_FRAGMENTATION_NEEDED))) => Action::Bypass,
            _ => self.unmatched,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;

    fn flow(src: &str, dst: &str, sport: u16, dport: u16) -> Flow {
        Flow {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            proto: IPPROTO_SCTP,
            sport,
            dport,
            ports: true,
            fragment: false,
            icmp: None,
        }
    }

    /// An Ethernet frame: IPv6 (2001:db8::1 -> ::2) whose chain is `exts` (next header,
    /// header bytes) then SCTP from port 7 to 5000.
    fn v6_frame(exts: &[(u8, Vec<u8>)]) -> Vec<u8> {
        let mut f = vec![0; 12];
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 0]);
        f.push(exts.first().map_or(IPPROTO_SCTP, |e| e.0));
        f.push(64);
        f.extend_from_slice(
            &"2001:db8::1"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
        );
        f.extend_from_slice(
            &"2001:db8::2"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
        );
        for (i, (_, h)) in exts.iter().enumerate() {
            let mut h = h.clone();
            h[0] = exts.get(i + 1).map_or(IPPROTO_SCTP, |e| e.0);
            f.extend_from_slice(&h);
        }
        f.extend_from_slice(&[0, 7, 0x13, 0x88, 0, 0, 0, 0, 0, 0, 0, 0]);
        f
    }

    /// RFC 4301 §4.4.1.1: the next layer protocol is the one after any IPv6 extension headers
    /// (and after an AH, which the stack skips unverified), so clear SCTP cannot slip past a
    /// policy by carrying a Hop-by-Hop, Destination Options, Routing or atomic Fragment header,
    /// or an AH; a chain that cannot be followed is unparsable, not bypassed.
    #[test]
    fn extension_headers_and_ah_are_walked_to_the_upper_layer_4301_4_4_1_1() {
        let opts = vec![0, 0, 1, 4, 0, 0, 0, 0]; // 8 bytes: PadN
        let atomic_fragment = vec![0, 0, 0, 0, 0, 0, 0, 1];
        let ah = vec![
            0, 4, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        for exts in [
            vec![(HOP_BY_HOP, opts.clone())],
            vec![(HOP_BY_HOP, opts.clone()), (DEST_OPTS, opts.clone())],
            vec![(ROUTING, opts.clone()), (FRAGMENT, atomic_fragment.clone())],
            vec![(AH, ah.clone()), (DEST_OPTS, opts.clone())],
        ] {
            let f = v6_frame(&exts);
            let at = 54 + exts.iter().map(|e| e.1.len()).sum::<usize>();
            let want = flow("2001:db8::1", "2001:db8::2", 7, 5000);
            assert_eq!(Flow::parse(&f), Framed::Ip(want, at), "{exts:?}");
        }
        // IPv4 with an AH in front of SCTP.
        let mut v4 = vec![0; 12];
        v4.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 0, 0, 0, 0, 0, 64, AH, 0, 0]);
        v4.extend_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
        let mut ah4 = ah.clone();
        ah4[0] = IPPROTO_SCTP;
        v4.extend_from_slice(&ah4);
        v4.extend_from_slice(&[0, 7, 0x13, 0x88, 0, 0, 0, 0]);
        assert_eq!(
            Flow::parse(&v4),
            Framed::Ip(flow("198.18.0.1", "198.18.0.2", 7, 5000), 14 + 20 + 24)
        );
        // Nine extension headers, or one cut short: unparsable.
        let many: Vec<(u8, Vec<u8>)> = (0..9).map(|_| (DEST_OPTS, opts.clone())).collect();
        assert_eq!(Flow::parse(&v6_frame(&many)), Framed::Unparsable);
        let cut = v6_frame(&[(HOP_BY_HOP, opts.clone())]);
        assert_eq!(Flow::parse(&cut[..56]), Framed::Unparsable);
        // Not IP at all.
        let mut arp = cut.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(Flow::parse(&arp), Framed::NotIp);
    }

    fn policy(priority: u32, sel: Selector, action: Action) -> Policy {
        Policy {
            direction: Direction::Out,
            priority,
            selector: sel,
            action,
        }
    }

    #[test]
    fn prefixes_match_their_network_only() {
        let p: Prefix = "198.18.0.0/15".parse().unwrap();
        assert!(p.contains("198.19.255.255".parse().unwrap()));
        assert!(!p.contains("198.20.0.0".parse().unwrap()));
        assert!(!p.contains("2001:db8::1".parse().unwrap()));
        let all: Prefix = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("203.0.113.9".parse().unwrap()));
        let v6: Prefix = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains("2001:db8:ffff::1".parse().unwrap()));
        assert!(!v6.contains("2001:db9::1".parse().unwrap()));
        assert!("198.18.0.1/33".parse::<Prefix>().is_err());
        assert_eq!("198.18.0.1".parse::<Prefix>().unwrap().len, 32);
    }

    /// Outbound SCTP to port 5000 through SA 1000, priority 10.
    fn protect_sctp_to_5000() -> Policy {
        policy(
            10,
            Selector {
                proto: Some(IPPROTO_SCTP),
                dport: 5000..=5000,
                ..Selector::default()
            },
            Action::Protect(1000),
        )
    }

    /// RFC 5043 §13 item 3: policy selects on protocol and SCTP ports, as it does for TCP.
    #[test]
    fn sctp_port_and_protocol_selectors_5043_13() {
        let mut spd = Spd::new();
        spd.add(protect_sctp_to_5000());
        assert_eq!(
            spd.action(Direction::Out, &flow("198.18.0.1", "198.18.0.2", 9, 5000)),
            Action::Protect(1000)
        );
        // Another SCTP port, or the same port under another protocol, is not selected (and
        // so gets what traffic no policy names gets).
        spd.set_unmatched(Action::Bypass).unwrap();
        assert_eq!(
            spd.action(Direction::Out, &flow("198.18.0.1", "198.18.0.2", 9, 5001)),
            Action::Bypass
        );
        let mut udp = flow("198.18.0.1", "198.18.0.2", 9, 5000);
        udp.proto = 17;
        assert_eq!(spd.action(Direction::Out, &udp), Action::Bypass);
        // Policies of the other direction do not apply.
        assert_eq!(
            spd.action(Direction::In, &flow("198.18.0.1", "198.18.0.2", 9, 5000)),
            Action::Bypass
        );
    }

    #[test]
    fn the_higher_priority_wins_and_equals_keep_their_order() {
        let mut spd = Spd::new();
        spd.add(policy(1, Selector::default(), Action::Discard));
        spd.add(policy(5, Selector::default(), Action::Protect(300)));
        spd.add(policy(5, Selector::default(), Action::Protect(400)));
        let f = flow("198.18.0.1", "198.18.0.2", 1, 2);
        assert_eq!(spd.action(Direction::Out, &f), Action::Protect(300));
        let order: Vec<u32> = spd.policies().iter().map(|p| p.priority).collect();
        assert_eq!(order, [5, 5, 1]);
    }

    #[test]
    fn flows_are_read_from_frames() {
        let mut f = vec![0u8; 14 + 20 + 12];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = IPPROTO_SCTP;
        f[26..30].copy_from_slice(&[198, 18, 0, 1]);
        f[30..34].copy_from_slice(&[198, 18, 0, 2]);
        f[34..38].copy_from_slice(&[0x13, 0x88, 0x00, 0x07]);
        assert_eq!(
            Flow::of_frame(&f),
            Some(flow("198.18.0.1", "198.18.0.2", 5000, 7))
        );
        // A later fragment carries no ports: it matches only port-less selectors.
        f[20] = 0x00;
        f[21] = 0x10;
        assert_eq!(Flow::of_frame(&f).map(|x| x.dport), Some(0));
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(Flow::of_frame(&arp), None);
        assert_eq!(Flow::of_frame(&f[..20]), None);
    }

    /// RFC 4301 §4.4.1.1: "If a port selector specifies a value other than ANY or OPAQUE, it
    /// cannot match packets that are non-initial fragments"; and TCP's and UDP's ports are
    /// selectors as SCTP's are. Before: a non-initial fragment read as ports 0, which a range
    /// holding 0 caught, and UDP to port 53 read as port 0, which `dport 53:53` missed.
    #[test]
    fn a_port_selector_matches_only_packets_that_carry_ports_4301_4_4_1_1() {
        let mut f = vec![0u8; 14 + 20 + 12];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = IPPROTO_SCTP;
        f[26..30].copy_from_slice(&[198, 18, 0, 1]);
        f[30..34].copy_from_slice(&[198, 18, 0, 2]);
        f[34..38].copy_from_slice(&[0x00, 0x07, 0x13, 0x88]);
        let first = Flow::of_frame(&f).unwrap();
        assert!(first.ports && !first.fragment);
        f[20] = 0x20; // More Fragments: a first fragment, ports and all
        let first_fragment = Flow::of_frame(&f).unwrap();
        assert!(first_fragment.ports && first_fragment.fragment);
        f[20] = 0;
        f[21] = 0x10; // fragment offset 128: no upper-layer header in it
        let later = Flow::of_frame(&f).unwrap();
        assert!(!later.ports && later.fragment);
        let pol = |priority, selector, action| Policy {
            direction: Direction::In,
            priority,
            selector,
            action,
        };
        let mut spd = Spd::new();
        let low_ports = Selector {
            proto: Some(IPPROTO_SCTP),
            sport: 0..=1023,
            ..Selector::default()
        };
        spd.add(pol(10, low_ports, Action::Bypass));
        let all_sctp = Selector {
            proto: Some(IPPROTO_SCTP),
            ..Selector::default()
        };
        spd.add(pol(0, all_sctp, Action::Discard));
        assert_eq!(spd.action(Direction::In, &first), Action::Bypass);
        assert_eq!(spd.action(Direction::In, &later), Action::Discard);
        let mut u = f.clone();
        u[21] = 0;
        u[23] = 17;
        u[34..38].copy_from_slice(&[0x30, 0x39, 0x00, 53]);
        let udp = Flow::of_frame(&u).unwrap();
        let mut dns = Spd::new();
        let to_53 = Selector {
            proto: Some(17),
            dport: 53..=53,
            ..Selector::default()
        };
        dns.add(pol(10, to_53, Action::Discard));
        assert_eq!(dns.action(Direction::In, &udp), Action::Discard);
    }

    /// RFC 4301 §5: "If no policy is found in the SPD that matches a packet (for either
    /// inbound or outbound traffic), the packet MUST be discarded." Before, such traffic
    /// passed: a rule set of IPv4 rules alone left IPv6 SCTP in the clear.
    #[test]
    fn traffic_no_policy_names_is_discarded_4301_5() {
        let mut spd = Spd::new();
        assert_eq!(spd.unmatched(), Action::Discard);
        spd.add(protect_sctp_to_5000());
        let named = flow("198.18.0.1", "198.18.0.2", 9, 5000);
        let other_port = flow("198.18.0.1", "198.18.0.2", 9, 5001);
        let v6 = flow("2001:db8::1", "2001:db8::2", 9, 5000);
        assert_eq!(spd.action(Direction::Out, &named), Action::Protect(1000));
        assert_eq!(spd.action(Direction::Out, &other_port), Action::Discard);
        assert_eq!(spd.action(Direction::Out, &v6), Action::Protect(1000));
        assert_eq!(spd.action(Direction::In, &named), Action::Discard);
        // An empty SPD discards everything IP.
        assert_eq!(Spd::new().action(Direction::In, &v6), Action::Discard);
        // The operator's choice, `--ipsec-default bypass`: what no policy names passes.
        spd.set_unmatched(Action::Bypass).unwrap();
        assert_eq!(spd.action(Direction::Out, &other_port), Action::Bypass);
        assert_eq!(spd.action(Direction::In, &named), Action::Bypass);
        assert!(spd.set_unmatched(Action::Protect(1000)).is_err());
        assert_eq!(spd.unmatched(), Action::Bypass);
    }

    /// An Ethernet frame of ICMP (IPv4) or ICMPv6 (IPv6) of message `type_` and `code`.
    fn icmp_frame(v6: bool, type_: u8, code: u8) -> Vec<u8> {
        let mut f = vec![0; 12];
        if v6 {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 24, IPPROTO_ICMPV6, 255]);
            f.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            f.extend_from_slice(&[0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 2]);
        } else {
            f.extend_from_slice(&[
                0x08,
                0x00,
                0x45,
                0,
                0,
                28,
                0,
                0,
                0,
                0,
                64,
                IPPROTO_ICMP,
                0,
                0,
            ]);
            f.extend_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
        }
        f.extend_from_slice(&[type_, code, 0, 0, 0, 0, 0, 0]);
        f
    }

    /// A packet whose headers claim more than the frame holds cannot be followed to its upper
    /// layer: unparsable (dropped), not judged by its addresses (found by fuzzing).
    #[test]
    fn headers_longer_than_the_frame_are_unparsable() {
        let mut f = icmp_frame(false, 8, 0);
        assert!(matches!(Flow::parse(&f), Framed::Ip(..)));
        f[14] = 0x4f; // IHL 60 bytes, in a frame of 14 + 28
        assert_eq!(Flow::parse(&f), Framed::Unparsable);
        // IPv6: a Destination Options header of 88 bytes, then ICMPv6, in 8 bytes of frame.
        let mut f = v6_frame(&[(DEST_OPTS, vec![0; 8])]);
        assert!(matches!(Flow::parse(&f), Framed::Ip(..)));
        let at = f.len() - 12 - 8;
        f[at..at + 2].copy_from_slice(&[IPPROTO_ICMPV6, 10]);
        f.truncate(at + 8);
        assert_eq!(Flow::parse(&f), Framed::Unparsable);
        // The version must be the EtherType's.
        let mut f = icmp_frame(false, 8, 0);
        f[14] = 0x65;
        assert_eq!(Flow::parse(&f), Framed::Unparsable);
    }

    /// RFC 4301 §6.2: the flow an ICMP error is judged by on an SA is the packet it quotes with
    /// addresses and ports turned round. Only errors quote (not an echo request), only a quote
    /// of the error's own family counts, and a quote cut before its ports gives nothing.
    #[test]
    fn an_icmp_errors_quote_is_turned_round_4301_6_2() {
        // Our SCTP from 198.18.0.2:5000 to 198.18.0.1:9, as a router quotes it.
        let mut quote = vec![0x45, 0, 0, 32, 0, 0, 0x40, 0, 64, IPPROTO_SCTP, 0, 0];
        quote.extend_from_slice(&[198, 18, 0, 2, 198, 18, 0, 1]);
        quote.extend_from_slice(&[0x13, 0x88, 0, 9, 1, 2, 3, 4, 0, 0, 0, 0]);
        let with = |type_: u8, code: u8, quote: &[u8]| {
            let mut f = icmp_frame(false, type_, code);
            f.extend_from_slice(quote);
            let total = (f.len() - 14) as u16;
            f[16..18].copy_from_slice(&total.to_be_bytes());
            match Flow::parse(&f) {
                Framed::Ip(flow, l4) => flow.quoted_reversed(&f, l4),
                other => panic!("{other:?}"),
            }
        };
        let turned = flow("198.18.0.1", "198.18.0.2", 9, 5000);
        for (type_, code) in [(3, 4), (3, 1), (11, 0), (12, 0)] {
            assert_eq!(with(type_, code, &quote), Some(turned), "type {type_}");
        }
        assert_eq!(with(8, 0, &quote), None, "an echo request quotes nothing");
        assert_eq!(with(3, 4, &quote[..22]), None, "cut before the ports");
        // Version 6 (traffic class 0x5_), which read as IPv4 would have a whole header.
        let mut v6_quote = quote.clone();
        v6_quote[0] = 0x65;
        assert_eq!(with(3, 4, &v6_quote), None, "an IPv6 quote in ICMPv4");
        // ICMPv6's errors are types 1 to 4.
        let mut q6 = vec![0x60, 0, 0, 0, 0, 12, IPPROTO_SCTP, 64];
        q6.extend_from_slice(
            &"2001:db8::2"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
        );
        q6.extend_from_slice(
            &"2001:db8::1"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
        );
        q6.extend_from_slice(&[0x13, 0x88, 0, 9, 1, 2, 3, 4, 0, 0, 0, 0]);
        let with6 = |type_: u8| {
            let mut f = icmp_frame(true, type_, 0);
            f.extend_from_slice(&q6);
            match Flow::parse(&f) {
                Framed::Ip(flow, l4) => flow.quoted_reversed(&f, l4),
                other => panic!("{other:?}"),
            }
        };
        let turned6 = flow("2001:db8::1", "2001:db8::2", 9, 5000);
        for type_ in 1..=4 {
            assert_eq!(with6(type_), Some(turned6), "ICMPv6 type {type_}");
        }
        assert_eq!(with6(128), None, "an ICMPv6 echo request");
    }

    /// Neighbor Solicitations and Advertisements (RFC 4861 §4.3, §4.4), without which no IPv6
    /// peer is reachable at all, and the path MTU's messages, which RFC 4301 §8.2 has IPsec
    /// act on, pass where no policy names them, whatever the SPD's default. Other ICMP (an
    /// echo request, a Router Advertisement, a Protocol Unreachable), and ICMP over the other
    /// family with the same numbers, get the default; and a policy that names them decides
    /// first.
    #[test]
    fn neighbor_discovery_and_pmtu_messages_pass_where_no_policy_names_them() {
        let of = |v6, t, c| match Flow::parse(&icmp_frame(v6, t, c)) {
            Framed::Ip(f, _) => f,
            other => panic!("{other:?}"),
        };
        let spd = Spd::new();
        for dir in [Direction::In, Direction::Out] {
            assert_eq!(spd.action(dir, &of(true, 135, 0)), Action::Bypass, "NS");
            assert_eq!(spd.action(dir, &of(true, 136, 0)), Action::Bypass, "NA");
            assert_eq!(spd.action(dir, &of(true, 2, 0)), Action::Bypass, "PTB");
            assert_eq!(spd.action(dir, &of(false, 3, 4)), Action::Bypass, "FN");
            assert_eq!(spd.action(dir, &of(true, 128, 0)), Action::Discard, "echo");
            assert_eq!(spd.action(dir, &of(true, 134, 0)), Action::Discard, "RA");
            assert_eq!(spd.action(dir, &of(false, 3, 2)), Action::Discard, "proto");
            assert_eq!(spd.action(dir, &of(false, 8, 0)), Action::Discard, "ping");
            assert_eq!(spd.action(dir, &of(false, 135, 0)), Action::Discard, "v4");
            assert_eq!(spd.action(dir, &of(true, 3, 4)), Action::Discard, "v6");
        }
        assert_eq!(of(true, 135, 0).icmp, Some((135, 0)));
        // Cut before its type: no ICMP selectors, so no exception.
        let cut = icmp_frame(true, 135, 0);
        assert_eq!(
            Flow::parse(&cut[..54]),
            Framed::Ip(
                Flow {
                    icmp: None,
                    ..of(true, 135, 0)
                },
                54
            )
        );
        let mut strict = Spd::new();
        strict.add(Policy {
            direction: Direction::In,
            priority: 0,
            selector: Selector::default(),
            action: Action::Discard,
        });
        assert_eq!(
            strict.action(Direction::In, &of(true, 135, 0)),
            Action::Discard
        );
        assert_eq!(
            strict.action(Direction::Out, &of(true, 135, 0)),
            Action::Bypass
        );
    }

    /// A prefix is its network: `198.18.0.1/24` and `198.18.0.0/24` select the same traffic
    /// and are the same selector (the rekey exception of `selected` compares selectors, so an
    /// old SA's packets in flight were dropped when the two policies were written apart).
    #[test]
    fn a_prefix_written_with_host_bits_is_its_network() {
        let a: Prefix = "198.18.0.1/24".parse().unwrap();
        let b: Prefix = "198.18.0.0/24".parse().unwrap();
        assert_eq!(a, b);
        assert_eq!(a.to_string(), "198.18.0.0/24");
        let c: Prefix = "2001:db8::1:2/112".parse().unwrap();
        assert_eq!(c, "2001:db8::1:0/112".parse::<Prefix>().unwrap());
        let host: Prefix = "198.18.0.7".parse().unwrap();
        assert!(host.contains("198.18.0.7".parse().unwrap()));
        let all: Prefix = "198.18.0.7/0".parse().unwrap();
        assert!(all.contains("203.0.113.1".parse().unwrap()));
    }
}
