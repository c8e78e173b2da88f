//! Running `ddpdk` processes against each other in tests.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::thread::JoinHandle;

/// A command file for `--cmdline-file`, removed when dropped (tests run again and again; their
/// scripts should not pile up in the temporary directory).
pub struct Script(std::path::PathBuf);

/// Writes `body` to a command file named after the test binary's `tag`, the process and `name`.
#[allow(dead_code)] // not every test binary that includes this module runs scripts
pub fn script(tag: &str, name: &str, body: &str) -> Script {
    let p = std::env::temp_dir().join(format!("ddpdk-{tag}-{}-{name}.txt", std::process::id()));
    std::fs::write(&p, body).expect("write script");
    Script(p)
}

impl std::ops::Deref for Script {
    type Target = std::path::PathBuf;
    fn deref(&self) -> &std::path::PathBuf {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Script {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Reads `stream` line by line until `ready` accepts a line (a process saying it is up),
/// failing if it ends first; returns what was read and a thread that collects the rest.
#[allow(dead_code)] // not every test binary that includes this module reads so
pub fn read_until<R: Read + Send + 'static>(
    stream: R,
    what: &str,
    ready: impl Fn(&str) -> bool,
) -> (String, JoinHandle<String>) {
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        let n = reader
            .read_line(&mut line)
            .expect("read the process's output");
        assert!(n > 0, "{what} ended before it was ready:\n{head}");
        head.push_str(&line);
        if ready(&line) {
            break;
        }
    }
    let rest = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = reader.read_to_string(&mut s);
        s
    });
    (head, rest)
}

/// EAL arguments for one process on a `net_memif` port: `role` server or client on `sock`,
/// `lcores` as `--lcores` takes them, its own `prefix`, and `memory` MB, on huge pages or not.
#[allow(dead_code)] // not every test binary that includes this module runs memif
pub fn memif_eal(
    role: &str,
    lcores: &str,
    prefix: &str,
    sock: &Path,
    memory: u32,
    huge: bool,
) -> Vec<String> {
    vdev_eal(
        lcores,
        prefix,
        &format!(
            "net_memif0,role={role},id=0,socket={}",
            sock.to_str().expect("utf-8")
        ),
        memory,
        huge,
    )
}

/// EAL arguments for one process on the virtual device `vdev` (`--vdev`'s value), the rest as
/// [`memif_eal`]'s.
#[allow(dead_code)] // not every test binary that includes this module starts processes so
pub fn vdev_eal(lcores: &str, prefix: &str, vdev: &str, memory: u32, huge: bool) -> Vec<String> {
    let mut v = vec!["--lcores".to_string(), lcores.to_string()];
    if !huge {
        v.push("--no-huge".into());
    }
    v.extend([
        "-m".to_string(),
        memory.to_string(),
        "--no-pci".into(),
        "--log-level=*:error".into(),
        format!("--file-prefix={prefix}"),
        format!("--vdev={vdev}"),
    ]);
    v
}

/// Starts `bin` with `eal`, `--` and `app`: no input, output piped.
#[allow(dead_code)] // not every test binary that includes this module starts processes so
pub fn spawn(bin: &str, eal: &[String], app: &[&str]) -> std::process::Child {
    std::process::Command::new(bin)
        .args(eal)
        .arg("--")
        .args(app)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start ddpdk")
}

/// The replies of `dpdk-telemetry.py -f PREFIX` to `cmds`, one JSON value per command.
#[allow(dead_code)] // not every test binary that includes this module asks so
pub fn ask(prefix: &str, cmds: &[&str]) -> Vec<serde_json::Value> {
    let mut child = std::process::Command::new("python3")
        .args(["/usr/bin/dpdk-telemetry.py", "-f", prefix])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("dpdk-telemetry.py (package dpdk-dev)");
    let mut stdin = child.stdin.take().expect("piped");
    for c in cmds {
        writeln!(stdin, "{c}").expect("dpdk-telemetry.py reads");
    }
    drop(stdin);
    let out = child.wait_with_output().expect("dpdk-telemetry.py ends");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let replies: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(replies.len(), cmds.len(), "replies to {cmds:?}:\n{text}");
    replies
}

/// The value of command `cmd` in its reply.
#[allow(dead_code)] // as ask
pub fn value<'a>(reply: &'a serde_json::Value, cmd: &str) -> &'a serde_json::Value {
    &reply[cmd.split(',').next().unwrap_or(cmd)]
}

/// The JSON object `key` from the line of `out` that holds it.
#[allow(dead_code)] // not every test binary that includes this module reads JSON
pub fn json_line(out: &str, key: &str) -> serde_json::Value {
    out.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v.get(key).cloned())
        .unwrap_or_else(|| panic!("no {key} in:\n{out}"))
}

