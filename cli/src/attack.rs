//! `ddpdk-attack`: a hostile peer for issue 12 item 2's attack matrix. It runs on a DPDK port
//! of its own (a `net_memif` client facing a `ddpdk perf server`, say) with a raw SCTP
//! association of its own (the sans-IO [`Association`], no DDP layer above it), so it can send
//! anything: DDP segments and session messages made by hand on established sessions, and SCTP
//! packets made by hand from other ports. Each attack prints one JSON line: what was sent, what
//! RFC rule it tests, and what came back. With `--step` it waits for a line on stdin after each
//! one, so that a harness can read the server's counters in between (`cli/tests/attacks.rs`).

use std::io::BufRead;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;

use crate::options::{bytes, whole};
use ddpdk_control::rdmap::{decode_private_data, encode_private_data, RdmaLimits};
use ddpdk_dataplane::net::{Interface, Rx};
use ddpdk_dataplane::port::dpdk::{DpdkPort, Eal, Mbuf, Mempool, PortConf};
use ddpdk_dataplane::port::{PacketBuf, Port};
use ddpdk_dataplane::sctp::{Association, Config, Endpoint, Instant, Message, State};
use ddpdk_dataplane::wire::crc32c;
use ddpdk_dataplane::wire::ddp::{PPID_DDP_SEGMENT, PPID_SESSION_CONTROL};
use ddpdk_dataplane::wire::rdmap::{
    Control as RdmapControl, Opcode, ReadRequest, TerminatePacket, QN_READ_REQUEST, QN_TERMINATE,
};
use serde_json::{json, Value};

use crate::options::split_args;

/// Our SCTP port for the association the DDP attacks ride on.
const OUR_PORT: u16 = 40_000;
/// INITs of the flood sent and not yet answered, at most.
const FLOOD_WINDOW: u64 = 256;
/// The link's MTU (memif's default frame).
const LINK_MTU: usize = 1500;
/// Queue pairs of our port: as many as every DDP endpoint opens on a memif, whose rings are
/// point to point (node.rs).
const QUEUES: u16 = crate::node::MEMIF_QUEUE_PAIRS;
/// SCTP streams we ask for; the endpoint must grant as many (`--streams`) for the
/// pending-Initiate attack, which opens more sessions at once than its limit.
const STREAMS: u16 = 64;
/// The first stream of the pending-Initiate attack; the streams below are the other attacks'.
const FLOOD_STREAMS: u16 = 16;
/// Session Control function codes (RFC 5043 §6.1).
const INITIATE: u16 = 1;
const ACCEPT: u16 = 2;
const TERMINATE: u16 = 4;

#[derive(Parser, Debug)]
#[command(
    name = "ddpdk-attack",
    about = "A hostile peer: runs the attacks of issue 12 item 2 against a DDP endpoint \
             (ddpdk perf server) and prints what each one got back, one JSON line an attack.",
    after_help = "Example (the server: ddpdk perf server ... --vdev=net_memif0,role=server):\n  \
                  ddpdk-attack --no-huge -m 512 --vdev=net_memif0,role=client -- --ip 198.18.0.1 \
                  --peer 198.18.0.2"
)]
struct Args {
    /// Our address, IPv4 or IPv6 (the peer's family).
    #[arg(long)]
    ip: IpAddr,
    /// The endpoint attacked.
    #[arg(long)]
    peer: IpAddr,
    /// Its SCTP port.
    #[arg(long, default_value_t = 5000)]
    port: u16,
    /// Tagged segments with random STags.
    #[arg(long, default_value_t = 1 << 20, value_parser = whole::<u64>(0, u64::MAX))]
    stags: u64,
    /// INITs of the flood.
    #[arg(long, default_value_t = 1_000_000, value_parser = whole::<u64>(0, u64::MAX))]
    init_flood: u64,
    /// The endpoint's Valid.Cookie.Life, ms: the stale COOKIE ECHO waits it out.
    #[arg(long, default_value_t = 500, value_parser = whole::<u64>(1, 3_600_000))]
    cookie_life_ms: u64,
    /// The largest DDP segment the endpoint takes (RFC 5043 §9: what one unfragmented DATA
    /// chunk carries on its link, 1450 bytes over IPv4 at MTU 1500): the oversize attack sends
    /// one octet more, in one DATA chunk, so the endpoint's link must be smaller than ours
    /// (`--mtu`). Default: what one chunk carries on our own path, which only a smaller
    /// endpoint refuses. At least the tagged header's 14 bytes; binary units (`1K`).
    #[arg(long, value_parser = bytes::<u32>(14, 65_535))]
    mulpdu: Option<u32>,
    /// After each attack, wait for a line on stdin (a harness reads counters meanwhile).
    #[arg(long)]
    step: bool,
}

