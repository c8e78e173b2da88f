//! The application options (after `--`), testpmd conventions.

use std::path::PathBuf;

use clap::Parser;
use ddpdk_control::runtime::IdlePolicy;

use crate::shell::ModeArg;

/// ddpdk: a DPDK poll-mode Direct Data Placement over SCTP endpoint (RFC 5043).
///
/// Usage: `ddpdk [EAL options] -- [options]`. EAL options are DPDK's own (-l, --vdev, --no-huge,
/// --file-prefix, ...; see `ddpdk -h -- ` for DPDK's list). --ddp-loopback runs the DDP/SCTP
/// endpoint pair on a net_ring pair; otherwise the data cores run testpmd-like forwarding engines.
#[derive(Debug, Clone, Parser, PartialEq)]
#[command(
    name = "ddpdk",
    version,
    about,
    long_about = None,
    after_help = AFTER_HELP,
    override_usage = "ddpdk [JOB] [EAL options] -- [options]",
    // A negative number goes to the option's value parser, which says the option takes none
    // below 0: clap read `--ddp-size -5` as a flag, "unexpected argument '-5'". ddpdk has no
    // short flag that is a digit for it to hide.
    allow_negative_numbers = true
)]
pub struct Options {
    /// Run the interactive shell (prompt `ddpdk> `); commands are read from standard input.
    #[arg(short = 'i', long)]
    pub interactive: bool,

    /// Start forwarding at once.
    #[arg(short = 'a', long)]
    pub auto_start: bool,

    /// Number of forwarding lcores (worker lcores of the EAL).
    #[arg(long, default_value_t = 1, value_parser = whole::<u16>(1, 128))]
    pub nb_cores: u16,

    /// RX queues per port.
    #[arg(long, default_value_t = 1, value_parser = whole::<u16>(1, 1024))]
    pub rxq: u16,

    /// TX queues per port.
    #[arg(long, default_value_t = 1, value_parser = whole::<u16>(1, 1024))]
    pub txq: u16,

    /// RX descriptors per queue.
    #[arg(long, default_value_t = 1024, value_parser = whole::<u16>(32, 32768))]
    pub rxd: u16,

    /// TX descriptors per queue.
    #[arg(long, default_value_t = 1024, value_parser = whole::<u16>(32, 32768))]
    pub txd: u16,

    /// Packets per burst.
    #[arg(long, default_value_t = 32, value_parser = whole::<u16>(1, 512))]
    pub burst: u16,

    /// Forwarding engine.
    #[arg(long, value_enum, default_value_t = ModeArg::Io)]
    pub forward_mode: ModeArg,

    /// Frame length sent by txonly (and tx_first), bytes without FCS; at most one mbuf's data
    /// room (--mbuf-size less its 128-byte headroom), as frames are single-segment.
    #[arg(long, default_value_t = 64, value_parser = whole::<u16>(60, 9600))]
    pub txpkts: u16,

    /// txonly frames shaped as a zero-copy DDP sender's: each frame's first N bytes in a buffer
    /// of their own, the rest attached behind it from a region of DPDK memory by reference,
    /// not copied (a chain of two mbufs, the second external), the spans walking a 1 MiB
    /// region. What the device's handling of such chains costs, without any protocol: the
    /// goodput bench's zero-copy ceiling. N at least 42 (the headers) and below --txpkts.
    #[arg(long, value_name = "N", value_parser = whole::<u16>(0, u16::MAX))]
    pub txsplit: Option<u16>,

    /// ping: frames sent together each round trip (one burst of --txpkts frames); the round
    /// trip ends when as many have come back. The raw twin of a write of N segments.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = whole::<u16>(1, 32))]
    pub ping_frames: u16,

