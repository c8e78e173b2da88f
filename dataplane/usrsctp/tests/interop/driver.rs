//! The interop driver: our sans-IO engine on one side, usrsctp on the other, one virtual clock.
//!
//! Time is whole milliseconds: our `Instant` is `now_ms` in nanoseconds and usrsctp's timers
//! move by the same amount through `Stack::advance`. The clock jumps to the next packet
//! delivery or our next timer, at most 10 ms at a time (usrsctp's timers are not visible, so
//! it gets a look every 10 ms of virtual time). Packets take a fixed one-way delay, may be
//! dropped by a seeded SplitMix64 coin, and every packet, both ways, must carry a valid
//! CRC32c (checked with our `wire::crc32c::verify` when it is emitted).
//!
//! usrsctp's wall clock is virtual too. usrsctp runs its timers on the ticks `Stack::advance`
//! gives it, but also reads `gettimeofday` for RTT samples and, in `sctp_mark_all_for_resend`,
//! to decide which chunks a T3-rtx expiry retransmits: only those sent at least its RTT
//! estimate ago *in wall-clock time*. With virtual timers and a real clock, a T3 expiry
//! milliseconds of real time after the send retransmits nothing (it still counts the error
//! and backs off), so a lost tail of DATA, or a lost last SACK, ends with usrsctp aborting the
//! association after Association.Max.Retrans silent timeouts. This binary therefore defines
//! `gettimeofday` itself (`clock` below): the linker exports it because libusrsctp.so refers
//! to it, so usrsctp's calls resolve to it and read the same virtual clock as everything
//! else. `clock::check` makes sure the interposition is in effect.
//!
//! `INTEROP_TRACE=1` prints one line per packet.

#![allow(dead_code)] // not every test uses every helper

use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use ddpdk_dataplane::sctp::{
    Association, CloseReason, Config, Discard, Endpoint, Event, Ignored, Instant, Message, Outcome,
    State,
};
use ddpdk_dataplane::wire::crc32c;
use ddpdk_dataplane::wire::sctp::{ChunkRepr, Packet};
use ddpdk_usrsctp::{Notification, Received, Stack};

/// The active side's port and the passive side's, whichever implementation is which.
pub const ACTIVE_PORT: u16 = 5001;
pub const PASSIVE_PORT: u16 = 5002;
/// Our side's address (RFC 2544 benchmarking range) and the one usrsctp's packets come from
/// as far as our engine knows (AF_CONN has no IP addresses).
pub const OUR_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
pub const USRSCTP_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));

/// usrsctp's path MTU on an AF_CONN address, and so its fragmentation point: 1280 bytes of
/// SCTP packet (it adds no IP header for AF_CONN). Pinned by
/// `usrsctp_fragmentation_point_and_fragmented_data_refused`.
pub const USRSCTP_MTU: usize = 1280;

// Timing shared by both sides, so that lossy runs finish quickly in virtual time.
pub const RTO_INITIAL_MS: u32 = 100;
pub const RTO_MIN_MS: u32 = 50;
pub const RTO_MAX_MS: u32 = 1000;
/// Delayed SACK on both sides: well under RTO.Min plus the round trip, so a delayed SACK never
/// races a retransmission timer.
pub const SACK_DELAY_MS: u32 = 10;
/// One-way delay of the simulated link.
pub const DELAY_MS: u64 = 5;

/// usrsctp's wall clock (see the module documentation).
pub mod clock {
    use std::ffi::{c_int, c_void};
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Virtual microseconds since the first test of this binary started. Only ever grows, so
    /// usrsctp never sees time go backwards from one test to the next.
    static VIRTUAL_US: AtomicU64 = AtomicU64::new(0);
    /// 2000-01-01T00:00:00Z: where usrsctp's virtual wall clock starts.
    const EPOCH_S: u64 = 946_684_800;

    /// Moves usrsctp's wall clock on with the driver's clock.
    pub fn advance(ms: u64) {
        VIRTUAL_US.fetch_add(ms * 1000, Ordering::Relaxed);
    }

