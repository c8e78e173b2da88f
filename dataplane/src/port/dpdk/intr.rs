//! RX interrupts: an idle data core blocks until one of its RX queues has a frame or its
//! doorbell rings, instead of waking on a timer to poll (DPDK's l3fwd-power does the same).
//! The queues' events and the doorbell's event fd share DPDK's per-thread epoll instance, so
//! DPDK reads each queue's interrupt fd the way its handle type needs (an MSI-X vector's
//! counter, nothing for a tap's queue fd), and the waiter must be made and used on the
//! thread that waits.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use dpdk_sys as sys;

use crate::port::{RxWaiter, Woken};

/// `epdata.data` of the doorbell's event; a queue's is its index + 1.
const BELL: usize = 0;

/// One data core's wait on its RX queues of one port and its doorbell.
#[derive(Debug)]
pub struct DpdkRxWaiter {
    port_id: u16,
    queues: Vec<u16>,
    bell: OwnedFd,
    /// The doorbell's epoll event: DPDK keeps a pointer to it until it is deleted, so it has
    /// a fixed address (boxed) for the waiter's life.
    bell_event: Box<sys::rte_epoll_event>,
    /// The thread whose epoll instance holds the events.
    thread: std::thread::ThreadId,
}

// SAFETY: the raw pointers inside `rte_epoll_event` are DPDK's bookkeeping of the boxed
// event itself; nothing is shared through them. `bell` is the only part used from other
// threads (a write to an event fd), and `wait` checks it runs on the thread that made it.
unsafe impl Send for DpdkRxWaiter {}
// SAFETY: as above: `bell` writes to an fd, which any thread may do at any time.
unsafe impl Sync for DpdkRxWaiter {}

impl DpdkRxWaiter {
    /// Registers `queues` of `port_id` and a doorbell in the calling thread's epoll instance.
    /// `None` when the device has no interrupt for one of the queues (its PMD has no RX
    /// interrupts, or the port was not configured for them).
    pub fn new(port_id: u16, queues: &[u16]) -> Option<DpdkRxWaiter> {
        // SAFETY: plain syscall; the fd is owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
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
                return None;
            }
            added.push(q);
        }
        let mut bell_event = Box::new(sys::rte_epoll_event::default());
        bell_event.epdata.event = libc::EPOLLIN as u32;
        bell_event.epdata.data = BELL as *mut std::ffi::c_void;
        // SAFETY: the event is boxed and outlives its registration (deleted in Drop, on
        // this thread's instance).
        let r = unsafe {
            sys::rte_epoll_ctl(
                sys::RTE_EPOLL_PER_THREAD,
                libc::EPOLL_CTL_ADD,
                bell.as_raw_fd(),
                &mut *bell_event,
            )
        };
        if r != 0 {
            remove_queues(port_id, &added);
            return None;
        }
        Some(DpdkRxWaiter {
            port_id,
            queues: added,
            bell,
            bell_event,
            thread: std::thread::current().id(),
        })
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
        let mut ok = true;
        for &q in &self.queues {
            // SAFETY: a configured port and queue.
            let r = unsafe {
                if on {
                    sys::rte_eth_dev_rx_intr_enable(self.port_id, q)
                } else {
                    sys::rte_eth_dev_rx_intr_disable(self.port_id, q)
                }
            };
            // A PMD without the call (a tap's queue fd signals whenever frames come) is
            // armed all the time.
            ok &= r == 0 || r == -libc::ENOTSUP;
        }
        ok
    }

    fn wait(&self, timeout: Duration) -> Woken {
        if std::thread::current().id() != self.thread {
            // Another thread's epoll instance holds nothing of ours: a sleep would not wake.
            return Woken::Timeout;
        }
        let ms = i32::try_from(timeout.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
        let mut events = [sys::rte_epoll_event::default(); 8];
        // SAFETY: `events` has room for the 8 events asked for.
        let n =
            unsafe { sys::rte_epoll_wait(sys::RTE_EPOLL_PER_THREAD, events.as_mut_ptr(), 8, ms) };
        let mut woken = Woken::Timeout;
        for e in events.iter().take(usize::try_from(n).unwrap_or(0)) {
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
        if std::thread::current().id() != self.thread {
            // The events stay in the other thread's instance, which ends with it; the boxed
            // event must then outlive it: leaked rather than freed under DPDK's pointer.
            let event = std::mem::replace(
                &mut self.bell_event,
                Box::new(sys::rte_epoll_event::default()),
            );
            std::mem::forget(event);
            return;
        }
        self.arm(false);
        remove_queues(self.port_id, &self.queues);
        // SAFETY: deletes the doorbell's event from this thread's instance before the box is
        // freed.
        unsafe {
            sys::rte_epoll_ctl(
                sys::RTE_EPOLL_PER_THREAD,
                libc::EPOLL_CTL_DEL,
                self.bell.as_raw_fd(),
                &mut *self.bell_event,
            );
        }
    }
}
