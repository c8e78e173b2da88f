//! DDP Stream Session Control: the user data of an SCTP DATA chunk with PPID 17
//! (RFC 5043 §5.2.3).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-------------------------------+-------------------------------+
//! |          DDP-SSN              |    Function Code              |
//! +-------------------------------+-------------------------------+
//! |            Private Data (Dependent on Function Code)          |
//! |                         ...                                   |
//! ```
//!
//! Function codes: Initiate 1, Accept 2, Reject 3, Terminate 4. Initiate, Accept and Reject
//! carry ULP Private Data, possibly empty; Terminate carries none; no message carries more than
//! 512 bytes. The parser enforces both limits ([`Error::Malformed`]), and the [`Repr`] cannot
//! express a violation: [`PrivateData`] is at most 512 bytes by construction, and
//! [`Message::Terminate`] has no room for any.
//!
//! Unknown function codes parse as [`Message::Unknown`] with their Private Data and emit
//! unchanged; whether such a message breaks the session (RFC 5043 §6.1) is for the session
//! state machine to decide, not the parser.

use super::{read_u16, MAX_PRIVATE_DATA_LEN, SESSION_CONTROL_HEADER_LEN};
use crate::wire::{Error, Result};

/// Byte ranges of a Stream Session Control message (RFC 5043 §5.2.3).
mod field {
    pub type Field = core::ops::Range<usize>;

    pub const DDP_SSN: Field = 0..2;
    pub const FUNCTION_CODE: Field = 2..4;
    pub const PRIVATE_DATA: usize = 4;
}

const _: () = assert!(field::PRIVATE_DATA == SESSION_CONTROL_HEADER_LEN);

/// The Function Code of a Stream Session Control message (RFC 5043 §5.2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FunctionCode {
    /// 0x001: DDP Stream Session Initiate.
    Initiate,
    /// 0x002: DDP Stream Session Accept.
    Accept,
    /// 0x003: DDP Stream Session Reject.
    Reject,
    /// 0x004: DDP Stream Session Terminate.
    Terminate,
    /// Any other value, kept so that it round-trips.
    Unknown(u16),
}

impl From<u16> for FunctionCode {
    fn from(value: u16) -> FunctionCode {
        match value {
            1 => FunctionCode::Initiate,
            2 => FunctionCode::Accept,
            3 => FunctionCode::Reject,
            4 => FunctionCode::Terminate,
            other => FunctionCode::Unknown(other),
        }
    }
}

impl From<FunctionCode> for u16 {
    fn from(value: FunctionCode) -> u16 {
        match value {
            FunctionCode::Initiate => 1,
            FunctionCode::Accept => 2,
            FunctionCode::Reject => 3,
            FunctionCode::Terminate => 4,
            FunctionCode::Unknown(other) => other,
        }
    }
}

/// A read/write view of a Stream Session Control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` without looking at it; accessors may panic if it is too short.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps `buffer` after [`Packet::check_len`]: no accessor can panic afterwards.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Packet::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// [`Error::Truncated`] unless the buffer holds the DDP-SSN and the Function Code. The
    /// Private Data limits are rules of the message, checked by [`Repr::parse`].
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < SESSION_CONTROL_HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// DDP-SSN (RFC 5043 §5.2.1): 0 for the first message of a session (§6.1).
    pub fn ddp_ssn(&self) -> u16 {
        read_u16(&self.buffer.as_ref()[field::DDP_SSN])
    }

    pub fn function_code(&self) -> FunctionCode {
        read_u16(&self.buffer.as_ref()[field::FUNCTION_CODE]).into()
    }

    /// Everything after the Function Code (its length is the chunk's).
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA..]
    }
}

/// Setters; each panics only if the buffer is shorter than 4 bytes, which `new_checked` rules out.
impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_ddp_ssn(&mut self, value: u16) {
        self.buffer.as_mut()[field::DDP_SSN].copy_from_slice(&value.to_be_bytes());
    }

    pub fn set_function_code(&mut self, value: FunctionCode) {
        self.buffer.as_mut()[field::FUNCTION_CODE].copy_from_slice(&u16::from(value).to_be_bytes());
    }

    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA..]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// ULP Private Data of at most 512 bytes (RFC 5043 §5.2.3), borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PrivateData<'a>(&'a [u8]);

