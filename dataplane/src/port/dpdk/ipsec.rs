//! ESP (RFC 4303) on mbufs through DPDK's `rte_ipsec` and a cryptodev.
//!
//! The crypto runs synchronously on the calling data core (`RTE_SECURITY_ACTION_TYPE_CPU_CRYPTO`):
//! a software PMD (`crypto_aesni_mb`, Intel's multi-buffer library with AES-NI/VAES) does AES-GCM
//! and AES-CBC + HMAC-SHA-256 without queues or crypto ops, so a packet is encrypted or verified
//! in the same poll turn that receives or sends it.
//!
//! What `rte_ipsec` leaves to its caller (DPDK 22.11, `lib/ipsec`), done here:
//! - it encrypts in place and never checks whose memory that is: an attached (zero-copy) or
//!   chained frame is sealed out of place under AES-GCM ([`oop`]) and first copied into one
//!   mbuf of our own otherwise, or the ESP trailer and ciphertext would land in a registered
//!   region;
//! - it fixes no IPv4 header checksum, outbound or inbound;
//! - it keeps no lifetime and no error counters: [`SaStats`] are ours;
//! - it checks neither the outer addresses of a tunnel nor the inner packet against policy
//!   (RFC 4301 §5.2): the outer addresses are checked here, policy by the caller.
//! - `rte_ipsec_sa_init` accepts an algorithm it cannot do and returns a zeroed SA: only the
//!   algorithms of [`Algorithm`](crate::ipsec::Algorithm) reach it.

use std::ffi::{c_void, CString};
use std::net::IpAddr;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use dpdk_sys as sys;

use super::mbuf::{Mbuf, Mempool};
use super::DpdkError;
use crate::ipsec::{Direction, Mode, Offload, ReplayWindow, SaConfig};
use crate::port::PacketBuf;

mod inline;
mod oop;

pub(crate) use inline::marked_for_nic;
pub use inline::InlineDev;

const ETH: usize = 14;
const IPPROTO_IPIP: u8 = 4;
const IPPROTO_IPV6: u8 = 41;
/// rte_mbuf_core.h: set by `rte_ipsec_pkt_cpu_prepare` on a packet whose crypto failed.
const RX_SEC_OFFLOAD: u64 = 1 << 18;
const RX_SEC_OFFLOAD_FAILED: u64 = 1 << 19;
/// Where the PMD finds the IV: rte_ipsec writes it at this offset of a crypto op, and CPU
/// crypto uses the same layout (ipsec-secgw's IV_OFFSET).
const IV_OFFSET: u16 = (std::mem::size_of::<sys::rte_crypto_op>()
    + std::mem::size_of::<sys::rte_crypto_sym_op>()) as u16;
/// Bytes of tailroom rte_ipsec needs besides the padding: trailer, ICV, AAD scratch, ESN high
/// bits (`esp_outb.c`, `esp_inb.c`).
const TAIL_SCRATCH: usize = 2 + 16 + 16 + 4;

/// A software crypto device that does CPU crypto, shared by every SA on it.
#[derive(Debug)]
pub struct CryptoDev {
    id: u8,
    name: String,
    sessions: NonNull<sys::rte_mempool>,
    /// CPU crypto (RTE_CRYPTODEV_FF_SYM_CPU_CRYPTO): synchronous, on the calling core, no
    /// ops. Without it every packet goes through crypto ops ([`oop`]).
    cpu: bool,
    /// It reads a chain and writes one buffer (RTE_CRYPTODEV_FF_OOP_SGL_IN_LB_OUT).
    oop_sgl: bool,
    /// Crypto ops, on a device used through them ([`oop`]); null elsewhere.
    ops: *mut sys::rte_mempool,
    /// Queue pair 0, which every data core's out-of-place seals share: enqueue and dequeue
    /// on one queue pair are not thread-safe.
    qp: Mutex<()>,
    /// The device that seals zero-copy frames out of place, if there is one.
    oop: Option<Arc<CryptoDev>>,
    /// It kept ops past [`oop`]'s stall limit: it is given up, its ops' frames fail at once.
    stalled: AtomicBool,
}

// SAFETY: the device id and the pools are used through thread-safe DPDK calls only (session
// create/free and op alloc/free take the mempools' own locks; CPU crypto keeps per-thread
// state); the queue pair only under `qp`.
unsafe impl Send for CryptoDev {}
// SAFETY: as above.
unsafe impl Sync for CryptoDev {}

/// The crypto devices open in this process, by name.
static OPEN: Mutex<Vec<(String, Weak<CryptoDev>)>> = Mutex::new(Vec::new());

/// Sessions the pool holds: one per SA.
const SESSIONS: u32 = 1023;

