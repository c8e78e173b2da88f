//! The IPsec configuration file: DPDK `ipsec-secgw`'s `sa` and `sp` rules, the subset an SCTP
//! endpoint needs, plus per-SA ESN, replay window and lifetimes (documented in `docs/ipsec.md`).
//!
//! ```text
//! sa out 1000 aead_algo aes-128-gcm aead_key 2b:7e:...:15:ca:fe:ba:be mode transport
//! sa in 2000 cipher_algo aes-128-cbc cipher_key ... auth_algo sha256-hmac auth_key ... \
//!     mode ipv4-tunnel src 198.18.0.2 dst 198.18.0.1 esn replay-win 256 life-bytes 1000000000
//! sp ipv4 out esp protect 1000 pri 10 dst 198.18.0.2/32 proto sctp dport 5000:5000
//! sp ipv4 in esp protect 2000 pri 10 src 198.18.0.2/32 proto sctp
//! sp ipv4 in esp discard pri 1 proto sctp
//! ```
//!
//! As in `ipsec-secgw`, an AES-GCM `aead_key` ends with the 4-byte salt (RFC 4106 §8.1).

use std::net::IpAddr;

use super::{
    Action, Algorithm, Direction, Lifetime, Mode, Offload, Policy, Prefix, SaConfig, Selector, Spd,
    DEFAULT_REPLAY_WINDOW, IPPROTO_SCTP, MAX_REPLAY_WINDOW,
};

/// Every SA and policy of one configuration.
#[derive(Debug, Clone, Default)]
pub struct IpsecConfig {
    pub sas: Vec<SaConfig>,
    pub spd: Spd,
}

impl IpsecConfig {
    /// The SA with this SPI and direction.
    pub fn sa(&self, direction: Direction, spi: u32) -> Option<&SaConfig> {
        self.sas
            .iter()
            .find(|s| s.direction == direction && s.spi == spi)
    }

    /// Adds an SA, refusing a second one with the same SPI and direction.
    pub fn add_sa(&mut self, sa: SaConfig) -> Result<(), String> {
        sa.validate()?;
        if self.sa(sa.direction, sa.spi).is_some() {
            return Err(format!("SA {} {} is defined twice", sa.direction, sa.spi));
        }
        // What the port refuses anyway (a key is used once: RFC 4106 §8.1's nonces, RFC 4303
        // §3.4.3's replay window; and for one purpose), said here, where a file's line can be
        // named.
        let prints = key_prints(&sa);
        let cross = cross_use_prints(&sa);
        for other in &self.sas {
            let theirs = recorded_prints(other);
            if prints.iter().any(|p| theirs.contains(p)) {
                return Err(format!(
                    "SA {} {} has the key of SA {} {}: a key is used once; give it a new key",
                    sa.direction, sa.spi, other.direction, other.spi
                ));
            }
            if cross.iter().any(|p| theirs.contains(p)) {
                return Err(format!(
                    "SA {} {} has the key of SA {} {} in another use (a cipher key as an HMAC \
                     key, or an HMAC key as a cipher key): a key is used once, for one purpose; \
                     give it a new key",
                    sa.direction, sa.spi, other.direction, other.spi
                ));
            }
        }
        self.sas.push(sa);
        Ok(())
    }

    /// Adds a policy whose SA (if it protects) exists in its direction.
    pub fn add_policy(&mut self, p: Policy) -> Result<(), String> {
        if let Action::Protect(spi) = p.action {
            if self.sa(p.direction, spi).is_none() {
                return Err(format!(
                    "policy protects with SA {} {spi}, which is not defined (define the sa first)",
                    p.direction
                ));
            }
        }
        self.spd.add(p);
        Ok(())
    }

    /// Takes out an SA. Policies that protect with it stay: what they select is then dropped
    /// and counted until the key manager installs the SA that replaces it (fail closed).
    pub fn remove_sa(&mut self, direction: Direction, spi: u32) -> Result<SaConfig, String> {
        let at = self
            .sas
            .iter()
            .position(|s| s.direction == direction && s.spi == spi)
            .ok_or_else(|| format!("no SA {direction} {spi}"))?;
        Ok(self.sas.remove(at))
    }

    /// Takes out the policy equal to `p` (the first, if written twice), and says where it was:
    /// a key manager deletes what it added by the rule it added, whatever was added or deleted
    /// since (the numbers `show ipsec` gives shift).
    pub fn remove_policy_like(&mut self, p: &Policy) -> Result<(usize, Policy), String> {
        let index = self
            .spd
            .policies()
            .iter()
            .position(|q| q == p)
            .ok_or_else(|| format!("no policy {p}"))?;
        self.remove_policy(index).map(|p| (index, p))
    }

    /// Takes out the policy at `index` of the SPD (the order `show ipsec` numbers them in).
    pub fn remove_policy(&mut self, index: usize) -> Result<Policy, String> {
        let n = self.spd.policies().len();
        self.spd
            .remove(index)
            .ok_or_else(|| format!("no policy {index} (there are {n})"))
    }

    /// The most bytes ESP adds to any packet: what the path MTU must leave free.
    pub fn max_overhead(&self) -> usize {
        self.sas
            .iter()
            .filter(|s| s.direction == Direction::Out)
            .map(SaConfig::overhead)
            .max()
            .unwrap_or(0)
    }
}

/// Fingerprints (SHA-256) of each key of `sa`, the ones "a key is used once" is kept on:
/// the cipher key with its salt (AES-GCM's nonce is salt and sequence number, RFC 4106 §4),
/// and the HMAC key apart from it. Kept on the three together, an SA with a new cipher key
/// and an old SA's HMAC key was taken: under the old SPI, the old SA's recorded packets pass
/// its ICV, and one with a high sequence number moves the new replay window past every real
/// packet (RFC 4303 §3.4.3, §3.4.4).
pub fn key_prints(sa: &SaConfig) -> Vec<[u8; 32]> {
    let mut prints = vec![print(b"cipher", &[&sa.key, &sa.salt.to_be_bytes()])];
    // AES-GCM has no HMAC key: its empty one is no key to share.
    if !sa.auth_key.is_empty() {
        prints.push(print(b"auth", &[&sa.auth_key]));
    }
    prints
}

/// The fingerprints kept of an SA that holds its keys: [`key_prints`], and its cipher key
/// without the salt, against which a later SA's HMAC key is checked ([`cross_use_prints`]).
pub fn recorded_prints(sa: &SaConfig) -> Vec<[u8; 32]> {
    let mut prints = key_prints(sa);
    prints.push(print(b"cipher key", &[&sa.key]));
    prints
}

/// What refuses `sa` found among the [`recorded_prints`] of an SA before it, beside its own
/// [`key_prints`]: its cipher key as that SA's HMAC key, and its HMAC key as that SA's cipher
/// key (salt or not). AES-256-CBC's key and HMAC-SHA-256's are both 32 bytes, so one SA's
/// cipher key could be another's HMAC key, and the two fingerprints, kept apart by use, never
/// met: a key is used for one purpose too (NIST SP 800-57 Part 1 §5.2), and an HMAC key that
/// was a cipher key has had its own ciphertexts on the wire.
pub fn cross_use_prints(sa: &SaConfig) -> Vec<[u8; 32]> {
    let mut prints = vec![print(b"auth", &[&sa.key])];
    if !sa.auth_key.is_empty() {
        prints.push(print(b"cipher key", &[&sa.auth_key]));
    }
    prints
}

