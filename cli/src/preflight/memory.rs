//! Hugepages (mounted, free, stale files, per NUMA node) and the locked-memory limit.

use super::*;

/// Bytes of a hugetlbfs mount's page size (`pagesize=2M` among its options, else the
/// default size); `None` for a size of 0 or past u64, which no page has.
pub(super) fn page_bytes(opts: &str, default_kb: u64) -> Option<u64> {
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
pub(super) fn size_arg(bytes: u64) -> String {
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
pub(super) fn dev_major_minor(dev: u64) -> (u64, u64) {
    (
        ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff),
        (dev & 0xff) | ((dev >> 12) & !0xff),
    )
}

/// The files a locks holds, as (major, minor, inode) from /proc/locks
/// (`1: FLOCK  ADVISORY  READ 1234 00:2e:5678 0 EOF`).
pub(super) fn locked_files(host: &Host) -> BTreeSet<(u64, u64, u64)> {
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
pub(super) fn stale_bytes(host: &Host, dir: &str, locks: &BTreeSet<(u64, u64, u64)>) -> u64 {
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

pub(super) fn check_hugepages(
    host: &Host,
    plan: &Plan,
    nodes_used: &BTreeSet<u32>,
    out: &mut Vec<Finding>,
) {
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

pub(super) fn human(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{} GiB", bytes >> 30)
    } else if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

pub(super) fn check_memlock(host: &Host, plan: &Plan, out: &mut Vec<Finding>) {
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
