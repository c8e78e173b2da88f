//! The send path of one core (issue 13 item 5): tagged writes posted from a registered region,
//! one DDP segment each, cut and framed into SCTP packets and checksummed, next to a plain copy
//! of the same payload bytes out of the same region, in the same run. The ratio copy time /
//! send-path time is the send path's efficiency (1.0 = as fast as memcpy).
//!
//! Two send paths per size, over the same writes:
//! - `gather`: what a data core does with a zero-copy send. `poll_transmit_gather` leaves a
//!   hole for each region span in the transmit queue's frame, and the runtime's transmit side
//!   (`xmit::Tx`, as `DataCore` drives it) frames the packet through the neighbour table,
//!   computes the CRC32c over header and spans in place and queues a buffer chain with each
//!   span attached by reference; a packet with at most `xmit::INLINE_SPANS_MAX` bytes of spans
//!   goes as one copied buffer instead. The device is a sink ([`ddpdk_benches::sink`]): heap
//!   buffers, spans held by length, frames counted and dropped; what DPDK's mempool and PMD
//!   would do is not measured.
//! - `copy`: `poll_transmit`, which copies the span into the packet and fills the CRC32c: the
//!   path of a port that cannot chain buffers.
//!
//! The peer is not simulated: every second packet, and whenever the sender has nothing left to
//! send, a SACK for everything sent so far (a 28-byte packet the peer's association made during
//! the handshake, its Cumulative TSN Ack and CRC32c rewritten) goes into the sender, which
//! processes it as the runtime would (acknowledgement, completion of the write). Making that
//! SACK is inside the timed loop; it is a small part of the work.
//!
//! `cargo run --release -p ddpdk-benches --bin ddp-tx-bench -- --sizes 64,512,1404,8904`

use ddpdk_dataplane::outln;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Instant as WallClock;

use clap::Parser;
use ddpdk_benches::memory::{remote_write, with_region};
use ddpdk_benches::sink::SinkPort;
use ddpdk_control::conn::{
    Accept, ConnConfig, Connection, Indication, Listener, Payload, SendKind, SendRequest,
};
use ddpdk_control::memory::{Memory, RegionId, RegionTable};
use ddpdk_control::session::{Event, PendingLimit};
use ddpdk_control::xmit::{Tx, INLINE_SPANS_MAX, STOCK};
use ddpdk_dataplane::mem::{Pd, Stag};
use ddpdk_dataplane::net::Interface;
use ddpdk_dataplane::port::region::Region;
use ddpdk_dataplane::port::Port;
use ddpdk_dataplane::sctp::{Config, Endpoint, Hole, Instant};
use ddpdk_dataplane::wire::crc32c;

#[derive(Parser, Debug)]
#[command(about = "DDP send path (segments cut, framed, checksummed) vs memcpy of the same bytes")]
struct Args {
    /// DDP payload sizes in bytes (one tagged write of one segment each).
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 512, 1404, 8904])]
    sizes: Vec<usize>,
    /// Payload bytes per measurement (the write count follows from the size).
    #[arg(long, default_value_t = 256 << 20)]
    bytes: usize,
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// Which send paths to run, comma-separated (`gather`, `copy`).
    #[arg(long, value_delimiter = ',', default_values_t = [String::from("gather"), String::from("copy")])]
    paths: Vec<String>,
    /// Segments per write: 1 measures the per-write costs with every segment; more (64, say)
    /// is a bulk sender's shape, as `ddp-goodput-bench`'s 1 MiB writes are, where a segment
    /// pays for its own cut, framing and acknowledgement and little else.
    #[arg(long, default_value_t = 1)]
    segments: usize,
}

/// The source region the writes come from: larger than the caches, as a sender's data is.
const REGION: usize = 256 << 20;
/// The client's address; `C` is the same as an `IpAddr`.
const C4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const C: IpAddr = IpAddr::V4(C4);
const S: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
const STREAM: u16 = 1;
/// Segments posted ahead of their completions (16 MiB of 64 KiB writes in the goodput bench).
const IN_FLIGHT: usize = 512;

/// The link MTU a write of `size` bytes travels at: 1500 up to its largest segment's payload
/// (1404 bytes, as in `ddp-goodput-bench`), jumbo frames above.
fn mtu(size: usize) -> usize {
    if size <= 1404 {
        1500
    } else {
        9000
    }
}

