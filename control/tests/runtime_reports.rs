//! What a data core reports of its associations (`CoreReport`, the source of `show assoc`,
//! telemetry's `assoc/info` and `session/list`, and the Prometheus exporter's session series).

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
use rt::{closes, runtime, Lockstep, PORT};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use ddpdk_control::runtime::{Op, RuntimeConfig};
use ddpdk_control::session::{State, TerminationReason};
use ddpdk_dataplane::port::mem::pair;

/// RFC 5043 §11.3: the association's end terminates its sessions, and the session machine
/// marks every idle stream Terminated too (so that nothing starts on it). A report counted
/// those streams as terminated sessions: telemetry's `session/list` and the exporter's
/// `ddpdk_sessions{state="Terminated"}` grew by the association's streams less one at each
/// close (found by an outside-in test: 128 "sessions" after 16 one-session associations).
/// Only the session that was opened is reported, at both ends.
#[test]
fn a_closed_association_reports_only_the_sessions_it_had() {
    let (a4, b4) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
    let (a6, b6): (Ipv6Addr, Ipv6Addr) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
    let (pa, pb) = pair(2, 4096);
    let cfg = RuntimeConfig {
        cores: 1,
        ..RuntimeConfig::default()
    };
    let a = runtime(Arc::new(pa), a4, a6, 1, cfg);
    let b = runtime(Arc::new(pb), b4, b6, 2, cfg);
    let (mut l, _reg, _region) = Lockstep::open_to_region(a, b, IpAddr::V4(b4), PORT, 1 << 16);
    let before = l.ka[0].report().assocs[0].sessions.clone();
    assert_eq!(
        before,
        [(1, State::Established)],
        "one session, on stream 1"
    );
    l.ca.submit(l.conn, Op::Shutdown).unwrap();
    l.run_until("both ends closed", |l| {
        closes(&l.ea) == 1 && closes(&l.eb) == 1
    });
    for (end, cores) in [("client", &l.ka), ("server", &l.kb)] {
        let report = cores[0].report();
        let assoc = report
            .assocs
            .first()
            .unwrap_or_else(|| panic!("the {end}'s closed association is kept in view"));
        assert!(assoc.streams > 1, "{} streams", assoc.streams);
        assert_eq!(
            assoc.sessions,
            [(1, State::Terminated(TerminationReason::AssociationEnded))],
            "the {end} reports the one session it had"
        );
    }
}
