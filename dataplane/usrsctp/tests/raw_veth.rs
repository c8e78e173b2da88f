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

/// The tests of this file each pin processes to both CPUs: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn ddpdk_on_af_packet_interoperates_with_usrsctp_on_raw_ip() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    assert!(
        unsafe_free_is_root(),
        "needs root: network namespaces, veths and raw sockets"
    );
    let ddpdk = ddpdk_binary();
    let net = Net::new();
    let dir = std::env::temp_dir().join(format!("ddpdk-ia-{}", std::process::id()));
    fresh_dir(&dir);
    let pcap = dir.join("veth.pcap");
    let cmds = server_script(&dir, "show fwd stats all");

    // The capture, on the namespace's end of the veth: every frame both sides sent.
    let mut capture = start_capture(&net.ns, &net.peer_if, &pcap);
    let server_out = af_packet_server(&ddpdk, ("ddpdk-ia", "198.18.2.2"), &net.dpdk_if, &[], &cmds);
    let peer = usrsctp_peer(&net.ns, &["198.18.2.1", "198.18.2.2"]);
    let (status, server_text) = server_out.join().unwrap();
    settle_and_stop(&pcap, &mut [&mut capture]);
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
        "Association 1 with 198.18.2.1 port 5000 closed: shut down",
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
    // The kernel resolved ddpdk's address from ddpdk's own ARP: its reply to the kernel's
    // request, or, when that request came before ddpdk's port was up, the ARP Announcement
    // ddpdk sends at start (RFC 5227 §2.3), which the kernel's incomplete entry takes (RFC
    // 826's merge) without asking again.
    let from_ddpdk = |filter: &str| {
        fields(
            &pcap,
            &format!("arp.src.proto_ipv4 == 198.18.2.2 && ({filter})"),
            "arp.opcode",
        )
    };
    assert!(
        !from_ddpdk("arp.isannouncement").is_empty(),
        "ddpdk announced its address: {:?}",
        fields(&pcap, "arp", "arp.src.proto_ipv4")
    );
    // Its reply, when the kernel asked after the port was up (an ARP responder the
    // dataplane's `arp_request_for_us_is_answered_rfc826` and af_packet's kernel ping test
    // check on their own): any ARP the kernel asked of ddpdk after the announcement answered.
    let asked = fields(
        &pcap,
        "arp.opcode == 1 && arp.src.proto_ipv4 == 198.18.2.1",
        "frame.number",
    );
    let announced = from_ddpdk("arp.isannouncement");
    let replied = from_ddpdk("arp.opcode == 2");
    let first_announcement = fields(
        &pcap,
        "arp.src.proto_ipv4 == 198.18.2.2 && arp.isannouncement",
        "frame.number",
    );
    let after = first_announcement
        .first()
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(u64::MAX);
    let asked_after = asked
        .iter()
        .filter(|n| n.parse::<u64>().is_ok_and(|n| n > after))
        .count();
    assert!(
        replied.len() >= asked_after && !announced.is_empty(),
        "ddpdk answered each ARP asked of it once up: {asked:?} asked, {replied:?} replied"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// ddpdk's side of the exchange, as shell commands in `dir`: a region offered to the session
/// usrsctp opens, two untagged messages sent from a local region once it is up, the regions'
/// checksums once the association closed, then `show`.
fn server_script(dir: &Path, show: &str) -> PathBuf {
    let cmds = dir.join("server.cmds");
    std::fs::write(
        &cmds,
        format!(
            "mr reg 1048576 remote-write\nsession offer last\nmr reg 2000 local\nmr fill last 90\n\
             wait session 60\nsend untagged 1 1 0 1000 2 --from last\nwait closed 60\n\
             mr checksum all\n{show}\nquit\n"
        ),
    )
    .unwrap();
    cmds
}

/// An empty `dir`: a test that failed in this process (the tests share its id) left its
/// files there, and `start_capture` took the capture file it left for the new one started,
/// so the traffic began before the capture did (a failure then followed a failure).
fn fresh_dir(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
}

/// A tshark capture of `iface` in namespace `ns` into `pcap`, started (the file exists).
fn start_capture(ns: &str, iface: &str, pcap: &Path) -> Child {
    let capture = Command::new("ip")
        .args(["netns", "exec", ns, "tshark", "-q", "-i", iface, "-w"])
        .arg(pcap)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tshark");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !pcap.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(pcap.exists(), "the capture did not start");
    capture
}

/// The capture writes what the kernel still holds after the processes end: wait until the
/// file has stopped growing, then stop `children` (the capture, a gateway) with SIGINT.
fn settle_and_stop(pcap: &Path, children: &mut [&mut Child]) {
    let size = || std::fs::metadata(pcap).map(|m| m.len()).unwrap_or(0);
    let (mut last, mut stable) = (size(), Instant::now());
    let deadline = Instant::now() + Duration::from_secs(20);
    while stable.elapsed() < Duration::from_millis(1500) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        let now = size();
        if now != last {
            (last, stable) = (now, Instant::now());
        }
    }
    for child in children.iter() {
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .output();
    }
    for child in children.iter_mut() {
        let _ = child.wait();
    }
}

