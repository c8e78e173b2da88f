//! Regressions from an independent review of `runtime`: each test demonstrated a defect (named
//! in the comment above it) and failed before its fix.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
use rt::{endpoint_with, remote_write, runtime, runtime_with, session_event, tagged, PORT};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use ddpdk_control::conn::Indication;
use ddpdk_control::memory::MemoryRegistration;
use ddpdk_control::runtime::{
    ConnHandle, Control, DataCore, Event, Op, RuntimeConfig, Steering, MAX_CONNECTIONS_PER_CORE,
};
use ddpdk_control::session::Event as SessionEvent;
use ddpdk_dataplane::mem::Access;
use ddpdk_dataplane::net::{Interface, Rx};
use ddpdk_dataplane::port::mem::{pair, HeapBuf, MemPort};
use ddpdk_dataplane::port::{PacketBuf, Port};
use ddpdk_dataplane::sctp::{Config, Instant};

const A4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

fn t0() -> Instant {
    Instant::from_nanos(1_000_000_000)
}

/// Two endpoints, everything polled on this thread in virtual time.
struct Duo {
    ca: Control<MemPort>,
    ka: Vec<DataCore<MemPort>>,
    ea: Vec<Event>,
    cb: Control<MemPort>,
    kb: Vec<DataCore<MemPort>>,
    eb: Vec<Event>,
    now: Instant,
}

impl Duo {
    fn new(b4: Ipv4Addr, cfg: RuntimeConfig) -> Duo {
        let (pa, pb) = pair((cfg.cores + 1) as u16, 4096);
        let (ca, ka) = runtime(pa, A4, A6, 1, cfg);
        let (cb, kb) = runtime(pb, b4, B6, 2, cfg);
        Duo {
            ca,
            ka,
            ea: Vec::new(),
            cb,
            kb,
            eb: Vec::new(),
            now: t0(),
        }
    }

    fn turn(&mut self, poll_a: bool) {
        for k in &mut self.ka {
            k.poll(self.now);
        }
        for k in &mut self.kb {
            k.poll(self.now);
        }
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
        self.now += Duration::from_micros(500);
    }
}

fn connected(events: &[Event], conn: ConnHandle) -> bool {
    events.iter().any(|e| {
        matches!(e, Event::Indication { conn: c, indication: Indication::Connected { .. } } if *c == conn)
    })
}

// ---------------------------------------------------------------------------------------------
// Review finding, fixed (steering, v4-mapped): `Control::connect` steers with the address exactly as the ULP
// gave it. For an IPv4-mapped IPv6 peer (::ffff:a.b.c.d) it hashes the 32-byte IPv6 form with
// our IPv6 address, while the association talks IPv4 (`peer_ip` unmaps it) and its packets
// come back as IPv4 and are steered by the 8-byte IPv4 hash: they never reach the core that
// owns the association, and the association never comes up.
// ---------------------------------------------------------------------------------------------
#[test]
fn connect_to_a_v4_mapped_peer_is_steered_where_its_packets_go() {
    let s = Steering::new(2);
    let b4 = (2..=250u8)
        .map(|k| Ipv4Addr::new(198, 18, 0, k))
        .find(|&b4| {
            s.owner(IpAddr::V6(b4.to_ipv6_mapped()), IpAddr::V6(A6), PORT, PORT)
                != s.owner(IpAddr::V4(b4), IpAddr::V4(A4), PORT, PORT)
        })
        .unwrap();
    let mut d = Duo::new(
        b4,
        RuntimeConfig {
            cores: 2,
            ..RuntimeConfig::default()
        },
    );
    let conn =
        d.ca.connect(d.now, IpAddr::V6(b4.to_ipv6_mapped()), PORT)
            .unwrap();
    for _ in 0..40_000 {
        if connected(&d.ea, conn) {
            break;
        }
        d.turn(true);
    }
    assert!(
        connected(&d.ea, conn),
        "never connected after 20 s (owner {:?}, IPv4 packets steered to {}): {:?}",
        d.ca.owner(conn),
        s.owner(IpAddr::V4(b4), IpAddr::V4(A4), PORT, PORT),
        d.ea
    );
}

