//! The multi-core runtime over the seeded hostile network of the SCTP tests, in virtual time:
//! two endpoints with two data cores each, every frame (ARP included) lost, duplicated,
//! reordered, corrupted or delayed at random, and delivered to a random RX queue of the
//! receiving port (a device that spreads without regard to associations, so the cores hand
//! packets to each other all the time). For each seed: associations over IPv4 and IPv6, a DDP
//! session on each, tagged writes of random sizes into the server's region, every completion a
//! success and exactly once, the placed bytes exact, then SHUTDOWN and every association
//! closed on both sides.
//!
//! A failing seed replays alone: `RT_SIM_SEED=<n> cargo test -p ddpdk-control --test
//! runtime_sim -- one_seed --nocapture`; `RT_SIM_SEEDS=<n>` runs more.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
mod world;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;

use ddpdk_control::conn::{ConnConfig, Indication, Payload, Status};
use ddpdk_control::memory::MemoryRegistration;
use ddpdk_control::runtime::{build, ConnHandle, Control, DataCore, Event, Op, RuntimeConfig};
use ddpdk_control::session::{Event as SessionEvent, PendingLimit};
use ddpdk_dataplane::mem::Access;
use ddpdk_dataplane::net::Interface;
use ddpdk_dataplane::port::mem::{pair, HeapBuf, MemPort};
use ddpdk_dataplane::port::{PacketBuf, Port};
use ddpdk_dataplane::sctp::{Config, Endpoint, Instant};
use rt::{session_event, tagged};
use world::{Net, NetConfig, Rng};

const PORT: u16 = 5000;
const CORES: usize = 2;
const QUEUES: u16 = CORES as u16 + 1;
const A4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
const REGION: usize = 1 << 20;

struct End {
    control: Control<MemPort>,
    cores: Vec<DataCore<MemPort>>,
    /// The far end of this endpoint's port pair: what the endpoint sends comes out here, what
    /// arrives here reaches the endpoint.
    wire: MemPort,
    events: Vec<Event>,
}

fn end(v4: Ipv4Addr, v6: Ipv6Addr, mac: [u8; 6], link_mtu: usize, rng: &mut Rng) -> End {
    let (port, wire) = pair(QUEUES, 1 << 14);
    // Each end's pair is its own, so the pairs' MACs repeat: the endpoints get distinct ones.
    let iface = Interface::new(mac, Some(v4), Some(v6));
    let ep = Endpoint::new(
        Config {
            local_port: PORT,
            ..world::sctp_config(link_mtu - 40)
        },
        rng.bytes32(),
    )
    .unwrap();
    let (control, cores) = build(
        Arc::new(port),
        iface,
        ep,
        ConnConfig::default(),
        PendingLimit::new(8),
        RuntimeConfig {
            cores: CORES,
            ring_depth: 64,
            link_mtu,
            random: rng.next_u64(),
            ..RuntimeConfig::default()
        },
    )
    .unwrap();
    End {
        control,
        cores,
        wire,
        events: Vec::new(),
    }
}

struct Sim {
    now: Instant,
    net: Net,
    rng: Rng,
    a: End,
    b: End,
}

impl Sim {
    /// Polls everything at `now` until nothing moves, then advances time to the next frame
    /// arrival or timer. False when nothing is left to happen.
    fn step(&mut self) -> bool {
        for _ in 0..10_000 {
            let mut work = 0;
            for (e, to_b) in [(&mut self.a, true), (&mut self.b, false)] {
                for k in &mut e.cores {
                    work += k.poll(self.now);
                }
                work += e.control.poll(self.now);
                while let Some(ev) = e.control.poll_event() {
                    e.events.push(ev);
                }
                let mut out = Vec::new();
                for q in 0..QUEUES {
                    e.wire.rx_burst(q, &mut out, 64);
                }
                work += out.len();
                for f in out {
                    self.net.send(self.now, to_b, f.data());
                }
            }
            while let Some((to_b, bytes)) = self.net.pop_due(self.now) {
                work += 1;
                let dst = if to_b { &self.b } else { &self.a };
                let q = self.rng.below(u64::from(QUEUES)) as u16;
                let mut v = vec![HeapBuf::new(bytes)];
                // A full queue drops, as a device's would.
                let _ = dst.wire.tx_burst(q, &mut v);
            }
            if work == 0 {
                let timers = self
                    .a
                    .cores
                    .iter()
                    .chain(&self.b.cores)
                    .filter_map(|k| k.poll_timeout())
                    .min();
                let next = match (self.net.next_at(), timers) {
                    (Some(x), Some(y)) => x.min(y),
                    (x, y) => match x.or(y) {
                        Some(t) => t,
                        None => return false,
                    },
                };
                // The control threads' outboxes and neighbour solicitations move on polls:
                // never stand still, never jump past a millisecond of busy work.
                self.now = next.max(self.now + Duration::from_micros(100));
                return true;
            }
        }
        self.now += Duration::from_millis(1);
        true
    }

