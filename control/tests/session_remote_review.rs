//! Regressions from an independent review of moving the RFC 5043 §6 machine to the control
//! thread: a raw SCTP peer (hand-made DDP chunks) against a server `Connection` with an
//! emulated control thread (the stream's chunks held in the connection while its session is
//! away, applied after its return; the review's version parked whole packets). Two failed as written: a held Initiate routed after the association had ended
//! opened a session on a closed association (and held a §6.4 pending slot); and a session's
//! end in the middle of a packet flushed queued sends before the packet's SACK completed the
//! earlier ones, out of posting order. The other two pinned the reference behaviour. At the
//! end, issue 12's rules for a session that is away: only its stream waits, and what waits
//! is the receive buffer the peer may not overrun.

#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use ddpdk_control::conn::{
    Accept, Applied, Completion, ConnConfig, Connection, Indication, Listener, Op, OpResult,
    PostError, SendKind, SendRequest, SessionCall, Status, HELD_ITEM_COST,
};
use ddpdk_control::memory::Memory;
use ddpdk_control::session::{Event, PendingLimit};
use ddpdk_dataplane::sctp::{Association, Config, Endpoint, Instant, Message};
use ddpdk_dataplane::wire::crc32c;

const S: u16 = 1;
const RAW_PORT: u16 = 6001;
const SRV_PORT: u16 = 6002;

fn raw_addr() -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1))
}
fn srv_addr() -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2))
}

fn sctp(port: u16, slots: usize) -> Config {
    Config {
        local_port: port,
        send_slots: slots,
        path_mtu: 1500,
        rto_initial: Duration::from_millis(200),
        rto_min: Duration::from_millis(50),
        rto_max: Duration::from_secs(2),
        ..Config::default()
    }
}

fn ctl(ssn: u16, code: u16, pd: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&ssn.to_be_bytes());
    v.extend_from_slice(&code.to_be_bytes());
    v.extend_from_slice(pd);
    v
}

struct Rig {
    now: Instant,
    raw: Association,
    raw_rx: Vec<(u16, u32, Vec<u8>)>,
    listener: Listener,
    limit: PendingLimit,
    conn: Option<Box<Connection>>,
    memory: Memory,
    inds: Vec<Indication>,
    comps: Vec<Completion>,
    buf: Vec<u8>,
    /// Emulated control thread.
    remote: bool,
    auto: bool,
    calls: VecDeque<SessionCall>,
}

impl Rig {
    fn new(srv_slots: usize, remote: bool) -> Rig {
        let now = Instant::from_nanos(1_000_000_000);
        let mut raw_ep = Endpoint::new(sctp(RAW_PORT, 256), [7; 32]).unwrap();
        let raw = raw_ep.connect(now, srv_addr(), SRV_PORT);
        let ep = Endpoint::new(sctp(SRV_PORT, srv_slots), [9; 32]).unwrap();
        let (memory, _) = Memory::new(1024, 0, 0x1234_5678_9abc);
        let limit = PendingLimit::new(16);
        let mut r = Rig {
            now,
            raw,
            raw_rx: Vec::new(),
            listener: Listener::new(ep, ConnConfig::default(), limit.clone()),
            limit,
            conn: None,
            memory,
            inds: Vec::new(),
            comps: Vec::new(),
            buf: vec![0; 65536],
            remote,
            auto: true,
            calls: VecDeque::new(),
        };
        r.run_for(Duration::from_millis(50));
        assert!(r.conn.is_some(), "association up");
        r
    }

    fn conn(&mut self) -> &mut Connection {
        self.conn.as_mut().unwrap()
    }

    fn drain(&mut self) {
        if let Some(c) = self.conn.as_mut() {
            while let Some(x) = c.poll_completion() {
                self.comps.push(x);
            }
            while let Some(x) = c.poll_indication() {
                self.inds.push(x);
            }
            while let Some(call) = c.poll_session_call() {
                self.calls.push_back(call);
            }
        }
    }

    /// The emulated control thread runs every lent session and returns it; the connection
    /// then applies what waited for it.
    fn control(&mut self) {
        while let Some(mut call) = self.calls.pop_front() {
            call.run();
            let c = self.conn.as_mut().unwrap();
            c.return_session(self.now, call, &self.memory);
            self.drain();
        }
    }

    fn deliver_to_server(&mut self, p: &[u8]) {
        let live = self
            .conn
            .as_ref()
            .is_some_and(|c| !c.association().is_closed());
        if live {
            let c = self.conn.as_mut().unwrap();
            let _ = c.handle(self.now, p, &self.memory);
        } else {
            let mut out = vec![0u8; 65536];
            match self
                .listener
                .handle(self.now, raw_addr(), p, &mut out, &self.memory)
            {
                Accept::Ignored => {}
                Accept::Reply(n) => {
                    let rx = &mut self.raw_rx;
                    let _ = self.raw.handle(self.now, &out[..n], &mut |m: Message<'_>| {
                        rx.push((m.stream, m.ppid, m.data.to_vec()))
                    });
                }
                Accept::Connection(mut c) => {
                    c.set_remote_sessions(self.remote);
                    self.conn = Some(c);
                }
            }
        }
        self.drain();
        if self.auto {
            self.control();
        }
    }

    fn raw_packets(&mut self) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        while let Some(n) = self.raw.poll_transmit(self.now, &mut self.buf) {
            v.push(self.buf[..n].to_vec());
        }
        v
    }

    /// What the server sends now (not delivered to the raw peer).
    fn server_packets(&mut self) -> Vec<Vec<u8>> {
        let mut pkts = Vec::new();
        if let Some(c) = self.conn.as_mut() {
            while let Some(n) = c.poll_transmit(self.now, &mut self.buf) {
                pkts.push(self.buf[..n].to_vec());
            }
        }
        pkts
    }

    fn server_to_raw(&mut self) -> bool {
        let mut pkts = Vec::new();
        if let Some(c) = self.conn.as_mut() {
            while let Some(n) = c.poll_transmit(self.now, &mut self.buf) {
                pkts.push(self.buf[..n].to_vec());
            }
        }
        self.drain();
        let moved = !pkts.is_empty();
        for p in pkts {
            let rx = &mut self.raw_rx;
            let _ = self.raw.handle(self.now, &p, &mut |m: Message<'_>| {
                rx.push((m.stream, m.ppid, m.data.to_vec()))
            });
        }
        moved
    }

    fn round(&mut self) -> bool {
        let pkts = self.raw_packets();
        let mut moved = !pkts.is_empty();
        for p in pkts {
            self.deliver_to_server(&p);
        }
        moved |= self.server_to_raw();
        moved
    }

    fn run_for(&mut self, d: Duration) {
        let until = self.now + d;
        loop {
            while self.round() {}
            let next = [
                self.raw.poll_timeout(),
                self.conn.as_ref().and_then(|c| c.poll_timeout()),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next else { return };
            if next > until {
                self.now = until;
                return;
            }
            self.now = self.now.max(next);
            if self.raw.poll_timeout().is_some_and(|t| t <= self.now) {
                self.raw.handle_timeout(self.now);
            }
            if let Some(c) = self.conn.as_mut() {
                if c.poll_timeout().is_some_and(|t| t <= self.now) {
                    c.handle_timeout(self.now);
                }
            }
            self.drain();
        }
    }

    fn events(&self, stream: u16) -> Vec<Event> {
        self.inds
            .iter()
            .filter_map(|i| match i {
                Indication::Session { stream: s, event } if *s == stream => Some(event.clone()),
                _ => None,
            })
            .collect()
    }

    /// The raw peer opens a session on `S`; the server's ULP accepts it with the PD returned.
    fn open(&mut self) -> ddpdk_dataplane::mem::Pd {
        self.raw.send(S, 17, &ctl(0, 1, b"")).unwrap();
        self.run_for(Duration::from_millis(50));
        assert!(self
            .events(S)
            .iter()
            .any(|e| matches!(e, Event::InitiateReceived { .. })));
        let pd = self.memory.alloc_pd();
        self.conn().accept(S, pd, b"").unwrap();
        self.run_for(Duration::from_millis(500));
        assert!(self
            .raw_rx
            .iter()
            .any(|(s, p, d)| *s == S && *p == 17 && d[2..4] == [0, 2]));
        pd
    }
}

