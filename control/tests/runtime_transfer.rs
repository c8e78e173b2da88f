//! Two whole endpoints (the runtime: a control side and one data core each; frames →
//! `Interface` → SCTP → DDP → memory, and back) wired back to back by the in-memory port pair
//! and polled in lockstep in virtual time: they find each other by ARP (or IPv6 Neighbor
//! Discovery), set up an association with the DDP adaptation indication, open a DDP Stream
//! Session, and move tagged and untagged messages byte-exact.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
use rt::{runtime, tagged, Lockstep, PORT};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ddpdk_control::conn::{Indication, SendKind, SendRequest, Status};
use ddpdk_control::memory::MemoryRegistration;
use ddpdk_control::runtime::{Event, Op, RuntimeConfig, LIGHT_SLEEP};
use ddpdk_control::xmit::BURST;
use ddpdk_dataplane::mem::Access;
use ddpdk_dataplane::port::mem::{pair, MemPort};
use ddpdk_dataplane::port::Port;
use ddpdk_dataplane::wire::crc32c::crc32c;

const A4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

/// Indications of the connection `l.server_conn()` the server heard.
fn server_indications(l: &Lockstep<MemPort>) -> Vec<Indication> {
    let sc = l.server_conn();
    l.eb.iter()
        .filter_map(|e| match e {
            Event::Indication { conn, indication } if *conn == sc => Some(indication.clone()),
            _ => None,
        })
        .collect()
}