/// A frame carrying the SCTP packet at `frame[h..h+len]` from `iface` to `to`.
fn frame(iface: &mut Interface, to: IpAddr, mut buf: Vec<u8>, len: usize) -> Vec<u8> {
    let n = iface.frame_sctp(t0(), to, len, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

// ---------------------------------------------------------------------------------------------
// Review finding, fixed (duplicate association): a COOKIE ECHO that reaches the control thread twice before
// the owning core has processed the first Adopt (a network duplicate, or the peer's T1-cookie
// retransmission while the Adopt waits in the command ring) makes a second Connection for the
// same association: the stateless `Listener` cannot know, and `Control::packet`
// (runtime.rs `Accept::Connection` arm) neither checks `owners` nor asks the core. The ULP
// hears two `Accepted` and the core holds two slots for one peer address and port.
// ---------------------------------------------------------------------------------------------
#[test]
fn a_duplicated_cookie_echo_makes_one_association() {
    let b4 = Ipv4Addr::new(198, 18, 0, 2);
    let (pa, pb) = pair(2, 1024);
    let b_mac = pb.mac();
    let (mut cb, mut kb) = runtime(
        pb,
        b4,
        B6,
        2,
        RuntimeConfig {
            cores: 1,
            ..RuntimeConfig::default()
        },
    );
    // The peer: a sans-IO endpoint behind an interface on the other end of the pair.
    let mut ep = endpoint_with(9, Config::default());
    let now = t0();
    let mut assoc = ep.connect(now, IpAddr::V4(b4), PORT);
    // (The peer's endpoint has local port PORT too; the server sees it as peer port 5000.)
    let mut iface = Interface::new(pa.mac(), Some(A4), None);
    iface.learn_static(IpAddr::V4(b4), b_mac);
    let h = Interface::header_len(IpAddr::V4(b4));
    let mut buf = vec![0u8; 9300];
    let len = assoc.poll_transmit(now, &mut buf[h..]).unwrap();
    let init = frame(&mut iface, IpAddr::V4(b4), buf.clone(), len);
    assert_eq!(pa.tx_burst(0, &mut vec![HeapBuf::new(init)]), 1);
    kb[0].poll(now);
    cb.poll(now);
    let mut got = Vec::new();
    pa.rx_burst(1, &mut got, 32);
    assert_eq!(got.len(), 1, "INIT ACK");
    let mut reply = [0u8; 128];
    let Rx::Sctp(f) = iface.receive(got[0].data(), &mut reply) else {
        panic!("not SCTP")
    };
    assoc
        .handle(now, f.sctp, &mut |_: ddpdk_dataplane::sctp::Message<'_>| {})
        .unwrap();
    let len = assoc.poll_transmit(now, &mut buf[h..]).unwrap();
    let echo = frame(&mut iface, IpAddr::V4(b4), buf.clone(), len);
    // The network duplicates the COOKIE ECHO.
    let mut two = vec![HeapBuf::new(echo.clone()), HeapBuf::new(echo)];
    assert_eq!(pa.tx_burst(0, &mut two), 2);
    let mut events = Vec::new();
    for _ in 0..10 {
        kb[0].poll(now);
        cb.poll(now);
        while let Some(e) = cb.poll_event() {
            events.push(e);
        }
    }
    let accepted = events
        .iter()
        .filter(|e| matches!(e, Event::Accepted { .. }))
        .count();
    assert_eq!(
        (accepted, kb[0].stats().adopted),
        (1, 1),
        "one peer association became {accepted} connections: {events:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Review finding, fixed (blocking/deadlock, revoke.rs): `Coordinator::revoke` (and `register`) use a blocking
// `SyncSender::send` on each core's 64-deep STag channel. With a core that stalled (the case
// `RevokeError::Timeout` exists for) and 64 registrations it has not applied, `deregister`
// blocks the control thread forever instead of returning `Timeout` after `revoke_timeout`
// (1 s). revoke.rs `core.send(Command::Invalidate(..))`.
// ---------------------------------------------------------------------------------------------
#[test]
fn deregister_with_a_stalled_core_times_out_instead_of_hanging() {
    let (pa, pb) = pair(2, 16);
    let (mut cb, kb) = runtime(
        pb,
        Ipv4Addr::new(198, 18, 0, 2),
        B6,
        2,
        RuntimeConfig {
            cores: 1,
            ..RuntimeConfig::default()
        },
    );
    let (tx, rx) = std::sync::mpsc::channel();
    // The core is never polled (stalled).
    std::thread::spawn(move || {
        let m = cb.memory_mut();
        let pd = m.alloc_pd();
        let region = m.alloc_region(1 << 16).unwrap();
        let mut stags = Vec::new();
        for k in 0..64u64 {
            stags.push(
                m.register(MemoryRegistration {
                    pd,
                    region,
                    offset: k * 1024,
                    len: 1024,
                    access: Access::REMOTE_WRITE,
                    stream: None,
                    to_base: 0,
                })
                .unwrap()
                .stag,
            );
        }
        let _ = tx.send(m.deregister(stags[0]));
        drop((cb, pa));
    });
    let r = rx.recv_timeout(Duration::from_secs(10));
    assert!(
        matches!(r, Ok(Err(_))),
        "deregister did not return within 10 s (revoke_timeout is 1 s); recv: {r:?}"
    );
    drop(kb);
}

/// Fast INIT failure and small send buffers, for tests that open hundreds of associations.
fn short_lived() -> Config {
    Config {
        max_init_retransmits: 1,
        rto_max: Duration::from_secs(2),
        send_slots: 8,
        ..Config::default()
    }
}

/// Opens `n` associations from a one-core runtime towards addresses that never answer, putting
/// each command directly in the (empty) command ring and polling the core in between, so the
/// control thread is never polled.
fn open(
    control: &mut Control<MemPort>,
    core: &mut DataCore<MemPort>,
    now: Instant,
    n: usize,
    first: u16,
    depth: usize,
) -> Vec<ConnHandle> {
    let mut conns = Vec::new();
    for k in 0..n {
        let peer = IpAddr::V4(Ipv4Addr::new(198, 19, (k / 250) as u8, (k % 250) as u8 + 1));
        conns.push(control.connect(now, peer, first + k as u16).unwrap());
        if (k + 1) % depth == 0 {
            core.poll(now);
        }
    }
    core.poll(now);
    conns
}

// ---------------------------------------------------------------------------------------------
// Review finding, fixed (lost indications): when a core holds MAX_CONNECTIONS_PER_CORE connections, `adopt`
// (runtime.rs, `None => self.slots.iter().position(.. is_closed())`) overwrites a closed
// connection without draining it. Its `Closed` indication (and any flushed completions) may
// still be inside the connection because the event ring was full: they are lost and the ULP
// never hears that the association ended.
// ---------------------------------------------------------------------------------------------
#[test]
fn reusing_a_closed_slot_loses_its_closed_indication() {
    const DEPTH: usize = 4;
    let (pa, pb) = pair(2, 1 << 16);
    let (mut ca, mut ka) = runtime_with(
        pa,
        A4,
        A6,
        1,
        RuntimeConfig {
            cores: 1,
            ring_depth: DEPTH,
            ..RuntimeConfig::default()
        },
        short_lived(),
    );
    let mut now = t0();
    let first = open(
        &mut ca,
        &mut ka[0],
        now,
        MAX_CONNECTIONS_PER_CORE,
        10_000,
        DEPTH,
    );
    // Every INIT times out; the control thread is busy elsewhere, so the Closed indications
    // queue in the connections behind the full event ring.
    for _ in 0..20 {
        now += Duration::from_secs(2);
        ka[0].poll(now);
    }
    // Two more rounds of new associations reuse closed slots.
    let _more = open(&mut ca, &mut ka[0], now, 2 * DEPTH, 20_000, DEPTH);
    // Now the ULP catches up.
    let mut events = Vec::new();
    for _ in 0..2000 {
        ka[0].poll(now);
        ca.poll(now);
        while let Some(e) = ca.poll_event() {
            events.push(e);
        }
    }
    let closed: std::collections::HashSet<ConnHandle> = events
        .iter()
        .filter_map(|e| match e {
            Event::Indication {
                conn,
                indication: Indication::Closed(_),
            } => Some(*conn),
            _ => None,
        })
        .collect();
    let missing: Vec<_> = first.iter().filter(|c| !closed.contains(c)).collect();
    assert!(
        missing.is_empty(),
        "{} of {} associations ended without a Closed indication: {missing:?}",
        missing.len(),
        first.len()
    );
    drop(pb);
}

// ---------------------------------------------------------------------------------------------
// Review finding, fixed (lost association): when a core is full of live connections, `adopt` aborts the new
// one and only bumps `CoreStats::refused`: no event reaches the ULP. `Control` keeps the
// handle in `owners`, so for `connect()` the ULP holds a handle to an association that no
// longer exists and never gets `Closed` (for an accepted one it got `Accepted`, then nothing).
// ---------------------------------------------------------------------------------------------
#[test]
fn a_refused_adoption_is_reported_to_the_ulp() {
    const DEPTH: usize = 64;
    let (pa, pb) = pair(2, 1 << 16);
    let (mut ca, mut ka) = runtime_with(
        pa,
        A4,
        A6,
        1,
        RuntimeConfig {
            cores: 1,
            ring_depth: DEPTH,
            ..RuntimeConfig::default()
        },
        Config::default(),
    );
    let now = t0();
    let _full = open(
        &mut ca,
        &mut ka[0],
        now,
        MAX_CONNECTIONS_PER_CORE,
        10_000,
        DEPTH,
    );
    let extra = ca
        .connect(now, IpAddr::V4(Ipv4Addr::new(198, 19, 9, 9)), 7)
        .unwrap();
    let mut events = Vec::new();
    for _ in 0..100 {
        ka[0].poll(now);
        ca.poll(now);
        while let Some(e) = ca.poll_event() {
            events.push(e);
        }
    }
    assert_eq!(ka[0].stats().refused, 1, "{:?}", ka[0].stats());
    let heard = events.iter().any(|e| match e {
        Event::Indication { conn, .. }
        | Event::Completion { conn, .. }
        | Event::Refused { conn, .. }
        | Event::Unknown { conn, .. } => *conn == extra,
        _ => false,
    });
    assert!(
        heard || ca.owner(extra).is_none(),
        "the refused association is silently gone; control still names core {:?} its owner",
        ca.owner(extra)
    );
    drop(pb);
}

// ---------------------------------------------------------------------------------------------
// Review finding, fixed (lost completions): `DataCore::upcalls` drains every indication of a connection
// before any of its completions, so `Closed` overtakes completions the connection produced
// before it. A ULP that does what `Control::forget` documents ("after its Closed indication")
// while the event ring is under pressure makes the core drop the slot with those completions
// still inside (`Command::Forget` => `self.slots[k] = None`): posted sends never complete.
// ---------------------------------------------------------------------------------------------
#[test]
fn forget_after_closed_loses_no_completion() {
    const DEPTH: usize = 4;
    let b4 = Ipv4Addr::new(198, 18, 0, 2);
    let mut d = Duo::new(
        b4,
        RuntimeConfig {
            cores: 1,
            ring_depth: DEPTH,
            ..RuntimeConfig::default()
        },
    );
    let conn = d.ca.connect(d.now, IpAddr::V4(b4), PORT).unwrap();
    let bpd = d.cb.memory_mut().alloc_pd();
    let region = d.cb.memory_mut().alloc_region(1 << 16).unwrap();
    let reg =
        d.cb.memory_mut()
            .register(remote_write(bpd, region, 1 << 16))
            .unwrap();
    let apd = d.ca.memory_mut().alloc_pd();
    let mut step = 0;
    while !session_event(&d.ea, conn, |e| matches!(e, SessionEvent::Accepted { .. })) {
        step += 1;
        assert!(step < 100_000, "no session");
        d.turn(true);
        if connected(&d.ea, conn) && step % 1000 == 1 {
            let _ = d.ca.submit(
                conn,
                Op::Initiate {
                    stream: 1,
                    pd: apd,
                    private_data: Vec::new(),
                },
            );
        }
        let eb = std::mem::take(&mut d.eb);
        for e in eb {
            if let Event::Indication {
                conn: c,
                indication:
                    Indication::Session {
                        event: SessionEvent::InitiateReceived { .. },
                        ..
                    },
            } = e
            {
                d.cb.submit(
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
    }
    for _ in 0..100 {
        d.turn(true);
    }
    d.ea.clear();
    // Sends, then an abort, straight into the command ring; B is not polled, so nothing is
    // acknowledged: every send completes Flushed.
    let now = d.now;
    let mut posted = 0u64;
    for round in 0..2u64 {
        let n = if round == 0 {
            DEPTH as u64
        } else {
            DEPTH as u64 - 1
        };
        for k in 0..n {
            d.ca.submit(conn, tagged(posted + k, reg.stag, 0, vec![1; 100]))
                .unwrap();
        }
        posted += n;
        if round == 1 {
            d.ca.submit(conn, Op::Abort).unwrap();
        }
        d.ka[0].poll(now);
    }
    // The ULP: forget the connection as soon as it hears Closed; keep every event.
    let mut forgotten = false;
    for _ in 0..200 {
        d.ca.poll(now);
        while let Some(e) = d.ca.poll_event() {
            if !forgotten
                && matches!(e, Event::Indication { conn: c, indication: Indication::Closed(_) } if c == conn)
            {
                d.ca.forget(conn).unwrap();
                forgotten = true;
            }
            d.ea.push(e);
        }
        d.ka[0].poll(now);
    }
    assert!(forgotten, "{:?}", d.ea);
    let done =
        d.ea.iter()
            .filter(|e| matches!(e, Event::Completion { conn: c, .. } if *c == conn))
            .count();
    assert_eq!(
        done as u64, posted,
        "completions of posted sends lost: {:?}",
        d.ea
    );
    // The core keeps what the forgotten connection counted: its totals only grow (telemetry
    // and Prometheus read them as counters).
    let r = d.ka[0].report();
    assert!(r.assocs.iter().all(|a| a.conn != conn), "forgotten");
    assert!(r.conn_totals.segments_out > 0, "{:?}", r.conn_totals);
}
