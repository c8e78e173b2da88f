//! A stand-in for a NIC with inline ESP crypto (`rte_security`'s
//! `RTE_SECURITY_ACTION_TYPE_INLINE_CRYPTO`), for the tests of ddpdk's inline path: no NIC on
//! these machines has it, and no DPDK PMD emulates one.
//!
//! [`NicDouble`] wraps a port and does to its frames what such a NIC does: it offers a
//! security context whose capabilities name AES-GCM-128/256 ESP in transport and tunnel mode,
//! both directions, without ESN; it keeps the sessions created on it as its SA table (SPI,
//! key, salt); outbound it encrypts each frame marked `TX_SEC_OFFLOAD` under the session its
//! metadata names, as it leaves (RFC 4106: the nonce is the salt and the ESP IV, the AAD the SPI
//! and sequence number, the ICV written into the room rte_ipsec left), reading a zero-copy
//! frame where it lies and writing the ciphertext only to the wire; inbound it decrypts the ESP
//! of an SPI it holds an inbound session for in place and marks the frame `RX_SEC_OFFLOAD`, with
//! `RX_SEC_OFFLOAD_FAILED` when the ICV does not verify (then the frame stays as it came). Its
//! AES-GCM is RustCrypto's, not DPDK's: what our inline path frames is sealed by other code
//! than our software path, and checked by a third party (scapy) in the tests.
//!
//! It installs an inbound SA at session creation and takes no flow rules, unless
//! [`NicDouble::set_wants_rules`] makes it do as ixgbe and txgbe do: an inbound session then
//! decrypts only the packets an `rte_flow`-style rule ([`Port::esp_ingress_rule`]) handed it,
//! by the destination address the rule names.

use std::ffi::{c_int, c_uint, c_void};
use std::net::IpAddr;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes128Gcm, Aes256Gcm, Nonce, Tag};
use dpdk_sys as sys;

use super::mbuf::{Mbuf, Mempool};
use crate::port::region::Region;
use crate::port::{
    ChecksumOffload, EspIngress, FlowRule, LinkStatus, PacketBuf, Port, PortStats, RxWaiter,
    SctpFlow,
};

const TX_SEC_OFFLOAD: u64 = 1 << 43;
const RX_SEC_OFFLOAD: u64 = 1 << 18;
const RX_SEC_OFFLOAD_FAILED: u64 = 1 << 19;
/// rte_security.h: the NIC needs the session in each packet's metadata.
const TX_OLOAD_NEED_MDATA: u32 = 0x1;
const ICV: usize = 16;
const ETH: usize = 14;

/// What the stand-in did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NicCounts {
    /// Frames encrypted as they left.
    pub sealed: u64,
    /// Marked frames sent without a session in their metadata (dropped: a NIC would send
    /// them unencrypted or not at all).
    pub unknown_session: u64,
    /// ESP frames decrypted and marked, and those whose ICV failed.
    pub opened: u64,
    pub failed: u64,
    /// ESP frames left as they came (an SPI without an inbound session, or decryption off).
    pub passed: u64,
}

enum Gcm {
    A128(Box<Aes128Gcm>),
    A256(Box<Aes256Gcm>),
}

impl Gcm {
    fn seal(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8]) -> Option<[u8; ICV]> {
        let n = Nonce::from_slice(nonce);
        let tag = match self {
            Gcm::A128(c) => c.encrypt_in_place_detached(n, aad, buf),
            Gcm::A256(c) => c.encrypt_in_place_detached(n, aad, buf),
        }
        .ok()?;
        Some(tag.into())
    }

    fn open(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8], icv: &[u8]) -> bool {
        let n = Nonce::from_slice(nonce);
        let t = Tag::from_slice(icv);
        match self {
            Gcm::A128(c) => c.decrypt_in_place_detached(n, aad, buf, t),
            Gcm::A256(c) => c.decrypt_in_place_detached(n, aad, buf, t),
        }
        .is_ok()
    }
}

struct NicSa {
    /// The session's address: what a frame's metadata names.
    session: usize,
    spi: u32,
    egress: bool,
    salt: [u8; 4],
    gcm: Gcm,
}

