//! The `ddpdk` command: testpmd-style options, an interactive shell, and the application that
//! ties EAL, ports and data lcores together.
#![forbid(unsafe_code)]
// ddp_app's per-core JSON report is one `serde_json::json!` of some sixty keys, past the
// macro's default depth.
#![recursion_limit = "256"]

// Output goes through ddpdk_dataplane's outln!/out!/errln!: a reader that leaves must not
// abort a running endpoint (see there).
#[macro_use]
extern crate ddpdk_dataplane;

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
pub mod preflight;
pub mod run;
pub mod sctp_params;
pub mod shell;
pub mod soak;
pub mod stats;
pub mod telemetry;
pub mod vdev;
pub mod verify;
