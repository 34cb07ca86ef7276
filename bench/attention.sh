#!/usr/bin/env bash
# Fused against unfused attention (config key `attention`), side by side in
# one run: for each case, the predicted arena of each (`train --dry-run`),
# then ROUNDS alternating `bench step` runs of the two and the median
# ms/step of each and their ratio (unfused / fused: above 1 means fused is
# faster). Cases: examples/gpt-bench.json (context 128, batch 8) and the same
# model at context 2048 (batch 1), each in f32 and bf16, at 2 threads. Prints
# one CSV row per case (bench/results/attention.csv's columns, without the
# date) after the CPU model.
#
# Usage: bench/attention.sh [ROUNDS] [STEPS]
# Hold the machine-wide lock: flock /tmp/tessel-bench.lock bench/attention.sh ...
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
STEPS=${2:-4}
BIN=build/tessel
THREADS=2
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

arena() {  # attention extra-sets... -> arena MiB
  local attention=$1
  shift
  "$BIN" train --config examples/gpt-bench.json --set attention="$attention" "$@" --dry-run |
    awk '$1 == "0" {print $6; exit}'
}
step() {  # attention extra-sets... -> median ms/step
  local attention=$1
  shift
  "$BIN" bench step --config examples/gpt-bench.json --set attention="$attention" "$@" \
    --threads "$THREADS" --steps "$STEPS" --warmup 1 |
    /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["ms_per_step_median"])'
}

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" \
  "(family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | xargs)), load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "commit $(git rev-parse --short HEAD), $ROUNDS rounds of $STEPS steps, $THREADS threads"
echo "case,precision,arena_unfused_mib,arena_fused_mib,arena_ratio,step_unfused_ms,step_fused_ms,step_ratio,rounds_unfused,rounds_fused"
compare() {  # case precision extra-sets...
  local name=$1 precision=$2
  shift 2
  local sets=(--set precision="$precision" "$@")
  local au af
  au=$(arena unfused "${sets[@]}")
  af=$(arena fused "${sets[@]}")
  local u=() f=()
  for ((r = 0; r < ROUNDS; r++)); do
    u+=("$(step unfused "${sets[@]}")")
    f+=("$(step fused "${sets[@]}")")
  done
  local mu mf
  mu=$(printf '%s\n' "${u[@]}" | median)
  mf=$(printf '%s\n' "${f[@]}" | median)
  printf '%s,%s,%s,%s,%.2f,%.1f,%.1f,%.3f,"%s","%s"\n' "$name" "$precision" "$au" "$af" \
    "$(echo "$au / $af" | bc -l)" "$mu" "$mf" "$(echo "$mu / $mf" | bc -l)" "${u[*]}" "${f[*]}"
}
compare gpt-bench f32
compare gpt-bench bf16
compare context2048_batch1 f32 --set context=2048 --set batch=1
compare context2048_batch1 bf16 --set context=2048 --set batch=1
