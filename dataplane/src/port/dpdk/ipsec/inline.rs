//! Inline crypto (`RTE_SECURITY_ACTION_TYPE_INLINE_CRYPTO`): the port's NIC encrypts an ESP
//! packet as it sends it and decrypts one as it receives it, where the port offers
//! `rte_security` (ipsec-secgw's `inline-crypto-offload`). rte_ipsec still does the protocol:
//! the ESP header, sequence numbers, padding and trailer outbound; the NIC's verdict, the
//! anti-replay window and the trailer's removal inbound (DPDK 22.11, `lib/ipsec`).
//!
//! What the NIC and rte_ipsec leave to us, done here:
//! - outbound, rte_ipsec writes the trailer into the frame; the 22.11 drivers with inline
//!   crypto (ixgbe, txgbe, ngbe) read the trailer's length from a single segment only (a
//!   chain's is taken as 0: a broken packet on the wire), so a zero-copy frame is copied into
//!   one buffer of ours first, counted in `copied`, and its region is never written;
//! - the drivers take the salt from the 4 bytes behind the AEAD key (ipsec-secgw's layout),
//!   so the NIC's transform carries key and salt together;
//! - inbound, the NIC decrypts what it holds an SA for and marks it (`RX_SEC_OFFLOAD`, and
//!   `RX_SEC_OFFLOAD_FAILED` when the ICV did not verify); rte_ipsec checks the mark, not its
//!   absence. What the NIC left alone (a packet it holds no SA for, a datagram reassembled
//!   from fragments, RFC 4303 §3.4.1) is opened by the SA's CPU crypto session instead, one
//!   sequence number space, so nothing is lost to what the NIC did not take;
//! - a packet that must leave as IPv6 fragments (RFC 4301 §7.3) is sealed by CPU crypto: a
//!   NIC encrypts whole packets, and fragments of one it has not encrypted yet would carry
//!   plaintext;
//! - only what the NIC's capabilities name is offloaded: AES-GCM (the AEAD inline NICs do),
//!   the SA's mode and direction, no ESN (in software: rte_ipsec infers a packet's high half
//!   per run, and the NIC's and the software's packets are two runs), and no NIC that writes
//!   the trailer itself (`RTE_SECURITY_TX_HW_TRAILER_OFFLOAD`), whose packets rte_ipsec would
//!   trail twice;
//! - a session is destroyed only once no frame marked for it can still reach the NIC, on the
//!   control thread ([`crate::port::dpdk::IpsecPort`]'s retiring SAs), and before the device
//!   closes (a NIC that frees its context at close).
//!
//! No NIC here has inline crypto, so this runs against [`super::super::nic_double`], a port
//! that does what such a NIC does with an AES-GCM of its own.

use std::any::Any;
use std::ffi::{c_void, CString};
use std::net::IpAddr;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use dpdk_sys as sys;

use super::{EspDrop, EspSa, Mbuf, Mempool, Session, ETH};
use crate::ipsec::{Direction, Mode, Offload, SaConfig};
use crate::port::{EspIngress, FlowRule, PacketBuf, Port};

/// The port's [`Port::esp_ingress_rule`] and [`Port::remove_esp_ingress_rule`].
type AddRule = Box<dyn Fn(&EspIngress, NonNull<c_void>) -> Result<FlowRule, String> + Send + Sync>;
type RemoveRule = Box<dyn Fn(FlowRule) -> Result<(), String> + Send + Sync>;

/// rte_mbuf_core.h: the NIC is to encrypt this packet as it sends it.
const TX_SEC_OFFLOAD: u64 = 1 << 43;
/// rte_security.h: a NIC that writes the ESP trailer itself.
const TX_HW_TRAILER_OFFLOAD: u32 = 0x2;
const RX_HW_TRAILER_OFFLOAD: u32 = 0x1_0000;
/// Sessions a port's context holds at once: as many as a crypto device's.
const SESSIONS: u32 = 1023;