impl Rig {
    /// A 4 KiB local-write region of `pd` posted whole to queue 0 of stream `S` as receive
    /// `wr_id`: what `Connection::apply` answered.
    fn post_receive(
        &mut self,
        pd: ddpdk_dataplane::mem::Pd,
        wr_id: u64,
    ) -> Result<Applied, PostError> {
        let region = self.memory.alloc_region(4096).unwrap();
        let reg = self
            .memory
            .register(ddpdk_control::memory::MemoryRegistration {
                pd,
                region,
                offset: 0,
                len: 4096,
                access: ddpdk_dataplane::mem::Access::LOCAL_WRITE,
                stream: None,
                to_base: 0,
            })
            .unwrap();
        let buffer = self.memory.receive_buffer(pd, reg.stag, 0, 4096).unwrap();
        let post = Op::PostRecv {
            stream: S,
            qn: 0,
            wr_id,
            buffer,
        };
        let now = self.now;
        let c = self.conn.as_mut().unwrap();
        c.apply(now, post, self.memory.stags())
    }
}

/// Appends an ABORT chunk (no causes, T bit clear) to a packet and fixes its CRC32c.
fn with_abort(p: &[u8]) -> Vec<u8> {
    let mut v = p.to_vec();
    v.extend_from_slice(&[6, 0, 0, 4]);
    v[8..12].copy_from_slice(&[0; 4]);
    crc32c::fill(&mut v);
    v
}

/// A peer packet carries two control messages for one stream, the second a fresh Initiate,
/// and ends with an ABORT. Judged where it arrives, the Initiate meets the old session
/// before the association is over, and the ULP hears nothing of stream `S` after Closed.
/// With the machine on the control thread, the Initiate is held behind the first message,
/// the ABORT ends the association meanwhile, and on the session's return the Initiate starts
/// a new session on the closed association: the ULP hears InitiateReceived after Closed, and a
/// §6.4 pending-Initiate slot is held by a session on a dead association.
#[test]
fn a_held_initiate_after_the_association_ended_starts_no_session() {
    let mut r = Rig::new(256, true);
    r.auto = false;
    // A junk Accept on the idle stream (lent), then an Initiate (held behind it).
    r.raw.send(S, 17, &ctl(0, 2, b"")).unwrap();
    r.raw.send(S, 17, &ctl(0, 1, b"late")).unwrap();
    let pkts = r.raw_packets();
    assert_eq!(pkts.len(), 1, "both control messages in one packet");
    let p = with_abort(&pkts[0]);
    r.deliver_to_server(&p);
    assert!(r.conn().association().is_closed(), "the ABORT was taken");
    assert!(r.conn().sessions_lent());
    r.control();
    r.drain();
    let closed = r
        .inds
        .iter()
        .position(|i| matches!(i, Indication::Closed(_)))
        .expect("Closed");
    let after: Vec<Indication> = r.inds[closed + 1..].to_vec();
    let pending = r.limit.pending();
    let lent = r.conn().sessions_lent();
    assert!(
        after.is_empty() && pending == 0 && !lent,
        "indications after Closed: {after:?}; pending-Initiate slots held: {pending}; \
         all: {:?}",
        r.inds
    );
}

/// The same packet judged in place (remote sessions off): the reference behaviour.
#[test]
fn reference_inline_nothing_after_closed() {
    let mut r = Rig::new(256, false);
    r.raw.send(S, 17, &ctl(0, 2, b"")).unwrap();
    r.raw.send(S, 17, &ctl(0, 1, b"late")).unwrap();
    let pkts = r.raw_packets();
    assert_eq!(pkts.len(), 1);
    let p = with_abort(&pkts[0]);
    r.deliver_to_server(&p);
    r.drain();
    let closed = r
        .inds
        .iter()
        .position(|i| matches!(i, Indication::Closed(_)))
        .expect("Closed");
    assert!(r.inds[closed + 1..].is_empty(), "{:?}", r.inds);
    assert_eq!(r.limit.pending(), 0);
}

fn write(wr_id: u64) -> SendRequest {
    SendRequest {
        wr_id,
        stream: S,
        kind: SendKind::Tagged {
            stag: ddpdk_dataplane::mem::Stag(0x1234_5600),
            to: 0,
            rsvd_ulp: 0,
        },
        data: vec![wr_id as u8; 100].into(),
        signaled: true,
    }
}

/// Send completions come in posting order on a stream (verbs; RFC 5041 §5.4 completes a
/// message once SCTP acknowledged it). Send A is in flight, send B waits for SCTP room; the
/// peer's SACK of A and its Terminate arrive in one packet (control chunks before DATA).
/// A completes Success, then B Flushed. Single-thread path (remote sessions off).
fn completion_order(remote: bool) {
    let mut r = Rig::new(1, remote);
    r.open();
    r.conn().post_send(write(1)).unwrap();
    r.conn().post_send(write(2)).unwrap();
    // A to the peer; B waits (one send slot).
    assert!(r.server_to_raw());
    assert!(r.raw_rx.iter().any(|(s, p, _)| *s == S && *p == 16));
    // The peer's Terminate (its DDP-SSN 1: after its Initiate) with the SACK of A.
    r.raw.send(S, 17, &ctl(1, 4, b"")).unwrap();
    let pkts = r.raw_packets();
    assert_eq!(pkts.len(), 1);
    assert_eq!(pkts[0][12], 3, "SACK first, bundled with the DATA");
    r.deliver_to_server(&pkts[0]);
    r.run_for(Duration::from_millis(500));
    let got: Vec<(u64, Status)> = r.comps.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(got, vec![(1, Status::Success), (2, Status::Flushed)]);
}

#[test]
fn completions_stay_in_posting_order_single_thread() {
    completion_order(false);
}

#[test]
fn completions_stay_in_posting_order_remote() {
    completion_order(true);
}

