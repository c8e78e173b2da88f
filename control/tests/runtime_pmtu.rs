//! Path MTU discovery from ICMP (RFC 9260 §7.3, Appendix C; RFC 1191; RFC 8201) between two
//! whole endpoints: the client's frames cross a "router" whose next hop carries smaller
//! packets than the link. A frame too big for it, sent with DF (IPv4) or at all (IPv6), is
//! dropped, and the router answers the sender with an ICMP Fragmentation Needed or Packet Too
//! Big quoting it, as a real router does. Before ddpdk read these, the association stalled in
//! T3 retransmissions of packets the router kept dropping until it failed: a black hole.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
use rt::{closes, connects, runtime_on, tagged, Lockstep, PORT};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use ddpdk_control::conn::{Indication, Status};
use ddpdk_control::runtime::{Event, RuntimeConfig};
use ddpdk_dataplane::net::Interface;
use ddpdk_dataplane::port::mem::{pair, HeapBuf, MemPort};
use ddpdk_dataplane::port::region::Region;
use ddpdk_dataplane::port::{LinkStatus, PacketBuf, Port, PortStats};
use ddpdk_dataplane::sctp::Config;
use ddpdk_dataplane::wire::crc32c::crc32c;

const A4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const R4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 254);
const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
const R6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0xfe);
const ROUTER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xfe];
/// The next hop's MTU: IPv6's minimum (RFC 8200 §5), below the 1500-byte links.
const HOP_MTU: usize = 1280;

/// The client's port: what it sends crosses the router to the server's port; a frame larger
/// than [`HOP_MTU`] is dropped and answered, through `back` (the server's end of the wire,
/// whose transmissions the client receives), first with a forged Packet Too Big (another
/// verification tag, a smaller MTU: Appendix C ICMP6 says ignore it), then with the router's.
struct Router {
    inner: Arc<MemPort>,
    /// Where the ICMP goes back through; `None` on the server's side, which passes all.
    back: Option<Arc<MemPort>>,
    dropped: AtomicU64,
    /// Packets it fragmented (sent without DF).
    fragmented: AtomicU64,
    /// The longest IP packet the router passed on.
    longest: AtomicU64,
    /// The next hop's MTU ([`HOP_MTU`] unless a test lowers it).
    hop: AtomicU64,
    /// ICMP filtered on the path: a packet too big vanishes unanswered (a black hole).
    silent: AtomicBool,
    /// The last IPv4 SCTP frame sent through the router, for a test to quote in an ICMP.
    last_sctp: std::sync::Mutex<Option<Vec<u8>>>,
    /// An outbound SA to B4's PORT: the SCTP size its PMTU leaves (0: none), and the port's
    /// ESP PMTU generation (as `SaPort` below, for the router's tests).
    sa_sctp_mtu: AtomicU64,
    sa_generation: AtomicU64,
    /// An IPsec port's work emulated: every frame sent is taken as sealed with this many
    /// bytes of ESP (0: none), and what `tx_burst_fragmenting` is given and finds above its
    /// IPv6 size once sealed is taken as sent in fragments of at most that size (it crosses
    /// any IPv6 hop, none smaller than 1280 bytes, RFC 8200 §5).
    seal_overhead: AtomicU64,
    /// Sealed packets so fragmented.
    sealed_fragmented: AtomicU64,
    /// The sealed packets are IPv6 whatever the inner family (an IPv6 tunnel): no router
    /// fragments an inner IPv4 packet without DF.
    outer_v6: AtomicBool,
}

impl Router {
    /// The ICMP error for `frame` from the router: Fragmentation Needed (type 3 code 4,
    /// Next-Hop MTU, RFC 1191 §4) or Packet Too Big (type 2, RFC 4443 §3.2), quoting as much
    /// of the packet as RFC 1812 §4.3.2.3 / RFC 4443 §2.4 (c) allow: 576 / 1280 bytes in all.
    fn icmp(frame: &[u8], vtag_xor: u32, mtu: u32) -> Vec<u8> {
        let v4 = frame[12..14] == [0x08, 0x00];
        let (ip_len, max) = if v4 { (20, 576) } else { (40, 1280) };
        let mut quoted = frame[14..].to_vec();
        quoted.truncate(max - ip_len - 8);
        let vtag = ip_len + 4;
        for (k, b) in vtag_xor.to_be_bytes().iter().enumerate() {
            quoted[vtag + k] ^= b;
        }
        let mut icmp = vec![0u8; 8];
        if v4 {
            icmp[0] = 3;
            icmp[1] = 4;
            icmp[6..8].copy_from_slice(&(mtu as u16).to_be_bytes());
        } else {
            icmp[0] = 2;
            icmp[4..8].copy_from_slice(&mtu.to_be_bytes());
        }
        icmp.extend_from_slice(&quoted);
        let src_ip = &frame[14 + if v4 { 12 } else { 8 }..][..if v4 { 4 } else { 16 }];
        let mut out = Vec::new();
        out.extend_from_slice(&frame[6..12]);
        out.extend_from_slice(&ROUTER_MAC);
        out.extend_from_slice(&frame[12..14]);
        if v4 {
            let sum = checksum(&icmp, 0);
            icmp[2..4].copy_from_slice(&sum.to_be_bytes());
            let mut h = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, 1, 0, 0];
            h[2..4].copy_from_slice(&((20 + icmp.len()) as u16).to_be_bytes());
            h.extend_from_slice(&R4.octets());
            h.extend_from_slice(src_ip);
            let sum = checksum(&h, 0);
            h[10..12].copy_from_slice(&sum.to_be_bytes());
            out.extend_from_slice(&h);
        } else {
            // RFC 4443 §2.3: the checksum covers the pseudo-header too.
            let mut pseudo = 0u32;
            for w in R6.octets().chunks(2).chain(src_ip.chunks(2)) {
                pseudo += u32::from(u16::from_be_bytes([w[0], w[1]]));
            }
            pseudo += icmp.len() as u32 + 58;
            let sum = checksum(&icmp, pseudo);
            icmp[2..4].copy_from_slice(&sum.to_be_bytes());
            let mut h = vec![0x60, 0, 0, 0, 0, 0, 58, 255];
            h[4..6].copy_from_slice(&(icmp.len() as u16).to_be_bytes());
            h.extend_from_slice(&R6.octets());
            h.extend_from_slice(src_ip);
            out.extend_from_slice(&h);
        }
        out.extend_from_slice(&icmp);
        out
    }
}

/// An IPv4 frame cut into fragments of at most [`HOP_MTU`] bytes (RFC 791 §3.2).
fn fragment(frame: &[u8], hop: usize) -> Vec<Vec<u8>> {
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([frame[16], frame[17]]));
    let payload = &frame[14 + ihl..14 + total];
    let chunk = (hop - ihl) & !7;
    payload
        .chunks(chunk)
        .enumerate()
        .map(|(k, part)| {
            let mut f = frame[..14 + ihl].to_vec();
            let ip = &mut f[14..];
            ip[2..4].copy_from_slice(&((ihl + part.len()) as u16).to_be_bytes());
            let more = (k + 1) * chunk < payload.len();
            let flags = (k * chunk / 8) as u16 | if more { 0x2000 } else { 0 };
            ip[6..8].copy_from_slice(&flags.to_be_bytes());
            ip[10..12].fill(0);
            let sum = checksum(&ip[..ihl], 0);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            f.extend_from_slice(part);
            f
        })
        .collect()
}

