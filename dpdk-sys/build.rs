//! Generates bindings to the system DPDK at build time.
//!
//! DPDK is located with `pkg-config libdpdk`; its fast-path API is static inline, so bindgen's
//! `wrap_static_fns` emits a C file of thin wrappers that we compile next to `shim.c`.

use std::env;
use std::path::PathBuf;

const MIN_DPDK: &str = "22.11";

/// Prefixes of the functions we bind. Everything static-inline that matches gets a wrapper, so the
/// list stays deliberate rather than `rte_.*`.
const FUNCTIONS: &[&str] = &[
    "rte_eal_.*",
    "rte_eth_.*",
    "rte_pktmbuf_.*",
    "rte_mbuf_.*",
    "rte_mempool_.*",
    "rte_ring_.*",
    "rte_lcore_.*",
    "rte_get_.*",
    "rte_socket_.*",
    "rte_strerror",
    "rte_version",
    "rte_rdtsc",
    "rte_rdtsc_precise",
    "rte_delay_us_block",
    "rte_pause",
    "rte_malloc.*",
    "rte_zmalloc.*",
    "rte_free",
    "rte_mem_virt2iova",
    "rte_mem_virt2memseg",
    "rte_mem_virt2memseg_list",
    "rte_flow_.*",
    "rte_vdev_.*",
    "rte_dev_.*",
    "rte_pdump_init",
    "rte_cryptodev_.*",
    "rte_crypto_.*",
    "rte_security_.*",
    "rte_ipsec_.*",
    "rte_tel_data_.*",
    "rte_telemetry_register_cmd",
    // An idle data core blocks on its RX queues' interrupts and its doorbell in one epoll.
    "rte_epoll_.*",
    "ddpdk_.*",
];

fn main() {
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=shim.h");
    println!("cargo:rerun-if-changed=shim.c");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    let statik = env::var_os("CARGO_FEATURE_STATIC").is_some();
    let dpdk = match pkg_config::Config::new()
        .atleast_version(MIN_DPDK)
        .statik(statik)
        .probe("libdpdk")
    {
        Ok(lib) => lib,
        Err(e) => {
            eprintln!(
                "\nerror: DPDK >= {MIN_DPDK} not found through `pkg-config libdpdk`.\n\
                 On Debian 12: apt-get install libdpdk-dev pkg-config   (or run deploy/setup.sh)\n\
                 pkg-config said: {e}\n"
            );
            std::process::exit(1);
        }
    };

    // rte_eth_from_rings (ring-pair ports) lives in the net_ring PMD, which the shared libdpdk.pc
    // does not list because EAL loads PMDs as plugins. The system librte_net_ring.so is the same
    // file as the plugin, so EAL's dlopen finds it already loaded. A static link has it already.
    if !statik {
        println!("cargo:rustc-link-lib=dylib=rte_net_ring");
    }

    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let wrappers = out.join("static_wrappers");

    // Flags DPDK wants for its headers (-include rte_config.h, -march=..., include dirs) go to
    // both clang (bindgen) and the C compiler, so both see the same ABI.
    let mut clang_args: Vec<String> = dpdk
        .include_paths
        .iter()
        .map(|p| format!("-I{}", p.display()))
        .collect();
    clang_args.push("-DALLOW_EXPERIMENTAL_API".into());
    clang_args.push("-include".into());
    clang_args.push("rte_config.h".into());
    clang_args.push(format!("-I{}", env!("CARGO_MANIFEST_DIR")));

    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .clang_args(&clang_args)
        // rte_ether_addr and friends are packed and over-aligned at the same time, which Rust
        // cannot express; we treat them as opaque byte blobs.
        .opaque_type("rte_arp_ipv4")
        .opaque_type("rte_arp_hdr")
        .opaque_type("rte_l2tpv2_combined_msg_hdr")
        .opaque_type("rte_gtp_psc_generic_hdr")
        .allowlist_type("rte_.*")
        .allowlist_var("RTE_.*")
        .allowlist_var("RING_F_.*")
        .allowlist_var("SOCKET_ID_ANY")
        .derive_default(true)
        // Compile-time assertions that every bound struct has the size, alignment and field
        // offsets of the C definition: the port layer reads rte_mbuf fields directly.
        .layout_tests(true)
        .generate_comments(false)
        .prepend_enum_name(false)
        .wrap_static_fns(true)
        .wrap_static_fns_path(&wrappers)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for f in FUNCTIONS {
        builder = builder.allowlist_function(f);
    }

    // bindgen panics when libclang cannot be loaded; turn that into an actionable message.
    let generated = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| builder.generate()));
    let bindings = match generated {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => {
            eprintln!("\nerror: bindgen could not parse the DPDK headers: {e}\n");
            std::process::exit(1);
        }
        Err(_) => {
            eprintln!(
                "\nerror: bindgen needs libclang and could not load it.\n\
                 On Debian 12: apt-get install libclang-dev   (or run deploy/setup.sh)\n"
            );
            std::process::exit(1);
        }
    };
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs into OUT_DIR");

    let mut cc = cc::Build::new();
    cc.file(wrappers.with_extension("c"))
        .file("shim.c")
        .include(env!("CARGO_MANIFEST_DIR"))
        .define("ALLOW_EXPERIMENTAL_API", None)
        .flag("-include")
        .flag("rte_config.h")
        // The wrappers include wrapper.h by path; DPDK's headers trigger these on newer compilers.
        .flag_if_supported("-Wno-deprecated-declarations")
        .flag_if_supported("-march=corei7")
        .opt_level(2);
    for p in &dpdk.include_paths {
        cc.include(p);
    }
    cc.compile("ddpdk_dpdk_shim");
}