// ---------------------------------------------------------------------------------------------
// Issue 12: a session at the control thread parks only its own stream, and what it holds is the
// receive buffer (a_rwnd), which a peer may not overrun.
// ---------------------------------------------------------------------------------------------

/// A tagged DDP Segment chunk payload of `len` zero bytes at DDP-SSN `ssn` (no STag needed when
/// `len` is 0: RFC 5041 §7.1 checks non-zero segments).
fn tseg(ssn: u16, len: usize) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&ssn.to_be_bytes());
    v.extend_from_slice(&[0xc1, 0, 0x12, 0x34, 0x56, 0x00]);
    v.extend_from_slice(&0u64.to_be_bytes());
    v.extend(std::iter::repeat_n(0u8, len));
    v
}

/// `p` (one packet of DATA chunks) with its first chunk's TSN moved up by `by`, CRC32c fixed.
fn with_tsn_plus(p: &[u8], by: u32) -> Vec<u8> {
    let mut v = p.to_vec();
    let tsn = u32::from_be_bytes([v[16], v[17], v[18], v[19]]).wrapping_add(by);
    v[16..20].copy_from_slice(&tsn.to_be_bytes());
    v[8..12].copy_from_slice(&[0; 4]);
    crc32c::fill(&mut v);
    v
}

/// `p` (one packet of one whole DATA chunk) as two packets of its two fragments (RFC 9260
/// §6.9: B set on the first, TSN n; E on the second, TSN n + 1), the first `first` bytes of
/// its user data in the first.
fn in_two_fragments(p: &[u8], first: usize) -> [Vec<u8>; 2] {
    let (head, chunk) = p.split_at(12);
    let data = &chunk[16..usize::from(u16::from_be_bytes([chunk[2], chunk[3]]))];
    let tsn = u32::from_be_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]);
    let piece = |flags: u8, tsn: u32, part: &[u8]| {
        let mut v = head.to_vec();
        v.extend_from_slice(&[0, (chunk[1] & !3) | flags]);
        v.extend_from_slice(&((16 + part.len()) as u16).to_be_bytes());
        v.extend_from_slice(&tsn.to_be_bytes());
        v.extend_from_slice(&chunk[8..16]);
        v.extend_from_slice(part);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v[8..12].copy_from_slice(&[0; 4]);
        crc32c::fill(&mut v);
        v
    };
    [
        piece(2, tsn, &data[..first]),
        piece(1, tsn.wrapping_add(1), &data[first..]),
    ]
}

/// A rig whose raw peer sent a control message on `S` (its session lent to a control
/// thread that never returns it), and the packet of one DATA chunk carrying `data` on `S`
/// that the raw peer would send next (not delivered): a template to replay at other TSNs.
fn lent_with(data: &[u8]) -> (Rig, Vec<u8>) {
    let mut r = Rig::new(256, true);
    r.auto = false;
    r.raw.send(S, 17, &ctl(0, 1, b"")).unwrap();
    r.run_for(Duration::from_millis(50));
    assert!(r.conn().sessions_lent());
    r.raw.send(S, 16, data).unwrap();
    let mut template = r.raw_packets();
    assert_eq!(template.len(), 1);
    assert_eq!(template[0][12], 0, "a DATA chunk first");
    (r, template.remove(0))
}

/// [`with_tsn_plus`], the DDP-SSN of its first chunk (RFC 5043 §5.2: the user data's first
/// two bytes) set to `ssn`.
fn with_tsn_and_ssn(p: &[u8], by: u32, ssn: u16) -> Vec<u8> {
    let mut v = with_tsn_plus(p, by);
    v[28..30].copy_from_slice(&ssn.to_be_bytes());
    v[8..12].copy_from_slice(&[0; 4]);
    crc32c::fill(&mut v);
    v
}

/// The a_rwnd of the first SACK among `packets`.
fn sack_a_rwnd(packets: &[Vec<u8>]) -> Option<u32> {
    packets
        .iter()
        .find(|p| p.get(12) == Some(&3))
        .map(|p| u32::from_be_bytes([p[20], p[21], p[22], p[23]]))
}

/// While stream 2's session is at the control thread, stream 1 goes on: a message on it is
/// delivered and acknowledged, a HEARTBEAT is answered, and the ULP's operations on stream 1
/// take effect at once, while those on stream 2 wait for its session (in order, their results
/// reported when applied).
#[test]
fn a_waiting_session_parks_only_its_own_stream() {
    let mut r = Rig::new(256, true);
    r.open();
    r.auto = false;
    // The peer initiates on stream 2: its session goes to the control thread, which does not
    // answer yet.
    r.raw.send(2, 17, &ctl(0, 1, b"")).unwrap();
    r.run_for(Duration::from_millis(50));
    assert!(r.conn().sessions_lent());
    // A zero-length tagged message on stream 1 (DDP-SSN 1 after the peer's Initiate).
    r.raw.send(S, 16, &tseg(1, 0)).unwrap();
    r.run_for(Duration::from_millis(50));
    assert!(r.conn().sessions_lent(), "stream 2's session is still away");
    assert!(
        r.inds
            .iter()
            .any(|i| matches!(i, Indication::TaggedDelivered { stream: S, .. })),
        "stream 1's message delivered meanwhile: {:?}",
        r.inds
    );
    assert_eq!(r.raw.queued(), 0, "and acknowledged: nothing outstanding");
    // Heartbeats are answered while the session is away (the association is not parked).
    let acks = r.raw.stats().heartbeat_acks_in;
    r.run_for(Duration::from_secs(40));
    assert!(
        r.raw.stats().heartbeat_acks_in > acks,
        "no HEARTBEAT ACK while a session was away"
    );
    // Operations: stream 1 at once, stream 2 deferred.
    // No local STags in these operations: an empty table resolves nothing.
    let stags = ddpdk_dataplane::mem::StagTable::new(16, 1);
    let now = r.now;
    let on_1 = r.conn().apply(now, Op::Terminate { stream: S }, &stags);
    assert_eq!(on_1, Ok(Applied::Done));
    let pd = r.memory.alloc_pd();
    let accept = Op::Accept {
        stream: 2,
        pd,
        private_data: Vec::new(),
    };
    assert_eq!(r.conn().apply(now, accept, &stags), Ok(Applied::Deferred));
    assert_eq!(
        r.conn().apply(now, Op::Terminate { stream: 2 }, &stags),
        Ok(Applied::Deferred)
    );
    assert_eq!(r.conn().stats().ops_held, 2);
    // The session comes back: the held Accept, then the held Terminate, in order.
    r.control();
    let results: Vec<_> = std::iter::from_fn(|| r.conn().poll_op_result()).collect();
    assert_eq!(
        results,
        vec![
            OpResult {
                op: "accept",
                stream: Some(2),
                wr_id: None,
                result: Ok(Applied::Done)
            },
            OpResult {
                op: "terminate",
                stream: Some(2),
                wr_id: None,
                result: Ok(Applied::Done)
            }
        ]
    );
    r.run_for(Duration::from_millis(200));
    let stream_2: Vec<u16> = r
        .raw_rx
        .iter()
        .filter(|(s, p, _)| *s == 2 && *p == 17)
        .map(|(_, _, d)| u16::from_be_bytes([d[2], d[3]]))
        .collect();
    assert_eq!(
        stream_2,
        vec![2, 4],
        "Accept then Terminate reached the peer"
    );
}

