//! The runtime on real DPDK ports: two endpoints (a control side and one data core each) on a
//! `net_ring` pair (what one transmits on queue q the other receives on queue q), one process,
//! `--no-huge`, polled in lockstep on the test thread in virtual time. The client resolves the
//! server by ARP, the association comes up with the DDP adaptation indication, a DDP session
//! moves a tagged message of 256 KiB into the server's region, byte-exact, through mbufs, and
//! every mbuf is back in the pool at the end.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

#[path = "../../dataplane/tests/common/mod.rs"]
mod common;
mod rt;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use common::{eal_args, pool, start_eal};
use ddpdk_control::conn::{Indication, Status};
use ddpdk_control::runtime::{Event, RuntimeConfig};
use ddpdk_dataplane::net::Interface;
use ddpdk_dataplane::port::dpdk::DpdkPort;
use ddpdk_dataplane::port::Port;
use ddpdk_dataplane::sctp::{Config, Instant};
use ddpdk_dataplane::wire::crc32c::crc32c;
use rt::{ring_pair, runtime_on, tagged, Lockstep, PORT};

#[test]
fn two_runtimes_on_a_net_ring_pair_move_a_tagged_message() {
    let eal = start_eal(&eal_args("runtime", false, &[]));
    let pool = pool("runtime", 4095);
    // One data core a side: RX and TX queue 0 are the core's, TX queue 1 the control thread's.
    let ports = ring_pair(&eal, "rtp", &pool, 2, 512);
    let mut macs = [ports[0].mac(), ports[1].mac()];
    if macs[0] == macs[1] {
        // net_ring may give both ends one address; the interface needs its own.
        macs[1][5] ^= 1;
    }
    let addrs = [Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2)];
    let make = |k: usize| {
        runtime_on(
            Arc::clone(&ports[k]),
            Interface::new(macs[k], Some(addrs[k]), None),
            k as u8 + 1,
            RuntimeConfig::default(),
            Config::default(),
        )
    };
    let (a, b) = (make(0), make(1));
    let (mut l, reg, r) = Lockstep::open_to_region(a, b, IpAddr::V4(addrs[1]), PORT, 256 << 10);
    assert_eq!(
        l.kb[0].report().iface.arp_replies,
        1,
        "resolved by ARP: {:?}",
        l.kb[0].report().iface
    );
    // RFC 1122 §2.3.2.2 (ARP packet queue): the INIT, made before the server's MAC was known,
    // waited for the ARP answer instead of being lost, so the session is open long before
    // T1-init (RTO.Initial) could have resent it.
    let t = l.ka[0].stats().tx;
    assert_eq!((t.held_sent, t.unresolved), (1, 0), "{t:?}");
    let opened_after = l.now.saturating_since(Instant::from_nanos(1_000_000_000));
    assert!(
        opened_after < Config::default().rto_initial / 2,
        "session open after {opened_after:?}"
    );

    let data: Vec<u8> = (0..(256u32 << 10))
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    l.ca.submit(l.conn, tagged(9, reg.stag, 0, data.clone()))
        .unwrap();
    let done = |l: &Lockstep<DpdkPort>| {
        l.ea.iter().find_map(|e| match e {
            Event::Completion { completion: c, .. } => Some((c.wr_id, c.status)),
            _ => None,
        })
    };
    let delivered = |l: &Lockstep<DpdkPort>| {
        l.eb.iter().any(|e| {
            matches!(
                e,
                Event::Indication {
                    indication: Indication::TaggedDelivered { .. },
                    ..
                }
            )
        })
    };
    l.run_until("the write", |l| done(l).is_some() && delivered(l));
    assert_eq!(done(&l), Some((9, Status::Success)));
    let got =
        l.cb.memory()
            .region(r)
            .unwrap()
            .crc32c(0, data.len())
            .unwrap();
    assert_eq!(got, crc32c(&data), "placed bytes");
    let txs = l.ka.iter().chain(&l.kb).map(|k| k.stats().tx);
    for t in txs.chain([l.ca.stats().tx, l.cb.stats().tx]) {
        assert_eq!((t.tx_dropped, t.no_buffer), (0, 0), "{t:?}");
    }
    // Quiet: one step in which nobody did anything leaves no frame in the rings, and with
    // the endpoints gone no mbuf may be held anywhere (received frames are freed after
    // handling, sent ones by the receiver).
    l.run_until_quiet();
    drop(l);
    assert_eq!(pool.in_use_count(), 0, "mbufs not back in the pool");
    for p in &ports {
        p.stop().unwrap();
    }
}
