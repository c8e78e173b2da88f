//! Issue 12 item 4: soak and faults on DPDK devices. Two `ddpdk` processes over `net_memif`,
//! each with the seeded fault injector in front of its port (loss, corruption, duplication,
//! reordering, delay), run checked traffic (`perf --ddp-verify`: distinct self-checking tagged
//! writes and untagged sends, every delivered byte checked by the server) and must end with
//! nothing lost or corrupted, resident memory flat and every frame counted once by its fate.
//! Then a peer killed mid-transfer: the survivor notices within its heartbeat settings; and a
//! peer killed and started again at once: it re-associates (RFC 9260 §5.2.4, restart) and
//! carries on.
//!
//! `DDPDK_SOAK_SECS` sets the faulted transfer's length (default 20 s, what CI runs);
//! `make soak` runs it for minutes and prints the figures RELIABILITY.md keeps.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[path = "common/esp.rs"]
mod esp;
#[path = "common/procs.rs"]
mod procs;

const BIN: &str = env!("CARGO_BIN_EXE_ddpdk");
const SERVER_IP: &str = "198.18.0.2";
const CLIENT_IP: &str = "198.18.0.1";

/// One scenario at a time: each runs two processes pinned to the machine's two CPUs, and the
/// heartbeat bound and the memory samples are read from the clock.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Lines a process printed, each with when it was read.
type Lines = Arc<Mutex<Vec<(Instant, String)>>>;

/// Collects `stream`'s lines with their arrival times.
fn collect<R: Read + Send + 'static>(stream: R) -> (Lines, JoinHandle<()>) {
    let lines: Lines = Arc::default();
    let l = Arc::clone(&lines);
    let t = std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            l.lock().unwrap().push((Instant::now(), line));
        }
    });
    (lines, t)
}

/// The first line containing `what`, with its time.
fn find(lines: &Lines, what: &str) -> Option<(Instant, String)> {
    lines
        .lock()
        .unwrap()
        .iter()
        .find(|(_, l)| l.contains(what))
        .cloned()
}

