#!/usr/bin/env bash
# Where the fused attention's time goes in a training step, before and after
# a change: `bench step --breakdown` (the program timed instruction by
# instruction) of examples/gpt-bench.json (context 128, batch 8) and the same
# model at context 2048 (batch 1), f32 and bf16, 2 threads, alternating
# BEFORE_BIN (a `tessel` built from an earlier commit) and build/tessel for
# ROUNDS rounds. Prints one CSV row per case: the medians of the step and of
# the attention and attention_grad instructions' ms per step (all layers),
# before and after, and every round's figures.
# AFTER_SETS: more `--set key=value` options for the after runs only (one
# binary against itself with a setting changed: BEFORE_BIN=build/tessel
# AFTER_SETS="--set attention_dropout=0.1"). CASES: the cases to run, as
# case/precision words (default all four).
#
# Usage: BEFORE_BIN=path bench/attention_breakdown.sh [ROUNDS] [STEPS]
# Hold the machine-wide lock: flock /tmp/tessel-bench.lock bench/attention_breakdown.sh ...
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
STEPS=${2:-4}
: "${BEFORE_BIN:?set BEFORE_BIN to a tessel binary built from the commit to compare with}"
BIN=build/tessel
read -r -a AFTER <<<"${AFTER_SETS:-}"
CASES=${CASES:-gpt-bench/f32 gpt-bench/bf16 context2048_batch1/f32 context2048_batch1/bf16}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

run() {  # binary sets... -> "step_ms attention_ms attention_grad_ms"
  local bin=$1
  shift
  "$bin" bench step --config examples/gpt-bench.json "$@" --threads 2 --steps "$STEPS" \
    --warmup 1 --breakdown | tail -1 | /usr/bin/python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
kinds = {k["kind"]: k["ms"] for k in r["breakdown"]["kinds"]}
print("%.1f %.2f %.2f" % (r["ms_per_step_median"], kinds.get("attention", 0), kinds.get("attention_grad", 0)))'
}

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" \
  "(family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | xargs)), load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "commit $(git rev-parse --short HEAD), $ROUNDS rounds of $STEPS steps, 2 threads," \
  "after sets: ${AFTER_SETS:-none}"
echo "case,precision,step_before_ms,step_after_ms,attention_before_ms,attention_after_ms,attention_grad_before_ms,attention_grad_after_ms,rounds_before,rounds_after"
compare() {  # case precision extra-sets...
  local name=$1 precision=$2
  shift 2
  [[ " $CASES " == *" $name/$precision "* ]] || return 0
  local sets=(--set precision="$precision" "$@") b=() a=()
  for ((r = 0; r < ROUNDS; r++)); do
    b+=("$(run "$BEFORE_BIN" "${sets[@]}")")
    a+=("$(run "$BIN" "${sets[@]}" "${AFTER[@]}")")
  done
  col() { printf '%s\n' "$@" | awk -v c="$COL" '{print $c}' | median; }
  local out=()
  for COL in 1 2 3; do out+=("$(col "${b[@]}")" "$(col "${a[@]}")"); done
  local IFS=';'
  printf '%s,%s,%s,%s,%s,%s,%s,%s,"%s","%s"\n' "$name" "$precision" "${out[@]}" "${b[*]}" "${a[*]}"
}
compare gpt-bench f32
compare gpt-bench bf16
compare context2048_batch1 f32 --set context=2048 --set batch=1
compare context2048_batch1 bf16 --set context=2048 --set batch=1
