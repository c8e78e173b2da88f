//! Interoperability of our sans-IO SCTP engine (`ddpdk_dataplane::sctp`) with usrsctp
//! (libusrsctp 0.9.5, Debian 12): one side each, packets shuttled by `interop/driver.rs` in one
//! virtual clock, optionally over a lossy link. Every packet both ways is CRC32c-checked and
//! parsed by our wire module; each test names the protocol rule it checks.
//!
//! `INTEROP_TRACE=1 cargo test -p ddpdk-usrsctp --test interop -- <name> --nocapture` prints
//! every packet as it is sent; a failed assertion prints the whole exchange.
//!
//! `many_lossy_seeds` is `#[ignore]`d (long, on demand with `INTEROP_SEEDS`).
//! `retransmitted_shutdown_is_answered_at_once` (RFC 9260 §9.2) and
//! `zero_window_longer_than_max_retrans` (§6.1 rule A) pin two engine bugs these tests found,
//! since fixed. usrsctp behaviours the
//! driver works around are described where it does so (`interop/driver.rs`: its wall clock,
//! Path.Max.Retrans; `lossy_run`: RTT samples across retransmitted handshakes).

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

#[path = "interop/driver.rs"]
mod driver;

use std::time::Duration;

use ddpdk_dataplane::sctp::{CloseReason, Config, Event, SendError, State, ADAPTATION_REASON};
use ddpdk_dataplane::wire::sctp::{
    CauseRepr, ChunkRepr, ChunkType, DataRepr, InitRepr, Packet, ParamRepr,
};
use ddpdk_usrsctp::{Extensions, Notification, Received};
use driver::{
    chunk_types, fast_stack, our_config, Dir, Interop, Open, Rng, Setup, WirePacket, USRSCTP_MTU,
};

// Chunk types (RFC 9260 §3.2).
const DATA: u8 = 0;
const INIT: u8 = 1;
const INIT_ACK: u8 = 2;
const SACK: u8 = 3;
const HEARTBEAT: u8 = 4;
const HEARTBEAT_ACK: u8 = 5;
const ABORT: u8 = 6;
const SHUTDOWN: u8 = 7;
const SHUTDOWN_ACK: u8 = 8;
const ERROR: u8 = 9;
const COOKIE_ECHO: u8 = 10;
const COOKIE_ACK: u8 = 11;
const SHUTDOWN_COMPLETE: u8 = 14;

/// Error cause codes (RFC 9260 §3.3.10).
const CAUSE_UNRECOGNIZED_PARAMETERS: u16 = 8;
const CAUSE_USER_INITIATED_ABORT: u16 = 12;
const CAUSE_PROTOCOL_VIOLATION: u16 = 13;

/// Parameter types (RFC 9260 §3.3.2.1, RFC 3758, RFC 4895, RFC 5061).
const PARAM_UNRECOGNIZED: u16 = 8;
const PARAM_ECN: u16 = 0x8000;
const PARAM_FORWARD_TSN: u16 = 0xC000;
const PARAM_RANDOM: u16 = 0x8002;
const PARAM_CHUNKS: u16 = 0x8003;
const PARAM_HMAC_ALGO: u16 = 0x8004;
const PARAM_SUPPORTED_EXTENSIONS: u16 = 0x8008;
const PARAM_ADAPTATION: u16 = 0xC006;

/// usrsctp's default extensions (`Stack::lock` restores them; `tests/peer.rs` pins them):
/// INIT carries ECN, Forward-TSN, Supported Extensions, RANDOM, HMAC-ALGO and CHUNKS.
const DEFAULT_EXTENSIONS: Extensions = Extensions {
    ecn: true,
    partial_reliability: true,
    auth: true,
    asconf: true,
    reconfig: true,
    nr_sack: false,
    pktdrop: false,
};

/// DATA flags: U (unordered), B (beginning), E (ending) (RFC 9260 §3.3.1).
const UBE: u8 = 0x07;
/// The I bit of a DATA chunk (RFC 7053 §4.1).
const SACK_IMMEDIATELY: u8 = 0x08;

/// Streams our association negotiates with usrsctp: our 8 both ways (RFC 5043 §8), below
/// usrsctp's 10 outbound / 2048 inbound.
const STREAMS: u16 = 8;
/// Largest message both sides carry unfragmented: usrsctp's AF_CONN MTU minus the common
/// header and the DATA chunk header.
const MAX_MESSAGE: usize = USRSCTP_MTU - 12 - 16;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// The packets sent in one direction, with their index on the wire.
fn sent(io: &Interop, dir: Dir) -> impl Iterator<Item = (usize, &WirePacket)> {
    io.wire()
        .iter()
        .enumerate()
        .filter(move |(_, p)| p.dir == dir)
}

/// The first packet in `dir` whose first chunk has type `kind`.
fn first_with(io: &Interop, dir: Dir, kind: u8) -> &WirePacket {
    first_with_from(io, 0, dir, kind)
}

/// The first packet in `dir` from wire index `from` on whose first chunk has type `kind`.
fn first_with_from(io: &Interop, from: usize, dir: Dir, kind: u8) -> &WirePacket {
    sent(io, dir)
        .filter(|(i, _)| *i >= from)
        .map(|(_, p)| p)
        .find(|p| p.chunk_types().first() == Some(&kind))
        .unwrap_or_else(|| panic!("no chunk type {kind} sent {dir:?}: {}", trace(io)))
}

/// The wire as one line per packet, for failure messages.
fn trace(io: &Interop) -> String {
    io.wire()
        .iter()
        .map(|p| {
            format!(
                "\n  {:>6} ms {:?} {}{}",
                p.at_ms,
                p.dir,
                driver::describe(&p.bytes),
                if p.lost { " LOST" } else { "" }
            )
        })
        .collect()
}

/// Chunk types in order from packet `from` on, lost packets left out.
fn chunk_flow(io: &Interop, from: usize) -> Vec<(Dir, u8)> {
    io.wire()[from..]
        .iter()
        .filter(|p| !p.lost)
        .flat_map(|p| p.chunk_types().into_iter().map(move |t| (p.dir, t)))
        .collect()
}

/// The INIT or INIT ACK of a packet whose only chunk it is.
fn init_of(p: &WirePacket) -> InitRepr<'_> {
    match p.chunks().as_slice() {
        [ChunkRepr::Init(i)] => *i,
        [ChunkRepr::InitAck(a)] => a.0,
        other => panic!("not a lone INIT / INIT ACK: {other:?}"),
    }
}

/// Parameter types of an INIT or INIT ACK, in order.
fn param_types(init: &InitRepr<'_>) -> Vec<u16> {
    init.params
        .iter()
        .map(|p| u16::from(p.param_type()))
        .collect()
}

/// Types of the parameters reported inside Unrecognized Parameter (type 8) parameters, each
/// checked to be a whole TLV.
fn unrecognized_reported(init: &InitRepr<'_>) -> Vec<u16> {
    let mut out = vec![];
    for p in init.params.iter() {
        if let ParamRepr::UnrecognizedParameter(bytes) = p {
            assert!(bytes.len() >= 4, "{bytes:02x?}");
            let len = usize::from(u16::from_be_bytes([bytes[2], bytes[3]]));
            assert_eq!(len, bytes.len(), "not one whole parameter: {bytes:02x?}");
            out.push(u16::from_be_bytes([bytes[0], bytes[1]]));
        }
    }
    out
}

/// The first cause of the only ABORT chunk of a packet: (T bit, cause code, cause info).
fn abort_of(p: &WirePacket) -> (bool, Option<u16>, Vec<u8>) {
    match p.chunks().as_slice() {
        [ChunkRepr::Abort(a)] => {
            let first = a.causes.iter().next();
            let info = match first {
                Some(CauseRepr::UserInitiatedAbort { reason }) => reason.to_vec(),
                Some(CauseRepr::ProtocolViolation { info }) => info.to_vec(),
                _ => vec![],
            };
            (a.t_bit, first.map(|c| u16::from(c.code())), info)
        }
        other => panic!("not a lone ABORT: {other:?}"),
    }
}

/// Every DATA chunk sent in `dir` (lost copies included): raw flags and the parsed chunk.
fn data_chunks(io: &Interop, dir: Dir) -> Vec<(u8, DataRepr<'_>)> {
    let mut out = vec![];
    for (_, p) in sent(io, dir) {
        let pkt = Packet::new_checked(&p.bytes[..]).unwrap();
        for c in pkt.chunks_ref() {
            let c = c.unwrap();
            if c.chunk_type() == ChunkType::Data {
                let flags = c.flags();
                let ChunkRepr::Data(d) = ChunkRepr::parse(&c).unwrap() else {
                    unreachable!()
                };
                out.push((flags, d));
            }
        }
    }
    out
}

/// A payload that identifies its message where it can (index in the first 4 bytes) and is
/// otherwise pseudo-random.
fn payload(rng: &mut Rng, index: u32, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
    let n = len.min(4);
    v[..n].copy_from_slice(&index.to_be_bytes()[..n]);
    v
}

/// (stream, ppid, data), sorted: the multiset of messages.
type Messages = Vec<(u16, u32, Vec<u8>)>;

fn sorted(mut m: Messages) -> Messages {
    m.sort();
    m
}

fn our_received(io: &Interop) -> Messages {
    sorted(
        io.our_rx
            .iter()
            .map(|m| (m.stream, m.ppid, m.data.clone()))
            .collect(),
    )
}

fn usrsctp_received(io: &Interop) -> Messages {
    sorted(
        io.us_messages()
            .into_iter()
            .map(|m| (m.stream, m.ppid, m.data))
            .collect(),
    )
}

fn us_message_count(io: &Interop) -> usize {
    io.us_rx
        .iter()
        .filter(|r| matches!(r, Received::Message(_)))
        .count()
}

fn comm_lost(n: &Notification) -> bool {
    matches!(n, Notification::CommLost { .. })
}

