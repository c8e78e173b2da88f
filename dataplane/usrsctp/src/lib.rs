//! The system usrsctp as an in-process reference SCTP peer.
//!
//! usrsctp runs in AF_CONN mode: it neither opens sockets nor starts threads
//! (`usrsctp_init_nothreads`). Every SCTP packet it emits (common header + chunks, no IP header)
//! lands in a per-[`Endpoint`] queue that [`Endpoint::take_output`] drains, packets from the peer
//! go in with [`Endpoint::input`], and its timers only run when [`Stack::advance`] says virtual
//! time has passed. usrsctp computes a real CRC32c on every packet it emits and verifies it on
//! every packet it receives (checksum offload stays off).
//!
//! usrsctp is one process-global stack, so all use goes through a [`Stack`] guard: taking it
//! serialises tests running on parallel threads and resets the sysctls the setters change.
//!
//! ```
//! use ddpdk_usrsctp::{Notification, Received, Stack};
//! let mut stack = Stack::lock();
//! let mut client = stack.endpoint(5001)?;
//! let mut server = stack.endpoint(5002)?;
//! server.listen()?;
//! client.connect(5002)?;
//! for _ in 0..10 {
//!     for p in client.take_output() { server.input(&p); }
//!     for p in server.take_output() { client.input(&p); }
//! }
//! assert!(matches!(client.recv(), Some(Received::Notification(Notification::CommUp { .. }))));
//! # Ok::<(), std::io::Error>(())
//! ```

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::io;
use std::mem::{offset_of, size_of};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

#[allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code,
    missing_debug_implementations,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]
mod sys {
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}

pub mod raw;

/// Holds the sysctl defaults read right after `usrsctp_init_nothreads`; `None` until the first
/// [`Stack::lock`] initialises usrsctp.
static STACK: Mutex<Option<Vec<u32>>> = Mutex::new(None);

/// Packets usrsctp emitted, by AF_CONN address. A lock of its own, never held across a call
/// into usrsctp: `conn_output` runs inside `usrsctp_conninput`, `usrsctp_sendv`,
/// `usrsctp_handle_timers`, ... on the calling thread, while that thread holds [`STACK`].
static OUTPUT: Mutex<BTreeMap<usize, Vec<Vec<u8>>>> = Mutex::new(BTreeMap::new());

/// AF_CONN "addresses" are opaque pointers to usrsctp (it compares and hashes them, never
/// dereferences them); ours are unique integers so a stale packet for a dropped endpoint can
/// never reach a new one.
static NEXT_ADDR: AtomicUsize = AtomicUsize::new(1);

/// Receive buffer per `usrsctp_recvv` call; longer messages arrive over several calls.
const RECV_CHUNK: usize = 64 * 1024;

fn lock_output() -> MutexGuard<'static, BTreeMap<usize, Vec<Vec<u8>>>> {
    // A panic elsewhere while holding the queue lock leaves the map itself consistent.
    OUTPUT.lock().unwrap_or_else(PoisonError::into_inner)
}

/// usrsctp's output callback: queue a copy of the packet for the endpoint owning `addr`.
///
/// # Safety
/// Called by usrsctp only, with `buffer` valid for `length` bytes.
unsafe extern "C" fn conn_output(
    addr: *mut c_void,
    buffer: *mut c_void,
    length: usize,
    _tos: u8,
    _set_df: u8,
) -> c_int {
    // SAFETY: usrsctp passes a linearised packet of `length` bytes that lives for this call.
    let packet = unsafe { std::slice::from_raw_parts(buffer.cast::<u8>(), length) };
    // Packets for an address that is gone (an association usrsctp still tears down after its
    // endpoint was dropped) are dropped, as a wire would.
    if let Some(queue) = lock_output().get_mut(&addr.addr()) {
        queue.push(packet.to_vec());
    }
    0
}

type GetFn = unsafe extern "C" fn() -> u32;
type SetFn = unsafe extern "C" fn(u32) -> c_int;
/// A usrsctp sysctl: its getter and setter.
type Sysctl = (GetFn, SetFn);

