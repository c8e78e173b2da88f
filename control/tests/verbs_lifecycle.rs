//! The verbs API's lifecycle rules (`ddpdk_control::verbs`): a queue pair's work always
//! completes, whichever way its stream ends (before it began, too); what verbs allocates for
//! a refused call it gives back; the runtime events verbs causes itself stay inside it.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
mod verbs_pair;
use verbs_pair::*;

use ddpdk_control::conn::{Indication, PostError};
use ddpdk_control::memory::MAX_REGIONS;
use ddpdk_control::rdmap::{RdmaLimits, MAX_ULP_PRIVATE_DATA};
use ddpdk_control::runtime::{ConnHandle, Event, Op};
use ddpdk_control::session::{Event as SessionEvent, LocalError};
use ddpdk_control::verbs::{
    Cq, MemoryRegion, ProtectionDomain, Qp, QpInit, QpState, RecvWr, SendWr, Verbs, WcStatus,
    WrOpcode,
};
use ddpdk_dataplane::mem::Access;
use ddpdk_dataplane::port::mem::MemPort;

/// A CQ's completions as (wr_id, status).
fn statuses(v: &mut Verbs<MemPort>, cq: Cq) -> Vec<(u64, WcStatus)> {
    wcs(v, cq).iter().map(|w| (w.wr_id, w.status)).collect()
}

/// An unsignaled Send of nothing.
fn send(wr_id: u64) -> SendWr {
    SendWr {
        wr_id,
        opcode: WrOpcode::Send,
        sg_list: Vec::new(),
        signaled: false,
        solicited: false,
    }
}

/// A queue pair on `stream` of `conn`, one CQ for both queues.
fn qp_on(v: &mut Verbs<MemPort>, pd: ProtectionDomain, conn: ConnHandle, stream: u16) -> (Qp, Cq) {
    let cq = v.create_cq();
    let qp = v
        .create_qp(QpInit {
            pd,
            send_cq: cq,
            recv_cq: cq,
            conn,
            stream,
            limits: RdmaLimits::default(),
        })
        .unwrap();
    (qp, cq)
}

/// Receives `first`, `first + 1`, … (`n` of them, 1 KiB each from `mr`) posted to `qp`.
fn post_recvs(v: &mut Verbs<MemPort>, qp: Qp, mr: &MemoryRegion, first: u64, n: u64) {
    for i in 0..n {
        let r = RecvWr {
            wr_id: first + i,
            sg_list: vec![sge(mr, i * 1024, 1024)],
        };
        v.post_recv(qp, &r).unwrap();
    }
}

/// The client's RDMAP Initiate on stream 1 seen by the server, which made its queue pair
/// there and posted receives 500 and 501 in Init (not accepted yet).
struct Waiting {
    p: Pair,
    conn: ConnHandle,
    server_conn: ConnHandle,
    qb: Qp,
    cqb: Cq,
}

fn server_waiting_in_init() -> Waiting {
    let mut p = Pair::new();
    let pda = p.a.v.alloc_pd();
    let pdb = p.b.v.alloc_pd();
    let recv_mr =
        p.b.v
            .reg_mr(pdb, 1 << 16, Access::LOCAL_WRITE, 0x9000_0000)
            .unwrap();
    let conn = p.associate();
    let (qa, _) = qp_on(&mut p.a.v, pda, conn, 1);
    p.a.v.connect_qp(qa, b"verbs").unwrap();
    let server_conn = p.initiate_seen(1);
    let (qb, cqb) = qp_on(&mut p.b.v, pdb, server_conn, 1);
    post_recvs(&mut p.b.v, qb, &recv_mr, 500, 2);
    assert_eq!(p.b.v.qp_state(qb), Some(QpState::Init));
    Waiting {
        p,
        conn,
        server_conn,
        qb,
        cqb,
    }
}