/// The messages of the `messages` tests: streams 0..4, PPIDs 16 (DDP segment) and 17 (DDP
/// stream session control), sizes from 1 byte to the largest unfragmented message.
fn message_plan(rng: &mut Rng, first_index: u32) -> Messages {
    let sizes = [
        1,
        2,
        3,
        4,
        5,
        7,
        8,
        100,
        515,
        516,
        517,
        1000,
        MAX_MESSAGE - 1,
        MAX_MESSAGE,
    ];
    let mut plan = vec![];
    let mut index = first_index;
    for stream in 0..4u16 {
        for ppid in [16u32, 17] {
            for &len in &sizes {
                plan.push((stream, ppid, payload(rng, index, len)));
                index += 1;
            }
        }
    }
    plan
}

// ---------------------------------------------------------------------------------------------
// 1. Our engine active, usrsctp passive
// ---------------------------------------------------------------------------------------------

/// RFC 5043 §5.1, §11.1: the association comes up with the Adaptation Layer Indication DDP (1)
/// seen by both sides; RFC 5043 §8: our INIT asks for as many streams as it accepts (OS =
/// MIS). With usrsctp's default profile its INIT ACK carries Forward-TSN-Supported (0xC000),
/// which we do not implement: RFC 9260 §3.2.1 (upper bits 11, "skip and report") has us
/// report it in an ERROR bundled with the COOKIE ECHO.
fn ours_active_handshake(ext: Extensions) {
    let mut stack = fast_stack();
    assert_eq!(stack.extensions(), DEFAULT_EXTENSIONS);
    stack.set_extensions(ext).unwrap();
    let mut io = Interop::new(stack, our_config(0), Setup::ours_active()).unwrap();
    assert!(
        io.run_until(5_000, |io| io.our_connected()
            && io.us_saw(|n| matches!(n, Notification::AdaptationIndication(_)))),
        "{}",
        trace(&io)
    );

    // Our INIT: tag 0 in the common header, alone, OS = MIS, 0xC006 = 1.
    let init_pkt = &io.wire()[0];
    assert_eq!((init_pkt.dir, init_pkt.vtag()), (Dir::ToUsrsctp, 0));
    let init = init_of(init_pkt);
    assert_eq!(init.outbound_streams, init.inbound_streams, "RFC 5043 §8");
    assert_eq!(init.outbound_streams, STREAMS);
    assert_eq!(
        init.params.iter().collect::<Vec<_>>(),
        [ParamRepr::AdaptationLayerIndication(1)]
    );

    // usrsctp's INIT ACK, and what we reported of it with the COOKIE ECHO.
    let ack = init_of(first_with(&io, Dir::ToOurs, INIT_ACK));
    let ack_types = param_types(&ack);
    assert!(ack_types.contains(&PARAM_ADAPTATION), "{ack_types:x?}");
    let echo = first_with(&io, Dir::ToUsrsctp, COOKIE_ECHO);
    assert_eq!(echo.vtag(), ack.initiate_tag);
    let reported: Vec<u16> = echo
        .chunks()
        .iter()
        .filter_map(|c| match c {
            ChunkRepr::Error(e) => Some(e.causes),
            _ => None,
        })
        .flat_map(|causes| causes.iter())
        .map(|cause| match cause {
            CauseRepr::UnrecognizedParameters { params } => {
                assert_eq!(
                    params.len(),
                    4,
                    "one whole Forward-TSN-Supported: {params:02x?}"
                );
                u16::from_be_bytes([params[0], params[1]])
            }
            other => panic!("unexpected cause {other:?}"),
        })
        .collect();
    let expect_reported: &[u16] = if ext.partial_reliability {
        assert!(ack_types.contains(&PARAM_FORWARD_TSN), "{ack_types:x?}");
        &[PARAM_FORWARD_TSN]
    } else {
        let mut t = ack_types.clone();
        t.sort_unstable();
        // State Cookie (7) and the adaptation indication only.
        assert_eq!(t, [7, PARAM_ADAPTATION], "minimal INIT ACK");
        &[]
    };
    assert_eq!(reported, expect_reported, "{}", trace(&io));
    // INIT, INIT ACK, COOKIE ECHO (with the ERROR if any), COOKIE ACK: nothing else.
    let mut flow = vec![
        (Dir::ToUsrsctp, INIT),
        (Dir::ToOurs, INIT_ACK),
        (Dir::ToUsrsctp, COOKIE_ECHO),
    ];
    if ext.partial_reliability {
        flow.push((Dir::ToUsrsctp, ERROR));
    }
    flow.push((Dir::ToOurs, COOKIE_ACK));
    assert_eq!(chunk_flow(&io, 0), flow, "{}", trace(&io));

    // Both sides saw the other's indication.
    assert_eq!(
        io.our_events,
        [Event::Connected {
            streams: STREAMS,
            peer_adaptation: 1
        }]
    );
    let mut want = vec![
        Notification::CommUp {
            inbound_streams: STREAMS,
            outbound_streams: STREAMS,
        },
        Notification::AdaptationIndication(1),
    ];
    if ext.partial_reliability {
        // usrsctp hands the ERROR up as a REMOTE_ERROR: cause 8, the whole ERROR chunk.
        want.push(Notification::RemoteError {
            error: CAUSE_UNRECOGNIZED_PARAMETERS,
            data: vec![
                ERROR, 0, 0, 12, 0, 8, 0, 8, 0xC0, 0x00, 0, 4, //
            ],
        });
    }
    assert_eq!(io.us_notifications(), want);
    assert_eq!(io.our_assoc().state(), State::Established);
    assert_eq!(io.our_assoc().streams(), STREAMS);
}

#[test]
fn ours_active_usrsctp_passive_default_profile() {
    ours_active_handshake(DEFAULT_EXTENSIONS);
}

#[test]
fn ours_active_usrsctp_passive_minimal_profile() {
    ours_active_handshake(Extensions::NONE);
}

// ---------------------------------------------------------------------------------------------
// 2. usrsctp active, our endpoint passive
// ---------------------------------------------------------------------------------------------

/// Our endpoint answers usrsctp's INIT statelessly (RFC 9260 §5.1.3) and accepts its COOKIE
/// ECHO; RFC 5043 §5.1/§11.1 indication seen both ways, §8 OS = MIS in our INIT ACK.
///
/// RFC 9260 §3.2.1: of the INIT's parameters we do not implement, those whose type has the
/// upper bits 11 ("skip and report") come back inside Unrecognized Parameter (type 8)
/// parameters of the INIT ACK, whole; those with 10 ("skip silently") do not. usrsctp's
/// default INIT has exactly one 11 parameter, Forward-TSN-Supported (0xC000, which we parse
/// but treat as unrecognized since we have no PR-SCTP), and five 10 ones (ECN 0x8000, RANDOM
/// 0x8002, CHUNKS 0x8003, HMAC-ALGO 0x8004, Supported Extensions 0x8008). The minimal profile
/// has only 0xC006, which we implement: nothing is reported.
fn usrsctp_active_handshake(ext: Extensions) {
    let mut stack = fast_stack();
    stack.set_extensions(ext).unwrap();
    let mut io = Interop::new(stack, our_config(0), Setup::usrsctp_active()).unwrap();
    assert!(
        io.run_until(5_000, |io| io.our_connected()
            && io.us_saw(|n| matches!(n, Notification::AdaptationIndication(_)))),
        "{}",
        trace(&io)
    );

    let init_pkt = &io.wire()[0];
    assert_eq!(init_pkt.dir, Dir::ToOurs);
    let init = init_of(init_pkt);
    let mut init_types = param_types(&init);
    init_types.sort_unstable();
    let mut expect_init = if ext.partial_reliability {
        vec![
            PARAM_ADAPTATION,
            PARAM_ECN,
            PARAM_FORWARD_TSN,
            PARAM_RANDOM,
            PARAM_CHUNKS,
            PARAM_HMAC_ALGO,
            PARAM_SUPPORTED_EXTENSIONS,
        ]
    } else {
        vec![PARAM_ADAPTATION]
    };
    expect_init.sort_unstable();
    assert_eq!(init_types, expect_init, "usrsctp's INIT profile changed");

    // Our INIT ACK: to usrsctp's tag, OS = MIS, 0xC006 = 1, a State Cookie, and the reports.
    let ack_pkt = &io.wire()[1];
    assert_eq!(ack_pkt.dir, Dir::ToUsrsctp);
    assert_eq!(ack_pkt.vtag(), init.initiate_tag);
    let ack = init_of(ack_pkt);
    assert_eq!(ack.outbound_streams, ack.inbound_streams, "RFC 5043 §8");
    assert_eq!(ack.outbound_streams, STREAMS);
    assert!(ack
        .params
        .iter()
        .any(|p| p == ParamRepr::AdaptationLayerIndication(1)));
    assert!(ack
        .params
        .iter()
        .any(|p| matches!(p, ParamRepr::StateCookie(_))));
    let reported = unrecognized_reported(&ack);
    if ext.partial_reliability {
        assert_eq!(reported, [PARAM_FORWARD_TSN], "RFC 9260 §3.2.1");
        for silent in [
            PARAM_ECN,
            PARAM_RANDOM,
            PARAM_CHUNKS,
            PARAM_HMAC_ALGO,
            PARAM_SUPPORTED_EXTENSIONS,
        ] {
            assert!(!reported.contains(&silent), "{silent:#x} reported");
        }
    } else {
        assert!(
            !param_types(&ack).contains(&PARAM_UNRECOGNIZED),
            "Unrecognized Parameter in answer to a minimal INIT: {:x?}",
            param_types(&ack)
        );
    }
    assert_eq!(
        chunk_flow(&io, 0),
        [
            (Dir::ToOurs, INIT),
            (Dir::ToUsrsctp, INIT_ACK),
            (Dir::ToOurs, COOKIE_ECHO),
            (Dir::ToUsrsctp, COOKIE_ACK)
        ],
        "{}",
        trace(&io)
    );

    assert_eq!(
        io.our_events,
        [Event::Connected {
            streams: STREAMS,
            peer_adaptation: 1
        }]
    );
    assert_eq!(
        io.us_notifications(),
        [
            Notification::CommUp {
                inbound_streams: STREAMS,
                outbound_streams: STREAMS
            },
            Notification::AdaptationIndication(1)
        ]
    );
    let st = *io.ours.stats();
    assert_eq!(
        (
            st.inits,
            st.init_acks_out,
            st.cookies_accepted,
            st.bad_cookies
        ),
        (1, 1, 1, 0)
    );
    assert_eq!(io.our_assoc().state(), State::Established);
}

