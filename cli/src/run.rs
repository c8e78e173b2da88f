//! The main lcore's loop: start-up, command sources (cmdline files, the interactive shell or a
//! pipe), periodic statistics, `--run-for`, signals, and a clean shutdown.

use std::io::{BufRead, IsTerminal};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use ddpdk_dataplane::port::dpdk::Eal;

use crate::app::{note, App, Flow, Shell};
use crate::jobs::Parsed;
use crate::node::Placement;
use crate::options::{split_args, Options};
use crate::shell;

/// The flag SIGINT and SIGTERM set, for the waits of the set-up that cannot take it as an
/// argument (a port's link wait).
static SIGNALLED: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();

/// Whether SIGINT or SIGTERM came.
pub(crate) fn signalled() -> bool {
    SIGNALLED.get().is_some_and(|s| s.load(Ordering::Relaxed))
}

/// Exit status for bad command-line arguments (as clap uses).
pub const EXIT_USAGE: i32 = 2;
/// Exit status for a failure at run time (EAL, ports, a failing cmdline-file command).
pub const EXIT_FAILURE: i32 = 1;

/// rte_eal_init's rte_errno when it cannot parse a device option (or scan the buses).
const ENODEV: i32 = 19;

/// How often the main lcore looks at signals, deadlines and the shell.
const TICK: Duration = Duration::from_millis(50);

enum Input {
    Line(String),
    /// A line that is not UTF-8: refused as a command is, never taken for the end of input.
    NotUtf8,
    /// End of input or Ctrl-D / Ctrl-C at the prompt.
    End,
}

/// The EAL's long options (DPDK 22.11's usage) and the short ones that take a value, which
/// ddpdk has none of: given after '--', they are named as the EAL's.
const EAL_LONG: &[&str] = &[
    "lcores",
    "main-lcore",
    "mbuf-pool-ops-name",
    "block",
    "allow",
    "vdev",
    "iova-mode",
    "vmware-tsc-map",
    "proc-type",
    "syslog",
    "log-level",
    "trace",
    "trace-dir",
    "trace-bufsz",
    "trace-mode",
    "in-memory",
    "base-virtaddr",
    "telemetry",
    "no-telemetry",
    "force-max-sim",
    "huge-unlink",
    "no-huge",
    "no-pci",
    "no-hpet",
    "no-shconf",
    "socket-mem",
    "socket-limit",
    "huge-dir",
    "file-prefix",
    "create-uio-dev",
    "vfio-intr",
    "vfio-vf-token",
    "legacy-mem",
    "single-file-segments",
    "match-allocations",
    "huge-worker-stack",
];
const EAL_SHORT: &[&str] = &["-l", "-c", "-n", "-m", "-b", "-d", "-r"];

fn is_eal_option(arg: &str) -> bool {
    match arg.strip_prefix("--") {
        Some(long) => EAL_LONG.contains(&long.split('=').next().unwrap_or(long)),
        None => EAL_SHORT.iter().any(|s| arg.starts_with(s)),
    }
}

/// A ddpdk option among the EAL's (before '--'): the EAL would refuse it after printing its
/// usage, and a job would say it lacks the option given (`ddpdk endpoint --ip A -- -i`
/// answered "needs --ip ADDR").
fn ddpdk_option_among_eals(eal_args: &[String]) -> Option<String> {
    use clap::CommandFactory;
    let cmd = Options::command();
    eal_args.iter().skip(1).find_map(|a| {
        // -i, ddpdk's one short option the EAL lacks (-a and -h are the EAL's too): the EAL
        // said "invalid option -- 'i'" above 80 lines of its usage.
        let long = match a.as_str() {
            "-i" => "interactive",
            _ => a.strip_prefix("--")?.split('=').next()?,
        };
        let ours = cmd.get_arguments().any(|o| o.get_long() == Some(long));
        (ours && !EAL_LONG.contains(&long) && long != "help").then(|| {
            format!(
                "{a} is ddpdk's option, not the EAL's: it goes after '--' (ddpdk [JOB] \
                 [EAL options] -- [options]; see 'ddpdk --help')"
            )
        })
    })
}

/// The EAL's flags that take no value: a word after one is no option's value.
const EAL_FLAGS: &[&str] = &[
    "--no-huge",
    "--no-pci",
    "--no-hpet",
    "--no-shconf",
    "--no-telemetry",
    "--telemetry",
    "--in-memory",
    "--huge-unlink",
    "--legacy-mem",
    "--single-file-segments",
    "--match-allocations",
    "--create-uio-dev",
    "--vmware-tsc-map",
    "-v",
];

/// A job's name among the EAL's arguments where no option takes it as a value (`ddpdk -l 0-1
/// loopback -- ...`): the EAL skipped the word and the default job ran, or refused the job's
/// options as fwd's.
fn job_among_eals(eal_args: &[String]) -> Option<String> {
    let jobs = ["fwd", "loopback", "endpoint", "shell", "perf", "preflight"];
    eal_args.windows(2).enumerate().find_map(|(i, w)| {
        let (before, word) = (&w[0], w[1].as_str());
        let a_value = before.starts_with('-') && !EAL_FLAGS.contains(&before.as_str());
        (jobs.contains(&word) && (i == 0 || !a_value)).then(|| {
            format!(
                "{word}: the job goes first, before the EAL options: ddpdk {word} [EAL options] \
                 -- [options] (see 'ddpdk --help')"
            )
        })
    })
}

