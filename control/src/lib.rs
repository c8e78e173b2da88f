//! The ddpdk control side and the ULP (verbs-like) API.
//!
//! - [`session`]: the RFC 5043 §6 DDP Stream Session Control state machine of one DDP stream
//!   (Initiate / Accept / Reject / Terminate, DDP-SSN windows), sans-IO.
//! - [`memory`]: regions, protection domains, STag registration and revocation (RFC 4296
//!   `ddp_register` / `ddp_deregister`).
//! - [`conn`]: one association's DDP streams behind the RFC 4296 §2.1.2 operations, polled
//!   verbs-style; [`conn::Listener`] makes connections.
//! - [`engine`]: a whole endpoint on one port queue, frames in and out, on the calling thread.
//! - [`runtime`]: the endpoint spread over data cores that own associations and a control
//!   thread that sets them up, with steering between cores.
#![forbid(unsafe_code)]

pub mod conn;
pub mod engine;
pub mod memory;
pub mod runtime;
pub mod session;
mod xmit;
