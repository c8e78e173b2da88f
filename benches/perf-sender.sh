#!/usr/bin/env bash
# Where a bulk sender's core goes, natively, in nanoseconds a packet: the DDP sender of the
# goodput bench (`--ddp-connect`, zero-copy from a region, one data core) next to the sender
# of the zero-copy ceiling (`txonly --txsplit`, the same frames with no protocol), each
# profiled with `perf record -e cpu-clock` for 3 s in the middle of its run, over net_memif
# (issue 13 item 3; benches/README.md, "Session 45").
#
#   benches/perf-sender.sh [MTU] [ROUNDS]        MTU 1500 (default) or 9000, 2 rounds
#   KEEP=DIR benches/perf-sender.sh ...          keeps each round's perf.data files in DIR
#   CLIENT_ARGS='--tx-spans chain' ...           more options for the DDP sender (here: its
#                                                region spans in chains even on memif)
#
# Each sample is charged to one of three parts: `device` (memif's PMD: its transmit copy, the
# frees of the sent chains, the receive of the peer's SACKs), `crc32c` (the SCTP checksum of
# each packet sent: over a region the client reads for the first time, so it also pays the
# payload's trip from memory) and `own` (everything else: the protocol, framing, the poll
# loop). A part's nanoseconds a packet are its share of the samples times the time a packet
# took. On a shared VM the device part swings from run to run (memif's copies cross between
# the two vCPUs, wherever the host put them); the own part is the sender's to cut. Read the
# rounds side by side, not against another day's.
set -euo pipefail
cd "$(dirname "$0")/.."
MTU=${1:-1500}
ROUNDS=${2:-2}
NAME=perf-sender
. benches/perf-lib.sh
# RSIZE=n: both pairs on memif rings of 2^n slots (the goodput bench's 64 at MTU 1500: 6).
ring=${RSIZE:+,rsize=$RSIZE}
# parts FILE PACKETS_PER_S LABEL: the line of a round.
parts() {
    perf report -i "$1" --no-children --sort dso,symbol -F overhead,dso,sym --stdio 2>/dev/null |
        python3 -c '
import sys
pps, label = float(sys.argv[1]), sys.argv[2]
part = {"device": 0.0, "crc32c": 0.0, "own": 0.0}
for line in sys.stdin:
    f = line.split()
    if len(f) < 3 or line.startswith("#") or not f[0].endswith("%"):
        continue
    share, dso, sym = float(f[0][:-1]), f[1], " ".join(f[2:]).lower()
    if "memif" in dso:
        part["device"] += share
    elif "crc" in sym or "sctp_checksum" in sym:
        part["crc32c"] += share
    else:
        part["own"] += share
total = sum(part.values()) or 1
ns = 1e9 / pps
print(f"{label:<10} {pps / 1e6:6.2f} M/s {ns:7.0f} ns | " + "  ".join(
    f"{k} {v / total * ns:5.0f}" for k, v in part.items()))
' "$2" "$3"
}
printf '%-10s %10s %10s | %s\n' sender packets "a packet" "ns a packet, by part"
for round in $(seq 1 "$ROUNDS"); do
    # The DDP pair: server on CPU 0, client on CPU 1, 8 s of 1 MiB tagged writes.
    $BIN $(eal server 0@0 srv$round "$ring") -- --ddp-listen --ip 198.18.0.2 --mtu "$MTU" --json \
        --run-for 20 >"$out/srv" 2>&1 &
    srv=$!
    pids+=("$srv")
    sleep 2
    $BIN $(eal client 0@1 cli$round "$ring") -- --ddp-connect 198.18.0.2 --ip 198.18.0.1 --mtu "$MTU" \
        --run-for 8 --ddp-size 1048576 --ddp-source region --json ${CLIENT_ARGS:-} >"$out/cli" 2>&1 &
    cli=$!
    sleep 3
    record "$cli" "$out/ddp.data"
    [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$out/ddp.data" "$KEEP/ddp$round.data"
    wait "$cli" || true
    kill -INT "$srv" 2>/dev/null || true
    wait "$srv" 2>/dev/null || true
    pps=$(ddp_pps "$out/cli")
    parts "$out/ddp.data" "$pps" "ddp $round"
    # The zero-copy ceiling's sender: txonly's chains into rxplace, CPUs as above.
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
    record "$tx" "$out/tz.data"
    [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$out/tz.data" "$KEEP/txonly$round.data"
    sleep 1
    kill -INT "$tx" "$rx" 2>/dev/null || true
    wait "$tx" "$rx" 2>/dev/null || true
    # The receiver's per-second samples while the sender was profiled (its 5th to 7th).
    pps=$(grep -o '"rx_pps":[0-9]*' "$out/rx" | cut -d: -f2 | sed -n 5,7p | sort -n | sed -n 2p)
    parts "$out/tz.data" "${pps:-1}" "txonly $round"
done
