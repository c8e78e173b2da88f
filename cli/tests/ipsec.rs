//! IPsec on the shipped endpoint (issue 15, RFC 5043 §13): two `ddpdk` processes over
//! `net_memif` whose SCTP travels only as ESP, a clear peer refused, a key manager that
//! installs the SAs through `--ipsec-socket`, and the shell's `ipsec` commands.
//!
//! The cases run one at a time: each pins two processes to the machine's two CPUs.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[path = "common/esp.rs"]
mod esp;
#[path = "common/procs.rs"]
mod procs;

use esp::{client_rules, connect, km, server_rules, K_C2S, K_S2C};

const BIN: &str = env!("CARGO_BIN_EXE_ddpdk");
const EXPORTER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../deploy/prometheus/ddpdk-exporter.py"
);
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A directory of this test's own, removed at the end.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("ddpdk-ipsec-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir");
        Dir(d)
    }

    fn file(&self, name: &str, body: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, body).expect("write");
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ddpdk(dir: &Dir, role: &str, lcores: &str, app: &[&str]) -> Command {
    let prefix = format!("ddpdk-ipsec-{role}-{}", std::process::id());
    let mut eal = procs::memif_eal(role, lcores, &prefix, &dir.0.join("memif.sock"), 512, false);
    // Jumbo frames (`--mtu` over 1500) travel in memif buffers that hold a whole frame.
    let jumbo = app
        .windows(2)
        .any(|w| w[0] == "--mtu" && w[1].parse::<u16>().is_ok_and(|m| m > 1500));
    if jumbo {
        for a in eal.iter_mut().filter(|a| a.starts_with("--vdev=")) {
            a.push_str(",bsize=9216");
        }
    }
    let mut c = Command::new(BIN);
    c.args(&eal).arg("--").args(app);
    c.stdin(Stdio::null());
    c
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// The JSON object of `key` among the process's JSON lines.
fn json_of(out: &str, key: &str) -> serde_json::Value {
    out.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v.get(key).cloned())
        .unwrap_or_else(|| panic!("no {key} report in:\n{out}"))
}