/// Runs until the server's queue pair is in Error, then a while longer; its receive CQ.
fn server_receives_after_error(w: &mut Waiting) -> Vec<(u64, WcStatus)> {
    let qb = w.qb;
    w.p.run_until("the server's queue pair in Error", |p| {
        p.b.v.qp_state(qb) == Some(QpState::Error)
    });
    w.p.steps(200);
    statuses(&mut w.p.b.v, w.cqb)
}

// ---- receives posted in Init (held by verbs until the Initiate or Accept) ----

/// The association ends (the client's ABORT) before the server accepted: the receives it
/// posted in Init complete Flushed, in posting order (the module's rule: when the stream ends
/// the outstanding work completes Flushed).
#[test]
fn receives_posted_in_init_complete_flushed_when_the_association_ends() {
    let mut w = server_waiting_in_init();
    w.p.a.v.control_mut().submit(w.conn, Op::Abort).unwrap();
    assert_eq!(
        server_receives_after_error(&mut w),
        [(500, WcStatus::Flushed), (501, WcStatus::Flushed)]
    );
}

/// The client withdraws its Initiate with a Terminate (RFC 5043 §6.4) before the server
/// accepted: the server's session ends, and its receives posted in Init complete Flushed.
#[test]
fn receives_posted_in_init_complete_flushed_when_the_peer_withdraws_its_initiate() {
    let mut w = server_waiting_in_init();
    let conn = w.conn;
    w.p.a
        .v
        .control_mut()
        .submit(conn, Op::Terminate { stream: 1 })
        .unwrap();
    assert_eq!(
        server_receives_after_error(&mut w),
        [(500, WcStatus::Flushed), (501, WcStatus::Flushed)]
    );
}

/// The server's application refuses the pending Initiate itself (a Terminate through the
/// control side, the one way to move a queue pair in Init to Error): its receives posted in
/// Init complete Flushed.
#[test]
fn receives_posted_in_init_complete_flushed_when_the_application_ends_the_session() {
    let mut w = server_waiting_in_init();
    let conn = w.server_conn;
    w.p.b
        .v
        .control_mut()
        .submit(conn, Op::Terminate { stream: 1 })
        .unwrap();
    assert_eq!(
        server_receives_after_error(&mut w),
        [(500, WcStatus::Flushed), (501, WcStatus::Flushed)]
    );
}

/// The association ends under two queue pairs sharing a CQ. The first is in Rts: an
/// unsignaled Send and, behind it, a Send that fails its checks here are posted after the core
/// ended the association but before verbs heard, so the core reports nothing of them before
/// its Closed (it refuses them after it). The second is in Init, holding receives. At Closed
/// both queue pairs are over, in the order they were created: the unsignaled Send, outstanding
/// when its stream ended, completes Flushed, then the failure with its own status (each once:
/// the core's later refusals are ignored), and the held receives complete Flushed.
#[test]
fn the_association_ending_flushes_every_outstanding_send_once_in_order_and_held_receives() {
    use ddpdk_control::verbs::{SendWr, WrOpcode};
    // An unsignaled Send of `sg_list`.
    let send = |wr_id, sg_list| SendWr {
        wr_id,
        opcode: WrOpcode::Send,
        sg_list,
        signaled: false,
        solicited: false,
    };
    let mut p = Pair::new();
    let pda = p.a.v.alloc_pd();
    let pdb = p.b.v.alloc_pd();
    let mr =
        p.a.v
            .reg_mr(pda, 1 << 16, Access::LOCAL_WRITE, 0x9000_0000)
            .unwrap();
    let conn = p.associate();
    let cq = p.a.v.create_cq();
    let init = |stream| QpInit {
        pd: pda,
        send_cq: cq,
        recv_cq: cq,
        conn,
        stream,
        limits: RdmaLimits::default(),
    };
    let q1 = p.a.v.create_qp(init(1)).unwrap();
    let q2 = p.a.v.create_qp(init(2)).unwrap();
    p.a.v.connect_qp(q1, b"").unwrap();
    let server_conn = p.initiate_seen(1);
    let (qb, _) = qp_on(&mut p.b.v, pdb, server_conn, 1);
    p.b.v.accept_qp(qb, b"").unwrap();
    p.run_until("the Accept", |p| p.a.v.qp_state(q1) == Some(QpState::Rts));
    post_recvs(&mut p.a.v, q2, &mr, 700, 2);
    p.a.v.control_mut().submit(conn, Op::Abort).unwrap();
    // The client's core ends the association; its verbs has not heard yet.
    for k in &mut p.a.cores {
        k.poll(p.now);
    }
    p.a.v.post_send(q1, &send(1, Vec::new())).unwrap();
    // Past the end of its region: it fails here, in its turn.
    let outside = send(2, vec![sge(&mr, (1 << 16) - 10, 100)]);
    p.a.v.post_send(q1, &outside).unwrap();
    assert_eq!(statuses(&mut p.a.v, cq), [], "the failure waits for Send 1");
    p.run_until("the client's queue pairs in Error", |p| {
        p.a.v.qp_state(q1) == Some(QpState::Error) && p.a.v.qp_state(q2) == Some(QpState::Error)
    });
    p.steps(200);
    assert_eq!(
        statuses(&mut p.a.v, cq),
        [
            (1, WcStatus::Flushed),
            (2, WcStatus::LocalProtection),
            (700, WcStatus::Flushed),
            (701, WcStatus::Flushed)
        ]
    );
}

