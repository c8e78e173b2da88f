//! One DDP/SCTP endpoint on one queue of one port, on the calling thread: raw frames in
//! (`rx_burst`) through [`Interface`] (ours? ARP and Neighbor Discovery answered), SCTP packets
//! to their [`Connection`] or to the [`Listener`], and everything the connections have to send
//! framed and out (`tx_burst`), with the connections' timers run from the caller's clock.
//!
//! This is the single-core shape of the engine: the poll loop a data core runs, with the
//! control work (INIT, COOKIE ECHO, sessions, STags) done inline. Splitting the control work
//! onto its own thread and the associations across cores keeps these pieces and moves the
//! boundaries between them.

use std::net::IpAddr;
use std::sync::Arc;

use ddpdk_dataplane::net::{Interface, Rx};
use ddpdk_dataplane::port::{PacketBuf, Port};
use ddpdk_dataplane::sctp::{Endpoint, Instant};

use crate::conn::{Accept, ConnConfig, Connection, Listener};
use crate::memory::Memory;
use crate::session::PendingLimit;
use crate::xmit::Tx;
pub use crate::xmit::{Tap, BURST};
/// Connections an engine holds at most; closed ones are reclaimed first when a new one needs
/// room.
pub const MAX_CONNECTIONS: usize = 256;
/// The link MTU unless told otherwise ([`Engine::set_link_mtu`]).
const LINK_MTU: usize = 1500;

/// A connection's handle in its engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnId(pub usize);

/// Counters of the engine's own work (the interface, connections and associations count
/// theirs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineStats {
    pub frames_in: u64,
    pub frames_out: u64,
    /// Frames the port did not take after the retries; freed.
    pub tx_dropped: u64,
    /// No buffer to build a frame in; the frame is lost (SCTP retransmits).
    pub no_buffer: u64,
    /// SCTP packets lost because the neighbour was unknown (a solicitation went instead).
    pub unresolved: u64,
    /// SCTP packets for no connection that the endpoint ignored (it counts why).
    pub ignored: u64,
    /// Frames larger than a transmit buffer (a reply to an oversized INIT, say); not sent.
    pub too_big: u64,
    /// New associations refused because [`MAX_CONNECTIONS`] are open.
    pub refused: u64,
    /// Packets for a connection that its association discarded (bad CRC32c or tag, ...).
    pub discarded: u64,
    /// Frames that arrived as buffer chains (parsed from a gathered copy).
    pub rx_chained: u64,
    /// Region spans sent by reference (zero-copy), and copied because the port could not.
    pub zero_copy_spans: u64,
    pub copied_spans: u64,
}

/// See the module documentation.
pub struct Engine<P: Port> {
    port: Arc<P>,
    queue: u16,
    out: Tx<P>,
    iface: Interface,
    listener: Listener,
    memory: Memory,
    /// Slots; a removed connection leaves `None`, reused by the next one.
    conns: Vec<Option<Connection>>,
    link_mtu: usize,
    rx: Vec<P::Buf>,
    /// Where a received chain is gathered.
    linear: Vec<u8>,
    stats: EngineStats,
}

impl<P: Port> Engine<P> {
    /// An endpoint on `queue` of `port` with addresses `iface`, answering INITs with
    /// `endpoint`, placing into `memory`.
    pub fn new(
        port: Arc<P>,
        queue: u16,
        iface: Interface,
        endpoint: Endpoint,
        cfg: ConnConfig,
        limit: PendingLimit,
        memory: Memory,
    ) -> Engine<P> {
        Engine {
            out: Tx::new(Arc::clone(&port), queue),
            port,
            queue,
            iface,
            listener: Listener::new(endpoint, cfg, limit),
            memory,
            conns: Vec::new(),
            link_mtu: LINK_MTU,
            rx: Vec::with_capacity(BURST),
            linear: Vec::new(),
            stats: EngineStats::default(),
        }
    }

    /// Shows every frame queued for transmission to `tap` (a software capture: it costs a
    /// lock and a call per frame; frames the port then refuses are counted in `tx_dropped`).
    pub fn set_tap(&mut self, tap: Tap) {
        self.out.tap = Some(tap);
    }

    pub fn stats(&self) -> EngineStats {
        let t = &self.out.stats;
        EngineStats {
            frames_out: t.frames_out,
            tx_dropped: t.tx_dropped,
            no_buffer: t.no_buffer,
            unresolved: t.unresolved,
            too_big: t.too_big,
            zero_copy_spans: t.zero_copy_spans,
            copied_spans: t.copied_spans,
            ..self.stats
        }
    }

    pub fn interface(&self) -> &Interface {
        &self.iface
    }

    /// Teaches the interface a neighbour (a static entry; ARP and ND learn the rest).
    pub fn learn(&mut self, ip: IpAddr, mac: [u8; 6]) {
        self.iface.learn_static(ip, mac);
    }

    /// The link's MTU (IP packet size): each association's path MTU is it less its IP
    /// header, so IPv4 and IPv6 peers both fit (RFC 5043 §9 sizes segments from it).
    pub fn set_link_mtu(&mut self, mtu: usize) {
        self.link_mtu = mtu;
    }

    fn path_mtu(&self, peer: IpAddr) -> usize {
        self.link_mtu - Interface::ip_header_len(peer)
    }

