//! Link and network layers, through `etherparse`: Ethernet II, single and double VLAN, IPv4
//! (options included) and IPv6 (extension headers included), down to the SCTP packet.
//!
//! Nothing is copied: the result borrows the frame. Fragments of either IP version are reported
//! as [`Error::Fragment`] and never handed on as if they were whole packets (reassembly is a later
//! decision). The IPv4 header checksum is verified here; the SCTP CRC32c is the caller's next step.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use etherparse::{Ipv6ExtensionSlice, Ipv6ExtensionsSlice, NetSlice, SlicedPacket, VlanSlice};

use super::{Error, Result};

/// IANA protocol number of SCTP (RFC 9260 §1.3 / IANA "Protocol Numbers").
pub const IP_PROTO_SCTP: u8 = 132;
/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// Length of an Ethernet II header without VLAN tags.
pub const ETHERNET_HEADER_LEN: usize = 14;

/// The network-layer facts a receiver needs about an SCTP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpInfo {
    V4 {
        src: Ipv4Addr,
        dst: Ipv4Addr,
        ttl: u8,
        /// The whole TOS byte: DSCP and ECN.
        tos: u8,
        dont_fragment: bool,
    },
    V6 {
        src: Ipv6Addr,
        dst: Ipv6Addr,
        hop_limit: u8,
        /// DSCP and ECN.
        traffic_class: u8,
    },
}

impl IpInfo {
    pub fn src(&self) -> IpAddr {
        match *self {
            IpInfo::V4 { src, .. } => IpAddr::V4(src),
            IpInfo::V6 { src, .. } => IpAddr::V6(src),
        }
    }

    pub fn dst(&self) -> IpAddr {
        match *self {
            IpInfo::V4 { dst, .. } => IpAddr::V4(dst),
            IpInfo::V6 { dst, .. } => IpAddr::V6(dst),
        }
    }
}

/// VLAN ids (12 bits each) of a tagged frame, outermost first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VlanTags {
    pub outer: Option<u16>,
    pub inner: Option<u16>,
}

/// An Ethernet frame that carries one whole SCTP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SctpFrame<'a> {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub vlan: VlanTags,
    pub ip: IpInfo,
    /// The SCTP packet, cut at the length the IP header gives (Ethernet padding excluded).
    pub sctp: &'a [u8],
}

/// The EtherType of a frame after any VLAN tags, or `None` if the frame is too short to say.
/// Lets a receiver route ARP and the like before trying [`parse_sctp`].
pub fn ether_type(frame: &[u8]) -> Option<u16> {
    let mut off = 12;
    loop {
        let t = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
        match t {
            // 802.1Q, 802.1ad and the old QinQ value carry a 4-byte tag before the next type.
            0x8100 | 0x88a8 | 0x9100 => off += 4,
            _ => return Some(t),
        }
    }
}

/// Slices `frame` down to its SCTP packet.
///
/// Errors: [`Error::Truncated`] when a header or the IP payload runs past the frame,
/// [`Error::BadLength`] for an IPv6 Payload Length of zero (a jumbogram's, RFC 2675 §3),
/// [`Error::Malformed`] for an impossible header (bad IP version or IHL),
/// [`Error::BadChecksum`] for a wrong IPv4 header checksum, [`Error::Fragment`] for any IP
/// fragment, [`Error::Unsupported`] for another EtherType or IP protocol.
pub fn parse_sctp(frame: &[u8]) -> Result<SctpFrame<'_>> {
    match plain_ipv4(frame) {
        Some(f) => Ok(f),
        None => parse_sliced(frame),
    }
}

