//! Zero-copy transmit (issue 6 item 4): a tagged write whose bytes are named in a registered
//! region of the sender (RFC 4296 §2.1.2's local buffer) leaves in buffer chains that
//! reference the region, where the port can chain; where it cannot, the bytes are copied
//! into the frame. Either way the peer places exactly the region's bytes, and the CRC32c
//! (software, or the device's) covers them.
//!
//! One data core per endpoint, polled in lockstep on the test thread over the in-memory port
//! pair, whose emulated device counts the region spans it was handed.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
use rt::{remote_write, runtime, tagged, Lockstep, PORT};

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use ddpdk_control::conn::Status;
use ddpdk_control::conn::{Payload, PostError};
use ddpdk_control::memory::RegionId;
use ddpdk_control::runtime::{Control, CoreStats, DataCore, Event, RuntimeConfig};
use ddpdk_control::xmit::INLINE_SPANS_MAX;
use ddpdk_dataplane::port::mem::{pair_with_offload, MemPort};
use ddpdk_dataplane::port::ChecksumOffload;
use ddpdk_dataplane::wire::crc32c::crc32c;

const A4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// Writes per run, and bytes per write: several segments each, the last one short and not a
/// multiple of 4 (so chunks need padding after their region span).
const WRITES: usize = 6;
const SIZE: usize = 10_001;

type Side = (Control<MemPort>, Vec<DataCore<MemPort>>);

fn side(port: &Arc<MemPort>, v4: Ipv4Addr, seed: u8) -> Side {
    let cfg = RuntimeConfig {
        cores: 1,
        ..RuntimeConfig::default()
    };
    runtime(Arc::clone(port), v4, None, seed, cfg)
}

/// What one run saw.
struct Run {
    client_core: CoreStats,
    server_core: CoreStats,
    client_events: Vec<Event>,
    /// CRC32c of what the server placed, and of what the client's region held.
    placed: u32,
    sent: u32,
    attached: u64,
    crc_filled: u64,
}

/// Two one-core endpoints; the client registers nothing remote but writes `WRITES` messages
/// from its own region into the server's registered region, each message's bytes named by
/// `payload(source region, offset)`.
fn run(
    offload: ChecksumOffload,
    zero_copy: bool,
    size: usize,
    payload: impl Fn(RegionId, u64) -> Payload,
) -> Run {
    // Queue 1 is the control thread's TX queue.
    let (pa, pb) = pair_with_offload(2, 4096, offload);
    pa.set_zero_copy(zero_copy);
    let (pa, pb) = (Arc::new(pa), Arc::new(pb));
    let (mut a, b) = (side(&pa, A4, 1), side(&pb, B4, 2));
    let total = WRITES * size;
    let source = a.0.memory_mut().alloc_region(total + 4096).unwrap();
    let image: Vec<u8> = (0..total as u32).map(|i| (i * 13 + 5) as u8).collect();
    // The messages start at an odd offset of the source region: spans need no alignment.
    let base = 3u64;
    a.0.memory()
        .region(source)
        .unwrap()
        .place(base, &image)
        .unwrap();
    let (mut l, reg, sink) = Lockstep::open_to_region(a, b, IpAddr::V4(B4), PORT, total);
    for k in 0..WRITES {
        let at = (k * size) as u64;
        let op = tagged(k as u64 + 1, reg.stag, at, payload(source, base + at));
        l.ca.submit(l.conn, op).unwrap();
        // A small write waits for the one before: each then has a packet of its own, not
        // bundled with the others (whose spans together would be more than a small packet's).
        if size <= INLINE_SPANS_MAX {
            l.run_until("the write's completion", |l| {
                l.ea.iter()
                    .filter(|e| matches!(e, Event::Completion { .. } | Event::Refused { .. }))
                    .count()
                    > k
            });
        }
    }
    l.run_until("every write's end", |l| {
        let ended =
            l.ea.iter()
                .filter(|e| matches!(e, Event::Completion { .. } | Event::Refused { .. }))
                .count();
        ended == WRITES
    });
    let placed =
        l.cb.memory()
            .region(sink)
            .unwrap()
            .crc32c(0, total)
            .unwrap();
    Run {
        client_core: l.ka[0].stats(),
        server_core: l.kb[0].stats(),
        client_events: l.ea,
        placed,
        sent: crc32c(&image),
        attached: pa.attached(),
        crc_filled: pa.crc_filled(),
    }
}
fn from_region(region: RegionId, offset: u64) -> Payload {
    Payload::Region {
        region,
        offset,
        len: SIZE as u32,
    }
}

