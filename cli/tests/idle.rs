//! An idle endpoint sleeps. A `ddpdk --listen` endpoint with nothing to do used to burn more
//! than a whole CPU (its data core polled without pause, `--yield-when-idle` or not, and its
//! control thread woke every 100 µs). Its own binary, so no other test's processes share the
//! CPUs while it measures.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ddpdk");

/// CPU time (user + system) the process `pid` has used so far.
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("process stat");
    let rest = stat.rsplit_once(')').map(|(_, r)| r).expect("stat line");
    let f: Vec<i64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15; `rest` starts at field 3. Clock ticks of 10 ms.
    Duration::from_millis((f[11] + f[12]) as u64 * 10)
}

/// A listening endpoint on a net_memif port with no peer, up and idle.
fn idle_endpoint(tag: &str, extra: &[&str]) -> Child {
    let sock = std::env::temp_dir().join(format!("ddpdk-idle-{}-{tag}.sock", std::process::id()));
    let _ = std::fs::remove_file(&sock);
    let mut c = Command::new(BIN)
        .args([
            "--lcores",
            "0@0,1@1",
            "--no-huge",
            "-m",
            "256",
            "--no-pci",
            "--log-level=*:error",
            &format!("--file-prefix=idle{}{tag}", std::process::id()),
            &format!(
                "--vdev=net_memif0,role=server,id=0,socket={}",
                sock.display()
            ),
            "--",
            "--ip",
            "198.18.0.2",
            "--listen",
            "--link-timeout",
            "0.1",
        ])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start ddpdk");
    let out = c.stdout.take().expect("stdout");
    let mut lines = BufReader::new(out).lines();
    loop {
        let line = lines
            .next()
            .expect("ddpdk ended before it was running")
            .expect("read");
        if line.contains("DDP endpoint running") {
            break;
        }
    }
    // Keep reading so the process never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    c
}

/// CPU used over `d` of wall time, as a fraction of one CPU.
fn cpu_share(c: &Child, d: Duration) -> f64 {
    let (t0, c0) = (Instant::now(), cpu(c.id()));
    std::thread::sleep(d);
    (cpu(c.id()) - c0).as_secs_f64() / t0.elapsed().as_secs_f64()
}

fn stop(mut c: Child) {
    let _ = Command::new("kill")
        .args(["-INT", &c.id().to_string()])
        .status();
    let _ = c.wait();
}

/// With the default `--idle sleep`, an endpoint with no traffic uses a few per cent of one
/// CPU (3 % measured on a 2-CPU VM; a spinning data core alone uses 100 %). The bound leaves
/// room for a debug build and a loaded machine, and none for a core that spins.
#[test]
fn an_idle_endpoint_sleeps() {
    let c = idle_endpoint("sleep", &[]);
    // Past the back-off's first 10 ms, into the deep sleep.
    std::thread::sleep(Duration::from_millis(300));
    let share = cpu_share(&c, Duration::from_secs(3));
    stop(c);
    assert!(
        share < 0.3,
        "an idle endpoint used {:.0} % of a CPU",
        share * 100.0
    );
}

/// `--idle interrupt` says at start whether the cores got what it asks for: a device with RX
/// interrupts (`net_tap`, root and /dev/net/tun) gives them to a data core on a worker lcore;
/// a `net_ring` has none, and its cores sleep as with `sleep`.
#[test]
fn idle_interrupt_says_whether_the_device_has_rx_interrupts() {
    let tap = std::path::Path::new("/dev/net/tun").exists()
        && std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        });
    let iface = format!("net_tap0,iface=ddpidle{}", std::process::id() % 10_000);
    let mut cases = vec![(
        "net_ring0",
        "; idle: sleep (the device has no RX interrupts)",
    )];
    if tap {
        cases.push((&iface, "; idle: RX interrupts"));
    } else {
        eprintln!("net_tap part skipped: needs root and /dev/net/tun");
    }
    for (vdev, want) in cases {
        let o = Command::new(BIN)
            .args([
                "endpoint",
                "-l",
                "0-1",
                "--no-huge",
                "-m",
                "512",
                "--no-pci",
                "--file-prefix",
                &format!("ddpdk-idle-intr{}", std::process::id()),
                "--vdev",
                vdev,
                "--log-level=*:error",
                "--",
                "--ip",
                "198.18.12.2",
                "--data-cores",
                "1",
                "--idle",
                "interrupt",
                "--run-for",
                "1",
            ])
            .output()
            .expect("run ddpdk");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{vdev}: {out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let line = out
            .lines()
            .find(|l| l.starts_with("DDP endpoint on port"))
            .unwrap_or_else(|| panic!("{vdev}: no start-up line in {out}"));
        assert!(line.ends_with(want), "{vdev}: {line}");
    }
}