fn config(port: u16, mtu: usize) -> Config {
    Config {
        local_port: port,
        path_mtu: mtu,
        send_slots: 1024,
        // A window the bench's own SACKs keep open.
        a_rwnd: 64 << 20,
        hb_interval: None,
        ..Config::default()
    }
}

/// A client connection with an accepted DDP Stream Session on [`STREAM`], and a SACK its peer
/// sent (the template the timed loop rewrites).
struct Pair {
    client: Connection,
    sack: Vec<u8>,
}

/// Moves packets both ways until neither side has any; the server accepts every Initiate.
/// Returns the last SACK-only packet the server sent.
fn exchange(
    now: Instant,
    c: &mut Connection,
    s: &mut Connection,
    cmem: &Memory,
    smem: &Memory,
    spd: Pd,
) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 65536];
    let mut sack = None;
    loop {
        let mut moved = false;
        while let Some(n) = c.poll_transmit(now, &mut buf) {
            moved = true;
            let _ = s.handle(now, &buf[..n], smem);
        }
        while let Some(i) = s.poll_indication() {
            if let Indication::Session {
                stream,
                event: Event::InitiateReceived { .. },
            } = i
            {
                s.accept(stream, spd, b"").expect("accept the Initiate");
            }
        }
        while let Some(n) = s.poll_transmit(now, &mut buf) {
            moved = true;
            if n == 28 && buf[12] == 3 {
                sack = Some(buf[..n].to_vec());
            }
            let _ = c.handle(now, &buf[..n], cmem);
        }
        while c.poll_indication().is_some() {}
        while c.poll_completion().is_some() {}
        if !moved {
            return sack;
        }
    }
}

fn pair(now: Instant, cmem: &Memory, cpd: Pd, mtu: usize) -> Pair {
    let (mut smem, _) = Memory::new(64, 0, 5);
    let spd = smem.alloc_pd();
    let listener = |port| {
        let ep = Endpoint::new(config(port, mtu), [port as u8; 32]).expect("config");
        Listener::new(ep, ConnConfig::default(), PendingLimit::new(4))
    };
    let (mut cl, mut sl) = (listener(5001), listener(5002));
    let mut client = cl.connect(now, S, 5002);
    client.use_regions(Arc::clone(cmem.region_table()));
    let mut buf = vec![0u8; 65536];
    let mut out = vec![0u8; 65536];
    let mut server = None;
    while server.is_none() {
        let n = client
            .poll_transmit(now, &mut buf)
            .expect("INIT or COOKIE ECHO");
        match sl.handle(now, C, &buf[..n], &mut out, &smem) {
            Accept::Reply(m) => {
                let _ = client.handle(now, &out[..m], cmem);
            }
            Accept::Connection(s) => server = Some(s),
            Accept::Ignored => panic!("the server ignored the handshake"),
        }
    }
    let mut server = server.expect("a server connection");
    let _ = exchange(now, &mut client, &mut server, cmem, &smem, spd);
    client.initiate(STREAM, cpd, b"").expect("Initiate");
    let _ = exchange(now, &mut client, &mut server, cmem, &smem, spd);
    // One write lands in a region of the server's, so the server's last packet is a SACK the
    // loop can rewrite. The timed writes name another STag and never reach the server.
    let landing_region = smem
        .add_region(Region::new(1 << 16).expect("the server's region"))
        .expect("an empty region table");
    let landing = remote_write(&mut smem, spd, landing_region, 1 << 16);
    client
        .post_send(write(0, landing, 0, 64))
        .expect("the first write");
    let sack = exchange(now, &mut client, &mut server, cmem, &smem, spd)
        .or_else(|| {
            // The delayed SACK: the server's timer.
            server.handle_timeout(Instant::from_nanos(now.as_nanos() + 1_000_000_000));
            exchange(now, &mut client, &mut server, cmem, &smem, spd)
        })
        .expect("a SACK from the server");
    Pair { client, sack }
}

fn write(wr_id: u64, sink: Stag, offset: u64, len: u32) -> SendRequest {
    SendRequest {
        wr_id,
        stream: STREAM,
        kind: SendKind::Tagged {
            stag: sink,
            to: offset,
            rsvd_ulp: 0,
        },
        data: Payload::Region {
            region: RegionId(0),
            offset,
            len,
        },
        signaled: true,
    }
}

