//! Exports `munmap` from the `ddpdk` executable, so that DPDK's memif driver, a shared
//! library, calls the one `ddpdk_dataplane`'s port layer defines with its `memif-quiesce`
//! feature (`port::dpdk::memif_quiesce`: it waits for data lcores' bursts before memif unmaps
//! a connection's memory). GNU ld exports it already, DPDK's shared libraries referencing the
//! symbol; the flag keeps that from resting on how the link happens to go.
fn main() {
    println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol=munmap");
}
