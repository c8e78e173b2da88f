//! The `ddpdk` command: testpmd-style options, an interactive shell, and the application that
//! ties EAL, ports and data lcores together.
#![forbid(unsafe_code)]

// The output of a running endpoint goes through these, not `println!`/`eprintln!`: those panic
// when the reader of the stream has left (Rust ignores SIGPIPE, so the write fails with EPIPE),
// and a panic aborts the process. A reader leaving loses what it would have read, nothing else:
// the endpoint keeps running, and a server still sends its peer the ABORT it owes at the end.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), $($arg)*);
    }};
}
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

pub mod af_packet;
pub mod app;
pub mod attack;
pub mod ddp_app;
pub mod endpoint;
pub mod ipsec;
pub mod jobs;
pub mod loopback;
pub mod memif;
pub mod node;
pub mod options;
pub mod run;
pub mod sctp_params;
pub mod shell;
pub mod soak;
pub mod stats;
pub mod telemetry;
pub mod vdev;
pub mod verify;
