//! Regions from DPDK's heap (`Region::from_dpdk`), on an EAL started with `--no-huge -m 256`
//! (CI has no guaranteed hugepages):
//!
//! 1. An 8 MiB region is zeroed (first byte, last byte, and the CRC32c of all of it), also when
//!    it reuses heap memory a dropped region had filled with 0xa5.
//! 2. `place`/`read` round-trip at the first and last byte; a placement one byte past the end
//!    is refused and changes nothing.
//! 3. `huge()` and `page_size()` say what DPDK's memseg list says: with `--no-huge` the EAL maps
//!    its memory on 4 KiB pages, so `huge()` is false. On a host with reserved hugepages the
//!    same code without `--no-huge` gives `huge() == true` and the hugepage size (2 MiB or
//!    1 GiB); the test checks that branch when the arguments say so.
//! 4. Sockets: `Some(0)` works (no-huge memory is on socket 0), an unrepresentable socket is
//!    refused with EINVAL.
//! 5. Dropping a region gives its memory back to DPDK's heap: the 256 MiB heap holds fewer than
//!    four 64 MiB regions at once (proved by allocating until DPDK refuses), yet sixteen
//!    allocate-and-drop rounds of 64 MiB (1 GiB in all) succeed, and afterwards as many regions
//!    as before fit at once again.
//! 6. A fresh region's pages are populated when it is made: writing into every page of it takes
//!    (almost) no page fault, so a data core never waits for the kernel on a first placement.
#![cfg(feature = "dpdk")]

mod common;

use common::*;
use ddpdk_dataplane::port::region::Region;

const MIB: usize = 1 << 20;
const LEN: usize = 8 * MIB;
/// The EAL's `-m` in `eal_args`.
const HEAP: usize = 256 * MIB;
const BIG: usize = 64 * MIB;

/// Minor page faults of the calling thread so far (`/proc/thread-self/stat`, field 10).
fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("thread stat");
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    rest.split(' ')
        .nth(7)
        .and_then(|f| f.parse().ok())
        .expect("minflt")
}

fn zero_crc(len: usize) -> u32 {
    crc32c::crc32c(&vec![0u8; len])
}

#[test]
fn dpdk_region_zeroed_bounded_truthful_and_returned() {
    let args = eal_args("region", false, &[]);
    let no_huge = args.iter().any(|a| a == "--no-huge");
    // Declared first, so it is dropped after every region (rte_eal_cleanup unmaps DPDK memory).
    let eal = start_eal(&args);

    // 1. Zeroed.
    let r = Region::from_dpdk(&eal, LEN, None).expect("8 MiB DPDK region");
    assert_eq!(r.len(), LEN);

    // 6. Populated: a write into any page of a fresh region takes no page fault (the data
    // core that places there must not wait for the kernel). Before anything else reads the
    // region, since a read would fault its pages in too. Zeros are written, so 1. still holds.
    let before = minor_faults();
    for page in (0..LEN).step_by(4096) {
        r.place(page as u64, &[0]).expect("place into a page");
    }
    let faults = minor_faults() - before;
    assert!(
        faults < (LEN / 4096 / 16) as u64,
        "{faults} page faults placing into {} pages of a fresh region",
        LEN / 4096
    );
    let (mut first, mut last) = ([0xffu8; 1], [0xffu8; 1]);
    r.read(0, &mut first).expect("read first byte");
    r.read(LEN as u64 - 1, &mut last).expect("read last byte");
    assert_eq!((first, last), ([0], [0]), "fresh region not zeroed");
    assert_eq!(
        r.crc32c(0, LEN).expect("crc32c"),
        zero_crc(LEN),
        "fresh region"
    );

    // 2. Place/read at both ends; out of bounds refused and harmless.
    r.place(0, &[0x11]).expect("place first byte");
    r.place(LEN as u64 - 1, &[0x22]).expect("place last byte");
    r.read(0, &mut first).expect("read first byte");
    r.read(LEN as u64 - 1, &mut last).expect("read last byte");
    assert_eq!((first, last), ([0x11], [0x22]));
    assert!(
        r.place(LEN as u64, &[0x33]).is_err(),
        "one byte past the end"
    );
    assert!(
        r.place(LEN as u64 - 1, &[0x33, 0x33]).is_err(),
        "straddles the end"
    );
    assert!(
        r.read(LEN as u64, &mut [0u8; 1]).is_err(),
        "read past the end"
    );
    r.read(LEN as u64 - 1, &mut last).expect("read last byte");
    assert_eq!(last, [0x22], "a refused placement wrote nothing");

    // 3. Page size from DPDK's memseg list.
    if no_huge {
        assert_eq!(
            r.page_size(),
            Some(4096),
            "--no-huge memory is on 4 KiB pages"
        );
        assert!(!r.huge(), "--no-huge memory reported as huge: {r:?}");
    } else {
        let p = r.page_size().expect("DPDK reports the page size");
        assert!(p >= 2 * MIB, "hugepage EAL, page size {p}");
        assert!(
            r.huge(),
            "hugepage EAL memory reported as normal pages: {r:?}"
        );
    }

    // 1, continued: heap memory a dropped region dirtied comes back zeroed.
    r.fill(0, LEN, 0xa5).expect("fill");
    drop(r);
    let r = Region::from_dpdk(&eal, LEN, None).expect("8 MiB DPDK region again");
    assert_eq!(
        r.crc32c(0, LEN).expect("crc32c"),
        zero_crc(LEN),
        "region on reused heap memory"
    );
    drop(r);

    // 4. Sockets.
    let s0 = Region::from_dpdk(&eal, 4096, Some(0)).expect("a region on socket 0");
    assert_eq!(s0.len(), 4096);
    drop(s0);
    let e = Region::from_dpdk(&eal, 4096, Some(u32::MAX)).expect_err("socket u32::MAX");
    assert_eq!(e.errno, 22, "EINVAL for an unrepresentable socket: {e}");

    // 5. Dropping gives the memory back. First: the heap cannot hold HEAP / BIG regions.
    let hold_until_refused = || {
        let mut held = Vec::new();
        loop {
            match Region::from_dpdk(&eal, BIG, None) {
                Ok(r) => held.push(r),
                Err(e) => break (held, e),
            }
            assert!(held.len() <= HEAP / BIG, "the heap is bounded by -m");
        }
    };
    let (held, refused) = hold_until_refused();
    let fit = held.len();
    assert!(
        (1..HEAP / BIG).contains(&fit),
        "{fit} regions of 64 MiB held at once in a 256 MiB heap"
    );
    assert!(
        refused.to_string().contains("rte_zmalloc_socket"),
        "refusal names the call: {refused}"
    );
    drop(held);
    let rounds = 4 * (HEAP / BIG);
    for i in 0..rounds {
        let r = Region::from_dpdk(&eal, BIG, None)
            .unwrap_or_else(|e| panic!("round {i} of {rounds}: the heap lost memory: {e}"));
        r.place(BIG as u64 - 1, &[1])
            .expect("place into the last byte");
    }
    let (held, _) = hold_until_refused();
    assert_eq!(held.len(), fit, "as many 64 MiB regions fit as before");
    drop(held);
}