/// RFC 9260 §6.2: what the connection holds for a session that is away is its receive
/// buffer. Each SACK's a_rwnd tells what is left; a peer that sends beyond it is dropped (the
/// DATA unacknowledged) and counted, never buffered ("When the receiver's advertised window
/// is 0, the receiver MUST drop any new incoming DATA chunk with a TSN larger than the largest
/// TSN received so far"). Once the session is back and the chunks are routed, a SACK reopens
/// the window at once. The peer here ignores a_rwnd: 200 chunks of 1 KiB against 128 KiB.
#[test]
fn rfc9260_6_2_a_peer_beyond_the_receive_buffer_is_dropped_and_counted() {
    let (mut r, template) = lent_with(&tseg(1, 1000));
    let template = [template];
    let budget = r.conn().association().receive_buffer();
    let chunk = tseg(1, 1000).len();
    for k in 0..200 {
        r.deliver_to_server(&with_tsn_plus(&template[0], k));
    }
    let held = r.conn().stats().chunks_held;
    let dropped = r.conn().association().stats().rwnd_dropped;
    assert_eq!(held + dropped, 200, "every chunk held or dropped");
    assert_eq!(
        held as usize,
        budget / (chunk + HELD_ITEM_COST),
        "held up to the buffer, no more"
    );
    assert!(r.conn().receive_room() < chunk + HELD_ITEM_COST);
    let out = r.server_packets();
    let told = sack_a_rwnd(&out).expect("a SACK");
    assert!(told < chunk as u32, "a_rwnd {told} with the buffer full");
    // The session comes back: the held chunks are routed and the room is free again.
    r.control();
    assert_eq!(r.conn().receive_room(), budget);
    let out = r.server_packets();
    assert_eq!(
        sack_a_rwnd(&out),
        Some(budget as u32),
        "a window update SACK"
    );
}

/// (Review, session 71) RFC 9260 §6.2: a_rwnd is the memory held for the peer. Each chunk
/// held behind a session that is away was charged its bytes alone, but costs a queue entry
/// and a heap block besides (about a hundred bytes): a peer sending one-byte chunks behind a
/// control message of its own (no help from the ULP needed) had some four million held per
/// association within a 4 MiB window, hundreds of MB. Each is charged what it takes: the
/// peer is held to the buffer.
#[test]
fn rfc9260_6_2_one_byte_chunks_held_behind_a_session_cost_what_they_take() {
    let (mut r, template) = lent_with(&[0x5a]);
    let template = [template];
    let budget = r.conn().association().receive_buffer();
    let n = 4 * budget / HELD_ITEM_COST;
    for k in 0..n {
        r.deliver_to_server(&with_tsn_plus(&template[0], k as u32));
    }
    let held = r.conn().stats().chunks_held as usize;
    assert!(held > 0);
    // SCTP takes a chunk while its bytes fit the room left: the last one may pass it by
    // its entry's cost.
    assert!(
        held * (1 + HELD_ITEM_COST) <= budget + HELD_ITEM_COST,
        "{held} one-byte chunks held within a buffer of {budget} ({HELD_ITEM_COST} a chunk)"
    );
    let dropped = r.conn().association().stats().rwnd_dropped as usize;
    assert_eq!(held + dropped, n, "every chunk held or dropped");
    r.control();
    assert_eq!(r.conn().receive_room(), budget, "all given back");
}

/// (Review, session 71) RFC 9260 §6.2: SCTP took a whole chunk that filled a gap whatever
/// the room ("nothing is held for reordering"), but a stream whose session is away holds
/// what comes on it: a peer that sent one chunk far ahead, then filled the gap behind it,
/// had every one of them held, about 8 000 full chunks (12 MB at MTU 1500) against a
/// 128 KiB buffer. A chunk the connection would hold is judged against the room as a new
/// one is: dropped unacknowledged beyond it, counted.
#[test]
fn rfc9260_6_2_chunks_filling_a_gap_on_a_held_stream_keep_to_the_buffer() {
    let (mut r, template) = lent_with(&tseg(1, 1000));
    let template = [template];
    let budget = r.conn().association().receive_buffer();
    let chunk = tseg(1, 1000).len();
    let n = 3 * budget / chunk;
    // The last first, then the gap behind it.
    r.deliver_to_server(&with_tsn_plus(&template[0], n as u32));
    for k in 0..n {
        r.deliver_to_server(&with_tsn_plus(&template[0], k as u32));
    }
    let held = r.conn().stats().chunks_held as usize;
    let dropped = r.conn().association().stats().rwnd_dropped as usize;
    assert_eq!(held + dropped, n + 1, "every chunk held or dropped");
    assert!(
        held * (chunk + HELD_ITEM_COST) <= budget + chunk + HELD_ITEM_COST,
        "{held} chunks of {chunk} bytes held within a buffer of {budget}"
    );
    r.control();
    assert_eq!(r.conn().receive_room(), budget, "all given back");
}

/// (Review of the above) The same with each message in two fragments (RFC 9260 §6.9): the
/// reassembly judged a fragment against its own budget only, then delivered the whole
/// message to the stream that holds it whatever the room.
#[test]
fn rfc9260_6_2_fragments_filling_a_gap_on_a_held_stream_keep_to_the_buffer() {
    let (mut r, whole) = lent_with(&tseg(1, 1000));
    let template = in_two_fragments(&whole, 600);
    let budget = r.conn().association().receive_buffer();
    let n = 3 * budget / 1000;
    let both = |r: &mut Rig, k: usize| {
        for t in &template {
            r.deliver_to_server(&with_tsn_plus(t, 2 * k as u32));
        }
    };
    // The last first, then the gap behind it.
    both(&mut r, n);
    for k in 0..n {
        both(&mut r, k);
    }
    let held = r.conn().stats().chunks_held as usize;
    assert!(held > 0);
    assert!(
        held * (1014 + HELD_ITEM_COST) <= budget + 1014 + HELD_ITEM_COST,
        "{held} messages of 1014 bytes held within a buffer of {budget}"
    );
    r.control();
    assert_eq!(r.conn().receive_room(), budget, "all given back");
}

