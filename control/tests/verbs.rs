//! The verbs-shaped API (`ddpdk_control::verbs`) end to end: two endpoints, each a runtime
//! under a `Verbs` context, their data cores polled on the test thread. Work requests, their
//! completions (opcode, byte length, status, the invalidated STag), errors as completion
//! statuses, and the flush when a stream ends.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
mod verbs_pair;
use verbs_pair::*;

use ddpdk_control::memory::MemoryRegistration;
use ddpdk_control::rdmap::RdmaLimits;
use ddpdk_control::verbs::{
    Cq, MemoryRegion, ProtectionDomain, Qp, QpError, QpInit, QpState, RecvWr, Sge, Verbs,
    VerbsError, Wc, WcOpcode, WcStatus, WrOpcode,
};
use ddpdk_dataplane::mem::{Access, StreamId};
use ddpdk_dataplane::port::mem::MemPort;
use ddpdk_dataplane::wire::ddp::DdpError;
use ddpdk_dataplane::wire::rdmap::{RdmapError, TerminateError};

/// The client's queue pair connected to the server's, each with its CQs; the server posted
/// `recvs` receives of 1 KiB from `recv_mr` before accepting.
struct Connected {
    p: Pair,
    qa: Qp,
    qb: Qp,
    cqa: Cq,
    cqb_send: Cq,
    cqb_recv: Cq,
    pda: ProtectionDomain,
    pdb: ProtectionDomain,
    recv_mr: MemoryRegion,
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
    let qa =
        p.a.v
            .create_qp(QpInit {
                pd: pda,
                send_cq: cqa,
                recv_cq: cqa,
                conn,
                stream: 1,
                limits: RdmaLimits::default(),
            })
            .unwrap();
    assert_eq!(
        p.a.v.post_send(qa, &wr(1, WrOpcode::Send, Vec::new())),
        Err(VerbsError::QpState(QpState::Init)),
        "no send before the queue pair is connected"
    );
    p.a.v.connect_qp(qa, b"verbs").unwrap();
    let server_conn = p.initiate_seen(1);
    let (cqb_send, cqb_recv) = (p.b.v.create_cq(), p.b.v.create_cq());
    let qb =
        p.b.v
            .create_qp(QpInit {
                pd: pdb,
                send_cq: cqb_send,
                recv_cq: cqb_recv,
                conn: server_conn,
                stream: 1,
                limits: RdmaLimits::default(),
            })
            .unwrap();
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
        qa,
        qb,
        cqa,
        cqb_send,
        cqb_recv,
        pda,
        pdb,
        recv_mr,
    }
}

