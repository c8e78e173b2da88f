//! Variable-length parameters of INIT, INIT ACK and HEARTBEAT (RFC 9260 §3.2.1, §3.3.2.1,
//! §3.3.3.1; RFC 5061 §4.2.5 for the Adaptation Layer Indication; RFC 3758 §3.1 for
//! Forward-TSN-Supported; RFC 5061 §4.2.7 for Supported Extensions).

use std::net::{Ipv4Addr, Ipv6Addr};

use super::list::{List, ListElement};
use super::{
    code_enum, length_field, pad_len, padded, read_u16, read_u32, split_tlv, tlv_len, write_u16,
    write_u32, zero_padding, Error, Result, UnrecognizedAction, PARAM_HEADER_LEN,
};

code_enum! {
    /// Parameter type (RFC 9260 §3.2.1, IANA "Chunk Parameter Types").
    pub enum ParamType(u16) {
        /// Heartbeat Info, the one parameter of HEARTBEAT and HEARTBEAT ACK (§3.3.5).
        HeartbeatInfo = 1,
        /// IPv4 Address (§3.3.2.1).
        Ipv4Address = 5,
        /// IPv6 Address (§3.3.2.1).
        Ipv6Address = 6,
        /// State Cookie, mandatory in INIT ACK (§3.3.3.1).
        StateCookie = 7,
        /// Unrecognized Parameter, in INIT ACK (§3.3.3.1).
        UnrecognizedParameter = 8,
        /// Cookie Preservative (§3.3.2.1).
        CookiePreservative = 9,
        /// Supported Address Types (§3.3.2.1).
        SupportedAddressTypes = 12,
        /// Supported Extensions (RFC 5061 §4.2.7).
        SupportedExtensions = 0x8008,
        /// Forward-TSN-Supported (RFC 3758 §3.1).
        ForwardTsnSupported = 0xc000,
        /// Adaptation Layer Indication (RFC 5061 §4.2.5, RFC 5043 §5.1).
        AdaptationLayerIndication = 0xc006,
    }
}

impl ParamType {
    /// What a receiver that does not recognize this type does with it (RFC 9260 §3.2.1).
    pub fn action(self) -> UnrecognizedAction {
        UnrecognizedAction::of_param_type(self.into())
    }
}

/// Parameter types in a list (Supported Address Types, Missing Mandatory Parameter) are 16-bit
/// codes with no padding between them.
impl<'a> ListElement<'a> for ParamType {
    const FIXED_LEN: usize = 2;

    fn parse_front(bytes: &'a [u8]) -> Result<(Self, usize)> {
        match bytes.get(..2) {
            Some(b) => Ok((read_u16(b).into(), 2)),
            None => Err(Error::Truncated),
        }
    }

    fn buffer_len(&self) -> usize {
        2
    }

    fn emit(&self, buf: &mut [u8]) {
        write_u16(buf, (*self).into());
    }
}

mod field {
    use core::ops::Range;

    pub const TYPE: Range<usize> = 0..2;
    pub const LENGTH: Range<usize> = 2..4;
    pub const VALUE: usize = 4;
}