/// `ddpdk --ip IP --listen` on `net_af_packet` over `iface`, with `extra` options and the
/// shell commands of `cmds`; its exit status and everything it printed, once it ends.
fn af_packet_server(
    ddpdk: &Path,
    (tag, ip): (&str, &str),
    iface: &str,
    extra: &[&std::ffi::OsStr],
    cmds: &Path,
) -> std::thread::JoinHandle<(std::process::ExitStatus, String)> {
    let mut server = Command::new(ddpdk)
        .args([
            "--lcores",
            "0@0,1@1",
            "--no-huge",
            "-m",
            "512",
            "--no-pci",
            "--log-level=*:error",
            &format!("--file-prefix={tag}-{}", std::process::id()),
            &format!("--vdev=net_af_packet0,iface={iface},qpairs=2"),
            "--",
            "--ip",
            ip,
            "--listen",
        ])
        .args(extra)
        .arg("--cmdline-file")
        .arg(cmds)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::spawn(move || {
        let out = wait_for_line(&mut server, "DDP endpoint on port");
        let status = server.wait().unwrap();
        let mut err = String::new();
        if let Some(mut e) = server.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        (status, out + &err)
    })
}

/// usrsctp's DDP client in namespace `ns`, from the first address of `addrs` to the second
/// (and, optionally, its segment payload): 1 MiB of tagged writes of 64 KiB, two untagged
/// messages expected. usrsctp retransmits its INIT until ddpdk's port is up, so no ordering
/// with the server is needed.
fn usrsctp_peer(ns: &str, addrs: &[&str]) -> Output {
    let (addrs, segment) = addrs.split_at(2.min(addrs.len()));
    Command::new("ip")
        .args(["netns", "exec", ns, PEER])
        .args(addrs)
        .args(["5000", "1048576", "65536", "2"])
        .args(segment)
        .output()
        .unwrap()
}

/// Whether this process runs as root (`id -u`), without libc in this test.
fn unsafe_free_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Three places on one wire: usrsctp's namespace, the gateway's namespace in the middle, and
/// ddpdk's end in this namespace; removed however the test ends.
struct GatewayNet {
    peer_ns: String,
    gw_ns: String,
    /// usrsctp's end (in `peer_ns`) and the gateway's end facing it.
    peer_if: String,
    gw_host_if: String,
    /// The gateway's end facing ddpdk (the protected wire) and ddpdk's end.
    gw_wire_if: String,
    dpdk_if: String,
}

impl GatewayNet {
    fn new() -> GatewayNet {
        let id = std::process::id();
        let n = GatewayNet {
            peer_ns: format!("ddpdk-esp-p-{id}"),
            gw_ns: format!("ddpdk-esp-g-{id}"),
            peer_if: format!("espp{id}"),
            gw_host_if: format!("esph{id}"),
            gw_wire_if: format!("espw{id}"),
            dpdk_if: format!("espd{id}"),
        };
        sh(&["ip", "netns", "add", &n.peer_ns]);
        sh(&["ip", "netns", "add", &n.gw_ns]);
        let link =
            |a: &str, b: &str| sh(&["ip", "link", "add", a, "type", "veth", "peer", "name", b]);
        link(&n.peer_if, &n.gw_host_if);
        link(&n.dpdk_if, &n.gw_wire_if);
        sh(&["ip", "link", "set", &n.peer_if, "netns", &n.peer_ns]);
        sh(&["ip", "link", "set", &n.gw_host_if, "netns", &n.gw_ns]);
        sh(&["ip", "link", "set", &n.gw_wire_if, "netns", &n.gw_ns]);
        sh(&[
            "ip",
            "-n",
            &n.peer_ns,
            "addr",
            "add",
            "198.18.2.1/24",
            "dev",
            &n.peer_if,
        ]);
        sh(&[
            "ip",
            "-n",
            &n.peer_ns,
            "addr",
            "add",
            "2001:db8:2::1/64",
            "dev",
            &n.peer_if,
            "nodad",
        ]);
        sh(&["ip", "-n", &n.peer_ns, "link", "set", &n.peer_if, "up"]);
        sh(&["ip", "-n", &n.peer_ns, "link", "set", "lo", "up"]);
        // ESP makes a full packet of usrsctp's 37 bytes longer: the protected wire carries it
        // (a bump in the wire needs the larger MTU behind it, or fragments).
        for (ns, dev) in [(&n.gw_ns, &n.gw_host_if), (&n.gw_ns, &n.gw_wire_if)] {
            sh(&[
                "ip",
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{dev}.disable_ipv6=1"),
            ]);
            sh(&["ip", "-n", ns, "link", "set", dev, "mtu", "1600", "up"]);
        }
        sh(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{}.disable_ipv6=1", n.dpdk_if),
        ]);
        sh(&["ip", "link", "set", &n.dpdk_if, "mtu", "1600", "up"]);
        n
    }
}

