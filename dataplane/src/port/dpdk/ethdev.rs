//! DPDK ethdev ports.

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dpdk_sys as sys;

use super::kernel_ring::KernelRings;
use super::tap_queue::TapQueue;
use super::{check, DpdkError, Mbuf, Mempool};
use crate::port::region::Region;
use crate::port::{ChecksumOffload, FlowRule, LinkStatus, Port, PortStats, SctpFlow};

// RTE_ETH_RSS_* are RTE_BIT64() macros, which bindgen does not evaluate (rte_ethdev.h).
const RSS_IPV4: u64 = 1 << 2;
const RSS_NONFRAG_IPV4_UDP: u64 = 1 << 5;
const RSS_NONFRAG_IPV4_SCTP: u64 = 1 << 6;
const RSS_IPV6: u64 = 1 << 8;
const RSS_NONFRAG_IPV6_UDP: u64 = 1 << 11;
const RSS_NONFRAG_IPV6_SCTP: u64 = 1 << 12;
// RTE_ETH_{TX,RX}_OFFLOAD_SCTP_CKSUM, RTE_BIT64() macros too.
const TX_OFFLOAD_SCTP_CKSUM: u64 = 1 << 4;
/// RTE_ETH_TX_OFFLOAD_MULTI_SEGS: the device sends mbuf chains.
const TX_OFFLOAD_MULTI_SEGS: u64 = 1 << 15;
const RX_OFFLOAD_SCTP_CKSUM: u64 = 1 << 17;
/// rte_ethdev.h: inline IPsec crypto (`rte_security`) on receive and on transmit.
const RX_OFFLOAD_SECURITY: u64 = 1 << 15;
const TX_OFFLOAD_SECURITY: u64 = 1 << 17;
/// SCTP first: associations are steered on the SCTP 5-tuple where the NIC can hash it.
const RSS_WANTED: u64 = RSS_NONFRAG_IPV4_SCTP
    | RSS_NONFRAG_IPV6_SCTP
    | RSS_NONFRAG_IPV4_UDP
    | RSS_NONFRAG_IPV6_UDP
    | RSS_IPV4
    | RSS_IPV6;

/// How to configure a port's queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortConf {
    pub nb_rxq: u16,
    pub nb_txq: u16,
    pub nb_rxd: u16,
    pub nb_txd: u16,
    pub promiscuous: bool,
    /// The last queue pair may be the device's first again when the device has one pair
    /// fewer than asked: its TX queue then sends through TX queue 0, under a lock both take,
    /// and its RX queue is not made. A DDP endpoint asks this of its control thread's pair
    /// (one a data core, one for the control thread), so that a device with one queue pair
    /// (vhost-user, virtio-user, pcap, af_xdp on most interfaces) still carries an endpoint.
    pub share_last_pair: bool,
    /// RX queue interrupts, for cores that block while idle ([`Port::rx_waiter`]). A device
    /// whose configuration refuses them is configured without; one that takes them but has
    /// none (most virtual devices) gives no waiter.
    pub rx_interrupts: bool,
    /// Enable the device's inline IPsec crypto where it has it (`rte_security`): asked only
    /// with IPsec on, since a NIC may leave its fastest transmit path with it.
    pub inline_ipsec: bool,
}

impl Default for PortConf {
    fn default() -> Self {
        Self {
            nb_rxq: 1,
            nb_txq: 1,
            nb_rxd: 1024,
            nb_txd: 1024,
            promiscuous: true,
            share_last_pair: false,
            rx_interrupts: false,
            inline_ipsec: false,
        }
    }
}

/// What a device says about itself before it is configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    pub port_id: u16,
    pub name: String,
    pub driver: String,
    pub socket: i32,
    pub max_rx_queues: u16,
    pub max_tx_queues: u16,
    pub mac: [u8; 6],
    pub mtu: u16,
    pub rss_offloads: u64,
    /// Entries of the RSS redirection table (0: none).
    pub reta_size: u16,
    /// Bytes of the RSS hash key the device takes (0: none).
    pub hash_key_size: u8,
    pub tx_offload_capa: u64,
    pub rx_offload_capa: u64,
    /// Most segments one transmitted frame may have (`tx_desc_lim`: the smaller of
    /// `nb_seg_max` and `nb_mtu_seg_max`, where the device sets them).
    pub tx_seg_max: u16,
    /// The kernel interface under the device (0: none, or the driver did not say).
    pub if_index: u32,
}

/// How a port spreads received SCTP packets over RX queues, once programmed by
/// [`DpdkPort::program_sctp_rss`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SctpSteering {
    /// RSS hashes the SCTP 5-tuple (IPv4 and/or IPv6) with our key; the redirection table
    /// of `reta_size` entries holds queue `i % queues` at entry `i`.
    Rss { hash: u64, reta_size: u16 },
    /// No SCTP hashing: packets reach whichever queue the device picks (software dispatch).
    None(&'static str),
}

