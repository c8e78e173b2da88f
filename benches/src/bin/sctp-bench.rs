//! Message rate of our SCTP association engine next to usrsctp, in one process and one run
//! (issue 4 item 8): N unordered messages of one size on stream 0, PPID 16, one direction,
//! between two of our endpoints connected back to back in memory, then the same N messages
//! between two usrsctp endpoints in AF_CONN mode, alternating which goes first every round.
//! The result is a ratio (ours / usrsctp), the only number that means something on a shared
//! machine.
//!
//! Both pairs are driven by the same loop: the application offers messages until the sender
//! refuses one (send buffer full), every packet the sender emits goes straight into the
//! receiver, every packet the receiver emits straight back, and timers run on the same clock.
//! Nothing is lost or reordered. The handshake is excluded from the timing; the clock stops
//! when the receiver has the N-th message, and the count, the total bytes, the stream, the
//! PPID and an index stamped in every message are checked before any rate is printed.
//!
//!     cargo run --release -p ddpdk-benches --bin sctp-bench -- --sizes 64,1024,1400 --rounds 5
#![forbid(unsafe_code)]

use ddpdk_dataplane::{errln, outln};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use clap::{Parser, ValueEnum};
use ddpdk_dataplane::sctp::{
    Association, Config, Endpoint, Event, Instant, Message, Outcome, SendError,
};
use ddpdk_usrsctp::{Extensions, Notification, Received, Stack};

/// The SCTP payload protocol identifier of a DDP Segment Chunk (RFC 5043 §5.2, IANA-assigned).
const PPID: u32 = 16;
const STREAM: u16 = 0;
const CLIENT_PORT: u16 = 5001;
const SERVER_PORT: u16 = 5002;
const CLIENT_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const SERVER_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
/// A measurement that sees nothing move for this long (on its own clock) has deadlocked.
const STALL_LIMIT: Duration = Duration::from_secs(30);

#[derive(Debug, Parser)]
#[command(
    about = "Our SCTP engine vs usrsctp (AF_CONN), in memory, one process: msgs/s as a ratio"
)]
struct Args {
    /// Message sizes in bytes (8 or more; each must fit one DATA chunk at MTU 1480).
    #[arg(long, value_delimiter = ',', default_value = "64,1024,1400")]
    sizes: Vec<usize>,
    /// Messages per measurement, the same for both stacks; 0 picks, per size, the count the
    /// faster stack moves in about --target-secs of CPU time (from a short pilot run of both).
    #[arg(long, default_value_t = 0)]
    messages: u64,
    /// Seconds the faster stack's measurement should take when --messages is 0.
    #[arg(long, default_value_t = 0.5)]
    target_secs: f64,
    /// Measurements per stack and size (alternating which stack goes first).
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// `real`: both stacks' timers run on the monotonic clock, so waiting for a timer (a
    /// delayed SACK, say) costs wall time. `virtual`: time stands still while packets move and
    /// jumps 1 ms whenever nothing moves, so the figure is processing cost alone; stalls are
    /// still counted.
    #[arg(long, value_enum, default_value_t = ClockKind::Real)]
    clock: ClockKind,
    /// Print one JSON object per size instead of a table.
    #[arg(long)]
    json: bool,
    /// Measure one stack alone (no ratio): for profiling, e.g. under `perf record`.
    #[arg(long, value_enum)]
    only: Option<Side>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ClockKind {
    Real,
    Virtual,
}

/// The time both stacks see. In virtual mode it moves only in [`Clock::idle`].
#[derive(Debug)]
struct Clock {
    kind: ClockKind,
    start: std::time::Instant,
    virtual_ns: u64,
}

impl Clock {
    fn new(kind: ClockKind) -> Self {
        Clock {
            kind,
            start: std::time::Instant::now(),
            // Not zero: our engine treats time as opaque, but a zero epoch is a poor test.
            virtual_ns: 1_000_000_000,
        }
    }