impl CryptoDev {
    /// Creates (or finds) the virtual device `name` (`crypto_aesni_mb0`, ...), checks it can do
    /// CPU crypto, configures and starts it, and the out-of-place device beside it. Needs a
    /// running EAL.
    pub fn open(name: &str) -> Result<Arc<CryptoDev>, DpdkError> {
        // One value a device: its queue pair has one lock, its pools one owner.
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|(_, d)| d.strong_count() > 0);
        if let Some(dev) = open
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, d)| d.upgrade())
        {
            return Ok(dev);
        }
        let mut dev = CryptoDev::open_one(name, false)?;
        // A device without CPU crypto (a hardware lookaside device, or `crypto_openssl`) does
        // everything through crypto ops ([`oop`]), out of place too where it can. Beside a
        // CPU crypto device, out-of-place seals go to a `crypto_aesni_gcm`: it walks a chain
        // with one GCM update per segment, where `crypto_aesni_mb` submits a job per segment
        // to its job manager (1.6x the cost of a copy and an in-place seal at MTU 1500,
        // `esp-bench`). Without either, zero-copy frames are copied before sealing.
        if dev.cpu {
            dev.oop = CryptoDev::open_one(&format!("crypto_aesni_gcm_oop{}", dev.id), true)
                .ok()
                .filter(|d| d.oop_sgl)
                .map(Arc::new);
        }
        let dev = Arc::new(dev);
        open.push((name.to_owned(), Arc::downgrade(&dev)));
        Ok(dev)
    }

    /// The device `name` alone; with a pool of crypto ops if `ops` or it has no CPU crypto.
    fn open_one(name: &str, ops: bool) -> Result<CryptoDev, DpdkError> {
        let c_name = CString::new(name).map_err(|_| DpdkError::new("crypto device name", 22))?;
        // rte_vdev_init lives in the vdev bus driver, which libdpdk's link line leaves out; the
        // EAL's hotplug call reaches the same bus.
        // SAFETY: valid C strings; an existing device answers -EEXIST, which we accept.
        let rc = unsafe {
            sys::rte_eal_hotplug_add(
                c"vdev".as_ptr(),
                c_name.as_ptr(),
                c"max_nb_queue_pairs=1".as_ptr(),
            )
        };
        if rc < 0 && rc != -17 {
            return Err(DpdkError::new(
                format!(
                    "vdev {name} (is the crypto PMD installed? dpkg -L librte-crypto-ipsec-mb23)"
                ),
                -rc,
            ));
        }
        // SAFETY: valid C string.
        let id = unsafe { sys::rte_cryptodev_get_dev_id(c_name.as_ptr()) };
        let id =
            u8::try_from(id).map_err(|_| DpdkError::new(format!("no crypto device {name}"), 19))?;
        let mut info = sys::rte_cryptodev_info::default();
        // SAFETY: a valid device id and an out-parameter of the right type.
        unsafe { sys::rte_cryptodev_info_get(id, &mut info) };
        if info.feature_flags & u64::from(sys::RTE_CRYPTODEV_FF_SYMMETRIC_CRYPTO) == 0 {
            return Err(DpdkError::new(
                format!("{name} has no symmetric crypto (RTE_CRYPTODEV_FF_SYMMETRIC_CRYPTO)"),
                95,
            ));
        }
        let cpu = info.feature_flags & u64::from(sys::RTE_CRYPTODEV_FF_SYM_CPU_CRYPTO) != 0;
        let oop_sgl = info.feature_flags & u64::from(sys::RTE_CRYPTODEV_FF_OOP_SGL_IN_LB_OUT) != 0;
        let mut conf = sys::rte_cryptodev_config {
            socket_id: 0,
            nb_queue_pairs: 1,
            ff_disable: u64::from(sys::RTE_CRYPTODEV_FF_ASYMMETRIC_CRYPTO),
        };
        // SAFETY: a valid id and config; a device already started answers -EBUSY and is
        // configured already.
        let rc = unsafe { sys::rte_cryptodev_configure(id, &mut conf) };
        let started = rc == -16;
        if rc < 0 && !started {
            return Err(DpdkError::new(
                format!("rte_cryptodev_configure({name})"),
                -rc,
            ));
        }
        // SAFETY: a valid id.
        let priv_size = unsafe { sys::rte_cryptodev_sym_get_private_session_size(id) };
        let pool_name = CString::new(format!("ipsec_sess_{id}"))
            .map_err(|_| DpdkError::new("pool name", 22))?;
        // SAFETY: a valid name; an existing pool of that name is looked up instead.
        let mut pool = unsafe { sys::rte_mempool_lookup(pool_name.as_ptr()) };
        if pool.is_null() {
            // SAFETY: as above; DPDK validates the sizes.
            pool = unsafe {
                sys::rte_cryptodev_sym_session_pool_create(
                    pool_name.as_ptr(),
                    SESSIONS,
                    priv_size,
                    0,
                    0,
                    0,
                )
            };
        }
        let sessions = NonNull::new(pool)
            .ok_or_else(|| DpdkError::from_rte_errno("rte_cryptodev_sym_session_pool_create"))?;
        let ops = if ops || !cpu {
            oop::op_pool(id)?
        } else {
            std::ptr::null_mut()
        };
        if !started {
            // CPU crypto needs no queue pair, but a device starts only with one; the
            // out-of-place seals use it.
            let qp = sys::rte_cryptodev_qp_conf {
                nb_descriptors: 64,
                mp_session: std::ptr::null_mut(),
            };
            // SAFETY: a configured device, queue pair 0 of the 1 configured.
            let rc = unsafe { sys::rte_cryptodev_queue_pair_setup(id, 0, &qp, 0) };
            if rc < 0 {
                return Err(DpdkError::new(
                    format!("rte_cryptodev_queue_pair_setup({name})"),
                    -rc,
                ));
            }
            // SAFETY: a configured device.
            let rc = unsafe { sys::rte_cryptodev_start(id) };
            if rc < 0 {
                return Err(DpdkError::new(format!("rte_cryptodev_start({name})"), -rc));
            }
        }
        Ok(CryptoDev {
            id,
            name: name.to_owned(),
            sessions,
            cpu,
            oop_sgl,
            ops,
            qp: Mutex::new(()),
            oop: None,
            stalled: AtomicBool::new(false),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Given up: it kept ops past the stall limit (`oop`).
    pub fn is_stalled(&self) -> bool {
        self.stalled.load(Ordering::Relaxed)
    }
}

impl Drop for CryptoDev {
    fn drop(&mut self) {
        // A device given up as stalled may still write the ops it holds, their sessions and
        // its queue pair's rings: all of it is left as it is, for the process's exit.
        if self.is_stalled() {
            return;
        }
        // SAFETY: every SA holds an Arc to its device, so none is left; stopping and closing
        // release the device's queues, then the session pool is empty and freed.
        unsafe {
            sys::rte_cryptodev_stop(self.id);
            sys::rte_cryptodev_close(self.id);
            sys::rte_mempool_free(self.sessions.as_ptr());
            // Null when there is none; rte_mempool_free ignores null.
            sys::rte_mempool_free(self.ops);
        }
    }
}

/// Counters of one SA; packets and bytes are those that passed (bytes of ESP payload, what a
/// lifetime counts).
#[derive(Debug, Default)]
pub struct SaStats {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// Inbound: a sequence number seen already or left of the window (RFC 4303 §3.4.3).
    pub replay: AtomicU64,
    /// Inbound: the ICV did not verify (RFC 4303 §3.4.4).
    pub auth_failed: AtomicU64,
    /// Too short, misaligned ciphertext, wrong padding (RFC 4303 §2.4), outer addresses that
    /// are not the tunnel's, an outer IPv4 header whose checksum fails (RFC 1122 §3.2.1.2:
    /// in transport mode nothing else covers it), ESP not right after the IP header (behind
    /// IPv6 extension headers or AH: not supported).
    pub malformed: AtomicU64,
    /// Inbound: dummy packets (Next Header 59, RFC 4303 §2.6), authenticated and discarded
    /// "without indicating an error" (their sequence numbers are spent). Transport mode
    /// only: rte_ipsec refuses a tunnel-mode one as malformed.
    pub dummy: AtomicU64,
    /// The SA's lifetime in bytes or seconds is spent (RFC 4301 §4.4.2.1).
    pub expired: AtomicU64,
    /// Outbound without ESN: the 32-bit sequence number is spent (RFC 4303 §3.3.3).
    pub overflow: AtomicU64,
    /// No mbuf to copy an attached or chained frame into, or no room in one; or none for the
    /// IPv6 fragments of a sealed packet above the SA's path MTU (the packet is lost).
    pub no_room: AtomicU64,
    /// The SA's crypto device stopped returning ops (a hung hardware lookaside device: the
    /// frames it held are left to it, and every packet through it after them is dropped), or
    /// took none with none of ours in it.
    pub stalled: AtomicU64,
    /// Frames copied into one mbuf of our own before the crypto could take them: chained or
    /// attached frames under an SA whose crypto cannot read them where they are (AES-CBC), or
    /// on a device that cannot work out of place. 0 for a zero-copy sender under AES-GCM.
    pub copied: AtomicU64,
    /// Outbound: sequence numbers given out so far, the last one used (RFC 4303 §3.3.3: each
    /// packet rte_ipsec prepared took the next one, whether or not it was sealed).
    pub sequence: AtomicU64,
    /// Outbound: ICMP PMTU messages quoting this SA's packets that were believed and recorded
    /// (RFC 4301 §6.1.2, §8.2.1).
    pub pmtu_accepted: AtomicU64,
    /// Of `packets`, those the port's NIC did (inline crypto): outbound, framed for it to
    /// encrypt as it sends; inbound, decrypted and verified by it. The rest went through the
    /// CPU crypto session: what tells an operator whether the NIC takes the SA's traffic at
    /// all (a NIC that installs an inbound SA only from a flow rule decrypts none of it).
    pub nic: AtomicU64,
}

/// RFC 4301 §8.2.2: a path MTU an SA learnt from ICMP ages out, as RFC 1191 §6 has a host's
/// estimate time out ("the recommended setting of this timer is ten minutes"). The SA then
/// shows none; associations keep what they lowered to (ddpdk does not probe upwards).
pub const PMTU_AGE: std::time::Duration = std::time::Duration::from_secs(600);

/// Sequence numbers an outbound SA may give out (RFC 4303 §3.3.3: the counter never cycles;
/// a new SA, with a new key, takes over): 2^32 - 2 without ESN, 2^64 - 2 with it. rte_ipsec's
/// counter starts at 1 and refuses a packet once the counter, moved past it, would pass the
/// mask, so the last number it gives is the mask less one.
fn sequence_space(esn: bool) -> u64 {
    if esn {
        u64::MAX - 1
    } else {
        u64::from(u32::MAX) - 1
    }
}

/// Whether an outbound SA that gave out `used` sequence numbers is due for a rekey (three
/// quarters of its space gone: at 10 M packets a second, a non-ESN SA then has ~100 s left)
/// and whether it has none left (it sends nothing more: as good as past its hard lifetime).
fn sequence_state(used: u64, esn: bool) -> (bool, bool) {
    let space = sequence_space(esn);
    (used >= space - space / 4, used >= space)
}

/// A snapshot of [`SaStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SaCounts {
    pub packets: u64,
    pub bytes: u64,
    pub replay: u64,
    pub auth_failed: u64,
    pub malformed: u64,
    pub dummy: u64,
    pub expired: u64,
    pub overflow: u64,
    pub no_room: u64,
    pub stalled: u64,
    pub copied: u64,
    pub sequence: u64,
    pub pmtu_accepted: u64,
    pub nic: u64,
}

impl SaCounts {
    /// Adds `o`'s counts (not its `sequence`, a position, not a count).
    pub fn add(&mut self, o: &SaCounts) {
        self.packets += o.packets;
        self.bytes += o.bytes;
        self.replay += o.replay;
        self.auth_failed += o.auth_failed;
        self.malformed += o.malformed;
        self.dummy += o.dummy;
        self.expired += o.expired;
        self.overflow += o.overflow;
        self.no_room += o.no_room;
        self.stalled += o.stalled;
        self.copied += o.copied;
        self.pmtu_accepted += o.pmtu_accepted;
        self.nic += o.nic;
    }
}

impl SaStats {
    pub fn snapshot(&self) -> SaCounts {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        SaCounts {
            packets: r(&self.packets),
            bytes: r(&self.bytes),
            replay: r(&self.replay),
            auth_failed: r(&self.auth_failed),
            malformed: r(&self.malformed),
            dummy: r(&self.dummy),
            expired: r(&self.expired),
            overflow: r(&self.overflow),
            no_room: r(&self.no_room),
            stalled: r(&self.stalled),
            copied: r(&self.copied),
            sequence: r(&self.sequence),
            pmtu_accepted: r(&self.pmtu_accepted),
            nic: r(&self.nic),
        }
    }
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// `rte_ipsec_session_prepare` stores this struct's address in the crypto session: it lives in
/// a box and never moves.
#[repr(C, align(64))]
struct Session(sys::rte_ipsec_session);

/// The rte_ipsec SA, its session and the crypto session: used by one thread at a time (the SA
/// is created without RTE_IPSEC_SAFLAG_SQN_ATOM, so its sequence number and replay window are
/// plain state).
struct Engine {
    sa: NonNull<sys::rte_ipsec_sa>,
    session: Box<Session>,
    crypto: NonNull<c_void>,
    /// Outbound AES-GCM when there is an out-of-place device ([`oop`]).
    lookaside: Option<Lookaside>,
    /// Inbound: the anti-replay window that decides (see `ipsec::ReplayWindow` for why not
    /// rte_ipsec's alone).
    window: Option<ReplayWindow>,
    /// The session on the port's inline crypto ([`inline`]), where the NIC does this SA.
    inline: Option<inline::InlineSession>,
}

// SAFETY: the pointers are owned by this value alone and used under the SA's mutex.
unsafe impl Send for Engine {}

/// A second rte_ipsec session on an SA (so one sequence number space), of the lookaside kind,
/// whose crypto ops can name a destination, with its crypto session on the out-of-place device.
struct Lookaside {
    session: Box<Session>,
    crypto: NonNull<c_void>,
    dev: Arc<CryptoDev>,
}

/// Why a packet did not pass an SA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EspDrop {
    Replay,
    AuthFailed,
    Malformed,
    /// A dummy packet (RFC 4303 §2.6): discarded, no error.
    Dummy,
    Expired,
    Overflow,
    NoRoom,
    /// The crypto device stopped returning ops.
    Stalled,
}

/// One security association on a crypto device.
pub struct EspSa {
    config: SaConfig,
    /// The protected packets' family (rte_ipsec fixes it per SA).
    ipv6: bool,
    engine: Mutex<Engine>,
    /// `engine.lookaside` is set; read per burst without the lock.
    out_of_place: bool,
    dev: Arc<CryptoDev>,
    /// The port's inline crypto when it does this SA (`engine.inline` is set); read per burst
    /// without the lock.
    inline: Option<Arc<InlineDev>>,
    created: Instant,
    /// RFC 4301 §8.2.1: the path MTU (outer IP packet bytes) ICMP gave for this outbound SA,
    /// and when (ms since `created`); 0: none. Written on the rare ICMP; read when a core
    /// re-derives its associations' sizes (the port's generation moved, or one is adopted),
    /// and once per run of frames `IpsecPort::tx_burst` seals under the SA (to fragment or
    /// clear DF above it).
    pmtu: AtomicU64,
    pmtu_at: AtomicU64,
    pub stats: SaStats,
}

impl std::fmt::Debug for EspSa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EspSa")
            .field("config", &self.config)
            .field("device", &self.dev.name)
            .finish_non_exhaustive()
    }
}

