//! A library user's first programs against the verbs API (`docs/verbs.md`), each checking a
//! promise of the document, of RFC 5040/5041/7306, or of libibverbs semantics a verbs
//! programmer relies on.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
mod verbs_pair;
use rt::PORT;
use verbs_pair::*;

use std::net::IpAddr;

use ddpdk_control::conn::Indication;
use ddpdk_control::rdmap::RdmaLimits;
use ddpdk_control::runtime::{ConnHandle, Event, Op, RuntimeConfig, RuntimeError};
use ddpdk_control::session::{Event as SessionEvent, LocalError, ProtocolError, TerminationReason};
use ddpdk_control::verbs::{
    Cq, MemoryRegion, ProtectionDomain, Qp, QpError, QpInit, QpState, RecvWr, SendWr, Verbs,
    VerbsError, Wc, WcOpcode, WcStatus, WrOpcode,
};
use ddpdk_dataplane::mem::Access;
use ddpdk_dataplane::port::mem::MemPort;
use ddpdk_dataplane::sctp::CloseReason;
use ddpdk_dataplane::wire::ddp::DdpError;
use ddpdk_dataplane::wire::rdmap::{RdmapError, TerminateError};

#[allow(dead_code)] // not every test uses every field
struct Connected {
    p: Pair,
    qa: Qp,
    qb: Qp,
    cqa: Cq,
    cqb: Cq,
    pda: ProtectionDomain,
    pdb: ProtectionDomain,
    recv_mr: MemoryRegion,
}

/// Client QP `qa` (stream 1) connected to server QP `qb`; the server posted `recvs` receives
/// of `recv_len` bytes each from `recv_mr` before accepting.
fn connected_with(recvs: u64, recv_len: u32) -> Connected {
    let mut p = Pair::new();
    let pda = p.a.v.alloc_pd();
    let pdb = p.b.v.alloc_pd();
    let recv_mr =
        p.b.v
            .reg_mr(pdb, 1 << 16, Access::LOCAL_WRITE, 0x9000_0000)
            .unwrap();
    let conn = p.associate();
    let cqa = p.a.v.create_cq();
    let qa = qp(&mut p.a.v, pda, cqa, conn, 1);
    p.a.v.connect_qp(qa, b"verbs").unwrap();
    let server_conn = p.initiate_seen(1);
    let cqb = p.b.v.create_cq();
    let qb = qp(&mut p.b.v, pdb, cqb, server_conn, 1);
    for i in 0..recvs {
        let r = RecvWr {
            wr_id: 500 + i,
            sg_list: vec![sge(&recv_mr, i * 1024, recv_len)],
        };
        p.b.v.post_recv(qb, &r).unwrap();
    }
    p.b.v.accept_qp(qb, b"").unwrap();
    p.run_until("the Accept", |p| p.a.v.qp_state(qa) == Some(QpState::Rts));
    Connected {
        p,
        qa,
        qb,
        cqa,
        cqb,
        pda,
        pdb,
        recv_mr,
    }
}

fn connected(recvs: u64) -> Connected {
    connected_with(recvs, 1024)
}

fn qp(v: &mut Verbs<MemPort>, pd: ProtectionDomain, cq: Cq, conn: ConnHandle, stream: u16) -> Qp {
    v.create_qp(QpInit {
        pd,
        send_cq: cq,
        recv_cq: cq,
        conn,
        stream,
        limits: RdmaLimits::default(),
    })
    .unwrap()
}

/// Steps until `n` completions arrived on the client's `cq` or `steps` turns passed.
fn client_wcs(p: &mut Pair, cq: Cq, n: usize, steps: usize) -> Vec<Wc> {
    let mut got = Vec::new();
    for _ in 0..steps {
        got.extend(wcs(&mut p.a.v, cq));
        if got.len() >= n {
            break;
        }
        p.step();
    }
    got
}

fn server_wcs(p: &mut Pair, cq: Cq, n: usize, steps: usize) -> Vec<Wc> {
    let mut got = Vec::new();
    for _ in 0..steps {
        got.extend(wcs(&mut p.b.v, cq));
        if got.len() >= n {
            break;
        }
        p.step();
    }
    got
}

fn summary(got: &[Wc]) -> Vec<(u64, WcStatus, WcOpcode)> {
    got.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect()
}

#[allow(dead_code)]
fn read_u64(v: &Verbs<MemPort>, mr: &MemoryRegion, at: u64) -> u64 {
    let mut b = [0u8; 8];
    v.control()
        .memory()
        .region(mr.region)
        .unwrap()
        .read(at, &mut b)
        .unwrap();
    u64::from_ne_bytes(b)
}

use ddpdk_control::conn::PostError;

/// The first 1024 bytes of `mr`'s memory set to `byte` (docs/verbs.md: a region's bytes).
fn fill_with(v: &Verbs<MemPort>, mr: &MemoryRegion, byte: u8) {
    let region = v.control().memory().region(mr.region).unwrap();
    region.fill(0, 1024, byte).unwrap();
}

/// The client's association handle (its only one).
fn client_conn(c: &Connected) -> ConnHandle {
    c.p.a.v.control().connections().next().unwrap().0
}

/// `docs/verbs.md`, Completions, "Errors end the stream": "When the association ends, every
/// work request still in the send queue completes then, in order and once: `Flushed` ...; so
/// does every receive not yet completed, in posting order". `Control::forget` (the one way
/// the API offers to drop a connection; verbs has no `rdma_disconnect`) ends the association
/// on this endpoint: its data core drops it. The queue pair on it must not stay `Rts` with
/// its Read and its receive outstanding for ever.
#[test]
fn forgetting_the_association_flushes_its_queue_pairs_outstanding_work() {
    let mut c = connected(0);
    let target =
        c.p.b
            .v
            .reg_mr(c.pdb, 1 << 20, Access::REMOTE_READ, 0x3000_0000)
            .unwrap();
    let local =
        c.p.a
            .v
            .reg_mr(c.pda, 1 << 20, Access::LOCAL_WRITE, 0x1000_0000)
            .unwrap();
    let recv = RecvWr {
        wr_id: 77,
        sg_list: vec![sge(&local, 0, 100)],
    };
    c.p.a.v.post_recv(c.qa, &recv).unwrap();
    let read = WrOpcode::RdmaRead {
        rkey: target.rkey,
        remote_addr: target.addr,
    };
    c.p.a
        .v
        .post_send(c.qa, &wr(2, read, vec![sge(&local, 100_000, 60_000)]))
        .unwrap();
    let conn = client_conn(&c);
    c.p.a.v.control_mut().forget(conn).unwrap();
    let mut got = client_wcs(&mut c.p, c.cqa, 2, 20_000);
    got.sort_by_key(|w| w.wr_id);
    assert_eq!(
        summary(&got),
        [
            (2, WcStatus::Flushed, WcOpcode::RdmaRead),
            (77, WcStatus::Flushed, WcOpcode::Recv),
        ],
        "the association is gone: its queue pair's work completes Flushed"
    );
    assert_eq!(c.p.a.v.qp_state(c.qa), Some(QpState::Error));
    // RFC 9260 §9.1: the forgotten association was aborted, not dropped silently; our side
    // heard its Closed, and the peer's ended with it (its queue pair in Error).
    let closed = |events: &[Event], why: fn(&CloseReason) -> bool| {
        events
            .iter()
            .filter(|e| {
                matches!(e, Event::Indication { indication: Indication::Closed(r), .. } if why(r))
            })
            .count()
    };
    assert_eq!(closed(&c.p.a.events, |r| *r == CloseReason::LocalAbort), 1);
    c.p.run_until("the peer's end", |p| {
        closed(&p.b.events, |r| matches!(r, CloseReason::PeerAbort { .. })) == 1
    });
    assert_eq!(c.p.b.v.qp_state(c.qb), Some(QpState::Error));
    // Once: nothing more completes on either queue pair.
    assert!(client_wcs(&mut c.p, c.cqa, 1, 200).is_empty());
}

