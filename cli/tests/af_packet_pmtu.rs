//! Path MTU discovery from a real router's ICMP (RFC 9260 §7.3, Appendix C; RFC 1191): two
//! ddpdk endpoints on `net_af_packet`, each on a veth whose other end belongs to the kernel of
//! a network namespace of the test's own, which routes between them (`ip_forward=1`, proxy
//! ARP so that both ends stay on one /24 without a gateway). The client's side of the router
//! is MTU 1500, the server's 1400: the client's full-size DF packets are dropped by the kernel,
//! which answers with ICMP Fragmentation Needed (Next-Hop MTU 1400). A perf transfer at
//! `--mtu 1500` completes with every write delivered because that ICMP lowered the path MTU
//! (and the chunks already in flight went again without DF and were fragmented by the
//! router, RFC 9260 §6.9; the server's kernel joins them again before ddpdk sees them, see
//! `assert_chunks_in_flight_crossed_as_fragments`).
//!
//! The IPv6 variant: the router forwards IPv6 (`forwarding=1`, proxy NDP in place of proxy
//! ARP), answers with ICMPv6 Packet Too Big (MTU 1400, RFC 4443 §3.2), and never fragments
//! (RFC 8200 §5): the chunks in flight go again as the client's own IPv6 fragments (RFC 8200
//! §4.5), which Linux forwards unchanged and the server reassembles.
//!
//! The same under ESP in transport mode (RFC 4301 §8.2): the router's ICMP then quotes the ESP
//! packet, which the client maps by its SPI to its outbound SA (§6.1.2); the SA's PMTU is
//! propagated to the association, and the ESP fragments of the chunks already in flight are
//! reassembled before the server's SA opens them (RFC 4303 §3.4.1; over af_packet, by the
//! kernel, as for clear IPv4).

use std::process::{Command, Output};
use std::sync::Mutex;

#[path = "common/esp.rs"]
#[allow(dead_code)] // its key manager's side is for tests/ipsec.rs
mod esp;
#[path = "common/procs.rs"]
mod procs;

