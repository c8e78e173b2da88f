#!/usr/bin/env bash
# Instructions per DDP segment on the receive path, by stage, counted by callgrind (the same
# count every run, whatever else the machine does): ddp-rx-bench's `conn` path (the ULP API's
# Connection, as a data core runs it) over N one-segment packets of each size.
#
#   benches/callgrind-stages.sh [SIZES] [PACKETS]     e.g. benches/callgrind-stages.sh 64,1438,8938 4096
#
# Stages are the inclusive counts of the functions that do them (nested stages are subtracted
# where one calls the other); "total" is everything the path did, less making the association.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/callgrind-lib.sh
SIZES=${1:-64,1438,8938}
PACKETS=${2:-4096}
command -v valgrind >/dev/null || { echo "callgrind-stages: valgrind is not installed" >&2; exit 1; }
cargo build --release -q -p ddpdk-benches --bin ddp-rx-bench
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-6s %8s | %6s %6s %6s %6s %9s | %6s\n' size packets crc proto copy sack fused total
for size in ${SIZES//,/ }; do
    bytes=$((size * PACKETS))
    valgrind --tool=callgrind --toggle-collect='ddp_rx_bench::through_connection*' \
        --callgrind-out-file="$out/cg.$size" \
        target/release/ddp-rx-bench --sizes "$size" --rounds 1 --bytes "$bytes" >"$out/out.$size" 2>&1
    cg_annotate "$out/cg.$size"
    ann="$out/cg.$size.ann"
    inc() { cg_inc "$ann" "$1"; }
    all=$(cg_total "$ann")
    # The handshake is not the per-segment path: the association built from its cookie, and
    # the cookie's own MAC (sealed at the INIT, opened at the COOKIE ECHO: its key is derived
    # per period since session 53, a few HMACs that would add ~13 to each of 2048 segments).
    setup=$(($(inc 'ddpdk_dataplane::sctp::assoc::Association::from_cookie') +
        $(inc 'ddpdk_dataplane::sctp::cookie::Cookie::open') +
        $(inc 'ddpdk_dataplane::sctp::cookie::Cookie::seal')))
    crc=$(inc 'ddpdk_dataplane::wire::crc32c::verify')
    sack=$(inc 'ddpdk_dataplane::sctp::assoc::Association::poll_transmit')
    # The copies (libc's memcpy/memmove; on this path nearly all of it is the placement, and a
    # `rep movsb` counts one instruction per byte moved under callgrind).
    copy=$({ grep -E '__mem(move|cpy)_[a-z0-9_]+ \[' "$ann" || true; } |
        awk '{gsub(",", "", $1); s += $1} END {print s + 0}')
    total=$((all - setup))
    # The protocol: SCTP, the session, DDP's checks, delivery and routing, the connection's
    # bookkeeping. The fused receive path (`Connection::fused_tagged`) does them in one inlined
    # pass, so they are no longer separate functions to count apart.
    proto=$((total - crc - sack - copy))
    # The segments the fused path took, of those received, from the bench's own count.
    fused=$(grep -oE 'fused [0-9]+/[0-9]+' "$out/out.$size" | head -1 | cut -d' ' -f2)
    per() { cg_per "$1" "$PACKETS"; }
    printf '%-6s %8s | %s %s %s %s %9s | %s\n' "$size" "$PACKETS" "$(per "$crc")" \
        "$(per "$proto")" "$(per "$copy")" "$(per "$sack")" "${fused:-?}" "$(per "$total")"
done
cat <<'EOF'
crc: CRC32c verify; proto: the protocol (SCTP, the session, DDP's checks and delivery, the
routing and the connection's bookkeeping, taken in one pass by the fused receive path);
copy: the payload copy into the region (libc memcpy; callgrind counts each byte of a
`rep movsb` as an instruction); sack: poll_transmit (a SACK every second packet, its CRC);
fused: segments the fused path took, of those received (ConnStats::fused_segments);
total: all of it, per segment.
EOF
