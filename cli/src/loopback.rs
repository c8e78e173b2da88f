//! `--ddp-loopback`: the main job on the embedded default. Two DDP/SCTP endpoints on two DPDK
//! `net_ring` ports wired back to back, in this process: the client resolves the server by ARP,
//! sets up an association with the DDP adaptation indication, opens a DDP Stream Session,
//! the server registers regions in DPDK hugepage memory, the client moves tagged and untagged
//! messages of several sizes, every placed byte is verified, everything is torn down, and what
//! happened is printed with throughput and a latency histogram.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant as Wall};

use ddpdk_control::conn::{ConnConfig, Indication, SendKind, SendRequest, Status};
use ddpdk_control::engine::{ConnId, Engine};
use ddpdk_control::memory::{Memory, MemoryRegistration, RegionId};
use ddpdk_control::session::{Event, PendingLimit};
use ddpdk_dataplane::mem::{Access, Pd};
use ddpdk_dataplane::net::Interface;
use ddpdk_dataplane::port::dpdk::{DpdkPort, Eal, Mempool, PortConf};
use ddpdk_dataplane::port::region::Region;
use ddpdk_dataplane::port::Port;
use ddpdk_dataplane::sctp::{CloseReason, Config, Endpoint, Instant};
use ddpdk_dataplane::wire::crc32c::crc32c;
use hdrhistogram::Histogram;

use crate::app::note;
use crate::options::Options;

const SCTP_PORT: u16 = 5000;
const CLIENT: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const STREAM: u16 = 1;
/// Tagged message sizes, bytes.
const TAGGED_SIZES: [usize; 4] = [1024, 16 << 10, 256 << 10, 4 << 20];
/// Untagged message sizes, bytes (one receive buffer each, of the largest size).
const UNTAGGED_SIZES: [usize; 3] = [64, 1400, 8000];
/// Messages in flight at once.
const WINDOW: usize = 16;
/// Longest wait for any one step.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs the loopback and returns the exit status.
pub fn run(eal: Eal, opts: &Options, signalled: &AtomicBool) -> i32 {
    let r = Loopback::new(&eal, opts).and_then(|mut l| l.run(&eal, opts, signalled));
    exit_status(r.map_err(|e| format!("ddp-loopback: {e}")), opts.json)
}

/// The process exit status of a DDP mode's result, with its last words.
pub(crate) fn exit_status(r: Result<(), String>, json: bool) -> i32 {
    match r {
        Ok(()) => {
            note(json, format_args!("Bye..."));
            0
        }
        Err(e) => {
            eprintln!("ddpdk: {e}");
            1
        }
    }
}

struct Loopback {
    start: Wall,
    client: Engine<DpdkPort>,
    server: Engine<DpdkPort>,
    ports: Vec<Arc<DpdkPort>>,
    pool: Arc<Mempool>,
}

/// One size's results.
struct Row {
    kind: &'static str,
    size: usize,
    messages: usize,
    secs: f64,
    latency: Histogram<u64>,
}

