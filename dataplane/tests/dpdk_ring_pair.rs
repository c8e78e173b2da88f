//! `Eal::create_ring_pair` proves two `net_ring` ethdevs wired back to back: what A transmits B
//! receives and vice versa, intact and in order, nothing loops back to the sender, both
//! directions can be in flight at once without mixing, the counters of the two sides agree
//! exactly (A.tx == B.rx, B.tx == A.rx), and every mbuf is back in the pool at the end.
#![cfg(feature = "dpdk")]

mod common;

use std::time::Duration;

use common::*;
use ddpdk_dataplane::port::dpdk::{DpdkPort, PortConf};
use ddpdk_dataplane::port::Port;

const TAG_AB: u8 = 0xa0;
const TAG_BA: u8 = 0x0b;
const N: u32 = 1000;
const IN_FLIGHT: u32 = 500;

#[test]
fn ring_pair_back_to_back() {
    let args = eal_args("ring-pair", false, &[]);
    let eal = start_eal(&args);
    assert!(eal.port_ids().is_empty(), "no ports before the pair");

    let (a_id, b_id) = eal
        .create_ring_pair("rp", 1024, 1)
        .expect("create_ring_pair");
    assert_ne!(a_id, b_id);
    let mut ids = eal.port_ids();
    ids.sort_unstable();
    let mut want = vec![a_id, b_id];
    want.sort_unstable();
    assert_eq!(ids, want, "the pair's two ports are the probed ports");

    let pool = pool("ring_pair", 2047);
    let conf = PortConf {
        nb_rxd: 256,
        nb_txd: 256,
        ..PortConf::default()
    };
    let a = DpdkPort::configure(a_id, conf, pool.clone()).expect("configure A");
    let b = DpdkPort::configure(b_id, conf, pool.clone()).expect("configure B");
    assert_eq!(a.info().driver, "net_ring");
    assert_eq!(a.name(), "net_ring_rp0");
    assert_eq!(b.name(), "net_ring_rp1");
    for p in [&a, &b] {
        p.start().expect("start");
        let l = p.wait_link_up(Duration::from_secs(2));
        assert!(l.up, "{} link: {l}", p.name());
        p.reset_stats();
    }

    // One direction at a time, each burst received before the next is sent.
    send_and_check(&a, &b, TAG_AB, 0, N);
    send_and_check(&b, &a, TAG_BA, 0, N);

    // Both directions in flight at once: each side gets only the other's packets.
    let mut burst = Vec::new();
    make_burst(&a, &mut burst, TAG_AB, N, IN_FLIGHT as usize);
    let out = a.tx_burst_all(0, &mut burst, 0);
    assert_eq!((out.sent, out.dropped), (IN_FLIGHT as usize, 0), "A tx");
    make_burst(&b, &mut burst, TAG_BA, N, IN_FLIGHT as usize);
    let out = b.tx_burst_all(0, &mut burst, 0);
    assert_eq!((out.sent, out.dropped), (IN_FLIGHT as usize, 0), "B tx");
    assert_eq!(pool.in_use_count(), 2 * IN_FLIGHT, "in flight in the rings");
    let t = Duration::from_secs(2);
    let n = IN_FLIGHT as usize;
    assert_eq!(recv_check(&a, TAG_BA, N, n, t), n, "A receives B's");
    assert_eq!(recv_check(&b, TAG_AB, N, n, t), n, "B receives A's");
    let mut extra = Vec::new();
    assert_eq!(a.rx_burst(0, &mut extra, 32), 0, "nothing more on A");
    assert_eq!(b.rx_burst(0, &mut extra, 32), 0, "nothing more on B");

    let total = u64::from(N + IN_FLIGHT);
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(sa.tx_packets, total, "A tx: {sa:?}");
    assert_eq!(sb.rx_packets, total, "B rx: {sb:?}");
    assert_eq!(sb.tx_packets, total, "B tx: {sb:?}");
    assert_eq!(sa.rx_packets, total, "A rx: {sa:?}");
    assert_eq!(sa.tx_packets, sb.rx_packets, "A.tx == B.rx");
    assert_eq!(sb.tx_packets, sa.rx_packets, "B.tx == A.rx");
    for s in [sa, sb] {
        // net_ring (DPDK 22.11) counts packets only.
        assert_eq!((s.rx_bytes, s.tx_bytes), (0, 0), "{s:?}");
        assert_eq!(
            (s.tx_errors, s.rx_errors, s.rx_missed, s.rx_nombuf),
            (0, 0, 0, 0),
            "{s:?}"
        );
    }

    assert_eq!(pool.in_use_count(), 0, "all mbufs back before close");
    a.close().expect("close A");
    b.close().expect("close B");
    assert_eq!(pool.in_use_count(), 0, "all mbufs back after close");

    drop((a, b));
    drop(pool);
    drop(eal);
}