/// The TSN of the packet's last DATA chunk (RFC 9260 §3.3.1): small writes are bundled.
fn data_tsn(packet: &[u8]) -> Option<u32> {
    let (mut off, mut tsn) = (12, None);
    while let Some(h) = packet.get(off..off + 8) {
        let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
        if h[0] == 0 {
            tsn = Some(u32::from_be_bytes([h[4], h[5], h[6], h[7]]));
        }
        off += (len.max(4) + 3) & !3;
    }
    tsn
}

/// Every write of `size` bytes through one send path; returns seconds and packets. Not
/// inlined: `callgrind-tx-stages.sh` counts what it does by its name.
#[inline(never)]
fn run(
    path: &str,
    pair: &mut Pair,
    memory: &Memory,
    sink: Stag,
    size: usize,
    n: usize,
) -> (f64, u64) {
    let now = Instant::from_nanos(1_000_000_000);
    let slots = REGION / size;
    let segments = size.div_ceil(pair.client.max_sizes().mulpdu - 14);
    let in_flight = (IN_FLIGHT / segments).max(1);
    let mut buf = vec![0u8; 65536];
    let regions = memory.region_table().load();
    let c = &mut pair.client;
    let sack = &mut pair.sack;
    let (mut posted, mut completed, mut packets) = (0usize, 0usize, 0u64);
    let mut unacked: Option<u32> = None;
    let mut since_sack = 0;
    let ack = |c: &mut Connection, tsn: u32, sack: &mut Vec<u8>| {
        // RFC 9260 §3.3.4: Cumulative TSN Ack at chunk offset 4.
        sack[16..20].copy_from_slice(&tsn.to_be_bytes());
        // Not crc32c::fill: callgrind-tx-stages.sh counts that as the sender's own.
        sack[8..12].fill(0);
        let crc = crc32c::crc32c(sack);
        sack[8..12].copy_from_slice(&crc.to_le_bytes());
        sack_in(c, now, sack, memory);
    };
    let gather = path == "gather";
    let (mut tx, mut iface) = transmit_side();
    let h = Interface::header_len(S);
    let t0 = WallClock::now();
    while completed < n {
        while posted < n && posted - completed < in_flight {
            let offset = ((posted % slots) * size) as u64;
            c.post_send(write(posted as u64, sink, offset, size as u32))
                .expect("post a write");
            posted += 1;
        }
        loop {
            let tsn = if gather {
                let Some((len, holes)) = c.poll_transmit_gather(now, &mut tx.frame[h..]) else {
                    break;
                };
                let tsn = data_tsn(&tx.frame[h..h + len]);
                transmit(&mut tx, &mut iface, now, len, holes, &regions);
                tsn
            } else {
                let Some(len) = c.poll_transmit(now, &mut buf) else {
                    break;
                };
                black_box(&buf[..len]);
                data_tsn(&buf[..len])
            };
            packets += 1;
            // As a data core's `Quiet` does: a packet that left nothing owed ends the transmit
            // opportunity without the call that would find nothing; a SACK handled after it
            // (a change) gives the next one.
            let drained = c.association().owes_nothing();
            if drained {
                c.end_transmit_opportunity();
            }
            let mut acked = false;
            if let Some(t) = tsn {
                unacked = Some(t);
                since_sack += 1;
                if since_sack == 2 {
                    ack(c, t, sack);
                    (unacked, since_sack, acked) = (None, 0, true);
                }
            }
            if drained && !acked {
                break;
            }
        }
        flush(&mut tx);
        if let Some(t) = unacked.take() {
            ack(c, t, sack);
            since_sack = 0;
        }
        while c.poll_completion().is_some() {
            completed += 1;
        }
    }
    let time = t0.elapsed().as_secs_f64();
    if gather {
        // The path measured is the one the runtime takes: every packet reached the device,
        // large spans by reference, small ones copied (none fell back to a copy).
        let (frames, _, attached) = tx.port().taken();
        let spans_by_reference = size > INLINE_SPANS_MAX;
        assert_eq!(
            frames, packets,
            "every packet framed and sent: {:?}",
            tx.stats
        );
        assert_eq!(
            (attached > 0, tx.stats.copied_spans),
            (spans_by_reference, 0),
            "{:?}",
            tx.stats
        );
    }
    (time, packets)
}

