//! A `net_memif` port carries every frame in one buffer, or it is refused before the EAL starts.
//!
//! memif splits a frame longer than its buffers (`bsize`, 2048 bytes unless the vdev says
//! otherwise) over chained descriptors, and DPDK 22.11's memif gets such chains wrong: its Tx
//! sets the chain flag of a packet's first descriptor with `|=` and never clears it, so a short
//! packet on a slot that once held the middle of a long one is chained to whatever follows;
//! its Rx follows a chain flag past the ring's head without checking, reads descriptors the
//! sender has not written, and moves its tail past the head. Fixed upstream in 2026 (DPDK
//! f7a52200d4 "net/memif: fix descriptor Tx flags corruption", 40e0e7c0a2 "net/memif: fix
//! multi-segment Rx corruption"), not in Debian's 22.11.11. Seen here at `--mtu 9000` with the
//! default buffers and messages of one full segment and a short one: old frames received again
//! by the thousand, the association stalled after 170 writes, the server killed by SIGSEGV.
//! With buffers that hold a whole frame no chain is ever made, in either direction (the
//! client's buffers are the ones both directions use).

use crate::vdev::{devarg, device_specs, longest_frame, strtoul10};

/// Why a DDP endpoint refuses memif's zero-copy mode. DPDK 22.11's zero-copy transmit writes
/// every descriptor as if its buffer were in the first memory region (`d0->region = 1`, "FIXME:
/// get region index", rte_eth_memif.c), so a segment sent by reference from a registered region
/// arrives as other bytes: the receiver drops it as corrupt, SCTP retransmits it the same way,
/// and the association stalls (cwnd down to one packet, T3 after T3). And its queue release
/// frees the queue, not the thousands of mbufs posted for receiving, which never come back to
/// the pool.
pub const ZERO_COPY_REFUSED: &str = "is refused on a DDP endpoint: DPDK 22.11's memif \
     zero-copy sends a frame from a registered region as other bytes (it takes every buffer to \
     be in its first memory region) and never gives back the buffers it posts for receiving; \
     leave zero-copy out (the copy mode moved as much on the machines ddpdk is tested on)";

/// The device arguments DPDK 22.11's memif knows (`valid_arguments`, rte_eth_memif.c). One it
/// does not know makes it drop all of them, with no word at any log level, and use its
/// defaults: `role=server,sock=PATH` (for `socket=`) made a client of `/run/memif.sock`, which
/// another application's server may own (an outside-in review). So any other is refused.
const MEMIF_DEVARGS: [&str; 9] = [
    "id",
    "role",
    "bsize",
    "rsize",
    "socket",
    "socket-abstract",
    "mac",
    "zero-copy",
    "secret",
];

/// memif's buffer size when the vdev gives none (DPDK's ETH_MEMIF_DEFAULT_PKT_BUFFER_SIZE).
const DEFAULT_BSIZE: u32 = 2048;