impl Loopback {
    fn new(eal: &Eal, opts: &Options) -> Result<Loopback, String> {
        let (a, b) = eal
            .create_ring_pair("ddpdk_ddp", 1024, 1)
            .map_err(|e| format!("cannot create the ring pair: {e}"))?;
        let pool = Arc::new(
            Mempool::create(
                "ddp_loopback_pool",
                8191,
                256,
                dpdk_sys::RTE_MBUF_DEFAULT_BUF_SIZE as u16,
                0,
            )
            .map_err(|e| format!("{e} (with --no-huge, give the EAL more memory: -m 1024)"))?,
        );
        let conf = PortConf {
            nb_rxq: 1,
            nb_txq: 1,
            nb_rxd: 1024,
            nb_txd: 1024,
            promiscuous: true,
        };
        let mut ports = Vec::new();
        for id in [a, b] {
            let p = DpdkPort::configure(id, conf, Arc::clone(&pool)).map_err(|e| e.to_string())?;
            p.start().map_err(|e| e.to_string())?;
            let link = p.wait_link_up(Duration::from_secs(5));
            if !link.up {
                return Err(format!("{}: link down", p.name()));
            }
            ports.push(Arc::new(p));
        }
        let mut macs = [ports[0].mac(), ports[1].mac()];
        if macs[0] == macs[1] {
            macs[1][5] ^= 1;
        }
        let make = |k: usize, ip: Ipv4Addr| -> Result<Engine<DpdkPort>, String> {
            let ep = Endpoint::new(
                Config {
                    local_port: SCTP_PORT,
                    // A 1500-byte link (the engine sets each association's path MTU from the
                    // link MTU and the peer's address family); frames fit one mbuf.
                    path_mtu: 1480,
                    send_slots: 1024,
                    ..Config::default()
                },
                random::<32>()?,
            )?;
            let (memory, _) = Memory::new(1024, 0, u64::from_ne_bytes(random::<8>()?));
            Ok(Engine::new(
                Arc::clone(&ports[k]),
                0,
                Interface::new(macs[k], Some(ip), None),
                ep,
                ConnConfig::default(),
                PendingLimit::new(16),
                memory,
            ))
        };
        let mut client = make(0, CLIENT)?;
        let mut server = make(1, SERVER)?;
        if let Some(path) = &opts.pcap {
            let tap = pcap_tap(path)?;
            client.set_tap(Arc::clone(&tap));
            server.set_tap(tap);
        }
        note(
            opts.json,
            format_args!(
                "DDP loopback: client {CLIENT} on {}, server {SERVER} on {}, SCTP port {SCTP_PORT}",
                ports[0].name(),
                ports[1].name()
            ),
        );
        Ok(Loopback {
            start: Wall::now(),
            client,
            server,
            ports,
            pool,
        })
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(1_000_000_000 + self.start.elapsed().as_nanos() as u64)
    }

    /// Polls both endpoints until `done`, or fails after the step timeout or on a signal.
    fn poll_until(
        &mut self,
        what: &str,
        signalled: &AtomicBool,
        mut done: impl FnMut(&mut Loopback) -> bool,
    ) -> Result<(), String> {
        // One clock read per turn: the poll loop's own cost is mostly reading the clock.
        let deadline = self.now() + STEP_TIMEOUT;
        while !done(self) {
            if signalled.load(Ordering::Relaxed) {
                return Err(format!("interrupted while waiting for {what}"));
            }
            let t = self.now();
            if t > deadline {
                return Err(format!("timed out waiting for {what}"));
            }
            if self.client.poll(t) + self.server.poll(t) == 0 {
                std::hint::spin_loop();
            }
        }
        Ok(())
    }

