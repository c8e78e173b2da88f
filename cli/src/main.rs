//! `ddpdk [EAL options] -- [options]`: see `ddpdk --help`.
#![forbid(unsafe_code)]

fn main() {
    let argv = ddpdk_cli::run::utf8_args("ddpdk");
    let status = ddpdk_cli::run::main_with(argv);
    // A `trace` build's marks (benches/latency-trace.sh); nothing otherwise.
    if let Err(e) = ddpdk_dataplane::trace::dump() {
        eprintln!("ddpdk: DDPDK_TRACE: {e}");
    }
    std::process::exit(status);
}
