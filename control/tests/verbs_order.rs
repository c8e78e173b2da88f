//! Verbs completions keep posting order and find exactly their work request (RFC 5040 §5.5,
//! `docs/verbs.md` "Order"): a refused post, a local check failure and the work posted before
//! them each complete, in posting order, on the queue pair that posted them, whatever
//! `wr_id`s the application chose.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
use rt::{runtime, PORT};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use ddpdk_control::conn::Indication;
use ddpdk_control::rdmap::RdmaLimits;
use ddpdk_control::runtime::{ConnHandle, DataCore, Event, RuntimeConfig};
use ddpdk_control::session::Event as SessionEvent;
use ddpdk_control::verbs::{
    Cq, MemoryRegion, ProtectionDomain, Qp, QpInit, QpState, SendWr, Sge, Verbs, Wc, WcOpcode,
    WcStatus, WrOpcode,
};
use ddpdk_dataplane::mem::Access;
use ddpdk_dataplane::port::mem::{pair, MemPort};
use ddpdk_dataplane::sctp::Instant;

const A4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

/// One endpoint: its verbs context and its data cores.
struct Node {
    v: Verbs<MemPort>,
    cores: Vec<DataCore<MemPort>>,
    events: Vec<Event>,
}

struct Pair {
    a: Node,
    b: Node,
    now: Instant,
}

impl Pair {
    fn new() -> Pair {
        let (pa, pb) = pair(2, 1024);
        let (ca, ka) = runtime(pa, A4, A6, 1, RuntimeConfig::default());
        let (cb, kb) = runtime(pb, B4, B6, 2, RuntimeConfig::default());
        Pair {
            a: Node {
                v: Verbs::new(ca),
                cores: ka,
                events: Vec::new(),
            },
            b: Node {
                v: Verbs::new(cb),
                cores: kb,
                events: Vec::new(),
            },
            now: Instant::from_nanos(1_000_000_000),
        }
    }

    fn step(&mut self) {
        for n in [&mut self.a, &mut self.b] {
            for k in &mut n.cores {
                k.poll(self.now);
            }
        }
        for n in [&mut self.a, &mut self.b] {
            n.v.poll(self.now);
            n.events.extend(std::iter::from_fn(|| n.v.poll_event()));
        }
        self.now += Duration::from_micros(200);
    }

    fn run_until(&mut self, what: &str, mut done: impl FnMut(&mut Pair) -> bool) {
        for _ in 0..200_000 {
            if done(self) {
                return;
            }
            self.step();
        }
        panic!("no {what} after 40 simulated seconds");
    }
}

fn wcs(v: &mut Verbs<MemPort>, cq: Cq) -> Vec<Wc> {
    let mut out = Vec::new();
    let mut buf = [Wc::new(0, WcStatus::Success, WcOpcode::Send, Qp(0)); 4];
    loop {
        let n = v.poll_cq(cq, &mut buf).unwrap();
        out.extend_from_slice(&buf[..n]);
        if n < buf.len() {
            return out;
        }
    }
}

fn sge(mr: &MemoryRegion, offset: u64, length: u32) -> Sge {
    Sge {
        lkey: mr.lkey,
        addr: mr.addr + offset,
        length,
    }
}

fn wr(wr_id: u64, opcode: WrOpcode, sg_list: Vec<Sge>) -> SendWr {
    SendWr {
        wr_id,
        opcode,
        sg_list,
        signaled: true,
        solicited: false,
    }
}

fn summary(got: &[Wc]) -> Vec<(u64, WcStatus, WcOpcode)> {
    got.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect()
}

/// An association with RDMAP queue pairs on `streams`, the client's with `limits[i]` and one
/// send CQ each; the server's accepted at once. Returns the pair, the client's QPs and CQs,
/// and both protection domains.
struct Setup {
    p: Pair,
    qas: Vec<Qp>,
    cqas: Vec<Cq>,
    pda: ProtectionDomain,
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
    let mut accepted = 0;
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
            accepted += 1;
        }
        accepted == limits.len()
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
