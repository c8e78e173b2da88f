//! A region's `rte_mbuf_ext_shared_info` is shared by every data core attaching spans of it.
//! DPDK's `rte_mbuf_ext_refcnt_update` takes a non-atomic fast path when it reads a count of 1
//! (read, then a plain store of 1 + value), so a region holding one reference of its own let two
//! threads attaching at once both read 1 and both store 2: increments were lost, the count
//! drifted (to 0, or wrapped to 65535), `Region::mbuf_references` lied, and the
//! leak-instead-of-free guard could free memory a device was still reading. Found by an
//! independent review (this test failed in round 0 with 65534 outstanding references); regions
//! now hold two references of their own, so the count never reads 1.
#![cfg(feature = "dpdk")]
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use ddpdk_dataplane::port::region::Region;
use ddpdk_dataplane::port::Port;

/// The EAL pinned the main thread (and so its children) to lcore 0: give thread `t` its own CPU
/// so the two really run at once.
/// (`get_core_ids` would only list the CPUs the EAL left us: CPU 0.) These machines have two.
fn pin(t: usize) {
    let id = core_affinity::CoreId { id: t % 2 };
    assert!(
        core_affinity::set_for_current(id),
        "pin thread {t} to CPU {}",
        t % 2
    );
}

#[test]
fn concurrent_attach_keeps_the_region_refcount() {
    let eal = start_eal(&eal_args("zz-extbuf-race", false, &[]));
    let pool = pool("zz_race", 4095);
    let ports = ring_pair_ports(&eal, "zzr", &pool, 256);
    let a = Arc::clone(&ports[0]);
    assert!(a.zero_copy_tx());
    let region = Arc::new(Region::from_dpdk(&eal, 1 << 16, None).expect("region"));

    // One frame stays referenced throughout, as a frame in a TX ring would.
    let held = a.attach_region(&region, 0, 64).expect("attach");
    assert_eq!(region.mbuf_references(), 1);
    drop(held);
    assert_eq!(region.mbuf_references(), 0);

    let mut worst = 0usize;
    for round in 0..200 {
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let threads: Vec<_> = (0..2)
            .map(|t| {
                let (a, region, barrier) =
                    (Arc::clone(&a), Arc::clone(&region), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    pin(t);
                    barrier.wait();
                    for k in 0..2000 {
                        // Attach a span and free it at once (a frame sent and completed).
                        let m = a.attach_region(&region, ((t * 4096 + k) % 60000) as u64, 100);
                        drop(m);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // Every span freed: no mbuf references the region.
        let refs = region.mbuf_references();
        worst = worst.max(refs);
        // A frame attached now must be counted.
        let probe = a.attach_region(&region, 0, 64);
        let counted = region.mbuf_references();
        drop(probe);
        assert!(
            refs == 0 && counted == 1,
            "round {round}: after concurrent attach/free the region reports {refs} \
             outstanding mbuf(s) (want 0), and {counted} with one attached (want 1)"
        );
    }
    assert_eq!(worst, 0);
    drop(ports);
}