/// Write (two entries, gathered), Read, then Send with Solicited Event and Invalidate, one
/// unsignaled Write among them: the client's send queue completes in posting order with each
/// opcode and length (the unsignaled Write silently); the server's receive completes with the
/// length, the solicited flag and the STag it invalidated, which no table knows any more; a
/// Write through that STag afterwards ends the stream, and every queue pair's outstanding work
/// is flushed, the RDMAP error kept (RFC 5040 §5, §5.3, §5.5, §7).
#[test]
fn verbs_work_requests_complete_in_order_with_their_opcodes() {
    let mut c = connected(2);
    let src =
        c.p.a
            .v
            .reg_mr(c.pda, 1 << 16, Access::default(), 0x1000_0000)
            .unwrap();
    let sink =
        c.p.a
            .v
            .reg_mr(c.pda, 1 << 16, Access::LOCAL_WRITE, 0x2000_0000)
            .unwrap();
    let target =
        c.p.b
            .v
            .reg_mr(
                c.pdb,
                1 << 16,
                Access::REMOTE_WRITE | Access::REMOTE_READ,
                0x3000_0000,
            )
            .unwrap();
    let data: Vec<u8> = (0..12_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mem = c.p.a.v.control().memory();
    mem.region(src.region).unwrap().place(0, &data).unwrap();
    let write = |_wr_id, offset: u64| WrOpcode::RdmaWrite {
        rkey: target.rkey,
        remote_addr: target.addr + offset,
    };
    let (qa, cqa) = (c.qa, c.cqa);
    let v = &mut c.p.a.v;
    // 12 000 bytes as two entries: 5000 + 7000.
    v.post_send(
        qa,
        &wr(
            1,
            write(1, 0),
            vec![sge(&src, 0, 5000), sge(&src, 5000, 7000)],
        ),
    )
    .unwrap();
    let mut quiet = wr(2, write(2, 20_000), vec![sge(&src, 0, 100)]);
    quiet.signaled = false;
    v.post_send(qa, &quiet).unwrap();
    v.post_send(
        qa,
        &wr(
            3,
            WrOpcode::RdmaRead {
                rkey: target.rkey,
                remote_addr: target.addr,
            },
            vec![sge(&sink, 64, 12_000)],
        ),
    )
    .unwrap();
    let mut send = wr(
        4,
        WrOpcode::SendWithInv { rkey: target.rkey },
        vec![sge(&src, 0, 300)],
    );
    send.solicited = true;
    v.post_send(qa, &send).unwrap();
    let mut got = Vec::new();
    c.p.run_until("three completions", |p| {
        got.extend(wcs(&mut p.a.v, cqa));
        got.len() >= 3
    });
    let summary: Vec<_> = got
        .iter()
        .map(|w| (w.wr_id, w.status, w.opcode, w.byte_len, w.qp))
        .collect();
    assert_eq!(
        summary,
        [
            (1, WcStatus::Success, WcOpcode::RdmaWrite, 12_000, qa),
            (3, WcStatus::Success, WcOpcode::RdmaRead, 12_000, qa),
            (4, WcStatus::Success, WcOpcode::Send, 300, qa),
        ],
        "posting order; the unsignaled Write completes silently"
    );
    let mut back = vec![0u8; 12_000];
    let mem = c.p.a.v.control().memory();
    mem.region(sink.region)
        .unwrap()
        .read(64, &mut back)
        .unwrap();
    assert_eq!(back, data, "the Read brought the written bytes back");

    let mut recv = Vec::new();
    let cqb_recv = c.cqb_recv;
    c.p.run_until("the receive", |p| {
        recv.extend(wcs(&mut p.b.v, cqb_recv));
        !recv.is_empty()
    });
    assert_eq!(
        recv[0],
        Wc {
            wr_id: 500,
            status: WcStatus::Success,
            opcode: WcOpcode::Recv,
            byte_len: 300,
            qp: c.qb,
            invalidated: Some(target.rkey),
            solicited: true,
            imm_data: None,
        }
    );
    let mut got300 = vec![0u8; 300];
    let mem = c.p.b.v.control().memory();
    mem.region(c.recv_mr.region)
        .unwrap()
        .read(0, &mut got300)
        .unwrap();
    assert_eq!(got300, data[..300]);
    assert!(mem.stags().lookup(target.rkey).is_none(), "invalidated");

    // The STag is gone: a Write through it ends the stream. The Write itself completes at
    // the Data Source once SCTP has it acknowledged (RFC 5040 §5.1: the source's completion
    // says nothing of placement); the Read behind it never gets its response and is flushed.
    c.p.a
        .v
        .post_send(qa, &wr(5, write(5, 0), vec![sge(&src, 0, 100)]))
        .unwrap();
    let read = WrOpcode::RdmaRead {
        rkey: target.rkey,
        remote_addr: target.addr,
    };
    c.p.a
        .v
        .post_send(qa, &wr(6, read, vec![sge(&sink, 0, 100)]))
        .unwrap();
    let mut tail = Vec::new();
    c.p.run_until("the flush", |p| {
        tail.extend(wcs(&mut p.a.v, cqa));
        tail.len() >= 2 && p.a.v.qp_state(qa) == Some(QpState::Error)
    });
    assert_eq!(
        tail.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(5, WcStatus::Success), (6, WcStatus::Flushed)]
    );
    // Work posted in Error is taken and flushed (libibverbs; `ib_drain_qp` relies on it).
    assert_eq!(
        c.p.a.v.post_send(qa, &wr(7, WrOpcode::Send, Vec::new())),
        Ok(())
    );
    assert_eq!(
        wcs(&mut c.p.a.v, cqa)
            .iter()
            .map(|w| (w.wr_id, w.status))
            .collect::<Vec<_>>(),
        [(7, WcStatus::Flushed)]
    );
    assert_eq!(
        c.p.a.v.qp_error(qa),
        Some(QpError::Terminate(TerminateError::Ddp(
            DdpError::InvalidStag
        ))),
        "the peer's Terminate"
    );
    c.p.run_until("the server's flush", |p| {
        recv.extend(wcs(&mut p.b.v, cqb_recv));
        recv.len() >= 2
    });
    assert_eq!(
        (recv[1].wr_id, recv[1].status),
        (501, WcStatus::Flushed),
        "the unused receive is flushed"
    );
    assert_eq!(c.p.b.v.qp_state(c.qb), Some(QpState::Error));
    assert_eq!(
        c.p.b.v.qp_error(c.qb),
        Some(QpError::Terminate(TerminateError::Ddp(
            DdpError::InvalidStag
        )))
    );
}

