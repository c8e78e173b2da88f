//! The transmit side of one TX queue, shared by every thread shape of the engine: frames are
//! built in one scratch buffer, copied into a port buffer and sent in bursts; whatever the
//! port does not take after a few retries is freed and counted, never leaked.

use std::net::IpAddr;
use std::sync::Arc;

use ddpdk_dataplane::net::Interface;
use ddpdk_dataplane::port::{PacketBuf, Port};
use ddpdk_dataplane::sctp::Instant;

/// Frames sent per `tx_burst`.
pub const BURST: usize = 32;
/// Largest frame we build: a jumbo SCTP packet plus Ethernet and IPv6 headers.
pub const FRAME_MAX: usize = 9216 + 14 + 40;
/// `tx_burst` retries before frames are dropped (and counted).
const TX_RETRIES: u32 = 4;

/// Sees every frame queued for transmission (a capture, for example), in order.
pub type Tap = Arc<std::sync::Mutex<dyn FnMut(&[u8]) + Send>>;

/// What a TX queue did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxStats {
    pub frames_out: u64,
    /// Frames the port did not take after the retries; freed.
    pub tx_dropped: u64,
    /// No buffer to build a frame in; the frame is lost (SCTP retransmits).
    pub no_buffer: u64,
    /// SCTP packets lost because the neighbour was unknown (a solicitation went instead).
    pub unresolved: u64,
    /// Frames larger than a transmit buffer (a reply to an oversized INIT, say); not sent.
    pub too_big: u64,
}

/// One TX queue of one port, owned by one thread.
pub(crate) struct Tx<P: Port> {
    port: Arc<P>,
    queue: u16,
    bufs: Vec<P::Buf>,
    /// Where `alloc_bulk` puts the one buffer of a frame being built (kept: no allocation per
    /// frame).
    spare: Vec<P::Buf>,
    /// The frame being built: SCTP packets are written at their header length's offset.
    pub frame: Vec<u8>,
    pub tap: Option<Tap>,
    pub stats: TxStats,
}

impl<P: Port> Tx<P> {
    pub fn new(port: Arc<P>, queue: u16) -> Tx<P> {
        Tx {
            port,
            queue,
            bufs: Vec::with_capacity(BURST),
            spare: Vec::with_capacity(1),
            frame: vec![0; FRAME_MAX],
            tap: None,
            stats: TxStats::default(),
        }
    }

    /// Frames the SCTP packet of `len` bytes at `self.frame[header_len(peer)..]` to `peer`
    /// through `iface`'s neighbour table, and queues it (a solicitation instead when the
    /// neighbour is unknown). With `device_checksum` the device fills its CRC32c.
    pub fn send_sctp(
        &mut self,
        now: Instant,
        iface: &mut Interface,
        peer: IpAddr,
        len: usize,
        device_checksum: bool,
    ) {
        let mut frame = std::mem::take(&mut self.frame);
        match iface.frame_sctp_reachable(now, peer, len, &mut frame) {
            Ok((n, stale)) => {
                let offload = device_checksum.then_some((
                    ddpdk_dataplane::wire::link::ETHERNET_HEADER_LEN,
                    Interface::ip_header_len(peer),
                    peer.is_ipv6(),
                ));
                self.send_bytes(&frame[..n], offload);
                if stale {
                    let probe = iface.probe(now, peer, &mut frame);
                    if probe > 0 {
                        self.send_raw(&frame[..probe]);
                    }
                }
            }
            Err(u) => {
                self.stats.unresolved += 1;
                if u.solicitation > 0 {
                    self.send_raw(&frame[..u.solicitation]);
                }
            }
        }
        self.frame = frame;
    }

    /// As [`Tx::send_sctp`], to link address `mac` (a reply to where a request came from).
    pub fn send_sctp_to(&mut self, iface: &mut Interface, mac: [u8; 6], peer: IpAddr, len: usize) {
        let mut frame = std::mem::take(&mut self.frame);
        let n = iface.frame_sctp_to(mac, peer, len, &mut frame);
        self.send_raw(&frame[..n]);
        self.frame = frame;
    }

    /// Queues a copy of `bytes`; sends a burst when one is full.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.send_bytes(bytes, None);
    }

    /// As [`Tx::send_raw`]; with `sctp_checksum` = (link header, IP header, IPv6) the device is
    /// asked to fill the frame's SCTP CRC32c.
    fn send_bytes(&mut self, bytes: &[u8], sctp_checksum: Option<(usize, usize, bool)>) {
        if !self.port.alloc_bulk(&mut self.spare, 1, bytes.len()) {
            self.stats.no_buffer += 1;
            return;
        }
        let Some(mut b) = self.spare.pop() else {
            self.stats.no_buffer += 1;
            return;
        };
        // A buffer holds at most its data room: a larger frame (a reply to an oversized INIT)
        // is not sent; the buffer goes back to its pool.
        let Some(room) = b.data_mut().get_mut(..bytes.len()) else {
            self.stats.too_big += 1;
            return;
        };
        room.copy_from_slice(bytes);
        if let Some((l2, l3, ipv6)) = sctp_checksum {
            b.request_sctp_checksum(l2, l3, ipv6);
        }
        if let Some(t) = &self.tap {
            if let Ok(mut f) = t.lock() {
                f(bytes);
            }
        }
        self.bufs.push(b);
        if self.bufs.len() >= BURST {
            self.flush();
        }
    }

    /// Sends what is queued.
    pub fn flush(&mut self) {
        if self.bufs.is_empty() {
            return;
        }
        let out = self
            .port
            .tx_burst_all(self.queue, &mut self.bufs, TX_RETRIES);
        self.stats.frames_out += out.sent as u64;
        self.stats.tx_dropped += out.dropped as u64;
    }
}
