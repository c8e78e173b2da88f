//! Issue 6 item 7: the `ddpdk` binary against usrsctp on raw IP sockets, across a veth pair.
//!
//! The test makes a network namespace holding one end of a veth (198.18.2.1/24, usrsctp's
//! side: `usrsctp-raw-peer`, a DDP client built from usrsctp and DDP framing written from the
//! RFCs); the other end stays in this namespace without any IP address, driven by DPDK's
//! `net_af_packet` under `ddpdk --ip 198.18.2.2 --listen` and a `--cmdline-file`. The kernel
//! IP stack never sees ddpdk's side: ddpdk answers ARP itself.
//!
//! Checked: the association with Adaptation Layer Indication 1 both ways (RFC 5043 §11.1), the
//! session (Initiate / Accept with the offered region / Terminate both ways), two untagged
//! messages from ddpdk with their DDP headers checked by the peer, 1 MiB of tagged writes from
//! the peer whose CRC32c ddpdk's `mr checksum` reproduces, a graceful shutdown; and a capture on
//! the namespace's side, dissected by tshark: every SCTP checksum good, PPIDs 16 and 17 from
//! both sides, every DATA chunk unordered and unfragmented, the whole chunk sequence.
//!
//! Needs root (namespaces, veths, raw sockets), `ip` and `tshark` (deploy/setup.sh installs
//! them), and the `ddpdk` binary of the same build (`cargo test --workspace` builds it).

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

#[path = "../../../cli/tests/common/tshark.rs"]
mod tshark;
use tshark::fields;

const PEER: &str = env!("CARGO_BIN_EXE_usrsctp-raw-peer");

fn sh(args: &[&str]) -> Output {
    let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// The namespace and the veth, removed however the test ends.
struct Net {
    ns: String,
    dpdk_if: String,
    peer_if: String,
}

impl Net {
    fn new() -> Net {
        let id = std::process::id();
        let net = Net {
            ns: format!("ddpdk-ia-{id}"),
            dpdk_if: format!("ddpd{id}"),
            peer_if: format!("ddpp{id}"),
        };
        let (ns, d, p) = (&net.ns, &net.dpdk_if, &net.peer_if);
        sh(&["ip", "netns", "add", ns]);
        sh(&["ip", "link", "add", d, "type", "veth", "peer", "name", p]);
        sh(&["ip", "link", "set", p, "netns", ns]);
        sh(&["ip", "-n", ns, "addr", "add", "198.18.2.1/24", "dev", p]);
        sh(&["ip", "-n", ns, "link", "set", p, "up"]);
        sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        // ddpdk's side carries no kernel IP at all (no IPv6 link-local chatter either).
        sh(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{d}.disable_ipv6=1"),
        ]);
        sh(&["ip", "link", "set", d, "up"]);
        net
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.dpdk_if])
            .output();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
    }
}

fn ddpdk_binary() -> PathBuf {
    let p = Path::new(PEER).with_file_name("ddpdk");
    assert!(
        p.exists(),
        "{} is missing: build the workspace (cargo test --workspace builds it)",
        p.display()
    );
    p
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

fn wait_for_line(child: &mut Child, want: &str) -> String {
    use std::io::BufRead;
    let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line).unwrap();
        assert!(n > 0, "exited before {want:?}:\n{seen}");
        seen.push_str(&line);
        if line.contains(want) {
            // The rest is read when the process ends.
            let rest = std::thread::spawn(move || {
                let mut s = String::new();
                let _ = std::io::Read::read_to_string(&mut reader, &mut s);
                s
            });
            child.stdout = None;
            return seen + &rest.join().unwrap_or_default();
        }
    }
}