impl Drop for GatewayNet {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.dpdk_if])
            .output();
        for ns in [&self.peer_ns, &self.gw_ns] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// One configuration of the gateway test: the algorithm of both SAs (keys as ddpdk's
/// configuration file and scapy take them: GCM's key and 4-byte salt, or CBC's key and the
/// HMAC key), transport or tunnel mode, and whether the gateway forges packets.
struct EspCase {
    algo: &'static str,
    /// ddpdk's rule words for the SA's transform with key `k` (hex).
    c2s_key: &'static str,
    s2c_key: &'static str,
    /// Tunnel mode between the gateway (198.18.2.3, an address only the tunnel uses) and
    /// ddpdk; else transport mode for the host.
    tunnel: bool,
    /// The gateway forges four packets after every this many it seals.
    attack_every: u32,
    /// IPv6 between usrsctp (2001:db8:2::1) and ddpdk (2001:db8:2::2), transport mode.
    v6: bool,
    /// The host sits behind a router (`ROUTER`) whose link takes IPv4 packets of at most this
    /// many bytes: the gateway sends back its Fragmentation Needed through the SA.
    too_big: Option<u32>,
}

const GATEWAY: &str = "198.18.2.3";
/// The router behind the gateway, on the host's side (`EspCase::too_big`).
const ROUTER: &str = "198.18.2.9";
const SPI_C2S: u32 = 1000;
const SPI_S2C: u32 = 2000;

impl EspCase {
    /// ddpdk's words for an SA's transform with `key`.
    fn transform(&self, key: &str) -> String {
        match key.split_once('/') {
            None => format!("aead_algo {} aead_key {}", self.algo, colons(key)),
            Some((cipher, auth)) => format!(
                "cipher_algo {} cipher_key {} auth_algo sha256-hmac auth_key {}",
                self.algo,
                colons(cipher),
                colons(auth)
            ),
        }
    }

    fn mode(&self, src: &str, dst: &str) -> String {
        if self.tunnel {
            format!("mode ipv4-tunnel src {src} dst {dst}")
        } else {
            "mode transport".to_string()
        }
    }

    /// ddpdk's configuration (198.18.2.2): the mirror of the gateway's SAs, SCTP from and to
    /// the host protected, any other SCTP discarded.
    fn ddpdk_config(&self) -> String {
        let (family, host) = if self.v6 {
            ("ipv6", format!("{}/128", self.host()))
        } else {
            ("ipv4", format!("{}/32", self.host()))
        };
        format!(
            "sa in {SPI_C2S} {} {}\n\
             sa out {SPI_S2C} {} {}\n\
             sp {family} in esp protect {SPI_C2S} pri 10 src {host} proto sctp\n\
             sp {family} out esp protect {SPI_S2C} pri 10 dst {host} proto sctp\n\
             sp {family} in esp discard pri 1 proto sctp\n",
            self.transform(self.c2s_key),
            self.mode(GATEWAY, "198.18.2.2"),
            self.transform(self.s2c_key),
            self.mode("198.18.2.2", GATEWAY),
        )
    }

    /// usrsctp's address.
    fn host(&self) -> &'static str {
        if self.v6 {
            "2001:db8:2::1"
        } else {
            "198.18.2.1"
        }
    }

    /// ddpdk's address.
    fn ddpdk(&self) -> &'static str {
        if self.v6 {
            "2001:db8:2::2"
        } else {
            "198.18.2.2"
        }
    }

    /// The address field of tshark's filters for this case's family.
    fn src_field(&self) -> &'static str {
        if self.v6 {
            "ipv6.src"
        } else {
            "ip.src"
        }
    }

    /// tshark's ESP SA record for one direction (outer addresses).
    fn tshark_sa(&self, src: &str, dst: &str, spi: u32, key: &str) -> String {
        let (encryption, enc_key, auth, auth_key) = match key.split_once('/') {
            None => ("AES-GCM with 16 octet ICV [RFC4106]", key, "NULL", ""),
            Some((c, a)) => ("AES-CBC [RFC3602]", c, "HMAC-SHA-256-128 [RFC4868]", a),
        };
        let auth_key = if auth_key.is_empty() {
            String::new()
        } else {
            format!("0x{auth_key}")
        };
        format!(
            "uat:esp_sa:\"{}\",\"{src}\",\"{dst}\",\"{spi:#010x}\",\"{encryption}\",\"0x{enc_key}\",\
             \"{auth}\",\"{auth_key}\"",
            if self.v6 { "IPv6" } else { "IPv4" }
        )
    }
}

