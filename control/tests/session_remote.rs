//! The RFC 5043 §6 machine on another thread (the runtime's shape, DESIGN.md "DATA PPID 17 →
//! control thread"), at the connection level: a DDP Stream Session Control message leaves the
//! data path with its stream's session ([`SessionCall`]), the machine runs on it elsewhere, and
//! the session comes back. Meanwhile the stream's chunks behind the message wait, and nothing
//! the association does in between is lost. Two connections over a perfect simulated network
//! whose "control thread" answers 10 ms after each message.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod world;

use std::time::Duration;

use ddpdk_control::conn::Indication;
use ddpdk_control::session::{Event, TerminationReason};
use ddpdk_dataplane::mem::Access;
use ddpdk_dataplane::sctp::CloseReason;
use world::{read, region, session_events, tagged, wait, World};

const S: u16 = 1;
const DELAY: Duration = Duration::from_millis(10);

/// The server accepts and writes at once, so its Accept and its first segments travel in one
/// packet. At the client the Accept goes to the control thread with the session, the segments
/// behind it wait for it (RFC 5043 §6.1: judged in DDP-SSN order, after the Accept), and are
/// placed once it is back; each side's control message was run remotely.
#[test]
fn chunks_behind_a_control_message_wait_for_its_session() {
    let mut w = World::perfect(1500);
    w.set_remote_sessions(DELAY);
    w.establish();
    let (cpd, spd) = (w.client.memory.alloc_pd(), w.server.memory.alloc_pd());
    let (sink, reg) = region(&mut w.client, cpd, 4000, Access::REMOTE_WRITE, None);
    w.client.conn().initiate(S, cpd, b"hi").unwrap();
    wait(&mut w, "the Initiate", |w| {
        session_events(&w.server, S)
            .iter()
            .any(|e| matches!(e, Event::InitiateReceived { .. }))
    });
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 13 + 7) as u8).collect();
    w.server.conn().accept(S, spd, b"ok").unwrap();
    w.server
        .conn()
        .post_send(tagged(9, S, reg.stag, reg.to_base, data.clone()))
        .unwrap();
    let sent_at = w.now;
    wait(&mut w, "the write's delivery", |w| {
        w.client
            .indications
            .iter()
            .any(|i| matches!(i, Indication::TaggedDelivered { .. }))
    });
    assert!(
        w.now >= sent_at + DELAY,
        "delivered only after the Accept's session came back"
    );
    assert_eq!(read(&w.client, sink, 0, data.len()), data);
    // The Accept precedes the delivery for the ULP, as in DDP-SSN order.
    let order: Vec<bool> = w
        .client
        .indications
        .iter()
        .filter_map(|i| match i {
            Indication::Session {
                event: Event::Accepted { .. },
                ..
            } => Some(true),
            Indication::TaggedDelivered { .. } => Some(false),
            _ => None,
        })
        .collect();
    assert_eq!(order, vec![true, false]);
    let (cs, ss) = (w.client.conn().stats(), w.server.conn().stats());
    assert_eq!((cs.sessions_lent, ss.sessions_lent), (1, 1));
    assert_eq!(cs.refused_by_session, 0);
}

/// The association ends (the ULP aborts it) while a session is away with the peer's
/// Terminate: the ULP hears that session's end at once, before Closed (RFC 5043 §11.3), and
/// not a second time when the session comes back.
#[test]
fn an_association_ending_while_a_session_is_away_is_told_once_in_order() {
    let mut w = World::perfect(1500);
    w.set_remote_sessions(DELAY);
    w.establish();
    let _ = world::open(&mut w, S);
    w.server.conn().terminate(S).unwrap();
    // Until the client's core has lent its session out with the Terminate.
    wait(&mut w, "the Terminate at the client", |w| {
        w.client.conn().sessions_lent()
    });
    w.client.conn().abort();
    w.run_for(DELAY * 3);
    let ends: Vec<usize> = w
        .client
        .indications
        .iter()
        .enumerate()
        .filter_map(|(k, i)| match i {
            Indication::Session {
                stream: S,
                event: Event::SessionTerminated { reason },
            } => {
                assert_eq!(*reason, TerminationReason::AssociationEnded);
                Some(k)
            }
            _ => None,
        })
        .collect();
    let closed = w
        .client
        .indications
        .iter()
        .position(|i| matches!(i, Indication::Closed(CloseReason::LocalAbort)))
        .expect("Closed");
    assert_eq!(ends.len(), 1, "{:?}", w.client.indications);
    assert!(ends[0] < closed, "{:?}", w.client.indications);
    assert!(!w.client.conn().sessions_lent(), "the session came back");
}
