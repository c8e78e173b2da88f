//! Helpers shared by the DPDK integration tests: EAL arguments, test packets, burst loops.
//!
//! Each file in `tests/` is its own process, so each can start its own EAL; every test gets a
//! unique `--file-prefix` so concurrent runs (and other agents' runs) never share DPDK runtime
//! state, and removes its runtime directory when it is done.

// Not every test binary uses every helper.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ddpdk_dataplane::port::dpdk::{DpdkPort, Eal, Mempool};
use ddpdk_dataplane::port::{PacketBuf, Port};

/// Smallest and largest test frame (Ethernet without FCS).
pub const MIN_LEN: usize = 60;
pub const MAX_LEN: usize = 1514;

/// Data room of the test pools: RTE_MBUF_DEFAULT_BUF_SIZE (2048 + 128 headroom).
pub const DATA_ROOM: u16 = 2048 + 128;

/// EAL arguments for a test: no hugepages, no PCI, lcore 0, a unique file prefix. `shconf`
/// false adds `--no-shconf` (no multi-process channel; memif needs it, so pass true there).
pub fn eal_args(name: &str, shconf: bool, vdevs: &[String]) -> Vec<String> {
    let mut args = vec![
        format!("ddpdk-test-{name}"),
        "-l".into(),
        "0".into(),
        "--no-huge".into(),
        "-m".into(),
        "256".into(),
        "--no-pci".into(),
        format!("--file-prefix=ddpdk-test-{name}-{}", std::process::id()),
        "--log-level=*:warning".into(),
    ];
    if !shconf {
        args.push("--no-shconf".into());
    }
    for v in vdevs {
        args.push(format!("--vdev={v}"));
    }
    args
}

/// The test's EAL. Dropping it runs `rte_eal_cleanup` and then removes the EAL's runtime
/// directory (`/var/run/dpdk/ddpdk-test-...`), also when a failed assertion unwinds. Declare it
/// before every pool and port so that it is dropped after them.
#[derive(Debug)]
pub struct TestEal {
    /// Always `Some` until dropped.
    eal: Option<Eal>,
    runtime_dir: PathBuf,
}

impl std::ops::Deref for TestEal {
    type Target = Eal;
    fn deref(&self) -> &Eal {
        self.eal
            .as_ref()
            .expect("the EAL lives until TestEal is dropped")
    }
}

impl Drop for TestEal {
    fn drop(&mut self) {
        // rte_eal_cleanup first: the runtime directory is in use until then.
        drop(self.eal.take());
        if self
            .runtime_dir
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("ddpdk-test-"))
        {
            let _ = std::fs::remove_dir_all(&self.runtime_dir);
        }
    }
}

/// Starts the EAL with `args`.
pub fn start_eal(args: &[String]) -> TestEal {
    let eal = Eal::init(args).unwrap_or_else(|e| panic!("EAL init with {args:?}: {e}"));
    let runtime_dir = eal.runtime_dir();
    TestEal {
        eal: Some(eal),
        runtime_dir,
    }
}

/// The port of the EAL's device named `name` (`net_memif0`).
pub fn port_named(eal: &Eal, name: &str) -> u16 {
    eal.port_ids()
        .into_iter()
        .find(|&p| ddpdk_dataplane::port::dpdk::PortInfo::query(p).is_ok_and(|i| i.name == name))
        .unwrap_or_else(|| panic!("no port {name} among {:?}", eal.port_ids()))
}

/// A scratch directory unique to this process, removed on drop.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("ddpdk-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create test temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn pool(name: &str, n: u32) -> std::sync::Arc<Mempool> {
    std::sync::Arc::new(
        Mempool::create(name, n, 32, DATA_ROOM, 0)
            .unwrap_or_else(|e| panic!("mempool {name}: {e}")),
    )
}

/// Length of test packet `seq`: 60..=1514, distinct for 1455 consecutive sequence numbers
/// (7 is coprime to 1455 = 3 * 5 * 97).
pub fn pkt_len(seq: u32) -> usize {
    MIN_LEN + (seq as usize * 7) % (MAX_LEN - MIN_LEN + 1)
}

/// Byte `i` of test packet `seq` (after the 4-byte sequence number); `tag` tells directions or
/// ports apart.
fn pattern(tag: u8, seq: u32, i: usize) -> u8 {
    (seq as u8)
        .wrapping_mul(31)
        .wrapping_add(i as u8)
        .wrapping_add((i >> 8) as u8)
        ^ tag
}

/// Fills `buf` as test packet `seq`: the little-endian sequence number, then the pattern.
pub fn fill(buf: &mut impl PacketBuf, tag: u8, seq: u32) {
    let d = buf.data_mut();
    assert_eq!(d.len(), pkt_len(seq), "buffer length for packet {seq}");
    d[..4].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in d.iter_mut().enumerate().skip(4) {
        *b = pattern(tag, seq, i);
    }
}

