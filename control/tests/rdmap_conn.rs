//! RDMAP streams end to end over the simulated network (`tests/world`): RDMA Write, Read and
//! the four Sends (RFC 5040 §5), ORD/IRD from the session Private Data, and the Terminate
//! each error a peer can provoke at the Data Source produces (§4.8, §7), with nothing placed
//! where the rule forbids it.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod world;

use ddpdk_control::conn::{
    AtomicOperation, Indication, Payload, PostError, RdmaOp, RdmaRequest, Status,
};
use ddpdk_control::memory::{MemoryRegistration, RegionId};
use ddpdk_control::rdmap::RdmaLimits;
use ddpdk_control::session::{Event, State, TerminationReason};
use ddpdk_dataplane::ddp::RxError;
use ddpdk_dataplane::mem::{Access, Pd, Stag};
use ddpdk_dataplane::wire::rdmap::{Control, Opcode, RdmapError, TerminateError};
use world::{read, region, session_events, wait, Side, World};

const S: u16 = 1;
/// `world::region` registers from this Tagged Offset.
const BASE: u64 = 0x7000_0000_0000;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29) ^ seed)
        .collect()
}

/// Client initiates an RDMAP stream, server accepts it; both may send from their regions.
fn open_rdmap(w: &mut World, client: RdmaLimits, server: RdmaLimits) -> (Pd, Pd) {
    let (cpd, spd) = (w.client.memory.alloc_pd(), w.server.memory.alloc_pd());
    w.client
        .conn()
        .initiate_rdmap(S, cpd, client, b"hello")
        .unwrap();
    wait(w, "the Initiate", |w| {
        session_events(&w.server, S)
            .iter()
            .any(|e| matches!(e, Event::InitiateReceived { .. }))
    });
    w.server
        .conn()
        .accept_rdmap(S, spd, server, b"welcome")
        .unwrap();
    wait(w, "the Accept", |w| {
        session_events(&w.client, S)
            .iter()
            .any(|e| matches!(e, Event::Accepted { .. }))
    });
    for side in [&mut w.client, &mut w.server] {
        let table = side.memory.region_table().clone();
        side.conn().use_regions(table);
    }
    (cpd, spd)
}

fn rdma(side: &mut Side, wr_id: u64, op: RdmaOp, data: Payload) -> Result<(), PostError> {
    let req = RdmaRequest {
        wr_id,
        stream: S,
        op,
        data,
        signaled: true,
    };
    let Side { conn, memory, .. } = side;
    conn.as_mut().unwrap().post_rdma(req, memory.stags())
}

fn completions(side: &Side) -> Vec<(u64, Status)> {
    side.completions
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect()
}

fn done(side: &Side, wr_id: u64) -> bool {
    side.completions.iter().any(|c| c.wr_id == wr_id)
}

fn read_op(source: Stag, source_off: u64, sink: Stag, sink_off: u64, len: u32) -> RdmaOp {
    RdmaOp::Read {
        source,
        source_to: BASE + source_off,
        sink,
        sink_to: BASE + sink_off,
        len,
    }
}

/// RFC 5040 §5.2 with three untagged queues, RDMAP's own (RFC 5040 §4.2: no 4th for RFC
/// 7306's Atomic Responses): the Read Request and Terminate queues are set all the same. A
/// change that set a stream's inline queues all at once set none when the Atomic Response
/// queue was missing, and every Read failed for want of a buffer (an independent review).
#[test]
fn rfc5040_5_2_a_read_works_on_a_stream_of_three_queues() {
    let mut w = World::perfect_with(
        1500,
        ddpdk_control::conn::ConnConfig {
            queues: 3,
            ..Default::default()
        },
    );
    w.establish();
    let (cpd, spd) = open_rdmap(&mut w, RdmaLimits::default(), RdmaLimits::default());
    let (src, src_reg) = region(&mut w.server, spd, 1 << 16, Access::REMOTE_READ, None);
    let data = pattern(5000, 3);
    w.server
        .memory
        .region(src)
        .unwrap()
        .place(0, &data)
        .unwrap();
    let (sink, sink_reg) = region(&mut w.client, cpd, 1 << 16, Access::LOCAL_WRITE, None);
    rdma(
        &mut w.client,
        1,
        read_op(src_reg.stag, 0, sink_reg.stag, 0, data.len() as u32),
        Payload::Bytes(Vec::new()),
    )
    .unwrap();
    wait(&mut w, "the Read", |w| done(&w.client, 1));
    assert_eq!(completions(&w.client), [(1, Status::Success)]);
    assert_eq!(read(&w.client, sink, 0, data.len()), data);
}

/// RFC 5040 §5.2: an RDMA Read of many segments brings the Data Source's bytes into the
/// requester's Data Sink, and completes there once the whole response is placed; the
/// responder's ULP is not involved.
#[test]
fn rfc5040_5_2_read_brings_the_source_bytes_into_the_sink() {
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, spd) = open_rdmap(&mut w, RdmaLimits::default(), RdmaLimits::default());
    let (src, src_reg) = region(&mut w.server, spd, 1 << 20, Access::REMOTE_READ, None);
    let data = pattern(300_000, 7);
    w.server
        .memory
        .region(src)
        .unwrap()
        .place(4096, &data)
        .unwrap();
    let (sink, sink_reg) = region(&mut w.client, cpd, 1 << 20, Access::LOCAL_WRITE, None);
    rdma(
        &mut w.client,
        1,
        read_op(src_reg.stag, 4096, sink_reg.stag, 100, data.len() as u32),
        Payload::Bytes(Vec::new()),
    )
    .unwrap();
    wait(&mut w, "the Read", |w| done(&w.client, 1));
    assert_eq!(completions(&w.client), [(1, Status::Success)]);
    assert_eq!(read(&w.client, sink, 100, data.len()), data);
    assert_eq!(
        read(&w.client, sink, 0, 100),
        vec![0; 100],
        "nothing before the sink"
    );
    assert_eq!(w.server.conn().stats().reads_served, 1);
    assert_eq!(w.client.conn().stats().reads_completed, 1);
    assert!(
        w.server.completions.is_empty()
            && w.server.indications.iter().all(|i| !matches!(
                i,
                Indication::TaggedDelivered { .. } | Indication::Received { .. }
            )),
        "the responder's ULP hears nothing of a Read"
    );
}

/// RFC 5040 §5.1: an RDMA Write is placed and its Data Sink's ULP is not told; the Data
/// Source completes it once SCTP has acknowledged it.
#[test]
fn rfc5040_5_1_write_is_placed_and_not_indicated() {
    let mut w = World::perfect(1500);
    w.establish();
    let (_, spd) = open_rdmap(&mut w, RdmaLimits::default(), RdmaLimits::default());
    let (dst, dst_reg) = region(&mut w.server, spd, 1 << 16, Access::REMOTE_WRITE, None);
    let data = pattern(20_000, 3);
    rdma(
        &mut w.client,
        9,
        RdmaOp::Write {
            stag: dst_reg.stag,
            to: BASE + 512,
        },
        Payload::Bytes(data.clone()),
    )
    .unwrap();
    wait(&mut w, "the Write", |w| done(&w.client, 9));
    assert_eq!(completions(&w.client), [(9, Status::Success)]);
    assert_eq!(read(&w.server, dst, 512, data.len()), data);
    assert!(!w
        .server
        .indications
        .iter()
        .any(|i| matches!(i, Indication::TaggedDelivered { .. })));
}

