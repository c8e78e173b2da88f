//! DDP over SCTP, the protocol core above the wire views of [`crate::wire::ddp`]: sans-IO, no
//! clock, no allocation per segment (DESIGN.md, "Protocol cores are sans-IO").
//!
//! - [`delivery`]: the receive side's message completion and in-order delivery tracker
//!   (RFC 5041 §5.3, §5.4; RFC 5043 §5.2.1, §10). Placement happens elsewhere, as soon as a
//!   segment arrives; this module decides when a DDP Message is complete and may be Delivered.
//! - [`rx`]: one stream's receive path: DDP-SSN window, version, the RFC 5041 §7.1 checks,
//!   placement into region memory, then in-order delivery; the first error latches.
//! - [`tx`]: one stream's sender: DDP Messages cut into segment chunks at the MULPDU, with
//!   consecutive DDP-SSNs.

pub mod delivery;
pub mod rx;
pub mod tx;

pub use delivery::{Delivered, DeliveryError, MessageInfo, StreamDelivery};
pub use rx::{
    HeaderCopy, Indication, InlineMessage, Regions, RxError, RxStats, StreamRx, Ulp, INLINE_SLOT,
};
pub use tx::{emit_segment, emit_segment_header, mulpdu, StreamTx, Target, TxError, SACK_HEADROOM};
