//! IPsec's SAs and policies while the endpoint runs (RFC 5043 §13): the commands the shell's
//! `ipsec ...` and a key manager's socket (`--ipsec-socket`) share, and `show ipsec`.
//!
//! A key manager (an IKE daemon such as strongSwan, through a small plugin or its updown
//! script) installs an SA pair once its exchange is done, points a policy at it, and deletes
//! the old pair after a rekey. The socket takes the same lines as the shell, without `ipsec`:
//!
//! ```text
//! sa add in 2000 aead_algo aes-128-gcm aead_key 2b:...:be mode transport
//! sp add ipv4 in esp protect 2000 pri 10 src 198.18.0.2/32 proto sctp
//! sp del 0                       (or the rule itself: sp del ipv4 in esp protect 2000 ...)
//! sa del in 2000
//! show
//! ```
//!
//! Each line is answered by one line: `ok ...` or `error: ...` (`show`: its lines, then `ok`).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ddpdk_dataplane::ipsec::{parse_sa, parse_sp, Action, Direction, Policy};
use ddpdk_dataplane::port::dpdk::{IpsecPort, Mbuf, SaReport};
use ddpdk_dataplane::port::Port;
use serde_json::json;

use crate::app::note;

/// Runs one IPsec command (`sa add RULE`, `sa del in|out SPI`, `sp add RULE`, `sp del N|RULE`,
/// `show`, `expiring`) on `port`; returns what to print. No error quotes a word of `words`
/// that may be a key: the shell prints it to stderr and in `--json`'s `command_error`, the
/// socket to the key manager's log (`sa del in KEY`, a key pasted where the SPI belongs, was
/// quoted whole).
pub fn command<P: Port<Buf = Mbuf>>(port: &IpsecPort<P>, words: &[&str]) -> Result<String, String> {
    run(port, words).map_err(|e| keys_hidden(e, words))
}

/// `message` with each word of `words` that may be a key ([`hidden_word`]) hidden wherever
/// it is quoted.
///
/// [`hidden_word`]: ddpdk_dataplane::ipsec::hidden_word
fn keys_hidden(message: String, words: &[&str]) -> String {
    let mut out = message;
    for (i, w) in words.iter().enumerate() {
        let before = i.checked_sub(1).map(|j| words[j]);
        if ddpdk_dataplane::ipsec::hidden_word(before, w) {
            out = ddpdk_dataplane::ipsec::hidden_in(&out, w);
        }
    }
    out
}