    fn now_ns(&self) -> u64 {
        match self.kind {
            ClockKind::Real => 1_000_000_000 + self.start.elapsed().as_nanos() as u64,
            ClockKind::Virtual => self.virtual_ns,
        }
    }

    /// Nothing moved: in virtual time, let 1 ms pass.
    fn idle(&mut self) {
        if self.kind == ClockKind::Virtual {
            self.virtual_ns += 1_000_000;
        }
    }
}

/// What the receiving application saw.
#[derive(Debug, Default, Clone, Copy)]
struct Rx {
    size: usize,
    count: u64,
    bytes: u64,
    /// Sums of the indices and of their squares: with the count, every index exactly once.
    index_sum: u64,
    index_sq_sum: u64,
    /// Wrong stream, PPID, length, last byte, or (usrsctp) an ordered message.
    bad: u64,
}

impl Rx {
    fn new(size: usize) -> Self {
        Rx {
            size,
            ..Rx::default()
        }
    }

    #[inline]
    fn take(&mut self, stream: u16, ppid: u32, data: &[u8]) {
        self.count += 1;
        self.bytes += data.len() as u64;
        if stream != STREAM
            || ppid != PPID
            || data.len() != self.size
            || (data.len() > 8 && data[data.len() - 1] != pattern_byte(data.len() - 1))
        {
            self.bad += 1;
            return;
        }
        let mut index = [0u8; 8];
        index.copy_from_slice(&data[..8]);
        let index = u64::from_le_bytes(index);
        self.index_sum = self.index_sum.wrapping_add(index);
        self.index_sq_sum = self.index_sq_sum.wrapping_add(index.wrapping_mul(index));
    }

    /// Every message exactly once and intact, or why not.
    fn verify(&self, n: u64) -> Result<(), String> {
        let n128 = u128::from(n);
        let want_sum = (n128 * n128.saturating_sub(1) / 2) as u64;
        let want_sq = (n128.saturating_sub(1) * n128 * (2 * n128).saturating_sub(1) / 6) as u64;
        if self.count != n
            || self.bytes != n * self.size as u64
            || self.bad != 0
            || self.index_sum != want_sum
            || self.index_sq_sum != want_sq
        {
            return Err(format!(
                "delivery check failed: {} messages / {} bytes received, want {n} / {}; {} \
                 malformed; index sums {} / {} want {want_sum} / {want_sq}",
                self.count,
                self.bytes,
                n * self.size as u64,
                self.bad,
                self.index_sum,
                self.index_sq_sum,
            ));
        }
        Ok(())
    }
}

fn pattern_byte(i: usize) -> u8 {
    (i as u8).wrapping_mul(31) ^ 0x5a
}

/// The message both stacks send: a fixed pattern, with the message index stamped in the first
/// 8 bytes before each send.
fn message(size: usize) -> Vec<u8> {
    (0..size).map(pattern_byte).collect()
}

#[derive(Debug, Default, Clone, Copy)]
struct Wire {
    /// Packets and bytes sender → receiver, receiver → sender.
    fwd_packets: u64,
    fwd_bytes: u64,
    back_packets: u64,
    back_bytes: u64,
    /// Largest packet seen either way.
    max_packet: usize,
}

impl Wire {
    fn fwd(&mut self, len: usize) {
        self.fwd_packets += 1;
        self.fwd_bytes += len as u64;
        self.max_packet = self.max_packet.max(len);
    }