impl<'a> PrivateData<'a> {
    /// Zero-length Private Data, allowed on Initiate, Accept and Reject ("MAY be of zero
    /// length", RFC 5043 §5.2.3).
    pub const EMPTY: PrivateData<'static> = PrivateData(&[]);

    /// [`Error::Malformed`] if `bytes` is longer than 512 ("Private Data length MUST NOT exceed
    /// 512 bytes in any message", RFC 5043 §5.2.3).
    pub const fn new(bytes: &'a [u8]) -> Result<PrivateData<'a>> {
        if bytes.len() > MAX_PRIVATE_DATA_LEN {
            Err(Error::Malformed)
        } else {
            Ok(PrivateData(bytes))
        }
    }

    pub const fn as_bytes(&self) -> &'a [u8] {
        self.0
    }

    pub const fn len(&self) -> usize {
        self.0.len()
    }

    pub const fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What a Stream Session Control message says, with the Private Data its function allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Message<'a> {
    /// The active side asks for a DDP Stream Session (RFC 5043 §6.2).
    Initiate(PrivateData<'a>),
    /// The passive side accepts it (RFC 5043 §6.2).
    Accept(PrivateData<'a>),
    /// The passive side's ULP rejects it (RFC 5043 §6.3).
    Reject(PrivateData<'a>),
    /// End of the session, or refusal without the ULP (RFC 5043 §6.2, §6.4): never with
    /// Private Data.
    Terminate,
    /// A function code RFC 5043 does not define, with whatever followed it (at most 512 bytes,
    /// the limit applies "in any message"). `code` is never 1 to 4 when parsed; built with one
    /// of those, the message emits as that function.
    Unknown {
        code: u16,
        private_data: PrivateData<'a>,
    },
}

impl<'a> Message<'a> {
    pub const fn function_code(&self) -> FunctionCode {
        match *self {
            Message::Initiate(_) => FunctionCode::Initiate,
            Message::Accept(_) => FunctionCode::Accept,
            Message::Reject(_) => FunctionCode::Reject,
            Message::Terminate => FunctionCode::Terminate,
            Message::Unknown { code, .. } => FunctionCode::Unknown(code),
        }
    }

    /// The Private Data, empty for Terminate.
    pub const fn private_data(&self) -> &'a [u8] {
        match *self {
            Message::Initiate(d) | Message::Accept(d) | Message::Reject(d) => d.as_bytes(),
            Message::Unknown { private_data, .. } => private_data.as_bytes(),
            Message::Terminate => &[],
        }
    }
}

/// A Stream Session Control message, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr<'a> {
    /// DDP-SSN (RFC 5043 §5.2.1).
    pub ddp_ssn: u16,
    pub message: Message<'a>,
}

impl<'a> Repr<'a> {
    /// Parses a Stream Session Control message.
    ///
    /// [`Error::Truncated`] if shorter than the DDP-SSN and Function Code; [`Error::Malformed`]
    /// for Private Data over 512 bytes or any Private Data on a Terminate (RFC 5043 §5.2.3).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Repr<'a>> {
        packet.check_len()?;
        let data: &'a [u8] = packet.buffer.as_ref();
        let private_data = PrivateData::new(&data[field::PRIVATE_DATA..])?;
        let message = match packet.function_code() {
            FunctionCode::Initiate => Message::Initiate(private_data),
            FunctionCode::Accept => Message::Accept(private_data),
            FunctionCode::Reject => Message::Reject(private_data),
            FunctionCode::Terminate if private_data.is_empty() => Message::Terminate,
            FunctionCode::Terminate => return Err(Error::Malformed),
            FunctionCode::Unknown(code) => Message::Unknown { code, private_data },
        };
        Ok(Repr {
            ddp_ssn: packet.ddp_ssn(),
            message,
        })
    }

    /// The whole message: 4 bytes plus the Private Data.
    pub const fn buffer_len(&self) -> usize {
        SESSION_CONTROL_HEADER_LEN + self.message.private_data().len()
    }

