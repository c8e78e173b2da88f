//! Helpers shared by the runtime tests.
// Each test binary uses some of these helpers, not all.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;

use ddpdk_control::conn::ConnConfig;
use ddpdk_control::conn::{Indication, Payload, SendKind, SendRequest};
use ddpdk_control::memory::{MemoryRegistration, RegionId, Registered};
use ddpdk_control::rdmap::RdmaLimits;
use ddpdk_control::runtime::{build, ConnHandle, Control, DataCore, Event, Op, RuntimeConfig};
use ddpdk_control::session::{Event as SessionEvent, PendingLimit};
use ddpdk_dataplane::mem::{Access, Pd, Stag};
use ddpdk_dataplane::net::Interface;
use ddpdk_dataplane::port::dpdk::{DpdkPort, Eal, Mempool, PortConf};
use ddpdk_dataplane::port::mem::MemPort;
use ddpdk_dataplane::port::Port;
use ddpdk_dataplane::sctp::{Config, Endpoint, Instant};

/// How many `Closed` indications `events` hold.
pub fn closes(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::Indication {
                    indication: Indication::Closed(_),
                    ..
                }
            )
        })
        .count()
}

/// How many `Connected` indications `events` hold.
pub fn connects(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::Indication {
                    indication: Indication::Connected { .. },
                    ..
                }
            )
        })
        .count()
}

/// The SCTP port of every test endpoint.
pub const PORT: u16 = 5000;

/// The client's Initiate and the server's Accept of an RDMAP stream on stream 1 (RFC 5040 §6:
/// each end's IRD and ORD in `limits`), for [`Lockstep::open_with`].
pub fn rdmap_session(apd: Pd, a: RdmaLimits, bpd: Pd, b: RdmaLimits) -> (Op, Op) {
    let initiate = Op::InitiateRdmap {
        stream: 1,
        pd: apd,
        limits: a,
        private_data: Vec::new(),
    };
    let accept = Op::AcceptRdmap {
        stream: 1,
        pd: bpd,
        limits: b,
        private_data: Vec::new(),
    };
    (initiate, accept)
}

/// An endpoint on `port` at `v4` (and `v6`) with `sctp`'s SCTP settings on [`PORT`]: its
/// control side and data cores (`cfg`), its cookie secret and STag allocation seeded by `seed`.
pub fn runtime_with(
    port: impl Into<Arc<MemPort>>,
    v4: Ipv4Addr,
    v6: impl Into<Option<Ipv6Addr>>,
    seed: u8,
    cfg: RuntimeConfig,
    sctp: Config,
) -> (Control<MemPort>, Vec<DataCore<MemPort>>) {
    let port = port.into();
    let iface = Interface::new(port.mac(), Some(v4), v6.into());
    runtime_on(port, iface, seed, cfg, sctp)
}

/// An endpoint on any `port` behind `iface` (its addresses, and any neighbour taught to it
/// beforehand) with `sctp`'s SCTP settings on [`PORT`]: its control side and data cores
/// (`cfg`), its cookie secret and STag allocation seeded by `seed`.
pub fn runtime_on<P: Port>(
    port: Arc<P>,
    iface: Interface,
    seed: u8,
    cfg: RuntimeConfig,
    sctp: Config,
) -> (Control<P>, Vec<DataCore<P>>) {
    build(
        port,
        iface,
        endpoint_with(seed, sctp),
        ConnConfig::default(),
        PendingLimit::new(8),
        RuntimeConfig {
            random: u64::from(seed) * 7919,
            ..cfg
        },
    )
    .unwrap()
}

/// An SCTP endpoint on [`PORT`] with `sctp`'s settings, its cookie secret from `seed`.
pub fn endpoint_with(seed: u8, sctp: Config) -> Endpoint {
    Endpoint::new(
        Config {
            local_port: PORT,
            ..sctp
        },
        [seed; 32],
    )
    .unwrap()
}

/// As [`runtime_with`], with the default SCTP settings.
pub fn runtime(
    port: impl Into<Arc<MemPort>>,
    v4: Ipv4Addr,
    v6: impl Into<Option<Ipv6Addr>>,
    seed: u8,
    cfg: RuntimeConfig,
) -> (Control<MemPort>, Vec<DataCore<MemPort>>) {
    runtime_with(port, v4, v6, seed, cfg, Config::default())
}