impl EspSa {
    /// Creates the SA for packets of one family (`ipv6`: the SCTP packets it protects are IPv6).
    pub fn new(dev: &Arc<CryptoDev>, config: &SaConfig, ipv6: bool) -> Result<EspSa, String> {
        EspSa::new_on(dev, None, config, ipv6)
    }

    /// [`EspSa::new`] on a port whose NIC may do the crypto inline (`inline`): there when
    /// the NIC covers the SA and its `type` allows it ([`Offload`]); an SA of type
    /// `inline-crypto-offload` that the NIC cannot do is refused with the reason.
    pub fn new_on(
        dev: &Arc<CryptoDev>,
        inline: Option<&Arc<InlineDev>>,
        config: &SaConfig,
        ipv6: bool,
    ) -> Result<EspSa, String> {
        config.validate()?;
        // Whether, and under which capability flags, the NIC does this SA.
        let inline_flags = match (config.offload, inline) {
            (Offload::Software, _) | (Offload::Auto, None) => None,
            (Offload::Inline { .. }, None) => {
                return Err(format!(
                    "SA {} {}: type inline-crypto-offload, and the port offers no inline \
                     crypto (rte_security)",
                    config.direction, config.spi
                ))
            }
            (Offload::Auto, Some(d)) => d.covers(config).ok().map(|f| (d, f)),
            (Offload::Inline { .. }, Some(d)) => Some((
                d,
                d.covers(config).map_err(|why| {
                    format!(
                        "SA {} {}: type inline-crypto-offload: {why}",
                        config.direction, config.spi
                    )
                })?,
            )),
        };
        let egress = config.direction == Direction::Out;
        let a = config.algorithm;
        // The chain: an AEAD alone; CBC and HMAC as encrypt-then-MAC outbound, verify-then-
        // decrypt inbound (RFC 4303 §3.3.2, §3.4.4), the order rte_ipsec requires.
        let mut xf = [
            sys::rte_crypto_sym_xform::default(),
            sys::rte_crypto_sym_xform::default(),
        ];
        if a.is_aead() {
            xf[0].type_ = sys::RTE_CRYPTO_SYM_XFORM_AEAD;
            let aead = sys::rte_crypto_aead_xform {
                op: if egress {
                    sys::RTE_CRYPTO_AEAD_OP_ENCRYPT
                } else {
                    sys::RTE_CRYPTO_AEAD_OP_DECRYPT
                },
                algo: sys::RTE_CRYPTO_AEAD_AES_GCM,
                key: sys::rte_crypto_aead_xform__bindgen_ty_1 {
                    data: config.key.as_ptr(),
                    length: config.key.len() as u16,
                },
                // RFC 4106 §4: salt ‖ explicit IV, 12 bytes.
                iv: sys::rte_crypto_aead_xform__bindgen_ty_2 {
                    offset: IV_OFFSET,
                    length: 12,
                },
                digest_length: a.icv_len() as u16,
                // RFC 4106 §5: SPI ‖ sequence number, 32 or 64 bits of it.
                aad_length: if config.esn { 12 } else { 8 },
            };
            xf[0].__bindgen_anon_1.aead = aead;
        } else {
            let cipher = sys::rte_crypto_cipher_xform {
                op: if egress {
                    sys::RTE_CRYPTO_CIPHER_OP_ENCRYPT
                } else {
                    sys::RTE_CRYPTO_CIPHER_OP_DECRYPT
                },
                algo: sys::RTE_CRYPTO_CIPHER_AES_CBC,
                key: sys::rte_crypto_cipher_xform__bindgen_ty_1 {
                    data: config.key.as_ptr(),
                    length: config.key.len() as u16,
                },
                iv: sys::rte_crypto_cipher_xform__bindgen_ty_2 {
                    offset: IV_OFFSET,
                    length: 16,
                },
                dataunit_len: 0,
            };
            let auth = sys::rte_crypto_auth_xform {
                op: if egress {
                    sys::RTE_CRYPTO_AUTH_OP_GENERATE
                } else {
                    sys::RTE_CRYPTO_AUTH_OP_VERIFY
                },
                algo: sys::RTE_CRYPTO_AUTH_SHA256_HMAC,
                key: sys::rte_crypto_auth_xform__bindgen_ty_1 {
                    data: config.auth_key.as_ptr(),
                    length: config.auth_key.len() as u16,
                },
                iv: sys::rte_crypto_auth_xform__bindgen_ty_2::default(),
                // RFC 4868 §2.3: HMAC-SHA-256-128.
                digest_length: a.icv_len() as u16,
            };
            let (c, h) = if egress { (0, 1) } else { (1, 0) };
            xf[c].type_ = sys::RTE_CRYPTO_SYM_XFORM_CIPHER;
            xf[c].__bindgen_anon_1.cipher = cipher;
            xf[h].type_ = sys::RTE_CRYPTO_SYM_XFORM_AUTH;
            xf[h].__bindgen_anon_1.auth = auth;
            let second: *mut sys::rte_crypto_sym_xform = &mut xf[1];
            xf[0].next = second;
        }
        let head: *mut sys::rte_crypto_sym_xform = &mut xf[0];

        let mut prm = sys::rte_ipsec_sa_prm {
            crypto_xform: head,
            ..Default::default()
        };
        let x = &mut prm.ipsec_xform;
        x.spi = config.spi;
        // rte_ipsec copies the salt into the nonce as it lies in memory: the 4 bytes in wire
        // order.
        x.salt = u32::from_ne_bytes(config.salt.to_be_bytes());
        x.options.set_esn(u32::from(config.esn));
        x.direction = if egress {
            sys::RTE_SECURITY_IPSEC_SA_DIR_EGRESS
        } else {
            sys::RTE_SECURITY_IPSEC_SA_DIR_INGRESS
        };
        x.proto = sys::RTE_SECURITY_IPSEC_SA_PROTO_ESP;
        // Inbound, the window ours is (a power of two, at least 64): the two infer a packet's
        // ESN high half alike only with the same width (RFC 4303 Appendix A2.2).
        x.replay_win_sz = if egress {
            config.replay_window
        } else {
            u32::try_from(ReplayWindow::width(config.replay_window)).unwrap_or(u32::MAX)
        };
        let inner = if ipv6 { IPPROTO_IPV6 } else { IPPROTO_IPIP };
        // The outer header template of tunnel mode (IPv4: checksum filled per packet by us).
        let mut template = [0u8; 40];
        match config.mode {
            Mode::Transport => {
                x.mode = sys::RTE_SECURITY_IPSEC_SA_MODE_TRANSPORT;
                prm.__bindgen_anon_1.trs =
                    sys::rte_ipsec_sa_prm__bindgen_ty_1__bindgen_ty_2 { proto: inner };
            }
            Mode::Tunnel { src, dst } => {
                x.mode = sys::RTE_SECURITY_IPSEC_SA_MODE_TUNNEL;
                x.tunnel.type_ = match dst {
                    IpAddr::V4(_) => sys::RTE_SECURITY_IPSEC_TUNNEL_IPV4,
                    IpAddr::V6(_) => sys::RTE_SECURITY_IPSEC_TUNNEL_IPV6,
                };
                let len = write_outer_template(&mut template, src, dst);
                prm.__bindgen_anon_1.tun = sys::rte_ipsec_sa_prm__bindgen_ty_1__bindgen_ty_1 {
                    hdr_len: len as u8,
                    hdr_l3_off: 0,
                    next_proto: inner,
                    hdr: template.as_ptr().cast(),
                };
            }
        }

        // SAFETY: xf's keys and the template outlive the session and SA creation, which copy
        // what they keep; dev.id is a started device and its session pool is large enough.
        let crypto =
            unsafe { sys::rte_cryptodev_sym_session_create(dev.id, head, dev.sessions.as_ptr()) };
        let crypto = NonNull::new(crypto).ok_or_else(|| {
            DpdkError::from_rte_errno(format!("crypto session for SA {}", config.spi)).to_string()
        })?;
        let fail = |what: String| {
            // SAFETY: the session was created above on this device and is not used elsewhere.
            unsafe { sys::rte_cryptodev_sym_session_free(dev.id, crypto.as_ptr()) };
            what
        };
        // SAFETY: prm is fully initialised.
        let size = unsafe { sys::rte_ipsec_sa_size(&prm) };
        if size < 0 {
            return Err(fail(format!(
                "rte_ipsec_sa_size for SA {}: errno {}",
                config.spi, -size
            )));
        }
        // SAFETY: a zeroed, 64-byte aligned allocation of the size rte_ipsec asked for.
        let mem = unsafe { sys::rte_zmalloc_socket(c"ipsec_sa".as_ptr(), size as usize, 64, 0) };
        let Some(sa) = NonNull::new(mem.cast::<sys::rte_ipsec_sa>()) else {
            return Err(fail(format!("no memory for SA {}", config.spi)));
        };
        // SAFETY: sa points at `size` zeroed bytes; prm and what it points at are valid.
        let rc = unsafe { sys::rte_ipsec_sa_init(sa.as_ptr(), &prm, size as u32) };
        let mut session = Box::new(Session(sys::rte_ipsec_session::default()));
        session.0.sa = sa.as_ptr();
        // CPU crypto where the device has it; else every packet through crypto ops.
        session.0.type_ = if dev.cpu {
            sys::RTE_SECURITY_ACTION_TYPE_CPU_CRYPTO
        } else {
            sys::RTE_SECURITY_ACTION_TYPE_NONE
        };
        session.0.__bindgen_anon_1.crypto = sys::rte_ipsec_session__bindgen_ty_1__bindgen_ty_1 {
            ses: crypto.as_ptr().cast(),
            dev_id: dev.id,
        };
        let rc2 = if rc < 0 {
            rc
        } else {
            // SAFETY: the session points at an initialised SA and a live crypto session; the
            // box keeps its address for the session's life.
            unsafe { sys::rte_ipsec_session_prepare(&mut session.0) }
        };
        let lookaside = match dev.oop.as_ref() {
            Some(od) if rc2 >= 0 && egress && a.is_aead() && dev.cpu => {
                // SAFETY: as for the first session, on the out-of-place device and its pool.
                let ses = unsafe {
                    sys::rte_cryptodev_sym_session_create(od.id, head, od.sessions.as_ptr())
                };
                let Some(ses) = NonNull::new(ses) else {
                    // SAFETY: allocated above, never shared.
                    unsafe { sys::rte_free(mem) };
                    return Err(fail(
                        DpdkError::from_rte_errno(format!(
                            "out-of-place crypto session for SA {}",
                            config.spi
                        ))
                        .to_string(),
                    ));
                };
                let mut ls = Box::new(Session(sys::rte_ipsec_session::default()));
                ls.0.sa = sa.as_ptr();
                ls.0.type_ = sys::RTE_SECURITY_ACTION_TYPE_NONE;
                ls.0.__bindgen_anon_1.crypto = sys::rte_ipsec_session__bindgen_ty_1__bindgen_ty_1 {
                    ses: ses.as_ptr().cast(),
                    dev_id: od.id,
                };
                // SAFETY: as above: an initialised SA, a live crypto session, a boxed session.
                let rc = unsafe { sys::rte_ipsec_session_prepare(&mut ls.0) };
                if rc < 0 {
                    // SAFETY: created and allocated above, never shared.
                    unsafe {
                        sys::rte_cryptodev_sym_session_free(od.id, ses.as_ptr());
                        sys::rte_free(mem);
                    }
                    return Err(fail(format!(
                        "rte_ipsec lookaside session for SA {}: errno {}",
                        config.spi, -rc
                    )));
                }
                Some(Lookaside {
                    session: ls,
                    crypto: ses,
                    dev: Arc::clone(od),
                })
            }
            _ => None,
        };
        if rc2 < 0 {
            // SAFETY: allocated above, never shared.
            unsafe { sys::rte_free(mem) };
            return Err(fail(format!("rte_ipsec SA {}: errno {}", config.spi, -rc2)));
        }
        let inline_session = match inline_flags {
            None => None,
            Some((d, flags)) => {
                let mut conf = sys::rte_security_session_conf {
                    crypto_xform: head,
                    ..Default::default()
                };
                conf.__bindgen_anon_1.ipsec = prm.ipsec_xform;
                // SAFETY: the SA is initialised (rc2) and outlives its sessions (EspSa's
                // Drop releases the inline one first); conf points at xf, alive here.
                match unsafe {
                    inline::InlineSession::new(d, sa.as_ptr(), &mut conf, flags, config)
                } {
                    Ok(s) => Some(s),
                    // Not asked for: the crypto device does it (a NIC whose SA table is full,
                    // an SPI it still holds).
                    Err(_) if config.offload == Offload::Auto => None,
                    Err(why) => {
                        // SAFETY: created and allocated above, never shared.
                        unsafe {
                            if let Some(l) = &lookaside {
                                sys::rte_cryptodev_sym_session_free(l.dev.id, l.crypto.as_ptr());
                            }
                            sys::rte_ipsec_sa_fini(sa.as_ptr());
                            sys::rte_free(mem);
                        }
                        return Err(fail(format!(
                            "SA {} {}: {why}",
                            config.direction, config.spi
                        )));
                    }
                }
            }
        };
        Ok(EspSa {
            config: config.clone(),
            ipv6,
            out_of_place: lookaside.is_some() || (!dev.cpu && egress && a.is_aead() && dev.oop_sgl),
            inline: inline_session.as_ref().map(|s| Arc::clone(&s.dev)),
            engine: Mutex::new(Engine {
                sa,
                session,
                crypto,
                lookaside,
                window: (!egress).then(|| ReplayWindow::new(config.replay_window)),
                inline: inline_session,
            }),
            dev: Arc::clone(dev),
            created: Instant::now(),
            pmtu: AtomicU64::new(0),
            pmtu_at: AtomicU64::new(0),
            stats: SaStats::default(),
        })
    }