/// The frame nearly every packet of an association comes in, read straight from the bytes:
/// Ethernet II without VLAN tags, IPv4 without options, not a fragment, SCTP, a right header
/// checksum, a total length within the frame. Anything else (`None`) goes through the general
/// parser, which gives the same answer for these and the right error for the rest.
fn plain_ipv4(frame: &[u8]) -> Option<SctpFrame<'_>> {
    const ETH: usize = 14;
    let h: &[u8; 20] = frame.get(ETH..ETH + 20)?.try_into().ok()?;
    let plain = frame[12..14] == [0x08, 0x00]
        && h[0] == 0x45
        && h[9] == IP_PROTO_SCTP
        // MF clear and offset zero: not a fragment (DF may be either).
        && h[6] & 0x3f == 0
        && h[7] == 0;
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    if !plain || total < 20 || ETH + total > frame.len() || !ipv4_header_checksum_ok(h) {
        return None;
    }
    let mac = |at: usize| -> [u8; 6] {
        let mut m = [0u8; 6];
        m.copy_from_slice(&frame[at..at + 6]);
        m
    };
    Some(SctpFrame {
        src_mac: mac(6),
        dst_mac: mac(0),
        vlan: VlanTags::default(),
        ip: IpInfo::V4 {
            src: Ipv4Addr::new(h[12], h[13], h[14], h[15]),
            dst: Ipv4Addr::new(h[16], h[17], h[18], h[19]),
            ttl: h[8],
            tos: h[1],
            dont_fragment: h[6] & 0x40 != 0,
        },
        sctp: &frame[ETH + 20..ETH + total],
    })
}

fn parse_sliced(frame: &[u8]) -> Result<SctpFrame<'_>> {
    let f = parse_ip(frame)?;
    if f.protocol != IP_PROTO_SCTP {
        return Err(Error::Unsupported);
    }
    Ok(SctpFrame {
        src_mac: f.src_mac,
        dst_mac: f.dst_mac,
        vlan: f.vlan,
        ip: f.ip,
        sctp: f.payload,
    })
}

/// An Ethernet frame that carries one whole (unfragmented) IP packet of any protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpFrame<'a> {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub vlan: VlanTags,
    pub ip: IpInfo,
    /// The IPv4 Protocol, or the IPv6 Next Header after the extension headers.
    pub protocol: u8,
    /// What the IP packet carries, cut at the length its header gives (Ethernet padding
    /// excluded).
    pub payload: &'a [u8],
    /// The IPv4 header's options (RFC 791 §3.1), already walked by [`parse_ip`]; empty for
    /// IPv6 and for IPv4 without options. An Echo Reply returns Record Route and Timestamp
    /// (RFC 1122 §3.2.2.6).
    pub ipv4_options: &'a [u8],
}

/// Slices `frame` down to its IP payload, with every check [`parse_sctp`] makes of the link
/// and IP layers (the same errors), whatever the protocol: what the endpoint's other
/// protocols (ICMP echo) read.
pub fn parse_ip(frame: &[u8]) -> Result<IpFrame<'_>> {
    let sliced = SlicedPacket::from_ethernet(frame).map_err(|e| {
        use etherparse::err::packet::SliceError;
        match e {
            SliceError::Len(_) => Error::Truncated,
            _ => Error::Malformed,
        }
    })?;
    let (src_mac, dst_mac) = match &sliced.link {
        Some(etherparse::LinkSlice::Ethernet2(eth)) => (eth.source(), eth.destination()),
        _ => return Err(Error::Unsupported),
    };
    let vlan = match &sliced.vlan {
        None => VlanTags::default(),
        Some(VlanSlice::SingleVlan(v)) => VlanTags {
            outer: Some(v.vlan_identifier().value()),
            inner: None,
        },
        Some(VlanSlice::DoubleVlan(v)) => VlanTags {
            outer: Some(v.outer().vlan_identifier().value()),
            inner: Some(v.inner().vlan_identifier().value()),
        },
    };
    let mut ipv4_options: &[u8] = &[];
    let (ip, payload) = match &sliced.net {
        Some(NetSlice::Ipv4(v4)) => {
            let h = v4.header();
            if !ipv4_header_checksum_ok(h.slice()) {
                return Err(Error::BadChecksum);
            }
            ipv4_options_ok(h.options())?;
            // `h.options()` borrows the slicer, not the frame: the same bytes found in the
            // frame, right before the payload.
            let options = h.options().len();
            let at = (v4.payload().payload.as_ptr() as usize).wrapping_sub(frame.as_ptr() as usize);
            ipv4_options = at
                .checked_sub(options)
                .and_then(|from| frame.get(from..at))
                .unwrap_or_default();
            debug_assert_eq!(ipv4_options, h.options());
            let info = IpInfo::V4 {
                src: Ipv4Addr::from(h.source()),
                dst: Ipv4Addr::from(h.destination()),
                ttl: h.ttl(),
                tos: h.slice().get(1).copied().unwrap_or(0),
                dont_fragment: h.dont_fragment(),
            };
            (info, v4.payload())
        }
        Some(NetSlice::Ipv6(v6)) => {
            let h = v6.header();
            // RFC 8200 §3: the Payload Length counts what follows the header. Zero is only a
            // jumbogram's (RFC 2675 §3, with a Jumbo Payload option no Ethernet frame can
            // carry), and etherparse then takes the rest of the frame, Ethernet padding
            // included, as the payload.
            if h.payload_length() == 0 {
                return Err(Error::BadLength);
            }
            ipv6_extensions_ok(v6.extensions())?;
            let info = IpInfo::V6 {
                src: Ipv6Addr::from(h.source()),
                dst: Ipv6Addr::from(h.destination()),
                hop_limit: h.hop_limit(),
                traffic_class: h.traffic_class(),
            };
            (info, v6.payload())
        }
        None => return Err(Error::Unsupported),
    };
    // Checked before the protocol: a fragment's protocol says nothing about what it carries
    // until it is reassembled, and a non-first fragment must never reach the SCTP parser.
    let fragmented = match &sliced.net {
        Some(NetSlice::Ipv6(_)) => ipv6_fragmenting(&sliced.net),
        _ => payload.fragmented,
    };
    if fragmented {
        return Err(Error::Fragment);
    }
    Ok(IpFrame {
        src_mac,
        dst_mac,
        vlan,
        ip,
        protocol: payload.ip_number.0,
        payload: payload.payload,
        ipv4_options,
    })
}

