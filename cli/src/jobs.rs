//! `ddpdk JOB [EAL options] -- [options]`: one subcommand per job, each with its own help and
//! examples. A job is a name for one of the modes the options select (they stay valid on
//! their own: `ddpdk [EAL] -- --ddp-loopback` is `ddpdk loopback [EAL]`); the subcommand adds
//! its mode's option and refuses another job's.

use clap::CommandFactory;

use crate::options::Options;

/// One of ddpdk's jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Job {
    /// testpmd's forwarding engines (the default without a job).
    Fwd,
    /// Two DDP endpoints back to back in one process (`--ddp-loopback`).
    Loopback,
    /// A DDP endpoint driven by shell commands (`--ip`).
    Endpoint,
    /// The perftest-style tool: a server that offers regions (`--ddp-listen`) or a client that
    /// writes into them and reports goodput and latency (`--ddp-connect ADDR`).
    PerfServer,
    PerfClient(String),
}

struct Spec {
    name: &'static str,
    about: &'static str,
    /// Its own options (clap ids), shown in its help with the groups below; every other
    /// option is refused with the job (a job that took an option and did nothing with it
    /// would mislead).
    options: &'static [&'static str],
    examples: &'static str,
}

const COMMON: &[&str] = &[
    "json",
    "run_for",
    "mtu",
    "idle",
    "idle_sleep_max_us",
    "link_timeout",
];
/// Options of the jobs that run DDP endpoints on a port of their own.
const NET: &[&str] = &[
    "ip",
    "mac",
    "ipsec",
    "ipsec_config",
    "ipsec_socket",
    "ipsec_crypto_dev",
    "ipsec_default",
    // The port's rings and mbufs (Node::start).
    "rxd",
    "txd",
    "mbuf_size",
];
const DDP: &[&str] = &[
    "data_cores",
    "streams",
    "sctp_port",
    "sctp",
    // Refused by every job until an outside-in review tried the documented option.
    "max_assocs_per_peer",
    "rto_min_ms",
    "rto_initial_ms",
    "fault_drop",
    "fault_duplicate",
    "fault_corrupt",
    "fault_reorder",
    "fault_delay_us",
    "fault_seed",
];

const FWD: Spec = Spec {
    name: "fwd",
    about: "Forward packets between ports with testpmd's engines (io, rxonly, txonly) and \
            ddpdk's own (rxplace, echo, ping), driven by testpmd's options and shell commands.",
    options: &[
        "interactive",
        "auto_start",
        "nb_cores",
        "rxq",
        "txq",
        "rxd",
        "txd",
        "burst",
        "forward_mode",
        "txpkts",
        "txsplit",
        "ping_frames",
        "echo_trim",
        "mbuf_size",
        "tx_retry",
        "tx_first",
        "stats_period",
        "cmdline_file",
        "ring_pair",
        "total_num_mbufs",
    ],
    examples: "\
Examples:
  ddpdk fwd --no-huge -m 512 --no-pci -l 0-1 -- --ring-pair --tx-first -a --run-for 5 --stats-period 1
  ddpdk fwd -l 0-1 --vdev=net_memif0,role=server -- -i
  ddpdk fwd -l 0-1 -a 0000:03:00.0 -- --forward-mode rxonly --cmdline-file cmds.txt -a",
};

const LOOPBACK: Spec = Spec {
    name: "loopback",
    about: "Two DDP/SCTP endpoints on two net_ring ports wired back to back, in one process: \
            an association, a DDP session, tagged and untagged messages of several sizes with \
            every placed byte verified, RDMA Reads and atomics, teardown; throughput and \
            latency per size. The README's `make run`.",
    // Its two endpoints are built with fixed settings (a 1480-byte path, the default SCTP
    // parameters): the DDP and link options of the other jobs would be ignored, so they are
    // refused.
    options: &[
        "ddp_bytes",
        "data_cores",
        "pcap",
        "json",
        "idle",
        "idle_sleep_max_us",
    ],
    examples: "\
Examples:
  ddpdk loopback --no-huge -m 512 --no-pci -l 0-1 --
  ddpdk loopback --no-huge -m 512 --no-pci -l 0-1 -- --ddp-bytes 8388608 --pcap ddp.pcap",
};

