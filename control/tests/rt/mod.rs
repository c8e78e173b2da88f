//! Helpers shared by the runtime tests.

use ddpdk_control::conn::{Indication, SendKind, SendRequest};
use ddpdk_control::runtime::{ConnHandle, Event, Op};
use ddpdk_control::session::Event as SessionEvent;
use ddpdk_dataplane::mem::Stag;

/// A signaled tagged write of `data` to `stag` at `to` on stream 1.
pub fn tagged(wr_id: u64, stag: Stag, to: u64, data: Vec<u8>) -> Op {
    Op::PostSend(SendRequest {
        wr_id,
        stream: 1,
        kind: SendKind::Tagged {
            stag,
            to,
            rsvd_ulp: 0,
        },
        data,
        signaled: true,
    })
}

/// Whether `events` hold a session event of `conn` that `pred` accepts.
pub fn session_event(
    events: &[Event],
    conn: ConnHandle,
    pred: impl Fn(&SessionEvent) -> bool,
) -> bool {
    events.iter().any(|e| {
        matches!(e, Event::Indication { conn: c, indication: Indication::Session { event, .. } }
            if *c == conn && pred(event))
    })
}
