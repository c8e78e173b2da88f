//! A memif client refused by a server that has not started its port yet connects again
//! ([`DpdkPort::wait_link_up`]): DPDK 22.11's memif server listens from its probe on but
//! answers a client "ID not found" until its port starts, and the client then never tries
//! again. Two processes started together by one script met that window in half the runs or
//! more. Here both ends are in one process (server `net_memif0`, client `net_memif1`), the
//! client started first: the server's listener refuses it, and only then does the server
//! start.
//!
//! memif registers a multi-process action at probe time, so this EAL keeps the shared config
//! under a unique `--file-prefix`; the socket lives in a per-process temp dir.
#![cfg(feature = "dpdk")]

mod common;

use std::time::{Duration, Instant};

use common::*;
use ddpdk_dataplane::port::dpdk::{DpdkPort, PortConf, MEMIF_RECONNECT_AFTER};
use ddpdk_dataplane::port::Port;

#[test]
fn a_refused_memif_client_connects_again_once_its_server_starts() {
    let tmp = TempDir::new("memif-reconnect");
    let sock = tmp.0.join("m.sock");
    let sock = sock.to_str().expect("utf-8 temp path");
    let vdevs = [
        format!("net_memif0,role=server,id=0,socket={sock}"),
        format!("net_memif1,role=client,id=0,socket={sock}"),
    ];
    let args = eal_args("memif-reconnect", true, &vdevs);
    let eal = start_eal(&args);
    let by_name = |name: &str| port_named(&eal, name);
    let pool = pool("memif_reconnect", 4095);
    let conf = PortConf::default();
    let server = DpdkPort::configure(by_name("net_memif0"), conf, pool.clone()).expect("server");
    let client = DpdkPort::configure(by_name("net_memif1"), conf, pool.clone()).expect("client");
    // The client first: the server's listener is up (since its probe), its port is not.
    client
        .start()
        .expect("the client reaches the server's socket");
    let refused = Instant::now() + MEMIF_RECONNECT_AFTER / 2;
    while Instant::now() < refused {
        assert!(
            !client.link().up,
            "a server whose port is stopped took its client"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    server.start().expect("start the server");
    let link = client.wait_link_up(Duration::from_secs(10));
    let reconnects = client.memif_reconnects();
    // Closed in the order that keeps memif's two threads apart (`dpdk_memif_pair.rs`), before
    // any assertion can unwind past them.
    let _ = client.close();
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.link().up && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(200));
    let _ = server.close();
    assert!(
        link.up,
        "the refused client's link came up once the server started: {link}"
    );
    assert!(reconnects >= 1, "it took a reconnection ({reconnects})");
    assert_eq!(client.memif_reconnect_error(), None);
}
