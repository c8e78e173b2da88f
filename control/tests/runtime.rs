//! The endpoint in its product shape (`runtime`): data cores on their own threads own the
//! associations and place inline; a control thread answers INITs, turns COOKIE ECHOs into
//! associations for the owning core, and registers and revokes STags. Two endpoints with two
//! data cores each, wired back to back by the in-memory port pair.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
use rt::{closes, remote_write, runtime, session_event, tagged, Lockstep, PORT};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ddpdk_control::conn::{Indication, Status};
use ddpdk_control::memory::MemoryRegistration;
use ddpdk_control::runtime::{
    Clock, ConnHandle, Control, CoreReport, DataCore, Event, IdlePolicy, Op, RuntimeConfig,
    Steering, ANNOUNCE_INTERVAL,
};
use ddpdk_control::session::Event as SessionEvent;
use ddpdk_dataplane::ddp::RxError;
use ddpdk_dataplane::mem::Access;
use ddpdk_dataplane::net::Interface;
use ddpdk_dataplane::port::mem::{pair, MemPort};
use ddpdk_dataplane::port::{PacketBuf, Port};
use ddpdk_dataplane::sctp::{Config, Endpoint, Instant};
use ddpdk_dataplane::wire::crc32c::crc32c;
use ddpdk_dataplane::wire::ddp::DdpError;

const CORES: usize = 2;

/// One endpoint whose data cores run on their own threads; the test thread is its control
/// thread.
struct Side {
    control: Control<MemPort>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<DataCore<MemPort>>>,
    events: Vec<Event>,
}

impl Side {
    fn start(control: Control<MemPort>, cores: Vec<DataCore<MemPort>>, clock: Clock) -> Side {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = cores
            .into_iter()
            .map(|mut core| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    // This host has two CPUs for four data cores and two control loops.
                    core.run(clock, &stop, IdlePolicy::default());
                    core
                })
            })
            .collect();
        Side {
            control,
            stop,
            threads,
            events: Vec::new(),
        }
    }

    fn poll(&mut self, clock: Clock) {
        self.control.poll(clock.now());
        while let Some(e) = self.control.poll_event() {
            self.events.push(e);
        }
    }

    fn stop(self) -> (Control<MemPort>, Vec<DataCore<MemPort>>) {
        self.stop.store(true, Ordering::Release);
        let cores = self
            .threads
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        (self.control, cores)
    }
}

fn until(
    what: &str,
    a: &mut Side,
    b: &mut Side,
    clock: Clock,
    mut done: impl FnMut(&Side, &Side) -> bool,
) {
    let limit = std::time::Instant::now() + Duration::from_secs(60);
    while !done(a, b) {
        assert!(
            std::time::Instant::now() < limit,
            "timed out waiting for {what}"
        );
        a.poll(clock);
        b.poll(clock);
        std::thread::yield_now();
    }
}

const A4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

/// A server IPv4 address for which the client's IPv4 and IPv6 associations are owned by
/// different cores on the server, and the IPv4 one by different cores on the two sides (so the
/// server's receiving core must hand its packets to the owner through the dispatch ring).
fn server_v4() -> Ipv4Addr {
    let s = Steering::new(CORES);
    let v6_owner = s.owner(IpAddr::V6(A6), IpAddr::V6(B6), PORT, PORT);
    (2..=250u8)
        .map(|k| Ipv4Addr::new(198, 18, 0, k))
        .find(|&b4| {
            let at_b = s.owner(IpAddr::V4(A4), IpAddr::V4(b4), PORT, PORT);
            let at_a = s.owner(IpAddr::V4(b4), IpAddr::V4(A4), PORT, PORT);
            at_b != v6_owner && at_a != at_b
        })
        .unwrap()
}

