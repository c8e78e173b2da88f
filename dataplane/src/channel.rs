//! The rings between a data core and the threads that feed it (commands, STag changes, frames
//! from sibling cores, upcalls), polled on every turn of a poll loop.

pub use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};

/// The next message of `rx`, if one is there; `None` when it is empty or closed.
///
/// A poll loop asks each of its rings every turn and nearly always finds it empty. An empty
/// `try_recv` runs a SeqCst fence before it looks at the tail (15 ns on this project's
/// machines, five rings a turn); `is_empty` is two loads (3 ns). A message sent while this
/// looks is taken on the next turn. A sleeping thread loses no wake-up through this: it says
/// it sleeps, fences, then polls (`Doorbell::sleep_unless`); a sender moves the tail with a
/// locked instruction, fences, then looks whether it sleeps (`Doorbell::ring`). Either the poll
/// sees the new tail or the sender sees the sleeper.
///
/// A rendezvous channel (capacity 0) always reads empty, so it is asked directly.
#[inline]
pub fn poll<T>(rx: &Receiver<T>) -> Option<T> {
    if rx.is_empty() && rx.capacity() != Some(0) {
        return None;
    }
    rx.try_recv().ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test
mod tests {
    use super::*;

    /// What is sent is polled, in order, and an empty or closed ring answers `None`.
    #[test]
    fn poll_takes_what_was_sent_in_order() {
        let (tx, rx) = bounded(4);
        assert_eq!(poll(&rx), None);
        tx.send(1).unwrap();
        tx.send(2).unwrap();
        assert_eq!(poll(&rx), Some(1));
        assert_eq!(poll(&rx), Some(2));
        assert_eq!(poll(&rx), None);
        tx.send(3).unwrap();
        drop(tx);
        assert_eq!(poll(&rx), Some(3));
        assert_eq!(poll(&rx), None);
    }

    /// A rendezvous channel holds nothing, so it always reads empty: a sender waiting in it is
    /// still met.
    #[test]
    fn poll_meets_a_sender_waiting_on_a_rendezvous_channel() {
        let (tx, rx) = bounded(0);
        let sender = std::thread::spawn(move || tx.send(7).unwrap());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let got = loop {
            if let Some(v) = poll(&rx) {
                break v;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the waiting sender was never met"
            );
            std::thread::yield_now();
        };
        assert_eq!(got, 7);
        sender.join().unwrap();
    }

    /// Messages sent from another thread while this one polls are all taken, none twice: the
    /// emptiness test never hides one for good.
    #[test]
    fn poll_misses_nothing_sent_concurrently() {
        const N: u64 = 200_000;
        let (tx, rx) = bounded(64);
        let sender = std::thread::spawn(move || {
            for i in 0..N {
                tx.send(i).unwrap();
            }
        });
        let mut next = 0;
        while next < N {
            if let Some(i) = poll(&rx) {
                assert_eq!(i, next);
                next += 1;
            }
        }
        sender.join().unwrap();
        assert_eq!(poll(&rx), None);
    }
}
