//! Issue 13: the fused receive path (`Connection::handle` taking the next tagged segment of a
//! plain DDP stream without the chunk walk and the general routing) must change nothing but
//! the instructions. Two servers made from one handshake, one with header prediction (and so
//! the fused path) and one without, are fed the same packets of a client's tagged writes and
//! untagged sends (dropped, duplicated, reordered, bit-flipped, truncated or with a DDP field
//! rewritten on the way) and must return the same results, answer with the same packets,
//! indicate the same, place the same bytes and end in the same state (their whole `Debug`
//! form, the prediction flag and the counts of which path took what apart).

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use ddpdk_control::conn::{
    Accept, ConnConfig, Connection, Indication, Listener, Payload, RdmaOp, RdmaRequest, SendKind,
    SendRequest,
};
use ddpdk_control::memory::{Memory, MemoryRegistration, RegionId, Registered};
use ddpdk_control::rdmap::RdmaLimits;
use ddpdk_control::session::PendingLimit;
use ddpdk_dataplane::mem::{Access, Pd};
use ddpdk_dataplane::sctp::{Config, Endpoint, Instant};
use ddpdk_dataplane::wire::crc32c;
use ddpdk_dataplane::wire::rdmap::{Control, Opcode};
use proptest::prelude::*;

const C: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const S: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
const STREAM: u16 = 1;
const REGION: usize = 64 << 10;
const RECEIVES: u64 = 64;
const RECEIVE_LEN: u32 = 1024;

fn listener(port: u16, header_prediction: bool) -> Listener {
    let cfg = Config {
        local_port: port,
        header_prediction,
        path_mtu: 1500,
        // A small receive window, so that the window's own rules are reached.
        a_rwnd: 32768,
        ..Config::default()
    };
    let secret = if port == 5001 { [1; 32] } else { [2; 32] };
    Listener::new(
        Endpoint::new(cfg, secret).unwrap(),
        ConnConfig::default(),
        PendingLimit::new(4),
    )
}

/// One server: its connection, memory and what its ULP heard.
struct Server {
    conn: Box<Connection>,
    memory: Memory,
    pd: Pd,
    region: RegionId,
    reg: Registered,
    /// Registrations a write may name instead ([`Op::WriteTo`], [`more_registrations`]).
    more: Vec<Registered>,
    log: Vec<Indication>,
}

struct Setup {
    now: Instant,
    client: Box<Connection>,
    client_memory: Memory,
    /// Where the client's RDMA Reads land ([`Op::Read`]): local write, the stream's domain.
    client_sink: Option<Registered>,
    fast: Server,
    general: Server,
}

/// The client's packets until it has none.
fn drain(conn: &mut Connection, now: Instant) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; 65536];
    let mut out = Vec::new();
    while let Some(n) = conn.poll_transmit(now, &mut buf) {
        out.push(buf[..n].to_vec());
    }
    out
}