impl PortInfo {
    /// Queries `port_id`.
    pub fn query(port_id: u16) -> Result<PortInfo, DpdkError> {
        let mut info = sys::rte_eth_dev_info::default();
        // SAFETY: `info` is a valid out-parameter.
        check(|| format!("rte_eth_dev_info_get(port {port_id})"), unsafe {
            sys::rte_eth_dev_info_get(port_id, &mut info)
        })?;
        let mut name = [0 as c_char; sys::RTE_ETH_NAME_MAX_LEN as usize];
        check(
            || format!("rte_eth_dev_get_name_by_port({port_id})"),
            // SAFETY: buffer of RTE_ETH_NAME_MAX_LEN bytes as the API requires.
            unsafe { sys::rte_eth_dev_get_name_by_port(port_id, name.as_mut_ptr()) },
        )?;
        // SAFETY: NUL-terminated by DPDK within the buffer.
        let name = unsafe { CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let driver = if info.driver_name.is_null() {
            String::new()
        } else {
            // SAFETY: driver_name is a static NUL-terminated string owned by the PMD.
            unsafe { CStr::from_ptr(info.driver_name) }
                .to_string_lossy()
                .into_owned()
        };
        let mut mac = sys::rte_ether_addr::default();
        // SAFETY: valid out-parameter.
        unsafe { sys::rte_eth_macaddr_get(port_id, &mut mac) };
        let mut mtu = 0u16;
        // SAFETY: valid out-parameter.
        unsafe { sys::rte_eth_dev_get_mtu(port_id, &mut mtu) };
        // SAFETY: plain query.
        let socket = unsafe { sys::rte_eth_dev_socket_id(port_id) };
        Ok(PortInfo {
            port_id,
            name,
            driver,
            socket,
            max_rx_queues: info.max_rx_queues,
            max_tx_queues: info.max_tx_queues,
            mac: mac.addr_bytes,
            mtu,
            rss_offloads: info.flow_type_rss_offloads,
            reta_size: info.reta_size,
            hash_key_size: info.hash_key_size,
            tx_offload_capa: info.tx_offload_capa,
            rx_offload_capa: info.rx_offload_capa,
            // 0 means the device did not say; DPDK fills in UINT16_MAX by default.
            tx_seg_max: [info.tx_desc_lim.nb_seg_max, info.tx_desc_lim.nb_mtu_seg_max]
                .into_iter()
                .filter(|&n| n > 0)
                .min()
                .unwrap_or(u16::MAX),
            if_index: info.if_index,
        })
    }
}

const STOPPED: u8 = 0;
const STARTED: u8 = 1;
const CLOSED: u8 = 2;

/// A configured DPDK ethdev port.
#[derive(Debug)]
pub struct DpdkPort {
    info: PortInfo,
    conf: PortConf,
    /// SCTP CRC32c offloads the device offers, enabled at configuration.
    offload: ChecksumOffload,
    /// The address of the device's `rte_security` context, its inline IPsec crypto enabled
    /// both ways; 0: none.
    sec_ctx: usize,
    /// The device sends mbuf chains, so region memory can go out attached, not copied.
    multi_seg: bool,
    /// SCTP associations are steered by `rte_flow` rules ([`DpdkPort::enable_sctp_flow_rules`]).
    flow_rules: std::sync::atomic::AtomicBool,
    pool: Arc<Mempool>,
    state: AtomicU8,
    /// The last TX queue is the device's queue 0 again ([`PortConf::share_last_pair`]): both
    /// send under this lock.
    shared_tx: Option<std::sync::Mutex<()>>,
    /// af_packet's kernel rings, whose drops the PMD does not count (`kernel_ring`).
    kernel_rings: Option<KernelRings>,
    /// A tap's kernel queues, whose drops the PMD does not count either (`tap_queue`).
    tap_queue: Option<TapQueue>,
    /// Each RX queue's interrupt fd (-1: none), read once after the start: DPDK logs an
    /// error for each look at a device without them.
    rx_intr_fds: std::sync::OnceLock<Vec<i32>>,
    /// The fds data cores' waiters hold ([`super::intr::ClaimedFds`]).
    rx_intr_claimed: super::intr::ClaimedFds,
    /// Reconnections of a memif client ([`DpdkPort::wait_link_up`]), and why the last one
    /// failed.
    memif_reconnects: std::sync::atomic::AtomicU32,
    memif_reconnect_tries: std::sync::atomic::AtomicU32,
    memif_reconnect_error: std::sync::Mutex<Option<String>>,
    /// A `net_memif` port: its bursts are marked for `memif_quiesce`.
    memif: bool,
}

/// How long [`DpdkPort::wait_link_up`] gives a memif client's first connection before it
/// connects again: a handshake takes milliseconds, a refusal comes at once.
pub const MEMIF_RECONNECT_AFTER: Duration = Duration::from_millis(500);

/// The longest wait between two of a memif client's connections.
pub const MEMIF_RECONNECT_MAX: Duration = Duration::from_secs(4);

impl DpdkPort {
    /// Configures `port_id` with `conf`, its RX queues drawing from `pool`.
    pub fn configure(
        port_id: u16,
        conf: PortConf,
        pool: Arc<Mempool>,
    ) -> Result<DpdkPort, DpdkError> {
        let info = PortInfo::query(port_id)?;
        // The device's queues: one pair fewer when the last is shared.
        let shared = conf.share_last_pair
            && conf.nb_rxq == conf.nb_txq
            && conf.nb_txq >= 2
            && (conf.nb_rxq > info.max_rx_queues || conf.nb_txq > info.max_tx_queues)
            && conf.nb_txq - 1 <= info.max_tx_queues.min(info.max_rx_queues);
        let conf = if shared {
            PortConf {
                nb_rxq: conf.nb_rxq - 1,
                nb_txq: conf.nb_txq - 1,
                ..conf
            }
        } else {
            conf
        };
        if conf.nb_rxq == 0 || conf.nb_rxq > info.max_rx_queues {
            return Err(DpdkError::new(
                format!(
                    "port {port_id} ({}): {} RX queues requested, device supports 1..={}",
                    info.name, conf.nb_rxq, info.max_rx_queues
                ),
                22,
            ));
        }
        if conf.nb_txq == 0 || conf.nb_txq > info.max_tx_queues {
            return Err(DpdkError::new(
                format!(
                    "port {port_id} ({}): {} TX queues requested, device supports 1..={}",
                    info.name, conf.nb_txq, info.max_tx_queues
                ),
                22,
            ));
        }
        let mut eth_conf = sys::rte_eth_conf::default();
        let rss_hf = info.rss_offloads & RSS_WANTED;
        if conf.nb_rxq > 1 && rss_hf != 0 {
            eth_conf.rxmode.mq_mode = sys::RTE_ETH_MQ_RX_RSS;
            eth_conf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
        }
        // SCTP's CRC32c in the device where it can: the data cores then neither compute nor
        // check it in software.
        let offload = ChecksumOffload {
            tx: info.tx_offload_capa & TX_OFFLOAD_SCTP_CKSUM != 0,
            rx: info.rx_offload_capa & RX_OFFLOAD_SCTP_CKSUM != 0,
        };
        if offload.tx {
            eth_conf.txmode.offloads |= TX_OFFLOAD_SCTP_CKSUM;
        }
        if offload.rx {
            eth_conf.rxmode.offloads |= RX_OFFLOAD_SCTP_CKSUM;
        }
        // ESP crypto in the NIC where it does it both ways and has a security context, with
        // IPsec on: IPsec then has it do the SAs it can (ipsec::inline).
        // SAFETY: a valid port id; the context, if any, lives as long as the device.
        let sec_ctx = std::ptr::NonNull::new(unsafe { sys::rte_eth_dev_get_sec_ctx(port_id) })
            .filter(|_| {
                conf.inline_ipsec
                    && info.rx_offload_capa & RX_OFFLOAD_SECURITY != 0
                    && info.tx_offload_capa & TX_OFFLOAD_SECURITY != 0
            });
        if sec_ctx.is_some() {
            eth_conf.rxmode.offloads |= RX_OFFLOAD_SECURITY;
            eth_conf.txmode.offloads |= TX_OFFLOAD_SECURITY;
        }
        // Chains let tagged payload leave straight from registered regions (zero-copy).
        let multi_seg = info.tx_offload_capa & TX_OFFLOAD_MULTI_SEGS != 0;
        if multi_seg {
            eth_conf.txmode.offloads |= TX_OFFLOAD_MULTI_SEGS;
        }
        let mut conf = conf;
        if conf.rx_interrupts {
            eth_conf.intr_conf.set_rxq(1);
            // SAFETY: eth_conf is a valid, fully initialised configuration.
            let r =
                unsafe { sys::rte_eth_dev_configure(port_id, conf.nb_rxq, conf.nb_txq, &eth_conf) };
            if r != 0 {
                // A PMD that refuses RX interrupts still polls.
                eth_conf.intr_conf.set_rxq(0);
                conf.rx_interrupts = false;
            }
        }
        if !conf.rx_interrupts {
            check(
                || format!("rte_eth_dev_configure(port {port_id})"),
                // SAFETY: eth_conf is a valid, fully initialised configuration.
                unsafe { sys::rte_eth_dev_configure(port_id, conf.nb_rxq, conf.nb_txq, &eth_conf) },
            )?;
        }
        // From here on the device is configured: if a later step fails, dropping `port` closes
        // it, so no half-configured device keeps references to the pool.
        let mut port = DpdkPort {
            info,
            conf,
            offload,
            sec_ctx: sec_ctx.map_or(0, |c| c.as_ptr() as usize),
            multi_seg,
            flow_rules: std::sync::atomic::AtomicBool::new(false),
            pool,
            state: AtomicU8::new(STOPPED),
            shared_tx: shared.then(|| std::sync::Mutex::new(())),
            kernel_rings: None,
            tap_queue: None,
            rx_intr_fds: std::sync::OnceLock::new(),
            rx_intr_claimed: Default::default(),
            memif_reconnects: Default::default(),
            memif_reconnect_tries: Default::default(),
            memif_reconnect_error: Default::default(),
            memif: false,
        };
        port.memif = port.info.driver == "net_memif";
        if port.memif {
            super::memif_quiesce::arm();
        }
        let (mut nb_rxd, mut nb_txd) = (conf.nb_rxd, conf.nb_txd);
        check(
            || format!("rte_eth_dev_adjust_nb_rx_tx_desc(port {port_id})"),
            // SAFETY: valid out-parameters; the device clamps to its descriptor limits.
            unsafe { sys::rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &mut nb_rxd, &mut nb_txd) },
        )?;
        port.conf.nb_rxd = nb_rxd;
        port.conf.nb_txd = nb_txd;
        if port.info.driver == "net_af_packet" && port.info.if_index != 0 {
            port.kernel_rings = KernelRings::find(port.info.if_index);
        }
        if port.info.driver == "net_tap" && port.info.if_index != 0 {
            port.tap_queue = TapQueue::find(port.info.if_index);
        }
        // SOCKET_ID_ANY (virtual devices) becomes socket 0, where the pool was created.
        let socket = u32::try_from(port.info.socket).unwrap_or(0);
        for q in 0..conf.nb_rxq {
            check(
                || format!("rte_eth_rx_queue_setup(port {port_id}, queue {q})"),
                // SAFETY: NULL rx_conf selects the device defaults; the pool outlives the port
                // (the port holds an Arc to it).
                unsafe {
                    sys::rte_eth_rx_queue_setup(
                        port_id,
                        q,
                        nb_rxd,
                        socket,
                        std::ptr::null(),
                        port.pool.as_ptr(),
                    )
                },
            )?;
        }
        for q in 0..conf.nb_txq {
            check(
                || format!("rte_eth_tx_queue_setup(port {port_id}, queue {q})"),
                // SAFETY: NULL tx_conf selects the device defaults.
                unsafe {
                    sys::rte_eth_tx_queue_setup(port_id, q, nb_txd, socket, std::ptr::null())
                },
            )?;
        }
        Ok(port)
    }

