//! The control chunks with small bodies: HEARTBEAT, HEARTBEAT ACK, ABORT, SHUTDOWN, ERROR,
//! COOKIE ECHO, SHUTDOWN COMPLETE (RFC 9260 §3.3.5 to §3.3.13). SHUTDOWN ACK and COOKIE ACK
//! have no value and are unit variants of [`super::ChunkRepr`].

use super::cause::CauseRepr;
use super::chunk::{emit_header, expect_type, Chunk, ChunkType};
use super::list::List;
use super::param::{Param, ParamRepr, ParamType};
use super::{
    padded, read_u32, split_tlv, write_u32, Error, Result, CHUNK_HEADER_LEN, PARAM_HEADER_LEN,
};

/// The T bit of ABORT and SHUTDOWN COMPLETE (RFC 9260 §3.3.7, §3.3.13): set when the sender
/// reflected the verification tag of the packet it answers instead of using its peer's tag.
const T_BIT: u8 = 0x01;

/// Parses the body of HEARTBEAT and HEARTBEAT ACK: a Heartbeat Info parameter first (RFC 9260
/// §3.3.5, §3.3.6), then any other TLVs, which the ACK copies unchanged (§8.3: "the
/// Heartbeat Information TLV, together with any other received TLVs"). Returns the Heartbeat
/// Info's value, the sender-specific information, and the bytes of the TLVs after it.
fn parse_heartbeat_info<'a, T: AsRef<[u8]> + ?Sized>(
    chunk: &Chunk<&'a T>,
) -> Result<(&'a [u8], &'a [u8])> {
    let value = chunk.value_ref();
    if value.len() < PARAM_HEADER_LEN {
        // The chunk is shorter than a chunk header plus a parameter header.
        return Err(Error::BadLength);
    }
    let (param, used) = split_tlv(value, PARAM_HEADER_LEN)?;
    let param = Param::new_checked(param)?;
    if param.param_type() != ParamType::HeartbeatInfo {
        // Another parameter first: not a HEARTBEAT body.
        return Err(Error::Malformed);
    }
    let extra = &value[used..];
    let mut rest = extra;
    while !rest.is_empty() {
        let (_, n) = split_tlv(rest, PARAM_HEADER_LEN)?;
        rest = &rest[n..];
    }
    Ok((param.value_ref(), extra))
}

fn heartbeat_chunk_len(info: &[u8], extra: &[u8]) -> usize {
    if extra.is_empty() {
        CHUNK_HEADER_LEN + PARAM_HEADER_LEN + info.len()
    } else {
        CHUNK_HEADER_LEN + padded(PARAM_HEADER_LEN + info.len()) + extra.len()
    }
}

fn emit_heartbeat(t: ChunkType, info: &[u8], extra: &[u8], buf: &mut [u8]) {
    let value_len = heartbeat_chunk_len(info, extra) - CHUNK_HEADER_LEN;
    let value = emit_header(buf, t, 0, value_len);
    let first = padded(PARAM_HEADER_LEN + info.len());
    if extra.is_empty() {
        ParamRepr::HeartbeatInfo(info).emit(value);
    } else {
        ParamRepr::HeartbeatInfo(info).emit(&mut value[..first]);
        value[first..first + extra.len()].copy_from_slice(extra);
    }
}

/// A HEARTBEAT chunk (RFC 9260 §3.3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatRepr<'a> {
    /// The value of the Heartbeat Info parameter, opaque to the receiver.
    pub info: &'a [u8],
    /// TLVs after the Heartbeat Info, as received (none in ours).
    pub extra: &'a [u8],
}