/// A client and two servers from one handshake, a session open on [`STREAM`] (the servers
/// accepting alike; an RDMAP stream, RFC 5040, with `rdmap`), a region registered and receives
/// posted on each server alike.
fn setup(rdmap: bool) -> Setup {
    let now = Instant::from_nanos(1_000_000_000);
    let (client_memory, _) = Memory::new(1024, 0, 7);
    let mut cl = listener(5001, true);
    let mut client = Box::new(cl.connect(now, S, 5002));
    let init = drain(&mut client, now).remove(0);
    let mut out = vec![0u8; 65536];
    let mut conns = Vec::new();
    let mut memories = Vec::new();
    let mut echo = Vec::new();
    for predict in [true, false] {
        let mut l = listener(5002, predict);
        let (memory, _) = Memory::new(1024, 0, 9);
        let Accept::Reply(n) = l.handle(now, C, &init, &mut out, &memory) else {
            panic!("INIT not answered")
        };
        if echo.is_empty() {
            client.handle(now, &out[..n], &client_memory).unwrap();
            echo = drain(&mut client, now).remove(0);
        }
        let Accept::Connection(c) = l.handle(now, C, &echo, &mut out, &memory) else {
            panic!("COOKIE ECHO not accepted")
        };
        conns.push(c);
        memories.push(memory);
    }
    let mut servers: Vec<Server> = conns
        .into_iter()
        .zip(memories)
        .map(|(conn, mut memory)| {
            let pd = memory.alloc_pd();
            let region = memory.alloc_region(REGION).unwrap();
            let more = more_registrations(&conn, pd, region)
                .into_iter()
                .map(|r| memory.register(r).unwrap())
                .collect();
            let reg = memory
                .register(MemoryRegistration {
                    pd,
                    region,
                    offset: 0,
                    len: REGION as u64,
                    access: Access::REMOTE_WRITE | Access::LOCAL_WRITE,
                    stream: None,
                    to_base: 0x7000_0000_0000,
                })
                .unwrap();
            Server {
                conn,
                memory,
                pd,
                region,
                reg,
                more,
                log: Vec::new(),
            }
        })
        .collect();
    let general = servers.pop().unwrap();
    let fast = servers.pop().unwrap();
    assert_eq!(
        (fast.reg.stag, fast.pd),
        (general.reg.stag, general.pd),
        "the same STag on both servers"
    );
    assert_eq!(
        fast.more.iter().map(|r| r.stag).collect::<Vec<_>>(),
        general.more.iter().map(|r| r.stag).collect::<Vec<_>>()
    );
    let mut s = Setup {
        now,
        client,
        client_memory,
        client_sink: None,
        fast,
        general,
    };
    // The COOKIE ACK.
    s.compare_out();
    let cpd = s.client_memory.alloc_pd();
    let sink = s.client_memory.alloc_region(REGION).unwrap();
    s.client_sink = Some(
        s.client_memory
            .register(MemoryRegistration {
                pd: cpd,
                region: sink,
                offset: 0,
                len: REGION as u64,
                access: Access::LOCAL_WRITE,
                stream: None,
                to_base: 0,
            })
            .unwrap(),
    );
    // The servers answer RDMA Reads from their regions (RFC 5040 §5.2).
    for v in [&mut s.fast, &mut s.general] {
        v.conn.use_regions(Arc::clone(v.memory.region_table()));
    }
    if rdmap {
        s.client
            .initiate_rdmap(STREAM, cpd, RdmaLimits::default(), b"hello")
            .unwrap();
    } else {
        s.client.initiate(STREAM, cpd, b"hello").unwrap();
    }
    s.exchange(&mut |_| Fate::Deliver, false);
    for v in [&mut s.fast, &mut s.general] {
        let pd = v.pd;
        if rdmap {
            v.conn
                .accept_rdmap(STREAM, pd, RdmaLimits::default(), b"welcome")
                .unwrap();
        } else {
            v.conn.accept(STREAM, pd, b"welcome").unwrap();
        }
        for i in 0..RECEIVES {
            let b = v
                .memory
                .receive_buffer(
                    pd,
                    v.reg.stag,
                    32768 + i * u64::from(RECEIVE_LEN) / 2,
                    RECEIVE_LEN / 2,
                )
                .unwrap();
            v.conn.post_recv(STREAM, 0, i, b).unwrap();
        }
    }
    s.exchange(&mut |_| Fate::Deliver, false);
    // The client's delayed SACK of the Accept leaves alone, not bundled with the first DATA.
    s.tick(Duration::from_millis(500));
    s.exchange(&mut |_| Fate::Deliver, false);
    s
}

