//! Serial number arithmetic on 32-bit TSNs (RFC 9260 §1.6, RFC 1982 with SERIAL_BITS = 32).
//! Two TSNs exactly 2^31 apart are incomparable in RFC 1982; here `lt` is false both ways for
//! them, which only makes such a chunk "not newer", the safe reading.

/// `a < b` in serial arithmetic.
#[inline]
pub fn lt(a: u32, b: u32) -> bool {
    a != b && (b.wrapping_sub(a) as i32) > 0
}

/// `a <= b` in serial arithmetic.
#[inline]
pub fn le(a: u32, b: u32) -> bool {
    a == b || lt(a, b)
}

/// `a > b` in serial arithmetic.
#[inline]
pub fn gt(a: u32, b: u32) -> bool {
    lt(b, a)
}

/// `a >= b` in serial arithmetic.
#[inline]
pub fn ge(a: u32, b: u32) -> bool {
    le(b, a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_around_zero() {
        assert!(lt(u32::MAX, 0));
        assert!(lt(u32::MAX - 5, 3));
        assert!(gt(3, u32::MAX - 5));
        assert!(!lt(5, 5) && le(5, 5) && ge(5, 5));
        assert!(lt(0, 0x7fff_ffff));
        // RFC 1982 §3.2: 2^31 apart is undefined; neither is less.
        assert!(!lt(0, 0x8000_0000) && !lt(0x8000_0000, 0));
    }
}