/// docs/verbs.md, Order: "An unsignaled work request that succeeds completes silently". An
/// unsignaled Send the peer received and SCTP acknowledged, the stream's last work, used to
/// complete Flushed when the association ended (verbs could not tell it from work the core
/// never took; a ULP resending flushed work sent it twice). It completes silently; an
/// unsignaled Send posted after the core ended the association still completes Flushed.
#[test]
fn an_unsignaled_send_that_succeeded_is_not_flushed_when_the_association_ends() {
    use ddpdk_control::verbs::{SendWr, WrOpcode};
    let quiet = |wr_id, sg_list| SendWr {
        wr_id,
        opcode: WrOpcode::Send,
        sg_list,
        signaled: false,
        solicited: false,
    };
    let mut p = Pair::new();
    let pda = p.a.v.alloc_pd();
    let pdb = p.b.v.alloc_pd();
    let mr =
        p.a.v
            .reg_mr(pda, 1 << 16, Access::LOCAL_WRITE, 0x9000_0000)
            .unwrap();
    let mrb =
        p.b.v
            .reg_mr(pdb, 1 << 16, Access::LOCAL_WRITE, 0xa000_0000)
            .unwrap();
    let conn = p.associate();
    let cq = p.a.v.create_cq();
    let q1 =
        p.a.v
            .create_qp(QpInit {
                pd: pda,
                send_cq: cq,
                recv_cq: cq,
                conn,
                stream: 1,
                limits: RdmaLimits::default(),
            })
            .unwrap();
    p.a.v.connect_qp(q1, b"").unwrap();
    let server_conn = p.initiate_seen(1);
    let (qb, cqb) = qp_on(&mut p.b.v, pdb, server_conn, 1);
    post_recvs(&mut p.b.v, qb, &mrb, 500, 1);
    p.b.v.accept_qp(qb, b"").unwrap();
    p.run_until("the Accept", |p| p.a.v.qp_state(q1) == Some(QpState::Rts));
    p.a.v
        .post_send(q1, &quiet(1, vec![sge(&mr, 0, 8)]))
        .unwrap();
    p.run_until("the Send received", |p| {
        statuses(&mut p.b.v, cqb).contains(&(500, WcStatus::Success))
    });
    // And acknowledged by SCTP.
    p.steps(200);
    p.a.v.control_mut().submit(conn, Op::Abort).unwrap();
    for k in &mut p.a.cores {
        k.poll(p.now);
    }
    // Posted after the core ended the association: never taken.
    p.a.v
        .post_send(q1, &quiet(2, vec![sge(&mr, 0, 8)]))
        .unwrap();
    p.run_until("the queue pair in Error", |p| {
        p.a.v.qp_state(q1) == Some(QpState::Error)
    });
    p.steps(200);
    assert_eq!(statuses(&mut p.a.v, cq), [(2, WcStatus::Flushed)]);
}

