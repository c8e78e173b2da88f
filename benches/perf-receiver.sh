#!/usr/bin/env bash
# Where a bulk receiver's core goes, natively, in nanoseconds a packet: the DDP receiver of the
# goodput bench (`--ddp-listen`, one data core, a zero-copy client sending 1 MiB writes) next
# to the placement ceiling's receiver (`rxplace`: the CRC32c and the copy into a region, no
# protocol, fed by `txonly --txsplit`), each profiled with `perf record -e cpu-clock` for 3 s
# in the middle of its run, over net_memif (issue 13 item 3; benches/README.md, "Session 48").
#
#   benches/perf-receiver.sh [MTU] [ROUNDS]      MTU 1500 (default) or 9000, 2 rounds
#   KEEP=DIR benches/perf-receiver.sh ...        keeps each round's perf.data files in DIR
#
# Each sample is charged to one of four parts: `device` (memif's PMD: its receive copy out of
# the shared ring, and the transmit of our SACKs), `crc32c` (the SCTP checksum of each packet),
# `memory` (the placement: its copy into the region and the software prefetches of the next
# frame's and the next placement's lines, where the core waits for line-fill buffers) and
# `own` (everything else: the protocol, the SACKs' making, the poll loop). Samples are told
# apart by source line (the prefetches are inlined into the receive path: their samples carry
# prefetch.rs's lines or the intrinsic's, core_arch's sse.rs), so the binary needs
# its debug info (the release profile keeps it). A part's nanoseconds a packet are its share
# of the samples times the time a packet took. `device` and `memory` trade places from run to
# run (when one waits less the other waits more: their sum is the steadier figure); `own` is
# what the protocol adds to the ceiling. Read the rounds side by side, not against another
# day's.
set -euo pipefail
cd "$(dirname "$0")/.."
MTU=${1:-1500}
ROUNDS=${2:-2}
NAME=perf-receiver
. benches/perf-lib.sh
# Both pairs on rings of 64 slots (RSIZE=log2), where ddp-goodput-bench finds both its
# placement ceiling and DDP at MTU 1500 at their best on these VMs (its --ceiling-rsizes): on
# memif's default 1024 the receiver's copy out of the ring misses the cache ("Session 48").
ring=",rsize=${RSIZE:-6}"
# parts FILE PACKETS_PER_S LABEL: the line of a round.
parts() {
    perf report -i "$1" --no-children --sort dso,symbol,srcline -F overhead,dso,sym,srcline \
        --stdio 2>/dev/null |
        python3 -c '
import sys
pps, label = float(sys.argv[1]), sys.argv[2]
part = {"device": 0.0, "crc32c": 0.0, "memory": 0.0, "own": 0.0}
for line in sys.stdin:
    f = line.split()
    if len(f) < 3 or line.startswith("#") or not f[0].endswith("%"):
        continue
    share, dso, rest = float(f[0][:-1]), f[1], " ".join(f[2:]).lower()
    if "memif" in dso:
        part["device"] += share
    elif "crc" in rest or "sctp_checksum" in rest:
        part["crc32c"] += share
    # prefetch.rs: the hints loops; sse.rs: the `_mm_prefetch` and `_mm_sfence` intrinsics
    # inlined into them and into the placement batch; region.rs, memmove: the copy.
    elif any(k in rest for k in ("prefetch.rs", "sse.rs", "memmove", "memcpy", "region.rs")):
        part["memory"] += share
    else:
        part["own"] += share
total = sum(part.values()) or 1
ns = 1e9 / pps
print(f"{label:<10} {pps / 1e6:6.2f} M/s {ns:7.0f} ns | " + "  ".join(
    f"{k} {v / total * ns:5.0f}" for k, v in part.items()))
' "$2" "$3"
}
printf '%-10s %10s %10s | %s\n' receiver packets "a packet" "ns a packet, by part"
for round in $(seq 1 "$ROUNDS"); do
    # The DDP pair: server on CPU 0, client on CPU 1, 8 s of 1 MiB tagged writes.
    $BIN $(eal server 0@0 srv$round "$ring") -- --ddp-listen --ip 198.18.0.2 --mtu "$MTU" --json \
        --run-for 20 >"$out/srv" 2>&1 &
    srv=$!
    pids+=("$srv")
    sleep 2
    $BIN $(eal client 0@1 cli$round "$ring") -- --ddp-connect 198.18.0.2 --ip 198.18.0.1 --mtu "$MTU" \
        --run-for 8 --ddp-size 1048576 --ddp-source region --json >"$out/cli" 2>&1 &
    cli=$!
    # Past the server's region set-up (its pages faulted in at the Initiate) and the ramp.
    sleep 3
    record "$srv" "$out/ddp.data"
    wait "$cli" || true
    kill -INT "$srv" 2>/dev/null || true
    wait "$srv" 2>/dev/null || true
    # The frames the client sent over the run: what the server received.
    pps=$(ddp_pps "$out/cli")
    parts "$out/ddp.data" "$pps" "ddp $round"
    [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$out/ddp.data" "$KEEP/ddp$round.data"
    # The placement ceiling: txonly's chains into rxplace, CPUs as above.
    common=(--txpkts "$frame" --mbuf-size $((bsize + 128)) --stats-period 1 --json
        --link-timeout 0 --total-num-mbufs 16383)
    $BIN $(eal server 0@1,1@0 rx$round "$ring") -- --forward-mode rxplace "${common[@]}" \
        >"$out/rx" 2>&1 &
    rx=$!
    pids+=("$rx")
    sleep 1.5
    $BIN $(eal client 0@0,1@1 tx$round "$ring") -- --forward-mode txonly "${common[@]}" \
        --txsplit "$header" >"$out/tx" 2>&1 &
    tx=$!
    pids+=("$tx")
    sleep 3
    record "$rx" "$out/rx.data"
    sleep 1
    kill -INT "$tx" "$rx" 2>/dev/null || true
    wait "$tx" "$rx" 2>/dev/null || true
    # The receiver's per-second rates while it was profiled (its 4th to 6th).
    pps=$(grep -o '"rx_pps":[0-9]*' "$out/rx" | cut -d: -f2 | sed -n 4,6p | sort -n | sed -n 2p)
    parts "$out/rx.data" "${pps:-1}" "rxplace $round"
    [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$out/rx.data" "$KEEP/rxplace$round.data"
done
