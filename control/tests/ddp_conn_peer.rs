//! A DDP `Connection` against a raw SCTP peer that sends hand-made DDP and RDMAP chunks (`Duo`), and
//! against another connection (`tests/world`): the corners an independent review of
//! `control/src/conn.rs` (now `control/src/conn/`) found, each now a regression test named after its rule, plus probes
//! with crafted chunks.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod world;

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use ddpdk_control::conn::{
    Accept, Applied, Completion, ConnConfig, Connection, Indication, Listener, Op, Status,
};
use ddpdk_control::memory::{Memory, MemoryRegistration, Place};
use ddpdk_control::session::{Event, PendingLimit, ProtocolError, State, TerminationReason};
use ddpdk_dataplane::ddp::RxError;
use ddpdk_dataplane::mem::{Access, Pd, PostedBuffer};
use ddpdk_dataplane::sctp::{Association, Config, Endpoint, Instant};
use ddpdk_dataplane::wire::ddp::DdpError;
use world::{open, read, region, session_events, tagged, wait, World};

// ------------------------------------------------------------------------------------------
// Helpers shared with the World harness
// ------------------------------------------------------------------------------------------

const S: u16 = 1;

// ------------------------------------------------------------------------------------------
// A raw SCTP peer (crafted DDP chunks) against a real server Connection
// ------------------------------------------------------------------------------------------

const RAW_PORT: u16 = 6001;
const SRV_PORT: u16 = 6002;

fn raw_addr() -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1))
}
fn srv_addr() -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2))
}

struct Duo {
    now: Instant,
    raw: Association,
    /// (stream, ppid, data) the raw peer received.
    raw_rx: Vec<(u16, u32, Vec<u8>)>,
    listener: Listener,
    conn: Option<Box<Connection>>,
    memory: Memory,
    inds: Vec<Indication>,
    comps: Vec<Completion>,
    buf: Vec<u8>,
    /// The server's packets are lost on their way: the raw peer hears (and acknowledges)
    /// nothing of it.
    deaf: bool,
    /// The raw peer's packets holding these bytes are lost on their way to the server (each
    /// retransmission too, until cleared).
    lose: Option<Vec<u8>>,
}

fn sctp(port: u16, slots: usize) -> Config {
    Config {
        local_port: port,
        send_slots: slots,
        ..world::sctp_config(1500)
    }
}

impl Duo {
    fn new(raw_slots: usize) -> Duo {
        Duo::with_server_path_mtu(raw_slots, sctp(SRV_PORT, 256).path_mtu)
    }

    /// As [`Duo::new`], the raw peer standing in for a stack that lets a second packet go
    /// after T3-rtx (RFC 9260 §7.2.3 asks for one): for the tests that lose one of its
    /// chunks for a while (`lose`, `deaf`) and have its other messages go meanwhile.
    fn lenient(raw_slots: usize) -> Duo {
        let raw = Config {
            one_packet_after_t3: false,
            ..sctp(RAW_PORT, raw_slots)
        };
        let d = Duo::with_configs(raw, sctp(SRV_PORT, 256));
        assert!(d.conn.is_some(), "association up");
        d
    }

    /// The server's associations send with `path_mtu` (the raw peer with the default).
    fn with_server_path_mtu(raw_slots: usize, path_mtu: usize) -> Duo {
        let server = Config {
            path_mtu,
            ..sctp(SRV_PORT, 256)
        };
        let raw = sctp(RAW_PORT, raw_slots);
        let d = Duo::with_configs(raw, server);
        assert!(d.conn.is_some(), "association up");
        d
    }

    /// The raw peer's and the server's SCTP endpoints configured as given.
    fn with_configs(raw_cfg: Config, server: Config) -> Duo {
        Duo::with_conn_config(raw_cfg, server, ConnConfig::default())
    }

    /// As [`Duo::with_configs`], the server's connection configured with `conn`.
    fn with_conn_config(raw_cfg: Config, server: Config, conn: ConnConfig) -> Duo {
        let now = Instant::from_nanos(1_000_000_000);
        let mut raw_ep = Endpoint::new(raw_cfg, [7; 32]).unwrap();
        let raw = raw_ep.connect(now, srv_addr(), SRV_PORT);
        let ep = Endpoint::new(server, [9; 32]).unwrap();
        let (memory, _) = Memory::new(1024, 0, 0x1234_5678_9abc);
        let mut d = Duo {
            now,
            raw,
            raw_rx: Vec::new(),
            listener: Listener::new(ep, conn, PendingLimit::new(16)),
            conn: None,
            memory,
            inds: Vec::new(),
            comps: Vec::new(),
            buf: vec![0; 65536],
            deaf: false,
            lose: None,
        };
        d.settle();
        d
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
        }
    }

    fn deliver_to_server(&mut self, p: &[u8]) {
        let live = self
            .conn
            .as_ref()
            .is_some_and(|c| !c.association().is_closed());
        if live {
            let memory = &self.memory;
            let _ = self.conn.as_mut().unwrap().handle(self.now, p, memory);
        } else {
            let mut out = vec![0u8; 65536];
            match self
                .listener
                .handle(self.now, raw_addr(), p, &mut out, &self.memory)
            {
                Accept::Ignored => {}
                Accept::Reply(n) => {
                    let rx = &mut self.raw_rx;
                    let _ = self.raw.handle(
                        self.now,
                        &out[..n],
                        &mut |m: ddpdk_dataplane::sctp::Message<'_>| {
                            rx.push((m.stream, m.ppid, m.data.to_vec()))
                        },
                    );
                }
                Accept::Connection(c) => self.conn = Some(c),
            }
        }
        self.drain();
    }

    /// Delivers what the raw peer sends now to the server, nothing lost; how many packets.
    fn raw_to_server(&mut self) -> usize {
        let mut packets = Vec::new();
        while let Some(n) = self.raw.poll_transmit(self.now, &mut self.buf) {
            packets.push(self.buf[..n].to_vec());
        }
        for p in &packets {
            self.deliver_to_server(p);
        }
        packets.len()
    }

    /// One exchange round; returns whether any packet moved.
    fn round(&mut self) -> bool {
        let mut moved = false;
        let mut pkts = Vec::new();
        while let Some(n) = self.raw.poll_transmit(self.now, &mut self.buf) {
            pkts.push(self.buf[..n].to_vec());
        }
        for p in pkts {
            moved = true;
            let lost = self
                .lose
                .as_ref()
                .is_some_and(|l| p.windows(l.len()).any(|w| w == &l[..]));
            if !lost {
                self.deliver_to_server(&p);
            }
        }
        let mut pkts = Vec::new();
        if let Some(c) = self.conn.as_mut() {
            while let Some(n) = c.poll_transmit(self.now, &mut self.buf) {
                pkts.push(self.buf[..n].to_vec());
            }
        }
        self.drain();
        if self.deaf {
            pkts.clear();
        }
        for p in pkts {
            moved = true;
            let rx = &mut self.raw_rx;
            let _ = self
                .raw
                .handle(self.now, &p, &mut |m: ddpdk_dataplane::sctp::Message<
                    '_,
                >| {
                    rx.push((m.stream, m.ppid, m.data.to_vec()))
                });
        }
        moved
    }

    /// Exchanges packets (zero delay) and runs timers for `d` of virtual time.
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

    fn settle(&mut self) {
        self.run_for(Duration::from_millis(50));
    }

    fn send(&mut self, stream: u16, ppid: u32, data: &[u8]) {
        self.raw.send(stream, ppid, data).unwrap();
    }

    /// Sends each DDP segment on stream `S` (PPID 16), the server handling one before the
    /// next is sent: a later DDP-SSN first makes the server hold it until the earlier comes.
    fn send_in_turn(&mut self, segments: &[&[u8]]) {
        for seg in segments {
            self.send(S, 16, seg);
            self.settle();
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

    /// The raw peer opens a session on `stream` (active); the server's ULP accepts with `pd`.
    fn open(&mut self, stream: u16, pd: Pd) {
        self.send(stream, 17, &ctl(0, 1, b""));
        self.settle();
        assert!(self
            .events(stream)
            .iter()
            .any(|e| matches!(e, Event::InitiateReceived { .. })));
        self.conn().accept(stream, pd, b"").unwrap();
        self.settle();
        assert!(self
            .raw_rx
            .iter()
            .any(|(s, p, d)| *s == stream && *p == 17 && d[2..4] == [0, 2]));
    }
}

impl Duo {
    /// An RDMAP stream serving the peer's Read Request (DDP-SSN 1) of `len` bytes from a
    /// remote-read region at TO 0x1000, zero copy: the request has reached the server, which
    /// queued its response, what SCTP's queue takes of it given to SCTP, the rest (with more
    /// segments than that queue holds) waiting with DDP. With the Data Source's registration
    /// and the request.
    fn serving_a_read(len: u32) -> (Duo, ddpdk_control::memory::Registered, ReadRequest) {
        let mut d = Duo::new(256);
        let pd = d.memory.alloc_pd();
        d.open_rdmap(S, pd);
        let table = d.memory.region_table().clone();
        d.conn().use_regions(table);
        let (_, src) = d.region_with(pd, u64::from(len), 0x1000, Access::REMOTE_READ);
        let request = ReadRequest {
            sink_stag: 0x99,
            sink_to: 0,
            size: len,
            source_stag: src.stag.0,
            source_to: 0x1000,
        };
        let segment = rseg(
            1,
            control(1, Opcode::ReadRequest),
            1,
            1,
            &request.to_bytes(),
        );
        d.send(S, 16, &segment);
        d.raw_to_server();
        (d, src, request)
    }

    /// A 4 KiB local-write region of `pd`, its first 256 bytes posted to queue 0 of stream
    /// `S` as receive `wr_id`.
    fn posted_buffer(
        &mut self,
        pd: Pd,
        wr_id: u64,
    ) -> (
        ddpdk_control::memory::RegionId,
        ddpdk_control::memory::Registered,
    ) {
        let r = self.memory.alloc_region(4096).unwrap();
        let reg = self
            .memory
            .register(MemoryRegistration {
                pd,
                region: r,
                offset: 0,
                len: 4096,
                access: Access::LOCAL_WRITE,
                stream: None,
                to_base: 0,
            })
            .unwrap();
        let b = self.memory.receive_buffer(pd, reg.stag, 0, 256).unwrap();
        self.conn().post_recv(S, 0, wr_id, b).unwrap();
        (r, reg)
    }
}

/// A DDP Stream Session Control message: DDP-SSN, function code, Private Data.
fn ctl(ssn: u16, code: u16, pd: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&ssn.to_be_bytes());
    v.extend_from_slice(&code.to_be_bytes());
    v.extend_from_slice(pd);
    v
}

/// A tagged DDP Segment chunk payload.
fn tseg(ssn: u16, last: bool, stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&ssn.to_be_bytes());
    v.push(0x80 | if last { 0x40 } else { 0 } | 0x01);
    v.push(0x5a);
    v.extend_from_slice(&stag.to_be_bytes());
    v.extend_from_slice(&to.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// An untagged DDP Segment chunk payload.
fn useg(ssn: u16, last: bool, qn: u32, msn: u32, mo: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&ssn.to_be_bytes());
    v.push(if last { 0x40 } else { 0 } | 0x01);
    v.extend_from_slice(&[1, 2, 3, 4, 5]);
    v.extend_from_slice(&qn.to_be_bytes());
    v.extend_from_slice(&msn.to_be_bytes());
    v.extend_from_slice(&mo.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// An untagged segment on QN 0 whose RDMAP header (control byte and the four bytes after it:
/// a Send with Invalidate's STag) is `rdmap`.
fn rdmap_useg(ssn: u16, last: bool, msn: u32, mo: u32, rdmap: [u8; 5], payload: &[u8]) -> Vec<u8> {
    let mut v = useg(ssn, last, 0, msn, mo, payload);
    v[3..8].copy_from_slice(&rdmap);
    v
}

/// The RDMAP header of a Send with Invalidate of STag 0xabcd01, which no stream may invalidate.
fn send_inv_unknown() -> [u8; 5] {
    [control(1, Opcode::SendInvalidate), 0x00, 0xab, 0xcd, 0x01]
}

/// A server connection with an RDMAP stream on `S` accepted and `n` receives posted on QN 0.
fn rdmap_duo_with_receives(n: u64) -> Duo {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    for wr in 40..40 + n {
        d.posted_buffer(pd, wr);
    }
    d
}

// ------------------------------------------------------------------------------------------
// The rules
// ------------------------------------------------------------------------------------------

/// Harness check: a well-formed untagged message from the raw peer is delivered.
#[test]
fn raw_peer_untagged_message_is_delivered() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open(S, pd);
    d.posted_buffer(pd, 11);
    d.send(S, 16, &useg(1, true, 0, 1, 0, b"hi"));
    d.settle();
    assert!(d.inds.iter().any(|i| matches!(
        i,
        Indication::Received {
            wr_id: 11,
            len: 2,
            ..
        }
    )));
}

/// RFC 5043 §6.2 / §10 with RFC 5041 §5.4: in DDP-SSN order the peer sent
/// Initiate(0), segment(1), Terminate(2) — a legal pattern (the §6.2 note: the RDMAP Terminate
/// message precedes the DDP Stream Terminate). SCTP is unordered, so the Terminate may arrive
/// first. The session accepts the late segment (session.rs documents "Late chunks of the peer
/// that the patterns allow are still accepted"), but conn/route.rs `route` drops every segment once
/// the state is Terminated and `flush` has already returned the posted buffer: the message is
/// never delivered.
#[test]
fn rfc5043_6_1_terminate_overtaking_the_last_segment_still_delivers_it() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open(S, pd);
    d.posted_buffer(pd, 11);
    // Terminate (DDP-SSN 2) overtakes the last segment (DDP-SSN 1).
    d.send(S, 17, &ctl(2, 4, b""));
    d.send(S, 16, &useg(1, true, 0, 1, 0, b"rdmap terminate"));
    d.settle();
    let received = d
        .inds
        .iter()
        .any(|i| matches!(i, Indication::Received { wr_id: 11, .. }));
    let stats = *d.conn().stats();
    assert!(
        received,
        "the message sent before the Terminate must be delivered; got {:?}, stats {:?}",
        d.inds, stats
    );
}

/// RFC 5043 §10 lets a sender have up to 32767 chunks of a stream unacknowledged, and SCTP
/// delivers them unordered; RFC 5041 §5.3 lets the sink place out of order. One chunk late
/// (here DDP-SSN 1, sent last as if it were retransmitted) with 257 one-segment messages
/// behind it is legal, but `StreamRx` is built with `StreamDelivery::with_defaults`
/// (256 pending messages; conn/stream.rs `open_receive`), so the 257th L segment is a fatal
/// `Sequence(TooManyPending)` stream error and everything after it is dropped.
#[test]
fn rfc5043_10_a_window_of_messages_behind_one_late_chunk_is_legal() {
    let mut d = Duo::new(1024);
    let pd = d.memory.alloc_pd();
    d.open(S, pd);
    for ssn in 2..=258u16 {
        // Zero-length tagged messages: no STag needed (RFC 5041 §7.1 checks non-zero ones).
        d.send(S, 16, &tseg(ssn, true, 0xdead_beef, 0, b""));
        if ssn % 64 == 0 {
            d.settle();
        }
    }
    d.settle();
    d.send(S, 16, &tseg(1, true, 0xdead_beef, 0, b""));
    d.settle();
    let errors: Vec<_> = d
        .inds
        .iter()
        .filter(|i| matches!(i, Indication::Error { .. }))
        .cloned()
        .collect();
    let delivered = d
        .inds
        .iter()
        .filter(|i| matches!(i, Indication::TaggedDelivered { .. }))
        .count();
    assert!(errors.is_empty(), "legal traffic refused: {errors:?}");
    assert_eq!(delivered, 258);
}

/// RFC 5043 §6.6 / liveness. The client ends the session; as soon as the server has the
/// Terminate, every chunk of the old session is accounted for on the server (its own are
/// acknowledged, the client's final arrived), so it may reuse the stream id and initiates.
/// The client's SCTP has not yet processed (or, in the same packet, `settle` has not yet run
/// for) the SACK of its Terminate: conn/route.rs `route` reads `can_reuse()` during
/// `Association::handle`, before `after_sctp` → `settle` marks the Terminate acknowledged, so
/// the Initiate falls into the old, terminated session as a "Duplicate" and is dropped
/// silently. Nothing is ever answered; the server's session hangs in InitiateSent.
#[test]
fn rfc5043_6_6_initiate_right_after_our_terminate_starts_a_new_session() {
    let mut w = World::perfect(1500);
    w.establish();
    let (_, spd) = open(&mut w, S);
    w.run_for(Duration::from_secs(1));
    w.client.conn().terminate(S).unwrap();
    wait(&mut w, "the Terminate", |w| {
        session_events(&w.server, S).contains(&Event::TerminateReceived)
    });
    // The server reuses the stream as soon as its own §6.6 check allows (its answering
    // Terminate acknowledged); the client may not yet have processed that acknowledgement.
    wait(&mut w, "reuse allowed", |w| {
        w.server.conn().initiate(S, spd, b"again").is_ok()
    });
    w.run_for(Duration::from_secs(30));
    let got = session_events(&w.client, S)
        .iter()
        .filter(|e| matches!(e, Event::InitiateReceived { .. }))
        .count();
    assert_eq!(
        got,
        1,
        "the client never hears the second Initiate; server state {:?}",
        w.server.conn().session_state(S)
    );
}

/// RFC 5043 §6.6: "A DDP Stream Identifier MUST NOT be reused for another DDP Stream Session
/// while any Data Chunk from a prior session might be outstanding" (and §6: "Data Chunks from
/// one DDP Stream Session are never carried over to the next session"). `Session::can_reuse`
/// only checks our own chunks when the peer sent no final message (session.rs: "otherwise
/// its own §6.6 duty"), so after a local Terminate, once it is acknowledged, the client
/// re-initiates while the server's SCTP is still sending segments of the old session. They are
/// accepted by the new session (active side: any DDP-SSN > 0) and placed by the new StreamRx,
/// with the new session's PD and stream identity: bytes land in client memory during the new
/// session, before any Accept.
#[test]
fn rfc5043_6_no_chunk_of_a_previous_session_is_placed_in_the_next() {
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, _) = open(&mut w, S);
    let (cr, creg) = region(&mut w.client, cpd, 256 << 10, Access::REMOTE_WRITE, None);
    w.server
        .conn()
        .post_send(tagged(1, S, creg.stag, creg.to_base, vec![0xab; 200_000]))
        .unwrap();
    wait(&mut w, "the first segments", |w| {
        w.client.conn().stats().segments_received >= 3
    });
    w.client.conn().terminate(S).unwrap();
    wait(&mut w, "reuse allowed", |w| {
        w.client.conn().initiate(S, cpd, b"again").is_ok()
    });
    let before = read(&w.client, cr, 0, 256 << 10);
    let recv_before = w.client.conn().stats().segments_received;
    w.run_for(Duration::from_secs(5));
    let after = read(&w.client, cr, 0, 256 << 10);
    let changed = before.iter().zip(&after).filter(|(a, b)| a != b).count();
    let recv_after = w.client.conn().stats().segments_received;
    assert_eq!(
        changed,
        0,
        "{changed} bytes of the old session placed during the new one \
         ({} old segments reached the new session; client events {:?})",
        recv_after - recv_before,
        session_events(&w.client, S)
    );
}

/// RFC 5043 §9 / §6 ("DDP-SSNs ... MUST NOT have any gaps") / liveness. At the smallest
/// path MTU the association accepts (544, `MIN_PATH_MTU`; also what `set_path_mtu` clamps an
/// ICMP "packet too big" to), `Association::max_message()` is 516 but `ddp::mulpdu` floors the
/// segment at 516 + 2 bytes of DDP-SSN = 518. conn/send.rs `send_one` takes the DDP-SSN
/// (`next_ddp_ssn`) and then `Association::send` fails with `TooBig`, which is treated as
/// `Turn::Done`: the DDP-SSN is burnt, the stream leaves the ready list, the send never
/// completes (and every later pump burns another DDP-SSN on the same message).
#[test]
fn rfc5043_9_smallest_path_mtu_carries_516_byte_segments() {
    let mut w = World::perfect(ddpdk_dataplane::sctp::MIN_PATH_MTU);
    w.establish();
    let (_, spd) = open(&mut w, S);
    let (_, sreg) = region(&mut w.server, spd, 8192, Access::REMOTE_WRITE, Some(S));
    let sizes = w.client.conn().max_sizes();
    // A message the ULP was told fits one segment.
    w.client
        .conn()
        .post_send(tagged(1, S, sreg.stag, sreg.to_base, vec![7; sizes.tagged]))
        .unwrap();
    w.run_for(Duration::from_secs(10));
    assert_eq!(
        w.client
            .completions
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect::<Vec<_>>(),
        vec![(1, Status::Success)],
        "max_sizes {sizes:?}, max_message {}, client stats {:?}",
        w.client.conn().association().max_message(),
        w.client.conn().stats()
    );
}

/// Accounting: a send's outcome is reported when it fails even if unsignaled (`SendRequest::
/// signaled`: "failures always are"; `Status::Flushed`: "its delivery is unknown: the session
/// or association ended first"). An unsignaled send wholly handed to SCTP and then lost with
/// the association gets no completion: conn/send.rs `send_one` records `completion: None` for it
/// and `end_all_sessions` flushes only in-flight entries with `Some`. (Queued, not yet handed
/// over, unsignaled sends *are* flushed by `flush`, so the two halves disagree.)
#[test]
fn unsignaled_send_in_flight_is_flushed_when_the_association_ends() {
    let mut w = World::perfect(1500);
    w.establish();
    let (_, spd) = open(&mut w, S);
    let (_, sreg) = region(&mut w.server, spd, 8192, Access::REMOTE_WRITE, Some(S));
    let mut req = tagged(1, S, sreg.stag, sreg.to_base, vec![7; 100]);
    req.signaled = false;
    w.client.conn().post_send(req).unwrap();
    assert_eq!(w.client.conn().stats().messages_sent, 1, "handed to SCTP");
    // The association ends before the SACK.
    w.client.conn().abort();
    w.flush();
    assert_eq!(
        w.client
            .completions
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect::<Vec<_>>(),
        vec![(1, Status::Flushed)]
    );
}

/// RFC 5041 §8.2 / §8.3.1 item 2: "if an STag is limited in scope to a single DDP Stream, no
/// other DDP Stream can use the STag". Stream identities are unique per session across every
/// connection of the process, so a registration bound to one never passes the stream check of
/// another (found by review: identities once packed a 32-bit connection number into 16 bits).
#[test]
fn rfc5041_8_2_stream_identities_are_unique_across_connections() {
    let mut ep = Endpoint::new(sctp(SRV_PORT, 16), [3; 32]).unwrap();
    let now = Instant::from_nanos(1);
    let limit = PendingLimit::new(4);
    let mut ids = std::collections::HashSet::new();
    let mut first = None;
    for port in 0..100u16 {
        let c = Connection::new(
            ep.connect(now, raw_addr(), RAW_PORT + port),
            ConnConfig::default(),
            limit.clone(),
        );
        for s in 0..4 {
            if let Some(id) = c.stream_id(s) {
                assert!(ids.insert(id), "{id:?} reused");
                first.get_or_insert(id);
            }
        }
    }
    assert_eq!(ids.len(), 400, "100 connections of 4 streams each");
    let (mut memory, _) = Memory::new(16, 0, 99);
    let pd = memory.alloc_pd();
    let r = memory.alloc_region(4096).unwrap();
    let reg = memory
        .register(MemoryRegistration {
            pd,
            region: r,
            offset: 0,
            len: 4096,
            access: Access::REMOTE_WRITE,
            stream: first,
            to_base: 0,
        })
        .unwrap();
    for id in ids.iter().filter(|id| Some(**id) != first) {
        assert_eq!(
            memory.stags().check_tagged(reg.stag, 0, 100, *id, pd),
            Err(ddpdk_dataplane::wire::ddp::DdpError::StagNotAssociated)
        );
    }
}

/// RFC 9260 §5.2.4 restart with DATA bundled behind the COOKIE ECHO (allowed, §5.1), carrying
/// the restarted peer's first Initiate (RFC 5043 §6.2). conn/route.rs routes DATA chunks during
/// `Association::handle`, but handles `Event::Restarted` only afterwards in `after_sctp`: the
/// new incarnation's Initiate reaches the *old* session state and is then wiped by
/// `end_all_sessions` (`association_ended` clears the session, and it never sends the
/// Terminate §6.4 would owe). The new peer never gets an answer.
#[test]
fn rfc9260_5_2_4_initiate_bundled_with_a_restart_reaches_the_new_session() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open(S, pd);
    // The peer restarts: a new endpoint incarnation on the same address and port, with its
    // first Initiate queued before the handshake (it rides with the COOKIE ECHO).
    let mut ep2 = Endpoint::new(sctp(RAW_PORT, 256), [8; 32]).unwrap();
    let mut raw2 = ep2.connect(d.now, srv_addr(), SRV_PORT);
    raw2.send(2, 17, &ctl(0, 1, b"new incarnation")).unwrap();
    d.raw = raw2;
    d.raw_rx.clear();
    d.run_for(Duration::from_secs(5));
    assert!(
        d.inds
            .iter()
            .any(|i| matches!(i, Indication::PeerRestarted)),
        "restart seen: {:?}",
        d.inds
    );
    assert_eq!(
        d.conn().session_state(2),
        Some(State::InitiateReceived),
        "events on stream 2: {:?}; raw peer got {:?}",
        d.events(2),
        d.raw_rx
    );
}

