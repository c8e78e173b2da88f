//! Issue 13: the receiver's header prediction (`Config::header_prediction`) takes the common
//! packet of a bulk transfer without the general chunk walk. It must change nothing but the
//! instructions: two receivers, one predicting and one not, are fed the same packets (a
//! client's DATA, then dropped, duplicated, reordered, bit-flipped, truncated, re-flagged or
//! re-tagged on the way) and must return the same results, deliver the same messages, answer
//! with the same packets and end in the same state (their whole `Debug` form, the flag apart).
//! The sender's half (`build_data_predicted`) is held to the same: two senders, one
//! predicting, build the same packets under loss, duplication, timeouts and SACKs.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::net::{IpAddr, Ipv4Addr};

use ddpdk_dataplane::sctp::{
    Association, Config, Deliver, Endpoint, ExtRef, Instant, Message, Outcome,
};
use ddpdk_dataplane::wire::crc32c;
use proptest::prelude::*;

const C: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const S: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));

fn cfg(port: u16, header_prediction: bool) -> Config {
    Config {
        local_port: port,
        header_prediction,
        // A small receive window and TSN map, so that the window's own rules are reached.
        a_rwnd: 16384,
        tsn_window: 64,
        ..Config::default()
    }
}

/// A client and two servers made from the same handshake, one predicting.
fn setup(now: Instant) -> (Association, Association, Association) {
    let mut cep = Endpoint::new(cfg(5001, true), [1; 32]).unwrap();
    let mut c = cep.connect(now, S, 5002);
    let mut buf = vec![0u8; 65536];
    let mut out = vec![0u8; 65536];
    let mut sink = |_: Message<'_>| {};
    let n = c.poll_transmit(now, &mut buf).unwrap();
    let init = buf[..n].to_vec();
    let mut servers = Vec::new();
    let mut echo = Vec::new();
    for predict in [true, false] {
        let mut sep = Endpoint::new(cfg(5002, predict), [2; 32]).unwrap();
        let Outcome::Reply(m) = sep.handle(now, C, &init, &mut out, &mut sink) else {
            panic!("INIT not answered")
        };
        if echo.is_empty() {
            c.handle(now, &out[..m], &mut sink).unwrap();
            let n = c.poll_transmit(now, &mut buf).unwrap();
            echo = buf[..n].to_vec();
        }
        let Outcome::Accepted(s) = sep.handle(now, C, &echo, &mut out, &mut sink) else {
            panic!("COOKIE ECHO not accepted")
        };
        servers.push(*s);
    }
    let general = servers.pop().unwrap();
    let mut fast = servers.pop().unwrap();
    let n = fast.poll_transmit(now, &mut buf).unwrap();
    c.handle(now, &buf[..n], &mut sink).unwrap();
    let mut general = general;
    while general.poll_transmit(now, &mut buf).is_some() {}
    (c, fast, general)
}

/// What happens to one packet of the client's on its way.
#[derive(Debug, Clone)]
enum Fate {
    Deliver,
    Drop,
    Duplicate,
    /// Held back and delivered after the next one.
    Reorder,
    /// One bit flipped at this position (modulo the length).
    Flip(usize, u8),
    Truncate(usize),
    /// DATA flags byte replaced.
    Flags(u8),
    /// The verification tag changed (CRC32c made good again, as for the rewrites below).
    Tag(u32),
    /// The DATA chunk's stream identifier rewritten.
    Stream(u16),
    /// The DATA chunk's TSN moved.
    Tsn(i8),
}

/// The layer above: takes every message, and says it has `room` bytes left (RFC 9260 §6.2).
struct Ulp {
    got: Vec<(u16, u32, u32, Vec<u8>)>,
    room: usize,
}

impl Deliver for Ulp {
    fn deliver(&mut self, m: Message<'_>) {
        self.got.push((m.stream, m.ppid, m.tsn, m.data.to_vec()));
    }
    fn room(&self) -> usize {
        self.room
    }
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![
        12 => Just(Fate::Deliver),
        2 => Just(Fate::Drop),
        1 => Just(Fate::Duplicate),
        2 => Just(Fate::Reorder),
        1 => (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Fate::Flip(at, bit)),
        1 => any::<usize>().prop_map(Fate::Truncate),
        1 => any::<u8>().prop_map(Fate::Flags),
        1 => any::<u32>().prop_map(Fate::Tag),
        1 => (0u16..12).prop_map(Fate::Stream),
        1 => any::<i8>().prop_map(Fate::Tsn),
    ]
}

