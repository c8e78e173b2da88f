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

/// DPDK's RTE_MAX_LCORE in Debian's 22.11 build (rte_build_config.h): the EAL refuses an
/// lcore id at or above it.
pub const RTE_MAX_LCORE: u32 = 128;

/// glibc's CPU_SETSIZE: the EAL refuses a CPU id at or above it in `--lcores`.
const CPU_SETSIZE: u32 = 1024;

/// How the lcores were given: the fix for an lcore id too large differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LcoreForm {
    #[default]
    None,
    /// `-l` or `-c`: lcore id and CPU id are one number.
    List,
    /// `--lcores`: lcore ids mapped to CPU sets.
    Map,
}

/// What the EAL options of a run ask of the host.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Each lcore id and the CPUs it runs on, by ascending lcore id, as the EAL keeps them
    /// (`-l`/`-c`: each on the CPU of its number; `--lcores`: on the set after `@`). Empty:
    /// no `-l`, `-c` or `--lcores`, and the EAL takes every CPU.
    pub lcores: Vec<(u32, Vec<u32>)>,
    pub form: LcoreForm,
    /// `--main-lcore`; without it the EAL's main lcore is the lowest lcore id.
    pub main_lcore: Option<u32>,
    pub no_huge: bool,
    /// `--in-memory`: hugepages without files, so no hugetlbfs mount is needed.
    pub in_memory: bool,
    /// `-m`, or the sum of `--socket-mem`, in MiB.
    pub memory_mb: Option<u64>,
    /// `--socket-mem`, MiB per NUMA node.
    pub socket_mem: Vec<u64>,
    pub huge_dir: Option<String>,
    pub no_pci: bool,
    /// PCI addresses of `-a`/`--allow`, as DPDK names them (`0000:03:00.0`).
    pub pci: Vec<String>,
    /// PCI addresses of `-b`/`--block`: the EAL probes every bound device but these.
    pub blocked: Vec<String>,
    /// `--vdev` and virtual devices given with `-a`.
    pub vdevs: Vec<String>,
}

impl Plan {
    /// The main lcore's id: `--main-lcore`, else the lowest lcore id (the EAL's
    /// `rte_get_next_lcore(-1, 0, 0)`); `None` without lcores.
    pub fn main(&self) -> Option<u32> {
        self.main_lcore
            .or_else(|| self.lcores.first().map(|(id, _)| *id))
    }

    /// The CPUs the lcores run on, the main lcore's first, a CPU once for each lcore on
    /// it (so that two lcores on one CPU show as a repeat); `None`: no lcores given.
    pub fn cpus(&self) -> Option<Vec<u32>> {
        if self.lcores.is_empty() {
            return None;
        }
        let main = self.main();
        let mut out = Vec::new();
        for (_, cpus) in self.lcores.iter().filter(|(id, _)| Some(*id) == main) {
            out.extend(cpus);
        }
        for (_, cpus) in self.lcores.iter().filter(|(id, _)| Some(*id) != main) {
            out.extend(cpus);
        }
        Some(out)
    }
}

/// A list of CPUs as sysfs writes them: `0-3,8,10-11`.
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

/// `-l`'s core list as DPDK 22.11's eal_parse_corelist reads it: a repeated id counts once
/// (lcore ids are a set). A reversed range (`3-1`) selects nothing there, silently: named
/// here instead of checking a run that has fewer lcores than written.
fn core_list(s: &str) -> Result<Vec<u32>, String> {
    let bad = || format!("-l '{s}' is not a core list (such as 2-5,8)");
    let num = |t: &str| t.trim().parse::<u32>().map_err(|_| bad());
    let mut out: Vec<u32> = Vec::new();
    for part in s.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if a > b {
            return Err(format!(
                "-l '{s}': the range {a}-{b} runs backwards, and DPDK 22.11 takes no lcore \
                 from it: write {b}-{a}"
            ));
        }
        for id in a..=b {
            if !out.contains(&id) {
                // As eal_parse_corelist: no more lcores than it has room for.
                if out.len() >= RTE_MAX_LCORE as usize {
                    return Err(format!(
                        "-l '{s}': more than RTE_MAX_LCORE ({RTE_MAX_LCORE}) lcores"
                    ));
                }
                out.push(id);
            }
        }
    }
    Ok(out)
}

