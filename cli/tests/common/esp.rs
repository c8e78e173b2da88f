//! The mirror IPsec configurations of a test server (198.18.0.2) and client (198.18.0.1):
//! AES-GCM-128 in transport mode, SCTP selectors, RFC 4301's default deny for SCTP; and a
//! key manager's side of `--ipsec-socket`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// The AES-GCM-128 keys (16 key bytes and the 4-byte salt, RFC 4106 §8.1) of the two SAs:
/// client to server (SPI 1000) and server to client (SPI 2000).
pub const K_C2S: &str = "2b:7e:15:16:28:ae:d2:a6:ab:f7:15:88:09:cf:4f:3c:ca:fe:ba:be";
pub const K_S2C: &str = "00:01:02:03:04:05:06:07:08:09:0a:0b:0c:0d:0e:0f:10:11:12:13";

/// The server's rules (198.18.0.2), as a key manager or a file gives them.
pub fn server_rules() -> Vec<String> {
    vec![
        format!("sa in 1000 aead_algo aes-128-gcm aead_key {K_C2S} mode transport"),
        format!("sa out 2000 aead_algo aes-128-gcm aead_key {K_S2C} mode transport"),
        "sp ipv4 in esp protect 1000 pri 10 src 198.18.0.1/32 proto sctp".into(),
        "sp ipv4 out esp protect 2000 pri 10 dst 198.18.0.1/32 proto sctp".into(),
        // RFC 4301's default deny for SCTP: nothing else may reach the endpoint.
        "sp ipv4 in esp discard pri 1 proto sctp".into(),
    ]
}

/// The client's rules (198.18.0.1), the server's mirrored.
pub fn client_rules() -> Vec<String> {
    vec![
        format!("sa out 1000 aead_algo aes-128-gcm aead_key {K_C2S} mode transport"),
        format!("sa in 2000 aead_algo aes-128-gcm aead_key {K_S2C} mode transport"),
        "sp ipv4 out esp protect 1000 pri 10 dst 198.18.0.2/32 proto sctp".into(),
        "sp ipv4 in esp protect 2000 pri 10 src 198.18.0.2/32 proto sctp".into(),
        "sp ipv4 in esp discard pri 1 proto sctp".into(),
    ]
}

/// `rules` as a configuration file's text, one a line.
#[allow(dead_code)] // not every test binary that includes this module writes files
pub fn file_text(rules: &[String]) -> String {
    rules.join("\n") + "\n"
}

/// Sends one command line to the key manager's socket; returns its answer (`show`: every line
/// up to its closing `ok`).
pub fn km(stream: &mut BufReader<UnixStream>, line: &str) -> String {
    stream
        .get_mut()
        .write_all(format!("{line}\n").as_bytes())
        .expect("write to the socket");
    let mut answer = String::new();
    loop {
        let mut l = String::new();
        let n = stream.read_line(&mut l).expect("read the answer");
        assert!(n > 0, "the socket closed after {line:?}");
        answer.push_str(&l);
        if line != "show" || l == "ok\n" {
            return answer;
        }
    }
}

pub fn connect(path: &Path) -> BufReader<UnixStream> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match UnixStream::connect(path) {
            Ok(s) => {
                s.set_read_timeout(Some(Duration::from_secs(10)))
                    .expect("timeout");
                return BufReader::new(s);
            }
            Err(e) if Instant::now() > deadline => panic!("{}: {e}", path.display()),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}
