//! The device strings of the EAL's arguments, read before the EAL starts, so that a virtual
//! device's options can be fitted to the run (`memif.rs`, `af_packet.rs`).

/// Where each device string of `eal_args` is: the index of the argument holding it and the
/// offset of the spec in it. The forms are `--vdev=SPEC`, `--vdev SPEC`, and the same with
/// `-a`/`--allow` (which create a virtual device too when SPEC names one).
pub fn device_specs(eal_args: &[String]) -> Vec<(usize, usize)> {
    let mut specs = Vec::new();
    let mut i = 0;
    while i < eal_args.len() {
        let arg = eal_args[i].as_str();
        match ["--vdev=", "--allow=", "-a"]
            .into_iter()
            .find(|p| arg.starts_with(p) && arg.len() > p.len())
        {
            Some(p) => specs.push((i, p.len())),
            None if ["--vdev", "--allow", "-a"].contains(&arg) && i + 1 < eal_args.len() => {
                i += 1;
                specs.push((i, 0));
            }
            None => {}
        }
        i += 1;
    }
    specs
}

/// The value of `key` in a device spec (`name,key=value,...`) as DPDK's kvargs hand it to the
/// driver: the last of a key wins.
pub fn devarg<'a>(spec: &'a str, key: &str) -> Option<&'a str> {
    spec.split(',')
        .skip(1)
        .filter_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .last()
}

/// The number at the start of `v` as C's `strtoul(v, NULL, 10)` reads it (and `atoi`, for the
/// values that fit): leading blanks, an optional `+`, the decimal digits that follow; 0 when
/// there are none.
pub fn strtoul10(v: &str) -> u64 {
    let v = v.trim_start();
    let v = v.strip_prefix('+').unwrap_or(v);
    v.bytes().take_while(u8::is_ascii_digit).fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    })
}

/// What a frame adds to the link MTU: the Ethernet header (ddpdk sends no VLAN tag).
const ETH_HEADER: u64 = 14;

/// The longest frame a run sends: one of link MTU `mtu`, or a `txonly` frame of `txpkts`
/// bytes; with the option that makes it so, for messages.
pub fn longest_frame(mtu: u16, txpkts: u16) -> (u64, String) {
    let frame = (u64::from(mtu) + ETH_HEADER).max(u64::from(txpkts));
    let why = if frame > u64::from(mtu) + ETH_HEADER {
        format!("--txpkts {txpkts}")
    } else {
        format!("--mtu {mtu}")
    };
    (frame, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_form_of_a_device_string_is_found() {
        let a = args(&[
            "-l",
            "0",
            "--vdev=net_memif0,role=client",
            "--vdev",
            "net_af_packet0,iface=x",
            "-anet_ring0",
            "--allow",
            "0000:01:00.0",
            "--allow=net_null0",
            "--vdev",
        ]);
        let specs: Vec<&str> = device_specs(&a)
            .into_iter()
            .map(|(at, p)| &a[at][p..])
            .collect();
        assert_eq!(
            specs,
            [
                "net_memif0,role=client",
                "net_af_packet0,iface=x",
                "net_ring0",
                "0000:01:00.0",
                "net_null0"
            ]
        );
    }

    #[test]
    fn the_last_of_a_key_wins_and_a_longer_key_is_another_key() {
        let spec = "net_af_packet0,framesz=2048,iface=a,framesz=4096,framesize=1";
        assert_eq!(devarg(spec, "framesz"), Some("4096"));
        assert_eq!(devarg(spec, "iface"), Some("a"));
        assert_eq!(devarg(spec, "blocksz"), None);
        // The device name is not a key.
        assert_eq!(devarg("iface=x", "iface"), None);
    }

    #[test]
    fn numbers_read_as_c_reads_them() {
        assert_eq!(strtoul10(" +9216k"), 9216);
        assert_eq!(strtoul10("x9216"), 0);
        assert_eq!(strtoul10(""), 0);
    }
}