/// `docs/verbs.md`, `destroy_qp`: it "returns once the data core has withdrawn its receives";
/// `Timeout` means "a core still holds the receives". Once the connection is forgotten no
/// core holds anything of it, so `destroy_qp` must return `Ok` (and free the stream for a new
/// queue pair), not answer `Timeout` on every call and leave the queue pair undestroyable.
#[test]
fn destroy_qp_of_a_forgotten_association_returns_ok_not_timeout() {
    let mut c = connected(0);
    let local =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::LOCAL_WRITE, 0x1000_0000)
            .unwrap();
    let recv = RecvWr {
        wr_id: 77,
        sg_list: vec![sge(&local, 0, 100)],
    };
    c.p.a.v.post_recv(c.qa, &recv).unwrap();
    c.p.steps(10); // the receive is with the core
    let conn = client_conn(&c);
    c.p.a.v.control_mut().forget(conn).unwrap();
    c.p.steps(10);
    let now = c.p.now;
    let Node { v, cores, .. } = &mut c.p.a;
    let r = v.destroy_qp_polling(c.qa, now, &mut || {
        for k in cores.iter_mut() {
            k.poll(now);
        }
    });
    assert_eq!(
        r,
        Ok(()),
        "no core holds the forgotten connection's receives"
    );
}

/// As above, with `destroy_qp` right after `forget`, before the core has taken the forget:
/// the core still holds the receive then, and may place into it, so `destroy_qp` may not
/// return at once; the abort that `forget` brings flushes it (`Closed`), and `destroy_qp`
/// returns `Ok` within its wait, the receive reported to no CQ (`ibv_destroy_qp`), the queue
/// pair gone and its stream free.
#[test]
fn destroy_qp_right_after_forget_returns_ok_once_the_core_let_go() {
    let mut c = connected(0);
    let local =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::LOCAL_WRITE, 0x1000_0000)
            .unwrap();
    let recv = RecvWr {
        wr_id: 77,
        sg_list: vec![sge(&local, 0, 100)],
    };
    c.p.a.v.post_recv(c.qa, &recv).unwrap();
    c.p.steps(10); // the receive is with the core
    let conn = client_conn(&c);
    c.p.a.v.control_mut().forget(conn).unwrap();
    let now = c.p.now;
    let Node { v, cores, .. } = &mut c.p.a;
    let r = v.destroy_qp_polling(c.qa, now, &mut || {
        for k in cores.iter_mut() {
            k.poll(now);
        }
    });
    assert_eq!(r, Ok(()));
    assert_eq!(c.p.a.v.qp_state(c.qa), None, "destroyed");
    assert!(
        client_wcs(&mut c.p, c.cqa, 1, 200).is_empty(),
        "a destroyed queue pair completes nothing"
    );
    // Its stream is free again (no StreamTaken), but the connection is gone: a queue pair on
    // it is refused, as one on any handle no core owns (its posts would never complete).
    let r = c.p.a.v.create_qp(QpInit {
        pd: c.pda,
        send_cq: c.cqa,
        recv_cq: c.cqa,
        conn,
        stream: 1,
        limits: RdmaLimits::default(),
    });
    assert_eq!(
        r.err(),
        Some(VerbsError::Runtime(RuntimeError::NoSuchConnection))
    );
}

/// `WcStatus::LocalProtection` (control/src/verbs.rs; `IBV_WC_LOC_PROT_ERR`): "an entry
/// outside its region, of another protection domain, without the right it needs, or an lkey
/// no longer valid". A receive whose memory region was deregistered (RFC 5041 §8.3.1; the
/// verbs.md way with cores on this thread: `deregister_polling`, then `free_region`) and
/// that a Send then reaches has an lkey no longer valid: it completes `LocalProtection`, as
/// with libibverbs, not `Flushed` as if the stream had ended before it was used (and the peer
/// is told "no buffer available", blaming its flow control).
#[test]
fn a_receive_whose_memory_region_was_deregistered_completes_local_protection() {
    let mut c = connected(1);
    let now = c.p.now;
    let Node { v, cores, .. } = &mut c.p.b;
    v.control_mut()
        .memory_mut()
        .deregister_polling(c.recv_mr.lkey, &mut || {
            for k in cores.iter_mut() {
                k.poll(now);
            }
        })
        .unwrap();
    v.control_mut()
        .memory_mut()
        .free_region(c.recv_mr.region)
        .unwrap();
    let src =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::default(), 0x1000_0000)
            .unwrap();
    c.p.a
        .v
        .post_send(c.qa, &wr(1, WrOpcode::Send, vec![sge(&src, 0, 64)]))
        .unwrap();
    let got = server_wcs(&mut c.p, c.cqb, 1, 5000);
    assert_eq!(
        summary(&got),
        [(500, WcStatus::LocalProtection, WcOpcode::Recv)],
        "the receive's lkey is no longer valid"
    );
    // The Terminate names our own fault (RFC 5041 §7.2 Local Catastrophic, as siw sends for an
    // invalid lkey), not the peer's flow control ("no buffer available"), on both ends.
    let ours = Some(QpError::Terminate(TerminateError::Ddp(
        DdpError::LocalCatastrophic,
    )));
    assert_eq!(c.p.b.v.qp_error(c.qb), ours);
    c.p.run_until("the Terminate", |p| {
        p.a.v.qp_state(c.qa) == Some(QpState::Error)
    });
    assert_eq!(c.p.a.v.qp_error(c.qa), ours);
}