/// The EAL's long options that take a value as the next word (DPDK 22.11's getopt table,
/// `eal_long_options`; the two `pci-` names and `master-lcore` of older releases too, so a
/// command line they accept is never refused here).
const EAL_VALUED_LONG: &[&str] = &[
    "allow",
    "base-virtaddr",
    "block",
    "file-prefix",
    "force-max-simd-bitwidth",
    "huge-dir",
    "iova-mode",
    "lcores",
    "log-level",
    "main-lcore",
    "master-lcore",
    "mbuf-pool-ops-name",
    "pci-blacklist",
    "pci-whitelist",
    "proc-type",
    "socket-limit",
    "socket-mem",
    "syslog",
    "trace",
    "trace-bufsz",
    "trace-dir",
    "trace-mode",
    "vdev",
    "vfio-intr",
    "vfio-vf-token",
];
/// The EAL's long options that take no value, or one only after '=' (`--huge-unlink[=...]`,
/// `--huge-worker-stack[=size]`: getopt's optional arguments never take the next word).
const EAL_BARE_LONG: &[&str] = &[
    "create-uio-dev",
    "help",
    "huge-unlink",
    "huge-worker-stack",
    "in-memory",
    "legacy-mem",
    "match-allocations",
    "no-hpet",
    "no-huge",
    "no-pci",
    "no-shconf",
    "no-telemetry",
    "single-file-segments",
    "telemetry",
    "vmware-tsc-map",
];
/// DPDK 22.11's short options that take a value (`eal_short_options`, `-w` of older
/// releases too), and those that take none.
pub(crate) const EAL_VALUED_SHORT: &str = "abcdlmnrsSw";
pub(crate) const EAL_BARE_SHORT: &str = "hv";

/// Whether the EAL's long option `name` takes the next word as its value, as getopt_long
/// reads it: its full name or a prefix of exactly one. None: no option of the EAL's.
pub(crate) fn eal_long_takes_value(name: &str) -> Option<bool> {
    let prefixed = |names: &[&str]| names.iter().filter(|n| n.starts_with(name)).count();
    if EAL_VALUED_LONG.contains(&name) {
        return Some(true);
    }
    if EAL_BARE_LONG.contains(&name) {
        return Some(false);
    }
    match (prefixed(EAL_VALUED_LONG), prefixed(EAL_BARE_LONG)) {
        (1, 0) => Some(true),
        (0, 1) => Some(false),
        _ => None,
    }
}

/// A word among the EAL's arguments that is neither an option nor an option's value (`ddpdk
/// -l 0-1 --no-huge 512 -- ...`): the EAL's getopt sets it aside and the EAL starts without
/// it, saying nothing. Job names are `job_among_eals`'s. After an option the EAL does not
/// know, nothing is judged: the EAL refuses that option itself, and the word after it may be
/// its value.
fn stray_among_eals(eal_args: &[String]) -> Option<String> {
    let mut words = eal_args.iter().skip(1);
    while let Some(a) = words.next() {
        if let Some(long) = a.strip_prefix("--") {
            if long.contains('=') {
                continue;
            }
            // An option the EAL lacks ends the walk (`?`): the EAL refuses it itself.
            if eal_long_takes_value(long)? {
                words.next();
            }
        } else if let Some(shorts) = a.strip_prefix('-').filter(|s| !s.is_empty()) {
            // getopt: flags may run together (-vl 0-1); the first that takes a value takes
            // the rest of the word, or the next word when the rest is empty.
            for (i, c) in shorts.char_indices() {
                if EAL_VALUED_SHORT.contains(c) {
                    if i + c.len_utf8() == shorts.len() {
                        words.next();
                    }
                    break;
                }
                if !EAL_BARE_SHORT.contains(c) {
                    return None;
                }
            }
        } else {
            return Some(format!(
                "{a}: among the EAL options, but no option's value and no option (the EAL \
                 would skip it without a word): ddpdk [JOB] [EAL options] -- [options] (see \
                 'ddpdk --help')"
            ));
        }
    }
    None
}

/// The process's arguments, or its exit with a usage error at the first that is not UTF-8:
/// passed on lossily, a file name with such a byte was reported missing (it named another
/// file).
pub fn utf8_args(program: &str) -> Vec<String> {
    let mut argv = Vec::new();
    for a in std::env::args_os() {
        match a.into_string() {
            Ok(a) => argv.push(a),
            Err(a) => {
                errln!(
                    "{program}: argument {} is not UTF-8: {program} takes its arguments, file \
                     names too, in UTF-8 (see '{program} --help')",
                    a.to_string_lossy()
                );
                std::process::exit(EXIT_USAGE);
            }
        }
    }
    argv
}