    /// `gettimeofday(2)` for the whole process: the virtual clock. Nothing else in a test
    /// binary reads it (Rust's `std::time` uses `clock_gettime`).
    ///
    /// # Safety
    /// `tv` is null or valid for writing a `timeval` (the POSIX contract).
    #[no_mangle]
    pub unsafe extern "C" fn gettimeofday(tv: *mut libc::timeval, _tz: *mut c_void) -> c_int {
        let us = VIRTUAL_US.load(Ordering::Relaxed);
        if !tv.is_null() {
            // SAFETY: non-null, and valid for writes by the caller's contract.
            unsafe {
                tv.write(libc::timeval {
                    tv_sec: (EPOCH_S + us / 1_000_000) as libc::time_t,
                    tv_usec: (us % 1_000_000) as libc::suseconds_t,
                });
            }
        }
        0
    }

    /// Panics unless the dynamic linker resolves `gettimeofday` to [`gettimeofday`] above,
    /// which is what libusrsctp.so's calls go through.
    pub fn check() {
        // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name has no preconditions.
        let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"gettimeofday".as_ptr()) };
        assert_eq!(
            found as usize,
            gettimeofday as unsafe extern "C" fn(*mut libc::timeval, *mut c_void) -> c_int as usize,
            "gettimeofday is not interposed: usrsctp would mix wall-clock and virtual time"
        );
        let mut tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        };
        // SAFETY: a valid timeval to write, and no timezone.
        unsafe { gettimeofday(&mut tv, std::ptr::null_mut()) };
        assert!(tv.tv_sec as u64 >= EPOCH_S);
    }
}

/// SplitMix64 (the same generator as the dataplane simulation): the loss coin and payloads.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    pub fn bytes32(&mut self) -> [u8; 32] {
        let mut b = [0u8; 32];
        for c in b.chunks_mut(8) {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        b
    }
}

/// Max.Init.Retransmits and Association.Max.Retrans on both sides: high enough that 30 % loss
/// both ways cannot exhaust them by bad luck (a round trip fails with probability 0.51 at
/// 30 %; 0.51^31 per stall), so a failed lossy run is a bug, not chance.
pub const MAX_RETRANS: u32 = 30;
/// usrsctp's Path.Max.Retrans: above [`MAX_RETRANS`]. usrsctp clears a path's error counter
/// only when a SACK acknowledges data that was never retransmitted ("Karn's rule applies to
/// clearing error count, this is optional", sctp_indata.c; RFC 9260 §8.2 says any
/// acknowledged TSN), and a single-homed association whose only path it had marked
/// unreachable was seen sending no DATA at all until a HEARTBEAT on it was acknowledged,
/// which under heavy loss took minutes (one HEARTBEAT per HB.interval, 30 s). Keeping the
/// path threshold out of reach leaves Association.Max.Retrans as the only failure rule.
pub const USRSCTP_PATH_MAX_RETRANS: u32 = 1000;

/// A usrsctp stack with the timing above: RTO 100/50/1000 ms, 10 ms delayed SACK (every 2nd
/// packet), the retransmission limits above, default extensions.
pub fn fast_stack() -> Stack {
    clock::check();
    let mut stack = Stack::lock();
    stack
        .set_rto(RTO_INITIAL_MS, RTO_MIN_MS, RTO_MAX_MS)
        .expect("RTO sysctls");
    stack
        .set_delayed_ack(SACK_DELAY_MS, 2)
        .expect("SACK sysctls");
    stack
        .set_max_retransmits(MAX_RETRANS, MAX_RETRANS, USRSCTP_PATH_MAX_RETRANS)
        .expect("retransmission sysctls");
    stack
}

