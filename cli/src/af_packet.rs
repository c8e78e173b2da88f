//! A `net_af_packet` port sized for the run's frames before the EAL starts.
//!
//! DPDK 22.11's af_packet moves each frame through a slot of a kernel `PACKET_MMAP` ring of
//! `framesz` bytes (2048 unless the vdev says otherwise): a frame longer than a slot is cut by
//! the kernel on receive and dropped uncounted by the driver on transmit. It also declares
//! 1518-byte frames (`max_rx_pktlen`), so ethdev refuses any MTU above 1500 on it; the MTU that
//! matters is the kernel interface's own. So for a jumbo `--mtu` ddpdk gives the vdev slots that
//! hold a frame and leaves the device's MTU alone, and refuses what cannot work: slots given
//! too small, an interface whose MTU is smaller than `--mtu`.

use crate::vdev::{devarg, device_specs, longest_frame, strtoul10};

/// af_packet's slot size when the vdev gives none (DPDK's DFLT_FRAME_SIZE; its blocks are a
/// page).
const DEFAULT_FRAMESZ: u64 = 2048;
/// Where the frame starts in a receive slot: the kernel's `macoff`, for TPACKET_V2 on an
/// Ethernet device (TPACKET_ALIGN(TPACKET2_HDRLEN + 16) - 14 = 80 - 14).
const RX_FRAME_OFFSET: u64 = 66;
/// What af_packet's receive queue asks of an mbuf beyond a slot's size (it refuses mbufs with
/// less room than `framesz - 32`): the slot's header less its address, less mbuf headroom.
const SLOT_HEADER: u64 = 32;
const MBUF_HEADROOM: u64 = 128;
/// af_packet's slot count when the vdev gives none (DPDK's DFLT_FRAME_COUNT).
const DEFAULT_FRAMECNT: u64 = 512;
/// A DDP endpoint's slot count for slots of the default size (4 MiB a ring): a sender's core
/// busy framing lets its peer's SACKs pile up in the kernel's ring, and 512 slots overflowed
/// (measured, two namespaces over a veth, 5 s at MTU 1500: `port_rx_missed` up to 113 and 6 to
/// 17 fast retransmits a run with 512; none of either in four runs each with 2048 and 4096).
const ENDPOINT_FRAMECNT: u64 = 2048;

/// What [`fit_frames`] did: the notes to print, and the smallest mbuf (headroom included)
/// af_packet's receive queues will take (0: no af_packet vdev).
#[derive(Debug, Default)]
pub struct Fitted {
    pub notes: Vec<String>,
    pub mbuf_size: u16,
}

