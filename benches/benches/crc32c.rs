//! CRC32c for the SCTP checksum (RFC 9260 Appendix A): the `crc32c` crate against `crc-fast`
//! (its CRC-32/ISCSI, which is CRC32c), on a small packet (64 B), an Ethernet-MTU packet
//! (1500 B) and a jumbo packet (9000 B).
//!
//! Each size is measured next to a plain memcpy of the same bytes in the same run, the
//! baseline a per-packet cost is judged against: the receive path touches every byte once for
//! the checksum and once more to place the payload. `ddpdk sctp_checksum` is the dataplane's own
//! function (the `crc32c` crate over the common header with a zeroed checksum field, rebuilt on
//! the stack, then bytes 12..), to show what skipping the checksum field without copying the
//! packet costs; `crc-fast Digest` is the same computation with crc-fast's streaming API.
//!
//! Run: `cargo bench -p ddpdk-benches --bench crc32c -- --warm-up-time 1 --measurement-time 2`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

use ddpdk_dataplane::wire::crc32c::sctp_checksum;

const SIZES: [usize; 3] = [64, 1500, 9000];

/// Deterministic, non-trivial bytes (an LCG), so neither implementation sees a special case.
fn data(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x1234_5678;
    (0..len)
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 24) as u8
        })
        .collect()
}

/// Both crates must agree with each other and with RFC 3720 §B.4 before anything is timed.
fn sanity() {
    assert_eq!(crc32c::crc32c(&[0u8; 32]), 0x8A91_36AA);
    assert_eq!(crc_fast::crc32_iscsi(&[0u8; 32]), 0x8A91_36AA);
    for len in [
        0, 1, 7, 8, 15, 16, 31, 63, 64, 65, 255, 256, 1500, 4096, 9000,
    ] {
        let d = data(len);
        let a = crc32c::crc32c(&d);
        assert_eq!(
            crc_fast::crc32_iscsi(&d),
            a,
            "crc-fast crc32_iscsi, {len} bytes"
        );
        let generic = crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, &d);
        assert_eq!(
            generic,
            u64::from(a),
            "crc-fast checksum(Crc32Iscsi), {len} bytes"
        );
        if len >= 12 {
            let mut z = d.clone();
            z[8..12].fill(0);
            assert_eq!(
                sctp_checksum(&d),
                crc32c::crc32c(&z),
                "sctp_checksum, {len} bytes"
            );
        }
    }
}

fn bench(c: &mut Criterion) {
    sanity();
    let mut group = c.benchmark_group("crc32c");
    for len in SIZES {
        let src = data(len);
        let mut dst = vec![0u8; len];
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_with_input(BenchmarkId::new("memcpy (baseline)", len), &src, |b, s| {
            b.iter(|| {
                dst.copy_from_slice(black_box(s));
                black_box(&mut dst);
            })
        });
        group.bench_with_input(BenchmarkId::new("crc32c crate", len), &src, |b, s| {
            b.iter(|| crc32c::crc32c(black_box(s)))
        });
        group.bench_with_input(
            BenchmarkId::new("crc-fast crc32_iscsi", len),
            &src,
            |b, s| b.iter(|| crc_fast::crc32_iscsi(black_box(s))),
        );
        group.bench_with_input(
            BenchmarkId::new("crc-fast checksum(Crc32Iscsi)", len),
            &src,
            |b, s| b.iter(|| crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, black_box(s))),
        );
        // What the dataplane would run with crc-fast: the same three parts through its Digest.
        group.bench_with_input(
            BenchmarkId::new("crc-fast Digest 0..8+zeros+12..", len),
            &src,
            |b, s| {
                b.iter(|| {
                    let s = black_box(s);
                    let mut d = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
                    d.update(&s[..8]);
                    d.update(&[0u8; 4]);
                    d.update(&s[12..]);
                    d.finalize()
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("ddpdk sctp_checksum", len),
            &src,
            |b, s| b.iter(|| sctp_checksum(black_box(s))),
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
