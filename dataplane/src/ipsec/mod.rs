//! IPsec for DDP over SCTP (RFC 5043 §13): the security policy database and the security
//! associations' parameters, free of DPDK.
//!
//! RFC 5043 §13 asks an implementation of RDDP over SCTP for IPsec equivalent to RFC 3723's
//! for TCP: ESP (RFC 4303) with per-packet integrity, replay protection and confidentiality, and
//! protocol and port selectors for SCTP (RFC 4301 §4.4.1). This module holds what policy needs
//! and can be tested without a device: the selectors and their lookup ([`Spd`]), the SA
//! parameters ([`SaConfig`]), and the configuration file that gives both ([`parse_config`], a
//! subset of DPDK `ipsec-secgw`'s format, see `docs/ipsec.md`). The ESP transform itself runs
//! through DPDK's `rte_ipsec` and cryptodev in `port::dpdk::ipsec`.

mod config;
mod replay;
mod spd;

pub use config::{
    hidden_word, may_be_key, parse_config, parse_rule, parse_sa, parse_sp, ConfigError, IpsecConfig,
};
pub use replay::ReplayWindow;
pub use spd::{Action, Flow, Framed, Policy, Prefix, Selector, Spd};

use std::net::IpAddr;

/// IP protocol number of ESP (RFC 4303 §2).
pub const IPPROTO_ESP: u8 = 50;
/// IP protocol number of SCTP.
pub const IPPROTO_SCTP: u8 = 132;

/// Which way an SA or a policy applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    In,
    Out,
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Direction::In => "in",
            Direction::Out => "out",
        })
    }
}

/// The ESP transform of an SA: an AEAD (RFC 4106) or a cipher with an integrity algorithm
/// (RFC 3602 AES-CBC with RFC 4868 HMAC-SHA-256-128).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    AesGcm128,
    AesGcm256,
    AesCbc128HmacSha256,
    AesCbc256HmacSha256,
}

impl Algorithm {
    /// Bytes of cipher (or AEAD) key, salt excluded.
    pub fn key_len(self) -> usize {
        match self {
            Algorithm::AesGcm128 | Algorithm::AesCbc128HmacSha256 => 16,
            Algorithm::AesGcm256 | Algorithm::AesCbc256HmacSha256 => 32,
        }
    }

    /// Bytes of integrity key: HMAC-SHA-256 takes a 256-bit key (RFC 4868 §2.1.1).
    pub fn auth_key_len(self) -> usize {
        if self.is_aead() {
            0
        } else {
            32
        }
    }

    pub fn is_aead(self) -> bool {
        matches!(self, Algorithm::AesGcm128 | Algorithm::AesGcm256)
    }

    /// The explicit IV carried in each packet: 8 bytes for GCM (RFC 4106 §3.1), one AES block
    /// for CBC (RFC 3602 §3).
    pub fn iv_len(self) -> usize {
        if self.is_aead() {
            8
        } else {
            16
        }
    }

    /// The ICV: GCM's 16-byte tag (RFC 4106 §3.2 allows 8/12/16; 16 is what every stack
    /// offers), HMAC-SHA-256 truncated to 128 bits (RFC 4868 §2.3).
    pub fn icv_len(self) -> usize {
        16
    }

    /// What the payload is padded to: 4 bytes for GCM (RFC 4303 §2.4), the AES block for CBC.
    pub fn block(self) -> usize {
        if self.is_aead() {
            4
        } else {
            16
        }
    }

    /// The largest number of bytes ESP adds to a packet in transport mode: header (SPI and
    /// sequence number), IV, padding, pad length and next header, ICV.
    pub fn transport_overhead(self) -> usize {
        8 + self.iv_len() + (self.block() - 1) + 2 + self.icv_len()
    }

    /// Its name in the configuration file (`ipsec-secgw`'s spelling).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::AesGcm128 => "aes-128-gcm",
            Algorithm::AesGcm256 => "aes-256-gcm",
            Algorithm::AesCbc128HmacSha256 => "aes-128-cbc/sha256-hmac",
            Algorithm::AesCbc256HmacSha256 => "aes-256-cbc/sha256-hmac",
        }
    }
}

