//! The PCI devices the EAL will take: driver, IOMMU, vendor, NUMA node, kernel interface.

use super::*;

/// Drivers DPDK's PCI bus takes a device from; the mlx drivers are the kernel's own, beside
/// which DPDK's mlx PMDs run (bifurcated).
pub(super) const VFIO: &str = "vfio-pci";
pub(super) const UIO: &[&str] = &["uio_pci_generic", "igb_uio"];
pub(super) const BIFURCATED: &[&str] = &["mlx5_core", "mlx4_core"];

/// The kernel interface a device carries, and whether it is up.
pub(super) fn interface(host: &Host, dev: &str) -> Option<(String, bool)> {
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
pub(super) const MELLANOX: &str = "0x15b3";

/// Drivers a device in a vfio group may have for the group to be viable (the kernel's
/// vfio_dev_driver_allowed): vfio-pci, pci-stub or none.
pub(super) const VIABLE: &[&str] = &[VFIO, "pci-stub"];

/// A device on vfio-pci: its IOMMU group real, or vfio's no-IOMMU one, and viable (vfio
/// opens a group only when every device in it is on vfio-pci, pci-stub or no driver; DPDK
/// otherwise stops with "VFIO group is not viable").
pub(super) fn vfio_finding(host: &Host, dev: &str, addr: &str) -> Finding {
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
pub(super) fn default_route_interface(host: &Host) -> Option<String> {
    host.read("/proc/net/route")?.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 7 && f[1] == "00000000" && f[7] == "00000000").then(|| f[0].to_string())
    })
}

/// Interfaces with any IPv4 route (an address gives one) in /proc/net/route.
pub(super) fn route_interfaces(host: &Host) -> BTreeSet<String> {
    host.read("/proc/net/route")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect()
}

pub(super) fn check_devices(
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
                // deploy/eal-args.sh's options are this: right for the jobs that make their
                // own ports, which preflight, given EAL options alone, cannot see.
                "allow the NIC (-a 0000:03:00.0) or give a virtual device (--vdev); \
                 `ddpdk loopback` and `--ring-pair` make their own net_ring ports and need \
                 neither",
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
