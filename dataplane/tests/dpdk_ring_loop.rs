//! A `net_ring` loopback port (`--vdev=net_ring0`: RX queue 0 and TX queue 0 share one
//! `rte_ring`) proves the DPDK port layer end to end:
//!
//! 1. 1000 packets of distinct lengths (60..=1514) and contents, sent in bursts of 32 with
//!    `alloc_bulk` + `data_mut`, all come back through `rx_burst` intact and in order, and the
//!    port's packet counters say exactly that (net_ring in DPDK 22.11 counts no bytes: 0).
//! 2. TX never leaks when the device is full: 4096 packets offered without receiving fill the
//!    ring (capacity 1023); `tx_burst_all` reports exactly 1023 sent and 3073 dropped
//!    (`sent + dropped == offered`, dropped bytes exact), the dropped buffers are back in the
//!    pool at once (in use == exactly what the ring holds), opackets == 1023 (net_ring counts no
//!    oerrors for refused packets), and after draining RX (the first 1023 packets, intact and in
//!    order) and closing the port every mbuf is back in the pool.
#![cfg(feature = "dpdk")]

mod common;

use std::time::Duration;

use common::*;
use ddpdk_dataplane::port::dpdk::{DpdkPort, PortConf};
use ddpdk_dataplane::port::Port;

const TAG: u8 = 0x5a;
const N: u32 = 1000;
const OFFERED: u32 = 4096;

/// The usable capacity of the ring behind net_ring0's queue 0, from DPDK itself. net_ring
/// creates it as `ETH_RXTX0_<device name>` with count 1024 and without RING_F_EXACT_SZ.
fn ring_capacity(eal: &ddpdk_dataplane::port::dpdk::Eal, dev: &str) -> u32 {
    let name = format!("ETH_RXTX0_{dev}");
    eal.ring_capacity(&name)
        .unwrap_or_else(|| panic!("net_ring's ring {name:?} not found"))
}

#[test]
fn ring_loopback_round_trip_and_no_tx_leak() {
    let args = eal_args("ring-loop", false, &["net_ring0".to_string()]);
    let eal = start_eal(&args);
    let ids = eal.port_ids();
    assert_eq!(ids.len(), 1, "one port from --vdev=net_ring0, got {ids:?}");

    let pool = pool("ring_loop", 4095);
    assert_eq!(pool.in_use_count(), 0);
    let conf = PortConf {
        nb_rxd: 256,
        nb_txd: 256,
        ..PortConf::default()
    };
    let port = DpdkPort::configure(ids[0], conf, pool.clone()).expect("configure net_ring0");
    assert_eq!(port.info().driver, "net_ring");
    assert_eq!(port.name(), "net_ring0");
    port.start().expect("start net_ring0");
    let link = port.wait_link_up(Duration::from_secs(2));
    assert!(link.up, "net_ring0 link: {link}");
    assert_eq!(pool.in_use_count(), 0, "net_ring holds no RX buffers");

    // 1. Round trip.
    port.reset_stats();
    send_and_check(&port, &port, TAG, 0, N);
    let s = port.stats();
    assert_eq!(s.tx_packets, u64::from(N), "tx_packets: {s:?}");
    assert_eq!(s.rx_packets, u64::from(N), "rx_packets: {s:?}");
    // net_ring (DPDK 22.11) counts packets only: ibytes/obytes stay 0.
    assert_eq!(s.tx_bytes, 0, "net_ring does not count bytes: {s:?}");
    assert_eq!(s.rx_bytes, 0, "net_ring does not count bytes: {s:?}");
    assert_eq!(
        (s.tx_errors, s.rx_errors, s.rx_missed, s.rx_nombuf),
        (0, 0, 0, 0),
        "{s:?}"
    );
    assert_eq!(pool.in_use_count(), 0, "all round-trip buffers freed");

    // 2. Fill the ring without receiving: the surplus is dropped (freed), never leaked.
    let cap = ring_capacity(&eal, "net_ring0");
    assert_eq!(cap, 1023, "net_ring's ring: count 1024, capacity 1023");
    port.reset_stats();
    let (mut sent, mut dropped, mut dropped_bytes) = (0usize, 0usize, 0u64);
    let mut burst = Vec::with_capacity(32);
    let mut seq = 0;
    while seq < OFFERED {
        make_burst(&port, &mut burst, TAG, seq, 32);
        let out = port.tx_burst_all(0, &mut burst, 3);
        assert!(burst.is_empty(), "tx_burst_all leaves nothing behind");
        sent += out.sent;
        dropped += out.dropped;
        dropped_bytes += out.dropped_bytes;
        seq += 32;
    }
    assert_eq!(
        sent + dropped,
        OFFERED as usize,
        "sent + dropped == offered"
    );
    assert_eq!(sent, cap as usize, "exactly the ring's capacity is taken");
    assert_eq!(dropped, (OFFERED - cap) as usize);
    assert_eq!(dropped_bytes, bytes_of(cap, OFFERED - cap), "dropped bytes");
    assert_eq!(
        pool.in_use_count(),
        cap,
        "in use == what the ring holds: dropped buffers went back to the pool"
    );
    let s = port.stats();
    assert_eq!(s.tx_packets, cap as u64, "{s:?}");
    assert_eq!(s.rx_packets, 0, "{s:?}");
    // net_ring (DPDK 22.11) does not count refused packets as oerrors: a short tx_burst is
    // back-pressure, not an error. The drops are accounted by tx_burst_all's TxOutcome alone.
    assert_eq!(s.tx_errors, 0, "net_ring does not count TX refusals: {s:?}");

    // Drain: exactly the first `cap` packets, intact and in order.
    let got = recv_check(&port, TAG, 0, sent, Duration::from_secs(2));
    assert_eq!(got, sent, "drained");
    let mut extra = Vec::new();
    assert_eq!(
        port.rx_burst(0, &mut extra, 32),
        0,
        "ring empty after drain"
    );
    let s = port.stats();
    assert_eq!(s.rx_packets, cap as u64, "{s:?}");
    assert_eq!(pool.in_use_count(), 0, "all mbufs back after drain");

    port.close().expect("close net_ring0");
    assert_eq!(pool.in_use_count(), 0, "all mbufs back after close");
    assert_eq!(pool.avail_count(), pool.size());

    drop(port);
    drop(pool);
    drop(eal);
}