/// A signaled tagged write of `data` (bytes, or a span of a local region) to `stag` at `to`
/// on stream 1.
pub fn tagged(wr_id: u64, stag: Stag, to: u64, data: impl Into<Payload>) -> Op {
    Op::PostSend(SendRequest {
        wr_id,
        stream: 1,
        kind: SendKind::Tagged {
            stag,
            to,
            rsvd_ulp: 0,
        },
        data: data.into(),
        signaled: true,
    })
}

/// A remote-write registration of the first `len` bytes of `region` for `pd`, any stream.
pub fn remote_write(pd: Pd, region: RegionId, len: u64) -> MemoryRegistration {
    MemoryRegistration {
        pd,
        region,
        offset: 0,
        len,
        access: Access::REMOTE_WRITE,
        stream: None,
        to_base: 0,
    }
}

/// Whether `events` hold a session event of `conn` that `pred` accepts.
pub fn session_event(
    events: &[Event],
    conn: ConnHandle,
    pred: impl Fn(&SessionEvent) -> bool,
) -> bool {
    events.iter().any(|e| {
        matches!(e, Event::Indication { conn: c, indication: Indication::Session { event, .. } }
            if *c == conn && pred(event))
    })
}

/// Two endpoints polled in lockstep on the test thread (every data core, then each control
/// side; a simulated 200 µs a step), `a` the client of one connection to `b` (with a DDP
/// Stream Session open on stream 1 between them once [`Lockstep::open`] returns).
pub struct Lockstep<P: Port> {
    pub ca: Control<P>,
    pub ka: Vec<DataCore<P>>,
    pub cb: Control<P>,
    pub kb: Vec<DataCore<P>>,
    pub ea: Vec<Event>,
    pub eb: Vec<Event>,
    pub now: Instant,
    /// The client's connection.
    pub conn: ConnHandle,
}

impl<P: Port> Lockstep<P> {
    /// `a` connects to `b` at `server`:`port`, initiates a session on stream 1 for its
    /// protection domain `apd`, `b` accepts it for `bpd`; returns once `a` has the Accept.
    #[allow(clippy::too_many_arguments)]
    pub fn open(
        a: (Control<P>, Vec<DataCore<P>>),
        b: (Control<P>, Vec<DataCore<P>>),
        server: IpAddr,
        port: u16,
        apd: Pd,
        bpd: Pd,
    ) -> Lockstep<P> {
        let initiate = Op::Initiate {
            stream: 1,
            pd: apd,
            private_data: Vec::new(),
        };
        let accept = Op::Accept {
            stream: 1,
            pd: bpd,
            private_data: Vec::new(),
        };
        Lockstep::open_with(a, b, server, port, initiate, vec![accept])
    }

    /// As [`Lockstep::open`], each end in a protection domain of its own, once `b` has
    /// registered the first `len` bytes of a new region of its for remote writes: what most
    /// tests write to. Returns the registration and the region with the lockstep.
    pub fn open_to_region(
        mut a: (Control<P>, Vec<DataCore<P>>),
        mut b: (Control<P>, Vec<DataCore<P>>),
        server: IpAddr,
        port: u16,
        len: usize,
    ) -> (Lockstep<P>, Registered, RegionId) {
        let apd = a.0.memory_mut().alloc_pd();
        let bpd = b.0.memory_mut().alloc_pd();
        let region = b.0.memory_mut().alloc_region(len).unwrap();
        let reg =
            b.0.memory_mut()
                .register(remote_write(bpd, region, len as u64))
                .unwrap();
        (Lockstep::open(a, b, server, port, apd, bpd), reg, region)
    }

    /// As [`Lockstep::open`], with the client's `initiate` (its session's Initiate on stream
    /// 1, plain or RDMAP) and the server's `accept` operations, submitted in order once the
    /// Initiate is there (the Accept, then anything that must follow it at once).
    pub fn open_with(
        (ca, ka): (Control<P>, Vec<DataCore<P>>),
        (cb, kb): (Control<P>, Vec<DataCore<P>>),
        server: IpAddr,
        port: u16,
        initiate: Op,
        accept: Vec<Op>,
    ) -> Lockstep<P> {
        let mut l = Lockstep::connect((ca, ka), (cb, kb), server, port);
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
        l.ca.submit(conn, initiate).unwrap();
        l.run_until("the Initiate", |l| {
            session_event(&l.eb, l.server_conn(), |e| {
                matches!(e, SessionEvent::InitiateReceived { .. })
            })
        });
        let sc = l.server_conn();
        for op in accept {
            l.cb.submit(sc, op).unwrap();
        }
        l.run_until("the Accept", |l| {
            session_event(&l.ea, conn, |e| matches!(e, SessionEvent::Accepted { .. }))
        });
        l
    }

