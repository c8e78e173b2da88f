//! Verbs completions keep posting order and find exactly their work request (RFC 5040 §5.5,
//! `docs/verbs.md` "Order"): a refused post, a local check failure and the work posted before
//! them each complete, in posting order, on the queue pair that posted them, whatever
//! `wr_id`s the application chose.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
mod verbs_pair;
use rt::PORT;
use verbs_pair::*;

use std::net::IpAddr;

use ddpdk_control::conn::Indication;
use ddpdk_control::rdmap::RdmaLimits;
use ddpdk_control::runtime::{ConnHandle, Event};
use ddpdk_control::session::Event as SessionEvent;
use ddpdk_control::verbs::{
    Cq, MemoryRegion, ProtectionDomain, Qp, QpInit, QpState, RecvWr, Wc, WcOpcode, WcStatus,
    WrOpcode,
};
use ddpdk_dataplane::mem::Access;

fn summary(got: &[Wc]) -> Vec<(u64, WcStatus, WcOpcode)> {
    got.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect()
}

/// An association with an RDMAP queue pair on streams 1, 2, … for each of `limits`, the
/// client's with those limits and one CQ each, the server's accepted as its Initiate comes.
struct Setup {
    p: Pair,
    qas: Vec<Qp>,
    cqas: Vec<Cq>,
    pda: ProtectionDomain,
    /// The server's queue pairs, in the order their Initiates came, and their CQs.
    qbs: Vec<(Qp, Cq)>,
    pdb: ProtectionDomain,
}

fn setup(limits: &[RdmaLimits]) -> Setup {
    let mut p = Pair::new();
    let pda = p.a.v.alloc_pd();
    let pdb = p.b.v.alloc_pd();
    let now = p.now;
    let conn =
        p.a.v
            .control_mut()
            .connect(now, IpAddr::V4(B4), PORT)
            .unwrap();
    p.run_until("the association", |p| {
        p.a.events.iter().any(|e| {
            matches!(
                e,
                Event::Indication {
                    indication: Indication::Connected { .. },
                    ..
                }
            )
        })
    });
    let (mut qas, mut cqas) = (Vec::new(), Vec::new());
    for (i, &limits) in limits.iter().enumerate() {
        let cq = p.a.v.create_cq();
        let qa =
            p.a.v
                .create_qp(QpInit {
                    pd: pda,
                    send_cq: cq,
                    recv_cq: cq,
                    conn,
                    stream: 1 + i as u16,
                    limits,
                })
                .unwrap();
        p.a.v.connect_qp(qa, b"").unwrap();
        qas.push(qa);
        cqas.push(cq);
    }
    let mut qbs = Vec::new();
    p.run_until("every Initiate", |p| {
        let found: Vec<(ConnHandle, u16)> =
            p.b.events
                .drain(..)
                .filter_map(|e| match e {
                    Event::Indication {
                        conn,
                        indication:
                            Indication::Session {
                                stream,
                                event: SessionEvent::InitiateReceived { .. },
                            },
                    } => Some((conn, stream)),
                    _ => None,
                })
                .collect();
        for (conn, stream) in found {
            let cq = p.b.v.create_cq();
            let qb =
                p.b.v
                    .create_qp(QpInit {
                        pd: pdb,
                        send_cq: cq,
                        recv_cq: cq,
                        conn,
                        stream,
                        limits: RdmaLimits::default(),
                    })
                    .unwrap();
            p.b.v.accept_qp(qb, b"").unwrap();
            qbs.push((qb, cq));
        }
        qbs.len() == limits.len()
    });
    let ready = qas.clone();
    p.run_until("every Accept", |p| {
        ready
            .iter()
            .all(|&q| p.a.v.qp_state(q) == Some(QpState::Rts))
    });
    Setup {
        p,
        qas,
        cqas,
        pda,
        qbs,
        pdb,
    }
}

/// The server's region the client writes to and reads from.
fn target(s: &mut Setup) -> MemoryRegion {
    s.p.b
        .v
        .reg_mr(
            s.pdb,
            4096,
            Access::REMOTE_WRITE | Access::REMOTE_READ,
            0x3000_0000,
        )
        .unwrap()
}