/// A port's inline crypto: its `rte_security` context and a pool for its sessions.
pub struct InlineDev {
    ctx: NonNull<sys::rte_security_ctx>,
    sessions: NonNull<sys::rte_mempool>,
    name: String,
    port: u16,
    /// The SPI and a fingerprint of the key of each inbound session alive on the NIC: the
    /// NIC's mark says one of its sessions verified a packet, and an SA takes it by SPI, so no
    /// two with one SPI and different keys live at once (an SA being retired and its
    /// successor), or a packet verified under the old key would pass as the new SA's (RFC 4303
    /// §3.4.4); the same SA made again for the other family shares its key and may. Also the
    /// lock under which sessions are created and destroyed: the context's session count is
    /// plain memory.
    ingress: Mutex<Vec<(u32, [u8; 32])>>,
    /// The port's rules that hand an inbound SA's packets to its session (ixgbe and txgbe
    /// install an inbound SA in the NIC only through one).
    add_rule: AddRule,
    remove_rule: RemoveRule,
    /// A refused rule removal was reported (once a port: ixgbe and txgbe refuse every one).
    removal_refused: std::sync::atomic::AtomicBool,
    /// What owns the context (the port): kept alive while an SA holds a session on it. (A
    /// device that frees its context when closed is closed only after every session was
    /// released: [`crate::port::dpdk::IpsecPort::release_inline`].)
    _owner: Arc<dyn Any + Send + Sync>,
}

// SAFETY: the context is the port's, usable from any thread; sessions are created and
// destroyed under `ingress`'s lock, and the data cores only read them through rte_ipsec.
unsafe impl Send for InlineDev {}
// SAFETY: as above.
unsafe impl Sync for InlineDev {}

impl std::fmt::Debug for InlineDev {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InlineDev")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl InlineDev {
    /// The inline crypto of a port whose `rte_security` context is `ctx`.
    ///
    /// # Safety
    /// `ctx` is a live `rte_security_ctx` that stays valid while `owner` lives.
    pub unsafe fn new(
        ctx: NonNull<c_void>,
        name: &str,
        port: u16,
        owner: Arc<dyn Any + Send + Sync>,
        (add_rule, remove_rule): (AddRule, RemoveRule),
    ) -> Result<Arc<InlineDev>, String> {
        static POOLS: AtomicU32 = AtomicU32::new(0);
        let ctx = ctx.cast::<sys::rte_security_ctx>();
        // SAFETY: a live context (the caller's promise).
        let size = unsafe { sys::rte_security_session_get_size(ctx.as_ptr()) };
        if size == 0 {
            return Err(format!(
                "{name}: its rte_security context gives no session size"
            ));
        }
        let pool_name = CString::new(format!(
            "inl_sess_{}",
            POOLS.fetch_add(1, Ordering::Relaxed)
        ))
        .map_err(|_| "pool name".to_string())?;
        // SAFETY: a valid name and sizes; no constructors.
        let pool = unsafe {
            sys::rte_mempool_create(
                pool_name.as_ptr(),
                SESSIONS,
                size,
                0,
                0,
                None,
                std::ptr::null_mut(),
                None,
                std::ptr::null_mut(),
                sys::SOCKET_ID_ANY,
                0,
            )
        };
        let sessions = NonNull::new(pool)
            .ok_or_else(|| format!("{name}: no memory for inline crypto sessions"))?;
        Ok(Arc::new(InlineDev {
            ctx,
            sessions,
            name: name.to_owned(),
            port,
            ingress: Mutex::new(Vec::new()),
            add_rule,
            remove_rule,
            removal_refused: std::sync::atomic::AtomicBool::new(false),
            _owner: owner,
        }))
    }

