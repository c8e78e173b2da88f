//! DDP connections end to end over a simulated network (`tests/world`): sessions (RFC 5043
//! §6), the ULP operations of RFC 4296 §2.1.2, placement with the checks of RFC 5041 §7.1,
//! and what a hostile peer can and cannot do to registered memory (RFC 5041 §8).

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod world;

use std::time::Duration;

use ddpdk_control::conn::{
    ConnConfig, Indication, OnReceiveError, PostError, SendKind, SendRequest, Status,
};
use ddpdk_control::memory::Registered;
use ddpdk_control::session::{Event, LocalError, State, TerminationReason};
use ddpdk_dataplane::ddp::RxError;
use ddpdk_dataplane::mem::{Access, Pd, Stag};
use ddpdk_dataplane::sctp::CloseReason;
use ddpdk_dataplane::wire::ddp::DdpError;
use world::{open, read, region, session_events, tagged, wait, Side, World};

const S: u16 = 1;

fn untagged(wr_id: u64, stream: u16, qn: u32, data: Vec<u8>) -> SendRequest {
    SendRequest {
        wr_id,
        stream,
        kind: SendKind::Untagged {
            qn,
            rsvd_ulp: [1, 2, 3, 4, 5],
        },
        data: data.into(),
        signaled: true,
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

fn completions(side: &Side) -> Vec<(u64, Status)> {
    side.completions
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect()
}

fn errors(side: &Side) -> Vec<(u16, RxError, usize)> {
    side.indications
        .iter()
        .filter_map(|i| match i {
            Indication::Error {
                stream,
                error,
                segment_len,
                ..
            } => Some((*stream, *error, *segment_len)),
            _ => None,
        })
        .collect()
}

/// RFC 5043 §6.2 with Private Data both ways (§5.2.3), then a multi-segment tagged write and
/// an untagged send: bytes placed exactly, delivery indicated with STag / MSN, length and
/// RsvdULP (RFC 5041 §5.4), completions at the source once SCTP acknowledged (§5.4).
#[test]
fn accepted_session_moves_tagged_and_untagged_messages() {
    let mut w = World::perfect(1500);
    w.establish();
    let sizes = w.client.conn().max_sizes();
    assert_eq!(sizes.tagged, sizes.mulpdu - 14);
    assert_eq!(sizes.untagged, sizes.mulpdu - 18);
    let (_, spd) = open(&mut w, S);
    assert_eq!(
        session_events(&w.server, S)[0],
        Event::InitiateReceived {
            private_data: ddpdk_control::session::OwnedPrivateData::new(b"hello").unwrap()
        }
    );
    assert!(session_events(&w.client, S).contains(&Event::Accepted {
        private_data: ddpdk_control::session::OwnedPrivateData::new(b"welcome").unwrap()
    }));

    let (tr, treg) = region(&mut w.server, spd, 64 << 10, Access::REMOTE_WRITE, Some(S));
    let (ur, ureg) = region(&mut w.server, spd, 8192, Access::LOCAL_WRITE, None);
    let buf = w
        .server
        .memory
        .receive_buffer(spd, ureg.stag, 100, 4000)
        .unwrap();
    w.server.conn().post_recv(S, 0, 77, buf).unwrap();

    let big = pattern(20_000, 3);
    let small = pattern(3000, 9);
    let c = w.client.conn();
    c.post_send(tagged(1, S, treg.stag, treg.to_base + 1000, big.clone()))
        .unwrap();
    c.post_send(untagged(2, S, 0, small.clone())).unwrap();
    wait(&mut w, "both completions", |w| {
        w.client.completions.len() == 2
    });
    wait(&mut w, "both deliveries", |w| {
        w.server
            .indications
            .iter()
            .filter(|i| {
                matches!(
                    i,
                    Indication::Received { .. } | Indication::TaggedDelivered { .. }
                )
            })
            .count()
            == 2
    });
    assert_eq!(
        completions(&w.client),
        vec![(1, Status::Success), (2, Status::Success)]
    );
    assert_eq!(read(&w.server, tr, 1000, big.len()), big);
    assert_eq!(
        read(&w.server, tr, 999, 1),
        vec![0],
        "nothing before the TO"
    );
    assert_eq!(
        read(&w.server, tr, 21_000, 1),
        vec![0],
        "nothing after the message"
    );
    assert_eq!(read(&w.server, ur, 100, small.len()), small);
    let delivered: Vec<_> = w
        .server
        .indications
        .iter()
        .filter(|i| {
            matches!(
                i,
                Indication::Received { .. } | Indication::TaggedDelivered { .. }
            )
        })
        .cloned()
        .collect();
    assert_eq!(
        delivered,
        vec![
            Indication::TaggedDelivered {
                stream: S,
                stag: treg.stag,
                rsvd_ulp: 0x5a
            },
            Indication::Received {
                stream: S,
                wr_id: 77,
                qn: 0,
                msn: 1,
                len: 3000,
                rsvd_ulp: [1, 2, 3, 4, 5],
                invalidated: None,
                imm_data: None,
            }
        ],
        "in the order sent (RFC 5041 §5.3)"
    );
    assert!(
        w.client.conn().stats().segments_sent >= 17,
        "20000 bytes need 14+ segments"
    );
    assert!(errors(&w.server).is_empty());
}

/// RFC 5043 §6.6: the active side sends no DDP Segment before the Accept arrived; sends posted
/// earlier wait, then leave in order.
#[test]
fn segments_wait_for_the_accept_6_6() {
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, spd) = (w.client.memory.alloc_pd(), w.server.memory.alloc_pd());
    w.client.conn().initiate(S, cpd, b"").unwrap();
    w.client
        .conn()
        .post_send(untagged(5, S, 0, vec![1; 10]))
        .unwrap();
    wait(&mut w, "the Initiate", |w| {
        !session_events(&w.server, S).is_empty()
    });
    w.run_for(Duration::from_secs(5));
    assert_eq!(
        w.client.conn().stats().segments_sent,
        0,
        "held until the Accept"
    );
    assert_eq!(w.server.conn().stats().segments_received, 0);
    let (_, ureg) = region(&mut w.server, spd, 4096, Access::LOCAL_WRITE, None);
    w.server.conn().accept(S, spd, b"").unwrap();
    let buf = w
        .server
        .memory
        .receive_buffer(spd, ureg.stag, 0, 64)
        .unwrap();
    w.server.conn().post_recv(S, 0, 9, buf).unwrap();
    wait(&mut w, "the message", |w| {
        w.server.indications.iter().any(|i| {
            matches!(
                i,
                Indication::Received {
                    wr_id: 9,
                    len: 10,
                    ..
                }
            )
        })
    });
    assert_eq!(w.server.conn().stats().refused_by_session, 0);
}

/// RFC 5043 §6.3: the passive ULP rejects; the active side hears the Reject with its Private
/// Data, its queued sends are flushed, and the stream can carry a new session afterwards.
#[test]
fn rejected_session_flushes_and_the_stream_is_reused_6_3() {
    let mut w = World::perfect(1500);
    w.establish();
    let cpd = w.client.memory.alloc_pd();
    w.client.conn().initiate(S, cpd, b"may I").unwrap();
    w.client
        .conn()
        .post_send(untagged(5, S, 0, vec![1; 10]))
        .unwrap();
    wait(&mut w, "the Initiate", |w| {
        !session_events(&w.server, S).is_empty()
    });
    w.server.conn().reject(S, b"no").unwrap();
    wait(&mut w, "the Reject", |w| {
        session_events(&w.client, S)
            .iter()
            .any(|e| matches!(e, Event::SessionTerminated { .. }))
    });
    assert!(session_events(&w.client, S).contains(&Event::Rejected {
        private_data: ddpdk_control::session::OwnedPrivateData::new(b"no").unwrap()
    }));
    assert_eq!(completions(&w.client), vec![(5, Status::Flushed)]);
    assert_eq!(
        w.client.conn().post_send(untagged(6, S, 0, vec![1])),
        Err(PostError::Session(LocalError::Terminated))
    );
    // §6.6: reuse once nothing of the old session is outstanding.
    w.run_for(Duration::from_secs(2));
    w.client.conn().initiate(S, cpd, b"again").unwrap();
    wait(&mut w, "the second Initiate", |w| {
        session_events(&w.server, S)
            .iter()
            .filter(|e| matches!(e, Event::InitiateReceived { .. }))
            .count()
            == 2
    });
}

/// RFC 5043 §6.4: with the pending-Initiate limit reached, a further Initiate is answered with
/// a Terminate and never reaches the ULP.
#[test]
fn too_many_pending_initiates_are_terminated_6_4() {
    let mut rng = world::Rng::new(5);
    let mut w = World::new(
        world::NetConfig::perfect(1500),
        ddpdk_control::conn::ConnConfig::default(),
        1,
        &mut rng,
    );
    w.establish();
    let cpd = w.client.memory.alloc_pd();
    w.client.conn().initiate(1, cpd, b"").unwrap();
    w.client.conn().initiate(2, cpd, b"").unwrap();
    wait(&mut w, "the Terminate on stream 2", |w| {
        session_events(&w.client, 2).contains(&Event::TerminateReceived)
    });
    assert!(session_events(&w.server, 1)
        .iter()
        .any(|e| matches!(e, Event::InitiateReceived { .. })));
    assert!(!session_events(&w.server, 2)
        .iter()
        .any(|e| matches!(e, Event::InitiateReceived { .. })));
    assert_eq!(
        w.client.conn().session_state(2),
        Some(State::Terminated(TerminationReason::PeerTerminate))
    );
    assert_eq!(w.client.conn().session_state(1), Some(State::InitiateSent));
}

/// Connections whose ULP sends one more message after a receive error before the stream ends
/// (RFC 5041 §7.1; how RDMAP sends its Terminate).
fn last_message_world() -> World {
    World::perfect_with(
        1500,
        ConnConfig {
            on_receive_error: OnReceiveError::AfterLastMessage,
            ..ConnConfig::default()
        },
    )
}

/// One attack: the client sends `req` (a tagged write the server must refuse). Checks RFC 5041
/// §7.1: the exact error, zero bytes placed, later segments dropped silently, and the one
/// further message the server's ULP may send before the stream is terminated.
fn attack(
    w: &mut World,
    make: impl FnOnce(&mut World, Pd, Registered) -> SendRequest,
    want: DdpError,
) {
    w.establish();
    let (cpd, spd) = open(w, S);
    let (tr, treg) = region(&mut w.server, spd, 4096, Access::REMOTE_WRITE, Some(S));
    // The client can take one message from the server after the error.
    let (_, creg) = region(&mut w.client, cpd, 4096, Access::LOCAL_WRITE, None);
    let cbuf = w
        .client
        .memory
        .receive_buffer(cpd, creg.stag, 0, 256)
        .unwrap();
    w.client.conn().post_recv(S, 0, 40, cbuf).unwrap();

    let req = make(w, spd, treg);
    let len = req.data.len();
    let (header, max) = match req.kind {
        SendKind::Tagged { .. } => (14, w.server.conn().max_sizes().tagged),
        SendKind::Untagged { .. } => (18, w.server.conn().max_sizes().untagged),
    };
    w.client.conn().post_send(req).unwrap();
    wait(w, "the error", |w| !errors(&w.server).is_empty());
    let errs = errors(&w.server);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].1, RxError::Ddp(want));
    assert_eq!(errs[0].2, header + len.min(max), "segment length");
    assert!(
        read(&w.server, tr, 0, 4096).iter().all(|&b| b == 0),
        "nothing placed"
    );

    // A valid write now: dropped silently, no second error, nothing placed.
    w.client
        .conn()
        .post_send(tagged(2, S, treg.stag, treg.to_base, vec![0xee; 100]))
        .unwrap();
    wait(w, "the valid write's completion", |w| {
        w.client.completions.iter().any(|c| c.wr_id == 2)
    });
    w.run_for(Duration::from_secs(1));
    assert_eq!(errors(&w.server).len(), 1, "one error report only");
    assert!(
        read(&w.server, tr, 0, 4096).iter().all(|&b| b == 0),
        "dropped after the error"
    );
    assert!(!w
        .server
        .indications
        .iter()
        .any(|i| matches!(i, Indication::TaggedDelivered { .. })));

    // The server's ULP sends one last message, then the stream is terminated.
    w.server
        .conn()
        .post_send(untagged(30, S, 0, b"terminate: bad STag".to_vec()))
        .unwrap();
    assert_eq!(
        w.server.conn().post_send(untagged(31, S, 0, vec![1])),
        Err(PostError::StreamFailed)
    );
    wait(w, "the Terminate", |w| {
        session_events(&w.client, S).contains(&Event::TerminateReceived)
    });
    assert!(
        w.client.indications.iter().any(|i| matches!(
            i,
            Indication::Received {
                wr_id: 40,
                len: 19,
                ..
            }
        )),
        "the last message arrived before the Terminate"
    );
    // The stream ended because of the receive error, whose one further message has gone.
    assert_eq!(
        w.server.conn().session_state(S),
        Some(State::Terminated(TerminationReason::ReceiveError(
            RxError::Ddp(want)
        )))
    );
    // The association lives on (RFC 5043 §11.3).
    assert!(!w.server.conn().is_closed() && !w.client.conn().is_closed());
}