fn run<P: Port<Buf = Mbuf>>(port: &IpsecPort<P>, words: &[&str]) -> Result<String, String> {
    match words {
        ["sa", "add", rule @ ..] => {
            let sa = parse_sa(rule)?;
            let (dir, spi) = (sa.direction, sa.spi);
            port.add_sa(sa)?;
            Ok(format!("SA {dir} {spi} installed"))
        }
        ["sa", "del", dir, spi] => {
            let dir = match *dir {
                "in" => Direction::In,
                "out" => Direction::Out,
                other => return Err(format!("sa del: in or out, not {other:?}")),
            };
            let spi: u32 =
                digits(spi).ok_or_else(|| format!("sa del: {spi:?} is not an SPI"))?;
            port.remove_sa(dir, spi)?;
            // Such policies fail closed (ipsec::config): the key manager is told what its
            // order of deletions leaves dropped (a rekey deletes the old policy first).
            let left: Vec<String> = port
                .policies()
                .iter()
                .enumerate()
                .filter(|(_, p)| p.direction == dir && p.action == Action::Protect(spi))
                .map(|(n, _)| n.to_string())
                .collect();
            if left.is_empty() {
                Ok(format!("SA {dir} {spi} deleted"))
            } else {
                let (which, verb) = if left.len() == 1 {
                    ("policy", "protects")
                } else {
                    ("policies", "protect")
                };
                Ok(format!(
                    "SA {dir} {spi} deleted; {which} {} still {verb} with it: what {} \
                     is dropped until an SA {dir} {spi} returns (sp del to stop)",
                    left.join(", "),
                    if left.len() == 1 { "it selects" } else { "they select" }
                ))
            }
        }
        ["sp", "add", rule @ ..] => {
            let p = parse_sp(rule)?;
            let shown = p.to_string();
            port.add_policy(p)?;
            Ok(format!("policy added: {shown}"))
        }
        ["sp", "del", rule @ ..] if rule.len() > 1 => {
            let (n, p) = port.remove_policy_like(&parse_sp(rule)?)?;
            Ok(policy_deleted(port, n, &p))
        }
        ["sp", "del", n] => {
            let n: usize = digits(n)
                .ok_or_else(|| format!("sp del: {n:?} is not a policy number (show ipsec)"))?;
            let p = port.remove_policy(n)?;
            Ok(policy_deleted(port, n, &p))
        }
        ["show"] => Ok(show_text(port)),
        ["expiring"] => Ok(expiring(port)),
        // Only the first words come back, and not one that may be a key (`ipsec sa KEY` is
        // a key typed where `add` belongs), nor more than a line's worth of one.
        _ => Err(format!(
            "ipsec: expected sa add RULE | sa del in|out SPI | sp add RULE | sp del N|RULE | show | \
             expiring, got {:?}",
            words
                .iter()
                .take(2)
                .enumerate()
                .map(|(i, w)| {
                    let before = i.checked_sub(1).map(|j| words[j]);
                    if ddpdk_dataplane::ipsec::hidden_word(before, w) {
                        "(key hidden)".to_string()
                    } else {
                        w.chars().take(40).collect()
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        )),
    }
}

/// `w` as a number if it is written in decimal digits alone: Rust's parse also takes a
/// leading `+` (`sa del in +1000`), which no rule writes (a typo, refused as in a rule).
fn digits<T: std::str::FromStr>(w: &str) -> Option<T> {
    if w.bytes().all(|b| b.is_ascii_digit()) {
        w.parse().ok()
    } else {
        None
    }
}

/// The answer to `sp del`: an inbound policy's SA, if it lives on, still takes what the policy
/// selected (RFC 4301 §4.4.2.1: its selectors are its own), which a key manager deleting a
/// rekey's old policy first expects, and an operator cutting a flow off may not.
fn policy_deleted<P: Port<Buf = Mbuf>>(port: &IpsecPort<P>, n: usize, p: &Policy) -> String {
    match (p.direction, p.action) {
        (Direction::In, Action::Protect(spi))
            if port
                .sas()
                .iter()
                .any(|s| s.config().direction == Direction::In && s.spi() == spi) =>
        {
            format!(
                "policy {n} deleted: {p}; SA in {spi} keeps its selectors, and takes what they \
                 allow, until it is deleted (sa del in {spi})"
            )
        }
        _ => format!("policy {n} deleted: {p}"),
    }
}

/// What an endpoint says of IPsec at start-up: the tables it starts with and what ESP takes
/// off each packet, what traffic no policy names gets (RFC 4301 §5: discarded, unless
/// `--ipsec-default bypass`), and each family whose clear SCTP from hosts no policy names it
/// accepts.
pub fn announce<P: Port<Buf = Mbuf>>(port: &IpsecPort<P>, json: bool, socket: Option<&Path>) {
    if !port.is_enabled() {
        return;
    }
    note(
        json,
        format_args!(
            "IPsec on (RFC 5043 §13): {} SA(s), {} policies, {} bytes of each packet left for \
             ESP{}",
            port.sas().len(),
            port.policies().len(),
            port.headroom(),
            socket
                .map(|p| format!("; key manager socket {}", p.display()))
                .unwrap_or_default()
        ),
    );
    // An SA no policy protects with carries nothing (policy chooses what is sealed and what
    // must arrive sealed, RFC 4301 §5.1, §5.2): a configuration of SAs alone protects nothing.
    let policies = port.policies();
    let idle: Vec<String> = port
        .sa_reports()
        .iter()
        .filter(|s| {
            !policies.iter().any(|p| {
                p.action == Action::Protect(s.spi) && p.direction.to_string() == s.direction
            })
        })
        .map(|s| format!("{} {}", s.direction, s.spi))
        .collect();
    if !idle.is_empty() {
        note(
            json,
            format_args!(
                "IPsec: no policy protects with SA {}: it seals and opens nothing until one does \
                 (sp ... protect SPI)",
                idle.join(", SA ")
            ),
        );
    }
    // RFC 4301 §5's default, or the operator's bypass, said once: an endpoint waiting for its
    // key manager with no policy yet reaches no peer until one comes, and ping and ICMP
    // errors need a policy of their own either way.
    note(
        json,
        format_args!(
            "IPsec: {}",
            if port.unmatched() == Action::Bypass {
                "IP traffic no policy names passes in the clear (--ipsec-default bypass; RFC \
                 4301 §5 discards it)"
            } else {
                "IP traffic no policy names is discarded (RFC 4301 §5), but for IPv6 Neighbor \
                 Solicitations and Advertisements and the path MTU's ICMP; ping needs policies \
                 of its own (`sp ipv4 in esp bypass proto 1 type 8`, `sp ipv4 out esp bypass \
                 proto 1 type 0`; ipv6: `proto 58 type 128`, `type 129`)"
            }
        ),
    );
    // With no policy at all and `--ipsec-default bypass` (an endpoint that waits for its key
    // manager) both families take clear SCTP: said too, not only once rules exist.
    for family in port.unguarded_families() {
        note(
            json,
            format_args!(
                "IPsec: clear {family} SCTP from hosts no policy names is accepted: no catch-all \
                 policy, or a catch-all bypass ranked above it (add `sp {family} in esp discard \
                 pri 0 proto sctp`, with no catch-all bypass above it)"
            ),
        );
    }
}

/// The SAs whose soft lifetime is spent (RFC 4301 §4.4.2.1), as `due for a rekey: DIRECTION
/// SPI, ...` on one line (the socket answers every command with one): what a key manager polls
/// to know which SAs to replace before their hard lifetime ends them.
pub fn expiring<P: Port<Buf = Mbuf>>(port: &IpsecPort<P>) -> String {
    // "No SA is due" from an endpoint with no IPsec at all would read as all being well.
    if !port.is_enabled() {
        return "IPsec is off (start with --ipsec, --ipsec-config or --ipsec-socket)".into();
    }
    let (due, over) = expiring_sas(port);
    let mut parts = Vec::new();
    if !due.is_empty() {
        parts.push(format!("due for a rekey: {}", due.join(", ")));
    }
    if !over.is_empty() {
        parts.push(format!(
            "expired, carrying nothing until replaced: {}",
            over.join(", ")
        ));
    }
    if parts.is_empty() {
        "no SA is due for a rekey".into()
    } else {
        parts.join("; ")
    }
}

/// The SAs past their soft lifetime and those past their hard one, as `DIRECTION SPI`.
pub fn expiring_sas<P: Port<Buf = Mbuf>>(port: &IpsecPort<P>) -> (Vec<String>, Vec<String>) {
    let sas = port.sa_reports();
    let listed = |expired: bool| -> Vec<String> {
        sas.iter()
            .filter(|s| {
                if expired {
                    s.expired
                } else {
                    s.rekey_due && !s.expired
                }
            })
            .map(|s| format!("{} {}", s.direction, s.spi))
            .collect()
    };
    // An SA past its hard lifetime is past rekeying in time: said apart, so that a key manager
    // knows traffic has stopped.
    (listed(false), listed(true))
}

/// The lines of `show ipsec` for an SA the port's NIC holds a session for: how much of its
/// traffic the NIC did, and where the rest went when it did none (the session alone is no
/// offload at work).
fn inline_lines(s: &SaReport) -> String {
    let (did, of) = (s.counts.nic, s.counts.packets);
    let inbound = s.direction == "in";
    let what = if inbound {
        "decrypted by the NIC"
    } else {
        "handed to the NIC to encrypt"
    };
    let mut out = format!(
        "  SA {} {}: crypto {} (the NIC's, as it sends and receives): {did} of its {of} \
         packets {what}\n",
        s.direction, s.spi, s.crypto
    );
    if did == 0 && of > 0 {
        out += &format!(
            "    (all {of} in software: {}\n",
            if inbound {
                "the NIC decrypted none; one that installs inbound SAs only from a flow \
                 rule, as ixgbe and txgbe do, decrypts none where the port has no working \
                 rule for the SA: refused (a warning said why), not made (no --ip address of \
                 its family), or taken but not installed (ixgbe's table full))"
            } else {
                "each was sealed with frames above the path MTU, which software seals)"
            }
        );
    }
    out
}

/// `show ipsec` as text: the SAs with their counters, the policies by number, the drops.
pub fn show_text<P: Port<Buf = Mbuf>>(port: &IpsecPort<P>) -> String {
    if !port.is_enabled() {
        return "IPsec is off (start with --ipsec, --ipsec-config or --ipsec-socket)".into();
    }
    let mut out = format!(
        "  {:>3} {:>10} {:<23} {:<34} {:>3} {:>10} {:>12} {:>6} {:>6} {:>6} {:>7} {:>5} {:>6} {:>5}\n",
        "dir",
        "spi",
        "algorithm",
        "mode",
        "esn",
        "packets",
        "bytes",
        "replay",
        "auth",
        "malf",
        "expired",
        "ovfl",
        "copied",
        "life"
    );
    for s in port.sa_reports() {
        let c = s.counts;
        out += &format!(
            "  {:>3} {:>10} {:<23} {:<34} {:>3} {:>10} {:>12} {:>6} {:>6} {:>6} {:>7} {:>5} {:>6} {:>5}\n",
            s.direction,
            s.spi,
            s.algorithm,
            s.mode,
            if s.esn { "yes" } else { "no" },
            c.packets,
            c.bytes,
            c.replay,
            c.auth_failed,
            c.malformed,
            c.expired,
            c.overflow,
            c.copied,
            // "over": past the hard lifetime (or out of sequence numbers), the SA carries
            // nothing; "rekey": past the soft one (or three quarters of its sequence numbers),
            // the key manager is to replace it.
            if s.expired {
                "over"
            } else if s.rekey_due {
                "rekey"
            } else {
                "-"
            }
        );
    }
    // The SAs the port's NIC does as it sends and receives (inline crypto); the others run
    // on the crypto device.
    for s in port
        .sa_reports()
        .iter()
        .filter(|s| s.crypto.starts_with("inline"))
    {
        out += &inline_lines(s);
    }
    // RFC 4301 §8.2.1: the path MTU ICMP gave an outbound SA, and how many such messages it
    // believed (§6.1.2).
    for s in port
        .sa_reports()
        .iter()
        .filter(|s| s.path_mtu.is_some() || s.counts.pmtu_accepted > 0)
    {
        out += &format!(
            "  SA {} {}: path MTU {} from ICMP ({} PMTU messages accepted)\n",
            s.direction,
            s.spi,
            s.path_mtu.map_or("aged out".to_owned(), |m| m.to_string()),
            s.counts.pmtu_accepted
        );
    }
    for s in port.sa_reports().iter().filter(|s| s.counts.stalled > 0) {
        out += &format!(
            "  SA {} {}: its crypto device stopped returning ops; {} packets dropped \
             (restart ddpdk to use the device again)\n",
            s.direction, s.spi, s.counts.stalled
        );
    }
    for (i, p) in port.policies().iter().enumerate() {
        out += &format!("  policy {i}: {p}\n");
    }
    out += &format!(
        "  no policy: {} (IPv6 Neighbor Solicitations and Advertisements and the path MTU's \
         ICMP pass)\n",
        if port.unmatched() == Action::Bypass {
            "bypass"
        } else {
            "discard"
        }
    );
    let c = port.policy_counts();
    out += &format!(
        "  dropped: {} ESP for no SA, {} clear where ESP is required, {} not what the SA's \
         policy selects, {} discarded in, {} discarded out, {} in and {} out that no policy \
         names, {} out with no SA, {} unparsable, {} framed for the NIC under an SA deleted \
         before the device took them; {} ICMP PMTU messages quoting ESP rejected",
        c.no_sa,
        c.clear_refused,
        c.policy_mismatch,
        c.discarded_in,
        c.discarded_out,
        c.no_policy_in,
        c.no_policy_out,
        c.no_sa_out,
        c.unparsable,
        c.inline_unsent,
        c.pmtu_rejected
    );
    out
}

/// `show ipsec` as one JSON object.
pub fn show_json<P: Port<Buf = Mbuf>>(port: &IpsecPort<P>) -> serde_json::Value {
    json!({"ipsec": {
        "enabled": port.is_enabled(),
        "headroom": port.headroom(),
        "sas": port.sa_reports(),
        "policies": port.policies().iter().map(ToString::to_string).collect::<Vec<_>>(),
        // With IPsec off every frame passes, whatever an unused SPD would say.
        "no_policy": match (port.is_enabled(), port.unmatched()) {
            (false, _) => serde_json::Value::Null,
            (true, Action::Bypass) => json!("bypass"),
            (true, _) => json!("discard"),
        },
        "drops": port.policy_counts(),
    }})
}

/// The key manager's socket (`--ipsec-socket`): a thread that takes one client at a time.
#[derive(Debug)]
pub struct KeySocket {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// How often the socket's thread looks at its stop flag.
const TICK: Duration = Duration::from_millis(50);

impl KeySocket {
    /// Listens at `path` (a stale socket file left there is replaced, a live one is not) for
    /// commands on `port`.
    pub fn start<P>(path: &Path, port: Arc<IpsecPort<P>>) -> Result<KeySocket, String>
    where
        P: Port<Buf = Mbuf> + Send + Sync + 'static,
    {
        let fail = |e: &dyn std::fmt::Display| format!("--ipsec-socket {}: {e}", path.display());
        check_socket_path(path)?;
        if path.exists() {
            let _ = std::fs::remove_file(path);
        }
        let listener = bind_private(path).map_err(|e| fail(&e))?;
        listener.set_nonblocking(true).map_err(|e| fail(&e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("ddpdk-ipsec-km".into())
            .spawn(move || {
                // Off the main lcore, whose CPU it inherited: it waits on a socket, and
                // belongs where DPDK's own control threads run, not beside a polling core.
                ddpdk_dataplane::port::dpdk::to_control_cpus();
                serve(&listener, &port, &flag)
            })
            .map_err(|e| format!("--ipsec-socket: cannot start its thread: {e}"))?;
        Ok(KeySocket {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }
}

/// What can be known of `--ipsec-socket PATH` before anything starts, so that a wrong path is
/// a usage error before the EAL (it was status 1 after it): the path fits a Unix socket's,
/// its directory exists, and only a stale socket is there to replace, never a file someone
/// put there nor the socket of an endpoint that still listens on it.
pub fn check_socket_path(path: &Path) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    let fail = |e: &dyn std::fmt::Display| format!("--ipsec-socket {}: {e}", path.display());
    for p in [path.to_path_buf(), private_dir(path).join("s")] {
        let n = p.as_os_str().as_bytes().len();
        if n > SUN_PATH {
            let what = if p == path {
                "the path"
            } else {
                "the socket made first"
            };
            return Err(fail(&format_args!(
                "{what} ({}) is {n} bytes, over the {SUN_PATH} a Unix socket's path holds",
                p.display()
            )));
        }
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(fail(&format_args!("no directory {}", dir.display())));
    }
    // The socket is bound in a directory made beside it (bind_private): made and removed
    // here, so that a directory nothing can be made in (read-only, another user's) is a
    // usage error before the EAL starts, where it was found only once the EAL had started.
    {
        use std::os::unix::fs::DirBuilderExt;
        let probe = private_dir(path);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&probe)
            .map_err(|e| {
                fail(&format_args!(
                    "cannot make a socket in {}: {e}",
                    dir.display()
                ))
            })?;
        let _ = std::fs::remove_dir(&probe);
    }
    if path.exists() || std::fs::symlink_metadata(path).is_ok() {
        let is_socket = std::fs::symlink_metadata(path).is_ok_and(|m| {
            use std::os::unix::fs::FileTypeExt;
            m.file_type().is_socket()
        });
        if !is_socket {
            return Err(fail(&"exists and is not a socket"));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(fail(&"another process listens on it"));
        }
    }
    Ok(())
}

/// `sun_path`'s bytes less its terminating NUL.
const SUN_PATH: usize = 107;

/// The directory the socket is bound in first: short (`.ks` and the process id), beside
/// `path`.
fn private_dir(path: &Path) -> PathBuf {
    path.with_file_name(format!(".ks{}", std::process::id()))
}

/// Binds a socket that only its owner can ever connect to, at `path`: bound inside a fresh
/// directory of mode 0700, made 0600, then moved into place (a socket bound at `path` itself
/// would be open to others between bind and chmod, whatever the umask).
/// The directory's name is short (`.ks` and the process id), so that the socket inside it is
/// hardly longer than `path`: a Unix socket's path holds 107 bytes, and a name built from the
/// socket's own doubled its length (a 90-byte path failed as "shorter than SUN_LEN").
fn bind_private(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let dir = private_dir(path);
    let inside = dir.join("s");
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    let r = UnixListener::bind(&inside).and_then(|l| {
        std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&inside, path)?;
        Ok(l)
    });
    let _ = std::fs::remove_file(&inside);
    let _ = std::fs::remove_dir(&dir);
    r
}

impl Drop for KeySocket {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve<P: Port<Buf = Mbuf>>(listener: &UnixListener, port: &IpsecPort<P>, stop: &AtomicBool) {
    while !stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((conn, _)) => session(conn, stop, |line| answer(port, line)),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(TICK),
            Err(e) => {
                errln!("ddpdk: --ipsec-socket: {e}");
                std::thread::sleep(TICK);
            }
        }
    }
}

/// The longest command line the socket takes (an SA rule with two 32-byte keys is ~300).
const MAX_LINE: usize = 4096;
/// A client that sends no complete line for this long is hung up on: the socket serves one
/// client at a time, and a stuck one must not keep a key manager out.
const IDLE: Duration = Duration::from_secs(10);

/// The answer to one line of the socket (its bytes, newline or not): `ok ...` or
/// `error: ...`, ending in a newline.
fn answer<P: Port<Buf = Mbuf>>(port: &IpsecPort<P>, raw: &[u8]) -> String {
    let line = String::from_utf8_lossy(raw);
    let words: Vec<&str> = line
        .split('#')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    // Every line is answered, a blank one too: a key manager that waits for the answer to
    // each line it writes never waits for one that does not come.
    if words.is_empty() {
        return "ok nothing to do\n".to_string();
    }
    match command(port, &words) {
        Ok(text) if words == ["show"] => format!("{text}\nok\n"),
        Ok(text) => format!("ok {text}\n"),
        Err(e) => format!("error: {e}\n"),
    }
}

/// One client, until it hangs up, stalls or the endpoint stops; `answer` answers each line.
fn session(conn: UnixStream, stop: &AtomicBool, mut answer: impl FnMut(&[u8]) -> String) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(TICK));
    // A client that does not read its answers cannot hold the thread (and shutdown) either.
    let _ = conn.set_write_timeout(Some(Duration::from_secs(1)));
    let Ok(mut w) = conn.try_clone() else { return };
    let mut r = BufReader::new(conn).take(0);
    // Bytes, not a String: a read that times out inside a UTF-8 sequence loses nothing.
    let mut raw = Vec::new();
    let mut last = std::time::Instant::now();
    while !stop.load(Ordering::Acquire) {
        if last.elapsed() > IDLE {
            let _ = w.write_all(b"error: idle too long\n");
            return;
        }
        r.set_limit((MAX_LINE + 1).saturating_sub(raw.len()) as u64);
        match r.read_until(b'\n', &mut raw) {
            Ok(0) if raw.len() > MAX_LINE => {
                let _ = w.write_all(b"error: line too long\n");
                return;
            }
            // The end of the client's writes: a last line without its newline (`printf 'sa
            // del in 1000' | socat - UNIX:...`, a half-close after it) is a line too, run and
            // answered as the shell runs a script's last line; it was dropped unanswered.
            Ok(0) => {
                if !raw.is_empty() {
                    let _ = w.write_all(answer(&raw).as_bytes());
                }
                return;
            }
            Ok(_) if raw.ends_with(b"\n") => {
                last = std::time::Instant::now();
                let reply = answer(&raw);
                raw.clear();
                if w.write_all(reply.as_bytes()).is_err() {
                    return;
                }
            }
            // A partial line (a read timed out half-way): keep it and read on.
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn inline_report(direction: &str, packets: u64, nic: u64) -> SaReport {
        SaReport {
            spi: 7,
            direction: direction.into(),
            algorithm: "aes-128-gcm",
            mode: "transport".into(),
            esn: false,
            crypto: "inline 0".into(),
            rekey_due: false,
            expired: false,
            path_mtu: None,
            counts: ddpdk_dataplane::port::dpdk::SaCounts {
                packets,
                nic,
                ..Default::default()
            },
        }
    }

    /// `show ipsec` says how much of an inline SA's traffic the NIC did, and when the NIC
    /// holds the session but did none of it, that software did all (an inbound SA on a NIC
    /// that wants a flow rule, as ixgbe does, would otherwise read as offloaded).
    #[test]
    fn show_ipsec_tells_what_the_nic_did_of_an_inline_sas_traffic() {
        let busy = inline_lines(&inline_report("in", 10, 8));
        assert!(
            busy.contains("8 of its 10 packets decrypted by the NIC"),
            "{busy}"
        );
        assert!(!busy.contains("in software"), "{busy}");
        let idle = inline_lines(&inline_report("in", 10, 0));
        assert!(idle.contains("0 of its 10 packets decrypted"), "{idle}");
        assert!(idle.contains("all 10 in software"), "{idle}");
        assert!(idle.contains("flow rule"), "{idle}");
        let out = inline_lines(&inline_report("out", 3, 0));
        assert!(
            out.contains("0 of its 3 packets handed to the NIC"),
            "{out}"
        );
        assert!(out.contains("path MTU"), "{out}");
        // Nothing carried yet: nothing to explain.
        let new = inline_lines(&inline_report("in", 0, 0));
        assert!(!new.contains("in software"), "{new}");
    }

    /// A socket path that fits a Unix socket's 107 bytes is bound, private (0600); one that
    /// does not is refused with what the limit is. Before, the socket was first made inside
    /// a directory named after it, about twice the name's length, so a 100-byte path failed
    /// as "path must be shorter than SUN_LEN".
    #[test]
    fn a_key_socket_path_that_fits_is_bound_and_one_that_does_not_is_named() {
        let base = std::env::temp_dir().join(format!("ddpdk-ks-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let name_len = 100 - base.as_os_str().len() - 1;
        let path = base.join("k".repeat(name_len));
        assert_eq!(path.as_os_str().len(), 100);
        let l = bind_private(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        drop(l);
        std::fs::remove_file(&path).unwrap();
        let long = base.join("k".repeat(name_len + 10));
        let e = check_socket_path(&long).unwrap_err();
        assert!(e.contains("110 bytes, over the 107"), "{e}");
        assert!(!long.exists());
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// A last line without its newline, followed by the client's half-close (SHUT_WR), is
    /// run and answered like every line: it was dropped silently, and a key manager that
    /// wrote `sa del in 1000` so never had it run nor heard why.
    #[test]
    fn a_last_line_without_its_newline_is_answered_at_half_close() {
        let (server, mut client) = UnixStream::pair().unwrap();
        let stop = AtomicBool::new(false);
        let mut seen = Vec::new();
        client.write_all(b"show\nsa del in 1000").unwrap();
        client.shutdown(std::net::Shutdown::Write).unwrap();
        session(server, &stop, |raw| {
            seen.push(String::from_utf8_lossy(raw).into_owned());
            format!("ok {}\n", seen.len())
        });
        assert_eq!(seen, ["show\n", "sa del in 1000"]);
        let mut answers = String::new();
        client.read_to_string(&mut answers).unwrap();
        assert_eq!(answers, "ok 1\nok 2\n");
    }

    /// An SPI or a policy number written `+1000` is refused: Rust's parse took it as 1000.
    #[test]
    fn a_signed_spi_or_policy_number_is_refused() {
        assert_eq!(digits::<u32>("1000"), Some(1000));
        for bad in ["+1000", "-1", " 1", "1e3", "", "0x10"] {
            assert_eq!(digits::<u32>(bad), None, "{bad:?}");
        }
        assert_eq!(digits::<usize>("+0"), None);
    }

    /// A path whose directory is missing, or where a file that is not a socket lies, is
    /// refused by the check made before the EAL starts (it was found only after).
    #[test]
    fn a_key_socket_path_without_its_directory_or_on_a_file_is_refused() {
        let base = std::env::temp_dir().join(format!("ddpdk-ksf-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let e = check_socket_path(&base.join("none/ks")).unwrap_err();
        assert!(e.contains("no directory"), "{e}");
        let file = base.join("a-file");
        std::fs::write(&file, "kept").unwrap();
        let e = check_socket_path(&file).unwrap_err();
        assert!(e.contains("exists and is not a socket"), "{e}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "kept");
        assert!(check_socket_path(&base.join("ks")).is_ok());
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// A path in a directory no socket can be made in is refused before the EAL starts (it
    /// failed only after): sysfs takes no new file, even root's; a directory of mode 0555
    /// refuses any other user. The check leaves nothing behind.
    #[test]
    fn a_key_socket_path_in_a_directory_nothing_can_be_made_in_is_refused() {
        let e = check_socket_path(Path::new("/sys/ddpdk-ks")).unwrap_err();
        assert!(
            e.starts_with("--ipsec-socket /sys/ddpdk-ks: cannot make a socket in /sys: "),
            "{e}"
        );
        let base = std::env::temp_dir().join(format!("ddpdk-ksro-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        assert!(check_socket_path(&base.join("ks")).is_ok());
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o555)).unwrap();
        // Root may write there all the same: the refusal is for everyone else.
        let writable = std::fs::File::create(base.join("probe")).is_ok();
        let r = check_socket_path(&base.join("ks"));
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(r.is_ok(), writable, "{r:?}");
        let _ = std::fs::remove_file(base.join("probe"));
        assert_eq!(std::fs::read_dir(&base).unwrap().count(), 0, "left behind");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
