//! Retransmission timeout (RFC 9260 §6.3.1): SRTT and RTTVAR with RTO.Alpha = 1/8 and
//! RTO.Beta = 1/4, clamped to [RTO.Min, RTO.Max], doubled on each T3-rtx expiry (§6.3.3 E2).

use core::time::Duration;

#[derive(Debug, Clone, Copy)]
pub struct Rto {
    srtt: Option<Duration>,
    rttvar: Duration,
    rto: Duration,
    min: Duration,
    max: Duration,
}

/// Clock granularity G of §6.3.1 C1/C3: our clocks are nanosecond counters; 1 ms keeps RTO from
/// collapsing to SRTT on a jitter-free path (as Linux and usrsctp do).
const GRANULARITY: Duration = Duration::from_millis(1);

impl Rto {
    pub fn new(initial: Duration, min: Duration, max: Duration) -> Self {
        Rto {
            srtt: None,
            rttvar: Duration::ZERO,
            rto: initial.clamp(min, max),
            min,
            max,
        }
    }

    pub fn rto(&self) -> Duration {
        self.rto
    }

    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// A new RTT measurement R (§6.3.1 C2, C3). The caller follows Karn's rule (C5): never a
    /// measurement from a retransmitted chunk.
    pub fn sample(&mut self, r: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(srtt) => {
                let diff = srtt.abs_diff(r);
                self.rttvar = self.rttvar * 3 / 4 + diff / 4;
                self.srtt = Some(srtt * 7 / 8 + r / 8);
            }
        }
        let srtt = self.srtt.unwrap_or(r);
        self.rto = (srtt + (self.rttvar * 4).max(GRANULARITY)).clamp(self.min, self.max);
    }

    /// §6.3.3 E2: RTO = RTO * 2, at most RTO.Max.
    pub fn back_off(&mut self) {
        self.rto = (self.rto * 2).min(self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn first_and_later_samples_follow_6_3_1() {
        let mut r = Rto::new(3000 * MS, 10 * MS, 60_000 * MS);
        assert_eq!(r.rto(), 3000 * MS);
        // C2: SRTT = R, RTTVAR = R/2, RTO = SRTT + 4 RTTVAR = 3R.
        r.sample(100 * MS);
        assert_eq!(r.rto(), 300 * MS);
        // C3: RTTVAR = 3/4 * 50 + 1/4 * |100 - 60| = 47.5; SRTT = 7/8*100 + 60/8 = 95.
        r.sample(60 * MS);
        assert_eq!(r.srtt(), Some(95 * MS));
        assert_eq!(r.rto(), Duration::from_micros(95_000 + 190_000));
    }

    /// Issue 16 finding 7, decided: a new RTT measurement ends a back-off. §6.3.3 E2 doubles
    /// RTO for a lost packet; §6.3.1 C3 sets RTO = SRTT + 4 * RTTVAR "when a new RTT
    /// measurement R' is made", and §8.3 says the sender of a HEARTBEAT SHOULD measure RTT
    /// from its ACK. Karn's rule (C5) excludes only retransmitted chunks, and a HEARTBEAT is
    /// never retransmitted (each carries its own send time). Linux and usrsctp do the same:
    /// an answered HEARTBEAT shows the path works now, so the next T3 runs on the measured RTO.
    #[test]
    fn a_new_measurement_ends_the_back_off_6_3_1_c3_8_3() {
        let mut r = Rto::new(3000 * MS, 100 * MS, 60_000 * MS);
        r.sample(20 * MS);
        assert_eq!(r.rto(), 100 * MS, "RTO.Min");
        for _ in 0..3 {
            r.back_off();
        }
        assert_eq!(r.rto(), 800 * MS, "backed off (E2)");
        r.sample(20 * MS);
        assert_eq!(
            r.rto(),
            100 * MS,
            "C3 from SRTT and RTTVAR, clamped to RTO.Min (C6)"
        );
    }

    #[test]
    fn clamps_and_backs_off_to_max() {
        let mut r = Rto::new(3000 * MS, 1000 * MS, 60_000 * MS);
        r.sample(MS);
        assert_eq!(r.rto(), 1000 * MS, "RTO.Min (C6)");
        for _ in 0..10 {
            r.back_off();
        }
        assert_eq!(r.rto(), 60_000 * MS, "RTO.Max (C7, E2)");
    }
}
