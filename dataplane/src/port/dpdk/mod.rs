//! The DPDK ethdev implementation of [`Port`](super::Port), and the EAL it needs.
//!
//! This module and `dpdk-sys` are the only places in ddpdk with `unsafe` code; every block says
//! why it is sound. The types here own DPDK objects and release them on drop, in the order DPDK
//! requires: ports (stopped, then closed) before their mempools, everything before the EAL.

// The `crc32` and carry-less multiply instructions it uses are x86-64's; elsewhere
// `wire::crc32c` uses crc-fast alone.
#[cfg(target_arch = "x86_64")]
pub mod crc;
mod eal;
mod ethdev;
mod flow;
mod intr;
mod ipsec;
mod ipsec_port;
mod kernel_ring;
mod mbuf;
mod memif_quiesce;
pub mod nic_double;
mod rundir;
mod tap_queue;
pub mod telemetry;
// RDTSC is x86-64's; elsewhere the poll loops keep the vDSO clock.
#[cfg(target_arch = "x86_64")]
pub mod tsc;

pub use eal::{to_control_cpus, Eal, LcoreJoin};
pub use ethdev::{
    DpdkPort, PortConf, PortInfo, SctpSteering, MEMIF_RECONNECT_AFTER, MEMIF_RECONNECT_MAX,
};
pub use intr::DpdkRxWaiter;
pub use ipsec::{CryptoDev, EspDrop, EspSa, InlineDev, SaCounts, SaStats};
pub use ipsec_port::{IpsecPort, PolicyCounts, PolicyStats, SaReport, RETIRE_AFTER};
pub use mbuf::{Mbuf, Mempool};
pub use memif_quiesce::interposed as memif_teardown_guarded;

use std::ffi::CStr;

/// A failed DPDK call: what was attempted and the (positive) errno DPDK returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpdkError {
    pub op: String,
    pub errno: i32,
    /// What to look at, where the errno alone would not say (`None` for most).
    pub hint: Option<&'static str>,
}

impl DpdkError {
    pub(crate) fn new(op: impl Into<String>, errno: i32) -> Self {
        Self {
            op: op.into(),
            errno: errno.abs(),
            hint: None,
        }
    }

    pub(crate) fn with_hint(mut self, hint: &'static str) -> Self {
        self.hint = Some(hint);
        self
    }
    /// An error from a call that reports through `rte_errno`.
    pub(crate) fn from_rte_errno(op: impl Into<String>) -> Self {
        Self::new(op, dpdk_sys::rte_errno())
    }
}

impl std::fmt::Display for DpdkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // No errno (a call that failed without setting one, or a driver's bare -1): what
        // failed, not "Success (errno 0)" or a made-up "Operation not permitted".
        if self.errno == 0 {
            write!(f, "{} failed (DPDK's log above says why)", self.op)?;
        } else {
            // SAFETY: rte_strerror returns a pointer to a static or thread-local NUL-terminated
            // string for any errno value.
            let msg = unsafe { CStr::from_ptr(dpdk_sys::rte_strerror(self.errno)) };
            write!(
                f,
                "{}: {} (errno {})",
                self.op,
                msg.to_string_lossy(),
                self.errno
            )?;
        }
        match self.hint {
            Some(h) => write!(f, "; {h}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for DpdkError {}

/// Converts a DPDK return code (negative errno on failure) into a `Result`.
pub(crate) fn check(op: impl FnOnce() -> String, rc: i32) -> Result<i32, DpdkError> {
    if rc < 0 {
        Err(DpdkError::new(op(), -rc))
    } else {
        Ok(rc)
    }
}
