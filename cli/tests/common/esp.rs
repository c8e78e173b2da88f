//! The mirror IPsec configurations of a test server (198.18.0.2) and client (198.18.0.1):
//! AES-GCM-128 in transport mode, SCTP selectors, RFC 4301's default deny for SCTP.

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
