#!/usr/bin/env bash
# Instructions per DDP segment on the send path, by stage, counted by callgrind (the same count
# every run, whatever else the machine does): ddp-tx-bench's `gather` path (tagged writes from a
# registered region, cut into packets and handed to the runtime's transmit side, `xmit::Tx`,
# which frames, checksums and chains them as a data core does) over N one-segment writes of each
# size, to a sink device. The companion of callgrind-stages.sh (the receive path).
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
printf '%-6s %8s | %6s %6s %6s %6s %6s %6s %6s | %6s\n' size segments ddp sctp crc tx port sack rest total
for size in ${SIZES//,/ }; do
    bytes=$((size * WRITES * SEGMENTS))
    valgrind --tool=callgrind --toggle-collect='ddp_tx_bench::run' \
        --callgrind-out-file="$out/cg.$size" \
        target/release/ddp-tx-bench --sizes "$size" --rounds 1 --bytes "$bytes" --paths gather --segments "$SEGMENTS" \
        >/dev/null 2>&1
    cg_annotate "$out/cg.$size"
    ann="$out/cg.$size.ann"
    inc() { cg_inc "$ann" "$1"; }
    all=$(cg_total "$ann")
    pump=$(inc 'ddpdk_control::conn::send::<impl ddpdk_control::conn::Connection>::pump_ready')
    sctp=$(inc 'ddpdk_dataplane::sctp::assoc::Association::poll_transmit')
    # The CRC32c of each packet over its header and region spans, or over the one copied buffer
    # of a small packet (the SACKs' own checksums are in `sack` and `rest`).
    crc=$(($(inc 'ddpdk_control::xmit::sctp_checksum_pieces') + $(inc 'ddpdk_dataplane::wire::crc32c::fill')))
    # The sink device's own work (heap buffers made and freed, frames counted), all of it called
    # from the transmit side.
    port=0
    for f in alloc_bulk attach_region attach_region_in tx_burst; do
        port=$((port + $(inc "<ddpdk_benches::sink::SinkPort as ddpdk_dataplane::port::Port>::$f")))
    done
    for f in chain resize; do
        port=$((port + $(inc "<ddpdk_benches::sink::SinkBuf as ddpdk_dataplane::port::PacketBuf>::$f")))
    done
    tx=$(($(inc 'ddp_tx_bench::transmit') + $(inc 'ddp_tx_bench::flush') - crc - port))
    sack=$(inc 'ddp_tx_bench::sack_in')
    rest=$((all - pump - sctp - crc - tx - port - sack))
    per() { cg_per "$1" $((WRITES * SEGMENTS)); }
    printf '%-6s %8s | %s %s %s %s %s %s %s | %s\n' "$size" $((WRITES * SEGMENTS)) "$(per "$pump")" \
        "$(per "$sctp")" "$(per "$crc")" "$(per "$tx")" "$(per "$port")" "$(per "$sack")" \
        "$(per "$rest")" "$(per "$all")"
done
cat <<'EOF'
ddp: the connection's pump (DDP
segmentation, the session, the SCTP send queue); sctp: poll_transmit (chunks framed into
packets, the send window); crc: each packet's CRC32c over its header and region spans;
tx: the transmit side (the frame's link and IP headers through the neighbour table, the chain
or the small packet's copy, the burst) less its CRC32c and the device; port: the sink device
(heap buffers, not DPDK's: a stand-in, not a figure of the real one);
sack: the SACKs handled (their CRC32c checked, acknowledgement, cwnd, the writes'
completions); rest: the work requests posted and their completions
polled, the bench's SACKs made; total: all of the timed loop, per write.
EOF