impl<'a> HeartbeatRepr<'a> {
    /// Parses a HEARTBEAT: `BadLength` without room for a parameter, `Malformed` unless the
    /// value starts with a Heartbeat Info parameter; parameter length errors as usual.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(chunk: &Chunk<&'a T>) -> Result<Self> {
        expect_type(chunk, ChunkType::Heartbeat)?;
        let (info, extra) = parse_heartbeat_info(chunk)?;
        Ok(HeartbeatRepr { info, extra })
    }

    /// The HEARTBEAT ACK that answers this HEARTBEAT: the same TLVs (§3.3.6, §8.3).
    pub fn ack(&self) -> HeartbeatAckRepr<'a> {
        HeartbeatAckRepr {
            info: self.info,
            extra: self.extra,
        }
    }

    pub fn chunk_len(&self) -> usize {
        heartbeat_chunk_len(self.info, self.extra)
    }

    pub fn buffer_len(&self) -> usize {
        padded(self.chunk_len())
    }

    /// Writes the chunk and its zero padding into `buf[..self.buffer_len()]`.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`, or the chunk is longer than 65535 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        emit_heartbeat(ChunkType::Heartbeat, self.info, self.extra, buf);
    }
}

/// A HEARTBEAT ACK chunk (RFC 9260 §3.3.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatAckRepr<'a> {
    /// The Heartbeat Info value copied from the HEARTBEAT.
    pub info: &'a [u8],
    /// The TLVs after it, copied from the HEARTBEAT.
    pub extra: &'a [u8],
}

impl<'a> HeartbeatAckRepr<'a> {
    /// Parses a HEARTBEAT ACK with the rules of [`HeartbeatRepr::parse`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(chunk: &Chunk<&'a T>) -> Result<Self> {
        expect_type(chunk, ChunkType::HeartbeatAck)?;
        let (info, extra) = parse_heartbeat_info(chunk)?;
        Ok(HeartbeatAckRepr { info, extra })
    }

    pub fn chunk_len(&self) -> usize {
        heartbeat_chunk_len(self.info, self.extra)
    }

    pub fn buffer_len(&self) -> usize {
        padded(self.chunk_len())
    }

    /// Writes the chunk and its zero padding into `buf[..self.buffer_len()]`.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`, or the chunk is longer than 65535 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        emit_heartbeat(ChunkType::HeartbeatAck, self.info, self.extra, buf);
    }
}

/// An ABORT chunk (RFC 9260 §3.3.7): zero or more error causes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortRepr<'a> {
    /// T bit: the verification tag is reflected (§8.5.1).
    pub t_bit: bool,
    pub causes: List<'a, CauseRepr<'a>>,
}

impl<'a> AbortRepr<'a> {
    /// Parses an ABORT. Its causes must walk as TLVs (lengths within the chunk, padding as
    /// usual); a cause whose information does not fit its code (a known cause of another
    /// length than its own) is kept as [`CauseRepr::Unparsed`], not refused with the ABORT:
    /// once its tag is checked the receiver "MUST remove the association" (RFC 9260 §9.1),
    /// and the causes only say why. Refusing the chunk for one left the association up (an
    /// independent review, session 60).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(chunk: &Chunk<&'a T>) -> Result<Self> {
        expect_type(chunk, ChunkType::Abort)?;
        Ok(AbortRepr {
            t_bit: chunk.flags() & T_BIT != 0,
            causes: List::parse(chunk.value_ref())?,
        })
    }

    /// The chunk length field; the last cause's padding is not counted (RFC 9260 §3.2).
    pub fn chunk_len(&self) -> usize {
        CHUNK_HEADER_LEN + self.causes.wire_len()
    }

    pub fn buffer_len(&self) -> usize {
        padded(self.chunk_len())
    }

    /// Writes the chunk and its zero padding into `buf[..self.buffer_len()]`.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`, or the chunk is longer than 65535 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let flags = if self.t_bit { T_BIT } else { 0 };
        let value = emit_header(buf, ChunkType::Abort, flags, self.causes.wire_len());
        self.causes.emit(value);
    }
}

/// A SHUTDOWN chunk (RFC 9260 §3.3.8), length 8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShutdownRepr {
    /// The last TSN received in sequence.
    pub cum_tsn_ack: u32,
}

