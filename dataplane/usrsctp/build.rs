//! Links the system usrsctp and generates bindings to the part of `usrsctp.h` we use.
//!
//! usrsctp is found with `pkg-config usrsctp` (Debian's libusrsctp-dev ships usrsctp.pc), which
//! also emits `cargo:rustc-link-lib=usrsctp`. Its cflags (`-DINET -DINET6`) go to bindgen so the
//! header is read the way the library was compiled.

use std::env;
use std::path::PathBuf;

/// What to install when something is missing; deploy/setup.sh installs it too.
const HINT: &str = "On Debian 12: apt-get install libusrsctp-dev   (or run deploy/setup.sh)";

/// The functions we call. Listed one by one so the bindings stay small and deliberate.
const FUNCTIONS: &[&str] = &[
    "usrsctp_init_nothreads",
    "usrsctp_init",
    "usrsctp_socket",
    "usrsctp_setsockopt",
    "usrsctp_bind",
    "usrsctp_listen",
    "usrsctp_accept",
    "usrsctp_connect",
    "usrsctp_close",
    "usrsctp_shutdown",
    "usrsctp_sendv",
    "usrsctp_recvv",
    "usrsctp_conninput",
    "usrsctp_set_non_blocking",
    "usrsctp_register_address",
    "usrsctp_deregister_address",
    "usrsctp_handle_timers",
    "usrsctp_sysctl_(set|get)_sctp_(rto_initial|rto_min|rto_max|init_rto_max)_default",
    "usrsctp_sysctl_(set|get)_sctp_(delayed_sack_time|sack_freq)_default",
    "usrsctp_sysctl_(set|get)_sctp_(init_rtx_max|assoc_rtx_max|path_rtx_max)_default",
    "usrsctp_sysctl_(set|get)_sctp_nr_(incoming|outgoing)_streams_default",
    "usrsctp_sysctl_(set|get)_sctp_(ecn|pr|auth|asconf|reconfig|nrsack|pktdrop)_enable",
];

const TYPES: &[&str] = &[
    "sockaddr_conn",
    "sctp_sndinfo",
    "sctp_rcvinfo",
    "sctp_event",
    "sctp_setadaptation",
    "sctp_assoc_change",
    "sctp_adaptation_event",
    "sctp_remote_error",
    "sctp_shutdown_event",
    "sctp_send_failed_event",
];

fn main() {
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    let lib = match pkg_config::Config::new().probe("usrsctp") {
        Ok(lib) => lib,
        Err(e) => {
            eprintln!(
                "\nerror: usrsctp not found through `pkg-config usrsctp` (package libusrsctp-dev).\n\
                 {HINT}\npkg-config said: {e}\n"
            );
            std::process::exit(1);
        }
    };

    let mut clang_args: Vec<String> = lib
        .include_paths
        .iter()
        .map(|p| format!("-I{}", p.display()))
        .collect();
    for (name, value) in &lib.defines {
        clang_args.push(match value {
            Some(v) => format!("-D{name}={v}"),
            None => format!("-D{name}"),
        });
    }

    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .clang_args(&clang_args)
        .allowlist_var("AF_CONN")
        .allowlist_var("IPPROTO_SCTP")
        .allowlist_var("MSG_NOTIFICATION")
        .allowlist_var("SCTP_.*")
        .derive_default(true)
        // Compile-time assertions that every bound struct has the C size, alignment and field
        // offsets: the notification parser reads fields at those offsets.
        .layout_tests(true)
        .generate_comments(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for f in FUNCTIONS {
        builder = builder.allowlist_function(f);
    }
    for t in TYPES {
        builder = builder.allowlist_type(t);
    }

    // bindgen panics when libclang cannot be loaded and errors when the header is missing.
    let generated = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| builder.generate()));
    let bindings = match generated {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => {
            eprintln!("\nerror: bindgen could not parse usrsctp.h (package libusrsctp-dev): {e}\n{HINT}\n");
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
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs into OUT_DIR");
}