/// RFC 5040 §5.3 and §4.1: the four Sends fill the peer's posted receives in order, each
/// with its opcode (and the Invalidate STag of the two that carry one) in RsvdULP.
#[test]
fn rfc5040_5_3_sends_arrive_with_their_kind() {
    let mut w = World::perfect(1500);
    w.establish();
    let (_, spd) = open_rdmap(&mut w, RdmaLimits::default(), RdmaLimits::default());
    let (rbuf, rreg) = region(&mut w.server, spd, 1 << 16, Access::LOCAL_WRITE, None);
    world::post_receives(&mut w.server, S, spd, rreg.stag, 1024, 4, 100);
    // The two that invalidate name STags of the server's that they may invalidate.
    let (_, inv1) = region(&mut w.server, spd, 4096, Access::REMOTE_WRITE, None);
    let (_, inv2) = region(&mut w.server, spd, 4096, Access::REMOTE_READ, None);
    let kinds = [
        (false, None, Opcode::Send),
        (true, None, Opcode::SendSe),
        (false, Some(inv1.stag), Opcode::SendInvalidate),
        (true, Some(inv2.stag), Opcode::SendSeInvalidate),
    ];
    for (i, (solicited, invalidate, _)) in kinds.iter().enumerate() {
        rdma(
            &mut w.client,
            i as u64,
            RdmaOp::Send {
                solicited: *solicited,
                invalidate: *invalidate,
            },
            Payload::Bytes(vec![i as u8 + 1; 100]),
        )
        .unwrap();
    }
    wait(&mut w, "four Sends", |w| {
        w.server
            .indications
            .iter()
            .filter(|i| matches!(i, Indication::Received { .. }))
            .count()
            == 4
    });
    let got: Vec<_> = w
        .server
        .indications
        .iter()
        .filter_map(|i| match i {
            Indication::Received {
                wr_id,
                qn,
                len,
                rsvd_ulp,
                invalidated,
                ..
            } => Some((*wr_id, *qn, *len, *rsvd_ulp, *invalidated)),
            _ => None,
        })
        .collect();
    for (i, (wr_id, qn, len, rsvd_ulp, invalidated)) in got.into_iter().enumerate() {
        let (_, invalidate, opcode) = kinds[i];
        assert_eq!((wr_id, qn, len), (100 + i as u64, 0, 100));
        assert_eq!(invalidated, invalidate, "{opcode}: the STag it invalidated");
        assert_eq!(Control::from_byte(rsvd_ulp[0]), Control::new(opcode));
        let stag = u32::from_be_bytes([rsvd_ulp[1], rsvd_ulp[2], rsvd_ulp[3], rsvd_ulp[4]]);
        assert_eq!(stag, invalidate.map_or(0, |s| s.0), "{opcode}");
        assert_eq!(
            read(&w.server, rbuf, i as u64 * 1024, 100),
            vec![i as u8 + 1; 100]
        );
    }
}

/// Runs until the client hears the server's RDMAP Terminate; then the server's receives, each
/// with the STag it says the peer invalidated.
fn received_after_the_terminate(w: &mut World) -> Vec<(u64, Option<Stag>)> {
    wait(w, "the Terminate", |w| {
        w.client
            .indications
            .iter()
            .any(|i| matches!(i, Indication::RdmapTerminate { .. }))
    });
    w.server
        .indications
        .iter()
        .filter_map(|i| match i {
            Indication::Received {
                wr_id, invalidated, ..
            } => Some((*wr_id, *invalidated)),
            _ => None,
        })
        .collect()
}

/// RFC 5040 §5.3 with RFC 5041 §7.1 untagged check 2: a Send with Invalidate naming the STag
/// under the server's own receive buffers, and a Send right behind it in the same packet. The
/// second Send finds no buffer that allows placement (the memory's STag is gone), so nothing
/// of it lands there. The check of a posted buffer's memory looked only at the table, which
/// drops the STag after the whole packet, and placed the second Send (an independent review).
#[test]
fn rfc5040_5_3_a_buffer_whose_stag_the_peer_invalidated_takes_nothing_more() {
    let mut w = World::perfect(1500);
    w.establish();
    let (_, spd) = open_rdmap(&mut w, RdmaLimits::default(), RdmaLimits::default());
    // Remote write too: a region the server also advertised, so the peer may invalidate its
    // STag (a local-only one is refused: `rfc5040_4_8_send_invalidating_...`).
    let (rbuf, rreg) = region(
        &mut w.server,
        spd,
        4096,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        None,
    );
    for (wr_id, offset) in [(50, 0), (51, 1024)] {
        let b = w
            .server
            .memory
            .receive_buffer(spd, rreg.stag, offset, 1024)
            .unwrap();
        w.server.conn().post_recv(S, 0, wr_id, b).unwrap();
    }
    let send = |invalidate| RdmaOp::Send {
        solicited: false,
        invalidate,
    };
    rdma(
        &mut w.client,
        1,
        send(Some(rreg.stag)),
        Payload::Bytes(vec![1; 64]),
    )
    .unwrap();
    rdma(&mut w.client, 2, send(None), Payload::Bytes(vec![2; 64])).unwrap();
    let received = received_after_the_terminate(&mut w);
    assert_eq!(received, [(50, Some(rreg.stag))]);
    assert_eq!(read(&w.server, rbuf, 0, 64), vec![1; 64]);
    assert_eq!(
        read(&w.server, rbuf, 1024, 64),
        vec![0; 64],
        "nothing of the Send after the invalidation"
    );
}

/// RFC 5040 §5.3 (Send with Invalidate at the Data Sink): the STag is invalid before the
/// stream's next message is looked at. The client writes through the server's STag, sends a
/// Send with Invalidate naming it, and writes through it again at once: the first Write is
/// placed, the Send completes naming the STag, and the second Write is refused as Invalid STag
/// (RFC 5041 §7.1 check 1) with not one byte of it placed.
#[test]
fn rfc5040_5_3_send_with_invalidate_revokes_the_stag_before_the_next_message() {
    let mut w = World::perfect(1500);
    w.establish();
    let (_, spd) = open_rdmap(&mut w, RdmaLimits::default(), RdmaLimits::default());
    let (dst, dst_reg) = region(&mut w.server, spd, 1 << 16, Access::REMOTE_WRITE, None);
    let (_, rreg) = region(&mut w.server, spd, 4096, Access::LOCAL_WRITE, None);
    let b = w
        .server
        .memory
        .receive_buffer(spd, rreg.stag, 0, 1024)
        .unwrap();
    w.server.conn().post_recv(S, 0, 50, b).unwrap();
    let write = |to: u64| RdmaOp::Write {
        stag: dst_reg.stag,
        to: BASE + to,
    };
    rdma(&mut w.client, 1, write(0), Payload::Bytes(vec![1; 200])).unwrap();
    rdma(
        &mut w.client,
        2,
        RdmaOp::Send {
            solicited: false,
            invalidate: Some(dst_reg.stag),
        },
        Payload::Bytes(vec![2; 64]),
    )
    .unwrap();
    rdma(&mut w.client, 3, write(4096), Payload::Bytes(vec![3; 200])).unwrap();
    let received = received_after_the_terminate(&mut w);
    assert_eq!(received, [(50, Some(dst_reg.stag))]);
    assert_eq!(
        read(&w.server, dst, 0, 200),
        vec![1; 200],
        "the first Write"
    );
    assert_eq!(
        read(&w.server, dst, 4096, 200),
        vec![0; 200],
        "nothing of the Write after the invalidation"
    );
    assert!(w.server.memory.stags().lookup(dst_reg.stag).is_none());
    assert_eq!(w.server.conn().stats().stags_invalidated_by_peer, 1);
    let error = w.server.indications.iter().find_map(|i| match i {
        Indication::Error { error, .. } => Some(*error),
        _ => None,
    });
    assert_eq!(
        error,
        Some(RxError::Ddp(
            ddpdk_dataplane::wire::ddp::DdpError::InvalidStag
        ))
    );
}

