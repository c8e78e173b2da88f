//! The data core's acknowledgement policy, seen from a raw SCTP peer on the other end of an
//! in-memory port: a burst of packets handled in one poll turn must not merge the SACKs that
//! RFC 9260 asks for per packet.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod rt;
use rt::{endpoint_with, runtime, PORT};

use std::net::{IpAddr, Ipv4Addr};

use ddpdk_control::runtime::{Control, DataCore, RuntimeConfig};
use ddpdk_dataplane::net::{Interface, Rx};
use ddpdk_dataplane::port::mem::{pair, HeapBuf, MemPort};
use ddpdk_dataplane::port::{PacketBuf, Port};
use ddpdk_dataplane::sctp::{Association, Config, Instant, Message, State};

const PEER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const OURS: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// SCTP chunk type of SACK (RFC 9260 §3.3.4).
const SACK: u8 = 3;

/// A raw peer (a sans-IO association) and a one-core runtime endpoint, polled on this thread.
struct Rig {
    now: Instant,
    peer: Association,
    iface: Interface,
    port: MemPort,
    control: Control<MemPort>,
    cores: Vec<DataCore<MemPort>>,
    buf: Vec<u8>,
}

impl Rig {
    fn new() -> Rig {
        let (pa, pb) = pair(2, 4096);
        let ours_mac = pb.mac();
        let (control, cores) = runtime(pb, OURS, None, 2, RuntimeConfig::default());
        let now = Instant::from_nanos(1_000_000_000);
        // Max.Burst high enough that the peer's window, not its burst budget, limits what
        // it sends (the burst budget refills only on a SACK: issue 13's ack clock).
        let mut ep = endpoint_with(
            9,
            Config {
                max_burst: 32,
                ..Config::default()
            },
        );
        let peer = ep.connect(now, IpAddr::V4(OURS), PORT);
        let mut iface = Interface::new(pa.mac(), Some(PEER), None);
        iface.learn_static(IpAddr::V4(OURS), ours_mac);
        let mut rig = Rig {
            now,
            peer,
            iface,
            port: pa,
            control,
            cores,
            buf: vec![0u8; 9300],
        };
        for _ in 0..20 {
            let frames = rig.peer_frames();
            rig.send_to_endpoint(frames);
            rig.endpoint_turn();
            let back = rig.take_from_endpoint();
            rig.send_to_peer(&back);
        }
        assert_eq!(rig.peer.state(), State::Established, "association up");
        rig
    }

    /// Every packet the peer has to send, framed.
    fn peer_frames(&mut self) -> Vec<Vec<u8>> {
        let h = Interface::header_len(IpAddr::V4(OURS));
        let mut v = Vec::new();
        while let Some(len) = self.peer.poll_transmit(self.now, &mut self.buf[h..]) {
            let mut f = self.buf.clone();
            let n = self
                .iface
                .frame_sctp(self.now, IpAddr::V4(OURS), len, &mut f)
                .unwrap();
            f.truncate(n);
            v.push(f);
        }
        v
    }

    /// The frames, all at once: the core takes them in one RX burst.
    fn send_to_endpoint(&mut self, frames: Vec<Vec<u8>>) {
        let n = frames.len();
        let mut bufs: Vec<HeapBuf> = frames.into_iter().map(HeapBuf::new).collect();
        assert_eq!(self.port.tx_burst(0, &mut bufs), n);
    }

    /// One poll turn of the core, then of the control thread.
    fn endpoint_turn(&mut self) {
        for k in &mut self.cores {
            k.poll(self.now);
        }
        self.control.poll(self.now);
        while self.control.poll_event().is_some() {}
    }

    /// The SCTP packets the endpoint sent.
    fn take_from_endpoint(&mut self) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        for q in 0..2 {
            self.port.rx_burst(q, &mut got, 512);
        }
        let mut reply = [0u8; 128];
        got.iter()
            .filter_map(|b| match self.iface.receive(b.data(), &mut reply) {
                Rx::Sctp(f) => Some(f.sctp.to_vec()),
                _ => None,
            })
            .collect()
    }

    fn send_to_peer(&mut self, packets: &[Vec<u8>]) {
        for p in packets {
            let _ = self.peer.handle(self.now, p, &mut |_: Message<'_>| {});
        }
    }
}

