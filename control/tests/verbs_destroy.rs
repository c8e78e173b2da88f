//! `destroy_qp` and the ends of a queue pair's receives (`docs/verbs.md`, "Calls" and
//! "Completions"): what a destroyed queue pair posted is never filled afterwards, and every
//! receive of a live queue pair completes exactly once.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
mod verbs_pair;
use rt::PORT;
use verbs_pair::*;

use std::net::IpAddr;

use ddpdk_control::conn::Indication;
use ddpdk_control::memory::RegionId;
use ddpdk_control::rdmap::RdmaLimits;
use ddpdk_control::runtime::{ConnHandle, Event};
use ddpdk_control::session::Event as SessionEvent;
use ddpdk_control::verbs::{
    Cq, MemoryRegion, ProtectionDomain, Qp, QpInit, QpState, RecvWr, Verbs, WcStatus, WrOpcode,
};
use ddpdk_dataplane::mem::Access;
use ddpdk_dataplane::port::mem::MemPort;
use ddpdk_dataplane::port::region::Region;

/// The client's queue pair on stream 1 connected to the server's, which posted `recvs`
/// receives of 1 KiB from `recv_mr` (zeroed) before accepting.
struct Connected {
    p: Pair,
    conn: ConnHandle,
    qa: Qp,
    qb: Qp,
    cqa: Cq,
    cqb: Cq,
    pda: ProtectionDomain,
    recv_mr: MemoryRegion,
}

/// The bytes of endpoint memory `r` of `v`.
fn region(v: &Verbs<MemPort>, r: RegionId) -> &Region {
    v.control().memory().region(r).unwrap()
}

fn connected(recvs: u64) -> Connected {
    let mut p = Pair::new();
    let pda = p.a.v.alloc_pd();
    let pdb = p.b.v.alloc_pd();
    let recv_mr =
        p.b.v
            .reg_mr(pdb, 1 << 16, Access::LOCAL_WRITE, 0x9000_0000)
            .unwrap();
    let conn = p.associate();
    let cqa = p.a.v.create_cq();
    let qa = qp(&mut p.a.v, pda, cqa, conn);
    p.a.v.connect_qp(qa, b"verbs").unwrap();
    let server_conn = p.initiate_seen(1);
    let cqb = p.b.v.create_cq();
    let qb = qp(&mut p.b.v, pdb, cqb, server_conn);
    for i in 0..recvs {
        let r = RecvWr {
            wr_id: 500 + i,
            sg_list: vec![sge(&recv_mr, i * 1024, 1024)],
        };
        p.b.v.post_recv(qb, &r).unwrap();
    }
    p.b.v.accept_qp(qb, b"").unwrap();
    p.run_until("the Accept", |p| p.a.v.qp_state(qa) == Some(QpState::Rts));
    Connected {
        p,
        conn,
        qa,
        qb,
        cqa,
        cqb,
        pda,
        recv_mr,
    }
}

/// A queue pair on stream 1 of `conn`, both queues on `cq`.
fn qp(v: &mut Verbs<MemPort>, pd: ProtectionDomain, cq: Cq, conn: ConnHandle) -> Qp {
    v.create_qp(QpInit {
        pd,
        send_cq: cq,
        recv_cq: cq,
        conn,
        stream: 1,
        limits: RdmaLimits::default(),
    })
    .unwrap()
}

/// `ibv_destroy_qp` (`docs/verbs.md`, "Calls"): once it returns, nothing is placed into the
/// receives the queue pair had with its data core (RFC 5041 §7.1, RFC 4296 §3: no placement
/// where the application no longer allows it: it may reuse or free that memory now). A Send
/// the peer posts afterwards lands nowhere; the peer's queue pair ends (the stream is
/// over: its Send is not delivered) rather than believing it was received.
#[test]
fn a_send_after_destroy_qp_is_not_placed_into_its_receives() {
    let mut c = connected(2);
    let now = c.p.now;
    let cores = &mut c.p.b.cores;
    c.p.b
        .v
        .destroy_qp_polling(c.qb, now, &mut || {
            for k in cores.iter_mut() {
                k.poll(now);
            }
        })
        .unwrap();
    assert_eq!(c.p.b.v.qp_state(c.qb), None, "forgotten");
    let src =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::LOCAL_WRITE, 0x7000_0000)
            .unwrap();
    c.p.a
        .v
        .control()
        .memory()
        .region(src.region)
        .unwrap()
        .place(0, &[0xAB; 100])
        .unwrap();
    let post =
        c.p.a
            .v
            .post_send(c.qa, &wr(1, WrOpcode::Send, vec![sge(&src, 0, 100)]));
    c.p.steps(2000);
    let mut placed = vec![0u8; 2048];
    c.p.b
        .v
        .control()
        .memory()
        .region(c.recv_mr.region)
        .unwrap()
        .read(0, &mut placed)
        .unwrap();
    assert!(
        placed.iter().all(|&b| b == 0),
        "{} bytes of the peer's Send placed into a destroyed queue pair's receive",
        placed.iter().filter(|&&b| b != 0).count()
    );
    // The peer's stream ended (RFC 5043 §6: our session's Terminate): its Send, delivered
    // nowhere, does not complete Success, and its queue pair is in Error.
    assert_eq!(c.p.a.v.qp_state(c.qa), Some(QpState::Error));
    if post.is_ok() {
        let send: Vec<_> = wcs(&mut c.p.a.v, c.cqa)
            .iter()
            .map(|w| (w.wr_id, w.status))
            .collect();
        assert_eq!(send, [(1, WcStatus::Flushed)]);
    }
    // ibv_destroy_qp: its outstanding receives complete on no CQ.
    assert_eq!(wcs(&mut c.p.b.v, c.cqb), []);
}

