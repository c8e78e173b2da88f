//! Jumbo frames over `net_memif`: every frame in one buffer, because DPDK 22.11's memif
//! corrupts frames split over buffers (cli/src/memif.rs says how). Two `perf` processes.

use std::process::Output;

#[path = "common/procs.rs"]
mod procs;

const BIN: &str = env!("CARGO_BIN_EXE_ddpdk");

/// EAL arguments for one end of a memif pair on `sock`, its file prefix named by `tag`.
fn memif_eal(tag: &str, role: &str, lcores: &str, sock: &std::path::Path) -> Vec<String> {
    let prefix = format!("ddpdk-{tag}-{role}-{}", std::process::id());
    procs::memif_eal(role, lcores, &prefix, sock, 1024, false)
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// `--mtu 9000` with vdevs that name no `bsize` (memif's own default is 2048 bytes), and
/// messages of one full segment and a short one: a short frame often lands on a descriptor
/// that held the middle of a jumbo frame, the case DPDK 22.11's memif Tx leaves chained. With
/// the default buffers this run stalled after ~170 writes, thousands of old frames were received
/// again, and the server died of SIGSEGV. ddpdk gives the client's vdev buffers that hold a
/// frame (memif uses the client's both ways; the server says what its client needs): the run
/// completes, the server counts no more frames in than the client sent (SCTP packets and a few
/// ARP frames), and every write is delivered.
#[test]
fn jumbo_frames_over_memif_without_bsize_arrive_once_each() {
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("ddpdk-memif-frames-{pid}"));
    std::fs::create_dir_all(&dir).expect("dir");
    let sock = dir.join("memif.sock");
    let eal = |role: &str, lcores: &str| memif_eal("mf", role, lcores, &sock);
    let mut server = procs::spawn(
        BIN,
        &eal("server", "0@0"),
        &[
            "--ddp-listen",
            "--ip",
            "198.18.0.2",
            "--mtu",
            "9000",
            "--json",
            "--run-for",
            "60",
        ],
    );
    let (head, rest) =
        procs::read_until(server.stderr.take().expect("stderr"), "the server", |l| {
            l.contains("(listening)")
        });
    assert!(
        head.contains("bsize=9216"),
        "the note on the buffers:\n{head}"
    );
    let client = procs::spawn(
        BIN,
        &eal("client", "0@1"),
        &[
            "--ddp-connect",
            "198.18.0.2",
            "--ip",
            "198.18.0.1",
            "--mtu",
            "9000",
            // One full segment (MULPDU 8918 at MTU 9000) and one of 1000 bytes.
            "--ddp-size",
            "9918",
            "--run-for",
            "2",
            "--json",
        ],
    )
    .wait_with_output()
    .expect("client");
    let server = server.wait_with_output().expect("server");
    let server_text = head + &rest.join().unwrap_or_default() + &text(&server);
    let _ = std::fs::remove_dir_all(&dir);
    let client_text = text(&client);
    let (goodput, done) =
        procs::every_write_delivered(&client, &client_text, &server, &server_text, 1000);
    let packets_out = goodput["sctp"]["packets_out"]
        .as_u64()
        .expect("packets_out");
    let frames_in = done["frames_in"].as_u64().expect("frames_in");
    // The client's ARP frames are not SCTP packets: a handful. Replayed old frames were
    // tens of thousands.
    assert!(
        frames_in <= packets_out + 16,
        "the server received {frames_in} frames of the client's {packets_out} SCTP packets"
    );
}

/// A `bsize` given too small for the MTU is refused before the EAL starts, with why and what
/// to give instead.
#[test]
fn memif_buffers_smaller_than_a_frame_are_refused() {
    let o = std::process::Command::new(BIN)
        .args([
            "perf",
            "server",
            "--no-huge",
            "--vdev=net_memif0,role=client,bsize=2048",
            "--",
            "--ip",
            "198.18.0.2",
            "--mtu",
            "9000",
        ])
        .output()
        .expect("ddpdk");
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains("bsize=2048") && t.contains("bsize=9216") && t.contains("9014 bytes"),
        "{t}"
    );
    assert!(!t.contains("EAL"), "refused before the EAL: {t}");
}

