//! The SCTP association engine, sans-IO (RFC 9260, specialised for DDP by RFC 5043).
//!
//! - [`Endpoint`]: packets that match no association: stateless INIT → INIT ACK with an
//!   HMAC-sealed State Cookie, COOKIE ECHO → [`Association`], out-of-the-blue rules (§8.4).
//! - [`Association`]: the handshake from either side, the collision and restart cases of §5.2,
//!   reliable unordered transfer of whole messages (TSNs, SACK with gap blocks and duplicates,
//!   delayed ack, peer window, slow start, congestion avoidance, fast retransmit and recovery,
//!   RTO with Karn's rule and back-off, T3-rtx), heartbeats, graceful shutdown and abort.
//!
//! Nothing here reads a clock, touches a socket or allocates per packet: time comes in as
//! [`Instant`], packets in and out are the caller's buffers (DESIGN.md, quinn-proto's shape).
//!
//! What DDP needs from SCTP (RFC 5043) is built in: the Adaptation Layer Indication 0xC006 = 1
//! is sent and required (§5.1, §11.1); streams are equal both ways (§8); every message is one
//! unordered, unfragmented DATA chunk (§9, §10), and a peer sending ordered or fragmented DATA
//! is aborted with a Protocol Violation rather than misdelivered.

mod assoc;
mod config;
mod cookie;
mod endpoint;
pub mod plpmtud;
mod reassembly;
mod rto;
mod send_queue;
pub mod serial;
mod time;
mod tsn_map;

pub use assoc::{
    Association, CloseReason, Deliver, Discard, Event, Message, PredictedData, SendError, State,
    Stats, ADAPTATION_REASON, MAX_HOLES,
};
pub use config::{max_message, Config, MIN_PATH_MTU};
pub use cookie::{Cookie, CookieError, CookieKey, COOKIE_LEN};
pub use endpoint::{addr_bytes, Endpoint, EndpointStats, Ignored, IgnoredCounts, Outcome};
pub use plpmtud::{Plpmtud, PlpmtudStats};
pub use send_queue::{ExtRef, Hole};
pub use time::Instant;
pub use tsn_map::{Insert, TsnMap, MAX_DUP_TSNS};
