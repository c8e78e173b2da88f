//! Each check on host trees built in a temporary directory.

use super::*;

/// A host tree under a fresh directory: files written, symlinks made.
struct Tree(PathBuf);

impl Tree {
    fn new(name: &str) -> Tree {
        let d = std::env::temp_dir().join(format!("ddpdk-preflight-{}-{name}", std::process::id()));
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
        .file(
            "/proc/meminfo",
            "MemTotal: 1000 kB\nHugepagesize:       2048 kB\n",
        )
        .file(
            "/proc/mounts",
            "nodev /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n",
        )
        .file("/proc/self/status", "Name:\tddpdk\nUid:\t0\t0\t0\t0\n")
        .file(
            "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
            &free.to_string(),
        )
        .file(
            "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
            &free.to_string(),
        )
        .file("/sys/devices/system/node/node0/cpulist", "0-1")
        .file("/sys/devices/system/node/node1/cpulist", "2-3")
        .file(
            "/sys/devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages",
            &free.to_string(),
        )
        .file(
            "/sys/devices/system/node/node1/hugepages/hugepages-2048kB/free_hugepages",
            "0",
        )
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
    assert!(find(&f, "device", Status::Fail).is_some_and(|d| d.what.contains("no such PCI device")));
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
    assert!(find(&f, "hugepages", Status::Fail).is_some_and(|h| h.what.starts_with("none free")));
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
    assert!(find(&f, "governor", Status::Warn).is_some_and(|g| g.what.contains("2 (powersave)")));
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
    let env = include_str!("../../../deploy/systemd/example.env");
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
        find(&f, "hugepages", Status::Ok).is_some_and(|h| h.what.contains("/dev/hugepages/ddpdk0")),
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
    let env = include_str!("../../../deploy/systemd/example.env");
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

/// With no EAL started, preflight says what the EAL would: an option DPDK 22.11's getopt
/// tables lack (a typo such as `--socketmem`) is refused, and so is a stray word (which the EAL
/// skips without a word); every form the EAL takes still passes, values of any option
/// included.
#[test]
fn unknown_eal_options_and_stray_words_are_usage_errors() {
    for (bad, why) in [
        (
            &["-l", "0", "--socketmem", "512"][..],
            "--socketmem is not an option",
        ),
        (&["-l", "0", "-x"], "-x is not an option"),
        (&["-l", "0", "--no-huge", "512"], "512: no EAL option"),
    ] {
        let e = plan(&args(bad)).expect_err("refused");
        assert!(e.contains(why), "{bad:?}: {e}");
    }
    let good = [
        "-l",
        "0-1",
        "-n",
        "4",
        "--file-prefix",
        "p",
        "--file-p",
        "q",
        "--log-level",
        "*:error",
        "--log-level=pmd.*:debug",
        "-a",
        "0000:03:00.0,rxq_cqe_comp_en=0",
        "--vdev",
        "net_ring0",
        "--vdev=net_null0",
        "--huge-unlink",
        "--iova-mode",
        "va",
        "-vd",
        "librte_net_ice.so",
    ];
    let p = plan(&args(&good)).expect("every form the EAL takes");
    assert_eq!(p.pci, ["0000:03:00.0"]);
}
