//! RX interrupts: an idle data core blocks until one of its RX queues has a frame or its
//! doorbell rings, instead of waking on a timer to poll (DPDK's l3fwd-power does the same).
//! The queues' events and the doorbell's event fd share DPDK's per-thread epoll instance, so
//! DPDK reads each queue's interrupt fd the way its handle type needs (an MSI-X vector's
//! counter, nothing for a tap's queue fd), and the waiter must be made, used and dropped on
//! the thread that waits.

use std::collections::BTreeSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dpdk_sys as sys;

use crate::port::{RxWaiter, Woken};

/// `epdata.data` of the doorbell's event; a queue's is its index + 1.
const BELL: usize = 0;

/// The interrupt fds of a port's RX queues that a waiter holds: a device may give several
/// queues one vector (ixgbevf, uio, a NIC short of vectors), and DPDK registers an fd in one
/// epoll instance only (a second registration is quietly ignored), so a second core's waiter
/// on it would never wake.
pub type ClaimedFds = Arc<Mutex<BTreeSet<i32>>>;

/// One data core's wait on its RX queues of one port and its doorbell.
#[derive(Debug)]
pub struct DpdkRxWaiter {
    port_id: u16,
    queues: Vec<u16>,
    fds: Vec<i32>,
    claimed: ClaimedFds,
    bell: OwnedFd,
    /// The doorbell's epoll event, which DPDK keeps a pointer to until it is deleted: made
    /// with `Box::into_raw`, so no move of ours retags it, and freed only after its deletion.
    bell_event: NonNull<sys::rte_epoll_event>,
    /// The thread whose epoll instance holds the events.
    thread: std::thread::ThreadId,
}

// SAFETY: `bell_event` is touched by DPDK's epoll of the making thread and by Drop, which
// frees it only on that thread after deleting it from the instance (elsewhere it is leaked).
// From other threads only `bell` (a write to an event fd) and `arm` (DPDK's per-queue
// interrupt enable, which ethdev allows from any thread) are used.
unsafe impl Send for DpdkRxWaiter {}
// SAFETY: as above: `bell` and `arm` are safe to call concurrently; `wait` refuses to run on
// another thread than the one that made the waiter.
unsafe impl Sync for DpdkRxWaiter {}

impl DpdkRxWaiter {
    /// Registers `queues` of `port_id` and a doorbell in the calling thread's epoll instance.
    /// `None` when the device has no interrupt fd for one of the queues, or another waiter
    /// holds one of their fds (`claimed`).
    pub fn new(port_id: u16, queues: &[u16], claimed: &ClaimedFds) -> Option<DpdkRxWaiter> {
        let mut fds = Vec::new();
        for &q in queues {
            // SAFETY: a configured port; the call reads the interrupt handle only.
            let fd = unsafe { sys::rte_eth_dev_rx_intr_ctl_q_get_fd(port_id, q) };
            if fd < 0 || fds.contains(&fd) {
                return None;
            }
            fds.push(fd);
        }
        {
            let mut held = claimed.lock().ok()?;
            if fds.iter().any(|fd| held.contains(fd)) {
                return None;
            }
            held.extend(fds.iter().copied());
        }
        let unclaim = |fds: &[i32]| {
            if let Ok(mut held) = claimed.lock() {
                for fd in fds {
                    held.remove(fd);
                }
            }
        };
        // SAFETY: plain syscall; the fd is owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            unclaim(&fds);
            return None;
        }
        // SAFETY: fd is a fresh descriptor no one else owns.
        let bell = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut added = Vec::new();
        for (k, &q) in queues.iter().enumerate() {
            // SAFETY: a configured port and queue; DPDK stores `data` as an opaque value.
            let r = unsafe {
                sys::rte_eth_dev_rx_intr_ctl_q(
                    port_id,
                    q,
                    sys::RTE_EPOLL_PER_THREAD,
                    sys::RTE_INTR_EVENT_ADD as i32,
                    (k + 1) as *mut std::ffi::c_void,
                )
            };
            if r != 0 {
                remove_queues(port_id, &added);
                unclaim(&fds);
                return None;
            }
            added.push(q);
        }
        let mut event = Box::new(sys::rte_epoll_event::default());
        event.epdata.event = libc::EPOLLIN as u32;
        event.epdata.data = BELL as *mut std::ffi::c_void;
        let bell_event = NonNull::from(Box::leak(event));
        // SAFETY: the event lives at a fixed address until Drop deletes it from this thread's
        // instance and only then frees it.
        let r = unsafe {
            sys::rte_epoll_ctl(
                sys::RTE_EPOLL_PER_THREAD,
                libc::EPOLL_CTL_ADD,
                bell.as_raw_fd(),
                bell_event.as_ptr(),
            )
        };
        if r != 0 {
            // SAFETY: never registered: ours alone to free.
            drop(unsafe { Box::from_raw(bell_event.as_ptr()) });
            remove_queues(port_id, &added);
            unclaim(&fds);
            return None;
        }
        Some(DpdkRxWaiter {
            port_id,
            queues: added,
            fds,
            claimed: Arc::clone(claimed),
            bell,
            bell_event,
            thread: std::thread::current().id(),
        })
    }

    fn enable(&self, q: u16, on: bool) -> bool {
        // SAFETY: a configured port and queue.
        let r = unsafe {
            if on {
                sys::rte_eth_dev_rx_intr_enable(self.port_id, q)
            } else {
                sys::rte_eth_dev_rx_intr_disable(self.port_id, q)
            }
        };
        // A PMD without the call (a tap's queue fd signals whenever frames come) is armed
        // all the time.
        r == 0 || r == -libc::ENOTSUP
    }
}