/// Every sysctl a [`Stack`] setter touches, so [`Stack::lock`] can restore them.
#[rustfmt::skip]
const SYSCTLS: [Sysctl; 18] = [
    (sys::usrsctp_sysctl_get_sctp_rto_initial_default, sys::usrsctp_sysctl_set_sctp_rto_initial_default),
    (sys::usrsctp_sysctl_get_sctp_rto_min_default, sys::usrsctp_sysctl_set_sctp_rto_min_default),
    (sys::usrsctp_sysctl_get_sctp_rto_max_default, sys::usrsctp_sysctl_set_sctp_rto_max_default),
    (sys::usrsctp_sysctl_get_sctp_init_rto_max_default, sys::usrsctp_sysctl_set_sctp_init_rto_max_default),
    (sys::usrsctp_sysctl_get_sctp_delayed_sack_time_default, sys::usrsctp_sysctl_set_sctp_delayed_sack_time_default),
    (sys::usrsctp_sysctl_get_sctp_sack_freq_default, sys::usrsctp_sysctl_set_sctp_sack_freq_default),
    (sys::usrsctp_sysctl_get_sctp_init_rtx_max_default, sys::usrsctp_sysctl_set_sctp_init_rtx_max_default),
    (sys::usrsctp_sysctl_get_sctp_assoc_rtx_max_default, sys::usrsctp_sysctl_set_sctp_assoc_rtx_max_default),
    (sys::usrsctp_sysctl_get_sctp_path_rtx_max_default, sys::usrsctp_sysctl_set_sctp_path_rtx_max_default),
    (sys::usrsctp_sysctl_get_sctp_nr_incoming_streams_default, sys::usrsctp_sysctl_set_sctp_nr_incoming_streams_default),
    (sys::usrsctp_sysctl_get_sctp_nr_outgoing_streams_default, sys::usrsctp_sysctl_set_sctp_nr_outgoing_streams_default),
    (sys::usrsctp_sysctl_get_sctp_ecn_enable, sys::usrsctp_sysctl_set_sctp_ecn_enable),
    (sys::usrsctp_sysctl_get_sctp_pr_enable, sys::usrsctp_sysctl_set_sctp_pr_enable),
    (sys::usrsctp_sysctl_get_sctp_auth_enable, sys::usrsctp_sysctl_set_sctp_auth_enable),
    (sys::usrsctp_sysctl_get_sctp_asconf_enable, sys::usrsctp_sysctl_set_sctp_asconf_enable),
    (sys::usrsctp_sysctl_get_sctp_reconfig_enable, sys::usrsctp_sysctl_set_sctp_reconfig_enable),
    (sys::usrsctp_sysctl_get_sctp_nrsack_enable, sys::usrsctp_sysctl_set_sctp_nrsack_enable),
    (sys::usrsctp_sysctl_get_sctp_pktdrop_enable, sys::usrsctp_sysctl_set_sctp_pktdrop_enable),
];

