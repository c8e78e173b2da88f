//! Two DDP endpoints ([`Listener`] + [`Connection`] + [`Memory`]) over the seeded simulated
//! network of the SCTP tests (`dataplane/tests/sim`), in virtual time. Each side records every
//! completion and indication its ULP saw.

#![allow(dead_code)] // each test binary uses its own part of the harness

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use ddpdk_control::conn::{
    Accept, Completion, ConnConfig, Connection, Indication, Listener, SendKind, SendRequest,
    SessionCall,
};
use ddpdk_control::memory::{Memory, MemoryRegistration, RegionId, Registered};
use ddpdk_control::session::{Event, PendingLimit};
use ddpdk_dataplane::mem::{Access, Pd, Stag};
use ddpdk_dataplane::sctp::{Config, Endpoint, Instant};

#[path = "../../../dataplane/tests/sim/mod.rs"]
pub mod sim;

pub use sim::{Net, NetConfig, Rng};

pub const CLIENT_PORT: u16 = 6001;
pub const SERVER_PORT: u16 = 6002;

pub struct Side {
    pub addr: IpAddr,
    pub listener: Listener,
    pub conn: Option<Box<Connection>>,
    pub memory: Memory,
    pub completions: Vec<Completion>,
    pub indications: Vec<Indication>,
    /// With remote sessions: sessions away at the "control thread", each back at its time
    /// (the connection holds what waits for them).
    calls: Vec<(Instant, SessionCall)>,
}

impl Side {
    pub fn conn(&mut self) -> &mut Connection {
        self.conn.as_mut().expect("connection")
    }

    /// Moves what the connection has for the ULP into the logs.
    fn drain(&mut self) {
        if let Some(c) = self.conn.as_mut() {
            while let Some(x) = c.poll_completion() {
                self.completions.push(x);
            }
            while let Some(x) = c.poll_indication() {
                self.indications.push(x);
            }
        }
    }
}

pub struct World {
    pub now: Instant,
    pub net: Net,
    pub client: Side,
    pub server: Side,
    buf: Vec<u8>,
    /// Session control messages go to a "control thread" with their session, and come back
    /// this long after (the runtime's shape; `None`: run where they arrive).
    remote: Option<Duration>,
    /// Every packet either side sent (`true`: to the server), in order, once set to `Some`.
    pub sent: Option<Vec<(bool, Vec<u8>)>>,
}

/// SCTP timers suited to the hostile network (RFC 9260 defaults would make thousands of seeds
/// slow in virtual time only, but fail lossy seeds through Max.Retrans).
pub fn sctp_config(mtu: usize) -> Config {
    Config {
        path_mtu: mtu,
        rto_initial: Duration::from_millis(200),
        rto_min: Duration::from_millis(50),
        rto_max: Duration::from_secs(2),
        assoc_max_retrans: 30,
        max_init_retransmits: 30,
        shutdown_guard: Duration::from_secs(120),
        ..Config::default()
    }
}

fn side(
    addr: Ipv4Addr,
    port: u16,
    sctp: Config,
    conn: ConnConfig,
    pending: usize,
    rng: &mut Rng,
) -> Side {
    let ep = Endpoint::new(
        Config {
            local_port: port,
            ..sctp
        },
        rng.bytes32(),
    )
    .expect("valid config");
    let (memory, _) = Memory::new(1024, 0, rng.next_u64());
    Side {
        addr: IpAddr::V4(addr),
        listener: Listener::new(ep, conn, PendingLimit::new(pending)),
        conn: None,
        memory,
        completions: Vec::new(),
        indications: Vec::new(),
        calls: Vec::new(),
    }
}

impl World {
    pub fn new(net: NetConfig, conn: ConnConfig, pending: usize, rng: &mut Rng) -> World {
        let sctp = sctp_config(net.mtu);
        World::new_with_sctp(net, conn, sctp, pending, rng)
    }

