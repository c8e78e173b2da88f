//! Raw FFI bindings to the system DPDK (22.11), generated at build time by bindgen.
//!
//! Static-inline functions of DPDK's fast path (`rte_eth_rx_burst`, `rte_pktmbuf_alloc_bulk`,
//! `rte_ring_enqueue_burst`, ...) are callable here because `build.rs` compiles bindgen's
//! `wrap_static_fns` wrappers. Everything in this crate is `unsafe` to call; the safe layer is
//! `ddpdk_dataplane::port::dpdk`.
#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code
)]
#![allow(
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    missing_debug_implementations
)]
#![allow(unsafe_op_in_unsafe_fn, rust_2018_idioms)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

/// `rte_errno` of the calling thread (a thread-local behind a macro in C).
pub fn rte_errno() -> i32 {
    // SAFETY: reads a thread-local int; no preconditions.
    unsafe { ddpdk_rte_errno() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_string_names_dpdk_22_11() {
        // SAFETY: rte_version returns a pointer to a static NUL-terminated string and needs no EAL.
        let v = unsafe { std::ffi::CStr::from_ptr(rte_version()) };
        let v = v.to_string_lossy();
        assert!(v.starts_with("DPDK 22.11"), "unexpected DPDK version {v}");
    }

    #[test]
    fn errno_shim_round_trips_the_thread_local() {
        // SAFETY: writes a thread-local int.
        unsafe { ddpdk_set_rte_errno(12345) };
        assert_eq!(rte_errno(), 12345);
    }
}
