//! Association parameters: the protocol constants of RFC 9260 §16 and the sizes that bound an
//! association's memory.

use core::time::Duration;

use crate::wire::sctp::ADAPTATION_INDICATION_DDP;

/// Everything an association or endpoint is configured with. `Default` gives RFC 9260 §16's
/// suggested values and DDP's adaptation indication.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Our SCTP port.
    pub local_port: u16,
    /// Streams in each direction: OS = MIS in our INIT and INIT ACK (RFC 5043 §8); the
    /// association uses the smallest of ours and the peer's two.
    pub streams: u16,
    /// The receive buffer we advertise (a_rwnd) at most. Messages are handed to the layer
    /// above as they arrive; what it has not yet released ([`Deliver::room`]) and the TSN map
    /// make the a_rwnd of each SACK smaller.
    ///
    /// [`Deliver::room`]: super::Deliver::room
    pub a_rwnd: u32,
    /// The largest SCTP packet (common header and chunks) for the path: the path MTU minus the
    /// IP header. Messages larger than what one DATA chunk can carry in it are refused at the
    /// source (RFC 5043 §9: no SCTP fragmentation).
    pub path_mtu: usize,
    pub rto_initial: Duration,
    pub rto_min: Duration,
    pub rto_max: Duration,
    /// Max.Burst (§6.1 D): new-data packets sent in one go after a SACK or a timer.
    pub max_burst: u32,
    /// §7.2.3: after T3-rtx, at most one packet in flight until DATA is acknowledged (on by
    /// default). Off, a second packet goes while the flight of chunks is below the 1-MTU
    /// cwnd (the flight counts chunks, not the packets around them), as stacks that test
    /// only `flight < cwnd` do; tests use it to stand in for such a peer.
    pub one_packet_after_t3: bool,
    pub assoc_max_retrans: u32,
    /// Path.Max.Retrans (§8.2): consecutive failures after which the path is reported
    /// inactive ([`Event::PathChange`]). With our one path the association still sends on it,
    /// and ends only at `assoc_max_retrans` (§8.1).
    ///
    /// [`Event::PathChange`]: super::Event::PathChange
    pub path_max_retrans: u32,
    pub max_init_retransmits: u32,
    pub valid_cookie_life: Duration,
    /// T5-shutdown-guard (§9.2): how long the SHUTDOWN sender waits before it ABORTs;
    /// RFC 9260 recommends 5 × RTO.Max.
    pub shutdown_guard: Duration,
    /// HB.interval (§8.3); `None` turns heartbeats off.
    pub hb_interval: Option<Duration>,
    /// Jitter of ±50 % of the RTO on when an idle path's HEARTBEAT leaves (§8.3, RECOMMENDED),
    /// so that many associations started together do not probe in step. Off only where a
    /// test needs the exact schedule.
    pub hb_jitter: bool,
    /// Delayed SACK (§6.2): at most this long after unacknowledged DATA arrives ...
    pub sack_delay: Duration,
    /// ... and at least one SACK every this many packets with DATA.
    pub sack_freq: u32,
    /// Set the I bit (RFC 7053 §4.1, SACK-IMMEDIATELY) on the last DATA chunk before the send
    /// queue runs dry, so that the peer acknowledges it at once rather than after its delayed-
    /// ack timer: a lone message completes in one round trip.
    pub immediate_sack_when_idle: bool,
    /// Messages queued or in flight at once. With `path_mtu` this fixes the send buffer:
    /// `send_slots * max_message()` bytes, allocated when the association is made.
    pub send_slots: usize,
    /// TSNs above the cumulative point the receiver can record (one bit each).
    pub tsn_window: usize,
    /// The Adaptation Layer Indication we send and require (RFC 5043 §5.1, §11.1).
    pub adaptation_indication: u32,
    /// Take the common packet of a bulk transfer (one whole DATA chunk, the next TSN, nothing
    /// missing) and its sender's (one SACK without Gap Ack Blocks or Duplicate TSNs, nothing
    /// gap-acked) without the general chunk walk ([`Association::handle`]'s header
    /// prediction), and build a bulk sender's common packet (new DATA, nothing else owed) and
    /// a receiver's (a SACK without Gap Ack Blocks or Duplicate TSNs, nothing else owed)
    /// without the general builder ([`Association::poll_transmit`]). The effect is the same
    /// either way; off, every packet takes the general path (the benches compare the two, the
    /// tests check they agree).
    ///
    /// [`Association::handle`]: super::Association::handle
    /// [`Association::poll_transmit`]: super::Association::poll_transmit
    pub header_prediction: bool,
    /// RFC 8899 path MTU discovery (black holes found from T3-rtx, sizes confirmed by
    /// HEARTBEAT + PAD probes) with this PROBE_TIMER (at least 1 s, §5.1.1); `None` turns
    /// it off, leaving ICMP-based discovery alone.
    pub plpmtud_probe_timer: Option<Duration>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            local_port: 5002,
            streams: 8,
            a_rwnd: 131_072,
            path_mtu: 1500 - 20,
            rto_initial: Duration::from_secs(1),
            rto_min: Duration::from_secs(1),
            rto_max: Duration::from_secs(60),
            max_burst: 4,
            one_packet_after_t3: true,
            assoc_max_retrans: 10,
            path_max_retrans: 5,
            max_init_retransmits: 8,
            valid_cookie_life: Duration::from_secs(60),
            shutdown_guard: Duration::from_secs(300),
            hb_interval: Some(Duration::from_secs(30)),
            hb_jitter: true,
            sack_delay: Duration::from_millis(200),
            sack_freq: 2,
            immediate_sack_when_idle: true,
            send_slots: 256,
            tsn_window: 8192,
            adaptation_indication: ADAPTATION_INDICATION_DDP,
            header_prediction: true,
            plpmtud_probe_timer: Some(super::plpmtud::PROBE_TIMER),
        }
    }
}

