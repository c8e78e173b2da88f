#!/usr/bin/env bash
# Runs the fuzz targets for a bounded time each and reports what they did (issue 12 item 3).
#
#   dataplane/fuzz/run.sh [--record] [--minimize] SECS [TARGET ...]    (no TARGET: every one)
#
# Each target starts from its corpus kept in the repository (dataplane/fuzz/corpus/TARGET,
# created if missing) plus the seeds made from the captures (seed_corpus.py) and the inputs that
# once crashed it (dataplane/fuzz/regressions/TARGET, kept as found), and grows the corpus.
# Prints one line per target: executions, executions a second, coverage (libFuzzer's cov and
# ft), corpus size, crashes. A crash stops the run with status 1 (its input is in
# dataplane/fuzz/artifacts/TARGET/).
#   --record    appends the figures to dataplane/fuzz/runs.csv and rewrites RELIABILITY.md's
#               fuzzing table from all the runs recorded (executions accumulate per target).
#   --minimize  merges each grown corpus back into its smallest covering set (cargo fuzz cmin),
#               which is what the repository keeps.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
cd "$HERE"
record=0
minimize=0
while [ $# -gt 0 ]; do
  case "$1" in
    --record) record=1; shift ;;
    --minimize) minimize=1; shift ;;
    *) break ;;
  esac
done
secs=${1:?usage: run.sh [--record] [--minimize] SECS [TARGET ...]}
shift
# libFuzzer reads 0 as "no limit"; anything but a positive number is a mistake.
[[ $secs =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: SECS must be a positive number of seconds" >&2; exit 2; }
export RUSTC_BOOTSTRAP=1   # cargo-fuzz's sanitizer flags on the machine's stable toolchain
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
python3 seed_corpus.py
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  list=$(cargo fuzz list)
  mapfile -t targets <<<"$list"
fi
[ -n "${targets[0]:-}" ] || { echo "run.sh: no fuzz targets" >&2; exit 1; }
# The whole-path targets run without AddressSanitizer: the code they drive (dataplane without
# its DPDK port layer, control) compiles under deny/forbid(unsafe_code), so ASan has nothing to
# find there that Rust's own checks do not, and it cost them three quarters of their speed
# (allocation poisoning, quarantine, page clearing): 10^7 executions were out of reach. The
# parser targets keep it. The two builds live in separate target directories.
whole_path=" ddp_conn rdmap_conn sctp_assoc net_interface "
build_flags() {
  if [[ $whole_path == *" $1 "* ]]; then
    echo "-O -s none --target-dir target/nosan"
  else
    echo "-O"
  fi
}
cargo fuzz build -O >/dev/null
status=0
printf '%-14s %12s %10s %7s %7s %7s %8s\n' target executions exec/s cov ft corpus crashes
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "seeds/$t" "artifacts/$t"
  log=$(mktemp)
  crashed=0
  # Grows corpus/$t; reads the seeds too. -print_final_stats gives the execution count.
  # Inputs that once crashed the target (regressions/TARGET) are replayed at every start.
  dirs=("corpus/$t" "seeds/$t")
  [ -d "regressions/$t" ] && dirs+=("regressions/$t")
  read -ra flags <<<"$(build_flags "$t")"
  # cargo fuzz builds the target first (not counted), so time only the fuzzing below.
  cargo fuzz build "${flags[@]}" "$t" >/dev/null 2>&1 || true
  started=$(date +%s)
  if ! cargo fuzz run "${flags[@]}" "$t" "${dirs[@]}" -- -max_total_time="$secs" \
      -print_final_stats=1 >"$log" 2>&1; then
    crashed=1
    status=1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  done_line=$(grep -E '^#[0-9]+.*(DONE|cov:)' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$done_line")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$done_line")
  corpus=$(find "corpus/$t" -type f | wc -l)
  # What it really ran: a crash ends a run early.
  ran=$(( $(date +%s) - started ))
  ran=$(( ran < 1 ? 1 : (ran > secs ? secs : ran) ))
  rate=$(( ${execs:-0} / ran ))
  printf '%-14s %12s %10s %7s %7s %7s %8s\n' "$t" "${execs:-0}" "$rate" "${cov:-?}" \
    "${ft:-?}" "$corpus" "$crashed"
  if [ "$crashed" = 1 ]; then
    echo "== $t crashed; the last lines of its log:" >&2
    tail -40 "$log" >&2
  fi
  if [ "$minimize" = 1 ] && [ "$crashed" = 0 ]; then
    # The seeds join before the merge, so coverage only they reach is kept too (the captures
    # they come from live outside the repository).
    find "seeds/$t" -type f -exec cp -n {} "corpus/$t/" \;
    cargo fuzz cmin "${flags[@]}" "$t" "corpus/$t" >/dev/null 2>&1 || echo "cmin $t failed" >&2
    corpus=$(find "corpus/$t" -type f | wc -l)
  fi
  if [ "$record" = 1 ]; then
    [ -f runs.csv ] || echo "date,target,seconds,executions,cov,ft,corpus,crashes" > runs.csv
    echo "$(date -u +%F),$t,$ran,${execs:-0},${cov:-0},${ft:-0},$corpus,$crashed" >> runs.csv
  fi
  rm -f "$log"
done
if [ "$record" = 1 ]; then
  python3 "$HERE/reliability_table.py"
fi
exit $status