/// A restarted peer may negotiate fewer streams (`adopt_cookie` sets `streams` from the new
/// cookie), but the connection only ever grows `streams` (`grow_streams`), so `check_stream` keeps
/// accepting stream ids the association no longer has. `initiate` returns Ok, then `send_one`
/// gets `SendError::InvalidStream` from SCTP, treats it as `Turn::Done` and drops the Initiate:
/// the session sits in InitiateSent forever with nothing sent and no error.
#[test]
fn streams_lost_in_a_restart_refuse_initiate() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open(S, pd);
    let mut cfg = sctp(RAW_PORT, 256);
    cfg.streams = 2;
    let mut ep2 = Endpoint::new(cfg, [8; 32]).unwrap();
    d.raw = ep2.connect(d.now, srv_addr(), SRV_PORT);
    d.run_for(Duration::from_secs(2));
    assert!(d
        .inds
        .iter()
        .any(|i| matches!(i, Indication::PeerRestarted)));
    let streams = d.conn().association().streams();
    let r = d.conn().initiate(5, pd, b"");
    d.run_for(Duration::from_secs(5));
    assert!(
        r.is_err() || d.conn().session_state(5) != Some(State::InitiateSent),
        "association has {streams} streams; initiate(5) = {r:?}; state {:?}; control sent {}",
        d.conn().session_state(5),
        d.conn().stats().control_sent
    );
}

/// memory.rs `deregister` documents "once this returns Ok, no data core can place into the
/// memory through `stag`" (RFC 5041 §8.3.1 items 4 and 6: revoking the buffer). A posted
/// receive made from that registration (`Memory::receive_buffer` copies the region slice out
/// of it) keeps receiving peer bytes after the deregistration: nothing ties a
/// `PostedBuffer` to its STag. Low severity (local ULP must not deregister posted memory), but
/// the memory may already be re-registered elsewhere.
#[test]
fn rfc5041_8_3_1_deregistration_stops_posted_receives() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open(S, pd);
    let (r, reg) = d.posted_buffer(pd, 11);
    d.memory.deregister(reg.stag).unwrap();
    d.send(S, 16, &useg(1, true, 0, 1, 0, b"after deregister"));
    d.settle();
    let mut got = vec![0u8; 16];
    d.memory.region(r).unwrap().read(0, &mut got).unwrap();
    assert_ne!(
        &got[..],
        b"after deregister",
        "placed into deregistered memory: {:?}",
        d.inds
    );
}

/// RFC 5041 §7.1 untagged check 2 ("allows Placement"), judged when a receive is posted: a
/// plain DDP ULP's buffer of another protection domain than the stream's session, or of a
/// registration gone since it was built, is refused to the ULP (`BadSink`) and never taken;
/// it used to be queued, and the peer's first Send into it then ended the stream
/// (`BufferRevoked`, a Local Catastrophic Terminate). One of the stream's own PD is taken.
#[test]
fn rfc5041_7_1_a_receive_no_placement_could_fill_is_refused_when_posted() {
    let mut d = Duo::new(256);
    let (pd, other) = (d.memory.alloc_pd(), d.memory.alloc_pd());
    d.open(S, pd);
    let now = d.now;
    let r = d.memory.alloc_region(8192).unwrap();
    let reg = |pd, offset| MemoryRegistration {
        pd,
        region: r,
        offset,
        len: 4096,
        access: Access::LOCAL_WRITE,
        stream: None,
        to_base: 0,
    };
    let theirs = d.memory.register(reg(other, 0)).unwrap();
    let ours = d.memory.register(reg(pd, 4096)).unwrap();
    let gone = d.memory.register(reg(pd, 0)).unwrap();
    let post = |d: &mut Duo, pd, stag, wr_id| {
        let buffer = d.memory.receive_buffer(pd, stag, 0, 256).unwrap();
        let op = Op::PostRecv {
            stream: S,
            qn: 0,
            wr_id,
            buffer,
        };
        let conn = d.conn.as_mut().unwrap();
        conn.apply(now, op, d.memory.stags())
    };
    assert_eq!(
        post(&mut d, other, theirs.stag, 1),
        Err(PostError::BadSink),
        "another PD's buffer"
    );
    let stale = d.memory.receive_buffer(pd, gone.stag, 0, 256).unwrap();
    d.memory.deregister(gone.stag).unwrap();
    let op = Op::PostRecv {
        stream: S,
        qn: 0,
        wr_id: 2,
        buffer: stale,
    };
    let conn = d.conn.as_mut().unwrap();
    assert_eq!(
        conn.apply(now, op, d.memory.stags()),
        Err(PostError::BadSink),
        "a deregistered buffer"
    );
    // A buffer of no registration at all (only `Memory::receive_buffer` builds them right):
    // deregistration could never stop it.
    let bare = PostedBuffer {
        stag: None,
        ..d.memory.receive_buffer(pd, ours.stag, 0, 256).unwrap()
    };
    assert_eq!(
        d.conn().post_recv(S, 0, 4, bare),
        Err(PostError::BadSink),
        "a buffer without an STag"
    );
    assert_eq!(
        post(&mut d, pd, ours.stag, 3),
        Ok(Applied::Posted {
            stream: S,
            qn: 0,
            wr_id: 3
        })
    );
    // A bad buffer where no receive can go is refused for that first, as any receive is
    // (verbs completes a receive refused for an ended stream `Flushed`, not in error).
    let stale_again = d.memory.receive_buffer(pd, ours.stag, 0, 256).unwrap();
    let op = Op::PostRecv {
        stream: S,
        qn: 99,
        wr_id: 5,
        buffer: PostedBuffer {
            stag: None,
            ..stale_again
        },
    };
    let conn = d.conn.as_mut().unwrap();
    assert_eq!(
        conn.apply(now, op, d.memory.stags()),
        Err(PostError::InvalidQn)
    );
    // The taken buffer is the first posted (MSN 1): the refused ones never queued ahead.
    d.send(S, 16, &useg(1, true, 0, 1, 0, b"into the stream's own PD"));
    d.settle();
    let mut got = vec![0u8; 24];
    d.memory.region(r).unwrap().read(4096, &mut got).unwrap();
    assert_eq!(&got[..], b"into the stream's own PD", "{:?}", d.inds);
    assert_eq!(d.conn().session_state(S), Some(State::Established));
}

/// RFC 5041 §5.4: the ULP Message Length of an untagged message is the MO plus the payload
/// of its last segment. A zero-length last segment whose MO passes its 256-byte buffer made a
/// message of 2^31 bytes that the ULP was told of (an independent review); it is a message too
/// long for the buffer now (§7.2, 0x2/0x05): the stream ends, nothing is delivered.
#[test]
fn rfc5041_5_4_a_zero_length_last_segment_past_its_buffer_is_too_long() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open(S, pd);
    d.posted_buffer(pd, 11);
    d.send(S, 16, &useg(1, true, 0, 1, 0x7fff_0000, b""));
    d.settle();
    assert!(
        !d.inds
            .iter()
            .any(|i| matches!(i, Indication::Received { .. })),
        "nothing delivered: {:?}",
        d.inds
    );
    assert!(
        matches!(d.conn().session_state(S), Some(State::Terminated(_))),
        "the stream ends"
    );
}

/// RFC 5043 §5.1 ("will carry only SCTP Data Chunks as defined in this document") and §6.1
/// (a chunk that conforms to none of the legal patterns terminates the session): a chunk of
/// PPID 18 on an established stream ends its session with a Terminate. It was counted and
/// dropped, the session left open (an independent review).
#[test]
fn rfc5043_6_1_a_chunk_of_unknown_ppid_terminates_the_session() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open(S, pd);
    d.send(S, 18, &useg(1, true, 0, 1, 0, b"not DDP"));
    d.settle();
    assert_eq!(d.conn().stats().unknown_ppid, 1);
    assert_eq!(
        d.conn().session_state(S),
        Some(State::Terminated(TerminationReason::ProtocolError(
            ProtocolError::UnknownPpid(18)
        )))
    );
    // Our Terminate (function code 4) went to the peer.
    assert!(
        d.raw_rx
            .iter()
            .any(|(s, p, x)| *s == S && *p == 17 && x.get(2..4) == Some(&[0, 4][..])),
        "a Terminate"
    );
}

/// RFC 5043 §6.1 terminates a session whose chunks break its pattern, and §6.2 starts one only
/// with an Initiate at DDP-SSN 0: on a stream without a session, a segment, a Terminate or an
/// Accept is dropped and counted, the stream stays Idle and nothing answers it. Each used to
/// end the stream without a role and answer with a Terminate at DDP-SSN 0, which a peer idle
/// on the stream refused with its own, and neither side could initiate on it again (an
/// independent review).
#[test]
fn rfc5043_6_1_a_stray_chunk_on_a_stream_without_a_session_is_dropped() {
    let mut d = Duo::new(256);
    d.send(S, 16, &useg(0, true, 0, 1, 0, b"x"));
    d.send(S, 17, &ctl(0, 4, b""));
    d.send(S, 17, &ctl(0, 2, b""));
    d.send(S, 18, b"not DDP");
    d.settle();
    d.run_for(Duration::from_secs(2));
    assert_eq!(d.conn().session_state(S), Some(State::Idle));
    assert_eq!(d.conn().stats().without_session, 4);
    assert_eq!(d.events(S), []);
    assert!(
        !d.raw_rx.iter().any(|(s, p, _)| *s == S && *p == 17),
        "nothing answers a stray chunk"
    );
    // The stream is as new: we may start a session on it.
    let pd = d.memory.alloc_pd();
    d.conn().initiate(S, pd, b"").unwrap();
    d.settle();
    assert!(d
        .raw_rx
        .iter()
        .any(|(s, p, x)| *s == S && *p == 17 && x.get(..4) == Some(&[0, 0, 0, 1][..])));
}

/// RFC 5043 §6.2 has one active side: when both ULPs initiate on a stream, each refuses the
/// Initiate crossing its own (§6.1) with a Terminate. Once those are exchanged and
/// acknowledged nothing of the session is outstanding (§6.6) and either side may initiate
/// again. The refused Initiate used to stay a gap at DDP-SSN 0 before the peer's Terminate:
/// `Connection::initiate` answered `StreamBusy` on both sides for the rest of the association
/// (an independent review).
#[test]
fn rfc5043_6_1_an_initiate_collision_leaves_the_stream_reusable() {
    let mut w = World::perfect(1500);
    w.establish();
    let (cpd, spd) = (w.client.memory.alloc_pd(), w.server.memory.alloc_pd());
    w.client.conn().initiate(S, cpd, b"c").unwrap();
    w.server.conn().initiate(S, spd, b"s").unwrap();
    let refused = Event::SessionTerminated {
        reason: TerminationReason::ProtocolError(ProtocolError::UnexpectedInitiate),
    };
    wait(&mut w, "both Terminates", |w| {
        [&w.client, &w.server].iter().all(|side| {
            let e = session_events(side, S);
            e.contains(&refused) && e.contains(&Event::TerminateReceived)
        })
    });
    wait(&mut w, "the client may initiate again", |w| {
        w.client.conn().initiate(S, cpd, b"again").is_ok()
    });
    wait(&mut w, "the new Initiate", |w| {
        session_events(&w.server, S)
            .iter()
            .any(|e| matches!(e, Event::InitiateReceived { .. }))
    });
    w.server.conn().accept(S, spd, b"").unwrap();
    wait(&mut w, "the Accept", |w| {
        w.client.conn().session_state(S) == Some(State::Established)
    });
}

/// RFC 5043 §6: "The DDP-SSNs assigned to the Data Chunks for a session MUST NOT have any
/// gaps". The peer's Terminate may overtake its last segments (§6.1), so posted receives and
/// Reads wait for them; a peer that skipped DDP-SSNs before its Terminate left them waiting,
/// and the stream id unusable (§6.6), for the rest of the association (an independent
/// review). The wait is bounded: `GAP_GRACE_RTOS` retransmission timeouts once our side is
/// acknowledged, then the receives and Reads are flushed and the stream may be reused.
#[test]
fn rfc5043_6_a_gap_before_the_peers_terminate_is_waited_for_a_bounded_time() {
    let flushed = |d: &Duo, wr: u64| {
        d.inds
            .iter()
            .any(|i| matches!(i, Indication::RecvFlushed { wr_id, .. } if *wr_id == wr))
    };
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open(S, pd);
    d.posted_buffer(pd, 11);
    // DDP-SSNs 1 to 4 never come.
    d.send(S, 17, &ctl(5, 4, b""));
    d.settle();
    assert_eq!(
        d.conn().session_state(S),
        Some(State::Terminated(TerminationReason::PeerTerminate))
    );
    assert!(!flushed(&d, 11), "late segments may still come (§6.1)");
    let grace = d.conn().association().rto() * ddpdk_control::conn::GAP_GRACE_RTOS;
    d.run_for(grace / 2);
    assert!(!flushed(&d, 11), "still within the grace");
    d.run_for(grace);
    assert!(flushed(&d, 11), "the posted receive returns");
    assert_eq!(d.conn().stats().inbound_gaps_given_up, 1);
    d.conn().initiate(S, pd, b"").unwrap();

    // A Read outstanding when such a Terminate arrives ends flushed likewise.
    let (mut d, _, _) = Duo::read_in_flight();
    d.send(S, 17, &ctl(5, 4, b""));
    d.settle();
    assert_eq!(d.comps.len(), 0, "late segments may still come (§6.1)");
    d.run_for(Duration::from_secs(60));
    assert_eq!(
        d.comps
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect::<Vec<_>>(),
        [(9, Status::Flushed)]
    );
}

/// RFC 5043 §6.3, §6.6: the active side may send its Terminate once its Initiate is
/// acknowledged (§6.6), so it may cross our Reject; the Initiate and Reject are the whole
/// rejected sequence, and the stream id may carry a new session as soon as the Reject is
/// acknowledged. The crossing Terminate, still in flight, used to end that new session (an
/// independent review, session 52). It was sent before the peer had our Reject, so its TSN is
/// below anything of the new session's: it is dropped, before or after the new session's
/// answer, and the new session's own DDP-SSN 1 is placed.
#[test]
fn rfc5043_6_6_a_terminate_crossing_our_reject_does_not_end_the_next_session() {
    for after_answer in [false, true] {
        let mut d = Duo::lenient(256);
        let pd = d.memory.alloc_pd();
        d.send(S, 17, &ctl(0, 1, b""));
        d.settle();
        assert!(d
            .events(S)
            .iter()
            .any(|e| matches!(e, Event::InitiateReceived { .. })));
        // The raw peer's ULP gives up its attempt while ours rejects it: its Terminate is
        // delayed, retransmitted, behind everything else.
        d.lose = Some([&[0, 0, 0, 17][..], &ctl(1, 4, b"")].concat());
        d.send(S, 17, &ctl(1, 4, b""));
        d.conn().reject(S, b"no").unwrap();
        let mut tries = 0;
        while d.conn().initiate(S, pd, b"again").is_err() {
            tries += 1;
            assert!(
                tries < 100,
                "the Reject is acknowledged, the stream id free"
            );
            d.run_for(Duration::from_millis(10));
        }
        d.settle();
        assert!(d
            .raw_rx
            .iter()
            .any(|(s, p, m)| *s == S && *p == 17 && m[..4] == [0, 0, 0, 1] && m[4..] == *b"again"));
        if after_answer {
            d.send(S, 17, &ctl(0, 2, b""));
            d.settle();
            assert_eq!(d.conn().session_state(S), Some(State::Established));
        }
        d.lose = None;
        d.run_for(Duration::from_secs(5));
        let open = if after_answer {
            State::Established
        } else {
            State::InitiateSent
        };
        assert_eq!(
            d.conn().session_state(S),
            Some(open),
            "after_answer {after_answer}"
        );
        assert_eq!(
            d.conn().stats().crossed_rejects,
            1,
            "after_answer {after_answer}"
        );
        if !after_answer {
            d.send(S, 17, &ctl(0, 2, b""));
            d.settle();
        }
        assert_eq!(
            d.conn().session_state(S),
            Some(State::Established),
            "after_answer {after_answer}"
        );
        d.posted_buffer(pd, 11);
        d.send(S, 16, &useg(1, true, 0, 1, 0, b"hi"));
        d.settle();
        assert!(
            d.inds.iter().any(|i| matches!(
                i,
                Indication::Received {
                    wr_id: 11,
                    len: 2,
                    ..
                }
            )),
            "after_answer {after_answer}"
        );
        assert_eq!(d.conn().session_state(S), Some(State::Established));
    }
}

/// The raw peer's attempts on `S`, each rejected by our ULP while the peer's Terminate of it
/// (DDP-SSN 1, which may cross our Reject, RFC 5043 §6.6) is lost for now; then our own
/// Initiate once the last Reject is acknowledged, accepted by the peer. Returns with the
/// Terminates still lost (`d.lose` set).
fn rejected_attempts_then_our_session(d: &mut Duo, pd: Pd, attempts: usize) {
    d.lose = Some([&[0, 0, 0, 17][..], &ctl(1, 4, b"")].concat());
    for k in 0..attempts {
        d.send(S, 17, &ctl(0, 1, b""));
        d.settle();
        let initiates = d
            .events(S)
            .iter()
            .filter(|e| matches!(e, Event::InitiateReceived { .. }))
            .count();
        assert_eq!(initiates, k + 1, "attempt {k} reached the ULP");
        d.send(S, 17, &ctl(1, 4, b""));
        d.conn().reject(S, b"no").unwrap();
        // The Reject acknowledged: the stream id may carry the next attempt (§6.6).
        d.run_for(Duration::from_millis(500));
    }
    let mut tries = 0;
    while d.conn().initiate(S, pd, b"again").is_err() {
        tries += 1;
        assert!(
            tries < 100,
            "the Reject is acknowledged, the stream id free"
        );
        d.run_for(Duration::from_millis(10));
    }
    d.settle();
    d.send(S, 17, &ctl(0, 2, b""));
    d.settle();
    assert_eq!(d.conn().session_state(S), Some(State::Established));
}

/// RFC 5043 §6.3, §6.6: two attempts rejected in a row, each with its Terminate crossing our
/// Reject. Only one crossing Terminate was watched per stream: the second Reject replaced the
/// first attempt's watch, and one of the two Terminates then ended the next session (an
/// independent review, session 52). Each is told apart by its TSN and dropped, and the next
/// session stays open.
#[test]
fn rfc5043_6_6_two_terminates_crossing_our_rejects_do_not_end_the_next_session() {
    let mut d = Duo::lenient(256);
    let pd = d.memory.alloc_pd();
    rejected_attempts_then_our_session(&mut d, pd, 2);
    d.lose = None;
    d.run_for(Duration::from_secs(5));
    assert_eq!(d.conn().session_state(S), Some(State::Established));
    assert_eq!(d.conn().stats().crossed_rejects, 2);
    d.posted_buffer(pd, 11);
    d.send(S, 16, &useg(1, true, 0, 1, 0, b"hi"));
    d.settle();
    assert!(d.inds.iter().any(|i| matches!(
        i,
        Indication::Received {
            wr_id: 11,
            len: 2,
            ..
        }
    )));
    // The session's own Terminate still ends it.
    d.send(S, 17, &ctl(2, 4, b""));
    d.settle();
    assert_eq!(
        d.conn().session_state(S),
        Some(State::Terminated(TerminationReason::PeerTerminate))
    );
}

/// RFC 5043 §6.6, bounded: a stream watches for at most 4 crossing Terminates. Five attempts
/// rejected in a row while SCTP misses each one's Terminate (so no watch ends) drop the oldest
/// watch, counted; the other four Terminates are still told apart and dropped, and the one left
/// unwatched, as before any watch, ends the next session.
#[test]
fn rfc5043_6_6_crossing_watches_are_bounded_and_a_dropped_one_is_counted() {
    let mut d = Duo::lenient(256);
    let pd = d.memory.alloc_pd();
    rejected_attempts_then_our_session(&mut d, pd, 5);
    assert_eq!(d.conn().stats().crossed_rejects_unwatched, 1);
    d.lose = None;
    d.run_for(Duration::from_secs(5));
    assert_eq!(d.conn().stats().crossed_rejects, 4);
    assert_eq!(
        d.conn().session_state(S),
        Some(State::Terminated(TerminationReason::PeerTerminate))
    );
}

/// RFC 5043 §6, §6.6: a legal peer's segment sent before its Terminate may come after it
/// (§6.1); the wait for it was bounded by time only, so one delayed past `GAP_GRACE_RTOS`
/// retransmission timeouts was dropped, its receive flushed, and the stream id freed for a
/// new session that would have judged it (an independent review, session 52). It was
/// transmitted before the Terminate, so its TSN is below the Terminate's: while SCTP's
/// cumulative TSN has not passed that, it may still come, and the wait goes on.
#[test]
fn rfc5043_6_a_chunk_sent_before_the_peers_terminate_is_waited_for_while_sctp_misses_it() {
    let flushed = |d: &Duo, wr: u64| {
        d.inds
            .iter()
            .any(|i| matches!(i, Indication::RecvFlushed { wr_id, .. } if *wr_id == wr))
    };
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open(S, pd);
    d.posted_buffer(pd, 11);
    d.lose = Some(b"late but legal".to_vec());
    d.send(S, 16, &useg(1, true, 0, 1, 0, b"late but legal"));
    while d.round() {}
    d.send(S, 17, &ctl(2, 4, b""));
    d.settle();
    assert_eq!(
        d.conn().session_state(S),
        Some(State::Terminated(TerminationReason::PeerTerminate))
    );
    let grace = d.conn().association().rto() * ddpdk_control::conn::GAP_GRACE_RTOS;
    d.run_for(grace * 4);
    assert!(
        !flushed(&d, 11),
        "SCTP still misses a chunk sent before the Terminate"
    );
    assert_eq!(d.conn().stats().inbound_gaps_given_up, 0);
    assert!(
        d.conn().initiate(S, pd, b"").is_err(),
        "the stream id is not free"
    );
    d.lose = None;
    d.run_for(Duration::from_secs(5));
    assert!(d.inds.iter().any(|i| matches!(
        i,
        Indication::Received {
            wr_id: 11,
            len: 14,
            ..
        }
    )));
    assert!(!flushed(&d, 11));
    assert_eq!(d.conn().stats().inbound_gaps_given_up, 0);
    d.conn().initiate(S, pd, b"").unwrap();
}

/// Robustness probe (expected to pass): crafted chunks — short, huge MSN/QN/TO, wrapping
/// DDP-SSNs, Initiates on used streams, unknown PPIDs — must not panic the receive path.
#[test]
fn crafted_chunks_do_not_panic() {
    let mut rng = world::Rng::new(77);
    for round in 0..40 {
        let mut d = Duo::new(1024);
        let pd = d.memory.alloc_pd();
        if round % 2 == 0 {
            d.open(S, pd);
            let r = d.memory.alloc_region(4096).unwrap();
            let reg = d
                .memory
                .register(MemoryRegistration {
                    pd,
                    region: r,
                    offset: 0,
                    len: 4096,
                    access: Access::LOCAL_WRITE | Access::REMOTE_WRITE,
                    stream: None,
                    to_base: u64::MAX - 4096,
                })
                .unwrap();
            for q in 0..3 {
                let b = d.memory.receive_buffer(pd, reg.stag, 0, 256).unwrap();
                d.conn().post_recv(S, q, q as u64, b).unwrap();
            }
        }
        for _ in 0..300 {
            let stream = (rng.below(3)) as u16;
            let ssn = match rng.below(4) {
                0 => 0,
                1 => rng.below(8) as u16,
                2 => 0xffff - rng.below(4) as u16,
                _ => rng.next_u64() as u16,
            };
            let chunk = match rng.below(7) {
                0 => {
                    let n = rng.below(4) as usize;
                    (0..n).map(|_| rng.next_u64() as u8).collect::<Vec<u8>>()
                }
                1 => ctl(ssn, rng.below(6) as u16, &vec![1; rng.below(600) as usize]),
                2 => tseg(
                    ssn,
                    rng.chance(0.5),
                    rng.next_u64() as u32,
                    u64::MAX - rng.below(5000),
                    &vec![9; rng.below(1400) as usize],
                ),
                3 => useg(
                    ssn,
                    rng.chance(0.5),
                    [0, 1, 2, u32::MAX][rng.below(4) as usize],
                    [0, 1, 2, u32::MAX, u32::MAX - 1][rng.below(5) as usize],
                    [0, 1, 255, u32::MAX - 10, u32::MAX][rng.below(5) as usize],
                    &vec![9; rng.below(1400) as usize],
                ),
                4 => {
                    let mut c = useg(ssn, true, 0, 1, 0, b"x");
                    c[2] = rng.next_u64() as u8;
                    c
                }
                5 => ctl(0, 1, b""),
                _ => vec![0; 2 + rng.below(30) as usize],
            };
            let ppid = [16, 17, 16, 17, 0, 99][rng.below(6) as usize];
            if chunk.is_empty() {
                continue;
            }
            let _ = d.raw.send(stream, ppid, &chunk);
            if rng.chance(0.1) {
                d.settle();
            }
            if rng.chance(0.02) {
                let _ = d.conn().terminate(stream);
            }
            if rng.chance(0.02) {
                let _ = d.conn().accept(stream, pd, b"");
            }
        }
        d.settle();
        let st = *d.conn().stats();
        assert!(
            st.segments_received + st.control_received + st.unknown_ppid > 100,
            "{st:?}"
        );
    }
}