/// Errors as completion statuses: an entry outside its region, one of another protection
/// domain, a receive into memory without local write, a Read with two sinks; each completes
/// with its status at once and nothing reaches the wire (the peer's receive stays posted).
#[test]
fn verbs_bad_work_requests_complete_with_an_error_status() {
    let mut c = connected(1);
    let src =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::default(), 0x1000_0000)
            .unwrap();
    let other_pd = c.p.a.v.alloc_pd();
    let foreign =
        c.p.a
            .v
            .reg_mr(other_pd, 4096, Access::LOCAL_WRITE, 0x5000_0000)
            .unwrap();
    let (qa, cqa) = (c.qa, c.cqa);
    let v = &mut c.p.a.v;
    v.post_send(qa, &wr(1, WrOpcode::Send, vec![sge(&src, 4000, 200)]))
        .unwrap();
    v.post_send(qa, &wr(2, WrOpcode::Send, vec![sge(&foreign, 0, 10)]))
        .unwrap();
    let read = WrOpcode::RdmaRead {
        rkey: src.lkey,
        remote_addr: 0,
    };
    v.post_send(
        qa,
        &wr(3, read, vec![sge(&foreign, 0, 10), sge(&foreign, 10, 10)]),
    )
    .unwrap();
    v.post_recv(
        qa,
        &RecvWr {
            wr_id: 4,
            sg_list: vec![sge(&src, 0, 100)],
        },
    )
    .unwrap();
    let got: Vec<_> = wcs(v, cqa)
        .iter()
        .map(|w| (w.wr_id, w.status, w.opcode))
        .collect();
    assert_eq!(
        got,
        [
            (1, WcStatus::LocalProtection, WcOpcode::Send),
            (2, WcStatus::LocalProtection, WcOpcode::Send),
            (3, WcStatus::LocalQpOperation, WcOpcode::RdmaRead),
            (4, WcStatus::LocalProtection, WcOpcode::Recv),
        ]
    );
    for _ in 0..200 {
        c.p.step();
    }
    assert!(
        wcs(&mut c.p.b.v, c.cqb_recv).is_empty(),
        "nothing reached the peer"
    );
    assert_eq!(c.p.a.v.qp_state(qa), Some(QpState::Rts), "still usable");
    let _ = c.cqb_send;
}

