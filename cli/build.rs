//! Exports `munmap` from the `ddpdk` executable, so that DPDK's memif driver, a shared
//! library, calls the one `ddpdk_dataplane`'s port layer defines (`port::dpdk::memif_quiesce`:
//! it waits for data lcores' bursts before memif unmaps a connection's memory); without the
//! export the driver binds to the C library's.
fn main() {
    println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol=munmap");
}
