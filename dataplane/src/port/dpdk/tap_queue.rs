//! Frames the kernel dropped at the queues of a `net_tap` port.
//!
//! A tap port receives what the kernel sends out of its interface, through one tun queue of
//! `txqueuelen` frames a file descriptor. When the data core falls behind and a queue is full,
//! the kernel drops the frame and counts it as a transmit drop of the interface (`tx_dropped`:
//! sending to us is the interface's transmit side), which DPDK 22.11's tap PMD never reads: its
//! `imissed` stays 0 while frames are lost (3000 frames into an unread port: 2006 dropped,
//! RX-missed 0). The port reads the interface's counter itself, from this process's
//! `/proc/self/net/dev` (the network namespace the interface is in), and
//! `PortStats::rx_missed` adds what it gained since the port was set up.
//!
//! The kernel counts any other transmit drop of the interface there too (a frame the tap
//! refused while no queue was attached); with the port's queues open, a full queue is what
//! drops.

use std::sync::Mutex;

/// One tap interface's transmit drops, counted from when the port was set up.
#[derive(Debug)]
pub struct TapQueue {
    name: String,
    inner: Mutex<Counts>,
}

#[derive(Debug, Clone, Copy)]
struct Counts {
    /// The interface's `tx_dropped` when the count (re)started.
    since: u64,
    /// The last count read: kept once the interface is gone (the port closed).
    last: u64,
}

impl TapQueue {
    /// The interface of index `if_index` in this process's namespace, its drops counted from
    /// now; `None` where it has no name or no counters.
    pub fn find(if_index: u32) -> Option<TapQueue> {
        let name = if_name(if_index)?;
        let since = tx_dropped(&name)?;
        Some(TapQueue {
            name,
            inner: Mutex::new(Counts { since, last: 0 }),
        })
    }

    /// Frames the kernel dropped at the queues since the port was set up (or last
    /// [`TapQueue::reset`]).
    pub fn dropped(&self) -> u64 {
        let mut c = self.lock();
        if let Some(now) = tx_dropped(&self.name) {
            c.last = c.last.max(now.saturating_sub(c.since));
        }
        c.last
    }

    /// Starts the count again from 0.
    pub fn reset(&self) {
        let mut c = self.lock();
        if let Some(now) = tx_dropped(&self.name) {
            c.since = now;
        }
        c.last = 0;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The name of interface `if_index` in this process's network namespace.
fn if_name(if_index: u32) -> Option<String> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `buf` has the IF_NAMESIZE bytes if_indextoname may write (a NUL-terminated
    // name); it returns NULL for an index with no interface.
    let p = unsafe { libc::if_indextoname(if_index, buf.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: on success `buf` holds a NUL-terminated name.
    let name = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
    name.to_str().ok().map(str::to_owned)
}

/// The interface's transmit drops now, from `/proc/self/net/dev`.
fn tx_dropped(name: &str) -> Option<u64> {
    parse_tx_dropped(&std::fs::read_to_string("/proc/self/net/dev").ok()?, name)
}

/// `name`'s transmit drop count in the text of `/proc/net/dev`: after `name:`, eight receive
/// fields (bytes, packets, errs, drop, fifo, frame, compressed, multicast), then transmit
/// bytes, packets, errs, drop.
fn parse_tx_dropped(dev: &str, name: &str) -> Option<u64> {
    dev.lines().find_map(|line| {
        let (iface, fields) = line.split_once(':')?;
        if iface.trim() != name {
            return None;
        }
        fields.split_whitespace().nth(11)?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The transmit drop column is the twelfth field after the name, not the receive side's.
    #[test]
    fn reads_the_transmit_drops_of_the_named_interface() {
        let dev = "Inter-|   Receive                                                |  Transmit\n \
            face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
            lo:    1000      10    0    5    0     0          0         0     1000      10    0    7    0     0       0          0\n  \
            dtap0:  2000      20    1    2    3     4          5         6     3000      30    8 2006    9    10      11         12\n";
        assert_eq!(parse_tx_dropped(dev, "dtap0"), Some(2006));
        assert_eq!(parse_tx_dropped(dev, "lo"), Some(7));
        assert_eq!(parse_tx_dropped(dev, "dtap"), None);
        assert_eq!(parse_tx_dropped(dev, "eth0"), None);
    }

    /// Loopback is in every namespace, at index 1, with counters: found, and counted from 0.
    #[test]
    fn finds_an_interface_by_index_and_starts_at_zero() {
        let lo = TapQueue::find(1).expect("loopback has index 1");
        assert_eq!(lo.name, "lo");
        assert_eq!(lo.dropped(), 0);
        assert!(TapQueue::find(u32::MAX).is_none());
    }
}
