//! `Control::forget` of a live connection (found by an independent review of session 61's
//! change): what the connection owes the ULP still comes, whatever was away at the control
//! thread.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
mod verbs_pair;
use verbs_pair::*;

use std::time::Duration;

use ddpdk_control::conn::Indication;
use ddpdk_control::runtime::{ConnHandle, Event, Op};
use ddpdk_dataplane::mem::Access;

/// Client and server associated (no queue pair): the pair, the client's connection and the
/// server's.
fn associated() -> (Pair, ConnHandle, ConnHandle) {
    let mut p = Pair::new();
    let (client, server) = p.associate_both();
    (p, client, server)
}

/// `Control::forget` (runtime.rs doc, and docs/verbs.md): "what it owes the ULP still comes,
/// in order, after this returns: its completions, the sends and receives it ends `Flushed`,
/// and its Closed". A receive the ULP posted on a stream whose session was at the control
/// thread (RFC 5043 §6 machine, `Upcall::Session`) was taken and deferred by the core
/// (`Applied::Deferred`: its result comes later). Forgetting the connection then must still
/// give that receive back (flushed, or refused), before or with the Closed; the core drops the
/// slot, and the session's return, which would have applied and reported it, never happens.
#[test]
fn forget_while_a_session_is_lent_still_returns_the_receives_it_deferred() {
    let (mut p, client, server) = associated();
    let pdb = p.b.v.alloc_pd();
    let mr =
        p.b.v
            .reg_mr(pdb, 1 << 16, Access::LOCAL_WRITE, 0x9000_0000)
            .unwrap();
    let pda = p.a.v.alloc_pd();
    p.a.v
        .control_mut()
        .submit(
            client,
            Op::Initiate {
                stream: 2,
                pd: pda.0,
                private_data: b"hi".to_vec(),
            },
        )
        .unwrap();
    // Turn the client and the server's cores, not the server's control thread, until a
    // server core has lent the stream's session out with the Initiate.
    let lent = |p: &Pair| p.b.cores.iter().any(|k| k.stats().sessions_lent > 0);
    for _ in 0..10_000 {
        if lent(&p) {
            break;
        }
        for k in &mut p.a.cores {
            k.poll(p.now);
        }
        p.a.v.poll(p.now);
        for k in &mut p.b.cores {
            k.poll(p.now);
        }
        p.now += Duration::from_micros(200);
    }
    assert!(
        lent(&p),
        "the server's core lent the session out: {:?}",
        p.b.cores
            .iter()
            .map(|k| k.stats())
            .collect::<Vec<_>>()
            .iter()
            .chain(
                p.a.cores
                    .iter()
                    .map(|k| k.stats())
                    .collect::<Vec<_>>()
                    .iter()
            )
            .map(|s| (
                s.frames_in,
                s.to_connections,
                s.to_control,
                s.tx.frames_out,
                s.commands,
                s.dispatched_in,
                s.dispatched_out
            ))
            .collect::<Vec<_>>()
    );
    let buffer =
        p.b.v
            .control()
            .memory()
            .receive_buffer(pdb.0, mr.lkey, 0, 1024)
            .unwrap();
    p.b.v
        .control_mut()
        .submit(
            server,
            Op::PostRecv {
                stream: 2,
                qn: 0,
                wr_id: 77,
                buffer,
            },
        )
        .unwrap();
    p.b.v.control_mut().forget(server).unwrap();
    p.steps(500);
    let ev = &p.b.events;
    let closed = ev.iter().position(|e| {
        matches!(
            e,
            Event::Indication {
                indication: Indication::Closed(_),
                ..
            }
        )
    });
    assert!(closed.is_some(), "the Closed came: {ev:?}");
    let back = ev.iter().any(|e| match e {
        Event::Indication {
            indication: Indication::RecvFlushed { wr_id, .. },
            ..
        } => *wr_id == 77,
        Event::Refused { wr_id, .. } => *wr_id == Some(77),
        _ => false,
    });
    assert!(back, "receive 77 never returned to the ULP: {ev:?}");
}