    pub fn config(&self) -> &SaConfig {
        &self.config
    }

    /// Whether this SA seals a zero-copy frame without copying it first (outbound AES-GCM on a
    /// device that reads a chain and writes one buffer).
    pub fn out_of_place(&self) -> bool {
        self.out_of_place
    }

    /// Seals zero-copy frames as an SA without out-of-place crypto does: copied into an mbuf
    /// of ours, then in place. For measuring what out of place saves, in the same run.
    pub fn copy_before_sealing(&mut self) {
        self.out_of_place = false;
    }

    pub fn spi(&self) -> u32 {
        self.config.spi
    }

    /// The port's inline crypto, where its NIC does this SA's crypto; `None`: the crypto
    /// device does.
    pub fn inline(&self) -> Option<&Arc<InlineDev>> {
        self.inline.as_ref()
    }

    /// Destroys the SA's session on the NIC, before a device that frees its security context
    /// closes: from then on the SA seals nothing inline (such frames are dropped as expired)
    /// and opens in software what the NIC still marks as its own (nothing: its session is
    /// gone).
    pub fn release_inline(&self) {
        let mut e = self.engine.lock().unwrap_or_else(|p| p.into_inner());
        e.inline = None;
    }

    /// When the SA was installed: its time lifetimes (RFC 4301 §4.4.2.1) run from here.
    pub fn created(&self) -> Instant {
        self.created
    }

    /// This SA made again for the other family (rte_ipsec fixes the family of the packets an
    /// SA carries): the same SA to the key manager and to RFC 4301 §4.4.2.1, so its time
    /// lifetimes keep running from its install, not from the policy that rebuilt it (a
    /// policy added and deleted again and again would otherwise keep an unused SA from ever
    /// expiring).
    /// `inline`: the port's inline crypto, if it may still be used.
    pub fn for_family(&self, inline: Option<&Arc<InlineDev>>, ipv6: bool) -> Result<EspSa, String> {
        let mut esp = EspSa::new_on(&self.dev, inline, &self.config, ipv6)?;
        esp.created = self.created;
        Ok(esp)
    }

    pub fn is_ipv6(&self) -> bool {
        self.ipv6
    }

    /// Whether the SA's soft lifetime (RFC 4301 §4.4.2.1) is spent: it still carries packets
    /// until the hard one is, but the key manager is to replace it now. Asked when the SAs are
    /// reported, never per packet.
    pub fn rekey_due(&self, now: Instant) -> bool {
        let l = self.config.lifetime;
        l.soft_bytes
            .is_some_and(|b| self.stats.bytes.load(Ordering::Relaxed) >= b)
            || l.soft_secs
                .is_some_and(|s| now.duration_since(self.created).as_secs() >= s)
            || self.sequence_state().0
    }