/// Issue 6 items 1–3: associations over IPv4 and IPv6 land on different data cores by the
/// 5-tuple hash, the server's control thread answers the INITs and hands each association to
/// its owner, packets that arrive on the wrong core's queue are dispatched to the owner, tagged
/// writes on both associations are placed byte-exact by the owning cores, and a
/// deregistration returns only once both cores refuse the STag (RFC 5041 §8.3.1 item 6): a
/// later write naming it is refused with its exact code and places nothing.
#[test]
fn two_data_cores_own_their_associations_and_place_byte_exact() {
    let b4 = server_v4();
    let clock = Clock::new();
    let (pa, pb) = pair((CORES + 1) as u16, 1024);
    let cfg = RuntimeConfig {
        cores: CORES,
        ..RuntimeConfig::default()
    };
    let (ca, cores_a) = runtime(pa, A4, A6, 1, cfg);
    let (cb, cores_b) = runtime(pb, b4, B6, 2, cfg);
    let mut a = Side::start(ca, cores_a, clock);
    let mut b = Side::start(cb, cores_b, clock);

    // Server memory: one region, one remote-write STag; each association writes its own half.
    const HALF: usize = 1 << 20;
    let bpd = b.control.memory_mut().alloc_pd();
    let region = b.control.memory_mut().alloc_region(2 * HALF).unwrap();
    let reg = b
        .control
        .memory_mut()
        .register(MemoryRegistration {
            pd: bpd,
            region,
            offset: 0,
            len: 2 * HALF as u64,
            access: Access::REMOTE_WRITE,
            stream: None,
            to_base: 0x4000_0000,
        })
        .unwrap();

    let peers = [IpAddr::V4(b4), IpAddr::V6(B6)];
    let conns: Vec<ConnHandle> = peers
        .iter()
        .map(|&p| a.control.connect(clock.now(), p, PORT).unwrap())
        .collect();
    until("both associations", &mut a, &mut b, clock, |a, b| {
        let up = |c: &ConnHandle| {
            a.events.iter().any(|e| {
                matches!(e, Event::Indication { conn, indication: Indication::Connected { .. } } if conn == c)
            })
        };
        conns.iter().all(up)
            && b.events
                .iter()
                .filter(|e| matches!(e, Event::Accepted { .. }))
                .count()
                == 2
    });
    // Each side put each association on the core the 5-tuple hash names, and the two
    // associations are on different cores.
    let s = Steering::new(CORES);
    for (c, peer) in conns.iter().zip(peers) {
        let local = match peer {
            IpAddr::V4(_) => IpAddr::V4(A4),
            IpAddr::V6(_) => IpAddr::V6(A6),
        };
        assert_eq!(a.control.owner(*c), Some(s.owner(peer, local, PORT, PORT)));
    }
    let accepted: Vec<(ConnHandle, IpAddr, usize)> = b
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Accepted {
                conn, peer, core, ..
            } => Some((*conn, *peer, *core)),
            _ => None,
        })
        .collect();
    let mut server_cores: Vec<usize> = accepted.iter().map(|x| x.2).collect();
    server_cores.sort_unstable();
    assert_eq!(server_cores, vec![0, 1], "one association per server core");
    for &(conn, peer, core) in &accepted {
        let local = match peer {
            IpAddr::V4(_) => IpAddr::V4(b4),
            IpAddr::V6(_) => IpAddr::V6(B6),
        };
        assert_eq!(core, s.owner(peer, local, PORT, PORT));
        assert_eq!(b.control.owner(conn), Some(core));
    }

    // A session on stream 1 of each, accepted by the server's ULP.
    let apd = a.control.memory_mut().alloc_pd();
    for &c in &conns {
        a.control
            .submit(
                c,
                Op::Initiate {
                    stream: 1,
                    pd: apd,
                    private_data: b"rt".to_vec(),
                },
            )
            .unwrap();
    }
    until("both Initiates", &mut a, &mut b, clock, |_, b| {
        accepted.iter().all(|x| {
            session_event(&b.events, x.0, |e| {
                matches!(e, SessionEvent::InitiateReceived { .. })
            })
        })
    });
    for x in &accepted {
        b.control
            .submit(
                x.0,
                Op::Accept {
                    stream: 1,
                    pd: bpd,
                    private_data: Vec::new(),
                },
            )
            .unwrap();
    }
    until("both Accepts", &mut a, &mut b, clock, |a, _| {
        conns
            .iter()
            .all(|&c| session_event(&a.events, c, |e| matches!(e, SessionEvent::Accepted { .. })))
    });

    // Tagged writes of several sizes on both associations, into their halves.
    let image: Vec<u8> = (0..2 * HALF as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let mut wr = 0u64;
    for (k, &c) in conns.iter().enumerate() {
        let mut off = k * HALF;
        for size in [1000usize, 65536, 300_000, HALF - 366_536] {
            wr += 1;
            let data = image[off..off + size].to_vec();
            a.control
                .submit(c, tagged(wr, reg.stag, reg.to_base + off as u64, data))
                .unwrap();
            off += size;
        }
        assert_eq!(off, (k + 1) * HALF);
    }
    until("every completion", &mut a, &mut b, clock, |a, b| {
        let done = a
            .events
            .iter()
            .filter(|e| matches!(e, Event::Completion { .. }))
            .count();
        let delivered = b
            .events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::Indication {
                        indication: Indication::TaggedDelivered { .. },
                        ..
                    }
                )
            })
            .count();
        done == 8 && delivered == 8
    });
    for e in &a.events {
        if let Event::Completion { completion, .. } = e {
            assert_eq!(completion.status, Status::Success, "{e:?}");
        }
        assert!(!matches!(e, Event::Refused { .. }), "{e:?}");
    }
    let crc = |b: &Side| {
        let r = b.control.memory().region(region).unwrap();
        r.crc32c(0, 2 * HALF).unwrap()
    };
    assert_eq!(crc(&b), crc32c(&image), "placed bytes");

    // Deregistration: every core acknowledges before it returns; afterwards the owning core
    // refuses a write naming the STag (RFC 5041 §7.2: invalid STag) and places nothing.
    b.control.memory_mut().deregister(reg.stag).unwrap();
    a.control
        .submit(
            conns[0],
            tagged(99, reg.stag, reg.to_base, vec![0xee; 4096]),
        )
        .unwrap();
    let server_conn = accepted.iter().find(|x| x.1 == IpAddr::V4(A4)).unwrap().0;
    until("the refusal", &mut a, &mut b, clock, |_, b| {
        b.events.iter().any(|e| {
            matches!(e, Event::Indication { conn, indication: Indication::Error { error, .. } }
                if *conn == server_conn && *error == RxError::Ddp(DdpError::InvalidStag))
        })
    });
    assert_eq!(crc(&b), crc32c(&image), "nothing placed after revoke");

    // Reports: each association is on the core that owns it, and the server's receiving core
    // dispatched the IPv4 association's packets to its owner. The cores keep running while
    // each answers in turn, so a frame one core counts as dispatched can still be in the ring
    // when the other reports (the SACKs and the Terminate of the refused write still travel):
    // reports are taken again until both counts describe the same moment, and none is lost.
    let mut reports: Vec<CoreReport> = Vec::new();
    for _ in 0..100 {
        b.events.retain(|e| !matches!(e, Event::Report(_)));
        b.control.request_reports();
        until("the reports", &mut a, &mut b, clock, |_, b| {
            b.events
                .iter()
                .filter(|e| matches!(e, Event::Report(_)))
                .count()
                == CORES
        });
        reports = b
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Report(r) => Some((**r).clone()),
                _ => None,
            })
            .collect();
        let out: u64 = reports.iter().map(|r| r.stats.dispatched_out).sum();
        let inn: u64 = reports.iter().map(|r| r.stats.dispatched_in).sum();
        if out == inn {
            break;
        }
    }
    let dispatched: u64 = reports.iter().map(|r| r.stats.dispatched_out).sum();
    let received: u64 = reports.iter().map(|r| r.stats.dispatched_in).sum();
    assert!(
        dispatched > 100,
        "the IPv4 association crosses cores: {dispatched}"
    );
    assert_eq!(dispatched, received);
    for r in &reports {
        assert_eq!(
            (r.stats.dispatch_dropped, r.stats.control_dropped),
            (0, 0),
            "{r:?}"
        );
        assert_eq!(r.stags, 0, "the revoked STag is gone from core {}", r.core);
    }
    assert_eq!(b.control.stats().accepted, 2);

    // Graceful shutdown of both.
    for &c in &conns {
        a.control.submit(c, Op::Shutdown).unwrap();
    }
    until("both closed", &mut a, &mut b, clock, |a, b| {
        closes(&a.events) == 2 && closes(&b.events) == 2
    });
    a.stop();
    b.stop();
}