    /// Takes a connection into a free slot, reclaiming closed ones when the engine is full.
    fn adopt(&mut self, mut c: Connection) -> Option<ConnId> {
        c.set_path_mtu(self.path_mtu(c.peer_ip()));
        c.use_regions(Arc::clone(self.memory.region_table()));
        let slot = match self.conns.iter().position(Option::is_none) {
            Some(k) => k,
            None if self.conns.len() < MAX_CONNECTIONS => {
                self.conns.push(None);
                self.conns.len() - 1
            }
            None => {
                let k = self
                    .conns
                    .iter()
                    .position(|c| c.as_ref().is_some_and(|c| c.association().is_closed()))?;
                self.conns[k] = None;
                k
            }
        };
        self.conns[slot] = Some(c);
        Some(ConnId(slot))
    }

    /// Forgets a connection (after its `Closed` indication, say); its id may be reused.
    pub fn remove(&mut self, id: ConnId) -> Option<Connection> {
        self.conns.get_mut(id.0)?.take()
    }

    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    pub fn memory_mut(&mut self) -> &mut Memory {
        &mut self.memory
    }

    pub fn listener(&self) -> &Listener {
        &self.listener
    }

    /// Opens an association to `peer`, `port`; `None` if [`MAX_CONNECTIONS`] are open.
    pub fn connect(&mut self, now: Instant, peer: IpAddr, port: u16) -> Option<ConnId> {
        let c = self.listener.connect(now, peer, port);
        self.adopt(c)
    }

    pub fn conn(&mut self, id: ConnId) -> Option<&mut Connection> {
        self.conns.get_mut(id.0)?.as_mut()
    }

    /// Every connection held, closed ones included until [`Engine::remove`].
    pub fn conn_ids(&self) -> impl Iterator<Item = ConnId> + '_ {
        self.conns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_some())
            .map(|(k, _)| ConnId(k))
    }

    /// The ULP's memory and a connection at once (to post buffers from registered memory).
    pub fn conn_and_memory(&mut self, id: ConnId) -> Option<(&mut Connection, &mut Memory)> {
        Some((self.conns.get_mut(id.0)?.as_mut()?, &mut self.memory))
    }

    /// The earliest time a connection's timer is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.conns
            .iter()
            .flatten()
            .filter_map(|c| c.poll_timeout())
            .min()
    }

    /// One turn of the poll loop at `now`: a burst received and handled, due timers run,
    /// everything there is to send framed and transmitted. Returns the frames moved.
    pub fn poll(&mut self, now: Instant) -> usize {
        let mut moved = 0;
        let mut rx = std::mem::take(&mut self.rx);
        let n = self.port.rx_burst(self.queue, &mut rx, BURST);
        let mut linear = std::mem::take(&mut self.linear);
        for buf in rx.drain(..) {
            self.stats.frames_in += 1;
            // A chain (a jumbo frame in small device buffers, a peer's zero-copy frame over
            // net_ring) is parsed from a gathered copy.
            if buf.gather_into(&mut linear) {
                self.stats.rx_chained += 1;
                self.receive(now, &linear);
            } else {
                self.receive(now, buf.data());
            }
        }
        self.linear = linear;
        self.rx = rx;
        moved += n;
        for c in self.conns.iter_mut().flatten() {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
        }
        for i in 0..self.conns.len() {
            let Some(peer) = self.conns[i].as_ref().map(Connection::peer_ip) else {
                continue;
            };
            let h = Interface::header_len(peer);
            let Some(c) = self.conns[i].as_mut() else {
                continue;
            };
            while let Some((len, holes)) = c.poll_transmit_gather(now, &mut self.out.frame[h..]) {
                moved += 1;
                let regions = self.memory.region_table();
                self.out
                    .send_sctp_gather(now, &mut self.iface, peer, len, holes, regions, false);
            }
        }
        self.out.flush();
        moved
    }

    fn receive(&mut self, now: Instant, frame: &[u8]) {
        let mut reply = [0u8; 128];
        match self.iface.receive(frame, &mut reply) {
            Rx::Reply(n) => self.out.send_raw(&reply[..n]),
            Rx::Consumed | Rx::Dropped(_) => {}
            Rx::Sctp(f) => {
                let peer = f.ip.src();
                let peer_port = f.sctp.get(..2).map(|p| u16::from_be_bytes([p[0], p[1]]));
                let owner = self.conns.iter_mut().flatten().find(|c| {
                    !c.association().is_closed()
                        && c.peer_ip() == peer
                        && Some(c.association().peer_port()) == peer_port
                });
                if let Some(c) = owner {
                    // Only a packet its association authenticated (CRC32c, verification tag)
                    // teaches us where the peer is.
                    match c.handle(now, f.sctp, &self.memory) {
                        Ok(()) => self.iface.confirm(peer, f.src_mac),
                        Err(_) => self.stats.discarded += 1,
                    }
                    return;
                }
                let h = Interface::header_len(peer);
                let mut out = std::mem::take(&mut self.out.frame);
                match self
                    .listener
                    .handle(now, peer, f.sctp, &mut out[h..], &self.memory)
                {
                    Accept::Ignored => self.stats.ignored += 1,
                    Accept::Reply(n) => {
                        self.out.frame = out;
                        self.out.send_sctp(now, &mut self.iface, peer, n, false);
                        return;
                    }
                    Accept::Connection(c) => {
                        // A valid cookie authenticates the peer.
                        if self.adopt(*c).is_some() {
                            self.iface.confirm(peer, f.src_mac);
                        } else {
                            self.stats.refused += 1;
                        }
                    }
                }
                self.out.frame = out;
            }
        }
    }
}

impl<P: Port> std::fmt::Debug for Engine<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("port", &self.port.name())
            .field("queue", &self.queue)
            .field("connections", &self.conns.len())
            .field("stats", &self.stats)
            .finish()
    }
}
