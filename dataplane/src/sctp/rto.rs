//! Retransmission timeout (RFC 9260 §6.3.1): SRTT and RTTVAR with RTO.Alpha = 1/8 and
//! RTO.Beta = 1/4, clamped to [RTO.Min, RTO.Max], doubled on each T3-rtx expiry (§6.3.3 E2).

use core::time::Duration;

/// All five in nanoseconds: the SACK that closes a round trip samples the RTT and re-arms T3
/// with the result, and `Duration`'s seconds-and-nanoseconds arithmetic (the divisions by 4 and
/// 8, the multiplications) cost about 150 instructions a SACK in callgrind where integer
/// nanoseconds cost a fifth of that. A u64 of nanoseconds spans 584 years; the arithmetic
/// saturates rather than wraps.
#[derive(Debug, Clone, Copy)]
pub struct Rto {
    /// SRTT; `None` until the first measurement (§6.3.1 C2).
    srtt: Option<u64>,
    rttvar: u64,
    rto: u64,
    min: u64,
    max: u64,
}

/// Clock granularity G of §6.3.1 C1/C3: our clocks are nanosecond counters; 1 ms keeps RTO from
/// collapsing to SRTT on a jitter-free path (as Linux and usrsctp do).
const GRANULARITY: u64 = 1_000_000;

/// `d` in nanoseconds, saturating (585 years).
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Rto {
    pub fn new(initial: Duration, min: Duration, max: Duration) -> Self {
        let (min, max) = (nanos(min), nanos(max));
        Rto {
            srtt: None,
            rttvar: 0,
            rto: nanos(initial).clamp(min, max),
            min,
            max,
        }
    }

    pub fn rto(&self) -> Duration {
        Duration::from_nanos(self.rto)
    }

    /// The RTO in nanoseconds, for a timer armed per packet sent (no `Duration` round trip).
    pub fn rto_nanos(&self) -> u64 {
        self.rto
    }

    pub fn srtt(&self) -> Option<Duration> {
        self.srtt.map(Duration::from_nanos)
    }

    /// A new RTT measurement R (§6.3.1 C2, C3). The caller follows Karn's rule (C5): never a
    /// measurement from a retransmitted chunk.
    pub fn sample(&mut self, r: Duration) {
        let r = nanos(r);
        let srtt = match self.srtt {
            None => {
                self.rttvar = r / 2;
                r
            }
            Some(srtt) => {
                // RTTVAR = (1 - 1/4) RTTVAR + 1/4 |SRTT - R'|, then SRTT = (1 - 1/8) SRTT + 1/8 R'.
                let diff = srtt.abs_diff(r);
                self.rttvar = self.rttvar.saturating_mul(3) / 4 + diff / 4;
                srtt.saturating_mul(7) / 8 + r / 8
            }
        };
        self.srtt = Some(srtt);
        self.rto = srtt
            .saturating_add(self.rttvar.saturating_mul(4).max(GRANULARITY))
            .clamp(self.min, self.max);
    }

    /// §6.3.3 E2: RTO = RTO * 2, at most RTO.Max.
    pub fn back_off(&mut self) {
        self.rto = self.rto.saturating_mul(2).min(self.max);
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