/// RFC 5040 §4.8 with RFC 5041 §7.2: the application deregisters a Read's sink while the Read
/// is outstanding; the peer's Read Response, exactly where the Read asked, places nothing. The
/// fault is ours, as with a receive's revoked memory: the Read completes `LocalProtection`
/// (its lkey is no longer valid), not `Flushed`, and the Terminate says RDMAP's Local
/// Catastrophic error (0x0/0x00) on both ends, not DDP's Invalid STag blaming the peer.
#[test]
fn a_read_whose_sink_was_deregistered_completes_local_protection_5040_4_8() {
    let mut c = connected(0);
    let target =
        c.p.b
            .v
            .reg_mr(c.pdb, 4096, Access::REMOTE_READ, 0x3000_0000)
            .unwrap();
    let sink =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::LOCAL_WRITE, 0x1000_0000)
            .unwrap();
    let read = WrOpcode::RdmaRead {
        rkey: target.rkey,
        remote_addr: target.addr,
    };
    c.p.a
        .v
        .post_send(c.qa, &wr(1, read, vec![sge(&sink, 0, 1000)]))
        .unwrap();
    // The client's core takes the Read and sends its request; the server's is not turned, so
    // no response can come before the sink is gone.
    let now = c.p.now;
    let Node { v, cores, .. } = &mut c.p.a;
    for _ in 0..5 {
        v.poll(now);
        for k in cores.iter_mut() {
            k.poll(now);
        }
    }
    v.control_mut()
        .memory_mut()
        .deregister_polling(sink.lkey, &mut || {
            for k in cores.iter_mut() {
                k.poll(now);
            }
        })
        .unwrap();
    let got = client_wcs(&mut c.p, c.cqa, 1, 5000);
    assert_eq!(
        summary(&got),
        [(1, WcStatus::LocalProtection, WcOpcode::RdmaRead)],
        "the Read's lkey is no longer valid"
    );
    let ours = Some(QpError::Terminate(TerminateError::Rdmap(
        RdmapError::LocalCatastrophic,
    )));
    assert_eq!(c.p.a.v.qp_error(c.qa), ours);
    c.p.run_until("the Terminate", |p| {
        p.b.v.qp_state(c.qb) == Some(QpState::Error)
    });
    assert_eq!(c.p.b.v.qp_error(c.qb), ours);
}

/// As above, the region deregistered but not freed, with a receive of a live region posted
/// behind it: the Send reaching the first completes it `LocalProtection` and places nothing
/// (RFC 5041 §7.1: the segment is checked before Placement); the stream ends, so the second
/// completes `Flushed`, in posting order.
#[test]
fn a_receive_whose_memory_region_was_deregistered_places_nothing() {
    let mut c = connected_with(1, 64);
    let fill = |v: &Verbs<MemPort>, mr: &MemoryRegion| fill_with(v, mr, 0xee);
    fill(&c.p.b.v, &c.recv_mr);
    let live =
        c.p.b
            .v
            .reg_mr(c.pdb, 4096, Access::LOCAL_WRITE, 0x5000_0000)
            .unwrap();
    fill(&c.p.b.v, &live);
    let r = RecvWr {
        wr_id: 501,
        sg_list: vec![sge(&live, 0, 64)],
    };
    c.p.b.v.post_recv(c.qb, &r).unwrap();
    c.p.steps(10);
    let now = c.p.now;
    let Node { v, cores, .. } = &mut c.p.b;
    v.control_mut()
        .memory_mut()
        .deregister_polling(c.recv_mr.lkey, &mut || {
            for k in cores.iter_mut() {
                k.poll(now);
            }
        })
        .unwrap();
    let src =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::default(), 0x1000_0000)
            .unwrap();
    fill_with(&c.p.a.v, &src, 0x11);
    c.p.a
        .v
        .post_send(c.qa, &wr(1, WrOpcode::Send, vec![sge(&src, 0, 64)]))
        .unwrap();
    let got = server_wcs(&mut c.p, c.cqb, 2, 5000);
    assert_eq!(
        summary(&got),
        [
            (500, WcStatus::LocalProtection, WcOpcode::Recv),
            (501, WcStatus::Flushed, WcOpcode::Recv),
        ]
    );
    for mr in [&c.recv_mr, &live] {
        let mut b = [0u8; 1024];
        let region = c.p.b.v.control().memory().region(mr.region).unwrap();
        region.read(0, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 0xee), "nothing placed");
    }
}

/// `docs/verbs.md`, `accept_qp`: "Accepts the peer's Initiate (seen as an event from
/// `poll_event`)"; `PeerNotRdmap` means "its Initiate lacked RDMAP's parameters", and on it
/// verbs answers "that Initiate with a Reject". An `accept_qp` before any Initiate arrived
/// (a race every passive side can lose) was refused as `PeerNotRdmap`, naming a peer fault
/// that did not happen, the queue pair in `Error`, and verbs sent a Reject for an Initiate
/// that does not exist. It is refused outright (`NoPendingInitiate`), nothing is sent, the
/// queue pair stays in `Init` with its receive, and once the Initiate comes the same queue
/// pair accepts it and carries a Send into that receive.
#[test]
fn accept_qp_without_a_pending_initiate_is_refused_and_can_accept_later() {
    let mut c = connected(0);
    let server_conn = c.p.b.v.control().connections().next().unwrap().0;
    let q = qp(&mut c.p.b.v, c.pdb, c.cqb, server_conn, 3);
    let recv = RecvWr {
        wr_id: 900,
        sg_list: vec![sge(&c.recv_mr, 0, 1024)],
    };
    c.p.b.v.post_recv(q, &recv).unwrap();
    assert_eq!(
        c.p.b.v.accept_qp(q, b""),
        Err(VerbsError::NoPendingInitiate)
    );
    c.p.steps(200);
    assert_eq!(c.p.b.v.qp_state(q), Some(QpState::Init), "as it was");
    assert_eq!(c.p.b.v.qp_refused(q), None);
    let session_on_3 = |events: &[Event]| {
        events.iter().any(|e| {
            matches!(
                e,
                Event::Indication {
                    indication: Indication::Session { stream: 3, .. },
                    ..
                } | Event::Refused {
                    stream: Some(3),
                    ..
                }
            )
        })
    };
    assert!(
        !session_on_3(&c.p.a.events),
        "nothing was sent: {:?}",
        c.p.a.events
    );
    assert!(
        !session_on_3(&c.p.b.events),
        "nothing was refused: {:?}",
        c.p.b.events
    );
    // The Initiate comes: the same queue pair accepts it.
    let conn = client_conn(&c);
    let client = qp(&mut c.p.a.v, c.pda, c.cqa, conn, 3);
    c.p.a.v.connect_qp(client, b"").unwrap();
    c.p.run_until("the Initiate on stream 3", |p| session_on_3(&p.b.events));
    c.p.b.v.accept_qp(q, b"").unwrap();
    c.p.run_until("the Accept", |p| {
        p.a.v.qp_state(client) == Some(QpState::Rts)
    });
    let src =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::default(), 0x1000_0000)
            .unwrap();
    c.p.a
        .v
        .post_send(client, &wr(1, WrOpcode::Send, vec![sge(&src, 0, 64)]))
        .unwrap();
    let got = server_wcs(&mut c.p, c.cqb, 1, 5000);
    assert_eq!(summary(&got), [(900, WcStatus::Success, WcOpcode::Recv)]);
    assert_eq!(c.p.b.v.qp_state(q), Some(QpState::Rts));
}