/// Probe (expected to pass): DDP-SSN wrap past 65535 within one session.
#[test]
fn rfc5043_5_2_1_ddp_ssn_wraps_within_a_session() {
    let mut d = Duo::new(1024);
    let pd = d.memory.alloc_pd();
    d.open(S, pd);
    let n: u32 = 70_000;
    for i in 1..=n {
        d.send(S, 16, &tseg(i as u16, true, 1, 0, b""));
        if i % 500 == 0 {
            d.settle();
            d.inds
                .retain(|i| !matches!(i, Indication::TaggedDelivered { .. }));
        }
    }
    d.settle();
    assert!(
        !d.inds.iter().any(|i| matches!(i, Indication::Error { .. })),
        "{:?}",
        d.inds
    );
    assert_eq!(d.conn().session_state(S), Some(State::Established));
    assert_eq!(d.conn().stats().segments_received, u64::from(n));
}

/// RFC 5043 §6.1/§6.3 (normative order is the DDP-SSN's): the server initiates, the peer
/// answers Reject(0) but also sends a segment with DDP-SSN 1, which arrives first. The active
/// side opened its receive path at `initiate` and the session accepts any DDP-SSN > 0 before
/// the answer, so the segment is placed and *delivered* to the ULP, which then learns the
/// session was rejected (the Reject is then flagged AfterFinal). §6.3's point — no resources
/// committed before the answer — is lost; the ULP sees a delivery on a never-accepted session.
#[test]
fn rfc5043_6_3_nothing_is_delivered_before_the_answer() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.conn().initiate(S, pd, b"").unwrap();
    d.settle();
    assert!(d
        .raw_rx
        .iter()
        .any(|(s, p, c)| *s == S && *p == 17 && c[2..4] == [0, 1]));
    d.send(S, 16, &tseg(1, true, 0x1234, 0, b""));
    d.send(S, 17, &ctl(0, 3, b"no"));
    d.settle();
    let delivered = d
        .inds
        .iter()
        .any(|i| matches!(i, Indication::TaggedDelivered { stream: S, .. }));
    assert!(!delivered, "delivered on a rejected session: {:?}", d.inds);
}

impl Duo {
    /// A region of `len` bytes of `pd`, registered for remote write at TO `to_base`.
    fn remote_write_region(
        &mut self,
        pd: Pd,
        len: u64,
        to_base: u64,
    ) -> (
        ddpdk_control::memory::RegionId,
        ddpdk_control::memory::Registered,
    ) {
        self.region_with(pd, len, to_base, Access::REMOTE_WRITE)
    }

    fn region_with(
        &mut self,
        pd: Pd,
        len: u64,
        to_base: u64,
        access: Access,
    ) -> (
        ddpdk_control::memory::RegionId,
        ddpdk_control::memory::Registered,
    ) {
        let r = self.memory.alloc_region(len as usize).unwrap();
        let reg = self
            .memory
            .register(MemoryRegistration {
                pd,
                region: r,
                offset: 0,
                len,
                access,
                stream: None,
                to_base,
            })
            .unwrap();
        (r, reg)
    }

    fn region_bytes(&self, r: ddpdk_control::memory::RegionId, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.memory.region(r).unwrap().read(0, &mut v).unwrap();
        v
    }

    /// The stream errors the server indicated: (error, segment length).
    fn errors(&self) -> Vec<(RxError, usize)> {
        self.inds
            .iter()
            .filter_map(|i| match i {
                Indication::Error {
                    error, segment_len, ..
                } => Some((*error, *segment_len)),
                _ => None,
            })
            .collect()
    }

    /// Whether the raw peer received a DDP Stream Session Terminate on `stream`.
    fn got_terminate(&self, stream: u16) -> bool {
        self.raw_rx
            .iter()
            .any(|(s, p, d)| *s == stream && *p == 17 && d.get(2..4) == Some(&[0, 4]))
    }
}

/// RFC 5043 §9: "The SCTP adaptation layer MUST reject DDP Segments that are larger than the
/// maximum size specified." The size taken is the MULPDU we announced with the room our
/// sender keeps for a SACK given back (a peer that keeps none fills one unfragmented DATA
/// chunk): a segment of exactly that is placed; one octet more is refused, counted, places
/// nothing, and stops the stream as a receive error.
#[test]
fn rfc5043_9_segment_over_the_mulpdu_is_refused_and_counted() {
    // The peer's path is wider than ours, so that one octet over our limit still leaves it
    // unfragmented.
    let mut d = Duo::with_server_path_mtu(256, sctp(SRV_PORT, 256).path_mtu - 64);
    let pd = d.memory.alloc_pd();
    d.open(S, pd);
    let mulpdu = d.conn().max_sizes().mulpdu + ddpdk_dataplane::ddp::SACK_HEADROOM;
    let tagged_header = 14;
    let (r, reg) = d.remote_write_region(pd, 8192, 0);
    let exact = vec![0x11; mulpdu - tagged_header];
    let over = vec![0x22; mulpdu - tagged_header + 1];
    d.send_in_turn(&[
        &tseg(1, true, reg.stag.0, 0, &exact),
        &tseg(2, true, reg.stag.0, 4096, &over),
    ]);
    let bytes = d.region_bytes(r, 8192);
    assert!(
        bytes[..exact.len()].iter().all(|&b| b == 0x11),
        "a segment of exactly the MULPDU ({mulpdu}) is placed"
    );
    assert!(
        bytes[4096..].iter().all(|&b| b == 0),
        "nothing of the oversize segment is placed"
    );
    assert_eq!(
        d.errors(),
        vec![(
            RxError::Oversize {
                len: mulpdu as u32 + 1,
                max: mulpdu as u32
            },
            mulpdu + 1
        )]
    );
    let st = *d.conn().stats();
    assert_eq!((st.oversize_segments, st.receive_errors), (1, 1), "{st:?}");
    // The endpoint's ULP ends the stream (RFC 5041 §6.2.2).
    assert!(d.got_terminate(S), "a Terminate went to the peer");
    assert!(matches!(
        d.conn().session_state(S),
        Some(State::Terminated(TerminationReason::ReceiveError(
            RxError::Oversize { .. }
        )))
    ));
}

/// RFC 5043 §9 with IPsec (RFC 5043 §13): an endpoint whose packets carry ESP sends segments
/// that leave room for it, but takes what arrived unfragmented from a peer whose ESP adds less.
/// The receive slack moves the limit by exactly its size: a segment that much over the
/// MULPDU is placed, one octet more is still refused.
#[test]
fn rfc5043_9_the_receive_limit_takes_back_the_esp_headroom() {
    const SLACK: usize = 37;
    // Our packets leave 2 x SLACK free, and we take back SLACK: the peer, sending with the
    // whole path MTU, can send segments past the limit too.
    let mut d = Duo::with_server_path_mtu(256, sctp(SRV_PORT, 256).path_mtu - 2 * SLACK);
    let pd = d.memory.alloc_pd();
    d.open(S, pd);
    d.conn().set_receive_slack(SLACK);
    let mulpdu = d.conn().max_sizes().mulpdu + ddpdk_dataplane::ddp::SACK_HEADROOM;
    let tagged_header = 14;
    let (r, reg) = d.remote_write_region(pd, 8192, 0);
    let most = vec![0x33; mulpdu + SLACK - tagged_header];
    let over = vec![0x44; mulpdu + SLACK - tagged_header + 1];
    d.send_in_turn(&[
        &tseg(1, true, reg.stag.0, 0, &most),
        &tseg(2, true, reg.stag.0, 4096, &over),
    ]);
    let bytes = d.region_bytes(r, 8192);
    assert!(bytes[..most.len()].iter().all(|&b| b == 0x33));
    assert!(bytes[4096..].iter().all(|&b| b == 0));
    assert_eq!(
        d.errors(),
        vec![(
            RxError::Oversize {
                len: (mulpdu + SLACK + 1) as u32,
                max: (mulpdu + SLACK) as u32
            },
            mulpdu + SLACK + 1
        )]
    );
    // What we send is unchanged: the MULPDU announced is the sending side's.
    assert_eq!(
        d.conn().max_sizes().mulpdu + ddpdk_dataplane::ddp::SACK_HEADROOM,
        mulpdu
    );
}

/// RFC 5041 §7.1 with §6.2.2: after an invalid STag, a bounds violation or a TO that wraps,
/// the error is indicated with its §7.2 number and nothing is placed; the endpoint, as the
/// ULP, then ends the faulted stream: a Terminate goes to the peer, the session reads
/// Terminated with the error as its reason, the counters say so, and a valid write that
/// follows is not placed.
#[test]
fn rfc5041_6_2_2_a_receive_error_ends_the_session_with_a_terminate() {
    const BASE: u64 = 0x1000;
    // A registration that reaches the top of the TO space, where a segment inside it can wrap
    // (check 5) before it leaves the bounds (check 4).
    const TOP: u64 = u64::MAX - 4096;
    type Make = fn(u32) -> Vec<u8>;
    let cases: [(&str, u64, Make, DdpError); 3] = [
        (
            "invalid STag",
            BASE,
            |stag| tseg(1, true, stag ^ 0x01, BASE, &[0xaa; 100]),
            DdpError::InvalidStag,
        ),
        (
            "base or bounds",
            BASE,
            |stag| tseg(1, true, stag, BASE + 4096 - 99, &[0xaa; 100]),
            DdpError::BaseOrBounds,
        ),
        (
            "TO wrap",
            TOP,
            |stag| tseg(1, true, stag, u64::MAX - 9, &[0xaa; 100]),
            DdpError::ToWrap,
        ),
    ];
    for (name, to_base, make, want) in cases {
        let mut d = Duo::new(256);
        let pd = d.memory.alloc_pd();
        d.open(S, pd);
        let (r, reg) = d.remote_write_region(pd, 4096, to_base);
        d.send(S, 16, &make(reg.stag.0));
        d.settle();
        assert_eq!(
            d.errors().iter().map(|e| e.0).collect::<Vec<_>>(),
            vec![RxError::Ddp(want)],
            "{name}"
        );
        assert!(d.got_terminate(S), "{name}: a Terminate went to the peer");
        assert_eq!(
            d.conn().session_state(S),
            Some(State::Terminated(TerminationReason::ReceiveError(
                RxError::Ddp(want)
            ))),
            "{name}"
        );
        assert!(d.events(S).contains(&Event::SessionTerminated {
            reason: TerminationReason::ReceiveError(RxError::Ddp(want))
        }));
        let st = *d.conn().stats();
        assert_eq!(
            (st.receive_errors, st.sessions_faulted),
            (1, 1),
            "{name}: {st:?}"
        );
        // A valid write after the Terminate: dropped, counted, not placed.
        d.send(S, 16, &tseg(2, true, reg.stag.0, to_base, &[0xbb; 100]));
        d.settle();
        assert!(
            d.region_bytes(r, 4096).iter().all(|&b| b == 0),
            "{name}: nothing placed"
        );
        assert_eq!(d.conn().stats().after_session_end, 1, "{name}");
        // The association lives on (RFC 5043 §11.3).
        assert!(!d.conn().is_closed(), "{name}");
    }
}

/// RFC 5041 §7.1: after a stream's first error nothing more of it is placed, and every such
/// segment is counted. Segments bundled in the same SCTP packet behind the faulty one reach
/// the stream before its session's end is recorded; the attack matrix on the binary found 14
/// of 2^20 random-STag segments dropped that way without a count.
#[test]
fn rfc5041_7_1_segments_behind_an_error_in_one_packet_are_counted() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open(S, pd);
    let (r, reg) = d.remote_write_region(pd, 4096, 0);
    d.send(S, 16, &tseg(1, true, reg.stag.0 ^ 1, 0, &[0xaa; 64]));
    for ssn in 2..6 {
        d.send(S, 16, &tseg(ssn, true, reg.stag.0, 0, &[0xbb; 64]));
    }
    d.settle();
    let st = *d.conn().stats();
    assert_eq!(st.segments_received, 5, "{st:?}");
    assert_eq!(st.receive_errors, 1, "{st:?}");
    assert_eq!(
        st.after_session_end, 4,
        "every segment behind the error counted: {st:?}"
    );
    assert!(
        d.region_bytes(r, 4096).iter().all(|&b| b == 0),
        "nothing placed"
    );
}

// ------------------------------------------------------------------------------------------
// RDMAP from a hostile raw peer (RFC 5040 §4, §5, §7): each error produces the Terminate of
// §4.8 with the right layer, type and code, ends the stream, and places nothing.
// ------------------------------------------------------------------------------------------

use ddpdk_control::conn::{Payload, PostError, RdmaOp, RdmaRequest};
use ddpdk_control::rdmap::{encode_private_data, RdmaLimits};
use ddpdk_dataplane::mem::Stag;
use ddpdk_dataplane::wire::rdmap::{
    AtomicOp, AtomicRequest, AtomicResponse, Control, Opcode, RdmapError, ReadRequest,
    TerminateError, TerminatePacket, TerminateRepr, QN_ATOMIC_RESPONSE, QN_TERMINATE,
};

/// The RDMAP Control octet of `opcode` under RDMAP `version` (RFC 5040 §4.1: version in the
/// top two bits, opcode in the low four).
fn control(version: u8, opcode: Opcode) -> u8 {
    (version << 6) | opcode.bits()
}

/// An untagged DDP Segment with RDMAP's RsvdULP: the Control octet, then four zero octets.
fn rseg(ssn: u16, control: u8, qn: u32, msn: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&ssn.to_be_bytes());
    v.push(0x40 | 0x01);
    v.extend_from_slice(&[control, 0, 0, 0, 0]);
    v.extend_from_slice(&qn.to_be_bytes());
    v.extend_from_slice(&msn.to_be_bytes());
    v.extend_from_slice(&0u32.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// A tagged DDP Segment with RDMAP's Control octet in RsvdULP.
fn rtseg(ssn: u16, control: u8, stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    let mut v = tseg(ssn, true, stag, to, payload);
    v[3] = control;
    v
}

/// A Read Response segment (RDMAP version 1) of `len` bytes of 0xaa.
fn rrseg(ssn: u16, last: bool, stag: u32, to: u64, len: usize) -> Vec<u8> {
    let mut v = tseg(ssn, last, stag, to, &vec![0xaa; len]);
    v[3] = control(1, Opcode::ReadResponse);
    v
}

impl Duo {
    /// The raw peer initiates an RDMAP stream on `stream` (its Read limits in the Private
    /// Data); the server's ULP accepts it for `pd`.
    fn open_rdmap(&mut self, stream: u16, pd: Pd) {
        let limits = RdmaLimits { ird: 4, ord: 4 };
        let pdata = encode_private_data(limits, b"").unwrap();
        self.send(stream, 17, &ctl(0, 1, &pdata));
        self.settle();
        self.conn()
            .accept_rdmap(stream, pd, limits, b"")
            .expect("an RDMAP Initiate");
        self.settle();
    }

    /// The RDMAP Terminates the raw peer received on `stream` (untagged, QN 2: RFC 5040 §4.8).
    fn rdmap_terminates(&self, stream: u16) -> Vec<TerminateError> {
        self.raw_rx
            .iter()
            .filter(|(s, p, d)| {
                *s == stream
                    && *p == 16
                    && d.len() > 20
                    && d[2] & 0x80 == 0
                    && d[8..12] == QN_TERMINATE.to_be_bytes()
            })
            .filter_map(|(_, _, d)| TerminatePacket::new_checked(&d[20..]).ok())
            .map(|t| t.error())
            .collect()
    }

    /// Sends `segment` (DDP-SSN 1) on an RDMAP stream with a receive posted and a writable
    /// region, and returns the Terminate it drew, with whether anything was placed anywhere.
    fn provoke(segment: impl Fn(Stag) -> Vec<u8>) -> (Vec<TerminateError>, bool, Duo) {
        Duo::provoke_with(Access::REMOTE_WRITE, segment)
    }

    /// An RDMAP stream with one Read outstanding (wr_id 9: 1000 bytes into a 4096-byte sink
    /// registered at TO 0x2000, from TO 0x2100), and the Read Request the raw peer got for it.
    fn read_in_flight() -> (Duo, ddpdk_control::memory::RegionId, ReadRequest) {
        let (d, _, sink, request) = Duo::read_in_flight_in_pd();
        (d, sink, request)
    }

    /// [`Duo::read_in_flight`], with the stream's protection domain.
    fn read_in_flight_in_pd() -> (Duo, Pd, ddpdk_control::memory::RegionId, ReadRequest) {
        let mut d = Duo::new(256);
        let pd = d.memory.alloc_pd();
        d.open_rdmap(S, pd);
        let sink = d.memory.alloc_region(4096).unwrap();
        // Remote write too, as iWARP verbs ask of a Read's Data Sink (its Read Response is a
        // tagged placement): the peer was told of it, and the tests that have the peer
        // invalidate it need that (a local-only STag is not the peer's to invalidate).
        let sink_reg = d
            .memory
            .register(MemoryRegistration {
                pd,
                region: sink,
                offset: 0,
                len: 4096,
                access: Access::LOCAL_WRITE | Access::REMOTE_WRITE,
                stream: None,
                to_base: 0x2000,
            })
            .unwrap();
        let read = RdmaRequest {
            wr_id: 9,
            stream: S,
            op: RdmaOp::Read {
                source: Stag(0x0011_2201),
                source_to: 0,
                sink: sink_reg.stag,
                sink_to: 0x2100,
                len: 1000,
            },
            data: Payload::Bytes(Vec::new()),
            signaled: true,
        };
        let Duo { conn, memory, .. } = &mut d;
        conn.as_mut()
            .unwrap()
            .post_rdma(read, memory.stags())
            .unwrap();
        d.settle();
        let request = d
            .raw_rx
            .iter()
            .find(|(s, p, x)| *s == S && *p == 16 && x.len() == 48 && x[8..12] == [0, 0, 0, 1])
            .map(|(_, _, x)| ReadRequest::parse(&x[20..]).unwrap())
            .expect("the Read Request");
        assert_eq!(
            (request.sink_stag, request.sink_to, request.size),
            (sink_reg.stag.0, 0x2100, 1000)
        );
        (d, pd, sink, request)
    }

    /// [`Duo::provoke`] with the region's access rights chosen.
    fn provoke_with(
        access: Access,
        segment: impl Fn(Stag) -> Vec<u8>,
    ) -> (Vec<TerminateError>, bool, Duo) {
        let mut d = Duo::new(256);
        let pd = d.memory.alloc_pd();
        d.open_rdmap(S, pd);
        let (rbuf, _) = d.posted_buffer(pd, 40);
        let (w, wreg) = d.region_with(pd, 4096, 0x1000, access);
        d.send(S, 16, &segment(wreg.stag));
        d.settle();
        let placed = d.region_bytes(rbuf, 4096).iter().any(|&b| b != 0)
            || d.region_bytes(w, 4096).iter().any(|&b| b != 0);
        (d.rdmap_terminates(S), placed, d)
    }
}

fn assert_terminated(case: &str, got: (Vec<TerminateError>, bool, Duo), want: TerminateError) {
    let (terminates, placed, mut d) = got;
    assert_eq!(terminates, [want], "{case}: one Terminate, with its code");
    assert!(!placed, "{case}: nothing placed");
    assert!(
        d.inds
            .iter()
            .all(|i| !matches!(i, Indication::Received { .. })),
        "{case}: nothing delivered"
    );
    assert!(
        matches!(d.conn().session_state(S), Some(State::Terminated(_))),
        "{case}: the stream ends (RFC 5040 §7)"
    );
}

/// RFC 5040 §4.1 / §7: a message of an RDMAP version other than 1, tagged or untagged, is
/// Remote Operation Error "Invalid RDMAP version" (0x2/0x05).
#[test]
fn rfc5040_4_1_a_message_of_another_rdmap_version_is_terminated() {
    for version in [0, 2, 3] {
        let send = Duo::provoke(|_| rseg(1, control(version, Opcode::Send), 0, 1, &[0xaa; 64]));
        assert_terminated(
            &format!("Send, version {version}"),
            send,
            TerminateError::Rdmap(RdmapError::InvalidVersion),
        );
        let write = Duo::provoke(|stag| {
            rtseg(
                1,
                control(version, Opcode::Write),
                stag.0,
                0x1000,
                &[0xaa; 64],
            )
        });
        assert_terminated(
            &format!("Write, version {version}"),
            write,
            TerminateError::Rdmap(RdmapError::InvalidVersion),
        );
    }
}

/// RFC 5040 §4.2 / §7: an opcode the message's DDP model or queue does not carry (a Write
/// sent untagged, a Send tagged, a Send on the Read Request queue, a Read Request on the Send
/// queue, a reserved opcode) is Remote Operation Error "Unexpected OpCode" (0x2/0x06).
#[test]
fn rfc5040_4_2_an_opcode_out_of_place_is_unexpected_opcode() {
    type Make = fn(Stag) -> Vec<u8>;
    let cases: [(&str, Make); 5] = [
        ("Write, untagged", |_| {
            rseg(1, control(1, Opcode::Write), 0, 1, &[0xaa; 64])
        }),
        ("Send, tagged", |stag| {
            rtseg(1, control(1, Opcode::Send), stag.0, 0x1000, &[0xaa; 64])
        }),
        ("Send on queue 1", |_| {
            rseg(1, control(1, Opcode::Send), 1, 1, &[0xaa; 28])
        }),
        ("Read Request on queue 0", |_| {
            rseg(1, control(1, Opcode::ReadRequest), 0, 1, &[0xaa; 28])
        }),
        ("reserved opcode 0xe", |_| {
            rseg(1, (1 << 6) | 0xe, 0, 1, &[0xaa; 64])
        }),
    ];
    for (case, make) in cases {
        assert_terminated(
            case,
            Duo::provoke(make),
            TerminateError::Rdmap(RdmapError::UnexpectedOpcode),
        );
    }
}

/// RFC 7306 §5.2.2 (with RFC 5040 §7): an Atomic Response when no Atomic is outstanding is
/// "Unexpected OpCode" (0x2/0x06), like a Read Response without a Read; without the check it
/// would be taken for DDP's Invalid QN or delivered to queue 3.
#[test]
fn rfc7306_5_2_2_an_atomic_response_without_an_atomic_is_unexpected_opcode() {
    let response = AtomicResponse {
        request_id: 7,
        original: 41,
    };
    assert_terminated(
        "Atomic Response, no Atomic",
        Duo::provoke(|_| {
            rseg(
                1,
                control(1, Opcode::AtomicResponse),
                QN_ATOMIC_RESPONSE,
                1,
                &response.to_bytes(),
            )
        }),
        TerminateError::Rdmap(RdmapError::UnexpectedOpcode),
    );
}

/// RFC 7306 §6.3: the Data Sink checks that Immediate Data is exactly 8 bytes. RFC 7306 names
/// no code for it: the unspecified Remote Operation Error (0x2/0xFF), with nothing placed into
/// the posted receive and nothing delivered.
#[test]
fn rfc7306_6_3_immediate_data_of_other_than_8_bytes_is_refused() {
    type Make = fn(Stag) -> Vec<u8>;
    let cases: [(&str, Make); 4] = [
        ("7 bytes", |_| {
            rseg(1, control(1, Opcode::ImmediateData), 0, 1, &[0xaa; 7])
        }),
        ("9 bytes", |_| {
            rseg(1, control(1, Opcode::ImmediateData), 0, 1, &[0xaa; 9])
        }),
        ("none, with SE", |_| {
            rseg(1, control(1, Opcode::ImmediateDataSe), 0, 1, &[])
        }),
        ("8 bytes at MO 8", |_| {
            let mut v = rseg(1, control(1, Opcode::ImmediateData), 0, 1, &[0xaa; 8]);
            v[16..20].copy_from_slice(&8u32.to_be_bytes());
            v
        }),
    ];
    for (case, make) in cases {
        assert_terminated(
            case,
            Duo::provoke(make),
            TerminateError::Rdmap(RdmapError::OperationUnspecified),
        );
    }
}

/// RFC 7306 §6.3 and §6.4: 8 bytes of Immediate Data consume the next posted receive and
/// complete it as a Send would, with its kind in the RsvdULP.
#[test]
fn rfc7306_6_3_immediate_data_consumes_a_posted_receive() {
    let (terminates, _, d) = Duo::provoke(|_| {
        rseg(
            1,
            control(1, Opcode::ImmediateDataSe),
            0,
            1,
            &7u64.to_be_bytes(),
        )
    });
    assert!(terminates.is_empty(), "accepted: {terminates:?}");
    assert_eq!(world::received(&d.inds), [(40, 8, Opcode::ImmediateDataSe)]);
}

fn atomic_request(op: AtomicOp, request_id: u32, stag: Stag, to: u64, add_swap: u64) -> Vec<u8> {
    let request = AtomicRequest {
        op,
        request_id,
        stag: stag.0,
        to,
        add_swap,
        add_swap_mask: 0,
        compare: 0,
        compare_mask: u64::MAX,
    };
    rseg(
        1,
        control(1, Opcode::AtomicRequest),
        1,
        1,
        &request.to_bytes(),
    )
}

/// RFC 7306 §8.2: an Atomic Request whose target is not 64-bit aligned is RDMA layer Remote
/// Operation Error "Catastrophic error, localized to RDMAP Stream" (0x2/0x07), and §5.1.1 /
/// §5.1.2: the Responder's memory is not modified.
#[test]
fn rfc7306_8_2_a_misaligned_atomic_is_catastrophic_and_modifies_nothing() {
    for to in [0x1004, 0x1001, 0x1ff7] {
        assert_terminated(
            &format!("FetchAdd at {to:#x}"),
            Duo::provoke_with(Access::REMOTE_ATOMIC, |stag| {
                atomic_request(AtomicOp::FetchAdd, 7, stag, to, 1)
            }),
            TerminateError::Rdmap(RdmapError::CatastrophicStream),
        );
    }
}

/// RFC 7306 §5.2.1 item 4: an Atomic Operation Code the Responder does not support surfaces an
/// error (RFC 7306 names no code: the unspecified Remote Operation Error), memory untouched.
#[test]
fn rfc7306_5_2_1_an_unknown_atomic_opcode_is_an_error() {
    for bits in [1, 3, 0xf] {
        assert_terminated(
            &format!("AOpCode {bits}"),
            Duo::provoke_with(Access::REMOTE_ATOMIC, |stag| {
                atomic_request(AtomicOp::Unknown(bits), 7, stag, 0x1000, 1)
            }),
            TerminateError::Rdmap(RdmapError::OperationUnspecified),
        );
    }
}

/// RFC 7306 §5 / RFC 5040 §4.8: an Atomic names its target as a Read or Write does, and is
/// checked as strictly: a registration without the remote atomic right (remote write alone
/// here) is a Remote Protection Error "access rights violation", an unknown STag "invalid
/// STag", a word past the end "base or bounds", memory untouched.
#[test]
fn rfc5040_4_8_an_atomic_is_checked_like_a_read() {
    assert_terminated(
        "no remote atomic right",
        Duo::provoke(|stag| atomic_request(AtomicOp::FetchAdd, 7, stag, 0x1000, 1)),
        TerminateError::Rdmap(RdmapError::AccessRights),
    );
    assert_terminated(
        "unknown STag",
        Duo::provoke_with(Access::REMOTE_ATOMIC, |stag| {
            atomic_request(AtomicOp::FetchAdd, 7, Stag(stag.0 ^ 0x100), 0x1000, 1)
        }),
        TerminateError::Rdmap(RdmapError::InvalidStag),
    );
    assert_terminated(
        "past the end",
        Duo::provoke_with(Access::REMOTE_ATOMIC, |stag| {
            atomic_request(AtomicOp::FetchAdd, 7, stag, 0x1000 + 4096, 1)
        }),
        TerminateError::Rdmap(RdmapError::BaseOrBounds),
    );
}

/// RFC 7306 §5.2.1 items 3 and 8, §5.2.2, §5.1.1: a valid Atomic Request is performed by RDMAP
/// (not delivered to the ULP) and answered with an Atomic Response, untagged on queue 3, that
/// echoes the Request Identifier and carries the word's original value; the word holds the sum
/// in this machine's byte order. Two requests are answered in their order (§5.2.2 item 8).
#[test]
fn rfc7306_5_2_2_an_atomic_is_performed_and_answered_on_queue_3() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    let (w, wreg) = d.region_with(pd, 4096, 0x1000, Access::REMOTE_ATOMIC);
    d.memory
        .region(w)
        .unwrap()
        .place(16, &40u64.to_ne_bytes())
        .unwrap();
    let mut second = atomic_request(AtomicOp::FetchAdd, 0x0b0b, wreg.stag, 0x1010, 2);
    second[..2].copy_from_slice(&2u16.to_be_bytes());
    second[12..16].copy_from_slice(&2u32.to_be_bytes());
    d.send(
        S,
        16,
        &atomic_request(AtomicOp::FetchAdd, 0x0a0a, wreg.stag, 0x1010, 1),
    );
    d.send(S, 16, &second);
    d.settle();
    let mut word = [0u8; 8];
    d.memory.region(w).unwrap().read(16, &mut word).unwrap();
    assert_eq!(u64::from_ne_bytes(word), 43, "40 + 1 + 2");
    let responses: Vec<_> = d
        .raw_rx
        .iter()
        .filter(|(s, p, v)| *s == S && *p == 16 && v.len() > 20 && v[2] & 0x80 == 0)
        .filter(|(_, _, v)| v[8..12] == QN_ATOMIC_RESPONSE.to_be_bytes())
        .map(|(_, _, v)| {
            assert_eq!(Control::from_byte(v[3]).opcode, Opcode::AtomicResponse);
            let msn = u32::from_be_bytes([v[12], v[13], v[14], v[15]]);
            (msn, AtomicResponse::parse(&v[20..]).unwrap())
        })
        .collect();
    let want = [
        (
            1,
            AtomicResponse {
                request_id: 0x0a0a,
                original: 40,
            },
        ),
        (
            2,
            AtomicResponse {
                request_id: 0x0b0b,
                original: 41,
            },
        ),
    ];
    assert_eq!(responses, want);
    assert!(
        d.inds
            .iter()
            .all(|i| !matches!(i, Indication::Received { .. })),
        "not delivered to the ULP"
    );
    assert_eq!(d.conn().stats().atomics_served, 2);
}