/// RFC 1071 over `b`, starting from `sum`.
fn checksum(b: &[u8], mut sum: u32) -> u16 {
    for w in b.chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The IP packet's length in an Ethernet frame, and whether it may not be fragmented on the
/// way (IPv4 DF; every IPv6 packet).
fn ip_len(frame: &[u8]) -> Option<(usize, bool)> {
    match frame.get(12..14)? {
        [0x08, 0x00] => Some((
            usize::from(u16::from_be_bytes([frame[16], frame[17]])),
            frame[20] & 0x40 != 0,
        )),
        [0x86, 0xdd] => Some((
            40 + usize::from(u16::from_be_bytes([frame[18], frame[19]])),
            true,
        )),
        _ => None,
    }
}

impl Port for Router {
    type Buf = HeapBuf;
    fn id(&self) -> u16 {
        self.inner.id()
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn nb_rx_queues(&self) -> u16 {
        self.inner.nb_rx_queues()
    }
    fn nb_tx_queues(&self) -> u16 {
        self.inner.nb_tx_queues()
    }
    fn mac(&self) -> [u8; 6] {
        self.inner.mac()
    }
    fn rx_burst(&self, queue: u16, out: &mut Vec<HeapBuf>, max: usize) -> usize {
        self.inner.rx_burst(queue, out, max)
    }
    fn esp_pmtu_generation(&self) -> u64 {
        self.sa_generation.load(Relaxed)
    }
    fn esp_sctp_mtu(&self, local: IpAddr, peer: IpAddr, _: u16, port: u16) -> Option<usize> {
        let m = self.sa_sctp_mtu.load(Relaxed) as usize;
        (local == IpAddr::V4(A4) && peer == IpAddr::V4(B4) && port == PORT && m > 0).then_some(m)
    }
    fn tx_burst(&self, queue: u16, pkts: &mut Vec<HeapBuf>) -> usize {
        let mut pass = Vec::with_capacity(pkts.len());
        let mut dropped = 0;
        let hop = self.hop.load(Relaxed) as usize;
        for b in pkts.iter() {
            let d = b.data();
            if d.len() > 34 && d[12..14] == [0x08, 0x00] && d[23] == 132 {
                *self.last_sctp.lock().unwrap() = Some(d.to_vec());
            }
        }
        let sealed = self.seal_overhead.load(Relaxed) as usize;
        let outer_v6 = self.outer_v6.load(Relaxed);
        for b in pkts.drain(..) {
            match ip_len(b.data()).map(|(len, df)| (len + sealed, df || outer_v6)) {
                Some((len, df)) if df && len > hop && self.back.is_some() => {
                    dropped += 1;
                    self.dropped.fetch_add(1, Relaxed);
                    let forged = Router::icmp(b.data(), 0x0101_0101, 576);
                    let real = Router::icmp(b.data(), 0, hop as u32);
                    let mut icmps = vec![HeapBuf::new(forged), HeapBuf::new(real)];
                    match &self.back {
                        Some(back) if !self.silent.load(Relaxed) => {
                            back.tx_burst(0, &mut icmps);
                        }
                        _ => {}
                    }
                }
                // Without DF, an IPv4 packet too big for the hop is fragmented (RFC 791 §2.3).
                Some((len, false)) if len > hop && self.back.is_some() => {
                    self.fragmented.fetch_add(1, Relaxed);
                    self.longest.fetch_max(hop as u64, Relaxed);
                    pass.extend(fragment(b.data(), hop).into_iter().map(HeapBuf::new));
                }
                l => {
                    if let Some((len, _)) = l {
                        self.longest.fetch_max(len as u64, Relaxed);
                    }
                    pass.push(b)
                }
            }
        }
        let n = self.inner.tx_burst(queue, &mut pass);
        pkts.append(&mut pass);
        n + dropped
    }
    fn tx_burst_fragmenting(&self, queue: u16, pkts: &mut Vec<HeapBuf>, mtu: usize) -> usize {
        let sealed = self.seal_overhead.load(Relaxed) as usize;
        let piece = mtu.max(1280);
        let outer_v6 = self.outer_v6.load(Relaxed);
        let (cut, mut whole): (Vec<HeapBuf>, Vec<HeapBuf>) = pkts.drain(..).partition(|b| {
            sealed > 0
                && (outer_v6 || b.data()[12..14] == [0x86, 0xdd])
                && ip_len(b.data()).is_some_and(|(len, _)| len + sealed > piece)
        });
        let mut n = self.tx_burst(queue, &mut whole);
        pkts.append(&mut whole);
        if !cut.is_empty() {
            self.sealed_fragmented.fetch_add(cut.len() as u64, Relaxed);
            self.longest.fetch_max(piece as u64, Relaxed);
            let mut cut = cut;
            n += self.inner.tx_burst(queue, &mut cut);
        }
        n
    }
    fn alloc_bulk(&self, out: &mut Vec<HeapBuf>, n: usize, len: usize) -> bool {
        self.inner.alloc_bulk(out, n, len)
    }
    fn attach_region(&self, _region: &Region, _offset: u64, _len: usize) -> Option<HeapBuf> {
        // Frames are read whole by the router: no chains.
        None
    }
    fn link(&self) -> LinkStatus {
        self.inner.link()
    }
    fn stats(&self) -> PortStats {
        self.inner.stats()
    }
    fn xstats(&self) -> Vec<(String, u64)> {
        self.inner.xstats()
    }
    fn reset_stats(&self) {
        self.inner.reset_stats()
    }
}

/// The client writes, over a 1500-byte link whose path holds a 1280-byte hop, 64 tagged
/// messages of 600 bytes posted at once (SCTP bundles two DATA chunks in each full-size
/// packet, RFC 9260 §6.10), then one of 64 KiB. The first packets are dropped by the router;
/// its ICMP lowers the association's path MTU (the forged one is ignored), the lost chunks go
/// again in packets that fit, the 64 KiB write is cut at the MULPDU of the new path MTU (RFC
/// 5043 §9), and every byte arrives.
type Setup = (
    Lockstep<Router>,
    ddpdk_control::memory::Registered,
    ddpdk_control::memory::RegionId,
    Arc<Router>,
    Vec<u8>,
);

/// The two endpoints, the client behind the router, with a session on stream 1 and `len`
/// bytes of the server's memory registered for the client's writes, and `len` bytes to write.
fn behind_the_router(server: IpAddr, len: usize) -> Setup {
    behind_the_router_with(server, len, Some(1500 - Interface::ip_header_len(server)))
}

/// [`behind_the_router`] with the SCTP configuration's own `path_mtu` (`None`: its default),
/// the runtime's link of 1500 bytes setting each association's path MTU.
fn behind_the_router_with(server: IpAddr, len: usize, path_mtu: Option<usize>) -> Setup {
    behind_the_router_cfg(server, len, path_mtu, true, 0)
}

/// [`behind_the_router_with`], with RFC 8899 discovery on (`discovery`, the default) or off,
/// and `headroom` bytes of each link kept for ESP (the runtime's `esp_headroom`).
fn behind_the_router_cfg(
    server: IpAddr,
    len: usize,
    path_mtu: Option<usize>,
    discovery: bool,
    headroom: usize,
) -> Setup {
    let (pa, pb) = pair(2, 1024);
    let pb = Arc::new(pb);
    let router = Arc::new(Router {
        inner: Arc::new(pa),
        back: Some(Arc::clone(&pb)),
        dropped: AtomicU64::new(0),
        fragmented: AtomicU64::new(0),
        longest: AtomicU64::new(0),
        hop: AtomicU64::new(HOP_MTU as u64),
        silent: AtomicBool::new(false),
        last_sctp: std::sync::Mutex::new(None),
        sa_sctp_mtu: AtomicU64::new(0),
        sa_generation: AtomicU64::new(0),
        seal_overhead: AtomicU64::new(0),
        sealed_fragmented: AtomicU64::new(0),
        outer_v6: AtomicBool::new(false),
    });
    let pb = Arc::new(Router {
        inner: pb,
        back: None,
        dropped: AtomicU64::new(0),
        fragmented: AtomicU64::new(0),
        longest: AtomicU64::new(0),
        hop: AtomicU64::new(HOP_MTU as u64),
        silent: AtomicBool::new(false),
        last_sctp: std::sync::Mutex::new(None),
        sa_sctp_mtu: AtomicU64::new(0),
        sa_generation: AtomicU64::new(0),
        seal_overhead: AtomicU64::new(0),
        sealed_fragmented: AtomicU64::new(0),
        outer_v6: AtomicBool::new(false),
    });
    let link = |c: Config| Config {
        path_mtu: path_mtu.unwrap_or(c.path_mtu),
        plpmtud_probe_timer: c.plpmtud_probe_timer.filter(|_| discovery),
        ..c
    };
    let cfg = RuntimeConfig {
        link_mtu: 1500,
        esp_headroom: headroom,
        ..RuntimeConfig::default()
    };
    let a = runtime_on(
        Arc::clone(&router),
        Interface::new(router.mac(), Some(A4), Some(A6)),
        1,
        cfg,
        link(Config::default()),
    );
    let b = runtime_on(
        Arc::clone(&pb),
        Interface::new(pb.mac(), Some(B4), Some(B6)),
        2,
        cfg,
        link(Config::default()),
    );
    let (l, reg, region) = Lockstep::open_to_region(a, b, server, PORT, len);
    let data: Vec<u8> = (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    (l, reg, region, router, data)
}

/// The MULPDUs the client's ULP was told of after `Connected` (RFC 5043 §9 item 1).
fn mulpdu_changes(l: &Lockstep<Router>) -> Vec<usize> {
    l.ea.iter()
        .filter_map(|e| match e {
            Event::Indication {
                indication: Indication::MulpduChanged { mulpdu },
                ..
            } => Some(*mulpdu),
            _ => None,
        })
        .collect()
}

/// The MULPDU of an SCTP path MTU.
fn mulpdu_of(mtu: usize) -> usize {
    ddpdk_dataplane::ddp::mulpdu(ddpdk_dataplane::sctp::max_message(mtu))
}

/// Successful completions the client has heard.
fn done(l: &Lockstep<Router>, n: usize) -> bool {
    l.ea.iter()
        .filter(|e| {
            matches!(e, Event::Completion { completion, .. } if completion.status == Status::Success)
        })
        .count()
        == n
}

fn through_a_smaller_hop(server: IpAddr) {
    const SMALL: usize = 600;
    const COUNT: usize = 64;
    const BIG: usize = 64 * 1024;
    let len = SMALL * COUNT + BIG;
    let (mut l, reg, region, router, data) = behind_the_router(server, len);
    let before = l.ka[0].report().assocs[0].path_mtu;
    assert_eq!(before, 1500 - Interface::ip_header_len(server));
    for k in 0..COUNT {
        let at = k * SMALL;
        let op = tagged(
            k as u64 + 1,
            reg.stag,
            reg.to_base + at as u64,
            data[at..at + SMALL].to_vec(),
        );
        l.ca.submit(l.conn, op).unwrap();
    }
    l.run_until("the small writes through the smaller hop", |l| {
        done(l, COUNT)
    });
    let lowered = l.ka[0].report();
    let mtu = lowered.assocs[0].path_mtu;
    assert_eq!(
        mtu,
        HOP_MTU - Interface::ip_header_len(server),
        "the path MTU follows the router's"
    );
    // RFC 5043 §9 item 1: the ULP is told the new MULPDU, once.
    assert_eq!(mulpdu_changes(&l), [mulpdu_of(mtu)], "{:?}", l.ea);
    assert!(
        router.dropped.load(Relaxed) > 0,
        "the router dropped packets"
    );
    assert!(lowered.stats.pmtu_lowered >= 1, "{:?}", lowered.stats);
    // The forged Packet Too Big (another tag, 576 bytes) was ignored, and so were the real
    // ones after the first: they would not lower it further.
    assert!(lowered.stats.icmp_ignored >= 1, "{:?}", lowered.stats);
    assert_eq!(
        lowered.iface.icmp_too_big,
        lowered.stats.pmtu_lowered + lowered.stats.icmp_ignored
    );
    // New writes are cut at the new size.
    let dropped = router.dropped.load(Relaxed);
    let at = SMALL * COUNT;
    let op = tagged(1000, reg.stag, reg.to_base + at as u64, data[at..].to_vec());
    l.ca.submit(l.conn, op).unwrap();
    l.run_until("the 64 KiB write", |l| done(l, COUNT + 1));
    assert_eq!(
        router.dropped.load(Relaxed),
        dropped,
        "nothing more was too big"
    );
    assert!(router.longest.load(Relaxed) as usize <= HOP_MTU);
    let r = l.cb.memory().region(region).unwrap();
    assert_eq!(
        r.crc32c(0, len).unwrap(),
        crc32c(&data),
        "every byte intact"
    );
    for k in l.ka.iter().chain(&l.kb) {
        assert!(
            k.report().unaccounted().is_empty(),
            "{:?}",
            k.report().unaccounted()
        );
    }
}

/// RFC 9260 §7.3 and Appendix C ICMP7, RFC 1191 §4: an ICMP Fragmentation Needed lowers the
/// path MTU and the association recovers.
#[test]
fn a_fragmentation_needed_lowers_the_path_mtu_and_the_transfer_completes_rfc9260_7_3() {
    through_a_smaller_hop(IpAddr::V4(B4));
}

/// RFC 9260 §7.3 and Appendix C ICMP7, RFC 8201 §4: the same with an ICMPv6 Packet Too Big.
#[test]
fn a_packet_too_big_lowers_the_path_mtu_and_the_transfer_completes_rfc8201_4() {
    through_a_smaller_hop(IpAddr::V6(B6));
}

/// RFC 9260 §6.9: "Once a message is fragmented, it cannot be re-fragmented. Instead, if the
/// PMTU has been reduced, then IP fragmentation MUST be used." A 64 KiB write whose first
/// full-size DATA chunks (one per packet) are in flight when the path MTU falls: they are
/// dropped, and their retransmissions leave without DF (IPv4), the router fragments them, and
/// the server reassembles them (RFC 1122 §3.3.2); the later segments are cut at the new
/// MULPDU. Without either half, the retransmissions are dropped for ever.
#[test]
fn a_full_size_chunk_in_flight_is_ip_fragmented_and_reassembled_rfc9260_6_9() {
    in_flight_through_a_smaller_hop(IpAddr::V4(B4));
}

/// RFC 9260 §6.9 and §7.3 over IPv6, RFC 8200 §4.5 and §5: no router fragments an IPv6
/// packet, so the full-size DATA chunks in flight when the Packet Too Big came are sent again
/// as source fragments that fit the 1280-byte hop, each with a Fragment header, and the
/// server reassembles them. Before, the client sent them whole again and again, the router
/// dropped every one, and the association failed.
#[test]
fn a_full_size_chunk_in_flight_is_sent_as_ipv6_source_fragments_rfc8200_4_5() {
    in_flight_through_a_smaller_hop(IpAddr::V6(B6));
}

fn in_flight_through_a_smaller_hop(server: IpAddr) {
    let len = 64 * 1024;
    let (mut l, reg, region, router, data) = behind_the_router(server, len);
    l.ca.submit(l.conn, tagged(1, reg.stag, reg.to_base, data.clone()))
        .unwrap();
    l.run_until("the write through the smaller hop", |l| done(l, 1));
    assert!(
        router.dropped.load(Relaxed) > 0,
        "full-size packets were dropped"
    );
    let client_iface = *l.ka[0].interface().stats();
    if server.is_ipv4() {
        assert!(
            router.fragmented.load(Relaxed) > 0,
            "their retransmissions went without DF"
        );
    } else {
        assert!(
            client_iface.source_fragmented > 0,
            "their retransmissions went as fragments: {client_iface:?}"
        );
        assert_eq!(
            router.fragmented.load(Relaxed),
            0,
            "no router fragments IPv6"
        );
    }
    assert!(router.longest.load(Relaxed) as usize <= HOP_MTU);
    let server_iface = *l.kb[0].interface().stats();
    assert!(server_iface.reassembled > 0, "{server_iface:?}");
    assert_eq!(
        l.ka[0].report().assocs[0].path_mtu,
        HOP_MTU - Interface::ip_header_len(server)
    );
    let r = l.cb.memory().region(region).unwrap();
    assert_eq!(
        r.crc32c(0, len).unwrap(),
        crc32c(&data),
        "every byte intact"
    );
    for k in l.ka.iter().chain(&l.kb) {
        assert!(
            k.report().unaccounted().is_empty(),
            "{:?}",
            k.report().unaccounted()
        );
    }
}

/// (An independent review, session 55: RFC 9260 §7.3, RFC 1191 §3, RFC 5043 §9; §6.9 allows leaving DF off only for a
/// chunk sent before the path MTU fell): the interface's table of lowered path MTUs is keyed
/// by the peer's address alone and outlives the association, so once one association to a
/// peer saw a Fragmentation Needed, every later association to that peer sends its full-size packets
/// without DF. A new association then never gets an ICMP, never discovers its path MTU, and
/// every one of its full-size packets is IP-fragmented for ever (RFC 8900), each datagram
/// exposed to the one-slot reassembly. Its packets must carry DF, and it must end at the path
/// MTU the router gives.
#[test]
fn a_later_association_to_the_same_peer_keeps_df_and_finds_its_path_mtu() {
    use ddpdk_control::runtime::Op;
    use ddpdk_control::session::Event as SessionEvent;
    use rt::{remote_write, session_event};
    let server = IpAddr::V4(B4);
    let len = 64 * 1024;
    let (mut l, reg, _region, router, data) = behind_the_router(server, len);
    l.ca.submit(l.conn, tagged(1, reg.stag, reg.to_base, data.clone()))
        .unwrap();
    l.run_until("the write through the smaller hop", |l| done(l, 1));
    assert_eq!(
        l.ka[0].report().assocs[0].path_mtu,
        HOP_MTU - Interface::ip_header_len(server)
    );
    // The association ends (SHUTDOWN), and a new one to the same server begins.
    l.ca.submit(l.conn, Op::Shutdown).unwrap();
    l.run_until("the end of the first association", |l| closes(&l.ea) >= 1);
    l.run_until_quiet();
    let conn2 = l.ca.connect(l.now, server, PORT).unwrap();
    l.run_until("the second association", |l| connects(&l.ea) == 2);
    let apd = l.ca.memory_mut().alloc_pd();
    let bpd = l.cb.memory_mut().alloc_pd();
    let region2 = l.cb.memory_mut().alloc_region(len).unwrap();
    let reg2 =
        l.cb.memory_mut()
            .register(remote_write(bpd, region2, len as u64))
            .unwrap();
    l.ca.submit(
        conn2,
        Op::Initiate {
            stream: 1,
            pd: apd,
            private_data: Vec::new(),
        },
    )
    .unwrap();
    let sc1 = l.server_conn();
    let sc2 = |l: &Lockstep<Router>| {
        l.eb.iter().find_map(|e| match e {
            Event::Indication { conn, .. } if *conn != sc1 => Some(*conn),
            _ => None,
        })
    };
    l.run_until("the second Initiate", |l| {
        sc2(l).is_some_and(|c| {
            session_event(&l.eb, c, |e| {
                matches!(e, SessionEvent::InitiateReceived { .. })
            })
        })
    });
    let c2 = sc2(&l).unwrap();
    l.cb.submit(
        c2,
        Op::Accept {
            stream: 1,
            pd: bpd,
            private_data: Vec::new(),
        },
    )
    .unwrap();
    l.run_until("the second Accept", |l| {
        session_event(&l.ea, conn2, |e| matches!(e, SessionEvent::Accepted { .. }))
    });
    let fragmented = router.fragmented.load(Relaxed);
    l.ca.submit(conn2, tagged(2, reg2.stag, reg2.to_base, data.clone()))
        .unwrap();
    l.run_until("the second association's write", |l| done(l, 2));
    let assocs = l.ka[0].report().assocs;
    assert_eq!(
        router.fragmented.load(Relaxed),
        fragmented,
        "the new association's full-size packets left without DF and were fragmented; \
         path MTUs {:?}",
        assocs.iter().map(|a| a.path_mtu).collect::<Vec<_>>()
    );
    for a in &assocs {
        assert_eq!(a.path_mtu, HOP_MTU - Interface::ip_header_len(server));
    }
}

/// (An independent review, session 55: RFC 1191 §3: a path MTU may be as low as 68; RFC 9260 §6.9: "if the PMTU has been
/// reduced, then IP fragmentation MUST be used"): a Fragmentation Needed for a hop below what
/// the association can run at (MIN_PATH_MTU, 548 bytes of SCTP: 568 of IP) — here a 508-byte
/// hop, an RFC 1191 plateau — clamps the association at 548, and the interface is told the
/// clamped 568 instead of the router's 508. Packets of 509..568 bytes keep DF, the router
/// drops every one and answers with an ICMP that lowers nothing: a black hole, and the write
/// never completes. Above the router's MTU, DF must be cleared.
#[test]
fn a_hop_below_the_smallest_association_mtu_is_crossed_by_ip_fragmentation() {
    let server = IpAddr::V4(B4);
    let len = 32 * 1024;
    let (mut l, reg, region, router, data) = behind_the_router(server, len);
    router.hop.store(508, Relaxed);
    // The first write was cut at the link's MULPDU: its chunks cross without DF.
    let half = len / 2;
    l.ca.submit(
        l.conn,
        tagged(1, reg.stag, reg.to_base, data[..half].to_vec()),
    )
    .unwrap();
    l.run_until("the first write through a 508-byte hop", |l| done(l, 1));
    assert_eq!(
        l.ka[0].report().assocs[0].path_mtu,
        548,
        "clamped at MIN_PATH_MTU"
    );
    // The second is cut at the clamped path MTU: 568-byte IP packets, with DF.
    l.ca.submit(
        l.conn,
        tagged(
            2,
            reg.stag,
            reg.to_base + half as u64,
            data[half..].to_vec(),
        ),
    )
    .unwrap();
    l.run_until("the second write through a 508-byte hop", |l| done(l, 2));
    let r = l.cb.memory().region(region).unwrap();
    assert_eq!(r.crc32c(0, len).unwrap(), crc32c(&data));
}

/// A port standing in for the IPsec port's side of RFC 4301 §8.2.1: one outbound SA that
/// protects every association, whose path MTU (as the SCTP size it leaves) a test sets, as an
/// ICMP taken on any core would.
struct SaPort {
    inner: MemPort,
    generation: AtomicU64,
    /// The SCTP packet size the SA's PMTU leaves; 0: none recorded.
    sctp_mtu: AtomicU64,
    /// The longest IP packet sent (before ESP, which this port stands in for).
    longest: AtomicU64,
}

impl Port for SaPort {
    type Buf = HeapBuf;
    fn id(&self) -> u16 {
        self.inner.id()
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn nb_rx_queues(&self) -> u16 {
        self.inner.nb_rx_queues()
    }
    fn nb_tx_queues(&self) -> u16 {
        self.inner.nb_tx_queues()
    }
    fn mac(&self) -> [u8; 6] {
        self.inner.mac()
    }
    fn rx_burst(&self, queue: u16, out: &mut Vec<HeapBuf>, max: usize) -> usize {
        self.inner.rx_burst(queue, out, max)
    }
    fn tx_burst(&self, queue: u16, pkts: &mut Vec<HeapBuf>) -> usize {
        for b in pkts.iter() {
            if let Some((len, _)) = ip_len(b.data()) {
                self.longest.fetch_max(len as u64, Relaxed);
            }
        }
        self.inner.tx_burst(queue, pkts)
    }
    fn alloc_bulk(&self, out: &mut Vec<HeapBuf>, n: usize, len: usize) -> bool {
        self.inner.alloc_bulk(out, n, len)
    }
    fn link(&self) -> LinkStatus {
        self.inner.link()
    }
    fn stats(&self) -> PortStats {
        self.inner.stats()
    }
    fn xstats(&self) -> Vec<(String, u64)> {
        self.inner.xstats()
    }
    fn reset_stats(&self) {
        self.inner.reset_stats()
    }
    fn esp_pmtu_generation(&self) -> u64 {
        self.generation.load(Relaxed)
    }
    fn esp_sctp_mtu(&self, local: IpAddr, peer: IpAddr, _: u16, port: u16) -> Option<usize> {
        // The SA's policy: SCTP from A4 to B4's PORT.
        let m = self.sctp_mtu.load(Relaxed) as usize;
        (local == IpAddr::V4(A4) && peer == IpAddr::V4(B4) && port == PORT && m > 0).then_some(m)
    }
}

/// Two runtimes between `A4` (behind an [`SaPort`], whose SA can learn a path MTU) and `B4`
/// (behind one that never does), `cores` data cores each, a 1500-byte link with `headroom`
/// bytes kept for ESP, an association and session from A to a region of `len` bytes at B.
fn under_an_sa(
    cores: usize,
    headroom: usize,
    len: usize,
) -> (
    Arc<SaPort>,
    Lockstep<SaPort>,
    ddpdk_control::memory::Registered,
    ddpdk_control::memory::RegionId,
) {
    let (pa, pb) = pair(3, 1024);
    let sa_port = |inner| {
        Arc::new(SaPort {
            inner,
            generation: AtomicU64::new(0),
            sctp_mtu: AtomicU64::new(0),
            longest: AtomicU64::new(0),
        })
    };
    let (sa, pb) = (sa_port(pa), sa_port(pb));
    let cfg = RuntimeConfig {
        cores,
        link_mtu: 1500,
        esp_headroom: headroom,
        ..RuntimeConfig::default()
    };
    let sctp = Config {
        path_mtu: 1480,
        ..Config::default()
    };
    let a = runtime_on(
        Arc::clone(&sa),
        Interface::new(sa.mac(), Some(A4), None),
        1,
        cfg,
        sctp,
    );
    let b = runtime_on(
        Arc::clone(&pb),
        Interface::new(pb.mac(), Some(B4), None),
        2,
        cfg,
        sctp,
    );
    let (l, reg, region) = Lockstep::open_to_region(a, b, IpAddr::V4(B4), PORT, len);
    (sa, l, reg, region)
}

/// RFC 4301 §8.2.1 (propagation) across data cores: the ICMP that taught an outbound SA its
/// path MTU came in on whichever core it came in on; the association the SA protects, on the
/// core that owns it, takes the SA's PMTU at its next turn (the port's generation moved), is
/// never raised by a later larger one (RFC 1191 §3, RFC 8201 §4), and a write then completes
/// in segments cut at the new MULPDU. Fails if the cores do not read the generation.
#[test]
fn an_sas_path_mtu_reaches_the_association_on_its_own_core_rfc4301_8_2_1() {
    let len = 64 * 1024;
    let (sa, mut l, reg, region) = under_an_sa(2, 0, len);
    let owner = (0..2)
        .find(|&k| !l.ka[k].report().assocs.is_empty())
        .expect("an owning core");
    assert_eq!(l.ka[owner].report().assocs[0].path_mtu, 1480);
    // The SA learnt 1400 bytes of path MTU: 1400 - 37 (AES-GCM) - 20 (IPv4) of SCTP.
    sa.sctp_mtu.store(1343, Relaxed);
    sa.generation.fetch_add(1, Relaxed);
    l.step();
    let r = l.ka[owner].report();
    assert_eq!(r.assocs[0].path_mtu, 1343);
    assert_eq!(r.stats.esp_pmtu_lowered, 1);
    assert_eq!(l.ka[1 - owner].report().stats.esp_pmtu_lowered, 0);
    // Never raised from ICMP.
    sa.sctp_mtu.store(1400, Relaxed);
    sa.generation.fetch_add(1, Relaxed);
    l.step();
    assert_eq!(l.ka[owner].report().assocs[0].path_mtu, 1343);
    let data: Vec<u8> = (0..len as u32).map(|i| (i * 31) as u8).collect();
    l.ca.submit(l.conn, tagged(1, reg.stag, reg.to_base, data.clone()))
        .unwrap();
    l.run_until("the write", |l| {
        l.ea.iter().any(|e| {
            matches!(e, Event::Completion { completion, .. } if completion.status == Status::Success)
        })
    });
    let r = l.cb.memory().region(region).unwrap();
    assert_eq!(r.crc32c(0, len).unwrap(), crc32c(&data));
}

/// RFC 4301 §8.2.1 with RFC 8899 §5.1.2: an SA's path MTU bounds the search too. Sealed
/// above it, a probe leaves in fragments (the IPsec port fragments sealed IPv6, and clears a
/// tunnel's outer DF) and its acknowledgement confirms a size that crosses only in pieces.
/// The SA lowered the association to 1343; ten minutes on, its path MTU leaves 1400 bytes of
/// SCTP, and the search that ICMP's aging starts probes 1400, not the link's 1480. Once the
/// SA holds no path MTU, the next search (PMTU_RAISE_TIMER) probes the link's size.
#[test]
fn no_probe_goes_above_the_sas_path_mtu_rfc4301_8_2_1() {
    use ddpdk_control::runtime::PMTU_AGE;
    use ddpdk_dataplane::sctp::plpmtud::PMTU_RAISE_TIMER;
    let (sa, mut l, _reg, _region) = under_an_sa(1, 0, 4096);
    sa.sctp_mtu.store(1343, Relaxed);
    sa.generation.fetch_add(1, Relaxed);
    l.step();
    assert_eq!(l.ka[0].report().assocs[0].path_mtu, 1343);
    sa.sctp_mtu.store(1400, Relaxed);
    sa.longest.store(0, Relaxed);
    l.now += PMTU_AGE;
    l.run_until_quiet();
    let r = l.ka[0].report();
    assert_eq!(r.stats.plpmtud_probes, 1, "{:?}", r.stats);
    assert_eq!(
        sa.longest.load(Relaxed),
        1400 + 20,
        "the probe at the SA's ceiling, not above"
    );
    assert_eq!(r.assocs[0].path_mtu, 1400, "confirmed by it");
    sa.sctp_mtu.store(0, Relaxed);
    l.now += PMTU_RAISE_TIMER;
    l.run_until_quiet();
    let r = l.ka[0].report();
    assert_eq!(r.stats.plpmtud_probes, 2);
    assert_eq!(sa.longest.load(Relaxed), 1500, "the link's size");
    assert_eq!(r.assocs[0].path_mtu, 1480);
}

/// RFC 4301 §8.2.1 (review): a later association to the same peer, under the same outbound
/// SA, starts at the SA's path MTU, as the first one ran at it: the SA's PMTU less the SA's
/// own overhead and the inner header. The runtime tells the interface the SA-derived inner IP
/// size (`esp_path_mtu`: SCTP + inner header, for its DF decisions); a new association then
/// applies that cached value (RFC 1191 §5) through `lower_path_mtu`, which takes the link's
/// ESP headroom off a second time, and `esp_path_mtu` only ever lowers: the new association is stuck that much
/// below what the SA allows (1270 instead of 1343 here, with 73 bytes of headroom).
#[test]
fn a_second_association_under_an_sas_pmtu_starts_at_it_rfc4301_8_2_1() {
    let (sa, mut l, _reg, _region) = under_an_sa(1, 73, 4096);
    assert_eq!(l.ka[0].report().assocs[0].path_mtu, 1500 - 20 - 73);
    // The SA learnt 1400 bytes of path MTU: 1400 - 37 (AES-GCM) - 20 (IPv4) of SCTP.
    sa.sctp_mtu.store(1343, Relaxed);
    sa.generation.fetch_add(1, Relaxed);
    l.step();
    assert_eq!(l.ka[0].report().assocs[0].path_mtu, 1343);
    // The association ends, and a new one to the same peer and port begins, under the same
    // SA (whose PMTU is still fresh).
    l.ca.submit(l.conn, ddpdk_control::runtime::Op::Shutdown)
        .unwrap();
    l.run_until("the end of the first association", |l| closes(&l.ea) >= 1);
    l.run_until_quiet();
    l.ca.connect(l.now, IpAddr::V4(B4), PORT).unwrap();
    l.run_until("the second association", |l| connects(&l.ea) == 2);
    let mtus: Vec<usize> = l.ka[0].report().assocs.iter().map(|a| a.path_mtu).collect();
    // (The first one may still be listed, closed.)
    assert_eq!(
        mtus.last(),
        Some(&1343),
        "the second association under the SA's PMTU: {mtus:?}"
    );
}

/// RFC 1191 §6.3 and RFC 8201 §5.3: a path MTU ICMP lowered ages out. With `grown`, the path
/// carries full-size packets again after the drop (the router's next hop back at 1500): ten
/// minutes later, the association's path MTU is the link's again, and a write crosses in
/// full-size packets with no ICMP. Less than ten minutes changes nothing.
///
/// Without `discovery` (RFC 8899 off), the estimate is raised on trust (RFC 1191's way): where
/// the path did not grow, the first full-size DATA draws the router's ICMP again, the path MTU
/// falls back, and the write completes all the same. With it, RFC 8899 §4.6.2 (only a probe
/// that passed raises the PLPMTU) and §5.1.1: the aged estimate starts a search whose first
/// probe (the link's size) is what the router drops; its PTB ends the search, and no DATA is
/// ever sent too big. Raising on trust with discovery on lost full-size DATA at the hop again.
fn a_lowered_path_mtu_ages_out(server: IpAddr, grown: bool, discovery: bool) {
    let len = 64 * 1024;
    let (mut l, reg, region, router, data) = behind_the_router_cfg(
        server,
        3 * len,
        Some(1500 - Interface::ip_header_len(server)),
        discovery,
        0,
    );
    let link = 1500 - Interface::ip_header_len(server);
    let small = HOP_MTU - Interface::ip_header_len(server);
    l.ca.submit(
        l.conn,
        tagged(1, reg.stag, reg.to_base, data[..len].to_vec()),
    )
    .unwrap();
    l.run_until("the first write", |l| done(l, 1));
    assert_eq!(l.ka[0].report().assocs[0].path_mtu, small);
    if grown {
        router.hop.store(1500, Relaxed);
    }
    let (dropped, lowered) = (
        router.dropped.load(Relaxed),
        l.ka[0].report().stats.pmtu_lowered,
    );
    l.now += ddpdk_control::runtime::PMTU_AGE / 2;
    l.run_until_quiet();
    let r = l.ka[0].report();
    assert_eq!(r.assocs[0].path_mtu, small, "not yet");
    assert_eq!(r.stats.pmtu_raised + r.stats.plpmtud_raised, 0);
    assert_eq!(r.stats.plpmtud_probes, 0, "nothing probed yet");
    l.now += ddpdk_control::runtime::PMTU_AGE / 2;
    l.run_until_quiet();
    let r = l.ka[0].report();
    match (grown, discovery) {
        (true, false) => {
            assert_eq!(r.assocs[0].path_mtu, link, "taken back to the link's");
            assert_eq!(r.stats.pmtu_raised, 1);
        }
        (true, true) => {
            assert_eq!(
                r.assocs[0].path_mtu, link,
                "a probe confirmed the link's size"
            );
            assert_eq!((r.stats.pmtu_raised, r.stats.plpmtud_raised), (0, 1));
            assert_eq!(r.stats.plpmtud_probes, 1);
        }
        (false, false) => {
            assert_eq!(
                r.assocs[0].path_mtu, link,
                "taken back to the link's on trust"
            );
        }
        (false, true) => {
            assert_eq!(r.assocs[0].path_mtu, small, "no probe passed: not raised");
            assert_eq!(r.stats.plpmtud_probes, 1);
            assert_eq!(
                router.dropped.load(Relaxed),
                dropped + 1,
                "the probe, and nothing else, was too big"
            );
            assert_eq!(r.stats.pmtu_lowered, lowered, "its PTB lowered nothing");
        }
    }
    let (dropped, lowered) = (router.dropped.load(Relaxed), r.stats.pmtu_lowered);
    router.longest.store(0, Relaxed);
    l.ca.submit(
        l.conn,
        tagged(
            2,
            reg.stag,
            reg.to_base + len as u64,
            data[len..2 * len].to_vec(),
        ),
    )
    .unwrap();
    l.run_until("the write after the estimate aged", |l| done(l, 2));
    let r = l.ka[0].report();
    if grown {
        assert_eq!(router.dropped.load(Relaxed), dropped, "nothing too big");
        assert_eq!(r.assocs[0].path_mtu, link);
        assert!(
            router.longest.load(Relaxed) as usize > HOP_MTU,
            "full-size packets again: {}",
            router.longest.load(Relaxed)
        );
    } else if discovery {
        assert_eq!(router.dropped.load(Relaxed), dropped, "no DATA too big");
        assert_eq!(r.stats.pmtu_lowered, lowered);
        assert_eq!(r.assocs[0].path_mtu, small);
    } else {
        assert!(
            router.dropped.load(Relaxed) > dropped,
            "full size tried again"
        );
        assert_eq!(r.stats.pmtu_lowered, lowered + 1, "and lowered again");
        assert_eq!(r.assocs[0].path_mtu, small);
    }
    let got = l.cb.memory().region(region).unwrap();
    assert_eq!(got.crc32c(0, 2 * len).unwrap(), crc32c(&data[..2 * len]));
}

#[test]
fn a_lowered_path_mtu_ages_out_when_the_path_grew_again_rfc1191_6_3() {
    a_lowered_path_mtu_ages_out(IpAddr::V4(B4), true, false);
    a_lowered_path_mtu_ages_out(IpAddr::V6(B6), true, false);
}

#[test]
fn a_lowered_path_mtu_that_aged_out_is_found_again_rfc8201_5_3() {
    a_lowered_path_mtu_ages_out(IpAddr::V4(B4), false, false);
    a_lowered_path_mtu_ages_out(IpAddr::V6(B6), false, false);
}

#[test]
fn an_aged_path_mtu_is_raised_by_a_probe_that_passed_rfc8899_4_6_2() {
    a_lowered_path_mtu_ages_out(IpAddr::V4(B4), true, true);
    a_lowered_path_mtu_ages_out(IpAddr::V6(B6), true, true);
}

#[test]
fn an_aged_path_mtu_is_not_raised_where_the_probe_fails_rfc8899_4_6_2() {
    a_lowered_path_mtu_ages_out(IpAddr::V4(B4), false, true);
    a_lowered_path_mtu_ages_out(IpAddr::V6(B6), false, true);
}

/// RFC 8899 §4.6.2 with RFC 9260 §7.3, on a link keeping 73 bytes of each packet for ESP:
/// ICMP's lowering and a probe's PTB must read one hop's size alike. The 1280-byte hop's ICMP
/// lowered the association to 1280 - 20 - 73 = 1187 (the headroom kept, as the link's own
/// size keeps it); ten minutes on, the search's probe draws the same hop's PTB. Taken without
/// the headroom, the PTB said 1260: the search probed and confirmed it, and the association
/// ran 73 bytes above what ICMP (and the link) allow it.
#[test]
fn a_probes_ptb_is_read_as_icmp_is_with_the_esp_headroom_rfc8899_4_6_2() {
    let server = IpAddr::V4(B4);
    let len = 64 * 1024;
    let (mut l, reg, _region, router, data) =
        behind_the_router_cfg(server, len, Some(1480), true, 73);
    assert_eq!(l.ka[0].report().assocs[0].path_mtu, 1500 - 20 - 73);
    l.ca.submit(l.conn, tagged(1, reg.stag, reg.to_base, data.clone()))
        .unwrap();
    l.run_until("the write", |l| done(l, 1));
    let lowered = HOP_MTU - 20 - 73;
    assert_eq!(l.ka[0].report().assocs[0].path_mtu, lowered);
    let dropped = router.dropped.load(Relaxed);
    l.now += ddpdk_control::runtime::PMTU_AGE;
    l.run_until_quiet();
    let r = l.ka[0].report();
    assert_eq!(
        r.stats.plpmtud_probes, 1,
        "the search's first probe, then its PTB"
    );
    assert_eq!(router.dropped.load(Relaxed), dropped + 1);
    assert_eq!(r.assocs[0].path_mtu, lowered, "ICMP's size, headroom kept");
}

/// RFC 1191 §5 and §6.3: an association that ICMP lowered and that then closed still ages the
/// peer's estimate for the associations after it, but nothing of its own is raised or counted.
/// `pmtu_raised` counted the closed association's raise; and once aging started RFC 8899
/// searches instead, a closed association's search (never probed: it cannot send) kept the
/// estimate for good, so every later association started lowered.
#[test]
fn a_closed_associations_estimate_ages_for_the_next_uncounted_rfc1191_6_3() {
    use ddpdk_control::runtime::{Op, PMTU_AGE};
    let server = IpAddr::V4(B4);
    let len = 64 * 1024;
    let (mut l, reg, _region, _router, data) = behind_the_router(server, len);
    l.ca.submit(l.conn, tagged(1, reg.stag, reg.to_base, data))
        .unwrap();
    l.run_until("the write", |l| done(l, 1));
    assert_eq!(l.ka[0].report().assocs[0].path_mtu, HOP_MTU - 20);
    l.ca.submit(l.conn, Op::Shutdown).unwrap();
    l.run_until("the end of the association", |l| closes(&l.ea) >= 1);
    l.run_until_quiet();
    l.now += PMTU_AGE;
    l.run_until_quiet();
    let r = l.ka[0].report();
    assert_eq!(
        r.stats.pmtu_raised + r.stats.plpmtud_raised,
        0,
        "nothing raised"
    );
    assert_eq!(r.stats.plpmtud_probes, 0);
    let conn2 = l.ca.connect(l.now, server, PORT).unwrap();
    let mtu_of = |l: &Lockstep<Router>| {
        l.ka[0]
            .report()
            .assocs
            .iter()
            .find(|a| a.conn == conn2)
            .map(|a| a.path_mtu)
    };
    l.run_until("the second association adopted", |l| mtu_of(l).is_some());
    assert_eq!(mtu_of(&l), Some(1480), "the estimate aged: the link's size");
}

/// (Review, rev3.) RFC 1191 §6.3 ("when a Datagram Too Big message is received, the
/// timestamp [of the per-destination PMTU entry] is set") and RFC 8201 §5.3 ("MUST NOT
/// attempt to detect an increase ... less than 5 minutes after a Packet Too Big message has
/// been received for the given path"): the interface's per-peer estimate is one for the path,
/// but each association ages it on its own clock. An association lowered at t0 (and closed),
/// a second one to the same peer whose own ICMP lowers the path further at t0 + 9 min: at
/// t0 + 11 min the first association's timer makes the interface forget the estimate the
/// path confirmed two minutes earlier, and a third association starts at the link's size.
#[test]
fn one_associations_timer_does_not_forget_a_path_mtu_another_renewed_rfc1191_6_3() {
    use ddpdk_control::conn::Indication;
    use ddpdk_control::runtime::{Op, PMTU_AGE};
    use ddpdk_control::session::Event as SessionEvent;
    use rt::{remote_write, session_event};
    let server = IpAddr::V4(B4);
    let len = 64 * 1024;
    let (mut l, reg, _region, router, data) = behind_the_router(server, len);
    let t0 = l.now;
    l.ca.submit(l.conn, tagged(1, reg.stag, reg.to_base, data.clone()))
        .unwrap();
    l.run_until("the first write", |l| done(l, 1));
    let closed = |l: &Lockstep<Router>, n: usize| {
        l.ea.iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::Indication {
                        indication: Indication::Closed(_),
                        ..
                    }
                )
            })
            .count()
            >= n
    };
    l.ca.submit(l.conn, Op::Shutdown).unwrap();
    l.run_until("the end of the first association", |l| closed(l, 1));
    l.run_until_quiet();
    // The second association, adopted at the interface's estimate (1280).
    let conn2 = l.ca.connect(l.now, server, PORT).unwrap();
    l.run_until("the second association", |l| connects(&l.ea) == 2);
    let apd = l.ca.memory_mut().alloc_pd();
    let bpd = l.cb.memory_mut().alloc_pd();
    let region2 = l.cb.memory_mut().alloc_region(len).unwrap();
    let reg2 =
        l.cb.memory_mut()
            .register(remote_write(bpd, region2, len as u64))
            .unwrap();
    l.ca.submit(
        conn2,
        Op::Initiate {
            stream: 1,
            pd: apd,
            private_data: Vec::new(),
        },
    )
    .unwrap();
    let sc1 = l.server_conn();
    let sc2 = |l: &Lockstep<Router>| {
        l.eb.iter().find_map(|e| match e {
            Event::Indication { conn, .. } if *conn != sc1 => Some(*conn),
            _ => None,
        })
    };
    l.run_until("the second Initiate", |l| {
        sc2(l).is_some_and(|c| {
            session_event(&l.eb, c, |e| {
                matches!(e, SessionEvent::InitiateReceived { .. })
            })
        })
    });
    let c2 = sc2(&l).unwrap();
    l.cb.submit(
        c2,
        Op::Accept {
            stream: 1,
            pd: bpd,
            private_data: Vec::new(),
        },
    )
    .unwrap();
    l.run_until("the second Accept", |l| {
        session_event(&l.ea, conn2, |e| matches!(e, SessionEvent::Accepted { .. }))
    });
    // Nine minutes after the first ICMP the path shrinks again: the second association's
    // packets draw an ICMP of their own, which lowers it and renews the path's estimate.
    router.hop.store(1100, Relaxed);
    l.now = t0 + PMTU_AGE * 9 / 10;
    l.run_until_quiet();
    l.ca.submit(conn2, tagged(2, reg2.stag, reg2.to_base, data.clone()))
        .unwrap();
    l.run_until("the second association's write", |l| done(l, 2));
    let mtu_of = |l: &Lockstep<Router>, c| {
        l.ka[0]
            .report()
            .assocs
            .iter()
            .find(|a| a.conn == c)
            .map(|a| a.path_mtu)
    };
    assert_eq!(
        mtu_of(&l, conn2),
        Some(1100 - 20),
        "the second lowered again"
    );
    l.ca.submit(conn2, Op::Shutdown).unwrap();
    l.run_until("the end of the second association", |l| closed(l, 2));
    l.run_until_quiet();
    // Two minutes after the path's last ICMP (eleven after the first association's).
    l.now = t0 + PMTU_AGE * 11 / 10;
    l.run_until_quiet();
    let conn3 = l.ca.connect(l.now, server, PORT).unwrap();
    l.run_until("the third association adopted", |l| {
        mtu_of(l, conn3).is_some()
    });
    assert_eq!(
        mtu_of(&l, conn3),
        Some(1100 - 20),
        "a new association starts at the path's estimate ICMP confirmed two minutes ago \
         (RFC 8201 §5.3: no increase within 5 minutes of a Packet Too Big for the path)"
    );
}

/// (Review, rev3.) RFC 5043 §9 with RFC 1191 §6.3: an association adopted at the
/// interface's lowered estimate announces (and receives up to) the MULPDU of the lowered path
/// MTU, while its peer sends at its own path MTU: once one side's estimate ages out (or, as
/// here, the other side never lowered), segments larger than the announced MULPDU arrive and
/// are refused as oversize. The server writes to the client over a second association the
/// client started at the estimate: the write must complete.
#[test]
fn a_peers_larger_segments_after_a_cached_lowered_start_are_taken_rfc5043_9() {
    use ddpdk_control::runtime::Op;
    use ddpdk_control::session::Event as SessionEvent;
    use rt::{remote_write, session_event};
    let server = IpAddr::V4(B4);
    let len = 64 * 1024;
    let (mut l, reg, _region, _router, data) = behind_the_router(server, len);
    l.ca.submit(l.conn, tagged(1, reg.stag, reg.to_base, data.clone()))
        .unwrap();
    l.run_until("the first write", |l| done(l, 1));
    l.ca.submit(l.conn, Op::Shutdown).unwrap();
    l.run_until("the end of the first association", |l| closes(&l.ea) >= 1);
    l.run_until_quiet();
    let conn2 = l.ca.connect(l.now, server, PORT).unwrap();
    l.run_until("the second association", |l| connects(&l.ea) == 2);
    let apd = l.ca.memory_mut().alloc_pd();
    let bpd = l.cb.memory_mut().alloc_pd();
    // The client's memory, for the server's write.
    let region2 = l.ca.memory_mut().alloc_region(len).unwrap();
    let reg2 =
        l.ca.memory_mut()
            .register(remote_write(apd, region2, len as u64))
            .unwrap();
    l.ca.submit(
        conn2,
        Op::Initiate {
            stream: 1,
            pd: apd,
            private_data: Vec::new(),
        },
    )
    .unwrap();
    let sc1 = l.server_conn();
    let sc2 = |l: &Lockstep<Router>| {
        l.eb.iter().find_map(|e| match e {
            Event::Indication { conn, .. } if *conn != sc1 => Some(*conn),
            _ => None,
        })
    };
    l.run_until("the second Initiate", |l| {
        sc2(l).is_some_and(|c| {
            session_event(&l.eb, c, |e| {
                matches!(e, SessionEvent::InitiateReceived { .. })
            })
        })
    });
    let c2 = sc2(&l).unwrap();
    l.cb.submit(
        c2,
        Op::Accept {
            stream: 1,
            pd: bpd,
            private_data: Vec::new(),
        },
    )
    .unwrap();
    l.run_until("the second Accept", |l| {
        session_event(&l.ea, conn2, |e| matches!(e, SessionEvent::Accepted { .. }))
    });
    assert_eq!(
        l.ka[0]
            .report()
            .assocs
            .iter()
            .find(|a| a.conn == conn2)
            .map(|a| a.path_mtu),
        Some(HOP_MTU - 20),
        "the client started at the estimate"
    );
    l.cb.submit(c2, tagged(7, reg2.stag, reg2.to_base, data.clone()))
        .unwrap();
    let server_done = |l: &Lockstep<Router>| {
        l.eb.iter()
            .any(|e| matches!(e, Event::Completion { completion, .. } if completion.wr_id == 7))
    };
    l.run_until("the server's write", server_done);
    let st = l.eb.iter().find_map(|e| match e {
        Event::Completion { completion, .. } if completion.wr_id == 7 => Some(completion.status),
        _ => None,
    });
    let oversize = l.ka[0].report().conn_totals.oversize_segments;
    assert_eq!(
        st,
        Some(Status::Success),
        "the server's write; client oversize {oversize}"
    );
    assert_eq!(oversize, 0);
    let got = l.ca.memory().region(region2).unwrap();
    assert_eq!(got.crc32c(0, len).unwrap(), crc32c(&data));
}

/// RFC 8899 §4.3 (black hole detection) and §5.3 (the search), over a path whose 1280-byte
/// hop drops what is too big without a word: ICMP is filtered. Before RFC 8899 discovery the
/// association retransmitted its full-size packets until Association.Max.Retrans ended it.
/// Now three T3-rtx expiries in a row of a full-size packet take the path MTU to BASE_PLPMTU,
/// the chunks already sent go as IP fragments (RFC 9260 §6.9), the write completes, and the
/// probes (HEARTBEAT + PAD, DF) find the hop's size from below, never above it.
fn through_a_black_hole(server: IpAddr) {
    use ddpdk_dataplane::sctp::plpmtud::{BASE_PLPMTU, PROBE_TIMER, SEARCH_STEP};
    let len = 64 * 1024;
    let (mut l, reg, region, router, data) = behind_the_router(server, 2 * len);
    router.silent.store(true, Relaxed);
    let ip = Interface::ip_header_len(server);
    let link = 1500 - ip;
    let hop = HOP_MTU - ip;
    l.ca.submit(
        l.conn,
        tagged(1, reg.stag, reg.to_base, data[..len].to_vec()),
    )
    .unwrap();
    l.run_until("the write through the black hole", |l| done(l, 1));
    let r = l.ka[0].report();
    assert!(
        router.dropped.load(Relaxed) > 0,
        "full-size packets vanished"
    );
    assert_eq!(r.iface.icmp_too_big, 0, "and no ICMP told of it");
    assert_eq!(r.stats.plpmtud_black_holes, 1, "{:?}", r.stats);
    assert!(r.assocs[0].path_mtu < link, "{}", r.assocs[0].path_mtu);
    // The search: probes lost wait PROBE_TIMER each; a probe that passes raises the path MTU.
    for _ in 0..40 {
        l.now += PROBE_TIMER;
        l.run_until_quiet();
    }
    let r = l.ka[0].report();
    let mtu = r.assocs[0].path_mtu;
    assert!(
        mtu <= hop && hop - mtu <= SEARCH_STEP,
        "the hop's size ({hop}) found from below: {mtu}"
    );
    assert!(mtu > BASE_PLPMTU, "above BASE_PLPMTU: {mtu}");
    assert!(r.stats.plpmtud_raised >= 1, "{:?}", r.stats);
    // RFC 5043 §9 item 1: the ULP heard each move: down to BASE_PLPMTU's MULPDU, then up to
    // the one it ends at.
    let told = mulpdu_changes(&l);
    assert_eq!(told.first(), Some(&mulpdu_of(BASE_PLPMTU)), "{told:?}");
    assert_eq!(told.last(), Some(&mulpdu_of(mtu)), "{told:?}");
    assert!(r.stats.plpmtud_probes > r.stats.plpmtud_raised);
    assert!(
        router.longest.load(Relaxed) as usize <= HOP_MTU,
        "nothing larger crossed"
    );
    // A second write is cut at the size found and crosses whole: nothing more vanishes.
    let dropped = router.dropped.load(Relaxed);
    let t3 = r.assocs[0].sctp.t3_expiries;
    l.ca.submit(
        l.conn,
        tagged(2, reg.stag, reg.to_base + len as u64, data[len..].to_vec()),
    )
    .unwrap();
    l.run_until("the write at the path MTU found", |l| done(l, 2));
    assert_eq!(router.dropped.load(Relaxed), dropped, "nothing too big");
    assert_eq!(l.ka[0].report().assocs[0].sctp.t3_expiries, t3);
    let got = l.cb.memory().region(region).unwrap();
    assert_eq!(got.crc32c(0, 2 * len).unwrap(), crc32c(&data), "every byte");
    for k in l.ka.iter().chain(&l.kb) {
        assert!(
            k.report().unaccounted().is_empty(),
            "{:?}",
            k.report().unaccounted()
        );
    }
}

#[test]
fn a_black_hole_is_found_from_t3_and_its_size_by_probes_rfc8899_4_3_ipv4() {
    through_a_black_hole(IpAddr::V4(B4));
}

#[test]
fn a_black_hole_is_found_from_t3_and_its_size_by_probes_rfc8899_4_3_ipv6() {
    through_a_black_hole(IpAddr::V6(B6));
}

/// (Review) RFC 8899 §4.3 with RFC 4301 §7 and RFC 8200 §4.5: an IPv6 association under ESP
/// (the link keeps 64 bytes for it; AES-GCM transport adds 37) behind a silent 1280-byte hop.
/// Its full-size packets vanish; the black hole takes the path MTU to BASE_PLPMTU, but the
/// chunks already sent at the link's size cannot be re-chunked, and an IPsec port cuts no
/// source fragments (a non-initial one carries no ports for the policy): they were resent
/// whole and lost for ever, the write never completing while HEARTBEATs kept the association
/// alive. The sealed packet is fragmented instead, at the discovered size.
#[test]
fn an_ipv6_black_hole_under_esp_is_crossed_by_fragments_of_the_sealed_packets_rfc8899_4_3() {
    use ddpdk_dataplane::sctp::plpmtud::PROBE_TIMER;
    let server = IpAddr::V6(B6);
    let len = 64 * 1024;
    let (mut l, reg, region, router, data) =
        behind_the_router_cfg(server, len, Some(1500 - 40), true, 64);
    router.silent.store(true, Relaxed);
    router.seal_overhead.store(37, Relaxed);
    l.ca.submit(l.conn, tagged(1, reg.stag, reg.to_base, data.clone()))
        .unwrap();
    l.run_until("the write through the black hole under ESP", |l| done(l, 1));
    let r = l.ka[0].report();
    assert!(
        router.dropped.load(Relaxed) > 0,
        "full-size packets vanished"
    );
    assert_eq!(r.stats.plpmtud_black_holes, 1, "{:?}", r.stats);
    assert!(
        router.sealed_fragmented.load(Relaxed) > 0,
        "the chunks sent at the old size crossed as fragments of the sealed packet"
    );
    let got = l.cb.memory().region(region).unwrap();
    assert_eq!(got.crc32c(0, len).unwrap(), crc32c(&data), "every byte");
    // BASE_PLPMTU sealed (1200 + 40 + 37) crosses whole: its probe confirms it, and the
    // search finds the hop from there with whole probes, none fragmented.
    let cut = router.sealed_fragmented.load(Relaxed);
    for _ in 0..40 {
        l.now += PROBE_TIMER;
        l.run_until_quiet();
    }
    let r = l.ka[0].report();
    let mtu = r.assocs[0].path_mtu;
    assert!(mtu >= 1280 - 40 - 64 && mtu + 40 + 37 <= HOP_MTU, "{mtu}");
    assert_eq!(
        router.sealed_fragmented.load(Relaxed),
        cut,
        "probes go whole"
    );
    assert_eq!(r.assocs[0].state, "Established");
}

/// (Review) RFC 8899 §5.1.2 with RFC 8200 §5: over IPv6, BASE_PLPMTU sealed in a tunnel with
/// AES-CBC (1200 + 40 + up to 97 bytes) is larger than a 1280-byte hop, which every IPv6 path
/// may have. After the black hole every packet at BASE_PLPMTU vanished too, and the write
/// never completed. The association's BASE_PLPMTU leaves the link's ESP headroom (97 bytes
/// here) of 1280: what it sends after the black hole, and its probe of that size, cross
/// whole.
#[test]
fn base_plpmtu_leaves_room_for_esp_in_ipv6s_minimum_link_rfc8899_5_1_2() {
    use ddpdk_dataplane::sctp::plpmtud::{State, PROBE_TIMER};
    let server = IpAddr::V6(B6);
    let len = 64 * 1024;
    let headroom = 97;
    let (mut l, reg, region, router, data) =
        behind_the_router_cfg(server, 2 * len, Some(1500 - 40), true, headroom);
    router.silent.store(true, Relaxed);
    router.seal_overhead.store(headroom as u64, Relaxed);
    l.ca.submit(
        l.conn,
        tagged(1, reg.stag, reg.to_base, data[..len].to_vec()),
    )
    .unwrap();
    l.run_until("the write through the black hole", |l| done(l, 1));
    let r = l.ka[0].report();
    assert_eq!(r.stats.plpmtud_black_holes, 1, "{:?}", r.stats);
    let base = (1280 - 40 - headroom) & !3;
    assert_eq!(r.assocs[0].path_mtu, base);
    // A second write, cut at that size: it crosses whole, sealed.
    let dropped = router.dropped.load(Relaxed);
    router.longest.store(0, Relaxed);
    l.ca.submit(
        l.conn,
        tagged(2, reg.stag, reg.to_base + len as u64, data[len..].to_vec()),
    )
    .unwrap();
    l.run_until("the write at BASE_PLPMTU", |l| done(l, 2));
    assert_eq!(router.dropped.load(Relaxed), dropped, "nothing vanished");
    assert!(router.longest.load(Relaxed) as usize <= HOP_MTU);
    let got = l.cb.memory().region(region).unwrap();
    assert_eq!(got.crc32c(0, 2 * len).unwrap(), crc32c(&data), "every byte");
    // Its probe passes: BASE is left for the search, which finds nothing larger that
    // crosses whole, and the association lives on.
    for _ in 0..8 {
        l.now += PROBE_TIMER;
        l.run_until_quiet();
    }
    let r = l.ka[0].report();
    let p = r.assocs[0].plpmtud.unwrap();
    assert_eq!(p.base, base);
    assert!(p.stats.probes_acked >= 1, "{p:?}");
    assert!(
        matches!(p.state, State::Searching | State::SearchComplete),
        "BASE_PLPMTU confirmed: {p:?}"
    );
    assert!(r.assocs[0].path_mtu >= base, "{}", r.assocs[0].path_mtu);
    assert_eq!(r.assocs[0].state, "Established");
}

/// (Review of the above) The interface kept a lowered IPv6 path MTU at 1280 at least (RFC
/// 8201 §4, for source fragments), but under ESP it is the size before sealing: after the
/// black hole it held 1280, not BASE_PLPMTU's 1180, and a chunk of an inner packet between
/// the two (here one write of 1150 bytes: 1234 bytes of IPv6, 1331 sealed) left whole and
/// was lost for good; nor could `on_t3` see a black hole again below BASE_PLPMTU. The entry
/// is the size before sealing, and such a packet crosses in fragments of the sealed one.
#[test]
fn a_chunk_between_base_plpmtu_and_1280_crosses_sealed_rfc8899_4_3() {
    let server = IpAddr::V6(B6);
    let headroom = 97;
    let (mut l, reg, region, router, data) =
        behind_the_router_cfg(server, 1150, Some(1500 - 40), true, headroom);
    router.silent.store(true, Relaxed);
    router.seal_overhead.store(headroom as u64, Relaxed);
    l.ca.submit(l.conn, tagged(1, reg.stag, reg.to_base, data.clone()))
        .unwrap();
    l.run_until("the write in the gap", |l| done(l, 1));
    let r = l.ka[0].report();
    assert_eq!(r.stats.plpmtud_black_holes, 1, "{:?}", r.stats);
    let base = (1280 - 40 - headroom) & !3;
    assert_eq!(
        l.ka[0].interface().lowered_path_mtu(server),
        Some(base + 40),
        "the size before sealing, below 1280: what a later association starts at"
    );
    assert!(router.sealed_fragmented.load(Relaxed) > 0);
    let got = l.cb.memory().region(region).unwrap();
    assert_eq!(got.crc32c(0, 1150).unwrap(), crc32c(&data), "every byte");
}

/// (Review of the above) RFC 4301 §8.1 with RFC 8899 §5.4: IPv4 in an IPv6 tunnel. After a
/// black hole, IPv4 packets above 576 bytes leave without DF for the routers to fragment,
/// but sealed in an IPv6 tunnel no router fragments them, and BASE_PLPMTU sealed (1200 +
/// 20 + 97 here) is larger than a 1280-byte hop: the association never delivered again. An
/// IPv4 packet without DF is fragmented by the port once sealed, as IPv6 is.
#[test]
fn ipv4_in_an_ipv6_tunnel_crosses_a_black_hole_rfc4301_8_1() {
    use ddpdk_dataplane::sctp::plpmtud::BASE_PLPMTU;
    let server = IpAddr::V4(B4);
    let len = 64 * 1024;
    let headroom = 97;
    let (mut l, reg, region, router, data) =
        behind_the_router_cfg(server, 2 * len, Some(1500 - 20), true, headroom);
    router.silent.store(true, Relaxed);
    router.seal_overhead.store(headroom as u64, Relaxed);
    router.outer_v6.store(true, Relaxed);
    l.ca.submit(
        l.conn,
        tagged(1, reg.stag, reg.to_base, data[..len].to_vec()),
    )
    .unwrap();
    l.run_until("the write through the black hole", |l| done(l, 1));
    let r = l.ka[0].report();
    assert_eq!(r.stats.plpmtud_black_holes, 1, "{:?}", r.stats);
    assert_eq!(r.assocs[0].path_mtu, BASE_PLPMTU);
    l.ca.submit(
        l.conn,
        tagged(2, reg.stag, reg.to_base + len as u64, data[len..].to_vec()),
    )
    .unwrap();
    l.run_until("the write at BASE_PLPMTU", |l| done(l, 2));
    assert!(router.sealed_fragmented.load(Relaxed) > 0);
    assert!(router.longest.load(Relaxed) as usize <= HOP_MTU);
    let got = l.cb.memory().region(region).unwrap();
    assert_eq!(got.crc32c(0, 2 * len).unwrap(), crc32c(&data), "every byte");
}

/// RFC 8899 §5.4: "Some paths could be unable to sustain packets of the BASE_PLPMTU size ...
/// methods such as endpoint IP fragmentation [enable] the PL sender to communicate using
/// packets smaller than the BASE_PLPMTU." A silent IPv4 hop of 1000 bytes (ICMP filtered):
/// the black hole takes the path MTU to BASE_PLPMTU, whose 1220-byte packets the hop drops
/// too while they carry DF, and the association died of Association.Max.Retrans. While
/// BASE_PLPMTU is unconfirmed, what is not a probe leaves without DF above 576 bytes: the
/// router fragments it, the server reassembles it, every byte arrives; the probes (DF) keep
/// failing, so discovery stays below BASE confirmed (ERROR).
#[test]
fn a_silent_hop_below_base_plpmtu_is_crossed_by_ip_fragmentation_rfc8899_5_4() {
    use ddpdk_dataplane::sctp::plpmtud::{BASE_PLPMTU, PROBE_TIMER};
    let server = IpAddr::V4(B4);
    let len = 64 * 1024;
    let (mut l, reg, region, router, data) = behind_the_router(server, len);
    router.silent.store(true, Relaxed);
    router.hop.store(1000, Relaxed);
    l.ca.submit(l.conn, tagged(1, reg.stag, reg.to_base, data.clone()))
        .unwrap();
    l.run_until("the write through a silent 1000-byte hop", |l| done(l, 1));
    let r = l.ka[0].report();
    assert_eq!(r.stats.plpmtud_black_holes, 1, "{:?}", r.stats);
    assert_eq!(r.assocs[0].path_mtu, BASE_PLPMTU);
    assert!(
        router.fragmented.load(Relaxed) > 0,
        "the router fragmented what left without DF"
    );
    assert!(router.longest.load(Relaxed) <= 1000);
    let got = l.cb.memory().region(region).unwrap();
    assert_eq!(got.crc32c(0, len).unwrap(), crc32c(&data), "every byte");
    // The probes of BASE_PLPMTU (DF) keep failing: nothing is raised, and the association
    // lives on.
    for _ in 0..8 {
        l.now += PROBE_TIMER;
        l.run_until_quiet();
    }
    let r = l.ka[0].report();
    assert_eq!(r.stats.plpmtud_raised, 0);
    assert_eq!(r.assocs[0].state, "Established");
}

/// (Review) RFC 8899 §5.4 with RFC 4301 §8.2.1: while discovery is in BASE after a
/// black hole behind a silent 1000-byte hop, an ESP SA's path MTU changing anywhere (the port's
/// generation moves; this SA's PMTU, 1400 bytes of SCTP, lowers nothing) makes `esp_path_mtu`
/// rewrite the peer's interface entry to path MTU + header (1220): DF is back on every
/// 1220-byte packet while `fragments_allowed()` still holds, and the hop drops them again.
#[test]
fn an_sas_path_mtu_in_base_keeps_ip_fragmentation_rfc8899_5_4() {
    use ddpdk_dataplane::sctp::plpmtud::BASE_PLPMTU;
    let server = IpAddr::V4(B4);
    let len = 64 * 1024;
    let (mut l, reg, region, router, data) = behind_the_router(server, len);
    router.silent.store(true, Relaxed);
    router.hop.store(1000, Relaxed);
    l.ca.submit(l.conn, tagged(1, reg.stag, reg.to_base, data.clone()))
        .unwrap();
    l.run_until("the black hole", |l| {
        l.ka[0].report().stats.plpmtud_black_holes == 1
    });
    assert_eq!(l.ka[0].report().assocs[0].path_mtu, BASE_PLPMTU);
    // Some SA learnt a path MTU (here the one protecting this association: 1400, not below
    // the path MTU in use).
    router.sa_sctp_mtu.store(1400, Relaxed);
    router.sa_generation.fetch_add(1, Relaxed);
    l.step();
    l.run_until("the write through a silent 1000-byte hop", |l| done(l, 1));
    let got = l.cb.memory().region(region).unwrap();
    assert_eq!(got.crc32c(0, len).unwrap(), crc32c(&data), "every byte");
}

/// (Review) RFC 8899 §5.1.2 with RFC 1191 §5: the 576-byte entry is no path MTU anyone measured: it only clears DF
/// while BASE_PLPMTU is unconfirmed. An association that ends in BASE leaves it behind (its
/// slot's `pmtu_lowered_at` is None, nothing ages it), and the next association to the peer
/// adopts it at `lowered_path_mtu` as an ICMP estimate (RFC 1191 §5): it runs at 556 bytes of
/// SCTP, below BASE_PLPMTU (RFC 8899 §5.1.2: the smallest size discovery uses), for PMTU_AGE
/// (10 minutes) before any probe (its Plpmtud `set()` to SEARCH_COMPLETE with no timer).
#[test]
fn a_later_association_does_not_adopt_the_fragmentation_floor_rfc8899_5_1_2() {
    use ddpdk_control::runtime::Op;
    use ddpdk_dataplane::sctp::plpmtud::BASE_PLPMTU;
    let server = IpAddr::V4(B4);
    let len = 64 * 1024;
    let (mut l, reg, _region, router, data) = behind_the_router(server, len);
    router.silent.store(true, Relaxed);
    router.hop.store(1000, Relaxed);
    l.ca.submit(l.conn, tagged(1, reg.stag, reg.to_base, data.clone()))
        .unwrap();
    l.run_until("the write through a silent 1000-byte hop", |l| done(l, 1));
    assert_eq!(l.ka[0].report().stats.plpmtud_black_holes, 1);
    l.ca.submit(l.conn, Op::Shutdown).unwrap();
    l.run_until("the end of the first association", |l| closes(&l.ea) >= 1);
    l.run_until_quiet();
    let _conn2 = l.ca.connect(l.now, server, PORT).unwrap();
    l.run_until("the second association", |l| connects(&l.ea) == 2);
    let assocs = l.ka[0].report().assocs;
    let second = assocs
        .iter()
        .find(|a| a.state == "Established")
        .expect("the second");
    assert!(
        second.path_mtu >= BASE_PLPMTU,
        "the new association starts at {} bytes, below BASE_PLPMTU",
        second.path_mtu
    );
}

/// RFC 8899 §4.3 ("excessive loss of data sent with a specific packet size"): the size that
/// vanishes is the packet's, not its first chunk's. Writes of 700 bytes go two DATA chunks
/// to a packet (RFC 9260 §6.10), and E3 retransmits them so bundled (§6.3.3): each packet is
/// larger than the 1280-byte hop and is dropped without a word, though no chunk alone is
/// above BASE_PLPMTU. Taking the first chunk's size for the packet's never finds the black
/// hole: the writes never complete and Association.Max.Retrans ends the association.
#[test]
fn a_black_hole_of_bundled_small_chunks_is_found_rfc8899_4_3() {
    const SMALL: usize = 700;
    const COUNT: usize = 16;
    let server = IpAddr::V4(B4);
    let len = SMALL * COUNT;
    let (mut l, reg, region, router, data) = behind_the_router(server, len);
    router.silent.store(true, Relaxed);
    for k in 0..COUNT {
        let at = k * SMALL;
        let op = tagged(
            k as u64 + 1,
            reg.stag,
            reg.to_base + at as u64,
            data[at..at + SMALL].to_vec(),
        );
        l.ca.submit(l.conn, op).unwrap();
    }
    l.run_until("the bundled writes through the black hole", |l| {
        done(l, COUNT)
    });
    let r = l.ka[0].report();
    assert!(router.dropped.load(Relaxed) > 0, "bundled packets vanished");
    assert_eq!(r.stats.plpmtud_black_holes, 1, "{:?}", r.stats);
    let got = l.cb.memory().region(region).unwrap();
    assert_eq!(got.crc32c(0, len).unwrap(), crc32c(&data), "every byte");
}

/// RFC 8899 §5.1.2 MAX_PLPMTU: "the largest size of PLPMTU ... the local interface MTU".
/// With the SCTP configuration's default path MTU (1480, IPv4's on a 1500-byte link), an
/// IPv6 association runs at 1460 on the 1500-byte link; after a black hole its search must
/// not probe above the link. It probed 1480 (a 1520-byte IPv6 packet, that no 1500-byte link
/// sends), lost it MAX_PROBES times, and ended below the link's size.
#[test]
fn the_search_after_a_black_hole_never_probes_above_the_link_rfc8899_5_1_2() {
    use ddpdk_dataplane::sctp::plpmtud::PROBE_TIMER;
    let server = IpAddr::V6(B6);
    let len = 64 * 1024;
    let (mut l, reg, _region, router, data) = behind_the_router_with(server, len, None);
    let link = 1500 - Interface::ip_header_len(server);
    assert_eq!(l.ka[0].report().assocs[0].path_mtu, link);
    router.silent.store(true, Relaxed);
    l.ca.submit(l.conn, tagged(1, reg.stag, reg.to_base, data.clone()))
        .unwrap();
    l.run_until("the write through the black hole", |l| done(l, 1));
    assert_eq!(l.ka[0].report().stats.plpmtud_black_holes, 1);
    // The hop heals to the link's own size: whatever is larger than the link is dropped.
    router.hop.store(1500, Relaxed);
    let dropped = router.dropped.load(Relaxed);
    for _ in 0..40 {
        l.now += PROBE_TIMER;
        l.run_until_quiet();
    }
    assert_eq!(
        router.dropped.load(Relaxed),
        dropped,
        "nothing larger than the link was sent"
    );
    assert_eq!(
        l.ka[0].report().assocs[0].path_mtu,
        link,
        "the link's size found"
    );
}

/// (Review) RFC 1191 §6.3: "only an ICMP that lowered or named the size in use renews the
/// aging clocks". On a link keeping ESP headroom, the size in use
/// (1280 - 20 - 73 = 1187) is named by an ICMP of 1280, exactly what lowered it
/// (`lower_path_mtu` takes the headroom off). `path_too_big` tests `mtu - 20 <= path_mtu`
/// without the headroom, so with headroom > 0 an ICMP that names the size in use never
/// confirms: the estimate ages from the first ICMP, not the last. Without the headroom
/// (control case) the same ICMP renews it.
fn a_repeat_icmp_renews(headroom: usize) {
    use ddpdk_control::runtime::PMTU_AGE;
    let server = IpAddr::V4(B4);
    let len = 64 * 1024;
    let (mut l, reg, _region, router, data) =
        behind_the_router_cfg(server, len, Some(1480), false, headroom);
    l.ca.submit(l.conn, tagged(1, reg.stag, reg.to_base, data.clone()))
        .unwrap();
    l.run_until("the write", |l| done(l, 1));
    let lowered = HOP_MTU - 20 - headroom;
    assert_eq!(l.ka[0].report().assocs[0].path_mtu, lowered);
    l.run_until_quiet();
    // 9/10 of PMTU_AGE on, the same hop's ICMP again (say, for a packet delayed in a queue).
    l.now += PMTU_AGE * 9 / 10;
    l.run_until_quiet();
    let mut frame = router.last_sctp.lock().unwrap().clone().unwrap();
    // About a packet sent before the path MTU fell, as long as the link: the hop drops only
    // what is larger than the MTU it names (an ICMP saying otherwise is ignored).
    frame[16..18].copy_from_slice(&1500u16.to_be_bytes());
    frame[24..26].fill(0);
    let sum = checksum(&frame[14..34], 0);
    frame[24..26].copy_from_slice(&sum.to_be_bytes());
    let mut icmp = vec![HeapBuf::new(Router::icmp(&frame, 0, HOP_MTU as u32))];
    let ignored = l.ka[0].report().stats.icmp_ignored;
    router.back.as_ref().unwrap().tx_burst(0, &mut icmp);
    l.run_until_quiet();
    let r = l.ka[0].report();
    assert_eq!(
        r.stats.icmp_ignored,
        ignored + 1,
        "the ICMP reached the association"
    );
    assert_eq!(r.assocs[0].path_mtu, lowered);
    // 1.1 PMTU_AGE after the first ICMP, 0.2 after the confirming one: not aged.
    l.now += PMTU_AGE / 5;
    l.run_until_quiet();
    let r = l.ka[0].report();
    assert_eq!(
        (r.assocs[0].path_mtu, r.stats.pmtu_raised),
        (lowered, 0),
        "headroom {headroom}: the ICMP naming the size in use renewed the estimate"
    );
}

#[test]
fn an_icmp_naming_the_size_in_use_renews_the_estimate_rfc1191_6_3() {
    a_repeat_icmp_renews(0);
}

#[test]
fn an_icmp_naming_the_size_in_use_renews_the_estimate_with_esp_headroom_rfc1191_6_3() {
    a_repeat_icmp_renews(73);
}

/// (Review) RFC 1191 §6.3 / RFC 8899 §4.6.2 with a link keeping 73 bytes for ESP: the
/// association's link size is 1500 - 20 - 73 = 1407, MAX_PLPMTU is whole words, 1404. The
/// aged estimate's search confirms 1404, and `plpmtud()` compares it with `link_mtu` (1407):
/// not at the link's size, so the interface is told 1424 instead of forgetting the lowered
/// estimate, for good (nothing ages it: pmtu_lowered_at is None). Raising on trust forgot it. A later association to the same peer then starts from the interface's 1424,
/// less the headroom again (1331), not the link's 1407.
#[test]
fn an_aged_estimate_searched_back_to_the_link_is_forgotten_with_esp_headroom_rfc8899_4_6_2() {
    use ddpdk_control::runtime::PMTU_AGE;
    let server = IpAddr::V4(B4);
    let len = 64 * 1024;
    let (mut l, reg, _region, router, data) =
        behind_the_router_cfg(server, len, Some(1480), true, 73);
    l.ca.submit(l.conn, tagged(1, reg.stag, reg.to_base, data.clone()))
        .unwrap();
    l.run_until("the write", |l| done(l, 1));
    assert_eq!(l.ka[0].report().assocs[0].path_mtu, HOP_MTU - 20 - 73);
    assert!(l.ka[0].interface().lowered_path_mtu(server).is_some());
    router.hop.store(1500, Relaxed);
    l.now += PMTU_AGE;
    l.run_until_quiet();
    let r = l.ka[0].report();
    assert_eq!(r.stats.plpmtud_raised, 1, "{:?}", r.stats);
    assert!(r.assocs[0].path_mtu >= 1404, "{}", r.assocs[0].path_mtu);
    assert_eq!(
        l.ka[0].interface().lowered_path_mtu(server),
        None,
        "the path carries the link's size again: the lowered estimate is forgotten"
    );
}

/// (Review; older than RFC 8899 discovery) RFC 1191 §5 with the link's ESP headroom: the
/// interface's per-peer entry is written as the association's path MTU plus the IP header
/// (1187 + 20 = 1207: the headroom already off), and a later association to the peer reads
/// it with `lower_path_mtu`, which takes the headroom off again: 1114, not the 1187 the hop
/// allows. The same holds for an entry `plpmtud()` writes after a search.
#[test]
fn a_later_association_reads_the_cached_estimate_with_the_headroom_once_rfc1191_5() {
    let server = IpAddr::V4(B4);
    let len = 64 * 1024;
    let (mut l, reg, _region, _router, data) =
        behind_the_router_cfg(server, len, Some(1480), false, 73);
    l.ca.submit(l.conn, tagged(1, reg.stag, reg.to_base, data.clone()))
        .unwrap();
    l.run_until("the write", |l| done(l, 1));
    let lowered = HOP_MTU - 20 - 73;
    assert_eq!(l.ka[0].report().assocs[0].path_mtu, lowered);
    l.ca.submit(l.conn, ddpdk_control::runtime::Op::Shutdown)
        .unwrap();
    l.run_until("the end of the first association", |l| closes(&l.ea) >= 1);
    l.run_until_quiet();
    let _conn2 = l.ca.connect(l.now, server, PORT).unwrap();
    l.run_until("the second association", |l| connects(&l.ea) == 2);
    l.run_until_quiet();
    let r = l.ka[0].report();
    let mtus: Vec<usize> = r.assocs.iter().map(|a| a.path_mtu).collect();
    assert_eq!(
        mtus.last(),
        Some(&lowered),
        "all {mtus:?}; iface entry {:?}",
        l.ka[0].interface().lowered_path_mtu(server)
    );
}
