//! A minimal reader for the classic pcap files in `../shared/vectors/` (test support only).
//!
//! Those files are little-endian pcap 2.4 with microsecond timestamps and LINKTYPE_ETHERNET;
//! anything else is refused loudly rather than misread.
#![allow(dead_code)]

use std::path::PathBuf;

/// One captured frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// 1-based, as tshark and the vectors README number frames.
    pub number: usize,
    pub ts_sec: u32,
    pub ts_usec: u32,
    pub data: Vec<u8>,
}

/// The directory of the golden captures: `shared/vectors` beside the repository.
pub fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/vectors")
}

/// Every capture in the vectors directory, by file name, sorted.
pub fn capture_names() -> Vec<String> {
    let dir = vectors_dir();
    let mut v: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("golden captures expected in {}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".pcap"))
        .collect();
    v.sort();
    v
}

/// Reads `name` (a file in the vectors directory) into its frames.
pub fn read(name: &str) -> Vec<Frame> {
    let path = vectors_dir().join(name);
    let b = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(b.len() >= 24, "{name}: no pcap global header");
    let u32le = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    assert_eq!(
        u32le(0),
        0xa1b2_c3d4,
        "{name}: not a little-endian microsecond pcap"
    );
    assert_eq!(
        (
            u16::from_le_bytes([b[4], b[5]]),
            u16::from_le_bytes([b[6], b[7]])
        ),
        (2, 4)
    );
    assert_eq!(u32le(20), 1, "{name}: link type is not Ethernet");
    let mut frames = Vec::new();
    let mut off = 24;
    while off < b.len() {
        assert!(
            off + 16 <= b.len(),
            "{name}: truncated record header at {off}"
        );
        let (ts_sec, ts_usec, incl) = (u32le(off), u32le(off + 4), u32le(off + 8) as usize);
        let orig = u32le(off + 12) as usize;
        assert_eq!(
            incl,
            orig,
            "{name}: frame {} was cut by the snap length",
            frames.len() + 1
        );
        let start = off + 16;
        assert!(
            start + incl <= b.len(),
            "{name}: truncated frame {}",
            frames.len() + 1
        );
        frames.push(Frame {
            number: frames.len() + 1,
            ts_sec,
            ts_usec,
            data: b[start..start + incl].to_vec(),
        });
        off = start + incl;
    }
    frames
}

/// The SCTP packet of a vectors frame: the captures are Ethernet II + 20-byte IPv4 + SCTP.
pub fn sctp_bytes(f: &Frame) -> &[u8] {
    assert_eq!(
        &f.data[12..14],
        &[0x08, 0x00],
        "frame {}: not IPv4",
        f.number
    );
    assert_eq!(f.data[14], 0x45, "frame {}: IPv4 with options", f.number);
    assert_eq!(f.data[23], 132, "frame {}: not SCTP", f.number);
    &f.data[34..]
}