/// Transport mode protects the packet's payload behind its own IP header; tunnel mode wraps
/// the whole packet in a new IP header between two gateways (RFC 4301 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Transport,
    Tunnel { src: IpAddr, dst: IpAddr },
}

/// An SA's lifetime (RFC 4301 §4.4.2.1): after `bytes` or `secs` (the hard lifetime) it may
/// no longer be used; after `soft_bytes` or `soft_secs` (the soft lifetime, smaller) it goes
/// on but is reported as due for a rekey, so that the key manager replaces it before the
/// hard limit ("a warning is sent to the key management entity").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lifetime {
    pub bytes: Option<u64>,
    pub secs: Option<u64>,
    pub soft_bytes: Option<u64>,
    pub soft_secs: Option<u64>,
}

/// One security association's parameters.
#[derive(Clone, PartialEq, Eq)]
pub struct SaConfig {
    pub spi: u32,
    pub direction: Direction,
    pub algorithm: Algorithm,
    /// The cipher or AEAD key.
    pub key: Vec<u8>,
    /// The HMAC key (empty for an AEAD).
    pub auth_key: Vec<u8>,
    /// GCM's 4-byte salt, the nonce's fixed part (RFC 4106 §4); 0 for CBC.
    pub salt: u32,
    pub mode: Mode,
    /// Extended (64-bit) sequence numbers (RFC 4303 §2.2.1).
    pub esn: bool,
    /// Anti-replay window in packets (RFC 4303 §3.4.3); 0 turns the check off, which only an
    /// outbound SA may do.
    pub replay_window: u32,
    pub lifetime: Lifetime,
}

/// The most bytes any SA of ours adds to a packet: an IPv6 tunnel's outer header (40) and
/// AES-CBC's ESP (RFC 4303 §2: 8 header + 16 IV + up to 15 padding + 2 trailer + 16 ICV).
/// A path MTU that leaves this much free fits every SA that may come later.
pub const MAX_OVERHEAD: usize = 97;

/// What the replay window is when the configuration does not say: RFC 4303 §3.4.3 asks for
/// at least 32 packets and recommends 64 where the link is fast; a data core on a fast link
/// reorders within a burst, so a larger one.
pub const DEFAULT_REPLAY_WINDOW: u32 = 1024;

impl std::fmt::Debug for SaConfig {
    // Keys never reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaConfig")
            .field("spi", &self.spi)
            .field("direction", &self.direction)
            .field("algorithm", &self.algorithm)
            .field("mode", &self.mode)
            .field("esn", &self.esn)
            .field("replay_window", &self.replay_window)
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

impl SaConfig {
    /// Checks what the device would otherwise refuse later, or accept and misuse.
    pub fn validate(&self) -> Result<(), String> {
        let a = self.algorithm;
        if self.key.len() != a.key_len() {
            return Err(format!(
                "SA {}: {} takes a {}-byte key, got {}",
                self.spi,
                a.name(),
                a.key_len(),
                self.key.len()
            ));
        }
        if self.auth_key.len() != a.auth_key_len() {
            return Err(format!(
                "SA {}: {} takes a {}-byte authentication key, got {}",
                self.spi,
                a.name(),
                a.auth_key_len(),
                self.auth_key.len()
            ));
        }
        // RFC 4303 §2.1: SPIs 1-255 are reserved by IANA, 0 is for local use only.
        if self.spi < 256 {
            return Err(format!(
                "SPI {} is reserved (RFC 4303 §2.1: 0-255); use 256 or above",
                self.spi
            ));
        }
        if let Mode::Tunnel { src, dst } = self.mode {
            if src.is_ipv4() != dst.is_ipv4() {
                return Err(format!(
                    "SA {}: tunnel endpoints {src} and {dst} are of different families",
                    self.spi
                ));
            }
        }
        if self.direction == Direction::In && self.replay_window == 0 {
            return Err(format!(
                "SA {}: an inbound SA keeps its anti-replay window (RFC 4303 §3.4.3)",
                self.spi
            ));
        }
        let l = self.lifetime;
        if l.bytes == Some(0) || l.secs == Some(0) {
            return Err(format!("SA {}: a lifetime of 0 allows nothing", self.spi));
        }
        // RFC 4301 §4.4.2.1: "the soft lifetime ... is always less than the hard lifetime".
        let below = |soft: Option<u64>, hard: Option<u64>| match (soft, hard) {
            (Some(s), Some(h)) => s < h,
            _ => true,
        };
        if !below(l.soft_bytes, l.bytes) || !below(l.soft_secs, l.secs) {
            return Err(format!(
                "SA {}: a soft lifetime must be less than the hard one (RFC 4301 §4.4.2.1)",
                self.spi
            ));
        }
        Ok(())
    }