/// Our configuration with the same timing as [`fast_stack`], the path MTU of usrsctp's AF_CONN
/// paths (so neither side ever needs to fragment), and `local_port`.
pub fn our_config(local_port: u16) -> Config {
    Config {
        local_port,
        path_mtu: USRSCTP_MTU,
        rto_initial: Duration::from_millis(RTO_INITIAL_MS.into()),
        rto_min: Duration::from_millis(RTO_MIN_MS.into()),
        rto_max: Duration::from_millis(RTO_MAX_MS.into()),
        sack_delay: Duration::from_millis(SACK_DELAY_MS.into()),
        assoc_max_retrans: MAX_RETRANS,
        max_init_retransmits: MAX_RETRANS,
        // 5 × RTO.Max (RFC 9260 §9.2), after which T5 aborts a stuck shutdown.
        shutdown_guard: Duration::from_millis(5 * u64::from(RTO_MAX_MS)),
        ..Config::default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// From our engine to usrsctp.
    ToUsrsctp,
    /// From usrsctp to our engine.
    ToOurs,
}

/// One packet as it was put on the link.
#[derive(Debug, Clone)]
pub struct WirePacket {
    pub at_ms: u64,
    pub dir: Dir,
    pub bytes: Vec<u8>,
    /// Dropped by the loss coin or a drop filter.
    pub lost: bool,
}

impl WirePacket {
    /// The packet's chunks, parsed (panics on anything our parser refuses: every packet on
    /// this link must be well-formed).
    pub fn chunks(&self) -> Vec<ChunkRepr<'_>> {
        parse_chunks(&self.bytes)
    }

    pub fn chunk_types(&self) -> Vec<u8> {
        chunk_types(&self.bytes)
    }

    pub fn vtag(&self) -> u32 {
        u32::from_be_bytes(self.bytes[4..8].try_into().expect("4 bytes"))
    }
}

/// Every chunk of a packet, parsed by our wire module.
pub fn parse_chunks(p: &[u8]) -> Vec<ChunkRepr<'_>> {
    let pkt = Packet::new_checked(p).unwrap_or_else(|e| panic!("packet {e:?}: {p:02x?}"));
    pkt.chunks_ref()
        .map(|c| {
            let c = c.unwrap_or_else(|e| panic!("chunk {e:?}: {p:02x?}"));
            ChunkRepr::parse(&c).unwrap_or_else(|e| panic!("chunk {e:?}: {p:02x?}"))
        })
        .collect()
}

/// Chunk type codes of a packet, in order.
pub fn chunk_types(p: &[u8]) -> Vec<u8> {
    Packet::new_checked(p)
        .map(|pkt| {
            pkt.chunks_ref()
                .flatten()
                .map(|c| u8::from(c.chunk_type()))
                .collect()
        })
        .unwrap_or_default()
}

/// One line about a packet's chunks: types, and TSNs and acknowledgements where they matter.
pub fn describe(p: &[u8]) -> String {
    let Ok(pkt) = Packet::new_checked(p) else {
        return format!("malformed {p:02x?}");
    };
    let mut out = format!("vtag {:08x}:", pkt.verification_tag());
    for c in pkt.chunks_ref() {
        let Ok(c) = c else {
            out.push_str(" <bad chunk>");
            break;
        };
        let flags = c.flags();
        match ChunkRepr::parse(&c) {
            Ok(ChunkRepr::Data(d)) => out.push_str(&format!(
                " DATA(tsn {} sid {} len {} flags {flags:x})",
                d.tsn,
                d.stream_id,
                d.user_data.len()
            )),
            Ok(ChunkRepr::Sack(s)) => {
                let gaps: Vec<_> = s.gap_ack_blocks.iter().map(|g| (g.start, g.end)).collect();
                let dups: Vec<_> = s.dup_tsns.iter().collect();
                out.push_str(&format!(
                    " SACK(cum {} rwnd {} gaps {gaps:?} dups {dups:?})",
                    s.cum_tsn_ack, s.a_rwnd
                ));
            }
            Ok(ChunkRepr::Shutdown(s)) => {
                out.push_str(&format!(" SHUTDOWN(cum {})", s.cum_tsn_ack));
            }
            Ok(ChunkRepr::Abort(a)) => out.push_str(&format!(
                " ABORT(T {} causes {:?})",
                a.t_bit,
                a.causes.iter().collect::<Vec<_>>()
            )),
            Ok(ChunkRepr::Error(e)) => out.push_str(&format!(
                " ERROR({:?})",
                e.causes.iter().collect::<Vec<_>>()
            )),
            _ => out.push_str(&format!(" {}", u8::from(c.chunk_type()))),
        }
    }
    out
}

/// A message as our engine delivered it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct OurMessage {
    pub stream: u16,
    pub ppid: u32,
    pub tsn: u32,
    pub data: Vec<u8>,
}