/// Registrations of the region besides the main one, each a rule of the checks a tagged
/// segment passes before placement (RFC 5041 §7.1, §8.2, §8.3.1), the same on both servers:
/// remote read only (a write is an access rights violation); bound to this connection's
/// stream 1 (taken) at an offset into the region, TO from 0; bound to stream 2 (refused, item
/// 2); and one ending at the last TO below 2^64 (a write past its end would wrap: refused by the client,
/// reachable by a rewritten TO).
fn more_registrations(conn: &Connection, pd: Pd, region: RegionId) -> Vec<MemoryRegistration> {
    let reg = |offset, len, access, stream, to_base| MemoryRegistration {
        pd,
        region,
        offset,
        len,
        access,
        stream,
        to_base,
    };
    vec![
        reg(0, 8192, Access::REMOTE_READ, None, 0x1000),
        reg(
            16384,
            16384,
            Access::REMOTE_WRITE,
            conn.stream_id(STREAM),
            0,
        ),
        reg(4096, 8192, Access::REMOTE_WRITE, conn.stream_id(2), 0x8000),
        reg(8192, 8192, Access::REMOTE_WRITE, None, u64::MAX - 8192),
    ]
}

/// What happens to one of the client's packets on its way.
#[derive(Debug, Clone, Copy)]
enum Fate {
    Deliver,
    Drop,
    Duplicate,
    /// Held back and delivered after the next one.
    Reorder,
    /// One bit flipped at this position (modulo the length): a bad CRC32c.
    Flip(usize, u8),
    Truncate(usize),
    /// One byte of the DDP Segment (DDP-SSN, control, RsvdULP, STag, TO: octets 28-43 of the
    /// packet) changed, the CRC32c made good again.
    Ddp(u8, u8),
    /// One byte of the SCTP common header or of the first chunk's header (ports, verification
    /// tag, chunk type, flags, length, TSN, stream, SSN, PPID: octets 0-27, the checksum field
    /// left out) changed, the CRC32c made good again: the header prediction's own fields.
    Sctp(u8, u8),
}

impl Setup {
    /// Both servers take `pkt`; they must agree on everything that follows from it.
    fn deliver(&mut self, pkt: &[u8], checked: bool) {
        let now = self.now;
        let rf = self
            .fast
            .conn
            .handle_checked(now, pkt, &self.fast.memory, checked);
        let rg = self
            .general
            .conn
            .handle_checked(now, pkt, &self.general.memory, checked);
        assert_eq!(rf, rg, "handle's result");
        self.compare_out();
    }

    /// The servers' packets, equal, the fast one's to the client; their indications, equal.
    fn compare_out(&mut self) {
        let now = self.now;
        let pf = drain(&mut self.fast.conn, now);
        let pg = drain(&mut self.general.conn, now);
        assert_eq!(pf, pg, "the servers' packets");
        for p in pf {
            let _ = self.client.handle(now, &p, &self.client_memory);
        }
        for v in [&mut self.fast, &mut self.general] {
            while let Some(i) = v.conn.poll_indication() {
                v.log.push(i);
            }
            while v.conn.poll_completion().is_some() {}
        }
        assert_eq!(self.fast.log, self.general.log, "the indications");
    }

    /// Moves packets until nothing moves; `checked`: the servers' device verified the CRC32c
    /// of every packet not flipped on the way.
    fn exchange(&mut self, fate: &mut dyn FnMut(usize) -> Fate, checked: bool) {
        let mut k = 0;
        let mut held: Option<Vec<u8>> = None;
        loop {
            let pkts = drain(&mut self.client, self.now);
            if pkts.is_empty() {
                break;
            }
            for mut p in pkts {
                let f = fate(k);
                k += 1;
                match f {
                    Fate::Deliver => self.deliver(&p, checked),
                    Fate::Drop => {}
                    Fate::Duplicate => {
                        self.deliver(&p, checked);
                        self.deliver(&p, checked);
                    }
                    Fate::Reorder => {
                        if let Some(h) = held.replace(p) {
                            self.deliver(&h, checked);
                        }
                    }
                    Fate::Flip(at, bit) => {
                        let at = at % p.len();
                        p[at] ^= 1 << bit;
                        self.deliver(&p, false);
                    }
                    Fate::Truncate(at) => {
                        p.truncate(at % p.len());
                        self.deliver(&p, false);
                    }
                    Fate::Ddp(at, x) => {
                        let at = 28 + usize::from(at % 16);
                        if at < p.len() {
                            p[at] ^= x;
                            crc32c::fill(&mut p);
                        }
                        self.deliver(&p, checked);
                    }
                    Fate::Sctp(at, x) => {
                        let at = usize::from(at % 24);
                        let at = if at < 8 { at } else { at + 4 };
                        if at < p.len() {
                            p[at] ^= x;
                            crc32c::fill(&mut p);
                        }
                        self.deliver(&p, checked);
                    }
                }
                if let Some(h) = held.take().filter(|_| !matches!(f, Fate::Reorder)) {
                    self.deliver(&h, checked);
                }
            }
        }
        if let Some(h) = held.take() {
            self.deliver(&h, checked);
        }
    }