/// SHA-256 of `what` and each of `parts`, each led by its length, so that no two lists of
/// parts run together into the same bytes.
fn print(what: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(what);
    for part in parts {
        h.update((part.len() as u32).to_be_bytes());
        h.update(part);
    }
    h.finalize().into()
}

/// A line of the file that could not be taken, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Reads a whole configuration; `#` starts a comment and a trailing `\` continues a line.
pub fn parse_config(text: &str) -> Result<IpsecConfig, ConfigError> {
    let mut cfg = IpsecConfig::default();
    let mut pending = String::new();
    let mut first = 0;
    for (n, raw) in text.lines().enumerate() {
        // `lines` ends a line at LF or CRLF; a CR left inside is a file of CR-only line ends
        // (taken as one line, its rules would all be refused as the first's words) or a stray
        // byte.
        if raw.contains('\r') {
            return Err(ConfigError {
                line: n + 1,
                message: "a carriage return inside the line: lines end with LF (or CRLF)".into(),
            });
        }
        let line = raw.split('#').next().unwrap_or("").trim_end();
        if pending.is_empty() {
            first = n + 1;
        }
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        let words: Vec<&str> = pending.split_whitespace().collect();
        let r = parse_rule(&mut cfg, &words);
        pending.clear();
        r.map_err(|message| ConfigError {
            line: first,
            message,
        })?;
    }
    // A rule cut short by the end of the file is refused, not dropped: a policy missing
    // from a security configuration changes what goes in the clear.
    if !pending.trim().is_empty() {
        return Err(ConfigError {
            line: first,
            message: "the rule continues (a trailing \\) past the end of the file".into(),
        });
    }
    Ok(cfg)
}

/// Takes one rule (`sa ...` or `sp ...`) into `cfg`; also what the shell's `ipsec sa add` and
/// `ipsec sp add` parse.
pub fn parse_rule(cfg: &mut IpsecConfig, words: &[&str]) -> Result<(), String> {
    match words.first() {
        None => Ok(()),
        Some(&"sa") => cfg.add_sa(parse_sa(&words[1..])?),
        Some(&"sp") => cfg.add_policy(parse_sp(&words[1..])?),
        Some(w) => Err(format!("unknown rule {} (expected sa or sp)", shown(w))),
    }
}

/// `got` for a message: the word quoted, or that there was none.
fn got(w: Option<&&str>) -> String {
    w.map_or_else(|| "nothing".to_string(), |w| shown(w))
}

/// A word of the input quoted for a message, cut at 32 characters: a line that is one long
/// word (a binary file) is not echoed whole. What may be a key is not echoed at all: cut, it
/// would no longer be found whole by [`keys_hidden`].
fn shown(w: &str) -> String {
    const MAX: usize = 32;
    if hidden_word(Some("_key"), w) {
        return "(key hidden)".into();
    }
    match w.char_indices().nth(MAX) {
        Some((at, _)) => format!("{:?}...", &w[..at]),
        None => format!("{w:?}"),
    }
}

fn direction(w: Option<&&str>) -> Result<Direction, String> {
    match w {
        Some(&"in") => Ok(Direction::In),
        Some(&"out") => Ok(Direction::Out),
        other => Err(format!("expected in or out, got {}", got(other))),
    }
}

fn number<T: std::str::FromStr>(what: &str, w: Option<&&str>) -> Result<T, String> {
    let w = w.ok_or_else(|| format!("{what} needs a value"))?;
    // Rust's parse takes a leading `+` (`+1000`); no rule writes one, and an SPI or a
    // length so written is a typo, as ipsec-secgw has it.
    if w.starts_with('+') {
        return Err(format!("{what}: {} is not a number in range", shown(w)));
    }
    w.parse()
        .map_err(|_| format!("{what}: {} is not a number in range", shown(w)))
}

fn bytes(what: &str, w: Option<&&str>) -> Result<Vec<u8>, String> {
    let w = w.ok_or_else(|| format!("{what} needs a value"))?;
    // ipsec-secgw's groups are one or two digits each: an empty group or a longer one is a
    // typo, not a byte (taken, it would make another key).
    let groups_ok = |g: &str| (1..=2).contains(&g.len());
    let hex: String = match w.strip_prefix("0x") {
        Some(h) => h.to_owned(),
        None if w.split(':').all(groups_ok) => w.split(':').map(|b| format!("{b:0>2}")).collect(),
        None => String::from("?"),
    };
    if !hex.len().is_multiple_of(2) || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!(
            "{what}: expected hex bytes (aa:bb:... or 0xaabb...)"
        ));
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).map_err(|e| e.to_string()))
        .collect()
}

/// Whether `word` may be key material: 16 bytes or more of hex (`aa:bb:...` or `0xaabb...`),
/// the shortest key an SA takes. A 64-bit value (an atomic's operand) is not, nor an IPv6
/// address (8 groups at most).
pub fn may_be_key(word: &str) -> bool {
    let hex = word.strip_prefix("0x").unwrap_or(word);
    if !hex.chars().all(|c| c.is_ascii_hexdigit() || c == ':') {
        return false;
    }
    let digits = hex.chars().filter(|c| *c != ':').count();
    // [`bytes`] takes a one-digit group as a byte: 16 groups are 16 bytes in as few as 16
    // digits (`1:2:...:f:0`), which counting digits alone let through.
    let groups = if hex.contains(':') {
        hex.split(':').count()
    } else {
        0
    };
    digits >= 32 || groups >= 16
}

/// Whether `word`, following `before`, is to be hidden: the value of a key keyword (spelled
/// right or not), or anything that may be key material wherever it stands.
pub fn hidden_word(before: Option<&str>, word: &str) -> bool {
    let after_key = before.is_some_and(|b| b.ends_with("_key") || b.ends_with("-key"));
    may_be_key(word)
        || (after_key
            && word.len() >= 4
            && word
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == 'x'))
}

/// `message` with every word of `rule` that [`hidden_word`] hides replaced, so that no error
/// about a rule echoes its key, wherever in the rule the key stood.
fn keys_hidden(message: String, rule: &[&str]) -> String {
    let mut out = message;
    for (i, w) in rule.iter().enumerate() {
        if !hidden_word(i.checked_sub(1).map(|j| rule[j]), w) {
            continue;
        }
        out = hidden_in(&out, w);
    }
    out
}

/// `message` with `word`, a word to hide, replaced: key material wherever it stands, a short
/// word after a key keyword (`aead_key aead`) only where it stands alone ("aead_key" in the
/// message is not it).
pub fn hidden_in(message: &str, word: &str) -> String {
    if may_be_key(word) {
        message.replace(word, "(key hidden)")
    } else {
        whole_words_replaced(message, word, "(key hidden)")
    }
}

