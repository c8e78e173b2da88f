//! DDP write latency between two `ddpdk` processes over `net_memif` (issue 13 item 4), next to
//! the raw round trip of the same link measured in the same run.
//!
//! - DDP: `--ddp-listen` and `--ddp-connect --ddp-window 1`: one outstanding tagged write of
//!   `SIZE` bytes, posted, placed in the server's region, acknowledged by SCTP, completed
//!   (perftest's `ib_write_lat` semantics: the completion is the end); the client's p50 and
//!   p99 (hdrhistogram, ns resolution).
//! - raw: `--forward-mode echo` on one side and `--forward-mode ping` on the other: one frame
//!   of the size of the write's first DDP frame goes out and comes back, no protocol at all.
//! - raw, the write's frames (writes of more than one segment): as many full frames as the
//!   write has segments go out in one burst, each comes back cut to a SACK's 62 bytes
//!   (`--ping-frames`, `--echo-trim`): the bytes the write moves, with no protocol. The first
//!   raw figure is the yardstick; this one tells the link's share of a long write.
//!
//! Each round runs both, alternating which goes first; each process has a CPU of its own, the
//! endpoint's data core polled by its main lcore. Medians of the rounds' p50 and p99.
#![forbid(unsafe_code)]

use ddpdk_dataplane::{errln, outln};
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::Parser;
use ddpdk_benches::procs::{interrupt, reap, Running};

const GRACE: Duration = Duration::from_secs(30);
/// Ethernet 14, IPv4 20, SCTP common header 12, DATA chunk header 16, DDP-SSN 2, tagged DDP
/// header 14: the frame of a tagged write is its payload plus these.
const HEADERS: usize = 78;
/// The payload one frame carries at MTU 1500 (the MULPDU, 1418, less the tagged header).
const SEGMENT_PAYLOAD: usize = 1404;

#[derive(Debug, Parser)]
#[command(about = "DDP write latency over net_memif next to the raw round trip")]
struct Args {
    #[arg(long, default_value = "target/release/ddpdk")]
    ddpdk: PathBuf,
    /// Write sizes, bytes.
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 4096])]
    sizes: Vec<usize>,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 3)]
    secs: u64,
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// The server's region a session, bytes (`--region-bytes`; the server's default when not
    /// given). The client writes its slots one after the other, so a region as large as the
    /// write makes every write land on the same, cached, bytes: perftest's `ib_write_lat`,
    /// which writes one remote buffer. By default each write lands on lines in memory.
    #[arg(long)]
    region_bytes: Option<u64>,
    /// log2 of the slots of each memif ring, for every pair of the run alike (memif's
    /// `rsize`; DPDK's default is 10, 1024 slots of 2 KiB). A write takes a slot a frame and
    /// the slots are used in turn, so on a deep ring each frame is copied into and out of
    /// buffers the cache let go of; a shallow one keeps them warm.
    #[arg(long)]
    memif_rsize: Option<u8>,
}

