//! Time as the caller passes it in. The protocol cores never read a clock (DESIGN.md,
//! "Protocol cores are sans-IO"): a data core converts its TSC, a test advances a counter.

use core::ops::{Add, AddAssign};
use core::time::Duration;

/// A point in time: nanoseconds since an epoch the caller chooses (only differences matter).
/// Monotonic by contract: the caller never passes a smaller value than before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);

    pub const fn from_nanos(ns: u64) -> Self {
        Instant(ns)
    }

    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// `ns` nanoseconds later, saturating (as `+ Duration`, without the conversion).
    pub const fn saturating_add_nanos(self, ns: u64) -> Instant {
        Instant(self.0.saturating_add(ns))
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    fn add(self, d: Duration) -> Instant {
        // Saturates: a timer past the year 2554 is the same as never.
        self.saturating_add_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}