    /// As [`World::new`], both endpoints configured with `sctp` (its port set per side).
    pub fn new_with_sctp(
        net: NetConfig,
        conn: ConnConfig,
        sctp: Config,
        pending: usize,
        rng: &mut Rng,
    ) -> World {
        let net_rng = Rng::new(rng.next_u64());
        World {
            now: Instant::from_nanos(1_000_000_000),
            net: Net::new(net, net_rng),
            client: side(
                Ipv4Addr::new(198, 18, 0, 1),
                CLIENT_PORT,
                sctp,
                conn,
                pending,
                rng,
            ),
            server: side(
                Ipv4Addr::new(198, 18, 0, 2),
                SERVER_PORT,
                sctp,
                conn,
                pending,
                rng,
            ),
            buf: vec![0; 65_536],
            remote: None,
            sent: None,
        }
    }

    /// Runs every session control message on a "control thread" that answers after `delay`
    /// (the runtime's shape), holding each side's packets meanwhile.
    pub fn set_remote_sessions(&mut self, delay: Duration) {
        self.remote = Some(delay);
        for side in [&mut self.client, &mut self.server] {
            if let Some(c) = side.conn.as_mut() {
                c.set_remote_sessions(true);
            }
        }
    }

    /// Lends out what the connections set aside, and takes back what is due.
    fn sessions(&mut self) {
        let Some(delay) = self.remote else {
            return;
        };
        let now = self.now;
        for side in [&mut self.client, &mut self.server] {
            let Some(c) = side.conn.as_mut() else {
                continue;
            };
            c.set_remote_sessions(true);
            while let Some(call) = c.poll_session_call() {
                side.calls.push((now + delay, call));
            }
            while let Some(k) = side.calls.iter().position(|(at, _)| *at <= now) {
                let (_, mut call) = side.calls.remove(k);
                call.run();
                c.return_session(now, call, &side.memory);
                for stag in c.take_peer_invalidated() {
                    side.memory.deregister(stag).expect("a live STag");
                }
                while let Some(call) = c.poll_session_call() {
                    side.calls.push((now + delay, call));
                }
            }
        }
    }

    /// A perfect network with the given path MTU.
    pub fn perfect(mtu: usize) -> World {
        World::perfect_with(mtu, ConnConfig::default())
    }

    /// A perfect network, both connections configured with `conn`.
    pub fn perfect_with(mtu: usize, conn: ConnConfig) -> World {
        let mut rng = Rng::new(1);
        World::new(NetConfig::perfect(mtu), conn, 16, &mut rng)
    }

    /// The client opens the association.
    pub fn connect(&mut self) {
        let c = self
            .client
            .listener
            .connect(self.now, self.server.addr, SERVER_PORT);
        self.client.conn = Some(Box::new(c));
        self.flush();
    }

    /// Runs until both connections are established.
    pub fn establish(&mut self) {
        self.connect();
        let ok = self.run_until(self.now + Duration::from_secs(600), |w| {
            connected(&w.client) && connected(&w.server)
        });
        assert!(ok, "association not established");
    }