/// Runs ddpdk with `argv` (program name first) and returns the process exit status.
pub fn main_with(mut argv: Vec<String>) -> i32 {
    let job = match crate::jobs::take(&mut argv) {
        Ok(Parsed::Help(text)) => {
            out!("{text}");
            return 0;
        }
        Ok(Parsed::Job(job)) => Some(job),
        Ok(Parsed::Preflight) => return crate::preflight::run(&argv),
        Ok(Parsed::None) => None,
        Err(e) => {
            errln!("ddpdk: {e}");
            return EXIT_USAGE;
        }
    };
    let (mut eal_args, mut app_args) = split_args(&argv);
    if let Some(e) = ddpdk_option_among_eals(&eal_args)
        .or_else(|| job_among_eals(&eal_args))
        .or_else(|| stray_among_eals(&eal_args))
    {
        errln!("ddpdk: {e}");
        return EXIT_USAGE;
    }
    if let Some(job) = &job {
        match crate::jobs::apply(job, &mut app_args) {
            Ok(Some(text)) => {
                out!("{text}");
                return 0;
            }
            Ok(None) => {}
            Err(e) => {
                errln!("ddpdk: {e}");
                return EXIT_USAGE;
            }
        }
    }
    let mut opts = match Options::try_parse_from(&app_args) {
        Ok(o) => o,
        Err(e) if !e.use_stderr() => {
            // --help / --version
            let _ = e.print();
            return 0;
        }
        Err(e) => {
            let text = e.render().to_string();
            let first = text
                .lines()
                .next()
                .unwrap_or("bad arguments")
                .trim_start_matches("error: ");
            // clap's lines below the first that say what would do: the values an option
            // takes and a near one (`--forward-mode macswap` said only "invalid value": an
            // outside-in review).
            let first = text
                .lines()
                .skip(1)
                .map(str::trim)
                // Not clap's near argument: it picks among every job's, and an EAL option
                // after `--` (`--lcores`) was pointed at `--nb-cores`.
                .filter(|l| {
                    l.starts_with("[possible values:") || l.starts_with("tip: a similar value")
                })
                .fold(first.to_string(), |acc, l| format!("{acc} {l}"));
            // Without '--' every argument is ddpdk's: an EAL option then reads as unknown; so
            // does one given after it.
            let hint = if (eal_args.len() <= 1 && !argv.iter().any(|a| a == "--"))
                || app_args.iter().any(|a| is_eal_option(a))
            {
                "; EAL options go before '--', ddpdk's after it: ddpdk [JOB] [EAL options] -- \
                 [options]"
            } else {
                ""
            };
            // The loopback's net_ring ports carry one data core fewer than clap's bound.
            let loopback = job == Some(crate::jobs::Job::Loopback)
                || app_args.iter().any(|a| a == "--ddp-loopback");
            let first = if loopback && first.contains("'--data-cores <N>'") {
                first.replace("from 1 to 16", "from 1 to 15 with the loopback")
            } else {
                first.to_string()
            };
            let help = job.as_ref().map_or("ddpdk --help".to_string(), |j| {
                format!("ddpdk {} --help", j.name())
            });
            errln!("ddpdk: {first}{hint} (see '{help}')");
            return EXIT_USAGE;
        }
    };
    if job.is_none() {
        if let Err(e) = crate::jobs::check_flag_form(&opts, &app_args) {
            errln!("ddpdk: {e}");
            return EXIT_USAGE;
        }
    }
    if let Err(e) = opts.validate() {
        errln!("ddpdk: {e}");
        return EXIT_USAGE;
    }
    // The IPsec configuration too, once (a pipe gives its bytes once): what the endpoint
    // builds its SAs from is what was checked here.
    if let Some(path) = &opts.ipsec_config {
        match crate::node::read_ipsec_config(path) {
            Ok(text) => opts.ipsec_config_text = Some(text),
            Err(e) => {
                errln!("ddpdk: {e}");
                return EXIT_USAGE;
            }
        }
    }
    if let Some(path) = &opts.ipsec_socket {
        if let Err(e) = crate::ipsec::check_socket_path(path) {
            errln!("ddpdk: {e}");
            return EXIT_USAGE;
        }
    }
    if let Some(Err(e)) = opts.pcap.as_deref().map(check_pcap_path) {
        errln!("ddpdk: {e}");
        return EXIT_USAGE;
    }
    // Fixed by the flags, whether or not its size could be read here (an independent
    // review: `--legacy-mem` alone, or `-m 1G`, skipped the check after the EAL).
    opts.heap_fixed = eal_args
        .iter()
        .any(|a| a == "--no-huge" || a == "--legacy-mem");
    if let Err(e) = region_fits(&opts, crate::app::machine_bytes(), eal_heap(&eal_args)) {
        errln!("ddpdk: {e}");
        return EXIT_USAGE;
    }
    // Read every cmdline file before touching the EAL, so a missing file or a bad command is a
    // usage error that costs nothing.
    let mut scripts = Vec::new();
    for f in &opts.cmdline_file {
        match load_script(f) {
            Ok(s) => scripts.push(s),
            Err(e) => {
                errln!("ddpdk: {e}");
                return EXIT_USAGE;
            }
        }
    }

    // Virtual devices fitted to the run's frames, or the run stops here (memif.rs,
    // af_packet.rs).
    match fit_devices(&mut eal_args, &mut opts) {
        Ok(notes) => {
            for n in notes {
                crate::app::note(opts.json, format_args!("{n}"));
            }
        }
        Err(e) => {
            errln!("ddpdk: {e}");
            return EXIT_USAGE;
        }
    }

    let signalled = Arc::new(AtomicBool::new(false));
    let _ = SIGNALLED.set(Arc::clone(&signalled));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // The first SIGINT/SIGTERM asks for a clean shutdown; a second one, while it is under
        // way, exits at once (status 1) so that nothing can hold the process.
        let registered = signal_hook::flag::register_conditional_shutdown(
            sig,
            EXIT_FAILURE,
            Arc::clone(&signalled),
        )
        .and_then(|_| signal_hook::flag::register(sig, Arc::clone(&signalled)));
        if let Err(e) = registered {
            errln!("ddpdk: cannot install the handler for signal {sig}: {e}");
            return EXIT_FAILURE;
        }
    }

    let eal = match Eal::init(&eal_args) {
        Ok(e) => e,
        Err(e) => {
            // ENODEV with devices given: DPDK could not parse one of them (a --vdev whose
            // driver it lacks, a malformed -a), a bad argument like any other, where it was
            // reported as a run-time failure with status 1.
            let bad_device = e.errno == ENODEV && !crate::vdev::device_specs(&eal_args).is_empty();
            let hint = if bad_device {
                "\n  a device option names no device DPDK can make (the line above names it): \
                 check each --vdev's driver name (net_ring, net_memif, net_af_packet, net_tap, \
                 ...) and each -a PCI address"
            } else {
                eal_hint(&eal_args)
            };
            errln!("ddpdk: EAL initialisation failed: {e}{hint}");
            // EINVAL: the EAL refused its arguments (it has printed its usage above).
            return if e.errno == 22 || bad_device {
                EXIT_USAGE
            } else {
                EXIT_FAILURE
            };
        }
    };
    if opts.ddp_loopback {
        return crate::loopback::run(eal, &opts, &signalled);
    }
    if let Some(e) = (!opts.ring_pair)
        .then(|| no_port_made(&eal, &eal_args))
        .flatten()
    {
        errln!("ddpdk: {e}");
        return EXIT_FAILURE;
    }
    // More data cores than the EAL's lcores carry is a usage error, said before anything starts.
    let placement = if opts.ddp_listen || opts.ddp_connect.is_some() {
        Some(Placement::WorkersOrInline)
    } else {
        (!opts.ip.is_empty()).then_some(Placement::Workers)
    };
    if let Some(Err(e)) = placement
        .map(|p| crate::node::lcores_fit(eal.worker_lcores().len(), opts.endpoint_cores(), p))
    {
        errln!("ddpdk: {e}");
        return EXIT_USAGE;
    }
    // Forwarding lcores the EAL does not have: the same usage error, before a port is set up.
    if placement.is_none() && usize::from(opts.nb_cores) > eal.worker_lcores().len() {
        errln!(
            "ddpdk: --nb-cores {} but the EAL has {} worker lcore(s); give it more with -l",
            opts.nb_cores,
            eal.worker_lcores().len()
        );
        return EXIT_USAGE;
    }
    if opts.ddp_listen || opts.ddp_connect.is_some() {
        return crate::endpoint::run(eal, &opts, &signalled);
    }
    if !opts.ip.is_empty() {
        let mut app = match crate::ddp_app::DdpApp::new(eal, &opts) {
            Ok(a) => a,
            Err(e) => {
                errln!("ddpdk: {e}");
                return EXIT_FAILURE;
            }
        };
        app.watch_signals(Arc::clone(&signalled));
        let status = if signalled.load(Ordering::Relaxed) {
            note(
                opts.json,
                format_args!("Signal received during set-up, preparing to exit..."),
            );
            0
        } else {
            drive(&mut app, &opts, &scripts, &signalled)
        };
        match app.shutdown() {
            Ok(0) => {}
            Ok(n) => {
                errln!("ddpdk: warning: {n} mbuf(s) not back in their pool");
                return EXIT_FAILURE;
            }
            Err(e) => {
                errln!("ddpdk: {e}");
                return EXIT_FAILURE;
            }
        }
        note(opts.json, format_args!("Bye..."));
        return status;
    }
    let mut app = match App::new(eal, &opts) {
        Ok(a) => a,
        Err(e) => {
            errln!("ddpdk: {e}");
            return EXIT_FAILURE;
        }
    };

    // A signal during set-up (the link wait can take seconds) means: do not start forwarding.
    let status = if signalled.load(Ordering::Relaxed) {
        note(
            opts.json,
            format_args!("Signal received during set-up, preparing to exit..."),
        );
        0
    } else {
        drive(&mut app, &opts, &scripts, &signalled)
    };
    match app.shutdown() {
        Ok(0) => {}
        Ok(_) => return EXIT_FAILURE,
        Err(e) => {
            errln!("ddpdk: {e}");
            return EXIT_FAILURE;
        }
    }
    note(opts.json, format_args!("Bye..."));
    status
}