/// A finished process's stdout and stderr, as text.
fn outputs(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The packets through SA `spi` in `direction` of a `show ipsec` JSON report.
fn sa_packets(ipsec: &serde_json::Value, direction: &str, spi: u64) -> u64 {
    ipsec["sas"]
        .as_array()
        .and_then(|sas| {
            sas.iter()
                .find(|s| s["direction"] == direction && s["spi"] == spi)
        })
        .and_then(|s| s["counts"]["packets"].as_u64())
        .unwrap_or_else(|| panic!("no SA {direction} {spi}: {ipsec}"))
}

fn assert_no_drops(ipsec: &serde_json::Value) {
    for (why, n) in ipsec["drops"].as_object().expect("drops") {
        assert_eq!(n, 0, "{why}: {ipsec}");
    }
    for sa in ipsec["sas"].as_array().expect("sas") {
        for why in [
            "replay",
            "auth_failed",
            "malformed",
            "expired",
            "no_room",
            "stalled",
        ] {
            assert_eq!(sa["counts"][why], 0, "{why}: {sa}");
        }
    }
}

/// Starts the server (`--ddp-listen` on 198.18.0.2 with `extra`, 30 s unless `extra` says
/// otherwise), waits until its stderr
/// shows `ready`, and returns it with what it printed so far and the reader of the rest.
fn server(
    dir: &Dir,
    extra: &[&str],
    ready: &str,
) -> (Child, String, std::thread::JoinHandle<String>) {
    let mut args = vec!["--ddp-listen", "--ip", "198.18.0.2"];
    if !extra.contains(&"--run-for") {
        args.extend(["--run-for", "30"]);
    }
    args.extend(["--region-bytes", "1048576", "--json"]);
    args.extend_from_slice(extra);
    let mut s = ddpdk(dir, "server", "0@0", &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("server");
    let ready = ready.to_owned();
    let (head, rest) =
        procs::read_until(s.stderr.take().expect("stderr"), "the server", move |l| {
            l.contains(&ready)
        });
    (s, head, rest)
}

/// The client: a second of 16 KiB tagged writes into the server's offered region.
fn client(dir: &Dir, extra: &[&str]) -> Command {
    let mut args = vec![
        "--ddp-connect",
        "198.18.0.2",
        "--ip",
        "198.18.0.1",
        "--run-for",
        "1",
        "--ddp-size",
        "16384",
        "--json",
    ];
    args.extend_from_slice(extra);
    ddpdk(dir, "client", "0@1", &args)
}

/// Checks a transfer between an IPsec client and server: both exit 0, the bytes the server
/// placed are the bytes the client wrote, and every packet went through the SAs, none dropped.
fn assert_protected_transfer(c: &Output, s: &Output, server_err: &str) {
    let (ctext, stext) = (text(c), text(s) + server_err);
    assert_eq!(c.status.code(), Some(0), "client:\n{ctext}");
    assert_eq!(s.status.code(), Some(0), "server:\n{stext}");
    let cout = String::from_utf8_lossy(&c.stdout);
    let report = json_of(&cout, "ddp_goodput");
    let messages = report["messages"].as_u64().unwrap_or(0);
    assert!(messages > 0, "{report}");
    let crc = report["region_crc32c"].as_str().unwrap_or("none");
    assert!(
        stext.contains(&format!("crc32c {crc} over {} bytes", report["region_len"])),
        "the server's region is not what the client wrote ({crc}):\n{stext}"
    );
    // Every DATA packet left through SA out 1000 and arrived through SA in 1000 (a 16 KiB
    // write is at least 2 segments, one a packet); the SACKs came back through SA 2000.
    let cipsec = json_of(&cout, "ipsec");
    let sipsec = json_of(&String::from_utf8_lossy(&s.stdout), "ipsec");
    let sent = sa_packets(&cipsec, "out", 1000);
    let data_out = report["sctp"]["packets_out"].as_u64().unwrap_or(0);
    assert!(
        sent >= data_out && data_out >= messages * 2,
        "{report}\n{cipsec}"
    );
    assert!(sa_packets(&sipsec, "in", 1000) >= data_out, "{sipsec}");
    assert!(sa_packets(&cipsec, "in", 2000) > 0, "{cipsec}");
    // Issue 15 item 1: the client sends its region by reference, and AES-GCM seals those
    // frames where they lie (out of place): not one was copied before the crypto.
    assert!(
        report["spans_by_reference"].as_u64().unwrap_or(0) > 0,
        "the client sent no zero-copy frame: {report}"
    );
    let out_sa = cipsec["sas"]
        .as_array()
        .and_then(|sas| {
            sas.iter()
                .find(|s| s["direction"] == "out" && s["spi"] == 1000)
        })
        .unwrap_or_else(|| panic!("no SA out 1000: {cipsec}"));
    assert_eq!(
        out_sa["counts"]["copied"], 0,
        "copied before sealing: {out_sa}"
    );
    assert_no_drops(&cipsec);
    assert_no_drops(&sipsec);
}

/// A server and a client with mirror configurations (AES-GCM-128, transport mode, SCTP
/// selectors), each with `extra` options: the transfer is checked by
/// [`assert_protected_transfer`]; returns the server's stderr.
fn protected_pair(tag: &str, extra: &[&str]) -> String {
    let dir = Dir::new(tag);
    let sconf = dir.file("server.conf", &esp::file_text(&server_rules()));
    let cconf = dir.file("client.conf", &esp::file_text(&client_rules()));
    let with = |conf: &Path| -> Vec<String> {
        ["--ipsec-config", conf.to_str().expect("utf-8")]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    let (sargs, cargs) = (with(&sconf), with(&cconf));
    let sargs: Vec<&str> = sargs.iter().map(String::as_str).collect();
    let cargs: Vec<&str> = cargs.iter().map(String::as_str).collect();
    let (s, head, rest) = server(&dir, &sargs, "(listening)");
    let c = client(&dir, &cargs).output().expect("client");
    let s = s.wait_with_output().expect("server");
    let serr = head + &rest.join().expect("server stderr");
    assert_protected_transfer(&c, &s, &serr);
    serr
}

/// RFC 5043 §13: two endpoints, each with the other's mirror configuration, move tagged
/// writes byte-exact; every packet of the association went through ESP; the path MTU left
/// room for it.
#[test]
fn tagged_writes_between_two_processes_travel_as_esp_5043_13() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let serr = protected_pair("pair", &[]);
    assert!(
        serr.contains("37 bytes of each packet left for ESP"),
        "{serr}"
    );
    // The rules guard IPv4 with a catch-all discard, and IPv6 not at all: RFC 4301 §5's
    // default discards what no policy names, so neither family takes clear SCTP, and the
    // operator is told what the default does.
    assert!(
        serr.contains("IP traffic no policy names is discarded (RFC 4301 §5)")
            && !serr.contains("clear ipv6 SCTP")
            && !serr.contains("clear ipv4 SCTP")
            && !serr.contains("no policy protects with SA"),
        "{serr}"
    );
}

/// RFC 5043 §9 with ESP: at MTU 9000 a full segment's packet, sealed, still fits its frame
/// and the mbuf it is sealed in (rte_ipsec writes scratch past the ICV while it seals): a
/// transfer of zero-copy writes moves byte-exact with nothing dropped for want of room.
/// Issue 15 item 1: the same pair on a crypto device without CPU crypto (`crypto_openssl`,
/// standing in for a hardware lookaside device): every packet goes through crypto ops, the
/// client's zero-copy frames sealed out of place; byte-exact, every packet through ESP, none
/// dropped, none copied.
#[test]
fn a_lookaside_crypto_device_carries_the_pair_5043_13() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    protected_pair("openssl", &["--ipsec-crypto-dev", "crypto_openssl0"]);
}

#[test]
fn jumbo_frames_leave_room_for_esp_5043_9() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    protected_pair("jumbo", &["--mtu", "9000"]);
}

