//! Issue 4 item 5: no allocation per packet on the steady path. A counting global allocator
//! watches two established associations move thousands of messages both ways (SACKs, bundling,
//! delayed-ack timers included) through fixed buffers: the count must not move.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ddpdk_dataplane::sctp::{Association, Config, Endpoint, Instant, Message, Outcome};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
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
    let before = ALLOCS.load(Ordering::Relaxed);
    let delivered_before = delivered;
    run(&mut c, &mut s, &mut now, &mut delivered, &mut buf, 500);
    let allocs = ALLOCS.load(Ordering::Relaxed) - before;
    let moved = (delivered[0] - delivered_before[0]) + (delivered[1] - delivered_before[1]);
    assert!(moved >= 7000, "the steady phase moved {moved} messages");
    assert_eq!(
        allocs, 0,
        "{allocs} allocations while moving {moved} messages"
    );
}
