//! How long a frame waits for an idle data core, and what an idle core costs.
//!
//! One data core of the runtime runs on a thread of its own behind an in-memory port; this
//! thread, on the other end of the port, sends an ARP request after an idle gap and spins until
//! the core's ARP reply comes back. The round trip, per gap (back to back, 100 µs, 1 ms, 20 ms),
//! is measured with the core spinning (`--idle spin`, the baseline: what the core costs and how
//! fast it answers when it never sleeps) and sleeping (`--idle sleep`, the default), in the same
//! run, with the CPU time the core's thread used per second of idleness.
//!
//! ```sh
//! cargo run --release -p ddpdk-benches --bin idle-wake-bench -- --pings 2000
//! ```

use ddpdk_dataplane::outln;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use ddpdk_control::conn::ConnConfig;
use ddpdk_control::runtime::{build, Clock, IdlePolicy, RuntimeConfig};
use ddpdk_control::session::PendingLimit;
use ddpdk_dataplane::net::Interface;
use ddpdk_dataplane::port::dpdk::Eal;
use ddpdk_dataplane::port::mem::{pair, HeapBuf};
use ddpdk_dataplane::port::Port;
use ddpdk_dataplane::sctp::{Config, Endpoint};

#[derive(Parser, Debug)]
struct Args {
    /// Pings per gap and policy.
    #[arg(long, default_value_t = 1000)]
    pings: u32,
    /// Idle gaps before each ping, µs.
    #[arg(long, value_delimiter = ',', default_value = "0,100,1000,20000")]
    gaps_us: Vec<u64>,
    /// The sleeping core's --idle-sleep-max-us.
    #[arg(long, default_value_t = 50)]
    max_sleep_us: u64,
}

/// CPU time (user + system) of the calling process's thread `tid`, from /proc.
fn thread_cpu(tid: i32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<i64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the line; `rest` starts at field 3 (the state).
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks.max(0) as u64 * 10)
}

struct Figures {
    /// Round trips, ns, per gap.
    rtt: Vec<(u64, hdrhistogram::Histogram<u64>)>,
    /// CPU of the core's thread per second of wall time during the 20 ms-gap pings (mostly
    /// idle).
    idle_cpu: f64,
}

fn run(args: &Args, idle: IdlePolicy) -> Figures {
    let (a, b) = pair(2, 1024);
    let (a, b) = (Arc::new(a), Arc::new(b));
    let ours = Ipv4Addr::new(198, 18, 0, 2);
    let peer = Ipv4Addr::new(198, 18, 0, 1);
    let ep = Endpoint::new(Config::default(), [7; 32]).expect("endpoint");
    let (control, mut cores) = build(
        Arc::clone(&a),
        Interface::new(a.mac(), Some(ours), None),
        ep,
        ConnConfig::default(),
        PendingLimit::new(8),
        RuntimeConfig::default(),
    )
    .expect("runtime");
    let mut core = cores.pop().expect("one core");
    let stop = Arc::new(AtomicBool::new(false));
    let tid = Arc::new(std::sync::atomic::AtomicI32::new(0));
    let t = {
        let (stop, tid) = (Arc::clone(&stop), Arc::clone(&tid));
        std::thread::spawn(move || {
            let _ = Eal::set_timer_slack(Duration::from_micros(1));
            // The thread's id, for its CPU time.
            let me = std::fs::read_link("/proc/thread-self")
                .ok()
                .and_then(|p| p.file_name()?.to_str()?.parse().ok())
                .unwrap_or(0);
            tid.store(me, Ordering::Relaxed);
            core.run(Clock::new(), &stop, idle);
        })
    };
    while tid.load(Ordering::Relaxed) == 0 {
        std::thread::yield_now();
    }
    let tid = tid.load(Ordering::Relaxed);
    let mut pinger = Interface::new(b.mac(), Some(peer), None);
    let mut frame = [0u8; 128];
    let mut rx: Vec<HeapBuf> = Vec::new();
    let mut figures = Figures {
        rtt: Vec::new(),
        idle_cpu: 0.0,
    };
    for &gap in &args.gaps_us {
        let mut h = hdrhistogram::Histogram::<u64>::new(3).expect("histogram");
        let (wall0, cpu0) = (Instant::now(), thread_cpu(tid));
        for _ in 0..args.pings {
            let until = Instant::now() + Duration::from_micros(gap);
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            let n = pinger.solicit(IpAddr::V4(ours), &mut frame);
            let mut out = vec![HeapBuf::new(frame[..n].to_vec())];
            let sent = Instant::now();
            b.tx_burst(0, &mut out);
            loop {
                rx.clear();
                if b.rx_burst(0, &mut rx, 4) + b.rx_burst(1, &mut rx, 4) > 0 {
                    break;
                }
            }
            let _ = h.record(sent.elapsed().as_nanos() as u64);
        }
        if gap == *args.gaps_us.iter().max().unwrap_or(&0) {
            figures.idle_cpu = (thread_cpu(tid).as_secs_f64() - cpu0.as_secs_f64())
                / wall0.elapsed().as_secs_f64();
        }
        figures.rtt.push((gap, h));
    }
    stop.store(true, Ordering::Release);
    let _ = t.join();
    drop(control);
    figures
}

fn main() {
    let args = Args::parse();
    let spin = run(&args, IdlePolicy::Spin);
    let sleep = run(
        &args,
        IdlePolicy::Sleep {
            max_sleep: Duration::from_micros(args.max_sleep_us),
        },
    );
    outln!(
        "ARP round trip to one data core, µs (p50 / p99 / max), {} pings per gap",
        args.pings
    );
    outln!(
        "{:>10} | {:>24} | {:>24}",
        "gap µs",
        "--idle spin",
        "--idle sleep"
    );
    for ((gap, a), (_, b)) in spin.rtt.iter().zip(&sleep.rtt) {
        let q = |h: &hdrhistogram::Histogram<u64>| {
            format!(
                "{:.1} / {:.1} / {:.1}",
                h.value_at_quantile(0.5) as f64 / 1e3,
                h.value_at_quantile(0.99) as f64 / 1e3,
                h.max() as f64 / 1e3
            )
        };
        outln!("{gap:>10} | {:>24} | {:>24}", q(a), q(b));
    }
    outln!(
        "CPU of the core's thread at the longest gap (mostly idle): spin {:.0} %, sleep {:.0} %",
        spin.idle_cpu * 100.0,
        sleep.idle_cpu * 100.0
    );
}