    fn run(&mut self, eal: &Eal, opts: &Options, signalled: &AtomicBool) -> Result<(), String> {
        let json = opts.json;
        // Association.
        let now = self.now();
        let cc = self
            .client
            .connect(now, IpAddr::V4(SERVER), SCTP_PORT)
            .ok_or("no room for a connection")?;
        let mut client_log = Vec::new();
        let mut server_log = Vec::new();
        self.poll_until("the association", signalled, |l| {
            drain(&mut l.client, cc, &mut client_log);
            connected(&client_log).is_some() && l.server.conn_ids().next().is_some()
        })?;
        let sc = self
            .server
            .conn_ids()
            .next()
            .ok_or("no server connection")?;
        let (streams, mulpdu) = connected(&client_log).unwrap_or_default();
        note(
            json,
            format_args!(
                "Association up: {streams} streams, adaptation indication DDP, MULPDU {mulpdu} \
                 (client resolved the server by ARP: {} solicitation(s))",
                self.client.interface().stats().solicitations
            ),
        );

        // A DDP Stream Session on stream 1.
        let cpd = self.client.memory_mut().alloc_pd();
        let spd = self.server.memory_mut().alloc_pd();
        conn(&mut self.client, cc)?
            .initiate(STREAM, cpd, b"ddpdk loopback")
            .map_err(|e| e.to_string())?;
        self.poll_until("the Initiate", signalled, |l| {
            drain(&mut l.server, sc, &mut server_log);
            has_session_event(&server_log, |e| matches!(e, Event::InitiateReceived { .. }))
        })?;
        conn(&mut self.server, sc)?
            .accept(STREAM, spd, b"welcome")
            .map_err(|e| e.to_string())?;
        self.poll_until("the Accept", signalled, |l| {
            drain(&mut l.client, cc, &mut client_log);
            has_session_event(&client_log, |e| matches!(e, Event::Accepted { .. }))
        })?;
        note(json, format_args!("DDP Stream Session {STREAM} accepted"));

        // Server memory from DPDK's heap: one tagged region per window slot of the largest
        // message, and receive buffers.
        let largest = *TAGGED_SIZES.iter().max().unwrap_or(&0);
        let tagged_len = WINDOW * largest;
        let untagged_len = WINDOW * UNTAGGED_SIZES.iter().max().unwrap_or(&0);
        let (tr, treg, ur, ureg) = {
            let tr = self.dpdk_region(eal, tagged_len)?;
            let ur = self.dpdk_region(eal, untagged_len)?;
            let m = self.server.memory_mut();
            let treg = m
                .register(registration(spd, tr, tagged_len, Access::REMOTE_WRITE))
                .map_err(|e| e.to_string())?;
            let ureg = m
                .register(registration(spd, ur, untagged_len, Access::LOCAL_WRITE))
                .map_err(|e| e.to_string())?;
            (tr, treg, ur, ureg)
        };
        let huge = self
            .server
            .memory()
            .region(tr)
            .map(|r| r.huge())
            .unwrap_or(false);
        note(
            json,
            format_args!(
                "Registered STag {} (tagged, {} bytes, remote write) and STag {} (receive \
                 buffers, {} bytes) in DPDK memory{}",
                treg.stag,
                treg.len,
                ureg.stag,
                ureg.len,
                if huge {
                    " on huge pages"
                } else {
                    " (normal pages: --no-huge)"
                }
            ),
        );

        let budget = usize::try_from(opts.ddp_bytes).unwrap_or(usize::MAX);
        let mut rows = Vec::new();
        let mut wr = 0u64;
        for &size in &TAGGED_SIZES {
            let n = (budget / size).clamp(1, 4096);
            rows.push(self.tagged(size, n, treg.stag, tr, &mut wr, cc, sc, signalled)?);
        }
        for &size in &UNTAGGED_SIZES {
            let n = (budget / size).clamp(1, 4096);
            rows.push(self.untagged(size, n, spd, ureg.stag, ur, &mut wr, cc, sc, signalled)?);
        }
        print_rows(json, &rows);

        // Teardown: the client terminates the session, the server answers; SHUTDOWN.
        conn(&mut self.client, cc)?
            .terminate(STREAM)
            .map_err(|e| e.to_string())?;
        server_log.clear();
        self.poll_until("the Terminate", signalled, |l| {
            drain(&mut l.server, sc, &mut server_log);
            has_session_event(&server_log, |e| *e == Event::TerminateReceived)
        })?;
        let now = self.now();
        conn(&mut self.client, cc)?.shutdown(now);
        client_log.clear();
        server_log.clear();
        self.poll_until("the SHUTDOWN", signalled, |l| {
            drain(&mut l.client, cc, &mut client_log);
            drain(&mut l.server, sc, &mut server_log);
            closed(&client_log) && closed(&server_log)
        })?;
        for (label, e) in [("client", &self.client), ("server", &self.server)] {
            let s = e.stats();
            note(
                json,
                format_args!(
                    "{label}: {} frames in, {} out, {} tx dropped, {} unresolved",
                    s.frames_in, s.frames_out, s.tx_dropped, s.unresolved
                ),
            );
        }
        note(
            json,
            format_args!("Session terminated, association shut down"),
        );
        // Quiet, then every mbuf back.
        loop {
            let t = self.now();
            if self.client.poll(t) + self.server.poll(t) == 0 {
                break;
            }
        }
        for p in &self.ports {
            let _ = p.stop();
        }
        if self.pool.in_use_count() != 0 {
            return Err(format!(
                "{} mbufs not back in their pool",
                self.pool.in_use_count()
            ));
        }
        Ok(())
    }