/// Smallest path MTU we run on: RFC 5043 §9 requires DDP segments of 516 bytes without
/// fragmentation. With its 2-byte DDP-SSN that is 518 bytes of DATA user data, 520 padded
/// (`max_message` rounds down to 4), plus the common header and a DATA chunk header: 548.
pub const MIN_PATH_MTU: usize = (crate::wire::ddp::DDP_SSN_LEN + crate::wire::ddp::MIN_MULPDU)
    .next_multiple_of(4)
    + crate::wire::sctp::HEADER_LEN
    + crate::wire::sctp::DATA_HEADER_LEN;

impl Config {
    /// The largest message one unfragmented DATA chunk carries on `path_mtu`.
    pub fn max_message(&self) -> usize {
        max_message(self.path_mtu)
    }

    /// Checks the values that would make an association misbehave.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.local_port == 0 {
            return Err("local_port must not be 0 (RFC 9260 §3.1)");
        }
        if self.streams == 0 {
            return Err("streams must be at least 1");
        }
        if self.a_rwnd < crate::wire::sctp::MIN_A_RWND {
            return Err("a_rwnd must be at least 1500 (RFC 9260 §3.3.2)");
        }
        if (self.a_rwnd as usize) < self.max_message() {
            // Without partial delivery a message larger than the window is refused on every
            // retransmission while the probes are acknowledged: the association would hang.
            return Err("a_rwnd must hold the largest message one DATA chunk carries on path_mtu");
        }
        if self.path_mtu < MIN_PATH_MTU || self.path_mtu > 65_535 {
            return Err("path_mtu must be between 548 and 65535 bytes (RFC 5043 §9)");
        }
        if self.rto_min > self.rto_max || self.rto_min.is_zero() {
            return Err("need 0 < rto_min <= rto_max");
        }
        if self.send_slots == 0 || self.send_slots > 32_767 {
            // RFC 5043 §10: DDP-SSN ordering needs fewer than 32768 chunks in flight per stream.
            return Err("send_slots must be between 1 and 32767 (RFC 5043 §10)");
        }
        if self.max_burst == 0 || self.sack_freq == 0 {
            return Err("max_burst and sack_freq must be at least 1");
        }
        if self.sack_delay.is_zero() || self.sack_delay > Duration::from_millis(500) {
            return Err("sack_delay must be above 0 and at most 500 ms (RFC 9260 §6.2)");
        }
        if self.valid_cookie_life.is_zero() || self.hb_interval.is_some_and(|d| d.is_zero()) {
            return Err("valid_cookie_life and hb_interval must be above 0");
        }
        // A cookie carries its lifespan in 32 bits of milliseconds, a Cookie Preservative's
        // minute included (RFC 9260 §5.1.3, §5.2.6): a longer life would be cut short
        // unseen (and, near Duration::MAX, overflowed when a peer's INIT asked for more).
        if self.valid_cookie_life > Duration::from_millis(u64::from(u32::MAX) - 60_000) {
            return Err("valid_cookie_life must be at most 49 days (a cookie's 32-bit lifespan)");
        }
        if self.max_init_retransmits == 0
            || self.assoc_max_retrans == 0
            || self.path_max_retrans == 0
        {
            return Err(
                "max_init_retransmits, assoc_max_retrans and path_max_retrans must be at least 1",
            );
        }
        Ok(())
    }
}

/// The largest message one unfragmented DATA chunk carries in an SCTP packet of `path_mtu`
/// bytes.
pub fn max_message(path_mtu: usize) -> usize {
    // Rounded down to 4 so the padded chunk still fits.
    (path_mtu.saturating_sub(crate::wire::sctp::HEADER_LEN + crate::wire::sctp::DATA_HEADER_LEN))
        & !3
}
