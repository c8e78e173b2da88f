//! Any byte string as an Ethernet frame reaching a port with IPsec on: what policy reads of
//! it (its selectors, through IPv6 extension headers and AH, RFC 4301 §4.4.1.1) must come
//! back without a panic, with the upper layer and any ports within the frame; an ICMP
//! error's quote (§6.2) must read as the same bytes would as a frame of their own, turned
//! round, and nothing else may quote; the SPD must answer for any of them.
#![no_main]

use std::sync::OnceLock;

use ddpdk_dataplane::ipsec::{parse_config, Action, Direction, Flow, Framed, Spd};
use libfuzzer_sys::fuzz_target;

/// A rule set of each kind a deployment writes: SCTP protected by ports, ICMP by type, a
/// bypass, a discard, both families.
fn spd() -> &'static Spd {
    static SPD: OnceLock<Spd> = OnceLock::new();
    SPD.get_or_init(|| {
        let cfg = parse_config(
            "sa in 1000 aead_algo aes-128-gcm aead_key 0x000102030405060708090a0b0c0d0e0f10111213 mode transport\n\
             sp ipv4 in esp protect 1000 pri 10 src 198.18.0.0/24 proto sctp dport 5000:5000\n\
             sp ipv6 in esp protect 1000 pri 10 src 2001:db8::/64 proto sctp sport 1:9\n\
             sp ipv4 in esp bypass pri 5 proto 1 type 8\n\
             sp ipv6 in esp bypass pri 5 proto 58 type 128 code 0\n\
             sp ipv4 in esp discard pri 1 proto sctp\n",
        )
        .expect("the fuzz target's rule set parses");
        cfg.spd
    })
}

fuzz_target!(|frame: &[u8]| {
    let Framed::Ip(flow, l4) = Flow::parse(frame) else {
        return;
    };
    assert!(l4 <= frame.len(), "upper layer at {l4} of {}", frame.len());
    if flow.ports {
        assert!(l4 + 4 <= frame.len(), "ports past the frame's end");
    }
    // An ICMP error's quote reads as the same bytes given their own Ethernet header would,
    // turned round (RFC 4301 §6.2).
    let quoted = flow.quoted_reversed(frame, l4);
    let alone = frame.get(l4 + 8..).and_then(|q| {
        let mut f = frame[..12].to_vec();
        f.extend_from_slice(if flow.src.is_ipv6() {
            &[0x86, 0xdd]
        } else {
            &[0x08, 0x00]
        });
        f.extend_from_slice(q);
        match Flow::parse(&f) {
            Framed::Ip(q, _) => Some(Flow {
                src: q.dst,
                dst: q.src,
                sport: q.dport,
                dport: q.sport,
                ..q
            }),
            Framed::NotIp | Framed::Unparsable => None,
        }
    });
    if flow.is_icmp_error() {
        assert_eq!(quoted, alone);
    } else {
        assert_eq!(quoted, None, "only an ICMP error quotes");
    }
    let spd = spd();
    if let Some(q) = quoted {
        let _ = spd.lookup(Direction::In, &q);
    }
    if spd.lookup(Direction::In, &flow).is_none() {
        assert!(matches!(
            spd.unmatched_action(&flow),
            Action::Bypass | Action::Discard
        ));
    }
});