const ENDPOINT: Spec = Spec {
    name: "endpoint",
    about: "A DDP endpoint on the EAL's first port, driven by shell commands (-i, at a \
            terminal or piped in; or --cmdline-file): associations, sessions, memory registration, \
            tagged and untagged sends, RDMA Reads, IPsec (`help ddp` lists them). Its figures \
            are on DPDK's telemetry socket too (docs/telemetry.md).",
    options: &[
        "interactive",
        "cmdline_file",
        "listen",
        "service",
        "reconnect",
        "reconnect_port",
        "stats_period",
    ],
    examples: "\
Examples:
  ddpdk endpoint -l 0-1 --no-pci --file-prefix srv --vdev=net_memif0,role=server -- --ip 198.18.0.2 --listen -i
  ddpdk endpoint -l 0-1 --no-pci --file-prefix cli --vdev=net_memif0,role=client -- --ip 198.18.0.1 --cmdline-file client.txt --json
  ddpdk endpoint -l 0-1 --no-pci --vdev=net_af_packet0,iface=veth0 -- --ip 198.18.0.2 --service echo --sctp-port 7",
};

const PERF: Spec = Spec {
    name: "perf",
    about: "perftest for DDP over SCTP between two processes: `perf server` accepts \
            associations and offers each session a registered region; `perf client ADDR` \
            writes tagged messages into it for --run-for seconds and reports goodput (window \
            > 1) or write latency (--ddp-window 1, ib_write_lat's semantics), byte-exact \
            against the server's region; with --ddp-op read it reads the region with RDMA \
            Reads instead (ib_read_bw, ib_read_lat), every read checked.",
    options: &[
        "ddp_size",
        "ddp_window",
        "ddp_messages",
        "ddp_source",
        "ddp_op",
        "region_bytes",
        "ddp_verify",
    ],
    examples: "\
Examples:
  ddpdk perf server -l 0 --no-huge -m 1024 --no-pci --file-prefix srv --vdev=net_memif0,role=server -- --ip 198.18.0.2
  ddpdk perf client 198.18.0.2 -l 1 --no-huge -m 1024 --no-pci --file-prefix cli --vdev=net_memif0,role=client -- --ip 198.18.0.1 --run-for 5
  ddpdk perf client 198.18.0.2 ... -- --ip 198.18.0.1 --ddp-window 1 --ddp-size 64 --json
  ddpdk perf client 198.18.0.2 ... -- --ip 198.18.0.1 --ddp-op read --ddp-size 65536",
};

const SPECS: [&Spec; 4] = [&FWD, &LOOPBACK, &ENDPOINT, &PERF];

/// perf's options one side alone reads (clap ids): refused on the other side, where they were
/// taken and ignored (an outside-in test), and left out of that side's help.
const PERF_CLIENT_ONLY: [&str; 5] = [
    "ddp_op",
    "ddp_window",
    "ddp_messages",
    "ddp_size",
    "ddp_source",
];
/// A client opens one association: the limit on a peer's is the listening side's.
const PERF_SERVER_ONLY: [&str; 2] = ["region_bytes", "max_assocs_per_peer"];

impl Job {
    /// Its word on the command line (`perf` for both sides).
    pub fn name(&self) -> &'static str {
        self.spec().name
    }

    fn spec(&self) -> &'static Spec {
        match self {
            Job::Fwd => &FWD,
            Job::Loopback => &LOOPBACK,
            Job::Endpoint => &ENDPOINT,
            Job::PerfServer | Job::PerfClient(_) => &PERF,
        }
    }
}

/// What the words after the program name ask for.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// No job named: the options alone select the mode.
    None,
    Job(Job),
    /// Print this help and exit 0.
    Help(String),
    /// `ddpdk preflight [EAL options]`: the host checked for a run, no EAL started
    /// (`preflight/`); the job's word is taken from `argv`.
    Preflight,
}