/// The connection API under verbs (`Op::AcceptRdmap`, RFC 5043 §6.3): an Accept with no
/// Initiate pending is refused for that (`NotPending`), not as `PeerNotRdmap`, which would
/// have the application reject an Initiate that never came.
#[test]
fn accept_rdmap_without_a_pending_initiate_is_refused_as_not_pending() {
    let mut c = connected(0);
    let server_conn = c.p.b.v.control().connections().next().unwrap().0;
    let op = Op::AcceptRdmap {
        stream: 3,
        pd: c.pdb.0,
        limits: RdmaLimits::default(),
        private_data: Vec::new(),
    };
    c.p.b.v.control_mut().submit(server_conn, op).unwrap();
    c.p.run_until("the refusal", |p| {
        p.b.events.iter().any(|e| {
            matches!(
                e,
                Event::Refused {
                    stream: Some(3),
                    ..
                }
            )
        })
    });
    let error = c.p.b.events.iter().find_map(|e| match e {
        Event::Refused {
            stream: Some(3),
            error,
            ..
        } => Some(*error),
        _ => None,
    });
    assert_eq!(error, Some(PostError::Session(LocalError::NotPending)));
}

/// `docs/verbs.md`, Completions, Statuses: `Flushed` is "`IBV_WC_WR_FLUSH_ERR`: the stream
/// ended first; work the core refuses once the queue pair is in `Error` completes so too".
/// With libibverbs (InfiniBand spec, and iWARP's siw) work posted to a queue pair in the Error
/// state completes with `IBV_WC_WR_FLUSH_ERR`: it is how a ULP drains a queue pair
/// (`ib_drain_qp` posts a marker after the move to Error and waits for its flush). Here
/// `post_send` and `post_recv` refuse it outright with `QpState(Error)`.
#[test]
fn work_posted_to_a_queue_pair_in_error_completes_flushed() {
    let mut c = connected(0);
    let target =
        c.p.b
            .v
            .reg_mr(c.pdb, 4096, Access::REMOTE_READ, 0x3000_0000)
            .unwrap();
    let local =
        c.p.a
            .v
            .reg_mr(c.pda, 8192, Access::LOCAL_WRITE, 0x1000_0000)
            .unwrap();
    // A Read past the peer's region ends the stream (RFC 5040 §7: Base or Bounds).
    let bad = WrOpcode::RdmaRead {
        rkey: target.rkey,
        remote_addr: target.addr + 4000,
    };
    c.p.a
        .v
        .post_send(c.qa, &wr(1, bad, vec![sge(&local, 0, 200)]))
        .unwrap();
    let got = client_wcs(&mut c.p, c.cqa, 1, 5000);
    assert_eq!(summary(&got), [(1, WcStatus::Flushed, WcOpcode::RdmaRead)]);
    assert_eq!(c.p.a.v.qp_state(c.qa), Some(QpState::Error));

    let drain =
        c.p.a
            .v
            .post_send(c.qa, &wr(2, WrOpcode::Send, vec![sge(&local, 0, 8)]));
    let recv = RecvWr {
        wr_id: 3,
        sg_list: vec![sge(&local, 0, 100)],
    };
    let drain_recv = c.p.a.v.post_recv(c.qa, &recv);
    assert_eq!(
        (drain, drain_recv),
        (Ok(()), Ok(())),
        "posted, to be flushed"
    );
    let got = client_wcs(&mut c.p, c.cqa, 2, 200);
    assert_eq!(
        summary(&got),
        [
            (2, WcStatus::Flushed, WcOpcode::Send),
            (3, WcStatus::Flushed, WcOpcode::Recv),
        ]
    );
}

/// Work posted once the queue pair is in `Error`, while work posted before is still being
/// flushed by the core, completes behind it, per queue in posting order (`ib_drain_qp`'s
/// marker is the last to complete): the receive posted before the error and the Read that
/// ended the stream come first. Unsignaled work posted in `Error` completes too (a failure
/// always does).
#[test]
fn work_posted_in_error_completes_behind_the_work_still_flushing() {
    let mut c = connected(0);
    let target =
        c.p.b
            .v
            .reg_mr(c.pdb, 4096, Access::REMOTE_READ, 0x3000_0000)
            .unwrap();
    let local =
        c.p.a
            .v
            .reg_mr(c.pda, 8192, Access::LOCAL_WRITE, 0x1000_0000)
            .unwrap();
    let recv = |wr_id| RecvWr {
        wr_id,
        sg_list: vec![sge(&local, 0, 100)],
    };
    c.p.a.v.post_recv(c.qa, &recv(70)).unwrap();
    let bad = WrOpcode::RdmaRead {
        rkey: target.rkey,
        remote_addr: target.addr + 4000,
    };
    c.p.a
        .v
        .post_send(c.qa, &wr(1, bad, vec![sge(&local, 0, 200)]))
        .unwrap();
    // The completion queue is not polled meanwhile: whatever the core flushed waits there.
    c.p.run_until("the queue pair in Error", |p| {
        p.a.v.qp_state(c.qa) == Some(QpState::Error)
    });
    let unsignaled = SendWr {
        signaled: false,
        ..wr(2, WrOpcode::Send, vec![sge(&local, 0, 8)])
    };
    c.p.a.v.post_send(c.qa, &unsignaled).unwrap();
    c.p.a.v.post_recv(c.qa, &recv(3)).unwrap();
    let got = client_wcs(&mut c.p, c.cqa, 4, 5000);
    let of = |opcodes: &[WcOpcode]| {
        summary(&got)
            .into_iter()
            .filter(|w| opcodes.contains(&w.2))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        of(&[WcOpcode::Recv]),
        [
            (70, WcStatus::Flushed, WcOpcode::Recv),
            (3, WcStatus::Flushed, WcOpcode::Recv),
        ]
    );
    assert_eq!(
        of(&[WcOpcode::RdmaRead, WcOpcode::Send]),
        [
            (1, WcStatus::Flushed, WcOpcode::RdmaRead),
            (2, WcStatus::Flushed, WcOpcode::Send),
        ]
    );
    assert_eq!(got.len(), 4, "each once");
}