/// Runs the attacker; returns the exit status.
pub fn main_with(argv: Vec<String>) -> i32 {
    let (eal_args, ours) = split_args(&argv);
    let args = match Args::try_parse_from(&ours) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    match run(&eal_args, &args) {
        Ok(()) => 0,
        Err(e) => {
            errln!("ddpdk-attack: {e}");
            1
        }
    }
}

fn run(eal_args: &[String], args: &Args) -> Result<(), String> {
    let eal = Eal::init(eal_args).map_err(|e| e.to_string())?;
    let id = *eal
        .port_ids()
        .first()
        .ok_or("no port: give the EAL a --vdev")?;
    let pool =
        Arc::new(Mempool::create("attack_pool", 16383, 256, 2176, 0).map_err(|e| e.to_string())?);
    // As many queue pairs as the endpoint has (a DDP endpoint opens MEMIF_QUEUE_PAIRS on a
    // memif): memif gives a server queue the client has no ring for the client's first ring,
    // and the endpoint answers from its data core's queue and its control thread's.
    let conf = PortConf {
        nb_rxq: QUEUES,
        nb_txq: QUEUES,
        nb_rxd: 1024,
        nb_txd: 1024,
        promiscuous: true,
        ..PortConf::default()
    };
    let port = Arc::new(DpdkPort::configure(id, conf, pool).map_err(|e| e.to_string())?);
    port.start().map_err(|e| e.to_string())?;
    if !port.wait_link_up(Duration::from_secs(30)).up {
        return Err("link down".into());
    }
    let mut a = Attacker::new(Arc::clone(&port), args)?;
    let result = a.all(args);
    let _ = port.stop();
    result
}

/// The wire: our port and interface, and the clock.
struct Wire {
    port: Arc<DpdkPort>,
    iface: Interface,
    peer: IpAddr,
    t0: std::time::Instant,
    rx: Vec<Mbuf>,
    out: Vec<u8>,
    reply: Vec<u8>,
}

impl Wire {
    fn now(&self) -> Instant {
        Instant::from_nanos(1_000_000_000 + self.t0.elapsed().as_nanos() as u64)
    }

    fn send_frame(&mut self, frame: &[u8]) {
        let mut v = Vec::with_capacity(1);
        if self.port.alloc_bulk(&mut v, 1, frame.len()) {
            if let Some(b) = v.first_mut() {
                b.data_mut().copy_from_slice(frame);
            }
            self.port.tx_burst_all(0, &mut v, 1000);
        }
    }