/// RFC 5043 §13, RFC 4301 §5.2: SCTP that policy says must arrive protected and arrives in the
/// clear is dropped and counted; no association comes up, nothing is placed.
#[test]
fn clear_sctp_to_a_protected_endpoint_is_refused_and_counted_4301_5_2() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Dir::new("clear");
    let sconf = dir.file("server.conf", &esp::file_text(&server_rules()));
    let (s, head, rest) = server(
        &dir,
        &[
            "--ipsec-config",
            sconf.to_str().expect("utf-8"),
            "--run-for",
            "6",
        ],
        "(listening)",
    );
    let mut c = client(&dir, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("client");
    // What IPsec drops never reaches a data core: the telemetry socket and the Prometheus
    // exporter show it under ipsec (before: nowhere, every drop counter 0).
    let prefix = format!("ddpdk-ipsec-server-{}", std::process::id());
    let deadline = Instant::now() + Duration::from_secs(4);
    let stats = loop {
        let r = procs::ask(&prefix, &["/ddpdk/stats"]);
        let stats = procs::value(&r[0], "/ddpdk/stats").clone();
        if stats["ipsec/drop/clear_refused"].as_u64().unwrap_or(0) >= 1 || Instant::now() > deadline
        {
            break stats;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        stats["ipsec/drop/clear_refused"].as_u64().unwrap_or(0) >= 1,
        "{stats}"
    );
    assert_eq!(stats["ipsec/sas"], 2, "{stats}");
    assert_eq!(stats["ipsec/in/packets"], 0, "{stats}");
    let exported = Command::new("python3")
        .args([EXPORTER, "--file-prefix", &prefix, "--once"])
        .output()
        .expect("the exporter");
    let metrics = String::from_utf8_lossy(&exported.stdout);
    let refused = metrics
        .lines()
        .find_map(|l| l.strip_prefix("ddpdk_ipsec_drops_total{reason=\"clear_refused\"} "))
        .and_then(|v| v.trim().parse::<f64>().ok());
    assert!(
        refused.is_some_and(|n| n >= 1.0),
        "{metrics}{}",
        String::from_utf8_lossy(&exported.stderr)
    );
    assert!(
        metrics.contains("ddpdk_ipsec_packets_total{direction=\"in\"} 0"),
        "{metrics}"
    );
    let s = s.wait_with_output().expect("server");
    // The client would retry its INIT until its own time-out; the server has made its point.
    let _ = c.kill();
    let _ = c.wait();
    let serr = head + &rest.join().expect("server stderr");
    let sout = String::from_utf8_lossy(&s.stdout).into_owned();
    assert_eq!(s.status.code(), Some(0), "server:\n{sout}\n{serr}");
    let ipsec = json_of(&sout, "ipsec");
    let refused = ipsec["drops"]["clear_refused"].as_u64().unwrap_or(0);
    assert!(refused >= 1, "the client's INITs are refused: {ipsec}");
    assert_eq!(sa_packets(&ipsec, "in", 1000), 0, "{ipsec}");
    assert!(!serr.contains("Association accepted"), "{serr}");
    assert!(
        serr.contains("server: 0 tagged messages delivered"),
        "{serr}"
    );
}

/// RFC 4301 §5: "If no policy is found in the SPD that matches a packet (for either inbound
/// or outbound traffic), the packet MUST be discarded." A client with IPsec on and no policy
/// yet sends nothing to a server in the clear: its INITs are discarded on the way out and
/// counted, and it says that no policy names them (before: they went out in the clear and the
/// association came up unprotected). With `--ipsec-default bypass`, the operator's choice,
/// the same pair moves its writes in the clear.
#[test]
fn a_client_with_no_policy_sends_nothing_in_the_clear_4301_5() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Dir::new("nopolicyout");
    let (mut s, _head, _rest) = server(&dir, &[], "(listening)");
    let c = client(&dir, &["--ipsec"]).output().expect("client");
    let (cout, cerr) = outputs(&c);
    assert_eq!(c.status.code(), Some(1), "{cout}{cerr}");
    assert!(
        cerr.contains("that no policy names (RFC 4301 §5 discards them)"),
        "{cerr}"
    );
    let ipsec = json_of(&cout, "ipsec");
    assert!(
        ipsec["drops"]["no_policy_out"].as_u64() >= Some(1),
        "the INITs: {ipsec}"
    );
    assert_eq!(ipsec["no_policy"], "discard", "{ipsec}");
    // The same server, a client that lets what no policy names pass.
    let c = client(&dir, &["--ipsec", "--ipsec-default", "bypass"])
        .output()
        .expect("client");
    let _ = s.kill();
    let _ = s.wait();
    let (cout, cerr) = outputs(&c);
    assert_eq!(c.status.code(), Some(0), "{cout}{cerr}");
    let report = json_of(&cout, "ddp_goodput");
    assert!(report["messages"].as_u64() > Some(0), "{report}");
    let ipsec = json_of(&cout, "ipsec");
    assert_eq!(ipsec["drops"]["no_policy_out"], 0, "{ipsec}");
    assert_eq!(ipsec["no_policy"], "bypass", "{ipsec}");
}

/// A client whose outbound key is not the server's: the server drops its ESP as failing the
/// ICV (RFC 4303 §3.4.4), so no association comes up. The client says that IPsec is where it
/// went wrong, with its counts, and prints its `show ipsec` though the run failed (before:
/// "timed out waiting for the association" alone, and no IPsec report).
#[test]
fn a_client_whose_key_is_not_the_servers_is_told_so_4303_3_4_4() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Dir::new("wrongkey");
    let sconf = dir.file("server.conf", &esp::file_text(&server_rules()));
    // And an SA that no policy uses, which the client points out at start-up.
    let wrong = esp::file_text(&client_rules()).replace(K_C2S, &K_C2S.replace("2b:", "3c:"))
        + &format!(
            "sa in 3000 aead_algo aes-128-gcm aead_key {} mode transport\n",
            K_S2C.replace("00:", "0e:")
        );
    let cconf = dir.file("client.conf", &wrong);
    let (mut s, _head, _rest) = server(
        &dir,
        &["--ipsec-config", sconf.to_str().expect("utf-8")],
        "(listening)",
    );
    let c = client(&dir, &["--ipsec-config", cconf.to_str().expect("utf-8")])
        .output()
        .expect("client");
    let _ = s.kill();
    let _ = s.wait();
    let (cout, cerr) = outputs(&c);
    assert_eq!(c.status.code(), Some(1), "{cout}{cerr}");
    assert!(
        cerr.contains("IPsec sealed") && cerr.contains("do both ends' SAs (SPIs, keys)"),
        "{cerr}"
    );
    // `--run-for 1` bounds the wait for the association (3 s at least; it was 30 whatever
    // --run-for said).
    assert!(
        cerr.contains("timed out waiting for the association (3 s)"),
        "{cerr}"
    );
    assert!(
        cerr.contains("IPsec: no policy protects with SA in 3000: it seals and opens nothing"),
        "{cerr}"
    );
    let ipsec = json_of(&cout, "ipsec");
    assert!(sa_packets(&ipsec, "out", 1000) > 0, "{ipsec}");
    assert_eq!(sa_packets(&ipsec, "in", 2000), 0, "{ipsec}");
}

