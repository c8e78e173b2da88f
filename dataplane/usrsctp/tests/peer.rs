//! Two usrsctp endpoints in one process, packets shuttled between them by the test loop: what
//! usrsctp puts on the wire and reports, pinned for libusrsctp 0.9.5 (Debian 12).
#![allow(clippy::unwrap_used)]

use ddpdk_usrsctp::{Endpoint, Extensions, Message, Notification, Received, Stack};

const CLIENT_PORT: u16 = 5001;
const SERVER_PORT: u16 = 5002;

// Chunk types, RFC 9260 §3.2.
const DATA: u8 = 0;
const INIT: u8 = 1;
const INIT_ACK: u8 = 2;
const ABORT: u8 = 6;
const SHUTDOWN: u8 = 7;
const SHUTDOWN_ACK: u8 = 8;
const ERROR: u8 = 9;
const SHUTDOWN_COMPLETE: u8 = 14;

/// CRC32c of an SCTP packet with its checksum field taken as zero (RFC 9260 Appendix B),
/// computed by crc-fast rather than by usrsctp.
fn sctp_crc32c(packet: &[u8]) -> u32 {
    let mut p = packet.to_vec();
    p[8..12].fill(0);
    crc_fast::crc32_iscsi(&p)
}

/// Whether the checksum field holds the CRC32c, least significant byte first (RFC 9260 App. B).
fn crc_ok(packet: &[u8]) -> bool {
    packet.len() >= 12 && packet[8..12] == sctp_crc32c(packet).to_le_bytes()
}

/// (type, flags, whole chunk) of every chunk in a packet.
fn chunks(p: &[u8]) -> Vec<(u8, u8, &[u8])> {
    let mut out = vec![];
    let mut off = 12;
    while off + 4 <= p.len() {
        let len = usize::from(u16::from_be_bytes([p[off + 2], p[off + 3]]));
        assert!(
            len >= 4 && off + len <= p.len(),
            "malformed chunk in {p:02x?}"
        );
        out.push((p[off], p[off + 1], &p[off..off + len]));
        off += (len + 3) & !3;
    }
    out
}