fn colons(hex: &str) -> String {
    hex.as_bytes()
        .chunks(2)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join(":")
}

/// Issue 15 item 3: ddpdk with IPsec against an independent ESP implementation, AES-GCM-128
/// in transport mode. usrsctp, which has no IPsec, sits behind a bump-in-the-wire gateway
/// made of scapy's ESP (RFC 4303); ddpdk is on the other side of the gateway with the mirror
/// SAs and a policy that refuses clear SCTP. The same DDP exchange as the clear test runs:
/// association, session, untagged messages checked by usrsctp, 1 MiB of tagged writes
/// checksummed on both ends, shutdown. A capture of the protected wire shows no SCTP in the
/// clear, only ESP; given the keys (tshark's ESP SA table), it decrypts to SCTP with every
/// CRC32c good and DDP inside.
#[test]
fn ddpdk_with_esp_interoperates_with_usrsctp_behind_a_scapy_esp_gateway() {
    esp_interop(&EspCase {
        algo: "aes-128-gcm",
        c2s_key: "2b7e151628aed2a6abf7158809cf4f3ccafebabe",
        s2c_key: "000102030405060708090a0b0c0d0e0f10111213",
        tunnel: false,
        attack_every: 0,
        v6: false,
        too_big: None,
    });
}

/// The same through a tunnel (RFC 4303 §3.1.2: the gateway's own outer header) with
/// AES-GCM-256, while the gateway forges packets (issue 15 item 4): after every 50th packet
/// it seals, a replay of it (RFC 4303 §3.4.3), a copy with a ciphertext bit flipped
/// (§3.4.4), a copy under an SPI ddpdk has no SA for (§3.4.2) and one cut short. ddpdk drops
/// and counts every forgery, and the placed bytes are still exactly those usrsctp wrote.
#[test]
fn ddpdk_with_esp_in_a_tunnel_drops_forged_esp_from_the_gateway_4303_3_4() {
    esp_interop(&EspCase {
        algo: "aes-256-gcm",
        c2s_key: "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4deadbeef",
        s2c_key: "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1ffeedface",
        tunnel: true,
        attack_every: 50,
        v6: false,
        too_big: None,
    });
}

/// RFC 4301 §6.2 end to end: the host sits behind a router whose link takes packets of 900
/// bytes at most. ddpdk's 1000-byte untagged message goes through the tunnel with DF; the
/// gateway opens it, and the router's ICMP Fragmentation Needed (from 198.18.2.9, which no
/// policy names) comes back through the same tunnel, quoting ddpdk's SCTP packet. ddpdk
/// judges it by that quote, turned round (what the SA carries to it), takes it (the path MTU
/// lowered by ICMP, no policy mismatch), sends the message again without DF, and the router
/// cuts it for the host: usrsctp gets the message. Before, the ICMP was dropped as not what
/// the SA's policy selects.
#[test]
fn ddpdk_in_a_tunnel_takes_a_too_big_from_a_router_behind_the_gateway_4301_6_2() {
    esp_interop(&EspCase {
        algo: "aes-128-gcm",
        c2s_key: "2b7e151628aed2a6abf7158809cf4f3ccafebabe",
        s2c_key: "000102030405060708090a0b0c0d0e0f10111213",
        tunnel: true,
        attack_every: 0,
        v6: false,
        too_big: Some(900),
    });
}

/// The same with AES-CBC-128 and HMAC-SHA-256-128 (RFC 3602, RFC 4868), transport mode.
#[test]
fn ddpdk_with_esp_cbc_hmac_sha256_interoperates_through_the_gateway() {
    esp_interop(&EspCase {
        algo: "aes-128-cbc",
        c2s_key: "2b7e151628aed2a6abf7158809cf4f3c/\
                  000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
        s2c_key: "000102030405060708090a0b0c0d0e0f/\
                  1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100",
        tunnel: false,
        attack_every: 0,
        v6: false,
        too_big: None,
    });
}

/// The same over IPv6 (AES-GCM-128, transport mode): usrsctp on 2001:db8:2::1 behind the
/// gateway, ddpdk on 2001:db8:2::2 answering Neighbor Discovery itself, `sp ipv6` policies.
#[test]
fn ddpdk_with_esp_over_ipv6_interoperates_through_the_gateway() {
    esp_interop(&EspCase {
        algo: "aes-128-gcm",
        c2s_key: "2b7e151628aed2a6abf7158809cf4f3ccafebabe",
        s2c_key: "000102030405060708090a0b0c0d0e0f10111213",
        tunnel: false,
        attack_every: 0,
        v6: true,
        too_big: None,
    });
}