    fn run_until(&mut self, what: &str, seed: u64, mut done: impl FnMut(&mut Sim) -> bool) {
        let limit = self.now + Duration::from_secs(900);
        while !done(self) {
            let more = self.step();
            assert!(
                self.now < limit && (more || done(self)),
                "seed {seed}: no {what} after 900 s of virtual time (net {:?})\nclient: {:?}\nserver: {:?}",
                self.net.stats,
                &self.a.events[self.a.events.len().saturating_sub(6)..],
                &self.b.events[self.b.events.len().saturating_sub(6)..],
            );
        }
    }
}

fn accepted(e: &End) -> Vec<ConnHandle> {
    e.events
        .iter()
        .filter_map(|x| match x {
            Event::Accepted { conn, .. } => Some(*conn),
            _ => None,
        })
        .collect()
}

fn count(e: &End, f: impl Fn(&Event) -> bool) -> usize {
    e.events.iter().filter(|x| f(x)).count()
}

/// Runs one seed; returns the frames the data cores handed to each other.
fn run_seed(seed: u64) -> u64 {
    let mut rng = Rng::new(seed);
    let mut cfg = NetConfig::hostile(&mut rng);
    // The sim's MTU is SCTP bytes; here it limits frames, and the link MTU follows from it.
    let link_mtu = (cfg.mtu + 20).max(1280);
    cfg.mtu = link_mtu + 14;
    let net = Net::new(cfg, Rng::new(rng.next_u64()));
    let a = end(A4, A6, [2, 0, 0, 0, 0, 0xa], link_mtu, &mut rng);
    let b = end(B4, B6, [2, 0, 0, 0, 0, 0xb], link_mtu, &mut rng);
    let mut s = Sim {
        now: Instant::from_nanos(1_000_000_000),
        net,
        rng: Rng::new(rng.next_u64()),
        a,
        b,
    };
    let bpd = s.b.control.memory_mut().alloc_pd();
    let region = s.b.control.memory_mut().alloc_region(REGION).unwrap();
    let reg =
        s.b.control
            .memory_mut()
            .register(MemoryRegistration {
                pd: bpd,
                region,
                offset: 0,
                len: REGION as u64,
                access: Access::REMOTE_WRITE,
                stream: None,
                to_base: 0,
            })
            .unwrap();
    let apd = s.a.control.memory_mut().alloc_pd();
    // Half the writes leave from the client's own region (zero-copy transmit: packets with
    // holes, buffer chains, retransmissions re-reading the region).
    let source = s.a.control.memory_mut().alloc_region(REGION).unwrap();
    let peers = [IpAddr::V4(B4), IpAddr::V6(B6)];
    let now = s.now;
    let conns: Vec<ConnHandle> = peers
        .iter()
        .map(|&p| s.a.control.connect(now, p, PORT).unwrap())
        .collect();
    let mut initiated = Vec::new();
    let mut answered = Vec::new();
    s.run_until("associations and sessions", seed, |s| {
        // The client initiates once its association is up; the server accepts each Initiate.
        for &c in &conns {
            let up = s.a.events.iter().any(|e| {
                matches!(e, Event::Indication { conn, indication: Indication::Connected { .. } }
                    if *conn == c)
            });
            if up && !initiated.contains(&c) {
                initiated.push(c);
                let op = Op::Initiate {
                    stream: 1,
                    pd: apd,
                    private_data: b"sim".to_vec(),
                };
                s.a.control.submit(c, op).unwrap();
            }
        }
        for c in accepted(&s.b) {
            let asked = session_event(&s.b.events, c, |e| {
                matches!(e, SessionEvent::InitiateReceived { .. })
            });
            if asked && !answered.contains(&c) {
                answered.push(c);
                let op = Op::Accept {
                    stream: 1,
                    pd: bpd,
                    private_data: Vec::new(),
                };
                s.b.control.submit(c, op).unwrap();
            }
        }
        for e in s.a.events.iter().chain(&s.b.events) {
            assert!(
                !matches!(e, Event::Refused { .. } | Event::Unknown { .. }),
                "seed {seed}: {e:?}"
            );
        }
        conns.iter().all(|&c| {
            session_event(&s.a.events, c, |e| {
                matches!(e, SessionEvent::Accepted { .. })
            })
        })
    });
    assert_eq!(
        accepted(&s.b).len(),
        2,
        "seed {seed}: one association per peer address"
    );

    // Tagged writes of random sizes, each association into its half of the region.
    let mut image = vec![0u8; REGION];
    let mut expected = HashMap::new();
    let mut wr = 0u64;
    for (k, &c) in conns.iter().enumerate() {
        let mut off = k * REGION / 2;
        let end = (k + 1) * REGION / 2;
        let big = seed.is_multiple_of(7);
        for _ in 0..1 + rng.below(6) {
            let len = 1 + rng.below(if big { 200_000 } else { 20_000 }) as usize;
            if off + len > end {
                break;
            }
            let data: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            image[off..off + len].copy_from_slice(&data);
            wr += 1;
            expected.insert(wr, c);
            let payload = if wr % 2 == 1 {
                let r = s.a.control.memory().region(source).unwrap();
                r.place(off as u64, &data).unwrap();
                Payload::Region {
                    region: source,
                    offset: off as u64,
                    len: len as u32,
                }
            } else {
                data.into()
            };
            s.a.control
                .submit(c, tagged(wr, reg.stag, off as u64, payload))
                .unwrap();
            off += len;
        }
    }
    let posted = wr as usize;
    s.run_until("every completion", seed, |s| {
        count(&s.a, |e| matches!(e, Event::Completion { .. })) >= posted
    });
    let mut seen = HashMap::new();
    for e in &s.a.events {
        if let Event::Completion { conn, completion } = e {
            if completion.status != Status::Success {
                for k in s.a.cores.iter().chain(&s.b.cores) {
                    eprintln!("{:#?}", k.report());
                }
            }
            assert_eq!(
                completion.status,
                Status::Success,
                "seed {seed}: {e:?}\nclient: {:?}\nserver: {:?}",
                s.a.events
                    .iter()
                    .filter(|x| !matches!(x, Event::Completion { .. }))
                    .collect::<Vec<_>>(),
                s.b.events
                    .iter()
                    .filter(|x| !matches!(
                        x,
                        Event::Indication {
                            indication: Indication::TaggedDelivered { .. },
                            ..
                        }
                    ))
                    .collect::<Vec<_>>()
            );
            assert_eq!(
                expected.get(&completion.wr_id),
                Some(conn),
                "seed {seed}: {e:?}"
            );
            assert!(
                seen.insert(completion.wr_id, ()).is_none(),
                "seed {seed}: twice {e:?}"
            );
        }
    }
    assert_eq!(seen.len(), posted, "seed {seed}");
    let r = s.b.control.memory().region(region).unwrap();
    let mut placed = vec![0u8; REGION];
    r.read(0, &mut placed).unwrap();
    assert!(placed == image, "seed {seed}: placed bytes differ");

    for &c in &conns {
        s.a.control.submit(c, Op::Shutdown).unwrap();
    }
    s.run_until("every association closed", seed, |s| {
        let closed = |e: &End| {
            count(e, |x| {
                matches!(
                    x,
                    Event::Indication {
                        indication: Indication::Closed(_),
                        ..
                    }
                )
            })
        };
        closed(&s.a) == 2 && closed(&s.b) == 2
    });
    let cores = s.a.cores.iter().chain(&s.b.cores);
    // Every frame each core took is counted once, by its fate, through loss, duplication,
    // reordering and corruption (CoreReport::unaccounted).
    for k in cores.clone() {
        let r = k.report();
        assert_eq!(r.unaccounted(), Vec::<String>::new(), "seed {seed}");
    }
    let dispatched: u64 = cores.clone().map(|k| k.stats().dispatched_out).sum();
    let received: u64 = cores.map(|k| k.stats().dispatched_in).sum();
    assert_eq!(dispatched, received, "seed {seed}: a dispatched frame lost");
    // Frames arrive on random queues, so every seed has some that the cores must hand to each
    // other (a property of each run, not an average over runs: the number varies with loss).
    assert!(
        dispatched > 0,
        "seed {seed}: no frame dispatched between cores"
    );
    let by_reference: u64 = s.a.cores.iter().map(|k| k.stats().tx.zero_copy_spans).sum();
    assert!(
        by_reference > 0,
        "seed {seed}: no region span went by reference"
    );
    // Every session control message the cores received was run by a control thread.
    for e in [&s.a, &s.b] {
        let lent: u64 = e.cores.iter().map(|k| k.stats().sessions_lent).sum();
        let run = e.control.stats().session_messages;
        assert!(
            run >= 2 && lent == run,
            "seed {seed}: {lent} lent, {run} run"
        );
    }
    dispatched
}

fn seeds() -> u64 {
    std::env::var("RT_SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60)
}

#[test]
fn runtime_over_a_hostile_network_many_seeds() {
    for seed in 0..seeds() {
        run_seed(seed);
    }
}

#[test]
fn one_seed() {
    if let Some(seed) = std::env::var("RT_SIM_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        println!(
            "seed {seed}: {} frames dispatched between cores",
            run_seed(seed)
        );
    }
}