    fn back(&mut self, len: usize) {
        self.back_packets += 1;
        self.back_bytes += len as u64;
        self.max_packet = self.max_packet.max(len);
    }
}

/// One side of the comparison: an established association with a sender and a receiver.
trait Pair {
    /// Queues messages while the sender takes them, stamping each with its index. Returns
    /// how many were taken.
    fn offer(&mut self, msg: &mut [u8], next: u64, n: u64) -> Result<u64, String>;
    /// Everything the sender has to send goes to the receiver, then everything the receiver
    /// has back to the sender. Returns the packets moved.
    fn pump(&mut self, now_ns: u64) -> Result<u64, String>;
    /// Runs the timers due at `now_ns`.
    fn tick(&mut self, now_ns: u64);
    fn rx(&self) -> &Rx;
    fn wire(&self) -> &Wire;
    /// Stack-specific counters for the diagnostics line.
    fn notes(&self) -> String;
}

fn copy_index(msg: &mut [u8], index: u64) {
    msg[..8].copy_from_slice(&index.to_le_bytes());
}

// ------------------------------------------------------------------------------------------
// Ours
// ------------------------------------------------------------------------------------------

#[derive(Debug)]
struct Ours {
    client: Association,
    server: Association,
    buf: Vec<u8>,
    rx: Rx,
    wire: Wire,
}

fn our_config(port: u16) -> Config {
    Config {
        local_port: port,
        ..Config::default()
    }
}

impl Ours {
    /// Two endpoints, the client connects, packets go back and forth until both report
    /// Connected (the handshake: INIT, INIT ACK, COOKIE ECHO, COOKIE ACK).
    fn connect(size: usize, clock: &Clock) -> Result<Ours, String> {
        let now = Instant::from_nanos(clock.now_ns());
        let mut client_ep = Endpoint::new(our_config(CLIENT_PORT), [0x11; 32])?;
        let mut server_ep = Endpoint::new(our_config(SERVER_PORT), [0x22; 32])?;
        let mut client = client_ep.connect(now, SERVER_ADDR, SERVER_PORT);
        let mut server: Option<Association> = None;
        let mut buf = vec![0u8; 65_536];
        let mut out = vec![0u8; 65_536];
        let mut nothing = |m: Message<'_>| panic!("message during the handshake: {m:?}");
        let (mut client_up, mut server_up) = (false, false);
        for _ in 0..16 {
            while let Some(n) = client.poll_transmit(now, &mut buf) {
                match server.as_mut() {
                    Some(s) => s
                        .handle(now, &buf[..n], &mut nothing)
                        .map_err(|e| format!("server dropped a handshake packet: {e:?}"))?,
                    None => {
                        match server_ep.handle(now, CLIENT_ADDR, &buf[..n], &mut out, &mut nothing)
                        {
                            Outcome::Reply(m) => client
                                .handle(now, &out[..m], &mut nothing)
                                .map_err(|e| format!("client dropped {e:?}"))?,
                            Outcome::Accepted(a) => server = Some(*a),
                            Outcome::Ignored(why) => {
                                return Err(format!("server endpoint ignored a packet: {why:?}"))
                            }
                        }
                    }
                }
            }
            if let Some(s) = server.as_mut() {
                while let Some(n) = s.poll_transmit(now, &mut buf) {
                    client
                        .handle(now, &buf[..n], &mut nothing)
                        .map_err(|e| format!("client dropped {e:?}"))?;
                }
                while let Some(e) = s.poll_event() {
                    server_up |= matches!(e, Event::Connected { .. });
                }
            }
            while let Some(e) = client.poll_event() {
                client_up |= matches!(e, Event::Connected { .. });
            }
            if client_up && server_up {
                let server = server.ok_or("no server association")?;
                if size > client.max_message() {
                    return Err(format!(
                        "{size} B does not fit one DATA chunk (max {})",
                        client.max_message()
                    ));
                }
                return Ok(Ours {
                    client,
                    server,
                    buf,
                    rx: Rx::new(size),
                    wire: Wire::default(),
                });
            }
        }
        Err("our handshake did not complete".into())
    }
}

impl Pair for Ours {
    fn offer(&mut self, msg: &mut [u8], mut next: u64, n: u64) -> Result<u64, String> {
        let first = next;
        while next < n {
            copy_index(msg, next);
            match self.client.send(STREAM, PPID, msg) {
                Ok(_) => next += 1,
                Err(SendError::Full) => break,
                Err(e) => return Err(format!("send: {e}")),
            }
        }
        Ok(next - first)
    }

