//! A `net_memif` pair in one process (server `net_memif0` and client `net_memif1` on one
//! socket) proves the DPDK port layer over shared-memory interfaces:
//!
//! - both links come up (memif connects asynchronously in the EAL interrupt thread);
//! - 1000 packets of distinct lengths and contents cross A -> B, then B -> A, intact and in
//!   order; then 500 each way are in flight at once and each side gets only the other's;
//! - the packet and byte counters of the two sides agree exactly (A.tx == B.rx, B.tx == A.rx,
//!   bytes included) and no error counter moves;
//! - memif copies on TX, so no mbuf is held while packets are in flight;
//! - a full server -> client ring (1024 slots) makes `tx_burst_all` take exactly 1024 of 4096
//!   and drop (free) the rest; the client then drains exactly those 1024, intact and in order;
//! - every mbuf is back in the pool at the end.
//!
//! memif registers a multi-process action at probe time, so this EAL keeps the shared config
//! (no `--no-shconf`) under a unique `--file-prefix`; the socket lives in a per-process temp dir.
#![cfg(feature = "dpdk")]

mod common;

use std::time::{Duration, Instant};

use common::*;
use ddpdk_dataplane::port::dpdk::{DpdkError, DpdkPort, PortConf};
use ddpdk_dataplane::port::Port;

const TAG_AB: u8 = 0x3c;
const TAG_BA: u8 = 0xc3;
const N: u32 = 1000;
const IN_FLIGHT: u32 = 500;
const OFFERED: u32 = 4096;
/// memif ring size, as log2 (`rsize` devarg) and in slots.
const LOG2_RING: u32 = 10;
const RING: usize = 1 << LOG2_RING;

/// The server (`a`) and client (`b`) ports, closed in an order that avoids a race in the
/// DPDK 22.11 memif PMD, also when a failed assertion unwinds.
///
/// Closing one end makes the EAL interrupt thread run `memif_disconnect` on the other end; if
/// that end is stopped on this thread at the same time, both threads free the same shared-memory
/// regions ("EAL: Error: Invalid memory", or a SIGSEGV). `memif_disconnect` marks the link down
/// first and frees afterwards, so seeing the link down is not enough: we also give the interrupt
/// thread a moment to finish.
struct MemifPair {
    a: DpdkPort,
    b: DpdkPort,
    closed: bool,
}

impl MemifPair {
    fn close(&mut self) -> Result<(), DpdkError> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        self.b.close()?;
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.a.link().up && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(200));
        self.a.close()
    }
}