#[test]
fn usrsctp_active_ours_passive_default_profile() {
    usrsctp_active_handshake(DEFAULT_EXTENSIONS);
}

#[test]
fn usrsctp_active_ours_passive_minimal_profile() {
    usrsctp_active_handshake(Extensions::NONE);
}

// ---------------------------------------------------------------------------------------------
// 3. Messages
// ---------------------------------------------------------------------------------------------

/// Checks that each side received exactly `to_ours` / `to_usrsctp` (as multisets: stream,
/// PPID and every byte), and the DATA chunks on the wire: ours are U|B|E with nothing else
/// (RFC 5043 §9 no fragmentation, §10 unordered) and perhaps I (RFC 7053: the last chunk before
/// our queue runs dry asks for an immediate SACK, which usrsctp honours), usrsctp's are unordered and
/// unfragmented (if it had fragmented, our side would have aborted with a Protocol Violation).
/// The TSN each side reports is that of a DATA chunk carrying exactly that message.
fn check_transfer(io: &Interop, to_ours: &Messages, to_usrsctp: &Messages) {
    assert_eq!(our_received(io), sorted(to_ours.clone()), "usrsctp -> ours");
    assert_eq!(
        usrsctp_received(io),
        sorted(to_usrsctp.clone()),
        "ours -> usrsctp"
    );
    let ours_sent = data_chunks(io, Dir::ToUsrsctp);
    for (flags, d) in &ours_sent {
        assert_eq!(
            *flags & !SACK_IMMEDIATELY,
            UBE,
            "our DATA flags, TSN {}",
            d.tsn
        );
        assert!(usize::from(d.stream_id) < 4 && (d.ppid == 16 || d.ppid == 17));
    }
    let theirs = data_chunks(io, Dir::ToOurs);
    for (flags, d) in &theirs {
        assert_eq!(
            flags & UBE,
            UBE,
            "usrsctp fragmented or ordered, TSN {}",
            d.tsn
        );
    }
    for m in io.us_messages() {
        assert!(m.unordered, "usrsctp saw an ordered message: {m:?}");
        assert!(
            ours_sent
                .iter()
                .any(|(_, d)| d.tsn == m.tsn && d.user_data == &m.data[..]),
            "TSN {} as usrsctp reports it is not a DATA chunk we sent with that message",
            m.tsn
        );
    }
    for m in &io.our_rx {
        assert!(
            theirs.iter().any(|(_, d)| d.tsn == m.tsn
                && d.user_data == &m.data[..]
                && d.stream_id == m.stream
                && d.ppid == m.ppid),
            "TSN {} as we report it is not a DATA chunk usrsctp sent with that message",
            m.tsn
        );
    }
}

fn messages_both_ways(setup: Setup) {
    let mut rng = Rng::new(0x5eed);
    let to_usrsctp = message_plan(&mut rng, 0);
    let to_ours = message_plan(&mut rng, 1000);
    let mut io = Interop::new(fast_stack(), our_config(0), setup).unwrap();
    if setup.open == Open::Ours {
        // Queued in COOKIE-WAIT: the first ones leave bundled with the COOKIE ECHO (RFC 9260
        // §5.1 D allows DATA after the COOKIE ECHO in the same packet).
        let a = io.our_assoc_mut();
        assert_eq!(a.max_message(), MAX_MESSAGE);
        assert_eq!(
            a.send(0, 16, &vec![0; MAX_MESSAGE + 1]),
            Err(SendError::TooBig { max: MAX_MESSAGE }),
            "RFC 5043 §9: no SCTP fragmentation"
        );
        for (stream, ppid, data) in &to_usrsctp[..3] {
            a.send(*stream, *ppid, data).unwrap();
        }
        io.our_outbox.extend(to_usrsctp[3..].iter().cloned());
    } else {
        io.our_outbox.extend(to_usrsctp.iter().cloned());
    }
    io.us_outbox.extend(
        to_ours
            .iter()
            .map(|(stream, ppid, data)| (*stream, *ppid, true, data.clone())),
    );
    let (n_ours, n_us) = (to_ours.len(), to_usrsctp.len());
    assert!(
        io.run_until(20_000, |io| io.our_rx.len() >= n_ours
            && us_message_count(io) >= n_us),
        "ours got {}/{n_ours}, usrsctp {}/{n_us}; events {:?} {:?}{}",
        io.our_rx.len(),
        us_message_count(&io),
        io.our_events,
        io.us_notifications(),
        trace(&io)
    );
    // Let the last SACKs go through, then nothing may be left anywhere.
    io.run_for(500);
    check_transfer(&io, &to_ours, &to_usrsctp);
    if setup.open == Open::Ours {
        let echo = first_with(&io, Dir::ToUsrsctp, COOKIE_ECHO);
        assert!(
            echo.chunk_types().contains(&DATA),
            "no DATA bundled with the COOKIE ECHO: {:?}",
            echo.chunk_types()
        );
    }
    let a = io.our_assoc();
    assert_eq!(a.state(), State::Established);
    assert_eq!(a.queued(), 0);
    assert_eq!(a.stats().data_in, n_ours as u64);
    assert_eq!(a.stats().data_out, n_us as u64, "nothing retransmitted");
    assert!(io.discards.is_empty(), "{:?}", io.discards);
    assert!(io.us_up(), "{:?}", io.us_notifications());
    // Every message fits one packet of usrsctp's MTU; the largest fill it exactly.
    for p in io.wire() {
        assert!(
            p.bytes.len() <= USRSCTP_MTU,
            "{} bytes {:?}",
            p.bytes.len(),
            p.dir
        );
    }
    for dir in [Dir::ToOurs, Dir::ToUsrsctp] {
        assert!(sent(&io, dir).any(|(_, p)| p.bytes.len() == USRSCTP_MTU));
    }
}

#[test]
fn messages_ours_active() {
    messages_both_ways(Setup::ours_active());
}

#[test]
fn messages_usrsctp_active() {
    messages_both_ways(Setup::usrsctp_active());
}

// ---------------------------------------------------------------------------------------------
// 4. Messages and shutdown over a lossy link
// ---------------------------------------------------------------------------------------------

/// Whether every DATA chunk usrsctp sent is acknowledged by a SACK or SHUTDOWN of ours that
/// reached it: usrsctp has nothing outstanding. (usrsctp retransmits on T3-rtx only chunks
/// older than its smoothed RTT estimate, unclamped by RTO.Max, and after a handshake with
/// retransmitted INIT or COOKIE ECHO that estimate was seen at several seconds: DATA then
/// went out again only every 3 to 5 s although RTO.Max was 1 s.)
fn usrsctp_data_acked(io: &Interop) -> bool {
    let Some(highest) = data_chunks(io, Dir::ToOurs)
        .iter()
        .map(|(_, d)| d.tsn)
        .reduce(|a, b| if b.wrapping_sub(a) as i32 > 0 { b } else { a })
    else {
        return true;
    };
    sent(io, Dir::ToUsrsctp)
        .filter(|(_, p)| !p.lost)
        .flat_map(|(_, p)| p.chunks())
        .any(|c| match c {
            ChunkRepr::Sack(s) => s.cum_tsn_ack.wrapping_sub(highest) as i32 >= 0,
            ChunkRepr::Shutdown(s) => s.cum_tsn_ack.wrapping_sub(highest) as i32 >= 0,
            _ => false,
        })
}

