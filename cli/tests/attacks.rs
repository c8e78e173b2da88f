//! Issue 12 item 2: the attack matrix on the binary. `ddpdk-attack` (a hostile peer on a
//! `net_memif` port of its own, with a raw SCTP association and hand-made DDP) runs each
//! attack against a live `ddpdk perf server` with registered regions; between attacks this
//! test reads the server's counters on its telemetry socket, so each attack's line says what
//! the RFC requires, what the attacker saw come back, and what the server counted. Nothing may
//! be placed: every region the server offered ends as it began (zeros).
//!
//! `DDPDK_ATTACK_STAGS` and `DDPDK_ATTACK_INITS` set the two big attacks (defaults: 2^20
//! random STags, 10^5 INITs; `make attacks` runs 10^6 INITs and prints the matrix).

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

#[path = "common/procs.rs"]
mod procs;

const BIN: &str = env!("CARGO_BIN_EXE_ddpdk");
const ATTACKER: &str = env!("CARGO_BIN_EXE_ddpdk-attack");
const REGION: usize = 1 << 20;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Longer than the endpoint's telemetry snapshot serves (`telemetry::FRESH`, 200 ms).
const FRESH_AND_SOME: Duration = Duration::from_millis(250);

/// The server's counters that say what became of an attack: data core 0's and the control
/// thread's, flattened (`core/0/drop/...`), plus how many associations it holds.
fn counters(prefix: &str) -> BTreeMap<String, i64> {
    let r = procs::ask(prefix, &["/ddpdk/stats", "/ddpdk/assoc/list"]);
    let mut m = BTreeMap::new();
    if let Some(o) = procs::value(&r[0], "/ddpdk/stats").as_object() {
        for (k, v) in o {
            if let Some(n) = v.as_i64() {
                m.insert(k.clone(), n);
            }
        }
    }
    let assocs = procs::value(&r[1], "/ddpdk/assoc/list")
        .as_array()
        .map_or(0, |a| a.len());
    m.insert("associations".into(), assocs as i64);
    m
}

/// What moved between two readings (associations as they are now).
fn delta(before: &BTreeMap<String, i64>, after: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    after
        .iter()
        .filter_map(|(k, v)| {
            let d = if k == "associations" {
                *v
            } else {
                v - before.get(k).copied().unwrap_or(0)
            };
            (d != 0 || k == "associations").then(|| (k.clone(), d))
        })
        .filter(|(k, _)| {
            !k.ends_with("_ns") && !k.contains("frames_out") && !k.starts_with("snapshot/")
        })
        .collect()
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// One matrix at a time: each runs a server and an attacker busy-polling a CPU each.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn every_attack_is_refused_counted_and_places_nothing() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    attack_matrix("198.18.0.2", "198.18.0.1");
}

/// The same matrix over IPv6: the family changes the frame's parse and the MULPDU (the oversize
/// attack sends the IPv6 path's MULPDU + 1), not a rule.
#[test]
fn every_attack_is_refused_counted_and_places_nothing_over_ipv6() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    attack_matrix("2001:db8::2", "2001:db8::1");
}

/// The server's link MTU, below the attacker's 1500.
const SERVER_MTU: usize = 1400;

/// The largest DDP segment the server takes (RFC 5043 §9): what one unfragmented DATA chunk
/// carries on its link (the IP header, SCTP's common header and DATA header, DDP-SSN off).
fn receive_limit(server_ip: &str) -> usize {
    let ip = if server_ip.contains(':') { 40 } else { 20 };
    SERVER_MTU - ip - 12 - 16 - 2
}

