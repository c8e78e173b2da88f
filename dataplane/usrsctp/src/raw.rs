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
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
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

fn sockaddr_in6(addr: Ipv6Addr, port: u16) -> libc::sockaddr_in6 {
    libc::sockaddr_in6 {
        sin6_family: libc::AF_INET6 as libc::sa_family_t,
        sin6_port: port.to_be(),
        sin6_flowinfo: 0,
        sin6_addr: libc::in6_addr {
            s6_addr: addr.octets(),
        },
        sin6_scope_id: 0,
    }
}

/// Calls `f` with `addr`:`port` as a sockaddr of its family and that sockaddr's length.
fn with_sockaddr<T>(addr: IpAddr, port: u16, f: impl FnOnce(*mut libc::c_void, u32) -> T) -> T {
    match addr {
        IpAddr::V4(a) => {
            let sin = sockaddr_in(a, port);
            f(
                ptr::from_ref(&sin).cast_mut().cast(),
                size_of::<libc::sockaddr_in>() as u32,
            )
        }
        IpAddr::V6(a) => {
            let sin6 = sockaddr_in6(a, port);
            f(
                ptr::from_ref(&sin6).cast_mut().cast(),
                size_of::<libc::sockaddr_in6>() as u32,
            )
        }
    }
}

impl Endpoint {
    /// A one-to-one IPv4 SCTP socket bound to `local`:`port`, configured as
    /// [`crate::Stack::endpoint_with_adaptation`] configures AF_CONN ones. [`init`] first.
    pub fn raw_ipv4(local: Ipv4Addr, port: u16, adaptation: Option<u32>) -> io::Result<Endpoint> {
        Endpoint::raw_ip(IpAddr::V4(local), port, adaptation)
    }

    /// [`Endpoint::raw_ipv4`] for either family.
    pub fn raw_ip(local: IpAddr, port: u16, adaptation: Option<u32>) -> io::Result<Endpoint> {
        if !initialised() {
            return Err(io::Error::other("usrsctp::raw::init() first"));
        }
        // SAFETY: usrsctp is initialised; no callbacks (we poll with usrsctp_recvv).
        let sock = unsafe {
            sys::usrsctp_socket(
                if local.is_ipv4() {
                    libc::AF_INET
                } else {
                    libc::AF_INET6
                },
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
        // SAFETY: a valid sockaddr of the family and length passed; usrsctp copies it.
        check(with_sockaddr(local, port, |sa, len| unsafe {
            sys::usrsctp_bind(sock, sa.cast(), len as sys::socklen_t)
        }))?;
        Ok(ep)
    }

    /// Starts an association with `peer`:`port` (sends INIT). Non-blocking, as
    /// [`Endpoint::connect`].
    pub fn connect_ipv4(&mut self, peer: Ipv4Addr, port: u16) -> io::Result<()> {
        self.connect_ip(IpAddr::V4(peer), port)
    }

    /// [`Endpoint::connect_ipv4`] for either family.
    pub fn connect_ip(&mut self, peer: IpAddr, port: u16) -> io::Result<()> {
        let sock = self.sock;
        // SAFETY: `sock` is live; a valid sockaddr of the family and length passed.
        let rc = with_sockaddr(peer, port, |sa, len| unsafe {
            sys::usrsctp_connect(sock, sa.cast(), len as sys::socklen_t)
        });
        match check(rc) {
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(()),
            other => other,
        }
    }
}
