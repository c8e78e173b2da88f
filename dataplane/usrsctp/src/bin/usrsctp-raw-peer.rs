//! A DDP-over-SCTP client made of usrsctp on raw IP sockets and DDP framing written here from
//! the RFCs (not ddpdk's code), for the black-box interoperability test of the `ddpdk` binary
//! across a veth.
//!
//! ```text
//! usrsctp-raw-peer LOCAL_IP PEER_IP PORT BYTES SIZE UNTAGGED [SEGMENT]
//! ```
//!
//! It associates with the peer with Adaptation Layer Indication 1 (RFC 5043 §11.1, and requires
//! the peer's to be 1), opens a DDP Stream Session on stream 1 (Initiate, PPID 17), reads the
//! region the peer offers in its Accept's Private Data (STag, TO, length: 20 bytes,
//! big-endian), receives UNTAGGED untagged messages (PPID 16) and checks their DDP headers,
//! writes BYTES into the region as tagged messages of SIZE bytes (PPID 16, segments of
//! SEGMENT bytes, 1400 unless said, each in one unfragmented DATA chunk), terminates the
//! session, waits for the
//! peer's Terminate, and shuts the association down. Every DATA chunk it sends is unordered.
//! It prints one line per step; the last says `ok`. Exit status 1 on any failure.
//!
//! ```text
//! usrsctp-raw-peer service (echo|discard|daytime) LOCAL_IP PEER_IP PORT [COUNT]
//! usrsctp-raw-peer service abort LOCAL_IP PORT COUNT
//! ```
//!
//! The test services' other end (issue 16 item 2), still with DDP's Adaptation Layer
//! Indication: `echo` sends COUNT messages of assorted sizes, streams and PPIDs (none 17, which
//! DDP's session machine would answer) and expects each back, bytes, stream and PPID the same;
//! `discard` sends COUNT and expects nothing back, then shuts down; `daytime` expects one
//! message on stream 0 with PPID 0 ending "UTC\n" and then the peer's SHUTDOWN. `abort`
//! listens on PORT and aborts each of COUNT associations as it comes up (a peer for a client
//! that keeps re-associating).

use std::net::IpAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ddpdk_usrsctp::{raw, Endpoint, Message, Notification, Received};

const STREAM: u16 = 1;
/// RFC 5043 §5.1: the PPIDs of DDP Segments and of DDP Stream Session Control.
const PPID_SEGMENT: u32 = 16;
const PPID_CONTROL: u32 = 17;
/// RFC 5043 §5.2 function codes.
const INITIATE: u16 = 1;
const ACCEPT: u16 = 2;
const TERMINATE: u16 = 4;
/// Payload bytes per tagged DDP Segment: 2 (DDP-SSN) + 14 (tagged header) + 1400 fits a DATA
/// chunk on a 1500-byte link with room to spare.
const SEGMENT: usize = 1400;
const STEP: Duration = Duration::from_secs(20);

fn main() -> ExitCode {
    match run() {
        Ok(()) => {
            println!("ok");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("usrsctp-raw-peer: {e}");
            ExitCode::FAILURE
        }
    }
}

fn arg<T: std::str::FromStr>(args: &[String], k: usize, name: &str) -> Result<T, String> {
    args.get(k)
        .ok_or_else(|| format!("missing {name}"))?
        .parse()
        .map_err(|_| format!("bad {name}"))
}

/// The next message or notification, waiting at most `STEP`.
fn next(ep: &mut Endpoint, what: &str) -> Result<Received, String> {
    let deadline = Instant::now() + STEP;
    loop {
        if let Some(r) = ep.recv() {
            return Ok(r);
        }
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}"));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// The next message, failing on a notification that ends the association.
fn next_message(ep: &mut Endpoint, what: &str) -> Result<Message, String> {
    loop {
        match next(ep, what)? {
            Received::Message(m) => return Ok(m),
            Received::Notification(
                n @ (Notification::CommLost { .. }
                | Notification::ShutdownEvent
                | Notification::CantStartAssoc { .. }),
            ) => return Err(format!("{what}: the association ended: {n:?}")),
            Received::Notification(_) => {}
        }
    }
}

fn send(ep: &mut Endpoint, ppid: u32, data: &[u8]) -> Result<(), String> {
    let deadline = Instant::now() + STEP;
    loop {
        match ep.send(STREAM, ppid, true, data) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_micros(100));
            }
            Err(e) => return Err(format!("send: {e}")),
        }
    }
}

fn be16(b: &[u8], k: usize) -> u16 {
    u16::from_be_bytes([b[k], b[k + 1]])
}

fn be32(b: &[u8], k: usize) -> u32 {
    u32::from_be_bytes([b[k], b[k + 1], b[k + 2], b[k + 3]])
}