/// Makes every `net_memif` client vdev in `eal_args` hold in one buffer a frame of link MTU
/// `mtu` and a `txonly` frame of `txpkts` bytes: one without `bsize` gets one (the larger frame
/// rounded up to a KiB), one whose `bsize` is smaller is refused with why. A server's `bsize`
/// is not used (DPDK takes the client's for both directions), so a server vdev is left as it
/// is, with a note on what its client needs. A DDP `endpoint`'s memif in zero-copy mode is
/// refused ([`ZERO_COPY_REFUSED`]). Returns the notes to print.
pub fn fit_frames(
    eal_args: &mut [String],
    mtu: u16,
    txpkts: u16,
    endpoint: bool,
) -> Result<Vec<String>, String> {
    let (frame, why) = longest_frame(mtu, txpkts);
    let frame = u32::try_from(frame).unwrap_or(u32::MAX);
    let mut notes = Vec::new();
    for (at, prefix) in device_specs(eal_args) {
        let spec = eal_args[at][prefix..].to_owned();
        let name = spec.split(',').next().unwrap_or_default();
        if !name.starts_with("net_memif") {
            continue;
        }
        // rte_kvargs skips empty pieces and cuts a piece at each `=` (`socket=/tmp/a=b` is
        // the socket /tmp/a, `secret=c2Vj==` the secret c2Vj); a key alone has no value for
        // memif's handlers to read.
        for kv in spec.split(',').skip(1).filter(|kv| !kv.is_empty()) {
            let key = kv.split('=').next().unwrap_or_default();
            if !MEMIF_DEVARGS.contains(&key) {
                return Err(format!(
                    "{name}: {key:?} is not a memif device argument (DPDK 22.11's memif takes \
                     {}); with one it does not know it drops them all and runs as a client on \
                     /run/memif.sock",
                    MEMIF_DEVARGS.join(", ")
                ));
            }
            if kv.matches('=').count() != 1 {
                return Err(format!(
                    "{name}: {kv:?}: a memif device argument is KEY=VALUE, with one '=' (DPDK \
                     22.11 cuts a value at the next '=', and a key alone has no value)"
                ));
            }
        }
        // memif_set_zc: "yes" anywhere in the value turns zero-copy on (a client's only).
        if endpoint && devarg(&spec, "zero-copy").is_some_and(|v| v.contains("yes")) {
            return Err(format!("{name}: zero-copy=yes {ZERO_COPY_REFUSED}"));
        }
        let (role, given) = (devarg(&spec, "role"), devarg(&spec, "bsize"));
        // memif_set_role: "server" (or the old "master") anywhere in the value; a client
        // otherwise, and when no role is given.
        if role.is_some_and(|r| r.contains("server") || r.contains("master")) {
            if frame > DEFAULT_BSIZE {
                notes.push(format!(
                    "{name} is the memif server: its client's bsize sets the buffers both ways; \
                     a client that is not ddpdk needs bsize={} or more ({why}: frames of \
                     {frame} bytes; DPDK 22.11's memif loses and replays frames split over \
                     buffers)",
                    round_up(frame)
                ));
            }
            continue;
        }
        match given {
            Some(v) => {
                // 0 (no number) is refused by the driver itself.
                let bsize = strtoul10(v);
                if bsize != 0 && bsize < u64::from(frame) {
                    return Err(format!(
                        "{why}: a frame of {frame} bytes does not fit {name}'s buffers \
                         (bsize={v}); DPDK 22.11's memif loses and replays frames split over \
                         buffers (docs/usage.md), so give the vdev bsize={} or more, or leave \
                         bsize out and ddpdk sets it",
                        round_up(frame)
                    ));
                }
            }
            None if frame > DEFAULT_BSIZE => {
                let bsize = round_up(frame);
                eal_args[at].push_str(&format!(",bsize={bsize}"));
                notes.push(format!(
                    "{name}: bsize={bsize}, so that a frame of {frame} bytes ({why}) is \
                     one buffer: DPDK 22.11's memif loses and replays frames split over buffers"
                ));
            }
            None => {}
        }
    }
    Ok(notes)
}