/// The association's whole state, the prediction flag apart.
fn state(a: &Association) -> String {
    format!("{a:?}").replace("header_prediction: true", "header_prediction: false")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// RFC 9260 §6.2, §6.5, §6.7, §8.5 and RFC 5043 §10 as the general path applies them:
    /// the predicting receiver is indistinguishable from the other.
    #[test]
    fn header_prediction_changes_nothing_but_the_path(
        sizes in proptest::collection::vec(1usize..1400, 1..50),
        fates in proptest::collection::vec(fate(), 80),
        crc_offload in any::<bool>(),
        rooms in proptest::collection::vec(prop_oneof![Just(usize::MAX), 0usize..3000], 16),
    ) {
        let now = Instant::from_nanos(1_000_000_000);
        let (mut c, mut fast, mut general) = setup(now);
        let mut buf = vec![0u8; 65536];
        let (mut out_fast, mut out_general) = (vec![0u8; 65536], vec![0u8; 65536]);
        let mut held: Option<Vec<u8>> = None;
        let mut k = 0;
        for (i, size) in sizes.iter().enumerate() {
            let _ = c.send((i % 3) as u16, 16, &vec![i as u8; *size]);
            while let Some(n) = c.poll_transmit(now, &mut buf) {
                let mut pkt = buf[..n].to_vec();
                let fate = &fates[k % fates.len()];
                k += 1;
                let mut arrivals = Vec::new();
                match fate {
                    Fate::Deliver => arrivals.push(pkt),
                    Fate::Drop => {}
                    Fate::Duplicate => arrivals.extend([pkt.clone(), pkt]),
                    Fate::Reorder => {
                        if let Some(h) = held.replace(pkt) {
                            arrivals.push(h);
                        }
                    }
                    Fate::Flip(at, bit) => {
                        let at = at % pkt.len();
                        pkt[at] ^= 1 << bit;
                        arrivals.push(pkt);
                    }
                    Fate::Truncate(at) => {
                        pkt.truncate(at % pkt.len());
                        arrivals.push(pkt);
                    }
                    Fate::Flags(f) => {
                        if pkt.len() > 13 {
                            pkt[13] = *f;
                        }
                        crc32c::fill(&mut pkt);
                        arrivals.push(pkt);
                    }
                    Fate::Tag(t) => {
                        pkt[4..8].copy_from_slice(&t.to_be_bytes());
                        crc32c::fill(&mut pkt);
                        arrivals.push(pkt);
                    }
                    Fate::Stream(id) => {
                        if pkt.len() > 22 {
                            pkt[20..22].copy_from_slice(&id.to_be_bytes());
                        }
                        crc32c::fill(&mut pkt);
                        arrivals.push(pkt);
                    }
                    Fate::Tsn(d) => {
                        if pkt.len() > 20 {
                            let tsn = u32::from_be_bytes([pkt[16], pkt[17], pkt[18], pkt[19]]);
                            let tsn = tsn.wrapping_add(*d as u32);
                            pkt[16..20].copy_from_slice(&tsn.to_be_bytes());
                        }
                        crc32c::fill(&mut pkt);
                        arrivals.push(pkt);
                    }
                }
                if !matches!(fate, Fate::Reorder) {
                    if let Some(h) = held.take() {
                        arrivals.push(h);
                    }
                }
                for p in arrivals {
                    let room = rooms[k % rooms.len()];
                    let mut got_fast = Ulp { got: Vec::new(), room };
                    let mut got_general = Ulp { got: Vec::new(), room };
                    let r_fast = fast.handle_checked(now, &p, &mut got_fast, crc_offload);
                    let r_general = general.handle_checked(now, &p, &mut got_general, crc_offload);
                    prop_assert_eq!(r_fast, r_general);
                    prop_assert_eq!(&got_fast.got, &got_general.got);
                    prop_assert_eq!(state(&fast), state(&general));
                    // What each answers (SACKs, ERRORs, ABORTs) is the same, and the client
                    // hears it, so the transfer goes on.
                    loop {
                        let a = fast.poll_transmit(now, &mut out_fast);
                        let b = general.poll_transmit(now, &mut out_general);
                        prop_assert_eq!(a, b);
                        let Some(n) = a else { break };
                        prop_assert_eq!(&out_fast[..n], &out_general[..n]);
                        let _ = c.handle(now, &out_fast[..n], &mut |_: Message<'_>| {});
                    }
                }
            }
        }
        prop_assert_eq!(fast.stats().data_in, general.stats().data_in);
    }
}

/// One step of the send-side test: what the senders' user, the network and the clock do.
#[derive(Debug, Clone)]
enum Step {
    /// A message of this many bytes on this stream, its bytes given or (`ext`) by reference.
    Send { stream: u16, len: usize, ext: bool },
    /// Every packet the senders will build now, each delivered, dropped or duplicated.
    Transmit(u8),
    /// The receiver's answers (SACKs) to both senders.
    Answer,
    /// The receiver sends a message too: the senders owe a SACK, bundled with their DATA.
    Reverse(usize),
    /// Time passes (timers: T3-rtx, delayed SACK, HEARTBEAT).
    Wait(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u16..3, 1usize..3000, any::<bool>())
            .prop_map(|(stream, len, ext)| Step::Send { stream, len, ext }),
        4 => any::<u8>().prop_map(Step::Transmit),
        3 => Just(Step::Answer),
        1 => (1usize..200).prop_map(Step::Reverse),
        1 => (1u64..2000).prop_map(Step::Wait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// RFC 9260 §6.1 (cwnd, the peer's window, Max.Burst), §6.3 (T3-rtx), §6.10 (bundling)
    /// and §7.2.4 (fast retransmission) as the general builder applies them: a sender that
    /// predicts (`build_data_predicted`) builds the same packets, with the same holes, and ends
    /// each step in the same state as one that does not, under loss, duplication, timeouts
    /// and SACKs.
    #[test]
    fn send_side_prediction_builds_the_same_packets(
        steps in proptest::collection::vec(step(), 1..80),
    ) {
        let mut now = Instant::from_nanos(1_000_000_000);
        // The servers send, the client receives: both servers come from one handshake.
        let (mut c, mut fast, mut general) = setup(now);
        let (mut out_fast, mut out_general) = (vec![0u8; 65536], vec![0u8; 65536]);
        let mut buf = vec![0u8; 65536];
        let mut sink = |_: Message<'_>| {};
        let mut k = 0u64;
        for st in steps {
            match st {
                Step::Send { stream, len, ext } => {
                    let data = vec![len as u8; if ext { 16 } else { len }];
                    let r = ext.then_some(ExtRef { key: 1, offset: k, len: len as u32 });
                    let a = fast.send_ext(stream, 18, &data, r);
                    let b = general.send_ext(stream, 18, &data, r);
                    prop_assert_eq!(a, b);
                    k += 1;
                }
                Step::Transmit(fates) => {
                    let mut i = 0;
                    loop {
                        let a = fast.poll_transmit(now, &mut out_fast);
                        let b = general.poll_transmit(now, &mut out_general);
                        prop_assert_eq!(a, b);
                        let Some(n) = a else { break };
                        prop_assert_eq!(&out_fast[..n], &out_general[..n]);
                        prop_assert_eq!(fast.holes(), general.holes());
                        // The receiver sees the packet with its holes zero-filled, checksummed.
                        let mut p = out_fast[..n].to_vec();
                        crc32c::fill(&mut p);
                        match (fates >> (i % 8)) & 3 {
                            0 => {}
                            1 => {
                                let _ = c.handle(now, &p, &mut sink);
                                let _ = c.handle(now, &p, &mut sink);
                            }
                            _ => {
                                let _ = c.handle(now, &p, &mut sink);
                            }
                        }
                        i += 1;
                    }
                }
                Step::Reverse(len) => {
                    let _ = c.send(1, 18, &vec![7; len]);
                    while let Some(n) = c.poll_transmit(now, &mut buf) {
                        let a = fast.handle(now, &buf[..n], &mut sink);
                        let b = general.handle(now, &buf[..n], &mut sink);
                        prop_assert_eq!(a, b);
                    }
                }
                Step::Answer => {
                    while let Some(n) = c.poll_transmit(now, &mut buf) {
                        let a = fast.handle(now, &buf[..n], &mut sink);
                        let b = general.handle(now, &buf[..n], &mut sink);
                        prop_assert_eq!(a, b);
                    }
                }
                Step::Wait(ms) => {
                    now = Instant::from_nanos(now.as_nanos() + ms * 1_000_000);
                    for a in [&mut c, &mut fast, &mut general] {
                        if a.poll_timeout().is_some_and(|t| t <= now) {
                            a.handle_timeout(now);
                        }
                    }
                }
            }
            prop_assert_eq!(state(&fast), state(&general));
        }
    }
}