/// RFC 5041 §8.2: a registration bound to a DDP stream is used by no other. The data core takes
/// a bound Data Sink of a Read or an Atomic only on its own stream; verbs, which cannot bind one
/// to a queue pair nor learn a session's stream identity, refuses a bound sink itself: the work
/// request completes `LocalProtection` before any core turns (nothing submitted), and in its
/// turn behind earlier work.
#[test]
fn a_read_or_atomic_sink_bound_to_a_stream_fails_locally_in_its_turn() {
    let mut c = connected(0);
    let target =
        c.p.b
            .v
            .reg_mr(
                c.pdb,
                4096,
                Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
                0x3000_0000,
            )
            .unwrap();
    let src =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::LOCAL_WRITE, 0x1000_0000)
            .unwrap();
    let memory = c.p.a.v.control_mut().memory_mut();
    let region = memory.alloc_region(4096).unwrap();
    let bound = memory
        .register(MemoryRegistration {
            pd: c.pda.0,
            region,
            offset: 0,
            len: 4096,
            access: Access::LOCAL_WRITE,
            // No session here has this identity: another stream's.
            stream: Some(StreamId(u64::MAX)),
            to_base: 0x2000_0000,
        })
        .unwrap();
    let sink = |offset: u64, length| Sge {
        lkey: bound.stag,
        addr: 0x2000_0000 + offset,
        length,
    };
    let read = WrOpcode::RdmaRead {
        rkey: target.rkey,
        remote_addr: target.addr,
    };
    let fadd = WrOpcode::AtomicFetchAdd {
        rkey: target.rkey,
        remote_addr: target.addr,
        add: 1,
        mask: 0,
    };
    let (qa, cqa) = (c.qa, c.cqa);
    let v = &mut c.p.a.v;
    v.post_send(qa, &wr(1, read, vec![sink(0, 100)])).unwrap();
    v.post_send(qa, &wr(2, fadd, vec![sink(128, 8)])).unwrap();
    let summary =
        |got: Vec<Wc>| -> Vec<_> { got.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect() };
    assert_eq!(
        summary(wcs(v, cqa)),
        [
            (1, WcStatus::LocalProtection, WcOpcode::RdmaRead),
            (2, WcStatus::LocalProtection, WcOpcode::FetchAdd),
        ],
        "refused here, before any core turned"
    );

    // Behind a Write still outstanding: after it.
    let write = WrOpcode::RdmaWrite {
        rkey: target.rkey,
        remote_addr: target.addr,
    };
    v.post_send(qa, &wr(3, write, vec![sge(&src, 0, 100)]))
        .unwrap();
    v.post_send(qa, &wr(4, read, vec![sink(0, 100)])).unwrap();
    let mut got = Vec::new();
    c.p.run_until("two completions", |p| {
        got.extend(wcs(&mut p.a.v, cqa));
        got.len() >= 2
    });
    assert_eq!(
        summary(got),
        [
            (3, WcStatus::Success, WcOpcode::RdmaWrite),
            (4, WcStatus::LocalProtection, WcOpcode::RdmaRead),
        ]
    );
}

/// Local Invalidate: its completion comes once every data core has dropped the STag; an STag
/// of another protection domain is not ours to invalidate (local protection error).
#[test]
fn verbs_local_invalidate_completes_once_the_stag_is_gone() {
    let mut c = connected(0);
    let mr =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::REMOTE_WRITE, 0x1000_0000)
            .unwrap();
    let other_pd = c.p.a.v.alloc_pd();
    let foreign =
        c.p.a
            .v
            .reg_mr(other_pd, 4096, Access::REMOTE_WRITE, 0x5000_0000)
            .unwrap();
    let (qa, cqa) = (c.qa, c.cqa);
    c.p.a
        .v
        .post_send(qa, &wr(1, WrOpcode::LocalInv { lkey: mr.lkey }, Vec::new()))
        .unwrap();
    c.p.a
        .v
        .post_send(
            qa,
            &wr(2, WrOpcode::LocalInv { lkey: foreign.lkey }, Vec::new()),
        )
        .unwrap();
    let mut got = Vec::new();
    c.p.run_until("two completions", |p| {
        got.extend(wcs(&mut p.a.v, cqa));
        got.len() >= 2
    });
    got.sort_by_key(|w| w.wr_id);
    assert_eq!(
        got.iter()
            .map(|w| (w.wr_id, w.status, w.opcode))
            .collect::<Vec<_>>(),
        [
            (1, WcStatus::Success, WcOpcode::LocalInv),
            (2, WcStatus::LocalProtection, WcOpcode::LocalInv),
        ]
    );
    let stags = c.p.a.v.control().memory().stags();
    assert!(stags.lookup(mr.lkey).is_none());
    assert!(stags.lookup(foreign.lkey).is_some());
}

