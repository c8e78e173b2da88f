//! `ddpdk [EAL options] -- [options]`: see `ddpdk --help`.
#![forbid(unsafe_code)]

fn main() {
    // An argument that is not UTF-8 is refused whole: passed on lossily, a file name with such
    // a byte was reported missing (it named another file).
    let mut argv = Vec::new();
    for a in std::env::args_os() {
        match a.into_string() {
            Ok(a) => argv.push(a),
            Err(a) => {
                eprintln!(
                    "ddpdk: argument {} is not UTF-8: ddpdk takes its arguments, file names \
                     too, in UTF-8 (see 'ddpdk --help')",
                    a.to_string_lossy()
                );
                std::process::exit(ddpdk_cli::run::EXIT_USAGE);
            }
        }
    }
    let status = ddpdk_cli::run::main_with(argv);
    // A `trace` build's marks (benches/latency-trace.sh); nothing otherwise.
    if let Err(e) = ddpdk_dataplane::trace::dump() {
        eprintln!("ddpdk: DDPDK_TRACE: {e}");
    }
    std::process::exit(status);
}