type Script = Vec<(String, usize, shell::Command)>;

/// Fits the virtual devices of `eal_args` to the run's frames before the EAL starts: a memif
/// port's buffers hold a whole frame (DPDK 22.11's memif corrupts frames split over buffers),
/// an af_packet port's ring slots too, with the queue pairs a DDP endpoint needs and mbufs its
/// receive queues take (`opts.mbuf_size` raised). Returns the notes to print.
fn fit_devices(eal_args: &mut [String], opts: &mut Options) -> Result<Vec<String>, String> {
    // Only a DDP endpoint's path MTU follows --mtu; its queue pairs are one a data core and
    // one for the control thread (node.rs).
    let endpoint = !opts.ip.is_empty() || opts.ddp_listen || opts.ddp_connect.is_some();
    let mut notes = crate::memif::fit_frames(eal_args, opts.mtu, opts.txpkts, endpoint)?;
    let endpoint_queues = endpoint
        .then(|| u16::try_from(opts.endpoint_cores() + 1).ok())
        .flatten();
    let fitted = crate::af_packet::fit_frames(
        eal_args,
        opts.mtu,
        opts.txpkts,
        std::path::Path::new("/sys/class/net"),
        endpoint_queues,
        crate::af_packet::page_size(),
        crate::af_packet::lockable_bytes(),
    )?;
    notes.extend(fitted.notes);
    if fitted.mbuf_size > opts.mbuf_size {
        notes.push(format!(
            "--mbuf-size {}: af_packet's ring slots need mbufs this large",
            fitted.mbuf_size
        ));
        opts.mbuf_size = fitted.mbuf_size;
    }
    Ok(notes)
}

/// Where `--pcap` is to be written, checked before the EAL starts: a missing directory was
/// found only once both ports were up, as a run-time failure that did not name --pcap.
/// Nothing is left here (a run that fails later leaves no empty capture behind).
fn check_pcap_path(path: &Path) -> Result<(), String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(format!(
            "--pcap {}: no directory {}",
            path.display(),
            dir.display()
        ));
    }
    if path.is_dir() {
        return Err(format!(
            "--pcap {}: a directory; give a file name",
            path.display()
        ));
    }
    // Whether it can be written (a read-only file system, /proc, a directory without write
    // permission): found once both ports were up, with status 1 (an outside-in review). An
    // existing regular file is opened without truncating it, a new one made and removed
    // again. A FIFO, a device or a dangling symbolic link is left to the run: opening a FIFO
    // here would block until a reader came, and close on a reader that was there (a live
    // capture's), and a link's target is made by the capture itself.
    let opened = match std::fs::metadata(path) {
        Ok(m) if m.is_file() => std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map(drop),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::fs::symlink_metadata(path).is_ok() {
                Ok(())
            } else {
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(path)
                    .and_then(|_| std::fs::remove_file(path))
            }
        }
        Err(e) => Err(e),
    };
    opened.map_err(|e| format!("--pcap {}: cannot be written: {e}", path.display()))
}

/// A perf server's --region-bytes the machine, and the EAL's heap, can hold: it was taken up
/// to 1 TiB, and the server listened until its first client came, then failed to allocate the
/// region ("Cannot allocate memory") and ended that client's association. `heap` is what
/// `eal_heap` found the EAL limited to, with how it was given.
fn region_fits(
    opts: &Options,
    machine: Option<u64>,
    heap: Option<(u64, String)>,
) -> Result<(), String> {
    if !opts.ddp_listen {
        return Ok(());
    }
    // With --ddp-verify the read-back's region is as large (an outside-in review).
    let need = opts.server_region_bytes();
    match (machine, heap) {
        (Some(total), _) if need > total => Err(format!(
            "{} is more than this machine's memory ({} MiB): each session's region is \
             allocated whole in DPDK memory",
            opts.region_bytes_named(),
            total >> 20
        )),
        (_, Some((heap, how))) if need > heap => Err(format!(
            "{} is more than the EAL's memory ({how}): each session's region is allocated \
             whole in it; give the EAL more with -m MB, or a smaller --region-bytes",
            opts.region_bytes_named()
        )),
        _ => Ok(()),
    }
}

