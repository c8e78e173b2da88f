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
    cross_use_prints, hidden_in, hidden_word, key_prints, may_be_key, parse_config, parse_rule,
    parse_sa, parse_sp, recorded_prints, ConfigError, IpsecConfig,
};
pub use replay::{ReplayWindow, MAX_REPLAY_WINDOW};
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
    /// Who does the crypto: ipsec-secgw's `type`.
    pub offload: Offload,
}

/// Who does an SA's crypto (ipsec-secgw's `type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Offload {
    /// The port's NIC where it offers inline crypto for the SA (`rte_security`), else the
    /// crypto device: no `type` given.
    #[default]
    Auto,
    /// The crypto device (`lookaside-none`, `cpu-crypto`).
    Software,
    /// The port's NIC, as it sends and receives (`inline-crypto-offload`); an SA it cannot
    /// do is refused, never run in software behind the operator's back. `port`: ipsec-secgw's
    /// `port_id`, which must be the IPsec port's.
    Inline { port: Option<u16> },
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
            .field("offload", &self.offload)
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
        // One key for two purposes (encryption and integrity) is refused as one key in two
        // SAs is ([`cross_use_prints`]).
        if !self.auth_key.is_empty() && self.auth_key == self.key {
            return Err(format!(
                "SA {}: its cipher key is its HMAC key: a key is used once, for one purpose; \
                 give each its own",
                self.spi
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
            // A tunnel's outer header goes from one host to another (RFC 4301 §5.1.2.1):
            // no host has the unspecified, a multicast or the broadcast address.
            let no_host = |a: IpAddr| {
                a.is_unspecified()
                    || a.is_multicast()
                    || a == IpAddr::V4(std::net::Ipv4Addr::BROADCAST)
            };
            if let Some(a) = [src, dst].into_iter().find(|&a| no_host(a)) {
                return Err(format!(
                    "SA {}: tunnel endpoint {a} is no host's address (unspecified, multicast \
                     or broadcast)",
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
        if l.soft_bytes == Some(0) || l.soft_secs == Some(0) {
            return Err(format!(
                "SA {}: a soft lifetime of 0 is due before the first packet (leave it out for \
                 none)",
                self.spi
            ));
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

/// How far behind an outbound SA's last sequence number the one an ICMP PMTU message quotes
/// may lie: 2^20 packets. RFC 4301 §6.1.2 has unauthenticated ICMP PMTU messages checked
/// against the SA; the quoted sequence number, like SCTP's verification tag (RFC 9260
/// Appendix C), is the only proof the sender saw our traffic. The router answers within about
/// a round trip of the packet it drops, so the number is recent; but a fast sender on a long
/// path has many packets out by then (25 Gb/s of 1400-byte packets over a 50 ms round trip is
/// about 110 000), and a genuine ICMP refused for being too old leaves the path a black hole.
/// 2^20 covers 100 Gb/s over 50 ms. Against forgery it is weak: SPIs are in clear in every
/// packet and often configured, so an off-path forger who knows the addresses and the SPI
/// needs about 2^32 / 2^20 = 4096 tries to land in the window; what it wins is a lowered
/// path MTU (never below the association's minimum), not a broken association.
pub const PMTU_SEQUENCE_WINDOW: u64 = 1 << 20;

/// Why an ICMP PMTU message quoting ESP was not taken (RFC 4301 §6.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmtuReject {
    /// The SPI is none of our outbound SAs'.
    NoSa,
    /// The quoted outer addresses are not the SA's: not its tunnel's ends, or in transport
    /// mode not ones its outbound policies select.
    Addresses,
    /// The quoted sequence number is not one the SA sent lately (none yet, ahead of its
    /// counter, or further back than [`PMTU_SEQUENCE_WINDOW`]).
    Sequence,
    /// No usable MTU (RFC 1191 §3, RFC 8201 §4), or one that leaves no room for ESP.
    Mtu,
}

/// Whether `quoted`, the sequence number an ICMP message quotes (its low 32 bits under ESN,
/// RFC 4303 §2.2.1: only they are on the wire), is one an outbound SA whose last sequence
/// number given out is `sent` has sent within [`PMTU_SEQUENCE_WINDOW`]: the number it stands
/// for is the latest one at or below `sent` with those low bits, and it must be at least 1.
pub fn quoted_sequence_sent(quoted: u32, sent: u64) -> bool {
    // How far back from `sent` the quoted number lies, modulo 2^32: exact without ESN (the
    // counter never passes 2^32 - 1), the nearest such number with it.
    let back = u64::from((sent as u32).wrapping_sub(quoted));
    back < PMTU_SEQUENCE_WINDOW && back < sent
}

impl SaConfig {
    /// RFC 4301 §6.1.2: whether an ICMP PMTU message quoting an ESP packet of this outbound
    /// SA, from `local` to `peer`, with sequence number `seq` (low 32 bits), may be believed,
    /// given `sent`, the SA's last sequence number given out, and the outbound `policies` (the
    /// SPD's; those naming this SA say which addresses it carries in transport mode).
    pub fn pmtu_quote_check(
        &self,
        policies: &[Policy],
        local: IpAddr,
        peer: IpAddr,
        seq: u32,
        sent: u64,
    ) -> Result<(), PmtuReject> {
        if self.direction != Direction::Out {
            return Err(PmtuReject::NoSa);
        }
        let addresses = match self.mode {
            Mode::Tunnel { src, dst } => src == local && dst == peer,
            // The outer header is the SCTP packet's own: one the SA's policies select.
            Mode::Transport => policies.iter().any(|p| {
                p.direction == Direction::Out
                    && p.action == Action::Protect(self.spi)
                    && p.selector.src.is_none_or(|x| x.contains(local))
                    && p.selector.dst.is_none_or(|x| x.contains(peer))
                    && p.selector.proto.is_none_or(|x| x == IPPROTO_SCTP)
            }),
        };
        if !addresses {
            return Err(PmtuReject::Addresses);
        }
        if !quoted_sequence_sent(seq, sent) {
            return Err(PmtuReject::Sequence);
        }
        Ok(())
    }

    /// RFC 4301 §8.2.1: the SCTP packet size an association this SA protects may send for a
    /// path MTU of `pmtu` (the outer IP packet): less the SA's overhead (the tunnel's outer
    /// header included) and the inner IP header; `None` if nothing is left.
    pub fn sctp_mtu(&self, pmtu: usize, inner_ipv6: bool) -> Option<usize> {
        let inner = if inner_ipv6 { 40 } else { 20 };
        pmtu.checked_sub(self.overhead() + inner).filter(|n| *n > 0)
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
            offload: Offload::Auto,
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

    /// RFC 4301 §6.1.2: an unauthenticated ICMP PMTU message quoting ESP is believed only if
    /// its sequence number is one the SA has sent, lately: not 0, not ahead of the counter,
    /// not further back than the window; under ESN the quote's low 32 bits stand for the
    /// latest number with them.
    #[test]
    fn a_quoted_sequence_number_must_have_been_sent_lately_rfc4301_6_1_2() {
        // Nothing sent yet: nothing can be quoted.
        assert!(!quoted_sequence_sent(0, 0));
        assert!(!quoted_sequence_sent(1, 0));
        assert!(quoted_sequence_sent(1, 1));
        assert!(quoted_sequence_sent(500, 1000));
        assert!(quoted_sequence_sent(1000, 1000));
        // Not yet sent.
        assert!(!quoted_sequence_sent(1001, 1000));
        // 0 is never sent (RFC 4303 §3.3.3: the first packet carries 1).
        assert!(!quoted_sequence_sent(0, 1000));
        // The window: PMTU_SEQUENCE_WINDOW back and no further.
        let sent = 100_000_000u64;
        assert!(quoted_sequence_sent(
            (sent - PMTU_SEQUENCE_WINDOW + 1) as u32,
            sent
        ));
        assert!(!quoted_sequence_sent(
            (sent - PMTU_SEQUENCE_WINDOW) as u32,
            sent
        ));
        // ESN: the low 32 bits across a wrap of them.
        let esn = (5u64 << 32) + 10;
        assert!(quoted_sequence_sent(u32::MAX - 5, esn));
        assert!(quoted_sequence_sent(10, esn));
        assert!(!quoted_sequence_sent(11, esn));
    }

    /// RFC 4301 §6.1.2 with §8.2.1: the SPI must be an outbound SA's, the quoted outer
    /// addresses that SA's (a tunnel's ends; in transport mode ones its outbound policies
    /// select), and the sequence number one it sent; each failure says which.
    #[test]
    fn a_pmtu_quote_must_match_the_outbound_sa_rfc4301_6_1_2() {
        let (k, k2) = ("ab".repeat(20), "cd".repeat(20));
        let cfg = crate::ipsec::parse_config(&format!(
            "sa out 1000 aead_algo aes-128-gcm aead_key 0x{k} mode transport\n\
             sa out 1001 aead_algo aes-128-gcm aead_key 0x{k2} mode ipv4-tunnel src 192.0.2.1 dst 192.0.2.2\n\
             sp ipv4 out esp protect 1000 pri 10 src 198.18.0.1/32 dst 198.18.0.2/32 proto sctp\n"
        ))
        .unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let (transport, tunnel) = (&cfg.sas[0], &cfg.sas[1]);
        let policies = cfg.spd.policies();
        let (us, peer) = (ip("198.18.0.1"), ip("198.18.0.2"));
        assert_eq!(transport.pmtu_quote_check(policies, us, peer, 7, 9), Ok(()));
        // Another peer than the SA's policies select.
        assert_eq!(
            transport.pmtu_quote_check(policies, us, ip("198.18.0.3"), 7, 9),
            Err(PmtuReject::Addresses)
        );
        // A sequence number the SA has not sent.
        assert_eq!(
            transport.pmtu_quote_check(policies, us, peer, 10, 9),
            Err(PmtuReject::Sequence)
        );
        // Tunnel mode: the tunnel's ends, not the inner addresses.
        assert_eq!(
            tunnel.pmtu_quote_check(policies, ip("192.0.2.1"), ip("192.0.2.2"), 7, 9),
            Ok(())
        );
        assert_eq!(
            tunnel.pmtu_quote_check(policies, us, peer, 7, 9),
            Err(PmtuReject::Addresses)
        );
        // An inbound SA is not one whose packets we send.
        let mut inbound = transport.clone();
        inbound.direction = Direction::In;
        assert_eq!(
            inbound.pmtu_quote_check(policies, us, peer, 7, 9),
            Err(PmtuReject::NoSa)
        );
        // §8.2.1: the association's SCTP packets lose the SA's overhead and the inner header.
        assert_eq!(transport.sctp_mtu(1400, false), Some(1400 - 37 - 20));
        assert_eq!(tunnel.sctp_mtu(1400, false), Some(1400 - 57 - 20));
        assert_eq!(tunnel.sctp_mtu(60, false), None);
    }
}