    /// echo: send each frame back cut to its first BYTES (at least the 14-byte Ethernet
    /// header), so that the way back carries an acknowledgement's size, not the data again.
    #[arg(long, value_name = "BYTES",
          value_parser = whole::<u16>(14, 9600))]
    pub echo_trim: Option<u16>,

    /// Size of each mbuf's buffer, bytes, its 128-byte headroom included (testpmd's
    /// --mbuf-size). Jumbo frames need 9216 + 128 or so. K (1024) may follow.
    #[arg(long, default_value_t = 2176, value_name = "BYTES",
          value_parser = bytes::<u16>(1024, 16384), allow_hyphen_values = true)]
    pub mbuf_size: u16,

    /// The link MTU (IP packet bytes), set on each port where the device has the setting. A
    /// DDP endpoint's association path MTUs and DDP segment sizes follow from it (RFC 5043
    /// §9), and above 1500 its mbufs grow to hold a whole frame; `fwd` forwards frames of it
    /// (give --mbuf-size for them, as testpmd's --max-pkt-len needs).
    #[arg(long, default_value_t = 1500, value_name = "BYTES",
          value_parser = whole::<u16>(576, 9000))]
    pub mtu: u16,

    /// Extra tx_burst attempts before what a port did not take is freed and counted.
    #[arg(long, default_value_t = 0, value_parser = whole::<u32>(0, 1000))]
    pub tx_retry: u32,

    /// Send one burst on every stream when forwarding starts (seeds io loops).
    #[arg(long)]
    pub tx_first: bool,

    /// Print port statistics every N seconds while running (0: never).
    #[arg(long, default_value_t = 0, value_name = "N",
          value_parser = whole::<u64>(0, 86_400))]
    pub stats_period: u64,

    /// Run for SECS seconds from the start, then stop and exit (non-interactive runs); a
    /// --cmdline-file command still waiting then gives up. A perf server waits SECS for its
    /// client, then serves it to its run's end (the client's --run-for).
    #[arg(long, value_name = "SECS")]
    pub run_for: Option<f64>,

    /// Execute the commands of FILE at start-up (repeatable; in the order given).
    #[arg(long, value_name = "FILE")]
    pub cmdline_file: Vec<PathBuf>,

    /// Print statistics and reports as JSON lines instead of tables.
    #[arg(long)]
    pub json: bool,

    /// Create two ports wired back to back through rte_rings (net_ring PMD) in addition to any
    /// --vdev ports: the embedded default needs no NIC.
    #[arg(long)]
    pub ring_pair: bool,

    /// Mbufs per pool (default: sized from the queue configuration; at least 384, as DPDK
    /// keeps a pool's per-lcore cache of 256 at most two thirds of it).
    #[arg(long, value_name = "N", value_parser = whole::<u32>(384, u32::MAX))]
    pub total_num_mbufs: Option<u32>,

    /// The main job on the embedded default: two DDP/SCTP endpoints on a net_ring pair in this
    /// process set up an association and a DDP session, move tagged and untagged messages of
    /// several sizes with every placed byte verified, tear down, and print throughput and
    /// latency. Forwarding options are refused (`ddpdk loopback --help` lists what it takes).
    #[arg(long)]
    pub ddp_loopback: bool,

    /// Data cores of a DDP endpoint (endpoint, perf, each endpoint of `ddpdk loopback`; 15 at
    /// most there): threads
    /// that own associations and place inline, on the EAL's worker lcores; the control side
    /// is on the main one. With more than one, associations are steered by their SCTP
    /// 5-tuple (RSS or rte_flow where the port has them, in software otherwise).
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = whole::<u8>(1, 16))]
    pub data_cores: u8,

    /// Payload bytes per message size of `ddpdk loopback` (at most 4096 messages a size). A
    /// binary unit may follow: K, M, G, T (or KiB, ...; 64M is 67108864).
    #[arg(long, default_value_t = 64 << 20, value_name = "BYTES",
          value_parser = bytes::<u64>(1, 1 << 40), allow_hyphen_values = true)]
    pub ddp_bytes: u64,

    /// Be a DDP/SCTP server on the EAL's first port: accept associations and sessions, offer
    /// each session a registered region in the Accept's Private Data (needs --ip).
    #[arg(long, conflicts_with = "ddp_connect")]
    pub ddp_listen: bool,

    /// Be a DDP/SCTP client of the server at ADDR on the EAL's first port: open a session and
    /// write --ddp-size tagged messages into the offered region for --run-for seconds (needs
    /// --ip).
    #[arg(long, value_name = "ADDR", value_parser = parse_ip)]
    pub ddp_connect: Option<std::net::IpAddr>,

    /// Our IPv4 or IPv6 address (give one of each family at most). Without --ddp-listen or
    /// --ddp-connect it makes ddpdk a DDP endpoint on the EAL's first port, driven by the DDP
    /// shell commands (`help ddp`).
    #[arg(long, value_name = "ADDR", value_parser = parse_ip)]
    pub ip: Vec<std::net::IpAddr>,

    /// DDP endpoints: the Ethernet address to answer as, instead of the port's own (the port
    /// is promiscuous). A net_tap port has its kernel interface's address, which a kernel
    /// bridge takes for its own: a frame to it never goes out on the tap.
    #[arg(long, value_name = "XX:XX:XX:XX:XX:XX", value_parser = parse_mac)]
    pub mac: Option<[u8; 6]>,

    /// DDP endpoint: accept every DDP Stream Session a peer initiates (offering the region of
    /// `session offer STAG` in the Accept's Private Data); without it sessions are refused.
    #[arg(long)]
    pub listen: bool,

    /// DDP endpoint: a test service for user messages (issue 16 item 2), as SCTP conformance
    /// testers expect of a system under test: `echo` sends each back on its stream with its
    /// PPID, `discard` drops it, `daytime` sends the time when an association comes up and
    /// shuts it down. DDP Stream Session control is still answered (RFC 5043 §6; add --listen
    /// to accept sessions). Pair with --sctp-port (7, 9, 13 by tradition).
    #[arg(long, value_enum, value_name = "SERVICE")]
    pub service: Option<ServiceArg>,

    /// DDP endpoint: keep an association to ADDR (port --reconnect-port): open it, and open it
    /// again a second after each ABORT, shutdown or failed attempt.
    #[arg(long, value_name = "ADDR", value_parser = parse_ip)]
    pub reconnect: Option<std::net::IpAddr>,

    /// The peer's SCTP port for --reconnect (default: --sctp-port; never 0, RFC 9260 §3.1).
    #[arg(long, value_name = "PORT", value_parser = whole::<u16>(1, u16::MAX))]
    pub reconnect_port: Option<u16>,

    /// DDP endpoint: what a data core with nothing to do does. `sleep` (the default, DPDK
    /// l3fwd-power's adaptive back-off): after a few hundred empty polls it sleeps, 1 µs at
    /// first, doubling up to 50 µs, and after 10 ms without work up to --idle-sleep-max-us;
    /// commands and frames from sibling cores wake it at once. `interrupt`: as `sleep`, and
    /// after 10 ms without work a data core on a worker lcore blocks on its RX queues'
    /// interrupts until a frame, a command or a timer wakes it, where the device has them (NICs
    /// under vfio-pci, net_tap, net_virtio_user; others sleep as with `sleep`). `spin`: it
    /// polls without pause (a CPU of its own, the lowest latency).
    #[arg(long, value_enum, default_value = "sleep")]
    pub idle: IdleArg,

    /// DDP endpoint: the longest sleep of an idle data core, µs: how long a frame may wait
    /// for a core idle for over 10 ms (with --idle sleep; 50 keeps every wake-up within tens
    /// of µs, at the CPU cost of waking 20 000 times a second).
    #[arg(long, default_value_t = 1000, value_name = "US",
          value_parser = whole::<u32>(1, 100_000))]
    pub idle_sleep_max_us: u32,

    /// DDP endpoint: live associations one peer address may hold; one more it completes is
    /// aborted (counted peer_limit_refused). Without a bound one host opening from ever-new
    /// ports takes every data core's 256 association slots. Raise it for many clients behind
    /// one NAT.
    #[arg(long, default_value_t = ddpdk_control::runtime::ASSOCIATIONS_PER_PEER as u32,
          value_name = "N", value_parser = whole::<u32>(1, 4096))]
    pub max_assocs_per_peer: u32,

    /// DDP endpoint: SCTP streams we ask for (OS = MIS, RFC 5043 §8); one DDP stream each.
    #[arg(long, default_value_t = 8, value_name = "N",
          value_parser = whole::<u16>(1, u16::MAX))]
    pub streams: u16,

    /// SCTP port of a DDP endpoint (endpoint, perf server, perf client).
    #[arg(long, default_value_t = 5000, value_parser = whole::<u16>(1, u16::MAX))]
    pub sctp_port: u16,

    /// Size of each tagged write (or RDMA Read, --ddp-op read) of --ddp-connect, bytes. A
    /// binary unit may follow: K, M, G (or KiB, ...; 64K is 65536).
    #[arg(long, default_value_t = 65536, value_name = "BYTES",
          value_parser = bytes::<u64>(1, 1 << 32), allow_hyphen_values = true)]
    pub ddp_size: u64,

    /// DDP endpoints: RTO.Min of every association, ms (RFC 9260 §6.3.1). RFC 9260 §16
    /// suggests 1000 for the Internet; on a data-centre link whose round trip is microseconds a
    /// T3-rtx expiry would stall a transfer for that long, so the default is 10.
    #[arg(long, default_value_t = 10, value_name = "MS",
          value_parser = whole::<u64>(1, 60_000))]
    pub rto_min_ms: u64,

    /// DDP endpoints: RTO.Initial, ms (RFC 9260 §6.3.1), the timeout before the first round
    /// trip is measured (INIT, COOKIE ECHO). RFC 9260 §16 suggests 1000; the default is 200.
    /// (Above a `--rto-min-ms` of more than 200, the default is RTO.Min; a value given below
    /// RTO.Min is refused, as `--sctp` refuses it.)
    #[arg(long, value_name = "MS", value_parser = whole::<u64>(1, 60_000))]
    pub rto_initial_ms: Option<u64>,

    /// DDP endpoints: an SCTP protocol parameter, NAME=VALUE (repeatable, applied after
    /// --rto-min-ms and --rto-initial-ms): rto_initial_ms, rto_min_ms, rto_max_ms,
    /// max_init_retransmits, assoc_max_retrans, path_max_retrans, valid_cookie_life_ms,
    /// hb_interval_ms (0: off), sack_delay_ms, sack_freq, max_burst, a_rwnd. `show config
    /// sctp` prints them all.
    #[arg(long = "sctp", value_name = "NAME=VALUE")]
    pub sctp: Vec<String>,

    /// DDP endpoints: drop this share of received frames (0 to 1), on purpose, before the
    /// data cores see them: loss to measure and soak under (a seeded fault injector).
    #[arg(long, default_value_t = 0.0, value_name = "RATE", value_parser = share)]
    pub fault_drop: f64,

    /// DDP endpoints: deliver this share of received frames twice (0 to 1), the copy right
    /// behind its original (a seeded fault injector, as --fault-drop).
    #[arg(long, default_value_t = 0.0, value_name = "RATE", value_parser = share)]
    pub fault_duplicate: f64,

    /// DDP endpoints: flip one bit, anywhere, in this share of received frames (0 to 1); the
    /// device's receive checksum verdict is then ignored.
    #[arg(long, default_value_t = 0.0, value_name = "RATE", value_parser = share)]
    pub fault_corrupt: f64,

    /// DDP endpoints: hold back this share of received frames (0 to 1) until the next burst
    /// has passed them.
    #[arg(long, default_value_t = 0.0, value_name = "RATE", value_parser = share)]
    pub fault_reorder: f64,

    /// DDP endpoints: hold every received frame this long before the data cores see it.
    #[arg(long, default_value_t = 0, value_name = "US",
          value_parser = whole::<u64>(0, 10_000_000))]
    pub fault_delay_us: u64,

    /// Seeds the fault injector's draws (the same seed does the same to the same traffic).
    #[arg(long, default_value_t = 1, value_name = "SEED",
          value_parser = whole::<u64>(0, u64::MAX))]
    pub fault_seed: u64,

    /// Tagged writes (or RDMA Reads) --ddp-connect keeps in flight: 1 measures latency
    /// (perftest's ib_write_lat or ib_read_lat: one outstanding, its completion the end), more
    /// measure goodput.
    #[arg(long, default_value_t = 16, value_name = "N",
          value_parser = whole::<u32>(1, 1024))]
    pub ddp_window: u32,

    /// --ddp-connect posts N messages (writes, reads, and with --ddp-verify its untagged
    /// Sends) and stops once they complete (perftest's --iters): a run of a fixed amount of
    /// work, whatever the machine's speed; with --run-for too, when it ends if that comes
    /// first (the report says so).
    #[arg(long, value_name = "N",
          value_parser = whole::<u64>(1, u64::MAX))]
    pub ddp_messages: Option<u64>,

    /// Where --ddp-connect's writes come from: `region` (a registered region in DPDK memory,
    /// sent by reference where the port chains mbufs: zero-copy) or `bytes` (a buffer moved
    /// into each send and copied into SCTP's send queue).
    #[arg(long, value_enum, default_value = "region")]
    pub ddp_source: DdpSource,

    /// What --ddp-connect measures: `write` (tagged writes into the server's region:
    /// perftest's ib_write_bw, or ib_write_lat with --ddp-window 1) or `read` (RDMA Reads of
    /// the server's region into a local sink on an RDMAP stream, RFC 5040 §5.2: ib_read_bw,
    /// or ib_read_lat with --ddp-window 1; at most ORD = min(--ddp-window, the server's IRD
    /// of 16) travel at once, the rest wait their turn; every read is checked against the
    /// bytes the server filled its region with).
    #[arg(long, value_enum, default_value = "write")]
    pub ddp_op: DdpOp,

    /// DDP endpoints: soak traffic, checked (issue 12 item 4; on both ends). --ddp-connect
    /// writes distinct self-checking messages (moved in, not from a region) and adds an
    /// untagged Send after every third write; --ddp-listen keeps receive buffers posted and
    /// checks every message delivered, block by block, and fails at the first wrong byte.
    /// Beside it, on an RDMAP stream of its own, the client writes a message, reads it back
    /// (RDMA Read) and adds 1 to a word (Fetch-and-Add), over and over, checking each.
    #[arg(long)]
    pub ddp_verify: bool,

    /// Size of the region --ddp-listen registers for each session, bytes. A binary unit may
    /// follow: K, M, G, T (or KiB, ...; 64M is 67108864). Each is allocated whole in DPDK
    /// memory (twice with --ddp-verify): one larger than the machine, or than the EAL's heap
    /// where --no-huge or --legacy-mem fixes it (-m MB; 64 MiB with --no-huge alone) once the
    /// ports took their buffers, is refused at start.
    #[arg(long, default_value_t = 64 << 20, value_name = "BYTES",
          value_parser = bytes::<u64>(1, 1 << 40), allow_hyphen_values = true)]
    pub region_bytes: u64,

    /// Whether the EAL's arguments fix its heap (`--no-huge`, `--legacy-mem`): a perf server
    /// then checks that its regions fit what the heap has free once the ports took theirs.
    /// Set from the EAL's arguments, not an option.
    #[arg(skip)]
    pub heap_fixed: bool,

    /// `ddpdk loopback`: write every frame both endpoints transmit to this pcap file.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,

    /// Seconds to wait for every port's link to come up.
    #[arg(long, default_value_t = 5.0, value_name = "SECS")]
    pub link_timeout: f64,

    /// DDP endpoints: IPsec on (RFC 5043 §13), ESP on the data cores through rte_ipsec and the
    /// crypto_aesni_mb PMD. With no SA or policy yet: they come from --ipsec-config, the
    /// shell (`ipsec sa add`, `ipsec sp add`) or a key manager (--ipsec-socket). The path MTU
    /// leaves room for ESP.
    #[arg(long)]
    pub ipsec: bool,

    /// DDP endpoints: SAs and policies to start with, in ipsec-secgw's `sa` / `sp` format
    /// (docs/ipsec.md); implies --ipsec.
    #[arg(long, value_name = "FILE")]
    pub ipsec_config: Option<PathBuf>,

    /// --ipsec-config's text, read (once) and checked before the EAL starts.
    #[arg(skip)]
    pub ipsec_config_text: Option<String>,

    /// DDP endpoints: a Unix stream socket at PATH through which a key manager (an IKE
    /// daemon) installs and deletes SAs and policies while the endpoint runs, a command a
    /// line (`sa add ...`, `sa del in|out SPI`, `sp add ...`, `sp del N|RULE`, `show`),
    /// each answered `ok ...` or `error: ...`; implies --ipsec.
    #[arg(long, value_name = "PATH")]
    pub ipsec_socket: Option<PathBuf>,

    /// DDP endpoints with IPsec: the crypto device, a vdev name. `crypto_aesni_mb0` (the
    /// default) does the crypto on the data core (CPU crypto), with a `crypto_aesni_gcm`
    /// beside it that seals zero-copy frames out of place; a device without CPU crypto
    /// (`crypto_openssl0`, or a hardware lookaside device by its name) takes every packet as
    /// crypto ops, each burst finished before the core goes on (docs/ipsec.md).
    #[arg(long, value_name = "NAME", default_value = "crypto_aesni_mb0")]
    pub ipsec_crypto_dev: String,

    /// DDP endpoints with IPsec: what happens to IP traffic no policy names, in and out.
    /// `discard` (the default) is RFC 4301 §5's; `bypass` lets it pass in the clear, as Linux's
    /// xfrm does by default. IPv6 Neighbor Solicitations and Advertisements and the path MTU's
    /// ICMP (Fragmentation Needed, Packet Too Big) pass either way, and ARP is not IP; other
    /// ICMP (ping) needs a policy, by type if you like (`proto 1 type 8`; docs/ipsec.md).
    #[arg(long, value_name = "ACTION", value_enum)]
    pub ipsec_default: Option<IpsecDefault>,
}

