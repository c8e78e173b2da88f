//! The deployment (docs/deploy.md): `ddpdk preflight` on this host and on a host tree (its
//! exit status is what the systemd unit's ExecStartPre goes by, and what it reports of this
//! host is what /sys says, read here independently), `deploy/install.sh` into a staging
//! tree, the units it installs checked by systemd, and the example service's own run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_ddpdk");

fn preflight(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("preflight")
        .args(args)
        .output()
        .expect("run ddpdk preflight")
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn finding<'a>(j: &'a serde_json::Value, check: &str) -> &'a serde_json::Value {
    j["findings"]
        .as_array()
        .and_then(|a| a.iter().find(|f| f["check"] == check))
        .unwrap_or_else(|| panic!("no {check} finding in {j}"))
}

#[test]
fn the_exit_status_is_1_exactly_when_a_check_failed() {
    // This host's CPUs 0 and its virtual devices: whatever this machine is, the status
    // follows the failures counted.
    for args in [
        &[
            "-l",
            "0",
            "--no-huge",
            "--no-pci",
            "--vdev",
            "net_ring0",
            "--",
            "--json",
        ][..],
        &["-l", "0", "--no-pci", "--", "--json"],
        &[
            "-l",
            "4095",
            "--no-huge",
            "--no-pci",
            "--vdev",
            "net_ring0",
            "--",
            "--json",
        ],
    ] {
        let o = preflight(args);
        let j = json(&o);
        let failures = j["failures"].as_u64().expect("failures");
        assert_eq!(
            o.status.code(),
            Some(i32::from(failures > 0)),
            "{args:?}: {j}"
        );
    }
    let o = preflight(&["-l", "4095", "--no-pci", "--vdev", "net_ring0"]);
    assert_eq!(o.status.code(), Some(1), "lcore 4095 is a failure");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("fail  lcores     lcore id 4095 at or above RTE_MAX_LCORE (128)"),
        "one line a finding, its status first: {text}"
    );
}

#[test]
fn the_hugepages_reported_are_those_sys_has_free() {
    let o = preflight(&["-l", "0", "--no-pci", "--vdev", "net_ring0", "--", "--json"]);
    let j = json(&o);
    let h = finding(&j, "hugepages");
    let mounted = std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("hugetlbfs"));
    let what = h["what"].as_str().unwrap_or_default();
    if !mounted {
        assert_eq!(h["status"], "fail", "{h}");
        assert!(what.contains("no hugetlbfs mounted"), "{h}");
        return;
    }
    // Every mounted size's free count, as /sys has it, is in the line.
    for d in std::fs::read_dir("/sys/kernel/mm/hugepages").expect("hugepage sizes") {
        let d = d.expect("entry").path();
        let kb: u64 = d
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| {
                n.strip_prefix("hugepages-")?
                    .strip_suffix("kB")?
                    .parse()
                    .ok()
            })
            .expect("size");
        let size = if kb >= 1 << 20 {
            format!("{} GiB", kb >> 20)
        } else {
            format!("{} MiB", kb >> 10)
        };
        if !what.contains(&format!("x {size} free")) {
            continue; // a size no hugetlbfs here mounts
        }
        // Free to a new process: free less reserved, as DPDK's get_num_hugepages counts.
        let read = |f: &str| -> u64 {
            std::fs::read_to_string(d.join(f))
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        let free = read("free_hugepages").saturating_sub(read("resv_hugepages"));
        assert!(
            what.contains(&format!("{free} x {size} free")),
            "{size}: {free} free in /sys: {h}"
        );
    }
}