fn be64(b: &[u8], k: usize) -> u64 {
    (u64::from(be32(b, k)) << 32) | u64::from(be32(b, k + 4))
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("service") {
        return service(&args[1..]);
    }
    let local: IpAddr = arg(&args, 1, "LOCAL_IP")?;
    let peer: IpAddr = arg(&args, 2, "PEER_IP")?;
    let port: u16 = arg(&args, 3, "PORT")?;
    let bytes: u64 = arg(&args, 4, "BYTES")?;
    let size: u64 = arg(&args, 5, "SIZE")?;
    let untagged: u32 = arg(&args, 6, "UNTAGGED")?;
    // IPv6's header is 20 bytes longer: a peer on a 1500-byte link announces a smaller MULPDU.
    let segment: usize = if args.len() > 7 {
        arg(&args, 7, "SEGMENT")?
    } else {
        SEGMENT
    };
    if size == 0 || segment == 0 {
        return Err("SIZE and SEGMENT must be positive".into());
    }
    raw::init().map_err(|e| format!("usrsctp init: {e}"))?;
    let mut ep =
        Endpoint::raw_ip(local, port, Some(1)).map_err(|e| format!("usrsctp socket: {e}"))?;
    ep.connect_ip(peer, port)
        .map_err(|e| format!("connect: {e}"))?;

    // The association, and the peer's Adaptation Layer Indication.
    let (mut up, mut adaptation) = (None, None);
    while up.is_none() || adaptation.is_none() {
        match next(&mut ep, "the association")? {
            Received::Notification(Notification::CommUp {
                inbound_streams,
                outbound_streams,
            }) => up = Some((inbound_streams, outbound_streams)),
            Received::Notification(Notification::AdaptationIndication(a)) => adaptation = Some(a),
            Received::Notification(n @ Notification::CantStartAssoc { .. }) => {
                return Err(format!("no association: {n:?}"))
            }
            other => return Err(format!("before COMM_UP: {other:?}")),
        }
    }
    let (inbound, outbound) = up.unwrap_or_default();
    let adaptation = adaptation.unwrap_or_default();
    println!(
        "associated: {inbound} inbound / {outbound} outbound streams, adaptation indication \
         {adaptation:#010x}"
    );
    if adaptation != 1 {
        return Err("the peer's adaptation indication is not DDP (1)".into());
    }

    // RFC 5043 §6: Initiate with DDP-SSN 0 and Private Data, then the peer's Accept.
    let mut initiate = vec![0, 0];
    initiate.extend_from_slice(&INITIATE.to_be_bytes());
    initiate.extend_from_slice(b"usrsctp peer");
    send(&mut ep, PPID_CONTROL, &initiate)?;
    let accept = next_message(&mut ep, "the Accept")?;
    let d = &accept.data;
    if accept.ppid != PPID_CONTROL || accept.stream != STREAM || !accept.unordered || d.len() < 4 {
        return Err(format!(
            "expected an unordered Accept on stream 1: {accept:?}"
        ));
    }
    if be16(d, 0) != 0 || be16(d, 2) != ACCEPT {
        return Err(format!(
            "expected Accept with DDP-SSN 0: SSN {} function {}",
            be16(d, 0),
            be16(d, 2)
        ));
    }
    let offer = &d[4..];
    if offer.len() != 20 {
        return Err(format!(
            "Accept's Private Data is {} bytes, not an offer",
            offer.len()
        ));
    }
    let (stag, to, len) = (be32(offer, 0), be64(offer, 4), be64(offer, 12));
    println!("session accepted: the peer offers STag {stag:#010x} TO {to:#x} length {len}");
    if bytes > len {
        return Err(format!("{bytes} bytes do not fit the offered {len}"));
    }

    // The peer's untagged messages (RFC 5041 §4.4 header after the DDP-SSN): DDP-SSN 1, 2,
    // ... after its Accept; QN 0; MSN 1, 2, ...; MO 0; the last segment (L) of each.
    let mut peer_ssn = 1u16;
    for msn in 1..=untagged {
        let m = next_message(&mut ep, "an untagged message")?;
        let d = &m.data;
        if m.ppid != PPID_SEGMENT || !m.unordered || d.len() < 2 + 18 {
            return Err(format!("expected an unordered DDP Segment: {m:?}"));
        }
        let ctl = d[2];
        let (ssn, qn, got_msn, mo) = (be16(d, 0), be32(d, 8), be32(d, 12), be32(d, 16));
        if ctl & 0x80 != 0 || ctl & 0x40 == 0 || ctl & 0x03 != 1 {
            return Err(format!(
                "untagged control byte {ctl:#04x}: want T=0 L=1 DV=1"
            ));
        }
        if (ssn, qn, got_msn, mo) != (peer_ssn, 0, msn, 0) {
            return Err(format!(
                "untagged message: DDP-SSN {ssn} QN {qn} MSN {got_msn} MO {mo}; want \
                 {peer_ssn} 0 {msn} 0"
            ));
        }
        peer_ssn = peer_ssn.wrapping_add(1);
        println!(
            "untagged message {msn}: {} bytes, DDP-SSN {ssn}, QN {qn}, MSN {got_msn}, payload \
             crc32c {:#010x}",
            d.len() - 20,
            crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, &d[20..]) as u32
        );
    }

    // The peer's shell completes its untagged send on our SACK, then watches the session for
    // SETTLE (20 ms) and calls the send failed if it ends meanwhile: on a plain DDP stream a
    // Terminate after a refused segment and a Terminate after a finished exchange look alike
    // (RFC 5043's Terminate carries no cause). Ours is the second kind; it waits until that
    // window is over, so that a fast run does not end the session inside it.
    std::thread::sleep(Duration::from_millis(200));

    // Tagged writes: the image, message by message, segment by segment.
    let image: Vec<u8> = (0..bytes)
        .map(|i| (i.wrapping_mul(0x9e37_79b9) >> 13) as u8)
        .collect();
    let mut ssn = 1u16;
    let mut messages = 0;
    for (k, message) in image.chunks(size as usize).enumerate() {
        let base = to + k as u64 * size;
        let segments = message.chunks(segment).count();
        for (j, seg) in message.chunks(segment).enumerate() {
            let mut p = Vec::with_capacity(16 + seg.len());
            p.extend_from_slice(&ssn.to_be_bytes());
            // T = 1, L on the last segment, DV = 1; RsvdULP 0.
            p.push(0x80 | if j + 1 == segments { 0x40 } else { 0 } | 0x01);
            p.push(0);
            p.extend_from_slice(&stag.to_be_bytes());
            p.extend_from_slice(&(base + (j * segment) as u64).to_be_bytes());
            p.extend_from_slice(seg);
            send(&mut ep, PPID_SEGMENT, &p)?;
            ssn = ssn.wrapping_add(1);
        }
        messages += 1;
    }
    println!(
        "wrote {bytes} bytes in {messages} tagged messages: crc32c {:#010x}",
        crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, &image) as u32
    );

    // Terminate, and the peer's answering Terminate (RFC 5043 §6.2).
    let mut terminate = ssn.to_be_bytes().to_vec();
    terminate.extend_from_slice(&TERMINATE.to_be_bytes());
    send(&mut ep, PPID_CONTROL, &terminate)?;
    loop {
        let m = next_message(&mut ep, "the peer's Terminate")?;
        if m.ppid == PPID_CONTROL && m.data.len() >= 4 && be16(&m.data, 2) == TERMINATE {
            println!("session terminated (DDP-SSN {})", be16(&m.data, 0));
            break;
        }
    }
    ep.shutdown().map_err(|e| format!("shutdown: {e}"))?;
    shut_down(&mut ep)
}