// ---- memory regions ----

/// A registration the STag table refuses (here a Tagged Offset range that wraps, RFC 5041
/// §8.3) leaves no region behind: more refusals than the region table has slots, and a
/// registration still succeeds afterwards.
#[test]
fn a_refused_reg_mr_gives_its_region_back() {
    let mut p = Pair::new();
    let pd = p.a.v.alloc_pd();
    let before = p.a.v.control().memory().regions_in_use();
    for _ in 0..MAX_REGIONS + 8 {
        let r = p.a.v.reg_mr(pd, 4096, Access::LOCAL_WRITE, u64::MAX - 100);
        assert!(r.is_err(), "{r:?}");
    }
    assert_eq!(p.a.v.control().memory().regions_in_use(), before);
    let mr = p.a.v.reg_mr(pd, 4096, Access::LOCAL_WRITE, 0x1000_0000);
    assert!(mr.is_ok(), "{mr:?}");
}

// ---- the events verbs causes itself ----

/// A verbs application that polls only its CQs: neither the runtime's `Posted` for its
/// receives nor anything else per work request reaches `poll_event`, so the events kept for it
/// do not grow with its traffic. A receive posted on a plain DDP stream without a queue pair is
/// the application's own, and its `Posted` still reaches it.
#[test]
fn verbs_keeps_the_posted_events_of_its_own_receives() {
    let mut p = Pair::new();
    let pda = p.a.v.alloc_pd();
    let pdb = p.b.v.alloc_pd();
    let src =
        p.a.v
            .reg_mr(pda, 1 << 16, Access::LOCAL_WRITE, 0x1000_0000)
            .unwrap();
    let recv_mr =
        p.b.v
            .reg_mr(pdb, 1 << 20, Access::LOCAL_WRITE, 0x9000_0000)
            .unwrap();
    let conn = p.associate();
    let (qa, cqa) = qp_on(&mut p.a.v, pda, conn, 1);
    p.a.v.connect_qp(qa, b"").unwrap();
    let server_conn = p.initiate_seen(1);
    let (qb, cqb) = qp_on(&mut p.b.v, pdb, server_conn, 1);
    post_recvs(&mut p.b.v, qb, &recv_mr, 1000, 4);
    p.b.v.accept_qp(qb, b"").unwrap();
    p.run_until("the Accept", |p| p.a.v.qp_state(qa) == Some(QpState::Rts));
    p.steps(50);
    p.a.events.clear();
    p.b.events.clear();
    // 256 receives and as many Sends into them.
    let mut received = 0;
    for round in 0..64u64 {
        post_recvs(&mut p.b.v, qb, &recv_mr, 2000 + round * 4, 4);
        for i in 0..4 {
            let send = SendWr {
                sg_list: vec![sge(&src, 0, 100)],
                ..send(round * 4 + i)
            };
            p.a.v.post_send(qa, &send).unwrap();
        }
        p.steps(20);
        received += wcs(&mut p.b.v, cqb).len();
        assert!(wcs(&mut p.a.v, cqa).is_empty());
    }
    p.steps(50);
    received += wcs(&mut p.b.v, cqb).len();
    assert_eq!(
        received, 256,
        "a Send into each receive (4 are left posted)"
    );
    let posted = |n: &Node| {
        (n.events.iter())
            .filter(|e| matches!(e, Event::Posted { .. }))
            .count()
    };
    assert_eq!(posted(&p.b), 0, "Posted events kept for poll_event");
    assert_eq!(p.b.events, [], "the server's events kept for poll_event");
    assert_eq!(p.a.events, [], "the client's events kept for poll_event");

    // A plain DDP session on stream 2, run through the control side: its Posted is the
    // application's.
    p.a.v
        .control_mut()
        .submit(
            conn,
            Op::Initiate {
                stream: 2,
                pd: pda.0,
                private_data: Vec::new(),
            },
        )
        .unwrap();
    let server_conn = p.initiate_seen(2);
    let c = p.b.v.control_mut();
    c.submit(
        server_conn,
        Op::Accept {
            stream: 2,
            pd: pdb.0,
            private_data: Vec::new(),
        },
    )
    .unwrap();
    let buffer = c
        .memory()
        .receive_buffer(pdb.0, recv_mr.lkey, 0, 1024)
        .unwrap();
    c.submit(
        server_conn,
        Op::PostRecv {
            stream: 2,
            qn: 0,
            wr_id: 77,
            buffer,
        },
    )
    .unwrap();
    p.run_until("the plain receive's Posted", |p| {
        p.b.events.iter().any(|e| {
            matches!(
                e,
                Event::Posted {
                    stream: 2,
                    wr_id: 77,
                    ..
                }
            )
        })
    });
}

