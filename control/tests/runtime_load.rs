//! A data core's load counters: the time between its turns, charged to busy or idle by what
//! the earlier turn did. Operators and the goodput bench read the busy share to see which side
//! of a transfer is the bound.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
use rt::runtime;

use std::net::Ipv4Addr;
use std::time::Duration;

use ddpdk_control::runtime::{CoreStats, RuntimeConfig};
use ddpdk_dataplane::port::mem::{pair, HeapBuf};
use ddpdk_dataplane::port::Port;
use ddpdk_dataplane::sctp::Instant;

#[test]
fn load_charges_the_time_after_a_turn_to_what_that_turn_did() {
    let (a, b) = pair(2, 64);
    let (_control, mut cores) = runtime(
        a,
        Ipv4Addr::new(198, 18, 0, 1),
        None,
        1,
        RuntimeConfig::default(),
    );
    let core = &mut cores[0];
    let t0 = Instant::from_nanos(1_000_000);
    let at = |us: u64| t0 + Duration::from_micros(us);
    assert_eq!(core.poll(at(0)), 0, "nothing to do yet");
    assert_eq!(core.poll(at(10)), 0);
    // A frame for the core (not even for us: receiving and discarding it is work).
    let mut frame = vec![0u8; 60];
    frame[..6].fill(0xff);
    assert_eq!(b.tx_burst(0, &mut vec![HeapBuf::new(frame)]), 1);
    assert!(core.poll(at(20)) > 0, "the frame is work");
    assert_eq!(core.poll(at(50)), 0);
    // The same instant again (the look after a sleep is announced) charges nothing.
    assert_eq!(core.poll(at(50)), 0);
    assert_eq!(core.poll(at(60)), 0);
    let s = core.stats();
    // 0..10 and 10..20 followed idle turns, 20..50 the busy one, 50..60 an idle one.
    assert_eq!((s.busy_ns, s.idle_ns), (30_000, 30_000));
    assert_eq!(s.busy_share(&CoreStats::default()), Some(0.5));
    let later = CoreStats {
        busy_ns: s.busy_ns + 10_000,
        ..s
    };
    assert_eq!(
        later.busy_share(&s),
        Some(1.0),
        "a share between two snapshots"
    );
    assert_eq!(s.busy_share(&s), None, "no time passed");
}
