//! Two whole endpoints (`Engine`: frames → `Interface` → SCTP → DDP → memory, and back) wired
//! back to back by the in-memory port pair, in virtual time: they find each other by ARP (or
//! IPv6 Neighbor Discovery), set up an association with the DDP adaptation indication, open a
//! DDP Stream Session, and move tagged and untagged messages byte-exact.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;

use ddpdk_control::conn::{ConnConfig, Indication, SendKind, SendRequest, Status};
use ddpdk_control::engine::{ConnId, Engine};
use ddpdk_control::memory::{Memory, MemoryRegistration};
use ddpdk_control::session::{Event, PendingLimit};
use ddpdk_dataplane::mem::Access;
use ddpdk_dataplane::net::Interface;
use ddpdk_dataplane::port::mem::{pair, MemPort};
use ddpdk_dataplane::port::Port;
use ddpdk_dataplane::sctp::{Config, Endpoint, Instant};
use ddpdk_dataplane::wire::crc32c::crc32c;

const PORT: u16 = 5000;
const A4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

fn engine(port: MemPort, v4: Ipv4Addr, v6: Ipv6Addr, seed: u8) -> Engine<MemPort> {
    let iface = Interface::new(port.mac(), Some(v4), Some(v6));
    let ep = Endpoint::new(
        Config {
            local_port: PORT,
            ..Config::default()
        },
        [seed; 32],
    )
    .unwrap();
    let (memory, _) = Memory::new(64, 0, u64::from(seed) * 7919);
    Engine::new(
        Arc::new(port),
        0,
        iface,
        ep,
        ConnConfig::default(),
        PendingLimit::new(8),
        memory,
    )
}

struct Pair {
    now: Instant,
    a: Engine<MemPort>,
    b: Engine<MemPort>,
}

impl Pair {
    fn new() -> Pair {
        let (pa, pb) = pair(1, 1024);
        Pair {
            now: Instant::from_nanos(1_000_000_000),
            a: engine(pa, A4, A6, 1),
            b: engine(pb, B4, B6, 2),
        }
    }