/// Makes every `net_af_packet` vdev in `eal_args` carry a frame of link MTU `mtu` and a
/// `txonly` frame of `txpkts` bytes in one slot: one without `framesz` gets slots that hold it
/// (a KiB multiple, in blocks of whole pages of `page` bytes that hold whole slots, as many
/// slots a block as divide its `framecnt`: DPDK's af_packet addresses slot `i` at
/// `i * framesz`, as if blocks had no gaps, and the kernel wants whole blocks of slots); one
/// whose `framesz` is smaller, or whose `blocksz` leaves gaps, is refused. For a DDP endpoint
/// (`endpoint_queues`: the queue pairs it needs, one a data core and one for the control
/// thread), whose path MTU follows `mtu`, so is an interface whose MTU, read from
/// `sys_class_net/IFACE/mtu`, is smaller than `mtu`; and a vdev without `qpairs` (one, in
/// DPDK) gets them.
pub fn fit_frames(
    eal_args: &mut [String],
    mtu: u16,
    txpkts: u16,
    sys_class_net: &std::path::Path,
    endpoint_queues: Option<u16>,
    page: u64,
    lockable: u64,
) -> Result<Fitted, String> {
    let (frame, why) = longest_frame(mtu, txpkts);
    let slot = frame + RX_FRAME_OFFSET;
    let mut fitted = Fitted::default();
    for (at, prefix) in device_specs(eal_args) {
        let spec = eal_args[at][prefix..].to_owned();
        let name = spec.split(',').next().unwrap_or_default();
        if !name.starts_with("net_af_packet") {
            continue;
        }
        if let Some(queues) = endpoint_queues.filter(|_| devarg(&spec, "qpairs").is_none()) {
            eal_args[at].push_str(&format!(",qpairs={queues}"));
            fitted.notes.push(format!(
                "{name}: qpairs={queues}, one for each data core and one for the control thread"
            ));
        }
        if let Some(iface) = devarg(&spec, "iface").filter(|_| endpoint_queues.is_some()) {
            let path = sys_class_net.join(iface).join("mtu");
            // An interface that is not there is DPDK's to report.
            let kernel_mtu = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| t.trim().parse::<u16>().ok());
            if let Some(k) = kernel_mtu.filter(|&k| k < mtu) {
                return Err(format!(
                    "--mtu {mtu}: {name}'s interface {iface} has MTU {k} ({}), and the kernel \
                     passes no longer frame; raise it (ip link set {iface} mtu {mtu}) or run \
                     with --mtu {k}",
                    path.display()
                ));
            }
        }
        let block_given = devarg(&spec, "blocksz").map(strtoul10);
        let mut framecnt = devarg(&spec, "framecnt").map_or(DEFAULT_FRAMECNT, strtoul10);
        let default_slots = slot <= DEFAULT_FRAMESZ
            && devarg(&spec, "framesz").is_none_or(|f| strtoul10(f) <= DEFAULT_FRAMESZ);
        // Jumbo slots keep DPDK's count: 2048 of them would be 20 MiB a ring. So do rings the
        // process may not lock (`MAP_LOCKED`: RLIMIT_MEMLOCK, 8 MiB, without CAP_IPC_LOCK).
        let qpairs = devarg(&spec, "qpairs")
            .map(strtoul10)
            .or(endpoint_queues.map(u64::from))
            .unwrap_or(1);
        let locked = qpairs.saturating_mul(2 * ENDPOINT_FRAMECNT * DEFAULT_FRAMESZ);
        if endpoint_queues.is_some()
            && devarg(&spec, "framecnt").is_none()
            && default_slots
            && locked <= lockable
        {
            framecnt = ENDPOINT_FRAMECNT;
            eal_args[at].push_str(&format!(",framecnt={framecnt}"));
            fitted.notes.push(format!(
                "{name}: framecnt={framecnt}, so that the peer's SACKs do not overflow the \
                 kernel's ring while the data core is busy"
            ));
        }
        let framesz = match devarg(&spec, "framesz").map(strtoul10) {
            // 0 (no number) is refused by the driver itself.
            Some(0) => continue,
            Some(given) => {
                if given < slot {
                    return Err(format!(
                        "{why}: a frame of {frame} bytes does not fit {name}'s slots \
                         (framesz={given}: the kernel cuts a longer frame, af_packet drops it \
                         unsent); give the vdev framesz={} or more, or leave framesz out and \
                         ddpdk sets it",
                        slot.next_multiple_of(1024)
                    ));
                }
                let block = block_given.unwrap_or(page);
                if block != 0 && !block.is_multiple_of(given) {
                    return Err(format!(
                        "{name}: blocksz={block}{} is not a multiple of framesz={given}: \
                         DPDK's af_packet would read slots where the kernel leaves gaps; give a \
                         blocksz that is, or leave both out and ddpdk sets them",
                        if block_given.is_none() {
                            " (one page, its default)"
                        } else {
                            ""
                        }
                    ));
                }
                given
            }
            None if slot > DEFAULT_FRAMESZ => {
                if block_given.is_some() {
                    return Err(format!(
                        "{why}: {name} needs slots larger than its default for frames of \
                         {frame} bytes, and blocksz alone does not give them: give framesz too, \
                         or neither and ddpdk sets both"
                    ));
                }
                let mut framesz = slot.next_multiple_of(1024);
                let mut block = framesz * (page / gcd(framesz, page));
                if block > 4 * framesz.max(page) {
                    // Large pages: slots of a power of two, whole in a page or pages.
                    framesz = slot.next_power_of_two();
                    block = framesz.max(page);
                }
                if framecnt == 0 || !framecnt.is_multiple_of(block / framesz) {
                    // One slot a block, so that any framecnt is whole blocks.
                    framesz = slot.next_multiple_of(page);
                    block = framesz;
                }
                eal_args[at].push_str(&format!(",framesz={framesz},blocksz={block}"));
                fitted.notes.push(format!(
                    "{name}: framesz={framesz},blocksz={block}, so that a frame of {frame} bytes \
                     ({why}) fits a slot of its ring"
                ));
                framesz
            }
            None => DEFAULT_FRAMESZ,
        };
        let mbuf = u16::try_from(framesz - SLOT_HEADER + MBUF_HEADROOM).map_err(|_| {
            format!("{name}: framesz={framesz} is more than an mbuf can hold (65439 at most)")
        })?;
        fitted.mbuf_size = fitted.mbuf_size.max(mbuf);
    }
    Ok(fitted)
}

