//! Issue 17 items 1 and 2: a running endpoint answers ddpdk's commands on DPDK's telemetry
//! socket, read with Debian's own client (`dpdk-telemetry.py`), and the project's Prometheus
//! exporter turns them into metrics that `promtool check metrics` accepts.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common/procs.rs"]
mod procs;

const BIN: &str = env!("CARGO_BIN_EXE_ddpdk");
const EXPORTER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../deploy/prometheus/ddpdk-exporter.py"
);

#[test]
fn a_running_endpoint_answers_on_the_telemetry_socket_and_exports_to_prometheus() {
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("ddpdk-tel-{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("memif.sock");
    let server_prefix = format!("ddpdk-tel-server-{pid}");
    let eal = |role: &str, lcore: &str, prefix: &str| {
        procs::memif_eal(role, lcore, prefix, &sock, 512, false)
    };
    let mut server = procs::spawn(
        BIN,
        &eal("server", "0@0", &server_prefix),
        &[
            "--ddp-listen",
            "--ip",
            "198.18.0.2",
            "--run-for",
            "60",
            "--region-bytes",
            "1048576",
            "--json",
        ],
    );
    let (_, server_err) = procs::read_until(server.stderr.take().unwrap(), "the server", |l| {
        l.contains("(listening)")
    });
    // The client writes for a few seconds; the questions are asked while it does. The server
    // ends with the association, and the questions and the exporter's runs (each a Python
    // start) took 4.3 s on a quiet machine: the client runs 10.
    let client = procs::spawn(
        BIN,
        &eal("client", "0@1", &format!("ddpdk-tel-client-{pid}")),
        &[
            "--ddp-connect",
            "198.18.0.2",
            "--ip",
            "198.18.0.1",
            "--run-for",
            "10",
            "--ddp-size",
            "16384",
            "--json",
        ],
    );

    // Wait until the association and its session are up, as the telemetry shows them.
    let deadline = Instant::now() + Duration::from_secs(30);
    let sessions = loop {
        let r = procs::ask(&server_prefix, &["/ddpdk/session/list"]);
        let s = procs::value(&r[0], "/ddpdk/session/list").clone();
        if s["count"].as_u64().is_some_and(|n| n > 0) {
            break s;
        }
        assert!(Instant::now() < deadline, "no session shown: {s}");
        std::thread::sleep(Duration::from_millis(200));
    };
    // Traffic has moved by now: let some more arrive between two looks at the counters.
    std::thread::sleep(Duration::from_millis(500));
    let cmds = [
        "/ddpdk/assoc/list",
        "/ddpdk/mr/list",
        "/ddpdk/stats",
        "/ddpdk/assoc/info,999",
        "/help,/ddpdk/stats",
        "/ddpdk/control",
    ];
    let r = procs::ask(&server_prefix, &cmds);
    let ids = procs::value(&r[0], cmds[0]).as_array().unwrap().clone();
    assert_eq!(ids.len(), 1, "one association: {}", r[0]);
    let id = ids[0].as_u64().unwrap();
    let info_cmd = format!("/ddpdk/assoc/info,{id}");
    let info = procs::ask(&server_prefix, &[&info_cmd]);
    let info = procs::value(&info[0], &info_cmd);
    assert_eq!(info["state"], "Established", "{info}");
    assert_eq!(info["peer"], "198.18.0.1", "{info}");
    assert_eq!(info["streams"], 8, "{info}");
    for field in [
        "cwnd",
        "rto_us",
        "a_rwnd",
        "peer_rwnd",
        "sacks_out",
        "placed_bytes",
    ] {
        assert!(info[field].as_u64().is_some(), "{field} missing: {info}");
    }
    assert!(info["placed_bytes"].as_u64().unwrap() > 0, "{info}");
    assert_eq!(info["t3_retransmits"], 0, "a lossless link: {info}");
    // The session the client opened, on the association listed; the only one, so no `next`.
    assert_eq!(sessions["count"], 1, "{sessions}");
    assert!(sessions.get("next").is_none(), "{sessions}");
    let (key, state) = sessions
        .as_object()
        .unwrap()
        .iter()
        .find(|(k, _)| k.contains('/'))
        .unwrap();
    assert!(key.starts_with(&format!("{id}/")), "{sessions}");
    assert_eq!(state, "Established", "{sessions}");
    // Paged lists, through DPDK's parameter passing: from the session or association on,
    // it is there; from past it, nothing is.
    let pages = [
        format!("/ddpdk/session/list,{key}"),
        format!("/ddpdk/session/list,{}", id + 1),
        format!("/ddpdk/assoc/list,{id}"),
        format!("/ddpdk/assoc/list,{}", id + 1),
    ];
    let p: Vec<&str> = pages.iter().map(String::as_str).collect();
    let r2 = procs::ask(&server_prefix, &p);
    assert_eq!(
        procs::value(&r2[0], p[0])[key.as_str()],
        "Established",
        "{}",
        r2[0]
    );
    assert!(
        procs::value(&r2[1], p[1]).get(key.as_str()).is_none(),
        "{}",
        r2[1]
    );
    assert_eq!(
        procs::value(&r2[2], p[2]),
        &serde_json::json!([id]),
        "{}",
        r2[2]
    );
    assert_eq!(
        procs::value(&r2[3], p[3]),
        &serde_json::json!([]),
        "{}",
        r2[3]
    );
    // The region the server offered: one MR of --region-bytes, remote write.
    let mrs = procs::value(&r[1], cmds[1]);
    assert_eq!(mrs["count"], 1, "{mrs}");
    assert_eq!(mrs["bytes"], 1_048_576, "{mrs}");
    let stag_len = mrs
        .as_object()
        .unwrap()
        .iter()
        .find(|(k, _)| k.ends_with("/len"))
        .map(|(_, v)| v.clone());
    assert_eq!(stag_len, Some(serde_json::json!(1_048_576)), "{mrs}");
    // Per-core counters, drops by reason, errors by RFC 5041 §7.2 code.
    let stats = procs::value(&r[2], cmds[2]);
    let frames_in = stats["core/0/frames_in"].as_u64().unwrap();
    let placed = stats["core/0/placed_bytes"].as_u64().unwrap();
    assert!(frames_in > 0 && placed > 0, "{stats}");
    assert_eq!(stats["core/0/associations"], 1, "{stats}");
    assert_eq!(stats["core/0/ddp_error/invalid_stag"], 0, "{stats}");
    assert_eq!(stats["core/0/ddp_error/base_or_bounds"], 0, "{stats}");
    assert!(stats["core/0/drop/checksum_bad"].is_u64(), "{stats}");
    assert!(stats["control/accepted"].as_u64().unwrap() >= 1, "{stats}");
    // The SCTP endpoint's own counters: the client's INIT answered, its cookie taken.
    assert!(
        stats["control/sctp/inits"].as_u64().unwrap() >= 1,
        "{stats}"
    );
    assert!(
        stats["control/sctp/cookies_accepted"].as_u64().unwrap() >= 1,
        "{stats}"
    );
    assert_eq!(stats["control/sctp/closed_port_aborts_out"], 0, "{stats}");
    // Every control-thread counter, those /ddpdk/stats has no room for included.
    let control = procs::value(&r[5], cmds[5]);
    assert!(control["accepted"].as_u64() >= Some(1), "{control}");
    for name in ["peer_invalidations", "forwarded", "neighbours_shared"] {
        assert!(control[name].is_u64(), "{name}: {control}");
    }
    assert!(control["sctp/inits"].as_u64() >= Some(1), "{control}");
    // What the poll loops' clock reads: a TSC its watch dropped is told here.
    let clock = stats["control/clock"].as_str().unwrap_or("");
    assert!(
        ["tsc", "monotonic", "monotonic, TSC dropped"].contains(&clock),
        "{stats}"
    );
    // Which snapshot answered: one taken after the last is stale (more than FRESH, 200 ms,
    // later) has the next number, so a tool taking differences can tell a reused one.
    let number = stats["snapshot/number"].as_u64().unwrap();
    assert!(number >= 1 && stats["snapshot/age_us"].is_u64(), "{stats}");
    std::thread::sleep(Duration::from_millis(300));
    let later = procs::ask(&server_prefix, &["/ddpdk/stats"]);
    let later = procs::value(&later[0], "/ddpdk/stats");
    assert!(
        later["snapshot/number"].as_u64().unwrap() > number,
        "{stats} then {later}"
    );
    // An unknown association is an answer, not a crash; help is registered.
    assert_eq!(
        procs::value(&r[3], cmds[3])["error"],
        "no association 999",
        "{}",
        r[3]
    );
    assert!(
        procs::value(&r[4], "/help")["/ddpdk/stats"]
            .as_str()
            .is_some_and(|h| h.contains("per data core")),
        "{}",
        r[4]
    );

    // The exporter's mistakes name what to fix: the socket it looked for, the address form.
    let nosuch = Command::new("python3")
        .args([EXPORTER, "--file-prefix", "ddpdk-no-such-prefix", "--once"])
        .output()
        .unwrap();
    let why = String::from_utf8_lossy(&nosuch.stderr);
    assert_eq!(nosuch.status.code(), Some(1), "{why}");
    assert!(
        why.contains("/dpdk/ddpdk-no-such-prefix/dpdk_telemetry.v2"),
        "{why}"
    );
    let bogus = Command::new("python3")
        .args([EXPORTER, "--listen", "bogus"])
        .output()
        .unwrap();
    let why = String::from_utf8_lossy(&bogus.stderr);
    assert_eq!(bogus.status.code(), Some(2), "{why}");
    assert!(
        why.contains("expected HOST:PORT") && !why.contains("Traceback"),
        "{why}"
    );

    // Item 2: the exporter's scrape, valid for promtool, with the live figures in it.
    let scrape = Command::new("python3")
        .args([EXPORTER, "--file-prefix", &server_prefix, "--once"])
        .output()
        .unwrap();
    let metrics = String::from_utf8_lossy(&scrape.stdout).into_owned();
    assert!(
        scrape.status.success(),
        "{metrics}{}",
        String::from_utf8_lossy(&scrape.stderr)
    );
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (package prometheus)");
    check
        .stdin
        .take()
        .unwrap()
        .write_all(metrics.as_bytes())
        .unwrap();
    let verdict = check.wait_with_output().unwrap();
    assert!(
        verdict.status.success(),
        "promtool: {}{}\n{metrics}",
        String::from_utf8_lossy(&verdict.stdout),
        String::from_utf8_lossy(&verdict.stderr)
    );
    let sample = |line_start: &str| -> f64 {
        metrics
            .lines()
            .find(|l| l.starts_with(line_start))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {line_start} in\n{metrics}"))
    };
    assert!(metrics.contains("# TYPE ddpdk_core_frames_in_total counter"));
    assert!(sample("ddpdk_sctp_endpoint_cookies_accepted_total") >= 1.0);
    assert!(metrics.contains("# TYPE ddpdk_association_cwnd_bytes gauge"));
    assert_eq!(
        sample(&format!("ddpdk_clock_info{{source=\"{clock}\"}}")),
        1.0
    );
    assert!(sample("ddpdk_core_frames_in_total{core=\"0\"}") >= frames_in as f64);
    assert!(sample("ddpdk_core_placed_bytes_total{core=\"0\"}") >= placed as f64);
    assert_eq!(
        sample("ddpdk_drops_total{core=\"0\",reason=\"checksum_bad\"}"),
        0.0
    );
    assert_eq!(
        sample("ddpdk_receive_errors_total{core=\"0\",code=\"invalid_stag\"}"),
        0.0
    );
    assert_eq!(
        sample(&format!(
            "ddpdk_association_info{{association=\"{id}\",peer=\"198.18.0.1\""
        )),
        1.0
    );
    assert_eq!(sample("ddpdk_memory_registered_bytes"), 1_048_576.0);
    assert!(sample("ddpdk_port_ipackets_total{port=\"0\"}") > 0.0);

    let client = client.wait_with_output().unwrap();
    let status = server.wait().unwrap();
    let serr = server_err.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        client.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert_eq!(status.code(), Some(0), "{serr}");
}

/// An endpoint answers its commands while its link comes up, as one with nothing yet: a
/// memif server waits for its client (`--link-timeout` at most), and its commands were
/// registered after the wait, so they answered nothing (`null`) and the exporter called it
/// unreachable until a client came or the wait ran out.
#[test]
fn a_server_waiting_for_its_link_answers_its_commands_with_no_association() {
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("ddpdk-tel-wait-{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("memif.sock");
    let prefix = format!("ddpdk-tel-wait-{pid}");
    let started = Instant::now();
    // No client ever comes: the link stays down for the whole wait.
    let mut server = procs::spawn(
        BIN,
        &procs::memif_eal("server", "0@0", &prefix, &sock, 512, false),
        &[
            "--ddp-listen",
            "--ip",
            "198.18.0.2",
            "--link-timeout",
            "60",
            "--run-for",
            "1",
        ],
    );
    let socket = format!("/var/run/dpdk/{prefix}/dpdk_telemetry.v2");
    let deadline = started + Duration::from_secs(20);
    let stats = loop {
        assert!(
            Instant::now() < deadline,
            "no answer to /ddpdk/stats,0 within 20 s of the start"
        );
        if std::path::Path::new(&socket).exists() {
            let r = procs::ask(&prefix, &["/ddpdk/stats,0"]);
            let v = procs::value(&r[0], "/ddpdk/stats,0").clone();
            if !v.is_null() {
                break v;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(stats["core/0/associations"], 0, "{stats}");
    assert_eq!(stats["core/0/frames_in"], 0, "{stats}");
    let cmds = ["/ddpdk/assoc/list", "/ddpdk/session/list", "/ddpdk/mr/list"];
    let r = procs::ask(&prefix, &cmds);
    assert_eq!(
        procs::value(&r[0], cmds[0]),
        &serde_json::json!([]),
        "{}",
        r[0]
    );
    assert_eq!(procs::value(&r[1], cmds[1])["count"], 0, "{}", r[1]);
    assert_eq!(procs::value(&r[2], cmds[2])["count"], 0, "{}", r[2]);
    let scrape = Command::new("python3")
        .args([EXPORTER, "--file-prefix", &prefix, "--once"])
        .output()
        .unwrap();
    let metrics = String::from_utf8_lossy(&scrape.stdout).into_owned();
    assert!(
        scrape.status.success() && metrics.contains("ddpdk_core_frames_in_total{core=\"0\"} 0"),
        "{metrics}{}",
        String::from_utf8_lossy(&scrape.stderr)
    );
    // All of it while the server still waited for its link.
    assert!(
        started.elapsed() < Duration::from_secs(55),
        "the link wait was over: {:?}",
        started.elapsed()
    );
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The exporter answers every scrape: an error reply from ddpdk (one stopping answers
/// `/ddpdk/assoc/list` with `{"error": ...}`) fails the scrape with its reason, where a
/// `KeyError` escaped before (a connection closed without an answer, a traceback with
/// `--once`); and it listens on an IPv6 address as `--listen [::1]:PORT` says, where it failed
/// ("Address family for hostname not supported"). Both found by an outside-in test.
#[test]
fn the_exporter_answers_every_scrape_and_listens_on_ipv6() {
    let script = format!(
        r#"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("exporter", {EXPORTER:?})
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)
class Stopping:
    def ask(self, cmd):
        if cmd.startswith("/ddpdk/stats,"):
            return {{"core/0/frames_in": 1}} if cmd.endswith(",0") else {{"error": "no data core"}}
        return {{"error": "not available: the endpoint is stopping"}}
try:
    ex.collect(Stopping())
    print("collected")
except RuntimeError as e:
    print("refused:", e)
"#
    );
    let o = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        said.starts_with("refused: /ddpdk/assoc/list") && said.contains("stopping"),
        "{said}"
    );

    // An IPv6 loopback may be missing in a container: then there is nothing to listen on.
    let Ok(free) = std::net::TcpListener::bind("[::1]:0") else {
        eprintln!("no IPv6 loopback here: the exporter's IPv6 listen is not checked");
        return;
    };
    let port = free.local_addr().unwrap().port();
    drop(free);
    let mut exporter = Command::new("python3")
        .args([EXPORTER, "--listen", &format!("[::1]:{port}")])
        .args(["--socket", "/nonexistent/dpdk_telemetry.v2"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let answer = loop {
        let fetch = Command::new("python3")
            .args([
                "-c",
                &format!(
                    "import urllib.request, urllib.error\n\
                     u = 'http://[::1]:{port}/metrics'\n\
                     for r in [urllib.request.Request(u), urllib.request.Request(u + '?x=1'),\n\
                               urllib.request.Request(u, method='HEAD')]:\n\
                     \x20   try:\n        urllib.request.urlopen(r)\n\
                     \x20   except urllib.error.HTTPError as e:\n\
                     \x20       print(r.get_method(), e.code, e.read().decode().strip())"
                ),
            ])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&fetch.stdout).into_owned();
        if !out.is_empty() || Instant::now() > deadline {
            break out;
        }
        if let Ok(Some(status)) = exporter.try_wait() {
            let mut why = String::new();
            std::io::Read::read_to_string(exporter.stderr.as_mut().unwrap(), &mut why).unwrap();
            panic!("the exporter ended ({status}): {why}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = exporter.kill();
    let _ = exporter.wait();
    let lines: Vec<&str> = answer.lines().collect();
    assert_eq!(lines.len(), 3, "{answer}");
    // The same answer with a query string (it was a 404), and to HEAD without its body (it
    // was a 501): found by an outside-in test.
    for line in &lines[..2] {
        assert!(
            line.starts_with("GET 503 ")
                && line.contains("/nonexistent/dpdk_telemetry.v2")
                && line.contains("is this ddpdk's telemetry socket?"),
            "{answer}"
        );
    }
    assert_eq!(lines[2].trim_end(), "HEAD 503", "{answer}");
}

/// The exporter's `collect` run against a fake telemetry connection whose `ask(cmd)` answers
/// from `answers` (a Python dict literal, command to reply; `/ddpdk/stats,N` past those given
/// is "no data core N"): the metrics' text, or `refused: WHY` when the scrape failed.
fn exporter_against(answers: &str) -> String {
    let script = format!(
        r#"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("exporter", {EXPORTER:?})
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)
ANSWERS = {answers}
class Fake:
    def ask(self, cmd):
        if cmd in ANSWERS:
            return ANSWERS[cmd]
        if cmd.startswith("/ddpdk/stats,"):
            return {{"error": "no data core " + cmd.split(",")[1]}}
        if cmd.startswith("/ddpdk/assoc/list"):
            return []
        if cmd.startswith("/ddpdk/session/list"):
            return {{"count": 0}}
        if cmd == "/ddpdk/mr/list":
            return {{"count": 0, "bytes": 0}}
        if cmd == "/ethdev/list":
            return []
        return {{"error": "unknown " + cmd}}
try:
    sys.stdout.write(ex.collect(Fake()).text())
except RuntimeError as e:
    print("refused:", e)
"#
    );
    let o = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Every drop is exported: the control thread's failed sends (`control/drop/REASON`) were
/// left out of the scrape.
#[test]
fn the_exporter_exports_the_control_threads_drops() {
    let out = exporter_against(
        r#"{"/ddpdk/stats,0": {"core/0/frames_in": 5, "control/drop/tx_unresolved": 3,
            "control/drop/tx_too_big": 0}}"#,
    );
    assert!(
        out.contains("# TYPE ddpdk_control_drops_total counter")
            && out.contains("ddpdk_control_drops_total{reason=\"tx_unresolved\"} 3")
            && out.contains("ddpdk_control_drops_total{reason=\"tx_too_big\"} 0"),
        "{out}"
    );
}

/// The control thread's counters that `/ddpdk/stats` has no room for (peer invalidations,
/// packets forwarded to a core, neighbours shared) come from `/ddpdk/control` and are
/// exported with help saying what they count; they were exported nowhere. A ddpdk without
/// the command (it answers nothing) still gives the `/ddpdk/stats` ones.
#[test]
fn the_exporter_exports_the_control_counters_stats_has_no_room_for() {
    let out = exporter_against(
        r#"{"/ddpdk/stats,0": {"core/0/frames_in": 5, "control/packets_in": 1},
            "/ddpdk/control": {"packets_in": 9, "peer_invalidations": 7, "forwarded": 5,
            "neighbours_shared": 3, "drop/tx_refused": 2, "tx_backlog_peak": 4,
            "sctp/ignored": 6, "sctp/ignored_why/zero_tag": 4,
            "sctp/ignored_why/ootb_abort": 2}}"#,
    );
    for want in [
        "ddpdk_sctp_endpoint_ignored_total 6",
        "ddpdk_sctp_endpoint_ignored_by_reason_total{reason=\"zero_tag\"} 4",
        "ddpdk_sctp_endpoint_ignored_by_reason_total{reason=\"ootb_abort\"} 2",
        "ddpdk_control_peer_invalidations_total 7",
        "ddpdk_control_forwarded_total 5",
        "ddpdk_control_neighbours_shared_total 3",
        "ddpdk_control_packets_in_total 9",
        "ddpdk_control_drops_total{reason=\"tx_refused\"} 2",
        "# TYPE ddpdk_control_tx_backlog_peak gauge",
        "ddpdk_control_tx_backlog_peak 4",
        "# HELP ddpdk_control_peer_invalidations_total Remote invalidations",
    ] {
        assert!(out.contains(want), "{want}: {out}");
    }
    let old = exporter_against(
        r#"{"/ddpdk/stats,0": {"core/0/frames_in": 5, "control/packets_in": 1},
            "/ddpdk/control": None}"#,
    );
    assert!(old.contains("ddpdk_control_packets_in_total 1"), "{old}");
}

/// The control thread's flow rules the device would not remove and revocations a core did
/// not acknowledge in time are exported with help saying what they count (they were in the
/// control thread's stats alone).
#[test]
fn the_exporter_exports_flow_rules_not_removed_and_invalidations_not_acknowledged() {
    let out = exporter_against(
        r#"{"/ddpdk/stats,0": {"core/0/frames_in": 5, "control/flow_rules_removed": 4,
            "control/flow_rules_remove_failed": 1, "control/invalidation_timeouts": 2}}"#,
    );
    for (name, value, help) in [
        ("flow_rules_removed", 4, "removed"),
        ("flow_rules_remove_failed", 1, "would not remove"),
        ("invalidation_timeouts", 2, "did not acknowledge in time"),
    ] {
        let metric = format!("ddpdk_control_{name}_total");
        assert!(
            out.contains(&format!("# TYPE {metric} counter\n"))
                && out.contains(&format!("{metric} {value}\n"))
                && out
                    .lines()
                    .any(|l| l.starts_with(&format!("# HELP {metric} ")) && l.contains(help)),
            "{metric}: {out}"
        );
    }
}

/// A scrape is whole or fails: a core that did not answer (a snapshot not taken in time)
/// ended the core loop as if it were past the last core, and the scrape passed without that
/// core's series; only "no data core N" ends it now.
#[test]
fn the_exporter_fails_a_scrape_when_a_core_does_not_answer() {
    let out = exporter_against(
        r#"{"/ddpdk/stats,0": {"core/0/frames_in": 5},
            "/ddpdk/stats,1": {"error": "the endpoint did not answer in time"},
            "/ddpdk/stats,2": {"core/2/frames_in": 7}}"#,
    );
    assert!(
        out.starts_with("refused: /ddpdk/stats,1") && out.contains("did not answer"),
        "{out}"
    );
    // Past the last core, the scrape goes on.
    let whole = exporter_against(
        r#"{"/ddpdk/stats,0": {"core/0/frames_in": 5}, "/ddpdk/stats,1": {"core/1/frames_in": 6}}"#,
    );
    assert!(
        whole.contains("ddpdk_core_frames_in_total{core=\"1\"} 6"),
        "{whole}"
    );
}

/// An error answer to `/ddpdk/mr/list` is no "0 registrations": it was exported as
/// `ddpdk_memory_registrations 0` (a gauge that fell to zero for a scrape); it fails the
/// scrape now, as the other lists' errors do.
#[test]
fn the_exporter_fails_a_scrape_when_the_memory_list_errs() {
    let out = exporter_against(
        r#"{"/ddpdk/stats,0": {"core/0/frames_in": 5},
            "/ddpdk/mr/list": {"error": "the endpoint did not answer in time"}}"#,
    );
    assert!(
        out.starts_with("refused: /ddpdk/mr/list") && !out.contains("ddpdk_memory_registrations"),
        "{out}"
    );
}

/// Every drop metric docs/telemetry.md names is charted in the dashboard's "Drops by reason":
/// it charted the data cores' alone, so what IPsec or the control thread dropped (before any
/// data core saw it, or on the way out) read as no drops at all.
#[test]
fn the_dashboards_drop_panel_charts_every_drop_metric() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let docs = std::fs::read_to_string(format!("{root}/docs/telemetry.md")).unwrap();
    let mut drops: Vec<&str> = docs
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("ddpdk_") && w.contains("drop") && w.ends_with("_total"))
        .collect();
    drops.sort_unstable();
    drops.dedup();
    assert!(drops.len() >= 4, "{drops:?}");
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{root}/deploy/prometheus/grafana-dashboard.json"))
            .unwrap(),
    )
    .unwrap();
    let panel = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["title"] == "Drops by reason")
        .expect("a Drops by reason panel");
    let exprs: Vec<&str> = panel["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["expr"].as_str())
        .collect();
    for name in drops {
        assert!(
            exprs.iter().any(|e| e.contains(&format!("{name}{{"))),
            "{name} not charted: {exprs:?}"
        );
    }
}