/// One seeded lossy run: handshake, `n` messages each way of random size (1 byte to the
/// largest) on streams 0..4 with PPIDs 16/17, then a graceful shutdown from one side. RFC 9260
/// §6.3 (T3-rtx), §7.2.4 (fast retransmit), §5.1 (T1), §9.2 (T2): every message arrives
/// exactly once and intact on both sides, then both sides report the shutdown complete.
/// Returns our retransmission count and (lost to usrsctp, lost to ours).
fn lossy_run(seed: u64, loss: f64, n: u32) -> (u64, (usize, usize)) {
    let mut rng = Rng::new(seed);
    let open = if seed.is_multiple_of(2) {
        Open::Ours
    } else {
        Open::Usrsctp
    };
    let setup = Setup {
        open,
        seed,
        ..Setup::ours_active()
    };
    let mut plan = |first: u32| -> Messages {
        (first..first + n)
            .map(|i| {
                let len = 1 + (rng.next_u64() % MAX_MESSAGE as u64) as usize;
                let stream = (rng.next_u64() % 4) as u16;
                let ppid = 16 + (rng.next_u64() % 2) as u32;
                (stream, ppid, payload(&mut rng, i, len))
            })
            .collect()
    };
    let to_usrsctp = plan(0);
    let to_ours = plan(100_000);
    // The handshake is lossless (`handshake_survives_lost_control_chunks` drops its packets):
    // usrsctp takes an RTT sample from the first INIT or COOKIE ECHO to the answer, however
    // often it was retransmitted (Karn's rule, RFC 9260 §6.3.1 C5, not applied), and a
    // handshake stretched to seconds by loss then gates its T3 retransmissions for as long
    // (see `usrsctp_data_acked`), which under loss exhausts Association.Max.Retrans.
    let mut io = Interop::established(fast_stack(), our_config(0), setup);
    io.set_loss(loss, loss);
    io.our_outbox.extend(to_usrsctp.iter().cloned());
    io.us_outbox.extend(
        to_ours
            .iter()
            .map(|(stream, ppid, data)| (*stream, *ppid, true, data.clone())),
    );
    let ctx = |io: &Interop| {
        format!(
            "seed {seed}: ours got {}/{n}, usrsctp {}/{n}; outboxes {} {}; our events {:?}; \
             usrsctp {:?}; discards {:?}{}",
            io.our_rx.len(),
            us_message_count(io),
            io.our_outbox.len(),
            io.us_outbox.len(),
            io.our_events,
            io.us_notifications()
                .iter()
                .map(|n| match n {
                    Notification::SendFailed {
                        error,
                        sent,
                        stream,
                        ppid,
                        data,
                    } => format!(
                        "SendFailed({error}, sent {sent}, sid {stream}, ppid {ppid}, {} bytes)",
                        data.len()
                    ),
                    other => format!("{other:?}"),
                })
                .collect::<Vec<_>>(),
            io.discards,
            trace(io)
        )
    };
    let all = |io: &Interop| io.our_rx.len() >= n as usize && us_message_count(io) >= n as usize;
    assert!(io.run_until(120_000, all), "{}", ctx(&io));
    assert!(io.our_outbox.is_empty() && io.us_outbox.is_empty());

    // Shutdown from one side or the other. Ours may start with our data still unacknowledged
    // (SHUTDOWN-PENDING, RFC 9260 §9.2); T5-shutdown-guard only runs once SHUTDOWN is sent.
    // Each side's shutdown is started only once the *other* side's data is acknowledged:
    // the SHUTDOWN sender's guard (5 × RTO.Max, 5 s here) would otherwise race the peer's
    // retransmissions, which under 30 % loss, or with usrsctp's wall-clock-gated T3 (see
    // `usrsctp_data_acked`), can take longer than that by chance.
    let ours_shuts = (seed / 2).is_multiple_of(2);
    assert!(
        io.run_until(120_000, |io| usrsctp_data_acked(io)
            && (ours_shuts || io.our_assoc().queued() == 0)),
        "{}",
        ctx(&io)
    );
    if ours_shuts {
        let now = io.now();
        io.our_assoc_mut().shutdown(now);
    } else {
        io.us.shutdown().unwrap();
    }
    let closed = |io: &Interop| {
        io.our_closed().is_some()
            && io.us_saw(|n| *n == Notification::ShutdownComplete || comm_lost(n))
    };
    assert!(io.run_until(60_000, closed), "{}", ctx(&io));
    assert_eq!(io.our_closed(), Some(CloseReason::Shutdown), "{}", ctx(&io));
    assert!(
        io.us_saw(|n| *n == Notification::ShutdownComplete) && !io.us_saw(comm_lost),
        "{}",
        ctx(&io)
    );
    // Exactly once, intact, and no ordered or fragmented DATA either way.
    check_transfer(&io, &to_ours, &to_usrsctp);
    let received_shutdown = io.our_events.contains(&Event::ShutdownReceived);
    assert_eq!(received_shutdown, !ours_shuts, "{:?}", io.our_events);
    let lost = |dir| sent(&io, dir).filter(|(_, p)| p.lost).count();
    let st = io.our_assoc().stats();
    (
        st.t3_retransmits + st.fast_retransmits,
        (lost(Dir::ToUsrsctp), lost(Dir::ToOurs)),
    )
}

#[test]
fn messages_and_shutdown_under_loss() {
    let mut retransmits = 0;
    for (seed, loss) in [(1, 0.1), (2, 0.1), (3, 0.15), (4, 0.15), (5, 0.2), (6, 0.2)] {
        let (rtx, (lost_out, lost_in)) = lossy_run(seed, loss, 60);
        assert!(lost_out > 0 && lost_in > 0, "seed {seed}: nothing lost");
        retransmits += rtx;
    }
    assert!(retransmits > 0, "our side never retransmitted");
}

/// More seeds (default 50, from seed 100) and heavier loss (5 to 30 %), on demand:
/// `INTEROP_SEEDS=3000 cargo test -p ddpdk-usrsctp --release --test interop -- --ignored
/// many_lossy_seeds`; `INTEROP_SEED=<n>` runs one, `INTEROP_TRACE=1` prints its packets.
/// Seeds 100..3100 pass. Seeds 4131 and 4779 (30 % loss) end with usrsctp's T5-shutdown-guard
/// aborting: partly chance, partly the engine bug `retransmitted_shutdown_is_answered_at_once`
/// pins (retransmitted SHUTDOWNs that got through went unanswered).
#[test]
#[ignore = "long: run on demand with INTEROP_SEEDS"]
fn many_lossy_seeds() {
    let seeds: u64 = std::env::var("INTEROP_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let range = match std::env::var("INTEROP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(one) => one..one + 1,
        None => 100..100 + seeds,
    };
    let mut failed = vec![];
    for seed in range {
        let loss = [0.05, 0.1, 0.2, 0.3][(seed % 4) as usize];
        if std::panic::catch_unwind(|| lossy_run(seed, loss, 80)).is_err() {
            failed.push(seed);
        }
    }
    assert!(failed.is_empty(), "failed seeds: {failed:?}");
}

// ---------------------------------------------------------------------------------------------
// 5. Graceful shutdown
// ---------------------------------------------------------------------------------------------

/// We shut down with messages still queued. RFC 9260 §9.2: SHUTDOWN only once everything
/// outstanding is acknowledged, carrying our Cumulative TSN Ack; usrsctp answers SHUTDOWN
/// ACK, we answer SHUTDOWN COMPLETE (T bit clear, usrsctp's tag, §8.5.1) and close. usrsctp
/// reports SHUTDOWN_EVENT then SHUTDOWN_COMP (RFC 6458 §6.1.5, §6.1.1), having received
/// every message first.
#[test]
fn graceful_shutdown_from_ours() {
    for setup in [Setup::ours_active(), Setup::usrsctp_active()] {
        let mut io = Interop::established(fast_stack(), our_config(0), setup);
        // Something to acknowledge in the SHUTDOWN's Cumulative TSN Ack.
        io.us_outbox.push_back((1, 17, true, b"before".to_vec()));
        assert!(io.run_until(1_000, |io| io.our_rx.len() == 1));
        let start = io.wire().len();
        let seen = io.us_rx.len();
        let msgs: Messages = (0..5u16)
            .map(|i| (i % 4, 16, vec![i as u8; 100 + usize::from(i)]))
            .collect();
        let now = io.now();
        let a = io.our_assoc_mut();
        for (stream, ppid, data) in &msgs {
            a.send(*stream, *ppid, data).unwrap();
        }
        a.shutdown(now);
        assert_eq!(a.state(), State::ShutdownPending, "§9.2: data first");
        assert_eq!(a.send(0, 16, b"late"), Err(SendError::NotOpen));
        assert!(
            io.run_until(5_000, |io| io.our_closed().is_some()
                && io.us_saw(|n| *n == Notification::ShutdownComplete)),
            "{}",
            trace(&io)
        );
        assert_eq!(io.our_closed(), Some(CloseReason::Shutdown));
        assert_eq!(
            io.our_events,
            [
                Event::Connected {
                    streams: STREAMS,
                    peer_adaptation: 1
                },
                Event::Closed(CloseReason::Shutdown)
            ]
        );
        // usrsctp: every message, then the shutdown notifications.
        let tail: Vec<&Received> = io.us_rx.iter().skip(seen).collect();
        assert_eq!(tail.len(), msgs.len() + 2, "{tail:?}");
        assert!(tail[..msgs.len()]
            .iter()
            .all(|r| matches!(r, Received::Message(_))));
        assert_eq!(
            tail[msgs.len()..],
            [
                &Received::Notification(Notification::ShutdownEvent),
                &Received::Notification(Notification::ShutdownComplete)
            ]
        );
        assert_eq!(usrsctp_received(&io), sorted(msgs));

        // On the wire: DATA and SACKs, then SHUTDOWN, SHUTDOWN ACK, SHUTDOWN COMPLETE only.
        let flow: Vec<(Dir, u8)> = chunk_flow(&io, start)
            .into_iter()
            .filter(|(_, t)| *t != DATA && *t != SACK)
            .collect();
        assert_eq!(
            flow,
            [
                (Dir::ToUsrsctp, SHUTDOWN),
                (Dir::ToOurs, SHUTDOWN_ACK),
                (Dir::ToUsrsctp, SHUTDOWN_COMPLETE)
            ],
            "{}",
            trace(&io)
        );
        let (shut_at, shut) = sent(&io, Dir::ToUsrsctp)
            .find(|(_, p)| p.chunk_types() == [SHUTDOWN])
            .unwrap();
        let last_data = sent(&io, Dir::ToUsrsctp)
            .filter(|(_, p)| p.chunk_types().contains(&DATA))
            .map(|(i, _)| i)
            .max()
            .unwrap();
        let last_sack_in = sent(&io, Dir::ToOurs)
            .filter(|(_, p)| p.chunk_types().contains(&SACK))
            .map(|(i, _)| i)
            .max()
            .unwrap();
        assert!(
            shut_at > last_data && shut_at > last_sack_in,
            "{}",
            trace(&io)
        );
        let ChunkRepr::Shutdown(s) = shut.chunks()[0] else {
            unreachable!()
        };
        assert_eq!(
            s.cum_tsn_ack, io.our_rx[0].tsn,
            "SHUTDOWN's Cumulative TSN Ack"
        );
        let sc = first_with(&io, Dir::ToUsrsctp, SHUTDOWN_COMPLETE);
        assert_eq!(sc.bytes[13] & 1, 0, "T bit");
        assert_eq!(sc.vtag(), io.our_assoc().peer_tag());
        assert!(io.assoc.is_none() && io.our_assoc().is_closed());
        assert_eq!(io.our_assoc().state(), State::Closed);
    }
}

