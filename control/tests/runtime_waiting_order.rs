//! Regression from an independent review of moving the RFC 5043 §6 machine to the control
//! thread (it failed as written): while a session is at the control thread, the data core
//! held the connection's packets and its ULP operations in two queues and replayed every
//! packet before any operation, so a receive posted before the peer's message was sent missed
//! it (RFC 5041 §7.1 NoBuffer on an unrelated stream). Since then only the stream whose
//! session is away waits (its chunks and operations in one queue, in arrival order); the
//! other streams are not held at all.

#![allow(clippy::unwrap_used)]

mod rt;
use rt::{remote_write, runtime, Lockstep, PORT};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use ddpdk_control::conn::{Indication, SendKind, SendRequest};
use ddpdk_control::memory::MemoryRegistration;
use ddpdk_control::runtime::{Event, Op, RuntimeConfig};
use ddpdk_dataplane::mem::Access;
use ddpdk_dataplane::port::mem::{pair, MemPort};

/// The client's ULP posts a receive on stream 1, and only then (by any other channel: here
/// the test itself) has the server send the untagged message it is for. A session of another
/// stream (2) happens to be at the client's control thread meanwhile. The receive was posted
/// before the message existed, so the message must land in it (RFC 5041 §7.1: an untagged
/// message with no buffer posted is an error that fails the stream).
#[test]
fn a_receive_posted_before_the_message_was_sent_takes_it() {
    let (a4, b4) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
    let (a6, b6): (Ipv6Addr, Ipv6Addr) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
    let (pa, pb) = pair(2, 4096);
    let (pa, pb) = (Arc::new(pa), Arc::new(pb));
    let cfg = RuntimeConfig {
        cores: 1,
        ..RuntimeConfig::default()
    };
    let make = |p: &Arc<MemPort>, v4, v6, seed: u8| runtime(Arc::clone(p), v4, v6, seed, cfg);
    let (mut a, mut b) = (make(&pa, a4, a6, 1), make(&pb, b4, b6, 2));
    let bpd = b.0.memory_mut().alloc_pd();
    let bregion = b.0.memory_mut().alloc_region(4096).unwrap();
    let _ =
        b.0.memory_mut()
            .register(remote_write(bpd, bregion, 4096))
            .unwrap();
    let apd = a.0.memory_mut().alloc_pd();
    let aregion = a.0.memory_mut().alloc_region(4096).unwrap();
    let areg =
        a.0.memory_mut()
            .register(MemoryRegistration {
                pd: apd,
                region: aregion,
                offset: 0,
                len: 4096,
                access: Access::LOCAL_WRITE,
                stream: None,
                to_base: 0,
            })
            .unwrap();
    let mut l = Lockstep::open(a, b, IpAddr::V4(b4), PORT, apd, bpd);
    for _ in 0..20 {
        l.step();
    }
    let sc = l.server_conn();
    // The server opens a session on stream 2: its Initiate reaches the client's core, which
    // lends the session to the client's control thread (not polled yet).
    l.cb.submit(
        sc,
        Op::Initiate {
            stream: 2,
            pd: bpd,
            private_data: Vec::new(),
        },
    )
    .unwrap();
    l.kb[0].poll(l.now);
    l.ka[0].poll(l.now);
    assert_eq!(
        l.ka[0].stats().sessions_lent,
        2,
        "the Accept, then this Initiate"
    );
    // The client's ULP posts its receive on stream 1; the client's core takes the command.
    let buffer =
        l.ca.memory()
            .receive_buffer(apd, areg.stag, 0, 256)
            .unwrap();
    l.ca.submit(
        l.conn,
        Op::PostRecv {
            stream: 1,
            qn: 0,
            wr_id: 77,
            buffer,
        },
    )
    .unwrap();
    l.ka[0].poll(l.now);
    // Only now does the server's ULP send the message (the client's receive is posted).
    l.cb.submit(
        sc,
        Op::PostSend(SendRequest {
            wr_id: 5,
            stream: 1,
            kind: SendKind::Untagged {
                qn: 0,
                rsvd_ulp: [0; 5],
            },
            data: vec![0xab; 100].into(),
            signaled: true,
        }),
    )
    .unwrap();
    l.kb[0].poll(l.now);
    l.ka[0].poll(l.now);
    // Stream 1 does not wait for stream 2's session, which is still away.
    let report = l.ka[0].report();
    let client = &report.assocs[0].stats;
    assert_eq!(
        (
            client.segments_received,
            client.chunks_held,
            client.sessions_lent
        ),
        (1, 0, 2),
        "the message on stream 1 is handled while stream 2's session is away"
    );
    l.run_until("the message at the client", |l| {
        l.ea.iter().any(|e| {
            matches!(
                e,
                Event::Indication {
                    indication: Indication::Received { .. } | Indication::Error { .. },
                    ..
                }
            )
        })
    });
    let got: Vec<&Indication> =
        l.ea.iter()
            .filter_map(|e| match e {
                Event::Indication { indication, .. }
                    if matches!(
                        indication,
                        Indication::Received { .. } | Indication::Error { .. }
                    ) =>
                {
                    Some(indication)
                }
                _ => None,
            })
            .collect();
    assert!(
        matches!(got.as_slice(), [Indication::Received { wr_id: 77, .. }]),
        "{got:?}"
    );
}
