//! Zero-copy views and representations of every header ddpdk reads or writes.
//!
//! The smoltcp pattern throughout (`../shared/DESIGN.md`): a `Packet<T: AsRef<[u8]>>` view whose
//! `new_checked` validates lengths once for untrusted bytes, after which no accessor panics;
//! setters on `T: AsMut<[u8]>`; a `Repr` with `parse` and `emit` so that illegal states are
//! unrepresentable. Unknown codes round-trip. No allocation, no `unsafe`.
//!
//! - [`link`]: Ethernet II, VLAN, IPv4, IPv6 through `etherparse`, down to the SCTP packet.
//! - [`sctp`]: the SCTP common header, chunks, parameters and error causes (RFC 9260).
//! - [`ddp`]: DDP segments and stream session control carried over SCTP (RFC 5041, RFC 5043).
//! - [`rdmap`]: RDMAP's control field in DDP's RsvdULP, the Read Request and Terminate headers
//!   (RFC 5040 §4).
//! - [`crc32c`]: the SCTP checksum (RFC 9260 Appendix A).
#![forbid(unsafe_code)]

pub mod crc32c;
pub mod ddp;
pub mod link;
pub mod rdmap;
pub mod sctp;

use core::fmt;

/// Why bytes were refused. Small and `Copy`: a bad frame costs no allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than the header, or than a length field says.
    Truncated,
    /// A length field is below the minimum for its type, or not consistent with the rest.
    BadLength,
    /// Padding is longer than 3 bytes where the RFC bounds it, or missing where required.
    BadPadding,
    /// The checksum does not match; nothing else in the packet was looked at.
    BadChecksum,
    /// A field holds a value the RFC forbids (the variant's user says which rule).
    Malformed,
    /// An IPv4 or IPv6 fragment: reported as such, never parsed as if whole.
    Fragment,
    /// Not what this parser handles (another EtherType or IP protocol).
    Unsupported,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated",
            Error::BadLength => "bad length field",
            Error::BadPadding => "bad padding",
            Error::BadChecksum => "bad checksum",
            Error::Malformed => "malformed field",
            Error::Fragment => "IP fragment",
            Error::Unsupported => "unsupported protocol",
        })
    }
}

impl std::error::Error for Error {}

/// Result of a wire parse.
pub type Result<T> = core::result::Result<T, Error>;