/// RFC 5041 §7.1 tagged check 1 / §8.3: an STag the peer guessed is refused as Invalid STag.
#[test]
fn attack_random_stag() {
    let mut w = last_message_world();
    attack(
        &mut w,
        |_, _, reg| {
            // Same index, another key: exactly what a guess that hit a live index looks like.
            let guess = Stag(reg.stag.0 ^ 0x01);
            tagged(1, S, guess, reg.to_base, vec![0xaa; 3000])
        },
        DdpError::InvalidStag,
    );
}

/// RFC 5041 §8.2: a valid STag of another protection domain is not associated with the
/// stream.
#[test]
fn attack_stag_of_another_protection_domain() {
    let mut w = last_message_world();
    attack(
        &mut w,
        |w, _, _| {
            let other = w.server.memory.alloc_pd();
            let (_, reg) = region(&mut w.server, other, 4096, Access::REMOTE_WRITE, None);
            tagged(1, S, reg.stag, reg.to_base, vec![0xaa; 100])
        },
        DdpError::StagNotAssociated,
    );
}

/// RFC 5041 §8.2: an STag bound to another DDP stream of the same PD is refused on this one.
#[test]
fn attack_stag_bound_to_another_stream() {
    let mut w = last_message_world();
    attack(
        &mut w,
        |w, spd, _| {
            let (_, reg) = region(&mut w.server, spd, 4096, Access::REMOTE_WRITE, Some(2));
            tagged(1, S, reg.stag, reg.to_base, vec![0xaa; 100])
        },
        DdpError::StagNotAssociated,
    );
}