/// The EAL's heap when its arguments fix it, with how they fix it: `--no-huge` maps `-m` MB
/// (64 MiB without it, DPDK's MEMSIZE_IF_NO_HUGE_PAGE) once and never grows, nor does
/// `--legacy-mem` past its `-m` or, on one socket, the largest `--socket-mem`. Otherwise
/// (hugepages, dynamic memory) `-m` is only what is reserved at start: the heap grows into
/// whatever hugepages are free when the region is made, which nothing here can know, so None.
fn eal_heap(eal_args: &[String]) -> Option<(u64, String)> {
    let mb = |v: &str| v.parse::<u64>().ok().map(|m| m << 20);
    let (mut m, mut socket_mem) = (None, None);
    let mut words = eal_args.iter().skip(1);
    while let Some(a) = words.next() {
        if a == "-m" {
            m = words.next().map(|v| (mb(v), v.clone()));
        } else if let Some(v) = a.strip_prefix("-m").filter(|v| !v.is_empty()) {
            m = Some((mb(v), v.to_string()));
        } else if a == "--socket-mem" {
            socket_mem = words.next().cloned();
        } else if let Some(v) = a.strip_prefix("--socket-mem=") {
            socket_mem = Some(v.to_string());
        }
    }
    let flag = |f: &str| eal_args.iter().any(|a| a == f);
    match (m, socket_mem) {
        // A value the EAL reads otherwise than we would (atoi): its heap is not ours to guess.
        (Some((None, _)), _) => None,
        (Some((Some(bytes), given)), _) if flag("--no-huge") || flag("--legacy-mem") => {
            Some((bytes, format!("-m {given}: {} MiB", bytes >> 20)))
        }
        (None, _) if flag("--no-huge") => {
            Some((64 << 20, "--no-huge without -m: 64 MiB".to_string()))
        }
        (None, Some(list)) if flag("--legacy-mem") => {
            let each: Option<Vec<u64>> = list.split(',').map(mb).collect();
            let most = each?.into_iter().max()?;
            Some((
                most,
                format!(
                    "--legacy-mem --socket-mem {list}: {} MiB on a socket at most",
                    most >> 20
                ),
            ))
        }
        _ => None,
    }
}

fn load_script(path: &Path) -> Result<Script, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read cmdline file {}: {e}", path.display()))?;
    let mut cmds = Vec::new();
    for (i, line) in text.lines().enumerate() {
        match shell::parse_line(line) {
            Ok(Some(c)) => cmds.push((line.trim().to_string(), i + 1, c)),
            Ok(None) => {}
            Err(e) => return Err(format!("{}:{}: {e}", path.display(), i + 1)),
        }
    }
    Ok(cmds)
}

/// The EAL was given devices and made a port of none: each driver refused its device and
/// said why on the EAL's log, above. Without this the job would ask for a device it was given.
fn no_port_made(eal: &Eal, eal_args: &[String]) -> Option<String> {
    if !eal.port_ids().is_empty() {
        return None;
    }
    let names: Vec<&str> = crate::vdev::device_specs(eal_args)
        .into_iter()
        .map(|(at, prefix)| eal_args[at][prefix..].split(',').next().unwrap_or_default())
        .collect();
    (!names.is_empty()).then(|| {
        format!(
            "no port: the EAL made none of the devices given ({}): their drivers refused them \
             (DPDK's messages above say why; --log-level=*:info tells more)",
            names.join(", ")
        )
    })
}

fn eal_hint(eal_args: &[String]) -> &'static str {
    let no_huge = eal_args.iter().any(|a| a == "--no-huge");
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    huge_hint(no_huge, &read("/proc/meminfo"), &read("/proc/mounts"))
}

/// What to do when the EAL failed on hugepages, from `/proc/meminfo` and `/proc/mounts`:
/// none reserved, reserved but no hugetlbfs mounted (the EAL said "Permission denied" and no
/// more), or none free.
fn huge_hint(no_huge: bool, meminfo: &str, mounts: &str) -> &'static str {
    let pages = |key: &str| {
        meminfo
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let mounted = mounts
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("hugetlbfs"));
    if no_huge {
        ""
    } else if pages("HugePages_Total:") == 0 {
        "\n  no hugepages are reserved: run deploy/setup.sh, or pass --no-huge -m 512 to the EAL"
    } else if !mounted {
        "\n  hugepages are reserved but no hugetlbfs is mounted: run deploy/setup.sh (it mounts \
         /dev/hugepages), or pass --no-huge -m 512 to the EAL"
    } else if pages("HugePages_Free:") == 0 {
        "\n  no hugepage is free (other processes hold them all): pass --no-huge -m 512 to the \
         EAL, or stop one"
    } else {
        ""
    }
}

/// With `--json`, a command that failed says so on stdout, where its answer would have been:
/// a program driving the shell learns which command failed, and why, from the one stream it
/// reads (the sentence still goes to stderr). The command is shown with its keys hidden.
fn command_error(json: bool, command: &str, error: &str) {
    if json {
        outln!(
            "{}",
            serde_json::json!({"command_error": {
                "command": shell::key_hidden(command.trim()),
                "error": error,
            }})
        );
    }
}