/// Issue 15 item 5: a key manager (here the test, as an IKE daemon's plugin would) installs
/// the server's SAs and policies through `--ipsec-socket` while the endpoint runs, is told
/// what it got wrong, replaces an SA, and the protected transfer then works.
#[test]
fn a_key_manager_installs_the_sas_through_the_socket() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Dir::new("km");
    let path = dir.0.join("ipsec.sock");
    let cconf = dir.file("client.conf", &esp::file_text(&client_rules()));
    let (s, head, rest) = server(
        &dir,
        &["--ipsec-socket", path.to_str().expect("utf-8")],
        "IPsec on",
    );
    assert!(head.contains("0 SA(s), 0 policies, 97 bytes"), "{head}");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path)
            .expect("the socket")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "only its owner may install keys");
    }
    let mut sock = connect(&path);
    for rule in server_rules() {
        let (what, rest) = rule.split_once(' ').expect("a rule");
        let answer = km(&mut sock, &format!("{what} add {rest}"));
        assert!(answer.starts_with("ok "), "{rule}: {answer}");
    }
    // A blank line or a comment is answered too: a key manager waits for every answer.
    for line in ["", "   # a note"] {
        assert_eq!(km(&mut sock, line), "ok nothing to do\n", "{line:?}");
    }
    // Mistakes are answered, one line each, and change nothing.
    for (line, want) in [
        (
            format!("sa add in 1000 aead_algo aes-128-gcm aead_key {K_C2S} mode transport"),
            "defined twice",
        ),
        ("sa del in 4242".to_string(), "no SA in 4242"),
        ("sp del 9".to_string(), "no policy 9"),
        (
            "sp add ipv4 out esp protect 7777 pri 1 proto sctp".to_string(),
            "not defined",
        ),
        ("rekey everything".to_string(), "expected sa add"),
    ] {
        let answer = km(&mut sock, &line);
        assert!(
            answer.starts_with("error: ") && answer.contains(want) && answer.lines().count() == 1,
            "{line}: {answer}"
        );
    }
    // A rekey's last step deletes the old SA; a key is never installed twice (RFC 4106
    // §8.1: a new SA restarts the sequence numbers that are GCM's nonces).
    let spare = format!("sa add in 1001 aead_algo aes-128-gcm aead_key {K_S2C} mode transport");
    assert!(km(
        &mut sock,
        &spare
            .replace("1001", "1002")
            .replace(K_S2C, &K_S2C.replace("00:", "01:"))
    )
    .starts_with("ok "));
    assert!(km(&mut sock, "sa del in 1002").starts_with("ok SA in 1002 deleted"));
    let reused = km(
        &mut sock,
        &spare
            .replace("1001", "1002")
            .replace(K_S2C, &K_S2C.replace("00:", "01:")),
    );
    assert!(
        reused.starts_with("error: ") && reused.contains("used by an SA before"),
        "{reused}"
    );
    // The server's own outbound key, under another SPI and direction: refused too.
    let reused = km(&mut sock, &spare);
    assert!(reused.contains("a key is used once"), "{reused}");
    let shown = km(&mut sock, "show");
    for want in [
        "policy 0: sp ipv4 in esp protect 1000 pri 10 src 198.18.0.1/32 proto sctp",
        "policy 2: sp ipv4 in esp discard pri 1 proto sctp",
        "aes-128-gcm",
    ] {
        assert!(shown.contains(want), "{want}:\n{shown}");
    }
    // RFC 4301 §4.4.2.1: an SA past its soft lifetime still works and is reported, so that
    // the key manager replaces it before its hard lifetime ends it.
    let none = km(&mut sock, "expiring");
    assert_eq!(none, "ok no SA is due for a rekey\n");
    let soft = spare
        .replace("1001", "1003")
        .replace(K_S2C, &K_S2C.replace("00:", "02:"))
        + " soft-life-secs 1 life-secs 3";
    assert!(km(&mut sock, &soft).starts_with("ok "));
    let installed = std::time::Instant::now();
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(km(&mut sock, "expiring"), "ok due for a rekey: in 1003\n");
    let shown = km(&mut sock, "show");
    assert!(
        shown
            .lines()
            .any(|l| l.contains(" 1003 ") && l.ends_with("rekey")),
        "{shown}"
    );
    // Past the hard lifetime it carries nothing, and `show` says so (it looked like a soft
    // expiry before).
    std::thread::sleep(Duration::from_millis(3100).saturating_sub(installed.elapsed()));
    let shown = km(&mut sock, "show");
    assert!(
        shown
            .lines()
            .any(|l| l.contains(" 1003 ") && l.ends_with("over")),
        "{shown}"
    );
    // And `expiring` tells a key manager that it is too late: traffic through it stopped.
    assert_eq!(
        km(&mut sock, "expiring"),
        "ok expired, carrying nothing until replaced: in 1003\n"
    );
    assert!(km(&mut sock, "sa del in 1003").starts_with("ok "));
    // A soft lifetime at or above the hard one is refused.
    let upside_down = spare
        .replace("1001", "1004")
        .replace(K_S2C, &K_S2C.replace("00:", "03:"))
        + " soft-life-bytes 5000 life-bytes 5000";
    assert!(km(&mut sock, &upside_down).contains("soft lifetime"));
    // A line that never ends is cut off, and the connection with it.
    sock.get_mut()
        .write_all(&vec![b'a'; 5000])
        .expect("a long line");
    let mut answer = String::new();
    sock.read_line(&mut answer).expect("the answer");
    assert_eq!(answer, "error: line too long\n");
    let mut tail = String::new();
    assert_eq!(sock.read_line(&mut tail).expect("the end"), 0, "hung up");
    drop(sock);
    let c = client(&dir, &["--ipsec-config", cconf.to_str().expect("utf-8")])
        .output()
        .expect("client");
    let s = s.wait_with_output().expect("server");
    let serr = head + &rest.join().expect("server stderr");
    assert_protected_transfer(&c, &s, &serr);
    assert!(!path.exists(), "the socket is removed at exit");
}