/// The link between the two sides: packets in flight and the record of everything sent.
#[derive(Debug)]
struct Link {
    rng: Rng,
    /// Loss probability towards usrsctp and towards us.
    loss_to_usrsctp: f64,
    loss_to_ours: f64,
    delay_ms: u64,
    /// In flight, in delivery order (one fixed delay keeps it sorted).
    queue: VecDeque<(u64, Dir, Vec<u8>)>,
    wire: Vec<WirePacket>,
    drop_filter: Option<DropFilter>,
    trace: bool,
}

/// A test's rule for dropping particular packets: true drops.
type DropFn = Box<dyn FnMut(Dir, &[u8]) -> bool>;

/// A [`DropFn`] in a `Debug` wrapper.
struct DropFilter(DropFn);

impl std::fmt::Debug for DropFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DropFilter")
    }
}

impl Link {
    fn send(&mut self, now_ms: u64, dir: Dir, bytes: &[u8]) {
        // RFC 9260 §6.8: every packet carries the CRC32c of its contents.
        assert!(
            crc32c::verify(bytes),
            "{dir:?} packet with a bad CRC32c at {now_ms} ms: {bytes:02x?}"
        );
        let loss = match dir {
            Dir::ToUsrsctp => self.loss_to_usrsctp,
            Dir::ToOurs => self.loss_to_ours,
        };
        let mut lost = self.rng.chance(loss);
        if let Some(DropFilter(drop)) = self.drop_filter.as_mut() {
            lost |= drop(dir, bytes);
        }
        if self.trace {
            eprintln!(
                "{now_ms:>7} ms {} {} len {}{}",
                match dir {
                    Dir::ToUsrsctp => "ours -> usrsctp",
                    Dir::ToOurs => "usrsctp -> ours",
                },
                describe(bytes),
                bytes.len(),
                if lost { " LOST" } else { "" }
            );
        }
        if !lost {
            self.queue
                .push_back((now_ms + self.delay_ms, dir, bytes.to_vec()));
        }
        self.wire.push(WirePacket {
            at_ms: now_ms,
            dir,
            bytes: bytes.to_vec(),
            lost,
        });
    }

    fn pop_due(&mut self, now_ms: u64) -> Option<(Dir, Vec<u8>)> {
        if self.queue.front().is_some_and(|(at, _, _)| *at <= now_ms) {
            self.queue.pop_front().map(|(_, d, b)| (d, b))
        } else {
            None
        }
    }
}

/// Who sends an INIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// Our engine (port 5001) connects to a usrsctp listener (port 5002).
    Ours,
    /// usrsctp (port 5001) connects to our endpoint (port 5002).
    Usrsctp,
    /// Both at the same instant: our engine on 5002 to usrsctp on 5001 and back (the INITs
    /// cross, RFC 9260 §5.2.1).
    Both,
}

/// How a run is set up.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub open: Open,
    /// usrsctp's Adaptation Layer Indication (`None`: the parameter is left out).
    pub usrsctp_adaptation: Option<u32>,
    pub loss_to_usrsctp: f64,
    pub loss_to_ours: f64,
    pub seed: u64,
    pub delay_ms: u64,
}

impl Setup {
    pub fn ours_active() -> Self {
        Setup {
            open: Open::Ours,
            usrsctp_adaptation: Some(1),
            loss_to_usrsctp: 0.0,
            loss_to_ours: 0.0,
            seed: 1,
            delay_ms: DELAY_MS,
        }
    }

    pub fn usrsctp_active() -> Self {
        Setup {
            open: Open::Usrsctp,
            ..Setup::ours_active()
        }
    }
}

/// Our engine and a usrsctp endpoint, and everything each side saw.
#[derive(Debug)]
pub struct Interop {
    pub now_ms: u64,
    pub ours: Endpoint,
    /// Our association while it is open (or has output left).
    pub assoc: Option<Association>,
    /// Our association once it is closed and has nothing left to send, kept for inspection.
    /// Packets arriving after that go to the endpoint (out of the blue, RFC 9260 §8.4).
    pub finished: Option<Association>,
    pub our_rx: Vec<OurMessage>,
    pub our_events: Vec<Event>,
    /// Messages still to queue on our association: (stream, ppid, data).
    pub our_outbox: VecDeque<(u16, u32, Vec<u8>)>,
    /// What the endpoint did with packets that matched no association.
    pub endpoint_ignored: Vec<Ignored>,
    /// Packets our association dropped.
    pub discards: Vec<Discard>,
    pub us: ddpdk_usrsctp::Endpoint,
    pub us_rx: Vec<Received>,
    /// Messages still to send from usrsctp: (stream, ppid, unordered, data).
    pub us_outbox: VecDeque<(u16, u32, bool, Vec<u8>)>,
    /// While set, usrsctp's application reads nothing: its receive window fills up.
    pub us_paused: bool,
    /// usrsctp has to be read at the next flush; when it last was.
    us_poll_due: bool,
    us_polled_ms: u64,
    link: Link,
    buf: Vec<u8>,
    /// Declared last: the usrsctp endpoint is dropped while the lock is still held.
    pub stack: Stack,
}

