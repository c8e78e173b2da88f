//! The ddpdk control thread and the ULP (verbs-like) API.
//!
//! Association setup (INIT / stateless cookie) and STag management arrive with the protocol
//! issues; the foundation only fixes the crate's place in the workspace so that `cli` depends
//! on it from day one.
//!
//! - [`session`]: the RFC 5043 §6 DDP Stream Session Control state machine of one DDP stream
//!   (Initiate / Accept / Reject / Terminate, DDP-SSN windows), sans-IO.
#![forbid(unsafe_code)]

pub mod conn;
pub mod memory;
pub mod session;