/// What a Send with Invalidate may not invalidate (RFC 5040 §5.3 and §4.8, Remote Protection
/// Error "STag cannot be invalidated"): an STag the server never issued, one of another
/// protection domain, one bound to another stream, and a local-only one, which the peer was
/// never told of: here the very region of the posted receive buffers (a peer guessing it
/// revoked every session's buffers: an outside-in review). Each ends the stream with that
/// Terminate, the Send's receive buffer is not completed as received, and a real STag stays
/// valid.
#[test]
fn rfc5040_4_8_send_invalidating_what_the_stream_may_not_is_cannot_invalidate() {
    for case in ["unknown", "another domain", "another stream", "local only"] {
        let mut w = World::perfect(1500);
        w.establish();
        let (_, spd) = open_rdmap(&mut w, RdmaLimits::default(), RdmaLimits::default());
        let target = match case {
            "unknown" | "local only" => None,
            "another domain" => {
                let other = w.server.memory.alloc_pd();
                Some(region(&mut w.server, other, 4096, Access::REMOTE_WRITE, None).1)
            }
            _ => {
                let mut reg = region(&mut w.server, spd, 4096, Access::REMOTE_WRITE, None).1;
                // Deregister and register the same memory again, bound to stream 2.
                w.server.memory.deregister(reg.stag).unwrap();
                let region_id = w.server.memory.alloc_region(4096).unwrap();
                reg = w
                    .server
                    .memory
                    .register(MemoryRegistration {
                        pd: spd,
                        region: region_id,
                        offset: 0,
                        len: 4096,
                        access: Access::REMOTE_WRITE,
                        stream: Some(ddpdk_dataplane::mem::StreamId(u64::MAX)),
                        to_base: BASE,
                    })
                    .unwrap();
                Some(reg)
            }
        };
        let (_, rreg) = region(&mut w.server, spd, 4096, Access::LOCAL_WRITE, None);
        let target = if case == "local only" {
            Some(rreg)
        } else {
            target
        };
        let stag = target.map_or(Stag(0x00ab_cd01), |r| r.stag);
        let b = w
            .server
            .memory
            .receive_buffer(spd, rreg.stag, 0, 1024)
            .unwrap();
        w.server.conn().post_recv(S, 0, 50, b).unwrap();
        rdma(
            &mut w.client,
            1,
            RdmaOp::Send {
                solicited: true,
                invalidate: Some(stag),
            },
            Payload::Bytes(vec![2; 64]),
        )
        .unwrap();
        wait(&mut w, "the Terminate", |w| {
            w.client
                .indications
                .iter()
                .any(|i| matches!(i, Indication::RdmapTerminate { .. }))
        });
        let terminate = w.client.indications.iter().find_map(|i| match i {
            Indication::RdmapTerminate { error, .. } => Some(*error),
            _ => None,
        });
        assert_eq!(
            terminate,
            Some(TerminateError::Rdmap(
                RdmapError::ProtectionCannotInvalidate
            )),
            "{case}"
        );
        assert!(
            !w.server
                .indications
                .iter()
                .any(|i| matches!(i, Indication::Received { .. })),
            "{case}: the Send does not complete"
        );
        if let Some(r) = target {
            assert!(
                w.server.memory.stags().lookup(r.stag).is_some(),
                "{case}: still valid"
            );
        }
        assert_eq!(w.server.conn().stats().stags_invalidated_by_peer, 0);
    }
}

/// ORD and IRD from the Private Data (RFC 5043 §6.3's Read credits): the client asks for 16
/// outstanding Reads, the server serves 2, so at most 2 are ever outstanding; six Reads all
/// complete, in order, byte-exact.
#[test]
fn rfc5040_6_1_reads_are_held_to_the_peers_ird() {
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, spd) = open_rdmap(
        &mut w,
        RdmaLimits { ird: 4, ord: 16 },
        RdmaLimits { ird: 2, ord: 1 },
    );
    assert_eq!(w.client.conn().rdma_status(S).unwrap().ord, 2);
    assert_eq!(w.server.conn().rdma_status(S).unwrap().ord, 1);
    let (src, src_reg) = region(&mut w.server, spd, 1 << 20, Access::REMOTE_READ, None);
    let data = pattern(6 * 50_000, 11);
    w.server
        .memory
        .region(src)
        .unwrap()
        .place(0, &data)
        .unwrap();
    let (sink, sink_reg) = region(&mut w.client, cpd, 1 << 20, Access::LOCAL_WRITE, None);
    for i in 0..6u64 {
        rdma(
            &mut w.client,
            i,
            read_op(src_reg.stag, i * 50_000, sink_reg.stag, i * 50_000, 50_000),
            Payload::Bytes(Vec::new()),
        )
        .unwrap();
    }
    let mut most = 0;
    wait(&mut w, "six Reads", |w| {
        let c = w.client.conn().rdma_status(S).unwrap().outstanding_reads;
        let s = w.server.conn().rdma_status(S).unwrap().serving;
        most = most.max(c).max(usize::from(s));
        w.client.completions.len() == 6
    });
    assert_eq!(most, 2, "never more than the server's IRD");
    let order: Vec<u64> = w.client.completions.iter().map(|c| c.wr_id).collect();
    assert_eq!(order, [0, 1, 2, 3, 4, 5]);
    assert_eq!(read(&w.client, sink, 0, data.len()), data);
}