/// A connection that was given no region table (`Connection::use_regions`) cannot read a Read
/// Response's bytes as they leave. It used to count the Read as served and send nothing, so
/// the requester waited forever; now the stream ends at once with RDMAP's Local Catastrophic
/// Error (RFC 5040 §4.8, 0x0/0x00), and nothing is read or placed.
#[test]
fn a_read_this_connection_cannot_serve_ends_the_stream_out_loud() {
    let (terminates, placed, mut d) = Duo::provoke_with(Access::REMOTE_READ, |stag| {
        let request = ReadRequest {
            sink_stag: 0x99,
            sink_to: 0,
            size: 64,
            source_stag: stag.0,
            source_to: 0x1000,
        };
        rseg(
            1,
            control(1, Opcode::ReadRequest),
            1,
            1,
            &request.to_bytes(),
        )
    });
    assert_eq!(
        terminates,
        [TerminateError::Rdmap(RdmapError::LocalCatastrophic)]
    );
    assert!(!placed);
    assert_eq!(d.conn().stats().reads_unservable, 1);
    assert!(matches!(
        d.conn().session_state(S),
        Some(State::Terminated(_))
    ));
}

/// RFC 5040 §4.8: the Terminate for a Read this connection cannot serve (no region table)
/// reports the Read Request it fails, as a refusal on arrival or a response stopped later
/// does: M, D and R set, the request's DDP Segment Length, its untagged DDP header (QN 1,
/// MSN 1, MO 0) and its RDMA Read Request header. It used to carry none of them, so the
/// requester could not tell which of its Reads ended the stream.
#[test]
fn rfc5040_4_8_a_read_this_connection_cannot_serve_reports_its_request_whole() {
    let request = |stag: Stag| ReadRequest {
        sink_stag: 0x99,
        sink_to: 0,
        size: 64,
        source_stag: stag.0,
        source_to: 0x1000,
    };
    let segment = |stag: Stag| {
        rseg(
            1,
            control(1, Opcode::ReadRequest),
            1,
            1,
            &request(stag).to_bytes(),
        )
    };
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    let (_, src) = d.region_with(pd, 4096, 0x1000, Access::REMOTE_READ);
    let sent = segment(src.stag);
    d.send(S, 16, &sent);
    d.settle();
    assert_eq!(d.conn().stats().reads_unservable, 1);
    let payload = d.the_terminate(S);
    let packet = TerminatePacket::new_checked(&payload[..]).unwrap();
    let t = TerminateRepr::parse(&packet).unwrap();
    assert_eq!(
        t.error,
        TerminateError::Rdmap(RdmapError::LocalCatastrophic)
    );
    assert_eq!(
        t.read_request,
        Some(request(src.stag)),
        "R: the Read Request header"
    );
    let seg = t.segment.expect("D: the request's DDP header");
    assert!(t.segment_len_valid, "M");
    assert_eq!(seg.ddp_header, &sent[2..20]);
    assert_eq!(usize::from(seg.segment_len), 18 + 28);
}

/// RFC 5040 §4.8 with RFC 7306 §8.1: the Terminate for an Atomic this side cannot execute
/// (its checked target word not in the regions the receive path was given) reports the Atomic
/// Request's segment: M and D set, its DDP Segment Length and untagged DDP header (QN 1,
/// MSN 1, MO 0); R clear (RFC 7306 §8.1 item 2: no RDMA header for an Atomic). It used to
/// carry no DDP header at all.
#[test]
fn rfc5040_4_8_an_atomic_this_side_cannot_execute_reports_its_request_segment() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    let (_, target) = d.region_with(pd, 4096, 0x1000, Access::REMOTE_ATOMIC);
    let sent = atomic_request(AtomicOp::FetchAdd, 7, target.stag, 0x1000, 1);
    d.send(S, 16, &sent);
    // The STag checks, but the regions handed to the receive path are another endpoint's.
    let (elsewhere, _) = Memory::new(1024, 0, 0x4242);
    let mut packets = Vec::new();
    while let Some(n) = d.raw.poll_transmit(d.now, &mut d.buf) {
        packets.push(d.buf[..n].to_vec());
    }
    for p in packets {
        let place = Place {
            stags: d.memory.stags(),
            regions: elsewhere.place().regions,
        };
        let now = d.now;
        let _ = d.conn.as_mut().unwrap().handle(now, &p, place);
    }
    d.drain();
    d.settle();
    assert_eq!(d.conn().stats().atomics_unservable, 1);
    let payload = d.the_terminate(S);
    let packet = TerminatePacket::new_checked(&payload[..]).unwrap();
    let t = TerminateRepr::parse(&packet).unwrap();
    assert_eq!(
        t.error,
        TerminateError::Rdmap(RdmapError::LocalCatastrophic)
    );
    let seg = t.segment.expect("D: the request's DDP header");
    assert!(t.segment_len_valid, "M");
    assert_eq!(seg.ddp_header, &sent[2..20]);
    assert_eq!(usize::from(seg.segment_len), sent.len() - 2);
    assert_eq!(t.read_request, None, "R clear");
}

/// Sends the peer's Read Request `request` (given the STag of a REMOTE_READ registration of
/// 4096 bytes at TO `base`) raw, and checks it is refused with RDMAP's TO Wrap before any byte
/// of a Read Response leaves (no tagged DDP segment: the T bit, the top bit of the control
/// octet after the DDP-SSN).
fn refused_with_to_wrap(base: u64, request: impl FnOnce(u32) -> ReadRequest) -> Duo {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    let table = d.memory.region_table().clone();
    d.conn().use_regions(table);
    let (_, src) = d.region_with(pd, 4096, base, Access::REMOTE_READ);
    let request = request(src.stag.0);
    d.send(
        S,
        16,
        &rseg(
            1,
            control(1, Opcode::ReadRequest),
            1,
            1,
            &request.to_bytes(),
        ),
    );
    d.settle();
    assert_eq!(
        d.rdmap_terminates(S),
        [TerminateError::Rdmap(RdmapError::ToWrap)]
    );
    assert!(
        !d.raw_rx
            .iter()
            .any(|(s, p, x)| *s == S && *p == 16 && x.get(2).is_some_and(|c| c & 0x80 != 0)),
        "no part of the Read Response was sent"
    );
    d
}

/// RFC 5041 §7.1 (TO wrap) for the Data Sink a Read Request names: a Read Response that would
/// pass 2^64 at the requester cannot be sent whole, so the Data Source refuses the request
/// with RDMAP's "TO Wrap" (RFC 5040 §4.8, Remote Protection Error) before it reads or sends a
/// byte. It used to send the first segment of the response, stop at the wrap and flush its
/// own queued work, with no Terminate and the stream left open (an independent review).
#[test]
fn rfc5041_7_1_a_read_request_whose_sink_wraps_is_refused() {
    let mut d = refused_with_to_wrap(0x1000, |source_stag| ReadRequest {
        sink_stag: 0x99,
        sink_to: u64::MAX - 100,
        size: 4000,
        source_stag,
        source_to: 0x1000,
    });
    assert!(matches!(
        d.conn().session_state(S),
        Some(State::Terminated(_))
    ));
}

/// RFC 5040 §4.8 0x1/0x04 at the Data Source: a Read Request whose Data Source range starts
/// inside a registration at the top of the TO space and whose end passes 2^64 is refused with
/// RDMAP's TO Wrap, nothing read or sent. (A ddpdk requester refuses such a Read at post,
/// `rfc5041_7_1_a_read_whose_source_wraps_is_refused_at_post`; this peer sends it raw.)
#[test]
fn rfc5040_4_8_a_read_request_whose_source_wraps_is_to_wrap() {
    refused_with_to_wrap(u64::MAX - 4096, |source_stag| ReadRequest {
        sink_stag: 0x99,
        sink_to: 0x1000,
        size: 100,
        source_stag,
        source_to: u64::MAX - 50,
    });
}

/// RFC 5040 §4.8 with RFC 5041 §8.3.1 item 5: a Read Response stopped because the ULP
/// deregistered its Data Source while it waited to leave reports the Read Request as a refusal
/// on arrival does: the Terminate sets M, D and R, with the request's DDP Segment Length, its
/// untagged DDP header (QN 1, MSN 1, MO 0) and its RDMA Read Request header. It used to carry
/// the Read Request header alone (the debt noted in sessions 48-50).
#[test]
fn rfc5040_4_8_a_read_response_stopped_by_deregistration_reports_its_request_whole() {
    const LEN: u32 = 1 << 20;
    let (mut d, src, request) = Duo::serving_a_read(LEN);
    let segment = rseg(
        1,
        control(1, Opcode::ReadRequest),
        1,
        1,
        &request.to_bytes(),
    );
    d.memory.deregister(src.stag).unwrap();
    let Duo { conn, memory, .. } = &mut d;
    let stopped = conn.as_mut().unwrap().recheck_read_sources(memory.stags());
    assert_eq!(stopped, 1, "the waiting response is stopped");
    d.settle();
    let terminates: Vec<Vec<u8>> = d
        .raw_rx
        .iter()
        .filter(|(s, p, x)| {
            *s == S
                && *p == 16
                && x.len() > 20
                && x[2] & 0x80 == 0
                && x[8..12] == QN_TERMINATE.to_be_bytes()
        })
        .map(|(_, _, x)| x[20..].to_vec())
        .collect();
    assert_eq!(terminates.len(), 1, "one Terminate");
    let packet = TerminatePacket::new_checked(&terminates[0][..]).unwrap();
    let t = TerminateRepr::parse(&packet).unwrap();
    assert_eq!(t.error, TerminateError::Rdmap(RdmapError::InvalidStag));
    assert_eq!(t.read_request, Some(request), "R: the Read Request header");
    let seg = t.segment.expect("D: the request's DDP header");
    assert!(t.segment_len_valid, "M");
    // The untagged header of a one-segment Read Request: control octet (L set), RsvdULP, QN 1,
    // MSN 1, MO 0; and its DDP Segment Length: that header and the 28-byte request.
    assert_eq!(seg.ddp_header, &segment[2..20]);
    assert_eq!(usize::from(seg.segment_len), 18 + 28);
    let sent: usize = d
        .raw_rx
        .iter()
        .filter(|(s, p, x)| *s == S && *p == 16 && x.get(2).is_some_and(|c| c & 0x80 != 0))
        .map(|(_, _, x)| x.len() - 16)
        .sum();
    assert!(
        sent < LEN as usize,
        "the response stopped short: {sent} bytes"
    );
}

/// The peer's RDMAP Terminate (QN 2, MSN 1) at DDP-SSN `ssn`.
fn peers_terminate(ssn: u16) -> Vec<u8> {
    let payload = ddpdk_control::rdmap::terminate_payload(
        RxError::Rdmap(RdmapError::OperationUnspecified),
        &ddpdk_dataplane::ddp::HeaderCopy::from_bytes(&[]),
        0,
        None,
    );
    rseg(ssn, control(1, Opcode::Terminate), 2, 1, &payload)
}

/// RFC 5040 §5.4, §7: the peer's Terminate ends the stream, whether or not its session
/// Terminate follows (RFC 5043 §6.2). Work of ours still queued (a Write behind a Read
/// waiting for ORD) does not leave after it, and everything posted, both queues, completes
/// Flushed in posting order. It used to leave, and complete Success after the queue pair was
/// in Error, and posted receives waited for a session end the peer need never send (an
/// independent review).
#[test]
fn rfc5040_5_4_work_queued_before_the_peers_terminate_does_not_leave_after_it() {
    let (mut d, pd, _, first) = Duo::read_in_flight_in_pd();
    d.posted_buffer(pd, 40);
    let Duo { conn, memory, .. } = &mut d;
    let conn = conn.as_mut().unwrap();
    // Reads 10-12 fill ORD (4) beside Read 9; Read 13 waits, and the Write behind it.
    for wr_id in 10..14 {
        let read = RdmaOp::Read {
            source: Stag(0x0011_2201),
            source_to: 0,
            sink: Stag(first.sink_stag),
            sink_to: first.sink_to + 0x100 * (wr_id - 9),
            len: 8,
        };
        let req = RdmaRequest {
            wr_id,
            stream: S,
            op: read,
            data: Payload::Bytes(vec![]),
            signaled: true,
        };
        conn.post_rdma(req, memory.stags()).unwrap();
    }
    let write = RdmaRequest {
        wr_id: 14,
        stream: S,
        op: RdmaOp::Write {
            stag: Stag(0x0033_4401),
            to: 0,
        },
        data: Payload::Bytes(vec![1; 8]),
        signaled: true,
    };
    conn.post_rdma(write, memory.stags()).unwrap();
    d.settle();
    // Tagged (DDP's T bit), RDMAP opcode Write.
    let is_write = |(s, p, x): &&(u16, u32, Vec<u8>)| {
        *s == S && *p == 16 && x[2] & 0x80 != 0 && x[3] & 0x0f == Opcode::Write.bits()
    };
    assert_eq!(
        d.raw_rx.iter().filter(is_write).count(),
        0,
        "the Write waits"
    );
    d.send(S, 16, &peers_terminate(1));
    d.settle();
    assert_eq!(
        d.raw_rx.iter().filter(is_write).count(),
        0,
        "nothing of ours leaves after the peer's Terminate"
    );
    assert_eq!(
        d.completed(),
        (9..=14).map(|w| (w, Status::Flushed)).collect::<Vec<_>>()
    );
    assert!(
        d.inds
            .iter()
            .any(|i| matches!(i, Indication::RecvFlushed { wr_id: 40, .. })),
        "the posted receive is flushed: {:?}",
        d.inds
    );
    // A receive posted after it is refused, as work is: taken, it would wait for a session
    // end the peer need never send (verbs completes it Flushed, the queue pair in Error).
    let (_, reg) = d.region_with(pd, 4096, 0, Access::LOCAL_WRITE);
    let b = d.memory.receive_buffer(pd, reg.stag, 0, 256).unwrap();
    assert_eq!(
        d.conn().post_recv(S, 0, 41, b),
        Err(PostError::Session(
            ddpdk_control::session::LocalError::Terminated
        ))
    );
}

/// RFC 5041 §8.3.1 items 5-6 after the peer's Terminate: a Read Response still queued goes
/// no further. It used to go on segment by segment, and the check that stops a response
/// whose Data Source is revoked skipped a stream whose receive side had ended, so a
/// terminated peer got bytes the ULP wrote after revoking its access (an independent review).
#[test]
fn rfc5041_8_3_1_a_response_goes_no_further_after_the_peers_terminate() {
    const LEN: u32 = 1 << 20;
    let (mut d, _, _) = Duo::serving_a_read(LEN);
    d.send(S, 16, &peers_terminate(2));
    d.settle();
    let sent: usize = d
        .raw_rx
        .iter()
        .filter(|(s, p, x)| *s == S && *p == 16 && x.get(2).is_some_and(|c| c & 0x80 != 0))
        .map(|(_, _, x)| x.len() - 16)
        .sum();
    assert!(
        sent < LEN as usize / 2,
        "the response stopped at the Terminate: {sent} bytes"
    );
    let Duo { conn, memory, .. } = &mut d;
    assert_eq!(
        conn.as_mut().unwrap().recheck_read_sources(memory.stags()),
        0,
        "nothing left to stop"
    );
}

/// RFC 5040 §4.8, RFC 5041 §7.2: the error a peer's Terminate reports is its Terminate
/// Control's first 4 octets, told to the ULP as they are even when a header its D flag
/// announces is missing (here DDP's Invalid STag, 0x1/0x1/0x00, with D set and nothing
/// after). It was told as RDMAP's "unspecified" (0x0/0x2/0xFF), the peer's own error lost
/// (an independent review). Fewer than 4 octets say nothing, and stay "unspecified".
#[test]
fn rfc5040_4_8_a_short_terminate_still_reports_the_peers_error() {
    let cases: [(&[u8], TerminateError); 2] = [
        (
            &[0x11, 0x00, 0x40, 0x00],
            TerminateError::Ddp(DdpError::InvalidStag),
        ),
        (
            &[0x11, 0x00],
            TerminateError::Rdmap(RdmapError::OperationUnspecified),
        ),
    ];
    for (payload, expected) in cases {
        let mut d = Duo::new(256);
        let pd = d.memory.alloc_pd();
        d.open_rdmap(S, pd);
        d.send(
            S,
            16,
            &rseg(1, control(1, Opcode::Terminate), 2, 1, payload),
        );
        d.settle();
        let told: Vec<TerminateError> = d
            .inds
            .iter()
            .filter_map(|i| match i {
                Indication::RdmapTerminate { error, .. } => Some(*error),
                _ => None,
            })
            .collect();
        assert_eq!(told, [expected], "{payload:02x?}");
    }
}

/// RFC 5040 §5.4: a Terminate is the last message its sender sends on the stream. After the
/// peer's, nothing it sends on the stream is placed, and the ULP's new work is refused; the
/// Terminate is told, and no Terminate answers it. Before, an RDMA Write after the peer's
/// Terminate was placed and posts were taken until the peer's session Terminate came (an
/// independent review).
#[test]
fn rfc5040_5_4_nothing_after_the_peers_terminate_is_placed() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    let (w, wreg) = d.region_with(pd, 4096, 0x1000, Access::REMOTE_WRITE);
    // The peer's Terminate (QN 2, MSN 1), at its next DDP-SSN (1, after its Initiate) ...
    let payload = ddpdk_control::rdmap::terminate_payload(
        RxError::Rdmap(RdmapError::OperationUnspecified),
        &ddpdk_dataplane::ddp::HeaderCopy::from_bytes(&[]),
        0,
        None,
    );
    let term = rseg(1, control(1, Opcode::Terminate), 2, 1, &payload);
    d.send(S, 16, &term);
    // ... then an RDMA Write (DDP-SSN 2) into a region that grants remote write.
    d.send(
        S,
        16,
        &rtseg(
            2,
            control(1, Opcode::Write),
            wreg.stag.0,
            0x1000,
            &[0xaa; 64],
        ),
    );
    d.settle();
    assert!(
        d.inds.iter().any(|i| matches!(
            i,
            Indication::RdmapTerminate {
                error: TerminateError::Rdmap(RdmapError::OperationUnspecified),
                ..
            }
        )),
        "{:?}",
        d.inds
    );
    assert!(
        d.region_bytes(w, 64).iter().all(|&b| b == 0),
        "nothing placed after the Terminate"
    );
    assert!(d.rdmap_terminates(S).is_empty(), "no Terminate answers it");
    let Duo { conn, memory, .. } = &mut d;
    let write = RdmaRequest {
        wr_id: 77,
        stream: S,
        op: RdmaOp::Write {
            stag: Stag(0x0033_4401),
            to: 0,
        },
        data: Payload::Bytes(vec![1; 8]),
        signaled: true,
    };
    assert_eq!(
        conn.as_mut().unwrap().post_rdma(write, memory.stags()),
        Err(PostError::Session(
            ddpdk_control::session::LocalError::Terminated
        ))
    );
}

/// RFC 5040 §5.4: the peer's Terminate is the last message it sends on the stream, and DDP
/// delivers in DDP-SSN order (RFC 5043 §10), so no response to a Read still outstanding can
/// follow it. The Read ends flushed when the Terminate is delivered; it used to wait for the
/// session's end, which a peer that never sends its session Terminate never brings. A Read
/// posted before and waiting for ORD does not leave after it: it ends flushed too, in its
/// place (it used to wait for the session's end, holding everything behind it).
#[test]
fn rfc5040_5_4_outstanding_reads_end_with_the_peers_terminate() {
    let (mut d, _, first) = Duo::read_in_flight();
    let Duo { conn, memory, .. } = &mut d;
    let conn = conn.as_mut().unwrap();
    for wr_id in 10..14 {
        let read = RdmaRequest {
            wr_id,
            stream: S,
            op: RdmaOp::Read {
                source: Stag(0x0011_2201),
                source_to: 0,
                sink: Stag(first.sink_stag),
                sink_to: first.sink_to,
                len: 8,
            },
            data: Payload::Bytes(Vec::new()),
            signaled: true,
        };
        conn.post_rdma(read, memory.stags()).unwrap();
    }
    d.settle();
    let requests = |d: &Duo| {
        d.raw_rx
            .iter()
            .filter(|(s, p, x)| *s == S && *p == 16 && x.len() == 48 && x[8..12] == [0, 0, 0, 1])
            .count()
    };
    // ORD is min(4, the peer's IRD of 4): four Reads out, the fifth waits.
    assert_eq!(requests(&d), 4);
    let payload = ddpdk_control::rdmap::terminate_payload(
        RxError::Rdmap(RdmapError::OperationUnspecified),
        &ddpdk_dataplane::ddp::HeaderCopy::from_bytes(&[]),
        0,
        None,
    );
    d.send(
        S,
        16,
        &rseg(1, control(1, Opcode::Terminate), 2, 1, &payload),
    );
    d.settle();
    assert_eq!(
        d.comps
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect::<Vec<_>>(),
        [
            (9, Status::Flushed),
            (10, Status::Flushed),
            (11, Status::Flushed),
            (12, Status::Flushed),
            (13, Status::Flushed)
        ],
        "the four outstanding Reads and the waiting one end at the Terminate, in posting order"
    );
    assert_eq!(requests(&d), 4, "the waiting Read does not leave");
}