/// RFC 8200 §4: what the destination of a packet does with the extension headers etherparse
/// walked past. §4.4: a Routing header with Segments Left non-zero names nodes still to visit,
/// so we are not the final destination (no routing type is one we act on: RFC 5095 deprecates
/// type 0); discarded. §4.2: the options of Hop-by-Hop and Destination Options headers are
/// processed in order, and one we do not recognise (all but Pad1 and PadN) is skipped only
/// when the two high-order bits of its type are 00; otherwise the packet is discarded.
/// (Discarding stands in for the ICMP Parameter Problem §4.2 and §4.4 also ask for: ddpdk
/// sends no ICMP error messages.) Costs nothing for a packet without extension headers.
/// Whether an IPv6 packet's Fragment header fragments it, read from the header's bytes (RFC
/// 8200 §4.5: a 13-bit Fragment Offset, two reserved bits, then M, in bytes 2-3): etherparse
/// 0.16 reads that word with IPv4's layout, so it took a last fragment at offset 32, 64 or 96
/// bytes for a whole packet (its data then parsed as SCTP) and an atomic fragment with a
/// reserved bit set (to be "ignored on reception") for a fragment.
fn ipv6_fragmenting(net: &Option<NetSlice<'_>>) -> bool {
    let Some(NetSlice::Ipv6(v6)) = net else {
        return false;
    };
    v6.extensions().clone().into_iter().any(|e| match e {
        Ipv6ExtensionSlice::Fragment(f) => f
            .slice()
            .get(2..4)
            .is_some_and(|w| u16::from_be_bytes([w[0], w[1]]) & 0xfff9 != 0),
        _ => false,
    })
}

fn ipv6_extensions_ok(exts: &Ipv6ExtensionsSlice<'_>) -> Result<()> {
    if exts.is_empty() {
        return Ok(());
    }
    for e in exts.clone() {
        match e {
            Ipv6ExtensionSlice::HopByHop(h) | Ipv6ExtensionSlice::DestinationOptions(h) => {
                ipv6_options_ok(h.payload())?
            }
            // The payload starts at the Routing Type; Segments Left follows it.
            Ipv6ExtensionSlice::Routing(r) if r.payload().get(1).is_some_and(|&n| n != 0) => {
                return Err(Error::Malformed)
            }
            _ => {}
        }
    }
    Ok(())
}