fn esp_interop(case: &EspCase) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    assert!(
        unsafe_free_is_root(),
        "needs root: network namespaces, veths and raw sockets"
    );
    let ddpdk = ddpdk_binary();
    let net = GatewayNet::new();
    let dir = std::env::temp_dir().join(format!("ddpdk-esp-ia-{}", std::process::id()));
    fresh_dir(&dir);
    let pcap = dir.join("wire.pcap");
    let cmds = server_script(&dir, "show ipsec\nshow fwd stats all");
    let conf = dir.join("ipsec.conf");
    std::fs::write(&conf, case.ddpdk_config()).unwrap();

    let gateway_script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/esp_gateway.py");
    let mut gateway = Command::new("ip")
        .args(["netns", "exec", &net.gw_ns, "/usr/bin/python3"])
        .arg(&gateway_script)
        .args([
            &net.gw_host_if,
            &net.gw_wire_if,
            &SPI_C2S.to_string(),
            case.c2s_key,
            &SPI_S2C.to_string(),
            case.s2c_key,
            "--algo",
            case.algo,
            "--attack",
            &case.attack_every.to_string(),
        ])
        .args(if case.tunnel {
            vec!["--tunnel", GATEWAY, "198.18.2.2"]
        } else {
            Vec::new()
        })
        .args(
            case.too_big
                .map(|mtu| vec!["--too-big".to_string(), mtu.to_string(), ROUTER.to_string()])
                .unwrap_or_default(),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the gateway (python3-scapy: deploy/setup.sh installs it)");
    let gateway_out = wait_for_line_async(&mut gateway, "gateway: ready");

    let mut capture = start_capture(&net.gw_ns, &net.gw_wire_if, &pcap);
    let server_out = af_packet_server(
        &ddpdk,
        ("ddpdk-esp-ia", case.ddpdk()),
        &net.dpdk_if,
        &["--ipsec-config".as_ref(), conf.as_os_str()],
        &cmds,
    );
    // Over IPv6 usrsctp on raw sockets keeps to the IPv6 minimum MTU (1280) and would split
    // larger DATA chunks, which ddpdk refuses (RFC 5043 §9): smaller segments there.
    let peer = usrsctp_peer(
        &net.peer_ns,
        &[
            case.host(),
            case.ddpdk(),
            if case.v6 { "1100" } else { "1400" },
        ],
    );
    let (status, server_text) = server_out.join().unwrap();
    settle_and_stop(&pcap, &mut [&mut capture, &mut gateway]);
    let gateway_text = gateway_out.join().unwrap();
    let peer_text = text(&peer);
    let all = format!("peer:\n{peer_text}\nddpdk:\n{server_text}\ngateway:\n{gateway_text}");
    assert_protected_exchange(&peer, status, &peer_text, &server_text, &all);
    let want = "untagged message 2: 1000 bytes, DDP-SSN 2, QN 0, MSN 2";
    assert!(peer_text.contains(want), "peer lacks {want:?}:\n{all}");
    // Every forgery dropped and counted by its reason (the `show ipsec` row of SA in 1000
    // ends in its numbers packets, bytes, replay, auth, malformed, expired, ovfl, copied).
    let row: Vec<u64> = server_text
        .lines()
        .find(|l| {
            let w: Vec<&str> = l.split_whitespace().take(2).collect();
            w == ["in", &SPI_C2S.to_string()]
        })
        .unwrap_or_else(|| panic!("no SA in {SPI_C2S} in show ipsec:\n{all}"))
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let (replay, auth, malformed) = (row[row.len() - 6], row[row.len() - 5], row[row.len() - 4]);
    let no_sa: u64 = server_text
        .split("dropped: ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no policy drops:\n{all}"));
    if case.attack_every == 0 {
        assert_eq!((replay, auth, malformed, no_sa), (0, 0, 0, 0), "{all}");
    } else {
        let rounds = u64::from(count_of(&gateway_text, "attacks", &all)) / 4;
        assert!(rounds >= 10, "{all}");
        assert_eq!(
            replay, rounds,
            "every replay refused (RFC 4303 §3.4.3):\n{all}"
        );
        assert_eq!(no_sa, rounds, "every unknown SPI refused (§3.4.2):\n{all}");
        assert_eq!(
            auth + malformed,
            2 * rounds,
            "every forgery refused (§3.4.4):\n{all}"
        );
    }
    // The gateway sealed every packet usrsctp sent and opened what ddpdk sent, none refused.
    let count = |what: &str| u64::from(count_of(&gateway_text, what, &all));
    assert!(count("sealed") > 700, "{all}");
    assert!(count("opened") > 100, "{all}");
    assert_eq!(count("dropped"), 0, "{all}");
    // RFC 4301 §6.2: the router's ICMP, through the SA, was taken (and none of it counted
    // as a policy mismatch, asserted above).
    let lowered: u64 = server_text
        .split("path MTU lowered by ICMP: ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no path MTU counts:\n{all}"));
    if case.too_big.is_some() {
        assert!(count("too_big") >= 1, "{all}");
        assert!(lowered >= 1, "the path MTU was not lowered:\n{all}");
    } else {
        assert_eq!((count("too_big"), lowered), (0, 0), "{all}");
    }

    // The protected wire: no SCTP in the clear, only ESP, in both directions. An ICMP error
    // the host's kernel sends quoting an SCTP header (for a packet that arrives after
    // usrsctp has closed its raw socket, say) is no SCTP packet: the gateway passes what is
    // not SCTP unchanged, and tshark dissects the quote. None may come from ddpdk (`#1`: the
    // outer header's source).
    let src_field = case.src_field();
    for filter in [
        "sctp && !icmp && !icmpv6".to_string(),
        format!("sctp && {src_field}#1 == {}", case.ddpdk()),
    ] {
        let clear = fields(&pcap, &filter, "frame.protocols");
        assert!(
            clear.is_empty(),
            "clear SCTP on the wire ({filter}): {clear:?}"
        );
    }
    let host = if case.tunnel { GATEWAY } else { case.host() };
    for (src, spi) in [(host, SPI_C2S), (case.ddpdk(), SPI_S2C)] {
        let esp = fields(&pcap, &format!("{src_field} == {src} && esp"), "esp.spi");
        assert!(esp.len() > 100, "{} ESP packets from {src}", esp.len());
        let theirs = |s: &String| u64::from_str_radix(s.trim_start_matches("0x"), 16);
        let forged = esp.iter().filter(|s| theirs(s) == Ok(0x0bad_0bad)).count();
        assert!(
            esp.iter()
                .all(|s| theirs(s) == Ok(u64::from(spi)) || theirs(s) == Ok(0x0bad_0bad)),
            "SPIs from {src}: {esp:?}"
        );
        assert_eq!(
            forged > 0,
            src == host && case.attack_every > 0,
            "{forged} forged"
        );
    }
    // With the keys, tshark opens it: SCTP with good CRC32c, DDP segments and session control
    // inside, both ways.
    // One `-o uat:esp_sa:RECORD` a direction: each option adds one record to the table.
    let (c2s, s2c) = (
        case.tshark_sa(host, case.ddpdk(), SPI_C2S, case.c2s_key),
        case.tshark_sa(case.ddpdk(), host, SPI_S2C, case.s2c_key),
    );
    let keys = [
        "-o",
        "esp.enable_encryption_decode:TRUE",
        "-o",
        &c2s,
        "-o",
        &s2c,
    ];
    // (An ICMP error quotes an SCTP packet cut short, whose checksum cannot verify.)
    let status = tshark::fields_with(&pcap, &keys, "sctp && !icmp", "sctp.checksum.status");
    assert!(
        status.len() > 800,
        "{} SCTP packets decrypted",
        status.len()
    );
    assert!(
        status.iter().all(|s| s == "1"),
        "a bad checksum: {status:?}"
    );
    for side in [case.host(), case.ddpdk()] {
        for ppid in ["16", "17"] {
            let n = tshark::fields_with(
                &pcap,
                &keys,
                &format!("{src_field} == {side} && sctp.data_payload_proto_id == {ppid}"),
                "sctp.data_payload_proto_id",
            );
            assert!(!n.is_empty(), "no PPID {ppid} DATA from {side} inside ESP");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 15 item 3, against Linux's own ESP: usrsctp on raw IP in a namespace whose kernel
/// seals and opens its SCTP with xfrm (AES-GCM-128, transport mode, a policy for SCTP each
/// way), ddpdk on the other end of the veth with the mirror SAs and a policy that refuses
/// clear SCTP. The same DDP exchange and checks as the scapy gateway's test. Where the kernel
/// has no ESP transform (this project's machines: `ip xfrm state add ... proto esp` answers
/// "Requested type not found"), the test says so and checks nothing else: its exchange has
/// never run here.
#[test]
fn ddpdk_with_esp_interoperates_with_linux_xfrm() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    assert!(
        unsafe_free_is_root(),
        "needs root: network namespaces, veths, xfrm and raw sockets"
    );
    let case = EspCase {
        algo: "aes-128-gcm",
        c2s_key: "2b7e151628aed2a6abf7158809cf4f3ccafebabe",
        s2c_key: "000102030405060708090a0b0c0d0e0f10111213",
        tunnel: false,
        attack_every: 0,
        v6: false,
        too_big: None,
    };
    let net = Net::new();
    let (host, ddpdk_ip) = (case.host(), case.ddpdk());
    // RFC 4106 keys as xfrm takes them: the AES key and the 4-byte salt, 128-bit ICV.
    let state = |src: &str, dst: &str, spi: u32, reqid: &str, key: &str| {
        Command::new("ip")
            .args([
                "-n", &net.ns, "xfrm", "state", "add", "src", src, "dst", dst,
            ])
            .args(["proto", "esp", "spi", &spi.to_string(), "reqid", reqid])
            .args(["mode", "transport", "aead", "rfc4106(gcm(aes))"])
            .args([&format!("0x{key}"), "128"])
            .output()
            .unwrap()
    };
    let probe = state(host, ddpdk_ip, SPI_C2S, "1", case.c2s_key);
    if !probe.status.success() {
        eprintln!(
            "skipped: this kernel has no ESP transform for xfrm ({}); the interop with \
             Linux's own ESP runs on a host whose kernel has it (esp4 and rfc4106)",
            String::from_utf8_lossy(&probe.stderr).trim()
        );
        return;
    }
    let o = state(ddpdk_ip, host, SPI_S2C, "2", case.s2c_key);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (src, dst, dir, reqid) in [(host, ddpdk_ip, "out", "1"), (ddpdk_ip, host, "in", "2")] {
        sh(&[
            "ip",
            "-n",
            &net.ns,
            "xfrm",
            "policy",
            "add",
            "src",
            &format!("{src}/32"),
            "dst",
            &format!("{dst}/32"),
            "proto",
            "132",
            "dir",
            dir,
            "tmpl",
            "src",
            src,
            "dst",
            dst,
            "proto",
            "esp",
            "reqid",
            reqid,
            "mode",
            "transport",
        ]);
    }
    let ddpdk = ddpdk_binary();
    let dir = std::env::temp_dir().join(format!("ddpdk-xfrm-{}", std::process::id()));
    fresh_dir(&dir);
    let pcap = dir.join("veth.pcap");
    let cmds = server_script(&dir, "show ipsec");
    let conf = dir.join("ipsec.conf");
    std::fs::write(&conf, case.ddpdk_config()).unwrap();
    let mut capture = start_capture(&net.ns, &net.peer_if, &pcap);
    let server_out = af_packet_server(
        &ddpdk,
        ("ddpdk-xfrm", ddpdk_ip),
        &net.dpdk_if,
        &["--ipsec-config".as_ref(), conf.as_os_str()],
        &cmds,
    );
    // Segments that leave room for ESP in the veth's 1500 bytes (the kernel would fragment
    // the ESP packet, which ddpdk does not reassemble).
    let peer = usrsctp_peer(&net.ns, &[host, ddpdk_ip, "1300"]);
    let (status, server_text) = server_out.join().unwrap();
    settle_and_stop(&pcap, &mut [&mut capture]);
    let peer_text = text(&peer);
    let all = format!("peer:\n{peer_text}\nddpdk:\n{server_text}");
    assert_protected_exchange(&peer, status, &peer_text, &server_text, &all);
    // Only ESP on the wire, each way under its SPI.
    assert!(
        fields(&pcap, "sctp", "frame.number").is_empty(),
        "clear SCTP on the wire"
    );
    for (src, spi) in [(host, SPI_C2S), (ddpdk_ip, SPI_S2C)] {
        let esp = fields(&pcap, &format!("ip.src == {src} && esp"), "esp.spi");
        assert!(esp.len() > 100, "{} ESP packets from {src}", esp.len());
        let want = format!("{spi:#010x}");
        assert!(esp.iter().all(|s| *s == want), "SPIs from {src}: {esp:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// What every protected exchange must show (`all` is both sides' output, for the message):
/// both ends succeeded, usrsctp saw the association, the session and their ends, ddpdk's
/// region holds byte for byte what usrsctp wrote, and no clear SCTP got past ddpdk's policy.
fn assert_protected_exchange(
    peer: &Output,
    status: std::process::ExitStatus,
    peer_text: &str,
    server_text: &str,
    all: &str,
) {
    assert!(peer.status.success(), "{all}");
    assert!(status.success(), "{all}");
    for want in [
        "adaptation indication 0x00000001",
        "session accepted: the peer offers STag",
        "session terminated",
        "association shut down",
    ] {
        assert!(peer_text.contains(want), "peer lacks {want:?}:\n{all}");
    }
    let written = peer_text
        .split("tagged messages: crc32c ")
        .nth(1)
        .and_then(|t| t.get(..10))
        .unwrap_or_else(|| panic!("no crc from the peer:\n{all}"));
    assert!(
        server_text.contains(&format!("crc32c {written} over 1048576 bytes")),
        "ddpdk's region is not what the peer wrote ({written}):\n{all}"
    );
    assert!(
        server_text.contains("0 clear where ESP is required, 0 not what"),
        "{all}"
    );
}

/// The number after `what ` in the gateway's closing line.
fn count_of(gateway_text: &str, what: &str, all: &str) -> u32 {
    gateway_text
        .split(&format!("{what} "))
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {what} count:\n{all}"))
}

/// Reads `child`'s stdout until `want`, then returns a thread with all it printed by its end.
fn wait_for_line_async(child: &mut Child, want: &str) -> std::thread::JoinHandle<String> {
    use std::io::BufRead;
    let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line).unwrap();
        if n == 0 {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            panic!("exited before {want:?}:\n{seen}\n{err}");
        }
        seen.push_str(&line);
        if line.contains(want) {
            break;
        }
    }
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut reader, &mut s);
        seen + &s
    })
}