/// A peer's INIT as a frame: a sans-IO endpoint on `src_port` makes it, an interface frames it.
fn init_frame(src_port: u16, to: Ipv4Addr, to_mac: [u8; 6]) -> Vec<u8> {
    let mut ep = Endpoint::new(
        Config {
            local_port: src_port,
            ..Config::default()
        },
        [9; 32],
    )
    .unwrap();
    let now = Instant::from_nanos(1_000_000_000);
    let mut assoc = ep.connect(now, IpAddr::V4(to), PORT);
    let mut iface = Interface::new([2, 0, 0, 0, 0, 9], Some(A4), None);
    iface.learn_static(IpAddr::V4(to), to_mac);
    let mut frame = vec![0u8; 2048];
    let h = Interface::header_len(IpAddr::V4(to));
    let len = assoc.poll_transmit(now, &mut frame[h..]).unwrap();
    let n = iface
        .frame_sctp(now, IpAddr::V4(to), len, &mut frame)
        .unwrap();
    frame.truncate(n);
    frame
}

/// Issue 6 item 2: a flooded control thread never stalls a data core. With the packet ring
/// full, further INITs are dropped and counted; the core's poll returns; what did get through
/// is answered once the control thread runs.
#[test]
fn a_full_control_ring_drops_and_counts_instead_of_stalling() {
    let b4 = Ipv4Addr::new(198, 18, 0, 2);
    let (pa, pb) = pair(2, 1024);
    let b_mac = pb.mac();
    let (mut control, mut cores) = runtime(
        pb,
        b4,
        B6,
        2,
        RuntimeConfig {
            cores: 1,
            ring_depth: 2,
            ..RuntimeConfig::default()
        },
    );
    let mut frames: Vec<_> = (0..10)
        .map(|k| ddpdk_dataplane::port::mem::HeapBuf::new(init_frame(6000 + k, b4, b_mac)))
        .collect();
    assert_eq!(pa.tx_burst(0, &mut frames), 10);
    let now = Instant::from_nanos(1_000_000_000);
    cores[0].poll(now);
    let s = cores[0].stats();
    assert_eq!(
        (s.frames_in, s.to_control, s.control_dropped),
        (10, 2, 8),
        "{s:?}"
    );
    control.poll(now);
    assert_eq!(
        control.stats().replies,
        2,
        "an INIT ACK for each INIT handed up"
    );
    control.poll(now);
    let mut out = Vec::new();
    pa.rx_burst(1, &mut out, 32);
    assert_eq!(
        out.len(),
        2,
        "INIT ACKs leave by the control thread's own TX queue"
    );
}

/// Commands that wait in the control side's outbox for room in a core's command ring (a
/// session's return among them) make its loop retry soon (`tx_backlogged`, the loop's cue to
/// sleep `LIGHT_SLEEP` at most): nothing rings the control thread when the core drains its
/// ring, and before, an idle control loop backed off to 5 ms with them still waiting (found
/// by an independent review, session 68). Once the core has taken them, no more.
#[test]
fn commands_waiting_for_a_cores_ring_keep_the_control_loop_awake() {
    let (pa, _pb) = pair(2, 64);
    let cfg = RuntimeConfig {
        cores: 1,
        ring_depth: 2,
        ..RuntimeConfig::default()
    };
    let (mut c, mut k) = runtime(pa, A4, A6, 1, cfg);
    let now = Instant::from_nanos(1_000_000_000);
    c.poll(now);
    assert!(!c.tx_backlogged());
    // Report requests must not be lost: past the ring's two, they wait in the outbox.
    for _ in 0..4 {
        c.request_reports();
    }
    c.poll(now);
    assert!(c.tx_backlogged(), "commands wait for the core's ring");
    for _ in 0..4 {
        k[0].poll(now);
        c.poll(now);
    }
    assert!(!c.tx_backlogged(), "the core took them all");
}

/// Two runtimes of one data core each on a wire, A's events and B's, in virtual time; a
/// turn polls both cores, B's control thread (its events taken), and A's unless told not to.
struct EventPair {
    ca: Control<MemPort>,
    ka: Vec<DataCore<MemPort>>,
    ea: Vec<Event>,
    cb: Control<MemPort>,
    kb: Vec<DataCore<MemPort>>,
    eb: Vec<Event>,
    now: Instant,
}

impl EventPair {
    fn new(ring_depth: usize) -> EventPair {
        let b4 = Ipv4Addr::new(198, 18, 0, 2);
        let (pa, pb) = pair(2, 4096);
        let cfg = RuntimeConfig {
            cores: 1,
            ring_depth,
            ..RuntimeConfig::default()
        };
        let (ca, ka) = runtime(pa, A4, A6, 1, cfg);
        let (cb, kb) = runtime(pb, b4, B6, 2, cfg);
        EventPair {
            ca,
            ka,
            ea: Vec::new(),
            cb,
            kb,
            eb: Vec::new(),
            now: Instant::from_nanos(1_000_000_000),
        }
    }

