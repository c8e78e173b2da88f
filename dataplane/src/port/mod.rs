//! The port layer: burst RX/TX of packet buffers, link state and statistics.
//!
//! [`Port`] is implemented by the DPDK ethdev layer ([`dpdk::DpdkPort`]) and by an in-memory
//! pair ([`mem::MemPort`]) for tests that need no DPDK. Everything above this module (poll loops,
//! forwarding engines, later the protocol engine) is generic over `Port`.
//!
//! Buffer ownership is the leak guard: a buffer is a value that frees itself on drop, `rx_burst`
//! appends owned buffers to a caller's vector, `tx_burst` removes from the caller's vector exactly
//! the buffers the device took. What is left is still the caller's: retried or dropped (freed),
//! and [`Port::tx_burst_all`] counts the drops.

#[cfg(feature = "dpdk")]
#[allow(unsafe_code)]
pub mod dpdk;
pub mod faults;
pub mod mem;
// Hints only: a prefetch cannot fault or change a byte.
#[allow(unsafe_code)]
pub mod prefetch;
// Region memory is written by data cores while the application reads it: raw copies only.
#[allow(unsafe_code)]
pub mod region;

use serde::Serialize;

use region::Region;

/// A packet buffer owned by the caller: one segment, or the head of a chain built for a
/// zero-copy transmit ([`PacketBuf::chain`], [`Port::attach_region`]).
pub trait PacketBuf: Send {
    /// The packet bytes (of the first segment, for a chain: see [`PacketBuf::gather_into`]).
    fn data(&self) -> &[u8];
    /// The packet bytes, writable (of the first segment, for a chain).
    fn data_mut(&mut self) -> &mut [u8];
    /// Sets a fresh one-segment buffer's data length to `len`, or to its data room when that
    /// is smaller (then [`PacketBuf::data_mut`] is shorter than asked). The bytes are whatever
    /// the buffer held: a sender that takes buffers from the pool in bulk sizes each as it
    /// fills it.
    fn resize(&mut self, len: usize);
    /// Packet length in bytes (of the first segment, for a chain).
    fn len(&self) -> usize {
        self.data().len()
    }
    /// True for a zero-length packet.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Asks the device to compute this frame's SCTP CRC32c (RFC 9260 App. A): `l2` bytes of
    /// link header and `l3` of IP header precede the SCTP packet. Only for ports whose
    /// [`Port::sctp_checksum_offload`] has `tx`; others ignore it.
    fn request_sctp_checksum(&mut self, _l2: usize, _l3: usize, _ipv6: bool) {}
    /// What the receiving device found of the frame's L4 checksum: `Some(true)` good,
    /// `Some(false)` bad, `None` not checked (then software checks it).
    fn l4_checksum_verdict(&self) -> Option<bool> {
        None
    }
    /// Appends `next` (and any chain behind it) to this frame, so the device sends both as one
    /// frame; hands `next` back when this buffer type cannot chain or the chain is full.
    fn chain(&mut self, next: Self) -> Result<(), Self>
    where
        Self: Sized,
    {
        Err(next)
    }
    /// The whole frame's length, every segment of a chain included.
    fn frame_len(&self) -> usize {
        self.len()
    }
    /// For a frame in several segments (a received chain), its bytes gathered into `out`
    /// (cleared first) and true; false, with `out` untouched, when [`PacketBuf::data`] is the
    /// whole frame.
    fn gather_into(&self, _out: &mut Vec<u8>) -> bool {
        false
    }
}

/// What a port's device does for SCTP's CRC32c.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ChecksumOffload {
    /// It computes the checksum of frames that ask for it.
    pub tx: bool,
    /// It checks received SCTP packets and says so in each buffer.
    pub rx: bool,
}

/// One SCTP association's packets as they arrive: from `peer`:`peer_port` to
/// `local`:`local_port` (what a device flow rule matches to steer them, [`Port::steer_sctp`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SctpFlow {
    pub local: std::net::IpAddr,
    pub peer: std::net::IpAddr,
    pub local_port: u16,
    pub peer_port: u16,
}

/// Inbound ESP of one SA as it arrives: SPI `spi` to `local`, from `peer` where the SA is a
/// tunnel's (any source for a transport-mode SA): what a device rule matches to hand it to the
/// NIC's inline crypto session ([`Port::esp_ingress_rule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EspIngress {
    pub local: std::net::IpAddr,
    pub peer: Option<std::net::IpAddr>,
    pub spi: u32,
}

