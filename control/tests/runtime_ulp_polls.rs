//! `DataCore::set_ulp_polls`: a core polled by the ULP's own thread (an inline core, as
//! `ddpdk --lcores 0@N` runs one) hands the ULP a completion before it transmits what the same
//! burst called for, and the SACK owed for the packet that completed it (a Read Response
//! carries RFC 7053's I bit) rides on the ULP's next packet (RFC 9260 §6: SACK bundled with
//! DATA) or leaves at the start of the next turn. A SACK the peer's own completion waits for
//! (a tagged write's) is never held for the ULP.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
use rt::{rdmap_session, runtime, tagged, Lockstep, PORT};

use std::net::{IpAddr, Ipv4Addr};

use ddpdk_control::conn::{Indication, Payload, RdmaOp, RdmaRequest, Status};
use ddpdk_control::memory::{MemoryRegistration, RegionId, Registered};
use ddpdk_control::rdmap::RdmaLimits;
use ddpdk_control::runtime::{DataCore, Event, Op, RuntimeConfig};
use ddpdk_dataplane::mem::Access;
use ddpdk_dataplane::port::mem::{pair, MemPort};
use ddpdk_dataplane::sctp::CloseReason;

const A4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const TO: u64 = 0x10_0000;
const LEN: u32 = 100;

/// An RDMAP stream from `a` to `b`; `b` exposes a region for remote reads, `a` a sink for
/// their responses. Both ends' cores have `ulp_polls` as given.
fn open_rdmap(ulp_polls: bool) -> (Lockstep<MemPort>, Registered, Registered, RegionId) {
    let (pa, pb) = pair(2, 1024);
    let cfg = RuntimeConfig::default();
    let mut a = runtime(pa, A4, None, 1, cfg);
    let mut b = runtime(pb, B4, None, 2, cfg);
    let apd = a.0.memory_mut().alloc_pd();
    let bpd = b.0.memory_mut().alloc_pd();
    let m = b.0.memory_mut();
    let src = m.alloc_region(1 << 16).unwrap();
    let bytes: Vec<u8> = (0..1u32 << 16).map(|i| (i % 251) as u8).collect();
    m.region(src).unwrap().place(0, &bytes).unwrap();
    let source = m
        .register(registration(bpd, src, Access::REMOTE_READ))
        .unwrap();
    let m = a.0.memory_mut();
    let dst = m.alloc_region(1 << 16).unwrap();
    let sink = m
        .register(registration(apd, dst, Access::LOCAL_WRITE))
        .unwrap();
    for k in a.1.iter_mut().chain(b.1.iter_mut()) {
        k.set_ulp_polls(ulp_polls);
    }
    let limits = RdmaLimits { ird: 4, ord: 4 };
    let (open, accept) = rdmap_session(apd, limits, bpd, limits);
    let mut l = Lockstep::open_with(a, b, IpAddr::V4(B4), PORT, open, vec![accept]);
    l.run_until_quiet();
    (l, source, sink, dst)
}

fn registration(
    pd: ddpdk_dataplane::mem::Pd,
    region: RegionId,
    access: Access,
) -> MemoryRegistration {
    MemoryRegistration {
        pd,
        region,
        offset: 0,
        len: 1 << 16,
        access,
        stream: None,
        to_base: TO,
    }
}

/// RDMA Read `wr_id` (RFC 5040 §5.2) of LEN bytes at `wr_id * LEN` of the source into the sink.
fn read(wr_id: u64, source: &Registered, sink: &Registered) -> Op {
    Op::PostRdma(RdmaRequest {
        wr_id,
        stream: 1,
        op: RdmaOp::Read {
            source: source.stag,
            source_to: TO + wr_id * u64::from(LEN),
            sink: sink.stag,
            sink_to: TO + wr_id * u64::from(LEN),
            len: LEN,
        },
        data: Payload::Bytes(Vec::new()),
        signaled: true,
    })
}

fn frames_out(k: &DataCore<MemPort>) -> u64 {
    k.stats().tx.frames_out
}

/// The SCTP counters of the one association on `k`.
fn sctp(k: &DataCore<MemPort>) -> ddpdk_dataplane::sctp::Stats {
    k.report().assocs[0].sctp
}