/// Runs scripts, auto-start, then the shell or the wait; returns the exit status.
fn drive(app: &mut impl Shell, opts: &Options, scripts: &[Script], signalled: &AtomicBool) -> i32 {
    // From the start, scripts included: "stop and exit after SECS seconds" (it counted from the
    // scripts' end, and a script's `wait closed` held the process for as long as its peer
    // took: found by an outside-in test). A command that waits for something gives up at it;
    // one that merely takes time (registering a large region) runs to its end, and so does
    // the script (the deployment's example registers 1 GiB under `--run-for 1`).
    // Options::validate bounds it: no overflow.
    let deadline = opts
        .run_for
        .map(|s| Instant::now() + Duration::from_secs_f64(s));
    if let (Some(d), Some(secs)) = (deadline, opts.run_for) {
        app.set_deadline(d, secs);
    }
    for (n, script) in scripts.iter().enumerate() {
        let file = opts.cmdline_file[n].display();
        note(opts.json, format_args!("Read CLI commands from {file}"));
        for (i, (text, line, cmd)) in script.iter().enumerate() {
            // A signal stops a script between commands too (a waiting command gives up).
            if signalled.load(Ordering::Relaxed) {
                errln!("ddpdk: {file}:{line}: interrupted by a signal; the rest not run");
                return EXIT_FAILURE;
            }
            note(
                opts.json,
                format_args!("ddpdk> {}", shell::key_hidden(text)),
            );
            match app.execute(cmd) {
                Ok(Flow::Continue) => {}
                Ok(Flow::Quit) => return 0,
                Err(e) => {
                    command_error(opts.json, text, &e);
                    // As a signal between commands says it (usage.md quotes it): a signal or
                    // --run-for that a waiting command gave up at said only its own words.
                    let rest =
                        if i + 1 < script.len() || scripts[n + 1..].iter().any(|s| !s.is_empty()) {
                            "; the rest not run"
                        } else {
                            ""
                        };
                    errln!("ddpdk: {file}:{line}: {e}{rest}");
                    return EXIT_FAILURE;
                }
            }
        }
    }
    if (opts.auto_start || !opts.interactive) && !app.is_running() {
        if let Err(e) = app.start(opts.tx_first) {
            errln!("ddpdk: {e}");
            return EXIT_FAILURE;
        }
    }
    // At a terminal a typo is just a typo; from a pipe it makes the exit status 1, so that
    // scripts notice.
    let typos_count = !std::io::stdin().is_terminal();
    let input = if opts.interactive {
        Some(spawn_reader(opts.json))
    } else {
        None
    };
    if !opts.interactive && opts.run_for.is_none() {
        note(opts.json, format_args!("{}", app.running_note()));
    }
    // Options::validate bounds the period, so this addition cannot overflow.
    let period = (opts.stats_period > 0).then(|| Duration::from_secs(opts.stats_period));
    let mut next_stats = period.map(|p| Instant::now() + p);
    let mut status = 0;
    loop {
        if signalled.load(Ordering::Relaxed) {
            note(
                opts.json,
                format_args!("\nSignal received, preparing to exit..."),
            );
            break;
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        if let (Some(p), Some(t)) = (period, next_stats) {
            if now >= t {
                app.periodic_stats();
                next_stats = Some(t + p);
            }
        }
        app.tick();
        match &input {
            None => std::thread::sleep(TICK),
            Some((rx, ack)) => match rx.recv_timeout(TICK) {
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) | Ok(Input::End) => break,
                Ok(Input::NotUtf8) => {
                    let e = "Bad input: the line is not UTF-8 (nothing was run)";
                    command_error(opts.json, "(not UTF-8)", e);
                    note(opts.json, format_args!("{e}"));
                    if typos_count {
                        status = EXIT_FAILURE;
                    }
                    let _ = ack.send(());
                }
                Ok(Input::Line(l)) => {
                    let flow = match shell::parse_line(&l) {
                        Ok(None) => Flow::Continue,
                        Ok(Some(cmd)) => app.execute(&cmd).unwrap_or_else(|e| {
                            command_error(opts.json, &l, &e);
                            note(opts.json, format_args!("{e}"));
                            if typos_count {
                                status = EXIT_FAILURE;
                            }
                            Flow::Continue
                        }),
                        Err(e) => {
                            command_error(opts.json, &l, &e);
                            note(opts.json, format_args!("{e}"));
                            if typos_count {
                                status = EXIT_FAILURE;
                            }
                            Flow::Continue
                        }
                    };
                    if flow == Flow::Quit {
                        break;
                    }
                    let _ = ack.send(());
                }
            },
        }
    }
    status
}

/// Reads shell lines on a helper thread so the main lcore keeps serving signals, deadlines and
/// periodic statistics. The reader waits for an acknowledgement after each line, so a command's
/// output is printed before the next prompt.
fn spawn_reader(json: bool) -> (mpsc::Receiver<Input>, mpsc::Sender<()>) {
    let (tx, rx) = mpsc::channel();
    let (ack_tx, ack_rx) = mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("ddpdk-shell".into())
        .spawn(move || {
            if std::io::stdin().is_terminal() {
                read_terminal(&tx, &ack_rx);
            } else {
                read_pipe(&tx, &ack_rx, json);
            }
            let _ = tx.send(Input::End);
        })
        .map(|_| ())
        .unwrap_or_else(|e| errln!("ddpdk: cannot start the shell thread: {e}"));
    (rx, ack_tx)
}

fn read_pipe(tx: &mpsc::Sender<Input>, ack: &mpsc::Receiver<()>, json: bool) {
    // Bytes, not `lines()`: a line that is not UTF-8 is an error of that line, where
    // `lines()` ended the input there and the shell exited 0 with the rest unread.
    let mut stdin = std::io::stdin().lock();
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        match stdin.read_until(b'\n', &mut bytes) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let input = match std::str::from_utf8(&bytes) {
            Ok(line) => {
                let line = line.trim_end_matches(['\n', '\r']).to_string();
                if !line.trim().is_empty() {
                    note(json, format_args!("ddpdk> {}", shell::key_hidden(&line)));
                }
                Input::Line(line)
            }
            Err(_) => Input::NotUtf8,
        };
        if tx.send(input).is_err() || ack.recv().is_err() {
            return;
        }
    }
}