    /// The inline crypto of `port`, where its device has it ([`Port::inline_crypto`]).
    pub fn of_port<P: Port + 'static>(port: &Arc<P>) -> Result<Option<Arc<InlineDev>>, String> {
        let Some(ctx) = port.inline_crypto() else {
            return Ok(None);
        };
        let owner: Arc<dyn Any + Send + Sync> = port.clone();
        let (adds, removes) = (Arc::clone(port), Arc::clone(port));
        let rules: (AddRule, RemoveRule) = (
            Box::new(move |esp, session| adds.esp_ingress_rule(esp, session)),
            Box::new(move |rule| removes.remove_esp_ingress_rule(rule)),
        );
        // SAFETY: Port::inline_crypto gives the port's context, live while the port is, which
        // `owner` keeps.
        unsafe { InlineDev::new(ctx, port.name(), port.id(), owner, rules) }.map(Some)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The capability flags (`ol_flags`) under which the NIC does `config` inline, or why it
    /// does not: an inline-crypto IPsec capability of ESP in the SA's mode and direction,
    /// with ESN where the SA has it, AES-GCM of the SA's key length with a 16-byte ICV, and
    /// no trailer written by the NIC.
    pub fn covers(&self, config: &SaConfig) -> Result<u32, String> {
        if let Offload::Inline { port: Some(p) } = config.offload {
            if p != self.port {
                return Err(format!("port_id {p} is not this port ({})", self.port));
            }
        }
        // rte_ipsec infers an ESN packet's high half from the window as it processes a run;
        // the NIC's packets and the software's would be two runs out of sequence order (RFC
        // 4303 Appendix A2: a late one taken 2^32 ahead). ESN SAs stay in software.
        if config.esn {
            return Err("ddpdk does extended sequence numbers in software only".into());
        }
        if !config.algorithm.is_aead() {
            return Err(format!(
                "inline crypto does AES-GCM only, not {:?}",
                config.algorithm
            ));
        }
        let mode = match config.mode {
            Mode::Transport => sys::RTE_SECURITY_IPSEC_SA_MODE_TRANSPORT,
            Mode::Tunnel { .. } => sys::RTE_SECURITY_IPSEC_SA_MODE_TUNNEL,
        };
        let direction = match config.direction {
            Direction::In => sys::RTE_SECURITY_IPSEC_SA_DIR_INGRESS,
            Direction::Out => sys::RTE_SECURITY_IPSEC_SA_DIR_EGRESS,
        };
        // SAFETY: a live context; the driver's array ends with an entry of action NONE.
        let caps = unsafe { sys::rte_security_capabilities_get(self.ctx.as_ptr()) };
        let mut why = format!(
            "{} offers no inline ESP of this mode and direction",
            self.name
        );
        let mut i = 0;
        loop {
            if caps.is_null() {
                return Err(why);
            }
            // SAFETY: within the array, which its NONE entry ends.
            let c = unsafe { &*caps.add(i) };
            i += 1;
            if c.action == sys::RTE_SECURITY_ACTION_TYPE_NONE {
                return Err(why);
            }
            if c.action != sys::RTE_SECURITY_ACTION_TYPE_INLINE_CRYPTO
                || c.protocol != sys::RTE_SECURITY_PROTOCOL_IPSEC
            {
                continue;
            }
            // SAFETY: an IPsec capability's union holds `ipsec`.
            let ipsec = unsafe { c.__bindgen_anon_1.ipsec };
            if ipsec.proto != sys::RTE_SECURITY_IPSEC_SA_PROTO_ESP
                || ipsec.mode != mode
                || ipsec.direction != direction
            {
                continue;
            }
            if c.ol_flags & (TX_HW_TRAILER_OFFLOAD | RX_HW_TRAILER_OFFLOAD) != 0 {
                why = format!(
                    "{} writes the ESP trailer itself, which ddpdk does not drive",
                    self.name
                );
                continue;
            }
            if !gcm_in(c.crypto_capabilities, config.key.len()) {
                why = format!(
                    "{} does no AES-GCM with a {}-byte key inline",
                    self.name,
                    config.key.len()
                );
                continue;
            }
            return Ok(c.ol_flags);
        }
    }

    /// An inline session for the SA whose IPsec and crypto transforms `conf` carries.
    fn create(
        &self,
        conf: &mut sys::rte_security_session_conf,
        print: [u8; 32],
    ) -> Result<NonNull<sys::rte_security_session>, String> {
        let mut ingress = self
            .ingress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // SAFETY: an IPsec conf's union holds `ipsec`.
        let x = unsafe { conf.__bindgen_anon_1.ipsec };
        let inbound = x.direction == sys::RTE_SECURITY_IPSEC_SA_DIR_INGRESS;
        if inbound && ingress.iter().any(|(s, p)| *s == x.spi && *p != print) {
            return Err(format!(
                "the NIC still holds an inbound SA {} being retired (a second would let a \
                 packet verified under its key pass as the new SA's)",
                x.spi
            ));
        }
        // SAFETY: a live context, a fully initialised conf whose pointers are valid for the
        // call, and our pool sized by the context; under the lock.
        let s = unsafe {
            sys::rte_security_session_create(self.ctx.as_ptr(), conf, self.sessions.as_ptr())
        };
        let s = NonNull::new(s.cast())
            .ok_or_else(|| format!("{}: the NIC refused the inline session", self.name))?;
        if inbound {
            ingress.push((x.spi, print));
        }
        Ok(s)
    }