/// Takes a job's words (`loopback`, `perf client ADDR`, `help [JOB]`) from the front of `argv`
/// (after the program name).
pub fn take(argv: &mut Vec<String>) -> Result<Parsed, String> {
    let Some(word) = argv.get(1).cloned() else {
        return Ok(Parsed::None);
    };
    let job = match word.as_str() {
        "fwd" => Job::Fwd,
        "loopback" => Job::Loopback,
        "preflight" => {
            argv.remove(1);
            return Ok(Parsed::Preflight);
        }
        "endpoint" | "shell" => Job::Endpoint,
        "perf" => match argv.get(2).map(String::as_str) {
            Some("server") => {
                argv.remove(2);
                Job::PerfServer
            }
            Some("client") if matches!(argv.get(3).map(String::as_str), Some("-h" | "--help")) => {
                return Ok(Parsed::Help(job_help(&Job::PerfClient(String::new()))))
            }
            Some("client") => {
                let addr =
                    argv.get(3).filter(|a| !a.starts_with('-')).cloned().ok_or(
                        "perf client needs the server's address: ddpdk perf client ADDR ...",
                    )?;
                if let Err(e) = crate::options::parse_ip(&addr) {
                    return Err(format!(
                        "perf client {addr}: {e} (ddpdk perf client ADDR ...)"
                    ));
                }
                argv.drain(2..4);
                Job::PerfClient(addr)
            }
            Some("-h" | "--help") => return Ok(Parsed::Help(help(&PERF))),
            // A side is required, as a missing subcommand is in clap: a script that forgot it
            // must not read help text with status 0 as a run that succeeded.
            None => {
                return Err(
                    "perf needs a side: `ddpdk perf server ...` or `ddpdk perf client ADDR ...` (see 'ddpdk perf --help')"
                        .into(),
                )
            }
            Some(other) => {
                return Err(format!(
                "perf {other}: say `perf server` or `perf client ADDR` (see 'ddpdk perf --help')"
            ))
            }
        },
        "help" => {
            let text = match argv.get(2) {
                None => Options::command().render_help().to_string(),
                Some(j) if j == "preflight" => crate::preflight::HELP.to_string(),
                Some(j) => match SPECS.iter().find(|s| s.name == *j) {
                    Some(spec) => help(spec),
                    None => {
                        return Err(format!(
                            "help {j}: no such job (fwd, loopback, endpoint, perf, preflight)"
                        ))
                    }
                },
            };
            return Ok(Parsed::Help(text));
        }
        // A word where a job goes that names none (`ddpdk lopback ...`): the EAL skipped it
        // and the default job ran, or refused the loopback's options as fwd's.
        w if !w.starts_with('-') => {
            return Err(format!(
                "{w}: no such job (fwd, loopback, endpoint, perf, preflight; see 'ddpdk --help')"
            ))
        }
        _ => return Ok(Parsed::None),
    };
    argv.remove(1);
    // `ddpdk JOB --help` (or -h): the job's own help.
    if argv.len() == 2 && matches!(argv[1].as_str(), "--help" | "-h") {
        return Ok(Parsed::Help(job_help(&job)));
    }
    Ok(Parsed::Job(job))
}

/// The options that select another job than `job`.
fn foreign_modes(job: &Job) -> &'static [&'static str] {
    match job {
        Job::Fwd => &["--ddp-loopback", "--ddp-listen", "--ddp-connect", "--ip"],
        Job::Loopback => &["--ddp-listen", "--ddp-connect", "--ip"],
        Job::Endpoint => &["--ddp-loopback", "--ddp-listen", "--ddp-connect"],
        Job::PerfServer | Job::PerfClient(_) => {
            &["--ddp-loopback", "--ddp-listen", "--ddp-connect"]
        }
    }
}

