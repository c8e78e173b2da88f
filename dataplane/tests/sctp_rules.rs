//! One test per protocol rule of the association engine: each drives our endpoint and
//! association with hand-made or intercepted packets and checks exactly what the RFC says.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use ddpdk_dataplane::sctp::{
    Association, CloseReason, Config, Deliver, Discard, Endpoint, Event, Ignored, Instant, Message,
    Outcome, SendError, State, ADAPTATION_REASON,
};
use ddpdk_dataplane::wire::crc32c;
use ddpdk_dataplane::wire::sctp::{
    AbortRepr, CauseRepr, ChunkRepr, CookieEchoRepr, DataRepr, ErrorChunkRepr, GapAckBlock,
    HeaderRepr, HeartbeatAckRepr, HeartbeatRepr, InitRepr, List, Packet, PacketBuilder, ParamRepr,
    SackRepr, ShutdownCompleteRepr, ShutdownRepr, UnknownChunkRepr,
};

const C_PORT: u16 = 5001;
const S_PORT: u16 = 5002;
const C_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const S_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));

fn t(ms: u64) -> Instant {
    Instant::from_nanos(1_000_000_000 + ms * 1_000_000)
}

fn cfg(port: u16) -> Config {
    Config {
        local_port: port,
        rto_initial: Duration::from_millis(100),
        rto_min: Duration::from_millis(100),
        rto_max: Duration::from_millis(800),
        hb_interval: None,
        // The rules of §6.2 (delayed SACKs) as a peer without RFC 7053 sees them; the I bit
        // has its own test.
        immediate_sack_when_idle: false,
        ..Config::default()
    }
}

fn endpoint(port: u16, seed: u8) -> Endpoint {
    Endpoint::new(cfg(port), [seed; 32]).unwrap()
}

/// Builds a packet from chunks, CRC32c filled.
fn packet(src: u16, dst: u16, vtag: u32, chunks: &[ChunkRepr<'_>]) -> Vec<u8> {
    let mut buf = vec![0u8; 9000];
    let hdr = HeaderRepr {
        src_port: src,
        dst_port: dst,
        verification_tag: vtag,
    };
    let mut b = PacketBuilder::new(&mut buf, &hdr).unwrap();
    for c in chunks {
        b.push(c).unwrap();
    }
    let n = b.packet_len();
    buf.truncate(n);
    crc32c::fill(&mut buf);
    buf
}

/// The chunks of a packet, parsed (the packet must be valid).
fn chunks(p: &[u8]) -> Vec<ChunkRepr<'_>> {
    let pkt = Packet::new_verified(p).unwrap();
    pkt.chunks_ref()
        .map(|c| ChunkRepr::parse(&c.unwrap()).unwrap())
        .collect()
}

fn vtag(p: &[u8]) -> u32 {
    Packet::new_checked(p).unwrap().verification_tag()
}

fn drain(a: &mut Association, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Some(n) = a.poll_transmit(now, &mut buf) {
        out.push(buf[..n].to_vec());
    }
    out
}

fn events(a: &mut Association) -> Vec<Event> {
    std::iter::from_fn(|| a.poll_event()).collect()
}

fn ignore(_: Message<'_>) {}

fn init_chunk(tag: u32, params: &[ParamRepr<'_>]) -> Vec<u8> {
    let init = ChunkRepr::Init(InitRepr {
        initiate_tag: tag,
        a_rwnd: 65536,
        outbound_streams: 4,
        inbound_streams: 4,
        initial_tsn: 1000,
        params: List::new(params),
    });
    packet(C_PORT, S_PORT, 0, &[init])
}

/// A connected pair over a perfect, instant network: the client's association and the
/// server's, after the four-way handshake.
struct Pair {
    c: Association,
    s: Association,
    got_c: Vec<(u16, u32, Vec<u8>)>,
    got_s: Vec<(u16, u32, Vec<u8>)>,
}

/// The four-way handshake between a client and a server endpoint of these configurations,
/// the server's association made from the client's COOKIE ECHO (returned too), the COOKIE ACK
/// not yet sent back.
fn handshake(c_cfg: Config, s_cfg: Config) -> (Association, Association, Vec<u8>) {
    let mut cep = Endpoint::new(c_cfg, [1; 32]).unwrap();
    let mut sep = Endpoint::new(s_cfg, [2; 32]).unwrap();
    let mut c = cep.connect(t(0), S_ADDR, S_PORT);
    let mut out = vec![0u8; 65536];
    let init = drain(&mut c, t(0));
    let Outcome::Reply(n) = sep.handle(t(0), C_ADDR, &init[0], &mut out, &mut ignore) else {
        panic!("INIT not answered")
    };
    c.handle(t(1), &out[..n], &mut ignore).unwrap();
    let echo = drain(&mut c, t(1));
    let Outcome::Accepted(s) = sep.handle(t(1), C_ADDR, &echo[0], &mut out, &mut ignore) else {
        panic!("COOKIE ECHO not accepted")
    };
    (c, *s, echo[0].clone())
}

impl Pair {
    fn new() -> Pair {
        Pair::with(|_| {})
    }

    /// A pair whose two endpoints' configuration `f` changes.
    fn with(f: impl Fn(&mut Config)) -> Pair {
        let (mut c_cfg, mut s_cfg) = (cfg(C_PORT), cfg(S_PORT));
        f(&mut c_cfg);
        f(&mut s_cfg);
        let (c, s, _) = handshake(c_cfg, s_cfg);
        let mut p = Pair {
            c,
            s,
            got_c: Vec::new(),
            got_s: Vec::new(),
        };
        p.exchange(t(2), |_, _| true);
        assert_eq!(p.c.state(), State::Established);
        assert_eq!(p.s.state(), State::Established);
        p
    }

    /// Moves packets both ways until both are quiet, one packet at a time with the receiver
    /// polled after each (the engine's contract: SACKs reporting gaps are due per packet,
    /// RFC 9260 §6.7); `keep(to_server, packet)` may drop some. Returns the packets that
    /// crossed, in order, with their direction.
    fn exchange(
        &mut self,
        now: Instant,
        mut keep: impl FnMut(bool, &[u8]) -> bool,
    ) -> Vec<(bool, Vec<u8>)> {
        let mut log = Vec::new();
        let mut queue: std::collections::VecDeque<(bool, Vec<u8>)> = Default::default();
        queue.extend(drain(&mut self.c, now).into_iter().map(|p| (true, p)));
        queue.extend(drain(&mut self.s, now).into_iter().map(|p| (false, p)));
        while let Some((to_server, p)) = queue.pop_front() {
            if !keep(to_server, &p) {
                continue;
            }
            let (rx, got) = if to_server {
                (&mut self.s, &mut self.got_s)
            } else {
                (&mut self.c, &mut self.got_c)
            };
            let _ = rx.handle(now, &p, &mut |m: Message<'_>| {
                got.push((m.stream, m.ppid, m.data.to_vec()))
            });
            log.push((to_server, p));
            queue.extend(drain(&mut self.c, now).into_iter().map(|p| (true, p)));
            queue.extend(drain(&mut self.s, now).into_iter().map(|p| (false, p)));
        }
        log
    }

    /// Fires both sides' timers due at `now`.
    fn tick(&mut self, now: Instant) {
        for a in [&mut self.c, &mut self.s] {
            if a.poll_timeout().is_some_and(|x| x <= now) {
                a.handle_timeout(now);
            }
        }
    }
}

fn has<'a>(cs: &[ChunkRepr<'a>], f: impl Fn(&ChunkRepr<'a>) -> bool) -> bool {
    cs.iter().any(f)
}

// ---------------------------------------------------------------------------------------
// Handshake and cookie (RFC 9260 §5.1)
// ---------------------------------------------------------------------------------------

/// §5.1.3: the responder keeps no state before a valid COOKIE ECHO, so any number of INITs
/// costs it nothing: 10000 INITs each get an INIT ACK, and the cookie of the very first one is
/// still accepted after all the others (its state travelled in the cookie).
#[test]
fn init_flood_keeps_no_state_5_1_3() {
    let mut sep = endpoint(S_PORT, 2);
    let mut out = vec![0u8; 2048];
    let ali = [ParamRepr::AdaptationLayerIndication(1)];
    let mut first_ack = None;
    for i in 0..10_000u32 {
        let init = init_chunk(0x1000 + i, &ali);
        match sep.handle(t(0), C_ADDR, &init, &mut out, &mut ignore) {
            Outcome::Reply(n) => {
                if first_ack.is_none() {
                    first_ack = Some(out[..n].to_vec());
                }
            }
            o => panic!("INIT {i}: {o:?}"),
        }
    }
    assert_eq!(sep.stats().init_acks_out, 10_000);
    let ack = first_ack.unwrap();
    let cs = chunks(&ack);
    let ChunkRepr::InitAck(ia) = cs[0] else {
        panic!("not an INIT ACK")
    };
    assert_eq!(
        vtag(&ack),
        0x1000,
        "INIT ACK carries the INIT's Initiate Tag"
    );
    assert_eq!(ia.0.adaptation_indication(), Some(1), "RFC 5043 §5.1");
    assert_eq!(ia.0.outbound_streams, ia.0.inbound_streams, "RFC 5043 §8");
    let cookie = ia.state_cookie().unwrap();
    let echo = packet(
        C_PORT,
        S_PORT,
        ia.0.initiate_tag,
        &[ChunkRepr::CookieEcho(
            ddpdk_dataplane::wire::sctp::CookieEchoRepr { cookie },
        )],
    );
    let Outcome::Accepted(mut a) = sep.handle(t(10), C_ADDR, &echo, &mut out, &mut ignore) else {
        panic!("first cookie refused after the flood")
    };
    assert_eq!(a.peer_tag(), 0x1000);
    assert_eq!(a.state(), State::Established);
    let reply = drain(&mut a, t(10));
    assert!(has(&chunks(&reply[0]), |c| matches!(
        c,
        ChunkRepr::CookieAck
    )));
}

fn handshake_to_echo() -> (Endpoint, Association, Vec<u8>) {
    let mut cep = endpoint(C_PORT, 1);
    let mut sep = endpoint(S_PORT, 2);
    let mut c = cep.connect(t(0), S_ADDR, S_PORT);
    let mut out = vec![0u8; 65536];
    let init = drain(&mut c, t(0));
    let Outcome::Reply(n) = sep.handle(t(0), C_ADDR, &init[0], &mut out, &mut ignore) else {
        panic!()
    };
    c.handle(t(1), &out[..n], &mut ignore).unwrap();
    let echo = drain(&mut c, t(1)).remove(0);
    (sep, c, echo)
}

/// §5.1.5 steps 1-2: a cookie whose MAC fails, or a COOKIE ECHO on another tag, from another
/// address, is silently discarded; nothing is created.
#[test]
fn forged_or_misdirected_cookie_is_discarded_5_1_5() {
    let (mut sep, _c, echo) = handshake_to_echo();
    let mut out = vec![0u8; 2048];
    let mut forged = echo.clone();
    let last = forged.len() - 1;
    forged[last - 8] ^= 0x01; // inside the cookie's MAC
    crc32c::fill(&mut forged);
    assert!(matches!(
        sep.handle(t(2), C_ADDR, &forged, &mut out, &mut ignore),
        Outcome::Ignored(Ignored::BadCookie)
    ));
    let mut wrong_tag = echo.clone();
    wrong_tag[4] ^= 0xff;
    crc32c::fill(&mut wrong_tag);
    assert!(matches!(
        sep.handle(t(2), C_ADDR, &wrong_tag, &mut out, &mut ignore),
        Outcome::Ignored(Ignored::BadCookie)
    ));
    let elsewhere = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 99));
    assert!(matches!(
        sep.handle(t(2), elsewhere, &echo, &mut out, &mut ignore),
        Outcome::Ignored(Ignored::BadCookie)
    ));
    assert_eq!(sep.stats().bad_cookies, 3);
    assert!(matches!(
        sep.handle(t(2), C_ADDR, &echo, &mut out, &mut ignore),
        Outcome::Accepted(_)
    ));
}

/// §5.1.5 step 3: past Valid.Cookie.Life the COOKIE ECHO gets an ERROR with Stale Cookie
/// (staleness in microseconds) on the peer's tag; the client starts over with an INIT
/// (§5.2.6).
#[test]
fn stale_cookie_is_answered_and_the_client_starts_over_5_1_5() {
    let (mut sep, mut c, echo) = handshake_to_echo();
    let mut out = vec![0u8; 2048];
    let late = t(1) + Duration::from_secs(60) + Duration::from_millis(3);
    let Outcome::Reply(n) = sep.handle(late, C_ADDR, &echo, &mut out, &mut ignore) else {
        panic!("stale cookie not answered")
    };
    assert_eq!(vtag(&out[..n]), c.local_tag());
    let cs = chunks(&out[..n]);
    let ChunkRepr::Error(e) = cs[0] else { panic!() };
    let staleness = match e.causes.iter().next().unwrap() {
        CauseRepr::StaleCookie { staleness } => staleness,
        other => panic!("{other:?}"),
    };
    assert!((2_000..=4_000).contains(&staleness), "{staleness} us");
    c.handle(late, &out[..n], &mut ignore).unwrap();
    assert_eq!(c.state(), State::CookieWait);
    let again = drain(&mut c, late);
    assert!(matches!(chunks(&again[0])[0], ChunkRepr::Init(_)));
}

/// §5.2.6 with §5.1 C: on a Stale Cookie the client starts over with a new INIT, but a peer
/// that answers every COOKIE ECHO with Stale Cookie must not keep the handshake going forever:
/// the restarts are bounded by Max.Init.Retransmits, after which the initialization is
/// abandoned and reported (InitFailed). The INIT ACK each restart brings must not reset the
/// count.
#[test]
fn stale_cookie_restarts_are_bounded_5_2_6() {
    let (mut sep, mut c, mut echo) = handshake_to_echo();
    let max = cfg(C_PORT).max_init_retransmits;
    let mut out = vec![0u8; 65536];
    let mut now = t(1);
    let mut restarts = 0;
    for round in 0..=max + 5 {
        // Longer than Valid.Cookie.Life plus the most Cookie Preservative the endpoint honours.
        now += Duration::from_secs(200);
        let Outcome::Reply(n) = sep.handle(now, C_ADDR, &echo, &mut out, &mut ignore) else {
            panic!("round {round}: stale cookie not answered")
        };
        assert!(matches!(chunks(&out[..n])[0], ChunkRepr::Error(_)));
        c.handle(now, &out[..n], &mut ignore).unwrap();
        if c.state() == State::Closed {
            break;
        }
        assert_eq!(c.state(), State::CookieWait);
        restarts += 1;
        let init = drain(&mut c, now);
        assert!(matches!(chunks(&init[0])[0], ChunkRepr::Init(_)));
        let Outcome::Reply(n) = sep.handle(now, C_ADDR, &init[0], &mut out, &mut ignore) else {
            panic!("round {round}: INIT not answered")
        };
        c.handle(now, &out[..n], &mut ignore).unwrap();
        assert_eq!(c.state(), State::CookieEchoed);
        echo = drain(&mut c, now).remove(0);
    }
    assert_eq!(
        c.state(),
        State::Closed,
        "still going after {restarts} restarts"
    );
    assert_eq!(
        restarts, max,
        "Max.Init.Retransmits restarts, then the attempt fails"
    );
    assert_eq!(events(&mut c), vec![Event::Closed(CloseReason::InitFailed)]);
    assert_eq!(c.stats().stale_cookies, u64::from(max) + 1);
}

/// §5.2.6: the INIT that follows a Stale Cookie SHOULD carry a Cookie Preservative suggesting
/// a longer life-span, from the RTT of the COOKIE ECHO / ERROR exchange and no more than 1 s
/// beyond it; the first INIT has none. The endpoint honours it: a cookie as late as the first
/// one is then accepted.
#[test]
fn init_after_stale_cookie_carries_a_cookie_preservative_5_2_6() {
    let preservative = |p: &[u8]| {
        let ChunkRepr::Init(i) = chunks(p)[0] else {
            panic!("not an INIT")
        };
        i.params.iter().find_map(|p| match p {
            ParamRepr::CookiePreservative(ms) => Some(ms),
            _ => None,
        })
    };
    let mut cep = endpoint(C_PORT, 1);
    let mut c = cep.connect(t(0), S_ADDR, S_PORT);
    let first = drain(&mut c, t(0));
    assert_eq!(preservative(&first[0]), None, "no staleness measured yet");
    let (mut sep, mut c, echo) = handshake_to_echo();
    let mut out = vec![0u8; 65536];
    // The cookie was made at t(0) and lives 60 s; the COOKIE ECHO left at t(1) and the ERROR
    // comes back 60.25 s later (the RTT), the cookie 251 ms stale.
    let late = t(1) + Duration::from_secs(60) + Duration::from_millis(250);
    let Outcome::Reply(n) = sep.handle(late, C_ADDR, &echo, &mut out, &mut ignore) else {
        panic!("stale cookie not answered")
    };
    c.handle(late, &out[..n], &mut ignore).unwrap();
    let init = drain(&mut c, late);
    let ms = preservative(&init[0]).expect("Cookie Preservative in the new INIT");
    // RTT plus the staleness (under the 1 s the rule allows beyond the RTT).
    assert_eq!(ms, 60_250 + 251);
    // A retransmitted INIT carries it too.
    let at = c.poll_timeout().unwrap();
    c.handle_timeout(at);
    assert_eq!(preservative(&drain(&mut c, at)[0]), Some(ms));
    // The endpoint lengthens the cookie's life: a COOKIE ECHO as slow as the first is taken.
    let Outcome::Reply(n) = sep.handle(at, C_ADDR, &init[0], &mut out, &mut ignore) else {
        panic!("INIT not answered")
    };
    c.handle(at, &out[..n], &mut ignore).unwrap();
    let echo = drain(&mut c, at).remove(0);
    let later = at + Duration::from_secs(60) + Duration::from_millis(250);
    assert!(matches!(
        sep.handle(later, C_ADDR, &echo, &mut out, &mut ignore),
        Outcome::Accepted(_)
    ));
}

/// §5.1 (and issue 4): DATA bundled with the COOKIE ECHO is accepted and delivered by the new
/// association, and acknowledged with the COOKIE ACK.
#[test]
fn data_bundled_with_cookie_echo_is_delivered() {
    let mut cep = endpoint(C_PORT, 1);
    let mut sep = endpoint(S_PORT, 2);
    let mut c = cep.connect(t(0), S_ADDR, S_PORT);
    c.send(1, 16, b"early bird").unwrap();
    let mut out = vec![0u8; 65536];
    let init = drain(&mut c, t(0));
    assert_eq!(init.len(), 1, "INIT travels alone");
    let Outcome::Reply(n) = sep.handle(t(0), C_ADDR, &init[0], &mut out, &mut ignore) else {
        panic!()
    };
    c.handle(t(1), &out[..n], &mut ignore).unwrap();
    let echo = drain(&mut c, t(1));
    let cs = chunks(&echo[0]);
    assert!(
        matches!(cs[0], ChunkRepr::CookieEcho(_)),
        "COOKIE ECHO first"
    );
    assert!(has(
        &cs,
        |c| matches!(c, ChunkRepr::Data(d) if d.user_data == b"early bird")
    ));
    let mut got = Vec::new();
    let Outcome::Accepted(mut s) =
        sep.handle(t(1), C_ADDR, &echo[0], &mut out, &mut |m: Message<'_>| {
            got.push((m.stream, m.ppid, m.data.to_vec()))
        })
    else {
        panic!()
    };
    assert_eq!(got, vec![(1, 16, b"early bird".to_vec())]);
    let reply = drain(&mut s, t(1));
    let cs = chunks(&reply[0]);
    assert!(matches!(cs[0], ChunkRepr::CookieAck));
    assert!(has(&cs, |c| matches!(c, ChunkRepr::Sack(_))));
}

/// T1-init (§5.1 A, §5.1.6 of RFC 9260 §5.1): an unanswered INIT is retransmitted with a
/// doubled RTO, Max.Init.Retransmits times, and then the association fails.
#[test]
fn unanswered_init_retransmits_then_fails_5_1() {
    let mut cep = endpoint(C_PORT, 1);
    let mut c = cep.connect(t(0), S_ADDR, S_PORT);
    let mut sent = vec![t(0)];
    drain(&mut c, t(0));
    while let Some(at) = c.poll_timeout() {
        c.handle_timeout(at);
        if !drain(&mut c, at).is_empty() {
            sent.push(at);
        }
    }
    assert_eq!(sent.len(), 1 + cfg(C_PORT).max_init_retransmits as usize);
    let gaps: Vec<u64> = sent
        .windows(2)
        .map(|w| (w[1].as_nanos() - w[0].as_nanos()) / 1_000_000)
        .collect();
    assert_eq!(&gaps[..4], &[100, 200, 400, 800], "RTO doubles to RTO.Max");
    assert!(gaps[4..].iter().all(|&g| g == 800));
    assert_eq!(events(&mut c), vec![Event::Closed(CloseReason::InitFailed)]);
}

// ---------------------------------------------------------------------------------------
// Adaptation Layer Indication (RFC 5043 §5.1, §11.1)
// ---------------------------------------------------------------------------------------

/// RFC 5043 §11.1: an INIT without DDP's indication, or with another value, is refused with
/// ABORT on the INIT's tag, carrying a reason, and counted.
#[test]
fn init_without_ddp_adaptation_is_refused_5043_11_1() {
    let mut sep = endpoint(S_PORT, 2);
    let mut out = vec![0u8; 2048];
    for (tag, params) in [
        (7u32, &[][..]),
        (8, &[ParamRepr::AdaptationLayerIndication(2)][..]),
    ] {
        let init = init_chunk(tag, params);
        let Outcome::Reply(n) = sep.handle(t(0), C_ADDR, &init, &mut out, &mut ignore) else {
            panic!()
        };
        assert_eq!(vtag(&out[..n]), tag);
        let cs = chunks(&out[..n]);
        let ChunkRepr::Abort(a) = cs[0] else { panic!() };
        assert!(!a.t_bit);
        assert_eq!(
            a.causes.iter().next(),
            Some(CauseRepr::UserInitiatedAbort {
                reason: ADAPTATION_REASON.as_bytes()
            })
        );
    }
    assert_eq!(sep.stats().adaptation_refused, 2);
    assert_eq!(sep.stats().init_acks_out, 0);
}

/// RFC 5043 §11.1 at an association: an INIT (a restart, say) without DDP's indication is
/// refused as the endpoint refuses it, with an ABORT on the INIT's tag that says why, and the
/// association goes on (before: dropped silently, and the peer retransmitted its INIT until
/// Max.Init.Retransmits).
#[test]
fn init_without_ddp_adaptation_to_an_association_is_refused_5043_11_1() {
    let mut p = Pair::new();
    let init = packet(
        C_PORT,
        S_PORT,
        0,
        &[ChunkRepr::Init(InitRepr {
            initiate_tag: 0x7007,
            a_rwnd: 65536,
            outbound_streams: 4,
            inbound_streams: 4,
            initial_tsn: 77,
            params: List::empty(),
        })],
    );
    let _ = p.s.handle(t(5), &init, &mut ignore);
    let out = drain(&mut p.s, t(5));
    assert_eq!(out.len(), 1, "one answer");
    assert_eq!(vtag(&out[0]), 0x7007, "on the INIT's Initiate Tag");
    let a = abort_of(&out[0]);
    assert!(!a.t_bit);
    assert_eq!(
        a.causes.iter().collect::<Vec<_>>(),
        vec![CauseRepr::UserInitiatedAbort {
            reason: ADAPTATION_REASON.as_bytes()
        }]
    );
    assert_eq!(p.s.stats().adaptation_refused, 1);
    assert_eq!(p.s.state(), State::Established);
}

/// RFC 5043 §11.1 on the active side: an INIT ACK without the indication ends the association
/// with ABORT, reported as AdaptationRefused.
#[test]
fn init_ack_without_ddp_adaptation_is_refused_5043_11_1() {
    let mut cep = endpoint(C_PORT, 1);
    let mut c = cep.connect(t(0), S_ADDR, S_PORT);
    let init = drain(&mut c, t(0));
    let ChunkRepr::Init(i) = chunks(&init[0])[0] else {
        panic!()
    };
    let cookie = [0u8; 8];
    let params = [ParamRepr::StateCookie(&cookie)];
    let ack = ChunkRepr::InitAck(ddpdk_dataplane::wire::sctp::InitAckRepr(InitRepr {
        initiate_tag: 0xabcd,
        a_rwnd: 65536,
        outbound_streams: 4,
        inbound_streams: 4,
        initial_tsn: 5,
        params: List::new(&params),
    }));
    let p = packet(S_PORT, C_PORT, i.initiate_tag, &[ack]);
    c.handle(t(1), &p, &mut ignore).unwrap();
    assert_eq!(
        events(&mut c),
        vec![Event::Closed(CloseReason::AdaptationRefused { peer: None })]
    );
    let out = drain(&mut c, t(1));
    assert_eq!(vtag(&out[0]), 0xabcd);
    assert!(matches!(chunks(&out[0])[0], ChunkRepr::Abort(_)));
    assert_eq!(c.stats().adaptation_refused, 1);
    assert!(c.is_closed());
}

/// RFC 9260 §3.2.1: unknown INIT parameters follow their type's upper bits. 0x8xxx (10) is
/// skipped silently; 0xCxxx (11) is skipped and reported in the INIT ACK as Unrecognized
/// Parameter; 0x4xxx (01) stops the walk and is reported; after a stop, later parameters
/// (here the ALI) are not processed.
#[test]
fn unknown_init_parameters_follow_3_2_1() {
    let mut sep = endpoint(S_PORT, 2);
    let mut out = vec![0u8; 2048];
    let skip = ParamRepr::Unknown {
        param_type: 0x8123,
        value: b"skip",
    };
    let report = ParamRepr::Unknown {
        param_type: 0xC123,
        value: b"report",
    };
    let params = [skip, ParamRepr::AdaptationLayerIndication(1), report];
    let init = init_chunk(9, &params);
    let Outcome::Reply(n) = sep.handle(t(0), C_ADDR, &init, &mut out, &mut ignore) else {
        panic!()
    };
    let cs = chunks(&out[..n]);
    let ChunkRepr::InitAck(ia) = cs[0] else {
        panic!()
    };
    let reported: Vec<&[u8]> =
        ia.0.params
            .iter()
            .filter_map(|p| match p {
                ParamRepr::UnrecognizedParameter(b) => Some(b),
                _ => None,
            })
            .collect();
    // The report holds the whole parameter: type 0xC123, length 10, "report".
    assert_eq!(reported, vec![&b"\xc1\x23\x00\x0areport"[..]]);
    // A 01 parameter before the ALI stops the walk: the ALI is never seen, so the INIT is
    // refused, and the stopping parameter is reported (01 = stop and report).
    let stop = ParamRepr::Unknown {
        param_type: 0x4123,
        value: b"stop",
    };
    let init = init_chunk(10, &[stop, ParamRepr::AdaptationLayerIndication(1)]);
    let Outcome::Reply(n) = sep.handle(t(0), C_ADDR, &init, &mut out, &mut ignore) else {
        panic!()
    };
    assert!(matches!(chunks(&out[..n])[0], ChunkRepr::Abort(_)));
}

// ---------------------------------------------------------------------------------------
// Out of the blue (§8.4) and verification tags (§8.5)
// ---------------------------------------------------------------------------------------

/// §8.4 rules 2, 5, 6, 7, 8 and §8.5.1 A.
#[test]
fn out_of_the_blue_packets_8_4() {
    let mut sep = endpoint(S_PORT, 2);
    let mut h = |p: Vec<u8>| out_of_the_blue(&mut sep, &p);
    let abort = ChunkRepr::Abort(AbortRepr {
        t_bit: false,
        causes: List::empty(),
    });
    let sack = a_sack();
    // Rule 2: anything with an ABORT in it, even after another chunk, is dropped silently.
    assert_eq!(
        h(packet(C_PORT, S_PORT, 77, &[sack, abort])),
        Err(Ignored::Abort)
    );
    // Rule 5: SHUTDOWN ACK -> SHUTDOWN COMPLETE, tag reflected, T bit set.
    let r = h(packet(C_PORT, S_PORT, 77, &[ChunkRepr::ShutdownAck])).unwrap();
    assert_eq!(vtag(&r), 77);
    assert_eq!(
        chunks(&r)[0],
        ChunkRepr::ShutdownComplete(ShutdownCompleteRepr { t_bit: true })
    );
    // Rule 6 and 7: SHUTDOWN COMPLETE, COOKIE ACK and ERROR are dropped.
    let sc = ChunkRepr::ShutdownComplete(ShutdownCompleteRepr { t_bit: false });
    assert_eq!(
        h(packet(C_PORT, S_PORT, 77, &[sc])),
        Err(Ignored::ShutdownComplete)
    );
    assert_eq!(
        h(packet(C_PORT, S_PORT, 77, &[ChunkRepr::CookieAck])),
        Err(Ignored::CookieAckOrError)
    );
    // Rule 8: anything else gets ABORT with the tag reflected and the T bit.
    let r = h(packet(C_PORT, S_PORT, 77, &[sack])).unwrap();
    assert_eq!(vtag(&r), 77);
    assert!(matches!(
        chunks(&r)[0],
        ChunkRepr::Abort(AbortRepr { t_bit: true, .. })
    ));
    // §8.5.1 A: an INIT with a non-zero tag, or bundled with anything, is dropped.
    let init = ChunkRepr::Init(InitRepr {
        initiate_tag: 5,
        a_rwnd: 65536,
        outbound_streams: 1,
        inbound_streams: 1,
        initial_tsn: 1,
        params: List::new(&[ParamRepr::AdaptationLayerIndication(1)]),
    });
    assert_eq!(h(packet(C_PORT, S_PORT, 3, &[init])), Err(Ignored::BadInit));
    assert_eq!(
        h(packet(C_PORT, S_PORT, 0, &[init, ChunkRepr::CookieAck])),
        Err(Ignored::BadInit)
    );
    // §3.3.2: an Initiate Tag of 0 is dropped silently.
    assert_eq!(
        h(init_chunk(0, &[ParamRepr::AdaptationLayerIndication(1)])),
        Err(Ignored::BadInit)
    );
    // A corrupted packet never gets past CRC32c.
    let mut bad = packet(C_PORT, S_PORT, 77, &[sack]);
    bad[14] ^= 1;
    assert_eq!(h(bad), Err(Ignored::BadChecksum));
}

/// What the endpoint `sep` makes of packet `p` from the client, out of the blue: its reply, or
/// why it was ignored.
fn out_of_the_blue(sep: &mut Endpoint, p: &[u8]) -> Result<Vec<u8>, Ignored> {
    let mut out = vec![0u8; 2048];
    match sep.handle(t(0), C_ADDR, p, &mut out, &mut ignore) {
        Outcome::Reply(n) => Ok(out[..n].to_vec()),
        Outcome::Ignored(why) => Err(why),
        Outcome::Accepted(_) => panic!("accepted"),
    }
}

/// A SACK of TSN 1, nothing else.
fn a_sack() -> ChunkRepr<'static> {
    ChunkRepr::Sack(SackRepr {
        cum_tsn_ack: 1,
        a_rwnd: 1500,
        gap_ack_blocks: List::empty(),
        dup_tsns: List::empty(),
    })
}

