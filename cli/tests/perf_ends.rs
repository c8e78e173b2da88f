//! How a `perf` run ends when it does not end well: a write the server's region cannot hold,
//! a client interrupted, a server gone. Two processes over `net_memif`. Each time the client
//! says what happened and what it did so far, and neither side is left holding a dead
//! association: the server hears an ABORT (RFC 9260 §9.1) at once instead of waiting for its
//! heartbeats to give up, minutes later.

use std::io::Read;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

#[path = "common/procs.rs"]
mod procs;

const BIN: &str = env!("CARGO_BIN_EXE_ddpdk");

/// A server (`--ddp-listen`) of a 1 MiB region and a client (`--ddp-connect`) with `client`'s
/// options, up and connected; the server's stdout reader is returned with both.
struct Pair {
    server: Child,
    /// The server's EAL --file-prefix (its telemetry socket).
    server_prefix: String,
    server_out: std::thread::JoinHandle<String>,
    client: Child,
    dir: std::path::PathBuf,
}

fn pair(tag: &str, server_run_for: &str, client: &[&str]) -> Pair {
    pair_on(tag, "0@0", server_run_for, client)
}

/// The same with the server's EAL on `server_lcores` (a worker lcore runs its data core).
fn pair_on(tag: &str, server_lcores: &str, server_run_for: &str, client: &[&str]) -> Pair {
    pair_of(tag, server_lcores, "1048576", server_run_for, client)
}

fn pair_of(
    tag: &str,
    server_lcores: &str,
    region_bytes: &str,
    server_run_for: &str,
    client: &[&str],
) -> Pair {
    pair_with(
        tag,
        server_lcores,
        region_bytes,
        server_run_for,
        &[],
        client,
    )
}

/// The same with `server_extra` options for the server.
fn pair_with(
    tag: &str,
    server_lcores: &str,
    region_bytes: &str,
    server_run_for: &str,
    server_extra: &[&str],
    client: &[&str],
) -> Pair {
    let pid = format!("{tag}-{}", std::process::id());
    let dir = std::env::temp_dir().join(format!("ddpdk-perf-ends-{pid}"));
    std::fs::create_dir_all(&dir).expect("dir");
    let sock = dir.join("memif.sock");
    let server_prefix = format!("ddpdk-pe-srv-{pid}");
    let mut server = procs::spawn(
        BIN,
        &procs::memif_eal("server", server_lcores, &server_prefix, &sock, 1024, false),
        &[
            &[
                "--ddp-listen",
                "--ip",
                "198.18.0.2",
                "--region-bytes",
                region_bytes,
                "--run-for",
                server_run_for,
            ][..],
            server_extra,
        ]
        .concat(),
    );
    let (head, rest) =
        procs::read_until(server.stdout.take().expect("stdout"), "the server", |l| {
            l.contains("(listening)")
        });
    let server_out = std::thread::spawn(move || head + &rest.join().unwrap_or_default());
    let client = client_of(&format!("ddpdk-pe-cli-{pid}"), &sock, client);
    Pair {
        server,
        server_prefix,
        server_out,
        client,
        dir,
    }
}

/// A perf client of the server at `sock`, EAL prefix `prefix`, with `extra` options.
fn client_of(prefix: &str, sock: &std::path::Path, extra: &[&str]) -> Child {
    let mut args = vec!["--ddp-connect", "198.18.0.2", "--ip", "198.18.0.1"];
    args.extend_from_slice(extra);
    procs::spawn(
        BIN,
        &procs::memif_eal("client", "0@1", prefix, sock, 1024, false),
        &args,
    )
}

