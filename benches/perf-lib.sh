# shellcheck shell=bash
# What benches/perf-sender.sh and benches/perf-receiver.sh share: the MTU's frame and memif
# buffer, the build, the processes' EAL arguments and clean-up, and the recording. Sourced
# after `NAME` (the script's name, for messages), `MTU` and `ROUNDS` are set.
command -v perf >/dev/null || {
    echo "$NAME: perf is not installed (apt-get install linux-perf)" >&2
    exit 1
}
case $MTU in
# shellcheck disable=SC2034 # frame and header are the sourcing script's
1500) frame=1482 header=78 bsize=2048 ;;
# shellcheck disable=SC2034
9000) frame=8982 header=78 bsize=9216 ;;
*)
    echo "$NAME: MTU 1500 or 9000" >&2
    exit 2
    ;;
esac
cargo build --release -q -p ddpdk-cli --bin ddpdk
BIN=${DDPDK_BIN:-target/release/ddpdk}
out=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$out"
}
trap cleanup EXIT
eal() { # ROLE LCORES PREFIX [DEVARGS]
    echo "--lcores $2 --no-huge -m 1024 --no-pci --log-level=*:error --file-prefix=pf$$$3" \
        "--vdev=net_memif0,role=$1,id=0,socket=$out/memif.sock,bsize=$bsize${4:-}"
}
# record PID FILE: 3 s of the process's samples.
record() {
    perf record -q -e cpu-clock -F 4999 -p "$1" -o "$2" -- sleep 3 >/dev/null 2>&1
}
# ddp_pps CLIENT_LOG: the frames a DDP client sent a second over its run.
ddp_pps() {
    python3 -c '
import json, sys
for line in open(sys.argv[1]):
    if "ddp_goodput" in line:
        g = json.loads(line)["ddp_goodput"]
        print(sum(c["frames_out"] for c in g["cores"]) / g["seconds"])
        break
' "$1"
}
