//! The DDP payloads and the CRC32c of every frame of every golden capture
//! (`../shared/vectors/`, SCTP written by usrsctp, DDP header bytes composed per RFC 5041/5043).
//!
//! For every DATA chunk with PPID 16 or 17, the fields are compared with the line the vectors
//! README gives for that chunk (DDP-SSN, function code and Private Data; control byte, T/L/DV,
//! RsvdULP, STag and TO or QN/MSN/MO, payload length), and re-emitting the parsed `Repr` must
//! give back the chunk's user data byte for byte. Every frame's SCTP checksum must verify, and
//! must stop verifying when a bit flips.
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod pcap;

use std::collections::HashMap;

use ddpdk_dataplane::wire::crc32c;
use ddpdk_dataplane::wire::ddp::{
    FunctionCode, Header, Message, SegmentPacket, SegmentRepr, SessionControlPacket,
    SessionControlRepr, PPID_DDP_SEGMENT, PPID_SESSION_CONTROL,
};

/// DDP chunks per capture, as the README counts DATA chunks (all of them carry DDP).
const DDP_CHUNKS: [(&str, usize); 5] = [
    ("abort.pcap", 3),
    ("assoc-ddp-default.pcap", 7),
    ("assoc-ddp-minimal.pcap", 7),
    ("assoc-loss.pcap", 53),
    ("assoc-no-adaptation.pcap", 0),
];

// ---------------------------------------------------------------------------------------------
// Test-local helpers. `wire::sctp` is written separately; this walker knows just enough of
// RFC 9260 §3 to reach DATA chunk user data in these known-good captures, and is no parser.
// ---------------------------------------------------------------------------------------------

/// The SCTP packet of a capture frame, cut at the IPv4 total length (Ethernet II + 20-byte IPv4).
fn sctp_packet(f: &pcap::Frame) -> &[u8] {
    let sctp = pcap::sctp_bytes(f);
    let total = usize::from(u16::from_be_bytes([f.data[16], f.data[17]]));
    &sctp[..total - 20]
}

/// A DATA chunk (RFC 9260 §3.3.1) as the test-local walker sees it.
#[derive(Debug)]
struct DataChunk<'a> {
    flags: u8,
    stream: u16,
    ppid: u32,
    user_data: &'a [u8],
}

/// Test-local chunk walker: 12-byte common header, then chunks of type u8, flags u8, length u16
/// (big-endian, without padding), each padded to a multiple of 4. Returns the DATA chunks.
fn data_chunks(packet: &[u8]) -> Vec<DataChunk<'_>> {
    let mut out = Vec::new();
    let mut off = 12;
    while off < packet.len() {
        let (ty, flags) = (packet[off], packet[off + 1]);
        let len = usize::from(u16::from_be_bytes([packet[off + 2], packet[off + 3]]));
        assert!(
            len >= 4 && off + len <= packet.len(),
            "chunk at {off}: bad length {len}"
        );
        let chunk = &packet[off..off + len];
        if ty == 0 {
            // DATA: type, flags, length, TSN(4), stream id(2), SSN(2), PPID(4), user data.
            assert!(len > 16, "DATA chunk without user data");
            out.push(DataChunk {
                flags,
                stream: u16::from_be_bytes([chunk[8], chunk[9]]),
                ppid: u32::from_be_bytes([chunk[12], chunk[13], chunk[14], chunk[15]]),
                user_data: &chunk[16..],
            });
        }
        off += len.next_multiple_of(4);
    }
    assert_eq!(off, packet.len(), "chunks do not end with the packet");
    out
}

/// Test-local reader of the README: for each capture, the DDP fields of each DATA chunk in
/// packet order, as `key=value` pairs (`ppid`, `DDP-SSN`, `func`, `private`, `ctrl`, `T`, `L`,
/// `DV`, `RsvdULP`, `STag`, `TO`, `QN`, `MSN`, `MO`, `payload`).
fn readme_ddp_chunks() -> HashMap<String, Vec<HashMap<String, String>>> {
    let text = std::fs::read_to_string(pcap::vectors_dir().join("README.md")).unwrap();
    let mut by_capture: HashMap<String, Vec<HashMap<String, String>>> = HashMap::new();
    let mut capture = String::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("## ") {
            capture = name.trim().to_string();
            continue;
        }
        if !line.starts_with("| ") {
            continue;
        }
        for chunk in line.split("<br>").filter(|c| c.contains("**DATA**")) {
            let ppid = chunk.split_once("ppid=").unwrap().1;
            let ppid = ppid.split_whitespace().next().unwrap();
            let mut fields = HashMap::from([("ppid".to_string(), ppid.to_string())]);
            let ddp = chunk.split_once("DDP: ").unwrap().1;
            // Cut at the retransmission remark or the end of the table cell.
            let ddp = ddp.split(" — ").next().unwrap().split(" |").next().unwrap();
            if let Some((_, rest)) = ddp.split_once("private='") {
                let private = rest.split_once('\'').unwrap().0;
                fields.insert("private".into(), private.into());
            } else if ddp.contains("no private data") {
                fields.insert("private".into(), String::new());
            }
            for token in ddp.split_whitespace() {
                let token = token.trim_matches(|c| c == '(' || c == ')');
                if let Some((k, v)) = token.split_once('=') {
                    if k != "private" {
                        fields.insert(k.into(), v.into());
                    }
                }
            }
            by_capture.entry(capture.clone()).or_default().push(fields);
        }
    }
    by_capture
}

