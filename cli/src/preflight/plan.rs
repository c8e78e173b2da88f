//! The EAL options of a run read as DPDK 22.11's EAL reads them: lcores, memory, devices.

use super::*;

/// DPDK's RTE_MAX_LCORE in Debian's 22.11 build (rte_build_config.h): the EAL refuses an
/// lcore id at or above it.
pub const RTE_MAX_LCORE: u32 = 128;

/// glibc's CPU_SETSIZE: the EAL refuses a CPU id at or above it in `--lcores`.
pub(super) const CPU_SETSIZE: u32 = 1024;

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

/// How many words option `a` takes (itself, and the next when it is its value), as the EAL's
/// getopt reads them with DPDK 22.11's tables (`run.rs`); an error for a word the EAL does
/// not know, which it would refuse (an option) or skip without a word (anything else): with
/// no EAL started here, nothing else would say so.
fn eal_words(a: &str) -> Result<usize, String> {
    use crate::run::{eal_long_takes_value, EAL_BARE_SHORT, EAL_VALUED_SHORT};
    if let Some(long) = a.strip_prefix("--") {
        let (name, inline) = match long.split_once('=') {
            Some((n, _)) => (n, true),
            None => (long, false),
        };
        return match eal_long_takes_value(name) {
            Some(takes) => Ok(if takes && !inline { 2 } else { 1 }),
            None => Err(format!("--{name} is not an option of DPDK 22.11's EAL")),
        };
    }
    if let Some(shorts) = a.strip_prefix('-').filter(|s| !s.is_empty()) {
        for (i, c) in shorts.char_indices() {
            if EAL_VALUED_SHORT.contains(c) {
                return Ok(if i + c.len_utf8() == shorts.len() {
                    2
                } else {
                    1
                });
            }
            if !EAL_BARE_SHORT.contains(c) {
                return Err(format!("-{c} is not an option of DPDK 22.11's EAL"));
            }
        }
        return Ok(1);
    }
    Err(format!(
        "{a}: no EAL option and no option's value (the EAL would skip it without a word)"
    ))
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
pub(super) fn core_list(s: &str) -> Result<Vec<u32>, String> {
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
pub(super) fn lcore_set(s: &str, whole: &str) -> Result<Vec<u32>, String> {
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
pub(super) fn lcores_map(s: &str) -> Result<Vec<(u32, Vec<u32>)>, String> {
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
pub(super) fn coremask(s: &str) -> Result<Vec<u32>, String> {
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
pub(super) fn strtol0(s: &str) -> Option<u64> {
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
pub(super) fn pci_address(addr: &str) -> Option<String> {
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
pub(super) fn vdev_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.contains('_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

/// A device named with its bus (`auxiliary:mlx5_core.sf.2`), which the EAL hands to that bus.
pub(super) fn other_bus(name: &str) -> bool {
    name.split_once(':').is_some_and(|(bus, rest)| {
        !bus.is_empty() && bus.chars().all(|c| c.is_ascii_lowercase()) && !rest.is_empty()
    })
}

/// The value of option `name` at `args[i]`, in either form (`-l 0-1`, `-l0-1`, `--lcores=x`,
/// `--lcores x`), and the index after it.
pub(super) fn value_of<'a>(args: &'a [String], i: usize, name: &str) -> Option<(&'a str, usize)> {
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
pub(super) fn mib(mb: u64) -> Option<u64> {
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
            i + eal_words(a)?
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