    /// A region of DPDK hugepage memory (normal pages under `--no-huge`), added to the
    /// server's memory. It is dropped with the engines, before the EAL.
    fn dpdk_region(&mut self, eal: &Eal, len: usize) -> Result<RegionId, String> {
        let r = Region::from_dpdk(eal, len, None).map_err(|e| e.to_string())?;
        self.server
            .memory_mut()
            .add_region(r)
            .map_err(|_| "region table full".to_string())
    }

    /// `n` tagged writes of `size` bytes, WINDOW in flight, each to its own slot of the
    /// region; every message's bytes are checked once it is delivered.
    #[allow(clippy::too_many_arguments)]
    fn tagged(
        &mut self,
        size: usize,
        n: usize,
        stag: ddpdk_dataplane::mem::Stag,
        region: RegionId,
        wr: &mut u64,
        cc: ConnId,
        sc: ConnId,
        signalled: &AtomicBool,
    ) -> Result<Row, String> {
        let mut latency = hist()?;
        let t0 = Wall::now();
        let mut sent = 0usize;
        let mut inflight: Vec<(u64, Wall, usize, u32)> = Vec::new();
        let mut done = 0usize;
        while done < n {
            while sent < n && inflight.len() < WINDOW {
                *wr += 1;
                let slot = sent % WINDOW;
                let data = pattern(*wr, size);
                let crc = crc32c(&data);
                conn(&mut self.client, cc)?
                    .post_send(SendRequest {
                        wr_id: *wr,
                        stream: STREAM,
                        kind: SendKind::Tagged {
                            stag,
                            to: (slot * size) as u64,
                            rsvd_ulp: 0,
                        },
                        data,
                        signaled: true,
                    })
                    .map_err(|e| e.to_string())?;
                inflight.push((*wr, Wall::now(), slot, crc));
                sent += 1;
            }
            let mut completed = Vec::new();
            self.poll_until("tagged completions", signalled, |l| {
                if let Some(c) = l.client.conn(cc).and_then(|c| c.poll_completion()) {
                    completed.push(c);
                }
                !completed.is_empty()
            })?;
            for c in completed {
                if c.status != Status::Success {
                    return Err(format!("tagged write {} ended {:?}", c.wr_id, c.status));
                }
                let k = inflight
                    .iter()
                    .position(|f| f.0 == c.wr_id)
                    .ok_or("completion of an unknown write")?;
                let (_, posted, slot, crc) = inflight.remove(k);
                latency
                    .record(posted.elapsed().as_nanos() as u64 / 1000)
                    .map_err(|e| e.to_string())?;
                // Acknowledged by SCTP means received by the server's SCTP; it was placed
                // when its segments were handled. Verify the bytes in the region.
                let r = self.server.memory().region(region).ok_or("region gone")?;
                let got = r
                    .crc32c((slot * size) as u64, size)
                    .map_err(|e| e.to_string())?;
                if got != crc {
                    return Err(format!("tagged write of {size} bytes: placed bytes differ"));
                }
                done += 1;
            }
            // The deliveries the server's ULP is told about.
            while let Some(i) = conn(&mut self.server, sc)?.poll_indication() {
                if let Indication::Error { error, .. } = i {
                    return Err(format!("server refused a segment: {error}"));
                }
            }
        }
        Ok(Row {
            kind: "tagged",
            size,
            messages: n,
            secs: t0.elapsed().as_secs_f64(),
            latency,
        })
    }