/// usrsctp shuts down. RFC 9260 §9.2: we report the SHUTDOWN (no new sends from then on),
/// deliver what was in flight, answer SHUTDOWN ACK, and close on SHUTDOWN COMPLETE; usrsctp
/// reports only SHUTDOWN_COMP.
#[test]
fn graceful_shutdown_from_usrsctp() {
    for setup in [Setup::ours_active(), Setup::usrsctp_active()] {
        let mut io = Interop::established(fast_stack(), our_config(0), setup);
        let start = io.wire().len();
        let seen = io.us_notifications().len();
        let msgs: Messages = (0..3u16)
            .map(|i| (i, 17, vec![0xA0 | i as u8; 700]))
            .collect();
        for (stream, ppid, data) in &msgs {
            io.us.send(*stream, *ppid, true, data).unwrap();
        }
        io.us.shutdown().unwrap();
        assert!(
            io.run_until(5_000, |io| io.our_events.contains(&Event::ShutdownReceived)),
            "{}",
            trace(&io)
        );
        assert_eq!(
            io.our_assoc_mut().send(0, 16, b"late"),
            Err(SendError::NotOpen),
            "§9.2: no new data after SHUTDOWN"
        );
        assert!(
            io.run_until(5_000, |io| io.our_closed().is_some()
                && io.us_saw(|n| *n == Notification::ShutdownComplete)),
            "{}",
            trace(&io)
        );
        assert_eq!(
            io.our_events,
            [
                Event::Connected {
                    streams: STREAMS,
                    peer_adaptation: 1
                },
                Event::ShutdownReceived,
                Event::Closed(CloseReason::Shutdown)
            ]
        );
        assert_eq!(our_received(&io), sorted(msgs));
        assert_eq!(
            io.us_notifications()[seen..],
            [Notification::ShutdownComplete]
        );
        let flow: Vec<(Dir, u8)> = chunk_flow(&io, start)
            .into_iter()
            .filter(|(_, t)| *t != DATA && *t != SACK)
            .collect();
        assert_eq!(
            flow,
            [
                (Dir::ToOurs, SHUTDOWN),
                (Dir::ToUsrsctp, SHUTDOWN_ACK),
                (Dir::ToOurs, SHUTDOWN_COMPLETE)
            ],
            "{}",
            trace(&io)
        );
        let ack = first_with(&io, Dir::ToUsrsctp, SHUTDOWN_ACK);
        assert_eq!(ack.vtag(), io.our_assoc().peer_tag());
        assert!(io.our_assoc().is_closed());
    }
}

/// Both sides shut down at the same instant: the SHUTDOWNs cross. RFC 9260 §9.2: "If an
/// endpoint is in the SHUTDOWN-SENT state and receives a SHUTDOWN chunk from its peer, the
/// endpoint shall respond immediately with a SHUTDOWN ACK", and in SHUTDOWN-ACK-SENT a
/// SHUTDOWN ACK is answered with SHUTDOWN COMPLETE. Both sides end closed, gracefully.
#[test]
fn simultaneous_shutdown() {
    let mut io = Interop::established(fast_stack(), our_config(0), Setup::ours_active());
    let start = io.wire().len();
    let now = io.now();
    io.our_assoc_mut().shutdown(now);
    io.us.shutdown().unwrap();
    assert!(
        io.run_until(5_000, |io| io.our_closed().is_some()
            && io.us_saw(|n| *n == Notification::ShutdownComplete)),
        "{}",
        trace(&io)
    );
    assert_eq!(
        io.our_closed(),
        Some(CloseReason::Shutdown),
        "{}",
        trace(&io)
    );
    assert!(!io.us_saw(comm_lost), "{:?}", io.us_notifications());
    let flow = chunk_flow(&io, start);
    assert_eq!(
        flow[..2],
        [(Dir::ToUsrsctp, SHUTDOWN), (Dir::ToOurs, SHUTDOWN)]
    );
    assert!(
        flow.contains(&(Dir::ToUsrsctp, SHUTDOWN_ACK)),
        "{}",
        trace(&io)
    );
    assert!(
        flow.contains(&(Dir::ToOurs, SHUTDOWN_ACK)),
        "{}",
        trace(&io)
    );
    assert!(!flow.iter().any(|(_, t)| *t == ABORT), "{}", trace(&io));
}

