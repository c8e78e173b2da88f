//! `Mempool::alloc_bulk` is safe and takes a `usize` count, while DPDK's
//! `rte_pktmbuf_alloc_bulk` takes a `u32`: a count past `u32::MAX` was truncated, so DPDK
//! allocated the few the truncated count asked for and `set_len` exposed the rest of the
//! vector uninitialised (dropped as mbufs). Now such a count is refused, with nothing touched.
#![cfg(feature = "dpdk")]
#![allow(clippy::unwrap_used)]

mod common;

use common::*;

#[test]
fn a_count_dpdk_cannot_take_is_refused() {
    let eal = start_eal(&eal_args("zz-alloc-bulk", false, &[]));
    let pool = pool("zz_bulk", 63);
    let mut out = Vec::new();
    assert!(!pool.alloc_bulk(&mut out, u32::MAX as usize + 2, 64));
    assert!(out.is_empty());
    assert_eq!(pool.in_use_count(), 0);
    drop(pool);
    drop(eal);
}
