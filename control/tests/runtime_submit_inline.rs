//! `Control::submit_inline`: the thread that polls its data cores itself (an inline core, as
//! `ddpdk --lcores 0@N` runs one) applies an operation for one of them at once and sends what
//! it calls for before the next turn (issue 13 item 4: a write's post without the command
//! ring's hand-off), and never ahead of commands already queued for that core.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
use rt::{runtime, tagged, Lockstep, PORT};

use std::net::{IpAddr, Ipv4Addr};

use ddpdk_control::conn::Status;
use ddpdk_control::memory::Registered;
use ddpdk_control::runtime::{Event, RuntimeConfig};
use ddpdk_dataplane::port::mem::{pair, MemPort};

const A4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// A session between two single-core endpoints, and the server's 64 KiB region for writes.
fn open() -> (
    Lockstep<MemPort>,
    Registered,
    ddpdk_control::memory::RegionId,
) {
    let (pa, pb) = pair(2, 4096);
    let cfg = RuntimeConfig {
        cores: 1,
        ..RuntimeConfig::default()
    };
    let a = runtime(pa, A4, None, 1, cfg);
    let b = runtime(pb, B4, None, 2, cfg);
    let (mut l, reg, region) = Lockstep::open_to_region(a, b, IpAddr::V4(B4), PORT, 1 << 16);
    l.run_until_quiet();
    (l, reg, region)
}

fn completed(l: &Lockstep<MemPort>) -> Vec<u64> {
    l.ea.iter()
        .filter_map(|e| match e {
            Event::Completion { completion, .. } if completion.status == Status::Success => {
                Some(completion.wr_id)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_write_submitted_inline_leaves_before_the_next_turn() {
    let (mut l, reg, region) = open();
    let sent = l.ka[0].stats().tx.frames_out;
    let op = tagged(7, reg.stag, reg.to_base + 100, vec![9u8; 300]);
    l.ca.submit_inline(l.conn, op, &mut l.ka, l.now).unwrap();
    assert_eq!(
        l.ka[0].stats().tx.frames_out,
        sent + 1,
        "the DATA chunk left within the call, no turn of the core in between"
    );
    l.run_until("the completion", |l| completed(l) == [7]);
    let mut placed = vec![0u8; 300];
    let r = l.cb.memory().region(region).unwrap();
    r.read(100, &mut placed).unwrap();
    assert_eq!(placed, vec![9u8; 300]);
}

/// A command in the core's ring comes first: the inline submission goes behind it, through the
/// ring, so two writes to the same bytes land in the order they were posted.
#[test]
fn an_inline_submission_never_overtakes_a_queued_command() {
    let (mut l, reg, region) = open();
    let sent = l.ka[0].stats().tx.frames_out;
    let first = tagged(1, reg.stag, reg.to_base, vec![1u8; 200]);
    let second = tagged(2, reg.stag, reg.to_base, vec![2u8; 200]);
    l.ca.submit(l.conn, first).unwrap();
    l.ca.submit_inline(l.conn, second, &mut l.ka, l.now)
        .unwrap();
    assert_eq!(
        l.ka[0].stats().tx.frames_out,
        sent,
        "nothing sent ahead of the queued command"
    );
    l.run_until("both completions", |l| completed(l).len() == 2);
    assert_eq!(completed(&l), [1, 2], "completions in posting order");
    let mut placed = vec![0u8; 200];
    l.cb.memory()
        .region(region)
        .unwrap()
        .read(0, &mut placed)
        .unwrap();
    assert_eq!(placed, vec![2u8; 200], "the later write's bytes last");
}