    /// Whether the last queue pair asked for is the device's first again
    /// ([`PortConf::share_last_pair`]).
    pub fn shares_last_pair(&self) -> bool {
        self.shared_tx.is_some()
    }

    /// Each RX queue's interrupt fd once the port has started (-1 where it has none; empty
    /// before the start, or without `rx_interrupts`).
    fn rx_intr_fds(&self) -> &[i32] {
        if !self.conf.rx_interrupts || self.state.load(Ordering::Acquire) != STARTED {
            return &[];
        }
        self.rx_intr_fds.get_or_init(|| {
            // SAFETY: a configured, started port and queue; reads the interrupt handle.
            let fd = |q| unsafe { sys::rte_eth_dev_rx_intr_ctl_q_get_fd(self.info.port_id, q) };
            // Queue 0 first: a device without the handle logs one error, not one a queue.
            if fd(0) < 0 {
                return vec![-1; usize::from(self.conf.nb_rxq)];
            }
            (0..self.conf.nb_rxq).map(fd).collect()
        })
    }

    /// Of the started port's RX queues, how many have an interrupt of their own a data core
    /// can block on ([`Port::rx_waiter`]), and how many there are: a device without RX
    /// interrupts has none; one that gives several queues one vector, only one of them.
    pub fn rx_interrupt_queues(&self) -> (usize, usize) {
        let fds = self.rx_intr_fds();
        let own = fds
            .iter()
            .filter(|&&fd| fd >= 0 && fds.iter().filter(|&&f| f == fd).count() == 1)
            .count();
        (own, usize::from(self.conf.nb_rxq))
    }

