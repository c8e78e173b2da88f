//! Datagram Packetization Layer Path MTU Discovery (RFC 8899) for an association's path: the
//! black holes ICMP-based discovery cannot see.
//!
//! ICMP tells a sender that a hop is smaller than its packets (RFC 9260 §7.3, RFC 1191, RFC
//! 8201); where a firewall filters ICMP, nothing does, and full-size packets vanish until
//! T3-rtx gives up on the association. RFC 8899 §4.3: "A DPLPMTUD method MUST NOT rely
//! solely on [PTB messages]". This state machine (§5.2) is the other half:
//!
//! - Black hole detection (§4.3, the third indicator: "excessive loss of data sent with a
//!   specific packet size"): [`BLACK_HOLE_T3`] T3-rtx expiries in a row, the cumulative point
//!   not moving between them, of a retransmitted packet above [`BASE_PLPMTU`]. The PLPMTU drops to
//!   BASE_PLPMTU at once (§4.3: "sets a lower PLPMTU"; what was sent larger goes as IP
//!   fragments, RFC 9260 §6.9) and the BASE state confirms it with a probe.
//! - Probes (§6.2): a minimum HEARTBEAT with a PAD chunk (RFC 4820) filling the packet to the
//!   size probed, sent with DF and never fragmented, outside congestion and flow control. Its
//!   HEARTBEAT ACK confirms the size; [`MAX_PROBES`] lost, each after [`PROBE_TIMER`], say
//!   it does not pass.
//! - The search (§5.3) goes up from the confirmed size: the largest size first (a transient
//!   black hole, or a false alarm from loss, costs two round trips), then halving the gap
//!   between the largest confirmed and the smallest failed size down to [`SEARCH_STEP`].
//! - SEARCH_COMPLETE below the largest size searches again after [`PMTU_RAISE_TIMER`]
//!   (§5.1.1). SCTP is an acknowledged PL: no CONFIRMATION_TIMER (§6.2.1.3, a MUST NOT).
//!
//! Departure from §5.2's start, chosen for a datacenter dataplane: an association does not
//! start in BASE (1200-byte packets until a probe confirms more) but at its link's MTU, or the
//! one ICMP cached for the peer, in SEARCH_COMPLETE; the black hole detection above is what
//! takes it down when that is wrong. Sizes are SCTP packet sizes, as the association's path
//! MTU is (the IP header not included, §5.1.2's "size at the PL").

use core::time::Duration;

use super::time::Instant;

/// RFC 8899 §5.1.2: "a default BASE_PLPMTU of 1200 bytes is RECOMMENDED" (IPv4; within IPv6's
/// 1280-byte minimum link with its 40-byte header).
pub const BASE_PLPMTU: usize = 1200;
/// RFC 8899 §5.1.2: consecutive probes of one size lost before it is taken as failed.
pub const MAX_PROBES: u8 = 3;
/// RFC 8899 §5.1.1: a probe unanswered this long is lost. "MUST NOT be smaller than 1
/// second and SHOULD be larger than 15 seconds."
pub const PROBE_TIMER: Duration = Duration::from_secs(16);
/// RFC 8899 §5.1.1: SEARCH_COMPLETE below the largest size searches again after this.
pub const PMTU_RAISE_TIMER: Duration = Duration::from_secs(600);
/// T3-rtx expiries in a row (the cumulative point not moving between them) of a packet above
/// [`BASE_PLPMTU`] that are taken as a black hole (RFC 8899 §4.3): Linux's TCP takes its
/// `tcp_retries1` (3) retransmission timeouts as its cue the same way. Fewer mistake a delayed
/// SACK or loss for the path (two in a row came in 4 of 11 lossy runs of the DDP send tests
/// at 2 % loss); a false alarm costs two round trips (BASE confirmed, then the largest size).
pub const BLACK_HOLE_T3: u32 = 3;
/// The search ends when the largest confirmed and the smallest failed size are this close.
pub const SEARCH_STEP: usize = 16;
/// The HEARTBEAT information a probe carries: its nonce and the size probed, 8 + 4 bytes,
/// told apart from an ordinary HEARTBEAT's (16 bytes) by its length.
pub const PROBE_INFO_LEN: usize = 12;
/// Common header, HEARTBEAT chunk with its information parameter, PAD chunk header: the
/// smallest probe.
pub const PROBE_OVERHEAD: usize = 12 + 4 + 4 + PROBE_INFO_LEN + 4;

