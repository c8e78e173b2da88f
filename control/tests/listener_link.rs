//! RFC 5043 §9: the MULPDU a connection's ULP is told is the path's, by the peer's address
//! family, from the first indication on. Found by the attack matrix over IPv6: the passive side
//! announced (and enforced) the IPv4 path's MULPDU to an IPv6 peer, because its path MTU was
//! set after the COOKIE ECHO had made the connection and indicated Connected.

#![allow(clippy::unwrap_used)]

use std::net::IpAddr;

use ddpdk_control::conn::{Accept, ConnConfig, Indication, Listener};
use ddpdk_control::memory::Memory;
use ddpdk_control::session::PendingLimit;
use ddpdk_dataplane::net::Interface;
use ddpdk_dataplane::sctp::{max_message, Config, Endpoint, Instant};

const LINK_MTU: usize = 1500;

fn listener(port: u16, key: u8, esp_headroom: usize) -> Listener {
    // The endpoint's own path MTU is deliberately the link's: set_link must take it over.
    let cfg = Config {
        local_port: port,
        path_mtu: LINK_MTU,
        ..Config::default()
    };
    let mut l = Listener::new(
        Endpoint::new(cfg, [key; 32]).unwrap(),
        ConnConfig::default(),
        PendingLimit::new(4),
    );
    l.set_link(LINK_MTU, esp_headroom);
    l
}

/// The MULPDU each side's ULP hears in Connected: (active, passive).
fn announced(active_ip: &str, passive_ip: &str, esp_headroom: usize) -> (usize, usize) {
    let now = Instant::from_nanos(1_000_000_000);
    let (ca, sa): (IpAddr, IpAddr) = (active_ip.parse().unwrap(), passive_ip.parse().unwrap());
    let (mut cl, mut sl) = (
        listener(7001, 1, esp_headroom),
        listener(7002, 2, esp_headroom),
    );
    let (cm, _) = Memory::new(64, 0, 1);
    let (sm, _) = Memory::new(64, 0, 2);
    let (mut buf, mut out) = (vec![0u8; 65536], vec![0u8; 65536]);
    let mut c = cl.connect(now, sa, 7002);
    let n = c.poll_transmit(now, &mut buf).unwrap(); // INIT
    let Accept::Reply(m) = sl.handle(now, ca, &buf[..n], &mut out, &sm) else {
        panic!("INIT ACK expected")
    };
    c.handle(now, &out[..m], &cm).unwrap();
    let n = c.poll_transmit(now, &mut buf).unwrap(); // COOKIE ECHO
    let Accept::Connection(mut s) = sl.handle(now, ca, &buf[..n], &mut out, &sm) else {
        panic!("connection expected")
    };
    while let Some(n) = s.poll_transmit(now, &mut buf) {
        c.handle(now, &buf[..n], &cm).unwrap(); // COOKIE ACK
    }
    let mulpdu = |inds: Vec<Indication>| {
        inds.iter()
            .find_map(|i| match i {
                Indication::Connected { mulpdu, .. } => Some(*mulpdu),
                _ => None,
            })
            .expect("Connected")
    };
    (
        mulpdu(std::iter::from_fn(|| c.poll_indication()).collect()),
        mulpdu(std::iter::from_fn(|| s.poll_indication()).collect()),
    )
}

/// What a connection over `peer`'s family on the link announces (the runtime's rule: the link
/// less the IP header and the ESP headroom, SACK room kept, RFC 5043 §9).
fn expected(peer: &str, esp_headroom: usize) -> usize {
    let path_mtu = LINK_MTU - Interface::ip_header_len(peer.parse().unwrap()) - esp_headroom;
    ddpdk_dataplane::ddp::mulpdu(max_message(path_mtu))
}

#[test]
fn both_sides_announce_the_mulpdu_of_their_family_5043_9() {
    for esp in [0, 64] {
        let v4 = announced("198.18.0.1", "198.18.0.2", esp);
        let v6 = announced("2001:db8::1", "2001:db8::2", esp);
        assert_eq!(
            v4,
            (expected("198.18.0.2", esp), expected("198.18.0.1", esp))
        );
        assert_eq!(
            v6,
            (expected("2001:db8::2", esp), expected("2001:db8::1", esp))
        );
        // IPv6's header is 20 bytes longer than IPv4's: so is nothing else.
        assert_eq!(v4.1 - v6.1, 20, "ESP headroom {esp}");
    }
}

/// RFC 9260 §3.2.2: an INIT's unrecognized parameters are reported in the INIT ACK, as many as
/// one packet holds (§6.10: no packet above the path MTU; the rest are left out, whole). The
/// packet is the path's of the peer's family: over IPv6 20 bytes less than over IPv4, and less
/// the ESP headroom, whatever the endpoint's own path MTU says.
#[test]
fn an_init_ack_fits_the_path_of_the_peers_family_3_2_2() {
    use ddpdk_dataplane::wire::crc32c;
    use ddpdk_dataplane::wire::sctp::{
        ChunkRepr, HeaderRepr, InitRepr, List, PacketBuilder, ParamRepr,
    };
    let value = [0x5a; 28];
    let mut params = vec![ParamRepr::AdaptationLayerIndication(1)];
    params.extend((0..60u16).map(|i| ParamRepr::Unknown {
        param_type: 0xC100 + i,
        value: &value,
    }));
    let init = ChunkRepr::Init(InitRepr {
        initiate_tag: 0x1234,
        a_rwnd: 65536,
        outbound_streams: 4,
        inbound_streams: 4,
        initial_tsn: 1000,
        params: List::new(&params),
    });
    let mut pkt = vec![0u8; 4096];
    let hdr = HeaderRepr {
        src_port: 7001,
        dst_port: 7002,
        verification_tag: 0,
    };
    let mut b = PacketBuilder::new(&mut pkt, &hdr).unwrap();
    b.push(&init).unwrap();
    let n = b.packet_len();
    pkt.truncate(n);
    crc32c::fill(&mut pkt);
    let (sm, _) = Memory::new(64, 0, 2);
    for esp in [0, 64] {
        for peer in ["198.18.0.1", "2001:db8::1"] {
            let mut l = listener(7002, 2, esp);
            let mut out = vec![0u8; 65536];
            let ip: IpAddr = peer.parse().unwrap();
            let Accept::Reply(m) = l.handle(Instant::from_nanos(1), ip, &pkt, &mut out, &sm) else {
                panic!("INIT ACK expected")
            };
            let path = LINK_MTU - Interface::ip_header_len(ip) - esp;
            // Within the path, and no room left for another report (4 + 32 bytes).
            assert!(
                m <= path && m + 36 > path,
                "{peer}, ESP {esp}: {m} of {path}"
            );
        }
    }
}