    /// The inbound sessions' list, whose lock is also the one under which the NIC's SA tables
    /// change: sessions created and destroyed, rules made and removed (a driver edits the
    /// same tables and registers for both, from whichever thread asks).
    fn tables(&self) -> std::sync::MutexGuard<'_, Vec<(u32, [u8; 32])>> {
        self.ingress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the NIC let the session go.
    fn destroy(
        &self,
        ses: NonNull<sys::rte_security_session>,
        ingress: Option<(u32, [u8; 32])>,
    ) -> bool {
        self.destroy_locked(&mut self.tables(), ses, ingress)
    }

    /// [`InlineDev::destroy`] under the tables' lock, held by the caller.
    fn destroy_locked(
        &self,
        ingress: &mut Vec<(u32, [u8; 32])>,
        ses: NonNull<sys::rte_security_session>,
        ingress_spi: Option<(u32, [u8; 32])>,
    ) -> bool {
        // SAFETY: a session of this context that no packet uses any more; under the lock.
        let rc =
            unsafe { sys::rte_security_session_destroy(self.ctx.as_ptr(), ses.as_ptr().cast()) };
        if rc != 0 {
            // The driver kept it (DPDK 22.11 returns it to the pool only on success): its
            // SPI stays taken, as the NIC may still verify under it.
            crate::errln!(
                "ddpdk: warning: {}: the NIC did not release an inline session ({rc})",
                self.name
            );
            return false;
        }
        if let Some(held) = ingress_spi {
            if let Some(i) = ingress.iter().position(|s| *s == held) {
                ingress.swap_remove(i);
            }
        }
        true
    }
}

impl Drop for InlineDev {
    fn drop(&mut self) {
        // SAFETY: every SA holding a session of this pool holds an Arc of this value, so none
        // is left.
        unsafe { sys::rte_mempool_free(self.sessions.as_ptr()) };
    }
}

/// Whether a crypto capability list (ended by an entry of op UNDEFINED) has AES-GCM with a
/// key of `key_len` bytes and a 16-byte ICV.
fn gcm_in(list: *const sys::rte_cryptodev_capabilities, key_len: usize) -> bool {
    let in_range = |r: &sys::rte_crypto_param_range, v: usize| {
        let (min, max) = (usize::from(r.min), usize::from(r.max));
        let inc = usize::from(r.increment);
        v >= min && v <= max && (inc == 0 && v == min || inc != 0 && (v - min).is_multiple_of(inc))
    };
    let mut i = 0;
    loop {
        if list.is_null() {
            return false;
        }
        // SAFETY: within the driver's list, which its UNDEFINED entry ends.
        let c = unsafe { &*list.add(i) };
        i += 1;
        if c.op == sys::RTE_CRYPTO_OP_TYPE_UNDEFINED {
            return false;
        }
        if c.op != sys::RTE_CRYPTO_OP_TYPE_SYMMETRIC {
            continue;
        }
        // SAFETY: a symmetric capability's union holds `sym`.
        let sym = unsafe { c.__bindgen_anon_1.sym };
        if sym.xform_type != sys::RTE_CRYPTO_SYM_XFORM_AEAD {
            continue;
        }
        // SAFETY: an AEAD capability's union holds `aead`.
        let aead = unsafe { sym.__bindgen_anon_1.aead };
        if aead.algo == sys::RTE_CRYPTO_AEAD_AES_GCM
            && in_range(&aead.key_size, key_len)
            && in_range(&aead.digest_size, 16)
        {
            return true;
        }
    }
}

