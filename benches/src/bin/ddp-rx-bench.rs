//! Placement efficiency (issue 5 item 8): the complete receive path of one core - CRC32c
//! check, SCTP parse, TSN/SACK bookkeeping, DDP parse, the RFC 5041 §7.1 checks, placement -
//! over pre-built SCTP packets of tagged DDP segments into a 1 GiB region, next to a plain copy
//! of the same payload bytes to the same offsets of the same region, in the same run. The ratio
//! copy time / receive-path time is the placement efficiency (1.0 = as fast as memcpy).
//!
//! Two receive paths per size: `stream` (the association feeding `StreamRx` directly) and
//! `conn` (the ULP API's `Connection`: the session's legality and window check on every
//! segment, routing, indications), over the same packets; the session's Initiate rides with
//! the COOKIE ECHO. Both loops ask for the next packet's lines while handling one, as the
//! runtime's data core does over a burst (`port::prefetch`); the memcpy baseline is a plain
//! copy, without prefetch. The `conn` loop gives the connection its transmit opportunities
//! where a data core does: between packets when a SACK is owed (every second packet) or DATA
//! could go, and at the end of each burst (`stream` asks after every packet).
//!
//! `cargo run --release -p ddpdk-benches --bin ddp-rx-bench -- --sizes 64,512,1438,8938`

use ddpdk_dataplane::outln;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant as WallClock;

use clap::Parser;
use ddpdk_benches::memory::{remote_write, with_region};
use ddpdk_control::conn::{Accept, ConnConfig, Connection, Indication as UlpIndication, Listener};
use ddpdk_control::memory::Memory;
use ddpdk_control::session::PendingLimit;
use ddpdk_control::xmit::BURST;
use ddpdk_dataplane::ddp::{self, Indication, StreamRx, StreamTx, Target};
use ddpdk_dataplane::mem::{Pd, StreamId};
use ddpdk_dataplane::port::prefetch;
use ddpdk_dataplane::port::region::PlacementBatch;
use ddpdk_dataplane::sctp::{Association, Config, Endpoint, Instant, Message, Outcome};

#[derive(Parser, Debug)]
#[command(about = "DDP receive path vs memcpy into the same 1 GiB region")]
struct Args {
    /// DDP payload sizes in bytes (one tagged segment each).
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 512, 1438, 8938])]
    sizes: Vec<usize>,
    /// Payload bytes per measurement (the segment count follows from the size).
    #[arg(long, default_value_t = 256 << 20)]
    bytes: usize,
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// Also run the `conn` path on this many cores at once, each with its own association and
    /// region, next to the same path on one of them (issue 13 item 7: per-core scaling).
    #[arg(long, default_value_t = 1)]
    threads: usize,
}

const REGION: usize = 1 << 30;
const SECRET: [u8; 32] = [0x42; 32];
const C: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const S: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
const SID: StreamId = StreamId(1);

fn config(port: u16) -> Config {
    Config {
        local_port: port,
        // Jumbo frames, so the largest size is one segment in one packet.
        path_mtu: 9216,
        send_slots: 1024,
        // No heartbeats bundled into the recorded packets.
        hb_interval: None,
        ..Config::default()
    }
}

/// A receiving association made from `echo`: the same secret, the same packet, the same
/// association every time (the endpoint is deterministic), so each round starts fresh.
fn receiver(now: Instant, echo: &[u8]) -> Association {
    let mut ep = Endpoint::new(config(5002), SECRET).expect("config");
    let mut out = vec![0u8; 65536];
    match ep.handle(now, C, echo, &mut out, &mut |_: Message<'_>| {}) {
        Outcome::Accepted(a) => *a,
        o => panic!("COOKIE ECHO not accepted: {o:?}"),
    }
}

/// The client's packets carrying `n` tagged segments of `size` bytes, and where each payload
/// lands (region offset, payload offset in its packet).
struct Frames {
    echo: Vec<u8>,
    packets: Vec<Vec<u8>>,
    copies: Vec<(usize, usize, usize, usize)>, // (packet, start, len, region offset)
}