/// RFC 5040 §5.2: the responder answers a Read on its own, however busy its sending side.
/// After a packet the pump waits until a batch of SCTP's slots is free
/// (`Connection::pump_batch_due`); a Read Response the Request's packet made must still go
/// out while the responder's SCTP queue is full of its own bulk write on another stream, the
/// two streams taking turns, not after that write.
#[test]
fn a_read_response_is_not_held_behind_the_responders_bulk_write() {
    const BULK: usize = 4 << 20;
    const READ: usize = 64 << 10;
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, spd) = open_rdmap(&mut w, RdmaLimits::default(), RdmaLimits::default());
    // A plain DDP session on stream 2 carries the server's bulk write to the client.
    let (cpd2, _) = world::open(&mut w, 2);
    let (_, bulk_sink) = region(&mut w.client, cpd2, BULK, Access::REMOTE_WRITE, None);
    let bulk_src = w.server.memory.alloc_region(BULK).unwrap();
    let table = w.server.memory.region_table().clone();
    w.server.conn().use_regions(table);
    w.server
        .conn()
        .post_send(ddpdk_control::conn::SendRequest {
            wr_id: 77,
            stream: 2,
            kind: ddpdk_control::conn::SendKind::Tagged {
                stag: bulk_sink.stag,
                to: BASE,
                rsvd_ulp: 0,
            },
            data: Payload::Region {
                region: bulk_src,
                offset: 0,
                len: BULK as u32,
            },
            signaled: true,
        })
        .unwrap();
    let slots =
        w.server.conn().association().send_room() as u64 + w.server.conn().association().queued();
    wait(&mut w, "the server's SCTP queue full", |w| {
        w.server.conn().association().queued() == slots
    });
    let (src, src_reg) = region(&mut w.server, spd, READ, Access::REMOTE_READ, None);
    let data = pattern(READ, 3);
    w.server
        .memory
        .region(src)
        .unwrap()
        .place(0, &data)
        .unwrap();
    let (sink, sink_reg) = region(&mut w.client, cpd, READ, Access::LOCAL_WRITE, None);
    rdma(
        &mut w.client,
        1,
        read_op(src_reg.stag, 0, sink_reg.stag, 0, READ as u32),
        Payload::Bytes(Vec::new()),
    )
    .unwrap();
    wait(&mut w, "the Read", |w| done(&w.client, 1));
    assert_eq!(completions(&w.client), [(1, Status::Success)]);
    assert_eq!(read(&w.client, sink, 0, READ), data);
    assert!(
        !done(&w.server, 77),
        "the Read Response waited for the whole bulk write"
    );
    wait(&mut w, "the bulk write", |w| done(&w.server, 77));
    assert_eq!(completions(&w.server), [(77, Status::Success)]);
}

/// RFC 5040 §6.1: with an ORD of 0 (ours, or the peer's IRD) no Read may ever be
/// outstanding. Posting one is refused at once instead of waiting forever; Writes still go.
#[test]
fn rfc5040_6_1_a_read_with_an_ord_of_0_is_refused_when_posted() {
    for (client, server) in [
        (RdmaLimits { ird: 4, ord: 0 }, RdmaLimits { ird: 4, ord: 4 }),
        (RdmaLimits { ird: 4, ord: 4 }, RdmaLimits { ird: 0, ord: 4 }),
    ] {
        let mut w = World::perfect(1500);
        w.establish();
        let (cpd, spd) = open_rdmap(&mut w, client, server);
        assert_eq!(w.client.conn().rdma_status(S).unwrap().ord, 0);
        let access = Access::REMOTE_READ | Access::REMOTE_WRITE;
        let (dst, src_reg) = region(&mut w.server, spd, 4096, access, None);
        let (_, sink_reg) = region(&mut w.client, cpd, 4096, Access::LOCAL_WRITE, None);
        let r = rdma(
            &mut w.client,
            1,
            read_op(src_reg.stag, 0, sink_reg.stag, 0, 64),
            Payload::Bytes(Vec::new()),
        );
        assert_eq!(r, Err(PostError::NoOrd), "{client:?} / {server:?}");
        let write = RdmaOp::Write {
            stag: src_reg.stag,
            to: BASE,
        };
        rdma(&mut w.client, 2, write, Payload::Bytes(pattern(64, 5))).unwrap();
        wait(&mut w, "the Write", |w| done(&w.client, 2));
        assert_eq!(completions(&w.client), [(2, Status::Success)]);
        assert_eq!(read(&w.server, dst, 0, 64), pattern(64, 5));
    }
}

/// RFC 5040 §6.1: a Read is bounded by the peer's IRD, which its Accept brings. Posted before
/// it, a Read is refused (an IRD of 0 would have held it forever); after it, it goes.
#[test]
fn rfc5040_6_1_a_read_waits_for_the_peers_ird_before_it_is_posted() {
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, spd) = (w.client.memory.alloc_pd(), w.server.memory.alloc_pd());
    let (_, sink_reg) = region(&mut w.client, cpd, 4096, Access::LOCAL_WRITE, None);
    w.client
        .conn()
        .initiate_rdmap(S, cpd, RdmaLimits::default(), b"")
        .unwrap();
    let read = |stag| read_op(stag, 0, sink_reg.stag, 0, 64);
    assert_eq!(
        rdma(&mut w.client, 1, read(Stag(1)), Payload::Bytes(Vec::new())),
        Err(PostError::Session(
            ddpdk_control::session::LocalError::NotEstablished
        ))
    );
    wait(&mut w, "the Initiate", |w| {
        session_events(&w.server, S)
            .iter()
            .any(|e| matches!(e, Event::InitiateReceived { .. }))
    });
    w.server
        .conn()
        .accept_rdmap(S, spd, RdmaLimits { ird: 0, ord: 4 }, b"")
        .unwrap();
    wait(&mut w, "the Accept", |w| {
        session_events(&w.client, S)
            .iter()
            .any(|e| matches!(e, Event::Accepted { .. }))
    });
    assert_eq!(
        rdma(&mut w.client, 2, read(Stag(1)), Payload::Bytes(Vec::new())),
        Err(PostError::NoOrd)
    );
    assert!(w.client.completions.is_empty());
}

/// After its session ends, an RDMAP stream refuses every operation as over (it used to say
/// "not accepted yet" for a Read or an Atomic, whose sink it looked up first).
#[test]
fn rdma_operations_after_the_session_ended_are_refused_as_terminated() {
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, spd) = open_rdmap(&mut w, RdmaLimits::default(), RdmaLimits::default());
    let access = Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
    let (_, src_reg) = region(&mut w.server, spd, 4096, access, None);
    let (_, sink_reg) = region(&mut w.client, cpd, 4096, Access::LOCAL_WRITE, None);
    w.client.conn().terminate(S).unwrap();
    wait(&mut w, "the end", |w| {
        matches!(w.client.conn().session_state(S), Some(State::Terminated(_)))
    });
    let ops = [
        read_op(src_reg.stag, 0, sink_reg.stag, 0, 64),
        RdmaOp::Atomic {
            op: AtomicOperation::FetchAdd { add: 1, mask: 0 },
            stag: src_reg.stag,
            to: BASE,
            sink: sink_reg.stag,
            sink_to: BASE,
        },
        RdmaOp::Write {
            stag: src_reg.stag,
            to: BASE,
        },
    ];
    for (i, op) in ops.into_iter().enumerate() {
        let r = rdma(&mut w.client, i as u64, op, Payload::Bytes(vec![1; 8]));
        assert_eq!(
            r,
            Err(PostError::Session(
                ddpdk_control::session::LocalError::Terminated
            )),
            "operation {i}"
        );
    }
}