/// Calls a usrsctp sysctl setter; they fail (EINVAL) only for values outside the sysctl's range.
fn set(setter: SetFn, value: u32) -> io::Result<()> {
    // SAFETY: the setters only range-check and store a global integer.
    if unsafe { setter(value) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Maps usrsctp's `-1 and errno` convention to `io::Result`.
fn check(rc: c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// SCTP protocol extensions usrsctp offers in its INIT/INIT-ACK, chosen when an [`Endpoint`] is
/// created ([`Stack::set_extensions`]). usrsctp's defaults are ECN, PR-SCTP, AUTH, ASCONF and
/// RE-CONFIG on, NR-SACK and PKTDROP off; [`Extensions::NONE`] is the minimal RFC 9260 profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extensions {
    /// ECN capable parameter (RFC 9260 Appendix A).
    pub ecn: bool,
    /// Forward-TSN supported, PR-SCTP (RFC 3758).
    pub partial_reliability: bool,
    /// AUTH chunks (RFC 4895); usrsctp requires it for ASCONF.
    pub auth: bool,
    /// Dynamic address reconfiguration (RFC 5061).
    pub asconf: bool,
    /// Stream reconfiguration (RFC 6525).
    pub reconfig: bool,
    /// Non-renegable SACK (usrsctp-specific).
    pub nr_sack: bool,
    /// PKTDROP (usrsctp-specific).
    pub pktdrop: bool,
}

impl Extensions {
    /// No extension at all: INIT and INIT-ACK carry only the fixed part, the adaptation layer
    /// indication if configured, and (INIT-ACK) the state cookie.
    pub const NONE: Extensions = Extensions {
        ecn: false,
        partial_reliability: false,
        auth: false,
        asconf: false,
        reconfig: false,
        nr_sack: false,
        pktdrop: false,
    };
}

/// Exclusive use of the process-global usrsctp instance.
///
/// usrsctp keeps global state (sysctls, timers, the address list), so only one `Stack` exists
/// at a time: [`Stack::lock`] blocks until the previous guard is dropped. [`Endpoint`]s are not
/// tied to the guard's lifetime, but drop them before the guard so the next user starts clean.
#[derive(Debug)]
pub struct Stack {
    _guard: MutexGuard<'static, Option<Vec<u32>>>,
}

impl Stack {
    /// Takes the global lock, initialising usrsctp the first time (no threads, AF_CONN output
    /// into per-endpoint queues), and resets every sysctl the setters below change to usrsctp's
    /// default, so settings never leak from one test into the next.
    pub fn lock() -> Stack {
        // A test that panicked while holding the lock poisons it; the state it protects is
        // reset below, so carry on.
        let mut guard = STACK.lock().unwrap_or_else(PoisonError::into_inner);
        assert!(
            !raw::initialised(),
            "usrsctp runs on raw IP sockets in this process; AF_CONN mode is not available"
        );
        let defaults = guard.get_or_insert_with(|| {
            // SAFETY: called once per process (guarded by STACK's None state), with a callback
            // of the signature usrsctp expects and no debug printer.
            unsafe { sys::usrsctp_init_nothreads(0, Some(conn_output), None) };
            // SAFETY: the getters read a global integer.
            SYSCTLS.iter().map(|(get, _)| unsafe { get() }).collect()
        });
        for ((_, setter), &value) in SYSCTLS.iter().zip(defaults.iter()) {
            // usrsctp's own defaults are always within range.
            let _ = set(*setter, value);
        }
        Stack { _guard: guard }
    }

    /// Advances usrsctp's timers by `ms` milliseconds of virtual time (`usrsctp_handle_timers`):
    /// retransmissions, delayed SACKs, heartbeats, shutdown guards expire only here. Timers run
    /// on this thread and may emit packets into any endpoint's output queue.
    pub fn advance(&mut self, ms: u32) {
        // SAFETY: usrsctp is initialised (we hold a Stack) and the call has no preconditions.
        unsafe { sys::usrsctp_handle_timers(ms) };
    }

    /// RTO.Initial, RTO.Min and RTO.Max in ms (RFC 9260 §16) for endpoints created afterwards.
    /// RTO.Max also caps the INIT/COOKIE-ECHO backoff (usrsctp's separate `init_rto_max`).
    pub fn set_rto(&mut self, initial_ms: u32, min_ms: u32, max_ms: u32) -> io::Result<()> {
        set(sys::usrsctp_sysctl_set_sctp_rto_initial_default, initial_ms)?;
        set(sys::usrsctp_sysctl_set_sctp_rto_min_default, min_ms)?;
        set(sys::usrsctp_sysctl_set_sctp_rto_max_default, max_ms)?;
        set(sys::usrsctp_sysctl_set_sctp_init_rto_max_default, max_ms)
    }

    /// SACK delay in ms (0: acknowledge at once) and how many packets may go unacknowledged
    /// before a SACK is sent regardless (usrsctp default: 200 ms, every 2nd packet).
    pub fn set_delayed_ack(&mut self, delay_ms: u32, every_n_packets: u32) -> io::Result<()> {
        set(
            sys::usrsctp_sysctl_set_sctp_delayed_sack_time_default,
            delay_ms,
        )?;
        set(
            sys::usrsctp_sysctl_set_sctp_sack_freq_default,
            every_n_packets,
        )
    }

    /// Max.Init.Retransmits, Association.Max.Retrans and Path.Max.Retrans (RFC 9260 §16).
    pub fn set_max_retransmits(&mut self, init: u32, assoc: u32, path: u32) -> io::Result<()> {
        set(sys::usrsctp_sysctl_set_sctp_init_rtx_max_default, init)?;
        set(sys::usrsctp_sysctl_set_sctp_assoc_rtx_max_default, assoc)?;
        set(sys::usrsctp_sysctl_set_sctp_path_rtx_max_default, path)
    }

    /// Outbound streams requested and maximum inbound streams accepted in INIT/INIT-ACK
    /// (usrsctp default: 10 and 2048).
    pub fn set_streams(&mut self, outbound: u16, max_inbound: u16) -> io::Result<()> {
        set(
            sys::usrsctp_sysctl_set_sctp_nr_outgoing_streams_default,
            outbound.into(),
        )?;
        set(
            sys::usrsctp_sysctl_set_sctp_nr_incoming_streams_default,
            max_inbound.into(),
        )
    }

    /// The protocol extensions offered by endpoints created afterwards.
    pub fn set_extensions(&mut self, ext: Extensions) -> io::Result<()> {
        if ext.asconf && !ext.auth {
            // RFC 5061 §4.1: ASCONF chunks must be authenticated.
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "ASCONF needs AUTH",
            ));
        }
        for (setter, on) in [
            (sys::usrsctp_sysctl_set_sctp_ecn_enable as SetFn, ext.ecn),
            (
                sys::usrsctp_sysctl_set_sctp_pr_enable,
                ext.partial_reliability,
            ),
            (sys::usrsctp_sysctl_set_sctp_auth_enable, ext.auth),
            (sys::usrsctp_sysctl_set_sctp_asconf_enable, ext.asconf),
            (sys::usrsctp_sysctl_set_sctp_reconfig_enable, ext.reconfig),
            (sys::usrsctp_sysctl_set_sctp_nrsack_enable, ext.nr_sack),
            (sys::usrsctp_sysctl_set_sctp_pktdrop_enable, ext.pktdrop),
        ] {
            set(setter, on.into())?;
        }
        Ok(())
    }

    /// The extensions endpoints created now would offer.
    pub fn extensions(&self) -> Extensions {
        // SAFETY: the getters read a global integer.
        let get = |g: GetFn| unsafe { g() } != 0;
        Extensions {
            ecn: get(sys::usrsctp_sysctl_get_sctp_ecn_enable),
            partial_reliability: get(sys::usrsctp_sysctl_get_sctp_pr_enable),
            auth: get(sys::usrsctp_sysctl_get_sctp_auth_enable),
            asconf: get(sys::usrsctp_sysctl_get_sctp_asconf_enable),
            reconfig: get(sys::usrsctp_sysctl_get_sctp_reconfig_enable),
            nr_sack: get(sys::usrsctp_sysctl_get_sctp_nrsack_enable),
            pktdrop: get(sys::usrsctp_sysctl_get_sctp_pktdrop_enable),
        }
    }

    /// A new endpoint on SCTP port `local_port` that announces adaptation layer indication 1.
    pub fn endpoint(&mut self, local_port: u16) -> io::Result<Endpoint> {
        self.endpoint_with_adaptation(local_port, Some(1))
    }

    /// A new endpoint on SCTP port `local_port`: a fresh AF_CONN address, and on it a
    /// non-blocking one-to-one socket (SOCK_STREAM) with SCTP_NODELAY, SCTP_RECVRCVINFO and
    /// the ASSOC_CHANGE, ADAPTATION_INDICATION, SHUTDOWN_EVENT, REMOTE_ERROR and
    /// SEND_FAILED_EVENT notifications on. `adaptation` is the Adaptation Layer Indication
    /// (RFC 5061 §4.2.6) put in INIT/INIT-ACK; `None` leaves the parameter out.
    pub fn endpoint_with_adaptation(
        &mut self,
        local_port: u16,
        adaptation: Option<u32>,
    ) -> io::Result<Endpoint> {
        let addr = NEXT_ADDR.fetch_add(1, Ordering::Relaxed);
        // The queue exists before usrsctp knows the address, so no packet is ever missed.
        lock_output().insert(addr, Vec::new());
        // SAFETY: the address is an opaque token to usrsctp; it stays registered until
        // Endpoint::drop deregisters it.
        unsafe { sys::usrsctp_register_address(conn_addr(addr)) };
        // SAFETY: usrsctp is initialised; no callbacks (we poll with usrsctp_recvv).
        let sock = unsafe {
            sys::usrsctp_socket(
                sys::AF_CONN as c_int,
                libc::SOCK_STREAM,
                sys::IPPROTO_SCTP as c_int,
                None,
                None,
                0,
                ptr::null_mut(),
            )
        };
        let ep = Endpoint {
            addr,
            port: local_port,
            sock,
            listening: false,
            accepted: ptr::null_mut(),
            partial: Vec::new(),
            scratch: vec![0; RECV_CHUNK],
        };
        if sock.is_null() {
            return Err(io::Error::last_os_error());
        }
        ep.configure(adaptation)?;
        let sconn = ep.sockaddr(local_port);
        // SAFETY: `sconn` is a valid sockaddr_conn of the length passed; usrsctp copies it.
        check(unsafe {
            sys::usrsctp_bind(
                sock,
                ptr::from_ref(&sconn).cast_mut().cast(),
                size_of::<sys::sockaddr_conn>() as sys::socklen_t,
            )
        })?;
        Ok(ep)
    }
}