/// A client whose link MTU is larger than the server's: the association comes up (its small
/// packets pass), no full segment ever arrives. The client gives up after its quiet time, as
/// for a server gone, and names the likely cause; the server names what it dropped.
#[test]
fn a_server_with_a_smaller_mtu_is_named_when_nothing_is_acknowledged() {
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("ddpdk-memif-mtu-{pid}"));
    std::fs::create_dir_all(&dir).expect("dir");
    let sock = dir.join("memif.sock");
    let eal = |role: &str, lcores: &str| memif_eal("mm", role, lcores, &sock);
    let mut server = procs::spawn(
        BIN,
        &eal("server", "0@0"),
        &["--ddp-listen", "--ip", "198.18.0.2", "--run-for", "60"],
    );
    let (_head, rest) =
        procs::read_until(server.stdout.take().expect("stdout"), "the server", |l| {
            l.contains("(listening)")
        });
    let client = procs::spawn(
        BIN,
        &eal("client", "0@1"),
        &[
            "--ddp-connect",
            "198.18.0.2",
            "--ip",
            "198.18.0.1",
            "--mtu",
            "9000",
            "--run-for",
            "2",
        ],
    )
    .wait_with_output()
    .expect("client");
    // The client's ABORT ends the server's run.
    let _ = server.wait();
    let server_text = rest.join().expect("server output");
    let _ = std::fs::remove_dir_all(&dir);
    let t = text(&client);
    assert_eq!(client.status.code(), Some(1), "{t}");
    assert!(
        t.contains("0 writes of 65536 bytes completed")
            && t.contains("nothing was ever acknowledged: is the server's --mtu 9000 too?"),
        "{t}"
    );
    // The server counts the frames it could not take, by that reason, and says so: it used to
    // sum them with chains dropped for want of a free buffer, and print nothing.
    let dropped = server_text
        .lines()
        .find(|l| l.starts_with("server: dropped rx_too_long "))
        .unwrap_or_else(|| panic!("no drops line:\n{server_text}"));
    assert!(
        dropped.contains("is the peer's --mtu larger than this end's 1500?"),
        "{dropped}"
    );
}

/// Two `fwd` processes over one memif socket in `sock`, each forwarding lcore on a CPU of its
/// own: the server with `server` (started first), then the client with `client`, run to their
/// ends. Returns (client, server).
fn memif_fwd_pair(
    tag: &str,
    sock: &std::path::Path,
    server: &[&str],
    client: &[&str],
) -> (Output, Output) {
    let _ = std::fs::remove_file(sock);
    let eal = |role: &str, lcores: &str| memif_eal(tag, role, lcores, sock);
    let server = procs::spawn(BIN, &eal("server", "0@0,1@1"), server);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let client = procs::spawn(BIN, &eal("client", "0@1,1@0"), client)
        .wait_with_output()
        .expect("client");
    (client, server.wait_with_output().expect("server"))
}

