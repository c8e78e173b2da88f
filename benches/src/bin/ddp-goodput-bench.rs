//! Tagged-write goodput between two `ddpdk` processes over `net_memif` (issue 6 item 8, issue
//! 13 item 2), next to two ceilings of the same link measured in the same run, at the frame size
//! a full DDP segment makes:
//! - raw: `txonly` → `rxonly`, frames received and freed: what the link carries;
//! - placement: `txonly` → `rxplace`, each frame's CRC32c computed and its payload copied into
//!   a 64 MiB region in DPDK memory, with no protocol: what a placing receiver can do here;
//! - placement of zero-copy frames: the same, the txonly frames shaped as a zero-copy DDP
//!   sender's (`--txsplit`: the headers in a buffer of their own, the payload attached from a
//!   region by reference), so that what the device does with such a chain (memif copies and
//!   frees both buffers) is in the ceiling too, without any protocol.
//!
//! Goodput is reported as a ratio to each (frames per second × segment payload): the share of
//! the ceiling that arrives as placed DDP payload. Each ceiling is measured on the links' memif
//! ring and on each ring of `--ceiling-rsizes` (64 slots by default), and the best counts:
//! txonly keeps its ring full, so on a deep ring the receiver reads frames written long before,
//! out of cache, which understates what it can do (benches/README.md, "Session 27"). DDP is
//! measured on the same rings and its best counts too, for the same reason: a sender that keeps
//! a deep ring full makes the receiver's copy out of it miss the cache just as txonly's does
//! (MTU 1500, DDP on 1024 slots 0.61-0.68 of placement, on 64 0.77-0.79: "Session 48"). The
//! summary gives the ratio of the medians and the median of the rounds' own ratios: where the
//! machine's speed shifts between runs (a shared VM), the first can pair a fast round's
//! ceiling with a slow round's goodput.
//!
//! Each round runs them all, in an order that rotates from round to round (the sources' own
//! order reversed every other round): the three ceilings (the receiver's median per-second
//! `rx_pps`), then the DDP pair for each source (`--ddp-listen` and `--ddp-connect`, the
//! client's goodput over `--secs`). Two links by default: MTU 1500 (1418-byte segments, 1404 bytes of
//! payload) and MTU 9000 (8918-byte segments, 8904 of payload; jumbo mbufs, memif buffers of
//! 9216 bytes so a frame is one descriptor). The MULPDU keeps 32 bytes of each packet for a
//! bundled SACK (RFC 5043 §9), so segments are 20 bytes short of the link's largest.
#![forbid(unsafe_code)]

use ddpdk_dataplane::{errln, outln};
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::Parser;
use ddpdk_benches::procs::{ddpdk_rx_pps, interrupt, reap, Running};

/// How long a finished or interrupted process gets to exit before it is killed.
const GRACE: Duration = Duration::from_secs(30);

/// The MULPDU on a link of `mtu` over IPv4 (RFC 5043 §9): the IP packet less IPv4 (20), the
/// SCTP common header (12), a DATA chunk header (16), the DDP-SSN (2) and 32 bytes kept for a
/// bundled SACK.
fn mulpdu(mtu: u16) -> u16 {
    mtu - 20 - 12 - 16 - 2 - 32
}

/// DDP payload of a full tagged segment: the MULPDU less the 14-byte tagged header.
fn segment_payload(mtu: u16) -> f64 {
    f64::from(mulpdu(mtu) - 14)
}

/// The frame a full segment travels in: MULPDU + DDP-SSN 2 + DATA header 16 + SCTP header 12 +
/// IPv4 20 + Ethernet 14.
fn frame(mtu: u16) -> u16 {
    mulpdu(mtu) + 2 + 16 + 12 + 20 + 14
}

/// memif buffers big enough for one frame each (unless `--memif-bsize` says otherwise; ddpdk
/// refuses buffers smaller than its frames, which DPDK 22.11's memif corrupts: cli/src/memif.rs).
fn memif_bsize(mtu: u16, forced: Option<u16>) -> u16 {
    match forced {
        Some(b) => b,
        None if mtu > 1500 => 9216,
        None => 2048,
    }
}

