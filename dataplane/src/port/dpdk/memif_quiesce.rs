//! Keeps DPDK 22.11's memif from freeing a connection's shared memory under a burst.
//!
//! When its peer leaves, a memif port tears the connection down on the EAL's interrupt thread
//! (`memif_disconnect`): it clears its CONNECTED flag, closes the channel, then unmaps the
//! shared regions and frees their records (`memif_free_regions`). A data lcore inside
//! `rte_eth_rx_burst` or `rte_eth_tx_burst` on the port passed the flag's test before it was
//! cleared, and goes on copying from or into the regions: it faulted (SIGSEGV) once they were
//! gone. `ddpdk fwd` in `rxonly` against a `txonly` peer that stopped crashed in 4 of 6 runs
//! (an outside-in review). Nothing in the driver waits for its data path, and nothing lets a
//! caller hook the teardown, except that the unmapping goes through the dynamic symbol
//! `munmap`: this module defines it in the executable (exported: `cli/build.rs`), so the
//! driver's call lands here first, and waits until every burst on a memif port that began
//! before it has returned, then unmaps.
//!
//! Bursts that begin after that see the flag cleared (the driver tests it first, and the
//! SeqCst fences on both sides order the flag's store before the wait's loads, and a burst's
//! mark before its load of the flag) and touch nothing. Every other `munmap` of the process
//! passes through too, with a look at the marks first while a memif port exists.

use std::cell::Cell;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Threads that may run memif bursts, each with a mark of its own. More is no harm: a burst of
/// a thread beyond them is not marked (and is as exposed as before).
const THREADS: usize = 256;

/// A thread's burst count, on a cache line of its own: odd while it is inside a burst.
#[repr(align(64))]
struct Mark(AtomicU64);

#[allow(clippy::declare_interior_mutable_const)] // each array element is its own atomic
const MARK: Mark = Mark(AtomicU64::new(0));
static MARKS: [Mark; THREADS] = [MARK; THREADS];
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// A memif port exists: `munmap` looks at the marks.
static ARMED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// This thread's mark, once it has run a burst (usize::MAX: none yet).
    static MINE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// How long an unmapping waits for a burst before it goes ahead anyway (a burst takes
/// microseconds; a thread preempted in one, longer).
const WAIT_AT_MOST: Duration = Duration::from_secs(1);

/// From now on every `munmap` waits for the memif bursts under way.
pub(super) fn arm() {
    ARMED.store(true, Ordering::Relaxed);
}

fn mine() -> Option<usize> {
    MINE.try_with(|m| {
        if m.get() == usize::MAX {
            m.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        m.get()
    })
    .ok()
    .filter(|&k| k < THREADS)
}

/// A burst on a memif port is under way while this lives.
pub(super) struct Burst(Option<usize>);

impl Burst {
    #[inline]
    pub(super) fn begin() -> Burst {
        let k = mine();
        if let Some(k) = k {
            // SeqCst: the mark is visible before the driver's load of its CONNECTED flag.
            MARKS[k].0.fetch_add(1, Ordering::SeqCst);
        }
        Burst(k)
    }
}

impl Drop for Burst {
    #[inline]
    fn drop(&mut self) {
        if let Some(k) = self.0 {
            MARKS[k].0.fetch_add(1, Ordering::Release);
        }
    }
}

/// Waits until each burst under way (other than this thread's own) has returned.
fn quiesce() {
    // The driver's flag store, made before this call, is ordered before the loads below.
    fence(Ordering::SeqCst);
    let me = MINE.try_with(Cell::get).unwrap_or(usize::MAX);
    let threads = NEXT.load(Ordering::Acquire).min(THREADS);
    let mut since: Option<Instant> = None;
    for (k, mark) in MARKS.iter().enumerate().take(threads) {
        let seen = mark.0.load(Ordering::Acquire);
        if k == me || seen % 2 == 0 {
            continue;
        }
        while mark.0.load(Ordering::Acquire) == seen {
            let t0 = *since.get_or_insert_with(Instant::now);
            if t0.elapsed() > WAIT_AT_MOST {
                return;
            }
            std::hint::spin_loop();
        }
    }
}

/// The C library's `munmap`, for the whole process: waits for memif bursts under way (see the
/// module's note), then makes the system call itself (glibc's wrapper is this same name).
///
/// # Safety
///
/// As `munmap(2)`: the caller owns the mapping and nothing uses it after the call.
#[no_mangle]
pub unsafe extern "C" fn munmap(addr: *mut libc::c_void, len: libc::size_t) -> libc::c_int {
    if ARMED.load(Ordering::Relaxed) {
        quiesce();
    }
    // SAFETY: the caller's contract is munmap(2)'s; `syscall` sets errno and returns -1 on
    // failure, as glibc's munmap does.
    unsafe { libc::syscall(libc::SYS_munmap, addr, len) as libc::c_int }
}

/// Whether this executable's `munmap` is the one above (`cli/build.rs` exports it; a test
/// binary without the export leaves the driver on glibc's).
pub fn interposed() -> bool {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only reads the symbol tables.
    let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"munmap".as_ptr()) };
    let ours: unsafe extern "C" fn(*mut libc::c_void, libc::size_t) -> libc::c_int = munmap;
    found == ours as *mut libc::c_void
}