/// A host tree with one NIC, at 0000:03:00.0, bound to `driver`.
fn tree(name: &str, driver: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ddpdk-preflight-it-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    let write = |p: &str, t: &str| {
        let f = d.join(p);
        std::fs::create_dir_all(f.parent().expect("parent")).expect("dir");
        std::fs::write(f, t).expect("write");
    };
    write(
        "proc/cpuinfo",
        "flags\t: sse4_2 pclmulqdq aes constant_tsc nonstop_tsc\n",
    );
    write(
        "proc/mounts",
        "nodev /dev/hugepages hugetlbfs rw,pagesize=2M 0 0\n",
    );
    write("proc/meminfo", "Hugepagesize: 2048 kB\n");
    write("proc/self/status", "Uid:\t0\t0\t0\t0\n");
    write(
        "sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
        "512",
    );
    write("sys/devices/system/cpu/cpu1/online", "1");
    write("sys/devices/system/cpu/isolated", "1");
    write("sys/devices/system/cpu/nohz_full", "1");
    write("sys/bus/pci/devices/0000:03:00.0/numa_node", "-1");
    write("sys/bus/pci/devices/0000:03:00.0/net/eth2/operstate", "up");
    // The IOMMU on: the NIC in group 7, alone there.
    std::fs::create_dir_all(d.join("sys/kernel/iommu_groups/7/devices")).expect("dir");
    std::os::unix::fs::symlink(
        "../../../../kernel/iommu_groups/7",
        d.join("sys/bus/pci/devices/0000:03:00.0/iommu_group"),
    )
    .expect("symlink");
    std::os::unix::fs::symlink(
        "../../../../bus/pci/devices/0000:03:00.0",
        d.join("sys/kernel/iommu_groups/7/devices/0000:03:00.0"),
    )
    .expect("symlink");
    std::os::unix::fs::symlink(
        format!("../../../bus/pci/drivers/{driver}"),
        d.join("sys/bus/pci/devices/0000:03:00.0/driver"),
    )
    .expect("symlink");
    d
}

fn run_on(root: &Path) -> Output {
    preflight(&[
        "-l",
        "1",
        "-m",
        "512",
        "-a",
        "03:00.0",
        "--",
        "--root",
        root.to_str().expect("utf-8"),
    ])
}