#[derive(Debug, Parser)]
#[command(about = "DDP tagged-write goodput over net_memif next to the raw txonly -> rxonly rate")]
struct Args {
    /// The ddpdk binary (build with `cargo build --release`).
    #[arg(long, default_value = "target/release/ddpdk")]
    ddpdk: PathBuf,
    /// Size of each tagged write, bytes (cut into 1418-byte segments).
    #[arg(long, default_value_t = 1 << 20)]
    write_size: u64,
    /// Seconds of traffic per measurement.
    #[arg(long, default_value_t = 5)]
    secs: u64,
    /// Rounds (each measures both).
    #[arg(long, default_value_t = 2)]
    rounds: u32,
    /// Link MTUs to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1500u16, 9000])]
    mtus: Vec<u16>,
    /// Where the client's writes come from, comma-separated: `region` (registered DPDK
    /// memory, sent by reference: zero-copy) and/or `bytes` (moved into each send, copied).
    /// `region-esp` and `bytes-esp`: the same with every packet in ESP (AES-GCM-128,
    /// transport mode, issue 15 item 6), the ratio to the same source without ESP printed.
    #[arg(long, value_delimiter = ',', default_values_t = [String::from("region"), String::from("bytes")])]
    sources: Vec<String>,
    /// memif buffer size for every link (default: one buffer per frame). ddpdk refuses one
    /// smaller than its frames, DDP's or txonly's (DPDK 22.11's memif corrupts frames split
    /// over buffers).
    #[arg(long)]
    memif_bsize: Option<u16>,
    /// log2 of the slots of each memif ring (memif's `rsize`; DPDK's default is 10, 1024
    /// slots). A txonly sender keeps its ring full, so the frames rxplace reads were written a
    /// whole ring earlier: 9 MiB of them at MTU 9000, out of cache. A smaller ring shows what
    /// that costs the ceiling (benches/README.md, "Session 27").
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=14))]
    memif_rsize: Option<u8>,
    /// Further memif ring sizes (log2) each ceiling and each DDP run is measured on, besides
    /// the links' own: the figure of a round is the best of them, so a ring too deep for the
    /// cache does not understate it (a sender keeps its ring full; at MTU 9000 the default
    /// ring holds 9 MiB of frames, and rxplace measured 5.2 GB/s on it against 6.1 on 64
    /// slots). Give `--ceiling-rsizes` without a value for the links' ring alone.
    #[arg(long, value_delimiter = ',', num_args = 0.., default_values_t = [6u8],
          value_parser = clap::value_parser!(u8).range(1..=14))]
    ceiling_rsizes: Vec<u8>,
    /// Shares of received frames each endpoint drops on purpose (`--fault-drop`), each
    /// measured with writes from a region after the lossless runs of every round: e.g.
    /// `0.001,0.01` (issue 13 item 9). None by default.
    #[arg(long, value_delimiter = ',')]
    losses: Vec<f64>,
    /// Print one JSON object per MTU instead of a table.
    #[arg(long)]
    json: bool,
    /// Run every process on hugepages (the EAL's memory taken from the hugetlbfs mount as it
    /// needs it, as `ddpdk` runs by default) instead of `--no-huge -m 1024`: the regions, the
    /// mbufs and memif's rings on 2 MiB pages. Each process's page files are removed after it
    /// ends (DPDK leaves those of memory still allocated at exit).
    #[arg(long)]
    hugepages: bool,
}

fn eal(
    args: &Args,
    lcores: &str,
    prefix: &str,
    role: &str,
    sock: &str,
    mtu: u16,
    rsize: Option<u8>,
) -> Vec<String> {
    let memory: &[&str] = if args.hugepages {
        &[]
    } else {
        &["--no-huge", "-m", "1024"]
    };
    [
        "--lcores",
        lcores,
        "--no-pci",
        "--log-level=*:error",
        &format!("--file-prefix={prefix}"),
        &format!(
            "--vdev=net_memif0,role={role},id=0,socket={sock},bsize={}{}",
            memif_bsize(mtu, args.memif_bsize),
            rsize.map(|r| format!(",rsize={r}")).unwrap_or_default()
        ),
    ]
    .iter()
    .chain(memory)
    .map(|s| s.to_string())
    .collect()
}