/// RFC 8899 §5.2's states (DISABLED is the association before it is established: nothing is
/// probed then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Confirming [`BASE_PLPMTU`] after a black hole.
    Base,
    /// Probing for a larger PLPMTU.
    Searching,
    /// The PLPMTU is the path's; nothing is probed until [`PMTU_RAISE_TIMER`].
    SearchComplete,
    /// BASE_PLPMTU itself went unconfirmed: it is kept (the smallest size the search uses)
    /// and probed again each [`PROBE_TIMER`].
    Error,
}

/// What moved a PLPMTU change ([`Plpmtud::last_change`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A black hole: down to BASE_PLPMTU (§4.3).
    BlackHole,
    /// BASE_PLPMTU confirmed by a probe (BASE or ERROR left for SEARCHING): the size is the
    /// same, but what may be fragmented is not ([`Plpmtud::fragments_allowed`]).
    BaseConfirmed,
    /// A probe that passed raised it.
    Raised,
}

/// Counters of one association's discovery.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PlpmtudStats {
    /// Black holes detected: the PLPMTU taken down to BASE_PLPMTU.
    pub black_holes: u64,
    pub probes_out: u64,
    pub probes_acked: u64,
    /// Probes unanswered for [`PROBE_TIMER`].
    pub probes_lost: u64,
    /// Times an acknowledged probe raised the PLPMTU.
    pub raised: u64,
}

/// One path's discovery. The association owns it and applies what [`Plpmtud::changed`]
/// reports to its path MTU.
#[derive(Debug, Clone)]
pub struct Plpmtud {
    state: State,
    /// The size in use: confirmed by a probe, or (before any) the link's or ICMP's.
    plpmtu: usize,
    /// MAX_PLPMTU: the link's size for this association, rounded down to whole words.
    max: usize,
    /// BASE_PLPMTU for this association's path: [`BASE_PLPMTU`], or less where what the
    /// link adds below SCTP would take it past IPv6's minimum link ([`Plpmtud::set_base`]).
    base: usize,
    /// The smallest size known not to pass (a probe lost MAX_PROBES times, or a PTB below
    /// it); `max + 1` when none is.
    failed: usize,
    /// The size of the probe outstanding or due.
    probed: usize,
    probe_count: u8,
    /// The HEARTBEAT nonce of the probe outstanding.
    nonce: Option<u64>,
    /// A probe is to be sent ([`Plpmtud::take_probe`]).
    due: bool,
    /// PROBE_TIMER while a probe is out; PMTU_RAISE_TIMER in SEARCH_COMPLETE below `max`.
    timer: Option<Instant>,
    probe_timer: Duration,
    t3_in_a_row: u32,
    /// The PLPMTU moved (or BASE was confirmed) and the association has not taken it yet.
    changed: bool,
    /// What the last change was.
    last: Change,
    pub stats: PlpmtudStats,
}

impl Plpmtud {
    /// Discovery for a path whose link carries SCTP packets of `max` bytes, starting there.
    pub fn new(max: usize, probe_timer: Duration) -> Self {
        let link = max;
        // An SCTP packet is whole words (RFC 9260 §3.2): the largest one the link carries.
        let max = max & !3;
        Plpmtud {
            state: State::SearchComplete,
            plpmtu: link,
            max,
            base: BASE_PLPMTU,
            failed: max + 1,
            probed: max,
            probe_count: 0,
            nonce: None,
            due: false,
            timer: None,
            probe_timer: probe_timer.max(Duration::from_secs(1)),
            t3_in_a_row: 0,
            changed: false,
            last: Change::Raised,
            stats: PlpmtudStats::default(),
        }
    }

    /// MAX_PLPMTU (§5.1.2: the local interface's MTU) for this association: its link's size,
    /// less what the link keeps (ESP's headroom). That is the PLPMTU too, as [`Plpmtud::set`].
    pub fn set_max(&mut self, max: usize) {
        // An SCTP packet is whole words (RFC 9260 §3.2): the largest one the link carries.
        self.max = max & !3;
        self.set(max);
    }

    /// RFC 8899 §5.1.2: BASE_PLPMTU is "a configured size expected to work for most paths",
    /// and the MIN_PLPMTU below it is configured "to provide space for extension headers and
    /// other encapsulations at layers below the PL". Over IPv6, every path carries 1280
    /// bytes (RFC 8200 §5): with an ESP SA's up to `headroom` bytes around the IPv6 packet
    /// (in a tunnel, another IPv6 header; with AES-CBC, up to 57 bytes), [`BASE_PLPMTU`]
    /// sealed may not fit, and a black hole would take the association to a size no silent
    /// 1280-byte hop passes. `base` is what is left of 1280 bytes (whole words, at most
    /// BASE_PLPMTU); set before any black hole.
    pub fn set_base(&mut self, base: usize) {
        self.base = (base & !3).clamp(super::config::MIN_PATH_MTU & !3, BASE_PLPMTU);
    }