    /// Time passes: every timer due fires, on all three.
    fn tick(&mut self, d: Duration) {
        self.now += d;
        let now = self.now;
        let tf = self.fast.conn.poll_timeout();
        assert_eq!(tf, self.general.conn.poll_timeout(), "the servers' timers");
        if tf.is_some_and(|t| t <= now) {
            self.fast.conn.handle_timeout(now);
            self.general.conn.handle_timeout(now);
        }
        if self.client.poll_timeout().is_some_and(|t| t <= now) {
            self.client.handle_timeout(now);
        }
        self.compare_out();
    }

    /// The two servers placed the same bytes and are in the same state.
    fn assert_same(&self) {
        assert!(
            Setup::region_bytes(&self.fast) == Setup::region_bytes(&self.general),
            "the region bytes"
        );
        assert_eq!(
            difference(&state(&self.fast.conn), &state(&self.general.conn)),
            None
        );
    }

    fn region_bytes(v: &Server) -> Vec<u8> {
        let mut b = vec![0u8; REGION];
        v.memory.region(v.region).unwrap().read(0, &mut b).unwrap();
        b
    }
}

/// A connection's whole state, the prediction flag and the counts of which path took what
/// apart, the stream ids (numbered process-wide, so each connection's are its own) and the
/// addresses of memory each connection allocated.
fn state(c: &Connection) -> String {
    let mut s = format!("{c:?}").replace("header_prediction: true", "header_prediction: false");
    for field in [
        "predicted_in: ",
        "predicted_out: ",
        "in_order_tagged: ",
        "fused_segments: ",
        // The send side's prediction: a region send's (a Read Response's) later segments.
        "segments_continued: ",
        "StreamId(",
        // Each server's own memory (an RDMAP stream's inline receive buffers).
        "ptr: 0x",
    ] {
        let mut from = 0;
        while let Some(at) = s[from..].find(field).map(|a| from + a) {
            let digits = at + field.len();
            let end = s[digits..]
                .find(|c: char| !c.is_ascii_hexdigit())
                .map_or(s.len(), |n| digits + n);
            s.replace_range(digits..end, "0");
            from = digits;
        }
    }
    s
}

/// Where two states first differ, with what surrounds it (the whole of each is long).
fn difference(a: &str, b: &str) -> Option<String> {
    let at = a
        .bytes()
        .zip(b.bytes())
        .position(|(x, y)| x != y)
        .or((a.len() != b.len()).then(|| a.len().min(b.len())))?;
    let from = at.saturating_sub(300);
    let window = |s: &str| {
        s.get(from..(at + 100).min(s.len()))
            .unwrap_or("")
            .to_string()
    };
    Some(format!(
        "fused: ...{}\ngeneral: ...{}",
        window(a),
        window(b)
    ))
}

