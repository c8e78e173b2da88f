//! RDMAP on the runtime: two endpoints (control side and data cores) back to back in lockstep
//! open an RDMAP stream through commands, and RDMA Reads are served by the data core that owns
//! the association, straight from the registered region, while Writes land unseen (RFC 5040
//! §5.1, §5.2).

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
use rt::{runtime, session_event, Lockstep, PORT};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ddpdk_control::conn::{Indication, Payload, RdmaOp, RdmaRequest, Status};
use ddpdk_control::memory::MemoryRegistration;
use ddpdk_control::rdmap::RdmaLimits;
use ddpdk_control::runtime::{Event, Op, RuntimeConfig};
use ddpdk_control::session::Event as SessionEvent;
use ddpdk_dataplane::mem::Access;
use ddpdk_dataplane::port::mem::{pair, MemPort};
use ddpdk_dataplane::wire::crc32c::crc32c;

const A4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

fn completions(l: &Lockstep<MemPort>) -> Vec<(u64, Status)> {
    l.ea.iter()
        .filter_map(|e| match e {
            Event::Completion { completion: c, .. } => Some((c.wr_id, c.status)),
            _ => None,
        })
        .collect()
}

fn registration(
    pd: ddpdk_dataplane::mem::Pd,
    region: ddpdk_control::memory::RegionId,
    len: u64,
    access: Access,
) -> MemoryRegistration {
    MemoryRegistration {
        pd,
        region,
        offset: 0,
        len,
        access,
        stream: None,
        to_base: 0x10_0000,
    }
}

#[test]
fn rdma_read_and_write_through_the_runtime() {
    let (pa, pb) = pair(2, 1024);
    let cfg = RuntimeConfig::default();
    let mut a = runtime(pa, A4, A6, 1, cfg);
    let mut b = runtime(pb, B4, B6, 2, cfg);
    let apd = a.0.memory_mut().alloc_pd();
    let bpd = b.0.memory_mut().alloc_pd();
    // The server: a source to read (remote read) and a target to write (remote write).
    let source: Vec<u8> = (0..(3u32 << 18))
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let m = b.0.memory_mut();
    let src = m.alloc_region(1 << 20).unwrap();
    m.region(src).unwrap().place(0, &source).unwrap();
    let src_reg = m
        .register(registration(bpd, src, 1 << 20, Access::REMOTE_READ))
        .unwrap();
    let dst = m.alloc_region(1 << 16).unwrap();
    let dst_reg = m
        .register(registration(bpd, dst, 1 << 16, Access::REMOTE_WRITE))
        .unwrap();
    // The client: the Read's Data Sink (local write) and the Write's source bytes.
    let m = a.0.memory_mut();
    let sink = m.alloc_region(1 << 20).unwrap();
    let sink_reg = m
        .register(registration(apd, sink, 1 << 20, Access::LOCAL_WRITE))
        .unwrap();

    let mut l = Lockstep::connect(a, b, IpAddr::V4(B4), PORT);
    let conn = l.conn;
    l.run_until("the association", |l| {
        l.ea.iter().any(|e| {
            matches!(
                e,
                Event::Indication {
                    indication: Indication::Connected { .. },
                    ..
                }
            )
        })
    });
    let open = Op::InitiateRdmap {
        stream: 1,
        pd: apd,
        limits: RdmaLimits { ird: 4, ord: 4 },
        private_data: Vec::new(),
    };
    l.ca.submit(conn, open).unwrap();
    l.run_until("the Initiate", |l| {
        session_event(&l.eb, l.server_conn(), |e| {
            matches!(e, SessionEvent::InitiateReceived { .. })
        })
    });
    let sc = l.server_conn();
    let accept = Op::AcceptRdmap {
        stream: 1,
        pd: bpd,
        limits: RdmaLimits { ird: 2, ord: 4 },
        private_data: Vec::new(),
    };
    l.cb.submit(sc, accept).unwrap();
    l.run_until("the Accept", |l| {
        session_event(&l.ea, conn, |e| matches!(e, SessionEvent::Accepted { .. }))
    });

    // Three Reads of 256 KiB each (two at a time: the server's IRD) and one Write.
    for i in 0..3u64 {
        let read = RdmaRequest {
            wr_id: i,
            stream: 1,
            op: RdmaOp::Read {
                source: src_reg.stag,
                source_to: 0x10_0000 + (i << 18),
                sink: sink_reg.stag,
                sink_to: 0x10_0000 + (i << 18),
                len: 1 << 18,
            },
            data: Payload::Bytes(Vec::new()),
            signaled: true,
        };
        l.ca.submit(conn, Op::PostRdma(read)).unwrap();
    }
    let written: Vec<u8> = (0..40_000u32).map(|i| (i % 253) as u8).collect();
    let write = RdmaRequest {
        wr_id: 10,
        stream: 1,
        op: RdmaOp::Write {
            stag: dst_reg.stag,
            to: 0x10_0000 + 100,
        },
        data: Payload::Bytes(written.clone()),
        signaled: true,
    };
    l.ca.submit(conn, Op::PostRdma(write)).unwrap();
    l.run_until("four completions", |l| completions(l).len() == 4);
    assert_eq!(
        completions(&l),
        [
            (0, Status::Success),
            (1, Status::Success),
            (2, Status::Success),
            (10, Status::Success)
        ]
    );
    let got = l.ca.memory().region(sink).unwrap();
    assert_eq!(
        got.crc32c(0, source.len()).unwrap(),
        crc32c(&source),
        "read bytes"
    );
    let put = l.cb.memory().region(dst).unwrap();
    assert_eq!(
        put.crc32c(100, written.len()).unwrap(),
        crc32c(&written),
        "written bytes"
    );
    // The server's ULP heard of neither (RFC 5040 §5.1, §5.2): only the session's events.
    assert!(!l.eb.iter().any(|e| matches!(
        e,
        Event::Indication {
            indication: Indication::TaggedDelivered { .. } | Indication::Received { .. },
            ..
        }
    )));
}