/// Issue 16 item 2: ddpdk's test services (`--service`), each answering usrsctp over a veth:
/// `echo` on port 7 sends 300 messages of assorted sizes, streams and PPIDs back as they came;
/// `discard` on port 9 takes 100 and answers none; `daytime` on port 13 sends the time and
/// shuts the association down (RFC 867 over SCTP).
#[test]
fn ddpdk_test_services_answer_usrsctp_on_raw_ip() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    assert!(
        unsafe_free_is_root(),
        "needs root: network namespaces, veths and raw sockets"
    );
    let ddpdk = ddpdk_binary();
    let net = Net::new();
    let dir = std::env::temp_dir().join(format!("ddpdk-svc-{}", std::process::id()));
    fresh_dir(&dir);
    let cmds = dir.join("service.cmds");
    std::fs::write(&cmds, "wait closed 60\nshow fwd stats all\nquit\n").unwrap();
    for (service, port, count, want_peer) in [
        (
            "echo",
            "7",
            "300",
            "300 messages echoed: bytes, stream, PPID and U flag the same",
        ),
        (
            "discard",
            "9",
            "100",
            "100 messages sent, nothing came back",
        ),
        ("daytime", "13", "1", "the peer shut the association down"),
    ] {
        let extra: Vec<std::ffi::OsString> = ["--service", service, "--sctp-port", port]
            .iter()
            .map(Into::into)
            .collect();
        let extra: Vec<&std::ffi::OsStr> = extra.iter().map(|s| s.as_os_str()).collect();
        let server = af_packet_server(
            &ddpdk,
            (&format!("ddpdk-svc-{service}"), "198.18.2.2"),
            &net.dpdk_if,
            &extra,
            &cmds,
        );
        let peer = Command::new("ip")
            .args(["netns", "exec", &net.ns, PEER, "service", service])
            .args(["198.18.2.1", "198.18.2.2", port, count])
            .output()
            .unwrap();
        let (status, server_text) = server.join().unwrap();
        let peer_text = text(&peer);
        assert!(
            peer.status.success() && peer_text.contains(want_peer),
            "{service}: peer:\n{peer_text}\nddpdk:\n{server_text}"
        );
        assert!(status.success(), "{service}: ddpdk:\n{server_text}");
        assert!(
            server_text.contains(&format!(
                "Association 1 accepted from 198.18.2.1 port {port}"
            )) && server_text.contains("closed: shut down"),
            "{service}: ddpdk:\n{server_text}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 16 item 2: `--reconnect` keeps an association to its peer: usrsctp aborts each one as
/// it comes up, three times, and ddpdk opens the next a second after each ABORT.
#[test]
fn ddpdk_reassociates_after_each_abort_from_usrsctp() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    assert!(
        unsafe_free_is_root(),
        "needs root: network namespaces, veths and raw sockets"
    );
    let ddpdk = ddpdk_binary();
    let net = Net::new();
    let peer = Command::new("ip")
        .args(["netns", "exec", &net.ns, PEER, "service", "abort"])
        .args(["198.18.2.1", "7000", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let client = Command::new(&ddpdk)
        .args([
            "--lcores",
            "0@0,1@1",
            "--no-huge",
            "-m",
            "512",
            "--no-pci",
            "--log-level=*:error",
            &format!("--file-prefix=ddpdk-rec-{}", std::process::id()),
            &format!("--vdev=net_af_packet0,iface={},qpairs=2", net.dpdk_if),
            "--",
            "--ip",
            "198.18.2.2",
            "--sctp-port",
            "7000",
            "--reconnect",
            "198.18.2.1",
            "--run-for",
            "8",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let peer = peer.wait_with_output().unwrap();
    let (client_text, peer_text) = (text(&client), text(&peer));
    assert!(
        peer.status.success() && peer_text.contains("association 3 up, aborted"),
        "peer:\n{peer_text}\nddpdk:\n{client_text}"
    );
    assert!(client.status.success(), "ddpdk:\n{client_text}");
    for k in 1..=3 {
        assert!(
            client_text.contains(&format!(
                "Association {k} with 198.18.2.1 port 7000 closed: the peer sent ABORT"
            )),
            "association {k}:\n{client_text}"
        );
    }
}