    /// Outbound: whether three quarters of the sequence numbers are given out (due for a
    /// rekey), and whether all are (nothing more can be sent: the key manager hears it as an
    /// expired SA, RFC 4301 §4.4.2.1). Inbound: never.
    pub fn sequence_state(&self) -> (bool, bool) {
        if self.config.direction == Direction::In {
            return (false, false);
        }
        sequence_state(self.stats.sequence.load(Ordering::Relaxed), self.config.esn)
    }

    /// RFC 4301 §8.2.1: the path MTU (outer IP bytes) ICMP gave for this SA's packets, unless
    /// it aged out (§8.2.2, `PMTU_AGE`).
    pub fn path_mtu(&self, now: Instant) -> Option<usize> {
        let mtu = self.pmtu.load(Ordering::Acquire);
        let at = self.pmtu_at.load(Ordering::Relaxed);
        let age = now.saturating_duration_since(self.created).as_millis();
        (mtu != 0 && age.saturating_sub(u128::from(at)) < PMTU_AGE.as_millis())
            .then(|| usize::try_from(mtu).ok())
            .flatten()
    }

    /// Records `mtu`, from an ICMP PMTU message the caller believed (RFC 4301 §6.1.2), as the
    /// SA's path MTU: lowered only, never raised while the last one is fresh (RFC 1191 §3, RFC
    /// 8201 §4), and renewed. Returns whether it changed.
    pub fn record_path_mtu(&self, mtu: usize, now: Instant) -> bool {
        bump(&self.stats.pmtu_accepted);
        let seen = self.pmtu.load(Ordering::Acquire);
        let aged = self.path_mtu(now).is_none();
        let at = now.saturating_duration_since(self.created).as_millis();
        self.pmtu_at
            .store(u64::try_from(at).unwrap_or(u64::MAX), Ordering::Relaxed);
        let mtu = u64::try_from(mtu).unwrap_or(u64::MAX);
        // Compare-and-swap: two cores believing ICMPs for this SA at once must not let the
        // larger MTU overwrite the smaller (a read, then a store, would: the last one wins).
        // The value found aged gives way only while it is still the one found.
        self.pmtu
            .fetch_update(Ordering::Release, Ordering::Acquire, |cur| {
                (cur == 0 || (aged && cur == seen) || mtu < cur).then_some(mtu)
            })
            .is_ok()
    }

    /// The hard lifetime is spent: the SA carries nothing more (RFC 4301 §4.4.2.1).
    pub(crate) fn expired(&self, now: Instant) -> bool {
        self.expired_after(now, 0)
    }

    /// [`EspSa::expired`] for a frame behind `pending` bytes of its burst that were taken and
    /// are not counted yet: a burst stops at the hard byte lifetime where frames taken one at
    /// a time would, instead of overshooting it by the whole burst (an independent review).
    fn expired_after(&self, now: Instant, pending: u64) -> bool {
        let l = self.config.lifetime;
        l.bytes.is_some_and(|b| {
            self.stats
                .bytes
                .load(Ordering::Relaxed)
                .saturating_add(pending)
                >= b
        }) || l
            .secs
            .is_some_and(|s| now.duration_since(self.created).as_secs() >= s)
    }

    fn count(&self, why: EspDrop) {
        let s = &self.stats;
        bump(match why {
            EspDrop::Replay => &s.replay,
            EspDrop::AuthFailed => &s.auth_failed,
            EspDrop::Malformed => &s.malformed,
            EspDrop::Dummy => &s.dummy,
            EspDrop::Expired => &s.expired,
            EspDrop::Overflow => &s.overflow,
            EspDrop::NoRoom => &s.no_room,
            EspDrop::Stalled => &s.stalled,
        });
    }

    /// Encrypts one Ethernet frame carrying an IP packet of this SA's family into an ESP frame
    /// (RFC 4303 §3.1: transport mode after the IP header, tunnel mode in a new outer header).
    /// A frame that is chained or attached to memory not its own is copied into a fresh mbuf
    /// from `pool` first. The drop is counted.
    pub fn encrypt(&self, frame: Mbuf, pool: &Mempool, now: Instant) -> Result<Mbuf, EspDrop> {
        let mut one = self.sealed(vec![frame], pool, now, None);
        one.pop().unwrap_or(Err(EspDrop::Malformed))
    }

    /// Encrypts a burst of frames of this SA in one crypto call: `crypto_aesni_mb` is a
    /// multi-buffer library, which works on several buffers at once. The frames take
    /// consecutive sequence numbers in their order; those sealed are appended to `out` in that
    /// order, the others are dropped and counted.
    pub fn encrypt_burst(
        &self,
        frames: Vec<Mbuf>,
        pool: &Mempool,
        now: Instant,
        out: &mut Vec<Mbuf>,
    ) {
        self.encrypt_burst_within(frames, pool, now, None, out);
    }

    /// [`EspSa::encrypt_burst`] for frames the caller fragments above `mtu` IP bytes once
    /// sealed (RFC 4301 §7.3): an inline SA seals such a burst in software, since a NIC
    /// encrypts whole packets only. Frames sealed inline leave marked for the NIC
    /// ([`InlineDev`]).
    pub fn encrypt_burst_within(
        &self,
        frames: Vec<Mbuf>,
        pool: &Mempool,
        now: Instant,
        mtu: Option<usize>,
        out: &mut Vec<Mbuf>,
    ) {
        out.extend(self.sealed(frames, pool, now, mtu).into_iter().flatten());
    }

    /// What each of `frames` became, sealed inline where the SA and `mtu` allow
    /// ([`EspSa::encrypt_burst_within`]), in software otherwise.
    fn sealed(
        &self,
        frames: Vec<Mbuf>,
        pool: &Mempool,
        now: Instant,
        mtu: Option<usize>,
    ) -> Vec<Result<Mbuf, EspDrop>> {
        if self.seals_inline(&frames, mtu) {
            self.seal_inline(frames, pool, now)
        } else {
            self.seal(frames, pool, now)
        }
    }

    /// What each of `frames` became, in their order; drops counted.
    fn seal(&self, frames: Vec<Mbuf>, pool: &Mempool, now: Instant) -> Vec<Result<Mbuf, EspDrop>> {
        // A device without CPU crypto takes every burst as ops; a burst with a zero-copy frame
        // goes whole through the lookaside session, so that sequence numbers follow the
        // burst's order.
        if !self.dev.cpu || self.out_of_place() && frames.iter().any(|f| own_room(f).is_none()) {
            return self.seal_out_of_place(frames, pool, now);
        }
        let (mut results, ready, mut ptrs) = readied(frames, |frame, pending| {
            self.seal_ready(frame, pool, now, pending)
        });
        // Bursts are at most a port's (512), far below u16::MAX.
        let n = ptrs.len() as u16;
        let (prepared, good, errno) = if n == 0 {
            (Vec::new(), Vec::new(), 0)
        } else {
            let engine = self.engine.lock().unwrap_or_else(|p| p.into_inner());
            // SAFETY: single-segment mbufs of our own (seal_ready), l2/l3 lengths set, the
            // session prepared in new(); the SA's state is ours under the lock. rte_ipsec
            // moves the packets it could not take behind the ones it took.
            let k =
                unsafe { sys::rte_ipsec_pkt_cpu_prepare(&engine.session.0, ptrs.as_mut_ptr(), n) };
            self.stats
                .sequence
                .fetch_add(u64::from(k), Ordering::Relaxed);
            let errno = if k < n { dpdk_sys::rte_errno() } else { 0 };
            let prepared = ptrs[..k as usize].to_vec();
            let k2 = if k == 0 {
                0
            } else {
                // SAFETY: as above; the first k packets passed prepare.
                unsafe { sys::rte_ipsec_pkt_process(&engine.session.0, ptrs.as_mut_ptr(), k) }
            };
            (prepared, ptrs[..k2 as usize].to_vec(), errno)
        };
        for (i, eth, before, df) in ready {
            let Ok(mut m) = std::mem::replace(&mut results[i], Err(EspDrop::Malformed)) else {
                continue;
            };
            clear_sec_flags(&mut m);
            let p = m.as_non_null().as_ptr();
            let r = if good.contains(&p) {
                self.seal_done(m, &eth, before, df)
            } else if prepared.contains(&p) {
                Err(EspDrop::Malformed)
            } else {
                Err(refused(errno))
            };
            results[i] = r;
        }
        for r in &results {
            if let Err(why) = r {
                self.count(*why);
            }
        }
        results
    }

    /// One frame made ready to seal: its own single-segment mbuf with room for the trailer,
    /// its lengths set; with its Ethernet header and length.
    fn seal_ready(
        &self,
        frame: Mbuf,
        pool: &Mempool,
        now: Instant,
        pending: u64,
    ) -> Result<(Mbuf, [u8; ETH], usize, bool), EspDrop> {
        if self.expired_after(now, pending) {
            return Err(EspDrop::Expired);
        }
        let m = own_copy(
            frame,
            pool,
            self.config.algorithm.block() - 1 + TAIL_SCRATCH,
            &self.stats.copied,
        )?;
        self.framed(m)
    }