/// A device flow rule [`Port::steer_sctp`] or [`Port::esp_ingress_rule`] installed; only the
/// port that made it can remove it.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct FlowRule(usize);

impl FlowRule {
    pub(crate) fn new(id: usize) -> FlowRule {
        FlowRule(id)
    }

    pub(crate) fn id(&self) -> usize {
        self.0
    }
}

/// Link state as reported by the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct LinkStatus {
    pub up: bool,
    /// Megabits per second; 0 when unknown.
    pub speed_mbps: u32,
    pub full_duplex: bool,
}

impl std::fmt::Display for LinkStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.up {
            let duplex = if self.full_duplex { "full" } else { "half" };
            match self.speed_mbps {
                // RTE_ETH_SPEED_NUM_UNKNOWN.
                u32::MAX => write!(f, "up, speed unknown, {duplex}-duplex"),
                mbps => write!(f, "up, {mbps} Mbps, {duplex}-duplex"),
            }
        } else {
            f.write_str("down")
        }
    }
}

/// Basic port counters, with the meanings of `struct rte_eth_stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct PortStats {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    /// Packets the device dropped because the RX queue was full (testpmd's RX-missed).
    pub rx_missed: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    /// RX buffer allocation failures (testpmd's RX-nombuf).
    pub rx_nombuf: u64,
}

/// The result of a [`Port::tx_burst_all`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxOutcome {
    pub sent: usize,
    /// Buffers the device would not take after all retries; they were freed.
    pub dropped: usize,
    /// Bytes of the dropped buffers.
    pub dropped_bytes: u64,
}

/// Why an [`RxWaiter::wait`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woken {
    /// A frame came to one of the queues (the device's RX interrupt).
    Rx,
    /// [`RxWaiter::bell`]: work in the core's rings.
    Bell,
    Timeout,
    /// The wait itself failed: the caller sleeps on its timer from now on.
    Failed,
}

/// An idle data core's blocking wait on its RX queues' interrupts and its doorbell (RX
/// interrupts: the device wakes the core with the first frame instead of a timer waking it
/// to poll). Made by [`Port::rx_waiter`] on the thread that waits.
pub trait RxWaiter: Send + Sync + std::fmt::Debug {
    /// Turns the queues' interrupts on or off; false if the device refused (poll instead).
    /// Frames that came before `arm(true)` may signal nothing: poll once after arming.
    fn arm(&self, on: bool) -> bool;
    /// Blocks the calling thread until a queue signals, [`RxWaiter::bell`] rings, or
    /// `timeout` passes (rounded up to milliseconds).
    fn wait(&self, timeout: std::time::Duration) -> Woken;
    /// Ends a wait under way, from any thread, or the next one if none is.
    fn bell(&self);
}

/// A network port with any number of RX and TX queues.
///
/// Queue methods take `&self` because DPDK's per-queue burst functions are safe to call from
/// different threads on different queues. That one queue is used by one lcore at a time is the
/// job of the validated (port, queue, lcore) table in [`crate::config`].
pub trait Port: Send + Sync {
    type Buf: PacketBuf;

    /// The port id (the DPDK port id for ethdevs).
    fn id(&self) -> u16;

    /// RFC 4301 §6.1.2 and §8.2.1: an ICMP PMTU message quoting one of our ESP packets
    /// ([`crate::net::Rx::EspTooBig`]); whether an outbound SA believed it and recorded its
    /// path MTU. A port without IPsec has no SA: never.
    fn esp_too_big(&self, _t: &crate::net::EspTooBig) -> bool {
        false
    }

    /// Whether the port opens ESP ([`Port::open_esp`]): the interface then reassembles ESP
    /// fragments to us for it.
    fn opens_esp(&self) -> bool {
        false
    }

    /// RFC 4301 §5.2, RFC 4303 §3.4.1: an ESP datagram reassembled from fragments, opened as
    /// the port opens ESP it receives whole; `None` (dropped, counted by the SA or the
    /// policy) if it does not open, or the port does not open ESP.
    fn open_esp(&self, _frame: Self::Buf) -> Option<Self::Buf> {
        None
    }

    /// Moves each time an SA's path MTU is lowered: a data core that sees it move (one load
    /// a turn of its poll loop) asks [`Port::esp_sctp_mtu`] for each of its associations
    /// (RFC 4301 §8.2.1: the PMTU is propagated to the traffic the SA carries).
    fn esp_pmtu_generation(&self) -> u64 {
        0
    }