/// RFC 5043 §6 and §10 with RFC 5040 §5.3: the active side's first segments wait for the
/// peer's Accept (SCTP may deliver them first: unordered chunks). On an RDMAP stream the
/// messages the Accept releases are RDMAP's: a Send with Invalidate that arrived before the
/// Accept invalidates its STag when it is delivered. They went to the ULP as plain DDP
/// messages (the STag left valid, a Read Request never served; an independent review).
#[test]
fn rfc5040_5_3_a_send_with_invalidate_ahead_of_the_accept_still_invalidates() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.conn()
        .initiate_rdmap(S, pd, RdmaLimits::default(), b"")
        .unwrap();
    d.settle();
    d.posted_buffer(pd, 11);
    let (_, reg) = d.region_with(pd, 4096, 0, Access::REMOTE_WRITE);
    // Send with Invalidate (RDMAP version 1) on QN 0, MSN 1, naming the region's STag, at
    // DDP-SSN 1 ...
    let mut send = rseg(1, control(1, Opcode::SendInvalidate), 0, 1, b"hello");
    send[4..8].copy_from_slice(&reg.stag.0.to_be_bytes());
    d.send(S, 16, &send);
    // ... then the Accept, at DDP-SSN 0, with RDMAP's parameters.
    let pdata = encode_private_data(RdmaLimits::default(), b"").unwrap();
    d.send(S, 17, &ctl(0, 2, &pdata));
    d.settle();
    let got: Vec<_> = d
        .inds
        .iter()
        .filter_map(|i| match i {
            Indication::Received {
                wr_id, invalidated, ..
            } => Some((*wr_id, *invalidated)),
            _ => None,
        })
        .collect();
    assert_eq!(got, [(11, Some(reg.stag))], "{:?}", d.inds);
}

/// RFC 5043 §6.1, §6.3 with §10: on the active side, a tagged segment that arrives before the
/// peer's answer (SCTP delivers unordered) belongs to a session only if the answer is an
/// Accept. It waits for the answer: after a Reject (a segment there fits no legal pattern)
/// nothing of it is placed; it used to be placed at once and stay placed. After an Accept it
/// is placed as before.
#[test]
fn rfc5043_6_3_a_tagged_segment_ahead_of_a_reject_is_never_placed() {
    // The peer's Terminate (DDP-SSN 2) overtakes its answer too, against §6.6: the session
    // ends, but whether the segment had one is still unknown, so it still waits, and the
    // Reject drops it. (Held by the session's state alone, it was placed when the Terminate
    // came.)
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.conn().initiate(S, pd, b"").unwrap();
    d.settle();
    let (w, wreg) = d.region_with(pd, 4096, 0x1000, Access::REMOTE_WRITE);
    d.send(S, 16, &tseg(1, true, wreg.stag.0, 0x1000, &[0xaa; 64]));
    d.send(S, 17, &ctl(2, 4, b""));
    d.settle();
    d.send(S, 17, &ctl(0, 3, b""));
    d.settle();
    assert!(
        d.region_bytes(w, 64).iter().all(|&b| b == 0),
        "a Terminate ahead of the Reject places nothing"
    );

    for (answer, placed) in [(3u16, false), (2u16, true)] {
        let mut d = Duo::new(256);
        let pd = d.memory.alloc_pd();
        d.conn().initiate(S, pd, b"").unwrap();
        d.settle();
        let (w, wreg) = d.region_with(pd, 4096, 0x1000, Access::REMOTE_WRITE);
        // A tagged segment at DDP-SSN 1 ...
        d.send(S, 16, &tseg(1, true, wreg.stag.0, 0x1000, &[0xaa; 64]));
        d.settle();
        assert!(
            d.region_bytes(w, 64).iter().all(|&b| b == 0),
            "answer {answer}: nothing placed before the answer"
        );
        assert_eq!(d.conn().stats().segments_held_for_answer, 1);
        // ... then the answer at DDP-SSN 0: a Reject (3) or an Accept (2).
        d.send(S, 17, &ctl(0, answer, b""));
        d.settle();
        assert_eq!(
            d.region_bytes(w, 64).iter().all(|&b| b == 0xaa),
            placed,
            "answer {answer}"
        );
        assert_eq!(
            d.region_bytes(w, 64).iter().all(|&b| b == 0),
            !placed,
            "answer {answer}"
        );
    }
}

/// RFC 5043 §10 ("SHOULD NOT allocate resources on the assumption that DDP-SSNs are valid"),
/// §6.2, §6.6: on the active side the peer's segments wait for its answer at DDP-SSN 0, and
/// their copies take receive buffer. A peer that sends segments and never its answer held that
/// room until the stream was flushed, which for a session still awaiting its answer was the
/// end of the association (an independent review, session 52). The answer was sent before its
/// segments, so once SCTP has every chunk up to them and still no answer, a legal peer's is
/// not coming; `ANSWER_GRACE_RTOS` RTOs later the attempt fails (our Terminate), the held segments are dropped and
/// counted, the room is back, and a late Accept places nothing.
#[test]
fn rfc5043_10_segments_held_for_an_answer_that_never_comes_are_given_up() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.conn().initiate(S, pd, b"").unwrap();
    d.settle();
    let room = d.conn().receive_room();
    let (w, wreg) = d.region_with(pd, 65536, 0x1000, Access::REMOTE_WRITE);
    for k in 0..16u16 {
        let to = 0x1000 + u64::from(k) * 1024;
        d.send(S, 16, &tseg(k + 1, true, wreg.stag.0, to, &[0xaa; 1024]));
    }
    while d.round() {}
    assert_eq!(d.conn().stats().segments_held_for_answer, 16);
    assert!(d.conn().receive_room() + 16 * 1024 <= room, "held");
    d.run_for(Duration::from_secs(60));
    assert_eq!(
        d.conn().receive_room(),
        room,
        "the held segments' room is back"
    );
    assert_eq!(
        d.conn().session_state(S),
        Some(State::Terminated(TerminationReason::ProtocolError(
            ProtocolError::NoAnswer
        )))
    );
    assert_eq!(d.conn().stats().initiates_unanswered, 1);
    assert_eq!(d.conn().stats().after_session_end, 16);
    assert!(
        d.raw_rx
            .iter()
            .any(|(s, p, x)| *s == S && *p == 17 && x.get(..4) == Some(&[0, 1, 0, 4][..])),
        "our Terminate"
    );
    // Later segments are not held for it any more, and the answer, if it ever comes, places
    // nothing.
    d.send(S, 16, &tseg(17, true, wreg.stag.0, 0x1000, &[0xaa; 1024]));
    d.send(S, 17, &ctl(0, 2, b""));
    d.settle();
    assert_eq!(d.conn().receive_room(), room);
    assert_eq!(d.conn().stats().segments_held_for_answer, 16);
    assert!(d.region_bytes(w, 65536).iter().all(|&b| b == 0));
}

/// RFC 5043 §10 with RFC 9260 §6.3.3: the bound on holding segments for the peer's answer
/// is not a setup timer a lossy path can trip. The peer's Accept is lost again and again
/// (SCTP retransmits it, backing off), its segments behind it arrive: while SCTP still misses
/// a chunk below them the answer may be that chunk, so the attempt is not given up however
/// long it takes, and once the Accept gets through the held segments are placed.
#[test]
fn rfc5043_10_a_lost_accept_is_waited_for_while_sctp_misses_it() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.conn().initiate(S, pd, b"").unwrap();
    d.settle();
    let (w, wreg) = d.region_with(pd, 65536, 0x1000, Access::REMOTE_WRITE);
    d.lose = Some(b"an accept lost on its way".to_vec());
    d.send(S, 17, &ctl(0, 2, b"an accept lost on its way"));
    while d.round() {}
    for k in 0..4u16 {
        let to = 0x1000 + u64::from(k) * 1024;
        d.send(S, 16, &tseg(k + 1, true, wreg.stag.0, to, &[0xaa; 1024]));
    }
    while d.round() {}
    assert_eq!(d.conn().stats().segments_held_for_answer, 4);
    let grace = d.conn().association().rto() * ddpdk_control::conn::ANSWER_GRACE_RTOS;
    d.run_for(grace * 2);
    assert_eq!(
        d.conn().stats().initiates_unanswered,
        0,
        "given up while SCTP still missed the Accept"
    );
    assert!(d.region_bytes(w, 4096).iter().all(|&b| b == 0), "held");
    d.lose = None;
    d.run_for(Duration::from_secs(60));
    assert_eq!(d.conn().stats().initiates_unanswered, 0);
    assert_eq!(d.conn().session_state(S), Some(State::Established));
    assert!(
        d.region_bytes(w, 4096).iter().all(|&b| b == 0xaa),
        "the held segments placed once the Accept came"
    );
}

/// (Review, session 71) RFC 9260 §6.2 with RFC 5043 §10: the peer's segments behind its lost
/// Accept fill the receive buffer (held until the Accept comes). The Accept, retransmitted,
/// fills the gap: it is the one chunk that releases what is held, so it is never refused
/// for want of room (a chunk filling a gap on a stream that holds its chunks is, since
/// session 71); refused, the association's cumulative TSN stayed stuck for good.
#[test]
fn rfc9260_6_2_a_lost_accept_fills_its_gap_however_full_the_buffer() {
    let mut d = Duo::new(1024);
    let pd = d.memory.alloc_pd();
    d.conn().initiate(S, pd, b"").unwrap();
    d.settle();
    let (n, len) = (800u16, 200usize);
    let (w, wreg) = d.region_with(pd, 256 * 1024, 0x1000, Access::REMOTE_WRITE);
    let private_data = [0x5a; 512];
    d.lose = Some(vec![0x5a; 64]);
    d.send(S, 17, &ctl(0, 2, &private_data));
    while d.round() {}
    for k in 0..n {
        let to = 0x1000 + u64::from(k) * len as u64;
        d.send(S, 16, &tseg(k + 1, true, wreg.stag.0, to, &[0xaa; 200]));
    }
    while d.round() {}
    assert!(
        d.conn().receive_room() < 4 + private_data.len(),
        "the buffer full of held segments: {}",
        d.conn().receive_room()
    );
    d.lose = None;
    d.run_for(Duration::from_secs(120));
    assert_eq!(d.conn().session_state(S), Some(State::Established));
    assert!(
        d.region_bytes(w, usize::from(n) * len)
            .iter()
            .all(|&b| b == 0xaa),
        "every segment placed once the Accept came"
    );
}

/// RFC 5043 §6.6: "A DDP Stream Session Control message MUST NOT be sent if it may be
/// received before a prior DDP Stream Session Control message within the same DDP Stream
/// Session". The passive side's Terminate comes after its answer at DDP-SSN 0 and may leave
/// only once the answer is acknowledged (or answered), so on the active side a Terminate that
/// arrives before the answer fits no legal pattern (§6.1): the session ends with our Terminate,
/// counted in `control_refused`, and nothing more of the peer is placed. It used to be taken
/// as the peer's Terminate. The refused Terminate is still the peer's last chunk: once the
/// answer and the segments before it are in, the stream id may be reused (§6.6).
#[test]
fn rfc5043_6_6_a_terminate_ahead_of_the_answer_is_a_protocol_error() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.conn().initiate(S, pd, b"").unwrap();
    d.settle();
    let (w, wreg) = d.region_with(pd, 4096, 0x1000, Access::REMOTE_WRITE);
    // A tagged segment at DDP-SSN 1 may overtake the answer (§10); the Terminate at 2 may not.
    d.send(S, 16, &tseg(1, true, wreg.stag.0, 0x1000, &[0xaa; 64]));
    d.send(S, 17, &ctl(2, 4, b""));
    d.settle();
    assert_eq!(
        d.conn().session_state(S),
        Some(State::Terminated(TerminationReason::ProtocolError(
            ProtocolError::TerminateBeforeAnswer
        )))
    );
    assert_eq!(d.conn().stats().control_refused, 1);
    assert!(
        !d.events(S).contains(&Event::TerminateReceived),
        "{:?}",
        d.events(S)
    );
    // Ours, at DDP-SSN 1 (the Initiate was 0), function code 4.
    assert!(
        d.raw_rx
            .iter()
            .any(|(s, p, x)| *s == S && *p == 17 && x.get(..4) == Some(&[0, 1, 0, 4][..])),
        "our Terminate"
    );
    // The Accept comes after all: the session is over, its segment is not placed, and the ULP,
    // told the session ended, is not told it was accepted after that.
    d.send(S, 17, &ctl(0, 2, b""));
    d.settle();
    assert!(
        d.region_bytes(w, 64).iter().all(|&b| b == 0),
        "nothing of a session ended by a protocol error is placed"
    );
    let events = d.events(S);
    let ended = events
        .iter()
        .position(|e| matches!(e, Event::SessionTerminated { .. }));
    assert!(
        ended.is_some_and(|i| !events[i..]
            .iter()
            .any(|e| matches!(e, Event::Accepted { .. }))),
        "no Accepted after SessionTerminated: {events:?}"
    );
    d.conn().initiate(S, pd, b"again").unwrap();
}

/// The legal counterpart of `rfc5043_6_6_a_terminate_ahead_of_the_answer_is_a_protocol_error`:
/// on the active side the peer's segments may arrive before its Accept, and its Terminate
/// before its last segments (RFC 5043 §6.1, §10: the order is the DDP-SSN's), as long as the
/// Terminate comes after the Accept (§6.6). Each segment is placed; the session ends by the
/// peer's Terminate.
#[test]
fn rfc5043_6_6_a_terminate_behind_the_answer_may_still_overtake_segments() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.conn().initiate(S, pd, b"").unwrap();
    d.settle();
    let (w, wreg) = d.region_with(pd, 4096, 0x1000, Access::REMOTE_WRITE);
    d.send(S, 16, &tseg(1, true, wreg.stag.0, 0x1000, &[0xaa; 64]));
    d.send(S, 17, &ctl(0, 2, b""));
    d.send(S, 17, &ctl(3, 4, b""));
    d.send(S, 16, &tseg(2, true, wreg.stag.0, 0x1040, &[0xbb; 64]));
    d.settle();
    assert_eq!(
        d.conn().session_state(S),
        Some(State::Terminated(TerminationReason::PeerTerminate))
    );
    assert_eq!(d.conn().stats().control_refused, 0);
    let bytes = d.region_bytes(w, 128);
    assert!(bytes[..64].iter().all(|&b| b == 0xaa), "segment 1 placed");
    assert!(bytes[64..].iter().all(|&b| b == 0xbb), "segment 2 placed");
}

/// RFC 5040 §5.2: a Read Response when no Read is outstanding is "Unexpected OpCode", even
/// into an STag the server owns and could write: nothing of it is placed.
#[test]
fn rfc5040_5_2_a_read_response_without_a_read_is_unexpected_opcode() {
    assert_terminated(
        "Read Response, no Read",
        Duo::provoke(|stag| {
            rtseg(
                1,
                control(1, Opcode::ReadResponse),
                stag.0,
                0x1000,
                &[0xaa; 64],
            )
        }),
        TerminateError::Rdmap(RdmapError::UnexpectedOpcode),
    );
}

/// RFC 5040 §5.5: the ULP's work on an RDMAP stream is reported in posting order, so a Read
/// the peer never answers holds every later completion. Writes posted behind it leave and are
/// acknowledged, but wait to be reported; they used to be taken without end (an independent
/// review). Now posting says Full once as many wait as the connection queues sends
/// (`ConnConfig::max_sends`), and nothing is reported ahead of the Read.
#[test]
fn rfc5040_5_5_work_held_behind_an_unanswered_read_is_bounded() {
    // Read wr 9 outstanding, never answered.
    let (mut d, _, _) = Duo::read_in_flight();
    let post = |d: &mut Duo, wr_id: u64, op: RdmaOp| {
        let Duo { conn, memory, .. } = d;
        conn.as_mut().unwrap().post_rdma(
            RdmaRequest {
                wr_id,
                stream: S,
                op,
                data: Payload::Bytes(vec![7; 8]),
                signaled: true,
            },
            memory.stags(),
        )
    };
    let max = ConnConfig::default().max_sends;
    let mut taken = 0;
    let mut full = false;
    for k in 0..2 * max {
        let write = RdmaOp::Write {
            stag: Stag(0x0033_4401),
            to: 0,
        };
        match post(&mut d, 100 + k as u64, write) {
            Ok(()) => taken += 1,
            Err(PostError::Full) => {
                full = true;
                break;
            }
            Err(e) => panic!("write {k}: {e:?}"),
        }
        // The writes leave and the raw peer acknowledges them, so the connection's queue of
        // sends drains: only the completion order holds them.
        if k % 256 == 255 {
            d.settle();
        }
    }
    assert!(
        full,
        "{taken} writes taken behind the unanswered Read, no Full"
    );
    assert_eq!(
        taken,
        max - 1,
        "the Read and the writes: max_sends waiting in all"
    );
    assert!(d.comps.is_empty(), "nothing reported ahead of the Read");
}

/// RFC 5040 §5.2: a Read completes when its response has carried the RDMA Read Message Size
/// into its Data Sink. A response that ends (its L segment) with fewer bytes placed, none or
/// only its last 10 of 1000, used to complete the Read as Success, the sink's other bytes left
/// as they were and taken by the ULP for the Data Source's (an independent review). Now the
/// stream ends with the unspecified Remote Operation Error (RFC 5040 §4.8 names no code for
/// it) and the Read ends flushed.
#[test]
fn rfc5040_5_2_a_read_response_short_of_the_read_is_refused() {
    type Make = fn(&ReadRequest) -> Vec<Vec<u8>>;
    let cases: [(&str, Make, usize); 3] = [
        (
            "empty",
            |r| vec![rrseg(1, true, r.sink_stag, r.sink_to, 0)],
            0,
        ),
        (
            "its last 10 bytes only",
            |r| {
                let to = r.sink_to + u64::from(r.size) - 10;
                vec![rrseg(1, true, r.sink_stag, to, 10)]
            },
            10,
        ),
        (
            "1000 bytes in segments that overlap, [0, 600) and [400, 800)",
            |r| {
                vec![
                    rrseg(1, false, r.sink_stag, r.sink_to, 600),
                    rrseg(2, true, r.sink_stag, r.sink_to + 400, 400),
                ]
            },
            800,
        ),
    ];
    for (case, make, placed) in cases {
        let (mut d, sink, request) = Duo::read_in_flight();
        for segment in make(&request) {
            d.send(S, 16, &segment);
        }
        d.settle();
        assert_eq!(
            d.rdmap_terminates(S),
            [TerminateError::Rdmap(RdmapError::OperationUnspecified)],
            "{case}"
        );
        assert_eq!(
            d.region_bytes(sink, 4096)
                .iter()
                .filter(|&&b| b != 0)
                .count(),
            placed,
            "{case}: only what the response carried was placed"
        );
        assert_eq!(
            d.comps
                .iter()
                .map(|c| (c.wr_id, c.status))
                .collect::<Vec<_>>(),
            [(9, Status::Flushed)],
            "{case}: the Read ends flushed, not Success"
        );
        assert_eq!(d.conn().stats().reads_short, 1, "{case}: counted apart");
    }
}

/// RFC 5040 §4.8 with RFC 5041 §7.2: our ULP deregisters a Read's Data Sink while the Read is
/// outstanding, and the peer's valid Read Response (exactly where the Read asked) then finds
/// no registration. The fault is ours: the Terminate says RDMAP's Local Catastrophic error
/// (layer RDMAP, type 0x0), nothing is placed, and the Read completes `LocalProtection`, not
/// `Flushed`. It used to be DDP's Invalid STag (0x2/0x00), blaming the peer, and the Read was
/// flushed.
#[test]
fn rfc5040_4_8_a_read_response_into_a_sink_we_revoked_is_our_local_error() {
    let (mut d, sink, request) = Duo::read_in_flight();
    d.memory.deregister(Stag(request.sink_stag)).unwrap();
    d.send(
        S,
        16,
        &rrseg(1, true, request.sink_stag, request.sink_to, 1000),
    );
    d.settle();
    assert_eq!(
        d.rdmap_terminates(S),
        [TerminateError::Rdmap(RdmapError::LocalCatastrophic)]
    );
    let errors: Vec<_> = d
        .inds
        .iter()
        .filter_map(|i| match i {
            Indication::Error { error, .. } => Some(*error),
            _ => None,
        })
        .collect();
    assert_eq!(
        errors,
        [RxError::SinkRevoked {
            stag: request.sink_stag,
            to: request.sink_to
        }]
    );
    assert!(
        d.region_bytes(sink, 4096).iter().all(|&b| b == 0),
        "nothing placed"
    );
    assert_eq!(
        d.comps
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect::<Vec<_>>(),
        [(9, Status::LocalProtection)],
        "the Read fails of our fault, not flushed"
    );
}

/// RFC 5040 §5.3 with §4.8 and RFC 5041 §7.2: a peer that invalidates our Read's Data Sink
/// STag with a Send with Invalidate, then answers the Read in a later packet, after the STag
/// has left the tables, is told Invalid STag (0x1/0x00): the error is the peer's, as it is when
/// both come in one packet. It was reported as our own Local Catastrophic, as for a sink our
/// ULP deregistered, and the Read completed LocalProtection.
#[test]
fn rfc5040_5_3_a_read_response_into_a_sink_the_peer_invalidated_is_its_invalid_stag() {
    let (mut d, pd, sink, request) = Duo::read_in_flight_in_pd();
    let _ = d.posted_buffer(pd, 40);
    let mut invalidate = rseg(1, control(1, Opcode::SendInvalidate), 0, 1, b"inval");
    invalidate[4..8].copy_from_slice(&request.sink_stag.to_be_bytes());
    d.send(S, 16, &invalidate);
    d.settle();
    // The owner of the tables takes the invalidation (as a data core does before its next
    // packet): the STag is gone from the table the next packet is checked against.
    let invalidated = d.conn().take_peer_invalidated();
    assert_eq!(invalidated, [Stag(request.sink_stag)]);
    d.memory.deregister(Stag(request.sink_stag)).unwrap();
    d.send(
        S,
        16,
        &rrseg(2, true, request.sink_stag, request.sink_to, 1000),
    );
    d.settle();
    assert_eq!(
        d.rdmap_terminates(S),
        [TerminateError::Ddp(DdpError::InvalidStag)]
    );
    assert!(
        d.region_bytes(sink, 4096).iter().all(|&b| b == 0),
        "nothing placed"
    );
    let read = d.statuses(9);
    assert_eq!(
        read,
        [Status::Flushed],
        "the Read ends with the stream, not of our fault"
    );
}

impl Duo {
    /// Sends the raw peer's Send with Invalidate of `stag` (DDP-SSN 1, QN 0, MSN 1) and
    /// `after` (DDP-SSN 2) in one SCTP packet, and lets the server handle it: the
    /// invalidation is in no table yet, only in the packet's record.
    fn invalidate_then_in_one_packet(&mut self, stag: Stag, after: &[u8]) {
        let mut invalidate = rseg(1, control(1, Opcode::SendInvalidate), 0, 1, b"inval");
        invalidate[4..8].copy_from_slice(&stag.0.to_be_bytes());
        self.send(S, 16, &invalidate);
        self.send(S, 16, after);
        assert_eq!(self.raw_to_server(), 1, "one packet");
        self.settle();
    }
}

/// RFC 5040 §5.3 with RFC 5041 §7.1: a tagged segment naming an STag the peer invalidated
/// earlier in the same SCTP packet meets RDMAP's checks first (version, opcode) and DDP's
/// Invalid STag after them, as it does when the invalidation came in an earlier packet; the
/// Terminate's error used to depend on SCTP's bundling (Invalid STag before any RDMAP check:
/// an independent review). Nothing is placed either way.
#[test]
fn rfc5040_5_3_an_stag_invalidated_earlier_in_the_packet_fails_after_rdmaps_checks() {
    let cases = [
        (
            control(0, Opcode::Write),
            TerminateError::Rdmap(RdmapError::InvalidVersion),
        ),
        (
            control(1, Opcode::Send),
            TerminateError::Rdmap(RdmapError::UnexpectedOpcode),
        ),
        (
            control(1, Opcode::Write),
            TerminateError::Ddp(DdpError::InvalidStag),
        ),
    ];
    for (rdmap, expected) in cases {
        let mut d = Duo::new(256);
        let pd = d.memory.alloc_pd();
        d.open_rdmap(S, pd);
        let _ = d.posted_buffer(pd, 40);
        let (region, reg) = d.region_with(pd, 4096, 0x4000, Access::REMOTE_WRITE);
        d.invalidate_then_in_one_packet(reg.stag, &rtseg(2, rdmap, reg.stag.0, 0x4000, b"late"));
        assert_eq!(d.rdmap_terminates(S), [expected], "control {rdmap:#04x}");
        assert!(
            d.region_bytes(region, 4096).iter().all(|&b| b == 0),
            "nothing placed"
        );
    }
}