/// Checks that `buf` is test packet `seq` of `tag`, byte for byte.
pub fn check(buf: &impl PacketBuf, tag: u8, seq: u32) {
    let d = buf.data();
    assert_eq!(d.len(), pkt_len(seq), "length of packet {seq}");
    let got = u32::from_le_bytes(d[..4].try_into().expect("4 bytes"));
    assert_eq!(got, seq, "packet out of order or lost");
    if let Some(i) = (4..d.len()).find(|&i| d[i] != pattern(tag, seq, i)) {
        panic!(
            "packet {seq} corrupt at byte {i}: {:#04x} != {:#04x}",
            d[i],
            pattern(tag, seq, i)
        );
    }
}

/// Allocates and fills test packets `first..first + n` (one bulk allocation of `n` buffers, then
/// trimmed to each packet's length) and appends them to `out`.
pub fn make_burst(
    port: &DpdkPort,
    out: &mut Vec<<DpdkPort as Port>::Buf>,
    tag: u8,
    first: u32,
    n: usize,
) {
    let old = out.len();
    assert!(
        port.alloc_bulk(out, n, MAX_LEN),
        "alloc_bulk of {n} buffers (pool in use: {})",
        port.pool().in_use_count()
    );
    for (k, m) in out[old..].iter_mut().enumerate() {
        let seq = first + k as u32;
        m.set_len(pkt_len(seq) as u16);
        fill(m, tag, seq);
    }
}

/// Total bytes of test packets `first..first + n`.
pub fn bytes_of(first: u32, n: u32) -> u64 {
    (first..first + n).map(|s| pkt_len(s) as u64).sum()
}

/// Receives on queue 0 of `port` until `n` packets arrived or `timeout` passed; checks each
/// against the expected sequence (`first..`) and frees it. Returns the number received.
pub fn recv_check(port: &DpdkPort, tag: u8, first: u32, n: usize, timeout: Duration) -> usize {
    let deadline = Instant::now() + timeout;
    let mut got = 0usize;
    let mut rx = Vec::with_capacity(32);
    while got < n && Instant::now() < deadline {
        rx.clear();
        let k = port.rx_burst(0, &mut rx, 32);
        for m in rx.drain(..) {
            assert!(got < n, "more packets than were sent on {}", port.name());
            check(&m, tag, first + got as u32);
            got += 1;
        }
        if k == 0 {
            std::thread::yield_now();
        }
    }
    got
}

/// Sends `n` test packets starting at `first` from `tx` in bursts of 32, receiving each burst
/// on `rx` before the next is sent (so no ring ever fills). Asserts every packet is taken and
/// arrives intact and in order.
pub fn send_and_check(tx: &DpdkPort, rx: &DpdkPort, tag: u8, first: u32, n: u32) {
    let mut burst = Vec::with_capacity(32);
    let mut seq = first;
    while seq < first + n {
        let k = (first + n - seq).min(32);
        make_burst(tx, &mut burst, tag, seq, k as usize);
        let out = tx.tx_burst_all(0, &mut burst, 100);
        assert_eq!(
            (out.sent, out.dropped),
            (k as usize, 0),
            "{} -> {}: burst at {seq} not fully taken",
            tx.name(),
            rx.name()
        );
        let got = recv_check(rx, tag, seq, k as usize, Duration::from_secs(2));
        assert_eq!(
            got,
            k as usize,
            "{} -> {}: burst at {seq}: received",
            tx.name(),
            rx.name()
        );
        seq += k;
    }
    // Nothing extra is waiting.
    let mut extra = Vec::new();
    assert_eq!(
        rx.rx_burst(0, &mut extra, 32),
        0,
        "unexpected extra packets"
    );
}

/// A started `net_ring` pair named `name` (what one port transmits the other receives), each
/// port with `desc` RX and TX descriptors on `pool`, links up.
pub fn ring_pair_ports(
    eal: &TestEal,
    name: &str,
    pool: &std::sync::Arc<Mempool>,
    desc: u16,
) -> Vec<std::sync::Arc<DpdkPort>> {
    let (a, b) = eal
        .create_ring_pair(name, 1024, 1)
        .unwrap_or_else(|e| panic!("ring pair {name}: {e}"));
    let conf = ddpdk_dataplane::port::dpdk::PortConf {
        nb_rxd: desc,
        nb_txd: desc,
        ..Default::default()
    };
    [a, b]
        .into_iter()
        .map(|id| {
            let p = DpdkPort::configure(id, conf, std::sync::Arc::clone(pool))
                .unwrap_or_else(|e| panic!("configure port {id}: {e}"));
            p.start().unwrap_or_else(|e| panic!("start port {id}: {e}"));
            assert!(p.wait_link_up(Duration::from_secs(2)).up, "port {id} link");
            std::sync::Arc::new(p)
        })
        .collect()
}

/// Whether `net_tap` can be made here: root and a TUN device.
pub fn tap_possible() -> bool {
    std::path::Path::new("/dev/net/tun").exists()
        && std::fs::read_to_string("/proc/self/status")
            .map(|s| {
                s.lines()
                    .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
            })
            .unwrap_or(false)
}

/// Runs `ip ARGS` (iproute2), failing the test if it fails.
pub fn ip(args: &[&str]) {
    let o = std::process::Command::new("ip")
        .args(args)
        .output()
        .expect("run ip");
    assert!(
        o.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}