/// The NIC's state, where its security context's `device` points.
struct Nic {
    ops: sys::rte_security_ops,
    caps: Vec<sys::rte_security_capability>,
    crypto: Vec<sys::rte_cryptodev_capabilities>,
    sas: Mutex<Vec<NicSa>>,
    decrypts: AtomicBool,
    /// ESP frames still to pass undecrypted before decrypting again.
    pass: AtomicU64,
    /// Sessions it takes at most (its SA table's size).
    max_sessions: AtomicU64,
    /// As ixgbe: an inbound session decrypts only what a rule handed it.
    wants_rules: AtomicBool,
    /// The rules installed: (handle, session, destination address).
    rules: Mutex<Vec<(usize, usize, IpAddr)>>,
    next_rule: AtomicUsize,
    /// Sessions destroyed while a rule still named them.
    stale_rules: AtomicU64,
    /// Inbound sessions created while another of the same SPI lived: ixgbe and txgbe clear
    /// a destroyed session's SA table entry by SPI alone, so such a pair corrupts theirs.
    duplicate_spis: AtomicU64,
    sealed: AtomicU64,
    unknown_session: AtomicU64,
    opened: AtomicU64,
    failed: AtomicU64,
    passed: AtomicU64,
}

/// A port whose frames a stand-in NIC with inline ESP crypto encrypts and decrypts (module
/// docs).
pub struct NicDouble<P> {
    inner: Arc<P>,
    pool: Arc<Mempool>,
    ctx: NonNull<sys::rte_security_ctx>,
    nic: NonNull<Nic>,
}

impl<P> std::fmt::Debug for NicDouble<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NicDouble").finish_non_exhaustive()
    }
}

// SAFETY: the context and the NIC state are owned by this value and freed in its Drop; the
// state is shared only through atomics and a mutex, the context written only by DPDK's
// session calls, which the IPsec port makes under its configuration lock.
unsafe impl<P: Send> Send for NicDouble<P> {}
// SAFETY: as above.
unsafe impl<P: Sync> Sync for NicDouble<P> {}