    /// `a` connects to `b` at `server`:`port`; nothing is polled yet.
    pub fn connect(
        (ca, ka): (Control<P>, Vec<DataCore<P>>),
        (cb, kb): (Control<P>, Vec<DataCore<P>>),
        server: IpAddr,
        port: u16,
    ) -> Lockstep<P> {
        let now = Instant::from_nanos(1_000_000_000);
        let mut ca = ca;
        let conn = ca.connect(now, server, port).unwrap();
        Lockstep {
            ca,
            ka,
            cb,
            kb,
            ea: Vec::new(),
            eb: Vec::new(),
            now,
            conn,
        }
    }

    /// The server's handle of the connection (from its first indication).
    pub fn server_conn(&self) -> ConnHandle {
        self.eb
            .iter()
            .find_map(|e| match e {
                Event::Indication { conn, .. } => Some(*conn),
                _ => None,
            })
            .unwrap_or(self.conn)
    }

    /// Polls every core and control side once, then advances the clock. Returns the work
    /// they did (frames received and sent, commands, upcalls, events).
    pub fn step(&mut self) -> usize {
        let mut work = 0;
        for k in self.ka.iter_mut().chain(&mut self.kb) {
            work += k.poll(self.now);
        }
        work += self.ca.poll(self.now);
        work += self.cb.poll(self.now);
        let (ea, eb) = (self.ea.len(), self.eb.len());
        self.ea.extend(std::iter::from_fn(|| self.ca.poll_event()));
        self.eb.extend(std::iter::from_fn(|| self.cb.poll_event()));
        work += self.ea.len() - ea + self.eb.len() - eb;
        self.now += Duration::from_micros(200);
        work
    }

    /// Steps until a step does no work: then no frame is in flight between the two (each
    /// step receives what the one before sent), and nothing is queued between the threads.
    pub fn run_until_quiet(&mut self) {
        for _ in 0..400_000 {
            if self.step() == 0 {
                return;
            }
        }
        panic!("never quiet after 80 simulated seconds");
    }

    /// Steps until `done` holds; fails the test after 400 000 steps (80 simulated seconds).
    pub fn run_until(&mut self, what: &str, mut done: impl FnMut(&Self) -> bool) {
        for _ in 0..400_000 {
            if done(self) {
                return;
            }
            self.step();
        }
        panic!(
            "no {what} after 80 simulated seconds: {:?} / {:?}",
            self.ea, self.eb
        );
    }
}

/// A started `net_ring` pair named `name` with `queues` RX and TX queues a port (what one
/// port transmits on queue q the other receives on queue q), `desc` descriptors a queue on
/// `pool`, links up: a runtime of `queues - 1` data cores fits on each end (the control thread
/// sends on the last TX queue).
pub fn ring_pair(
    eal: &Eal,
    name: &str,
    pool: &Arc<Mempool>,
    queues: u16,
    desc: u16,
) -> Vec<Arc<DpdkPort>> {
    let (a, b) = eal
        .create_ring_pair(name, 1024, queues)
        .unwrap_or_else(|e| panic!("ring pair {name}: {e}"));
    let conf = PortConf {
        nb_rxq: queues,
        nb_txq: queues,
        nb_rxd: desc,
        nb_txd: desc,
        ..PortConf::default()
    };
    [a, b]
        .into_iter()
        .map(|id| {
            let p = DpdkPort::configure(id, conf, Arc::clone(pool))
                .unwrap_or_else(|e| panic!("configure port {id}: {e}"));
            p.start().unwrap_or_else(|e| panic!("start port {id}: {e}"));
            assert!(p.wait_link_up(Duration::from_secs(2)).up, "port {id} link");
            Arc::new(p)
        })
        .collect()
}
