//! The CPU, its TSC, and the CPUs the lcores run on.

use super::*;

pub(super) fn flags(host: &Host) -> Option<BTreeSet<String>> {
    let info = host.read("/proc/cpuinfo")?;
    let line = info.lines().find(|l| l.starts_with("flags"))?;
    let (_, list) = line.split_once(':')?;
    Some(list.split_whitespace().map(String::from).collect())
}

pub(super) fn check_cpu(host: &Host, out: &mut Vec<Finding>) {
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

pub(super) fn fmt_cpus(cpus: &[u32]) -> String {
    cpus.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// "CPU 3" or "CPUs 2,3".
pub(super) fn cpus_named(cpus: &[u32]) -> String {
    let s = if cpus.len() == 1 { "" } else { "s" };
    format!("CPU{s} {}", fmt_cpus(cpus))
}

/// `0@128,1@129`: lcore ids below RTE_MAX_LCORE, main lcore first, on the CPUs given.
pub(super) fn lcores_rewrite(plan: &Plan) -> String {
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

pub(super) fn check_lcores(host: &Host, plan: &Plan, out: &mut Vec<Finding>) {
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
pub(super) fn cpu_nodes(host: &Host) -> Vec<(u32, Vec<u32>)> {
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

pub(super) fn node_of(nodes: &[(u32, Vec<u32>)], cpu: u32) -> Option<u32> {
    nodes
        .iter()
        .find(|(_, cpus)| cpus.contains(&cpu))
        .map(|(n, _)| *n)
}