/// The IPv4 options of a packet for us (the plain fast path has none). A Loose or Strict
/// Source Route (RFC 791 §3.1) whose pointer has not passed its last address names us only
/// as the next hop: we are not the final destination (RFC 1122 §3.2.1.8(c)), and ddpdk does
/// not forward. A completed one would need its route reversed for every answer (§3.2.1.8(c),
/// §3.2.2.6 for an Echo Reply), which ddpdk does not do: such packets are discarded too, as
/// RFC 7126 §4.3 and §4.4 advise and a Linux host does by default (`accept_source_route`
/// 0). An option whose length runs past the header, or is below 2, makes the header invalid.
fn ipv4_options_ok(mut opts: &[u8]) -> Result<()> {
    const END: u8 = 0;
    const NOP: u8 = 1;
    const LSRR: u8 = 131;
    const SSRR: u8 = 137;
    while let Some(&ty) = opts.first() {
        let len = match ty {
            END => return Ok(()),
            NOP => 1,
            _ => usize::from(*opts.get(1).ok_or(Error::Malformed)?),
        };
        if len < 1 || (ty != NOP && len < 2) || ty == LSRR || ty == SSRR {
            return Err(Error::Malformed);
        }
        opts = opts.get(len..).ok_or(Error::Malformed)?;
    }
    Ok(())
}

/// RFC 8200 §4.2: the TLV-encoded options of a Hop-by-Hop or Destination Options header.
pub(crate) fn ipv6_options_ok(mut opts: &[u8]) -> Result<()> {
    const PAD1: u8 = 0;
    const PADN: u8 = 1;
    while let Some(&ty) = opts.first() {
        let len = match ty {
            PAD1 => 1,
            _ => 2 + usize::from(*opts.get(1).ok_or(Error::Malformed)?),
        };
        if ty != PAD1 && ty != PADN && ty >> 6 != 0 {
            return Err(Error::Malformed);
        }
        opts = opts.get(len..).ok_or(Error::Malformed)?;
    }
    Ok(())
}