/// One of the client's work requests.
#[derive(Debug, Clone)]
enum Op {
    /// A tagged write of `len` bytes at this offset of the region (past its end: refused
    /// by RFC 5041 §7.1 check "base or bounds", which ends the stream).
    Write { offset: u32, len: u16 },
    /// A tagged write of `len` bytes at `offset` (modulo the registration's length and 256
    /// bytes more) into one of [`more_registrations`].
    WriteTo { which: u8, offset: u32, len: u16 },
    /// An untagged send of `len` bytes (over the posted buffer's length: an error too).
    Send { len: u16 },
    /// On an RDMAP stream, an RDMA Read of `len` bytes (zero included, RFC 5040 §5.2) at
    /// `offset` (as [`Op::WriteTo`]) into the client's sink: three times in four of the one
    /// registration that grants remote read, else of any of the servers' (refused, but for
    /// that one). The servers' Read Responses are compared as their other packets are. On a
    /// plain DDP stream, nothing.
    Read { which: u8, offset: u32, len: u16 },
    /// The servers terminate the session (RFC 5043 §6.3), perhaps with the client's segments
    /// still on the way or waiting for retransmission: those are not placed.
    Terminate,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0u32..(REGION as u32 - 4096), 1u16..4096)
            .prop_map(|(offset, len)| Op::Write { offset, len }),
        1 => (REGION as u32 - 100..REGION as u32 + 100, 1u16..400)
            .prop_map(|(offset, len)| Op::Write { offset, len }),
        3 => (any::<u8>(), any::<u32>(), 1u16..3000)
            .prop_map(|(which, offset, len)| Op::WriteTo { which, offset, len }),
        2 => (1u16..600).prop_map(|len| Op::Send { len }),
        3 => (any::<u8>(), any::<u32>(), 0u16..2048)
            .prop_map(|(which, offset, len)| Op::Read { which, offset, len }),
        1 => Just(Op::Terminate),
    ]
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![
        16 => Just(Fate::Deliver),
        2 => Just(Fate::Drop),
        1 => Just(Fate::Duplicate),
        2 => Just(Fate::Reorder),
        1 => (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Fate::Flip(at, bit)),
        1 => any::<usize>().prop_map(Fate::Truncate),
        1 => (any::<u8>(), 1u8..=255).prop_map(|(at, x)| Fate::Ddp(at, x)),
        1 => (any::<u8>(), 1u8..=255).prop_map(|(at, x)| Fate::Sctp(at, x)),
    ]
}

/// Posts the client's work request `k`: a DDP send (RFC 4296), or on an RDMAP stream an
/// RDMA Write or a Send (RFC 5040 §5.1, §5.3). The client refuses what it cannot send (after
/// a Terminate); either way the servers see the same.
fn post(s: &mut Setup, k: usize, op: &Op, rdmap: bool) {
    let (stag, to_base) = (s.fast.reg.stag, s.fast.reg.to_base);
    if let Op::Read { which, offset, len } = *op {
        if !rdmap {
            return;
        }
        let all: Vec<Registered> = std::iter::once(s.fast.reg)
            .chain(s.fast.more.iter().copied())
            .collect();
        let r = if which % 4 == 0 {
            all[usize::from(which / 4) % all.len()]
        } else {
            s.fast.more[0]
        };
        let offset = u64::from(offset) % (r.len.min(REGION as u64) + 256);
        let sink = s.client_sink.unwrap();
        let req = RdmaRequest {
            wr_id: k as u64,
            stream: STREAM,
            op: RdmaOp::Read {
                source: r.stag,
                source_to: r.to_base.wrapping_add(offset),
                sink: sink.stag,
                sink_to: offset % (REGION as u64 - u64::from(len)),
                len: u32::from(len),
            },
            data: Payload::Bytes(Vec::new()),
            signaled: true,
        };
        let _ = s.client.post_rdma(req, s.client_memory.stags());
        return;
    }
    let (stag, to_base, offset, len) = match *op {
        Op::Write { offset, len } => (stag, to_base, Some(u64::from(offset)), len),
        Op::WriteTo { which, offset, len } => {
            let r = s.fast.more[usize::from(which) % s.fast.more.len()];
            let offset = u64::from(offset) % (r.len + 256);
            (r.stag, r.to_base, Some(offset), len)
        }
        Op::Send { len } => (stag, to_base, None, len),
        Op::Terminate | Op::Read { .. } => unreachable!("not a write or a send"),
    };
    let data: Vec<u8> = (0..usize::from(len))
        .map(|i| (i as u8).wrapping_mul(29) ^ k as u8)
        .collect();
    if rdmap {
        let op = match offset {
            Some(offset) => RdmaOp::Write {
                stag,
                to: to_base.wrapping_add(offset),
            },
            None => RdmaOp::Send {
                solicited: false,
                invalidate: None,
            },
        };
        let req = RdmaRequest {
            wr_id: k as u64,
            stream: STREAM,
            op,
            data: Payload::Bytes(data),
            signaled: true,
        };
        let _ = s.client.post_rdma(req, s.client_memory.stags());
        return;
    }
    let kind = match offset {
        Some(offset) => SendKind::Tagged {
            stag,
            to: to_base.wrapping_add(offset),
            rsvd_ulp: 0x5a,
        },
        None => SendKind::Untagged {
            qn: 0,
            rsvd_ulp: [1, 2, 3, 4, 5],
        },
    };
    let _ = s.client.post_send(SendRequest {
        wr_id: k as u64,
        stream: STREAM,
        kind,
        data: data.into(),
        signaled: true,
    });
}

