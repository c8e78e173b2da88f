//! Regression from an independent review of moving the RFC 5043 §6 machine to the control
//! thread (it failed as written): `route()` drained a control message's session events in the
//! middle of `Association::handle`, before `after_sctp` had turned SCTP's own events
//! (Connected) into indications, so an Initiate bundled with the COOKIE ACK was indicated
//! before Connected. Now the mid-packet drain waits for a connection that is up.

#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr};

use ddpdk_control::conn::{Accept, ConnConfig, Indication, Listener};
use ddpdk_control::memory::Memory;
use ddpdk_control::session::PendingLimit;
use ddpdk_dataplane::sctp::{Config, Endpoint, Instant};

fn cfg(port: u16) -> Config {
    Config {
        local_port: port,
        path_mtu: 1500,
        ..Config::default()
    }
}

/// The passive side's ULP starts a session as soon as it has the connection (it is Connected
/// at once), so its Initiate leaves in the COOKIE ACK's packet. The active side must still
/// hear Connected before any session event of that association.
#[test]
fn connected_comes_before_a_session_event_bundled_with_the_cookie_ack() {
    let now = Instant::from_nanos(1_000_000_000);
    let (ca, sa) = (
        IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
        IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
    );
    let mut cl = Listener::new(
        Endpoint::new(cfg(6001), [1; 32]).unwrap(),
        ConnConfig::default(),
        PendingLimit::new(4),
    );
    let mut sl = Listener::new(
        Endpoint::new(cfg(6002), [2; 32]).unwrap(),
        ConnConfig::default(),
        PendingLimit::new(4),
    );
    let (mut cm, _) = Memory::new(64, 0, 1);
    let (mut sm, _) = Memory::new(64, 0, 2);
    let mut buf = vec![0u8; 65536];
    let mut out = vec![0u8; 65536];
    let mut c = cl.connect(now, sa, 6002);
    let n = c.poll_transmit(now, &mut buf).unwrap(); // INIT
    let Accept::Reply(m) = sl.handle(now, ca, &buf[..n], &mut out, &sm) else {
        panic!("INIT ACK expected")
    };
    c.handle(now, &out[..m], &cm).unwrap();
    let n = c.poll_transmit(now, &mut buf).unwrap(); // COOKIE ECHO
    let Accept::Connection(mut s) = sl.handle(now, ca, &buf[..n], &mut out, &sm) else {
        panic!("connection expected")
    };
    let spd = sm.alloc_pd();
    s.initiate(1, spd, b"from the passive side").unwrap();
    let mut pkts = Vec::new();
    while let Some(n) = s.poll_transmit(now, &mut buf) {
        pkts.push(buf[..n].to_vec());
    }
    assert_eq!(pkts.len(), 1, "COOKIE ACK and the Initiate in one packet");
    let _ = cm.alloc_pd();
    for p in &pkts {
        c.handle(now, p, &cm).unwrap();
    }
    let inds: Vec<Indication> = std::iter::from_fn(|| c.poll_indication()).collect();
    let connected = inds
        .iter()
        .position(|i| matches!(i, Indication::Connected { .. }))
        .expect("Connected");
    let session = inds
        .iter()
        .position(|i| matches!(i, Indication::Session { .. }))
        .expect("InitiateReceived");
    assert!(connected < session, "ULP order: {inds:?}");
}