    fn turn(&mut self, poll_a: bool) {
        self.ka[0].poll(self.now);
        self.kb[0].poll(self.now);
        if poll_a {
            self.ca.poll(self.now);
            while let Some(e) = self.ca.poll_event() {
                self.ea.push(e);
            }
        }
        self.cb.poll(self.now);
        while let Some(e) = self.cb.poll_event() {
            self.eb.push(e);
        }
    }

    /// A new association from A to B's address `to` with a session on stream 1 (B accepts
    /// every Initiate with `bpd`).
    fn session(
        &mut self,
        to: IpAddr,
        apd: ddpdk_dataplane::mem::Pd,
        bpd: ddpdk_dataplane::mem::Pd,
    ) -> ConnHandle {
        let conn = self.ca.connect(self.now, to, PORT).unwrap();
        let mut step = 0;
        while !session_event(&self.ea, conn, |e| {
            matches!(e, SessionEvent::Accepted { .. })
        }) {
            step += 1;
            assert!(step < 100_000, "no session");
            self.turn(true);
            if self.ea.iter().any(|e| {
                matches!(
                    e,
                    Event::Indication {
                        conn: c,
                        indication: Indication::Connected { .. },
                    } if *c == conn
                )
            }) && step % 1000 == 1
            {
                let _ = self.ca.submit(
                    conn,
                    Op::Initiate {
                        stream: 1,
                        pd: apd,
                        private_data: Vec::new(),
                    },
                );
            }
            for e in self.eb.drain(..) {
                if let Event::Indication {
                    conn: c,
                    indication:
                        Indication::Session {
                            event: SessionEvent::InitiateReceived { .. },
                            ..
                        },
                } = e
                {
                    self.cb
                        .submit(
                            c,
                            Op::Accept {
                                stream: 1,
                                pd: bpd,
                                private_data: Vec::new(),
                            },
                        )
                        .unwrap();
                }
            }
            self.now += Duration::from_micros(100);
        }
        conn
    }

    /// Posts `op` on `conn`, turning A's control thread and core while its outbox is full.
    fn submit(&mut self, conn: ConnHandle, op: impl Fn() -> Op) {
        while self.ca.submit(conn, op()).is_err() {
            self.ca.poll(self.now);
            self.ka[0].poll(self.now);
        }
    }

    /// The successful completions A's ULP was told of, in order: (connection, wr_id).
    fn done(&self) -> Vec<(ConnHandle, u64)> {
        self.ea
            .iter()
            .filter_map(|e| match e {
                Event::Completion { conn, completion } if completion.status == Status::Success => {
                    Some((*conn, completion.wr_id))
                }
                _ => None,
            })
            .collect()
    }
}

/// Issue 6 item 2: when the event ring is full the core holds its events back, in order, and
/// the ULP still gets every completion. Everything runs on this thread in virtual time.
#[test]
fn a_full_event_ring_delays_completions_but_loses_none() {
    let mut p = EventPair::new(4);
    let bpd = p.cb.memory_mut().alloc_pd();
    let region = p.cb.memory_mut().alloc_region(1 << 16).unwrap();
    let reg =
        p.cb.memory_mut()
            .register(remote_write(bpd, region, 1 << 16))
            .unwrap();
    let apd = p.ca.memory_mut().alloc_pd();
    let conn = p.session(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)), apd, bpd);
    p.ea.clear();
    // 40 signaled writes; A's control thread is not polled while they complete.
    // (The ULP's outbox is as deep as the ring: it waits for room.)
    for k in 0..40u64 {
        p.submit(conn, || tagged(k, reg.stag, k * 1000, vec![k as u8; 1000]));
    }
    p.ca.poll(p.now);
    while let Some(e) = p.ca.poll_event() {
        p.ea.push(e);
    }
    for _ in 0..20_000 {
        p.turn(false);
        p.now += Duration::from_micros(100);
    }
    assert!(p.ka[0].stats().events_held > 0, "{:?}", p.ka[0].stats());
    for _ in 0..200 {
        p.turn(true);
    }
    assert_eq!(
        p.done(),
        (0..40).map(|k| (conn, k)).collect::<Vec<_>>(),
        "every completion, in posting order"
    );
}

/// (Review, session 70) With the event ring full (a ULP slow to take its events), each
/// connection of a core gets its turn: the core drained its slots from the first every time,
/// so a busy association in a low slot filled the ring again whenever the ULP emptied it, and
/// a later slot's events (its peer's data, a session, a Closed) waited behind every one the
/// busy association owed. After a full ring the next round starts with the slot after the one
/// that filled it.
#[test]
fn a_full_event_ring_serves_every_connection_in_turn() {
    let mut p = EventPair::new(4);
    let bpd = p.cb.memory_mut().alloc_pd();
    let region = p.cb.memory_mut().alloc_region(1 << 16).unwrap();
    let reg =
        p.cb.memory_mut()
            .register(remote_write(bpd, region, 1 << 16))
            .unwrap();
    let apd = p.ca.memory_mut().alloc_pd();
    // One association to each of B's addresses (one association between two endpoints).
    let busy = p.session(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)), apd, bpd);
    let other = p.session(IpAddr::V6(B6), apd, bpd);
    p.ea.clear();
    // The busy association's 40 writes complete, then the other's one; A's ULP takes no
    // event meanwhile.
    for k in 0..40u64 {
        p.submit(busy, || tagged(k, reg.stag, k * 1000, vec![k as u8; 1000]));
    }
    for _ in 0..20_000 {
        p.turn(false);
        p.now += Duration::from_micros(100);
    }
    p.submit(other, || tagged(100, reg.stag, 50_000, vec![1; 1000]));
    for _ in 0..20_000 {
        p.turn(false);
        p.now += Duration::from_micros(100);
    }
    assert!(p.ka[0].stats().events_held > 0, "{:?}", p.ka[0].stats());
    for _ in 0..200 {
        p.turn(true);
    }
    let done = p.done();
    assert_eq!(done.len(), 41, "every completion: {done:?}");
    let at = done.iter().position(|d| *d == (other, 100)).unwrap();
    // Before: at 40, behind every completion the busy one owed. Now behind what the core
    // had already held back when the ring filled, and one ring's worth.
    let held = p.ka[0].stats().events_held as usize;
    assert!(
        at <= held + 4,
        "the other connection's completion came at {at} ({held} held): {done:?}"
    );
    let busy_ids: Vec<u64> = done
        .iter()
        .filter(|(c, _)| *c == busy)
        .map(|(_, k)| *k)
        .collect();
    assert_eq!(
        busy_ids,
        (0..40).collect::<Vec<_>>(),
        "each connection's in order"
    );
}

