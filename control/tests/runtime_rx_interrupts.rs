//! A data core idle on a port with RX interrupts (`net_tap`: root and /dev/net/tun) blocks on
//! them (`DataCore::run`, `Port::rx_waiter`) and the kernel's frames wake it: the kernel on
//! the tap's side pings the endpoint after it has been idle, is answered, and the core counts
//! the sleeps a frame ended. Configured without interrupts, the same core never blocks on
//! them.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

#[path = "../../dataplane/tests/common/mod.rs"]
mod common;
mod rt;

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{eal_args, ip, pool, start_eal, tap_possible};
use ddpdk_control::runtime::{Clock, IdlePolicy, IdleStats, RuntimeConfig};
use ddpdk_dataplane::net::Interface;
use ddpdk_dataplane::port::dpdk::{DpdkPort, PortConf};
use ddpdk_dataplane::port::Port;
use ddpdk_dataplane::sctp::Config;
use rt::runtime_on;

/// Runs one data core on `port` (configured as `conf`) idle for a while, then has the kernel
/// ping it three times with pauses longer than the core's deep-idle threshold. Returns
/// whether every ping was answered and the core's idle counters.
fn idle_then_pinged(port: &Arc<DpdkPort>, addr: Ipv4Addr) -> (bool, IdleStats) {
    let (mut control, mut cores) = runtime_on(
        Arc::clone(port),
        Interface::new(port.mac(), Some(addr), None),
        3,
        RuntimeConfig::default(),
        Config::default(),
    );
    let mut core = cores.remove(0);
    let clock = Clock::new();
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = Arc::clone(&stop);
    let thread = std::thread::spawn(move || {
        core.run(clock, &stopping, IdlePolicy::default());
        core
    });
    // Idle well past DEEP_IDLE_AFTER (10 ms) before each frame: `-i 0.2` between pings.
    let pinger = std::thread::spawn({
        let addr = addr.to_string();
        move || {
            std::thread::sleep(Duration::from_millis(100));
            Command::new("ping")
                .args(["-c", "3", "-i", "0.2", "-W", "2", &addr])
                .output()
                .expect("run ping")
                .status
                .success()
        }
    });
    while !pinger.is_finished() {
        control.poll(clock.now());
        std::thread::sleep(Duration::from_millis(1));
    }
    let answered = pinger.join().unwrap();
    // An STag registered and deregistered while the core is blocked: each command wakes it
    // (the deregistration waits for its acknowledgement; it waited for the core's 100 ms
    // bound before).
    std::thread::sleep(Duration::from_millis(50));
    let pd = control.memory_mut().alloc_pd();
    let region = control.memory_mut().alloc_region(1 << 16).unwrap();
    let reg = control
        .memory_mut()
        .register(rt::remote_write(pd, region, 1 << 16))
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    control.memory_mut().deregister(reg.stag).unwrap();
    stop.store(true, Ordering::Release);
    let core = thread.join().unwrap();
    (answered, core.idle_stats())
}

#[test]
fn an_idle_core_blocked_on_rx_interrupts_is_woken_by_the_kernels_frames() {
    if !tap_possible() {
        eprintln!("skipped: net_tap needs root and /dev/net/tun");
        return;
    }
    // Two taps: a port closed (dropped) cannot be configured again.
    let ifaces: Vec<String> = (0..2)
        .map(|k| format!("ddprti{k}{}", std::process::id() % 10_000))
        .collect();
    let vdevs: Vec<String> = ifaces
        .iter()
        .enumerate()
        .map(|(k, i)| format!("net_tap_rtintr{k},iface={i}"))
        .collect();
    let eal = start_eal(&eal_args("rtintr", false, &vdevs));
    for i in &ifaces {
        // The kernel's own IPv6 frames on a new link would wake the core too.
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{i}/disable_ipv6"), "1");
    }
    let pool = pool("rtintr", 2047);
    let ids = eal.port_ids();
    let (iface, port_id) = (&ifaces[0], ids[0]);
    let conf = PortConf {
        // RX and TX queue 0 the data core's, TX queue 1 the control thread's.
        nb_rxq: 2,
        nb_txq: 2,
        nb_rxd: 256,
        nb_txd: 256,
        rx_interrupts: true,
        ..PortConf::default()
    };
    let port = Arc::new(DpdkPort::configure(port_id, conf, Arc::clone(&pool)).unwrap());
    port.start().unwrap();
    ip(&["addr", "add", "198.18.9.1/24", "dev", iface]);
    ip(&["link", "set", iface, "up"]);
    let (answered, idle) = idle_then_pinged(&port, Ipv4Addr::new(198, 18, 9, 2));
    assert!(answered, "the endpoint answered the kernel's pings");
    assert!(
        idle.interrupt_wakes >= 1 && idle.interrupt_sleeps >= idle.interrupt_wakes,
        "sleeps on RX interrupts that a frame ended: {idle:?}"
    );
    assert!(
        idle.interrupt_bells >= 2,
        "the STag registration and deregistration each rang the blocked core: {idle:?}"
    );
    port.stop().unwrap();
    drop(port);

    // The same device configured without RX interrupts: the core sleeps on its timer only.
    let conf = PortConf {
        rx_interrupts: false,
        ..conf
    };
    let (iface, port_id) = (&ifaces[1], ids[1]);
    let port = Arc::new(DpdkPort::configure(port_id, conf, Arc::clone(&pool)).unwrap());
    port.start().unwrap();
    ip(&["addr", "add", "198.18.10.1/24", "dev", iface]);
    ip(&["link", "set", iface, "up"]);
    let (answered, idle) = idle_then_pinged(&port, Ipv4Addr::new(198, 18, 10, 2));
    assert!(answered, "answered without interrupts too");
    assert_eq!(
        (idle.interrupt_sleeps, idle.interrupt_wakes),
        (0, 0),
        "{idle:?}"
    );
    assert!(idle.sleeps > 0, "{idle:?}");
    port.stop().unwrap();
}