    /// Sends everything both sides have to send.
    pub fn flush(&mut self) {
        for to_server in [true, false] {
            let side = if to_server {
                &mut self.client
            } else {
                &mut self.server
            };
            if let Some(c) = side.conn.as_mut() {
                while let Some(n) = c.poll_transmit(self.now, &mut self.buf) {
                    self.net.send(self.now, to_server, &self.buf[..n]);
                    if let Some(log) = self.sent.as_mut() {
                        log.push((to_server, self.buf[..n].to_vec()));
                    }
                }
                // RFC 8899 probes, as an endpoint's IP layer sends them (DF, whole).
                while let Some(n) = c.poll_probe(self.now, &mut self.buf) {
                    self.net.send(self.now, to_server, &self.buf[..n]);
                    if let Some(log) = self.sent.as_mut() {
                        log.push((to_server, self.buf[..n].to_vec()));
                    }
                }
            }
            side.drain();
        }
        if self.remote.is_some() {
            self.sessions();
            for to_server in [true, false] {
                let side = if to_server {
                    &mut self.client
                } else {
                    &mut self.server
                };
                if let Some(c) = side.conn.as_mut() {
                    while let Some(n) = c.poll_transmit(self.now, &mut self.buf) {
                        self.net.send(self.now, to_server, &self.buf[..n]);
                        if let Some(log) = self.sent.as_mut() {
                            log.push((to_server, self.buf[..n].to_vec()));
                        }
                    }
                    // RFC 8899 probes, as an endpoint's IP layer sends them (DF, whole).
                    while let Some(n) = c.poll_probe(self.now, &mut self.buf) {
                        self.net.send(self.now, to_server, &self.buf[..n]);
                        if let Some(log) = self.sent.as_mut() {
                            log.push((to_server, self.buf[..n].to_vec()));
                        }
                    }
                }
                side.drain();
            }
        }
    }

    /// Advances virtual time to the next packet arrival or timer and handles it; false when
    /// nothing is left to happen.
    pub fn step(&mut self) -> bool {
        let timers = [&self.client, &self.server]
            .iter()
            .filter_map(|s| s.conn.as_ref().and_then(|c| c.poll_timeout()))
            .chain(
                [&self.client, &self.server]
                    .iter()
                    .flat_map(|s| s.calls.iter().map(|(at, _)| *at)),
            )
            .min();
        let next = match (self.net.next_at(), timers) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => match a.or(b) {
                Some(t) => t,
                None => return false,
            },
        };
        if next > self.now {
            self.now = next;
        }
        while let Some((to_server, bytes)) = self.net.pop_due(self.now) {
            let (side, from_port) = if to_server {
                (&mut self.server, CLIENT_PORT)
            } else {
                (&mut self.client, SERVER_PORT)
            };
            let _ = from_port;
            let peer = if to_server {
                IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1))
            } else {
                IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2))
            };
            let live = side
                .conn
                .as_ref()
                .is_some_and(|c| !c.association().is_closed());
            if live {
                let memory = &side.memory;
                if let Some(c) = side.conn.as_mut() {
                    let _ = c.handle(self.now, &bytes, memory);
                    // The table owner's part of a remote invalidation (RFC 5040 §5.3): this
                    // side's memory has no data cores, so revoking is immediate.
                    for stag in c.take_peer_invalidated() {
                        side.memory.deregister(stag).expect("a live STag");
                    }
                }
            } else {
                match side
                    .listener
                    .handle(self.now, peer, &bytes, &mut self.buf, &side.memory)
                {
                    Accept::Ignored => {}
                    Accept::Reply(n) => self.net.send(self.now, !to_server, &self.buf[..n]),
                    Accept::Connection(c) => side.conn = Some(c),
                }
            }
            self.flush();
        }
        for side in [&mut self.client, &mut self.server] {
            if let Some(c) = side.conn.as_mut() {
                if c.poll_timeout().is_some_and(|t| t <= self.now) {
                    c.handle_timeout(self.now);
                }
            }
        }
        self.flush();
        true
    }

    /// Steps until `done` holds (true) or time passes `until` or nothing is left (false).
    pub fn run_until(&mut self, until: Instant, mut done: impl FnMut(&mut World) -> bool) -> bool {
        loop {
            self.flush();
            if done(self) {
                return true;
            }
            if self.now > until || !self.step() {
                return done(self);
            }
        }
    }

    /// Runs for `d` of virtual time (or until nothing is left to happen).
    pub fn run_for(&mut self, d: Duration) {
        let until = self.now + d;
        self.run_until(until, |w| w.now >= until);
    }
}

pub fn connected(s: &Side) -> bool {
    s.indications
        .iter()
        .any(|i| matches!(i, Indication::Connected { .. }))
}

// ---- helpers shared by the connection tests