    fn pump(&mut self, now_ns: u64) -> Result<u64, String> {
        let now = Instant::from_nanos(now_ns);
        let mut moved = 0;
        let rx = &mut self.rx;
        let mut deliver = |m: Message<'_>| rx.take(m.stream, m.ppid, m.data);
        while let Some(n) = self.client.poll_transmit(now, &mut self.buf) {
            self.wire.fwd(n);
            moved += 1;
            self.server
                .handle(now, &self.buf[..n], &mut deliver)
                .map_err(|e| format!("receiver dropped a packet: {e:?}"))?;
        }
        let mut none = |m: Message<'_>| panic!("message on the reverse path: {m:?}");
        while let Some(n) = self.server.poll_transmit(now, &mut self.buf) {
            self.wire.back(n);
            moved += 1;
            self.client
                .handle(now, &self.buf[..n], &mut none)
                .map_err(|e| format!("sender dropped a packet: {e:?}"))?;
        }
        Ok(moved)
    }

    fn tick(&mut self, now_ns: u64) {
        let now = Instant::from_nanos(now_ns);
        for a in [&mut self.client, &mut self.server] {
            if a.poll_timeout().is_some_and(|t| t <= now) {
                a.handle_timeout(now);
            }
        }
    }

    fn rx(&self) -> &Rx {
        &self.rx
    }

    fn wire(&self) -> &Wire {
        &self.wire
    }

    fn notes(&self) -> String {
        let c = self.client.stats();
        let s = self.server.stats();
        format!(
            "sacks {} t3 {} fast-rtx {} cwnd {} srtt {:?}",
            s.sacks_out,
            c.t3_expiries,
            c.fast_retransmits,
            self.client.cwnd(),
            self.client.srtt().unwrap_or_default()
        )
    }
}

// ------------------------------------------------------------------------------------------
// usrsctp
// ------------------------------------------------------------------------------------------

#[derive(Debug)]
struct Usrsctp {
    // Endpoints before the stack: dropped while the lock is still held.
    client: ddpdk_usrsctp::Endpoint,
    server: ddpdk_usrsctp::Endpoint,
    stack: Stack,
    /// usrsctp's timer clock, in whole ms handed to `advance`.
    ticks_ms: u64,
    rx: Rx,
    wire: Wire,
    /// recv calls made, and those that returned a message.
    recv_calls: u64,
}

/// The usrsctp settings, next to ours: no protocol extension (ours implements none), delayed
/// SACK 200 ms / every 2nd packet and RTO 1 s initial / 1 s min / 60 s max as in our default
/// Config. The wrapper sets SCTP_NODELAY (no Nagle) on every socket.
fn usrsctp_stack() -> Result<Stack, String> {
    let mut stack = Stack::lock();
    let e = |e: std::io::Error| format!("usrsctp sysctl: {e}");
    stack.set_extensions(Extensions::NONE).map_err(e)?;
    stack.set_delayed_ack(200, 2).map_err(e)?;
    stack.set_rto(1000, 1000, 60_000).map_err(e)?;
    Ok(stack)
}

impl Usrsctp {
    fn connect(size: usize, clock: &Clock) -> Result<Usrsctp, String> {
        let mut stack = usrsctp_stack()?;
        let e = |e: std::io::Error| format!("usrsctp: {e}");
        let mut server = stack.endpoint(SERVER_PORT).map_err(e)?;
        server.listen().map_err(e)?;
        let mut client = stack.endpoint(CLIENT_PORT).map_err(e)?;
        client.connect(SERVER_PORT).map_err(e)?;
        let (mut client_up, mut server_up) = (false, false);
        for _ in 0..100 {
            loop {
                let to_server = client.take_output();
                let to_client = server.take_output();
                if to_server.is_empty() && to_client.is_empty() {
                    break;
                }
                to_server.iter().for_each(|p| server.input(p));
                to_client.iter().for_each(|p| client.input(p));
            }
            for (ep, up) in [(&mut client, &mut client_up), (&mut server, &mut server_up)] {
                while let Some(r) = ep.recv() {
                    match r {
                        Received::Notification(Notification::CommUp { .. }) => *up = true,
                        Received::Notification(Notification::AdaptationIndication(_)) => {}
                        other => return Err(format!("usrsctp handshake: unexpected {other:?}")),
                    }
                }
            }
            if client_up && server_up {
                let ticks_ms = clock.now_ns() / 1_000_000;
                return Ok(Usrsctp {
                    client,
                    server,
                    stack,
                    ticks_ms,
                    rx: Rx::new(size),
                    wire: Wire::default(),
                    recv_calls: 0,
                });
            }
            stack.advance(10);
        }
        Err("usrsctp handshake did not complete".into())
    }