    /// The SCTP packet size the association `local`:`local_port` to `peer`:`peer_port` may
    /// send, where the outbound SA protecting it holds a path MTU from ICMP: that PMTU less
    /// the SA's overhead and the inner IP header (RFC 4301 §8.2.1). `None` otherwise.
    fn esp_sctp_mtu(
        &self,
        _local: std::net::IpAddr,
        _peer: std::net::IpAddr,
        _local_port: u16,
        _peer_port: u16,
    ) -> Option<usize> {
        None
    }

    /// The device's `rte_security` context where it does ESP crypto inline, as it sends and
    /// receives (`RTE_SECURITY_ACTION_TYPE_INLINE_CRYPTO`); `None` by default. IPsec then has
    /// the NIC do the SAs it can. A port that returns one promises a live `rte_security_ctx`
    /// for as long as the port itself lives: the IPsec port calls into it.
    fn inline_crypto(&self) -> Option<std::ptr::NonNull<std::ffi::c_void>> {
        None
    }

    /// The SCTP checksum offload the device offers and the port enabled (none by default).
    fn sctp_checksum_offload(&self) -> ChecksumOffload {
        ChecksumOffload::default()
    }
    /// A human-readable name (device name or test label).
    fn name(&self) -> &str;
    fn nb_rx_queues(&self) -> u16;
    fn nb_tx_queues(&self) -> u16;
    /// The port's MAC address.
    fn mac(&self) -> [u8; 6];

    /// Receives at most `max` packets from RX queue `queue`, appending them to `out`.
    /// Returns the number received. Does not allocate when `out` has spare capacity.
    fn rx_burst(&self, queue: u16, out: &mut Vec<Self::Buf>, max: usize) -> usize;

    /// Offers the packets of `pkts`, front first, to TX queue `queue`. The packets the device
    /// took are removed from `pkts` and the number is returned; the others remain, in order.
    fn tx_burst(&self, queue: u16, pkts: &mut Vec<Self::Buf>) -> usize;

    /// [`Port::tx_burst`] for packets larger than the path to their peer carries whole:
    /// chunks framed before RFC 8899 discovery or ICMP lowered the path MTU (RFC 9260 §7.3),
    /// over IPv6, or over IPv4 without DF (also every IPv4 packet above 576 bytes while
    /// discovery has BASE_PLPMTU unconfirmed, RFC 8899 §5.4), which the caller could not cut
    /// into source fragments because the port seals what it sends: a non-initial fragment
    /// carries no ports for the security policy to select (RFC 4301 §4.4.1.1). A port that
    /// seals them with ESP fragments each sealed IPv6 packet above `ipv6_mtu` IP bytes (the
    /// size before sealing the caller holds for the path, no larger than what crossed it
    /// sealed; never below IPv6's 1280, RFC 8200 §5), after IPsec processing (RFC 4301 §7);
    /// sealed IPv4 leaves without DF for the routers. Any other port sends them as they are.
    fn tx_burst_fragmenting(
        &self,
        queue: u16,
        pkts: &mut Vec<Self::Buf>,
        _ipv6_mtu: usize,
    ) -> usize {
        self.tx_burst(queue, pkts)
    }

    /// How many frames this port took from TX queue `queue`'s caller still wait for the
    /// device's ring inside it (an IPsec port holds frames it sealed: they cannot go back to be
    /// sealed again). The caller keeps calling [`Port::tx_burst`], with nothing new if need be,
    /// until this is 0, as for frames it holds itself, and counts them in its backlog.
    fn tx_held(&self, _queue: u16) -> usize {
        0
    }

    /// Frees the frames [`Port::tx_held`] counts for `queue` (its caller stops); returns how
    /// many, for the caller to count as dropped. Frames of a device queue another caller
    /// shares ([`Port::tx_device_queue`]) are that caller's too: they are left, and 0 is
    /// returned.
    fn discard_held(&self, _queue: u16) -> usize {
        0
    }

    /// The device TX queue that carries TX queue `queue`'s frames. Two queues that answer the
    /// same take turns on one device queue (a DPDK port's `share_last_pair`): a layer that
    /// orders frames per device queue (an IPsec port's sequence numbers) keys on this.
    fn tx_device_queue(&self, queue: u16) -> u16 {
        queue
    }

    /// Appends `n` fresh buffers of `len` data bytes each to `out`, or none at all (returns false)
    /// when the pool cannot supply `n`.
    fn alloc_bulk(&self, out: &mut Vec<Self::Buf>, n: usize, len: usize) -> bool;

