//! Zero-copy transmit at the port layer (issue 6 item 4), on a `net_ring` pair (which sends
//! mbuf chains: `RTE_ETH_TX_OFFLOAD_MULTI_SEGS`):
//!
//! 1. `attach_region` gives an mbuf whose data is the region span itself
//!    (`rte_pktmbuf_attach_extbuf`, flagged external), and each one holds a reference on the
//!    region's shared info.
//! 2. Frames chained from a copied head, an attached span and a copied tail cross the pair as
//!    three-segment chains; the receiver gathers exactly head ‖ span ‖ tail.
//! 3. Once every frame is freed, no mbuf references the region and every mbuf is back in the
//!    pool; the region can then be dropped and given back.
//! 4. Memory outside DPDK, spans outside the region and empty spans are not attached (the
//!    caller copies).
#![cfg(feature = "dpdk")]
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod common;

use std::time::Duration;

use common::*;
use ddpdk_dataplane::port::region::Region;
use ddpdk_dataplane::port::{PacketBuf, Port};

const FRAMES: usize = 64;
const LEN: usize = 1 << 20;

#[test]
fn region_spans_travel_by_reference_and_are_released() {
    let eal = start_eal(&eal_args("zero-copy", false, &[]));
    let pool = pool("zero_copy", 1023);
    let ports = ring_pair_ports(&eal, "zc", &pool, 256);
    let (a, b) = (&ports[0], &ports[1]);
    assert!(a.zero_copy_tx(), "net_ring offers multi-segment transmit");
    let region = Region::from_dpdk(&eal, LEN, None).expect("region");
    let image: Vec<u8> = (0..LEN as u32).map(|i| (i * 29 + 7) as u8).collect();
    region.place(0, &image).unwrap();

    // 1 and 2.
    let mut want = Vec::new();
    let mut frames = Vec::new();
    for k in 0..FRAMES {
        let (off, len) = (k * 9001 + 3, 1 + k * 131);
        let head: Vec<u8> = (0..20).map(|i| (k + i) as u8).collect();
        let tail = [0xee, 0xdd, k as u8];
        let copied = |bytes: &[u8]| {
            let mut v = Vec::new();
            assert!(a.alloc_bulk(&mut v, 1, bytes.len()));
            let mut m = v.pop().unwrap();
            m.data_mut().copy_from_slice(bytes);
            m
        };
        let (mut h, t) = (copied(&head), copied(&tail));
        let span = a
            .attach_region(&region, off as u64, len)
            .expect("a DPDK region span attaches");
        assert!(span.is_external() && span.data() == &image[off..off + len]);
        h.chain(span).expect("chain the span");
        h.chain(t).expect("chain the tail");
        assert_eq!(h.nb_segs(), 3);
        let mut whole = head.clone();
        whole.extend_from_slice(&image[off..off + len]);
        whole.extend_from_slice(&tail);
        assert_eq!(
            h.frame_len(),
            whole.len(),
            "the chain's length is the frame's"
        );
        want.push(whole);
        frames.push(h);
    }
    assert_eq!(
        region.mbuf_references(),
        FRAMES,
        "one reference per attached span"
    );
    let out = a.tx_burst_all(0, &mut frames, 8);
    assert_eq!(out.sent, FRAMES);
    let mut got = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while got.len() < FRAMES && std::time::Instant::now() < deadline {
        b.rx_burst(0, &mut got, 32);
    }
    assert_eq!(got.len(), FRAMES);
    let mut gathered = Vec::new();
    for (k, f) in got.iter().enumerate() {
        assert!(f.gather_into(&mut gathered), "frame {k} arrived as a chain");
        assert_eq!(gathered, want[k], "frame {k}: head, span, tail");
    }

    // 3.
    drop(got);
    assert_eq!(
        region.mbuf_references(),
        0,
        "freed frames release the region"
    );
    assert_eq!(pool.in_use_count(), 0, "every mbuf back in the pool");

    // 4.
    let heap = Region::new(4096).unwrap();
    assert!(a.attach_region(&heap, 0, 100).is_none(), "not DPDK memory");
    assert!(
        a.attach_region(&region, (LEN - 10) as u64, 100).is_none(),
        "past the end"
    );
    assert!(a.attach_region(&region, 0, 0).is_none(), "empty");
    assert!(
        a.attach_region(&region, 0, 70_000).is_none(),
        "longer than an mbuf describes"
    );
    assert_eq!(region.mbuf_references(), 0);
    assert_eq!(
        pool.in_use_count(),
        0,
        "refused attachments free their mbuf"
    );

    // 5. A stock buffer of the port's own pool (a bulk sender's) becomes the span itself;
    // one that is not fresh, or not the pool's, or a span the region does not lend, comes
    // back unchanged and attaches nothing.
    let mut stock = Vec::new();
    assert!(a.alloc_bulk(&mut stock, 4, 0));
    let span = a
        .attach_region_in(stock.pop().unwrap(), &region, 5, 300)
        .unwrap_or_else(|_| panic!("a fresh mbuf of the pool attaches"));
    assert!(span.is_external() && span.data() == &image[5..305]);
    assert_eq!(region.mbuf_references(), 1);
    let mut chain = stock.pop().unwrap();
    chain.chain(stock.pop().unwrap()).unwrap();
    let chain = a
        .attach_region_in(chain, &region, 0, 10)
        .expect_err("a chain is not a fresh buffer");
    assert!(chain.nb_segs() == 2 && !chain.is_external());
    let refused = a
        .attach_region_in(stock.pop().unwrap(), &heap, 0, 100)
        .expect_err("not DPDK memory");
    assert!(!refused.is_external());
    let other = common::pool("zero_copy_other", 63);
    let mut theirs = Vec::new();
    assert!(other.alloc_bulk(&mut theirs, 1, 0));
    let back = a
        .attach_region_in(theirs.pop().unwrap(), &region, 0, 10)
        .expect_err("another pool's mbuf");
    assert!(!back.is_external());
    assert_eq!(
        region.mbuf_references(),
        1,
        "only the one span holds the region"
    );
    drop((span, chain, refused, back));
    assert_eq!(region.mbuf_references(), 0);
    assert_eq!(pool.in_use_count(), 0);
    assert_eq!(other.in_use_count(), 0);
    drop(region);
    drop(ports);
}
