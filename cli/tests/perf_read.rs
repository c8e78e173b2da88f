//! `perf client --ddp-op read`: RDMA Reads (RFC 5040 §5.2) of the server's region into the
//! client's sink, perftest's ib_read_bw and ib_read_lat. Two processes over `net_memif`.

use std::process::Output;

#[path = "common/procs.rs"]
mod procs;

const BIN: &str = env!("CARGO_BIN_EXE_ddpdk");

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// A perf server of a 1 MiB region (for `server_secs` at most) and a client reading it with
/// `client`'s options, run to their ends: (client, its output, server, its output).
fn run(tag: &str, server_secs: &str, client: &[&str]) -> (Output, String, Output, String) {
    run_with(tag, server_secs, client, true)
}

/// [`run`], the client's summary as text unless `json`.
fn run_with(
    tag: &str,
    server_secs: &str,
    client: &[&str],
    json: bool,
) -> (Output, String, Output, String) {
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("ddpdk-perf-read-{tag}-{pid}"));
    std::fs::create_dir_all(&dir).expect("dir");
    let sock = dir.join("memif.sock");
    let eal = |role: &str, lcores: &str| {
        let prefix = format!("ddpdk-pr-{tag}-{role}-{pid}");
        procs::memif_eal(role, lcores, &prefix, &sock, 1024, false)
    };
    let mut server = procs::spawn(
        BIN,
        &eal("server", "0@0"),
        &[
            "--ddp-listen",
            "--ip",
            "198.18.0.2",
            "--region-bytes",
            "1048576",
            "--json",
            "--run-for",
            server_secs,
        ],
    );
    let (head, rest) =
        procs::read_until(server.stderr.take().expect("stderr"), "the server", |l| {
            l.contains("(listening)")
        });
    let mut args = vec![
        "--ddp-connect",
        "198.18.0.2",
        "--ip",
        "198.18.0.1",
        "--ddp-op",
        "read",
        "--run-for",
        "1",
    ];
    if json {
        args.push("--json");
    }
    args.extend_from_slice(client);
    let client = procs::spawn(BIN, &eal("client", "0@1"), &args)
        .wait_with_output()
        .expect("client");
    let server = server.wait_with_output().expect("server");
    let server_text = head + &rest.join().unwrap_or_default() + &text(&server);
    let _ = std::fs::remove_dir_all(&dir);
    let client_text = text(&client);
    (client, client_text, server, server_text)
}

/// RFC 5040 §5.2: a Read brings the bytes of the source it names. Reads of 5000 bytes (four
/// Read Response segments at MTU 1500, at offsets that are not 8-byte aligned), four in
/// flight: every read the client made was served, the sampled ones (each sink slot's first,
/// then one in 64) brought the very bytes the server filled that part of its region with, and
/// the region is as it was filled (its CRC32c the client's expectation): nothing was written.
#[test]
fn rfc5040_5_2_reads_bring_the_bytes_of_the_source_they_name() {
    let (client, client_text, server, server_text) =
        run("bw", "60", &["--ddp-size", "5000", "--ddp-window", "4"]);
    assert_eq!(client.status.code(), Some(0), "client:\n{client_text}");
    assert_eq!(server.status.code(), Some(0), "server:\n{server_text}");
    let read = procs::json_line(&client_text, "ddp_goodput");
    let done = procs::json_line(&server_text, "ddp_server");
    assert_eq!(read["op"], "read", "{read}");
    // RFC 5040 §6: the server's IRD (16 by default) is what caps the client's ORD; the
    // report names it so a window above it is not read as the reads in flight.
    assert_eq!(read["peer_ird"].as_u64(), Some(16), "{read}");
    let reads = read["messages"].as_u64().expect("messages");
    assert!(reads > 100, "{read}");
    assert_eq!(done["reads_served"].as_u64(), Some(reads), "{done}");
    assert_eq!(
        done["delivered"].as_u64(),
        Some(0),
        "reads write nothing: {done}"
    );
    assert_eq!(done["errors"].as_u64(), Some(0), "{done}");
    let checked = read["reads_checked"].as_u64().expect("reads_checked");
    assert!(
        checked >= 4 + reads / 64 - 1,
        "{checked} of {reads} reads checked"
    );
    assert_eq!(
        done["regions"][0]["crc32c"], read["region_crc32c"],
        "the region as the server filled it: {done} {read}"
    );
}

