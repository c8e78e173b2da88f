//! What the two whole-path DDP targets share (`ddp_conn`, `rdmap_conn`): a peer with a real
//! SCTP association (our engine, so the input travels the real path) opens a session on stream
//! 1, the server's ULP accepts and registers memory, then every fuzz record becomes one DDP
//! chunk (PPID 16, 17 or other, on any stream, any bytes) sent to the server's `Connection`.
//! Nothing may panic, and nothing may be placed outside what was registered or posted: the
//! region's guard bytes stay zero (RFC 5041 §8: "nothing placed where it was not allowed").

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use ddpdk_control::conn::{Accept, ConnConfig, Indication, Listener};
use ddpdk_control::memory::{Memory, MemoryRegistration};
use ddpdk_control::rdmap::{encode_private_data, RdmaLimits};
use ddpdk_control::session::PendingLimit;
use ddpdk_dataplane::mem::Access;
use ddpdk_dataplane::sctp::{Config, Endpoint, Instant, Message};

const C: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const S: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
/// The region: a guard, the tagged buffer, a guard, the receive buffers, a guard.
const GUARD: u64 = 4096;
const TAGGED: u64 = 4096;
const POSTED: u32 = 512;

/// Runs one input: on a plain DDP stream, or on an RDMAP stream with memory also open to
/// remote reads and atomics (`rdmap`).
pub fn run(data: &[u8], rdmap: bool) {
    let cfg = |port| Config {
        local_port: port,
        send_slots: 64,
        tsn_window: 256,
        ..Config::default()
    };
    let mut cep = Endpoint::new(cfg(5001), [1; 32]).expect("config");
    let sep = Endpoint::new(cfg(5002), [2; 32]).expect("config");
    let mut listener = Listener::new(
        sep,
        ConnConfig {
            queues: 2,
            recv_depth: 4,
            max_sends: 16,
            ..ConnConfig::default()
        },
        PendingLimit::new(2),
    );
    let (mut memory, _) = Memory::new(16, 0, 3);
    let mut now = Instant::from_nanos(1_000_000_000);
    let mut c = cep.connect(now, S, 5002);
    let mut buf = vec![0u8; 65536];
    let mut out = vec![0u8; 65536];
    let mut sink = |_: Message<'_>| {};
    let n = c.poll_transmit(now, &mut buf).expect("INIT");
    let Accept::Reply(m) = listener.handle(now, C, &buf[..n], &mut out, &memory) else {
        return;
    };
    let _ = c.handle(now, &out[..m], &mut sink);
    // The Initiate rides with the COOKIE ECHO (sent from COOKIE-WAIT/ECHOED); an RDMAP one
    // carries RDMAP's Private Data.
    let limits = RdmaLimits { ird: 4, ord: 4 };
    let mut initiate = vec![0, 0, 0, 1];
    if rdmap {
        let Ok(pdata) = encode_private_data(limits, b"hi") else {
            return;
        };
        initiate.extend_from_slice(&pdata);
    } else {
        initiate.extend_from_slice(b"hi");
    }
    let _ = c.send(1, 17, &initiate);
    let n = c.poll_transmit(now, &mut buf).expect("COOKIE ECHO");
    let Accept::Connection(mut s) = listener.handle(now, C, &buf[..n], &mut out, &memory) else {
        return;
    };
    let pd = memory.alloc_pd();
    let region = memory
        .alloc_region((3 * GUARD + TAGGED) as usize + 4 * POSTED as usize)
        .expect("region");
    let sid = s.stream_id(1);
    let tagged = memory
        .register(MemoryRegistration {
            pd,
            region,
            offset: GUARD,
            len: TAGGED,
            access: if rdmap {
                Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC
            } else {
                Access::REMOTE_WRITE
            },
            stream: sid,
            to_base: 0,
        })
        .expect("register");
    let local = memory
        .register(MemoryRegistration {
            pd,
            region,
            offset: 2 * GUARD + TAGGED,
            len: 4 * u64::from(POSTED),
            access: Access::LOCAL_WRITE,
            stream: None,
            to_base: 0,
        })
        .expect("register");
    let accepted = if rdmap {
        s.accept_rdmap(1, pd, limits, b"ok").is_ok()
    } else {
        s.accept(1, pd, b"ok").is_ok()
    };
    if accepted {
        for i in 0..4u32 {
            let b = memory
                .receive_buffer(pd, local.stag, u64::from(i * POSTED), POSTED)
                .expect("buffer");
            let _ = s.post_recv(1, i % 2, u64::from(i), b);
        }
    }
    let mut pump = |c: &mut ddpdk_dataplane::sctp::Association,
                    s: &mut ddpdk_control::conn::Connection,
                    memory: &Memory,
                    now: Instant| {
        for _ in 0..8 {
            let mut moved = false;
            while let Some(n) = c.poll_transmit(now, &mut buf) {
                let _ = s.handle(now, &buf[..n], memory);
                moved = true;
            }
            while let Some(n) = s.poll_transmit(now, &mut out) {
                let _ = c.handle(now, &out[..n], &mut |_: Message<'_>| {});
                moved = true;
            }
            if !moved {
                break;
            }
        }
        while s.poll_completion().is_some() {}
        while let Some(i) = s.poll_indication() {
            let _: Indication = i;
        }
    };
    pump(&mut c, &mut s, &memory, now);
    // Records: [stream, kind, len_hi, len_lo, bytes...]; kind picks the PPID and a time step.
    let mut rest = data;
    while rest.len() >= 4 {
        let stream = u16::from(rest[0] % 4);
        let kind = rest[1];
        let len = usize::from(u16::from_be_bytes([rest[2], rest[3]])).min(rest.len() - 4);
        let mut chunk = rest[4..4 + len].to_vec();
        rest = &rest[4 + len..];
        // Bit 2 stamps the registered STag into a tagged header (an RDMA Write, a Read
        // Response), bit 3 (RDMAP only) as the Data Source STag of a Read Request (RFC 5040 §4.4: after the
        // DDP-SSN, the untagged DDP header and the sink STag, TO and message size), so the
        // input reaches the bounds checks, placement and serving without guessing it.
        if kind & 4 != 0 && chunk.len() >= 8 {
            chunk[4..8].copy_from_slice(&tagged.stag.0.to_be_bytes());
        }
        if rdmap && kind & 8 != 0 && chunk.len() >= 40 {
            chunk[36..40].copy_from_slice(&tagged.stag.0.to_be_bytes());
        }
        let ppid = match kind % 4 {
            0 | 1 => 16,
            2 => 17,
            _ => u32::from(kind),
        };
        if !chunk.is_empty() {
            let _ = c.send(stream, ppid, &chunk);
        }
        now += Duration::from_millis(u64::from(kind >> 4));
        for t in [c.poll_timeout(), s.poll_timeout()].into_iter().flatten() {
            if t <= now {
                c.handle_timeout(now);
                s.handle_timeout(now);
            }
        }
        pump(&mut c, &mut s, &memory, now);
    }
    // The guards around the registered and posted memory were never written.
    let r = memory.region(region).expect("region");
    for start in [
        0,
        GUARD + TAGGED,
        2 * GUARD + TAGGED + 4 * u64::from(POSTED),
    ] {
        let end = (start + GUARD).min(r.len() as u64);
        let mut g = vec![0xffu8; (end - start) as usize];
        r.read(start, &mut g).expect("in bounds");
        // One OR over the guard, not a traced compare per byte (a third of the target's
        // time went to the latter).
        assert!(
            g.iter().fold(0u8, |acc, &b| acc | b) == 0,
            "bytes placed outside registered memory at {start}"
        );
    }
}