// ---- a session the core refuses ----

/// The core's refusal of a queue pair's Initiate or Accept among `events`: its stream and
/// why.
fn session_refusal(events: &[Event], which: &str) -> Option<(Option<u16>, PostError)> {
    events.iter().find_map(|e| match e {
        Event::Refused {
            op,
            stream,
            wr_id: None,
            error,
            ..
        } if *op == which => Some((*stream, *error)),
        _ => None,
    })
}

/// The client's Initiate on stream 1 is a plain DDP one (no RDMAP parameters in its Private
/// Data): the server's `accept_qp` returns Ok, as the core has not seen it yet, but the core
/// refuses it (PeerNotRdmap). The queue pair goes to Error instead of staying Rts, the
/// application sees why, and the receives it posted in Init, refused behind the Accept,
/// complete.
#[test]
fn a_refused_accept_moves_the_queue_pair_to_error() {
    let mut p = Pair::new();
    let pda = p.a.v.alloc_pd();
    let pdb = p.b.v.alloc_pd();
    let recv_mr =
        p.b.v
            .reg_mr(pdb, 1 << 16, Access::LOCAL_WRITE, 0x9000_0000)
            .unwrap();
    let conn = p.associate();
    p.a.v
        .control_mut()
        .submit(
            conn,
            Op::Initiate {
                stream: 1,
                pd: pda.0,
                private_data: b"plain".to_vec(),
            },
        )
        .unwrap();
    let server_conn = p.initiate_seen(1);
    let (qb, cqb) = qp_on(&mut p.b.v, pdb, server_conn, 1);
    post_recvs(&mut p.b.v, qb, &recv_mr, 500, 2);
    p.b.v.accept_qp(qb, b"").unwrap();
    assert_eq!(p.b.v.qp_state(qb), Some(QpState::Rts));
    p.run_until("the server's queue pair in Error", |p| {
        p.b.v.qp_state(qb) == Some(QpState::Error)
    });
    assert_eq!(p.b.v.qp_refused(qb), Some(PostError::PeerNotRdmap));
    assert_eq!(
        session_refusal(&p.b.events, "accept_rdmap"),
        Some((Some(1), PostError::PeerNotRdmap))
    );
    p.steps(200);
    let got: Vec<u64> = wcs(&mut p.b.v, cqb).iter().map(|w| w.wr_id).collect();
    assert_eq!(got, [500, 501], "every receive posted completes");
    // Posted in Error: taken and flushed, unsignaled too (a failure always completes).
    assert_eq!(p.b.v.post_send(qb, &send(1)), Ok(()));
    p.steps(10);
    let got: Vec<(u64, WcStatus)> = wcs(&mut p.b.v, cqb)
        .iter()
        .map(|w| (w.wr_id, w.status))
        .collect();
    assert_eq!(got, [(1, WcStatus::Flushed)]);
    // The peer's Initiate does not wait for a decision the application made: it is rejected
    // (RFC 5043 §6.3; before: pending, in one of the endpoint's §6.4 slots, until the
    // association ended).
    p.run_until("the client's session rejected", |p| {
        p.a.events.iter().any(|e| {
            matches!(
                e,
                Event::Indication {
                    indication: Indication::Session {
                        stream: 1,
                        event: SessionEvent::Rejected { .. },
                    },
                    ..
                }
            )
        })
    });
}

