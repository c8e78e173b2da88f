//! Raw-I/O rate of ddpdk next to dpdk-testpmd: `txonly` in one process → `rxonly` in another,
//! over a `net_memif` pair, at several frame sizes, both tools measured in the same run and
//! alternated round by round. The result is a ratio (ddpdk / testpmd), the only number that
//! means something on a shared machine.
//!
//! Each process gets the main lcore on one CPU and its forwarding lcore on the other, crossed,
//! so the two busy-polling lcores have a CPU each on a 2-core host. The rate is the receiver's
//! port counter (memif `ipackets`), sampled every second by the tool's own `--stats-period`,
//! the first and last samples dropped, the median kept.
#![forbid(unsafe_code)]

use ddpdk_dataplane::{errln, outln};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::Parser;
use ddpdk_benches::procs::{ddpdk_rx_pps, interrupt, reap, Running};

/// How long an interrupted tool gets to exit before it is killed.
const GRACE: Duration = Duration::from_secs(15);

#[derive(Debug, Parser)]
#[command(about = "ddpdk vs dpdk-testpmd: txonly -> rxonly over net_memif, as a ratio")]
struct Args {
    /// The ddpdk binary (build with `cargo build --release`).
    #[arg(long, default_value = "target/release/ddpdk")]
    ddpdk: PathBuf,
    /// The testpmd binary.
    #[arg(long, default_value = "dpdk-testpmd")]
    testpmd: PathBuf,
    /// Frame sizes in bytes.
    #[arg(long, value_delimiter = ',', default_value = "64,1500")]
    sizes: Vec<u16>,
    /// Seconds of traffic per measurement.
    #[arg(long, default_value_t = 6)]
    secs: u64,
    /// Measurements per tool and size (alternating ddpdk, testpmd).
    #[arg(long, default_value_t = 2)]
    rounds: u32,
    /// Print one JSON object per size instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    Ddpdk,
    Testpmd,
}

fn eal(lcores: &str, prefix: &str, vdev: &str) -> Vec<String> {
    vec![
        "--lcores".into(),
        lcores.into(),
        "--no-huge".into(),
        "-m".into(),
        "512".into(),
        "--no-pci".into(),
        "--file-prefix".into(),
        prefix.into(),
        "--log-level=*:error".into(),
        format!("--vdev={vdev}"),
    ]
}

fn spawn(
    args: &Args,
    tool: Tool,
    rx: bool,
    size: u16,
    sock: &str,
    tag: &str,
) -> std::io::Result<Running> {
    let (lcores, role, mode) = if rx {
        ("0@0,1@1", "server", "rxonly")
    } else {
        ("0@1,1@0", "client", "txonly")
    };
    let prefix = format!("bench-{tag}-{}", if rx { "rx" } else { "tx" });
    // Both tools get the same buffers, each holding a frame: ddpdk would give its memif client
    // such buffers itself (DPDK 22.11's memif corrupts frames split over buffers), testpmd not.
    let bsize = u32::from(size).div_ceil(1024).max(2) * 1024;
    let vdev = format!("net_memif0,role={role},id=0,socket={sock},bsize={bsize}");
    let mut c = match tool {
        Tool::Ddpdk => {
            let mut c = Command::new(&args.ddpdk);
            c.args(eal(lcores, &prefix, &vdev)).arg("--");
            c.args([
                "--forward-mode",
                mode,
                "--txpkts",
                &size.to_string(),
                "--stats-period",
                "1",
                "--json",
            ]);
            c.args(["--link-timeout", "0", "--total-num-mbufs", "16383"]);
            c
        }
        Tool::Testpmd => {
            let mut c = Command::new(&args.testpmd);
            c.args(eal(lcores, &prefix, &vdev)).arg("--");
            c.arg(format!("--forward-mode={mode}"));
            c.arg(format!("--txpkts={size}"));
            c.args(["--stats-period", "1", "--total-num-mbufs=16383"]);
            c
        }
    };
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map(Running::new)
}