/// A memif forwarder whose peer leaves mid-run keeps running: DPDK 22.11's memif unmaps the
/// connection's shared memory on the EAL's interrupt thread while the forwarding lcore may be
/// inside a burst that already found the link up, and the server died of SIGSEGV in 4 of 6
/// runs (an outside-in review: `rxonly` against a `txonly` client that stops). ddpdk's
/// `munmap`, exported by the executable, waits for the bursts under way
/// (`port::dpdk::memif_quiesce`). Three runs here: without the wait, all three pass about one
/// time in thirty.
#[test]
fn a_memif_forwarder_survives_its_peer_leaving_mid_burst() {
    // The driver binds to the executable's munmap only if it is exported.
    let nm = std::process::Command::new("nm")
        .args(["-D", "--defined-only", BIN])
        .output()
        .expect("nm (binutils)");
    let symbols = String::from_utf8_lossy(&nm.stdout);
    assert!(
        symbols.lines().any(|l| l.ends_with(" T munmap")),
        "ddpdk does not export munmap (cli/build.rs)"
    );
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("ddpdk-memif-leave-{pid}"));
    std::fs::create_dir_all(&dir).expect("dir");
    let sock = dir.join("memif.sock");
    for run in 0..3 {
        let (client, server) = memif_fwd_pair(
            &format!("ml{run}"),
            &sock,
            &["--forward-mode", "rxonly", "--run-for", "4", "-a"],
            &[
                "--forward-mode",
                "txonly",
                "--txpkts",
                "1500",
                "--run-for",
                "2",
                "-a",
            ],
        );
        assert_eq!(client.status.code(), Some(0), "client:\n{}", text(&client));
        assert_eq!(
            server.status.code(),
            Some(0),
            "run {run}: the server ({:?}) did not outlive its client:\n{}",
            server.status,
            text(&server)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--tx-first` seeds an io loop over memif from the client, and `ping` against `echo` loses
/// nothing: a memif client's receive ring has no free slots for its peer until its first RX
/// poll refills it, so the first burst, sent before that poll, came back to a server that had
/// to drop all 32 (the loop never started: the client received nothing), and ping's first
/// echo was dropped ("lost 1" every run; an outside-in review). The first burst now goes once
/// every RX queue has been polled, and ping polls its RX queues before its first frame.
#[test]
fn tx_first_seeds_an_io_loop_over_memif() {
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("ddpdk-memif-txfirst-{pid}"));
    std::fs::create_dir_all(&dir).expect("dir");
    let sock = dir.join("memif.sock");
    let (client, server) = memif_fwd_pair(
        "tf",
        &sock,
        &["--forward-mode", "io", "--run-for", "3", "-a"],
        &[
            "--forward-mode",
            "io",
            "--tx-first",
            "--run-for",
            "1.5",
            "-a",
            "--json",
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(client.status.code(), Some(0), "client:\n{}", text(&client));
    assert_eq!(server.status.code(), Some(0), "server:\n{}", text(&server));
    let out = String::from_utf8_lossy(&client.stdout);
    let rx: u64 = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "forward_stats")
        .filter_map(|v| v.pointer("/total/rx_packets").and_then(|n| n.as_u64()))
        .max()
        .unwrap_or(0);
    assert!(
        rx > 1000,
        "the loop ran: the client received its burst back and on ({rx} packets):\n{out}"
    );
}

/// `rxplace`, the placement ceiling of issue 13 item 2 (ddp-goodput-bench's), places every
/// received frame's payload and checks its CRC32c: fed by a `txonly` client of 1000-byte UDP
/// frames, it placed 922 bytes of each (the bytes after the 78 of headers an SCTP DATA chunk
/// of DDP would take) and none held a valid SCTP checksum, which its summary says in words
/// that do not read like a failure ("(0 matched)" did: an outside-in review).
#[test]
fn rxplace_places_every_frame_it_receives() {
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("ddpdk-memif-rxplace-{pid}"));
    std::fs::create_dir_all(&dir).expect("dir");
    let sock = dir.join("memif.sock");
    let (client, server) = memif_fwd_pair(
        "rp",
        &sock,
        &["--forward-mode", "rxplace", "--run-for", "3", "-a"],
        &[
            "--forward-mode",
            "txonly",
            "--txpkts",
            "1000",
            "--run-for",
            "1",
            "-a",
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(client.status.code(), Some(0), "client:\n{}", text(&client));
    assert_eq!(server.status.code(), Some(0), "server:\n{}", text(&server));
    let out = String::from_utf8_lossy(&server.stdout);
    let received: u64 = forwarded(&out, "RX-packets: ");
    assert!(received > 1000, "{out}");
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("Placed "))
        .unwrap_or_else(|| panic!("no placement line:\n{out}"));
    let placed: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert_eq!(placed, received * (1000 - 78), "{line}\n{out}");
    assert!(
        line.contains(&format!(
            "(0 of {received} held a valid SCTP checksum: frames of txonly hold none"
        )),
        "{line}"
    );
}

/// The sum of a forwarding summary's `what` counters ("RX-packets: ") over its per-port
/// blocks ("Forward statistics for port N"), not the all-ports total.
fn forwarded(out: &str, what: &str) -> u64 {
    out.split("Forward statistics for port")
        .skip(1)
        .filter_map(|block| {
            block
                .split(what)
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// A memif server's port counters read 0 once its client has left (DPDK 22.11's memif reports
/// none while its peer is away), and `show port stats` said nothing of it, as if nothing had
/// been received (an outside-in review): it now says why, next to the forwarding streams'
/// counts, which go on.
#[test]
fn port_stats_of_a_memif_whose_peer_left_say_why_they_read_0() {
    use std::io::Write;
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("ddpdk-memif-away-{pid}"));
    std::fs::create_dir_all(&dir).expect("dir");
    let sock = dir.join("memif.sock");
    let mut server = std::process::Command::new(BIN)
        .args(memif_eal("aw", "server", "0@0,1@1", &sock))
        .args(["--", "-i", "--forward-mode", "rxonly"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("server");
    let mut input = server.stdin.take().expect("stdin");
    input.write_all(b"start\n").expect("start");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let client = procs::spawn(
        BIN,
        &memif_eal("aw", "client", "0@1,1@0", &sock),
        &["--forward-mode", "txonly", "--run-for", "1", "-a"],
    )
    .wait_with_output()
    .expect("client");
    assert_eq!(client.status.code(), Some(0), "client:\n{}", text(&client));
    // The server's interrupt thread takes the link down when it sees its peer's socket close:
    // asked until it says so (a loaded machine may take a while), never waited for blindly.
    let lines = {
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let stdout = server.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for l in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok)
            {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        rx
    };
    let mut out = String::new();
    let mut down = false;
    for _ in 0..100 {
        input
            .write_all(b"show port info 0\n")
            .expect("show port info");
        while let Ok(l) = lines.recv_timeout(std::time::Duration::from_secs(10)) {
            out.push_str(&l);
            out.push('\n');
            if l.contains("Link status:") {
                down = l.contains("down");
                break;
            }
        }
        if down {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(down, "the server's link never went down:\n{out}");
    input
        .write_all(b"show port stats 0\nstop\nquit\n")
        .expect("commands");
    drop(input);
    out.extend(lines.iter().map(|l| l + "\n"));
    let server = server.wait_with_output().expect("server");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        server.status.code(),
        Some(0),
        "server:\n{out}{}",
        text(&server)
    );
    assert!(
        out.contains("  RX-packets: 0 ")
            && out.contains(
                "(net_memif reports no counters while its peer is away: `show fwd stats all` \
                 counts what was received)"
            ),
        "{out}"
    );
    assert!(forwarded(&out, "RX-packets: ") > 1000, "{out}");
}

/// SIGINT while a memif server's link waits for a client that never comes ends the run at
/// once, `fwd` and an endpoint alike: the wait (`--link-timeout`) went on to its end first,
/// so Ctrl-C seemed not to work.
#[test]
fn a_signal_ends_the_wait_for_a_link() {
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("ddpdk-memif-linkwait-{pid}"));
    std::fs::create_dir_all(&dir).expect("dir");
    let sock = dir.join("memif.sock");
    for (tag, app) in [
        ("lwf", &["--link-timeout", "600", "-i"][..]),
        (
            "lwe",
            &["--ip", "198.18.0.2", "--link-timeout", "600", "-i"][..],
        ),
    ] {
        let _ = std::fs::remove_file(&sock);
        let mut child = std::process::Command::new(BIN)
            .args(memif_eal(tag, "server", "0@0,1@1", &sock))
            .arg("--")
            .args(app)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        let input = child.stdin.take();
        std::thread::sleep(std::time::Duration::from_secs(2));
        let k = std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(k.success());
        let watchdog = procs::Watchdog::new(child.id(), std::time::Duration::from_secs(30));
        let o = child.wait_with_output().expect("wait");
        drop((input, watchdog));
        // A wait that ran on to its 600 s is killed by the watchdog: no status.
        assert_eq!(o.status.code(), Some(0), "{tag}:\n{}", text(&o));
        assert!(text(&o).contains("Bye..."), "{tag}:\n{}", text(&o));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