/// Issue 14 item 4, memory that lasts: a server registers a fresh region for every Write it
/// takes, and deregisters and frees it afterwards, 1500 times (more than the 1024 region
/// slots): each Write lands byte-exact in its own region through the data core's replica, and
/// the server ends holding no region.
#[test]
fn a_server_registers_and_frees_regions_for_as_long_as_it_runs() {
    let mut c = connected(0);
    let src =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::default(), 0x1000_0000)
            .unwrap();
    let (qa, cqa) = (c.qa, c.cqa);
    let before = c.p.b.v.control().memory().regions_in_use();
    for i in 0..1500u32 {
        let bytes = i.to_be_bytes().repeat(16);
        let mem = c.p.a.v.control().memory();
        mem.region(src.region).unwrap().place(0, &bytes).unwrap();
        let mr =
            c.p.b
                .v
                .reg_mr(c.pdb, 4096, Access::REMOTE_WRITE, 0x4000_0000)
                .unwrap();
        let op = WrOpcode::RdmaWrite {
            rkey: mr.rkey,
            remote_addr: mr.addr + 128,
        };
        c.p.a
            .v
            .post_send(qa, &wr(u64::from(i), op, vec![sge(&src, 0, 64)]))
            .unwrap();
        let mut got = Vec::new();
        c.p.run_until("the Write", |p| {
            got.extend(wcs(&mut p.a.v, cqa));
            !got.is_empty()
        });
        assert_eq!(
            (got[0].wr_id, got[0].status),
            (u64::from(i), WcStatus::Success)
        );
        let mut placed = vec![0u8; 64];
        let mem = c.p.b.v.control().memory();
        mem.region(mr.region)
            .unwrap()
            .read(128, &mut placed)
            .unwrap();
        assert_eq!(placed, bytes, "write {i}");
        // The server's data core is polled on this thread: it turns while the revocation waits.
        let Node { v, cores, .. } = &mut c.p.b;
        let now = c.p.now;
        v.control_mut()
            .memory_mut()
            .deregister_polling(mr.lkey, &mut || {
                for k in cores.iter_mut() {
                    k.poll(now);
                }
            })
            .unwrap();
        v.control_mut().memory_mut().free_region(mr.region).unwrap();
    }
    assert_eq!(c.p.b.v.control().memory().regions_in_use(), before);
    assert_eq!(c.p.a.v.qp_state(qa), Some(QpState::Rts));
}