fn hex(v: &str) -> u64 {
    u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap()
}

fn field<'m>(m: &'m HashMap<String, String>, key: &str) -> &'m str {
    m.get(key)
        .unwrap_or_else(|| panic!("README line {m:?} has no {key}"))
}

// ---------------------------------------------------------------------------------------------

#[test]
fn every_ddp_chunk_has_the_fields_the_readme_lists_and_re_emits_exactly() {
    let readme = readme_ddp_chunks();
    let mut total = 0;
    assert_eq!(
        pcap::capture_names(),
        DDP_CHUNKS.map(|(n, _)| n.to_string())
    );
    for (name, count) in DDP_CHUNKS {
        let expected = readme.get(name).map(Vec::as_slice).unwrap_or(&[]);
        assert_eq!(expected.len(), count, "{name}: DATA chunks in the README");
        let mut seen = 0;
        for f in pcap::read(name) {
            for chunk in data_chunks(sctp_packet(&f)) {
                let at = format!("{name} #{} chunk {seen}", f.number);
                let want = expected
                    .get(seen)
                    .unwrap_or_else(|| panic!("{at}: not in README"));
                seen += 1;
                // RFC 5043 §10: every DDP DATA chunk is unordered; the README: stream 3, B=E=1.
                assert_eq!((chunk.stream, chunk.flags), (3, 0x07), "{at}");
                assert_eq!(chunk.ppid.to_string(), field(want, "ppid"), "{at}");
                match chunk.ppid {
                    PPID_SESSION_CONTROL => check_session_control(&at, chunk.user_data, want),
                    PPID_DDP_SEGMENT => check_segment(&at, chunk.user_data, want),
                    other => panic!("{at}: PPID {other} in a DDP association"),
                }
            }
        }
        assert_eq!(seen, count, "{name}: DDP chunks in the capture");
        total += seen;
    }
    assert_eq!(total, 70);
}

fn check_session_control(at: &str, user_data: &[u8], want: &HashMap<String, String>) {
    let packet = SessionControlPacket::new_checked(user_data).unwrap();
    let repr = SessionControlRepr::parse(&packet).unwrap_or_else(|e| panic!("{at}: {e}"));
    assert_eq!(repr.ddp_ssn.to_string(), field(want, "DDP-SSN"), "{at}");
    let code = u16::from(repr.message.function_code());
    assert_eq!(u64::from(code), hex(field(want, "func")), "{at}");
    assert_eq!(packet.function_code(), repr.message.function_code(), "{at}");
    assert_eq!(
        repr.message.private_data(),
        field(want, "private").as_bytes(),
        "{at}"
    );
    match repr.message {
        Message::Initiate(_) | Message::Accept(_) | Message::Terminate => {}
        other => panic!("{at}: unexpected {other:?}"),
    }
    if repr.message.function_code() == FunctionCode::Terminate {
        assert_eq!(
            user_data.len(),
            4,
            "{at}: Terminate carries no Private Data"
        );
    }

    let mut buf = vec![0xa5u8; repr.buffer_len()];
    repr.emit(&mut SessionControlPacket::new_unchecked(&mut buf[..]))
        .unwrap();
    assert_eq!(buf, user_data, "{at}: re-emitted");
}

