//! Keeps DPDK 22.11's memif from unmapping a connection's shared memory under a burst.
//!
//! When its peer leaves, a memif port tears the connection down on the EAL's interrupt thread
//! (`memif_disconnect`): it clears its CONNECTED flag, closes the channel and the event fds,
//! then unmaps the shared regions and frees their records (`memif_free_regions`). A data lcore
//! inside `rte_eth_rx_burst` or `rte_eth_tx_burst` on the port passed the flag's test before it
//! was cleared, and goes on copying from or into the regions: it faulted (SIGSEGV) once they
//! were gone. `ddpdk fwd` in `rxonly` against a `txonly` peer that stopped crashed in 4 of 6
//! runs (an outside-in review). Nothing in the driver waits for its data path, and nothing lets
//! a caller hook the teardown, except that the unmapping calls the dynamic symbol `munmap`:
//! with the `memif-quiesce` feature this module defines it in the executable (GNU ld exports
//! it, DPDK's libraries referencing it; `cli/build.rs` says so explicitly), so the driver's
//! call lands here first, and waits until every burst on a memif port that began before it
//! has returned, then unmaps.
//!
//! A burst that begins after the wait finds the flag cleared and returns without touching the
//! regions' memory (it still reads their freed records first, as the driver always does: heap
//! memory that stays mapped). The ordering is x86-64's: the driver's plain flag store precedes
//! its call into `munmap`, whose fence precedes the loads of the marks; a burst's locked
//! increment of its mark precedes its load of the flag (elsewhere a fence follows the mark).
//! What this does not cover (the driver's, not reached through `munmap`): a burst during the
//! connection's set-up (it reads a region's address before the flag, and a reconnecting
//! server stores the record before mapping it), and a TX burst's wake-up write to an event fd
//! the teardown closed first (only a peer in interrupt mode reads them; DPDK's peers poll).
//! Every other `munmap` of the process passes through too, with a look at the marks first
//! while a memif port exists.

use std::cell::Cell;
#[cfg(any(feature = "memif-quiesce", not(target_arch = "x86_64")))]
use std::sync::atomic::fence;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(feature = "memif-quiesce")]
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
#[cfg(feature = "memif-quiesce")]
const WAIT_AT_MOST: Duration = Duration::from_secs(1);

/// From now on every `munmap` waits for the memif bursts under way.
pub(super) fn arm() {
    ARMED.store(true, Ordering::Relaxed);
}

fn mine() -> Option<usize> {
    MINE.try_with(|m| {
        if m.get() == usize::MAX {
            let k = NEXT.fetch_add(1, Ordering::Relaxed);
            if k == THREADS {
                eprintln!(
                    "ddpdk: more than {THREADS} threads run memif bursts: the bursts of the \
                     others are not waited for when a peer leaves"
                );
            }
            m.set(k);
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
        // Without the feature nothing waits for the marks: none is made.
        let k = if cfg!(feature = "memif-quiesce") {
            mine()
        } else {
            None
        };
        if let Some(k) = k {
            // The mark is visible before the driver's load of its CONNECTED flag: a locked
            // instruction on x86-64, a fence after it elsewhere.
            MARKS[k].0.fetch_add(1, Ordering::SeqCst);
            #[cfg(not(target_arch = "x86_64"))]
            fence(Ordering::SeqCst);
        }
        Burst(k)
    }
}

impl Drop for Burst {
    #[inline]
    fn drop(&mut self) {
        if let Some(k) = self.0 {
            // Only this thread writes its mark: a plain store, no locked instruction.
            let m = &MARKS[k].0;
            m.store(m.load(Ordering::Relaxed) + 1, Ordering::Release);
        }
    }
}

/// Waits until each burst under way (other than this thread's own) has returned.
#[cfg(feature = "memif-quiesce")]
fn quiesce() {
    // The driver's flag store, made before this call, is ordered before the loads below.
    fence(Ordering::SeqCst);
    let me = MINE.try_with(Cell::get).unwrap_or(usize::MAX);
    let threads = NEXT.load(Ordering::Acquire).min(THREADS);
    let mut since: Option<Instant> = None;
    let mut spins = 0u32;
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
            // The burst's thread may be the one this thread preempted (every CPU an lcore's,
            // the interrupt thread on the main lcore's): give it the CPU.
            spins += 1;
            if spins.is_multiple_of(1024) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

/// The C library's `munmap`, for the whole process: waits for memif bursts under way (see the
/// module's note), then makes the system call itself (glibc's wrapper is this same name).
///
/// # Safety
///
/// As `munmap(2)`: the caller owns the mapping and nothing uses it after the call.
#[cfg(feature = "memif-quiesce")]
#[no_mangle]
pub unsafe extern "C" fn munmap(addr: *mut libc::c_void, len: libc::size_t) -> libc::c_int {
    if ARMED.load(Ordering::SeqCst) {
        quiesce();
    }
    // SAFETY: the caller's contract is munmap(2)'s; `syscall` sets errno and returns -1 on
    // failure, as glibc's munmap does.
    unsafe { libc::syscall(libc::SYS_munmap, addr, len) as libc::c_int }
}

/// Whether the `munmap` DPDK's drivers bind to is the one above (the `memif-quiesce` feature,
/// and an executable that exports it).
pub fn interposed() -> bool {
    #[cfg(feature = "memif-quiesce")]
    {
        // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only reads the symbol
        // tables.
        let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"munmap".as_ptr()) };
        let ours: unsafe extern "C" fn(*mut libc::c_void, libc::size_t) -> libc::c_int = munmap;
        found == ours as *mut libc::c_void
    }
    #[cfg(not(feature = "memif-quiesce"))]
    false
}
