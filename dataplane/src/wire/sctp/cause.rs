//! Error causes carried by ABORT and ERROR (RFC 9260 §3.3.10). They are variable-length
//! parameters in the §3.2.1 format: code, length, information, padded to 4 bytes.

use super::list::{List, ListElement};
use super::param::ParamType;
use super::{
    code_enum, length_field, pad_len, padded, read_u16, read_u32, split_tlv, tlv_len, write_u16,
    write_u32, zero_padding, Error, Result, CAUSE_HEADER_LEN,
};

code_enum! {
    /// Cause code (RFC 9260 §3.3.10, IANA "Error Cause Codes").
    pub enum CauseCode(u16) {
        InvalidStreamIdentifier = 1,
        MissingMandatoryParameter = 2,
        StaleCookie = 3,
        OutOfResource = 4,
        UnresolvableAddress = 5,
        UnrecognizedChunkType = 6,
        InvalidMandatoryParameter = 7,
        UnrecognizedParameters = 8,
        NoUserData = 9,
        CookieReceivedWhileShuttingDown = 10,
        RestartWithNewAddresses = 11,
        UserInitiatedAbort = 12,
        ProtocolViolation = 13,
    }
}

impl CauseCode {
    /// The cause's name as RFC 9260 §3.3.10 spells it, for messages to people.
    pub fn name(self) -> &'static str {
        match self {
            CauseCode::InvalidStreamIdentifier => "Invalid Stream Identifier",
            CauseCode::MissingMandatoryParameter => "Missing Mandatory Parameter",
            CauseCode::StaleCookie => "Stale Cookie Error",
            CauseCode::OutOfResource => "Out of Resource",
            CauseCode::UnresolvableAddress => "Unresolvable Address",
            CauseCode::UnrecognizedChunkType => "Unrecognized Chunk Type",
            CauseCode::InvalidMandatoryParameter => "Invalid Mandatory Parameter",
            CauseCode::UnrecognizedParameters => "Unrecognized Parameters",
            CauseCode::NoUserData => "No User Data",
            CauseCode::CookieReceivedWhileShuttingDown => "Cookie Received While Shutting Down",
            CauseCode::RestartWithNewAddresses => "Restart of an Association with New Addresses",
            CauseCode::UserInitiatedAbort => "User-Initiated Abort",
            CauseCode::ProtocolViolation => "Protocol Violation",
            CauseCode::Unknown(_) => "unknown cause",
        }
    }
}

mod field {
    use core::ops::Range;

    pub const CODE: Range<usize> = 0..2;
    pub const LENGTH: Range<usize> = 2..4;
    pub const INFO: usize = 4;
}

