//! The stateless State Cookie (RFC 9260 §5.1.3): everything the responder needs to build the
//! association, sealed with HMAC-SHA-256 under a secret key, so that an INIT costs the
//! responder no memory at all (an INIT flood allocates nothing) and a COOKIE ECHO is believed
//! only if we wrote it (§5.1.5 steps 1-3).
//!
//! Also a keyed pseudo-random source for verification tags and initial TSNs: tags must be
//! unpredictable to an off-path attacker (RFC 9260 §5.3.1, RFC 4086), and HMAC under the same
//! secret is a PRF, so no second generator has to be seeded.

use core::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::time::Instant;

type HmacSha256 = Hmac<Sha256>;

const VERSION: u8 = 2;
const MAC_LEN: usize = 32;
// version and padding, created, lifespan, 8 u32 fields, 3 u16 fields, the address.
const BODY_LEN: usize = 4 + 8 + 4 + 4 * 8 + 2 * 3 + 16 + 4;
/// Bytes of every cookie we issue.
pub const COOKIE_LEN: usize = BODY_LEN + MAC_LEN;

/// The secret the cookies are signed with. Copy, 32 bytes: every association keeps one to
/// answer the INITs and COOKIE ECHOs of §5.2 itself.
#[derive(Clone, Copy)]
pub struct CookieKey([u8; 32]);

impl core::fmt::Debug for CookieKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("CookieKey(..)")
    }
}

impl CookieKey {
    pub const fn new(secret: [u8; 32]) -> Self {
        CookieKey(secret)
    }

    fn mac(&self) -> HmacSha256 {
        keyed(&self.0)
    }

    /// The key that MACs the cookies created in `created`'s period: HMAC(secret, "ddpdk
    /// State Cookie " || period). RFC 9260 §5.1.3: the secret "SHOULD also be changed
    /// reasonably frequently", and "the timestamp in the State Cookie MAY be used to
    /// determine which key should be used to verify the MAC". Derived, not drawn: every
    /// association holds the key (it answers §5.2's INITs and COOKIE ECHOs itself) and the
    /// data cores share nothing mutable, so each computes the period's key from the cookie.
    /// One period's key tells nothing of another's without the secret; the secret itself,
    /// drawn at each start, still lives as long as the process, so what rotates is the key
    /// a cookie's MAC exposes, not the secret behind it. (The PRF's messages start
    /// "ddpdk-prf", these "ddpdk State Cookie ": the two uses never MAC the same message.)
    fn period_key(&self, created: Instant) -> [u8; 32] {
        let nanos = u64::try_from(KEY_PERIOD.as_nanos()).unwrap_or(u64::MAX);
        let period = created.as_nanos() / nanos;
        let mut m = self.mac();
        m.update(b"ddpdk State Cookie ");
        m.update(&period.to_be_bytes());
        m.finalize().into_bytes().into()
    }
}

/// How long one cookie key is used ([`CookieKey::period_key`]); longer than any cookie's
/// lifespan is not needed: the cookie names its period.
pub const KEY_PERIOD: Duration = Duration::from_secs(3600);

fn keyed(key: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length: this cannot fail.
    match HmacSha256::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC takes any key length"),
    }
}

/// The contents of a State Cookie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cookie {
    /// When we wrote it, on our clock (§5.1.3: "a timestamp on when the State Cookie is
    /// created").
    pub created: Instant,
    /// Its lifespan (Valid.Cookie.Life, plus any Cookie Preservative the INIT asked for).
    pub lifespan: Duration,
    /// Our Initiate Tag, the verification tag the peer will put on its packets.
    pub local_tag: u32,
    /// The peer's Initiate Tag.
    pub peer_tag: u32,
    pub local_initial_tsn: u32,
    pub peer_initial_tsn: u32,
    pub peer_a_rwnd: u32,
    /// Tie-Tags (§5.2.2): our and the peer's tags of the association that existed when the
    /// INIT arrived, 0 when there was none.
    pub local_tie_tag: u32,
    pub peer_tie_tag: u32,
    /// The peer's Adaptation Layer Indication (RFC 5043 §5.1).
    pub peer_adaptation: u32,
    /// Streams in each direction, equal both ways (RFC 5043 §8).
    pub streams: u16,
    pub local_port: u16,
    pub peer_port: u16,
    /// The peer's address (IPv4 mapped into IPv6), so a cookie cannot be replayed from
    /// elsewhere.
    pub peer_addr: [u8; 16],
    /// The address list of the peer's INIT, as `endpoint::address_set` sums it (0:
    /// none listed), so a restart that lists the same addresses is one (§5.2.2).
    pub peer_addresses: u32,
}

/// Why a received cookie is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CookieError {
    /// Not the length or version we issue: not ours.
    Malformed,
    /// The MAC does not verify (§5.1.5 step 2): forged or damaged; silently discarded.
    BadMac,
}