/// The longest --run-for: a year, far from where `Instant + Duration` could overflow.
const MAX_SECS: f64 = 365.0 * 86_400.0;

const AFTER_HELP: &str = "\
Jobs (ddpdk JOB [EAL options] -- [options]; each has its own help: ddpdk JOB --help):
  fwd       testpmd's forwarding engines (the default without a job)
  loopback  two DDP endpoints back to back in one process (make run)
  endpoint  a DDP endpoint driven by shell commands (needs --ip)
  perf      goodput, write and read latency between two processes: perf server, perf client ADDR
  preflight this host checked for a run's EAL options (NIC binding, hugepages, CPUs), no EAL started

Examples:
  ddpdk loopback --no-huge -m 512 --no-pci -l 0-1 -- --ddp-bytes 8388608
  ddpdk fwd --no-huge -m 512 --no-pci -l 0-1 -- --ring-pair --tx-first -a --run-for 5 --stats-period 1
  ddpdk endpoint -l 0-1 --vdev=net_memif0,role=server -- --ip 198.18.0.2 --listen -i
  ddpdk -l 0-1 -a 0000:03:00.0 -- --forward-mode rxonly --cmdline-file cmds.txt -a";

/// RTO.Initial of a DDP endpoint when `--rto-initial-ms` is not given (RFC 9260 §16 suggests
/// 1000 for the Internet).
const DEFAULT_RTO_INITIAL_MS: u64 = 200;