/// The messages of `service echo` and `service discard`: k-th on stream k % 4, PPID from a
/// list without 17, 1 to 1200 bytes (one DATA chunk on a 1500-byte link).
fn service_messages(count: usize) -> Vec<(u16, u32, Vec<u8>)> {
    (0..count)
        .map(|k| {
            let len = 1 + (k * 37) % 1200;
            let bytes = (0..len).map(|i| (i + k) as u8).collect();
            ((k % 4) as u16, [0, 16, 51, 1234][k % 4], bytes)
        })
        .collect()
}

fn send_on(ep: &mut Endpoint, stream: u16, ppid: u32, data: &[u8]) -> Result<(), String> {
    let deadline = Instant::now() + STEP;
    loop {
        match ep.send(stream, ppid, true, data) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                // Take what came back meanwhile: the echo's window is ours too.
                std::thread::sleep(Duration::from_micros(100));
            }
            Err(e) => return Err(format!("send: {e}")),
        }
    }
}

/// Waits for COMM_UP (and the peer's adaptation indication, which must be DDP's).
fn wait_up(ep: &mut Endpoint) -> Result<(), String> {
    let (mut up, mut adaptation) = (false, None);
    while !up || adaptation.is_none() {
        match next(ep, "the association")? {
            Received::Notification(Notification::CommUp { .. }) => up = true,
            Received::Notification(Notification::AdaptationIndication(a)) => adaptation = Some(a),
            Received::Notification(n @ Notification::CantStartAssoc { .. }) => {
                return Err(format!("no association: {n:?}"))
            }
            other => return Err(format!("before COMM_UP: {other:?}")),
        }
    }
    if adaptation != Some(1) {
        return Err(format!(
            "the peer's adaptation indication is {adaptation:?}, not DDP (1)"
        ));
    }
    Ok(())
}