/// `ddpdk_ipsec_sa_drops_total` counts drops alone: `ipsec/out/pmtu_accepted` (ICMP PMTU
/// messages an SA believed, RFC 4301 §6.1.2) was exported as a drop reason of it.
#[test]
fn the_exporter_counts_no_accepted_pmtu_message_as_an_ipsec_drop() {
    let out = exporter_against(
        r#"{"/ddpdk/stats,0": {"core/0/frames_in": 5, "ipsec/sas": 2,
            "ipsec/out/packets": 9, "ipsec/out/no_room": 1, "ipsec/out/pmtu_accepted": 4}}"#,
    );
    assert!(
        out.contains("ddpdk_ipsec_sa_drops_total{direction=\"out\",reason=\"no_room\"} 1")
            && !out.contains("reason=\"pmtu_accepted\"")
            && out.contains("ddpdk_ipsec_pmtu_accepted_total{direction=\"out\"} 4"),
        "{out}"
    );
}

/// The NIC's share of an inline SA's packets (`ipsec/in/nic`, `ipsec/out/nic`) is a count of
/// work done, not a drop reason of `ddpdk_ipsec_sa_drops_total`.
#[test]
fn the_exporter_counts_the_nics_packets_apart_from_ipsec_drops() {
    let out = exporter_against(
        r#"{"/ddpdk/stats,0": {"core/0/frames_in": 5, "ipsec/sas": 2, "ipsec/in/packets": 9,
            "ipsec/in/nic": 7, "ipsec/in/replay": 1, "ipsec/out/nic": 3}}"#,
    );
    assert!(
        out.contains("ddpdk_ipsec_sa_drops_total{direction=\"in\",reason=\"replay\"} 1")
            && !out.contains("reason=\"nic\"")
            && out.contains("ddpdk_ipsec_nic_packets_total{direction=\"in\"} 7")
            && out.contains("ddpdk_ipsec_nic_packets_total{direction=\"out\"} 3"),
        "{out}"
    );
}