/// Adds the job's mode to the application options (`app[0]` is the program name), after
/// checking that none selects another job. `--help` among them prints the job's help.
pub fn apply(job: &Job, app: &mut Vec<String>) -> Result<Option<String>, String> {
    if app.iter().skip(1).any(|a| a == "--help" || a == "-h") {
        return Ok(Some(job_help(job)));
    }
    let spec = job.spec();
    // The option a perf side stands for (docs/usage.md: `--ddp-listen` is `perf server`) was
    // called "another job's option" (found by an outside-in test).
    let own = match job {
        Job::PerfServer => Some(("--ddp-listen", "perf server", "leave it out")),
        Job::PerfClient(_) => Some((
            "--ddp-connect",
            "perf client",
            "the address goes after `perf client`",
        )),
        _ => None,
    };
    for a in app.iter().skip(1) {
        let name = a.split('=').next().unwrap_or(a);
        if let Some((_, side, what)) = own.filter(|(o, _, _)| *o == name) {
            return Err(format!("{name} is what `ddpdk {side}` is already: {what}"));
        }
        if foreign_modes(job).contains(&name) {
            return Err(format!(
                "{name} is another job's option; `ddpdk {}` does not take it (see 'ddpdk --help')",
                spec.name
            ));
        }
    }
    refuse_others(job, app, &[], "")?;
    // perf's two sides share one list; what one side alone reads is refused on the other,
    // where it was taken and ignored (found by an outside-in test).
    let (side, theirs): (&str, &[&str]) = match job {
        Job::PerfServer => ("the client's (perf client)", &PERF_CLIENT_ONLY),
        Job::PerfClient(_) => ("the server's (perf server)", &PERF_SERVER_ONLY),
        _ => ("", &[]),
    };
    let theirs: Vec<String> = theirs
        .iter()
        .map(|id| format!("--{}", id.replace('_', "-")))
        .collect();
    if let Some(a) = app.iter().skip(1).find(|a| {
        let name = a.split('=').next().unwrap_or(a);
        theirs.iter().any(|t| t == name)
    }) {
        let name = a.split('=').next().unwrap_or(a);
        return Err(format!("{name} is {side} option (see 'ddpdk perf --help')"));
    }
    let mode: Vec<String> = match job {
        Job::Fwd | Job::Endpoint => Vec::new(),
        Job::Loopback => vec!["--ddp-loopback".into()],
        Job::PerfServer => vec!["--ddp-listen".into()],
        Job::PerfClient(addr) => vec!["--ddp-connect".into(), addr.clone()],
    };
    if *job == Job::Endpoint && !app.iter().any(|a| a == "--ip" || a.starts_with("--ip=")) {
        return Err("`ddpdk endpoint` needs --ip ADDR (see 'ddpdk endpoint --help')".into());
    }
    let at = app.len().min(1);
    app.splice(at..at, mode);
    Ok(None)
}

/// Refuses any option of `app` (`app[0]` the program name) that `job` does not take, but
/// those in `also` (clap ids: the mode options of the flag form); `how` follows the job's
/// name in the message.
fn refuse_others(job: &Job, app: &[String], also: &[&str], how: &str) -> Result<(), String> {
    let spec = job.spec();
    let cmd = Options::command();
    let mut allowed = shown(spec);
    allowed.extend(also);
    // testpmd's name for the data cores, which endpoint and perf take as --data-cores.
    if spec.name == "endpoint" || spec.name == "perf" {
        allowed.push("nb_cores");
    }
    for a in app.iter().skip(1) {
        let name = a.split('=').next().unwrap_or(a);
        let args: Vec<&clap::Arg> = if let Some(long) = name.strip_prefix("--") {
            cmd.get_arguments()
                .filter(|x| x.get_long() == Some(long))
                .collect()
        } else if let Some(shorts) = name
            .strip_prefix('-')
            .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphabetic()))
        {
            // -i, or flags run together (-ai).
            shorts
                .chars()
                .filter_map(|c| cmd.get_arguments().find(|x| x.get_short() == Some(c)))
                .collect()
        } else {
            Vec::new()
        };
        if let Some(arg) = args
            .iter()
            .find(|arg| !allowed.contains(&arg.get_id().as_str()))
        {
            // As it was typed: the long name, or the one short flag of a run.
            let shown = match (name.starts_with("--"), arg.get_short()) {
                (false, Some(c)) => format!("-{c}"),
                _ => name.to_string(),
            };
            return Err(format!(
                "{shown} is not an option of `ddpdk {0}`{how} (see 'ddpdk {0} --help')",
                spec.name
            ));
        }
    }
    Ok(())
}