    /// `n` untagged sends of `size` bytes, each into a buffer the server posted.
    #[allow(clippy::too_many_arguments)]
    fn untagged(
        &mut self,
        size: usize,
        n: usize,
        pd: Pd,
        stag: ddpdk_dataplane::mem::Stag,
        region: RegionId,
        wr: &mut u64,
        cc: ConnId,
        sc: ConnId,
        signalled: &AtomicBool,
    ) -> Result<Row, String> {
        let slot_len = *UNTAGGED_SIZES.iter().max().unwrap_or(&0);
        let mut latency = hist()?;
        let t0 = Wall::now();
        let mut sent = 0usize;
        let mut done = 0usize;
        // (wr_id, posted at, slot, crc), in posting order = MSN order.
        let mut inflight: Vec<(u64, Wall, usize, u32)> = Vec::new();
        let mut received = 0usize;
        let mut next_slot = 0usize;
        while done < n || received < n {
            while sent < n && inflight.len() < WINDOW {
                *wr += 1;
                let slot = next_slot % WINDOW;
                next_slot += 1;
                let buf = self
                    .server
                    .memory()
                    .receive_buffer(pd, stag, (slot * slot_len) as u64, slot_len as u32)
                    .map_err(|e| e.to_string())?;
                conn(&mut self.server, sc)?
                    .post_recv(STREAM, 0, slot as u64, buf)
                    .map_err(|e| e.to_string())?;
                let data = pattern(*wr, size);
                let crc = crc32c(&data);
                conn(&mut self.client, cc)?
                    .post_send(SendRequest {
                        wr_id: *wr,
                        stream: STREAM,
                        kind: SendKind::Untagged {
                            qn: 0,
                            rsvd_ulp: [0; 5],
                        },
                        data,
                        signaled: true,
                    })
                    .map_err(|e| e.to_string())?;
                inflight.push((*wr, Wall::now(), slot, crc));
                sent += 1;
            }
            let mut events = Vec::new();
            let mut completions = Vec::new();
            self.poll_until("untagged messages", signalled, |l| {
                if let Some(c) = l.client.conn(cc).and_then(|c| c.poll_completion()) {
                    completions.push(c);
                }
                if let Some(i) = l.server.conn(sc).and_then(|c| c.poll_indication()) {
                    events.push(i);
                }
                !completions.is_empty() || !events.is_empty()
            })?;
            for c in completions {
                if c.status != Status::Success {
                    return Err(format!("untagged send {} ended {:?}", c.wr_id, c.status));
                }
                done += 1;
            }
            for i in events {
                match i {
                    Indication::Received { wr_id, len, .. } => {
                        let (_, posted, slot, crc) = inflight.remove(0);
                        if wr_id != slot as u64 || len as usize != size {
                            return Err(format!(
                                "untagged message in buffer {wr_id}, {len} bytes; expected \
                                 buffer {slot}, {size} bytes"
                            ));
                        }
                        let r = self.server.memory().region(region).ok_or("region gone")?;
                        let got = r
                            .crc32c((slot * slot_len) as u64, size)
                            .map_err(|e| e.to_string())?;
                        if got != crc {
                            return Err(format!("untagged message of {size} bytes differs"));
                        }
                        latency
                            .record(posted.elapsed().as_nanos() as u64 / 1000)
                            .map_err(|e| e.to_string())?;
                        received += 1;
                    }
                    Indication::Error { error, .. } => {
                        return Err(format!("server refused a segment: {error}"))
                    }
                    _ => {}
                }
            }
        }
        Ok(Row {
            kind: "untagged",
            size,
            messages: n,
            secs: t0.elapsed().as_secs_f64(),
            latency,
        })
    }
}

