//! The interactive command language, testpmd style. Each shell line is parsed with clap, so the
//! grammar, its errors and `help` come from one declaration.

use std::fmt;
use std::str::FromStr;

use clap::{Parser, Subcommand, ValueEnum};
use ddpdk_dataplane::fwd::FwdMode;

/// `N` or `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortTarget {
    All,
    Port(u16),
}

impl FromStr for PortTarget {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "all" {
            return Ok(PortTarget::All);
        }
        s.parse::<u16>()
            .map(PortTarget::Port)
            .map_err(|_| format!("'{s}' is not a port id or 'all'"))
    }
}

impl fmt::Display for PortTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortTarget::All => f.write_str("all"),
            PortTarget::Port(p) => write!(f, "{p}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PortShow {
    /// Device, driver, MAC, queues, link.
    Info,
    /// testpmd-style counters with rates since the last show.
    Stats,
    /// Extended (driver) statistics.
    Xstats,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Io,
    Rxonly,
    Txonly,
    /// Receive, CRC32c, copy each payload into a region: the placement ceiling.
    Rxplace,
    /// Send every frame back with its Ethernet addresses swapped (the reflector of ping).
    Echo,
    /// One frame out, wait for it back, record the round trip: the raw latency.
    Ping,
}

impl From<ModeArg> for FwdMode {
    fn from(m: ModeArg) -> FwdMode {
        match m {
            ModeArg::Io => FwdMode::Io,
            ModeArg::Rxonly => FwdMode::RxOnly,
            ModeArg::Txonly => FwdMode::TxOnly,
            ModeArg::Rxplace => FwdMode::RxPlace,
            ModeArg::Echo => FwdMode::Echo,
            ModeArg::Ping => FwdMode::Ping,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TxFirst {
    /// Send one burst on every stream before forwarding (seeds `io` loops).
    #[value(name = "tx_first")]
    TxFirst,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HelpSection {
    Control,
    Display,
    Config,
    Ports,
    Ddp,
    All,
}

/// One shell command.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Start packet forwarding on the data lcores.
    Start {
        #[arg(value_enum)]
        tx_first: Option<TxFirst>,
    },
    /// Stop packet forwarding and print the forwarding statistics.
    Stop,
    /// Display information.
    Show {
        #[command(subcommand)]
        what: ShowCmd,
    },
    /// Clear counters.
    Clear {
        #[command(subcommand)]
        what: ClearCmd,
    },
    /// Change the configuration (forwarding stopped).
    Set {
        #[command(subcommand)]
        what: SetCmd,
    },
    /// Show help, for one section or all.
    Help {
        #[arg(value_enum)]
        section: Option<HelpSection>,
    },
    /// Stop forwarding, close the ports and exit.
    #[command(alias = "exit")]
    Quit,
    /// SCTP associations of the DDP endpoint.
    Assoc {
        #[command(subcommand)]
        what: AssocCmd,
    },
    /// DDP Stream Sessions (RFC 5043 §6).
    Session {
        #[command(subcommand)]
        what: SessionCmd,
    },
    /// Registered memory regions and their STags.
    Mr {
        #[command(subcommand)]
        what: MrCmd,
    },
    /// DDP messages to the peer.
    Send {
        #[command(subcommand)]
        what: SendCmd,
    },
    /// Receive buffers for untagged messages.
    Recv {
        #[command(subcommand)]
        what: RecvCmd,
    },
    /// RDMA operations on an RDMAP session (RFC 5040): write, read, send.
    Rdma {
        #[command(subcommand)]
        what: RdmaCmd,
    },
    /// IPsec SAs and policies (RFC 5043 §13): sa add RULE | sa del in|out SPI | sp add RULE |
    /// sp del N|RULE | expiring, RULE in the --ipsec-config format.
    Ipsec {
        #[arg(required = true, num_args = 1.., trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
    /// `wait (closed|session) [SECS]`: wait until associations came and every one is closed, or
    /// until a session is established (for scripts: a server's script waits for its client).
    Wait {
        #[arg(value_enum)]
        what: WaitArg,
        secs: Option<u32>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WaitArg {
    Closed,
    Session,
}

/// An association's number (`show assoc`).
pub type AssocId = u64;

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum AssocCmd {
    /// `assoc open ADDR [PORT]`: set up an association (waits until it is up).
    Open {
        addr: std::net::IpAddr,
        /// The peer's SCTP port (RFC 9260 §3.1: port 0 is never used).
        #[arg(value_parser = clap::value_parser!(u16).range(1..))]
        port: Option<u16>,
    },
    /// `assoc close ID [abort]`: SHUTDOWN (or ABORT) and wait until it is closed.
    Close {
        id: AssocId,
        #[arg(value_enum)]
        how: Option<CloseHow>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CloseHow {
    Abort,
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum SessionCmd {
    /// `session open ID STREAM [TEXT] [--rdmap [--ird N] [--ord N]]`: send an Initiate (Private
    /// Data TEXT) and wait for the peer's Accept or Reject; with --rdmap the session is an
    /// RDMAP stream, its RDMA Read limits in front of TEXT.
    Open {
        id: AssocId,
        stream: u16,
        text: Option<String>,
        /// Open an RDMAP stream (RDMA Write, Read, Send: `rdma ...`).
        #[arg(long)]
        rdmap: bool,
        /// RDMA Reads we serve at once (IRD; an RDMAP stream's, so with --rdmap).
        #[arg(long, default_value_t = 16, requires = "rdmap")]
        ird: u16,
        /// RDMA Reads we want outstanding at once (ORD; with --rdmap).
        #[arg(long, default_value_t = 16, requires = "rdmap")]
        ord: u16,
    },
    /// session close ID STREAM: send a Terminate and wait until the session is over.
    Close { id: AssocId, stream: u16 },
    /// session offer STAG: offer this region (registered with remote access) in the Accept of every session we accept.
    Offer { stag: StagArg },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AccessArg {
    /// The peer may write into it (tagged messages).
    RemoteWrite,
    /// The peer may read it (RDMA Read source).
    RemoteRead,
    /// The peer may write and read it.
    Remote,
    /// The peer may write and read it and run RFC 7306 atomics on it.
    RemoteAtomic,
    /// Receive buffers for untagged messages (local write).
    Local,
    /// A Read's or an Atomic's sink the peer may end with a Send with Invalidate (RFC 5040
    /// §5.3): local write and remote write (ddpdk lets a peer invalidate only an STag that
    /// grants it a remote right, as InfiniBand an R_Key; iWARP registers its sinks so). Not
    /// for receive buffers, which take `Local` alone.
    Sink,
}

impl AccessArg {
    /// Whether our own operations may write the region: a receive buffer's, a Read's or an
    /// Atomic's sink.
    pub fn local_write(self) -> bool {
        matches!(self, AccessArg::Local | AccessArg::Sink)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DigestArg {
    Crc32c,
    Sha256,
}

/// An STag: `0x...`, decimal, `last` (the region registered last here) or `offer` (the
/// region the peer offered on the stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StagArg {
    Value(u32),
    Last,
    Offer,
    /// Every local region (`mr checksum all`).
    All,
}

impl FromStr for StagArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "offer" {
            return Ok(StagArg::Offer);
        }
        if s == "last" {
            return Ok(StagArg::Last);
        }
        if s == "all" {
            return Ok(StagArg::All);
        }
        let v = match s.strip_prefix("0x") {
            Some(h) => u32::from_str_radix(h, 16),
            None => s.parse(),
        };
        v.map(StagArg::Value)
            .map_err(|_| format!("'{s}' is not an STag (0x..., a number, 'last' or 'offer')"))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum MrCmd {
    /// mr reg LEN [remote-write|remote-read|remote|remote-atomic|local|sink]: a region of DPDK
    /// memory, registered.
    Reg {
        #[arg(value_parser = crate::options::bytes::<u64>(0, u64::MAX))]
        len: u64,
        #[arg(value_enum)]
        access: Option<AccessArg>,
    },
    /// mr dereg STAG: revoke (every data core acknowledges), free its memory, and forget.
    Dereg { stag: StagArg },
    /// mr fill STAG BYTE: set every byte of the region.
    Fill {
        stag: StagArg,
        #[arg(value_parser = parse_byte)]
        byte: u8,
    },
    /// mr checksum STAG [crc32c|sha256]: a digest of the region's bytes.
    Checksum {
        stag: StagArg,
        #[arg(value_enum)]
        digest: Option<DigestArg>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum SendCmd {
    /// `send tagged ID STREAM STAG TO SIZE [COUNT] [--from LOCAL_STAG]`: COUNT tagged writes of
    /// SIZE bytes to the peer's STAG at TO, TO+SIZE, ... (waits for every completion).
    Tagged {
        id: AssocId,
        stream: u16,
        stag: StagArg,
        #[arg(value_parser = crate::options::tagged_offset)]
        to: u64,
        #[arg(value_parser = crate::options::bytes::<u32>(0, u32::MAX))]
        size: u32,
        #[arg(value_parser = clap::value_parser!(u32).range(1..))]
        count: Option<u32>,
        /// Send from this local region (STag, or `last`) instead of a generated pattern:
        /// message k is its SIZE bytes at k*SIZE, wrapping at the last whole SIZE, sent by
        /// reference where the port chains mbufs (zero-copy).
        #[arg(long)]
        from: Option<StagArg>,
    },
    /// `send untagged ID STREAM QN SIZE [COUNT] [--from LOCAL_STAG]`: COUNT untagged messages of
    /// SIZE bytes to queue QN (waits for every completion).
    Untagged {
        id: AssocId,
        stream: u16,
        qn: u32,
        #[arg(value_parser = crate::options::bytes::<u32>(0, u32::MAX))]
        size: u32,
        #[arg(value_parser = clap::value_parser!(u32).range(1..))]
        count: Option<u32>,
        /// As for `send tagged`.
        #[arg(long)]
        from: Option<StagArg>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum RdmaCmd {
    /// `rdma write ID STREAM STAG TO SIZE [COUNT] [--from LOCAL_STAG]`: COUNT RDMA Writes of SIZE
    /// bytes to the peer's STAG at TO, TO+SIZE, ... (waits for every completion).
    Write {
        id: AssocId,
        stream: u16,
        stag: StagArg,
        #[arg(value_parser = crate::options::tagged_offset)]
        to: u64,
        #[arg(value_parser = crate::options::bytes::<u32>(0, u32::MAX))]
        size: u32,
        #[arg(value_parser = clap::value_parser!(u32).range(1..))]
        count: Option<u32>,
        /// As for `send tagged`.
        #[arg(long)]
        from: Option<StagArg>,
    },
    /// `rdma read ID STREAM STAG TO SIZE [COUNT] --into LOCAL_STAG`: COUNT RDMA Reads of SIZE
    /// bytes from the peer's STAG at TO, TO+SIZE, ... into the local region (local write) at
    /// 0, SIZE, ... (wrapping at its last whole SIZE); prints latency and the CRC32c read.
    Read {
        id: AssocId,
        stream: u16,
        stag: StagArg,
        #[arg(value_parser = crate::options::tagged_offset)]
        to: u64,
        #[arg(value_parser = crate::options::bytes::<u32>(0, u32::MAX))]
        size: u32,
        #[arg(value_parser = clap::value_parser!(u32).range(1..))]
        count: Option<u32>,
        /// The Data Sink: a local region registered with local write.
        #[arg(long)]
        into: StagArg,
    },
    /// `rdma send ID STREAM SIZE [COUNT] [--solicited] [--invalidate STAG] [--from LOCAL_STAG]`:
    /// COUNT Sends into the peer's posted receives (queue 0).
    Send {
        id: AssocId,
        stream: u16,
        #[arg(value_parser = crate::options::bytes::<u32>(0, u32::MAX))]
        size: u32,
        #[arg(value_parser = clap::value_parser!(u32).range(1..))]
        count: Option<u32>,
        /// Send with Solicited Event.
        #[arg(long)]
        solicited: bool,
        /// Send with Invalidate: the peer's STag to invalidate.
        #[arg(long)]
        invalidate: Option<StagArg>,
        /// As for `send tagged`.
        #[arg(long)]
        from: Option<StagArg>,
    },
    /// `rdma fetch-add ID STREAM STAG TO ADD [COUNT] --into LOCAL_STAG`: COUNT RFC 7306 FetchAdds
    /// of ADD on the peer's 64-bit word at STAG/TO (remote-atomic there, 8-aligned), one after
    /// another; the original values land in the local region's 8-byte slots (local write).
    /// Prints the last one.
    FetchAdd {
        id: AssocId,
        stream: u16,
        stag: StagArg,
        #[arg(value_parser = crate::options::tagged_offset)]
        to: u64,
        add: U64Arg,
        #[arg(value_parser = clap::value_parser!(u32).range(1..))]
        count: Option<u32>,
        /// Where the original values go: a local region registered with local write.
        #[arg(long)]
        into: StagArg,
    },
    /// rdma cmp-swap ID STREAM STAG TO COMPARE SWAP --into LOCAL_STAG: one RFC 7306 CmpSwap
    /// (all 64 bits compared and swapped); prints the original value and whether it swapped.
    CmpSwap {
        id: AssocId,
        stream: u16,
        stag: StagArg,
        #[arg(value_parser = crate::options::tagged_offset)]
        to: u64,
        compare: U64Arg,
        swap: U64Arg,
        /// As for `fetch-add`.
        #[arg(long)]
        into: StagArg,
    },
    /// `rdma imm ID STREAM VALUE [COUNT] [--solicited]`: COUNT RFC 7306 Immediate Data messages,
    /// VALUE's 8 bytes big-endian, into the peer's posted receives (queue 0).
    Imm {
        id: AssocId,
        stream: u16,
        value: U64Arg,
        #[arg(value_parser = clap::value_parser!(u32).range(1..))]
        count: Option<u32>,
        /// Immediate Data with Solicited Event.
        #[arg(long)]
        solicited: bool,
    },
}

/// A byte: decimal, or hexadecimal with `0x`, as the other numbers of the shell.
fn parse_byte(s: &str) -> Result<u8, String> {
    let v = match s.strip_prefix("0x") {
        Some(h) => u8::from_str_radix(h, 16),
        None => s.parse(),
    };
    v.map_err(|_| format!("'{s}' is not a byte (0 to 255, or 0x00 to 0xff)"))
}

/// A 64-bit operand: decimal, or hexadecimal with `0x`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct U64Arg(pub u64);

impl FromStr for U64Arg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let v = match s.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16),
            None => s.parse(),
        };
        v.map(U64Arg)
            .map_err(|_| format!("'{s}' is not a 64-bit number (decimal or 0x...)"))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum RecvCmd {
    /// `recv post ID STREAM QN STAG LEN [COUNT]`: COUNT receive buffers of LEN bytes, back to
    /// back from the start of the local region STAG (waits until the core has them).
    Post {
        id: AssocId,
        stream: u16,
        qn: u32,
        stag: StagArg,
        #[arg(value_parser = crate::options::bytes::<u32>(0, u32::MAX))]
        len: u32,
        #[arg(value_parser = clap::value_parser!(u32).range(1..))]
        count: Option<u32>,
    },
    /// recv auto QN STAG LEN COUNT: with --listen, every session we accept gets COUNT receive
    /// buffers of LEN bytes on queue QN from the local region STAG (each session a set of its
    /// own), posted right behind the Accept (in the same command ring, so before the peer can
    /// send).
    Auto {
        qn: u32,
        stag: StagArg,
        #[arg(value_parser = crate::options::bytes::<u32>(0, u32::MAX))]
        len: u32,
        #[arg(value_parser = clap::value_parser!(u32).range(1..))]
        count: u32,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum ShowCmd {
    /// show port (info|stats|xstats) (N|all)
    Port {
        #[arg(value_enum)]
        what: PortShow,
        target: PortTarget,
    },
    /// show config fwd
    Config {
        #[command(subcommand)]
        what: ShowConfigCmd,
    },
    /// show assoc: associations, their core, state and counters.
    Assoc,
    /// show session: DDP Stream Sessions that are not idle, with what each brought in (untagged
    /// messages, Immediate Data, tagged messages placed).
    Session,
    /// show mr: registered regions (STag, TO, length, access).
    Mr,
    /// show ipsec: SAs with their counters, policies by number, policy drops.
    Ipsec,
    /// show fwd stats all: per-data-core counters (in `fwd`: the forwarding statistics so far).
    Fwd {
        #[command(subcommand)]
        what: ShowFwdCmd,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum ShowFwdCmd {
    /// Counters of every data core and of the control thread.
    Stats {
        #[arg(value_enum)]
        target: AllArg,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AllArg {
    All,
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum ShowConfigCmd {
    /// The forwarding mode and the (port, queue, lcore) streams.
    Fwd,
    /// The SCTP parameters of a DDP endpoint (RFC 9260 §16).
    Sctp,
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum ClearCmd {
    /// clear port stats (N|all)
    Port {
        #[command(subcommand)]
        what: ClearPortCmd,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum ClearPortCmd {
    /// Reset the port's counters.
    Stats { target: PortTarget },
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum SetCmd {
    /// set fwd (io|rxonly|txonly|rxplace|echo|ping)
    Fwd {
        #[arg(value_enum)]
        mode: ModeArg,
    },
    /// set sctp NAME VALUE: an SCTP parameter for associations made from now on.
    Sctp {
        name: String,
        /// Taken whatever it looks like (a negative number is refused as such, not as an
        /// unknown option).
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
}

#[derive(Debug, Parser)]
#[command(
    name = "ddpdk>",
    no_binary_name = true,
    disable_help_subcommand = true,
    disable_help_flag = true,
    disable_version_flag = true
)]
struct Line {
    #[command(subcommand)]
    cmd: Command,
}

/// `line` as it may be shown (echoed, quoted in an error): the value after each `*_key`
/// word (`aead_key`, `cipher_key`, `auth_key`, or misspelt `*-key`) and any word that may be
/// key material wherever it stands (a key given twice, a keyword left out) replaced, so key
/// material never reaches a terminal, a log or a pipe.
pub fn key_hidden(line: &str) -> String {
    let mut out = Vec::new();
    for (w, hide) in hidden_words(line) {
        out.push(if hide { "(key hidden)" } else { w });
    }
    out.join(" ")
}

/// Each word of `line`, and whether [`key_hidden`] hides it.
fn hidden_words(line: &str) -> impl Iterator<Item = (&str, bool)> {
    let mut before = None;
    line.split_whitespace().map(move |w| {
        let hide = ddpdk_dataplane::ipsec::hidden_word(before, w)
            || before.is_some_and(|b: &str| b.ends_with("_key"));
        before = Some(w);
        (w, hide)
    })
}

/// Whether `line` holds a word [`key_hidden`] hides: such a line is kept out of the history
/// file.
pub fn holds_key(line: &str) -> bool {
    hidden_words(line).any(|(_, hide)| hide)
}

/// `message` (an error about `line`) with every word of `line` that [`key_hidden`] hides
/// replaced wherever it is quoted: clap's "invalid value '...'" repeats the word it refused.
fn message_key_hidden(message: &str, line: &str) -> String {
    let mut out = message.to_string();
    for (w, hide) in hidden_words(line) {
        if hide {
            out = ddpdk_dataplane::ipsec::hidden_in(&out, w);
        }
    }
    out
}

/// Parses one shell line. `Ok(None)` for a blank line or a comment (`#`).
/// Errors are one line, meant to be printed as they are.
pub fn parse_line(line: &str) -> Result<Option<Command>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let shown = key_hidden(line);
    // Words as a POSIX shell splits them: "Private Data with spaces" is one argument.
    let words =
        shell_words::split(line).map_err(|e| format!("Bad command '{shown}': {e} (try 'help')"))?;
    Line::try_parse_from(&words)
        .map(|l| Some(l.cmd))
        .map_err(|e| {
            use clap::error::ErrorKind;
            // A command group alone (`assoc`): clap renders the group's help, whose first
            // line is its description; say what is missing and what may follow instead.
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                let cmd = <Line as clap::CommandFactory>::command();
                let mut sub = &cmd;
                for w in &words {
                    match sub.find_subcommand(w) {
                        Some(next) => sub = next,
                        None => break,
                    }
                }
                let names: Vec<String> = sub
                    .get_subcommands()
                    .filter(|c| !c.is_hide_set())
                    .map(|c| c.get_name().to_string())
                    .collect();
                if !names.is_empty() {
                    return format!(
                        "Bad command '{shown}': what to do is missing: {} (try 'help')",
                        names.join(", ")
                    );
                }
            }
            let rendered = e.render().to_string();
            let mut lines = rendered.lines().map(str::trim).filter(|l| !l.is_empty());
            let first = lines.next().unwrap_or("bad command");
            let first = first.trim_start_matches("error: ");
            // "the following required arguments were not provided:" names them on the next
            // line: one line still, with what is missing.
            let said = match lines.next().filter(|_| first.ends_with(':')) {
                Some(what) => format!("{first} {what}"),
                None => first.to_string(),
            };
            format!(
                "Bad command '{shown}': {} (try 'help')",
                message_key_hidden(&said, line)
            )
        })
}

/// The help text of a section.
pub fn help(section: Option<HelpSection>) -> String {
    const CONTROL: &str = "\
Control:
  start [tx_first]                     Start forwarding (tx_first: send one burst first).
  stop                                 Stop forwarding and print forwarding statistics.
                                       (A DDP endpoint runs until quit: start and stop
                                       say so, stop with its statistics.)
  quit | exit                          Stop, close all ports and exit.
";
    const DISPLAY: &str = "\
Display:
  show port info (N|all)               Device, driver, socket, MAC, queues, link.
  show port stats (N|all)              Counters and the rates since the last show.
  show port xstats (N|all)             Extended statistics of the driver.
  show config fwd                      Forwarding mode, burst, and the lcore streams.
  show config sctp                     SCTP parameters of a DDP endpoint (RFC 9260 §16).
";
    const CONFIG: &str = "\
Configuration:
  set fwd (io|rxonly|txonly|rxplace|echo|ping)
                                       Forwarding engine for the next start.
  set sctp NAME VALUE                  An SCTP parameter of a DDP endpoint, for associations
                                       made from now on ('show config sctp' lists them).
";
    const PORTS: &str = "\
Ports:
  clear port stats (N|all)             Reset the counters of a port.
";
    const DDP: &str = "\
DDP endpoint (ddpdk --ip ADDR ...):
  assoc open ADDR [PORT]               Set up an SCTP association (waits until it is up).
  assoc close ID [abort]               SHUTDOWN (or ABORT) an association.
  session open ID STREAM [TEXT] [--rdmap [--ird N] [--ord N]]
                                       Initiate a DDP Stream Session (an RDMAP stream with
                                       --rdmap); waits for the answer.
  session close ID STREAM              Terminate a session.
  session offer STAG                   Offer region STAG in the Accept of sessions we accept.
  mr reg LEN [remote-write|remote-read|remote|remote-atomic|local|sink]
                                       Allocate and register a region; prints its STag.
                                       remote-write (the default): the peer places into it;
                                       remote-read: the peer reads it; remote: both;
                                       remote-atomic: both and RFC 7306 atomics; local: ours
                                       (receive buffers, Read sinks, send sources); sink:
                                       local and remote-write (a Read sink the peer may
                                       invalidate with a Send with Invalidate).
  mr dereg STAG                        Deregister (every data core acknowledges); free it.
  mr fill STAG BYTE                    Set every byte of a region.
  mr checksum STAG [crc32c|sha256]     Digest of a region's bytes ('all': every region).
  send tagged ID STREAM STAG TO SIZE [COUNT] [--from LOCAL_STAG]
                                       Tagged writes (STAG 'offer': the peer's offer); with
                                       --from, the bytes of a local region, sent in place.
  send untagged ID STREAM QN SIZE [COUNT] [--from LOCAL_STAG]
                                       Untagged messages to queue QN.
  recv post ID STREAM QN STAG LEN [COUNT]
                                       Post receive buffers from local region STAG
                                       (QN 0-3; a queue holds at most 256).
  recv auto QN STAG LEN COUNT          With --listen: buffers for every session accepted,
                                       each its own set of the region STAG.
  rdma write ID STREAM STAG TO SIZE [COUNT] [--from LOCAL_STAG]
                                       RDMA Writes on an RDMAP session.
  rdma read ID STREAM STAG TO SIZE [COUNT] --into LOCAL_STAG
                                       RDMA Reads into a local region; prints latency.
  rdma send ID STREAM SIZE [COUNT] [--solicited] [--invalidate STAG] [--from LOCAL_STAG]
                                       Sends into the peer's posted receives.
  rdma fetch-add ID STREAM STAG TO ADD [COUNT] --into LOCAL_STAG
                                       RFC 7306 FetchAdds on the peer's word.
  rdma cmp-swap ID STREAM STAG TO COMPARE SWAP --into LOCAL_STAG
                                       One RFC 7306 CmpSwap on the peer's word.
  rdma imm ID STREAM VALUE [COUNT] [--solicited]
                                       RFC 7306 Immediate Data into the peer's receives.
  ipsec sa add (in|out) SPI ...        Install an SA (--ipsec-config's `sa` rule).
  ipsec sa del (in|out) SPI            Delete an SA (its policies then drop, counted).
  ipsec sp add (ipv4|ipv6) (in|out) esp (protect SPI|bypass|discard) [pri N] ...
                                       Add a policy (--ipsec-config's `sp` rule).
  ipsec sp del N                       Delete policy N (numbered by show ipsec).
  ipsec sp del RULE                    Delete the policy written as RULE.
  ipsec expiring                       SAs past their soft lifetime: due for a rekey.
  show assoc | show session | show mr  Associations, sessions, regions.
  show ipsec                           SAs and their counters, policies, policy drops.
  show fwd stats all                   Per-data-core and control-thread counters (fwd: the
                                       forwarding statistics so far, as at stop).
  show port (info|stats|xstats) (N|all)  The endpoint's port; 'clear port stats' resets it.
  set sctp NAME VALUE | show config sctp
                                       SCTP parameters for associations made from now on.
  wait closed [SECS]                   Wait until associations came and all closed.
  wait session [SECS]                  Wait for the next DDP Stream Session established
                                       (each wait reports one, even one already ended).
STAG is 0x..., a number, 'last' (registered last here) or 'offer' (the peer's offer).
TEXT (Private Data) is one word or \"several in quotes\"; COUNT is at least 1.
";
    match section {
        None => "\
Help is available for the following sections:

  help control                         Start and stop forwarding.
  help display                         Displaying port, stats and configuration.
  help config                          Configuration.
  help ports                           Port counters.
  help ddp                             The DDP endpoint: associations, sessions, memory.
  help all                             All of the above.
"
        .to_string(),
        Some(HelpSection::Control) => CONTROL.into(),
        Some(HelpSection::Display) => DISPLAY.into(),
        Some(HelpSection::Config) => CONFIG.into(),
        Some(HelpSection::Ports) => PORTS.into(),
        Some(HelpSection::Ddp) => DDP.into(),
        Some(HelpSection::All) => [CONTROL, DISPLAY, CONFIG, PORTS, DDP].join("\n"),
    }
}

/// The words that may follow `words` (the complete words typed so far), for tab completion.
pub fn next_words(words: &[&str]) -> Vec<&'static str> {
    const PORT_ARGS: &[&str] = &["all", "0", "1"];
    match words {
        [] => vec![
            "start", "stop", "show", "clear", "set", "help", "quit", "exit", "assoc", "session",
            "mr", "send", "recv", "rdma", "ipsec", "wait",
        ],
        ["wait"] => vec!["closed", "session"],
        ["assoc"] => vec!["open", "close"],
        ["session"] => vec!["open", "close", "offer"],
        ["mr"] => vec!["reg", "dereg", "fill", "checksum"],
        ["mr", "reg", _] => vec![
            "remote-write",
            "remote-read",
            "remote",
            "remote-atomic",
            "local",
        ],
        ["rdma"] => vec!["write", "read", "send", "fetch-add", "cmp-swap", "imm"],
        ["mr", "checksum", _] => vec!["crc32c", "sha256"],
        ["send"] => vec!["tagged", "untagged"],
        ["recv"] => vec!["post", "auto"],
        ["show", "fwd"] => vec!["stats"],
        ["show", "fwd", "stats"] => vec!["all"],
        ["start"] => vec!["tx_first"],
        ["show"] => vec!["port", "config", "assoc", "session", "mr", "ipsec", "fwd"],
        ["ipsec"] => vec!["expiring", "sa", "sp"],
        ["ipsec", "sa" | "sp"] => vec!["add", "del"],
        ["ipsec", "sa", "add" | "del"] => vec!["in", "out"],
        ["ipsec", "sp", "add"] => vec!["ipv4", "ipv6"],
        ["show", "port"] => vec!["info", "stats", "xstats"],
        ["show", "port", _] => PORT_ARGS.to_vec(),
        ["show", "config"] => vec!["fwd", "sctp"],
        ["clear"] => vec!["port"],
        ["clear", "port"] => vec!["stats"],
        ["clear", "port", "stats"] => PORT_ARGS.to_vec(),
        ["set"] => vec!["fwd", "sctp"],
        ["set", "sctp"] => crate::sctp_params::PARAMS.iter().map(|p| p.name).collect(),
        ["set", "fwd"] => vec!["io", "rxonly", "txonly", "rxplace", "echo", "ping"],
        ["help"] => vec!["control", "display", "config", "ports", "ddp", "all"],
        _ => Vec::new(),
    }
}

/// Completion candidates for the partial `line` (cursor at its end): the start offset of the
/// word being completed and the matching words.
pub fn complete(line: &str) -> (usize, Vec<&'static str>) {
    // The word being completed starts after the last whitespace character, whatever its width
    // in UTF-8 (a no-break space is two bytes).
    let start = line
        .char_indices()
        .rfind(|(_, c)| c.is_whitespace())
        .map_or(0, |(i, c)| i + c.len_utf8());
    let done: Vec<&str> = line[..start].split_whitespace().collect();
    let partial = &line[start..];
    let cands = next_words(&done)
        .into_iter()
        .filter(|w| w.starts_with(partial))
        .collect();
    (start, cands)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line with key material never reaches the history file: the test was a word ending
    /// in `_key`, so a misspelt `aead-key` and a key given where a keyword belongs were
    /// written to `~/.ddpdk_history` verbatim. It is now the test that hides them in echoes.
    #[test]
    fn a_line_holding_a_key_is_known_as_one_however_it_is_spelt() {
        let k = "00112233445566778899aabbccddeeff";
        for line in [
            format!("ipsec sa add in 5 aead_algo aes-128-gcm aead_key {k} mode transport"),
            format!("ipsec sa add in 5 aead_algo aes-128-gcm aead-key {k} mode transport"),
            format!("mr reg 0x{k}"),
            format!("mr reg {k}"),
        ] {
            assert!(holds_key(&line), "{line}");
            assert!(!key_hidden(&line).contains("0011"), "{line}");
        }
        assert!(!holds_key("mr reg 4096 remote"));
        assert!(!holds_key("rdma fetch-add 1 1 offer 8 0x0123456789abcdef"));
    }

    fn ok(line: &str) -> Command {
        parse_line(line).expect("parses").expect("not blank")
    }

    /// A command group alone says what may follow it: it printed the group's description
    /// ("SCTP associations of the DDP endpoint"), and `show config` named only `fwd`.
    #[test]
    fn a_command_group_alone_names_what_may_follow() {
        let e = |l: &str| parse_line(l).expect_err("incomplete");
        assert!(
            e("assoc").contains("what to do is missing: open, close"),
            "{}",
            e("assoc")
        );
        assert!(
            e("show config").contains("fwd, sctp"),
            "{}",
            e("show config")
        );
        assert!(e("mr").contains("reg, dereg"), "{}", e("mr"));
    }

    /// Port 0 is never a peer's (RFC 9260 §3.1): `assoc open ADDR 0` sent INITs to it.
    #[test]
    fn an_association_to_port_0_is_refused() {
        assert!(parse_line("assoc open 198.18.0.2 0").is_err());
        assert!(parse_line("assoc open 198.18.0.2 5001").is_ok());
    }

    /// An error names what is missing, not just that something is.
    #[test]
    fn a_missing_argument_is_named() {
        let e = parse_line("ipsec").expect_err("needs words");
        assert!(e.contains("not provided: <WORDS>"), "{e}");
        let e = parse_line("session open 1").expect_err("needs a stream");
        assert!(e.contains("not provided: <STREAM>"), "{e}");
    }

    /// A key is never shown: not in the echo of a script's line, nor in the error of a line
    /// that does not parse.
    #[test]
    fn keys_are_hidden_wherever_a_line_is_shown() {
        let line = "ipsec sa add in 1000 aead_algo aes-128-gcm aead_key 2b:7e:15:16 mode transport";
        assert_eq!(
            key_hidden(line),
            "ipsec sa add in 1000 aead_algo aes-128-gcm aead_key (key hidden) mode transport"
        );
        // A key manager's line pasted without `ipsec`, and one with an unclosed quote.
        for bad in [
            "sa add in 1000 aead_algo aes-128-gcm aead_key 2b:7e:15:16 mode transport",
            "ipsec sa add in 1000 aead_key 2b:7e:15:16 mode \"transport",
        ] {
            let e = parse_line(bad).expect_err("does not parse");
            assert!(!e.contains("2b:7e") && e.contains("(key hidden)"), "{e}");
        }
        assert_eq!(
            key_hidden("cipher_key 0xaa auth_key 0xbb esn"),
            "cipher_key (key hidden) auth_key (key hidden) esn"
        );
        // A key typed twice, a misspelt keyword, a keyword left out: each hidden; a 64-bit
        // operand is not a key.
        let key = "2b:7e:15:16:28:ae:d2:a6:ab:f7:15:88:09:cf:4f:3c:00:00:00:01";
        for line in [
            format!("ipsec sa add in 1 aead_algo aes-128-gcm aead_key {key} {key} mode transport"),
            format!("ipsec sa add in 1 aead_algo aes-128-gcm aead-key {key} mode transport"),
            format!("ipsec sa add in 1 aead_algo aes-128-gcm {key} mode transport"),
        ] {
            let shown = key_hidden(&line);
            assert!(
                !shown.contains("2b:7e") && shown.contains("(key hidden)"),
                "{shown}"
            );
        }
        assert_eq!(
            key_hidden("rdma cmp-swap 1 1 offer 8 0x4d4d4d4d4d4d4d5c 7"),
            "rdma cmp-swap 1 1 offer 8 0x4d4d4d4d4d4d4d5c 7"
        );
    }

    /// Private Data is free text: quoted, it may hold spaces (a shell's quoting rules); an
    /// unclosed quote is refused with a reason, not cut.
    #[test]
    fn quoted_private_data_is_one_argument() {
        let open = |text: &str| Command::Session {
            what: SessionCmd::Open {
                id: 1,
                stream: 2,
                text: Some(text.into()),
                rdmap: false,
                ird: 16,
                ord: 16,
            },
        };
        assert_eq!(ok("session open 1 2 hello"), open("hello"));
        assert_eq!(
            ok("session open 1 2 \"hello, peer: ready\""),
            open("hello, peer: ready")
        );
        assert_eq!(ok("session open 1 2 'a  b'"), open("a  b"));
        let e = parse_line("session open 1 2 \"unclosed").expect_err("refused");
        assert!(e.contains("missing closing quote"), "{e}");
        // Two unquoted words are still two arguments: clap refuses the second.
        assert!(parse_line("session open 1 2 hello peer").is_err());
    }

    #[test]
    fn every_command_parses() {
        assert_eq!(ok("start"), Command::Start { tx_first: None });
        assert_eq!(
            ok("start tx_first"),
            Command::Start {
                tx_first: Some(TxFirst::TxFirst)
            }
        );
        assert_eq!(ok("stop"), Command::Stop);
        for (w, k) in [
            ("info", PortShow::Info),
            ("stats", PortShow::Stats),
            ("xstats", PortShow::Xstats),
        ] {
            assert_eq!(
                ok(&format!("show port {w} all")),
                Command::Show {
                    what: ShowCmd::Port {
                        what: k,
                        target: PortTarget::All
                    }
                }
            );
            assert_eq!(
                ok(&format!("show port {w} 3")),
                Command::Show {
                    what: ShowCmd::Port {
                        what: k,
                        target: PortTarget::Port(3)
                    }
                }
            );
        }
        assert_eq!(
            ok("clear port stats 1"),
            Command::Clear {
                what: ClearCmd::Port {
                    what: ClearPortCmd::Stats {
                        target: PortTarget::Port(1)
                    }
                }
            }
        );
        assert_eq!(
            ok("clear port stats all"),
            Command::Clear {
                what: ClearCmd::Port {
                    what: ClearPortCmd::Stats {
                        target: PortTarget::All
                    }
                }
            }
        );
        assert_eq!(
            ok("show config fwd"),
            Command::Show {
                what: ShowCmd::Config {
                    what: ShowConfigCmd::Fwd
                }
            }
        );
        for (w, m) in [
            ("io", ModeArg::Io),
            ("rxonly", ModeArg::Rxonly),
            ("rxplace", ModeArg::Rxplace),
            ("echo", ModeArg::Echo),
            ("ping", ModeArg::Ping),
            ("txonly", ModeArg::Txonly),
        ] {
            assert_eq!(
                ok(&format!("set fwd {w}")),
                Command::Set {
                    what: SetCmd::Fwd { mode: m }
                }
            );
        }
        assert_eq!(ok("help"), Command::Help { section: None });
        assert_eq!(
            ok("help display"),
            Command::Help {
                section: Some(HelpSection::Display)
            }
        );
        assert_eq!(ok("quit"), Command::Quit);
        assert_eq!(ok("exit"), Command::Quit);
        assert_eq!(ok("   show   port stats   0  "), ok("show port stats 0"));
    }

    /// The shell's lengths, sizes and offsets take the command line's binary units: `mr reg
    /// 1G` registers 2^30 bytes, `send tagged ... 1M 4K` writes 4096 bytes at TO 2^20.
    #[test]
    fn shell_byte_counts_take_binary_units() {
        assert_eq!(
            ok("mr reg 1G remote-write"),
            Command::Mr {
                what: MrCmd::Reg {
                    len: 1 << 30,
                    access: Some(AccessArg::RemoteWrite)
                }
            }
        );
        assert_eq!(
            ok("send tagged 1 1 offer 1M 4K 2"),
            Command::Send {
                what: SendCmd::Tagged {
                    id: 1,
                    stream: 1,
                    stag: StagArg::Offer,
                    to: 1 << 20,
                    size: 4096,
                    count: Some(2),
                    from: None
                }
            }
        );
        for bad in [
            "mr reg 64KB",
            "send untagged 1 1 0 4G",
            "recv post 1 1 0 last -5",
        ] {
            assert!(parse_line(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ddp_commands_parse() {
        // The rule's words reach the IPsec command whole, hyphens and colons included.
        assert_eq!(
            ok("ipsec sa add out 1000 aead_algo aes-128-gcm aead_key 0x00 mode ipv4-tunnel"),
            Command::Ipsec {
                words: "sa add out 1000 aead_algo aes-128-gcm aead_key 0x00 mode ipv4-tunnel"
                    .split(' ')
                    .map(String::from)
                    .collect()
            }
        );
        assert!(parse_line("ipsec").is_err());
        assert_eq!(
            ok("assoc open 198.18.0.2 5000"),
            Command::Assoc {
                what: AssocCmd::Open {
                    addr: "198.18.0.2"
                        .parse()
                        .unwrap_or(std::net::IpAddr::from([0; 4])),
                    port: Some(5000)
                }
            }
        );
        assert_eq!(
            ok("assoc close 3 abort"),
            Command::Assoc {
                what: AssocCmd::Close {
                    id: 3,
                    how: Some(CloseHow::Abort)
                }
            }
        );
        assert_eq!(
            ok("mr reg 65536 remote-write"),
            Command::Mr {
                what: MrCmd::Reg {
                    len: 65536,
                    access: Some(AccessArg::RemoteWrite)
                }
            }
        );
        assert_eq!(
            ok("mr checksum 0x1a2b sha256"),
            Command::Mr {
                what: MrCmd::Checksum {
                    stag: StagArg::Value(0x1a2b),
                    digest: Some(DigestArg::Sha256)
                }
            }
        );
        assert_eq!(
            ok("send tagged 1 1 offer 0 4096 8"),
            Command::Send {
                what: SendCmd::Tagged {
                    id: 1,
                    stream: 1,
                    stag: StagArg::Offer,
                    to: 0,
                    size: 4096,
                    count: Some(8),
                    from: None
                }
            }
        );
        assert_eq!(
            ok("send untagged 1 1 0 100 --from last"),
            Command::Send {
                what: SendCmd::Untagged {
                    id: 1,
                    stream: 1,
                    qn: 0,
                    size: 100,
                    count: None,
                    from: Some(StagArg::Last)
                }
            }
        );
        assert_eq!(
            ok("recv post 1 1 0 77 1000 4"),
            Command::Recv {
                what: RecvCmd::Post {
                    id: 1,
                    stream: 1,
                    qn: 0,
                    stag: StagArg::Value(77),
                    len: 1000,
                    count: Some(4)
                }
            }
        );
        assert_eq!(
            ok("show fwd stats all"),
            Command::Show {
                what: ShowCmd::Fwd {
                    what: ShowFwdCmd::Stats {
                        target: AllArg::All
                    }
                }
            }
        );
        assert_eq!(
            ok("recv auto 0 last 1000 8"),
            Command::Recv {
                what: RecvCmd::Auto {
                    qn: 0,
                    stag: StagArg::Last,
                    len: 1000,
                    count: 8
                }
            }
        );
        assert_eq!(
            ok("mr checksum all"),
            Command::Mr {
                what: MrCmd::Checksum {
                    stag: StagArg::All,
                    digest: None
                }
            }
        );
        for bad in [
            "mr checksum zz",
            "assoc open nowhere",
            "send tagged 1 1 0x1",
            "recv auto 0 last 1000",
        ] {
            assert!(parse_line(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn blank_lines_and_comments_are_not_commands() {
        assert_eq!(parse_line(""), Ok(None));
        assert_eq!(parse_line("   "), Ok(None));
        assert_eq!(parse_line("# a comment"), Ok(None));
    }

    #[test]
    fn bad_lines_give_one_line_errors() {
        for bad in [
            "frobnicate",
            "show",
            "show port",
            "show port stats",
            "show port stats x",
            "show port stats 70000",
            "show port frob 0",
            "set fwd mac",
            "start now",
            "clear port stats",
            "quit now",
            "help nothing",
            // A command of no work: nothing to send, receive or report.
            "send tagged 1 1 offer 0 1024 0",
            "send untagged 1 1 0 1024 0",
            "rdma write 1 1 offer 0 1024 0",
            "rdma read 1 1 offer 0 1024 0 --into last",
            "rdma send 1 1 1024 0",
            "recv auto 0 last 1024 0",
        ] {
            let e = parse_line(bad).expect_err(bad);
            assert!(!e.contains('\n'), "multi-line error for {bad:?}: {e}");
            assert!(e.starts_with(&format!("Bad command '{bad}'")), "{e}");
        }
        // ... which with a count of 1 are commands.
        for good in [
            "send tagged 1 1 offer 0 1024 1",
            "send untagged 1 1 0 1024 1",
            "rdma write 1 1 offer 0 1024 1",
            "rdma read 1 1 offer 0 1024 1 --into last",
            "rdma send 1 1 1024 1",
            "recv auto 0 last 1024 1",
        ] {
            assert!(parse_line(good).is_ok(), "{good}");
        }
        // RDMA Read limits are an RDMAP stream's: without --rdmap they were ignored.
        for bad in ["session open 1 3 x --ird 5", "session open 1 3 --ord 2"] {
            let e = parse_line(bad).expect_err(bad);
            assert!(e.contains("--rdmap"), "{bad}: {e}");
        }
        assert!(parse_line("session open 1 3 x --rdmap --ird 5").is_ok());
        // A byte in hex, as STags and operands are.
        assert_eq!(
            parse_line("mr fill last 0xff").map(|c| c.map(|c| format!("{c:?}"))),
            parse_line("mr fill last 255").map(|c| c.map(|c| format!("{c:?}")))
        );
        // A Tagged Offset in hex too, as `show mr` prints it (an outside-in review: "not a
        // count of bytes"); with units as before.
        let same = |a: &str, b: &str| {
            assert_eq!(
                parse_line(a).map(|c| c.map(|c| format!("{c:?}"))),
                parse_line(b).map(|c| c.map(|c| format!("{c:?}"))),
                "{a} / {b}"
            )
        };
        same(
            "rdma write 1 5 offer 0xfffffffffffff000 8192",
            "rdma write 1 5 offer 18446744073709547520 8192",
        );
        same(
            "rdma read 1 1 offer 0x10000 64 --into last",
            "rdma read 1 1 offer 64K 64 --into last",
        );
        assert!(parse_line("rdma write 1 1 offer 0xfffffffffffffffff 8").is_err());
        assert!(parse_line("mr fill last 0x100").is_err());
        let e = parse_line("show port stats x").expect_err("bad port");
        assert!(e.contains("'x' is not a port id or 'all'"), "{e}");
    }

    #[test]
    fn help_sections_name_their_commands() {
        assert!(help(Some(HelpSection::Display)).contains("show port stats (N|all)"));
        assert!(help(Some(HelpSection::Control)).contains("start [tx_first]"));
        let all = help(Some(HelpSection::All));
        for cmd in [
            "start",
            "stop",
            "quit",
            "show port xstats",
            "show config fwd",
            "set fwd",
            "clear port stats",
        ] {
            assert!(all.contains(cmd), "help all lacks {cmd}");
        }
    }

    #[test]
    fn completion_follows_the_grammar() {
        assert_eq!(complete("sh"), (0, vec!["show"]));
        assert_eq!(complete("show port s"), (10, vec!["stats"]));
        assert_eq!(complete("show port stats "), (16, vec!["all", "0", "1"]));
        assert_eq!(
            complete("set fwd "),
            (8, vec!["io", "rxonly", "txonly", "rxplace", "echo", "ping"])
        );
        assert_eq!(complete("st"), (0, vec!["start", "stop"]));
        assert!(complete("quit ").1.is_empty());
        // Multi-byte whitespace before the cursor must not split a character.
        assert_eq!(complete("show\u{a0}po"), (6, vec!["port"]));
        assert_eq!(
            complete("show\u{3000}"),
            (
                7,
                vec!["port", "config", "assoc", "session", "mr", "ipsec", "fwd"]
            )
        );
        assert_eq!(complete("ipsec sp "), (9, vec!["add", "del"]));
        assert_eq!(complete("ipsec sa add "), (13, vec!["in", "out"]));
        // Every completed command is one the parser accepts.
        for line in [
            "show port info all",
            "clear port stats all",
            "set fwd rxonly",
            "start tx_first",
            "help all",
            "show ipsec",
            "ipsec sa del in 1000",
        ] {
            assert!(parse_line(line).is_ok(), "{line}");
        }
    }
}