/// The shell's `ipsec` commands and `show ipsec` (issue 15 item 2), from a command file.
#[test]
fn the_shell_adds_shows_and_deletes_sas_and_policies() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Dir::new("shell");
    let cmds = dir.file(
        "cmds.txt",
        &format!(
            "ipsec sa add in 1000 aead_algo aes-128-gcm aead_key {K_C2S} mode transport\n\
             ipsec sp add ipv4 in esp protect 1000 pri 10 src 198.18.0.1/32 proto sctp\n\
             ipsec sp add ipv4 in esp discard pri 1 proto sctp\n\
             show ipsec\n\
             ipsec sa add in 1001 aead_algo aes-128-gcm aead_key {K_S2C} mode transport\n\
             ipsec sp add ipv4 in esp protect 1001 pri 5 src 198.18.0.3/32 proto sctp\n\
             ipsec sa del in 1001\n\
             ipsec sp del ipv4 in esp protect 1001 pri 5 src 198.18.0.3/32 proto sctp\n\
             ipsec sp del 0\n\
             ipsec sa del in 1000\n\
             show ipsec\n\
             quit\n"
        ),
    );
    let o = shell_script(&dir, &cmds, &[]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("policy 0: sp ipv4 in esp protect 1000"), "{t}");
    for want in [
        "SA in 1000 installed",
        "policy added: sp ipv4 in esp discard pri 1 proto sctp",
        "policy 1: sp ipv4 in esp discard pri 1 proto sctp",
        // An SA deleted under a policy that still protects with it: the policy fails closed,
        // and the answer says so.
        "SA in 1001 deleted; policy 1 still protects with it: what it selects is dropped \
         until an SA in 1001 returns",
        // By the rule it was added as.
        "policy 1 deleted: sp ipv4 in esp protect 1001",
        "policy 0 deleted: sp ipv4 in esp protect 1000",
        // Its SA still installed: the SA keeps the policy's selectors (RFC 4301 §4.4.2.1).
        "SA in 1000 keeps its selectors, and takes what they allow, until it is deleted",
        "SA in 1000 deleted\n",
        // After the deletions only the discard rule is left, now number 0.
        "policy 0: sp ipv4 in esp discard pri 1 proto sctp",
    ] {
        assert!(t.contains(want), "{want}:\n{t}");
    }
    let last = t.rfind("  dir ").expect("two SA tables");
    assert!(!t[last..].contains("1000 aes-128-gcm"), "{t}");
}

/// ipsec-secgw's `type inline-crypto-offload` asks for the port's NIC to do the crypto: on a
/// port without inline crypto (memif here) the SA is refused with the reason, not run in
/// software behind the operator's back; `type cpu-crypto` on the same SA is installed.
#[test]
fn an_inline_sa_on_a_port_without_inline_crypto_is_refused() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Dir::new("shellinline");
    let cmds = dir.file(
        "cmds.txt",
        &format!(
            "ipsec sa add in 1000 aead_algo aes-128-gcm aead_key {K_C2S} mode transport \
             type cpu-crypto\n\
             ipsec sa add in 1001 aead_algo aes-128-gcm aead_key {K_S2C} mode transport \
             type inline-crypto-offload port_id 0\n\
             quit\n"
        ),
    );
    let o = shell_script(&dir, &cmds, &[]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("SA in 1000 installed"), "{t}");
    assert!(
        t.contains("type inline-crypto-offload, and the port offers no inline crypto"),
        "{t}"
    );
}

/// The DDP shell with IPsec on and no peer (`--link-timeout 0`), run on the script `cmds`.
fn shell_script(dir: &Dir, cmds: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["--ip", "198.18.0.2", "--ipsec", "--link-timeout", "0"];
    args.extend_from_slice(extra);
    args.extend(["--cmdline-file", cmds.to_str().expect("utf-8")]);
    ddpdk(dir, "server", "0@0,1@1", &args)
        .output()
        .expect("shell")
}