/// RFC 5041 §7.1 tagged check 2: a region registered for remote read only has no buffer that
/// allows placement.
#[test]
fn attack_write_into_read_only_region() {
    let mut w = last_message_world();
    attack(
        &mut w,
        |w, spd, _| {
            let (_, reg) = region(&mut w.server, spd, 4096, Access::REMOTE_READ, Some(S));
            tagged(1, S, reg.stag, reg.to_base, vec![0xaa; 100])
        },
        DdpError::InvalidStag,
    );
}

/// RFC 5041 §7.1 tagged check 4: one byte past the last registered byte is Base or Bounds.
#[test]
fn attack_one_byte_past_the_end() {
    let mut w = last_message_world();
    attack(
        &mut w,
        |_, _, reg| tagged(1, S, reg.stag, reg.to_base + 4096 - 99, vec![0xaa; 100]),
        DdpError::BaseOrBounds,
    );
}

/// RFC 5041 §7.1 untagged check 1: a QN the stream does not have is Invalid QN (0x2/0x01).
/// A ddpdk sender refuses a QN beyond its own queues at post
/// (`rfc5041_5_1_2_a_send_to_a_queue_the_stream_lacks_is_refused_at_post`), so the client here
/// has 8 queues and the server the default 4.
#[test]
fn attack_untagged_invalid_qn() {
    let mut w = last_message_world();
    let wide = World::perfect_with(
        1500,
        ConnConfig {
            queues: 8,
            on_receive_error: OnReceiveError::AfterLastMessage,
            ..ConnConfig::default()
        },
    );
    // Both worlds draw the same addresses, ports and keys: only the client's queues differ.
    w.client = wide.client;
    attack(
        &mut w,
        |_, _, _| untagged(1, S, 7, vec![0xaa; 100]),
        DdpError::InvalidQn,
    );
}

