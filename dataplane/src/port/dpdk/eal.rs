//! EAL initialisation, lcores and launching work on them.

use std::ffi::{c_int, c_void, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use dpdk_sys as sys;

use super::DpdkError;

static EAL_TAKEN: AtomicBool = AtomicBool::new(false);

/// The CPUs for a thread of ours that only waits (on a socket, a timer): those the process
/// could run on before the EAL pinned its main thread, less every enabled lcore's, or all of
/// them if the lcores take every one. DPDK 22.11 gives its own control threads the same set
/// (`ctrl_cpuset`, `eal_adjust_config`). Known once [`Eal::init`] has run.
static CONTROL_CPUS: OnceLock<Vec<usize>> = OnceLock::new();

/// The CPUs the calling thread may run on (empty if the kernel does not say).
fn thread_cpus() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is the empty set, and sched_getaffinity writes at most
    // the size it is given into it.
    let (rc, set) = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let rc = libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        (rc, set)
    };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads bit `c` of the set, below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Moves the calling thread onto the CPUs DPDK gives its control threads (the process's CPUs
/// at start less the lcores', or all of them if the lcores take every one): a thread spawned by the main thread inherits the main lcore's CPU, and
/// competes with what polls there. False before [`Eal::init`], or if the kernel refuses.
pub fn to_control_cpus() -> bool {
    let Some(cpus) = CONTROL_CPUS.get().filter(|c| !c.is_empty()) else {
        return false;
    };
    // SAFETY: an all-zero cpu_set_t is the empty set; each CPU set is below CPU_SETSIZE (it
    // was read by CPU_ISSET); sched_setaffinity reads the set of the size given, for this
    // thread (0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// The initialised EAL. DPDK allows one per process; [`Eal::init`] refuses a second.
/// Dropping it runs `rte_eal_cleanup`, so drop every port and pool first.
#[derive(Debug)]
pub struct Eal {
    _not_send: std::marker::PhantomData<*const ()>,
}

/// Work launched on an lcore; [`Eal::join`] waits for it.
#[derive(Debug)]
#[must_use = "an lcore that is not joined keeps running"]
pub struct LcoreJoin {
    pub lcore: u32,
}

type Work = Box<dyn FnOnce() -> i32 + Send + 'static>;

unsafe extern "C" fn trampoline(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the Box<Work> leaked by Eal::launch for exactly this call; DPDK passes it
    // back once, so reclaiming it here is the single owner.
    let work: Box<Work> = unsafe { Box::from_raw(arg.cast::<Work>()) };
    // A panic must not unwind into C; the lcore reports failure and the main lcore carries on
    // to a clean shutdown.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or(-1)
}

/// The process's stdout pointed at its stderr while the EAL parses its arguments. On a bad
/// argument DPDK prints its whole usage with `printf`, and stdout is the endpoint's output
/// (JSON lines with `--json`, which a reader parses): an error and its explanation belong on
/// stderr. An explicit `-h`/`--help` keeps its usage on stdout.
struct StdoutToStderr {
    saved: c_int,
}

impl StdoutToStderr {
    fn new() -> Option<StdoutToStderr> {
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        // SAFETY: dup and dup2 act on the process's descriptor table only; descriptor 1 is
        // swapped for a copy of 2 and the original kept in `saved`, which Drop puts back. No
        // other thread writes stdout yet: the EAL has not started its threads.
        unsafe {
            let saved = libc::dup(1);
            if saved < 0 {
                return None;
            }
            if libc::dup2(2, 1) < 0 {
                libc::close(saved);
                return None;
            }
            Some(StdoutToStderr { saved })
        }
    }
}

impl Drop for StdoutToStderr {
    fn drop(&mut self) {
        // SAFETY: fflush(NULL) writes out C's buffered streams (DPDK's printf) while descriptor
        // 1 still goes to stderr; then the saved descriptor is put back and closed, once.
        unsafe {
            libc::fflush(std::ptr::null_mut());
            libc::dup2(self.saved, 1);
            libc::close(self.saved);
        }
    }
}

impl Eal {
    /// Initialises the EAL from command-line style arguments (`args[0]` is the program name).
    pub fn init<S: AsRef<str>>(args: &[S]) -> Result<Eal, DpdkError> {
        if EAL_TAKEN.swap(true, Ordering::SeqCst) {
            return Err(DpdkError::new(
                "rte_eal_init (EAL already initialised in this process)",
                114,
            ));
        }
        let mut c_args = Vec::with_capacity(args.len());
        for a in args {
            match CString::new(a.as_ref()) {
                Ok(c) => c_args.push(c),
                Err(_) => return Err(DpdkError::new(format!("EAL argument {:?}", a.as_ref()), 22)),
            }
        }
        // EAL keeps pointers into argv (device arguments, for one), so the strings live as long
        // as the process.
        let argv: Vec<*mut std::ffi::c_char> = c_args.into_iter().map(CString::into_raw).collect();
        let argv = argv.leak();
        let asks_help = args
            .iter()
            .take_while(|a| a.as_ref() != "--")
            .any(|a| matches!(a.as_ref(), "-h" | "--help"));
        // Before the EAL pins this thread to the main lcore.
        let startup = thread_cpus();
        let redirect = (!asks_help).then(StdoutToStderr::new).flatten();
        // Before the EAL registers its own, so that it runs after them (rundir.rs).
        super::rundir::register_at_exit();
        // SAFETY: argv holds argc valid NUL-terminated strings that are never freed.
        let rc = unsafe { sys::rte_eal_init(argv.len() as c_int, argv.as_mut_ptr()) };
        drop(redirect);
        if rc < 0 {
            let e = DpdkError::from_rte_errno("rte_eal_init");
            // One that failed after making the prefix's files (rundir.rs) leaves none.
            super::rundir::claim(&runtime_dir());
            EAL_TAKEN.store(false, Ordering::SeqCst);
            return Err(e);
        }
        let mut lcores = Vec::new();
        for l in 0..sys::RTE_MAX_LCORE {
            // SAFETY: EAL is initialised; the function bounds-checks the lcore id.
            if unsafe { sys::rte_lcore_is_enabled(l) } != 0 {
                // SAFETY: as above.
                let cpu = unsafe { sys::rte_lcore_to_cpu_id(l as c_int) };
                lcores.extend(usize::try_from(cpu).ok());
            }
        }
        // The main lcore's whole set, where the EAL has just pinned this thread.
        lcores.extend(thread_cpus());
        let free: Vec<usize> = startup
            .iter()
            .copied()
            .filter(|c| !lcores.contains(c))
            .collect();
        let _ = CONTROL_CPUS.set(if free.is_empty() { startup } else { free });
        super::rundir::claim(&runtime_dir());
        // Lets `dpdk-dumpcap` (a secondary process) capture our ports' traffic. Without shared
        // memory (--no-huge, --no-shconf) there is no secondary, and the call fails harmlessly.
        // SAFETY: EAL is initialised; the call only registers a multi-process handler.
        let _ = unsafe { sys::rte_pdump_init() };
        Ok(Eal {
            _not_send: std::marker::PhantomData,
        })
    }

    /// The lcore this (main) thread runs on.
    pub fn main_lcore(&self) -> u32 {
        // SAFETY: EAL is initialised.
        unsafe { sys::rte_get_main_lcore() }
    }

    /// Enabled lcores other than the main one, in id order.
    pub fn worker_lcores(&self) -> Vec<u32> {
        let mut v = Vec::new();
        // SAFETY: EAL is initialised; rte_get_next_lcore walks the enabled-lcore table.
        let mut l = unsafe { sys::rte_get_next_lcore(u32::MAX, 1, 0) };
        while l < sys::RTE_MAX_LCORE {
            v.push(l);
            // SAFETY: as above.
            l = unsafe { sys::rte_get_next_lcore(l, 1, 0) };
        }
        v
    }

    /// True if `lcore` is enabled in this EAL instance (`-l`, `-c`, `--lcores`).
    pub fn lcore_enabled(&self, lcore: u32) -> bool {
        // SAFETY: EAL is initialised; the function bounds-checks lcore_id.
        lcore < sys::RTE_MAX_LCORE && unsafe { sys::rte_lcore_is_enabled(lcore) } != 0
    }

    /// The NUMA socket of `lcore`.
    pub fn lcore_socket(&self, lcore: u32) -> u32 {
        // SAFETY: EAL is initialised; out-of-range ids return SOCKET_ID_ANY.
        unsafe { sys::rte_lcore_to_socket_id(lcore) }
    }

    /// The EAL's runtime directory (`/var/run/dpdk/<file-prefix>` for root).
    pub fn runtime_dir(&self) -> std::path::PathBuf {
        runtime_dir()
    }

    /// The capacity of the `rte_ring` called `name`, if it exists (for example the ring of a
    /// `net_ring` vdev, `ETH_RXTX<queue>_<device>`).
    pub fn ring_capacity(&self, name: &str) -> Option<u32> {
        let c = CString::new(name).ok()?;
        // SAFETY: EAL is initialised and the name is a valid C string.
        let r = unsafe { sys::rte_ring_lookup(c.as_ptr()) };
        if r.is_null() {
            return None;
        }
        // SAFETY: a ring found by lookup; rings are never freed behind our back while the EAL
        // lives (net_ring frees its rings only when its port is closed, on this thread).
        Some(unsafe { sys::rte_ring_get_capacity(r) })
    }

    /// The largest block DPDK's heap could hand out now, over every NUMA socket (a region is
    /// allocated whole, in one block). What the heap may still grow by is not in it: with
    /// dynamic hugepage memory it maps more as allocations need it; with `--no-huge` or
    /// `--legacy-mem` it never grows, and this is the most a region can take.
    pub fn heap_largest_free(&self) -> u64 {
        // SAFETY: the EAL is initialised; plain queries.
        let sockets = unsafe { sys::rte_socket_count() };
        (0..sockets)
            .filter_map(|i| {
                // SAFETY: `i` is below the socket count.
                let socket = unsafe { sys::rte_socket_id_by_idx(i) };
                let mut st = sys::rte_malloc_socket_stats::default();
                // SAFETY: a valid out-parameter.
                let rc = unsafe { sys::rte_malloc_get_socket_stats(socket, &mut st) };
                (rc == 0).then_some(st.greatest_free_size as u64)
            })
            .max()
            .unwrap_or(0)
    }

    /// The ids of all probed ethdev ports.
    pub fn port_ids(&self) -> Vec<u16> {
        let mut v = Vec::new();
        let max = u64::from(sys::RTE_MAX_ETHPORTS);
        // SAFETY: EAL is initialised; this is RTE_ETH_FOREACH_DEV.
        let mut p =
            unsafe { sys::rte_eth_find_next_owned_by(0, u64::from(sys::RTE_ETH_DEV_NO_OWNER)) };
        while p < max {
            v.push(p as u16);
            // SAFETY: as above.
            p = unsafe {
                sys::rte_eth_find_next_owned_by(p as u16 + 1, u64::from(sys::RTE_ETH_DEV_NO_OWNER))
            };
        }
        v
    }

    /// Creates two ethdevs wired back to back through `rte_ring`s (the `net_ring` PMD), with
    /// `queues` queue pairs: what one port transmits on TX queue q the other receives on RX
    /// queue q. Returns their port ids. The rings live as long as the process (a failed call
    /// leaves the rings it made; names are unique per `name`).
    pub fn create_ring_pair(
        &self,
        name: &str,
        ring_size: u32,
        queues: u16,
    ) -> Result<(u16, u16), DpdkError> {
        let mk_ring = |dir: &str, q: u16| -> Result<*mut sys::rte_ring, DpdkError> {
            let ring = format!("{name}_{dir}{q}");
            let n = CString::new(ring.as_str()).map_err(|_| DpdkError::new("ring name", 22))?;
            // SAFETY: valid name; single-producer/single-consumer because exactly one TX queue
            // feeds each ring and one RX queue drains it.
            let r = unsafe {
                sys::rte_ring_create(
                    n.as_ptr(),
                    ring_size,
                    sys::SOCKET_ID_ANY,
                    sys::RING_F_SP_ENQ | sys::RING_F_SC_DEQ,
                )
            };
            if r.is_null() {
                Err(DpdkError::from_rte_errno(format!(
                    "rte_ring_create({ring})"
                )))
            } else {
                Ok(r)
            }
        };
        let queues = queues.max(1);
        // net_ring takes at most RTE_PMD_RING_MAX_RX_RINGS (16) queues a port, and said only
        // EINVAL above it.
        const RING_PMD_MAX_QUEUES: u16 = 16;
        if queues > RING_PMD_MAX_QUEUES {
            return Err(DpdkError::new(
                format!(
                    "a net_ring port has at most {RING_PMD_MAX_QUEUES} queues, {queues} asked \
                     (fewer --rxq/--txq or data cores)"
                ),
                22,
            ));
        }
        let mut ab = (0..queues)
            .map(|q| mk_ring("ab", q))
            .collect::<Result<Vec<_>, _>>()?;
        let mut ba = (0..queues)
            .map(|q| mk_ring("ba", q))
            .collect::<Result<Vec<_>, _>>()?;
        let mk_port =
            |suffix: &str, rx: &mut [*mut sys::rte_ring], tx: &mut [*mut sys::rte_ring]| {
                let n = CString::new(format!("{name}{suffix}"))
                    .map_err(|_| DpdkError::new("port name", 22))?;
                // SAFETY: rx and tx hold `queues` valid ring pointers each, as the counts say; the
                // PMD copies the pointer arrays.
                let rc = unsafe {
                    sys::rte_eth_from_rings(
                        n.as_ptr(),
                        rx.as_mut_ptr(),
                        u32::from(queues),
                        tx.as_mut_ptr(),
                        u32::from(queues),
                        sys::rte_socket_id(),
                    )
                };
                u16::try_from(rc).map_err(|_| {
                    DpdkError::from_rte_errno(format!("rte_eth_from_rings({name}{suffix})"))
                })
            };
        let a = mk_port("0", &mut ba, &mut ab)?;
        let b = mk_port("1", &mut ab, &mut ba)?;
        Ok((a, b))
    }

    /// Runs `work` on worker `lcore`. The lcore must be idle. Refused (EINVAL) for an lcore
    /// that is not an enabled worker: DPDK 22.11's `rte_eal_remote_launch` indexes its lcore
    /// table with the id unchecked, and the main lcore and disabled ones have no worker thread.
    pub fn launch<F>(&self, lcore: u32, work: F) -> Result<LcoreJoin, DpdkError>
    where
        F: FnOnce() -> i32 + Send + 'static,
    {
        if !self.lcore_enabled(lcore) || lcore == self.main_lcore() {
            return Err(DpdkError::new(
                format!("rte_eal_remote_launch(lcore {lcore}): not an enabled worker lcore"),
                22,
            ));
        }
        let boxed: Box<Work> = Box::new(Box::new(work));
        let arg = Box::into_raw(boxed).cast::<c_void>();
        // SAFETY: trampoline takes back ownership of `arg` exactly once when DPDK runs it.
        let rc = unsafe { sys::rte_eal_remote_launch(Some(trampoline), arg, lcore) };
        if rc < 0 {
            // SAFETY: DPDK refused the launch, so the trampoline will never run: we still own it.
            drop(unsafe { Box::from_raw(arg.cast::<Work>()) });
            return Err(DpdkError::new(
                format!("rte_eal_remote_launch(lcore {lcore})"),
                -rc,
            ));
        }
        Ok(LcoreJoin { lcore })
    }

    /// Lets the calling thread's timed sleeps end within `slack` of their deadline (Linux
    /// timer slack, 50 µs unless set): a data core that sleeps a few microseconds when idle
    /// wakes on time.
    pub fn set_timer_slack(slack: Duration) -> Result<(), DpdkError> {
        let ns = u64::try_from(slack.as_nanos()).unwrap_or(u64::MAX).max(1);
        // SAFETY: prctl(PR_SET_TIMERSLACK) changes only the calling thread's timer slack.
        let rc = unsafe { sys::ddpdk_set_timer_slack_ns(ns as std::os::raw::c_ulong) };
        if rc != 0 {
            return Err(DpdkError::new("prctl(PR_SET_TIMERSLACK)", 22));
        }
        Ok(())
    }

    /// Waits for work launched on an lcore and returns its result (-EINVAL for an lcore id
    /// past DPDK's table: `LcoreJoin` can be built by hand).
    pub fn join(&self, job: LcoreJoin) -> i32 {
        if job.lcore >= sys::RTE_MAX_LCORE {
            return -22;
        }
        // SAFETY: EAL is initialised; the id is inside DPDK's lcore table (checked above),
        // which rte_eal_wait_lcore indexes unchecked.
        unsafe { sys::rte_eal_wait_lcore(job.lcore) }
    }
}

impl Drop for Eal {
    fn drop(&mut self) {
        // SAFETY: waiting for every worker lcore first means no launched work still polls a
        // device when the EAL is torn down (callers set their stop flags before dropping). Ports
        // and pools are dropped before the Eal by the owners' field order; cleanup runs once.
        unsafe {
            sys::rte_eal_mp_wait_lcore();
            sys::rte_eal_cleanup();
        }
    }
}

/// The EAL's runtime directory: empty until `rte_eal_init` has parsed its arguments.
fn runtime_dir() -> std::path::PathBuf {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: the function returns a pointer to a static NUL-terminated buffer (empty before
    // the EAL sets it), copied at once.
    let dir = unsafe { std::ffi::CStr::from_ptr(sys::rte_eal_get_runtime_dir()) };
    std::path::PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes()))
}