/// §8.4 rules 5-7 ask whether an out-of-the-blue packet "contains" a SHUTDOWN ACK, a SHUTDOWN
/// COMPLETE, a COOKIE ACK or a Stale Cookie ERROR, not whether it starts with one: behind a
/// SACK, a SHUTDOWN ACK is still answered with SHUTDOWN COMPLETE (T bit), and the others are
/// still dropped. Before, rule 8's ABORT answered all four (an independent review, session 68).
#[test]
fn out_of_the_blue_rules_5_to_7_look_at_every_chunk_8_4() {
    let mut sep = endpoint(S_PORT, 2);
    let mut h = |p: Vec<u8>| out_of_the_blue(&mut sep, &p);
    let sack = a_sack();
    let r = h(packet(C_PORT, S_PORT, 77, &[sack, ChunkRepr::ShutdownAck])).unwrap();
    assert_eq!(vtag(&r), 77);
    assert_eq!(
        chunks(&r),
        [ChunkRepr::ShutdownComplete(ShutdownCompleteRepr {
            t_bit: true
        })],
        "rule 5"
    );
    let sc = ChunkRepr::ShutdownComplete(ShutdownCompleteRepr { t_bit: false });
    assert_eq!(
        h(packet(C_PORT, S_PORT, 77, &[sack, sc])),
        Err(Ignored::ShutdownComplete),
        "rule 6"
    );
    assert_eq!(
        h(packet(C_PORT, S_PORT, 77, &[sack, ChunkRepr::CookieAck])),
        Err(Ignored::CookieAckOrError),
        "rule 7, COOKIE ACK"
    );
    let causes = [CauseRepr::StaleCookie { staleness: 1000 }];
    let stale = ChunkRepr::Error(ErrorChunkRepr {
        causes: List::new(&causes),
    });
    assert_eq!(
        h(packet(C_PORT, S_PORT, 77, &[sack, stale])),
        Err(Ignored::CookieAckOrError),
        "rule 7, Stale Cookie"
    );
    // Another ERROR is rule 8's, as before.
    let other_causes = [CauseRepr::InvalidMandatoryParameter];
    let other = ChunkRepr::Error(ErrorChunkRepr {
        causes: List::new(&other_causes),
    });
    let r = h(packet(C_PORT, S_PORT, 77, &[sack, other])).unwrap();
    assert!(matches!(
        chunks(&r)[0],
        ChunkRepr::Abort(AbortRepr { t_bit: true, .. })
    ));
}

/// §8.4 for a port with nothing on it (ours is the address's only SCTP endpoint): an INIT
/// gets an ABORT on its Initiate Tag with the T bit clear (rule 3), from the port it was
/// sent to, and the association that sent it ends at once (PeerAbort) instead of
/// retransmitting its INIT until it gives up; a COOKIE ECHO there gets rule 8's ABORT.
#[test]
fn an_init_to_a_port_with_no_endpoint_is_aborted_8_4_rule_3() {
    const CLOSED: u16 = S_PORT + 1;
    let mut sep = endpoint(S_PORT, 2);
    let mut cep = endpoint(C_PORT, 1);
    let mut c = cep.connect(t(0), S_ADDR, CLOSED);
    let init = drain(&mut c, t(0));
    let mut out = vec![0u8; 2048];
    let Outcome::Reply(n) = sep.handle(t(0), C_ADDR, &init[0], &mut out, &mut ignore) else {
        panic!("an INIT to a closed port is answered")
    };
    let r = out[..n].to_vec();
    assert_eq!(vtag(&r), c.local_tag(), "the INIT's Initiate Tag");
    let hdr = HeaderRepr::parse(&Packet::new_verified(&r[..]).unwrap()).unwrap();
    assert_eq!((hdr.src_port, hdr.dst_port), (CLOSED, C_PORT));
    assert!(matches!(
        chunks(&r)[0],
        ChunkRepr::Abort(AbortRepr { t_bit: false, .. })
    ));
    assert_eq!(sep.stats().closed_port_aborts_out, 1);
    let _ = c.handle(t(1), &r, &mut ignore);
    assert_eq!(
        c.state(),
        State::Closed,
        "the connecting side heard the ABORT"
    );
    // Our own port still answers an INIT with an INIT ACK.
    let mut c2 = cep.connect(t(2), S_ADDR, S_PORT);
    let init = drain(&mut c2, t(2));
    let Outcome::Reply(n) = sep.handle(t(2), C_ADDR, &init[0], &mut out, &mut ignore) else {
        panic!("INIT not answered")
    };
    assert!(matches!(chunks(&out[..n])[0], ChunkRepr::InitAck(_)));
    // A COOKIE ECHO to the closed port: rule 8, tag reflected, T bit set.
    let echo = ChunkRepr::CookieEcho(ddpdk_dataplane::wire::sctp::CookieEchoRepr {
        cookie: &[1, 2, 3, 4],
    });
    let p = packet(C_PORT, CLOSED, 0x1234, &[echo]);
    let Outcome::Reply(n) = sep.handle(t(3), C_ADDR, &p, &mut out, &mut ignore) else {
        panic!("a COOKIE ECHO to a closed port is answered")
    };
    assert_eq!(vtag(&out[..n]), 0x1234);
    assert!(matches!(
        chunks(&out[..n])[0],
        ChunkRepr::Abort(AbortRepr { t_bit: true, .. })
    ));
}

/// §8.5: an established association drops packets that do not carry its tag; §8.5.1 B: ABORT
/// is taken with our tag and no T bit, or with the peer's tag and the T bit, and nothing else.
#[test]
fn verification_tag_rules_8_5() {
    let mut p = Pair::new();
    let (ours, theirs) = (p.s.local_tag(), p.s.peer_tag());
    let sack = ChunkRepr::Sack(SackRepr {
        cum_tsn_ack: 0,
        a_rwnd: 1500,
        gap_ack_blocks: List::empty(),
        dup_tsns: List::empty(),
    });
    assert_eq!(
        p.s.handle(
            t(5),
            &packet(C_PORT, S_PORT, ours ^ 1, &[sack]),
            &mut ignore
        ),
        Err(Discard::BadVerificationTag)
    );
    let abort = |t_bit| {
        ChunkRepr::Abort(AbortRepr {
            t_bit,
            causes: List::empty(),
        })
    };
    // Our tag with T set, and the peer's tag without T: both wrong.
    let _ = p.s.handle(
        t(5),
        &packet(C_PORT, S_PORT, ours, &[abort(true)]),
        &mut ignore,
    );
    let _ = p.s.handle(
        t(5),
        &packet(C_PORT, S_PORT, theirs, &[abort(false)]),
        &mut ignore,
    );
    assert_eq!(p.s.state(), State::Established);
    assert_eq!(p.s.stats().bad_vtag, 3);
    // The peer's tag with T set (what an endpoint without a TCB sends): accepted.
    let _ = p.s.handle(
        t(5),
        &packet(C_PORT, S_PORT, theirs, &[abort(true)]),
        &mut ignore,
    );
    assert_eq!(
        events(&mut p.s).last(),
        Some(&Event::Closed(CloseReason::PeerAbort { cause: None }))
    );
}

// ---------------------------------------------------------------------------------------
// Data (RFC 9260 §6, RFC 5043 §9, §10)
// ---------------------------------------------------------------------------------------

fn data(tsn: u32, stream: u16, unordered: bool, b: bool, e: bool, payload: &[u8]) -> ChunkRepr<'_> {
    ChunkRepr::Data(DataRepr {
        immediate: false,
        unordered,
        beginning: b,
        ending: e,
        tsn,
        stream_id: stream,
        ssn: 0,
        ppid: 16,
        user_data: payload,
    })
}