/// An SA's session on a port's inline crypto: a second rte_ipsec session on the SA (so one
/// sequence number space and one replay window with its CPU crypto session).
pub(super) struct InlineSession {
    pub(super) session: Box<Session>,
    ses: NonNull<sys::rte_security_session>,
    pub(super) dev: Arc<InlineDev>,
    /// The SPI and key fingerprint of an inbound session.
    ingress_spi: Option<(u32, [u8; 32])>,
    /// Inbound: the port's rules handing the SA's packets to this session, and the addresses
    /// they match ([`InlineSession::install_rules`]); removed before the session goes.
    rules: Vec<(IpAddr, FlowRule)>,
    /// The AEAD key followed by the salt, where the drivers of 22.11 (ixgbe, txgbe, ngbe)
    /// read it: they take the salt from the 4 bytes after `key.length`, as ipsec-secgw lays
    /// it out, and keep the pointer. Alive as long as the session.
    _key: Box<[u8]>,
}

impl InlineSession {
    /// The inline session of `sa` on `dev`; `conf` names the SA's IPsec and crypto
    /// transforms (its action type and protocol are set here).
    ///
    /// # Safety
    /// `sa` is an initialised rte_ipsec SA that outlives the session; `conf`'s pointers are
    /// valid for the call.
    pub(super) unsafe fn new(
        dev: &Arc<InlineDev>,
        sa: *mut sys::rte_ipsec_sa,
        conf: &mut sys::rte_security_session_conf,
        ol_flags: u32,
        config: &SaConfig,
    ) -> Result<InlineSession, String> {
        conf.action_type = sys::RTE_SECURITY_ACTION_TYPE_INLINE_CRYPTO;
        conf.protocol = sys::RTE_SECURITY_PROTOCOL_IPSEC;
        let key: Box<[u8]> = [&config.key[..], &config.salt.to_be_bytes()[..]]
            .concat()
            .into_boxed_slice();
        // The NIC's own transform: an AEAD alone (covers()), its key with the salt behind.
        let theirs = conf.crypto_xform;
        // SAFETY: conf.crypto_xform points at the SA's transform, alive for the call.
        let mut xf = unsafe { *theirs };
        xf.next = std::ptr::null_mut();
        // An AEAD transform's union holds `aead` (covers() admits AES-GCM only).
        xf.__bindgen_anon_1.aead.key.data = key.as_ptr();
        conf.crypto_xform = &mut xf;
        // Inbound, the window is rte_ipsec's and ours, not the NIC's.
        conf.__bindgen_anon_1.ipsec.replay_win_sz = 0;
        let print: [u8; 32] = {
            use sha2::Digest;
            sha2::Sha256::digest(&key).into()
        };
        let ingress_spi = (config.direction == Direction::In).then_some((config.spi, print));
        let ses = dev.create(conf, print);
        // The caller's conf does not keep a pointer to this frame's transform.
        conf.crypto_xform = theirs;
        let ses = ses?;
        let mut session = Box::new(Session(sys::rte_ipsec_session::default()));
        session.0.sa = sa;
        session.0.type_ = sys::RTE_SECURITY_ACTION_TYPE_INLINE_CRYPTO;
        session.0.__bindgen_anon_1.security = sys::rte_ipsec_session__bindgen_ty_1__bindgen_ty_2 {
            ses: ses.as_ptr(),
            ctx: dev.ctx.as_ptr(),
            ol_flags,
        };
        // SAFETY: an initialised SA, a live session on a live context, a boxed session that
        // keeps its address.
        let rc = unsafe { sys::rte_ipsec_session_prepare(&mut session.0) };
        if rc < 0 {
            if !dev.destroy(ses, ingress_spi) {
                std::mem::forget(key);
            }
            return Err(format!("rte_ipsec inline session: errno {}", -rc));
        }
        Ok(InlineSession {
            session,
            ses,
            dev: Arc::clone(dev),
            ingress_spi,
            rules: Vec::new(),
            _key: key,
        })
    }