/// Issue 6 item 4: where the device offers SCTP checksum offload, data cores leave the CRC32c
/// to it. Every frame a data core queues carries a zero checksum field (RFC 9260 App. A: the
/// device computes it), the device fills it, the receiving device checks it and the receiving
/// core trusts its verdict; a frame the device found bad is dropped and counted.
#[test]
fn checksum_offload_leaves_the_crc32c_to_the_device() {
    use ddpdk_dataplane::port::mem::pair_with_offload;
    use ddpdk_dataplane::port::ChecksumOffload;
    use ddpdk_dataplane::wire::link::parse_sctp;
    let b4 = Ipv4Addr::new(198, 18, 0, 2);
    let offload = ChecksumOffload { tx: true, rx: true };
    let (pa, pb) = pair_with_offload(2, 4096, offload);
    let (pa, pb) = (Arc::new(pa), Arc::new(pb));
    let cfg = RuntimeConfig {
        cores: 1,
        ..RuntimeConfig::default()
    };
    let make = |p: &Arc<MemPort>, v4, v6, seed: u8| runtime(Arc::clone(p), v4, v6, seed, cfg);
    let (mut a, mut b) = (make(&pa, A4, A6, 1), make(&pb, b4, B6, 2));
    // What the client's data core hands the device, before the device touches it.
    let zero = Arc::new(std::sync::Mutex::new((0u64, 0u64)));
    let seen = Arc::clone(&zero);
    a.1[0].set_tap(Arc::new(std::sync::Mutex::new(move |f: &[u8]| {
        if let Ok(p) = parse_sctp(f) {
            let mut z = seen.lock().unwrap();
            z.0 += 1;
            if p.sctp[8..12] == [0, 0, 0, 0] {
                z.1 += 1;
            }
        }
    })));
    let bpd = b.0.memory_mut().alloc_pd();
    let region = b.0.memory_mut().alloc_region(1 << 16).unwrap();
    let reg =
        b.0.memory_mut()
            .register(remote_write(bpd, region, 1 << 16))
            .unwrap();
    let apd = a.0.memory_mut().alloc_pd();
    let data: Vec<u8> = (0..60_000u32).map(|i| (i * 7 + 3) as u8).collect();
    let mut l = Lockstep::open(a, b, IpAddr::V4(b4), PORT, apd, bpd);
    l.ca.submit(l.conn, tagged(1, reg.stag, 0, data.clone()))
        .unwrap();
    l.run_until("the completion", |l| {
        l.ea.iter().any(|e| matches!(e, Event::Completion { .. }))
    });
    let Lockstep {
        ea,
        cb,
        mut kb,
        now,
        ..
    } = l;
    let done: Vec<&Event> = ea
        .iter()
        .filter(|e| matches!(e, Event::Completion { .. }))
        .collect();
    assert!(
        matches!(done.as_slice(), [Event::Completion { completion, .. }] if completion.status == Status::Success),
        "{ea:?}"
    );
    let r = cb.memory().region(region).unwrap();
    assert_eq!(
        r.crc32c(0, data.len()).unwrap(),
        crc32c(&data),
        "placed bytes"
    );
    let (frames, zeroed) = *zero.lock().unwrap();
    assert!(
        frames > 40,
        "{frames} SCTP frames from the client's data core"
    );
    assert_eq!(zeroed, frames, "the data core computed no CRC32c");
    assert!(
        pa.crc_filled() >= frames,
        "the device filled {} of {frames}",
        pa.crc_filled()
    );
    assert_eq!(kb[0].stats().checksum_bad, 0);
    assert_eq!(kb[0].stats().discarded, 0);

    // A frame the device finds bad is dropped and counted, never handed to SCTP.
    let before = kb[0].stats();
    let peer_port_frame = {
        let mut iface = Interface::new(pa.mac(), Some(A4), None);
        iface.learn_static(IpAddr::V4(b4), pb.mac());
        let mut f = vec![0u8; 2048];
        let h = Interface::header_len(IpAddr::V4(b4));
        // An SCTP common header from the client's port to ours, with a wrong checksum.
        f[h..h + 2].copy_from_slice(&PORT.to_be_bytes());
        f[h + 2..h + 4].copy_from_slice(&PORT.to_be_bytes());
        f[h + 8..h + 12].copy_from_slice(&[1, 2, 3, 4]);
        let n = iface.frame_sctp(now, IpAddr::V4(b4), 12, &mut f).unwrap();
        f.truncate(n);
        f
    };
    let mut v = vec![ddpdk_dataplane::port::mem::HeapBuf::new(peer_port_frame)];
    assert_eq!(pa.tx_burst(0, &mut v), 1);
    kb[0].poll(now);
    let after = kb[0].stats();
    assert_eq!(after.checksum_bad, before.checksum_bad + 1);
    assert_eq!(after.discarded, before.discarded);
}