/// The client's local memory.
fn local(s: &mut Setup) -> MemoryRegion {
    s.p.a
        .v
        .reg_mr(s.pda, 4096, Access::LOCAL_WRITE, 0x1000_0000)
        .unwrap()
}

/// Two queue pairs of one association, both numbering their work requests from 1: the core
/// refuses a Read on the one with ORD 0 (RFC 5040 §6.1), and that refusal completes the Read
/// on its own queue pair, never the other's Write of the same `wr_id`. (Before the refusal
/// carried its stream, verbs looked for the `wr_id` in every queue pair of the association.)
#[test]
fn a_refusal_completes_on_the_queue_pair_of_its_stream() {
    for refused in [0usize, 1] {
        let mut limits = [RdmaLimits::default(); 2];
        limits[refused].ord = 0;
        let mut s = setup(&limits);
        let (target, src) = (target(&mut s), local(&mut s));
        let other = 1 - refused;
        let write = WrOpcode::RdmaWrite {
            rkey: target.rkey,
            remote_addr: target.addr,
        };
        s.p.a
            .v
            .post_send(s.qas[other], &wr(1, write, vec![sge(&src, 0, 100)]))
            .unwrap();
        let read = WrOpcode::RdmaRead {
            rkey: target.rkey,
            remote_addr: target.addr,
        };
        s.p.a
            .v
            .post_send(s.qas[refused], &wr(1, read, vec![sge(&src, 200, 100)]))
            .unwrap();
        let mut got = [Vec::new(), Vec::new()];
        for _ in 0..2000 {
            s.p.step();
            for (i, g) in got.iter_mut().enumerate() {
                g.extend(wcs(&mut s.p.a.v, s.cqas[i]));
            }
        }
        assert_eq!(
            (summary(&got[other]), summary(&got[refused])),
            (
                vec![(1, WcStatus::Success, WcOpcode::RdmaWrite)],
                vec![(1, WcStatus::LocalQpOperation, WcOpcode::RdmaRead)]
            ),
            "the refused queue pair is the client's {refused}"
        );
    }
}

/// A refused post (ORD 0: the core refuses the Read, RFC 5040 §6.1) behind a signaled Write:
/// the refusal comes back before the Write's completion, and waits for it. Both complete, in
/// posting order. (It used to complete at once and drop the Write from the send queue, whose
/// completion was then lost.)
#[test]
fn a_refused_post_completes_after_the_work_posted_before_it() {
    let mut s = setup(&[RdmaLimits { ird: 16, ord: 0 }]);
    let (target, src) = (target(&mut s), local(&mut s));
    let (qa, cqa) = (s.qas[0], s.cqas[0]);
    let write = WrOpcode::RdmaWrite {
        rkey: target.rkey,
        remote_addr: target.addr,
    };
    s.p.a
        .v
        .post_send(qa, &wr(1, write, vec![sge(&src, 0, 100)]))
        .unwrap();
    let read = WrOpcode::RdmaRead {
        rkey: target.rkey,
        remote_addr: target.addr,
    };
    s.p.a
        .v
        .post_send(qa, &wr(2, read, vec![sge(&src, 200, 100)]))
        .unwrap();
    assert_eq!(
        summary(&s.p.collect(cqa, 2000)),
        [
            (1, WcStatus::Success, WcOpcode::RdmaWrite),
            (2, WcStatus::LocalQpOperation, WcOpcode::RdmaRead),
        ],
        "every posted work request completes, in posting order"
    );
}

