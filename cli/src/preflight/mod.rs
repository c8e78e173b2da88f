//! `ddpdk preflight [EAL options] [-- --json]`: what a host must offer the EAL options of a run
//! before the run starts, read from /proc and /sys without starting the EAL or changing
//! anything. It exists for bare metal (docs/deploy.md): a NIC still bound to its kernel
//! driver, hugepages too few or unmounted, an IOMMU left off, data cores the scheduler
//! shares or on the other NUMA node than their NIC each fail or slow a run in a way the EAL
//! reports late and badly, if at all. The systemd unit runs it before the service
//! (`deploy/systemd/ddpdk@.service`): a failure stops the start with what to do.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::options::split_args;

mod cpus;
mod devices;
mod memory;
mod plan;
#[cfg(test)]
mod tests;

use cpus::*;
use devices::*;
use memory::*;
use plan::*;
pub use plan::{cpu_list, plan, LcoreForm, Plan, RTE_MAX_LCORE};

/// How a finding bears on the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Ok,
    /// The run starts but is slower or less safe than it could be.
    Warn,
    /// The run fails to start, or starts on the wrong thing.
    Fail,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One check's result: what was found and, short of `Ok`, what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub check: &'static str,
    pub status: Status,
    pub what: String,
    pub fix: Option<String>,
}

fn ok(check: &'static str, what: String) -> Finding {
    Finding {
        check,
        status: Status::Ok,
        what,
        fix: None,
    }
}

fn bad(check: &'static str, status: Status, what: String, fix: impl Into<String>) -> Finding {
    Finding {
        check,
        status,
        what,
        fix: Some(fix.into()),
    }
}

/// The host's /proc and /sys, under `root` (`/`, or a test's tree).
#[derive(Debug)]
pub struct Host {
    root: PathBuf,
}

impl Host {
    pub fn new(root: impl Into<PathBuf>) -> Host {
        Host { root: root.into() }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.root.join(p.trim_start_matches('/'))
    }

    fn read(&self, p: &str) -> Option<String> {
        std::fs::read_to_string(self.path(p))
            .ok()
            .map(|s| s.trim().to_string())
    }

    fn exists(&self, p: &str) -> bool {
        self.path(p).exists()
    }

    /// The last component of where a symlink points (a device's driver).
    fn link_name(&self, p: &str) -> Option<String> {
        let target = std::fs::read_link(self.path(p)).ok()?;
        Some(target.file_name()?.to_string_lossy().into_owned())
    }

    /// The names in a directory, sorted; none when it is absent.
    fn list(&self, p: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path(p))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

/// Every check, for the run `plan` describes.
pub fn check(host: &Host, plan: &Plan) -> Vec<Finding> {
    let mut out = Vec::new();
    check_cpu(host, &mut out);
    check_lcores(host, plan, &mut out);
    let nodes = cpu_nodes(host);
    let mut used = check_devices(host, plan, &nodes, &mut out);
    used.extend(
        plan.cpus()
            .unwrap_or_default()
            .iter()
            .filter_map(|&c| node_of(&nodes, c)),
    );
    check_hugepages(host, plan, &used, &mut out);
    check_memlock(host, plan, &mut out);
    out
}

/// The findings as text, a line each with its fix below, and a last line counting them.
pub fn render(findings: &[Finding]) -> String {
    let mut s = String::new();
    for f in findings {
        let _ = writeln!(s, "{:<5} {:<10} {}", f.status.word(), f.check, f.what);
        if let Some(fix) = &f.fix {
            let _ = writeln!(s, "{:16} fix: {fix}", "");
        }
    }
    let fails = findings.iter().filter(|f| f.status == Status::Fail).count();
    let warns = findings.iter().filter(|f| f.status == Status::Warn).count();
    let _ = write!(
        s,
        "{fails} failure{}, {warns} warning{}",
        if fails == 1 { "" } else { "s" },
        if warns == 1 { "" } else { "s" }
    );
    s
}

pub fn to_json(findings: &[Finding]) -> serde_json::Value {
    serde_json::json!({
        "findings": findings.iter().map(|f| serde_json::json!({
            "check": f.check,
            "status": f.status.word(),
            "what": f.what,
            "fix": f.fix,
        })).collect::<Vec<_>>(),
        "failures": findings.iter().filter(|f| f.status == Status::Fail).count(),
        "warnings": findings.iter().filter(|f| f.status == Status::Warn).count(),
    })
}

pub const HELP: &str = "\
Check this host for a run with the given EAL options, without starting the EAL: CPU features,
the TSC, the lcores' CPUs (online, isolated, tickless, not hyperthread siblings, governor),
hugepages (mounted, enough free for -m or --socket-mem, on the right NUMA nodes), each allowed
PCI device (bound to vfio-pci with an IOMMU, not to a kernel driver, on the lcores' node) and
the locked-memory limit. Each finding is ok, warn (the run is slower or less safe) or fail
(the run would not start, or not on this device), with what to do. Exit status 1 if any
failed, 2 for options the EAL would refuse (or preflight's own before '--'), 0 otherwise.
docs/deploy.md explains each check.

Usage: ddpdk preflight [EAL options] [-- --json]

Options after '--':
      --json        one JSON document: findings (check, status, what, fix), failures, warnings
      --root DIR    read /proc and /sys under DIR instead (for tests)

Examples:
  ddpdk preflight -l 2-5 -m 4096 -a 0000:03:00.0
  ddpdk preflight -l 2-5 --socket-mem 4096,0 -a 0000:03:00.0 -- --json";

/// `ddpdk preflight ...` (`argv`: the program name, then what followed the job's name).
pub fn run(argv: &[String]) -> i32 {
    use crate::run::EXIT_USAGE;
    if argv.iter().skip(1).any(|a| a == "-h" || a == "--help") {
        out!("{HELP}");
        return 0;
    }
    // Without '--' every word is the EAL's (the run's EAL options, copied as they are).
    let (eal, app) = if argv.iter().any(|a| a == "--") {
        split_args(argv)
    } else {
        (argv.to_vec(), argv[..1.min(argv.len())].to_vec())
    };
    let (mut json, mut root) = (false, PathBuf::from("/"));
    let mut i = 1;
    while i < app.len() {
        match app[i].as_str() {
            "--json" => json = true,
            "--root" => match app.get(i + 1) {
                Some(d) => {
                    root = PathBuf::from(d);
                    i += 1;
                }
                None => {
                    errln!("ddpdk: preflight: --root needs a directory");
                    return EXIT_USAGE;
                }
            },
            a if a.starts_with("--root=") => root = PathBuf::from(&a["--root=".len()..]),
            other => {
                errln!(
                    "ddpdk: preflight: {other}: preflight takes the run's EAL options before \
                     '--' and only --json or --root after it (see 'ddpdk preflight --help')"
                );
                return EXIT_USAGE;
            }
        }
        i += 1;
    }
    let plan = match plan(&eal) {
        Ok(p) => p,
        Err(e) => {
            errln!("ddpdk: preflight: {e}");
            return EXIT_USAGE;
        }
    };
    if !Path::new(&root).is_dir() {
        errln!(
            "ddpdk: preflight: --root {}: no such directory",
            root.display()
        );
        return EXIT_USAGE;
    }
    let findings = check(&Host::new(root), &plan);
    if json {
        outln!("{}", to_json(&findings));
    } else {
        outln!("{}", render(&findings));
    }
    i32::from(findings.iter().any(|f| f.status == Status::Fail))
}