    /// BASE_PLPMTU for this association ([`Plpmtud::set_base`]).
    pub fn base(&self) -> usize {
        self.base
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn plpmtu(&self) -> usize {
        self.plpmtu
    }

    /// The next moment [`Plpmtud::on_timer`] is due.
    pub fn timer(&self) -> Option<Instant> {
        self.timer
    }

    /// Whether a probe waits to be sent.
    pub fn probe_due(&self) -> bool {
        self.due
    }

    /// The new PLPMTU, once, after discovery moved it or confirmed BASE ([`Plpmtud::last_change`]
    /// says which).
    pub fn changed(&mut self) -> Option<usize> {
        core::mem::take(&mut self.changed).then_some(self.plpmtu)
    }

    /// Whether [`Plpmtud::changed`] has a change to report (without taking it).
    #[inline]
    pub fn has_changed(&self) -> bool {
        self.changed
    }

    /// What the change [`Plpmtud::changed`] reported was.
    pub fn last_change(&self) -> Change {
        self.last
    }

    /// RFC 8899 §5.4: "Some paths could be unable to sustain packets of the BASE_PLPMTU
    /// size. The Error State could be implemented to provide robustness to such paths ...
    /// methods such as endpoint IP fragmentation". While BASE_PLPMTU is unconfirmed (BASE,
    /// after a black hole, and ERROR) an IPv4 caller sends what is not a probe without DF, so
    /// that a silent hop below BASE_PLPMTU fragments it instead of dropping it; probes keep
    /// DF and say when the path carries BASE_PLPMTU whole again. (Linux's SCTP lets IP
    /// fragment in ERROR alone; here BASE too, since Association.Max.Retrans at a 10 ms
    /// RTO.Min can end an association before MAX_PROBES probes of PROBE_TIMER have failed.)
    pub fn fragments_allowed(&self) -> bool {
        matches!(self.state, State::Base | State::Error)
    }

    /// The path MTU was set from outside (ICMP lowered it, its age raised it, an SA's PMTU
    /// capped it): that is the PLPMTU now, and a search under way stops (RFC 8899 §4.6.2: a
    /// validated PTB below the PLPMTU lowers it; the ICMP path ages it back up).
    pub fn set(&mut self, mtu: usize) {
        self.plpmtu = mtu;
        self.state = State::SearchComplete;
        self.due = false;
        self.nonce = None;
        self.timer = None;
        self.probe_count = 0;
        self.failed = self.max + 1;
        // A change discovery made and the caller has not taken is superseded: this size is
        // not discovery's (its aging is the caller's, PMTU_AGE).
        self.changed = false;
    }

    /// The path may carry more than the PLPMTU now (ICMP's lowered estimate is old, RFC 1191
    /// §6.3, RFC 8201 §5.3): search up from it, the largest size first (§5.3), instead of
    /// raising it on trust (§4.6.2: a PTB, and so its absence, never raises the PLPMTU; only a
    /// probe that passes does). Nothing to do in BASE or ERROR (already probing) or while a
    /// search runs.
    pub fn search(&mut self, now: Instant) {
        if self.state != State::SearchComplete {
            return;
        }
        self.state = State::Searching;
        self.failed = self.max + 1;
        self.timer = None;
        self.next(now);
    }

    /// The largest SCTP packet the path passes whole is `ceiling` (an ESP SA's path MTU less
    /// its overhead, RFC 4301 §8.2.1): a probe due above it is not sent, since the port would
    /// fragment it (or clear a tunnel's DF) and it would confirm a size that crosses only in
    /// fragments. The search goes on below it, at `ceiling` first (as after a PTB, §4.6.2),
    /// or is complete. BASE_PLPMTU is probed whatever the ceiling: it is the smallest size
    /// the search uses (§5.1.2).
    pub fn limit(&mut self, now: Instant, ceiling: usize) {
        let ceiling = ceiling & !3;
        if !self.due || self.state != State::Searching || self.probed <= ceiling {
            return;
        }
        self.failed = self.failed.min(ceiling + 4);
        self.nonce = None;
        self.probe_count = 0;
        if ceiling <= self.plpmtu {
            self.complete(now);
        } else {
            self.probe(ceiling);
        }
    }

    /// T3-rtx expired with the earliest outstanding chunk in a packet of `packet_len` bytes,
    /// on an association that ends after `max_retrans` expiries in a row
    /// (Association.Max.Retrans, RFC 9260 §8.1). Returns true if that makes a black hole
    /// (RFC 8899 §4.3): the PLPMTU is BASE_PLPMTU now ([`Plpmtud::changed`]) and a probe of
    /// it is due. Below [`BLACK_HOLE_T3`] expiries the association would end first, so there
    /// the black hole is taken at its last expiry: an operator's short Max.Retrans asks for
    /// a quick failure of an unreachable peer, not of a small path.
    pub fn on_t3(&mut self, packet_len: usize, max_retrans: u32) -> bool {
        if packet_len <= self.base || self.plpmtu <= self.base {
            self.t3_in_a_row = 0;
            return false;
        }
        self.t3_in_a_row += 1;
        if self.t3_in_a_row < BLACK_HOLE_T3.min(max_retrans.max(1)) {
            return false;
        }
        self.t3_in_a_row = 0;
        self.stats.black_holes += 1;
        self.plpmtu = self.base;
        self.changed = true;
        self.last = Change::BlackHole;
        self.state = State::Base;
        // The size that failed is not marked: loss, not the path, may have caused it, and
        // the search tries the largest size first.
        self.failed = self.max + 1;
        self.probe(self.base);
        true
    }

    /// The earliest outstanding DATA was acknowledged (the cumulative point moved): the T3
    /// expiries before it were not in a row.
    #[inline]
    pub fn on_ack(&mut self) {
        self.t3_in_a_row = 0;
    }

    /// The probe to send now: its size and HEARTBEAT nonce (`nonce` is a fresh one, used
    /// unless the probe repeats one still outstanding). Arms the PROBE_TIMER.
    pub fn take_probe(&mut self, now: Instant, nonce: u64) -> Option<(usize, u64)> {
        if !self.due {
            return None;
        }
        self.due = false;
        let nonce = *self.nonce.get_or_insert(nonce);
        self.timer = Some(now + self.probe_timer);
        self.stats.probes_out += 1;
        Some((self.probed, nonce))
    }

    /// A HEARTBEAT ACK with probe information: `nonce` and the size it says. Returns true if
    /// it acknowledged the probe outstanding.
    pub fn on_probe_ack(&mut self, now: Instant, nonce: u64, size: usize) -> bool {
        if self.nonce != Some(nonce) || size != self.probed {
            return false;
        }
        self.nonce = None;
        self.timer = None;
        self.probe_count = 0;
        self.stats.probes_acked += 1;
        match self.state {
            // §5.2: BASE (and ERROR) left for SEARCHING once BASE_PLPMTU is confirmed; the
            // caller stops letting routers fragment ([`Plpmtud::fragments_allowed`]).
            State::Base | State::Error => {
                self.state = State::Searching;
                self.changed = true;
                self.last = Change::BaseConfirmed;
            }
            State::Searching => {
                if size > self.plpmtu {
                    self.plpmtu = size;
                    self.changed = true;
                    self.last = Change::Raised;
                    self.stats.raised += 1;
                }
            }
            // A late answer after the search stopped: nothing to move.
            State::SearchComplete => return true,
        }
        self.next(now);
        true
    }

    /// A validated PTB for this association (RFC 8899 §4.6, §6.2.1.4) that ICMP-based
    /// discovery did not act on (its size, as an SCTP packet, is not below the path MTU): one
    /// of our probes was too big. The search goes on below it, at its size first.
    pub fn on_ptb(&mut self, now: Instant, size: usize) {
        if self.state != State::Searching || self.nonce.is_none() || size >= self.probed {
            return;
        }
        self.failed = self.probed;
        self.nonce = None;
        self.probe_count = 0;
        let size = size & !3;
        if size <= self.plpmtu {
            // §5.2: "PL_PTB_SIZE = PLPMTU" ends the search.
            self.complete(now);
        } else {
            self.probe(size);
        }
    }

    /// The timer is due: a probe lost, or SEARCH_COMPLETE's time to search again.
    pub fn on_timer(&mut self, now: Instant) {
        if self.timer.is_none_or(|t| t > now) {
            return;
        }
        self.timer = None;
        if self.state == State::SearchComplete {
            // §5.1.1 PMTU_RAISE_TIMER: the path may have grown.
            self.state = State::Searching;
            self.failed = self.max + 1;
            self.next(now);
            return;
        }
        self.stats.probes_lost += 1;
        self.probe_count += 1;
        if self.probe_count < MAX_PROBES {
            self.due = true;
            return;
        }
        self.probe_count = 0;
        self.nonce = None;
        match self.state {
            // §5.2: BASE_PLPMTU unconfirmed. It stays in use (no smaller size is searched) and
            // is probed again: the association's own retransmissions decide its fate.
            State::Base | State::Error => {
                self.state = State::Error;
                self.probe(self.base);
            }
            State::Searching => {
                self.failed = self.probed;
                self.next(now);
            }
            State::SearchComplete => {}
        }
    }

    /// §5.3: the next size to probe above the PLPMTU, or the search is complete.
    fn next(&mut self, now: Instant) {
        if self.plpmtu >= self.max {
            self.complete(now);
            return;
        }
        let size = if self.failed > self.max {
            self.max
        } else {
            (self.plpmtu + (self.failed - self.plpmtu) / 2) & !3
        };
        if size <= self.plpmtu || self.failed - self.plpmtu <= SEARCH_STEP {
            self.complete(now);
        } else {
            self.probe(size);
        }
    }

    fn probe(&mut self, size: usize) {
        self.probed = size;
        self.nonce = None;
        self.due = true;
    }

    fn complete(&mut self, now: Instant) {
        self.state = State::SearchComplete;
        self.due = false;
        self.nonce = None;
        self.timer = (self.plpmtu < self.max).then(|| now + PMTU_RAISE_TIMER);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;

    const MAX: usize = 1480;

    fn at(s: u64) -> Instant {
        Instant::from_nanos(s * 1_000_000_000)
    }

    /// Sends the due probe at `now` and returns its size and nonce.
    fn send(p: &mut Plpmtud, now: Instant) -> (usize, u64) {
        p.take_probe(now, 7).unwrap()
    }

    fn black_hole(p: &mut Plpmtud) {
        for _ in 0..BLACK_HOLE_T3 {
            p.on_t3(MAX, 10);
        }
    }

    /// Loses the outstanding probe MAX_PROBES times from `now`; returns the time after.
    fn lose(p: &mut Plpmtud, mut now: Instant) -> Instant {
        for _ in 0..MAX_PROBES {
            now += PROBE_TIMER;
            p.on_timer(now);
            if p.probe_due() && p.probe_count > 0 {
                send(p, now);
            }
        }
        now
    }

    /// Where Association.Max.Retrans is below three, the association would end at the
    /// expiry that makes it a black hole: it is taken at Max.Retrans's last one instead.
    #[test]
    fn a_short_max_retrans_takes_the_black_hole_at_its_last_expiry_rfc8899_4_3() {
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        assert!(!p.on_t3(MAX, 2));
        assert!(p.on_t3(MAX, 2), "the second of two");
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        assert!(p.on_t3(MAX, 1), "the only one");
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        assert!(!p.on_t3(MAX, 5) && !p.on_t3(MAX, 5), "three above three");
        assert!(p.on_t3(MAX, 5));
    }

    #[test]
    fn three_t3_expiries_in_a_row_of_a_large_packet_are_a_black_hole_rfc8899_4_3() {
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        assert!(!p.on_t3(MAX, 10));
        assert!(!p.on_t3(MAX, 10));
        assert_eq!(p.changed(), None, "two expiries may be congestion");
        p.on_ack();
        assert!(
            !p.on_t3(MAX, 10),
            "an acknowledgement between: not in a row"
        );
        assert!(!p.on_t3(MAX, 10));
        assert!(p.on_t3(MAX, 10));
        assert_eq!(p.changed(), Some(BASE_PLPMTU));
        assert_eq!(p.changed(), None, "reported once");
        assert_eq!(p.state(), State::Base);
        assert_eq!(
            send(&mut p, at(0)).0,
            BASE_PLPMTU,
            "§5.2: BASE probes BASE_PLPMTU"
        );
        assert_eq!(p.stats.black_holes, 1);
    }

    /// RFC 8899 §5.1.2: a BASE_PLPMTU set below the default (ESP over IPv6) is where a black
    /// hole goes, what BASE and ERROR probe, and the size below which a lost packet says
    /// nothing of the path; never above the default.
    #[test]
    fn a_base_set_lower_is_the_black_holes_size_rfc8899_5_1_2() {
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        p.set_base(1143);
        assert_eq!(p.base(), 1140, "whole words");
        for _ in 0..10 {
            assert!(!p.on_t3(1140, 10), "a packet of BASE_PLPMTU's size");
        }
        assert!(!p.on_t3(1180, 10));
        assert!(!p.on_t3(1180, 10));
        assert!(p.on_t3(1180, 10), "above it: a black hole");
        assert_eq!(p.changed(), Some(1140));
        assert_eq!(send(&mut p, at(0)).0, 1140, "§5.2: BASE probes it");
        let mut q = Plpmtud::new(MAX, PROBE_TIMER);
        q.set_base(1400);
        assert_eq!(q.base(), BASE_PLPMTU);
    }

    #[test]
    fn small_packets_lost_say_nothing_of_the_path_mtu() {
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        for _ in 0..10 {
            assert!(!p.on_t3(BASE_PLPMTU, 10));
        }
        assert_eq!(p.changed(), None);
        assert_eq!(p.state(), State::SearchComplete);
    }

    #[test]
    fn a_false_alarm_costs_two_probes_rfc8899_5_3() {
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        black_hole(&mut p);
        p.changed();
        let (size, n) = send(&mut p, at(0));
        assert!(p.on_probe_ack(at(0), n, size));
        assert_eq!(p.state(), State::Searching);
        let (size, n) = send(&mut p, at(0));
        assert_eq!(size, MAX, "the largest size first");
        assert!(p.on_probe_ack(at(0), n, size));
        assert_eq!(p.changed(), Some(MAX));
        assert_eq!(p.state(), State::SearchComplete);
        assert_eq!(
            p.timer(),
            None,
            "at the largest size nothing is left to raise"
        );
    }

    /// The search over a 1280-byte hop (SCTP packets of 1260 over IPv4) after a black hole:
    /// the PLPMTU ends within SEARCH_STEP below it and never above.
    #[test]
    fn the_search_finds_the_hop_within_its_step_rfc8899_5_3_1() {
        let hop = 1260;
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        black_hole(&mut p);
        let mut now = at(0);
        let mut probes = 0;
        while p.probe_due() {
            let (size, n) = send(&mut p, now);
            probes += 1;
            assert!(probes < 40, "the search ends");
            if size <= hop {
                assert!(p.on_probe_ack(now, n, size));
            } else {
                now = lose(&mut p, now);
            }
        }
        assert_eq!(p.state(), State::SearchComplete);
        assert!(
            p.plpmtu() <= hop && hop - p.plpmtu() <= SEARCH_STEP,
            "{}",
            p.plpmtu()
        );
        assert_eq!(
            p.timer(),
            Some(now + PMTU_RAISE_TIMER),
            "§5.1.1: searched again later"
        );
        // PMTU_RAISE_TIMER: the hop grew back; the largest size is probed and confirmed.
        now += PMTU_RAISE_TIMER;
        p.on_timer(now);
        let (size, n) = send(&mut p, now);
        assert_eq!(size, MAX);
        assert!(p.on_probe_ack(now, n, size));
        assert_eq!(p.plpmtu(), MAX);
    }

    #[test]
    fn a_lost_probe_is_sent_again_max_probes_times_rfc8899_5_1_2() {
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        black_hole(&mut p);
        let (_, n) = send(&mut p, at(0));
        p.on_timer(at(1));
        assert!(!p.probe_due(), "not before PROBE_TIMER");
        p.on_timer(at(0) + PROBE_TIMER);
        let (size, again) = send(&mut p, at(16));
        assert_eq!((size, again), (BASE_PLPMTU, n), "the same probe again");
        let now = lose(&mut p, at(16));
        // BASE_PLPMTU unconfirmed: ERROR keeps it and probes it again.
        assert_eq!(p.state(), State::Error);
        assert_eq!(p.plpmtu(), BASE_PLPMTU);
        let (size, n) = send(&mut p, now);
        assert_eq!(size, BASE_PLPMTU);
        assert!(p.on_probe_ack(now, n, size));
        assert_eq!(
            p.state(),
            State::Searching,
            "§5.2: ERROR left once BASE is confirmed"
        );
    }

    #[test]
    fn a_ptb_for_a_probe_moves_the_search_to_its_size_rfc8899_6_2_1_4() {
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        black_hole(&mut p);
        let (size, n) = send(&mut p, at(0));
        p.on_probe_ack(at(0), n, size);
        let (size, _) = send(&mut p, at(0));
        assert_eq!(size, MAX);
        p.on_ptb(at(0), 1302);
        let (size, n) = send(&mut p, at(0));
        assert_eq!(size, 1300, "the PTB's size, rounded down to a packet's");
        assert!(p.on_probe_ack(at(0), n, size));
        assert_eq!(p.plpmtu(), 1300);
        let (size, _) = send(&mut p, at(0));
        assert_eq!(
            size, 1388,
            "halfway to the size that failed (the probe the PTB named)"
        );
    }

    #[test]
    fn a_forged_or_stale_probe_ack_confirms_nothing() {
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        black_hole(&mut p);
        let (size, n) = send(&mut p, at(0));
        assert!(!p.on_probe_ack(at(0), n ^ 1, size), "another nonce");
        assert!(!p.on_probe_ack(at(0), n, MAX), "another size");
        assert_eq!(p.state(), State::Base);
    }

    #[test]
    fn a_path_mtu_set_from_outside_stops_the_search_rfc8899_4_6_2() {
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        black_hole(&mut p);
        p.changed();
        send(&mut p, at(0));
        p.set(1240);
        assert_eq!(p.state(), State::SearchComplete);
        assert_eq!(p.plpmtu(), 1240);
        assert!(!p.probe_due());
        assert_eq!(p.timer(), None, "ICMP's estimate ages on its own clock");
        assert_eq!(p.changed(), None);
    }

    /// An SCTP packet is whole 32-bit words (RFC 9260 §3.2, the PAD chunk's too, RFC 4820):
    /// `poll_probe` sends `size & !3` and says so in the probe's information. A link whose
    /// MTU is not a multiple of 4 (9001, 8981 bytes of SCTP over IPv4) made the search probe
    /// the link's size itself, whose acknowledgement (the size rounded down) never matched:
    /// every search after a black hole lost MAX_PROBES probes and ended below it.
    #[test]
    fn every_probe_is_a_whole_number_of_words_rfc4820() {
        let max = 1482;
        let mut p = Plpmtud::new(max, PROBE_TIMER);
        for _ in 0..BLACK_HOLE_T3 {
            p.on_t3(max, 10);
        }
        let (size, n) = send(&mut p, at(0));
        assert!(p.on_probe_ack(at(0), n, size));
        let (size, n) = send(&mut p, at(0));
        assert_eq!(size % 4, 0, "{size}");
        assert_eq!(size, max & !3, "the largest size first");
        assert!(p.on_probe_ack(at(0), n, size));
        assert_eq!(p.plpmtu(), max & !3);
        assert_eq!(p.state(), State::SearchComplete);
        assert_eq!(p.timer(), None, "nothing larger is an SCTP packet");
    }

    /// A probe's acknowledgement raised the PLPMTU and an ICMP set it lower before the
    /// caller took the change (both in one receive burst): the size set from outside is not
    /// discovery's. Reported as discovery's, the runtime took ICMP's lowered path MTU out of
    /// PMTU_AGE's aging (discovery's own PMTU_RAISE_TIMER to take over), while `set` had
    /// stopped that timer: the path MTU stayed lowered for good.
    #[test]
    fn a_path_mtu_set_from_outside_supersedes_a_raise_not_yet_taken_rfc8899_4_6_2() {
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        black_hole(&mut p);
        assert_eq!(p.changed(), Some(BASE_PLPMTU));
        let (size, n) = send(&mut p, at(0));
        assert!(p.on_probe_ack(at(0), n, size));
        let (size, n) = send(&mut p, at(0));
        assert!(p.on_probe_ack(at(0), n, size), "raised to {size}");
        p.set(1240);
        assert_eq!(p.timer(), None, "ICMP's estimate ages on its own clock");
        assert_eq!(p.changed(), None, "and is not discovery's to age");
    }

    /// RFC 8899 §4.6.2 ("a PL MUST NOT increase the PLPMTU based on a PTB") with §5.1.1:
    /// the ICMP path ages its lowered estimate after ten minutes (RFC 1191 §6.3), and with
    /// discovery on that starts a search, the largest size first, instead of raising on
    /// trust: the PLPMTU moves only once the probe's acknowledgement confirms the size.
    #[test]
    fn an_aged_icmp_estimate_is_searched_up_not_raised_rfc8899_4_6_2() {
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        p.set(1240);
        p.search(at(0));
        assert_eq!(p.state(), State::Searching);
        assert_eq!(p.plpmtu(), 1240, "nothing raised before a probe passes");
        assert_eq!(p.changed(), None);
        let (size, n) = send(&mut p, at(0));
        assert_eq!(size, MAX, "the largest size first");
        assert!(p.on_probe_ack(at(0), n, size));
        assert_eq!(p.changed(), Some(MAX));
        // A search already under way (or BASE confirming itself) is left as it is.
        black_hole(&mut p);
        p.search(at(0));
        assert_eq!(p.state(), State::Base);
        assert_eq!(send(&mut p, at(0)).0, BASE_PLPMTU);
    }

    /// RFC 4301 §8.2.1 with RFC 8899 §5.1.2: an ESP SA whose path MTU leaves 1340 bytes of
    /// SCTP: the search's largest probe would be sealed above it and cross as fragments (the
    /// port fragments it, or clears a tunnel's DF), confirming a size that passes only in
    /// pieces. The probe is made at the ceiling instead, and the search never goes above it.
    #[test]
    fn no_probe_is_made_above_the_sas_path_mtu_rfc4301_8_2_1() {
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        p.set(1240);
        p.search(at(0));
        p.limit(at(0), 1342);
        let (size, n) = send(&mut p, at(0));
        assert_eq!(size, 1340, "the ceiling, whole words");
        assert!(p.on_probe_ack(at(0), n, size));
        assert_eq!(p.plpmtu(), 1340);
        assert_eq!(
            p.state(),
            State::SearchComplete,
            "nothing above the ceiling"
        );
        assert_eq!(
            p.timer(),
            Some(at(0) + PMTU_RAISE_TIMER),
            "searched again later"
        );
        // At or below the PLPMTU the search is complete at once: nothing to probe.
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        p.set(1240);
        p.search(at(0));
        p.limit(at(0), 1240);
        assert!(!p.probe_due());
        assert_eq!(p.state(), State::SearchComplete);
        // A probe at or below the ceiling is left as it is.
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        p.set(1240);
        p.search(at(0));
        p.limit(at(0), MAX + 100);
        assert_eq!(send(&mut p, at(0)).0, MAX);
    }

    /// (Review) RFC 4301 §8.2.1 ceiling's corners: a repeat due above the ceiling is made
    /// afresh at it (the old probe's ACK confirms nothing), the next search is limited again,
    /// and a ceiling below BASE_PLPMTU while searching completes the search, timer armed.
    #[test]
    fn the_probe_ceilings_corners_rfc4301_8_2_1() {
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        p.set(1240);
        p.search(at(0));
        let (size, old) = send(&mut p, at(0));
        assert_eq!(size, MAX);
        p.on_timer(at(0) + PROBE_TIMER);
        assert!(p.probe_due(), "the repeat");
        p.limit(at(16), 1300);
        let (size, n) = p.take_probe(at(16), 99).unwrap();
        assert_eq!((size, n), (1300, 99), "a fresh probe at the ceiling");
        assert!(!p.on_probe_ack(at(17), old, MAX), "the old probe's ACK");
        assert!(p.on_probe_ack(at(17), n, 1300));
        assert_eq!((p.plpmtu(), p.state()), (1300, State::SearchComplete));
        assert_eq!(p.timer(), Some(at(17) + PMTU_RAISE_TIMER));
        // The next search: the largest size first, limited again.
        p.on_timer(at(17) + PMTU_RAISE_TIMER);
        assert!(p.probe_due());
        p.limit(at(617), 1300);
        assert!(!p.probe_due());
        assert_eq!(p.state(), State::SearchComplete);
        assert_eq!(p.timer(), Some(at(617) + PMTU_RAISE_TIMER));
        // A ceiling below BASE_PLPMTU while searching above BASE: complete, timer armed.
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        black_hole(&mut p);
        let (size, n) = send(&mut p, at(0));
        assert!(p.on_probe_ack(at(0), n, size));
        p.limit(at(0), 1000);
        assert_eq!(p.state(), State::SearchComplete);
        assert_eq!(p.plpmtu(), BASE_PLPMTU);
        assert_eq!(p.timer(), Some(at(0) + PMTU_RAISE_TIMER));
    }

    /// RFC 8899 §5.4: endpoint IP fragmentation while BASE_PLPMTU is unconfirmed (BASE after a
    /// black hole, ERROR), not once a probe confirmed it; the confirmation is reported as a
    /// change of its own, so that the caller puts DF back, and counted as no raise.
    #[test]
    fn fragments_are_allowed_while_base_is_unconfirmed_rfc8899_5_4() {
        let mut p = Plpmtud::new(MAX, PROBE_TIMER);
        assert!(!p.fragments_allowed(), "SEARCH_COMPLETE at the link's size");
        black_hole(&mut p);
        assert_eq!(p.changed(), Some(BASE_PLPMTU));
        assert_eq!(p.last_change(), Change::BlackHole);
        assert!(p.fragments_allowed(), "BASE");
        send(&mut p, at(0));
        let now = lose(&mut p, at(0));
        assert_eq!(p.state(), State::Error);
        assert!(p.fragments_allowed(), "ERROR");
        let (size, n) = send(&mut p, now);
        assert!(p.on_probe_ack(now, n, size));
        assert!(!p.fragments_allowed(), "BASE_PLPMTU confirmed");
        assert_eq!(p.changed(), Some(BASE_PLPMTU));
        assert_eq!(p.last_change(), Change::BaseConfirmed);
        let (size, n) = send(&mut p, now);
        assert!(p.on_probe_ack(now, n, size));
        assert_eq!(p.changed(), Some(MAX));
        assert_eq!(p.last_change(), Change::Raised);
    }

    #[test]
    fn probe_timer_is_never_below_a_second_rfc8899_5_1_1() {
        let mut p = Plpmtud::new(MAX, Duration::from_millis(10));
        black_hole(&mut p);
        send(&mut p, at(0));
        assert_eq!(p.timer(), Some(at(1)));
    }
}