/// The flag form (`ddpdk [EAL] -- --ddp-loopback ...`, no job named) refuses what its mode's
/// job refuses: options of another mode were taken and did nothing (`--ip` with
/// `--ddp-loopback`, `--pcap` on an endpoint), where the job form says so.
pub fn check_flag_form(opts: &Options, app: &[String]) -> Result<(), String> {
    let (job, mode, how): (Job, &[&str], &str) = if opts.ddp_loopback {
        (
            Job::Loopback,
            &["ddp_loopback"],
            " (what --ddp-loopback runs)",
        )
    } else if opts.ddp_listen {
        (
            Job::PerfServer,
            &["ddp_listen"],
            " (what --ddp-listen runs)",
        )
    } else if let Some(a) = opts.ddp_connect {
        (
            Job::PerfClient(a.to_string()),
            &["ddp_connect"],
            " (what --ddp-connect runs)",
        )
    } else if !opts.ip.is_empty() {
        (Job::Endpoint, &[], " (what --ip runs)")
    } else {
        (Job::Fwd, &[], "")
    };
    refuse_others(&job, app, mode, how)
}

/// The options `spec`'s job takes (clap ids): its own and its groups'.
fn shown(spec: &Spec) -> Vec<&'static str> {
    let mut shown: Vec<&str> = spec.options.to_vec();
    match spec.name {
        "endpoint" | "perf" => {
            shown.extend(DDP);
            shown.extend(NET);
            shown.extend(COMMON);
        }
        // A forwarding lcore polls without pause, as testpmd's do: --idle and
        // --idle-sleep-max-us were taken and did nothing (an outside-in review).
        "fwd" => shown.extend(
            COMMON
                .iter()
                .filter(|o| !matches!(**o, "idle" | "idle_sleep_max_us")),
        ),
        // loopback: its own list says all it takes.
        _ => {}
    }
    shown
}

/// A job's own words for an option the jobs share (clap id, help): one text did not fit both
/// (`endpoint --help` said `--stats-period` printed port statistics, and hid that it takes
/// testpmd's `--nb-cores`: an outside-in review).
fn own_help(job: &str) -> &'static [(&'static str, &'static str)] {
    const DATA_CORES: &str = "Data cores of the DDP endpoint (testpmd's --nb-cores is taken for \
         it too): threads that own associations and place inline, on the EAL's worker lcores; \
         the control side is on the main one. With more than one, associations are steered by \
         their SCTP 5-tuple (RSS or rte_flow where the port has them, in software otherwise)";
    match job {
        "endpoint" => &[
            (
                "stats_period",
                "Print the data cores' and the control thread's counters every N seconds \
                 (0: never)",
            ),
            ("data_cores", DATA_CORES),
        ],
        "perf" => &[("data_cores", DATA_CORES)],
        "fwd" => &[(
            "stats_period",
            "Print the ports' statistics every N seconds while forwarding (0: never)",
        )],
        _ => &[],
    }
}

/// `job`'s help: a perf side's leaves out what only the other side reads (both sides had one
/// text: a session 83 review).
fn job_help(job: &Job) -> String {
    match job {
        Job::PerfServer => help_of(
            &PERF,
            "perftest for DDP over SCTP, the server: accepts associations and offers each \
             session a registered region (one the client may read when its Initiate asks for \
             RDMA Reads), then prints each region's CRC32c for the client's check when the \
             association ends.",
            &PERF_CLIENT_ONLY,
            Some("ddpdk perf server"),
            "ddpdk perf server [EAL options] -- [options]",
        ),
        Job::PerfClient(_) => help_of(
            &PERF,
            "perftest for DDP over SCTP, the client: writes tagged messages into the region \
             the server at ADDR offers for --run-for seconds and reports goodput (window > 1) \
             or write latency (--ddp-window 1, ib_write_lat's semantics), byte-exact against \
             the server's region; with --ddp-op read it reads the region with RDMA Reads \
             instead (ib_read_bw, ib_read_lat), every read checked.",
            &PERF_SERVER_ONLY,
            Some("ddpdk perf client"),
            "ddpdk perf client ADDR [EAL options] -- [options]",
        ),
        _ => help(job.spec()),
    }
}

/// `spec`'s help: what it does, its options (the others hidden), examples.
fn help(spec: &Spec) -> String {
    let usage = match spec.name {
        "perf" => "ddpdk perf server [EAL options] -- [options]\n       \
                   ddpdk perf client ADDR [EAL options] -- [options]"
            .to_string(),
        n => format!("ddpdk {n} [EAL options] -- [options]"),
    };
    help_of(spec, spec.about, &[], None, &usage)
}

