#!/usr/bin/env bash
# Step time of this tree against an earlier commit, side by side in one run
# (the "no regression" check of a refactor). Builds the reference commit's
# CLI in a temporary worktree, then alternates the two binaries ROUNDS times
# on each case and prints the median ms/step of each and their ratio
# (reference / this tree: above 1 means this tree is faster):
#   - `bench step` on examples/gpt-bench.json at 1 and 2 threads;
#   - `train` on pipe=2 (2 ranks x 1 thread, 1F1B, 4 micro-batches,
#     examples/gpt-pipeline.json), the median step_ms after the first step;
#   - `train` on data=2 (2 ranks x 1 thread, gpt-bench).
# The CPU model heads the output. Alternating the binaries keeps a noisy,
# shared machine's load from favouring either.
#
# Usage: bench/step_regression.sh REF_COMMIT [ROUNDS] [STEPS]
#   (SKIP_BUILD=1: use build/ as it is; REF_BIN=PATH: the reference's CLI,
#   already built from REF_COMMIT, instead of building it here)
# Hold the machine-wide lock: flock /tmp/tessel-bench.lock bench/step_regression.sh ...
set -euo pipefail
cd "$(dirname "$0")/.."
REF=${1:?usage: bench/step_regression.sh REF_COMMIT [ROUNDS] [STEPS]}
ROUNDS=${2:-5}
STEPS=${3:-6}
[ "${SKIP_BUILD:-0}" = 1 ] || scripts/build.sh >&2

WORK=$(mktemp -d)
trap 'git worktree remove --force "$WORK/ref" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
if [ -n "${REF_BIN:-}" ]; then
  OLD=$REF_BIN  # the reference commit's CLI, built already
else
  git worktree add -q --detach "$WORK/ref" "$REF"
  cmake -S "$WORK/ref" -B "$WORK/ref/build" -DCMAKE_BUILD_TYPE=Release >&2
  cmake --build "$WORK/ref/build" -j "$(nproc)" --target tessel_cli >&2
  OLD=$WORK/ref/build/tessel
fi
NEW=build/tessel

export OMPI_MCA_btl=self,vader OMPI_MCA_mpi_yield_when_idle=1
MPIRUN="mpirun --allow-run-as-root --oversubscribe -n 2"
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

bench_step() {  # binary threads -> median ms/step
  "$1" bench step --config examples/gpt-bench.json --threads "$2" --steps "$STEPS" |
    /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["ms_per_step_median"])'
}
train_step() {  # binary mesh config extra-args... -> median step_ms after the first step
  local bin=$1 mesh=$2 config=$3
  shift 3
  rm -rf "$WORK/run"  # a fresh --out each run (older CLIs have no --overwrite)
  $MPIRUN "$bin" train --config "$config" --threads 1 --steps "$STEPS" --mesh "$mesh" \
    --out "$WORK/run" "$@" >"$WORK/run.log" 2>&1 || { cat "$WORK/run.log" >&2; exit 1; }
  /usr/bin/python3 -c '
import json, statistics, sys
steps = [json.loads(l) for l in open(sys.argv[1])][1:]
print(statistics.median(s["step_ms"] for s in steps))' "$WORK/run/metrics.jsonl"
}
compare() {  # label command-taking-a-binary...
  local label=$1
  shift
  local old=() new=()
  for ((r = 0; r < ROUNDS; r++)); do
    old+=("$("$@" "$OLD")")
    new+=("$("$@" "$NEW")")
  done
  local mo mn
  mo=$(printf '%s\n' "${old[@]}" | median)
  mn=$(printf '%s\n' "${new[@]}" | median)
  printf '%-34s ref %8.1f ms (%s)  this tree %8.1f ms (%s)  ref/this %.3f\n' "$label" "$mo" \
    "${old[*]}" "$mn" "${new[*]}" "$(echo "$mo / $mn" | bc -l)"
}
step1() { bench_step "$1" 1; }
step2() { bench_step "$1" 2; }
pipe2() { train_step "$1" pipe=2 examples/gpt-pipeline.json --schedule 1f1b --microbatches 4; }
data2() { train_step "$1" data=2 examples/gpt-bench.json; }

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" \
  "(family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | xargs)), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "reference $(git rev-parse --short "$REF") vs this tree $(git rev-parse --short HEAD)," \
  "$ROUNDS rounds of $STEPS steps, medians"
compare "bench step, gpt-bench, 1 thread" step1
compare "bench step, gpt-bench, 2 threads" step2
compare "train pipe=2 1f1b m=4, 2x1 thread" pipe2
compare "train data=2, gpt-bench, 2x1 thread" data2