/// A script's failing command answers on stdout with `--json` too (`command_error`), and the
/// command it quotes has its key hidden: the failure here comes after the key, so the line
/// would otherwise carry it to whatever reads the stream.
#[test]
fn a_failed_script_command_answers_in_json_without_its_key() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Dir::new("shellerr");
    let cmds = dir.file(
        "cmds.txt",
        &format!(
            "ipsec sa add in 1000 aead_algo aes-128-gcm aead_key {K_C2S} mode sideways\n\
             quit\n"
        ),
    );
    let o = shell_script(&dir, &cmds, &["--json"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let error = json_of(&out, "command_error");
    let command = error["command"].as_str().unwrap_or_default();
    assert!(
        command.starts_with("ipsec sa add in 1000") && command.contains("(key hidden)"),
        "{error}"
    );
    assert!(
        error["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{error}"
    );
    assert!(!out.contains("2b:7e"), "no key on stdout: {out}");
}

/// `ipsec show`, the key manager socket's spelling that the shell's usage line offers too,
/// shows IPsec as `show ipsec` does; it was refused as a failed command (found by an
/// outside-in test).
#[test]
fn ipsec_show_in_the_shell_is_show_ipsec() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Dir::new("shellshow");
    let cmds = dir.file(
        "cmds.txt",
        &format!(
            "ipsec sa add in 1000 aead_algo aes-128-gcm aead_key {K_C2S} mode transport\n\
             ipsec show\nquit\n"
        ),
    );
    let o = shell_script(&dir, &cmds, &[]);
    let all = text(&o);
    assert_eq!(o.status.code(), Some(0), "{all}");
    assert!(
        all.contains("algorithm") && all.contains("packets"),
        "the table: {all}"
    );
}

/// An `ipsec` command that is none of the known ones answers with its first words, but never
/// with a key among them: `ipsec sa KEY`, a key typed where `add` belongs, echoed the key on
/// stderr and in the JSON `command_error` while the quoted command line hid it.
#[test]
fn an_unknown_ipsec_command_does_not_echo_a_key() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Dir::new("shellkey");
    let cmds = dir.file("cmds.txt", &format!("ipsec sa {K_C2S}\nquit\n"));
    let o = shell_script(&dir, &cmds, &["--json"]);
    let all = text(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    let error = json_of(&String::from_utf8_lossy(&o.stdout), "command_error");
    assert!(
        error["error"]
            .as_str()
            .is_some_and(|e| e.contains("expected sa add") && e.contains("(key hidden)")),
        "{error}"
    );
    assert!(!all.contains("2b:7e"), "no key on stdout or stderr: {all}");
}

/// With `--json`, the shell's IPsec answers are JSON lines on stdout like every command's
/// result: `expiring` as the lists of SAs a key manager's script wants, not a sentence (before:
/// the sentence, on stderr only), and a change's answer with the command's first words.
#[test]
fn the_json_shell_answers_ipsec_commands_in_json() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Dir::new("shelljson");
    let cmds = dir.file(
        "cmds.txt",
        &format!(
            "ipsec sa add in 1000 aead_algo aes-128-gcm aead_key {K_C2S} mode transport \
             soft-life-secs 1 life-secs 60\n\
             ipsec expiring\n\
             quit\n"
        ),
    );
    let o = shell_script(&dir, &cmds, &["--json"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let answer = json_of(&out, "ipsec_answer");
    assert_eq!(answer["command"], "sa add", "{answer}");
    assert_eq!(answer["answer"], "SA in 1000 installed", "{answer}");
    let expiring = json_of(&out, "expiring");
    assert_eq!(
        expiring,
        serde_json::json!({"due": [], "expired": []}),
        "{out}"
    );
    assert!(!out.contains("2b:7e"), "no key on stdout: {out}");
}

/// No `ipsec` error quotes a key, whatever the command: `sa del` and `sp del N` quoted the
/// word they refused (a key pasted where the SPI, the direction or the number belongs), and a
/// key in one-digit groups (`1:2:...`, which a rule takes) was not taken for one, so
/// `aead_algo KEY` echoed it: on stderr and in `--json`'s `command_error`.
#[test]
fn no_ipsec_error_echoes_a_key_wherever_it_was_typed() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Dir::new("shellkeys");
    let hex = "2b7e151628aed2a6abf7158809cf4f3c";
    let digits = "1:2:3:4:5:6:7:8:9:a:b:c:d:e:f:0:1:2:3:4";
    // A script stops at its first failed command: one script each.
    for command in [
        format!("ipsec sa del in 0x{hex}"),
        format!("ipsec sa del 0x{hex} 1000"),
        format!("ipsec sp del {K_C2S}"),
        format!("ipsec sa add in 1000 aead_algo {digits} mode transport"),
    ] {
        let cmds = dir.file("cmds.txt", &format!("{command}\nquit\n"));
        let o = shell_script(&dir, &cmds, &["--json"]);
        let all = text(&o);
        assert_eq!(o.status.code(), Some(1), "{command}: {all}");
        let error = json_of(&String::from_utf8_lossy(&o.stdout), "command_error");
        assert!(
            error["error"]
                .as_str()
                .is_some_and(|e| e.contains("(key hidden)")),
            "{command}: {error}"
        );
        for key in [hex, "2b:7e", "1:2:3:4"] {
            assert!(
                !all.contains(key),
                "{command}: {key} on stdout or stderr: {all}"
            );
        }
    }
}

/// RFC 4301 §5: "If no policy is found in the SPD that matches a packet (for either inbound
/// or outbound traffic), the packet MUST be discarded." An endpoint started with
/// `--ipsec-socket` and no policy yet (waiting for its key manager) says at start-up that it
/// discards what no policy names (before: it took clear SCTP of both families); with the
/// operator's `--ipsec-default bypass` it takes it, and names both families as doing so.
#[test]
fn an_endpoint_with_no_policy_yet_discards_what_no_policy_names_4301_5() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for default in [None, Some("bypass")] {
        let dir = Dir::new("nopolicy");
        let path = dir.0.join("ipsec.sock");
        let mut args = vec![
            "--ipsec-socket",
            path.to_str().expect("utf-8"),
            "--run-for",
            "2",
        ];
        if let Some(d) = default {
            args.extend(["--ipsec-default", d]);
        }
        let (s, head, rest) = server(&dir, &args, "IPsec on");
        let o = s.wait_with_output().expect("server");
        let serr = head + &rest.join().expect("server stderr");
        assert_eq!(o.status.code(), Some(0), "{default:?}: {serr}");
        assert!(serr.contains("0 SA(s), 0 policies"), "{serr}");
        let bypassed = default.is_some();
        assert_eq!(
            serr.contains("IP traffic no policy names is discarded (RFC 4301 §5)"),
            !bypassed,
            "{default:?}: {serr}"
        );
        assert_eq!(
            serr.contains("IP traffic no policy names passes in the clear (--ipsec-default bypass"),
            bypassed,
            "{default:?}: {serr}"
        );
        for family in ["ipv4", "ipv6"] {
            assert_eq!(
                serr.contains(&format!(
                    "clear {family} SCTP from hosts no policy names is accepted"
                )),
                bypassed,
                "{default:?} {family}: {serr}"
            );
        }
    }
}