    /// The frame with its l2/l3 lengths set for rte_ipsec (its headers in the first segment),
    /// its Ethernet header, its length, and whether its IP header says Don't Fragment (IPv4
    /// DF; IPv6 is never fragmented on the way, so yes).
    fn framed(&self, mut m: Mbuf) -> Result<(Mbuf, [u8; ETH], usize, bool), EspDrop> {
        let d = m.data();
        let Some(l3) = ip_header_len(d, self.ipv6) else {
            return Err(EspDrop::Malformed);
        };
        let mut eth = [0u8; ETH];
        eth.copy_from_slice(&d[..ETH]);
        let df = self.ipv6 || d.get(ETH + 6).is_none_or(|f| f & 0x40 != 0);
        set_lens(&mut m, ETH, l3);
        let before = m.frame_len();
        Ok((m, eth, before, df))
    }

    /// A sealed packet made a frame again.
    fn seal_done(
        &self,
        mut m: Mbuf,
        eth: &[u8; ETH],
        before: usize,
        df: bool,
    ) -> Result<Mbuf, EspDrop> {
        match self.config.mode {
            Mode::Transport => {
                if !self.ipv6 {
                    fix_ipv4_checksum(&mut m.data_mut()[ETH..]);
                }
            }
            Mode::Tunnel { dst, .. } => {
                // rte_ipsec wrote the outer header where the Ethernet header began; put one
                // back, same addresses, the outer family's type.
                let hdr = prepend(&mut m, ETH).ok_or(EspDrop::NoRoom)?;
                hdr[..12].copy_from_slice(&eth[..12]);
                hdr[12..14].copy_from_slice(if dst.is_ipv4() {
                    &[0x08, 0x00]
                } else {
                    &[0x86, 0xdd]
                });
                if dst.is_ipv4() {
                    // RFC 4301 §8.1: the outer DF is copied from the inner header (of the
                    // three choices, copy/set/clear). The inner one is set unless the packet
                    // carries a chunk framed before the path MTU fell (RFC 9260 §7.3,
                    // `Interface::set_path_mtu`): that one must cross the small hop
                    // fragmented, as in transport mode, where the header is the inner one.
                    if !df {
                        if let Some(flags) = m.data_mut().get_mut(ETH + 6) {
                            *flags &= !0x40;
                        }
                    }
                    fix_ipv4_checksum(&mut m.data_mut()[ETH..]);
                }
            }
        }
        self.stats.packets.fetch_add(1, Ordering::Relaxed);
        self.stats.bytes.fetch_add(before as u64, Ordering::Relaxed);
        Ok(m)
    }

    /// Verifies and decrypts one Ethernet frame carrying ESP for this SA (the caller found the
    /// SA by SPI) into the Ethernet frame of the packet it protected. The drop is counted.
    pub fn decrypt(&self, frame: Mbuf, pool: &Mempool, now: Instant) -> Result<Mbuf, EspDrop> {
        let mut one = self.open(vec![frame], pool, now);
        one.pop().unwrap_or(Err(EspDrop::Malformed))
    }

    /// Verifies and decrypts a burst of ESP frames of this SA in one crypto call (see
    /// [`EspSa::encrypt_burst`]); what each became, in their order, drops counted.
    pub fn decrypt_burst(
        &self,
        frames: Vec<Mbuf>,
        pool: &Mempool,
        now: Instant,
    ) -> Vec<Result<Mbuf, EspDrop>> {
        self.open(frames, pool, now)
    }

    fn open(&self, frames: Vec<Mbuf>, pool: &Mempool, now: Instant) -> Vec<Result<Mbuf, EspDrop>> {
        let mut results: Vec<Result<Mbuf, EspDrop>> = Vec::with_capacity(frames.len());
        // (index in results, Ethernet header, bytes before, low 32 bits of the sequence
        // number, the NIC's marks)
        let mut ready: Vec<(usize, [u8; ETH], usize, u32, u64)> = Vec::with_capacity(frames.len());
        // Bytes of the frames before, taken for opening (their ESP frames: a little more than
        // they count once opened), against the hard lifetime.
        let mut pending = 0u64;
        for frame in frames {
            // What a NIC with inline crypto did to the frame ([`inline`]): read before the
            // frame may be copied, whose copy has no marks.
            let nic = match self.inline {
                Some(_) => ol_flags(&frame) & (RX_SEC_OFFLOAD | RX_SEC_OFFLOAD_FAILED),
                None => 0,
            };
            let r = self.open_ready(frame, pool, now, pending);
            if let Ok((_, eth, before, low)) = &r {
                ready.push((results.len(), *eth, *before, *low, nic));
                pending += *before as u64;
            }
            results.push(r.map(|(m, ..)| m));
        }
        // Under the SA's lock: the duplicate check before any crypto (RFC 4303 §3.4.3), the
        // crypto for the burst, and the window moved only for packets whose ICV verified.
        // (index in results, Ethernet header, verdict, whether the NIC decrypted it)
        #[allow(clippy::type_complexity)]
        let mut verdicts: Vec<(usize, [u8; ETH], Result<(), EspDrop>, bool)> = Vec::new();
        if !ready.is_empty() {
            let mut engine = self.engine.lock().unwrap_or_else(|p| p.into_inner());
            if engine.inline.is_none() {
                // Released: the NIC's marks name no session of ours any more.
                for r in ready.iter_mut() {
                    r.4 = 0;
                }
            }
            // (.., the mbuf, the NIC's marks: RX_SEC_OFFLOAD for a packet the NIC decrypted)
            #[allow(clippy::type_complexity)]
            let mut submitted: Vec<(
                usize,
                [u8; ETH],
                usize,
                u64,
                *mut sys::rte_mbuf,
                u64,
            )> = Vec::with_capacity(ready.len());
            for (i, eth, before, low, nic) in ready {
                let seq = match &engine.window {
                    Some(w) if self.config.esn => w.infer_esn(low),
                    _ => u64::from(low),
                };
                if engine.window.as_ref().is_some_and(|w| !w.check(seq)) {
                    verdicts.push((i, eth, Err(EspDrop::Replay), false));
                } else if let Ok(m) = &results[i] {
                    submitted.push((i, eth, before, seq, m.as_non_null().as_ptr(), nic));
                }
            }
            // In sequence order: rte_ipsec infers each packet's high half (ESN) twice, at
            // prepare against the window before the burst and again as process moves the
            // window, packet by packet. A late packet processed after later ones of its burst
            // could be taken 2^32 ahead and move its window there, after which every genuine
            // packet fails its ICV (RFC 4303 Appendix A2; an independent review). In order,
            // no packet meets a window that packets above it moved. (Stable: a second copy
            // stays behind the first, which sets the bit it then finds.)
            // The NIC's run and the CPU crypto session's, each in that order.
            submitted.sort_by_key(|s| s.3);
            let by_nic = |s: &&(_, _, _, _, _, u64)| s.5 & RX_SEC_OFFLOAD != 0;
            let mut ptrs: Vec<*mut sys::rte_mbuf> = submitted
                .iter()
                .filter(|s| !by_nic(s))
                .map(|s| s.4)
                .collect();
            // Bursts are at most a port's (512), far below u16::MAX.
            let n = ptrs.len() as u16;
            // The packets whose crypto failed, as prepare (which runs it) marks them.
            let mut failed: Vec<*mut sys::rte_mbuf> = Vec::new();
            // Those that failed because the device stalled (a device of ops only).
            let mut stalled: Vec<*mut sys::rte_mbuf> = Vec::new();
            let (mut prepared, mut good, errno) = if n == 0 {
                (Vec::new(), Vec::new(), 0)
            } else {
                // The crypto runs inside prepare on the calling core, or through the device's
                // ops on a device without CPU crypto.
                let (k, errno) = if self.dev.cpu {
                    // SAFETY: single-segment mbufs of our own (open_ready), l2/l3 lengths set,
                    // the session prepared in new(); the SA's state is ours under the lock.
                    // rte_ipsec moves the packets it could not take behind the ones it took.
                    let k = unsafe {
                        sys::rte_ipsec_pkt_cpu_prepare(&engine.session.0, ptrs.as_mut_ptr(), n)
                    };
                    (k, if k < n { dpdk_sys::rte_errno() } else { 0 })
                } else {
                    let (k, errno, lost) = self.prepare_through_ops(&engine.session, &mut ptrs);
                    stalled = lost;
                    (k as u16, errno)
                };
                let prepared = ptrs[..usize::from(k)].to_vec();
                failed.extend(submitted.iter().filter_map(|s| {
                    let m = results[s.0].as_ref().ok()?;
                    (prepared.contains(&s.4) && ol_flags(m) & RX_SEC_OFFLOAD_FAILED != 0)
                        .then_some(s.4)
                }));
                let k2 = if k == 0 {
                    0
                } else {
                    // SAFETY: as above; the first k packets passed prepare.
                    unsafe { sys::rte_ipsec_pkt_process(&engine.session.0, ptrs.as_mut_ptr(), k) }
                };
                (prepared, ptrs[..usize::from(k2)].to_vec(), errno)
            };
            let mut nic: Vec<*mut sys::rte_mbuf> = Vec::new();
            if let (true, Some(inl)) = (submitted.len() > ptrs.len(), engine.inline.as_ref()) {
                // The NIC's verdicts: rte_ipsec reads its marks (a failed ICV refused), checks
                // the replay window and takes the trailer off; nothing to prepare.
                for &(.., p, marks) in submitted.iter().filter(by_nic) {
                    // SAFETY: a live mbuf of ours (results holds it); its marks as the NIC
                    // set them, which set_lens cleared.
                    unsafe { (*p).ol_flags |= marks };
                    if marks & RX_SEC_OFFLOAD_FAILED != 0 {
                        failed.push(p);
                    }
                    prepared.push(p);
                    nic.push(p);
                }
                let k = nic.len() as u16;
                // SAFETY: own mbufs with l2/l3 lengths set (open_ready), the inline session
                // prepared on this SA, whose state is ours under the lock.
                let k2 = unsafe { sys::rte_ipsec_pkt_process(&inl.session.0, nic.as_mut_ptr(), k) };
                good.extend_from_slice(&nic[..usize::from(k2)]);
            }
            for (i, eth, before, seq, p, marks) in submitted {
                let Ok(m) = &mut results[i] else { continue };
                let verdict = if !prepared.contains(&p) {
                    // Prepare refuses replays (EINVAL) before any crypto, and short or
                    // misaligned ciphertext (EBADMSG).
                    Err(match errno {
                        22 => EspDrop::Replay,
                        28 => EspDrop::NoRoom,
                        _ => EspDrop::Malformed,
                    })
                } else if stalled.contains(&p) {
                    Err(EspDrop::Stalled)
                } else if failed.contains(&p) {
                    Err(EspDrop::AuthFailed)
                } else if good.contains(&p) {
                    // §3.4.3: the window moves only for a packet whose ICV verified; a second
                    // copy in the same burst finds the first one's bit set.
                    match engine.window.as_mut().is_none_or(|w| w.accept(seq)) {
                        true => Ok(()),
                        false => Err(EspDrop::Replay),
                    }
                } else if m.frame_len() < before {
                    // Decapsulated, then refused: a late replay inside rte_ipsec.
                    Err(EspDrop::Replay)
                } else {
                    // A bad trailer leaves the packet as it was.
                    Err(EspDrop::Malformed)
                };
                clear_sec_flags(m);
                // The NIC's run is the marked packets (marks were cleared above without a
                // session to read them).
                verdicts.push((i, eth, verdict, marks & RX_SEC_OFFLOAD != 0));
            }
        }
        let mut by_the_nic = 0;
        for (i, eth, verdict, by_nic) in verdicts {
            let taken = std::mem::replace(&mut results[i], Err(EspDrop::Malformed));
            results[i] = match (taken, verdict) {
                (Ok(m), Ok(())) => self.open_done(m, &eth),
                (Ok(_), Err(why)) => Err(why),
                (Err(why), _) => Err(why),
            };
            by_the_nic += u64::from(by_nic && results[i].is_ok());
        }
        if by_the_nic > 0 {
            self.stats.nic.fetch_add(by_the_nic, Ordering::Relaxed);
        }
        for r in &results {
            if let Err(why) = r {
                self.count(*why);
            }
        }
        results
    }