fn read_terminal(tx: &mpsc::Sender<Input>, ack: &mpsc::Receiver<()>) {
    let config = rustyline::Config::builder()
        .auto_add_history(false)
        .max_history_size(1000)
        .map(|b| b.build());
    let Ok(config) = config else { return };
    let Ok(mut rl) =
        rustyline::Editor::<ShellHelper, rustyline::history::DefaultHistory>::with_config(config)
    else {
        read_pipe(tx, ack, false);
        return;
    };
    rl.set_helper(Some(ShellHelper));
    let history = std::env::var_os("HOME").map(|h| Path::new(&h).join(".ddpdk_history"));
    if let Some(h) = &history {
        let _ = rl.load_history(h);
    }
    // Ctrl-C and Ctrl-D at the prompt end the session, like testpmd's quit; a line that is
    // not UTF-8 (a stray byte) is refused, and the session goes on.
    loop {
        let line = match rl.readline("ddpdk> ") {
            Ok(line) => line,
            // rustyline's decoder reports a byte that is not UTF-8 as InvalidData.
            Err(rustyline::error::ReadlineError::Io(e))
                if e.kind() == std::io::ErrorKind::InvalidData =>
            {
                if tx.send(Input::NotUtf8).is_err() || ack.recv().is_err() {
                    break;
                }
                continue;
            }
            Err(_) => break,
        };
        // A line with a key (`ipsec sa add ... aead_key ...`, misspelt `aead-key`, key
        // material anywhere) never reaches the history file.
        if !line.trim().is_empty() && !shell::holds_key(&line) {
            let _ = rl.add_history_entry(line.as_str());
        }
        // Saved before the line runs: `quit` ends the process without waking this thread
        // again, and a history that only a clean exit writes loses the session.
        if let Some(h) = &history {
            let _ = rl.append_history(h);
        }
        if tx.send(Input::Line(line)).is_err() || ack.recv().is_err() {
            break;
        }
    }
}

/// Tab completion from the shell grammar.
struct ShellHelper;

impl rustyline::completion::Completer for ShellHelper {
    type Candidate = String;
    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let (start, words) = shell::complete(&line[..pos]);
        Ok((start, words.into_iter().map(|w| format!("{w} ")).collect()))
    }
}
impl rustyline::hint::Hinter for ShellHelper {
    type Hint = String;
}
impl rustyline::highlight::Highlighter for ShellHelper {}
impl rustyline::validate::Validator for ShellHelper {}
impl rustyline::Helper for ShellHelper {}

#[cfg(test)]
mod tests {
    use super::huge_hint;