impl Endpoint {
    /// Non-blocking, SCTP_NODELAY, SCTP_RECVRCVINFO, the notifications `recv` parses, and the
    /// Adaptation Layer Indication (`None`: left out of INIT/INIT-ACK).
    fn configure(&self, adaptation: Option<u32>) -> io::Result<()> {
        let ep = self;
        // SAFETY: `sock` is a live socket owned by `ep`.
        check(unsafe { sys::usrsctp_set_non_blocking(ep.sock, 1) })?;
        ep.setsockopt(sys::SCTP_NODELAY, &1 as &c_int)?;
        ep.setsockopt(sys::SCTP_RECVRCVINFO, &1 as &c_int)?;
        for kind in [
            sys::SCTP_ASSOC_CHANGE,
            sys::SCTP_ADAPTATION_INDICATION,
            sys::SCTP_SHUTDOWN_EVENT,
            sys::SCTP_REMOTE_ERROR,
            sys::SCTP_SEND_FAILED_EVENT,
        ] {
            let event = sys::sctp_event {
                se_assoc_id: sys::SCTP_FUTURE_ASSOC,
                se_type: kind as u16,
                se_on: 1,
            };
            ep.setsockopt(sys::SCTP_EVENT, &event)?;
        }
        if let Some(ind) = adaptation {
            // Host byte order: usrsctp converts when it writes the parameter.
            let adapt = sys::sctp_setadaptation {
                ssb_adaptation_ind: ind,
            };
            ep.setsockopt(sys::SCTP_ADAPTATION_LAYER, &adapt)?;
        }
        Ok(())
    }
}