/// How often usrsctp is read when nothing happened to it (virtual ms).
const US_POLL_MS: u64 = 100;

/// Starting virtual time (ms): not zero, so no timestamp or cookie age is accidentally 0.
const START_MS: u64 = 1_000;

impl Interop {
    /// Both sides created and, for the active one, the INIT queued (nothing delivered yet).
    /// Our side uses `cfg` with its port set to the role's; usrsctp uses whatever `stack` was
    /// configured with.
    pub fn new(mut stack: Stack, cfg: Config, setup: Setup) -> io::Result<Interop> {
        clock::check();
        let (our_port, us_port) = if setup.open == Open::Ours {
            (ACTIVE_PORT, PASSIVE_PORT)
        } else {
            (PASSIVE_PORT, ACTIVE_PORT)
        };
        let mut rng = Rng::new(setup.seed);
        let cfg = Config {
            local_port: our_port,
            ..cfg
        };
        let mut ours = Endpoint::new(cfg, rng.bytes32()).map_err(io::Error::other)?;
        let mut us = stack.endpoint_with_adaptation(us_port, setup.usrsctp_adaptation)?;
        let now_ms = START_MS;
        let mut assoc = None;
        match setup.open {
            Open::Ours => us.listen()?,
            Open::Usrsctp | Open::Both => us.connect(our_port)?,
        }
        if setup.open != Open::Usrsctp {
            assoc = Some(ours.connect(ms(now_ms), USRSCTP_ADDR, us_port));
        }
        Ok(Interop {
            now_ms,
            ours,
            assoc,
            finished: None,
            our_rx: Vec::new(),
            our_events: Vec::new(),
            our_outbox: VecDeque::new(),
            endpoint_ignored: Vec::new(),
            discards: Vec::new(),
            us,
            us_rx: Vec::new(),
            us_outbox: VecDeque::new(),
            us_paused: false,
            us_poll_due: true,
            us_polled_ms: now_ms,
            link: Link {
                rng,
                loss_to_usrsctp: setup.loss_to_usrsctp,
                loss_to_ours: setup.loss_to_ours,
                delay_ms: setup.delay_ms,
                queue: VecDeque::new(),
                wire: Vec::new(),
                drop_filter: None,
                trace: std::env::var_os("INTEROP_TRACE").is_some(),
            },
            buf: vec![0; 65_536],
            stack,
        })
    }

    /// [`Interop::new`] and the handshake, checked complete on both sides.
    pub fn established(stack: Stack, cfg: Config, setup: Setup) -> Interop {
        let mut io = Interop::new(stack, cfg, setup).expect("set up");
        assert!(
            io.run_until(10_000, |io| io.our_connected() && io.us_up()),
            "no association: ours {:?}, usrsctp {:?}",
            io.our_events,
            io.us_rx
        );
        io
    }

    pub fn now(&self) -> Instant {
        ms(self.now_ms)
    }

    /// Every packet put on the link so far, lost ones included.
    pub fn wire(&self) -> &[WirePacket] {
        &self.link.wire
    }

    /// Our association, open or finished.
    pub fn our_assoc(&self) -> &Association {
        self.assoc
            .as_ref()
            .or(self.finished.as_ref())
            .expect("an association")
    }

    pub fn our_assoc_mut(&mut self) -> &mut Association {
        self.assoc.as_mut().expect("an open association")
    }

    pub fn our_connected(&self) -> bool {
        self.our_events
            .iter()
            .any(|e| matches!(e, Event::Connected { .. }))
    }

    pub fn our_closed(&self) -> Option<CloseReason> {
        self.our_events.iter().find_map(|e| match e {
            Event::Closed(r) => Some(*r),
            _ => None,
        })
    }