/// Work requests that fail verbs' own checks (an entry outside its region; an atomic whose
/// entry is not 8 bytes; a Local Invalidate of an STag of another protection domain) behind
/// a signaled Write: each completes in its turn, after the Write, never ahead of it.
#[test]
fn a_local_failure_completes_after_the_work_posted_before_it() {
    let mut s = setup(&[RdmaLimits::default()]);
    let (target, src) = (target(&mut s), local(&mut s));
    let other_pd = s.p.a.v.alloc_pd();
    let foreign =
        s.p.a
            .v
            .reg_mr(other_pd, 4096, Access::LOCAL_WRITE, 0x5000_0000)
            .unwrap();
    let (qa, cqa) = (s.qas[0], s.cqas[0]);
    let write = WrOpcode::RdmaWrite {
        rkey: target.rkey,
        remote_addr: target.addr,
    };
    let v = &mut s.p.a.v;
    v.post_send(qa, &wr(1, write, vec![sge(&src, 0, 100)]))
        .unwrap();
    // 4000 + 200 > 4096: outside its region.
    v.post_send(qa, &wr(2, WrOpcode::Send, vec![sge(&src, 4000, 200)]))
        .unwrap();
    let fadd = WrOpcode::AtomicFetchAdd {
        rkey: target.rkey,
        remote_addr: target.addr,
        add: 1,
        mask: 0,
    };
    v.post_send(qa, &wr(3, fadd, vec![sge(&src, 0, 4)]))
        .unwrap();
    let inv = WrOpcode::LocalInv { lkey: foreign.lkey };
    v.post_send(qa, &wr(4, inv, Vec::new())).unwrap();
    assert!(wcs(v, cqa).is_empty(), "nothing overtakes the Write");
    assert_eq!(
        summary(&s.p.collect(cqa, 2000)),
        [
            (1, WcStatus::Success, WcOpcode::RdmaWrite),
            (2, WcStatus::LocalProtection, WcOpcode::Send),
            (3, WcStatus::LocalQpOperation, WcOpcode::FetchAdd),
            (4, WcStatus::LocalProtection, WcOpcode::LocalInv),
        ],
        "posting order"
    );
}

/// A failure behind unsignaled work: the unsignaled Write completes silently, so the core
/// never reports it, yet the failure behind it must complete, after the signaled Read before
/// both and never before it (a mark in the core's completion order says when the Write is
/// over). A refusal behind unsignaled work likewise.
#[test]
fn a_failure_behind_unsignaled_work_completes_once_that_work_has() {
    let mut s = setup(&[RdmaLimits::default(), RdmaLimits { ird: 16, ord: 0 }]);
    let big =
        s.p.b
            .v
            .reg_mr(s.pdb, 1 << 20, Access::REMOTE_READ, 0x4000_0000)
            .unwrap();
    let (target, src) = (target(&mut s), local(&mut s));
    let sink =
        s.p.a
            .v
            .reg_mr(s.pda, 1 << 20, Access::LOCAL_WRITE, 0x2000_0000)
            .unwrap();
    let (qa, cqa) = (s.qas[0], s.cqas[0]);
    let read = WrOpcode::RdmaRead {
        rkey: big.rkey,
        remote_addr: big.addr,
    };
    let write = WrOpcode::RdmaWrite {
        rkey: target.rkey,
        remote_addr: target.addr,
    };
    let v = &mut s.p.a.v;
    v.post_send(qa, &wr(1, read, vec![sge(&sink, 0, 1 << 20)]))
        .unwrap();
    let mut quiet = wr(2, write, vec![sge(&src, 0, 100)]);
    quiet.signaled = false;
    v.post_send(qa, &quiet).unwrap();
    v.post_send(qa, &wr(3, WrOpcode::Send, vec![sge(&src, 4000, 200)]))
        .unwrap();
    s.p.step();
    assert!(wcs(&mut s.p.a.v, cqa).is_empty(), "the Read is not over");
    assert_eq!(
        summary(&s.p.collect(cqa, 2000)),
        [
            (1, WcStatus::Success, WcOpcode::RdmaRead),
            (3, WcStatus::LocalProtection, WcOpcode::Send),
        ]
    );

    // The queue pair with ORD 0: an unsignaled Write, then a Read the core refuses.
    let (qa, cqa) = (s.qas[1], s.cqas[1]);
    let v = &mut s.p.a.v;
    v.post_send(qa, &quiet).unwrap();
    let read = WrOpcode::RdmaRead {
        rkey: target.rkey,
        remote_addr: target.addr,
    };
    v.post_send(qa, &wr(4, read, vec![sge(&src, 200, 100)]))
        .unwrap();
    assert_eq!(
        summary(&s.p.collect(cqa, 2000)),
        [(4, WcStatus::LocalQpOperation, WcOpcode::RdmaRead)]
    );
}

