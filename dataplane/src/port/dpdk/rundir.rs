//! The EAL's runtime directory (`/var/run/dpdk/<file-prefix>` as root), removed when the process
//! that owns it exits.
//!
//! DPDK 22.11 leaves a primary's shared configuration (`config`), its memory maps (`fbarray_*`,
//! 12 MB with `--no-huge`) and its multi-process socket there after `rte_eal_cleanup`, and
//! after an `rte_eal_init` that failed once it had made them: every run with a new
//! `--file-prefix` kept them for good (44 GB on a development VM, 3.5 GB a CI run).
//!
//! A directory is ours only if this process holds its `config` open and no other process holds
//! the configuration's lock: then we are the primary of the prefix (the EAL lets one run a
//! prefix at a time), not a secondary attached to another's (`--proc-type auto` holds the file
//! open too), nor a `--no-shconf` process, which makes no `config` and may share its prefix
//! with a running primary. The files go at exit, from an `atexit` handler registered before
//! the EAL's own (so it runs after them, once DPDK's telemetry has removed its socket), and
//! only if no other process then has a file of the directory open or mapped (a secondary such
//! as `dpdk-dumpcap` still attached, or a primary that started on the prefix as ours ended).
//! Only the files DPDK's primary names are removed, the configuration last, and the directory
//! if that leaves it empty: another process's socket (a `--no-shconf` run's telemetry on the
//! same prefix) keeps it. A directory the EAL made before it failed, with nothing in it yet, is
//! not known to be ours and stays (empty); so does everything of a process killed outright or
//! ended by a second signal (`_exit`, no `atexit` handlers).

use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

/// The runtime directory this process owns, for [`remove_at_exit`].
static OWNED: Mutex<Option<PathBuf>> = Mutex::new(None);
static AT_EXIT: Once = Once::new();

/// Registers the handler that removes an owned runtime directory at exit. Called before
/// `rte_eal_init`, whose own `atexit` handlers (telemetry's socket removal) then run first.
pub(super) fn register_at_exit() {
    AT_EXIT.call_once(|| {
        // SAFETY: `remove_at_exit` is a plain `extern "C" fn()` that does not unwind into C:
        // nothing in it panics (a poisoned lock and I/O errors are ignored), and a panic in an
        // `extern "C"` function aborts rather than unwinds.
        let _ = unsafe { libc::atexit(remove_at_exit) };
    });
}

/// Claims `dir` for removal at exit if this process owns it (module documentation).
pub(super) fn claim(dir: &Path) {
    if dir.as_os_str().is_empty() {
        return;
    }
    if let Some(fd) = config_fd(dir) {
        if !locked_by_another(fd) {
            if let Ok(mut owned) = OWNED.lock() {
                *owned = Some(dir.to_path_buf());
            }
        }
    }
}

extern "C" fn remove_at_exit() {
    let dir = OWNED.lock().ok().and_then(|mut d| d.take());
    if let Some(dir) = dir {
        if !used_by_another(&dir) {
            remove(&dir);
        }
    }
}

/// Our descriptor of `dir`'s `config`, if we hold one: /proc names files by their canonical
/// path (`/run/dpdk/...`, `/var/run` being a link).
fn config_fd(dir: &Path) -> Option<RawFd> {
    let config = std::fs::canonicalize(dir.join("config")).ok()?;
    std::fs::read_dir("/proc/self/fd")
        .ok()?
        .flatten()
        .find_map(|e| {
            let target = std::fs::read_link(e.path()).ok()?;
            (target == config).then(|| e.file_name().to_str()?.parse().ok())?
        })
}

/// Whether another process holds a lock on the file of `fd` that a write lock of the whole
/// file would meet (the primary's, `rte_eal_config_create`). Asked through the descriptor we
/// hold: opening and closing another would drop every lock this process has on the file.
fn locked_by_another(fd: RawFd) -> bool {
    // SAFETY: a zeroed `flock` is a valid value of the plain C struct.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: `fd` is an open descriptor of this process (read from /proc/self/fd) and `fl` a
    // valid `flock` for F_GETLK to fill; the call changes no lock.
    let rc = unsafe { libc::fcntl(fd, libc::F_GETLK, &mut fl) };
    rc != 0 || fl.l_type != libc::F_UNLCK as libc::c_short
}

/// Whether a process other than this one has a file under `dir` open or mapped.
fn used_by_another(dir: &Path) -> bool {
    let Ok(dir) = std::fs::canonicalize(dir) else {
        return false;
    };
    let me = std::process::id().to_string();
    let under = format!("{}/", dir.display());
    let Ok(procs) = std::fs::read_dir("/proc") else {
        // Cannot tell: not ours to touch then.
        return true;
    };
    procs.flatten().any(|p| {
        let name = p.file_name();
        let Some(pid) = name.to_str() else {
            return false;
        };
        if pid == me || !pid.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        let open = std::fs::read_dir(p.path().join("fd")).is_ok_and(|fds| {
            fds.flatten()
                .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t.starts_with(&dir)))
        });
        open || std::fs::read_to_string(p.path().join("maps"))
            .is_ok_and(|m| m.lines().any(|l| l.contains(&under)))
    })
}

/// Removes the files a primary's EAL makes in `dir`, its configuration last, then `dir` if
/// that leaves it empty.
fn remove(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("fbarray_") || name == "mp_socket" || name == "hugepage_info" {
            let _ = std::fs::remove_file(e.path());
        }
    }
    let _ = std::fs::remove_file(dir.join("config"));
    let _ = std::fs::remove_dir(dir);
}