/// A server killed when its test ends, passed or failed: a failed assertion left it running
/// out its `--run-for`, its EAL prefix taken from the next test.
struct Killed(Child);

/// An endpoint whose SAs come from a key manager only (`--ipsec-socket` in `dir`, no policy
/// yet), killed when the first value is dropped, and a connection to its socket.
fn km_endpoint(dir: &Dir) -> (Killed, std::io::BufReader<std::os::unix::net::UnixStream>) {
    let path = dir.0.join("ipsec.sock");
    let (s, _head, _rest) = server(
        dir,
        &["--ipsec-socket", path.to_str().expect("utf-8")],
        "IPsec on",
    );
    let server = Killed(s);
    let sock = connect(&path);
    (server, sock)
}

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A key is spent only once an SA holds it: an `sa add` refused because the crypto device's
/// session pool was exhausted is taken, the same rule, once an SA is deleted (it was refused
/// as "used by an SA before", the key recorded before the SA was made).
#[test]
fn a_key_whose_sa_could_not_be_made_is_not_spent() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Dir::new("kmfull");
    let (_server, mut sock) = km_endpoint(&dir);
    let rule = |spi: u32| {
        format!(
            "sa add in {spi} aead_algo aes-128-gcm aead_key 0x{spi:08x}{} mode transport \
             replay-win 64",
            "ab".repeat(16)
        )
    };
    // The pool holds 1023 sessions; some other than SAs may hold some.
    let (mut refused, mut why) = (None, String::new());
    for spi in 1000..3100 {
        let a = km(&mut sock, &rule(spi));
        if !a.starts_with("ok ") {
            (refused, why) = (Some(spi), a);
            break;
        }
    }
    let spi = refused.unwrap_or_else(|| panic!("every SA was installed"));
    assert!(!why.contains("used by an SA before"), "{why}");
    assert!(km(&mut sock, "sa del in 1000").starts_with("ok "));
    // The deleted SA's session returns to the pool once no core holds its table.
    let deadline = Instant::now() + Duration::from_secs(5);
    let again = loop {
        let a = km(&mut sock, &rule(spi));
        if a.starts_with("ok ") || a.contains("used") || Instant::now() > deadline {
            break a;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        again.starts_with(&format!("ok SA in {spi} installed")),
        "{why}{again}"
    );
}

/// "A key is used once" holds for each key of an SA: `sa del in 1000`, then SPI 1000 again
/// with a new cipher key and the old HMAC key, is refused (it was taken, the three keys
/// checked together: the old SA's recorded packets then passed the ICV under the same SPI,
/// and one with a high sequence number moved the fresh window past the real ones, RFC 4303
/// §3.4.3, §3.4.4).
#[test]
fn an_sa_with_an_hmac_key_used_before_is_refused_rfc4303_3_4_3() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Dir::new("kmreuse");
    let (_server, mut sock) = km_endpoint(&dir);
    let cbc = |c: &str, h: &str| {
        format!(
            "sa add in 1000 cipher_algo aes-128-cbc cipher_key 0x{} auth_algo sha256-hmac \
             auth_key 0x{} mode transport",
            c.repeat(16),
            h.repeat(32)
        )
    };
    assert!(km(&mut sock, &cbc("11", "22")).starts_with("ok "));
    assert!(km(&mut sock, "sa del in 1000").starts_with("ok "));
    for (c, h) in [("33", "22"), ("11", "44")] {
        let a = km(&mut sock, &cbc(c, h));
        assert!(
            a.starts_with("error: ") && a.contains("used by an SA before"),
            "cipher {c} auth {h}: {a}"
        );
    }
    assert!(km(&mut sock, &cbc("33", "44")).starts_with("ok "));
}