/// `wr_id` is the application's and may repeat (`ibv_post_send` allows it): an unsignaled
/// Write and a signaled Send with the same `wr_id` 0. The Send's completion says Send and
/// 300 bytes, and the send queue holds nothing afterwards (a failure posted next completes
/// at once). (The completion used to find the first work request with that `wr_id`, the
/// Write, and leave the Send in the queue for ever.)
#[test]
fn a_repeated_wr_id_completes_with_its_own_work_requests_opcode() {
    let mut s = setup(&[RdmaLimits::default()]);
    let (target, src) = (target(&mut s), local(&mut s));
    let (qb, _) = s.qbs[0];
    let recv =
        s.p.b
            .v
            .reg_mr(s.pdb, 4096, Access::LOCAL_WRITE, 0x9000_0000)
            .unwrap();
    s.p.b
        .v
        .post_recv(
            qb,
            &RecvWr {
                wr_id: 500,
                sg_list: vec![sge(&recv, 0, 1024)],
            },
        )
        .unwrap();
    let (qa, cqa) = (s.qas[0], s.cqas[0]);
    let write = WrOpcode::RdmaWrite {
        rkey: target.rkey,
        remote_addr: target.addr,
    };
    let mut quiet = wr(0, write, vec![sge(&src, 0, 100)]);
    quiet.signaled = false;
    s.p.a.v.post_send(qa, &quiet).unwrap();
    s.p.a
        .v
        .post_send(qa, &wr(0, WrOpcode::Send, vec![sge(&src, 0, 300)]))
        .unwrap();
    let got = s.p.collect(cqa, 2000);
    assert_eq!(
        got.iter()
            .map(|w| (w.wr_id, w.opcode, w.byte_len))
            .collect::<Vec<_>>(),
        [(0, WcOpcode::Send, 300)]
    );
    s.p.a
        .v
        .post_send(qa, &wr(7, WrOpcode::Send, vec![sge(&src, 4000, 200)]))
        .unwrap();
    assert_eq!(
        summary(&wcs(&mut s.p.a.v, cqa)),
        [(7, WcStatus::LocalProtection, WcOpcode::Send)],
        "nothing left before it"
    );
}

/// A receive that fails its checks (an entry outside its region) behind a posted receive:
/// its completion waits for that receive's, which a Send fills, and comes after it.
#[test]
fn a_failed_receive_completes_after_the_receives_posted_before_it() {
    let mut s = setup(&[RdmaLimits::default()]);
    let src = local(&mut s);
    let (qb, cqb) = s.qbs[0];
    let recv =
        s.p.b
            .v
            .reg_mr(s.pdb, 4096, Access::LOCAL_WRITE, 0x9000_0000)
            .unwrap();
    let v = &mut s.p.b.v;
    for (wr_id, offset) in [(500, 0), (501, 4000)] {
        let r = RecvWr {
            wr_id,
            sg_list: vec![sge(&recv, offset, 1024)],
        };
        v.post_recv(qb, &r).unwrap();
    }
    assert!(wcs(v, cqb).is_empty(), "nothing overtakes receive 500");
    s.p.a
        .v
        .post_send(s.qas[0], &wr(1, WrOpcode::Send, vec![sge(&src, 0, 300)]))
        .unwrap();
    let mut got = Vec::new();
    s.p.run_until("both receives", |p| {
        got.extend(wcs(&mut p.b.v, cqb));
        got.len() >= 2
    });
    assert_eq!(
        got.iter()
            .map(|w| (w.wr_id, w.status, w.byte_len))
            .collect::<Vec<_>>(),
        [
            (500, WcStatus::Success, 300),
            (501, WcStatus::LocalProtection, 0)
        ]
    );
}