/// A perf pair's end, both with `--json`: both exited 0, the client wrote more than
/// `min_messages` and the server delivered every one, with no error. Returns the client's
/// `ddp_goodput` and the server's `ddp_server`.
#[allow(dead_code)] // not every test binary that includes this module runs a perf pair
pub fn every_write_delivered(
    client: &std::process::Output,
    client_text: &str,
    server: &std::process::Output,
    server_text: &str,
    min_messages: u64,
) -> (serde_json::Value, serde_json::Value) {
    assert_eq!(client.status.code(), Some(0), "client:\n{client_text}");
    assert_eq!(server.status.code(), Some(0), "server:\n{server_text}");
    let goodput = json_line(client_text, "ddp_goodput");
    let done = json_line(server_text, "ddp_server");
    let messages = goodput["messages"].as_u64().expect("messages");
    assert!(messages > min_messages, "{goodput}");
    assert_eq!(done["delivered"].as_u64(), Some(messages), "{done}");
    assert_eq!(done["errors"].as_u64(), Some(0), "{done}");
    (goodput, done)
}

/// `ddpdk -i` (ports started, forwarding stopped) in network namespace `ns`, its shell driven
/// line by line; killed when dropped (it would hold the namespace).
#[allow(dead_code)] // not every test binary that includes this module drives a shell
pub struct NetnsShell {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
}

#[allow(dead_code)]
impl NetnsShell {
    /// The shell on lcores 0-1 with `vdev`, under EAL file prefix `prefix`.
    pub fn start(bin: &str, ns: &str, prefix: &str, vdev: &str) -> NetnsShell {
        let mut child = std::process::Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                bin,
                "-l",
                "0-1",
                "--no-huge",
                "-m",
                "512",
            ])
            .args(["--no-pci", "--log-level=*:error"])
            .arg(format!("--file-prefix={prefix}"))
            .arg(format!("--vdev={vdev}"))
            .args(["--", "-i"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start ddpdk");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        NetnsShell {
            child,
            stdin,
            lines,
        }
    }

    pub fn command(&mut self, cmd: &str) {
        writeln!(self.stdin, "{cmd}").expect("command");
    }

    /// (RX-packets, RX-missed) of port 0, as `show port stats all` prints them (the ports
    /// are up once the shell answers).
    pub fn rx_stats(&mut self) -> (u64, u64) {
        self.command("show port stats all");
        loop {
            let l = self
                .lines
                .recv_timeout(std::time::Duration::from_secs(30))
                .expect("the shell answers");
            if l.contains("RX-missed:") {
                let n = |key: &str| -> u64 {
                    let at = l.find(key).expect("field") + key.len();
                    l[at..]
                        .split_whitespace()
                        .next()
                        .and_then(|v| v.parse().ok())
                        .expect("a count")
                };
                return (n("RX-packets:"), n("RX-missed:"));
            }
        }
    }
}

impl Drop for NetnsShell {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends `n` frames of 114 bytes (an unused EtherType) out of interface `iface` of namespace
/// `ns`, from a packet socket; panics if they could not be sent.
#[allow(dead_code)]
pub fn send_frames(ns: &str, iface: &str, n: u64) {
    let o = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "python3", "-c"])
        .arg(format!(
            "import socket\n\
             s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n\
             s.bind(('{iface}', 0))\n\
             f = bytes([2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x88, 0xb5]) + bytes(100)\n\
             for _ in range({n}): s.send(f)\n"
        ))
        .output()
        .expect("python3");
    assert!(
        o.status.success(),
        "sending frames: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Kills process `pid` with SIGKILL if it still runs `limit` after this is made, turning a
/// hang into a failed test; dropping it disarms it. The process is the one it was made for
/// (its start time, from /proc, is checked first): a watchdog that outlived its test killed
/// whatever process had taken the pid meanwhile (an independent review).
#[allow(dead_code)]
pub struct Watchdog {
    disarm: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[allow(dead_code)]
impl Watchdog {
    pub fn new(pid: u32, limit: std::time::Duration) -> Watchdog {
        let started = start_time(pid);
        let (disarm, armed) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            if armed.recv_timeout(limit) == Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                && started.is_some()
                && start_time(pid) == started
            {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        });
        Watchdog {
            disarm: Some(disarm),
            thread: Some(thread),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.disarm.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The start time of process `pid` (field 22 of /proc/PID/stat, after the command's
/// parenthesised name), which tells it from a later process given the same pid.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}