impl<P: Port<Buf = Mbuf>> NicDouble<P> {
    /// The stand-in in front of `inner`; `pool` gives the buffers frames are linearised into
    /// as they are encrypted.
    pub fn new(inner: Arc<P>, pool: Arc<Mempool>) -> Result<Arc<NicDouble<P>>, String> {
        // SAFETY: registers the mbuf field rte_security keeps a packet's metadata in (once
        // per process; again returns the same offset).
        if unsafe { sys::rte_security_dynfield_register() } < 0 {
            return Err("rte_security_dynfield_register failed".into());
        }
        let mut caps = Vec::new();
        for mode in [
            sys::RTE_SECURITY_IPSEC_SA_MODE_TRANSPORT,
            sys::RTE_SECURITY_IPSEC_SA_MODE_TUNNEL,
        ] {
            for direction in [
                sys::RTE_SECURITY_IPSEC_SA_DIR_INGRESS,
                sys::RTE_SECURITY_IPSEC_SA_DIR_EGRESS,
            ] {
                let mut c = sys::rte_security_capability {
                    action: sys::RTE_SECURITY_ACTION_TYPE_INLINE_CRYPTO,
                    protocol: sys::RTE_SECURITY_PROTOCOL_IPSEC,
                    ol_flags: TX_OLOAD_NEED_MDATA,
                    ..Default::default()
                };
                c.__bindgen_anon_1.ipsec =
                    sys::rte_security_capability__bindgen_ty_1__bindgen_ty_1 {
                        proto: sys::RTE_SECURITY_IPSEC_SA_PROTO_ESP,
                        mode,
                        direction,
                        replay_win_sz_max: 0,
                        ..Default::default()
                    };
                caps.push(c);
            }
        }
        // The list's end: an entry of action NONE (the default).
        caps.push(sys::rte_security_capability::default());
        let mut gcm = sys::rte_cryptodev_capabilities {
            op: sys::RTE_CRYPTO_OP_TYPE_SYMMETRIC,
            ..Default::default()
        };
        let range = |min, max, increment| sys::rte_crypto_param_range {
            min,
            max,
            increment,
        };
        let mut sym = sys::rte_cryptodev_symmetric_capability {
            xform_type: sys::RTE_CRYPTO_SYM_XFORM_AEAD,
            ..Default::default()
        };
        sym.__bindgen_anon_1.aead =
            sys::rte_cryptodev_symmetric_capability__bindgen_ty_1__bindgen_ty_3 {
                algo: sys::RTE_CRYPTO_AEAD_AES_GCM,
                block_size: 16,
                key_size: range(16, 32, 16),
                digest_size: range(16, 16, 0),
                aad_size: range(8, 8, 0),
                iv_size: range(12, 12, 0),
            };
        gcm.__bindgen_anon_1.sym = sym;
        // The end: an entry of op UNDEFINED (the default).
        let crypto = vec![gcm, sys::rte_cryptodev_capabilities::default()];
        let mut nic = Box::new(Nic {
            ops: sys::rte_security_ops::default(),
            caps,
            crypto,
            sas: Mutex::new(Vec::new()),
            decrypts: AtomicBool::new(true),
            pass: AtomicU64::new(0),
            max_sessions: AtomicU64::new(u64::MAX),
            wants_rules: AtomicBool::new(false),
            rules: Mutex::new(Vec::new()),
            next_rule: AtomicUsize::new(1),
            stale_rules: AtomicU64::new(0),
            duplicate_spis: AtomicU64::new(0),
            sealed: AtomicU64::new(0),
            unknown_session: AtomicU64::new(0),
            opened: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            passed: AtomicU64::new(0),
        });
        let list = nic.crypto.as_ptr();
        for c in &mut nic.caps {
            c.crypto_capabilities = list;
        }
        nic.ops.session_create = Some(session_create);
        nic.ops.session_destroy = Some(session_destroy);
        nic.ops.session_get_size = Some(session_get_size);
        nic.ops.set_pkt_metadata = Some(set_pkt_metadata);
        nic.ops.capabilities_get = Some(capabilities_get);
        let nic = NonNull::from(Box::leak(nic));
        let ctx = Box::new(sys::rte_security_ctx {
            device: nic.as_ptr().cast(),
            // SAFETY: the state was just leaked: it lives until Drop, as the context does.
            ops: unsafe { &nic.as_ref().ops },
            ..Default::default()
        });
        Ok(Arc::new(NicDouble {
            inner,
            pool,
            ctx: NonNull::from(Box::leak(ctx)),
            nic,
        }))
    }

    fn nic(&self) -> &Nic {
        // SAFETY: alive until Drop; shared state only.
        unsafe { self.nic.as_ref() }
    }

    /// Whether the NIC decrypts what it receives (on by default): off, every ESP frame passes
    /// as it came, as from a NIC that holds no SA for it.
    pub fn set_decrypts(&self, on: bool) {
        self.nic().decrypts.store(on, Ordering::Relaxed);
    }

    /// The next `n` ESP frames pass as they came, as from a NIC without their SA; then it
    /// decrypts again.
    pub fn pass_next(&self, n: u64) {
        self.nic().pass.store(n, Ordering::Relaxed);
    }

    /// The NIC's SA table holds at most `n` sessions: creating another fails.
    pub fn set_max_sessions(&self, n: u64) {
        self.nic().max_sessions.store(n, Ordering::Relaxed);
    }

    /// On: as ixgbe and txgbe, an inbound session decrypts only the packets a rule
    /// ([`Port::esp_ingress_rule`]) handed it, to the rule's destination address. Off (the
    /// default): it takes no rules, and an inbound session decrypts from its creation.
    pub fn set_wants_rules(&self, on: bool) {
        self.nic().wants_rules.store(on, Ordering::Relaxed);
    }