/// `ibv_destroy_qp` returns once the data core has withdrawn the receives, not merely once
/// it was told to: a Send of the peer already on its way when the application destroys the
/// queue pair is placed before `destroy_qp` returns or not at all, so the application may
/// reuse the memory at once (here it overwrites it) and nothing lands there afterwards (RFC
/// 5041 §7.1).
#[test]
fn a_send_in_flight_at_destroy_qp_lands_before_it_returns_or_never() {
    let mut c = connected(2);
    let src =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::LOCAL_WRITE, 0x7000_0000)
            .unwrap();
    region(&c.p.a.v, src.region).place(0, &[0xAB; 100]).unwrap();
    c.p.a
        .v
        .post_send(c.qa, &wr(1, WrOpcode::Send, vec![sge(&src, 0, 100)]))
        .unwrap();
    // The client's core sends it: it waits in the server's receive queue.
    let now = c.p.now;
    for k in &mut c.p.a.cores {
        k.poll(now);
    }
    let cores = &mut c.p.b.cores;
    c.p.b
        .v
        .destroy_qp_polling(c.qb, now, &mut || {
            for k in cores.iter_mut() {
                k.poll(now);
            }
        })
        .unwrap();
    // The application reuses the memory.
    region(&c.p.b.v, c.recv_mr.region)
        .place(0, &[0u8; 2048])
        .unwrap();
    c.p.steps(2000);
    let mut placed = vec![0u8; 2048];
    region(&c.p.b.v, c.recv_mr.region)
        .read(0, &mut placed)
        .unwrap();
    assert!(
        placed.iter().all(|&b| b == 0),
        "{} bytes placed into a destroyed queue pair's receive after destroy_qp returned",
        placed.iter().filter(|&&b| b != 0).count()
    );
    assert_eq!(
        wcs(&mut c.p.b.v, c.cqb),
        [],
        "ibv_destroy_qp: no completion"
    );
}

/// `destroy_qp` of a queue pair whose Initiate is out and unanswered (`Connecting`), its
/// receives posted in Init released to the core behind it: the session's Terminate withdraws
/// the Initiate (RFC 5043 §6.4), the core flushes the receives, and `destroy_qp` returns
/// (it waits on this side alone), completing nothing; the stream is free for a new queue pair.
#[test]
fn destroy_qp_of_a_connecting_queue_pair_returns_once_its_receives_are_withdrawn() {
    let mut p = Pair::new();
    let pda = p.a.v.alloc_pd();
    let mr =
        p.a.v
            .reg_mr(pda, 1 << 16, Access::LOCAL_WRITE, 0x9000_0000)
            .unwrap();
    let conn = p.associate();
    let cq = p.a.v.create_cq();
    let qa = qp(&mut p.a.v, pda, cq, conn);
    for i in 0..2 {
        let r = RecvWr {
            wr_id: 700 + i,
            sg_list: vec![sge(&mr, i * 1024, 1024)],
        };
        p.a.v.post_recv(qa, &r).unwrap();
    }
    p.a.v.connect_qp(qa, b"").unwrap();
    p.step();
    assert_eq!(p.a.v.qp_state(qa), Some(QpState::Connecting));
    let now = p.now;
    let cores = &mut p.a.cores;
    p.a.v
        .destroy_qp_polling(qa, now, &mut || {
            for k in cores.iter_mut() {
                k.poll(now);
            }
        })
        .unwrap();
    p.steps(200);
    assert_eq!(wcs(&mut p.a.v, cq), [], "ibv_destroy_qp: no completion");
    assert!(qp(&mut p.a.v, pda, cq, conn).0 > qa.0, "the stream is free");
}