/// RFC 5043 §10: ordered DATA is never delivered; the association is aborted with a Protocol
/// Violation that says why. (Fragments are taken: `fragmented_data_is_reassembled_5043_9`.)
#[test]
fn ordered_data_is_refused_5043_10() {
    let why = "RFC 5043 §10";
    let mut p = Pair::new();
    let tag = p.s.local_tag();
    let mut got = 0;
    let pkt = packet(C_PORT, S_PORT, tag, &[data(1, 0, false, true, true, b"x")]);
    let _ = p.s.handle(t(5), &pkt, &mut |_: Message<'_>| got += 1);
    assert_eq!(got, 0, "nothing delivered");
    let ev = events(&mut p.s);
    let Some(Event::Closed(CloseReason::ProtocolViolation(msg))) = ev.last() else {
        panic!("{ev:?}")
    };
    assert!(msg.contains(why), "{msg}");
    let out = drain(&mut p.s, t(5));
    let cs = chunks(&out[0]);
    let ChunkRepr::Abort(a) = cs[0] else { panic!() };
    assert!(matches!(
        a.causes.iter().next(),
        Some(CauseRepr::ProtocolViolation { info }) if std::str::from_utf8(info).unwrap().contains(why)
    ));
}

/// §6.5: DATA on a stream beyond the negotiated count is acknowledged, not delivered, and
/// reported with an ERROR carrying Invalid Stream Identifier.
#[test]
fn invalid_stream_is_acked_and_reported_6_5() {
    let mut p = Pair::new();
    p.c.send(0, 16, b"hello").unwrap();
    let log = p.exchange(t(5), |_, _| true);
    let first_tsn = log
        .iter()
        .find_map(|(_, pk)| {
            chunks(pk).into_iter().find_map(|c| match c {
                ChunkRepr::Data(d) => Some(d.tsn),
                _ => None,
            })
        })
        .unwrap();
    let streams = p.s.streams();
    let tag = p.s.local_tag();
    let pkt = packet(
        C_PORT,
        S_PORT,
        tag,
        &[data(first_tsn + 1, streams, true, true, true, b"bad")],
    );
    let mut got = 0;
    p.s.handle(t(6), &pkt, &mut |_: Message<'_>| got += 1)
        .unwrap();
    assert_eq!(got, 0);
    let out = drain(&mut p.s, t(6));
    let all: Vec<_> = out.iter().flat_map(|o| chunks(o)).collect();
    assert!(has(&all, |c| matches!(c, ChunkRepr::Error(e)
        if e.causes.iter().next() == Some(CauseRepr::InvalidStreamIdentifier { stream_id: streams }))));
    assert!(has(
        &all,
        |c| matches!(c, ChunkRepr::Sack(s) if s.cum_tsn_ack == first_tsn + 1)
    ));
    assert_eq!(p.s.stats().invalid_stream, 1);
}

/// §6.2: one packet of DATA is acknowledged within the delayed-ack time, not at once; a
/// second packet is acknowledged at once; a duplicate is acknowledged at once and listed.
#[test]
fn delayed_and_immediate_sacks_6_2() {
    let mut p = Pair::new();
    p.c.send(0, 16, b"one").unwrap();
    let c_out = drain(&mut p.c, t(10));
    assert_eq!(c_out.len(), 1);
    let _ = p.s.handle(t(10), &c_out[0], &mut ignore);
    assert!(
        drain(&mut p.s, t(10)).is_empty(),
        "first packet: SACK delayed"
    );
    assert_eq!(p.s.poll_timeout(), Some(t(10) + Duration::from_millis(200)));
    // The same packet again: a duplicate TSN, SACKed at once and listed.
    let _ = p.s.handle(t(20), &c_out[0], &mut ignore);
    let out = drain(&mut p.s, t(20));
    let cs = chunks(&out[0]);
    let ChunkRepr::Sack(s) = cs[0] else { panic!() };
    assert_eq!(s.dup_tsns.len(), 1);
    // Delayed ack timer expiry produces the SACK.
    p.c.send(0, 16, b"two").unwrap();
    let c_out = drain(&mut p.c, t(30));
    let _ = p.s.handle(t(30), &c_out[0], &mut ignore);
    assert!(drain(&mut p.s, t(30)).is_empty());
    p.tick(t(230));
    let out = drain(&mut p.s, t(230));
    assert!(matches!(chunks(&out[0])[0], ChunkRepr::Sack(_)));
}

/// §3.3.4 and §6.2: the SACK a receiver sends alone (no gaps, no duplicates, nothing else
/// owed: the short path of `poll_transmit`) is the packet the general builder makes for the
/// same SACK, byte for byte and checksum included, and it settles the sender's message.
#[test]
fn a_bare_sack_is_what_the_builder_would_write_3_3_4() {
    let mut p = Pair::new();
    let mut last_tsn = 0;
    for k in 0..2u8 {
        p.c.send(0, 16, &[k; 40]).unwrap();
        let c_out = drain(&mut p.c, t(10));
        assert_eq!(c_out.len(), 1);
        // The DATA chunk's TSN: after the common header (12) and the chunk's first 4 bytes.
        last_tsn = u32::from_be_bytes(c_out[0][16..20].try_into().unwrap());
        let _ = p.s.handle(t(10), &c_out[0], &mut ignore);
    }
    // Every second packet is acknowledged at once (§6.2).
    let out = drain(&mut p.s, t(10));
    assert_eq!(out.len(), 1, "one SACK for two packets");
    let cs = chunks(&out[0]);
    let [ChunkRepr::Sack(sack)] = cs[..] else {
        panic!("a lone SACK: {cs:?}")
    };
    assert_eq!((sack.gap_ack_blocks.len(), sack.dup_tsns.len()), (0, 0));
    // Its fields from what was sent and delivered, not from the packet itself: the second
    // DATA's TSN, and the whole window (both messages were taken by the layer above).
    assert_eq!(sack.cum_tsn_ack, last_tsn, "§3.3.4: the cumulative TSN ack");
    assert_eq!(
        sack.a_rwnd,
        cfg(S_PORT).a_rwnd,
        "§6.2: a_rwnd, nothing held"
    );
    let expected = packet(
        S_PORT,
        C_PORT,
        vtag(&out[0]),
        &[ChunkRepr::Sack(SackRepr {
            cum_tsn_ack: sack.cum_tsn_ack,
            a_rwnd: sack.a_rwnd,
            gap_ack_blocks: List::new(&[]),
            dup_tsns: List::new(&[]),
        })],
    );
    assert_eq!(out[0], expected);
    let _ = p.c.handle(t(11), &out[0], &mut ignore);
    assert_eq!(p.c.stats().sacks_in, 1);
    assert!(drain(&mut p.c, t(11)).is_empty(), "nothing left to send");
    assert_eq!(
        p.c.poll_timeout(),
        None,
        "T3 stopped: everything acknowledged"
    );
}

/// RFC 7053 §4.1: the last DATA chunk before the sender's queue runs dry carries the I bit,
/// and the receiver SACKs it at once instead of after its delayed-ack timer (§6.2 would wait
/// 200 ms for a lone packet). Chunks with more queued behind them do not carry it.
#[test]
fn the_last_chunk_before_idle_asks_for_an_immediate_sack_rfc7053() {
    let mut p = Pair::new();
    let with_bit = Config {
        immediate_sack_when_idle: true,
        ..cfg(C_PORT)
    };
    (p.c, p.s, _) = handshake(with_bit, cfg(S_PORT));
    p.exchange(t(2), |_, _| true);
    for i in 0..3u8 {
        p.c.send(0, 16, &[i; 1000]).unwrap();
    }
    let out = drain(&mut p.c, t(10));
    let bits: Vec<bool> = out
        .iter()
        .flat_map(|pk| chunks(pk))
        .filter_map(|c| match c {
            ChunkRepr::Data(d) => Some(d.immediate),
            _ => None,
        })
        .collect();
    assert_eq!(bits, vec![false, false, true], "only the last chunk asks");
    // A lone message: SACKed at once, though one packet alone would wait for the timer.
    p.exchange(t(10), |_, _| true);
    p.c.send(0, 16, b"lone").unwrap();
    let lone = drain(&mut p.c, t(20));
    assert_eq!(lone.len(), 1);
    let _ = p.s.handle(t(20), &lone[0], &mut ignore);
    let reply = drain(&mut p.s, t(20));
    assert!(
        reply
            .iter()
            .any(|r| matches!(chunks(r)[0], ChunkRepr::Sack(_))),
        "no SACK at once for a chunk with the I bit"
    );
}

/// §7.2.4: a lost DATA chunk is fast-retransmitted after three miss indications, before
/// T3-rtx fires, and cwnd is halved (ssthresh = max(cwnd/2, 4 MTU)).
#[test]
fn fast_retransmit_on_third_miss_7_2_4() {
    let mut p = Pair::new();
    for i in 0..8u8 {
        p.c.send(0, 16, &[i; 1000]).unwrap();
    }
    let mut dropped = None;
    let log = p.exchange(t(10), |to_server, pk| {
        if to_server && dropped.is_none() {
            if let Some(ChunkRepr::Data(d)) = chunks(pk).first() {
                dropped = Some(d.tsn);
                return false;
            }
        }
        true
    });
    let lost = dropped.unwrap();
    let rtx: Vec<_> = log
        .iter()
        .filter(|(to_s, pk)| {
            *to_s
                && chunks(pk)
                    .iter()
                    .any(|c| matches!(c, ChunkRepr::Data(d) if d.tsn == lost))
        })
        .collect();
    assert_eq!(rtx.len(), 1, "retransmitted once, without any timer");
    assert_eq!(p.c.stats().fast_retransmits, 1);
    assert_eq!(p.c.stats().t3_expiries, 0);
    assert_eq!(p.got_s.len(), 8);
}

/// Three SACKs that gap-ack the second, then the second and third, then the second to fourth
/// chunk after TSN `first`, none moving the cumulative point to it: three miss indications,
/// which mark `first` for Fast Retransmit (RFC 9260 §7.2.4).
fn three_misses_for_the_first(p: &mut Pair, tag: u32, first: u32, now: Instant) {
    let cum = first.wrapping_sub(1);
    for blocks in [&[(2u16, 2u16)][..], &[(2, 3)], &[(2, 4)]] {
        p.c.handle(now, &sack_to_client(tag, cum, blocks), &mut ignore)
            .unwrap();
    }
}

/// A pair whose client has sent `n` messages of 1000 bytes, one DATA chunk each, none of them
/// acknowledged yet; with the client's verification tag (from a SACK of two earlier messages)
/// and the TSNs, in order.
fn outstanding(n: u8) -> (Pair, u32, Vec<u32>) {
    let mut p = Pair::new();
    // The client's verification tag, from a SACK the server sends it (at once for every
    // second packet, §6.2).
    for _ in 0..2 {
        p.c.send(0, 16, &[9; 1000]).unwrap();
    }
    let log = p.exchange(t(5), |_, _| true);
    let (_, to_client) = log.iter().find(|(to_s, _)| !to_s).unwrap();
    let tag = vtag(to_client);
    for i in 0..n {
        p.c.send(0, 16, &[i; 1000]).unwrap();
    }
    let mut tsns = Vec::new();
    for _ in 0..n {
        for pk in drain(&mut p.c, t(10)) {
            for c in chunks(&pk) {
                if let ChunkRepr::Data(d) = c {
                    tsns.push(d.tsn);
                }
            }
        }
    }
    assert_eq!(tsns.len(), usize::from(n), "one chunk a message: {tsns:?}");
    (p, tag, tsns)
}

/// A SACK to the client: cumulative TSN `cum`, a_rwnd 1 MiB, these Gap Ack Blocks.
fn sack_to_client(tag: u32, cum: u32, blocks: &[(u16, u16)]) -> Vec<u8> {
    sack_window_to_client(tag, cum, blocks, 1 << 20)
}

/// A SACK to the client with Gap Ack Blocks and a window of `a_rwnd`.
fn sack_window_to_client(tag: u32, cum: u32, blocks: &[(u16, u16)], a_rwnd: u32) -> Vec<u8> {
    let blocks: Vec<GapAckBlock> = blocks
        .iter()
        .map(|&(start, end)| GapAckBlock { start, end })
        .collect();
    packet(
        S_PORT,
        C_PORT,
        tag,
        &[ChunkRepr::Sack(SackRepr {
            cum_tsn_ack: cum,
            a_rwnd,
            gap_ack_blocks: List::new(&blocks),
            dup_tsns: List::new(&[]),
        })],
    )
}

/// A SACK to the client acknowledging up to `cum`, no gaps, advertising `a_rwnd`.
fn window_to_client(tag: u32, cum: u32, a_rwnd: u32) -> Vec<u8> {
    packet(
        S_PORT,
        C_PORT,
        tag,
        &[ChunkRepr::Sack(SackRepr {
            cum_tsn_ack: cum,
            a_rwnd,
            gap_ack_blocks: List::new(&[]),
            dup_tsns: List::new(&[]),
        })],
    )
}

/// The association closed and its next packet is an ABORT with a Protocol Violation cause
/// (§12.4).
fn assert_aborted_for_violation(c: &mut Association, what: &str) {
    assert_eq!(c.state(), State::Closed, "{what}");
    let out = drain(c, t(11));
    let cs = chunks(&out[0]);
    let ChunkRepr::Abort(a) = &cs[0] else {
        panic!("{what}: an ABORT, not {cs:?}")
    };
    assert!(
        matches!(
            a.causes.iter().next(),
            Some(CauseRepr::ProtocolViolation { .. })
        ),
        "{what}: {a:?}"
    );
}

/// A packet of one INIT (tag 0, window 65536, 4 streams each way) from port `from` to `to`.
fn init_packet(
    from: u16,
    to: u16,
    tag: u32,
    initial_tsn: u32,
    params: &[ParamRepr<'_>],
) -> Vec<u8> {
    packet(
        from,
        to,
        0,
        &[ChunkRepr::Init(InitRepr {
            initiate_tag: tag,
            a_rwnd: 65536,
            outbound_streams: 4,
            inbound_streams: 4,
            initial_tsn,
            params: List::new(params),
        })],
    )
}

/// Whether any of `pks` carries a DATA chunk of `tsn`.
fn carries(pks: &[Vec<u8>], tsn: u32) -> bool {
    pks.iter().any(|pk| {
        chunks(pk)
            .iter()
            .any(|c| matches!(c, ChunkRepr::Data(d) if d.tsn == tsn))
    })
}

/// §12.4: "An SCTP implementation MUST abort the association if it receives a SACK chunk
/// acknowledging a TSN that has not been sent", whether by its Cumulative TSN Ack or by a Gap
/// Ack Block. Such a SACK was counted and ignored (an independent review). A SACK of TSNs sent
/// is taken as before; one older than the ack point is still only discarded (§6.2.1 D i).
#[test]
fn a_sack_of_a_tsn_never_sent_aborts_12_4() {
    for (what, cum_from_last, blocks) in [
        ("cumulative TSN Ack", 10u32, &[][..]),
        ("Gap Ack Block", 0, &[(2u16, 3u16)][..]),
    ] {
        let (mut p, tag, tsns) = outstanding(2);
        // The last TSN sent is tsns[1]; a block (2, 3) from tsns[1] reaches two beyond it.
        let cum = tsns[1].wrapping_add(cum_from_last);
        let cum = if blocks.is_empty() { cum } else { tsns[1] };
        let sack = sack_to_client(tag, cum, blocks);
        let _ = p.c.handle(t(11), &sack, &mut ignore);
        assert_aborted_for_violation(&mut p.c, what);
    }
    // What was sent, acknowledged: taken.
    let (mut p, tag, tsns) = outstanding(2);
    p.c.handle(t(11), &sack_to_client(tag, tsns[1], &[]), &mut ignore)
        .unwrap();
    assert_eq!(p.c.state(), State::Established);
    // Older than the ack point: discarded, the association lives on.
    p.c.handle(
        t(12),
        &sack_to_client(tag, tsns[0].wrapping_sub(5), &[]),
        &mut ignore,
    )
    .unwrap();
    assert_eq!(p.c.state(), State::Established);
}

/// A pair whose client's cwnd slow start grew (30 messages exchanged), then a window's worth
/// of 1000-byte messages sent at t(20) and not acknowledged: the pair, the client's tag, and
/// the TSNs in flight.
fn grown_window() -> (Pair, u32, Vec<u32>) {
    let mut p = Pair::new();
    for i in 0..30u8 {
        p.c.send(0, 16, &[i; 1000]).unwrap();
    }
    p.exchange(t(10), |_, _| true);
    let tag = p.c.local_tag();
    for i in 0..200u8 {
        if p.c.send(0, 16, &[i; 1000]).is_err() {
            break;
        }
    }
    let mut tsns = Vec::new();
    for _ in 0..100 {
        for pk in drain(&mut p.c, t(20)) {
            for c in chunks(&pk) {
                if let ChunkRepr::Data(d) = c {
                    tsns.push(d.tsn);
                }
            }
        }
    }
    (p, tag, tsns)
}

/// §7.2.4's note: "Before the above adjustments, if the received SACK also acknowledges new
/// DATA chunks and advances the Cumulative TSN Ack Point, the cwnd adjustment rules defined in
/// Sections 7.2.1 and 7.2.2 MUST be applied first." In slow start with the window full, two
/// SACKs give the second outstanding TSN two miss indications; a third advances the
/// cumulative point and gives it its third: the window grows by one MTU, then Fast Recovery
/// halves it. The growth was skipped, and the cut halved the smaller window (an independent
/// review).
#[test]
fn fast_recovery_halves_the_grown_window_7_2_4() {
    let (mut p, tag, tsns) = grown_window();
    assert!(tsns.len() >= 6, "{tsns:?}");
    let before = tsns[0].wrapping_sub(1);
    for (at, blocks) in [
        (21, &[(2u16, 2u16), (4, 4)][..]),
        (22, &[(2, 2), (4, 5)][..]),
    ] {
        p.c.handle(t(at), &sack_to_client(tag, before, blocks), &mut ignore)
            .unwrap();
        drain(&mut p.c, t(at));
    }
    let cwnd = p.c.cwnd();
    p.c.handle(t(23), &sack_to_client(tag, tsns[1], &[(2, 4)]), &mut ignore)
        .unwrap();
    // The path's MTU less the IPv4 header: what a DATA packet may take.
    let mtu = 1480;
    assert_eq!(p.c.cwnd(), ((cwnd + mtu) / 2).max(4 * mtu), "from {cwnd}");
}

/// §6.1 A: a zero window probe "SHOULD only be sent when all outstanding DATA chunks have been
/// cumulatively acknowledged and no DATA chunks are in flight". A peer with its window at 0
/// gap-acks every outstanding chunk (a block from offset 1) without moving its cumulative
/// point: nothing is in flight, but nothing is cumulatively acknowledged either, so no new
/// chunk may go. One went with each such SACK (an independent review).
#[test]
fn no_zero_window_probe_while_chunks_are_only_gap_acked_6_1_a() {
    let (mut p, tag, tsns) = outstanding(3);
    let sack = packet(
        S_PORT,
        C_PORT,
        tag,
        &[ChunkRepr::Sack(SackRepr {
            cum_tsn_ack: tsns[0].wrapping_sub(1),
            a_rwnd: 0,
            gap_ack_blocks: List::new(&[GapAckBlock { start: 1, end: 3 }]),
            dup_tsns: List::new(&[]),
        })],
    );
    p.c.handle(t(20), &sack, &mut ignore).unwrap();
    p.c.send(0, 16, &[5; 100]).unwrap();
    let sent = drain(&mut p.c, t(20));
    assert!(
        !sent
            .iter()
            .any(|pk| chunks(pk).iter().any(|c| matches!(c, ChunkRepr::Data(_)))),
        "no DATA into a window of 0 with chunks outstanding"
    );
}

/// §6.2.1 C: "Any time a DATA chunk is marked for retransmission, either via T3-rtx timer
/// expiration ... or via Fast Retransmit ..., add the data size of those chunks to the rwnd."
/// T3 marks three chunks in flight: the peer's window takes their room back. It used to stay
/// as before the expiry, the chunks counted twice once retransmitted (an independent review).
#[test]
fn t3_gives_the_marked_chunks_room_back_6_2_1_c() {
    let (mut p, _tag, _tsns) = outstanding(3);
    let before = p.c.peer_rwnd();
    p.c.handle_timeout(t(400));
    assert_eq!(p.c.stats().t3_expiries, 1);
    assert!(
        p.c.peer_rwnd() >= before + 3 * 1000,
        "{before} then {}",
        p.c.peer_rwnd()
    );
}

/// §6.1 C: "before sending new DATA chunks, the sender MUST first transmit any outstanding
/// DATA chunks that are marked for retransmission (limited by the current cwnd)". T3 marks
/// three 1000-byte chunks; a 100-byte message is queued; the peer's HEARTBEAT with 500 bytes
/// of information makes the next packet's HEARTBEAT ACK leave no room for a 1000-byte chunk.
/// The small new message used to go in that room, ahead of the retransmissions (an
/// independent review); now the first DATA to leave is a retransmission.
#[test]
fn new_data_waits_for_marked_retransmissions_6_1_c() {
    let (mut p, tag, tsns) = outstanding(3);
    p.c.handle_timeout(t(400));
    assert_eq!(p.c.stats().t3_expiries, 1);
    p.c.send(0, 16, &[7; 100]).unwrap();
    let info = [0u8; 500];
    let hb = packet(
        S_PORT,
        C_PORT,
        tag,
        &[ChunkRepr::Heartbeat(HeartbeatRepr {
            info: &info,
            extra: &[],
        })],
    );
    p.c.handle(t(400), &hb, &mut ignore).unwrap();
    let sent: Vec<u32> = drain(&mut p.c, t(400))
        .iter()
        .flat_map(|pk| {
            chunks(pk)
                .into_iter()
                .filter_map(|c| match c {
                    ChunkRepr::Data(d) => Some(d.tsn),
                    _ => None,
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        sent.first().is_some_and(|t| tsns.contains(t)),
        "the first DATA is a retransmission: {sent:?}, marked {tsns:?}"
    );
}

/// §9.2 with §12.4: a SHUTDOWN's Cumulative TSN Ack acknowledges as a SACK's does, so one
/// past the TSNs sent aborts the association with a Protocol Violation, as a SACK's does (and
/// as Linux does). It was ignored, and the SHUTDOWN taken. One within what was sent is taken.
#[test]
fn a_shutdown_acknowledging_a_tsn_never_sent_aborts_9_2_12_4() {
    let shutdown = |tag: u32, cum: u32| {
        packet(
            S_PORT,
            C_PORT,
            tag,
            &[ChunkRepr::Shutdown(ShutdownRepr { cum_tsn_ack: cum })],
        )
    };
    let (mut p, tag, tsns) = outstanding(2);
    let _ =
        p.c.handle(t(11), &shutdown(tag, tsns[1].wrapping_add(3)), &mut ignore);
    assert_aborted_for_violation(&mut p.c, "SHUTDOWN");
    let (mut p, tag, tsns) = outstanding(2);
    p.c.handle(t(11), &shutdown(tag, tsns[1]), &mut ignore)
        .unwrap();
    assert_ne!(p.c.state(), State::Closed);
}

/// §6.2.1 B: "Any time a DATA chunk is transmitted (or retransmitted) to a peer, the endpoint
/// subtracts the data size of the chunk from the rwnd of that peer." The SACK whose third miss
/// marks a chunk for fast retransmission takes it out of the flight, so its room is back in
/// the peer's rwnd (rule C); the retransmission must take it again, or new DATA could be sent
/// into room the retransmitted chunk holds until the next SACK (an independent review).
#[test]
fn a_retransmission_takes_its_room_from_the_peers_rwnd_6_2_1_b() {
    let (mut p, tag, tsns) = outstanding(5);
    let cum = tsns[0].wrapping_sub(1);
    let sack = |blocks: &[(u16, u16)]| sack_to_client(tag, cum, blocks);
    // The second, third and fourth arrive: three misses for the first.
    for blocks in [&[(2, 2)][..], &[(2, 3)], &[(2, 4)]] {
        p.c.handle(t(11), &sack(blocks), &mut ignore).unwrap();
    }
    let before = p.c.peer_rwnd();
    let sent = drain(&mut p.c, t(11));
    assert!(carries(&sent, tsns[0]), "the first, fast-retransmitted");
    assert_eq!(p.c.stats().data_out, 7, "nothing new went with it");
    // 1000 bytes of user data and the 16-byte DATA chunk header.
    assert_eq!(p.c.peer_rwnd(), before - 1016, "its room taken again");
}

/// §7.2.1: "When the endpoint does not transmit data on a given transport address, the cwnd
/// of the transport address SHOULD be adjusted to max(cwnd/2, 4*MTU) per RTO", and "the
/// initial cwnd ... after a sufficiently long idle period MUST be set to min(4*MTU,
/// max(2*MTU, 4404 bytes))". The cwnd a bulk transfer grew is halved by an idle RTO, left
/// alone by a shorter pause, and back at the initial window after a long idle period. It was
/// never changed by idling (an independent review).
#[test]
fn an_idle_path_forgets_its_cwnd_7_2_1() {
    let mut p = Pair::new();
    let mtu = 1500;
    let initial = (4 * mtu).min((2 * mtu).max(4404));
    // A transfer over an instant network (all at t(10)): slow start grows the cwnd.
    for i in 0..200u8 {
        p.c.send(0, 16, &[i; 1000]).unwrap();
    }
    p.exchange(t(10), |_, _| true);
    assert_eq!(p.got_s.len(), 200, "all delivered");
    let grown = p.c.cwnd();
    assert!(grown >= 16 * mtu, "grown: {grown}");
    // Two packets at a time (the second draws the SACK at once, §6.2).
    let two = |p: &mut Pair, at: u64| {
        for i in 0..2 {
            p.c.send(0, 16, &[i; 1000]).unwrap();
        }
        p.exchange(t(at), |_, _| true);
    };
    // Less than an RTO (100 ms) after the last DATA: unchanged.
    two(&mut p, 60);
    assert_eq!(p.c.cwnd(), grown, "a pause shorter than an RTO");
    // One RTO and a half after that: halved.
    two(&mut p, 210);
    assert_eq!(p.c.cwnd(), grown / 2, "one idle RTO");
    // Ten seconds idle: the initial window.
    p.c.send(0, 16, &[3; 100]).unwrap();
    drain(&mut p.c, t(10_210));
    assert_eq!(p.c.cwnd(), initial, "a long idle period");
}

/// §6.2.1 D iii: a SACK that no longer covers a TSN an earlier Gap Ack Block did (the
/// receiver reneged) counts one miss indication for it (§7.2.4). Here the TSN had two misses
/// before it was gap-acked, so the reneging SACK, which newly acknowledges nothing (no HTNA
/// miss for anyone), is its third: it is fast-retransmitted at once instead of waiting for
/// T3-rtx.
#[test]
fn a_reneged_tsn_gets_a_miss_indication_6_2_1_d_iii() {
    let (mut p, tag, tsns) = outstanding(5);
    let base = p.c.stats().fast_retransmits;
    let cum = tsns[0].wrapping_sub(1);
    let sack = |blocks: &[(u16, u16)]| sack_to_client(tag, cum, blocks);
    // Offsets from `cum`: TSN k of the five is offset k + 1. The third arrives, then the
    // fourth (two HTNA misses for the first two), then the second (gap-acked, two misses).
    for blocks in [&[(3, 3)][..], &[(3, 4)], &[(2, 4)]] {
        p.c.handle(t(11), &sack(blocks), &mut ignore).unwrap();
    }
    assert_eq!(
        p.c.stats().fast_retransmits,
        base,
        "nothing retransmitted yet"
    );
    let first = drain(&mut p.c, t(11));
    // The first had its third miss when the second was newly gap-acked.
    assert!(carries(&first, tsns[0]), "the first, fast-retransmitted");
    assert!(!carries(&first, tsns[1]), "the second, gap-acked");
    // The receiver reneges on the second: a third miss, no HTNA (nothing newly acked).
    p.c.handle(t(12), &sack(&[(3, 4)]), &mut ignore).unwrap();
    let second = drain(&mut p.c, t(12));
    assert!(
        carries(&second, tsns[1]),
        "the reneged TSN is fast-retransmitted without T3: {:?}",
        p.c.stats()
    );
    assert_eq!(p.c.stats().t3_expiries, 0);
}

/// §7.2.4: "A newly acknowledged DATA chunk is one not previously acknowledged in a SACK." A
/// TSN gap-acked, reneged, then gap-acked again is not newly acknowledged the second time, so
/// it does not raise the HTNA threshold: the TSNs below it get no miss from that SACK.
#[test]
fn a_tsn_acked_again_after_reneging_is_not_newly_acked_7_2_4() {
    let (mut p, tag, tsns) = outstanding(5);
    let cum = tsns[0].wrapping_sub(1);
    let sack = |blocks: &[(u16, u16)]| sack_to_client(tag, cum, blocks);
    // The third arrives (the first two: one miss each), is reneged, and reported again: not
    // newly, so still one miss each.
    for blocks in [&[(3, 3)][..], &[], &[(3, 3)]] {
        p.c.handle(t(11), &sack(blocks), &mut ignore).unwrap();
    }
    // The fourth, then the fifth: the second and third miss of the first two.
    p.c.handle(t(11), &sack(&[(3, 4)]), &mut ignore).unwrap();
    let after_fourth = drain(&mut p.c, t(11));
    assert!(
        !carries(&after_fourth, tsns[0]),
        "two misses only: the re-acknowledged TSN counted as new ({:?})",
        p.c.stats()
    );
    p.c.handle(t(11), &sack(&[(3, 5)]), &mut ignore).unwrap();
    let after_fifth = drain(&mut p.c, t(11));
    assert!(carries(&after_fifth, tsns[0]), "the third miss");
    assert_eq!(p.c.stats().t3_expiries, 0);
}

/// §6.2.1 D iii and §7.2.4: a SACK that reneges on a TSN and newly acknowledges a higher one
/// counts one miss for the reneged TSN (the HTNA walk's), not a second for the reneging.
#[test]
fn a_reneged_tsn_below_the_htna_gets_one_miss_not_two_6_2_1_d_iii() {
    let (mut p, tag, tsns) = outstanding(5);
    let cum = tsns[0].wrapping_sub(1);
    let sack = |blocks: &[(u16, u16)]| sack_to_client(tag, cum, blocks);
    // The second arrives (first: 1 miss); then only the fourth is reported: the second is
    // reneged below the newly acked fourth (first 2, second 1, third 1).
    for blocks in [&[(2, 2)][..], &[(4, 4)]] {
        p.c.handle(t(11), &sack(blocks), &mut ignore).unwrap();
    }
    // The fifth: first 3 (fast-retransmitted), second 2, third 2.
    p.c.handle(t(11), &sack(&[(4, 5)]), &mut ignore).unwrap();
    let after_fifth = drain(&mut p.c, t(11));
    assert!(carries(&after_fifth, tsns[0]), "the first's third miss");
    assert!(
        !carries(&after_fifth, tsns[1]),
        "the reneged TSN had two misses only: counted twice on reneging ({:?})",
        p.c.stats()
    );
    // The retransmitted first arrives: in Fast Recovery, with the cumulative point moved,
    // misses count below the highest TSN reported (the fifth): the second's and the third's
    // third (the second goes first, one chunk a packet).
    let sack = sack_to_client(tag, tsns[0], &[(3, 4)]);
    p.c.handle(t(12), &sack, &mut ignore).unwrap();
    let after_cum = drain(&mut p.c, t(12));
    assert!(carries(&after_cum, tsns[1]), "the reneged TSN's third miss");
}

/// §8.1: "The counter MUST be reset each time a DATA chunk sent to that peer endpoint is
/// acknowledged (by the reception of a SACK)", a chunk acknowledged once before and reneged
/// included. Here every outstanding TSN was gap-acked, reneged, and retransmitted by T3-rtx
/// until the path went inactive (§8.2); the SACK that finally covers them all newly counts no
/// byte (§7.2.4), yet it clears the counter, and the path is active again.
#[test]
fn acking_reneged_data_clears_the_error_counter_8_1() {
    let (mut p, tag, tsns) = outstanding(3);
    let path_max = cfg(C_PORT).path_max_retrans;
    let cum = tsns[0].wrapping_sub(1);
    p.c.handle(t(11), &sack_to_client(tag, cum, &[(1, 3)]), &mut ignore)
        .unwrap();
    p.c.handle(t(11), &sack_to_client(tag, cum, &[]), &mut ignore)
        .unwrap();
    let _ = events(&mut p.c);
    for _ in 0..=path_max {
        let at = p.c.poll_timeout().unwrap();
        p.c.handle_timeout(at);
        drain(&mut p.c, at);
    }
    assert_eq!(events(&mut p.c), vec![Event::PathChange { active: false }]);
    let at = p.c.poll_timeout().unwrap();
    p.c.handle(at, &sack_to_client(tag, tsns[2], &[]), &mut ignore)
        .unwrap();
    assert_eq!(
        events(&mut p.c),
        vec![Event::PathChange { active: true }],
        "the acknowledgement cleared the error counter"
    );
}

/// §6.2.1 D ii and iii: a reneged TSN is outstanding again, so it is back in the bytes in
/// flight that the peer's rwnd is reduced by (a_rwnd less the flight).
#[test]
fn a_reneged_tsn_is_back_in_flight_6_2_1() {
    let (mut p, tag, tsns) = outstanding(3);
    let cum = tsns[0].wrapping_sub(1);
    p.c.handle(t(11), &sack_to_client(tag, cum, &[(2, 2)]), &mut ignore)
        .unwrap();
    let gap_acked = p.c.peer_rwnd();
    p.c.handle(t(11), &sack_to_client(tag, cum, &[]), &mut ignore)
        .unwrap();
    let reneged = p.c.peer_rwnd();
    assert!(
        reneged < gap_acked && gap_acked - reneged >= 1000,
        "rwnd {gap_acked} with the second gap-acked, {reneged} after reneging"
    );
}

/// Queues `n` messages of 1000 bytes (a DATA chunk of 1016 bytes each) at `c` and gives it
/// transmit opportunities at `at` until it sends no more; the TSNs that went, in order.
fn send_and_drain(c: &mut Association, n: usize, at: Instant) -> Vec<u32> {
    for i in 0..n {
        c.send(0, 16, &[i as u8; 1000]).unwrap();
    }
    let mut tsns = Vec::new();
    for _ in 0..20 {
        for pk in drain(c, at) {
            for ch in chunks(&pk) {
                if let ChunkRepr::Data(d) = ch {
                    tsns.push(d.tsn);
                }
            }
        }
    }
    tsns
}

/// The path MTU the tests' associations use (1500 less the IPv4 header), and the bytes a DATA
/// chunk of a 1000-byte message takes (its 16-byte header included).
const MTU: usize = 1480;
const CHUNK: usize = 1016;

/// §7.2.1: in slow start cwnd grows "only if the current congestion window is being fully
/// utilized and the data sender is not in Fast Recovery", by "at most, the lesser of (1) the
/// total size of the previously outstanding DATA chunk(s) acknowledged and (2) the
/// destination's path MTU". RFC 9260 has no third condition that the SACK advance the
/// Cumulative TSN Ack Point (RFC 4960 had; RFC 8540 §3.22 dropped it). A SACK that only
/// gap-acks two chunks of a full window grows it; the SACK that later covers them
/// cumulatively counts only the chunk newly acknowledged. The gap-acked bytes were counted in
/// neither SACK (an independent review).
#[test]
fn slow_start_counts_gap_acked_bytes_once_7_2_1() {
    let (mut p, tag, tsns) = outstanding(5);
    let initial = 4404;
    assert_eq!(p.c.cwnd(), initial, "five chunks (5080 bytes) fill it");
    let cum = tsns[0].wrapping_sub(1);
    p.c.handle(t(11), &sack_to_client(tag, cum, &[(2, 3)]), &mut ignore)
        .unwrap();
    let grown = initial + MTU.min(2 * CHUNK);
    assert_eq!(p.c.cwnd(), grown, "the second and third gap-acked");
    // The window full again (3048 + 3 chunks), then the first arrives.
    assert_eq!(send_and_drain(&mut p.c, 3, t(11)).len(), 3);
    p.c.handle(t(12), &sack_to_client(tag, tsns[2], &[]), &mut ignore)
        .unwrap();
    assert_eq!(
        p.c.cwnd(),
        grown + CHUNK,
        "only the first is newly acknowledged"
    );
}

/// §7.2.2: "Whenever cwnd is greater than ssthresh, upon each SACK chunk arrival, increase
/// partial_bytes_acked by the total number of bytes of all new chunks acknowledged in that
/// SACK chunk, including chunks acknowledged by the new Cumulative TSN Ack, by Gap Ack
/// Blocks"; when it reaches cwnd with the window full, cwnd grows by one MTU. Seven chunks of
/// a full window of eight gap-acked count 7 x 1016 bytes at once; the SACK that then covers
/// all eight cumulatively adds only the first's 1016, which makes one cwnd: cwnd grows by an
/// MTU and 8 x 1016 - cwnd is left. Bytes gap-acked by a SACK that did not move the
/// cumulative point were counted nowhere, so the window grew too slowly under loss or
/// reordering (an independent review).
#[test]
fn congestion_avoidance_counts_gap_acked_bytes_once_7_2_2() {
    let (mut p, tag, tsns) = outstanding(5);
    // Into congestion avoidance: three misses for the first start Fast Recovery, which sets
    // ssthresh and cwnd to max(cwnd/2, 4 MTU); leaving it, a full window in slow start grows
    // cwnd past ssthresh.
    three_misses_for_the_first(&mut p, tag, tsns[0], t(11));
    let ssthresh = 4 * MTU;
    assert_eq!(p.c.cwnd(), ssthresh, "Fast Recovery");
    assert!(carries(&drain(&mut p.c, t(11)), tsns[0]));
    p.c.handle(t(12), &sack_to_client(tag, tsns[4], &[]), &mut ignore)
        .unwrap();
    let full = send_and_drain(&mut p.c, 6, t(12));
    assert_eq!(full.len(), 6, "6 x 1016 bytes fill {ssthresh}");
    p.c.handle(t(13), &sack_to_client(tag, full[5], &[]), &mut ignore)
        .unwrap();
    let cwnd = ssthresh + MTU;
    assert_eq!(p.c.cwnd(), cwnd, "slow start's last step");
    assert_eq!(p.c.partial_bytes_acked(), 0, "nothing in flight");

    let window = send_and_drain(&mut p.c, 8, t(13));
    assert_eq!(window.len(), 8, "8 x 1016 bytes fill {cwnd}");
    p.c.handle(t(14), &sack_to_client(tag, full[5], &[(2, 8)]), &mut ignore)
        .unwrap();
    assert_eq!(
        p.c.partial_bytes_acked(),
        7 * CHUNK,
        "the seven gap-acked chunks count when first acknowledged"
    );
    assert_eq!(p.c.cwnd(), cwnd, "7 x 1016 is less than cwnd");
    // The window full again (the first and 7 new chunks), then the first arrives.
    assert_eq!(send_and_drain(&mut p.c, 7, t(14)).len(), 7);
    p.c.handle(t(15), &sack_to_client(tag, window[7], &[]), &mut ignore)
        .unwrap();
    assert_eq!(p.c.cwnd(), cwnd + MTU, "8 x 1016 bytes acknowledged in all");
    assert_eq!(
        p.c.partial_bytes_acked(),
        8 * CHUNK - cwnd,
        "the gap-acked chunks are not counted again"
    );
}

/// §7.2.4: a chunk marked for fast retransmission whose acknowledgement arrives before the
/// retransmission went (the original was late, not lost) is not retransmitted, and the mark
/// that let the next packet ignore cwnd for it is gone with it. It stayed set: the next
/// T3-rtx retransmission then went as a fast one, counted in `fast_retransmits`, and until
/// then the association never said it owed nothing, which kept the caller polling it (an
/// independent review).
#[test]
fn a_fast_retransmission_acknowledged_before_it_went_leaves_no_mark_7_2_4() {
    let (mut p, tag, tsns) = outstanding(5);
    let fast = p.c.stats().fast_retransmits;
    let t3 = p.c.stats().t3_retransmits;
    three_misses_for_the_first(&mut p, tag, tsns[0], t(11));
    // The first's original arrives before its fast retransmission is sent.
    p.c.handle(t(11), &sack_to_client(tag, tsns[3], &[]), &mut ignore)
        .unwrap();
    assert!(drain(&mut p.c, t(11)).is_empty(), "nothing to retransmit");
    let owed_nothing = p.c.owes_nothing();
    // The last is lost: T3-rtx retransmits it.
    let at = p.c.poll_timeout().unwrap();
    p.c.handle_timeout(at);
    assert!(carries(&drain(&mut p.c, at), tsns[4]));
    assert_eq!(
        (p.c.stats().fast_retransmits, p.c.stats().t3_retransmits),
        (fast, t3 + 1),
        "a T3-rtx retransmission, not a fast one"
    );
    assert!(owed_nothing, "no retransmission was owed");
}

/// §6.3.3 E3: T3-rtx expiring before a marked fast retransmission went retransmits it under
/// its own rules (within the 1-MTU cwnd), as a T3-rtx retransmission: the fast one's leave to
/// ignore cwnd ended with the timer.
#[test]
fn t3_takes_over_a_fast_retransmission_not_yet_sent_6_3_3() {
    let (mut p, tag, tsns) = outstanding(5);
    let fast = p.c.stats().fast_retransmits;
    let t3 = p.c.stats().t3_retransmits;
    three_misses_for_the_first(&mut p, tag, tsns[0], t(11));
    let at = p.c.poll_timeout().unwrap();
    p.c.handle_timeout(at);
    let out = drain(&mut p.c, at);
    assert!(carries(&out, tsns[0]));
    assert_eq!(
        (p.c.stats().fast_retransmits, p.c.stats().t3_retransmits),
        (fast, t3 + 1),
        "the first alone (1 MTU holds one chunk a packet, and §7.2.3 allows one packet in \
         flight after T3: {} packets)",
        out.len()
    );
}

/// §7.2.3: on T3-rtx expiry cwnd = 1 MTU "and ensure that no more than one SCTP packet will
/// be in flight for that address until the endpoint receives acknowledgement for successful
/// delivery of data to that address". The flight counts chunks, not the packet around them,
/// so a packet of one 1000-byte chunk left `flight < cwnd` and a second packet went at once:
/// another retransmission, or new data (an independent review). One packet now, with as many
/// chunks as it holds (E3); the rest once the peer acknowledges it.
#[test]
fn one_packet_in_flight_after_t3_until_data_is_acknowledged_7_2_3() {
    let (mut p, tag, tsns) = outstanding(2);
    let t3 = p.c.stats().t3_retransmits;
    let at = p.c.poll_timeout().unwrap();
    p.c.handle_timeout(at);
    // New data waiting too: it must not go beside the retransmission either.
    p.c.send(0, 16, &[5; 1000]).unwrap();
    let data_packets = |out: &[Vec<u8>]| {
        out.iter()
            .filter(|pk| chunks(pk).iter().any(|c| matches!(c, ChunkRepr::Data(_))))
            .count()
    };
    let out = drain(&mut p.c, at);
    assert_eq!(data_packets(&out), 1, "one packet after T3");
    assert!(carries(&out, tsns[0]) && !carries(&out, tsns[1]));
    assert_eq!(p.c.stats().t3_retransmits, t3 + 1);
    // Nothing more while it is unacknowledged, however often the sender is asked.
    let later = at + Duration::from_millis(5);
    assert_eq!(data_packets(&drain(&mut p.c, later)), 0);
    // Its acknowledgement lets the next go (cwnd now allows a packet again).
    p.c.handle(later, &sack_to_client(tag, tsns[0], &[]), &mut ignore)
        .unwrap();
    let out = drain(&mut p.c, later);
    assert!(
        carries(&out, tsns[1]),
        "the second retransmission follows the ack"
    );
}

/// `outstanding(n)`, then its T3-rtx expired: the pair, the client's tag, the TSNs, the time.
fn t3_expired(n: u8) -> (Pair, u32, Vec<u32>, Instant) {
    let (mut p, tag, tsns) = outstanding(n);
    let at = p.c.poll_timeout().unwrap();
    p.c.handle_timeout(at);
    (p, tag, tsns, at)
}

/// §7.2.1 with §7.2.3: slow start grows cwnd "only if the current congestion window is being
/// fully utilized", and after T3-rtx the one packet allowed is the whole window. Its chunks
/// stay below a cwnd of one MTU (which counts the common header), so its acknowledgement
/// never grew the window, and every recovery cost a round trip more (an independent review).
#[test]
fn the_one_packet_after_t3_grows_cwnd_when_acknowledged_7_2_1_7_2_3() {
    let (mut p, tag, tsns, at) = t3_expired(2);
    assert_eq!(p.c.cwnd(), MTU, "T3-rtx: one MTU");
    let out = drain(&mut p.c, at);
    assert!(carries(&out, tsns[0]) && !carries(&out, tsns[1]));
    p.c.handle(at, &sack_to_client(tag, tsns[0], &[]), &mut ignore)
        .unwrap();
    assert_eq!(
        p.c.cwnd(),
        MTU + CHUNK,
        "slow start: + the bytes acknowledged"
    );
}

/// §7.2.1: slow start grows cwnd "only if the current congestion window is being fully
/// utilized". After T3-rtx, the one packet allowed (§7.2.3) uses the whole window only if
/// something waited behind it: an application-limited sender's lone chunk, acknowledged, grew
/// cwnd by its bytes (an independent review). Nor does a SACK of a flight below cwnd.
#[test]
fn an_application_limited_sender_does_not_grow_cwnd_7_2_1() {
    let (mut p, tag, tsns, at) = t3_expired(1);
    assert_eq!(p.c.cwnd(), MTU, "T3-rtx: one MTU");
    let out = drain(&mut p.c, at);
    assert!(carries(&out, tsns[0]));
    p.c.handle(at, &sack_to_client(tag, tsns[0], &[]), &mut ignore)
        .unwrap();
    assert_eq!(p.c.cwnd(), MTU, "nothing waited behind the one packet");
    // A message queued behind the one packet (held by §7.2.3): the window was used.
    let (mut p, tag, tsns, at) = t3_expired(1);
    drain(&mut p.c, at);
    p.c.send(0, 16, &[4; 1000]).unwrap();
    assert!(
        drain(&mut p.c, at).is_empty(),
        "one packet in flight after T3"
    );
    p.c.handle(at, &sack_to_client(tag, tsns[0], &[]), &mut ignore)
        .unwrap();
    assert_eq!(p.c.cwnd(), MTU + CHUNK, "a message waited behind it");
    // Two chunks out under the initial cwnd, nothing more to send: not cwnd-limited.
    let (mut p, tag, tsns) = outstanding(2);
    let before = p.c.cwnd();
    assert!(2 * CHUNK < before, "{before}");
    p.c.handle(t(50), &sack_to_client(tag, tsns[0], &[]), &mut ignore)
        .unwrap();
    assert_eq!(p.c.cwnd(), before, "a flight below cwnd");
}

/// §7.2.1: "The initial cwnd before DATA transmission or after a sufficiently long idle
/// period MUST be set to min(4*MTU, max(2*MTU, 4404 bytes))", and idling adjusts it to
/// "max(cwnd/2, 4*MTU) per RTO", which raises a small one. A cwnd cut to one MTU by T3-rtx
/// stayed small after ten seconds idle: only lowering was done (an independent review).
#[test]
fn a_long_idle_period_sets_a_small_cwnd_to_the_initial_one_7_2_1() {
    let (mut p, tag, tsns, at) = t3_expired(1);
    drain(&mut p.c, at);
    p.c.handle(at, &sack_to_client(tag, tsns[0], &[]), &mut ignore)
        .unwrap();
    let small = p.c.cwnd();
    let initial = (4 * MTU).min((2 * MTU).max(4404));
    assert!(small < initial, "{small}");
    let later = at + Duration::from_secs(10);
    p.c.send(0, 16, &[3; 100]).unwrap();
    drain(&mut p.c, later);
    assert_eq!(p.c.cwnd(), initial, "from {small}");
}

/// §6.1 B: "the sender SHOULD exceed cwnd by up to (PMTU-1) bytes on a new data transmission
/// if the flightsize does not currently reach cwnd. The breach of cwnd MUST constitute one
/// packet only." The packet that crosses cwnd takes as many small chunks as fit: asked before
/// each chunk, it stopped at the first one past cwnd (two 64-byte messages where eighteen
/// fit; an independent review).
#[test]
fn the_packet_that_crosses_cwnd_is_filled_6_1_b() {
    let mut p = Pair::new();
    for i in 0..100u8 {
        p.c.send(0, 16, &[i; 64]).unwrap();
    }
    let cwnd = p.c.cwnd();
    let data = |pk: &Vec<u8>| {
        chunks(pk)
            .iter()
            .filter(|c| matches!(c, ChunkRepr::Data(_)))
            .count()
    };
    // 18 chunks of 80 bytes to a 1480-byte packet; three fill 4320 bytes of a 4404-byte
    // cwnd, so the fourth crosses it.
    let first: Vec<usize> = drain(&mut p.c, t(10)).iter().map(data).collect();
    assert_eq!(first, [18, 18, 18, 18], "cwnd {cwnd}");
    // Within the breach allowed: 72 chunks of 80 bytes below cwnd + (PMTU - 1).
    assert!(first.iter().sum::<usize>() * 80 < cwnd + MTU - 1);
    // One packet only: nothing more until acknowledgements come.
    assert!(drain(&mut p.c, t(10)).iter().all(|pk| data(pk) == 0));
}

/// §7.2.4 step 3: "If not in Fast Recovery", one packet of the earliest chunks marked for
/// retransmission goes whatever cwnd says; chunks marked while in Fast Recovery "will be
/// retransmitted later on as soon as cwnd allows" (step 5). Each one marked in Fast
/// Recovery went at once, past the halved cwnd: a burst loss reported by several SACKs sent
/// a packet over cwnd for each (an independent review).
#[test]
fn in_fast_recovery_a_later_fast_retransmit_waits_for_cwnd_7_2_4() {
    let (mut p, tag, tsns) = grown_window();
    assert!(tsns.len() >= 16, "{tsns:?}");
    let base = p.c.stats().fast_retransmits;
    // The first and third TSNs lost: offsets 1 and 3 from the cumulative point.
    let cum = tsns[0].wrapping_sub(1);
    for (at, blocks) in [
        (21, &[(2u16, 2u16)][..]),
        (22, &[(2, 2), (4, 4)][..]),
        (23, &[(2, 2), (4, 5)][..]),
    ] {
        p.c.handle(t(at), &sack_to_client(tag, cum, blocks), &mut ignore)
            .unwrap();
        drain(&mut p.c, t(at));
    }
    assert_eq!(
        p.c.stats().fast_retransmits,
        base + 1,
        "the first, on entry"
    );
    // The third TSN's third miss, in Fast Recovery, with the flight above cwnd.
    p.c.handle(
        t(24),
        &sack_to_client(tag, cum, &[(2, 2), (4, 6)]),
        &mut ignore,
    )
    .unwrap();
    let flight = (1usize << 20) - p.c.peer_rwnd() as usize;
    assert!(flight >= p.c.cwnd(), "{flight} against {}", p.c.cwnd());
    let out = drain(&mut p.c, t(24));
    assert!(!carries(&out, tsns[2]), "past cwnd in Fast Recovery");
    assert_eq!(p.c.stats().fast_retransmits, base + 1);
    // The rest acknowledged (the first too): the flight falls below cwnd, and it goes,
    // still a fast retransmission.
    let last = u16::try_from(tsns.len() - 2).unwrap();
    p.c.handle(
        t(25),
        &sack_to_client(tag, tsns[1], &[(2, last)]),
        &mut ignore,
    )
    .unwrap();
    let out = drain(&mut p.c, t(25));
    assert!(carries(&out, tsns[2]), "as soon as cwnd allows");
    assert_eq!(p.c.stats().fast_retransmits, base + 2);
}

/// §6.1 A with §6.2's window update: the zero window probe the peer dropped goes again as
/// soon as a SACK reopens the window, not at its T3-rtx, which the probe's expiries backed
/// off towards RTO.Max (usrsctp's window probe recovery). A ULP waiting for its last
/// message's completion waited up to as long as the window had been closed (an independent
/// review).
#[test]
fn a_dropped_zero_window_probe_goes_again_when_the_window_opens_6_1_a() {
    let (mut p, tag, tsns) = outstanding(1);
    let sack = |cum: u32, a_rwnd: u32| window_to_client(tag, cum, a_rwnd);
    // Everything taken, the window closed; a message waits: it becomes the probe.
    p.c.handle(t(20), &sack(tsns[0], 0), &mut ignore).unwrap();
    p.c.send(0, 16, &[7; 1000]).unwrap();
    let mut now = t(20);
    drain(&mut p.c, now);
    // The peer drops the probe each time and answers with its window still 0.
    while p.c.stats().t3_expiries < 3 {
        now = p.c.poll_timeout().unwrap();
        p.c.handle_timeout(now);
        drain(&mut p.c, now);
        p.c.handle(now, &sack(tsns[0], 0), &mut ignore).unwrap();
    }
    let next_t3 = p.c.poll_timeout().unwrap();
    // The peer's ULP frees room: a window update, the probe still unacknowledged.
    let opened = now + Duration::from_millis(10);
    assert!(next_t3 > opened + Duration::from_millis(100));
    p.c.handle(opened, &sack(tsns[0], 1 << 20), &mut ignore)
        .unwrap();
    let probe = tsns[0].wrapping_add(1);
    assert!(
        carries(&drain(&mut p.c, opened), probe),
        "the probe waited for T3 at {next_t3:?}"
    );
    assert_eq!(p.c.stats().window_probe_recoveries, 1);
    // Acknowledged, nothing more to send: no further recovery on the next update.
    p.c.handle(opened, &sack(probe, 1 << 20), &mut ignore)
        .unwrap();
    assert!(drain(&mut p.c, opened)
        .iter()
        .all(|pk| chunks(pk).iter().all(|c| !matches!(c, ChunkRepr::Data(_)))));
}

/// §6.1 A: a window smaller than the message waiting is as closed to it as a window of 0: the
/// message goes as a probe, and a window update that holds it finds the probe dropped and
/// sends it again at once, whether the window opens from 500 bytes at once or from 0 in
/// two steps (0, then 500, too small still, then enough). Only a window of 0 was recovered:
/// the probe waited for its T3-rtx, backed off towards RTO.Max (an independent review).
#[test]
fn a_probe_into_a_window_too_small_for_it_goes_again_when_the_window_holds_it_6_1_a() {
    for steps in [&[500u32][..], &[0, 500]] {
        let (mut p, tag, tsns) = outstanding(1);
        let sack = |cum: u32, a_rwnd: u32| window_to_client(tag, cum, a_rwnd);
        p.c.handle(t(20), &sack(tsns[0], steps[0]), &mut ignore)
            .unwrap();
        p.c.send(0, 16, &[7; 1000]).unwrap();
        let mut now = t(20);
        let probe = tsns[0].wrapping_add(1);
        assert!(
            carries(&drain(&mut p.c, now), probe),
            "{steps:?}: sent as a probe"
        );
        while p.c.stats().t3_expiries < 3 {
            now = p.c.poll_timeout().unwrap();
            p.c.handle_timeout(now);
            drain(&mut p.c, now);
            p.c.handle(now, &sack(tsns[0], steps[0]), &mut ignore)
                .unwrap();
        }
        for &a_rwnd in &steps[1..] {
            p.c.handle(now, &sack(tsns[0], a_rwnd), &mut ignore)
                .unwrap();
            assert!(
                !carries(&drain(&mut p.c, now), probe),
                "{steps:?}: sent again into {a_rwnd} bytes"
            );
        }
        let next_t3 = p.c.poll_timeout().unwrap();
        let opened = now + Duration::from_millis(10);
        assert!(next_t3 > opened + Duration::from_millis(100));
        p.c.handle(opened, &sack(tsns[0], 1 << 20), &mut ignore)
            .unwrap();
        assert!(
            carries(&drain(&mut p.c, opened), probe),
            "{steps:?}: the probe waited for T3 at {next_t3:?}"
        );
        assert_eq!(p.c.stats().window_probe_recoveries, 1, "{steps:?}");
    }
}

/// §6.1 A: a probe marked for retransmission by T3 when a window update too small for it
/// comes is still a probe: it is sent again into the small window (T3 sends regardless),
/// dropped, and recovered when the window holds it. The update in between used to stop the
/// tracking of probes, and the probe waited for its next T3 (an independent review).
#[test]
fn a_probe_retransmitted_by_t3_is_still_recovered_when_the_window_opens_6_1_a() {
    let (mut p, tag, tsns) = outstanding(1);
    let sack = |cum: u32, a_rwnd: u32| window_to_client(tag, cum, a_rwnd);
    p.c.handle(t(20), &sack(tsns[0], 0), &mut ignore).unwrap();
    p.c.send(0, 16, &[7; 1000]).unwrap();
    let probe = tsns[0].wrapping_add(1);
    assert!(carries(&drain(&mut p.c, t(20)), probe));
    let at = p.c.poll_timeout().unwrap();
    p.c.handle_timeout(at);
    // Before the retransmission leaves, the window grows, not enough for it.
    p.c.handle(at, &sack(tsns[0], 200), &mut ignore).unwrap();
    assert!(carries(&drain(&mut p.c, at), probe), "T3 sends it again");
    let next_t3 = p.c.poll_timeout().unwrap();
    let opened = at + Duration::from_millis(10);
    assert!(next_t3 > opened + Duration::from_millis(100));
    p.c.handle(opened, &sack(tsns[0], 1 << 20), &mut ignore)
        .unwrap();
    assert!(
        carries(&drain(&mut p.c, opened), probe),
        "the probe waited for T3 at {next_t3:?}"
    );
}

/// §6.1 A: a chunk sent into an open window and dropped by the peer as its window closed is
/// sent again by T3 whatever the window: into a window that cannot hold it, that
/// retransmission is a probe, and the window update that holds it sends it again at once.
/// Only chunks first sent as probes were recovered: this one waited for its T3, backed off by
/// the closed window's expiries towards RTO.Max (session 72's list).
#[test]
fn a_chunk_t3_sent_into_a_closed_window_is_recovered_when_it_opens_6_1_a() {
    let (mut p, tag, tsns) = outstanding(1);
    let sack = |cum: u32, a_rwnd: u32| window_to_client(tag, cum, a_rwnd);
    let before = tsns[0].wrapping_sub(1);
    // The peer dropped the chunk: its window closed first.
    p.c.handle(t(20), &sack(before, 0), &mut ignore).unwrap();
    let mut now = t(20);
    while p.c.stats().t3_expiries < 3 {
        now = p.c.poll_timeout().unwrap();
        p.c.handle_timeout(now);
        assert!(carries(&drain(&mut p.c, now), tsns[0]), "T3 sends it");
        p.c.handle(now, &sack(before, 0), &mut ignore).unwrap();
    }
    let next_t3 = p.c.poll_timeout().unwrap();
    let opened = now + Duration::from_millis(10);
    assert!(next_t3 > opened + Duration::from_millis(100));
    p.c.handle(opened, &sack(before, 1 << 20), &mut ignore)
        .unwrap();
    assert!(
        carries(&drain(&mut p.c, opened), tsns[0]),
        "the chunk waited for T3 at {next_t3:?}"
    );
    assert_eq!(p.c.stats().window_probe_recoveries, 1);
    // T3 into an open window is no probe: a later update finds nothing to recover.
    let (mut p, tag, tsns) = outstanding(1);
    let sack = |cum: u32, a_rwnd: u32| window_to_client(tag, cum, a_rwnd);
    let before = tsns[0].wrapping_sub(1);
    let at = p.c.poll_timeout().unwrap();
    p.c.handle_timeout(at);
    assert!(carries(&drain(&mut p.c, at), tsns[0]));
    p.c.handle(at, &sack(before, 0), &mut ignore).unwrap();
    p.c.handle(at, &sack(before, 1 << 20), &mut ignore).unwrap();
    assert!(
        !carries(&drain(&mut p.c, at), tsns[0]),
        "in flight, not a probe"
    );
    assert_eq!(p.c.stats().window_probe_recoveries, 0);
}

/// §6.1 A: a probe is marked by how it was last sent. T3 sends a probe again into a window
/// that has opened meanwhile (the update came while it was marked for retransmission): no
/// longer a probe, and a later window that closes and opens again does not resend it while
/// it is in flight (with the mark kept, it would be).
#[test]
fn a_probe_t3_sends_into_an_open_window_is_no_longer_one_6_1_a() {
    let (mut p, tag, tsns) = outstanding(1);
    let sack = |cum: u32, a_rwnd: u32| window_to_client(tag, cum, a_rwnd);
    p.c.handle(t(20), &sack(tsns[0], 0), &mut ignore).unwrap();
    p.c.send(0, 16, &[7; 1000]).unwrap();
    let probe = tsns[0].wrapping_add(1);
    assert!(carries(&drain(&mut p.c, t(20)), probe), "sent as a probe");
    let at = p.c.poll_timeout().unwrap();
    p.c.handle_timeout(at);
    p.c.handle(at, &sack(tsns[0], 1 << 20), &mut ignore)
        .unwrap();
    assert!(
        carries(&drain(&mut p.c, at), probe),
        "T3 sends it into the open window"
    );
    for a_rwnd in [0, 1 << 20] {
        p.c.handle(at, &sack(tsns[0], a_rwnd), &mut ignore).unwrap();
        assert!(
            !carries(&drain(&mut p.c, at), probe),
            "in flight, resent at {a_rwnd}"
        );
    }
    assert_eq!(p.c.stats().window_probe_recoveries, 0);
}

/// §6.1 A and §7.2.4: a fast retransmission goes whatever the window, and the peer takes it
/// below its highest TSN whatever its window: it is no probe, and a window update does not
/// send it again, though T3 had sent the same chunk into the closed window as a probe before
/// (the mark T3 made is cleared; session 72's reason to mark T3's retransmissions only).
#[test]
fn a_fast_retransmission_into_a_closed_window_is_no_probe_6_1_a_7_2_4() {
    let (mut p, tag, tsns) = outstanding(5);
    let before = tsns[0].wrapping_sub(1);
    let sack = |end: u16, a_rwnd: u32| {
        let blocks: &[(u16, u16)] = if end > 1 { &[(2, end)] } else { &[] };
        sack_window_to_client(tag, before, blocks, a_rwnd)
    };
    // The window closed; T3 sends the first chunk into it, a probe.
    p.c.handle(t(11), &sack(0, 0), &mut ignore).unwrap();
    let at = p.c.poll_timeout().unwrap();
    p.c.handle_timeout(at);
    assert!(carries(&drain(&mut p.c, at), tsns[0]));
    // The peer had the three after it: three miss indications, the window still 0.
    let fast = p.c.stats().fast_retransmits;
    let mut out = Vec::new();
    for end in 2..5u16 {
        p.c.handle(at, &sack(end, 0), &mut ignore).unwrap();
        out.extend(drain(&mut p.c, at));
    }
    assert!(
        carries(&out, tsns[0]),
        "fast-retransmitted into a window of 0"
    );
    assert_eq!(p.c.stats().fast_retransmits, fast + 1);
    assert!(
        carries(&out, tsns[4]),
        "T3's mark on the last, sent once a SACK came"
    );
    p.c.handle(at, &sack(4, 1 << 20), &mut ignore).unwrap();
    let out = drain(&mut p.c, at);
    assert!(!carries(&out, tsns[0]), "in flight, resent at the update");
    // The last went by T3's rules into the closed window, above the peer's highest TSN: a
    // probe, recovered.
    assert!(carries(&out, tsns[4]));
    assert_eq!(p.c.stats().window_probe_recoveries, 1);
}

/// §9.2 with §6.1 A: SHUTDOWN carries no a_rwnd, and the window made up to handle its
/// Cumulative TSN Ack is no window update: a probe T3 sent into a closed window is not sent
/// again at a SHUTDOWN, and is at the SACK that opens the window.
#[test]
fn a_shutdown_is_no_window_update_for_a_probe_9_2_6_1_a() {
    let (mut p, tag, tsns) = outstanding(1);
    let before = tsns[0].wrapping_sub(1);
    p.c.handle(t(20), &window_to_client(tag, before, 0), &mut ignore)
        .unwrap();
    let at = p.c.poll_timeout().unwrap();
    p.c.handle_timeout(at);
    assert!(
        carries(&drain(&mut p.c, at), tsns[0]),
        "T3 into the closed window"
    );
    let shutdown = packet(
        S_PORT,
        C_PORT,
        tag,
        &[ChunkRepr::Shutdown(ShutdownRepr {
            cum_tsn_ack: before,
        })],
    );
    p.c.handle(at, &shutdown, &mut ignore).unwrap();
    assert!(
        !carries(&drain(&mut p.c, at), tsns[0]),
        "resent at the SHUTDOWN"
    );
    p.c.handle(at, &window_to_client(tag, before, 1 << 20), &mut ignore)
        .unwrap();
    assert!(
        carries(&drain(&mut p.c, at), tsns[0]),
        "resent at the update"
    );
}

/// The window probe recovery above is for probes only: chunks sent into an open window, still
/// in flight when the peer's window closes and opens again (its SACKs overtaking them, or a
/// peer alternating windows), are not sent again (review of this session's change: the whole
/// flight was resent). A SHUTDOWN's case: `a_shutdown_is_no_window_update_for_a_probe_9_2_6_1_a`.
#[test]
fn only_zero_window_probes_are_recovered_6_1_a() {
    let (mut p, tag, tsns) = outstanding(3);
    let sack = |cum: u32, a_rwnd: u32| window_to_client(tag, cum, a_rwnd);
    let before = tsns[0].wrapping_sub(1);
    for a_rwnd in [0, 1 << 20, 0, 1 << 20] {
        p.c.handle(t(20), &sack(before, a_rwnd), &mut ignore)
            .unwrap();
        let out = drain(&mut p.c, t(20));
        assert!(
            tsns.iter().all(|&tsn| !carries(&out, tsn)),
            "a chunk sent into an open window was sent again at a_rwnd {a_rwnd}"
        );
    }
    assert_eq!(p.c.stats().window_probe_recoveries, 0);
}

/// §7.2.4 after §6.3.3 E3: a chunk T3 retransmitted counts its miss indications afresh. Two
/// misses of its first transmission, then T3, then one miss of the retransmission: no Fast
/// Retransmit (it took three new ones). The old count carried over, and the retransmission,
/// barely sent, was fast-retransmitted again at once (usrsctp resets; RFC 9260 leaves it
/// open).
#[test]
fn t3_starts_a_retransmitted_chunks_miss_count_afresh_7_2_4() {
    let (mut p, tag, tsns) = outstanding(5);
    let cum = tsns[0].wrapping_sub(1);
    for blocks in [&[(2u16, 2u16)][..], &[(2, 3)]] {
        p.c.handle(t(11), &sack_to_client(tag, cum, blocks), &mut ignore)
            .unwrap();
    }
    let at = p.c.poll_timeout().unwrap();
    p.c.handle_timeout(at);
    assert_eq!(p.c.stats().t3_expiries, 1);
    assert!(carries(&drain(&mut p.c, at), tsns[0]));
    let fast = p.c.stats().fast_retransmits;
    p.c.handle(at, &sack_to_client(tag, cum, &[(2, 4)]), &mut ignore)
        .unwrap();
    let _ = drain(&mut p.c, at);
    assert_eq!(p.c.stats().fast_retransmits, fast, "one miss of three");
}

/// §7.2.4: "Mark the DATA chunk(s) with three miss indications for retransmission" and "only
/// once": the marks belong to a TSN, not to the send slot that held it. A ring of four slots
/// holds four TSNs that are fast-retransmitted and acknowledged; the next four TSNs reuse the
/// same slots, and the one in the slot of the first is fast-retransmitted again on its own
/// third miss, not sooner (a left-over miss count) nor never (a left-over "done").
#[test]
fn a_reused_send_slot_starts_with_no_fast_retransmission_7_2_4() {
    let (mut c, _s) = established_with(Config {
        send_slots: 4,
        ..cfg(C_PORT)
    });
    let tag = c.local_tag();
    let mut cum = None;
    for round in 0..2u64 {
        let tsns = send_and_drain(&mut c, 4, t(10 + 10 * round));
        assert_eq!(tsns.len(), 4, "round {round}");
        let before = *cum.get_or_insert(tsns[0].wrapping_sub(1));
        for (blocks, due) in [
            (&[(2u16, 2u16)][..], false),
            (&[(2, 3)], false),
            (&[(2, 4)], true),
        ] {
            let at = t(11 + 10 * round);
            c.handle(at, &sack_to_client(tag, before, blocks), &mut ignore)
                .unwrap();
            assert_eq!(
                carries(&drain(&mut c, at), tsns[0]),
                due,
                "round {round}, blocks {blocks:?}"
            );
        }
        assert_eq!(c.stats().fast_retransmits, round + 1);
        let at = t(12 + 10 * round);
        c.handle(at, &sack_to_client(tag, tsns[3], &[]), &mut ignore)
            .unwrap();
        cum = Some(tsns[3]);
    }
}

/// RFC 9260 §6.1 D: Max.Burst limits how many packets of new DATA one transmit opportunity
/// (one `poll_transmit` loop, until it returns nothing) sends; the next opportunity sends more
/// while cwnd allows, without waiting for a SACK. A budget that only SACKs refill keeps a
/// sender from ever filling its cwnd (§7.2.1 grows it only when it is fully used), so it
/// stays at the initial window forever.
#[test]
fn max_burst_limits_one_transmit_opportunity_6_1() {
    let mut p = Pair::new();
    for i in 0..16u8 {
        p.c.send(0, 16, &[i; 1000]).unwrap();
    }
    let first = drain(&mut p.c, t(10));
    let burst = Config::default().max_burst as usize;
    assert_eq!(first.len(), burst, "one opportunity: Max.Burst packets");
    let second = drain(&mut p.c, t(10));
    assert!(
        !second.is_empty(),
        "the next opportunity sends more without a SACK"
    );
    // Both within the congestion window: §6.1 B lets the last packet exceed it by < 1 MTU.
    let sent: usize = first.iter().chain(&second).map(Vec::len).sum();
    assert!(
        sent < p.c.cwnd() + 1500,
        "{sent} bytes in flight, cwnd {}",
        p.c.cwnd()
    );
    let cwnd = p.c.cwnd();
    // With its window used, acknowledgements grow it (slow start, §7.2.1).
    for pk in first.iter().chain(&second) {
        let _ = p.s.handle(t(11), pk, &mut ignore);
    }
    p.exchange(t(11), |_, _| true);
    assert!(
        p.c.cwnd() > cwnd,
        "cwnd {} did not grow from {cwnd}",
        p.c.cwnd()
    );
}

/// Messages are numbered in the order queued, and a message is settled (the Data Source's
/// completion, RFC 5041 §5.4) only once the Cumulative TSN Ack covers it: a gap ack may be
/// reneged (RFC 9260 §6.2.1), so a gap-acked message is not settled.
#[test]
fn only_the_cumulative_ack_settles_a_message_6_2_1() {
    let mut p = Pair::new();
    // Each a full packet, so one can be lost alone.
    let full = vec![1u8; p.c.max_message()];
    assert_eq!(p.c.send(0, 16, &full).unwrap(), 0);
    assert_eq!(p.c.send(0, 16, &full).unwrap(), 1);
    let room = p.c.send_room();
    let mut first = true;
    p.exchange(t(10), |to_server, pk| {
        let drop = to_server && first && matches!(chunks(pk).first(), Some(ChunkRepr::Data(_)));
        first &= !drop;
        !drop
    });
    assert_eq!(p.got_s.len(), 1, "the second arrived and was gap-acked");
    assert_eq!(p.c.settled_before(), 0, "a gap ack settles nothing");
    assert_eq!(p.c.send_room(), room, "both still held");
    // T3-rtx brings the first one; the cumulative ack then covers both.
    let at = p.c.poll_timeout().unwrap();
    p.c.handle_timeout(at);
    p.exchange(at, |_, _| true);
    assert_eq!(p.got_s.len(), 2);
    // The packet filled the gap, so the server's SACK came at once (§6.2, RFC 5681 §4.2).
    assert_eq!(p.c.settled_before(), 2);
    assert_eq!(p.c.send_room(), room + 2);
    assert_eq!(
        p.c.send(0, 16, &[3; 10]).unwrap(),
        2,
        "numbers keep counting"
    );
}

/// §6.3.3 and §8.2: with the path cut, T3-rtx retransmits with a doubling RTO, and after
/// Association.Max.Retrans consecutive expiries the association is reported unreachable.
#[test]
fn cut_path_fails_the_association_6_3_3_8_2() {
    let mut p = Pair::new();
    p.c.send(0, 16, b"into the void").unwrap();
    drain(&mut p.c, t(10));
    let mut expiries = Vec::new();
    while let Some(at) = p.c.poll_timeout() {
        p.c.handle_timeout(at);
        if !drain(&mut p.c, at).is_empty() {
            expiries.push(at);
        }
        if p.c.state() == State::Closed {
            break;
        }
    }
    assert_eq!(
        p.c.stats().t3_expiries,
        u64::from(cfg(C_PORT).assoc_max_retrans) + 1
    );
    let gaps: Vec<u64> = expiries
        .windows(2)
        .map(|w| (w[1].as_nanos() - w[0].as_nanos()) / 1_000_000)
        .collect();
    assert_eq!(
        &gaps[..3],
        &[200, 400, 800],
        "E2: RTO doubles, capped at RTO.Max"
    );
    assert_eq!(
        events(&mut p.c).last(),
        Some(&Event::Closed(CloseReason::Unreachable))
    );
}

/// §8.2: after more than Path.Max.Retrans consecutive failures the path is reported inactive
/// (the upper layer is told) while the association goes on, on its one path; the next
/// acknowledgement makes it active again and says so. (Association.Max.Retrans ends it:
/// `cut_path_fails_the_association_6_3_3_8_2`.)
#[test]
fn path_max_retrans_reports_the_path_inactive_then_active_8_2() {
    let mut p = Pair::new();
    let path_max = cfg(C_PORT).path_max_retrans;
    assert!(path_max < cfg(C_PORT).assoc_max_retrans);
    let _ = events(&mut p.c);
    p.c.send(0, 16, b"into the void, for a while").unwrap();
    drain(&mut p.c, t(10));
    let mut last = t(10);
    for _ in 0..=path_max {
        let at = p.c.poll_timeout().unwrap();
        p.c.handle_timeout(at);
        drain(&mut p.c, at);
        last = at;
    }
    assert_eq!(p.c.stats().t3_expiries, u64::from(path_max) + 1);
    assert_eq!(events(&mut p.c), vec![Event::PathChange { active: false }]);
    assert_eq!(p.c.stats().path_inactive, 1);
    assert_eq!(
        p.c.state(),
        State::Established,
        "one path: the association goes on"
    );
    // The path comes back: the next retransmission gets through and is acknowledged.
    let at = p.c.poll_timeout().unwrap();
    p.c.handle_timeout(at);
    p.exchange(at, |_, _| true);
    p.tick(at + Duration::from_millis(300));
    p.exchange(at + Duration::from_millis(300), |_, _| true);
    assert!(at > last);
    assert_eq!(events(&mut p.c), vec![Event::PathChange { active: true }]);
    assert_eq!(
        p.got_s.last().map(|m| &m.2[..]),
        Some(&b"into the void, for a while"[..])
    );
}

/// §8.3: an idle path gets a HEARTBEAT after HB.interval + RTO; the peer echoes the info and
/// the ACK clears it. (Jitter off: the exact schedule.)
#[test]
fn heartbeat_on_an_idle_path_8_3() {
    let (mut c, mut s) = established_with(Config {
        hb_interval: Some(Duration::from_millis(1000)),
        hb_jitter: false,
        ..cfg(C_PORT)
    });
    assert_eq!(c.poll_timeout(), Some(t(1100)), "HB.interval + RTO");
    c.handle_timeout(t(1100));
    let hb = drain(&mut c, t(1100));
    let ChunkRepr::Heartbeat(h) = chunks(&hb[0])[0] else {
        panic!()
    };
    let _ = s.handle(t(1130), &hb[0], &mut ignore);
    let hb_ack = drain(&mut s, t(1130));
    let ChunkRepr::HeartbeatAck(a) = chunks(&hb_ack[0])[0] else {
        panic!()
    };
    assert_eq!(a.info, h.info);
    c.handle(t(1130), &hb_ack[0], &mut ignore).unwrap();
    assert_eq!(c.stats().heartbeat_acks_in, 1);
    assert_eq!(
        c.srtt(),
        Some(Duration::from_millis(30)),
        "RTT measured from the HEARTBEAT"
    );
}

/// §8.3: the RTT is measured from when the HEARTBEAT left, which the sender keeps, not from
/// the time its information carries: the peer echoes that and may change it. An echo of 0
/// made SRTT the clock's whole age and pinned RTO at RTO.Max; one in the future gave an RTT
/// of 0 (an independent review). Both measure the 30 ms the path takes.
#[test]
fn a_heartbeat_acks_echoed_time_is_not_trusted_8_3() {
    for forged in [0u64, u64::MAX / 2] {
        let (mut c, _s) = established_with(Config {
            hb_interval: Some(Duration::from_millis(1000)),
            hb_jitter: false,
            rto_max: Duration::from_secs(60),
            ..cfg(C_PORT)
        });
        c.handle_timeout(t(1100));
        let hb = drain(&mut c, t(1100));
        let ChunkRepr::Heartbeat(h) = chunks(&hb[0])[0] else {
            panic!()
        };
        let mut info = h.info.to_vec();
        info[8..].copy_from_slice(&forged.to_be_bytes());
        let ack = packet(
            S_PORT,
            C_PORT,
            c.local_tag(),
            &[ChunkRepr::HeartbeatAck(HeartbeatAckRepr {
                info: &info,
                extra: &[],
            })],
        );
        c.handle(t(1130), &ack, &mut ignore).unwrap();
        assert_eq!(c.stats().heartbeat_acks_in, 1, "{forged}");
        assert_eq!(c.srtt(), Some(Duration::from_millis(30)), "{forged}");
        // One ACK measures once: the same again is not taken.
        c.handle(t(1200), &ack, &mut ignore).unwrap();
        assert_eq!(c.stats().heartbeat_acks_in, 1, "{forged}");
    }
}

/// §8.3: HEARTBEATs that go unanswered are paced "once per RTO ... plus ... HB.interval",
/// the RTO backed off each time; each counts one error after an RTO (§8.3, §8.1), and
/// Association.Max.Retrans + 1 of them end the association (§8.1). The soak found the second
/// HEARTBEAT following the first at once, an RTO later, without HB.interval between.
#[test]
fn unanswered_heartbeats_are_paced_by_hb_interval_and_rto_8_3() {
    let (mut c, _s) = heartbeating_pair();
    // The peer is gone: run the timers and note when each HEARTBEAT leaves.
    let sent = heartbeats_sent(&mut c);
    // RTO.Initial is 100 ms here. The first goes at HB.interval + RTO; each unanswered one
    // counts its error an RTO after it left (RTO then doubles) and the next leaves HB.interval
    // after that: sends 1 100 ms + RTO apart (100, then 200 ms), errors at 1 200, 2 400 and
    // 3 800 ms, the last one over Association.Max.Retrans.
    assert_eq!(sent, vec![1100, 2200, 3400], "HEARTBEATs sent at (ms)");
    assert!(c.is_closed(), "the third unanswered one ends it");
    assert_eq!(c.poll_timeout(), None);
}

/// Runs `c`'s timers with the peer gone, until it closes (or a minute passes): when each
/// HEARTBEAT left, in ms from t(0).
fn heartbeats_sent(c: &mut Association) -> Vec<u128> {
    let mut sent = Vec::new();
    while let Some(at) = c.poll_timeout() {
        if c.is_closed() || at > t(60_000) {
            break;
        }
        c.handle_timeout(at);
        for p in drain(c, at) {
            if matches!(chunks(&p)[0], ChunkRepr::Heartbeat(_)) {
                sent.push(at.saturating_since(t(0)).as_millis());
            }
        }
    }
    sent
}

/// A client association with HB.interval 1 s and Association.Max.Retrans 2, established
/// with a server association, both at t(0); no jitter (the exact schedule).
fn heartbeating_pair() -> (Association, Association) {
    established_with(Config {
        hb_interval: Some(Duration::from_millis(1000)),
        hb_jitter: false,
        assoc_max_retrans: 2,
        path_max_retrans: 2,
        ..cfg(C_PORT)
    })
}

/// §8.3: "with jitter of +/- 50% of the RTO value" (RECOMMENDED). Associations of different
/// endpoints, idle from t(0), send their first HEARTBEAT within HB.interval + RTO ± RTO/2, not
/// all at once; and unanswered ones keep that pacing (each HB.interval + RTO ± RTO/2 after the
/// last, the RTO backed off), ending the association as without jitter.
#[test]
fn heartbeats_are_jittered_by_half_an_rto_8_3() {
    let config = Config {
        hb_interval: Some(Duration::from_millis(1000)),
        assoc_max_retrans: 2,
        path_max_retrans: 2,
        ..cfg(C_PORT)
    };
    assert!(config.hb_jitter, "on by default");
    // RTO.Initial is 100 ms here.
    let mut first = Vec::new();
    for secret in 1..=40u8 {
        let (c, _s) = established_with_secret(config, [secret; 32]);
        let at = c.poll_timeout().unwrap().saturating_since(t(0));
        assert!(
            at >= Duration::from_millis(1050) && at < Duration::from_millis(1150),
            "first HEARTBEAT at {at:?}, outside 1 000 + 100 ± 50 ms"
        );
        first.push(at);
    }
    let early = first
        .iter()
        .filter(|a| **a < Duration::from_millis(1100))
        .count();
    assert!(
        (8..=32).contains(&early),
        "{early} of 40 before the unjittered 1 100 ms: not spread around it"
    );
    first.sort();
    first.dedup();
    assert!(
        first.len() >= 30,
        "only {} distinct times of 40",
        first.len()
    );

    // Unanswered: each leaves HB.interval + RTO ± RTO/2 after the one before, whose RTO
    // (100, then 200 ms) passed first; the third ends the association.
    let (mut c, _s) = established_with_secret(config, [7; 32]);
    let sent = heartbeats_sent(&mut c);
    assert_eq!(sent.len(), 3, "HEARTBEATs sent at {sent:?} (ms)");
    assert!((1050..1150).contains(&sent[0]), "{sent:?}");
    for (gap, rto) in [(sent[1] - sent[0], 100), (sent[2] - sent[1], 200)] {
        assert!(
            (1000 + rto / 2..1000 + rto * 3 / 2).contains(&gap),
            "{gap} ms between HEARTBEATs with an RTO of {rto} ms: {sent:?}"
        );
    }
    assert!(c.is_closed(), "the third unanswered one ends it");
}

/// A client association with `client` config, established with a server association, both
/// at t(0).
fn established_with(client: Config) -> (Association, Association) {
    established_with_secret(client, [1; 32])
}

/// [`established_with`], the client's endpoint keyed with `secret` (its tags, TSNs and
/// jitter follow from it).
fn established_with_secret(client: Config, secret: [u8; 32]) -> (Association, Association) {
    let mut cep = Endpoint::new(client, secret).unwrap();
    let mut sep = endpoint(S_PORT, 2);
    let mut c = cep.connect(t(0), S_ADDR, S_PORT);
    let mut out = vec![0u8; 4096];
    let init = drain(&mut c, t(0));
    let Outcome::Reply(n) = sep.handle(t(0), C_ADDR, &init[0], &mut out, &mut ignore) else {
        panic!()
    };
    c.handle(t(0), &out[..n], &mut ignore).unwrap();
    let echo = drain(&mut c, t(0));
    let Outcome::Accepted(mut s) = sep.handle(t(0), C_ADDR, &echo[0], &mut out, &mut ignore) else {
        panic!()
    };
    let ack = drain(&mut s, t(0));
    c.handle(t(0), &ack[0], &mut ignore).unwrap();
    (c, *s)
}

/// §8.3: the ACK of a HEARTBEAT that already counted its error (unanswered for an RTO) is
/// still taken while the next one waits HB.interval: it clears the error counter.
#[test]
fn a_late_heartbeat_ack_is_still_taken_8_3() {
    let (mut c, mut s) = heartbeating_pair();
    c.handle_timeout(t(1100));
    let hb = drain(&mut c, t(1100));
    assert!(matches!(chunks(&hb[0])[0], ChunkRepr::Heartbeat(_)));
    let _ = s.handle(t(1100), &hb[0], &mut ignore);
    let late = drain(&mut s, t(1100));
    c.handle_timeout(t(1200));
    assert!(
        drain(&mut c, t(1200)).is_empty(),
        "the next waits HB.interval"
    );
    c.handle(t(1500), &late[0], &mut ignore).unwrap();
    assert_eq!(c.stats().heartbeat_acks_in, 1, "the late ACK is taken");
    // The counter is clear again: three more unanswered ones are needed to end it.
    let mut sent = 0;
    while let Some(at) = c.poll_timeout() {
        if c.is_closed() || at > t(60_000) {
            break;
        }
        c.handle_timeout(at);
        sent += drain(&mut c, at)
            .iter()
            .filter(|p| matches!(chunks(p)[0], ChunkRepr::Heartbeat(_)))
            .count();
    }
    assert_eq!(sent, 3);
    assert!(c.is_closed());
}

/// §3.2: unknown chunk types follow their upper bits: 01 stops the packet and reports, 11
/// skips and reports, 10 skips silently, 00 stops silently.
#[test]
fn unknown_chunks_follow_3_2() {
    let mut p = Pair::new();
    let tag = p.s.local_tag();
    let unk = |t| {
        ChunkRepr::Unknown(UnknownChunkRepr {
            chunk_type: t,
            flags: 0,
            value: b"abcd",
        })
    };
    let hb = ChunkRepr::Heartbeat(ddpdk_dataplane::wire::sctp::HeartbeatRepr {
        info: b"hb",
        extra: &[],
    });
    let cases = [
        (0xC1, true, true),
        (0x81, true, false),
        (0x41, false, true),
        (0x3f, false, false),
    ];
    for (ty, continues, reports) in cases {
        let pkt = packet(C_PORT, S_PORT, tag, &[unk(ty), hb]);
        p.s.handle(t(5), &pkt, &mut ignore).unwrap();
        let out: Vec<_> = drain(&mut p.s, t(5));
        let all: Vec<_> = out.iter().flat_map(|o| chunks(o)).collect();
        assert_eq!(
            has(&all, |c| matches!(c, ChunkRepr::HeartbeatAck(_))),
            continues,
            "type {ty:#x}: processing after it"
        );
        assert_eq!(
            has(&all, |c| matches!(c, ChunkRepr::Error(e)
                if matches!(e.causes.iter().next(), Some(CauseRepr::UnrecognizedChunkType { chunk }) if chunk[0] == ty))),
            reports,
            "type {ty:#x}: reported"
        );
    }
}

/// §8.3: "The receiver of the HEARTBEAT ... SHOULD immediately respond with a HEARTBEAT ACK
/// that contains the Heartbeat Information TLV ... copied from the received HEARTBEAT chunk."
/// An RFC 8899 probe (12 bytes of information here) and the peer's ordinary HEARTBEAT can come
/// in one burst, when both timers fall due together; each is answered. One pending ACK kept
/// only the later: the probe's answer was lost, and the peer's search counted it as lost.
#[test]
fn every_heartbeat_of_a_burst_is_answered_8_3() {
    let mut p = Pair::new();
    let tag = p.s.local_tag();
    let probe_info = [7u8; 12];
    let hb_info = [9u8; 16];
    let probe = packet(
        C_PORT,
        S_PORT,
        tag,
        &[ChunkRepr::Heartbeat(HeartbeatRepr {
            info: &probe_info,
            extra: &[],
        })],
    );
    let hb = packet(
        C_PORT,
        S_PORT,
        tag,
        &[ChunkRepr::Heartbeat(HeartbeatRepr {
            info: &hb_info,
            extra: &[],
        })],
    );
    p.s.handle(t(5), &probe, &mut ignore).unwrap();
    p.s.handle(t(5), &hb, &mut ignore).unwrap();
    let out = drain(&mut p.s, t(5));
    let acks: Vec<Vec<u8>> = out
        .iter()
        .flat_map(|o| chunks(o))
        .filter_map(|c| match c {
            ChunkRepr::HeartbeatAck(a) => Some(a.info.to_vec()),
            _ => None,
        })
        .collect();
    assert_eq!(
        acks,
        vec![probe_info.to_vec(), hb_info.to_vec()],
        "both, in order"
    );
}

// ---------------------------------------------------------------------------------------
// Collisions and restart (§5.2)
// ---------------------------------------------------------------------------------------

/// §5.2.1 and §5.2.4: both sides send INIT at once. Each answers the other's INIT from
/// COOKIE-WAIT with its own tag (no new association); the COOKIE ECHOs meet the existing
/// associations (cases B/D) and exactly one association per side ends up ESTABLISHED, with
/// matching tags, and carries data.
#[test]
fn simultaneous_open_5_2_1() {
    let mut cep = endpoint(C_PORT, 1);
    let mut sep = endpoint(S_PORT, 2);
    let mut c = cep.connect(t(0), S_ADDR, S_PORT);
    let mut s = sep.connect(t(0), C_ADDR, C_PORT);
    let mut got = Vec::new();
    for step in 0..10u64 {
        let now = t(step);
        let from_c = drain(&mut c, now);
        let from_s = drain(&mut s, now);
        for pk in &from_c {
            let _ = s.handle(now, pk, &mut |m: Message<'_>| got.push(m.data.to_vec()));
        }
        for pk in &from_s {
            let _ = c.handle(now, pk, &mut ignore);
        }
        if step == 5 {
            c.send(0, 16, b"after the collision").unwrap();
        }
    }
    assert_eq!(c.state(), State::Established);
    assert_eq!(s.state(), State::Established);
    assert_eq!(c.local_tag(), s.peer_tag());
    assert_eq!(s.local_tag(), c.peer_tag());
    assert!(events(&mut c).contains(&Event::Connected {
        streams: 8,
        peer_adaptation: 1
    }));
    assert_eq!(got, vec![b"after the collision".to_vec()]);
}

/// §5.2.4 case D with §6.2.1 D ii: a COOKIE ECHO retransmitted after its COOKIE ACK was lost
/// reaches an association that already sends: the peer's window stays the last one less
/// what is in flight, not the cookie's a_rwnd (its INIT's, from before any of it). Case D
/// never took the cookie's window once established; case B (a collision in which the peer
/// chose a new tag) did, and now keeps the last SACK's window too
/// (`a_collision_cookie_echo_keeps_the_last_sacks_window_5_2_4_b`).
#[test]
fn a_late_cookie_echo_keeps_the_flight_counted_against_the_window_5_2_4_d() {
    let (_c, mut s, echo) = handshake(cfg(C_PORT), cfg(S_PORT));
    let a_rwnd = s.peer_rwnd();
    // The server sends four messages; the COOKIE ACK and they are still on their way.
    for i in 0..4u8 {
        s.send(0, 16, &[i; 1000]).unwrap();
    }
    let sent = drain(&mut s, t(2));
    assert!(sent.len() >= 2, "data in flight");
    let in_flight = a_rwnd - s.peer_rwnd();
    assert!(in_flight >= 4 * 1000, "{in_flight} bytes booked");
    // The client, its COOKIE ACK lost, sends the COOKIE ECHO again.
    s.handle(t(3), &echo, &mut ignore).unwrap();
    assert_eq!(s.state(), State::Established);
    assert_eq!(
        s.peer_rwnd(),
        a_rwnd - in_flight,
        "the flight still counts against the peer's window"
    );
}

/// §5.2.4 case B with §6.2.1 D ii: a collision's COOKIE ECHO (our tag, a peer tag other than
/// the one we talk to) reaching an association that already sends takes the cookie's peer
/// tag, but the peer's window stays the last SACK's less what is in flight, not the a_rwnd
/// of the INIT the cookie was made from (session 72's review: the association took the
/// cookie's a_rwnd whole, the flight forgotten until the next SACK).
#[test]
fn a_collision_cookie_echo_keeps_the_last_sacks_window_5_2_4_b() {
    let mut cep = endpoint(C_PORT, 1);
    let mut sep = endpoint(S_PORT, 2);
    let mut s = sep.connect(t(0), C_ADDR, C_PORT);
    let s_init = drain(&mut s, t(0));
    // An INIT of the peer's crossing ours (another tag, a far larger window): answered from
    // COOKIE-WAIT with our own tag (§5.2.1), the cookie kept for later.
    let crossing = packet(
        C_PORT,
        S_PORT,
        0,
        &[ChunkRepr::Init(InitRepr {
            initiate_tag: 0x5eed_5eed,
            a_rwnd: 1 << 24,
            outbound_streams: 8,
            inbound_streams: 8,
            initial_tsn: 77,
            params: List::new(&[ParamRepr::AdaptationLayerIndication(1)]),
        })],
    );
    s.handle(t(1), &crossing, &mut ignore).unwrap();
    let init_ack = drain(&mut s, t(1));
    let cs = chunks(&init_ack[0]);
    let ChunkRepr::InitAck(ia) = cs[0] else {
        panic!("INIT ACK expected, got {cs:?}")
    };
    let cookie = ia.0.state_cookie().unwrap().to_vec();
    assert_eq!(ia.0.initiate_tag, s.local_tag(), "§5.2.1: our own tag");
    // Our handshake completes with the peer's endpoint.
    let mut out = vec![0u8; 65536];
    let Outcome::Reply(n) = cep.handle(t(1), S_ADDR, &s_init[0], &mut out, &mut ignore) else {
        panic!("INIT not answered")
    };
    s.handle(t(2), &out[..n], &mut ignore).unwrap();
    let echo = drain(&mut s, t(2));
    let Outcome::Accepted(c) = cep.handle(t(2), S_ADDR, &echo[0], &mut out, &mut ignore) else {
        panic!("COOKIE ECHO not accepted")
    };
    let mut c = *c;
    for pk in drain(&mut c, t(2)) {
        s.handle(t(3), &pk, &mut ignore).unwrap();
    }
    assert_eq!(s.state(), State::Established);
    assert_ne!(s.peer_tag(), 0x5eed_5eed);
    // Data acknowledged (the peer's window learnt from its SACK), then more in flight.
    for i in 0..4u8 {
        s.send(0, 16, &[i; 1000]).unwrap();
    }
    for pk in drain(&mut s, t(4)) {
        c.handle(t(4), &pk, &mut ignore).unwrap();
    }
    for pk in drain(&mut c, t(300)) {
        s.handle(t(300), &pk, &mut ignore).unwrap();
    }
    assert_eq!(s.queued(), 0, "the first four acknowledged");
    for i in 0..3u8 {
        s.send(0, 16, &[i; 1000]).unwrap();
    }
    assert!(!drain(&mut s, t(301)).is_empty(), "data in flight");
    let window = s.peer_rwnd();
    assert!(
        window < cfg(C_PORT).a_rwnd - 3 * 1000,
        "{window}: the flight booked"
    );
    // The crossing INIT's COOKIE ECHO arrives late: case B.
    let late = packet(
        C_PORT,
        S_PORT,
        s.local_tag(),
        &[ChunkRepr::CookieEcho(CookieEchoRepr { cookie: &cookie })],
    );
    s.handle(t(302), &late, &mut ignore).unwrap();
    assert_eq!(s.state(), State::Established);
    assert_eq!(s.peer_tag(), 0x5eed_5eed, "case B: the cookie's peer tag");
    assert_eq!(
        s.peer_rwnd(),
        window,
        "the last SACK's window less the flight, not the cookie's {}",
        1 << 24
    );
}

/// §5.2.2 and §5.2.4 case A: the client restarts (new incarnation, same address and port).
/// The server's association answers the INIT with tie-tags, recognises the restart in the
/// COOKIE ECHO, reports it, drops what it had queued for the old peer, and carries data with
/// the new one.
#[test]
fn peer_restart_5_2_4_a() {
    let mut p = Pair::new();
    p.s.send(0, 16, b"for the old incarnation").unwrap();
    let _ = drain(&mut p.s, t(10)); // lost with the old client
    let mut cep2 = endpoint(C_PORT, 9);
    let mut c2 = cep2.connect(t(20), S_ADDR, S_PORT);
    let old_tag = p.s.local_tag();
    let mut got = Vec::new();
    for step in 20..30u64 {
        let now = t(step);
        for pk in drain(&mut c2, now) {
            let _ =
                p.s.handle(now, &pk, &mut |m: Message<'_>| got.push(m.data.to_vec()));
        }
        for pk in drain(&mut p.s, now) {
            let _ = c2.handle(now, &pk, &mut ignore);
        }
        if step == 25 {
            c2.send(0, 16, b"new incarnation").unwrap();
        }
    }
    assert_eq!(c2.state(), State::Established);
    assert_ne!(p.s.local_tag(), old_tag, "new tags after the restart");
    assert_eq!(p.s.peer_tag(), c2.local_tag());
    assert!(events(&mut p.s).contains(&Event::Restarted { lost: 1 }));
    assert_eq!(got, vec![b"new incarnation".to_vec()]);
}

/// §5.2.4 case A in SHUTDOWN-PENDING or SHUTDOWN-SENT: the restart takes the association to
/// ESTABLISHED (the old incarnation's queue gone), and the shutdown our ULP asked for still
/// stands: SHUTDOWN goes to the new incarnation and the association closes gracefully. It was
/// forgotten, the association left ESTABLISHED with no shutdown under way, and a ULP waiting
/// for Closed waited for ever (an independent review).
#[test]
fn a_peer_restart_keeps_our_shutdown_going_5_2_4_a_9_2() {
    // (outstanding, the peer's SHUTDOWN too, ours asked only after the peer's)
    let cases = [
        (true, false, false),
        (false, false, false),
        (true, true, false),
        (true, true, true),
    ];
    for (outstanding, peer_shuts_down, ours_after) in cases {
        let mut p = Pair::new();
        if outstanding {
            // Lost with the old client: the server stays in SHUTDOWN-PENDING.
            p.s.send(0, 16, b"for the old incarnation").unwrap();
        }
        if !ours_after {
            p.s.shutdown(t(10));
            let _ = drain(&mut p.s, t(10));
        }
        if peer_shuts_down {
            // The old client's own SHUTDOWN moves the server on to SHUTDOWN-RECEIVED.
            p.c.shutdown(t(11));
            for pk in drain(&mut p.c, t(11)) {
                let _ = p.s.handle(t(11), &pk, &mut ignore);
            }
            let _ = drain(&mut p.s, t(11));
        }
        if ours_after {
            p.s.shutdown(t(12));
        }
        let want = match (outstanding, peer_shuts_down) {
            (_, true) => State::ShutdownReceived,
            (true, false) => State::ShutdownPending,
            (false, false) => State::ShutdownSent,
        };
        assert_eq!(p.s.state(), want);
        let mut cep2 = endpoint(C_PORT, 9);
        let mut c2 = cep2.connect(t(20), S_ADDR, S_PORT);
        for step in 20..60u64 {
            let now = t(step);
            for pk in drain(&mut c2, now) {
                let _ = p.s.handle(now, &pk, &mut ignore);
            }
            for pk in drain(&mut p.s, now) {
                let _ = c2.handle(now, &pk, &mut ignore);
            }
        }
        let s_events = events(&mut p.s);
        assert!(
            s_events
                .iter()
                .any(|e| matches!(e, Event::Restarted { .. })),
            "{want:?}: {s_events:?}"
        );
        assert!(
            s_events.contains(&Event::Closed(CloseReason::Shutdown)),
            "{want:?}: the shutdown went on after the restart, now {:?}: {s_events:?}",
            p.s.state()
        );
        assert!(events(&mut c2).contains(&Event::Closed(CloseReason::Shutdown)));
    }
}

/// RFC 8899 after a peer restart (§5.2.4 case A): a path MTU probe in flight when the peer
/// restarted was sent under the old tags and will never be answered; discovery must go on.
/// Before, the restart cleared the probe's timer with the others and kept the probe as
/// outstanding, so no probe was ever due again (an independent review, session 68).
#[test]
fn path_mtu_discovery_goes_on_after_a_peer_restart_rfc8899() {
    let mut p = Pair::new();
    let mut buf = vec![0u8; 65536];
    p.s.set_path_mtu(1200);
    p.s.plpmtud_search(t(10));
    assert!(
        p.s.poll_probe(t(10), &mut buf).is_some(),
        "a probe in flight"
    );
    let mut cep2 = endpoint(C_PORT, 9);
    let mut c2 = cep2.connect(t(20), S_ADDR, S_PORT);
    for step in 20..30u64 {
        let now = t(step);
        for pk in drain(&mut c2, now) {
            let _ = p.s.handle(now, &pk, &mut ignore);
        }
        for pk in drain(&mut p.s, now) {
            let _ = c2.handle(now, &pk, &mut ignore);
        }
    }
    assert!(events(&mut p.s)
        .iter()
        .any(|e| matches!(e, Event::Restarted { .. })));
    let mut now = t(30);
    let mut probed = false;
    for _ in 0..100 {
        if p.s.probe_due() && p.s.poll_probe(now, &mut buf).is_some() {
            probed = true;
            break;
        }
        let Some(at) = p.s.poll_timeout() else {
            break;
        };
        now = now.max(at);
        p.s.handle_timeout(now);
    }
    assert!(probed, "no probe after the restart");
}

/// §5.2.4 case A treats a restart as an ABORT followed by a new COOKIE ECHO: what the server
/// owed the old incarnation goes with it. A DATA packet of the old client, its SACK delayed
/// (§6.2) when the restart comes, is not acknowledged to the new one: the COOKIE ACK travels
/// alone, with no SACK bundled for a TSN space that is gone.
#[test]
fn a_restart_forgets_the_sack_owed_to_the_old_incarnation_5_2_4_a() {
    let mut p = Pair::new();
    p.c.send(0, 16, b"from the old incarnation").unwrap();
    let mut got = 0;
    for pk in drain(&mut p.c, t(10)) {
        let _ = p.s.handle(t(10), &pk, &mut |_: Message<'_>| got += 1);
    }
    assert_eq!(got, 1);
    assert!(
        drain(&mut p.s, t(10)).is_empty(),
        "one packet: its SACK is delayed (§6.2)"
    );
    let mut cep2 = endpoint(C_PORT, 9);
    let mut c2 = cep2.connect(t(20), S_ADDR, S_PORT);
    let mut answers = Vec::new();
    for step in 20..24u64 {
        let now = t(step);
        for pk in drain(&mut c2, now) {
            let _ = p.s.handle(now, &pk, &mut ignore);
        }
        for pk in drain(&mut p.s, now) {
            answers.push(pk.clone());
            let _ = c2.handle(now, &pk, &mut ignore);
        }
    }
    assert_eq!(c2.state(), State::Established);
    let cookie_ack = answers
        .iter()
        .find(|pk| has(&chunks(pk), |c| matches!(c, ChunkRepr::CookieAck)))
        .expect("a COOKIE ACK");
    assert!(
        !has(&chunks(cookie_ack), |c| matches!(c, ChunkRepr::Sack(_))),
        "a SACK for the old incarnation's TSNs: {:?}",
        chunks(cookie_ack)
    );
}

// ---------------------------------------------------------------------------------------
// Send side limits and shutdown
// ---------------------------------------------------------------------------------------

/// RFC 5043 §9: a message larger than one unfragmented DATA chunk is refused at the source;
/// so are empty messages, streams beyond the negotiated count, and sends after shutdown.
#[test]
fn send_refusals_5043_9() {
    let mut p = Pair::new();
    let max = p.c.max_message();
    assert_eq!(max, 1480 - 12 - 16);
    assert_eq!(
        p.c.send(0, 16, &vec![0; max + 1]),
        Err(SendError::TooBig { max })
    );
    assert!(p.c.send(0, 16, &vec![0; max]).is_ok());
    assert_eq!(p.c.send(0, 16, b""), Err(SendError::Empty));
    assert_eq!(
        p.c.send(p.c.streams(), 16, b"x"),
        Err(SendError::InvalidStream)
    );
    p.c.shutdown(t(3));
    assert_eq!(p.c.send(0, 16, b"x"), Err(SendError::NotOpen));
}

/// §9.2: SHUTDOWN waits until every outstanding message is acknowledged; then SHUTDOWN,
/// SHUTDOWN ACK and SHUTDOWN COMPLETE close both sides, each with Closed(Shutdown).
#[test]
fn shutdown_waits_for_outstanding_data_9_2() {
    let mut p = Pair::new();
    p.c.send(0, 16, b"last words").unwrap();
    let first = drain(&mut p.c, t(10));
    p.c.shutdown(t(10));
    assert_eq!(p.c.state(), State::ShutdownPending);
    assert!(
        drain(&mut p.c, t(10)).is_empty(),
        "no SHUTDOWN while data is outstanding"
    );
    let mut delivered = 0;
    let _ =
        p.s.handle(t(11), &first[0], &mut |_: Message<'_>| delivered += 1);
    assert_eq!(delivered, 1);
    p.tick(t(211)); // the server's delayed SACK
    let log = p.exchange(t(211), |_, _| true);
    let kinds: Vec<(bool, Vec<String>)> = log
        .iter()
        .map(|(d, pk)| {
            (
                *d,
                chunks(pk)
                    .iter()
                    .map(|c| format!("{:?}", c.chunk_type()))
                    .collect(),
            )
        })
        .collect();
    assert!(
        kinds
            .iter()
            .any(|(d, k)| *d && k.contains(&"Shutdown".to_string())),
        "{kinds:?}"
    );
    assert!(kinds
        .iter()
        .any(|(d, k)| !*d && k.contains(&"ShutdownAck".to_string())));
    assert!(kinds
        .iter()
        .any(|(d, k)| *d && k.contains(&"ShutdownComplete".to_string())));
    assert_eq!(
        events(&mut p.c).last(),
        Some(&Event::Closed(CloseReason::Shutdown))
    );
    let se = events(&mut p.s);
    assert!(se.contains(&Event::ShutdownReceived));
    assert_eq!(se.last(), Some(&Event::Closed(CloseReason::Shutdown)));
    assert!(p.c.is_closed() && p.s.is_closed());
}

/// §9.1: abort() sends ABORT with a User-Initiated Abort cause on the peer's tag; the peer
/// reports PeerAbort with that cause code (12).
#[test]
fn abort_both_ways_9_1() {
    let mut p = Pair::new();
    p.c.abort();
    assert_eq!(
        events(&mut p.c).last(),
        Some(&Event::Closed(CloseReason::LocalAbort))
    );
    let out = drain(&mut p.c, t(5));
    assert_eq!(out.len(), 1);
    assert_eq!(vtag(&out[0]), p.s.local_tag());
    let _ = p.s.handle(t(5), &out[0], &mut ignore);
    assert_eq!(
        events(&mut p.s).last(),
        Some(&Event::Closed(CloseReason::PeerAbort { cause: Some(12) }))
    );
    assert!(p.c.is_closed() && p.s.is_closed());
}

/// Issue 4 item 5: the association's memory is fixed when it is made and documented; moving
/// messages does not grow it.
#[test]
fn memory_is_bounded_and_fixed() {
    let mut p = Pair::new();
    let before = p.c.memory();
    // Default config: 256 slots of 1452 bytes, an 8192-TSN bitmap.
    assert!(before > 256 * 1452 && before < 512 * 1024, "{before}");
    for round in 0..20u64 {
        for i in 0..50u8 {
            p.c.send(0, 16, &[i; 1400]).unwrap();
        }
        let now = t(10 + round * 1000);
        p.exchange(now, |_, _| true);
        p.tick(now + Duration::from_millis(500));
        p.exchange(now + Duration::from_millis(500), |_, _| true);
    }
    assert_eq!(p.got_s.len(), 1000);
    assert_eq!(p.c.memory(), before);
}

/// Zero-copy transmit (RFC 5043 §9 still holds: one message, one whole DATA chunk): a message
/// whose tail lives outside the association goes out as a packet with a hole where the tail
/// belongs. The chunk length counts the tail (RFC 9260 §3.3.1), the padding after it is zero
/// (§3.2), nothing is written into the hole, and the CRC32c is left to whoever fills it. A
/// retransmission (§6.3.3) leaves the same hole again, and at most MAX_HOLES spans go in one
/// packet.
#[test]
fn external_tails_leave_holes_the_sender_fills_9260_3_3_1() {
    use ddpdk_dataplane::sctp::{ExtRef, MAX_HOLES};
    let mut p = Pair::new();
    // The "registered memory" the tails are read from.
    let memory: Vec<u8> = (0..64 * 1024u32).map(|i| (i * 7 + 3) as u8).collect();
    let n_msgs = MAX_HOLES + 2;
    let mut expect = Vec::new();
    for i in 0..n_msgs {
        let head = [i as u8; 6];
        // Odd lengths, so every chunk needs padding after its tail.
        let ext = ExtRef {
            key: 9,
            offset: (i * 1000) as u64,
            len: 101 + 2 * i as u32,
        };
        p.c.send_ext(0, 16, &head, Some(ext)).unwrap();
        let mut m = head.to_vec();
        m.extend_from_slice(&memory[ext.offset as usize..][..ext.len as usize]);
        expect.push(m);
    }
    let fill = |buf: &mut [u8], holes: &[ddpdk_dataplane::sctp::Hole]| {
        for h in holes {
            assert_eq!(h.ext.key, 9);
            let src = &memory[h.ext.offset as usize..][..h.ext.len as usize];
            buf[h.at..h.at + src.len()].copy_from_slice(src);
        }
        crc32c::fill(buf);
    };
    let mut sent = Vec::new();
    let mut buf = vec![0xEEu8; 65536];
    while let Some(n) = p.c.poll_transmit(t(10), &mut buf) {
        let holes = p.c.holes().to_vec();
        assert!(!holes.is_empty() && holes.len() <= MAX_HOLES, "{holes:?}");
        assert_eq!(&buf[8..12], &[0; 4], "CRC32c left for the filler");
        for h in &holes {
            assert!(
                buf[h.at..h.at + h.ext.len as usize]
                    .iter()
                    .all(|&b| b == 0xEE),
                "nothing written into the hole"
            );
            // Chunks start 4-aligned in the packet, so the padding runs to the next multiple.
            let end = h.at + h.ext.len as usize;
            let pad = &buf[end..end.next_multiple_of(4)];
            assert!(!pad.is_empty() || end.is_multiple_of(4));
            assert!(pad.iter().all(|&b| b == 0), "padding zeroed");
        }
        fill(&mut buf[..n], &holes);
        for c in chunks(&buf[..n]) {
            let ChunkRepr::Data(d) = c else { continue };
            assert!(
                d.beginning && d.ending && d.unordered,
                "one whole unordered chunk"
            );
        }
        sent.push((buf[..n].to_vec(), holes.len()));
        buf.fill(0xEE);
    }
    assert_eq!(
        sent.iter().map(|s| s.1).collect::<Vec<_>>(),
        vec![MAX_HOLES, n_msgs - MAX_HOLES],
        "at most MAX_HOLES tails per packet"
    );
    // The first packet is lost; the second arrives.
    let _ = p.s.handle(t(10), &sent[1].0, &mut |m: Message<'_>| {
        p.got_s.push((m.stream, m.ppid, m.data.to_vec()))
    });
    // T3-rtx: the lost messages go again, with their holes, and are filled the same way.
    let at = p.c.poll_timeout().unwrap();
    p.c.handle_timeout(at);
    let n = p.c.poll_transmit(at, &mut buf).unwrap();
    let holes = p.c.holes().to_vec();
    assert_eq!(
        holes.len(),
        MAX_HOLES,
        "the retransmission misses the same tails"
    );
    fill(&mut buf[..n], &holes);
    let _ = p.s.handle(at, &buf[..n], &mut |m: Message<'_>| {
        p.got_s.push((m.stream, m.ppid, m.data.to_vec()))
    });
    let mut got: Vec<Vec<u8>> = p.got_s.iter().map(|g| g.2.clone()).collect();
    got.sort();
    expect.sort();
    assert_eq!(got, expect, "every message arrived whole, tail included");
    assert_eq!(p.c.stats().t3_retransmits, MAX_HOLES as u64);
}

// ---------------------------------------------------------------------------------------
// Conformance findings (issue 16 item 1)
// ---------------------------------------------------------------------------------------

/// A Host Name Address parameter (type 11), whole as it travels: type, length, a name.
const HOST_NAME: ParamRepr<'static> = ParamRepr::Unknown {
    param_type: 11,
    value: b"peer.example\0\0\0\0",
};
const HOST_NAME_BYTES: &[u8] = b"\x00\x0b\x00\x14peer.example\0\0\0\0";

fn abort_of(p: &[u8]) -> AbortRepr<'_> {
    match chunks(p)[0] {
        ChunkRepr::Abort(a) => a,
        ref c => panic!("not an ABORT: {c:?}"),
    }
}

/// RFC 9260 §3.3.2.1: "The receiver of an INIT chunk or INIT ACK containing a Host Name
/// Address parameter MUST send an ABORT and MAY include an Unresolvable Address error cause."
/// The endpoint answers such an INIT with ABORT on its Initiate Tag (wherever the parameter
/// is), and so does an association the INIT reaches, which goes on.
#[test]
fn host_name_address_in_init_is_aborted_3_3_2_1() {
    let mut sep = endpoint(S_PORT, 2);
    let mut out = vec![0u8; 2048];
    let ali = ParamRepr::AdaptationLayerIndication(1);
    for (tag, params) in [(21u32, [HOST_NAME, ali]), (22, [ali, HOST_NAME])] {
        let init = init_chunk(tag, &params);
        let Outcome::Reply(n) = sep.handle(t(0), C_ADDR, &init, &mut out, &mut ignore) else {
            panic!("no answer")
        };
        assert_eq!(vtag(&out[..n]), tag);
        let a = abort_of(&out[..n]);
        assert!(!a.t_bit);
        assert_eq!(
            a.causes.iter().next(),
            Some(CauseRepr::UnresolvableAddress {
                address: HOST_NAME_BYTES
            })
        );
    }
    assert_eq!(sep.stats().host_name_refused, 2);
    assert_eq!(sep.stats().init_acks_out, 0);

    let mut p = Pair::new();
    let init = packet(
        C_PORT,
        S_PORT,
        0,
        &[ChunkRepr::Init(InitRepr {
            initiate_tag: 0x5151,
            a_rwnd: 65536,
            outbound_streams: 4,
            inbound_streams: 4,
            initial_tsn: 77,
            params: List::new(&[ali, HOST_NAME]),
        })],
    );
    let mem = p.s.memory();
    let _ = p.s.handle(t(5), &init, &mut ignore);
    let out = drain(&mut p.s, t(5));
    assert_eq!(
        p.s.memory(),
        mem,
        "the reported parameter fits memory set aside at setup"
    );
    assert_eq!(out.len(), 1, "one ABORT, no INIT ACK");
    assert_eq!(vtag(&out[0]), 0x5151);
    assert_eq!(
        abort_of(&out[0]).causes.iter().next(),
        Some(CauseRepr::UnresolvableAddress {
            address: HOST_NAME_BYTES
        })
    );
    assert_eq!(p.s.state(), State::Established, "the association goes on");
    assert_eq!(p.s.stats().inits_refused, 1);
}

/// The INIT ACK a client receives with a Host Name Address ends its attempt: ABORT on the
/// INIT ACK's Initiate Tag with Unresolvable Address (RFC 9260 §3.3.2.1).
#[test]
fn host_name_address_in_init_ack_is_aborted_3_3_2_1() {
    let mut cep = endpoint(C_PORT, 1);
    let mut c = cep.connect(t(0), S_ADDR, S_PORT);
    let init = drain(&mut c, t(0));
    let ChunkRepr::Init(i) = chunks(&init[0])[0] else {
        panic!()
    };
    let cookie = [0u8; 8];
    let params = [
        ParamRepr::StateCookie(&cookie),
        ParamRepr::AdaptationLayerIndication(1),
        HOST_NAME,
    ];
    let ack = init_ack(0xabcd, 4, 4, &params);
    c.handle(
        t(1),
        &packet(S_PORT, C_PORT, i.initiate_tag, &[ack]),
        &mut ignore,
    )
    .unwrap();
    let ev = events(&mut c);
    assert!(
        matches!(ev.last(), Some(Event::Closed(CloseReason::InitAckRefused(why))) if why.contains("3.3.2.1")),
        "{ev:?}"
    );
    let out = drain(&mut c, t(1));
    assert_eq!(vtag(&out[0]), 0xabcd);
    assert_eq!(
        abort_of(&out[0]).causes.iter().next(),
        Some(CauseRepr::UnresolvableAddress {
            address: HOST_NAME_BYTES
        })
    );
    assert!(c.is_closed());
}

fn init_ack<'a>(tag: u32, os: u16, mis: u16, params: &'a [ParamRepr<'a>]) -> ChunkRepr<'a> {
    ChunkRepr::InitAck(ddpdk_dataplane::wire::sctp::InitAckRepr(InitRepr {
        initiate_tag: tag,
        a_rwnd: 65536,
        outbound_streams: os,
        inbound_streams: mis,
        initial_tsn: 5,
        params: List::new(params),
    }))
}

/// RFC 9260 §5.2.2: an unexpected INIT for an established association that adds addresses
/// is answered with ABORT on the INIT's Initiate Tag, cause Restart of an Association with
/// New Addresses listing them; the association goes on. An INIT that lists only the address
/// the association has is the restart §5.2.4 handles, answered with INIT ACK as before.
#[test]
fn init_adding_an_address_is_aborted_5_2_2() {
    let mut p = Pair::new();
    let ali = ParamRepr::AdaptationLayerIndication(1);
    let known = ParamRepr::Ipv4Address(Ipv4Addr::new(198, 18, 0, 1));
    let new = ParamRepr::Ipv4Address(Ipv4Addr::new(198, 18, 0, 9));
    let init = |tag: u32, params: &[ParamRepr<'_>]| init_packet(C_PORT, S_PORT, tag, 77, params);
    let _ = p.s.handle(t(5), &init(0x6161, &[known, ali]), &mut ignore);
    let out = drain(&mut p.s, t(5));
    assert!(
        matches!(chunks(&out[0])[0], ChunkRepr::InitAck(_)),
        "the address it has: INIT ACK"
    );
    // The cause is built in memory set aside at setup: a peer's INITs cannot grow the
    // association (the sctp_assoc fuzz target found this, crash-b001c898…).
    let mem = p.s.memory();
    let _ =
        p.s.handle(t(6), &init(0x6262, &[known, new, ali]), &mut ignore);
    let out = drain(&mut p.s, t(6));
    assert_eq!(p.s.memory(), mem, "association memory grew");
    assert_eq!(out.len(), 1);
    assert_eq!(vtag(&out[0]), 0x6262);
    let a = abort_of(&out[0]);
    assert!(!a.t_bit);
    assert_eq!(
        a.causes.iter().next(),
        Some(CauseRepr::RestartWithNewAddresses {
            addresses: b"\x00\x05\x00\x08\xc6\x12\x00\x09"
        })
    );
    assert_eq!(p.s.state(), State::Established);
    assert_eq!(p.s.stats().inits_refused, 1);
    // The association still carries data.
    p.c.send(0, 16, b"still up").unwrap();
    p.exchange(t(7), |_, _| true);
    assert_eq!(p.got_s.last().map(|m| &m.2[..]), Some(&b"still up"[..]));
}

/// RFC 9260 §5.2.2 for a peer that lists its addresses (multi-homed, or bound to a wildcard):
/// the addresses of its first INIT are the association's, so a restart INIT listing the same
/// ones, in any order, is a restart (INIT ACK); one that lists another is refused (ABORT).
#[test]
fn restart_listing_the_same_addresses_is_a_restart_5_2_2() {
    let mut sep = endpoint(S_PORT, 2);
    let mut out = vec![0u8; 4096];
    let ali = ParamRepr::AdaptationLayerIndication(1);
    let me = ParamRepr::Ipv4Address(Ipv4Addr::new(198, 18, 0, 1));
    let other = ParamRepr::Ipv4Address(Ipv4Addr::new(198, 18, 0, 9));
    let init = |tag: u32, params: &[ParamRepr<'_>]| init_packet(C_PORT, S_PORT, tag, 77, params);
    let Outcome::Reply(n) = sep.handle(
        t(0),
        C_ADDR,
        &init(0x7171, &[me, other, ali]),
        &mut out,
        &mut ignore,
    ) else {
        panic!("no INIT ACK")
    };
    let ack = out[..n].to_vec();
    let ChunkRepr::InitAck(ia) = chunks(&ack)[0] else {
        panic!()
    };
    let cookie = ia.state_cookie().unwrap().to_vec();
    let echo = packet(
        C_PORT,
        S_PORT,
        ia.0.initiate_tag,
        &[ChunkRepr::CookieEcho(
            ddpdk_dataplane::wire::sctp::CookieEchoRepr { cookie: &cookie },
        )],
    );
    let Outcome::Accepted(s) = sep.handle(t(1), C_ADDR, &echo, &mut out, &mut ignore) else {
        panic!("COOKIE ECHO not accepted")
    };
    let mut s = *s;
    assert_eq!(s.state(), State::Established);
    let _ = drain(&mut s, t(1));
    // The same two addresses, the other way round: a restart.
    let _ = s.handle(t(2), &init(0x7272, &[other, me, ali]), &mut ignore);
    let got = drain(&mut s, t(2));
    assert!(
        matches!(chunks(&got[0])[0], ChunkRepr::InitAck(_)),
        "{:?}",
        chunks(&got[0])
    );
    // A third address: refused.
    let third = ParamRepr::Ipv4Address(Ipv4Addr::new(198, 18, 0, 10));
    let _ = s.handle(t(3), &init(0x7373, &[me, other, third, ali]), &mut ignore);
    let got = drain(&mut s, t(3));
    assert_eq!(vtag(&got[0]), 0x7373);
    assert!(matches!(
        abort_of(&got[0]).causes.iter().next(),
        Some(CauseRepr::RestartWithNewAddresses { .. })
    ));
    assert_eq!(s.state(), State::Established);
}

/// RFC 9260 §8.5.1 exempts a COOKIE ECHO from the tag check: its cookie vouches for the
/// packet instead. One the association refuses (a cookie that does not open, a tag other than
/// the cookie's, a stale cookie) authenticated nothing, so it is a discard, not `Ok`: the
/// runtime takes `Ok` as its sender confirmed as the neighbour (an off-path sender could move
/// the peer's MAC address with one). A retransmitted COOKIE ECHO of the association's own
/// (§5.2.4 case D) is taken. Found by a review, session 80.
#[test]
fn a_refused_cookie_echo_is_a_discard_not_a_packet_taken_8_5_1() {
    let mut sep = endpoint(S_PORT, 2);
    let mut out = vec![0u8; 4096];
    let ali = [ParamRepr::AdaptationLayerIndication(1)];
    let init = |tag: u32| init_packet(C_PORT, S_PORT, tag, 77, &ali);
    let cookie_of = |sep: &mut Endpoint, s: Option<&mut Association>, tag: u32, at| {
        let mut out = vec![0u8; 4096];
        let ack = match s {
            Some(s) => {
                let _ = s.handle(at, &init(tag), &mut ignore);
                drain(s, at).remove(0)
            }
            None => {
                let Outcome::Reply(n) = sep.handle(at, C_ADDR, &init(tag), &mut out, &mut ignore)
                else {
                    panic!("no INIT ACK")
                };
                out[..n].to_vec()
            }
        };
        let ChunkRepr::InitAck(ia) = chunks(&ack)[0] else {
            panic!("{:?}", chunks(&ack))
        };
        (ia.0.initiate_tag, ia.state_cookie().unwrap().to_vec())
    };
    let echo = |tag: u32, cookie: &[u8]| {
        packet(
            C_PORT,
            S_PORT,
            tag,
            &[ChunkRepr::CookieEcho(CookieEchoRepr { cookie })],
        )
    };
    let (ours, cookie) = cookie_of(&mut sep, None, 0x7171, t(0));
    let Outcome::Accepted(s) =
        sep.handle(t(1), C_ADDR, &echo(ours, &cookie), &mut out, &mut ignore)
    else {
        panic!("COOKIE ECHO not accepted")
    };
    let mut s = *s;
    let _ = drain(&mut s, t(1));
    let stats = *s.stats();
    let mut forged = cookie.clone();
    *forged.last_mut().unwrap() ^= 1;
    assert_eq!(
        s.handle(t(2), &echo(0xbad, &forged), &mut ignore),
        Err(Discard::Malformed),
        "a cookie that does not open"
    );
    assert_eq!(s.stats().malformed, stats.malformed + 1);
    assert_eq!(
        s.handle(t(2), &echo(0xbad, &cookie), &mut ignore),
        Err(Discard::BadVerificationTag),
        "the association's own cookie under a tag not the cookie's (§5.1.5 step 2)"
    );
    assert_eq!(s.stats().bad_vtag, stats.bad_vtag + 1);
    assert!(drain(&mut s, t(2)).is_empty(), "neither is answered");
    // A restart's cookie presented past Valid.Cookie.Life (60 s): answered with a Stale
    // Cookie ERROR (§5.1.5 step 3), still nothing taken.
    let (new_tag, restart) = cookie_of(&mut sep, Some(&mut s), 0x7272, t(3));
    let late = t(3) + Duration::from_secs(61);
    assert_eq!(
        s.handle(late, &echo(new_tag, &restart), &mut ignore),
        Err(Discard::UnusableCookie),
        "a stale cookie"
    );
    assert_eq!(s.stats().stale_cookies, stats.stale_cookies + 1);
    let answer = drain(&mut s, late);
    assert!(
        answer
            .iter()
            .any(|p| matches!(chunks(p)[0], ChunkRepr::Error(_))),
        "the Stale Cookie ERROR still goes"
    );
    assert_eq!(s.state(), State::Established);
    // Cookies the endpoint issued for INITs of no association (tie-tags 0): one for the
    // association's own peer tag is §5.2.4 case C (an earlier INIT's), one for another tag
    // fits no case. Both silently discarded (the endpoint's cookies are good ones: only the
    // association's cases refuse them), nothing answered.
    let (c_tag, case_c) = cookie_of(&mut sep, None, 0x7171, late);
    let (n_tag, no_case) = cookie_of(&mut sep, None, 0x9999, late);
    for (what, tag, cookie) in [("case C", c_tag, &case_c), ("no case", n_tag, &no_case)] {
        let before = s.stats().unusable_cookies;
        assert_eq!(
            s.handle(late, &echo(tag, cookie), &mut ignore),
            Err(Discard::UnusableCookie),
            "{what}"
        );
        assert_eq!(s.stats().unusable_cookies, before + 1, "{what}: counted");
        assert!(drain(&mut s, late).is_empty(), "{what}: not answered");
        assert_eq!(s.state(), State::Established, "{what}");
    }
    // Case D, the association's own COOKIE ECHO again (its COOKIE ACK lost): taken.
    assert_eq!(s.handle(late, &echo(ours, &cookie), &mut ignore), Ok(()));
}

/// RFC 9260 §7.2.1: "The initial cwnd before DATA transmission ... MUST be set to min(4*MTU,
/// max (2*MTU, 4404))". An association configured for a 9000-byte link whose path to the peer
/// is 1480 bytes (set before any DATA, as the runtime does from its neighbour's estimate)
/// sends a first flight of about 4404 bytes, not twelve packets sized by the configured MTU.
/// Found by an independent review, session 68.
#[test]
fn the_first_flight_follows_the_path_mtu_known_before_it_7_2_1() {
    let mut p = Pair::with(|c| c.path_mtu = 8980);
    p.c.set_path_mtu(1480);
    for _ in 0..20 {
        p.c.send(1, 16, &[7u8; 1400]).unwrap();
    }
    let mut sent = 0;
    loop {
        let out = drain(&mut p.c, t(3));
        if out.is_empty() {
            break;
        }
        sent += out
            .iter()
            .flat_map(|o| chunks(o))
            .filter_map(|c| match c {
                ChunkRepr::Data(d) => Some(d.user_data.len()),
                _ => None,
            })
            .sum::<usize>();
    }
    assert!(sent > 0);
    assert!(sent <= 4404 + 1480, "a first flight of {sent} bytes");
}

/// RFC 9260 §5.1 C: until the COOKIE ACK, "the sender MUST NOT send any other packets to the
/// peer" than the COOKIE ECHO. A HEARTBEAT and an unknown chunk to report (upper bits 01)
/// from the peer while our COOKIE ECHO is out (its COOKIE ACK lost, say) get no packet of
/// their own; the ERROR goes once the association is up. Before, a lone HEARTBEAT ACK and a
/// lone ERROR went (an independent review, session 68).
#[test]
fn nothing_but_the_cookie_echo_leaves_before_the_cookie_ack_5_1_c() {
    let (mut sep, mut c, echo) = handshake_to_echo();
    assert_eq!(c.state(), State::CookieEchoed);
    let tag = c.local_tag();
    let hb = ChunkRepr::Heartbeat(HeartbeatRepr {
        info: b"hb",
        extra: &[],
    });
    let unknown = ChunkRepr::Unknown(UnknownChunkRepr {
        chunk_type: 0x41,
        flags: 0,
        value: b"abcd",
    });
    c.handle(t(2), &packet(S_PORT, C_PORT, tag, &[hb]), &mut ignore)
        .unwrap();
    c.handle(t(2), &packet(S_PORT, C_PORT, tag, &[unknown]), &mut ignore)
        .unwrap();
    assert!(
        drain(&mut c, t(2)).is_empty(),
        "a packet before the COOKIE ACK"
    );
    assert_eq!(c.state(), State::CookieEchoed);
    // The handshake completes, and the report leaves then.
    let mut out = vec![0u8; 65536];
    let Outcome::Accepted(s) = sep.handle(t(3), C_ADDR, &echo, &mut out, &mut ignore) else {
        panic!("COOKIE ECHO not accepted")
    };
    let mut s = *s;
    for p in drain(&mut s, t(3)) {
        c.handle(t(4), &p, &mut ignore).unwrap();
    }
    assert_eq!(c.state(), State::Established);
    let sent: Vec<_> = drain(&mut c, t(4));
    let all: Vec<_> = sent.iter().flat_map(|o| chunks(o)).collect();
    assert!(
        has(&all, |c| matches!(c, ChunkRepr::Error(_))),
        "the report after the COOKIE ACK: {all:?}"
    );
}

/// RFC 9260 §5.2.1: in COOKIE-ECHOED, an INIT that adds an address to those the peer's
/// INIT ACK gave "MUST be discarded, and NO changes should be made to the existing
/// association. An ABORT SHOULD be sent": ABORT on the INIT's tag, cause Restart of an
/// Association with New Addresses; the handshake goes on and completes. An INIT that lists
/// only the address we talk to is the collision §5.2.1 answers with INIT ACK, as before; in
/// COOKIE-WAIT (no INIT ACK yet, no address list to add to) so is one listing another.
#[test]
fn init_adding_an_address_in_cookie_echoed_is_aborted_5_2_1() {
    let ali = ParamRepr::AdaptationLayerIndication(1);
    let known = ParamRepr::Ipv4Address(Ipv4Addr::new(198, 18, 0, 2));
    let new = ParamRepr::Ipv4Address(Ipv4Addr::new(198, 18, 0, 77));
    let init = |tag: u32, params: &[ParamRepr<'_>]| init_packet(S_PORT, C_PORT, tag, 1000, params);
    let (mut sep, mut c, echo) = handshake_to_echo();
    assert_eq!(c.state(), State::CookieEchoed);
    let (local_tag, peer_tag) = (c.local_tag(), c.peer_tag());
    c.handle(t(2), &init(0x5555, &[ali, new]), &mut ignore)
        .unwrap();
    let out = drain(&mut c, t(2));
    assert_eq!(out.len(), 1, "one answer");
    let cs = chunks(&out[0]);
    assert!(!has(&cs, |c| matches!(c, ChunkRepr::InitAck(_))), "{cs:?}");
    assert_eq!(vtag(&out[0]), 0x5555, "ABORT on the INIT's Initiate Tag");
    let a = abort_of(&out[0]);
    assert!(!a.t_bit);
    assert_eq!(
        a.causes.iter().next(),
        Some(CauseRepr::RestartWithNewAddresses {
            addresses: b"\x00\x05\x00\x08\xc6\x12\x00\x4d"
        })
    );
    // Nothing changed: same state and tags, and the COOKIE ECHO still completes the setup.
    assert_eq!(c.state(), State::CookieEchoed);
    assert_eq!((c.local_tag(), c.peer_tag()), (local_tag, peer_tag));
    assert_eq!(c.stats().inits_refused, 1);
    let mut out = vec![0u8; 65536];
    let Outcome::Accepted(s) = sep.handle(t(3), C_ADDR, &echo, &mut out, &mut ignore) else {
        panic!("COOKIE ECHO not accepted")
    };
    let mut s = *s;
    for pk in drain(&mut s, t(3)) {
        c.handle(t(3), &pk, &mut ignore).unwrap();
    }
    assert_eq!(c.state(), State::Established);
    // Only the address we talk to: an INIT ACK (§5.2.1 collision).
    let (_, mut c, _) = handshake_to_echo();
    c.handle(t(2), &init(0x5656, &[ali, known]), &mut ignore)
        .unwrap();
    let out = drain(&mut c, t(2));
    assert!(matches!(chunks(&out[0])[0], ChunkRepr::InitAck(_)));
    // COOKIE-WAIT: the peer's addresses are not known yet; an INIT ACK.
    let mut cep = endpoint(C_PORT, 1);
    let mut c = cep.connect(t(0), S_ADDR, S_PORT);
    drain(&mut c, t(0));
    c.handle(t(1), &init(0x5757, &[ali, new]), &mut ignore)
        .unwrap();
    let out = drain(&mut c, t(1));
    assert!(matches!(chunks(&out[0])[0], ChunkRepr::InitAck(_)));
}

/// RFC 9260 §3.2.2 (and §3.3.3): the receiver of an INIT MUST report the parameters whose
/// type asks for it (upper bits 01 or 11, §3.2.1) in Unrecognized Parameter parameters of the
/// INIT ACK it answers with - also when the INIT reaches an existing association and the
/// INIT ACK is the association's (§5.2.2), as the endpoint does for an INIT it answers.
#[test]
fn init_ack_of_an_association_reports_unrecognized_parameters_3_2_2() {
    let mut p = Pair::new();
    let skip = ParamRepr::Unknown {
        param_type: 0x8123,
        value: b"skip",
    };
    let report = ParamRepr::Unknown {
        param_type: 0xC123,
        value: b"report",
    };
    let init = init_chunk(
        0x7777,
        &[skip, ParamRepr::AdaptationLayerIndication(1), report],
    );
    let mem = p.s.memory();
    let _ = p.s.handle(t(5), &init, &mut ignore);
    let out = drain(&mut p.s, t(5));
    assert_eq!(p.s.memory(), mem, "association memory grew");
    assert_eq!(vtag(&out[0]), 0x7777);
    let cs = chunks(&out[0]);
    let ChunkRepr::InitAck(ia) = cs[0] else {
        panic!("{cs:?}")
    };
    let reported: Vec<&[u8]> =
        ia.0.params
            .iter()
            .filter_map(|p| match p {
                ParamRepr::UnrecognizedParameter(b) => Some(b),
                _ => None,
            })
            .collect();
    // The whole parameter: type 0xC123, length 10, "report"; the 10 (skip silently) is not.
    assert_eq!(reported, vec![&b"\xc1\x23\x00\x0areport"[..]]);
    assert!(ia.state_cookie().is_some());
    assert_eq!(p.s.state(), State::Established);
}

/// RFC 9260 §3.3.2: an INIT with OS or MIS of 0, or an a_rwnd below 1500, is discarded and
/// SHOULD be answered with ABORT (Invalid Mandatory Parameter, §3.3.10.7) on its Initiate
/// Tag - by an existing association as by the endpoint; one with an Initiate Tag of 0 is
/// silently discarded. The association goes on.
#[test]
fn invalid_init_to_an_association_is_aborted_3_3_2() {
    let mut p = Pair::new();
    let ali = [ParamRepr::AdaptationLayerIndication(1)];
    let init = |tag: u32, os: u16, mis: u16, a_rwnd: u32| {
        packet(
            C_PORT,
            S_PORT,
            0,
            &[ChunkRepr::Init(InitRepr {
                initiate_tag: tag,
                a_rwnd,
                outbound_streams: os,
                inbound_streams: mis,
                initial_tsn: 77,
                params: List::new(&ali),
            })],
        )
    };
    for (tag, os, mis, a_rwnd) in [
        (0x1001, 0, 4, 65536),
        (0x1002, 4, 0, 65536),
        (0x1003, 4, 4, 1499),
    ] {
        let _ = p.s.handle(t(5), &init(tag, os, mis, a_rwnd), &mut ignore);
        let out = drain(&mut p.s, t(5));
        assert_eq!(out.len(), 1, "{tag:#x}: one answer");
        assert_eq!(vtag(&out[0]), tag, "on the INIT's Initiate Tag");
        let a = abort_of(&out[0]);
        assert!(!a.t_bit);
        assert_eq!(
            a.causes.iter().collect::<Vec<_>>(),
            vec![CauseRepr::InvalidMandatoryParameter]
        );
        assert_eq!(p.s.state(), State::Established);
    }
    // The endpoint answers the same INIT the same way.
    let mut sep = endpoint(S_PORT, 2);
    let mut out = vec![0u8; 2048];
    let Outcome::Reply(n) = sep.handle(
        t(5),
        C_ADDR,
        &init(0x1004, 0, 4, 65536),
        &mut out,
        &mut ignore,
    ) else {
        panic!()
    };
    assert_eq!(
        abort_of(&out[..n]).causes.iter().collect::<Vec<_>>(),
        vec![CauseRepr::InvalidMandatoryParameter]
    );
    // Initiate Tag 0: nothing.
    let _ = p.s.handle(t(6), &init(0, 0, 4, 65536), &mut ignore);
    assert!(drain(&mut p.s, t(6)).is_empty());
    // The association still carries data.
    p.c.send(0, 16, b"still up").unwrap();
    p.exchange(t(7), |_, _| true);
    assert_eq!(p.got_s.last().map(|m| &m.2[..]), Some(&b"still up"[..]));
}

/// RFC 9260 §6.10: INIT "MUST NOT be bundled with any other chunk in a packet", and §8.5.1 A
/// puts it alone under tag 0. An INIT behind a SACK, under the association's own tag, is no
/// INIT a peer sends: it is not answered (before: an INIT ACK, with a State Cookie, went to
/// whoever wrote it) and counted; the association goes on.
#[test]
fn an_init_bundled_behind_another_chunk_is_not_answered_6_10() {
    let mut p = Pair::new();
    let ours = p.s.local_tag();
    let ali = [ParamRepr::AdaptationLayerIndication(1)];
    let sack = ChunkRepr::Sack(SackRepr {
        cum_tsn_ack: 0,
        a_rwnd: 65536,
        gap_ack_blocks: List::empty(),
        dup_tsns: List::empty(),
    });
    let init = ChunkRepr::Init(InitRepr {
        initiate_tag: 0x5151,
        a_rwnd: 65536,
        outbound_streams: 4,
        inbound_streams: 4,
        initial_tsn: 77,
        params: List::new(&ali),
    });
    let malformed = p.s.stats().malformed;
    let _ = p.s.handle(
        t(5),
        &packet(C_PORT, S_PORT, ours, &[sack, init]),
        &mut ignore,
    );
    let out = drain(&mut p.s, t(5));
    assert!(
        out.iter().all(|o| o.get(12) != Some(&2)),
        "no INIT ACK: {out:?}"
    );
    assert_eq!(p.s.stats().malformed, malformed + 1);
    assert_eq!(p.s.state(), State::Established);
    p.c.send(0, 16, b"still up").unwrap();
    p.exchange(t(7), |_, _| true);
    assert_eq!(p.got_s.last().map(|m| &m.2[..]), Some(&b"still up"[..]));
}

/// RFC 9260 §3.3.3: a receiver of an INIT ACK with OS or MIS of 0 SHOULD destroy the
/// association (and MAY send ABORT: Invalid Mandatory Parameter, §3.3.10.7); an Initiate Tag
/// of 0 MUST destroy it (no ABORT can be addressed to tag 0).
#[test]
fn init_ack_with_zero_streams_or_tag_ends_the_attempt_3_3_3() {
    let cookie = [0u8; 8];
    let params = [
        ParamRepr::StateCookie(&cookie),
        ParamRepr::AdaptationLayerIndication(1),
    ];
    for (tag, os, mis, abort) in [(0xabcd, 0, 4, true), (0xabcd, 4, 0, true), (0, 4, 4, false)] {
        let mut cep = endpoint(C_PORT, 1);
        let mut c = cep.connect(t(0), S_ADDR, S_PORT);
        let init = drain(&mut c, t(0));
        let ChunkRepr::Init(i) = chunks(&init[0])[0] else {
            panic!()
        };
        let p = packet(
            S_PORT,
            C_PORT,
            i.initiate_tag,
            &[init_ack(tag, os, mis, &params)],
        );
        let _ = c.handle(t(1), &p, &mut ignore);
        let ev = events(&mut c);
        assert!(
            matches!(ev.last(), Some(Event::Closed(CloseReason::InitAckRefused(why))) if why.contains("3.3.3")),
            "{ev:?}"
        );
        let out = drain(&mut c, t(1));
        assert!(c.is_closed());
        if abort {
            assert_eq!(vtag(&out[0]), tag);
            assert_eq!(
                abort_of(&out[0]).causes.iter().next(),
                Some(CauseRepr::InvalidMandatoryParameter)
            );
        } else {
            assert!(out.is_empty(), "nothing to tag 0");
        }
        // Destroyed: no INIT retransmission either.
        assert_eq!(c.poll_timeout(), None);
    }
}

/// RFC 9260 §3.3.3 (the State Cookie is mandatory) and §3.3.10.2: an INIT ACK without one is
/// reported with an ERROR, Missing Mandatory Parameter naming State Cookie (type 7), on its
/// Initiate Tag; the INIT is retransmitted on T1-init as if no INIT ACK had come.
#[test]
fn init_ack_without_a_state_cookie_is_reported_3_3_3() {
    let mut cep = endpoint(C_PORT, 1);
    let mut c = cep.connect(t(0), S_ADDR, S_PORT);
    let init = drain(&mut c, t(0));
    let ChunkRepr::Init(i) = chunks(&init[0])[0] else {
        panic!()
    };
    let params = [ParamRepr::AdaptationLayerIndication(1)];
    let p = packet(
        S_PORT,
        C_PORT,
        i.initiate_tag,
        &[init_ack(0xabcd, 4, 4, &params)],
    );
    let _ = c.handle(t(1), &p, &mut ignore);
    assert_eq!(c.state(), State::CookieWait);
    assert!(events(&mut c).is_empty());
    let out = drain(&mut c, t(1));
    assert_eq!(out.len(), 1);
    assert_eq!(vtag(&out[0]), 0xabcd);
    let cs = chunks(&out[0]);
    let ChunkRepr::Error(e) = cs[0] else {
        panic!("{cs:?}")
    };
    let Some(CauseRepr::MissingMandatoryParameter { params }) = e.causes.iter().next() else {
        panic!("{e:?}")
    };
    assert_eq!(
        params.iter().collect::<Vec<_>>(),
        vec![ddpdk_dataplane::wire::sctp::ParamType::StateCookie]
    );
    assert_eq!(c.stats().init_acks_without_cookie, 1);
    // The responder keeps no state after its INIT ACK (§5.1.3), so it may answer our ERROR
    // with an out-of-the-blue ABORT, T bit set, on the INIT ACK's tag (§8.4 rule 8): that tag
    // is not our peer's, and the attempt goes on.
    let ootb = ChunkRepr::Abort(AbortRepr {
        t_bit: true,
        causes: List::empty(),
    });
    let _ = c.handle(t(2), &packet(S_PORT, C_PORT, 0xabcd, &[ootb]), &mut ignore);
    assert_eq!(
        c.state(),
        State::CookieWait,
        "an ABORT on the INIT ACK's tag is not ours"
    );
    // T1-init (100 ms here) retransmits the INIT, tag 0, with our Initiate Tag.
    c.handle_timeout(t(101));
    let again = drain(&mut c, t(101));
    assert_eq!(vtag(&again[0]), 0);
    assert!(
        matches!(chunks(&again[0])[0], ChunkRepr::Init(ref x) if x.initiate_tag == i.initiate_tag)
    );
}

/// §3.3.2.1 holds for an INIT ACK the parser refuses for another reason: one with a Host Name
/// Address and no State Cookie is answered with ABORT, not with the ERROR a missing cookie
/// alone gets.
#[test]
fn host_name_address_in_an_init_ack_without_cookie_is_aborted_3_3_2_1() {
    let mut cep = endpoint(C_PORT, 1);
    let mut c = cep.connect(t(0), S_ADDR, S_PORT);
    let init = drain(&mut c, t(0));
    let ChunkRepr::Init(i) = chunks(&init[0])[0] else {
        panic!()
    };
    let params = [ParamRepr::AdaptationLayerIndication(1), HOST_NAME];
    let p = packet(
        S_PORT,
        C_PORT,
        i.initiate_tag,
        &[init_ack(0xabcd, 4, 4, &params)],
    );
    let _ = c.handle(t(1), &p, &mut ignore);
    let out = drain(&mut c, t(1));
    assert_eq!(vtag(&out[0]), 0xabcd);
    assert_eq!(
        abort_of(&out[0]).causes.iter().next(),
        Some(CauseRepr::UnresolvableAddress {
            address: HOST_NAME_BYTES
        })
    );
    assert!(c.is_closed());
}

/// A window smaller than one message would hang an association that cannot deliver in parts:
/// the configuration is refused (RFC 9260 §6.2 has the receiver drop what does not fit).
#[test]
fn a_window_smaller_than_one_message_is_refused() {
    let jumbo = Config {
        path_mtu: 9000 - 20,
        a_rwnd: 1500,
        ..cfg(C_PORT)
    };
    assert!(jumbo.validate().unwrap_err().contains("a_rwnd"));
    assert!(Config {
        a_rwnd: 8960,
        ..jumbo
    }
    .validate()
    .is_ok());
}

/// RFC 9260 §6.9 with a broken or hostile peer: a run of fragments that can never complete
/// (the TSN it needs came as a whole message) is dropped once the cumulative TSN passes it, so
/// it does not pin the advertised window.
#[test]
fn fragments_that_cannot_complete_do_not_pin_the_window_6_9() {
    let mut p = Pair::new();
    let tsn = next_client_tsn(&mut p, t(5));
    let tag = p.s.local_tag();
    let send = |p: &mut Pair, chunk: ChunkRepr<'_>, ms: u64| to_server(p, tag, chunk, ms);
    // A B fragment, then a whole message where its next fragment should be.
    let _ = send(&mut p, data(tsn, 0, true, true, false, &[1; 400]), 500);
    let out = send(&mut p, data(tsn + 1, 0, true, true, true, b"whole"), 501);
    assert_eq!(p.s.stats().fragments_purged, 1);
    p.s.handle_timeout(t(800));
    let out = [out, drain(&mut p.s, t(800))].concat();
    assert_eq!(
        a_rwnd_of(&out),
        Some(cfg(S_PORT).a_rwnd),
        "the window is whole again"
    );
}

/// RFC 5043 §9 with RFC 9260 §6.9: a fragment under 256 bytes that is not a message's last is
/// never held (its message could need more fragments than the reassembly holds, and no path
/// a DDP segment may be fragmented for is that small). It used to be dropped unacknowledged,
/// so the peer resent it until Max.Retrans with nothing said; the association is aborted at
/// once with a Protocol Violation that says why. A message's last fragment may be small.
#[test]
fn a_tiny_fragment_before_a_messages_end_is_aborted_with_the_reason_5043_9() {
    let why = "under 256 bytes";
    for (b, what) in [(false, "a middle fragment"), (true, "a first fragment")] {
        let mut p = Pair::new();
        let tsn = next_client_tsn(&mut p, t(5));
        let tag = p.s.local_tag();
        let send = |p: &mut Pair, chunk: ChunkRepr<'_>, ms: u64| to_server(p, tag, chunk, ms);
        // A message in a first fragment of 400 bytes and a last one of 10: taken.
        let _ = send(&mut p, data(tsn, 0, true, true, false, &[1; 400]), 500);
        let _ = send(&mut p, data(tsn + 1, 0, true, false, true, &[1; 10]), 501);
        assert_eq!(p.s.stats().reassembled, 1, "{what}");
        let _ = events(&mut p.s);
        let out = send(&mut p, data(tsn + 2, 0, true, b, false, &[2; 255]), 900);
        assert_eq!(p.s.stats().fragments_in, 2, "{what}: not taken");
        let ev = events(&mut p.s);
        let Some(Event::Closed(CloseReason::ProtocolViolation(msg))) = ev.last() else {
            panic!("{what}: {ev:?}")
        };
        assert!(msg.contains(why), "{msg}");
        let out = [out, drain(&mut p.s, t(900))].concat();
        let abort = out
            .iter()
            .flat_map(|pk| chunks(pk))
            .find_map(|c| match c {
                ChunkRepr::Abort(a) => Some(a),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{what}: no ABORT"));
        assert!(matches!(
            abort.causes.iter().next(),
            Some(CauseRepr::ProtocolViolation { info }) if std::str::from_utf8(info).unwrap().contains(why)
        ));
    }
}

/// §6.2: "the duplicate TSN number(s) SHOULD be reported in the SACK chunk as duplicate". A
/// fragment received again while the reassembly is full (64 fragments held) is a duplicate,
/// reported, not a new fragment refused for want of room: it was counted as refused and never
/// reported (an independent review).
#[test]
fn a_fragment_received_again_while_reassembly_is_full_is_a_duplicate_6_2() {
    let mut p = Pair::new();
    let tsn = next_client_tsn(&mut p, t(5));
    let tag = p.s.local_tag();
    let send = |p: &mut Pair, chunk: ChunkRepr<'_>, ms: u64| to_server(p, tag, chunk, ms);
    // A message's first 65 fragments but the second (a gap, so the cumulative TSN stays
    // below the rest), its end never sent: 64 held, the reassembly is full.
    for k in (0..65u32).filter(|&k| k != 1) {
        let _ = send(
            &mut p,
            data(tsn + k, 0, true, k == 0, false, &[7; 300]),
            500,
        );
    }
    assert_eq!(p.s.stats().fragments_in, 64);
    let refused = p.s.stats().rwnd_dropped;
    // The tenth again: a duplicate, in the SACK it draws at once (§6.7).
    let out = send(&mut p, data(tsn + 9, 0, true, false, false, &[7; 300]), 501);
    assert_eq!(p.s.stats().rwnd_dropped, refused, "not refused as new");
    let dups: Vec<u32> = out
        .iter()
        .flat_map(|pk| chunks(pk))
        .filter_map(|c| match c {
            ChunkRepr::Sack(s) => Some(s.dup_tsns.iter().collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(dups, vec![tsn + 9], "reported as a duplicate");
    // A new fragment is still refused: the reassembly holds no more.
    let _ = send(
        &mut p,
        data(tsn + 65, 0, true, false, false, &[7; 300]),
        502,
    );
    assert_eq!(p.s.stats().rwnd_dropped, refused + 1);
}

/// §8.5.1 A: "When an endpoint receives an SCTP packet with the Verification Tag set to 0,
/// it SHOULD verify that the packet contains only an INIT chunk. Otherwise, the receiver MUST
/// silently discard the packet." A SACK or a SHUTDOWN ACK of tag 0 to no association got
/// rule 8's ABORT or rule 5's SHUTDOWN COMPLETE, reflected with tag 0 (an independent review).
#[test]
fn a_tag_0_packet_that_is_not_an_init_is_discarded_8_5_1_a() {
    let mut sep = endpoint(S_PORT, 2);
    assert_eq!(
        out_of_the_blue(&mut sep, &packet(C_PORT, S_PORT, 0, &[a_sack()])).err(),
        Some(Ignored::ZeroTag)
    );
    assert_eq!(
        out_of_the_blue(
            &mut sep,
            &packet(C_PORT, S_PORT, 0, &[ChunkRepr::ShutdownAck])
        )
        .err(),
        Some(Ignored::ZeroTag)
    );
    let s = sep.stats();
    assert_eq!(s.ootb_aborts_out + s.ootb_shutdown_completes_out, 0);
    // Counted under its reason, apart from the other ignored packets.
    assert_eq!(s.ignored_why.get(Ignored::ZeroTag), 2);
    assert_eq!(s.ignored_why.iter().map(|(_, n)| n).sum::<u64>(), s.ignored);
    // An out-of-the-blue ABORT (§8.4 rule 2) is ignored for its own reason.
    let abort = ChunkRepr::Abort(AbortRepr {
        t_bit: false,
        causes: List::empty(),
    });
    assert!(out_of_the_blue(&mut sep, &packet(C_PORT, S_PORT, 9, &[abort])).is_err());
    let s = sep.stats();
    assert_eq!(
        (
            s.ignored_why.get(Ignored::Abort),
            s.ignored_why.get(Ignored::ZeroTag),
            s.ignored
        ),
        (1, 2, 3)
    );
    // The same with a tag is answered (rule 8).
    assert!(out_of_the_blue(&mut sep, &packet(C_PORT, S_PORT, 9, &[a_sack()])).is_ok());
}

/// A `valid_cookie_life` longer than a cookie's 32-bit lifespan holds is refused by the
/// configuration's check: near `Duration::MAX` a peer's Cookie Preservative overflowed the
/// addition (a panic, which aborts the release build), and above 49 days it was cut short
/// unseen (an independent review).
#[test]
fn a_cookie_life_no_cookie_can_carry_is_refused() {
    let mut c = cfg(S_PORT);
    c.valid_cookie_life = Duration::MAX;
    assert!(c.validate().is_err());
    c.valid_cookie_life = Duration::from_secs(49 * 24 * 3600);
    assert!(c.validate().is_ok());
}

/// The SACK in `out`.
fn the_sack<'a>(out: &'a [Vec<u8>]) -> SackRepr<'a> {
    out.iter()
        .flat_map(|pk| chunks(pk))
        .find_map(|c| match c {
            ChunkRepr::Sack(s) => Some(s),
            _ => None,
        })
        .expect("a SACK")
}

/// RFC 9260 §6.2 has delayed acknowledgements follow RFC 5681 §4.2, which sends "an
/// immediate ACK when it receives a data segment that fills in all or part of a gap". The
/// packet that filled the last gap waited for the delayed SACK (200 ms): the sender of a
/// repaired loss (one packet in flight after T3-rtx) waited with it (an independent review).
/// Whether the gap is filled by a packet's only chunk or by the second of two.
#[test]
fn the_packet_that_fills_the_last_gap_is_sacked_at_once_6_2() {
    let mut p = Pair::new();
    let tsn = next_client_tsn(&mut p, t(5));
    let tag = p.s.local_tag();
    let x = |k: u32| data(tsn.wrapping_add(k), 0, true, true, true, b"x");
    for k in [1, 2] {
        let out = to_server(&mut p, tag, x(k), 500);
        assert_eq!(the_sack(&out).cum_tsn_ack, tsn.wrapping_sub(1), "§6.7");
    }
    let out = to_server(&mut p, tag, x(0), 501);
    assert_eq!(the_sack(&out).cum_tsn_ack, tsn.wrapping_add(2), "filled");
    let out = to_server(&mut p, tag, x(4), 502);
    assert_eq!(the_sack(&out).cum_tsn_ack, tsn.wrapping_add(2), "§6.7");
    let two = packet(C_PORT, S_PORT, tag, &[x(5), x(3)]);
    p.s.handle(t(503), &two, &mut ignore).unwrap();
    let out = drain(&mut p.s, t(503));
    assert_eq!(the_sack(&out).cum_tsn_ack, tsn.wrapping_add(5), "filled");
}

/// RFC 9260 §6.2: "The SCTP endpoint MUST report as many Gap Ack Blocks as can fit in a
/// single SACK chunk limited by the current path MTU." A SACK held 64 at most, where a
/// 1480-byte path holds 363 (an independent review).
#[test]
fn a_sack_reports_every_gap_block_its_packet_holds_6_2() {
    let mut p = Pair::new();
    let tsn = next_client_tsn(&mut p, t(5));
    let tag = p.s.local_tag();
    let one = [1u8];
    // 70 isolated TSNs above the hole at `tsn`: 70 blocks.
    let bundle: Vec<_> = (0..70u32)
        .map(|k| data(tsn + 1 + 2 * k, 0, true, true, true, &one))
        .collect();
    p.s.handle(t(500), &packet(C_PORT, S_PORT, tag, &bundle), &mut ignore)
        .unwrap();
    let out = drain(&mut p.s, t(500));
    let sack = the_sack(&out);
    assert_eq!(sack.cum_tsn_ack, tsn.wrapping_sub(1));
    assert_eq!(sack.gap_ack_blocks.len(), 70);
}

/// The same rule seen from the sender: a TSN one SACK gap-acknowledged is still covered by
/// the next. With SACKs cut at 64 blocks, a block opening ahead of the others pushed the
/// last one out, and the sender read that as reneging (§6.2.1 D iii) and sent again what
/// the receiver held.
#[test]
fn a_gap_acked_tsn_stays_covered_when_a_block_opens_ahead_of_it_6_2() {
    let mut p = Pair::new();
    let tsn = next_client_tsn(&mut p, t(5));
    let tag = p.s.local_tag();
    let one = [1u8];
    for k in 1..=64u32 {
        let _ = to_server(
            &mut p,
            tag,
            data(tsn + 4 * k, 0, true, true, true, &one),
            500,
        );
    }
    // A TSN between the hole and the first block: a 65th block, ahead of the others.
    let out = to_server(&mut p, tag, data(tsn + 2, 0, true, true, true, &one), 501);
    let sack = the_sack(&out);
    let last = tsn + 256;
    assert!(
        sack.gap_ack_blocks.iter().any(|b| {
            let (lo, hi) = b.tsns(sack.cum_tsn_ack);
            ddpdk_dataplane::sctp::serial::le(lo, last)
                && ddpdk_dataplane::sctp::serial::le(last, hi)
        }),
        "TSN {last}, gap-acknowledged before, is still reported"
    );
}

/// RFC 9260 §6.2: "If the new incoming DATA chunk holds a TSN value less than the largest
/// TSN received so far, then the receiver SHOULD drop the largest TSN held for reordering
/// and accept the new incoming DATA chunk"; §6.9 reassembles. A reassembly full of messages
/// each missing one fragment refused the very fragments that would have completed them: the
/// cumulative TSN never moved again and the association stalled until Max.Retrans ended it
/// (an independent review). Now the highest held fragments make way, reneged on (the next
/// SACK no longer reports them), and every message completes once the peer resends them.
#[test]
fn a_full_reassembly_makes_way_for_the_fragment_completing_a_held_message_6_2() {
    let mut p = Pair::new();
    let tsn = next_client_tsn(&mut p, t(5));
    let tag = p.s.local_tag();
    let bytes: Vec<[u8; 300]> = (0..16u8).map(|m| [m; 300]).collect();
    let frag = |m: u32, k: u32| data(tsn + 5 * m + k, 0, true, k == 0, k == 4, &bytes[m as usize]);
    // 16 messages of five 300-byte fragments, each missing its second: 64 held, full.
    for m in 0..16u32 {
        for k in (0..5u32).filter(|&k| k != 1) {
            let _ = to_server(&mut p, tag, frag(m, k), 500);
        }
    }
    assert_eq!(p.s.stats().fragments_in, 64);
    let mut got = Vec::new();
    let pkt = packet(C_PORT, S_PORT, tag, &[frag(0, 1)]);
    p.s.handle(t(501), &pkt, &mut |m: Message<'_>| {
        got.push(m.data.to_vec())
    })
    .unwrap();
    assert_eq!(got, vec![vec![0u8; 1500]], "the first message, whole");
    // Up to the next message's first fragment.
    assert_eq!(p.s.received_cum_tsn(), tsn + 5);
    assert_eq!(p.s.stats().reneged, 1, "the highest fragment made way");
    let out = drain(&mut p.s, t(501));
    let sack = out
        .iter()
        .flat_map(|pk| chunks(pk))
        .find_map(|c| match c {
            ChunkRepr::Sack(s) => Some(s),
            _ => None,
        })
        .expect("a SACK (gaps: at once, §6.7)");
    let highest_reported = sack
        .gap_ack_blocks
        .iter()
        .map(|b| b.tsns(sack.cum_tsn_ack).1)
        .max()
        .unwrap();
    assert_eq!(
        highest_reported,
        tsn + 78,
        "the TSN reneged on is reported no more"
    );
    // The peer resends what is missing, the reneged fragment with the rest, in TSN order:
    // every message completes.
    let mut whole = 1;
    for m in 1..16u32 {
        for k in [1, 4] {
            let pkt = packet(C_PORT, S_PORT, tag, &[frag(m, k)]);
            p.s.handle(t(502), &pkt, &mut |msg: Message<'_>| {
                assert_eq!(msg.data, &[m as u8; 1500][..]);
                whole += 1;
            })
            .unwrap();
        }
    }
    assert_eq!(whole, 16);
    assert_eq!(p.s.received_cum_tsn(), tsn + 79);
    assert_eq!(p.s.stats().reassembled, 16);
}

/// §6.2's dropping is for a chunk it makes room for: a fragment that would not fit the byte
/// budget even with every fragment above it gone drops none of them (they were reneged on,
/// and resent, for nothing: review of this session's change).
#[test]
fn a_fragment_too_big_for_the_room_left_below_it_reneges_on_nothing_6_2() {
    let mut p = Pair::with(|c| c.a_rwnd = 4000);
    let tsn = next_client_tsn(&mut p, t(5));
    let tag = p.s.local_tag();
    let (big, small) = ([1u8; 1200], [2u8; 300]);
    let frag = |at: u32, b: bool, bytes| data(tsn + at, 0, true, b, false, bytes);
    // Held: 3600 bytes below TSN +4, and 300 above it.
    for chunk in [
        frag(5, true, &small[..]),
        frag(0, true, &big),
        frag(2, false, &big),
        frag(3, false, &big),
    ] {
        let _ = to_server(&mut p, tag, chunk, 500);
    }
    assert_eq!(p.s.stats().fragments_in, 4);
    let refused = p.s.stats().rwnd_dropped;
    let _ = to_server(&mut p, tag, frag(4, false, &[3u8; 600]), 501);
    assert_eq!(
        p.s.stats().rwnd_dropped,
        refused + 1,
        "4200 bytes do not fit 4000"
    );
    assert_eq!(p.s.stats().reneged, 0);
}

/// The a_rwnd of the first SACK in `out`.
fn a_rwnd_of(out: &[Vec<u8>]) -> Option<u32> {
    out.iter().flat_map(|pk| chunks(pk)).find_map(|c| match c {
        ChunkRepr::Sack(s) => Some(s.a_rwnd),
        _ => None,
    })
}

/// A layer above that holds every message it is given (a lent stream, an Echo service): a
/// chunk filling a gap on it is judged against its room as a new one is.
struct Holding(usize);

impl Deliver for Holding {
    fn deliver(&mut self, _: Message<'_>) {}
    fn room(&self) -> usize {
        self.0
    }
    fn holds(&self, _: u16, _: u32) -> bool {
        true
    }
}

/// Pair with a_rwnd 1500 and a TSN map of 4096 whose client's next TSN, `tsn`, is lost and the
/// `n` after it received, one byte each: the map's share of a_rwnd is 1500 * (4096 - span) /
/// 2048 once the span passes half the map. With the server's tag and the last a_rwnd told.
fn map_filled(n: u32) -> (Pair, u32, u32, Option<u32>) {
    let mut p = Pair::with(|c| {
        c.a_rwnd = 1500;
        c.tsn_window = 4096;
    });
    let tsn = next_client_tsn(&mut p, t(5));
    let tag = p.s.local_tag();
    let one = [7u8; 1];
    let mut told = None;
    for start in (1..=n).step_by(64) {
        let batch: Vec<ChunkRepr<'_>> = (start..(start + 64).min(n + 1))
            .map(|off| data(tsn.wrapping_add(off), 0, true, true, true, &one))
            .collect();
        p.s.handle(t(500), &packet(C_PORT, S_PORT, tag, &batch), &mut ignore)
            .unwrap();
        told = a_rwnd_of(&drain(&mut p.s, t(500))).or(told);
    }
    (p, tag, tsn, told)
}

/// RFC 9260 §6.2: "When the receiver's advertised window is 0, the receiver MUST drop any new
/// incoming DATA chunk with a TSN larger than the largest TSN received so far". The window
/// shrinks with the TSN map's free share as well as with the layer above's room: with a small
/// a_rwnd the share rounds to 0 while a slot remains, and a chunk above the highest TSN was
/// still taken under the window of 0 told, judged by the layer's room alone (session 74's
/// review). The chunk that fills the gap, below the highest, is taken, even on a stream that
/// holds what it is given (judged by the share, it never was: the share grows only once the
/// gap is filled; a review of the fix).
#[test]
fn data_above_the_highest_tsn_is_dropped_under_a_window_of_0_6_2() {
    // The 4094 after `tsn`: one slot left, its share 1500 * 1 / 2048 = 0.
    let (mut p, tag, tsn, told) = map_filled(4094);
    assert_eq!(told, Some(0), "a window of 0 told");
    let one = [7u8; 1];
    let dropped = p.s.stats().rwnd_dropped;
    let above = packet(
        C_PORT,
        S_PORT,
        tag,
        &[data(tsn.wrapping_add(4095), 0, true, true, true, &one)],
    );
    p.s.handle(t(501), &above, &mut ignore).unwrap();
    assert_eq!(
        p.s.stats().rwnd_dropped,
        dropped + 1,
        "above the highest TSN: dropped"
    );
    let out = drain(&mut p.s, t(501));
    let sack = the_sack(&out);
    assert_eq!(sack.cum_tsn_ack, tsn.wrapping_sub(1));
    let gap = packet(
        C_PORT,
        S_PORT,
        tag,
        &[data(tsn, 0, true, true, true, &[5; 100])],
    );
    p.s.handle(t(502), &gap, &mut Holding(1500)).unwrap();
    let out = drain(&mut p.s, t(502));
    let sack = the_sack(&out);
    assert_eq!(
        sack.cum_tsn_ack,
        tsn.wrapping_add(4094),
        "the gap filled, the dropped one not taken"
    );
    assert_eq!(p.s.stats().rwnd_dropped, dropped + 1);
    assert!(sack.a_rwnd > 0, "the window open again");
}

/// RFC 9260 §6.2's MUST with fragments held: the window told is the map's share less the
/// fragments held for reassembly, so a share above 0 but no larger than them is a window of 0
/// too, and a whole chunk above the highest TSN is dropped. The share alone was asked (the
/// session's last review): a chunk was taken under a window of 0 told.
#[test]
fn data_above_the_highest_tsn_is_dropped_while_fragments_fill_the_window_6_2() {
    // The 4091 after `tsn`: a share of 1500 * 4 / 2048 = 2 bytes.
    let (mut p, tag, tsn, told) = map_filled(4091);
    assert_eq!(told, Some(2));
    let fragment = packet(
        C_PORT,
        S_PORT,
        tag,
        &[data(
            tsn.wrapping_add(4092),
            0,
            true,
            true,
            false,
            &[8; 300],
        )],
    );
    p.s.handle(t(501), &fragment, &mut ignore).unwrap();
    let out = drain(&mut p.s, t(501));
    assert_eq!(a_rwnd_of(&out), Some(0), "300 bytes held, a share of 2");
    let dropped = p.s.stats().rwnd_dropped;
    let above = packet(
        C_PORT,
        S_PORT,
        tag,
        &[data(tsn.wrapping_add(4093), 0, true, true, true, &[9; 1])],
    );
    p.s.handle(t(502), &above, &mut ignore).unwrap();
    assert_eq!(
        p.s.stats().rwnd_dropped,
        dropped + 1,
        "taken under a window of 0 told"
    );
}

/// RFC 9260 §6.2's MUST is for a window of 0. A share of the map above 0 but below a chunk's
/// size, with slots left, can be less than the window the peer was last told (small chunks and
/// large ones mixed): the chunk is within what the peer may send, and taken.
#[test]
fn a_small_share_of_the_map_is_not_a_closed_window_6_2() {
    // The 4092 after `tsn`: three slots left, a share of 1500 * 3 / 2048 = 2 bytes.
    let (mut p, tag, tsn, told) = map_filled(4092);
    assert_eq!(told, Some(2));
    let dropped = p.s.stats().rwnd_dropped;
    let above = packet(
        C_PORT,
        S_PORT,
        tag,
        &[data(tsn.wrapping_add(4093), 0, true, true, true, &[6; 100])],
    );
    p.s.handle(t(501), &above, &mut ignore).unwrap();
    assert_eq!(
        p.s.stats().rwnd_dropped,
        dropped,
        "a 100-byte chunk, slots left: taken"
    );
    let out = drain(&mut p.s, t(501));
    let sack = the_sack(&out);
    let last = sack.gap_ack_blocks.iter().map(|b| b.end).max();
    // Gap Ack Block offsets count from the cumulative TSN ack, `tsn` - 1.
    assert_eq!(last, Some(4094), "recorded: the gap block reaches it");
}

/// §6.2's MUST for a fragment too: above the highest TSN under a window of 0 (the map's share
/// 0), it is dropped, not held for reassembly.
#[test]
fn a_fragment_above_the_highest_tsn_is_dropped_under_a_window_of_0_6_2() {
    let (mut p, tag, tsn, told) = map_filled(4094);
    assert_eq!(told, Some(0));
    let dropped = p.s.stats().rwnd_dropped;
    let first = packet(
        C_PORT,
        S_PORT,
        tag,
        &[data(
            tsn.wrapping_add(4095),
            0,
            true,
            true,
            false,
            &[8; 300],
        )],
    );
    p.s.handle(t(501), &first, &mut ignore).unwrap();
    assert_eq!(p.s.stats().rwnd_dropped, dropped + 1, "dropped");
    let out = drain(&mut p.s, t(501));
    let last = the_sack(&out).gap_ack_blocks.iter().map(|b| b.end).max();
    assert_eq!(
        last,
        Some(4095),
        "not recorded: the block ends at tsn + 4094"
    );
}

/// RFC 9260 §6.2's window update: a receiver whose layer above frees room tells the peer at
/// once, once. Here the window stays low for another reason (fragments held for reassembly,
/// §6.9, take a_rwnd until their message is whole): room given back by the layer above does
/// not reopen it, so no update is owed, however often the room is told. An update per telling
/// was a SACK storm: the runtime tells the room before every transmit opportunity.
#[test]
fn no_window_update_while_reassembly_holds_the_window_6_2() {
    let mut p = Pair::new();
    let tsn = next_client_tsn(&mut p, t(5));
    let tag = p.s.local_tag();
    let budget = cfg(S_PORT).a_rwnd as usize;
    // A message's first fragments, three quarters of a_rwnd and more, its end never sent.
    let fragment = [5u8; 1600];
    let n = (budget * 3 / 4) / fragment.len() + 1;
    let mut last = None;
    for k in 0..n {
        let pkt = packet(
            C_PORT,
            S_PORT,
            tag,
            &[data(tsn + k as u32, 0, true, k == 0, false, &fragment)],
        );
        p.s.handle(t(500), &pkt, &mut ignore).unwrap();
        last = a_rwnd_of(&drain(&mut p.s, t(500))).or(last);
    }
    p.tick(t(800));
    last = a_rwnd_of(&drain(&mut p.s, t(800))).or(last);
    let told = last.expect("the fragments were acknowledged") as usize;
    assert!(
        told < budget / 4,
        "a_rwnd {told}: the held fragments take the window"
    );
    for k in 0..4 {
        p.s.set_receive_room(budget);
        let out = drain(&mut p.s, t(801 + k));
        assert!(
            out.is_empty(),
            "telling {k}: no window update while the window stays low ({} packets)",
            out.len()
        );
    }
}

/// A layer above that can take `.0` more bytes, whatever it is given.
struct Room(usize);

impl Deliver for Room {
    fn deliver(&mut self, _: Message<'_>) {}
    fn room(&self) -> usize {
        self.0
    }
}

/// A pair whose server told the client a window of `room`: one 100-byte message taken by a
/// layer above with that much room left, its SACK delayed and sent (RFC 9260 §6.2). With the
/// server's tag and the message's TSN.
fn told_a_window(room: usize) -> (Pair, u32, u32) {
    let mut p = Pair::new();
    let tsn = next_client_tsn(&mut p, t(5));
    let tag = p.s.local_tag();
    let pkt = packet(
        C_PORT,
        S_PORT,
        tag,
        &[data(tsn, 0, true, true, true, &[1; 100])],
    );
    p.s.handle(t(500), &pkt, &mut Room(room)).unwrap();
    p.tick(t(800));
    assert_eq!(a_rwnd_of(&drain(&mut p.s, t(800))), Some(room as u32));
    (p, tag, tsn)
}

/// RFC 9260 §6.2: the receiver's window follows SWS avoidance "similar to" RFC 1122
/// §4.2.3.3, whose right edge moves once it can move by min(RCV.BUFF/2, MSS). A window told
/// near 0 reopened by an update only once half the buffer was free: with less freed, the peer
/// waited for its zero window probe's T3-rtx (an independent review). One update a step: told
/// again the same room, nothing more goes.
#[test]
fn a_window_told_near_zero_is_updated_once_a_packet_fits_6_2() {
    let budget = cfg(S_PORT).a_rwnd as usize;
    // The layer above keeps what it is given: 100 bytes of room told.
    let (mut p, ..) = told_a_window(100);
    // The step is one packet (the path MTU, below half the buffer): a byte short, nothing.
    p.s.set_receive_room(100 + MTU - 1);
    assert!(
        drain(&mut p.s, t(801)).is_empty(),
        "less than a packet more"
    );
    p.s.set_receive_room(100 + MTU);
    let update = a_rwnd_of(&drain(&mut p.s, t(801)));
    assert_eq!(update, Some((100 + MTU) as u32), "a packet more");
    // Told the same room again, still below a quarter of the buffer: nothing more.
    p.s.set_receive_room(100 + MTU);
    assert!(drain(&mut p.s, t(801)).is_empty(), "one update a step");
    // Less than half the buffer freed, but far more than a packet: updated again.
    let freed = budget / 2 - 1;
    p.s.set_receive_room(freed);
    let update = a_rwnd_of(&drain(&mut p.s, t(801)));
    assert_eq!(update, Some(freed as u32), "a window update");
    // Told again: nothing more (the runtime tells the room every transmit opportunity).
    p.s.set_receive_room(freed);
    assert!(drain(&mut p.s, t(802)).is_empty());
}

/// RFC 9260 §6.2's SWS avoidance measures the right edge the peer knows (its cumulative ack
/// plus the window told), RFC 1122 §4.2.3.3: DATA taken since the last SACK moved it as much
/// as room freed. A window of 1000 told, a 900-byte message taken (its SACK delayed) and
/// held, then 1800 bytes freed: the edge moved 1800, more than a packet, and the update goes.
/// Counting the room alone (1900 against 1000 told) held it back, and the peer, its window
/// used up, waited for the delayed SACK (an independent review).
#[test]
fn data_taken_since_the_last_sack_moves_the_right_edge_too_6_2() {
    let (mut p, tag, tsn) = told_a_window(1000);
    let pkt = packet(
        C_PORT,
        S_PORT,
        tag,
        &[data(tsn.wrapping_add(1), 0, true, true, true, &[2; 900])],
    );
    p.s.handle(t(801), &pkt, &mut Room(1000)).unwrap();
    assert!(
        drain(&mut p.s, t(801)).is_empty(),
        "one packet since the SACK: delayed (§6.2)"
    );
    // The layer above holds the message: 100 bytes left, the edge where it was.
    p.s.set_receive_room(100);
    assert!(drain(&mut p.s, t(801)).is_empty(), "the edge has not moved");
    p.s.set_receive_room(1900);
    assert_eq!(
        a_rwnd_of(&drain(&mut p.s, t(802))),
        Some(1900),
        "the edge moved by 900 taken + 1900 free - 1000 told"
    );
    p.s.set_receive_room(1900);
    assert!(drain(&mut p.s, t(802)).is_empty(), "one update a step");
    // Updates go only while the window the peer knows is below a quarter of the buffer; it
    // is what was told less what was sent into it since: 33000 told, 900 taken, 32100 left.
    // With nothing taken, 33000 is above the quarter: a packet more freed tells nothing.
    let told = cfg(S_PORT).a_rwnd as usize / 4 + 232;
    let (mut p, ..) = told_a_window(told);
    p.s.set_receive_room(told + MTU);
    assert!(
        drain(&mut p.s, t(801)).is_empty(),
        "above a quarter: no update"
    );
    let (mut p, tag, tsn) = told_a_window(told);
    let pkt = packet(
        C_PORT,
        S_PORT,
        tag,
        &[data(tsn.wrapping_add(1), 0, true, true, true, &[2; 900])],
    );
    p.s.handle(t(801), &pkt, &mut Room(told - 900)).unwrap();
    assert!(drain(&mut p.s, t(801)).is_empty());
    p.s.set_receive_room(told - 900 + MTU);
    assert_eq!(
        a_rwnd_of(&drain(&mut p.s, t(802))),
        Some((told - 900 + MTU) as u32),
        "{} left of the window told, below a quarter",
        told - 900
    );
}

/// RFC 9260 §5.2.4 case A: a restart's new incarnation was told the configured a_rwnd in the
/// INIT ACK, so a window update is measured from that, not from the old incarnation's last
/// SACK. A small window told to the old peer made the new one an unasked SACK (a cumulative
/// ack of its initial TSN - 1) at the next telling of the room (an independent review).
#[test]
fn a_restart_measures_window_updates_from_the_new_incarnations_window_5_2_4_a() {
    let (mut p, ..) = told_a_window(100);
    let mut cep2 = endpoint(C_PORT, 9);
    let mut c2 = cep2.connect(t(900), S_ADDR, S_PORT);
    for step in 900..904u64 {
        let now = t(step);
        for pk in drain(&mut c2, now) {
            let _ = p.s.handle(now, &pk, &mut ignore);
        }
        for pk in drain(&mut p.s, now) {
            let _ = c2.handle(now, &pk, &mut ignore);
        }
    }
    assert_eq!(c2.state(), State::Established);
    assert!(events(&mut p.s)
        .iter()
        .any(|e| matches!(e, Event::Restarted { .. })));
    // A packet more than the old incarnation was told, far less than the new one was.
    p.s.set_receive_room(100 + MTU);
    let out = drain(&mut p.s, t(905));
    assert_eq!(a_rwnd_of(&out), None, "an update nobody needs: {out:?}");
}

/// RFC 9260 §9.2: a peer that sent SHUTDOWN sends no new DATA, so a window update serves
/// nothing there; it went in SHUTDOWN-RECEIVED and SHUTDOWN-ACK-SENT as in ESTABLISHED (an
/// independent review).
#[test]
fn no_window_update_after_the_peers_shutdown_9_2() {
    let (mut p, ..) = told_a_window(100);
    p.c.shutdown(t(801));
    for pk in drain(&mut p.c, t(801)) {
        let _ = p.s.handle(t(801), &pk, &mut Room(100));
    }
    let out = drain(&mut p.s, t(801));
    assert!(
        out.iter()
            .any(|pk| has(&chunks(pk), |c| matches!(c, ChunkRepr::ShutdownAck))),
        "the SHUTDOWN answered: {out:?}"
    );
    assert_eq!(p.s.state(), State::ShutdownAckSent);
    p.s.set_receive_room(cfg(S_PORT).a_rwnd as usize);
    let out = drain(&mut p.s, t(802));
    assert_eq!(
        a_rwnd_of(&out),
        None,
        "a window update after SHUTDOWN: {out:?}"
    );
    // Our own SHUTDOWN sent, the peer's not: it may still send DATA, and is told.
    let (mut p, ..) = told_a_window(100);
    p.s.shutdown(t(801));
    let out = drain(&mut p.s, t(801));
    assert!(out
        .iter()
        .any(|pk| has(&chunks(pk), |c| matches!(c, ChunkRepr::Shutdown(_)))));
    assert_eq!(p.s.state(), State::ShutdownSent);
    p.s.set_receive_room(100 + MTU);
    assert_eq!(
        a_rwnd_of(&drain(&mut p.s, t(802))),
        Some((100 + MTU) as u32),
        "SHUTDOWN-SENT: the peer still sends"
    );
}

/// `chunk` from the client to the server at `ms` (with the server's tag): what the server sends
/// in return.
fn to_server(p: &mut Pair, tag: u32, chunk: ChunkRepr<'_>, ms: u64) -> Vec<Vec<u8>> {
    let pkt = packet(C_PORT, S_PORT, tag, &[chunk]);
    let _ = p.s.handle(t(ms), &pkt, &mut ignore);
    drain(&mut p.s, t(ms))
}

/// The next TSN the client of `p` sends: one message crosses first and its TSN is read.
fn next_client_tsn(p: &mut Pair, now: Instant) -> u32 {
    p.c.send(0, 16, b"first").unwrap();
    let log = p.exchange(now, |_, _| true);
    let tsn = log
        .iter()
        .filter(|(to_server, _)| *to_server)
        .flat_map(|(_, pk)| chunks(pk))
        .find_map(|c| match c {
            ChunkRepr::Data(d) => Some(d.tsn),
            _ => None,
        })
        .unwrap();
    // Its SACK may be delayed (§6.2): let it come, so the client has nothing outstanding.
    let later = now + Duration::from_millis(300);
    p.tick(later);
    p.exchange(later, |_, _| true);
    tsn.wrapping_add(1)
}

/// RFC 9260 §9.2: the peer sends SHUTDOWN once all its DATA is acknowledged and MUST NOT send
/// new DATA after it. DATA that comes anyway, in SHUTDOWN-RECEIVED (we still have data
/// outstanding) and in SHUTDOWN-ACK-SENT, is discarded unacknowledged and counted (usrsctp
/// and the conformance purposes do the same).
#[test]
fn data_after_the_peers_shutdown_is_discarded_9_2() {
    for outstanding in [true, false] {
        let mut p = Pair::new();
        let tsn = next_client_tsn(&mut p, t(5));
        if outstanding {
            // The server's own message is lost: it cannot finish its side of the shutdown.
            p.s.send(0, 16, b"lost").unwrap();
            let _ = drain(&mut p.s, t(406));
        }
        p.c.shutdown(t(407));
        // Only the client's packets cross: the server's answers are lost.
        p.exchange(t(407), |to_server, _| to_server);
        let want = if outstanding {
            State::ShutdownReceived
        } else {
            State::ShutdownAckSent
        };
        assert_eq!(p.s.state(), want);
        let before = p.got_s.len();
        let late = packet(
            C_PORT,
            S_PORT,
            p.s.local_tag(),
            &[data(tsn, 0, true, true, true, b"after SHUTDOWN")],
        );
        let mut got = 0;
        let _ = p.s.handle(t(408), &late, &mut |_: Message<'_>| got += 1);
        assert_eq!(
            (got, p.got_s.len()),
            (0, before),
            "{want:?}: nothing delivered"
        );
        let out = drain(&mut p.s, t(408));
        assert!(
            !out.iter()
                .flat_map(|pk| chunks(pk))
                .any(|c| matches!(c, ChunkRepr::Sack(_))),
            "{want:?}: the DATA is not acknowledged"
        );
        assert_eq!(p.s.stats().data_after_shutdown, 1, "{want:?}");
        assert_eq!(p.s.state(), want);
    }
}

/// §8.4 rule 5 at the endpoint: a SHUTDOWN ACK under the tag of an association it still
/// counts live is answered (SHUTDOWN COMPLETE, T bit, the tag reflected), where any other
/// packet under that tag is dropped as from another of the peer's addresses. The association
/// has just closed (its SHUTDOWN COMPLETE lost) and the control thread has not yet heard of
/// it, which waits for the ULP: the peer's retransmitted SHUTDOWN ACKs were dropped and it
/// ended at Association.Max.Retrans, unreachable (an independent review).
#[test]
fn a_shutdown_ack_under_a_live_tag_is_answered_8_4_rule_5() {
    let mut sep = endpoint(S_PORT, 2);
    let tag = 0x1234_5678;
    sep.note_live(tag, C_PORT);
    let mut out = vec![0u8; 1500];
    let hb = packet(
        C_PORT,
        S_PORT,
        tag,
        &[ChunkRepr::Heartbeat(HeartbeatRepr {
            info: &[1; 8],
            extra: &[],
        })],
    );
    assert!(matches!(
        sep.handle(t(1), C_ADDR, &hb, &mut out, &mut ignore),
        Outcome::Ignored(Ignored::OtherPeerAddress)
    ));
    let ack = packet(C_PORT, S_PORT, tag, &[ChunkRepr::ShutdownAck]);
    let Outcome::Reply(n) = sep.handle(t(2), C_ADDR, &ack, &mut out, &mut ignore) else {
        panic!("the SHUTDOWN ACK is not answered")
    };
    assert_eq!(vtag(&out[..n]), tag, "the tag reflected");
    assert!(matches!(
        chunks(&out[..n])[..],
        [ChunkRepr::ShutdownComplete(ShutdownCompleteRepr {
            t_bit: true
        })]
    ));
}

/// §9.2: "The sender of the SHUTDOWN ACK chunk SHOULD limit the number of retransmissions of
/// the SHUTDOWN ACK chunk to the protocol parameter 'Association.Max.Retrans'." A peer that
/// repeats its SHUTDOWN more often than our RTO, our SHUTDOWN ACKs never reaching it, is
/// answered each time, but its SHUTDOWNs do not restart T2: the association ends at
/// Association.Max.Retrans. Each SHUTDOWN restarted T2, which then never expired, and the
/// association stayed in SHUTDOWN-ACK-SENT for as long as the SHUTDOWNs came (an independent
/// review).
#[test]
fn repeated_shutdowns_do_not_hold_shutdown_ack_sent_open_9_2() {
    let mut p = Pair::new();
    p.c.shutdown(t(407));
    let shutdown = drain(&mut p.c, t(407));
    assert_eq!(shutdown.len(), 1);
    p.s.handle(t(407), &shutdown[0], &mut ignore).unwrap();
    assert_eq!(p.s.state(), State::ShutdownAckSent);
    let mut now = t(407);
    let mut answers = 0;
    for _ in 0..2000 {
        if p.s.is_closed() {
            break;
        }
        now += Duration::from_millis(50);
        if p.s.poll_timeout().is_some_and(|at| at <= now) {
            p.s.handle_timeout(now);
        }
        let _ = p.s.handle(now, &shutdown[0], &mut ignore);
        // Every SHUTDOWN ACK is lost.
        answers += drain(&mut p.s, now).len();
    }
    assert!(answers > 0, "the repeated SHUTDOWNs are answered");
    assert!(
        p.s.is_closed(),
        "still {:?} after 100 s of repeated SHUTDOWNs",
        p.s.state()
    );
    assert!(events(&mut p.s).contains(&Event::Closed(CloseReason::Unreachable)));
}

/// RFC 5043 §9 forbids SCTP fragmentation only "unless the alternative is IP fragmentation":
/// a segment a small-MTU path split into DATA fragments is reassembled (RFC 9260 §6.9), in
/// whatever order its fragments come, and delivered once, whole; until then its bytes count
/// against the advertised a_rwnd (§6.2). Issue 16 finding 8: any fragment used to abort.
#[test]
fn fragmented_data_is_reassembled_5043_9() {
    let mut p = Pair::new();
    let tsn = next_client_tsn(&mut p, t(5));
    let tag = p.s.local_tag();
    let before = p.got_s.len();
    // A message of three 300-byte fragments (a, b, c); the last comes first.
    let (a, b, c) = ([b'a'; 300], [b'b'; 300], [b'c'; 300]);
    let frags = [
        (tsn + 2, false, true, &c[..]),
        (tsn, true, false, &a[..]),
        (tsn + 1, false, false, &b[..]),
    ];
    let mut got: Vec<(u32, Vec<u8>)> = Vec::new();
    for (k, (n, b, e, bytes)) in frags.into_iter().enumerate() {
        let pkt = packet(C_PORT, S_PORT, tag, &[data(n, 0, true, b, e, bytes)]);
        let now = t(500 + k as u64);
        p.s.handle(now, &pkt, &mut |m: Message<'_>| {
            got.push((m.tsn, m.data.to_vec()))
        })
        .unwrap();
        if k == 1 {
            // Two fragments held: the SACK (at once: a gap is open) says 600 bytes less room.
            let out = drain(&mut p.s, now);
            let sack = out
                .iter()
                .flat_map(|pk| chunks(pk))
                .find_map(|c| match c {
                    ChunkRepr::Sack(s) => Some(s.a_rwnd),
                    _ => None,
                })
                .expect("a SACK while a gap is open");
            assert_eq!(sack, cfg(S_PORT).a_rwnd - 600);
        }
    }
    assert_eq!(
        got,
        vec![(tsn, [&a[..], &b[..], &c[..]].concat())],
        "one message, whole, once"
    );
    assert_eq!(p.got_s.len(), before);
    assert_eq!(p.s.state(), State::Established);
    assert_eq!((p.s.stats().fragments_in, p.s.stats().reassembled), (3, 1));
}

/// RFC 9260 §7.2.4 step 3: only the packet carrying a fast retransmission may ignore cwnd. A
/// chunk marked by Fast Retransmit whose T3-rtx retransmission is acknowledged before the fast
/// one goes takes the leave with it, though chunks T3-rtx marked beside it remain: the next of
/// those is a T3-rtx retransmission (found by an independent review; it went as a fast one).
#[test]
fn a_fast_retransmissions_leave_ends_with_it_beside_t3_marks_7_2_4() {
    let (mut p, tag, tsns) = outstanding(5);
    let at = p.c.poll_timeout().unwrap();
    p.c.handle_timeout(at);
    let out = drain(&mut p.c, at);
    assert!(carries(&out, tsns[0]));
    let (fast0, t30) = (p.c.stats().fast_retransmits, p.c.stats().t3_retransmits);
    three_misses_for_the_first(&mut p, tag, tsns[0], at);
    // tsns[0] is now marked for fast retransmission; tsns[4] is still T3-marked. tsns[0]'s
    // T3 retransmission arrives before the fast one goes.
    p.c.handle(at, &sack_to_client(tag, tsns[3], &[]), &mut ignore)
        .unwrap();
    let out = drain(&mut p.c, at);
    assert!(carries(&out, tsns[4]));
    assert_eq!(
        (
            p.c.stats().fast_retransmits - fast0,
            p.c.stats().t3_retransmits - t30
        ),
        (0, 1),
        "tsns[4] is a T3-rtx retransmission, not a fast one"
    );
}

/// RFC 8899 §4.3 black hole detection against §6.1 A zero window probing: a peer whose window
/// stays 0 answers each retransmitted 1400-byte probe with a SACK that acknowledges nothing.
/// Its T3-rtx expiries do not count against the association (§6.1 A), and they are no black
/// hole either: the SACK says the large packet arrived. Three of them took the path MTU down
/// to BASE_PLPMTU.
#[test]
fn a_peer_answering_zero_window_probes_is_no_black_hole_rfc8899_4_3() {
    let mut p = Pair::new();
    for _ in 0..2 {
        p.c.send(0, 16, &[9; 1000]).unwrap();
    }
    let log = p.exchange(t(5), |_, _| true);
    let (_, to_client) = log.iter().find(|(to_s, _)| !to_s).unwrap();
    let tag = vtag(to_client);
    let mtu = p.c.path_mtu();
    p.c.send(0, 16, &[1; 1400]).unwrap();
    let mut tsn = None;
    for pk in drain(&mut p.c, t(10)) {
        for c in chunks(&pk) {
            if let ChunkRepr::Data(d) = c {
                tsn = Some(d.tsn);
            }
        }
    }
    let zero = packet(
        S_PORT,
        C_PORT,
        tag,
        &[ChunkRepr::Sack(SackRepr {
            cum_tsn_ack: tsn.unwrap().wrapping_sub(1),
            a_rwnd: 0,
            gap_ack_blocks: List::new(&[]),
            dup_tsns: List::new(&[]),
        })],
    );
    let mut now = t(10);
    p.c.handle(now, &zero, &mut ignore).unwrap();
    for _ in 0..8 {
        now = p.c.poll_timeout().unwrap();
        p.c.handle_timeout(now);
        drain(&mut p.c, now);
        p.c.handle(now, &zero, &mut ignore).unwrap();
    }
    assert!(p.c.stats().t3_expiries >= 3, "{}", p.c.stats().t3_expiries);
    assert_eq!(p.c.state(), State::Established);
    assert_eq!(p.c.path_mtu(), mtu, "no black hole");
}

/// RFC 8899 §4.3 with RFC 9260 §8.1: three T3-rtx expiries in a row of a large packet are a
/// black hole, but an association whose Association.Max.Retrans is 2 ends at the third. A
/// silent 1200-byte hop (DF packets above it dropped, no ICMP) then ended it with the
/// 1400-byte chunk never through; the black hole is now found at the second expiry, the
/// chunk crosses fragmented (here: delivered once the path MTU says it goes without DF) and
/// the association lives.
#[test]
fn a_black_hole_is_found_before_a_short_max_retrans_ends_the_association_rfc8899_4_3() {
    let mut p = Pair::with(|c| c.assoc_max_retrans = 2);
    p.c.send(0, 16, &[1; 1400]).unwrap();
    let mut now = t(10);
    for _ in 0..8 {
        let df = p.c.path_mtu() > 1200;
        p.exchange(now, |to_server, pk| !(to_server && df && pk.len() > 1200));
        if p.got_s.iter().any(|(_, _, m)| m.len() == 1400) {
            break;
        }
        let Some(next) = p.c.poll_timeout() else {
            break;
        };
        now = next;
        p.tick(now);
    }
    assert_eq!(p.c.state(), State::Established, "the association lives");
    assert_eq!(p.c.path_mtu(), 1200, "the black hole found");
    assert_eq!(p.c.stats().t3_expiries, 2, "at Max.Retrans's second expiry");
    assert!(
        p.got_s.iter().any(|(_, _, m)| m.len() == 1400),
        "the message got through"
    );
}

/// RFC 8899 §4.3 ("excessive loss of data sent with a specific packet size"): a silent hop
/// drops the 1400-byte chunk each time it goes, while small messages sent beside it arrive
/// and are gap-acknowledged. Those acknowledgements clear the error counter (§8.1), and they
/// also cleared the T3-rtx expiries counted in a row: the black hole was never found, and the
/// large chunk went again and again for good.
#[test]
fn small_chunks_gap_acked_beside_a_lost_large_one_do_not_hide_a_black_hole_rfc8899_4_3() {
    let mut p = Pair::new();
    for _ in 0..2 {
        p.c.send(0, 16, &[9; 1000]).unwrap();
    }
    let log = p.exchange(t(5), |_, _| true);
    let (_, to_client) = log.iter().find(|(to_s, _)| !to_s).unwrap();
    let tag = vtag(to_client);
    let tsns = |out: Vec<Vec<u8>>| -> Vec<u32> {
        out.iter()
            .flat_map(|pk| {
                chunks(pk)
                    .into_iter()
                    .filter_map(|c| match c {
                        ChunkRepr::Data(d) => Some(d.tsn),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    p.c.send(0, 16, &[1; 1400]).unwrap();
    let big = tsns(drain(&mut p.c, t(10)))[0];
    let cum = big.wrapping_sub(1);
    let mut small = 0u16;
    let mut now = t(10);
    for _ in 0..6 {
        // A small message beside the lost one arrives; the peer's SACK gap-acks it.
        p.c.send(0, 16, &[2; 100]).unwrap();
        small += tsns(drain(&mut p.c, now))
            .iter()
            .filter(|&&x| x != big)
            .count() as u16;
        if small > 0 {
            let sack = sack_to_client(tag, cum, &[(2, 1 + small)]);
            p.c.handle(now, &sack, &mut ignore).unwrap();
            drain(&mut p.c, now);
        }
        now = p.c.poll_timeout().unwrap();
        p.c.handle_timeout(now);
        drain(&mut p.c, now);
    }
    assert!(small > 0, "small messages went beside the large one");
    assert!(p.c.stats().t3_expiries >= 3, "{}", p.c.stats().t3_expiries);
    assert_eq!(p.c.path_mtu(), 1200, "the black hole found");
}

// ---------------------------------------------------------------------------------------
// An independent review (session 60): RFC 9260 §3.2, §3.3, §6.5, §6.9, §6.10, §8.1-§8.3
// ---------------------------------------------------------------------------------------

/// A chunk of type `ty` with `value` as its value, written as is (any type, known or not).
fn raw_chunk(ty: u8, flags: u8, value: &[u8]) -> ChunkRepr<'_> {
    ChunkRepr::Unknown(UnknownChunkRepr {
        chunk_type: ty,
        flags,
        value,
    })
}

/// A TLV (parameter or cause): type, length, value, padded to 4 bytes.
fn tlv(ty: u16, value: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&ty.to_be_bytes());
    v.extend_from_slice(&((4 + value.len()) as u16).to_be_bytes());
    v.extend_from_slice(value);
    while v.len() % 4 != 0 {
        v.push(0);
    }
    v
}

/// §8.3: "The receiver of the HEARTBEAT chunk SHOULD immediately respond with a HEARTBEAT ACK
/// chunk that contains the Heartbeat Information TLV, together with any other received TLVs,
/// copied unchanged from the received HEARTBEAT chunk." A HEARTBEAT whose Heartbeat Info is
/// followed by another TLV is a valid HEARTBEAT and is owed an ACK carrying both TLVs.
#[test]
fn a_heartbeat_with_other_tlvs_is_answered_with_them_copied_8_3() {
    let mut p = Pair::new();
    let tag = p.s.local_tag();
    let mut value = tlv(1, &[0x5a; 16]);
    value.extend_from_slice(&tlv(0x8123, b"more"));
    let pkt = packet(C_PORT, S_PORT, tag, &[raw_chunk(4, 0, &value)]);
    p.s.handle(t(5), &pkt, &mut ignore).unwrap();
    let out = drain(&mut p.s, t(5));
    let acks: Vec<Vec<u8>> = out
        .iter()
        .flat_map(|o| {
            Packet::new_verified(&o[..])
                .unwrap()
                .chunks_ref()
                .map(|c| c.unwrap())
                .filter(|c| u8::from(c.chunk_type()) == 5)
                .map(|c| c.value_ref().to_vec())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        acks,
        vec![value.clone()],
        "one HEARTBEAT ACK echoing every TLV (malformed counted: {})",
        p.s.stats().malformed
    );
}

/// The value of every HEARTBEAT ACK in `out`, whole (Heartbeat Info and the TLVs after it).
fn heartbeat_acks(out: &[Vec<u8>]) -> Vec<Vec<u8>> {
    out.iter()
        .flat_map(|o| {
            Packet::new_verified(&o[..])
                .unwrap()
                .chunks_ref()
                .map(|c| c.unwrap())
                .filter(|c| u8::from(c.chunk_type()) == 5)
                .map(|c| c.value_ref().to_vec())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// §8.3 again: the Heartbeat Information is the sender's to size, and TLVs may follow it (an
/// RFC 8899 probe's padding among them). Whatever one packet of the path MTU carries, the ACK,
/// as long as the HEARTBEAT, fits a packet back. Fixed 512-byte buffers left a HEARTBEAT of
/// more unanswered (found by session 60's review), and the peer counted each against
/// Path.Max.Retrans.
#[test]
fn a_heartbeat_of_1400_bytes_of_tlvs_is_answered_8_3() {
    let mut p = Pair::new();
    let tag = p.s.local_tag();
    let mtu = p.s.path_mtu();
    let mem = p.s.memory();
    // 1400 bytes of TLVs: a Heartbeat Info of 1000 bytes and one of 400 after it.
    let mut value = tlv(1, &[0x5a; 996]);
    value.extend_from_slice(&tlv(0x8123, &[0x7e; 396]));
    assert_eq!(value.len(), 1400);
    // And a HEARTBEAT that fills a whole packet of the path MTU.
    let full = tlv(1, &[0x11; 1480 - 12 - 4 - 4]);
    assert_eq!(12 + 4 + full.len(), mtu);
    for (i, v) in [value, full].into_iter().enumerate() {
        let now = t(5 + i as u64);
        let pkt = packet(C_PORT, S_PORT, tag, &[raw_chunk(4, 0, &v)]);
        p.s.handle(now, &pkt, &mut ignore).unwrap();
        let out = drain(&mut p.s, now);
        assert_eq!(heartbeat_acks(&out), vec![v.clone()], "{} bytes", v.len());
        assert!(out.iter().all(|o| o.len() <= mtu));
    }
    assert_eq!(p.s.memory(), mem, "association memory grew");
}

/// As above on a jumbo link (`--mtu 9000`): a HEARTBEAT filling an 8980-byte SCTP packet is
/// answered whole.
#[test]
fn a_heartbeat_filling_a_jumbo_packet_is_answered_8_3() {
    let mut p = Pair::with(|c| c.path_mtu = 9000 - 20);
    let tag = p.s.local_tag();
    let v = tlv(1, &[0x22; 9000 - 20 - 12 - 4 - 4]);
    let pkt = packet(C_PORT, S_PORT, tag, &[raw_chunk(4, 0, &v)]);
    assert_eq!(pkt.len(), 8980);
    p.s.handle(t(5), &pkt, &mut ignore).unwrap();
    assert_eq!(heartbeat_acks(&drain(&mut p.s, t(5))), vec![v]);
}

/// An ACK that one packet of our path MTU cannot carry is not sent (§8.3's SHOULD; §6.10: no
/// packet is larger than the PMTU, and a control chunk is never fragmented): the path MTU fell
/// after the HEARTBEAT came. It must not stay owed either, holding back the ACKs after it.
#[test]
fn a_heartbeat_ack_too_big_for_the_path_mtu_does_not_hold_back_the_next_8_3() {
    let mut p = Pair::new();
    let tag = p.s.local_tag();
    let big = tlv(1, &[0x33; 1400]);
    let small = tlv(1, &[0x44; 16]);
    let pkt = packet(C_PORT, S_PORT, tag, &[raw_chunk(4, 0, &big)]);
    p.s.handle(t(5), &pkt, &mut ignore).unwrap();
    p.s.set_path_mtu(1200);
    let out = drain(&mut p.s, t(5));
    assert!(heartbeat_acks(&out).is_empty());
    assert!(out.iter().all(|o| o.len() <= 1200));
    let pkt = packet(C_PORT, S_PORT, tag, &[raw_chunk(4, 0, &small)]);
    p.s.handle(t(6), &pkt, &mut ignore).unwrap();
    assert_eq!(heartbeat_acks(&drain(&mut p.s, t(6))), vec![small]);
}

/// RFC 9260 §3.2: a chunk of unknown type whose upper bits are 01 or 11 is reported in an
/// ERROR, Unrecognized Chunk Type, which carries the chunk whole (§3.3.10.6). Any size one
/// packet of the path MTU can report must be: 512 bytes of room left chunks over about 508
/// bytes skipped (or stopped at) but never reported (session 60's review).
#[test]
fn an_unrecognized_chunk_of_1400_bytes_is_reported_3_2() {
    let mut p = Pair::new();
    let tag = p.s.local_tag();
    let mtu = p.s.path_mtu();
    let mem = p.s.memory();
    let hb = ChunkRepr::Heartbeat(HeartbeatRepr {
        info: b"hb",
        extra: &[],
    });
    let reported = |out: &[Vec<u8>]| -> Vec<Vec<u8>> {
        out.iter()
            .flat_map(|o| {
                chunks(o)
                    .into_iter()
                    .filter_map(|c| match c {
                        ChunkRepr::Error(e) => Some(
                            e.causes
                                .iter()
                                .filter_map(|c| match c {
                                    CauseRepr::UnrecognizedChunkType { chunk } => {
                                        Some(chunk.to_vec())
                                    }
                                    _ => None,
                                })
                                .collect::<Vec<_>>(),
                        ),
                        _ => None,
                    })
                    .flatten()
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    // 1400 bytes of chunk, skipped (11) or stopping the packet (01); then the largest an
    // ERROR in one packet of the path MTU holds: 12 + 4 + 4 + 1460 = 1480.
    let largest = mtu - 12 - 4 - 4;
    let mut now = 5;
    for (ty, len, then_hb) in [
        (0xC1u8, 1400, true),
        (0x41, 1400, true),
        (0xC2, largest, false),
    ] {
        let value = vec![0xab; len - 4];
        let unknown = raw_chunk(ty, 0, &value);
        let pkt = packet(
            C_PORT,
            S_PORT,
            tag,
            &[unknown, hb][..1 + usize::from(then_hb)],
        );
        assert!(pkt.len() <= mtu);
        p.s.handle(t(now), &pkt, &mut ignore).unwrap();
        let out = drain(&mut p.s, t(now));
        now += 1;
        let mut chunk = vec![ty, 0];
        chunk.extend_from_slice(&(len as u16).to_be_bytes());
        chunk.extend_from_slice(&value);
        assert_eq!(reported(&out), vec![chunk], "type {ty:#x}, {len} bytes");
        if then_hb {
            let acked = !heartbeat_acks(&out).is_empty();
            assert_eq!(acked, ty & 0x80 != 0, "type {ty:#x}: processing after it");
        }
        assert!(out.iter().all(|o| o.len() <= mtu));
    }
    // A word more and the ERROR cannot fit a packet (§6.10): not reported, and the association
    // goes on (the next HEARTBEAT is answered).
    let value = vec![0xcd; largest];
    let pkt = packet(C_PORT, S_PORT, tag, &[raw_chunk(0xC3, 0, &value)]);
    assert!(pkt.len() <= mtu);
    p.s.handle(t(now), &pkt, &mut ignore).unwrap();
    let out = drain(&mut p.s, t(now));
    assert!(reported(&out).is_empty());
    let pkt = packet(C_PORT, S_PORT, tag, &[hb]);
    p.s.handle(t(now + 1), &pkt, &mut ignore).unwrap();
    assert_eq!(heartbeat_acks(&drain(&mut p.s, t(now + 1))).len(), 1);
    assert_eq!(p.s.memory(), mem, "association memory grew");
}

/// Parameters of unknown types 0xC1xx (report, skip): `n` of them, `value` bytes each.
fn reportable_params(n: usize, value: &[u8]) -> Vec<ParamRepr<'_>> {
    (0..n)
        .map(|i| ParamRepr::Unknown {
            param_type: 0xC100 + i as u16,
            value,
        })
        .collect()
}

/// The Unrecognized Parameter reports of an INIT ACK packet, each the parameter it reports.
fn init_ack_reports(pkt: &[u8]) -> Vec<Vec<u8>> {
    let cs = chunks(pkt);
    let ChunkRepr::InitAck(ia) = cs[0] else {
        panic!("{cs:?}")
    };
    assert!(ia.state_cookie().is_some(), "the State Cookie is kept");
    ia.0.params
        .iter()
        .filter_map(|p| match p {
            ParamRepr::UnrecognizedParameter(b) => Some(b.to_vec()),
            _ => None,
        })
        .collect()
}

/// Each parameter's wire form.
fn wire(params: &[ParamRepr<'_>]) -> Vec<Vec<u8>> {
    params
        .iter()
        .map(|p| {
            let mut b = vec![0; p.buffer_len()];
            p.emit(&mut b);
            b.truncate(p.param_len());
            b
        })
        .collect()
}

/// RFC 9260 §3.2.2: the receiver of an INIT "MUST put the 'Unrecognized Parameter'
/// parameter(s) in the INIT ACK" for every parameter whose type asks for a report (§3.2.1),
/// not the first 8 or 512 bytes of them (session 60's review) - the endpoint's INIT ACK and
/// an association's (§5.2.2) alike. What one packet of the path MTU cannot hold beside the
/// State Cookie is left out, whole parameters at a time (§6.10: no packet above the PMTU).
#[test]
fn an_init_ack_reports_twenty_unrecognized_parameters_3_2_2() {
    let value = [0x5a; 28];
    let twenty = reportable_params(20, &value);
    let mut params = vec![ParamRepr::AdaptationLayerIndication(1)];
    params.extend_from_slice(&twenty);
    let init = init_chunk(0x7777, &params);
    // The endpoint's INIT ACK.
    let mut sep = endpoint(S_PORT, 2);
    let mut out = vec![0u8; 65536];
    let Outcome::Reply(n) = sep.handle(t(0), C_ADDR, &init, &mut out, &mut ignore) else {
        panic!("INIT not answered")
    };
    assert_eq!(init_ack_reports(&out[..n]), wire(&twenty));
    // An association's (§5.2.2), within its fixed memory.
    let mut p = Pair::new();
    let mem = p.s.memory();
    let _ = p.s.handle(t(5), &init, &mut ignore);
    let acks = drain(&mut p.s, t(5));
    assert_eq!(init_ack_reports(&acks[0]), wire(&twenty));
    // 60 of them (the INIT came in a larger packet, or in fragments): as many as fit a packet
    // of the path MTU, in order; the next would not have fit.
    let sixty = reportable_params(60, &value);
    let mut params = vec![ParamRepr::AdaptationLayerIndication(1)];
    params.extend_from_slice(&sixty);
    let init = init_chunk(0x7778, &params);
    let mtu = p.s.path_mtu();
    let Outcome::Reply(n) = sep.handle(t(6), C_ADDR, &init, &mut out, &mut ignore) else {
        panic!("INIT not answered")
    };
    let _ = p.s.handle(t(6), &init, &mut ignore);
    let acks = drain(&mut p.s, t(6));
    for pkt in [&out[..n], &acks[0][..]] {
        let got = init_ack_reports(pkt);
        assert!(pkt.len() <= mtu, "{} bytes", pkt.len());
        assert!(pkt.len() + 4 + 32 > mtu, "room left for another");
        assert!(got.len() > 20, "{}", got.len());
        assert_eq!(got, wire(&sixty[..got.len()]));
    }
    assert_eq!(p.s.memory(), mem, "association memory grew");
}

/// §3.2.2: the receiver of an INIT ACK reports its unrecognized parameters in an ERROR
/// "bundled" with the COOKIE ECHO: every one of them, not 4 causes' worth (session 60's
/// review found the ERROR's four slots).
#[test]
fn an_init_acks_unrecognized_parameters_are_all_reported_with_the_cookie_echo_3_2_2() {
    let mut cep = endpoint(C_PORT, 1);
    let mut c = cep.connect(t(0), S_ADDR, S_PORT);
    let init = drain(&mut c, t(0));
    let ChunkRepr::Init(i) = chunks(&init[0])[0] else {
        panic!()
    };
    let value = [0x5a; 28];
    let twenty = reportable_params(20, &value);
    let cookie = [7u8; 100];
    let mut params = vec![
        ParamRepr::AdaptationLayerIndication(1),
        ParamRepr::StateCookie(&cookie),
    ];
    params.extend_from_slice(&twenty);
    let ack = ChunkRepr::InitAck(ddpdk_dataplane::wire::sctp::InitAckRepr(InitRepr {
        initiate_tag: 0xabcd,
        a_rwnd: 65536,
        outbound_streams: 4,
        inbound_streams: 4,
        initial_tsn: 5,
        params: List::new(&params),
    }));
    c.handle(
        t(1),
        &packet(S_PORT, C_PORT, i.initiate_tag, &[ack]),
        &mut ignore,
    )
    .unwrap();
    let out = drain(&mut c, t(1));
    let cs = chunks(&out[0]);
    assert!(matches!(cs[0], ChunkRepr::CookieEcho(_)), "{cs:?}");
    let reported: Vec<u8> = cs
        .iter()
        .filter_map(|c| match c {
            ChunkRepr::Error(e) => Some(e.causes),
            _ => None,
        })
        .flat_map(|causes| causes.iter())
        .flat_map(|c| match c {
            CauseRepr::UnrecognizedParameters { params } => params.to_vec(),
            _ => Vec::new(),
        })
        .collect();
    assert_eq!(reported, wire(&twenty).concat());
}

/// §9.1: "After checking the Verification Tag, the receiving endpoint MUST remove the
/// association from its record"; §3.3.7 lets an ABORT carry zero or more error causes, and
/// nothing lets the receiver keep the association because a cause is not as §3.3.10 draws
/// it. An ABORT with the right tag whose Out of Resource cause carries 4 bytes of
/// information it should not have still ends the association.
#[test]
fn an_abort_with_a_cause_of_unexpected_length_still_ends_the_association_9_1_3_3_10() {
    let mut p = Pair::new();
    let tag = p.s.local_tag();
    // Out of Resource (4), length 8 instead of 4.
    let cause = tlv(4, &[0, 0, 0, 0]);
    let pkt = packet(C_PORT, S_PORT, tag, &[raw_chunk(6, 0, &cause)]);
    let _ = p.s.handle(t(5), &pkt, &mut ignore);
    assert!(
        p.s.is_closed(),
        "the ABORT was not taken: state {:?}, malformed {}",
        p.s.state(),
        p.s.stats().malformed
    );
}

/// §3.3.10: an ERROR carries "one or more" causes, and one whose length does not fit its
/// code's layout (Out of Resource with 4 bytes of information, its own is none; Cookie
/// Received While Shutting Down with an odd length) is still a cause that walks as a TLV.
/// Such an ERROR is taken (counted in `errors_in`, the cause kept raw and ignored) and the
/// chunks after it in its packet stand: the HEARTBEAT bundled after it is answered. It was
/// refused as malformed with the rest of its packet.
#[test]
fn an_error_with_a_cause_of_unexpected_length_keeps_the_rest_of_its_packet_3_3_10() {
    let mut p = Pair::new();
    let tag = p.s.local_tag();
    let mut causes = tlv(4, &[0, 0, 0, 0]);
    causes.extend(tlv(10, &[0xee]));
    let hb = tlv(1, &[0x5a; 8]);
    let pkt = packet(
        C_PORT,
        S_PORT,
        tag,
        &[raw_chunk(9, 0, &causes), raw_chunk(4, 0, &hb)],
    );
    let errors_before = p.s.stats().errors_in;
    p.s.handle(t(5), &pkt, &mut ignore).unwrap();
    let acks: usize = drain(&mut p.s, t(5))
        .iter()
        .map(|o| {
            chunks(o)
                .iter()
                .filter(|c| matches!(c, ChunkRepr::HeartbeatAck(_)))
                .count()
        })
        .sum();
    assert_eq!(
        (acks, p.s.stats().malformed),
        (1, 0),
        "the HEARTBEAT after the ERROR is answered, nothing is malformed"
    );
    assert_eq!(
        p.s.stats().errors_in,
        errors_before + 1,
        "the ERROR is taken"
    );
    assert_eq!(p.s.state(), State::Established);
}

/// §8.5.1 B: "Otherwise, the receiver MUST silently discard the packet and take no further
/// action" when an ABORT fails the T-bit rule (our tag with the T bit set, here); C says the
/// same of SHUTDOWN COMPLETE. The packet is discarded whole: a DATA chunk or a HEARTBEAT
/// bundled before the chunk (against §6.10 and §9.1) is not taken either, and the discard is
/// counted where the ABORT's own T-bit failure is (`bad_vtag`). The DATA before such an ABORT
/// was delivered and acknowledged. An ABORT that passes the rule after DATA still ends the
/// association with the DATA taken.
#[test]
fn a_packet_whose_abort_fails_the_t_bit_rule_is_discarded_whole_8_5_1() {
    let mut p = Pair::new();
    let ours = p.s.local_tag();
    assert_ne!(
        ours,
        p.s.peer_tag(),
        "the T-bit rule needs the two tags apart"
    );
    let cum = p.s.received_cum_tsn();
    let abort = |t_bit| {
        ChunkRepr::Abort(AbortRepr {
            t_bit,
            causes: List::empty(),
        })
    };
    let sc = ChunkRepr::ShutdownComplete(ShutdownCompleteRepr { t_bit: true });
    let hb = ChunkRepr::Heartbeat(HeartbeatRepr {
        info: &[7; 8],
        extra: &[],
    });
    let d = data(cum.wrapping_add(1), 0, true, true, true, b"taken?");
    for (i, bundle) in [
        vec![d, abort(true)],
        vec![d, d, hb, abort(true)],
        vec![hb, abort(true)],
        vec![d, sc],
        // Alone, or leading the packet: the same answer (it was Ok, counted only).
        vec![abort(true)],
        vec![sc, d],
    ]
    .iter()
    .enumerate()
    {
        let mut got = 0;
        let r = p.s.handle(
            t(5),
            &packet(C_PORT, S_PORT, ours, bundle),
            &mut |_: Message<'_>| got += 1,
        );
        assert_eq!(got, 0, "bundle {i}: nothing delivered");
        assert_eq!(p.s.received_cum_tsn(), cum, "bundle {i}: no TSN taken");
        assert_eq!(r, Err(Discard::BadVerificationTag), "bundle {i}");
        assert_eq!(p.s.stats().bad_vtag, i as u64 + 1, "bundle {i}: counted");
        assert!(
            drain(&mut p.s, t(5)).is_empty(),
            "bundle {i}: nothing answered (no SACK, no HEARTBEAT ACK)"
        );
        assert_eq!(p.s.state(), State::Established, "bundle {i}");
    }
    // Our tag without the T bit passes: the DATA before the ABORT is taken, then the ABORT.
    let mut got = 0;
    let r = p.s.handle(
        t(6),
        &packet(C_PORT, S_PORT, ours, &[d, abort(false)]),
        &mut |_: Message<'_>| got += 1,
    );
    assert_eq!((r, got), (Ok(()), 1));
    assert!(p.s.is_closed());
}

/// §3.2: an unknown chunk whose type's upper bits are 00 means "Stop processing this SCTP
/// packet; discard the unrecognized chunk and all further chunks"; the chunks before it are
/// processed. An ABORT after such a chunk is one of the chunks discarded unread, so §8.5.1 B
/// (which discards the packet whole when an ABORT fails the T-bit rule) never applies to it:
/// the DATA before the stopping chunk, under our tag, is delivered and acknowledged, exactly
/// as it is when the ABORT after the stop passes the T-bit rule or is absent. The look-ahead
/// of `fails_t_bit_rule_later` reads past the stop and throws the DATA away.
#[test]
fn an_abort_after_a_chunk_that_stops_the_packet_is_not_read_3_2_8_5_1() {
    let mut p = Pair::new();
    let ours = p.s.local_tag();
    assert_ne!(ours, p.s.peer_tag());
    let cum = p.s.received_cum_tsn();
    let d = data(cum.wrapping_add(1), 0, true, true, true, b"taken");
    let stop = raw_chunk(0x3f, 0, b"abcd");
    let bad_abort = ChunkRepr::Abort(AbortRepr {
        t_bit: true,
        causes: List::empty(),
    });
    let mut got = 0;
    let r = p.s.handle(
        t(5),
        &packet(C_PORT, S_PORT, ours, &[d, stop, bad_abort]),
        &mut |_: Message<'_>| got += 1,
    );
    assert_eq!(
        r,
        Ok(()),
        "the packet is processed up to the stopping chunk"
    );
    assert_eq!(got, 1, "the DATA before the stopping chunk is delivered");
    assert_eq!(p.s.received_cum_tsn(), cum.wrapping_add(1));
    assert_eq!(p.s.state(), State::Established);
}