impl Options {
    /// Whether the DDP endpoint runs IPsec (--ipsec, or what implies it).
    pub fn ipsec_on(&self) -> bool {
        self.ipsec || self.ipsec_config.is_some() || self.ipsec_socket.is_some()
    }

    /// What an idle data core of the DDP endpoint does (--idle, --idle-sleep-max-us).
    pub fn idle_policy(&self) -> IdlePolicy {
        match self.idle {
            IdleArg::Spin => IdlePolicy::Spin,
            IdleArg::Sleep | IdleArg::Interrupt => IdlePolicy::Sleep {
                max_sleep: std::time::Duration::from_micros(u64::from(self.idle_sleep_max_us)),
            },
        }
    }

    fn validate_perf_client(&self) -> Result<(), String> {
        let verify = self.ddp_verify;
        if verify && self.ddp_size < crate::verify::MIN_LEN as u64 {
            return Err(format!(
                "--ddp-verify: messages of at least {} bytes (--ddp-size)",
                crate::verify::MIN_LEN
            ));
        }
        if verify && self.ddp_op == DdpOp::Read {
            return Err(
                "--ddp-verify checks writes; --ddp-op read checks its reads itself: give one"
                    .into(),
            );
        }
        // Taken and ignored before (found by an outside-in review): a reader sends no bytes.
        if self.ddp_source == DdpSource::Bytes && self.ddp_op == DdpOp::Read {
            return Err(
                "--ddp-source says where writes come from; --ddp-op read places the server's \
                 bytes in a local sink and sends none: leave --ddp-source out"
                    .into(),
            );
        }
        if verify && self.ddp_window as usize > crate::soak::MAX_WINDOW {
            return Err(format!(
                "--ddp-verify: at most {} in flight (--ddp-window)",
                crate::soak::MAX_WINDOW
            ));
        }
        Ok(())
    }

    /// The bytes of DPDK memory a perf server's regions take for one client: its region, and
    /// with --ddp-verify the read-back's as large and the receive buffers of its Sends.
    pub fn server_region_bytes(&self) -> u64 {
        if self.ddp_verify {
            self.region_bytes
                .saturating_mul(2)
                .saturating_add((crate::soak::RECV_BUFFERS * crate::soak::RECV_LEN) as u64)
        } else {
            self.region_bytes
        }
    }

    /// `--region-bytes` as the perf server's refusals name it: with --ddp-verify, that it is
    /// taken twice.
    pub fn region_bytes_named(&self) -> String {
        let twice = if self.ddp_verify {
            " (twice, with --ddp-verify's read-back)"
        } else {
            ""
        };
        format!("--region-bytes {}{twice}", self.region_bytes)
    }

    /// The mbuf size of a DDP endpoint: --mbuf-size, grown to hold a whole frame of --mtu
    /// (Ethernet header and headroom included), and with IPsec the scratch rte_ipsec writes
    /// past a full frame while it seals it (`port::dpdk::ipsec::TAIL_SCRATCH`).
    pub fn ddp_mbuf_size(&self) -> u16 {
        let scratch = if self.ipsec_on() { 64 } else { 0 };
        self.mbuf_size.max(self.mtu + 14 + 128 + scratch)
    }

    /// What the fault injector in front of a DDP endpoint's port does (`--fault-*`).
    pub fn faults(&self) -> ddpdk_dataplane::port::faults::Faults {
        ddpdk_dataplane::port::faults::Faults {
            drop: self.fault_drop,
            duplicate: self.fault_duplicate,
            corrupt: self.fault_corrupt,
            reorder: self.fault_reorder,
            delay: std::time::Duration::from_micros(self.fault_delay_us),
            seed: self.fault_seed,
        }
    }

    /// The SCTP settings of a DDP endpoint: ours (a 4 MiB window, 1024 send slots, the RTO
    /// options), then each `--sctp` assignment. The path MTU is the caller's to set.
    pub fn sctp_config(&self) -> Result<ddpdk_dataplane::sctp::Config, String> {
        let mut cfg = ddpdk_dataplane::sctp::Config {
            local_port: self.sctp_port,
            streams: self.streams,
            send_slots: 1024,
            a_rwnd: 4 << 20,
            rto_min: std::time::Duration::from_millis(self.rto_min_ms),
            // Only the default follows RTO.Min up; a given value below it is `validate`'s.
            rto_initial: std::time::Duration::from_millis(
                self.rto_initial_ms
                    .unwrap_or(DEFAULT_RTO_INITIAL_MS.max(self.rto_min_ms)),
            ),
            ..ddpdk_dataplane::sctp::Config::default()
        };
        crate::sctp_params::apply(&mut cfg, &self.sctp)?;
        Ok(cfg)
    }

    /// Checks what clap cannot: value combinations.
    /// The data cores of an endpoint on a port (`endpoint`, `perf`): `--data-cores`, or
    /// testpmd's `--nb-cores`, which those jobs took before.
    pub fn endpoint_cores(&self) -> usize {
        usize::from(self.nb_cores).max(usize::from(self.data_cores))
    }

