//! usrsctp on raw IP sockets: a reference peer across a real link (a veth in a network
//! namespace), for the black-box interoperability test of the DPDK binary.
//!
//! `usrsctp_init(0, ...)` makes usrsctp open raw `IPPROTO_SCTP` sockets and run its own timer
//! and receive threads; it needs CAP_NET_RAW and works without the kernel's SCTP module (raw
//! sockets see SCTP packets; a packet a raw socket takes draws no ICMP Protocol Unreachable).
//! One process runs usrsctp in one mode only: after [`init`], [`crate::Stack::lock`] panics.

use std::ffi::c_int;
use std::io;
use std::mem::size_of;
use std::net::Ipv4Addr;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::PoisonError;

use crate::{check, sys, Endpoint, RECV_CHUNK, STACK};

/// The `addr` of an endpoint that has no AF_CONN address.
pub(crate) const NO_CONN_ADDR: usize = 0;

static RAW: AtomicBool = AtomicBool::new(false);

pub(crate) fn initialised() -> bool {
    RAW.load(Ordering::Acquire)
}

/// Starts usrsctp on raw IP sockets (once per process; later calls do nothing). Fails if this
/// process already runs usrsctp in AF_CONN mode.
pub fn init() -> io::Result<()> {
    let guard = STACK.lock().unwrap_or_else(PoisonError::into_inner);
    if guard.is_some() {
        return Err(io::Error::other("usrsctp already runs in AF_CONN mode"));
    }
    if !RAW.swap(true, Ordering::AcqRel) {
        // SAFETY: once per process (RAW was false under the STACK lock); port 0: no UDP
        // encapsulation, raw IP; no AF_CONN output, no debug printer.
        unsafe { sys::usrsctp_init(0, None, None) };
    }
    Ok(())
}

fn sockaddr_in(addr: Ipv4Addr, port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(addr.octets()),
        },
        sin_zero: [0; 8],
    }
}

impl Endpoint {
    /// A one-to-one IPv4 SCTP socket bound to `local`:`port`, configured as
    /// [`crate::Stack::endpoint_with_adaptation`] configures AF_CONN ones. [`init`] first.
    pub fn raw_ipv4(local: Ipv4Addr, port: u16, adaptation: Option<u32>) -> io::Result<Endpoint> {
        if !initialised() {
            return Err(io::Error::other("usrsctp::raw::init() first"));
        }
        // SAFETY: usrsctp is initialised; no callbacks (we poll with usrsctp_recvv).
        let sock = unsafe {
            sys::usrsctp_socket(
                libc::AF_INET,
                libc::SOCK_STREAM,
                sys::IPPROTO_SCTP as c_int,
                None,
                None,
                0,
                ptr::null_mut(),
            )
        };
        if sock.is_null() {
            return Err(io::Error::last_os_error());
        }
        let ep = Endpoint {
            addr: NO_CONN_ADDR,
            port,
            sock,
            listening: false,
            accepted: ptr::null_mut(),
            partial: Vec::new(),
            scratch: vec![0; RECV_CHUNK],
        };
        ep.configure(adaptation)?;
        let sin = sockaddr_in(local, port);
        // SAFETY: `sin` is a valid sockaddr_in of the length passed; usrsctp copies it.
        check(unsafe {
            sys::usrsctp_bind(
                sock,
                ptr::from_ref(&sin).cast_mut().cast(),
                size_of::<libc::sockaddr_in>() as sys::socklen_t,
            )
        })?;
        Ok(ep)
    }

    /// Starts an association with `peer`:`port` (sends INIT). Non-blocking, as
    /// [`Endpoint::connect`].
    pub fn connect_ipv4(&mut self, peer: Ipv4Addr, port: u16) -> io::Result<()> {
        let sin = sockaddr_in(peer, port);
        // SAFETY: `self.sock` is live; `sin` is a valid sockaddr_in of the length passed.
        let rc = unsafe {
            sys::usrsctp_connect(
                self.sock,
                ptr::from_ref(&sin).cast_mut().cast(),
                size_of::<libc::sockaddr_in>() as sys::socklen_t,
            )
        };
        match check(rc) {
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(()),
            other => other,
        }
    }
}