/// A zero-copy Write's completion gives the ULP its buffer back (RFC 4296 §3.2; RFC 5041
/// §5.4), a Flushed one too: SCTP reads the buffer as the Write's segments leave, so the
/// completion of a Write its stream's failure cut short waits until none of them can be
/// transmitted or retransmitted any more, and nothing the ULP writes into its buffer after the
/// completion reaches the peer. Here the server writes through an STag the client never
/// registered (RFC 5040 §7: the client's stream fails) while the client's Write is under way:
/// all of it in SCTP's queue (64 KiB), or cut short (1 MiB: SCTP's 256 slots hold a third).
/// The completion came at the session's end, and 252 720 bytes of 0xEE written after it were
/// placed at the server (an independent review).
#[test]
fn a_flushed_zero_copy_write_sends_nothing_written_after_its_completion() {
    for len in [1usize << 16, 1 << 20] {
        let mut w = World::perfect(1500);
        w.establish();
        let (cpd, spd) = open_rdmap(&mut w, RdmaLimits::default(), RdmaLimits::default());
        let (src, src_reg) = region(&mut w.client, cpd, len, Access::LOCAL_WRITE, None);
        w.client
            .memory
            .region(src)
            .unwrap()
            .place(0, &vec![0x11; len])
            .unwrap();
        let (dst, dst_reg) = region(&mut w.server, spd, len, Access::REMOTE_WRITE, None);
        let (_, bad_src) = region(&mut w.server, spd, 4096, Access::LOCAL_WRITE, None);
        let write = |stag, to| RdmaOp::Write { stag, to };
        let local = |stag, len| Payload::Local {
            stag,
            to: BASE,
            len,
        };
        rdma(
            &mut w.client,
            1,
            write(dst_reg.stag, BASE),
            local(src_reg.stag, len as u32),
        )
        .unwrap();
        rdma(
            &mut w.server,
            9,
            write(Stag(0x00de_ad01), 0),
            local(bad_src.stag, 64),
        )
        .unwrap();
        wait(&mut w, "the Write's completion", |w| done(&w.client, 1));
        assert_eq!(completions(&w.client), [(1, Status::Flushed)], "{len}");
        // The ULP has its buffer back: it reuses it.
        w.client
            .memory
            .region(src)
            .unwrap()
            .place(0, &vec![0xEE; len])
            .unwrap();
        w.run_for(std::time::Duration::from_secs(30));
        let placed = read(&w.server, dst, 0, len);
        let reused = placed.iter().filter(|&&b| b == 0xEE).count();
        assert!(placed.contains(&0x11), "{len}: the Write was under way");
        assert_eq!(
            reused, 0,
            "{len}: bytes written into the buffer after the Write's completion reached the peer"
        );
    }
}

/// A plain DDP Initiate (no RDMAP parameters) cannot be accepted as an RDMAP stream.
#[test]
fn accept_rdmap_needs_an_rdmap_initiate() {
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, spd) = (w.client.memory.alloc_pd(), w.server.memory.alloc_pd());
    w.client.conn().initiate(S, cpd, b"plain").unwrap();
    wait(&mut w, "the Initiate", |w| {
        session_events(&w.server, S)
            .iter()
            .any(|e| matches!(e, Event::InitiateReceived { .. }))
    });
    assert_eq!(
        w.server
            .conn()
            .accept_rdmap(S, spd, RdmaLimits::default(), b""),
        Err(PostError::PeerNotRdmap)
    );
}

/// An RDMAP Initiate accepted by a plain DDP ULP: the Accept has no RDMAP parameters, so the
/// initiator ends the session before any RDMAP message leaves.
#[test]
fn an_rdmap_stream_accepted_without_parameters_is_ended() {
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, spd) = (w.client.memory.alloc_pd(), w.server.memory.alloc_pd());
    w.client
        .conn()
        .initiate_rdmap(S, cpd, RdmaLimits::default(), b"")
        .unwrap();
    wait(&mut w, "the Initiate", |w| {
        session_events(&w.server, S)
            .iter()
            .any(|e| matches!(e, Event::InitiateReceived { .. }))
    });
    w.server.conn().accept(S, spd, b"plain").unwrap();
    wait(&mut w, "the end", |w| {
        matches!(
            w.client.conn().session_state(S),
            Some(State::Terminated(TerminationReason::LocalTerminate))
        )
    });
    assert_eq!(w.client.conn().stats().rdmap_refused, 1);
}

/// A Read whose Data Source check fails at the responder: what the requester's ULP and each
/// side's session see, and that the sink is untouched.
struct Refused {
    terminate: TerminateError,
    server_error: RxError,
    read_status: Status,
    sink_untouched: bool,
}

fn refused_read(access: Access, op: impl Fn(Stag, Stag) -> RdmaOp) -> Refused {
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, spd) = open_rdmap(&mut w, RdmaLimits::default(), RdmaLimits::default());
    let (src, src_reg) = region(&mut w.server, spd, 1 << 16, access, None);
    w.server
        .memory
        .region(src)
        .unwrap()
        .place(0, &[0xab; 1 << 16])
        .unwrap();
    let (sink, sink_reg) = region(&mut w.client, cpd, 1 << 16, Access::LOCAL_WRITE, None);
    rdma(
        &mut w.client,
        5,
        op(src_reg.stag, sink_reg.stag),
        Payload::Bytes(Vec::new()),
    )
    .unwrap();
    wait(&mut w, "the Terminate and the flushed Read", |w| {
        done(&w.client, 5)
            && w.client
                .indications
                .iter()
                .any(|i| matches!(i, Indication::RdmapTerminate { .. }))
    });
    wait(&mut w, "both sessions ended", |w| {
        matches!(w.client.conn().session_state(S), Some(State::Terminated(_)))
            && matches!(w.server.conn().session_state(S), Some(State::Terminated(_)))
    });
    let terminate = w
        .client
        .indications
        .iter()
        .find_map(|i| match i {
            Indication::RdmapTerminate { error, .. } => Some(*error),
            _ => None,
        })
        .unwrap();
    let server_error = w
        .server
        .indications
        .iter()
        .find_map(|i| match i {
            Indication::Error { error, .. } => Some(*error),
            _ => None,
        })
        .unwrap();
    assert_eq!(w.server.conn().stats().rdmap_terminates_sent, 1);
    assert_eq!(w.client.conn().stats().rdmap_terminates_received, 1);
    assert_eq!(
        w.server.conn().session_state(S),
        Some(State::Terminated(TerminationReason::ReceiveError(
            server_error
        ))),
        "the responder ends the DDP session after its Terminate, for the error it found"
    );
    Refused {
        terminate,
        server_error,
        read_status: w.client.completions[0].status,
        sink_untouched: read(&w.client, sink, 0, 1 << 16) == vec![0; 1 << 16],
    }
}

fn assert_refused(r: Refused, want: RdmapError) {
    assert_eq!(r.terminate, TerminateError::Rdmap(want));
    assert_eq!(r.server_error, RxError::Rdmap(want));
    assert_eq!(r.read_status, Status::Flushed);
    assert!(r.sink_untouched, "no byte placed");
}

/// RFC 5040 §4.8 0x1/0x02: a Data Source without remote read.
#[test]
fn rfc5040_4_8_read_without_remote_read_right_is_access_rights() {
    let r = refused_read(Access::REMOTE_WRITE, |src, sink| {
        read_op(src, 0, sink, 0, 100)
    });
    assert_refused(r, RdmapError::AccessRights);
}

/// RFC 5040 §4.8 0x1/0x00: a Data Source STag that names nothing.
#[test]
fn rfc5040_4_8_read_of_an_unknown_stag_is_invalid_stag() {
    let r = refused_read(Access::REMOTE_READ, |src, sink| {
        read_op(Stag(src.0 ^ 0x0100), 0, sink, 0, 100)
    });
    assert_refused(r, RdmapError::InvalidStag);
}

