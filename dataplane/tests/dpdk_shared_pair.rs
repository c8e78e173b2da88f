//! A device with one queue pair fewer than asked for, configured with
//! `PortConf::share_last_pair`: the last TX queue is the device's queue 0 again, sent on under
//! a lock, so an endpoint (a queue pair a data core, one for its control thread) runs on a
//! device with one pair (vhost-user, virtio-user, pcap, af_xdp on most interfaces).
//!
//! A `net_ring` pair of one queue each: its ring takes one producer at a time (single-producer
//! enqueue), so two threads sending on it unguarded would corrupt it. Here two threads send at
//! once, one on TX queue 0 and one on TX queue 1; the other end must receive every packet of
//! both, intact, each sender's in its order. Without the lock, 2 of 3 runs lost packets
//! (two sends took the same slots of the ring).
#![cfg(feature = "dpdk")]

mod common;

use std::time::Duration;

use common::*;
use ddpdk_dataplane::port::dpdk::{DpdkPort, PortConf};
use ddpdk_dataplane::port::{PacketBuf, Port};

const TAG: u8 = 0x5c;
/// Packets each sender sends (made beforehand: both fit the pool at once).
const N: u32 = 3_000;

#[test]
fn the_last_queue_pair_shares_the_first_when_the_device_has_one() {
    let eal = start_eal(&eal_args("shared-pair", false, &[]));
    let (a_id, b_id) = eal.create_ring_pair("sp", 8192, 1).expect("ring pair");
    let pool = pool("shared_pair", 8191);
    let conf = PortConf {
        nb_rxq: 2,
        nb_txq: 2,
        nb_rxd: 512,
        nb_txd: 512,
        ..PortConf::default()
    };
    // Without the sharing, the device's one pair is too few.
    let e = DpdkPort::configure(a_id, conf, pool.clone()).expect_err("one pair too few");
    assert!(
        e.to_string()
            .contains("2 RX queues requested, device supports 1..=1"),
        "{e}"
    );
    let a = DpdkPort::configure(
        a_id,
        PortConf {
            share_last_pair: true,
            ..conf
        },
        pool.clone(),
    )
    .expect("shared");
    assert!(a.shares_last_pair());
    assert_eq!((a.nb_rx_queues(), a.nb_tx_queues()), (1, 2));
    let b = DpdkPort::configure(b_id, PortConf::default(), pool.clone()).expect("B");
    for p in [&a, &b] {
        p.start().expect("start");
        assert!(
            p.wait_link_up(Duration::from_secs(2)).up,
            "{} link",
            p.name()
        );
    }
    // The first sender sends 0..N on queue 0, the second N..2N on queue 1, at once.
    // Each sender on a CPU of its own, its packets made beforehand and
    // released together with the other's: their bursts meet on the queue, not in turns.
    // A spinning start (a futex wake-up would let one sender finish before the other began).
    let ready = std::sync::atomic::AtomicU32::new(0);
    let send = |queue: u16, first: u32| {
        // CPUs 0 and 1 by number: the EAL pinned this thread, and so its children, to lcore
        // 0's CPU alone. (Where there is one CPU the senders take turns and the test proves
        // less.)
        core_affinity::set_for_current(core_affinity::CoreId {
            id: usize::from(queue),
        });
        let mut all = Vec::new();
        make_burst(&a, &mut all, TAG, first, N as usize);
        ready.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        while ready.load(std::sync::atomic::Ordering::Acquire) < 2 {
            std::hint::spin_loop();
        }
        // One packet a burst: many short sends, each a chance to meet the other's.
        let mut burst = Vec::new();
        let mut rest = all.into_iter();
        loop {
            if burst.is_empty() {
                burst.extend(rest.next());
                if burst.is_empty() {
                    return;
                }
            }
            if a.tx_burst(queue, &mut burst) == 0 {
                std::hint::spin_loop();
            }
        }
    };
    // The ring holds both senders' packets: nobody drains it while they send, so neither
    // waits for the other's CPU.
    std::thread::scope(|s| {
        s.spawn(|| send(0, 0));
        s.spawn(|| send(1, N));
    });
    let mut next = [0, N];
    let mut rx = Vec::new();
    while b.rx_burst(0, &mut rx, 32) > 0 {
        for m in rx.drain(..) {
            let seq = u32::from_le_bytes(m.data()[..4].try_into().expect("4 bytes"));
            let from = usize::from(seq >= N);
            assert_eq!(
                seq, next[from],
                "sender {from}'s packets in order, none lost"
            );
            check(&m, TAG, seq);
            next[from] += 1;
        }
    }
    assert_eq!(next, [N, 2 * N], "every packet of both senders");
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(
        (sa.tx_packets, sb.rx_packets),
        (2 * u64::from(N), 2 * u64::from(N))
    );
    a.close().expect("close A");
    b.close().expect("close B");
    assert_eq!(pool.in_use_count(), 0, "every mbuf back");
}