    /// One ESP frame made ready to open: its own mbuf, the tunnel's addresses checked, its
    /// lengths set; with its Ethernet header, length and low sequence number.
    fn open_ready(
        &self,
        frame: Mbuf,
        pool: &Mempool,
        now: Instant,
        pending: u64,
    ) -> Result<(Mbuf, [u8; ETH], usize, u32), EspDrop> {
        if self.expired_after(now, pending) {
            return Err(EspDrop::Expired);
        }
        let mut m = own_copy(frame, pool, TAIL_SCRATCH, &self.stats.copied)?;
        let d = m.data();
        let outer_v6 = match self.config.mode {
            Mode::Transport => self.ipv6,
            Mode::Tunnel { dst, .. } => dst.is_ipv6(),
        };
        let Some(l3) = ip_header_len(d, outer_v6) else {
            return Err(EspDrop::Malformed);
        };
        if !esp_follows(&d[ETH..], l3, outer_v6) {
            return Err(EspDrop::Malformed);
        }
        // RFC 4303 §3.4.2 leaves the SA lookup to SPI (and addresses); a tunnel SA also names
        // its gateways, which rte_ipsec does not check: the outer source and destination
        // must be the tunnel's (inbound: src is the peer's gateway).
        if let Mode::Tunnel { src, dst } = self.config.mode {
            if outer_addresses(&d[ETH..]) != Some((src, dst)) {
                return Err(EspDrop::Malformed);
            }
        }
        let mut eth = [0u8; ETH];
        eth.copy_from_slice(&d[..ETH]);
        let Some(low) = d.get(ETH + l3 + 4..ETH + l3 + 8) else {
            return Err(EspDrop::Malformed);
        };
        let low = u32::from_be_bytes([low[0], low[1], low[2], low[3]]);
        let before = m.frame_len();
        set_lens(&mut m, ETH, l3);
        Ok((m, eth, before, low))
    }

    /// An opened packet made a frame again.
    fn open_done(&self, mut m: Mbuf, eth: &[u8; ETH]) -> Result<Mbuf, EspDrop> {
        match self.config.mode {
            Mode::Transport => {
                // RFC 4303 §2.6: the trailer's Next Header, which rte_ipsec wrote into the IP
                // header, says "no next header": a dummy packet, whose sequence number it
                // was sent to spend. Discarded "without indicating an error".
                let next = m.data().get(ETH + if self.ipv6 { 6 } else { 9 }).copied();
                if next == Some(NO_NEXT_HEADER) {
                    return Err(EspDrop::Dummy);
                }
                if !self.ipv6 {
                    fix_ipv4_checksum(&mut m.data_mut()[ETH..]);
                }
            }
            Mode::Tunnel { .. } => {
                // The packet now begins at the inner IP header.
                let inner_v6 = m.data().first().is_some_and(|b| b >> 4 == 6);
                let hdr = prepend(&mut m, ETH).ok_or(EspDrop::NoRoom)?;
                hdr[..12].copy_from_slice(&eth[..12]);
                hdr[12..14].copy_from_slice(if inner_v6 {
                    &[0x86, 0xdd]
                } else {
                    &[0x08, 0x00]
                });
            }
        }
        self.stats.packets.fetch_add(1, Ordering::Relaxed);
        self.stats
            .bytes
            .fetch_add(m.frame_len() as u64, Ordering::Relaxed);
        Ok(m)
    }
}

impl Drop for EspSa {
    fn drop(&mut self) {
        let e = self.engine.get_mut().unwrap_or_else(|p| p.into_inner());
        // The NIC's session first: it names the SA.
        e.inline = None;
        // SAFETY: no packet is in flight (CPU crypto is synchronous, and every op is dequeued
        // before the call that enqueued it returns, but on a device given up as stalled,
        // whose sessions are left to the ops it holds) and nothing else holds the SA or the
        // session; each is released once, the SA before its memory. The SA itself is no
        // device's: its ops carry the crypto session only.
        unsafe {
            sys::rte_ipsec_sa_fini(e.sa.as_ptr());
            sys::rte_free(e.sa.as_ptr().cast());
            if !self.dev.is_stalled() {
                sys::rte_cryptodev_sym_session_free(self.dev.id, e.crypto.as_ptr());
            }
            if let Some(l) = e.lookaside.as_ref().filter(|l| !l.dev.is_stalled()) {
                sys::rte_cryptodev_sym_session_free(l.dev.id, l.crypto.as_ptr());
            }
        }
    }
}

/// A frame made ready to seal: the frame, its Ethernet header, its length and DF.
type SealReady = (Mbuf, [u8; ETH], usize, bool);

/// What `ready` made of each of `frames` (given the bytes of the frames before it, which the
/// hard lifetime counts), in their order; the (index, Ethernet header, length, DF) of each one
/// made ready; and those frames' mbufs, for rte_ipsec.
#[allow(clippy::type_complexity)]
fn readied(
    frames: Vec<Mbuf>,
    mut ready: impl FnMut(Mbuf, u64) -> Result<SealReady, EspDrop>,
) -> (
    Vec<Result<Mbuf, EspDrop>>,
    Vec<(usize, [u8; ETH], usize, bool)>,
    Vec<*mut sys::rte_mbuf>,
) {
    let mut results: Vec<Result<Mbuf, EspDrop>> = Vec::with_capacity(frames.len());
    let mut ok: Vec<(usize, [u8; ETH], usize, bool)> = Vec::with_capacity(frames.len());
    let mut pending = 0u64;
    for frame in frames {
        let r = ready(frame, pending);
        if let Ok((_, eth, before, df)) = &r {
            ok.push((results.len(), *eth, *before, *df));
            pending += *before as u64;
        }
        results.push(r.map(|(m, ..)| m));
    }
    let ptrs = ok
        .iter()
        .filter_map(|(i, ..)| results[*i].as_ref().ok())
        .map(|m| m.as_non_null().as_ptr())
        .collect();
    (results, ok, ptrs)
}