/// The fused path takes the packets it is for: in a plain transfer of tagged writes (DDP's,
/// and RDMA Writes on an RDMAP stream) every segment is taken by it on the predicting server
/// and none on the other. Every other test here holds the fused path to the general path's
/// effect; without this one, a fused path that always declined would pass them all.
#[test]
fn the_fused_path_takes_a_plain_tagged_transfer() {
    for rdmap in [false, true] {
        let mut s = setup(rdmap);
        for k in 0..20 {
            let op = Op::Write {
                offset: 3000 * k as u32,
                len: 2900,
            };
            post(&mut s, k, &op, rdmap);
            s.exchange(&mut |_| Fate::Deliver, false);
            s.tick(Duration::from_millis(1));
        }
        let (f, g) = (s.fast.conn.stats(), s.general.conn.stats());
        assert!(f.segments_received >= 40, "{f:?}");
        assert_eq!(
            f.fused_segments, f.segments_received,
            "every segment taken by the fused path (RDMAP: {rdmap})"
        );
        assert_eq!(g.fused_segments, 0, "the other takes none");
        assert_eq!(f.placed_bytes, 20 * 2900, "RDMAP: {rdmap}");
        // RFC 5040 §5.1: an RDMA Write tells the Data Sink's ULP nothing.
        let delivered = s
            .fast
            .log
            .iter()
            .filter(|i| matches!(i, Indication::TaggedDelivered { .. }))
            .count();
        assert_eq!(delivered, if rdmap { 0 } else { 20 });
        s.assert_same();
    }
}

/// A hostile peer's segment after its own Terminate (RFC 5043 §6.3: nothing follows it in
/// DDP-SSN order), in order at SCTP and at DDP: the session refuses it, so the fused path
/// must not place it. A well-behaved client never sends one; the packet is made from one of
/// its writes, with the TSN and DDP-SSN after the Terminate's.
#[test]
fn the_fused_path_places_nothing_after_the_peers_terminate() {
    let mut s = setup(false);
    post(
        &mut s,
        0,
        &Op::Write {
            offset: 0,
            len: 100,
        },
        false,
    );
    let write = drain(&mut s.client, s.now).remove(0);
    s.deliver(&write, false);
    s.client.terminate(STREAM).unwrap();
    let terminate = drain(&mut s.client, s.now).remove(0);
    // One DATA chunk of PPID 17 (a session control message, RFC 5043 §5.2).
    assert_eq!((terminate[12], &terminate[24..28]), (0, &[0, 0, 0, 17][..]));
    s.deliver(&terminate, false);
    let tsn = u32::from_be_bytes(terminate[16..20].try_into().unwrap());
    let ssn = u16::from_be_bytes([terminate[28], terminate[29]]);
    let mut after = write.clone();
    after[16..20].copy_from_slice(&tsn.wrapping_add(1).to_be_bytes());
    after[28..30].copy_from_slice(&ssn.wrapping_add(1).to_be_bytes());
    // Elsewhere in the region than the write before.
    after[43] ^= 0x80;
    crc32c::fill(&mut after);
    s.deliver(&after, false);
    assert_eq!(
        s.fast.conn.stats().fused_segments,
        1,
        "the write before only"
    );
    s.assert_same();
}