/// An AF_CONN address token as the pointer usrsctp wants.
fn conn_addr(addr: usize) -> *mut c_void {
    ptr::without_provenance_mut(addr)
}

/// A message read from an [`Endpoint`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Stream identifier.
    pub stream: u16,
    /// Stream sequence number (meaningless for unordered messages).
    pub ssn: u16,
    /// Payload protocol identifier, host byte order.
    pub ppid: u32,
    /// Whether the DATA chunk(s) had the U bit.
    pub unordered: bool,
    /// TSN of the message (of its last fragment if fragmented), host byte order.
    pub tsn: u32,
    /// User data.
    pub data: Vec<u8>,
}

/// What [`Endpoint::recv`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// User data from the peer.
    Message(Message),
    /// An event of the association.
    Notification(Notification),
}

/// The SCTP notifications an endpoint subscribes to (RFC 6458 §6.1), parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notification {
    /// SCTP_ASSOC_CHANGE / SCTP_COMM_UP: the association is established.
    CommUp {
        /// Inbound streams negotiated.
        inbound_streams: u16,
        /// Outbound streams negotiated.
        outbound_streams: u16,
    },
    /// SCTP_ASSOC_CHANGE / SCTP_COMM_LOST: ABORT received or sent, or retransmissions exhausted.
    CommLost {
        /// `sac_error`: on a received ABORT the code of its first error cause (12 for a
        /// User-Initiated Abort), host byte order; 0 when the abort was local.
        error: u16,
    },
    /// SCTP_ASSOC_CHANGE / SCTP_RESTART: the peer restarted the association.
    Restart,
    /// SCTP_ASSOC_CHANGE / SCTP_SHUTDOWN_COMP: graceful shutdown finished.
    ShutdownComplete,
    /// SCTP_ASSOC_CHANGE / SCTP_CANT_STR_ASSOC: INIT or COOKIE-ECHO retransmissions exhausted,
    /// or ABORT received during setup.
    CantStartAssoc {
        /// `sac_error`, as for [`Notification::CommLost`] (0 when INITs went unanswered).
        error: u16,
    },
    /// SCTP_ADAPTATION_INDICATION: the peer's Adaptation Layer Indication, host byte order.
    AdaptationIndication(u32),
    /// SCTP_SHUTDOWN_EVENT: the peer sent SHUTDOWN; it will send no more data.
    ShutdownEvent,
    /// SCTP_REMOTE_ERROR: the peer sent an OPERATION ERROR chunk.
    RemoteError {
        /// `sre_error`: the code of the chunk's first error cause, host byte order (usrsctp
        /// converts it, although RFC 6458 §6.1.3 says network byte order).
        error: u16,
        /// `sre_data`: the whole ERROR chunk as received, chunk header included.
        data: Vec<u8>,
    },
    /// SCTP_SEND_FAILED_EVENT: a message could not be delivered.
    SendFailed {
        /// `ssfe_error`.
        error: u32,
        /// Whether the data had been put on the wire (SCTP_DATA_SENT) or not (UNSENT).
        sent: bool,
        /// Stream of the failed message.
        stream: u16,
        /// PPID of the failed message, host byte order.
        ppid: u32,
        /// The undelivered user data.
        data: Vec<u8>,
    },
    /// Any other notification, by `sn_type`, or an ASSOC_CHANGE with an unknown state
    /// (`SCTP_ASSOC_CHANGE`).
    Other(u16),
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

