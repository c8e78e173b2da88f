//! The SCTP wire formats against the golden usrsctp captures in `shared/vectors/` (described,
//! field by field, in its README.md).
//!
//! Every frame of every capture is parsed and compared with the README's table, which is
//! encoded below as data (one line per frame, in the README's order and wording). Then every
//! chunk is re-emitted from its Repr and must reproduce the captured bytes, padding included,
//! and so must every whole packet (with the checksum copied, and recomputed).
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod pcap;

use ddpdk_dataplane::wire;
use ddpdk_dataplane::wire::sctp::{
    Cause, CauseCode, CauseRepr, Chunk, ChunkRepr, ChunkType, HeaderRepr, InitRepr, Packet,
    PacketBuilder, ParamRepr, ParamType, UnrecognizedAction, DATA_HEADER_LEN, INIT_MIN_LEN,
};

/// Client and server SCTP ports (README, "Common facts").
const CLIENT_PORT: u16 = 5001;
const SERVER_PORT: u16 = 5002;

/// One capture as the README describes it.
struct Capture {
    name: &'static str,
    /// "N DATA chunks".
    data_chunks: usize,
    /// "N SACKs with gap ack blocks".
    sacks_with_gaps: usize,
    /// "Verification tags used": (client to server, tag).
    vtags: &'static [(bool, u32)],
    frames: &'static [F],
}

/// One table line: frame number, direction (client to server), verification tag, frame length,
/// the chunks in packet order, the frame whose TSN this one retransmits, and whether the
/// generator recorded but did not deliver it.
struct F {
    n: usize,
    c2s: bool,
    vtag: u32,
    len: usize,
    chunks: &'static [Ck],
    retx_of: Option<usize>,
    lost: bool,
}

/// One chunk of a table line.
enum Ck {
    Init(I),
    InitAck(I),
    /// Cookie length in bytes.
    CookieEcho(usize),
    CookieAck,
    Data(D),
    Sack(S),
    /// Cumulative TSN ack.
    Shutdown(u32),
    ShutdownAck,
    ShutdownComplete {
        t: bool,
    },
    Abort {
        t: bool,
        cause: u16,
        cause_len: u16,
        info: &'static [u8],
    },
}

/// INIT / INIT-ACK: fixed fields, parameter types in order, the adaptation indication, and the
/// contents of Supported Extensions, CHUNKS (auth chunk list) and HMAC-ALGO (HMAC ids).
struct I {
    tag: u32,
    a_rwnd: u32,
    os: u16,
    mis: u16,
    tsn: u32,
    params: &'static [u16],
    ali: Option<u32>,
    exts: &'static [u8],
    auth_chunks: &'static [u8],
    hmac_ids: &'static [u16],
}

/// DATA: `flags` is the raw flags byte, `len` the chunk length.
struct D {
    tsn: u32,
    sid: u16,
    ssn: u16,
    ppid: u32,
    flags: u8,
    len: u16,
}

/// SACK: gap blocks as (start offset, end offset, first TSN, last TSN), and the number of
/// duplicate TSNs.
struct S {
    cum: u32,
    a_rwnd: u32,
    gaps: &'static [(u16, u16, u32, u32)],
    dups: usize,
}

use Ck::*;

