//! `ddpdk [EAL options] -- [options]`: see `ddpdk --help`.
#![forbid(unsafe_code)]

fn main() {
    // Arguments that are not UTF-8 are passed on lossily rather than panicking; clap or the EAL
    // then reports them as unknown.
    let argv = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let status = ddpdk_cli::run::main_with(argv);
    // A `trace` build's marks (benches/latency-trace.sh); nothing otherwise.
    if let Err(e) = ddpdk_dataplane::trace::dump() {
        eprintln!("ddpdk: DDPDK_TRACE: {e}");
    }
    std::process::exit(status);
}