pub fn session_events(side: &Side, stream: u16) -> Vec<Event> {
    side.indications
        .iter()
        .filter_map(|i| match i {
            Indication::Session { stream: s, event } if *s == stream => Some(event.clone()),
            _ => None,
        })
        .collect()
}

/// Runs until `f` holds; fails the test after a minute of virtual time.
pub fn wait(w: &mut World, what: &str, mut f: impl FnMut(&mut World) -> bool) {
    let until = w.now + Duration::from_secs(60);
    assert!(w.run_until(until, &mut f), "timed out waiting for {what}");
}

/// Client initiates on `stream`, server accepts; returns (client PD, server PD).
pub fn open(w: &mut World, stream: u16) -> (Pd, Pd) {
    let (cpd, spd) = (w.client.memory.alloc_pd(), w.server.memory.alloc_pd());
    w.client
        .conn()
        .initiate(stream, cpd, b"hello")
        .expect("initiate");
    wait(w, "the Initiate", |w| {
        session_events(&w.server, stream)
            .iter()
            .any(|e| matches!(e, Event::InitiateReceived { .. }))
    });
    w.server
        .conn()
        .accept(stream, spd, b"welcome")
        .expect("accept");
    wait(w, "the Accept", |w| {
        session_events(&w.client, stream)
            .iter()
            .any(|e| matches!(e, Event::Accepted { .. }))
    });
    (cpd, spd)
}

/// A region of `len` bytes on `side`, registered whole for `pd` with `access`, bound to the
/// current session of `stream` when `bound`.
pub fn region(
    side: &mut Side,
    pd: Pd,
    len: usize,
    access: Access,
    bound: Option<u16>,
) -> (RegionId, Registered) {
    let r = side.memory.alloc_region(len).expect("region");
    let stream = bound.map(|s| side.conn().stream_id(s).expect("stream"));
    let reg = side
        .memory
        .register(MemoryRegistration {
            pd,
            region: r,
            offset: 0,
            len: len as u64,
            access,
            stream,
            to_base: 0x7000_0000_0000,
        })
        .expect("register");
    (r, reg)
}

/// A signaled tagged write with RsvdULP 0x5a.
pub fn tagged(wr_id: u64, stream: u16, stag: Stag, to: u64, data: Vec<u8>) -> SendRequest {
    SendRequest {
        wr_id,
        stream,
        kind: SendKind::Tagged {
            stag,
            to,
            rsvd_ulp: 0x5a,
        },
        data: data.into(),
        signaled: true,
    }
}

/// `len` bytes of `side`'s region `r` from `offset`.
pub fn read(side: &Side, r: RegionId, offset: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    side.memory
        .region(r)
        .expect("region")
        .read(offset, &mut v)
        .expect("in bounds");
    v
}

/// The receives an indication log completed: (wr_id, length, RDMAP opcode from the RsvdULP).
pub fn received(log: &[Indication]) -> Vec<(u64, u32, ddpdk_dataplane::wire::rdmap::Opcode)> {
    log.iter()
        .filter_map(|i| match i {
            Indication::Received {
                wr_id,
                len,
                rsvd_ulp,
                ..
            } => Some((
                *wr_id,
                *len,
                ddpdk_dataplane::wire::rdmap::Control::from_byte(rsvd_ulp[0]).opcode,
            )),
            _ => None,
        })
        .collect()
}

/// Posts `n` receives of `len` bytes on queue 0 of `stream`, back to back from the start of
/// the registration `stag`, wr_ids `first`, `first + 1`, ...
pub fn post_receives(
    side: &mut Side,
    stream: u16,
    pd: Pd,
    stag: Stag,
    len: u32,
    n: u64,
    first: u64,
) {
    for i in 0..n {
        let b = side
            .memory
            .receive_buffer(pd, stag, i * u64::from(len), len)
            .expect("receive buffer");
        side.conn()
            .post_recv(stream, 0, first + i, b)
            .expect("post_recv");
    }
}