    pub fn validate(&self) -> Result<(), String> {
        // The perf client's option conflicts, before the EAL: they were found once the link
        // and the association were up, with status 1 (an outside-in review).
        if self.ddp_connect.is_some() {
            self.validate_perf_client()?;
        }
        if let Some(v6) = self
            .ip
            .iter()
            .find(|a| a.is_ipv6())
            .filter(|_| self.mtu < 1280)
        {
            return Err(format!(
                "--ip {v6} with --mtu {}: an IPv6 link carries 1280 bytes at least (RFC 8200 \
                 §5)",
                self.mtu
            ));
        }
        if let Some(i) = self.rto_initial_ms.filter(|&i| i < self.rto_min_ms) {
            return Err(format!(
                "--rto-initial-ms {i} is below --rto-min-ms {}: RTO.Initial cannot be less than \
                 RTO.Min (RFC 9260 §6.3.1)",
                self.rto_min_ms
            ));
        }
        if self.nb_cores > 1
            && self.data_cores > 1
            && usize::from(self.nb_cores) != usize::from(self.data_cores)
        {
            return Err(format!(
                "--data-cores {} and --nb-cores {} disagree: give one",
                self.data_cores, self.nb_cores
            ));
        }
        // The loopback's net_ring ports carry a queue a data core and one for the control
        // thread, 16 at most (RTE_PMD_RING_MAX_RX_RINGS): 16 data cores failed after the EAL,
        // naming --rxq/--txq, which the loopback does not take.
        if self.ddp_loopback && self.data_cores > 15 {
            return Err(format!(
                "--data-cores {} with the loopback: its net_ring ports carry 15 data cores at \
                 most (16 queues: one a data core and one for the control thread)",
                self.data_cores
            ));
        }
        if let Some(s) = self.run_for {
            if !(s.is_finite() && s > 0.0 && s <= MAX_SECS) {
                return Err(format!(
                    "--run-for must be a number of seconds in (0, {MAX_SECS}], not {s}"
                ));
            }
            if self.interactive {
                return Err("--run-for and --interactive exclude each other".into());
            }
        }
        if let Some(n) = self.txsplit {
            if n < 42 || n >= self.txpkts {
                return Err(format!(
                    "--txsplit {n}: the buffer before the attached span holds at least the 42 \
                     header bytes and less than the whole --txpkts {} frame",
                    self.txpkts
                ));
            }
        }
        if u32::from(self.txpkts) + 128 > u32::from(self.mbuf_size) {
            return Err(format!(
                "--txpkts {} does not fit one mbuf of --mbuf-size {} (128 bytes are headroom)",
                self.txpkts, self.mbuf_size
            ));
        }
        self.sctp_config()?;
        if (self.service.is_some() || self.reconnect.is_some())
            && (self.ip.is_empty() || self.ddp_listen || self.ddp_connect.is_some())
        {
            return Err(
                "--service and --reconnect run on a DDP endpoint (--ip ADDR), not with \
                 --ddp-listen or --ddp-connect"
                    .into(),
            );
        }
        let v4 = self.ip.iter().filter(|a| a.is_ipv4()).count();
        if v4 > 1 || self.ip.len() - v4 > 1 {
            return Err("--ip: at most one IPv4 and one IPv6 address".into());
        }
        for &a in &self.ip {
            // Taken as given, a mapped address was a second, IPv6 address of the interface.
            if a.to_canonical() != a {
                return Err(format!(
                    "--ip {a}: an IPv4-mapped address; give the IPv4 address itself ({})",
                    a.to_canonical()
                ));
            }
            // Peers drop what comes from these (RFC 1122 §3.2.1.3, as our interface does).
            let this_network = matches!(a, std::net::IpAddr::V4(v) if v.octets()[0] == 0);
            let why = ddpdk_control::runtime::not_a_peer(a)
                .or(this_network.then_some("in 0.0.0.0/8, which no host sends from"));
            if let Some(why) = why {
                return Err(format!(
                    "--ip {a}: {why}, not a unicast address for an interface"
                ));
            }
        }
        // `--ddp-connect` is named with what a user of `perf client ADDR` typed (it said only
        // "--ddp-connect", which they never typed: an outside-in review).
        for (flag, peer, also) in [
            ("--ddp-connect", self.ddp_connect, " (perf client's ADDR)"),
            ("--reconnect", self.reconnect, ""),
        ] {
            if let Some(given) = peer {
                // An IPv4-mapped address is the IPv4 peer (as the runtime takes it).
                let a = given.to_canonical();
                if let Some(why) = ddpdk_control::runtime::not_a_peer(a) {
                    return Err(format!(
                        "{flag} {given}{also}: {why}, not an address a peer can have"
                    ));
                }
                if self.ip.contains(&a) {
                    return Err(format!("{flag} {given}{also}: our own address"));
                }
                if !self.ip.is_empty() && !self.ip.iter().any(|ip| ip.is_ipv4() == a.is_ipv4()) {
                    return Err(format!("{flag} {given}{also}: no --ip of its family"));
                }
            }
        }
        if self.reconnect_port.is_some() && self.reconnect.is_none() {
            return Err("--reconnect-port is for --reconnect ADDR".into());
        }
        if self.listen && self.ip.is_empty() {
            return Err("--listen needs --ip ADDR".into());
        }
        if (self.ddp_listen || self.ddp_connect.is_some()) && self.ip.is_empty() {
            return Err(
                "perf server and perf client (--ddp-listen, --ddp-connect) need --ip ADDR".into(),
            );
        }
        // `perf server` and `perf client` refuse these by their option lists; the flag form
        // of the same jobs ran without the shell the user asked for (a script never ran).
        if self.ddp_listen || self.ddp_connect.is_some() {
            let shell = [
                ("--interactive", self.interactive),
                ("--cmdline-file", !self.cmdline_file.is_empty()),
                ("--listen", self.listen),
            ];
            if let Some((flag, _)) = shell.iter().find(|(_, given)| *given) {
                return Err(format!(
                    "{flag} is for the shell-driven endpoint (--ip ADDR without --ddp-listen \
                     or --ddp-connect); --ddp-listen and --ddp-connect run a perf server or \
                     client on their own"
                ));
            }
        }
        if self.ipsec_on() && (self.ddp_loopback || self.ip.is_empty()) {
            return Err(
                "--ipsec, --ipsec-config and --ipsec-socket are for a DDP endpoint \
                        (--ip ADDR, with --ddp-listen, --ddp-connect or the shell), not \
                        --ddp-loopback or forwarding"
                    .into(),
            );
        }
        if self.ipsec_default.is_some() && !self.ipsec_on() {
            return Err(
                "--ipsec-default is for an endpoint with IPsec (--ipsec, --ipsec-config or \
                 --ipsec-socket)"
                    .into(),
            );
        }
        // RFC 5043 §9's 516-byte segments must fit an IPv6 path once ESP took its most.
        let least = ddpdk_dataplane::sctp::MIN_PATH_MTU + 40 + ddpdk_dataplane::ipsec::MAX_OVERHEAD;
        if self.ipsec_on() && usize::from(self.mtu) < least {
            return Err(format!(
                "--mtu {} with IPsec leaves no room for 516-byte DDP segments (RFC 5043 §9) once \
                 ESP and an IPv6 header are added: give at least {least}",
                self.mtu
            ));
        }
        if !(self.link_timeout.is_finite() && (0.0..=3600.0).contains(&self.link_timeout)) {
            return Err(format!(
                "--link-timeout must be a number of seconds in [0, 3600], not {}",
                self.link_timeout
            ));
        }
        Ok(())
    }
}

