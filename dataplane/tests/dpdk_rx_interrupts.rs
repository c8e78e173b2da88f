//! RX interrupts on a device that has them here: `net_tap` (root, /dev/net/tun), whose queue
//! fds signal when the kernel queues a frame for the tap. An idle core's wait
//! (`Port::rx_waiter`) ends with the frame, with its doorbell from another thread, and at its
//! timeout when neither comes; a device without interrupts (`net_ring`) gives no waiter.
#![cfg(feature = "dpdk")]
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod common;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use ddpdk_dataplane::port::dpdk::{DpdkPort, PortConf};
use ddpdk_dataplane::port::{PacketBuf, Port, Woken};

#[test]
fn an_idle_core_waits_for_a_frame_its_doorbell_or_its_timeout() {
    if !tap_possible() {
        eprintln!("skipped: net_tap needs root and /dev/net/tun");
        return;
    }
    let iface = format!("ddpintr{}", std::process::id() % 10_000);
    let eal = start_eal(&eal_args(
        "intr",
        false,
        &[format!("net_tap_intr0,iface={iface}")],
    ));
    // The kernel's own IPv6 traffic on a new link (router solicitations, MLD) would be
    // frames too: the test sends its own.
    let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{iface}/disable_ipv6"), "1");
    let pool = pool("intr", 1023);
    let conf = PortConf {
        nb_rxd: 128,
        nb_txd: 128,
        rx_interrupts: true,
        ..PortConf::default()
    };
    let tap_id = eal.port_ids()[0];
    let tap = DpdkPort::configure(tap_id, conf, Arc::clone(&pool)).unwrap();
    tap.start().unwrap();
    let waiter = tap.rx_waiter(&[0]).expect("net_tap has RX interrupts");
    assert!(waiter.arm(true));
    // Nothing queued, no bell: the wait ends at its timeout.
    let mut rx = Vec::new();
    tap.rx_burst(0, &mut rx, 32);
    tap.free_bulk(&mut rx);
    assert_eq!(waiter.wait(Duration::from_millis(50)), Woken::Timeout);
    // The doorbell, rung from another thread while the core waits.
    let bell = Arc::clone(&waiter);
    let ringer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        bell.bell();
    });
    assert_eq!(waiter.wait(Duration::from_secs(10)), Woken::Bell);
    ringer.join().unwrap();
    // A frame: the kernel resolves an address on the tap's link with an ARP request, which
    // the tap queues for us.
    ip(&["addr", "add", "198.18.7.1/24", "dev", &iface]);
    ip(&["link", "set", &iface, "up"]);
    let pinger = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(20));
        let _ = Command::new("ping")
            .args(["-c", "1", "-W", "1", "198.18.7.9"])
            .output();
    });
    // The bell was read when it woke the last wait: only an interrupt ends this one early.
    let woken = waiter.wait(Duration::from_secs(10));
    assert_eq!(woken, Woken::Rx, "the ARP request's frame wakes the core");
    let n = tap.rx_burst(0, &mut rx, 32);
    assert!(n >= 1, "the frame that woke the core is there to poll");
    assert!(
        rx.iter()
            .any(|b| b.data().get(12..14) == Some(&[0x08, 0x06][..])),
        "an ARP frame among {n}"
    );
    tap.free_bulk(&mut rx);
    pinger.join().unwrap();
    assert!(waiter.arm(false));
    drop(waiter);
    tap.stop().unwrap();
    drop(tap);

    // A ring device has no RX interrupts: no waiter, and the core sleeps on its timer.
    let (a, _) = eal.create_ring_pair("intr", 1024, 1).unwrap();
    let ring = DpdkPort::configure(a, conf, Arc::clone(&pool)).unwrap();
    ring.start().unwrap();
    assert!(ring.rx_waiter(&[0]).is_none());
}
