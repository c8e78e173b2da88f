//! The ddpdk control side and the ULP (verbs-like) API.
//!
//! - [`session`]: the RFC 5043 §6 DDP Stream Session Control state machine of one DDP stream
//!   (Initiate / Accept / Reject / Terminate, DDP-SSN windows), sans-IO.
//! - [`memory`]: regions, protection domains, STag registration and revocation (RFC 4296
//!   `ddp_register` / `ddp_deregister`).
//! - [`conn`]: one association's DDP streams behind the RFC 4296 §2.1.2 operations, polled
//!   verbs-style; [`conn::Listener`] makes connections.
//! - [`rdmap`]: RDMAP (RFC 5040) above DDP: the per-stream state of RDMA Write, Read, Send
//!   and Terminate, and the ORD/IRD format of the session Private Data.
//! - [`runtime`]: the endpoint: data cores that own associations and run the per-packet path
//!   ([`runtime::DataCore::poll`], the one loop the product, the tests and the benches run),
//!   and a control thread that sets them up, with steering between cores.
//! - [`verbs`]: the verbs-shaped API over the runtime (protection domains, memory regions,
//!   queue pairs on RDMAP streams, completion queues; `docs/verbs.md` maps it to libibverbs).
//! - [`xmit`]: the transmit side of one TX queue (batched, never leaking a buffer) and the
//!   [`xmit::Tap`] that shows every frame queued on it.
#![forbid(unsafe_code)]

pub mod clock;
pub mod conn;
pub mod memory;
mod quiet;
pub mod rdmap;
pub mod runtime;
pub mod session;
pub mod verbs;
pub mod xmit;
