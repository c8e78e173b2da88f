//! The crypto device's own rate (issue 15 item 6): ESP sealing and opening of full-segment
//! SCTP frames through rte_ipsec on `crypto_aesni_mb` (CPU crypto, one core), next to the same
//! loop without the crypto in the same run (an mbuf taken, the frame written into it, freed):
//! what a data core spends on ESP per packet, and the rate one core can protect. The sealing
//! loop frees what it sealed; the opening loop opens, in order, packets a second SA pair
//! sealed before it started.
//!
//! Zero-copy frames (headers in an mbuf, the payload attached from a region, as the zero-copy
//! sender sends them) are sealed in bursts twice in the same round: out of place (AES-GCM: the
//! crypto reads the region and writes an mbuf of ours) and copied into an mbuf first, as before
//! out-of-place sealing existed (`EspSa::copy_before_sealing`).
//!
//! `--device` takes another crypto device: one without CPU crypto (`crypto_openssl0`) runs
//! every packet as crypto ops, as a hardware lookaside device would.
//!
//! Frames are those of a full DDP segment on a link of MTU 1500 and 9000 less the ESP
//! headroom of the algorithm, as the endpoint sends them.
#![forbid(unsafe_code)]

use ddpdk_dataplane::{errln, outln};
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use ddpdk_dataplane::ipsec::{parse_sa, SaConfig};
use ddpdk_dataplane::port::dpdk::{CryptoDev, Eal, EspSa, Mbuf, Mempool};
use ddpdk_dataplane::port::region::Region;
use ddpdk_dataplane::port::PacketBuf;

/// Bytes of a zero-copy frame in the sender's own mbuf: Ethernet, IPv4, SCTP common header,
/// DATA chunk header, DDP tagged header; the rest is attached from a region.
const HEAD: usize = 14 + 20 + 12 + 16 + 14;

#[derive(Debug, Parser)]
#[command(about = "ESP seal and open rate on one core (rte_ipsec, crypto_aesni_mb)")]
struct Args {
    /// Packets per measurement (each opened packet is kept in memory first).
    #[arg(long, default_value_t = 50_000)]
    packets: u32,
    /// Rounds; the median is printed.
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// Frames a sealing call takes in the burst measurement.
    #[arg(long, default_value_t = 32)]
    burst: usize,
    /// Link MTUs, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1500u16, 9000])]
    mtus: Vec<u16>,
    /// The crypto device (a software PMD's vdev name).
    #[arg(long, default_value = "crypto_aesni_mb0")]
    device: String,
    /// Algorithms, comma-separated (default: all of them).
    #[arg(long, value_delimiter = ',')]
    algorithms: Vec<String>,
}

const ALGORITHMS: [(&str, &str); 3] = [
    (
        "aes-128-gcm",
        "aead_algo aes-128-gcm aead_key 2b:7e:15:16:28:ae:d2:a6:ab:f7:15:88:09:cf:4f:3c:ca:fe:ba:be",
    ),
    (
        "aes-256-gcm",
        "aead_algo aes-256-gcm aead_key 0x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\
         cafebabe",
    ),
    (
        "aes-128-cbc+hmac-sha256",
        "cipher_algo aes-128-cbc cipher_key 0x000102030405060708090a0b0c0d0e0f auth_algo \
         sha256-hmac auth_key 0x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
    ),
];

fn sa(direction: &str, rule: &str) -> SaConfig {
    let text = format!("{direction} 4096 {rule} mode transport");
    parse_sa(&text.split_whitespace().collect::<Vec<_>>()).unwrap_or_else(|e| {
        errln!("esp-bench: {e}");
        std::process::exit(2)
    })
}

/// An Ethernet frame with an IPv4 packet of `ip_len` bytes carrying SCTP (its bytes a
/// pattern: ESP does not read them).
fn frame(ip_len: usize) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0];
    f.extend_from_slice(&(ip_len as u16).to_be_bytes());
    f.extend_from_slice(&[0, 7, 0x40, 0, 64, 132, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2]);
    let sum: u32 = f[14..34]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    let sum = (sum & 0xffff) + (sum >> 16);
    f[24..26].copy_from_slice(&(!((sum & 0xffff) + (sum >> 16)) as u16).to_be_bytes());
    f.extend((0..ip_len - 20).map(|i| (i as u8).wrapping_mul(13)));
    f
}