/// Issue 6 item 3, `rte_flow` where the device has it: the server's control thread installs a
/// device flow rule per association (its addresses and ports → the owning core's RX queue),
/// so the association's packets arrive at the owner and no core hands any to another; the rule
/// goes when the association ends. The same run without rules needs software dispatch (the
/// client's hash puts the association on the other queue), which is the contrast.
#[test]
fn flow_rules_steer_each_association_to_its_owner() {
    let run = |rules: bool| {
        let b4 = server_v4();
        let (pa, pb) = pair(CORES as u16 + 1, 4096);
        pb.set_flow_rules(rules);
        let (pa, pb) = (Arc::new(pa), Arc::new(pb));
        let cfg = |flow_rules| RuntimeConfig {
            cores: CORES,
            flow_rules,
            ..RuntimeConfig::default()
        };
        let make = |p: &Arc<MemPort>, v4, v6, seed: u8, flow_rules| {
            runtime(Arc::clone(p), v4, v6, seed, cfg(flow_rules))
        };
        let (a, b) = (make(&pa, A4, A6, 1, false), make(&pb, b4, B6, 2, rules));
        let (mut l, reg, region) = Lockstep::open_to_region(a, b, IpAddr::V4(b4), PORT, 1 << 18);
        // The INIT and COOKIE ECHO came before any rule (the COOKIE ECHO makes it): count
        // what the cores handed over after the session was up.
        let dispatched =
            |l: &Lockstep<MemPort>| -> u64 { l.kb.iter().map(|k| k.stats().dispatched_out).sum() };
        let before = dispatched(&l);
        if rules {
            let installed = pb.flow_rules();
            let owner = Steering::new(CORES).owner(IpAddr::V4(A4), IpAddr::V4(b4), PORT, PORT);
            assert_eq!(installed.len(), 1, "one rule per association");
            assert_eq!(installed[0].0.peer, IpAddr::V4(A4));
            assert_eq!(installed[0].0.local, IpAddr::V4(b4));
            assert_eq!(usize::from(installed[0].1), owner, "to the owner's queue");
        }
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 11 + 1) as u8).collect();
        l.ca.submit(l.conn, tagged(1, reg.stag, 0, data.clone()))
            .unwrap();
        l.run_until("the completion", |l| {
            l.ea.iter().any(|e| matches!(e, Event::Completion { .. }))
        });
        let placed =
            l.cb.memory()
                .region(region)
                .unwrap()
                .crc32c(0, data.len())
                .unwrap();
        assert_eq!(placed, crc32c(&data));
        l.ca.submit(l.conn, Op::Shutdown).unwrap();
        l.run_until("the close", |l| {
            l.eb.iter().any(|e| {
                matches!(
                    e,
                    Event::Indication {
                        indication: Indication::Closed(_),
                        ..
                    }
                )
            })
        });
        for _ in 0..10 {
            l.step();
        }
        (dispatched(&l) - before, l.cb.stats(), pb.flow_rules().len())
    };
    let (without, _, _) = run(false);
    assert!(
        without > 20,
        "{without} frames dispatched in software without rules"
    );
    let (with, stats, left) = run(true);
    assert_eq!(with, 0, "the device put every frame on its owner's queue");
    assert_eq!((stats.flow_rules, stats.flow_rules_refused), (1, 0));
    assert_eq!(stats.flow_rules_removed, 1);
    assert_eq!(left, 0, "the rule went with the association");
}

/// Issue 6 item 2 (DESIGN.md: "DATA PPID 17 → control thread"): every DDP Stream Session
/// Control message a data core receives goes, with its stream's session, to the control thread,
/// which runs the RFC 5043 §6 machine on it and sends the session back; the core holds the
/// stream's later chunks (and the connection's packets and operations) meanwhile. The session
/// opens (Initiate at the server, Accept at the client), a write goes through, and a Terminate
/// each way closes it, every one of those four messages run by a control thread, none by a
/// core; the ULP hears the same events as ever, in order.
#[test]
fn session_control_messages_run_on_the_control_thread() {
    let b4 = Ipv4Addr::new(198, 18, 0, 2);
    let (pa, pb) = pair(2, 4096);
    let (pa, pb) = (Arc::new(pa), Arc::new(pb));
    let cfg = RuntimeConfig {
        cores: 1,
        ..RuntimeConfig::default()
    };
    let make = |p: &Arc<MemPort>, v4, v6, seed: u8| runtime(Arc::clone(p), v4, v6, seed, cfg);
    let (a, b) = (make(&pa, A4, A6, 1), make(&pb, b4, B6, 2));
    let (mut l, reg, region) = Lockstep::open_to_region(a, b, IpAddr::V4(b4), PORT, 1 << 16);
    assert_eq!(
        l.cb.stats().session_messages,
        1,
        "the Initiate, at the server"
    );
    assert_eq!(
        l.ca.stats().session_messages,
        1,
        "the Accept, at the client"
    );
    let data: Vec<u8> = (0..50_000u32).map(|i| (i * 3 + 1) as u8).collect();
    l.ca.submit(l.conn, tagged(1, reg.stag, 0, data.clone()))
        .unwrap();
    l.ca.submit(l.conn, Op::Terminate { stream: 1 }).unwrap();
    l.run_until("both sides' session end", |l| {
        let ended = |events: &[Event]| {
            events.iter().any(|e| {
                matches!(
                    e,
                    Event::Indication {
                        indication: Indication::Session {
                            event: SessionEvent::SessionTerminated { .. },
                            ..
                        },
                        ..
                    }
                )
            })
        };
        // The client ended its session at once (it terminated); it then hears the server's
        // answering Terminate.
        ended(&l.ea)
            && ended(&l.eb)
            && session_event(&l.ea, l.conn, |e| {
                matches!(e, SessionEvent::TerminateReceived)
            })
    });
    assert!(session_event(&l.eb, l.server_conn(), |e| matches!(
        e,
        SessionEvent::TerminateReceived
    )));
    assert!(session_event(&l.ea, l.conn, |e| matches!(
        e,
        SessionEvent::TerminateReceived
    )));
    assert!(
        l.ea.iter()
            .any(|e| matches!(e, Event::Completion { completion, .. }
            if completion.status == Status::Success)),
        "the write before the Terminate completed"
    );
    let placed =
        l.cb.memory()
            .region(region)
            .unwrap()
            .crc32c(0, data.len())
            .unwrap();
    assert_eq!(placed, crc32c(&data));
    for (control, core) in [
        (l.ca.stats(), l.ka[0].stats()),
        (l.cb.stats(), l.kb[0].stats()),
    ] {
        assert_eq!(
            control.session_messages, 2,
            "Initiate or Accept, then a Terminate"
        );
        assert_eq!(
            core.sessions_lent, control.session_messages,
            "every one lent was run"
        );
    }
}

