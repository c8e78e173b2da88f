//! A data core's queues are bounded, and what they hold is the receive buffer the peer is
//! told about: a ULP (control thread) that stops taking events shrinks the peer's window to
//! nothing instead of growing the core's memory, and loses nothing.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
use rt::{runtime, runtime_with, tagged, Lockstep, PORT};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;

use ddpdk_control::conn::{Indication, Status};
use ddpdk_control::runtime::{
    Event, RuntimeConfig, LIGHT_SLEEP, MAX_HELD_UPCALLS, READY_PER_RING_ENTRY,
};
use ddpdk_dataplane::port::mem::pair;
use ddpdk_dataplane::sctp::Config;

/// The server's receive buffer (the a_rwnd of its INIT).
const BUFFER: u32 = 16_384;
const WRITES: u64 = 3000;

/// The rings of both sides' runtimes (one data core each).
const RING_DEPTH: usize = 8;

/// A client and a server of one data core each, rings of [`RING_DEPTH`], the server's receive
/// buffer [`BUFFER`], an association and session open, the server's 1 MiB region registered.
fn small_rings_and_buffer() -> (
    Lockstep<ddpdk_dataplane::port::mem::MemPort>,
    ddpdk_control::memory::Registered,
    ddpdk_control::memory::RegionId,
) {
    let (a4, b4) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
    let (a6, b6): (Ipv6Addr, Ipv6Addr) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
    let (pa, pb) = pair(2, 4096);
    let cfg = RuntimeConfig {
        cores: 1,
        ring_depth: RING_DEPTH,
        ..RuntimeConfig::default()
    };
    let a = runtime(Arc::new(pa), a4, a6, 1, cfg);
    let b = runtime_with(
        Arc::new(pb),
        b4,
        b6,
        2,
        cfg,
        Config {
            a_rwnd: BUFFER,
            ..Config::default()
        },
    );
    Lockstep::open_to_region(a, b, IpAddr::V4(b4), PORT, 1 << 20)
}

/// The server's control thread stops polling (a stalled ULP). The client writes 3000 small
/// tagged messages. The server's event ring fills, then its connection's receive buffer (the
/// indications it owes): its SACKs advertise a window too small for a segment, the client
/// stops, and the server's core holds no more than its bounds. Once the ULP polls again every
/// write completes, and every message is indicated once.
#[test]
fn a_stalled_ulp_closes_the_window_and_bounds_the_core() {
    let (l, reg, _region) = small_rings_and_buffer();
    run(l, reg.stag, reg.to_base);
}

fn run<P: ddpdk_dataplane::port::Port>(
    mut l: Lockstep<P>,
    stag: ddpdk_dataplane::mem::Stag,
    to: u64,
) {
    let mut submitted = 0u64;
    // The server's ULP is stalled: its cores run, its control thread does not.
    for _ in 0..50_000 {
        submit_writes(&mut l, &mut submitted, stag, to);
        for k in l.ka.iter_mut().chain(&mut l.kb) {
            k.poll(l.now);
        }
        l.ca.poll(l.now);
        l.ea.extend(std::iter::from_fn(|| l.ca.poll_event()));
        l.now += Duration::from_micros(200);
    }
    let stalled_at = completed(&l);
    let report = l.kb[0].report();
    let server = &report.assocs[0];
    assert!(
        stalled_at < WRITES,
        "the client was never held back ({stalled_at} writes completed)"
    );
    assert!(
        server.receive_room < 64 + 16,
        "the receive buffer is full ({} bytes left)",
        server.receive_room
    );
    assert!(
        report.upcalls_held <= MAX_HELD_UPCALLS,
        "{} upcalls held",
        report.upcalls_held
    );
    // Nothing rings the core when the control thread drains the event ring: while it holds
    // upcalls it sleeps no longer than a busy core does (before: up to `max_sleep`, 1 ms).
    assert!(report.upcalls_held > 0, "the event ring filled up");
    let limit = l.kb[0].sleep_limit(l.now);
    assert!(
        limit.is_some_and(|d| d <= LIGHT_SLEEP),
        "a core holding upcalls sleeps at most LIGHT_SLEEP, not {limit:?}"
    );
    assert_eq!(server.stats.receive_errors, 0);
    // The ULP resumes: everything completes and is indicated exactly once.
    every_write_completes_and_is_indicated_once(&mut l);
    let report = l.kb[0].report();
    assert_eq!(report.assocs[0].receive_room, BUFFER as usize);
}