    fn drain_notifications(&mut self) -> Vec<Received> {
        let mut v = Vec::new();
        while let Some(r) = self.client.recv() {
            v.push(r);
        }
        v
    }
}

impl Pair for Usrsctp {
    fn offer(&mut self, msg: &mut [u8], mut next: u64, n: u64) -> Result<u64, String> {
        let first = next;
        while next < n {
            copy_index(msg, next);
            match self.client.send(STREAM, PPID, true, msg) {
                Ok(k) if k == msg.len() => next += 1,
                Ok(k) => return Err(format!("usrsctp took {k} of {} bytes", msg.len())),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(format!("usrsctp send: {e}")),
            }
        }
        Ok(next - first)
    }

    fn pump(&mut self, _now_ns: u64) -> Result<u64, String> {
        let mut moved = 0;
        let fwd = self.client.take_output();
        for p in &fwd {
            self.wire.fwd(p.len());
            self.server.input(p);
        }
        moved += fwd.len() as u64;
        if !fwd.is_empty() {
            // Read what arrived (an application woken by the socket would).
            loop {
                self.recv_calls += 1;
                match self.server.recv() {
                    Some(Received::Message(m)) => {
                        if !m.unordered {
                            self.rx.bad += 1;
                        }
                        self.rx.take(m.stream, m.ppid, &m.data);
                    }
                    Some(Received::Notification(n)) => {
                        return Err(format!("usrsctp receiver: unexpected {n:?}"))
                    }
                    None => break,
                }
            }
        }
        let back = self.server.take_output();
        for p in &back {
            self.wire.back(p.len());
            self.client.input(p);
        }
        moved += back.len() as u64;
        Ok(moved)
    }

    fn tick(&mut self, now_ns: u64) {
        let ms = now_ns / 1_000_000;
        if ms > self.ticks_ms {
            self.stack.advance((ms - self.ticks_ms) as u32);
            self.ticks_ms = ms;
        }
    }

    fn rx(&self) -> &Rx {
        &self.rx
    }

    fn wire(&self) -> &Wire {
        &self.wire
    }

    fn notes(&self) -> String {
        format!("recv calls {}", self.recv_calls)
    }
}

/// CPU time of the calling thread so far (`/proc/thread-self/schedstat`), or `None` off
/// Linux. On a shared machine it leaves out the time other processes held the CPU. The kernel
/// brings it up to date at scheduler ticks, so it is a few ms behind at most.
fn thread_cpu() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns = s.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

// ------------------------------------------------------------------------------------------
// The measurement
// ------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Side {
    Ours,
    Usrsctp,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Ours => "ours",
            Side::Usrsctp => "usrsctp",
        }
    }
}

#[derive(Debug, Clone)]
struct Run {
    secs: f64,
    /// The thread's CPU time over the same span, when it can be read.
    cpu_secs: Option<f64>,
    messages: u64,
    size: usize,
    wire: Wire,
    /// Episodes where nothing moved until a timer fired, and the clock time they took.
    stalls: u64,
    stall_secs: f64,
    notes: String,
}