    /// Inbound: has the port hand the SA's packets to this session, one rule for each of
    /// `targets` not ruled yet (what the packets arrive as: to one of our addresses, from the
    /// tunnel's far end for a tunnel's SA), so that a NIC that installs inbound SAs only from
    /// a flow rule (ixgbe, txgbe) decrypts them. A refused rule costs nothing but the offload:
    /// what the NIC leaves undecrypted is opened in software. Returns why each refused rule
    /// was refused.
    fn install_rules(&mut self, targets: &[EspIngress]) -> Vec<String> {
        let mut refused = Vec::new();
        if self.ingress_spi.is_none() {
            return refused;
        }
        let _tables = self.dev.tables();
        for t in targets {
            if self.rules.iter().any(|(at, _)| *at == t.local) {
                continue;
            }
            match (self.dev.add_rule)(t, self.ses.cast()) {
                Ok(rule) => self.rules.push((t.local, rule)),
                Err(e) => refused.push(format!("{}: {e}", t.local)),
            }
        }
        refused
    }
}

impl Drop for InlineSession {
    fn drop(&mut self) {
        let mut tables = self.dev.tables();
        // The rules name the session: they go first (a NIC that kept a rule to a destroyed
        // session would decrypt under freed state). A refusal is reported once a port: ixgbe
        // and txgbe (22.11) refuse to destroy any ESP rule, their flow code knowing no such
        // filter (the SA table entry their rule made goes with the session below, the rule's
        // memory with the port), and another driver's refusal is worth one line.
        for (at, rule) in self.rules.drain(..) {
            if let Err(e) = (self.dev.remove_rule)(rule) {
                if !self.dev.removal_refused.swap(true, Ordering::Relaxed) {
                    crate::errln!(
                        "ddpdk: warning: {}: the device kept the ESP rule to {at} ({e}); \
                         ixgbe and txgbe keep every one, their SA entry going with the \
                         session (said once)",
                        self.dev.name
                    );
                }
            }
        }
        if !self
            .dev
            .destroy_locked(&mut tables, self.ses, self.ingress_spi)
        {
            // The driver keeps the session, and with it the pointer to the key: left to it.
            std::mem::forget(std::mem::take(&mut self._key));
        }
    }
}

impl EspSa {
    /// Inbound, on the NIC: has the port hand the SA's packets to its NIC session
    /// ([`Port::esp_ingress_rule`]), as they arrive: a tunnel's from its far end to its near
    /// one, a transport-mode SA's to the first of `local` (this host's addresses) of its
    /// family.
    /// Rules already in place stay; nothing for an outbound or software SA. Returns why each
    /// refused rule was refused (the packets it would have matched are opened in software).
    pub fn install_ingress_rules(&self, local: &[IpAddr]) -> Vec<String> {
        if self.config.direction != Direction::In || self.inline.is_none() {
            return Vec::new();
        }
        let spi = self.config.spi;
        let targets: Vec<EspIngress> = match self.config.mode {
            Mode::Tunnel { src, dst } => vec![EspIngress {
                local: dst,
                peer: Some(src),
                spi,
            }],
            // One rule a session: ixgbe keeps one SA table entry a session, the last rule's,
            // so a second rule's entry would outlive the session. The host's first address of
            // the family is where its associations run (`--ip`'s first).
            Mode::Transport => local
                .iter()
                .find(|a| a.is_ipv6() == self.ipv6)
                .map(|&a| EspIngress {
                    local: a,
                    peer: None,
                    spi,
                })
                .into_iter()
                .collect(),
        };
        let mut engine = self.engine.lock().unwrap_or_else(|p| p.into_inner());
        match engine.inline.as_mut() {
            Some(s) => s.install_rules(&targets),
            None => Vec::new(),
        }
    }

    /// Whether this outbound SA seals `frames` inline: it has an inline session, and none of
    /// them must leave as fragments of at most `mtu` IP bytes (RFC 4301 §7.3), which only a
    /// packet sealed in software can.
    pub(super) fn seals_inline(&self, frames: &[Mbuf], mtu: Option<usize>) -> bool {
        self.inline.is_some()
            && mtu.is_none_or(|mtu| {
                // The sealed IP packet: the frame's, less its Ethernet header, plus ESP's.
                let grown = self.config.overhead();
                frames.iter().all(|f| f.frame_len() + grown <= ETH + mtu)
            })
    }