/// A tap that writes every frame to a pcap file (microsecond timestamps, Ethernet link type):
/// what both endpoints transmit, so every frame on the wire once.
fn pcap_tap(path: &std::path::Path) -> Result<ddpdk_control::engine::Tap, String> {
    use std::io::Write;
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    // Global header: magic, version 2.4, GMT offset, accuracy, snaplen, LINKTYPE_ETHERNET.
    let mut header = Vec::new();
    header.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    header.extend_from_slice(&2u16.to_le_bytes());
    header.extend_from_slice(&4u16.to_le_bytes());
    for v in [0u32, 0, 65535, 1] {
        header.extend_from_slice(&v.to_le_bytes());
    }
    w.write_all(&header).map_err(|e| e.to_string())?;
    let tap = move |frame: &[u8]| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let len = frame.len() as u32;
        let mut rec = Vec::with_capacity(16 + frame.len());
        for v in [t.as_secs() as u32, t.subsec_micros(), len, len] {
            rec.extend_from_slice(&v.to_le_bytes());
        }
        rec.extend_from_slice(frame);
        // A full disk loses capture records, never the transfer.
        let _ = w.write_all(&rec).and_then(|_| w.flush());
    };
    Ok(Arc::new(std::sync::Mutex::new(tap)))
}

fn hist() -> Result<Histogram<u64>, String> {
    Histogram::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())
}

fn print_rows(json: bool, rows: &[Row]) {
    if json {
        for r in rows {
            let v = serde_json::json!({
                "kind": r.kind,
                "size": r.size,
                "messages": r.messages,
                "seconds": r.secs,
                "mb_per_s": (r.size * r.messages) as f64 / r.secs / 1e6,
                "latency_us": {
                    "p50": r.latency.value_at_quantile(0.5),
                    "p99": r.latency.value_at_quantile(0.99),
                    "max": r.latency.max(),
                },
                "verified": true,
            });
            println!("{v}");
        }
        return;
    }
    println!(
        "  {:<8} {:>9} {:>8} {:>10} | latency us: {:>7} {:>7} {:>7} | bytes",
        "kind", "size", "msgs", "MB/s", "p50", "p99", "max"
    );
    for r in rows {
        println!(
            "  {:<8} {:>9} {:>8} {:>10.1} |             {:>7} {:>7} {:>7} | verified",
            r.kind,
            r.size,
            r.messages,
            (r.size * r.messages) as f64 / r.secs / 1e6,
            r.latency.value_at_quantile(0.5),
            r.latency.value_at_quantile(0.99),
            r.latency.max()
        );
    }
}

fn registration(pd: Pd, region: RegionId, len: usize, access: Access) -> MemoryRegistration {
    MemoryRegistration {
        pd,
        region,
        offset: 0,
        len: len as u64,
        access,
        stream: None,
        to_base: 0,
    }
}

/// The bytes of message `wr`: distinct per message, so a misplaced one is noticed.
fn pattern(wr: u64, len: usize) -> Vec<u8> {
    let mut x = wr.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn conn<P: Port>(
    e: &mut Engine<P>,
    id: ConnId,
) -> Result<&mut ddpdk_control::conn::Connection, String> {
    e.conn(id).ok_or_else(|| "connection gone".to_string())
}

/// Moves a connection's indications into `log`.
pub(crate) fn drain<P: Port>(e: &mut Engine<P>, id: ConnId, log: &mut Vec<Indication>) {
    if let Some(c) = e.conn(id) {
        while let Some(i) = c.poll_indication() {
            log.push(i);
        }
    }
}

fn connected(log: &[Indication]) -> Option<(u16, usize)> {
    log.iter().find_map(|i| match i {
        Indication::Connected { streams, mulpdu } => Some((*streams, *mulpdu)),
        _ => None,
    })
}

fn has_session_event(log: &[Indication], f: impl Fn(&Event) -> bool) -> bool {
    log.iter()
        .any(|i| matches!(i, Indication::Session { stream: STREAM, event } if f(event)))
}

fn closed(log: &[Indication]) -> bool {
    log.iter().any(|i| {
        matches!(
            i,
            Indication::Closed(CloseReason::Shutdown | CloseReason::PeerAbort { .. })
        )
    })
}

/// Random bytes from the kernel: the cookie secrets and the STag tables' starting points must
/// not be guessable (RFC 9260 §5.1.3, RFC 5041 §8.3).
pub(crate) fn random<const N: usize>() -> Result<[u8; N], String> {
    use std::io::Read;
    let mut b = [0u8; N];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| format!("/dev/urandom: {e}"))?;
    Ok(b)
}