    /// Writes the message into `packet`, whose buffer must hold at least [`Repr::buffer_len`]
    /// bytes ([`Error::Truncated`] otherwise, and nothing is written). Bytes past `buffer_len`
    /// are left as they are.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        let private_data = self.message.private_data();
        let buf = packet.buffer.as_mut();
        let Some(dst) = buf.get_mut(field::PRIVATE_DATA..self.buffer_len()) else {
            return Err(Error::Truncated);
        };
        dst.copy_from_slice(private_data);
        packet.set_ddp_ssn(self.ddp_ssn);
        packet.set_function_code(self.message.function_code());
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `assoc-ddp-default.pcap` frame 5: DDP-SSN 0, Initiate, Private Data "hello".
    const INITIATE: [u8; 9] = [0x00, 0x00, 0x00, 0x01, b'h', b'e', b'l', b'l', b'o'];
    /// `assoc-ddp-default.pcap` frame 7: DDP-SSN 0, Accept, Private Data "ok".
    const ACCEPT: [u8; 6] = [0x00, 0x00, 0x00, 0x02, b'o', b'k'];
    /// `assoc-ddp-default.pcap` frame 13: DDP-SSN 5, Terminate.
    const TERMINATE: [u8; 4] = [0x00, 0x05, 0x00, 0x04];