/// RFC 5040 §5.3: a Read Response into a sink the peer invalidated earlier in the same
/// packet is the peer's Invalid STag and the Read is flushed with the stream, as when the
/// invalidation came in an earlier packet
/// (`rfc5040_5_3_a_read_response_into_a_sink_the_peer_invalidated_is_its_invalid_stag`).
#[test]
fn rfc5040_5_3_a_read_response_behind_its_sinks_invalidation_in_one_packet_is_invalid_stag() {
    let (mut d, pd, sink, request) = Duo::read_in_flight_in_pd();
    let _ = d.posted_buffer(pd, 40);
    let response = rrseg(2, true, request.sink_stag, request.sink_to, 1000);
    d.invalidate_then_in_one_packet(Stag(request.sink_stag), &response);
    assert_eq!(
        d.rdmap_terminates(S),
        [TerminateError::Ddp(DdpError::InvalidStag)]
    );
    assert!(
        d.region_bytes(sink, 4096).iter().all(|&b| b == 0),
        "nothing placed"
    );
    let read = d.statuses(9);
    assert_eq!(read, [Status::Flushed], "the peer's error, not ours");
}

/// RFC 5043 §11.3 ("Other RDMAP-defined Terminate Messages MUST be generated as specified
/// when a DDP stream is terminated") with RFC 5040 §7: the RDMAP Terminate of a stream's
/// first error is not ULP work, and the connection's limit on queued sends (`max_sends`,
/// here 1, taken by a Write on another stream waiting for its Accept) does not refuse it. It
/// was refused, and only the session's Terminate told the peer, without its error (an
/// independent review).
#[test]
fn rfc5043_11_3_the_rdmap_terminate_is_sent_whatever_the_other_streams_queued() {
    const S2: u16 = 2;
    let conn = ConnConfig {
        max_sends: 1,
        ..ConnConfig::default()
    };
    let mut d = Duo::with_conn_config(sctp(RAW_PORT, 256), sctp(SRV_PORT, 256), conn);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    d.conn()
        .initiate_rdmap(S2, pd, RdmaLimits::default(), b"")
        .unwrap();
    let write = RdmaRequest {
        wr_id: 1,
        stream: S2,
        op: RdmaOp::Write {
            stag: Stag(PEER_STAG),
            to: 0,
        },
        data: Payload::Bytes(b"waits for the Accept".to_vec()),
        signaled: true,
    };
    let Duo { conn, memory, .. } = &mut d;
    conn.as_mut()
        .unwrap()
        .post_rdma(write, memory.stags())
        .unwrap();
    d.settle();
    // An RDMA Write through an STag the server never registered.
    d.send(
        S,
        16,
        &rtseg(1, control(1, Opcode::Write), 0xdead_be01, 0, b"x"),
    );
    d.settle();
    assert_eq!(
        d.rdmap_terminates(S),
        [TerminateError::Ddp(DdpError::InvalidStag)]
    );
    assert_eq!(d.conn().stats().rdmap_terminates_sent, 1);
}

impl Duo {
    /// The DDP-SSNs of the server's RDMAP Terminate (PPID 16, QN 2) and of its session
    /// Terminate (PPID 17) on `stream`, as the raw peer received them.
    fn terminate_ssns(&self, stream: u16) -> (Vec<u16>, Vec<u16>) {
        let ssn = |d: &[u8]| u16::from_be_bytes([d[0], d[1]]);
        let rdmap = self
            .raw_rx
            .iter()
            .filter(|(s, p, d)| {
                *s == stream
                    && *p == 16
                    && d.len() > 20
                    && d[2] & 0x80 == 0
                    && d[8..12] == QN_TERMINATE.to_be_bytes()
            })
            .map(|(_, _, d)| ssn(d))
            .collect();
        let session = self
            .raw_rx
            .iter()
            .filter(|(s, p, d)| *s == stream && *p == 17 && d[2..4] == [0, 4])
            .map(|(_, _, d)| ssn(d))
            .collect();
        (rdmap, session)
    }
}

/// RFC 5043 §11.3 ("Other RDMAP-defined Terminate Messages MUST be generated as specified
/// when a DDP stream is terminated") with §6.2 (the session Terminate "would follow any RDMAP
/// Terminate message"): a chunk the session layer refuses on an RDMAP stream (a DDP-SSN no
/// gap accounts for, §10; a duplicate) ends the stream with RDMAP's Terminate, the stream's
/// catastrophic error (RFC 5040 §4.8, 0x2/0x07), then the session's Terminate at the next
/// DDP-SSN. Only the session Terminate went (an independent review).
#[test]
fn rfc5043_11_3_a_chunk_the_session_refuses_draws_rdmaps_terminate_first() {
    let zero_write = || rtseg(1, control(1, Opcode::Write), 0, 0, b"");
    let cases: [(&str, Vec<Vec<u8>>); 2] = [
        (
            "out of the window",
            vec![rtseg(40_000, control(1, Opcode::Write), 0, 0, b"")],
        ),
        ("a duplicate", vec![zero_write(), zero_write()]),
    ];
    for (what, chunks) in cases {
        let mut d = Duo::new(256);
        let pd = d.memory.alloc_pd();
        d.open_rdmap(S, pd);
        for c in &chunks {
            d.send(S, 16, c);
            d.settle();
        }
        assert_eq!(
            d.rdmap_terminates(S),
            [TerminateError::Rdmap(RdmapError::CatastrophicStream)],
            "{what}"
        );
        let (rdmap, session) = d.terminate_ssns(S);
        assert_eq!(session.len(), 1, "{what}: the session's Terminate too");
        assert_eq!(session[0], rdmap[0] + 1, "{what}: right behind RDMAP's");
    }
}

/// RFC 5040 §7 (the first error is the stream's) with RFC 5043 §6.2: while the RDMAP Terminate
/// of a stream's first error waits for room in SCTP's queue (a Read Response fills it), more
/// chunks the session refuses (a duplicate of the faulty segment, each in its own packet)
/// neither queue another Terminate nor let the session's go ahead of it: one RDMAP Terminate,
/// the first error's, then ours. (A review of this session's change: the second refusal
/// released the session's Terminate, which then went alone, RDMAP's flushed; with the machine's
/// own first error, each refusal queued one more, `queued_sends` growing without bound.)
#[test]
fn rfc5040_7_later_refusals_behind_a_waiting_terminate_change_nothing() {
    let (mut d, _, _) = Duo::serving_a_read(1 << 20);
    let faulty = rtseg(2, control(1, Opcode::Write), 0xdead_be01, 0, b"x");
    for _ in 0..3 {
        d.send(S, 16, &faulty);
        d.raw_to_server();
    }
    d.settle();
    d.run_for(Duration::from_secs(5));
    assert_eq!(
        d.rdmap_terminates(S),
        [TerminateError::Ddp(DdpError::InvalidStag)]
    );
    let (rdmap, session) = d.terminate_ssns(S);
    assert_eq!(session.len(), 1, "the session's Terminate too");
    assert_eq!(session[0], rdmap[0] + 1, "right behind RDMAP's");
}

/// RFC 5040 §5.4 ("a Terminate answers no Terminate") after RFC 5043 §11.3's: the peer's RDMAP
/// Terminate, then a chunk of its the session refuses (its session Terminate with Private
/// Data, §5.2.3): our session Terminate ends the stream, and no RDMAP Terminate of ours
/// answers the peer's. (A last review of this session's change: one did.)
#[test]
fn rfc5040_5_4_no_rdmap_terminate_answers_the_peers() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    let payload = ddpdk_control::rdmap::terminate_payload(
        RxError::Rdmap(RdmapError::OperationUnspecified),
        &ddpdk_dataplane::ddp::HeaderCopy::from_bytes(&[]),
        0,
        None,
    );
    d.send(
        S,
        16,
        &rseg(1, control(1, Opcode::Terminate), 2, 1, &payload),
    );
    d.settle();
    d.send(S, 17, &ctl(2, 4, b"x"));
    d.settle();
    assert!(d.rdmap_terminates(S).is_empty(), "{:?}", d.raw_rx);
    let (_, session) = d.terminate_ssns(S);
    assert_eq!(session.len(), 1, "our session Terminate ends the stream");
}

/// RFC 5043 §6.2 with RFC 5040 §4.8: a faulty segment and, behind it in the same packet, the
/// peer's session Terminate. The session ends before the RDMAP Terminate that reports the
/// fault is queued; it still goes, and our session Terminate follows it. The session's end
/// refused it, and the peer never learnt its error (an independent review).
#[test]
fn rfc5043_6_2_rdmaps_terminate_goes_before_our_answer_to_the_peers_terminate() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    d.send(
        S,
        16,
        &rtseg(1, control(1, Opcode::Write), 0xdead_be01, 0, b"x"),
    );
    d.send(S, 17, &ctl(2, 4, b""));
    assert_eq!(d.raw_to_server(), 1, "one packet");
    d.settle();
    assert_eq!(
        d.rdmap_terminates(S),
        [TerminateError::Ddp(DdpError::InvalidStag)]
    );
    let (rdmap, session) = d.terminate_ssns(S);
    assert_eq!(session.len(), 1, "our session Terminate answers the peer's");
    assert_eq!(session[0], rdmap[0] + 1, "right behind RDMAP's");
}

/// RFC 5040 §5.3 for a Read still waiting for ORD: the peer invalidates its Data Sink, the
/// Read goes out when a slot frees, and the peer's response into the dead sink is the peer's
/// Invalid STag, the Read flushed with the stream, as for a Read already outstanding. It was
/// reported as our own revocation (`LocalProtection`, a Local Catastrophic Terminate of
/// ours): only the Reads already sent were noted (an independent review).
#[test]
fn rfc5040_5_3_a_waiting_reads_sink_the_peer_invalidated_is_its_invalid_stag() {
    let (mut d, pd, _, first) = Duo::read_in_flight_in_pd();
    let _ = d.posted_buffer(pd, 40);
    let (_, second) = d.region_with(pd, 4096, 0x8000, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    let read = |wr_id: u64, sink: Stag, sink_to: u64| RdmaRequest {
        wr_id,
        stream: S,
        op: RdmaOp::Read {
            source: Stag(0x0011_2201),
            source_to: 0,
            sink,
            sink_to,
            len: 8,
        },
        data: Payload::Bytes(vec![]),
        signaled: true,
    };
    let Duo { conn, memory, .. } = &mut d;
    let conn = conn.as_mut().unwrap();
    // Reads 10-12 fill ORD (4) beside Read 9; Read 13, into the second sink, waits.
    for wr_id in 10..13 {
        let to = 0x2600 + 0x100 * (wr_id - 10);
        conn.post_rdma(read(wr_id, Stag(first.sink_stag), to), memory.stags())
            .unwrap();
    }
    conn.post_rdma(read(13, second.stag, 0x8000), memory.stags())
        .unwrap();
    d.settle();
    let mut invalidate = rseg(1, control(1, Opcode::SendInvalidate), 0, 1, b"inval");
    invalidate[4..8].copy_from_slice(&second.stag.0.to_be_bytes());
    d.send(S, 16, &invalidate);
    d.settle();
    assert_eq!(d.conn().take_peer_invalidated(), [second.stag]);
    d.memory.deregister(second.stag).unwrap();
    // Reads 9-12 answered whole: Read 13's Request leaves.
    d.send(S, 16, &rrseg(2, true, first.sink_stag, first.sink_to, 1000));
    for (k, ssn) in (3..6u16).enumerate() {
        let to = 0x2600 + 0x100 * k as u64;
        d.send(S, 16, &rrseg(ssn, true, first.sink_stag, to, 8));
    }
    d.settle();
    d.send(S, 16, &rrseg(6, true, second.stag.0, 0x8000, 8));
    d.settle();
    assert_eq!(
        d.rdmap_terminates(S),
        [TerminateError::Ddp(DdpError::InvalidStag)]
    );
    let thirteen = d.statuses(13);
    assert_eq!(thirteen, [Status::Flushed], "the peer's error, not ours");
}

/// RFC 5040 §5.2: a zero-length Read inside another Read's sink range overlaps nothing. It
/// marked both as sharing a sink, which switches off the whole-response check, and an empty
/// response then completed the other Read Success with its sink unwritten (an independent
/// review).
#[test]
fn rfc5040_5_2_a_zero_length_read_shares_no_sink() {
    let (mut d, _, first) = Duo::read_in_flight();
    let Duo { conn, memory, .. } = &mut d;
    let fence = RdmaRequest {
        wr_id: 10,
        stream: S,
        op: RdmaOp::Read {
            source: Stag(0x0011_2201),
            source_to: 0,
            sink: Stag(first.sink_stag),
            sink_to: first.sink_to + 0x100,
            len: 0,
        },
        data: Payload::Bytes(vec![]),
        signaled: true,
    };
    conn.as_mut()
        .unwrap()
        .post_rdma(fence, memory.stags())
        .unwrap();
    d.settle();
    // Read 9's response, empty: short of its 1000 bytes.
    d.send(S, 16, &rrseg(1, true, first.sink_stag, first.sink_to, 0));
    d.settle();
    assert_eq!(
        d.rdmap_terminates(S),
        [TerminateError::Rdmap(RdmapError::OperationUnspecified)]
    );
    assert_eq!(d.completed(), [(9, Status::Flushed), (10, Status::Flushed)]);
}

/// RFC 5041 §5.2: "The STag and TO fields MUST NOT be checked for a zero-length Tagged DDP
/// Message". A 0-byte Read names a sink STag the responder need not echo: its empty Read
/// Response with STag 0 (and any TO) answers the oldest outstanding Read (RFC 5040 §5.2), which
/// completes Success, with no Terminate. Compared, the STag made it Unexpected OpCode
/// (0x2/0x06) and the Read ended Flushed.
#[test]
fn rfc5041_5_2_a_zero_length_read_response_is_not_checked_for_its_stag() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    let read = RdmaRequest {
        wr_id: 9,
        stream: S,
        op: RdmaOp::Read {
            source: Stag(0x0011_2201),
            source_to: 0,
            sink: Stag(0xdead_beef),
            sink_to: 0x2100,
            len: 0,
        },
        data: Payload::Bytes(Vec::new()),
        signaled: true,
    };
    let Duo { conn, memory, .. } = &mut d;
    conn.as_mut()
        .unwrap()
        .post_rdma(read, memory.stags())
        .unwrap();
    d.settle();
    let request = d
        .raw_rx
        .iter()
        .find(|(s, p, x)| *s == S && *p == 16 && x.len() == 48 && x[8..12] == [0, 0, 0, 1])
        .map(|(_, _, x)| ReadRequest::parse(&x[20..]).unwrap())
        .expect("the Read Request");
    assert_eq!((request.sink_stag, request.size), (0xdead_beef, 0));
    d.send(S, 16, &rrseg(1, true, 0, 0x7777, 0));
    d.settle();
    assert_eq!(d.rdmap_terminates(S), []);
    assert_eq!(
        d.comps
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect::<Vec<_>>(),
        [(9, Status::Success)]
    );
}

/// RFC 5040 §5.2 with RFC 5043 §10: a response that tiles its sink completes its Read in
/// whatever order SCTP delivers its segments (unordered). Each Read now keeps the ranges its
/// response placed, not a sum, so that segments that overlap and leave a gap do not complete
/// it (`rfc5040_5_2_a_read_response_short_of_the_read_is_refused`).
#[test]
fn rfc5040_5_2_a_tiled_read_response_completes_in_any_order() {
    let (mut d, _, r) = Duo::read_in_flight();
    d.send(S, 16, &rrseg(3, true, r.sink_stag, r.sink_to + 700, 300));
    d.send(S, 16, &rrseg(1, false, r.sink_stag, r.sink_to, 400));
    d.send(S, 16, &rrseg(2, false, r.sink_stag, r.sink_to + 400, 300));
    d.settle();
    assert_eq!(d.rdmap_terminates(S), []);
    assert_eq!(
        d.comps
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect::<Vec<_>>(),
        [(9, Status::Success)]
    );
}

/// Two Reads into the same bytes of one sink, their responses' segments interleaved as SCTP
/// may deliver them after a loss (the first response's first half, the second response, then
/// the first's second half): a segment there cannot be told to be the one Read's or the
/// other's, so neither is held to its byte count (`OutboundRead::shared_sink`) and both
/// complete, in order. Counted by range alone, the first Read took 2000 bytes of 1000 and
/// the stream ended.
#[test]
fn rfc5040_5_2_reads_into_one_sink_complete_whatever_order_their_segments_come_in() {
    let (mut d, _, first) = Duo::read_in_flight();
    let read = RdmaRequest {
        wr_id: 10,
        stream: S,
        op: RdmaOp::Read {
            source: Stag(0x0011_2201),
            source_to: 0,
            sink: Stag(first.sink_stag),
            sink_to: first.sink_to,
            len: first.size,
        },
        data: Payload::Bytes(Vec::new()),
        signaled: true,
    };
    let Duo { conn, memory, .. } = &mut d;
    conn.as_mut()
        .unwrap()
        .post_rdma(read, memory.stags())
        .unwrap();
    d.settle();
    let part =
        |ssn: u16, last: bool, to: u64, len: usize| rrseg(ssn, last, first.sink_stag, to, len);
    let to = first.sink_to;
    d.send(S, 16, &part(1, false, to, 500));
    d.send(S, 16, &part(3, true, to, 1000));
    d.send(S, 16, &part(2, true, to + 500, 500));
    d.settle();
    assert_eq!(d.rdmap_terminates(S), []);
    assert_eq!(
        d.comps
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect::<Vec<_>>(),
        [(9, Status::Success), (10, Status::Success)]
    );
    assert_eq!(d.conn().stats().reads_short, 0);
}

/// RFC 5040 §5.2 with RFC 5041 §7.1: a Read Response may only land in the Data Sink of the
/// outstanding Read: past its end it is DDP "Base or bounds violation", into another STag
/// DDP "Invalid STag" (tagged buffer errors, §4.8), and the server's Read ends flushed with
/// not one byte placed in the sink.
#[test]
fn rfc5040_5_2_a_read_response_outside_the_sink_is_refused() {
    type Make = fn(&ReadRequest) -> Vec<u8>;
    let cases: [(&str, Make, DdpError); 3] = [
        (
            "past the sink's end",
            |r| {
                let to = r.sink_to + u64::from(r.size) - 10;
                rtseg(
                    1,
                    control(1, Opcode::ReadResponse),
                    r.sink_stag,
                    to,
                    &[0xaa; 64],
                )
            },
            DdpError::BaseOrBounds,
        ),
        (
            "before the sink",
            |r| {
                let to = r.sink_to - 1;
                rtseg(
                    1,
                    control(1, Opcode::ReadResponse),
                    r.sink_stag,
                    to,
                    &[0xaa; 64],
                )
            },
            DdpError::BaseOrBounds,
        ),
        (
            "into another STag",
            |r| {
                let stag = r.sink_stag ^ 0x0100;
                rtseg(
                    1,
                    control(1, Opcode::ReadResponse),
                    stag,
                    r.sink_to,
                    &[0xaa; 64],
                )
            },
            DdpError::InvalidStag,
        ),
    ];
    for (case, make, want) in cases {
        let (mut d, sink, request) = Duo::read_in_flight();
        d.send(S, 16, &make(&request));
        d.settle();
        assert_eq!(d.rdmap_terminates(S), [TerminateError::Ddp(want)], "{case}");
        assert!(
            d.region_bytes(sink, 4096).iter().all(|&b| b == 0),
            "{case}: nothing placed"
        );
        assert_eq!(
            d.comps
                .iter()
                .map(|c| (c.wr_id, c.status))
                .collect::<Vec<_>>(),
            [(9, Status::Flushed)],
            "{case}: the Read ends flushed"
        );
    }
}

// ------------------------------------------------------------------------------------------
// A zero-copy send's completion gives the ULP its buffer back (RFC 4296 §3.2; RFC 5041 §5.4):
// when its stream ends before the send is acknowledged, the Flushed completion waits until
// SCTP can no longer transmit or retransmit its segments, which read the buffer. It came at
// the stream's end, and what the ULP then wrote into its buffer reached the peer (an
// independent review: 252 720 bytes of a 1 MiB Write).
// ------------------------------------------------------------------------------------------

/// The raw peer's STag the server's Writes name (the raw peer checks nothing).
const PEER_STAG: u32 = 0x99;

impl Duo {
    /// An RDMAP stream on `S` whose server posted, with the raw peer deaf to it (nothing
    /// acknowledged): a zero-copy Write of `len` bytes of 0x11 (wr_id 1, one registration read
    /// as its segments leave), a Read (2) and a Write of copied bytes (3). Then the raw peer
    /// writes through an STag the server never registered: the server's stream fails (RFC 5040
    /// §7: its Terminate) and its work is flushed, on `d` (a fresh `Duo`). Returns the Write's
    /// source region.
    fn zero_copy_write_then_failure(
        mut d: Duo,
        len: u32,
    ) -> (Duo, ddpdk_control::memory::RegionId) {
        let pd = d.memory.alloc_pd();
        d.open_rdmap(S, pd);
        let table = d.memory.region_table().clone();
        d.conn().use_regions(table);
        let (src, src_reg) = d.region_with(pd, u64::from(len), 0x1000, Access::LOCAL_WRITE);
        d.memory
            .region(src)
            .unwrap()
            .place(0, &vec![0x11; len as usize])
            .unwrap();
        let (_, sink) = d.region_with(pd, 4096, 0x10_0000, Access::LOCAL_WRITE);
        d.deaf = true;
        let write = RdmaOp::Write {
            stag: Stag(PEER_STAG),
            to: 0,
        };
        let zero_copy = Payload::Local {
            stag: src_reg.stag,
            to: 0x1000,
            len,
        };
        let read = RdmaOp::Read {
            source: Stag(0x77),
            source_to: 0,
            sink: sink.stag,
            sink_to: 0x10_0000,
            len: 1000,
        };
        let copied = Payload::Bytes(vec![0x22; 100]);
        for (wr_id, op, data) in [
            (1, write, zero_copy),
            (2, read, Payload::Bytes(Vec::new())),
            (3, write, copied),
        ] {
            let req = RdmaRequest {
                wr_id,
                stream: S,
                op,
                data,
                signaled: true,
            };
            let Duo { conn, memory, .. } = &mut d;
            conn.as_mut()
                .unwrap()
                .post_rdma(req, memory.stags())
                .unwrap();
        }
        d.settle();
        d.send(
            S,
            16,
            &rtseg(1, control(1, Opcode::Write), 0xdead01, 0, &[5; 64]),
        );
        d.run_for(Duration::from_millis(500));
        assert!(
            d.inds
                .iter()
                .any(|i| matches!(i, Indication::Error { stream: S, .. })),
            "the stream failed"
        );
        // Its session ends once the Terminate is with SCTP: at once if SCTP's queue has room
        // (then the failure flushed the stream's work), else when the peer hears again.
        if len <= 1 << 16 {
            assert!(matches!(
                d.conn().session_state(S),
                Some(State::Terminated(_))
            ));
        }
        (d, src)
    }

    /// Whether a tagged segment the raw peer received for [`PEER_STAG`] carried `byte`.
    fn peer_got(&self, byte: u8) -> bool {
        self.raw_rx.iter().any(|(s, p, x)| {
            *s == S
                && *p == 16
                && x.len() > 16
                && x[2] & 0x80 != 0
                && x[4..8] == PEER_STAG.to_be_bytes()
                && x[16..].contains(&byte)
        })
    }

    /// Runs for `d` in steps; at the zero-copy Write's completion (wr_id 1) the ULP has its
    /// buffer `src` back and writes 0xEE all over it.
    fn run_reusing_at_completion(&mut self, src: ddpdk_control::memory::RegionId, d: Duration) {
        let until = self.now + d;
        while self.now < until {
            let reused = self.comps.iter().any(|c| c.wr_id == 1);
            // `run_for` stops early when nothing is left to happen.
            let next = self.now + Duration::from_millis(10);
            self.run_for(Duration::from_millis(10));
            self.now = self.now.max(next);
            if !reused && self.comps.iter().any(|c| c.wr_id == 1) {
                let region = self.memory.region(src).unwrap();
                region.place(0, &vec![0xEE; region.len()]).unwrap();
            }
        }
    }

    fn completed(&self) -> Vec<(u64, Status)> {
        self.comps.iter().map(|c| (c.wr_id, c.status)).collect()
    }

    /// The statuses work request `wr_id` completed with, in order.
    fn statuses(&self, wr_id: u64) -> Vec<Status> {
        self.comps
            .iter()
            .filter(|c| c.wr_id == wr_id)
            .map(|c| c.status)
            .collect()
    }
}

/// A zero-copy Write flushed at its stream's end completes only once SCTP has settled its
/// segments (here: acknowledged, once the peer hears again), and what was posted after it
/// completes behind it, in posting order (RFC 5040 §5.5): no byte the ULP writes into its
/// buffer after the completion reaches the peer, in a transmission or a retransmission. Both
/// a Write wholly in SCTP's queue (64 KiB) and one cut short by the failure (1 MiB: 256
/// slots hold a third of it).
#[test]
fn a_flushed_zero_copy_write_completes_only_once_sctp_no_longer_reads_its_buffer() {
    for len in [1 << 16, 1 << 20] {
        let (mut d, src) = Duo::zero_copy_write_then_failure(Duo::new(256), len);
        d.run_reusing_at_completion(src, Duration::from_secs(1));
        let while_deaf = d.completed();
        d.deaf = false;
        d.run_reusing_at_completion(src, Duration::from_secs(30));
        assert!(
            d.peer_got(0x11),
            "{len}: the Write's segments reached the peer"
        );
        assert!(
            !d.peer_got(0xEE),
            "{len}: the peer got bytes the ULP wrote after the Write completed"
        );
        assert_eq!(
            while_deaf,
            [],
            "{len}: nothing completes while the Write's segments may still be (re)transmitted"
        );
        assert_eq!(
            d.completed(),
            [
                (1, Status::Flushed),
                (2, Status::Flushed),
                (3, Status::Flushed)
            ],
            "{len}: all flushed, in posting order"
        );
    }
}