fn round_up(frame: u32) -> u32 {
    frame.div_ceil(1024) * 1024
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// DPDK 22.11's memif drops every device argument when one is unknown: `sock=` for
    /// `socket=` turned a server into a client of /run/memif.sock. Refused, naming the key.
    #[test]
    fn a_memif_device_argument_memif_does_not_know_is_refused() {
        for (vdev, key) in [
            ("net_memif0,role=server,sock=/tmp/x.sock", "\"sock\""),
            ("net_memif0,role=client,zerocopy=no", "\"zerocopy\""),
            ("net_memif0,server", "\"server\""),
        ] {
            let mut a = args(&[&format!("--vdev={vdev}")]);
            let e = fit_frames(&mut a, 1500, 64, false).expect_err("refused");
            assert!(
                e.starts_with(&format!("net_memif0: {key} is not a memif device argument")),
                "{vdev}: {e}"
            );
        }
        for vdev in [
            "net_memif0,role",
            "net_memif0,secret=c2Vj==",
            "net_memif0,socket=/tmp/a=b",
        ] {
            let mut a = args(&[&format!("--vdev={vdev}")]);
            let e = fit_frames(&mut a, 1500, 64, false).expect_err("refused");
            assert!(
                e.contains("a memif device argument is KEY=VALUE"),
                "{vdev}: {e}"
            );
        }
        let mut a = args(&[
            "--vdev=net_memif0,id=1,role=server,rsize=10,socket=/tmp/x.sock,\
                           socket-abstract=no,mac=02:00:00:00:00:01,secret=s,,bsize=2048",
        ]);
        assert!(fit_frames(&mut a, 1500, 64, false).is_ok(), "{a:?}");
    }

    #[test]
    fn a_jumbo_mtu_gets_buffers_that_hold_a_frame() {
        let mut a = args(&["-l", "0", "--vdev=net_memif0,role=client,id=0", "--no-huge"]);
        let notes = fit_frames(&mut a, 9000, 64, true).expect("fits");
        assert_eq!(a[2], "--vdev=net_memif0,role=client,id=0,bsize=9216");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("bsize=9216") && notes[0].contains("9014"));
        // The two-argument form too.
        let mut a = args(&["--vdev", "net_memif1,role=client", "--vdev=net_ring0"]);
        fit_frames(&mut a, 4000, 64, true).expect("fits");
        assert_eq!(
            a,
            args(&[
                "--vdev",
                "net_memif1,role=client,bsize=4096",
                "--vdev=net_ring0"
            ])
        );
    }

    #[test]
    fn frames_that_fit_the_default_buffers_leave_the_vdev_alone() {
        let mut a = args(&["--vdev=net_memif0,role=client"]);
        assert!(fit_frames(&mut a, 1500, 64, true).expect("fits").is_empty());
        assert!(fit_frames(&mut a, 2034, 64, true).expect("fits").is_empty());
        assert_eq!(a[0], "--vdev=net_memif0,role=client");
        fit_frames(&mut a, 2035, 64, true).expect("fits");
        assert_eq!(a[0], "--vdev=net_memif0,role=client,bsize=3072");
    }

    #[test]
    fn a_bsize_given_is_kept_when_it_holds_a_frame_and_refused_when_not() {
        let mut a = args(&["--vdev=net_memif0,role=client,bsize=9216"]);
        assert!(fit_frames(&mut a, 9000, 64, true).expect("fits").is_empty());
        assert_eq!(a[0], "--vdev=net_memif0,role=client,bsize=9216");
        let mut a = args(&["--vdev=net_memif0,role=client,bsize=2048"]);
        let e = fit_frames(&mut a, 9000, 64, true).expect_err("too small");
        assert!(
            e.contains("bsize=2048") && e.contains("bsize=9216") && e.contains("9014"),
            "{e}"
        );
        // Read as the driver reads it: decimal digits at the start, the last bsize given.
        for small in ["2048k", " 2048", "9216,bsize=2048"] {
            let mut a = args(&[&format!("--vdev=net_memif0,bsize={small}")]);
            assert!(fit_frames(&mut a, 9000, 64, true).is_err(), "{small}");
        }
        // strtoul(.., 10) reads "0x2400" as 0, which the driver refuses itself.
        let mut a = args(&["--vdev=net_memif0,bsize=0x2400"]);
        assert!(fit_frames(&mut a, 9000, 64, true)
            .expect("left to DPDK")
            .is_empty());
    }

    #[test]
    fn a_server_is_left_as_it_is_with_a_note_on_its_clients_buffers() {
        // DPDK's memif takes the client's buffer size in both directions.
        let mut a = args(&["--vdev=net_memif0,role=server,bsize=2048"]);
        let notes = fit_frames(&mut a, 9000, 64, true).expect("a server's bsize is not used");
        assert_eq!(a[0], "--vdev=net_memif0,role=server,bsize=2048");
        assert!(
            notes.len() == 1 && notes[0].contains("bsize=9216"),
            "{notes:?}"
        );
        let mut a = args(&["--vdev=net_memif0,role=server"]);
        assert!(fit_frames(&mut a, 1500, 64, true).expect("fits").is_empty());
    }

    #[test]
    fn a_ddp_endpoint_refuses_memif_zero_copy_and_forwarding_keeps_it() {
        // memif_set_zc reads "yes" anywhere in the value; the last zero-copy given counts.
        for zc in ["yes", "no,zero-copy=yes"] {
            let spec = format!("--vdev=net_memif0,role=client,zero-copy={zc}");
            let e = fit_frames(&mut args(&[&spec]), 1500, 64, true).expect_err("refused");
            assert!(
                e.starts_with("net_memif0: zero-copy=yes is refused on a DDP endpoint")
                    && e.contains("first memory region")
                    && e.contains("leave zero-copy out"),
                "{e}"
            );
            // testpmd-style forwarding sends no region memory by reference.
            assert!(fit_frames(&mut args(&[&spec]), 1500, 64, false).is_ok());
        }
        let mut a = args(&["--vdev=net_memif0,role=client,zero-copy=no"]);
        assert!(fit_frames(&mut a, 1500, 64, true).is_ok());
    }

    #[test]
    fn txonly_frames_count_too() {
        let mut a = args(&["--vdev=net_memif0,role=client"]);
        fit_frames(&mut a, 1500, 9000, true).expect("fits");
        assert_eq!(a[0], "--vdev=net_memif0,role=client,bsize=9216");
        let mut a = args(&["--vdev=net_memif0,role=client,bsize=2048"]);
        let e = fit_frames(&mut a, 1500, 4000, true).expect_err("too small");
        assert!(e.starts_with("--txpkts 4000: a frame of 4000 bytes"), "{e}");
    }

    #[test]
    fn other_devices_are_not_touched() {
        let mut a = args(&[
            "--vdev=net_ring0",
            "--vdev=net_af_packet0,iface=veth0",
            "-a",
            "0000:01:00.0",
        ]);
        let before = a.clone();
        assert!(fit_frames(&mut a, 9000, 64, true).expect("fits").is_empty());
        assert_eq!(a, before);
    }
}