    pub fn us_notifications(&self) -> Vec<Notification> {
        self.us_rx
            .iter()
            .filter_map(|r| match r {
                Received::Notification(n) => Some(n.clone()),
                Received::Message(_) => None,
            })
            .collect()
    }

    pub fn us_messages(&self) -> Vec<ddpdk_usrsctp::Message> {
        self.us_rx
            .iter()
            .filter_map(|r| match r {
                Received::Message(m) => Some(m.clone()),
                Received::Notification(_) => None,
            })
            .collect()
    }

    pub fn us_saw(&self, pred: impl Fn(&Notification) -> bool) -> bool {
        self.us_rx
            .iter()
            .any(|r| matches!(r, Received::Notification(n) if pred(n)))
    }

    /// usrsctp's association is up and has not ended.
    pub fn us_up(&self) -> bool {
        self.us_saw(|n| matches!(n, Notification::CommUp { .. }))
            && !self.us_saw(|n| {
                matches!(
                    n,
                    Notification::CommLost { .. }
                        | Notification::ShutdownComplete
                        | Notification::ShutdownEvent
                )
            })
    }

    /// Moves everything both sides have to send onto the link, queues outbox messages while
    /// each side takes them, and reads what usrsctp has for the application.
    fn flush(&mut self) {
        let now = ms(self.now_ms);
        if let Some(a) = self.assoc.as_mut() {
            while let Some((stream, ppid, data)) = self.our_outbox.front() {
                if a.state() != State::Established {
                    break;
                }
                match a.send(*stream, *ppid, data) {
                    Ok(_) => {
                        self.our_outbox.pop_front();
                    }
                    Err(ddpdk_dataplane::sctp::SendError::Full) => break,
                    Err(e) => panic!("our send refused: {e}"),
                }
            }
            while let Some(n) = a.poll_transmit(now, &mut self.buf) {
                self.link.send(self.now_ms, Dir::ToUsrsctp, &self.buf[..n]);
            }
            // RFC 8899 probes, as our IP layer sends them (DF, whole).
            while let Some(n) = a.poll_probe(now, &mut self.buf) {
                self.link.send(self.now_ms, Dir::ToUsrsctp, &self.buf[..n]);
            }
            while let Some(e) = a.poll_event() {
                self.our_events.push(e);
            }
            if a.is_closed() {
                self.finished = self.assoc.take();
            }
        }
        let up = self.us_up();
        while let Some((stream, ppid, unordered, data)) = self.us_outbox.front() {
            if !up {
                break;
            }
            self.us_poll_due = true;
            match self.us.send(*stream, *ppid, *unordered, data) {
                Ok(n) => {
                    assert_eq!(n, data.len(), "usrsctp took part of a message");
                    self.us_outbox.pop_front();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("usrsctp send refused: {e}"),
            }
        }
        let output = self.us.take_output();
        // `recv` costs a 64 KiB buffer fill per call, which dominates long idle runs in debug
        // builds: read usrsctp when something happened to it (input, a send, output, which
        // also accompanies every timer-driven failure: ABORT), and otherwise every
        // US_POLL_MS of virtual time.
        if !self.us_paused
            && (self.us_poll_due
                || !output.is_empty()
                || self.now_ms >= self.us_polled_ms + US_POLL_MS)
        {
            self.us_poll_due = false;
            self.us_polled_ms = self.now_ms;
            while let Some(r) = self.us.recv() {
                self.us_rx.push(r);
            }
        }
        // Reading may have opened usrsctp's receive window (a window update SACK).
        for p in output.into_iter().chain(self.us.take_output()) {
            self.link.send(self.now_ms, Dir::ToOurs, &p);
        }
    }

    fn deliver(&mut self, dir: Dir, bytes: &[u8]) {
        match dir {
            Dir::ToUsrsctp => {
                self.us.input(bytes);
                self.us_poll_due = true;
            }
            Dir::ToOurs => {
                let now = ms(self.now_ms);
                let our_rx = &mut self.our_rx;
                let mut rx = |m: Message<'_>| {
                    our_rx.push(OurMessage {
                        stream: m.stream,
                        ppid: m.ppid,
                        tsn: m.tsn,
                        data: m.data.to_vec(),
                    })
                };
                if let Some(a) = self.assoc.as_mut() {
                    if let Err(d) = a.handle(now, bytes, &mut rx) {
                        self.discards.push(d);
                    }
                    return;
                }
                match self
                    .ours
                    .handle(now, USRSCTP_ADDR, bytes, &mut self.buf, &mut rx)
                {
                    Outcome::Reply(n) => {
                        self.link.send(self.now_ms, Dir::ToUsrsctp, &self.buf[..n]);
                    }
                    Outcome::Accepted(a) => self.assoc = Some(*a),
                    Outcome::Ignored(why) => self.endpoint_ignored.push(why),
                }
            }
        }
    }