/// The client's `connect_qp` with more Private Data than RDMAP leaves the ULP: the call
/// returns Ok, the core refuses the Initiate, and the queue pair goes to Error instead of
/// waiting in Connecting for an Accept that cannot come; the receives it posted in Init
/// complete.
#[test]
fn a_refused_initiate_moves_the_queue_pair_to_error() {
    let mut p = Pair::new();
    let pda = p.a.v.alloc_pd();
    let recv_mr =
        p.a.v
            .reg_mr(pda, 1 << 16, Access::LOCAL_WRITE, 0x9000_0000)
            .unwrap();
    let conn = p.associate();
    let (qa, cqa) = qp_on(&mut p.a.v, pda, conn, 1);
    post_recvs(&mut p.a.v, qa, &recv_mr, 700, 2);
    p.a.v
        .connect_qp(qa, &vec![0u8; MAX_ULP_PRIVATE_DATA + 1])
        .unwrap();
    assert_eq!(p.a.v.qp_state(qa), Some(QpState::Connecting));
    p.run_until("the client's queue pair in Error", |p| {
        p.a.v.qp_state(qa) == Some(QpState::Error)
    });
    let why = Some(PostError::Session(LocalError::PrivateDataTooLong));
    assert_eq!(p.a.v.qp_refused(qa), why);
    assert_eq!(
        session_refusal(&p.a.events, "initiate_rdmap").map(|(s, e)| (s, Some(e))),
        Some((Some(1), why))
    );
    p.steps(200);
    let got: Vec<u64> = wcs(&mut p.a.v, cqa).iter().map(|w| w.wr_id).collect();
    assert_eq!(got, [700, 701], "every receive posted completes");
}

/// What reached the core behind a refused Accept (the receives posted in Init, a Send posted
/// while the queue pair was Rts) the core refuses in turn, once the queue pair is in Error:
/// each completes Flushed, as the work of a queue pair in Error does (RDMAC verbs), not with
/// the core's reason for refusing it (LocalQpOperation).
#[test]
fn work_behind_a_refused_accept_completes_flushed() {
    let mut p = Pair::new();
    let pda = p.a.v.alloc_pd();
    let pdb = p.b.v.alloc_pd();
    let recv_mr =
        p.b.v
            .reg_mr(pdb, 1 << 16, Access::LOCAL_WRITE, 0x9000_0000)
            .unwrap();
    let conn = p.associate();
    p.a.v
        .control_mut()
        .submit(
            conn,
            Op::Initiate {
                stream: 1,
                pd: pda.0,
                private_data: b"plain".to_vec(),
            },
        )
        .unwrap();
    let server_conn = p.initiate_seen(1);
    let (qb, cqb) = qp_on(&mut p.b.v, pdb, server_conn, 1);
    post_recvs(&mut p.b.v, qb, &recv_mr, 500, 2);
    p.b.v.accept_qp(qb, b"").unwrap();
    let signaled = SendWr {
        signaled: true,
        ..send(9)
    };
    p.b.v.post_send(qb, &signaled).unwrap();
    p.run_until("the server's queue pair in Error", |p| {
        p.b.v.qp_state(qb) == Some(QpState::Error)
    });
    p.steps(200);
    assert_eq!(
        statuses(&mut p.b.v, cqb),
        [
            (500, WcStatus::Flushed),
            (501, WcStatus::Flushed),
            (9, WcStatus::Flushed)
        ]
    );
}
