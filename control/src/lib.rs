//! The ddpdk control thread and the ULP (verbs-like) API.
//!
//! Association setup (INIT / stateless cookie), the RFC 5043 §6 stream session machine and STag
//! management arrive with the protocol issues; the foundation only fixes the crate's place in the
//! workspace so that `cli` depends on it from day one.
#![forbid(unsafe_code)]