    /// Exchanges packets until nothing more is due at the current time.
    fn settle(&mut self) {
        loop {
            self.flush();
            let mut any = false;
            while let Some((dir, bytes)) = self.link.pop_due(self.now_ms) {
                self.deliver(dir, &bytes);
                self.flush();
                any = true;
            }
            if !any {
                break;
            }
        }
    }

    /// Moves the clock to the next delivery or our next timer, at most 10 ms on, and runs the
    /// timers of both sides.
    fn tick(&mut self) {
        let mut next = self.now_ms + 10;
        if let Some((at, _, _)) = self.link.queue.front() {
            next = next.min(*at);
        }
        if let Some(t) = self.assoc.as_ref().and_then(Association::poll_timeout) {
            next = next.min(t.as_nanos().div_ceil(1_000_000));
        }
        let next = next.max(self.now_ms + 1);
        let dt = u32::try_from(next - self.now_ms).expect("small step");
        self.now_ms = next;
        clock::advance(dt.into());
        self.stack.advance(dt);
        let now = ms(self.now_ms);
        if let Some(a) = self.assoc.as_mut() {
            if a.poll_timeout().is_some_and(|t| t <= now) {
                a.handle_timeout(now);
            }
        }
    }

    /// Runs until `done` holds (true) or `max_ms` of virtual time passed (false).
    pub fn run_until(&mut self, max_ms: u64, done: impl Fn(&Interop) -> bool) -> bool {
        let deadline = self.now_ms + max_ms;
        loop {
            self.settle();
            if done(self) {
                return true;
            }
            if self.now_ms >= deadline {
                return false;
            }
            self.tick();
        }
    }

    /// usrsctp "crashes" and comes back: its endpoint is closed without a word to the peer
    /// (the ABORT usrsctp emits is discarded, as a dead host would), and a fresh one on the
    /// same port connects to us again with `adaptation`. usrsctp's records restart empty.
    pub fn restart_usrsctp(&mut self, adaptation: Option<u32>) -> io::Result<()> {
        let port = self.us.local_port();
        // A stand-in on another port, so the old endpoint (and its port) is gone before the
        // new one binds.
        let stand_in = self.stack.endpoint(port.wrapping_add(1000))?;
        drop(std::mem::replace(&mut self.us, stand_in));
        self.us = self.stack.endpoint_with_adaptation(port, adaptation)?;
        let our_port = self.ours.config().local_port;
        self.us.connect(our_port)?;
        self.us_rx.clear();
        self.us_poll_due = true;
        Ok(())
    }

    /// Loss probabilities from now on.
    pub fn set_loss(&mut self, to_usrsctp: f64, to_ours: f64) {
        self.link.loss_to_usrsctp = to_usrsctp;
        self.link.loss_to_ours = to_ours;
    }

    /// Drops every packet for which `drop` returns true (after the loss coin), from now on.
    pub fn drop_if(&mut self, drop: impl FnMut(Dir, &[u8]) -> bool + 'static) {
        self.link.drop_filter = Some(DropFilter(Box::new(drop)));
    }

    /// Runs for `ms` of virtual time, whatever happens.
    pub fn run_for(&mut self, ms: u64) {
        self.run_until(ms, |_| false);
    }
}

impl Dir {
    pub fn flip(self) -> Dir {
        match self {
            Dir::ToUsrsctp => Dir::ToOurs,
            Dir::ToOurs => Dir::ToUsrsctp,
        }
    }
}

/// Virtual milliseconds as our `Instant`.
pub fn ms(ms: u64) -> Instant {
    Instant::from_nanos(ms * 1_000_000)
}