/// (Review, session 71) RFC 9260 §6.2 with RFC 5041 §5.4: messages Placed behind a missing
/// DDP-SSN wait for Delivery in the stream's pending heap, 32 bytes each, up to the DDP
/// window (32768: 1 MiB a stream) for zero-length tagged messages that need no STag; none
/// of it was charged to the receive buffer. It is now: the a_rwnd falls with them, and
/// comes back once they are delivered.
#[test]
fn rfc9260_6_2_messages_waiting_for_delivery_are_charged_to_the_buffer() {
    let mut r = Rig::new(256, false);
    r.open();
    let budget = r.conn().association().receive_buffer();
    assert_eq!(r.conn().receive_room(), budget);
    let n = 2000u16;
    // DDP-SSN 1 missing; 2..=n+1 zero-length tagged messages.
    for ssn in 2..=n + 1 {
        while r.raw.send(S, 16, &tseg(ssn, 0)).is_err() {
            r.run_for(Duration::from_millis(1));
        }
    }
    r.run_for(Duration::from_millis(50));
    let room = r.conn().receive_room();
    assert!(
        room + usize::from(n) * 32 <= budget,
        "{n} messages waiting, room {room} of {budget}"
    );
    // And the peer is told so: the next SACK's a_rwnd.
    r.raw.send(S, 16, &tseg(n + 2, 0)).unwrap();
    r.raw.send(S, 16, &tseg(n + 3, 0)).unwrap();
    for p in r.raw_packets() {
        r.deliver_to_server(&p);
    }
    let told = sack_a_rwnd(&r.server_packets()).expect("a SACK") as usize;
    assert!(told + usize::from(n) * 32 <= budget, "a_rwnd {told}");
    r.raw.send(S, 16, &tseg(1, 0)).unwrap();
    r.run_for(Duration::from_millis(50));
    assert_eq!(r.conn().receive_room(), budget, "given back once delivered");
}

/// A session open on `S`, the receive buffer's size, and a packet of the raw peer's tagged
/// segment (DDP-SSN 2) to send again at other TSNs and DDP-SSNs (`with_tsn_and_ssn`).
fn a_session_and_a_segment_to_renumber() -> (Rig, usize, Vec<u8>) {
    let mut r = Rig::new(256, false);
    r.open();
    let budget = r.conn().association().receive_buffer();
    r.raw.send(S, 16, &tseg(2, 0)).unwrap();
    let template = r.raw_packets().remove(0);
    (r, budget, template)
}

/// (Review of the above) The messages waiting for Delivery take the room; the DDP-SSN they
/// wait for, coming with a TSN above every other (a peer whose SCTP sends a stream's chunks
/// out of the order they were presented, RFC 5043 §10), was refused for want of that room,
/// and only its arrival gives the room back: every chunk of the association was refused
/// from then on. The chunk that releases them is taken whatever the room.
#[test]
fn rfc9260_6_2_the_segment_waited_for_is_taken_however_full_the_buffer() {
    let (mut r, budget, template) = a_session_and_a_segment_to_renumber();
    // DDP-SSN k + 2 at TSN + k, DDP-SSN 1 missing, until the buffer refuses them.
    let mut k = 0u32;
    while r.conn().association().stats().rwnd_dropped == 0 {
        r.deliver_to_server(&with_tsn_and_ssn(&template, k, k as u16 + 2));
        k += 1;
        assert!(k < 20_000);
    }
    assert!(r.conn().receive_room() < 16, "{}", r.conn().receive_room());
    r.deliver_to_server(&with_tsn_and_ssn(&template, k, 1));
    assert_eq!(
        r.conn().receive_room(),
        budget,
        "delivered, the room is back"
    );
}

/// (Review of the above) One message left waiting behind a loss after a burst of 1000 kept
/// the heap's peak charged (1024 entries, 24 KiB of a 128 KiB buffer; 120 KiB after 2049):
/// a legitimate peer's a_rwnd pinned low for as long as its loss lasted. The heap gives its
/// memory back as it is delivered.
#[test]
fn rfc9260_6_2_one_message_left_waiting_after_a_burst_keeps_no_peak_charged() {
    let (mut r, budget, template) = a_session_and_a_segment_to_renumber();
    for k in 0..1000u32 {
        r.deliver_to_server(&with_tsn_and_ssn(&template, k, k as u16 + 2));
    }
    // One more behind DDP-SSN 1002, which does not come; then DDP-SSN 1.
    r.deliver_to_server(&with_tsn_and_ssn(&template, 1000, 1003));
    r.deliver_to_server(&with_tsn_and_ssn(&template, 1001, 1));
    let room = r.conn().receive_room();
    assert!(
        room + 256 * 32 >= budget,
        "one message waits: room {room} of {budget}"
    );
}

/// (Review of the above) The heap of waiting messages keeps memory it grew to: a peer that
/// had 1000 wait, then most delivered, kept the heap's 1024 entries, charged to nothing. What
/// it holds is charged while it holds it; and it gives it back as it empties, halved once a
/// quarter full (charged at its peak until it emptied, one message left waiting behind a
/// loss pinned the a_rwnd low for as long as the loss lasted).
#[test]
fn rfc9260_6_2_the_memory_waiting_messages_grew_to_is_charged_while_held() {
    let (mut r, budget, template) = a_session_and_a_segment_to_renumber();
    // DDP-SSN 2..=401 wait behind 1, 403..=1002 behind 402: the heap grows to 1024.
    for k in 0..1000u32 {
        let ssn = if k < 400 { k + 2 } else { k + 3 };
        r.deliver_to_server(&with_tsn_and_ssn(&template, k, ssn as u16));
    }
    // DDP-SSN 1: the 400 behind it are delivered, 600 wait in a heap of 1024.
    r.deliver_to_server(&with_tsn_and_ssn(&template, 1000, 1));
    let grown = 1024 - ddpdk_dataplane::ddp::delivery::PREALLOCATED_PENDING;
    assert!(
        r.conn().receive_room() <= budget - grown * 32,
        "600 messages wait in a heap of 1024 entries: room {}",
        r.conn().receive_room()
    );
    // DDP-SSN 402: all delivered, all given back.
    r.deliver_to_server(&with_tsn_and_ssn(&template, 1001, 402));
    assert_eq!(r.conn().receive_room(), budget);
}

/// RFC 9260 §5.2.4 with RFC 5043 §6: the peer restarts while a session of ours is away at the
/// control thread. Chunks held behind the session's message that came before the restart are
/// the old incarnation's and are dropped (counted); the new incarnation's, held behind it
/// too, are its own: its first Initiate must reach the session once it is back. All of them
/// were dropped, uncounted, after SCTP had acknowledged them, and the new session hung for
/// the life of the association (an independent review).
#[test]
fn a_restart_while_a_session_is_away_keeps_the_new_incarnations_initiate_9260_5_2_4() {
    use ddpdk_control::session::State;
    let mut r = Rig::new(256, true);
    r.open();
    r.auto = false;
    // The peer's Terminate: the session goes to the control thread and stays there.
    r.raw.send(S, 17, &ctl(1, 4, b"")).unwrap();
    for p in r.raw_packets() {
        r.deliver_to_server(&p);
    }
    assert!(r.conn().sessions_lent(), "the session is away");
    // The peer restarts, its first Initiate queued before the handshake.
    let mut ep2 = Endpoint::new(sctp(RAW_PORT, 256), [8; 32]).unwrap();
    let mut raw2 = ep2.connect(r.now, srv_addr(), SRV_PORT);
    raw2.send(S, 17, &ctl(0, 1, b"new")).unwrap();
    r.raw = raw2;
    r.raw_rx.clear();
    r.run_for(Duration::from_secs(2));
    assert!(
        r.inds
            .iter()
            .any(|i| matches!(i, Indication::PeerRestarted)),
        "restart seen: {:?}",
        r.inds
    );
    r.control();
    r.auto = true;
    r.run_for(Duration::from_secs(2));
    assert_eq!(
        r.conn().session_state(S),
        Some(State::InitiateReceived),
        "events on S: {:?}",
        r.events(S)
    );
}