/// `docs/verbs.md`, "Completions": every posted receive completes exactly once, `Flushed`
/// when its stream or association ends first. Here the receive is posted after the client's
/// core ended the association (our ABORT) but before its verbs heard, and the core reuses the
/// closed connection's slot for a new association (it holds `MAX_CONNECTIONS_PER_CORE`)
/// before it takes the receive: the core no longer knows the connection and answers
/// `Event::Unknown`, which names no work request. The receive still completes, `Flushed`,
/// once: the association's `Closed` ends every report of its receives.
#[test]
fn a_receive_posted_as_the_association_ends_completes_once_when_its_slot_is_reused() {
    use ddpdk_control::runtime::{Op, MAX_CONNECTIONS_PER_CORE};
    use std::net::Ipv4Addr;
    let mut c = connected(0);
    let now = c.p.now;
    // Peers that never answer: their INITs keep the core's other slots taken (they retransmit
    // for far longer than this test runs).
    let mut bogus = (0..).map(|i: u32| {
        let [_, _, x, y] = (i + 1).to_be_bytes();
        IpAddr::V4(Ipv4Addr::new(198, 19, x, y))
    });
    for _ in 1..MAX_CONNECTIONS_PER_CORE {
        let peer = bogus.next().unwrap();
        c.p.a.v.control_mut().connect(now, peer, PORT).unwrap();
    }
    c.p.steps(5);
    let conn = c.conn;
    let mr =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::LOCAL_WRITE, 0x6000_0000)
            .unwrap();
    c.p.a.v.control_mut().submit(conn, Op::Abort).unwrap();
    // The client's core ends the association; its verbs has not heard yet.
    for k in &mut c.p.a.cores {
        k.poll(now);
    }
    // A new association takes the closed one's slot, ahead of the receive.
    let peer = bogus.next().unwrap();
    c.p.a.v.control_mut().connect(now, peer, PORT).unwrap();
    let r = RecvWr {
        wr_id: 900,
        sg_list: vec![sge(&mr, 0, 1024)],
    };
    c.p.a.v.post_recv(c.qa, &r).unwrap();
    c.p.steps(200);
    assert!(
        c.p.a
            .events
            .iter()
            .any(|e| matches!(e, Event::Unknown { conn: k, op: "post_recv", .. } if *k == conn)),
        "the core no longer knew the connection when the receive came"
    );
    assert_eq!(c.p.a.v.qp_state(c.qa), Some(QpState::Error));
    let got: Vec<_> = wcs(&mut c.p.a.v, c.cqa)
        .iter()
        .map(|w| (w.wr_id, w.status))
        .collect();
    assert_eq!(got, [(900, WcStatus::Flushed)]);
}

/// `destroy_qp`'s wait is bounded (`docs/verbs.md`, "Calls"): with the data core not turning
/// (a core thread gone), it answers `Timeout` after `DESTROY_WAIT` instead of spinning for
/// ever, the queue pair stays destroyed (it completes nothing), and a later call, the core
/// turning again, waits again and forgets it.
#[test]
fn destroy_qp_answers_timeout_when_the_core_never_withdraws_its_receives() {
    let mut c = connected(2);
    let now = c.p.now;
    let started = std::time::Instant::now();
    assert_eq!(
        c.p.b.v.destroy_qp_polling(c.qb, now, &mut || {}),
        Err(ddpdk_control::verbs::VerbsError::Timeout)
    );
    assert!(started.elapsed() >= ddpdk_control::verbs::DESTROY_WAIT);
    assert_eq!(
        c.p.b.v.qp_state(c.qb),
        Some(QpState::Error),
        "not forgotten yet, and it takes no more work"
    );
    let r = RecvWr {
        wr_id: 9,
        sg_list: vec![sge(&c.recv_mr, 0, 64)],
    };
    assert!(c.p.b.v.post_recv(c.qb, &r).is_err());
    let cores = &mut c.p.b.cores;
    c.p.b
        .v
        .destroy_qp_polling(c.qb, now, &mut || {
            for k in cores.iter_mut() {
                k.poll(now);
            }
        })
        .unwrap();
    assert_eq!(c.p.b.v.qp_state(c.qb), None, "forgotten");
    assert_eq!(
        wcs(&mut c.p.b.v, c.cqb),
        [],
        "ibv_destroy_qp: no completion"
    );
}

