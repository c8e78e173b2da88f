//! Two endpoints, each a runtime under a `Verbs` context, their data cores polled on the test
//! thread in simulated time: what the verbs tests (`verbs`, `verbs_order`, `verbs_lifecycle`,
//! `verbs_destroy`, `library_user`, `runtime_forget`) drive, and the steps to connect them
//! (`Pair::associate`, `Pair::initiate_seen`). Not every test binary uses every item.

#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use crate::rt::{runtime, PORT};
use ddpdk_control::conn::Indication;
use ddpdk_control::runtime::{ConnHandle, DataCore, Event, RuntimeConfig};
use ddpdk_control::session::Event as SessionEvent;
use ddpdk_control::verbs::{
    Cq, MemoryRegion, Qp, SendWr, Sge, Verbs, Wc, WcOpcode, WcStatus, WrOpcode,
};
use ddpdk_dataplane::port::mem::{pair, MemPort};
use ddpdk_dataplane::sctp::Instant;

pub const A4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const B4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
pub const A6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
pub const B6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

/// One endpoint: its verbs context, its data cores, and the events it polled.
pub struct Node {
    pub v: Verbs<MemPort>,
    pub cores: Vec<DataCore<MemPort>>,
    pub events: Vec<Event>,
}

/// The client (`a`, one data core) and the server (`b`, two), and the simulated clock.
pub struct Pair {
    pub a: Node,
    pub b: Node,
    pub now: Instant,
}

impl Pair {
    pub fn new() -> Pair {
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

    /// One turn of every core, then of each side's verbs (its events kept), 200 us on.
    pub fn step(&mut self) {
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

    pub fn steps(&mut self, n: usize) {
        for _ in 0..n {
            self.step();
        }
    }

    /// The client's association to the server, once the client heard it is up.
    pub fn associate(&mut self) -> ConnHandle {
        let now = self.now;
        let conn = self
            .a
            .v
            .control_mut()
            .connect(now, IpAddr::V4(B4), PORT)
            .unwrap();
        self.run_until("the association", |p| connected(&p.a.events));
        conn
    }

    /// As [`Pair::associate`], once both ends heard it is up: the client's connection and
    /// the server's.
    pub fn associate_both(&mut self) -> (ConnHandle, ConnHandle) {
        let client = self.associate();
        self.run_until("the server's association", |p| connected(&p.b.events));
        let server = self.b.v.control().connections().next().unwrap().0;
        (client, server)
    }

    /// The server's connection once the client's Initiate on `stream` arrived there.
    pub fn initiate_seen(&mut self, stream: u16) -> ConnHandle {
        let mut seen = None::<ConnHandle>;
        self.run_until("the Initiate", |p| {
            seen = p.b.events.iter().find_map(|e| match e {
                Event::Indication {
                    conn,
                    indication:
                        Indication::Session {
                            stream: s,
                            event: SessionEvent::InitiateReceived { .. },
                        },
                } if *s == stream => Some(*conn),
                _ => None,
            });
            seen.is_some()
        });
        seen.unwrap()
    }

    pub fn run_until(&mut self, what: &str, mut done: impl FnMut(&mut Pair) -> bool) {
        for _ in 0..200_000 {
            if done(self) {
                return;
            }
            self.step();
        }
        panic!("no {what} after 40 simulated seconds");
    }

    /// Turns both sides `n` times, collecting the client's completions on `cq`.
    pub fn collect(&mut self, cq: Cq, n: usize) -> Vec<Wc> {
        let mut got = Vec::new();
        for _ in 0..n {
            self.step();
            got.extend(wcs(&mut self.a.v, cq));
        }
        got
    }
}

/// Whether `events` hold an association's `Connected`.
fn connected(events: &[Event]) -> bool {
    events.iter().any(|e| {
        matches!(
            e,
            Event::Indication {
                indication: Indication::Connected { .. },
                ..
            }
        )
    })
}

/// Everything on `cq`, polled four at a time.
pub fn wcs(v: &mut Verbs<MemPort>, cq: Cq) -> Vec<Wc> {
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

pub fn sge(mr: &MemoryRegion, offset: u64, length: u32) -> Sge {
    Sge {
        lkey: mr.lkey,
        addr: mr.addr + offset,
        length,
    }
}

/// A signaled work request.
pub fn wr(wr_id: u64, opcode: WrOpcode, sg_list: Vec<Sge>) -> SendWr {
    SendWr {
        wr_id,
        opcode,
        sg_list,
        signaled: true,
        solicited: false,
    }
}