/// `docs/verbs.md`, Busy: with the data core not turning, `2 × ring_depth` (2048) posts are
/// taken (the core's command ring, then the control side's queue in front of it) and the
/// next is refused with `Runtime(Busy)`, nothing posted; once the core turns, posting goes
/// on, and the work taken completes.
#[test]
fn post_send_is_busy_after_twice_the_ring_depth_of_posts_the_core_did_not_take() {
    let mut c = connected(0);
    let target =
        c.p.b
            .v
            .reg_mr(c.pdb, 4096, Access::REMOTE_WRITE, 0x3000_0000)
            .unwrap();
    let src =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::default(), 0x1000_0000)
            .unwrap();
    let write = |wr_id, signaled| SendWr {
        signaled,
        ..wr(
            wr_id,
            WrOpcode::RdmaWrite {
                rkey: target.rkey,
                remote_addr: target.addr,
            },
            vec![sge(&src, 0, 8)],
        )
    };
    let depth = RuntimeConfig::default().ring_depth as u64;
    for i in 0..2 * depth {
        c.p.a.v.post_send(c.qa, &write(i, false)).unwrap();
    }
    assert_eq!(
        c.p.a.v.post_send(c.qa, &write(9999, true)),
        Err(VerbsError::Runtime(RuntimeError::Busy))
    );
    c.p.steps(1);
    c.p.a.v.post_send(c.qa, &write(9999, true)).unwrap();
    let got = client_wcs(&mut c.p, c.cqa, 1, 20_000);
    assert_eq!(
        summary(&got),
        [(9999, WcStatus::Success, WcOpcode::RdmaWrite)]
    );
    assert_eq!(c.p.a.v.qp_state(c.qa), Some(QpState::Rts));
}

/// RFC 5043 §6.2: a session has one active side. When both applications `connect_qp` on the
/// same stream at once, each Initiate crosses the other and is, to its receiver, an Initiate
/// where none may come (§6.2): a chunk fitting no pattern, which ends the session (§6.1)
/// with no RDMAP Terminate. Both queue pairs go to Error, their receives complete Flushed;
/// no core refused anything (`qp_refused` is empty), so `qp_error` must say why, as the
/// session event does, rather than nothing at all.
#[test]
fn rfc5043_6_2_crossing_connects_say_why_in_qp_error() {
    let mut c = connected(0);
    let client = client_conn(&c);
    let server = c.p.b.v.control().connections().next().unwrap().0;
    let local =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::LOCAL_WRITE, 0x1000_0000)
            .unwrap();
    let qa = qp(&mut c.p.a.v, c.pda, c.cqa, client, 2);
    let qb = qp(&mut c.p.b.v, c.pdb, c.cqb, server, 2);
    let recv = |wr_id, mr: &MemoryRegion| RecvWr {
        wr_id,
        sg_list: vec![sge(mr, 0, 64)],
    };
    c.p.a.v.post_recv(qa, &recv(70, &local)).unwrap();
    c.p.b.v.post_recv(qb, &recv(80, &c.recv_mr)).unwrap();
    c.p.a.v.connect_qp(qa, b"a").unwrap();
    c.p.b.v.connect_qp(qb, b"b").unwrap();
    c.p.run_until("both queue pairs in Error", |p| {
        p.a.v.qp_state(qa) == Some(QpState::Error) && p.b.v.qp_state(qb) == Some(QpState::Error)
    });
    let crossed = Some(QpError::Session(TerminationReason::ProtocolError(
        ProtocolError::UnexpectedInitiate,
    )));
    assert_eq!(c.p.a.v.qp_error(qa), crossed, "the client's queue pair");
    assert_eq!(c.p.b.v.qp_error(qb), crossed, "the server's queue pair");
    assert_eq!(
        (c.p.a.v.qp_refused(qa), c.p.b.v.qp_refused(qb)),
        (None, None)
    );
    assert_eq!(
        summary(&client_wcs(&mut c.p, c.cqa, 1, 5000)),
        [(70, WcStatus::Flushed, WcOpcode::Recv)]
    );
    assert_eq!(
        summary(&server_wcs(&mut c.p, c.cqb, 1, 5000)),
        [(80, WcStatus::Flushed, WcOpcode::Recv)]
    );
    // The stream's first queue pairs are untouched.
    assert_eq!(c.p.a.v.qp_state(c.qa), Some(QpState::Rts));
    assert_eq!(c.p.a.v.qp_error(c.qa), None);
}

/// Whether `events` hold the peer's Initiate on `stream`.
fn initiate_on(events: &[Event], stream: u16) -> bool {
    events.iter().any(|e| {
        matches!(
            e,
            Event::Indication {
                indication: Indication::Session {
                    stream: s,
                    event: SessionEvent::InitiateReceived { .. },
                },
                ..
            } if *s == stream
        )
    })
}

/// Whether `events` hold the core's refusal of an Accept on `stream`.
fn accept_refused_on(events: &[Event], stream: u16) -> bool {
    events.iter().any(|e| {
        matches!(
            e,
            Event::Refused { op: "accept_rdmap" | "accept", stream: Some(s), .. } if *s == stream
        )
    })
}

/// RFC 5043 §6.3: an Initiate has one answer. `docs/verbs.md`, `accept_qp`: with no Initiate
/// pending on the stream it answers `NoPendingInitiate` at once, nothing sent. An application
/// that answers the peer's Initiate itself through `control_mut()` (a Reject, or the
/// connection API's Accept) has answered it: a later `accept_qp` on that stream has nothing
/// to accept, and must say so at once, as `rdma_accept` of a request already answered fails,
/// not be taken and then refused by the core (`Session(NotPending)`, the queue pair in Error).
#[test]
fn rfc5043_6_3_an_initiate_answered_through_control_mut_is_not_pending_for_accept_qp() {
    let mut c = connected(0);
    let client = client_conn(&c);
    let server = c.p.b.v.control().connections().next().unwrap().0;
    let answers = [
        Op::Reject {
            stream: 3,
            private_data: Vec::new(),
        },
        Op::AcceptRdmap {
            stream: 4,
            pd: c.pdb.0,
            limits: RdmaLimits::default(),
            private_data: Vec::new(),
        },
    ];
    for answer in answers {
        let stream = answer.stream().unwrap();
        let q = qp(&mut c.p.b.v, c.pdb, c.cqb, server, stream);
        let active = qp(&mut c.p.a.v, c.pda, c.cqa, client, stream);
        c.p.a.v.connect_qp(active, b"").unwrap();
        c.p.run_until("the Initiate", |p| initiate_on(&p.b.events, stream));
        c.p.b
            .v
            .control_mut()
            .submit(server, answer.clone())
            .unwrap();
        assert_eq!(
            c.p.b.v.accept_qp(q, b""),
            Err(VerbsError::NoPendingInitiate),
            "answered by {answer:?}"
        );
        c.p.steps(200);
        assert_eq!(c.p.b.v.qp_refused(q), None, "nothing refused");
        assert!(
            !accept_refused_on(&c.p.b.events, stream),
            "no Accept went to the core: {:?}",
            c.p.b.events
        );
    }
}