    /// `--pcap`'s check before the EAL: what cannot be written is refused, and nothing it
    /// probes is changed or blocked on. A FIFO is not opened (opening blocked until a reader
    /// came: a live capture through a named pipe hung; an independent review), nor a dangling
    /// link (its target is the capture's to make), and a file of its own is left as it was.
    #[test]
    fn the_pcap_check_refuses_what_cannot_be_written_and_leaves_the_rest_as_it_was() {
        let dir = std::env::temp_dir().join(format!("ddpdk-pcapcheck-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let fifo = dir.join("live.pcap");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        // With no reader, opening the FIFO for writing would block this test for ever.
        assert_eq!(super::check_pcap_path(&fifo), Ok(()));
        let link = dir.join("link.pcap");
        std::os::unix::fs::symlink(dir.join("target.pcap"), &link).expect("symlink");
        assert_eq!(super::check_pcap_path(&link), Ok(()));
        assert!(
            !dir.join("target.pcap").exists(),
            "the link's target was made"
        );
        let file = dir.join("old.pcap");
        std::fs::write(&file, b"kept").expect("write");
        assert_eq!(super::check_pcap_path(&file), Ok(()));
        assert_eq!(std::fs::read(&file).expect("read"), b"kept");
        let new = dir.join("new.pcap");
        assert_eq!(super::check_pcap_path(&new), Ok(()));
        assert!(!new.exists(), "the probe's file was left behind");
        let e = super::check_pcap_path(std::path::Path::new("/proc/ddpdk.pcap"))
            .expect_err("/proc takes no file");
        assert!(
            e.starts_with("--pcap /proc/ddpdk.pcap: cannot be written: "),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A job named after EAL options was skipped by the EAL: the default job ran.
    #[test]
    fn a_job_named_among_the_eal_options_is_refused_with_where_it_goes() {
        let args = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        for bad in [
            "ddpdk -l 0-1 loopback",
            "ddpdk --no-huge perf -l 0",
            "ddpdk --no-huge -m 512 --no-pci endpoint",
        ] {
            let e = super::job_among_eals(&args(bad)).expect(bad);
            assert!(
                e.contains(": the job goes first, before the EAL options"),
                "{e}"
            );
        }
        // An option's value may be any word: a prefix named after a job is one.
        for good in [
            "ddpdk --file-prefix perf -l 0-1",
            "ddpdk -l 0-1 --vdev net_ring0 --no-huge",
            "ddpdk",
        ] {
            assert_eq!(super::job_among_eals(&args(good)), None, "{good}");
        }
    }

    /// A word among the EAL options that no option takes as its value was skipped by the EAL
    /// without a word; the values of the EAL's options, however given, still pass.
    #[test]
    fn a_word_among_the_eal_options_that_is_no_options_value_is_refused() {
        let args = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        for (bad, word) in [
            ("ddpdk -l 0-1 --no-huge 512", "512"),
            ("ddpdk --no-pci stray -l 0-1", "stray"),
            ("ddpdk -m 512 1024", "1024"),
            ("ddpdk -l0-1 x", "x"),
            ("ddpdk --vdev=net_ring0 y", "y"),
            ("ddpdk --huge-unlink always", "always"),
            ("ddpdk -v z", "z"),
            ("ddpdk --file-prefix p -", "-"),
        ] {
            let e = super::stray_among_eals(&args(bad)).expect(bad);
            assert!(
                e.starts_with(&format!(
                    "{word}: among the EAL options, but no option's value"
                )),
                "{bad}: {e}"
            );
        }
        for good in [
            "ddpdk -l 0-1 -m 512 --vdev net_ring0 -a 0000:03:00.0 --file-prefix p \
             --log-level *:error --no-huge --no-pci",
            "ddpdk -c 3 -n 4 -b 0000:00:01.0 -d /usr/lib/x -r 2 -s 0x2 -S 1 --lcores 0@0,1@1",
            "ddpdk --main-lcore 0 --socket-mem 512 --socket-limit 1024 --huge-dir /mnt/h \
             --iova-mode va --proc-type auto --syslog daemon --base-virtaddr 0x100000000",
            "ddpdk --trace .* --trace-dir /tmp --trace-bufsz 2M --trace-mode d \
             --vfio-intr msix --vfio-vf-token x --mbuf-pool-ops-name ring_mp_mc \
             --force-max-simd-bitwidth 512 --allow 0000:03:00.0 --block 0000:03:00.1",
            "ddpdk -vl 0-1 -m512 --huge-unlink=never --in-memory --single-file-segments",
            // getopt takes an unambiguous prefix: --file-p is --file-prefix.
            "ddpdk --file-p p -l 0",
            // An option the EAL lacks is the EAL's to refuse; its value is not judged.
            "ddpdk --no-such-option value",
            "ddpdk",
        ] {
            assert_eq!(super::stray_among_eals(&args(good)), None, "{good}");
        }
    }

    /// A perf server's region larger than the machine is refused at start, not when the
    /// first client's session asks for it.
    #[test]
    fn a_perf_server_region_larger_than_the_machine_is_refused_at_start() {
        use clap::Parser;
        let opts = |s: &str| {
            crate::options::Options::try_parse_from(s.split_whitespace()).expect("parses")
        };
        let machine = Some(8u64 << 30);
        let big = opts("ddpdk --ip 198.18.0.2 --ddp-listen --region-bytes 1099511627776");
        let e = super::region_fits(&big, machine, None).expect_err("refused");
        assert!(
            e.contains(
                "--region-bytes 1099511627776 is more than this machine's memory (8192 MiB)"
            ),
            "{e}"
        );
        let fits = opts("ddpdk --ip 198.18.0.2 --ddp-listen --region-bytes 67108864");
        assert_eq!(super::region_fits(&fits, machine, None), Ok(()));
        assert_eq!(super::region_fits(&big, None, None), Ok(()));
    }

    /// A perf server's region larger than the EAL's heap, where the EAL's arguments fix it
    /// (`--no-huge`, `--legacy-mem`), is refused at start naming -m: it failed at the first
    /// client ("Cannot allocate memory"). On hugepages `-m` is no limit, and nothing is said.
    #[test]
    fn a_perf_server_region_larger_than_the_eals_memory_is_refused_at_start_naming_m() {
        use clap::Parser;
        let args = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        let heap = |s: &str| super::eal_heap(&args(s));
        let machine = Some(64u64 << 30);
        let gib = crate::options::Options::try_parse_from(
            "ddpdk --ip 198.18.0.2 --ddp-listen --region-bytes 1G".split_whitespace(),
        )
        .expect("parses");
        for (eal, says) in [
            ("ddpdk -l 0 --no-huge -m 512", "(-m 512: 512 MiB)"),
            ("ddpdk -l 0 --no-huge -m512 --no-pci", "(-m 512: 512 MiB)"),
            ("ddpdk --no-huge -l 0", "(--no-huge without -m: 64 MiB)"),
            ("ddpdk --legacy-mem -m 1000", "(-m 1000: 1000 MiB)"),
            (
                "ddpdk --legacy-mem --socket-mem=512,768",
                "(--legacy-mem --socket-mem 512,768: 768 MiB on a socket at most)",
            ),
        ] {
            let e = super::region_fits(&gib, machine, heap(eal)).expect_err(eal);
            assert!(
                e.starts_with("--region-bytes 1073741824 is more than the EAL's memory ")
                    && e.contains(says)
                    && e.contains("give the EAL more with -m MB"),
                "{eal}: {e}"
            );
        }
        for fits in [
            "ddpdk --no-huge -m 1024",
            "ddpdk --no-huge -m 2048",
            // Hugepages in dynamic mode: -m is reserved at start, the heap grows past it.
            "ddpdk -m 512",
            "ddpdk --socket-mem 512",
            "ddpdk",
            // Not a number the EAL reads as we would: not ours to judge.
            "ddpdk --no-huge -m 512M",
        ] {
            assert_eq!(
                super::region_fits(&gib, machine, heap(fits)),
                Ok(()),
                "{fits}"
            );
        }
        // With --ddp-verify a client's read-back region is as large: 600 MiB twice does not
        // fit -m 1024 (an outside-in review: found at the first client).
        let verify = crate::options::Options::try_parse_from(
            "ddpdk --ip 198.18.0.2 --ddp-listen --ddp-verify --region-bytes 600M"
                .split_whitespace(),
        )
        .expect("parses");
        let e = super::region_fits(&verify, machine, heap("ddpdk --no-huge -m 1024"))
            .expect_err("twice 600M in 1024M");
        assert!(
            e.starts_with(
                "--region-bytes 629145600 (twice, with --ddp-verify's read-back) is more"
            ),
            "{e}"
        );
    }

    const MOUNTED: &str = "nodev /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n";

    /// Hugepages reserved but no hugetlbfs mounted: the EAL says only "Permission denied";
    /// the hint says what to mount or to run with --no-huge.
    #[test]
    fn an_eal_failure_without_a_hugetlbfs_mount_says_to_mount_one_or_use_no_huge() {
        let reserved = "HugePages_Total:     512\nHugePages_Free:      384\n";
        let h = huge_hint(false, reserved, "proc /proc proc rw 0 0\n");
        assert!(
            h.contains("no hugetlbfs is mounted") && h.contains("--no-huge"),
            "{h:?}"
        );
        assert_eq!(huge_hint(false, reserved, MOUNTED), "");
        assert_eq!(huge_hint(true, reserved, ""), "");
        let none = "HugePages_Total:       0\nHugePages_Free:        0\n";
        assert!(huge_hint(false, none, MOUNTED).contains("no hugepages are reserved"));
        let all_used = "HugePages_Total:     512\nHugePages_Free:        0\n";
        assert!(huge_hint(false, all_used, MOUNTED).contains("no hugepage is free"));
    }
}