/// An association to an address no peer can have (unspecified, loopback, multicast,
/// broadcast, IPv4 or IPv6, or one of our own) is refused when asked for: it used to be made
/// and wait out the INIT's retransmissions.
#[test]
fn connect_refuses_addresses_no_peer_can_have() {
    let (pa, _pb) = pair(2, 64);
    let (mut ca, _ka) = runtime(pa, A4, A6, 1, RuntimeConfig::default());
    let now = Instant::from_nanos(1_000_000_000);
    for bad in [
        "0.0.0.0",
        "127.0.0.1",
        "224.0.0.1",
        "255.255.255.255",
        "240.0.0.1",
        "198.18.0.1",
        "::",
        "::1",
        "ff02::1",
        "2001:db8::1",
        "::ffff:127.0.0.1",
    ] {
        let peer: IpAddr = bad.parse().unwrap();
        match ca.connect(now, peer, PORT) {
            Err(ddpdk_control::runtime::RuntimeError::NotAPeer(..)) => {}
            other => panic!("{bad}: {other:?}"),
        }
    }
    assert_eq!(ca.stats().connected, 0);
    // A peer that can be one still can.
    assert!(ca
        .connect(now, IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)), PORT)
        .is_ok());
}

/// The announcements of a link-up period as (ARP Announcements, unsolicited Neighbor
/// Advertisements) that reached `pb`.
fn announcements(pb: &MemPort) -> (usize, usize) {
    let mut frames = Vec::new();
    for q in 0..pb.nb_rx_queues() {
        pb.rx_burst(q, &mut frames, 64);
    }
    let arp = frames
        .iter()
        .filter(|f| f.data()[12..14] == [0x08, 0x06])
        .count();
    let na = frames
        .iter()
        .filter(|f| f.data()[12..14] == [0x86, 0xdd] && f.data().get(54) == Some(&136))
        .count();
    (arp, na)
}

/// RFC 5227 §2.3: "ANNOUNCE_NUM ARP Announcements, spaced ANNOUNCE_INTERVAL seconds apart"
/// (2, 2 s), each with RFC 4861 §7.2.6's unsolicited Neighbor Advertisement; none while the
/// link is down (a device that refuses them would be offered them every turn), and the
/// two again when the link comes back up: the neighbours may have flushed or moved the
/// entry meanwhile.
#[test]
fn the_announcer_announces_twice_two_seconds_apart_and_again_after_the_link_comes_back_rfc5227_2_3()
{
    let (pa, pb) = pair(2, 1024);
    let pa = Arc::new(pa);
    pa.set_link_up(false);
    let (_control, mut cores) = runtime(Arc::clone(&pa), A4, A6, 1, RuntimeConfig::default());
    let core = &mut cores[0];
    core.announce();
    let t0 = Instant::from_nanos(1_000_000_000);
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    core.poll(at(0));
    core.poll(at(500));
    assert_eq!(announcements(&pb), (0, 0), "the link is down: nothing");
    assert!(
        core.sleep_limit(at(500))
            .is_some_and(|d| d <= ANNOUNCE_INTERVAL),
        "the announcer comes back to look at the link"
    );
    pa.set_link_up(true);
    core.poll(at(650));
    assert_eq!(announcements(&pb), (1, 1), "the link is up: the first");
    core.poll(at(1650));
    assert_eq!(announcements(&pb), (0, 0), "not before ANNOUNCE_INTERVAL");
    assert!(
        core.sleep_limit(at(1650))
            .is_some_and(|d| d <= Duration::from_millis(1000)),
        "a sleeping core wakes for the second"
    );
    core.poll(at(2650));
    assert_eq!(
        announcements(&pb),
        (1, 1),
        "the second, 2 s after the first"
    );
    for ms in [4650, 6650, 20_000] {
        core.poll(at(ms));
    }
    assert_eq!(announcements(&pb), (0, 0), "ANNOUNCE_NUM is two");
    pa.set_link_up(false);
    core.poll(at(20_200));
    pa.set_link_up(true);
    core.poll(at(20_400));
    core.poll(at(22_400));
    core.poll(at(30_000));
    // Two, not one: the second of a new period.
    let mut seen = announcements(&pb);
    assert_eq!(seen, (2, 2), "the link came back: two more");
    core.poll(at(40_000));
    seen = announcements(&pb);
    assert_eq!(seen, (0, 0));
    assert_eq!(
        core.interface().stats().announcements,
        8,
        "four of each family"
    );
}