/// The client's transmit queue on a sink device, and an interface that knows the server's
/// link address, as a data core has them once the association is up.
fn transmit_side() -> (Tx<SinkPort>, Interface) {
    let port = Arc::new(SinkPort::default());
    let mut iface = Interface::new(port.mac(), Some(C4), None);
    iface.learn_static(S, [2, 0, 0, 0, 0, 2]);
    (Tx::with_stock(port, 0, STOCK), iface)
}

/// The peer's SACK into the sender, under a name of its own for `callgrind-tx-stages.sh`.
#[inline(never)]
fn sack_in(c: &mut Connection, now: Instant, sack: &[u8], memory: &Memory) {
    // Kept from a tail call, which callgrind would count as the caller's.
    let _ = black_box(c.handle(now, sack, memory));
}

/// The queued frames to the device, under a name of its own for `callgrind-tx-stages.sh`.
#[inline(never)]
fn flush(tx: &mut Tx<SinkPort>) {
    tx.flush();
}

/// One gathered packet through the runtime's transmit side, under a name of its own for
/// `callgrind-tx-stages.sh`.
#[inline(never)]
fn transmit(
    tx: &mut Tx<SinkPort>,
    iface: &mut Interface,
    now: Instant,
    len: usize,
    holes: &[Hole],
    regions: &RegionTable,
) {
    tx.send_sctp_gather(now, iface, S, len, holes, regions, false);
}

/// A plain copy of every write's bytes out of the region into a packet buffer, a segment at a
/// time: the baseline.
fn memcpy(memory: &Memory, segment: usize, segments: usize, n: usize) -> f64 {
    let r = memory.region(RegionId(0)).expect("the bench region");
    let size = segment * segments;
    let slots = REGION / size;
    let mut buf = vec![0u8; 65536];
    let t = WallClock::now();
    for i in 0..n {
        let offset = ((i % slots) * size) as u64;
        for s in 0..segments {
            r.read(offset + (s * segment) as u64, &mut buf[48..48 + segment])
                .expect("in the region");
            black_box(&buf);
        }
    }
    t.elapsed().as_secs_f64()
}

fn main() {
    let args = Args::parse();
    assert!(args.segments >= 1, "--segments is at least 1");
    // Every byte written (not all zero), so no path pays first-touch faults.
    let (mut memory, region, pd) = with_region(REGION, 0x5a, 9);
    // The sink STag the writes name: a real STag; the peer is not simulated beyond its SACKs.
    let sink = remote_write(&mut memory, pd, region, REGION);
    let now = Instant::from_nanos(1_000_000_000);
    outln!("segment writes  packets | send path: M segments/s  GB/s | memcpy: GB/s | efficiency");
    for &segment in &args.sizes {
        let size = segment * args.segments;
        let n = (args.bytes / size).max(1);
        let mut effs: Vec<(String, f64)> = Vec::new();
        for round in 0..args.rounds {
            let copy = memcpy(&memory, segment, args.segments, n);
            for path in &args.paths {
                let mut p = pair(now, &memory, pd, mtu(segment));
                // A tagged segment's header is 14 bytes (RFC 5041 §4.3).
                let max = p.client.max_sizes().mulpdu - 14;
                assert!(
                    segment <= max,
                    "{segment} bytes is more than one segment ({max})"
                );
                let (time, packets) = run(path, &mut p, &memory, sink, size, n);
                let eff = copy / time;
                effs.push((path.clone(), eff));
                outln!(
                    "{segment:>5} {n:>8} {packets:>8} | {path:<6} {round}: {:>6.2} {:>6.2} | {:>6.2} | {eff:.3}",
                    (n * args.segments) as f64 / time / 1e6,
                    (n * size) as f64 / time / 1e9,
                    (n * size) as f64 / copy / 1e9,
                );
            }
        }
        let median = |path: &str| {
            let mut v: Vec<f64> = effs.iter().filter(|e| e.0 == path).map(|e| e.1).collect();
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied()
        };
        let summary: Vec<String> = args
            .paths
            .iter()
            .filter_map(|p| median(p).map(|m| format!("{p} {m:.3}")))
            .collect();
        outln!(
            "{segment:>5} median send efficiency: {}",
            summary.join(", ")
        );
    }
}