impl Notification {
    /// Parses a notification as usrsctp hands it out: a C struct in host byte order, whose
    /// layout bindgen checked against usrsctp.h. `None` if it is truncated.
    fn parse(b: &[u8]) -> Option<Notification> {
        use sys::{sctp_assoc_change as Ac, sctp_remote_error as Re, sctp_send_failed_event as Sf};
        let kind = u16_at(b, offset_of!(Ac, sac_type))?;
        // sn_length covers the whole notification; never trust it past what we hold.
        let len = (u32_at(b, offset_of!(Ac, sac_length))? as usize).min(b.len());
        let n = match u32::from(kind) {
            sys::SCTP_ASSOC_CHANGE => {
                let error = u16_at(b, offset_of!(Ac, sac_error))?;
                match u32::from(u16_at(b, offset_of!(Ac, sac_state))?) {
                    sys::SCTP_COMM_UP => Notification::CommUp {
                        inbound_streams: u16_at(b, offset_of!(Ac, sac_inbound_streams))?,
                        outbound_streams: u16_at(b, offset_of!(Ac, sac_outbound_streams))?,
                    },
                    sys::SCTP_COMM_LOST => Notification::CommLost { error },
                    sys::SCTP_RESTART => Notification::Restart,
                    sys::SCTP_SHUTDOWN_COMP => Notification::ShutdownComplete,
                    sys::SCTP_CANT_STR_ASSOC => Notification::CantStartAssoc { error },
                    _ => Notification::Other(kind),
                }
            }
            sys::SCTP_ADAPTATION_INDICATION => Notification::AdaptationIndication(u32_at(
                b,
                offset_of!(sys::sctp_adaptation_event, sai_adaptation_ind),
            )?),
            sys::SCTP_SHUTDOWN_EVENT => Notification::ShutdownEvent,
            sys::SCTP_REMOTE_ERROR => Notification::RemoteError {
                error: u16_at(b, offset_of!(Re, sre_error))?,
                data: b.get(offset_of!(Re, sre_data)..len)?.to_vec(),
            },
            sys::SCTP_SEND_FAILED_EVENT => {
                let info = offset_of!(Sf, ssfe_info);
                Notification::SendFailed {
                    error: u32_at(b, offset_of!(Sf, ssfe_error))?,
                    sent: u32::from(u16_at(b, offset_of!(Sf, ssfe_flags))?) & sys::SCTP_DATA_SENT
                        != 0,
                    stream: u16_at(b, info + offset_of!(sys::sctp_sndinfo, snd_sid))?,
                    ppid: u32::from_be(u32_at(b, info + offset_of!(sys::sctp_sndinfo, snd_ppid))?),
                    data: b.get(offset_of!(Sf, ssfe_data)..len)?.to_vec(),
                }
            }
            _ => Notification::Other(kind),
        };
        Some(n)
    }
}

/// One usrsctp SCTP endpoint on its own AF_CONN address, with at most one association.
///
/// Active side: [`connect`](Endpoint::connect). Passive side: [`listen`](Endpoint::listen);
/// the association then lives on a socket usrsctp creates when the COOKIE-ECHO arrives, which
/// [`accept`](Endpoint::accept) picks up (the first one only) and which `send`, `recv`,
/// `shutdown` and `abort` use from then on; they call `accept` themselves, so callers rarely
/// need to.
///
/// The peer has no address of its own: whatever usrsctp sends from this endpoint goes to
/// [`take_output`](Endpoint::take_output), and the remote port is the only thing that names it.
///
/// Dropping an endpoint aborts its association without telling the peer (the ABORT is
/// discarded with the rest of the queue), closes its sockets and deregisters its address. For
/// an orderly end, [`shutdown`](Endpoint::shutdown) (or [`abort`](Endpoint::abort)) and pump
/// packets first.
#[derive(Debug)]
pub struct Endpoint {
    addr: usize,
    port: u16,
    /// The socket created with the endpoint: connecting socket or listener.
    sock: *mut sys::socket,
    listening: bool,
    /// The accepted association socket (passive side), or null.
    accepted: *mut sys::socket,
    /// Start of a message or notification whose end (MSG_EOR) has not been read yet.
    partial: Vec<u8>,
    /// Where usrsctp_recvv writes: allocated once, so a receive costs a copy of the message
    /// and not a fresh zero-filled 64 KiB buffer (the SCTP benchmark measures usrsctp through
    /// this call).
    scratch: Vec<u8>,
}

impl Endpoint {
    /// The local SCTP port.
    pub fn local_port(&self) -> u16 {
        self.port
    }

    fn sockaddr(&self, port: u16) -> sys::sockaddr_conn {
        sys::sockaddr_conn {
            sconn_family: sys::AF_CONN as u16,
            // Network byte order, like sin_port: usrsctp compares it with the packet's header.
            sconn_port: port.to_be(),
            sconn_addr: conn_addr(self.addr),
        }
    }

    fn setsockopt<T>(&self, option: u32, value: &T) -> io::Result<()> {
        // SAFETY: `value` is a live T of the size passed, and T is the struct usrsctp.h
        // documents for `option` (callers pair them); usrsctp copies it.
        check(unsafe {
            sys::usrsctp_setsockopt(
                self.sock,
                sys::IPPROTO_SCTP as c_int,
                option as c_int,
                ptr::from_ref(value).cast(),
                size_of::<T>() as sys::socklen_t,
            )
        })
    }

    /// Starts an association with the endpoint on `remote_port` (sends INIT). Non-blocking: the
    /// association is up once [`Notification::CommUp`] is received.
    pub fn connect(&mut self, remote_port: u16) -> io::Result<()> {
        let sconn = self.sockaddr(remote_port);
        // SAFETY: `self.sock` is live; `sconn` is a valid sockaddr_conn of the length passed.
        let rc = unsafe {
            sys::usrsctp_connect(
                self.sock,
                ptr::from_ref(&sconn).cast_mut().cast(),
                size_of::<sys::sockaddr_conn>() as sys::socklen_t,
            )
        };
        match check(rc) {
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(()),
            other => other,
        }
    }