/// A view of one error cause: code, length, cause-specific information (RFC 9260 §3.3.10).
/// The buffer may extend past the cause; [`Cause::info`] ends at its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cause<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Cause<T> {
    /// Wraps `buffer` without checks; accessors may panic if it is too short.
    pub const fn new_unchecked(buffer: T) -> Self {
        Cause { buffer }
    }

    /// Wraps `buffer` after [`Cause::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let c = Self::new_unchecked(buffer);
        c.check_len()?;
        Ok(c)
    }

    /// `Truncated` if the buffer is shorter than the header or than the length field says,
    /// `BadLength` if the length field is below the header size.
    pub fn check_len(&self) -> Result<()> {
        tlv_len(self.buffer.as_ref(), CAUSE_HEADER_LEN).map(|_| ())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn code(&self) -> CauseCode {
        read_u16(&self.buffer.as_ref()[field::CODE]).into()
    }

    /// The length field: header and information, without padding.
    pub fn cause_length(&self) -> u16 {
        read_u16(&self.buffer.as_ref()[field::LENGTH])
    }

    /// The cause-specific information, up to the length field.
    pub fn info(&self) -> &[u8] {
        &self.buffer.as_ref()[field::INFO..usize::from(self.cause_length())]
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Cause<&'a T> {
    /// The information with the lifetime of the underlying buffer.
    pub fn info_ref(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::INFO..usize::from(self.cause_length())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Cause<T> {
    pub fn set_code(&mut self, code: CauseCode) {
        write_u16(&mut self.buffer.as_mut()[field::CODE], code.into());
    }

    pub fn set_cause_length(&mut self, len: u16) {
        write_u16(&mut self.buffer.as_mut()[field::LENGTH], len);
    }

    /// The information, up to the length field.
    pub fn info_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.cause_length());
        &mut self.buffer.as_mut()[field::INFO..len]
    }
}

/// An error cause. Variable information is kept as the received bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CauseRepr<'a> {
    /// §3.3.10.1: the stream identifier of the DATA chunk; length 8 (16 reserved bits, zero
    /// on send, ignored on receipt).
    InvalidStreamIdentifier { stream_id: u16 },
    /// §3.3.10.2: the missing parameter types; the 32-bit count must match the length.
    MissingMandatoryParameter { params: List<'a, ParamType> },
    /// §3.3.10.3: measure of staleness in microseconds; length 8.
    StaleCookie { staleness: u32 },
    /// §3.3.10.4: length 4.
    OutOfResource,
    /// §3.3.10.5: the unresolvable address parameter, whole.
    UnresolvableAddress { address: &'a [u8] },
    /// §3.3.10.6: the unrecognized chunk's type, flags, length and value.
    UnrecognizedChunkType { chunk: &'a [u8] },
    /// §3.3.10.7: length 4.
    InvalidMandatoryParameter,
    /// §3.3.10.8: the unrecognized parameters, whole.
    UnrecognizedParameters { params: &'a [u8] },
    /// §3.3.10.9: the TSN of the DATA chunk without user data; length 8.
    NoUserData { tsn: u32 },
    /// §3.3.10.10: length 4.
    CookieReceivedWhileShuttingDown,
    /// §3.3.10.11: the new address parameters, whole.
    RestartWithNewAddresses { addresses: &'a [u8] },
    /// §3.3.10.12: the upper layer's abort reason (may be empty).
    UserInitiatedAbort { reason: &'a [u8] },
    /// §3.3.10.13: additional information (may be empty).
    ProtocolViolation { info: &'a [u8] },
    /// Any other cause, as received. `code` must not be one of the codes above.
    Unknown { code: u16, info: &'a [u8] },
    /// A cause of a code above whose information does not fit that code's layout (a fixed
    /// size other than its own, a count that does not match its length), kept as received:
    /// the cause walks as a TLV, so the chunk carrying it still stands (§3.3.10 gives ERROR
    /// "one or more" causes, and §9.1 ends the association on an ABORT whatever it says), and
    /// it emits to the very bytes that made it. Made by
    /// [`CauseRepr::parse_as_received`] only, from information [`CauseRepr::parse`] refuses:
    /// one built of information that fits its code would re-parse as that code's variant.
    Unparsed { code: u16, info: &'a [u8] },
}

impl<'a> CauseRepr<'a> {
    /// Parses a cause from a view. Fixed-size causes must have exactly their size, and
    /// Missing Mandatory Parameter a count matching its length (`BadLength` otherwise).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(cause: &Cause<&'a T>) -> Result<Self> {
        cause.check_len()?;
        let info = cause.info_ref();
        let exact = |n: usize| {
            if info.len() == n {
                Ok(())
            } else {
                Err(Error::BadLength)
            }
        };
        Ok(match cause.code() {
            CauseCode::InvalidStreamIdentifier => {
                exact(4)?;
                CauseRepr::InvalidStreamIdentifier {
                    stream_id: read_u16(info),
                }
            }
            CauseCode::MissingMandatoryParameter => {
                let count = info.get(..4).map(read_u32).ok_or(Error::BadLength)?;
                let types = &info[4..];
                // u64 so that a hostile count cannot overflow the product.
                if u64::from(count) * 2 != types.len() as u64 {
                    return Err(Error::BadLength);
                }
                CauseRepr::MissingMandatoryParameter {
                    params: List::from_wire(types),
                }
            }
            CauseCode::StaleCookie => {
                exact(4)?;
                CauseRepr::StaleCookie {
                    staleness: read_u32(info),
                }
            }
            CauseCode::OutOfResource => {
                exact(0)?;
                CauseRepr::OutOfResource
            }
            CauseCode::UnresolvableAddress => CauseRepr::UnresolvableAddress { address: info },
            CauseCode::UnrecognizedChunkType => CauseRepr::UnrecognizedChunkType { chunk: info },
            CauseCode::InvalidMandatoryParameter => {
                exact(0)?;
                CauseRepr::InvalidMandatoryParameter
            }
            CauseCode::UnrecognizedParameters => CauseRepr::UnrecognizedParameters { params: info },
            CauseCode::NoUserData => {
                exact(4)?;
                CauseRepr::NoUserData {
                    tsn: read_u32(info),
                }
            }
            CauseCode::CookieReceivedWhileShuttingDown => {
                exact(0)?;
                CauseRepr::CookieReceivedWhileShuttingDown
            }
            CauseCode::RestartWithNewAddresses => {
                CauseRepr::RestartWithNewAddresses { addresses: info }
            }
            CauseCode::UserInitiatedAbort => CauseRepr::UserInitiatedAbort { reason: info },
            CauseCode::ProtocolViolation => CauseRepr::ProtocolViolation { info },
            CauseCode::Unknown(code) => CauseRepr::Unknown { code, info },
        })
    }

    /// Parses a cause as a received ABORT or ERROR carries it: as [`CauseRepr::parse`], but
    /// a cause whose length is sound (the TLV rule, §3.2.1) and whose information does not fit
    /// its code's layout is kept as [`CauseRepr::Unparsed`] instead of failing. Only the
    /// TLV's own length errors fail it (`Truncated`, `BadLength`).
    pub fn parse_as_received<T: AsRef<[u8]> + ?Sized>(cause: &Cause<&'a T>) -> Result<Self> {
        cause.check_len()?;
        Ok(Self::parse(cause).unwrap_or(CauseRepr::Unparsed {
            code: u16::from(cause.code()),
            info: cause.info_ref(),
        }))
    }

    pub fn code(&self) -> CauseCode {
        match self {
            CauseRepr::InvalidStreamIdentifier { .. } => CauseCode::InvalidStreamIdentifier,
            CauseRepr::MissingMandatoryParameter { .. } => CauseCode::MissingMandatoryParameter,
            CauseRepr::StaleCookie { .. } => CauseCode::StaleCookie,
            CauseRepr::OutOfResource => CauseCode::OutOfResource,
            CauseRepr::UnresolvableAddress { .. } => CauseCode::UnresolvableAddress,
            CauseRepr::UnrecognizedChunkType { .. } => CauseCode::UnrecognizedChunkType,
            CauseRepr::InvalidMandatoryParameter => CauseCode::InvalidMandatoryParameter,
            CauseRepr::UnrecognizedParameters { .. } => CauseCode::UnrecognizedParameters,
            CauseRepr::NoUserData { .. } => CauseCode::NoUserData,
            CauseRepr::CookieReceivedWhileShuttingDown => {
                CauseCode::CookieReceivedWhileShuttingDown
            }
            CauseRepr::RestartWithNewAddresses { .. } => CauseCode::RestartWithNewAddresses,
            CauseRepr::UserInitiatedAbort { .. } => CauseCode::UserInitiatedAbort,
            CauseRepr::ProtocolViolation { .. } => CauseCode::ProtocolViolation,
            CauseRepr::Unknown { code, .. } => CauseCode::Unknown(*code),
            CauseRepr::Unparsed { code, .. } => CauseCode::from(*code),
        }
    }

    fn info_len(&self) -> usize {
        match self {
            CauseRepr::InvalidStreamIdentifier { .. }
            | CauseRepr::StaleCookie { .. }
            | CauseRepr::NoUserData { .. } => 4,
            CauseRepr::MissingMandatoryParameter { params } => 4 + params.buffer_len(),
            CauseRepr::OutOfResource
            | CauseRepr::InvalidMandatoryParameter
            | CauseRepr::CookieReceivedWhileShuttingDown => 0,
            CauseRepr::UnresolvableAddress { address: b }
            | CauseRepr::UnrecognizedChunkType { chunk: b }
            | CauseRepr::UnrecognizedParameters { params: b }
            | CauseRepr::RestartWithNewAddresses { addresses: b }
            | CauseRepr::UserInitiatedAbort { reason: b }
            | CauseRepr::ProtocolViolation { info: b }
            | CauseRepr::Unknown { info: b, .. }
            | CauseRepr::Unparsed { info: b, .. } => b.len(),
        }
    }

    /// The length field: header and information, without padding.
    pub fn cause_len(&self) -> usize {
        CAUSE_HEADER_LEN + self.info_len()
    }

    /// Bytes `emit` writes: the cause and its padding.
    pub fn buffer_len(&self) -> usize {
        padded(self.cause_len())
    }

    /// Writes the cause and its zero padding into `buf[..self.buffer_len()]`.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`, or the cause is longer than 65535 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let len = self.cause_len();
        let mut c = Cause::new_unchecked(&mut buf[..len]);
        c.set_code(self.code());
        c.set_cause_length(length_field(len));
        let info = c.info_mut();
        match self {
            CauseRepr::InvalidStreamIdentifier { stream_id } => {
                write_u16(info, *stream_id);
                write_u16(&mut info[2..], 0);
            }
            CauseRepr::MissingMandatoryParameter { params } => {
                // The count is bounded by the 16-bit length field checked above.
                write_u32(info, params.len() as u32);
                params.emit(&mut info[4..]);
            }
            CauseRepr::StaleCookie { staleness: n } | CauseRepr::NoUserData { tsn: n } => {
                write_u32(info, *n)
            }
            CauseRepr::OutOfResource
            | CauseRepr::InvalidMandatoryParameter
            | CauseRepr::CookieReceivedWhileShuttingDown => {}
            CauseRepr::UnresolvableAddress { address: b }
            | CauseRepr::UnrecognizedChunkType { chunk: b }
            | CauseRepr::UnrecognizedParameters { params: b }
            | CauseRepr::RestartWithNewAddresses { addresses: b }
            | CauseRepr::UserInitiatedAbort { reason: b }
            | CauseRepr::ProtocolViolation { info: b }
            | CauseRepr::Unknown { info: b, .. }
            | CauseRepr::Unparsed { info: b, .. } => info.copy_from_slice(b),
        }
        zero_padding(buf, len);
    }
}

impl<'a> ListElement<'a> for CauseRepr<'a> {
    const FIXED_LEN: usize = 0;

    /// Causes in a list are those of a received ABORT or ERROR: read as received
    /// ([`CauseRepr::parse_as_received`]), so one whose information does not fit its code
    /// costs nothing but its meaning.
    fn parse_front(bytes: &'a [u8]) -> Result<(Self, usize)> {
        let (cause, used) = split_tlv(bytes, CAUSE_HEADER_LEN)?;
        Ok((
            CauseRepr::parse_as_received(&Cause::new_checked(cause)?)?,
            used,
        ))
    }

    fn buffer_len(&self) -> usize {
        CauseRepr::buffer_len(self)
    }

    fn padding_len(&self) -> usize {
        pad_len(self.cause_len())
    }

    fn emit(&self, buf: &mut [u8]) {
        CauseRepr::emit(self, buf)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
pub(super) mod tests {
    use super::super::param::tests::bytes;
    use super::*;
    use proptest::prelude::*;

    fn parse(bytes: &[u8]) -> Result<CauseRepr<'_>> {
        CauseRepr::parse(&Cause::new_checked(bytes)?)
    }

    fn as_received(bytes: &[u8]) -> Result<CauseRepr<'_>> {
        CauseRepr::parse_as_received(&Cause::new_checked(bytes)?)
    }

    fn emitted(c: &CauseRepr<'_>) -> Vec<u8> {
        let mut buf = vec![0xa5; c.buffer_len()];
        c.emit(&mut buf);
        buf
    }

    #[test]
    fn user_initiated_abort_with_reason_from_usrsctp() {
        // abort.pcap frame 11: code 12, length 25, "DDP stream terminated", 3 bytes padding.
        let mut b = vec![0x00, 0x0c, 0x00, 0x19];
        b.extend_from_slice(b"DDP stream terminated");
        b.extend_from_slice(&[0, 0, 0]);
        let c = parse(&b).unwrap();
        assert_eq!(
            c,
            CauseRepr::UserInitiatedAbort {
                reason: b"DDP stream terminated"
            }
        );
        assert_eq!((c.cause_len(), c.buffer_len()), (25, 28));
        assert_eq!(emitted(&c), b);
    }

    #[test]
    fn user_initiated_abort_without_reason() {
        let b = [0x00, 0x0c, 0x00, 0x04];
        assert_eq!(parse(&b), Ok(CauseRepr::UserInitiatedAbort { reason: &[] }));
        assert_eq!(emitted(&CauseRepr::UserInitiatedAbort { reason: &[] }), b);
    }

    #[test]
    fn invalid_stream_identifier_writes_zero_reserved_bits() {
        let c = CauseRepr::InvalidStreamIdentifier { stream_id: 0x0102 };
        assert_eq!(emitted(&c), [0, 1, 0, 8, 1, 2, 0, 0]);
        // Reserved bits are ignored on receipt.
        assert_eq!(parse(&[0, 1, 0, 8, 1, 2, 0xff, 0xff]), Ok(c));
    }

    #[test]
    fn fixed_size_causes_have_exact_lengths() {
        assert_eq!(parse(&[0, 1, 0, 6, 1, 2]), Err(Error::BadLength));
        assert_eq!(parse(&[0, 3, 0, 4]), Err(Error::BadLength));
        assert_eq!(parse(&[0, 4, 0, 8, 0, 0, 0, 0]), Err(Error::BadLength));
        assert_eq!(parse(&[0, 7, 0, 5, 0]), Err(Error::BadLength));
        assert_eq!(
            parse(&[0, 9, 0, 12, 0, 0, 0, 1, 0, 0, 0, 2]),
            Err(Error::BadLength)
        );
        assert_eq!(parse(&[0, 10, 0, 8, 0, 0, 0, 0]), Err(Error::BadLength));
    }

    #[test]
    fn no_user_data_and_stale_cookie() {
        let b = [0, 9, 0, 8, 0x04, 0x59, 0x17, 0x51];
        assert_eq!(parse(&b), Ok(CauseRepr::NoUserData { tsn: 72947537 }));
        assert_eq!(emitted(&CauseRepr::NoUserData { tsn: 72947537 }), b);
        let b = [0, 3, 0, 8, 0, 0, 0x03, 0xe8];
        assert_eq!(parse(&b), Ok(CauseRepr::StaleCookie { staleness: 1000 }));
    }

    #[test]
    fn missing_mandatory_parameter_count_matches_length() {
        let types = [ParamType::StateCookie];
        let c = CauseRepr::MissingMandatoryParameter {
            params: List::new(&types),
        };
        let b = emitted(&c);
        assert_eq!(b, [0, 2, 0, 10, 0, 0, 0, 1, 0, 7, 0, 0]);
        assert_eq!(parse(&b), Ok(c));
        // Count 2 but one type: the count overflows the cause.
        assert_eq!(
            parse(&[0, 2, 0, 10, 0, 0, 0, 2, 0, 7]),
            Err(Error::BadLength)
        );
        // Count 0 with a type left over.
        assert_eq!(
            parse(&[0, 2, 0, 10, 0, 0, 0, 0, 0, 7]),
            Err(Error::BadLength)
        );
        // A huge count must not overflow the arithmetic.
        assert_eq!(
            parse(&[0, 2, 0, 8, 0xff, 0xff, 0xff, 0xff]),
            Err(Error::BadLength)
        );
        // No room for the count at all.
        assert_eq!(parse(&[0, 2, 0, 6, 0, 0]), Err(Error::BadLength));
    }

    /// §3.3.10: a cause of a known code whose information does not fit it (Out of Resource
    /// with 4 bytes, Stale Cookie with 3, a Missing Mandatory Parameter count that does not
    /// match) is refused by the strict `parse`, but read as received it is kept raw and emits
    /// to the bytes it came from.
    #[test]
    fn a_known_cause_that_does_not_fit_its_code_is_kept_unparsed_as_received_3_3_10() {
        let cases: [&[u8]; 4] = [
            &[0, 4, 0, 8, 1, 2, 3, 4],
            &[0, 3, 0, 7, 1, 2, 3, 0],
            &[0, 2, 0, 10, 0, 0, 0, 2, 0, 7, 0, 0],
            &[0, 10, 0, 5, 0xee, 0, 0, 0],
        ];
        for b in cases {
            let view = Cause::new_checked(b).unwrap();
            assert_eq!(CauseRepr::parse(&view), Err(Error::BadLength), "{b:?}");
            let c = CauseRepr::parse_as_received(&view).unwrap();
            assert_eq!(
                c,
                CauseRepr::Unparsed {
                    code: u16::from_be_bytes([b[0], b[1]]),
                    info: &b[4..usize::from(b[3])],
                }
            );
            assert_eq!(c.code(), CauseCode::from(u16::from_be_bytes([b[0], b[1]])));
            assert_eq!(emitted(&c), b, "emitted as received");
            assert_eq!(
                CauseRepr::parse_as_received(&Cause::new_checked(&emitted(&c)[..]).unwrap()),
                Ok(c)
            );
        }
        // A cause that fits its code is that code's variant either way, and a TLV whose own
        // length is wrong is refused either way.
        let fits = Cause::new_checked(&[0u8, 4, 0, 4][..]).unwrap();
        assert_eq!(
            CauseRepr::parse_as_received(&fits),
            Ok(CauseRepr::OutOfResource)
        );
        let short = Cause::new_unchecked(&[0u8, 4, 0, 3][..]);
        assert_eq!(CauseRepr::parse_as_received(&short), Err(Error::BadLength));
    }

    #[test]
    fn unknown_cause_round_trips() {
        let b = [0x01, 0x00, 0x00, 0x05, 0x77, 0, 0, 0];
        let c = parse(&b).unwrap();
        assert_eq!(
            c,
            CauseRepr::Unknown {
                code: 0x100,
                info: &[0x77]
            }
        );
        assert_eq!(c.code(), CauseCode::Unknown(0x100));
        assert_eq!(emitted(&c), b);
    }

    #[test]
    fn cause_view_rejects_truncated_header_short_length_and_length_past_end() {
        assert_eq!(
            Cause::new_checked(&[0u8, 12, 0][..]).err(),
            Some(Error::Truncated)
        );
        assert_eq!(
            Cause::new_checked(&[0u8, 12, 0, 3][..]).err(),
            Some(Error::BadLength)
        );
        assert_eq!(
            Cause::new_checked(&[0u8, 12, 0, 5, 1][..]).map(|c| c.info().len()),
            Ok(1)
        );
        assert_eq!(
            Cause::new_checked(&[0u8, 12, 0, 6, 1][..]).err(),
            Some(Error::Truncated)
        );
    }

    #[test]
    fn cause_list_padding_rule() {
        // ABORT value ending at the cause's end or after its padding: both accepted.
        let b = [0, 12, 0, 5, b'x', 0, 0, 0];
        assert_eq!(
            List::<CauseRepr<'_>>::parse(&b[..5]).map(|l| l.len()),
            Ok(1)
        );
        assert_eq!(List::<CauseRepr<'_>>::parse(&b).map(|l| l.len()), Ok(1));
        assert_eq!(
            List::<CauseRepr<'_>>::parse(&b[..7]),
            Err(Error::BadPadding)
        );
    }

    #[derive(Debug, Clone)]
    pub(crate) enum CauseSpec {
        InvalidStream(u16),
        Missing(Vec<ParamType>),
        Stale(u32),
        OutOfResource,
        Unresolvable(Vec<u8>),
        UnrecognizedChunk(Vec<u8>),
        InvalidMandatory,
        UnrecognizedParams(Vec<u8>),
        NoUserData(u32),
        ShuttingDown,
        Restart(Vec<u8>),
        UserAbort(Vec<u8>),
        Violation(Vec<u8>),
        Unknown(u16, Vec<u8>),
        /// A code whose information is always empty, with some: never fits.
        Unparsed(u16, Vec<u8>),
    }

    impl CauseSpec {
        pub(crate) fn repr(&self) -> CauseRepr<'_> {
            match self {
                CauseSpec::InvalidStream(s) => CauseRepr::InvalidStreamIdentifier { stream_id: *s },
                CauseSpec::Missing(t) => CauseRepr::MissingMandatoryParameter {
                    params: List::new(t),
                },
                CauseSpec::Stale(n) => CauseRepr::StaleCookie { staleness: *n },
                CauseSpec::OutOfResource => CauseRepr::OutOfResource,
                CauseSpec::Unresolvable(b) => CauseRepr::UnresolvableAddress { address: b },
                CauseSpec::UnrecognizedChunk(b) => CauseRepr::UnrecognizedChunkType { chunk: b },
                CauseSpec::InvalidMandatory => CauseRepr::InvalidMandatoryParameter,
                CauseSpec::UnrecognizedParams(b) => CauseRepr::UnrecognizedParameters { params: b },
                CauseSpec::NoUserData(t) => CauseRepr::NoUserData { tsn: *t },
                CauseSpec::ShuttingDown => CauseRepr::CookieReceivedWhileShuttingDown,
                CauseSpec::Restart(b) => CauseRepr::RestartWithNewAddresses { addresses: b },
                CauseSpec::UserAbort(b) => CauseRepr::UserInitiatedAbort { reason: b },
                CauseSpec::Violation(b) => CauseRepr::ProtocolViolation { info: b },
                CauseSpec::Unknown(c, b) => CauseRepr::Unknown { code: *c, info: b },
                CauseSpec::Unparsed(c, b) => CauseRepr::Unparsed { code: *c, info: b },
            }
        }
    }

    pub(crate) fn cause_spec() -> impl Strategy<Value = CauseSpec> {
        let unknown_code = any::<u16>().prop_filter("known code", |c| {
            matches!(CauseCode::from(*c), CauseCode::Unknown(_))
        });
        prop_oneof![
            any::<u16>().prop_map(CauseSpec::InvalidStream),
            proptest::collection::vec(any::<u16>().prop_map(ParamType::from), 0..5)
                .prop_map(CauseSpec::Missing),
            any::<u32>().prop_map(CauseSpec::Stale),
            Just(CauseSpec::OutOfResource),
            bytes(20).prop_map(CauseSpec::Unresolvable),
            bytes(20).prop_map(CauseSpec::UnrecognizedChunk),
            Just(CauseSpec::InvalidMandatory),
            bytes(20).prop_map(CauseSpec::UnrecognizedParams),
            any::<u32>().prop_map(CauseSpec::NoUserData),
            Just(CauseSpec::ShuttingDown),
            bytes(20).prop_map(CauseSpec::Restart),
            bytes(30).prop_map(CauseSpec::UserAbort),
            bytes(30).prop_map(CauseSpec::Violation),
            (unknown_code, bytes(20)).prop_map(|(c, b)| CauseSpec::Unknown(c, b)),
            // Out of Resource, Invalid Mandatory Parameter, Cookie Received While Shutting
            // Down: information of length 0 only, so any makes the cause unparsed.
            (
                prop_oneof![Just(4u16), Just(7), Just(10)],
                proptest::collection::vec(any::<u8>(), 1..=20)
            )
                .prop_map(|(c, b)| CauseSpec::Unparsed(c, b)),
        ]
    }

    proptest! {
        #[test]
        fn cause_repr_round_trips(spec in cause_spec()) {
            let repr = spec.repr();
            let buf = emitted(&repr);
            prop_assert!(buf[repr.cause_len()..].iter().all(|&b| b == 0), "padding is zero");
            prop_assert_eq!(as_received(&buf), Ok(repr));
            prop_assert_eq!(as_received(&buf[..repr.cause_len()]), Ok(repr));
            if !matches!(repr, CauseRepr::Unparsed { .. }) {
                prop_assert_eq!(parse(&buf), Ok(repr));
            }
        }
    }
}