/// RFC 5040 §4.8 0x1/0x01: a range past the end of the Data Source.
#[test]
fn rfc5040_4_8_read_past_the_source_is_base_or_bounds() {
    let r = refused_read(Access::REMOTE_READ, |src, sink| {
        read_op(src, (1 << 16) - 10, sink, 0, 100)
    });
    assert_refused(r, RdmapError::BaseOrBounds);
}

/// RFC 5041 §7.1 check 5, knowable at the requester: a Read whose Data Source range (TO +
/// size) passes 2^64 is refused at post with `Tx(ToWrap)`, as an RDMA Write's is, nothing
/// sent: on the wire the responder must refuse it with TO Wrap (RFC 5040 §4.8 0x1/0x04, its
/// check is `rfc5040_4_8_a_read_request_whose_source_wraps_is_to_wrap`) and end the whole
/// stream. It used to be sent.
#[test]
fn rfc5041_7_1_a_read_whose_source_wraps_is_refused_at_post() {
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, _) = open_rdmap(&mut w, RdmaLimits::default(), RdmaLimits::default());
    let (sink, sink_reg) = region(&mut w.client, cpd, 4096, Access::LOCAL_WRITE, None);
    let sent = w.client.conn().stats().messages_sent;
    assert_eq!(
        rdma(
            &mut w.client,
            5,
            RdmaOp::Read {
                source: Stag(0x0011_2201),
                source_to: u64::MAX - 10,
                sink: sink_reg.stag,
                sink_to: BASE,
                len: 100,
            },
            Payload::Bytes(Vec::new()),
        ),
        Err(PostError::Tx(ddpdk_dataplane::ddp::TxError::ToWrap))
    );
    w.run_for(std::time::Duration::from_millis(50));
    assert_eq!(w.client.conn().stats().messages_sent, sent, "nothing sent");
    assert_eq!(w.client.conn().rdma_status(S).unwrap().outstanding_reads, 0);
    assert_eq!(w.server.conn().stats().rdmap_terminates_sent, 0);
    assert!(completions(&w.client).is_empty());
    assert_eq!(
        w.client.conn().session_state(S),
        Some(State::Established),
        "the stream goes on"
    );
    assert_eq!(read(&w.client, sink, 0, 4096), vec![0; 4096]);
}

/// RFC 5040 §4.8 0x1/0x03: a Data Source of another protection domain.
#[test]
fn rfc5040_4_8_read_of_another_domains_stag_is_not_associated() {
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, spd) = open_rdmap(&mut w, RdmaLimits::default(), RdmaLimits::default());
    let other = w.server.memory.alloc_pd();
    assert_ne!(other, spd);
    let (_, src_reg) = region(&mut w.server, other, 4096, Access::REMOTE_READ, None);
    let (sink, sink_reg) = region(&mut w.client, cpd, 4096, Access::LOCAL_WRITE, None);
    rdma(
        &mut w.client,
        5,
        read_op(src_reg.stag, 0, sink_reg.stag, 0, 100),
        Payload::Bytes(Vec::new()),
    )
    .unwrap();
    wait(&mut w, "the Terminate", |w| {
        w.client
            .indications
            .iter()
            .any(|i| matches!(i, Indication::RdmapTerminate { .. }))
    });
    assert!(w.client.indications.iter().any(|i| matches!(
        i,
        Indication::RdmapTerminate {
            error: TerminateError::Rdmap(RdmapError::StagNotAssociated),
            ..
        }
    )));
    assert_eq!(read(&w.client, sink, 0, 4096), vec![0; 4096]);
}

/// A Read's Data Sink is checked when posted, as a verbs provider checks an lkey: it must be
/// this stream's domain and grant local write.
#[test]
fn a_read_into_a_sink_without_local_write_is_refused_when_posted() {
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, spd) = open_rdmap(&mut w, RdmaLimits::default(), RdmaLimits::default());
    let (_, src_reg) = region(&mut w.server, spd, 4096, Access::REMOTE_READ, None);
    let (_, ro) = region(&mut w.client, cpd, 4096, Access::REMOTE_READ, None);
    assert_eq!(
        rdma(
            &mut w.client,
            1,
            read_op(src_reg.stag, 0, ro.stag, 0, 100),
            Payload::Bytes(Vec::new())
        ),
        Err(PostError::BadSink)
    );
    // Plain DDP operations are not RDMAP's: refused on an RDMAP stream.
    let req = world::tagged(2, S, src_reg.stag, 0, vec![1]);
    assert_eq!(w.client.conn().post_send(req), Err(PostError::NotRdmap));
}

/// RFC 5040 §5.5: a stream's work completes in the order it was posted. A Read finishes when
/// its response has arrived, a Write when SCTP acknowledges it, so a Write posted after a
/// large Read finishes first; its completion still comes after the Read's. An unsignaled
/// Write in between is never reported, and holds nothing up.
#[test]
fn rfc5040_5_5_completions_come_in_posting_order() {
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, spd) = open_rdmap(&mut w, RdmaLimits::default(), RdmaLimits::default());
    let (_, src_reg) = region(&mut w.server, spd, 1 << 20, Access::REMOTE_READ, None);
    let (_, dst_reg) = region(&mut w.server, spd, 4096, Access::REMOTE_WRITE, None);
    let (_, sink_reg) = region(&mut w.client, cpd, 1 << 20, Access::LOCAL_WRITE, None);
    rdma(
        &mut w.client,
        1,
        read_op(src_reg.stag, 0, sink_reg.stag, 0, 1 << 20),
        Payload::Bytes(Vec::new()),
    )
    .unwrap();
    let write = |wr_id| RdmaRequest {
        wr_id,
        stream: S,
        op: RdmaOp::Write {
            stag: dst_reg.stag,
            to: BASE,
        },
        data: Payload::Bytes(vec![9; 64]),
        signaled: wr_id != 2,
    };
    for wr_id in [2, 3] {
        let Side { conn, memory, .. } = &mut w.client;
        conn.as_mut()
            .unwrap()
            .post_rdma(write(wr_id), memory.stags())
            .unwrap();
    }
    wait(&mut w, "the Read and the Writes", |w| done(&w.client, 3));
    assert_eq!(
        completions(&w.client),
        [(1, Status::Success), (3, Status::Success)]
    );
}

