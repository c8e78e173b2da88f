//! Every frame of every golden capture (usrsctp, `../shared/vectors/`) through the link layer:
//! Ethernet II + IPv4 to the SCTP packet, with the addresses the vectors README gives.

mod pcap;

use std::net::{IpAddr, Ipv4Addr};

use ddpdk_dataplane::wire::link::{parse_sctp, IpInfo};

const CLIENT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const SERVER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const SERVER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

#[test]
fn every_captured_frame_slices_to_its_sctp_packet() {
    // Frame counts as the vectors README gives them.
    let expected = [
        ("abort.pcap", 11),
        ("assoc-ddp-default.pcap", 17),
        ("assoc-ddp-minimal.pcap", 17),
        ("assoc-loss.pcap", 95),
        ("assoc-no-adaptation.pcap", 5),
    ];
    assert_eq!(
        pcap::capture_names(),
        expected.map(|(n, _)| n.to_string()),
        "the captures the README describes"
    );
    for (name, count) in expected {
        let frames = pcap::read(name);
        assert_eq!(frames.len(), count, "{name}");
        for f in frames {
            let p = parse_sctp(&f.data).unwrap_or_else(|e| panic!("{name} #{}: {e}", f.number));
            let client_to_server = p.src_mac == CLIENT_MAC;
            let (src_ip, dst_ip, dst_mac) = if client_to_server {
                (CLIENT_IP, SERVER_IP, SERVER_MAC)
            } else {
                (SERVER_IP, CLIENT_IP, CLIENT_MAC)
            };
            assert_eq!(p.dst_mac, dst_mac, "{name} #{}", f.number);
            assert_eq!(
                (p.ip.src(), p.ip.dst()),
                (IpAddr::V4(src_ip), IpAddr::V4(dst_ip)),
                "{name} #{}",
                f.number
            );
            match p.ip {
                IpInfo::V4 { ttl, .. } => assert_eq!(ttl, 64, "{name} #{}", f.number),
                IpInfo::V6 { .. } => panic!("{name} #{}: the captures are IPv4", f.number),
            }
            // No IPv4 options and no Ethernet padding in the captures: SCTP is the rest.
            assert_eq!(p.sctp, &f.data[34..], "{name} #{}", f.number);
            // The client's SCTP port is 5001, the server's 5002 (README, common facts).
            let ports = (
                u16::from_be_bytes([p.sctp[0], p.sctp[1]]),
                u16::from_be_bytes([p.sctp[2], p.sctp[3]]),
            );
            assert_eq!(
                ports,
                if client_to_server {
                    (5001, 5002)
                } else {
                    (5002, 5001)
                },
                "{name} #{}",
                f.number
            );
        }
    }
}

#[test]
fn the_handshake_frames_have_df_clear_and_later_ones_set() {
    // README: DF on everything after the handshake's first three packets.
    for f in pcap::read("assoc-ddp-minimal.pcap") {
        let p = parse_sctp(&f.data).expect("parses");
        let IpInfo::V4 {
            dont_fragment, tos, ..
        } = p.ip
        else {
            panic!("IPv4")
        };
        assert_eq!(dont_fragment, f.number > 3, "frame {}", f.number);
        // No ECN in the minimal profile: no ECT marking anywhere.
        assert_eq!(tos, 0, "frame {}", f.number);
    }
}