/// A SHUTDOWN asked for while a session is away, with a peer message held behind it that came
/// before the request, waits for that message's trip to the control thread too (its answer
/// goes first), then goes (an independent review of the first fix, which let it go at once).
#[test]
fn a_shutdown_waits_for_a_peer_message_that_came_before_it() {
    let mut r = Rig::new(256, true);
    r.auto = false;
    for _ in 0..2 {
        r.raw.send(2, 17, &ctl(5, 4, b"")).unwrap();
        for p in r.raw_packets() {
            r.deliver_to_server(&p);
        }
    }
    let now = r.now;
    assert!(matches!(
        r.conn
            .as_mut()
            .unwrap()
            .apply(now, Op::Shutdown, r.memory.stags()),
        Ok(Applied::Deferred)
    ));
    let give_back = |r: &mut Rig| {
        let mut call = r.calls.pop_front().expect("a session away");
        call.run();
        r.conn
            .as_mut()
            .unwrap()
            .return_session(now, call, &r.memory);
        r.drain();
        r.conn().association().state()
    };
    use ddpdk_dataplane::sctp::State as Sctp;
    assert_eq!(
        give_back(&mut r),
        Sctp::Established,
        "the second message is away"
    );
    assert!(r.conn().sessions_lent());
    assert_ne!(give_back(&mut r), Sctp::Established, "then the SHUTDOWN");
}

/// A SHUTDOWN the ULP asks for while a session is away waits for that session, not for
/// sessions the peer's later control messages send away: a peer that kept a junk control
/// message queued behind a lent session (each return routed it, which lent the session
/// again) put our graceful SHUTDOWN off for as long as it liked, with no bound and no event
/// (an independent review).
#[test]
fn a_peer_cannot_put_off_our_shutdown_by_keeping_a_session_away() {
    let mut r = Rig::new(256, true);
    r.auto = false;
    let junk = |r: &mut Rig| {
        r.raw.send(2, 17, &ctl(5, 4, b"")).unwrap();
        for p in r.raw_packets() {
            r.deliver_to_server(&p);
        }
    };
    junk(&mut r);
    assert!(r.conn().sessions_lent());
    let now = r.now;
    assert!(matches!(
        r.conn
            .as_mut()
            .unwrap()
            .apply(now, Op::Shutdown, r.memory.stags()),
        Ok(Applied::Deferred)
    ));
    // Each junk message arrives while the session is away and is held behind it; on the
    // session's return it is routed, which sends the session away again.
    for _ in 0..50 {
        junk(&mut r);
        let mut call = r.calls.pop_front().expect("a session away");
        call.run();
        r.conn
            .as_mut()
            .unwrap()
            .return_session(now, call, &r.memory);
        r.drain();
    }
    assert!(r.conn().sessions_lent(), "the peer keeps a session away");
    let state = r.conn().association().state();
    assert_ne!(
        state,
        ddpdk_dataplane::sctp::State::Established,
        "the SHUTDOWN began"
    );
}

/// The same with two restarts while the session is away: the chunks the first restarted
/// incarnation sent are as dead once the second restart comes; only the newest
/// incarnation's Initiate reaches the session (an independent review of the first fix).
#[test]
fn after_two_restarts_while_a_session_is_away_only_the_newest_initiate_counts_9260_5_2_4() {
    let mut r = Rig::new(256, true);
    r.open();
    r.auto = false;
    r.raw.send(S, 17, &ctl(1, 4, b"")).unwrap();
    for p in r.raw_packets() {
        r.deliver_to_server(&p);
    }
    assert!(r.conn().sessions_lent());
    for (secret, pd) in [(8u8, &b"new"[..]), (10, &b"newer"[..])] {
        let mut ep = Endpoint::new(sctp(RAW_PORT, 256), [secret; 32]).unwrap();
        let mut raw = ep.connect(r.now, srv_addr(), SRV_PORT);
        raw.send(S, 17, &ctl(0, 1, pd)).unwrap();
        r.raw = raw;
        r.raw_rx.clear();
        r.run_for(Duration::from_secs(2));
    }
    let restarts = r
        .inds
        .iter()
        .filter(|i| matches!(i, Indication::PeerRestarted))
        .count();
    assert_eq!(restarts, 2, "{:?}", r.inds);
    r.control();
    r.auto = true;
    r.run_for(Duration::from_secs(2));
    let initiates: Vec<Vec<u8>> = r
        .events(S)
        .iter()
        .filter_map(|e| match e {
            Event::InitiateReceived { private_data } => Some(private_data.as_bytes().to_vec()),
            _ => None,
        })
        .collect();
    assert_eq!(
        initiates,
        [b"".to_vec(), b"newer".to_vec()],
        "the first session's, then the newest incarnation's"
    );
}