    /// Polls both until `done`, advancing virtual time to the next timer when idle.
    fn run_until(&mut self, what: &str, mut done: impl FnMut(&mut Pair) -> bool) {
        let limit = self.now + Duration::from_secs(120);
        while !done(self) {
            assert!(self.now < limit, "timed out waiting for {what}");
            let moved = self.a.poll(self.now) + self.b.poll(self.now);
            if moved == 0 {
                let next = [self.a.poll_timeout(), self.b.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min();
                self.now = next
                    .filter(|t| *t > self.now)
                    .unwrap_or(self.now + Duration::from_millis(1));
            }
        }
    }
}

fn indications(e: &mut Engine<MemPort>, id: ConnId, log: &mut Vec<Indication>) {
    while let Some(i) = e.conn(id).unwrap().poll_indication() {
        log.push(i);
    }
}

fn transfer(peer: IpAddr) {
    let mut p = Pair::new();
    let ca = p.a.connect(p.now, peer, PORT).unwrap();
    let (mut la, mut lb) = (Vec::new(), Vec::new());
    p.run_until("the association", |p| {
        indications(&mut p.a, ca, &mut la);
        la.iter().any(|i| matches!(i, Indication::Connected { .. }))
            && p.b.conn_ids().next().is_some()
    });
    let cb = p.b.conn_ids().next().unwrap();
    // The client learnt the server by ARP / ND, not from a table: its first INIT went as a
    // solicitation instead, the server answered once, and SCTP retransmitted the INIT.
    let (sa, sb) = (p.a.interface().stats(), p.b.interface().stats());
    assert_eq!(sa.solicitations, 1);
    assert_eq!(sb.arp_replies + sb.nd_adverts, 1);
    assert_eq!(sa.neighbour_answers, 1);
    assert_eq!(p.a.stats().unresolved, 1);
    assert_eq!(p.a.interface().neighbour(peer), Some([0x02, 0, 0, 0, 0, 2]));

    // A DDP session on stream 1, the server accepting.
    let apd = p.a.memory_mut().alloc_pd();
    let bpd = p.b.memory_mut().alloc_pd();
    p.a.conn(ca).unwrap().initiate(1, apd, b"engine").unwrap();
    p.run_until("the Initiate", |p| {
        indications(&mut p.b, cb, &mut lb);
        lb.iter().any(|i| {
            matches!(
                i,
                Indication::Session {
                    event: Event::InitiateReceived { .. },
                    ..
                }
            )
        })
    });
    p.b.conn(cb).unwrap().accept(1, bpd, b"").unwrap();

    // Server memory: a tagged region and a receive buffer.
    let m = p.b.memory_mut();
    let tr = m.alloc_region(1 << 20).unwrap();
    let treg = m
        .register(MemoryRegistration {
            pd: bpd,
            region: tr,
            offset: 0,
            len: 1 << 20,
            access: Access::REMOTE_WRITE,
            stream: None,
            to_base: 0x10_0000,
        })
        .unwrap();
    let ur = m.alloc_region(65536).unwrap();
    let ureg = m
        .register(MemoryRegistration {
            pd: bpd,
            region: ur,
            offset: 0,
            len: 65536,
            access: Access::LOCAL_WRITE,
            stream: None,
            to_base: 0,
        })
        .unwrap();
    let buf =
        p.b.memory()
            .receive_buffer(bpd, ureg.stag, 0, 65536)
            .unwrap();
    p.b.conn(cb).unwrap().post_recv(1, 0, 7, buf).unwrap();
    p.run_until("the Accept", |p| {
        indications(&mut p.a, ca, &mut la);
        la.iter().any(|i| {
            matches!(
                i,
                Indication::Session {
                    event: Event::Accepted { .. },
                    ..
                }
            )
        })
    });

    let big: Vec<u8> = (0..(1u32 << 20))
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let small: Vec<u8> = (0..5000u32).map(|i| i as u8 ^ 0x5a).collect();
    let c = p.a.conn(ca).unwrap();
    c.post_send(SendRequest {
        wr_id: 1,
        stream: 1,
        kind: SendKind::Tagged {
            stag: treg.stag,
            to: treg.to_base,
            rsvd_ulp: 3,
        },
        data: big.clone().into(),
        signaled: true,
    })
    .unwrap();
    c.post_send(SendRequest {
        wr_id: 2,
        stream: 1,
        kind: SendKind::Untagged {
            qn: 0,
            rsvd_ulp: [0; 5],
        },
        data: small.clone().into(),
        signaled: true,
    })
    .unwrap();
    let mut done = Vec::new();
    p.run_until("both completions and deliveries", |p| {
        while let Some(c) = p.a.conn(ca).unwrap().poll_completion() {
            done.push((c.wr_id, c.status));
        }
        indications(&mut p.b, cb, &mut lb);
        done.len() == 2
            && lb
                .iter()
                .any(|i| matches!(i, Indication::Received { wr_id: 7, .. }))
    });
    assert_eq!(done, vec![(1, Status::Success), (2, Status::Success)]);
    let r = p.b.memory().region(tr).unwrap();
    assert_eq!(
        r.crc32c(0, big.len()).unwrap(),
        crc32c(&big),
        "tagged bytes"
    );
    let u = p.b.memory().region(ur).unwrap();
    assert_eq!(
        u.crc32c(0, small.len()).unwrap(),
        crc32c(&small),
        "untagged bytes"
    );
    assert!(lb.contains(&Indication::TaggedDelivered {
        stream: 1,
        stag: treg.stag,
        rsvd_ulp: 3
    }));
    assert!(lb.iter().any(|i| matches!(
        i,
        Indication::Received {
            wr_id: 7,
            len: 5000,
            ..
        }
    )));
    // Nothing was dropped as not ours, and no frame was lost on the way.
    for e in [&p.a, &p.b] {
        let s = e.interface().stats();
        assert_eq!(
            (s.other_mac, s.other_address, s.malformed, s.bad_ip_checksum),
            (0, 0, 0, 0),
            "{s:?}"
        );
        assert_eq!(
            (e.stats().tx_dropped, e.stats().no_buffer),
            (0, 0),
            "{:?}",
            e.stats()
        );
    }
}

#[test]
fn two_engines_over_ipv4_resolve_by_arp_and_move_ddp_messages() {
    transfer(IpAddr::V4(B4));
}

#[test]
fn two_engines_over_ipv6_resolve_by_neighbor_discovery_and_move_ddp_messages() {
    transfer(IpAddr::V6(B6));
}