/// RFC 5227 §2.3, RFC 4861 §7.2.6: a started endpoint announces its link address for each of
/// its addresses from one data core however many it runs (the first of two, the second two
/// seconds later: `the_announcer_*` below), so a neighbour that cached
/// the link address of an earlier instance (restarted on a new MAC) updates it at once
/// (RFC 826's merge; `an_announcement_moves_a_neighbours_cached_link_address_*` in `net`).
#[test]
fn a_started_endpoint_announces_its_link_address_from_one_core_rfc5227_2_3_rfc4861_7_2_6() {
    let (pa, pb) = pair(3, 1024);
    let a_mac = pa.mac();
    let (control, cores) = runtime(
        pa,
        A4,
        A6,
        1,
        RuntimeConfig {
            cores: 2,
            ..RuntimeConfig::default()
        },
    );
    let clock = Clock::new();
    let side = Side::start(control, cores, clock);
    let mut frames = Vec::new();
    let limit = std::time::Instant::now() + Duration::from_secs(30);
    while frames.len() < 2 && std::time::Instant::now() < limit {
        for q in 0..pb.nb_rx_queues() {
            pb.rx_burst(q, &mut frames, 32);
        }
        std::thread::yield_now();
    }
    // Anything a second core announced would have left by now too.
    std::thread::sleep(Duration::from_millis(100));
    for q in 0..pb.nb_rx_queues() {
        pb.rx_burst(q, &mut frames, 32);
    }
    side.stop();
    let frames: Vec<Vec<u8>> = frames.iter().map(|b| b.data().to_vec()).collect();
    let arp: Vec<_> = frames
        .iter()
        .filter(|f| f[12..14] == [0x08, 0x06])
        .collect();
    assert_eq!(arp.len(), 1, "one ARP Announcement: {frames:?}");
    let a = &arp[0][14..];
    assert_eq!(arp[0][..6], [0xff; 6], "broadcast");
    assert_eq!(a[6..8], [0, 1], "RFC 5227 §3: an ARP Request");
    assert_eq!(a[8..14], a_mac);
    assert_eq!(a[14..18], A4.octets(), "the sender: our address");
    assert_eq!(a[24..28], A4.octets(), "the target: the same");
    let na: Vec<_> = frames
        .iter()
        .filter(|f| f[12..14] == [0x86, 0xdd] && f.get(54) == Some(&136))
        .collect();
    assert_eq!(na.len(), 1, "one unsolicited Neighbor Advertisement");
    let na = na[0];
    assert_eq!(
        na[38..54],
        Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1).octets()
    );
    assert_eq!(
        na[58], 0x20,
        "RFC 4861 §7.2.6: Solicited clear, Override set"
    );
    assert_eq!(na[62..78], A6.octets(), "the target: our address");
    assert_eq!(na[80..86], a_mac, "its target link-layer address option");
    assert_eq!(frames.len(), 2, "nothing else: {frames:?}");
}

/// RFC 5041 §7.1 check 2, judged when a receive is posted, on a data core of its own thread:
/// a registration and then a `PostRecv` naming its STag may land within one turn of the
/// core, the registration after the turn's first look at its STag channel. The op is checked
/// against the table with the STag in it (the core applies the STag changes before each
/// command op): posted, never refused `BadSink` (session 72's review found it refused). A
/// race of two threads, so many rounds of register-then-post, each of which must be posted.
#[test]
fn a_receive_posted_right_after_its_registration_is_taken_on_a_threaded_core() {
    const ROUNDS: u64 = 250;
    let b4 = Ipv4Addr::new(198, 18, 0, 2);
    let clock = Clock::new();
    let (pa, pb) = pair(2, 1024);
    let cfg = RuntimeConfig {
        cores: 1,
        ..RuntimeConfig::default()
    };
    let (ca, cores_a) = runtime(pa, A4, A6, 1, cfg);
    let (cb, cores_b) = runtime(pb, b4, B6, 2, cfg);
    let mut a = Side::start(ca, cores_a, clock);
    let mut b = Side::start(cb, cores_b, clock);
    let conn = a
        .control
        .connect(clock.now(), IpAddr::V4(b4), PORT)
        .unwrap();
    until("the association", &mut a, &mut b, clock, |a, b| {
        a.events.iter().any(|e| {
            matches!(
                e,
                Event::Indication {
                    indication: Indication::Connected { .. },
                    ..
                }
            )
        }) && b.events.iter().any(|e| matches!(e, Event::Accepted { .. }))
    });
    let server = b
        .events
        .iter()
        .find_map(|e| match e {
            Event::Accepted { conn, .. } => Some(*conn),
            _ => None,
        })
        .unwrap();
    let apd = a.control.memory_mut().alloc_pd();
    let bpd = b.control.memory_mut().alloc_pd();
    a.control
        .submit(
            conn,
            Op::Initiate {
                stream: 1,
                pd: apd,
                private_data: Vec::new(),
            },
        )
        .unwrap();
    until("the Initiate", &mut a, &mut b, clock, |_, b| {
        session_event(&b.events, server, |e| {
            matches!(e, SessionEvent::InitiateReceived { .. })
        })
    });
    b.control
        .submit(
            server,
            Op::Accept {
                stream: 1,
                pd: bpd,
                private_data: Vec::new(),
            },
        )
        .unwrap();
    until("the Accept", &mut a, &mut b, clock, |a, _| {
        session_event(&a.events, conn, |e| {
            matches!(e, SessionEvent::Accepted { .. })
        })
    });
    let region = b.control.memory_mut().alloc_region(1 << 20).unwrap();
    for wr_id in 0..ROUNDS {
        let reg = b
            .control
            .memory_mut()
            .register(MemoryRegistration {
                pd: bpd,
                region,
                offset: wr_id * 4096,
                len: 4096,
                access: Access::LOCAL_WRITE,
                stream: None,
                to_base: 0,
            })
            .unwrap();
        let buffer = b
            .control
            .memory()
            .receive_buffer(bpd, reg.stag, 0, 4096)
            .unwrap();
        b.control
            .submit(
                server,
                Op::PostRecv {
                    stream: 1,
                    qn: 0,
                    wr_id,
                    buffer,
                },
            )
            .unwrap();
    }
    // Posted back to back: a turn that takes one op from its command ring takes the next
    // too, and the registration before it landed after the turn's first look.
    let answered = |e: &Event| matches!(e, Event::Posted { .. } | Event::Refused { .. });
    until("every post's answer", &mut a, &mut b, clock, |_, b| {
        b.events.iter().filter(|e| answered(e)).count() == ROUNDS as usize
    });
    let refused: Vec<&Event> = b
        .events
        .iter()
        .filter(|e| matches!(e, Event::Refused { .. }))
        .collect();
    assert!(refused.is_empty(), "{} refused: {refused:?}", refused.len());
    a.stop();
    b.stop();
}
