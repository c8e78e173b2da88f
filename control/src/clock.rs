//! The poll loops' clock: the system's monotonic clock, or a free-running counter calibrated
//! against it (the CPU's time-stamp counter: a poll loop reads the time every turn, and RDTSC
//! costs less than half the vDSO's read).
//!
//! A counter is a clock only while it ticks at one rate on every CPU. The kernel checked that
//! before it chose the TSC as its own clock source, but it keeps checking (its clocksource
//! watchdog) and may give the TSC up later, on a VM whose host migrates or overcommits it, say.
//! A poll loop that went on reading a counter gone wrong would see time stand still (a counter
//! behind its base reads as the origin) or race ahead: no retransmission timer would fire, or
//! every one at once. So a counting clock is watched ([`Clock::check`], once a second from the
//! thread [`Clock::watch`] starts): when the kernel leaves the TSC, or the counter and the
//! monotonic clock part by more than [`DRIFT_LIMIT`], every copy of the clock follows the
//! monotonic clock from then on, without stepping back.

use ddpdk_dataplane::sctp::Instant;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How far the counter and the monotonic clock may part, per second of monotonic time between
/// two checks, before the counter is dropped: 1000 ppm. A calibrated TSC keeps within ~10 ppm
/// of the monotonic clock, which NTP slews by at most 500 ppm; a counter a CPU migration or a
/// host's TSC scaling broke is off by far more.
pub const DRIFT_LIMIT: Duration = Duration::from_millis(1);

/// Two counter reads further apart than this around one monotonic read do not date it (the
/// thread was preempted between them): the check tries again.
const READ_SPREAD: u64 = 50_000;

/// A monotonic clock for the runtime's threads: every caller of one `Clock` (or of its
/// copies) reads the same time line. By default the system's monotonic clock; with
/// [`Clock::counting`], a free-running counter of constant rate.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin: std::time::Instant,
    counter: Option<Counter>,
}

/// A counter and its scale to nanoseconds.
#[derive(Debug, Clone, Copy)]
struct Counter {
    read: fn() -> u64,
    /// The count at the clock's origin.
    base: u64,
    /// Nanoseconds a tick, times 2^32.
    ns_per_tick_q32: u64,
    /// Shared by every copy: 0 while the counter is the clock; once it is dropped, one more
    /// than the nanoseconds added to the monotonic clock's time (where the counter had got to
    /// then, so that time does not step back).
    dropped: &'static AtomicU64,
}

/// Why [`Clock::check`] dropped the counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// The kernel no longer keeps its time on the TSC.
    ClockSource,
    /// Between two checks the counter measured `counted` and the monotonic clock `monotonic`.
    Drift {
        counted: Duration,
        monotonic: Duration,
    },
}

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dropped::ClockSource => write!(f, "the kernel no longer keeps its time on the TSC"),
            Dropped::Drift { counted, monotonic } => write!(
                f,
                "the TSC counted {counted:?} while the monotonic clock counted {monotonic:?}"
            ),
        }
    }
}

/// What [`Clock::check`] remembers between checks: the last counter time and the monotonic
/// time read beside it.
#[derive(Debug, Default)]
pub struct ClockWatch {
    last: Option<(u64, std::time::Instant)>,
}

impl Clock {
    pub fn new() -> Clock {
        Clock {
            origin: std::time::Instant::now(),
            counter: None,
        }
    }

    /// A clock that reads `read`, a counter of constant rate, its rate measured against the
    /// monotonic clock over `over` (10 ms puts the error near 10 ppm). `None` when the counter
    /// did not move.
    pub fn counting(read: fn() -> u64, over: Duration) -> Option<Clock> {
        let (c0, t0, _) = dated(read);
        std::thread::sleep(over);
        let (c1, t1, _) = dated(read);
        let ticks = c1.checked_sub(c0).filter(|&t| t > 0)?;
        let ns = t1.duration_since(t0).as_nanos();
        let ns_per_tick_q32 = u64::try_from((ns << 32) / u128::from(ticks)).ok()?;
        Some(Clock {
            origin: t1,
            counter: Some(Counter {
                read,
                base: c1,
                ns_per_tick_q32,
                // One word per calibrated clock, which lives as long as the process: a
                // process calibrates one (tests a few).
                dropped: Box::leak(Box::new(AtomicU64::new(0))),
            }),
        })
    }