const BIN: &str = env!("CARGO_BIN_EXE_ddpdk");
/// The cases run one at a time: each pins two processes to the machine's two CPUs.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The namespaces (router, client, server), removed (with their veths) however the test
/// ends.
struct Net {
    ns: [String; 3],
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// A process killed if the test ends before it does (it would hold the namespace).
struct Running(Option<std::process::Child>);

impl Running {
    fn finish(mut self) -> Output {
        self.0
            .take()
            .expect("running")
            .wait_with_output()
            .expect("wait")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// `ip netns exec NS ddpdk` on `iface` (af_packet), lcores `lcores`, with `app`.
fn ddpdk(ns: &str, iface: &str, lcores: &str, app: &[&str]) -> std::process::Child {
    let pid = std::process::id();
    let mut eal: Vec<String> = ["netns", "exec", ns, BIN, "--lcores", lcores]
        .iter()
        .map(|s| s.to_string())
        .collect();
    eal.extend([
        "--no-huge".into(),
        "-m".into(),
        "1024".into(),
        "--no-pci".into(),
        "--log-level=*:error".into(),
        format!("--file-prefix={ns}-{iface}-{pid}"),
        format!("--vdev=net_af_packet0,iface={iface}"),
    ]);
    procs::spawn("ip", &eal, app)
}

/// The client's and the server's addresses, IPv6's or IPv4's.
fn addresses(v6: bool) -> (&'static str, &'static str) {
    if v6 {
        ("2001:db8::1", "2001:db8::2")
    } else {
        ("198.18.0.1", "198.18.0.2")
    }
}

/// The client | router | server namespaces, the router's server side at MTU 1400, routing
/// IPv6 too with `v6`; `tag` names them.
fn routed(tag: &str, v6: bool) -> Net {
    let id = Command::new("id").arg("-u").output().expect("id");
    assert_eq!(
        String::from_utf8_lossy(&id.stdout).trim(),
        "0",
        "this test makes a network namespace: run it as root"
    );
    let pid = std::process::id();
    let net = Net {
        ns: ["r", "a", "b"].map(|k| format!("ddpdk-{tag}-{k}-{pid}")),
    };
    let [r, na, nb] = [0, 1, 2].map(|k| net.ns[k].as_str());
    let sh = |args: &[&str]| {
        let o = Command::new("ip").args(args).output().expect("ip");
        assert!(o.status.success(), "ip {args:?}: {}", text(&o));
    };
    for ns in &net.ns {
        sh(&["netns", "add", ns]);
    }
    // Client (ddpdk on `pa`, namespace a) | `ra` router `rb` | (ddpdk on `pb`, b) server.
    sh(&[
        "-n", r, "link", "add", "pa", "type", "veth", "peer", "name", "ra",
    ]);
    sh(&[
        "-n", r, "link", "add", "pb", "type", "veth", "peer", "name", "rb",
    ]);
    sh(&["-n", r, "link", "set", "pa", "netns", na]);
    sh(&["-n", r, "link", "set", "pb", "netns", nb]);
    ex(r, &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    if v6 {
        ex(r, &["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]);
        ex(r, &["sysctl", "-qw", "net.ipv6.conf.all.proxy_ndp=1"]);
    }
    ex(r, &["sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0"]);
    for (ns, dev, mtu) in [
        (na, "pa", "1500"),
        (r, "ra", "1500"),
        (nb, "pb", "1500"),
        (r, "rb", "1400"),
    ] {
        // The endpoints' kernels stay out of IPv6 (ddpdk answers for its address); the router
        // runs it when the test is IPv6's.
        let off = if v6 && ns == r { 0 } else { 1 };
        ex(
            ns,
            &[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{dev}.disable_ipv6={off}"),
            ],
        );
        sh(&["-n", ns, "link", "set", dev, "mtu", mtu, "up"]);
    }
    // The router: an address on each side (the client's side's is the ICMP's source), a
    // host route to each endpoint, and proxy ARP so each endpoint reaches the other through
    // it as if on one link.
    sh(&["-n", r, "addr", "add", "198.18.0.254/32", "dev", "ra"]);
    sh(&["-n", r, "addr", "add", "198.18.0.253/32", "dev", "rb"]);
    sh(&["-n", r, "route", "add", "198.18.0.1/32", "dev", "ra"]);
    sh(&["-n", r, "route", "add", "198.18.0.2/32", "dev", "rb"]);
    for dev in ["ra", "rb"] {
        ex(
            r,
            &["sysctl", "-qw", &format!("net.ipv4.conf.{dev}.proxy_arp=1")],
        );
        ex(
            r,
            &["sysctl", "-qw", &format!("net.ipv4.conf.{dev}.rp_filter=0")],
        );
    }
    if v6 {
        // The same with IPv6: an address each side (no duplicate address detection to wait
        // out), host routes, and proxy NDP for each endpoint on the other's side.
        for (dev, ours, behind, other) in [
            ("ra", "2001:db8::fe/128", "2001:db8::1/128", "2001:db8::2"),
            ("rb", "2001:db8::fd/128", "2001:db8::2/128", "2001:db8::1"),
        ] {
            ex(
                r,
                &["sysctl", "-qw", &format!("net.ipv6.conf.{dev}.proxy_ndp=1")],
            );
            sh(&["-n", r, "-6", "addr", "add", ours, "dev", dev, "nodad"]);
            sh(&["-n", r, "-6", "route", "add", behind, "dev", dev]);
            sh(&["-n", r, "-6", "neigh", "add", "proxy", other, "dev", dev]);
        }
    }
    net
}

/// `ip netns exec NS ARGS`'s output, which must succeed.
fn ex(ns: &str, args: &[&str]) -> String {
    let o = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .output()
        .expect("ip netns exec");
    assert!(o.status.success(), "{args:?}: {}", text(&o));
    text(&o)
}

/// Runs a server and then a 3-second perf client at `--mtu 1500` across `net`'s router, over
/// IPv6 with `v6`, each with `extra` arguments; returns the client's and the server's output.
fn transfer(net: &Net, v6: bool, server_extra: &[&str], client_extra: &[&str]) -> [Output; 2] {
    let [_, na, nb] = [0, 1, 2].map(|k| net.ns[k].as_str());
    let (client_ip, server_ip) = addresses(v6);
    let mut server_app = vec![
        "--ddp-listen",
        "--ip",
        server_ip,
        "--json",
        "--run-for",
        "60",
        "--mtu",
        "1500",
    ];
    server_app.extend(server_extra);
    let mut server = ddpdk(nb, "pb", "0@0", &server_app);
    let stderr = server.stderr.take().expect("stderr");
    let server = Running(Some(server));
    let (head, rest) = procs::read_until(stderr, "the server", |l| l.contains("(listening)"));
    let mut client_app = vec![
        "--ddp-connect",
        server_ip,
        "--ip",
        client_ip,
        "--run-for",
        "3",
        "--json",
        "--mtu",
        "1500",
    ];
    client_app.extend(client_extra);
    let client = ddpdk(na, "pa", "0@1", &client_app)
        .wait_with_output()
        .expect("client");
    let mut server = server.finish();
    // The lines read while waiting for the listener go back in front of the rest.
    let server_text = head + &rest.join().unwrap_or_default();
    server.stderr = [server_text.into_bytes(), server.stderr].concat();
    [client, server]
}

/// The router sent ICMP Destination Unreachable (RFC 1191 §4's Fragmentation Needed) or,
/// with `v6`, ICMPv6 Packet Too Big (RFC 4443 §3.2), which is what lowered the client's path
/// MTU: /proc/net/snmp{,6} is the router namespace's own.
fn assert_router_sent_icmp(net: &Net, v6: bool) {
    if v6 {
        let snmp6 = ex(&net.ns[0], &["cat", "/proc/net/snmp6"]);
        let too_big = snmp6
            .lines()
            .filter_map(|l| l.split_once(char::is_whitespace))
            .find(|(n, _)| *n == "Icmp6OutPktTooBigs")
            .and_then(|(_, v)| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        assert!(too_big > 0, "the router sent no Packet Too Big:\n{snmp6}");
        return;
    }
    let snmp = ex(&net.ns[0], &["cat", "/proc/net/snmp"]);
    let icmp: Vec<&str> = snmp.lines().filter(|l| l.starts_with("Icmp:")).collect();
    let (names, values) = (icmp[0].split_whitespace(), icmp[1].split_whitespace());
    let unreach = names
        .zip(values)
        .find(|(n, _)| *n == "OutDestUnreachs")
        .and_then(|(_, v)| v.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(unreach > 0, "the router sent no ICMP:\n{snmp}");
}

/// A clear transfer through the router, over IPv6 with `v6`: every write is delivered and
/// the router sent its ICMP.
fn through_a_kernel_router(tag: &str, v6: bool) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let net = routed(tag, v6);
    let [client, server] = transfer(&net, v6, &[], &[]);
    let (client_text, server_text) = (text(&client), text(&server));
    procs::every_write_delivered(&client, &client_text, &server, &server_text, 100);
    assert_router_sent_icmp(&net, v6);
    assert_chunks_in_flight_crossed_as_fragments(&net, &client_text, &server_text, v6);
}

/// The sum over `report`'s data cores of `field`, in the process's JSON output.
fn cores_sum(out: &str, report: &str, field: &str) -> u64 {
    json_of(out, report)["cores"].as_array().map_or(0, |cores| {
        cores.iter().filter_map(|c| c[field].as_u64()).sum()
    })
}

/// RFC 9260 §6.9 and §7.3: ICMP lowered the client's path MTU, and the DATA chunks it had
/// already sent at full size crossed the 1400-byte hop as IP fragments. Without this the
/// transfer could complete for reasons of its own and the test would prove nothing about
/// fragments. Over IPv6 the client cut them itself (RFC 8200 §4.5) and the server
/// reassembled them. Over IPv4 the router cut them (the router's `FragCreates`: the client
/// sent them without DF) and the kernel put them together again before ddpdk saw them: DPDK's
/// af_packet PMD joins its queues' sockets in a fanout group with PACKET_FANOUT_FLAG_DEFRAG,
/// and the kernel defragments IPv4 for such a group. ddpdk's own IPv4 reassembly is proven in
/// memory (`control/tests/runtime_pmtu.rs`).
fn assert_chunks_in_flight_crossed_as_fragments(net: &Net, client: &str, server: &str, v6: bool) {
    let lowered = cores_sum(client, "ddp_goodput", "pmtu_lowered")
        + cores_sum(client, "ddp_goodput", "esp_pmtu_lowered");
    assert!(lowered > 0, "no path MTU lowered at the client:\n{client}");
    assert_fragments_crossed(net, client, server, v6);
}

/// The chunks sent at full size before the path MTU fell crossed the hop as IP fragments: cut
/// by the client (IPv6) and reassembled by the server, or cut by the router (IPv4).
fn assert_fragments_crossed(net: &Net, client: &str, server: &str, v6: bool) {
    if v6 {
        let cut = cores_sum(client, "ddp_goodput", "ip_source_fragmented");
        assert!(cut > 0, "the client cut no source fragments:\n{client}");
        let whole = cores_sum(server, "ddp_server", "ip_reassembled");
        assert!(whole > 0, "the server reassembled nothing:\n{server}");
        return;
    }
    let snmp = ex(&net.ns[0], &["cat", "/proc/net/snmp"]);
    let ip: Vec<&str> = snmp.lines().filter(|l| l.starts_with("Ip:")).collect();
    let created = ip[0]
        .split_whitespace()
        .zip(ip[1].split_whitespace())
        .find(|(n, _)| *n == "FragCreates")
        .and_then(|(_, v)| v.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(created > 0, "the router fragmented nothing:\n{snmp}");
}

#[test]
fn a_kernel_routers_fragmentation_needed_rescues_a_transfer_rfc9260_7_3() {
    through_a_kernel_router("pmtu", false);
}

/// RFC 8201 §4, RFC 9260 §6.9 and §7.3, RFC 8200 §4.5: the same over IPv6.
#[test]
fn a_kernel_routers_packet_too_big_rescues_a_transfer_with_source_fragments_rfc8200_4_5() {
    through_a_kernel_router("pmtu6", true);
}

/// RFC 8899 §4.3 against a real router that says nothing: the Linux router's own ICMP is
/// routed into a blackhole (`ip rule ... ipproto icmp`, as a firewall filtering it would), so
/// the client's full-size packets vanish at the 1400-byte hop unexplained. Before RFC 8899
/// discovery the association retransmitted them until it failed. Now three T3-rtx expiries in
/// a row take its path MTU to 1200, the chunks already sent cross as fragments, and every
/// write is delivered.
fn through_a_silent_kernel_router(tag: &str, v6: bool) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let net = routed(tag, v6);
    let r = net.ns[0].as_str();
    let (family, icmp) = if v6 {
        ("-6", "ipv6-icmp")
    } else {
        ("-4", "icmp")
    };
    for args in [
        &[
            family, "rule", "add", "ipproto", icmp, "lookup", "100", "pref", "10",
        ][..],
        &[
            family,
            "route",
            "add",
            "blackhole",
            "default",
            "table",
            "100",
        ][..],
    ] {
        let o = Command::new("ip")
            .args(["-n", r])
            .args(args)
            .output()
            .expect("ip");
        assert!(o.status.success(), "ip {args:?}: {}", text(&o));
    }
    let [client, server] = transfer(&net, v6, &[], &[]);
    let (client_text, server_text) = (text(&client), text(&server));
    procs::every_write_delivered(&client, &client_text, &server, &server_text, 100);
    let heard = cores_sum(&client_text, "ddp_goodput", "pmtu_lowered");
    assert_eq!(heard, 0, "an ICMP reached the client:\n{client_text}");
    let holes = cores_sum(&client_text, "ddp_goodput", "plpmtud_black_holes");
    assert!(holes >= 1, "no black hole found:\n{client_text}");
    let probes = cores_sum(&client_text, "ddp_goodput", "plpmtud_probes");
    assert!(probes >= 1, "no probe sent:\n{client_text}");
    assert_fragments_crossed(&net, &client_text, &server_text, v6);
}

#[test]
fn a_silent_kernel_router_is_found_as_a_black_hole_rfc8899_4_3() {
    through_a_silent_kernel_router("bhole", false);
}

#[test]
fn a_silent_kernel_router_is_found_as_a_black_hole_over_ipv6_rfc8899_4_3() {
    through_a_silent_kernel_router("bhole6", true);
}

/// The JSON object of `key` among the process's JSON lines.
fn json_of(out: &str, key: &str) -> serde_json::Value {
    out.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v.get(key).cloned())
        .unwrap_or_else(|| panic!("no {key} report in:\n{out}"))
}

/// RFC 4301 §8.2 with §6.1.2 and RFC 4303 §3.4.1: both ends run ESP (AES-GCM, transport mode,
/// SCTP only through the SAs). The router's Fragmentation Needed quotes the client's ESP
/// packet; the client believes it for its outbound SA 1000 (SPI, addresses, a sequence
/// number the SA sent), records the PMTU on the SA and lowers the association's path MTU to
/// 1400 less ESP and the IP header. The chunks already in flight go again without DF (the
/// SA's transport-mode header is the SCTP packet's own), are fragmented by the router, and
/// are reassembled by the server before its SA opens them. Every write is delivered, the SA
/// shows the PMTU, and no packet failed its ICV.
#[test]
fn a_kernel_routers_fragmentation_needed_quoting_esp_rescues_a_transfer_rfc4301_8_2() {
    esp_through_a_kernel_router("esppmtu", false);
}

/// The same over IPv6, under RFC 4301 §5's default (what no policy names is discarded): the
/// Neighbor Solicitations and Advertisements between each end and the Linux router, and the
/// router's Packet Too Big quoting the client's ESP, name no policy and must pass. The SA
/// records the PMTU and the transfer completes; no packet fails its ICV.
#[test]
fn a_kernel_routers_packet_too_big_quoting_esp_rescues_a_transfer_over_ipv6_rfc4301_8_2() {
    esp_through_a_kernel_router("esppmtu6", true);
}

/// The rules of `tests/common/esp.rs` (IPv4), for IPv6 with `v6`.
fn esp_rules(rules: Vec<String>, v6: bool) -> Vec<String> {
    let (c, s) = addresses(v6);
    rules
        .into_iter()
        .map(|r| {
            if v6 {
                r.replace("sp ipv4", "sp ipv6")
                    .replace("198.18.0.1/32", &format!("{c}/128"))
                    .replace("198.18.0.2/32", &format!("{s}/128"))
            } else {
                r
            }
        })
        .collect()
}

fn esp_through_a_kernel_router(tag: &str, v6: bool) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let net = routed(tag, v6);
    let dir = std::env::temp_dir().join(format!("ddpdk-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    struct Gone(std::path::PathBuf);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let dir = Gone(dir);
    let sconf = dir.0.join("server.conf");
    let cconf = dir.0.join("client.conf");
    std::fs::write(&sconf, esp::file_text(&esp_rules(esp::server_rules(), v6))).expect("write");
    std::fs::write(&cconf, esp::file_text(&esp_rules(esp::client_rules(), v6))).expect("write");
    let [client, server] = transfer(
        &net,
        v6,
        &["--ipsec-config", sconf.to_str().expect("utf-8")],
        &["--ipsec-config", cconf.to_str().expect("utf-8")],
    );
    let (client_text, server_text) = (text(&client), text(&server));
    procs::every_write_delivered(&client, &client_text, &server, &server_text, 100);
    assert_router_sent_icmp(&net, v6);
    if !v6 {
        assert_chunks_in_flight_crossed_as_fragments(&net, &client_text, &server_text, false);
    }
    let cipsec = json_of(&String::from_utf8_lossy(&client.stdout), "ipsec");
    let sipsec = json_of(&String::from_utf8_lossy(&server.stdout), "ipsec");
    let sa = |ipsec: &serde_json::Value, dir: &str, spi: u64| {
        ipsec["sas"]
            .as_array()
            .and_then(|sas| {
                sas.iter()
                    .find(|s| s["direction"] == dir && s["spi"] == spi)
            })
            .cloned()
            .unwrap_or_else(|| panic!("no SA {dir} {spi}: {ipsec}"))
    };
    let out = sa(&cipsec, "out", 1000);
    assert_eq!(out["path_mtu"], 1400, "the client's SA: {cipsec}");
    assert!(
        out["counts"]["pmtu_accepted"].as_u64() > Some(0),
        "the client's SA: {cipsec}"
    );
    assert_eq!(cipsec["drops"]["pmtu_rejected"], 0, "{cipsec}");
    for (ipsec, dir, spi) in [(&cipsec, "in", 2000), (&sipsec, "in", 1000)] {
        let s = sa(ipsec, dir, spi);
        assert_eq!(s["counts"]["auth_failed"], 0, "{s}");
        assert!(s["counts"]["packets"].as_u64() > Some(0), "{s}");
    }
}