/// One turn of the client's core, and the events its control side then has for the ULP.
fn client_turn(l: &mut Lockstep<MemPort>) -> Vec<Event> {
    l.ka[0].poll(l.now);
    l.ca.poll(l.now);
    std::iter::from_fn(|| l.ca.poll_event()).collect()
}

fn completed(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Completion { completion, .. } if completion.status == Status::Success => {
                Some(completion.wr_id)
            }
            _ => None,
        })
        .collect()
}

/// Reads `wr_id` once the server has answered it: posted inline, the server's core turned.
fn read_answered(l: &mut Lockstep<MemPort>, wr_id: u64, source: &Registered, sink: &Registered) {
    let sent = frames_out(&l.ka[0]);
    let served = frames_out(&l.kb[0]);
    l.ca.submit_inline(l.conn, read(wr_id, source, sink), &mut l.ka, l.now)
        .unwrap();
    assert_eq!(
        frames_out(&l.ka[0]),
        sent + 1,
        "the Read Request left at once"
    );
    l.kb[0].poll(l.now);
    // The responder's core owes its ULP nothing for a Read (RFC 5040 §5.2): the Read
    // Response leaves within the turn, ulp_polls or not.
    assert_eq!(
        frames_out(&l.kb[0]),
        served + 1,
        "the Read Response left in the server's turn"
    );
}

#[test]
fn a_read_completes_before_its_sack_leaves_and_the_sack_rides_on_the_next_read() {
    let (mut l, source, sink, dst) = open_rdmap(true);
    read_answered(&mut l, 1, &source, &sink);
    let (sent, sacks) = (frames_out(&l.ka[0]), sctp(&l.ka[0]).sacks_out);
    let events = client_turn(&mut l);
    assert_eq!(completed(&events), [1], "the ULP has the Read's completion");
    assert_eq!(
        frames_out(&l.ka[0]),
        sent,
        "the SACK the Read Response's I bit asked for waits for the ULP"
    );
    assert!(
        l.ka[0].tx_backlogged(),
        "the core says it has frames to send"
    );
    assert_eq!(
        l.ka[0].sleep_limit(l.now),
        Some(std::time::Duration::ZERO),
        "and must not sleep"
    );

    // The ULP's next Read takes the SACK along: one packet for both.
    let sacks_in = sctp(&l.kb[0]).sacks_in;
    read_answered(&mut l, 2, &source, &sink);
    assert_eq!(frames_out(&l.ka[0]), sent + 1, "one packet");
    assert_eq!(
        sctp(&l.ka[0]).sacks_out,
        sacks + 1,
        "carrying the SACK with the Read Request"
    );
    assert_eq!(sctp(&l.kb[0]).sacks_in, sacks_in + 1, "the server has it");

    // A ULP that posts nothing: the SACK leaves at the start of the core's next turn.
    let (sent, sacks) = (frames_out(&l.ka[0]), sctp(&l.ka[0]).sacks_out);
    let events = client_turn(&mut l);
    assert_eq!(completed(&events), [2]);
    assert_eq!(frames_out(&l.ka[0]), sent, "held for the ULP's return");
    client_turn(&mut l);
    assert_eq!(frames_out(&l.ka[0]), sent + 1, "sent on the next turn");
    assert_eq!(sctp(&l.ka[0]).sacks_out, sacks + 1, "the SACK alone");
    assert!(!l.ka[0].tx_backlogged());

    l.run_until_quiet();
    assert_eq!(
        sctp(&l.kb[0]).t3_expiries,
        0,
        "the responder never waited for a SACK"
    );
    let mut got = vec![0u8; 2 * LEN as usize];
    l.ca.memory()
        .region(dst)
        .unwrap()
        .read(u64::from(LEN), &mut got)
        .unwrap();
    let want: Vec<u8> = (LEN..3 * LEN).map(|i| (i % 251) as u8).collect();
    assert_eq!(got, want, "both reads brought the source's bytes");
}

#[test]
fn without_ulp_polls_the_sack_leaves_in_the_turn_that_completed_the_read() {
    let (mut l, source, sink, _) = open_rdmap(false);
    read_answered(&mut l, 1, &source, &sink);
    let (sent, sacks) = (frames_out(&l.ka[0]), sctp(&l.ka[0]).sacks_out);
    let events = client_turn(&mut l);
    assert_eq!(completed(&events), [1]);
    assert_eq!(
        frames_out(&l.ka[0]),
        sent + 1,
        "the SACK left within the turn"
    );
    assert_eq!(sctp(&l.ka[0]).sacks_out, sacks + 1);
    assert!(!l.ka[0].tx_backlogged());
}

