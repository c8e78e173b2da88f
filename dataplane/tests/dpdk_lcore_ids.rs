//! `Eal::launch` and `Eal::join` are safe, and `LcoreJoin` can be built by hand, while DPDK
//! 22.11's `rte_eal_remote_launch` and `rte_eal_wait_lcore` index the EAL's lcore table with
//! the id unchecked: an id past the table was an out-of-bounds access from safe code (this
//! test died of SIGSEGV before the ids were checked). The main lcore and disabled lcores have
//! no worker thread to run work either.
#![cfg(feature = "dpdk")]
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use ddpdk_dataplane::port::dpdk::LcoreJoin;

#[test]
fn launch_and_join_refuse_lcores_that_are_not_enabled_workers() {
    let eal = start_eal(&eal_args("zz-lcore-ids", false, &[]));
    let main = eal.main_lcore();
    assert!(eal.launch(main, || 0).is_err(), "the main lcore");
    assert!(
        eal.launch(100, || 0).is_err(),
        "an lcore not enabled (-l 0)"
    );
    assert!(
        eal.launch(1 << 24, || 0).is_err(),
        "an id past DPDK's table"
    );
    assert_eq!(
        eal.join(LcoreJoin { lcore: 1 << 24 }),
        -22,
        "an id past DPDK's table"
    );
}