/// The wait for a flushed zero-copy Write's segments ends with the association at the latest:
/// a peer that never acknowledges them does not hold the completions beyond it (SCTP drops its
/// queue when the association ends: nothing reads the buffer after that).
#[test]
fn a_zero_copy_write_never_acknowledged_completes_when_the_association_ends() {
    let (mut d, src) = Duo::zero_copy_write_then_failure(Duo::new(256), 1 << 16);
    let closed = |d: &Duo| d.inds.iter().any(|i| matches!(i, Indication::Closed(_)));
    let until = d.now + Duration::from_secs(600);
    while !closed(&d) && d.now < until {
        assert_eq!(d.completed(), [], "held while the association lives");
        d.run_reusing_at_completion(src, Duration::from_secs(1));
    }
    assert!(closed(&d), "Max.Retrans ends the association");
    assert_eq!(
        d.completed(),
        [
            (1, Status::Flushed),
            (2, Status::Flushed),
            (3, Status::Flushed)
        ]
    );
}

/// A peer may start a new session on the stream while segments of ours from the old one are
/// unacknowledged (RFC 5043 §6.6 is its duty for its own chunks): the old session's held
/// completions still come once those segments settle, flushed and in posting order, not
/// dropped with the old session's state.
#[test]
fn a_flushed_zero_copy_write_outlives_a_new_session_on_its_stream() {
    let (mut d, src) = Duo::zero_copy_write_then_failure(Duo::lenient(256), 1 << 16);
    let pdata = encode_private_data(RdmaLimits { ird: 4, ord: 4 }, b"").unwrap();
    d.send(S, 17, &ctl(0, 1, &pdata));
    d.run_reusing_at_completion(src, Duration::from_secs(1));
    let initiates = d
        .events(S)
        .iter()
        .filter(|e| matches!(e, Event::InitiateReceived { .. }))
        .count();
    assert_eq!(initiates, 2, "the peer's new session started");
    assert_eq!(d.completed(), [], "held across the new session");
    d.deaf = false;
    d.run_reusing_at_completion(src, Duration::from_secs(30));
    assert_eq!(
        d.completed(),
        [
            (1, Status::Flushed),
            (2, Status::Flushed),
            (3, Status::Flushed)
        ]
    );
    assert!(
        !d.peer_got(0xEE),
        "the peer got bytes the ULP wrote after the Write completed"
    );
}

/// RFC 5043 §6.2.2 ("complete all outstanding ULP requests with an error") at the
/// association's end, for a session the peer's Terminate ended while its chunks before it were
/// missing (its Terminate may overtake them, §6.1): the receive side waits for them, and with
/// it the stream's Reads and what follows them in the completion order. Once the association
/// is gone nothing can come: they are flushed. They never completed.
#[test]
fn work_waiting_for_the_peers_missing_chunks_is_flushed_when_the_association_ends() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    d.posted_buffer(pd, 11);
    let (_, sink) = d.region_with(pd, 4096, 0x10_0000, Access::LOCAL_WRITE);
    let req = RdmaRequest {
        wr_id: 7,
        stream: S,
        op: RdmaOp::Read {
            source: Stag(0x77),
            source_to: 0,
            sink: sink.stag,
            sink_to: 0x10_0000,
            len: 100,
        },
        data: Payload::Bytes(Vec::new()),
        signaled: true,
    };
    let Duo { conn, memory, .. } = &mut d;
    conn.as_mut()
        .unwrap()
        .post_rdma(req, memory.stags())
        .unwrap();
    d.settle();
    // The peer's session Terminate at DDP-SSN 2: its DDP-SSN 1 has not come.
    d.send(S, 17, &ctl(2, 4, b""));
    d.settle();
    assert_eq!(
        d.conn().session_state(S),
        Some(State::Terminated(TerminationReason::PeerTerminate))
    );
    assert_eq!(d.completed(), [], "waiting for DDP-SSN 1");
    d.conn().abort();
    d.settle();
    assert_eq!(d.completed(), [(7, Status::Flushed)]);
    assert!(
        d.inds
            .iter()
            .any(|i| matches!(i, Indication::RecvFlushed { wr_id: 11, .. })),
        "the posted receive is flushed"
    );
}

/// RFC 5040 §5.5 across a renewal: a mark posted once the stream was renewed (the peer's new
/// session) while the old session's zero-copy Write still waits for its segments completes
/// only once every work request posted before it, the old session's, is reported.
#[test]
fn rfc5040_5_5_a_mark_after_renewal_completes_behind_the_earlier_sessions_work() {
    let (mut d, src) = Duo::zero_copy_write_then_failure(Duo::new(256), 1 << 16);
    let pdata = encode_private_data(RdmaLimits { ird: 4, ord: 4 }, b"").unwrap();
    d.send(S, 17, &ctl(0, 1, &pdata));
    d.run_reusing_at_completion(src, Duration::from_secs(1));
    assert_eq!(d.completed(), [], "held across the new session");
    let req = RdmaRequest {
        wr_id: 9,
        stream: S,
        op: RdmaOp::Mark,
        data: Payload::Bytes(Vec::new()),
        signaled: true,
    };
    let Duo { conn, memory, .. } = &mut d;
    conn.as_mut()
        .unwrap()
        .post_rdma(req, memory.stags())
        .unwrap();
    d.settle();
    d.deaf = false;
    d.run_reusing_at_completion(src, Duration::from_secs(30));
    assert_eq!(
        d.completed(),
        [
            (1, Status::Flushed),
            (2, Status::Flushed),
            (3, Status::Flushed),
            (9, Status::Success)
        ]
    );
}

/// A mark posted on a stream whose session is over, behind a zero-copy Write still waiting
/// for its segments, completes Success behind the flushed work: it did nothing that failed.
#[test]
fn a_mark_after_the_session_ended_completes_success_behind_the_flushed_work() {
    let (mut d, src) = Duo::zero_copy_write_then_failure(Duo::new(256), 1 << 16);
    let req = RdmaRequest {
        wr_id: 9,
        stream: S,
        op: RdmaOp::Mark,
        data: Payload::Bytes(Vec::new()),
        signaled: true,
    };
    let Duo { conn, memory, .. } = &mut d;
    conn.as_mut()
        .unwrap()
        .post_rdma(req, memory.stags())
        .unwrap();
    d.settle();
    d.deaf = false;
    d.run_reusing_at_completion(src, Duration::from_secs(30));
    assert_eq!(
        d.completed(),
        [
            (1, Status::Flushed),
            (2, Status::Flushed),
            (3, Status::Flushed),
            (9, Status::Success)
        ]
    );
}

// ------------------------------------------------------------------------------------------
// Errors found once a message is delivered: the Terminate names the segment that completed it
// (RFC 5040 §4.8, RFC 5041 §7.1), the message's last, as it arrived.
// ------------------------------------------------------------------------------------------

impl Duo {
    /// The one RDMAP Terminate the raw peer received on `stream`, parsed.
    fn the_terminate(&self, stream: u16) -> Vec<u8> {
        let terminates: Vec<Vec<u8>> = self
            .raw_rx
            .iter()
            .filter(|(s, p, x)| {
                *s == stream
                    && *p == 16
                    && x.len() > 20
                    && x[2] & 0x80 == 0
                    && x[8..12] == QN_TERMINATE.to_be_bytes()
            })
            .map(|(_, _, x)| x[20..].to_vec())
            .collect();
        assert_eq!(terminates.len(), 1, "one Terminate");
        terminates[0].clone()
    }
}

/// Asserts that `payload` is the Terminate of `error` for the segment `segment` (DDP-SSN
/// onwards, as sent): M and D set, its DDP header and DDP Segment Length, and R clear.
fn assert_terminates_segment(case: &str, payload: &[u8], error: TerminateError, segment: &[u8]) {
    let packet = TerminatePacket::new_checked(payload).unwrap();
    let t = TerminateRepr::parse(&packet).unwrap();
    assert_eq!(t.error, error, "{case}");
    let seg = t
        .segment
        .unwrap_or_else(|| panic!("{case}: D, the terminated DDP header"));
    let header_end = if segment[2] & 0x80 != 0 { 16 } else { 20 };
    assert_eq!(
        seg.ddp_header,
        &segment[2..header_end],
        "{case}: the DDP header of the message's last segment"
    );
    assert!(t.segment_len_valid, "{case}: M");
    assert_eq!(
        usize::from(seg.segment_len),
        segment.len() - 2,
        "{case}: that segment's DDP Segment Length"
    );
    assert_eq!(t.read_request, None, "{case}: R clear");
}

/// RFC 5040 §4.8 with §5.2: a Read Response found short of its Read once its last segment
/// completes it is terminated with the DDP header of that segment (its STag and TO) and its
/// DDP Segment Length, M and D set; it has no RDMAP header of its own to report (R clear). The
/// last segment arrives first, so the segment whose arrival completes the response is another.
/// The Terminate used to carry no DDP header at all.
#[test]
fn rfc5040_4_8_a_read_response_short_at_delivery_reports_its_last_segment() {
    let (mut d, _, r) = Duo::read_in_flight();
    // [0, 600) and [400, 800): overlapping, 200 bytes short.
    let last = rrseg(2, true, r.sink_stag, r.sink_to + 400, 400);
    d.send_in_turn(&[&last, &rrseg(1, false, r.sink_stag, r.sink_to, 600)]);
    assert_terminates_segment(
        "short",
        &d.the_terminate(S),
        TerminateError::Rdmap(RdmapError::OperationUnspecified),
        &last,
    );
}

/// RFC 5040 §4.8 with §5.3: a Send with Invalidate of two segments, whose STag the stream may
/// not invalidate (found when the message is delivered), is terminated with the DDP header of
/// its last segment as it arrived (MO 100, not a rebuilt MO 0) and that segment's DDP Segment
/// Length (not the whole message's), M and D set, R clear.
#[test]
fn rfc5040_4_8_a_send_with_invalidate_refused_at_delivery_reports_its_last_segment() {
    let mut d = rdmap_duo_with_receives(1);
    let send_inv = |ssn: u16, last: bool, mo: u32, payload: &[u8]| {
        rdmap_useg(ssn, last, 1, mo, send_inv_unknown(), payload)
    };
    let last = send_inv(2, true, 100, &[0xbb; 50]);
    d.send(S, 16, &last);
    d.settle();
    d.send(S, 16, &send_inv(1, false, 0, &[0xaa; 100]));
    d.settle();
    assert_terminates_segment(
        "cannot invalidate",
        &d.the_terminate(S),
        TerminateError::Rdmap(RdmapError::ProtectionCannotInvalidate),
        &last,
    );
}

/// RFC 5041 §3 item 1: "LLPs MUST expose MULPDU and MULPDU changes". A path MTU an ICMP
/// lowers (`lower_path_mtu`, as the data core calls it) gives the ULP its new MULPDU at once;
/// before, it waited for the idle association's next packet or timer (an independent review,
/// session 68).
#[test]
fn rfc5041_3_a_mulpdu_lowered_by_icmp_is_told_at_once() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open(S, pd);
    d.settle();
    let peer = d.conn.as_ref().unwrap().peer_ip();
    let c = d.conn.as_mut().unwrap();
    while c.poll_indication().is_some() {}
    assert!(c.lower_path_mtu(1280, peer));
    let told = std::iter::from_fn(|| c.poll_indication())
        .any(|i| matches!(i, Indication::MulpduChanged { .. }));
    assert!(told, "the ULP was not told of the new MULPDU");
}

/// RFC 5040 §7 / RFC 5041 §7.1: the first error is the stream's. A Send with Invalidate of an
/// STag the stream may not invalidate (DDP-SSN 1, MSN 1) is delivered in the same turn as a
/// later Send that arrived first (DDP-SSN 2) whose MSN 3 is out of order once message 1 is
/// taken: the Terminate is Cannot Invalidate with message 1's header, not MSN range with
/// message 2's. Before, the later error took the first's place (an independent review,
/// session 68).
#[test]
fn rfc5040_7_the_first_error_of_a_delivery_is_the_one_terminated() {
    let mut d = rdmap_duo_with_receives(3);
    let later = rdmap_useg(
        2,
        true,
        3,
        0,
        [control(1, Opcode::Send), 0, 0, 0, 0],
        &[0xbb; 50],
    );
    let first = rdmap_useg(1, true, 1, 0, send_inv_unknown(), &[0xaa; 50]);
    d.send_in_turn(&[&later, &first]);
    assert_terminates_segment(
        "the first error",
        &d.the_terminate(S),
        TerminateError::Rdmap(RdmapError::ProtectionCannotInvalidate),
        &first,
    );
}

/// RFC 5040 §5.4: a Terminate answers no Terminate. The peer's Terminate (DDP-SSN 1) is
/// delivered in the same turn as a later Send that arrived first (DDP-SSN 2) whose MSN is out
/// of order: that error, behind the peer's last message, is not answered with a Terminate of
/// ours. Before, it was (an independent review, session 68).
#[test]
fn rfc5040_5_4_an_error_behind_the_peers_terminate_is_not_terminated() {
    let mut d = rdmap_duo_with_receives(3);
    let later = rdmap_useg(
        2,
        true,
        3,
        0,
        [control(1, Opcode::Send), 0, 0, 0, 0],
        &[0xbb; 50],
    );
    let payload = ddpdk_control::rdmap::terminate_payload(
        RxError::Rdmap(RdmapError::OperationUnspecified),
        &ddpdk_dataplane::ddp::HeaderCopy::from_bytes(&[]),
        0,
        None,
    );
    let term = rseg(1, control(1, Opcode::Terminate), 2, 1, &payload);
    d.send_in_turn(&[&later, &term]);
    assert!(
        d.inds
            .iter()
            .any(|i| matches!(i, Indication::RdmapTerminate { .. })),
        "{:?}",
        d.inds
    );
    let ours = d
        .raw_rx
        .iter()
        .filter(|(s, p, x)| {
            *s == S
                && *p == 16
                && x.len() > 20
                && x[2] & 0x80 == 0
                && x[8..12] == QN_TERMINATE.to_be_bytes()
        })
        .count();
    assert_eq!(ours, 0, "a Terminate of ours answered the peer's");
}

/// RFC 5041 §7.1 check 5 and §7.2 (0x2/0x03), reported per RFC 5040 §4.8: a Send whose MSN is
/// within the posted range on arrival but out of order at delivery (MSN 2 delivered first) is
/// terminated with the DDP header of its last segment (QN 0, MSN 2, MO 100) and that segment's
/// DDP Segment Length, M and D set. It used to be reported without a header.
#[test]
fn rfc5041_7_1_an_msn_error_at_delivery_is_terminated_with_its_last_segment() {
    let mut d = rdmap_duo_with_receives(2);
    let send = |ssn: u16, last: bool, mo: u32, payload: &[u8]| {
        rdmap_useg(
            ssn,
            last,
            2,
            mo,
            [control(1, Opcode::Send), 0, 0, 0, 0],
            payload,
        )
    };
    let last = send(2, true, 100, &[0xbb; 50]);
    d.send(S, 16, &last);
    d.settle();
    d.send(S, 16, &send(1, false, 0, &[0xaa; 100]));
    d.settle();
    assert_terminates_segment(
        "MSN range",
        &d.the_terminate(S),
        TerminateError::Ddp(DdpError::MsnRange),
        &last,
    );
}

/// RFC 5041 §7.1 check 4, §7.2 (0x2/0x05 "DDP Message too long for available buffer"): a
/// Send longer than the buffer its MSN names is terminated with that segment's DDP header
/// and length, as any refused segment (RFC 5040 §4.8), and the error names the receive it
/// reached (`recv`, the one a verbs receive completes `IBV_WC_LOC_LEN_ERR` for): here the
/// second posted, message 1 still being placed into the first.
#[test]
fn rfc5041_7_1_check_4_a_send_too_long_names_its_receive_and_terminates_with_its_header() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    // Two receives of 256 bytes each.
    d.posted_buffer(pd, 40);
    d.posted_buffer(pd, 41);
    let send = |ssn: u16, last: bool, msn: u32, payload: &[u8]| {
        let mut v = useg(ssn, last, 0, msn, 0, payload);
        v[3..8].copy_from_slice(&[control(1, Opcode::Send), 0, 0, 0, 0]);
        v
    };
    d.send(S, 16, &send(1, false, 1, &[0xaa; 100]));
    d.settle();
    let too_long = send(2, true, 2, &[0xbb; 257]);
    d.send(S, 16, &too_long);
    d.settle();
    assert_terminates_segment(
        "too long",
        &d.the_terminate(S),
        TerminateError::Ddp(DdpError::TooLong),
        &too_long,
    );
    let errors: Vec<_> = d
        .inds
        .iter()
        .filter_map(|i| match i {
            Indication::Error { error, recv, .. } => Some((*error, *recv)),
            _ => None,
        })
        .collect();
    assert_eq!(
        errors,
        [(RxError::MessageTooLong { qn: 0, position: 1 }, Some(41))]
    );
}

/// RFC 5043 §6.2, §6.6: a watch for a Terminate crossing our Reject, whose bound is a TSN of
/// the association's previous incarnation, ends with the association: a restarted peer's TSNs
/// start afresh (RFC 9260 §5.2.4), and the genuine Terminate (DDP-SSN 1) of a session opened
/// after the restart ends it. Found by an independent review: the watch outlived the restart
/// and dropped that Terminate for 9 of these 16 restart seeds.
#[test]
fn rfc5043_6_6_a_crossing_watch_ends_with_the_association() {
    let mut bad = Vec::new();
    for seed in 8u8..24 {
        let mut d = Duo::new(256);
        let pd = d.memory.alloc_pd();
        // Attempt A: the peer's Initiate, our Reject (its Terminate never sent).
        d.send(S, 17, &ctl(0, 1, b""));
        d.settle();
        d.conn().reject(S, b"no").unwrap();
        let mut tries = 0;
        while d.conn().initiate(S, pd, b"again").is_err() {
            tries += 1;
            assert!(tries < 100);
            d.run_for(Duration::from_millis(10));
        }
        d.settle();
        // A chunk of the peer's on another stream is lost (a hole below what follows), then
        // the peer accepts session B: the watch's bound is that Accept's TSN, SCTP's
        // cumulative TSN stays below it.
        d.lose = Some(b"hole maker hole maker".to_vec());
        d.send(3, 16, b"hole maker hole maker");
        d.round();
        d.send(S, 17, &ctl(0, 2, b""));
        d.settle();
        assert_eq!(d.conn().session_state(S), Some(State::Established));
        // The peer restarts.
        let mut ep2 = Endpoint::new(sctp(RAW_PORT, 256), [seed; 32]).unwrap();
        d.raw = ep2.connect(d.now, srv_addr(), SRV_PORT);
        d.lose = None;
        d.raw_rx.clear();
        d.run_for(Duration::from_secs(5));
        assert!(d
            .inds
            .iter()
            .any(|i| matches!(i, Indication::PeerRestarted)));
        // Session C on the new incarnation: we initiate, the peer accepts, then terminates.
        d.conn().initiate(S, pd, b"after restart").unwrap();
        d.settle();
        d.send(S, 17, &ctl(0, 2, b""));
        d.settle();
        assert_eq!(d.conn().session_state(S), Some(State::Established));
        d.send(S, 17, &ctl(1, 4, b""));
        d.run_for(Duration::from_secs(2));
        let state = d.conn().session_state(S);
        let crossed = d.conn().stats().crossed_rejects;
        if state != Some(State::Terminated(TerminationReason::PeerTerminate)) || crossed != 0 {
            bad.push((seed, state, crossed));
        }
    }
    assert!(
        bad.is_empty(),
        "legitimate Terminates dropped (seed, state, crossed_rejects): {bad:?}"
    );
}

/// (An independent review, session 55.) RFC 5043 §10, "The SCTP sender is not obligated to transmit unordered Data Chunks
/// in the order presented": the peer's first segment may carry a lower TSN than its Accept.
/// Once SCTP's cumulative TSN reaches that segment the bound starts, though the Accept is
/// still a chunk SCTP misses (a hole above the cumulative TSN) and is being retransmitted
/// (RFC 9260 §6.3.3, backing off): lost for a few retransmissions, the legal session fails
/// (`NoAnswer`) and its held segments are dropped.
#[test]
fn rfc5043_10_an_accept_sent_after_its_segment_and_lost_is_waited_for() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.conn().initiate(S, pd, b"").unwrap();
    d.settle();
    let (w, wreg) = d.region_with(pd, 65536, 0x1000, Access::REMOTE_WRITE);
    // The peer's SCTP took the segment ahead of the Accept submitted before it.
    d.send(S, 16, &tseg(1, true, wreg.stag.0, 0x1000, &[0xaa; 1024]));
    while d.round() {}
    d.lose = Some(b"an accept lost on its way".to_vec());
    d.send(S, 17, &ctl(0, 2, b"an accept lost on its way"));
    while d.round() {}
    assert_eq!(d.conn().stats().segments_held_for_answer, 1);
    let rto = d.conn().association().rto();
    // Lost on a lossy path for a while (six RTOs), SCTP retransmitting it all along.
    d.run_for(rto * 6);
    d.lose = None;
    d.run_for(Duration::from_secs(120));
    assert_eq!(
        d.conn().stats().initiates_unanswered,
        0,
        "given up while SCTP still missed the Accept (a hole above the cumulative TSN)"
    );
    assert_eq!(d.conn().session_state(S), Some(State::Established));
    assert!(d.region_bytes(w, 1024).iter().all(|&b| b == 0xaa));
}

/// (An independent review, session 55.) RFC 5043 §10 bound on segments held for the answer, with an RFC 9260 §5.2.4
/// restart. Our ULP ended the session while our Initiate awaited its answer; the peer's
/// segments still came and were held for the answer. The peer restarts: the session was over
/// already, so nothing flushes the stream, and the answer wait is dropped (its session no
/// longer awaits an answer) without giving the held segments' receive buffer back.
#[test]
fn rfc5043_10_segments_held_for_an_answer_give_their_room_back_at_a_restart_9260_5_2_4() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.conn().initiate(S, pd, b"").unwrap();
    d.settle();
    let room = d.conn().receive_room();
    d.conn().terminate(S).unwrap();
    d.settle();
    let (_w, wreg) = d.region_with(pd, 65536, 0x1000, Access::REMOTE_WRITE);
    for k in 0..8u16 {
        let to = 0x1000 + u64::from(k) * 1024;
        d.send(S, 16, &tseg(k + 1, true, wreg.stag.0, to, &[0xaa; 1024]));
    }
    while d.round() {}
    let held = d.conn().stats().segments_held_for_answer;
    // The peer restarts before the answer wait ends.
    let mut ep2 = Endpoint::new(sctp(RAW_PORT, 256), [8; 32]).unwrap();
    d.raw = ep2.connect(d.now, srv_addr(), SRV_PORT);
    d.raw_rx.clear();
    d.run_for(Duration::from_secs(60));
    assert!(d
        .inds
        .iter()
        .any(|i| matches!(i, Indication::PeerRestarted)));
    assert_eq!(
        d.conn().receive_room(),
        room,
        "{held} segments held for the answer; their room after the restart"
    );
}

/// (An independent review, session 55.) `initiates_unanswered` counts "our Initiates given up ... the session ended
/// (`ProtocolError::NoAnswer`, our Terminate)". Our ULP ended the session itself while the
/// answer was awaited, and the peer's segments then held for the answer are dropped after the
/// bound: that is no Initiate given up for want of an answer, yet it is counted as one (the
/// session's reason stays LocalTerminate).
#[test]
fn rfc5043_10_initiates_unanswered_does_not_count_a_session_we_ended() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.conn().initiate(S, pd, b"").unwrap();
    d.settle();
    d.conn().terminate(S).unwrap();
    d.settle();
    let (_w, wreg) = d.region_with(pd, 65536, 0x1000, Access::REMOTE_WRITE);
    for k in 0..4u16 {
        let to = 0x1000 + u64::from(k) * 1024;
        d.send(S, 16, &tseg(k + 1, true, wreg.stag.0, to, &[0xaa; 1024]));
    }
    while d.round() {}
    d.run_for(Duration::from_secs(60));
    assert_eq!(
        d.conn().session_state(S),
        Some(State::Terminated(TerminationReason::LocalTerminate))
    );
    assert_eq!(d.conn().stats().initiates_unanswered, 0);
}

// ------------------------------------------------------------------------------------------
// Independent review (RFC 5043 §7-§11)
// ------------------------------------------------------------------------------------------

