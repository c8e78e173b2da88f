//! DDP error numbers (RFC 5041 §7.2): a 4-bit Error Type and an 8-bit Error Code, reported to the
//! ULP and carried on the wire in RDMAP's Terminate message (RFC 5040 §8). One enum, so a code
//! can only be one the RFC defines.

use core::fmt;

/// Every error number of RFC 5041 §7.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DdpError {
    /// 0x0 / 0x00: Local Catastrophic.
    LocalCatastrophic,
    /// 0x1 / 0x00: Invalid STag.
    InvalidStag,
    /// 0x1 / 0x01: Base or bounds violation.
    BaseOrBounds,
    /// 0x1 / 0x02: STag not associated with DDP Stream.
    StagNotAssociated,
    /// 0x1 / 0x03: TO wrap.
    ToWrap,
    /// 0x1 / 0x04: Invalid DDP version (tagged).
    TaggedVersion,
    /// 0x2 / 0x01: Invalid QN.
    InvalidQn,
    /// 0x2 / 0x02: Invalid MSN - no buffer available.
    NoBuffer,
    /// 0x2 / 0x03: Invalid MSN - MSN range is not valid.
    MsnRange,
    /// 0x2 / 0x04: Invalid MO.
    InvalidMo,
    /// 0x2 / 0x05: DDP Message too long for available buffer.
    TooLong,
    /// 0x2 / 0x06: Invalid DDP version (untagged).
    UntaggedVersion,
}

impl DdpError {
    /// Every error, in the order of §7.2's table ([`DdpError::index`]).
    pub const ALL: [DdpError; 12] = [
        DdpError::LocalCatastrophic,
        DdpError::InvalidStag,
        DdpError::BaseOrBounds,
        DdpError::StagNotAssociated,
        DdpError::ToWrap,
        DdpError::TaggedVersion,
        DdpError::InvalidQn,
        DdpError::NoBuffer,
        DdpError::MsnRange,
        DdpError::InvalidMo,
        DdpError::TooLong,
        DdpError::UntaggedVersion,
    ];

    /// The position in [`DdpError::ALL`]: an index for counters by error.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A name for counters and metrics (lower case, `_`-separated).
    pub const fn name(self) -> &'static str {
        match self {
            DdpError::LocalCatastrophic => "local_catastrophic",
            DdpError::InvalidStag => "invalid_stag",
            DdpError::BaseOrBounds => "base_or_bounds",
            DdpError::StagNotAssociated => "stag_not_associated",
            DdpError::ToWrap => "to_wrap",
            DdpError::TaggedVersion => "tagged_version",
            DdpError::InvalidQn => "invalid_qn",
            DdpError::NoBuffer => "invalid_msn_no_buffer",
            DdpError::MsnRange => "invalid_msn_range",
            DdpError::InvalidMo => "invalid_mo",
            DdpError::TooLong => "too_long",
            DdpError::UntaggedVersion => "untagged_version",
        }
    }

    /// The 4-bit Error Type.
    pub const fn error_type(self) -> u8 {
        match self {
            DdpError::LocalCatastrophic => 0x0,
            DdpError::InvalidStag
            | DdpError::BaseOrBounds
            | DdpError::StagNotAssociated
            | DdpError::ToWrap
            | DdpError::TaggedVersion => 0x1,
            _ => 0x2,
        }
    }

    /// The 8-bit Error Code.
    pub const fn code(self) -> u8 {
        match self {
            DdpError::LocalCatastrophic | DdpError::InvalidStag => 0x00,
            DdpError::BaseOrBounds => 0x01,
            DdpError::StagNotAssociated => 0x02,
            DdpError::ToWrap => 0x03,
            DdpError::TaggedVersion => 0x04,
            DdpError::InvalidQn => 0x01,
            DdpError::NoBuffer => 0x02,
            DdpError::MsnRange => 0x03,
            DdpError::InvalidMo => 0x04,
            DdpError::TooLong => 0x05,
            DdpError::UntaggedVersion => 0x06,
        }
    }

    /// Type and code as one 12-bit number, type in the upper 4 bits.
    pub const fn number(self) -> u16 {
        (self.error_type() as u16) << 8 | self.code() as u16
    }

    /// The error a type and code stand for, if RFC 5041 defines it (type 0x3 is the LLP's).
    pub const fn from_number(error_type: u8, code: u8) -> Option<DdpError> {
        Some(match (error_type, code) {
            (0x0, 0x00) => DdpError::LocalCatastrophic,
            (0x1, 0x00) => DdpError::InvalidStag,
            (0x1, 0x01) => DdpError::BaseOrBounds,
            (0x1, 0x02) => DdpError::StagNotAssociated,
            (0x1, 0x03) => DdpError::ToWrap,
            (0x1, 0x04) => DdpError::TaggedVersion,
            (0x2, 0x01) => DdpError::InvalidQn,
            (0x2, 0x02) => DdpError::NoBuffer,
            (0x2, 0x03) => DdpError::MsnRange,
            (0x2, 0x04) => DdpError::InvalidMo,
            (0x2, 0x05) => DdpError::TooLong,
            (0x2, 0x06) => DdpError::UntaggedVersion,
            _ => return None,
        })
    }
}

impl fmt::Display for DdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self {
            DdpError::LocalCatastrophic => "local catastrophic",
            DdpError::InvalidStag => "invalid STag",
            DdpError::BaseOrBounds => "base or bounds violation",
            DdpError::StagNotAssociated => "STag not associated with DDP stream",
            DdpError::ToWrap => "TO wrap",
            DdpError::TaggedVersion | DdpError::UntaggedVersion => "invalid DDP version",
            DdpError::InvalidQn => "invalid QN",
            DdpError::NoBuffer => "invalid MSN - no buffer available",
            DdpError::MsnRange => "invalid MSN - MSN range is not valid",
            DdpError::InvalidMo => "invalid MO",
            DdpError::TooLong => "DDP message too long for available buffer",
        };
        write!(
            f,
            "{what} (DDP error {:#x}/{:#04x})",
            self.error_type(),
            self.code()
        )
    }
}

impl std::error::Error for DdpError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 5041 §7.2's table, row by row.
    #[test]
    fn numbers_are_those_of_rfc5041_7_2() {
        let table = [
            (DdpError::LocalCatastrophic, 0x0, 0x00),
            (DdpError::InvalidStag, 0x1, 0x00),
            (DdpError::BaseOrBounds, 0x1, 0x01),
            (DdpError::StagNotAssociated, 0x1, 0x02),
            (DdpError::ToWrap, 0x1, 0x03),
            (DdpError::TaggedVersion, 0x1, 0x04),
            (DdpError::InvalidQn, 0x2, 0x01),
            (DdpError::NoBuffer, 0x2, 0x02),
            (DdpError::MsnRange, 0x2, 0x03),
            (DdpError::InvalidMo, 0x2, 0x04),
            (DdpError::TooLong, 0x2, 0x05),
            (DdpError::UntaggedVersion, 0x2, 0x06),
        ];
        for (i, (e, t, c)) in table.into_iter().enumerate() {
            assert_eq!((e.error_type(), e.code()), (t, c), "{e:?}");
            assert_eq!(
                (DdpError::ALL[i], e.index()),
                (e, i),
                "{e:?} out of table order"
            );
            assert_eq!(DdpError::from_number(t, c), Some(e));
            assert_eq!(e.number(), u16::from(t) << 8 | u16::from(c));
        }
        assert_eq!(
            DdpError::from_number(0x3, 0x00),
            None,
            "type 0x3 is the LLP's"
        );
        assert_eq!(DdpError::from_number(0x2, 0x00), None);
    }
}
