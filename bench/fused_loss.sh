#!/usr/bin/env bash
# Fused against unfused loss (config key `loss`, docs/memory.md), side by
# side in one run: gpt-bench's model (batch 8, context 128) with a
# vocabulary of VOCAB (default GPT-2's 50304), in f32 and bf16, at 2
# threads: ROUNDS alternating `bench step` runs of the two, the median
# ms/step of each, their ratio (fused / unfused: above 1 means fused is
# slower) and the arena each plans. Prints one CSV row per precision
# (bench/results/fused_loss.csv's columns, without the date) after the CPU model.
#
# Usage: bench/fused_loss.sh [ROUNDS] [VOCAB]
# Hold the machine-wide lock: flock /tmp/tessel-bench.lock bench/fused_loss.sh ...
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
VOCAB=${2:-50304}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
step() {  # loss precision -> "ms arena_mib"
  build/tessel bench step --config examples/gpt-bench.json --set data=synthetic \
    --set vocab="$VOCAB" --set loss="$1" --set precision="$2" --steps 3 --warmup 1 --threads 2 |
    tail -1 | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["ms_per_step_median"], d["arena_mib"])'
}
lscpu | awk -F: '/Model name|CPU family|^Model:/ {gsub(/^ +/, "", $2); printf "%s; ", $2} END {print ""}'
echo "commit,vocab,precision,rounds,unfused_ms,fused_ms,fused_over_unfused,unfused_arena_mib,fused_arena_mib,load"
for precision in f32 bf16; do
  unfused=() fused=()
  for _ in $(seq "$ROUNDS"); do
    read -r ms a_unfused <<<"$(step unfused "$precision")"
    unfused+=("$ms")
    read -r ms a_fused <<<"$(step fused "$precision")"
    fused+=("$ms")
  done
  u=$(printf '%s\n' "${unfused[@]}" | median)
  f=$(printf '%s\n' "${fused[@]}" | median)
  printf '%s,%s,%s,%s,%.1f,%.1f,%.2f,%.1f,%.1f,%s\n' "$(git rev-parse --short HEAD)" "$VOCAB" \
    "$precision" "$ROUNDS" "$u" "$f" "$(echo "$f / $u" | bc -l)" "$a_unfused" "$a_fused" \
    "$(cut -d' ' -f1 /proc/loadavg)"
done