    /// Bytes ESP adds to an SCTP packet under this SA, at most: what the path MTU of an
    /// association it protects loses.
    pub fn overhead(&self) -> usize {
        let outer = match self.mode {
            Mode::Transport => 0,
            Mode::Tunnel {
                dst: IpAddr::V4(_), ..
            } => 20,
            Mode::Tunnel {
                dst: IpAddr::V6(_), ..
            } => 40,
        };
        outer + self.algorithm.transport_overhead()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;

    fn sa(algorithm: Algorithm) -> SaConfig {
        SaConfig {
            spi: 1000,
            direction: Direction::In,
            algorithm,
            key: vec![7; algorithm.key_len()],
            auth_key: vec![9; algorithm.auth_key_len()],
            salt: 0,
            mode: Mode::Transport,
            esn: false,
            replay_window: 64,
            lifetime: Lifetime::default(),
        }
    }

    #[test]
    fn overheads_follow_rfc_4303_and_the_algorithms() {
        // GCM: 8 header + 8 IV + up to 3 pad + 2 trailer + 16 ICV.
        assert_eq!(sa(Algorithm::AesGcm128).overhead(), 37);
        // CBC: 8 + 16 IV + up to 15 pad + 2 + 16 (RFC 4868 truncation).
        assert_eq!(sa(Algorithm::AesCbc256HmacSha256).overhead(), 57);
        let mut t = sa(Algorithm::AesGcm256);
        t.mode = Mode::Tunnel {
            src: "198.18.0.1".parse().unwrap(),
            dst: "198.18.0.2".parse().unwrap(),
        };
        assert_eq!(t.overhead(), 57);
    }

    #[test]
    fn max_overhead_covers_every_algorithm_and_mode() {
        let modes = [
            Mode::Transport,
            Mode::Tunnel {
                src: "198.18.0.1".parse().unwrap(),
                dst: "198.18.0.2".parse().unwrap(),
            },
            Mode::Tunnel {
                src: "2001:db8::1".parse().unwrap(),
                dst: "2001:db8::2".parse().unwrap(),
            },
        ];
        let mut most = 0;
        for a in [
            Algorithm::AesGcm128,
            Algorithm::AesGcm256,
            Algorithm::AesCbc128HmacSha256,
            Algorithm::AesCbc256HmacSha256,
        ] {
            for mode in modes {
                let mut s = sa(a);
                s.mode = mode;
                most = most.max(s.overhead());
            }
        }
        assert_eq!(most, MAX_OVERHEAD);
    }

    #[test]
    fn validation_refuses_wrong_keys_reserved_spis_and_no_replay_window() {
        assert!(sa(Algorithm::AesGcm128).validate().is_ok());
        let mut s = sa(Algorithm::AesGcm128);
        s.key.pop();
        assert!(s.validate().unwrap_err().contains("16-byte key"));
        let mut s = sa(Algorithm::AesCbc128HmacSha256);
        s.auth_key.clear();
        assert!(s.validate().unwrap_err().contains("authentication key"));
        let mut s = sa(Algorithm::AesGcm128);
        s.spi = 255;
        assert!(s.validate().unwrap_err().contains("RFC 4303 §2.1"));
        let mut s = sa(Algorithm::AesGcm128);
        s.replay_window = 0;
        assert!(s.validate().unwrap_err().contains("§3.4.3"));
        s.direction = Direction::Out;
        assert!(s.validate().is_ok());
    }

    #[test]
    fn keys_are_not_printed() {
        let s = sa(Algorithm::AesGcm128);
        let shown = format!("{s:?}");
        assert!(!shown.contains("key"), "{shown}");
    }
}