/// A key is used for one purpose: after `sa del in 1000`, an SA whose AES-256-CBC cipher key
/// is the deleted SA's HMAC-SHA-256 key (32 bytes both), or whose HMAC key was its cipher key,
/// is refused, and the error does not say the key. Each key was held apart by use, so the
/// cipher key and the HMAC key were never compared.
#[test]
fn a_key_used_as_a_cipher_key_is_never_an_hmac_key_rfc4303_3_4_3() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Dir::new("kmcross");
    let (_server, mut sock) = km_endpoint(&dir);
    let cbc = |spi: u32, c: &str, h: &str| {
        format!(
            "sa add in {spi} cipher_algo aes-256-cbc cipher_key 0x{} auth_algo sha256-hmac \
             auth_key 0x{} mode transport",
            c.repeat(32),
            h.repeat(32)
        )
    };
    assert!(km(&mut sock, &cbc(1000, "11", "22")).starts_with("ok "));
    assert!(km(&mut sock, "sa del in 1000").starts_with("ok "));
    for (c, h) in [("22", "33"), ("44", "11")] {
        let a = km(&mut sock, &cbc(1000, c, h));
        assert!(
            a.starts_with("error: ") && a.contains("in another use") && a.contains("one purpose"),
            "cipher {c} auth {h}: {a}"
        );
        assert!(
            !a.contains(&c.repeat(4)) && !a.contains(&h.repeat(4)),
            "{a}"
        );
    }
    assert!(km(&mut sock, &cbc(1000, "55", "66")).starts_with("ok "));
}

/// The key socket's thread runs where DPDK runs its own control threads, off the lcores: it
/// inherited the main lcore's CPU from the thread that started it, and took turns with what
/// polls there.
#[test]
fn the_key_socket_thread_runs_with_dpdks_control_threads_off_the_lcores() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Dir::new("kmcpu");
    // Connected, the socket's thread has run (and moved itself).
    let (server, mut sock) = km_endpoint(&dir);
    let pid = server.0.id();
    assert!(km(&mut sock, "expiring").starts_with("ok "));
    let cpus_of = |task: &Path| -> Option<String> {
        let status = std::fs::read_to_string(task.join("status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(|v| v.trim().to_owned())
    };
    let task_named = |name: &str| -> Option<PathBuf> {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|t| std::fs::read_to_string(t.join("comm")).is_ok_and(|c| c.trim() == name))
    };
    let main = cpus_of(Path::new(&format!("/proc/{pid}"))).expect("the main thread's CPUs");
    let km_thread = task_named("ddpdk-ipsec-km").expect("the key socket's thread");
    let control = task_named("eal-intr-thread").expect("DPDK's interrupt thread");
    let (km_cpus, control_cpus) = (cpus_of(&km_thread), cpus_of(&control));
    assert_eq!(km_cpus, control_cpus, "main lcore on {main}");
    // The test machine has a CPU the lcores (0@0) leave free.
    if std::thread::available_parallelism().is_ok_and(|n| n.get() > 1) {
        assert_ne!(km_cpus.as_deref(), Some(main.as_str()));
    }
}

/// `/ddpdk/stats`' `ipsec/in/...` and `ipsec/out/...` are counters: they keep what an SA
/// counted after a key manager deletes it (a rekey's last step). They were the sums over the
/// SAs in force, so deleting one took its counts away, and Prometheus read a counter reset.
#[test]
fn ipsec_counters_keep_what_a_deleted_sa_counted() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Dir::new("retired");
    let path = dir.0.join("ipsec.sock");
    let (mut s, _head, _rest) = server(
        &dir,
        &[
            "--ipsec-socket",
            path.to_str().expect("utf-8"),
            "--run-for",
            "20",
        ],
        "IPsec on",
    );
    let mut sock = connect(&path);
    for rule in server_rules() {
        let (what, rest) = rule.split_once(' ').expect("a rule");
        assert!(km(&mut sock, &format!("{what} add {rest}")).starts_with("ok "));
    }
    // A client whose outbound key is not the server's: its ESP fails SA in 1000's ICV.
    let wrong = esp::file_text(&client_rules()).replace(K_C2S, &K_C2S.replace("2b:", "3c:"));
    let cconf = dir.file("client.conf", &wrong);
    let c = client(&dir, &["--ipsec-config", cconf.to_str().expect("utf-8")])
        .output()
        .expect("client");
    assert_eq!(c.status.code(), Some(1), "{}", text(&c));
    let prefix = format!("ddpdk-ipsec-server-{}", std::process::id());
    let stat = |name: &str| -> (u64, u64) {
        let r = procs::ask(&prefix, &["/ddpdk/stats,0"]);
        let v = procs::value(&r[0], "/ddpdk/stats");
        (
            v[name].as_u64().unwrap_or_else(|| panic!("{name}: {v}")),
            v["snapshot/number"].as_u64().expect("snapshot/number"),
        )
    };
    let (failed, before) = stat("ipsec/in/auth_failed");
    assert!(failed > 0, "the client's ESP failed the ICV");
    assert!(km(&mut sock, "sa del in 1000").starts_with("ok "));
    // A snapshot taken after the deletion (one answers for 200 ms).
    let after = (0..100)
        .find_map(|_| {
            let (n, number) = stat("ipsec/in/auth_failed");
            if number > before {
                return Some(n);
            }
            std::thread::sleep(Duration::from_millis(100));
            None
        })
        .expect("a new snapshot");
    assert!(
        after >= failed,
        "ipsec/in/auth_failed fell from {failed} to {after} when SA in 1000 was deleted"
    );
    let (sas, _) = stat("ipsec/sas");
    assert_eq!(sas, 1, "SA out 2000 is left");
    drop(sock);
    let _ = s.kill();
    let _ = s.wait();
}
