//! `ddpdk-attack [EAL options] -- [options]`: see `ddpdk-attack --help` and `cli/src/attack.rs`.
#![forbid(unsafe_code)]

fn main() {
    let argv = ddpdk_cli::run::utf8_args("ddpdk-attack");
    std::process::exit(ddpdk_cli::attack::main_with(argv));
}