/// [`help`] with the options of `hidden` left out too and `usage` for its usage line; with a
/// perf `side` (its command), only that side's example lines.
fn help_of(
    spec: &Spec,
    about: &'static str,
    hidden: &[&str],
    side: Option<&str>,
    usage: &str,
) -> String {
    let shown: Vec<&str> = shown(spec)
        .into_iter()
        .filter(|o| !hidden.contains(o))
        .collect();
    let examples: String = spec
        .examples
        .lines()
        .filter(|l| side.is_none_or(|s| !l.starts_with("  ddpdk perf ") || l.contains(s)))
        .collect::<Vec<_>>()
        .join("\n");
    let mut cmd = Options::command()
        .bin_name(format!("ddpdk {}", spec.name))
        .about(about)
        .override_usage(usage.to_string())
        .after_help(examples);
    let ids: Vec<String> = cmd
        .get_arguments()
        .map(|a| a.get_id().to_string())
        .collect();
    for id in ids {
        if !shown.contains(&id.as_str()) && id != "help" && id != "version" {
            cmd = cmd.mut_arg(id, |a| a.hide(true));
        }
    }
    for &(id, text) in own_help(spec.name) {
        cmd = cmd.mut_arg(id, |a| a.help(text).long_help(text));
    }
    cmd.render_help().to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    /// An option its job does nothing with is refused, not taken silently: perf wrote no
    /// pcap and ran a --cmdline-file's lines as shell commands.
    #[test]
    fn a_job_refuses_the_options_it_does_not_take() {
        for (job, opt) in [
            (Job::PerfClient("198.18.0.2".into()), "--pcap=x.pcap"),
            (Job::PerfServer, "--cmdline-file"),
            (Job::PerfServer, "-i"),
            (Job::PerfServer, "--stats-period"),
            (Job::PerfServer, "-ai"),
            (Job::Endpoint, "--ddp-bytes"),
            (Job::Loopback, "--region-bytes"),
            (Job::Loopback, "--sctp"),
            (Job::Loopback, "--mtu"),
            (Job::Fwd, "--region-bytes"),
            (Job::Fwd, "--idle"),
            (Job::Fwd, "--idle-sleep-max-us"),
        ] {
            let mut app = vec!["ddpdk".to_string(), "--ip".into(), "198.18.0.1".into()];
            app.push(opt.to_string());
            if job == Job::Fwd || job == Job::Loopback {
                app.drain(1..3);
            }
            let e = apply(&job, &mut app).unwrap_err();
            let name = match opt.split('=').next().unwrap() {
                "-ai" => "-a",
                n => n,
            };
            assert!(
                e.starts_with(&format!("{name} is not an option of `ddpdk ")),
                "{job:?} {opt}: {e}"
            );
        }
        // What they take passes: their own, their groups', testpmd's name for the cores.
        for (job, opts) in [
            (
                Job::PerfServer,
                "--ip 198.18.0.2 --region-bytes 4096 --nb-cores 1 --ipsec-crypto-dev x --json \
                 --rxd 4096 --txd 4096 --mbuf-size 9216",
            ),
            (
                Job::Endpoint,
                "--ip 198.18.0.2 -i --cmdline-file c.txt --listen --stats-period 1 --rxd 512",
            ),
            (
                Job::Loopback,
                "--ddp-bytes 4096 --pcap x.pcap --data-cores 1",
            ),
            (
                Job::Fwd,
                "-i -a --forward-mode rxonly --nb-cores 1 --stats-period 1",
            ),
        ] {
            let mut app = argv(&format!("ddpdk {opts}"));
            assert!(apply(&job, &mut app).is_ok(), "{job:?} {opts}");
        }
    }

    /// Every option is some job's: `--max-assocs-per-peer`, documented and in `--help`, was
    /// in no job's list, so every job refused it (an outside-in review). The jobs' own mode
    /// options are added by the jobs themselves.
    #[test]
    fn every_option_is_taken_by_some_job() {
        let modes = [
            "ddp_loopback",
            "ddp_listen",
            "ddp_connect",
            "help",
            "version",
        ];
        let taken: Vec<&str> = SPECS.iter().flat_map(|s| shown(s)).collect();
        for a in Options::command().get_arguments() {
            let id = a.get_id().as_str();
            assert!(
                taken.contains(&id) || modes.contains(&id),
                "--{} is taken by no job",
                id.replace('_', "-")
            );
        }
        let mut app = argv("ddpdk --ip 198.18.0.2 --max-assocs-per-peer 4");
        assert!(apply(&Job::Endpoint, &mut app).is_ok());
        // It bounds the associations peers open to us: a perf client opens, never accepts.
        let mut app = argv("ddpdk --ip 198.18.0.1 --max-assocs-per-peer 4");
        let e = apply(&Job::PerfClient("198.18.0.2".into()), &mut app).unwrap_err();
        assert!(
            e.starts_with("--max-assocs-per-peer is the server's"),
            "{e}"
        );
    }

    /// Each perf side's help lists what that side reads: both had one text, the client's
    /// options in the server's help and the server's in the client's.
    #[test]
    fn each_perf_side_has_its_own_help() {
        let Parsed::Help(server) = take(&mut argv("ddpdk perf server --help")).unwrap() else {
            panic!("help")
        };
        let Parsed::Help(client) = take(&mut argv("ddpdk perf client --help")).unwrap() else {
            panic!("help")
        };
        let Parsed::Help(both) = take(&mut argv("ddpdk perf --help")).unwrap() else {
            panic!("help")
        };
        for (text, has, lacks) in [
            (&server, "--region-bytes", "--ddp-size"),
            (&server, "--max-assocs-per-peer", "--ddp-window"),
            (&client, "--ddp-size", "--region-bytes"),
            (&client, "--ddp-op", "--max-assocs-per-peer"),
            (&both, "--ddp-size", "--nothing-at-all"),
            (&both, "--region-bytes", "--nothing-at-all"),
        ] {
            assert!(
                text.contains(has) && !text.contains(lacks),
                "{has} {lacks}:\n{text}"
            );
        }
        assert!(
            server.contains("ddpdk perf server [EAL options]"),
            "{server}"
        );
        assert!(!server.contains("perf client ADDR [EAL"), "{server}");
        assert!(
            client.contains("ddpdk perf client ADDR [EAL options]"),
            "{client}"
        );
        // `--help` among a side's options (apply) is that side's too.
        let mut app = argv("ddpdk --ip 198.18.0.2 --help");
        let h = apply(&Job::PerfServer, &mut app).unwrap().unwrap();
        assert!(!h.contains("--ddp-size"), "{h}");
    }

    /// An option the jobs share is described as each job uses it: `endpoint --help` said
    /// `--stats-period` printed port statistics, and did not say it takes `--nb-cores`.
    #[test]
    fn each_job_describes_a_shared_option_as_it_uses_it() {
        let endpoint = help(&ENDPOINT);
        assert!(
            endpoint.contains("control thread's counters every N seconds")
                && endpoint.contains("testpmd's --nb-cores is taken for it too")
                && !endpoint.contains("port statistics"),
            "{endpoint}"
        );
        assert!(help(&PERF).contains("testpmd's --nb-cores is taken for it too"));
        let fwd = help(&FWD);
        assert!(fwd.contains("ports' statistics every N seconds"), "{fwd}");
    }

    #[test]
    fn a_job_becomes_its_mode_option() {
        let mut a = argv("ddpdk loopback --no-huge -l 0-1 -- --ddp-bytes 4096");
        let Parsed::Job(job) = take(&mut a).unwrap() else {
            panic!("a job")
        };
        assert_eq!(job, Job::Loopback);
        assert_eq!(a, argv("ddpdk --no-huge -l 0-1 -- --ddp-bytes 4096"));
        let mut app = argv("ddpdk --ddp-bytes 4096");
        assert_eq!(apply(&job, &mut app).unwrap(), None);
        assert_eq!(app, argv("ddpdk --ddp-loopback --ddp-bytes 4096"));
    }

    #[test]
    fn perf_client_takes_the_server_address() {
        let mut a = argv("ddpdk perf client 198.18.0.2 -l 1 -- --ip 198.18.0.1");
        assert_eq!(
            take(&mut a).unwrap(),
            Parsed::Job(Job::PerfClient("198.18.0.2".into()))
        );
        assert_eq!(a, argv("ddpdk -l 1 -- --ip 198.18.0.1"));
        let mut app = argv("ddpdk --ip 198.18.0.1");
        apply(&Job::PerfClient("198.18.0.2".into()), &mut app).unwrap();
        assert_eq!(app, argv("ddpdk --ddp-connect 198.18.0.2 --ip 198.18.0.1"));
        assert!(take(&mut argv("ddpdk perf client -l 1")).is_err());
        assert!(take(&mut argv("ddpdk perf frob")).is_err());
        let e = take(&mut argv("ddpdk perf")).unwrap_err();
        assert!(e.contains("perf needs a side"), "{e}");
        let e = take(&mut argv("ddpdk perf client 198.18.0.999 -l 1")).unwrap_err();
        assert!(e.contains("not an IPv4 or IPv6 address"), "{e}");
        let e = take(&mut argv("ddpdk perf client 198.18.0.2/24 -l 1")).unwrap_err();
        assert!(e.contains("give 198.18.0.2, not 198.18.0.2/24"), "{e}");
        assert!(matches!(
            take(&mut argv("ddpdk perf client --help")).unwrap(),
            Parsed::Help(_)
        ));
        assert!(take(&mut argv("ddpdk help frob")).is_err());
    }

    /// A misspelt job was skipped by the EAL and the default job ran (status 0), or the
    /// loopback's options were refused as fwd's.
    #[test]
    fn a_word_that_names_no_job_is_refused_as_such() {
        let e = take(&mut argv(
            "ddpdk lopback --no-huge -l 0-1 -- --ddp-bytes 4096",
        ))
        .unwrap_err();
        assert!(e.starts_with("lopback: no such job (fwd, loopback"), "{e}");
        assert_eq!(
            take(&mut argv("ddpdk -l 0-1 --no-huge -- --ring-pair")).unwrap(),
            Parsed::None
        );
    }

    /// perf's sides share one option list; what one side alone reads is refused on the other
    /// (the server took --ddp-size and ignored it; found by an outside-in test).
    #[test]
    fn a_perf_side_refuses_the_other_sides_options() {
        for opt in [
            "--ddp-op",
            "--ddp-window=4",
            "--ddp-messages",
            "--ddp-size",
            "--ddp-source",
        ] {
            let mut app = argv(&format!("ddpdk --ip 198.18.0.2 {opt} 1"));
            let e = apply(&Job::PerfServer, &mut app).unwrap_err();
            assert!(
                e.contains("is the client's (perf client) option"),
                "{opt}: {e}"
            );
        }
        let mut app = argv("ddpdk --ip 198.18.0.1 --region-bytes 4096");
        let e = apply(&Job::PerfClient("198.18.0.2".into()), &mut app).unwrap_err();
        assert!(e.contains("--region-bytes is the server's"), "{e}");
        let mut app = argv("ddpdk --ip 198.18.0.1 --ddp-size 4096 --ddp-verify");
        assert!(apply(&Job::PerfClient("198.18.0.2".into()), &mut app).is_ok());
    }

    #[test]
    fn a_job_refuses_another_jobs_mode() {
        let e = apply(&Job::Loopback, &mut argv("ddpdk --ddp-listen")).unwrap_err();
        assert!(e.contains("--ddp-listen"), "{e}");
        assert!(
            apply(&Job::Endpoint, &mut argv("ddpdk -i")).is_err(),
            "needs --ip"
        );
        assert!(apply(&Job::Fwd, &mut argv("ddpdk --ip=198.18.0.1")).is_err());
    }

    #[test]
    fn each_job_has_its_own_help() {
        let Parsed::Help(h) = take(&mut argv("ddpdk loopback --help")).unwrap() else {
            panic!("help")
        };
        assert!(
            h.contains("ddpdk loopback [EAL options]") && h.contains("--ddp-bytes"),
            "{h}"
        );
        assert!(
            !h.contains("--forward-mode"),
            "fwd's options are hidden:\n{h}"
        );
        let Parsed::Help(h) = take(&mut argv("ddpdk help perf")).unwrap() else {
            panic!("help")
        };
        assert!(
            h.contains("perf client ADDR") && h.contains("--ddp-window"),
            "{h}"
        );
        let Parsed::Help(h) = take(&mut argv("ddpdk help")).unwrap() else {
            panic!("help")
        };
        assert!(h.contains("ddpdk endpoint"), "{h}");
        assert_eq!(
            take(&mut argv("ddpdk --no-huge -- -i")).unwrap(),
            Parsed::None
        );
    }
}
