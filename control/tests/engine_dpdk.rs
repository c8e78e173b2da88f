//! The engine on real DPDK ports: two endpoints on a `net_ring` pair (what one transmits the
//! other receives), one process, real time, `--no-huge`. The client resolves the server by
//! ARP, the association comes up with the DDP adaptation indication, a DDP session moves a
//! tagged message of 256 KiB into the server's region, byte-exact, through mbufs, and every
//! mbuf is back in the pool at the end.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

#[path = "../../dataplane/tests/common/mod.rs"]
mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant as Wall};

use common::{eal_args, pool, ring_pair_ports, start_eal};
use ddpdk_control::conn::{ConnConfig, Indication, SendKind, SendRequest, Status};
use ddpdk_control::engine::Engine;
use ddpdk_control::memory::{Memory, MemoryRegistration};
use ddpdk_control::session::{Event, PendingLimit};
use ddpdk_dataplane::mem::Access;
use ddpdk_dataplane::net::Interface;
use ddpdk_dataplane::port::dpdk::DpdkPort;
use ddpdk_dataplane::port::Port;
use ddpdk_dataplane::sctp::{Config, Endpoint, Instant};
use ddpdk_dataplane::wire::crc32c::crc32c;

const SCTP_PORT: u16 = 5000;

#[test]
fn two_engines_on_a_net_ring_pair_move_a_tagged_message() {
    let eal = start_eal(&eal_args("engine", false, &[]));
    let pool = pool("engine", 4095);
    let ports = ring_pair_ports(&eal, "eng", &pool, 512);
    let mut macs = [ports[0].mac(), ports[1].mac()];
    if macs[0] == macs[1] {
        // net_ring may give both ends one address; the interface needs its own.
        macs[1][5] ^= 1;
    }
    let addrs = [Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2)];
    let mut engines: Vec<Engine<DpdkPort>> = (0..2)
        .map(|k| {
            let ep = Endpoint::new(
                Config {
                    local_port: SCTP_PORT,
                    path_mtu: 1500,
                    ..Config::default()
                },
                [k as u8 + 1; 32],
            )
            .unwrap();
            let (memory, _) = Memory::new(64, 0, 17 + k as u64);
            Engine::new(
                Arc::clone(&ports[k]),
                0,
                Interface::new(macs[k], Some(addrs[k]), None),
                ep,
                ConnConfig::default(),
                PendingLimit::new(8),
                memory,
            )
        })
        .collect();

    let start = Wall::now();
    let now = || Instant::from_nanos(1_000_000_000 + start.elapsed().as_nanos() as u64);
    let poll_until =
        |engines: &mut Vec<Engine<DpdkPort>>,
         what: &str,
         done: &mut dyn FnMut(&mut Vec<Engine<DpdkPort>>) -> bool| {
            let deadline = Wall::now() + Duration::from_secs(20);
            while !done(engines) {
                assert!(Wall::now() < deadline, "timed out waiting for {what}");
                let t = now();
                let moved: usize = engines.iter_mut().map(|e| e.poll(t)).sum();
                if moved == 0 {
                    std::thread::yield_now();
                }
            }
        };

    let ca = engines[0]
        .connect(now(), IpAddr::V4(addrs[1]), SCTP_PORT)
        .unwrap();
    let apd = engines[0].memory_mut().alloc_pd();
    let bpd = engines[1].memory_mut().alloc_pd();
    let mut la = Vec::new();
    poll_until(&mut engines, "the association", &mut |e| {
        while let Some(i) = e[0].conn(ca).unwrap().poll_indication() {
            la.push(i);
        }
        la.iter().any(|i| matches!(i, Indication::Connected { .. }))
            && e[1].conn_ids().next().is_some()
    });
    let cb = engines[1].conn_ids().next().unwrap();
    assert_eq!(
        engines[1].interface().stats().arp_replies,
        1,
        "resolved by ARP"
    );

    engines[0].conn(ca).unwrap().initiate(1, apd, b"").unwrap();
    let mut lb = Vec::new();
    poll_until(&mut engines, "the Initiate", &mut |e| {
        while let Some(i) = e[1].conn(cb).unwrap().poll_indication() {
            lb.push(i);
        }
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
    engines[1].conn(cb).unwrap().accept(1, bpd, b"").unwrap();
    let m = engines[1].memory_mut();
    let r = m.alloc_region(256 << 10).unwrap();
    let reg = m
        .register(MemoryRegistration {
            pd: bpd,
            region: r,
            offset: 0,
            len: 256 << 10,
            access: Access::REMOTE_WRITE,
            stream: None,
            to_base: 0,
        })
        .unwrap();
    let data: Vec<u8> = (0..(256u32 << 10))
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    engines[0]
        .conn(ca)
        .unwrap()
        .post_send(SendRequest {
            wr_id: 9,
            stream: 1,
            kind: SendKind::Tagged {
                stag: reg.stag,
                to: 0,
                rsvd_ulp: 0,
            },
            data: data.clone().into(),
            signaled: true,
        })
        .unwrap();
    let mut done = None;
    let mut delivered = false;
    poll_until(&mut engines, "the write", &mut |e| {
        if let Some(c) = e[0].conn(ca).unwrap().poll_completion() {
            done = Some((c.wr_id, c.status));
        }
        while let Some(i) = e[1].conn(cb).unwrap().poll_indication() {
            delivered |= matches!(i, Indication::TaggedDelivered { .. });
        }
        done.is_some() && delivered
    });
    assert_eq!(done, Some((9, Status::Success)));
    let got = engines[1]
        .memory()
        .region(r)
        .unwrap()
        .crc32c(0, data.len())
        .unwrap();
    assert_eq!(got, crc32c(&data), "placed bytes");
    for e in &engines {
        assert_eq!((e.stats().tx_dropped, e.stats().no_buffer), (0, 0), "{e:?}");
    }
    // Quiet: one round in which neither engine moved a frame leaves nothing in the rings,
    // and then no mbuf may be held anywhere (received frames are freed after handling, sent
    // ones by the receiver).
    loop {
        let t = now();
        let moved: usize = engines.iter_mut().map(|e| e.poll(t)).sum();
        if moved == 0 {
            break;
        }
    }
    assert_eq!(pool.in_use_count(), 0, "mbufs not back in the pool");
    drop(engines);
    for p in &ports {
        p.stop().unwrap();
    }
}