fn all_succeeded(r: &Run) -> bool {
    let ok = r
        .client_events
        .iter()
        .filter(|e| matches!(e, Event::Completion { completion, .. } if completion.status == Status::Success))
        .count();
    ok == WRITES
}

/// Issue 6 item 4: with a port that chains buffers, every segment's payload leaves by
/// reference to the source region (none copied), the software CRC32c over header and region
/// bytes is right (the server discards nothing), and the server places exactly the region's
/// bytes (RFC 5041 §5.4: each write completes once acknowledged).
#[test]
fn region_sends_leave_by_reference_and_arrive_exact() {
    let r = run(ChecksumOffload::default(), true, SIZE, from_region);
    assert!(all_succeeded(&r), "{:?}", r.client_events);
    assert_eq!(r.placed, r.sent, "placed bytes are the source region's");
    // 10 001 bytes at a MULPDU of 1418 (tagged: 1410 of payload) is 8 segments a write.
    // The last, 131 bytes, goes copied into its frame when no other span shares its packet
    // (at most `INLINE_SPANS_MAX` bytes of spans: a chain would cost more than the copy).
    let segments = (WRITES * SIZE.div_ceil(1410)) as u64;
    let tx = &r.client_core.tx;
    assert!(
        tx.zero_copy_spans + tx.inlined_spans >= segments,
        "{} spans by reference and {} inlined for {segments} segments",
        tx.zero_copy_spans,
        tx.inlined_spans
    );
    assert!(
        tx.inlined_spans <= WRITES as u64,
        "only a write's short last span"
    );
    assert_eq!(r.client_core.tx.copied_spans, 0);
    assert_eq!(
        r.attached, r.client_core.tx.zero_copy_spans,
        "each span attached once"
    );
    assert_eq!(r.server_core.discarded, 0, "every CRC32c was right");
}

/// Small writes (at most `INLINE_SPANS_MAX` bytes of region spans in a packet) go as one
/// copied buffer even where the port chains: nothing attached, the span's bytes read from the
/// region when framed, the CRC32c over the whole packet right, and the server places exactly
/// the region's bytes.
#[test]
fn small_region_sends_are_copied_into_one_buffer() {
    const SMALL: usize = 100;
    const { assert!(SMALL <= INLINE_SPANS_MAX) };
    let r = run(ChecksumOffload::default(), true, SMALL, |region, offset| {
        Payload::Region {
            region,
            offset,
            len: SMALL as u32,
        }
    });
    assert!(all_succeeded(&r), "{:?}", r.client_events);
    assert_eq!(r.placed, r.sent, "placed bytes are the source region's");
    assert_eq!(r.client_core.tx.inlined_spans, WRITES as u64);
    assert_eq!(r.client_core.tx.zero_copy_spans, 0);
    assert_eq!(r.client_core.tx.copied_spans, 0);
    assert_eq!(r.attached, 0, "nothing attached");
    assert_eq!(r.server_core.discarded, 0, "every CRC32c was right");
}

/// The same writes through a port that cannot chain: every span is copied into its frame,
/// nothing is attached, and the bytes and checksums are just as right.
#[test]
fn without_chains_region_bytes_are_copied_into_the_frame() {
    let r = run(ChecksumOffload::default(), false, SIZE, from_region);
    assert!(all_succeeded(&r), "{:?}", r.client_events);
    assert_eq!(r.placed, r.sent);
    assert_eq!(r.client_core.tx.zero_copy_spans, 0);
    assert!(r.client_core.tx.copied_spans > 0);
    assert_eq!(r.attached, 0);
    assert_eq!(r.server_core.discarded, 0);
}

/// With SCTP checksum offload the device computes the CRC32c over the whole chain (RFC 9260
/// §6.8): the core leaves it to the device for every frame, spans go by reference, and the
/// receiving device finds every checksum good.
#[test]
fn the_device_checksums_chains_with_offload() {
    let offload = ChecksumOffload { tx: true, rx: true };
    let r = run(offload, true, SIZE, from_region);
    assert!(all_succeeded(&r), "{:?}", r.client_events);
    assert_eq!(r.placed, r.sent);
    assert!(r.client_core.tx.zero_copy_spans > 0);
    assert!(r.crc_filled >= r.client_core.tx.zero_copy_spans);
    assert_eq!(r.server_core.checksum_bad, 0);
}