/// How many of `packets` start with a SACK chunk.
fn sacks(packets: &[Vec<u8>]) -> usize {
    packets.iter().filter(|p| p.get(12) == Some(&SACK)).count()
}

impl Rig {
    /// Exchanges packets until the peer has nothing outstanding, timers included.
    fn settle(&mut self) {
        for _ in 0..2000 {
            let frames = self.peer_frames();
            self.send_to_endpoint(frames);
            self.endpoint_turn();
            let back = self.take_from_endpoint();
            self.send_to_peer(&back);
            if self.peer.queued() == 0 && back.is_empty() {
                return;
            }
            self.now += std::time::Duration::from_millis(1);
            if self.peer.poll_timeout().is_some_and(|t| t <= self.now) {
                self.peer.handle_timeout(self.now);
            }
        }
        panic!("the peer's messages were never all acknowledged");
    }

    /// Grows the peer's congestion window (slow start) past `packets` full-sized packets, so
    /// that it sends them in one go, and leaves nothing outstanding.
    fn warm_up(&mut self, packets: usize) {
        while self.peer.cwnd() < (packets + 1) * 1500 {
            // Twice what the window takes: the window is full, so slow start grows it.
            for k in 0..2 * packets {
                self.peer.send(1, 99, &[k as u8; 1200]).unwrap();
            }
            self.settle();
        }
    }
}

/// The peer queues `n` messages of 1200 bytes (one DATA chunk per packet) and returns the
/// packets it sends for them.
fn data_packets(rig: &mut Rig, n: usize) -> Vec<Vec<u8>> {
    rig.warm_up(n);
    for k in 0..n {
        rig.peer.send(1, 99, &[k as u8; 1200]).unwrap();
    }
    let frames = rig.peer_frames();
    assert_eq!(frames.len(), n, "one DATA chunk per packet");
    frames
}

/// RFC 9260 §6.7: "The data receiver continues sending a SACK after receipt of each SCTP
/// packet that doesn't fill the gap." The first of 8 packets is lost; the 7 behind it reach
/// the core in one RX burst, and each gets its own SACK (with the gap), not one for the burst.
#[test]
fn rfc9260_6_7_a_sack_for_each_packet_while_a_gap_exists() {
    let mut rig = Rig::new();
    let mut frames = data_packets(&mut rig, 8);
    frames.remove(0);
    rig.send_to_endpoint(frames);
    rig.endpoint_turn();
    let back = rig.take_from_endpoint();
    assert_eq!(
        sacks(&back),
        7,
        "one SACK per packet behind the gap, {} packets back",
        back.len()
    );
    // Every one of them reports the gap: cumulative TSN ack below the 7 received.
    let cum = |p: &Vec<u8>| u32::from_be_bytes([p[16], p[17], p[18], p[19]]);
    let gap_blocks = |p: &Vec<u8>| u16::from_be_bytes([p[24], p[25]]);
    for p in back.iter().filter(|p| p.get(12) == Some(&SACK)) {
        assert_eq!(gap_blocks(p), 1, "a SACK without the gap");
        assert_eq!(cum(p), cum(&back[0]), "the cumulative TSN moved");
    }
}

/// RFC 9260 §6.2: "an acknowledgement SHOULD be generated for at least every second packet
/// ... received". Eight packets in order in one RX burst: four SACKs, not one.
#[test]
fn rfc9260_6_2_a_sack_for_every_second_packet_of_a_burst() {
    let mut rig = Rig::new();
    let frames = data_packets(&mut rig, 8);
    rig.send_to_endpoint(frames);
    rig.endpoint_turn();
    let back = rig.take_from_endpoint();
    assert_eq!(sacks(&back), 4, "{} packets back", back.len());
}
