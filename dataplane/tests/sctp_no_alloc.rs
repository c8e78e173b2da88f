//! Issue 4 item 5: no allocation per packet on the steady path. A counting global allocator
//! watches two established associations move thousands of messages both ways (SACKs, bundling,
//! delayed-ack timers included) through fixed buffers: the count must not move.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use ddpdk_dataplane::sctp::{Association, Config, Endpoint, Instant, Message, Outcome};
use ddpdk_dataplane::wire::crc32c;
use ddpdk_dataplane::wire::sctp::{
    ChunkRepr, GapAckBlock, HeaderRepr, List, PacketBuilder, SackRepr,
};

struct Counting;

thread_local! {
    /// Allocations made by this thread: the test harness's own (reporting another test's
    /// end) are not the association's.
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

fn count_one() {
    // Not after the thread's TLS is gone (a Cell has no destructor, but be safe).
    let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static A: Counting = Counting;

const C: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const S: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));

fn pair(now: Instant) -> (Association, Association) {
    let cfg = |port| Config {
        local_port: port,
        ..Config::default()
    };
    let mut cep = Endpoint::new(cfg(5001), [1; 32]).unwrap();
    let mut sep = Endpoint::new(cfg(5002), [2; 32]).unwrap();
    let mut c = cep.connect(now, S, 5002);
    let mut buf = vec![0u8; 65536];
    let mut out = vec![0u8; 65536];
    let mut sink = |_: Message<'_>| {};
    let n = c.poll_transmit(now, &mut buf).unwrap();
    let Outcome::Reply(m) = sep.handle(now, C, &buf[..n], &mut out, &mut sink) else {
        panic!()
    };
    c.handle(now, &out[..m], &mut sink).unwrap();
    let n = c.poll_transmit(now, &mut buf).unwrap();
    let Outcome::Accepted(mut s) = sep.handle(now, C, &buf[..n], &mut out, &mut sink) else {
        panic!()
    };
    let n = s.poll_transmit(now, &mut buf).unwrap();
    c.handle(now, &buf[..n], &mut sink).unwrap();
    while c.poll_event().is_some() {}
    while s.poll_event().is_some() {}
    (c, *s)
}

#[test]
fn steady_path_does_not_allocate() {
    let mut now = Instant::from_nanos(1_000_000_000);
    let (mut c, mut s) = pair(now);
    let mut buf = vec![0u8; 65536];
    let msg = vec![0x5au8; 1200];
    let mut delivered = [0u64; 2];
    let run = |c: &mut Association,
               s: &mut Association,
               now: &mut Instant,
               delivered: &mut [u64; 2],
               buf: &mut [u8],
               rounds: u32| {
        for _ in 0..rounds {
            for _ in 0..8 {
                let _ = c.send(1, 16, &msg);
                let _ = s.send(2, 17, &msg[..300]);
            }
            loop {
                let mut moved = false;
                while let Some(n) = c.poll_transmit(*now, buf) {
                    let d = &mut delivered[1];
                    s.handle(*now, &buf[..n], &mut |_: Message<'_>| *d += 1)
                        .unwrap();
                    moved = true;
                }
                while let Some(n) = s.poll_transmit(*now, buf) {
                    let d = &mut delivered[0];
                    c.handle(*now, &buf[..n], &mut |_: Message<'_>| *d += 1)
                        .unwrap();
                    moved = true;
                }
                if !moved {
                    break;
                }
            }
            *now += Duration::from_millis(250);
            for a in [&mut *c, &mut *s] {
                if a.poll_timeout().is_some_and(|t| t <= *now) {
                    a.handle_timeout(*now);
                }
            }
        }
    };
    // Warm up (the event queue and anything lazily sized reach their working size).
    run(&mut c, &mut s, &mut now, &mut delivered, &mut buf, 50);
    let before = allocs();
    let delivered_before = delivered;
    run(&mut c, &mut s, &mut now, &mut delivered, &mut buf, 500);
    let allocs = allocs() - before;
    let moved = (delivered[0] - delivered_before[0]) + (delivered[1] - delivered_before[1]);
    assert!(moved >= 7000, "the steady phase moved {moved} messages");
    assert_eq!(
        allocs, 0,
        "{allocs} allocations while moving {moved} messages"
    );
}

/// A SACK to `c` built in `buf` (no allocation): cumulative TSN `cum`, these Gap Ack Blocks.
fn sack_into(buf: &mut [u8], c: &Association, cum: u32, blocks: &[GapAckBlock]) -> usize {
    let hdr = HeaderRepr {
        src_port: 5002,
        dst_port: 5001,
        verification_tag: c.local_tag(),
    };
    let mut b = PacketBuilder::new(buf, &hdr).unwrap();
    b.push(&ChunkRepr::Sack(SackRepr {
        cum_tsn_ack: cum,
        a_rwnd: 1 << 20,
        gap_ack_blocks: List::new(blocks),
        dup_tsns: List::new(&[]),
    }))
    .unwrap();
    let n = b.packet_len();
    crc32c::fill(&mut buf[..n]);
    n
}

/// RFC 9260 §6.2.1 D iii: a receiver that reneges (its SACKs gap-ack chunks, then no longer
/// do) costs the sender no allocation either: the TSNs reneged on were collected in a list
/// allocated for each such SACK, which a peer could make every other SACK (an independent
/// review). Each round, eight messages are lost on the way; the peer gap-acks the last seven,
/// reneges on them, then acknowledges all eight.
#[test]
fn reneging_does_not_allocate() {
    let mut now = Instant::from_nanos(1_000_000_000);
    let (mut c, s) = pair(now);
    let mut base = s.received_cum_tsn();
    let mut buf = vec![0u8; 65536];
    let mut sack = vec![0u8; 2048];
    let msg = [0x5au8; 100];
    let mut round = |c: &mut Association, now: &mut Instant, base: &mut u32| {
        for _ in 0..8 {
            c.send(1, 16, &msg).unwrap();
        }
        while c.poll_transmit(*now, &mut buf).is_some() {}
        let tail = [GapAckBlock { start: 2, end: 8 }];
        for blocks in [&tail[..], &[], &tail[..], &[]] {
            let n = sack_into(&mut sack, c, *base, blocks);
            c.handle(*now, &sack[..n], &mut |_: Message<'_>| {})
                .unwrap();
            while c.poll_transmit(*now, &mut buf).is_some() {}
        }
        *base = base.wrapping_add(8);
        let n = sack_into(&mut sack, c, *base, &[]);
        c.handle(*now, &sack[..n], &mut |_: Message<'_>| {})
            .unwrap();
        while c.poll_transmit(*now, &mut buf).is_some() {}
        while c.poll_event().is_some() {}
        *now += Duration::from_millis(1);
    };
    for _ in 0..20 {
        round(&mut c, &mut now, &mut base);
    }
    let reneged = c.stats().peer_reneged;
    let before = allocs();
    for _ in 0..200 {
        round(&mut c, &mut now, &mut base);
    }
    let allocs = allocs() - before;
    assert!(
        c.stats().peer_reneged - reneged >= 200 * 7,
        "the peer reneged {} times",
        c.stats().peer_reneged - reneged
    );
    assert_eq!(allocs, 0, "{allocs} allocations over 400 reneging SACKs");
}