/// RFC 791 §3.1: the one's complement sum of the header, checksum included, is all ones.
fn ipv4_header_checksum_ok(header: &[u8]) -> bool {
    let mut sum: u32 = header
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w.get(1).copied().unwrap_or(0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum == 0xffff
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{IpNumber, Ipv4Header, Ipv6Header, PacketBuilder};

    const SRC: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const DST: [u8; 6] = [2, 0, 0, 0, 0, 2];
    /// A stand-in SCTP packet: a common header and one COOKIE ACK chunk.
    const SCTP: [u8; 16] = [
        0x13, 0x89, 0x13, 0x8a, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 11, 0, 0, 4,
    ];

    fn vlan(id: u16) -> etherparse::SingleVlanHeader {
        etherparse::SingleVlanHeader {
            vlan_id: id.try_into().expect("12-bit id"),
            ..Default::default()
        }
    }

    /// Ethernet (optionally VLAN-tagged) / IPv4 198.18.0.1 -> 198.18.0.2 / [`SCTP`].
    fn v4_frame(tags: Option<etherparse::VlanHeader>) -> Vec<u8> {
        let eth = PacketBuilder::ethernet2(SRC, DST);
        let mut out = Vec::new();
        match tags {
            None => eth.ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64).write(
                &mut out,
                IpNumber(IP_PROTO_SCTP),
                &SCTP,
            ),
            Some(v) => eth
                .vlan(v)
                .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
                .write(&mut out, IpNumber(IP_PROTO_SCTP), &SCTP),
        }
        .expect("build");
        out
    }

    #[test]
    fn ipv4_sctp_frame_yields_addresses_and_the_exact_sctp_bytes() {
        let f = v4_frame(None);
        let p = parse_sctp(&f).expect("parses");
        assert_eq!((p.src_mac, p.dst_mac), (SRC, DST));
        assert_eq!(p.vlan, VlanTags::default());
        assert_eq!(p.ip.src(), IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)));
        assert_eq!(p.ip.dst(), IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)));
        assert_eq!(p.sctp, &SCTP);
        assert_eq!(ether_type(&f), Some(ETHERTYPE_IPV4));
    }

    #[test]
    fn single_and_double_vlan_tags_are_reported_outermost_first() {
        let f = v4_frame(Some(etherparse::VlanHeader::Single(vlan(100))));
        let p = parse_sctp(&f).expect("parses");
        assert_eq!(
            p.vlan,
            VlanTags {
                outer: Some(100),
                inner: None
            }
        );
        assert_eq!(p.sctp, &SCTP);
        let f = v4_frame(Some(etherparse::VlanHeader::Double(
            etherparse::DoubleVlanHeader {
                outer: etherparse::SingleVlanHeader {
                    ether_type: etherparse::EtherType::VLAN_TAGGED_FRAME,
                    ..vlan(200)
                },
                inner: vlan(300),
            },
        )));
        let p = parse_sctp(&f).expect("parses");
        assert_eq!(
            p.vlan,
            VlanTags {
                outer: Some(200),
                inner: Some(300)
            }
        );
        assert_eq!(p.sctp, &SCTP);
        assert_eq!(ether_type(&f), Some(ETHERTYPE_IPV4));
    }

    #[test]
    fn ipv4_options_are_skipped_by_the_header_length() {
        let mut h = Ipv4Header::new(
            SCTP.len() as u16,
            64,
            IpNumber(IP_PROTO_SCTP),
            [198, 18, 0, 1],
            [198, 18, 0, 2],
        )
        .expect("header");
        // Two NOPs and an End-of-options padded to 8 bytes: IHL 7.
        h.options = [1u8, 1, 0, 0, 0, 0, 0, 0][..].try_into().expect("options");
        let mut out = Vec::new();
        PacketBuilder::ethernet2(SRC, DST)
            .ip(etherparse::IpHeaders::Ipv4(h, Default::default()))
            .write(&mut out, IpNumber(IP_PROTO_SCTP), &SCTP)
            .expect("build");
        assert_eq!(out[14] & 0x0f, 7, "IHL");
        assert_eq!(parse_sctp(&out).expect("parses").sctp, &SCTP);
    }

    #[test]
    fn ipv6_with_extension_headers_reaches_sctp() {
        let src = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        let mut out = Vec::new();
        PacketBuilder::ethernet2(SRC, DST)
            .ipv6(src, dst, 64)
            .write(&mut out, IpNumber(IP_PROTO_SCTP), &SCTP)
            .expect("build");
        let p = parse_sctp(&out).expect("parses");
        assert_eq!(p.ip.src(), IpAddr::V6(Ipv6Addr::from(src)));
        assert_eq!(p.sctp, &SCTP);
        assert_eq!(ether_type(&out), Some(ETHERTYPE_IPV6));
        // The same with a Hop-by-Hop and a Destination Options header in front of SCTP.
        let ext = etherparse::Ipv6Extensions {
            hop_by_hop_options: Some(
                etherparse::Ipv6RawExtHeader::new_raw(IpNumber(60), &[1, 4, 0, 0, 0, 0])
                    .expect("hbh"),
            ),
            destination_options: Some(
                etherparse::Ipv6RawExtHeader::new_raw(IpNumber(IP_PROTO_SCTP), &[1, 4, 0, 0, 0, 0])
                    .expect("dst"),
            ),
            ..Default::default()
        };
        let h = Ipv6Header {
            source: src,
            destination: dst,
            hop_limit: 64,
            ..Default::default()
        };
        let mut out = Vec::new();
        PacketBuilder::ethernet2(SRC, DST)
            .ip(etherparse::IpHeaders::Ipv6(h, ext))
            .write(&mut out, IpNumber(IP_PROTO_SCTP), &SCTP)
            .expect("build");
        assert_eq!(out[14 + 6], 0, "next header is Hop-by-Hop");
        assert_eq!(parse_sctp(&out).expect("parses").sctp, &SCTP);
    }

    /// Ethernet / IPv6 2001:db8::1 -> 2001:db8::2 / the extension headers `exts` (type, bytes
    /// from the Hdr Ext Len on; each one's Next Header is filled in) / [`SCTP`].
    fn v6_with_exts(exts: &[(u8, &[u8])]) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&DST);
        f.extend_from_slice(&SRC);
        f.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        let payload = exts.iter().map(|e| 1 + e.1.len()).sum::<usize>() + SCTP.len();
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&(payload as u16).to_be_bytes());
        f.push(exts.first().map_or(IP_PROTO_SCTP, |e| e.0));
        f.push(64);
        f.extend_from_slice(&Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1).octets());
        f.extend_from_slice(&Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2).octets());
        for (k, (_, bytes)) in exts.iter().enumerate() {
            f.push(exts.get(k + 1).map_or(IP_PROTO_SCTP, |e| e.0));
            f.extend_from_slice(bytes);
        }
        f.extend_from_slice(&SCTP);
        f
    }

    /// RFC 8200 §3: the Payload Length is what follows the header; zero is only a jumbogram's
    /// (RFC 2675 §3: with a Jumbo Payload option, which no Ethernet frame can carry). The rest
    /// of the frame, Ethernet padding included, is never taken for the payload.
    #[test]
    fn ipv6_payload_length_zero_never_makes_the_rest_of_the_frame_sctp_rfc8200_3() {
        let mut f = v6_with_exts(&[]);
        assert_eq!(parse_sctp(&f).expect("parses").sctp, &SCTP);
        f[14 + 4..14 + 6].copy_from_slice(&[0, 0]);
        f.resize(f.len() + 8, 0); // trailing bytes, as padding would be
        assert!(parse_sctp(&f).is_err(), "{:?}", parse_sctp(&f));
    }

    /// RFC 8200 §4.4: a Routing header with Segments Left non-zero names nodes still to visit:
    /// we are not the packet's final destination (and RFC 5095 leaves no type we would act
    /// on), so it is discarded, never handed to SCTP; with Segments Left zero it is ignored.
    #[test]
    fn ipv6_routing_header_with_segments_left_is_discarded_rfc8200_4_4() {
        let routing = |left: u8| [0u8, 2, left, 0, 0, 0, 0];
        let f = v6_with_exts(&[(43, &routing(0))]);
        assert_eq!(parse_sctp(&f).expect("segments left 0").sctp, &SCTP);
        for left in [1, 255] {
            let f = v6_with_exts(&[(43, &routing(left))]);
            assert_eq!(
                parse_sctp(&f),
                Err(Error::Malformed),
                "segments left {left}"
            );
        }
    }

    /// RFC 8200 §4.2: an option the node does not recognise is skipped only when the two
    /// high-order bits of its type are 00; 01, 10 and 11 discard the packet. Pad1 and PadN are
    /// recognised; an option running past its header makes the header invalid.
    #[test]
    fn ipv6_unrecognised_options_are_obeyed_rfc8200_4_2() {
        // Hdr Ext Len 0: six bytes of options.
        let opts = |o: [u8; 6]| [0, o[0], o[1], o[2], o[3], o[4], o[5]];
        let pad = opts([1, 4, 0, 0, 0, 0]);
        let skip = opts([0x1e, 4, 0, 0, 0, 0]);
        let pad1_then_padn = opts([0, 0, 1, 2, 0, 0]);
        for (hbh, dst) in [(&pad, &skip), (&skip, &pad1_then_padn)] {
            let f = v6_with_exts(&[(0, &hbh[..]), (60, &dst[..])]);
            assert_eq!(parse_sctp(&f).expect("skippable").sctp, &SCTP);
        }
        for ty in [0x5e, 0x9e, 0xde, 0xc2] {
            let bad = opts([ty, 4, 0, 0, 0, 0]);
            for exts in [
                [(0, &bad[..]), (60, &pad[..])],
                [(0, &pad[..]), (60, &bad[..])],
            ] {
                let f = v6_with_exts(&exts);
                assert_eq!(parse_sctp(&f), Err(Error::Malformed), "type {ty:#04x}");
            }
        }
        let overrun = opts([1, 5, 0, 0, 0, 0]);
        let f = v6_with_exts(&[(60, &overrun[..])]);
        assert_eq!(parse_sctp(&f), Err(Error::Malformed));
    }

    /// IPv4 options (RFC 791 §3.1) on a packet for us: Record Route, Timestamp and NOPs are
    /// walked past; a source route, completed or not, is discarded (RFC 1122 §3.2.1.8(c),
    /// RFC 7126 §4.3-§4.4), and so is an option whose length is below 2 or runs past the header.
    #[test]
    fn ipv4_options_are_walked_and_source_routes_discarded_rfc791_3_1() {
        let with = |opts: &[u8]| {
            let mut h = Ipv4Header::new(
                SCTP.len() as u16,
                64,
                IpNumber(IP_PROTO_SCTP),
                [198, 18, 0, 1],
                [198, 18, 0, 2],
            )
            .expect("header");
            h.options = opts.try_into().expect("options fit");
            let mut out = Vec::new();
            PacketBuilder::ethernet2(SRC, DST)
                .ip(etherparse::IpHeaders::Ipv4(h, Default::default()))
                .write(&mut out, IpNumber(IP_PROTO_SCTP), &SCTP)
                .expect("build");
            parse_sctp(&out).map(|f| f.sctp.len())
        };
        // Record Route (7) with room for one address, then NOP, End.
        assert_eq!(with(&[7, 7, 4, 0, 0, 0, 0, 1]), Ok(SCTP.len()));
        // Timestamp (68), one slot.
        assert_eq!(with(&[68, 8, 5, 0, 0, 0, 0, 0]), Ok(SCTP.len()));
        for route in [131u8, 137] {
            for pointer in [4u8, 8] {
                let opts = [route, 7, pointer, 192, 0, 2, 1, 0];
                assert_eq!(with(&opts), Err(Error::Malformed), "{route} at {pointer}");
            }
        }
        assert_eq!(with(&[7, 1, 0, 0]), Err(Error::Malformed), "length 1");
        assert_eq!(
            with(&[7, 9, 4, 0, 0, 0, 0, 0]),
            Err(Error::Malformed),
            "past the header"
        );
    }

    #[test]
    fn ipv4_fragments_first_and_later_are_reported_never_parsed() {
        for (more, offset) in [(true, 0u16), (true, 8), (false, 8)] {
            let mut h = Ipv4Header::new(
                SCTP.len() as u16,
                64,
                IpNumber(IP_PROTO_SCTP),
                [198, 18, 0, 1],
                [198, 18, 0, 2],
            )
            .expect("header");
            h.more_fragments = more;
            h.fragment_offset = offset.try_into().expect("offset");
            let mut out = Vec::new();
            PacketBuilder::ethernet2(SRC, DST)
                .ip(etherparse::IpHeaders::Ipv4(h, Default::default()))
                .write(&mut out, IpNumber(IP_PROTO_SCTP), &SCTP)
                .expect("build");
            assert_eq!(
                parse_sctp(&out),
                Err(Error::Fragment),
                "MF={more} offset={offset}"
            );
        }
    }

    #[test]
    fn ipv6_fragment_header_is_reported_as_a_fragment() {
        let ext = etherparse::Ipv6Extensions {
            fragment: Some(etherparse::Ipv6FragmentHeader::new(
                IpNumber(IP_PROTO_SCTP),
                0.try_into().expect("offset"),
                true,
                0x1234,
            )),
            ..Default::default()
        };
        let h = Ipv6Header {
            hop_limit: 64,
            ..Default::default()
        };
        let mut out = Vec::new();
        PacketBuilder::ethernet2(SRC, DST)
            .ip(etherparse::IpHeaders::Ipv6(h, ext))
            .write(&mut out, IpNumber(IP_PROTO_SCTP), &SCTP)
            .expect("build");
        assert_eq!(parse_sctp(&out), Err(Error::Fragment));
    }

    /// RFC 8200 §4.5: every IPv6 fragment, first or later, at any offset, is a fragment, and
    /// never read as a whole SCTP packet (etherparse 0.16 read a last fragment at offset 32,
    /// 64 or 96 bytes as one); an atomic fragment (offset 0, M clear, RFC 6946) is the whole
    /// packet, whatever its reserved bits.
    #[test]
    fn every_ipv6_fragment_offset_is_a_fragment_rfc8200_4_5() {
        let frame = |word: u16| {
            let mut f = vec![0u8; 14 + 40 + 8];
            f[..6].copy_from_slice(&DST);
            f[6..12].copy_from_slice(&SRC);
            f[12..14].copy_from_slice(&[0x86, 0xdd]);
            let ip = &mut f[14..54];
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&(8 + SCTP.len() as u16).to_be_bytes());
            ip[6] = 44;
            ip[7] = 64;
            ip[8] = 0x20;
            ip[24] = 0x20;
            f[54] = IP_PROTO_SCTP;
            f[56..58].copy_from_slice(&word.to_be_bytes());
            f[58..62].copy_from_slice(&7u32.to_be_bytes());
            f.extend_from_slice(&SCTP);
            f
        };
        for units in 0..8192u16 {
            for more in [false, true] {
                if units == 0 && !more {
                    continue;
                }
                let word = units << 3 | u16::from(more);
                assert_eq!(
                    parse_sctp(&frame(word)),
                    Err(Error::Fragment),
                    "offset {} bytes, M {more}",
                    units * 8
                );
            }
        }
        for reserved in [0u16, 2, 4, 6] {
            assert!(
                parse_sctp(&frame(reserved)).is_ok(),
                "atomic, reserved {reserved}"
            );
        }
    }

    #[test]
    fn other_protocols_and_ethertypes_are_unsupported() {
        let mut udp = Vec::new();
        PacketBuilder::ethernet2(SRC, DST)
            .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .udp(9, 9)
            .write(&mut udp, &[0; 8])
            .expect("build");
        assert_eq!(parse_sctp(&udp), Err(Error::Unsupported));
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&ETHERTYPE_ARP.to_be_bytes());
        assert_eq!(ether_type(&arp), Some(ETHERTYPE_ARP));
        assert_eq!(parse_sctp(&arp), Err(Error::Unsupported));
    }

    #[test]
    fn a_bad_ipv4_header_checksum_is_caught() {
        let mut f = v4_frame(None);
        f[14 + 10] ^= 0x01;
        assert_eq!(parse_sctp(&f), Err(Error::BadChecksum));
    }

    #[test]
    fn ethernet_padding_is_not_part_of_the_sctp_packet() {
        let mut f = v4_frame(None);
        assert_eq!(f.len(), 50);
        f.resize(60, 0); // the minimum Ethernet frame, padded by the sender
        assert_eq!(parse_sctp(&f).expect("parses").sctp, &SCTP);
    }

    #[test]
    fn every_truncation_is_an_error_never_a_panic() {
        let f = v4_frame(Some(etherparse::VlanHeader::Double(
            etherparse::DoubleVlanHeader {
                outer: etherparse::SingleVlanHeader {
                    ether_type: etherparse::EtherType::VLAN_TAGGED_FRAME,
                    ..vlan(1)
                },
                inner: vlan(2),
            },
        )));
        assert!(parse_sctp(&f).is_ok());
        for n in 0..f.len() {
            let e = parse_sctp(&f[..n]).expect_err("a prefix cannot be a whole packet");
            assert!(
                matches!(e, Error::Truncated | Error::Unsupported | Error::Malformed),
                "{n}: {e:?}"
            );
        }
        assert_eq!(ether_type(&f[..13]), None);
    }

    /// The plain-IPv4 fast path answers exactly as the general parser does: every frame it
    /// takes (and every one-byte change of a plain frame, and every prefix) gives the same
    /// result both ways.
    #[test]
    fn the_plain_ipv4_fast_path_agrees_with_the_general_parser() {
        let f = v4_frame(None);
        assert!(
            plain_ipv4(&f).is_some(),
            "the plain frame takes the fast path"
        );
        let mut frames = vec![f.clone()];
        for n in 0..f.len() {
            frames.push(f[..n].to_vec());
            for bits in [0x01u8, 0x20, 0x80, 0xff] {
                let mut g = f.clone();
                g[n] ^= bits;
                frames.push(g);
            }
        }
        for g in &frames {
            let slow = parse_sliced(g);
            if let Some(fast) = plain_ipv4(g) {
                assert_eq!(Ok(fast), slow, "{g:02x?}");
            }
            assert_eq!(parse_sctp(g), slow, "{g:02x?}");
        }
    }
}
