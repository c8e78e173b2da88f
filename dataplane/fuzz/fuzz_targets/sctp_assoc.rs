//! The whole SCTP receive path under attack: an established association and a listening
//! endpoint take a sequence of peer-controlled packets (each with its CRC32c fixed up, so the
//! input reaches the chunk handlers rather than dying at the checksum) interleaved with timer
//! firings, and messages queued with external tails (zero-copy). Nothing may panic, overflow or
//! grow: the association's memory is fixed but for reassembly (RFC 9260 §6.9), which stays
//! within its bound, and every packet's holes lie in order inside it, at most MAX_HOLES of
//! them.
#![no_main]

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use ddpdk_dataplane::sctp::{
    Association, Config, Endpoint, ExtRef, Instant, Message, Outcome, MAX_HOLES,
};
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
    let Outcome::Reply(m) = sep.handle(now, C, &buf[..n], &mut out, &mut sink) else {
        return;
    };
    let _ = c.handle(now, &out[..m], &mut sink);
    let n = c.poll_transmit(now, &mut buf).expect("COOKIE ECHO");
    let Outcome::Accepted(mut s) = sep.handle(now, C, &buf[..n], &mut out, &mut sink) else {
        return;
    };
    let _ = s.send(0, 16, b"outstanding");
    let _ = s.send_ext(
        0,
        16,
        b"head",
        Some(ExtRef {
            key: 1,
            offset: 0,
            len: 1001,
        }),
    );
    drain(&mut s, now, &mut buf);
    let fixed = |s: &Association| s.memory() - s.reassembly_memory().0;
    let mem = fixed(&s);
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
        // Some records also queue a message with an external tail of the record's length.
        if kind % 5 == 4 && len > 0 {
            let ext = ExtRef {
                key: u32::from(kind),
                offset: 7,
                len: len as u32,
            };
            let _ = s.send_ext(1, 16, &pkt[..len.min(18)], Some(ext));
        }
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
        drain(&mut s, now, &mut buf);
        while s.poll_event().is_some() {}
        assert_eq!(fixed(&s), mem, "association memory grew");
        let (held, bound) = s.reassembly_memory();
        assert!(held <= bound, "reassembly over its bound: {held} > {bound}");
    }
});

/// Sends everything due, checking each packet's holes.
fn drain(s: &mut Association, now: Instant, buf: &mut [u8]) {
    while let Some(n) = s.poll_transmit(now, buf) {
        let holes = s.holes();
        assert!(holes.len() <= MAX_HOLES);
        let mut end = 12;
        for h in holes {
            assert!(h.at >= end + 16, "a hole follows its chunk header");
            end = h.at + h.ext.len as usize;
            assert!(end <= n, "a hole inside the packet");
        }
    }
}