#[test]
fn a_nic_the_kernel_holds_stops_the_start_and_one_bound_to_vfio_lets_it_go() {
    let kernel = tree("kernel", "ice");
    let o = run_on(&kernel);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("0000:03:00.0: bound to the kernel's ice, interface eth2 up")
            && text.contains("fix: ip link set eth2 down; modprobe vfio-pci; dpdk-devbind.py -b vfio-pci 0000:03:00.0"),
        "{text}"
    );
    let vfio = tree("vfio", "vfio-pci");
    let o = run_on(&vfio);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.ends_with("0 failures, 0 warnings\n"), "{text}");
    for d in [kernel, vfio] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn options_preflight_does_not_take_are_usage_errors() {
    let o = preflight(&["-l", "0", "--", "--ip", "198.18.0.1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--ip: preflight takes the run's EAL options"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = preflight(&["-l", "x-y"]);
    assert_eq!(o.status.code(), Some(2), "a bad -l is named, not checked");
    // Options the EAL refuses, and preflight's own before '--', are usage errors too.
    for args in [
        &["-l", "0", "--json"][..],
        &["-l", "0", "-m", "64", "--socket-mem", "64"],
        &["-l", "0", "-c", "1"],
        &["-l", "0", "-a", "not-a-device"],
        &["-l", "0", "-a", "03:00.0", "-b", "04:00.0"],
        &["-l", "0", "-m", "99999999999999999"],
    ] {
        let o = preflight(args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = preflight(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(help.contains("Usage: ddpdk preflight") && help.contains("2 for options"));
    let o = Command::new(BIN)
        .args(["help", "preflight"])
        .output()
        .expect("run");
    assert!(String::from_utf8_lossy(&o.stdout).contains("Usage: ddpdk preflight"));
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `NAME=value` lines of an env file, as systemd reads them.
fn env_value(env: &str, name: &str) -> String {
    env.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("{name} in the example env"))
        .to_string()
}

/// A relative DESTDIR is the caller's, as a relative BIN is: it staged into the source tree
/// (found by an outside-in review); a BIN that is a directory is refused as such before
/// anything is made (it passed the executable check, `install` failed half-way and left an
/// empty tree).
#[test]
fn install_takes_its_paths_from_the_callers_directory() {
    let dir = std::env::temp_dir().join(format!("ddpdk-install-rel-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let run = |destdir: &str, bin: &str| {
        Command::new("bash")
            .arg(repo().join("deploy/install.sh"))
            .current_dir(&dir)
            .env("DESTDIR", destdir)
            .env("BIN", bin)
            .output()
            .expect("run install.sh")
    };
    let o = run("stage", BIN);
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{text}");
    assert!(dir.join("stage/usr/local/bin/ddpdk").is_file(), "{text}");
    assert!(
        !repo().join("stage").exists(),
        "staged into the source tree: {text}"
    );
    let o = run("stage2", dir.to_str().expect("utf-8"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("no such executable file"), "{err}");
    assert!(!dir.join("stage2").exists(), "nothing made: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn install_stages_the_service_whose_units_systemd_accepts_and_whose_example_runs() {
    let stage = std::env::temp_dir().join(format!("ddpdk-install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&stage);
    let o = Command::new("bash")
        .arg(repo().join("deploy/install.sh"))
        .env("DESTDIR", &stage)
        .env("BIN", BIN)
        .output()
        .expect("run install.sh");
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    for f in [
        "usr/local/bin/ddpdk",
        "usr/local/lib/ddpdk/ddpdk-exporter.py",
        "usr/local/share/ddpdk/ddp.lua",
        "usr/local/share/doc/ddpdk/deploy.md",
        "etc/systemd/system/ddpdk@.service",
        "etc/systemd/system/ddpdk-exporter@.service",
        "etc/ddpdk/example.env",
        "etc/ddpdk/example.cmds",
    ] {
        assert!(stage.join(f).is_file(), "{f} installed");
    }
    // An edited env file survives a second install.
    let env_path = stage.join("etc/ddpdk/example.env");
    let edited = std::fs::read_to_string(&env_path).expect("env") + "# edited\n";
    std::fs::write(&env_path, &edited).expect("write");
    let o = Command::new("bash")
        .arg(repo().join("deploy/install.sh"))
        .env("DESTDIR", &stage)
        .env("BIN", BIN)
        .output()
        .expect("run install.sh again");
    assert!(o.status.success());
    assert_eq!(std::fs::read_to_string(&env_path).expect("env"), edited);

    // systemd's own reading of the units, their paths moved into the stage (systemd-analyze
    // verify warns on stderr, and still exits 0, for a line it ignores).
    // deploy/setup.sh installs systemd for its systemd-analyze.
    let units = stage.join("units");
    std::fs::create_dir_all(&units).expect("dir");
    let s = stage.to_str().expect("utf-8");
    let mut names = Vec::new();
    for u in ["ddpdk@.service", "ddpdk-exporter@.service"] {
        let text = std::fs::read_to_string(stage.join("etc/systemd/system").join(u))
            .expect("unit")
            .replace("/usr/local/", &format!("{s}/usr/local/"))
            .replace("/etc/ddpdk/", &format!("{s}/etc/ddpdk/"));
        let name = u.replace('@', "@example");
        std::fs::write(units.join(&name), text).expect("write");
        names.push(units.join(name));
    }
    let o = Command::new("systemd-analyze")
        .arg("verify")
        .args(&names)
        .output()
        .expect("systemd-analyze (deploy/setup.sh installs systemd)");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.trim().is_empty(), "{err}");

    // The example service's job and options, on a virtual port: the same words, the NIC and
    // hugepages of its EAL options swapped for a ring and --no-huge.
    let env = std::fs::read_to_string(repo().join("deploy/systemd/example.env")).expect("env");
    let job = env_value(&env, "DDPDK_JOB");
    let args = env_value(&env, "DDPDK_ARGS").replace(
        "/etc/ddpdk/ddpdk0.cmds",
        stage
            .join("etc/ddpdk/example.cmds")
            .to_str()
            .expect("utf-8"),
    );
    let prefix = format!("ddpdk-deploy{}", std::process::id());
    let o = Command::new(BIN)
        .arg(&job)
        .args([
            "--lcores",
            "0@0,(1-2)@1",
            "--no-huge",
            "-m",
            "1536",
            "--no-pci",
            "--vdev",
            "net_ring0",
            "--log-level=*:error",
            "--file-prefix",
            &prefix,
            "--",
        ])
        .args(args.split_whitespace())
        .args(["--run-for", "1"])
        .output()
        .expect("run the example");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("Sessions we accept are offered STag"),
        "the example's commands ran: {out}"
    );
    let _ = std::fs::remove_dir_all(&stage);
}

#[test]
fn install_takes_a_relative_bin_from_the_callers_directory_and_refuses_a_missing_one() {
    let stage = std::env::temp_dir().join(format!("ddpdk-install-rel-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&stage);
    let bin = Path::new(BIN);
    let (dir, name) = (
        bin.parent().expect("bin dir"),
        bin.file_name().expect("bin name"),
    );
    // BIN relative to where the script is run from, not to the repository it cd's into.
    let o = Command::new("bash")
        .arg(repo().join("deploy/install.sh"))
        .current_dir(dir)
        .env("DESTDIR", &stage)
        .env("BIN", name)
        .output()
        .expect("run install.sh");
    assert!(
        o.status.success() && stage.join("usr/local/bin/ddpdk").is_file(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // A BIN given that is not there is an error, never a build of something else.
    let o = Command::new("bash")
        .arg(repo().join("deploy/install.sh"))
        .current_dir(dir)
        .env("DESTDIR", &stage)
        .env("BIN", "no-such-ddpdk")
        .output()
        .expect("run install.sh");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("no-such-ddpdk: no such executable"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&o.stdout).contains("building"));
    let _ = std::fs::remove_dir_all(&stage);
}

/// `Key=value` in `[section]` of a unit file.
fn unit_value(unit: &str, section: &str, key: &str) -> Option<String> {
    let mut inside = false;
    for l in unit.lines() {
        let l = l.trim();
        if l.starts_with('[') {
            inside = l == format!("[{section}]");
        } else if inside {
            if let Some(v) = l.strip_prefix(key).and_then(|v| v.strip_prefix('=')) {
                return Some(v.to_string());
            }
        }
    }
    None
}

#[test]
fn the_service_restarts_spaced_out_a_bounded_number_of_times() {
    for u in ["ddpdk@.service", "ddpdk-exporter@.service"] {
        let unit = std::fs::read_to_string(repo().join("deploy/systemd").join(u)).expect("unit");
        let num = |section: &str, key: &str| -> u64 {
            unit_value(&unit, section, key)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{u}: {key}= in [{section}]"))
        };
        let (interval, burst, every) = (
            num("Unit", "StartLimitIntervalSec"),
            num("Unit", "StartLimitBurst"),
            num("Service", "RestartSec"),
        );
        // The burst is reached within the interval (restarts stop), and not within seconds.
        assert!(
            every * burst < interval,
            "{u}: {every} s x {burst} within {interval} s"
        );
        assert!(
            every >= 10,
            "{u}: RestartSec={every} spends the burst in seconds"
        );
    }
    let doc = std::fs::read_to_string(repo().join("docs/deploy.md")).expect("doc");
    for s in [
        "systemctl enable --now ddpdk-exporter@",
        "StartLimitBurst",
        "2 for a usage error",
        ".service.d/",
    ] {
        assert!(doc.contains(s), "docs/deploy.md says {s}");
    }
}