/// An untagged DDP Segment chunk payload (QN 0, MO 0, the last of its message).
fn useg(ssn: u16, msn: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&ssn.to_be_bytes());
    v.push(0x40 | 0x01);
    v.extend_from_slice(&[0; 5]);
    v.extend_from_slice(&0u32.to_be_bytes());
    v.extend_from_slice(&msn.to_be_bytes());
    v.extend_from_slice(&0u32.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// RFC 9260 §9.2 ("This will allow all outstanding DATA chunks from the peer of the shutdown
/// initiator to be delivered before the association terminates") with RFC 5041 §2's graceful
/// teardown: the peer's Terminate (DDP-SSN 3) overtakes its last messages (RFC 5043 §10), a
/// Send into a posted receive and a tagged message, which SCTP acknowledges while the
/// Terminate's session is away at the control thread; the peer shuts the association down
/// before the session is back. Both are delivered once it is, before the ULP hears Closed,
/// as where the session machine runs in place. They were dropped (`after_session_end`), the
/// receive flushed, though the peer's ULP had them acknowledged (an independent review).
#[test]
fn a_graceful_close_while_a_session_is_away_delivers_what_it_held_9260_9_2() {
    use ddpdk_dataplane::sctp::CloseReason;
    let mut seen = Vec::new();
    for remote in [false, true] {
        let mut r = Rig::new(256, remote);
        let pd = r.open();
        let applied = r.post_receive(pd, 11);
        assert!(matches!(applied, Ok(Applied::Posted { .. })), "{applied:?}");
        r.auto = false;
        r.raw.send(S, 17, &ctl(3, 4, b"")).unwrap();
        for p in r.raw_packets() {
            r.deliver_to_server(&p);
        }
        r.raw.send(S, 16, &useg(1, 1, b"before the end")).unwrap();
        r.raw.send(S, 16, &tseg(2, 0)).unwrap();
        for p in r.raw_packets() {
            r.deliver_to_server(&p);
        }
        let now = r.now;
        r.raw.shutdown(now);
        r.run_for(Duration::from_secs(2));
        assert!(r.conn().association().is_closed(), "remote={remote}");
        r.control();
        r.drain();
        let at = |what: &dyn Fn(&Indication) -> bool| r.inds.iter().position(what);
        let received = at(&|i| matches!(i, Indication::Received { wr_id: 11, .. }));
        let tagged = at(&|i| matches!(i, Indication::TaggedDelivered { stream: S, .. }));
        let closed = at(&|i| matches!(i, Indication::Closed(CloseReason::Shutdown)));
        assert!(
            received.is_some() && tagged.is_some() && closed.is_some(),
            "remote={remote}: {:?}",
            r.inds
        );
        assert!(
            received < closed && tagged < closed,
            "remote={remote}: delivered before Closed: {:?}",
            r.inds
        );
        assert!(
            !r.inds
                .iter()
                .any(|i| matches!(i, Indication::RecvFlushed { .. })),
            "remote={remote}: {:?}",
            r.inds
        );
        assert_eq!(r.conn().stats().after_session_end, 0, "remote={remote}");
        seen.push(format!("{:?}", r.inds));
    }
    assert_eq!(seen[0], seen[1], "in place, then at the control thread");
}

/// RFC 5043 §6.2 and §11.3 with the session machine on the control thread: a faulty RDMA
/// Write and, behind it in the same packet, the peer's session Terminate, which sends the
/// stream's session away before the fault's RDMAP Terminate is queued. The Terminate still
/// goes, with our session Terminate right behind it, as where the machine runs in place;
/// the fault used to be dropped for a session away, and the peer never learnt its error.
#[test]
fn rdmaps_terminate_goes_first_when_the_peers_terminate_sends_the_session_away() {
    use ddpdk_control::rdmap::{encode_private_data, RdmaLimits};
    use ddpdk_dataplane::wire::ddp::DdpError;
    use ddpdk_dataplane::wire::rdmap::{Opcode, TerminateError, TerminatePacket, QN_TERMINATE};
    let mut seen = Vec::new();
    for (remote, shutdown) in [(false, false), (true, false), (false, true), (true, true)] {
        let mut r = Rig::new(256, remote);
        let limits = RdmaLimits { ird: 4, ord: 4 };
        let pdata = encode_private_data(limits, b"").unwrap();
        r.raw.send(S, 17, &ctl(0, 1, &pdata)).unwrap();
        r.run_for(Duration::from_millis(50));
        let pd = r.memory.alloc_pd();
        r.conn().accept_rdmap(S, pd, limits, b"").unwrap();
        r.run_for(Duration::from_millis(500));
        // An RDMA Write (RDMAP version 1) of one byte through an STag never registered.
        let mut write = tseg(1, 1);
        write[3] = (1 << 6) | Opcode::Write.bits();
        r.raw.send(S, 16, &write).unwrap();
        r.raw.send(S, 17, &ctl(2, 4, b"")).unwrap();
        let packets = r.raw_packets();
        assert_eq!(packets.len(), 1, "one packet");
        if shutdown {
            // Our ULP, told of the error, asks for SHUTDOWN while the session is away (it
            // waits for it): RDMAP's Terminate still goes first. (A last review of this
            // session's change: the SHUTDOWN went first and nothing more left.)
            r.auto = false;
            r.deliver_to_server(&packets[0]);
            let now = r.now;
            let c = r.conn.as_mut().unwrap();
            let _ = c.apply(now, Op::Shutdown, r.memory.stags());
            r.control();
        } else {
            r.deliver_to_server(&packets[0]);
        }
        r.run_for(Duration::from_millis(500));
        let ssn = |d: &[u8]| u16::from_be_bytes([d[0], d[1]]);
        let rdmap: Vec<(u16, TerminateError)> = r
            .raw_rx
            .iter()
            .filter(|(s, p, d)| {
                *s == S
                    && *p == 16
                    && d.len() > 20
                    && d[2] & 0x80 == 0
                    && d[8..12] == QN_TERMINATE.to_be_bytes()
            })
            .filter_map(|(_, _, d)| {
                let t = TerminatePacket::new_checked(&d[20..]).ok()?;
                Some((ssn(d), t.error()))
            })
            .collect();
        let session: Vec<u16> = r
            .raw_rx
            .iter()
            .filter(|(s, p, d)| *s == S && *p == 17 && d[2..4] == [0, 4])
            .map(|(_, _, d)| ssn(d))
            .collect();
        assert_eq!(
            rdmap.iter().map(|x| x.1).collect::<Vec<_>>(),
            [TerminateError::Ddp(DdpError::InvalidStag)],
            "remote={remote} shutdown={shutdown}"
        );
        if !shutdown {
            assert_eq!(
                session,
                [rdmap[0].0 + 1],
                "remote={remote}: ours right behind"
            );
        }
        seen.push((rdmap, session));
    }
    assert_eq!(seen[0], seen[1], "in place, then at the control thread");
    assert_eq!(
        seen[2].0, seen[3].0,
        "with a SHUTDOWN: in place, then at the control thread"
    );
}

/// The peer answers our Initiate with its Accept (sent away to the control thread), then a
/// Send and its Terminate, then shuts the association down; meanwhile our ULP posts the
/// receive for the Send. In place the Accept is applied at once, the receive taken, the Send
/// delivered into it and the peer's Terminate heard. With the session away, all of it waits
/// behind the Accept and the association closes first; once the session is back, the same
/// happens, in the same order, before Closed. (A review of this session's graceful-close
/// change: the receive was refused NotConnected, so the Send found no buffer, and the held
/// Terminate was dropped, the ULP told AssociationEnded instead of the peer's end.)
/// `forget` says whether the ULP forgets the connection instead before the session is back:
/// then the stream's end is told, its receive flushed, before Closed.
fn our_initiate_answered_then_the_peer_shuts_down(remote: bool, forget: bool) -> Rig {
    let mut r = Rig::new(256, remote);
    let pd = r.memory.alloc_pd();
    r.conn().initiate(S, pd, b"").unwrap();
    r.run_for(Duration::from_millis(50));
    assert!(
        r.raw_rx.iter().any(|(s, p, _)| *s == S && *p == 17),
        "Initiate out"
    );
    r.auto = false;
    r.raw.send(S, 17, &ctl(0, 2, b"")).unwrap();
    for p in r.raw_packets() {
        r.deliver_to_server(&p);
    }
    let applied = r.post_receive(pd, 11);
    assert!(applied.is_ok(), "{applied:?}");
    r.raw.send(S, 16, &useg(1, 1, b"the peer's Send")).unwrap();
    r.raw.send(S, 17, &ctl(2, 4, b"")).unwrap();
    for p in r.raw_packets() {
        r.deliver_to_server(&p);
    }
    let now = r.now;
    r.raw.shutdown(now);
    r.run_for(Duration::from_secs(2));
    assert!(r.conn().association().is_closed(), "remote={remote}");
    if forget {
        r.conn().abandon_lent();
        r.calls.clear();
    } else {
        r.control();
    }
    r.drain();
    r
}

#[test]
fn what_was_held_before_a_graceful_close_is_applied_as_in_place_9260_9_2() {
    use ddpdk_dataplane::sctp::CloseReason;
    let mut seen = Vec::new();
    for remote in [false, true] {
        let mut r = our_initiate_answered_then_the_peer_shuts_down(remote, false);
        let at = |what: &dyn Fn(&Indication) -> bool| r.inds.iter().position(what);
        let received = at(&|i| matches!(i, Indication::Received { wr_id: 11, .. }));
        let peer_ended = at(&|i| {
            matches!(
                i,
                Indication::Session {
                    event: Event::SessionTerminated {
                        reason: ddpdk_control::session::TerminationReason::PeerTerminate
                    },
                    ..
                }
            )
        });
        let closed = at(&|i| matches!(i, Indication::Closed(CloseReason::Shutdown)));
        assert!(
            received.is_some() && peer_ended.is_some() && closed.is_some(),
            "remote={remote}: {:?}",
            r.inds
        );
        assert!(received < closed && peer_ended < closed, "remote={remote}");
        let refused: Vec<OpResult> = std::iter::from_fn(|| r.conn().poll_op_result())
            .filter(|o| o.result.is_err())
            .collect();
        assert!(refused.is_empty(), "remote={remote}: {refused:?}");
        assert_eq!(r.conn().stats().after_session_end, 0, "remote={remote}");
        seen.push(format!("{:?}", r.inds));
    }
    assert_eq!(seen[0], seen[1], "in place, then at the control thread");
}

/// The same, the ULP forgetting the connection before the session is back (`Control::forget`
/// promises every work request an end): the stream's end is told, then Closed, and the
/// receive held behind the session is reported refused. (The same review: the deferred end
/// never came.)
#[test]
fn forgetting_a_connection_whose_graceful_end_waits_still_ends_its_streams() {
    use ddpdk_dataplane::sctp::CloseReason;
    let mut r = our_initiate_answered_then_the_peer_shuts_down(true, true);
    let results: Vec<OpResult> = std::iter::from_fn(|| r.conn().poll_op_result()).collect();
    assert!(
        results
            .iter()
            .any(|o| o.wr_id == Some(11) && o.result == Err(PostError::NotConnected)),
        "{results:?}"
    );
    let at = |what: &dyn Fn(&Indication) -> bool| r.inds.iter().position(what);
    let ended = at(&|i| {
        matches!(
            i,
            Indication::Session {
                event: Event::SessionTerminated { .. },
                ..
            }
        )
    });
    let closed = at(&|i| matches!(i, Indication::Closed(CloseReason::Shutdown)));
    assert!(ended.is_some() && closed.is_some(), "{:?}", r.inds);
    assert!(ended < closed, "{:?}", r.inds);
}

/// RFC 9260 §9.2 with RFC 7306 §5.2: an Atomic Request held behind the peer's Accept (away
/// at the control thread) when the association closes gracefully is not performed once the
/// session is back: its response could never leave the closed association, and the
/// requester's Atomic ends Flushed, "not carried out" (a ULP reposting it would add twice).
/// It is delivered all the same, so a Send behind it is too. (Reviews of this session's
/// graceful-close change: the word was changed after the close; then, the request dropped,
/// its DDP-SSN was a gap the Send waited behind for ever.)
#[test]
fn a_request_held_before_a_graceful_close_is_not_carried_out_9260_9_2() {
    for atomic_first in [false, true] {
        request_before_a_graceful_close(atomic_first);
    }
}

/// The test above, the Atomic Request behind the peer's Accept, or ahead of it (SCTP
/// delivers unordered, RFC 5043 §10: it waits for the answer, then is released by it).
fn request_before_a_graceful_close(atomic_first: bool) {
    use ddpdk_control::rdmap::{encode_private_data, RdmaLimits};
    use ddpdk_dataplane::wire::rdmap::{AtomicOp, AtomicRequest, Opcode, QN_READ_REQUEST};
    let mut r = Rig::new(256, true);
    let pd = r.memory.alloc_pd();
    let limits = RdmaLimits { ird: 4, ord: 4 };
    r.conn().initiate_rdmap(S, pd, limits, b"").unwrap();
    r.run_for(Duration::from_millis(50));
    let region = r.memory.alloc_region(4096).unwrap();
    r.memory
        .region(region)
        .unwrap()
        .place(0, &5u64.to_be_bytes())
        .unwrap();
    let word = r
        .memory
        .register(ddpdk_control::memory::MemoryRegistration {
            pd,
            region,
            offset: 0,
            len: 4096,
            access: ddpdk_dataplane::mem::Access::REMOTE_ATOMIC,
            stream: None,
            to_base: 0,
        })
        .unwrap();
    r.auto = false;
    let request = AtomicRequest {
        op: AtomicOp::FetchAdd,
        request_id: 1,
        stag: word.stag.0,
        to: 0,
        add_swap: 1,
        add_swap_mask: 0,
        compare: 0,
        compare_mask: u64::MAX,
    };
    let mut atomic = useg(1, 1, &request.to_bytes());
    atomic[3] = (1 << 6) | Opcode::AtomicRequest.bits();
    atomic[8..12].copy_from_slice(&QN_READ_REQUEST.to_be_bytes());
    let pdata = encode_private_data(limits, b"").unwrap();
    if atomic_first {
        r.raw.send(S, 16, &atomic).unwrap();
    }
    r.raw.send(S, 17, &ctl(0, 2, &pdata)).unwrap();
    for p in r.raw_packets() {
        r.deliver_to_server(&p);
    }
    if !atomic_first {
        r.raw.send(S, 16, &atomic).unwrap();
    }
    // A Send behind it (DDP-SSN 2), into a receive posted meanwhile: delivered, the request's
    // DDP-SSN no gap before it.
    assert!(r.post_receive(pd, 11).is_ok());
    let mut send = useg(2, 1, b"behind the request");
    send[3] = (1 << 6) | Opcode::Send.bits();
    r.raw.send(S, 16, &send).unwrap();
    for p in r.raw_packets() {
        r.deliver_to_server(&p);
    }
    let now = r.now;
    r.raw.shutdown(now);
    r.run_for(Duration::from_secs(2));
    assert!(r.conn().association().is_closed());
    r.control();
    r.drain();
    let mut v = [0u8; 8];
    r.memory.region(region).unwrap().read(0, &mut v).unwrap();
    assert_eq!(
        u64::from_be_bytes(v),
        5,
        "atomic_first {atomic_first}: not performed: {:?}",
        r.inds
    );
    let stats = *r.conn().stats();
    assert_eq!(stats.atomics_served, 0);
    assert_eq!(stats.after_session_end, 1);
    assert!(
        r.inds
            .iter()
            .any(|i| matches!(i, Indication::Received { wr_id: 11, .. })),
        "the Send behind it: {:?}",
        r.inds
    );
}