/// The client (A) connects to the server (B) at `peer` and sends the server a tagged message
/// of 1 MiB and an untagged one of 5000 bytes, over devices whose rings hold `ring` frames.
fn transfer(peer: IpAddr, ring: usize) -> Lockstep<MemPort> {
    // One data core each; queue 1 is the control thread's.
    let (pa, pb) = pair(2, ring);
    let b_mac = pb.mac();
    let cfg = RuntimeConfig::default();
    let mut a = runtime(pa, A4, A6, 1, cfg);
    let mut b = runtime(pb, B4, B6, 2, cfg);
    let apd = a.0.memory_mut().alloc_pd();
    let bpd = b.0.memory_mut().alloc_pd();
    // Server memory: a tagged region and a receive buffer.
    let m = b.0.memory_mut();
    let tr = m.alloc_region(1 << 20).unwrap();
    let treg = m
        .register(MemoryRegistration {
            pd: bpd,
            region: tr,
            offset: 0,
            len: 1 << 20,
            access: Access::REMOTE_WRITE,
            stream: None,
            to_base: 0x10_0000,
        })
        .unwrap();
    let ur = m.alloc_region(65536).unwrap();
    let ureg = m
        .register(MemoryRegistration {
            pd: bpd,
            region: ur,
            offset: 0,
            len: 65536,
            access: Access::LOCAL_WRITE,
            stream: None,
            to_base: 0,
        })
        .unwrap();
    // Association, then a DDP session on stream 1, the server accepting.
    let mut l = Lockstep::open(a, b, peer, PORT, apd, bpd);

    // The client learnt the server by ARP / ND, not from a table: its core's first INIT waited
    // behind a solicitation (RFC 1122 §2.3.2.2), the server's core answered once, and the INIT
    // went then. The server learnt the client from its (authenticated) COOKIE ECHO and never
    // asked.
    let (sa, sb) = (l.ka[0].interface().stats(), l.kb[0].interface().stats());
    assert_eq!(sa.solicitations, 1, "{sa:?}");
    assert_eq!(sb.arp_replies + sb.nd_adverts, 1, "{sb:?}");
    assert_eq!(sa.neighbour_answers, 1, "{sa:?}");
    assert_eq!(sb.solicitations, 0, "{sb:?}");
    let t = l.ka[0].stats().tx;
    assert_eq!((t.unresolved, t.held_sent), (0, 1), "{t:?}");
    assert_eq!(l.ka[0].interface().neighbour(peer), Some(b_mac));

    // The server posts its receive buffer; the client sends once the server's core has it.
    let sc = l.server_conn();
    let buffer =
        l.cb.memory()
            .receive_buffer(bpd, ureg.stag, 0, 65536)
            .unwrap();
    let op = Op::PostRecv {
        stream: 1,
        qn: 0,
        wr_id: 7,
        buffer,
    };
    l.cb.submit(sc, op).unwrap();
    l.run_until("the posted receive", |l| {
        l.eb.iter()
            .any(|e| matches!(e, Event::Posted { wr_id: 7, .. }))
    });

    let big: Vec<u8> = (0..(1u32 << 20))
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let small: Vec<u8> = (0..5000u32).map(|i| i as u8 ^ 0x5a).collect();
    let tagged = SendRequest {
        wr_id: 1,
        stream: 1,
        kind: SendKind::Tagged {
            stag: treg.stag,
            to: treg.to_base,
            rsvd_ulp: 3,
        },
        data: big.clone().into(),
        signaled: true,
    };
    let untagged = SendRequest {
        wr_id: 2,
        stream: 1,
        kind: SendKind::Untagged {
            qn: 0,
            rsvd_ulp: [0; 5],
        },
        data: small.clone().into(),
        signaled: true,
    };
    l.ca.submit(l.conn, Op::PostSend(tagged)).unwrap();
    l.ca.submit(l.conn, Op::PostSend(untagged)).unwrap();
    let completions = |l: &Lockstep<MemPort>| -> Vec<(u64, Status)> {
        l.ea.iter()
            .filter_map(|e| match e {
                Event::Completion { completion: c, .. } => Some((c.wr_id, c.status)),
                _ => None,
            })
            .collect()
    };
    l.run_until("both completions and deliveries", |l| {
        completions(l).len() == 2
            && server_indications(l)
                .iter()
                .any(|i| matches!(i, Indication::Received { wr_id: 7, .. }))
    });
    assert_eq!(
        completions(&l),
        vec![(1, Status::Success), (2, Status::Success)]
    );
    let r = l.cb.memory().region(tr).unwrap();
    assert_eq!(
        r.crc32c(0, big.len()).unwrap(),
        crc32c(&big),
        "tagged bytes"
    );
    let u = l.cb.memory().region(ur).unwrap();
    assert_eq!(
        u.crc32c(0, small.len()).unwrap(),
        crc32c(&small),
        "untagged bytes"
    );
    let lb = server_indications(&l);
    assert!(lb.contains(&Indication::TaggedDelivered {
        stream: 1,
        stag: treg.stag,
        rsvd_ulp: 3
    }));
    assert!(lb.iter().any(|i| matches!(
        i,
        Indication::Received {
            wr_id: 7,
            len: 5000,
            ..
        }
    )));
    // Nothing was dropped as not ours, and no frame was lost on the way (by a core or by a
    // control thread).
    for k in l.ka.iter().chain(&l.kb) {
        let s = k.interface().stats();
        assert_eq!(
            (s.other_mac, s.other_address, s.malformed, s.bad_ip_checksum),
            (0, 0, 0, 0),
            "{s:?}"
        );
    }
    let txs = l.ka.iter().chain(&l.kb).map(|k| k.stats().tx);
    for t in txs.chain([l.ca.stats().tx, l.cb.stats().tx]) {
        assert_eq!((t.tx_dropped, t.no_buffer), (0, 0), "{t:?}");
    }
    l
}

#[test]
fn two_runtimes_over_ipv4_resolve_by_arp_and_move_ddp_messages() {
    transfer(IpAddr::V4(B4), 1024);
}

#[test]
fn two_runtimes_over_ipv6_resolve_by_neighbor_discovery_and_move_ddp_messages() {
    transfer(IpAddr::V6(B6), 1024);
}

/// A device ring far smaller than the sender's window (8 frames against a 1 MiB write) is
/// backpressure, not loss: the data core stops framing while the ring is full and the
/// association keeps what it has not sent, so the write arrives whole with no frame dropped
/// and nothing retransmitted (RFC 9260 §6.3.3 and §7.2.4 never run). Before, frames the ring
/// refused were freed and the association recovered them by fast retransmit or T3.
#[test]
fn a_full_device_ring_holds_the_sender_back_and_loses_nothing() {
    let l = transfer(IpAddr::V4(B4), 8);
    let client = l.ka[0].report();
    assert!(
        client.stats.tx.tx_ring_full > 0,
        "the ring was full at times: {:?}",
        client.stats.tx
    );
    // The core stops framing while the ring is full: at most a burst waits (83 frames without
    // the `congested()` gate in `DataCore::transmit`).
    assert!(
        client.stats.tx.backlog_peak <= BURST as u64,
        "{:?}",
        client.stats.tx
    );
    let sctp = client
        .assocs
        .iter()
        .find(|a| a.conn == l.conn)
        .map(|a| a.sctp)
        .unwrap();
    assert_eq!(
        (sctp.fast_retransmits, sctp.t3_retransmits, sctp.t3_expiries),
        (0, 0, 0),
        "{sctp:?}"
    );
}