impl Run {
    fn msgs_per_sec(&self) -> f64 {
        self.messages as f64 / self.secs
    }

    fn bytes_per_sec(&self) -> f64 {
        (self.messages * self.size as u64) as f64 / self.secs
    }

    /// Messages per CPU second (per wall second without CPU time).
    fn msgs_per_cpu_sec(&self) -> f64 {
        self.messages as f64 / self.cpu_secs.unwrap_or(self.secs)
    }
}

/// The loop both stacks run: offer, move packets both ways, run timers; until the receiver
/// has all `n` messages. Only this loop is timed.
fn drive<P: Pair>(pair: &mut P, clock: &mut Clock, size: usize, n: u64) -> Result<Run, String> {
    let mut msg = message(size);
    let mut next = 0;
    let (mut stalls, mut stall_ns, mut stall_start) = (0u64, 0u64, None);
    let cpu0 = thread_cpu();
    let t0 = std::time::Instant::now();
    while pair.rx().count < n {
        next += pair.offer(&mut msg, next, n)?;
        let now = clock.now_ns();
        let moved = pair.pump(now)?;
        if moved == 0 {
            let start = *stall_start.get_or_insert_with(|| {
                stalls += 1;
                now
            });
            if now - start > STALL_LIMIT.as_nanos() as u64 {
                return Err(format!(
                    "nothing moved for {STALL_LIMIT:?}: {next} of {n} messages queued, {} \
                     received",
                    pair.rx().count
                ));
            }
            clock.idle();
        } else if let Some(start) = stall_start.take() {
            stall_ns += now - start;
        }
        pair.tick(clock.now_ns());
    }
    let secs = t0.elapsed().as_secs_f64();
    // The kernel updates the figure at scheduler ticks (a few ms): too coarse for short runs.
    let cpu_secs = cpu0
        .zip(thread_cpu())
        .map(|(a, b)| b.saturating_sub(a).as_secs_f64())
        .filter(|&c| c >= 0.05);
    pair.rx().verify(n)?;
    Ok(Run {
        secs,
        cpu_secs,
        messages: n,
        size,
        wire: *pair.wire(),
        stalls,
        stall_secs: stall_ns as f64 / 1e9,
        notes: pair.notes(),
    })
}

fn measure(stack: Side, kind: ClockKind, size: usize, n: u64) -> Result<Run, String> {
    let mut clock = Clock::new(kind);
    let run = match stack {
        Side::Ours => {
            Ours::connect(size, &clock).and_then(|mut pair| drive(&mut pair, &mut clock, size, n))
        }
        Side::Usrsctp => Usrsctp::connect(size, &clock).and_then(|mut pair| {
            drive(&mut pair, &mut clock, size, n)
                .map_err(|e| format!("{e}; sender saw {:?}", pair.drain_notifications()))
        }),
    };
    run.map_err(|e| format!("{} at {size} B: {e}", stack.name()))
}

/// The usrsctp shared object this process loaded (its build matters: see benches/README.md).
fn usrsctp_library() -> String {
    // Loaded at start-up (the binary links it), so it is in the map before any use.
    std::fs::read_to_string("/proc/self/maps")
        .ok()
        .and_then(|maps| {
            maps.lines()
                .filter_map(|l| l.split_whitespace().nth(5))
                .find(|p| p.contains("libusrsctp"))
                .map(|p| {
                    std::fs::canonicalize(p)
                        .map_or_else(|_| p.to_string(), |c| c.display().to_string())
                })
        })
        .unwrap_or_else(|| "unknown".into())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    }
}