/// Runs every attack of `ddpdk-attack` from `attacker_ip` against a server at `server_ip` and
/// checks each one's answer and counters.
fn attack_matrix(server_ip: &str, attacker_ip: &str) {
    let stags = env_or("DDPDK_ATTACK_STAGS", 1 << 20);
    let inits = env_or("DDPDK_ATTACK_INITS", 100_000);
    let pid = format!(
        "{}-{}",
        std::process::id(),
        if server_ip.contains(':') { 6 } else { 4 }
    );
    let dir = std::env::temp_dir().join(format!("ddpdk-attack-{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("memif.sock");
    let prefix = format!("ddpdk-attack-srv-{pid}");
    let region = REGION.to_string();
    let mut server = procs::spawn(
        BIN,
        &procs::memif_eal("server", "0@0", &prefix, &sock, 1024, false),
        &[
            "--ddp-listen",
            "--ip",
            server_ip,
            "--run-for",
            "600",
            "--region-bytes",
            &region,
            // More streams than its pending-Initiate limit (16), for the exhaustion attack.
            "--streams",
            "64",
            // A link smaller than the attacker's, so that a segment one octet over what the
            // server takes still goes in one DATA chunk of the attacker's.
            "--mtu",
            &SERVER_MTU.to_string(),
            "--sctp",
            "valid_cookie_life_ms=500",
            "--json",
        ],
    );
    let (_, server_err) = procs::read_until(server.stderr.take().unwrap(), "the server", |l| {
        l.contains("(listening)")
    });
    let mut attacker = Command::new(ATTACKER)
        .args(procs::memif_eal(
            "client",
            "0@1",
            &format!("ddpdk-attack-cli-{pid}"),
            &sock,
            1024,
            false,
        ))
        .arg("--")
        .args([
            "--ip",
            attacker_ip,
            "--peer",
            server_ip,
            "--step",
            "--cookie-life-ms",
            "500",
            "--stags",
            &stags.to_string(),
            "--init-flood",
            &inits.to_string(),
            "--mulpdu",
            &receive_limit(server_ip).to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut go = attacker.stdin.take().unwrap();
    let lines = BufReader::new(attacker.stdout.take().unwrap()).lines();
    let mut before = counters(&prefix);
    let mut last_read = Instant::now();
    let mut rss_before_flood = 0;
    let mut matrix: Vec<(Value, BTreeMap<String, i64>)> = Vec::new();
    let t0 = Instant::now();
    for line in lines {
        let line = line.unwrap();
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if v["attack"] == "done" {
            break;
        }
        // The first half of the flood warmed what answering INITs touches (mbufs of the
        // pool, first used): the second half must leave resident memory as it was.
        if v["attack"] == "INIT flood, first half" {
            rss_before_flood = rss_kib(server.id());
        }
        // The endpoint answers every telemetry read within telemetry::FRESH (200 ms) of a
        // snapshot from that snapshot: a reading sooner after the last would be the last one
        // again, and an attack quicker than that would seem to have changed nothing.
        let since = last_read.elapsed();
        if since < FRESH_AND_SOME {
            std::thread::sleep(FRESH_AND_SOME - since);
        }
        let after = counters(&prefix);
        last_read = Instant::now();
        assert!(
            after.get("snapshot/number") > before.get("snapshot/number"),
            "{}: the reading came from the last one's snapshot",
            v["attack"]
        );
        let d = delta(&before, &after);
        if v["attack"] == "INIT flood" {
            let rss = rss_kib(server.id());
            matrix.push((v, d.clone()));
            matrix.last_mut().unwrap().1.insert(
                "server_rss_grew_kib".into(),
                rss as i64 - rss_before_flood as i64,
            );
        } else {
            matrix.push((v, d));
        }
        before = after;
        writeln!(go, "next").unwrap();
        assert!(
            t0.elapsed() < Duration::from_secs(900),
            "the attacks took too long"
        );
    }
    let out = attacker.wait_with_output().unwrap();
    // The server ends with the attacker's association; if the attacker failed, it is stopped.
    let t1 = Instant::now();
    while server.try_wait().unwrap().is_none() {
        if t1.elapsed() > Duration::from_secs(30) || !out.status.success() {
            let _ = server.kill();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let code = server.wait().unwrap().code();
    let server_log = server_err.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    for (v, d) in &matrix {
        println!("attack: {v}\n  server: {d:?}");
    }
    assert!(
        out.status.success(),
        "attacker: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // perf server fails a run in which segments were refused: here the seven receive errors
    // (an STag, bounds, TO wrap, another session's STag, a QN, a segment over the MULPDU, an
    // RDMA Read without the right) are the point.
    assert_eq!(code, Some(1), "server:\n{server_log}");
    assert!(
        server_log.contains("7 segments refused"),
        "server:\n{server_log}"
    );

    let row = |name: &str| -> &(Value, BTreeMap<String, i64>) {
        matrix
            .iter()
            .find(|(v, _)| v["attack"] == name)
            .unwrap_or_else(|| panic!("no {name} row"))
    };
    let n = |d: &BTreeMap<String, i64>, k: &str| d.get(k).copied().unwrap_or(0);
    // Nothing was placed by any attack, and every region the server offered is still zeros.
    for (v, d) in &matrix {
        assert_eq!(n(d, "core/0/placed_bytes"), 0, "{v}: placed {d:?}");
    }
    let zeros = ddpdk_dataplane::wire::crc32c::crc32c(&vec![0u8; REGION]);
    let crcs: Vec<&str> = server_log
        .lines()
        .filter(|l| l.contains(" region STag "))
        .collect();
    assert!(crcs.len() >= 7, "{server_log}");
    for l in &crcs {
        assert!(l.contains(&format!("{zeros:#010x}")), "written: {l}");
    }

    // RFC 5041 §7.1 check 1: an invalid STag ends the session with a Terminate (§6.2.2); what
    // follows on the stream is dropped as after its end.
    let (v, d) = row("random STags");
    assert_eq!(v["terminate"], true, "{v}");
    assert_eq!(n(d, "core/0/ddp_error/invalid_stag"), 1, "{d:?}");
    assert_eq!(
        n(d, "core/0/drop/ddp_after_session_end"),
        stags as i64 - 1,
        "{d:?}"
    );
    // Checks 4 and 5.
    let (v, d) = row("base and bounds");
    assert_eq!(v["terminate"], true, "{v}");
    assert_eq!(n(d, "core/0/ddp_error/base_or_bounds"), 1, "{d:?}");
    // A TO that would wrap is beyond a region registered from TO 0 first: check 4 answers.
    let (v, d) = row("TO wrap");
    assert_eq!(v["terminate"], true, "{v}");
    assert_eq!(n(d, "core/0/ddp_error/base_or_bounds"), 1, "{d:?}");
    // Check 2: another session's STag (another protection domain).
    let (v, d) = row("another session's STag");
    assert_eq!(v["terminate"], true, "{v}");
    assert_eq!(v["victim_terminated"], false, "{v}");
    assert_eq!(n(d, "core/0/ddp_error/stag_not_associated"), 1, "{d:?}");
    // Untagged: the first fault (QN) ends the stream; the MSN and MO abuse behind it is
    // dropped, counted.
    let (v, d) = row("QN, MSN and MO abuse");
    assert_eq!(v["terminate"], true, "{v}");
    assert_eq!(n(d, "core/0/ddp_error/invalid_qn"), 1, "{d:?}");
    assert_eq!(n(d, "core/0/drop/ddp_after_session_end"), 2, "{d:?}");
    // RFC 5043 §10: a DDP-SSN 32 768 or more ahead ends the session.
    let (v, d) = row("DDP-SSN outside the window");
    assert_eq!(v["terminate"], true, "{v}");
    assert_eq!(n(d, "core/0/drop/ddp_refused_by_session"), 1, "{d:?}");
    // RFC 5043 §9: over the MULPDU, refused and counted.
    let (v, d) = row("oversize segment");
    assert_eq!(
        v["segment"].as_u64(),
        v["mulpdu"].as_u64().map(|m| m + 1),
        "{v}"
    );
    assert_eq!(n(d, "core/0/drop/ddp_oversize"), 1, "{d:?}");
    // RFC 5040 §5.2, §7.2: a Read Request's Data Source must grant remote read; the region
    // offered for writes does not. An RDMAP Terminate (layer RDMA, Remote Protection Error,
    // access rights violation) and the session's end, nothing read.
    let (v, d) = row("RDMA Read of a region without remote read");
    assert_eq!(
        v["rdmap_terminate"],
        serde_json::json!(["layer 0 type 1 code 0x02"]),
        "{v}"
    );
    assert_eq!(v["terminate"], true, "{v}");
    assert_eq!(n(d, "core/0/ddp_error/rdmap"), 1, "{d:?}");
    assert_eq!(n(d, "core/0/reads_served"), 0, "{d:?}");
    // RFC 5043 §6.4: Initiates over the pending limit are answered with a Terminate and
    // counted, none waits unanswered, and none is left pending once the ULP has answered.
    let (v, d) = row("pending-Initiate exhaustion");
    let terminated = v["terminates"].as_i64().unwrap();
    assert_eq!(v["unanswered"], 0, "{v}");
    assert_eq!(
        v["accepts"].as_i64().unwrap() + terminated,
        v["sent"].as_i64().unwrap(),
        "{v}"
    );
    assert!(terminated > 0, "the limit was never reached: {v}");
    assert_eq!(n(d, "control/initiates_over_limit"), terminated, "{d:?}");
    assert_eq!(n(d, "control/initiates_pending"), 0, "{d:?}");
    // The INIT flood leaves no state: every INIT that reached the server was answered, one
    // association (the attacker's) remains, and the second half left memory as it was.
    for name in ["INIT flood, first half", "INIT flood"] {
        let (v, d) = row(name);
        assert_eq!(n(d, "associations"), 1, "{d:?}");
        assert_eq!(
            v["init_acks"].as_i64(),
            Some(n(d, "control/replies")),
            "{v} {d:?}"
        );
        assert!(
            v["init_acks"].as_u64().unwrap() * 10 >= v["sent"].as_u64().unwrap() * 9,
            "{v}"
        );
    }
    let (_, d) = row("INIT flood");
    assert!(n(d, "server_rss_grew_kib") < 1024, "{d:?}");
    let (v, _) = row("stale COOKIE ECHO");
    assert_eq!(v["stale_cookie_error"], true, "{v}");
    assert_eq!(v["cookie_ack"], false, "{v}");
    let (v, d) = row("replayed COOKIE ECHO");
    assert_eq!(v["cookie_acks"][0], 1, "{v}");
    assert_eq!(n(d, "associations"), 2, "the replay made no third: {d:?}");
    let (v, _) = row("spoofed verification tags");
    assert_eq!(v["established"], true, "{v}");
    let (v, _) = row("out of the blue");
    assert_eq!(v["aborts"], 1, "{v}");
}
