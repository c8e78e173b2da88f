//! Both ends of a `net_memif` stopping at the same moment, over and over, in one process.
//!
//! DPDK 22.11's memif tears a connection down in `memif_disconnect`, which frees the
//! connection's shared-memory regions and control channel. It runs on the EAL's interrupt
//! thread when the peer leaves (the control channel's handler) and on the caller's thread in
//! `rte_eth_dev_stop` and `rte_eth_dev_close`, with nothing to keep the two apart: one end
//! stopping while the other leaves frees the same memory twice (a SIGSEGV in the EAL's
//! allocator, or "EAL: Error: Invalid memory"). A `perf` pair meets it at every run's end.
//! `DpdkPort` runs a memif's stop and close on the interrupt thread itself, so memif's own
//! handlers and our teardown can no longer overlap.
//!
//! A race cannot be forced, only offered: each round brings both links up, moves frames, then
//! stops the two ends from two threads released together. Without the serialisation (both
//! stops on their callers' threads) every one of 10 runs on the 2-CPU VM it was written on
//! logged 6 to 36 double frees in its 40 rounds; with it, none in 10, and every round must stop
//! cleanly, come up again and carry frames.
#![cfg(feature = "dpdk")]

mod common;

use std::sync::Barrier;
use std::time::Duration;

use common::*;
use ddpdk_dataplane::port::dpdk::{DpdkPort, PortConf, PortInfo};
use ddpdk_dataplane::port::Port;

const ROUNDS: u32 = 40;
const FRAMES: u32 = 64;

/// Set in the child process that runs the rounds.
const CHILD: &str = "DDPDK_MEMIF_TEARDOWN_CHILD";

/// The rounds run in a child process of this test binary: a free of memory already freed is
/// only reported on the EAL's log ("EAL: Error: Invalid memory"), or kills the process, so the
/// parent reads what the child wrote and how it ended.
#[test]
fn both_ends_of_a_memif_stopping_together_never_free_twice() {
    if std::env::var_os(CHILD).is_some() {
        return rounds();
    }
    let exe = std::env::current_exe().expect("this test binary");
    let out = std::process::Command::new(exe)
        .args([
            "both_ends_of_a_memif_stopping_together_never_free_twice",
            "--exact",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .expect("run the rounds in a child");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "the rounds ended {}:\n{text}",
        out.status
    );
    assert!(
        text.contains("test both_ends_of_a_memif_stopping_together_never_free_twice ... ok"),
        "{text}"
    );
    for sign in ["Invalid memory", "Failed to unregister"] {
        assert!(
            !text.contains(sign),
            "memif's teardown raced ({sign}):\n{text}"
        );
    }
}

fn rounds() {
    let tmp = TempDir::new("memif-teardown");
    let sock = tmp.0.join("m.sock");
    let sock = sock.to_str().expect("utf-8 temp path");
    let vdevs = [
        format!("net_memif0,role=server,id=0,socket={sock}"),
        format!("net_memif1,role=client,id=0,socket={sock}"),
    ];
    let eal = start_eal(&eal_args("memif-teardown", true, &vdevs));
    let by_name = |name: &str| -> u16 {
        eal.port_ids()
            .into_iter()
            .find(|&p| PortInfo::query(p).is_ok_and(|i| i.name == name))
            .unwrap_or_else(|| panic!("no port {name} among {:?}", eal.port_ids()))
    };
    let pool = pool("memif_teardown", 4095);
    let conf = PortConf {
        nb_rxd: 512,
        nb_txd: 512,
        ..PortConf::default()
    };
    let server =
        DpdkPort::configure(by_name("net_memif0"), conf, pool.clone()).expect("memif server");
    let client =
        DpdkPort::configure(by_name("net_memif1"), conf, pool.clone()).expect("memif client");
    for round in 0..ROUNDS {
        server.start().expect("start the server");
        client.start().expect("start the client");
        for p in [&server, &client] {
            let l = p.wait_link_up(Duration::from_secs(5));
            assert!(l.up, "round {round}: {} link within 5 s: {l}", p.name());
        }
        // The client posts the server -> client ring's buffers from its RX path.
        let mut none = Vec::new();
        client.rx_burst(0, &mut none, 32);
        send_and_check(&server, &client, 0x5a, round * FRAMES, FRAMES);
        send_and_check(&client, &server, 0xa5, round * FRAMES, FRAMES);
        let start = Barrier::new(2);
        std::thread::scope(|s| {
            let leaving = s.spawn(|| {
                start.wait();
                client.stop()
            });
            start.wait();
            let stopped = server.stop();
            let left = leaving.join().expect("the client's thread");
            assert!(stopped.is_ok(), "round {round}: server stop: {stopped:?}");
            assert!(left.is_ok(), "round {round}: client stop: {left:?}");
        });
        assert!(!server.link().up && !client.link().up, "round {round}");
    }
    client.close().expect("close the client");
    server.close().expect("close the server");
    assert_eq!(pool.in_use_count(), 0, "every mbuf back in the pool");
}