#[rustfmt::skip]
const CAPTURES: &[Capture] = &[
    Capture {
        name: "assoc-ddp-default.pcap",
        data_chunks: 7,
        sacks_with_gaps: 0,
        vtags: &[(true, 0x00000000), (true, 0xf801d059), (false, 0xf5986614)],
        frames: &[
            F { n: 1, c2s: true, vtag: 0x00000000, len: 146, chunks: &[Init(I { tag: 0xf5986614, a_rwnd: 131072, os: 8, mis: 8, tsn: 72947537, params: &[0xc006, 0x8000, 0xc000, 0x8008, 0x8002, 0x8004, 0x8003], ali: Some(1), exts: &[192, 15, 193, 128, 130], auth_chunks: &[128, 193], hmac_ids: &[1] })], retx_of: None, lost: false },
            F { n: 2, c2s: false, vtag: 0xf5986614, len: 482, chunks: &[InitAck(I { tag: 0xf801d059, a_rwnd: 131072, os: 8, mis: 8, tsn: 3458661732, params: &[0xc006, 0x8000, 0xc000, 0x8008, 0x8002, 0x8004, 0x8003, 0x0007], ali: Some(1), exts: &[192, 15, 193, 128, 130], auth_chunks: &[128, 193], hmac_ids: &[1] })], retx_of: None, lost: false },
            F { n: 3, c2s: true, vtag: 0xf801d059, len: 382, chunks: &[CookieEcho(332)], retx_of: None, lost: false },
            F { n: 4, c2s: false, vtag: 0xf5986614, len: 50, chunks: &[CookieAck], retx_of: None, lost: false },
            F { n: 5, c2s: true, vtag: 0xf801d059, len: 74, chunks: &[Data(D { tsn: 72947537, sid: 3, ssn: 0, ppid: 17, flags: 0x07, len: 25 })], retx_of: None, lost: false },
            F { n: 6, c2s: false, vtag: 0xf5986614, len: 62, chunks: &[Sack(S { cum: 72947537, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 7, c2s: false, vtag: 0xf5986614, len: 70, chunks: &[Data(D { tsn: 3458661732, sid: 3, ssn: 0, ppid: 17, flags: 0x07, len: 22 })], retx_of: None, lost: false },
            F { n: 8, c2s: true, vtag: 0xf801d059, len: 62, chunks: &[Sack(S { cum: 3458661732, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 9, c2s: true, vtag: 0xf801d059, len: 142, chunks: &[Data(D { tsn: 72947538, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 96 })], retx_of: None, lost: false },
            F { n: 10, c2s: false, vtag: 0xf5986614, len: 62, chunks: &[Sack(S { cum: 72947538, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 11, c2s: true, vtag: 0xf801d059, len: 274, chunks: &[Data(D { tsn: 72947539, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 96 }), Data(D { tsn: 72947540, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 69 }), Data(D { tsn: 72947541, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 59 })], retx_of: None, lost: false },
            F { n: 12, c2s: false, vtag: 0xf5986614, len: 62, chunks: &[Sack(S { cum: 72947541, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 13, c2s: true, vtag: 0xf801d059, len: 66, chunks: &[Data(D { tsn: 72947542, sid: 3, ssn: 0, ppid: 17, flags: 0x07, len: 20 })], retx_of: None, lost: false },
            F { n: 14, c2s: false, vtag: 0xf5986614, len: 62, chunks: &[Sack(S { cum: 72947542, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 15, c2s: true, vtag: 0xf801d059, len: 54, chunks: &[Shutdown(3458661732)], retx_of: None, lost: false },
            F { n: 16, c2s: false, vtag: 0xf5986614, len: 50, chunks: &[ShutdownAck], retx_of: None, lost: false },
            F { n: 17, c2s: true, vtag: 0xf801d059, len: 50, chunks: &[ShutdownComplete { t: false }], retx_of: None, lost: false },
        ],
    },
    Capture {
        name: "assoc-ddp-minimal.pcap",
        data_chunks: 7,
        sacks_with_gaps: 0,
        vtags: &[(true, 0x00000000), (true, 0xb430cb8d), (false, 0x229249cf)],
        frames: &[
            F { n: 1, c2s: true, vtag: 0x00000000, len: 74, chunks: &[Init(I { tag: 0x229249cf, a_rwnd: 131072, os: 8, mis: 8, tsn: 2624763763, params: &[0xc006], ali: Some(1), exts: &[], auth_chunks: &[], hmac_ids: &[] })], retx_of: None, lost: false },
            F { n: 2, c2s: false, vtag: 0x229249cf, len: 266, chunks: &[InitAck(I { tag: 0xb430cb8d, a_rwnd: 131072, os: 8, mis: 8, tsn: 3322211569, params: &[0xc006, 0x0007], ali: Some(1), exts: &[], auth_chunks: &[], hmac_ids: &[] })], retx_of: None, lost: false },
            F { n: 3, c2s: true, vtag: 0xb430cb8d, len: 238, chunks: &[CookieEcho(188)], retx_of: None, lost: false },
            F { n: 4, c2s: false, vtag: 0x229249cf, len: 50, chunks: &[CookieAck], retx_of: None, lost: false },
            F { n: 5, c2s: true, vtag: 0xb430cb8d, len: 74, chunks: &[Data(D { tsn: 2624763763, sid: 3, ssn: 0, ppid: 17, flags: 0x07, len: 25 })], retx_of: None, lost: false },
            F { n: 6, c2s: false, vtag: 0x229249cf, len: 62, chunks: &[Sack(S { cum: 2624763763, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 7, c2s: false, vtag: 0x229249cf, len: 70, chunks: &[Data(D { tsn: 3322211569, sid: 3, ssn: 0, ppid: 17, flags: 0x07, len: 22 })], retx_of: None, lost: false },
            F { n: 8, c2s: true, vtag: 0xb430cb8d, len: 62, chunks: &[Sack(S { cum: 3322211569, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 9, c2s: true, vtag: 0xb430cb8d, len: 142, chunks: &[Data(D { tsn: 2624763764, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 96 })], retx_of: None, lost: false },
            F { n: 10, c2s: false, vtag: 0x229249cf, len: 62, chunks: &[Sack(S { cum: 2624763764, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 11, c2s: true, vtag: 0xb430cb8d, len: 274, chunks: &[Data(D { tsn: 2624763765, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 96 }), Data(D { tsn: 2624763766, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 69 }), Data(D { tsn: 2624763767, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 59 })], retx_of: None, lost: false },
            F { n: 12, c2s: false, vtag: 0x229249cf, len: 62, chunks: &[Sack(S { cum: 2624763767, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 13, c2s: true, vtag: 0xb430cb8d, len: 66, chunks: &[Data(D { tsn: 2624763768, sid: 3, ssn: 0, ppid: 17, flags: 0x07, len: 20 })], retx_of: None, lost: false },
            F { n: 14, c2s: false, vtag: 0x229249cf, len: 62, chunks: &[Sack(S { cum: 2624763768, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 15, c2s: true, vtag: 0xb430cb8d, len: 54, chunks: &[Shutdown(3322211569)], retx_of: None, lost: false },
            F { n: 16, c2s: false, vtag: 0x229249cf, len: 50, chunks: &[ShutdownAck], retx_of: None, lost: false },
            F { n: 17, c2s: true, vtag: 0xb430cb8d, len: 50, chunks: &[ShutdownComplete { t: false }], retx_of: None, lost: false },
        ],
    },
    Capture {
        name: "assoc-loss.pcap",
        data_chunks: 53,
        sacks_with_gaps: 15,
        vtags: &[(true, 0x00000000), (true, 0xd6aeb526), (false, 0x9502f8a3)],
        frames: &[
            F { n: 1, c2s: true, vtag: 0x00000000, len: 146, chunks: &[Init(I { tag: 0x9502f8a3, a_rwnd: 131072, os: 8, mis: 8, tsn: 4051400447, params: &[0xc006, 0x8000, 0xc000, 0x8008, 0x8002, 0x8004, 0x8003], ali: Some(1), exts: &[192, 15, 193, 128, 130], auth_chunks: &[128, 193], hmac_ids: &[1] })], retx_of: None, lost: false },
            F { n: 2, c2s: false, vtag: 0x9502f8a3, len: 482, chunks: &[InitAck(I { tag: 0xd6aeb526, a_rwnd: 131072, os: 8, mis: 8, tsn: 1297044172, params: &[0xc006, 0x8000, 0xc000, 0x8008, 0x8002, 0x8004, 0x8003, 0x0007], ali: Some(1), exts: &[192, 15, 193, 128, 130], auth_chunks: &[128, 193], hmac_ids: &[1] })], retx_of: None, lost: false },
            F { n: 3, c2s: true, vtag: 0xd6aeb526, len: 382, chunks: &[CookieEcho(332)], retx_of: None, lost: false },
            F { n: 4, c2s: false, vtag: 0x9502f8a3, len: 50, chunks: &[CookieAck], retx_of: None, lost: false },
            F { n: 5, c2s: true, vtag: 0xd6aeb526, len: 74, chunks: &[Data(D { tsn: 4051400447, sid: 3, ssn: 0, ppid: 17, flags: 0x07, len: 25 })], retx_of: None, lost: false },
            F { n: 6, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400447, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 7, c2s: false, vtag: 0x9502f8a3, len: 70, chunks: &[Data(D { tsn: 1297044172, sid: 3, ssn: 0, ppid: 17, flags: 0x07, len: 22 })], retx_of: None, lost: false },
            F { n: 8, c2s: true, vtag: 0xd6aeb526, len: 62, chunks: &[Sack(S { cum: 1297044172, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 9, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400448, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 10, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400449, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 11, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400450, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 12, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400451, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 13, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400449, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 14, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400451, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 15, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400452, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 16, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400453, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 17, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400454, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 18, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400455, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 19, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400456, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 20, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400457, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: true },
            F { n: 21, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400458, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 22, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400459, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 23, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400453, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 24, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400455, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 25, c2s: false, vtag: 0x9502f8a3, len: 66, chunks: &[Sack(S { cum: 4051400456, a_rwnd: 131072, gaps: &[(2, 2, 4051400458, 4051400458)], dups: 0 })], retx_of: None, lost: false },
            F { n: 26, c2s: false, vtag: 0x9502f8a3, len: 66, chunks: &[Sack(S { cum: 4051400456, a_rwnd: 131072, gaps: &[(2, 3, 4051400458, 4051400459)], dups: 0 })], retx_of: None, lost: false },
            F { n: 27, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400460, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: true },
            F { n: 28, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400461, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 29, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400462, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 30, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400463, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 31, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400464, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 32, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400465, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 33, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400466, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 34, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400467, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 35, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400468, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 36, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400469, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 37, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400470, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 38, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400471, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 39, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400472, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 40, c2s: false, vtag: 0x9502f8a3, len: 70, chunks: &[Sack(S { cum: 4051400456, a_rwnd: 131072, gaps: &[(2, 3, 4051400458, 4051400459), (5, 5, 4051400461, 4051400461)], dups: 0 })], retx_of: None, lost: false },
            F { n: 41, c2s: false, vtag: 0x9502f8a3, len: 70, chunks: &[Sack(S { cum: 4051400456, a_rwnd: 131072, gaps: &[(2, 3, 4051400458, 4051400459), (5, 6, 4051400461, 4051400462)], dups: 0 })], retx_of: None, lost: false },
            F { n: 42, c2s: false, vtag: 0x9502f8a3, len: 70, chunks: &[Sack(S { cum: 4051400456, a_rwnd: 131072, gaps: &[(2, 3, 4051400458, 4051400459), (5, 7, 4051400461, 4051400463)], dups: 0 })], retx_of: None, lost: false },
            F { n: 43, c2s: false, vtag: 0x9502f8a3, len: 70, chunks: &[Sack(S { cum: 4051400456, a_rwnd: 131072, gaps: &[(2, 3, 4051400458, 4051400459), (5, 8, 4051400461, 4051400464)], dups: 0 })], retx_of: None, lost: false },
            F { n: 44, c2s: false, vtag: 0x9502f8a3, len: 70, chunks: &[Sack(S { cum: 4051400456, a_rwnd: 131072, gaps: &[(2, 3, 4051400458, 4051400459), (5, 9, 4051400461, 4051400465)], dups: 0 })], retx_of: None, lost: false },
            F { n: 45, c2s: false, vtag: 0x9502f8a3, len: 70, chunks: &[Sack(S { cum: 4051400456, a_rwnd: 131072, gaps: &[(2, 3, 4051400458, 4051400459), (5, 10, 4051400461, 4051400466)], dups: 0 })], retx_of: None, lost: false },
            F { n: 46, c2s: false, vtag: 0x9502f8a3, len: 70, chunks: &[Sack(S { cum: 4051400456, a_rwnd: 131072, gaps: &[(2, 3, 4051400458, 4051400459), (5, 11, 4051400461, 4051400467)], dups: 0 })], retx_of: None, lost: false },
            F { n: 47, c2s: false, vtag: 0x9502f8a3, len: 70, chunks: &[Sack(S { cum: 4051400456, a_rwnd: 131072, gaps: &[(2, 3, 4051400458, 4051400459), (5, 12, 4051400461, 4051400468)], dups: 0 })], retx_of: None, lost: false },
            F { n: 48, c2s: false, vtag: 0x9502f8a3, len: 70, chunks: &[Sack(S { cum: 4051400456, a_rwnd: 131072, gaps: &[(2, 3, 4051400458, 4051400459), (5, 13, 4051400461, 4051400469)], dups: 0 })], retx_of: None, lost: false },
            F { n: 49, c2s: false, vtag: 0x9502f8a3, len: 70, chunks: &[Sack(S { cum: 4051400456, a_rwnd: 131072, gaps: &[(2, 3, 4051400458, 4051400459), (5, 14, 4051400461, 4051400470)], dups: 0 })], retx_of: None, lost: false },
            F { n: 50, c2s: false, vtag: 0x9502f8a3, len: 70, chunks: &[Sack(S { cum: 4051400456, a_rwnd: 131072, gaps: &[(2, 3, 4051400458, 4051400459), (5, 15, 4051400461, 4051400471)], dups: 0 })], retx_of: None, lost: false },
            F { n: 51, c2s: false, vtag: 0x9502f8a3, len: 70, chunks: &[Sack(S { cum: 4051400456, a_rwnd: 131072, gaps: &[(2, 3, 4051400458, 4051400459), (5, 16, 4051400461, 4051400472)], dups: 0 })], retx_of: None, lost: false },
            F { n: 52, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400457, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: Some(20), lost: false },
            F { n: 53, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400460, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: Some(27), lost: false },
            F { n: 54, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400473, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 55, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400474, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 56, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400475, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 57, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400476, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 58, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400477, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 59, c2s: false, vtag: 0x9502f8a3, len: 66, chunks: &[Sack(S { cum: 4051400459, a_rwnd: 131072, gaps: &[(2, 13, 4051400461, 4051400472)], dups: 0 })], retx_of: None, lost: false },
            F { n: 60, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400472, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 61, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400474, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 62, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400476, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 63, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400478, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 64, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400479, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 65, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400480, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 66, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400481, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 67, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400482, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 68, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400483, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 69, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400484, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 70, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400478, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 71, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400480, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 72, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400482, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 73, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400484, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 74, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400485, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 75, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400486, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 76, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400487, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 77, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400488, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 78, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400489, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 79, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400490, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 80, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400491, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 81, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400492, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 82, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400493, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 83, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400494, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 84, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400486, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 85, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400488, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 86, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400490, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 87, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400492, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 88, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400494, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 89, c2s: true, vtag: 0xd6aeb526, len: 1062, chunks: &[Data(D { tsn: 4051400495, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 1016 })], retx_of: None, lost: false },
            F { n: 90, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400495, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 91, c2s: true, vtag: 0xd6aeb526, len: 66, chunks: &[Data(D { tsn: 4051400496, sid: 3, ssn: 0, ppid: 17, flags: 0x07, len: 20 })], retx_of: None, lost: false },
            F { n: 92, c2s: false, vtag: 0x9502f8a3, len: 62, chunks: &[Sack(S { cum: 4051400496, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 93, c2s: true, vtag: 0xd6aeb526, len: 54, chunks: &[Shutdown(1297044172)], retx_of: None, lost: false },
            F { n: 94, c2s: false, vtag: 0x9502f8a3, len: 50, chunks: &[ShutdownAck], retx_of: None, lost: false },
            F { n: 95, c2s: true, vtag: 0xd6aeb526, len: 50, chunks: &[ShutdownComplete { t: false }], retx_of: None, lost: false },
        ],
    },
    Capture {
        name: "assoc-no-adaptation.pcap",
        data_chunks: 0,
        sacks_with_gaps: 0,
        vtags: &[(true, 0x00000000), (true, 0xc5438c7c), (false, 0x53d2275b)],
        frames: &[
            F { n: 1, c2s: true, vtag: 0x00000000, len: 138, chunks: &[Init(I { tag: 0x53d2275b, a_rwnd: 131072, os: 8, mis: 8, tsn: 474116651, params: &[0x8000, 0xc000, 0x8008, 0x8002, 0x8004, 0x8003], ali: None, exts: &[192, 15, 193, 128, 130], auth_chunks: &[128, 193], hmac_ids: &[1] })], retx_of: None, lost: false },
            F { n: 2, c2s: false, vtag: 0x53d2275b, len: 474, chunks: &[InitAck(I { tag: 0xc5438c7c, a_rwnd: 131072, os: 8, mis: 8, tsn: 1624450894, params: &[0xc006, 0x8000, 0xc000, 0x8008, 0x8002, 0x8004, 0x8003, 0x0007], ali: Some(1), exts: &[192, 15, 193, 128, 130], auth_chunks: &[128, 193], hmac_ids: &[1] })], retx_of: None, lost: false },
            F { n: 3, c2s: true, vtag: 0xc5438c7c, len: 374, chunks: &[CookieEcho(324)], retx_of: None, lost: false },
            F { n: 4, c2s: false, vtag: 0x53d2275b, len: 50, chunks: &[CookieAck], retx_of: None, lost: false },
            F { n: 5, c2s: false, vtag: 0x53d2275b, len: 54, chunks: &[Abort { t: false, cause: 0x000c, cause_len: 4, info: b"" }], retx_of: None, lost: false },
        ],
    },
    Capture {
        name: "abort.pcap",
        data_chunks: 3,
        sacks_with_gaps: 0,
        vtags: &[(true, 0x00000000), (true, 0x9292ac00), (false, 0xcad32d67)],
        frames: &[
            F { n: 1, c2s: true, vtag: 0x00000000, len: 146, chunks: &[Init(I { tag: 0xcad32d67, a_rwnd: 131072, os: 8, mis: 8, tsn: 3869848030, params: &[0xc006, 0x8000, 0xc000, 0x8008, 0x8002, 0x8004, 0x8003], ali: Some(1), exts: &[192, 15, 193, 128, 130], auth_chunks: &[128, 193], hmac_ids: &[1] })], retx_of: None, lost: false },
            F { n: 2, c2s: false, vtag: 0xcad32d67, len: 482, chunks: &[InitAck(I { tag: 0x9292ac00, a_rwnd: 131072, os: 8, mis: 8, tsn: 4222620913, params: &[0xc006, 0x8000, 0xc000, 0x8008, 0x8002, 0x8004, 0x8003, 0x0007], ali: Some(1), exts: &[192, 15, 193, 128, 130], auth_chunks: &[128, 193], hmac_ids: &[1] })], retx_of: None, lost: false },
            F { n: 3, c2s: true, vtag: 0x9292ac00, len: 382, chunks: &[CookieEcho(332)], retx_of: None, lost: false },
            F { n: 4, c2s: false, vtag: 0xcad32d67, len: 50, chunks: &[CookieAck], retx_of: None, lost: false },
            F { n: 5, c2s: true, vtag: 0x9292ac00, len: 74, chunks: &[Data(D { tsn: 3869848030, sid: 3, ssn: 0, ppid: 17, flags: 0x07, len: 25 })], retx_of: None, lost: false },
            F { n: 6, c2s: false, vtag: 0xcad32d67, len: 62, chunks: &[Sack(S { cum: 3869848030, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 7, c2s: false, vtag: 0xcad32d67, len: 70, chunks: &[Data(D { tsn: 4222620913, sid: 3, ssn: 0, ppid: 17, flags: 0x07, len: 22 })], retx_of: None, lost: false },
            F { n: 8, c2s: true, vtag: 0x9292ac00, len: 62, chunks: &[Sack(S { cum: 4222620913, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 9, c2s: true, vtag: 0x9292ac00, len: 126, chunks: &[Data(D { tsn: 3869848031, sid: 3, ssn: 0, ppid: 16, flags: 0x07, len: 80 })], retx_of: None, lost: false },
            F { n: 10, c2s: false, vtag: 0xcad32d67, len: 62, chunks: &[Sack(S { cum: 3869848031, a_rwnd: 131072, gaps: &[], dups: 0 })], retx_of: None, lost: false },
            F { n: 11, c2s: true, vtag: 0x9292ac00, len: 78, chunks: &[Abort { t: false, cause: 0x000c, cause_len: 25, info: b"DDP stream terminated" }], retx_of: None, lost: false },
        ],
    },
];

/// usrsctp parameters this crate does not implement (ECN Capable, RANDOM, CHUNKS, HMAC-ALGO):
/// all have `10` in their upper bits, "skip and do not report" (RFC 9260 §3.2.1).
const USRSCTP_UNKNOWN_PARAMS: [u16; 4] = [0x8000, 0x8002, 0x8003, 0x8004];

fn packet_of(frame: &pcap::Frame) -> Packet<&[u8]> {
    Packet::new_checked(pcap::sctp_bytes(frame))
        .unwrap_or_else(|e| panic!("frame {}: {e}", frame.number))
}

/// The chunks of a packet with each one's bytes as captured, padding included.
fn chunks_with_bytes<'a>(packet: &Packet<&'a [u8]>, ctx: &str) -> Vec<(Chunk<&'a [u8]>, &'a [u8])> {
    let all = packet.chunk_bytes_ref();
    let mut it = packet.chunks_ref();
    let mut start = 0;
    let mut v = Vec::new();
    while let Some(c) = it.next() {
        let c = c.unwrap_or_else(|e| panic!("{ctx}: chunk {}: {e}", v.len() + 1));
        v.push((c, &all[start..it.offset()]));
        start = it.offset();
    }
    v
}

fn parse_chunk<'a>(c: &Chunk<&'a [u8]>, ctx: &str) -> ChunkRepr<'a> {
    ChunkRepr::parse(c).unwrap_or_else(|e| panic!("{ctx}: {:?}: {e}", c.chunk_type()))
}

/// The CRC32c of a packet with its checksum field taken as zero (RFC 9260 Appendix A),
/// computed with the `crc32c` crate directly: an independent check of the byte order that
/// [`Packet::checksum`] reads.
fn crc32c_of(packet: &[u8]) -> u32 {
    let mut b = packet.to_vec();
    b[8..12].fill(0);
    crc32c::crc32c(&b)
}

fn check_init(ctx: &str, r: &InitRepr<'_>, e: &I) {
    assert_eq!(r.initiate_tag, e.tag, "{ctx}: initiate tag");
    assert_eq!(r.a_rwnd, e.a_rwnd, "{ctx}: a_rwnd");
    assert_eq!(
        (r.outbound_streams, r.inbound_streams),
        (e.os, e.mis),
        "{ctx}: OS/MIS"
    );
    assert_eq!(r.initial_tsn, e.tsn, "{ctx}: initial TSN");
    let types: Vec<u16> = r.params.iter().map(|p| p.param_type().into()).collect();
    assert_eq!(types, e.params, "{ctx}: parameter types in order");
    assert_eq!(
        r.adaptation_indication(),
        e.ali,
        "{ctx}: adaptation indication"
    );
    let mut exts = None;
    let mut auth = None;
    let mut hmac = None;
    for p in r.params.iter() {
        match p {
            ParamRepr::SupportedExtensions(v) => exts = Some(v),
            ParamRepr::Unknown { param_type, value } => {
                assert!(
                    USRSCTP_UNKNOWN_PARAMS.contains(&param_type),
                    "{ctx}: {param_type:#x}"
                );
                assert_eq!(
                    p.action(),
                    UnrecognizedAction::Skip,
                    "{ctx}: {param_type:#x}"
                );
                match param_type {
                    0x8003 => auth = Some(value),
                    0x8004 => hmac = Some(value),
                    _ => {}
                }
            }
            ParamRepr::AdaptationLayerIndication(_) | ParamRepr::ForwardTsnSupported => {}
            ParamRepr::StateCookie(_) => {}
            other => panic!("{ctx}: unexpected parameter {other:?}"),
        }
        // Known or not, none of usrsctp's parameter types parses as another variant.
        let t = u16::from(p.param_type());
        assert_eq!(
            matches!(p, ParamRepr::Unknown { .. }),
            USRSCTP_UNKNOWN_PARAMS.contains(&t),
            "{ctx}: {t:#x}"
        );
    }
    assert_eq!(
        exts.unwrap_or_default(),
        e.exts,
        "{ctx}: supported extensions"
    );
    assert_eq!(
        auth.unwrap_or_default(),
        e.auth_chunks,
        "{ctx}: auth chunk list"
    );
    let hmac_ids: Vec<u16> = hmac
        .unwrap_or_default()
        .chunks(2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
        .collect();
    assert_eq!(hmac_ids, e.hmac_ids, "{ctx}: HMAC ids");
}

/// Compares one parsed chunk with its table entry.
fn check_chunk(ctx: &str, c: &Chunk<&[u8]>, r: &ChunkRepr<'_>, e: &Ck) {
    match (e, r) {
        (Init(e), ChunkRepr::Init(r)) => {
            check_init(ctx, r, e);
            assert_eq!(r.state_cookie(), None, "{ctx}: INIT with a cookie");
        }
        (InitAck(e), ChunkRepr::InitAck(r)) => {
            check_init(ctx, &r.0, e);
            assert!(r.state_cookie().is_some(), "{ctx}: INIT ACK without cookie");
        }
        (CookieEcho(len), ChunkRepr::CookieEcho(r)) => assert_eq!(r.cookie.len(), *len, "{ctx}"),
        (CookieAck, ChunkRepr::CookieAck) | (ShutdownAck, ChunkRepr::ShutdownAck) => {}
        (Data(e), ChunkRepr::Data(r)) => {
            assert_eq!(
                (r.tsn, r.stream_id, r.ssn, r.ppid),
                (e.tsn, e.sid, e.ssn, e.ppid),
                "{ctx}"
            );
            assert_eq!(
                (c.flags(), c.chunk_length()),
                (e.flags, e.len),
                "{ctx}: flags, length"
            );
            assert_eq!(r.flags(), e.flags, "{ctx}: flags from the Repr");
            assert_eq!(
                r.user_data.len(),
                usize::from(e.len) - DATA_HEADER_LEN,
                "{ctx}"
            );
        }
        (Sack(e), ChunkRepr::Sack(r)) => {
            assert_eq!((r.cum_tsn_ack, r.a_rwnd), (e.cum, e.a_rwnd), "{ctx}");
            let gaps: Vec<(u16, u16, u32, u32)> = r
                .gap_ack_blocks
                .iter()
                .map(|g| {
                    let (first, last) = g.tsns(r.cum_tsn_ack);
                    (g.start, g.end, first, last)
                })
                .collect();
            assert_eq!(gaps, e.gaps, "{ctx}: gap ack blocks");
            assert_eq!(r.dup_tsns.len(), e.dups, "{ctx}: duplicate TSNs");
        }
        (Shutdown(cum), ChunkRepr::Shutdown(r)) => assert_eq!(r.cum_tsn_ack, *cum, "{ctx}"),
        (ShutdownComplete { t }, ChunkRepr::ShutdownComplete(r)) => {
            assert_eq!(r.t_bit, *t, "{ctx}: T bit")
        }
        (
            Abort {
                t,
                cause,
                cause_len,
                info,
            },
            ChunkRepr::Abort(r),
        ) => {
            assert_eq!(r.t_bit, *t, "{ctx}: T bit");
            let causes: Vec<CauseRepr<'_>> = r.causes.iter().collect();
            assert_eq!(causes.len(), 1, "{ctx}: one cause");
            assert_eq!(
                causes[0].code(),
                CauseCode::from(*cause),
                "{ctx}: cause code"
            );
            assert_eq!(
                causes[0],
                CauseRepr::UserInitiatedAbort { reason: info },
                "{ctx}"
            );
            assert_eq!(
                causes[0].cause_len(),
                usize::from(*cause_len),
                "{ctx}: cause length"
            );
            let view = Cause::new_checked(c.value()).unwrap();
            assert_eq!(
                view.cause_length(),
                *cause_len,
                "{ctx}: cause length on the wire"
            );
        }
        _ => panic!("{ctx}: expected {}, parsed {:?}", kind(e), r.chunk_type()),
    }
}

fn kind(e: &Ck) -> &'static str {
    match e {
        Init(_) => "INIT",
        InitAck(_) => "INIT-ACK",
        CookieEcho(_) => "COOKIE-ECHO",
        CookieAck => "COOKIE-ACK",
        Data(_) => "DATA",
        Sack(_) => "SACK",
        Shutdown(_) => "SHUTDOWN",
        ShutdownAck => "SHUTDOWN-ACK",
        ShutdownComplete { .. } => "SHUTDOWN-COMPLETE",
        Abort { .. } => "ABORT",
    }
}

#[test]
fn every_capture_in_the_vectors_directory_is_described_here() {
    let on_disk = pcap::capture_names();
    let mut described: Vec<String> = CAPTURES.iter().map(|c| c.name.to_string()).collect();
    described.sort();
    assert_eq!(on_disk, described);
}

#[test]
fn every_frame_parses_and_matches_the_readme() {
    for cap in CAPTURES {
        let frames = pcap::read(cap.name);
        assert_eq!(frames.len(), cap.frames.len(), "{}: frame count", cap.name);
        let mut data_chunks = 0;
        let mut sacks_with_gaps = 0;
        let mut vtags: Vec<(bool, u32)> = Vec::new();
        for (frame, e) in frames.iter().zip(cap.frames) {
            let ctx = format!("{} #{}", cap.name, frame.number);
            assert_eq!(frame.number, e.n, "{ctx}");
            assert_eq!(frame.data.len(), e.len, "{ctx}: frame length");
            let packet = packet_of(frame);
            let header = HeaderRepr::parse(&packet).unwrap_or_else(|err| panic!("{ctx}: {err}"));
            let ports = if e.c2s {
                (CLIENT_PORT, SERVER_PORT)
            } else {
                (SERVER_PORT, CLIENT_PORT)
            };
            assert_eq!((header.src_port, header.dst_port), ports, "{ctx}: ports");
            assert_eq!(header.verification_tag, e.vtag, "{ctx}: verification tag");
            assert!(wire::crc32c::verify(packet.as_bytes()), "{ctx}: CRC32c");
            let crc = crc32c_of(packet.as_bytes());
            assert_eq!(packet.checksum(), crc, "{ctx}: checksum()");
            if !vtags.contains(&(e.c2s, e.vtag)) {
                vtags.push((e.c2s, e.vtag));
            }
            let chunks = chunks_with_bytes(&packet, &ctx);
            let kinds: Vec<ChunkType> = chunks.iter().map(|(c, _)| c.chunk_type()).collect();
            assert_eq!(kinds.len(), e.chunks.len(), "{ctx}: chunk kinds {kinds:?}");
            for (i, ((c, _), ce)) in chunks.iter().zip(e.chunks).enumerate() {
                let ctx = format!("{ctx} chunk {}", i + 1);
                let r = parse_chunk(c, &ctx);
                check_chunk(&ctx, c, &r, ce);
                data_chunks += usize::from(matches!(r, ChunkRepr::Data(_)));
                if let ChunkRepr::Sack(s) = r {
                    sacks_with_gaps += usize::from(!s.gap_ack_blocks.is_empty());
                }
            }
        }
        assert_eq!(data_chunks, cap.data_chunks, "{}: DATA chunks", cap.name);
        assert_eq!(
            sacks_with_gaps, cap.sacks_with_gaps,
            "{}: SACKs with gaps",
            cap.name
        );
        // The README lists them by direction, client first; compare as sets.
        let mut readme = cap.vtags.to_vec();
        readme.sort_unstable();
        vtags.sort_unstable();
        assert_eq!(vtags, readme, "{}: verification tags used", cap.name);
    }
}

#[test]
fn every_chunk_re_emits_its_captured_bytes_padding_included() {
    for name in pcap::capture_names() {
        for frame in pcap::read(&name) {
            let ctx = format!("{name} #{}", frame.number);
            let packet = packet_of(&frame);
            for (i, (c, original)) in chunks_with_bytes(&packet, &ctx).iter().enumerate() {
                let ctx = format!("{ctx} chunk {}", i + 1);
                let r = parse_chunk(c, &ctx);
                // usrsctp pads every chunk, the last one too.
                assert_eq!(original.len(), r.buffer_len(), "{ctx}: padded length");
                assert_eq!(
                    usize::from(c.chunk_length()),
                    r.chunk_len(),
                    "{ctx}: chunk length"
                );
                let mut buf = vec![0xa5; r.buffer_len()];
                r.emit(&mut buf);
                assert_eq!(&buf[..], *original, "{ctx}: re-emitted bytes");
            }
        }
    }
}

#[test]
fn every_packet_re_emits_its_captured_bytes() {
    for name in pcap::capture_names() {
        for frame in pcap::read(&name) {
            let ctx = format!("{name} #{}", frame.number);
            let original = pcap::sctp_bytes(&frame);
            let packet = packet_of(&frame);
            let header = HeaderRepr::parse(&packet).unwrap();
            let reprs: Vec<ChunkRepr<'_>> = chunks_with_bytes(&packet, &ctx)
                .iter()
                .map(|(c, _)| parse_chunk(c, &ctx))
                .collect();
            // Exactly the packet's size: the builder must not need more.
            let mut buf = vec![0xa5; original.len()];
            let mut builder = PacketBuilder::new(&mut buf, &header).unwrap();
            for r in &reprs {
                builder.push(r).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            }
            let built = builder.finish();
            assert_eq!(built.len(), original.len(), "{ctx}: packet length");
            // Checksum recomputed over the emitted packet.
            wire::crc32c::fill(built);
            assert_eq!(
                &built[..],
                original,
                "{ctx}: re-emitted packet, checksum recomputed"
            );
            // And copied from the capture, through the setter.
            built[8..12].fill(0xa5);
            Packet::new_unchecked(&mut *built).set_checksum(packet.checksum());
            assert_eq!(
                &built[..],
                original,
                "{ctx}: re-emitted packet, checksum copied"
            );
        }
    }
}

#[test]
fn every_state_cookie_is_echoed_as_sent() {
    for name in pcap::capture_names() {
        let frames = pcap::read(&name);
        let mut cookie: Option<Vec<u8>> = None;
        let mut echoed = 0;
        for frame in &frames {
            let ctx = format!("{name} #{}", frame.number);
            let packet = packet_of(frame);
            for (c, _) in chunks_with_bytes(&packet, &ctx) {
                match parse_chunk(&c, &ctx) {
                    ChunkRepr::InitAck(r) => cookie = r.state_cookie().map(<[u8]>::to_vec),
                    ChunkRepr::CookieEcho(r) => {
                        assert_eq!(Some(r.cookie), cookie.as_deref(), "{ctx}");
                        echoed += 1;
                    }
                    _ => {}
                }
            }
        }
        assert_eq!(echoed, 1, "{name}: one COOKIE ECHO");
    }
}

#[test]
fn every_lost_data_chunk_is_retransmitted_unchanged() {
    for cap in CAPTURES {
        let frames = pcap::read(cap.name);
        let data_of = |n: usize| -> (u32, Vec<u8>) {
            let frame = &frames[n - 1];
            let ctx = format!("{} #{n}", cap.name);
            let packet = packet_of(frame);
            let chunks = chunks_with_bytes(&packet, &ctx);
            assert_eq!(chunks.len(), 1, "{ctx}");
            match parse_chunk(&chunks[0].0, &ctx) {
                ChunkRepr::Data(d) => (d.tsn, d.user_data.to_vec()),
                other => panic!("{ctx}: {other:?}"),
            }
        };
        for f in cap.frames {
            if let Some(of) = f.retx_of {
                assert_eq!(
                    data_of(f.n),
                    data_of(of),
                    "{} #{} retransmits #{of}",
                    cap.name,
                    f.n
                );
            }
            if f.lost {
                let retx = cap.frames.iter().filter(|g| g.retx_of == Some(f.n)).count();
                assert_eq!(
                    retx, 1,
                    "{} #{}: lost and retransmitted once",
                    cap.name, f.n
                );
            }
        }
    }
}

#[test]
fn usrsctp_init_parameters_round_trip_one_by_one() {
    // Each INIT / INIT ACK parameter, unknown ones included, re-emits to its captured bytes.
    for name in pcap::capture_names() {
        for frame in pcap::read(&name) {
            let ctx = format!("{name} #{}", frame.number);
            let packet = packet_of(&frame);
            for (c, _) in chunks_with_bytes(&packet, &ctx) {
                let init = match parse_chunk(&c, &ctx) {
                    ChunkRepr::Init(r)
                    | ChunkRepr::InitAck(ddpdk_dataplane::wire::sctp::InitAckRepr(r)) => r,
                    _ => continue,
                };
                let mut at = INIT_MIN_LEN;
                for p in init.params.iter() {
                    let original = &c.as_bytes()[at..(at + p.buffer_len()).min(c.as_bytes().len())];
                    let mut buf = vec![0xa5; p.buffer_len()];
                    p.emit(&mut buf);
                    assert_eq!(
                        &buf[..original.len()],
                        original,
                        "{ctx}: {:?}",
                        p.param_type()
                    );
                    assert!(buf[original.len()..].iter().all(|&b| b == 0), "{ctx}");
                    at += p.buffer_len();
                }
                assert!(
                    at >= usize::from(c.chunk_length()),
                    "{ctx}: every parameter visited"
                );
                let ali = init
                    .params
                    .iter()
                    .find(|p| p.param_type() == ParamType::AdaptationLayerIndication);
                if let Some(p) = ali {
                    assert_eq!(p.action(), UnrecognizedAction::SkipAndReport, "{ctx}");
                }
            }
        }
    }
}

/// RFC 9260 §6.8: a packet whose CRC32c does not match is identified as such and never parsed
/// further. Every captured packet passes `new_verified`; any single flipped bit, in the header
/// or in a chunk, makes it `BadChecksum` before a chunk is looked at.
#[test]
fn a_bad_checksum_is_identified_before_any_chunk_is_parsed() {
    use ddpdk_dataplane::wire::Error;
    for name in pcap::capture_names() {
        for f in pcap::read(&name) {
            let sctp = pcap::sctp_bytes(&f);
            assert!(Packet::new_verified(sctp).is_ok(), "{name} #{}", f.number);
            for byte in [0, 5, 8, 11, 12, sctp.len() - 1] {
                let mut bad = sctp.to_vec();
                bad[byte] ^= 0x10;
                assert_eq!(
                    Packet::new_verified(&bad[..]).err(),
                    Some(Error::BadChecksum),
                    "{name} #{} byte {byte}",
                    f.number
                );
            }
        }
    }
    assert_eq!(
        Packet::new_verified(&[0u8; 11][..]).err(),
        Some(ddpdk_dataplane::wire::Error::Truncated)
    );
}

/// The inputs that once broke the `sctp_packet` fuzz target (`dataplane/fuzz/regressions/`),
/// through the target's own check, so the suite holds it without a fuzzer: whatever chunk
/// parses re-emits to bytes that parse to the same Repr. The first kept is an ERROR whose
/// cause did not fit its code: read as an ERROR without causes, it emitted as a chunk that
/// does not parse (RFC 9260 §3.3.10: an ERROR has one or more causes); kept raw, it round-trips.
#[test]
fn every_sctp_packet_fuzz_regression_round_trips() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/regressions/sctp_packet");
    let mut inputs = 0;
    let mut chunks = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        inputs += 1;
        let Ok(packet) = Packet::new_checked(&data[..]) else {
            continue;
        };
        for chunk in packet.chunks() {
            let Ok(chunk) = chunk else { break };
            let Ok(repr) = ChunkRepr::parse(&chunk) else {
                continue;
            };
            let mut buf = vec![0xa5u8; repr.buffer_len()];
            repr.emit(&mut buf);
            let again = Chunk::new_checked(&buf[..]).unwrap();
            assert_eq!(ChunkRepr::parse(&again), Ok(repr), "emit/parse round trip");
            chunks += 1;
        }
    }
    assert!(inputs > 0 && chunks > 0, "{inputs} inputs, {chunks} chunks");
}