/// A receiver that stops taking frames (its core descheduled, say) while a write is under
/// way: the sender's ring fills and stays full. The sender's core stops framing (its backlog
/// stays within a burst, nothing dropped), it keeps retrying every LIGHT_SLEEP at most even
/// once it has been held back longer than DEEP_IDLE_AFTER (review finding M2: a turn that
/// sends nothing counts as idle, and a core that backed off to `max_sleep` would retry every
/// millisecond), and once the receiver polls again the write completes whole with nothing
/// retransmitted.
#[test]
fn a_stalled_receiver_holds_the_sender_back_and_it_keeps_retrying() {
    let (pa, pb) = pair(2, 8);
    let pa = std::sync::Arc::new(pa);
    let cfg = RuntimeConfig::default();
    let a = runtime(pa.clone(), A4, A6, 1, cfg);
    let b = runtime(pb, B4, B6, 2, cfg);
    let (mut l, reg, sink) = Lockstep::open_to_region(a, b, IpAddr::V4(B4), PORT, 1 << 20);
    let data: Vec<u8> = (0..(1u32 << 20))
        .map(|i| (i * 7 + (i >> 9)) as u8)
        .collect();
    l.ca.submit(l.conn, tagged(1, reg.stag, 0, data.clone()))
        .unwrap();
    // Under way: some of it placed.
    l.run_until("the first bytes", |l| {
        l.kb[0].report().conn_totals.placed_bytes > 64 * 1024
    });
    // The receiver stops; the sender goes on alone for 20 simulated ms (DEEP_IDLE_AFTER is
    // 10), well inside its retransmission timeout (RTO.Min, 1 s).
    let mut congested_turns = 0;
    for _ in 0..100 {
        for k in &mut l.ka {
            k.poll(l.now);
        }
        l.ca.poll(l.now);
        if l.ka[0].tx_backlogged() {
            congested_turns += 1;
            let limit = l.ka[0].sleep_limit(l.now);
            assert!(
                limit.is_some_and(|d| d <= LIGHT_SLEEP),
                "a core with a backlog sleeps at most LIGHT_SLEEP, not {limit:?}"
            );
        }
        l.now += std::time::Duration::from_micros(200);
    }
    assert!(
        congested_turns >= 90,
        "the ring stayed full: {congested_turns}"
    );
    // A link that is down drains nothing: then the core may back off as an idle one does.
    pa.set_link_up(false);
    assert!(
        l.ka[0].sleep_limit(l.now).is_some_and(|d| d > LIGHT_SLEEP),
        "only the SCTP timer limits a core whose link is down"
    );
    pa.set_link_up(true);
    let tx = l.ka[0].report().stats.tx;
    assert!(tx.backlog_peak <= BURST as u64, "{tx:?}");
    assert_eq!(tx.tx_dropped, 0, "{tx:?}");
    // The receiver is back: the write completes, whole, and nothing was retransmitted.
    l.run_until("the completion", |l| {
        l.ea.iter()
            .any(|e| matches!(e, Event::Completion { completion: c, .. } if c.wr_id == 1))
    });
    l.run_until_quiet();
    let r = l.cb.memory().region(sink).unwrap();
    assert_eq!(r.crc32c(0, data.len()).unwrap(), crc32c(&data));
    let client = l.ka[0].report();
    let sctp = client
        .assocs
        .iter()
        .find(|a| a.conn == l.conn)
        .unwrap()
        .sctp;
    assert_eq!(
        (sctp.fast_retransmits, sctp.t3_retransmits, sctp.t3_expiries),
        (0, 0, 0),
        "{sctp:?}"
    );
    assert_eq!(client.stats.tx.tx_dropped, 0);
}