/// As above, with the application's own answer refused by the core (Private Data over RFC
/// 5043 §5.2.3's 512 bytes): a refused operation changes nothing (`Event::Refused`), so the
/// Initiate is still pending, and `accept_qp` accepts it.
#[test]
fn rfc5043_6_3_an_initiate_whose_answer_the_core_refused_is_still_pending_for_accept_qp() {
    let mut c = connected(0);
    let client = client_conn(&c);
    let server = c.p.b.v.control().connections().next().unwrap().0;
    let q = qp(&mut c.p.b.v, c.pdb, c.cqb, server, 3);
    let active = qp(&mut c.p.a.v, c.pda, c.cqa, client, 3);
    c.p.a.v.connect_qp(active, b"").unwrap();
    c.p.run_until("the Initiate", |p| initiate_on(&p.b.events, 3));
    let too_long = Op::AcceptRdmap {
        stream: 3,
        pd: c.pdb.0,
        limits: RdmaLimits::default(),
        private_data: vec![0; 600],
    };
    c.p.b.v.control_mut().submit(server, too_long).unwrap();
    c.p.run_until("the refusal", |p| accept_refused_on(&p.b.events, 3));
    c.p.b.v.accept_qp(q, b"").unwrap();
    c.p.run_until("the Accept", |p| {
        p.a.v.qp_state(active) == Some(QpState::Rts)
    });
    assert_eq!(c.p.b.v.qp_state(q), Some(QpState::Rts));
}

/// RFC 5043 §6.3: an Accept is the ULP's answer to the Initiate it was told of.
/// `docs/verbs.md`, `accept_qp`: pending means pending and seen. An Initiate whose event the
/// control side took in (`Verbs::poll` ran) but the application has not polled is one it
/// cannot have looked at (its Private Data, the peer's ORD and IRD): `accept_qp` took it, a
/// guess (`rdma_accept` needs the connect request's event). It answers `NoPendingInitiate`,
/// nothing sent, the queue pair as it was; once the event is polled it accepts.
#[test]
fn rfc5043_6_3_an_initiate_the_application_has_not_polled_is_not_pending_for_accept_qp() {
    let mut c = connected(0);
    let client = client_conn(&c);
    let server = c.p.b.v.control().connections().next().unwrap().0;
    let q = qp(&mut c.p.b.v, c.pdb, c.cqb, server, 3);
    let active = qp(&mut c.p.a.v, c.pda, c.cqa, client, 3);
    c.p.a.v.connect_qp(active, b"").unwrap();
    // Both ends turn; the server's verbs takes the Initiate in, its application polls nothing.
    for _ in 0..1000 {
        if c.p.b.v.control().initiate_pending(server, 3) {
            break;
        }
        let now = c.p.now;
        for n in [&mut c.p.a, &mut c.p.b] {
            for k in &mut n.cores {
                k.poll(now);
            }
            n.v.poll(now);
        }
        c.p.a
            .events
            .extend(std::iter::from_fn(|| c.p.a.v.poll_event()));
        c.p.now += std::time::Duration::from_micros(200);
    }
    assert!(
        c.p.b.v.control().initiate_pending(server, 3),
        "the Initiate is in"
    );
    assert!(!initiate_on(&c.p.b.events, 3), "not polled");
    assert_eq!(
        c.p.b.v.accept_qp(q, b""),
        Err(VerbsError::NoPendingInitiate),
        "its event not polled yet"
    );
    assert_eq!(c.p.b.v.qp_state(q), Some(QpState::Init), "as it was");
    // The application polls it, and accepts the Initiate it saw.
    c.p.step();
    assert!(initiate_on(&c.p.b.events, 3), "polled");
    c.p.b.v.accept_qp(q, b"").unwrap();
    c.p.run_until("the Accept", |p| {
        p.a.v.qp_state(active) == Some(QpState::Rts)
    });
    assert_eq!(c.p.b.v.qp_state(q), Some(QpState::Rts));
}

/// RFC 9260 §10 (a closed association carries no more user data; its ULP hears of the end,
/// COMMUNICATION LOST or SHUTDOWN COMPLETE) with RFC 5043 §6 (a DDP Stream Session lives
/// on its association): `create_qp` on a connection whose `Closed` is in and that is not
/// forgotten yet refuses at once with `NotConnected`, nothing made. It made a queue pair
/// that could only go to Error at its first `connect_qp` or `accept_qp`. The rule is the
/// control side's knowledge: refused once its `Verbs::poll` took the `Closed` in, before
/// the application polled the event too (a fact about the connection, which the event then
/// tells), and the event still comes. Once forgotten the handle is unknown.
#[test]
fn rfc9260_10_create_qp_on_a_closed_association_is_refused_not_connected() {
    let mut c = connected(0);
    let conn = client_conn(&c);
    let init = |stream| QpInit {
        pd: c.pda,
        send_cq: c.cqa,
        recv_cq: c.cqa,
        conn,
        stream,
        limits: RdmaLimits::default(),
    };
    let (init2, init3, init4) = (init(2), init(3), init(4));
    c.p.a.v.control_mut().submit(conn, Op::Abort).unwrap();
    // The client's core ends the association and its verbs takes the Closed in (the queue
    // pair on it goes to Error); the application does not poll the event yet.
    for _ in 0..1000 {
        if c.p.a.v.qp_state(c.qa) == Some(QpState::Error) {
            break;
        }
        let now = c.p.now;
        for k in &mut c.p.a.cores {
            k.poll(now);
        }
        c.p.a.v.poll(now);
        c.p.now += std::time::Duration::from_micros(200);
    }
    assert_eq!(
        c.p.a.v.qp_state(c.qa),
        Some(QpState::Error),
        "the Closed is in"
    );
    assert!(c.p.a.v.control().is_closed(conn));
    assert_eq!(
        c.p.a.v.create_qp(init2),
        Err(VerbsError::NotConnected),
        "the Closed not yet polled by the application"
    );
    let closed = std::iter::from_fn(|| c.p.a.v.poll_event()).any(|e| {
        matches!(
            e,
            Event::Indication { conn: k, indication: Indication::Closed(_) } if k == conn
        )
    });
    assert!(closed, "the Closed still comes");
    assert_eq!(
        c.p.a.v.create_qp(init3),
        Err(VerbsError::NotConnected),
        "the Closed polled"
    );
    c.p.a.v.control_mut().forget(conn).unwrap();
    assert!(!c.p.a.v.control().is_closed(conn), "forgotten: unknown");
    assert_eq!(
        c.p.a.v.create_qp(init4),
        Err(VerbsError::Runtime(RuntimeError::NoSuchConnection)),
        "forgotten"
    );
}

