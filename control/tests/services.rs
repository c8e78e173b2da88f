//! Issue 16 item 2: the test services an SCTP conformance tester expects of a system under
//! test, on a DDP endpoint's connection: `echo` reflects every user message on its stream with
//! its PPID, `discard` takes and drops them, `daytime` sends the time when the association
//! comes up and shuts down gracefully. DDP session control (PPID 17) still reaches the
//! session machine (RFC 5043 §6). The peer here is a bare SCTP association (our engine), so
//! it can send user messages that are not DDP at all.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use ddpdk_control::conn::{Accept, ConnConfig, Connection, Listener, Service};
use ddpdk_control::memory::Memory;
use ddpdk_control::session::PendingLimit;
use ddpdk_dataplane::sctp::{Association, CloseReason, Config, Endpoint, Event, Instant, Message};

const C_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
const S_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));

fn cfg(port: u16) -> Config {
    Config {
        local_port: port,
        rto_initial: Duration::from_millis(100),
        rto_min: Duration::from_millis(100),
        sack_delay: Duration::from_millis(10),
        ..Config::default()
    }
}

fn t(ms: u64) -> Instant {
    Instant::from_nanos(1_000_000_000 + ms * 1_000_000)
}

/// A bare SCTP client and a server connection running `service`, connected.
struct Pair {
    c: Association,
    s: Option<Connection>,
    listener: Listener,
    memory: Memory,
    /// What the client received: (stream, PPID, bytes).
    got: Vec<(u16, u32, Vec<u8>)>,
    now: u64,
}

impl Pair {
    fn new(service: Service) -> Pair {
        let mut cep = Endpoint::new(cfg(5001), [1; 32]).unwrap();
        let sep = Endpoint::new(cfg(5002), [2; 32]).unwrap();
        let listener = Listener::new(
            sep,
            ConnConfig {
                service,
                ..ConnConfig::default()
            },
            PendingLimit::new(4),
        );
        let (memory, _) = Memory::new(64, 1, 7);
        let c = cep.connect(t(0), S_ADDR, 5002);
        let mut p = Pair {
            c,
            s: None,
            listener,
            memory,
            got: Vec::new(),
            now: 0,
        };
        p.run(50);
        assert!(p.s.is_some(), "the server accepted the association");
        p
    }

    /// Moves packets both ways and runs timers for `ms` milliseconds of virtual time.
    fn run(&mut self, ms: u64) {
        let mut buf = vec![0u8; 65536];
        let mut out = vec![0u8; 65536];
        for _ in 0..ms {
            self.now += 1;
            let now = t(self.now);
            for side in 0..2 {
                // Timers.
                if side == 0 && self.c.poll_timeout().is_some_and(|x| x <= now) {
                    self.c.handle_timeout(now);
                }
                if let Some(s) = self.s.as_mut() {
                    if side == 1 && s.poll_timeout().is_some_and(|x| x <= now) {
                        s.handle_timeout(now);
                    }
                }
            }
            // Until both are quiet at this instant.
            loop {
                let mut any = false;
                while let Some(n) = self.c.poll_transmit(now, &mut buf) {
                    any = true;
                    let pkt = buf[..n].to_vec();
                    match self.s.as_mut() {
                        Some(s) => {
                            let _ = s.handle(now, &pkt, &self.memory);
                        }
                        None => {
                            match self
                                .listener
                                .handle(now, C_ADDR, &pkt, &mut out, &self.memory)
                            {
                                Accept::Reply(m) => {
                                    let got = &mut self.got;
                                    let _ = self.c.handle(now, &out[..m], &mut |m: Message<'_>| {
                                        got.push((m.stream, m.ppid, m.data.to_vec()))
                                    });
                                }
                                Accept::Connection(conn) => self.s = Some(*conn),
                                Accept::Ignored => {}
                            }
                        }
                    }
                }
                if let Some(s) = self.s.as_mut() {
                    while let Some(n) = s.poll_transmit(now, &mut buf) {
                        any = true;
                        let got = &mut self.got;
                        let _ = self.c.handle(now, &buf[..n], &mut |m: Message<'_>| {
                            got.push((m.stream, m.ppid, m.data.to_vec()))
                        });
                    }
                    while s.poll_indication().is_some() {}
                }
                if !any {
                    break;
                }
            }
        }
    }

    fn server(&self) -> &Connection {
        self.s.as_ref().unwrap()
    }
}

#[test]
fn echo_reflects_every_user_message_on_its_stream_with_its_ppid() {
    let mut p = Pair::new(Service::Echo);
    let msgs: Vec<(u16, u32, Vec<u8>)> = (0..200u32)
        .map(|k| {
            let len = 1 + (k as usize * 37) % 1200;
            (
                (k % 4) as u16,
                [0, 16, 51, 1234][k as usize % 4],
                vec![k as u8; len],
            )
        })
        .collect();
    let mut sent = 0;
    while sent < msgs.len() {
        let (stream, ppid, data) = &msgs[sent];
        match p.c.send(*stream, *ppid, data) {
            Ok(_) => sent += 1,
            Err(_) => p.run(5),
        }
    }
    p.run(500);
    assert_eq!(
        p.got, msgs,
        "every message back, in order, stream and PPID kept"
    );
    let st = p.server().stats();
    assert_eq!((st.service_echoed, st.service_dropped), (200, 0));
    assert_eq!(
        p.server().receive_room(),
        p.server().association().receive_buffer(),
        "nothing held"
    );
}

#[test]
fn discard_takes_and_drops_user_messages() {
    let mut p = Pair::new(Service::Discard);
    // DDP Segments' PPID and another; not 17, which the session machine answers.
    for k in 0..50u32 {
        p.c.send(1, [16, 99][k as usize % 2], &[7u8; 300]).unwrap();
    }
    p.run(500);
    assert!(p.got.is_empty(), "nothing comes back: {:?}", p.got);
    assert_eq!(p.server().stats().service_discarded, 50);
    assert_eq!(p.server().stats().segments_received, 0, "not DDP's");
}

#[test]
fn daytime_sends_the_time_then_shuts_down() {
    let mut p = Pair::new(Service::Daytime);
    p.run(1000);
    assert_eq!(p.got.len(), 1, "{:?}", p.got);
    let (stream, ppid, text) = &p.got[0];
    assert_eq!((*stream, *ppid), (0, 0));
    let text = String::from_utf8(text.clone()).unwrap();
    assert!(text.ends_with(" UTC\n") && text.len() == 24, "{text:?}");
    let events: Vec<Event> = std::iter::from_fn(|| p.c.poll_event()).collect();
    assert!(
        events.contains(&Event::Closed(CloseReason::Shutdown)),
        "a graceful SHUTDOWN: {events:?}"
    );
    assert!(p.server().is_closed());
}