/// RFC 5043 §9: the MULPDU "should be the largest value that can be supported without use of
/// IP or SCTP fragmentation", and the adaptation "SHOULD set the maximum DDP Segment size
/// below the theoretical maximum in order to allow bundling of Control Chunks" (a SHOULD,
/// with no amount given). A peer that keeps no such room (or less than our 32 bytes,
/// `ddp::tx::SACK_HEADROOM`) announces the theoretical maximum to its DDP and sends segments
/// that size, each in one unfragmented DATA chunk on the same path: conforming, and carried
/// without any fragmentation. ddpdk's receive limit is its own MULPDU, the SACK room taken
/// off (`control/src/conn/mod.rs` `routing`, `route.rs` `place_segment`), so such a segment
/// is refused as Oversize and the stream ends: two conforming ends that chose differently
/// under the SHOULD cannot exchange a full segment. ddpdk already gives back the ESP headroom
/// on receive for exactly this reason (`Connection::set_receive_slack`: "a peer whose ESP adds
/// less (or none) uses [it], and its segments still arrived unfragmented (RFC 5043 §9)"); the
/// SACK headroom is the same kind of local room and is not given back.
#[test]
fn rfc5043_9_a_segment_filling_one_unfragmented_data_chunk_is_not_refused() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open(S, pd);
    let ours = d.conn().max_sizes().mulpdu;
    // The largest DATA user data one unfragmented packet carries on this path, less the
    // DDP-SSN: the theoretical maximum DDP Segment (wire::ddp::mulpdu without SACK room).
    let theoretical = d.conn().association().max_message() - 2;
    assert!(theoretical > ours, "{theoretical} > {ours}");
    let (r, reg) = d.remote_write_region(pd, 8192, 0);
    let payload = vec![0x5a; theoretical - 14];
    // The raw peer's SCTP refuses anything a DATA chunk cannot carry whole (it never
    // fragments): this is one unfragmented chunk in one packet of the path MTU.
    d.send(S, 16, &tseg(1, true, reg.stag.0, 0, &payload));
    d.settle();
    assert_eq!(
        d.errors(),
        vec![],
        "a {theoretical}-byte segment that arrived unfragmented was refused (our MULPDU {ours})"
    );
    let bytes = d.region_bytes(r, payload.len());
    assert!(bytes.iter().all(|&b| b == 0x5a), "the segment was placed");
}

impl Duo {
    /// As [`Duo::new`], both ends' SCTP endpoints configured with Adaptation Indication
    /// `indication` (RFC 5043 §7.1: "The local interface MUST allow the ULP to specify an
    /// SCTP endpoint to use a specific Adaptation Indication": `Config::adaptation_indication`).
    fn with_adaptation(indication: u32) -> Duo {
        Duo::with_configs(
            Config {
                adaptation_indication: indication,
                ..sctp(RAW_PORT, 256)
            },
            Config {
                adaptation_indication: indication,
                ..sctp(SRV_PORT, 256)
            },
        )
    }
}

/// RFC 5043 §11.1, the table's last row: an Adaptation Indication other than DDP's "indicates
/// that the peer DOES NOT support the DDP adaptation, and thus DDP procedures MUST NOT be
/// performed upon this association". §7.1 makes the indication the ULP's choice, and ddpdk
/// lets it be chosen (`sctp::Config::adaptation_indication`, "what an endpoint sends and
/// requires"); an endpoint so configured takes an association whose peer indicated the same
/// non-DDP value, and the `Connection` made of it (`Listener::handle`, which never looks at
/// the indication) performs DDP procedures on it all the same: a PPID 17 chunk is taken as a
/// DDP Stream Session Initiate and reported to the ULP as one (which may then accept it).
/// Nothing the peer sends on such an association should be treated as DDP.
#[test]
fn rfc5043_11_1_no_ddp_procedures_on_an_association_with_another_indication() {
    let mut d = Duo::with_adaptation(2);
    assert!(
        d.conn.is_some(),
        "the association with indication 2 came up"
    );
    d.send(S, 17, &ctl(0, 1, b""));
    d.settle();
    let events = d.events(S);
    assert!(
        events.is_empty(),
        "DDP Stream Session events on an association whose Adaptation Indication is 2: \
         {events:?}"
    );
}

/// RFC 5043 §10: "the receiver MUST NOT rely upon the SCTP Transmission Sequence Number (TSN)
/// to imply ordering of DDP Segments ... The SCTP sender is not obligated to transmit
/// unordered Data Chunks in the order presented"; §6.6: "A DDP Stream Identifier MUST NOT be
/// reused for another DDP Stream Session while any Data Chunk from a prior session might be
/// outstanding". The mirror of
/// `rfc5043_6_a_chunk_sent_before_the_peers_terminate_is_waited_for_while_sctp_misses_it`: the
/// peer's DDP submitted its last segment (DDP-SSN 1) and then its Terminate (DDP-SSN 2), a
/// legal sequence (§6.2), and its SCTP transmitted the small Terminate first, so the segment
/// has the higher TSN, and it is lost four times in a row (16 RTOs). The wait used to give up
/// after `GAP_GRACE_RTOS` (then 4) RTOs once SCTP's cumulative TSN passed the Terminate's:
/// the receive was flushed, the stream id freed, and the segment, when its retransmission
/// came, dropped (the peer's send had completed Success), or taken by the next session on
/// the stream id as its own DDP-SSN 1 (found by an independent review, session 60).
#[test]
fn rfc5043_10_a_segment_with_a_tsn_after_the_peers_terminate_is_still_waited_for() {
    let flushed = |d: &Duo, wr: u64| {
        d.inds
            .iter()
            .any(|i| matches!(i, Indication::RecvFlushed { wr_id, .. } if *wr_id == wr))
    };
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open(S, pd);
    d.posted_buffer(pd, 11);
    // The Terminate (DDP-SSN 2) leaves first; the segment (DDP-SSN 1) after it, and is lost.
    d.send(S, 17, &ctl(2, 4, b""));
    while d.round() {}
    d.lose = Some(b"late but legal".to_vec());
    d.send(S, 16, &useg(1, true, 0, 1, 0, b"late but legal"));
    d.settle();
    assert_eq!(
        d.conn().session_state(S),
        Some(State::Terminated(TerminationReason::PeerTerminate))
    );
    let rto = d.conn().association().rto();
    d.run_for(rto * 16);
    assert!(!flushed(&d, 11), "the receive waits for the late segment");
    assert_eq!(d.conn().stats().inbound_gaps_given_up, 0);
    assert!(
        d.conn().initiate(S, pd, b"").is_err(),
        "the stream id is not free while the old session's segment is outstanding (§6.6)"
    );
    d.lose = None;
    d.run_for(Duration::from_secs(60));
    let st = *d.conn().stats();
    assert!(
        d.inds.iter().any(|i| matches!(
            i,
            Indication::Received {
                wr_id: 11,
                len: 14,
                ..
            }
        )),
        "the segment sent before the peer's Terminate was not delivered: flushed {}, \
         inbound_gaps_given_up {}, segments_received {}, after_session_end {}",
        flushed(&d, 11),
        st.inbound_gaps_given_up,
        st.segments_received,
        st.after_session_end
    );
    assert_eq!(st.inbound_gaps_given_up, 0);
    d.conn().initiate(S, pd, b"").unwrap();
}

// ------------------------------------------------------------------------------------------
// RFC 7306 from a hostile raw peer: probes of an independent review (session 62)
// ------------------------------------------------------------------------------------------

use ddpdk_control::conn::AtomicOperation;

impl Duo {
    /// The server posts a FetchAdd (wr_id 5) on the raw peer's word (STag 0x0011_2201, TO 0x40)
    /// with its original value going to offset 8 of a fresh local-write sink; returns the sink
    /// region, its registration, and the Atomic Request the raw peer received.
    fn atomic_in_flight(
        &mut self,
        pd: Pd,
    ) -> (
        ddpdk_control::memory::RegionId,
        ddpdk_control::memory::Registered,
        AtomicRequest,
    ) {
        // Remote write too: the tests that have the peer invalidate the sink need an STag the
        // peer may invalidate (a local-only one is refused, "STag cannot be invalidated").
        let (sink, sink_reg) =
            self.region_with(pd, 4096, 0x2000, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
        let atomic = RdmaRequest {
            wr_id: 5,
            stream: S,
            op: RdmaOp::Atomic {
                op: AtomicOperation::FetchAdd { add: 1, mask: 0 },
                stag: Stag(0x0011_2201),
                to: 0x40,
                sink: sink_reg.stag,
                sink_to: 0x2008,
            },
            data: Payload::Bytes(Vec::new()),
            signaled: true,
        };
        let Duo { conn, memory, .. } = self;
        conn.as_mut()
            .unwrap()
            .post_rdma(atomic, memory.stags())
            .unwrap();
        self.settle();
        let request = self
            .raw_rx
            .iter()
            .filter(|(s, p, x)| *s == S && *p == 16 && x.len() > 20 && x[2] & 0x80 == 0)
            .filter(|(_, _, x)| Control::from_byte(x[3]).opcode == Opcode::AtomicRequest)
            .map(|(_, _, x)| AtomicRequest::parse(&x[20..]).unwrap())
            .next()
            .expect("the Atomic Request");
        (sink, sink_reg, request)
    }
}

/// RFC 7306 §5.2.2: an Atomic Response echoes the Request Identifier of the request it answers
/// (the oldest outstanding, the responder answering in order); one that echoes another is an
/// error that ends the stream, its value written nowhere, and the Atomic completes in error.
#[test]
fn rfc7306_5_2_2_an_atomic_response_echoing_another_request_is_refused() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    let (sink, _, request) = d.atomic_in_flight(pd);
    let response = AtomicResponse {
        request_id: request.request_id.wrapping_add(1),
        original: 0x1122_3344_5566_7788,
    };
    d.send(
        S,
        16,
        &rseg(
            1,
            control(1, Opcode::AtomicResponse),
            QN_ATOMIC_RESPONSE,
            1,
            &response.to_bytes(),
        ),
    );
    d.settle();
    assert_eq!(
        d.rdmap_terminates(S),
        [TerminateError::Rdmap(RdmapError::OperationUnspecified)]
    );
    assert!(
        d.region_bytes(sink, 4096).iter().all(|&b| b == 0),
        "the value is written nowhere"
    );
    assert_eq!(
        d.comps
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect::<Vec<_>>(),
        [(5, Status::Flushed)]
    );
    assert_eq!(d.conn().stats().atomics_completed, 0);
}

/// RFC 7306 §5.2.2 with RFC 5040 §5.3: a Send with Invalidate takes effect before the stream's
/// next message. An Atomic Response behind one that invalidated the Atomic's sink, in the same
/// packet, writes nothing there: the Atomic completes in error and the loss is counted. (The
/// fix of aa4f820, which noted it untested.)
#[test]
fn rfc7306_5_2_2_a_sink_the_peer_invalidated_just_before_takes_no_result() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    let (sink, sink_reg, request) = d.atomic_in_flight(pd);
    let _ = d.posted_buffer(pd, 40);
    let mut invalidate = rseg(1, control(1, Opcode::SendInvalidate), 0, 1, b"inval");
    invalidate[4..8].copy_from_slice(&sink_reg.stag.0.to_be_bytes());
    let response = AtomicResponse {
        request_id: request.request_id,
        original: 0x1122_3344_5566_7788,
    };
    let answer = rseg(
        2,
        control(1, Opcode::AtomicResponse),
        QN_ATOMIC_RESPONSE,
        1,
        &response.to_bytes(),
    );
    // Both in one packet: the invalidation is in no table yet, only in the packet's record.
    d.send(S, 16, &invalidate);
    d.send(S, 16, &answer);
    assert_eq!(d.raw_to_server(), 1, "one packet");
    d.settle();
    assert!(d.rdmap_terminates(S).is_empty());
    assert!(
        d.region_bytes(sink, 4096).iter().all(|&b| b == 0),
        "nothing written into the invalidated sink"
    );
    // Performed by the Responder, its result lost here: not "flushed" (not carried out).
    assert!(d.comps.contains(&Completion {
        wr_id: 5,
        stream: S,
        status: Status::LocalProtection
    }));
    assert_eq!(d.conn().stats().atomic_results_lost, 1);
}

/// RFC 7306 §5.2.2 (Figure 6) with RFC 5040 §5.3: an Atomic Response is untagged (QN 3) and
/// carries the Request Identifier and the Original Remote Data Value alone; the Atomic's sink is
/// the Requester's own word, which no field of the request or the response names. A peer that
/// invalidated that sink (Send with Invalidate) and answers the Atomic in a later packet, the
/// STag gone from the tables by then, sent a valid response: no Terminate (unlike a Read
/// Response, tagged, whose sink STag is on the wire and fails DDP's checks,
/// `rfc5040_5_3_a_read_response_into_a_sink_the_peer_invalidated_is_its_invalid_stag`); the
/// result has nowhere to go, the Atomic completes in error and the loss is counted.
#[test]
fn rfc7306_5_2_2_an_atomic_response_names_no_sink_so_one_the_peer_invalidated_earlier_is_no_terminate(
) {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    let (sink, sink_reg, request) = d.atomic_in_flight(pd);
    let _ = d.posted_buffer(pd, 40);
    let mut invalidate = rseg(1, control(1, Opcode::SendInvalidate), 0, 1, b"inval");
    invalidate[4..8].copy_from_slice(&sink_reg.stag.0.to_be_bytes());
    d.send(S, 16, &invalidate);
    d.settle();
    // The owner of the tables takes the invalidation (as a data core does before its next
    // packet): the STag is gone from the table the response's turn sees.
    assert_eq!(d.conn().take_peer_invalidated(), [sink_reg.stag]);
    d.memory.deregister(sink_reg.stag).unwrap();
    let response = AtomicResponse {
        request_id: request.request_id,
        original: 0x1122_3344_5566_7788,
    };
    d.send(
        S,
        16,
        &rseg(
            2,
            control(1, Opcode::AtomicResponse),
            QN_ATOMIC_RESPONSE,
            1,
            &response.to_bytes(),
        ),
    );
    d.settle();
    assert!(
        d.rdmap_terminates(S).is_empty(),
        "the peer did nothing wrong"
    );
    assert!(
        d.region_bytes(sink, 4096).iter().all(|&b| b == 0),
        "nothing written into the invalidated sink"
    );
    let atomic = d.statuses(5);
    assert_eq!(atomic, [Status::LocalProtection]);
    assert_eq!(d.conn().stats().atomic_results_lost, 1);
}

/// RFC 7306 §5.2.1 with RFC 5040 §5.5 (a request is served only once DDP delivered it, all
/// earlier messages placed): an Atomic that overtakes an earlier RDMA Write to its word (a later
/// DDP-SSN arriving first, RFC 5043 §10) is performed after the Write is placed, and returns
/// the Write's value.
#[test]
fn rfc7306_5_2_1_an_atomic_is_performed_after_the_write_before_it() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    let (w, wreg) = d.region_with(
        pd,
        4096,
        0x1000,
        Access::REMOTE_ATOMIC | Access::REMOTE_WRITE,
    );
    let mut atomic = atomic_request(AtomicOp::FetchAdd, 0x0a0a, wreg.stag, 0x1010, 1);
    atomic[..2].copy_from_slice(&2u16.to_be_bytes());
    let mut write = tseg(1, true, wreg.stag.0, 0x1010, &100u64.to_ne_bytes());
    write[3] = control(1, Opcode::Write);
    d.send(S, 16, &atomic);
    d.send(S, 16, &write);
    d.settle();
    assert!(d.rdmap_terminates(S).is_empty());
    let mut word = [0u8; 8];
    d.memory.region(w).unwrap().read(16, &mut word).unwrap();
    assert_eq!(u64::from_ne_bytes(word), 101, "the Write, then the Atomic");
    let originals: Vec<u64> = d
        .raw_rx
        .iter()
        .filter(|(s, p, v)| *s == S && *p == 16 && v.len() > 20 && v[2] & 0x80 == 0)
        .filter(|(_, _, v)| v[8..12] == QN_ATOMIC_RESPONSE.to_be_bytes())
        .map(|(_, _, v)| AtomicResponse::parse(&v[20..]).unwrap().original)
        .collect();
    assert_eq!(originals, [100]);
}

/// RFC 7306 §7 (an Atomic Response may pass a Read Response) with RFC 5040 §5.5: a Read and
/// then an Atomic outstanding, answered Atomic first; the Atomic's value lands at once, its
/// completion waits for the Read's, and both complete Success in posting order.
#[test]
fn rfc7306_7_an_atomic_response_passing_a_read_response_completes_in_posting_order() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    let (read_sink, read_reg) = d.region_with(pd, 4096, 0x3000, Access::LOCAL_WRITE);
    let read = RdmaRequest {
        wr_id: 9,
        stream: S,
        op: RdmaOp::Read {
            source: Stag(0x0011_2201),
            source_to: 0,
            sink: read_reg.stag,
            sink_to: 0x3100,
            len: 1000,
        },
        data: Payload::Bytes(Vec::new()),
        signaled: true,
    };
    let Duo { conn, memory, .. } = &mut d;
    conn.as_mut()
        .unwrap()
        .post_rdma(read, memory.stags())
        .unwrap();
    let (sink, _, request) = d.atomic_in_flight(pd);
    let response = AtomicResponse {
        request_id: request.request_id,
        original: 0x0102_0304_0506_0708,
    };
    d.send(
        S,
        16,
        &rseg(
            1,
            control(1, Opcode::AtomicResponse),
            QN_ATOMIC_RESPONSE,
            1,
            &response.to_bytes(),
        ),
    );
    d.settle();
    let mut value = [0u8; 8];
    d.memory.region(sink).unwrap().read(8, &mut value).unwrap();
    assert_eq!(u64::from_ne_bytes(value), 0x0102_0304_0506_0708);
    assert!(
        d.comps.is_empty(),
        "the Atomic waits for the Read before it"
    );
    d.send(S, 16, &rrseg(2, true, read_reg.stag.0, 0x3100, 1000));
    d.settle();
    assert!(d.rdmap_terminates(S).is_empty());
    assert_eq!(
        d.comps
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect::<Vec<_>>(),
        [(9, Status::Success), (5, Status::Success)]
    );
    assert_eq!(
        d.region_bytes(read_sink, 4096)[0x100..0x100 + 1000],
        [0xaa; 1000]
    );
}

/// RFC 5040 §5.4 with RFC 7306 §5.2.1: the peer's Terminate is the last message it sends on
/// the stream, so an Atomic Request with a later DDP-SSN is none of the stream's: DDP delivers
/// in DDP-SSN order (RFC 5043 §10), and an Atomic that arrived first (its DDP-SSN 2 ahead of
/// the Terminate's 1) is delivered in the same turn as the Terminate, after it. It must not
/// be performed: the word keeps its value and no Atomic Response leaves.
#[test]
fn rfc7306_5_2_1_an_atomic_behind_the_peers_terminate_is_not_performed() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    let (w, wreg) = d.region_with(pd, 4096, 0x1000, Access::REMOTE_ATOMIC);
    let payload = ddpdk_control::rdmap::terminate_payload(
        RxError::Rdmap(RdmapError::OperationUnspecified),
        &ddpdk_dataplane::ddp::HeaderCopy::from_bytes(&[]),
        0,
        None,
    );
    let term = rseg(1, control(1, Opcode::Terminate), 2, 1, &payload);
    let mut atomic = atomic_request(AtomicOp::FetchAdd, 7, wreg.stag, 0x1010, 1);
    atomic[..2].copy_from_slice(&2u16.to_be_bytes());
    // The Atomic (DDP-SSN 2) overtakes the Terminate (DDP-SSN 1).
    d.send(S, 16, &atomic);
    d.send(S, 16, &term);
    d.settle();
    assert!(
        d.inds
            .iter()
            .any(|i| matches!(i, Indication::RdmapTerminate { .. })),
        "{:?}",
        d.inds
    );
    assert!(
        d.region_bytes(w, 4096).iter().all(|&b| b == 0),
        "the word is not modified after the peer's Terminate"
    );
    assert_eq!(d.conn().stats().atomics_served, 0);
    assert!(
        !d.raw_rx.iter().any(|(s, p, v)| *s == S
            && *p == 16
            && v.len() > 20
            && v[8..12] == QN_ATOMIC_RESPONSE.to_be_bytes()),
        "no Atomic Response"
    );
}

/// RFC 5040 §5.4 with RFC 7306 §6: Immediate Data with a DDP-SSN after the peer's Terminate
/// that arrived first is delivered behind the Terminate in the same turn; it completes no
/// posted receive (the receive ends flushed with the stream).
#[test]
fn rfc7306_6_immediate_data_behind_the_peers_terminate_completes_no_receive() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    let _ = d.posted_buffer(pd, 40);
    let payload = ddpdk_control::rdmap::terminate_payload(
        RxError::Rdmap(RdmapError::OperationUnspecified),
        &ddpdk_dataplane::ddp::HeaderCopy::from_bytes(&[]),
        0,
        None,
    );
    let term = rseg(1, control(1, Opcode::Terminate), 2, 1, &payload);
    let immediate = rseg(
        2,
        control(1, Opcode::ImmediateData),
        0,
        1,
        &7u64.to_be_bytes(),
    );
    d.send(S, 16, &immediate);
    d.send(S, 16, &term);
    d.settle();
    assert!(d
        .inds
        .iter()
        .any(|i| matches!(i, Indication::RdmapTerminate { .. })));
    assert_eq!(
        world::received(&d.inds),
        [],
        "no receive completed behind the Terminate"
    );
}

/// RFC 5040 §5.4 with RFC 7306 §5.2.2: the peer's Terminate ends our outstanding Atomic
/// (flushed); an Atomic Response with a later DDP-SSN that arrived first, delivered behind it,
/// is none of the stream's: it writes nothing, completes nothing more, and draws no Terminate
/// from us (a Terminate answers no Terminate).
#[test]
fn rfc7306_5_2_2_an_atomic_response_behind_the_peers_terminate_is_ignored() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    let (sink, _, request) = d.atomic_in_flight(pd);
    let payload = ddpdk_control::rdmap::terminate_payload(
        RxError::Rdmap(RdmapError::OperationUnspecified),
        &ddpdk_dataplane::ddp::HeaderCopy::from_bytes(&[]),
        0,
        None,
    );
    let term = rseg(1, control(1, Opcode::Terminate), 2, 1, &payload);
    let response = AtomicResponse {
        request_id: request.request_id,
        original: 0x0102_0304_0506_0708,
    };
    let answer = rseg(
        2,
        control(1, Opcode::AtomicResponse),
        QN_ATOMIC_RESPONSE,
        1,
        &response.to_bytes(),
    );
    d.send(S, 16, &answer);
    d.send(S, 16, &term);
    d.settle();
    assert!(d.rdmap_terminates(S).is_empty(), "no Terminate answers it");
    assert!(
        d.region_bytes(sink, 4096).iter().all(|&b| b == 0),
        "nothing written"
    );
    assert_eq!(
        d.comps
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect::<Vec<_>>(),
        [(5, Status::Flushed)]
    );
}

/// `reads_served` counts responses queued: a Read Request delivered with a later message
/// whose fault ends the stream in the same turn (a Send with Invalidate of an STag no stream
/// may invalidate) is never answered, and was counted served all the same (an independent
/// review).
#[test]
fn a_read_request_behind_a_fault_of_its_delivery_is_not_counted_served() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    d.posted_buffer(pd, 40);
    d.posted_buffer(pd, 41);
    let table = d.memory.region_table().clone();
    d.conn().use_regions(table);
    let (_, src) = d.region_with(pd, 4096, 0x1000, Access::REMOTE_READ);
    let request = ReadRequest {
        sink_stag: 0x99,
        sink_to: 0,
        size: 64,
        source_stag: src.stag.0,
        source_to: 0x1000,
    };
    // DDP-SSN 2 and 3 first, held for DDP-SSN 1: all three are delivered in one turn.
    let read = rseg(
        2,
        control(1, Opcode::ReadRequest),
        1,
        1,
        &request.to_bytes(),
    );
    d.send(S, 16, &read);
    d.send(S, 16, &rdmap_useg(3, true, 2, 0, send_inv_unknown(), b"x"));
    d.send(
        S,
        16,
        &rdmap_useg(1, true, 1, 0, [control(1, Opcode::Send), 0, 0, 0, 0], b"y"),
    );
    d.settle();
    assert_eq!(d.rdmap_terminates(S).len(), 1, "the fault ends the stream");
    assert_eq!(d.conn().stats().reads_served, 0);
}

/// RFC 5040 §5.4: a Read Request with a DDP-SSN after the peer's Terminate that arrived first
/// is delivered behind the Terminate in the same turn; it is not served: no Read Response
/// leaves, nothing is read.
#[test]
fn rfc5040_5_4_a_read_request_behind_the_peers_terminate_is_not_served() {
    let mut d = Duo::new(256);
    let pd = d.memory.alloc_pd();
    d.open_rdmap(S, pd);
    let table = d.memory.region_table().clone();
    d.conn().use_regions(table);
    let (_, src) = d.region_with(pd, 4096, 0x1000, Access::REMOTE_READ);
    let payload = ddpdk_control::rdmap::terminate_payload(
        RxError::Rdmap(RdmapError::OperationUnspecified),
        &ddpdk_dataplane::ddp::HeaderCopy::from_bytes(&[]),
        0,
        None,
    );
    let term = rseg(1, control(1, Opcode::Terminate), 2, 1, &payload);
    let request = ReadRequest {
        sink_stag: 0x99,
        sink_to: 0,
        size: 64,
        source_stag: src.stag.0,
        source_to: 0x1000,
    };
    let read = rseg(
        2,
        control(1, Opcode::ReadRequest),
        1,
        1,
        &request.to_bytes(),
    );
    d.send(S, 16, &read);
    d.send(S, 16, &term);
    d.settle();
    assert!(d
        .inds
        .iter()
        .any(|i| matches!(i, Indication::RdmapTerminate { .. })));
    assert_eq!(d.conn().stats().reads_served, 0);
    assert!(
        !d.raw_rx
            .iter()
            .any(|(s, p, x)| *s == S && *p == 16 && x.get(2).is_some_and(|c| c & 0x80 != 0)),
        "no Read Response"
    );
}