/// `docs/verbs.md`, Completions: every work request completes, `Flushed` when its stream or
/// association ends first. A queue pair made on a connection as its association closes
/// (its core ended it, the control side has not heard: `create_qp` takes it) has its
/// Initiate and the receive behind it go to a core that has given the closed connection's
/// slot to a new association (it holds `MAX_CONNECTIONS_PER_CORE`). The core answers
/// `Event::Unknown`, which names the stream and the work request: the Initiate is refused
/// as by a closed connection (`NotConnected`, the queue pair in Error) and the receive
/// completes `Flushed` with its wr_id, once (the `Closed` that comes first flushes it).
#[test]
fn verbs_work_on_a_closed_connection_whose_slot_was_reused_completes_with_its_wr_id() {
    use ddpdk_control::runtime::MAX_CONNECTIONS_PER_CORE;
    use std::net::Ipv4Addr;
    let mut c = connected(0);
    let conn = client_conn(&c);
    let now = c.p.now;
    // Peers that never answer: their INITs keep the client's core's other slots taken.
    let mut bogus = (0..).map(|i: u32| {
        let [_, _, x, y] = (i + 1).to_be_bytes();
        IpAddr::V4(Ipv4Addr::new(198, 19, x, y))
    });
    for _ in 1..MAX_CONNECTIONS_PER_CORE {
        let peer = bogus.next().unwrap();
        c.p.a.v.control_mut().connect(now, peer, PORT).unwrap();
    }
    c.p.steps(5);
    let now = c.p.now;
    let local =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::LOCAL_WRITE, 0x1000_0000)
            .unwrap();
    c.p.a.v.control_mut().submit(conn, Op::Abort).unwrap();
    // The client's core ends the association; its control side has not heard yet.
    for k in &mut c.p.a.cores {
        k.poll(now);
    }
    // A new association takes the closed one's slot.
    let peer = bogus.next().unwrap();
    c.p.a.v.control_mut().connect(now, peer, PORT).unwrap();
    let q = qp(&mut c.p.a.v, c.pda, c.cqa, conn, 2);
    let recv = RecvWr {
        wr_id: 90,
        sg_list: vec![sge(&local, 0, 64)],
    };
    c.p.a.v.post_recv(q, &recv).unwrap();
    c.p.a.v.connect_qp(q, b"").unwrap();
    let got = client_wcs(&mut c.p, c.cqa, 1, 200);
    assert!(
        c.p.a.events.iter().any(|e| matches!(
            e,
            Event::Unknown { conn: k, op: "initiate_rdmap", .. } if *k == conn
        )),
        "the core no longer knew the connection"
    );
    assert_eq!(summary(&got), [(90, WcStatus::Flushed, WcOpcode::Recv)]);
    assert_eq!(c.p.a.v.qp_state(q), Some(QpState::Error));
    assert_eq!(c.p.a.v.qp_refused(q), Some(PostError::NotConnected));
    // Work posted now completes too (in Error, it reaches no core).
    c.p.a
        .v
        .post_send(q, &wr(91, WrOpcode::Send, vec![sge(&local, 0, 8)]))
        .unwrap();
    assert_eq!(
        summary(&client_wcs(&mut c.p, c.cqa, 1, 10)),
        [(91, WcStatus::Flushed, WcOpcode::Send)]
    );
}

/// RFC 7306 §6: Immediate Data is an 8-byte message into the peer's next posted receive.
/// Into a receive smaller than that it is a message too long for the buffer: RFC 5041 §7.1
/// check 4, §7.2's "DDP Message too long for available buffer" (0x2/0x05), whatever the
/// receive's size. A receive of 0 bytes ended the stream as Invalid MO (0x2/0x04), one of 4
/// bytes as too long: the same fault told two ways. The receive completes `LocalLength`
/// (`IBV_WC_LOC_LEN_ERR`) either way.
#[test]
fn rfc5041_7_2_immediate_data_into_a_smaller_receive_is_too_long_whatever_its_size() {
    for recv_len in [0, 4] {
        let mut c = connected_with(1, recv_len);
        let imm = WrOpcode::ImmediateData { data: [7; 8] };
        c.p.a.v.post_send(c.qa, &wr(1, imm, Vec::new())).unwrap();
        c.p.run_until("both queue pairs in Error", |p| {
            p.a.v.qp_state(c.qa) == Some(QpState::Error)
                && p.b.v.qp_state(c.qb) == Some(QpState::Error)
        });
        let too_long = Some(QpError::Terminate(TerminateError::Ddp(DdpError::TooLong)));
        assert_eq!(c.p.b.v.qp_error(c.qb), too_long, "{recv_len}-byte receive");
        assert_eq!(c.p.a.v.qp_error(c.qa), too_long, "{recv_len}-byte receive");
        assert_eq!(
            summary(&server_wcs(&mut c.p, c.cqb, 1, 5000)),
            [(500, WcStatus::LocalLength, WcOpcode::Recv)],
            "{recv_len}-byte receive"
        );
    }
}

/// RFC 5041 §7.1 untagged check 4: a message too long for the buffer its MSN names is
/// refused before anything of it lands outside that buffer, and §7.2 reports it as "DDP
/// Message too long for available buffer" (0x2/0x05); the stream ends with the Terminate. As
/// with libibverbs (and siw), the receive it reached completes `IBV_WC_LOC_LEN_ERR`
/// (`WcStatus::LocalLength`), in its turn, not `Flushed` as if the stream had ended before it
/// was used; the receive behind it is flushed. Two ways to be too long: a Send of 1500 bytes
/// into a receive of 1024, and RFC 7306 §6's 8 bytes of Immediate Data into a receive of 4.
#[test]
fn rfc5041_7_1_check_4_a_send_larger_than_its_receive_completes_local_length() {
    // What, the receive's length, the work request and its one entry's length (none: 0).
    let sends = [
        ("a Send of 1500 bytes", 1024, WrOpcode::Send, 1500),
        (
            "Immediate Data",
            4,
            WrOpcode::ImmediateData { data: [0x11; 8] },
            0,
        ),
    ];
    for (what, recv_len, opcode, send_len) in sends {
        // Receives 500 (`recv_len` bytes at 0) and 501 (at 1024) of `recv_mr`, whose first
        // 4 KiB are 0xee.
        let mut c = connected_with(2, recv_len);
        let region = c.p.b.v.control().memory().region(c.recv_mr.region).unwrap();
        region.fill(0, 4096, 0xee).unwrap();
        let src =
            c.p.a
                .v
                .reg_mr(c.pda, 4096, Access::default(), 0x1000_0000)
                .unwrap();
        fill_with(&c.p.a.v, &src, 0x11);
        let sg_list = match send_len {
            0 => Vec::new(),
            n => vec![sge(&src, 0, n)],
        };
        c.p.a.v.post_send(c.qa, &wr(1, opcode, sg_list)).unwrap();
        let got = server_wcs(&mut c.p, c.cqb, 2, 5000);
        assert_eq!(
            summary(&got),
            [
                (500, WcStatus::LocalLength, WcOpcode::Recv),
                (501, WcStatus::Flushed, WcOpcode::Recv),
            ],
            "{what}"
        );
        let mut b = [0u8; 4096];
        let region = c.p.b.v.control().memory().region(c.recv_mr.region).unwrap();
        region.read(0, &mut b).unwrap();
        assert!(
            b[recv_len as usize..].iter().all(|&x| x == 0xee),
            "{what}: nothing placed beyond the {recv_len}-byte buffer"
        );
        // The Terminate says the peer's message was too long (0x2/0x05), on both ends.
        let too_long = Some(QpError::Terminate(TerminateError::Ddp(DdpError::TooLong)));
        assert_eq!(c.p.b.v.qp_error(c.qb), too_long, "{what}");
        c.p.run_until("the Terminate", |p| {
            p.a.v.qp_state(c.qa) == Some(QpState::Error)
        });
        assert_eq!(c.p.a.v.qp_error(c.qa), too_long, "{what}");
    }
}

