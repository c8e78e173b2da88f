#!/usr/bin/env bash
# Instructions of a whole `ddpdk` endpoint's poll loop, counted by callgrind (the same count every
# run, whatever else the machine does), for the costs the per-segment scripts do not see: the
# poll turn, posting a write and its completion (issue 13 item 4). Two processes over memif on
# this machine, the client under callgrind, the server native.
#
#   benches/callgrind-endpoint.sh write [SIZE] [SECS]   one outstanding tagged write of SIZE bytes
#                                                       (ddp-latency-bench's client): instructions
#                                                       a write, and its largest parts
#   benches/callgrind-endpoint.sh bulk [SIZE] [SECS]    zero-copy tagged writes of SIZE bytes
#                                                       (default 1 MiB), eight outstanding: the
#                                                       bulk sender of ddp-goodput-bench, bound
#                                                       by its own work under callgrind:
#                                                       instructions a segment sent, and parts
#   benches/callgrind-endpoint.sh receive [MTU] [SECS]  the other end of `bulk`: the server
#                                                       (--ddp-listen) under callgrind, a native
#                                                       zero-copy bulk client (1 MiB writes,
#                                                       eight outstanding): instructions a frame
#                                                       received (its SACKs, the turn and memif
#                                                       included), and parts. The receiver of
#                                                       ddp-goodput-bench, issue 13 item 3
#   benches/callgrind-endpoint.sh idle [SECS]           an association and nothing to send
#                                                       (--reconnect, --idle spin): instructions
#                                                       an idle poll turn
#
# DDPDK_BIN=PATH counts another build (a baseline's) with the same script; PARTS=N lists N parts;
# CLIENT_ARGS='--tx-spans chain' gives the client (write, bulk, idle) more options.
# valgrind does not run AVX-512, so crc-fast takes its SSE path under it: a frame's CRC32c
# counts more here than it executes natively (1 100-odd instructions at MTU 1500).
#
# Compare builds by these counts, not by the client's wall clock (valgrind runs it ~50x
# slower), at the same SECS: a write's count includes the run's set-up divided by its writes
# (the per-function lines are steadier). Under valgrind the TSC clock's calibration can be 0.1 % off, and its watch then
# falls back to the monotonic clock a second in (the client's stderr says so, and so does this
# script): Clock::now then costs ~65 instructions a read instead of ~29. Rerun, or compare by
# function.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-write}
command -v valgrind >/dev/null || { echo "callgrind-endpoint: valgrind is not installed" >&2; exit 1; }
cargo build --release -q -p ddpdk-cli --bin ddpdk
BIN=${DDPDK_BIN:-target/release/ddpdk}
out=$(mktemp -d)
server=
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -rf "$out"
}
trap cleanup EXIT
sock=$out/memif.sock
eal() { echo "--no-huge -m 1024 --no-pci --log-level=*:error --file-prefix=cge$$$1"; }
case $MODE in
write | bulk)
    # One outstanding write (the latency client), or eight of 1 MiB (the bulk sender).
    if [ "$MODE" = write ]; then default=64 window=1; else default=1048576 window=8; fi
    SIZE=${2:-$default}
    SECS=${3:-4}
    toggle='ddpdk_cli::endpoint::Job::client_run*'
    client=(--ddp-connect 198.18.0.2 --ip 198.18.0.1 --run-for "$SECS" --ddp-size "$SIZE"
        --ddp-window "$window" --json)
    lcores=0@1
    ;;
receive)
    MTU=${2:-1500}
    SECS=${3:-4}
    toggle='ddpdk_control::runtime::DataCore*::poll'
    ;;
idle)
    SECS=${2:-4}
    toggle='ddpdk_control::runtime::DataCore*::poll'
    # The data core on a worker lcore of its own (a --reconnect endpoint needs one).
    client=(--reconnect 198.18.0.2 --ip 198.18.0.1 --run-for "$SECS" --idle spin)
    lcores=0@1,1@1
    ;;
*)
    echo "usage: $0 write [SIZE] [SECS] | bulk [SIZE] [SECS] | receive [MTU] [SECS] | idle [SECS]" >&2
    exit 2
    ;;
