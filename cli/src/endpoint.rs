//! `--ddp-listen` / `--ddp-connect ADDR`: one DDP/SCTP endpoint on the EAL's first port (a
//! NIC, `net_memif`, `net_af_packet` ...), for two `ddpdk` processes or a peer elsewhere.
//!
//! The server (`--ddp-listen`) accepts associations and DDP Stream Sessions; for each session it
//! registers a region of DPDK memory for remote write and hands its STag, TO and length to the
//! client in the Accept's Private Data (RFC 5043 §5.2.3: Private Data is the ULP's; 20 bytes:
//! STag, TO, length, big-endian). The client (`--ddp-connect`) sets up the association and the
//! session, then writes tagged messages of `--ddp-size` bytes across that region, `WINDOW` in
//! flight, for `--run-for` seconds, terminates the session, shuts the association down and
//! prints its goodput and latency. The server prints what it received when the association
//! ends.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant as Wall};

use ddpdk_control::conn::{ConnConfig, Indication, Payload, SendKind, SendRequest, Status};
use ddpdk_control::engine::{ConnId, Engine};
use ddpdk_control::memory::{Memory, MemoryRegistration};
use ddpdk_control::session::{Event, PendingLimit};
use ddpdk_dataplane::mem::{Access, Stag};
use ddpdk_dataplane::net::Interface;
use ddpdk_dataplane::port::dpdk::{DpdkPort, Eal, Mempool, PortConf};
use ddpdk_dataplane::port::region::Region;
use ddpdk_dataplane::port::Port;
use ddpdk_dataplane::sctp::{CloseReason, Config, Endpoint, Instant};
use hdrhistogram::Histogram;

use crate::app::note;
use crate::loopback::{exit_status, random};
use crate::options::{DdpSource, Options};

const STREAM: u16 = 1;
const WINDOW: usize = 16;
/// STag (4), TO (8), length (8).
const OFFER_LEN: usize = 20;

/// Runs the endpoint and returns the exit status.
pub fn run(eal: Eal, opts: &Options, signalled: &AtomicBool) -> i32 {
    let r = Node::new(&eal, opts).and_then(|mut n| n.run(&eal, opts, signalled));
    exit_status(r, opts.json)
}

struct Node {
    start: Wall,
    engine: Engine<DpdkPort>,
    port: Arc<DpdkPort>,
    pool: Arc<Mempool>,
}

impl Node {
    fn new(eal: &Eal, opts: &Options) -> Result<Node, String> {
        let ip = *opts
            .ip
            .first()
            .ok_or("--ddp-listen and --ddp-connect need --ip ADDR")?;
        let id = *eal
            .port_ids()
            .first()
            .ok_or("no port: give the EAL a device (--vdev=net_memif0,... or -a PCI)")?;
        let pool = Arc::new(
            Mempool::create("ddp_endpoint_pool", 16383, 256, opts.ddp_mbuf_size(), 0)
                .map_err(|e| format!("{e} (with --no-huge, give the EAL more memory: -m 1024)"))?,
        );
        let conf = PortConf {
            nb_rxq: 1,
            nb_txq: 1,
            nb_rxd: 1024,
            nb_txd: 1024,
            promiscuous: true,
        };
        let port = start_port(id, conf, &pool, opts)?;
        // A listener waits for its peer however long it takes (a memif server's link comes up
        // when the client connects); a client needs the link now.
        if opts.ddp_connect.is_some() {
            let link = port.wait_link_up(Duration::from_secs_f64(opts.link_timeout));
            if !link.up && opts.link_timeout > 0.0 {
                return Err(format!(
                    "{}: link down after {} s",
                    port.name(),
                    opts.link_timeout
                ));
            }
        }
        let ep = Endpoint::new(
            Config {
                local_port: opts.sctp_port,
                // The link less the IPv4 header (the engine adjusts it for IPv6).
                path_mtu: usize::from(opts.mtu) - 20,
                send_slots: 1024,
                ..Config::default()
            },
            random::<32>()?,
        )?;
        let (memory, _) = Memory::new(1024, 0, u64::from_ne_bytes(random::<8>()?));
        let (v4, v6) = match ip {
            IpAddr::V4(a) => (Some(a), None),
            IpAddr::V6(a) => (None, Some(a)),
        };
        let mut engine = Engine::new(
            Arc::clone(&port),
            0,
            Interface::new(port.mac(), v4, v6),
            ep,
            ConnConfig::default(),
            PendingLimit::new(16),
            memory,
        );
        engine.set_link_mtu(usize::from(opts.mtu));
        note(
            opts.json,
            format_args!(
                "DDP endpoint {ip} SCTP port {} on {} ({})",
                opts.sctp_port,
                port.name(),
                if opts.ddp_listen {
                    "listening"
                } else {
                    "connecting"
                }
            ),
        );
        Ok(Node {
            start: Wall::now(),
            engine,
            port,
            pool,
        })
    }