/// RFC 5040 §4.2, §5.2, §7: on an RDMAP stream only an RDMA Write of RDMAP's version is
/// plain tagged placement. A tagged segment in order in every other way but whose RsvdULP
/// says Read Response (none was requested) or another RDMAP version is RDMAP's to refuse:
/// not placed by the fused path, refused as the general path refuses it.
#[test]
fn the_fused_path_leaves_rdmaps_other_tagged_segments_to_rdmap() {
    for (what, rsvd_ulp) in [
        (
            "a Read Response",
            Control::new(Opcode::ReadResponse).tagged_rsvd_ulp(),
        ),
        (
            "RDMAP version 2",
            Control {
                version: 2,
                opcode: Opcode::Write,
            }
            .tagged_rsvd_ulp(),
        ),
    ] {
        let mut s = setup(true);
        let write = Op::Write {
            offset: 0,
            len: 100,
        };
        post(&mut s, 0, &write, true);
        let mut pkt = drain(&mut s.client, s.now).remove(0);
        // The DDP Segment's RsvdULP: after the common header (12), the DATA chunk's (16),
        // the DDP-SSN (2) and the DDP control octet.
        assert_eq!(pkt[31], Control::new(Opcode::Write).tagged_rsvd_ulp());
        pkt[31] = rsvd_ulp;
        crc32c::fill(&mut pkt);
        s.deliver(&pkt, false);
        let (f, g) = (s.fast.conn.stats(), s.general.conn.stats());
        assert_eq!((f.fused_segments, f.placed_bytes), (0, 0), "{what}");
        assert_eq!(g.receive_errors, 1, "{what} refused by RDMAP");
        assert_eq!(f.receive_errors, 1, "{what}");
        s.assert_same();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// RFC 9260 §6.2 and §8.5, RFC 5043 §9 and §10, RFC 5041 §5.4 and §7.1, RFC 5040 §4.2 and
    /// §5.1 as the general path applies them: the server with the fused path is
    /// indistinguishable from the other, on a DDP stream and on an RDMAP one.
    #[test]
    fn the_fused_path_changes_nothing_but_the_path(
        ops in prop::collection::vec(op(), 1..24),
        fates in prop::collection::vec(fate(), 256),
        checked in any::<bool>(),
        rdmap in any::<bool>(),
    ) {
        let mut s = setup(rdmap);
        for (k, op) in ops.iter().enumerate() {
            if let Op::Terminate = op {
                let rf = s.fast.conn.terminate(STREAM);
                prop_assert_eq!(rf, s.general.conn.terminate(STREAM));
                s.compare_out();
            } else {
                post(&mut s, k, op, rdmap);
            }
            s.exchange(&mut |i| fates[(i + 7 * k) % fates.len()], checked);
            s.tick(Duration::from_millis(10));
        }
        // Retransmissions until nothing is left outstanding.
        for _ in 0..400 {
            s.exchange(&mut |_| Fate::Deliver, checked);
            s.tick(Duration::from_millis(50));
        }
        prop_assert_eq!(&s.fast.log, &s.general.log);
        prop_assert!(Setup::region_bytes(&s.fast) == Setup::region_bytes(&s.general));
        prop_assert_eq!(difference(&state(&s.fast.conn), &state(&s.general.conn)), None);
        prop_assert_eq!(s.general.conn.stats().fused_segments, 0);
    }
}