/// `text` with `word` replaced where no letter, digit or `_` touches it.
fn whole_words_replaced(text: &str, word: &str, with: &str) -> String {
    let part_of_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(word) {
        let (before, after) = (&rest[..at], &rest[at + word.len()..]);
        out.push_str(before);
        let alone =
            !part_of_word(before.chars().next_back()) && !part_of_word(after.chars().next());
        out.push_str(if alone { with } else { word });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// One `sa` rule, the words after `sa` (`in 1000 aead_algo ...`). Its errors never show a key.
pub fn parse_sa(w: &[&str]) -> Result<SaConfig, String> {
    sa_rule(w).map_err(|e| keys_hidden(e, w))
}

fn sa_rule(w: &[&str]) -> Result<SaConfig, String> {
    let dir = direction(w.first())?;
    let spi: u32 = number("spi", w.get(1))?;
    let mut aead: Option<(&str, Vec<u8>)> = None;
    let mut cipher: Option<(&str, Vec<u8>)> = None;
    let mut auth: Option<(&str, Vec<u8>)> = None;
    let mut mode = None;
    let (mut src, mut dst) = (None, None);
    let mut esn = false;
    let mut window = None;
    let mut lifetime = Lifetime::default();
    let mut offload = None;
    let mut port_id = None;
    let mut i = 2;
    let mut seen: Vec<&str> = Vec::new();
    while i < w.len() {
        let key = w[i];
        let val = w.get(i + 1);
        i += 2;
        // A second `mode` (or key, ...) silently winning would hide a mistake in the rule.
        if seen.contains(&key) {
            return Err(format!("sa keyword {key:?} given twice"));
        }
        seen.push(key);
        match key {
            "aead_algo" => aead = Some((val.copied().unwrap_or(""), Vec::new())),
            "aead_key" => match aead.as_mut() {
                Some(a) => a.1 = bytes(key, val)?,
                None => return Err("aead_key before aead_algo".into()),
            },
            "cipher_algo" => cipher = Some((val.copied().unwrap_or(""), Vec::new())),
            "cipher_key" => match cipher.as_mut() {
                Some(c) => c.1 = bytes(key, val)?,
                None => return Err("cipher_key before cipher_algo".into()),
            },
            "auth_algo" => auth = Some((val.copied().unwrap_or(""), Vec::new())),
            "auth_key" => match auth.as_mut() {
                Some(a) => a.1 = bytes(key, val)?,
                None => return Err("auth_key before auth_algo".into()),
            },
            "mode" => mode = val.copied(),
            "src" => {
                src = Some(
                    val.copied()
                        .unwrap_or("")
                        .parse::<IpAddr>()
                        .map_err(|e| format!("src: {e}"))?,
                )
            }
            "dst" => {
                dst = Some(
                    val.copied()
                        .unwrap_or("")
                        .parse::<IpAddr>()
                        .map_err(|e| format!("dst: {e}"))?,
                )
            }
            "esn" => {
                esn = true;
                i -= 1;
            }
            "replay-win" => {
                let n = number::<u32>(key, val)?;
                if u64::from(n) > MAX_REPLAY_WINDOW {
                    return Err(format!(
                        "replay-win: {n} is above the largest window, {MAX_REPLAY_WINDOW} \
                         packets (rte_ipsec's)"
                    ));
                }
                window = Some(n);
            }
            "life-bytes" => lifetime.bytes = Some(number(key, val)?),
            "life-secs" => lifetime.secs = Some(number(key, val)?),
            "soft-life-bytes" => lifetime.soft_bytes = Some(number(key, val)?),
            "soft-life-secs" => lifetime.soft_secs = Some(number(key, val)?),
            // ipsec-secgw's action type, so its configuration files load as they are. Its two
            // software types mean the same SA here: the crypto runs on the process's crypto
            // device, as CPU crypto where the device does it (`--ipsec-crypto-dev`). Inline
            // crypto runs on the port's NIC, and an SA it cannot do is refused when it is
            // added, never run in software behind the operator's back; no type at all takes
            // the NIC where it can and the crypto device otherwise. The protocol offloads
            // (the device doing all of ESP) are refused by name.
            "type" => match val.copied() {
                Some("lookaside-none" | "cpu-crypto") => offload = Some(Offload::Software),
                Some("inline-crypto-offload") => offload = Some(Offload::Inline { port: None }),
                Some(t @ ("inline-protocol-offload" | "lookaside-protocol-offload")) => {
                    return Err(format!(
                        "type {t}: a device doing the whole ESP protocol is not supported; \
                         use inline-crypto-offload, lookaside-none or cpu-crypto"
                    ))
                }
                other => {
                    return Err(format!(
                        "type must be lookaside-none, cpu-crypto, inline-crypto-offload, \
                         inline-protocol-offload or lookaside-protocol-offload, got {}",
                        got(other.as_ref())
                    ))
                }
            },
            // ipsec-secgw names the port of an inline type (and parses it for every type,
            // using it for the inline ones only): the IPsec port checks it is its own.
            "port_id" => port_id = Some(number::<u16>(key, val)?),
            // A value where a keyword belongs may be key material (a keyword left out before
            // it): not echoed.
            other
                if other
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() || c == ':' || c == 'x') =>
            {
                return Err(format!(
                    "a value where an sa keyword belongs, after {:?} (not shown: it may be a key)",
                    w[i - 3]
                ))
            }
            other => return Err(format!("unknown sa keyword {}", shown(other))),
        }
    }
    let (algorithm, key, auth_key, salt) = match (aead, cipher, auth) {
        (Some((name, k)), None, None) => {
            let a = match name {
                "aes-128-gcm" => Algorithm::AesGcm128,
                "aes-256-gcm" => Algorithm::AesGcm256,
                other => {
                    return Err(format!(
                        "unsupported aead_algo {other:?} (aes-128-gcm, aes-256-gcm)"
                    ))
                }
            };
            if !seen.contains(&"aead_key") {
                return Err(format!(
                    "{name} needs aead_key ({} key bytes and a 4-byte salt)",
                    a.key_len()
                ));
            }
            if k.len() != a.key_len() + 4 {
                return Err(format!(
                    "{name} aead_key is {} key bytes and a 4-byte salt, got {} bytes",
                    a.key_len(),
                    k.len()
                ));
            }
            let salt = u32::from_be_bytes([
                k[k.len() - 4],
                k[k.len() - 3],
                k[k.len() - 2],
                k[k.len() - 1],
            ]);
            (a, k[..k.len() - 4].to_vec(), Vec::new(), salt)
        }
        (None, Some((c, k)), Some((h, hk))) => {
            let a = match (c, h) {
                ("aes-128-cbc", "sha256-hmac") => Algorithm::AesCbc128HmacSha256,
                ("aes-256-cbc", "sha256-hmac") => Algorithm::AesCbc256HmacSha256,
                _ => {
                    return Err(format!(
                        "unsupported cipher_algo/auth_algo {c}/{h} (aes-128-cbc or aes-256-cbc with sha256-hmac)"
                    ))
                }
            };
            (a, k, hk, 0)
        }
        (None, None, None) => {
            return Err("an sa needs aead_algo, or cipher_algo and auth_algo".into())
        }
        _ => return Err("an sa takes aead_algo alone, or cipher_algo with auth_algo".into()),
    };
    let mode = match (mode, src, dst) {
        (Some("transport"), None, None) => Mode::Transport,
        (Some("transport"), _, _) => return Err("transport mode takes no src/dst".into()),
        (Some(m @ ("ipv4-tunnel" | "ipv6-tunnel")), Some(s), Some(d)) => {
            if s.is_ipv4() != (m == "ipv4-tunnel") || d.is_ipv4() != (m == "ipv4-tunnel") {
                return Err(format!("{m}: src and dst must be of that family"));
            }
            Mode::Tunnel { src: s, dst: d }
        }
        (Some("ipv4-tunnel" | "ipv6-tunnel"), _, _) => {
            return Err("tunnel mode needs src and dst".into())
        }
        (m, _, _) => {
            return Err(format!(
                "mode must be transport, ipv4-tunnel or ipv6-tunnel, got {}",
                got(m.as_ref())
            ))
        }
    };
    // The window is the receiver's (RFC 4303 §3.4.3): on an outbound SA it would be taken
    // and do nothing.
    if window.is_some() && dir == Direction::Out {
        return Err(
            "replay-win is the receiver's (RFC 4303 §3.4.3): give it to the inbound SA".into(),
        );
    }
    let replay_window = window.unwrap_or(match dir {
        Direction::In => DEFAULT_REPLAY_WINDOW,
        Direction::Out => 0,
    });
    let offload = match offload {
        Some(Offload::Inline { .. }) => Offload::Inline { port: port_id },
        other => other.unwrap_or_default(),
    };
    Ok(SaConfig {
        spi,
        direction: dir,
        algorithm,
        key,
        auth_key,
        salt,
        mode,
        esn,
        replay_window,
        lifetime,
        offload,
    })
}

fn range(what: &str, w: Option<&&str>) -> Result<std::ops::RangeInclusive<u16>, String> {
    let w = w.ok_or_else(|| format!("{what} needs from:to"))?;
    let (a, b) = w.split_once(':').unwrap_or((w, w));
    let a: u16 = number(what, Some(&a))?;
    let b: u16 = number(what, Some(&b))?;
    if a > b {
        return Err(format!("{what} {w}: empty range"));
    }
    Ok(a..=b)
}

/// One `sp` rule, the words after `sp` (`ipv4 in esp protect 1000 ...`). A key pasted into
/// one by mistake is not shown in its errors either.
pub fn parse_sp(w: &[&str]) -> Result<Policy, String> {
    sp_rule(w).map_err(|e| keys_hidden(e, w))
}

fn sp_rule(w: &[&str]) -> Result<Policy, String> {
    let all = match w.first() {
        Some(&"ipv4") => "0.0.0.0/0",
        Some(&"ipv6") => "::/0",
        other => return Err(format!("sp needs ipv4 or ipv6, got {}", got(other))),
    };
    let all: Prefix = all.parse()?;
    let dir = direction(w.get(1))?;
    if w.get(2) != Some(&"esp") {
        return Err("sp <ipv4|ipv6> <in|out> esp <protect SPI|bypass|discard> ...".into());
    }
    let (action, mut i) = match w.get(3) {
        Some(&"protect") => (Action::Protect(number("protect", w.get(4))?), 5),
        Some(&"bypass") => (Action::Bypass, 4),
        Some(&"discard") => (Action::Discard, 4),
        other => {
            return Err(format!(
                "expected protect, bypass or discard, got {}",
                got(other)
            ))
        }
    };
    let mut priority = 0;
    let mut sel = Selector {
        src: Some(all),
        dst: Some(all),
        ..Selector::default()
    };
    let mut seen: Vec<&str> = Vec::new();
    while i < w.len() {
        let (key, val) = (w[i], w.get(i + 1));
        i += 2;
        if seen.contains(&key) {
            return Err(format!("sp keyword {key:?} given twice"));
        }
        seen.push(key);
        let prefix = |v: Option<&&str>| -> Result<Prefix, String> {
            let p: Prefix = v.ok_or_else(|| format!("{key} needs a value"))?.parse()?;
            if p.addr.is_ipv4() != all.addr.is_ipv4() {
                return Err(format!("{key}: not an address of this rule's family"));
            }
            Ok(p)
        };
        match key {
            "pri" => priority = number(key, val)?,
            "src" => sel.src = Some(prefix(val)?),
            "dst" => sel.dst = Some(prefix(val)?),
            "proto" => {
                sel.proto = Some(match val {
                    Some(&"sctp") => IPPROTO_SCTP,
                    Some(&name @ ("tcp" | "udp" | "icmp" | "icmpv6")) => {
                        return Err(format!(
                            "proto {name}: give its number (RFC 5043 §13 selects SCTP: sctp or 132)"
                        ))
                    }
                    // ipsec-secgw writes proto as from:to; a single protocol is what it means.
                    v => {
                        let r = range(key, v)?;
                        if r.start() != r.end() || *r.end() > 255 {
                            return Err("proto takes one protocol number (or sctp)".into());
                        }
                        *r.start() as u8
                    }
                })
            }
            "sport" => sel.sport = range(key, val)?,
            "dport" => sel.dport = range(key, val)?,
            "type" => sel.icmp_type = Some(number(key, val)?),
            "code" => sel.icmp_code = Some(number(key, val)?),
            other => return Err(format!("unknown sp keyword {}", shown(other))),
        }
    }
    // RFC 4301 §4.4.1.1: ICMP's type and code are its selectors, in place of ports.
    let icmp = if all.addr.is_ipv4() { 1 } else { 58 };
    if sel.icmp_type.is_some() || sel.icmp_code.is_some() {
        if sel.proto != Some(icmp) {
            return Err(format!(
                "type and code select ICMP messages: the rule needs proto {icmp}"
            ));
        }
        if sel.icmp_type.is_none() {
            return Err("code needs the message's type too (type T code C)".into());
        }
    }
    // ICMP has no ports: a port range on its rule could never match anything.
    let any = 0..=u16::MAX;
    if sel.proto == Some(icmp) && (sel.sport != any || sel.dport != any) {
        return Err("ICMP has no ports: select its messages with type T (and code C)".into());
    }
    Ok(Policy {
        direction: dir,
        priority,
        selector: sel,
        action,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;
    use crate::ipsec::Flow;

    const KEY16: &str = "2b:7e:15:16:28:ae:d2:a6:ab:f7:15:88:09:cf:4f:3c";

    /// ipsec-secgw's `type lookaside-none` and `type cpu-crypto` load as the same SA as no
    /// type at all but for who does the crypto (ipsec-secgw's own files carry them),
    /// `inline-crypto-offload` as an inline SA; its protocol offload types are refused
    /// (`mistakes_are_named_with_their_line`).
    #[test]
    fn secgw_software_types_load_as_the_same_sa() {
        let base =
            format!("out 1000 aead_algo aes-128-gcm aead_key {KEY16}:ca:fe:ba:be mode transport");
        let sa = |extra: &str| {
            parse_sa(
                &format!("{base}{extra}")
                    .split_whitespace()
                    .collect::<Vec<_>>(),
            )
        };
        let plain = sa("").unwrap();
        assert_eq!(plain.offload, Offload::Auto);
        for t in [" type lookaside-none", " type cpu-crypto"] {
            let typed = sa(t).unwrap();
            assert_eq!(typed.offload, Offload::Software, "{t}");
            assert_eq!(
                SaConfig {
                    offload: Offload::Auto,
                    ..typed
                },
                plain,
                "{t}"
            );
        }
        // Inline crypto, with or without ipsec-secgw's port; a port without it names a NIC
        // that would do nothing.
        assert_eq!(
            sa(" type inline-crypto-offload").unwrap().offload,
            Offload::Inline { port: None }
        );
        for t in [
            " type inline-crypto-offload port_id 3",
            " port_id 3 type inline-crypto-offload",
        ] {
            assert_eq!(
                sa(t).unwrap().offload,
                Offload::Inline { port: Some(3) },
                "{t}"
            );
        }
        // ipsec-secgw parses port_id with every type and uses it with the inline ones.
        assert_eq!(
            sa(" type cpu-crypto port_id 0").unwrap().offload,
            Offload::Software
        );
        assert!(sa(" type cpu-crypto type cpu-crypto")
            .unwrap_err()
            .contains("twice"));
        assert!(sa(" type").unwrap_err().contains("type must be"));
    }

    /// RFC 4301 §4.4.1.1: ICMP's message type and code are selectors, as ports are for SCTP:
    /// a rule lets ping's echo requests in and its replies out, and no other ICMP; the rule
    /// reads back as written (`show ipsec`); type and code outside ICMP, or a code without its
    /// type, are refused.
    #[test]
    fn icmp_type_and_code_are_selectors_4301_4_4_1_1() {
        let rule = |t: &str| parse_sp(&t.split_whitespace().collect::<Vec<_>>());
        let echo_in = rule("ipv4 in esp bypass pri 5 proto 1 type 8").unwrap();
        let unreachable = rule("ipv4 in esp discard pri 5 proto 1 type 3 code 1").unwrap();
        let v6 = rule("ipv6 in esp bypass pri 5 proto 58 type 128").unwrap();
        let icmp = |t, c| Flow {
            src: "198.18.0.1".parse().unwrap(),
            dst: "198.18.0.2".parse().unwrap(),
            proto: 1,
            sport: 0,
            dport: 0,
            ports: false,
            fragment: false,
            icmp: Some((t, c)),
        };
        assert!(echo_in.selector.matches(&icmp(8, 0)));
        assert!(!echo_in.selector.matches(&icmp(0, 0)), "an echo reply");
        assert!(!echo_in.selector.matches(&Flow {
            icmp: None,
            ..icmp(8, 0)
        }));
        assert!(unreachable.selector.matches(&icmp(3, 1)));
        assert!(!unreachable.selector.matches(&icmp(3, 4)));
        for p in [&echo_in, &unreachable, &v6] {
            let text = p.to_string();
            let back = rule(text.strip_prefix("sp ").unwrap()).unwrap();
            assert_eq!(&back, p, "{text}");
        }
        assert_eq!(
            unreachable.to_string(),
            "sp ipv4 in esp discard pri 5 proto 1 type 3 code 1"
        );
        for bad in [
            "ipv4 in esp bypass proto sctp type 8",
            "ipv4 in esp bypass type 8",
            "ipv6 in esp bypass proto 1 type 8",
            "ipv4 in esp bypass proto 1 code 1",
            "ipv4 in esp bypass proto 1 type 256",
            "ipv4 in esp bypass proto 1 type 8 sport 1:2",
            "ipv6 in esp bypass proto 58 dport 5:5",
        ] {
            assert!(rule(bad).is_err(), "{bad}");
        }
    }

    /// A rule whose last line ends in `\` is refused with its line, not dropped: the file
    /// below without the check read as 1 SA and 0 policies, so SCTP went in the clear.
    #[test]
    fn a_rule_continued_past_the_end_of_the_file_is_refused() {
        let text = format!(
            "sa out 1000 aead_algo aes-128-gcm aead_key {KEY16}:ca:fe:ba:be mode transport\n\
             sp ipv4 out esp protect 1000 pri 1 \\\n\
             \tproto sctp \\\n"
        );
        let e = parse_config(&text).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.message.contains("past the end of the file"), "{e}");
        // The same rule ended properly reads.
        let ok = text.trim_end_matches("\\\n").to_string() + "\n";
        assert_eq!(parse_config(&ok).unwrap().spd.policies().len(), 1);
    }

    /// A key typed with an empty or a three-digit group is refused: each group was padded to
    /// a byte and the groups joined, so `2b::15` and `2b7e:15` made other keys than meant
    /// (ipsec-secgw refuses them). A one-digit group is a byte, as there.
    #[test]
    fn a_key_with_an_empty_or_long_group_is_refused() {
        let w = |k: &'static str| bytes("aead_key", Some(&k));
        assert_eq!(w("2b:7e:5").unwrap(), [0x2b, 0x7e, 0x05]);
        assert_eq!(w("0x2b7e15").unwrap(), [0x2b, 0x7e, 0x15]);
        for bad in ["2b::15", "2b7e:15", ":2b", "2b:", "abc:def"] {
            assert!(w(bad).is_err(), "{bad} taken as {:02x?}", w(bad));
        }
    }

    /// A key written in one-digit groups (`1:2:...`, which [`bytes`] takes) may be a key
    /// however few its digits: `aead_algo 1:2:...:5` (a key where the algorithm belongs) was
    /// echoed in the error, as only 32 hex digits or more counted as a key.
    #[test]
    fn a_key_in_one_digit_groups_is_never_echoed() {
        let key = (0..20)
            .map(|i| format!("{:x}", i % 16))
            .collect::<Vec<_>>()
            .join(":");
        assert_eq!(bytes("aead_key", Some(&key.as_str())).unwrap().len(), 20);
        assert!(may_be_key(&key));
        let rule = format!("in 1000 aead_algo {key} mode transport");
        let e = parse_sa(&rule.split_whitespace().collect::<Vec<_>>()).unwrap_err();
        assert!(!e.contains("0:1:2") && e.contains("(key hidden)"), "{e}");
        // An IPv6 address (8 groups at most) or a 64-bit value is no key.
        for not_key in [
            "2001:db8:0:0:0:0:0:1",
            "fe80::1",
            "0x4d4d4d4d4d4d4d5c",
            "1000",
        ] {
            assert!(!may_be_key(not_key), "{not_key}");
        }
    }

    /// An inbound AES-`bits`-CBC + HMAC-SHA-256 SA whose cipher key is the byte `c` (two hex
    /// digits) repeated and whose 32-byte HMAC key is `h` repeated.
    fn cbc_sa(spi: u32, bits: usize, c: &str, h: &str) -> SaConfig {
        parse_sa(
            &format!(
                "in {spi} cipher_algo aes-{bits}-cbc cipher_key 0x{} auth_algo sha256-hmac \
                 auth_key 0x{} mode transport",
                c.repeat(bits / 8),
                h.repeat(32)
            )
            .split_whitespace()
            .collect::<Vec<_>>(),
        )
        .unwrap()
    }

    /// "A key is used once" holds for each key of an SA, not for its keys together: an SA
    /// whose HMAC key (or cipher key) another SA has is refused, though its other key is new.
    #[test]
    fn each_key_of_an_sa_is_used_once_rfc4303_3_4_3() {
        let cbc = |spi: u32, c: &str, h: &str| cbc_sa(spi, 128, c, h);
        let mut cfg = IpsecConfig::default();
        cfg.add_sa(cbc(1000, "11", "22")).unwrap();
        for (spi, c, h) in [(1001, "33", "22"), (1002, "11", "44")] {
            let e = cfg.add_sa(cbc(spi, c, h)).unwrap_err();
            assert!(e.contains("has the key of SA in 1000"), "{spi}: {e}");
        }
        cfg.add_sa(cbc(1003, "33", "44")).unwrap();
        // Two AES-GCM SAs share no key through their empty HMAC keys.
        let gcm = |spi: u32, k: &str| {
            parse_sa(
                &format!(
                    "in {spi} aead_algo aes-128-gcm aead_key 0x{} mode transport",
                    k.repeat(20)
                )
                .split_whitespace()
                .collect::<Vec<_>>(),
            )
            .unwrap()
        };
        cfg.add_sa(gcm(2000, "55")).unwrap();
        cfg.add_sa(gcm(2001, "66")).unwrap();
        assert_eq!(key_prints(&gcm(1, "55")).len(), 1);
        assert_eq!(key_prints(&cbc(1, "55", "66")).len(), 2);
    }

    /// A key is used for one purpose: one SA's AES-256-CBC cipher key as another's
    /// HMAC-SHA-256 key (both 32 bytes), or the other way, or one SA's as its own two keys,
    /// is refused; the check kept each key apart by use and never compared the two. No error
    /// says the key.
    #[test]
    fn a_cipher_key_is_never_an_hmac_key_rfc4303_3_4_3() {
        let cbc = |spi: u32, c: &str, h: &str| cbc_sa(spi, 256, c, h);
        let mut cfg = IpsecConfig::default();
        cfg.add_sa(cbc(1000, "11", "22")).unwrap();
        for (spi, c, h) in [(1001, "22", "33"), (1002, "44", "11")] {
            let e = cfg.add_sa(cbc(spi, c, h)).unwrap_err();
            assert!(
                e.contains("has the key of SA in 1000 in another use")
                    && e.contains("for one purpose"),
                "{spi}: {e}"
            );
            assert!(
                !e.contains(&c.repeat(4)) && !e.contains(&h.repeat(4)),
                "{e}"
            );
        }
        let e = cbc(1003, "55", "55").validate().unwrap_err();
        assert!(e.contains("for one purpose"), "{e}");
        assert!(!e.contains("5555"), "{e}");
        let e = cfg.add_sa(cbc(1003, "55", "55")).unwrap_err();
        assert!(e.contains("for one purpose") && !e.contains("5555"), "{e}");
        // New keys in both uses are taken.
        cfg.add_sa(cbc(1004, "66", "77")).unwrap();
    }

    /// `10.0.0.0/` (a length left out) was read as 10.0.0.0/32, and an SPI written `+1000`
    /// was taken as 1000 (Rust's parse takes the sign): both refused, as typos.
    #[test]
    fn a_prefix_with_nothing_after_its_slash_and_a_signed_number_are_refused() {
        for bad in ["10.0.0.0/", "2001:db8::/", "10.0.0.0/+8"] {
            let e = bad.parse::<Prefix>().unwrap_err();
            assert!(e.contains("not a prefix length"), "{bad}: {e}");
        }
        assert_eq!("10.0.0.1".parse::<Prefix>().unwrap().len, 32);
        assert_eq!("10.0.0.0/8".parse::<Prefix>().unwrap().len, 8);
        let words = |r: &str| r.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        let sa =
            format!("in +1000 aead_algo aes-128-gcm aead_key {KEY16}:ca:fe:ba:be mode transport");
        let w = words(&sa);
        let e = parse_sa(&w.iter().map(String::as_str).collect::<Vec<_>>()).unwrap_err();
        assert!(e.contains("spi") && e.contains("not a number"), "{e}");
        let w = words("ipv4 in esp discard pri +1 proto sctp");
        assert!(parse_sp(&w.iter().map(String::as_str).collect::<Vec<_>>()).is_err());
        let w = words("ipv4 in esp discard pri 1 src 10.0.0.0/ proto sctp");
        assert!(parse_sp(&w.iter().map(String::as_str).collect::<Vec<_>>()).is_err());
    }

    /// A short word hidden as a key's value is hidden where it stands alone, not inside the
    /// keywords of the message: `aead_key aead` read "aes-128-gcm (key hidden)_key is ...".
    #[test]
    fn a_hidden_short_value_leaves_the_keywords_of_the_message_alone() {
        let e = parse_sa(
            &"out 1000 aead_algo aes-128-gcm aead_key aead mode transport"
                .split_whitespace()
                .collect::<Vec<_>>(),
        )
        .unwrap_err();
        assert!(
            e.contains("aead_key") && !e.contains("(key hidden)_key"),
            "{e}"
        );
        assert!(
            !e.split(|c: char| !c.is_alphanumeric() && c != '_')
                .any(|w| w == "aead"),
            "{e}"
        );
        assert_eq!(
            whole_words_replaced("a aead_key \"aead\" aead", "aead", "X"),
            "a aead_key \"X\" X"
        );
    }

    /// `replay-win` above rte_ipsec's largest window is refused with its rule: the values
    /// above 2^31 were taken (the window's width overflowed to a tiny rte_ipsec window and
    /// 512 MiB of bits per SA), those between failed only once the EAL ran, naming neither
    /// the option nor the line.
    #[test]
    fn a_replay_window_above_the_largest_is_refused() {
        let sa = |n: u64| {
            parse_sa(
                &format!(
                    "in 1000 aead_algo aes-128-gcm aead_key {KEY16}:ca:fe:ba:be mode transport \
                     replay-win {n}"
                )
                .split_whitespace()
                .collect::<Vec<_>>(),
            )
        };
        assert_eq!(
            sa(MAX_REPLAY_WINDOW).unwrap().replay_window as u64,
            MAX_REPLAY_WINDOW
        );
        for n in [
            MAX_REPLAY_WINDOW + 1,
            1 << 31,
            (1 << 31) + 1,
            u64::from(u32::MAX),
        ] {
            let e = sa(n).unwrap_err();
            assert!(
                e.contains("replay-win") && e.contains("largest"),
                "{n}: {e}"
            );
        }
    }

    /// What was taken without a word and did nothing or could not work (found by an
    /// outside-in test): a soft lifetime of 0, due before the first packet; `replay-win` on
    /// an outbound SA (RFC 4303 §3.4.3: the window is the receiver's); a tunnel endpoint no
    /// host has (RFC 4301 §5.1.2.1's outer header is between two hosts).
    #[test]
    fn an_sa_that_could_not_work_as_written_is_refused() {
        let sa = |rest: &str| {
            parse_sa(
                &format!("{rest} aead_algo aes-128-gcm aead_key {KEY16}:ca:fe:ba:be")
                    .split_whitespace()
                    .collect::<Vec<_>>(),
            )
            .and_then(|sa| sa.validate().map(|()| sa))
        };
        assert!(sa("in 1000 mode transport soft-life-secs 10 life-secs 20").is_ok());
        for (rule, says) in [
            (
                "in 1000 mode transport soft-life-secs 0",
                "soft lifetime of 0",
            ),
            (
                "in 1000 mode transport soft-life-bytes 0",
                "soft lifetime of 0",
            ),
            (
                "out 1000 mode transport replay-win 64",
                "replay-win is the receiver's",
            ),
            (
                "in 1000 mode ipv4-tunnel src 0.0.0.0 dst 198.18.0.1",
                "0.0.0.0 is no host's",
            ),
            (
                "out 1000 mode ipv4-tunnel src 198.18.0.1 dst 255.255.255.255",
                "no host's",
            ),
            (
                "out 1000 mode ipv6-tunnel src 2001:db8::1 dst ff02::1",
                "no host's",
            ),
        ] {
            let e = sa(rule).unwrap_err();
            assert!(e.contains(says), "{rule}: {e}");
        }
    }

    /// A file whose lines end in CR alone is refused at its first line, not read as one line;
    /// a word of the input is echoed 32 characters at most (a pasted blob was echoed whole).
    #[test]
    fn a_file_of_cr_line_ends_and_a_long_word_are_named_briefly() {
        let e = parse_config("# one\rsp ipv4 in esp discard\r").unwrap_err();
        assert_eq!(e.line, 1, "{e}");
        assert!(e.message.contains("carriage return"), "{e}");
        assert!(parse_config("sp ipv4 in esp discard\r\n").is_ok());
        let long = "z".repeat(5000);
        let e = parse_config(&long).unwrap_err().to_string();
        assert!(e.len() < 100 && e.contains("unknown rule"), "{e}");
    }

    /// What an operator typing a rule by hand gets wrong is named in the operator's words.
    #[test]
    fn mistakes_in_a_rule_are_named_plainly() {
        let sa = |rest: &str| parse_sa(&rest.split_whitespace().collect::<Vec<_>>()).unwrap_err();
        assert_eq!(sa("sideways 1000"), "expected in or out, got \"sideways\"");
        assert_eq!(sa(""), "expected in or out, got nothing");
        assert!(sa("out 1000 aead_algo aes-128-gcm mode transport")
            .contains("needs aead_key (16 key bytes and a 4-byte salt)"));
        assert_eq!(
            sa(&format!(
                "out 1000 aead_algo aes-128-gcm aead_key {KEY16}:00:00:00:01 mode transport \
                 mode ipv4-tunnel src 198.18.0.1 dst 198.18.0.2"
            )),
            "sa keyword \"mode\" given twice"
        );
        // A key whose keyword was left out is not echoed back.
        let e = sa(&format!(
            "out 1000 aead_algo aes-128-gcm {KEY16}:00:00:00:01 mode transport"
        ));
        assert!(
            e.contains("not shown: it may be a key") && !e.contains("2b:7e"),
            "{e}"
        );
        // Nor a key typed twice, nor one where another value belongs, nor one pasted into a
        // policy: whatever the error, no word of the rule that may be a key is in it.
        let key = format!("{KEY16}:00:00:00:01");
        for rule in [
            format!("out 1000 aead_algo aes-128-gcm aead_key {key} {key} mode transport"),
            format!("{key} 1000 aead_algo aes-128-gcm aead_key {key} mode transport"),
            format!("out {key} aead_algo aes-128-gcm aead_key {key} mode transport"),
            format!("out 1000 aead_algo {key} aead_key {key} mode transport"),
            format!("out 1000 aead_algo aes-128-gcm aead_key {key} mode {key}"),
            format!(
                "out 1000 aead_algo aes-128-gcm aead_key {key} mode transport replay-win {key}"
            ),
            format!(
                "out 1000 aead_algo aes-128-gcm aead_key 0x{} mode transport",
                "ab".repeat(15)
            ),
        ] {
            let e = sa(&rule);
            assert!(!e.contains("2b:7e") && !e.contains("abab"), "{rule}: {e}");
        }
        let words = format!("ipv4 in esp protect {key} pri 1 proto sctp");
        let e = parse_sp(&words.split_whitespace().collect::<Vec<_>>()).unwrap_err();
        assert!(!e.contains("2b:7e") && e.contains("(key hidden)"), "{e}");
        assert!(
            sa("out 1000 aead_algo aes-128-gcm aead_key 0x mode transport").contains("got 0 bytes")
        );
        // A lone `\` on the last line loses nothing, and is no error.
        assert!(parse_config("sp ipv4 in esp bypass pri 1\n\\\n").is_ok());
        let twice = format!(
            "sa out 1000 aead_algo aes-128-gcm aead_key {KEY16}:00:00:00:01 mode transport\n\
             sa in 1001 aead_algo aes-128-gcm aead_key {KEY16}:00:00:00:01 mode transport\n"
        );
        let e = parse_config(&twice).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.message.contains("has the key of SA out 1000"), "{e}");
        let sp = |rest: &str| parse_sp(&rest.split_whitespace().collect::<Vec<_>>()).unwrap_err();
        assert!(sp("ipv4 in esp discard proto udp").contains("give its number"));
        assert_eq!(
            sp("ipv4 in esp discard pri 1 pri 2"),
            "sp keyword \"pri\" given twice"
        );
        assert_eq!(
            sp("ipv4 in esp"),
            "expected protect, bypass or discard, got nothing"
        );
    }

    #[test]
    fn a_secgw_style_file_reads_into_sas_and_policies() {
        let text = format!(
            "# ddpdk test\n\
             sa out 1000 aead_algo aes-128-gcm aead_key {KEY16}:ca:fe:ba:be mode transport\n\
             sa in 2000 cipher_algo aes-128-cbc cipher_key {KEY16} \\\n\
             \tauth_algo sha256-hmac auth_key 0x{} mode ipv4-tunnel src 198.18.0.2 dst 198.18.0.1 \\\n\
             \tesn replay-win 256 life-bytes 1000000 life-secs 3600 soft-life-bytes 900000 \\\n\
             \tsoft-life-secs 3000\n\
             sp ipv4 out esp protect 1000 pri 10 dst 198.18.0.2/32 proto sctp dport 5000:5000\n\
             sp ipv4 in esp protect 2000 pri 10 src 198.18.0.2 proto 132:132\n\
             sp ipv4 in esp discard pri 1 proto sctp\n",
            "11".repeat(32)
        );
        let cfg = parse_config(&text).unwrap();
        let out = cfg.sa(Direction::Out, 1000).unwrap();
        assert_eq!(out.algorithm, Algorithm::AesGcm128);
        assert_eq!(out.key[0], 0x2b);
        assert_eq!(out.salt, 0xcafe_babe);
        assert_eq!(out.mode, Mode::Transport);
        assert!(!out.esn);
        let inb = cfg.sa(Direction::In, 2000).unwrap();
        assert_eq!(inb.algorithm, Algorithm::AesCbc128HmacSha256);
        assert_eq!(inb.auth_key, vec![0x11; 32]);
        assert!(inb.esn);
        assert_eq!(inb.replay_window, 256);
        assert_eq!(
            inb.lifetime,
            Lifetime {
                bytes: Some(1_000_000),
                secs: Some(3600),
                soft_bytes: Some(900_000),
                soft_secs: Some(3000),
            }
        );
        // RFC 4301 §4.4.2.1: the soft lifetime is less than the hard one.
        let bad = parse_sa(&[
            "out",
            "1000",
            "aead_algo",
            "aes-128-gcm",
            "aead_key",
            &format!("{KEY16}:ca:fe:ba:be"),
            "mode",
            "transport",
            "life-bytes",
            "1000",
            "soft-life-bytes",
            "1000",
        ])
        .and_then(|sa| sa.validate().map(|()| sa));
        let e = bad.unwrap_err();
        assert!(e.contains("soft lifetime"), "{e}");
        assert!(matches!(inb.mode, Mode::Tunnel { .. }));
        assert_eq!(cfg.spd.policies().len(), 3);
        let to_peer = Flow {
            src: "198.18.0.1".parse().unwrap(),
            dst: "198.18.0.2".parse().unwrap(),
            proto: IPPROTO_SCTP,
            sport: 7,
            dport: 5000,
            ports: true,
            fragment: false,
            icmp: None,
        };
        assert_eq!(
            cfg.spd.action(Direction::Out, &to_peer),
            Action::Protect(1000)
        );
        let from_peer = Flow {
            src: to_peer.dst,
            dst: to_peer.src,
            ..to_peer
        };
        assert_eq!(
            cfg.spd.action(Direction::In, &from_peer),
            Action::Protect(2000)
        );
        let stranger = Flow {
            src: "198.18.0.9".parse().unwrap(),
            ..from_peer
        };
        assert_eq!(cfg.spd.action(Direction::In, &stranger), Action::Discard);
        // An ipv4 rule never selects IPv6 traffic (which no policy names: RFC 4301 §5's
        // default discards it).
        let v6 = Flow {
            src: "2001:db8::2".parse().unwrap(),
            dst: "2001:db8::1".parse().unwrap(),
            ..from_peer
        };
        assert!(cfg.spd.lookup(Direction::In, &v6).is_none());
        assert_eq!(cfg.spd.action(Direction::In, &v6), Action::Discard);
    }

    /// What `show ipsec` prints of a policy reads back into the same policy, so an operator
    /// can copy a rule from one endpoint's listing into another's configuration.
    #[test]
    fn a_policy_prints_as_the_rule_that_reads_back_into_it() {
        let sa =
            format!("sa in 1000 aead_algo aes-128-gcm aead_key {KEY16}:ca:fe:ba:be mode transport");
        for rule in [
            "sp ipv4 out esp protect 1000 pri 10 dst 198.18.0.2/32 proto sctp dport 5000:5000",
            "sp ipv4 in esp protect 1000 pri 3 src 198.18.0.0/15 proto sctp sport 1:9",
            "sp ipv6 in esp discard pri 1 src 2001:db8::/32 proto 17",
            "sp ipv4 in esp bypass pri 0",
        ] {
            let mut cfg = IpsecConfig::default();
            parse_rule(&mut cfg, &sa.split_whitespace().collect::<Vec<_>>()).unwrap();
            let out = sa.replace("sa in", "sa out").replace("ba:be", "ba:bf");
            parse_rule(&mut cfg, &out.split_whitespace().collect::<Vec<_>>()).unwrap();
            parse_rule(&mut cfg, &rule.split_whitespace().collect::<Vec<_>>()).unwrap();
            let p = cfg.spd.policies()[0].clone();
            assert_eq!(p.to_string(), rule);
            let mut again = cfg.clone();
            again.remove_policy(0).unwrap();
            let shown = p.to_string();
            parse_rule(&mut again, &shown.split_whitespace().collect::<Vec<_>>()).unwrap();
            assert_eq!(again.spd.policies()[0], p);
        }
    }

    #[test]
    fn sas_and_policies_come_out_by_name_and_number() {
        let mut cfg = parse_config(&format!(
            "sa out 1000 aead_algo aes-128-gcm aead_key {KEY16}:ca:fe:ba:be mode transport\n\
             sp ipv4 out esp protect 1000 pri 10 proto sctp\n"
        ))
        .unwrap();
        assert!(cfg.remove_sa(Direction::In, 1000).is_err());
        assert!(cfg.remove_policy(1).unwrap_err().contains("there are 1"));
        assert_eq!(cfg.remove_sa(Direction::Out, 1000).unwrap().spi, 1000);
        // The policy stays: what it selects is dropped until a new SA 1000 arrives.
        assert_eq!(cfg.spd.policies().len(), 1);
        assert!(cfg.remove_policy(0).is_ok());
        assert!(cfg.spd.is_empty());
    }

    /// A key manager deletes a policy by the rule it added, wherever later rules put it.
    #[test]
    fn a_policy_comes_out_by_its_rule_wherever_it_stands() {
        let mut cfg = parse_config(&format!(
            "sa out 1000 aead_algo aes-128-gcm aead_key {KEY16}:ca:fe:ba:be mode transport\n\
             sp ipv4 out esp protect 1000 pri 10 proto sctp\n\
             sp ipv4 out esp discard pri 1 proto sctp\n\
             sp ipv4 out esp bypass pri 20 dst 198.18.0.9/32\n"
        ))
        .unwrap();
        let rule = |r: &str| parse_sp(&r.split_whitespace().collect::<Vec<_>>()).unwrap();
        // The pri 20 rule went in front of it: it is number 1 now, and comes out by its rule.
        let (n, p) = cfg
            .remove_policy_like(&rule("ipv4 out esp protect 1000 pri 10 proto sctp"))
            .unwrap();
        assert_eq!((n, p.action), (1, Action::Protect(1000)));
        assert_eq!(cfg.spd.policies().len(), 2);
        // Not there (again, or with another selector, priority or action): refused, nothing out.
        for other in [
            "ipv4 out esp protect 1000 pri 10 proto sctp",
            "ipv4 out esp discard pri 2 proto sctp",
            "ipv4 out esp discard pri 1 proto 17",
        ] {
            let e = cfg.remove_policy_like(&rule(other)).unwrap_err();
            assert!(e.starts_with("no policy sp "), "{e}");
        }
        assert_eq!(cfg.spd.policies().len(), 2);
    }

    #[test]
    fn mistakes_are_named_with_their_line() {
        let cases = [
            (
                "sa out 1000 aead_algo aes-128-gcm aead_key 01:02 mode transport",
                "4-byte salt",
            ),
            (
                "sa out 1000 aead_algo chacha aead_key 01 mode transport",
                "unsupported aead_algo",
            ),
            (
                "sa out 1000 cipher_algo aes-128-cbc cipher_key 01 mode transport",
                "cipher_algo with auth_algo",
            ),
            (
                "sa out 9 aead_algo aes-128-gcm aead_key 0x{k} mode transport",
                "reserved",
            ),
            (
                "sa out 1000 aead_algo aes-128-gcm aead_key 0x{k} mode ipv4-tunnel src 198.18.0.1",
                "needs src and dst",
            ),
            (
                "sa out 1000 aead_algo aes-128-gcm aead_key 0x{k} mode transport turbo on",
                "unknown sa keyword",
            ),
            (
                "sa out 1000 aead_algo aes-128-gcm aead_key 0x{k} mode transport \
                 type inline-protocol-offload port_id 0",
                "whole ESP protocol",
            ),
            (
                "sa out 1000 aead_algo aes-128-gcm aead_key 0x{k} mode transport \
                 type lookaside-protocol-offload",
                "not supported",
            ),
            (
                "sa out 1000 aead_algo aes-128-gcm aead_key 0x{k} mode transport type fast",
                "type must be",
            ),
            (
                "sa out 1000 aead_algo aes-128-gcm aead_key 0x{k} mode transport port_id 70000",
                "port_id",
            ),
            ("sp ipv4 out esp protect 77 pri 1", "not defined"),
            ("sp ipv4 out esp bypass pri 1 dst 2001:db8::1", "family"),
            ("sp ipv4 out esp bypass sport 9:1", "empty range"),
            ("sp ipv4 out ah bypass", "esp"),
            ("spd ipv4", "unknown rule"),
        ];
        for (line, why) in cases {
            let line = line.replace("{k}", &"ab".repeat(20));
            let text = format!("# first\n\n{line}\n");
            let e = parse_config(&text).unwrap_err();
            assert_eq!(e.line, 3, "{line}");
            assert!(e.message.contains(why), "{line}: {}", e.message);
        }
        let twice = format!(
            "sa in 1000 aead_algo aes-128-gcm aead_key 0x{k} mode transport\n\
             sa in 1000 aead_algo aes-128-gcm aead_key 0x{k} mode transport\n",
            k = "ab".repeat(20)
        );
        assert_eq!(parse_config(&twice).unwrap_err().line, 2);
    }

    #[test]
    fn overhead_is_the_largest_outbound_sas() {
        let text = format!(
            "sa out 1000 aead_algo aes-128-gcm aead_key 0x{k} mode transport\n\
             sa out 1001 aead_algo aes-128-gcm aead_key 0x{k1} mode ipv6-tunnel src 2001:db8::1 dst 2001:db8::2\n\
             sa in 1002 cipher_algo aes-256-cbc cipher_key 0x{k2} auth_algo sha256-hmac auth_key 0x{k3} mode transport\n",
            k = "ab".repeat(20),
            k1 = "ac".repeat(20),
            k2 = "cd".repeat(32),
            k3 = "ce".repeat(32)
        );
        let cfg = parse_config(&text).unwrap();
        assert_eq!(cfg.max_overhead(), 40 + 37);
    }
}
