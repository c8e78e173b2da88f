//! tshark, an independent SCTP implementation, as a checker of captured frames (deploy/setup.sh
//! installs it). Shared by the CLI tests and the usrsctp veth test.

use std::path::Path;
use std::process::Command;

/// tshark's values of `field` over the packets of `pcap` matching `filter`, one per occurrence
/// (a packet with several chunks gives several), with SCTP checksums checked as CRC32c.
pub fn fields(pcap: &Path, filter: &str, field: &str) -> Vec<String> {
    fields_with(pcap, &[], filter, field)
}

/// [`fields`] with more tshark options (`-o` preferences: ESP keys, say).
#[allow(dead_code)] // not every test binary that includes this file decrypts
pub fn fields_with(pcap: &Path, options: &[&str], filter: &str, field: &str) -> Vec<String> {
    let o = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(options)
        .args([
            "-o",
            "sctp.checksum:CRC 32c",
            "-Y",
            filter,
            "-T",
            "fields",
            "-e",
            field,
        ])
        .output()
        .expect("tshark (deploy/setup.sh installs it)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .flat_map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>())
        .filter(|v| !v.is_empty())
        .collect()
}