/// Splits `argv` at the first `--`: EAL arguments (with the program name) before, ours after.
/// Without `--`, every argument is ours and the EAL runs on its defaults.
pub fn split_args(argv: &[String]) -> (Vec<String>, Vec<String>) {
    let prog = argv.first().cloned().unwrap_or_else(|| "ddpdk".into());
    let rest = argv.get(1..).unwrap_or_default();
    match rest.iter().position(|a| a == "--") {
        Some(i) => {
            let mut eal = vec![prog.clone()];
            eal.extend_from_slice(&rest[..i]);
            let mut app = vec![prog];
            app.extend_from_slice(&rest[i + 1..]);
            (eal, app)
        }
        None => (vec![prog.clone()], argv.to_vec()),
    }
}

/// An IPv4 or IPv6 address. A prefix length is refused by name: `198.18.0.1/24` was "invalid
/// IP address syntax", which did not say what to take off (an endpoint has addresses, no
/// subnets).
pub(crate) fn parse_ip(text: &str) -> Result<std::net::IpAddr, String> {
    if let Some((addr, _)) = text.split_once('/') {
        if addr.parse::<std::net::IpAddr>().is_ok() {
            return Err(format!(
                "an address takes no prefix length: give {addr}, not {text}"
            ));
        }
    }
    text.parse()
        .map_err(|_| "not an IPv4 or IPv6 address (as 198.18.0.1 or 2001:db8::1)".to_string())
}

/// A whole number from `min` to `max`, the parser of every integer option: a negative one is
/// named as such (clap's own said "invalid digit found in string").
pub(crate) fn whole<T>(
    min: T,
    max: T,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: Copy + Into<u64> + TryFrom<u64> + std::fmt::Display + Send + Sync + 'static,
{
    move |text: &str| {
        let range = format!("from {min} to {max}");
        if is_negative(text) {
            return Err(format!(
                "negative: the option takes a non-negative whole number ({range})"
            ));
        }
        match text.parse::<u64>() {
            Ok(n) if (min.into()..=max.into()).contains(&n) => {
                T::try_from(n).map_err(|_| format!("out of range ({range})"))
            }
            Ok(_) => Err(format!("out of range ({range})")),
            Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => {
                Err(format!("out of range ({range})"))
            }
            Err(_) => Err(format!("not a whole number ({range})")),
        }
    }
}

/// A count of bytes from `min` to `max`, the parser of every option that sizes memory
/// (buffers, regions, messages): digits, then optionally a binary unit, K, M, G or T (KiB,
/// MiB, GiB, TiB; any case), so `64K` is 65536. Binary, as DPDK and RDMA users size buffers
/// and regions (`-m 512` is MiB, ib_write_bw's sizes are powers of 2); KB, MB, GB and TB are
/// refused rather than guessed, as they mean 1000 to some and 1024 to others. Frame lengths
/// (`--txpkts`, `--echo-trim`, `--mtu`) stay plain: they are exact counts on the wire.
pub(crate) fn bytes<T>(
    min: T,
    max: T,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: Copy + Into<u64> + TryFrom<u64> + Send + Sync + 'static,
{
    move |text: &str| {
        let range = format!(
            "from {} to {}",
            with_unit(min.into()),
            with_unit(max.into())
        );
        if is_negative(text) {
            return Err(format!(
                "negative: the option takes a non-negative count of bytes ({range})"
            ));
        }
        let n = parse_bytes(text)?;
        u64::try_from(n)
            .ok()
            .filter(|n| (min.into()..=max.into()).contains(n))
            .and_then(|n| T::try_from(n).ok())
            .ok_or_else(|| format!("out of range ({range})"))
    }
}

/// A Tagged Offset: a count of bytes as [`bytes`] takes it, or hexadecimal after `0x`, as
/// `show mr` prints TOs and as STags are given (an outside-in review: `0x...` was "not a count
/// of bytes").
pub(crate) fn tagged_offset(text: &str) -> Result<u64, String> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16)
            .map_err(|_| format!("not a Tagged Offset: {text:?} is not 64-bit hexadecimal")),
        None => bytes::<u64>(0, u64::MAX)(text),
    }
}

/// `text` as a count of bytes with its unit applied; in u128, so that any count that does not
/// overflow it (and none of ours comes near) is compared with its option's range, not taken
/// for junk.
fn parse_bytes(text: &str) -> Result<u128, String> {
    let junk = || {
        "not a count of bytes: digits, then optionally K, M, G or T (binary: 64K is 65536)"
            .to_string()
    };
    let end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(end);
    if digits.is_empty() {
        return Err(junk());
    }
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        "t" | "tib" => 40,
        "kb" | "mb" | "gb" | "tb" => {
            let binary = unit[..1].to_ascii_uppercase();
            return Err(format!(
                "{unit} could mean units of 1000 or of 1024: give {digits}{binary} (units of \
                 1024) or the count of bytes"
            ));
        }
        _ => return Err(junk()),
    };
    // Only more digits than u128 holds fail here: far out of every option's range.
    let n = digits.parse::<u128>().unwrap_or(u128::MAX);
    Ok(n.saturating_mul(1 << shift))
}

/// A count of bytes as the largest binary unit that divides it: what `bytes` says a range is.
fn with_unit(n: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

/// A negative number, however it is written (`-5`, `-0.5`, `-64K`).
pub(crate) fn is_negative(text: &str) -> bool {
    text.strip_prefix('-')
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit() || c == '.'))
}