/// The server's control thread polls but its ULP never takes an event (`poll_event`): the
/// control side keeps at most `ring_depth × READY_PER_RING_ENTRY` events for it and takes no
/// more upcalls, so the core's ring fills and the connection's receive buffer closes the
/// client's window (RFC 9260 §6.2), as with a stalled control thread. It used to take every
/// upcall into a queue without bound: 3000 events for 3000 writes, all completed. Once the
/// ULP takes its events, every write completes and every message is indicated once.
#[test]
fn a_ulp_that_polls_without_taking_events_holds_its_peers_back() {
    let (mut l, reg, _region) = small_rings_and_buffer();
    let limit = RING_DEPTH * READY_PER_RING_ENTRY;
    let mut submitted = 0u64;
    let mut most_waiting = 0;
    for _ in 0..50_000 {
        submit_writes(&mut l, &mut submitted, reg.stag, reg.to_base);
        for k in l.ka.iter_mut().chain(&mut l.kb) {
            k.poll(l.now);
        }
        l.ca.poll(l.now);
        l.cb.poll(l.now);
        most_waiting = most_waiting.max(l.cb.events_waiting());
        l.ea.extend(std::iter::from_fn(|| l.ca.poll_event()));
        l.now += Duration::from_micros(200);
    }
    assert!(
        most_waiting <= limit,
        "{most_waiting} events kept for the ULP, more than {limit}"
    );
    assert!(
        completed(&l) < WRITES,
        "the client was never held back ({} writes completed)",
        completed(&l)
    );
    let server = &l.kb[0].report().assocs[0];
    assert!(
        server.receive_room < 64 + 16,
        "the receive buffer is full ({} bytes left)",
        server.receive_room
    );
    every_write_completes_and_is_indicated_once(&mut l);
}

/// The server's ULP takes its events again: every write completes and every message is
/// indicated, once.
fn every_write_completes_and_is_indicated_once<P: ddpdk_dataplane::port::Port>(
    l: &mut Lockstep<P>,
) {
    l.run_until("every write completed", |l| completed(l) == WRITES);
    l.run_until("every message indicated", |l| {
        l.eb.iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::Indication {
                        indication: Indication::TaggedDelivered { .. },
                        ..
                    }
                )
            })
            .count() as u64
            == WRITES
    });
    let indicated =
        l.eb.iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::Indication {
                        indication: Indication::TaggedDelivered { .. },
                        ..
                    }
                )
            })
            .count() as u64;
    assert_eq!(indicated, WRITES, "each message indicated once");
}

/// The client's writes completed successfully so far.
fn completed<P: ddpdk_dataplane::port::Port>(l: &Lockstep<P>) -> u64 {
    l.ea.iter()
        .filter(|e| {
            matches!(
                e,
                Event::Completion { completion, .. } if completion.status == Status::Success
            )
        })
        .count() as u64
}

/// The client submits its small tagged writes (the k-th at `to + (k % 1024) × 64`) until
/// [`WRITES`] are submitted or its command ring is full.
fn submit_writes<P: ddpdk_dataplane::port::Port>(
    l: &mut Lockstep<P>,
    submitted: &mut u64,
    stag: ddpdk_dataplane::mem::Stag,
    to: u64,
) {
    while *submitted < WRITES {
        let op = tagged(*submitted, stag, to + (*submitted % 1024) * 64, vec![7; 64]);
        if l.ca.submit(l.conn, op).is_err() {
            break;
        }
        *submitted += 1;
    }
}