/// RFC 5041 §5.1.2: a plain DDP stream's untagged send names one of the stream's queues
/// (QN 0 .. `ConnConfig::queues`-1); one beyond them is refused at post with `InvalidQn`,
/// nothing sent, as a receive posted there is. It used to be sent (the peer then ends the
/// stream with Invalid QN) and to add an MSN count searched on every later post.
#[test]
fn rfc5041_5_1_2_a_send_to_a_queue_the_stream_lacks_is_refused_at_post() {
    let mut w = World::perfect(1500);
    w.establish();
    open(&mut w, S);
    let queues = ConnConfig::default().queues;
    let sent = w.client.conn().stats().messages_sent;
    for qn in [queues, queues + 1, u32::MAX] {
        assert_eq!(
            w.client
                .conn()
                .post_send(untagged(1, S, qn, vec![0xaa; 100])),
            Err(PostError::InvalidQn),
            "QN {qn}"
        );
    }
    w.run_for(Duration::from_millis(50));
    assert_eq!(w.client.conn().stats().messages_sent, sent, "nothing sent");
    assert!(errors(&w.server).is_empty());
    assert_eq!(w.client.conn().session_state(S), Some(State::Established));
    // The last queue is the stream's: taken.
    w.client
        .conn()
        .post_send(untagged(2, S, queues - 1, vec![0xbb; 10]))
        .unwrap();
}

