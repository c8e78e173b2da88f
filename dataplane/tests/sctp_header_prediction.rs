//! Issue 13: the receiver's header prediction (`Config::header_prediction`) takes the common
//! packet of a bulk transfer without the general chunk walk. It must change nothing but the
//! instructions: two receivers, one predicting and one not, are fed the same packets (a
//! client's DATA, then dropped, duplicated, reordered, bit-flipped, truncated, re-flagged or
//! re-tagged on the way) and must return the same results, deliver the same messages, answer
//! with the same packets and end in the same state (their whole `Debug` form, the flag apart).
//! The sender's half (`build_data_predicted`, and the SACK alone taken without the chunk walk)
//! is held to the same: two senders, one predicting, build the same packets and end in the same
//! state under loss, duplication, timeouts and SACKs intact or damaged.

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

/// The association's whole state, the prediction flag and the counts of predicted packets
/// apart, and the count of holes of the last packet built: the caller reads them until its
/// next call (`holes`, compared where each packet is), and an opportunity ended without the
/// call that would find nothing (`end_transmit_opportunity`) leaves them, as it must.
fn state(a: &Association) -> String {
    let mut s = format!("{a:?}").replace("header_prediction: true", "header_prediction: false");
    for field in ["predicted_in: ", "predicted_out: ", "n_holes: "] {
        if let Some(at) = s.find(field) {
            let digits = at + field.len();
            let end = s[digits..]
                .find(|c: char| !c.is_ascii_digit())
                .map_or(s.len(), |n| digits + n);
            s.replace_range(digits..end, "0");
        }
    }
    s
}

