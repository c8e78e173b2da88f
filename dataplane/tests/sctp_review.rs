//! Regression tests from an independent RFC review of the association engine. Each test was
//! written to demonstrate a finding (it failed on the engine as first written) and asserts
//! what RFC 9260 / RFC 5043 require.
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use ddpdk_dataplane::sctp::{
    Association, Config, Discard, Endpoint, Event, Instant, Message, Outcome, State,
};
use ddpdk_dataplane::wire::crc32c;
use ddpdk_dataplane::wire::sctp::{
    AbortRepr, CauseRepr, ChunkRepr, DataRepr, ErrorChunkRepr, GapAckBlock, HeaderRepr,
    HeartbeatRepr, InitRepr, List, Packet, PacketBuilder, SackRepr,
};

const CP: u16 = 5001;
const SP: u16 = 5002;
fn caddr() -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1))
}
fn saddr() -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2))
}
fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn build(vtag: u32, src: u16, dst: u16, chunks: &[ChunkRepr<'_>]) -> Vec<u8> {
    let mut buf = vec![0u8; 65536];
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
    crc32c::fill(&mut buf[..n]);
    buf.truncate(n);
    buf
}

/// (vtag, [(type, flags)])
fn describe(p: &[u8]) -> (u32, Vec<(u8, u8)>) {
    let pkt = Packet::new_checked(p).unwrap();
    let v = pkt.verification_tag();
    let c = pkt
        .chunks()
        .flatten()
        .map(|c| (u8::from(c.chunk_type()), c.flags()))
        .collect();
    (v, c)
}

fn drain(a: &mut Association, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Some(n) = a.poll_transmit(now, &mut buf) {
        out.push(buf[..n].to_vec());
    }
    out
}

struct Side {
    ep: Endpoint,
    assoc: Option<Association>,
    addr: IpAddr,
    events: Vec<Event>,
    got: Vec<Vec<u8>>,
}

impl Side {
    fn new(port: u16, addr: IpAddr, secret: u8, f: impl FnOnce(&mut Config)) -> Side {
        let mut cfg = Config {
            local_port: port,
            ..Config::default()
        };
        f(&mut cfg);
        Side {
            ep: Endpoint::new(cfg, [secret; 32]).unwrap(),
            assoc: None,
            addr,
            events: Vec::new(),
            got: Vec::new(),
        }
    }
    fn state(&self) -> Option<State> {
        self.assoc.as_ref().map(|a| a.state())
    }
}

/// Zero-delay network: `drop(to_server, bytes, now)` filters packets.
struct Pair {
    now: Instant,
    c: Side,
    s: Side,
}

impl Pair {
    fn new(cf: impl FnOnce(&mut Config), sf: impl FnOnce(&mut Config)) -> Pair {
        Pair {
            now: Instant::from_nanos(1_000_000_000),
            c: Side::new(CP, caddr(), 1, cf),
            s: Side::new(SP, saddr(), 2, sf),
        }
    }

    fn deliver(&mut self, to_server: bool, bytes: &[u8], q: &mut Vec<(bool, Vec<u8>)>) {
        let now = self.now;
        let (side, from) = if to_server {
            (&mut self.s, self.c.addr)
        } else {
            (&mut self.c, self.s.addr)
        };
        let got = &mut side.got;
        let mut rx = |m: Message<'_>| got.push(m.data.to_vec());
        if let Some(a) = side.assoc.as_mut() {
            let _ = a.handle(now, bytes, &mut rx);
            return;
        }
        let mut buf = vec![0u8; 65536];
        match side.ep.handle(now, from, bytes, &mut buf, &mut rx) {
            Outcome::Reply(n) => q.push((!to_server, buf[..n].to_vec())),
            Outcome::Accepted(a) => side.assoc = Some(*a),
            Outcome::Ignored(_) => {}
        }
    }

    fn flush(&mut self, drop: &mut dyn FnMut(bool, &[u8], Instant) -> bool) {
        loop {
            let mut q: Vec<(bool, Vec<u8>)> = Vec::new();
            for to_server in [true, false] {
                let side = if to_server { &mut self.c } else { &mut self.s };
                if let Some(a) = side.assoc.as_mut() {
                    for p in drain(a, self.now) {
                        q.push((to_server, p));
                    }
                    while let Some(e) = a.poll_event() {
                        side.events.push(e);
                    }
                    if a.is_closed() {
                        side.assoc = None;
                    }
                }
            }
            if q.is_empty() {
                return;
            }
            while let Some((to_server, p)) = q.pop() {
                if drop(to_server, &p, self.now) {
                    continue;
                }
                self.deliver(to_server, &p, &mut q);
            }
        }
    }

    /// Runs timers and the network until `until` or `stop` holds.
    fn run(
        &mut self,
        until: Instant,
        drop: &mut dyn FnMut(bool, &[u8], Instant) -> bool,
        stop: &mut dyn FnMut(&Pair) -> bool,
    ) {
        loop {
            self.flush(drop);
            if stop(self) {
                return;
            }
            let next = [
                self.c.assoc.as_ref().and_then(|a| a.poll_timeout()),
                self.s.assoc.as_ref().and_then(|a| a.poll_timeout()),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next else { return };
            if next > until {
                return;
            }
            self.now = self.now.max(next);
            for side in [&mut self.c, &mut self.s] {
                if let Some(a) = side.assoc.as_mut() {
                    if a.poll_timeout().is_some_and(|t| t <= self.now) {
                        a.handle_timeout(self.now);
                    }
                }
            }
        }
    }

    fn connect(&mut self) {
        self.c.assoc = Some(self.c.ep.connect(self.now, self.s.addr, SP));
    }

    fn established(&mut self) {
        self.connect();
        self.flush(&mut |_, _, _| false);
        assert_eq!(self.c.state(), Some(State::Established));
        assert_eq!(self.s.state(), Some(State::Established));
    }
}

fn never() -> impl FnMut(bool, &[u8], Instant) -> bool {
    |_, _, _| false
}

/// RFC 9260 §8.5.1 E + §8.4 rule 5 (+ §9.2): a SHUTDOWN ACK received in COOKIE-WAIT is OOTB:
/// answer SHUTDOWN COMPLETE, T bit set, tag reflected (it used to be dropped on the tag check).
#[test]
fn shutdown_ack_in_cookie_wait_is_out_of_the_blue_8_5_1_e() {
    let mut p = Pair::new(|_| {}, |_| {});
    p.connect();
    let a = p.c.assoc.as_mut().unwrap();
    let init = drain(a, p.now);
    assert_eq!(describe(&init[0]).1[0].0, 1, "INIT first");
    let stale = build(0xDEAD_BEEF, SP, CP, &[ChunkRepr::ShutdownAck]);
    let r = a.handle(p.now, &stale, &mut |_m: Message<'_>| {});
    let out = drain(a, p.now);
    assert!(
        out.iter()
            .any(|o| describe(o) == (0xDEAD_BEEF, vec![(14, 1)])),
        "expected SHUTDOWN COMPLETE(T) with reflected tag; handle() = {r:?}, sent {:?}",
        out.iter().map(|o| describe(o)).collect::<Vec<_>>()
    );
    // Answered, not taken: nothing in it authenticates the sender (the caller confirms its
    // neighbour on `Ok`).
    assert_eq!(r, Err(Discard::OutOfTheBlue));
}

/// §8.5.1 E with §8.4 rule 5 ("If the packet contains a SHUTDOWN ACK chunk"), and §8.5.1 A:
/// in COOKIE-WAIT a SHUTDOWN ACK behind another chunk is answered as one alone is (a peer's
/// restart answer in SHUTDOWN-ACK-SENT is ERROR, then SHUTDOWN ACK: it was dropped as a bad
/// tag, and the new association waited a T1 for the peer's lone retransmission), while one
/// under tag 0 is silently discarded (it was answered, to anyone). An independent review.
#[test]
fn shutdown_ack_in_cookie_wait_anywhere_in_the_packet_and_not_under_tag_0_8_5_1() {
    let mut p = Pair::new(|_| {}, |_| {});
    p.connect();
    let a = p.c.assoc.as_mut().unwrap();
    drain(a, p.now);
    let causes = [CauseRepr::CookieReceivedWhileShuttingDown];
    let behind_error = build(
        0xDEAD_BEEF,
        SP,
        CP,
        &[
            ChunkRepr::Error(ErrorChunkRepr {
                causes: List::new(&causes),
            }),
            ChunkRepr::ShutdownAck,
        ],
    );
    let r = a.handle(p.now, &behind_error, &mut |_m: Message<'_>| {});
    assert_eq!(r, Err(Discard::OutOfTheBlue));
    let out: Vec<_> = drain(a, p.now).iter().map(|o| describe(o)).collect();
    assert!(
        out.contains(&(0xDEAD_BEEF, vec![(14, 1)])),
        "SHUTDOWN COMPLETE(T) on the packet's tag: {out:?}"
    );
    let zero = build(0, SP, CP, &[ChunkRepr::ShutdownAck]);
    assert!(a.handle(p.now, &zero, &mut |_m: Message<'_>| {}).is_err());
    let out: Vec<_> = drain(a, p.now).iter().map(|o| describe(o)).collect();
    assert!(
        !out.iter().any(|(_, chunks)| chunks.contains(&(14, 1))),
        "nothing answers tag 0: {out:?}"
    );
    assert_eq!(a.state(), State::CookieWait);
    // §8.4 rule 2: with an ABORT in it too, the packet is no SHUTDOWN ACK's to answer.
    let with_abort = build(
        0xDEAD_BEEF,
        SP,
        CP,
        &[
            ChunkRepr::ShutdownAck,
            ChunkRepr::Abort(AbortRepr {
                t_bit: false,
                causes: List::new(&[]),
            }),
        ],
    );
    let _ = a.handle(p.now, &with_abort, &mut |_m: Message<'_>| {});
    let out: Vec<_> = drain(a, p.now).iter().map(|o| describe(o)).collect();
    assert!(
        !out.iter().any(|(_, chunks)| chunks.contains(&(14, 1))),
        "nothing answers a packet with an ABORT: {out:?}"
    );
}

/// The consequence between two instances of this engine: the SHUTDOWN COMPLETE of a graceful
/// close is lost, the closed side reconnects at once on the same ports, and its INITs draw
/// SHUTDOWN ACKs with the old tag: answering them lets the new association come up in seconds.
#[test]
fn reconnect_after_lost_shutdown_complete_9_2() {
    let mut p = Pair::new(|_| {}, |_| {});
    p.established();
    let t0 = p.now;
    p.c.assoc.as_mut().unwrap().shutdown(p.now);
    // Drop the client's SHUTDOWN COMPLETE (chunk type 14).
    let mut drop_sc =
        |to_server: bool, b: &[u8], _| to_server && describe(b).1.iter().any(|c| c.0 == 14);
    p.flush(&mut drop_sc);
    assert!(p.c.assoc.is_none(), "client closed");
    assert_eq!(p.s.state(), Some(State::ShutdownAckSent));
    // The client reconnects at once (same ports).
    p.connect();
    let mut connected = |q: &Pair| {
        q.c.events
            .iter()
            .filter(|e| matches!(e, Event::Connected { .. }))
            .count()
            >= 2
            || q.c.assoc.is_none()
    };
    p.run(t0 + secs(3600.0), &mut never(), &mut connected);
    let took = p.now.saturating_since(t0);
    eprintln!("client events {:?}, after {took:?}", p.c.events);
    assert!(
        took < secs(10.0),
        "reconnection took {took:?}; client events {:?}",
        p.c.events
    );
}

/// RFC 9260 §5.2.4 step 3: "If both Verification Tags in the State Cookie match the
/// Verification Tags of the current association, consider the State Cookie valid (i.e.,
/// lifespan is not checked) even if the lifespan is exceeded." (Linux: sctp_unpack_cookie skips
/// the expiry check when an association exists.) Here the COOKIE ACKs are lost for 62 s; the
/// client's retransmitted COOKIE ECHO is then answered with Stale Cookie, the client re-INITs
/// with the same tag, the server's §5.2.2 cookie is then X-M-M-M in the table: discarded.
#[test]
fn case_d_cookie_is_valid_past_its_lifespan_5_2_4() {
    let mut p = Pair::new(|_| {}, |_| {});
    let t0 = p.now;
    p.connect();
    // Lose everything server->client except the INIT ACK for 62 s (an outage right after the
    // COOKIE ECHO arrived: the COOKIE ACKs, SACKs and heartbeats are lost).
    let mut drop = move |to_server: bool, b: &[u8], now: Instant| {
        let d = !to_server && now < t0 + secs(62.0) && !describe(b).1.iter().any(|c| c.0 == 2);
        if std::env::var_os("TRACE").is_some() {
            eprintln!(
                "{:>8.3}s {} {:x?}{}",
                now.saturating_since(t0).as_secs_f64(),
                if to_server { "c->s" } else { "s->c" },
                describe(b),
                if d { " DROPPED" } else { "" }
            );
        }
        d
    };
    let mut done = |q: &Pair| {
        q.c.events
            .iter()
            .any(|e| matches!(e, Event::Connected { .. } | Event::Closed(_)))
    };
    p.run(t0 + secs(1200.0), &mut drop, &mut done);
    eprintln!(
        "t={:?} client {:?} {:?}; server {:?} {:?}",
        p.now.saturating_since(t0),
        p.c.state(),
        p.c.events,
        p.s.state(),
        p.s.events
    );
    eprintln!("server stats {:?}", p.s.assoc.as_ref().map(|a| *a.stats()));
    assert!(
        p.c.events
            .iter()
            .any(|e| matches!(e, Event::Connected { .. })),
        "client never connected: {:?}",
        p.c.events
    );
}

/// §5.1.5 step 3 / Linux sctp_send_stale_cookie_err: the Stale Cookie ERROR goes out on the
/// cookie's peer tag, not the association's current peer tag, which a restarted peer (new tag)
/// would discard.
#[test]
fn stale_cookie_error_uses_the_cookies_tag_5_1_5() {
    let mut p = Pair::new(|_| {}, |_| {});
    p.established();
    let old_peer_tag = p.s.assoc.as_ref().unwrap().peer_tag();
    // The client restarts: a new endpoint (new secret), same address and ports.
    let mut c2 = Side::new(CP, caddr(), 9, |_| {});
    let mut a2 = c2.ep.connect(p.now, saddr(), SP);
    let new_tag = a2.local_tag();
    let init = drain(&mut a2, p.now);
    let s = p.s.assoc.as_mut().unwrap();
    s.handle(p.now, &init[0], &mut |_m: Message<'_>| {})
        .unwrap();
    let ack = drain(s, p.now);
    a2.handle(p.now, &ack[0], &mut |_m: Message<'_>| {})
        .unwrap();
    let echo = drain(&mut a2, p.now);
    // The COOKIE ECHO arrives 61 s later.
    let later = p.now + secs(61.0);
    let _ = s.handle(later, &echo[0], &mut |_m: Message<'_>| {});
    let out = drain(s, later);
    let errs: Vec<_> = out
        .iter()
        .map(|o| describe(o))
        .filter(|d| d.1.iter().any(|c| c.0 == 9))
        .collect();
    eprintln!("old peer tag {old_peer_tag:#x}, new {new_tag:#x}, ERROR packets {errs:x?}");
    assert!(!errs.is_empty(), "a Stale Cookie ERROR is sent");
    assert!(
        errs.iter().all(|e| e.0 == new_tag),
        "ERROR must carry the cookie's peer tag"
    );
}

/// RFC 5043 §9: a message queued before the path MTU dropped is still sent whole (IP fragments
/// it); it must not block everything behind it or keep a shutdown from completing.
#[test]
fn lowered_path_mtu_does_not_strand_queued_messages_5043_9() {
    let mut p = Pair::new(|c| c.path_mtu = 9000 - 20, |c| c.path_mtu = 9000 - 20);
    p.established();
    let t0 = p.now;
    let a = p.c.assoc.as_mut().unwrap();
    a.send(0, 16, &vec![7u8; 8000]).unwrap();
    a.set_path_mtu(1480);
    a.send(0, 16, &[1u8; 100]).unwrap();
    a.shutdown(p.now);
    let mut done = |q: &Pair| q.c.assoc.is_none();
    p.run(t0 + secs(3600.0), &mut never(), &mut done);
    eprintln!(
        "after {:?}: client {:?}, server got {} messages",
        p.now.saturating_since(t0),
        p.c.state(),
        p.s.got.len()
    );
    assert_eq!(p.s.got.len(), 2, "both messages delivered");
    assert!(p.c.assoc.is_none(), "shutdown completed");
}

/// RFC 9260 §9.2: "While in the SHUTDOWN-SENT state, the SHUTDOWN sender MUST immediately
/// respond to each received packet containing one or more DATA chunks with a SHUTDOWN chunk and
/// restart the T2-shutdown timer."
#[test]
fn t2_restarts_on_data_in_shutdown_sent_9_2() {
    let mut p = Pair::new(|_| {}, |_| {});
    p.established();
    let t0 = p.now;
    let c = p.c.assoc.as_mut().unwrap();
    c.shutdown(t0);
    let shut = drain(c, t0);
    let t2_at = c.poll_timeout().unwrap();
    let rto = t2_at.saturating_since(t0);
    let s = p.s.assoc.as_mut().unwrap();
    s.send(0, 16, &[1u8; 64]).unwrap();
    // The server has not seen the SHUTDOWN yet (it is in flight); its DATA arrives at t0+rto/2.
    let t1 = t0 + rto / 2;
    let data = drain(s, t1);
    let _ = s.handle(t1, &shut[0], &mut |_m: Message<'_>| {});
    let c = p.c.assoc.as_mut().unwrap();
    for d in &data {
        c.handle(t1, d, &mut |_m: Message<'_>| {}).unwrap();
    }
    let reply = drain(c, t1);
    eprintln!(
        "reply {:?}",
        reply.iter().map(|r| describe(r)).collect::<Vec<_>>()
    );
    let next = c.poll_timeout().unwrap();
    assert!(
        next >= t1 + rto,
        "T2 should be restarted to t1+RTO={:?}, is still {:?} (after t0)",
        (t1 + rto).saturating_since(t0),
        next.saturating_since(t0)
    );
}

/// RFC 9260 §9.2: "The reception of any packet from its peer (i.e., as the peer sends all of
/// its queued DATA chunks) SHOULD clear the endpoint's retransmission count and restart the
/// T2-shutdown timer". A packet without DATA (here a HEARTBEAT) did neither: only DATA did,
/// so a peer alive but with nothing to send in time had our SHUTDOWN's lost copies counted
/// against Association.Max.Retrans all the same. The SHUTDOWN goes again with the answer (a
/// peer talking faster than the RTO would hold it off otherwise); the path, inactive after
/// Path.Max.Retrans expiries, stays so (§8.2: an acknowledgement or a HEARTBEAT ACK makes it
/// active, not any packet); and a packet that is not the peer's (another tag, an INIT under
/// tag 0) restarts nothing (a review: an off-path sender could keep T2 from expiring).
#[test]
fn any_packet_clears_the_count_and_restarts_t2_in_shutdown_sent_9_2() {
    let mut p = Pair::new(|_| {}, |_| {});
    p.established();
    let c = p.c.assoc.as_mut().unwrap();
    let tag = c.local_tag();
    c.shutdown(p.now);
    // Every SHUTDOWN lost: T2 expires past Path.Max.Retrans (5), within Association.Max (10).
    let mut now = p.now;
    let _ = drain(c, now);
    for _ in 0..6 {
        now = c.poll_timeout().unwrap();
        c.handle_timeout(now);
        assert_eq!(c.state(), State::ShutdownSent);
        let _ = drain(c, now);
    }
    assert_eq!(c.error_count(), 6, "six T2 expiries counted");
    assert!(!c.path_active(), "the path inactive past Path.Max.Retrans");
    let due = c.poll_timeout().unwrap();
    let rto = due.saturating_since(now);
    let info = [7u8; 16];
    let heartbeat = |vtag: u32| {
        build(
            vtag,
            SP,
            CP,
            &[ChunkRepr::Heartbeat(HeartbeatRepr {
                info: &info,
                extra: &[],
            })],
        )
    };
    // Not the peer's: another tag (refused by the header check), an INIT under tag 0.
    let at = now + rto / 4;
    assert!(c
        .handle(at, &heartbeat(tag ^ 1), &mut |_m: Message<'_>| {})
        .is_err());
    let init = build(
        0,
        SP,
        CP,
        &[ChunkRepr::Init(InitRepr {
            initiate_tag: 0x1234_5678,
            a_rwnd: 65536,
            outbound_streams: 8,
            inbound_streams: 8,
            initial_tsn: 1,
            params: List::new(&[]),
        })],
    );
    let _ = c.handle(at, &init, &mut |_m: Message<'_>| {});
    let _ = drain(c, at);
    assert_eq!(c.error_count(), 6, "nothing of the peer's came");
    assert_eq!(c.poll_timeout(), Some(due), "T2 not restarted");
    // The peer's HEARTBEAT, halfway to the next expiry.
    let at = now + rto / 2;
    c.handle(at, &heartbeat(tag), &mut |_m: Message<'_>| {})
        .unwrap();
    assert_eq!(c.error_count(), 0, "the retransmission count cleared");
    assert!(!c.path_active(), "no acknowledgement made the path active");
    let next = c.poll_timeout().unwrap();
    assert!(
        next >= at + rto,
        "T2 restarted from the packet: due {:?} after it, its RTO is {rto:?}",
        next.saturating_since(at)
    );
    let answer: Vec<u8> = drain(c, at)
        .iter()
        .flat_map(|pk| describe(pk).1)
        .map(|(t, _)| t)
        .collect();
    assert!(
        answer.contains(&5) && answer.contains(&7),
        "HEARTBEAT ACK and SHUTDOWN in the answer: chunk types {answer:?}"
    );
    // The peer's DATA alike: the count cleared, T2 restarted, the path left to §8.2 (the
    // DATA path made it active: session 80's note). T2 expires once more first, so that
    // there is a count to clear.
    let at = next;
    c.handle_timeout(at);
    let _ = drain(c, at);
    assert_eq!(c.error_count(), 1, "the SHUTDOWN lost again");
    let rto = c.poll_timeout().unwrap().saturating_since(at);
    let at = at + rto / 4;
    let data = ChunkRepr::Data(DataRepr {
        immediate: false,
        unordered: true,
        beginning: true,
        ending: true,
        tsn: c.received_cum_tsn().wrapping_add(1),
        stream_id: 0,
        ssn: 0,
        ppid: 16,
        user_data: &[9u8; 32],
    });
    let mut got = 0;
    c.handle(at, &build(tag, SP, CP, &[data]), &mut |_m: Message<'_>| {
        got += 1
    })
    .unwrap();
    assert_eq!(got, 1, "the DATA taken");
    assert_eq!(c.error_count(), 0);
    assert!(!c.path_active(), "DATA acknowledges nothing we sent");
    assert!(c.poll_timeout().unwrap() >= at + rto, "T2 restarted");
}

fn data_tsns(p: &[u8]) -> Vec<u32> {
    let pkt = Packet::new_checked(p).unwrap();
    pkt.chunks()
        .flatten()
        .filter(|c| u8::from(c.chunk_type()) == 0)
        .map(|c| DataRepr::parse(&c).unwrap().tsn)
        .collect()
}

/// §7.2.4 step 3: "When a Fast Retransmit is being performed, the sender SHOULD ignore the
/// value of cwnd and SHOULD NOT delay retransmission for this single packet." A SACK bundled
/// ahead of a full-size retransmission must not push it out of the packet and behind cwnd.
#[test]
fn fast_retransmit_is_not_crowded_out_by_a_sack_7_2_4() {
    let mut p = Pair::new(|_| {}, |_| {});
    p.established();
    let max = p.c.assoc.as_ref().unwrap().max_message();
    let now = p.now;
    let a = p.c.assoc.as_mut().unwrap();
    let tag = a.local_tag();
    for _ in 0..200 {
        let _ = a.send(0, 16, &vec![3u8; max]);
    }
    // Grow cwnd: a fake receiver that SACKs every second TSN (ack clocking).
    let mut highest: Option<u32> = None;
    let mut cum: Option<u32> = None;
    for _ in 0..150 {
        for t in drain(a, now).iter().flat_map(|p| data_tsns(p)) {
            highest = Some(t);
            if cum.is_none() {
                cum = Some(t.wrapping_sub(1));
            }
        }
        let (Some(h), Some(c)) = (highest, cum) else {
            break;
        };
        let next = if h.wrapping_sub(c) >= 2 {
            c.wrapping_add(2)
        } else {
            h
        };
        cum = Some(next);
        let sack = ChunkRepr::Sack(SackRepr {
            cum_tsn_ack: next,
            a_rwnd: 1 << 20,
            gap_ack_blocks: List::empty(),
            dup_tsns: List::empty(),
        });
        a.handle(now, &build(tag, SP, CP, &[sack]), &mut |_m: Message<'_>| {})
            .unwrap();
        while a.queued() < 100 {
            let _ = a.send(0, 16, &vec![3u8; max]);
        }
    }
    // Ack everything outstanding, so the next burst starts clean.
    let sack = ChunkRepr::Sack(SackRepr {
        cum_tsn_ack: highest.unwrap(),
        a_rwnd: 1 << 20,
        gap_ack_blocks: List::empty(),
        dup_tsns: List::empty(),
    });
    a.handle(now, &build(tag, SP, CP, &[sack]), &mut |_m: Message<'_>| {})
        .unwrap();
    // Fill the window: SACKs that each advance the cumulative point by one TSN.
    let mut c = highest.unwrap();
    for _ in 0..60 {
        while a.queued() < 250 {
            if a.send(0, 16, &vec![3u8; max]).is_err() {
                break;
            }
        }
        for t in drain(a, now).iter().flat_map(|p| data_tsns(p)) {
            highest = Some(t);
        }
        c = c.wrapping_add(1);
        let sack = ChunkRepr::Sack(SackRepr {
            cum_tsn_ack: c,
            a_rwnd: 1 << 20,
            gap_ack_blocks: List::empty(),
            dup_tsns: List::empty(),
        });
        a.handle(now, &build(tag, SP, CP, &[sack]), &mut |_m: Message<'_>| {})
            .unwrap();
    }
    eprintln!(
        "outstanding after fill: {} TSNs, cwnd {}",
        highest.unwrap().wrapping_sub(c),
        a.cwnd()
    );
    let cwnd0 = a.cwnd();
    let mut sent: Vec<u32> = drain(a, now).iter().flat_map(|p| data_tsns(p)).collect();
    let x = c.wrapping_add(1);
    let mut rounds = Vec::new();
    // Three SACKs each newly acking one more TSN above x (x lost).
    for k in 1..=3u16 {
        let blocks = [GapAckBlock {
            start: 2,
            end: 1 + k,
        }];
        let sack = ChunkRepr::Sack(SackRepr {
            cum_tsn_ack: x.wrapping_sub(1),
            a_rwnd: 1 << 20,
            gap_ack_blocks: List::new(&blocks),
            dup_tsns: List::empty(),
        });
        // The third packet also carries DATA from the peer (bidirectional traffic).
        let pkt = if k == 3 && std::env::var_os("NO_DATA").is_none() {
            let d = ChunkRepr::Data(DataRepr {
                immediate: false,
                unordered: true,
                beginning: true,
                ending: true,
                tsn: 0, // whatever the server's next TSN is does not matter: any DATA sets pending.sack
                stream_id: 0,
                ssn: 0,
                ppid: 16,
                user_data: &[9u8; 32],
            });
            build(tag, SP, CP, &[d, sack])
        } else {
            build(tag, SP, CP, &[sack])
        };
        a.handle(now, &pkt, &mut |_m: Message<'_>| {}).unwrap();
        let out = drain(a, now);
        let tsns: Vec<u32> = out.iter().flat_map(|p| data_tsns(p)).collect();
        rounds.push((
            k,
            out.iter().map(|o| describe(o).1).collect::<Vec<_>>(),
            tsns.clone(),
        ));
        sent.extend(tsns);
    }
    eprintln!("cwnd before {cwnd0}, after {}, x={x}", a.cwnd());
    for r in &rounds {
        eprintln!("round {:?}", r);
    }
    let third = &rounds[2].2;
    assert!(
        third.contains(&x),
        "TSN {x} (3 misses) must be fast-retransmitted at once; third round sent {third:?}; stats {:?}",
        a.stats()
    );
}