/// A send naming bytes outside every region of the sender is refused when posted, with the
/// reason, and nothing is sent (RFC 4296 §2.1.2: the local buffer must be registered memory).
#[test]
fn a_span_outside_the_regions_is_refused() {
    let r = run(ChecksumOffload::default(), true, SIZE, |region, offset| {
        if offset == 3 {
            // The first write reaches past the end of the source region.
            Payload::Region {
                region,
                offset: (WRITES * SIZE) as u64,
                len: 4097 + 3,
            }
        } else if offset == 3 + SIZE as u64 {
            // The second names a region that does not exist.
            Payload::Region {
                region: RegionId(region.0 + 100),
                offset: 0,
                len: 16,
            }
        } else {
            from_region(region, offset)
        }
    });
    let refused: Vec<_> = r
        .client_events
        .iter()
        .filter_map(|e| match e {
            Event::Refused { error, .. } => Some(*error),
            _ => None,
        })
        .collect();
    assert_eq!(refused, vec![PostError::BadRegion, PostError::BadRegion]);
    let ok = r
        .client_events
        .iter()
        .filter(|e| matches!(e, Event::Completion { completion, .. } if completion.status == Status::Success))
        .count();
    assert_eq!(ok, WRITES - 2, "the other writes went");
}

/// A send may name its bytes by a local STag (`Payload::Local`, RFC 4296's local buffer as
/// verbs name it): the owning core checks it against its STag replica as a verbs provider
/// checks a local key. A registration in the stream session's protection domain sends its
/// bytes (by reference); another domain's STag, an unknown STag, a stale key and a span past
/// the registration are refused with `BadLocalStag`, and nothing of them is sent.
#[test]
fn local_stags_are_checked_like_local_keys() {
    use ddpdk_control::memory::MemoryRegistration;
    use ddpdk_dataplane::mem::{Access, Stag};
    let (pa, pb) = pair_with_offload(2, 4096, ChecksumOffload::default());
    let (pa, pb) = (Arc::new(pa), Arc::new(pb));
    let (mut a, mut b) = (side(&pa, A4, 1), side(&pb, B4, 2));
    let total = 4 * SIZE;
    let bpd = b.0.memory_mut().alloc_pd();
    let sink = b.0.memory_mut().alloc_region(total).unwrap();
    let reg =
        b.0.memory_mut()
            .register(remote_write(bpd, sink, total as u64))
            .unwrap();
    let apd = a.0.memory_mut().alloc_pd();
    let other_pd = a.0.memory_mut().alloc_pd();
    let source = a.0.memory_mut().alloc_region(total).unwrap();
    let image: Vec<u8> = (0..total as u32).map(|i| (i * 7 + 1) as u8).collect();
    a.0.memory()
        .region(source)
        .unwrap()
        .place(0, &image)
        .unwrap();
    let local = |pd| MemoryRegistration {
        pd,
        region: source,
        offset: SIZE as u64,
        len: 2 * SIZE as u64,
        access: Access::LOCAL_WRITE,
        stream: None,
        to_base: 0x1000,
    };
    let mine = a.0.memory_mut().register(local(apd)).unwrap();
    let theirs = a.0.memory_mut().register(local(other_pd)).unwrap();
    let mut l = Lockstep::open(a, b, IpAddr::V4(B4), PORT, apd, bpd);
    let send = |stag: Stag, to: u64| Payload::Local {
        stag,
        to,
        len: SIZE as u32,
    };
    let stale = Stag::new(mine.stag.index(), mine.stag.key().wrapping_add(1));
    let posts = [
        // The second slot of the registration (region bytes 2·SIZE..3·SIZE) to TO 0.
        (1, send(mine.stag, 0x1000 + SIZE as u64)),
        (2, send(theirs.stag, 0x1000)),
        (3, send(Stag::new(0x00ab_cdef, 1), 0x1000)),
        (4, send(stale, 0x1000)),
        (5, send(mine.stag, 0x1000 + SIZE as u64 + 1)),
        (6, send(mine.stag, 0x0fff)),
    ];
    for (wr, data) in posts {
        l.ca.submit(l.conn, tagged(wr, reg.stag, 0, data)).unwrap();
    }
    l.run_until("every post's end", |l| {
        l.ea.iter()
            .filter(|e| matches!(e, Event::Completion { .. } | Event::Refused { .. }))
            .count()
            == 6
    });
    let refused =
        l.ea.iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::Refused {
                        error: PostError::BadLocalStag,
                        ..
                    }
                )
            })
            .count();
    assert_eq!(refused, 5, "{:?}", l.ea);
    assert!(
        l.ea.iter()
            .any(|e| matches!(e, Event::Completion { completion, .. }
            if completion.wr_id == 1 && completion.status == Status::Success)),
        "{:?}",
        l.ea
    );
    let placed = l.cb.memory().region(sink).unwrap().crc32c(0, SIZE).unwrap();
    assert_eq!(
        placed,
        crc32c(&image[2 * SIZE..3 * SIZE]),
        "the registration's bytes"
    );
    assert!(l.ka[0].stats().tx.zero_copy_spans > 0);
}