/// With `--hugepages`, the page files a process of EAL prefix `prefix` leaves in the hugetlbfs
/// mounts (`<prefix>map_<n>`), removed when this drops: DPDK 22.11 unlinks at exit only the
/// memory it freed, and each run's prefix is new, so no later EAL would clear them. Made before
/// the process's `Running`, so that it drops after it (killed and reaped) on every path.
struct PageFiles(Option<String>);

impl PageFiles {
    fn of(args: &Args, prefix: &str) -> PageFiles {
        PageFiles(args.hugepages.then(|| prefix.to_owned()))
    }
}

impl Drop for PageFiles {
    fn drop(&mut self) {
        if let Some(prefix) = &self.0 {
            remove_page_files(prefix);
        }
    }
}

fn remove_page_files(prefix: &str) {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let files = format!("{prefix}map_");
    for dir in mounts
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .collect::<Vec<_>>()
                .get(1..3)
                .map(|f| (f[0], f[1]))
        })
        .filter(|&(_, fs)| fs == "hugetlbfs")
        .map(|(dir, _)| dir)
    {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(&files) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

fn spawn(args: &Args, eal: Vec<String>, app: &[String]) -> std::io::Result<Running> {
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
    let p = std::env::temp_dir().join(format!("ddpdk-goodput-{}-{tag}.sock", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p.to_string_lossy().into_owned()
}

/// The ceiling of zero-copy frames: rxplace fed by a txonly whose frames are shaped as a
/// zero-copy DDP sender's (`--txsplit`: the headers in a buffer, the segment's payload attached
/// from a region), so that what the device does with such chains is in the ceiling too.
const ZERO_COPY_CEILING: &str = "rxplace-zc";

/// Frames per second at `frame(mtu)` bytes from txonly into a receiver in forwarding mode
/// `mode` (rxonly or rxplace, or [`ZERO_COPY_CEILING`]): the receiver's median sample.
fn raw(args: &Args, tag: &str, mtu: u16, mode: &str, rsize: Option<u8>) -> Result<f64, String> {
    let tag = format!("{tag}-{mode}-r{}", rsize.unwrap_or(0));
    let tag = tag.as_str();
    // --txsplit at the segment's payload: the headers a DDP frame has before it.
    let (mode, split) = if mode == ZERO_COPY_CEILING {
        let header = frame(mtu) - (mulpdu(mtu) - 14);
        ("rxplace", Some(header.to_string()))
    } else {
        (mode, None)
    };
    let sock = sock(tag);
    let common = |mode: &str| -> Vec<String> {
        [
            "--forward-mode",
            mode,
            "--txpkts",
            &frame(mtu).to_string(),
            "--mbuf-size",
            &(memif_bsize(mtu, args.memif_bsize) + 128).to_string(),
            "--stats-period",
            "1",
            "--json",
            "--link-timeout",
            "0",
            "--total-num-mbufs",
            "16383",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let _rx_pages = PageFiles::of(args, &format!("gp-{tag}-rx"));
    let rx = spawn(
        args,
        eal(
            args,
            "0@0,1@1",
            &format!("gp-{tag}-rx"),
            "server",
            &sock,
            mtu,
            rsize,
        ),
        &common(mode),
    )
    .map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_millis(1500));
    let _tx_pages = PageFiles::of(args, &format!("gp-{tag}-tx"));
    let tx = spawn(
        args,
        eal(
            args,
            "0@1,1@0",
            &format!("gp-{tag}-tx"),
            "client",
            &sock,
            mtu,
            rsize,
        ),
        &common("txonly")
            .into_iter()
            .chain(
                split
                    .iter()
                    .flat_map(|n| ["--txsplit".to_string(), n.clone()]),
            )
            .collect::<Vec<_>>(),
    )
    .map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_secs(args.secs + 1));
    interrupt(&tx);
    interrupt(&rx);
    let _ = reap(tx, GRACE);
    let out = reap(rx, GRACE).map_err(|e| e.to_string())?;
    let mut s: Vec<u64> = ddpdk_rx_pps(&String::from_utf8_lossy(&out.stdout))
        .into_iter()
        .filter(|&x| x > 0)
        .collect();
    if s.len() >= 3 {
        s.remove(0);
        s.pop();
    }
    s.sort_unstable();
    s.get(s.len() / 2)
        .map(|&x| x as f64)
        .ok_or_else(|| format!("{mode}: the receiver saw no traffic"))
}

/// What a DDP run reports: goodput, and the sender's recoveries.
#[derive(Debug, Clone, Copy, Default)]
struct Run {
    bytes_per_s: f64,
    fast_retransmits: u64,
    t3_expiries: u64,
    /// The share of the transfer each side's data core was busy (`CoreStats::busy_ns`): the
    /// side near 1.0 is the bound.
    sender_busy: Option<f64>,
    receiver_busy: Option<f64>,
    /// Frames each side's data core handled per busy turn (`CoreStats::busy_turns`): the
    /// batch its per-turn costs are spread over.
    sender_batch: Option<f64>,
    receiver_batch: Option<f64>,
}

impl Run {
    /// "busy: sender 98 % (9 frames a turn), receiver 61 % (48)".
    fn busy(&self) -> String {
        let pc = |s: Option<f64>| s.map_or("?".into(), |s| format!("{:.0} %", s * 100.0));
        let b = |s: Option<f64>| s.map_or("?".into(), |s| format!("{s:.0}"));
        format!(
            "busy: sender {} ({} frames a turn), receiver {} ({})",
            pc(self.sender_busy),
            b(self.sender_batch),
            pc(self.receiver_busy),
            b(self.receiver_batch)
        )
    }
}

/// DDP goodput in payload bytes per second, as the client reports it, with its writes from
/// `source`.
fn ddp(args: &Args, tag: &str, mtu: u16, source: &str, rsize: Option<u8>) -> Result<Run, String> {
    ddp_run(args, tag, mtu, source, 0.0, rsize)
}

/// DDP goodput with writes from `source` on each ring a ceiling is measured on (`rings`): the
/// best run, and its ring.
fn best_ddp(args: &Args, tag: &str, mtu: u16, source: &str) -> Result<(Run, Option<u8>), String> {
    let mut best: Option<(Run, Option<u8>)> = None;
    for rsize in rings(args) {
        let run = ddp(args, tag, mtu, source, rsize)?;
        if best.is_none_or(|(b, _)| run.bytes_per_s > b.bytes_per_s) {
            best = Some((run, rsize));
        }
    }
    best.ok_or_else(|| format!("ddp from {source}: no ring measured"))
}

/// The server's busy share from its summary line ("... data cores busy 61 %").
fn server_busy(log: &str) -> Option<f64> {
    let rest = log
        .lines()
        .find_map(|l| l.split("data cores busy ").nth(1))?;
    let pc: f64 = rest.split_whitespace().next()?.parse().ok()?;
    Some(pc / 100.0)
}

/// The server's frames per busy turn from its summary line ("..., 48.0 frames a busy turn").
fn server_batch(log: &str) -> Option<f64> {
    let rest = log
        .lines()
        .find_map(|l| l.split("data cores busy ").nth(1))?;
    rest.split(", ")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The ESP configuration of one end of an `-esp` run (RFC 5043 §13): AES-GCM-128 in
/// transport mode, SCTP between the two addresses protected both ways; returns the file.
fn esp_config(tag: &str, client: bool) -> Result<String, String> {
    const K1: &str = "2b:7e:15:16:28:ae:d2:a6:ab:f7:15:88:09:cf:4f:3c:ca:fe:ba:be";
    const K2: &str = "00:01:02:03:04:05:06:07:08:09:0a:0b:0c:0d:0e:0f:10:11:12:13";
    let (me_out, me_in, peer) = if client {
        ("out", "in", "198.18.0.2")
    } else {
        ("in", "out", "198.18.0.1")
    };
    let text = format!(
        "sa {me_out} 1000 aead_algo aes-128-gcm aead_key {K1} mode transport\n\
         sa {me_in} 2000 aead_algo aes-128-gcm aead_key {K2} mode transport\n\
         sp ipv4 {me_out} esp protect 1000 pri 10 {} {peer}/32 proto sctp\n\
         sp ipv4 {me_in} esp protect 2000 pri 10 {} {peer}/32 proto sctp\n",
        if client { "dst" } else { "src" },
        if client { "src" } else { "dst" },
    );
    let p = std::env::temp_dir().join(format!(
        "ddpdk-goodput-{}-{tag}-{}.esp",
        std::process::id(),
        if client { "cli" } else { "srv" }
    ));
    std::fs::write(&p, text).map_err(|e| e.to_string())?;
    Ok(p.to_string_lossy().into_owned())
}

/// One DDP pair, each endpoint dropping `loss` of what it receives.
fn ddp_run(
    args: &Args,
    tag: &str,
    mtu: u16,
    source: &str,
    loss: f64,
    rsize: Option<u8>,
) -> Result<Run, String> {
    let tag = format!("{tag}-{source}-{loss}-r{}", rsize.unwrap_or(0));
    let tag = tag.as_str();
    let sock = sock(tag);
    let loss_s = loss.to_string();
    let (source, esp) = match source.strip_suffix("-esp") {
        Some(s) => (s, true),
        None => (source, false),
    };
    let configs = if esp {
        vec![esp_config(tag, false)?, esp_config(tag, true)?]
    } else {
        Vec::new()
    };
    let ipsec = |client: bool| -> Result<Vec<String>, String> {
        Ok(configs
            .get(usize::from(client))
            .map(|c| vec!["--ipsec-config".to_string(), c.clone()])
            .unwrap_or_default())
    };
    let server_app: Vec<String> = [
        "--ddp-listen",
        "--ip",
        "198.18.0.2",
        "--run-for",
        "60",
        "--mtu",
        &mtu.to_string(),
        "--json",
        "--fault-drop",
        &loss_s,
        "--fault-seed",
        "11",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(ipsec(false)?)
    .collect();
    let _srv_pages = PageFiles::of(args, &format!("gp-{tag}-srv"));
    let mut server = spawn(
        args,
        eal(
            args,
            "0@0",
            &format!("gp-{tag}-srv"),
            "server",
            &sock,
            mtu,
            rsize,
        ),
        &server_app,
    )
    .map_err(|e| e.to_string())?;
    // Start the client once the server listens.
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
    let client_app: Vec<String> = [
        "--ddp-connect",
        "198.18.0.2",
        "--ip",
        "198.18.0.1",
        "--run-for",
        &args.secs.to_string(),
        "--ddp-size",
        &args.write_size.to_string(),
        "--ddp-source",
        source,
        "--mtu",
        &mtu.to_string(),
        "--json",
        "--fault-drop",
        &loss_s,
        "--fault-seed",
        "12",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(ipsec(true)?)
    .collect();
    let _cli_pages = PageFiles::of(args, &format!("gp-{tag}-cli"));
    let client = spawn(
        args,
        eal(
            args,
            "0@1",
            &format!("gp-{tag}-cli"),
            "client",
            &sock,
            mtu,
            rsize,
        ),
        &client_app,
    )
    .map_err(|e| e.to_string())?;
    let out = reap(client, GRACE).map_err(|e| e.to_string())?;
    let _ = reap(server, GRACE);
    let server_log = drain.join().unwrap_or_default();
    for c in &configs {
        let _ = std::fs::remove_file(c);
    }
    let report = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v.get("ddp_goodput").cloned())
        .ok_or_else(|| {
            format!(
                "ddp: no goodput report\n{}\n{server_log}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
    // A zero-copy run that copied is not what it claims to measure.
    let by_reference = report["spans_by_reference"].as_u64().unwrap_or(0);
    if source == "region" && (by_reference == 0 || report["spans_copied"].as_u64() != Some(0)) {
        return Err(format!(
            "ddp: region source but not sent by reference: {report}"
        ));
    }
    Ok(Run {
        bytes_per_s: report["bytes_per_s"]
            .as_f64()
            .ok_or_else(|| format!("ddp: no bytes_per_s in {report}"))?,
        fast_retransmits: report["sctp"]["fast_retransmits"].as_u64().unwrap_or(0),
        t3_expiries: report["sctp"]["t3_expiries"].as_u64().unwrap_or(0),
        sender_busy: report["cores_busy"].as_f64(),
        receiver_busy: server_busy(&server_log),
        sender_batch: report["frames_per_busy_turn"].as_f64(),
        receiver_batch: server_batch(&server_log),
    })
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

fn main() {
    let args = Args::parse();
    if let Some(s) = args
        .sources
        .iter()
        .find(|s| !["region", "bytes", "region-esp", "bytes-esp"].contains(&s.as_str()))
    {
        errln!("ddp-goodput-bench: source {s:?}: region, bytes, region-esp or bytes-esp");
        std::process::exit(2);
    }
    for &mtu in &args.mtus {
        if !(576..=9000).contains(&mtu) {
            errln!("ddp-goodput-bench: MTU {mtu} outside 576..=9000");
            std::process::exit(2);
        }
        measure(&args, mtu);
    }
}

/// A ceiling's frames per second on the links' own ring and on each of `--ceiling-rsizes`:
/// the best of them, and the ring it was measured on.
fn best_ceiling(args: &Args, tag: &str, mtu: u16, mode: &str) -> Result<(f64, Option<u8>), String> {
    let mut best: Option<(f64, Option<u8>)> = None;
    for rsize in rings(args) {
        let pps = raw(args, tag, mtu, mode, rsize)?;
        if best.is_none_or(|(b, _)| pps > b) {
            best = Some((pps, rsize));
        }
    }
    best.ok_or_else(|| format!("{mode}: no ring measured"))
}

/// The rings every figure of a round is measured on: the links' own, then each of
/// `--ceiling-rsizes` not already among them.
fn rings(args: &Args) -> Vec<Option<u8>> {
    let mut rings = vec![args.memif_rsize];
    for &r in &args.ceiling_rsizes {
        if !rings.contains(&Some(r)) {
            rings.push(Some(r));
        }
    }
    rings
}

/// A memif ring size as the round's line names it.
fn ring_name(rsize: Option<u8>) -> String {
    match rsize {
        None => "default ring".into(),
        Some(r) => format!("ring of {} slots", 1u32 << r),
    }
}

fn measure(args: &Args, mtu: u16) {
    const CEILINGS: [&str; 3] = ["rxonly", "rxplace", ZERO_COPY_CEILING];
    let (frame, payload) = (frame(mtu), segment_payload(mtu));
    let n = args.sources.len();
    let runs = CEILINGS.len() + n;
    // Frames per second of each ceiling, per round.
    let mut ceilings: Vec<Vec<f64>> = vec![Vec::new(); CEILINGS.len()];
    let mut goodputs: Vec<Vec<f64>> = vec![Vec::new(); n];
    // Each round's DDP goodput over that round's own placement ceiling: on a machine whose
    // speed shifts between runs, a ratio of two medians can pair figures from different
    // rounds, while a round's ceiling and goodput are measured minutes apart at most.
    let mut round_ratios: Vec<Vec<f64>> = vec![Vec::new(); n];
    // The memif ring (log2 slots; None: DPDK's default) each source's DDP did best on, per round.
    let mut round_rings: Vec<Vec<Option<u8>>> = vec![Vec::new(); n];
    let mut lossy: Vec<Vec<Run>> = vec![Vec::new(); args.losses.len()];
    for r in 0..args.rounds {
        let tag = format!("{mtu}-{r}");
        let mut got: Vec<Option<f64>> = vec![None; runs];
        let mut busy: Vec<String> = vec![String::new(); runs];
        // The ring each ceiling and each DDP run was best on (None: DPDK's default).
        let mut ring: Vec<Option<u8>> = vec![None; runs];
        for k in 0..runs {
            // The sources also swap their order every other round: the later of two DDP runs
            // met the VM's fast phase more often (benches/README.md, "Session 79"), and the
            // rotation alone keeps two neighbours in one order four rounds in five.
            let j = match (k + r as usize) % runs {
                j if j >= CEILINGS.len() && r % 2 == 1 => runs - 1 - (j - CEILINGS.len()),
                j => j,
            };
            let result = match j.checked_sub(CEILINGS.len()) {
                None => best_ceiling(args, &tag, mtu, CEILINGS[j]).map(|(pps, rsize)| {
                    ring[j] = rsize;
                    pps
                }),
                Some(s) => best_ddp(args, &tag, mtu, &args.sources[s]).map(|(run, rsize)| {
                    // A lossless run's recoveries are spurious (a descheduled core outlived
                    // RTO.Min, or memif reordered): they explain a slow round.
                    busy[j] = format!(
                        "{}; {} fast retransmits, {} T3 expiries",
                        run.busy(),
                        run.fast_retransmits,
                        run.t3_expiries
                    );
                    ring[j] = rsize;
                    run.bytes_per_s
                }),
            };
            match result {
                Ok(v) => got[j] = Some(v),
                Err(e) => {
                    errln!("ddp-goodput-bench: MTU {mtu} round {r}: {e}");
                    std::process::exit(1);
                }
            }
        }
        let (raw_pps, place_pps) = (got[0].unwrap_or(0.0), got[1].unwrap_or(0.0));
        let zc_pps = got[2].unwrap_or(0.0);
        ceilings[0].push(raw_pps);
        ceilings[1].push(place_pps);
        ceilings[2].push(zc_pps);
        let mut line = format!(
            "MTU {mtu} round {r}: raw {:.3} Mpps at {frame} B ({:.1} MB/s of segment payload, \
             {}), placement {:.1} MB/s ({}), placement of zero-copy frames {:.1} MB/s ({})",
            raw_pps / 1e6,
            raw_pps * payload / 1e6,
            ring_name(ring[0]),
            place_pps * payload / 1e6,
            ring_name(ring[1]),
            zc_pps * payload / 1e6,
            ring_name(ring[2])
        );
        for (s, g) in got[CEILINGS.len()..].iter().enumerate() {
            let g = g.unwrap_or(0.0);
            line += &format!(
                " | DDP from {} {:.1} MB/s ({}), {:.3} of placement, {:.3} of raw, {:.3} of \
                 zero-copy placement ({})",
                args.sources[s],
                g / 1e6,
                ring_name(ring[CEILINGS.len() + s]),
                g / (place_pps * payload),
                g / (raw_pps * payload),
                g / (zc_pps * payload),
                busy[CEILINGS.len() + s]
            );
            goodputs[s].push(g);
            round_rings[s].push(ring[CEILINGS.len() + s]);
            if place_pps > 0.0 {
                round_ratios[s].push(g / (place_pps * payload));
            }
        }
        // Losses on the ring the lossless writes from a region did best on this round.
        let loss_ring = args
            .sources
            .iter()
            .position(|s| s == "region")
            .map_or(args.memif_rsize, |s| ring[CEILINGS.len() + s]);
        for (k, &loss) in args.losses.iter().enumerate() {
            match ddp_run(args, &tag, mtu, "region", loss, loss_ring) {
                Ok(run) => {
                    line += &format!(
                        " | {:.1} % lost: {:.1} MB/s ({}), {} fast retransmits, {} T3 expiries \
                         ({})",
                        loss * 100.0,
                        run.bytes_per_s / 1e6,
                        ring_name(loss_ring),
                        run.fast_retransmits,
                        run.t3_expiries,
                        run.busy()
                    );
                    lossy[k].push(run);
                }
                Err(e) => {
                    errln!("ddp-goodput-bench: MTU {mtu} round {r} loss {loss}: {e}");
                    std::process::exit(1);
                }
            }
        }
        if !args.json {
            outln!("{line}");
        }
    }
    let (Some(raw_pps), Some(place_pps), Some(zc_pps)) = (
        median(ceilings[0].clone()),
        median(ceilings[1].clone()),
        median(ceilings[2].clone()),
    ) else {
        std::process::exit(1);
    };
    // Ratios of the medians: each figure is the median of its own rounds.
    let medians: Vec<f64> = goodputs
        .into_iter()
        .map(|g| median(g).unwrap_or(0.0))
        .collect();
    let (raw_bps, place_bps, zc_bps) = (raw_pps * payload, place_pps * payload, zc_pps * payload);
    if args.json {
        let per: serde_json::Map<String, serde_json::Value> = args
            .sources
            .iter()
            .zip(&medians)
            .zip(&round_ratios)
            .zip(&round_rings)
            .map(|(((s, g), rr), rings)| {
                (
                    s.clone(),
                    serde_json::json!({"ddp_goodput_bytes_per_s": g,
                        "round_rsizes": rings,
                        "ratio_to_placement": g / place_bps, "ratio_to_raw": g / raw_bps,
                        "ratio_to_zero_copy_placement": g / zc_bps,
                        "round_ratios_to_placement": rr,
                        "median_round_ratio_to_placement": median(rr.clone())}),
                )
            })
            .collect();
        outln!(
            "{}",
            serde_json::json!({"mtu": mtu, "segment": mulpdu(mtu), "frame": frame,
                "memif_rsize": args.memif_rsize, "hugepages": args.hugepages, "ceiling_rsizes": &args.ceiling_rsizes,
                "raw_pps": raw_pps, "placement_bytes_per_s": place_bps,
                "zero_copy_placement_bytes_per_s": zc_bps,
                "sources": per, "write_size": args.write_size})
        );
    } else {
        let mut line = format!(
            "MTU {mtu} (segments of {} bytes) median: raw {:.3} Mpps ({:.1} MB/s), placement \
             {:.1} MB/s, placement of zero-copy frames {:.1} MB/s",
            mulpdu(mtu),
            raw_pps / 1e6,
            raw_bps / 1e6,
            place_bps / 1e6,
            zc_bps / 1e6
        );
        for ((s, g), rr) in args.sources.iter().zip(&medians).zip(&round_ratios) {
            line += &format!(
                "; DDP from {s} {:.1} MB/s, {:.3} of placement, {:.3} of raw, {:.3} of zero-copy \
                 placement",
                g / 1e6,
                g / place_bps,
                g / raw_bps,
                g / zc_bps
            );
            if let Some(m) = median(rr.clone()) {
                line += &format!(" (the rounds' own ratios to placement: median {m:.3})");
            }
        }
        if let (Some(z), Some(c)) = (
            args.sources.iter().position(|s| s == "region"),
            args.sources.iter().position(|s| s == "bytes"),
        ) {
            if medians[c] > 0.0 {
                line += &format!("; zero-copy / copy {:.3}", medians[z] / medians[c]);
            }
        }
        // What ESP costs: each protected source next to itself in the clear, same rounds.
        for (e, s) in args.sources.iter().enumerate() {
            let Some(base) = s.strip_suffix("-esp") else {
                continue;
            };
            if let Some(b) = args.sources.iter().position(|x| x == base) {
                if medians[b] > 0.0 {
                    line += &format!("; {s} / {base} {:.3}", medians[e] / medians[b]);
                }
            }
        }
        let lossless = args
            .sources
            .iter()
            .position(|s| s == "region")
            .map(|z| medians[z]);
        for (loss, runs) in args.losses.iter().zip(&lossy) {
            let g = median(runs.iter().map(|r| r.bytes_per_s).collect()).unwrap_or(0.0);
            line += &format!(
                "; {:.1} % lost: {:.1} MB/s ({:.3} of lossless; fast retransmits {:?}, T3 \
                 expiries {:?})",
                loss * 100.0,
                g / 1e6,
                lossless.map_or(0.0, |l| g / l),
                runs.iter().map(|r| r.fast_retransmits).collect::<Vec<_>>(),
                runs.iter().map(|r| r.t3_expiries).collect::<Vec<_>>()
            );
        }
        outln!("{line}");
    }
}