    /// Frames and sends an SCTP packet to the peer (after ARP, which it waits for).
    fn send_sctp(&mut self, sctp: &[u8]) {
        let h = Interface::header_len(self.peer);
        for _ in 0..1000 {
            self.out[h..h + sctp.len()].copy_from_slice(sctp);
            let now = self.now();
            match self
                .iface
                .frame_sctp(now, self.peer, sctp.len(), &mut self.out)
            {
                Ok(n) => {
                    let frame = self.out[..n].to_vec();
                    self.send_frame(&frame);
                    return;
                }
                Err(u) => {
                    if u.solicitation > 0 {
                        let s = self.out[..u.solicitation].to_vec();
                        self.send_frame(&s);
                    }
                    self.receive(&mut |_| {});
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
    }

    /// Takes what arrived: ARP answered, SCTP packets handed to `f`.
    fn receive(&mut self, f: &mut dyn FnMut(&[u8])) -> usize {
        let mut n = 0;
        for q in 0..QUEUES {
            n += self.port.rx_burst(q, &mut self.rx, 64);
        }
        let mut bufs = std::mem::take(&mut self.rx);
        for b in &bufs {
            match self.iface.receive(b.data(), &mut self.reply) {
                Rx::Reply(m) => {
                    let r = self.reply[..m].to_vec();
                    self.send_frame(&r);
                }
                Rx::Sctp(s) => f(s.sctp),
                _ => {}
            }
        }
        bufs.clear();
        self.rx = bufs;
        n
    }
}

/// What the association received: (stream, PPID, bytes).
type Received = Vec<(u16, u32, Vec<u8>)>;

struct Attacker {
    wire: Wire,
    assoc: Association,
    got: Received,
    /// Packets for our other ports (answers to hand-made packets).
    others: Vec<Vec<u8>>,
    /// The next DDP-SSN of each stream (RFC 5043 §5.2.1).
    ssn: [u16; STREAMS as usize],
    /// Messages queued on the association so far (the next one's number).
    queued: u64,
    buf: Vec<u8>,
    rng: u64,
    step: bool,
}

impl Attacker {
    fn new(port: Arc<DpdkPort>, args: &Args) -> Result<Attacker, String> {
        let peer = args.peer;
        let (v4, v6) = match (args.ip, peer) {
            (IpAddr::V4(ip), IpAddr::V4(_)) => (Some(ip), None),
            (IpAddr::V6(ip), IpAddr::V6(_)) => (None, Some(ip)),
            _ => return Err("--ip and --peer must be of one family".into()),
        };
        let wire = Wire {
            iface: Interface::new(port.mac(), v4, v6),
            port,
            peer,
            t0: std::time::Instant::now(),
            rx: Vec::with_capacity(64),
            out: vec![0; 2048],
            reply: vec![0; 2048],
        };
        let cfg = Config {
            local_port: OUR_PORT,
            streams: STREAMS,
            path_mtu: LINK_MTU - Interface::ip_header_len(peer),
            rto_min: Duration::from_millis(10),
            // The path is a veth of known MTU, and some attacks need full-size packets: no
            // RFC 8899 discovery, whose black-hole detection took three T3 expiries of a
            // starved run (a loaded CI machine, RTO.Min 10 ms) for a hop below 1200 bytes
            // and shrank the association under the oversize-segment attack.
            plpmtud_probe_timer: None,
            ..Config::default()
        };
        let mut ep = Endpoint::new(cfg, [0x5a; 32])?;
        let assoc = ep.connect(wire.now(), peer, args.port);
        Ok(Attacker {
            wire,
            assoc,
            got: Vec::new(),
            others: Vec::new(),
            ssn: [0; STREAMS as usize],
            queued: 0,
            buf: vec![0; 2048],
            rng: 0x9e37_79b9_7f4a_7c15,
            step: args.step,
        })
    }

    fn random(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn turn(&mut self) -> usize {
        let now = self.wire.now();
        let (assoc, got, others) = (&mut self.assoc, &mut self.got, &mut self.others);
        let mut work = self.wire.receive(&mut |p: &[u8]| {
            let ours = p.get(2..4) == Some(&OUR_PORT.to_be_bytes()[..]);
            if ours {
                let _ = assoc.handle(now, p, &mut |m: Message<'_>| {
                    got.push((m.stream, m.ppid, m.data.to_vec()))
                });
            } else {
                others.push(p.to_vec());
            }
        });
        if self.assoc.poll_timeout().is_some_and(|t| t <= now) {
            self.assoc.handle_timeout(now);
        }
        while let Some(n) = self.assoc.poll_transmit(now, &mut self.buf) {
            let p = self.buf[..n].to_vec();
            self.wire.send_sctp(&p);
            work += 1;
        }
        work
    }

    /// Pumps until `done` holds (or `within` passes); returns whether it did.
    fn until(&mut self, within: Duration, mut done: impl FnMut(&Self) -> bool) -> bool {
        let end = std::time::Instant::now() + within;
        while std::time::Instant::now() < end {
            if done(self) {
                return true;
            }
            self.turn();
        }
        done(self)
    }

    /// Sends `data` as one DATA chunk on `stream` (the association does not look inside).
    fn send(&mut self, stream: u16, ppid: u32, data: &[u8]) -> Result<(), String> {
        let mut last = None;
        // A time, not a number of turns: on a loaded machine the endpoint may not run for a
        // while, and its SACKs with it.
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < end {
            match self.assoc.send(stream, ppid, data) {
                Ok(n) => {
                    self.queued = n + 1;
                    return Ok(());
                }
                Err(e) => {
                    // The send queue is full: let SACKs empty it.
                    last = Some(e);
                    self.turn();
                }
            }
        }
        Err(format!(
            "the association would not take a {}-byte message on stream {stream}: {last:?}",
            data.len()
        ))
    }

    fn next_ssn(&mut self, stream: u16) -> u16 {
        let s = &mut self.ssn[usize::from(stream)];
        let v = *s;
        *s = s.wrapping_add(1);
        v
    }

    fn terminates(&self, stream: u16) -> usize {
        self.control_codes(stream)
            .iter()
            .filter(|&&c| c == TERMINATE)
            .count()
    }

    /// The (Layer, Error Type, Error Code) of every RDMAP Terminate received on `stream`
    /// (RFC 5040 §4.8: an untagged message on QN 2 whose ULP payload is a Terminate).
    fn rdmap_terminates(&self, stream: u16) -> Vec<(u8, u8, u8)> {
        self.got
            .iter()
            .filter(|(s, p, _)| *s == stream && *p == PPID_DDP_SEGMENT)
            .filter_map(|(_, _, d)| {
                // DDP-SSN (2), DDP control (1), RsvdULP (5), QN (4), MSN (4), MO (4).
                let untagged = d.get(2)? & 0x80 == 0;
                let control = RdmapControl::from_byte(*d.get(3)?);
                let qn = u32::from_be_bytes(d.get(8..12)?.try_into().ok()?);
                if !(untagged && control.opcode == Opcode::Terminate && qn == QN_TERMINATE) {
                    return None;
                }
                let t = TerminatePacket::new_checked(d.get(20..)?).ok()?;
                Some((t.layer().bits(), t.error_type(), t.code()))
            })
            .collect()
    }

    fn control_codes(&self, stream: u16) -> Vec<u16> {
        self.got
            .iter()
            .filter(|(s, p, d)| *s == stream && *p == PPID_SESSION_CONTROL && d.len() >= 4)
            .map(|(_, _, d)| u16::from_be_bytes([d[2], d[3]]))
            .collect()
    }

    /// Opens a session on `stream` (we initiate); returns the offer (STag, TO, length) of a
    /// `perf server`'s Accept.
    /// A stream whose session ended may carry a new one (RFC 5043 §6.6); its DDP-SSN starts
    /// again from zero (§6.1).
    fn open(&mut self, stream: u16) -> Result<(u32, u64, u64), String> {
        self.open_with(stream, false)
    }

    /// As [`Attacker::open`], for an RDMAP stream: RDMAP's parameters (RFC 5040 §6) lead the
    /// Initiate's Private Data and the Accept's.
    fn open_rdmap(&mut self, stream: u16) -> Result<(u32, u64, u64), String> {
        self.open_with(stream, true)
    }

    fn open_with(&mut self, stream: u16, rdmap: bool) -> Result<(u32, u64, u64), String> {
        let accepts = |a: &Self| {
            a.control_codes(stream)
                .iter()
                .filter(|&&c| c == ACCEPT)
                .count()
        };
        let before = accepts(self);
        self.ssn[usize::from(stream)] = 0;
        let ssn = self.next_ssn(stream);
        let private = if rdmap {
            encode_private_data(RdmaLimits::default(), b"").map_err(|_| "RDMAP parameters")?
        } else {
            Vec::new()
        };
        self.send(stream, PPID_SESSION_CONTROL, &ctl(ssn, INITIATE, &private))?;
        if !self.until(Duration::from_secs(5), |a| accepts(a) > before) {
            return Err(format!("no Accept on stream {stream}"));
        }
        let d = self
            .got
            .iter()
            .rev()
            .find(|(s, p, d)| {
                *s == stream && *p == PPID_SESSION_CONTROL && d.get(2..4) == Some(&[0, 2])
            })
            .map(|(_, _, d)| d.clone())
            .unwrap_or_default();
        let private = d.get(4..).unwrap_or_default();
        let offer = if rdmap {
            decode_private_data(private)
                .ok_or("the Accept carries no RDMAP parameters")?
                .1
        } else {
            private
        };
        let o = offer.get(..20).ok_or("the Accept carries no offer")?;
        let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let be64 = |b: &[u8]| u64::from_be_bytes(b.try_into().unwrap_or_default());
        Ok((be32(&o[..4]), be64(&o[4..12]), be64(&o[12..20])))
    }

    /// Sends a tagged segment on `stream` with its next DDP-SSN.
    fn tagged(&mut self, stream: u16, stag: u32, to: u64, len: usize) -> Result<(), String> {
        let ssn = self.next_ssn(stream);
        self.send(
            stream,
            PPID_DDP_SEGMENT,
            &tseg(ssn, stag, to, &vec![0xa5; len]),
        )
    }

    /// Prints the attack's line; with --step, waits for the harness.
    fn report(&mut self, v: Value) {
        outln!("{v}");
        if self.step {
            let mut line = String::new();
            let _ = std::io::stdin().lock().read_line(&mut line);
        }
    }

    fn all(&mut self, args: &Args) -> Result<(), String> {
        if !self.until(Duration::from_secs(10), |a| {
            a.assoc.state() == State::Established
        }) {
            return Err("no association".into());
        }
        self.report(json!({"attack": "association", "rfc": "RFC 9260 §5.1", "established": true}));
        self.ddp_attacks(args)?;
        self.sctp_attacks(args)?;
        // The end: a graceful SHUTDOWN, so the server reports its regions.
        let now = self.wire.now();
        self.assoc.shutdown(now);
        self.until(Duration::from_secs(5), |a| a.assoc.is_closed());
        outln!("{}", json!({"attack": "done"}));
        Ok(())
    }

    fn ddp_attacks(&mut self, args: &Args) -> Result<(), String> {
        // Random STags (RFC 5041 §7.1 check 1, §8.3: STags must not be guessable).
        let (stag0, _, _) = self.open(0)?;
        for _ in 0..args.stags {
            let mut s = self.random() as u32;
            if s == stag0 {
                s ^= 1;
            }
            self.tagged(0, s, 0, 64)?;
            if self.ssn[0].is_multiple_of(64) {
                self.turn();
            }
        }
        self.settle();
        let v = json!({"attack": "random STags", "rfc": "RFC 5041 §7.1 check 1, §8.3",
            "sent": args.stags, "terminate": self.control_codes(0).contains(&TERMINATE)});
        self.report(v);

        // Bounds (check 4) and TO wrap (check 5).
        let (stag1, to1, len1) = self.open(1)?;
        self.tagged(1, stag1, to1 + len1 - 10, 100)?;
        self.settle();
        let v = json!({"attack": "base and bounds", "rfc": "RFC 5041 §7.1 check 4",
            "sent": 1, "terminate": self.control_codes(1).contains(&TERMINATE)});
        self.report(v);
        let (stag2, _, _) = self.open(2)?;
        self.tagged(2, stag2, u64::MAX - 9, 100)?;
        self.settle();
        let v = json!({"attack": "TO wrap", "rfc": "RFC 5041 §7.1 checks 4, 5",
            "sent": 1, "terminate": self.control_codes(2).contains(&TERMINATE)});
        self.report(v);

        // Protection domains and streams (check 2): stream 4's STag written from stream 3.
        let (stag4, to4, _) = self.open(4)?;
        self.open(3)?;
        self.tagged(3, stag4, to4, 100)?;
        self.settle();
        let v = json!({"attack": "another session's STag", "rfc": "RFC 5041 §7.1 check 2, §8.2",
            "sent": 1, "terminate": self.control_codes(3).contains(&TERMINATE),
            "victim_terminated": self.control_codes(4).contains(&TERMINATE)});
        self.report(v);

        // Untagged abuse on stream 4 (no buffer is posted there): QN, MSN, MO.
        let ssn = self.next_ssn(4);
        self.send(4, PPID_DDP_SEGMENT, &useg(ssn, 7, 1, 0, &[0x5a; 64]))?;
        let ssn = self.next_ssn(4);
        self.send(
            4,
            PPID_DDP_SEGMENT,
            &useg(ssn, 0, 1_000_000, 0, &[0x5a; 64]),
        )?;
        let ssn = self.next_ssn(4);
        self.send(4, PPID_DDP_SEGMENT, &useg(ssn, 0, 1, 1 << 30, &[0x5a; 64]))?;
        self.settle();
        let v = json!({"attack": "QN, MSN and MO abuse", "rfc": "RFC 5041 §7.1 checks 6-9",
            "sent": 3, "terminate": self.control_codes(4).contains(&TERMINATE)});
        self.report(v);

        // A DDP-SSN outside the window of 32 768 (RFC 5043 §10; inside it a valid write is
        // legal, however far ahead), then session-sequence abuse: a
        // segment on a stream with no session, an Accept we were never asked for, a second
        // Initiate on a live session (§6).
        let (stag5, to5, _) = self.open(5)?;
        self.ssn[5] = self.ssn[5].wrapping_add(40_000);
        self.tagged(5, stag5, to5, 100)?;
        self.settle();
        let v = json!({"attack": "DDP-SSN outside the window", "rfc": "RFC 5043 §5.2.1, §10",
            "sent": 1, "terminate": self.control_codes(5).contains(&TERMINATE)});
        self.report(v);
        self.tagged(6, stag5, to5, 100)?;
        let ssn = self.next_ssn(6);
        self.send(6, PPID_SESSION_CONTROL, &ctl(ssn, ACCEPT, b""))?;
        let (_, _, _) = self.open(7)?;
        let ssn = self.next_ssn(7);
        self.send(7, PPID_SESSION_CONTROL, &ctl(ssn, INITIATE, b""))?;
        self.settle();
        let v = json!({"attack": "session-sequence abuse", "rfc": "RFC 5043 §6",
            "sent": 3, "codes_6": self.control_codes(6), "codes_7": self.control_codes(7)});
        self.report(v);

        // A segment over the MULPDU the endpoint announced (RFC 5043 §9), on a new session of
        // stream 1 (its first ended at the bounds attack), to its own region.
        let terminates = self.terminates(1);
        let (stag, to, _) = self.open(1)?;
        // The endpoint's own rule: what one unfragmented chunk carries on its link.
        let mulpdu = args.mulpdu.map_or_else(
            || self.assoc.max_message().saturating_sub(2),
            |m| m as usize,
        );
        let ssn = self.next_ssn(1);
        // One octet over: a 14-byte tagged header and the payload make MULPDU + 1.
        let over = tseg(ssn, stag, to, &vec![0x77; mulpdu + 1 - 14]);
        self.send(1, PPID_DDP_SEGMENT, &over)?;
        self.settle();
        let v = json!({"attack": "oversize segment", "rfc": "RFC 5043 §9",
            "sent": 1, "segment": over.len() - 2, "mulpdu": mulpdu,
            "terminate": self.terminates(1) > terminates});
        self.report(v);

        // Access rights (RFC 5040 §5.2 at the Data Source: the Read Request's source STag
        // must allow remote read; §7.2's Remote Protection Error "access rights violation",
        // layer 0, type 1, code 2): an RDMA Read of the region offered for remote writes only,
        // on an RDMAP stream.
        let stream = 8;
        let (stag, to, len) = self.open_rdmap(stream)?;
        let request = ReadRequest {
            // Where the response would go at our end; it never comes.
            sink_stag: 0x0001_0200,
            sink_to: 0,
            size: u32::try_from(len.min(4096)).unwrap_or(4096),
            source_stag: stag,
            source_to: to,
        };
        let ssn = self.next_ssn(stream);
        let segment = rdmap_useg(
            ssn,
            Opcode::ReadRequest,
            QN_READ_REQUEST,
            1,
            &request.to_bytes(),
        );
        self.send(stream, PPID_DDP_SEGMENT, &segment)?;
        self.settle();
        let rdmap_terminates: Vec<String> = self
            .rdmap_terminates(stream)
            .iter()
            .map(|(l, t, c)| format!("layer {l} type {t} code {c:#04x}"))
            .collect();
        let v = json!({"attack": "RDMA Read of a region without remote read",
            "rfc": "RFC 5040 §5.2, §7.2", "sent": 1,
            "rdmap_terminate": rdmap_terminates,
            "terminate": self.control_codes(stream).contains(&TERMINATE)});
        self.report(v);

        // Pending-Initiate exhaustion (RFC 5043 §6.4, §5.2.3): an Initiate on every stream
        // left, all in one go, more than the endpoint lets wait for its ULP at once. Those
        // over its limit must be answered with a Terminate, never held.
        let streams: Vec<u16> = (FLOOD_STREAMS..STREAMS).collect();
        for &s in &streams {
            self.ssn[usize::from(s)] = 0;
            let ssn = self.next_ssn(s);
            self.send(s, PPID_SESSION_CONTROL, &ctl(ssn, INITIATE, b""))?;
        }
        let answered = |a: &Self, s: u16| {
            a.control_codes(s)
                .iter()
                .any(|&c| c == ACCEPT || c == TERMINATE)
        };
        self.until(Duration::from_secs(10), |a| {
            streams.iter().all(|&s| answered(a, s))
        });
        self.settle();
        let count = |a: &Self, code: u16| {
            streams
                .iter()
                .filter(|&&s| a.control_codes(s).first() == Some(&code))
                .count()
        };
        let v = json!({"attack": "pending-Initiate exhaustion", "rfc": "RFC 5043 §6.4, §5.2.3",
            "sent": streams.len(), "accepts": count(self, ACCEPT),
            "terminates": count(self, TERMINATE),
            "unanswered": streams.iter().filter(|&&s| !answered(self, s)).count()});
        self.report(v);
        Ok(())
    }

    /// Runs until everything sent is acknowledged (so the endpoint has counted it) and nothing
    /// arrived for 100 ms, at most 10 s: what the harness then reads is this attack's alone.
    fn settle(&mut self) {
        let end = std::time::Instant::now() + Duration::from_secs(10);
        let mut quiet_since = std::time::Instant::now();
        while std::time::Instant::now() < end {
            if self.turn() > 0 {
                quiet_since = std::time::Instant::now();
            }
            let acked = self.assoc.settled_before() >= self.queued;
            if acked && quiet_since.elapsed() >= Duration::from_millis(100) {
                return;
            }
        }
    }

    fn sctp_attacks(&mut self, args: &Args) -> Result<(), String> {
        let peer_port = args.port;
        let tag = self.assoc.peer_tag();
        // INIT flood from fresh source ports (RFC 9260 §5.1.3: the cookie keeps no state), in
        // two halves: the first warms what the endpoint touches to answer (its mbufs), the
        // second shows whether answering keeps anything.
        for (name, n) in [
            ("INIT flood, first half", args.init_flood / 2),
            ("INIT flood", args.init_flood - args.init_flood / 2),
        ] {
            let (sent, answered) = self.init_flood(n, peer_port);
            let v = json!({"attack": name, "rfc": "RFC 9260 §5.1.3", "sent": sent,
                "init_acks": answered});
            self.report(v);
        }

        // A stale COOKIE ECHO (§5.1.5 step 3: ERROR, Stale Cookie) and a replayed one
        // (§5.2.4 action D: the association it made goes on, no new one).
        let (sport, itag) = (31_000u16, 0x1357_9bdf);
        let cookie = self.cookie_for(sport, itag, peer_port)?;
        std::thread::sleep(Duration::from_millis(args.cookie_life_ms + 200));
        self.others.clear();
        self.wire
            .send_sctp(&sctp(sport, peer_port, cookie.0, &chunk(10, 0, &cookie.1)));
        self.settle();
        let stale = self
            .others
            .iter()
            .any(|p| p.get(12) == Some(&9) && p.get(16..18) == Some(&[0, 3]));
        let v = json!({"attack": "stale COOKIE ECHO", "rfc": "RFC 9260 §5.1.5 step 3",
            "sent": 1, "stale_cookie_error": stale,
            "cookie_ack": self.others.iter().any(|p| p.get(12) == Some(&11))});
        self.report(v);
        let (sport, itag) = (31_001u16, 0x2468_ace0);
        let cookie = self.cookie_for(sport, itag, peer_port)?;
        let echo = sctp(sport, peer_port, cookie.0, &chunk(10, 0, &cookie.1));
        self.others.clear();
        self.wire.send_sctp(&echo);
        self.settle();
        let first = self
            .others
            .iter()
            .filter(|p| p.get(12) == Some(&11))
            .count();
        self.others.clear();
        self.wire.send_sctp(&echo);
        self.settle();
        let again = self
            .others
            .iter()
            .filter(|p| p.get(12) == Some(&11))
            .count();
        let v = json!({"attack": "replayed COOKIE ECHO", "rfc": "RFC 9260 §5.2.4 action D",
            "sent": 2, "cookie_acks": [first, again]});
        self.report(v);
        // That association ends (ABORT on its tag) before the next attacks.
        self.wire
            .send_sctp(&sctp(sport, peer_port, cookie.0, &chunk(6, 0, &[])));
        self.settle();

        // Spoofed verification tags on our association's ports: DATA, ABORT and SHUTDOWN
        // (§8.5: discarded; §8.5.1 B: an ABORT only with the right tag).
        let wrong = tag ^ 0x0bad_f00d;
        let data = chunk(
            0,
            0x07,
            &[&[0, 0, 0, 1][..], &[0, 0, 0, 0], &[0, 0, 0, 16], &[0; 32]].concat(),
        );
        self.wire
            .send_sctp(&sctp(OUR_PORT, peer_port, wrong, &data));
        self.wire
            .send_sctp(&sctp(OUR_PORT, peer_port, wrong, &chunk(6, 0, &[])));
        self.wire.send_sctp(&sctp(
            OUR_PORT,
            peer_port,
            wrong,
            &chunk(7, 0, &[0, 0, 0, 0]),
        ));
        self.settle();
        let v = json!({"attack": "spoofed verification tags", "rfc": "RFC 9260 §8.5, §8.5.1",
            "sent": 3, "established": self.assoc.state() == State::Established});
        self.report(v);

        // Out of the blue: DATA for no association (§8.4 rule 8: ABORT, T bit set).
        self.others.clear();
        let ootb = sctp(32_000, peer_port, 0x1111_2222, &data);
        self.wire.send_sctp(&ootb);
        self.settle();
        let aborts = self.others.iter().filter(|p| p.get(12) == Some(&6)).count();
        let v = json!({"attack": "out of the blue", "rfc": "RFC 9260 §8.4",
            "sent": 1, "aborts": aborts});
        self.report(v);
        Ok(())
    }

    /// Sends `n` INITs from random ports and tags, at most [`FLOOD_WINDOW`] unanswered at a
    /// time (faster, and the device ring in front of the endpoint overflows: those never reach
    /// it); returns how many went and how many INIT ACKs came back.
    fn init_flood(&mut self, n: u64, dport: u16) -> (u64, u64) {
        self.others.clear();
        let (mut sent, mut answered) = (0u64, 0u64);
        let count = |a: &mut Self| {
            let acks = a.others.iter().filter(|p| p.get(12) == Some(&2)).count() as u64;
            a.others.clear();
            acks
        };
        while sent < n {
            let r = self.random();
            let init = sctp(
                1024 + (r as u16 % 30_000),
                dport,
                0,
                &init_chunk((r >> 16) as u32 | 1),
            );
            self.wire.send_sctp(&init);
            sent += 1;
            let waited = std::time::Instant::now();
            while sent.saturating_sub(answered) >= FLOOD_WINDOW
                && waited.elapsed() < Duration::from_millis(50)
            {
                self.turn();
                answered += count(self);
            }
        }
        self.settle();
        answered += count(self);
        (sent, answered)
    }

    /// INIT from `sport` with Initiate Tag `itag`; returns the INIT ACK's (Initiate Tag, State
    /// Cookie).
    fn cookie_for(&mut self, sport: u16, itag: u32, dport: u16) -> Result<(u32, Vec<u8>), String> {
        self.others.clear();
        self.wire
            .send_sctp(&sctp(sport, dport, 0, &init_chunk(itag)));
        let got = |a: &Self| a.others.iter().any(|p| init_ack(p, sport).is_some());
        self.until(Duration::from_secs(5), got);
        self.others
            .iter()
            .find_map(|p| init_ack(p, sport))
            .ok_or_else(|| "no INIT ACK".to_string())
    }
}

/// A DDP Stream Session Control message: DDP-SSN, function code, Private Data.
fn ctl(ssn: u16, code: u16, private: &[u8]) -> Vec<u8> {
    [&ssn.to_be_bytes()[..], &code.to_be_bytes(), private].concat()
}

/// A tagged DDP Segment (last, DV 1) with its DDP-SSN.
fn tseg(ssn: u16, stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    [
        &ssn.to_be_bytes()[..],
        &[0xc1, 0],
        &stag.to_be_bytes(),
        &to.to_be_bytes(),
        payload,
    ]
    .concat()
}

/// An untagged DDP Segment (last, DV 1) with its DDP-SSN.
fn useg(ssn: u16, qn: u32, msn: u32, mo: u32, payload: &[u8]) -> Vec<u8> {
    [
        &ssn.to_be_bytes()[..],
        &[0x41, 0, 0, 0, 0, 0],
        &qn.to_be_bytes(),
        &msn.to_be_bytes(),
        &mo.to_be_bytes(),
        payload,
    ]
    .concat()
}

/// An untagged RDMAP message of one segment (last, DV 1) with its DDP-SSN: the RDMAP control
/// field in the RsvdULP (RFC 5040 §4.1), on queue `qn` with message number `msn`.
fn rdmap_useg(ssn: u16, opcode: Opcode, qn: u32, msn: u32, payload: &[u8]) -> Vec<u8> {
    [
        &ssn.to_be_bytes()[..],
        &[0x41],
        &RdmapControl::new(opcode).untagged_rsvd_ulp(0),
        &qn.to_be_bytes(),
        &msn.to_be_bytes(),
        &0u32.to_be_bytes(),
        payload,
    ]
    .concat()
}

/// An SCTP packet: common header and `chunks`, CRC32c filled.
fn sctp(src: u16, dst: u16, vtag: u32, chunks: &[u8]) -> Vec<u8> {
    let mut p = [
        &src.to_be_bytes()[..],
        &dst.to_be_bytes(),
        &vtag.to_be_bytes(),
        &[0; 4],
        chunks,
    ]
    .concat();
    crc32c::fill(&mut p);
    p
}

fn chunk(ty: u8, flags: u8, value: &[u8]) -> Vec<u8> {
    let mut c = vec![ty, flags];
    c.extend_from_slice(&((4 + value.len()) as u16).to_be_bytes());
    c.extend_from_slice(value);
    c.resize(c.len().next_multiple_of(4), 0);
    c
}

/// INIT with DDP's Adaptation Layer Indication (RFC 5043 §4).
fn init_chunk(tag: u32) -> Vec<u8> {
    let ali = [
        &0xc006u16.to_be_bytes()[..],
        &8u16.to_be_bytes(),
        &1u32.to_be_bytes(),
    ]
    .concat();
    let v = [
        &tag.to_be_bytes()[..],
        &65_536u32.to_be_bytes(),
        &8u16.to_be_bytes(),
        &8u16.to_be_bytes(),
        &1u32.to_be_bytes(),
        &ali,
    ]
    .concat();
    chunk(1, 0, &v)
}

/// The (Initiate Tag, State Cookie) of an INIT ACK to our port `port`.
fn init_ack(p: &[u8], port: u16) -> Option<(u32, Vec<u8>)> {
    if p.get(2..4)? != port.to_be_bytes() || *p.get(12)? != 2 {
        return None;
    }
    let tag = u32::from_be_bytes(p.get(16..20)?.try_into().ok()?);
    let len = usize::from(u16::from_be_bytes(p.get(14..16)?.try_into().ok()?));
    let mut params = p.get(32..12 + len)?;
    while params.len() >= 4 {
        let ty = u16::from_be_bytes([params[0], params[1]]);
        let l = usize::from(u16::from_be_bytes([params[2], params[3]]));
        if l < 4 {
            return None;
        }
        if ty == 7 {
            return Some((tag, params.get(4..l)?.to_vec()));
        }
        params = params.get(l.next_multiple_of(4)..)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--mulpdu` below the tagged header's 14 bytes made `mulpdu + 1 - 14` wrap (a panic, or
    /// a vector of 2^64 bytes); it is refused at parsing now, and byte counts take binary
    /// units as the endpoint's do.
    #[test]
    fn a_mulpdu_below_the_tagged_header_is_refused_and_units_are_taken() {
        let parse = |extra: &str| {
            Args::try_parse_from(
                format!("ddpdk-attack --ip 198.18.0.1 --peer 198.18.0.2 {extra}")
                    .split_whitespace(),
            )
        };
        assert!(parse("--mulpdu 5").is_err());
        assert!(parse("--mulpdu -1").is_err());
        assert_eq!(parse("--mulpdu 14").map(|a| a.mulpdu).ok(), Some(Some(14)));
        assert_eq!(
            parse("--mulpdu 1K").map(|a| a.mulpdu).ok(),
            Some(Some(1024))
        );
        assert!(parse("--cookie-life-ms 0").is_err());
        assert!(parse("--stags -3").is_err());
    }
}
