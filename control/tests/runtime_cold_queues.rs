//! RX queues that carry nothing go cold (`COLD_RX_AFTER`): a busy loop polls them every
//! `COLD_RX_POLL` (or every `COLD_RX_TURNS` turns), not every turn, and the frames that come to
//! them are still read, after which they are hot again.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
use rt::runtime;

use std::net::Ipv4Addr;
use std::time::Duration;

use ddpdk_control::runtime::{DataCore, RuntimeConfig, COLD_RX_AFTER, COLD_RX_POLL, COLD_RX_TURNS};
use ddpdk_dataplane::port::mem::{pair, HeapBuf, MemPort};
use ddpdk_dataplane::port::Port;
use ddpdk_dataplane::sctp::Instant;

/// A broadcast frame for nobody: reading and discarding it is a turn's work.
fn send(peer: &MemPort, queue: u16) {
    let mut frame = vec![0u8; 60];
    frame[..6].fill(0xff);
    assert_eq!(peer.tx_burst(queue, &mut vec![HeapBuf::new(frame)]), 1);
}

/// One data core polling every RX queue of a port with `queues` of them, and the port's peer.
fn one_core(queues: u16) -> (DataCore<MemPort>, MemPort) {
    let (a, b) = pair(queues, 64);
    let (_control, mut cores) = runtime(
        a,
        Ipv4Addr::new(198, 18, 0, 1),
        None,
        1,
        RuntimeConfig::default(),
    );
    (cores.remove(0), b)
}

#[test]
fn a_cold_rx_queue_is_polled_every_cold_rx_poll_and_its_frames_still_read() {
    let (mut core, b) = one_core(4);
    let core = &mut core;
    let t0 = Instant::from_nanos(1_000_000);
    let ns = |t: Instant, n: u64| t.saturating_add_nanos(n);
    assert_eq!(core.poll(t0), 0);
    // Just short of COLD_RX_AFTER every queue is still hot: a frame is read on the next turn.
    let t1 = t0 + (COLD_RX_AFTER - Duration::from_micros(1));
    send(&b, 3);
    assert!(core.poll(t1) > 0, "a hot queue is polled every turn");
    // Queues 0-2 have carried nothing for COLD_RX_AFTER: cold from this turn on.
    let t2 = t0 + COLD_RX_AFTER;
    assert_eq!(core.poll(t2), 0);
    send(&b, 2);
    assert_eq!(
        core.poll(ns(t2, 100)),
        0,
        "a cold queue is not polled on the next turn"
    );
    assert_eq!(core.poll(t2 + COLD_RX_POLL / 2), 0);
    assert!(
        core.poll(t2 + COLD_RX_POLL) > 0,
        "a cold queue's frame is read within COLD_RX_POLL"
    );
    // Hot again: the next frame is read on the next turn.
    send(&b, 2);
    assert!(core.poll(ns(t2 + COLD_RX_POLL, 100)) > 0);
    // Queue 3 was active at t1, so it is still hot.
    send(&b, 3);
    assert!(core.poll(ns(t2 + COLD_RX_POLL, 200)) > 0);
    // A sleeping core's turns are COLD_RX_POLL apart or more: each polls every queue.
    let t3 = t2 + COLD_RX_AFTER * 2;
    assert_eq!(core.poll(t3), 0);
    send(&b, 0);
    assert!(core.poll(t3 + COLD_RX_POLL) > 0);
    assert_eq!(core.stats().frames_in, 5, "no frame lost");
}

/// A loop whose clock stands still (a simulation) reads a cold queue every COLD_RX_TURNS turns.
#[test]
fn a_cold_rx_queue_is_read_every_cold_rx_turns_at_a_standing_clock() {
    let (mut core, b) = one_core(2);
    let core = &mut core;
    let t0 = Instant::from_nanos(1_000_000);
    assert_eq!(core.poll(t0), 0);
    let cold = t0 + COLD_RX_AFTER;
    assert_eq!(core.poll(cold), 0, "queues 0 and 1 go cold");
    send(&b, 1);
    for turn in 1..COLD_RX_TURNS {
        assert_eq!(core.poll(cold), 0, "turn {turn}: not polled yet");
    }
    assert!(core.poll(cold) > 0, "read on turn {COLD_RX_TURNS}");
    assert_eq!(core.stats().frames_in, 1);
}