/// RFC 5040 §5.5 for a ULP that posts unsignaled work: an unsignaled Write that succeeds is
/// never reported, so a Mark posted after it is how the ULP learns it is over. A Mark
/// completes, reported though nothing asked for a signal, once everything posted before it
/// has: at once on an idle stream, after a Read whose response takes a while, and at once on
/// a stream whose session ended (its work was flushed then). Nothing goes on the wire.
#[test]
fn rfc5040_5_5_a_mark_completes_once_the_work_posted_before_it_has() {
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, spd) = open_rdmap(&mut w, RdmaLimits::default(), RdmaLimits::default());
    let (_, src_reg) = region(&mut w.server, spd, 1 << 20, Access::REMOTE_READ, None);
    let (_, dst_reg) = region(&mut w.server, spd, 4096, Access::REMOTE_WRITE, None);
    let (_, sink_reg) = region(&mut w.client, cpd, 1 << 20, Access::LOCAL_WRITE, None);
    let post = |w: &mut World, wr_id, op, signaled| {
        let req = RdmaRequest {
            wr_id,
            stream: S,
            op,
            data: Payload::Bytes(vec![9; 64]),
            signaled,
        };
        let Side { conn, memory, .. } = &mut w.client;
        conn.as_mut().unwrap().post_rdma(req, memory.stags())
    };
    let sent = w.client.conn().stats().segments_sent;
    post(&mut w, 10, RdmaOp::Mark, false).unwrap();
    let now: Vec<_> = std::iter::from_fn(|| w.client.conn().poll_completion())
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(now, [(10, Status::Success)], "nothing waits: at once");
    assert_eq!(w.client.conn().stats().segments_sent, sent, "nothing sent");

    let read = read_op(src_reg.stag, 0, sink_reg.stag, 0, 1 << 20);
    post(&mut w, 1, read, true).unwrap();
    let write = RdmaOp::Write {
        stag: dst_reg.stag,
        to: BASE,
    };
    post(&mut w, 2, write, false).unwrap();
    post(&mut w, 3, RdmaOp::Mark, false).unwrap();
    w.step();
    assert!(!done(&w.client, 3), "the Read is not over yet");
    wait(&mut w, "the mark", |w| done(&w.client, 3));
    assert_eq!(
        completions(&w.client),
        [(1, Status::Success), (3, Status::Success)],
        "the unsignaled Write silently; the mark behind it"
    );

    w.client.conn().terminate(S).unwrap();
    wait(&mut w, "the end", |w| {
        matches!(w.client.conn().session_state(S), Some(State::Terminated(_)))
    });
    post(&mut w, 4, RdmaOp::Mark, false).unwrap();
    wait(&mut w, "the mark after the end", |w| done(&w.client, 4));
    assert_eq!(completions(&w.client).last(), Some(&(4, Status::Success)));
}

// ------------------------------------------------------------------------------------------
// RFC 7306: Atomic Operations and Immediate Data between two connections.
// ------------------------------------------------------------------------------------------

/// The server's 64-bit word at `offset` of `r`, in this machine's byte order.
fn word(side: &Side, r: RegionId, offset: u64) -> u64 {
    let b = read(side, r, offset, 8);
    u64::from_ne_bytes(b.try_into().unwrap())
}

/// Runs `op` on the server's word at offset 64 of its atomic region, the original value going
/// to offset `8 * wr_id` of the client's sink, and returns the completion's status.
fn atomic(w: &mut World, wr_id: u64, op: AtomicOperation, stag: Stag, sink: Stag) -> Status {
    rdma(
        &mut w.client,
        wr_id,
        RdmaOp::Atomic {
            op,
            stag,
            to: BASE + 64,
            sink,
            sink_to: BASE + 8 * wr_id,
        },
        Payload::Bytes(Vec::new()),
    )
    .unwrap();
    wait(w, "the Atomic", |w| done(&w.client, wr_id));
    w.client
        .completions
        .iter()
        .find(|c| c.wr_id == wr_id)
        .unwrap()
        .status
}

struct Atomics {
    w: World,
    word: RegionId,
    stag: Stag,
    sink: RegionId,
    sink_stag: Stag,
    cpd: Pd,
}

fn atomics(initial: u64) -> Atomics {
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, spd) = open_rdmap(&mut w, RdmaLimits::default(), RdmaLimits::default());
    let (word, reg) = region(&mut w.server, spd, 4096, Access::REMOTE_ATOMIC, None);
    w.server
        .memory
        .region(word)
        .unwrap()
        .place(64, &initial.to_ne_bytes())
        .unwrap();
    let (sink, sink_reg) = region(&mut w.client, cpd, 4096, Access::LOCAL_WRITE, None);
    Atomics {
        w,
        word,
        stag: reg.stag,
        sink,
        sink_stag: sink_reg.stag,
        cpd,
    }
}

/// RFC 7306 §5.1.1: FetchAdd returns the word's original value to the requester's sink and
/// adds, field by field under the Add Mask (a carry out of a field's top bit is discarded;
/// mask 0 is one 64-bit add); the responder's ULP is not involved (§5.2.1 item 3).
#[test]
fn rfc7306_5_1_1_fetch_add_returns_the_original_and_adds_by_fields() {
    let mut a = atomics(40);
    let add = |add, mask| AtomicOperation::FetchAdd { add, mask };
    let st = atomic(&mut a.w, 1, add(5, 0), a.stag, a.sink_stag);
    assert_eq!(st, Status::Success);
    assert_eq!(word(&a.w.client, a.sink, 8), 40, "the original value");
    assert_eq!(word(&a.w.server, a.word, 64), 45);
    // Two 32-bit fields: the high one wraps without carrying into anything.
    a.w.server
        .memory
        .region(a.word)
        .unwrap()
        .place(64, &0xffff_ffff_0000_0001u64.to_ne_bytes())
        .unwrap();
    let two_fields = 0x8000_0000_8000_0000;
    atomic(
        &mut a.w,
        2,
        add(0x1_0000_0001, two_fields),
        a.stag,
        a.sink_stag,
    );
    assert_eq!(word(&a.w.client, a.sink, 16), 0xffff_ffff_0000_0001);
    assert_eq!(word(&a.w.server, a.word, 64), 0x0000_0000_0000_0002);
    assert_eq!(a.w.server.conn().stats().atomics_served, 2);
    assert_eq!(a.w.client.conn().stats().atomics_completed, 2);
    assert!(
        a.w.server.completions.is_empty()
            && a.w
                .server
                .indications
                .iter()
                .all(|i| !matches!(i, Indication::Received { .. })),
        "the responder's ULP hears nothing of an Atomic"
    );
}

/// RFC 7306 §5.1.2: CmpSwap swaps the Swap Mask's bits in only when the word matches the
/// Compare Data under the Compare Mask, and returns the original value either way.
#[test]
fn rfc7306_5_1_2_cmp_swap_swaps_only_when_the_masked_compare_matches() {
    let mut a = atomics(0x1234);
    let cas = |compare, compare_mask, swap, swap_mask| AtomicOperation::CmpSwap {
        compare,
        compare_mask,
        swap,
        swap_mask,
    };
    atomic(
        &mut a.w,
        1,
        cas(0x1234, !0, 0x9999, !0),
        a.stag,
        a.sink_stag,
    );
    assert_eq!(word(&a.w.client, a.sink, 8), 0x1234);
    assert_eq!(word(&a.w.server, a.word, 64), 0x9999, "matched: swapped");
    atomic(
        &mut a.w,
        2,
        cas(0x1234, !0, 0x5555, !0),
        a.stag,
        a.sink_stag,
    );
    assert_eq!(word(&a.w.client, a.sink, 16), 0x9999);
    assert_eq!(word(&a.w.server, a.word, 64), 0x9999, "no match: unchanged");
    // Only the low byte compared, only the second byte swapped.
    atomic(
        &mut a.w,
        3,
        cas(0x0099, 0xff, 0xab00, 0xff00),
        a.stag,
        a.sink_stag,
    );
    assert_eq!(word(&a.w.client, a.sink, 24), 0x9999);
    assert_eq!(word(&a.w.server, a.word, 64), 0xab99);
}