    /// Whether this clock reads a counter ([`Clock::counting`], not dropped since).
    pub fn is_counting(&self) -> bool {
        self.counter
            .is_some_and(|c| c.dropped.load(Ordering::Relaxed) == 0)
    }

    /// What this clock reads now, for operators: `tsc` (a counter, [`Clock::counting`]),
    /// `monotonic` (the system's), or `monotonic, TSC dropped` ([`Clock::check`] gave the
    /// counter up; stderr said why when it did).
    pub fn source(&self) -> &'static str {
        match self.counter {
            Some(c) if c.dropped.load(Ordering::Relaxed) == 0 => "tsc",
            Some(_) => "monotonic, TSC dropped",
            None => "monotonic",
        }
    }

    /// Nanoseconds since the clock was made, plus one second (so no timer sits at zero).
    pub fn now(&self) -> Instant {
        let ns = match self.counter {
            Some(c) => match c.dropped.load(Ordering::Relaxed) {
                0 => c.counted_ns(),
                after => self.monotonic_ns().saturating_add(after - 1),
            },
            None => self.monotonic_ns(),
        };
        Instant::from_nanos(1_000_000_000 + ns)
    }

    fn monotonic_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// Compares the counter with the monotonic clock since the last check and drops the
    /// counter, for every copy of this clock, when `trusted` (the kernel still keeps its time
    /// on it) is false or the two parted by more than [`DRIFT_LIMIT`] a second. Returns why,
    /// the one time it drops it. A clock that does not count has nothing to check.
    pub fn check(&self, watch: &mut ClockWatch, trusted: bool) -> Option<Dropped> {
        let c = self.counter?;
        if c.dropped.load(Ordering::Relaxed) != 0 {
            return None;
        }
        let (count, at, spread) = dated(c.read);
        if spread > READ_SPREAD {
            // Preempted at every try: no dating this time, nothing concluded.
            return None;
        }
        let count = c.ns_at(count);
        let last = watch.last.replace((count, at));
        let why = if !trusted {
            Dropped::ClockSource
        } else {
            let (last_count, last_at) = last?;
            let counted = Duration::from_nanos(count.saturating_sub(last_count));
            let monotonic = at.duration_since(last_at);
            let apart = counted.abs_diff(monotonic);
            let limit = DRIFT_LIMIT.mul_f64(monotonic.as_secs_f64().max(1.0));
            if count >= last_count && apart <= limit {
                return None;
            }
            Dropped::Drift { counted, monotonic }
        };
        self.drop_counter(c, count, at);
        Some(why)
    }

    /// Checks this clock once a second on a thread of its own ([`Clock::check`], the kernel
    /// asked through `trusted`), telling `dropped` why when it drops the counter; the thread
    /// ends then. Nothing for a clock that does not count.
    pub fn watch(self, trusted: fn() -> bool, dropped: impl FnOnce(Dropped) + Send + 'static) {
        if !self.is_counting() {
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("ddpdk-clock".into())
            .spawn(move || {
                let mut watch = ClockWatch::default();
                loop {
                    if let Some(why) = self.check(&mut watch, trusted()) {
                        dropped(why);
                        return;
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
            });
        // Without a thread the counter is not watched; a clock that cannot be watched is
        // not worth its 20 ns.
        if let (Err(_), Some(c)) = (spawned, self.counter) {
            self.drop_counter(c, c.counted_ns(), std::time::Instant::now());
        }
    }

    /// Every copy of this clock follows the monotonic clock from `at`, moved on to where the
    /// counter had got then (`count`, when it is the later of the two): a timer armed by the
    /// counter's time still falls due, and no caller sees time step back from what it read a
    /// moment ago on this CPU.
    fn drop_counter(&self, c: Counter, count: u64, at: std::time::Instant) {
        let mono = u64::try_from(at.duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX);
        c.dropped.store(
            count.saturating_sub(mono).saturating_add(1),
            Ordering::Relaxed,
        );
    }
}

impl Counter {
    /// Nanoseconds since the origin by the counter now.
    #[inline]
    fn counted_ns(&self) -> u64 {
        self.ns_at((self.read)())
    }

    /// Nanoseconds since the origin at `count`. A count a little behind the base (another
    /// CPU's counter, a few cycles apart) is the origin itself.
    #[inline]
    fn ns_at(&self, count: u64) -> u64 {
        let ticks = count.saturating_sub(self.base);
        ((u128::from(ticks) * u128::from(self.ns_per_tick_q32)) >> 32) as u64
    }
}

/// The count at the moment the monotonic clock was read (the middle of two counts around
/// it), and how far apart those two counts were: of up to four tries, the first within
/// [`READ_SPREAD`], else the narrowest. A thread preempted between the counts dates the read
/// badly: in a 10 ms calibration, a millisecond's preemption would be a 5 % error in the rate.
fn dated(read: fn() -> u64) -> (u64, std::time::Instant, u64) {
    let once = || {
        let before = read();
        let at = std::time::Instant::now();
        let after = read();
        // A count that went back is as bad as one far ahead.
        (before / 2 + after / 2, at, after.wrapping_sub(before))
    };
    let mut best = once();
    for _ in 1..4 {
        if best.2 <= READ_SPREAD {
            break;
        }
        let this = once();
        if this.2 < best.2 {
            best = this;
        }
    }
    best
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::OnceLock;

    /// Nanoseconds since the first call, on one time line for the fake counters below.
    fn since_start() -> u64 {
        static START: OnceLock<std::time::Instant> = OnceLock::new();
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }

    /// A counter of 3 ticks a nanosecond since the first read (a fake TSC at 3 GHz).
    fn three_ghz() -> u64 {
        since_start() * 3
    }

    fn never_moves() -> u64 {
        42
    }

    /// A counting clock keeps the monotonic clock's time: its rate is measured, not assumed,
    /// and read beside a monotonic clock the two agree within the calibration's error.
    #[test]
    fn a_counting_clock_keeps_the_monotonic_clocks_time() {
        let counting = Clock::counting(three_ghz, Duration::from_millis(10))
            .unwrap_or_else(|| panic!("the counter moves"));
        assert!(counting.is_counting() && !Clock::new().is_counting());
        let (c0, c1) = keeps_the_monotonic_rate(&counting, Duration::from_millis(50));
        // It starts where every clock starts (one second), and never goes back.
        assert!(c0 >= Instant::from_nanos(1_000_000_000) && c1 > c0);
    }

    /// `clock` read beside the monotonic clock over `over` agrees with it within 2 % (the
    /// reads around each end are a few µs apart at most on a loaded machine). Returns the
    /// clock's two readings.
    fn keeps_the_monotonic_rate(clock: &Clock, over: Duration) -> (Instant, Instant) {
        let (c0, w0) = (clock.now(), std::time::Instant::now());
        std::thread::sleep(over);
        let (c1, w1) = (clock.now(), std::time::Instant::now());
        let counted = c1.saturating_since(c0).as_nanos() as f64;
        let wall = w1.duration_since(w0).as_nanos() as f64;
        assert!(
            (counted / wall - 1.0).abs() < 0.02,
            "counted {counted} ns, the monotonic clock {wall} ns"
        );
        (c0, c1)
    }

    #[test]
    fn a_counter_that_does_not_move_is_no_clock() {
        assert!(Clock::counting(never_moves, Duration::from_millis(1)).is_none());
    }

    /// A counter keeping time passes check after check and stays the clock.
    #[test]
    fn a_steady_counter_is_kept() {
        let clock = Clock::counting(three_ghz, Duration::from_millis(10))
            .unwrap_or_else(|| panic!("the counter moves"));
        let mut watch = ClockWatch::default();
        for _ in 0..4 {
            assert_eq!(clock.check(&mut watch, true), None);
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(clock.is_counting());
    }

    /// Ticks added to [`jumpy`]'s count: a counter that leaps ahead 50 ms when told to.
    static LEAP: AtomicU64 = AtomicU64::new(0);

    fn jumpy() -> u64 {
        three_ghz() + LEAP.load(Ordering::Relaxed)
    }

    /// A counter that leaps ahead of the monotonic clock (here 50 ms in 20) is dropped at the
    /// next check, for every copy of the clock made before; time goes on from where the
    /// counter had got, at the monotonic clock's rate, and does not step back.
    #[test]
    fn a_counter_that_leaps_ahead_is_dropped_for_every_copy() {
        let clock = Clock::counting(jumpy, Duration::from_millis(10))
            .unwrap_or_else(|| panic!("the counter moves"));
        let copy = clock;
        let mut watch = ClockWatch::default();
        assert_eq!(clock.check(&mut watch, true), None, "the first check dates");
        std::thread::sleep(Duration::from_millis(20));
        LEAP.store(50_000_000 * 3, Ordering::Relaxed);
        let before = copy.now();
        let why = clock.check(&mut watch, true);
        assert!(
            matches!(why, Some(Dropped::Drift { counted, monotonic }) if counted > monotonic),
            "{why:?}"
        );
        assert!(!copy.is_counting() && !clock.is_counting());
        let after = copy.now();
        assert!(after >= before, "{after:?} stepped back from {before:?}");
        // From here the monotonic clock's rate, whatever the counter does.
        LEAP.store(500_000_000 * 3, Ordering::Relaxed);
        keeps_the_monotonic_rate(&copy, Duration::from_millis(30));
        assert_eq!(clock.check(&mut watch, true), None, "dropped once");
    }

    /// Count of [`stuck`]: a counter that stops when told to (as one read behind its base).
    static STUCK_AT: AtomicU64 = AtomicU64::new(0);

    fn stuck() -> u64 {
        match STUCK_AT.load(Ordering::Relaxed) {
            0 => three_ghz(),
            at => at,
        }
    }

    /// A counter that stops would stop the clock (no timer would ever fire): dropped, and the
    /// clock moves on.
    #[test]
    fn a_counter_that_stops_is_dropped() {
        let clock = Clock::counting(stuck, Duration::from_millis(10))
            .unwrap_or_else(|| panic!("the counter moves"));
        let mut watch = ClockWatch::default();
        assert_eq!(clock.check(&mut watch, true), None);
        STUCK_AT.store(three_ghz(), Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(20));
        let why = clock.check(&mut watch, true);
        assert!(
            matches!(why, Some(Dropped::Drift { counted, .. }) if counted < Duration::from_millis(1)),
            "{why:?}"
        );
        let t0 = clock.now();
        std::thread::sleep(Duration::from_millis(5));
        assert!(clock.now() > t0, "the clock moves again");
    }

    /// The kernel leaving the TSC (its watchdog found it unstable) drops the counter at once,
    /// before any drift shows.
    #[test]
    fn a_kernel_leaving_the_tsc_drops_the_counter() {
        let clock = Clock::counting(three_ghz, Duration::from_millis(10))
            .unwrap_or_else(|| panic!("the counter moves"));
        let mut watch = ClockWatch::default();
        let copy = clock;
        assert_eq!(clock.source(), "tsc");
        assert_eq!(
            clock.check(&mut watch, false),
            Some(Dropped::ClockSource),
            "even at the first check"
        );
        assert!(!clock.is_counting());
        assert_eq!(copy.source(), "monotonic, TSC dropped", "told to operators");
        assert_eq!(Clock::new().source(), "monotonic");
        assert_eq!(
            Clock::new().check(&mut watch, false),
            None,
            "nothing to drop"
        );
    }

    /// The watching thread drops the counter the kernel gave up, and says why.
    #[test]
    fn the_watch_thread_drops_what_the_kernel_gave_up() {
        let clock = Clock::counting(three_ghz, Duration::from_millis(10))
            .unwrap_or_else(|| panic!("the counter moves"));
        let (tx, rx) = std::sync::mpsc::channel();
        clock.watch(|| false, move |why| tx.send(why).unwrap_or(()));
        let why = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("the watch never reported: {e}"));
        assert_eq!(why, Dropped::ClockSource);
        assert!(!clock.is_counting());
    }
}