impl Cookie {
    /// Writes the sealed cookie.
    pub fn seal(&self, key: &CookieKey) -> [u8; COOKIE_LEN] {
        let mut out = [0u8; COOKIE_LEN];
        let mut w = Writer(&mut out[..BODY_LEN], 0);
        w.put(&[VERSION, 0, 0, 0]);
        w.put(&self.created.as_nanos().to_be_bytes());
        let life_ms = u32::try_from(self.lifespan.as_millis()).unwrap_or(u32::MAX);
        w.put(&life_ms.to_be_bytes());
        for v in [
            self.local_tag,
            self.peer_tag,
            self.local_initial_tsn,
            self.peer_initial_tsn,
            self.peer_a_rwnd,
            self.local_tie_tag,
            self.peer_tie_tag,
        ] {
            w.put(&v.to_be_bytes());
        }
        w.put(&self.peer_adaptation.to_be_bytes());
        for v in [self.streams, self.local_port, self.peer_port] {
            w.put(&v.to_be_bytes());
        }
        w.put(&self.peer_addr);
        w.put(&self.peer_addresses.to_be_bytes());
        debug_assert_eq!(w.1, BODY_LEN);
        let mut mac = keyed(&key.period_key(self.created));
        mac.update(&out[..BODY_LEN]);
        out[BODY_LEN..].copy_from_slice(&mac.finalize().into_bytes());
        out
    }

    /// Verifies the MAC and reads the contents; never panics on any input. The lifespan is
    /// checked separately ([`Cookie::staleness`]) because a stale cookie is answered with its
    /// peer's tag, which only a verified cookie can be trusted for.
    pub fn open(bytes: &[u8], key: &CookieKey) -> Result<Cookie, CookieError> {
        if bytes.len() != COOKIE_LEN || bytes[0] != VERSION {
            return Err(CookieError::Malformed);
        }
        let (body, tag) = bytes.split_at(BODY_LEN);
        let mut r = Reader(body, 4);
        // Read before the MAC is checked, to pick the period's key only: a forged time picks
        // a key the forger does not have.
        let created = Instant::from_nanos(r.u64());
        let mut mac = keyed(&key.period_key(created));
        mac.update(body);
        // Constant-time comparison: the MAC must not be guessable byte by byte.
        mac.verify_slice(tag).map_err(|_| CookieError::BadMac)?;
        let lifespan = Duration::from_millis(u64::from(r.u32()));
        let c = Cookie {
            created,
            lifespan,
            local_tag: r.u32(),
            peer_tag: r.u32(),
            local_initial_tsn: r.u32(),
            peer_initial_tsn: r.u32(),
            peer_a_rwnd: r.u32(),
            local_tie_tag: r.u32(),
            peer_tie_tag: r.u32(),
            peer_adaptation: r.u32(),
            streams: r.u16(),
            local_port: r.u16(),
            peer_port: r.u16(),
            peer_addr: r.addr(),
            peer_addresses: r.u32(),
        };
        Ok(c)
    }

    /// `Some(microseconds)` past its lifespan at `now` (§5.1.5 step 3: answered with a Stale
    /// Cookie error carrying this measure), `None` while it is valid.
    pub fn staleness(&self, now: Instant) -> Option<u32> {
        if self.created > now {
            // From the future: our clock never runs backwards, so this cookie was minted under
            // another clock epoch. Too old to trust, by an unknown amount.
            return Some(u32::MAX);
        }
        let age = now.saturating_since(self.created);
        (age > self.lifespan)
            .then(|| u32::try_from((age - self.lifespan).as_micros()).unwrap_or(u32::MAX))
    }
}

struct Writer<'a>(&'a mut [u8], usize);

impl Writer<'_> {
    fn put(&mut self, b: &[u8]) {
        self.0[self.1..self.1 + b.len()].copy_from_slice(b);
        self.1 += b.len();
    }
}

/// Reads the fixed layout `seal` wrote; only called on a body of exactly `BODY_LEN` bytes.
struct Reader<'a>(&'a [u8], usize);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(&self.0[self.1..self.1 + N]);
        self.1 += N;
        a
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes(self.take())
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_be_bytes(self.take())
    }
    fn addr(&mut self) -> [u8; 16] {
        self.take()
    }
}

/// Unpredictable 32-bit values from the secret: HMAC-SHA-256(key, label || counter).
#[derive(Debug, Clone)]
pub struct Prf {
    key: CookieKey,
    label: u64,
    counter: u64,
}

