//! testpmd-style statistics text, and the rate arithmetic behind "since the last show".

use std::fmt::Write as _;
use std::time::Duration;

use ddpdk_dataplane::port::PortStats;

/// Packet and bit rates between two snapshots of a port's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Rates {
    pub rx_pps: u64,
    pub rx_bps: u64,
    pub tx_pps: u64,
    pub tx_bps: u64,
}

impl Rates {
    /// Rates from `prev` to `now` over `dt`. Counters that went backwards (cleared) give 0.
    pub fn between(prev: &PortStats, now: &PortStats, dt: Duration) -> Rates {
        let secs = dt.as_secs_f64();
        if secs <= 0.0 {
            return Rates::default();
        }
        let per_sec = |a: u64, b: u64| (b.saturating_sub(a) as f64 / secs) as u64;
        Rates {
            rx_pps: per_sec(prev.rx_packets, now.rx_packets),
            rx_bps: per_sec(prev.rx_bytes, now.rx_bytes) * 8,
            tx_pps: per_sec(prev.tx_packets, now.tx_packets),
            tx_bps: per_sec(prev.tx_bytes, now.tx_bytes) * 8,
        }
    }
}

/// The block testpmd prints for `show port stats N`.
pub fn port_stats_text(port: u16, s: &PortStats, r: &Rates) -> String {
    let mut o = String::new();
    let title = format!(" NIC statistics for port {port} ");
    let _ = writeln!(o, "  {:#^76}", title);
    let _ = writeln!(
        o,
        "  RX-packets: {:<10} RX-missed: {:<10} RX-bytes:  {}",
        s.rx_packets, s.rx_missed, s.rx_bytes
    );
    let _ = writeln!(o, "  RX-errors: {}", s.rx_errors);
    let _ = writeln!(o, "  RX-nombuf:  {:<10}", s.rx_nombuf);
    let _ = writeln!(
        o,
        "  TX-packets: {:<10} TX-errors: {:<10} TX-bytes:  {}",
        s.tx_packets, s.tx_errors, s.tx_bytes
    );
    let _ = writeln!(o);
    let _ = writeln!(o, "  Throughput (since last show)");
    let _ = writeln!(
        o,
        "  Rx-pps: {:>12}          Rx-bps: {:>12}",
        r.rx_pps, r.rx_bps
    );
    let _ = writeln!(
        o,
        "  Tx-pps: {:>12}          Tx-bps: {:>12}",
        r.tx_pps, r.tx_bps
    );
    let _ = writeln!(o, "  {}", "#".repeat(76));
    o
}

/// The per-port block testpmd prints when forwarding stops.
pub fn fwd_port_text(port: u16, rx: u64, rx_dropped: u64, tx: u64, tx_dropped: u64) -> String {
    let title = format!(" Forward statistics for port {port} ");
    format!(
        "  {:-^76}\n  RX-packets: {:<14} RX-dropped: {:<14} RX-total: {}\n  TX-packets: {:<14} TX-dropped: {:<14} TX-total: {}\n  {}\n",
        title,
        rx,
        rx_dropped,
        rx + rx_dropped,
        tx,
        tx_dropped,
        tx + tx_dropped,
        "-".repeat(76)
    )
}

/// Formats a MAC address as testpmd does.
pub fn mac_text(m: &[u8; 6]) -> String {
    format!(
        "{:02X}:{:02X}:{:02X}:{:02X}:{:02X}:{:02X}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_deltas_over_time_and_bits_are_bytes_times_eight() {
        let a = PortStats {
            rx_packets: 100,
            rx_bytes: 6400,
            tx_packets: 50,
            tx_bytes: 3200,
            ..Default::default()
        };
        let b = PortStats {
            rx_packets: 300,
            rx_bytes: 19200,
            tx_packets: 50,
            tx_bytes: 3200,
            ..Default::default()
        };
        let r = Rates::between(&a, &b, Duration::from_secs(2));
        assert_eq!(
            r,
            Rates {
                rx_pps: 100,
                rx_bps: 51_200,
                tx_pps: 0,
                tx_bps: 0
            }
        );
        // Cleared counters do not produce absurd rates.
        assert_eq!(
            Rates::between(&b, &a, Duration::from_secs(1)),
            Rates::default()
        );
        assert_eq!(Rates::between(&a, &b, Duration::ZERO), Rates::default());
    }

    #[test]
    fn port_stats_block_has_testpmds_fields() {
        let s = PortStats {
            rx_packets: 7,
            rx_missed: 2,
            rx_bytes: 448,
            rx_errors: 1,
            rx_nombuf: 3,
            tx_packets: 5,
            tx_errors: 4,
            tx_bytes: 320,
        };
        let t = port_stats_text(
            1,
            &s,
            &Rates {
                rx_pps: 10,
                rx_bps: 80,
                tx_pps: 20,
                tx_bps: 160,
            },
        );
        for want in [
            "NIC statistics for port 1",
            "RX-packets: 7",
            "RX-missed: 2",
            "RX-bytes:  448",
            "RX-errors: 1",
            "RX-nombuf:  3",
            "TX-packets: 5",
            "TX-errors: 4",
            "TX-bytes:  320",
            "Throughput (since last show)",
            "Rx-pps:           10",
            "Tx-bps:          160",
        ] {
            assert!(t.contains(want), "missing {want:?} in\n{t}");
        }
    }

    #[test]
    fn fwd_block_totals_add_up() {
        let t = fwd_port_text(0, 10, 2, 7, 1);
        assert!(t.contains("RX-total: 12"), "{t}");
        assert!(t.contains("TX-total: 8"), "{t}");
        assert_eq!(mac_text(&[2, 0, 0, 0xab, 0, 1]), "02:00:00:AB:00:01");
    }
}