impl ShutdownRepr {
    /// Parses a SHUTDOWN: any length but 8 is `BadLength`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(chunk: &Chunk<&T>) -> Result<Self> {
        expect_type(chunk, ChunkType::Shutdown)?;
        match chunk.value() {
            v if v.len() == 4 => Ok(ShutdownRepr {
                cum_tsn_ack: read_u32(v),
            }),
            _ => Err(Error::BadLength),
        }
    }

    pub const fn chunk_len(&self) -> usize {
        CHUNK_HEADER_LEN + 4
    }

    pub const fn buffer_len(&self) -> usize {
        self.chunk_len()
    }

    /// Writes the chunk into `buf[..8]`.
    ///
    /// # Panics
    /// If `buf` is shorter than 8 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        write_u32(
            emit_header(buf, ChunkType::Shutdown, 0, 4),
            self.cum_tsn_ack,
        );
    }
}

/// An Operation Error (ERROR) chunk (RFC 9260 §3.3.10): one or more error causes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorChunkRepr<'a> {
    /// Not empty in a parsed Repr.
    pub causes: List<'a, CauseRepr<'a>>,
}

impl<'a> ErrorChunkRepr<'a> {
    /// Parses an ERROR; without any cause it is `BadLength` (the chunk is shorter than a
    /// chunk header and one cause header). Its causes must walk as TLVs, as an ABORT's; one
    /// whose information does not fit its code is kept as [`CauseRepr::Unparsed`], so the
    /// ERROR and the chunks after it in its packet stand (RFC 9260 §3.3.10). Kept raw, not
    /// dropped: an ERROR emptied of its causes would emit as no ERROR at all (it needs one),
    /// and the `sctp_packet` fuzz target's emit/parse round trip caught that (session 60).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(chunk: &Chunk<&'a T>) -> Result<Self> {
        expect_type(chunk, ChunkType::Error)?;
        let value = chunk.value_ref();
        if value.is_empty() {
            return Err(Error::BadLength);
        }
        Ok(ErrorChunkRepr {
            causes: List::parse(value)?,
        })
    }

    /// The chunk length field; the last cause's padding is not counted (RFC 9260 §3.2).
    pub fn chunk_len(&self) -> usize {
        CHUNK_HEADER_LEN + self.causes.wire_len()
    }

    pub fn buffer_len(&self) -> usize {
        padded(self.chunk_len())
    }

    /// Writes the chunk and its zero padding into `buf[..self.buffer_len()]`.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`, or the chunk is longer than 65535 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let value = emit_header(buf, ChunkType::Error, 0, self.causes.wire_len());
        self.causes.emit(value);
    }
}

/// A COOKIE ECHO chunk (RFC 9260 §3.3.11): the State Cookie from the INIT ACK, as is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CookieEchoRepr<'a> {
    pub cookie: &'a [u8],
}

impl<'a> CookieEchoRepr<'a> {
    /// Parses a COOKIE ECHO; the cookie is whatever the chunk length covers (its padding is the
    /// chunk padding).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(chunk: &Chunk<&'a T>) -> Result<Self> {
        expect_type(chunk, ChunkType::CookieEcho)?;
        Ok(CookieEchoRepr {
            cookie: chunk.value_ref(),
        })
    }

    pub fn chunk_len(&self) -> usize {
        CHUNK_HEADER_LEN + self.cookie.len()
    }

    pub fn buffer_len(&self) -> usize {
        padded(self.chunk_len())
    }

    /// Writes the chunk and its zero padding into `buf[..self.buffer_len()]`.
    ///
    /// # Panics
    /// If `buf` is shorter than `buffer_len()`, or the chunk is longer than 65535 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let value = emit_header(buf, ChunkType::CookieEcho, 0, self.cookie.len());
        value[..self.cookie.len()].copy_from_slice(self.cookie);
    }
}