    fn now(&self) -> Instant {
        self.at(Wall::now())
    }

    /// The engine's clock at wall time `w`.
    fn at(&self, w: Wall) -> Instant {
        Instant::from_nanos(
            1_000_000_000 + w.saturating_duration_since(self.start).as_nanos() as u64,
        )
    }

    fn poll(&mut self) -> usize {
        let t = self.now();
        self.engine.poll(t)
    }

    fn poll_until(
        &mut self,
        what: &str,
        signalled: &AtomicBool,
        timeout: Duration,
        mut done: impl FnMut(&mut Node) -> bool,
    ) -> Result<(), String> {
        // One clock read per turn: the poll loop's own cost is mostly reading the clock.
        let deadline = self.now() + timeout;
        while !done(self) {
            if signalled.load(Ordering::Relaxed) {
                return Err(format!("interrupted while waiting for {what}"));
            }
            let t = self.now();
            if t > deadline {
                return Err(format!("timed out waiting for {what}"));
            }
            if self.engine.poll(t) == 0 {
                std::hint::spin_loop();
            }
        }
        Ok(())
    }

    fn run(&mut self, eal: &Eal, opts: &Options, signalled: &AtomicBool) -> Result<(), String> {
        let r = match opts.ddp_connect {
            Some(peer) => self.client(eal, peer, opts, signalled),
            None => self.server(eal, opts, signalled),
        };
        // Quiet, then every mbuf back.
        let quiet = Wall::now() + Duration::from_millis(200);
        while Wall::now() < quiet {
            self.poll();
        }
        let _ = self.port.stop();
        r?;
        if self.pool.in_use_count() != 0 {
            return Err(format!(
                "{} mbufs not back in their pool",
                self.pool.in_use_count()
            ));
        }
        Ok(())
    }

    fn server(&mut self, eal: &Eal, opts: &Options, signalled: &AtomicBool) -> Result<(), String> {
        let json = opts.json;
        let region_len = usize::try_from(opts.region_bytes).unwrap_or(usize::MAX);
        let mut conn: Option<ConnId> = None;
        let (mut delivered, mut errors) = (0u64, 0u64);
        let mut deadline = opts
            .run_for
            .map(|s| Wall::now() + Duration::from_secs_f64(s));
        let mut closed = false;
        // The regions offered, to checksum at the end (`mr checksum`).
        let mut offered: Vec<(u16, Stag, ddpdk_control::memory::RegionId)> = Vec::new();
        while !closed {
            if signalled.load(Ordering::Relaxed) || deadline.is_some_and(|d| Wall::now() > d) {
                break;
            }
            self.poll();
            if conn.is_none() {
                conn = self.engine.conn_ids().next();
                if conn.is_some() {
                    // One association at a time: the run ends with it.
                    deadline = None;
                    note(json, format_args!("Association accepted"));
                }
            }
            let Some(id) = conn else { continue };
            let mut accept = Vec::new();
            while let Some(i) = self.engine.conn(id).and_then(|c| c.poll_indication()) {
                match i {
                    Indication::Session {
                        stream,
                        event: Event::InitiateReceived { .. },
                    } => accept.push(stream),
                    Indication::TaggedDelivered { .. } => delivered += 1,
                    Indication::Error { error, .. } => {
                        errors += 1;
                        eprintln!("ddpdk: segment refused: {error}");
                    }
                    Indication::Session {
                        stream,
                        event: Event::SessionTerminated { reason },
                    } => note(json, format_args!("Session {stream} terminated: {reason}")),
                    Indication::Closed(reason) => {
                        note(json, format_args!("Association closed: {reason:?}"));
                        closed = true;
                    }
                    _ => {}
                }
            }
            for stream in accept {
                let pd = self.engine.memory_mut().alloc_pd();
                let region = Region::from_dpdk(eal, region_len, None).map_err(|e| e.to_string())?;
                let m = self.engine.memory_mut();
                let r = m
                    .add_region(region)
                    .map_err(|_| "region table full".to_string())?;
                let reg = m
                    .register(MemoryRegistration {
                        pd,
                        region: r,
                        offset: 0,
                        len: region_len as u64,
                        access: Access::REMOTE_WRITE,
                        stream: None,
                        to_base: 0,
                    })
                    .map_err(|e| e.to_string())?;
                let mut offer = [0u8; OFFER_LEN];
                offer[..4].copy_from_slice(&reg.stag.0.to_be_bytes());
                offer[4..12].copy_from_slice(&reg.to_base.to_be_bytes());
                offer[12..20].copy_from_slice(&reg.len.to_be_bytes());
                if let Some(c) = self.engine.conn(id) {
                    c.accept(stream, pd, &offer).map_err(|e| e.to_string())?;
                }
                offered.push((stream, reg.stag, r));
                note(
                    json,
                    format_args!(
                        "Session {stream} accepted: STag {} TO {} length {}",
                        reg.stag, reg.to_base, reg.len
                    ),
                );
            }
        }
        // What was placed, for the client to compare with what it wrote.
        for (stream, stag, r) in offered {
            if let Some(region) = self.engine.memory().region(r) {
                let crc = region.crc32c(0, region.len()).map_err(|e| e.to_string())?;
                note(
                    json,
                    format_args!(
                        "Session {stream} region STag {stag}: crc32c {crc:#010x} over {} bytes",
                        region.len()
                    ),
                );
            }
        }
        let s = self.engine.stats();
        note(
            json,
            format_args!(
                "server: {delivered} tagged messages delivered, {errors} errors; {} frames in, {} out",
                s.frames_in, s.frames_out
            ),
        );
        if errors > 0 {
            return Err(format!("{errors} segments refused"));
        }
        Ok(())
    }

