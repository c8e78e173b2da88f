//! The receive-side parse of one DDP-over-SCTP frame, as a data core does it before placement:
//! Ethernet/IPv4 slicing, CRC32c verification, the SCTP common header, then each chunk (a DATA
//! chunk down to its tagged DDP header, or a SACK). Measured at 64, 1500 and 9000-byte frames
//! (the 64-byte one is a SACK plus Ethernet padding: the headers of a tagged DDP segment alone
//! take 78 bytes), in time per frame and bytes per second, next to a plain copy of the same bytes
//! in the same run (the baseline: these machines are shared, only the ratio means something).
//!
//!     cargo bench -p ddpdk-benches --bench wire
#![forbid(unsafe_code)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ddpdk_dataplane::wire::ddp::{self, SegmentPacket, SegmentRepr};
use ddpdk_dataplane::wire::sctp::{self, ChunkRepr, DataRepr, HeaderRepr, PacketBuilder, SackRepr};
use ddpdk_dataplane::wire::{crc32c, link};

/// Ethernet + IPv4 + SCTP common header + DATA chunk header + DDP-SSN + tagged DDP header.
const OVERHEAD: usize =
    14 + 20 + sctp::HEADER_LEN + sctp::DATA_HEADER_LEN + ddp::DDP_SSN_LEN + ddp::TAGGED_HEADER_LEN;
const STAG: u32 = 0x0001_2a05;
const TO: u64 = 0x1000;
const CUM_TSN_ACK: u32 = 41;

/// Ethernet / IPv4 / an SCTP packet holding `chunk`, with its CRC32c.
fn sctp_frame(chunk: &ChunkRepr<'_>) -> Vec<u8> {
    let mut sctp_buf = vec![0u8; 16 * 1024];
    let hdr = HeaderRepr {
        src_port: 5001,
        dst_port: 5002,
        verification_tag: 0xb430_cb8d,
    };
    let mut b = PacketBuilder::new(&mut sctp_buf, &hdr).expect("header fits");
    b.push(chunk).expect("chunk fits");
    let packet = b.finish();
    crc32c::fill(packet);
    let mut out = Vec::new();
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .write(&mut out, etherparse::IpNumber(link::IP_PROTO_SCTP), packet)
        .expect("frame");
    out
}

/// A frame of exactly `frame_len` bytes: one tagged DDP segment, or for frames too small for
/// that, a SACK padded to `frame_len` as a sender pads a minimum-size Ethernet frame.
fn frame(frame_len: usize) -> Vec<u8> {
    if frame_len <= OVERHEAD {
        let sack = SackRepr {
            cum_tsn_ack: CUM_TSN_ACK,
            a_rwnd: 131_072,
            gap_ack_blocks: sctp::List::empty(),
            dup_tsns: sctp::List::empty(),
        };
        let mut out = sctp_frame(&ChunkRepr::Sack(sack));
        assert!(
            out.len() <= frame_len,
            "a SACK frame is {} bytes",
            out.len()
        );
        out.resize(frame_len, 0);
        return out;
    }
    let payload: Vec<u8> = (0..payload_len(frame_len)).map(|i| i as u8).collect();
    let seg = SegmentRepr {
        ddp_ssn: 7,
        last: true,
        header: ddp::segment::Header::Tagged(ddp::segment::TaggedHeader {
            rsvd_ulp: 0,
            stag: STAG,
            to: TO,
        }),
        payload: &payload,
    };
    let mut user_data = vec![0u8; seg.buffer_len()];
    seg.emit(&mut SegmentPacket::new_unchecked(&mut user_data[..]))
        .expect("segment fits");
    let data = DataRepr {
        immediate: false,
        unordered: true,
        beginning: true,
        ending: true,
        tsn: 1,
        stream_id: 3,
        ssn: 0,
        ppid: sctp::PPID_DDP_SEGMENT,
        user_data: &user_data,
    };
    // Chunks are padded to 4 bytes, so a frame of chunks is 46 + 4k bytes long: the payload
    // fills all but the last 0 to 3 bytes, which the frame carries as Ethernet trailer.
    let mut out = sctp_frame(&ChunkRepr::Data(data));
    assert!(
        frame_len - out.len() < 4,
        "{} bytes for a {frame_len}-byte frame",
        out.len()
    );
    out.resize(frame_len, 0);
    out
}

/// The ULP payload length of the DDP segment in a `frame_len`-byte frame built by [`frame`].
fn payload_len(frame_len: usize) -> usize {
    let headers = 14 + 20 + sctp::HEADER_LEN;
    ((frame_len - headers) & !3)
        - (sctp::DATA_HEADER_LEN + ddp::DDP_SSN_LEN + ddp::TAGGED_HEADER_LEN)
}

/// What a data core does with a frame before it places the payload or updates its send state;
/// returns (STag, TO, payload length) of a DDP segment or (0, cumulative TSN ack, 0) of a SACK.
fn receive(frame: &[u8]) -> Option<(u32, u64, usize)> {
    let f = link::parse_sctp(frame).ok()?;
    let packet = sctp::Packet::new_verified(f.sctp).ok()?;
    HeaderRepr::parse(&packet).ok()?;
    let mut found = None;
    for chunk in packet.chunks_ref() {
        match ChunkRepr::parse(&chunk.ok()?) {
            Ok(ChunkRepr::Data(d)) => {
                let seg =
                    SegmentRepr::parse(&SegmentPacket::new_checked(d.user_data).ok()?).ok()?;
                if let ddp::segment::Header::Tagged(t) = seg.header {
                    found = Some((t.stag, t.to, seg.payload.len()));
                }
            }
            Ok(ChunkRepr::Sack(s)) => found = Some((0, u64::from(s.cum_tsn_ack), 0)),
            _ => {}
        }
    }
    found
}

fn parse_and_verify(c: &mut Criterion) {
    let mut g = c.benchmark_group("rx_parse");
    for size in [64usize, 1500, 9000] {
        let f = frame(size);
        let expected = if size > OVERHEAD {
            (STAG, TO, payload_len(size))
        } else {
            (0, u64::from(CUM_TSN_ACK), 0)
        };
        assert_eq!(receive(&f), Some(expected), "the {size}-byte frame parses");
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_with_input(BenchmarkId::new("memcpy", size), &f, |b, f| {
            let mut dst = vec![0u8; f.len()];
            b.iter(|| dst.copy_from_slice(black_box(f)));
        });
        g.bench_with_input(BenchmarkId::new("crc32c_verify", size), &f, |b, f| {
            let sctp = link::parse_sctp(f).expect("frame").sctp;
            b.iter(|| crc32c::verify(black_box(sctp)))
        });
        g.bench_with_input(BenchmarkId::new("parse_and_verify", size), &f, |b, f| {
            b.iter(|| receive(black_box(f)))
        });
    }
    g.finish();
}

criterion_group!(benches, parse_and_verify);
criterion_main!(benches);