fn run_json(r: &Run) -> serde_json::Value {
    serde_json::json!({
        "secs": r.secs,
        "cpu_secs": r.cpu_secs,
        "msgs_per_s": r.msgs_per_sec(),
        "bytes_per_s": r.bytes_per_sec(),
        "msgs_per_cpu_s": r.msgs_per_cpu_sec(),
        "fwd_packets": r.wire.fwd_packets,
        "back_packets": r.wire.back_packets,
        "fwd_wire_bytes": r.wire.fwd_bytes,
        "back_wire_bytes": r.wire.back_bytes,
        "max_packet": r.wire.max_packet,
        "stalls": r.stalls,
        "stall_secs": r.stall_secs,
        "notes": r.notes,
    })
}

fn print_header() {
    outln!(
        "{:>5}  {:<8} {:>6} {:>6} {:>10} {:>7} {:>10} {:>7} {:>7} {:>5} {:>6} {:>6} {:>7}  notes",
        "round",
        "stack",
        "secs",
        "cpu s",
        "msgs/s",
        "MB/s",
        "msgs/cpus",
        "pkts>",
        "pkts<",
        "m/pkt",
        "maxpkt",
        "stalls",
        "stall s"
    );
}

fn print_run(round: u32, stack: Side, r: &Run) {
    let cpu = r
        .cpu_secs
        .map_or_else(|| "-".to_string(), |c| format!("{c:.3}"));
    let notes = r.notes.clone();
    outln!(
        "{:>5}  {:<8} {:>6.3} {:>6} {:>10.0} {:>7.1} {:>10.0} {:>7} {:>7} {:>5.1} {:>6} {:>6} \
         {:>7.3}  {}",
        round,
        stack.name(),
        r.secs,
        cpu,
        r.msgs_per_sec(),
        r.bytes_per_sec() / 1e6,
        r.msgs_per_cpu_sec(),
        r.wire.fwd_packets,
        r.wire.back_packets,
        r.messages as f64 / r.wire.fwd_packets.max(1) as f64,
        r.wire.max_packet,
        r.stalls,
        r.stall_secs,
        notes
    );
}

/// Messages for about `target_secs` on the faster stack, from a pilot run of each (by CPU
/// time, which the machine's other load does not inflate). Both stacks move the same count,
/// so the slower one takes longer.
fn calibrate(args: &Args, size: usize) -> Result<u64, String> {
    const PILOT: u64 = 20_000;
    let mut fastest = 0.0f64;
    for side in [Side::Ours, Side::Usrsctp] {
        if args.only.is_none_or(|only| only == side) {
            fastest = fastest.max(measure(side, args.clock, size, PILOT)?.msgs_per_cpu_sec());
        }
    }
    let n = (fastest * args.target_secs) as u64;
    Ok((n / 10_000 * 10_000).max(PILOT))
}

/// Median, lowest and highest.
fn spread(v: &[f64]) -> (f64, f64, f64) {
    let lo = v.iter().copied().fold(f64::MAX, f64::min);
    let hi = v.iter().copied().fold(f64::MIN, f64::max);
    (median(v.to_vec()), lo, hi)
}