    /// Frames `frames` as ESP for the port's NIC to encrypt as it sends them.
    pub(super) fn seal_inline(
        &self,
        frames: Vec<Mbuf>,
        pool: &Mempool,
        now: std::time::Instant,
    ) -> Vec<Result<Mbuf, EspDrop>> {
        // One single-segment buffer of ours a frame, with room for the trailer: the 22.11
        // drivers with inline crypto (ixgbe, txgbe, ngbe) find the trailer's length in a
        // single segment only (a chain's is taken as 0), so a zero-copy frame is copied,
        // counted in `copied`, as under AES-CBC.
        let (mut results, ready, mut ptrs) = super::readied(frames, |frame, pending| {
            self.seal_ready(frame, pool, now, pending)
        });
        // Bursts are at most a port's (512), far below u16::MAX.
        let n = ptrs.len() as u16;
        let (good, errno) = if n == 0 {
            (Vec::new(), 0)
        } else {
            let engine = self.engine.lock().unwrap_or_else(|p| p.into_inner());
            let Some(inline) = engine.inline.as_ref() else {
                // Released (the port is closing): nothing leaves unsealed.
                drop(engine);
                for r in &mut results {
                    if r.is_ok() {
                        *r = Err(EspDrop::Expired);
                    }
                    if let Err(why) = r {
                        self.count(*why);
                    }
                }
                return results;
            };
            // SAFETY: frames whose headers are in an own first segment and whose last
            // segment is ours with room for the trailer (seal_ready), l2/l3 lengths set;
            // the session prepared on this SA; the SA's state is ours under the lock.
            // rte_ipsec moves the packets it could not take behind the ones it took, marks
            // the others for the NIC and sets their metadata where the NIC asks for it.
            let k = unsafe { sys::rte_ipsec_pkt_process(&inline.session.0, ptrs.as_mut_ptr(), n) };
            let errno = if k < n { dpdk_sys::rte_errno() } else { 0 };
            self.stats
                .sequence
                .fetch_add(u64::from(k), Ordering::Relaxed);
            (ptrs[..usize::from(k)].to_vec(), errno)
        };
        for (i, eth, before, df) in ready {
            let Ok(m) = std::mem::replace(&mut results[i], Err(EspDrop::Malformed)) else {
                continue;
            };
            let p = m.as_non_null().as_ptr();
            results[i] = if good.contains(&p) {
                self.seal_done(m, &eth, before, df).and_then(|mut m| {
                    // Where the NIC finds ESP: after the (outer) IP header.
                    let outer_v6 = match self.config.mode {
                        Mode::Transport => self.ipv6,
                        Mode::Tunnel { dst, .. } => dst.is_ipv6(),
                    };
                    let l3 = super::ip_header_len(m.data(), outer_v6).ok_or(EspDrop::Malformed)?;
                    super::set_lens(&mut m, ETH, l3);
                    Ok(m)
                })
            } else {
                Err(super::refused(errno))
            };
        }
        // Every frame framed here is the NIC's to encrypt: one pass over the burst, one add.
        let mut framed = 0;
        for r in &results {
            match r {
                Ok(_) => framed += 1,
                Err(why) => self.count(*why),
            }
        }
        if framed > 0 {
            self.stats.nic.fetch_add(framed, Ordering::Relaxed);
        }
        results
    }
}

/// Whether `m` is framed for the NIC to encrypt (`TX_SEC_OFFLOAD`).
pub(crate) fn marked_for_nic(m: &Mbuf) -> bool {
    // SAFETY: a live mbuf we own; a plain field.
    unsafe { m.as_non_null().as_ref().ol_flags & TX_SEC_OFFLOAD != 0 }
}

impl EspSa {
    /// Whether `m` is a frame this SA framed for the NIC to encrypt: marked, its ESP (after
    /// the IP header its lengths name) of this SA's SPI.
    pub(crate) fn marks(&self, m: &Mbuf) -> bool {
        if self.config.direction != Direction::Out || !marked_for_nic(m) {
            return false;
        }
        // SAFETY: a live mbuf we own; a plain field.
        let t = unsafe { m.as_non_null().as_ref().__bindgen_anon_3.tx_offload };
        let at = (t & 0x7f) as usize + ((t >> 7) & 0x1ff) as usize;
        m.data().get(at..at + 4) == Some(&self.config.spi.to_be_bytes()[..])
    }
}