/// RFC 5041 §7.1 untagged check 2: no buffer posted for the MSN is No Buffer (0x2/0x02).
#[test]
fn attack_untagged_without_a_posted_buffer() {
    let mut w = last_message_world();
    attack(
        &mut w,
        |_, _, _| untagged(1, S, 1, vec![0xaa; 2000]),
        DdpError::NoBuffer,
    );
}

/// RFC 5041 §8.2: a new session on the same stream id is another DDP stream; an STag bound to
/// the old session is not associated with the new one.
#[test]
fn stag_bound_to_an_earlier_session_is_refused_on_the_next() {
    let mut w = World::perfect(1500);
    w.establish();
    let (_, spd) = open(&mut w, S);
    let (_, old) = region(&mut w.server, spd, 4096, Access::REMOTE_WRITE, Some(S));
    w.client.conn().terminate(S).unwrap();
    wait(&mut w, "the Terminate", |w| {
        session_events(&w.server, S).contains(&Event::TerminateReceived)
    });
    w.server.conn().terminate(S).ok();
    w.run_for(Duration::from_secs(2));
    // The server may bind memory to the next session only once it exists: the new session
    // has a new stream identity.
    let old_sid = w.server.conn().stream_id(S);
    let cpd = w.client.memory.alloc_pd();
    w.client.conn().initiate(S, cpd, b"").unwrap();
    wait(&mut w, "the second Initiate", |w| {
        session_events(&w.server, S)
            .iter()
            .filter(|e| matches!(e, Event::InitiateReceived { .. }))
            .count()
            == 2
    });
    assert_ne!(w.server.conn().stream_id(S), old_sid);
    w.server.conn().accept(S, spd, b"").unwrap();
    wait(&mut w, "the second Accept", |w| {
        session_events(&w.client, S)
            .iter()
            .filter(|e| matches!(e, Event::Accepted { .. }))
            .count()
            == 2
    });
    w.client
        .conn()
        .post_send(tagged(1, S, old.stag, old.to_base, vec![1; 10]))
        .unwrap();
    wait(&mut w, "the error", |w| !errors(&w.server).is_empty());
    assert_eq!(
        errors(&w.server)[0].1,
        RxError::Ddp(DdpError::StagNotAssociated)
    );
}

/// RFC 5043 §11.3: the end of the association ends every session, flushes posted receives and
/// queued sends, and is indicated once.
#[test]
fn association_end_is_reported_on_every_stream_11_3() {
    let mut w = World::perfect(1500);
    w.establish();
    let (_, spd) = open(&mut w, 1);
    open(&mut w, 2);
    let (_, ureg) = region(&mut w.server, spd, 4096, Access::LOCAL_WRITE, None);
    let buf = w
        .server
        .memory
        .receive_buffer(spd, ureg.stag, 0, 64)
        .unwrap();
    w.server.conn().post_recv(1, 0, 50, buf).unwrap();
    w.client.conn().abort();
    wait(&mut w, "the ABORT", |w| w.server.conn().is_closed());
    for s in [1, 2] {
        assert!(
            session_events(&w.server, s).contains(&Event::SessionTerminated {
                reason: TerminationReason::AssociationEnded
            })
        );
    }
    assert!(w.server.indications.contains(&Indication::RecvFlushed {
        stream: 1,
        qn: 0,
        wr_id: 50
    }));
    let closed: Vec<_> = w
        .server
        .indications
        .iter()
        .filter(|i| matches!(i, Indication::Closed(_)))
        .collect();
    assert_eq!(
        closed,
        vec![&Indication::Closed(CloseReason::PeerAbort {
            cause: Some(12)
        })]
    );
    assert_eq!(
        w.server.conn().post_send(untagged(1, 1, 0, vec![1])),
        Err(PostError::NotConnected)
    );
}
