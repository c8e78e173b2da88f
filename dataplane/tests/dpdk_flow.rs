//! `rte_flow` steering (issue 6 item 3) on the virtual devices this machine has. None of them
//! matches SCTP in flow rules, so what can be shown here is the probe and its fallback:
//!
//! - `net_ring` implements no flow API: `enable_sctp_flow_rules` fails with the device's
//!   reason, and `steer_sctp` then refuses every association (software dispatch steers them).
//! - `net_tap` (root, with /dev/net/tun) implements rte_flow through TC flower: it accepts the
//!   rule's Ethernet item and its IPv4 or IPv6 item (our addresses and full masks) and refuses
//!   it at pattern item 2, the SCTP ports. That shows the rule reaches a real PMD's parser well
//!   formed up to the one item a NIC with SCTP matching would take.
//!
//! Steering with rules that a device accepts is tested against the emulated device in
//! `control/tests/runtime.rs` (`flow_rules_steer_each_association_to_its_owner`).
#![cfg(feature = "dpdk")]
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use common::*;
use ddpdk_dataplane::port::dpdk::{DpdkPort, PortConf};
use ddpdk_dataplane::port::{Port, SctpFlow};

#[test]
fn flow_rule_probe_and_fallback_on_virtual_devices() {
    let tap = tap_possible();
    let iface = format!("ddpflow{}", std::process::id() % 10_000);
    let vdevs = if tap {
        vec![format!("net_tap_flow0,iface={iface}")]
    } else {
        eprintln!("net_tap part skipped: needs root and /dev/net/tun");
        Vec::new()
    };
    let eal = start_eal(&eal_args("flow", false, &vdevs));
    let pool = pool("flow", 1023);
    let conf = PortConf {
        nb_rxq: 2,
        nb_txq: 2,
        nb_rxd: 128,
        nb_txd: 128,
        ..PortConf::default()
    };
    let v4 = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
    let v6 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2));
    let flow = SctpFlow {
        local: v4,
        peer: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
        local_port: 5000,
        peer_port: 5000,
    };

    // The tap port, if any, is the only one probed at start-up.
    let tap_id = eal.port_ids().first().copied();
    assert_eq!(tap_id.is_some(), tap);

    // net_ring: no flow API at all.
    let (a, _) = eal.create_ring_pair("flow", 1024, 2).unwrap();
    let ring = DpdkPort::configure(a, conf, Arc::clone(&pool)).unwrap();
    let why = ring.enable_sctp_flow_rules(v4, 2).unwrap_err();
    assert!(
        why.contains("not implemented") || why.contains("not supported"),
        "{why}"
    );
    let refused = ring.steer_sctp(&flow, 1).unwrap_err();
    assert!(refused.contains("not enabled"), "{refused}");
    assert!(
        ring.enable_sctp_flow_rules(v4, 1)
            .unwrap_err()
            .contains("one data queue"),
        "one queue needs no steering"
    );

    if let Some(id) = tap_id {
        let port = DpdkPort::configure(id, conf, Arc::clone(&pool)).unwrap();
        port.start().unwrap();
        for local in [v4, v6] {
            let why = port.enable_sctp_flow_rules(local, 2).unwrap_err();
            assert!(
                why.ends_with("(pattern item 2)"),
                "{local}: refused at the SCTP item only, not before: {why}"
            );
        }
        port.stop().unwrap();
    }
}
