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

/// What the EAL options of a run ask of the host.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The CPUs the lcores run on, the main lcore's first; `None`: no `-l`, `-c` or
    /// `--lcores`, and the EAL takes every CPU.
    pub cpus: Option<Vec<u32>>,
    pub no_huge: bool,
    /// `-m`, or the sum of `--socket-mem`, in MiB.
    pub memory_mb: Option<u64>,
    /// `--socket-mem`, MiB per NUMA node.
    pub socket_mem: Vec<u64>,
    pub huge_dir: Option<String>,
    pub no_pci: bool,
    /// PCI addresses of `-a`/`--allow`, with the domain (`0000:03:00.0`).
    pub pci: Vec<String>,
    /// `--vdev` and virtual devices given with `-a`.
    pub vdevs: Vec<String>,
}

/// A list of CPUs or lcores as the EAL and sysfs write them: `0-3,8,10-11`.
pub fn cpu_list(s: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |t: &str| {
            t.trim()
                .parse::<u32>()
                .map_err(|_| format!("'{s}' is not a CPU list (such as 0-3,8)"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b || b - a > 4096 {
                    return Err(format!("'{s}' is not a CPU list (such as 0-3,8)"));
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    if out.is_empty() {
        return Err(format!("'{s}' is not a CPU list (such as 0-3,8)"));
    }
    Ok(out)
}

/// The CPUs of an `--lcores` map (`0-3`, `1@2`, `(0,1)@(2,3),4`): each group runs on the
/// CPUs after its `@`, or on the CPUs of its lcore ids.
fn lcores_map(s: &str) -> Result<Vec<u32>, String> {
    let mut groups = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                groups.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    groups.push(&s[start..]);
    let mut cpus = Vec::new();
    for g in groups {
        let cpu_part = g.split_once('@').map_or(g, |(_, c)| c);
        let inner = cpu_part
            .trim()
            .trim_start_matches('(')
            .trim_end_matches(')');
        cpus.extend(cpu_list(inner).map_err(|_| format!("--lcores '{s}' is not an lcore map"))?);
    }
    Ok(cpus)
}

fn coremask(s: &str) -> Result<Vec<u32>, String> {
    let hex = s.trim_start_matches("0x").trim_start_matches("0X");
    let mut cpus = Vec::new();
    for (i, c) in hex.chars().rev().enumerate() {
        let d = c
            .to_digit(16)
            .ok_or_else(|| format!("-c '{s}' is not a hexadecimal core mask"))?;
        for b in 0..4 {
            if d & (1 << b) != 0 {
                cpus.push(u32::try_from(i * 4 + b).map_err(|_| "core mask too long")?);
            }
        }
    }
    if cpus.is_empty() {
        return Err(format!("-c '{s}' selects no core"));
    }
    Ok(cpus)
}

/// A PCI address as the EAL takes one (`03:00.0` or `0000:03:00.0`, then `,devargs`), with
/// its domain; `None` for a virtual device's name.
fn pci_address(spec: &str) -> Option<String> {
    let addr = spec.split(',').next()?;
    let full = if addr.matches(':').count() == 1 {
        format!("0000:{addr}")
    } else {
        addr.to_string()
    };
    let b = full.as_bytes();
    let hex = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_hexdigit);
    (b.len() == 12
        && hex(0..4)
        && b[4] == b':'
        && hex(5..7)
        && b[7] == b':'
        && hex(8..10)
        && b[10] == b'.'
        && (b'0'..=b'7').contains(&b[11]))
    .then(|| full.to_ascii_lowercase())
}

/// The value of option `name` at `args[i]`, in either form (`-l 0-1`, `-l0-1`, `--lcores=x`,
/// `--lcores x`), and the index after it.
fn value_of<'a>(args: &'a [String], i: usize, name: &str) -> Option<(&'a str, usize)> {
    let a = args[i].as_str();
    if a == name {
        return args.get(i + 1).map(|v| (v.as_str(), i + 2));
    }
    let rest = a.strip_prefix(name)?;
    if name.starts_with("--") {
        rest.strip_prefix('=').map(|v| (v, i + 1))
    } else {
        (!rest.is_empty()).then_some((rest, i + 1))
    }
}

/// What the EAL options (program name first, as `split_args` gives them) ask for.
pub fn plan(eal: &[String]) -> Result<Plan, String> {
    let mut p = Plan::default();
    let mut main_lcore = None;
    let mut i = 1;
    while i < eal.len() {
        let a = eal[i].as_str();
        let next = if let Some((v, n)) = value_of(eal, i, "-l") {
            p.cpus = Some(cpu_list(v).map_err(|e| format!("-l: {e}"))?);
            n
        } else if let Some((v, n)) = value_of(eal, i, "--lcores") {
            p.cpus = Some(lcores_map(v)?);
            n
        } else if let Some((v, n)) = value_of(eal, i, "-c") {
            p.cpus = Some(coremask(v)?);
            n
        } else if let Some((v, n)) = value_of(eal, i, "--main-lcore") {
            main_lcore = Some(
                v.parse::<u32>()
                    .map_err(|_| format!("--main-lcore '{v}' is not an lcore id"))?,
            );
            n
        } else if let Some((v, n)) = value_of(eal, i, "-m") {
            p.memory_mb = Some(
                v.parse()
                    .map_err(|_| format!("-m '{v}' is not a number of MiB"))?,
            );
            n
        } else if let Some((v, n)) = value_of(eal, i, "--socket-mem") {
            p.socket_mem = v
                .split(',')
                .map(|m| m.trim().parse::<u64>())
                .collect::<Result<_, _>>()
                .map_err(|_| format!("--socket-mem '{v}' is not MiB per node (such as 1024,0)"))?;
            p.memory_mb = Some(p.socket_mem.iter().sum());
            n
        } else if let Some((v, n)) = value_of(eal, i, "--huge-dir") {
            p.huge_dir = Some(v.to_string());
            n
        } else {
            match a {
                "--no-huge" => p.no_huge = true,
                "--no-pci" => p.no_pci = true,
                _ => {}
            }
            i + 1
        };
        i = next;
    }
    for (at, off) in crate::vdev::device_specs(eal) {
        let spec = &eal[at][off..];
        // The option is in the same word (`--vdev=X`, `-aX`) or the one before.
        let option = if off > 0 {
            &eal[at][..off]
        } else {
            eal[at - 1].as_str()
        };
        match pci_address(spec) {
            Some(a) if !option.starts_with("--vdev") => p.pci.push(a),
            _ => p
                .vdevs
                .push(spec.split(',').next().unwrap_or(spec).to_string()),
        }
    }
    // The main lcore comes first: the control thread runs there.
    if let (Some(m), Some(cpus)) = (main_lcore, p.cpus.as_mut()) {
        if let Some(k) = cpus.iter().position(|&c| c == m) {
            let c = cpus.remove(k);
            cpus.insert(0, c);
        }
    }
    Ok(p)
}

fn flags(host: &Host) -> Option<BTreeSet<String>> {
    let info = host.read("/proc/cpuinfo")?;
    let line = info.lines().find(|l| l.starts_with("flags"))?;
    let (_, list) = line.split_once(':')?;
    Some(list.split_whitespace().map(String::from).collect())
}

fn check_cpu(host: &Host, out: &mut Vec<Finding>) {
    let Some(f) = flags(host) else {
        out.push(bad(
            "cpu",
            Status::Warn,
            "no x86 flags in /proc/cpuinfo".into(),
            "ddpdk is built and measured on x86-64 with SSE4.2; elsewhere it is untested",
        ));
        return;
    };
    let has = |x: &str| f.contains(x);
    if !has("sse4_2") {
        out.push(bad(
            "cpu",
            Status::Fail,
            "no SSE4.2".into(),
            "Debian's DPDK is built for SSE4.2 and ddpdk's CRC32c uses its crc32 instruction: \
             use a CPU (or a VM CPU model) with SSE4.2",
        ));
    } else {
        let mut have = vec!["SSE4.2"];
        let mut slow = Vec::new();
        for (flag, name) in [("pclmulqdq", "PCLMULQDQ"), ("aes", "AES-NI")] {
            if has(flag) {
                have.push(name);
            } else {
                slow.push(name);
            }
        }
        if has("avx512f") && has("vpclmulqdq") {
            have.push("AVX-512 VPCLMULQDQ");
        }
        if slow.is_empty() {
            out.push(ok("cpu", have.join(", ")));
        } else {
            out.push(bad(
                "cpu",
                Status::Warn,
                format!("{}; no {}", have.join(", "), slow.join(" or ")),
                "without PCLMULQDQ the CRC32c of large segments is several times slower; \
                 without AES-NI IPsec's crypto_aesni_mb cannot run (pass the host CPU's \
                 flags to a VM)",
            ));
        }
    }
    if has("constant_tsc") && has("nonstop_tsc") {
        out.push(ok("tsc", "constant and non-stop".into()));
    } else {
        out.push(bad(
            "tsc",
            Status::Warn,
            format!(
                "the TSC is {}",
                if has("constant_tsc") {
                    "not non-stop"
                } else {
                    "not constant"
                }
            ),
            "ddpdk's clock, and SCTP's timers on it (RTO, delayed SACK), read the TSC: on one \
             that changes with frequency or stops in idle states they drift; keep deep C-states \
             off or use a CPU with an invariant TSC",
        ));
    }
}

fn fmt_cpus(cpus: &[u32]) -> String {
    cpus.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// "CPU 3" or "CPUs 2,3".
fn cpus_named(cpus: &[u32]) -> String {
    let s = if cpus.len() == 1 { "" } else { "s" };
    format!("CPU{s} {}", fmt_cpus(cpus))
}

fn check_lcores(host: &Host, plan: &Plan, out: &mut Vec<Finding>) {
    let Some(cpus) = &plan.cpus else {
        out.push(bad(
            "lcores",
            Status::Warn,
            "no -l: the EAL makes every CPU an lcore".into(),
            "give -l with the CPUs set aside for ddpdk (the main lcore first), as \
             docs/deploy.md says",
        ));
        return;
    };
    let mut missing = Vec::new();
    let mut offline = Vec::new();
    for &c in cpus {
        let dir = format!("/sys/devices/system/cpu/cpu{c}");
        if !host.exists(&dir) {
            missing.push(c);
        } else if host.read(&format!("{dir}/online")).as_deref() == Some("0") {
            offline.push(c);
        }
    }
    if !missing.is_empty() || !offline.is_empty() {
        let mut what = String::new();
        if !missing.is_empty() {
            let _ = write!(what, "no {}", cpus_named(&missing));
        }
        if !offline.is_empty() {
            let sep = if what.is_empty() { "" } else { "; " };
            let _ = write!(what, "{sep}{} offline", cpus_named(&offline));
        }
        let online = host
            .read("/sys/devices/system/cpu/online")
            .unwrap_or_default();
        out.push(bad(
            "lcores",
            Status::Fail,
            what,
            format!("give -l from the online CPUs ({online})"),
        ));
        return;
    }
    let unique: BTreeSet<u32> = cpus.iter().copied().collect();
    if unique.len() < cpus.len() {
        out.push(bad(
            "lcores",
            Status::Warn,
            format!("lcores share CPUs ({})", fmt_cpus(cpus)),
            "every lcore polls without pause: two on one CPU take turns at the scheduler's \
             pace; give each its own CPU",
        ));
    } else {
        out.push(ok(
            "lcores",
            format!("{} online (main lcore on {})", cpus_named(cpus), cpus[0]),
        ));
    }
    // Hyperthreads of one core share its execution units and caches: two polling lcores
    // there each run at about half a core's rate.
    let mut shared = Vec::new();
    for &c in &unique {
        let Some(sib) = host.read(&format!(
            "/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list"
        )) else {
            continue;
        };
        if let Ok(sib) = cpu_list(&sib) {
            if let Some(&o) = sib.iter().find(|&&o| o > c && unique.contains(&o)) {
                shared.push(format!("{c} and {o}"));
            }
        }
    }
    if !shared.is_empty() {
        out.push(bad(
            "smt",
            Status::Warn,
            format!("CPUs {} are hyperthreads of one core", shared.join(", ")),
            "each polling lcore on a core of its own: leave a core's sibling idle (or \
             isolated and unused), or turn SMT off",
        ));
    }
    let isolated = host
        .read("/sys/devices/system/cpu/isolated")
        .and_then(|s| cpu_list(&s).ok())
        .unwrap_or_default();
    let nohz = host
        .read("/sys/devices/system/cpu/nohz_full")
        .and_then(|s| cpu_list(&s).ok())
        .unwrap_or_default();
    let shared_cpus: Vec<u32> = unique
        .iter()
        .copied()
        .filter(|c| !isolated.contains(c))
        .collect();
    let ticking: Vec<u32> = unique
        .iter()
        .copied()
        .filter(|c| !nohz.contains(c))
        .collect();
    if shared_cpus.is_empty() && ticking.is_empty() {
        out.push(ok(
            "isolation",
            format!("{} isolated, tickless", cpus_named(cpus)),
        ));
    } else {
        let list = fmt_cpus(&unique.iter().copied().collect::<Vec<_>>());
        let mut what = Vec::new();
        if !shared_cpus.is_empty() {
            what.push(format!(
                "{} not isolated (the scheduler runs other tasks there)",
                cpus_named(&shared_cpus)
            ));
        }
        if !ticking.is_empty() {
            let verb = if ticking.len() == 1 { "takes" } else { "take" };
            what.push(format!("{} {verb} the timer tick", cpus_named(&ticking)));
        }
        out.push(bad(
            "isolation",
            Status::Warn,
            what.join("; "),
            format!(
                "isolcpus={list} nohz_full={list} rcu_nocbs={list} on the kernel command \
                 line: a poll loop preempted for microseconds adds them to a write's latency"
            ),
        ));
    }
    let slow: Vec<String> = unique
        .iter()
        .filter_map(|c| {
            let g = host.read(&format!(
                "/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"
            ))?;
            (g != "performance").then(|| format!("{c} ({g})"))
        })
        .collect();
    if !slow.is_empty() {
        out.push(bad(
            "governor",
            Status::Warn,
            format!(
                "CPU frequency governor not performance on {}",
                slow.join(", ")
            ),
            "echo performance > /sys/devices/system/cpu/cpuN/cpufreq/scaling_governor for \
             each lcore's CPU (cpupower frequency-set -g performance)",
        ));
    }
}

/// The NUMA node of each CPU, from the nodes' CPU lists.
fn cpu_nodes(host: &Host) -> Vec<(u32, Vec<u32>)> {
    host.list("/sys/devices/system/node")
        .iter()
        .filter_map(|n| {
            let id = n.strip_prefix("node")?.parse::<u32>().ok()?;
            let cpus =
                cpu_list(&host.read(&format!("/sys/devices/system/node/{n}/cpulist"))?).ok()?;
            Some((id, cpus))
        })
        .collect()
}

fn node_of(nodes: &[(u32, Vec<u32>)], cpu: u32) -> Option<u32> {
    nodes
        .iter()
        .find(|(_, cpus)| cpus.contains(&cpu))
        .map(|(n, _)| *n)
}

/// Bytes of a hugetlbfs mount's page size (`pagesize=2M` among its options, else the
/// default size).
fn page_bytes(opts: &str, default_kb: u64) -> u64 {
    opts.split(',')
        .find_map(|o| o.strip_prefix("pagesize="))
        .and_then(|v| {
            let (n, unit) = v.split_at(v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len()));
            let n: u64 = n.parse().ok()?;
            Some(match unit {
                "K" | "k" => n << 10,
                "M" | "m" => n << 20,
                "G" | "g" => n << 30,
                _ => n,
            })
        })
        .unwrap_or(default_kb << 10)
}

fn check_hugepages(host: &Host, plan: &Plan, nodes_used: &BTreeSet<u32>, out: &mut Vec<Finding>) {
    if plan.no_huge {
        out.push(bad(
            "hugepages",
            Status::Warn,
            format!(
                "--no-huge: {} MiB of 4 KiB pages",
                plan.memory_mb.unwrap_or(64)
            ),
            "for tests and VMs without hugepages: every packet buffer and region then \
             spans many TLB entries, and a NIC's DMA needs the IOMMU (IOVA as VA); reserve \
             hugepages for production (docs/deploy.md)",
        ));
        return;
    }
    let default_kb = host
        .read("/proc/meminfo")
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("Hugepagesize:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .unwrap_or(2048);
    let mounts: Vec<(String, u64)> = host
        .read("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[2] == "hugetlbfs")
                .then(|| (f[1].to_string(), page_bytes(f[3], default_kb)))
        })
        .filter(|(dir, _)| {
            plan.huge_dir
                .as_ref()
                .is_none_or(|h| h.trim_end_matches('/') == dir)
        })
        .collect();
    if mounts.is_empty() {
        let which = match &plan.huge_dir {
            Some(d) => format!("no hugetlbfs mounted at {d}"),
            None => "no hugetlbfs mounted".into(),
        };
        out.push(bad(
            "hugepages",
            Status::Fail,
            which,
            "mount -t hugetlbfs nodev /dev/hugepages (deploy/setup.sh does, and an fstab \
             line keeps it), or run with --no-huge",
        ));
        return;
    }
    let sizes: BTreeSet<u64> = mounts.iter().map(|(_, b)| *b).collect();
    let free_of = |dir: &str, bytes: u64| -> u64 {
        host.read(&format!("{dir}/hugepages-{}kB/free_hugepages", bytes >> 10))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let mut free_bytes = 0;
    let mut parts = Vec::new();
    for &b in &sizes {
        let n = free_of("/sys/kernel/mm/hugepages", b);
        free_bytes += n * b;
        parts.push(format!("{n} x {} free", human(b)));
    }
    let where_ = mounts
        .iter()
        .map(|(d, _)| d.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let need = plan.memory_mb.map(|m| m << 20);
    let smallest = sizes.iter().next().copied().unwrap_or(2 << 20);
    // The pages to reserve in all: those reserved now and the ones missing.
    let reserve = |missing: u64| {
        let dir = format!("/sys/kernel/mm/hugepages/hugepages-{}kB", smallest >> 10);
        let now = host
            .read(&format!("{dir}/nr_hugepages"))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        let pages = now + missing.div_ceil(smallest);
        format!(
            "echo {pages} > {dir}/nr_hugepages (or hugepages={pages} on the kernel command \
             line; 1 GiB pages only there)"
        )
    };
    match need {
        // --socket-mem's nodes are checked one by one below.
        Some(n) if n > free_bytes && plan.socket_mem.is_empty() => out.push(bad(
            "hugepages",
            Status::Fail,
            format!(
                "-m {} MiB asked for, {} MiB free ({}; hugetlbfs at {where_})",
                n >> 20,
                free_bytes >> 20,
                parts.join(", ")
            ),
            reserve(n - free_bytes),
        )),
        None if free_bytes == 0 => out.push(bad(
            "hugepages",
            Status::Fail,
            format!("none free ({}; hugetlbfs at {where_})", parts.join(", ")),
            reserve(1 << 30),
        )),
        _ => out.push(ok(
            "hugepages",
            format!("{}; hugetlbfs at {where_}", parts.join(", ")),
        )),
    }
    // Memory asked per node, and memory near the devices and lcores.
    let node_free = |node: u32| -> u64 {
        sizes
            .iter()
            .map(|&b| free_of(&format!("/sys/devices/system/node/node{node}/hugepages"), b) * b)
            .sum()
    };
    let node_count = host
        .list("/sys/devices/system/node")
        .iter()
        .filter(|n| {
            n.strip_prefix("node")
                .is_some_and(|d| d.parse::<u32>().is_ok())
        })
        .count();
    for (node, &mb) in plan.socket_mem.iter().enumerate() {
        let node = u32::try_from(node).unwrap_or(u32::MAX);
        if mb > 0 && (mb << 20) > node_free(node) {
            out.push(bad(
                "hugepages",
                Status::Fail,
                format!(
                    "--socket-mem asks {mb} MiB on node {node}, {} MiB free there",
                    node_free(node) >> 20
                ),
                format!(
                    "reserve them on that node: /sys/devices/system/node/node{node}/hugepages/hugepages-{}kB/nr_hugepages",
                    smallest >> 10
                ),
            ));
        }
    }
    if node_count > 1 {
        let empty: Vec<String> = nodes_used
            .iter()
            .filter(|&&n| node_free(n) == 0)
            .map(u32::to_string)
            .collect();
        if !empty.is_empty() {
            out.push(bad(
                "numa",
                Status::Warn,
                format!(
                    "no free hugepages on node {} where the lcores or devices are",
                    empty.join(", ")
                ),
                "reserve hugepages per node (/sys/devices/system/node/nodeN/hugepages/...): \
                 mbufs and regions from another node cost every access a trip across the \
                 interconnect",
            ));
        }
    }
}

fn human(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{} GiB", bytes >> 30)
    } else if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

/// Drivers DPDK's PCI bus takes a device from; the mlx drivers are the kernel's own, beside
/// which DPDK's mlx PMDs run (bifurcated).
const VFIO: &str = "vfio-pci";
const UIO: &[&str] = &["uio_pci_generic", "igb_uio"];
const BIFURCATED: &[&str] = &["mlx5_core", "mlx4_core"];

/// The kernel interface a device carries, and whether it is up.
fn interface(host: &Host, dev: &str) -> Option<(String, bool)> {
    let mut dirs = vec![format!("{dev}/net")];
    // virtio-net's interface hangs off its virtio device.
    dirs.extend(
        host.list(dev)
            .into_iter()
            .filter(|d| d.starts_with("virtio"))
            .map(|d| format!("{dev}/{d}/net")),
    );
    dirs.iter().find_map(|d| {
        let name = host.list(d).into_iter().next()?;
        let up = host.read(&format!("{d}/{name}/operstate")).as_deref() == Some("up");
        Some((name, up))
    })
}

fn check_devices(
    host: &Host,
    plan: &Plan,
    nodes: &[(u32, Vec<u32>)],
    out: &mut Vec<Finding>,
) -> BTreeSet<u32> {
    let mut device_nodes = BTreeSet::new();
    if plan.no_pci {
        if plan.vdevs.is_empty() {
            out.push(bad(
                "devices",
                Status::Fail,
                "--no-pci and no --vdev: the EAL will find no port".into(),
                "allow the NIC (-a 0000:03:00.0) or give a virtual device",
            ));
        } else {
            out.push(ok(
                "devices",
                format!("virtual only: {}", plan.vdevs.join(", ")),
            ));
        }
        return device_nodes;
    }
    let pci: Vec<String> = if plan.pci.is_empty() {
        // No allow list: the EAL probes every device bound to a driver of its own.
        let all: Vec<String> = host
            .list("/sys/bus/pci/devices")
            .into_iter()
            .filter(|d| {
                host.read(&format!("/sys/bus/pci/devices/{d}/class"))
                    .is_some_and(|c| c.starts_with("0x02"))
            })
            .collect();
        let taken: Vec<String> = all
            .iter()
            .filter(|d| {
                host.link_name(&format!("/sys/bus/pci/devices/{d}/driver"))
                    .is_some_and(|drv| {
                        drv == VFIO
                            || UIO.contains(&drv.as_str())
                            || BIFURCATED.contains(&drv.as_str())
                    })
            })
            .cloned()
            .collect();
        if taken.is_empty() && plan.vdevs.is_empty() {
            out.push(bad(
                "devices",
                Status::Fail,
                format!(
                    "no network device bound to a DPDK driver ({} on the bus), no --vdev",
                    all.len()
                ),
                "dpdk-devbind.py --status lists them; bind one with dpdk-devbind.py -b \
                 vfio-pci ADDR and allow it with -a ADDR",
            ));
        } else if taken.is_empty() {
            out.push(ok(
                "devices",
                format!("virtual only: {}", plan.vdevs.join(", ")),
            ));
        } else {
            out.push(bad(
                "devices",
                Status::Warn,
                format!(
                    "no -a: the EAL takes every bound device ({})",
                    taken.join(", ")
                ),
                "name the NIC with -a ADDR, so that a second one bound later does not \
                 become port 0",
            ));
        }
        taken
    } else {
        plan.pci.clone()
    };
    let iommu_groups = !host.list("/sys/kernel/iommu_groups").is_empty();
    let noiommu = host
        .read("/sys/module/vfio/parameters/enable_unsafe_noiommu_mode")
        .is_some_and(|v| v == "Y" || v == "1");
    let lcore_nodes: BTreeSet<u32> = plan
        .cpus
        .iter()
        .flatten()
        .filter_map(|&c| node_of(nodes, c))
        .collect();
    for addr in &pci {
        let dev = format!("/sys/bus/pci/devices/{addr}");
        let check = "device";
        if !host.exists(&dev) {
            out.push(bad(
                check,
                Status::Fail,
                format!("{addr}: no such PCI device"),
                "dpdk-devbind.py --status lists the network devices and their addresses",
            ));
            continue;
        }
        let node = host
            .read(&format!("{dev}/numa_node"))
            .and_then(|n| n.parse::<i64>().ok())
            .and_then(|n| u32::try_from(n).ok());
        if let Some(n) = node {
            device_nodes.insert(n);
        }
        let bind = format!("modprobe vfio-pci; dpdk-devbind.py -b vfio-pci {addr}");
        match host.link_name(&format!("{dev}/driver")) {
            None => out.push(bad(
                check,
                Status::Fail,
                format!("{addr}: bound to no driver"),
                bind,
            )),
            Some(d) if d == VFIO => {
                if iommu_groups {
                    out.push(ok(check, format!("{addr}: vfio-pci, IOMMU on")));
                } else if noiommu {
                    out.push(bad(
                        check,
                        Status::Warn,
                        format!("{addr}: vfio-pci in no-IOMMU mode"),
                        "the NIC can DMA anywhere in memory: turn the IOMMU on \
                         (intel_iommu=on iommu=pt, or amd_iommu=on) unless the host has none",
                    ));
                } else {
                    out.push(bad(
                        check,
                        Status::Fail,
                        format!("{addr}: vfio-pci, but no IOMMU groups"),
                        "intel_iommu=on iommu=pt (or amd_iommu=on) on the kernel command line \
                         and the IOMMU on in the firmware; without one, vfio's \
                         enable_unsafe_noiommu_mode=1",
                    ));
                }
            }
            Some(d) if UIO.contains(&d.as_str()) => out.push(bad(
                check,
                Status::Warn,
                format!("{addr}: {d}"),
                format!(
                    "{d} gives the NIC DMA to all memory and no interrupts: vfio-pci \
                         is safer ({bind})"
                ),
            )),
            Some(d) if BIFURCATED.contains(&d.as_str()) => out.push(ok(
                check,
                format!("{addr}: {d} (DPDK's mlx PMD runs beside the kernel driver)"),
            )),
            Some(d) => {
                let iface = match interface(host, &dev) {
                    Some((name, true)) => format!(", interface {name} up"),
                    Some((name, false)) => format!(", interface {name}"),
                    None => String::new(),
                };
                let down = match interface(host, &dev) {
                    Some((name, _)) => format!("ip link set {name} down; "),
                    None => String::new(),
                };
                out.push(bad(
                    check,
                    Status::Fail,
                    format!("{addr}: bound to the kernel's {d}{iface}"),
                    format!("{down}{bind}"),
                ));
            }
        }
        if let Some(n) = node {
            let far: Vec<String> = lcore_nodes
                .iter()
                .filter(|&&l| l != n)
                .map(u32::to_string)
                .collect();
            if !far.is_empty() {
                out.push(bad(
                    "numa",
                    Status::Warn,
                    format!(
                        "{addr} is on NUMA node {n}, lcores on node {}",
                        far.join(", ")
                    ),
                    format!(
                        "run the data cores on node {n}'s CPUs ({}): every frame otherwise \
                         crosses the interconnect",
                        nodes
                            .iter()
                            .find(|(id, _)| *id == n)
                            .map(|(_, c)| fmt_cpus(c))
                            .unwrap_or_default()
                    ),
                ));
            }
        }
    }
    device_nodes
}

fn check_memlock(host: &Host, plan: &Plan, out: &mut Vec<Finding>) {
    let euid = host.read("/proc/self/status").and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|v| v.split_whitespace().nth(1)?.parse::<u32>().ok())
    });
    if euid == Some(0) || plan.no_huge && plan.pci.is_empty() {
        return;
    }
    let limit = host.read("/proc/self/limits").and_then(|s| {
        let l = s.lines().find(|l| l.starts_with("Max locked memory"))?;
        let soft = l
            .trim_start_matches("Max locked memory")
            .split_whitespace()
            .next()?;
        Some(if soft == "unlimited" {
            u64::MAX
        } else {
            soft.parse::<u64>().ok()?
        })
    });
    let need = plan.memory_mb.unwrap_or(1024) << 20;
    if let Some(l) = limit.filter(|&l| l < need) {
        out.push(bad(
            "memlock",
            Status::Warn,
            format!("not root, and {} MiB may be locked", l >> 20),
            "vfio pins every DMA page: LimitMEMLOCK=infinity in the unit \
             (deploy/systemd/ddpdk@.service has it) or ulimit -l unlimited",
        ));
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
        plan.cpus
            .iter()
            .flatten()
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
failed, 0 otherwise. docs/deploy.md explains each check.

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

#[cfg(test)]
mod tests {
    use super::*;

    /// A host tree under a fresh directory: files written, symlinks made.
    struct Tree(PathBuf);

    impl Tree {
        fn new(name: &str) -> Tree {
            let d =
                std::env::temp_dir().join(format!("ddpdk-preflight-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).expect("temp dir");
            Tree(d)
        }

        fn file(&self, p: &str, text: &str) -> &Tree {
            let f = self.0.join(p.trim_start_matches('/'));
            std::fs::create_dir_all(f.parent().expect("parent")).expect("dir");
            std::fs::write(f, text).expect("write");
            self
        }

        fn dir(&self, p: &str) -> &Tree {
            std::fs::create_dir_all(self.0.join(p.trim_start_matches('/'))).expect("dir");
            self
        }

        fn link(&self, p: &str, target: &str) -> &Tree {
            let f = self.0.join(p.trim_start_matches('/'));
            std::fs::create_dir_all(f.parent().expect("parent")).expect("dir");
            std::os::unix::fs::symlink(target, f).expect("symlink");
            self
        }

        /// Two CPUs on node 0 and two on node 1, every flag ddpdk wants, 2 MiB pages
        /// mounted with `free` of them free on node `on`, running as root.
        fn host(name: &str, free: u64) -> Tree {
            let t = Tree::new(name);
            t.file(
                "/proc/cpuinfo",
                "processor\t: 0\nflags\t\t: fpu sse4_2 pclmulqdq aes avx2 constant_tsc nonstop_tsc\n",
            )
            .file("/proc/meminfo", "MemTotal: 1000 kB\nHugepagesize:       2048 kB\n")
            .file("/proc/mounts", "nodev /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n")
            .file("/proc/self/status", "Name:\tddpdk\nUid:\t0\t0\t0\t0\n")
            .file("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", &free.to_string())
            .file("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", &free.to_string())
            .file("/sys/devices/system/node/node0/cpulist", "0-1")
            .file("/sys/devices/system/node/node1/cpulist", "2-3")
            .file(
                "/sys/devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages",
                &free.to_string(),
            )
            .file("/sys/devices/system/node/node1/hugepages/hugepages-2048kB/free_hugepages", "0")
            .file("/sys/devices/system/cpu/online", "0-3")
            .file("/sys/devices/system/cpu/isolated", "1-3")
            .file("/sys/devices/system/cpu/nohz_full", "1-3")
            .dir("/sys/kernel/iommu_groups/0");
            for c in 0..4 {
                t.file(
                    &format!("/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list"),
                    &c.to_string(),
                );
            }
            t
        }

        /// A NIC at 0000:03:00.0 on `node`, bound to `driver` (none: unbound), its kernel
        /// interface eth2 up when a kernel driver holds it.
        fn nic(&self, node: i32, driver: Option<&str>) -> &Tree {
            let dev = "/sys/bus/pci/devices/0000:03:00.0";
            self.file(&format!("{dev}/class"), "0x020000")
                .file(&format!("{dev}/numa_node"), &node.to_string());
            if let Some(d) = driver {
                self.link(
                    &format!("{dev}/driver"),
                    &format!("../../../bus/pci/drivers/{d}"),
                );
                if d != VFIO && !UIO.contains(&d) {
                    self.file(&format!("{dev}/net/eth2/operstate"), "up");
                }
            }
            self
        }

        fn check(&self, eal: &[&str]) -> Vec<Finding> {
            let mut args = vec!["ddpdk".to_string()];
            args.extend(eal.iter().map(|s| s.to_string()));
            check(&Host::new(&self.0), &plan(&args).expect("plan"))
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn find<'a>(f: &'a [Finding], check: &str, status: Status) -> Option<&'a Finding> {
        f.iter().find(|x| x.check == check && x.status == status)
    }

    fn worst(f: &[Finding]) -> Status {
        f.iter().map(|x| x.status).max().unwrap_or(Status::Ok)
    }

    #[test]
    fn every_form_of_the_eal_options_is_read() {
        let args = |v: &[&str]| -> Vec<String> {
            std::iter::once("ddpdk")
                .chain(v.iter().copied())
                .map(String::from)
                .collect()
        };
        let p = plan(&args(&[
            "-l",
            "2-4,7",
            "--main-lcore",
            "4",
            "-m1024",
            "-a",
            "03:00.1,rxq_cqe_comp_en=0",
            "--allow=0000:81:00.0",
            "--vdev",
            "net_memif0,role=server",
            "-anet_null0",
            "--file-prefix",
            "x",
            "--no-huge",
        ]))
        .expect("plan");
        assert_eq!(p.cpus, Some(vec![4, 2, 3, 7]), "the main lcore first");
        assert_eq!(p.memory_mb, Some(1024));
        assert_eq!(p.pci, ["0000:03:00.1", "0000:81:00.0"]);
        assert_eq!(p.vdevs, ["net_memif0", "net_null0"]);
        assert!(p.no_huge && !p.no_pci);
        let p = plan(&args(&[
            "--lcores=(0,1)@(2,3),4@5,6",
            "--socket-mem",
            "512,256",
        ]))
        .expect("plan");
        assert_eq!(
            p.cpus,
            Some(vec![2, 3, 5, 6]),
            "an lcore map runs on the CPUs after @"
        );
        assert_eq!((p.memory_mb, p.socket_mem), (Some(768), vec![512, 256]));
        assert_eq!(
            plan(&args(&["-c", "0x13"])).expect("plan").cpus,
            Some(vec![0, 1, 4])
        );
        for bad in [
            &["-l", "3-1"][..],
            &["-c", "xyz"],
            &["-m", "lots"],
            &["--lcores", "a@b"],
        ] {
            assert!(plan(&args(bad)).is_err(), "{bad:?} refused");
        }
    }

    #[test]
    fn a_prepared_host_passes_every_check() {
        let t = Tree::host("prepared", 1024);
        t.nic(0, Some(VFIO));
        let f = t.check(&["-l", "0-1", "-m", "1024", "-a", "0000:03:00.0"]);
        // CPU 0 is the main lcore's, shared with the system by design; 1 is isolated.
        let f: Vec<_> = f.into_iter().filter(|x| x.check != "isolation").collect();
        assert_eq!(worst(&f), Status::Ok, "{}", render(&f));
        let f = t.check(&["-l", "1", "-m", "1024", "-a", "0000:03:00.0"]);
        assert_eq!(worst(&f), Status::Ok, "{}", render(&f));
    }

    #[test]
    fn a_nic_bound_to_its_kernel_driver_fails_with_the_binding_to_do() {
        let t = Tree::host("kernel", 1024);
        t.nic(0, Some("ixgbe"));
        let f = t.check(&["-l", "1", "-a", "03:00.0"]);
        let d = find(&f, "device", Status::Fail).expect("the device fails");
        assert!(
            d.what.contains("kernel's ixgbe, interface eth2 up"),
            "{}",
            d.what
        );
        let fix = d.fix.as_deref().unwrap_or_default();
        assert!(
            fix.contains("ip link set eth2 down")
                && fix.contains("dpdk-devbind.py -b vfio-pci 0000:03:00.0"),
            "{fix}"
        );
        let t = Tree::host("unbound", 1024);
        t.nic(0, None);
        let f = t.check(&["-l", "1", "-a", "03:00.0"]);
        assert!(find(&f, "device", Status::Fail).is_some_and(|d| d.what.contains("no driver")));
        let f = t.check(&["-l", "1", "-a", "0000:04:00.0"]);
        assert!(
            find(&f, "device", Status::Fail).is_some_and(|d| d.what.contains("no such PCI device"))
        );
    }

    #[test]
    fn vfio_needs_an_iommu_and_uio_is_a_warning() {
        let t = Tree::host("iommu", 1024);
        t.nic(0, Some(VFIO));
        std::fs::remove_dir_all(t.0.join("sys/kernel/iommu_groups")).expect("rm");
        let f = t.check(&["-l", "1", "-a", "03:00.0"]);
        assert!(
            find(&f, "device", Status::Fail).is_some_and(|d| d.what.contains("no IOMMU groups"))
        );
        t.file(
            "/sys/module/vfio/parameters/enable_unsafe_noiommu_mode",
            "Y",
        );
        let f = t.check(&["-l", "1", "-a", "03:00.0"]);
        assert!(find(&f, "device", Status::Warn).is_some_and(|d| d.what.contains("no-IOMMU mode")));
        let t = Tree::host("uio", 1024);
        t.nic(0, Some("uio_pci_generic"));
        let f = t.check(&["-l", "1", "-a", "03:00.0"]);
        assert_eq!(worst(&f), Status::Warn, "{}", render(&f));
        let t = Tree::host("mlx", 1024);
        t.nic(0, Some("mlx5_core"));
        let f = t.check(&["-l", "1", "-a", "03:00.0"]);
        assert_eq!(
            worst(&f),
            Status::Ok,
            "a bifurcated driver is DPDK's too: {}",
            render(&f)
        );
    }

    #[test]
    fn a_nic_on_another_numa_node_than_its_lcores_warns_with_that_nodes_cpus() {
        let t = Tree::host("numa", 1024);
        t.nic(1, Some(VFIO));
        let f = t.check(&["-l", "1", "-a", "03:00.0"]);
        let n = find(&f, "numa", Status::Warn).expect("a NUMA warning");
        assert!(n.what.contains("node 1, lcores on node 0"), "{}", n.what);
        assert!(n
            .fix
            .as_deref()
            .unwrap_or_default()
            .contains("node 1's CPUs (2,3)"));
        // ... and its node has no free hugepages either.
        assert!(f
            .iter()
            .any(|x| x.check == "numa" && x.what.contains("no free hugepages on node 1")));
        let f = t.check(&["-l", "2-3", "-a", "03:00.0"]);
        assert!(find(&f, "numa", Status::Warn).is_some_and(|n| n.what.contains("hugepages")));
        assert!(
            !f.iter().any(|x| x.what.contains("lcores on node")),
            "{}",
            render(&f)
        );
    }

    #[test]
    fn hugepages_fewer_than_asked_fail_with_the_count_to_reserve() {
        let t = Tree::host("few", 100);
        let f = t.check(&["-l", "1", "-m", "1024", "--no-pci", "--vdev", "net_ring0"]);
        let h = find(&f, "hugepages", Status::Fail).expect("too few pages fail");
        assert!(
            h.what.contains("1024 MiB asked for, 200 MiB free"),
            "{}",
            h.what
        );
        // 100 reserved, 412 more for the 824 MiB missing.
        assert!(h
            .fix
            .as_deref()
            .unwrap_or_default()
            .starts_with("echo 512 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"));
        let f = t.check(&[
            "-l",
            "1",
            "--socket-mem",
            "0,128",
            "--no-pci",
            "--vdev",
            "net_ring0",
        ]);
        assert!(find(&f, "hugepages", Status::Fail)
            .is_some_and(|h| h.what.contains("128 MiB on node 1, 0 MiB free")));
        let t = Tree::host("none", 0);
        let f = t.check(&["-l", "1", "--no-pci", "--vdev", "net_ring0"]);
        assert!(
            find(&f, "hugepages", Status::Fail).is_some_and(|h| h.what.starts_with("none free"))
        );
        let f = t.check(&["-l", "1", "--no-huge", "--no-pci", "--vdev", "net_ring0"]);
        assert_eq!(
            worst(&f),
            Status::Warn,
            "--no-huge runs, slower: {}",
            render(&f)
        );
    }

    #[test]
    fn no_hugetlbfs_mount_fails_and_names_the_mount() {
        let t = Tree::host("unmounted", 512);
        t.file("/proc/mounts", "proc /proc proc rw 0 0\n");
        let f = t.check(&["-l", "1", "--no-pci", "--vdev", "net_ring0"]);
        let h = find(&f, "hugepages", Status::Fail).expect("fails");
        assert!(h
            .fix
            .as_deref()
            .unwrap_or_default()
            .starts_with("mount -t hugetlbfs"));
        let t = Tree::host("elsewhere", 512);
        let f = t.check(&[
            "-l",
            "1",
            "--huge-dir",
            "/mnt/huge",
            "--no-pci",
            "--vdev",
            "net_ring0",
        ]);
        assert!(find(&f, "hugepages", Status::Fail).is_some_and(|h| h.what.contains("/mnt/huge")));
    }

    #[test]
    fn lcores_absent_offline_shared_or_siblings_are_named() {
        let t = Tree::host("cpus", 512);
        t.file("/sys/devices/system/cpu/cpu3/online", "0");
        let f = t.check(&["-l", "1,3,9", "--no-pci", "--vdev", "net_ring0"]);
        let l = find(&f, "lcores", Status::Fail).expect("fails");
        assert_eq!(l.what, "no CPU 9; CPU 3 offline");
        t.file(
            "/sys/devices/system/cpu/cpu1/topology/thread_siblings_list",
            "1,3",
        )
        .file("/sys/devices/system/cpu/cpu3/online", "1");
        let f = t.check(&["-l", "1,3", "--no-pci", "--vdev", "net_ring0"]);
        assert!(find(&f, "smt", Status::Warn).is_some_and(|s| s.what.contains("1 and 3")));
        let f = t.check(&["--lcores", "1@1,2@1", "--no-pci", "--vdev", "net_ring0"]);
        assert!(find(&f, "lcores", Status::Warn).is_some_and(|s| s.what.contains("share")));
        let f = t.check(&["-l", "0,1", "--no-pci", "--vdev", "net_ring0"]);
        let i = find(&f, "isolation", Status::Warn).expect("CPU 0 is not isolated");
        assert!(
            i.what.contains("CPU 0 not isolated") && i.what.contains("CPU 0 takes the timer tick"),
            "{}",
            i.what
        );
        let f = t.check(&["--no-pci", "--vdev", "net_ring0"]);
        assert!(find(&f, "lcores", Status::Warn).is_some_and(|s| s.what.contains("no -l")));
        t.file(
            "/sys/devices/system/cpu/cpu2/cpufreq/scaling_governor",
            "powersave",
        );
        let f = t.check(&["-l", "2", "--no-pci", "--vdev", "net_ring0"]);
        assert!(
            find(&f, "governor", Status::Warn).is_some_and(|g| g.what.contains("2 (powersave)"))
        );
    }

    #[test]
    fn a_cpu_without_sse42_fails_and_a_varying_tsc_warns() {
        let t = Tree::host("oldcpu", 512);
        t.file("/proc/cpuinfo", "flags\t: fpu pclmulqdq constant_tsc\n");
        let f = t.check(&["-l", "1", "--no-pci", "--vdev", "net_ring0"]);
        assert!(find(&f, "cpu", Status::Fail).is_some_and(|c| c.what == "no SSE4.2"));
        assert!(find(&f, "tsc", Status::Warn).is_some_and(|c| c.what.contains("not non-stop")));
    }

    #[test]
    fn a_user_with_a_small_memlock_limit_is_warned() {
        let t = Tree::host("user", 512);
        t.nic(0, Some(VFIO))
            .file("/proc/self/status", "Uid:\t1000\t1000\t1000\t1000\n")
            .file(
                "/proc/self/limits",
                "Limit                     Soft Limit           Hard Limit           Units\nMax locked memory         8388608              8388608              bytes\n",
            );
        let f = t.check(&["-l", "1", "-a", "03:00.0"]);
        assert!(find(&f, "memlock", Status::Warn).is_some_and(|m| m.what.contains("8 MiB")));
        t.file("/proc/self/status", "Uid:\t0\t0\t0\t0\n");
        assert!(t
            .check(&["-l", "1", "-a", "03:00.0"])
            .iter()
            .all(|x| x.check != "memlock"));
    }

    #[test]
    fn no_port_at_all_fails() {
        let t = Tree::host("noport", 512);
        let f = t.check(&["-l", "1", "--no-pci"]);
        assert!(find(&f, "devices", Status::Fail).is_some());
        let f = t.check(&["-l", "1"]);
        assert!(find(&f, "devices", Status::Fail)
            .is_some_and(|d| d.what.contains("no network device bound")));
        t.nic(0, Some(VFIO));
        let f = t.check(&["-l", "1"]);
        assert!(find(&f, "devices", Status::Warn).is_some_and(|d| d.what.contains("0000:03:00.0")));
    }
}