impl Drop for MemifPair {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[test]
fn memif_pair_back_to_back() {
    let tmp = TempDir::new("memif-pair");
    let sock = tmp.0.join("m.sock");
    let sock = sock.to_str().expect("utf-8 temp path");
    let vdevs = [
        format!("net_memif0,role=server,id=0,rsize={LOG2_RING},socket={sock}"),
        format!("net_memif1,role=client,id=0,rsize={LOG2_RING},socket={sock}"),
    ];
    let args = eal_args("memif-pair", true, &vdevs);
    let eal = start_eal(&args);

    let by_name = |name: &str| port_named(&eal, name);
    let (a_id, b_id) = (by_name("net_memif0"), by_name("net_memif1"));
    assert_eq!(eal.port_ids().len(), 2);

    let pool = pool("memif_pair", 4095);
    let conf = PortConf {
        nb_rxd: 1024,
        nb_txd: 1024,
        ..PortConf::default()
    };
    let mut pair = MemifPair {
        a: DpdkPort::configure(a_id, conf, pool.clone()).expect("configure memif server"),
        b: DpdkPort::configure(b_id, conf, pool.clone()).expect("configure memif client"),
        closed: false,
    };
    let (a, b) = (&pair.a, &pair.b);
    assert_eq!(a.info().driver, "net_memif");
    a.start().expect("start memif server");
    b.start().expect("start memif client");
    for p in [a, b] {
        let l = p.wait_link_up(Duration::from_secs(5));
        assert!(l.up, "{} link within 5 s: {l}", p.name());
    }
    // The memif client posts the buffers of the server -> client ring from its RX path: until
    // the client has polled its RX queue once, the server's TX takes nothing.
    let mut none = Vec::new();
    assert_eq!(a.rx_burst(0, &mut none, 32), 0, "nothing received yet on A");
    assert_eq!(b.rx_burst(0, &mut none, 32), 0, "nothing received yet on B");
    assert_eq!(pool.in_use_count(), 0, "memif (copy mode) holds no mbufs");
    a.reset_stats();
    b.reset_stats();

    // One direction at a time, each burst received before the next is sent.
    send_and_check(a, b, TAG_AB, 0, N);
    send_and_check(b, a, TAG_BA, 0, N);
    assert_eq!(pool.in_use_count(), 0);

    // Both directions in flight at once: each side gets only the other's packets.
    let mut burst = Vec::new();
    make_burst(a, &mut burst, TAG_AB, N, IN_FLIGHT as usize);
    let out = a.tx_burst_all(0, &mut burst, 0);
    assert_eq!((out.sent, out.dropped), (IN_FLIGHT as usize, 0), "A tx");
    make_burst(b, &mut burst, TAG_BA, N, IN_FLIGHT as usize);
    let out = b.tx_burst_all(0, &mut burst, 0);
    assert_eq!((out.sent, out.dropped), (IN_FLIGHT as usize, 0), "B tx");
    assert_eq!(
        pool.in_use_count(),
        0,
        "memif copies on TX: no mbuf held while 2 x {IN_FLIGHT} packets are in flight"
    );
    let t = Duration::from_secs(2);
    let n = IN_FLIGHT as usize;
    assert_eq!(recv_check(a, TAG_BA, N, n, t), n, "A receives B's");
    assert_eq!(recv_check(b, TAG_AB, N, n, t), n, "B receives A's");
    let mut extra = Vec::new();
    assert_eq!(a.rx_burst(0, &mut extra, 32), 0, "nothing more on A");
    assert_eq!(b.rx_burst(0, &mut extra, 32), 0, "nothing more on B");

    let total = u64::from(N + IN_FLIGHT);
    let total_bytes = bytes_of(0, N) + bytes_of(N, IN_FLIGHT);
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(sa.tx_packets, total, "A tx: {sa:?}");
    assert_eq!(sb.rx_packets, total, "B rx: {sb:?}");
    assert_eq!(sb.tx_packets, total, "B tx: {sb:?}");
    assert_eq!(sa.rx_packets, total, "A rx: {sa:?}");
    assert_eq!(sa.tx_bytes, total_bytes, "A tx bytes: {sa:?}");
    assert_eq!(sb.rx_bytes, total_bytes, "B rx bytes: {sb:?}");
    assert_eq!(sb.tx_bytes, total_bytes, "B tx bytes: {sb:?}");
    assert_eq!(sa.rx_bytes, total_bytes, "A rx bytes: {sa:?}");
    for s in [sa, sb] {
        assert_eq!(
            (s.tx_errors, s.rx_errors, s.rx_missed, s.rx_nombuf),
            (0, 0, 0, 0),
            "{s:?}"
        );
    }
    assert_eq!(
        pool.in_use_count(),
        0,
        "all mbufs back after the round trips"
    );

    // Overfill A -> B without receiving: the surplus is dropped (freed), never leaked.
    a.reset_stats();
    b.reset_stats();
    let (mut sent, mut dropped, mut dropped_bytes) = (0usize, 0usize, 0u64);
    let mut seq = 0;
    while seq < OFFERED {
        make_burst(a, &mut burst, TAG_AB, seq, 32);
        let out = a.tx_burst_all(0, &mut burst, 3);
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
    assert_eq!(sent, RING, "exactly the ring's slots are taken");
    assert_eq!(dropped_bytes, bytes_of(RING as u32, OFFERED - RING as u32));
    assert_eq!(
        pool.in_use_count(),
        0,
        "sent ones copied, dropped ones freed"
    );
    let sa = a.stats();
    assert_eq!(sa.tx_packets, RING as u64, "{sa:?}");
    assert_eq!(sa.tx_bytes, bytes_of(0, RING as u32), "{sa:?}");
    // memif (DPDK 22.11) does not count refused packets as oerrors either.
    assert_eq!(sa.tx_errors, 0, "{sa:?}");
    let got = recv_check(b, TAG_AB, 0, sent, t);
    assert_eq!(got, sent, "B drains exactly what A's TX took");
    assert_eq!(b.rx_burst(0, &mut extra, 32), 0, "nothing more on B");
    let sb = b.stats();
    assert_eq!(sb.rx_packets, RING as u64, "{sb:?}");
    assert_eq!(sb.rx_bytes, bytes_of(0, RING as u32), "{sb:?}");
    assert_eq!(pool.in_use_count(), 0, "all mbufs back after drain");

    pair.close().expect("close the memif pair");
    assert_eq!(pool.in_use_count(), 0, "all mbufs back after close");
    assert_eq!(pool.avail_count(), pool.size());

    drop(pair);
    drop(pool);
    drop(eal);
}
