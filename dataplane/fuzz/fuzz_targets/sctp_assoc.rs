//! The whole SCTP receive path under attack: an established association and a listening
//! endpoint take a sequence of peer-controlled packets (each with its CRC32c fixed up, so the
//! input reaches the chunk handlers rather than dying at the checksum) interleaved with timer
//! firings. Nothing may panic, overflow or grow: the association's memory is fixed.
#![no_main]

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use ddpdk_dataplane::sctp::{Config, Endpoint, Instant, Message, Outcome};
use ddpdk_dataplane::wire::crc32c;
use libfuzzer_sys::fuzz_target;

const C: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const S: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));

fuzz_target!(|data: &[u8]| {
    let cfg = |port| Config {
        local_port: port,
        send_slots: 16,
        tsn_window: 256,
        ..Config::default()
    };
    let mut cep = Endpoint::new(cfg(5001), [1; 32]).expect("config");
    let mut sep = Endpoint::new(cfg(5002), [2; 32]).expect("config");
    let mut now = Instant::from_nanos(1_000_000_000);
    let mut c = cep.connect(now, S, 5002);
    let mut buf = vec![0u8; 65536];
    let mut out = vec![0u8; 65536];
    let mut sink = |_: Message<'_>| {};
    // Handshake, so the fuzz input meets an ESTABLISHED association.
    let n = c.poll_transmit(now, &mut buf).expect("INIT");
    let Outcome::Reply(m) = sep.handle(now, C, &buf[..n], &mut out, &mut sink) else { return };
    let _ = c.handle(now, &out[..m], &mut sink);
    let n = c.poll_transmit(now, &mut buf).expect("COOKIE ECHO");
    let Outcome::Accepted(mut s) = sep.handle(now, C, &buf[..n], &mut out, &mut sink) else {
        return;
    };
    let _ = s.send(0, 16, b"outstanding");
    while s.poll_transmit(now, &mut buf).is_some() {}
    let mem = s.memory();
    // The input: records of [kind, len_hi, len_lo, bytes...].
    let mut rest = data;
    while rest.len() >= 3 {
        let kind = rest[0];
        let len = usize::from(u16::from_be_bytes([rest[1], rest[2]])).min(rest.len() - 3);
        let mut pkt = rest[3..3 + len].to_vec();
        rest = &rest[3 + len..];
        if pkt.len() >= 12 {
            // Aim at the association: its ports, and (unless told not to) its tag.
            pkt[0..2].copy_from_slice(&5001u16.to_be_bytes());
            pkt[2..4].copy_from_slice(&5002u16.to_be_bytes());
            if kind & 1 == 0 {
                pkt[4..8].copy_from_slice(&s.local_tag().to_be_bytes());
            }
            crc32c::fill(&mut pkt);
        }
        now += Duration::from_millis(u64::from(kind >> 2));
        if kind & 2 == 0 {
            let _ = s.handle(now, &pkt, &mut sink);
        } else {
            let _ = sep.handle(now, C, &pkt, &mut out, &mut sink);
        }
        if let Some(t) = s.poll_timeout() {
            if t <= now {
                s.handle_timeout(now);
            }
        }
        while s.poll_transmit(now, &mut buf).is_some() {}
        while s.poll_event().is_some() {}
        assert_eq!(s.memory(), mem, "association memory grew");
    }
});