/// A share of frames: a number from 0 to 1.
fn share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        Ok(_) => Err("a share of frames is from 0 to 1".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// An Ethernet address of one station: six hex octets split by `:` or `-`, not a group address
/// (the low bit of the first octet, IEEE 802 §8.2), not all zeros.
fn parse_mac(text: &str) -> Result<[u8; 6], String> {
    let octets: Vec<&str> = text.split([':', '-']).collect();
    let mut mac = [0u8; 6];
    if octets.len() != 6 {
        return Err(format!("{text}: six octets, as 02:00:00:00:00:01"));
    }
    for (m, o) in mac.iter_mut().zip(&octets) {
        *m = u8::from_str_radix(o, 16)
            .ok()
            .filter(|_| o.len() == 2)
            .ok_or_else(|| format!("{text}: {o} is not a hex octet"))?;
    }
    if mac[0] & 1 != 0 {
        return Err(format!(
            "{text}: a group (multicast) address, not a station's"
        ));
    }
    if mac == [0; 6] {
        return Err(format!("{text}: the all-zeros address is no station's"));
    }
    Ok(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_is_six_hex_octets_of_one_station() {
        assert_eq!(
            parse_mac("02:00:5e:10:00:01"),
            Ok([0x02, 0x00, 0x5e, 0x10, 0x00, 0x01])
        );
        assert_eq!(parse_mac("02-00-5E-10-00-01"), Ok([2, 0, 0x5e, 0x10, 0, 1]));
        for (bad, why) in [
            ("02:00:5e:10:00", "six octets"),
            ("02:00:5e:10:00:1", "not a hex octet"),
            ("02:00:5e:10:00:0g", "not a hex octet"),
            ("01:00:5e:00:00:01", "group"),
            ("00:00:00:00:00:00", "all-zeros"),
        ] {
            let e = parse_mac(bad).expect_err(bad);
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    /// An address with a prefix length says to take the prefix off, for every address option.
    #[test]
    fn an_address_with_a_prefix_length_is_refused_with_the_address_to_give() {
        for opt in ["--ip", "--ddp-connect", "--reconnect"] {
            for (bad, want) in [
                ("198.18.0.1/24", "give 198.18.0.1, not 198.18.0.1/24"),
                ("2001:db8::1/64", "give 2001:db8::1, not 2001:db8::1/64"),
                ("300.1.1.1", "not an IPv4 or IPv6 address"),
            ] {
                let e = parse(&format!("ddpdk {opt} {bad}"))
                    .expect_err(bad)
                    .to_string();
                assert!(e.contains(want), "{opt} {bad}: {e}");
            }
        }
        assert!(parse("ddpdk --ip 198.18.0.1 --ip 2001:db8::1").is_ok());
    }

    /// --ddp-loopback's help said forwarding options were ignored; they are refused
    /// (jobs::check_flag_form).
    #[test]
    fn ddp_loopback_help_says_forwarding_options_are_refused() {
        use clap::CommandFactory;
        let cmd = Options::command();
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_id() == "ddp_loopback")
            .expect("--ddp-loopback");
        let help = arg.get_help().expect("help").to_string();
        assert!(
            help.contains("Forwarding options are refused") && !help.contains("ignored"),
            "{help}"
        );
        let e = parse("ddpdk --ddp-loopback --burst 64").expect("parses");
        let app = args("ddpdk --ddp-loopback --burst 64");
        assert!(crate::jobs::check_flag_form(&e, &app).is_err());
    }

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn parse(s: &str) -> Result<Options, clap::Error> {
        Options::try_parse_from(args(s))
    }

    #[test]
    fn eal_and_app_args_split_at_the_first_double_dash() {
        let (eal, app) = split_args(&args("ddpdk -l 0-1 --no-huge -- -i --rxq 2 -- x"));
        assert_eq!(eal, args("ddpdk -l 0-1 --no-huge"));
        assert_eq!(app, args("ddpdk -i --rxq 2 -- x"));
        let (eal, app) = split_args(&args("ddpdk -i"));
        assert_eq!(eal, args("ddpdk"));
        assert_eq!(app, args("ddpdk -i"));
    }

    /// RTO.Initial: 200 ms unless given; the default follows a larger RTO.Min up, a value
    /// given below RTO.Min is refused (it was raised silently).
    #[test]
    fn rto_initial_defaults_follow_rto_min_and_a_given_one_below_it_is_refused() {
        let ms = |s: &str| {
            let o = parse(s).expect("parses");
            o.validate()
                .and_then(|()| o.sctp_config())
                .map(|c| c.rto_initial.as_millis())
        };
        assert_eq!(ms("ddpdk --ip 198.18.0.1"), Ok(200));
        assert_eq!(ms("ddpdk --ip 198.18.0.1 --rto-min-ms 500"), Ok(500));
        assert_eq!(ms("ddpdk --ip 198.18.0.1 --rto-initial-ms 50"), Ok(50));
        let e = ms("ddpdk --ip 198.18.0.1 --rto-min-ms 500 --rto-initial-ms 100");
        assert!(
            e.as_ref()
                .is_err_and(|e| e.contains("below --rto-min-ms 500")),
            "{e:?}"
        );
    }

    #[test]
    fn every_option_parses() {
        let o = parse(
            "ddpdk -i -a --nb-cores 2 --rxq 2 --txq 3 --rxd 512 --txd 256 --burst 64 \
             --forward-mode txonly --stats-period 2 --json --cmdline-file a --cmdline-file b \
             --txpkts 1500 --tx-retry 4 --tx-first --ring-pair --total-num-mbufs 4095 --link-timeout 1 \
             --idle spin --idle-sleep-max-us 20",
        )
        .expect("parses");
        assert_eq!((o.idle, o.idle_sleep_max_us), (IdleArg::Spin, 20));
        assert!(o.interactive && o.auto_start && o.json && o.tx_first && o.ring_pair);
        assert_eq!(
            (o.nb_cores, o.rxq, o.txq, o.rxd, o.txd, o.burst),
            (2, 2, 3, 512, 256, 64)
        );
        assert_eq!(o.forward_mode, ModeArg::Txonly);
        assert_eq!(o.stats_period, 2);
        assert_eq!(o.cmdline_file, vec![PathBuf::from("a"), PathBuf::from("b")]);
        assert_eq!(
            (o.txpkts, o.tx_retry, o.total_num_mbufs),
            (1500, 4, Some(4095))
        );
        let o = parse("ddpdk --run-for 2.5").expect("parses");
        assert_eq!(o.run_for, Some(2.5));
        assert_eq!(o.validate(), Ok(()));
        let o = parse("ddpdk --forward-mode txonly --txpkts 1482 --txsplit 78").expect("parses");
        assert_eq!(o.txsplit, Some(78));
        assert_eq!(o.validate(), Ok(()));
        for (word, want) in [
            ("bypass", IpsecDefault::Bypass),
            ("discard", IpsecDefault::Discard),
        ] {
            let o = parse(&format!(
                "ddpdk --ip 198.18.0.1 --ddp-listen --ipsec --ipsec-default {word}"
            ))
            .expect("parses");
            assert_eq!(o.ipsec_default, Some(want));
            assert_eq!(o.validate(), Ok(()));
        }
    }

    /// Byte counts take binary units (`--ddp-size 64K` was "invalid digit found in string");
    /// junk, ambiguous units and counts beyond the option's range are refused, saying why.
    #[test]
    fn a_byte_count_takes_binary_units_and_refuses_junk_and_overflow() {
        let o = parse("ddpdk --ddp-size 64K --region-bytes 1T --ddp-bytes 8mib --mbuf-size 9K")
            .expect("parses");
        assert_eq!(
            (o.ddp_size, o.region_bytes, o.ddp_bytes, o.mbuf_size),
            (65536, 1 << 40, 8 << 20, 9216)
        );
        let o = parse("ddpdk --ddp-size 4G --region-bytes 65536").expect("parses");
        assert_eq!((o.ddp_size, o.region_bytes), (1 << 32, 65536));
        for (bad, why) in [
            ("--ddp-size 64X", "not a count of bytes"),
            ("--ddp-size 1.5M", "not a count of bytes"),
            ("--ddp-size K", "not a count of bytes"),
            ("--ddp-size 64KB", "give 64K (units of 1024)"),
            ("--region-bytes 2mb", "give 2M (units of 1024)"),
            ("--ddp-size 5G", "out of range (from 1 to 4G)"),
            ("--ddp-size 0", "out of range (from 1 to 4G)"),
            ("--region-bytes 2T", "out of range (from 1 to 1T)"),
            ("--ddp-bytes 99999999999999999999999999T", "out of range"),
            (
                "--ddp-bytes 999999999999999999999999999999999999999999",
                "out of range",
            ),
            ("--mbuf-size 17K", "out of range (from 1K to 16K)"),
        ] {
            let e = parse(&format!("ddpdk {bad}")).expect_err(bad).to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    /// A negative number is refused as negative, by the option it was given to: clap took
    /// `--ddp-size -5` for a flag ("unexpected argument '-5'"). Flags still parse as flags.
    #[test]
    fn a_negative_number_is_refused_as_negative_not_taken_for_a_flag() {
        for bad in [
            "--ddp-size -5",
            "--ddp-size -64K",
            "--region-bytes -1",
            "--rxq -1",
            "--stats-period -1",
            "--sctp-port -7",
            "--fault-seed -1",
            "--txsplit -3",
            "--total-num-mbufs -1000",
        ] {
            let e = parse(&format!("ddpdk {bad}")).expect_err(bad).to_string();
            assert!(
                e.contains("negative: the option takes a non-negative")
                    && !e.contains("unexpected argument"),
                "{bad}: {e}"
            );
        }
        // Negative seconds reach the checks of seconds.
        let o = parse("ddpdk --run-for -3").expect("parses");
        assert!(o.validate().is_err_and(|e| e.contains("--run-for must be")));
        let o = parse("ddpdk -i -a --rxq 2").expect("parses");
        assert!(o.interactive && o.auto_start && o.rxq == 2);
        let e = parse("ddpdk --rxq 70000").expect_err("range").to_string();
        assert!(e.contains("out of range (from 1 to 1024)"), "{e}");
        let e = parse("ddpdk --rxq two").expect_err("words").to_string();
        assert!(e.contains("not a whole number (from 1 to 1024)"), "{e}");
    }

    #[test]
    fn defaults_are_testpmds() {
        let o = parse("ddpdk").expect("parses");
        assert_eq!((o.nb_cores, o.rxq, o.txq, o.burst), (1, 1, 1, 32));
        assert_eq!(o.forward_mode, ModeArg::Io);
        assert!(!o.interactive && !o.auto_start);
    }

    #[test]
    fn bad_values_are_refused() {
        for bad in [
            "ddpdk --burst 0",
            "ddpdk --burst 513",
            "ddpdk --rxq 0",
            "ddpdk --nb-cores x",
            "ddpdk --forward-mode mac",
            "ddpdk --txpkts 20",
            "ddpdk --no-such-option",
            "ddpdk --stats-period -1",
            "ddpdk --stats-period 18446744073709551615",
            "ddpdk --txpkts 9601",
            "ddpdk --mtu 9001",
            "ddpdk --idle yield",
            "ddpdk --idle-sleep-max-us 0",
            "ddpdk --ip 198.18.0.1 --ipsec --ipsec-default protect",
        ] {
            assert!(parse(bad).is_err(), "{bad} was accepted");
        }
        for bad in [
            "ddpdk --run-for 0",
            "ddpdk --run-for -3",
            "ddpdk -i --run-for 2",
            "ddpdk --run-for nan",
            "ddpdk --run-for 1e300",
            "ddpdk --link-timeout 1e300",
            "ddpdk --link-timeout -1",
            "ddpdk --txpkts 2100",
            "ddpdk --txpkts 9000 --mbuf-size 9000",
            // --txsplit: the 42 header bytes before the span, and a span after them.
            "ddpdk --txpkts 1482 --txsplit 41",
            "ddpdk --txpkts 1482 --txsplit 1482",
            "ddpdk --ip 198.18.0.1 --ip 198.18.0.2",
            "ddpdk --ip 127.0.0.1",
            "ddpdk --listen",
            "ddpdk --data-cores 2 --nb-cores 3",
            "ddpdk --ip 198.18.0.1 --ddp-connect 198.18.0.1",
            "ddpdk --ip 198.18.0.1 --ddp-connect 224.0.0.1",
            "ddpdk --ip 198.18.0.1 --reconnect 127.0.0.1",
            "ddpdk --ip 198.18.0.1 --reconnect ::",
            "ddpdk --ip 198.18.0.1 --reconnect-port 7",
            "ddpdk --ip 198.18.0.1 --reconnect ::ffff:127.0.0.1",
            "ddpdk --ip 198.18.0.1 --reconnect ::ffff:198.18.0.1",
            "ddpdk --ip 198.18.0.1 --reconnect 2001:db8::2",
            "ddpdk --ddp-listen",
            "ddpdk --ddp-connect 198.18.0.2",
            // 17 net_ring queues: refused after the EAL, naming options the loopback refuses.
            "ddpdk --ddp-loopback --data-cores 16",
            // What no policy names is IPsec's to decide: without it, nothing to decide.
            "ddpdk --ip 198.18.0.1 --ddp-listen --ipsec-default bypass",
        ] {
            if let Ok(o) = parse(bad) {
                assert!(o.validate().is_err(), "{bad} was accepted");
            }
        }
        // What a user of `perf client ADDR` typed is named (an outside-in review: the
        // messages spoke of --ddp-connect and --ddp-listen alone).
        for (bad, says) in [
            (
                "ddpdk --ip 198.18.0.1 --ddp-connect 198.18.0.1",
                "--ddp-connect 198.18.0.1 (perf client's ADDR): our own address",
            ),
            (
                "ddpdk --ddp-connect 198.18.0.2",
                "perf server and perf client (--ddp-listen, --ddp-connect) need --ip ADDR",
            ),
        ] {
            let e = parse(bad).expect("parses").validate().expect_err(bad);
            assert_eq!(e, says, "{bad}");
        }
        // The shell's options with a perf job's flags: the shell never ran (session 24).
        for bad in [
            "ddpdk --ip 198.18.0.2 --ddp-listen --cmdline-file s.txt",
            "ddpdk --ip 198.18.0.2 --ddp-listen --listen",
            "ddpdk --ip 198.18.0.1 --ddp-connect 198.18.0.2 -i",
        ] {
            let o = parse(bad).expect(bad);
            let e = o.validate().expect_err(bad);
            assert!(e.contains("is for the shell-driven endpoint"), "{bad}: {e}");
        }
    }
}

/// A test service (`--service`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServiceArg {
    Echo,
    Discard,
    Daytime,
}

impl From<ServiceArg> for ddpdk_control::conn::Service {
    fn from(s: ServiceArg) -> Self {
        match s {
            ServiceArg::Echo => ddpdk_control::conn::Service::Echo,
            ServiceArg::Discard => ddpdk_control::conn::Service::Discard,
            ServiceArg::Daytime => ddpdk_control::conn::Service::Daytime,
        }
    }
}

/// What IPsec does with traffic no policy names (`--ipsec-default`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IpsecDefault {
    Discard,
    Bypass,
}

impl From<IpsecDefault> for ddpdk_dataplane::ipsec::Action {
    fn from(d: IpsecDefault) -> Self {
        match d {
            IpsecDefault::Discard => ddpdk_dataplane::ipsec::Action::Discard,
            IpsecDefault::Bypass => ddpdk_dataplane::ipsec::Action::Bypass,
        }
    }
}

/// What an idle data core does (`--idle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IdleArg {
    Sleep,
    /// `sleep`, and RX interrupts in deep idle where the device has them.
    Interrupt,
    Spin,
}

/// What a client measures (`--ddp-op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DdpOp {
    Write,
    Read,
}

/// Where a client's tagged writes come from (`--ddp-source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DdpSource {
    Region,
    Bytes,
}
