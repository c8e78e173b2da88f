#!/usr/bin/env bash
# Instructions per DDP segment on the send path, by stage, counted by callgrind (the same count
# every run, whatever else the machine does): ddp-tx-bench's `gather` path (tagged writes from a
# registered region, cut, framed and checksummed as the runtime's zero-copy sender does) over N
# one-segment writes of each size. The companion of callgrind-stages.sh (the receive path).
#
#   benches/callgrind-tx-stages.sh [SIZES] [WRITES] [SEGMENTS]
#       e.g. benches/callgrind-tx-stages.sh 64,1404,8904 2048
#            benches/callgrind-tx-stages.sh 1404 32 64     (32 writes of 64 segments: a bulk sender)
#
# Stages are inclusive counts of the functions that do them; "total" is everything the timed
# loop did, per segment (with SEGMENTS 1, the default, per write).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/callgrind-lib.sh
SIZES=${1:-64,1404,8904}
WRITES=${2:-2048}
SEGMENTS=${3:-1}
command -v valgrind >/dev/null || { echo "callgrind-tx-stages: valgrind is not installed" >&2; exit 1; }
cargo build --release -q -p ddpdk-benches --bin ddp-tx-bench
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-6s %8s | %6s %6s %6s %6s %6s | %6s\n' size segments ddp sctp crc sack rest total
for size in ${SIZES//,/ }; do
    bytes=$((size * WRITES * SEGMENTS))
    valgrind --tool=callgrind --toggle-collect='ddp_tx_bench::run*' \
        --callgrind-out-file="$out/cg.$size" \
        target/release/ddp-tx-bench --sizes "$size" --rounds 1 --bytes "$bytes" --paths gather --segments "$SEGMENTS" \
        >/dev/null 2>&1
    cg_annotate "$out/cg.$size"
    ann="$out/cg.$size.ann"
    inc() { cg_inc "$ann" "$1"; }
    all=$(cg_total "$ann")
    pump=$(inc 'ddpdk_control::conn::send::<impl ddpdk_control::conn::Connection>::pump_ready')
    sctp=$(inc 'ddpdk_dataplane::sctp::assoc::Association::poll_transmit')
    # The CRC32c of each packet over its header and region spans (the SACKs' own checksums are
    # in `sack` and `rest`).
    crc=$(inc 'ddp_tx_bench::checksum')
    sack=$(inc 'ddpdk_control::conn::Connection::handle_checked')
    rest=$((all - pump - sctp - crc - sack))
    per() { cg_per "$1" $((WRITES * SEGMENTS)); }
    printf '%-6s %8s | %s %s %s %s %s | %s\n' "$size" $((WRITES * SEGMENTS)) "$(per "$pump")" \
        "$(per "$sctp")" "$(per "$crc")" "$(per "$sack")" "$(per "$rest")" "$(per "$all")"
done
cat <<'EOF'
ddp: the connection's pump (DDP
segmentation, the session, the SCTP send queue); sctp: poll_transmit (chunks framed into
packets, the send window); crc: each packet's CRC32c over its header and region spans;
sack: the SACKs handled (their CRC32c checked, acknowledgement, cwnd, the writes'
completions); rest: the work requests posted and their completions
polled, the bench's SACKs made; total: all of the timed loop, per write.
EOF