fn wait_for(lines: &Lines, what: &str, within: Duration) -> (Instant, String) {
    let t0 = Instant::now();
    loop {
        if let Some(x) = find(lines, what) {
            return x;
        }
        assert!(t0.elapsed() < within, "no {what:?} within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The JSON object under `key` among `lines`.
fn json(lines: &Lines, key: &str) -> serde_json::Value {
    lines
        .lock()
        .unwrap()
        .iter()
        .filter_map(|(_, l)| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v.get(key).cloned())
        .unwrap_or_else(|| panic!("no {key} report"))
}

/// Resident memory of `pid`, KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

struct Proc {
    child: Child,
    out: Lines,
    err: Lines,
    readers: Vec<JoinHandle<()>>,
}

impl Proc {
    fn start(eal: &[String], app: &[&str]) -> Proc {
        let mut child = procs::spawn(BIN, eal, app);
        let (out, a) = collect(child.stdout.take().unwrap());
        let (err, b) = collect(child.stderr.take().unwrap());
        Proc {
            child,
            out,
            err,
            readers: vec![a, b],
        }
    }

    /// Waits for the process (killing it after `grace`) and its output; returns its status.
    fn finish(mut self, grace: Duration) -> (i32, Lines, Lines) {
        let t0 = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            if t0.elapsed() > grace {
                let _ = self.child.kill();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let code = self.child.wait().unwrap().code().unwrap_or(-1);
        for r in self.readers {
            let _ = r.join();
        }
        (code, self.out, self.err)
    }

    fn text(lines: &Lines) -> String {
        lines
            .lock()
            .unwrap()
            .iter()
            .map(|(_, l)| format!("{l}\n"))
            .collect()
    }
}

/// A directory for one scenario's memif socket.
fn scratch(name: &str) -> (PathBuf, String) {
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("ddpdk-soak-{name}-{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    (dir, format!("ddpdk-soak-{name}-{pid}"))
}

fn eal(role: &str, lcore: &str, prefix: &str, sock: &Path) -> Vec<String> {
    procs::memif_eal(role, lcore, prefix, sock, 1024, false)
}

/// A --ddp-verify server on `sock` with `extra` options; started once it listens.
fn server(sock: &Path, prefix: &str, extra: &[&str]) -> Proc {
    server_on("0@0", sock, prefix, extra)
}

/// [`server`] on `lcores` (the EAL's `--lcores`).
fn server_on(lcores: &str, sock: &Path, prefix: &str, extra: &[&str]) -> Proc {
    let mut app = vec![
        "--ddp-listen",
        "--ip",
        SERVER_IP,
        "--run-for",
        "120",
        "--ddp-verify",
        "--json",
    ];
    app.extend_from_slice(extra);
    let p = Proc::start(&eal("server", lcores, &format!("{prefix}-srv"), sock), &app);
    wait_for(&p.err, "(listening)", Duration::from_secs(60));
    p
}

/// A --ddp-verify client writing for `secs` with `extra` options.
fn client(sock: &Path, prefix: &str, secs: f64, extra: &[&str]) -> Proc {
    client_on("0@1", sock, prefix, secs, extra)
}

/// [`client`] on `lcores` (the EAL's `--lcores`).
fn client_on(lcores: &str, sock: &Path, prefix: &str, secs: f64, extra: &[&str]) -> Proc {
    let secs = secs.to_string();
    let mut app = vec![
        "--ddp-connect",
        SERVER_IP,
        "--ip",
        CLIENT_IP,
        "--run-for",
        &secs,
        "--ddp-verify",
        "--json",
    ];
    app.extend_from_slice(extra);
    Proc::start(&eal("client", lcores, &format!("{prefix}-cli"), sock), &app)
}

/// The region CRC32cs the server reported, in the order it offered them.
fn server_crcs(err: &Lines) -> Vec<String> {
    err.lock()
        .unwrap()
        .iter()
        .filter(|(_, l)| l.contains(" region STag "))
        .filter_map(|(_, l)| {
            let at = l.find("crc32c ")? + 7;
            Some(l[at..].split_whitespace().next()?.to_string())
        })
        .collect()
}

/// What a client and a server printed, with their exit codes, for an assertion's message.
fn transcript(
    (ccode, cout, cerr): (i32, &Lines, &Lines),
    (scode, sout, serr): (i32, &Lines, &Lines),
) -> String {
    format!(
        "client {ccode}:\n{}{}\nserver {scode}:\n{}{}",
        Proc::text(cout),
        Proc::text(cerr),
        Proc::text(sout),
        Proc::text(serr)
    )
}

/// The soak's faults, seeded with `seed`, each received frame held `delay` µs: 0.2 % lost,
/// 0.1 % corrupted, 0.1 % duplicated, 0.5 % reordered.
fn faults(seed: &'static str, delay: &'static str) -> Vec<&'static str> {
    vec![
        "--fault-drop",
        "0.002",
        "--fault-corrupt",
        "0.001",
        "--fault-duplicate",
        "0.001",
        "--fault-reorder",
        "0.005",
        "--fault-delay-us",
        delay,
        "--fault-seed",
        seed,
    ]
}

/// The client's RDMAP read-back (`--ddp-verify`, soak::ReadBack) went round: RDMA Writes read
/// back whole (RFC 5040 §5.1, §5.2) and Fetch-and-Adds that found the count of adds before
/// them (RFC 7306 §5.1.1); the client stops at the first wrong byte or count, so these are
/// counts of checks passed.
fn assert_read_back(c: &serde_json::Value) -> u64 {
    let rb = &c["read_back"];
    let n = |k: &str| rb[k].as_u64().unwrap_or(0);
    assert!(n("reads") > 0, "no RDMA Read checked: {c}");
    assert!(n("adds") > 0, "no Fetch-and-Add checked: {c}");
    assert!(n("writes") >= n("reads") && n("reads") >= n("adds"), "{rb}");
    n("reads")
}

/// What a checked run left: the client's `ddp_goodput` report and the server's output.
struct Checked {
    c: serde_json::Value,
    sout: Lines,
    cout: Lines,
}

/// Waits for a `--ddp-verify` client and its server (removing the scenario's `dir`) and checks
/// what every soak requires: both exit 0; nothing lost (every tagged write and untagged send
/// the client completed, and there were some, the server was handed and checked byte by
/// byte); the read-back went round; the region ends as the client's last writes left it;
/// every frame each end took counted once, by its fate.
fn checked_run(cli: Proc, srv: Proc, dir: &Path) -> Checked {
    // The client may still be writing (the ESP run's writes for half the soak, and nothing
    // waited for them): its run, then a minute to finish. A flat minute from here killed a
    // client of `DDPDK_SOAK_SECS` above ~100 mid-run (`make soak`'s ESP run failed so).
    let (ccode, cout, cerr) = cli.finish(Duration::from_secs_f64(soak_secs() + 60.0));
    let (scode, sout, serr) = srv.finish(Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(dir);
    let all = || transcript((ccode, &cout, &cerr), (scode, &sout, &serr));
    assert_eq!((ccode, scode), (0, 0), "{}", all());
    let c = json(&cout, "ddp_goodput");
    let s = json(&sout, "ddp_verify");
    assert!(c["messages"].as_u64().unwrap() > 0, "{}", all());
    assert!(c["untagged"].as_u64().unwrap() > 0, "{}", all());
    assert_eq!(s["tagged"], c["messages"], "{}", all());
    assert_eq!(s["untagged"], c["untagged"], "{}", all());
    assert_read_back(&c);
    assert_eq!(
        server_crcs(&serr),
        vec![c["region_crc32c"].as_str().unwrap().to_string()],
        "{}",
        all()
    );
    for (who, err) in [("server", &serr), ("client", &cerr)] {
        assert!(
            find(err, &format!("{who}: every frame counted once")).is_some(),
            "{}",
            all()
        );
    }
    Checked { c, sout, cout }
}

fn soak_secs() -> f64 {
    std::env::var("DDPDK_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20.0)
}

/// Both ends faulted, for `DDPDK_SOAK_SECS`: every message checked, nothing lost, memory
/// flat, every frame counted.
#[test]
fn a_faulted_transfer_loses_and_corrupts_nothing() {
    let _one = one_at_a_time();
    let secs = soak_secs();
    let (dir, prefix) = scratch("faults");
    let sock = dir.join("memif.sock");
    let srv = server(&sock, &prefix, &faults("11", "0"));
    let cli = client(&sock, &prefix, secs, &faults("12", "20"));
    let pids = (srv.child.id(), cli.child.id());
    // Resident memory of both, every half second while the client writes.
    let t0 = Instant::now();
    let mut samples: Vec<(f64, u64, u64)> = Vec::new();
    while let (Some(s), Some(c)) = (rss_kib(pids.0), rss_kib(pids.1)) {
        samples.push((t0.elapsed().as_secs_f64(), s, c));
        if t0.elapsed().as_secs_f64() > secs + 60.0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let c = checked_run(cli, srv, &dir).c;
    let reads = c["read_back"]["reads"].clone();
    // Every fault struck, at both ends (the client's counts; the server's are in its text).
    for f in ["dropped", "corrupted", "duplicated", "reordered", "delayed"] {
        assert!(
            c["faults"][f].as_u64().unwrap() > 0,
            "client {f}: {}",
            c["faults"]
        );
    }
    // Memory flat: what each process holds at the end of the transfer is what it held a
    // quarter of the way in, within 4 MiB (DPDK's memory and every queue are sized at start).
    let during: Vec<_> = samples
        .iter()
        .filter(|(t, _, _)| *t >= 3.0 && *t <= secs)
        .collect();
    assert!(during.len() >= 4, "too few samples: {samples:?}");
    let quarter = during[during.len() / 4];
    let last = during[during.len() - 1];
    let grew = |a: u64, b: u64| b.saturating_sub(a);
    println!(
        "soak: {secs} s, {} tagged writes, {} sends and {reads} RDMA Reads checked, faults at \
         the client {}, RSS server {} -> {} KiB, client {} -> {} KiB (t = {:.0} s -> {:.0} s)",
        c["messages"],
        c["untagged"],
        c["faults"],
        quarter.1,
        last.1,
        quarter.2,
        last.2,
        quarter.0,
        last.0
    );
    assert!(grew(quarter.1, last.1) <= 4096, "server grew: {samples:?}");
    assert!(grew(quarter.2, last.2) <= 4096, "client grew: {samples:?}");
}

/// The faulted transfer again, its SCTP carried only as ESP (RFC 5043 §13; AES-GCM-128,
/// transport mode), the faults striking the ESP packets before they are opened: every message
/// still arrives whole. A corrupted packet fails its ICV and a duplicate is a replay (RFC 4303
/// §3.4.3), each dropped and counted by its SA before SCTP sees it; a packet held back behind
/// later ones is within the anti-replay window and is taken, not refused as a replay.
#[test]
fn a_faulted_transfer_over_esp_loses_and_corrupts_nothing_4303_3_4_3() {
    let _one = one_at_a_time();
    let (dir, prefix) = scratch("esp");
    let sock = dir.join("memif.sock");
    let conf = |name: &str, rules: Vec<String>| {
        let p = dir.join(name);
        std::fs::write(&p, esp::file_text(&rules)).unwrap();
        p.to_str().unwrap().to_string()
    };
    let (sconf, cconf) = (
        conf("server.conf", esp::server_rules()),
        conf("client.conf", esp::client_rules()),
    );
    let with = |conf: &str, f: Vec<&'static str>| -> Vec<String> {
        ["--ipsec-config", conf]
            .into_iter()
            .chain(f)
            .map(str::to_string)
            .collect()
    };
    let sargs = with(&sconf, faults("21", "0"));
    let cargs = with(&cconf, faults("22", "20"));
    let srv = server(
        &sock,
        &prefix,
        &sargs.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let cli = client(
        &sock,
        &prefix,
        soak_secs() / 2.0,
        &cargs.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let Checked { sout, cout, .. } = checked_run(cli, srv, &dir);
    // Each end's inbound SA against the faults struck in front of it.
    let inbound = |out: &Lines, report: &str, spi: u64| {
        let faults = json(out, report)["faults"].clone();
        let ipsec = json(out, "ipsec");
        let sa = ipsec["sas"]
            .as_array()
            .and_then(|sas| {
                sas.iter()
                    .find(|s| s["direction"] == "in" && s["spi"] == spi)
            })
            .cloned()
            .unwrap_or_else(|| panic!("no SA in {spi}: {ipsec}"));
        (faults, sa["counts"].clone())
    };
    for (who, out, report, spi) in [
        ("server", &sout, "ddp_server", 1000),
        ("client", &cout, "ddp_goodput", 2000),
    ] {
        let (f, n) = inbound(out, report, spi);
        let count = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or(0);
        let (corrupted, duplicated, reordered) = (
            count(&f, "corrupted"),
            count(&f, "duplicated"),
            count(&f, "reordered"),
        );
        println!(
            "soak over ESP, {who}: faults {f}; SA in {spi}: {} packets, {} auth failures, \
             {} replays",
            n["packets"], n["auth_failed"], n["replay"]
        );
        assert!(
            corrupted > 0 && duplicated > 0 && reordered > 0,
            "{who}: {f}"
        );
        // §3.4.4.2: a corrupted packet fails its ICV, unless the flipped bit was in a header
        // that sends it elsewhere first (the SPI, the addresses); a duplicate of a corrupted
        // packet fails it too (the window did not move for the first copy), a few a run.
        let auth_failed = count(&n, "auth_failed");
        assert!(
            auth_failed > 0 && auth_failed <= corrupted + 5,
            "{who}: {auth_failed} auth failures for {corrupted} corrupted: {n}"
        );
        // §3.4.3: a duplicate is refused as a replay (its first copy moved the window), but
        // for the few duplicates of corrupted packets; a corrupted sequence number is one now
        // and then (32 bits of a packet, and only those that move it back: a few in a hundred
        // corrupted SACKs); a reordered packet never is, being held behind one burst, well
        // within the 1024-packet window: replays much beyond the duplicates would be reordered
        // packets refused.
        let replay = count(&n, "replay");
        let slack = corrupted / 20 + 10;
        assert!(
            replay + slack >= duplicated && replay <= duplicated + slack,
            "{who}: {replay} replays for {duplicated} duplicated, {corrupted} corrupted and \
             {reordered} reordered: {n}"
        );
    }
}

/// Issue 15 item 5 in production's order (docs/ipsec.md): a key manager rekeys both ends of a
/// running, checked transfer through their key sockets: the new SA pairs (new SPIs, new keys),
/// policies that protect with them at a higher priority, what is in flight on the old SAs let
/// arrive, the old policies deleted, then the old SAs. Traffic moves to the new SAs with nothing dropped by either end (no packet without
/// an SA, none against its policy, no replay, no ICV failure) and every message checked.
#[test]
fn a_rekey_through_the_key_sockets_mid_transfer_drops_nothing() {
    let _one = one_at_a_time();
    let (dir, prefix) = scratch("rekey");
    let sock = dir.join("memif.sock");
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    std::fs::write(path("server.conf"), esp::file_text(&esp::server_rules())).unwrap();
    std::fs::write(path("client.conf"), esp::file_text(&esp::client_rules())).unwrap();
    let (skey, ckey) = (path("server.key"), path("client.key"));
    let srv = server(
        &sock,
        &prefix,
        &[
            "--ipsec-config",
            &path("server.conf"),
            "--ipsec-socket",
            &skey,
        ],
    );
    let cli = client(
        &sock,
        &prefix,
        6.0,
        &[
            "--ipsec-config",
            &path("client.conf"),
            "--ipsec-socket",
            &ckey,
        ],
    );
    wait_for(&cli.err, "Session 1 accepted", Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(1));
    let (mut s, mut c) = (
        esp::connect(Path::new(&skey)),
        esp::connect(Path::new(&ckey)),
    );
    let ok = |km: &mut _, line: &str| {
        let answer = esp::km(km, line);
        assert!(answer.starts_with("ok "), "{line}: {answer}");
    };
    // Keys of their own (a key is used once).
    let (k3, k4) = (
        esp::K_C2S.replace("2b:", "3c:"),
        esp::K_S2C.replace("00:", "0f:"),
    );
    let gcm = |dir: &str, spi: u32, key: &str| {
        format!("sa add {dir} {spi} aead_algo aes-128-gcm aead_key {key} mode transport")
    };
    // Make: the inbound SAs first on both ends, then the outbound, then the inbound policies
    // on both ends, and only then the outbound ones. An end starts sealing with its new SA
    // the moment its outbound policy wins; a packet under that SA that reaches a peer with
    // no inbound policy naming it yet fails RFC 4301 §5.2 step 4 (CI once counted 33 such
    // `policy_mismatch` drops when each end got both its policies in turn).
    ok(&mut s, &gcm("in", 1001, &k3));
    ok(&mut c, &gcm("in", 2001, &k4));
    ok(&mut s, &gcm("out", 2001, &k4));
    ok(&mut c, &gcm("out", 1001, &k3));
    ok(
        &mut s,
        "sp add ipv4 in esp protect 1001 pri 20 src 198.18.0.1/32 proto sctp",
    );
    ok(
        &mut c,
        "sp add ipv4 in esp protect 2001 pri 20 src 198.18.0.2/32 proto sctp",
    );
    ok(
        &mut s,
        "sp add ipv4 out esp protect 2001 pri 20 dst 198.18.0.1/32 proto sctp",
    );
    ok(
        &mut c,
        "sp add ipv4 out esp protect 1001 pri 20 dst 198.18.0.2/32 proto sctp",
    );
    // What the peer sealed under the old SAs before its new policy won is still in flight
    // (a ring of a thousand frames at a busy receiver): a key manager lets it arrive before
    // it deletes the old inbound SA (RFC 7296 §2.8). Here: until the old inbound SA's packet
    // count stands still while the new one's moves, three looks in a row. Standing still
    // alone is not enough: a receiver the scheduler set aside for a moment counts nothing
    // either, with old frames still waiting in its ring (CI once deleted too early so).
    for (km, old_in, new_in) in [(&mut s, "1000", "1001"), (&mut c, "2000", "2001")] {
        let packets = |km: &mut _| {
            let show = esp::km(km, "show");
            let count = |spi: &str| {
                show.lines().find_map(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    (f.len() > 5 && f[0] == "in" && f[1] == spi).then(|| f[5].to_string())
                })
            };
            let (old, new) = (count(old_in), count(new_in));
            assert!(old.is_some() && new.is_some(), "{old_in}, {new_in}: {show}");
            (old, new)
        };
        let t0 = Instant::now();
        let (mut last, mut still) = (packets(km), 0);
        while still < 3 && t0.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(50));
            let now = packets(km);
            still = if now.0 == last.0 && now.1 != last.1 {
                still + 1
            } else {
                0
            };
            last = now;
        }
        assert_eq!(still, 3, "the old SA {old_in} never went quiet");
    }
    // Break: the old policies, by the rules they were added as, then the old SAs.
    for (km, old_rules, old_sas) in [
        (&mut s, esp::server_rules(), ["in 1000", "out 2000"]),
        (&mut c, esp::client_rules(), ["out 1000", "in 2000"]),
    ] {
        for rule in old_rules.iter().filter(|r| r.contains("protect")) {
            let rule = rule.trim_start_matches("sp ");
            let answer = esp::km(km, &format!("sp del {rule}"));
            assert!(
                answer.starts_with("ok policy") && answer.contains(rule),
                "{rule}: {answer}"
            );
        }
        for sa in old_sas {
            let answer = esp::km(km, &format!("sa del {sa}"));
            // No policy is left protecting with it: the answer says nothing more.
            assert_eq!(answer, format!("ok SA {sa} deleted\n"));
        }
    }
    let Checked { cout, sout, .. } = checked_run(cli, srv, &dir);
    for (who, out, new) in [
        ("server", &sout, [1001, 2001]),
        ("client", &cout, [1001, 2001]),
    ] {
        let ipsec = json(out, "ipsec");
        for (why, n) in ipsec["drops"].as_object().unwrap() {
            assert_eq!(n, 0, "{who}: {why}: {ipsec}");
        }
        let sas = ipsec["sas"].as_array().unwrap();
        let spis: Vec<u64> = sas.iter().map(|s| s["spi"].as_u64().unwrap()).collect();
        assert_eq!(spis.len(), 2, "{who}: {ipsec}");
        assert!(
            spis.iter().all(|spi| new.contains(&(*spi as u32))),
            "{who}: {ipsec}"
        );
        for sa in sas {
            assert!(sa["counts"]["packets"].as_u64().unwrap() > 0, "{who}: {sa}");
            for why in ["replay", "auth_failed", "malformed"] {
                assert_eq!(sa["counts"][why], 0, "{who}: {why}: {sa}");
            }
        }
    }
}

/// Ends with different data cores over one memif, faulted: a server on two and a client on
/// one, then the other way round. A memif's rings are point to point and DPDK's gives a
/// server queue beyond the client's rings the client's first ring (the association never came
/// up: the server's answers went into the ring it reads from), and refuses a client with more
/// rings than the server has queues (link down). Every endpoint opens the same queue pairs on
/// a memif (node.rs), so the ends agree whatever their data cores; on the end with two, the
/// core that reads the peer's ring hands the frames to the core that owns the association
/// (software dispatch, by the 5-tuple: the second core, for these addresses and ports),
/// faults and all, and every message arrives whole.
#[test]
fn ends_with_different_data_cores_share_a_memif_and_dispatch_between_cores() {
    let _one = one_at_a_time();
    different_data_cores(2, 1);
    different_data_cores(1, 2);
}

/// A checked, faulted transfer between a server on `server_cores` data cores and a client on
/// `client_cores`; the end with more hands frames between its cores.
fn different_data_cores(server_cores: u8, client_cores: u8) {
    // The association's owner must be the core that does not receive its frames, which its
    // fixed ports give under the well-known RSS key only (the product draws one at start:
    // with it the test failed whenever the drawn key put the owner on the receiving core).
    std::env::set_var("DDPDK_RSS_KEY", "default");
    let (dir, prefix) = scratch(&format!("cores{server_cores}{client_cores}"));
    let sock = dir.join("memif.sock");
    // The main lcore and the data cores, all on the end's own CPU.
    let lcores = |cores: u8, cpu: u8| -> String {
        (0..=cores)
            .map(|l| format!("{l}@{cpu}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let (sc, cc) = (server_cores.to_string(), client_cores.to_string());
    let srv = server_on(
        &lcores(server_cores, 0),
        &sock,
        &prefix,
        &[&["--data-cores", &sc][..], &faults("31", "0")].concat(),
    );
    let cli = client_on(
        &lcores(client_cores, 1),
        &sock,
        &prefix,
        4.0,
        &[&["--data-cores", &cc][..], &faults("32", "0")].concat(),
    );
    let Checked { c, sout, .. } = checked_run(cli, srv, &dir);
    // Each end's data cores: the association on one, and on the end with two, frames handed
    // to it by the other.
    for (who, cores, n) in [
        (
            "server",
            json(&sout, "ddp_server")["cores"].clone(),
            server_cores,
        ),
        ("client", c["cores"].clone(), client_cores),
    ] {
        let per = |k: &str| -> Vec<u64> {
            cores
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c[k].as_u64().unwrap())
                .collect()
        };
        assert_eq!(per("associations").len(), usize::from(n), "{who}: {cores}");
        assert_eq!(per("associations").iter().sum::<u64>(), 1, "{who}: {cores}");
        // Each core reports when it gets the request, while the end's last frames (SACKs,
        // the Terminate's) still come: a frame one core handed on after its report and the
        // other took before its own counts on one side only (a CI run: 23458 out, 23459 in).
        // What dispatch lost is `dispatch_dropped`, below.
        let handed: u64 = per("dispatched_out").iter().sum();
        let taken: u64 = per("dispatched_in").iter().sum();
        assert!(handed.abs_diff(taken) <= 4, "{who}: {cores}");
        assert_eq!(
            per("dispatch_dropped").iter().sum::<u64>(),
            0,
            "{who}: {cores}"
        );
        if n > 1 {
            assert!(
                handed > 1000,
                "{who}: no frames handed between its cores: {cores}"
            );
        }
        println!(
            "soak: server on {server_cores} data cores, client on {client_cores}: {} writes \
             checked; {who}'s cores {cores}",
            c["messages"]
        );
    }
}

/// Without faults to slow it, a client at the default 64 KiB size outruns a server that checks
/// every byte: its untagged Sends arrived with every receive buffer still unchecked ("no buffer
/// available", RFC 5041 §5.3's error that ends the stream) in every run, at every MTU, before
/// the server's credits (soak.rs) held it to what the server has checked.
#[test]
fn an_unfaulted_checked_transfer_at_the_default_size_stays_within_the_servers_buffers() {
    let _one = one_at_a_time();
    let (dir, prefix) = scratch("credit");
    let sock = dir.join("memif.sock");
    let srv = server(&sock, &prefix, &[]);
    // More Sends than receive buffers (256): one untagged Send a fourth of the messages. A
    // count, not seconds: on a busy machine 6 s once moved 159 Sends.
    let cli = client(&sock, &prefix, 25.0, &["--ddp-messages", "1200"]);
    let (ccode, cout, cerr) = cli.finish(Duration::from_secs(30));
    let (scode, sout, serr) = srv.finish(Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(&dir);
    let all = transcript((ccode, &cout, &cerr), (scode, &sout, &serr));
    assert_eq!((ccode, scode), (0, 0), "{all}");
    let c = json(&cout, "ddp_goodput");
    let s = json(&sout, "ddp_verify");
    assert_eq!(c["size"], 65536, "{all}");
    // Its messages are made for each write and moved in: `bytes`, not the default `region`.
    assert_eq!(c["source"], "bytes", "{all}");
    assert_eq!(s["tagged"], c["messages"], "{all}");
    let posted = c["messages"].as_u64().unwrap() + c["untagged"].as_u64().unwrap();
    assert_eq!(posted, 1200, "--ddp-messages: {all}");
    assert_eq!(s["untagged"], c["untagged"], "{all}");
    // More Sends than the server has receive buffers: they were re-posted as checked, and
    // none arrived before its buffer.
    assert!(c["untagged"].as_u64().unwrap() > 256, "{all}");
}

/// A client killed mid-transfer: the server notices within its heartbeat settings (RFC 9260
/// §8.1, §8.3: Association.Max.Retrans unanswered HEARTBEATs, each after HB.interval and an
/// RTO of at most RTO.Max) and ends the association, with every buffer back in its pool.
#[test]
fn a_killed_peer_is_noticed_within_the_heartbeat_settings() {
    let _one = one_at_a_time();
    let (dir, prefix) = scratch("kill");
    let sock = dir.join("memif.sock");
    const HB_MS: u64 = 200;
    const RTO_MAX_MS: u64 = 200;
    const MAX_RETRANS: u64 = 2;
    let hb = format!("hb_interval_ms={HB_MS}");
    let rto = format!("rto_max_ms={RTO_MAX_MS}");
    let assoc = format!("assoc_max_retrans={MAX_RETRANS}");
    let path = format!("path_max_retrans={MAX_RETRANS}");
    let srv = server(
        &sock,
        &prefix,
        &[
            "--sctp", &hb, "--sctp", &rto, "--sctp", &assoc, "--sctp", &path,
        ],
    );
    let mut cli = client(&sock, &prefix, 60.0, &[]);
    wait_for(&srv.err, "Session 1 accepted", Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(2));
    cli.child.kill().unwrap();
    let killed = Instant::now();
    let _ = cli.child.wait();
    let (closed_at, why) = wait_for(&srv.err, "Association closed", Duration::from_secs(30));
    let (code, out, err) = srv.finish(Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(&dir);
    let noticed = closed_at.saturating_duration_since(killed);
    // Each of the MAX_RETRANS + 1 HEARTBEATs that go unanswered waits HB.interval plus an RTO
    // (jittered by up to half of it) to go and an RTO to fail; one more for the first to start
    // after the last packet the client sent.
    let bound = Duration::from_millis((MAX_RETRANS + 2) * (HB_MS + 2 * RTO_MAX_MS));
    println!("soak: a killed client noticed after {noticed:?} (bound {bound:?}): {why}");
    assert!(
        !why.contains("shut down"),
        "closed by a shutdown, not by the heartbeats: {why}"
    );
    assert!(
        noticed <= bound + Duration::from_secs(1),
        "noticed after {noticed:?}, bound {bound:?}"
    );
    assert_eq!(code, 0, "{}{}", Proc::text(&out), Proc::text(&err));
    assert!(find(&err, "server: every frame counted once").is_some());
}

/// A client killed and started again at once, before the server can notice: its INIT finds
/// the association it left, which restarts (RFC 9260 §5.2.4); the old session ends, the new
/// client's session is accepted, and its writes are checked byte by byte to the end.
#[test]
fn a_restarted_peer_reassociates_and_carries_on() {
    let _one = one_at_a_time();
    let (dir, prefix) = scratch("restart");
    let sock = dir.join("memif.sock");
    let srv = server(&sock, &prefix, &[]);
    let mut first = client(&sock, &prefix, 60.0, &[]);
    wait_for(&srv.err, "Session 1 accepted", Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(1));
    first.child.kill().unwrap();
    let _ = first.child.wait();
    let second = Proc::start(
        &eal("client", "0@1", &format!("{prefix}-cli2"), &sock),
        &[
            "--ddp-connect",
            SERVER_IP,
            "--ip",
            CLIENT_IP,
            "--run-for",
            "3",
            "--ddp-verify",
            "--json",
        ],
    );
    let (ccode, cout, cerr) = second.finish(Duration::from_secs(90));
    let (scode, sout, serr) = srv.finish(Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(&dir);
    let all = transcript((ccode, &cout, &cerr), (scode, &sout, &serr));
    assert_eq!((ccode, scode), (0, 0), "{all}");
    assert!(
        find(&serr, "Association restarted by the peer").is_some(),
        "{all}"
    );
    let c = json(&cout, "ddp_goodput");
    assert!(c["messages"].as_u64().unwrap() > 0, "{all}");
    // Two sessions were offered a region each; the second holds what the restarted client
    // wrote last.
    let crcs = server_crcs(&serr);
    assert_eq!(crcs.len(), 2, "{all}");
    assert_eq!(crcs[1], c["region_crc32c"].as_str().unwrap(), "{all}");
    println!(
        "soak: the restarted client re-associated and wrote {} messages, checked",
        c["messages"]
    );
}
