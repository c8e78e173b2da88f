//! End-to-end runs of the `ddpdk` binary: argument errors, scripted sessions from
//! `--cmdline-file` and from a pipe on a real EAL (net_ring pair, no hugepages), signals.

use std::io::Write;

use ddpdk_dataplane::wire::ddp::{SegmentPacket, PPID_DDP_SEGMENT};
use ddpdk_dataplane::wire::rdmap::{
    AtomicOp, AtomicRequest, AtomicResponse, Control, Opcode, ReadRequest,
};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

#[path = "common/procs.rs"]
mod procs;
#[path = "common/tshark.rs"]
mod tshark;

const BIN: &str = env!("CARGO_BIN_EXE_ddpdk");

/// EAL arguments for a test run: no hugepages, no shared config (runs may overlap), no PCI.
fn eal() -> Vec<String> {
    [
        "-l",
        "0-1",
        "--no-huge",
        "-m",
        "256",
        "--no-shconf",
        "--no-pci",
        "--log-level=*:error",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn ddpdk(eal_args: &[String], app: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(eal_args).arg("--").args(app);
    c.stdin(Stdio::null());
    c
}

fn out(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn script(name: &str, body: &str) -> procs::Script {
    procs::script("cli", name, body)
}

/// Fails with the whole output when any of `wants` is missing from it.
fn assert_has_all(text: &str, wants: &[&str]) {
    for want in wants {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

/// The numbers of the "Forward statistics for port N" blocks: (port, rx, tx).
fn forward_stats(stdout: &str) -> Vec<(u16, u64, u64)> {
    let lines: Vec<&str> = stdout.lines().collect();
    let mut v = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some(rest) = l.split("Forward statistics for port ").nth(1) {
            let port: u16 = rest
                .split_whitespace()
                .next()
                .and_then(|p| p.parse().ok())
                .expect("port id");
            let num = |line: &str, key: &str| -> u64 {
                line.split(key)
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .and_then(|n| n.parse().ok())
                    .expect(key)
            };
            v.push((
                port,
                num(lines[i + 1], "RX-packets:"),
                num(lines[i + 2], "TX-packets:"),
            ));
        }
    }
    v
}

#[test]
fn bad_arguments_give_one_line_and_status_2_before_touching_the_eal() {
    for args in [
        vec!["--burst", "0"],
        vec!["--no-such-option"],
        vec!["--forward-mode", "mac"],
        vec!["--rxq", "many"],
        vec!["--run-for", "-1"],
        vec!["-i", "--run-for", "3"],
        vec!["--cmdline-file", "/nonexistent/ddpdk-cmds"],
        // A capture into a missing directory failed once both ports were up, with status 1.
        vec!["--ddp-loopback", "--pcap", "/nonexistent/ddpdk.pcap"],
        vec!["--ddp-loopback", "--pcap", "/tmp"],
        // A directory no file can be made in: found after the EAL, with status 1.
        vec!["--ddp-loopback", "--pcap", "/proc/ddpdk.pcap"],
        // IPsec needs a DDP endpoint, and room for 516-byte segments under ESP (RFC 5043 §9).
        vec!["--ipsec", "--ring-pair"],
        vec!["--ip", "198.18.0.1", "--ipsec", "--mtu", "600"],
        vec![
            "--ip",
            "198.18.0.1",
            "--ipsec-config",
            "/nonexistent/ddpdk-ipsec.conf",
        ],
        vec!["--ddp-listen"],
        vec!["--ip", "198.18.0.1", "--ddp-connect", "224.0.0.1"],
        vec!["--ip", "198.18.0.1", "--max-assocs-per-peer", "0"],
        // A perf client's conflicting options were found once its association was up, with
        // status 1 (an outside-in review).
        vec![
            "--ip",
            "198.18.0.1",
            "--ddp-connect",
            "198.18.0.2",
            "--ddp-op",
            "read",
            "--ddp-source",
            "bytes",
        ],
        vec![
            "--ip",
            "198.18.0.1",
            "--ddp-connect",
            "198.18.0.2",
            "--ddp-op",
            "read",
            "--ddp-verify",
        ],
        vec![
            "--ip",
            "198.18.0.1",
            "--ddp-connect",
            "198.18.0.2",
            "--ddp-verify",
            "--ddp-window",
            "64",
        ],
        vec![
            "--ip",
            "198.18.0.1",
            "--ddp-connect",
            "198.18.0.2",
            "--ddp-verify",
            "--ddp-size",
            "8",
        ],
        // Found by an outside-in test: each of these was taken. RTO.Initial below RTO.Min
        // was raised silently (RFC 9260 §6.3.1; `--sctp` refused it); port 0 is never a
        // peer's (§3.1); no host sends from the limited broadcast or 0/8, and a mapped
        // address made a second, IPv6 address of the interface.
        vec![
            "--ip",
            "198.18.0.1",
            "--rto-min-ms",
            "500",
            "--rto-initial-ms",
            "100",
        ],
        vec![
            "--ip",
            "198.18.0.1",
            "--reconnect",
            "198.18.0.2",
            "--reconnect-port",
            "0",
        ],
        vec!["--ip", "255.255.255.255"],
        vec!["--ip", "0.1.2.3"],
        vec!["--ip", "::ffff:198.18.0.1"],
        // RFC 8200 §5: no IPv6 link is smaller than 1280 bytes (it was taken).
        vec!["--ip", "2001:db8::1", "--mtu", "576"],
        // Without a job name, an option of another mode was taken and did nothing (the job
        // form refuses it): the endpoint options with the loopback, a capture on an endpoint.
        vec!["--ddp-loopback", "--ip", "198.18.0.1", "--mtu", "9000"],
        vec!["--ip", "198.18.0.1", "--pcap", "/tmp/ddpdk-never.pcap"],
        vec!["--ip", "198.18.0.1", "--forward-mode", "txonly"],
        // Below what a pool with its lcore cache needs: it failed after the EAL, with a hint
        // to give the EAL more memory.
        vec!["--ring-pair", "--total-num-mbufs", "100"],
        // A key manager's socket in a directory that does not exist: found after the EAL.
        vec![
            "--ip",
            "198.18.0.1",
            "--ipsec-socket",
            "/nonexistent/ddpdk-ks",
        ],
        // ... and in a directory no socket can be made in (sysfs): found after the EAL too.
        vec!["--ip", "198.18.0.1", "--ipsec-socket", "/sys/ddpdk-ks"],
        // Byte counts: junk and an ambiguous unit; a negative number (clap took it for a flag).
        vec!["--ddp-loopback", "--ddp-bytes", "64X"],
        vec!["--ddp-loopback", "--ddp-bytes", "64KB"],
        vec!["--ddp-loopback", "--ddp-bytes", "-5"],
        vec!["--ring-pair", "--burst", "-1"],
    ] {
        // No EAL arguments at all: if the EAL were initialised first, it would fail differently.
        let o = Command::new(BIN)
            .arg("--")
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .expect("run");
        let (stdout, stderr) = out(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim_end().lines().count(),
            1,
            "{args:?}: not one line: {stderr}"
        );
        assert!(stderr.starts_with("ddpdk: "), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("panicked") && !stdout.contains("EAL"),
            "{args:?}"
        );
    }
    // An option of a few values names them, and a near one (it said only "invalid value":
    // an outside-in review).
    let o = Command::new(BIN)
        .args(["fwd", "--", "--forward-mode", "rxonl"])
        .output()
        .expect("run");
    let (_, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("[possible values: io, rxonly, txonly, rxplace, echo, ping]")
            && stderr.contains("a similar value exists: 'rxonly'"),
        "{stderr}"
    );
    let bad = script("bad", "show port stats 0\nshow port frob 0\n");
    let o = Command::new(BIN)
        .arg("--")
        .arg("--cmdline-file")
        .arg(&bad)
        .output()
        .expect("run");
    let (_, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr.contains(":2: Bad command 'show port frob 0'"),
        "{stderr}"
    );
}

/// A byte count takes binary units and says what it takes when it is junk or negative, in
/// one line before the EAL: `--ddp-size 64K` was "invalid digit found in string", `-5` was
/// clap's "unexpected argument '-5'".
#[test]
fn a_byte_count_takes_binary_units_and_a_negative_number_is_named_as_such() {
    for (args, says) in [
        (
            &[
                "perf",
                "client",
                "198.18.0.2",
                "--",
                "--ip",
                "198.18.0.1",
                "--ddp-size",
                "64KB",
            ][..],
            "invalid value '64KB' for '--ddp-size <BYTES>': KB could mean units of 1000 or of \
             1024: give 64K (units of 1024)",
        ),
        (
            &[
                "perf",
                "server",
                "--",
                "--ip",
                "198.18.0.2",
                "--region-bytes",
                "-1M",
            ][..],
            "invalid value '-1M' for '--region-bytes <BYTES>': negative: the option takes a \
             non-negative count of bytes (from 1 to 1T)",
        ),
        (
            &["loopback", "--", "--ddp-bytes", "2T"][..],
            "out of range (from 1 to 1T) (see 'ddpdk loopback --help')",
        ),
        // The loopback's net_ring ports carry 15 data cores, not clap's 16 (an outside-in
        // review: "from 1 to 16"), and a job's error points at the job's own help.
        (
            &["loopback", "--", "--data-cores", "0"][..],
            "out of range (from 1 to 15 with the loopback) (see 'ddpdk loopback --help')",
        ),
        (
            &["--", "--ddp-loopback", "--data-cores", "0"][..],
            "out of range (from 1 to 15 with the loopback) (see 'ddpdk --help')",
        ),
        (
            &["endpoint", "--", "--ip", "198.18.0.1", "--data-cores", "17"][..],
            "out of range (from 1 to 16) (see 'ddpdk endpoint --help')",
        ),
        (
            &["fwd", "--", "--rxq", "-2"][..],
            "invalid value '-2' for '--rxq <RXQ>': negative: the option takes a non-negative \
             whole number (from 1 to 1024)",
        ),
    ] {
        let o = Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run");
        let (stdout, stderr) = out(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stdout.contains("EAL"), "{args:?}");
    }
}

/// An option on the wrong side of '--' is named with the rule, before the EAL starts: a
/// ddpdk option among the EAL's made a job say it "needs --ip ADDR" when --ip was given, and
/// an EAL option after '--' was only "unexpected" (found by an outside-in test).
#[test]
fn an_option_on_the_wrong_side_of_the_separator_is_named() {
    for (args, says) in [
        (
            &["endpoint", "--no-huge", "--ip", "198.18.0.1", "--", "-i"][..],
            "--ip is ddpdk's option, not the EAL's: it goes after '--'",
        ),
        (
            &["--no-huge", "--ip=198.18.0.1", "--", "-i"][..],
            "--ip=198.18.0.1 is ddpdk's option",
        ),
        // The EAL said "invalid option -- 'i'" above its usage.
        (
            &["endpoint", "--no-huge", "-i", "--", "--ip", "198.18.0.1"][..],
            "-i is ddpdk's option, not the EAL's: it goes after '--'",
        ),
        (
            &["endpoint", "--", "--ip", "198.18.0.1", "--no-pci"][..],
            "EAL options go before '--'",
        ),
        (
            &["--", "--ip", "198.18.0.1", "-l", "0-1"][..],
            "EAL options go before '--'",
        ),
        // A word among the EAL options that no option takes: the EAL skipped it and ran.
        (
            &[
                "--no-huge",
                "-m",
                "256",
                "--no-pci",
                "256",
                "--",
                "--ring-pair",
                "--run-for",
                "1",
            ][..],
            "256: among the EAL options, but no option's value and no option",
        ),
    ] {
        let o = Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run");
        let (stdout, stderr) = out(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(
            !stdout.contains("EAL") && !stderr.contains("needs --ip"),
            "{args:?}"
        );
    }
}

/// testpmd's `show fwd stats all` shows the forwarding statistics so far in `fwd` (it said
/// "not a DDP endpoint: start ddpdk with --ip ADDR", an outside-in review), and says when
/// nothing runs.
#[test]
fn show_fwd_stats_all_shows_the_forwarding_so_far() {
    let mut child = Command::new(BIN)
        .args(eal())
        .args(["--", "--ring-pair", "-i"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"start\nshow fwd stats all\nstop\nshow fwd stats all\nquit\n")
        .expect("commands");
    let o = child.wait_with_output().expect("exit");
    let (stdout, stderr) = out(&o);
    let text = format!("{stdout}\n{stderr}");
    assert!(!text.contains("not a DDP endpoint"), "{text}");
    assert_eq!(
        text.matches("Accumulated forward statistics for all ports")
            .count(),
        2,
        "the show and the stop:\n{text}"
    );
    assert!(text.contains("packet forwarding not started"), "{text}");
}

/// `--txsplit`'s region outlives the frames that reference it: the lcores held its last
/// reference, so at the stop it was dropped while the txonly frames still sat in the ring
/// pair ("region dropped while 2046 mbuf(s) reference it; not freed", an outside-in review);
/// it now goes after the drain, freed.
#[test]
fn a_txsplit_region_is_freed_after_the_frames_that_reference_it() {
    let o = Command::new(BIN)
        .args(eal())
        .args([
            "--",
            "--ring-pair",
            "-a",
            "--run-for",
            "1",
            "--forward-mode",
            "txonly",
            "--txpkts",
            "64",
            "--txsplit",
            "42",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("Drained") || stderr.contains("Drained"),
        "frames were left in the ring:\n{stdout}\n{stderr}"
    );
    assert!(
        !stderr.contains("not freed") && !stdout.contains("not freed"),
        "{stderr}"
    );
}

/// An argument that is not UTF-8 is refused as such: a file name with such a byte was passed
/// on lossily and reported missing, naming another file (found by an outside-in test).
#[test]
fn an_argument_that_is_not_utf8_is_refused_as_such() {
    use std::os::unix::ffi::OsStrExt;
    let dir = std::env::temp_dir().join(format!("ddpdk-utf8-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join(std::ffi::OsStr::from_bytes(b"cmds\xff"));
    std::fs::write(&file, "quit\n").expect("write");
    let o = Command::new(BIN)
        .args(["--", "--ring-pair", "--cmdline-file"])
        .arg(&file)
        .stdin(Stdio::null())
        .output()
        .expect("run");
    let _ = std::fs::remove_dir_all(&dir);
    let (_, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is not UTF-8"), "{stderr}");
    assert!(!stderr.contains("No such file"), "{stderr}");
}

#[test]
fn help_lists_the_options() {
    let o = Command::new(BIN).arg("--help").output().expect("run");
    let (stdout, _) = out(&o);
    assert_eq!(o.status.code(), Some(0));
    for opt in [
        "--interactive",
        "--auto-start",
        "--nb-cores",
        "--rxq",
        "--txd",
        "--burst",
        "--forward-mode",
        "--stats-period",
        "--run-for",
        "--cmdline-file",
        "--json",
    ] {
        assert!(stdout.contains(opt), "--help lacks {opt}");
    }
}

#[test]
fn cmdline_file_drives_a_whole_session_on_a_ring_pair() {
    let cmds = script(
        "session",
        "# every command once\n\
         show port info all\n\
         show config fwd\n\
         set fwd io\n\
         start tx_first\n\
         show port stats all\n\
         stop\n\
         show port xstats 0\n\
         clear port stats all\n\
         show port stats 1\n\
         help all\n\
         quit\n",
    );
    let o = ddpdk(
        &eal(),
        &[
            "--ring-pair",
            "--cmdline-file",
            cmds.to_str().expect("utf-8"),
        ],
    )
    .output()
    .expect("run");
    let (stdout, stderr) = out(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_has_all(
        &stdout,
        &[
            "Infos for port 0",
            "Infos for port 1",
            "Driver name: net_ring",
            "io packet forwarding - ports=2 - cores=1 - streams=2",
            "RX P=0/Q=0 -> TX P=1/Q=0",
            "RX P=1/Q=0 -> TX P=0/Q=0",
            "Start io packet forwarding on 1 lcore(s)",
            "NIC statistics for port 0",
            "NIC extended statistics for port 0",
            "NIC statistics for port 1 cleared",
            "set fwd (io|rxonly|txonly|rxplace|echo|ping)",
            "Bye...",
        ],
    );
    // tx_first seeded 32 frames per stream; io forwards each frame it receives, so however long
    // forwarding ran, what was sent minus what was received is exactly the 64 frames still in
    // the rings at stop, and shutdown drains exactly those.
    let fs = forward_stats(&stdout);
    assert_eq!(fs.len(), 2, "{stdout}");
    for &(port, _, tx) in &fs {
        assert!(tx >= 32, "port {port}: tx {tx}");
    }
    let (sent, received) = (fs[0].2 + fs[1].2, fs[0].1 + fs[1].1);
    assert_eq!(sent - received, 64, "frames lost or invented: {fs:?}");
    assert!(
        stdout.contains("Drained 64 packet(s) left in the RX queues"),
        "{stdout}"
    );
    // After 'clear port stats all' the counters start from zero.
    let after_clear = stdout
        .split("NIC statistics for port 1 cleared")
        .nth(1)
        .expect("cleared");
    assert!(after_clear.contains("RX-packets: 0 "), "{after_clear}");
    assert!(
        !stderr.contains("not back in their pool"),
        "mbuf leak: {stderr}"
    );
}

#[test]
fn commands_from_a_pipe_run_in_order_and_a_bad_one_sets_the_status() {
    let mut child = ddpdk(&eal(), &["--ring-pair", "-i"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"set fwd rxonly\nshow config fwd\nstart\nstart\nno such command\nstop\nquit\n")
        .expect("write");
    let o = child.wait_with_output().expect("wait");
    let (stdout, stderr) = out(&o);
    assert_eq!(
        o.status.code(),
        Some(1),
        "a failed command must show in the status:\n{stdout}\n{stderr}"
    );
    let order = [
        "ddpdk> set fwd rxonly",
        "Set rxonly packet forwarding mode",
        "rxonly packet forwarding - ports=2",
        "Start rxonly packet forwarding",
        "packet forwarding already started",
        "Bad command 'no such command'",
        "Forward statistics for port 0",
        "Bye...",
    ];
    let mut at = 0;
    for want in order {
        let i = stdout[at..]
            .find(want)
            .unwrap_or_else(|| panic!("{want:?} missing or out of order in:\n{stdout}"));
        at += i + want.len();
    }
}

#[test]
fn json_reports_are_machine_readable() {
    let cmds = script(
        "json",
        "show config fwd\nstart tx_first\nstop\nshow port stats 0\nquit\n",
    );
    let o = ddpdk(
        &eal(),
        &[
            "--ring-pair",
            "--json",
            "--cmdline-file",
            cmds.to_str().expect("utf-8"),
        ],
    )
    .output()
    .expect("run");
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    // In JSON mode stdout carries JSON lines only; the chatter goes to stderr.
    let docs: Vec<serde_json::Value> = stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect();
    assert!(stderr.contains("Bye..."), "{stderr}");
    // `show config fwd`: the streams one level down, as docs/telemetry.md lists them (they
    // were nested twice, `"streams":{"streams":[...]}`: an outside-in review).
    let config = docs
        .iter()
        .find(|d| d.get("burst").is_some())
        .expect("show config fwd object");
    assert_eq!(
        (&config["mode"], &config["ports"], &config["cores"]),
        (&"io".into(), &2.into(), &1.into()),
        "{config}"
    );
    let streams = config["streams"].as_array().expect("an array of streams");
    assert_eq!(streams.len(), 2, "{config}");
    assert_eq!(
        (&streams[0]["rx_port"], &streams[0]["tx_port"]),
        (&0.into(), &1.into()),
        "{config}"
    );
    let stats = docs
        .iter()
        .find(|d| d.get("stats").is_some())
        .expect("port stats object");
    assert_eq!(stats["port"], 0);
    assert!(stats["stats"]["tx_packets"].as_u64().expect("number") >= 32);
    let fwd = docs
        .iter()
        .find(|d| d["event"] == "forward_stats")
        .expect("forward_stats event");
    assert_eq!(fwd["mode"], "io");
    assert_eq!(fwd["total"]["tx_dropped"], 0);
    let n = |k: &str| fwd["total"][k].as_u64().expect("number");
    // Two streams seeded with 32 frames each, all forwarded or still in flight.
    assert_eq!(n("tx_packets") - n("rx_packets"), 64, "{fwd}");
}

#[test]
fn an_impossible_lcore_table_is_refused_with_a_clear_message() {
    // Three lcores on two CPUs; two forwarding cores need a TX queue each on every port.
    let mut e = eal();
    e.splice(0..2, ["--lcores".to_string(), "0@0,1@1,2@1".to_string()]);
    let o = ddpdk(
        &e,
        &["--ring-pair", "--nb-cores", "2", "--rxq", "1", "--txq", "1"],
    )
    .output()
    .expect("run");
    let (_, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "port 0 has 1 TX queues but 2 forwarding lcores transmit on it (use --txq 2)"
        ),
        "{stderr}"
    );
    // Too few worker lcores is a usage error (status 2, as docs/usage.md says), found before
    // any port is set up.
    let o = ddpdk(&eal(), &["--ring-pair", "--nb-cores", "2"])
        .output()
        .expect("run");
    let (_, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("worker lcore"), "{stderr}");
}

/// An endpoint whose EAL has only its main lcore polls one data core there (`perf`, the
/// `--ddp-listen` job), or refuses to start (the shell's endpoint, which needs a worker);
/// asked for more data cores, each says so instead of quietly running one, as the usage error
/// it is (status 2, before the port starts).
#[test]
fn more_data_cores_than_the_lcores_allow_are_refused_not_ignored() {
    let mut e = eal();
    e.splice(0..2, ["-l".to_string(), "0".to_string()]);
    e.push("--vdev=net_null0".into());
    for (job, says) in [
        (
            &["--ddp-listen"][..],
            "has only its main lcore; give it 3 lcores",
        ),
        (&[][..], "has 0 worker lcore(s)"),
    ] {
        let mut args = job.to_vec();
        args.extend(["--ip", "198.18.0.1", "--data-cores", "2", "--run-for", "1"]);
        let o = ddpdk(&e, &args).output().expect("run");
        let (stdout, stderr) = out(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stdout}{stderr}");
        assert!(
            stderr.contains(&format!("ddpdk: 2 data cores but the EAL {says}")),
            "{args:?}: {stderr}"
        );
        assert!(!stdout.contains("data core(s)"), "{args:?}: {stdout}");
    }
    // Forwarding cores too: it was status 1, after the ports were set up (outside-in test).
    let o = ddpdk(&e, &["--nb-cores", "2", "--run-for", "1"])
        .output()
        .expect("run");
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains("--nb-cores 2 but the EAL has 0 worker lcore(s)"),
        "{stderr}"
    );
}

/// A device the EAL was given and whose driver refused it is named as such, not answered with
/// "give the EAL a device"; a device that opens fewer queue pairs than an endpoint needs is
/// told which of its arguments gives more.
#[test]
fn devices_that_make_no_port_or_too_few_queues_are_named_with_the_fix() {
    let mut e = eal();
    e.push("--vdev=net_null0,bogus=1".into());
    for job in [
        &["--ip", "198.18.0.1"][..],
        &["--ddp-listen", "--ip", "198.18.0.1"],
    ] {
        let o = ddpdk(&e, job).output().expect("run");
        let (stdout, stderr) = out(&o);
        assert_eq!(o.status.code(), Some(1), "{job:?}: {stdout}{stderr}");
        assert!(
            stderr.contains("no port: the EAL made none of the devices given (net_null0)"),
            "{job:?}: {stderr}"
        );
    }
    let dir = std::env::temp_dir().join(format!("ddpdk-cli-vhost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    // One queue pair carries one data core (the control thread shares it), not two.
    let mut e = eal();
    e.splice(0..2, ["--lcores".to_string(), "0@0,1@1,2@1".to_string()]);
    e.push(format!(
        "--vdev=net_vhost0,iface={}",
        dir.join("vhost.sock").display()
    ));
    let o = ddpdk(
        &e,
        &["--ddp-listen", "--ip", "198.18.0.1", "--data-cores", "2"],
    )
    .output()
    .expect("run");
    let _ = std::fs::remove_dir_all(&dir);
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("needs 3 queue pairs") && stderr.contains("--vdev queues=3"),
        "{stderr}"
    );
    // net_ring's 16 queues a port: it said only "Invalid argument" (an outside-in test).
    let o = ddpdk(
        &eal(),
        &[
            "--ring-pair",
            "--rxq",
            "17",
            "--txq",
            "17",
            "--run-for",
            "1",
        ],
    )
    .output()
    .expect("run");
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("a net_ring port has at most 16 queues, 17 asked"),
        "{stderr}"
    );
}

/// A perf client whose server never answers (here a port that receives nothing) is told that
/// nothing came back, not even ARP, instead of only that the association timed out.
#[test]
fn a_client_that_hears_nothing_is_told_no_frame_arrived() {
    let mut e = eal();
    e.push("--vdev=net_null0,no-rx=1".into());
    let o = ddpdk(
        &e,
        &[
            "--ddp-connect",
            "198.18.0.2",
            "--ip",
            "198.18.0.1",
            // Give up on the INIT in about 2 s.
            "--sctp",
            "rto_initial_ms=300",
            "--sctp",
            "rto_max_ms=600",
            "--sctp",
            "max_init_retransmits=3",
        ],
    )
    .output()
    .expect("run");
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains(
            "ended before it was up: no answer to INIT or COOKIE ECHO (Max.Init.Retransmits, \
             RFC 9260 §5.1): no frame arrived on the port, not even an answer to ARP or \
             Neighbor Discovery for 198.18.0.2"
        ),
        "{stderr}"
    );
}

/// `--data-cores` (what `ddpdk endpoint --help` and `perf --help` show) sets an endpoint's
/// data cores; it used to be ignored there (only testpmd's `--nb-cores` counted).
#[test]
fn data_cores_sets_an_endpoints_cores() {
    let mut e = eal();
    e.splice(0..2, ["--lcores".to_string(), "0@0,1@1,2@1".to_string()]);
    e.push("--vdev=net_null0".into());
    for job in [
        &["--ip", "198.18.0.1"][..],
        &["--ddp-listen", "--ip", "198.18.0.1"][..],
    ] {
        let mut args = job.to_vec();
        args.extend(["--data-cores", "2", "--run-for", "1"]);
        let o = ddpdk(&e, &args).output().expect("run");
        let (stdout, stderr) = out(&o);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {stdout}{stderr}");
        assert!(
            stdout.contains("2 data core(s) on lcore(s) [1, 2]"),
            "{args:?}: {stdout}"
        );
    }
}

/// The `command_error` objects of a `--json` shell's standard output, in order.
fn command_errors(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("command_error").cloned())
        .collect()
}

/// A DDP endpoint on `net_null0` with `app` options, driven by `script` on its standard
/// input: its exit and everything it printed.
fn null_endpoint_shell(app: &[&str], script: &[u8]) -> (Output, String) {
    let mut e = eal();
    e.push("--vdev=net_null0".into());
    let mut child = ddpdk(&e, app)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script)
        .expect("write");
    let o = child.wait_with_output().expect("wait");
    let (stdout, stderr) = out(&o);
    (o, stdout + &stderr)
}

/// With IPsec off, `ipsec expiring` says so (it said "no SA is due for a rekey", which reads as
/// all being well), and `ipsec sa add` names every way to turn it on, the key manager's socket
/// among them (found by an outside-in test).
#[test]
fn ipsec_commands_without_ipsec_say_it_is_off() {
    let (o, text) = null_endpoint_shell(
        &["--ip", "198.18.0.1", "-i"],
        b"ipsec expiring\nipsec sa add in 5 aead_algo aes-128-gcm aead_key \
          00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:00:00:01 mode transport\nquit\n",
    );
    assert_eq!(o.status.code(), Some(1), "the add failed:\n{text}");
    assert!(
        text.contains("IPsec is off (start with --ipsec, --ipsec-config or --ipsec-socket)"),
        "{text}"
    );
    assert!(text.contains("--ipsec-socket PATH)"), "{text}");
    assert!(!text.contains("no SA is due"), "{text}");
}

/// With IPsec off, `show ipsec --json` says what no policy names gets as nothing (`null`),
/// not `discard`: every frame passes when IPsec is off (before, the unused SPD's default
/// read as discarding everything).
#[test]
fn show_ipsec_without_ipsec_names_no_default() {
    let (o, text) = null_endpoint_shell(
        &["--ip", "198.18.0.1", "-i", "--json"],
        b"show ipsec\nquit\n",
    );
    assert_eq!(o.status.code(), Some(0), "{text}");
    let ipsec = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v.get("ipsec").cloned())
        .unwrap_or_else(|| panic!("no ipsec report: {text}"));
    assert_eq!(ipsec["enabled"], false, "{ipsec}");
    assert!(ipsec["no_policy"].is_null(), "{ipsec}");
}

/// testpmd's `start` and `stop` on a DDP endpoint: neither stops or starts it, and both say
/// so (`stop` printed the statistics alone, as if the endpoint had stopped; an outside-in
/// review); `stop` still prints them, as testpmd's does. Commands after it still run.
#[test]
fn a_ddp_endpoint_says_stop_does_not_stop_it() {
    let (o, text) = null_endpoint_shell(
        &["--ip", "198.18.0.1", "-i"],
        b"stop\nstart\nshow port info 0\nquit\n",
    );
    assert_eq!(o.status.code(), Some(0), "{text}");
    let said = text
        .find("The DDP endpoint runs until 'quit'; its statistics ('show fwd stats'):")
        .unwrap_or_else(|| panic!("{text}"));
    let stats = text.find("Data core 0").unwrap_or_else(|| panic!("{text}"));
    assert!(said < stats, "said before the statistics:\n{text}");
    assert!(
        text.contains("The DDP endpoint runs from start-up; 'quit' stops it"),
        "{text}"
    );
    assert!(text.contains("Infos for port 0"), "{text}");
}

/// A DDP endpoint answers testpmd's port commands for its one port, and refuses another
/// port's number (it used to print port 0's counters whatever was asked).
#[test]
fn a_ddp_endpoint_shows_its_port_and_refuses_others() {
    let (o, text) = null_endpoint_shell(
        &["--ip", "198.18.0.1", "-i"],
        b"show port info 0\nshow port stats all\nshow port xstats 0\nshow port info 7\n\
          clear port stats 0\nquit\n",
    );
    assert_eq!(o.status.code(), Some(1), "one command was bad:\n{text}");
    assert_has_all(
        &text,
        &[
            "Infos for port 0",
            "Device name: net_null0",
            "NIC statistics for port 0",
            "NIC extended statistics for port 0",
            "no port 7: this endpoint runs on port 0",
            "NIC statistics for port 0 cleared",
        ],
    );
}

/// With `--json`, a command that fails answers on stdout, where its result would have been,
/// as `command_error` with the command and the reason: a program driving the shell (a `send`
/// that timed out, a typo) learns of it from the stream it reads. Before, the reason went to
/// stderr only and stdout said nothing at all.
#[test]
fn a_failed_command_answers_on_stdout_in_json() {
    let (o, text) = null_endpoint_shell(
        &["--ip", "198.18.0.1", "--json", "-i"],
        b"show port info 7\nshow port info 0\nno-such-command now\nquit\n",
    );
    assert_eq!(o.status.code(), Some(1), "two commands were bad:\n{text}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let errors = command_errors(&stdout);
    assert_eq!(errors.len(), 2, "one for each bad command:\n{stdout}");
    assert_eq!(errors[0]["command"], "show port info 7", "{stdout}");
    assert!(
        errors[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("no port 7")),
        "{stdout}"
    );
    assert_eq!(errors[1]["command"], "no-such-command now", "{stdout}");
    assert!(
        errors[1]["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{stdout}"
    );
}

/// A line of the shell's input that is not UTF-8 is refused as a bad command is, and the
/// lines after it run: it used to end the input there, with the rest unread and status 0.
/// Key material never comes back, not even quoted in the parser's error (clap's "invalid
/// value '...'" repeated the key the echoed command hid).
#[test]
fn a_line_that_is_not_utf8_is_refused_and_the_rest_runs() {
    let (o, text) = null_endpoint_shell(
        &["--ip", "198.18.0.1", "--json", "-i"],
        b"show mr\n\xff\nmr reg 00112233445566778899aabbccddeeff\nmr reg 4096\nshow mr\nquit\n",
    );
    assert_eq!(o.status.code(), Some(1), "two lines were bad:\n{text}");
    assert!(text.contains("the line is not UTF-8"), "{text}");
    assert!(
        text.contains("\"len\":4096"),
        "the lines after it ran:\n{text}"
    );
    assert!(
        !text.contains("00112233445566778899"),
        "a key echoed:\n{text}"
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    let errors = command_errors(&stdout);
    assert_eq!(errors.len(), 2, "{stdout}");
    assert!(
        errors[1]["error"]
            .as_str()
            .is_some_and(|e| e.contains("(key hidden)")),
        "{stdout}"
    );
}

/// A perf server's region larger than its EAL's heap (`--no-huge -m 256`) but within the
/// machine is refused at start, in one line naming -m: the server listened, then failed at
/// its first client with "Cannot allocate memory".
#[test]
fn a_perf_server_region_larger_than_the_eals_memory_is_refused_at_start() {
    let mut args = vec!["perf".to_string(), "server".to_string()];
    args.extend(eal());
    args.extend(
        [
            "--",
            "--ip",
            "198.18.0.2",
            "--region-bytes",
            "512M",
            "--run-for",
            "1",
        ]
        .map(String::from),
    );
    let o = Command::new(BIN)
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .expect("run");
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--region-bytes 536870912 is more than the EAL's memory (-m 256: 256 MiB)"),
        "{stderr}"
    );
    assert!(!stdout.contains("listening"), "{stdout}");
}

/// A region the machine could never hold is named as such; only one the EAL's heap lacks gets
/// the hint to give the EAL more memory (`mr reg` of 2^64-1 bytes got that hint).
#[test]
fn a_region_larger_than_the_machine_is_not_blamed_on_the_eals_memory() {
    let (_, text) = null_endpoint_shell(
        &["--ip", "198.18.0.1", "-i"],
        b"mr reg 18446744073709551615\nmr reg 300000000\nquit\n",
    );
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("rte_zmalloc")).collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].contains("larger than this machine's memory") && !lines[0].contains("-m"),
        "{text}"
    );
    assert!(
        lines[1].contains("give the EAL more memory"),
        "256 MB of EAL memory lacks 300 MB:\n{text}"
    );
}

/// `show port xstats` of a DDP endpoint has the fault injector's counters, as docs/usage.md
/// says (`fault_rx_*`): it showed the device's alone (found by an outside-in test).
#[test]
fn port_xstats_show_the_injected_faults() {
    let (_, text) = null_endpoint_shell(
        &["--ip", "198.18.0.1", "-i", "--fault-drop", "0.5"],
        b"show port xstats 0\nquit\n",
    );
    assert!(text.contains("fault_rx_dropped: "), "{text}");
}

/// `show mr` and `show session` with nothing to show say so in text (they printed nothing;
/// found by an outside-in test); with `--json`, none is still no object.
#[test]
fn empty_shows_say_so_in_text_and_print_nothing_in_json() {
    let (_, text) = null_endpoint_shell(
        &["--ip", "198.18.0.1", "-i"],
        b"show mr\nshow session\nquit\n",
    );
    assert!(text.contains("no memory regions registered"), "{text}");
    assert!(text.contains("no sessions"), "{text}");
    let (o, _) = null_endpoint_shell(
        &["--ip", "198.18.0.1", "-i", "--json"],
        b"show mr\nshow session\nquit\n",
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        !stdout.contains("no memory regions") && !stdout.contains("no sessions"),
        "{stdout}"
    );
}

/// `session offer` of a region registered for local access only is refused: the peer's every
/// tagged write into it would fail RFC 5041 §7.1 check 2 and end its stream (it was taken;
/// found by an outside-in test). A remote region is still offered.
#[test]
fn a_local_only_region_is_not_offered_rfc5041_7_1_check_2() {
    let (o, text) = null_endpoint_shell(
        &["--ip", "198.18.0.1", "--listen", "-i"],
        b"mr reg 4096 local\nsession offer last\nmr reg 4096 remote-write\nsession offer last\nquit\n",
    );
    assert_eq!(o.status.code(), Some(1), "one command was bad:\n{text}");
    assert_has_all(
        &text,
        &[
            "grants local access only: the peer could not write or read it",
            "Sessions we accept are offered STag",
        ],
    );
    assert_eq!(text.matches("are offered STag").count(), 1, "{text}");
}

/// Receive buffers a queue cannot hold (RFC 5041 §5.1.2 queues, 256 posted each) are refused
/// by the command, in one line; `recv auto` used to accept them and every accepted session
/// then printed "post_recv refused: queue full" once per buffer over the depth (1744 lines).
/// So is a region registered without local write access (a remote-only region is for tagged
/// access): it was accepted, then each accepted session noted "receive buffer 0 not posted".
#[test]
fn receive_buffers_beyond_a_queue_are_refused_in_one_line() {
    let (o, text) = null_endpoint_shell(
        &["--ip", "198.18.0.1", "--listen", "-i"],
        b"mr reg 4194304 remote\nrecv auto 0 last 1000 8\nmr reg 4096 sink\n\
          recv auto 0 last 1000 2\nmr reg 4194304 local\nrecv auto 0 last 1000 2000\nrecv auto 4 last 1000 8\n\
          recv auto 0 last 1000 256\nrecv auto 1 last 1000 2\nmr dereg last\nmr fill last 1\n\
          quit\n",
    );
    assert_eq!(o.status.code(), Some(1), "five commands were bad:\n{text}");
    assert_has_all(
        &text,
        &[
            "2000 buffer(s) do not fit queue 0: it holds at most 256 posted",
            "no queue 4: a stream has untagged queues 0 to 3",
            // A region the peer may write by STag is not a receive buffer (before: accepted
            // here, then "receive buffer 0 not posted" for every session accepted).
            "is registered remote, not for local write alone ('mr reg LEN local')",
            // Nor a Read sink the peer may write and invalidate (a review).
            "is registered sink, not for local write alone",
            "Sessions we accept get 256 receive buffer(s) of 1000 bytes on queue 0",
            // A second replaces the first, and says so; deregistering the region clears it.
            "on queue 1 from STag",
            " (instead of 256 of 1000 bytes on queue 0 from STag",
            "; sessions accepted from now on get no receive buffers ('recv auto' cleared)",
            // Not "no region registered here yet": the remote one still is.
            ") was deregistered: name another by its STag (see 'show mr')",
        ],
    );
    assert_eq!(text.matches("Sessions we accept get").count(), 2, "{text}");
}

/// An endpoint that fails to start after its data cores are running (here: a key manager
/// socket whose directory is removed once the EAL has started, after the check made before
/// the EAL passed) says why and exits 1; it used to hang in the EAL's clean-up, waiting for
/// data cores nobody had told to stop, both CPUs spinning.
#[test]
fn a_start_up_error_after_the_data_cores_run_exits_instead_of_hanging() {
    // The EAL's own start-up lines say when it has begun: after ddpdk's checks.
    let mut e: Vec<String> = eal()
        .into_iter()
        .filter(|a| !a.starts_with("--log-level"))
        .collect();
    e.push("--vdev=net_null0".into());
    for app in [
        &["--ip", "198.18.0.1", "--run-for", "1"][..],
        &["--ddp-listen", "--ip", "198.18.0.1", "--run-for", "1"][..],
    ] {
        // The directory goes while the EAL starts; should the endpoint have bound its socket
        // first (a slow reader here), the run is tried again.
        let mut tries = 0;
        let (o, args, path) = loop {
            tries += 1;
            let dir =
                std::env::temp_dir().join(format!("ddpdk-late-ks-{}-{tries}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("dir");
            let path = dir.join("ks");
            let mut args: Vec<String> = app.iter().map(|a| a.to_string()).collect();
            args.extend(["--ipsec-socket".to_string(), path.display().to_string()]);
            let mut child = Command::new(BIN)
                .args(&e)
                .arg("--")
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("run");
            let (head, rest) =
                procs::read_until(child.stderr.take().expect("stderr"), "ddpdk", |l| {
                    l.starts_with("EAL: ")
                });
            let removed = std::fs::remove_dir(&dir).is_ok();
            let t0 = Instant::now();
            while child.try_wait().expect("wait").is_none()
                && t0.elapsed() < Duration::from_secs(60)
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            let hung = child.try_wait().expect("wait").is_none();
            if hung {
                let _ = child.kill();
            }
            let status = child.wait().expect("status");
            let stderr = head + &rest.join().unwrap_or_default();
            let _ = std::fs::remove_dir_all(&dir);
            assert!(!hung, "{args:?}: still running after 60 s\n{stderr}");
            if removed {
                break ((status, stderr), args, path);
            }
            assert!(tries < 5, "{args:?}: the socket was always bound first");
        };
        let (status, stderr) = o;
        assert_eq!(status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("--ipsec-socket {}: no directory", path.display())),
            "{args:?}: {stderr}"
        );
    }
}

/// Reads `child`'s stdout up to and including the first line starting with `marker` (it
/// must come before the child exits): the reader, for the rest, and what was read.
fn read_until_line(
    child: &mut std::process::Child,
    marker: &str,
) -> (std::io::BufReader<std::process::ChildStdout>, String) {
    let mut reader = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut head = String::new();
    loop {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut reader, &mut line).expect("read stdout");
        assert!(n > 0, "ddpdk exited before {marker:?}:\n{head}");
        head.push_str(&line);
        if line.starts_with(marker) {
            return (reader, head);
        }
    }
}

/// A shell endpoint ends with status 0 on SIGINT, as docs/usage.md says (a signal is how it
/// ends; a loopback or a perf client cut short ends with 1: their own tests).
#[test]
fn sigint_ends_an_endpoint_with_status_0() {
    let mut e = eal();
    e.push("--vdev=net_ring0".into());
    let mut child = ddpdk(&e, &["--ip", "198.18.0.2", "-i"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // stdin stays open: the shell waits for commands until the signal.
    let stdin = child.stdin.take();
    let (reader, head) = read_until_line(&mut child, "DDP endpoint on port 0");
    let (stdout, o) = signal_and_finish(child, reader, head, "-INT", 30);
    drop(stdin);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("Signal received") && stdout.contains("Bye..."),
        "{stdout}\n{stderr}"
    );
}

/// Sends `signal` to `child`, whose stdout `read_until_line` took (`reader`, `head` the lines
/// read), and waits for it to end, killing it after `limit_secs`: all of its stdout, and its
/// output (stderr and status).
fn signal_and_finish(
    child: std::process::Child,
    mut reader: std::io::BufReader<std::process::ChildStdout>,
    head: String,
    signal: &str,
    limit_secs: u64,
) -> (String, Output) {
    let k = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(k.success());
    let watchdog = procs::Watchdog::new(child.id(), Duration::from_secs(limit_secs));
    let mut stdout = head;
    std::io::Read::read_to_string(&mut reader, &mut stdout).expect("read stdout");
    let o = child.wait_with_output().expect("wait");
    drop(watchdog);
    (stdout, o)
}

#[test]
fn sigterm_stops_cleanly() {
    let mut child = ddpdk(&eal(), &["--ring-pair", "--tx-first"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // A signal during set-up means "do not start"; wait for forwarding to have started (however
    // slow the machine) rather than for a fixed time, keeping what was read for the checks below.
    let (mut reader, head) = read_until_line(&mut child, "Start ");
    let stderr_reader = {
        let mut e = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut e, &mut s);
            s
        })
    };
    let pid = child.id().to_string();
    let k = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(k.success());
    // A watchdog turns a hang into a failure instead of a stuck test run.
    let watchdog = procs::Watchdog::new(child.id(), Duration::from_secs(30));
    let t0 = Instant::now();
    let mut stdout = head;
    std::io::Read::read_to_string(&mut reader, &mut stdout).expect("read stdout");
    let status = child.wait().expect("wait");
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "ddpdk did not stop on SIGTERM"
    );
    drop(watchdog);
    let stderr = stderr_reader.join().expect("stderr reader");
    assert_eq!(status.code(), Some(0), "{stdout}\n{stderr}");
    for want in [
        "Signal received",
        "Forward statistics for port 0",
        "Port 0 is closed",
        "Port 1 is closed",
        "Bye...",
    ] {
        assert!(stdout.contains(want), "missing {want:?}:\n{stdout}");
    }
    assert!(
        !stderr.contains("not back in their pool"),
        "mbuf leak: {stderr}"
    );
}

#[test]
fn two_forwarding_lcores_on_two_queues_lose_no_frame() {
    // Three lcores on two CPUs: main 0, forwarding lcores 1 and 2; each port has 2 queue pairs.
    let mut e = eal();
    e.splice(0..2, ["--lcores".to_string(), "0@0,1@1,2@1".to_string()]);
    let cmds = script("twocores", "show config fwd\nstart tx_first\nstop\nquit\n");
    let o = ddpdk(
        &e,
        &[
            "--ring-pair",
            "--nb-cores",
            "2",
            "--rxq",
            "2",
            "--txq",
            "2",
            "--cmdline-file",
            cmds.to_str().expect("utf-8"),
        ],
    )
    .output()
    .expect("run");
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_has_all(
        &stdout,
        &[
            "io packet forwarding - ports=2 - cores=2 - streams=4",
            "Logical Core 1 forwards packets on 2 streams:",
            "Logical Core 2 forwards packets on 2 streams:",
            "RX P=0/Q=1 -> TX P=1/Q=1",
            "Start io packet forwarding on 2 lcore(s)",
        ],
    );
    // Four streams seeded with 32 frames each: 128 frames in flight, whatever the timing.
    let fs = forward_stats(&stdout);
    let (sent, received) = (
        fs.iter().map(|f| f.2).sum::<u64>(),
        fs.iter().map(|f| f.1).sum::<u64>(),
    );
    assert_eq!(sent - received, 128, "{fs:?}");
    assert!(stdout.contains("Drained 128 packet(s)"), "{stdout}");
    assert!(!stderr.contains("not back in their pool"), "{stderr}");
}

#[test]
fn txonly_frames_are_all_accounted_for() {
    // Nobody receives: every frame sent stays in the rings until shutdown drains it; what the
    // full rings refused was freed (TX-dropped) and is not in the count. `--tx-first` makes each
    // lcore send one burst per stream before it looks at the stop flag, so frames are sent
    // however late a loaded machine schedules the lcores (without it, `stop` could come first).
    let cmds = script(
        "txonly",
        "set fwd txonly\nstart\nshow port stats all\nstop\nquit\n",
    );
    let o = ddpdk(
        &eal(),
        &[
            "--ring-pair",
            "--tx-first",
            "--txpkts",
            "128",
            "--cmdline-file",
            cmds.to_str().expect("utf-8"),
        ],
    )
    .output()
    .expect("run");
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    let fs = forward_stats(&stdout);
    assert_eq!(fs.len(), 2);
    let sent: u64 = fs.iter().map(|f| f.2).sum();
    assert!(
        fs.iter().all(|f| f.1 == 0),
        "txonly receives nothing: {fs:?}"
    );
    // Two streams, one first burst of 32 each into empty rings.
    assert!(sent >= 64, "{fs:?}");
    assert!(
        stdout.contains(&format!("Drained {sent} packet(s)")),
        "sent {sent}:\n{stdout}"
    );
    // Each ring holds 1023 frames; a port never has more than that in flight.
    assert!(fs.iter().all(|f| f.2 <= 1023), "{fs:?}");
    assert!(!stderr.contains("not back in their pool"), "{stderr}");
}

#[test]
fn bad_eal_arguments_exit_with_status_2() {
    let o = ddpdk(&["--no-such-eal-option".to_string()], &["--json"])
        .output()
        .expect("run");
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("ddpdk: EAL initialisation failed"),
        "{stderr}"
    );
    // DPDK's usage text, printed on the bad argument, goes with the error to stderr: stdout
    // carries the JSON lines a reader parses, and there are none (before: 80 lines of usage).
    assert!(stderr.contains("EAL common options:"), "{stderr}");
    assert_eq!(stdout, "", "stdout");
}

/// A --vdev whose driver DPDK lacks is a bad argument (status 2, as the docs say), named
/// with what to check; it was a run-time failure (status 1) with only rte_errno's "No such
/// device".
#[test]
fn a_vdev_of_no_driver_is_a_usage_error_that_says_what_to_check() {
    let mut eal_args = eal();
    eal_args.push("--vdev=net_nosuch0".into());
    let o = ddpdk(&eal_args, &["--run-for", "1"]).output().expect("run");
    let (_, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_has_all(
        &stderr,
        &[
            "ddpdk: EAL initialisation failed",
            "a device option names no device DPDK can make",
            "--vdev's driver name",
        ],
    );
}

/// `make run` runs the binary cargo built: under CARGO_TARGET_DIR when that is set (it ran
/// target/release/ddpdk regardless: missing, or stale). `make -n` prints without running.
#[test]
fn make_run_runs_the_binary_where_cargo_built_it() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace");
    let make = |target_dir: Option<&str>| {
        let mut c = Command::new("make");
        c.arg("-n").arg("-C").arg(root).arg("run");
        match target_dir {
            Some(d) => c.env("CARGO_TARGET_DIR", d),
            None => c.env_remove("CARGO_TARGET_DIR"),
        };
        let o = c.output().expect("make");
        assert!(o.status.success(), "{:?}", out(&o));
        out(&o).0
    };
    let shown = make(Some("/nonexistent/ddpdk-target"));
    assert!(
        shown.contains("/nonexistent/ddpdk-target/release/ddpdk loopback"),
        "{shown}"
    );
    let shown = make(None);
    assert!(shown.contains("\ntarget/release/ddpdk loopback"), "{shown}");
}

/// An explicit `-h` among the EAL's arguments keeps DPDK's usage on stdout, where help goes.
#[test]
fn eal_help_goes_to_stdout() {
    let o = ddpdk(&["--no-huge".to_string(), "-h".to_string()], &[])
        .output()
        .expect("run");
    let (stdout, stderr) = out(&o);
    assert!(stdout.contains("EAL common options:"), "{stdout}\n{stderr}");
}

/// Issue 17 item 5: each job has its own help, with its options and examples, and refuses
/// another job's mode option; a job's words come before the EAL's.
#[test]
fn jobs_have_their_own_help_and_refuse_each_others_modes() {
    let run = |args: &[&str]| {
        let o = Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run");
        let (so, se) = out(&o);
        (o.status.code(), so, se)
    };
    let (code, help, _) = run(&["--help"]);
    assert_eq!(code, Some(0));
    for job in ["fwd", "loopback", "endpoint", "perf"] {
        assert!(
            help.contains(&format!("  {job} ")),
            "{job} not listed:\n{help}"
        );
        let (code, h, _) = run(&[job, "--help"]);
        assert_eq!(code, Some(0), "{job}");
        assert!(h.contains(&format!("ddpdk {job}")), "{job}:\n{h}");
        assert!(h.contains("Examples:"), "{job}:\n{h}");
    }
    let (_, h, _) = run(&["perf", "--help"]);
    assert!(
        h.contains("--ddp-window") && !h.contains("--forward-mode"),
        "{h}"
    );
    let (_, h, _) = run(&["help", "fwd"]);
    assert!(
        h.contains("--forward-mode") && !h.contains("--ddp-window"),
        "{h}"
    );
    let (code, _, e) = run(&["perf", "client", "--no-huge"]);
    assert_eq!(code, Some(2), "{e}");
    assert!(e.contains("perf client needs the server's address"), "{e}");
    let (code, _, e) = run(&[
        "loopback",
        "--no-huge",
        "--",
        "--ddp-listen",
        "--ip",
        "198.18.0.1",
    ]);
    assert_eq!(code, Some(2), "{e}");
    assert!(e.contains("--ddp-listen is another job's option"), "{e}");
    let (code, _, e) = run(&["endpoint", "--no-huge", "--", "-i"]);
    assert_eq!(code, Some(2), "{e}");
    assert!(e.contains("needs --ip"), "{e}");
    // A perf side's own mode is no other job's (found by an outside-in test).
    let (code, _, e) = run(&["perf", "server", "--no-huge", "--", "--ddp-listen"]);
    assert_eq!(code, Some(2), "{e}");
    assert!(
        e.contains("--ddp-listen is what `ddpdk perf server` is already"),
        "{e}"
    );
}

/// The main job on the embedded default (`--ddp-loopback`), here with two data cores per
/// endpoint: two endpoints on a net_ring pair resolve each other by ARP, set up an association
/// and a DDP session, move tagged and untagged messages of every size with each placed byte
/// verified, read the server's memory with RDMA Reads on an RDMAP stream (each byte read
/// verified), tear down (STags revoked with both cores' acknowledgement), and exit 0.
/// SIGINT in the middle of the loopback's transfer: the run says it was interrupted and the
/// frames still between the two ports go back to their pool before the regions they hold
/// spans of are dropped. It left "region dropped while 58 mbuf(s) reference it; not freed"
/// and mbufs outstanding (an outside-in test), where docs/usage.md promises a drained stop.
#[test]
fn an_interrupted_loopback_gives_every_mbuf_back() {
    let mut child = ddpdk(&eal(), &["--ddp-loopback", "--ddp-bytes", "1099511627776"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // The tagged writes begin once the regions are registered (the table comes at the end).
    let (reader, head) = read_until_line(&mut child, "Registered STag");
    std::thread::sleep(Duration::from_secs(1));
    let (stdout, o) = signal_and_finish(child, reader, head, "-INT", 60);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    // What it measured before the signal is printed (4096 writes of 1 KiB take milliseconds;
    // an interrupted run printed no row: found by an outside-in test).
    assert!(
        stdout
            .lines()
            .any(|l| l.trim_start().starts_with("tagged") && l.ends_with("| verified")),
        "no row of what was measured:\n{stdout}"
    );
    for leak in ["not freed", "outstanding", "not back in their pool"] {
        assert!(!stderr.contains(leak), "{leak:?}:\n{stdout}\n{stderr}");
    }
}

/// A run leaves no runtime directory behind: DPDK 22.11 keeps its shared configuration and
/// memory maps (12 MB with --no-huge) in /var/run/dpdk/<file-prefix> after rte_eal_cleanup, so
/// each new prefix filled the disk for good (44 GB on a development machine). The primary of a
/// prefix removes them at its end; a --no-shconf process that shares the prefix while that
/// primary runs must not take the primary's files.
#[test]
fn a_run_removes_its_runtime_directory_and_leaves_a_running_primarys_alone() {
    let prefix = format!("ddpdk-rundir-{}", std::process::id());
    let dir = PathBuf::from("/var/run/dpdk").join(&prefix);
    let eal_on = |shconf: bool| {
        let mut e: Vec<String> = eal().into_iter().filter(|a| a != "--no-shconf").collect();
        if !shconf {
            e.push("--no-shconf".into());
        }
        e.push(format!("--file-prefix={prefix}"));
        e
    };
    let mut primary = ddpdk(
        &eal_on(true),
        &["--ddp-loopback", "--ddp-bytes", "1099511627776"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn");
    let (reader, head) = read_until_line(&mut primary, "Registered STag");
    assert!(
        dir.join("config").exists(),
        "the primary's {dir:?} has no config"
    );
    let o = ddpdk(&eal_on(false), &["--ddp-loopback", "--ddp-bytes", "65536"])
        .output()
        .expect("run");
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        dir.join("config").exists() && dir.join("fbarray_memzone").exists(),
        "a --no-shconf run on the same prefix removed the running primary's files"
    );
    let (stdout, o) = signal_and_finish(primary, reader, head, "-INT", 60);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(!dir.exists(), "{dir:?} is left after its primary ended");
    // An EAL that fails to start once it made the prefix's files: memory beyond any address
    // space (200 TB; x86-64 gives a process 128).
    let e: Vec<String> = eal_on(true)
        .into_iter()
        .map(|a| if a == "256" { "200000000".into() } else { a })
        .collect();
    let o = ddpdk(&e, &["--run-for", "1"]).output().expect("run");
    let (stdout, stderr) = out(&o);
    assert!(
        o.status.code() == Some(1) && stderr.contains("EAL initialisation failed"),
        "{stdout}\n{stderr}"
    );
    assert!(!dir.exists(), "{dir:?} is left after a failed EAL start");
}

/// A perf server no client reached says so; its counters, all 0, did not (an outside-in
/// review). It ends with status 0, as a server's run does.
#[test]
fn a_perf_server_no_client_reached_says_so() {
    let mut e = eal();
    e.push("--vdev=net_ring0".into());
    let o = Command::new(BIN)
        .arg("perf")
        .arg("server")
        .args(&e)
        .args(["--", "--ip", "198.18.0.2", "--run-for", "1"])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("server: no client came in --run-for's 1 s"),
        "{stdout}\n{stderr}"
    );
}

#[test]
fn ddp_loopback_moves_verified_messages_and_exits_cleanly() {
    let o = ddpdk(
        &eal(),
        &[
            "--ddp-loopback",
            "--data-cores",
            "2",
            "--ddp-bytes",
            "256K",
            "--json",
        ],
    )
    .output()
    .expect("run");
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    for want in [
        "Association up: 8 streams, adaptation indication DDP",
        "the client resolved the server by ARP",
        "DDP Stream Session 1 accepted",
        "Session terminated, association shut down",
        "(all 2 data core(s) of each side acknowledged)",
        "RDMAP stream 2 accepted (IRD 16, ORD 16)",
        "Bye...",
    ] {
        assert!(stderr.contains(want), "missing {want:?}:\n{stderr}");
    }
    // With --json, stdout is JSON lines only: the rows, then the counters (they were text on
    // stderr, where a script reading stdout never saw them: an outside-in review).
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}\n{stdout}")))
        .collect();
    assert!(
        !stderr.contains(" core 0: "),
        "counters as text too:\n{stderr}"
    );
    let of_kind = |key: &str, side: &str| -> Vec<&serde_json::Value> {
        lines
            .iter()
            .filter_map(|l| l.get(key))
            .filter(|o| o["side"] == side)
            .collect()
    };
    for side in ["client", "server"] {
        assert_eq!(of_kind("data_core", side).len(), 2, "{side}:\n{stdout}");
        assert_eq!(of_kind("control", side).len(), 1, "{side}:\n{stdout}");
    }
    let server_control = of_kind("control", "server")[0];
    assert_eq!(
        (
            &server_control["packets"],
            &server_control["replies"],
            &server_control["accepted"]
        ),
        (&2.into(), &1.into(), &1.into()),
        "{stdout}"
    );
    // One JSON line per message size and model, each verified, with a latency distribution.
    let rows: Vec<&serde_json::Value> = lines.iter().filter(|l| l.get("kind").is_some()).collect();
    assert_eq!(rows.len() + 6, lines.len(), "{stdout}");
    let kinds: Vec<(String, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or("").to_string(),
                r["size"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("tagged", 1024),
            ("tagged", 16384),
            ("tagged", 262_144),
            ("tagged", 4_194_304),
            ("untagged", 64),
            ("untagged", 1400),
            ("untagged", 8000),
            ("read", 64),
            ("read", 16384),
            ("read", 262_144),
            ("fetchadd", 8)
        ]
        .map(|(k, s)| (k.to_string(), s))
    );
    for r in &rows {
        assert_eq!(r["verified"], true, "{r}");
        assert!(r["messages"].as_u64().unwrap_or(0) >= 1, "{r}");
        assert!(r["latency_us"]["p50"].as_u64().unwrap_or(0) >= 1, "{r}");
    }
    assert!(!stderr.contains("not back in their pool"), "{stderr}");
    // Issue 6 item 4: net_ring sends mbuf chains, so the client's tagged payload left by
    // reference to its source region (rte_pktmbuf_attach_extbuf), none of it copied, and the
    // server received those chains; every region was given back (none still referenced).
    let sum = |side: &str, counter: &str| -> u64 {
        of_kind("data_core", side)
            .iter()
            .map(|c| c[counter].as_u64().expect(counter))
            .sum()
    };
    let by_reference = sum("client", "zero_copy_spans");
    assert!(
        by_reference > 100,
        "{by_reference} spans by reference:\n{stdout}"
    );
    assert_eq!(sum("client", "copied_spans"), 0, "{stdout}");
    // One chain per packet (a 1500-byte packet holds one tagged segment of these sizes).
    let chained = sum("server", "rx_chained");
    assert!(
        chained > 100 && chained <= by_reference,
        "{chained} chains:\n{stdout}"
    );
    assert!(!stderr.contains("not freed"), "{stderr}");
}

/// A capture the disk could not hold is said and fails the run: `--pcap /dev/full` (every
/// write refused, ENOSPC) exited 0 with nothing written, and a small tmpfs gave a file cut in
/// the middle of a packet, without a word (an outside-in review). The transfer itself still
/// completes (a capture never stops it).
#[test]
fn a_capture_the_disk_refused_fails_the_run() {
    let o = Command::new(BIN)
        .arg("loopback")
        .args(eal())
        .arg("--")
        .args(["--ddp-bytes", "65536", "--pcap", "/dev/full"])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("--pcap /dev/full: ") && stderr.contains("the capture is incomplete"),
        "{stderr}"
    );
    assert!(
        stdout.contains("verified"),
        "the transfer completed:\n{stdout}"
    );
}

/// Every frame the two endpoints put on the wire, dissected by tshark (an independent SCTP
/// implementation; `deploy/setup.sh` installs it): every SCTP packet's CRC32c is good (RFC 9260
/// App. A), the association's whole life is there (INIT, INIT ACK, COOKIE ECHO, COOKIE ACK,
/// DATA, SACK, SHUTDOWN, SHUTDOWN ACK, SHUTDOWN COMPLETE), INIT and INIT ACK carry the
/// Adaptation Layer Indication (0xc006, RFC 5043 §11.1), DATA carries PPIDs 16 and 17, the
/// client's ARP request got its reply, and the RDMA Reads (RFC 5040 §4) and FetchAdds (RFC
/// 7306 §5.2) are on the wire as the RFCs say.
#[test]
fn every_frame_on_the_wire_passes_tshark() {
    let dir = std::env::temp_dir().join(format!("ddpdk-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let pcap = dir.join("loopback.pcap");
    // The job's own name (issue 17 item 5): `ddpdk loopback` is `-- --ddp-loopback`.
    let o = Command::new(BIN)
        .arg("loopback")
        .args(eal())
        .arg("--")
        .args([
            "--ddp-bytes",
            "65536",
            "--pcap",
            pcap.to_str().expect("utf-8"),
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    let fields = |filter: &str, field: &str| tshark::fields(&pcap, filter, field);
    let status = fields("sctp", "sctp.checksum.status");
    assert!(status.len() > 100, "{} SCTP packets", status.len());
    // Wireshark's checksum status: 1 good, 0 bad, 2 unverified.
    assert!(status.iter().all(|s| s == "1"), "not all good: {status:?}");
    let chunks = fields("sctp", "sctp.chunk_type");
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
    let adaptation = fields(
        "sctp.chunk_type == 1 || sctp.chunk_type == 2",
        "sctp.parameter_type",
    );
    assert_eq!(
        adaptation.iter().filter(|p| p.as_str() == "0xc006").count(),
        2,
        "{adaptation:?}"
    );
    let ppids = fields("sctp.chunk_type == 0", "sctp.data_payload_proto_id");
    assert!(ppids.iter().any(|p| p == "16") && ppids.iter().any(|p| p == "17"));
    assert!(ppids.iter().all(|p| p == "16" || p == "17"), "{ppids:?}");
    assert_eq!(
        fields("arp.opcode == 1 && !arp.isannouncement", "arp.opcode").len(),
        1,
        "one ARP request"
    );
    // RFC 5227 §2.3: each endpoint announced its address when it started, and tshark reads
    // them as ARP Announcements (sender and target our address).
    let announced = fields("arp.isannouncement", "arp.src.proto_ipv4");
    assert!(
        announced.contains(&"198.18.0.1".to_string())
            || announced.contains(&"198.18.0.2".to_string()),
        "{announced:?}"
    );
    assert_eq!(
        fields("arp.opcode == 2", "arp.opcode").len(),
        1,
        "one ARP reply"
    );
    // The RDMA Reads on stream 2 (issue 14 item 6): tshark has no dissector for DDP over SCTP
    // yet, so the DDP segments are decoded here from the same capture (RFC 5040 §4).
    let stream2 = fields(
        "sctp.chunk_type == 0 && sctp.data_sid == 2",
        "sctp.data_payload_proto_id",
    );
    assert!(stream2.iter().any(|p| p == "16"), "{stream2:?}");
    let rdmap = rdmap_segments(&std::fs::read(&pcap).expect("pcap"));
    let requests: Vec<&RdmapSegment> = rdmap
        .iter()
        .filter(|s| s.opcode == Opcode::ReadRequest)
        .collect();
    let responses: Vec<&RdmapSegment> = rdmap
        .iter()
        .filter(|s| s.opcode == Opcode::ReadResponse)
        .collect();
    // 64 B, 16 KiB and 256 KiB Reads within the 64 KiB budget: 1024 + 4 + 1.
    assert_eq!(requests.len(), 1029, "Read Requests");
    for r in &requests {
        assert_eq!(
            (r.tagged, r.qn),
            (false, Some(1)),
            "untagged on QN 1: {r:?}"
        );
        let rr = r.read_request.expect("a 28-byte Read Request header");
        assert!(
            responses.iter().any(|p| p.stag == Some(rr.sink_stag)),
            "a Read Response into the sink {:#x}",
            rr.sink_stag
        );
    }
    assert!(responses.iter().all(|p| p.tagged && p.version == 1));
    let answered: u64 = responses.iter().map(|p| p.payload_len as u64).sum();
    assert_eq!(answered, 1024 * 64 + 4 * 16384 + 262_144, "bytes read");
    // The loopback's FetchAdds (issue 14 item 7): Atomic Requests untagged on QN 1, each
    // answered by an Atomic Response untagged on QN 3 that echoes its Request Identifier
    // (RFC 7306 §5.2.1, §5.2.2).
    let atomic_requests: Vec<AtomicRequest> = rdmap
        .iter()
        .filter(|s| s.opcode == Opcode::AtomicRequest)
        .map(|s| {
            assert_eq!((s.tagged, s.qn), (false, Some(1)), "{s:?}");
            AtomicRequest::parse(&s.payload).expect("a 52-byte Atomic Request header")
        })
        .collect();
    let atomic_responses: Vec<AtomicResponse> = rdmap
        .iter()
        .filter(|s| s.opcode == Opcode::AtomicResponse)
        .map(|s| {
            assert_eq!((s.tagged, s.qn), (false, Some(3)), "{s:?}");
            AtomicResponse::parse(&s.payload).expect("a 12-byte Atomic Response header")
        })
        .collect();
    assert_eq!(atomic_requests.len(), 4096, "Atomic Requests");
    assert!(atomic_requests
        .iter()
        .all(|r| r.op == AtomicOp::FetchAdd && r.add_swap == 1));
    let answered_ids: Vec<u32> = atomic_responses.iter().map(|r| r.request_id).collect();
    let request_ids: Vec<u32> = atomic_requests.iter().map(|r| r.request_id).collect();
    assert_eq!(
        answered_ids, request_ids,
        "one response per request, in order"
    );
    assert!(
        atomic_responses
            .iter()
            .enumerate()
            .all(|(k, r)| r.original == k as u64),
        "performed one after another"
    );
    dissector_decodes_what_we_decode(&pcap, &rdmap);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The Lua dissector of deploy/wireshark (issue 17 item 3).
fn dissector() -> String {
    format!(
        "lua_script:{}",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/wireshark/ddp.lua")
    )
}

/// Issue 17 item 3: tshark with `deploy/wireshark/ddp.lua` reads the loopback's capture field
/// by field as this file's own decoder does: RDMAP opcodes of stream 2 in order, the Read
/// Requests' sizes and sinks, the Read Responses' STags, the session control messages of both
/// streams, and no expert info on any of our frames.
fn dissector_decodes_what_we_decode(pcap: &std::path::Path, rdmap: &[RdmapSegment]) {
    let lua = dissector();
    let with = |filter: &str, field: &str| tshark::fields_with(pcap, &["-X", &lua], filter, field);
    // Stream 2 is the RDMAP stream; stream 1's RsvdULP is not RDMAP's (version 0).
    let opcodes = with("rdmap", "rdmap.opcode");
    let ours: Vec<String> = rdmap.iter().map(|s| s.opcode.bits().to_string()).collect();
    assert_eq!(
        opcodes.len(),
        ours.len(),
        "one RDMAP header per stream-2 segment"
    );
    assert_eq!(opcodes, ours, "RDMAP opcodes, segment by segment");
    let sizes = with("rdmap.opcode == 1", "rdmap.read.size");
    let our_sizes: Vec<String> = rdmap
        .iter()
        .filter_map(|s| s.read_request.map(|r| r.size.to_string()))
        .collect();
    assert_eq!(sizes, our_sizes, "Read Request sizes");
    let sinks = with("rdmap.opcode == 1", "rdmap.read.sink_stag");
    let our_sinks: Vec<String> = rdmap
        .iter()
        .filter_map(|s| s.read_request.map(|r| format!("{:#010x}", r.sink_stag)))
        .collect();
    assert_eq!(sinks, our_sinks, "Read Request Data Sink STags");
    let response_stags = with("rdmap.opcode == 2", "rddp.stag");
    let our_stags: Vec<String> = rdmap
        .iter()
        .filter(|s| s.opcode == Opcode::ReadResponse)
        .filter_map(|s| s.stag.map(|t| format!("{t:#010x}")))
        .collect();
    assert_eq!(response_stags, our_stags, "Read Responses' STags");
    let lens = with("rdmap.opcode == 2", "rddp.payload_len");
    let our_lens: Vec<String> = rdmap
        .iter()
        .filter(|s| s.opcode == Opcode::ReadResponse)
        .map(|s| s.payload_len.to_string())
        .collect();
    assert_eq!(lens, our_lens, "Read Responses' payload lengths");
    // Session control (RFC 5043 §5.2.3): an Initiate and an Accept per stream, Terminates.
    let functions = with("rddp_sc", "rddp_sc.function");
    for (code, n) in [("1", 2), ("2", 2)] {
        assert_eq!(
            functions.iter().filter(|f| f.as_str() == code).count(),
            n,
            "function {code}: {functions:?}"
        );
    }
    assert!(
        functions.iter().any(|f| f == "4"),
        "a Terminate: {functions:?}"
    );
    assert!(
        with("_ws.expert", "_ws.expert.message").is_empty(),
        "expert info on our own frames"
    );
    // RFC 7306 §5.2.1, §5.2.2: the FetchAdds' Atomic Requests and their Responses, Request
    // Identifier by Request Identifier in capture order, and the Original Remote Data Values.
    let ids = with("rdmap.atomic.request_id", "rdmap.atomic.request_id");
    let our_ids: Vec<String> = rdmap
        .iter()
        .filter_map(|s| match s.opcode {
            Opcode::AtomicRequest => AtomicRequest::parse(&s.payload)
                .ok()
                .map(|r| r.request_id.to_string()),
            Opcode::AtomicResponse => AtomicResponse::parse(&s.payload)
                .ok()
                .map(|r| r.request_id.to_string()),
            _ => None,
        })
        .collect();
    assert!(our_ids.len() > 1000, "{} atomics", our_ids.len());
    assert_eq!(ids, our_ids, "Atomic Request Identifiers");
    let originals = with("rdmap.opcode == 11", "rdmap.atomic.original");
    let our_originals: Vec<String> = rdmap
        .iter()
        .filter(|s| s.opcode == Opcode::AtomicResponse)
        .filter_map(|s| AtomicResponse::parse(&s.payload).ok())
        .map(|r| format!("{:#018x}", r.original))
        .collect();
    assert_eq!(originals, our_originals, "Original Remote Data Values");
    let adds = with("rdmap.opcode == 10", "rdmap.atomic.add_swap");
    assert_eq!(adds.len(), our_ids.len() / 2, "one Add Data per request");
    assert!(adds.iter().all(|a| a == "0x0000000000000001"), "{adds:?}");
    let ops = with("rdmap.opcode == 10", "rdmap.atomic.op");
    assert!(ops.iter().all(|o| o == "0"), "FetchAdd (0): {ops:?}");
    // RFC 5040 §4.1: RsvdULP[8:39] is an Invalidate STag only on the two Sends with
    // Invalidate, none of which the loopback sends; reserved on its Read Requests and Atomics.
    assert!(
        with("rdmap", "rdmap.invalidate_stag").is_empty(),
        "an Invalidate STag on a message that has none"
    );
}

/// One Ethernet/IPv4/SCTP frame with a DATA chunk of `ppid` carrying `data`, in a pcap file.
fn one_data_frame_pcap(path: &std::path::Path, ppid: u32, data: &[u8]) {
    data_frames_pcap(path, &[&[(ppid, data)]]);
}

/// A pcap file of Ethernet/IPv4/SCTP frames, one per element of `frames`, each with a DATA
/// chunk (unordered, unfragmented, stream 1, TSNs counting from 1) per `(ppid, data)`.
fn data_frames_pcap(path: &std::path::Path, frames: &[&[(u32, &[u8])]]) {
    let mut pcap = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    pcap.extend_from_slice(&65535u32.to_le_bytes());
    pcap.extend_from_slice(&1u32.to_le_bytes()); // Ethernet
    let mut tsn = 1u32;
    for chunks in frames {
        let frame = data_frame(chunks, &mut tsn);
        pcap.extend_from_slice(&[0; 8]);
        pcap.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        pcap.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        pcap.extend_from_slice(&frame);
    }
    std::fs::write(path, pcap).expect("write pcap");
}

/// One Ethernet/IPv4/SCTP frame bundling a DATA chunk per `(ppid, data)` (RFC 9260 §6.10).
fn data_frame(chunks: &[(u32, &[u8])], tsn: &mut u32) -> Vec<u8> {
    let mut sctp = vec![0x13, 0x88, 0x13, 0x88, 0, 0, 0, 1, 0, 0, 0, 0];
    for (ppid, data) in chunks {
        let mut chunk = vec![0u8, 0x07]; // DATA, U B E
        chunk.extend_from_slice(&(16 + data.len() as u16).to_be_bytes());
        chunk.extend_from_slice(&tsn.to_be_bytes());
        *tsn += 1;
        chunk.extend_from_slice(&[0, 1, 0, 0]); // stream 1, SSN 0
        chunk.extend_from_slice(&ppid.to_be_bytes());
        chunk.extend_from_slice(data);
        while chunk.len() % 4 != 0 {
            chunk.push(0);
        }
        sctp.extend_from_slice(&chunk);
    }
    let total = 20 + sctp.len() as u16;
    let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    frame.extend_from_slice(&[
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        0,
        0x40,
        0,
        64,
        132,
        0,
        0,
    ]);
    frame.extend_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
    frame.extend_from_slice(&sctp);
    frame
}

/// A DDP Segment Chunk's data (RFC 5043 §5.2.2): DDP-SSN 0, then a tagged DDP header (RFC 5041
/// §4.2, DV 1, L set) with `rsvdulp` (RDMAP's control field), then `payload`.
fn tagged_segment(rsvdulp: u8, stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    let mut d = vec![0, 0, 0xc1, rsvdulp];
    d.extend_from_slice(&stag.to_be_bytes());
    d.extend_from_slice(&to.to_be_bytes());
    d.extend_from_slice(payload);
    d
}

/// A DDP Segment Chunk's data: DDP-SSN 0, an untagged DDP header (RFC 5041 §4.3, DV 1, L as
/// `last`) whose RsvdULP is `rsvdulp` (RDMAP's control field and Invalidate STag), then
/// `payload`.
fn untagged_segment(
    rsvdulp: [u8; 5],
    last: bool,
    qn: u32,
    msn: u32,
    mo: u32,
    payload: &[u8],
) -> Vec<u8> {
    let mut d = vec![0, 0, if last { 0x41 } else { 0x01 }];
    d.extend_from_slice(&rsvdulp);
    for word in [qn, msn, mo] {
        d.extend_from_slice(&word.to_be_bytes());
    }
    d.extend_from_slice(payload);
    d
}

/// tshark's values of `field` with the dissector over `pcap`'s frames matching `filter`.
fn dissected(pcap: &std::path::Path, filter: &str, field: &str) -> Vec<String> {
    tshark::fields_with(pcap, &["-X", &dissector()], filter, field)
}

/// Several DDP segments bundled in one SCTP packet (RFC 9260 §6.10; RFC 5043 §9 asks for room
/// to bundle): each is dissected on its own, and the Info column keeps each chunk's text apart
/// (it read "... MO 0 LDATA (TSN=1) ..." before).
#[test]
fn dissector_reads_bundled_segments_apart() {
    let dir = std::env::temp_dir().join(format!("ddpdk-lua-bundle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let pcap = dir.join("bundle.pcap");
    let read = |msn: u32, size: u32| {
        let rr = ReadRequest {
            sink_stag: 0x100 + msn,
            sink_to: 0,
            size,
            source_stag: 0x200,
            source_to: 0,
        };
        untagged_segment([0x41, 0, 0, 0, 0], true, 1, msn, 0, &rr.to_bytes())
    };
    let (a, b) = (read(1, 64), read(2, 4096));
    let write = tagged_segment(0x40, 0x300, 0, &[1; 32]);
    let sc = [0u8, 0, 0, 1]; // Initiate, no Private Data
    data_frames_pcap(
        &pcap,
        &[&[
            (PPID_DDP_SEGMENT, &a[..]),
            (PPID_DDP_SEGMENT, &write[..]),
            (PPID_DDP_SEGMENT, &b[..]),
            (17, &sc[..]),
        ]],
    );
    assert_eq!(dissected(&pcap, "rdmap", "rdmap.opcode"), ["1", "0", "1"]);
    assert_eq!(dissected(&pcap, "rdmap", "rdmap.read.size"), ["64", "4096"]);
    assert_eq!(
        dissected(&pcap, "rddp", "rddp.payload_len"),
        ["28", "32", "28"]
    );
    assert_eq!(dissected(&pcap, "rddp_sc", "rddp_sc.function"), ["1"]);
    let info = dissected(&pcap, "rddp", "_ws.col.Info").join("\n");
    assert_has_all(
        &info,
        &[
            "MSN 1 MO 0 L DATA (TSN=1) RDMA Write",
            "TO 0x0 L DATA (TSN=2) RDMA Read Request",
            "MSN 2 MO 0 L DATA (TSN=3) DDP Session Initiate",
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// RFC 5040 §4.1: the Invalidate STag in RsvdULP[8:39] of a Send with Invalidate (0x4) and a
/// Send with SE and Invalidate (0x6), and on no other message (a Send, a Read Request).
#[test]
fn dissector_shows_invalidate_stag_only_where_there_is_one() {
    let dir = std::env::temp_dir().join(format!("ddpdk-lua-inval-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let pcap = dir.join("inval.pcap");
    let segments: Vec<Vec<u8>> = [0x44u8, 0x46, 0x43, 0x41]
        .iter()
        .map(|&control| {
            let payload = if control == 0x41 {
                vec![0; 28]
            } else {
                vec![9; 4]
            };
            let qn = if control == 0x41 { 1 } else { 0 };
            untagged_segment([control, 0xab, 0xcd, 0, control], true, qn, 1, 0, &payload)
        })
        .collect();
    let chunks: Vec<(u32, &[u8])> = segments
        .iter()
        .map(|s| (PPID_DDP_SEGMENT, s.as_slice()))
        .collect();
    data_frames_pcap(&pcap, &[&chunks]);
    assert_eq!(
        dissected(&pcap, "rdmap", "rdmap.opcode"),
        ["4", "6", "3", "1"]
    );
    assert_eq!(
        dissected(&pcap, "rdmap", "rdmap.invalidate_stag"),
        ["0xabcd0044", "0xabcd0046"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// RFC 5040 §4.8: a Terminate's error named by layer, type and code (RDMAP's, and DDP's of RFC
/// 5041 §7.2), its M, D and R flags, and what D and R announce: the DDP Segment Length and the
/// terminated DDP header (18 bytes untagged, 14 tagged, by its T bit), the terminated Read
/// Request header; one cut inside them is truncated, bytes past them are flagged.
#[test]
fn dissector_reads_terminate_headers() {
    let dir = std::env::temp_dir().join(format!("ddpdk-lua-term-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let pcap = dir.join("terminate.pcap");
    // The untagged DDP header of a Read Request on QN 1, MSN 7; that Read Request.
    let ddp_untagged = &untagged_segment([0x41, 0, 0, 0, 0], true, 1, 7, 0, &[])[2..];
    let ddp_tagged = &tagged_segment(0x40, 0xdead, 0x10, &[])[2..];
    let rr = ReadRequest {
        sink_stag: 0x100,
        sink_to: 0,
        size: 64,
        source_stag: 0x200,
        source_to: 0,
    }
    .to_bytes();
    let terminate = |control: [u8; 4], segment_len: Option<u16>, headers: &[&[u8]]| {
        let mut p = control.to_vec();
        if let Some(n) = segment_len {
            p.extend_from_slice(&n.to_be_bytes());
        }
        for h in headers {
            p.extend_from_slice(h);
        }
        untagged_segment([0x47, 0, 0, 0, 0], true, 2, 1, 0, &p)
    };
    let segments = [
        // RDMAP, Remote Operation Error, Unexpected OpCode; M D R.
        terminate([0x02, 0x06, 0xe0, 0], Some(48), &[ddp_untagged, &rr]),
        // DDP, Tagged Buffer Error, Invalid STag; M D.
        terminate([0x11, 0x00, 0xc0, 0], Some(1038), &[ddp_tagged]),
        // DDP, Untagged Buffer Error, Invalid QN; D, its header cut.
        terminate([0x12, 0x01, 0x40, 0], Some(48), &[&ddp_untagged[..5]]),
        // No flags, two bytes after the Terminate Control.
        terminate([0x02, 0xff, 0, 0], None, &[&[0, 0]]),
    ];
    let frames: Vec<[(u32, &[u8]); 1]> = segments
        .iter()
        .map(|s| [(PPID_DDP_SEGMENT, s.as_slice())])
        .collect();
    let frames: Vec<&[(u32, &[u8])]> = frames.iter().map(|f| f.as_slice()).collect();
    data_frames_pcap(&pcap, &frames);
    let field = |name: &str| dissected(&pcap, "rdmap", name);
    assert_eq!(
        field("rdmap.term.error"),
        [
            "Remote Operation Error: Unexpected OpCode",
            "Tagged Buffer Error: Invalid STag",
            "Untagged Buffer Error: Invalid QN",
            "Remote Operation Error: Unspecified Error",
        ]
    );
    assert_eq!(field("rdmap.term.m"), ["1", "1", "0", "0"]);
    assert_eq!(field("rdmap.term.d"), ["1", "1", "1", "0"]);
    assert_eq!(field("rdmap.term.r"), ["1", "0", "0", "0"]);
    assert_eq!(field("rdmap.term.ddp_segment_length"), ["48", "1038", "48"]);
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    assert_eq!(
        field("rdmap.term.ddp_header"),
        [hex(ddp_untagged), hex(ddp_tagged)]
    );
    assert_eq!(field("rdmap.term.rdma_header"), [hex(&rr)]);
    let experts = |frame: u32| {
        dissected(
            &pcap,
            &format!("frame.number == {frame}"),
            "_ws.expert.message",
        )
        .join("\n")
    };
    assert!(!experts(1).contains("RDMAP"), "{}", experts(1));
    assert!(!experts(2).contains("RDMAP"), "{}", experts(2));
    assert!(
        experts(3).contains("RDMAP header truncated"),
        "{}",
        experts(3)
    );
    assert!(
        experts(4).contains("Bytes after the RDMAP header"),
        "{}",
        experts(4)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tagged segment's TO is 64 bits (RFC 5041 §4.2): the Info column gives it digit for digit,
/// past 2^53 and up to 2^64 - 1, where a Lua number (a double) rounds it and string.format
/// raised a Lua error that hid the rest of the segment (its payload and RDMAP).
#[test]
fn dissector_reads_64_bit_tagged_offsets() {
    let dir = std::env::temp_dir().join(format!("ddpdk-lua-to-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let pcap = dir.join("to.pcap");
    let top = tagged_segment(0x40, 0x1234, u64::MAX, &[7; 8]);
    let odd = tagged_segment(0x40, 0x1234, 0x1234_5678_9abc_def1, &[7; 8]);
    data_frames_pcap(
        &pcap,
        &[
            &[(PPID_DDP_SEGMENT, &top[..])],
            &[(PPID_DDP_SEGMENT, &odd[..])],
        ],
    );
    let info = dissected(&pcap, "rddp", "_ws.col.Info").join("\n");
    assert_has_all(&info, &["TO 0xffffffffffffffff", "TO 0x123456789abcdef1"]);
    assert_eq!(dissected(&pcap, "rddp", "rddp.payload_len"), ["8", "8"]);
    assert_eq!(dissected(&pcap, "rdmap", "rdmap.opcode"), ["0", "0"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 17 item 3: the dissector's expert info for malformed DDP: a segment shorter than its
/// header, an untagged one cut inside its header, a session control message under 4 bytes, a
/// Terminate with Private Data, a truncated Read Request; a message that is its RDMAP header
/// alone continued past MO 0 (not decoded there) or with bytes after the header, an empty
/// Immediate Data.
#[test]
fn dissector_flags_malformed_segments() {
    let dir = std::env::temp_dir().join(format!("ddpdk-lua-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let lua = dissector();
    let rdmap_read_request_cut = {
        // DDP-SSN, untagged DV 1 L, RsvdULP: RDMAP v1 opcode 1, QN 1, MSN 1, MO 0; 8 bytes of 28.
        let mut d = vec![
            0, 1, 0x41, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0,
        ];
        d.extend_from_slice(&[0; 8]);
        d
    };
    for (name, ppid, data, want) in [
        (
            "short",
            16,
            vec![0u8, 1],
            "Segment shorter than its DDP header",
        ),
        (
            "untagged",
            16,
            vec![0, 1, 0x41, 0, 0, 0, 0, 0, 0, 0],
            "Segment shorter than its DDP header",
        ),
        (
            "sc",
            17,
            vec![0, 0, 0],
            "Stream Session Control shorter than 4 bytes",
        ),
        (
            "terminate",
            17,
            vec![0, 5, 0, 4, 1, 2],
            "Terminate carries Private Data",
        ),
        ("read", 16, rdmap_read_request_cut, "RDMAP header truncated"),
        // RFC 5040 §4.2, RFC 7306 §4.1: these messages are their header, at MO 0, in one
        // segment; a segment at MO 28 has no header, and one with L clear is not all of it.
        (
            "read_mo",
            16,
            untagged_segment([0x41, 0, 0, 0, 0], true, 1, 1, 28, &[0x11; 28]),
            "spans several DDP segments",
        ),
        (
            "atomic_not_last",
            16,
            untagged_segment([0x4a, 0, 0, 0, 0], false, 1, 1, 0, &[0; 52]),
            "spans several DDP segments",
        ),
        (
            "read_trailing",
            16,
            untagged_segment([0x41, 0, 0, 0, 0], true, 1, 1, 0, &[0; 30]),
            "Bytes after the RDMAP header",
        ),
        // RFC 5041 §4.1: DV is 1.
        (
            "dv",
            16,
            {
                let mut d = tagged_segment(0x40, 1, 0, &[0; 4]);
                d[2] = 0xc2;
                d
            },
            "DDP version (DV) is not 1",
        ),
        // RFC 5040 §4.2: a Read Request is untagged on QN 1, a Send untagged on QN 0.
        (
            "read_tagged",
            16,
            tagged_segment(0x41, 1, 0, &[0; 28]),
            "wrong buffer model or untagged queue",
        ),
        (
            "send_qn1",
            16,
            untagged_segment([0x43, 0, 0, 0, 0], true, 1, 1, 0, &[0; 4]),
            "wrong buffer model or untagged queue",
        ),
        (
            "opcode_12",
            16,
            untagged_segment([0x4c, 0, 0, 0, 0], true, 0, 1, 0, &[0; 4]),
            "Opcode defined by neither",
        ),
        // RFC 5043 §5.2.3 defines Function Codes 1 to 4.
        (
            "function_9",
            17,
            vec![0, 0, 0, 9],
            "Function Code not defined",
        ),
        (
            "immediate_empty",
            16,
            untagged_segment([0x48, 0, 0, 0, 0], true, 0, 1, 0, &[]),
            "RDMAP header truncated",
        ),
    ] {
        let pcap = dir.join(format!("{name}.pcap"));
        one_data_frame_pcap(&pcap, ppid, &data);
        let got = tshark::fields_with(&pcap, &["-X", &lua], "_ws.expert", "_ws.expert.message");
        assert!(got.iter().any(|m| m.contains(want)), "{name}: {got:?}");
        if name == "read_mo" {
            // Not read as a Read Request header: its bytes are not one.
            assert!(dissected(&pcap, "rdmap", "rdmap.read.size").is_empty());
        }
    }
    // RFC 5040 §4.1: RV is 1; another only reaches RDMAP with the preference "always".
    let pcap = dir.join("rv.pcap");
    one_data_frame_pcap(&pcap, 16, &tagged_segment(0x80, 1, 0, &[0; 4]));
    let options = ["-X", &lua, "-o", "rddp.rdmap:always"];
    let got = tshark::fields_with(&pcap, &options, "_ws.expert", "_ws.expert.message");
    assert!(
        got.iter()
            .any(|m| m.contains("RDMAP version (RV) is not 1")),
        "{got:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// RFC 5043 §6.1: a session's DDP-SSNs go up by one on a stream, with no gaps. The dissector
/// follows them per stream and direction: a gap is flagged with how many are missing, a DDP-SSN
/// seen before as a repeat (an SCTP retransmission), one below the highest and not seen before
/// as late (unordered chunks, §5.2.1); an Initiate starts the count anew, and a frame's verdict
/// is the same however often it is dissected.
#[test]
fn dissector_follows_ddp_ssns_per_stream_rfc5043_6_1() {
    let dir = std::env::temp_dir().join(format!("ddpdk-lua-ssn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let pcap = dir.join("ssn.pcap");
    let seg = |ssn: u16| {
        let mut d = tagged_segment(0x40, 0x300, 0, &[1; 8]);
        d[..2].copy_from_slice(&ssn.to_be_bytes());
        d
    };
    let initiate = [0u8, 0, 0, 1];
    let segs: Vec<Vec<u8>> = [1, 3, 3, 2, 4, 2].into_iter().map(seg).collect();
    let mut frames: Vec<Vec<(u32, &[u8])>> = vec![vec![(17, &initiate[..])]];
    frames.extend(segs.iter().map(|d| vec![(PPID_DDP_SEGMENT, &d[..])]));
    // A new session on the stream: its DDP-SSNs start again, 1 is not a repeat.
    frames.push(vec![(17, &initiate[..])]);
    frames.push(vec![(PPID_DDP_SEGMENT, &segs[0][..])]);
    let frames: Vec<&[(u32, &[u8])]> = frames.iter().map(Vec::as_slice).collect();
    data_frames_pcap(&pcap, &frames);
    let experts = |frame: usize| {
        dissected(
            &pcap,
            &format!("frame.number == {frame}"),
            "_ws.expert.message",
        )
        .join("\n")
    };
    let want = [
        (1, ""),
        (2, ""),
        (3, "DDP-SSN gap: 1 DDP-SSN(s) before this one not seen"),
        (4, "DDP-SSN seen before on this stream"),
        (5, "DDP-SSN below one already seen and not seen before"),
        (6, ""),
        (7, "DDP-SSN seen before on this stream"),
        (8, ""),
        (9, ""),
    ];
    for (frame, expert) in want {
        let got = experts(frame);
        if expert.is_empty() {
            assert!(!got.contains("DDP-SSN"), "frame {frame}: {got}");
        } else {
            assert!(got.contains(expert), "frame {frame}: {got}");
        }
    }
    assert_eq!(
        dissected(&pcap, "rddp.ssn_gap", "frame.number"),
        ["3"],
        "filterable by the expert's name"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Untagged MSNs (RFC 5041 §4.3: from 1, up by one a message on each queue, the same on every
/// segment of a message): a skipped MSN is flagged with how many messages are missing, per
/// queue; a message's second segment and another queue's MSNs are not.
#[test]
fn dissector_follows_untagged_msns_per_queue_rfc5041_4_3() {
    let dir = std::env::temp_dir().join(format!("ddpdk-lua-msn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let initiate = [0u8, 0, 0, 1];
    // (QN, MSN, MO, L) in capture order, DDP-SSNs 1, 2, ... so that only MSNs are news.
    let msgs = [
        (0, 1, 0, false),
        (0, 1, 1000, true),
        (0, 3, 0, true),
        (0, 2, 0, true),
        (1, 2, 0, true),
        (0, 2, 0, true),
        (0, 4, 0, true),
    ];
    let segs: Vec<Vec<u8>> = msgs
        .iter()
        .enumerate()
        .map(|(i, &(qn, msn, mo, last))| {
            let mut d = untagged_segment([0; 5], last, qn, msn, mo, &[7; 16]);
            d[..2].copy_from_slice(&(i as u16 + 1).to_be_bytes());
            d
        })
        .collect();
    let started = dir.join("started.pcap");
    let mut frames: Vec<Vec<(u32, &[u8])>> = vec![vec![(17, &initiate[..])]];
    frames.extend(segs.iter().map(|d| vec![(PPID_DDP_SEGMENT, &d[..])]));
    let frames: Vec<&[(u32, &[u8])]> = frames.iter().map(Vec::as_slice).collect();
    data_frames_pcap(&started, &frames);
    let experts = |pcap: &std::path::Path, frame: usize| {
        dissected(
            pcap,
            &format!("frame.number == {frame}"),
            "_ws.expert.message",
        )
        .join("\n")
    };
    let want = [
        (2, ""),
        (3, ""),
        (
            4,
            "MSN gap: 1 message(s) before this one on queue 0 not seen",
        ),
        (5, "MSN below one already seen on this queue"),
        (
            6,
            "MSN gap: 1 message(s) before this one on queue 1 not seen",
        ),
        (7, ""),
        (8, ""),
    ];
    for (frame, expert) in want {
        let got = experts(&started, frame);
        if expert.is_empty() {
            assert!(!got.contains("MSN"), "frame {frame}: {got}");
        } else {
            assert!(got.contains(expert), "frame {frame}: {got}");
        }
        assert!(!got.contains("DDP-SSN"), "frame {frame}: {got}");
    }
    assert_eq!(
        dissected(&started, "rddp.msn_gap", "frame.number"),
        ["4", "6"],
        "filterable by the expert's name"
    );
    // A capture that begins mid-session has no first MSN to hold a queue to.
    let joined = dir.join("joined.pcap");
    let late: Vec<Vec<(u32, &[u8])>> = segs[2..3]
        .iter()
        .chain(&segs[6..])
        .map(|d| vec![(PPID_DDP_SEGMENT, &d[..])])
        .collect();
    let late: Vec<&[(u32, &[u8])]> = late.iter().map(Vec::as_slice).collect();
    data_frames_pcap(&joined, &late);
    assert!(
        !experts(&joined, 1).contains("MSN"),
        "{}",
        experts(&joined, 1)
    );
    assert!(
        !experts(&joined, 2).contains("MSN"),
        "3 then 4: {}",
        experts(&joined, 2)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// One RDMAP message segment of a capture: DDP over SCTP (PPID 16), as RFC 5040 §4 reads it.
#[derive(Debug)]
struct RdmapSegment {
    tagged: bool,
    version: u8,
    opcode: Opcode,
    qn: Option<u32>,
    stag: Option<u32>,
    read_request: Option<ReadRequest>,
    payload_len: usize,
    /// The payload of an untagged segment (RDMAP's own headers: RFC 7306's are whole here).
    payload: Vec<u8>,
}

/// Every DDP segment of an RDMAP stream in a pcap of Ethernet/IPv4 frames (the loopback's
/// `--pcap`): RDMAP's control field from RsvdULP, the Read Request header where there is one.
fn rdmap_segments(pcap: &[u8]) -> Vec<RdmapSegment> {
    let mut out = Vec::new();
    let mut at = 24; // the pcap file header
    while at + 16 <= pcap.len() {
        let incl = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().expect("4 bytes")) as usize;
        let frame = &pcap[at + 16..at + 16 + incl];
        at += 16 + incl;
        // Ethernet II, IPv4 (protocol 132), SCTP.
        if frame.len() < 34 || frame[12..14] != [0x08, 0x00] || frame[23] != 132 {
            continue;
        }
        let ihl = usize::from(frame[14] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([frame[16], frame[17]]));
        let sctp = &frame[14 + ihl..14 + total];
        let mut off = 12;
        while off + 4 <= sctp.len() {
            let len = usize::from(u16::from_be_bytes([sctp[off + 2], sctp[off + 3]]));
            assert!(len >= 4 && off + len <= sctp.len(), "chunk length");
            let chunk = &sctp[off..off + len];
            // DATA: type, flags, length, TSN, stream id, SSN, PPID, user data (RFC 9260 §3.3.1).
            let data = (chunk[0] == 0 && len > 16).then(|| {
                (
                    u16::from_be_bytes([chunk[8], chunk[9]]),
                    u32::from_be_bytes([chunk[12], chunk[13], chunk[14], chunk[15]]),
                )
            });
            if data == Some((2, PPID_DDP_SEGMENT)) {
                let seg = SegmentPacket::new_checked(&chunk[16..]).expect("a DDP segment");
                let control = Control::from_rsvd_ulp(seg.rsvd_ulp()).expect("RsvdULP");
                let payload = seg.payload();
                out.push(RdmapSegment {
                    tagged: seg.tagged(),
                    version: control.version,
                    opcode: control.opcode,
                    qn: seg.qn(),
                    stag: seg.stag(),
                    read_request: (control.opcode == Opcode::ReadRequest)
                        .then(|| ReadRequest::parse(payload).ok())
                        .flatten(),
                    payload_len: payload.len(),
                    payload: if seg.tagged() {
                        Vec::new()
                    } else {
                        payload.to_vec()
                    },
                });
            }
            off += len.next_multiple_of(4);
        }
    }
    out
}

/// Two `ddpdk` processes over `net_memif`: a server (`--ddp-listen`) and a client
/// (`--ddp-connect`) set up an association and a DDP session; the server offers a region in the
/// Accept's Private Data; the client writes tagged messages into it for a second, terminates,
/// shuts down and reports its goodput; the server saw exactly as many tagged messages
/// delivered as the client had completed, with no segment refused.
#[test]
fn two_processes_over_memif_move_tagged_writes() {
    let memif = MemifDir::new("ep");
    let eal = |role: &str, lcores: &str| memif.eal(role, lcores);
    let mut server = ddpdk(
        &eal("server", "0@0"),
        &[
            "--ddp-listen",
            "--ip",
            "198.18.0.2",
            "--run-for",
            "30",
            "--region-bytes",
            "1048576",
            "--json",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("server");
    // The client starts once the server's memif socket exists (its "listening" line), however
    // slow the machine; the rest of the server's output is collected meanwhile.
    let (head, rest) =
        procs::read_until(server.stderr.take().expect("stderr"), "the server", |l| {
            l.contains("(listening)")
        });
    let client = ddpdk(
        &eal("client", "0@1"),
        &[
            "--ddp-connect",
            "198.18.0.2",
            "--ip",
            "198.18.0.1",
            "--run-for",
            "1",
            "--ddp-size",
            "16384",
            "--json",
        ],
    )
    .output()
    .expect("client");
    let s = server.wait_with_output().expect("server exit");
    let (cout, cerr) = out(&client);
    let (sout, _) = out(&s);
    let serr = head + &rest.join().expect("server stderr reader");
    assert_eq!(client.status.code(), Some(0), "client:\n{cout}\n{cerr}");
    assert_eq!(s.status.code(), Some(0), "server:\n{sout}\n{serr}");
    let report: serde_json::Value = cout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v.get("ddp_goodput").is_some())
        .unwrap_or_else(|| panic!("no goodput report:\n{cout}\n{cerr}"));
    let messages = report["ddp_goodput"]["messages"].as_u64().unwrap_or(0);
    assert!(messages > 0, "{report}");
    // Issue 6 item 4: the writes left from the client's registered region, every segment's
    // payload an mbuf attached to it (net_memif sends chains), none copied.
    let by_reference = report["ddp_goodput"]["spans_by_reference"]
        .as_u64()
        .unwrap_or(0);
    assert!(by_reference >= messages * 11, "{report}");
    assert_eq!(report["ddp_goodput"]["spans_copied"], 0, "{report}");
    assert!(
        serr.contains(&format!(
            "server: {messages} tagged messages delivered, 0 errors"
        )),
        "client completed {messages}:\n{serr}"
    );
    assert!(serr.contains("Association closed: shut down"), "{serr}");
    // Each side's load over the transfer (`CoreStats::busy_ns`): the sender's as a share in
    // the report, the receiver's in its summary line; both did work, neither more than all.
    let sender_busy = report["ddp_goodput"]["cores_busy"].as_f64().unwrap_or(-1.0);
    assert!(sender_busy > 0.0 && sender_busy <= 1.0, "{report}");
    let receiver_busy = serr
        .split("data cores busy ")
        .nth(1)
        .and_then(|r| r.split(" %").next())
        .and_then(|v| v.parse::<f64>().ok());
    assert!(
        receiver_busy.is_some_and(|b| b > 0.0 && b <= 100.0),
        "no busy share in:\n{serr}"
    );
    // Byte-exact across the processes: the server's region holds what the client wrote.
    let crc = report["ddp_goodput"]["region_crc32c"]
        .as_str()
        .unwrap_or("none");
    let len = report["ddp_goodput"]["region_len"].as_u64().unwrap_or(0);
    assert!(
        serr.contains(&format!("crc32c {crc} over {len} bytes")),
        "client expects {crc} over {len}:\n{serr}"
    );
    // With --json the server's half is a JSON line on stdout too (its stdout was empty
    // before): the same count, and the region's crc32c in the client's spelling.
    let server_report: serde_json::Value = sout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v.get("ddp_server").is_some())
        .unwrap_or_else(|| panic!("no server report on stdout:\n{sout}"));
    assert_eq!(
        server_report["ddp_server"]["delivered"], messages,
        "{server_report}"
    );
    assert_eq!(
        server_report["ddp_server"]["regions"][0]["crc32c"], crc,
        "{server_report}"
    );
}

/// Issue 6 item 5: the DDP shell, driven by `--cmdline-file` alone in two processes over
/// `net_memif`. The server registers a region and offers it to sessions it accepts
/// (`--listen`), and has receive buffers posted for each (`recv auto`); it waits for its
/// client, then checksums its regions. The client opens an association and a session, writes
/// 1 MiB of tagged messages into the offered region, sends eight untagged messages, shows the
/// association and the per-core counters, closes the session and the association. The
/// server's `mr checksum` (CRC32c) equals the CRC32c of the bytes the client wrote, and of the
/// untagged bytes it sent.
#[test]
fn ddp_shell_scripts_drive_two_endpoints_over_memif() {
    let memif = MemifDir::new("shell");
    let eal = |role: &str, lcores: &str| memif.eal(role, lcores);
    let server_cmds = script(
        "shell-server",
        "mr reg 8000 local\nrecv auto 0 last 1000 8\n\
         mr reg 1048576 remote-write\nsession offer last\nshow mr\nwait closed 60\n\
         mr checksum all\nmr checksum last sha256\nshow fwd stats all\nquit\n",
    );
    let client_cmds = script(
        "shell-client",
        "assoc open 198.18.0.2\nsession open 1 1 hello\nshow session\n\
         send tagged 1 1 offer 0 65536 16\nsend untagged 1 1 0 1000 8\n\
         mr reg 131072 local\nmr fill last 90\nsend tagged 1 1 offer 0 65536 16 --from last\n\
         show assoc\nshow fwd stats all\n\
         session close 1 1\nassoc close 1\nquit\n",
    );
    let server = ddpdk(
        &eal("server", "0@0,1@1"),
        &[
            "--ip",
            "198.18.0.2",
            "--listen",
            "--cmdline-file",
            server_cmds.to_str().expect("utf-8"),
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("server");
    // The client starts once the server's port is up (its memif socket listens then).
    let mut server = server;
    let (head, rest) =
        procs::read_until(server.stdout.take().expect("stdout"), "the server", |l| {
            l.contains("DDP endpoint on port")
        });
    let client = ddpdk(
        &eal("client", "0@1,1@0"),
        &[
            "--ip",
            "198.18.0.1",
            "--cmdline-file",
            client_cmds.to_str().expect("utf-8"),
        ],
    )
    .output()
    .expect("client");
    let s = server.wait_with_output().expect("server exit");
    let (cout, cerr) = out(&client);
    let (_, serr) = out(&s);
    let sout = head + &rest.join().expect("server stdout reader");
    let client_text = cout + &cerr;
    let server_text = sout + &serr;
    assert_eq!(client.status.code(), Some(0), "client:\n{client_text}");
    assert_eq!(s.status.code(), Some(0), "server:\n{server_text}");
    for want in [
        "Association 1 up: to 198.18.0.2 port 5000 on data core 0, 8 streams, adaptation \
         indication DDP",
        "Session 1 of association 1: established; the peer offers STag",
        "association 1 stream 1: Established",
        "Sent 16 x 65536 bytes on association 1 stream 1",
        "------- Data core 0 (associations 1",
        "Session 1 of association 1: terminated",
        "Association 1 closed: shut down",
    ] {
        assert!(
            client_text.contains(want),
            "client lacks {want:?}:\n{client_text}"
        );
    }
    // `assoc close` says the end once: the Closed event is the command's answer, not also a
    // line of its own (it printed both).
    assert_eq!(
        client_text.matches(" closed: shut down").count(),
        1,
        "{client_text}"
    );
    // The core's load (`CoreStats::busy_ns`): it moved 1 MiB, so part of its time was busy.
    let busy = client_text
        .split("busy since start: ")
        .nth(1)
        .and_then(|r| r.split(" %").next())
        .and_then(|v| v.parse::<f64>().ok());
    assert!(
        busy.is_some_and(|b| b > 0.0 && b <= 100.0),
        "no busy share in:\n{client_text}"
    );
    for want in [
        "Association 1 accepted from 198.18.0.1 port 5000",
        // The session it accepted is said in text too (it was only a JSON event).
        "Session 1 of association 1: accepted the Initiate",
        "All 1 association(s) closed",
        "remote-write  (offered)",
        "accepted: 1",
    ] {
        assert!(
            server_text.contains(want),
            "server lacks {want:?}:\n{server_text}"
        );
    }
    // The last tagged send went from the client's own region (byte 90 throughout) over the
    // whole offered region, by reference (net_memif sends chains): the server holds 1 MiB of
    // 90s, and the client's report of what it wrote agrees.
    let written = client_text
        .split("crc32c of the bytes written ")
        .nth(2)
        .and_then(|t| t.get(..10))
        .unwrap_or_else(|| panic!("no crc from the client:\n{client_text}"));
    assert!(
        server_text.contains(&format!("crc32c {written} over 1048576 bytes")),
        "the server's region is not what the client wrote ({written}):\n{server_text}"
    );
    let nineties = format!(
        "{:#010x}",
        ddpdk_dataplane::wire::crc32c::crc32c(&vec![90u8; 1 << 20])
    );
    assert_eq!(written, nineties, "the client sent its region's bytes");
    let by_reference: u64 = client_text
        .split("region spans by reference: ")
        .skip(1)
        .filter_map(|t| t.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    assert!(
        by_reference >= 16 * 46,
        "{by_reference} spans by reference:\n{client_text}"
    );
    assert!(server_text.contains(" sha256 "), "{server_text}");
    // Untagged: eight messages into the eight buffers posted behind the Accept (`recv auto`),
    // in MSN order, back to back: the server's 8000-byte region is what the client sent.
    let sent = client_text
        .split("crc32c of the bytes sent ")
        .nth(1)
        .and_then(|t| t.get(..10))
        .unwrap_or_else(|| panic!("no untagged crc from the client:\n{client_text}"));
    assert!(
        server_text.contains(&format!("crc32c {sent} over 8000 bytes")),
        "the server's receive buffers do not hold what the client sent ({sent}):\n{server_text}"
    );
}

/// An STag the peer invalidated (an RDMAP Send with Invalidate, RFC 5040 §5.3) is shown so and
/// no longer offered to new sessions: it used to stay "(offered)", and the next session's
/// first write into it ended that session with an invalid STag (session 24's shell probe).
#[test]
fn an_stag_the_peer_invalidated_is_shown_so_and_no_longer_offered() {
    let (client, client_text, server_code, server_text) = memif_shell_pair(
        "inval",
        "mr reg 1048576 remote\nsession offer last\nmr reg 8000 local\n\
         recv auto 0 last 1000 4\nwait session 60\nwait closed 60\nshow mr\nshow session\n\
         quit\n",
        "assoc open 198.18.0.2\nsession open 1 1 a --rdmap\n\
         rdma imm 1 1 7 2\nrdma send 1 1 10 1 --invalidate offer\nsession close 1 1\n\
         session open 1 3 plain\nsession close 1 3\n\
         mr reg 4096 local\nsend untagged 1 3 0 100 1 --from last\nassoc close 1\n\
         session open 1 2 b\nrdma write 1 5 offer 0 100\nquit\n",
    );
    // The last commands are refused at once (before: "the association closed", then the
    // core's refusal printed amid the commands after it), the closed association named first
    // (a write to the offer of a stream without one named the missing offer).
    assert_eq!(client.status.code(), Some(1), "client:\n{client_text}");
    assert_has_all(
        &client_text,
        &[
            "ddpdk> session open 1 2 b\nassociation 1 is closed already: shut down",
            "ddpdk> rdma write 1 5 offer 0 100\nassociation 1 is closed already: shut down",
            // A send from a local STag on the ended session: the same reason as any send
            // (before: "the session is not accepted yet").
            "ddpdk> send untagged 1 3 0 100 1 --from last\n",
            "refused: the session is terminated",
        ],
    );
    assert!(!client_text.contains("not accepted yet"), "{client_text}");
    assert_eq!(server_code, Some(0), "server:\n{server_text}");
    assert_has_all(
        &server_text,
        &[
            "the peer invalidated STag",
            "; sessions accepted from now on are offered no region",
            "length 1048576  remote  (invalidated by the peer)",
        ],
    );
    assert!(!server_text.contains("(offered)"), "{server_text}");
    // `show session` lists the stream that had a session, not the seven that never did (the
    // core reports each of them terminated once the association ends).
    // It also says what the session brought in: two Immediate Data (RFC 7306 §6, 8 bytes
    // each) and the Send (the server shell said nothing of either).
    assert_has_all(
        &server_text,
        &[
            "association 1 stream 1: Terminated",
            "3 untagged message(s) received (26 bytes, 2 of them Immediate Data)",
        ],
    );
    assert!(!server_text.contains("stream 2: "), "{server_text}");
}

/// RFC 5040 §5.3 in the shell: a region the peer may invalidate must grant it a remote right,
/// and a Read's sink needs local write, so no access word served a Read sink the peer could
/// end with a Send with Invalidate (`local` has no remote right, `remote-write` no local
/// write): `sink` grants both. A Read into a region without local write is refused by the
/// shell with that cause (the core's refusal named four possible ones).
#[test]
fn a_sink_region_may_be_invalidated_by_the_peer_5_3() {
    let (client, client_text, server_code, server_text) = memif_shell_pair(
        "sink",
        "mr reg 8000 local\nrecv auto 0 last 1000 4\nmr reg 4096 sink\nsession offer last\n\
         wait session 60\nwait closed 60\nshow mr\nquit\n",
        "assoc open 198.18.0.2\nsession open 1 1 a --rdmap\nmr reg 4096 remote-write\n\
         rdma read 1 1 offer 0 100 --into last\nrdma write 1 1 offer 0 100\n\
         rdma send 1 1 10 1 --invalidate offer\nsession close 1 1\nassoc close 1\nquit\n",
    );
    assert_eq!(client.status.code(), Some(1), "client:\n{client_text}");
    assert_has_all(
        &client_text,
        &[
            "is registered remote-write, without local write: a rdma read writes its result \
             into the --into region",
            "Wrote 1 x 100 bytes on association 1 stream 1",
        ],
    );
    assert_eq!(server_code, Some(0), "server:\n{server_text}");
    assert_has_all(
        &server_text,
        &[
            "the peer invalidated STag",
            "length 4096  sink  (invalidated by the peer)",
        ],
    );
}

/// The shell names the cause it knows, where the core's refusal named a lesser one: a receive
/// posted on a stream with no session ("not accepted yet"), on queue 1 of an RDMAP stream
/// (RFC 5040 §4.2: RDMAP's Read Request queue; "no such queue, a queue holds 256"), and a
/// Read on a stream the association does not have (RFC 9260 §5.1; "the peer offered no
/// region"). An offer in a shell that accepts no sessions says so; `show session` gives an
/// RDMAP session's Read limits.
#[test]
fn shell_commands_name_the_cause_they_know() {
    let (client, client_text, server_code, server_text) = memif_shell_pair(
        "causes",
        "wait closed 60\nquit\n",
        "assoc open 198.18.0.2\nmr reg 4096 local\nrecv post 1 2 0 last 1000 1\n\
         session open 1 1 a --rdmap --ord 1000 --ird 2\nrecv post 1 1 1 last 1000 1\n\
         rdma read 1 1000 offer 0 10 --into last\nrecv post 1 1 0 last 1000 1\nshow session\n\
         assoc close 1\nquit\n",
    );
    assert_eq!(server_code, Some(0), "server:\n{server_text}");
    assert_eq!(client.status.code(), Some(1), "client:\n{client_text}");
    assert_has_all(
        &client_text,
        &[
            "no session on stream 2 of association 1: receives are posted to a session",
            "queue 1 of RDMAP stream 1 is RDMAP's own (RFC 5040 §4.2",
            "association 1 has streams 0 to ",
            // Queue 0 of the same stream takes it.
            "Posted 1 receive buffer(s) of 1000 bytes on association 1 stream 1 queue 0",
            // Each side's Reads and Atomics outstanding are its ORD, at most the other's IRD
            // (the server accepts with 16 each); `show session` showed neither. The ORD sent
            // is capped at a queue's depth, 256 (a review: the shell showed 1000).
            "Reads and Atomics outstanding: ours at most 16 (our ORD 256, the peer's IRD 16), \
             the peer's at most 2 (its ORD 16, our IRD 2)",
        ],
    );
    assert!(
        !client_text.contains("not accepted yet") && !client_text.contains("offered no region"),
        "{client_text}"
    );
    let (o, text) = null_endpoint_shell(
        &["--ip", "198.18.0.1", "-i"],
        b"mr reg 4096\nsession offer last\nquit\n",
    );
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        text.contains("(this shell accepts none: it rejects the peer's sessions without --listen)"),
        "{text}"
    );
}

/// A scratch directory for the memif pair of test `name`, holding its socket; removed when
/// dropped.
struct MemifDir {
    name: String,
    dir: PathBuf,
}

impl MemifDir {
    fn new(name: &str) -> MemifDir {
        let dir = std::env::temp_dir().join(format!("ddpdk-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        MemifDir {
            name: name.to_string(),
            dir,
        }
    }

    /// The EAL arguments of one end: `role` (server or client) on `lcores`, 512 MB, normal
    /// pages, a file prefix of its own.
    fn eal(&self, role: &str, lcores: &str) -> Vec<String> {
        let prefix = format!("ddpdk-{}-{role}-{}", self.name, std::process::id());
        procs::memif_eal(
            role,
            lcores,
            &prefix,
            &self.dir.join("memif.sock"),
            512,
            false,
        )
    }
}

impl Drop for MemifDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A `--listen` endpoint over memif whose shell reads what the test writes to its stdin,
/// up and listening, and a client run of `client_commands` (`--cmdline-file`) against it.
struct ListeningShell {
    server: std::process::Child,
    stdin: std::process::ChildStdin,
    _memif: MemifDir,
    head: String,
    rest: std::thread::JoinHandle<String>,
    client_eal: Vec<String>,
}

impl ListeningShell {
    fn start(name: &str) -> ListeningShell {
        let memif = MemifDir::new(name);
        let eal = |role: &str, lcores: &str| memif.eal(role, lcores);
        let mut server = ddpdk(
            &eal("server", "0@0,1@1"),
            &["--ip", "198.18.0.2", "--listen", "-i"],
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("server");
        let (head, rest) =
            procs::read_until(server.stdout.take().expect("stdout"), "the server", |l| {
                l.contains("DDP endpoint on port")
            });
        let stdin = server.stdin.take().expect("stdin");
        let client_eal = eal("client", "0@1,1@0");
        ListeningShell {
            server,
            stdin,
            _memif: memif,
            head,
            rest,
            client_eal,
        }
    }

    fn say(&mut self, commands: &str) {
        self.stdin
            .write_all(commands.as_bytes())
            .expect("server commands");
    }

    /// The client's run to its end: its output and its text.
    fn client(&self, name: &str, commands: &str) -> (Output, String) {
        let cmds = script(name, commands);
        let client = ddpdk(
            &self.client_eal,
            &[
                "--ip",
                "198.18.0.1",
                "--cmdline-file",
                cmds.to_str().expect("utf-8"),
            ],
        )
        .output()
        .expect("client");
        let (cout, cerr) = out(&client);
        (client, cout + &cerr)
    }

    /// Waits for the server's end (its stdin closed first): its status and text.
    fn finish(self) -> (Option<i32>, String) {
        drop(self.stdin);
        let s = self.server.wait_with_output().expect("server exit");
        let text = self.head + &self.rest.join().expect("server stdout reader") + &out(&s).1;
        (s.status.code(), text)
    }
}

/// What a command says when things go wrong around it (session 24's shell probe):
/// - a tagged write to an STag the peer never gave ends the session (RFC 5041 §7.1 check 2);
///   the command fails with that, where it used to print "Sent" with a checksum and go on;
/// - `recv post` of more than its region holds is refused before any buffer is posted (it
///   used to post some, then say "range outside its region");
/// - one SIGINT stops a server blocked in `wait session` (it used to wait out its 100 s).
#[test]
fn commands_fail_when_the_peer_ends_the_session_and_a_signal_stops_a_wait() {
    let mut shell = ListeningShell::start("fails");
    shell.say("mr reg 1048576 remote-write\nsession offer last\nmr reg 4096 local\n");
    let (client, client_text) = shell.client(
        "fails-client",
        "assoc open 198.18.0.2\nsession open 1 1 hello\n\
         send tagged 1 1 0x12345678 0 100\nshow session\nquit\n",
    );
    // The first wait reports the client's session (ended); the second waits for another.
    shell.say("recv post 1 1 0 last 1000 8\nwait session 100\nwait session 100\n");
    std::thread::sleep(Duration::from_secs(2));
    let _ = Command::new("kill")
        .args(["-INT", &shell.server.id().to_string()])
        .status();
    let t0 = Instant::now();
    while shell.server.try_wait().expect("wait").is_none() && t0.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let stopped = shell.server.try_wait().expect("wait").is_some();
    if !stopped {
        let _ = shell.server.kill();
    }
    let (_, server_text) = shell.finish();
    assert_eq!(client.status.code(), Some(1), "client:\n{client_text}");
    assert_has_all(
        &client_text,
        &["3: the session ended while the command ran (terminated (terminated by the peer))"],
    );
    assert!(!client_text.contains("Sent 1 x 100"), "{client_text}");
    // The script stopped there.
    assert!(
        !client_text.contains("ddpdk> show session"),
        "{client_text}"
    );
    assert!(
        stopped,
        "one SIGINT did not stop the server in 20 s:\n{server_text}"
    );
    assert_has_all(
        &server_text,
        &[
            "invalid STag",
            "8 buffer(s) of 1000 bytes do not fit STag",
            "interrupted by a signal while waiting for a session",
        ],
    );
}

/// Sends the peer must refuse are refused here instead, where a typo costs the command and
/// not the stream (found by an outside-in test): an untagged Send to a queue the stream does
/// not have (RFC 5041 §5.1.2; the peer ended the session with "invalid QN"). The session
/// lives on: the association is closed gracefully after it.
#[test]
fn an_untagged_send_to_a_queue_a_stream_lacks_is_refused_here() {
    let mut shell = ListeningShell::start("qn");
    shell.say("wait session 30\nsend untagged 1 1 4 10\nshow session\nassoc close 1\n");
    let (client, client_text) = shell.client(
        "qn-client",
        "assoc open 198.18.0.2\nsession open 1 1 hello\nwait closed 30\nquit\n",
    );
    let (_, server_text) = shell.finish();
    assert_eq!(client.status.code(), Some(0), "client:\n{client_text}");
    assert_has_all(
        &server_text,
        &[
            "no queue 4: a stream has untagged queues 0 to 3",
            "association 1 stream 1: Established",
        ],
    );
    assert!(
        !client_text.contains("invalid QN") && !server_text.contains("invalid QN"),
        "{client_text}\n{server_text}"
    );
}

/// A long-running server keeps its closed associations in view for a while, not for ever:
/// after 24 associations opened and closed one after another, the last 16 closed are shown
/// and held by the data core, and the 8 older ones are forgotten and said to be. Before, each
/// stayed in the data core's table (up to 256 a core, each with its send queue), walked by
/// the core every poll turn, and in `show assoc` for ever. And `wait session` reports each
/// session established, one a wait, even one that has ended since.
#[test]
fn closed_associations_are_forgotten_beyond_the_last_sixteen() {
    let mut shell = ListeningShell::start("churn");
    let mut cmds = String::new();
    for k in 1..=24 {
        cmds += "assoc open 198.18.0.2\n";
        if k > 21 {
            cmds += &format!("session open {k} 1 hi\nsession close {k} 1\n");
        }
        cmds += &format!("assoc close {k}\n");
    }
    cmds += "show assoc\nshow fwd stats all\nwait closed 5\nquit\n";
    let (client, client_text) = shell.client("churn-client", &cmds);
    shell.say(
        "wait session 5\nwait session 5\nwait session 5\n\
         show assoc\nshow fwd stats all\nwait closed 5\nquit\n",
    );
    let (server_code, server_text) = shell.finish();
    assert_eq!(client.status.code(), Some(0), "client:\n{client_text}");
    assert_eq!(server_code, Some(0), "server:\n{server_text}");
    for text in [&client_text, &server_text] {
        assert_has_all(
            text,
            &[
                "(8 older closed association(s) not shown: the last 16 closed are kept)",
                "Data core 0 (associations 0, 16 closed kept in view, STags",
                // The count of all of them stays whole.
                "All 24 association(s) closed",
            ],
        );
        // `show assoc` lists the last 16: associations 9 to 24, not 1 to 8.
        // In id order (they were in the data core's slot order, which forgotten
        // associations' successors reuse: 18 before 9).
        let rows: Vec<u64> = text
            .lines()
            .filter(|l| l.contains("198.18.0.") && l.contains(" Closed "))
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect();
        assert_eq!(rows, (9..=24).collect::<Vec<u64>>(), "{text}");
    }
    // Each `wait session` reported one of the three sessions, all ended before the first
    // wait began (before: the first wait found none established and timed out).
    for k in 22..=24 {
        assert!(
            server_text.contains(&format!(
                "Session 1 of association {k} was established (now: "
            )),
            "{server_text}"
        );
    }
}

/// The files in every hugetlbfs mount.
fn hugepage_files() -> Vec<std::fs::DirEntry> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter(|l| l.split_whitespace().nth(2) == Some("hugetlbfs"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten().flatten())
        .collect()
}

/// Removes the hugepage files an EAL with `prefix` left behind (a primary keeps them after it
/// exits, so that secondaries could attach; they hold the pages until removed).
fn remove_hugepage_files(prefix: &str) {
    for e in hugepage_files() {
        if e.file_name()
            .to_string_lossy()
            .starts_with(&format!("{prefix}map_"))
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Removes hugepage files of ddpdk endpoints that are gone, as an EAL does when it starts
/// (`clear_hugedir`: a file no process holds a lock on is unused), so that the free-page check
/// below sees them free: test prefixes carry a pid, and a primary killed before its test's
/// clean-up (a timeout, an interrupted run) leaves its files holding their pages.
fn sweep_stale_hugepage_files() {
    use std::os::unix::fs::MetadataExt;
    // /proc/locks: "1: FLOCK  ADVISORY  READ 4242 00:2d:1234 0 EOF"; the inode ends MAJ:MIN:INODE.
    let locked: std::collections::HashSet<u64> = std::fs::read_to_string("/proc/locks")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .nth(5)?
                .rsplit(':')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    for e in hugepage_files() {
        let name = e.file_name().to_string_lossy().into_owned();
        // A live EAL holds a shared lock on each of its files (an inode sharing the number on
        // another file system only keeps a file).
        let unused = e.metadata().is_ok_and(|m| !locked.contains(&m.ino()));
        if name.starts_with("ddpdk") && name.contains("map_") && unused {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Two DDP shells over memif: a `--listen` server running `server_script` (a --cmdline-file)
/// and a client fed `client_commands` on stdin (`-i`: a refused command does not stop the
/// ones after it). Returns the client's output and text, the server's status and text.
/// A DDP shell server at 198.18.0.2 (`--listen`) running `script`, started and up (its
/// "DDP endpoint on port" line read); the rest of its stdout is collected meanwhile.
fn listening_server(
    eal_args: &[String],
    script: &std::path::Path,
) -> (std::process::Child, String, std::thread::JoinHandle<String>) {
    let mut server = ddpdk(
        eal_args,
        &[
            "--ip",
            "198.18.0.2",
            "--listen",
            "--cmdline-file",
            script.to_str().expect("utf-8"),
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("server");
    let (head, rest) =
        procs::read_until(server.stdout.take().expect("stdout"), "the server", |l| {
            l.contains("DDP endpoint on port")
        });
    (server, head, rest)
}

fn memif_shell_pair(
    name: &str,
    server_script: &str,
    client_commands: &str,
) -> (Output, String, Option<i32>, String) {
    memif_shell_pair_with(name, server_script, client_commands, &[])
}

/// [`memif_shell_pair`] with more options for the client (`--json`).
fn memif_shell_pair_with(
    name: &str,
    server_script: &str,
    client_commands: &str,
    client_options: &[&str],
) -> (Output, String, Option<i32>, String) {
    let memif = MemifDir::new(name);
    let eal = |role: &str, lcores: &str| memif.eal(role, lcores);
    let server_cmds = script(&format!("{name}-server"), server_script);
    let (server, head, rest) = listening_server(&eal("server", "0@0,1@1"), &server_cmds);
    let options = [&["--ip", "198.18.0.1", "-i"], client_options].concat();
    let mut client = ddpdk(&eal("client", "0@1,1@0"), &options)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("client");
    client
        .stdin
        .take()
        .expect("stdin")
        .write_all(client_commands.as_bytes())
        .expect("commands");
    let client = client.wait_with_output().expect("client exit");
    let s = server.wait_with_output().expect("server exit");
    let (cout, cerr) = out(&client);
    let client_text = cout + &cerr;
    let server_text = head + &rest.join().expect("server stdout reader") + &out(&s).1;
    (client, client_text, s.status.code(), server_text)
}

/// Issue 6 item 7: a capture taken by DPDK's own tool. `dpdk-dumpcap` (a secondary process; the
/// endpoint enables pdump at start-up) records both directions of the server's `net_memif` port
/// while a client writes 1 MiB of tagged messages over an association; tshark finds every
/// SCTP checksum good, the association's whole life, the Adaptation Layer Indication in INIT
/// and INIT ACK, and DDP's PPIDs 16 and 17. Needs free huge pages (deploy/setup.sh reserves
/// them): a secondary process attaches through them.
#[test]
fn dpdk_dumpcap_captures_an_endpoint_and_tshark_passes_every_frame() {
    sweep_stale_hugepage_files();
    let free = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("HugePages_Free:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .unwrap_or(0);
    assert!(
        free >= 128,
        "needs 128 free 2 MiB huge pages (deploy/setup.sh reserves them); {free} free"
    );
    let id = std::process::id();
    let dir = std::env::temp_dir().join(format!("ddpdk-dumpcap-{id}"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let sock = dir.join("memif.sock");
    let pcap = dir.join("server.pcapng");
    let (srv_prefix, cli_prefix) = (format!("ddpdk-dc-s{id}"), format!("ddpdk-dc-c{id}"));
    // The primaries' hugepage files go however the test ends.
    struct Pages(Vec<String>);
    impl Drop for Pages {
        fn drop(&mut self) {
            for p in &self.0 {
                remove_hugepage_files(p);
            }
        }
    }
    let _pages = Pages(vec![srv_prefix.clone(), cli_prefix.clone()]);
    let eal = |role: &str, lcores: &str, prefix: &str| {
        procs::memif_eal(role, lcores, prefix, &sock, 128, true)
    };
    let server_cmds = script(
        "dumpcap-server",
        "mr reg 1048576\nsession offer last\nwait closed 60\nquit\n",
    );
    let client_cmds = script(
        "dumpcap-client",
        "assoc open 198.18.0.2\nsession open 1 1 capture\nsend tagged 1 1 offer 0 65536 16\n\
         session close 1 1\nassoc close 1\nquit\n",
    );
    let (server, head, rest) =
        listening_server(&eal("server", "0@0,1@1", &srv_prefix), &server_cmds);
    let mut dumpcap = Command::new("dpdk-dumpcap")
        .args(["--file-prefix", &srv_prefix, "-i", "net_memif0", "-w"])
        .arg(&pcap)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dpdk-dumpcap (package dpdk-dev; deploy/setup.sh installs it)");
    // It names its output file on stderr once the capture is set up.
    let (dc_head, dc_rest) = procs::read_until(
        dumpcap.stderr.take().expect("stderr"),
        "dpdk-dumpcap",
        |l| l.starts_with("File:"),
    );
    std::thread::sleep(Duration::from_millis(500));
    let client = ddpdk(
        &eal("client", "0@1,1@0", &cli_prefix),
        &[
            "--ip",
            "198.18.0.1",
            "--cmdline-file",
            client_cmds.to_str().expect("utf-8"),
        ],
    )
    .output()
    .expect("client");
    let s = server.wait_with_output().expect("server exit");
    // dumpcap stops by itself once its primary is gone; a signal in case it did not.
    let _ = Command::new("kill")
        .args(["-INT", &dumpcap.id().to_string()])
        .output();
    let _ = dumpcap.wait();
    let dc_text = dc_head + &dc_rest.join().unwrap_or_default();
    let server_text = head + &rest.join().unwrap_or_default();
    let (cout, cerr) = out(&client);
    assert_eq!(client.status.code(), Some(0), "client:\n{cout}\n{cerr}");
    assert_eq!(s.status.code(), Some(0), "server:\n{server_text}");
    assert!(
        server_text.contains("All 1 association(s) closed"),
        "{server_text}"
    );
    let fields = |filter: &str, field: &str| tshark::fields(&pcap, filter, field);
    let status = fields("sctp", "sctp.checksum.status");
    assert!(
        status.len() > 700,
        "{} SCTP packets captured:\n{dc_text}",
        status.len()
    );
    assert!(status.iter().all(|s| s == "1"), "a bad checksum");
    let chunks = fields("sctp", "sctp.chunk_type");
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
        assert!(
            chunks.iter().any(|c| c == t),
            "no {name} chunk in the capture"
        );
    }
    let adaptation = fields(
        "sctp.chunk_type == 1 || sctp.chunk_type == 2",
        "sctp.parameter_type",
    );
    assert_eq!(
        adaptation.iter().filter(|p| p.as_str() == "0xc006").count(),
        2,
        "{adaptation:?}"
    );
    let ppids = fields("sctp.chunk_type == 0", "sctp.data_payload_proto_id");
    assert!(ppids.iter().any(|p| p == "16") && ppids.iter().any(|p| p == "17"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// An atomic's original value in `--json` is a string, `0x%016x` as in the text: a 64-bit word
/// above 2^53 loses its low bits as a JSON number in a reader that keeps numbers as doubles
/// (jq, JavaScript). A FetchAdd on a word of 77s (RFC 7306 §5.1) returns 0x4d4d4d4d4d4d4d4d.
#[test]
fn an_atomics_original_value_in_json_keeps_all_64_bits() {
    let (client, client_text, server_code, server_text) = memif_shell_pair_with(
        "atomjson",
        "mr reg 4096 remote-atomic\nmr fill last 77\nsession offer last\nwait closed 60\nquit\n",
        "assoc open 198.18.0.2\nsession open 1 1 hello --rdmap\nmr reg 4096 local\n\
         rdma fetch-add 1 1 offer 8 5 1 --into last\nsession close 1 1\nassoc close 1\nquit\n",
        &["--json"],
    );
    assert_eq!(client.status.code(), Some(0), "client:\n{client_text}");
    assert_eq!(server_code, Some(0), "server:\n{server_text}");
    let send = String::from_utf8_lossy(&client.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v.get("send").cloned())
        .unwrap_or_else(|| panic!("no send object:\n{client_text}"));
    assert_eq!(send["op"], "rdma fetch-add", "{send}");
    assert_eq!(send["original"], "0x4d4d4d4d4d4d4d4d", "{send}");
}

/// Issue 14 items 6 and 7: RDMA from the shell, two processes over `net_memif`. The server
/// offers a region that grants remote read, write and atomic access, filled with 77s, and posts
/// receive buffers for each session (`recv auto`); the client opens an RDMAP session
/// (`--rdmap`), reads the whole offered region into a local one with RDMA Reads, runs RFC 7306
/// FetchAdds and CmpSwaps on one word of it, sends Immediate Data, writes half of the region
/// back with RDMA Writes, and sends four Sends with Solicited Event. What the client read is
/// the server's bytes (the CRC32c of 1 MiB of 77s), the atomics return the values the RFC's
/// arithmetic gives, and the server never heard of the Reads, Atomics or Writes.
#[test]
fn rdma_shell_reads_writes_and_sends_over_memif() {
    let (client, client_text, server_code, server_text) = memif_shell_pair(
        "rdma",
        "mr reg 8000 local\nrecv auto 0 last 1000 6\n\
         mr reg 1048576 remote-atomic\nmr fill last 77\nsession offer last\nwait closed 60\n\
         show fwd stats all\nquit\n",
        "assoc open 198.18.0.2\nsession open 1 1 hello --rdmap --ird 4 --ord 8\nshow session\n\
         mr reg 1048576 local\nrdma read 1 1 offer 0 65536 16 --into last\n\
         rdma fetch-add 1 1 offer 8 5 3 --into last\n\
         rdma cmp-swap 1 1 offer 8 0x4d4d4d4d4d4d4d5c 7 --into last\n\
         rdma cmp-swap 1 1 offer 8 0x4d4d4d4d4d4d4d5c 9 --into last\n\
         rdma imm 1 1 0x1122334455667788 2 --solicited\n\
         rdma write 1 1 offer 0 65536 8\nrdma send 1 1 1000 4 --solicited\n\
         mr reg 8192 local\nrdma read 1 1 offer 524288 4096 4 --into last\n\
         session close 1 1\nassoc close 1\nquit\n",
    );
    assert_eq!(client.status.code(), Some(0), "client:\n{client_text}");
    assert_eq!(server_code, Some(0), "server:\n{server_text}");
    let sevens = format!(
        "{:#010x}",
        ddpdk_dataplane::wire::crc32c::crc32c(&vec![77u8; 1 << 20])
    );
    // Four reads of 4 KiB into a sink of 8 KiB: it holds the last two, and says so (before:
    // "crc32c of the bytes read" over those 8 KiB only).
    let sink = format!(
        "{:#010x}",
        ddpdk_dataplane::wire::crc32c::crc32c(&[77u8; 8192])
    );
    for want in [
        format!(
            "the sink holds only the last 2 reads (each overwrote the one 2 before it): crc32c \
             of the sink {sink}"
        ),
        "association 1 stream 1: Established (RDMAP)".to_string(),
        "Read 16 x 65536 bytes on association 1 stream 1".to_string(),
        format!("crc32c of the bytes read {sevens}"),
        // RFC 7306: the word of 77s gets 5 three times (the last FetchAdd sees two adds),
        // is swapped to 7 once, and the second CmpSwap no longer matches.
        "FetchAdd 3 x 8 bytes on association 1 stream 1".to_string(),
        "last original value 0x4d4d4d4d4d4d4d57".to_string(),
        "original value 0x4d4d4d4d4d4d4d5c, swapped".to_string(),
        "original value 0x0000000000000007, not swapped".to_string(),
        "Sent Immediate Data 2 x 8 bytes on association 1 stream 1 in".to_string(),
        "Wrote 8 x 65536 bytes on association 1 stream 1".to_string(),
        "Sent 4 x 1000 bytes on association 1 stream 1".to_string(),
        "Session 1 of association 1: terminated".to_string(),
    ] {
        assert!(
            client_text.contains(&want),
            "client lacks {want:?}:\n{client_text}"
        );
    }
    assert!(
        !server_text.contains("segment refused") && !server_text.contains("RDMAP Terminate"),
        "{server_text}"
    );
}

/// `recv auto` gives each session it accepts buffers of its own: a region of two sets holds
/// two sessions at once, and a third is told it gets none. It gave every session the same
/// buffers (the region's first bytes), so the second session's Send landed on the first's
/// (found by an outside-in review).
#[test]
fn recv_auto_gives_each_session_its_own_buffers() {
    let (client, client_text, server_code, server_text) = memif_shell_pair(
        "recv-auto",
        "mr reg 2048 local\nrecv auto 0 last 1024 1\nwait closed 60\nmr checksum last\n\
         recv auto 0 last 512 2\nquit\n",
        "assoc open 198.18.0.2\nsession open 1 3 a --rdmap\nsession open 1 4 b --rdmap\n\
         session open 1 5 c --rdmap\nmr reg 1024 local\nmr fill last 170\n\
         rdma send 1 3 1024 --from last\nmr fill last 187\nrdma send 1 4 1024 --from last\n\
         assoc close 1\nquit\n",
    );
    assert_eq!(client.status.code(), Some(0), "client:\n{client_text}");
    assert_eq!(server_code, Some(0), "server:\n{server_text}");
    let both: Vec<u8> = [[170u8; 1024], [187u8; 1024]].concat();
    let want = format!("{:#010x}", ddpdk_dataplane::wire::crc32c::crc32c(&both));
    assert!(
        server_text.contains(&want),
        "the region holds both messages ({want}):\n{server_text}"
    );
    assert!(
        server_text.contains("session 5 gets no receive buffers: STag")
            && server_text.contains("holds 2 session(s)' 1 of 1024 bytes, all in use"),
        "{server_text}"
    );
    // The association's end gave the sets back: another `recv auto` may replace this one
    // (it is refused while sessions hold sets).
    assert!(
        server_text.contains("Sessions we accept get 2 receive buffer(s) of 512 bytes"),
        "{server_text}"
    );
}

/// A `recv auto` set is free again once its session ended and its receives are done, not
/// only when the association ends: a region of one set serves one session after another.
/// The shell counts each session's receives posted and ended (filled or flushed) to know
/// when (a session the peer ended with DDP-SSNs missing keeps its receives, RFC 5043 §6.1).
#[test]
fn recv_auto_gives_a_set_back_at_its_sessions_end() {
    let (client, client_text, server_code, server_text) = memif_shell_pair(
        "recv-auto-end",
        "mr reg 1024 local\nrecv auto 0 last 1024 1\nwait closed 60\nmr checksum last\nquit\n",
        "assoc open 198.18.0.2\nsession open 1 3 a --rdmap\nmr reg 1024 local\nmr fill last 170\n\
         rdma send 1 3 1024 --from last\nsession close 1 3\nsession open 1 4 b --rdmap\n\
         mr fill last 187\nrdma send 1 4 1024 --from last\nassoc close 1\nquit\n",
    );
    assert_eq!(client.status.code(), Some(0), "client:\n{client_text}");
    assert_eq!(server_code, Some(0), "server:\n{server_text}");
    assert!(
        !server_text.contains("gets no receive buffers"),
        "session 4 got the set session 3 gave back:\n{server_text}"
    );
    let want = format!(
        "{:#010x}",
        ddpdk_dataplane::wire::crc32c::crc32c(&[187u8; 1024])
    );
    assert!(
        server_text.contains(&want),
        "the second session's message is in the set ({want}):\n{server_text}"
    );
}

/// What the client can tell will not complete is refused before anything is sent, and what
/// the peer refused is not reported as done: a Read on a stream whose ORD is 0 (RFC 5040
/// §6.1: none may be outstanding), a Write or Read past the region the peer offered (RFC 5041
/// §7.1 check 4: the peer would refuse it), and a Read the peer flushed with a Terminate
/// (an unknown STag) ends in an error, with no rate or CRC32c line for it; closing a session
/// or an association that is over says so.
#[test]
fn rdma_shell_refuses_what_cannot_complete() {
    let (client, client_text, _, server_text) = memif_shell_pair(
        "rdma-refuse",
        "mr reg 1048576 remote-atomic\nsession offer last\nwait closed 60\nquit\n",
        "assoc open 198.18.0.2\nmr reg 65536 local\n\
        session open 1 1 --rdmap --ord 0\nrdma read 1 1 offer 0 1024 --into last\n\
        session open 1 2 --rdmap\nrdma write 1 2 offer 1048000 65536\n\
        rdma read 1 2 offer 1048000 1024 --into last\nrdma write 1 2 offer 0 1024\n\
        rdma read 1 2 0x00dead00 0 1024 --into last\nsession close 1 2\nassoc close 1\n\
        assoc close 1\nquit\n",
    );
    // A refused command sets the status; the script goes on.
    assert_eq!(client.status.code(), Some(1), "client:\n{client_text}");
    assert_has_all(
        &client_text,
        &[
            "ORD is 0 (ours, or the peer's IRD): no RDMA Read or Atomic may be outstanding",
            "offset 1048000 + 65536 bytes is past the 1048576 bytes the peer offered on stream 2",
            "offset 1048000 + 1024 bytes is past the 1048576 bytes the peer offered on stream 2",
            "Wrote 1 x 1024 bytes on association 1 stream 2",
            // The cause with it (it was in an earlier event only).
            "1 of 1 work request(s) flushed: the peer's RDMAP Terminate: invalid STag",
            "Association 1 closed: shut down",
            "association 1 is closed already: shut down",
        ],
    );
    // The Read's flush comes with the peer's RDMAP Terminate (RFC 5040 §5.4), the session's
    // end with the DDP Terminate after it (RFC 5043 §6.6): `session close` runs between them
    // or after both, and says which, at once.
    assert!(
        client_text.contains("session 2 of association 1 is over already: terminated")
            || client_text
                .contains("Session 2 of association 1: terminated (terminated by the peer)"),
        "{client_text}"
    );
    // The one Write in bounds is the only work reported as done.
    assert!(!client_text.contains("Read 1 x"), "{client_text}");
    assert!(!client_text.contains("Wrote 1 x 65536"), "{client_text}");
    // The ORD refusal did not wait out the shell's 15 s for completions.
    assert!(!client_text.contains("timed out"), "{client_text}");
    // The peer refused only the Read of an unknown STag: nothing else reached it.
    assert_eq!(
        server_text.matches("segment refused").count(),
        1,
        "{server_text}"
    );
    assert!(
        server_text.contains("segment refused: invalid STag"),
        "{server_text}"
    );
    // ... and ends the session for that reason (it used to say "by the local ULP").
    assert!(
        server_text.contains("stream 2: session terminated: receive error: invalid STag"),
        "{server_text}"
    );
}

/// The shell's JSON answers carry stable values (found by an outside-in test): a session's
/// `state` is its name (it was the Rust `Debug` form, `Terminated(ReceiveError(...))`), and
/// an `rdma cmp-swap` says whether it swapped, as its text does.
#[test]
fn shell_json_gives_session_states_by_name_and_cmp_swap_outcomes() {
    let (client, client_text, server_code, server_text) = memif_shell_pair_with(
        "json-names",
        "mr reg 1048576 remote-atomic\nmr fill last 77\nsession offer last\nwait closed 60\n\
         quit\n",
        "assoc open 198.18.0.2\nsession open 1 1 hello --rdmap\nshow session\n\
         mr reg 4096 local\n\
         rdma cmp-swap 1 1 offer 8 0x4d4d4d4d4d4d4d4d 7 --into last\n\
         rdma cmp-swap 1 1 offer 8 0x4d4d4d4d4d4d4d4d 9 --into last\n\
         session close 1 1\nshow session\nassoc close 1\nquit\n",
        &["--json"],
    );
    assert_eq!(client.status.code(), Some(0), "client:\n{client_text}");
    assert_eq!(server_code, Some(0), "server:\n{server_text}");
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&client.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let states: Vec<(String, Option<String>)> = lines
        .iter()
        .filter(|v| v.get("stream").is_some() && v.get("text").is_some())
        .map(|v| {
            (
                v["state"].as_str().unwrap_or_default().to_string(),
                v["reason"].as_str().map(str::to_string),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("Established".to_string(), None),
            (
                "Terminated".to_string(),
                Some("terminated by the local ULP".to_string())
            )
        ],
        "{client_text}"
    );
    let swapped: Vec<serde_json::Value> = lines
        .iter()
        .filter(|v| v["send"]["op"] == "rdma cmp-swap")
        .map(|v| v["send"]["swapped"].clone())
        .collect();
    assert_eq!(
        swapped,
        [serde_json::json!(true), serde_json::json!(false)],
        "{client_text}"
    );
}