fn service(args: &[String]) -> Result<(), String> {
    let kind: String = arg(args, 1, "SERVICE")?;
    raw::init().map_err(|e| format!("usrsctp init: {e}"))?;
    if kind == "abort" {
        let local: IpAddr = arg(args, 2, "LOCAL_IP")?;
        let port: u16 = arg(args, 3, "PORT")?;
        let count: u32 = arg(args, 4, "COUNT")?;
        for k in 1..=count {
            // A new listening socket each time: an endpoint here carries one association.
            // usrsctp frees the last one's port on its own timer thread, so the bind may find
            // it still taken for a moment (CI saw "Address already in use" once): retry.
            let mut tries = 0;
            let mut ep = loop {
                match Endpoint::raw_ip(local, port, Some(1)) {
                    Ok(ep) => break ep,
                    Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && tries < 100 => {
                        tries += 1;
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                    Err(e) => return Err(format!("usrsctp socket: {e}")),
                }
            };
            ep.listen().map_err(|e| format!("listen: {e}"))?;
            wait_up(&mut ep)?;
            ep.abort().map_err(|e| format!("abort: {e}"))?;
            println!("association {k} up, aborted");
            drop(ep);
        }
        return Ok(());
    }
    let local: IpAddr = arg(args, 2, "LOCAL_IP")?;
    let peer: IpAddr = arg(args, 3, "PEER_IP")?;
    let port: u16 = arg(args, 4, "PORT")?;
    let count: usize = if args.len() > 5 {
        arg(args, 5, "COUNT")?
    } else {
        100
    };
    let mut ep =
        Endpoint::raw_ip(local, port, Some(1)).map_err(|e| format!("usrsctp socket: {e}"))?;
    ep.connect_ip(peer, port)
        .map_err(|e| format!("connect: {e}"))?;
    wait_up(&mut ep)?;
    println!("associated with the {kind} service on port {port}");
    match kind.as_str() {
        "echo" => {
            let msgs = service_messages(count);
            let mut got = Vec::new();
            for (stream, ppid, data) in &msgs {
                send_on(&mut ep, *stream, *ppid, data)?;
                while let Some(r) = ep.recv() {
                    match r {
                        Received::Message(m) => got.push((m.stream, m.ppid, m.unordered, m.data)),
                        other => return Err(format!("while sending: {other:?}")),
                    }
                }
            }
            while got.len() < msgs.len() {
                let m = next_message(&mut ep, "an echo")?;
                got.push((m.stream, m.ppid, m.unordered, m.data));
            }
            // Unordered both ways: compare as sets, each message once.
            let mut want: Vec<_> = msgs
                .iter()
                .map(|(s, p, d)| (*s, *p, true, d.clone()))
                .collect();
            want.sort();
            got.sort();
            if got != want {
                return Err("the echoes differ from what was sent".into());
            }
            println!("{count} messages echoed: bytes, stream, PPID and U flag the same");
            ep.shutdown().map_err(|e| format!("shutdown: {e}"))?;
        }
        "discard" => {
            for (stream, ppid, data) in service_messages(count) {
                send_on(&mut ep, stream, ppid, &data)?;
            }
            let quiet = Instant::now() + Duration::from_millis(500);
            while Instant::now() < quiet {
                if let Some(r) = ep.recv() {
                    return Err(format!("the discard service answered: {r:?}"));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            println!("{count} messages sent, nothing came back");
            ep.shutdown().map_err(|e| format!("shutdown: {e}"))?;
        }
        "daytime" => {
            let m = next_message(&mut ep, "the time")?;
            let text = String::from_utf8_lossy(&m.data).into_owned();
            if (m.stream, m.ppid, m.unordered) != (0, 0, true) || !text.ends_with("UTC\n") {
                return Err(format!("not the time on stream 0, PPID 0: {m:?}"));
            }
            println!("the time: {}", text.trim_end());
            loop {
                match next(&mut ep, "the peer's SHUTDOWN")? {
                    Received::Notification(Notification::ShutdownEvent) => break,
                    Received::Notification(n @ Notification::CommLost { .. }) => {
                        return Err(format!("instead of a SHUTDOWN: {n:?}"))
                    }
                    _ => {}
                }
            }
            println!("the peer shut the association down");
        }
        other => return Err(format!("no service {other:?}")),
    }
    shut_down(&mut ep)
}

/// Waits for SHUTDOWN COMPLETE (whichever side started the shutdown), failing on an abort.
fn shut_down(ep: &mut Endpoint) -> Result<(), String> {
    loop {
        match next(ep, "SHUTDOWN COMPLETE")? {
            Received::Notification(Notification::ShutdownComplete) => break,
            Received::Notification(n @ Notification::CommLost { .. }) => {
                return Err(format!("instead of a shutdown: {n:?}"))
            }
            _ => {}
        }
    }
    println!("association shut down");
    Ok(())
}
