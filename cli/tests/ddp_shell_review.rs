//! Regressions from an independent review of the DDP endpoint shell, on the binary: each test
//! demonstrated a defect (named in its comment) and failed before its fix.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common/procs.rs"]
mod procs;

const BIN: &str = env!("CARGO_BIN_EXE_ddpdk");

fn script(name: &str, body: &str) -> procs::Script {
    procs::script("zz2", name, body)
}

fn eal(tag: &str, role: &str, lcores: &str, sock: &str) -> Vec<String> {
    let prefix = format!("ddpdk-zz2-{tag}-{role}-{}", std::process::id());
    procs::memif_eal(
        role,
        lcores,
        &prefix,
        std::path::Path::new(sock),
        512,
        false,
    )
}

fn spawn(eal: &[String], app: &[&str]) -> Child {
    Command::new(BIN)
        .args(eal)
        .arg("--")
        .args(app)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ddpdk")
}

/// Waits for `c` up to `limit`; kills it when it is still running. Returns (exited, output).
fn finish(mut c: Child, limit: Duration) -> (bool, String) {
    let t0 = Instant::now();
    let exited = loop {
        if c.try_wait().expect("try_wait").is_some() {
            break true;
        }
        if t0.elapsed() > limit {
            let _ = c.kill();
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let o = c.wait_with_output().expect("output");
    (
        exited,
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
    )
}

/// Runs a --listen server and a client over net_memif; returns (client exited in time, client
/// output, server output).
fn run_pair(tag: &str, client_cmds: &str, limit: Duration) -> (bool, String, String) {
    let dir = std::env::temp_dir().join(format!("ddpdk-zz2-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let sock = dir.join("memif.sock");
    let sock = sock.to_str().expect("utf-8");
    let server_cmds = script(
        &format!("{tag}-server"),
        "mr reg 65536 remote-write\nsession offer last\nwait closed 55\nquit\n",
    );
    let client_cmds = script(&format!("{tag}-client"), client_cmds);
    let mut server = spawn(
        &eal(tag, "server", "0@0,1@1", sock),
        &[
            "--ip",
            "198.18.0.2",
            "--listen",
            "--cmdline-file",
            server_cmds.to_str().expect("utf-8"),
        ],
    );
    let (head, rest) =
        procs::read_until(server.stdout.take().expect("stdout"), "the server", |l| {
            l.contains("DDP endpoint on port")
        });
    let client = spawn(
        &eal(tag, "client", "0@1,1@0", sock),
        &[
            "--ip",
            "198.18.0.1",
            "--cmdline-file",
            client_cmds.to_str().expect("utf-8"),
        ],
    );
    let (exited, ctext) = finish(client, limit);
    let (_, serr) = finish(server, Duration::from_secs(70));
    let stext = head + &rest.join().unwrap_or_default() + &serr;
    let _ = std::fs::remove_dir_all(&dir);
    (exited, ctext, stext)
}

/// Review finding, fixed: `send` counted only completions; a post the core refuses (here: no session on the
/// stream, RFC 5043 §6 — LocalError::NoSession) comes back as Event::Refused, which `send`
/// ignores. After WINDOW (64) refused posts the posting loop of DdpApp::send
/// (cli/src/ddp_app.rs, `while posted < count` ... `continue`) spins with no deadline: the
/// command, and the whole endpoint, hang forever instead of reporting the refusal.
#[test]
fn send_refused_by_the_core_hangs_the_shell_forever() {
    let (exited, ctext, _stext) = run_pair(
        "refused",
        "assoc open 198.18.0.2\nsend untagged 1 1 0 100 100\nassoc close 1\nquit\n",
        Duration::from_secs(45),
    );
    assert!(
        ctext.contains("Association 1 up"),
        "set-up failed, not the defect:\n{ctext}"
    );
    assert!(
        exited,
        "the client's 'send' of 100 refused messages never returned (killed after 45 s):\n{ctext}"
    );
    // The command fails with the core's reason in the shell's words (it said `post_send`, the
    // library's name for the op), which stops the script (status 1).
    assert!(
        ctext.contains("send refused: no session on this stream"),
        "{ctext}"
    );
    // Said once, by the command that waited for it: not also as an event, nor once for each
    // refused post of the burst (64 lines before).
    assert_eq!(
        ctext.matches("refused: no session on this stream").count(),
        1,
        "{ctext}"
    );
}

/// `--run-for` ("stop and exit after SECS seconds") bounds a script's waiting command too: it
/// counted from the script's end, so `wait closed` with no peer held the endpoint until killed
/// (found by an outside-in test: still running 40 s into `--run-for 3`).
#[test]
fn run_for_ends_a_scripts_wait() {
    let cmds = script("runfor", "wait closed\nquit\n");
    let prefix = format!("ddpdk-zz2-runfor-{}", std::process::id());
    let c = Command::new(BIN)
        .args([
            "endpoint",
            "-l",
            "0-1",
            "--no-huge",
            "-m",
            "512",
            "--no-pci",
            "--log-level=*:error",
            "--file-prefix",
            &prefix,
            "--vdev=net_ring0",
            "--",
            "--ip",
            "198.18.0.2",
            "--cmdline-file",
            cmds.to_str().expect("utf-8"),
            "--run-for",
            "2",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ddpdk");
    let (exited, text) = finish(c, Duration::from_secs(30));
    assert!(exited, "still waiting 30 s into a --run-for of 2:\n{text}");
    assert!(
        text.contains("--run-for's 2 s ran out while waiting for the associations to close"),
        "{text}"
    );
    // ... and says, as a signal between commands does, that the script's `quit` was not run.
    assert!(text.contains("to close; the rest not run"), "{text}");
}

/// A shell's `assoc open` that never came up says why, as `perf client` does: here the
/// port's link is down (a memif server without its client). It said only "timed out waiting
/// for the association" (found by an outside-in test).
#[test]
fn an_assoc_open_that_fails_says_why() {
    let dir = std::env::temp_dir().join(format!("ddpdk-zz2-nolink-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let sock = dir.join("memif.sock");
    let cmds = script("nolink", "assoc open 198.18.0.2\nquit\n");
    let c = spawn(
        &eal("nolink", "server", "0@0,1@1", sock.to_str().expect("utf-8")),
        &[
            "--ip",
            "198.18.0.1",
            "--cmdline-file",
            cmds.to_str().expect("utf-8"),
            "--run-for",
            "3",
        ],
    );
    let (exited, text) = finish(c, Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(exited, "{text}");
    assert!(
        text.contains("while waiting for the association: the port's link is down"),
        "{text}"
    );
}