    /// Whether the device sends mbuf chains, so [`Port::attach_region`] sends region memory
    /// without copying it.
    pub fn zero_copy_tx(&self) -> bool {
        self.multi_seg
    }

    pub fn info(&self) -> &PortInfo {
        &self.info
    }

    /// The configuration in force (descriptor counts as adjusted by the device).
    pub fn conf(&self) -> PortConf {
        self.conf
    }

    pub fn pool(&self) -> &Arc<Mempool> {
        &self.pool
    }

    /// The device's MTU now ([`PortInfo::mtu`] is the one it had when configured, before
    /// [`set_mtu`](Self::set_mtu)).
    pub fn mtu(&self) -> u16 {
        let mut mtu = self.info.mtu;
        // SAFETY: valid out-parameter; on failure DPDK leaves it as it was.
        unsafe { sys::rte_eth_dev_get_mtu(self.info.port_id, &mut mtu) };
        mtu
    }

    /// Sets the device's MTU (IP packet size; before `start`). Frames up to it plus the
    /// Ethernet header must fit one mbuf of the port's pool: the caller sizes the pool.
    pub fn set_mtu(&self, mtu: u16) -> Result<(), DpdkError> {
        let id = self.info.port_id;
        check(
            || format!("rte_eth_dev_set_mtu(port {id}, {mtu})"),
            // SAFETY: plain call on a configured port; DPDK checks the value against the device.
            unsafe { sys::rte_eth_dev_set_mtu(id, mtu) },
        )
        .map(drop)
    }

    /// Makes the device steer SCTP packets as a software Toeplitz hash with `key` and a
    /// round-robin redirection table over the first `queues` RX queues would: the hash key, the
    /// SCTP hash types it offers, and the table. Call after `start`. Devices without SCTP RSS
    /// (virtual devices) are left alone and say why.
    pub fn program_sctp_rss(&self, key: &[u8; 40], queues: u16) -> Result<SctpSteering, DpdkError> {
        let id = self.info.port_id;
        let sctp = self.info.rss_offloads & (RSS_NONFRAG_IPV4_SCTP | RSS_NONFRAG_IPV6_SCTP);
        if queues <= 1 || self.conf.nb_rxq <= 1 {
            return Ok(SctpSteering::None("one data queue: nothing to spread"));
        }
        if sctp == 0 {
            return Ok(SctpSteering::None("the device cannot hash SCTP"));
        }
        if usize::from(self.info.hash_key_size) != key.len() {
            return Ok(SctpSteering::None("the device's RSS key is not 40 bytes"));
        }
        let reta_size = self.info.reta_size;
        // Devices index the table with the hash's low bits: the software hash agrees with a
        // modulo only for a power of two (and the table is programmed in groups of 64).
        if reta_size < 64 || !reta_size.is_power_of_two() {
            return Ok(SctpSteering::None(
                "no redirection table the software hash can model",
            ));
        }
        let mut k = *key;
        let mut conf = sys::rte_eth_rss_conf {
            rss_key: k.as_mut_ptr(),
            rss_key_len: key.len() as u8,
            rss_hf: self.info.rss_offloads & RSS_WANTED,
        };
        check(
            || format!("rte_eth_dev_rss_hash_update(port {id})"),
            // SAFETY: `conf` points at a 40-byte key that lives for the call; DPDK copies it.
            unsafe { sys::rte_eth_dev_rss_hash_update(id, &mut conf) },
        )?;
        let mut reta: Vec<sys::rte_eth_rss_reta_entry64> = (0..reta_size / 64)
            .map(|g| {
                let mut e = sys::rte_eth_rss_reta_entry64 {
                    mask: u64::MAX,
                    reta: [0; 64],
                };
                for (j, q) in e.reta.iter_mut().enumerate() {
                    *q = (u32::from(g) * 64 + j as u32) as u16 % queues;
                }
                e
            })
            .collect();
        check(
            || format!("rte_eth_dev_rss_reta_update(port {id})"),
            // SAFETY: `reta` holds reta_size / 64 groups, as many as reta_size says.
            unsafe { sys::rte_eth_dev_rss_reta_update(id, reta.as_mut_ptr(), reta_size) },
        )?;
        Ok(SctpSteering::Rss {
            hash: sctp,
            reta_size,
        })
    }

    /// Steers each SCTP association to its owner's RX queue with an `rte_flow` rule
    /// ([`Port::steer_sctp`]), for a device that cannot hash SCTP but matches it in flow rules.
    /// Checks first that the device would take such a rule (`rte_flow_validate`, for an
    /// association from `local`'s family to queue `queues - 1`); `Err` with its reason if not,
    /// and the port keeps software dispatch.
    pub fn enable_sctp_flow_rules(
        &self,
        local: std::net::IpAddr,
        queues: u16,
    ) -> Result<(), String> {
        if queues <= 1 || self.conf.nb_rxq <= 1 {
            return Err("one data queue: nothing to steer".into());
        }
        let peer = match local {
            std::net::IpAddr::V4(_) => {
                std::net::IpAddr::V4(std::net::Ipv4Addr::new(198, 19, 255, 254))
            }
            std::net::IpAddr::V6(_) => std::net::IpAddr::V6(std::net::Ipv6Addr::new(
                0x2001, 0xdb8, 0, 0, 0, 0, 0, 0xfffe,
            )),
        };
        let probe = SctpFlow {
            local,
            peer,
            local_port: 1,
            peer_port: 1,
        };
        super::flow::validate(self.info.port_id, &probe, queues - 1)?;
        self.flow_rules.store(true, Ordering::Release);
        Ok(())
    }

