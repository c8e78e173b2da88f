//! ddpdk data plane: everything that runs per packet on a data core.
//!
//! - [`port`]: the `Port` trait, DPDK ethdev ports, an in-memory pair for tests.
//! - [`channel`]: the rings between a data core and the threads that feed it.
//! - [`config`]: the (port, queue, lcore) forwarding table, validated before anything starts.
//! - [`fwd`]: testpmd-like forwarding engines (`io`, `rxonly`, `txonly`) and the per-lcore loop.
//! - [`wire`]: zero-copy views of Ethernet/IP/SCTP/DDP headers, CRC32c.
//! - [`sctp`]: the sans-IO SCTP association engine (endpoint, association, timers).
//! - [`ddp`]: DDP receive-side message completion and in-order delivery.
//! - [`mem`]: Steering Tags, protection domains, untagged receive queues: the RFC 5041 §7.1
//!   checks before placement.
//! - [`net`]: our link and network addresses: frames sorted, ARP and IPv6 Neighbor Discovery
//!   answered, SCTP packets framed for the wire.

// `unsafe` is allowed only in the DPDK port layer (`port::dpdk`), which opts in.
#![deny(unsafe_code)]

/// `writeln!` to stdout that drops a failed write. `println!` panics when the reader of the
/// stream has left (Rust ignores SIGPIPE, so the write fails with EPIPE), and a panic aborts:
/// a reader leaving must lose what it would have read, nothing else. The `ddpdk` command, the
/// benches and the dataplane's own notes all print through these three.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// `write!` to stdout that drops a failed write ([`outln!`]).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// `writeln!` to stderr that drops a failed write ([`outln!`]).
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

pub mod channel;
pub mod config;
pub mod ddp;
pub mod fwd;
pub mod ipsec;
pub mod mem;
pub mod net;
pub mod port;
pub mod sctp;
mod splitmix;
pub mod trace;
pub mod wire;