/// ib_read_lat: one read at a time, each timed from its post to its completion.
#[test]
fn one_read_at_a_time_is_timed() {
    let (client, client_text, _, server_text) =
        run("lat", "60", &["--ddp-size", "64", "--ddp-window", "1"]);
    assert_eq!(client.status.code(), Some(0), "client:\n{client_text}");
    let read = procs::json_line(&client_text, "ddp_goodput");
    let done = procs::json_line(&server_text, "ddp_server");
    let reads = read["messages"].as_u64().expect("messages");
    assert!(reads > 100, "{read}");
    assert_eq!(done["reads_served"].as_u64(), Some(reads), "{done}");
    let p50 = read["latency_us"]["p50"].as_f64().expect("p50");
    let max = read["latency_us"]["max"].as_f64().expect("max");
    assert!(p50 > 0.0 && p50 <= max, "{read}");
    // The SACK each Read Response's I bit asks for (RFC 7053) rides on the next Read
    // Request (RFC 9260 §6: bundled with DATA; the client's inline core holds it for its
    // ULP, `DataCore::set_ulp_polls`): one packet a read, not two. The allowance covers the
    // association's set-up and shutdown.
    let frames: u64 = read["cores"]
        .as_array()
        .expect("cores")
        .iter()
        .map(|c| c["frames_out"].as_u64().expect("frames_out"))
        .sum();
    assert!(
        frames <= reads + reads / 20 + 20,
        "{frames} frames for {reads} reads: {read}"
    );
}

/// perftest's `--iters`: a few reads, each timed, and the run's time covers them all. The
/// time was taken to the start of the turn that saw the last completions, so seven reads
/// of 64 KiB, each over a millisecond, came out at 19 GB/s "in 24 us" (found by an
/// outside-in test). Whatever the machine's speed, the run cannot be shorter than its
/// slowest read.
#[test]
fn a_run_of_a_few_reads_takes_at_least_its_slowest_read() {
    let (client, client_text, _, _) = run(
        "iters",
        "60",
        &["--ddp-size", "65536", "--ddp-messages", "7"],
    );
    assert_eq!(client.status.code(), Some(0), "client:\n{client_text}");
    let read = procs::json_line(&client_text, "ddp_goodput");
    assert_eq!(read["messages"].as_u64(), Some(7), "{read}");
    // Seven reads never fill the window of 16: the JSON's `window` is the most in flight (it
    // kept --ddp-window's 16), `ddp_window` the option.
    assert_eq!(read["window"].as_u64(), Some(7), "{read}");
    assert_eq!(read["ddp_window"].as_u64(), Some(16), "{read}");
    assert!(read["source"].is_null(), "a reader sends no bytes: {read}");
    assert_eq!(
        read["mulpdu"].as_u64(),
        Some(1418),
        "RFC 5043 §9 at MTU 1500: {read}"
    );
    let seconds = read["seconds"].as_f64().expect("seconds");
    let max = read["latency_us"]["max"].as_f64().expect("max");
    assert!(
        seconds * 1e6 >= max,
        "{seconds} s for a read of {max} us: {read}"
    );
}

/// A read run's text summary gives the segment size the path takes (RFC 5043 §9's MULPDU,
/// 1418 bytes at memif's MTU of 1500) and leaves out the region spans a write sends ("region
/// spans sent by reference 0, copied 0" read as if the zero-copy sender had failed).
#[test]
fn a_read_runs_summary_gives_the_mulpdu_and_no_write_spans() {
    let (client, client_text, _, _) = run_with("text", "60", &["--ddp-messages", "20"], false);
    assert_eq!(client.status.code(), Some(0), "client:\n{client_text}");
    assert!(
        client_text.contains("accepted: reading") && client_text.contains("(MULPDU 1418 bytes)"),
        "{client_text}"
    );
    assert!(!client_text.contains("region spans"), "{client_text}");
}

/// `--ddp-source bytes` says where writes come from: a reader refuses it rather than take it
/// and do nothing with it, as a usage error before the EAL (status 2; it was found once the
/// association was up, status 1: an outside-in review).
#[test]
fn reads_refuse_a_write_source() {
    let (client, client_text, _, _) = run("source", "3", &["--ddp-source", "bytes"]);
    assert_eq!(client.status.code(), Some(2), "{client_text}");
    assert!(
        client_text.contains("--ddp-op read places the server's bytes in a local sink"),
        "{client_text}"
    );
}

/// `--ddp-verify` checks writes; with `--ddp-op read` the client says to pick one, as a usage
/// error before the EAL (status 2).
#[test]
fn reads_refuse_the_write_soak() {
    // The client refuses before it connects: the server need not wait long.
    let (client, client_text, _, _) = run("verify", "3", &["--ddp-verify"]);
    assert_eq!(client.status.code(), Some(2), "{client_text}");
    assert!(
        client_text.contains("--ddp-verify checks writes; --ddp-op read"),
        "{client_text}"
    );
}
