//! Frames a kernel `PACKET_MMAP` ring dropped under a `net_af_packet` port.
//!
//! DPDK 22.11's af_packet receives through one kernel packet socket a queue, each with a ring
//! of `framecnt` slots. When the data core falls behind and the ring is full, the kernel drops
//! the frame and counts it in the socket's `tp_drops` (packet(7), `PACKET_STATISTICS`), which
//! the PMD never reads: its `imissed` stays 0 while frames are lost, and an operator sees
//! SCTP's retransmissions with no drop to explain them. The sockets live in this process, so
//! the port finds them (bound to the device's interface index) and reads their counters
//! itself; `PortStats::rx_missed` adds them to the device's own.
//!
//! Reading `PACKET_STATISTICS` resets the kernel's counters, so every read is accumulated
//! here, and nothing else in the process reads them (the PMD does not).

use std::collections::BTreeSet;
use std::sync::Mutex;

/// Sockets already counted by a port: two ports on one interface must not count one ring's
/// drops twice (nor drain each other's counters).
static CLAIMED: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// The packet sockets of one port and the drops read from them so far.
#[derive(Debug)]
pub struct KernelRings {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    fds: Vec<i32>,
    dropped: u64,
}

impl KernelRings {
    /// The packet sockets of this process bound to interface `if_index` and not claimed by
    /// another port; `None` where there are none (or `/proc/self/fd` cannot be read).
    pub fn find(if_index: u32) -> Option<KernelRings> {
        let dir = std::fs::read_dir("/proc/self/fd").ok()?;
        let mut claimed = CLAIMED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let fds: Vec<i32> = dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|fd| !claimed.contains(fd) && bound_to(*fd, if_index))
            .collect();
        if fds.is_empty() {
            return None;
        }
        claimed.extend(fds.iter().copied());
        // What the rings dropped before the port was ours is not this run's.
        for &fd in &fds {
            let _ = drops(fd);
        }
        Some(KernelRings {
            inner: Mutex::new(Inner { fds, dropped: 0 }),
        })
    }

    /// Frames the rings dropped since they were found (or last [`KernelRings::reset`]).
    pub fn dropped(&self) -> u64 {
        let mut g = self.lock();
        let new: u64 = g.fds.iter().filter_map(|&fd| drops(fd)).sum();
        g.dropped += new;
        g.dropped
    }

    /// Starts the count again from 0.
    pub fn reset(&self) {
        let mut g = self.lock();
        for &fd in &g.fds {
            let _ = drops(fd);
        }
        g.dropped = 0;
    }

    /// Stops reading the sockets, before the device closes them (their numbers may then be
    /// reused by anything). The count stays as it was.
    pub fn forget(&self) {
        let mut g = self.lock();
        let fds = std::mem::take(&mut g.fds);
        let mut claimed = CLAIMED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for fd in fds {
            claimed.remove(&fd);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for KernelRings {
    fn drop(&mut self) {
        self.forget();
    }
}

/// Whether `fd` is a packet socket bound to interface `if_index`.
fn bound_to(fd: i32, if_index: u32) -> bool {
    // SAFETY: sockaddr_ll is plain old data; all zeroes is a valid value.
    let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: `sa` is writable for `len` bytes and the kernel writes at most that many; an fd
    // that is not a socket (or not open any more) only makes the call fail.
    let rc = unsafe {
        libc::getsockname(
            fd,
            (&mut sa as *mut libc::sockaddr_ll).cast::<libc::sockaddr>(),
            &mut len,
        )
    };
    rc == 0
        && i32::from(sa.sll_family) == libc::AF_PACKET
        && u32::try_from(sa.sll_ifindex).ok() == Some(if_index)
}

/// `tp_drops` of packet socket `fd` since the last read (the read resets it), or `None`
/// where the socket does not answer.
fn drops(fd: i32) -> Option<u64> {
    // struct tpacket_stats (TPACKET_V1/V2: tp_packets, tp_drops) and, for TPACKET_V3, a
    // third word (tp_freeze_q_cnt): room for either.
    let mut st = [0u32; 3];
    let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
    // SAFETY: `st` is writable for `len` bytes; the kernel writes at most `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            st.as_mut_ptr().cast::<libc::c_void>(),
            &mut len,
        )
    };
    (rc == 0 && len >= 8).then(|| u64::from(st[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interface index no socket of this process is bound to finds nothing, and a socket
    /// that is not a packet socket is never taken for one.
    #[test]
    fn finds_nothing_where_nothing_is_bound() {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp socket");
        assert!(KernelRings::find(u32::MAX).is_none());
        assert!(!bound_to(std::os::fd::AsRawFd::as_raw_fd(&udp), 1));
        assert_eq!(drops(std::os::fd::AsRawFd::as_raw_fd(&udp)), None);
    }
}