/// RFC 7306 §5.2: Atomic Requests share ORD/IRD with RDMA Reads: never more of both together
/// outstanding than the peer's IRD, and every work request completes in posting order (RFC
/// 5040 §5.5), the Atomics' values and the Reads' bytes where they belong.
#[test]
fn rfc7306_5_2_atomics_share_ord_with_reads() {
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, spd) = open_rdmap(
        &mut w,
        RdmaLimits { ird: 4, ord: 16 },
        RdmaLimits { ird: 2, ord: 1 },
    );
    let (src, src_reg) = region(
        &mut w.server,
        spd,
        1 << 20,
        Access::REMOTE_READ | Access::REMOTE_ATOMIC,
        None,
    );
    let data = pattern(200_000, 3);
    w.server
        .memory
        .region(src)
        .unwrap()
        .place(4096, &data)
        .unwrap();
    let (sink, sink_reg) = region(&mut w.client, cpd, 1 << 20, Access::LOCAL_WRITE, None);
    for i in 0..8u64 {
        let op = if i % 2 == 0 {
            read_op(
                src_reg.stag,
                4096 + i * 25_000,
                sink_reg.stag,
                4096 + i * 25_000,
                25_000,
            )
        } else {
            RdmaOp::Atomic {
                op: AtomicOperation::FetchAdd { add: 1, mask: 0 },
                stag: src_reg.stag,
                to: BASE,
                sink: sink_reg.stag,
                sink_to: BASE + 8 * i,
            }
        };
        rdma(&mut w.client, i, op, Payload::Bytes(Vec::new())).unwrap();
    }
    let mut most = 0;
    wait(&mut w, "four Reads and four Atomics", |w| {
        let c = w.client.conn().rdma_status(S).unwrap();
        let s = w.server.conn().rdma_status(S).unwrap().serving;
        most = most
            .max(c.outstanding_reads + c.outstanding_atomics)
            .max(usize::from(s));
        w.client.completions.len() == 8
    });
    assert_eq!(
        most, 2,
        "never more than the server's IRD, Reads and Atomics together"
    );
    let order: Vec<u64> = w.client.completions.iter().map(|c| c.wr_id).collect();
    assert_eq!(order, [0, 1, 2, 3, 4, 5, 6, 7]);
    let originals: Vec<u64> = [1u64, 3, 5, 7]
        .iter()
        .map(|i| word(&w.client, sink, 8 * i))
        .collect();
    assert_eq!(
        originals,
        [0, 1, 2, 3],
        "performed in order, one after the other"
    );
    assert_eq!(word(&w.server, src, 0), 4);
    for i in (0..8u64).step_by(2) {
        let at = 4096 + i * 25_000;
        let want = &data[(i * 25_000) as usize..((i + 1) * 25_000) as usize];
        assert_eq!(read(&w.client, sink, at, 25_000), want);
    }
}

/// Posting an Atomic checks what this side can: the sink must be a writable registration of the
/// stream's domain with room for the 8-byte value. Nothing is sent.
#[test]
fn an_atomic_is_refused_when_posted_if_its_sink_is_bad() {
    let mut a = atomics(0);
    let op = AtomicOperation::FetchAdd { add: 1, mask: 0 };
    let post = |w: &mut World, to, sink, sink_to| {
        rdma(
            &mut w.client,
            1,
            RdmaOp::Atomic {
                op,
                stag: a.stag,
                to,
                sink,
                sink_to,
            },
            Payload::Bytes(Vec::new()),
        )
    };
    assert_eq!(
        post(&mut a.w, BASE, a.sink_stag, BASE + 4090),
        Err(PostError::BadSink),
        "no room for 8 bytes"
    );
    let cpd = a.cpd;
    let (_, ro) = region(&mut a.w.client, cpd, 4096, Access::REMOTE_READ, None);
    assert_eq!(
        post(&mut a.w, BASE, ro.stag, BASE),
        Err(PostError::BadSink),
        "no local write"
    );
    a.w.run_for(std::time::Duration::from_millis(50));
    assert_eq!(word(&a.w.server, a.word, 64), 0, "nothing performed");
    assert_eq!(a.w.server.conn().stats().atomics_served, 0);
}

/// RFC 7306 §6: Immediate Data puts its 8 bytes into the peer's next posted receive and
/// completes there as a Send does (§6.4), its kind (with or without Solicited Event) in the
/// RsvdULP; at the source it completes when acknowledged.
#[test]
fn rfc7306_6_immediate_data_completes_a_posted_receive() {
    let mut w = World::perfect(1500);
    w.establish();
    let (_, spd) = open_rdmap(&mut w, RdmaLimits::default(), RdmaLimits::default());
    let (rbuf, rreg) = region(&mut w.server, spd, 1 << 16, Access::LOCAL_WRITE, None);
    world::post_receives(&mut w.server, S, spd, rreg.stag, 1024, 2, 100);
    for (i, solicited) in [false, true].into_iter().enumerate() {
        let data = (0x0102_0304_0506_0708u64 + i as u64).to_be_bytes();
        let op = RdmaOp::ImmediateData { data, solicited };
        rdma(&mut w.client, i as u64, op, Payload::Bytes(Vec::new())).unwrap();
    }
    wait(&mut w, "two Immediate Data", |w| {
        w.client.completions.len() == 2
            && w.server
                .indications
                .iter()
                .filter(|i| matches!(i, Indication::Received { .. }))
                .count()
                == 2
    });
    assert_eq!(
        completions(&w.client),
        [(0, Status::Success), (1, Status::Success)]
    );
    assert_eq!(
        world::received(&w.server.indications),
        [
            (100, 8, Opcode::ImmediateData),
            (101, 8, Opcode::ImmediateDataSe)
        ]
    );
    assert_eq!(
        read(&w.server, rbuf, 0, 8),
        0x0102_0304_0506_0708u64.to_be_bytes()
    );
    assert_eq!(
        read(&w.server, rbuf, 1024, 8),
        0x0102_0304_0506_0709u64.to_be_bytes()
    );
}

/// RFC 7306 §8.2 end to end: the requester cannot know the address its Tagged Offset names
/// (§5.2.1), so a misaligned Atomic goes out; the responder refuses it with Remote Operation
/// Error "Catastrophic error, localized to RDMAP Stream" (0x2/0x07) and leaves its memory as it
/// was (§5.1.1), and the requester's Atomic completes in error as its stream ends.
#[test]
fn rfc7306_8_2_a_misaligned_atomic_ends_the_stream_and_modifies_nothing() {
    let mut a = atomics(0x0102_0304_0506_0708);
    rdma(
        &mut a.w.client,
        1,
        RdmaOp::Atomic {
            op: AtomicOperation::FetchAdd { add: 1, mask: 0 },
            stag: a.stag,
            to: BASE + 60,
            sink: a.sink_stag,
            sink_to: BASE,
        },
        Payload::Bytes(Vec::new()),
    )
    .unwrap();
    wait(&mut a.w, "the Atomic's end", |w| done(&w.client, 1));
    assert_eq!(completions(&a.w.client), [(1, Status::Flushed)]);
    assert!(
        a.w.client.indications.iter().any(|i| matches!(
            i,
            Indication::RdmapTerminate {
                error: TerminateError::Rdmap(RdmapError::CatastrophicStream),
                ..
            }
        )),
        "the responder's Terminate: {:?}",
        a.w.client.indications
    );
    let mut want = vec![0u8; 8];
    want.extend_from_slice(&0x0102_0304_0506_0708u64.to_ne_bytes());
    assert_eq!(read(&a.w.server, a.word, 56, 16), want, "nothing modified");
    assert_eq!(a.w.server.conn().stats().atomics_served, 0);
}