    fn parse(bytes: &[u8]) -> Result<Repr<'_>> {
        Repr::parse(&Packet::new_checked(bytes)?)
    }

    #[test]
    fn function_codes_are_those_of_rfc5043_5_2_3() {
        for (v, f) in [
            (1u16, FunctionCode::Initiate),
            (2, FunctionCode::Accept),
            (3, FunctionCode::Reject),
            (4, FunctionCode::Terminate),
            (0, FunctionCode::Unknown(0)),
            (5, FunctionCode::Unknown(5)),
            (0xffff, FunctionCode::Unknown(0xffff)),
        ] {
            assert_eq!(FunctionCode::from(v), f);
            assert_eq!(u16::from(f), v);
        }
    }

    #[test]
    fn view_reads_initiate_fixture() {
        let p = Packet::new_checked(&INITIATE[..]).unwrap();
        assert_eq!(p.ddp_ssn(), 0);
        assert_eq!(p.function_code(), FunctionCode::Initiate);
        assert_eq!(p.private_data(), b"hello");
    }

    #[test]
    fn parse_initiate_accept_terminate_fixtures() {
        let hello = PrivateData::new(b"hello").unwrap();
        let ok = PrivateData::new(b"ok").unwrap();
        assert_eq!(
            parse(&INITIATE),
            Ok(Repr {
                ddp_ssn: 0,
                message: Message::Initiate(hello)
            })
        );
        assert_eq!(
            parse(&ACCEPT),
            Ok(Repr {
                ddp_ssn: 0,
                message: Message::Accept(ok)
            })
        );
        assert_eq!(
            parse(&TERMINATE),
            Ok(Repr {
                ddp_ssn: 5,
                message: Message::Terminate
            })
        );
    }

    #[test]
    fn rfc5043_5_2_3_zero_length_private_data_is_allowed_on_initiate_accept_reject() {
        for code in 1..=3u8 {
            let bytes = [0, 9, 0, code];
            let r = parse(&bytes).unwrap();
            assert_eq!(
                r.message.function_code(),
                FunctionCode::from(u16::from(code))
            );
            assert!(r.message.private_data().is_empty());
        }
    }

    #[test]
    fn parse_reject_with_private_data() {
        let r = parse(&[0x00, 0x01, 0x00, 0x03, b'n', b'o']).unwrap();
        assert_eq!(r.message, Message::Reject(PrivateData::new(b"no").unwrap()));
    }

    #[test]
    fn unknown_function_code_round_trips_with_its_private_data() {
        let bytes = [0x12, 0x34, 0xab, 0xcd, 1, 2, 3];
        let r = parse(&bytes).unwrap();
        assert_eq!(
            r.message,
            Message::Unknown {
                code: 0xabcd,
                private_data: PrivateData::new(&[1, 2, 3]).unwrap()
            }
        );
        let mut buf = [0xa5u8; 7];
        r.emit(&mut Packet::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf, bytes);
    }

    #[test]
    fn rfc5043_5_2_3_session_control_message_shorter_than_4_bytes_is_truncated() {
        for len in 0..4 {
            assert_eq!(
                Packet::new_checked(&INITIATE[..len]).unwrap_err(),
                Error::Truncated
            );
            assert_eq!(
                Repr::parse(&Packet::new_unchecked(&INITIATE[..len])),
                Err(Error::Truncated)
            );
        }
    }

    #[test]
    fn rfc5043_5_2_3_private_data_over_512_bytes_is_malformed() {
        let mut b = [0u8; 4 + 513];
        for code in [1u8, 2, 3, 9] {
            b[3] = code;
            assert_eq!(parse(&b), Err(Error::Malformed), "function code {code}");
            // 512 is the limit itself, not beyond it.
            assert!(parse(&b[..4 + 512]).is_ok(), "function code {code}");
        }
        assert_eq!(PrivateData::new(&[0; 513]), Err(Error::Malformed));
        assert_eq!(PrivateData::new(&[0; 512]).map(|d| d.len()), Ok(512));
    }

    #[test]
    fn rfc5043_5_2_3_private_data_on_terminate_is_malformed() {
        assert_eq!(parse(&[0, 5, 0, 4, 0]), Err(Error::Malformed));
        assert_eq!(
            parse(&[0, 5, 0, 4, b'b', b'y', b'e']),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn emit_initiate_writes_every_byte() {
        let r = Repr {
            ddp_ssn: 0,
            message: Message::Initiate(PrivateData::new(b"hello").unwrap()),
        };
        assert_eq!(r.buffer_len(), 9);
        let mut buf = [0xa5u8; 9];
        r.emit(&mut Packet::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf, INITIATE);
    }

    #[test]
    fn emit_terminate_writes_every_byte() {
        let r = Repr {
            ddp_ssn: 5,
            message: Message::Terminate,
        };
        assert_eq!(r.buffer_len(), 4);
        let mut buf = [0xa5u8; 4];
        r.emit(&mut Packet::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf, TERMINATE);
    }

    #[test]
    fn emit_into_a_short_buffer_is_truncated_and_writes_nothing() {
        let r = Repr {
            ddp_ssn: 0,
            message: Message::Accept(PrivateData::new(b"ok").unwrap()),
        };
        let mut buf = [0xa5u8; 5];
        assert_eq!(
            r.emit(&mut Packet::new_unchecked(&mut buf[..])),
            Err(Error::Truncated)
        );
        assert_eq!(buf, [0xa5u8; 5]);
        let mut buf = [0xa5u8; 3];
        let r = Repr {
            ddp_ssn: 0,
            message: Message::Terminate,
        };
        assert_eq!(
            r.emit(&mut Packet::new_unchecked(&mut buf[..])),
            Err(Error::Truncated)
        );
        assert_eq!(buf, [0xa5u8; 3]);
    }

    #[test]
    fn setters_write_what_getters_read() {
        let mut buf = [0u8; 6];
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set_ddp_ssn(0x0102);
        p.set_function_code(FunctionCode::Unknown(0x0304));
        p.private_data_mut().copy_from_slice(&[5, 6]);
        assert_eq!(p.ddp_ssn(), 0x0102);
        assert_eq!(p.function_code(), FunctionCode::Unknown(0x0304));
        assert_eq!(p.private_data(), &[5, 6]);
        assert_eq!(p.into_inner(), &[1, 2, 3, 4, 5, 6]);
    }

    fn arb_message(data: &[u8], code: u16, pick: u8) -> Message<'_> {
        let d = PrivateData::new(data).unwrap();
        match pick % 5 {
            0 => Message::Initiate(d),
            1 => Message::Accept(d),
            2 => Message::Reject(d),
            3 => Message::Terminate,
            _ => Message::Unknown {
                code,
                private_data: d,
            },
        }
    }

    proptest! {
        #[test]
        fn repr_emit_parse_round_trips(
            ddp_ssn in any::<u16>(),
            data in proptest::collection::vec(any::<u8>(), 0..=MAX_PRIVATE_DATA_LEN),
            code in prop_oneof![Just(0u16), 5u16..=u16::MAX],
            pick in any::<u8>(),
        ) {
            let repr = Repr { ddp_ssn, message: arb_message(&data, code, pick) };
            let mut buf = vec![0xa5u8; repr.buffer_len()];
            repr.emit(&mut Packet::new_unchecked(&mut buf[..])).unwrap();
            prop_assert_eq!(parse(&buf), Ok(repr));
        }

        #[test]
        fn any_bytes_parse_or_fail_without_panicking(
            bytes in proptest::collection::vec(any::<u8>(), 0..600),
        ) {
            if let Ok(r) = parse(&bytes) {
                prop_assert_eq!(r.buffer_len(), bytes.len());
            }
        }
    }
}