fn sa_of(dev: &Arc<CryptoDev>, cfg: &SaConfig) -> EspSa {
    EspSa::new(dev, cfg, false).unwrap_or_else(|e| {
        errln!("esp-bench: {e}");
        std::process::exit(1)
    })
}

fn one(pool: &Mempool, bytes: &[u8]) -> Mbuf {
    let mut v = Vec::with_capacity(1);
    if !pool.alloc_bulk(&mut v, 1, bytes.len()) {
        errln!("esp-bench: the pool is empty");
        std::process::exit(1);
    }
    let mut m = v.pop().unwrap_or_else(|| std::process::exit(1));
    m.data_mut().copy_from_slice(bytes);
    m
}

/// Nanoseconds per packet of `f` over `n` packets.
fn time(n: u32, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed().as_nanos() as f64 / f64::from(n)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args = Args::parse();
    let eal = Eal::init(&[
        "esp-bench",
        "-l",
        "0",
        "--no-huge",
        "-m",
        "512",
        "--no-pci",
        "--no-shconf",
        "--log-level=*:error",
        &format!("--file-prefix=esp-bench-{}", std::process::id()),
    ])
    .unwrap_or_else(|e| {
        errln!("esp-bench: EAL: {e}");
        std::process::exit(1)
    });
    let pool = Arc::new(
        Mempool::create("esp_bench", 4095, 256, 9216 + 256, 0).unwrap_or_else(|e| {
            errln!("esp-bench: pool: {e}");
            std::process::exit(1)
        }),
    );
    let dev = CryptoDev::open(&args.device).unwrap_or_else(|e| {
        errln!("esp-bench: {e}");
        std::process::exit(1)
    });
    let now = Instant::now();
    for &mtu in &args.mtus {
        for (name, rule) in ALGORITHMS {
            if !args.algorithms.is_empty() && !args.algorithms.iter().any(|a| a == name) {
                continue;
            }
            let (out_cfg, in_cfg) = (sa("out", rule), sa("in", rule));
            let ip_len = usize::from(mtu) - out_cfg.overhead();
            let clear = frame(ip_len);
            let (mut base, mut seal, mut open) = (Vec::new(), Vec::new(), Vec::new());
            let mut seal_burst = Vec::new();
            let (mut zc_base, mut zc_oop, mut zc_copy) = (Vec::new(), Vec::new(), Vec::new());
            let region = Region::from_dpdk(&eal, clear.len(), None).unwrap_or_else(|e| {
                errln!("esp-bench: region: {e}");
                std::process::exit(1)
            });
            if region.place(0, &clear[HEAD..]).is_err() {
                std::process::exit(1);
            }
            let zero_copy = || {
                let mut m = one(&pool, &clear[..HEAD]);
                let span = pool
                    .attach_region(&region, 0, clear.len() - HEAD)
                    .unwrap_or_else(|| {
                        errln!("esp-bench: cannot attach the region");
                        std::process::exit(1)
                    });
                if m.chain(span).is_err() {
                    std::process::exit(1);
                }
                m
            };
            for _ in 0..args.rounds {
                // Fresh SAs each round: the sequence numbers never run out.
                let out = sa_of(&dev, &out_cfg);
                let n = args.packets;
                base.push(time(n, || drop(one(&pool, &clear))));
                let mut ok = 0u32;
                seal.push(time(n, || {
                    ok += u32::from(out.encrypt(one(&pool, &clear), &pool, now).is_ok());
                }));
                // The same, `--burst` frames to a call.
                let mut sealed_burst = Vec::with_capacity(args.burst);
                let bursts = n / args.burst as u32;
                let mut ok_burst = 0usize;
                seal_burst.push(
                    time(bursts, || {
                        let frames: Vec<Mbuf> =
                            (0..args.burst).map(|_| one(&pool, &clear)).collect();
                        out.encrypt_burst(frames, &pool, now, &mut sealed_burst);
                        ok_burst += sealed_burst.len();
                        sealed_burst.clear();
                    }) / args.burst as f64,
                );
                if ok_burst != (bursts as usize) * args.burst {
                    errln!("esp-bench: {name}: {ok_burst} sealed in bursts");
                    std::process::exit(1);
                }
                // Zero-copy frames in bursts: built and freed alone, sealed out of place, and
                // sealed after a copy.
                zc_base.push(
                    time(bursts, || {
                        let frames: Vec<Mbuf> = (0..args.burst).map(|_| zero_copy()).collect();
                        drop(frames);
                    }) / args.burst as f64,
                );
                let mut copying = sa_of(&dev, &out_cfg);
                copying.copy_before_sealing();
                for (sa, into) in [(&out, &mut zc_oop), (&copying, &mut zc_copy)] {
                    let mut sealed = 0usize;
                    into.push(
                        time(bursts, || {
                            let frames: Vec<Mbuf> = (0..args.burst).map(|_| zero_copy()).collect();
                            sa.encrypt_burst(frames, &pool, now, &mut sealed_burst);
                            sealed += sealed_burst.len();
                            sealed_burst.clear();
                        }) / args.burst as f64,
                    );
                    if sealed != (bursts as usize) * args.burst {
                        errln!("esp-bench: {name}: {sealed} zero-copy frames sealed");
                        std::process::exit(1);
                    }
                }
                // Packets to open in order, each new to the window: sealed by a second SA
                // pair, untimed, as bytes (the pool holds fewer mbufs than that).
                let (out, inb) = (sa_of(&dev, &out_cfg), sa_of(&dev, &in_cfg));
                let sealed: Vec<Vec<u8>> = (0..n)
                    .filter_map(|_| out.encrypt(one(&pool, &clear), &pool, now).ok())
                    .map(|m| m.data().to_vec())
                    .collect();
                if ok != n || sealed.len() != n as usize {
                    errln!("esp-bench: {name}: {ok} and {} of {n} sealed", sealed.len());
                    std::process::exit(1);
                }
                let mut next = sealed.iter();
                let mut opened = 0u32;
                open.push(time(n, || {
                    if let Some(bytes) = next.next() {
                        if inb.decrypt(one(&pool, bytes), &pool, now).is_ok() {
                            opened += 1;
                        }
                    }
                }));
                if opened != n {
                    errln!("esp-bench: {name}: {opened} of {n} opened");
                    std::process::exit(1);
                }
            }
            let (b, s, o, sb) = (median(base), median(seal), median(open), median(seal_burst));
            let (zb, zo, zc) = (median(zc_base), median(zc_oop), median(zc_copy));
            let gbps = |ns: f64| (ip_len as f64) * 8.0 / ns;
            outln!(
                "MTU {mtu} {name}: {ip_len}-byte packets; mbuf + write {b:.0} ns; with sealing \
                 {s:.0} ns ({:.2} Gbit/s, ESP {:.0} ns a packet), in bursts of {} {sb:.0} ns \
                 ({:.2} Gbit/s, ESP {:.0} ns); with opening {o:.0} ns ({:.2} Gbit/s, ESP {:.0} \
                 ns a packet)",
                gbps(s),
                s - b,
                args.burst,
                gbps(sb),
                sb - b,
                gbps(o),
                o - b
            );
            outln!(
                "MTU {mtu} {name}: zero-copy frames in bursts of {}: built {zb:.0} ns; sealed {} \
                 {zo:.0} ns (ESP {:.0} ns a packet); copied, then sealed {zc:.0} ns (ESP {:.0} ns); \
                 copy / {}: {:.2}",
                args.burst,
                if out_cfg.algorithm.is_aead() { "out of place" } else { "(copied: AES-CBC)" },
                zo - zb,
                zc - zb,
                if out_cfg.algorithm.is_aead() { "out of place" } else { "copy" },
                (zc - zb) / (zo - zb)
            );
        }
    }
    drop(dev);
    drop(pool);
    drop(eal);
}
