//! `ddpdk-attack [EAL options] -- [options]`: see `ddpdk-attack --help` and `cli/src/attack.rs`.
#![forbid(unsafe_code)]

fn main() {
    let argv = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    std::process::exit(ddpdk_cli::attack::main_with(argv));
}