    /// A buffer whose data is `len` bytes of `region` from `offset`, referenced and not copied
    /// (zero-copy transmit), to be chained behind a header buffer. `None` when the device
    /// cannot send chains or the region is not memory it can read (the caller then copies).
    /// The region must stay unchanged until the frame is sent, and outlives the buffer.
    fn attach_region(&self, _region: &Region, _offset: u64, _len: usize) -> Option<Self::Buf> {
        None
    }

    /// As [`Port::attach_region`], made of `buf`, a fresh buffer from this port's
    /// [`Port::alloc_bulk`] (`len` 0), so that a sender that takes its buffers in bulk does
    /// not have the pool called once for every span. `Err(buf)`, the buffer back unchanged,
    /// where `attach_region` gives `None` (and for a buffer that is not fresh).
    fn attach_region_in(
        &self,
        buf: Self::Buf,
        region: &Region,
        offset: u64,
        len: usize,
    ) -> Result<Self::Buf, Self::Buf> {
        self.attach_region(region, offset, len).ok_or(buf)
    }

    /// Most buffers one transmitted frame may be made of (a chain from
    /// [`Port::attach_region`] and [`PacketBuf::chain`]); longer chains are not built.
    fn max_tx_segments(&self) -> usize {
        usize::MAX
    }

    /// Installs a device rule that steers `flow`'s packets to RX queue `queue` (`rte_flow`), so
    /// that they reach the core owning the association without a software hand-off. `Err` with
    /// the device's reason when it has no such rules or refused this one.
    fn steer_sctp(&self, _flow: &SctpFlow, _queue: u16) -> Result<FlowRule, String> {
        Err("the port has no flow rules".into())
    }

    /// Removes a rule [`Port::steer_sctp`] installed; `Err` with the device's reason if it
    /// would not.
    fn unsteer_sctp(&self, _rule: FlowRule) -> Result<(), String> {
        Ok(())
    }

    /// Installs the device rule that hands `esp`'s packets to the NIC's inline crypto session
    /// `session` (of the context [`Port::inline_crypto`] gave): `rte_flow` with a SECURITY
    /// action, the only way ixgbe and txgbe install an inbound SA (their session creation
    /// installs outbound ones alone). `Err` with the device's reason where it has no such
    /// rules or refused this one; what its NIC then leaves undecrypted is opened in software.
    fn esp_ingress_rule(
        &self,
        _esp: &EspIngress,
        _session: std::ptr::NonNull<std::ffi::c_void>,
    ) -> Result<FlowRule, String> {
        Err("the port has no flow rules".into())
    }

    /// Removes a rule [`Port::esp_ingress_rule`] installed, before its session goes.
    fn remove_esp_ingress_rule(&self, _rule: FlowRule) -> Result<(), String> {
        Ok(())
    }

    /// A wait on the interrupts of RX queues `queues` and a doorbell, for the calling thread
    /// ([`RxWaiter`]); `None` where the device has no RX interrupts or the port was not set
    /// up for them.
    fn rx_waiter(&self, _queues: &[u16]) -> Option<std::sync::Arc<dyn RxWaiter>> {
        None
    }

    /// Frees every buffer of `bufs`, leaving it empty. Devices with a bulk free override it.
    fn free_bulk(&self, bufs: &mut Vec<Self::Buf>) {
        bufs.clear();
    }

    fn link(&self) -> LinkStatus;
    fn stats(&self) -> PortStats;
    /// Extended statistics as (name, value) pairs.
    fn xstats(&self) -> Vec<(String, u64)>;
    fn reset_stats(&self);

    /// Sends all of `pkts`, offering what the device did not take up to `retries` more times;
    /// then frees what is left. `pkts` is empty afterwards: nothing leaks.
    fn tx_burst_all(&self, queue: u16, pkts: &mut Vec<Self::Buf>, retries: u32) -> TxOutcome {
        let mut sent = self.tx_burst(queue, pkts);
        let mut tries = 0;
        while !pkts.is_empty() && tries < retries {
            sent += self.tx_burst(queue, pkts);
            tries += 1;
        }
        let dropped = pkts.len();
        let dropped_bytes = pkts.iter().map(|p| p.frame_len() as u64).sum();
        self.free_bulk(pkts);
        TxOutcome {
            sent,
            dropped,
            dropped_bytes,
        }
    }
}