#[test]
fn ddpdk_on_af_packet_interoperates_with_usrsctp_on_raw_ip() {
    assert!(
        unsafe_free_is_root(),
        "needs root: network namespaces, veths and raw sockets"
    );
    let ddpdk = ddpdk_binary();
    let net = Net::new();
    let dir = std::env::temp_dir().join(format!("ddpdk-ia-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("veth.pcap");
    let cmds = dir.join("server.cmds");
    std::fs::write(
        &cmds,
        "mr reg 1048576 remote-write\nsession offer last\nmr reg 2000 local\nmr fill last 90\n\
         wait session 60\nsend untagged 1 1 0 1000 2 --from last\nwait closed 60\n\
         mr checksum all\nshow fwd stats all\nquit\n",
    )
    .unwrap();

    // The capture, on the namespace's end of the veth: every frame both sides sent.
    let mut capture = Command::new("ip")
        .args([
            "netns",
            "exec",
            &net.ns,
            "tshark",
            "-q",
            "-i",
            &net.peer_if,
            "-w",
        ])
        .arg(&pcap)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tshark");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !pcap.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(pcap.exists(), "the capture did not start");

    let mut server = Command::new(&ddpdk)
        .args([
            "--lcores",
            "0@0,1@1",
            "--no-huge",
            "-m",
            "512",
            "--no-pci",
            "--log-level=*:error",
            &format!("--file-prefix=ddpdk-ia-{}", std::process::id()),
            &format!("--vdev=net_af_packet0,iface={},qpairs=2", net.dpdk_if),
            "--",
            "--ip",
            "198.18.2.2",
            "--listen",
            "--cmdline-file",
        ])
        .arg(&cmds)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let server_out = std::thread::spawn(move || {
        let out = wait_for_line(&mut server, "DDP endpoint on port");
        let status = server.wait().unwrap();
        let mut err = String::new();
        if let Some(mut e) = server.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        (status, out + &err)
    });
    // usrsctp retransmits its INIT until ddpdk's port is up, so no ordering is needed.
    let peer = Command::new("ip")
        .args(["netns", "exec", &net.ns, PEER])
        .args(["198.18.2.1", "198.18.2.2", "5000", "1048576", "65536", "2"])
        .output()
        .unwrap();
    let (status, server_text) = server_out.join().unwrap();
    // The capture writes what the kernel still holds after the processes end: stop it only
    // once the file has stopped growing.
    let size = || std::fs::metadata(&pcap).map(|m| m.len()).unwrap_or(0);
    let (mut last, mut stable) = (size(), Instant::now());
    let deadline = Instant::now() + Duration::from_secs(20);
    while stable.elapsed() < Duration::from_millis(1500) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        let now = size();
        if now != last {
            (last, stable) = (now, Instant::now());
        }
    }
    let _ = Command::new("kill")
        .args(["-INT", &capture.id().to_string()])
        .output();
    let _ = capture.wait();
    let peer_text = text(&peer);
    assert!(
        peer.status.success(),
        "peer:\n{peer_text}\nddpdk:\n{server_text}"
    );
    assert!(
        status.success(),
        "ddpdk:\n{server_text}\npeer:\n{peer_text}"
    );
    for want in [
        "adaptation indication 0x00000001",
        "session accepted: the peer offers STag",
        "untagged message 1: 1000 bytes, DDP-SSN 1, QN 0, MSN 1",
        "untagged message 2: 1000 bytes, DDP-SSN 2, QN 0, MSN 2",
        // ddpdk sent them from its local region (byte 90 throughout), by reference.
        "MSN 1, payload crc32c 0x",
        "session terminated",
        "association shut down",
    ] {
        assert!(
            peer_text.contains(want),
            "peer lacks {want:?}:\n{peer_text}"
        );
    }
    for want in [
        "Association 1 accepted from 198.18.2.1 port 5000",
        "Sent 2 x 1000 bytes on association 1 stream 1",
        "Association 1 stream 1: session terminated: terminated by the peer",
        "Association 1 with 198.18.2.1 port 5000 closed: Shutdown",
    ] {
        assert!(
            server_text.contains(want),
            "ddpdk lacks {want:?}:\n{server_text}"
        );
    }
    // The untagged messages left ddpdk from its region: usrsctp received exactly its bytes, and
    // af_packet sent each as an mbuf chain with the payload attached (zero-copy).
    let nineties = format!(
        "payload crc32c {:#010x}",
        crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, &[90u8; 1000]) as u32
    );
    assert_eq!(peer_text.matches(&nineties).count(), 2, "{peer_text}");
    let by_reference: u64 = server_text
        .split("region spans by reference: ")
        .skip(1)
        .filter_map(|t| t.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(by_reference, 2, "{server_text}");
    // Byte-exact: ddpdk's region holds what usrsctp's side wrote.
    let written = peer_text
        .split("tagged messages: crc32c ")
        .nth(1)
        .and_then(|t| t.get(..10))
        .unwrap_or_else(|| panic!("no crc from the peer:\n{peer_text}"));
    assert!(
        server_text.contains(&format!("crc32c {written} over 1048576 bytes")),
        "ddpdk's region is not what the peer wrote ({written}):\n{server_text}"
    );

    // The wire, as tshark dissects it.
    let status = fields(&pcap, "sctp", "sctp.checksum.status");
    assert!(status.len() > 700, "{} SCTP packets captured", status.len());
    assert!(
        status.iter().all(|s| s == "1"),
        "a bad checksum: {status:?}"
    );
    let chunks = fields(&pcap, "sctp", "sctp.chunk_type");
    for (t, name) in [
        ("1", "INIT"),
        ("2", "INIT ACK"),
        ("10", "COOKIE ECHO"),
        ("11", "COOKIE ACK"),
        ("0", "DATA"),
        ("3", "SACK"),
        ("7", "SHUTDOWN"),
        ("8", "SHUTDOWN ACK"),
        ("14", "SHUTDOWN COMPLETE"),
    ] {
        assert!(chunks.iter().any(|c| c == t), "no {name} chunk");
    }
    for side in ["198.18.2.1", "198.18.2.2"] {
        for ppid in ["16", "17"] {
            let n = fields(
                &pcap,
                &format!("ip.src == {side} && sctp.data_payload_proto_id == {ppid}"),
                "sctp.data_payload_proto_id",
            );
            assert!(!n.is_empty(), "no PPID {ppid} DATA from {side}");
        }
    }
    // Every DATA chunk: U = 1, B = E = 1 (RFC 5043 §5.1: unordered, never fragmented).
    let data = fields(&pcap, "sctp.chunk_type == 0", "sctp.data_tsn").len();
    assert!(data > 700, "{data} DATA chunks");
    for bit in ["sctp.data_u_bit", "sctp.data_b_bit", "sctp.data_e_bit"] {
        let set = fields(&pcap, &format!("sctp.chunk_type == 0 && {bit} == 1"), bit);
        assert_eq!(set.len(), data, "{bit} is not set on every DATA chunk");
    }
    let adaptation = fields(
        &pcap,
        "sctp.chunk_type == 1 || sctp.chunk_type == 2",
        "sctp.parameter_type",
    );
    assert_eq!(
        adaptation.iter().filter(|p| p.as_str() == "0xc006").count(),
        2,
        "the Adaptation Layer Indication in INIT and INIT ACK: {adaptation:?}"
    );
    assert!(
        !fields(
            &pcap,
            "arp.opcode == 2 && arp.src.proto_ipv4 == 198.18.2.2",
            "arp.opcode"
        )
        .is_empty(),
        "ddpdk answered ARP for its address"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether this process runs as root (`id -u`), without libc in this test.
fn unsafe_free_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}