/// docs/verbs.md's Statuses: `Flushed` is "the stream ended first". The peer ends the stream
/// (its session Terminate, lent to the control thread with its session); a Send posted before
/// verbs hears is refused by the core as behind a terminated session, and that refusal came up
/// before the session's end: it completed `LocalQpOperation` ("the queue pair could not take
/// it"), the queue pair still in `Rts` (an independent review).
#[test]
fn work_refused_because_the_peer_ended_the_stream_completes_flushed() {
    let mut c = connected(0);
    let server = c.p.b.v.control().connections().next().unwrap().0;
    let src =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::default(), 0x1000_0000)
            .unwrap();
    let lent = |p: &Pair| p.a.cores[0].stats().sessions_lent;
    let before = lent(&c.p);
    c.p.b
        .v
        .control_mut()
        .submit(server, Op::Terminate { stream: 1 })
        .unwrap();
    c.p.run_until("the session lent", |p| lent(p) > before);
    assert_eq!(c.p.a.v.qp_state(c.qa), Some(QpState::Rts));
    c.p.a
        .v
        .post_send(c.qa, &wr(1, WrOpcode::Send, vec![sge(&src, 0, 8)]))
        .unwrap();
    let got = client_wcs(&mut c.p, c.cqa, 1, 2000);
    assert_eq!(summary(&got), [(1, WcStatus::Flushed, WcOpcode::Send)]);
}

/// RFC 7306 §6.2 with `Wc::imm_data` ("its 8 bytes, as sent"): receive buffers may overlap
/// (libibverbs leaves only their contents undefined), and two Immediate Data messages placed
/// into one 8-byte scratch buffer in one core turn each complete with their own 8 bytes. verbs
/// read them back from the buffer when it handled the event, by when the second had been
/// placed over the first: both reported the second's (an independent review).
#[test]
fn immediate_data_is_each_receives_own_when_buffers_overlap_rfc7306_6() {
    let mut c = connected(0);
    let scratch =
        c.p.b
            .v
            .reg_mr(c.pdb, 4096, Access::LOCAL_WRITE, 0x7000_0000)
            .unwrap();
    for wr_id in [600, 601] {
        let r = RecvWr {
            wr_id,
            sg_list: vec![sge(&scratch, 0, 8)],
        };
        c.p.b.v.post_recv(c.qb, &r).unwrap();
    }
    c.p.steps(5);
    for (id, data) in [(1, *b"first!!!"), (2, *b"second!!")] {
        c.p.a
            .v
            .post_send(c.qa, &wr(id, WrOpcode::ImmediateData { data }, Vec::new()))
            .unwrap();
    }
    let got = server_wcs(&mut c.p, c.cqb, 2, 5000);
    assert_eq!(
        got.iter()
            .map(|w| (w.wr_id, w.imm_data))
            .collect::<Vec<_>>(),
        [(600, Some(*b"first!!!")), (601, Some(*b"second!!"))]
    );
}

/// docs/verbs.md, Order, with RFC 5040 §5.5: an unsignaled Send behind a Read completes in its
/// turn, after the Read. The association ends while the Read's response is still coming and
/// after the Send was received and acknowledged: the Read completes `Flushed`, the Send
/// silently (it succeeded). The core told verbs how far its unsignaled work got before it
/// released the Send from behind the Read, so the Send completed `Flushed` too (an
/// independent review of session 70's first fix).
#[test]
fn an_unsignaled_send_behind_an_unfinished_read_is_not_flushed_when_the_association_ends() {
    let mut c = connected(1);
    let (qa, cqa, cqb) = (c.qa, c.cqa, c.cqb);
    let len: u32 = 4 << 20;
    let src =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::default(), 0x1000_0000)
            .unwrap();
    let sink =
        c.p.a
            .v
            .reg_mr(c.pda, len as usize, Access::LOCAL_WRITE, 0x2000_0000)
            .unwrap();
    let target =
        c.p.b
            .v
            .reg_mr(c.pdb, len as usize, Access::REMOTE_READ, 0x3000_0000)
            .unwrap();
    let read = WrOpcode::RdmaRead {
        rkey: target.rkey,
        remote_addr: target.addr,
    };
    c.p.a
        .v
        .post_send(qa, &wr(1, read, vec![sge(&sink, 0, len)]))
        .unwrap();
    let quiet = SendWr {
        signaled: false,
        ..wr(2, WrOpcode::Send, vec![sge(&src, 0, 8)])
    };
    c.p.a.v.post_send(qa, &quiet).unwrap();
    let got = server_wcs(&mut c.p, cqb, 1, 5000);
    assert_eq!(summary(&got), [(500, WcStatus::Success, WcOpcode::Recv)]);
    // And acknowledged by SCTP; the 4 MiB response is still coming.
    c.p.steps(20);
    assert_eq!(summary(&wcs(&mut c.p.a.v, cqa)), [], "the Read is not over");
    let conn = client_conn(&c);
    c.p.a.v.control_mut().forget(conn).unwrap();
    c.p.run_until("Error", |p| p.a.v.qp_state(qa) == Some(QpState::Error));
    c.p.steps(100);
    assert_eq!(
        summary(&wcs(&mut c.p.a.v, cqa)),
        [(1, WcStatus::Flushed, WcOpcode::RdmaRead)],
        "the Send succeeded: nothing to report"
    );
}