/// One set of `--lcores` as eal_parse_set reads it: `3`, `1-3` (or `3-1`: DPDK takes min..max)
/// or `(0,2-4)`.
fn lcore_set(s: &str, whole: &str) -> Result<Vec<u32>, String> {
    let bad = || format!("--lcores '{whole}' is not an lcore map (such as 0@2,(1-3)@4)");
    let s = s.trim();
    let inner = match s.strip_prefix('(') {
        Some(r) => r.strip_suffix(')').ok_or_else(bad)?,
        None => s,
    };
    let mut out = BTreeSet::new();
    for part in inner.split(',') {
        let num = |t: &str| {
            let t = t.trim();
            (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
                .then(|| t.parse::<u32>().ok())
                .flatten()
                .filter(|&n| n < CPU_SETSIZE)
                .ok_or_else(bad)
        };
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        out.extend(a.min(b)..=a.max(b));
    }
    Ok(out.into_iter().collect())
}

/// `--lcores` (`0-3`, `1@2`, `(0,1)@(2,3),4`, `(1-3)@2`) as eal_parse_lcores reads it: each
/// lcore id and the CPUs it runs on, by lcore id. Without `@`, a bare range `1-3` puts each
/// lcore on its own CPU, a group `(1-3)` puts all of them on the group's CPUs; a later
/// mention of an lcore id replaces its CPUs.
fn lcores_map(s: &str) -> Result<Vec<(u32, Vec<u32>)>, String> {
    let mut groups = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
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
    let mut map = std::collections::BTreeMap::new();
    for g in groups {
        let (ids, cpus) = match g.split_once('@') {
            Some((l, c)) => (lcore_set(l, s)?, Some(lcore_set(c, s)?)),
            None => (lcore_set(g, s)?, None),
        };
        let own_cpu = cpus.is_none() && !g.trim().starts_with('(');
        for &id in &ids {
            let on = match &cpus {
                Some(c) => c.clone(),
                None if own_cpu => vec![id],
                None => ids.clone(),
            };
            map.insert(id, on);
        }
    }
    Ok(map.into_iter().collect())
}

/// `-c`: bit N selects lcore N (on CPU N).
fn coremask(s: &str) -> Result<Vec<u32>, String> {
    let t = s.trim();
    let hex = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    if hex.len() > (CPU_SETSIZE / 4) as usize {
        return Err(format!("-c '{s}' is longer than any CPU count"));
    }
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

/// A number as C's `strtol(s, &end, 0)` reads it with nothing left after it, as
/// `--main-lcore` is read: `0x` hexadecimal, a leading `0` octal, else decimal.
fn strtol0(s: &str) -> Option<u64> {
    let t = s.trim_start();
    let t = t.strip_prefix('+').unwrap_or(t);
    let (digits, radix) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (h, 16)
    } else if t.len() > 1 && t.starts_with('0') {
        (&t[1..], 8)
    } else {
        (t, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// A PCI address as DPDK's rte_pci_addr_parse takes one (`BB:DD.F` or `DOMAIN:BB:DD.F`,
/// hexadecimal fields of any width that fit: a domain up to 32 bits, the others 8), named
/// as DPDK names it (`%04x:%02x:%02x.%x`); `None` when it is not one.
fn pci_address(addr: &str) -> Option<String> {
    // strtoul(.., 16): an optional 0x, then hex digits; DPDK forbids a leading blank or '-'.
    let field = |t: &str, max: u64| -> Option<u64> {
        let h = t
            .strip_prefix("0x")
            .or_else(|| t.strip_prefix("0X"))
            .unwrap_or(t);
        (!h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u64::from_str_radix(h, 16).ok())
            .flatten()
            .filter(|&v| v <= max)
    };
    let (head, func) = addr.rsplit_once('.')?;
    let parts: Vec<&str> = head.split(':').collect();
    let (dom, bus, dev) = match parts.as_slice() {
        [b, d] => (0, *b, *d),
        [dom, b, d] => (field(dom, u64::from(u32::MAX))?, *b, *d),
        _ => return None,
    };
    let (bus, dev, func) = (field(bus, 0xff)?, field(dev, 0xff)?, field(func, 0xff)?);
    Some(format!("{dom:04x}:{bus:02x}:{dev:02x}.{func:x}"))
}

/// A virtual device's name as DPDK's drivers are named (`net_ring0`, `crypto_aesni_mb`):
/// the vdev bus takes a name that starts with a driver's.
fn vdev_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.contains('_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

/// A device named with its bus (`auxiliary:mlx5_core.sf.2`), which the EAL hands to that bus.
fn other_bus(name: &str) -> bool {
    name.split_once(':').is_some_and(|(bus, rest)| {
        !bus.is_empty() && bus.chars().all(|c| c.is_ascii_lowercase()) && !rest.is_empty()
    })
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

/// MiB to bytes, `None` past u64 (an `-m` the EAL would wrap).
fn mib(mb: u64) -> Option<u64> {
    mb.checked_mul(1 << 20)
}

/// What the EAL options (program name first, as `split_args` gives them) ask for. An error
/// is an option the EAL itself refuses (or preflight's own option among the EAL's): the
/// run would not start, whatever the host.
pub fn plan(eal: &[String]) -> Result<Plan, String> {
    let mut p = Plan::default();
    // Which of -l, -c, --lcores came: the EAL refuses a second one.
    let mut cores_by: Option<&str> = None;
    let mut cores = |by: &'static str| match cores_by.replace(by) {
        Some(first) => Err(format!(
            "{by} after {first}: the EAL takes one of -l, -c and --lcores"
        )),
        None => Ok(()),
    };
    let (mut m_given, mut blocked) = (false, Vec::new());
    let mut i = 1;
    while i < eal.len() {
        let a = eal[i].as_str();
        let next = if let Some((v, n)) = value_of(eal, i, "-l") {
            cores("-l")?;
            p.lcores = core_list(v)?.into_iter().map(|c| (c, vec![c])).collect();
            p.lcores.sort();
            p.form = LcoreForm::List;
            n
        } else if let Some((v, n)) = value_of(eal, i, "--lcores") {
            cores("--lcores")?;
            p.lcores = lcores_map(v)?;
            p.form = LcoreForm::Map;
            n
        } else if let Some((v, n)) = value_of(eal, i, "-c") {
            cores("-c")?;
            p.lcores = coremask(v)?.into_iter().map(|c| (c, vec![c])).collect();
            p.form = LcoreForm::List;
            n
        } else if let Some((v, n)) = value_of(eal, i, "--main-lcore") {
            let id = strtol0(v).ok_or_else(|| format!("--main-lcore '{v}' is not an lcore id"))?;
            let id = u32::try_from(id)
                .ok()
                .filter(|&id| id < RTE_MAX_LCORE)
                .ok_or_else(|| {
                    format!(
                        "--main-lcore {v}: the EAL takes lcore ids below {RTE_MAX_LCORE} \
                         (RTE_MAX_LCORE)"
                    )
                })?;
            p.main_lcore = Some(id);
            n
        } else if let Some((v, n)) = value_of(eal, i, "-m") {
            let mb: u64 = v
                .trim()
                .parse()
                .map_err(|_| format!("-m '{v}' is not a number of MiB"))?;
            mib(mb).ok_or_else(|| format!("-m {v}: more MiB than a 64-bit address space"))?;
            p.memory_mb = Some(mb);
            m_given = true;
            n
        } else if let Some((v, n)) = value_of(eal, i, "--socket-mem") {
            let bad = || format!("--socket-mem '{v}' is not MiB per node (such as 1024,0)");
            p.socket_mem = v
                .split(',')
                .map(|m| m.trim().parse::<u64>())
                .collect::<Result<_, _>>()
                .map_err(|_| bad())?;
            let sum = p
                .socket_mem
                .iter()
                .try_fold(0u64, |s, &m| s.checked_add(m))
                .filter(|&s| mib(s).is_some())
                .ok_or_else(|| format!("--socket-mem {v}: more MiB than a 64-bit address space"))?;
            p.memory_mb = Some(sum);
            n
        } else if let Some((v, n)) = value_of(eal, i, "--huge-dir") {
            p.huge_dir = Some(v.to_string());
            n
        } else if let Some((v, n)) = value_of(eal, i, "-b").or_else(|| value_of(eal, i, "--block"))
        {
            let addr = v.split(',').next().unwrap_or(v);
            blocked.push(
                pci_address(addr).ok_or_else(|| {
                    format!("-b '{v}' is not a PCI address (such as 0000:03:00.0)")
                })?,
            );
            n
        } else {
            match a {
                "--no-huge" => p.no_huge = true,
                "--in-memory" => p.in_memory = true,
                "--no-pci" => p.no_pci = true,
                "--json" | "--root" => {
                    return Err(format!(
                        "{a} is preflight's option, not the EAL's: it goes after '--' \
                         (ddpdk preflight [EAL options] -- {a})"
                    ))
                }
                _ if a.starts_with("--root=") => {
                    return Err(
                        "--root is preflight's option, not the EAL's: it goes after \
                                '--' (ddpdk preflight [EAL options] -- --root DIR)"
                            .into(),
                    )
                }
                _ => {}
            }
            i + 1
        };
        i = next;
    }
    if m_given && !p.socket_mem.is_empty() {
        return Err("-m and --socket-mem together: the EAL refuses them (give one)".into());
    }
    if p.no_huge && !p.socket_mem.is_empty() {
        return Err("--socket-mem and --no-huge together: the EAL refuses them".into());
    }
    for (at, off) in crate::vdev::device_specs(eal) {
        let spec = &eal[at][off..];
        // The option is in the same word (`--vdev=X`, `-aX`) or the one before.
        let option = if off > 0 {
            &eal[at][..off]
        } else {
            eal[at - 1].as_str()
        };
        let name = spec.split(',').next().unwrap_or(spec);
        if option.starts_with("--vdev") {
            p.vdevs.push(name.to_string());
            continue;
        }
        let name = name.strip_prefix("pci:").unwrap_or(name);
        if let Some(a) = pci_address(name) {
            p.pci.push(a);
        } else if vdev_name(name.strip_prefix("vdev:").unwrap_or(name)) {
            p.vdevs.push(name.trim_start_matches("vdev:").to_string());
        } else if other_bus(name) {
            // `auxiliary:mlx5_core.sf.2` and the like: another bus's device, not checked.
            p.vdevs.push(name.to_string());
        } else {
            return Err(format!(
                "{option} '{spec}' is neither a PCI address (0000:03:00.0, 03:00.0) nor a \
                 virtual device's name (net_ring0): the EAL would not start"
            ));
        }
    }
    if !blocked.is_empty() && !p.pci.is_empty() {
        return Err(
            "-a and -b together: the EAL refuses them (an allow list already leaves the \
             others out)"
                .into(),
        );
    }
    p.blocked = blocked;
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

/// `0@128,1@129`: lcore ids below RTE_MAX_LCORE, main lcore first, on the CPUs given.
fn lcores_rewrite(plan: &Plan) -> String {
    let main = plan.main();
    let ordered = plan
        .lcores
        .iter()
        .filter(|(id, _)| Some(*id) == main)
        .chain(plan.lcores.iter().filter(|(id, _)| Some(*id) != main));
    ordered
        .enumerate()
        .map(|(i, (_, cpus))| match cpus.as_slice() {
            [c] => format!("{i}@{c}"),
            cs => format!("{i}@({})", fmt_cpus(cs)),
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn check_lcores(host: &Host, plan: &Plan, out: &mut Vec<Finding>) {
    let Some(cpus) = plan.cpus() else {
        out.push(bad(
            "lcores",
            Status::Warn,
            "no -l: the EAL makes every CPU an lcore".into(),
            "give -l with the CPUs set aside for ddpdk (the lowest is the main lcore, the \
             control thread's; --main-lcore names another), as docs/deploy.md says",
        ));
        return;
    };
    // The EAL keeps lcores in an array of RTE_MAX_LCORE: a larger id stops it, and a CPU
    // numbered that high is reached by mapping a small lcore id onto it.
    let too_big: Vec<u32> = plan
        .lcores
        .iter()
        .map(|(id, _)| *id)
        .filter(|&id| id >= RTE_MAX_LCORE)
        .collect();
    if !too_big.is_empty() {
        out.push(bad(
            "lcores",
            Status::Fail,
            format!(
                "lcore id{} {} at or above RTE_MAX_LCORE ({RTE_MAX_LCORE}): the EAL refuses \
                 {}",
                if too_big.len() == 1 { "" } else { "s" },
                fmt_cpus(&too_big),
                if too_big.len() == 1 { "it" } else { "them" }
            ),
            format!(
                "map small lcore ids onto those CPUs: --lcores {} (instead of {})",
                lcores_rewrite(plan),
                match plan.form {
                    LcoreForm::Map => "this --lcores",
                    _ => "-l or -c",
                }
            ),
        ));
        return;
    }
    let main = plan.main().unwrap_or(0);
    if !plan.lcores.iter().any(|(id, _)| *id == main) {
        let ids: Vec<u32> = plan.lcores.iter().map(|(id, _)| *id).collect();
        out.push(bad(
            "lcores",
            Status::Fail,
            format!(
                "--main-lcore {main} is not among the lcores ({}): the EAL stops with \"Main \
                 lcore is not enabled for DPDK\"",
                fmt_cpus(&ids)
            ),
            "give --main-lcore one of the lcore ids, or add it to -l/--lcores",
        ));
        return;
    }
    let unique: BTreeSet<u32> = cpus.iter().copied().collect();
    let mut missing = Vec::new();
    let mut offline = Vec::new();
    for &c in &unique {
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
    let main_cpus: Vec<u32> = plan
        .lcores
        .iter()
        .find(|(id, _)| *id == main)
        .map(|(_, c)| c.clone())
        .unwrap_or_default();
    if unique.len() < cpus.len() {
        out.push(bad(
            "lcores",
            Status::Warn,
            format!("lcores share CPUs ({})", fmt_cpus(&cpus)),
            "every lcore polls without pause: two on one CPU take turns at the scheduler's \
             pace; give each its own CPU",
        ));
    } else {
        out.push(ok(
            "lcores",
            format!(
                "{} online (main lcore {main} on {})",
                cpus_named(&cpus),
                fmt_cpus(&main_cpus)
            ),
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
    // The main lcore runs the control thread, which sleeps and may share its CPU with the
    // system (housekeeping); the data lcores poll and are the ones to isolate. A run of one
    // lcore polls on the main one.
    let data: Vec<u32> = {
        let d: BTreeSet<u32> = plan
            .lcores
            .iter()
            .filter(|(id, _)| *id != main)
            .flat_map(|(_, c)| c.iter().copied())
            .filter(|c| !main_cpus.contains(c))
            .collect();
        if d.is_empty() {
            unique.iter().copied().collect()
        } else {
            d.into_iter().collect()
        }
    };
    let isolated = host
        .read("/sys/devices/system/cpu/isolated")
        .and_then(|s| cpu_list(&s).ok())
        .unwrap_or_default();
    // No nohz_full file: a kernel built without CONFIG_NO_HZ_FULL, where the boot option
    // does nothing.
    let nohz_file = host.read("/sys/devices/system/cpu/nohz_full");
    let nohz = nohz_file
        .as_deref()
        .and_then(|s| cpu_list(s).ok())
        .unwrap_or_default();
    let shared_cpus: Vec<u32> = data
        .iter()
        .copied()
        .filter(|c| !isolated.contains(c))
        .collect();
    let ticking: Vec<u32> = data.iter().copied().filter(|c| !nohz.contains(c)).collect();
    if shared_cpus.is_empty() && ticking.is_empty() {
        out.push(ok(
            "isolation",
            format!("data lcores' {} isolated, tickless", cpus_named(&data)),
        ));
    } else {
        let list = fmt_cpus(&data);
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
        let nohz_fix = if nohz_file.is_none() {
            format!(
                "; this kernel lacks NO_HZ_FULL (no /sys/devices/system/cpu/nohz_full), so \
                 nohz_full={list} needs a kernel built with CONFIG_NO_HZ_FULL"
            )
        } else {
            String::new()
        };
        out.push(bad(
            "isolation",
            Status::Warn,
            what.join("; "),
            format!(
                "isolcpus={list} nohz_full={list} rcu_nocbs={list} on the kernel command \
                 line (the data lcores' CPUs; the main lcore's stay the system's): a poll \
                 loop preempted for microseconds adds them to a write's latency{nohz_fix}"
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
/// default size); `None` for a size of 0 or past u64, which no page has.
fn page_bytes(opts: &str, default_kb: u64) -> Option<u64> {
    let b = match opts.split(',').find_map(|o| o.strip_prefix("pagesize=")) {
        Some(v) => {
            let (n, unit) = v.split_at(v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len()));
            let n: u64 = n.parse().ok()?;
            match unit {
                "K" | "k" => n.checked_mul(1 << 10)?,
                "M" | "m" => n.checked_mul(1 << 20)?,
                "G" | "g" => n.checked_mul(1 << 30)?,
                _ => n,
            }
        }
        None => default_kb.checked_mul(1 << 10)?,
    };
    (b > 0).then_some(b)
}

/// The kernel's name of a page size on its command line: `2M`, `1G`.
fn size_arg(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 30) {
        format!("{}G", bytes >> 30)
    } else if bytes.is_multiple_of(1 << 20) {
        format!("{}M", bytes >> 20)
    } else {
        format!("{}K", bytes >> 10)
    }
}

/// The (major, minor) of a `st_dev` as Linux encodes it (glibc's gnu_dev_major/minor), to
/// match the `MAJ:MIN:INODE` of /proc/locks, whose numbers are hexadecimal.
fn dev_major_minor(dev: u64) -> (u64, u64) {
    (
        ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff),
        (dev & 0xff) | ((dev >> 12) & !0xff),
    )
}

/// The files a locks holds, as (major, minor, inode) from /proc/locks
/// (`1: FLOCK  ADVISORY  READ 1234 00:2e:5678 0 EOF`).
fn locked_files(host: &Host) -> BTreeSet<(u64, u64, u64)> {
    host.read("/proc/locks")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let id = l.split_whitespace().find(|w| w.matches(':').count() == 2)?;
            let mut f = id.split(':');
            let maj = u64::from_str_radix(f.next()?, 16).ok()?;
            let min = u64::from_str_radix(f.next()?, 16).ok()?;
            let ino = f.next()?.parse::<u64>().ok()?;
            Some((maj, min, ino))
        })
        .collect()
}

/// Bytes in `*map_*` files of a hugetlbfs directory that no process holds a lock on: the
/// backing files a run leaves (or a crash), which the next EAL start deletes (clear_hugedir
/// in eal_hugepage_info.c takes each it can flock exclusively), their pages then free. A
/// running DPDK process holds a lock on each of its own. Read from /proc/locks rather than
/// by trying the lock, which would change what a starting EAL sees.
fn stale_bytes(host: &Host, dir: &str, locks: &BTreeSet<(u64, u64, u64)>) -> u64 {
    use std::os::unix::fs::MetadataExt;
    host.list(dir)
        .iter()
        .filter(|n| n.contains("map_"))
        .filter_map(|n| std::fs::symlink_metadata(host.path(&format!("{dir}/{n}"))).ok())
        .filter(|m| m.is_file())
        .filter(|m| {
            let (maj, min) = dev_major_minor(m.dev());
            !locks.contains(&(maj, min, m.ino()))
        })
        .fold(0u64, |s, m| s.saturating_add(m.len()))
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
    let default_bytes = default_kb << 10;
    // get_hugepage_dir matches no mount for a --huge-dir that does not exist.
    if let Some(h) = plan.huge_dir.as_deref().filter(|h| !host.exists(h)) {
        out.push(bad(
            "hugepages",
            Status::Fail,
            format!("--huge-dir {h}: no such directory"),
            format!("mkdir -p {h} (inside a hugetlbfs mount)"),
        ));
        return;
    }
    // The directory the EAL uses for each page size (get_hugepage_dir): the first mount of
    // that size; with --huge-dir, that directory, in the longest mount that contains it.
    let mut dirs: std::collections::BTreeMap<u64, (String, usize)> = Default::default();
    for l in host.read("/proc/mounts").unwrap_or_default().lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 4 || f[2] != "hugetlbfs" {
            continue;
        }
        let Some(b) = page_bytes(f[3], default_kb) else {
            continue;
        };
        let mnt = f[1];
        match &plan.huge_dir {
            None => {
                dirs.entry(b).or_insert((mnt.to_string(), 0));
            }
            Some(h) => {
                let h = h.trim_end_matches('/');
                let m = mnt.trim_end_matches('/');
                let inside = h == m || h.strip_prefix(m).is_some_and(|r| r.starts_with('/'));
                let longer = dirs.get(&b).is_none_or(|(_, len)| m.len() > *len);
                if inside && longer {
                    dirs.insert(b, (h.to_string(), m.len()));
                }
            }
        }
    }
    // --in-memory maps hugepages anonymously where no hugetlbfs of a size is mounted.
    let mut sizes: BTreeSet<u64> = dirs.keys().copied().collect();
    if plan.in_memory {
        sizes.extend(
            host.list("/sys/kernel/mm/hugepages")
                .iter()
                .filter_map(|n| {
                    let kb = n.strip_prefix("hugepages-")?.strip_suffix("kB")?;
                    kb.parse::<u64>().ok()?.checked_mul(1 << 10)
                }),
        );
    }
    if sizes.is_empty() {
        let which = match &plan.huge_dir {
            Some(d) => format!("no hugetlbfs mounted at or above {d}"),
            None => "no hugetlbfs mounted".into(),
        };
        out.push(bad(
            "hugepages",
            Status::Fail,
            which,
            "mount -t hugetlbfs nodev /dev/hugepages (on most hosts systemd's \
             dev-hugepages.mount does at boot: systemctl start dev-hugepages.mount), or \
             run with --in-memory or --no-huge",
        ));
        return;
    }
    let sysval = |dir: &str, bytes: u64, file: &str| -> u64 {
        host.read(&format!("{dir}/hugepages-{}kB/{file}", bytes >> 10))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let locks = locked_files(host);
    let mut free_bytes = 0u64;
    let mut stale_total = 0u64;
    let mut parts = Vec::new();
    for &b in &sizes {
        let g = "/sys/kernel/mm/hugepages";
        // Pages reserved for mappings made but not yet touched are not free to a new
        // process, as get_num_hugepages counts them.
        let n = sysval(g, b, "free_hugepages").saturating_sub(sysval(g, b, "resv_hugepages"));
        let stale = dirs
            .get(&b)
            .map_or(0, |(d, _)| stale_bytes(host, d, &locks));
        free_bytes = free_bytes
            .saturating_add(n.saturating_mul(b))
            .saturating_add(stale);
        stale_total = stale_total.saturating_add(stale);
        let mut part = format!("{n} x {} free", human(b));
        if stale > 0 {
            let _ = write!(
                part,
                " and {} MiB in stale files the EAL will clear",
                stale >> 20
            );
        }
        parts.push(part);
    }
    let where_ = if dirs.is_empty() {
        "no hugetlbfs: --in-memory maps them anonymously".to_string()
    } else {
        format!(
            "hugetlbfs at {}",
            dirs.values()
                .map(|(d, _)| d.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let need = plan.memory_mb.and_then(mib);
    let smallest = sizes.iter().next().copied().unwrap_or(2 << 20);
    // The pages to reserve in all: those reserved now and the ones missing. The kernel's
    // hugepages=N reserves the default size; another size needs its hugepagesz= first.
    let reserve = |missing: u64| {
        let dir = format!("/sys/kernel/mm/hugepages/hugepages-{}kB", smallest >> 10);
        let now = host
            .read(&format!("{dir}/nr_hugepages"))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        let pages = now.saturating_add(missing.div_ceil(smallest));
        let boot = if smallest == default_bytes {
            format!("hugepages={pages}")
        } else {
            format!("hugepagesz={} hugepages={pages}", size_arg(smallest))
        };
        format!(
            "echo {pages} > {dir}/nr_hugepages, or {boot} on the kernel command line \
             (1 GiB pages are reliably had only there)"
        )
    };
    match need {
        // --socket-mem's nodes are checked one by one below.
        Some(n) if n > free_bytes && plan.socket_mem.is_empty() => out.push(bad(
            "hugepages",
            Status::Fail,
            format!(
                "-m {} MiB asked for, {} MiB free ({}; {where_})",
                n >> 20,
                free_bytes >> 20,
                parts.join(", ")
            ),
            reserve(n - free_bytes),
        )),
        None if free_bytes == 0 => out.push(bad(
            "hugepages",
            Status::Fail,
            format!("none free ({}; {where_})", parts.join(", ")),
            reserve(1 << 30),
        )),
        // Without -m the EAL takes memory as the run asks for it, and a pool or region
        // that finds too little fails the run after it started: 1 GiB is what the example
        // service's region alone needs.
        None if free_bytes < 1 << 30 => out.push(bad(
            "hugepages",
            Status::Warn,
            format!(
                "no -m, and {} MiB free ({}; {where_})",
                free_bytes >> 20,
                parts.join(", ")
            ),
            format!(
                "give -m with what the run needs (mbuf pools and every registered region),                  and reserve that: {}",
                reserve((1 << 30) - free_bytes)
            ),
        )),
        _ => out.push(ok("hugepages", format!("{}; {where_}", parts.join(", ")))),
    }
    // Memory asked per node, and memory near the devices and lcores. Which node a stale
    // file's pages are on is not known here: they may be on any, so a node short by no more
    // than them is not failed.
    let node_free = |node: u32| -> u64 {
        sizes
            .iter()
            .map(|&b| {
                sysval(
                    &format!("/sys/devices/system/node/node{node}/hugepages"),
                    b,
                    "free_hugepages",
                )
                .saturating_mul(b)
            })
            .fold(0u64, u64::saturating_add)
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
        let want = mib(mb).unwrap_or(u64::MAX);
        if mb > 0 && want > node_free(node).saturating_add(stale_total) {
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
    if node_count > 1 && stale_total == 0 {
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

/// The PCI vendor id of Mellanox/NVIDIA NICs, which DPDK drives through the kernel's
/// mlx5_core (bifurcated) and never through vfio-pci or uio.
const MELLANOX: &str = "0x15b3";

/// Drivers a device in a vfio group may have for the group to be viable (the kernel's
/// vfio_dev_driver_allowed): vfio-pci, pci-stub or none.
const VIABLE: &[&str] = &[VFIO, "pci-stub"];

/// A device on vfio-pci: its IOMMU group real, or vfio's no-IOMMU one, and viable (vfio
/// opens a group only when every device in it is on vfio-pci, pci-stub or no driver; DPDK
/// otherwise stops with "VFIO group is not viable").
fn vfio_finding(host: &Host, dev: &str, addr: &str) -> Finding {
    let check = "device";
    let Some(group) = host.link_name(&format!("{dev}/iommu_group")) else {
        return bad(
            check,
            Status::Fail,
            format!("{addr}: vfio-pci, but in no IOMMU group"),
            "intel_iommu=on iommu=pt (or amd_iommu=on) on the kernel command line and the \
             IOMMU on in the firmware; without one, vfio's enable_unsafe_noiommu_mode=1",
        );
    };
    // The group by its number under /sys/kernel/iommu_groups, where the kernel lists it.
    let gdir = format!("/sys/kernel/iommu_groups/{group}");
    let blocking: Vec<String> = host
        .list(&format!("{gdir}/devices"))
        .into_iter()
        .filter(|d| d != addr)
        .filter_map(|d| {
            let other = format!("/sys/bus/pci/devices/{d}");
            // A PCI bridge in the group does not stop it (the kernel lets bridges be).
            if host
                .read(&format!("{other}/class"))
                .is_some_and(|c| c.starts_with("0x0604"))
            {
                return None;
            }
            let drv = host.link_name(&format!("{other}/driver"))?;
            (!VIABLE.contains(&drv.as_str())).then(|| format!("{d} ({drv})"))
        })
        .collect();
    if !blocking.is_empty() {
        return bad(
            check,
            Status::Fail,
            format!(
                "{addr}: IOMMU group {group} is not viable: {} in it on another driver",
                blocking.join(", ")
            ),
            format!(
                "vfio opens a group whole: bind every device of group {group} to vfio-pci \
                 (dpdk-devbind.py -b vfio-pci ADDR) or unbind it, or move the NIC to a slot \
                 with a group of its own (ACS)"
            ),
        );
    }
    if host.read(&format!("{gdir}/name")).as_deref() == Some("vfio-noiommu") {
        return bad(
            check,
            Status::Warn,
            format!("{addr}: vfio-pci in no-IOMMU mode (group {group} is vfio-noiommu)"),
            "no DMA protection: the NIC can DMA anywhere in memory; turn the IOMMU on \
             (intel_iommu=on iommu=pt, or amd_iommu=on) unless the host has none",
        );
    }
    ok(check, format!("{addr}: vfio-pci, IOMMU group {group}"))
}

/// The interface of the default route in /proc/net/route (destination and mask 0).
fn default_route_interface(host: &Host) -> Option<String> {
    host.read("/proc/net/route")?.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 7 && f[1] == "00000000" && f[7] == "00000000").then(|| f[0].to_string())
    })
}

/// Interfaces with any IPv4 route (an address gives one) in /proc/net/route.
fn route_interfaces(host: &Host) -> BTreeSet<String> {
    host.read("/proc/net/route")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect()
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
        // -b: the EAL probes every bound device but the blocked ones.
        let taken: Vec<String> = all
            .iter()
            .filter(|d| !plan.blocked.contains(d))
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
    // vfio-pci takes a device only in an IOMMU group, which the kernel makes with the IOMMU
    // on, or in vfio's no-IOMMU mode: with neither, binding first gets nowhere.
    let iommu_first = if iommu_groups || noiommu {
        ""
    } else {
        "no IOMMU is on (/sys/kernel/iommu_groups is empty): turn it on first \
         (intel_iommu=on iommu=pt, or amd_iommu=on, on the kernel command line, VT-d/AMD-Vi \
         in the firmware, and reboot), or where the host has none enable vfio's \
         enable_unsafe_noiommu_mode=1 (no DMA protection); then "
    };
    let default_route = default_route_interface(host);
    let routed = route_interfaces(host);
    let lcore_nodes: BTreeSet<u32> = plan
        .cpus()
        .unwrap_or_default()
        .iter()
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
        let mellanox = host.read(&format!("{dev}/vendor")).as_deref() == Some(MELLANOX);
        let bind = format!("{iommu_first}modprobe vfio-pci; dpdk-devbind.py -b vfio-pci {addr}");
        match host.link_name(&format!("{dev}/driver")) {
            // DPDK's mlx PMDs drive the NIC through the kernel's mlx5_core (bifurcated): on
            // vfio-pci or uio the EAL finds no PMD for it.
            Some(d) if mellanox && (d == VFIO || UIO.contains(&d.as_str())) => out.push(bad(
                check,
                Status::Fail,
                format!(
                    "{addr}: a Mellanox/NVIDIA NIC on {d}, where DPDK's mlx5 PMD cannot take it"
                ),
                format!(
                    "bind it back to mlx5_core: driverctl unset-override {addr} (or \
                     dpdk-devbind.py -b mlx5_core {addr})"
                ),
            )),
            None => out.push(bad(
                check,
                Status::Fail,
                format!("{addr}: bound to no driver"),
                if mellanox {
                    format!("modprobe mlx5_core; dpdk-devbind.py -b mlx5_core {addr}")
                } else {
                    bind
                },
            )),
            Some(d) if d == VFIO => out.push(vfio_finding(host, &dev, addr)),
            Some(d) if UIO.contains(&d.as_str()) => out.push(bad(
                check,
                Status::Warn,
                format!("{addr}: {d}"),
                format!(
                    "{d} gives the NIC DMA to all memory and no interrupts: vfio-pci \
                     is safer ({bind})"
                ),
            )),
            Some(d) if BIFURCATED.contains(&d.as_str()) => {
                // The mlx PMDs open the device through its RDMA side (ibverbs): without
                // the kernel's IB driver loaded the PMD's probe fails.
                if host.exists(&format!("{dev}/infiniband")) {
                    out.push(ok(
                        check,
                        format!("{addr}: {d} (DPDK's mlx PMD runs beside the kernel driver)"),
                    ))
                } else {
                    let ib = d.replace("_core", "_ib");
                    out.push(bad(
                        check,
                        Status::Warn,
                        format!("{addr}: {d} without its RDMA device ({dev}/infiniband)"),
                        format!(
                            "modprobe {ib} ib_uverbs (and rdma-core's libibverbs installed): \
                             DPDK's mlx PMD reaches the NIC through them"
                        ),
                    ))
                }
            }
            Some(d) => {
                let iface = interface(host, &dev);
                let mut what = match &iface {
                    Some((name, true)) => {
                        format!("{addr}: bound to the kernel's {d}, interface {name} up")
                    }
                    Some((name, false)) => {
                        format!("{addr}: bound to the kernel's {d}, interface {name}")
                    }
                    None => format!("{addr}: bound to the kernel's {d}"),
                };
                // Taking down an interface that carries this host's routes can cut off
                // the very session that runs the command: no such command is offered then.
                let fix = match &iface {
                    Some((name, _)) if default_route.as_deref() == Some(name) => {
                        let _ = write!(
                            what,
                            "; {name} carries the default route: is it your management \
                             interface?"
                        );
                        format!(
                            "give DPDK another NIC, or move this host's default route and \
                             management off {name} before binding it ({bind})"
                        )
                    }
                    Some((name, _)) if routed.contains(name) => {
                        let _ = write!(what, "; {name} carries routes (an address)");
                        format!(
                            "move what uses {name} elsewhere and remove its addresses first \
                             (ip addr show dev {name}), then {bind}"
                        )
                    }
                    Some((name, _)) => format!("ip link set {name} down; {bind}"),
                    None => bind,
                };
                out.push(bad(check, Status::Fail, what, fix));
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
                .file(&format!("{dev}/vendor"), "0x8086")
                .file(&format!("{dev}/numa_node"), &node.to_string());
            // With the IOMMU on (group 0 made by `host`), the device is in that group.
            if self.0.join("sys/kernel/iommu_groups/0").is_dir() {
                self.link(
                    &format!("{dev}/iommu_group"),
                    "../../../../kernel/iommu_groups/0",
                )
                .link(
                    "/sys/kernel/iommu_groups/0/devices/0000:03:00.0",
                    "../../../../bus/pci/devices/0000:03:00.0",
                );
            }
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
        assert_eq!(
            p.cpus(),
            Some(vec![4, 2, 3, 7]),
            "the main lcore's CPU first"
        );
        assert_eq!(p.main(), Some(4));
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
            p.lcores,
            [(0, vec![2, 3]), (1, vec![2, 3]), (4, vec![5]), (6, vec![6])],
            "an lcore map runs on the CPUs after @"
        );
        assert_eq!((p.memory_mb, p.socket_mem), (Some(768), vec![512, 256]));
        assert_eq!(
            plan(&args(&["-c", "0x13"])).expect("plan").cpus(),
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
        // CPU 0 is the main lcore's, shared with the system by design; 1 is isolated.
        let f = t.check(&["-l", "0-1", "-m", "1024", "-a", "0000:03:00.0"]);
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
    fn a_nic_to_bind_without_an_iommu_is_told_to_turn_the_iommu_on_first() {
        // With the IOMMU off the kernel makes no groups, and vfio-pci cannot take the NIC:
        // a NIC still on its kernel driver is the state such a host is in.
        let t = Tree::host("iommu", 1024);
        t.nic(0, Some("ixgbe"));
        std::fs::remove_dir_all(t.0.join("sys/kernel/iommu_groups")).expect("rm");
        let f = t.check(&["-l", "1", "-a", "03:00.0"]);
        let d = find(&f, "device", Status::Fail).expect("the device fails");
        let fix = d.fix.as_deref().unwrap_or_default();
        assert!(
            fix.contains("turn it on first")
                && fix.contains("intel_iommu=on iommu=pt")
                && fix.contains("enable_unsafe_noiommu_mode=1")
                && fix.find("turn it on first") < fix.find("dpdk-devbind.py"),
            "{fix}"
        );
        t.file(
            "/sys/module/vfio/parameters/enable_unsafe_noiommu_mode",
            "Y",
        );
        let f = t.check(&["-l", "1", "-a", "03:00.0"]);
        let fix = find(&f, "device", Status::Fail)
            .and_then(|d| d.fix.clone())
            .unwrap_or_default();
        assert!(
            !fix.contains("turn it on first"),
            "no-IOMMU mode binds: {fix}"
        );
        let t = Tree::host("uio", 1024);
        t.nic(0, Some("uio_pci_generic"));
        let f = t.check(&["-l", "1", "-a", "03:00.0"]);
        assert_eq!(worst(&f), Status::Warn, "{}", render(&f));
    }

    #[test]
    fn vfio_in_no_iommu_mode_warns_that_the_nic_has_no_dma_protection() {
        // vfio's no-IOMMU mode makes a real group, named vfio-noiommu: groups exist.
        let t = Tree::host("noiommu", 1024);
        t.nic(0, Some(VFIO))
            .file("/sys/kernel/iommu_groups/0/name", "vfio-noiommu")
            .file(
                "/sys/module/vfio/parameters/enable_unsafe_noiommu_mode",
                "Y",
            );
        let f = t.check(&["-l", "1", "-a", "03:00.0"]);
        let d = find(&f, "device", Status::Warn).expect("a warning");
        assert!(
            d.what.contains("no-IOMMU mode")
                && d.fix
                    .as_deref()
                    .unwrap_or_default()
                    .contains("no DMA protection"),
            "{}",
            render(&f)
        );
    }

    #[test]
    fn a_vfio_group_with_a_device_on_another_driver_is_not_viable_and_fails() {
        let t = Tree::host("viable", 1024);
        t.nic(0, Some(VFIO))
            .file("/sys/bus/pci/devices/0000:03:00.1/class", "0x020000")
            .link(
                "/sys/bus/pci/devices/0000:03:00.1/driver",
                "../../../bus/pci/drivers/ixgbe",
            )
            .link(
                "/sys/kernel/iommu_groups/0/devices/0000:03:00.1",
                "../../../../bus/pci/devices/0000:03:00.1",
            );
        let f = t.check(&["-l", "1", "-a", "03:00.0"]);
        let d = find(&f, "device", Status::Fail).expect("not viable");
        assert!(
            d.what.contains("not viable") && d.what.contains("0000:03:00.1 (ixgbe)"),
            "{}",
            d.what
        );
        // On pci-stub, or on no driver, the group is whole again.
        std::fs::remove_file(t.0.join("sys/bus/pci/devices/0000:03:00.1/driver")).expect("rm");
        t.link(
            "/sys/bus/pci/devices/0000:03:00.1/driver",
            "../../../bus/pci/drivers/pci-stub",
        );
        let f = t.check(&["-l", "1", "-a", "03:00.0"]);
        assert_eq!(worst(&f), Status::Ok, "{}", render(&f));
    }

    #[test]
    fn a_mellanox_nic_on_vfio_fails_and_on_mlx5_core_without_its_rdma_side_warns() {
        let t = Tree::host("mlx", 1024);
        t.nic(0, Some(VFIO))
            .file("/sys/bus/pci/devices/0000:03:00.0/vendor", "0x15b3");
        let f = t.check(&["-l", "1", "-a", "03:00.0"]);
        let d = find(&f, "device", Status::Fail).expect("mlx on vfio fails");
        assert!(
            d.fix
                .as_deref()
                .unwrap_or_default()
                .contains("driverctl unset-override 0000:03:00.0"),
            "{}",
            render(&f)
        );
        let t = Tree::host("mlx5", 1024);
        t.nic(0, Some("mlx5_core"))
            .file("/sys/bus/pci/devices/0000:03:00.0/vendor", "0x15b3");
        let f = t.check(&["-l", "1", "-a", "03:00.0"]);
        let d = find(&f, "device", Status::Warn).expect("no RDMA device warns");
        assert!(
            d.fix
                .as_deref()
                .unwrap_or_default()
                .contains("modprobe mlx5_ib ib_uverbs"),
            "{}",
            render(&f)
        );
        t.dir("/sys/bus/pci/devices/0000:03:00.0/infiniband/mlx5_0");
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

    fn args(v: &[&str]) -> Vec<String> {
        std::iter::once("ddpdk")
            .chain(v.iter().copied())
            .map(String::from)
            .collect()
    }

    /// `/proc/locks`'s line for a lock held on the file at `p` in the tree.
    fn lock_line(t: &Tree, p: &str) -> String {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(t.0.join(p.trim_start_matches('/'))).expect("file");
        let (maj, min) = dev_major_minor(m.dev());
        format!(
            "1: FLOCK  ADVISORY  READ  4242 {maj:02x}:{min:02x}:{} 0 EOF\n",
            m.ino()
        )
    }

    #[test]
    fn hugepage_files_no_process_holds_count_as_free_since_the_eal_clears_them() {
        // A crashed run left 4 pages in files: none free, but the next EAL start deletes
        // the files no process holds, and their pages are free again.
        let t = Tree::host("stale", 4);
        t.file(
            "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
            "0",
        );
        for i in 0..4 {
            let f = t.0.join(format!("dev/hugepages/rtemap_{i}"));
            std::fs::create_dir_all(f.parent().expect("parent")).expect("dir");
            std::fs::File::create(&f)
                .and_then(|f| f.set_len(2 << 20))
                .expect("file");
        }
        t.file("/dev/hugepages/other", "not a page file");
        let f = t.check(&["-l", "1", "-m", "8", "--no-pci", "--vdev", "net_ring0"]);
        let h = find(&f, "hugepages", Status::Ok).unwrap_or_else(|| panic!("{}", render(&f)));
        assert!(
            h.what.contains("8 MiB in stale files the EAL will clear"),
            "{}",
            h.what
        );
        // A running process holds rtemap_0: its 2 MiB are not the next run's.
        let held = lock_line(&t, "/dev/hugepages/rtemap_0");
        t.file("/proc/locks", &held);
        let f = t.check(&["-l", "1", "-m", "8", "--no-pci", "--vdev", "net_ring0"]);
        let h = find(&f, "hugepages", Status::Fail).expect("6 MiB are not 8");
        assert!(h.what.contains("6 MiB in stale files"), "{}", h.what);
    }

    #[test]
    fn without_m_less_than_a_gib_of_free_hugepages_warns() {
        let t = Tree::host("small", 100);
        let f = t.check(&["-l", "1", "--no-pci", "--vdev", "net_ring0"]);
        assert!(
            find(&f, "hugepages", Status::Warn).is_some_and(|h| h.what.contains("200 MiB free")),
            "{}",
            render(&f)
        );
    }

    #[test]
    fn reserved_hugepages_are_not_free_to_a_new_run() {
        let t = Tree::host("resv", 512);
        t.file(
            "/sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages",
            "100",
        );
        let f = t.check(&["-l", "1", "-m", "1024", "--no-pci", "--vdev", "net_ring0"]);
        let h = find(&f, "hugepages", Status::Fail).expect("412 pages are not 1024 MiB");
        assert!(h.what.contains("412 x 2 MiB free"), "{}", h.what);
    }

    #[test]
    fn the_main_lcore_is_main_lcore_in_any_base_or_else_the_lowest_lcore_id() {
        let p = plan(&args(&["-l", "5,3,4"])).expect("plan");
        assert_eq!(p.main(), Some(3), "the lowest, not the first written");
        assert_eq!(p.cpus(), Some(vec![3, 4, 5]));
        let p = plan(&args(&["-l", "2-4", "--main-lcore", "0x4"])).expect("plan");
        assert_eq!(p.main(), Some(4), "strtol base 0: 0x4 is 4");
        let p = plan(&args(&["-l", "2-9", "--main-lcore", "010"])).expect("plan");
        assert_eq!(p.main(), Some(8), "strtol base 0: 010 is octal 8");
        // --lcores: the main lcore is an lcore id, whatever CPU it runs on.
        let p = plan(&args(&["--lcores", "1@7,0@6"])).expect("plan");
        assert_eq!((p.main(), p.cpus()), (Some(0), Some(vec![6, 7])));
        let t = Tree::host("main", 512);
        let f = t.check(&["--lcores", "0@1,1@2", "--no-pci", "--vdev", "net_ring0"]);
        assert!(
            find(&f, "lcores", Status::Ok).is_some_and(|l| l.what.contains("main lcore 0 on 1")),
            "{}",
            render(&f)
        );
        let f = t.check(&[
            "-l",
            "1-2",
            "--main-lcore",
            "3",
            "--no-pci",
            "--vdev",
            "net_ring0",
        ]);
        assert!(
            find(&f, "lcores", Status::Fail)
                .is_some_and(|l| l.what.contains("Main lcore is not enabled")),
            "{}",
            render(&f)
        );
        let env = include_str!("../../deploy/systemd/example.env");
        assert!(
            !env.contains("main lcore (control thread) then"),
            "the main lcore is the lowest, not the first"
        );
    }

    #[test]
    fn lcore_ids_from_rte_max_lcore_fail_with_the_lcores_map_that_reaches_those_cpus() {
        let t = Tree::host("maxlcore", 512);
        for c in [128, 129] {
            t.file(&format!("/sys/devices/system/cpu/cpu{c}/online"), "1");
        }
        for eal in [
            &["-l", "128,129"][..],
            &["-c", "0x300000000000000000000000000000000"],
        ] {
            let mut a = eal.to_vec();
            a.extend(["--no-pci", "--vdev", "net_ring0"]);
            let f = t.check(&a);
            let l = find(&f, "lcores", Status::Fail).unwrap_or_else(|| panic!("{}", render(&f)));
            assert!(
                l.what.contains("RTE_MAX_LCORE")
                    && l.fix
                        .as_deref()
                        .unwrap_or_default()
                        .contains("--lcores 0@128,1@129"),
                "{}",
                render(&f)
            );
        }
        let f = t.check(&["--lcores", "200@1", "--no-pci", "--vdev", "net_ring0"]);
        assert!(find(&f, "lcores", Status::Fail).is_some_and(|l| l.what.contains("200")));
        let f = t.check(&["--lcores", "0@128,1@129", "--no-pci", "--vdev", "net_ring0"]);
        assert!(find(&f, "lcores", Status::Fail).is_none(), "{}", render(&f));
    }

    #[test]
    fn lcore_groups_reversed_ranges_and_repeats_are_read_as_dpdk_reads_them() {
        let p = plan(&args(&["--lcores", "(1-3)@2"])).expect("plan");
        assert_eq!(p.lcores, [(1, vec![2]), (2, vec![2]), (3, vec![2])]);
        let p = plan(&args(&["--lcores", "(1-2)"])).expect("plan");
        assert_eq!(
            p.lcores,
            [(1, vec![1, 2]), (2, vec![1, 2])],
            "a group floats"
        );
        let p = plan(&args(&["--lcores", "3-2"])).expect("plan");
        assert_eq!(
            p.lcores,
            [(2, vec![2]), (3, vec![3])],
            "min..max, each on its own"
        );
        let p = plan(&args(&["-l", "1-2,2"])).expect("plan");
        assert_eq!(
            p.lcores,
            [(1, vec![1]), (2, vec![2])],
            "a repeat counts once"
        );
        let t = Tree::host("forms", 512);
        let f = t.check(&["--lcores", "(1-3)@2", "--no-pci", "--vdev", "net_ring0"]);
        assert!(find(&f, "lcores", Status::Warn).is_some_and(|l| l.what.contains("share")));
        let f = t.check(&["-l", "1-2,2", "--no-pci", "--vdev", "net_ring0"]);
        assert!(find(&f, "lcores", Status::Ok).is_some(), "{}", render(&f));
    }

    #[test]
    fn a_huge_dir_inside_a_mount_and_in_memory_without_one_are_what_the_eal_takes() {
        let t = Tree::host("hugedir", 512);
        let f = t.check(&[
            "-l",
            "1",
            "--huge-dir",
            "/dev/hugepages/ddpdk0",
            "--no-pci",
            "--vdev",
            "net_ring0",
        ]);
        assert!(
            find(&f, "hugepages", Status::Fail).is_some_and(|h| h.what.contains("no such")),
            "{}",
            render(&f)
        );
        t.dir("/dev/hugepages/ddpdk0");
        let f = t.check(&[
            "-l",
            "1",
            "--huge-dir",
            "/dev/hugepages/ddpdk0",
            "--no-pci",
            "--vdev",
            "net_ring0",
        ]);
        assert!(
            find(&f, "hugepages", Status::Ok)
                .is_some_and(|h| h.what.contains("/dev/hugepages/ddpdk0")),
            "{}",
            render(&f)
        );
        t.file("/proc/mounts", "proc /proc proc rw 0 0\n");
        let f = t.check(&["-l", "1", "--in-memory", "--no-pci", "--vdev", "net_ring0"]);
        assert!(
            find(&f, "hugepages", Status::Ok).is_some_and(|h| h.what.contains("512 x 2 MiB")),
            "{}",
            render(&f)
        );
    }

    #[test]
    fn options_the_eal_refuses_are_errors_before_any_check() {
        for bad in [
            &["-a", "03:00"][..],
            &["-a", "0000:03:00.0.1"],
            &["-a", "Bogus"],
            &["-a", "100000000:03:00.0"],
            &["-m", "512", "--socket-mem", "512,0"],
            &["-l", "1", "-c", "0x2"],
            &["-l", "1", "--lcores", "1"],
            &["-a", "03:00.0", "-b", "04:00.0"],
            &["--json"],
            &["--root", "/tmp"],
            &["--main-lcore", "0x"],
            &["--main-lcore", "128"],
        ] {
            assert!(plan(&args(bad)).is_err(), "{bad:?} refused");
        }
        let p = plan(&args(&[
            "-a",
            "3:0.0",
            "-a",
            "0001:81:00.1,txq_inline=1",
            "-a",
            "net_null0",
        ]))
        .expect("plan");
        assert_eq!(
            p.pci,
            ["0000:03:00.0", "0001:81:00.1"],
            "as DPDK names them"
        );
        assert_eq!(p.vdevs, ["net_null0"]);
        assert!(
            plan(&args(&["-a", "auxiliary:mlx5_core.sf.2"])).is_ok(),
            "another bus's"
        );
        // The service's own example passes.
        let env = include_str!("../../deploy/systemd/example.env");
        let eal = env
            .lines()
            .find_map(|l| l.strip_prefix("DDPDK_EAL="))
            .expect("DDPDK_EAL");
        let p = plan(&args(&eal.split_whitespace().collect::<Vec<_>>())).expect("example.env");
        assert_eq!(p.pci, ["0000:03:00.0"]);
    }

    #[test]
    fn values_past_64_bits_are_errors_and_a_zero_page_size_is_ignored() {
        for bad in [
            &["-m", "18446744073709551615"][..],
            &["--socket-mem", "18446744073709551615,1"],
            &["--socket-mem", "17592186044416"],
        ] {
            assert!(plan(&args(bad)).is_err(), "{bad:?} refused");
        }
        let t = Tree::host("zero", 512);
        t.file(
            "/proc/mounts",
            "nodev /mnt/zero hugetlbfs rw,pagesize=0 0 0\nnodev /dev/hugepages hugetlbfs rw,pagesize=2M 0 0\n",
        );
        let f = t.check(&["-l", "1", "--no-pci", "--vdev", "net_ring0"]);
        assert!(
            find(&f, "hugepages", Status::Ok).is_some(),
            "{}",
            render(&f)
        );
        // Too few: the pages to reserve are counted in the mounted size, never in 0.
        let f = t.check(&["-l", "1", "-m", "4096", "--no-pci", "--vdev", "net_ring0"]);
        assert!(
            find(&f, "hugepages", Status::Fail).is_some_and(|h| h
                .fix
                .as_deref()
                .unwrap_or_default()
                .starts_with("echo 2048 > /sys/kernel/mm/hugepages/hugepages-2048kB/")),
            "{}",
            render(&f)
        );
    }

    #[test]
    fn blocked_devices_are_not_taken_when_no_allow_list_is_given() {
        let t = Tree::host("block", 512);
        t.nic(0, Some(VFIO));
        let f = t.check(&["-l", "1", "-b", "03:00.0"]);
        assert!(
            find(&f, "devices", Status::Fail).is_some_and(|d| d.what.contains("no network device")),
            "{}",
            render(&f)
        );
    }

    #[test]
    fn a_nic_carrying_the_default_route_is_never_told_to_go_down() {
        let t = Tree::host("route", 512);
        t.nic(0, Some("ixgbe")).file(
            "/proc/net/route",
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
             eth2\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n",
        );
        let f = t.check(&["-l", "1", "-a", "03:00.0"]);
        let d = find(&f, "device", Status::Fail).expect("fails");
        assert!(
            d.what
                .contains("eth2 carries the default route: is it your management interface?")
                && !d.fix.as_deref().unwrap_or_default().contains("down"),
            "{}",
            render(&f)
        );
    }

    #[test]
    fn isolation_is_asked_for_the_data_lcores_and_a_kernel_without_nohz_full_is_named() {
        let t = Tree::host("iso", 512);
        t.file("/sys/devices/system/cpu/isolated", "1-2")
            .file("/sys/devices/system/cpu/nohz_full", "1-2");
        // CPU 0 is the main lcore's: housekeeping, never in the fix.
        let f = t.check(&["-l", "0,3", "--no-pci", "--vdev", "net_ring0"]);
        let i = find(&f, "isolation", Status::Warn).expect("CPU 3 is not isolated");
        let fix = i.fix.as_deref().unwrap_or_default();
        assert!(
            i.what.contains("CPU 3 not isolated")
                && !i.what.contains("CPU 0")
                && fix.starts_with("isolcpus=3 nohz_full=3 rcu_nocbs=3 "),
            "{}",
            render(&f)
        );
        std::fs::remove_file(t.0.join("sys/devices/system/cpu/nohz_full")).expect("rm");
        let f = t.check(&["-l", "0,3", "--no-pci", "--vdev", "net_ring0"]);
        let fix = find(&f, "isolation", Status::Warn)
            .and_then(|i| i.fix.clone())
            .unwrap_or_default();
        assert!(fix.contains("lacks NO_HZ_FULL"), "{fix}");
    }

    #[test]
    fn reserving_a_page_size_other_than_the_default_names_its_hugepagesz_and_no_dev_script() {
        let t = Tree::host("gig", 0);
        t.file(
            "/proc/mounts",
            "nodev /dev/hugepages hugetlbfs rw,pagesize=1G 0 0\n",
        )
        .file(
            "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages",
            "0",
        )
        .file(
            "/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages",
            "0",
        );
        let f = t.check(&["-l", "1", "-m", "4096", "--no-pci", "--vdev", "net_ring0"]);
        let fix = find(&f, "hugepages", Status::Fail)
            .and_then(|h| h.fix.clone())
            .unwrap_or_default();
        assert!(
            fix.contains("hugepagesz=1G hugepages=4")
                && fix.contains("/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"),
            "{fix}"
        );
        t.file("/proc/mounts", "proc /proc proc rw 0 0\n");
        let f = t.check(&["-l", "1", "--no-pci", "--vdev", "net_ring0"]);
        assert!(
            f.iter()
                .all(|x| !x.fix.as_deref().unwrap_or_default().contains("setup.sh")),
            "{}",
            render(&f)
        );
    }
}