fn eal(args: &Args, lcores: &str, prefix: &str, role: &str, sock: &str) -> Vec<String> {
    let rsize = args
        .memif_rsize
        .map(|r| format!(",rsize={r}"))
        .unwrap_or_default();
    [
        "--lcores",
        lcores,
        "--no-huge",
        "-m",
        "1024",
        "--no-pci",
        "--log-level=*:error",
        &format!("--file-prefix={prefix}"),
        &format!("--vdev=net_memif0,role={role},id=0,socket={sock}{rsize}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn spawn(args: &Args, eal: Vec<String>, app: &[&str]) -> std::io::Result<Running> {
    Command::new(&args.ddpdk)
        .args(eal)
        .arg("--")
        .args(app)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map(Running::new)
}

fn sock(tag: &str) -> String {
    let p = std::env::temp_dir().join(format!("ddpdk-lat-{}-{tag}.sock", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p.to_string_lossy().into_owned()
}

/// The JSON object of `key` among a process's output lines.
fn report(out: &str, key: &str) -> Option<serde_json::Value> {
    out.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v.get(key).cloned())
}

/// The frame of a lone SACK: Ethernet 14, IPv4 20, SCTP common header 12, SACK chunk 16.
const SACK_FRAME: usize = 62;

/// How a raw round trip is made: frames of `frame` bytes, `frames` of them out in one burst,
/// each sent back whole or cut to `trim` bytes.
#[derive(Debug, Clone, Copy)]
struct Raw {
    frame: usize,
    frames: usize,
    trim: Option<usize>,
}

/// (p50, p99) of the raw round trip, µs.
fn raw(args: &Args, tag: &str, how: Raw) -> Result<(f64, f64), String> {
    let Raw {
        frame,
        frames,
        trim,
    } = how;
    let sock = sock(&format!("{tag}-raw{frames}"));
    let common = |mode: &'static str| -> Vec<String> {
        let frame = frame.to_string();
        [
            "--forward-mode",
            mode,
            "--txpkts",
            frame.as_str(),
            "--json",
            "--link-timeout",
            "0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let mut echo_app = common("echo");
    if let Some(t) = trim {
        echo_app.extend(["--echo-trim".to_string(), t.to_string()]);
    }
    let echo_app: Vec<&str> = echo_app.iter().map(String::as_str).collect();
    let echo = spawn(
        args,
        eal(
            args,
            "0@0,1@0",
            &format!("lat-{tag}-echo{frames}"),
            "server",
            &sock,
        ),
        &echo_app,
    )
    .map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_millis(1500));
    let secs = args.secs.to_string();
    let mut ping_app = common("ping");
    ping_app.extend([
        "--run-for".to_string(),
        secs,
        "--ping-frames".to_string(),
        frames.to_string(),
    ]);
    let ping_app: Vec<&str> = ping_app.iter().map(String::as_str).collect();
    let ping = spawn(
        args,
        eal(
            args,
            "0@1,1@1",
            &format!("lat-{tag}-ping{frames}"),
            "client",
            &sock,
        ),
        &ping_app,
    )
    .map_err(|e| e.to_string())?;
    let out = reap(ping, GRACE + Duration::from_secs(args.secs)).map_err(|e| e.to_string())?;
    interrupt(&echo);
    let _ = reap(echo, GRACE);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rtt = report(&stdout, "rtt_us").ok_or_else(|| format!("raw: no round trips\n{stdout}"))?;
    match (
        rtt["p50"].as_f64(),
        rtt["p99"].as_f64(),
        rtt["count"].as_u64(),
    ) {
        (Some(p50), Some(p99), Some(n)) if n > 0 => Ok((p50, p99)),
        _ => Err(format!("raw: no round trips: {rtt}")),
    }
}

/// (p50, p99) of the DDP write latency, µs, for writes of `size` bytes.
fn ddp(args: &Args, tag: &str, size: usize) -> Result<(f64, f64), String> {
    let sock = sock(&format!("{tag}-ddp"));
    let region = args.region_bytes.map(|b| b.to_string());
    let mut server_args = vec![
        "--ddp-listen",
        "--ip",
        "198.18.0.2",
        "--run-for",
        "60",
        "--json",
    ];
    if let Some(r) = region.as_deref() {
        server_args.extend(["--region-bytes", r]);
    }
    let mut server = spawn(
        args,
        eal(args, "0@0", &format!("lat-{tag}-srv"), "server", &sock),
        &server_args,
    )
    .map_err(|e| e.to_string())?;
    let mut err = std::io::BufReader::new(server.stderr.take().ok_or("server stderr")?);
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            return Err("ddp: the server exited before listening".into());
        }
        if line.contains("(listening)") {
            break;
        }
    }
    let drain = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let (secs, size_s) = (args.secs.to_string(), size.to_string());
    let client = spawn(
        args,
        eal(args, "0@1", &format!("lat-{tag}-cli"), "client", &sock),
        &[
            "--ddp-connect",
            "198.18.0.2",
            "--ip",
            "198.18.0.1",
            "--run-for",
            &secs,
            "--ddp-size",
            &size_s,
            "--ddp-window",
            "1",
            "--json",
        ],
    )
    .map_err(|e| e.to_string())?;
    let out = reap(client, GRACE).map_err(|e| e.to_string())?;
    let _ = reap(server, GRACE);
    let server_log = drain.join().unwrap_or_default();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r = report(&stdout, "ddp_goodput").ok_or_else(|| {
        format!(
            "ddp: no report\n{stdout}\n{}\n{server_log}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let lat = &r["latency_us"];
    match (lat["p50"].as_f64(), lat["p99"].as_f64()) {
        (Some(p50), Some(p99)) if r["messages"].as_u64().unwrap_or(0) > 0 => Ok((p50, p99)),
        _ => Err(format!("ddp: no latency in {r}")),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn main() {
    let args = Args::parse();
    outln!(
        "size | raw round trip p50 / p99 us | DDP write p50 / p99 us | p50 ratio \
         [| raw, the write's frames p50 / p99 us | p50 ratio]"
    );
    for &size in &args.sizes {
        // The raw frame: the write's first DDP frame (one segment carries up to 1404 bytes).
        let frame = HEADERS + size.min(SEGMENT_PAYLOAD);
        let one = Raw {
            frame,
            frames: 1,
            trim: None,
        };
        // A write of several segments: as many full frames out, a SACK's frame back for each.
        let segments = size.div_ceil(SEGMENT_PAYLOAD).max(1);
        let all = (segments > 1).then_some(Raw {
            frame: HEADERS + SEGMENT_PAYLOAD,
            frames: segments,
            trim: Some(SACK_FRAME),
        });
        let (mut raws, mut ddps, mut alls) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..args.rounds {
            let tag = format!("{size}-{r}");
            // Each measurement goes first in turn.
            let mut order = vec![0, 1, 2];
            order.rotate_left(r as usize % 3);
            for which in order {
                let got = match (which, all) {
                    (0, _) => raw(&args, &tag, one).map(|x| raws.push(x)),
                    (1, _) => ddp(&args, &tag, size).map(|x| ddps.push(x)),
                    (_, Some(all)) => raw(&args, &tag, all).map(|x| alls.push(x)),
                    (_, None) => Ok(()),
                };
                if let Err(e) = got {
                    errln!("ddp-latency-bench: size {size} round {r}: {e}");
                    std::process::exit(1);
                }
            }
            let (rw, dw) = (raws[raws.len() - 1], ddps[ddps.len() - 1]);
            let tail = alls
                .last()
                .map(|aw: &(f64, f64)| format!(" | {:.1} / {:.1} | {:.1}", aw.0, aw.1, dw.0 / aw.0))
                .unwrap_or_default();
            outln!(
                "{size} round {r} | {:.1} / {:.1} | {:.1} / {:.1} | {:.1}{tail}",
                rw.0,
                rw.1,
                dw.0,
                dw.1,
                dw.0 / rw.0
            );
        }
        let raw50 = median(raws.iter().map(|x| x.0).collect());
        let raw99 = median(raws.iter().map(|x| x.1).collect());
        let ddp50 = median(ddps.iter().map(|x| x.0).collect());
        let ddp99 = median(ddps.iter().map(|x| x.1).collect());
        let tail = if alls.is_empty() {
            String::new()
        } else {
            let all50 = median(alls.iter().map(|x| x.0).collect());
            let all99 = median(alls.iter().map(|x| x.1).collect());
            format!(
                " | {all50:.1} / {all99:.1} ({segments} frames out, {SACK_FRAME}-byte frames \
                 back) | {:.1}",
                ddp50 / all50
            )
        };
        outln!(
            "{size} median ({frame}-byte raw frames) | {raw50:.1} / {raw99:.1} | {ddp50:.1} / \
             {ddp99:.1} | {:.1}{tail}",
            ddp50 / raw50
        );
    }
}
