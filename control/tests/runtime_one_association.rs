//! RFC 9260 allows one association between two endpoints (§5.2: an INIT for one that exists
//! is a restart or a collision, never a second one). Issue 16 finding 6: an `assoc open` that
//! gave up kept its INITs going, and the next `assoc open` to the same peer made a second
//! association. The control side now refuses a second `connect` to a peer and port while the
//! first is open, and the shell aborts an association it gave up on.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
use rt::runtime;

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use ddpdk_control::conn::Indication;
use ddpdk_control::runtime::{Event, Op, RuntimeConfig, RuntimeError};
use ddpdk_dataplane::port::mem::pair;
use ddpdk_dataplane::sctp::Instant;

#[test]
fn one_association_between_two_endpoints_9260_5_2() {
    // Nobody answers on the other end: the INIT is never answered.
    let (a, _b) = pair(2, 64);
    let (mut control, mut cores) = runtime(
        a,
        Ipv4Addr::new(198, 18, 0, 1),
        None,
        1,
        RuntimeConfig::default(),
    );
    let peer = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
    let mut now = Instant::from_nanos(1_000_000_000);
    let first = control.connect(now, peer, 5000).unwrap();
    assert_eq!(
        control.connect(now, peer, 5000),
        Err(RuntimeError::Exists(first)),
        "a second association to the same peer and port"
    );
    // Another port of the same peer is another endpoint.
    let other = control.connect(now, peer, 5001).unwrap();
    assert_ne!(other, first);
    // Given up on: aborted, its Closed comes up, and the peer can be associated with again.
    control.submit(first, Op::Abort).unwrap();
    let mut closed = false;
    for _ in 0..100 {
        now += Duration::from_millis(1);
        for c in cores.iter_mut() {
            c.poll(now);
        }
        control.poll(now);
        while let Some(e) = control.poll_event() {
            if let Event::Indication {
                conn,
                indication: Indication::Closed(_),
            } = e
            {
                closed |= conn == first;
            }
        }
        if closed {
            break;
        }
    }
    assert!(closed, "the aborted association reported its end");
    let again = control.connect(now, peer, 5000).unwrap();
    assert!(again != first && again != other);
}