/// The IP header's length if the frame carries one of the expected family whose next header is
/// ESP (or, outbound, anything: the caller chose the SA by policy). IPv6 extension headers
/// before ESP are not supported.
fn ip_header_len(frame: &[u8], ipv6: bool) -> Option<usize> {
    let ip = frame.get(ETH..)?;
    if ipv6 {
        (frame.get(12..14)? == [0x86, 0xdd] && ip.len() >= 40 && ip[0] >> 4 == 6).then_some(40)
    } else {
        let ihl = usize::from(*ip.first()? & 0x0f) * 4;
        (frame.get(12..14)? == [0x08, 0x00] && ip[0] >> 4 == 4 && ihl >= 20 && ip.len() >= ihl)
            .then_some(ihl)
    }
}

fn outer_addresses(ip: &[u8]) -> Option<(IpAddr, IpAddr)> {
    match ip.first()? >> 4 {
        4 => Some((
            IpAddr::from(<[u8; 4]>::try_from(ip.get(12..16)?).ok()?),
            IpAddr::from(<[u8; 4]>::try_from(ip.get(16..20)?).ok()?),
        )),
        6 => Some((
            IpAddr::from(<[u8; 16]>::try_from(ip.get(8..24)?).ok()?),
            IpAddr::from(<[u8; 16]>::try_from(ip.get(24..40)?).ok()?),
        )),
        _ => None,
    }
}

/// The outer IP header of tunnel mode, without lengths and (IPv4) checksum, which rte_ipsec and
/// we fill per packet. Returns its length.
fn write_outer_template(t: &mut [u8; 40], src: IpAddr, dst: IpAddr) -> usize {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            t[0] = 0x45;
            // DF: the SCTP packet inside was sized for the path (RFC 4301 §8.1); cleared per
            // packet where the inner header's is (`seal_done`).
            t[6] = 0x40;
            t[8] = 64;
            t[9] = crate::ipsec::IPPROTO_ESP;
            t[12..16].copy_from_slice(&s.octets());
            t[16..20].copy_from_slice(&d.octets());
            20
        }
        (s, d) => {
            let (IpAddr::V6(s), IpAddr::V6(d)) = (s, d) else {
                return 0;
            };
            t[0] = 0x60;
            t[6] = crate::ipsec::IPPROTO_ESP;
            t[7] = 64;
            t[8..24].copy_from_slice(&s.octets());
            t[24..40].copy_from_slice(&d.octets());
            40
        }
    }
}

/// IP's "no next header" (RFC 8200 §4.7), an ESP dummy packet's Next Header (RFC 4303 §2.6).
const NO_NEXT_HEADER: u8 = 59;

/// Whether the IP header of `l3` bytes at the start of `ip` (IPv6 if `v6`) is followed by
/// ESP itself (RFC 4303 §3.1.1), and, IPv4, checks (RFC 1122 §3.2.1.2: a host verifies the
/// header checksum of every datagram; in transport mode ESP does not cover the IP header,
/// and the checksum is rewritten once the packet is opened, so this is the one look at it).
fn esp_follows(ip: &[u8], l3: usize, v6: bool) -> bool {
    const ESP: u8 = 50;
    if v6 {
        return ip.get(6) == Some(&ESP);
    }
    let Some(h) = ip.get(..l3) else {
        return false;
    };
    h[9] == ESP && ones_complement_sum(h) == 0xffff
}

/// RFC 1071's one's complement sum of `h`'s 16-bit words.
fn ones_complement_sum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks_exact(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// RFC 791 header checksum over the IPv4 header at the start of `ip`.
pub(super) fn fix_ipv4_checksum(ip: &mut [u8]) {
    let ihl = usize::from(ip.first().copied().unwrap_or(0) & 0x0f) * 4;
    let Some(h) = ip.get_mut(..ihl) else {
        return;
    };
    h[10] = 0;
    h[11] = 0;
    let sum = ones_complement_sum(h);
    h[10..12].copy_from_slice(&(!sum).to_be_bytes());
}

/// The room after the data of `frame` if it is a single direct mbuf that nothing else holds,
/// which the crypto may write in place; `None` if it is chained, attached to memory not its
/// own, or shared.
fn own_room(frame: &Mbuf) -> Option<usize> {
    let m = frame.as_non_null();
    // SAFETY: a live mbuf we own; reads of plain fields.
    unsafe {
        let r = m.as_ref();
        (r.nb_segs == 1
            && r.ol_flags & (1 << 61) == 0
            && sys::rte_mbuf_refcnt_read(m.as_ptr()) == 1)
            .then(|| usize::from(r.buf_len) - usize::from(r.data_off) - usize::from(r.data_len))
    }
}

/// Why rte_ipsec's prepare refused a packet, from the errno it left.
fn refused(errno: i32) -> EspDrop {
    match errno {
        75 => EspDrop::Overflow,
        28 => EspDrop::NoRoom,
        _ => EspDrop::Malformed,
    }
}

/// The frame in a single mbuf of our own pool with `tail` bytes of tailroom: as it is when it
/// already is, else copied (the original freed, the copy counted in `copied`).
fn own_copy(frame: Mbuf, pool: &Mempool, tail: usize, copied: &AtomicU64) -> Result<Mbuf, EspDrop> {
    if own_room(&frame).is_some_and(|room| room >= tail) {
        return Ok(frame);
    }
    // One copy, segment by segment, straight into the mbuf that will be sealed.
    let len = frame.frame_len();
    let mut out = Mbuf::alloc(pool).ok_or(EspDrop::NoRoom)?;
    if out.tailroom_total() < len + tail {
        return Err(EspDrop::NoRoom);
    }
    out.set_len(len as u16);
    if !frame.copy_frame_to(out.data_mut()) {
        return Err(EspDrop::NoRoom);
    }
    bump(copied);
    Ok(out)
}

fn set_lens(m: &mut Mbuf, l2: usize, l3: usize) {
    // SAFETY: we own the mbuf; tx_offload packs l2_len (7 bits) then l3_len (9 bits), and
    // RX_SEC_OFFLOAD_FAILED must be clear on input to rte_ipsec.
    unsafe {
        let r = m.as_non_null().as_mut();
        r.__bindgen_anon_3.tx_offload = (l2 as u64 & 0x7f) | ((l3 as u64 & 0x1ff) << 7);
        r.ol_flags &= !(RX_SEC_OFFLOAD | RX_SEC_OFFLOAD_FAILED);
    }
}

fn ol_flags(m: &Mbuf) -> u64 {
    // SAFETY: a live mbuf we own.
    unsafe { m.as_non_null().as_ref().ol_flags }
}

fn clear_sec_flags(m: &mut Mbuf) {
    // SAFETY: we own the mbuf; rte_ipsec leaves these set and a TX path must not see them.
    unsafe { m.as_non_null().as_mut().ol_flags &= !(RX_SEC_OFFLOAD | RX_SEC_OFFLOAD_FAILED) };
}

/// `n` bytes added in front of the data, from the headroom.
fn prepend(m: &mut Mbuf, n: usize) -> Option<&mut [u8]> {
    // SAFETY: we own the mbuf; prepend returns null when the headroom is too small, else a
    // pointer to the n new bytes, which belong to our (single-segment, own) buffer.
    unsafe {
        let p = sys::rte_pktmbuf_prepend(m.as_non_null().as_ptr(), n as u16);
        NonNull::new(p.cast::<u8>()).map(|p| std::slice::from_raw_parts_mut(p.as_ptr(), n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4303 §3.3.3: the counter never cycles. Three quarters of the space given out is a
    /// rekey due (RFC 4301 §4.4.2.1's soft limit, for the key manager's `expiring`); all of it,
    /// an SA that sends nothing more. Without ESN, 2^32 - 2 numbers (rte_ipsec's last is
    /// 2^32 - 2: the SA used to be said spent only at 2^32 - 1, a number never given, and
    /// stayed "rekey" while it refused every packet); with it, 2^64 - 2.
    #[test]
    fn sequence_numbers_running_out_are_said_4303_3_3_3() {
        assert_eq!(sequence_state(u64::from(u32::MAX) - 1, false), (true, true));
        assert_eq!(
            sequence_state(u64::from(u32::MAX) - 2, false),
            (true, false)
        );
        assert_eq!(sequence_state(u64::MAX - 1, true), (true, true));
        let space = u64::from(u32::MAX) - 1;
        assert_eq!(sequence_state(0, false), (false, false));
        assert_eq!(sequence_state(space - space / 4 - 1, false), (false, false));
        assert_eq!(sequence_state(space - space / 4, false), (true, false));
        assert_eq!(sequence_state(space - 1, false), (true, false));
        assert_eq!(sequence_state(space, false), (true, true));
        assert_eq!(
            sequence_state(space, true),
            (false, false),
            "ESN: far from it"
        );
        assert_eq!(
            sequence_state(u64::MAX - 1 - (u64::MAX - 1) / 4 - 1, true),
            (false, false)
        );
        assert_eq!(
            sequence_state(u64::MAX - 1 - (u64::MAX - 1) / 4, true),
            (true, false)
        );
        assert_eq!(sequence_state(u64::MAX, true), (true, true));
    }

    #[test]
    fn ipv4_checksum_is_rfc_791s() {
        // RFC 1071's worked header example (Wikipedia's "IPv4 header checksum").
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xff, 0xff, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        fix_ipv4_checksum(&mut h);
        assert_eq!(&h[10..12], &[0xb8, 0x61]);
    }
}