/// The three predictions take the packets they are for: in a plain exchange (no loss, the
/// window open) the predicting sender builds its DATA packets by prediction and takes the
/// SACKs by prediction, the client receiver takes the DATA by prediction, and the sender
/// that does not predict counts none. Every other test here holds the predictions to the
/// general path's effect; without this one, a prediction that always declined would pass
/// them all.
#[test]
fn each_prediction_takes_the_plain_packets_it_is_for() {
    let now = Instant::from_nanos(1_000_000_000);
    let (mut c, mut fast, mut general) = setup(now);
    let mut sink = |_: Message<'_>| {};
    let (mut out, mut buf) = (vec![0u8; 65536], vec![0u8; 65536]);
    for i in 0..8u8 {
        for a in [&mut fast, &mut general] {
            a.send(1, 18, &[i; 1000]).unwrap();
        }
        while let Some(n) = fast.poll_transmit(now, &mut out) {
            assert_eq!(general.poll_transmit(now, &mut buf), Some(n));
            c.handle(now, &out[..n], &mut sink).unwrap();
        }
        while let Some(n) = c.poll_transmit(now, &mut buf) {
            for a in [&mut fast, &mut general] {
                a.handle(now, &buf[..n], &mut sink).unwrap();
            }
        }
    }
    let (f, g, r) = (fast.stats(), general.stats(), c.stats());
    assert_eq!(f.data_out, 8);
    assert!(f.sacks_in > 0, "the client acknowledged: {r:?}");
    assert_eq!(
        f.predicted_out, f.data_out,
        "every DATA packet built by prediction"
    );
    assert_eq!(f.predicted_in, f.sacks_in, "every SACK taken by prediction");
    assert_eq!(
        r.predicted_in, r.data_in,
        "every DATA packet taken by prediction"
    );
    assert_eq!(
        (g.predicted_in, g.predicted_out),
        (0, 0),
        "the other predicts nothing"
    );
    assert_eq!(state(&fast), state(&general));
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
    /// The same, each answer damaged on the way (`Damage`), CRC32c made good where it says.
    AnswerDamaged(u8, u32),
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
        2 => (0u8..10, any::<u32>()).prop_map(|(how, x)| Step::AnswerDamaged(how, x)),
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
    /// and SACKs. And `owes_nothing` is the builder's own "nothing" (not Max.Burst's, §6.1 D):
    /// where it says so, the call finds nothing, and ending the opportunity without the call
    /// leaves the state the call would.
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
                        // A data core that knows the builder owes nothing ends the opportunity
                        // without the call (control::quiet): the predicting sender does so
                        // here, the other makes the call, which must find nothing, and the two
                        // must still end every step in the same state.
                        if fast.owes_nothing() {
                            fast.end_transmit_opportunity();
                            prop_assert_eq!(general.poll_transmit(now, &mut out_general), None);
                            prop_assert!(!general.burst_ended(), "not Max.Burst's nothing");
                            break;
                        }
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
                        prop_assert_eq!(state(&fast), state(&general));
                    }
                }
                Step::AnswerDamaged(how, x) => {
                    while let Some(n) = c.poll_transmit(now, &mut buf) {
                        let p = damage_answer(&buf[..n], how, x);
                        let a = fast.handle(now, &p, &mut sink);
                        let b = general.handle(now, &p, &mut sink);
                        prop_assert_eq!(a, b);
                        prop_assert_eq!(state(&fast), state(&general));
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

/// A receiver's answer (a SACK alone is 28 bytes: header, type, flags, length, cumulative TSN
/// Ack, a_rwnd, the two counts) as the network or an attacker might change it: what the send
/// side's SACK prediction sees must have the general path's effect (RFC 9260 §3.3.4, §6.2.1,
/// §6.8, §8.5).
fn damage_answer(p: &[u8], how: u8, x: u32) -> Vec<u8> {
    let mut p = p.to_vec();
    let refill = |p: &mut Vec<u8>| crc32c::fill(p);
    match how {
        // A bit flipped: the checksum fails.
        0 => {
            let at = x as usize % p.len();
            p[at] ^= 1 << (x % 8);
        }
        // The cumulative TSN Ack moved, back or ahead (§6.2.1 D i, a TSN never sent).
        1 if p.len() >= 20 => {
            let cum = u32::from_be_bytes([p[16], p[17], p[18], p[19]]);
            let cum = cum.wrapping_add(x % 9).wrapping_sub(4);
            p[16..20].copy_from_slice(&cum.to_be_bytes());
            refill(&mut p);
        }
        // Another a_rwnd.
        2 if p.len() >= 24 => {
            p[20..24].copy_from_slice(&x.to_be_bytes());
            refill(&mut p);
        }
        // Gap Ack Blocks or Duplicate TSNs counted that the chunk does not hold.
        3 if p.len() >= 28 => {
            p[24 + 2 * (x as usize % 2)] = 1 + (x >> 8) as u8 % 4;
            refill(&mut p);
        }
        // Chunk flags (reserved in a SACK) set.
        4 if p.len() > 13 => {
            p[13] = x as u8;
            refill(&mut p);
        }
        // Cut short.
        5 => p.truncate(x as usize % p.len()),
        // Another verification tag.
        6 => {
            p[4..8].copy_from_slice(&x.to_be_bytes());
            refill(&mut p);
        }
        // A chunk length that is not the packet's.
        7 if p.len() >= 16 => {
            p[14..16].copy_from_slice(&(x as u16 % 40).to_be_bytes());
            refill(&mut p);
        }
        // The Gap Ack Blocks and Duplicate TSNs taken out: the receiver reneges on what it
        // gap-acknowledged (§6.2.1 D: the sender takes those TSNs as not received).
        8 if p.len() > 28 => {
            p.truncate(28);
            p[14..16].copy_from_slice(&16u16.to_be_bytes());
            p[24..28].fill(0);
            refill(&mut p);
        }
        // Another source or destination port (§8.5: not this association's packet).
        9 => {
            let at = 2 * (x as usize % 2);
            p[at..at + 2].copy_from_slice(&(x >> 16).to_be_bytes()[2..]);
            refill(&mut p);
        }
        _ => {}
    }
    p
}

/// RFC 9260 §6.2.1 D: a SACK without Gap Ack Blocks tells a sender that TSNs it marked
/// gap-acknowledged were not received after all (the receiver reneged); they are unmarked, to
/// be retransmitted. The SACK alone is the predicted packet's shape, so
/// the prediction must leave it to the general path while anything is marked.
#[test]
fn a_sack_without_blocks_unmarks_what_was_gap_acknowledged() {
    let now = Instant::from_nanos(1_000_000_000);
    let (mut c, mut fast, mut general) = setup(now);
    let mut sink = |_: Message<'_>| {};
    let (mut out, mut buf) = (vec![0u8; 65536], vec![0u8; 65536]);
    for i in 0..4u8 {
        for a in [&mut fast, &mut general] {
            a.send(1, 18, &[i; 1200]).unwrap();
        }
    }
    // Four packets; the client sees all but the first, and SACKs the last three as a gap.
    let mut k = 0;
    while let Some(n) = fast.poll_transmit(now, &mut out) {
        assert_eq!(general.poll_transmit(now, &mut buf), Some(n));
        if k > 0 {
            c.handle(now, &out[..n], &mut sink).unwrap();
        }
        k += 1;
    }
    assert_eq!(k, 4, "one packet a message");
    let mut last = Vec::new();
    while let Some(n) = c.poll_transmit(now, &mut buf) {
        last = buf[..n].to_vec();
        for a in [&mut fast, &mut general] {
            a.handle(now, &last, &mut sink).unwrap();
        }
    }
    assert!(
        last.len() > 28,
        "the client's SACK has a Gap Ack Block: {last:?}"
    );
    let marked = state(&general);
    // The same SACK with its blocks taken out.
    let reneged = damage_answer(&last, 8, 0);
    assert_eq!(reneged.len(), 28);
    for a in [&mut fast, &mut general] {
        a.handle(now, &reneged, &mut sink).unwrap();
    }
    assert_ne!(
        state(&general),
        marked,
        "the general path unmarks the three"
    );
    assert_eq!(state(&fast), state(&general));
}