    fn client(
        &mut self,
        eal: &Eal,
        peer: IpAddr,
        opts: &Options,
        signalled: &AtomicBool,
    ) -> Result<(), String> {
        let json = opts.json;
        let setup = Duration::from_secs(30);
        let now = self.now();
        let id = self
            .engine
            .connect(now, peer, opts.sctp_port)
            .ok_or("no room for a connection")?;
        let mut log = Vec::new();
        self.poll_until("the association", signalled, setup, |n| {
            drain(&mut n.engine, id, &mut log);
            log.iter()
                .any(|i| matches!(i, Indication::Connected { .. }))
        })?;
        let pd = self.engine.memory_mut().alloc_pd();
        self.engine
            .conn(id)
            .ok_or("connection gone")?
            .initiate(STREAM, pd, b"")
            .map_err(|e| e.to_string())?;
        let mut offer = None;
        self.poll_until("the Accept", signalled, setup, |n| {
            drain(&mut n.engine, id, &mut log);
            offer = log.iter().find_map(|i| match i {
                Indication::Session {
                    event: Event::Accepted { private_data },
                    ..
                } => Some(private_data.as_bytes().to_vec()),
                _ => None,
            });
            offer.is_some()
        })?;
        let offer = offer.unwrap_or_default();
        if offer.len() != OFFER_LEN {
            return Err(format!(
                "the server's Accept carries {} bytes, not an STag offer",
                offer.len()
            ));
        }
        let stag = Stag(u32::from_be_bytes([offer[0], offer[1], offer[2], offer[3]]));
        let to = u64::from_be_bytes(offer[4..12].try_into().unwrap_or_default());
        let len = u64::from_be_bytes(offer[12..20].try_into().unwrap_or_default());
        let size = usize::try_from(opts.ddp_size).unwrap_or(usize::MAX);
        let slots = (len / size as u64).max(1);
        note(
            json,
            format_args!("Session {STREAM} accepted: writing {size}-byte messages to STag {stag}"),
        );

        let data: Vec<u8> = (0..size).map(|i| (i as u8).wrapping_mul(31)).collect();
        // Every write sends the same bytes: from one registered region of DPDK memory (RFC
        // 4296's local buffer, sent by reference where the port chains mbufs), or moved in.
        let source = match opts.ddp_source {
            DdpSource::Region => {
                let r = Region::from_dpdk(eal, size, None).map_err(|e| e.to_string())?;
                r.place(0, &data).map_err(|e| e.to_string())?;
                let region = self
                    .engine
                    .memory_mut()
                    .add_region(r)
                    .map_err(|_| "region table full".to_string())?;
                Some(Payload::Region {
                    region,
                    offset: 0,
                    len: u32::try_from(size).map_err(|e| e.to_string())?,
                })
            }
            DdpSource::Bytes => None,
        };
        let mut latency =
            Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())?;
        let secs = opts.run_for.unwrap_or(5.0);
        let t0 = Wall::now();
        let end = t0 + Duration::from_secs_f64(secs);
        let mut posted: std::collections::VecDeque<(u64, Wall)> = Default::default();
        let (mut wr, mut done) = (0u64, 0u64);
        // One clock read per turn of the loop.
        let mut w = Wall::now();
        while w < end || !posted.is_empty() {
            if signalled.load(Ordering::Relaxed) {
                return Err("interrupted".into());
            }
            while posted.len() < WINDOW && w < end {
                let c = self.engine.conn(id).ok_or("connection gone")?;
                c.post_send(SendRequest {
                    wr_id: wr,
                    stream: STREAM,
                    kind: SendKind::Tagged {
                        stag,
                        to: to + (wr % slots) * size as u64,
                        rsvd_ulp: 0,
                    },
                    data: source.clone().unwrap_or_else(|| data.clone().into()),
                    signaled: true,
                })
                .map_err(|e| e.to_string())?;
                posted.push_back((wr, w));
                wr += 1;
            }
            let t = self.at(w);
            self.engine.poll(t);
            w = Wall::now();
            while let Some(c) = self.engine.conn(id).and_then(|c| c.poll_completion()) {
                if c.status != Status::Success {
                    return Err(format!("write {} ended {:?}", c.wr_id, c.status));
                }
                if let Some((_, at)) = posted.pop_front() {
                    let _ = latency.record(w.saturating_duration_since(at).as_micros() as u64);
                }
                done += 1;
            }
            if w > end + setup {
                return Err("writes did not complete".into());
            }
        }
        let elapsed = t0.elapsed().as_secs_f64();
        // What the offered region must hold now: the message in every slot written at least
        // once, zeros elsewhere (DPDK hands out zeroed memory).
        let expected_crc = {
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            let mut image = vec![0u8; len];
            for slot in 0..(done.min(slots) as usize) {
                image[slot * size..(slot + 1) * size].copy_from_slice(&data);
            }
            ddpdk_dataplane::wire::crc32c::crc32c(&image)
        };
        let bytes = done * size as u64;
        let goodput = bytes as f64 / elapsed;
        self.engine
            .conn(id)
            .ok_or("connection gone")?
            .terminate(STREAM)
            .map_err(|e| e.to_string())?;
        self.poll_until("the peer's Terminate", signalled, setup, |n| {
            drain(&mut n.engine, id, &mut log);
            log.iter().any(|i| {
                matches!(
                    i,
                    Indication::Session {
                        event: Event::TerminateReceived,
                        ..
                    }
                )
            })
        })?;
        let now = self.now();
        self.engine.conn(id).ok_or("connection gone")?.shutdown(now);
        self.poll_until("the SHUTDOWN", signalled, setup, |n| {
            drain(&mut n.engine, id, &mut log);
            log.iter()
                .any(|i| matches!(i, Indication::Closed(CloseReason::Shutdown)))
        })?;
        let stats = self.engine.stats();
        if json {
            let v = serde_json::json!({
                "ddp_goodput": {
                    "region_crc32c": format!("{expected_crc:#010x}"),
                    "region_len": len,
                    "size": size,
                    "messages": done,
                    "seconds": elapsed,
                    "bytes_per_s": goodput,
                    "source": format!("{:?}", opts.ddp_source).to_lowercase(),
                    "spans_by_reference": stats.zero_copy_spans,
                    "spans_copied": stats.copied_spans,
                    "latency_us": {
                        "p50": latency.value_at_quantile(0.5),
                        "p99": latency.value_at_quantile(0.99),
                        "max": latency.max(),
                    },
                }
            });
            println!("{v}");
        } else {
            println!(
                "client: {done} tagged writes of {size} bytes in {elapsed:.2} s: {:.1} MB/s, latency p50 {} us, p99 {} us",
                goodput / 1e6,
                latency.value_at_quantile(0.5),
                latency.value_at_quantile(0.99)
            );
            println!("client: the server's region must have crc32c {expected_crc:#010x} over {len} bytes");
            println!(
                "client: region spans sent by reference {}, copied {}",
                stats.zero_copy_spans, stats.copied_spans
            );
        }
        Ok(())
    }
}