    pub fn start(&self) -> Result<(), DpdkError> {
        let id = self.info.port_id;
        // SAFETY: the port is configured.
        let rc = unsafe { sys::rte_eth_dev_start(id) };
        if rc == -1 {
            // A driver's bare -1 is not -EPERM: net_memif's when no memif server answers at
            // its socket, for one.
            let e = DpdkError::new(
                format!("rte_eth_dev_start(port {id}, {})", self.info.driver),
                0,
            );
            return Err(if self.info.driver == "net_memif" {
                e.with_hint("is the memif peer with role=server running at its socket?")
            } else {
                e
            });
        }
        check(|| format!("rte_eth_dev_start(port {id})"), rc)?;
        if self.conf.promiscuous {
            // Virtual devices may not support it; that is not an error for us.
            // SAFETY: started port.
            unsafe { sys::rte_eth_promiscuous_enable(id) };
        }
        self.state.store(STARTED, Ordering::Release);
        Ok(())
    }

    pub fn stop(&self) -> Result<(), DpdkError> {
        if self
            .state
            .compare_exchange(STARTED, STOPPED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.let_a_leaving_memif_client_go();
            let id = self.info.port_id;
            self.teardown(format!("rte_eth_dev_stop(port {id})"), move || {
                // SAFETY: the port was started; no lcore polls it any more (the caller joined them).
                unsafe { sys::rte_eth_dev_stop(id) }
            })?;
        }
        Ok(())
    }

    /// Stops (if needed) and closes the port, releasing its queues' mbufs to the pool.
    pub fn close(&self) -> Result<(), DpdkError> {
        self.stop()?;
        if self.state.swap(CLOSED, Ordering::AcqRel) != CLOSED {
            // The device closes its sockets: their numbers may be anything's afterwards.
            if let Some(k) = &self.kernel_rings {
                k.forget();
            }
            let id = self.info.port_id;
            self.teardown(format!("rte_eth_dev_close(port {id})"), move || {
                // SAFETY: the port is stopped and nothing uses it any more.
                unsafe { sys::rte_eth_dev_close(id) }
            })?;
        }
        Ok(())
    }