    /// The ESP rules installed, as (session, destination address).
    pub fn rules(&self) -> Vec<(usize, IpAddr)> {
        self.nic()
            .rules
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|&(_, s, a)| (s, a))
            .collect()
    }

    /// Sessions destroyed while a rule still named them (a NIC left decrypting under a
    /// freed session).
    pub fn stale_rules(&self) -> u64 {
        self.nic().stale_rules.load(Ordering::Relaxed)
    }

    /// Inbound sessions created while another of the same SPI lived (which ixgbe's and
    /// txgbe's SA tables, cleared by SPI alone, do not survive).
    pub fn duplicate_spis(&self) -> u64 {
        self.nic().duplicate_spis.load(Ordering::Relaxed)
    }

    pub fn counts(&self) -> NicCounts {
        let n = self.nic();
        NicCounts {
            sealed: n.sealed.load(Ordering::Relaxed),
            unknown_session: n.unknown_session.load(Ordering::Relaxed),
            opened: n.opened.load(Ordering::Relaxed),
            failed: n.failed.load(Ordering::Relaxed),
            passed: n.passed.load(Ordering::Relaxed),
        }
    }

    /// Sessions the NIC holds.
    pub fn sessions(&self) -> usize {
        self.nic()
            .sas
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// A marked frame as it goes on the wire: a copy of it, linearised into a buffer of ours
    /// (the NIC reads a chain where it lies), encrypted; `None` if its session is unknown.
    /// The frame itself stays as it was (plaintext and marked) until the ring takes the copy.
    fn seal(&self, frame: &Mbuf) -> Option<Mbuf> {
        let head = frame.as_non_null().as_ptr();
        // SAFETY: a live mbuf we own; the metadata field is registered (new) and the session
        // was written there by set_pkt_metadata.
        let (session, l2, l3) = unsafe {
            let t = (*head).__bindgen_anon_3.tx_offload;
            (
                *sys::rte_security_dynfield(head) as usize,
                (t & 0x7f) as usize,
                ((t >> 7) & 0x1ff) as usize,
            )
        };
        let sas = self
            .nic()
            .sas
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(sa) = sas.iter().find(|s| s.session == session && s.egress) else {
            self.nic().unknown_session.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let len = frame.frame_len();
        let mut out = Mbuf::alloc(&self.pool)?;
        if out.tailroom_total() < len {
            return None;
        }
        out.set_len(len as u16);
        if !frame.copy_frame_to(out.data_mut()) {
            return None;
        }
        let d = out.data_mut();
        let esp = l2 + l3;
        if d.len() < esp + 16 + ICV || d.get(esp..esp + 4) != Some(&sa.spi.to_be_bytes()[..]) {
            return None;
        }
        let mut nonce = [0u8; 12];
        nonce[..4].copy_from_slice(&sa.salt);
        nonce[4..].copy_from_slice(&d[esp + 8..esp + 16]);
        let aad: [u8; 8] = d[esp..esp + 8].try_into().ok()?;
        let end = d.len() - ICV;
        let icv = sa.gcm.seal(&nonce, &aad, &mut d[esp + 16..end])?;
        d[end..].copy_from_slice(&icv);
        Some(out)
    }

    /// An ESP frame as the NIC hands it up: decrypted and marked where it holds the SA.
    fn open(&self, frame: &mut Mbuf) {
        let n = self.nic();
        // The marks are the NIC's to set, whatever the frame carried before.
        // SAFETY: a live mbuf we own.
        unsafe {
            (*frame.as_non_null().as_ptr()).ol_flags &= !(RX_SEC_OFFLOAD | RX_SEC_OFFLOAD_FAILED)
        };
        let Some(esp) = esp_offset(frame.data()) else {
            return;
        };
        let passing = n
            .pass
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| p.checked_sub(1))
            .is_ok();
        if passing || !n.decrypts.load(Ordering::Relaxed) {
            n.passed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let d = frame.data_mut();
        let spi = u32::from_be_bytes([d[esp], d[esp + 1], d[esp + 2], d[esp + 3]]);
        let sas = n
            .sas
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(sa) = sas.iter().find(|s| s.spi == spi && !s.egress) else {
            n.passed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if n.wants_rules.load(Ordering::Relaxed) {
            let ruled = destination(d).is_some_and(|to| {
                n.rules
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .iter()
                    .any(|&(_, s, a)| s == sa.session && a == to)
            });
            if !ruled {
                n.passed.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        if d.len() < esp + 16 + ICV {
            n.passed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut nonce = [0u8; 12];
        nonce[..4].copy_from_slice(&sa.salt);
        nonce[4..].copy_from_slice(&d[esp + 8..esp + 16]);
        let mut aad = [0u8; 8];
        aad.copy_from_slice(&d[esp..esp + 8]);
        let end = d.len() - ICV;
        let mut clear = d[esp + 16..end].to_vec();
        let ok = sa.gcm.open(&nonce, &aad, &mut clear, &d[end..]);
        let marks = if ok {
            d[esp + 16..end].copy_from_slice(&clear);
            n.opened.fetch_add(1, Ordering::Relaxed);
            RX_SEC_OFFLOAD
        } else {
            n.failed.fetch_add(1, Ordering::Relaxed);
            RX_SEC_OFFLOAD | RX_SEC_OFFLOAD_FAILED
        };
        // SAFETY: a live mbuf we own.
        unsafe { (*frame.as_non_null().as_ptr()).ol_flags |= marks };
    }
}

/// Where ESP begins in an Ethernet frame of IPv4 or IPv6 whose IP header is followed by ESP.
fn esp_offset(d: &[u8]) -> Option<usize> {
    match d.get(12..14)? {
        [0x08, 0x00] => {
            let ihl = usize::from(d.get(ETH)? & 0x0f) * 4;
            (*d.get(ETH + 9)? == 50).then_some(ETH + ihl)
        }
        [0x86, 0xdd] => (*d.get(ETH + 6)? == 50).then_some(ETH + 40),
        _ => None,
    }
}

/// The destination address of an Ethernet frame of IPv4 or IPv6.
fn destination(d: &[u8]) -> Option<IpAddr> {
    match d.get(12..14)? {
        [0x08, 0x00] => {
            let a: [u8; 4] = d.get(ETH + 16..ETH + 20)?.try_into().ok()?;
            Some(IpAddr::from(a))
        }
        [0x86, 0xdd] => {
            let a: [u8; 16] = d.get(ETH + 24..ETH + 40)?.try_into().ok()?;
            Some(IpAddr::from(a))
        }
        _ => None,
    }
}

impl<P> Drop for NicDouble<P> {
    fn drop(&mut self) {
        // SAFETY: leaked in new() and freed once here; no session is used any more (each SA
        // holding one keeps this port alive through its InlineDev).
        unsafe {
            drop(Box::from_raw(self.ctx.as_ptr()));
            drop(Box::from_raw(self.nic.as_ptr()));
        }
    }
}

/// # Safety
/// `device` is a `Nic` of a live [`NicDouble`].
unsafe fn nic<'a>(device: *mut c_void) -> &'a Nic {
    // SAFETY: the caller's promise.
    unsafe { &*device.cast::<Nic>() }
}

unsafe extern "C" fn session_create(
    device: *mut c_void,
    conf: *mut sys::rte_security_session_conf,
    sess: *mut sys::rte_security_session,
) -> c_int {
    // SAFETY: DPDK passes our context's device and a valid conf.
    let (n, conf) = unsafe { (nic(device), &*conf) };
    if conf.action_type != sys::RTE_SECURITY_ACTION_TYPE_INLINE_CRYPTO
        || conf.protocol != sys::RTE_SECURITY_PROTOCOL_IPSEC
        || conf.crypto_xform.is_null()
    {
        return -95;
    }
    // SAFETY: an IPsec conf's union holds `ipsec`; crypto_xform is non-null.
    let (ipsec, xf) = unsafe { (conf.__bindgen_anon_1.ipsec, &*conf.crypto_xform) };
    if xf.type_ != sys::RTE_CRYPTO_SYM_XFORM_AEAD || ipsec.options.esn() != 0 {
        return -95;
    }
    // SAFETY: an AEAD transform's union holds `aead`; its key is followed by the 4-byte
    // salt, where the 22.11 drivers (ixgbe, txgbe, ngbe) read it: the caller's promise, which
    // this stand-in holds it to.
    let (key, salt) = unsafe {
        let a = xf.__bindgen_anon_1.aead;
        if a.algo != sys::RTE_CRYPTO_AEAD_AES_GCM {
            return -95;
        }
        let len = usize::from(a.key.length);
        let all = std::slice::from_raw_parts(a.key.data, len + 4);
        (
            &all[..len],
            [all[len], all[len + 1], all[len + 2], all[len + 3]],
        )
    };
    // The salt behind the key and the transform's are one.
    if salt != ipsec.salt.to_ne_bytes() {
        return -22;
    }
    let mut sas = n
        .sas
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if sas.len() as u64 >= n.max_sessions.load(Ordering::Relaxed) {
        return -28;
    }
    let gcm = match key.len() {
        16 => Aes128Gcm::new_from_slice(key).map(|c| Gcm::A128(Box::new(c))),
        32 => Aes256Gcm::new_from_slice(key).map(|c| Gcm::A256(Box::new(c))),
        _ => return -22,
    };
    let Ok(gcm) = gcm else { return -22 };
    let egress = ipsec.direction == sys::RTE_SECURITY_IPSEC_SA_DIR_EGRESS;
    if !egress && sas.iter().any(|s| !s.egress && s.spi == ipsec.spi) {
        n.duplicate_spis.fetch_add(1, Ordering::Relaxed);
    }
    sas.push(NicSa {
        session: sess as usize,
        spi: ipsec.spi,
        egress: ipsec.direction == sys::RTE_SECURITY_IPSEC_SA_DIR_EGRESS,
        salt,
        gcm,
    });
    0
}

unsafe extern "C" fn session_destroy(
    device: *mut c_void,
    sess: *mut sys::rte_security_session,
) -> c_int {
    // SAFETY: DPDK passes our context's device.
    let n = unsafe { nic(device) };
    if n.rules
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .any(|&(_, s, _)| s == sess as usize)
    {
        n.stale_rules.fetch_add(1, Ordering::Relaxed);
    }
    n.sas
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .retain(|s| s.session != sess as usize);
    0
}

unsafe extern "C" fn session_get_size(_device: *mut c_void) -> c_uint {
    // The SA table is the NIC's own: no private data in the session.
    0
}

unsafe extern "C" fn set_pkt_metadata(
    _device: *mut c_void,
    sess: *mut sys::rte_security_session,
    mb: *mut sys::rte_mbuf,
    _params: *mut c_void,
) -> c_int {
    // SAFETY: a live mbuf rte_ipsec is preparing; the field is registered (NicDouble::new).
    unsafe { *sys::rte_security_dynfield(mb) = sess as u64 };
    0
}

unsafe extern "C" fn capabilities_get(device: *mut c_void) -> *const sys::rte_security_capability {
    // SAFETY: DPDK passes our context's device.
    unsafe { nic(device) }.caps.as_ptr()
}

impl<P: Port<Buf = Mbuf>> Port for NicDouble<P> {
    type Buf = Mbuf;

    fn id(&self) -> u16 {
        self.inner.id()
    }
    fn inline_crypto(&self) -> Option<NonNull<c_void>> {
        Some(self.ctx.cast())
    }
    fn sctp_checksum_offload(&self) -> ChecksumOffload {
        self.inner.sctp_checksum_offload()
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn nb_rx_queues(&self) -> u16 {
        self.inner.nb_rx_queues()
    }
    fn nb_tx_queues(&self) -> u16 {
        self.inner.nb_tx_queues()
    }
    fn mac(&self) -> [u8; 6] {
        self.inner.mac()
    }
    fn rx_burst(&self, queue: u16, out: &mut Vec<Mbuf>, max: usize) -> usize {
        let start = out.len();
        let n = self.inner.rx_burst(queue, out, max);
        for f in &mut out[start..] {
            self.open(f);
        }
        n
    }
    fn tx_held(&self, queue: u16) -> usize {
        self.inner.tx_held(queue)
    }
    fn discard_held(&self, queue: u16) -> usize {
        self.inner.discard_held(queue)
    }
    fn tx_device_queue(&self, queue: u16) -> u16 {
        self.inner.tx_device_queue(queue)
    }
    fn tx_burst(&self, queue: u16, pkts: &mut Vec<Mbuf>) -> usize {
        // The NIC encrypts a frame as the ring takes it, one at a time here: a frame the ring
        // has no room for stays with the caller as it was, plaintext and marked, as one
        // waiting for a real NIC's DMA would.
        let mut taken = 0;
        while let Some(f) = pkts.first() {
            // SAFETY: a live mbuf we own.
            let marked = unsafe { (*f.as_non_null().as_ptr()).ol_flags } & TX_SEC_OFFLOAD != 0;
            let mut one = if !marked {
                vec![pkts.remove(0)]
            } else if let Some(sealed) = self.seal(f) {
                vec![sealed]
            } else {
                // Dropped: no session of this NIC's names it.
                pkts.remove(0);
                taken += 1;
                continue;
            };
            if self.inner.tx_burst(queue, &mut one) == 0 {
                if !marked {
                    pkts.insert(0, one.remove(0));
                }
                break;
            }
            if marked {
                pkts.remove(0);
                self.nic().sealed.fetch_add(1, Ordering::Relaxed);
            }
            taken += 1;
        }
        taken
    }
    fn alloc_bulk(&self, out: &mut Vec<Mbuf>, n: usize, len: usize) -> bool {
        self.inner.alloc_bulk(out, n, len)
    }
    fn attach_region(&self, region: &Region, offset: u64, len: usize) -> Option<Mbuf> {
        self.inner.attach_region(region, offset, len)
    }
    fn attach_region_in(
        &self,
        buf: Mbuf,
        region: &Region,
        offset: u64,
        len: usize,
    ) -> Result<Mbuf, Mbuf> {
        self.inner.attach_region_in(buf, region, offset, len)
    }
    fn max_tx_segments(&self) -> usize {
        self.inner.max_tx_segments()
    }
    fn steer_sctp(&self, flow: &SctpFlow, queue: u16) -> Result<FlowRule, String> {
        self.inner.steer_sctp(flow, queue)
    }
    fn unsteer_sctp(&self, rule: FlowRule) -> Result<(), String> {
        self.inner.unsteer_sctp(rule)
    }
    fn esp_ingress_rule(
        &self,
        esp: &EspIngress,
        session: NonNull<c_void>,
    ) -> Result<FlowRule, String> {
        let n = self.nic();
        if !n.wants_rules.load(Ordering::Relaxed) {
            return Err("the stand-in NIC takes no flow rules".into());
        }
        let sess = session.as_ptr() as usize;
        // As ixgbe: a rule for an inbound session of this context, matched by destination.
        let inbound = n
            .sas
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .any(|s| s.session == sess && !s.egress && s.spi == esp.spi);
        if !inbound {
            return Err("only authenticated decryption is supported".into());
        }
        let id = n.next_rule.fetch_add(1, Ordering::Relaxed);
        n.rules
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((id, sess, esp.local));
        Ok(FlowRule::new(id))
    }
    fn remove_esp_ingress_rule(&self, rule: FlowRule) -> Result<(), String> {
        let mut rules = self
            .nic()
            .rules
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match rules.iter().position(|r| r.0 == rule.id()) {
            Some(i) => {
                rules.swap_remove(i);
                Ok(())
            }
            None => Err("no such rule".into()),
        }
    }
    fn free_bulk(&self, bufs: &mut Vec<Mbuf>) {
        self.inner.free_bulk(bufs)
    }
    fn rx_waiter(&self, queues: &[u16]) -> Option<Arc<dyn RxWaiter>> {
        self.inner.rx_waiter(queues)
    }
    fn link(&self) -> LinkStatus {
        self.inner.link()
    }
    fn stats(&self) -> PortStats {
        self.inner.stats()
    }
    fn xstats(&self) -> Vec<(String, u64)> {
        let mut v = self.inner.xstats();
        let c = self.counts();
        v.extend([
            ("nic_double_sealed".into(), c.sealed),
            ("nic_double_unknown_session".into(), c.unknown_session),
            ("nic_double_opened".into(), c.opened),
            ("nic_double_failed".into(), c.failed),
            ("nic_double_passed".into(), c.passed),
        ]);
        v
    }
    fn reset_stats(&self) {
        self.inner.reset_stats()
    }
}