fn build(size: usize, n: usize, stag: u32, now: Instant) -> Frames {
    // A bulk sender's queue does not run dry between segments, so its packets carry no I bit
    // (RFC 7053): the receiver SACKs every second packet, as it would in a transfer. Recorded
    // one message at a time, every packet would otherwise ask for a SACK of its own.
    let client = Config {
        immediate_sack_when_idle: false,
        ..config(5001)
    };
    let mut cep = Endpoint::new(client, [1; 32]).expect("config");
    let mut sep = Endpoint::new(config(5002), SECRET).expect("config");
    let mut c = cep.connect(now, S, 5002);
    let mut buf = vec![0u8; 65536];
    let mut out = vec![0u8; 65536];
    let n1 = c.poll_transmit(now, &mut buf).expect("INIT");
    let Outcome::Reply(m) = sep.handle(now, C, &buf[..n1], &mut out, &mut |_: Message<'_>| {})
    else {
        panic!("INIT not answered")
    };
    c.handle(now, &out[..m], &mut |_: Message<'_>| {})
        .expect("INIT ACK");
    // The DDP Stream Session Initiate (RFC 5043 §6.2) rides with the COOKIE ECHO.
    c.send(1, 17, &[0, 0, 0, 1]).expect("Initiate");
    let n2 = c.poll_transmit(now, &mut buf).expect("COOKIE ECHO");
    let echo = buf[..n2].to_vec();
    let mut s = receiver(now, &echo);
    while let Some(k) = s.poll_transmit(now, &mut buf) {
        let _ = c.handle(now, &buf[..k], &mut |_: Message<'_>| {});
    }
    let mut tx = StreamTx::new(1, ddp::mulpdu(c.max_message()));
    let mut seg = vec![0u8; tx.mulpdu() + 2];
    let payload: Vec<u8> = (0..size).map(|i| (i * 31 + 7) as u8).collect();
    let slots = REGION / size;
    let mut packets = Vec::new();
    let mut copies = Vec::new();
    let mut t = now;
    // One segment per frame: each message is polled out alone before the next is queued.
    for sent in 0..n {
        let to = ((sent % slots) * size) as u64;
        let mut chunk = Vec::new();
        tx.send(
            Target::Tagged {
                stag,
                to,
                rsvd_ulp: 0,
            },
            &payload,
            &mut seg,
            &mut |c| chunk = c.to_vec(),
        )
        .expect("one segment");
        while c.send(1, 16, &chunk).is_err() {
            flush(&mut s, &mut c, &mut t, &mut out);
        }
        loop {
            let mut any = false;
            while let Some(k) = c.poll_transmit(t, &mut buf) {
                any = true;
                let pkt = buf[..k].to_vec();
                // DATA chunk header (16) + DDP-SSN (2) + tagged header (14) = 32 bytes.
                let mut off = 12;
                while off + 16 <= pkt.len() {
                    let len = usize::from(u16::from_be_bytes([pkt[off + 2], pkt[off + 3]]));
                    if pkt[off] == 0 {
                        let index = copies.len();
                        copies.push((packets.len(), off + 32, size, (index % slots) * size));
                    }
                    off += (len + 3) & !3;
                }
                let _ = s.handle(t, &pkt, &mut |_: Message<'_>| {});
                packets.push(pkt);
                while let Some(k2) = s.poll_transmit(t, &mut out) {
                    let _ = c.handle(t, &out[..k2], &mut |_: Message<'_>| {});
                }
            }
            if any {
                break;
            }
            // The window is closed: let the delayed SACK out.
            flush(&mut s, &mut c, &mut t, &mut out);
        }
    }
    assert_eq!(copies.len(), n, "every segment found in the packets");
    Frames {
        echo,
        packets,
        copies,
    }
}

/// Moves time on by a delayed-ack interval and lets the receiver's SACK reach the sender.
fn flush(s: &mut Association, c: &mut Association, t: &mut Instant, out: &mut [u8]) {
    *t += std::time::Duration::from_millis(250);
    s.handle_timeout(*t);
    while let Some(k) = s.poll_transmit(*t, out) {
        let _ = c.handle(*t, &out[..k], &mut |_: Message<'_>| {});
    }
}

fn main() {
    let args = Args::parse();
    // One Memory for both receive paths: its STag table is what they check against, its
    // region what they place into, and the memcpy baseline copies into the same region.
    let (mut memory, region, pd) = with_region(REGION, 0, 9);
    let now = Instant::from_nanos(1_000_000_000);
    // The cores' own memories, made as the first one was (the same seed), so that the same
    // registrations give the same STags and every core replays the same frames.
    let mut cores: Vec<_> = (0..if args.threads > 1 { args.threads } else { 0 })
        .map(|_| with_region(REGION, 0, 9))
        .collect();
    outln!("size   segments  packets | receive path: Mpps  GB/s | memcpy: GB/s | efficiency");
    let mut scaling = Vec::new();
    for &size in &args.sizes {
        let stag = remote_write(&mut memory, pd, region, REGION);
        for (m, r, p) in &mut cores {
            assert_eq!(
                remote_write(m, *p, *r, REGION),
                stag,
                "the same STag on every core"
            );
        }
        let n = (args.bytes / size).max(1);
        let frames = build(size, n, stag.0, now);
        let mut effs = Vec::new();
        let mut conn_effs = Vec::new();
        let mut ratios = Vec::new();
        for round in 0..args.rounds {
            // The receive path, from a fresh association and stream each round.
            let mut assoc = receiver(now, &frames.echo);
            let mut rx = StreamRx::new(SID, pd, 1, 1, 1);
            let mut sack = vec![0u8; 65536];
            let mut delivered = 0u64;
            let mut errors = 0u64;
            let t0 = WallClock::now();
            for burst in frames.packets.chunks(BURST) {
                // One store fence a burst, as a data core has (`PlacementBatch`).
                let _batch = PlacementBatch::begin();
                let mut packets = burst.iter().peekable();
                while let Some(pkt) = packets.next() {
                    if let Some(next) = packets.peek() {
                        prefetch::frame(next);
                    }
                    let _ = assoc.handle(now, pkt, &mut |m: Message<'_>| {
                        if m.ppid == 16 {
                            rx.on_segment(m.data, memory.stags(), &memory, &mut |i| match i {
                                Indication::Delivered { .. } => delivered += 1,
                                Indication::Error { .. } => errors += 1,
                            });
                        }
                    });
                    while let Some(k) = assoc.poll_transmit(now, &mut sack) {
                        black_box(&sack[..k]);
                    }
                }
            }
            let ours = t0.elapsed().as_secs_f64();
            assert_eq!(
                (delivered, errors),
                (n as u64, 0),
                "every segment placed and delivered"
            );
            let copy = memcpy(&frames, &memory);
            let conn = through_connection(&frames, &memory, pd, now, n);
            let conn_time = conn.secs;
            if round == 0 {
                // Which receive path the connection took (`callgrind-stages.sh` reads it).
                outln!(
                    "{size:>5} conn: fused {}/{} segments",
                    conn.fused,
                    conn.received
                );
            }
            let bytes = (n * size) as f64;
            for (path, time, list) in [
                ("stream", ours, &mut effs),
                ("conn  ", conn_time, &mut conn_effs),
            ] {
                let eff = copy / time;
                list.push(eff);
                outln!(
                    "{size:>5} {n:>9} {:>8} | {path} {round}: {:>6.2} {:>6.2} | {:>6.2} | {eff:.3}",
                    frames.packets.len(),
                    n as f64 / time / 1e6,
                    bytes / time / 1e9,
                    bytes / copy / 1e9,
                );
            }
            if !cores.is_empty() {
                let (one, all) = on_cores(&frames, &mut cores, now, n);
                let ratio = all / one;
                ratios.push(ratio);
                outln!(
                    "{size:>5} {n:>9} {:>8} | conn on 1 core {round}: {:>6.2} Mpps, on {} cores \
                     at once: {:>6.2} Mpps aggregate = {ratio:.2} x",
                    frames.packets.len(),
                    one / 1e6,
                    cores.len(),
                    all / 1e6,
                );
            }
        }
        if !ratios.is_empty() {
            ratios.sort_by(f64::total_cmp);
            scaling.push((size, ratios[ratios.len() / 2]));
        }
        effs.sort_by(f64::total_cmp);
        conn_effs.sort_by(f64::total_cmp);
        outln!(
            "{size:>5} median placement efficiency: stream {:.3}, conn {:.3}",
            effs[effs.len() / 2],
            conn_effs[conn_effs.len() / 2]
        );
    }
    for (size, ratio) in scaling {
        outln!(
            "{size:>5} median scaling of the conn path: {} cores at once = {ratio:.2} x one core",
            cores.len()
        );
    }
}

/// The `conn` path on the first core alone, then on every core at once (each pinned to its
/// CPU, its own association and region, the same frames, started together). Returns the
/// segments a second of one core and of all of them together.
fn on_cores(
    frames: &Frames,
    cores: &mut [(Memory, ddpdk_control::memory::RegionId, Pd)],
    now: Instant,
    n: usize,
) -> (f64, f64) {
    let ids = core_affinity::get_core_ids().unwrap_or_default();
    let pin = |k: usize| {
        if let Some(id) = ids.get(k % ids.len().max(1)) {
            core_affinity::set_for_current(*id);
        }
    };
    let count = cores.len();
    let one = std::thread::scope(|s| {
        let (memory, _, pd) = &mut cores[0];
        s.spawn(move || {
            pin(0);
            through_connection(frames, memory, *pd, now, n).secs
        })
        .join()
        .expect("the core's thread")
    });
    let start = std::sync::Barrier::new(count);
    let times: Vec<f64> = std::thread::scope(|s| {
        let handles: Vec<_> = cores
            .iter_mut()
            .enumerate()
            .map(|(k, (memory, _, pd))| {
                let start = &start;
                s.spawn(move || {
                    pin(k);
                    start.wait();
                    through_connection(frames, memory, *pd, now, n).secs
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a core's thread"))
            .collect()
    });
    let slowest = times.iter().copied().fold(0.0, f64::max);
    (n as f64 / one, (n * count) as f64 / slowest)
}

/// A plain copy of every payload to the offset its segment names, in the same region: the
/// baseline. Returns seconds.
fn memcpy(frames: &Frames, memory: &Memory) -> f64 {
    let r = memory
        .region(ddpdk_control::memory::RegionId(0))
        .expect("the bench region");
    let t = WallClock::now();
    for burst in frames.copies.chunks(BURST) {
        let _batch = PlacementBatch::begin();
        for &(p, start, len, off) in burst {
            r.place(off as u64, &frames.packets[p][start..start + len])
                .expect("in the region");
        }
    }
    black_box(r);
    t.elapsed().as_secs_f64()
}

/// The same packets through a `Connection` made by a `Listener` from the same COOKIE ECHO (its
/// session's Initiate accepted), placing into the same memory. Returns seconds.
/// A transmit opportunity as a data core gives it (`control::quiet`): packets until none, or
/// until one leaves nothing owed, which ends the opportunity without the call that would find
/// nothing. Whether the connection is then known to owe nothing.
fn opportunity(conn: &mut Connection, now: Instant, out: &mut [u8]) -> bool {
    while let Some(k) = conn.poll_transmit(now, out) {
        black_box(&out[..k]);
        if conn.association().owes_nothing() {
            conn.end_transmit_opportunity();
            return true;
        }
    }
    !conn.association().burst_ended()
}

/// One run of the `conn` path: its time, and the segments the fused receive path took of
/// those received (`ConnStats::fused_segments`).
struct ConnRun {
    secs: f64,
    fused: u64,
    received: u64,
}

fn through_connection(frames: &Frames, memory: &Memory, pd: Pd, now: Instant, n: usize) -> ConnRun {
    let ep = Endpoint::new(config(5002), SECRET).expect("config");
    let mut listener = Listener::new(ep, ConnConfig::default(), PendingLimit::new(4));
    let mut out = vec![0u8; 65536];
    let Accept::Connection(mut conn) = listener.handle(now, C, &frames.echo, &mut out, memory)
    else {
        panic!("COOKIE ECHO not accepted")
    };
    conn.accept(1, pd, b"").expect("accept the Initiate");
    while conn.poll_indication().is_some() {}
    let mut sack = vec![0u8; 65536];
    let (mut delivered, mut other) = (0u64, 0u64);
    // The data core's `Quiet`: the connection owes nothing and has not changed since.
    let mut quiet = false;
    let t0 = WallClock::now();
    for burst in frames.packets.chunks(BURST) {
        // As the runtime's data core does over a burst: the next frame's lines asked for
        // while this one is handled, one store fence for the burst's placements, before the
        // indications are taken.
        let batch = PlacementBatch::begin();
        let mut packets = burst.iter().peekable();
        while let Some(pkt) = packets.next() {
            if let Some(next) = packets.peek() {
                prefetch::frame(next);
            }
            let _ = conn.handle(now, pkt, memory);
            quiet = false;
            // As the data core does (`DataCore::deliver`): a transmit opportunity between
            // packets only where a SACK is owed before the next one (every second packet,
            // RFC 9260 §6.2) or DATA could go; the rest waits for the burst's end.
            if conn.sack_due() || conn.association().has_data_to_send() {
                quiet = opportunity(&mut conn, now, &mut sack);
            }
        }
        drop(batch);
        // The burst's end (`DataCore::answer`): whatever is still owed leaves.
        if !quiet {
            opportunity(&mut conn, now, &mut sack);
        }
        while let Some(i) = conn.poll_indication() {
            // Taken, it frees receive room (a window update may be owed): a change.
            quiet = false;
            match i {
                UlpIndication::TaggedDelivered { .. } => delivered += 1,
                _ => other += 1,
            }
        }
    }
    let t = t0.elapsed().as_secs_f64();
    assert_eq!(
        (delivered, other),
        (n as u64, 0),
        "every segment placed and delivered through the connection"
    );
    ConnRun {
        secs: t,
        fused: conn.stats().fused_segments,
        received: conn.stats().segments_received,
    }
}
