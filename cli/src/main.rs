//! `ddpdk [EAL options] -- [options]`: see `ddpdk --help`.
#![forbid(unsafe_code)]

fn main() {
    // Arguments that are not UTF-8 are passed on lossily rather than panicking; clap or the EAL
    // then reports them as unknown.
    let argv = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    std::process::exit(ddpdk_cli::run::main_with(argv));
}