/// A SHUTDOWN COMPLETE chunk (RFC 9260 §3.3.13), length 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShutdownCompleteRepr {
    /// T bit: the verification tag is reflected (§8.5.1).
    pub t_bit: bool,
}

impl ShutdownCompleteRepr {
    /// Parses a SHUTDOWN COMPLETE: any length but 4 is `BadLength`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(chunk: &Chunk<&T>) -> Result<Self> {
        expect_type(chunk, ChunkType::ShutdownComplete)?;
        if !chunk.value().is_empty() {
            return Err(Error::BadLength);
        }
        Ok(ShutdownCompleteRepr {
            t_bit: chunk.flags() & T_BIT != 0,
        })
    }

    pub const fn chunk_len(&self) -> usize {
        CHUNK_HEADER_LEN
    }

    pub const fn buffer_len(&self) -> usize {
        CHUNK_HEADER_LEN
    }

    /// Writes the chunk into `buf[..4]`.
    ///
    /// # Panics
    /// If `buf` is shorter than 4 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let flags = if self.t_bit { T_BIT } else { 0 };
        emit_header(buf, ChunkType::ShutdownComplete, flags, 0);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::super::cause::CauseCode;
    use super::super::chunk::tests::{emitted, parse};
    use super::super::chunk::ChunkRepr;
    use super::*;

    /// abort.pcap frame 11: User-Initiated Abort "DDP stream terminated", chunk length 29.
    const ABORT: [u8; 32] = [
        0x06, 0x00, 0x00, 0x1d, // ABORT, T=0, length 29
        0x00, 0x0c, 0x00, 0x19, // User-Initiated Abort, length 25
        b'D', b'D', b'P', b' ', b's', b't', b'r', b'e', b'a', b'm', b' ', b't', b'e', b'r', b'm',
        b'i', b'n', b'a', b't', b'e', b'd', 0x00, 0x00, 0x00,
    ];

    const REASON: CauseRepr<'static> = CauseRepr::UserInitiatedAbort {
        reason: b"DDP stream terminated",
    };

    #[test]
    fn abort_with_user_initiated_abort_from_usrsctp() {
        let causes = [REASON];
        let r = AbortRepr {
            t_bit: false,
            causes: List::new(&causes),
        };
        assert_eq!((r.chunk_len(), r.buffer_len()), (29, 32));
        assert_eq!(parse(&ABORT), Ok(ChunkRepr::Abort(r)));
        assert_eq!(emitted(&ChunkRepr::Abort(r)), ABORT);
    }

    #[test]
    fn abort_t_bit_and_no_causes() {
        let r = AbortRepr {
            t_bit: true,
            causes: List::empty(),
        };
        let b = emitted(&ChunkRepr::Abort(r));
        assert_eq!(b, [6, 1, 0, 4]);
        assert_eq!(parse(&b), Ok(ChunkRepr::Abort(r)));
    }

    #[test]
    fn abort_cause_errors_fail_the_chunk() {
        // Cause length running past the chunk.
        let mut b = ABORT;
        b[7] = 0x1a;
        assert_eq!(parse(&b), Err(Error::Truncated));
        // Cause length below 4.
        let mut b = ABORT;
        b[7] = 3;
        assert_eq!(parse(&b), Err(Error::BadLength));
        // Chunk length ending inside the cause's padding.
        let mut b = ABORT;
        b[3] = 30;
        assert_eq!(parse(&b), Err(Error::BadPadding));
        // Chunk length including the cause's padding: accepted.
        let mut b = ABORT;
        b[3] = 32;
        assert_eq!(parse(&b), parse(&ABORT));
        // 1 to 3 bytes that cannot hold a cause header.
        assert_eq!(parse(&[6, 0, 0, 6, 0, 12]), Err(Error::Truncated));
    }

    #[test]
    fn error_chunk_with_causes() {
        let causes = [
            CauseRepr::NoUserData { tsn: 9 },
            CauseRepr::InvalidStreamIdentifier { stream_id: 3 },
        ];
        let r = ErrorChunkRepr {
            causes: List::new(&causes),
        };
        let b = emitted(&ChunkRepr::Error(r));
        assert_eq!(
            b,
            [9, 0, 0, 20, 0, 9, 0, 8, 0, 0, 0, 9, 0, 1, 0, 8, 0, 3, 0, 0]
        );
        assert_eq!(parse(&b), Ok(ChunkRepr::Error(r)));
        let ChunkRepr::Error(e) = parse(&b).unwrap() else {
            unreachable!()
        };
        let codes: Vec<_> = e.causes.iter().map(|c| c.code()).collect();
        assert_eq!(
            codes,
            [CauseCode::NoUserData, CauseCode::InvalidStreamIdentifier]
        );
    }

    /// §3.3.10: an ERROR whose first cause does not fit its code (Out of Resource with 4
    /// bytes) is kept with that cause raw and the good cause after it parsed, and emits to the
    /// bytes it came from (the `sctp_packet` fuzz target's round trip).
    #[test]
    fn an_error_with_a_cause_of_unexpected_length_keeps_it_raw_and_round_trips_3_3_10() {
        let b = [
            9, 0, 0, 20, // ERROR, length 20
            0, 4, 0, 8, 1, 2, 3, 4, // Out of Resource, length 8 (its own is 4)
            0, 3, 0, 8, 0, 0, 0, 5, // Stale Cookie, staleness 5
        ];
        let ChunkRepr::Error(e) = parse(&b).unwrap() else {
            panic!("not an ERROR")
        };
        assert_eq!(
            e.causes.iter().collect::<Vec<_>>(),
            [
                CauseRepr::Unparsed {
                    code: 4,
                    info: &[1, 2, 3, 4]
                },
                CauseRepr::StaleCookie { staleness: 5 }
            ]
        );
        assert_eq!(emitted(&ChunkRepr::Error(e)), b);
        // Odd length: the padding is the chunk's, not counted by the chunk length (§3.2).
        let b = [9, 0, 0, 9, 0, 10, 0, 5, 0xee, 0, 0, 0];
        let r = parse(&b).unwrap();
        assert_eq!(emitted(&r), b);
        assert_eq!(parse(&emitted(&r)), Ok(r));
        // The same cause in an ABORT: kept, not emptied.
        let a = [6, 0, 0, 12, 0, 4, 0, 8, 1, 2, 3, 4];
        let ChunkRepr::Abort(abort) = parse(&a).unwrap() else {
            panic!("not an ABORT")
        };
        assert_eq!(abort.causes.len(), 1);
        assert_eq!(emitted(&ChunkRepr::Abort(abort)), a);
    }

    #[test]
    fn error_chunk_without_causes_is_bad_length() {
        assert_eq!(parse(&[9, 0, 0, 4]), Err(Error::BadLength));
    }

    #[test]
    fn heartbeat_round_trip_and_ack() {
        let info = [1, 2, 3, 4, 5, 6, 7];
        let r = HeartbeatRepr {
            info: &info,
            extra: &[],
        };
        let b = emitted(&ChunkRepr::Heartbeat(r));
        assert_eq!(b, [4, 0, 0, 15, 0, 1, 0, 11, 1, 2, 3, 4, 5, 6, 7, 0]);
        assert_eq!(parse(&b), Ok(ChunkRepr::Heartbeat(r)));
        let ack = emitted(&ChunkRepr::HeartbeatAck(r.ack()));
        assert_eq!(ack[0], 5);
        assert_eq!(ack[1..], b[1..]);
        assert_eq!(parse(&ack), Ok(ChunkRepr::HeartbeatAck(r.ack())));
    }

    #[test]
    fn heartbeat_length_including_info_padding_is_accepted() {
        let b = [4, 0, 0, 16, 0, 1, 0, 11, 1, 2, 3, 4, 5, 6, 7, 0];
        assert_eq!(
            parse(&b),
            Ok(ChunkRepr::Heartbeat(HeartbeatRepr {
                info: &[1, 2, 3, 4, 5, 6, 7],
                extra: &[]
            }))
        );
    }

    #[test]
    fn heartbeat_without_info_is_bad_length() {
        assert_eq!(parse(&[4, 0, 0, 4]), Err(Error::BadLength));
        assert_eq!(parse(&[4, 0, 0, 6, 0, 1]), Err(Error::BadLength));
        assert_eq!(parse(&[4, 0, 0, 8, 0, 1, 0, 3]), Err(Error::BadLength));
    }

    #[test]
    fn heartbeat_info_length_past_chunk_is_truncated() {
        assert_eq!(parse(&[4, 0, 0, 8, 0, 1, 0, 9]), Err(Error::Truncated));
    }

    /// The Heartbeat Info comes first; TLVs after it are kept, to be copied into the ACK
    /// unchanged (RFC 9260 §8.3: "together with any other received TLVs"); they must walk as
    /// TLVs.
    #[test]
    fn heartbeat_without_info_first_is_malformed_and_tlvs_after_it_are_kept() {
        assert_eq!(parse(&[4, 0, 0, 8, 0, 7, 0, 4]), Err(Error::Malformed));
        let b = [
            5, 0, 0, 19, 0, 1, 0, 5, 9, 0, 0, 0, 0x80, 7, 0, 7, 1, 2, 3, 0,
        ];
        let r = HeartbeatAckRepr {
            info: &[9],
            extra: &[0x80, 7, 0, 7, 1, 2, 3],
        };
        assert_eq!(parse(&b), Ok(ChunkRepr::HeartbeatAck(r)));
        assert_eq!(&emitted(&ChunkRepr::HeartbeatAck(r))[..], &b[..]);
        assert_eq!(
            parse(&[4, 0, 0, 12, 0, 1, 0, 4, 0, 9, 0, 9]),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn shutdown_is_eight_bytes() {
        let b = [7, 0, 0, 8, 0xce, 0x26, 0xfd, 0x64];
        let r = ShutdownRepr {
            cum_tsn_ack: 3458661732,
        };
        assert_eq!(parse(&b), Ok(ChunkRepr::Shutdown(r)));
        let mut buf = [0xa5; 8];
        r.emit(&mut buf);
        assert_eq!(buf, b);
        assert_eq!(parse(&[7, 0, 0, 4]), Err(Error::BadLength));
        assert_eq!(
            parse(&[7, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(Error::BadLength)
        );
    }

    #[test]
    fn shutdown_complete_t_bit() {
        assert_eq!(
            parse(&[14, 0, 0, 4]),
            Ok(ChunkRepr::ShutdownComplete(ShutdownCompleteRepr {
                t_bit: false
            }))
        );
        assert_eq!(
            parse(&[14, 1, 0, 4]),
            Ok(ChunkRepr::ShutdownComplete(ShutdownCompleteRepr {
                t_bit: true
            }))
        );
        let mut buf = [0xa5; 4];
        ShutdownCompleteRepr { t_bit: true }.emit(&mut buf);
        assert_eq!(buf, [14, 1, 0, 4]);
        assert_eq!(parse(&[14, 0, 0, 8, 0, 0, 0, 0]), Err(Error::BadLength));
    }

    #[test]
    fn cookie_echo_carries_the_cookie_as_is() {
        let r = CookieEchoRepr {
            cookie: &[9, 8, 7, 6, 5],
        };
        let b = emitted(&ChunkRepr::CookieEcho(r));
        assert_eq!(b, [10, 0, 0, 9, 9, 8, 7, 6, 5, 0, 0, 0]);
        assert_eq!(parse(&b), Ok(ChunkRepr::CookieEcho(r)));
        assert_eq!(parse(&b[..9]), Ok(ChunkRepr::CookieEcho(r)));
    }
}