fn check_segment(at: &str, user_data: &[u8], want: &HashMap<String, String>) {
    let packet = SegmentPacket::new_checked(user_data).unwrap();
    let repr = SegmentRepr::parse(&packet).unwrap_or_else(|e| panic!("{at}: {e}"));
    let flag = |k| field(want, k) == "1";

    assert_eq!(repr.ddp_ssn.to_string(), field(want, "DDP-SSN"), "{at}");
    assert_eq!(
        u64::from(packet.control()),
        hex(field(want, "ctrl")),
        "{at}"
    );
    assert_eq!(packet.tagged(), flag("T"), "{at}");
    assert_eq!(repr.header.is_tagged(), flag("T"), "{at}");
    assert_eq!(repr.last, flag("L"), "{at}");
    assert_eq!(packet.version().to_string(), field(want, "DV"), "{at}");
    let rsvd_ulp = packet
        .rsvd_ulp()
        .iter()
        .fold(0u64, |a, &b| a << 8 | u64::from(b));
    assert_eq!(rsvd_ulp, hex(field(want, "RsvdULP")), "{at}");
    // The README writes RsvdULP with as many hex digits as the field has: 8 or 40 bits.
    assert_eq!(
        field(want, "RsvdULP").len() - 2,
        2 * packet.rsvd_ulp().len(),
        "{at}"
    );
    match repr.header {
        Header::Tagged(h) => {
            assert_eq!(u64::from(h.stag), hex(field(want, "STag")), "{at}");
            assert_eq!(h.to, hex(field(want, "TO")), "{at}");
            assert_eq!(u64::from(h.rsvd_ulp), rsvd_ulp, "{at}");
            assert_eq!(
                (packet.stag(), packet.to()),
                (Some(h.stag), Some(h.to)),
                "{at}"
            );
        }
        Header::Untagged(h) => {
            assert_eq!(h.qn.to_string(), field(want, "QN"), "{at}");
            assert_eq!(h.msn.to_string(), field(want, "MSN"), "{at}");
            assert_eq!(h.mo.to_string(), field(want, "MO"), "{at}");
            assert_eq!(&h.rsvd_ulp[..], packet.rsvd_ulp(), "{at}");
            let view = (packet.qn(), packet.msn(), packet.mo());
            assert_eq!(view, (Some(h.qn), Some(h.msn), Some(h.mo)), "{at}");
        }
    }
    assert_eq!(
        repr.payload.len().to_string(),
        field(want, "payload"),
        "{at}"
    );
    assert!(
        repr.payload.iter().all(u8::is_ascii_alphanumeric),
        "{at}: ASCII filler"
    );

    let mut buf = vec![0xa5u8; repr.buffer_len()];
    repr.emit(&mut SegmentPacket::new_unchecked(&mut buf[..]))
        .unwrap();
    assert_eq!(buf, user_data, "{at}: re-emitted");
}

#[test]
fn loss_capture_segments_advance_to_by_their_payload_and_only_the_last_has_l() {
    // README, assoc-loss.pcap: 48 tagged segments of 984 payload bytes, DDP-SSN 1..48, TO from
    // 0x100000 advancing by 984 (RFC 5041 §5.2 TO arithmetic), L=1 only on the last; the two
    // retransmissions repeat their originals.
    let mut n = 0;
    for f in pcap::read("assoc-loss.pcap") {
        for chunk in data_chunks(sctp_packet(&f)) {
            if chunk.ppid != PPID_DDP_SEGMENT {
                continue;
            }
            let r =
                SegmentRepr::parse(&SegmentPacket::new_checked(chunk.user_data).unwrap()).unwrap();
            let Header::Tagged(h) = r.header else {
                panic!("#{}: untagged", f.number)
            };
            let index = u64::from(r.ddp_ssn) - 1;
            assert_eq!(h.to, 0x10_0000 + index * 984, "#{}", f.number);
            assert_eq!(r.last, r.ddp_ssn == 48, "#{}", f.number);
            n += 1;
        }
    }
    assert_eq!(n, 50);
}

#[test]
fn every_captured_frame_has_a_valid_crc32c() {
    let mut frames = 0;
    for name in pcap::capture_names() {
        for f in pcap::read(&name) {
            let sctp = sctp_packet(&f);
            assert!(crc32c::verify(sctp), "{name} #{}: checksum", f.number);
            let stored = u32::from_le_bytes(sctp[8..12].try_into().unwrap());
            assert_eq!(stored, crc32c::sctp_checksum(sctp), "{name} #{}", f.number);
            frames += 1;
        }
    }
    assert_eq!(frames, 11 + 17 + 17 + 95 + 5);
}

#[test]
fn a_single_flipped_bit_anywhere_in_a_captured_packet_fails_the_crc32c() {
    for name in pcap::capture_names() {
        for f in pcap::read(&name) {
            let mut sctp = sctp_packet(&f).to_vec();
            for i in 0..sctp.len() {
                let bit = 1 << (i % 8);
                sctp[i] ^= bit;
                assert!(
                    !crc32c::verify(&sctp),
                    "{name} #{}: byte {i} flipped",
                    f.number
                );
                sctp[i] ^= bit;
            }
            assert!(crc32c::verify(&sctp));
        }
    }
}

#[test]
fn fill_rewrites_the_captured_checksums_exactly() {
    for name in pcap::capture_names() {
        for f in pcap::read(&name) {
            let orig = sctp_packet(&f);
            let mut p = orig.to_vec();
            p[8..12].copy_from_slice(&[0xa5; 4]);
            crc32c::fill(&mut p);
            assert_eq!(p, orig, "{name} #{}", f.number);
        }
    }
}