fn remove_queues(port_id: u16, queues: &[u16]) {
    for &q in queues {
        // SAFETY: removes what `new` added to this thread's instance.
        unsafe {
            sys::rte_eth_dev_rx_intr_ctl_q(
                port_id,
                q,
                sys::RTE_EPOLL_PER_THREAD,
                sys::RTE_INTR_EVENT_DEL as i32,
                std::ptr::null_mut(),
            );
        }
    }
}

impl RxWaiter for DpdkRxWaiter {
    fn arm(&self, on: bool) -> bool {
        if !on {
            // Every queue disarmed, whichever refuses.
            let mut ok = true;
            for &q in &self.queues {
                ok &= self.enable(q, false);
            }
            return ok;
        }
        for (k, &q) in self.queues.iter().enumerate() {
            if !self.enable(q, true) {
                // Half armed would have the device interrupt a core that polls: undone.
                for &armed in &self.queues[..k] {
                    self.enable(armed, false);
                }
                return false;
            }
        }
        true
    }

    fn wait(&self, timeout: Duration) -> Woken {
        if std::thread::current().id() != self.thread {
            // Another thread's epoll instance holds nothing of ours: a sleep would not wake.
            return Woken::Failed;
        }
        let ms = i32::try_from(timeout.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
        let mut events = [sys::rte_epoll_event::default(); 8];
        // SAFETY: `events` has room for the 8 events asked for.
        let n =
            unsafe { sys::rte_epoll_wait(sys::RTE_EPOLL_PER_THREAD, events.as_mut_ptr(), 8, ms) };
        let Ok(n) = usize::try_from(n) else {
            return Woken::Failed;
        };
        let mut woken = Woken::Timeout;
        for e in events.iter().take(n) {
            if e.epdata.data as usize == BELL {
                let mut v = 0u64;
                // SAFETY: reads the 8-byte counter of our own non-blocking event fd (resets
                // it; a read of an unset one fails with EAGAIN, harmlessly).
                unsafe {
                    libc::read(
                        self.bell.as_raw_fd(),
                        (&mut v as *mut u64).cast(),
                        std::mem::size_of::<u64>(),
                    );
                }
                if woken == Woken::Timeout {
                    woken = Woken::Bell;
                }
            } else {
                woken = Woken::Rx;
            }
        }
        woken
    }

    fn bell(&self) {
        let one = 1u64;
        // SAFETY: writes an 8-byte counter increment to our own event fd; a full counter
        // (EAGAIN) is already set, which is all a bell means.
        unsafe {
            libc::write(
                self.bell.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            );
        }
    }
}

impl Drop for DpdkRxWaiter {
    fn drop(&mut self) {
        if let Ok(mut held) = self.claimed.lock() {
            for fd in &self.fds {
                held.remove(fd);
            }
        }
        if std::thread::current().id() != self.thread {
            // The events stay registered in the other thread's instance (DPDK deletes the
            // queues' when the port stops); the doorbell's event must then outlive it, so it
            // is leaked, not freed under DPDK's pointer. The runtime drops its waiters on
            // their own threads.
            return;
        }
        self.arm(false);
        remove_queues(self.port_id, &self.queues);
        // SAFETY: deletes the doorbell's event from this thread's instance; once deleted,
        // DPDK holds no pointer to it and the box made in `new` is ours to free.
        unsafe {
            if sys::rte_epoll_ctl(
                sys::RTE_EPOLL_PER_THREAD,
                libc::EPOLL_CTL_DEL,
                self.bell.as_raw_fd(),
                self.bell_event.as_ptr(),
            ) == 0
            {
                drop(Box::from_raw(self.bell_event.as_ptr()));
            }
        }
    }
}