/// Moves a connection's indications into `log`.
fn drain<P: Port>(e: &mut Engine<P>, id: ConnId, log: &mut Vec<Indication>) {
    if let Some(c) = e.conn(id) {
        while let Some(i) = c.poll_indication() {
            log.push(i);
        }
    }
}

/// Configures port `id` of a DDP endpoint with `conf` and `pool`, sets its MTU to `--mtu`
/// (a device without an MTU setting, such as net_memif, is noted and used: it carries what fits
/// its buffers, and the mbufs are sized for the frame), and starts it.
pub(crate) fn start_port(
    id: u16,
    conf: PortConf,
    pool: &Arc<Mempool>,
    opts: &Options,
) -> Result<Arc<DpdkPort>, String> {
    let port =
        Arc::new(DpdkPort::configure(id, conf, Arc::clone(pool)).map_err(|e| e.to_string())?);
    if opts.mtu != 1500 {
        match port.set_mtu(opts.mtu) {
            Ok(()) => {}
            Err(e) if e.errno == 95 => note(
                opts.json,
                format_args!(
                    "{}: no MTU setting; frames up to {} bytes",
                    port.name(),
                    opts.mtu
                ),
            ),
            Err(e) => return Err(e.to_string()),
        }
    }
    port.start().map_err(|e| e.to_string())?;
    Ok(port)
}
