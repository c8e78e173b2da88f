//! The link and network layer under attack: arbitrary frames (records of [len_hi, len_lo,
//! bytes...]) into `net::Interface`, interleaved with framing to neighbours. Nothing may panic;
//! an SCTP packet is handed on only for one of our addresses and our MAC; a reply never
//! exceeds the output buffer; the neighbour table never names a multicast MAC.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use ddpdk_dataplane::net::{Interface, Rx};
use ddpdk_dataplane::sctp::Instant;
use libfuzzer_sys::fuzz_target;

const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const IP4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);

fuzz_target!(|data: &[u8]| {
    let mut i = Interface::new(MAC, Some(IP4), Some(IP6));
    let mut out = [0u8; 128];
    let mut frame_out = vec![0u8; 256];
    let mut now = Instant::from_nanos(1_000_000_000);
    let peers = [
        IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2)),
    ];
    let mut rest = data;
    while rest.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        let frame = &rest[2..2 + len];
        rest = &rest[2 + len..];
        // The reassembly timer runs on this clock (RFC 8200 §4.5's 60 s: 200 frames).
        i.set_time(now);
        match i.receive(frame, &mut out) {
            Rx::Sctp(f) => {
                assert!(i.is_ours(f.ip.dst()));
                assert_eq!(f.dst_mac, MAC);
            }
            Rx::Reply(n) => assert!(n <= out.len() && n >= 42),
            // A reassembled datagram is a whole frame in `out`, parsed as any other.
            Rx::Fragment(Some(n)) => assert!(n <= out.len()),
            Rx::TooBig(t) => assert!(i.is_ours(t.local)),
            Rx::EspTooBig(t) => assert!(i.is_ours(t.local)),
            // RFC 9260 Appendix C ICMP8: only an ICMP quoting a packet from our own address.
            Rx::ProtocolUnreachable(t) => assert!(i.is_ours(t.local)),
            Rx::Fragment(None) | Rx::Consumed | Rx::Dropped(_) => {}
        }
        now += Duration::from_millis(300);
        for p in peers {
            let h = Interface::header_len(p);
            match i.frame_sctp(now, p, 12, &mut frame_out) {
                Ok(n) => {
                    assert_eq!(n, h + 12);
                    // A stale neighbour is solicited again, within the buffer.
                    let probe = i.probe_if_stale(now, p, &mut frame_out);
                    assert!(probe <= frame_out.len());
                }
                Err(u) => assert!(u.solicitation <= frame_out.len()),
            }
            if let Some(m) = i.neighbour(p) {
                assert_eq!(m[0] & 1, 0, "a multicast MAC learnt for {p}");
            }
        }
    }
});