/// (type, value) of the parameters of an INIT or INIT-ACK chunk.
fn init_params(chunk: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = vec![];
    let mut off = 20; // chunk header, tag, a_rwnd, streams, initial TSN
    while off + 4 <= chunk.len() {
        let kind = u16::from_be_bytes([chunk[off], chunk[off + 1]]);
        let len = usize::from(u16::from_be_bytes([chunk[off + 2], chunk[off + 3]]));
        assert!(len >= 4 && off + len <= chunk.len());
        out.push((kind, &chunk[off + 4..off + len]));
        off += (len + 3) & !3;
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    ToServer,
    ToClient,
}

/// A client and a server endpoint and everything that passed between them.
struct Pair {
    client: Endpoint,
    server: Endpoint,
    /// Every packet in the order it was delivered.
    wire: Vec<(Dir, Vec<u8>)>,
    client_rx: Vec<Received>,
    server_rx: Vec<Received>,
    /// Declared last so the endpoints are dropped while the lock is still held.
    stack: Stack,
}

impl Pair {
    /// Server listening, client's INIT queued (not delivered yet).
    fn start(mut stack: Stack) -> Pair {
        let mut server = stack.endpoint(SERVER_PORT).unwrap();
        server.listen().unwrap();
        let mut client = stack.endpoint(CLIENT_PORT).unwrap();
        client.connect(SERVER_PORT).unwrap();
        Pair {
            client,
            server,
            wire: vec![],
            client_rx: vec![],
            server_rx: vec![],
            stack,
        }
    }

    /// Association up on both sides, notifications of the handshake consumed.
    fn established(stack: Stack) -> Pair {
        let mut pair = Pair::start(stack);
        assert!(
            pair.run_until(1000, |p| p.both_up()),
            "no association: {:?}",
            pair.events()
        );
        pair.client_rx.clear();
        pair.server_rx.clear();
        pair
    }

    /// Delivers packets both ways until neither side has anything to send, then reads both
    /// sides. Every packet must carry a correct CRC32c.
    fn pump(&mut self) {
        loop {
            let to_server = self.client.take_output();
            let to_client = self.server.take_output();
            if to_server.is_empty() && to_client.is_empty() {
                break;
            }
            for p in to_server {
                assert!(crc_ok(&p), "bad CRC32c from client: {p:02x?}");
                self.server.input(&p);
                self.wire.push((Dir::ToServer, p));
            }
            for p in to_client {
                assert!(crc_ok(&p), "bad CRC32c from server: {p:02x?}");
                self.client.input(&p);
                self.wire.push((Dir::ToClient, p));
            }
        }
        while let Some(r) = self.client.recv() {
            self.client_rx.push(r);
        }
        while let Some(r) = self.server.recv() {
            self.server_rx.push(r);
        }
    }

    /// Pumps, advancing virtual time 10 ms whenever nothing is in flight, until `done` or
    /// `max_ms` of virtual time.
    fn run_until(&mut self, max_ms: u32, done: impl Fn(&Pair) -> bool) -> bool {
        let mut elapsed = 0;
        loop {
            self.pump();
            if done(self) {
                return true;
            }
            if elapsed >= max_ms {
                return false;
            }
            self.stack.advance(10);
            elapsed += 10;
        }
    }

    fn both_up(&self) -> bool {
        let up = |rx: &[Received]| {
            rx.iter()
                .any(|r| matches!(r, Received::Notification(Notification::CommUp { .. })))
        };
        up(&self.client_rx) && up(&self.server_rx)
    }

    fn events(&self) -> (&[Received], &[Received]) {
        (&self.client_rx, &self.server_rx)
    }

    /// Chunk types on the wire from packet `from` on, in order, with direction.
    fn chunk_types(&self, from: usize) -> Vec<(Dir, u8)> {
        self.wire[from..]
            .iter()
            .flat_map(|(d, p)| chunks(p).into_iter().map(move |c| (*d, c.0)))
            .collect()
    }
}

fn notifications(rx: &[Received]) -> Vec<Notification> {
    rx.iter()
        .filter_map(|r| match r {
            Received::Notification(n) => Some(n.clone()),
            Received::Message(_) => None,
        })
        .collect()
}

#[test]
fn association_comes_up_with_adaptation_indication() {
    let mut pair = Pair::start(Stack::lock());
    assert!(pair.run_until(1000, |p| p.both_up()), "{:?}", pair.events());

    // The client's first packet is a bare INIT from 5001 to 5002 with verification tag 0.
    let (dir, init) = &pair.wire[0];
    assert_eq!(*dir, Dir::ToServer);
    assert_eq!(init[12], INIT, "chunk type at byte 12");
    assert_eq!(init[..2], CLIENT_PORT.to_be_bytes());
    assert_eq!(init[2..4], SERVER_PORT.to_be_bytes());
    assert_eq!(init[4..8], [0; 4]);
    assert_eq!(init[8..12], sctp_crc32c(init).to_le_bytes());
    assert_eq!(chunks(init).len(), 1);
    // Adaptation Layer Indication (0xC006) = 1, big-endian on the wire.
    let params = init_params(chunks(init)[0].2);
    assert!(params.contains(&(0xC006, &[0, 0, 0, 1][..])), "{params:x?}");

    // The handshake: INIT, INIT-ACK, COOKIE-ECHO, COOKIE-ACK, nothing else.
    assert_eq!(
        pair.chunk_types(0),
        [
            (Dir::ToServer, INIT),
            (Dir::ToClient, INIT_ACK),
            (Dir::ToServer, 10),
            (Dir::ToClient, 11)
        ]
    );
    // usrsctp's default stream counts (10 outbound, up to 2048 inbound) meet at 10 both ways;
    // COMM_UP comes before the adaptation indication.
    let expected = [
        Notification::CommUp {
            inbound_streams: 10,
            outbound_streams: 10,
        },
        Notification::AdaptationIndication(1),
    ];
    assert_eq!(notifications(&pair.client_rx), expected);
    assert_eq!(notifications(&pair.server_rx), expected);
}

#[test]
fn default_and_minimal_init_profiles() {
    let mut stack = Stack::lock();
    // Sysctls set by an earlier test were reset by lock().
    let defaults = Extensions {
        ecn: true,
        partial_reliability: true,
        auth: true,
        asconf: true,
        reconfig: true,
        nr_sack: false,
        pktdrop: false,
    };
    assert_eq!(stack.extensions(), defaults);
    let param_types = |stack: &mut Stack| {
        let mut ep = stack.endpoint(CLIENT_PORT).unwrap();
        ep.connect(SERVER_PORT).unwrap();
        let out = ep.take_output();
        assert_eq!(out.len(), 1);
        init_params(chunks(&out[0])[0].2)
            .iter()
            .map(|(t, _)| *t)
            .collect::<Vec<_>>()
    };
    // Adaptation, ECN, Forward-TSN, Supported Extensions, Random, HMAC-Algo, Chunk List.
    assert_eq!(
        param_types(&mut stack),
        [0xC006, 0x8000, 0xC000, 0x8008, 0x8002, 0x8004, 0x8003]
    );
    stack.set_extensions(Extensions::NONE).unwrap();
    assert_eq!(param_types(&mut stack), [0xC006]);
    assert!(stack
        .set_extensions(Extensions {
            asconf: true,
            ..Extensions::NONE
        })
        .is_err());

    // The stream sysctls apply to endpoints created afterwards.
    stack.set_streams(5, 2048).unwrap();
    let mut pair = Pair::start(stack);
    assert!(pair.run_until(1000, |p| p.both_up()));
    assert_eq!(
        notifications(&pair.client_rx)[0],
        Notification::CommUp {
            inbound_streams: 5,
            outbound_streams: 5
        }
    );
}

#[test]
fn crc32c_checked_on_input_and_replies_emitted_synchronously() {
    let mut pair = Pair::start(Stack::lock());
    let init = pair.client.take_output().remove(0);
    let mut corrupt = init.clone();
    corrupt[8] ^= 1;
    pair.server.input(&corrupt);
    assert!(
        pair.server.take_output().is_empty(),
        "INIT with bad CRC32c answered"
    );
    // conn_output runs inside usrsctp_conninput: the INIT-ACK is queued when input returns.
    pair.server.input(&init);
    let reply = pair.server.take_output();
    assert_eq!(reply.len(), 1);
    assert_eq!(reply[0][12], INIT_ACK);
    assert!(crc_ok(&reply[0]));
}

#[test]
fn unordered_messages_both_ways() {
    let mut pair = Pair::established(Stack::lock());
    let first_data = pair.wire.len();
    // Streams 0..3, PPIDs 16 and 17; the 4000-byte one is fragmented into several DATA chunks.
    let plan: Vec<(u16, u32, Vec<u8>)> = (0..4u16)
        .map(|sid| {
            let len = if sid == 3 {
                4000
            } else {
                10 + usize::from(sid)
            };
            (
                sid,
                16 + u32::from(sid % 2),
                (0..len).map(|i| (i * 7 + usize::from(sid)) as u8).collect(),
            )
        })
        .collect();
    for (sid, ppid, data) in &plan {
        assert_eq!(
            pair.client.send(*sid, *ppid, true, data).unwrap(),
            data.len()
        );
        let back: Vec<u8> = data.iter().map(|b| !b).collect();
        assert_eq!(
            pair.server.send(*sid, *ppid, true, &back).unwrap(),
            back.len()
        );
    }
    let want = plan.len();
    assert!(pair.run_until(1000, |p| p.client_rx.len() == want
        && p.server_rx.len() == want));

    let sorted = |rx: &[Received]| {
        let mut m: Vec<Message> = rx
            .iter()
            .map(|r| match r {
                Received::Message(m) => m.clone(),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        m.sort_by_key(|m| m.stream);
        m
    };
    let at_server = sorted(&pair.server_rx);
    let at_client = sorted(&pair.client_rx);
    for (i, (sid, ppid, data)) in plan.iter().enumerate() {
        for (m, bytes) in [
            (&at_server[i], data.clone()),
            (&at_client[i], data.iter().map(|b| !b).collect()),
        ] {
            assert_eq!((m.stream, m.ppid, m.unordered), (*sid, *ppid, true));
            assert_eq!(m.data, bytes);
        }
    }

    // On the wire: U bit set, PPID big-endian; the TSN recv() reports is the (last) DATA
    // chunk's TSN, in host order.
    let mut tsns = vec![];
    let mut fragments = 0;
    for (_, p) in &pair.wire[first_data..] {
        for (kind, flags, chunk) in chunks(p) {
            if kind == DATA {
                assert_eq!(flags & 0x04, 0x04, "U bit");
                let ppid = u32::from_be_bytes(chunk[12..16].try_into().unwrap());
                assert!(ppid == 16 || ppid == 17, "PPID {ppid:#x} on the wire");
                tsns.push(u32::from_be_bytes(chunk[4..8].try_into().unwrap()));
                fragments += usize::from(flags & 0x03 != 0x03);
            }
        }
    }
    assert!(
        fragments >= 2 * 3,
        "the 4000-byte messages were not fragmented"
    );
    for m in at_server.iter().chain(&at_client) {
        assert!(tsns.contains(&m.tsn), "TSN {} not on the wire", m.tsn);
    }
}

#[test]
fn graceful_shutdown() {
    let mut pair = Pair::established(Stack::lock());
    let start = pair.wire.len();
    pair.client.shutdown().unwrap();
    let complete = |rx: &[Received]| notifications(rx).contains(&Notification::ShutdownComplete);
    assert!(pair.run_until(1000, |p| complete(&p.client_rx) && complete(&p.server_rx)));
    assert_eq!(
        pair.chunk_types(start),
        [
            (Dir::ToServer, SHUTDOWN),
            (Dir::ToClient, SHUTDOWN_ACK),
            (Dir::ToServer, SHUTDOWN_COMPLETE)
        ]
    );
    // The side that shut down only sees SHUTDOWN_COMP; its peer first sees the SHUTDOWN.
    assert_eq!(
        notifications(&pair.client_rx),
        [Notification::ShutdownComplete]
    );
    assert_eq!(
        notifications(&pair.server_rx),
        [Notification::ShutdownEvent, Notification::ShutdownComplete]
    );
    assert!(pair.client.recv().is_none());
    assert!(pair.server.send(0, 16, false, b"late").is_err());
}

#[test]
fn abort() {
    let mut pair = Pair::established(Stack::lock());
    let start = pair.wire.len();
    pair.server.abort().unwrap();
    let lost = |rx: &[Received]| {
        notifications(rx)
            .iter()
            .any(|n| matches!(n, Notification::CommLost { .. }))
    };
    assert!(pair.run_until(1000, |p| lost(&p.client_rx) && lost(&p.server_rx)));
    // One ABORT carrying a User-Initiated Abort cause (12) with no upper-layer reason.
    assert_eq!(pair.chunk_types(start), [(Dir::ToClient, ABORT)]);
    let (_, packet) = &pair.wire[start];
    assert_eq!(chunks(packet)[0].2, [ABORT, 0, 0, 8, 0, 12, 0, 4]);
    // The peer's COMM_LOST carries the cause code, the aborting side's none.
    assert_eq!(
        notifications(&pair.client_rx),
        [Notification::CommLost { error: 12 }]
    );
    assert_eq!(
        notifications(&pair.server_rx),
        [Notification::CommLost { error: 0 }]
    );
    // usrsctp fails sends on a one-to-one socket whose association is gone with ENOENT.
    let err = pair.client.send(0, 16, false, b"late").unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err:?}");
}

#[test]
fn remote_error_notification() {
    let mut pair = Pair::established(Stack::lock());
    // An OPERATION ERROR with an Invalid Stream Identifier cause (1) for stream 7, as the
    // client would send it: the server's verification tag is in every later client packet.
    let (_, cookie_echo) = &pair.wire[2];
    let mut p = vec![];
    p.extend_from_slice(&CLIENT_PORT.to_be_bytes());
    p.extend_from_slice(&SERVER_PORT.to_be_bytes());
    p.extend_from_slice(&cookie_echo[4..8]);
    p.extend_from_slice(&[0; 4]);
    let chunk = [ERROR, 0, 0, 12, 0, 1, 0, 8, 0, 7, 0, 0];
    p.extend_from_slice(&chunk);
    let crc = sctp_crc32c(&p);
    p[8..12].copy_from_slice(&crc.to_le_bytes());
    pair.server.input(&p);
    pair.pump();
    let got = notifications(&pair.server_rx);
    assert_eq!(got.len(), 1, "{got:?}");
    let Notification::RemoteError { error, data } = &got[0] else {
        panic!("{got:?}");
    };
    // Unlike RFC 6458 §6.1.3 (network byte order), usrsctp reports the cause code in host
    // byte order; sre_data is the whole ERROR chunk, header included.
    assert_eq!(*error, 1);
    assert_eq!(data[..], chunk);
}

#[test]
fn init_retransmitted_on_virtual_time_then_cant_start() {
    let mut stack = Stack::lock();
    stack.set_rto(100, 100, 400).unwrap();
    stack.set_max_retransmits(2, 10, 5).unwrap();
    let mut client = stack.endpoint(CLIENT_PORT).unwrap();
    client.connect(SERVER_PORT).unwrap();
    // INIT at t=0, again after RTO.Initial (100 ms) and a doubled RTO (200 ms); after the
    // last RTO (400 ms) usrsctp gives up: an ABORT with the T bit (the peer's tag is unknown)
    // and CANT_STR_ASSOC.
    let mut sent = vec![];
    let mut events = vec![];
    for t in (0..=2000).step_by(10) {
        for p in client.take_output() {
            assert!(crc_ok(&p));
            sent.push((t, p[12], p[13]));
        }
        while let Some(r) = client.recv() {
            events.push((t, r));
        }
        stack.advance(10);
    }
    assert_eq!(
        sent,
        [
            (0, INIT, 0),
            (100, INIT, 0),
            (300, INIT, 0),
            (700, ABORT, 0x01)
        ]
    );
    assert_eq!(
        events,
        [(
            700,
            Received::Notification(Notification::CantStartAssoc { error: 0 })
        )]
    );
    drop(client);
}
