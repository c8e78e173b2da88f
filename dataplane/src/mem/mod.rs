//! Memory a remote peer may write into, and the rules that keep it safe (RFC 5041 §8).
//!
//! - [`stag`]: Steering Tags (24-bit index, 8-bit key, random start), protection domains,
//!   stream association, access rights, TO base and length; the tagged checks of §7.1.
//! - [`revoke`]: STag changes replicated to every data core by message; a revocation returns
//!   only when every core has acknowledged it (RFC 5041 §8.3.1 item 6).
//! - [`untagged`]: posted untagged receive buffers per (stream, QN), MSN from 1; the untagged
//!   checks of §7.1.
//!
//! Every check returns where the segment may go ([`stag::Placement`]) or the exact RFC 5041
//! §7.2 error ([`crate::wire::ddp::DdpError`]); nothing here moves a byte, so a refused segment
//! provably places nothing. The region memory itself (hugepages) and the placement copy come
//! with the data-core integration.

pub mod revoke;
pub mod stag;
pub mod untagged;

pub use revoke::{Command, Coordinator, CoreStags, Revocation, RevokeError};
pub use stag::{
    Access, Pd, Placement, RegionSlice, RegisterError, Registration, Stag, StagTable, StreamId,
    TagFault,
};
pub use untagged::{PostedBuffer, QueueFull, UntaggedQueue, UntaggedQueues};