impl Prf {
    /// `label` separates the streams of values of different owners under one key (the
    /// endpoint, each association).
    pub fn new(key: CookieKey, label: u64) -> Self {
        Prf {
            key,
            label,
            counter: 0,
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut mac = self.key.mac();
        mac.update(b"ddpdk-prf");
        mac.update(&self.label.to_be_bytes());
        mac.update(&self.counter.to_be_bytes());
        self.counter += 1;
        let out = mac.finalize().into_bytes();
        let mut b = [0u8; 8];
        b.copy_from_slice(&out[..8]);
        u64::from_be_bytes(b)
    }

    /// A value that is never 0 (an Initiate Tag of 0 is illegal, RFC 9260 §3.3.2).
    pub fn nonzero_u32(&mut self) -> u32 {
        loop {
            let v = self.next_u64() as u32;
            if v != 0 {
                return v;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sample() -> Cookie {
        Cookie {
            created: Instant::from_nanos(5_000_000_000),
            lifespan: Duration::from_secs(60),
            local_tag: 0x1122_3344,
            peer_tag: 0x5566_7788,
            local_initial_tsn: 7,
            peer_initial_tsn: u32::MAX,
            peer_a_rwnd: 131_072,
            local_tie_tag: 0,
            peer_tie_tag: 9,
            peer_adaptation: 1,
            streams: 8,
            local_port: 5002,
            peer_port: 5001,
            peer_addr: [0xa5; 16],
            peer_addresses: 0xdead_beef,
        }
    }

    #[test]
    fn round_trips_within_lifespan() {
        let key = CookieKey::new([7; 32]);
        let c = sample();
        let sealed = c.seal(&key);
        let now = c.created + Duration::from_secs(59);
        assert_eq!(
            Cookie::open(&sealed, &key).map(|c| (c, c.staleness(now))),
            Ok((c, None))
        );
    }

    /// RFC 9260 §5.1.5 step 2: a cookie whose MAC does not verify is discarded; every single
    /// bit flip anywhere in the cookie must be caught.
    #[test]
    fn any_bit_flip_fails_the_mac() {
        let key = CookieKey::new([7; 32]);
        let c = sample();
        let sealed = c.seal(&key);
        for i in 1..COOKIE_LEN {
            for bit in 0..8 {
                let mut b = sealed;
                b[i] ^= 1 << bit;
                assert_eq!(
                    Cookie::open(&b, &key),
                    Err(CookieError::BadMac),
                    "byte {i} bit {bit}"
                );
            }
        }
        let other = CookieKey::new([8; 32]);
        assert_eq!(Cookie::open(&sealed, &other), Err(CookieError::BadMac));
        assert_eq!(
            Cookie::open(&sealed[1..], &key),
            Err(CookieError::Malformed)
        );
    }

    /// RFC 9260 §5.1.3: the key is "changed reasonably frequently", and the cookie's
    /// timestamp picks the key that verifies it. Whoever learned one period's key can forge
    /// a cookie of that period only: the same forgery dated in the next period fails.
    #[test]
    fn the_cookie_key_changes_every_period_5_1_3() {
        let key = CookieKey::new([7; 32]);
        let c = sample();
        let sealed = c.seal(&key);
        assert_eq!(Cookie::open(&sealed, &key), Ok(c));
        let leaked = key.period_key(c.created);
        let forge = |created: Instant| {
            let mut b = Cookie { created, ..c }.seal(&key);
            let mut mac = keyed(&leaked);
            mac.update(&b[..BODY_LEN]);
            b[BODY_LEN..].copy_from_slice(&mac.finalize().into_bytes());
            b
        };
        let same_period = c.created + Duration::from_secs(1);
        assert_eq!(
            Cookie::open(&forge(same_period), &key).map(|x| x.created),
            Ok(same_period)
        );
        let next = c.created + KEY_PERIOD;
        assert_eq!(Cookie::open(&forge(next), &key), Err(CookieError::BadMac));
        assert_ne!(key.period_key(next), leaked);
        // Not the secret itself either.
        assert_ne!(leaked, [7; 32]);
    }

    /// RFC 9260 §5.1.5 step 3: past its lifespan the cookie is stale, and the staleness is
    /// reported in microseconds.
    #[test]
    fn stale_after_lifespan() {
        let key = CookieKey::new([7; 32]);
        let c = sample();
        let sealed = c.seal(&key);
        let now = c.created + Duration::from_secs(60) + Duration::from_micros(1500);
        assert_eq!(
            Cookie::open(&sealed, &key).map(|c| (c, c.staleness(now))),
            Ok((c, Some(1500)))
        );
    }

    #[test]
    fn prf_is_keyed_and_labelled() {
        let mut a = Prf::new(CookieKey::new([1; 32]), 0);
        let mut b = Prf::new(CookieKey::new([1; 32]), 0);
        let mut c = Prf::new(CookieKey::new([1; 32]), 1);
        let mut d = Prf::new(CookieKey::new([2; 32]), 0);
        let x = a.next_u64();
        assert_eq!(x, b.next_u64(), "deterministic for a key and label");
        assert_ne!(x, c.next_u64());
        assert_ne!(x, d.next_u64());
        assert_ne!(x, a.next_u64(), "the counter moves");
    }
}