/// Waits up to `limit` for `child` to exit; kills it after that (None).
fn exit_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn stderr_of(child: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

/// Waits up to `limit` for the client to exit, then ends the server and removes the pair's
/// directory: the client's exit code (None: killed at `limit`) and stderr.
fn client_outcome(p: &mut Pair, limit: Duration) -> (Option<i32>, String) {
    let client = exit_within(&mut p.client, limit);
    let cerr = stderr_of(&mut p.client);
    // Ended as an operator ends one, so that it removes its EAL runtime directory at exit
    // (SIGKILL left 12 MB of it a test); killed if it has not ended within 10 s.
    signal(&p.server, "-INT");
    let _ = exit_within(&mut p.server, Duration::from_secs(10));
    let _ = std::fs::remove_dir_all(&p.dir);
    (client.and_then(|s| s.code()), cerr)
}

/// Waits until the client writes (its session accepted), then a second more: a signal before
/// that would test the set-up's waits, not the run's end.
/// The rest of its stdout is read so that it never blocks on a full pipe: joined, it is what
/// the client printed after.
fn writing(client: &mut Child) -> std::thread::JoinHandle<String> {
    let (_, rest) = procs::read_until(client.stdout.take().expect("stdout"), "the client", |l| {
        l.contains("accepted: writing")
    });
    std::thread::sleep(Duration::from_secs(1));
    rest
}

fn signal(child: &Child, sig: &str) {
    let _ = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .output();
}

/// RFC 5041 §7.1 check 4 on the client's side: a message larger than the region the server
/// offered is refused before the first write (it would be refused by the server and end the
/// session), and the server's association ends with the client's ABORT.
#[test]
fn a_write_larger_than_the_offered_region_is_refused_before_it_is_sent() {
    let mut p = pair("big", "60", &["--run-for", "2", "--ddp-size", "2097152"]);
    let client = exit_within(&mut p.client, Duration::from_secs(40));
    let cerr = stderr_of(&mut p.client);
    let server = exit_within(&mut p.server, Duration::from_secs(15));
    let sout = p.server_out.join().unwrap_or_default();
    let serr = stderr_of(&mut p.server);
    let _ = std::fs::remove_dir_all(&p.dir);
    assert_eq!(client.and_then(|s| s.code()), Some(1), "{cerr}");
    assert!(
        cerr.contains("--ddp-size 2097152 is more than the 1048576 bytes the server offered"),
        "{cerr}"
    );
    assert!(
        server.is_some(),
        "the server still held the association 15 s after the client left:\n{sout}\n{serr}"
    );
    assert!(
        sout.contains("Association closed: the peer sent ABORT"),
        "{sout}"
    );
    // Nothing reached the region: no segment was sent, none refused.
    assert!(
        sout.contains("0 tagged messages delivered, 0 errors"),
        "{sout}"
    );
}

/// Waits for the client (40 s at most), then the server (15 s): each one's exit status and
/// stderr; the pair's directory is removed.
fn both_exit(p: &mut Pair) -> (Option<i32>, String, Option<i32>, String) {
    let client = exit_within(&mut p.client, Duration::from_secs(40));
    let cerr = stderr_of(&mut p.client);
    let server = exit_within(&mut p.server, Duration::from_secs(15));
    let serr = stderr_of(&mut p.server);
    let _ = std::fs::remove_dir_all(&p.dir);
    (
        client.and_then(|s| s.code()),
        cerr,
        server.and_then(|s| s.code()),
        serr,
    )
}

/// A server whose region cannot be made in its EAL's heap (here 1 GiB: all of `-m 1024`,
/// which the check before the EAL lets through, but that heap holds the ports' buffers too)
/// says so at start and does not listen: it listened, failed to make the region at its first
/// client and ended, the client told only "the session ended before the Accept" (an
/// outside-in review; a server whose offer fails later still aborts the association:
/// `a_verify_server_that_refuses_its_client_releases_it`).
#[test]
fn a_server_whose_region_does_not_fit_its_heap_says_so_at_start() {
    let dir = std::env::temp_dir().join(format!("ddpdk-perf-ends-heap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let server = procs::spawn(
        BIN,
        &procs::memif_eal(
            "server",
            "0@0",
            &format!("ddpdk-pe-heap-{}", std::process::id()),
            &dir.join("memif.sock"),
            1024,
            false,
        ),
        &[
            "--ddp-listen",
            "--ip",
            "198.18.0.2",
            "--region-bytes",
            "1G",
            "--run-for",
            "30",
        ],
    );
    let o = server.wait_with_output().expect("server");
    let _ = std::fs::remove_dir_all(&dir);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(
        err.contains("--region-bytes 1073741824: the EAL's heap has ")
            && err.contains(" MiB free in one piece once the ports took their buffers"),
        "{err}"
    );
    assert!(!out.contains("(listening)"), "{out}");
}

/// A `--ddp-verify` server that refuses a client without it (its Initiate carries no message
/// size) aborts the association as it exits, and the client says so at once: it wrote into
/// the void until "no write completed for 10 s", whatever its --run-for (found by an
/// outside-in test).
#[test]
fn a_verify_server_that_refuses_its_client_releases_it() {
    let mut p = pair_with(
        "verify",
        "0@0",
        "1048576",
        "60",
        &["--ddp-verify"],
        &["--run-for", "30"],
    );
    let (client, cerr, server, serr) = both_exit(&mut p);
    assert_eq!(server, Some(1), "{serr}");
    assert!(serr.contains("does not carry its message size"), "{serr}");
    assert_eq!(client, Some(1), "{cerr}");
    assert!(
        cerr.contains("association ended") && !cerr.contains("no write completed"),
        "{cerr}"
    );
}

/// An association with too few streams for perf's session (RFC 5043 §8: the least of both
/// ends' counts) is said so at once: the refused Initiate was dropped and the client waited
/// out 30 s for its Accept, whatever --run-for said (found by an outside-in test).
#[test]
fn a_client_with_too_few_streams_says_so_at_once() {
    let mut p = pair("streams", "60", &["--run-for", "2", "--streams", "1"]);
    let (client, cerr) = client_outcome(&mut p, Duration::from_secs(40));
    assert_eq!(client, Some(1), "{cerr}");
    assert!(
        cerr.contains("the association has 1 stream(s)") && !cerr.contains("timed out"),
        "{cerr}"
    );
}

/// SIGINT of a client mid-run: it reports the writes done so far and aborts the association,
/// so the server's run ends with it (before: the server held the association until its
/// heartbeats gave up, over 90 s).
#[test]
fn an_interrupted_client_reports_what_it_did_and_releases_the_server() {
    let mut p = pair("int", "120", &["--run-for", "60"]);
    let _ = writing(&mut p.client);
    signal(&p.client, "-INT");
    let client = exit_within(&mut p.client, Duration::from_secs(20));
    let cerr = stderr_of(&mut p.client);
    let server = exit_within(&mut p.server, Duration::from_secs(15));
    let sout = p.server_out.join().unwrap_or_default();
    let _ = std::fs::remove_dir_all(&p.dir);
    assert_eq!(client.and_then(|s| s.code()), Some(1), "{cerr}");
    let done: u64 = cerr
        .split("interrupted: ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no partial report:\n{cerr}"));
    assert!(done > 0, "{cerr}");
    assert!(server.is_some(), "the server still runs:\n{sout}");
    assert!(
        sout.contains("Association closed: the peer sent ABORT"),
        "{sout}"
    );
}

/// SIGINT of a server whose data core runs on a worker lcore, mid-run: it still reports what
/// it placed (each region's CRC32c, the delivery count) and exits 0, and its ABORT (RFC 9260
/// §9.1) tells the client at once. Before: "interrupted while waiting for the data cores'
/// reports", status 1, no report, and the client left to give up after 10 s.
#[test]
fn an_interrupted_server_reports_and_releases_the_client() {
    let mut p = pair_on("sint", "0@0,1@0", "120", &["--run-for", "60"]);
    let client_out = writing(&mut p.client);
    signal(&p.server, "-INT");
    let server = exit_within(&mut p.server, Duration::from_secs(15));
    let client = exit_within(&mut p.client, Duration::from_secs(5));
    let cerr = stderr_of(&mut p.client);
    let cout = client_out.join().unwrap_or_default();
    let sout = p.server_out.join().unwrap_or_default();
    let _ = std::fs::remove_dir_all(&p.dir);
    assert_eq!(server.and_then(|s| s.code()), Some(0), "{sout}");
    assert!(
        sout.contains("region STag") && sout.contains("tagged messages delivered"),
        "{sout}"
    );
    assert!(client.is_some(), "the client still ran 5 s after:\n{cerr}");
    // Its writes in flight end flushed by the ABORT, and it says how far it got.
    assert!(
        cerr.contains("ended flushed: the session or association ended first")
            && cerr.contains(" writes of 65536 bytes completed in "),
        "{cerr}"
    );
    // The two reports agree. Every write the client saw complete was placed and counted by
    // the server (its deliveries still queued when the loop ended were left out: 17 fewer
    // than the client's in one run). Every frame the client received, the server counts as
    // sent: the control thread's out-of-the-blue ABORTs to the DATA still in flight after
    // its own ABORT were left out (the client counted ~700 more). The server may count a
    // little more of both (a SACK or an answer lost with the association).
    let number_before = |text: &str, what: &str| -> u64 {
        let at = text
            .find(what)
            .unwrap_or_else(|| panic!("no '{what}' in:\n{text}"));
        let head = text[..at].trim_end();
        let digits = head
            .rsplit(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap_or("");
        digits
            .parse()
            .unwrap_or_else(|_| panic!("no number before '{what}' in:\n{text}"))
    };
    let delivered = number_before(&sout, "tagged messages delivered");
    let completed = number_before(&cerr, "writes of 65536 bytes completed");
    assert!(
        delivered >= completed,
        "server delivered {delivered}, client completed {completed}:\n{sout}\n{cerr}"
    );
    let server_out = number_before(&sout, "out; received frames faulted");
    let client_in = number_before(&cout, "frames in, ");
    assert!(
        server_out >= client_in,
        "server sent {server_out} frames, the client received {client_in}:\n{sout}\n{cout}"
    );
}

/// A client whose stdout reader leaves mid-run (`ddpdk ... | head -1`): it runs to its end and
/// exits 0, its report lost, nothing else. Before, its report's `println!` met the closed pipe
/// (EPIPE: Rust ignores SIGPIPE), panicked, and the process aborted (SIGABRT) with its
/// association still up.
#[test]
fn a_client_whose_output_reader_left_runs_to_its_end() {
    use std::io::BufRead;
    let mut p = pair("pipe", "60", &["--run-for", "2"]);
    let mut out = std::io::BufReader::new(p.client.stdout.take().expect("stdout"));
    let mut line = String::new();
    while !line.contains("accepted: writing") {
        line.clear();
        let n = out.read_line(&mut line).expect("the client's stdout");
        assert!(n > 0, "the client ended before it wrote");
    }
    drop(out);
    let client = exit_within(&mut p.client, Duration::from_secs(30));
    let cerr = stderr_of(&mut p.client);
    let server = exit_within(&mut p.server, Duration::from_secs(15));
    let sout = p.server_out.join().unwrap_or_default();
    let _ = std::fs::remove_dir_all(&p.dir);
    assert_eq!(client.and_then(|s| s.code()), Some(0), "{cerr}");
    assert!(!cerr.contains("panicked"), "{cerr}");
    // The server saw a whole run and a graceful end, not an abort.
    assert!(server.is_some(), "{sout}");
    assert!(sout.contains("tagged messages delivered"), "{sout}");
}

/// A server that stops answering mid-run (stopped, its memif link still up): the client gives
/// up once no write has completed for 10 s, the last 5 of them without a SACK either, and says
/// why, with what it did so far (before: 47 s after the stop, "writes did not complete").
#[test]
fn a_client_whose_server_is_gone_says_so_within_seconds() {
    let mut p = pair("gone", "120", &["--run-for", "60"]);
    let _ = writing(&mut p.client);
    signal(&p.server, "-STOP");
    let client = exit_within(&mut p.client, Duration::from_secs(40));
    signal(&p.server, "-KILL");
    let _ = p.server.wait();
    let cerr = stderr_of(&mut p.client);
    let _ = p.server_out.join();
    let _ = std::fs::remove_dir_all(&p.dir);
    assert_eq!(client.and_then(|s| s.code()), Some(1), "{cerr}");
    assert!(
        cerr.contains("no write completed for 1")
            && cerr.contains("s and no SACK came for the last 5: the server stopped acknowledging"),
        "{cerr}"
    );
    assert!(
        cerr.contains(" writes of 65536 bytes completed in "),
        "{cerr}"
    );
}

/// A server killed mid-run takes its memif link with it: the client ends its run once the
/// link has stayed down 2 s, naming it, with the rate to its last completion (it waited 10 s
/// for the stall check above, and averaged the rate over them; an outside-in review).
#[test]
fn a_client_whose_link_went_down_says_so() {
    let mut p = pair("linkgone", "120", &["--run-for", "60"]);
    let _ = writing(&mut p.client);
    signal(&p.server, "-KILL");
    let _ = p.server.wait();
    let client = exit_within(&mut p.client, Duration::from_secs(40));
    let cerr = stderr_of(&mut p.client);
    let _ = p.server_out.join();
    let _ = std::fs::remove_dir_all(&p.dir);
    assert_eq!(client.and_then(|s| s.code()), Some(1), "{cerr}");
    assert!(
        cerr.contains("net_memif0: the link went down ")
            && cerr.contains(" s ago and stayed down (did the server leave?); ")
            && cerr.contains(" writes of 65536 bytes completed in "),
        "{cerr}"
    );
}

/// A server that leaves after the client's last completion, before it answers the client's
/// Terminate (RFC 5043 §6.2), takes the memif link with it: the client's wait for the
/// Terminate ends once the link has stayed down 2 s (it waited 30 s, then 30 more for the
/// SHUTDOWN), and the run's report comes all the same (it was lost with the timeout).
#[test]
fn a_client_whose_server_left_before_the_terminate_says_so_and_reports() {
    let (code, cerr, cout) = server_gone_before_the_terminate("termgone", "-KILL");
    assert_eq!(code, Some(1), "{cerr}\n{cout}");
    assert!(
        cerr.contains("net_memif0: the link went down ")
            && cerr.contains(
                " s ago and stayed down (did the server leave?), waiting for the peer's Terminate"
            )
            && cerr.contains("the figures above stand"),
        "{cerr}"
    );
    assert!(
        cout.contains("client: 1 tagged writes of 1024 bytes in "),
        "{cout}"
    );
    // Said once: not again as the counters "up to the failure".
    assert!(
        !cout.contains("up to the failure") && !cerr.contains("up to the failure"),
        "{cout}{cerr}"
    );
}

/// The same server interrupted instead: its ABORT (RFC 9260 §9.1) ends the client's wait for
/// the Terminate at once, with the association's reason (the wait went on for the link).
#[test]
fn a_client_whose_server_aborted_before_the_terminate_says_why() {
    let (code, cerr, cout) = server_gone_before_the_terminate("termabort", "-INT");
    assert_eq!(code, Some(1), "{cerr}\n{cout}");
    assert!(
        cerr.contains("the association closed (")
            && cerr.contains("ABORT")
            && cerr.contains("), waiting for the peer's Terminate (the figures above stand"),
        "{cerr}"
    );
    assert!(
        cout.contains("client: 1 tagged writes of 1024 bytes in "),
        "{cout}"
    );
}

/// A client's one write of 1 KiB to a server that holds each frame it receives 3 s
/// (`--fault-delay-us`), so that the client's Terminate reaches it 3 s after the write
/// completes: `signal` goes to the server 1.5 s into that window. The client's RTO.Initial of
/// 8 s keeps its first retransmissions out of the run. The client's exit code, stderr and the
/// stdout after its session was accepted.
fn server_gone_before_the_terminate(tag: &str, signal_name: &str) -> (Option<i32>, String, String) {
    let mut p = pair_with(
        tag,
        "0@0",
        "1048576",
        "120",
        &["--fault-delay-us", "3000000"],
        &[
            "--ddp-messages",
            "1",
            "--ddp-size",
            "1024",
            "--rto-initial-ms",
            "8000",
        ],
    );
    let rest = writing(&mut p.client);
    // `writing` waited 1 s after the Accept; the write completes ~3 s after it, the
    // Terminate reaches the server's port ~3 s later.
    std::thread::sleep(Duration::from_millis(3500));
    signal(&p.server, signal_name);
    let _ = exit_within(&mut p.server, Duration::from_secs(20));
    let client = exit_within(&mut p.client, Duration::from_secs(20));
    let cerr = stderr_of(&mut p.client);
    let cout = rest.join().unwrap_or_default();
    let _ = p.server_out.join();
    let _ = std::fs::remove_dir_all(&p.dir);
    (client.and_then(|s| s.code()), cerr, cout)
}

/// A perf server whose client was killed mid-run (taking the memif link with it) aborts the
/// association once the link has stayed down 10 s and reports its run: a server that only
/// acknowledges runs no retransmission timer, and it waited for SCTP's heartbeats to give up
/// (RFC 9260 §8.3: 30 s apart by default, several unanswered).
#[test]
fn a_server_whose_client_was_killed_ends_its_run() {
    let mut p = pair("clientgone", "120", &["--run-for", "60"]);
    let _ = writing(&mut p.client);
    signal(&p.client, "-KILL");
    let _ = p.client.wait();
    let server = exit_within(&mut p.server, Duration::from_secs(20));
    let serr = stderr_of(&mut p.server);
    let sout = p.server_out.join().unwrap_or_default();
    let _ = std::fs::remove_dir_all(&p.dir);
    assert_eq!(server.and_then(|s| s.code()), Some(0), "{sout}\n{serr}");
    assert!(
        sout.contains("net_memif0: the link went down ")
            && sout.contains(
                " s ago and stayed down (did the client leave?): its association is aborted"
            )
            && sout.contains("Association closed: aborted here")
            && sout.contains(" tagged messages delivered, 0 errors"),
        "{sout}\n{serr}"
    );
}

/// The same after a restart: a client killed and started again within the 10 s re-associates
/// (RFC 9260 §5.2.4, its old session ended `AssociationEnded`), and when the second is killed
/// too the server still ends its run within seconds (the restart's session end had switched
/// the rule off: the server waited for heartbeats).
#[test]
fn a_server_whose_restarted_client_was_killed_ends_its_run() {
    let mut p = pair("clientagain", "120", &["--run-for", "60"]);
    let _ = writing(&mut p.client);
    signal(&p.client, "-KILL");
    let _ = p.client.wait();
    let sock = p.dir.join("memif.sock");
    let prefix = format!("ddpdk-pe-cli2-{}", std::process::id());
    let mut again = client_of(&prefix, &sock, &["--run-for", "60"]);
    let _ = writing(&mut again);
    signal(&again, "-KILL");
    let _ = again.wait();
    let server = exit_within(&mut p.server, Duration::from_secs(25));
    let serr = stderr_of(&mut p.server);
    let sout = p.server_out.join().unwrap_or_default();
    let _ = std::fs::remove_dir_all(&p.dir);
    assert!(
        sout.contains("Association restarted by the peer"),
        "{sout}\n{serr}"
    );
    assert_eq!(server.and_then(|s| s.code()), Some(0), "{sout}\n{serr}");
    assert!(
        sout.contains("(did the client leave?): its association is aborted"),
        "{sout}\n{serr}"
    );
}

/// A client that dials a port nothing listens on hears so at once: the server's host answers
/// its INIT with an ABORT (RFC 9260 §8.4 rule 3) and the client says what to check (before:
/// 30 s of INIT retransmissions, then "timed out waiting for the association").
#[test]
fn a_client_that_dials_the_wrong_port_is_told_at_once() {
    let mut p = pair("port", "30", &["--run-for", "2", "--sctp-port", "6000"]);
    let started = Instant::now();
    let client = exit_within(&mut p.client, Duration::from_secs(25));
    let took = started.elapsed();
    let cerr = stderr_of(&mut p.client);
    // The server counted it (telemetry's control/sctp/closed_port_aborts_out).
    let r = procs::ask(&p.server_prefix, &["/ddpdk/stats"]);
    let aborts = procs::value(&r[0], "/ddpdk/stats")["control/sctp/closed_port_aborts_out"]
        .as_u64()
        .unwrap_or(0);
    signal(&p.server, "-INT");
    let _ = exit_within(&mut p.server, Duration::from_secs(15));
    let sout = p.server_out.join().unwrap_or_default();
    let _ = std::fs::remove_dir_all(&p.dir);
    assert_eq!(client.and_then(|s| s.code()), Some(1), "{cerr}");
    assert!(
        cerr.contains("the server refused the association (the peer sent ABORT")
            && cerr.contains("listening on SCTP port 6000"),
        "after {took:?}:\n{cerr}\n{sout}"
    );
    assert!(aborts >= 1, "{:?}", r[0]);
}

/// A client whose memif socket has no server: the start fails with what to check, not with
/// the "Operation not permitted" a driver's bare -1 read as an errno gave.
#[test]
fn a_client_without_a_memif_server_is_told_what_to_check() {
    let dir = std::env::temp_dir().join(format!("ddpdk-perf-ends-nosrv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let mut client = procs::spawn(
        BIN,
        &procs::memif_eal(
            "client",
            "0@1",
            &format!("ddpdk-pe-nosrv-{}", std::process::id()),
            &dir.join("nobody.sock"),
            512,
            false,
        ),
        &["--ddp-connect", "198.18.0.2", "--ip", "198.18.0.1"],
    );
    let status = exit_within(&mut client, Duration::from_secs(30));
    let cerr = stderr_of(&mut client);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{cerr}");
    assert!(
        cerr.contains("rte_eth_dev_start(port 0, net_memif) failed")
            && cerr.contains("is the memif peer with role=server running at its socket?")
            && !cerr.contains("Operation not permitted"),
        "{cerr}"
    );
}

/// `--run-for` bounds a stalled run too: a client whose full-size packets never reach the
/// server (its `--mtu 9000` against the server's 1500) stops soon after its run, not after the
/// stall check's 10 s (found by an outside-in test: `--run-for 2` took 11.6 s), and says what
/// was still outstanding and what to check.
#[test]
fn a_stalled_client_stops_soon_after_its_run_for() {
    let mut p = pair(
        "drain",
        "60",
        &["--run-for", "2", "--mtu", "9000", "--ddp-size", "65536"],
    );
    let (client, cerr) = client_outcome(&mut p, Duration::from_secs(40));
    assert_eq!(client, Some(1), "{cerr}");
    assert!(
        cerr.contains("still outstanding")
            && cerr.contains("after --run-for's 2 s")
            && cerr.contains("is the server's --mtu 9000 too?")
            && !cerr.contains("no write completed for 1"),
        "{cerr}"
    );
}

/// A client given fewer `--ddp-messages` than its window says how many were in flight at most
/// (found by an outside-in test: `--ddp-messages 10` said "16 in flight").
#[test]
fn a_run_of_fewer_messages_than_the_window_says_so() {
    let (client, out, cerr) = client_of_pair(
        "msgs",
        "60",
        &[
            "--run-for",
            "10",
            "--ddp-messages",
            "10",
            "--ddp-size",
            "1024",
        ],
        Duration::from_secs(40),
    );
    assert_eq!(client, Some(0), "{out}{cerr}");
    assert!(
        out.contains("client: 10 tagged writes of 1024 bytes")
            && out.contains("(at most 10 in flight: --ddp-messages 10)"),
        "{out}"
    );
}

/// `--ddp-messages` alone runs until every message completed, however long that takes
/// (perftest's --iters): it stopped at the default 5 s and reported what was done as the
/// whole run, status 0 (an outside-in review). 3000 lone writes, each waiting for a SACK
/// the client's fault injector holds 2 ms: 6 s at the least, whatever the machine. With
/// --run-for too, the run ends at it, and the report says how many of the messages were done.
#[test]
fn a_run_of_ddp_messages_completes_them_all_unless_run_for_ends_it() {
    let (client, out, cerr) = client_of_pair(
        "msgsall",
        "120",
        &[
            "--ddp-messages",
            "3000",
            "--ddp-window",
            "1",
            "--ddp-size",
            "64",
            "--fault-delay-us",
            "2000",
        ],
        Duration::from_secs(100),
    );
    assert_eq!(client, Some(0), "{out}{cerr}");
    assert!(
        out.contains("client: 3000 tagged writes of 64 bytes") && !out.contains("ended the run"),
        "{out}"
    );
    // A 64-byte write's span goes inline in its frame: the span line counts them (it said
    // "sent by reference 0, copied 0", as if the zero-copy sender had failed).
    // Counted a packet sent: a retransmission counts again.
    let inlined = out
        .split("copied 0, inlined ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok());
    assert!(inlined.is_some_and(|n| n >= 3000), "{out}");
    let (client, out, cerr) = client_of_pair(
        "msgscut",
        "60",
        &["--ddp-messages", "100000000", "--run-for", "0.5"],
        Duration::from_secs(40),
    );
    assert_eq!(client, Some(0), "{out}{cerr}");
    assert!(
        out.contains("client: --run-for 0.5 s ended the run after ")
            && out.contains(" of --ddp-messages 100000000\n"),
        "{out}"
    );
    // --ddp-verify's untagged Sends count among the messages: a whole run is not "ended"
    // (an independent review: every such run said --run-for had ended it).
    let mut p = pair_with(
        "msgsverify",
        "0@0",
        "1048576",
        "60",
        &["--ddp-verify"],
        &["--ddp-verify", "--ddp-messages", "400"],
    );
    let mut out = String::new();
    if let Some(mut o) = p.client.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    let (client, cerr) = client_outcome(&mut p, Duration::from_secs(60));
    assert_eq!(client, Some(0), "{out}{cerr}");
    assert!(
        out.contains("client: ") && !out.contains("ended the run"),
        "{out}"
    );
}

/// A pair whose client runs with `client`, read to its end (`limit` at most): the client's
/// exit status, stdout and stderr.
fn client_of_pair(
    tag: &str,
    server_run_for: &str,
    client: &[&str],
    limit: Duration,
) -> (Option<i32>, String, String) {
    let mut p = pair(tag, server_run_for, client);
    let mut out = String::new();
    if let Some(mut o) = p.client.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    let (status, err) = client_outcome(&mut p, limit);
    (status, out, err)
}

/// A `--ddp-verify` client against a server without it: the server has no receive buffers for
/// the untagged sends the soak mixes in and ends the session; the client says what to check
/// (found by an outside-in test: it said only "send refused: the session is terminated").
#[test]
fn a_verify_client_of_a_plain_server_asks_about_the_server() {
    let mut p = pair("vclient", "60", &["--run-for", "5", "--ddp-verify"]);
    let (client, cerr) = client_outcome(&mut p, Duration::from_secs(40));
    assert_eq!(client, Some(1), "{cerr}");
    assert!(
        cerr.contains("terminated by the peer") && cerr.contains("given --ddp-verify too?"),
        "{cerr}"
    );
}

/// A memif server started before its client says its link is down until a client connects,
/// and when the link comes up (before the association that comes over it).
/// Before, the banner said nothing of the link, and an operator could not tell a server whose
/// client never came from one whose client came and was silent (an outside-in review).
#[test]
fn a_memif_server_says_when_its_client_comes() {
    let mut p = pair_with(
        "link",
        "0@0",
        "1048576",
        "60",
        &["--link-timeout", "0.2"],
        &["--run-for", "1"],
    );
    let (client, cerr) = {
        let c = exit_within(&mut p.client, Duration::from_secs(30));
        (c, stderr_of(&mut p.client))
    };
    let server = exit_within(&mut p.server, Duration::from_secs(15));
    let sout = p.server_out.join().unwrap_or_default();
    let _ = std::fs::remove_dir_all(&p.dir);
    assert_eq!(client.and_then(|s| s.code()), Some(0), "{cerr}");
    assert!(server.is_some(), "{sout}");
    assert!(
        sout.contains("(listening); link down until a memif client connects;"),
        "{sout}"
    );
    let up = sout
        .find("net_memif0: link up")
        .unwrap_or_else(|| panic!("{sout}"));
    let accepted = sout
        .find("Association accepted")
        .unwrap_or_else(|| panic!("{sout}"));
    assert!(up < accepted, "the link's coming said first:\n{sout}");
}

/// A client whose `--fault-drop 1` drops every frame that comes is told so, not "no frame
/// arrived on the port" (which sent the user to check the link; an outside-in review).
#[test]
fn a_client_that_drops_every_frame_on_purpose_is_told_so() {
    let mut p = pair("faultall", "6", &["--fault-drop", "1", "--run-for", "1"]);
    let (client, cerr, _, _) = both_exit(&mut p);
    assert_eq!(client, Some(1), "{cerr}");
    assert!(
        cerr.contains(
            "--fault-drop dropped every frame that arrived, the peer's answers among them"
        ) && !cerr.contains("no frame arrived"),
        "{cerr}"
    );
}