    /// Waits for an association from a peer (answers INIT with INIT-ACK).
    pub fn listen(&mut self) -> io::Result<()> {
        // SAFETY: `self.sock` is live.
        check(unsafe { sys::usrsctp_listen(self.sock, 4) })?;
        self.listening = true;
        Ok(())
    }

    /// Picks up the association of a listener once usrsctp completed it (COOKIE-ECHO
    /// processed; non-blocking `usrsctp_accept`). `false` only for a listener still waiting
    /// for its first association; a non-listening endpoint uses its own socket.
    pub fn accept(&mut self) -> bool {
        if !self.listening {
            return true;
        }
        if self.accepted.is_null() {
            // SAFETY: `self.sock` is a live listening socket; NULL address arguments are
            // allowed. Non-blocking: NULL with EWOULDBLOCK when nothing is complete yet.
            let so = unsafe { sys::usrsctp_accept(self.sock, ptr::null_mut(), ptr::null_mut()) };
            if !so.is_null() {
                // Inherited from the listener already; made explicit because recv() relies on it.
                // SAFETY: `so` is the live socket usrsctp just handed us.
                unsafe { sys::usrsctp_set_non_blocking(so, 1) };
                self.accepted = so;
            }
        }
        !self.accepted.is_null()
    }

    /// The socket carrying the association, if there is one yet.
    fn assoc(&mut self) -> Option<*mut sys::socket> {
        if !self.accept() {
            return None;
        }
        Some(if self.listening {
            self.accepted
        } else {
            self.sock
        })
    }

    /// Feeds one SCTP packet (common header onwards) from the peer into usrsctp, which checks
    /// its CRC32c. Replies usrsctp sends at once go to [`take_output`](Endpoint::take_output).
    pub fn input(&mut self, packet: &[u8]) {
        // SAFETY: usrsctp copies `packet` (valid for its length) into an mbuf before use; the
        // address is registered while `self` lives. ECN bits: none.
        unsafe {
            sys::usrsctp_conninput(
                conn_addr(self.addr),
                packet.as_ptr().cast(),
                packet.len(),
                0,
            )
        };
    }

