#!/usr/bin/env bash
# Where a tagged write's round trip goes, leg by leg (issue 13 item 4): the latency pair of
# ddp-latency-bench (two processes over net_memif, one outstanding write of SIZE bytes, the
# completion the end) built with the `trace` feature, which timestamps fixed points of the
# data path in both processes with the TSC (`dataplane/src/trace.rs`); the two processes'
# marks, on one machine's synchronized TSC, are merged into one timeline a write.
#
#   benches/latency-trace.sh [SIZE] [SECS]       64 bytes, 3 seconds
#   CLIENT_ARGS='--ddp-op read' benches/latency-trace.sh      an RDMA Read's legs instead: the
#                                                 server's reply is the Read Response
#   SERVER_ARGS='--region-bytes 4096' ...         options for the server (here: one slot, so
#                                                 every write lands on the same, cached, bytes)
#   KEEP=DIR ...                                  the marks and both outputs kept in DIR
#   MEMIF_OPTS=,rsize=6 ...                       more memif options for both ends (here: a
#                                                 ring of 64 slots)
#
# Prints each leg's median and 90th percentile in nanoseconds over the run's writes (the first
# fifth left out), the client's own p50 of the traced run, then every mark of the commonest
# sequence of marks a write makes (C client, S server), at its median time from the post. A
# mark costs ~20-25 ns here (an RDTSC and an atomic add), so each leg carries one mark's cost
# and the traced p50 exceeds an untraced run's (ddp-latency-bench) by ~10 of them: compare
# legs, and builds by the same legs.
# The build goes to target/trace, so target/release keeps the untraced binary.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-64}
SECS=${2:-3}
CARGO_TARGET_DIR=target/trace cargo build --release -q -p ddpdk-cli --bin ddpdk \
    --features ddpdk-dataplane/trace
BIN=target/trace/release/ddpdk
out=${KEEP:-$(mktemp -d)}; mkdir -p "$out"
server=
cleanup() {
    [ -n "$server" ] && kill -INT "$server" 2>/dev/null && wait "$server" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$out"
}
trap cleanup EXIT
eal() { echo "--no-huge -m 1024 --no-pci --log-level=*:error --file-prefix=ddpdk-lt$$$1"; }
sock=$out/memif.sock
# shellcheck disable=SC2046 # the EAL arguments are words
DDPDK_TRACE=$out/server.marks $BIN --lcores 0@0 $(eal s) \
    --vdev="net_memif0,role=server,id=0,socket=$sock${MEMIF_OPTS:-}" -- \
    --ddp-listen ${SERVER_ARGS:-} --ip 198.18.0.2 --run-for $((SECS + 60)) >"$out/server" 2>&1 &
server=$!
for _ in $(seq 100); do
    grep -q '(listening)' "$out/server" 2>/dev/null && break
    sleep 0.1
done
# shellcheck disable=SC2046
DDPDK_TRACE=$out/client.marks $BIN --lcores 0@1 $(eal c) \
    --vdev="net_memif0,role=client,id=0,socket=$sock${MEMIF_OPTS:-}" -- \
    --ddp-connect 198.18.0.2 --ip 198.18.0.1 --run-for "$SECS" --ddp-size "$SIZE" \
    --ddp-window 1 --json ${CLIENT_ARGS:-} >"$out/client" 2>&1
# A server whose client shut down may have ended already.
kill -INT "$server" 2>/dev/null || true
wait "$server" || true
server=
p50=$(grep -o '"latency_us":{[^}]*}' "$out/client" | grep -o '"p50":[0-9.]*' | cut -d: -f2)
python3 - "$out/client.marks" "$out/server.marks" "${p50:-?}" <<'PY'
import bisect, sys

POST, APPLIED, TX, RX, HANDLED, SEEN = 1, 2, 3, 4, 5, 6

hz = []
def load(path):
    marks = {}
    with open(path) as f:
        for line in f:
            if line.startswith('# tsc_hz '):
                hz.append(float(line.split()[2]))
                continue
            t, p = line.split()
            marks.setdefault(int(p), []).append(int(t))
    return marks

c, s = load(sys.argv[1]), load(sys.argv[2])
def after(points, t):
    i = bisect.bisect_right(points, t)
    return points[i] if i < len(points) else None

legs = [
    ("client: post -> applied (the op: checks, queued with SCTP)", []),
    ("client: applied -> sent (framing, CRC32c, the device's transmit)", []),
    ("wire: client sent -> server received (memif, the server's poll turn)", []),
    ("server: received -> handled (parse, CRC32c, SCTP, DDP checks, placement)", []),
    ("server: handled -> SACK sent (the SACK framed and transmitted)", []),
    ("wire: server sent -> client received", []),
    ("client: received -> handled (the SACK)", []),
    ("client: handled -> seen (the completion up to the ULP)", []),
    ("round trip, traced", []),
]
posts = c.get(POST, [])
for p, nxt in zip(posts[len(posts) // 5:], posts[len(posts) // 5 + 1:]):
    seq = [p]
    for side, point in ((c, APPLIED), (c, TX), (s, RX), (s, HANDLED), (s, TX), (c, RX),
                        (c, HANDLED), (c, SEEN)):
        t = after(side.get(point, []), seq[-1])
        if t is None or t > nxt:
            break
        seq.append(t)
    else:
        for (name, v), a, b in zip(legs, seq, seq[1:]):
            v.append(b - a)
        legs[-1][1].append(seq[-1] - seq[0])
if not legs[-1][1]:
    sys.exit("latency-trace: no complete round trip in the marks")
mhz = sum(hz) / len(hz) / 1e6
def q(v, f):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * f))] * 1000 / mhz
print(f"{len(legs[-1][1])} writes; TSC at {mhz:.0f} MHz; the client's own p50, traced: {sys.argv[3]} us")
print(f"{'p50 ns':>7} {'p90 ns':>7}  leg")
for name, v in legs:
    print(f"{q(v, .5):7.0f} {q(v, .9):7.0f}  {name}")

# Every mark between one post and the next, both processes merged, for the commonest sequence.
names = {POST: 'post', APPLIED: 'applied', TX: 'tx_burst took', RX: 'rx_burst gave',
         HANDLED: 'handled', SEEN: 'seen'}
merged = sorted([(t, 'C', p) for p, ts in c.items() for t in ts]
                + [(t, 'S', p) for p, ts in s.items() for t in ts])
at_post = [i for i, (_, side, p) in enumerate(merged) if side == 'C' and p == POST]
seqs = {}
skip = len(at_post) // 5
for a, b in zip(at_post[skip:], at_post[skip + 1:]):
    key = tuple((side, p) for _, side, p in merged[a:b])
    seqs.setdefault(key, []).append([t - merged[a][0] for t, _, _ in merged[a:b]])
key, runs = max(seqs.items(), key=lambda kv: len(kv[1]))
print(f"the commonest sequence of marks ({len(runs)} of {len(at_post) - skip - 1} writes), median ns from the post:")
prev = 0
for (side, p), col in zip(key, zip(*runs)):
    m = sorted(col)[len(col) // 2] * 1000 / mhz
    print(f"{m:7.0f} {m - prev:+6.0f}  {side} {names.get(p, p)}")
    prev = m
PY
