#!/usr/bin/env bash
# Staged collectives against Open MPI on the buffers (config key
# `collectives`, docs/gpu.md "Collectives on device memory"), side by side
# in one run: gpt-bench (10.8M parameters, batch 8, context 128), f32, on
# 2 ranks x 1 thread, for data=2 (the gradient buckets' all-reduce) and
# pipe=2 (1F1B, 4 micro-batches: activation and gradient transfers):
# ROUNDS alternating runs of STEPS steps each way, the median step time
# (steps after the first) of each and their ratio (staged / mpi: above 1
# means staging is slower). On the CPU the staging copies are memory
# copies, so this measures what the copies and the pieces' progress cost,
# not a PCIe link.
# Prints the CPU model, then CSV rows (bench/results/staged.csv's columns,
# without the date).
#
# Usage: bench/staged.sh [ROUNDS] [STEPS]
# Hold the machine-wide lock: flock /tmp/tessel-bench.lock bench/staged.sh ...
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
STEPS=${2:-6}
export OMPI_MCA_btl=self,vader OMPI_MCA_mpi_yield_when_idle=1
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
step() {  # collectives mesh extra... -> median ms per step after the first
  local collectives=$1 mesh=$2
  shift 2
  mpirun --allow-run-as-root --oversubscribe -n 2 build/tessel train \
    --config examples/gpt-bench.json --set data=synthetic --set collectives="$collectives" \
    --threads 1 --steps "$STEPS" --mesh "$mesh" --out "$OUT/run" --overwrite "$@" \
    >"$OUT/log" 2>&1 || { cat "$OUT/log"; exit 1; }
  python3 -c 'import json,statistics,sys
steps = [json.loads(l) for l in open(sys.argv[1])][1:]
print(statistics.median(s["step_ms"] for s in steps))' "$OUT/run/metrics.jsonl"
}
lscpu | awk -F: '/Model name|CPU family|^Model:/ {gsub(/^ +/, "", $2); printf "%s; ", $2} END {print ""}'
echo "commit,layout,rounds,mpi_ms,staged_ms,staged_over_mpi,load"
for layout in data2 pipe2; do
  args=(data=2)
  [ "$layout" = pipe2 ] && args=(pipe=2 --schedule 1f1b --microbatches 4)
  mpi=() staged=()
  for _ in $(seq "$ROUNDS"); do
    mpi+=("$(step mpi "${args[@]}")")
    staged+=("$(step staged "${args[@]}")")
  done
  m=$(printf '%s\n' "${mpi[@]}" | median)
  s=$(printf '%s\n' "${staged[@]}" | median)
  printf '%s,%s,%s,%.1f,%.1f,%.3f,%s\n' "$(git rev-parse --short HEAD)" "$layout" "$ROUNDS" \
    "$m" "$s" "$(echo "$s / $m" | bc -l)" "$(cut -d' ' -f1 /proc/loadavg)"
done