/// RFC 7306 through the verbs, on the runtime's data cores: FetchAdd and CmpSwap on the
/// server's word (registered with remote atomic access) complete with their opcodes and leave
/// the original values in the client's 8-byte entries; Immediate Data completes the server's
/// posted receive with its 8 bytes in `imm_data`. An atomic whose entry is not 8 bytes completes
/// in error, in its turn, and sends nothing; one on a registration without remote atomic access at the
/// server ends the stream (RDMA layer, Remote Protection Error, access rights).
#[test]
fn verbs_atomics_and_immediate_data() {
    let mut c = connected(2);
    let word =
        c.p.b
            .v
            .reg_mr(c.pdb, 4096, Access::REMOTE_ATOMIC, 0x5000_0000)
            .unwrap();
    c.p.b
        .v
        .control()
        .memory()
        .region(word.region)
        .unwrap()
        .place(8, &100u64.to_ne_bytes())
        .unwrap();
    let sink =
        c.p.a
            .v
            .reg_mr(c.pda, 4096, Access::LOCAL_WRITE, 0x6000_0000)
            .unwrap();
    let (qa, cqa) = (c.qa, c.cqa);
    let fadd = WrOpcode::AtomicFetchAdd {
        rkey: word.rkey,
        remote_addr: word.addr + 8,
        add: 23,
        mask: 0,
    };
    let cas = WrOpcode::AtomicCmpSwap {
        rkey: word.rkey,
        remote_addr: word.addr + 8,
        compare: 123,
        compare_mask: !0,
        swap: 7,
        swap_mask: !0,
    };
    c.p.a
        .v
        .post_send(qa, &wr(1, fadd, vec![sge(&sink, 0, 8)]))
        .unwrap();
    c.p.a
        .v
        .post_send(qa, &wr(2, cas, vec![sge(&sink, 8, 8)]))
        .unwrap();
    let imm = WrOpcode::ImmediateData { data: *b"immdata!" };
    c.p.a.v.post_send(qa, &wr(3, imm, Vec::new())).unwrap();
    // Refused at the source, nothing sent: a 4-byte entry.
    c.p.a
        .v
        .post_send(qa, &wr(4, fadd, vec![sge(&sink, 16, 4)]))
        .unwrap();
    let mut got = Vec::new();
    c.p.run_until("four completions", |p| {
        got.extend(wcs(&mut p.a.v, cqa));
        got.len() == 4
    });
    let summary: Vec<_> = got.iter().map(|w| (w.wr_id, w.opcode, w.status)).collect();
    assert_eq!(
        summary,
        [
            (1, WcOpcode::FetchAdd, WcStatus::Success),
            (2, WcOpcode::CompSwap, WcStatus::Success),
            (3, WcOpcode::ImmediateData, WcStatus::Success),
            (4, WcOpcode::FetchAdd, WcStatus::LocalQpOperation),
        ],
        "posting order: the refused one in its turn"
    );
    let value = |v: &Verbs<MemPort>, mr: &MemoryRegion, at: u64| {
        let mut b = [0u8; 8];
        v.control()
            .memory()
            .region(mr.region)
            .unwrap()
            .read(at, &mut b)
            .unwrap();
        u64::from_ne_bytes(b)
    };
    assert_eq!(value(&c.p.a.v, &sink, 0), 100, "FetchAdd's original");
    assert_eq!(value(&c.p.a.v, &sink, 8), 123, "CmpSwap's original");
    assert_eq!(
        value(&c.p.a.v, &sink, 16),
        0,
        "the refused one wrote nothing"
    );
    assert_eq!(value(&c.p.b.v, &word, 8), 7, "100 + 23, then swapped");

    let cqb_recv = c.cqb_recv;
    let mut recv = Vec::new();
    c.p.run_until("the Immediate Data", |p| {
        recv.extend(wcs(&mut p.b.v, cqb_recv));
        !recv.is_empty()
    });
    assert_eq!(
        recv[0],
        Wc {
            byte_len: 8,
            imm_data: Some(*b"immdata!"),
            ..Wc::new(500, WcStatus::Success, WcOpcode::Recv, c.qb)
        }
    );

    // An STag without remote atomic access at the server: the stream ends.
    let plain =
        c.p.b
            .v
            .reg_mr(
                c.pdb,
                4096,
                Access::REMOTE_WRITE | Access::REMOTE_READ,
                0x5100_0000,
            )
            .unwrap();
    let denied = WrOpcode::AtomicFetchAdd {
        rkey: plain.rkey,
        remote_addr: plain.addr,
        add: 1,
        mask: 0,
    };
    c.p.a
        .v
        .post_send(qa, &wr(6, denied, vec![sge(&sink, 24, 8)]))
        .unwrap();
    got.clear();
    c.p.run_until("the refused Atomic", |p| {
        got.extend(wcs(&mut p.a.v, cqa));
        !got.is_empty()
    });
    assert_eq!((got[0].wr_id, got[0].status), (6, WcStatus::Flushed));
    assert_eq!(c.p.a.v.qp_state(qa), Some(QpState::Error));
    assert_eq!(
        c.p.a.v.qp_error(qa),
        Some(QpError::Terminate(TerminateError::Rdmap(
            RdmapError::AccessRights
        )))
    );
    assert_eq!(value(&c.p.b.v, &plain, 0), 0, "nothing performed");
}