    /// The packets usrsctp sent from this endpoint since the last call, oldest first, each with
    /// a valid CRC32c.
    pub fn take_output(&mut self) -> Vec<Vec<u8>> {
        lock_output()
            .get_mut(&self.addr)
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Sends one message (`usrsctp_sendv` with SCTP_SENDV_SNDINFO). `ppid` is in host byte
    /// order. Non-blocking: `WouldBlock` when the send buffer is full; `NotConnected` before a
    /// listener has an association; usrsctp's ENOENT (`NotFound`) once the association is gone.
    pub fn send(
        &mut self,
        stream: u16,
        ppid: u32,
        unordered: bool,
        data: &[u8],
    ) -> io::Result<usize> {
        let flags = if unordered {
            sys::SCTP_UNORDERED as u16
        } else {
            0
        };
        self.sendv(stream, ppid, flags, data)
    }

    fn sendv(&mut self, stream: u16, ppid: u32, flags: u16, data: &[u8]) -> io::Result<usize> {
        let Some(so) = self.assoc() else {
            return Err(io::ErrorKind::NotConnected.into());
        };
        let mut info = sys::sctp_sndinfo {
            snd_sid: stream,
            snd_flags: flags,
            // usrsctp copies snd_ppid into the DATA chunk verbatim: it must be big-endian here.
            snd_ppid: ppid.to_be(),
            snd_context: 0,
            snd_assoc_id: 0,
        };
        // usrsctp refuses a NULL data pointer even for zero bytes (an empty slice's pointer is
        // dangling but non-null; a static byte keeps it obviously valid).
        static NOTHING: u8 = 0;
        let buf: *const c_void = if data.is_empty() {
            ptr::from_ref(&NOTHING).cast()
        } else {
            data.as_ptr().cast()
        };
        // SAFETY: `so` is live; `buf` is valid for `data.len()` bytes; `info` is the sndinfo
        // struct of the size passed for SCTP_SENDV_SNDINFO; no destination address (the
        // one-to-one socket is connected).
        let n = unsafe {
            sys::usrsctp_sendv(
                so,
                buf,
                data.len(),
                ptr::null_mut(),
                0,
                ptr::from_mut(&mut info).cast(),
                size_of::<sys::sctp_sndinfo>() as sys::socklen_t,
                sys::SCTP_SENDV_SNDINFO,
                0,
            )
        };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }

    /// The next complete message or notification, if one is ready. `None` when there is
    /// nothing to read yet, before an association exists, and after it is gone (usrsctp's
    /// EWOULDBLOCK, ENOTCONN, ECONNRESET, end of stream); notifications tell which.
    pub fn recv(&mut self) -> Option<Received> {
        let so = self.assoc()?;
        loop {
            let mut info = sys::sctp_rcvinfo::default();
            let mut infolen = size_of::<sys::sctp_rcvinfo>() as sys::socklen_t;
            let mut infotype: u32 = 0;
            // In-out: usrsctp reads it as the recv flags.
            let mut flags: c_int = 0;
            // SAFETY: `so` is live; `scratch` is valid for RECV_CHUNK bytes;
            // `info`/`infolen`/`infotype`/`flags` are valid out-parameters (usrsctp writes all
            // of them unconditionally); no source address requested.
            let n = unsafe {
                sys::usrsctp_recvv(
                    so,
                    self.scratch.as_mut_ptr().cast(),
                    RECV_CHUNK,
                    ptr::null_mut(),
                    ptr::null_mut(),
                    ptr::from_mut(&mut info).cast(),
                    &mut infolen,
                    &mut infotype,
                    &mut flags,
                )
            };
            let n = usize::try_from(n).unwrap_or(0).min(RECV_CHUNK);
            if n == 0 {
                return None;
            }
            self.partial.extend_from_slice(&self.scratch[..n]);
            if flags & libc::MSG_EOR == 0 {
                // More of this message follows (larger than RECV_CHUNK, or partial delivery).
                continue;
            }
            let bytes = std::mem::take(&mut self.partial);
            if flags & sys::MSG_NOTIFICATION as c_int != 0 {
                if let Some(n) = Notification::parse(&bytes) {
                    return Some(Received::Notification(n));
                }
                // A truncated notification is not worth failing the caller over; skip it.
                continue;
            }
            return Some(Received::Message(Message {
                stream: info.rcv_sid,
                ssn: info.rcv_ssn,
                // usrsctp hands the PPID over as it was on the wire.
                ppid: u32::from_be(info.rcv_ppid),
                unordered: u32::from(info.rcv_flags) & sys::SCTP_UNORDERED != 0,
                tsn: info.rcv_tsn,
                data: bytes,
            }));
        }
    }

    /// Graceful shutdown (`usrsctp_shutdown(SHUT_WR)`): SHUTDOWN once all data is acknowledged.
    pub fn shutdown(&mut self) -> io::Result<()> {
        let so = self.assoc().ok_or(io::ErrorKind::NotConnected)?;
        // SAFETY: `so` is live.
        check(unsafe { sys::usrsctp_shutdown(so, libc::SHUT_WR) })
    }

    /// Aborts the association (sendv with SCTP_ABORT): usrsctp sends ABORT with a User-Initiated
    /// Abort cause and reports [`Notification::CommLost`] locally. The socket stays open.
    pub fn abort(&mut self) -> io::Result<()> {
        self.sendv(0, 0, sys::SCTP_ABORT as u16, &[]).map(drop)
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // Linger {on, 0}: close aborts instead of starting a shutdown that would outlive us.
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        for so in [self.accepted, self.sock] {
            if so.is_null() {
                continue;
            }
            // SAFETY: `so` is a live socket we own and close exactly once; `linger` is the
            // struct SO_LINGER takes.
            unsafe {
                sys::usrsctp_setsockopt(
                    so,
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    ptr::from_ref(&linger).cast(),
                    size_of::<libc::linger>() as sys::socklen_t,
                );
                sys::usrsctp_close(so);
            }
        }
        if self.addr == raw::NO_CONN_ADDR {
            return;
        }
        // SAFETY: registered in Stack::endpoint_with_adaptation, deregistered only here.
        unsafe { sys::usrsctp_deregister_address(conn_addr(self.addr)) };
        lock_output().remove(&self.addr);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The sysctls the setters change, read back raw.
    fn sysctls() -> Vec<u32> {
        // SAFETY: the getters read a global integer.
        SYSCTLS.iter().map(|(get, _)| unsafe { get() }).collect()
    }

    #[test]
    fn lock_restores_usrsctp_defaults() {
        let before = {
            let mut stack = Stack::lock();
            let before = sysctls();
            stack.set_rto(10, 5, 20).unwrap();
            stack.set_delayed_ack(0, 1).unwrap();
            stack.set_max_retransmits(1, 2, 1).unwrap();
            stack.set_streams(1, 1).unwrap();
            stack.set_extensions(Extensions::NONE).unwrap();
            assert_eq!(
                sysctls(),
                [10, 5, 20, 20, 0, 1, 1, 2, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]
            );
            before
        };
        let _stack = Stack::lock();
        assert_eq!(sysctls(), before);
        // The values the setters' documentation quotes: RTO initial/min/max, init RTO max,
        // SACK delay and frequency, INIT/association/path retransmissions, inbound/outbound
        // streams, ECN, PR, AUTH, ASCONF, RE-CONFIG, NR-SACK, PKTDROP.
        assert_eq!(
            before,
            [3000, 1000, 60000, 60000, 200, 2, 8, 10, 5, 2048, 10, 1, 1, 1, 1, 1, 0, 0]
        );
    }
}