    /// A memif server whose link is up gives its client a moment to leave first (300 ms at
    /// most), and once the link is down a moment for the interrupt thread to finish what the
    /// client's leaving began, before it stops. The stop runs on the caller's thread, not the
    /// interrupt thread ([`DpdkPort::teardown`] says why); without this wait, a server that
    /// stopped while its client was still connected died of SIGSEGV at exit about one run in
    /// three of `cli/tests/telemetry.rs` under load (session 23, not yet understood).
    fn let_a_leaving_memif_client_go(&self) {
        if !self.is_memif_server() {
            return;
        }
        let deadline = Instant::now() + Duration::from_millis(300);
        while self.link().up && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        if !self.link().up {
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A `net_memif` port in the server role (its vdev's `role` says `server`, or the old
    /// `master`, as memif_set_role reads it; without a role it is a client).
    fn is_memif_server(&self) -> bool {
        if self.info.driver != "net_memif" {
            return false;
        }
        let mut info = sys::rte_eth_dev_info::default();
        // SAFETY: a valid out-parameter.
        if unsafe { sys::rte_eth_dev_info_get(self.info.port_id, &mut info) } != 0
            || info.device.is_null()
        {
            return false;
        }
        // SAFETY: the device of a live port.
        let devargs = unsafe { sys::rte_dev_devargs(info.device) };
        if devargs.is_null() {
            return false;
        }
        // SAFETY: the live devargs of the device; `args` is null or NUL-terminated, owned by
        // the EAL for the device's life.
        let args = unsafe { (*devargs).__bindgen_anon_1.args };
        if args.is_null() {
            return false;
        }
        // SAFETY: as above.
        let args = unsafe { CStr::from_ptr(args) }.to_string_lossy();
        // The last role given is the one the driver keeps.
        args.split(',')
            .rev()
            .find_map(|kv| kv.strip_prefix("role="))
            .is_some_and(|r| r.contains("server") || r.contains("master"))
    }

    /// Runs a stop or close of this port, on the EAL's interrupt thread for a memif.
    ///
    /// DPDK 22.11's memif tears a connection down (`memif_disconnect`: it frees the shared
    /// regions and the control channel) on the EAL's interrupt thread when the peer leaves, and
    /// on the caller's thread in dev_stop and dev_close, with nothing to keep the two apart: a
    /// peer leaving while we stop (both ends of a run finishing together, as a perf pair always
    /// does) freed the same memory twice ("EAL: Error: Invalid memory" in every run of
    /// `tests/dpdk_memif_teardown.rs`, and a server's interrupt thread caught crashing in the
    /// EAL's allocator). memif's handlers all run on that thread, and so do EAL alarms: a stop
    /// made from an alarm callback cannot overlap them. Other drivers stop on this thread.
    fn teardown(
        &self,
        op: String,
        call: impl FnOnce() -> i32 + Send + 'static,
    ) -> Result<(), DpdkError> {
        // Not on the interrupt thread for now: with stop and close made there (an EAL alarm),
        // memif servers died of SIGSEGV at exit in 2 of 4 CI runs (session 23, not yet
        // understood), so memif's double free at teardown is only narrowed again, by the wait
        // in `let_a_leaving_memif_client_go`. `on_interrupt_thread` stays for that next look.
        check(|| op, call()).map(|_| ())
    }

    /// Hands the front of `pkts` to the device's TX `queue`; returns how many it took (the
    /// rest stay in `pkts`, in order).
    #[inline]
    fn send(&self, queue: u16, pkts: &mut Vec<Mbuf>) -> usize {
        let n = pkts.len().min(usize::from(u16::MAX));
        let burst = self.memif.then(super::memif_quiesce::Burst::begin);
        // SAFETY: pkts holds n valid owned mbufs laid out as rte_mbuf pointers; the queue belongs
        // to the calling lcore, or is shared under `shared_tx`.
        let sent = usize::from(unsafe {
            sys::rte_eth_tx_burst(self.info.port_id, queue, pkts.as_mut_ptr().cast(), n as u16)
        });
        drop(burst);
        // The device now owns the first `sent` mbufs: forget them without dropping (freeing)
        // them, and move the rest to the front.
        if sent > 0 {
            crate::trace::mark(crate::trace::Point::TxDone);
        }
        let left = pkts.len() - sent;
        // SAFETY: ranges are within the vector; the first `sent` elements are not dropped, the
        // remaining `left` are moved (memmove) and the length is reduced to exactly those.
        unsafe {
            let base = pkts.as_mut_ptr();
            std::ptr::copy(base.add(sent), base, left);
            pkts.set_len(left);
        }
        sent
    }

    /// Polls the link until it is up or `timeout` passes; returns the last status seen.
    ///
    /// A memif client still down [`MEMIF_RECONNECT_AFTER`] after its start connects again
    /// (`reconnect_memif_client`), then after twice as long, and so on up to
    /// [`MEMIF_RECONNECT_MAX`]. DPDK 22.11's memif server listens from its probe on but refuses
    /// a client ("ID not found", a disconnect message) until its own port starts, and its
    /// client never tries again: two processes started together (a server and its client
    /// launched by one script) left the link down in half the runs or more. Call it before
    /// any lcore polls the port.
    pub fn wait_link_up(&self, timeout: Duration) -> LinkStatus {
        self.wait_link_up_unless(timeout, &|| false)
    }

    /// [`wait_link_up`](Self::wait_link_up), given up early once `stop()` says so (a signal:
    /// the operator's Ctrl-C waited out the whole timeout).
    pub fn wait_link_up_unless(&self, timeout: Duration, stop: &dyn Fn() -> bool) -> LinkStatus {
        let deadline = Instant::now() + timeout;
        let client = self.info.driver == "net_memif" && !self.is_memif_server();
        let mut wait = MEMIF_RECONNECT_AFTER;
        let mut reconnect_at = Instant::now() + wait;
        loop {
            let l = self.link();
            let now = Instant::now();
            if l.up || now >= deadline || stop() {
                if client && self.state.load(Ordering::Acquire) == STOPPED {
                    // The last try found no server: the port is left started, as its caller
                    // had it (a review: the endpoint went on with a stopped port). Nothing of
                    // a connection is under way on a stopped port, so no handler races this.
                    if let Err(e) = self.start() {
                        self.keep_reconnect_error(Some(e.to_string()));
                    }
                }
                return l;
            }
            if client && now >= reconnect_at {
                self.reconnect_memif_client();
                wait = (wait * 2).min(MEMIF_RECONNECT_MAX);
                reconnect_at = Instant::now() + wait;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops and starts this memif client's port (`memif_connect_client` again), unless its
    /// link came up meanwhile. Both run on the EAL's interrupt thread, where memif runs its
    /// control channel's handlers, so none of them runs meanwhile: a handshake still under
    /// way, or the link coming up between a look and the stop, would otherwise race the stop's
    /// teardown of the connection (`teardown` says what that costs; an independent review):
    /// a handshake still under way is stopped and begun again instead. A start that fails (no
    /// server at the socket any more) leaves the port stopped until the next try or the end
    /// of the wait, its error in [`DpdkPort::memif_reconnect_error`]. Narrow cases can still
    /// hold the interrupt thread (a blocking connect to a full backlog of a server in the same
    /// process): then the job is given up after 10 s and never runs (`on_interrupt_thread`).
    fn reconnect_memif_client(&self) {
        let id = self.info.port_id;
        let outcome = on_interrupt_thread(move || {
            let mut l = sys::rte_eth_link::default();
            // SAFETY: valid out-parameter.
            let rc = unsafe { sys::rte_eth_link_get_nowait(id, &mut l) };
            if rc == 0 && l.link_status() == sys::RTE_ETH_LINK_UP as u16 {
                return 1;
            }
            // SAFETY: the port is configured and no lcore polls it (`wait_link_up`'s caller);
            // on the interrupt thread no memif handler runs meanwhile. Stopping a port a failed
            // start left stopped does nothing.
            unsafe { sys::rte_eth_dev_stop(id) };
            // SAFETY: as above; the port's queues are set up.
            unsafe { sys::rte_eth_dev_start(id) }
        });
        if outcome != Ok(1) {
            self.memif_reconnect_tries.fetch_add(1, Ordering::Relaxed);
        }
        let failed = match outcome {
            // Up meanwhile: nothing done.
            Ok(1) => return,
            Ok(0) => {
                self.state.store(STARTED, Ordering::Release);
                self.memif_reconnects.fetch_add(1, Ordering::Relaxed);
                None
            }
            Ok(rc) => {
                self.state.store(STOPPED, Ordering::Release);
                Some(format!(
                    "rte_eth_dev_start(port {id}, net_memif) failed ({rc}): is the memif server \
                     still running at its socket?"
                ))
            }
            Err(e) => Some(format!("the reconnection did not run: {e}")),
        };
        self.keep_reconnect_error(failed);
    }

    fn keep_reconnect_error(&self, failed: Option<String>) {
        if let Ok(mut last) = self.memif_reconnect_error.lock() {
            *last = failed;
        }
    }

    /// What a memif client's reconnections came to, for its start-up line: none if it needed
    /// none.
    pub fn memif_reconnect_note(&self, link_up: bool) -> Option<String> {
        let tries = self.memif_reconnect_tries.load(Ordering::Relaxed);
        if tries == 0 {
            return None;
        }
        let (started, failed) = (self.memif_reconnects(), self.memif_reconnect_error());
        Some(format!(
            "{}: connected again {started} time(s) in {tries} tr{} while its link was down (a \
             memif server refuses its clients until its own port starts); link {}{}",
            self.name(),
            if tries == 1 { "y" } else { "ies" },
            if link_up { "up" } else { "still down" },
            failed
                .map(|e| format!("; the last try: {e}"))
                .unwrap_or_default()
        ))
    }

    /// How often [`DpdkPort::wait_link_up`] connected this memif client again (starts that
    /// succeeded; the server may still have refused the connection).
    pub fn memif_reconnects(&self) -> u32 {
        self.memif_reconnects.load(Ordering::Relaxed)
    }

    /// Why the last reconnection of this memif client failed, if it did (the port is stopped
    /// then).
    pub fn memif_reconnect_error(&self) -> Option<String> {
        self.memif_reconnect_error
            .lock()
            .ok()
            .and_then(|l| l.clone())
    }
}

/// Runs `call` on the EAL's interrupt thread, as an alarm callback, and waits for its answer.
/// Nothing else the EAL runs on that thread (device interrupt handlers, other alarms) can
/// overlap it. A memif client's reconnection runs there; stops and closes do not
/// ([`DpdkPort::teardown`] says why).
fn on_interrupt_thread(call: impl FnOnce() -> i32 + Send + 'static) -> Result<i32, &'static str> {
    type Job = Box<dyn FnOnce() + Send>;
    extern "C" fn run(arg: *mut c_void) {
        // SAFETY: `arg` is the `Box<Job>` leaked below, handed to exactly one alarm, which
        // fires once.
        let job = unsafe { Box::from_raw(arg.cast::<Job>()) };
        job();
    }
    // The job runs `call` only if the waiter has not given up on it by then (an independent
    // review: a job left to run late would stop a port its caller went on to use). Once it
    // runs, the waiter waits for it whatever the time.
    const PENDING: u8 = 0;
    const RUNNING: u8 = 1;
    const ABANDONED: u8 = 2;
    let turn = Arc::new(AtomicU8::new(PENDING));
    let its_turn = Arc::clone(&turn);
    let (answer, answered) = std::sync::mpsc::sync_channel(1);
    let job: Box<Job> = Box::new(Box::new(move || {
        if its_turn
            .compare_exchange(PENDING, RUNNING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            let _ = answer.send(call());
        }
    }));
    let arg = Box::into_raw(job).cast::<c_void>();
    // SAFETY: `run` takes `arg` back when the alarm fires; 1 us is the shortest delay the EAL
    // accepts (rte_eal_alarm_set refuses 0).
    if unsafe { sys::rte_eal_alarm_set(1, Some(run), arg) } < 0 {
        // SAFETY: no alarm was set, so `arg` is still ours alone.
        drop(unsafe { Box::from_raw(arg.cast::<Job>()) });
        return Err("the EAL refused the alarm that runs it on its interrupt thread");
    }
    match answered.recv_timeout(Duration::from_secs(10)) {
        Ok(rc) => Ok(rc),
        Err(_) => {
            if turn
                .compare_exchange(PENDING, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Err("the EAL's interrupt thread did not run it within 10 s (given up)");
            }
            // Running: it is waited for, so that nothing it does comes after this returns.
            answered
                .recv()
                .map_err(|_| "the EAL's interrupt thread dropped it")
        }
    }
}

impl Drop for DpdkPort {
    fn drop(&mut self) {
        // Errors cannot be reported from drop; close() is called explicitly on the normal path.
        let _ = self.close();
    }
}

impl Port for DpdkPort {
    type Buf = Mbuf;

    fn sctp_checksum_offload(&self) -> ChecksumOffload {
        self.offload
    }

    fn inline_crypto(&self) -> Option<std::ptr::NonNull<std::ffi::c_void>> {
        std::ptr::NonNull::new(self.sec_ctx as *mut std::ffi::c_void)
    }

    fn max_tx_segments(&self) -> usize {
        usize::from(self.info.tx_seg_max)
    }

    fn steer_sctp(&self, flow: &SctpFlow, queue: u16) -> Result<FlowRule, String> {
        if !self.flow_rules.load(Ordering::Acquire) {
            return Err("flow rules not enabled on this port".into());
        }
        super::flow::create(self.info.port_id, flow, queue).map(FlowRule::new)
    }

    fn unsteer_sctp(&self, rule: FlowRule) -> Result<(), String> {
        super::flow::destroy(self.info.port_id, rule.id())
    }

    fn esp_ingress_rule(
        &self,
        esp: &crate::port::EspIngress,
        session: std::ptr::NonNull<std::ffi::c_void>,
    ) -> Result<FlowRule, String> {
        super::flow::create_esp(self.info.port_id, esp, session).map(FlowRule::new)
    }

    fn remove_esp_ingress_rule(&self, rule: FlowRule) -> Result<(), String> {
        super::flow::destroy(self.info.port_id, rule.id())
    }

    fn attach_region(&self, region: &Region, offset: u64, len: usize) -> Option<Mbuf> {
        if !self.multi_seg {
            return None;
        }
        self.pool.attach_region(region, offset, len)
    }

    fn attach_region_in(
        &self,
        buf: Mbuf,
        region: &Region,
        offset: u64,
        len: usize,
    ) -> Result<Mbuf, Mbuf> {
        if !self.multi_seg {
            return Err(buf);
        }
        self.pool.attach_region_in(buf, region, offset, len)
    }

    fn rx_waiter(&self, queues: &[u16]) -> Option<Arc<dyn crate::port::RxWaiter>> {
        let fds = self.rx_intr_fds();
        if queues
            .iter()
            .any(|&q| fds.get(usize::from(q)).is_none_or(|&fd| fd < 0))
        {
            return None;
        }
        let w = super::intr::DpdkRxWaiter::new(self.info.port_id, queues, &self.rx_intr_claimed)?;
        Some(Arc::new(w))
    }

    fn id(&self) -> u16 {
        self.info.port_id
    }
    fn name(&self) -> &str {
        &self.info.name
    }
    fn nb_rx_queues(&self) -> u16 {
        self.conf.nb_rxq
    }
    /// The device's TX queues, and the shared pair's on top ([`PortConf::share_last_pair`]):
    /// the queues its users send on. ([`DpdkPort::conf`] keeps the device's own.)
    fn nb_tx_queues(&self) -> u16 {
        self.conf.nb_txq + u16::from(self.shared_tx.is_some())
    }
    fn mac(&self) -> [u8; 6] {
        self.info.mac
    }

    #[inline]
    fn rx_burst(&self, queue: u16, out: &mut Vec<Mbuf>, max: usize) -> usize {
        // rte_eth_rx_burst does not check the queue id in release builds of DPDK.
        if queue >= self.conf.nb_rxq {
            return 0;
        }
        out.reserve(max);
        let spare = out.spare_capacity_mut();
        let n = max.min(spare.len()).min(usize::from(u16::MAX));
        let burst = self.memif.then(super::memif_quiesce::Burst::begin);
        // SAFETY: `spare` has room for n pointers and Mbuf is repr(transparent) over
        // NonNull<rte_mbuf>; DPDK writes `got` valid mbuf pointers whose ownership passes to us.
        // The queue belongs to the calling lcore (validated fwd table).
        let got = unsafe {
            sys::rte_eth_rx_burst(
                self.info.port_id,
                queue,
                spare.as_mut_ptr().cast(),
                n as u16,
            )
        };
        drop(burst);
        if got > 0 {
            crate::trace::mark(crate::trace::Point::RxGot);
        }
        let old = out.len();
        // SAFETY: the first `got` spare slots were initialised above.
        unsafe { out.set_len(old + usize::from(got)) };
        usize::from(got)
    }

    fn tx_device_queue(&self, queue: u16) -> u16 {
        if self.shared_tx.is_some() && queue == self.conf.nb_txq {
            0
        } else {
            queue
        }
    }

    #[inline]
    fn tx_burst(&self, queue: u16, pkts: &mut Vec<Mbuf>) -> usize {
        if queue >= self.nb_tx_queues() {
            return 0;
        }
        match &self.shared_tx {
            // The shared pair's queue is the device's queue 0, and two threads send on it.
            Some(lock) if queue == 0 || queue == self.conf.nb_txq => {
                let _held = lock
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                self.send(0, pkts)
            }
            _ => self.send(queue, pkts),
        }
    }

    fn alloc_bulk(&self, out: &mut Vec<Mbuf>, n: usize, len: usize) -> bool {
        self.pool.alloc_bulk(out, n, len)
    }

    #[inline]
    fn free_bulk(&self, bufs: &mut Vec<Mbuf>) {
        // SAFETY: bufs holds len() owned mbufs laid out as rte_mbuf pointers; after the bulk free
        // (which returns them to their pools in batches) the length is set to 0 so none is
        // dropped a second time.
        unsafe {
            dpdk_sys::rte_pktmbuf_free_bulk(bufs.as_mut_ptr().cast(), bufs.len() as u32);
            bufs.set_len(0);
        }
    }

    fn link(&self) -> LinkStatus {
        let mut l = sys::rte_eth_link::default();
        // SAFETY: valid out-parameter.
        let rc = unsafe { sys::rte_eth_link_get_nowait(self.info.port_id, &mut l) };
        if rc < 0 {
            return LinkStatus::default();
        }
        LinkStatus {
            up: l.link_status() == sys::RTE_ETH_LINK_UP as u16,
            speed_mbps: l.link_speed,
            full_duplex: l.link_duplex() == sys::RTE_ETH_LINK_FULL_DUPLEX as u16,
        }
    }

    fn stats(&self) -> PortStats {
        let mut s = sys::rte_eth_stats::default();
        // SAFETY: valid out-parameter.
        if unsafe { sys::rte_eth_stats_get(self.info.port_id, &mut s) } < 0 {
            return PortStats::default();
        }
        PortStats {
            rx_packets: s.ipackets,
            tx_packets: s.opackets,
            rx_bytes: s.ibytes,
            tx_bytes: s.obytes,
            rx_missed: s.imissed
                + self.kernel_rings.as_ref().map_or(0, KernelRings::dropped)
                + self.tap_queue.as_ref().map_or(0, TapQueue::dropped),
            rx_errors: s.ierrors,
            tx_errors: s.oerrors,
            rx_nombuf: s.rx_nombuf,
        }
    }

    fn xstats(&self) -> Vec<(String, u64)> {
        let id = self.info.port_id;
        // SAFETY: a NULL array with size 0 asks for the count.
        let n = unsafe { sys::rte_eth_xstats_get_names(id, std::ptr::null_mut(), 0) };
        if n <= 0 {
            return Vec::new();
        }
        let n = n as usize;
        let mut names = vec![sys::rte_eth_xstat_name::default(); n];
        let mut values = vec![sys::rte_eth_xstat::default(); n];
        // SAFETY: arrays of n elements as declared.
        let got_names = unsafe { sys::rte_eth_xstats_get_names(id, names.as_mut_ptr(), n as u32) };
        // SAFETY: as above.
        let got_values = unsafe { sys::rte_eth_xstats_get(id, values.as_mut_ptr(), n as u32) };
        if got_names < 0 || got_values < 0 {
            return Vec::new();
        }
        let m = (got_names as usize).min(got_values as usize).min(n);
        values[..m]
            .iter()
            .filter_map(|v| {
                let name = names.get(v.id as usize)?;
                // SAFETY: DPDK NUL-terminates names within RTE_ETH_XSTATS_NAME_SIZE.
                let s = unsafe { CStr::from_ptr(name.name.as_ptr()) };
                Some((s.to_string_lossy().into_owned(), v.value))
            })
            .collect()
    }

    fn reset_stats(&self) {
        // SAFETY: plain call on a valid port.
        unsafe {
            sys::rte_eth_stats_reset(self.info.port_id);
            sys::rte_eth_xstats_reset(self.info.port_id);
        }
        if let Some(k) = &self.kernel_rings {
            k.reset();
        }
        if let Some(t) = &self.tap_queue {
            t.reset();
        }
    }
}