/// The Data Sink of a tagged write hears of it (RFC 5041 §5.4: TaggedDelivered on a plain DDP
/// stream), but the writer's completion waits for the SACK: a core the ULP polls sends it in
/// the turn that placed the write, with the indication.
#[test]
fn a_sack_the_peers_completion_waits_for_is_not_held_for_the_ulp() {
    let (pa, pb) = pair(2, 4096);
    let cfg = RuntimeConfig::default();
    let a = runtime(pa, A4, None, 1, cfg);
    let mut b = runtime(pb, B4, None, 2, cfg);
    b.1[0].set_ulp_polls(true);
    let (mut l, reg, _) = Lockstep::open_to_region(a, b, IpAddr::V4(B4), PORT, 1 << 16);
    l.run_until_quiet();
    let (sent, sacks) = (frames_out(&l.kb[0]), sctp(&l.kb[0]).sacks_out);
    let op = tagged(5, reg.stag, reg.to_base, vec![3u8; 64]);
    l.ca.submit_inline(l.conn, op, &mut l.ka, l.now).unwrap();
    l.kb[0].poll(l.now);
    l.cb.poll(l.now);
    let delivered = std::iter::from_fn(|| l.cb.poll_event()).any(|e| {
        matches!(
            e,
            Event::Indication {
                indication: ddpdk_control::conn::Indication::TaggedDelivered { .. },
                ..
            }
        )
    });
    assert!(delivered, "the server's ULP heard of the write");
    assert_eq!(
        frames_out(&l.kb[0]),
        sent + 1,
        "and its SACK left in the same turn"
    );
    assert_eq!(sctp(&l.kb[0]).sacks_out, sacks + 1);
    let events = client_turn(&mut l);
    assert_eq!(completed(&events), [5], "the writer's completion");
}

/// An operation that reaches the core through its command ring (the ULP on another thread, or
/// behind an earlier command) finds the held SACK too: the next turn sends them in one packet.
#[test]
fn a_held_sack_shares_a_packet_with_a_read_from_the_command_ring() {
    let (mut l, source, sink, _) = open_rdmap(true);
    read_answered(&mut l, 1, &source, &sink);
    let events = client_turn(&mut l);
    assert_eq!(completed(&events), [1]);
    let (sent, sacks) = (frames_out(&l.ka[0]), sctp(&l.ka[0]).sacks_out);
    l.ca.submit(l.conn, read(2, &source, &sink)).unwrap();
    assert_eq!(frames_out(&l.ka[0]), sent, "still held");
    client_turn(&mut l);
    assert_eq!(frames_out(&l.ka[0]), sent + 1, "one packet");
    assert_eq!(sctp(&l.ka[0]).sacks_out, sacks + 1, "with the SACK in it");
    l.run_until("the second read", |l| {
        l.ea.iter()
            .any(|e| matches!(e, Event::Completion { completion, .. } if completion.wr_id == 2))
    });
}

/// A ULP that forgets its connection while the core holds a frame of it for the ULP's return
/// (it heard a completion, or the Closed after it, and let go) does not lose the frame: the
/// core sends what the connection owes before it drops it. The association was still open,
/// so the ABORT that ends it (RFC 9260 §9.1, `Control::forget`) follows the held SACK.
#[test]
fn a_forgotten_connection_still_sends_what_was_held_for_the_ulp() {
    let (mut l, source, sink, _) = open_rdmap(true);
    read_answered(&mut l, 1, &source, &sink);
    let events = client_turn(&mut l);
    assert_eq!(completed(&events), [1]);
    let sent = frames_out(&l.ka[0]);
    assert!(l.ka[0].tx_backlogged(), "the SACK is held");
    l.ca.forget(l.conn).unwrap();
    client_turn(&mut l);
    assert_eq!(
        frames_out(&l.ka[0]),
        sent + 2,
        "the held SACK left, then the ABORT"
    );
    assert!(!l.ka[0].tx_backlogged());
    l.run_until("the peer's end", |l| {
        l.eb.iter().any(|e| {
            matches!(
                e,
                Event::Indication {
                    indication: Indication::Closed(CloseReason::PeerAbort { .. }),
                    ..
                }
            )
        })
    });
}