/// (An independent review, session 55.) RFC 5043 §6.2 ("The final User Data Chunk for each side MAY be a DDP Stream
/// Terminate. At least one side MUST send a DDP Stream Terminate") lets a peer end its RDMAP
/// stream with an RDMAP Terminate (RFC 5040 §5.4) and leave the DDP Stream Terminate to us.
/// The queue pair goes to Error on the peer's RDMAP Terminate, but its DDP session stays open
/// on the core with the receives posted. `destroy_qp` sends our Terminate only in Connecting
/// or Rts, so nothing ever withdraws the receives: `destroy_qp` answers Timeout on every call,
/// however long the application waits and retries (and the stream keeps its queue pair).
#[test]
fn destroy_qp_after_the_peers_rdmap_terminate_ends_our_session_5043_6_2() {
    use ddpdk_control::conn::{Op, Payload, SendKind, SendRequest};
    use ddpdk_control::rdmap::encode_private_data;
    use ddpdk_dataplane::ddp::{HeaderCopy, RxError};
    use ddpdk_dataplane::wire::rdmap::{Opcode, RdmapError};
    let mut p = Pair::new();
    let pdb = p.b.v.alloc_pd();
    let recv_mr =
        p.b.v
            .reg_mr(pdb, 1 << 16, Access::LOCAL_WRITE, 0x9000_0000)
            .unwrap();
    let conn = p.associate();
    // The peer (A): an RDMAP peer driven below verbs, on a plain DDP session whose Initiate
    // carries RDMAP's parameters (RFC 5040 §6).
    let apd = p.a.v.control_mut().memory_mut().alloc_pd();
    let pdata = encode_private_data(RdmaLimits::default(), b"").unwrap();
    p.a.v
        .control_mut()
        .submit(
            conn,
            Op::Initiate {
                stream: 1,
                pd: apd,
                private_data: pdata,
            },
        )
        .unwrap();
    let server_conn = p.initiate_seen(1);
    let cqb = p.b.v.create_cq();
    let qb = qp(&mut p.b.v, pdb, cqb, server_conn);
    for i in 0..2u64 {
        let r = RecvWr {
            wr_id: 500 + i,
            sg_list: vec![sge(&recv_mr, i * 1024, 1024)],
        };
        p.b.v.post_recv(qb, &r).unwrap();
    }
    p.b.v.accept_qp(qb, b"").unwrap();
    p.run_until("the Accept at the peer", |p| {
        p.a.events.iter().any(|e| {
            matches!(
                e,
                Event::Indication {
                    indication: Indication::Session {
                        stream: 1,
                        event: SessionEvent::Accepted { .. },
                    },
                    ..
                }
            )
        })
    });
    // The peer's RDMAP Terminate (QN 2, MSN 1), and no DDP Stream Terminate after it.
    let payload = ddpdk_control::rdmap::terminate_payload(
        RxError::Rdmap(RdmapError::OperationUnspecified),
        &HeaderCopy::from_bytes(&[]),
        0,
        None,
    );
    p.a.v
        .control_mut()
        .submit(
            conn,
            Op::PostSend(SendRequest {
                wr_id: 1,
                stream: 1,
                kind: SendKind::Untagged {
                    qn: 2,
                    rsvd_ulp: [(1 << 6) | Opcode::Terminate.bits(), 0, 0, 0, 0],
                },
                data: Payload::Bytes(payload),
                signaled: false,
            }),
        )
        .unwrap();
    p.run_until("the queue pair in Error", |p| {
        p.b.v.qp_state(qb) == Some(QpState::Error)
    });
    p.steps(5000);
    // RFC 5040 §5.4, §7: the stream is over with the peer's Terminate, session or not; the
    // queue pair drains as `ib_drain_qp` does: a receive posted in Error completes Flushed
    // behind those posted before it, with no destroy_qp first. Those waited for a session
    // end the peer need never send (an independent review).
    p.b.v
        .post_recv(
            qb,
            &RecvWr {
                wr_id: 999,
                sg_list: vec![sge(&recv_mr, 4096, 64)],
            },
        )
        .unwrap();
    p.steps(50_000);
    let drained: Vec<_> = wcs(&mut p.b.v, cqb)
        .iter()
        .map(|w| (w.wr_id, w.status))
        .collect();
    assert_eq!(
        drained,
        [
            (500, WcStatus::Flushed),
            (501, WcStatus::Flushed),
            (999, WcStatus::Flushed)
        ]
    );
    // The application destroys it, and retries as the Timeout says it may.
    let mut last = None;
    for _ in 0..3 {
        let now = p.now;
        let cores = &mut p.b.cores;
        last = Some(p.b.v.destroy_qp_polling(qb, now, &mut || {
            for k in cores.iter_mut() {
                k.poll(now);
            }
        }));
        if matches!(last, Some(Ok(()))) {
            break;
        }
        p.steps(50_000);
    }
    assert!(
        matches!(last, Some(Ok(()))),
        "destroy_qp after the peer's RDMAP Terminate, retried over 30 simulated seconds: {last:?}"
    );
}