fn bench_size(args: &Args, size: usize) -> Result<(), String> {
    if size < 8 {
        return Err(format!("{size} B: messages need 8 bytes for their index"));
    }
    let n = if args.messages > 0 {
        args.messages
    } else {
        calibrate(args, size)?
    };
    if !args.json {
        outln!();
        outln!("{size} B messages, {n} per measurement");
        print_header();
    }
    if let Some(side) = args.only {
        let mut rates = Vec::new();
        for round in 1..=args.rounds {
            let r = measure(side, args.clock, size, n)?;
            if args.json {
                outln!("{}", run_json(&r));
            } else {
                print_run(round, side, &r);
            }
            rates.push(r.msgs_per_sec());
        }
        if !args.json {
            let m = median(rates);
            outln!(
                "{size} B median: {} {m:.0} msgs/s ({:.1} MB/s)",
                side.name(),
                m * size as f64 / 1e6
            );
        }
        return Ok(());
    }
    let mut rounds = Vec::new();
    // Per round: ours and usrsctp msgs/s; ratios by wall time and by CPU time.
    let (mut ours_rates, mut usr_rates) = (Vec::new(), Vec::new());
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for round in 1..=args.rounds {
        let order = if round % 2 == 1 {
            [Side::Ours, Side::Usrsctp]
        } else {
            [Side::Usrsctp, Side::Ours]
        };
        let mut ours = None;
        let mut usr = None;
        for stack in order {
            let r = measure(stack, args.clock, size, n)?;
            if !args.json {
                print_run(round, stack, &r);
            }
            match stack {
                Side::Ours => ours = Some(r),
                Side::Usrsctp => usr = Some(r),
            }
        }
        let (ours, usr) = ours.zip(usr).ok_or("missing measurement")?;
        let ratio = ours.msgs_per_sec() / usr.msgs_per_sec();
        let cpu_ratio = ours.msgs_per_cpu_sec() / usr.msgs_per_cpu_sec();
        if !args.json {
            outln!(
                "{:>5}  ratio ours/usrsctp: {ratio:.2} by wall time, {cpu_ratio:.2} by CPU time",
                ""
            );
        }
        ours_rates.push(ours.msgs_per_sec());
        usr_rates.push(usr.msgs_per_sec());
        wall.push(ratio);
        cpu.push(cpu_ratio);
        rounds.push(serde_json::json!({
            "round": round,
            "first": order[0].name(),
            "ours": run_json(&ours),
            "usrsctp": run_json(&usr),
            "ratio": ratio,
            "cpu_ratio": cpu_ratio,
        }));
    }
    let (o, u) = (median(ours_rates), median(usr_rates));
    let (ratio, lo, hi) = spread(&wall);
    let (cpu_ratio, cpu_lo, cpu_hi) = spread(&cpu);
    if args.json {
        outln!(
            "{}",
            serde_json::json!({
                "size": size,
                "messages": n,
                "clock": format!("{:?}", args.clock).to_lowercase(),
                "ours_msgs_per_s": o,
                "usrsctp_msgs_per_s": u,
                "ours_bytes_per_s": o * size as f64,
                "usrsctp_bytes_per_s": u * size as f64,
                "median_ratio": ratio,
                "min_ratio": lo,
                "max_ratio": hi,
                "median_cpu_ratio": cpu_ratio,
                "rounds": rounds,
            })
        );
    } else {
        outln!(
            "{size} B median: ours {o:.0} msgs/s ({:.1} MB/s), usrsctp {u:.0} msgs/s ({:.1} \
             MB/s); ratio ours/usrsctp {ratio:.2} (rounds {lo:.2}..{hi:.2}), by CPU time \
             {cpu_ratio:.2} ({cpu_lo:.2}..{cpu_hi:.2})",
            o * size as f64 / 1e6,
            u * size as f64 / 1e6,
        );
    }
    Ok(())
}

fn main() {
    let args = Args::parse();
    if args.rounds == 0 {
        errln!("error: --rounds must be at least 1");
        std::process::exit(2);
    }
    if !args.json {
        let c = Config::default();
        outln!(
            "one direction, unordered, stream {STREAM}, PPID {PPID}; clock: {:?}; handshake \
             excluded; MB = 10^6 payload bytes",
            args.clock
        );
        outln!(
            "ours:    default Config: path MTU {}, a_rwnd {}, {} send slots, max burst {}, \
             SACK delay {:?} / every {} packets",
            c.path_mtu,
            c.a_rwnd,
            c.send_slots,
            c.max_burst,
            c.sack_delay,
            c.sack_freq
        );
        outln!(
            "usrsctp: AF_CONN, no extensions, SACK delay 200 ms / every 2 packets, NODELAY, \
             RTO 1 s / 1 s / 60 s, socket buffers at usrsctp defaults"
        );
        outln!("usrsctp library: {}", usrsctp_library());
    }
    for &size in &args.sizes {
        if let Err(e) = bench_size(&args, size) {
            errln!("error: {e}");
            std::process::exit(1);
        }
    }
}