/// A view of one parameter: type, length, value (RFC 9260 §3.2.1). The buffer may extend past
/// the parameter (padding, following parameters); [`Param::value`] ends at its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Param<T> {
    /// Wraps `buffer` without checks; accessors may panic if it is too short.
    pub const fn new_unchecked(buffer: T) -> Self {
        Param { buffer }
    }

    /// Wraps `buffer` after [`Param::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Truncated` if the buffer is shorter than the header or than the length field says,
    /// `BadLength` if the length field is below the header size.
    pub fn check_len(&self) -> Result<()> {
        tlv_len(self.buffer.as_ref(), PARAM_HEADER_LEN).map(|_| ())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn param_type(&self) -> ParamType {
        read_u16(&self.buffer.as_ref()[field::TYPE]).into()
    }

    /// The length field: header and value, without padding.
    pub fn param_length(&self) -> u16 {
        read_u16(&self.buffer.as_ref()[field::LENGTH])
    }

    /// The value, up to the length field.
    pub fn value(&self) -> &[u8] {
        &self.buffer.as_ref()[field::VALUE..usize::from(self.param_length())]
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Param<&'a T> {
    /// The value with the lifetime of the underlying buffer.
    pub fn value_ref(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::VALUE..usize::from(self.param_length())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Param<T> {
    pub fn set_param_type(&mut self, t: ParamType) {
        write_u16(&mut self.buffer.as_mut()[field::TYPE], t.into());
    }

    pub fn set_param_length(&mut self, len: u16) {
        write_u16(&mut self.buffer.as_mut()[field::LENGTH], len);
    }

    /// The value, up to the length field.
    pub fn value_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.param_length());
        &mut self.buffer.as_mut()[field::VALUE..len]
    }
}

/// A parameter of INIT, INIT ACK or HEARTBEAT. Parameters this module does not implement
/// (ECN Capable 0x8000, RANDOM 0x8002, CHUNKS 0x8003, HMAC-ALGO 0x8004, Host Name Address 11,
/// ...) are `Unknown` and round-trip unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamRepr<'a> {
    /// Heartbeat Info (RFC 9260 §3.3.5): opaque to everyone but its sender.
    HeartbeatInfo(&'a [u8]),
    /// IPv4 Address (RFC 9260 §3.3.2.1), length 8.
    Ipv4Address(Ipv4Addr),
    /// IPv6 Address (RFC 9260 §3.3.2.1), length 20.
    Ipv6Address(Ipv6Addr),
    /// State Cookie (RFC 9260 §3.3.3.1): opaque bytes to echo in COOKIE ECHO.
    StateCookie(&'a [u8]),
    /// Unrecognized Parameter (RFC 9260 §3.3.3.1): the unrecognized parameters copied whole
    /// (type, length, value) from the INIT; kept as bytes.
    UnrecognizedParameter(&'a [u8]),
    /// Cookie Preservative (RFC 9260 §3.3.2.1): suggested cookie life-span increment in
    /// milliseconds, length 8.
    CookiePreservative(u32),
    /// Supported Address Types (RFC 9260 §3.3.2.1): address parameter types (5, 6, ...).
    SupportedAddressTypes(List<'a, ParamType>),
    /// Supported Extensions (RFC 5061 §4.2.7): one chunk type per byte.
    SupportedExtensions(&'a [u8]),
    /// Forward-TSN-Supported (RFC 3758 §3.1), length 4.
    ForwardTsnSupported,
    /// Adaptation Layer Indication (RFC 5061 §4.2.5), length 8; 1 is DDP (RFC 5043 §5.1).
    AdaptationLayerIndication(u32),
    /// Any other parameter, with its type and value as received. `param_type` must not be one
    /// of the codes above (they parse as their own variant).
    Unknown { param_type: u16, value: &'a [u8] },
}

impl<'a> ParamRepr<'a> {
    /// Parses a parameter from a view. Fixed-size parameters must have exactly their size
    /// (`BadLength` otherwise), and Supported Address Types an even value length.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(param: &Param<&'a T>) -> Result<Self> {
        param.check_len()?;
        let value = param.value_ref();
        let exact = |n: usize| {
            if value.len() == n {
                Ok(())
            } else {
                Err(Error::BadLength)
            }
        };
        Ok(match param.param_type() {
            ParamType::HeartbeatInfo => ParamRepr::HeartbeatInfo(value),
            ParamType::Ipv4Address => {
                exact(4)?;
                ParamRepr::Ipv4Address(Ipv4Addr::new(value[0], value[1], value[2], value[3]))
            }
            ParamType::Ipv6Address => {
                exact(16)?;
                let mut a = [0u8; 16];
                a.copy_from_slice(value);
                ParamRepr::Ipv6Address(Ipv6Addr::from(a))
            }
            ParamType::StateCookie => ParamRepr::StateCookie(value),
            ParamType::UnrecognizedParameter => ParamRepr::UnrecognizedParameter(value),
            ParamType::CookiePreservative => {
                exact(4)?;
                ParamRepr::CookiePreservative(read_u32(value))
            }
            ParamType::SupportedAddressTypes => {
                if !value.len().is_multiple_of(2) {
                    return Err(Error::BadLength);
                }
                ParamRepr::SupportedAddressTypes(List::from_wire(value))
            }
            ParamType::SupportedExtensions => ParamRepr::SupportedExtensions(value),
            ParamType::ForwardTsnSupported => {
                exact(0)?;
                ParamRepr::ForwardTsnSupported
            }
            ParamType::AdaptationLayerIndication => {
                // RFC 5043 §5.1 draws the length as "Variable", but RFC 5061 §4.2.5, which
                // defines the parameter, fixes it at 8: a 32-bit indication.
                exact(4)?;
                ParamRepr::AdaptationLayerIndication(read_u32(value))
            }
            ParamType::Unknown(param_type) => ParamRepr::Unknown { param_type, value },
        })
    }

    pub fn param_type(&self) -> ParamType {
        match self {
            ParamRepr::HeartbeatInfo(_) => ParamType::HeartbeatInfo,
            ParamRepr::Ipv4Address(_) => ParamType::Ipv4Address,
            ParamRepr::Ipv6Address(_) => ParamType::Ipv6Address,
            ParamRepr::StateCookie(_) => ParamType::StateCookie,
            ParamRepr::UnrecognizedParameter(_) => ParamType::UnrecognizedParameter,
            ParamRepr::CookiePreservative(_) => ParamType::CookiePreservative,
            ParamRepr::SupportedAddressTypes(_) => ParamType::SupportedAddressTypes,
            ParamRepr::SupportedExtensions(_) => ParamType::SupportedExtensions,
            ParamRepr::ForwardTsnSupported => ParamType::ForwardTsnSupported,
            ParamRepr::AdaptationLayerIndication(_) => ParamType::AdaptationLayerIndication,
            ParamRepr::Unknown { param_type, .. } => ParamType::Unknown(*param_type),
        }
    }

    /// What to do with this parameter if it is not recognized (RFC 9260 §3.2.1); meaningful
    /// for `Unknown`.
    pub fn action(&self) -> UnrecognizedAction {
        self.param_type().action()
    }

    fn value_len(&self) -> usize {
        match self {
            ParamRepr::HeartbeatInfo(v)
            | ParamRepr::StateCookie(v)
            | ParamRepr::UnrecognizedParameter(v)
            | ParamRepr::SupportedExtensions(v)
            | ParamRepr::Unknown { value: v, .. } => v.len(),
            ParamRepr::Ipv4Address(_)
            | ParamRepr::CookiePreservative(_)
            | ParamRepr::AdaptationLayerIndication(_) => 4,
            ParamRepr::Ipv6Address(_) => 16,
            ParamRepr::SupportedAddressTypes(types) => types.buffer_len(),
            ParamRepr::ForwardTsnSupported => 0,
        }
    }

    /// The length field: header and value, without padding.
    pub fn param_len(&self) -> usize {
        PARAM_HEADER_LEN + self.value_len()
    }

    /// Bytes `emit` writes: the parameter and its padding.
    pub fn buffer_len(&self) -> usize {
        padded(self.param_len())
    }

    /// Writes the parameter and its zero padding into `buf[..self.buffer_len()]`.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`, or the parameter is longer than 65535 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let len = self.param_len();
        let mut p = Param::new_unchecked(&mut buf[..len]);
        p.set_param_type(self.param_type());
        p.set_param_length(length_field(len));
        let v = p.value_mut();
        match self {
            ParamRepr::HeartbeatInfo(b)
            | ParamRepr::StateCookie(b)
            | ParamRepr::UnrecognizedParameter(b)
            | ParamRepr::SupportedExtensions(b)
            | ParamRepr::Unknown { value: b, .. } => v.copy_from_slice(b),
            ParamRepr::Ipv4Address(a) => v.copy_from_slice(&a.octets()),
            ParamRepr::Ipv6Address(a) => v.copy_from_slice(&a.octets()),
            ParamRepr::CookiePreservative(n) | ParamRepr::AdaptationLayerIndication(n) => {
                write_u32(v, *n)
            }
            ParamRepr::SupportedAddressTypes(types) => types.emit(v),
            ParamRepr::ForwardTsnSupported => {}
        }
        zero_padding(buf, len);
    }
}

impl<'a> ListElement<'a> for ParamRepr<'a> {
    const FIXED_LEN: usize = 0;

    fn parse_front(bytes: &'a [u8]) -> Result<(Self, usize)> {
        let (param, used) = split_tlv(bytes, PARAM_HEADER_LEN)?;
        Ok((ParamRepr::parse(&Param::new_checked(param)?)?, used))
    }

    fn buffer_len(&self) -> usize {
        ParamRepr::buffer_len(self)
    }

    fn padding_len(&self) -> usize {
        pad_len(self.param_len())
    }

    fn emit(&self, buf: &mut [u8]) {
        ParamRepr::emit(self, buf)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
pub(super) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Parses one parameter from exactly `bytes`.
    fn parse(bytes: &[u8]) -> Result<ParamRepr<'_>> {
        ParamRepr::parse(&Param::new_checked(bytes)?)
    }

    fn emitted(p: &ParamRepr<'_>) -> Vec<u8> {
        let mut buf = vec![0xa5; p.buffer_len()];
        p.emit(&mut buf);
        buf
    }

    #[test]
    fn adaptation_layer_indication_ddp() {
        // From usrsctp's INIT in the vectors: type 0xC006, length 8, indication 1.
        let b = [0xc0, 0x06, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01];
        let p = parse(&b).unwrap();
        assert_eq!(p, ParamRepr::AdaptationLayerIndication(1));
        assert_eq!(p.param_type(), ParamType::AdaptationLayerIndication);
        assert_eq!(emitted(&p), b);
    }

    #[test]
    fn adaptation_layer_indication_length_is_eight() {
        assert_eq!(parse(&[0xc0, 0x06, 0, 4]), Err(Error::BadLength));
        assert_eq!(
            parse(&[0xc0, 0x06, 0, 12, 0, 0, 0, 1, 0, 0, 0, 0]),
            Err(Error::BadLength)
        );
    }

    #[test]
    fn ipv4_and_ipv6_addresses() {
        let b4 = [0, 5, 0, 8, 198, 18, 0, 1];
        let p = parse(&b4).unwrap();
        assert_eq!(p, ParamRepr::Ipv4Address(Ipv4Addr::new(198, 18, 0, 1)));
        assert_eq!(emitted(&p), b4);
        let mut b6 = vec![0, 6, 0, 20];
        b6.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        let p = parse(&b6).unwrap();
        assert_eq!(p, ParamRepr::Ipv6Address(Ipv6Addr::LOCALHOST));
        assert_eq!(emitted(&p), b6);
    }

    #[test]
    fn address_parameters_have_exact_lengths() {
        assert_eq!(parse(&[0, 5, 0, 7, 1, 2, 3]), Err(Error::BadLength));
        assert_eq!(
            parse(&[0, 5, 0, 12, 1, 2, 3, 4, 5, 6, 7, 8]),
            Err(Error::BadLength)
        );
        assert_eq!(parse(&[0, 6, 0, 8, 1, 2, 3, 4]), Err(Error::BadLength));
    }

    #[test]
    fn cookie_preservative_and_forward_tsn_supported() {
        let b = [0, 9, 0, 8, 0, 0, 0x27, 0x10];
        assert_eq!(parse(&b), Ok(ParamRepr::CookiePreservative(10_000)));
        assert_eq!(parse(&[0, 9, 0, 4]), Err(Error::BadLength));
        let b = [0xc0, 0, 0, 4];
        assert_eq!(parse(&b), Ok(ParamRepr::ForwardTsnSupported));
        assert_eq!(emitted(&ParamRepr::ForwardTsnSupported), b);
        assert_eq!(parse(&[0xc0, 0, 0, 8, 0, 0, 0, 0]), Err(Error::BadLength));
    }

    #[test]
    fn supported_address_types_are_padded_when_odd() {
        let types = [ParamType::Ipv4Address];
        let p = ParamRepr::SupportedAddressTypes(List::new(&types));
        assert_eq!((p.param_len(), p.buffer_len()), (6, 8));
        let b = emitted(&p);
        assert_eq!(b, [0, 12, 0, 6, 0, 5, 0, 0]);
        assert_eq!(parse(&b[..6]), Ok(p));
        assert_eq!(parse(&[0, 12, 0, 7, 0, 5, 0]), Err(Error::BadLength));
    }

    #[test]
    fn supported_extensions_from_usrsctp() {
        // Length 9: FORWARD-TSN, AUTH, ASCONF, ASCONF-ACK, RE-CONFIG; 3 bytes of padding.
        let b = [
            0x80, 0x08, 0x00, 0x09, 0xc0, 0x0f, 0xc1, 0x80, 0x82, 0, 0, 0,
        ];
        let p = parse(&b).unwrap();
        assert_eq!(
            p,
            ParamRepr::SupportedExtensions(&[0xc0, 0x0f, 0xc1, 0x80, 0x82])
        );
        assert_eq!(p.param_len(), 9);
        assert_eq!(emitted(&p), b);
    }

    #[test]
    fn usrsctp_auth_and_ecn_parameters_are_unknown_and_skipped() {
        // CHUNKS (0x8003) with the auth chunk list 128, 193 and two bytes of padding.
        let b = [0x80, 0x03, 0x00, 0x06, 0x80, 0xc1, 0, 0];
        let p = parse(&b).unwrap();
        assert_eq!(
            p,
            ParamRepr::Unknown {
                param_type: 0x8003,
                value: &[0x80, 0xc1]
            }
        );
        assert_eq!(p.action(), UnrecognizedAction::Skip);
        assert_eq!(emitted(&p), b);
        let ecn = parse(&[0x80, 0x00, 0x00, 0x04]).unwrap();
        assert_eq!(
            ecn,
            ParamRepr::Unknown {
                param_type: 0x8000,
                value: &[]
            }
        );
        assert_eq!(ecn.action(), UnrecognizedAction::Skip);
    }

    #[test]
    fn unknown_parameter_actions() {
        for (t, a) in [
            (0x000b, UnrecognizedAction::Discard),
            (0x4abc, UnrecognizedAction::DiscardAndReport),
            (0x8abc, UnrecognizedAction::Skip),
            (0xcabc, UnrecognizedAction::SkipAndReport),
        ] {
            let b = [(t >> 8) as u8, t as u8, 0, 4];
            assert_eq!(parse(&b).unwrap().action(), a);
        }
    }

    #[test]
    fn param_view_rejects_truncated_header_short_length_and_length_past_end() {
        assert_eq!(
            Param::new_checked(&[0u8, 7, 0][..]).err(),
            Some(Error::Truncated)
        );
        assert_eq!(
            Param::new_checked(&[0u8, 7, 0, 3][..]).err(),
            Some(Error::BadLength)
        );
        assert_eq!(
            Param::new_checked(&[0u8, 7, 0, 9, 1, 2, 3, 4][..]).err(),
            Some(Error::Truncated)
        );
    }

    #[test]
    fn param_view_setters_write_the_header() {
        let mut b = [0xa5u8; 8];
        let mut p = Param::new_unchecked(&mut b[..]);
        p.set_param_type(ParamType::StateCookie);
        p.set_param_length(6);
        p.value_mut().copy_from_slice(&[1, 2]);
        assert_eq!(p.value(), &[1, 2]);
        assert_eq!(b, [0, 7, 0, 6, 1, 2, 0xa5, 0xa5]);
    }

    #[test]
    fn param_list_padding_rule() {
        // A chunk whose length includes the last parameter's padding, or not: both accepted.
        let b = [0x80, 0x08, 0, 5, 0xc0, 0, 0, 0];
        assert_eq!(List::<ParamRepr<'_>>::parse(&b).map(|l| l.len()), Ok(1));
        assert_eq!(
            List::<ParamRepr<'_>>::parse(&b[..5]).map(|l| l.len()),
            Ok(1)
        );
        // Ending inside the padding is neither form.
        assert_eq!(
            List::<ParamRepr<'_>>::parse(&b[..6]),
            Err(Error::BadPadding)
        );
        // 1 to 3 bytes after a whole parameter cannot be a parameter header.
        assert_eq!(
            List::<ParamRepr<'_>>::parse(&[0xc0, 0, 0, 4, 0]),
            Err(Error::Truncated)
        );
        // An inner parameter with a bad length fails the whole list.
        assert_eq!(
            List::<ParamRepr<'_>>::parse(&[0xc0, 0, 0, 2]),
            Err(Error::BadLength)
        );
    }

    /// Owned description of a parameter, so proptest can generate what a `ParamRepr` borrows.
    #[derive(Debug, Clone)]
    pub(crate) enum ParamSpec {
        HeartbeatInfo(Vec<u8>),
        Ipv4([u8; 4]),
        Ipv6([u8; 16]),
        StateCookie(Vec<u8>),
        Unrecognized(Vec<u8>),
        CookiePreservative(u32),
        AddressTypes(Vec<ParamType>),
        Extensions(Vec<u8>),
        ForwardTsn,
        Adaptation(u32),
        Unknown(u16, Vec<u8>),
    }

    impl ParamSpec {
        pub(crate) fn repr(&self) -> ParamRepr<'_> {
            match self {
                ParamSpec::HeartbeatInfo(v) => ParamRepr::HeartbeatInfo(v),
                ParamSpec::Ipv4(a) => ParamRepr::Ipv4Address((*a).into()),
                ParamSpec::Ipv6(a) => ParamRepr::Ipv6Address((*a).into()),
                ParamSpec::StateCookie(v) => ParamRepr::StateCookie(v),
                ParamSpec::Unrecognized(v) => ParamRepr::UnrecognizedParameter(v),
                ParamSpec::CookiePreservative(n) => ParamRepr::CookiePreservative(*n),
                ParamSpec::AddressTypes(t) => ParamRepr::SupportedAddressTypes(List::new(t)),
                ParamSpec::Extensions(v) => ParamRepr::SupportedExtensions(v),
                ParamSpec::ForwardTsn => ParamRepr::ForwardTsnSupported,
                ParamSpec::Adaptation(n) => ParamRepr::AdaptationLayerIndication(*n),
                ParamSpec::Unknown(t, v) => ParamRepr::Unknown {
                    param_type: *t,
                    value: v,
                },
            }
        }
    }

    pub(crate) fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 0..=max)
    }

    /// A parameter type code that parses as `Unknown`.
    fn unknown_param_type() -> impl Strategy<Value = u16> {
        any::<u16>().prop_filter("known type", |t| {
            matches!(ParamType::from(*t), ParamType::Unknown(_))
        })
    }

    pub(crate) fn param_spec() -> impl Strategy<Value = ParamSpec> {
        prop_oneof![
            bytes(40).prop_map(ParamSpec::HeartbeatInfo),
            any::<[u8; 4]>().prop_map(ParamSpec::Ipv4),
            any::<[u8; 16]>().prop_map(ParamSpec::Ipv6),
            bytes(64).prop_map(ParamSpec::StateCookie),
            bytes(20).prop_map(ParamSpec::Unrecognized),
            any::<u32>().prop_map(ParamSpec::CookiePreservative),
            proptest::collection::vec(any::<u16>().prop_map(ParamType::from), 0..5)
                .prop_map(ParamSpec::AddressTypes),
            bytes(9).prop_map(ParamSpec::Extensions),
            Just(ParamSpec::ForwardTsn),
            any::<u32>().prop_map(ParamSpec::Adaptation),
            (unknown_param_type(), bytes(20)).prop_map(|(t, v)| ParamSpec::Unknown(t, v)),
        ]
    }

    proptest! {
        #[test]
        fn param_repr_round_trips(spec in param_spec()) {
            let repr = spec.repr();
            let buf = emitted(&repr);
            prop_assert_eq!(buf.len(), repr.buffer_len());
            prop_assert!(buf[repr.param_len()..].iter().all(|&b| b == 0), "padding is zero");
            prop_assert_eq!(parse(&buf), Ok(repr));
            prop_assert_eq!(parse(&buf[..repr.param_len()]), Ok(repr));
        }

        #[test]
        fn param_list_round_trips(specs in proptest::collection::vec(param_spec(), 0..6)) {
            let reprs: Vec<ParamRepr<'_>> = specs.iter().map(ParamSpec::repr).collect();
            let list = List::new(&reprs);
            let mut buf = vec![0xa5; list.buffer_len()];
            list.emit(&mut buf);
            prop_assert_eq!(List::parse(&buf), Ok(list));
            prop_assert_eq!(List::parse(&buf[..list.wire_len()]), Ok(list));
        }
    }
}
