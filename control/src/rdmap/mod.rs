//! RDMAP (RFC 5040) above DDP over SCTP: RDMA Write, RDMA Read, the four Sends and Terminate,
//! the services RFC 4296 §2.2 describes for an RDMA client.
//!
//! RDMAP is a ULP of DDP. On the wire it is nothing but DDP Messages whose RsvdULP carries its
//! control field ([`ddpdk_dataplane::wire::rdmap`]); here it is the per-stream state DDP
//! alone does not keep ([`RdmapStream`]):
//!
//! - **Checks before placement** (RFC 5040 §4.2, §7): each segment's RDMAP version and opcode
//!   must fit its buffer model and queue, and a Read Response may only go into the Data Sink
//!   of a Read this side has outstanding ([`RdmapStream::check`], run by DDP before any byte
//!   moves).
//! - **RDMA Read** (§5.2): the requester sends a Read Request (untagged, QN 1) and keeps it
//!   in its outbound read queue until the Read Response (tagged, into its Data Sink) is
//!   delivered; at most ORD at once. The responder checks the Data Source STag for remote
//!   read as strictly as DDP checks a write (same order, RFC 5040's codes), and answers with
//!   a Read Response read straight from the registered region; at most IRD at once.
//! - **Terminate** (§5.4, §7): the first error on a stream, DDP's or RDMAP's, is reported to
//!   the peer in a Terminate (untagged, QN 2) carrying the layer, type and code and the
//!   offending headers (§4.8), after which the DDP Stream Session is terminated (RFC 5043
//!   §11.3). A Terminate from the peer ends the stream's work.
//!
//! **ORD and IRD in the session's Private Data.** RFC 5043 gives RDMAP no parameter exchange
//! of its own; MPA (RFC 6581) puts IRD and ORD at the front of its Private Data, and ddpdk does
//! the same with the DDP Stream Session Initiate and Accept ([`encode_private_data`]):
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +---------------------------------------------------------------+
//! |                 'R' 'D' 'M' 'P'  (0x52444d50)                 |
//! +---------------+---------------+-------------------------------+
//! |  Version = 1  |  Reserved = 0 |              IRD              |
//! +---------------+---------------+-------------------------------+
//! |              ORD              |   the ULP's Private Data ...  |
//! +-------------------------------+                               |
//! ```
//!
//! IRD is how many RDMA Read Requests the sender will serve at once, ORD how many it wants
//! outstanding. Each side then sends at most min(its ORD, the peer's IRD) Read Requests at a
//! time, and terminates a peer that sends more than its own IRD (RFC 5040 §6.1 leaves the
//! limits to the ULP; siw answers an overrun the same way). The ULP's own Private
//! Data follows, so it may be at most 502 bytes (RFC 5043 §5.2.3: 512 in all).

mod coverage;
mod stream;

pub use coverage::Placed;
pub use stream::{
    rsvd_ulp, terminate_error, terminate_payload, AnsweredRead, AtomicServe, OutboundAtomic,
    OutboundRead, RdmapStream, ReadResponse, Stags, Upcall, ATOMIC_WORD,
};

use core::fmt;

use ddpdk_dataplane::wire::ddp::MAX_PRIVATE_DATA_LEN;

/// The first four bytes of an RDMAP stream's session Private Data.
pub const PRIVATE_DATA_MARKER: [u8; 4] = *b"RDMP";
/// The version of that format.
pub const PRIVATE_DATA_VERSION: u8 = 1;
/// Bytes the RDMAP parameters take at the front of the Private Data.
pub const PRIVATE_DATA_HEADER_LEN: usize = 10;
/// The most Private Data the ULP of an RDMAP stream may add.
pub const MAX_ULP_PRIVATE_DATA: usize = MAX_PRIVATE_DATA_LEN - PRIVATE_DATA_HEADER_LEN;

/// RDMA Read limits of one side (RFC 5040 §6.1; RFC 5043 §6.3's "RDMA Read Credits").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RdmaLimits {
    /// Inbound RDMA Read queue depth: Read Requests this side serves at once.
    pub ird: u16,
    /// Outbound RDMA Read queue depth: Read Requests this side wants outstanding at once.
    pub ord: u16,
}

impl Default for RdmaLimits {
    /// 16 each, as many RNICs default to.
    fn default() -> Self {
        RdmaLimits { ird: 16, ord: 16 }
    }
}

/// The ULP's Private Data does not fit behind the RDMAP parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrivateDataTooLong;

impl fmt::Display for PrivateDataTooLong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "private data over {MAX_ULP_PRIVATE_DATA} bytes (RDMAP takes {PRIVATE_DATA_HEADER_LEN} of 512)"
        )
    }
}

impl std::error::Error for PrivateDataTooLong {}

/// The Private Data of an RDMAP stream's Initiate or Accept: the limits, then `ulp`.
pub fn encode_private_data(limits: RdmaLimits, ulp: &[u8]) -> Result<Vec<u8>, PrivateDataTooLong> {
    if ulp.len() > MAX_ULP_PRIVATE_DATA {
        return Err(PrivateDataTooLong);
    }
    let mut out = Vec::with_capacity(PRIVATE_DATA_HEADER_LEN + ulp.len());
    out.extend_from_slice(&PRIVATE_DATA_MARKER);
    out.push(PRIVATE_DATA_VERSION);
    out.push(0);
    out.extend_from_slice(&limits.ird.to_be_bytes());
    out.extend_from_slice(&limits.ord.to_be_bytes());
    out.extend_from_slice(ulp);
    Ok(out)
}

/// The limits and the ULP's part of an RDMAP stream's Private Data, or `None` if it does not
/// start with the RDMAP parameters of a version this side knows (a plain DDP peer, or a
/// later format).
pub fn decode_private_data(private_data: &[u8]) -> Option<(RdmaLimits, &[u8])> {
    let (head, ulp) = private_data.split_at_checked(PRIVATE_DATA_HEADER_LEN)?;
    if head[..4] != PRIVATE_DATA_MARKER || head[4] != PRIVATE_DATA_VERSION {
        return None;
    }
    let limits = RdmaLimits {
        ird: u16::from_be_bytes([head[6], head[7]]),
        ord: u16::from_be_bytes([head[8], head[9]]),
    };
    Some((limits, ulp))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;

    #[test]
    fn private_data_round_trips_and_bounds_the_ulp_part() {
        let limits = RdmaLimits { ird: 4, ord: 300 };
        let pd = encode_private_data(limits, b"hello").unwrap();
        assert_eq!(&pd[..10], b"RDMP\x01\x00\x00\x04\x01\x2c");
        assert_eq!(decode_private_data(&pd), Some((limits, &b"hello"[..])));
        let full = encode_private_data(limits, &[7; MAX_ULP_PRIVATE_DATA]).unwrap();
        assert_eq!(
            full.len(),
            MAX_PRIVATE_DATA_LEN,
            "RFC 5043 §5.2.3: at most 512"
        );
        assert_eq!(
            encode_private_data(limits, &[7; MAX_ULP_PRIVATE_DATA + 1]),
            Err(PrivateDataTooLong)
        );
    }

    #[test]
    fn private_data_of_a_plain_ddp_peer_is_not_rdmap() {
        assert_eq!(decode_private_data(b"plain ddp private data"), None);
        assert_eq!(decode_private_data(b"RDMP"), None, "too short");
        let mut later = encode_private_data(RdmaLimits::default(), b"").unwrap();
        later[4] = 2;
        assert_eq!(
            decode_private_data(&later),
            None,
            "a version we do not know"
        );
    }
}