esac
if [ "$MODE" = receive ]; then
    # The server under callgrind until the native client is done, then told to stop (SIGINT:
    # it reports and exits); its frames received are the unit.
    # shellcheck disable=SC2046 # the EAL arguments are words
    valgrind --tool=callgrind --callgrind-out-file="$out/cg" --toggle-collect="$toggle" \
        ${CALLGRIND_ARGS:-} $BIN --lcores 0@0 $(eal s) \
        --vdev="net_memif0,role=server,id=0,socket=$sock" -- \
        --ddp-listen --ip 198.18.0.2 --run-for $((SECS + 120)) --mtu "$MTU" --json \
        >"$out/server" 2>&1 &
    server=$!
    for _ in $(seq 300); do grep -q '(listening)' "$out/server" 2>/dev/null && break; sleep 0.2; done
    # shellcheck disable=SC2046
    $BIN --lcores 0@1 $(eal c) --vdev="net_memif0,role=client,id=0,socket=$sock" -- \
        --ddp-connect 198.18.0.2 --ip 198.18.0.1 --run-for "$SECS" --ddp-size 1048576 \
        --ddp-window 8 --ddp-source region --mtu "$MTU" --json >"$out/client" 2>&1
    kill -INT "$server" 2>/dev/null
    wait "$server"
    server=
else
    # shellcheck disable=SC2046 # the EAL arguments are words
    $BIN --lcores 0@0 $(eal s) --vdev="net_memif0,role=server,id=0,socket=$sock" -- \
        --ddp-listen --ip 198.18.0.2 --run-for $((SECS + 60)) >"$out/server" 2>&1 &
    server=$!
    sleep 1
    # shellcheck disable=SC2046
    valgrind --tool=callgrind --callgrind-out-file="$out/cg" --toggle-collect="$toggle" \
        ${CALLGRIND_ARGS:-} $BIN --lcores "$lcores" $(eal c) \
        --vdev="net_memif0,role=client,id=0,socket=$sock" -- "${client[@]}" ${CLIENT_ARGS:-} \
        >"$out/client" 2>&1
fi
(cd "$out" && callgrind_annotate --inclusive=yes --threshold=100 --auto=no cg >cg.ann 2>/dev/null)
[ -n "${KEEP_CG:-}" ] && cp "$out/cg" "$KEEP_CG"
(cd "$out" && callgrind_annotate --tree=calling --inclusive=yes --threshold=100 --auto=no cg \
    >cg.tree 2>/dev/null)
total=$(awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}' "$out/cg.ann")
if [ "$MODE" = write ]; then
    n=$(grep -o '"messages":[0-9]*' "$out/client" | head -1 | cut -d: -f2)
    what="a write ($n writes of $SIZE bytes)"
    least=100
elif [ "$MODE" = receive ]; then
    n=$(grep -o '"frames_in":[0-9]*' "$out/server" | head -1 | cut -d: -f2)
    what="a frame received ($n frames at MTU $MTU, $(grep -o '"frames_out":[0-9]*' "$out/server" |
        head -1 | cut -d: -f2) sent)"
    least=10
elif [ "$MODE" = bulk ]; then
    n=$(grep -o '"data_out":[0-9]*' "$out/client" | head -1 | cut -d: -f2)
    what="a segment sent ($n segments, writes of $SIZE bytes)"
    least=10
else
    # One closing answer() a turn.
    n=$(grep -m1 '>.*DataCore<P>::answer (' "$out/cg.tree" | grep -o '([0-9,]*x)' | tr -d '(),x')
    what="an idle turn ($n turns)"
    least=15
fi
[ -n "${n:-}" ] && [ "$n" -gt 0 ] || {
    echo "callgrind-endpoint: no count; the client and the server said:" >&2
    tail -5 "$out/client" "$out/server" >&2
    exit 1
}
echo "instructions $what: $((total / n))"
echo "largest parts, inclusive, per unit:"
# `+ 0`: a field gsub has changed is a string to awk, and would compare with the total as one.
grep -E '\[' "$out/cg.ann" | awk -v n="$n" -v least="$least" -v total="$total" '{gsub(",", "", $1);
    v = $1 + 0; f = $(NF - 1); sub(/^[^:]*:/, "", f); k = split(f, p, "::");
    if (k > 1) f = p[k - 1] "::" p[k];
    if (v / n >= least && v < total + 0) printf "  %6.0f  %s\n", v / n, f}' |
    sort -rn | uniq | head -"${PARTS:-14}"
counted=$out/client
[ "$MODE" = receive ] && counted=$out/server
if grep -q 'follows the monotonic clock' "$counted"; then
    echo "note: the TSC clock was dropped during the run (see the script's header):"
    grep 'follows the monotonic clock' "$counted"
fi