/// A SHUTDOWN that arrives while we are in SHUTDOWN-ACK-SENT (the peer retransmitted it
/// because our SHUTDOWN ACK was lost) must be answered with a SHUTDOWN ACK at once. RFC 9260
/// §9.2: "If the receiver of the SHUTDOWN has no more outstanding DATA chunks, the SHUTDOWN
/// receiver MUST send a SHUTDOWN ACK"; usrsctp does so. Waiting for our own T2-shutdown
/// instead halves the chances to finish before the SHUTDOWN sender's T5-shutdown-guard
/// (5 × RTO.Max) gives up and aborts (seen with usrsctp at 30 % loss: seeds 4131 and 4779
/// of `many_lossy_seeds`). Here our RTO is 1 s and usrsctp's 100 ms: the first SHUTDOWN
/// ACK is dropped, usrsctp's retransmitted SHUTDOWN arrives ~100 ms later.
#[test]
fn retransmitted_shutdown_is_answered_at_once() {
    let cfg = Config {
        rto_initial: Duration::from_secs(1),
        rto_min: Duration::from_secs(1),
        ..our_config(0)
    };
    let mut io = Interop::established(fast_stack(), cfg, Setup::ours_active());
    let mut dropped = false;
    io.drop_if(move |dir, p| {
        let first_ack = dir == Dir::ToUsrsctp && chunk_types(p) == [SHUTDOWN_ACK] && !dropped;
        dropped |= first_ack;
        first_ack
    });
    let start = io.wire().len();
    io.us.shutdown().unwrap();
    assert!(
        io.run_until(800, |io| io.our_closed().is_some()),
        "not closed 800 ms after the SHUTDOWN; our RTO is 1 s: {}",
        trace(&io)
    );
    assert_eq!(io.our_closed(), Some(CloseReason::Shutdown));
    // Every SHUTDOWN that reached us was answered the same millisecond.
    for (i, p) in sent(&io, Dir::ToOurs).filter(|(i, p)| *i >= start && !p.lost) {
        if p.chunk_types() == [SHUTDOWN] {
            let arrival = p.at_ms + driver::DELAY_MS;
            assert!(
                io.wire()[i..].iter().any(|q| q.dir == Dir::ToUsrsctp
                    && q.at_ms == arrival
                    && q.chunk_types() == [SHUTDOWN_ACK]),
                "SHUTDOWN arriving at {arrival} ms not answered: {}",
                trace(&io)
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 6. Abort
// ---------------------------------------------------------------------------------------------

/// We abort. RFC 9260 §9.1: one ABORT with the peer's tag and the T bit clear (§8.5.1 B),
/// here with a User-Initiated Abort cause (12, §3.3.10.12); queued data is dropped. usrsctp
/// reports COMM_LOST with the cause code; we report `Closed(LocalAbort)` and send nothing more.
#[test]
fn abort_from_ours() {
    for setup in [Setup::ours_active(), Setup::usrsctp_active()] {
        let mut io = Interop::established(fast_stack(), our_config(0), setup);
        let start = io.wire().len();
        let seen = io.us_notifications().len();
        io.our_assoc_mut().send(0, 16, &[1; 200]).unwrap();
        io.our_assoc_mut().abort();
        assert!(
            io.run_until(1_000, |io| io.us_saw(comm_lost)),
            "{}",
            trace(&io)
        );
        io.run_for(2_000);
        assert_eq!(
            io.us_notifications()[seen..],
            [Notification::CommLost {
                error: CAUSE_USER_INITIATED_ABORT
            }]
        );
        assert_eq!(io.our_closed(), Some(CloseReason::LocalAbort));
        assert_eq!(
            chunk_flow(&io, start),
            [(Dir::ToUsrsctp, ABORT)],
            "{}",
            trace(&io)
        );
        let abort = &io.wire()[start];
        assert_eq!(abort.vtag(), io.our_assoc().peer_tag());
        let (t_bit, cause, _) = abort_of(abort);
        assert_eq!((t_bit, cause), (false, Some(CAUSE_USER_INITIATED_ABORT)));
        assert!(io.us_messages().is_empty(), "queued data was dropped");
        assert!(io.our_assoc().is_closed());
    }
}

/// usrsctp aborts. RFC 9260 §9.1, §8.5.1 B: its ABORT carries our tag, T bit clear, cause 12;
/// we close with `PeerAbort { cause: Some(12) }` and answer nothing; usrsctp reports its own
/// COMM_LOST with error 0.
#[test]
fn abort_from_usrsctp() {
    for setup in [Setup::ours_active(), Setup::usrsctp_active()] {
        let mut io = Interop::established(fast_stack(), our_config(0), setup);
        let start = io.wire().len();
        let seen = io.us_notifications().len();
        io.us.abort().unwrap();
        assert!(
            io.run_until(1_000, |io| io.our_closed().is_some()),
            "{}",
            trace(&io)
        );
        io.run_for(2_000);
        assert_eq!(
            io.our_closed(),
            Some(CloseReason::PeerAbort {
                cause: Some(CAUSE_USER_INITIATED_ABORT)
            })
        );
        assert_eq!(io.our_events.len(), 2, "{:?}", io.our_events);
        assert_eq!(
            chunk_flow(&io, start),
            [(Dir::ToOurs, ABORT)],
            "{}",
            trace(&io)
        );
        let abort = &io.wire()[start];
        assert_eq!(abort.vtag(), io.our_assoc().local_tag());
        assert!(!abort_of(abort).0, "T bit");
        assert_eq!(
            io.us_notifications()[seen..],
            [Notification::CommLost { error: 0 }]
        );
        assert!(io.our_assoc().is_closed());
        assert!(io.discards.is_empty(), "{:?}", io.discards);
    }
}

// ---------------------------------------------------------------------------------------------
// 7. Adaptation Layer Indication refused
// ---------------------------------------------------------------------------------------------

/// usrsctp without DDP's indication (none, or another value) connects to our endpoint.
/// RFC 5043 §11.1: DDP must not run over an association whose peer did not send Adaptation
/// Layer Indication 1; our endpoint answers the INIT with an ABORT (INIT's Initiate Tag, T bit
/// clear, User-Initiated Abort with our reason) and keeps no state. usrsctp gives up at once:
/// CANT_STR_ASSOC with the cause code, and no INIT retransmission.
#[test]
fn adaptation_refused_by_our_endpoint() {
    for adaptation in [None, Some(2), Some(0x0100_0000)] {
        let setup = Setup {
            usrsctp_adaptation: adaptation,
            ..Setup::usrsctp_active()
        };
        let mut io = Interop::new(fast_stack(), our_config(0), setup).unwrap();
        assert!(
            io.run_until(2_000, |io| !io.us_notifications().is_empty()),
            "{adaptation:?}: {}",
            trace(&io)
        );
        io.run_for(3_000);
        assert_eq!(
            io.us_notifications(),
            [Notification::CantStartAssoc {
                error: CAUSE_USER_INITIATED_ABORT
            }],
            "{adaptation:?}"
        );
        assert_eq!(
            chunk_flow(&io, 0),
            [(Dir::ToOurs, INIT), (Dir::ToUsrsctp, ABORT)],
            "{adaptation:?}: {}",
            trace(&io)
        );
        let init = init_of(&io.wire()[0]);
        let adaptations: Vec<u32> = init
            .params
            .iter()
            .filter_map(|p| match p {
                ParamRepr::AdaptationLayerIndication(v) => Some(v),
                _ => None,
            })
            .collect();
        assert_eq!(adaptations, adaptation.into_iter().collect::<Vec<_>>());
        let abort = &io.wire()[1];
        assert_eq!(abort.vtag(), init.initiate_tag);
        assert_eq!(
            abort_of(abort),
            (
                false,
                Some(CAUSE_USER_INITIATED_ABORT),
                ADAPTATION_REASON.as_bytes().to_vec()
            )
        );
        let st = *io.ours.stats();
        assert_eq!(
            (
                st.inits,
                st.adaptation_refused,
                st.init_acks_out,
                st.cookies_accepted
            ),
            (1, 1, 0, 0),
            "{adaptation:?}"
        );
        assert!(io.assoc.is_none() && io.our_events.is_empty());
    }
}

/// Our side connects to a usrsctp listener without DDP's indication. RFC 5043 §11.1: the INIT
/// ACK lacks it, so we ABORT (the INIT ACK's Initiate Tag, T bit clear, User-Initiated Abort
/// with our reason) instead of sending COOKIE ECHO, and close with `AdaptationRefused`
/// carrying what the peer sent. usrsctp, having kept no state for the INIT, reports nothing.
#[test]
fn adaptation_refused_by_our_association() {
    for adaptation in [None, Some(2)] {
        let setup = Setup {
            usrsctp_adaptation: adaptation,
            ..Setup::ours_active()
        };
        let mut io = Interop::new(fast_stack(), our_config(0), setup).unwrap();
        assert!(
            io.run_until(2_000, |io| io.our_closed().is_some()),
            "{adaptation:?}: {}",
            trace(&io)
        );
        io.run_for(2_000);
        assert_eq!(
            io.our_events,
            [Event::Closed(CloseReason::AdaptationRefused {
                peer: adaptation
            })]
        );
        assert_eq!(
            chunk_flow(&io, 0),
            [
                (Dir::ToUsrsctp, INIT),
                (Dir::ToOurs, INIT_ACK),
                (Dir::ToUsrsctp, ABORT)
            ],
            "{adaptation:?}: {}",
            trace(&io)
        );
        let ack = init_of(&io.wire()[1]);
        let abort = &io.wire()[2];
        assert_eq!(abort.vtag(), ack.initiate_tag);
        assert_eq!(
            abort_of(abort),
            (
                false,
                Some(CAUSE_USER_INITIATED_ABORT),
                ADAPTATION_REASON.as_bytes().to_vec()
            )
        );
        assert_eq!(io.our_assoc().stats().adaptation_refused, 1);
        assert!(io.our_assoc().is_closed());
        assert!(io.us_rx.is_empty(), "{:?}", io.us_rx);
    }
}

// ---------------------------------------------------------------------------------------------
// Handshake, retransmission and heartbeat details
// ---------------------------------------------------------------------------------------------

/// The first INIT, INIT ACK, COOKIE ECHO and COOKIE ACK are each lost once. RFC 9260 §5.1:
/// the active side retransmits INIT on T1-init and COOKIE ECHO on T1-cookie; the passive side
/// answers every INIT with an INIT ACK and a COOKIE ECHO of an association it already has
/// with a COOKIE ACK (§5.2.4 case D). Both sides come up once, with one association.
#[test]
fn handshake_survives_lost_control_chunks() {
    for setup in [Setup::ours_active(), Setup::usrsctp_active()] {
        let mut io = Interop::new(fast_stack(), our_config(0), setup).unwrap();
        let mut dropped: Vec<u8> = vec![];
        io.drop_if(move |_, p| {
            let kind = chunk_types(p)[0];
            let drop = [INIT, INIT_ACK, COOKIE_ECHO, COOKIE_ACK].contains(&kind)
                && !dropped.contains(&kind);
            if drop {
                dropped.push(kind);
            }
            drop
        });
        assert!(
            io.run_until(10_000, |io| io.our_connected() && io.us_up()),
            "{}",
            trace(&io)
        );
        let lost: Vec<u8> = io
            .wire()
            .iter()
            .filter(|p| p.lost)
            .map(|p| p.chunk_types()[0])
            .collect();
        assert_eq!(
            lost,
            [INIT, INIT_ACK, COOKIE_ECHO, COOKIE_ACK],
            "{}",
            trace(&io)
        );
        let count = |kind| {
            io.wire()
                .iter()
                .filter(|p| p.chunk_types()[0] == kind)
                .count()
        };
        // INIT and INIT ACK each went three times (INIT lost, INIT ACK lost, then through),
        // COOKIE ECHO and COOKIE ACK twice each... plus the one that completed.
        assert_eq!(
            (
                count(INIT),
                count(INIT_ACK),
                count(COOKIE_ECHO),
                count(COOKIE_ACK)
            ),
            (3, 2, 3, 2),
            "{}",
            trace(&io)
        );
        let connected = io
            .our_events
            .iter()
            .filter(|e| matches!(e, Event::Connected { .. }))
            .count();
        assert_eq!(connected, 1, "{:?}", io.our_events);
        let comm_ups = io
            .us_notifications()
            .iter()
            .filter(|n| matches!(n, Notification::CommUp { .. }))
            .count();
        assert_eq!(comm_ups, 1, "{:?}", io.us_notifications());
        if setup.open == Open::Usrsctp {
            // Each INIT answered statelessly; the second COOKIE ECHO went to the association
            // the first one made.
            let st = *io.ours.stats();
            assert_eq!((st.inits, st.init_acks_out, st.cookies_accepted), (2, 2, 1));
        }
        // And the association works.
        io.our_outbox.push_back((2, 16, b"after".to_vec()));
        io.us_outbox.push_back((3, 17, true, b"retour".to_vec()));
        assert!(io.run_until(2_000, |io| io.our_rx.len() == 1
            && us_message_count(io) == 1));
    }
}

/// A lost DATA chunk at the tail of a transfer (no later DATA to trigger fast retransmit) is
/// recovered by T3-rtx on each side (RFC 9260 §6.3.3), within RTO.Max here; and the SACK that
/// answers usrsctp's retransmission of a TSN we already had reports it as a duplicate
/// (§6.2: "the receiver ... SHOULD ... report the duplicate TSN in the next SACK"). This is
/// also the check that usrsctp's T3 runs on the virtual clock (see `driver::clock`).
#[test]
fn tail_loss_recovered_by_t3_both_ways() {
    let mut io = Interop::established(fast_stack(), our_config(0), Setup::ours_active());
    let start = io.wire().len();
    // Drop the first DATA each way.
    let mut dropped = [false; 2];
    io.drop_if(move |dir, p| {
        let i = usize::from(dir == Dir::ToOurs);
        let has_data = chunk_types(p).contains(&DATA);
        let drop = has_data && !dropped[i];
        dropped[i] |= drop;
        drop
    });
    io.our_outbox.push_back((0, 16, vec![0x11; 300]));
    io.us_outbox.push_back((1, 17, true, vec![0x22; 400]));
    assert!(
        io.run_until(2_000, |io| io.our_rx.len() == 1
            && us_message_count(io) == 1),
        "{}",
        trace(&io)
    );
    io.run_for(1_000);
    for dir in [Dir::ToUsrsctp, Dir::ToOurs] {
        let data: Vec<&WirePacket> = sent(&io, dir)
            .filter(|(i, p)| *i >= start && p.chunk_types().contains(&DATA))
            .map(|(_, p)| p)
            .collect();
        assert_eq!(
            data.len(),
            2,
            "{dir:?}: one loss, one retransmission: {}",
            trace(&io)
        );
        assert!(data[0].lost && !data[1].lost);
        let waited = data[1].at_ms - data[0].at_ms;
        assert!(
            (u64::from(driver::RTO_MIN_MS)..=u64::from(driver::RTO_MAX_MS)).contains(&waited),
            "{dir:?}: retransmitted after {waited} ms"
        );
    }
    assert_eq!(io.our_assoc().stats().t3_retransmits, 1);
    assert_eq!(io.our_assoc().stats().fast_retransmits, 0);
    assert_eq!(io.our_rx.len(), 1);
    assert_eq!(us_message_count(&io), 1);
}

/// usrsctp retransmits a DATA chunk we already have (our SACK was lost): RFC 9260 §6.2 has
/// the receiver report it in the next SACK's duplicate TSNs (and §6.2 SACK it at once); the
/// message is delivered once.
#[test]
fn duplicate_tsn_reported() {
    let mut io = Interop::established(fast_stack(), our_config(0), Setup::usrsctp_active());
    let mut dropped = false;
    io.drop_if(move |dir, p| {
        let drop = dir == Dir::ToUsrsctp && chunk_types(p) == [SACK] && !dropped;
        dropped |= drop;
        drop
    });
    io.us_outbox.push_back((1, 16, true, vec![0x33; 64]));
    assert!(io.run_until(2_000, |io| io.our_rx.len() == 1));
    io.run_for(2_000);
    let tsn = io.our_rx[0].tsn;
    let sacks: Vec<(bool, Vec<u32>)> = sent(&io, Dir::ToUsrsctp)
        .flat_map(|(_, p)| {
            p.chunks()
                .into_iter()
                .filter_map(|c| match c {
                    ChunkRepr::Sack(s) => Some((s.cum_tsn_ack == tsn, s.dup_tsns.iter().collect())),
                    _ => None,
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        sacks,
        [(true, vec![]), (true, vec![tsn])],
        "lost SACK, then the SACK for the retransmission: {}",
        trace(&io)
    );
    assert_eq!(io.our_rx.len(), 1, "delivered once");
    assert_eq!(io.our_assoc().stats().dup_tsns, 1);
}

/// An idle association stays up on heartbeats both ways (RFC 9260 §8.3): ours every
/// HB.interval (5 s here) + RTO, usrsctp's every 30 s; each HEARTBEAT ACK carries the
/// HEARTBEAT's Heartbeat Information unchanged, whoever sent it.
#[test]
fn heartbeats_both_ways_on_an_idle_association() {
    let cfg = Config {
        hb_interval: Some(Duration::from_secs(5)),
        ..our_config(0)
    };
    let mut io = Interop::established(fast_stack(), cfg, Setup::usrsctp_active());
    let start = io.wire().len();
    io.run_for(65_000);
    let hb_pairs = |dir: Dir| -> (usize, usize) {
        let hbs: Vec<Vec<u8>> = sent(&io, dir)
            .filter(|(i, _)| *i >= start)
            .flat_map(|(_, p)| p.chunks())
            .filter_map(|c| match c {
                ChunkRepr::Heartbeat(h) => Some(h.info.to_vec()),
                _ => None,
            })
            .collect();
        let acks: Vec<Vec<u8>> = sent(&io, dir.flip())
            .filter(|(i, _)| *i >= start)
            .flat_map(|(_, p)| p.chunks())
            .filter_map(|c| match c {
                ChunkRepr::HeartbeatAck(h) => Some(h.info.to_vec()),
                _ => None,
            })
            .collect();
        assert_eq!(hbs, acks, "{dir:?}: HEARTBEAT ACK info differs");
        (hbs.len(), acks.len())
    };
    let (ours, _) = hb_pairs(Dir::ToUsrsctp);
    let (theirs, _) = hb_pairs(Dir::ToOurs);
    // 65 s at 5 s + RTO (50 ms .. 1 s): 10 to 12 of ours; usrsctp's 30 s + RTO: 2.
    assert!((10..=12).contains(&ours), "{ours} heartbeats of ours");
    assert!((1..=2).contains(&theirs), "{theirs} heartbeats of usrsctp");
    let st = io.our_assoc().stats();
    assert_eq!(st.heartbeats_out as usize, ours);
    assert_eq!(st.heartbeat_acks_in as usize, ours);
    assert_eq!(io.our_assoc().state(), State::Established);
    assert!(io.us_up(), "{:?}", io.us_notifications());
    // Only heartbeats went over the idle association.
    for (dir, kind) in chunk_flow(&io, start) {
        assert!(kind == HEARTBEAT || kind == HEARTBEAT_ACK, "{dir:?} {kind}");
    }
}

/// Both sides send INIT at the same instant. RFC 9260 §5.2.1: an INIT received in
/// COOKIE-WAIT is answered with an INIT ACK carrying the Initiate Tag of our own INIT,
/// unchanged; the crossing COOKIE ECHOs then resolve to one association (§5.2.4 cases B/D)
/// with the same tags on both sides.
#[test]
fn init_collision() {
    let setup = Setup {
        open: Open::Both,
        ..Setup::ours_active()
    };
    let mut io = Interop::new(fast_stack(), our_config(0), setup).unwrap();
    assert!(
        io.run_until(5_000, |io| io.our_connected() && io.us_up()),
        "{}",
        trace(&io)
    );
    io.run_for(1_000);
    let our_init = init_of(first_with(&io, Dir::ToUsrsctp, INIT));
    let our_ack = init_of(first_with(&io, Dir::ToUsrsctp, INIT_ACK));
    assert_eq!(our_ack.initiate_tag, our_init.initiate_tag, "§5.2.1");
    assert_eq!(our_ack.initial_tsn, our_init.initial_tsn, "§5.2.1");
    let a = io.our_assoc();
    assert_eq!(a.local_tag(), our_init.initiate_tag);
    assert_eq!(a.state(), State::Established);
    // usrsctp's packets carry our tag, ours carry usrsctp's.
    let last = |dir| sent(&io, dir).map(|(_, p)| p.vtag()).last().unwrap();
    assert_eq!(last(Dir::ToOurs), a.local_tag());
    assert_eq!(last(Dir::ToUsrsctp), a.peer_tag());
    let connected = io
        .our_events
        .iter()
        .filter(|e| matches!(e, Event::Connected { .. }))
        .count();
    assert_eq!(connected, 1, "{:?}", io.our_events);
    assert!(!io.us_saw(comm_lost), "{:?}", io.us_notifications());
    io.our_outbox.push_back((0, 16, b"collided".to_vec()));
    io.us_outbox
        .push_back((0, 17, true, b"and survived".to_vec()));
    assert!(
        io.run_until(2_000, |io| io.our_rx.len() == 1
            && us_message_count(io) == 1),
        "{}",
        trace(&io)
    );
}

// ---------------------------------------------------------------------------------------------
// What a DDP association refuses
// ---------------------------------------------------------------------------------------------

/// usrsctp's fragmentation point on an AF_CONN path is 1252 bytes of user data (a 1280-byte
/// packet): a 1252-byte message goes as one DATA chunk; a 1253-byte one goes as two
/// fragments, which RFC 5043 §9 allows where the alternative would be IP fragmentation. We
/// reassemble it (RFC 9260 §6.9) and deliver it once, whole, with the first fragment's TSN;
/// the association goes on (issue 16 finding 8: we used to abort).
#[test]
fn usrsctp_fragmentation_point_and_fragments_reassembled_5043_9() {
    let mut io = Interop::established(fast_stack(), our_config(0), Setup::ours_active());
    io.us_outbox
        .push_back((0, 16, true, vec![0x44; MAX_MESSAGE]));
    assert!(io.run_until(1_000, |io| io.our_rx.len() == 1));
    let whole = data_chunks(&io, Dir::ToOurs);
    assert_eq!(whole.len(), 1);
    assert_eq!(whole[0].0, UBE);
    assert_eq!(
        sent(&io, Dir::ToOurs).map(|(_, p)| p.bytes.len()).max(),
        Some(USRSCTP_MTU)
    );

    io.us_outbox
        .push_back((0, 16, true, vec![0x55; MAX_MESSAGE + 1]));
    assert!(
        io.run_until(1_000, |io| io.our_rx.len() == 2),
        "{}",
        trace(&io)
    );
    let fragments: Vec<u8> = data_chunks(&io, Dir::ToOurs)[1..]
        .iter()
        .map(|(flags, _)| *flags)
        .collect();
    assert_eq!(fragments, vec![0x06, 0x05], "U|B, then U|E");
    let m = &io.our_rx[1];
    assert_eq!((m.stream, m.ppid), (0, 16));
    assert_eq!(m.data, vec![0x55; MAX_MESSAGE + 1]);
    assert_eq!(io.our_closed(), None, "the association goes on");
    // And carries on: one more whole message after it.
    io.us_outbox.push_back((0, 16, true, b"after".to_vec()));
    assert!(io.run_until(1_000, |io| io.our_rx.len() == 3));
    assert_eq!(io.our_rx[2].data, b"after".to_vec());
}

/// usrsctp sends an ordered message. RFC 5043 §10 has DDP send everything unordered; our
/// engine aborts an association whose peer sends ordered DATA (Protocol Violation) rather
/// than deliver it out of the order the sender asked for. usrsctp reports COMM_LOST (13).
#[test]
fn ordered_data_refused() {
    let mut io = Interop::established(fast_stack(), our_config(0), Setup::usrsctp_active());
    io.us_outbox.push_back((2, 16, false, b"ordered".to_vec()));
    assert!(
        io.run_until(1_000, |io| io.our_closed().is_some()
            && io.us_saw(comm_lost)),
        "{}",
        trace(&io)
    );
    let Some(CloseReason::ProtocolViolation(why)) = io.our_closed() else {
        panic!("{:?}", io.our_events);
    };
    assert!(why.contains("ordered"), "{why}");
    assert_eq!(data_chunks(&io, Dir::ToOurs)[0].0, 0x03, "B|E, no U");
    let (t_bit, cause, info) = abort_of(first_with(&io, Dir::ToUsrsctp, ABORT));
    assert_eq!((t_bit, cause), (false, Some(CAUSE_PROTOCOL_VIOLATION)));
    assert_eq!(info, why.as_bytes());
    assert!(io.our_rx.is_empty());
    assert!(io.us_saw(|n| *n
        == Notification::CommLost {
            error: CAUSE_PROTOCOL_VIOLATION
        }));
}

// ---------------------------------------------------------------------------------------------
// Flow control
// ---------------------------------------------------------------------------------------------

/// usrsctp's application stops reading for `pause_ms` while we have `n` maximum-size
/// messages to send, then reads again. Returns the run.
fn zero_window_run(pause_ms: u64, n: u32) -> (Interop, Messages) {
    let mut io = Interop::established(fast_stack(), our_config(0), Setup::usrsctp_active());
    io.us_paused = true;
    let mut rng = Rng::new(7);
    let msgs: Messages = (0..n)
        .map(|i| ((i % 4) as u16, 16, payload(&mut rng, i, MAX_MESSAGE)))
        .collect();
    io.our_outbox.extend(msgs.iter().cloned());
    io.run_for(pause_ms);
    io.us_paused = false;
    io.run_until(60_000, |io| {
        io.our_closed().is_some()
            || (us_message_count(io) == msgs.len() && io.our_assoc().queued() == 0)
    });
    (io, msgs)
}

/// The (arrival time, a_rwnd) of every SACK usrsctp sent that reached us.
fn usrsctp_windows(io: &Interop) -> Vec<(u64, u32)> {
    sent(io, Dir::ToOurs)
        .filter(|(_, p)| !p.lost)
        .flat_map(|(_, p)| {
            p.chunks().into_iter().filter_map(move |c| match c {
                ChunkRepr::Sack(s) => Some((p.at_ms + driver::DELAY_MS, s.a_rwnd)),
                _ => None,
            })
        })
        .collect()
}

/// usrsctp's receive buffer fills (its application stops reading for 3 s) and it advertises a
/// zero window. RFC 9260 §6.1 rule A: we may keep one DATA chunk in flight as a zero window
/// probe and no more; when the window opens again, everything arrives exactly once.
#[test]
fn zero_window_then_resume() {
    let (io, msgs) = zero_window_run(3_000, 250);
    assert_eq!(io.our_closed(), None, "{:?}", io.our_events);
    let windows = usrsctp_windows(&io);
    assert!(
        windows.iter().any(|(_, w)| *w == 0),
        "usrsctp never closed its window"
    );
    // Between the arrival of a zero-window SACK and the next SACK, at most one DATA chunk.
    let mut zero_since: Option<u64> = None;
    let mut sent_in_zero = 0;
    let mut events: Vec<(u64, Option<u32>, usize)> = windows
        .iter()
        .map(|&(at, w)| (at, Some(w), 0))
        .chain(sent(&io, Dir::ToUsrsctp).map(|(_, p)| {
            let n = p.chunk_types().iter().filter(|t| **t == DATA).count();
            (p.at_ms, None, n)
        }))
        .collect();
    events.sort_by_key(|(at, w, _)| (*at, w.is_none()));
    for (at, window, data) in events {
        match window {
            Some(0) => {
                zero_since = Some(at);
                sent_in_zero = 0;
            }
            Some(_) => zero_since = None,
            None => {
                if let Some(since) = zero_since {
                    sent_in_zero += data;
                    assert!(
                        sent_in_zero <= 1,
                        "{sent_in_zero} DATA chunks in flight into a zero window (since {since} ms, now {at} ms)"
                    );
                }
            }
        }
    }
    assert_eq!(usrsctp_received(&io), sorted(msgs));
    assert_eq!(io.our_assoc().state(), State::Established);
}

/// The same, with usrsctp's application stalled for 40 s: longer than Association.Max.Retrans
/// (30) backed-off RTOs. usrsctp answers every probe at once with a SACK (a_rwnd 0), so it is
/// plainly reachable. RFC 9260 §6.1 rule A keeps RFC 4960's: "If the sender continues to
/// receive new packets from the receiver while doing zero window probing, the unacknowledged
/// window probes should not increment the error counter for the association or any
/// destination transport address. This is because the receiver MAY keep its window closed
/// for an indefinite time."
#[test]
fn zero_window_longer_than_max_retrans() {
    let (io, msgs) = zero_window_run(40_000, 250);
    assert_eq!(io.our_closed(), None, "{:?}: {}", io.our_events, trace(&io));
    assert_eq!(usrsctp_received(&io), sorted(msgs));
}

/// usrsctp restarts (its endpoint vanishes without ABORT and a new one on the same port
/// connects again) while our association is established and idle. RFC 9260 §5.2.2: the INIT
/// on an established association is answered by the association with an INIT ACK with a new
/// tag (and the current tags as tie-tags in the cookie); §5.2.4 case A: the COOKIE ECHO is a
/// restart: we report `Restarted` and carry on with the new incarnation.
#[test]
fn peer_restart() {
    let mut io = Interop::established(fast_stack(), our_config(0), Setup::usrsctp_active());
    let old_tag = io.our_assoc().local_tag();
    let old_peer_tag = io.our_assoc().peer_tag();
    let endpoint_inits = io.ours.stats().inits;
    let start = io.wire().len();
    io.restart_usrsctp(Some(1)).unwrap();
    assert!(
        io.run_until(5_000, |io| io.us_up()
            && io
                .our_events
                .iter()
                .any(|e| matches!(e, Event::Restarted { .. }))),
        "{:?} {:?}: {}",
        io.our_events,
        io.us_notifications(),
        trace(&io)
    );
    let flow = chunk_flow(&io, start);
    assert_eq!(
        flow[..4],
        [
            (Dir::ToOurs, INIT),
            (Dir::ToUsrsctp, INIT_ACK),
            (Dir::ToOurs, COOKIE_ECHO),
            (Dir::ToUsrsctp, COOKIE_ACK)
        ],
        "{}",
        trace(&io)
    );
    let ack = init_of(first_with_from(&io, start, Dir::ToUsrsctp, INIT_ACK));
    assert_ne!(ack.initiate_tag, old_tag, "§5.2.2: a new tag");
    assert!(
        io.our_events.contains(&Event::Restarted { lost: 0 }),
        "{:?}",
        io.our_events
    );
    let a = io.our_assoc();
    assert_eq!(a.local_tag(), ack.initiate_tag);
    assert_ne!(a.peer_tag(), old_peer_tag);
    assert_eq!(a.state(), State::Established);
    assert_eq!(
        io.ours.stats().inits,
        endpoint_inits,
        "the INIT went to the association"
    );
    io.our_outbox.push_back((0, 16, b"after restart".to_vec()));
    io.us_outbox
        .push_back((0, 17, true, b"new incarnation".to_vec()));
    assert!(
        io.run_until(2_000, |io| io.our_rx.len() == 1
            && us_message_count(io) == 1),
        "{}",
        trace(&io)
    );
}

/// RFC 8899 §6.2 against usrsctp: our path MTU probes (a minimum HEARTBEAT and a PAD chunk,
/// RFC 4820, filling the packet to the size probed) are answered by an independent stack.
/// Packets to usrsctp above 1240 bytes vanish (ICMP filtered): three T3-rtx expiries of a
/// full-size DATA chunk are a black hole (§4.3), the path MTU falls to BASE_PLPMTU, and
/// usrsctp's HEARTBEAT ACK of the 1200-byte probe confirms it, its information unchanged. Once
/// the path carries full size again, the largest size's probe is confirmed too and the chunk
/// gets through.
#[test]
fn usrsctp_answers_our_path_mtu_probes_rfc8899_6_2() {
    use ddpdk_dataplane::sctp::plpmtud::{BASE_PLPMTU, PROBE_INFO_LEN};
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::Arc;
    const PAD: u8 = 0x84;
    let mut io = Interop::established(fast_stack(), our_config(0), Setup::ours_active());
    let hole = Arc::new(AtomicBool::new(true));
    let h = Arc::clone(&hole);
    io.drop_if(move |dir, p| dir == Dir::ToUsrsctp && p.len() > 1240 && h.load(Relaxed));
    let start = io.wire().len();
    let max = io.our_assoc().max_message();
    io.our_outbox.push_back((0, 16, vec![0x5a; max]));
    assert!(
        io.run_until(30_000, |io| io
            .our_assoc()
            .plpmtud()
            .is_some_and(|p| p.stats.probes_acked >= 1)),
        "{}",
        trace(&io)
    );
    let p = io.our_assoc().plpmtud().unwrap().stats;
    assert_eq!(p.black_holes, 1);
    assert_eq!(io.our_assoc().path_mtu(), BASE_PLPMTU);
    assert!(io.our_assoc().stats().t3_expiries >= 3);
    let probe = sent(&io, Dir::ToUsrsctp)
        .filter(|(i, _)| *i >= start)
        .map(|(_, p)| p)
        .find(|p| p.chunk_types() == [HEARTBEAT, PAD])
        .expect("a probe");
    assert_eq!(probe.bytes.len(), BASE_PLPMTU, "the size probed");
    assert!(!probe.lost);
    let info = match probe.chunks()[0] {
        ChunkRepr::Heartbeat(h) => h.info.to_vec(),
        _ => unreachable!(),
    };
    assert_eq!(info.len(), PROBE_INFO_LEN);
    let echoed = sent(&io, Dir::ToOurs)
        .filter(|(i, _)| *i >= start)
        .flat_map(|(_, p)| p.chunks())
        .any(|c| matches!(c, ChunkRepr::HeartbeatAck(a) if a.info == info.as_slice()));
    assert!(
        echoed,
        "usrsctp echoed the probe's information: {}",
        trace(&io)
    );
    // The path heals: the largest size is probed (again, after PROBE_TIMER, its first try
    // went into the hole) and confirmed, and the full-size chunk crosses.
    hole.store(false, Relaxed);
    assert!(
        io.run_until(60_000, |io| io.our_assoc().path_mtu() == USRSCTP_MTU
            && us_message_count(io) == 1),
        "{}",
        trace(&io)
    );
    let p = io.our_assoc().plpmtud().unwrap().stats;
    assert!(p.probes_acked >= 2 && p.raised >= 1, "{p:?}");
    assert_eq!(io.our_assoc().state(), State::Established);
}