/// Per-second receive rates printed by the receiver.
fn rx_samples(tool: Tool, out: &str) -> Vec<u64> {
    match tool {
        Tool::Ddpdk => ddpdk_rx_pps(out),
        Tool::Testpmd => out
            .lines()
            .filter_map(|l| l.split("Rx-pps:").nth(1))
            .filter_map(|r| r.split_whitespace().next()?.parse().ok())
            .collect(),
    }
}

fn median(mut v: Vec<u64>) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(v[v.len() / 2])
}

/// One measurement: packets per second received, or why there is none.
fn measure(args: &Args, tool: Tool, size: u16, tag: &str) -> Result<u64, String> {
    let sock = std::env::temp_dir().join(format!("ddpdk-bench-{}-{tag}.sock", std::process::id()));
    let _ = std::fs::remove_file(&sock);
    let sock = sock.to_string_lossy().into_owned();
    let rx =
        spawn(args, tool, true, size, &sock, tag).map_err(|e| format!("{tool:?} receiver: {e}"))?;
    std::thread::sleep(Duration::from_millis(1500));
    let tx = match spawn(args, tool, false, size, &sock, tag) {
        Ok(c) => c,
        Err(e) => {
            interrupt(&rx);
            let _ = reap(rx, GRACE);
            return Err(format!("{tool:?} sender: {e}"));
        }
    };
    std::thread::sleep(Duration::from_secs(args.secs + 1));
    interrupt(&tx);
    interrupt(&rx);
    let _ = reap(tx, GRACE);
    let out = reap(rx, GRACE).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&sock);
    let mut s: Vec<u64> = rx_samples(tool, &String::from_utf8_lossy(&out.stdout))
        .into_iter()
        .filter(|&x| x > 0)
        .collect();
    // The first and last seconds are partial (sender starting, stopping).
    if s.len() >= 3 {
        s.remove(0);
        s.pop();
    }
    median(s).ok_or_else(|| format!("{tool:?} at {size} B: the receiver saw no traffic"))
}

fn main() {
    let args = Args::parse();
    if !args.json {
        outln!(
            "txonly -> rxonly over net_memif, two processes, {} s x {} round(s) per tool and size",
            args.secs,
            args.rounds
        );
        outln!(
            "{:>6}  {:>14}  {:>14}  {:>7}",
            "bytes",
            "ddpdk Mpps",
            "testpmd Mpps",
            "ratio"
        );
    }
    let mut failed = false;
    for &size in &args.sizes {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for r in 0..args.rounds {
            // Alternate which tool goes first so drift on the host hits both alike.
            let order = if r % 2 == 0 {
                [Tool::Ddpdk, Tool::Testpmd]
            } else {
                [Tool::Testpmd, Tool::Ddpdk]
            };
            for tool in order {
                match measure(&args, tool, size, &format!("{size}-{r}-{tool:?}")) {
                    Ok(pps) => {
                        if tool == Tool::Ddpdk {
                            ours.push(pps)
                        } else {
                            theirs.push(pps)
                        }
                    }
                    Err(e) => {
                        errln!("raw-io-bench: {e}");
                        failed = true;
                    }
                }
            }
        }
        let (Some(o), Some(t)) = (median(ours.clone()), median(theirs.clone())) else {
            continue;
        };
        let ratio = o as f64 / t as f64;
        if args.json {
            outln!(
                "{}",
                serde_json::json!({"bytes": size, "ddpdk_pps": o, "testpmd_pps": t, "ratio": ratio, "ddpdk_rounds": ours, "testpmd_rounds": theirs})
            );
        } else {
            outln!(
                "{:>6}  {:>14.3}  {:>14.3}  {:>7.3}",
                size,
                o as f64 / 1e6,
                t as f64 / 1e6,
                ratio
            );
        }
    }
    if failed {
        std::process::exit(1);
    }
}