/// The bytes this process may lock in memory (af_packet maps its rings `MAP_LOCKED`): all
/// with CAP_IPC_LOCK (root's), else RLIMIT_MEMLOCK's soft limit, from the kernel's own word
/// (`/proc/self/status`, `/proc/self/limits`); DPDK's rings alone when neither can be read.
pub fn lockable_bytes() -> u64 {
    const CAP_IPC_LOCK: u32 = 14;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .unwrap_or(0);
    if cap_eff & (1 << CAP_IPC_LOCK) != 0 {
        return u64::MAX;
    }
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    limits
        .lines()
        .find(|l| l.starts_with("Max locked memory"))
        .and_then(|l| l.split_whitespace().nth(3))
        .map_or(0, |soft| match soft {
            "unlimited" => u64::MAX,
            n => n.parse().unwrap_or(0),
        })
}

/// The base page size, from the kernel's own word for this process's first mapping (the
/// kernel's ring blocks are whole pages of it); 4 KiB if it cannot be read.
pub fn page_size() -> u64 {
    std::fs::read_to_string("/proc/self/smaps")
        .ok()
        .and_then(|t| {
            let line = t.lines().find(|l| l.starts_with("KernelPageSize:"))?;
            let kb = line.split_whitespace().nth(1)?.parse::<u64>().ok()?;
            Some(kb * 1024)
        })
        .unwrap_or(4096)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// A fake /sys/class/net holding interface `iface` with MTU `mtu`.
    fn sys(tag: &str, iface: &str, mtu: u16) -> std::path::PathBuf {
        let root = std::env::temp_dir().join(format!("ddpdk-af-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(root.join(iface)).expect("dir");
        std::fs::write(root.join(iface).join("mtu"), format!("{mtu}\n")).expect("mtu");
        root
    }

    #[test]
    fn a_jumbo_mtu_gets_slots_that_hold_a_frame() {
        let root = sys("jumbo", "veth0", 9000);
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0,qpairs=2"]);
        let f = fit_frames(&mut a, 9000, 64, &root, Some(2), 4096, u64::MAX).expect("fits");
        // 9014 bytes from offset 66 of the slot, rounded to a KiB; whole slots in whole pages.
        assert_eq!(
            a[0],
            "--vdev=net_af_packet0,iface=veth0,qpairs=2,framesz=9216,blocksz=36864"
        );
        assert!(f.notes.len() == 1 && f.notes[0].contains("9014"), "{f:?}");
        // af_packet's receive queue takes mbufs of framesz - 32 bytes and more, headroom aside.
        assert_eq!(f.mbuf_size, 9216 - 32 + 128);
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn frames_that_fit_the_default_slots_leave_the_vdev_alone() {
        let root = sys("default", "veth0", 1500);
        let mut a = args(&["--vdev", "net_af_packet0,iface=veth0"]);
        let f = fit_frames(&mut a, 1500, 64, &root, None, 4096, u64::MAX).expect("fits");
        assert!(f.notes.is_empty(), "{f:?}");
        assert_eq!(a[1], "net_af_packet0,iface=veth0");
        // The default slots of 2048 bytes fit the default mbufs (2176).
        assert_eq!(f.mbuf_size, 2048 - 32 + 128);
        let f = fit_frames(
            &mut args(&["--vdev=net_ring0"]),
            9000,
            64,
            &root,
            None,
            4096,
            u64::MAX,
        )
        .expect("none");
        assert_eq!(f.mbuf_size, 0);
        let _ = std::fs::remove_dir_all(root);
    }

    /// A DDP endpoint's rings hold 2048 standard frames unless the vdev says otherwise
    /// (ENDPOINT_FRAMECNT: the kernel dropped the peer's SACKs from 512); a forwarding job's
    /// and jumbo slots keep DPDK's 512.
    #[test]
    fn an_endpoints_ring_holds_more_standard_frames() {
        let root = sys("framecnt", "veth0", 9000);
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0"]);
        let f = fit_frames(&mut a, 1500, 64, &root, Some(2), 4096, u64::MAX).expect("fits");
        assert_eq!(
            a[0],
            "--vdev=net_af_packet0,iface=veth0,qpairs=2,framecnt=2048"
        );
        assert!(f.notes.iter().any(|n| n.contains("framecnt=2048")), "{f:?}");
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0,framecnt=256"]);
        fit_frames(&mut a, 1500, 64, &root, Some(2), 4096, u64::MAX).expect("fits");
        assert!(!a[0].contains("framecnt=2048"), "{}", a[0]);
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0"]);
        fit_frames(&mut a, 1500, 64, &root, None, 4096, u64::MAX).expect("fits");
        assert!(!a[0].contains("framecnt"), "{}", a[0]);
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0"]);
        fit_frames(&mut a, 9000, 64, &root, Some(2), 4096, u64::MAX).expect("fits");
        assert!(!a[0].contains("framecnt"), "{}", a[0]);
        // Rings the process may not lock stay as DPDK sizes them (8 MiB: 2 queue pairs of
        // 2048 slots would lock 16).
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0"]);
        fit_frames(&mut a, 1500, 64, &root, Some(2), 4096, 8 << 20).expect("fits");
        assert!(!a[0].contains("framecnt"), "{}", a[0]);
        assert!(lockable_bytes() > 0);
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn slots_given_too_small_are_refused_and_large_enough_kept() {
        let root = sys("given", "veth0", 9000);
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0,framesz=2048"]);
        let e =
            fit_frames(&mut a, 9000, 64, &root, Some(2), 4096, u64::MAX).expect_err("too small");
        assert!(
            e.contains("framesz=2048") && e.contains("framesz=9216"),
            "{e}"
        );
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0,framesz=16384,blocksz=16384"]);
        let f = fit_frames(&mut a, 9000, 64, &root, Some(2), 4096, u64::MAX).expect("fits");
        // Slots given are kept: no note on them (only the queue pairs added).
        assert!(
            f.notes.iter().all(|n| !n.contains("framesz")) && f.mbuf_size == 16384 - 32 + 128,
            "{f:?}"
        );
        // Blocks with gaps between slots: DPDK would read the gaps.
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0,framesz=9216,blocksz=12288"]);
        let e = fit_frames(&mut a, 9000, 64, &root, Some(2), 4096, u64::MAX).expect_err("gaps");
        assert!(e.contains("not a multiple of framesz=9216"), "{e}");
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn an_interface_whose_mtu_is_smaller_than_the_runs_is_refused() {
        let root = sys("small", "veth0", 1500);
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0"]);
        let e = fit_frames(&mut a, 9000, 64, &root, Some(2), 4096, u64::MAX)
            .expect_err("kernel MTU 1500");
        assert!(
            e.contains("veth0 has MTU 1500") && e.contains("ip link set veth0 mtu 9000"),
            "{e}"
        );
        // Only a DDP endpoint's path MTU follows --mtu: a forwarding job is not refused, and
        // its queue pairs are its own business.
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0"]);
        assert!(fit_frames(&mut a, 9000, 64, &root, None, 4096, u64::MAX).is_ok());
        assert!(!a[0].contains("qpairs"), "{}", a[0]);
        // An interface that is not there is left to DPDK.
        let mut a = args(&["--vdev=net_af_packet0,iface=nothere"]);
        assert!(fit_frames(&mut a, 1500, 64, &root, Some(2), 4096, u64::MAX).is_ok());
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn a_frame_that_fills_its_slot_exactly_fits() {
        let root = sys("exact", "veth0", 9000);
        // 8112 + 14 bytes from offset 66: 8192, a slot to the byte.
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0"]);
        fit_frames(&mut a, 8112, 64, &root, Some(2), 4096, u64::MAX).expect("fits");
        assert_eq!(
            a[0],
            "--vdev=net_af_packet0,iface=veth0,qpairs=2,framesz=8192,blocksz=8192"
        );
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0"]);
        fit_frames(&mut a, 8113, 64, &root, Some(2), 4096, u64::MAX).expect("fits");
        assert_eq!(
            a[0],
            "--vdev=net_af_packet0,iface=veth0,qpairs=2,framesz=9216,blocksz=36864"
        );
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn slot_counts_and_page_sizes_keep_blocks_whole() {
        let root = sys("blocks", "veth0", 9000);
        // 4 slots of 9 KiB a 36 KiB block: a framecnt of 510 is not whole blocks of them, so
        // one slot a block of three pages.
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0,framecnt=510"]);
        let f = fit_frames(&mut a, 9000, 64, &root, Some(2), 4096, u64::MAX).expect("fits");
        assert_eq!(
            a[0],
            "--vdev=net_af_packet0,iface=veth0,framecnt=510,qpairs=2,framesz=12288,blocksz=12288"
        );
        assert_eq!(f.mbuf_size, 12288 - 32 + 128);
        // 64 KiB pages: four slots of 16 KiB a page, not 64 of 9 KiB in nine.
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0"]);
        fit_frames(&mut a, 9000, 64, &root, Some(2), 65536, u64::MAX).expect("fits");
        assert_eq!(
            a[0],
            "--vdev=net_af_packet0,iface=veth0,qpairs=2,framesz=16384,blocksz=65536"
        );
        // blocksz alone cannot make the slots larger; framesz given without blocksz is checked
        // against one page.
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0,blocksz=65536"]);
        let e = fit_frames(&mut a, 9000, 64, &root, Some(2), 4096, u64::MAX)
            .expect_err("blocksz alone");
        assert!(e.contains("give framesz too"), "{e}");
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0,framesz=9216"]);
        let e = fit_frames(&mut a, 9000, 64, &root, Some(2), 4096, u64::MAX).expect_err("one page");
        assert!(e.contains("blocksz=4096 (one page, its default)"), "{e}");
        assert!(page_size().is_power_of_two() && page_size() >= 4096);
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn an_endpoint_gets_a_queue_pair_for_each_data_core_and_one_for_control() {
        let root = sys("qpairs", "veth0", 1500);
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0"]);
        let f = fit_frames(&mut a, 1500, 64, &root, Some(3), 4096, u64::MAX).expect("fits");
        assert_eq!(
            a[0],
            "--vdev=net_af_packet0,iface=veth0,qpairs=3,framecnt=2048"
        );
        assert!(f.notes.iter().any(|n| n.contains("qpairs=3")), "{f:?}");
        // Queue pairs given are kept (too few is DPDK's to refuse, with ddpdk's hint).
        let mut a = args(&["--vdev=net_af_packet0,iface=veth0,qpairs=4,framecnt=512"]);
        fit_frames(&mut a, 1500, 64, &root, Some(2), 4096, u64::MAX).expect("fits");
        assert_eq!(
            a[0],
            "--vdev=net_af_packet0,iface=veth0,qpairs=4,framecnt=512"
        );
        let _ = std::fs::remove_dir_all(root);
    }
}
