#!/usr/bin/env bash
# Context parallelism (docs/attention.md, "Context parallelism"), on
# examples/gpt-bench.json at batch 1, f32:
# 1. memory: the longest context (a multiple of 512) whose predicted
#    per-rank peak (`train --dry-run`, the largest rank's total: the plan
#    the run allocates) fits BUDGET_MIB, on 1 rank and on ctx=2 and ctx=4 by
#    all-to-all and by ring (an all-to-all the 6 heads do not allow is
#    reported as such);
# 2. rate: tokens per second per rank on 1 rank at context PER_RANK, on
#    ctx=2 at 2 x PER_RANK by each strategy and on ctx=4 at 4 x PER_RANK by
#    ring (mpirun, 1 thread per rank), and on 1 rank at 2 x PER_RANK (the
#    same model as the ctx=2 runs: its attention per token is twice that at
#    PER_RANK), the median step of STEPS after the first, alternating ROUNDS
#    times. With BEFORE_BIN set (a `tessel` built from an earlier commit,
#    e.g. one without the ring's load balancing), its ring runs on ctx=2
#    and ctx=4 alternate with these (strategy "ring@before");
# 3. with BEFORE_BIN set, the ring's own time: `bench step --breakdown`
#    (rank 0's program instruction by instruction, so a ring op's time
#    includes waiting for the slowest rank) on ctx=2 and ctx=4 by both
#    binaries, alternating ROUNDS times: the attention and attention_grad
#    ops' ms per step, medians.
# Prints the CPU model, then CSV rows.
#
# With ZERO=N the parallel runs shard the model state over the ctx axis
# (`--zero N`, docs/attention.md: FSDP over the context-parallel ranks).
#
# Usage: [ZERO=N] [BEFORE_BIN=path] [RING_OPS_ONLY=1] bench/context_parallel.sh [BUDGET_MIB] [PER_RANK] [STEPS] [ROUNDS]
# (ROUNDS 0: the memory rows only; RING_OPS_ONLY=1, with BEFORE_BIN: part 3 only)
# Hold the machine-wide lock: flock /tmp/tessel-bench.lock bench/context_parallel.sh ...
set -euo pipefail
cd "$(dirname "$0")/.."
BUDGET_MIB=${1:-1024}
PER_RANK=${2:-1024}
STEPS=${3:-4}
ROUNDS=${4:-2}
BIN=$(pwd)/build/tessel
CONFIG=$(pwd)/examples/gpt-bench.json
MPIRUN="mpirun --allow-run-as-root --oversubscribe"
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

parallel_args() {  # ranks strategy -> train options
  [ "$1" = 1 ] && return 0
  echo "--mesh ctx=$1 --layout seq=ctx --set context_parallel=$2${ZERO:+ --zero $ZERO}"
}

peak_mib() {  # ranks strategy context -> the largest rank's predicted total (MiB), or "error"
  # shellcheck disable=SC2046
  "$BIN" train --config "$CONFIG" --set batch=1 --set context="$3" $(parallel_args "$1" "$2") \
    --dry-run 2>/dev/null | awk '
      $1 ~ /^[0-9]+$/ && NF >= 16 {
        v = $(NF - 1) * ($NF == "GiB" ? 1024 : $NF == "KiB" ? 1 / 1024 : $NF == "B" ? 1 / 1048576 : 1)
        if (v > m) m = v
      }
      END {print (m ? m : "error")}'
}

longest() {  # ranks strategy -> the longest context within the budget
  local lo=0 hi=$((512 * 256)) mid p
  while [ $((hi - lo)) -gt 512 ]; do
    mid=$(((lo + hi) / 1024 * 512))
    p=$(peak_mib "$1" "$2" "$mid")
    if [ "$p" = error ]; then echo "error"; return; fi
    if awk -v p="$p" -v b="$BUDGET_MIB" 'BEGIN {exit !(p <= b)}'; then lo=$mid; else hi=$mid; fi
  done
  echo "$lo"
}

binary() {  # strategy -> the binary that runs it
  if [ "${1%@before}" = "$1" ]; then echo "$BIN"; else echo "$BEFORE_BIN"; fi
}

ring_ops_ms() {  # ranks strategy context -> "attention attention_grad" ms per step
  # shellcheck disable=SC2046
  $MPIRUN -n "$1" "$(binary "$2")" bench step --breakdown --config "$CONFIG" --set batch=1 \
    --set context="$3" --threads 1 $(parallel_args "$1" "${2%@before}") --steps "$STEPS" \
    --warmup 1 2>/dev/null | tail -1 | /usr/bin/python3 -c '
import json, sys
kinds = {k["kind"]: k["ms"] for k in json.load(sys.stdin)["breakdown"]["kinds"]}
print("%.1f %.1f" % (kinds["attention"], kinds["attention_grad"]))'
}

step_ms() {  # ranks strategy context -> median ms of steps after the first
  local dir bin strategy=${2%@before}
  bin=$(binary "$2")
  dir=$(mktemp -d)
  # shellcheck disable=SC2046
  $([ "$1" = 1 ] || echo "$MPIRUN -n $1") "$bin" train --config "$CONFIG" --set batch=1 \
    --set context="$3" --set steps=$((STEPS + 1)) --set eval_every=0 --threads 1 \
    $(parallel_args "$1" "$strategy") --out "$dir/out" >/dev/null 2>&1
  /usr/bin/python3 -c '
import json, statistics, sys
steps = [json.loads(l) for l in open(sys.argv[1])][1:]
print(statistics.median(s["step_ms"] for s in steps))' "$dir/out/metrics.jsonl"
  rm -rf "$dir"
}

ring_ops() {  # part 3
  echo "ring_ops: tokens_per_rank,ranks,strategy,context,attention_ms,attention_grad_ms,rounds_attention_ms,rounds_attention_grad_ms"
  declare -A fwd bwd
  ops=("2 ring 2" "2 ring@before 2" "4 ring 4" "4 ring@before 4")
  for _ in $(seq "$ROUNDS"); do
    for c in "${ops[@]}"; do
      set -- $c
      read -r f b <<<"$(ring_ops_ms "$1" "$2" $((PER_RANK * $3)))"
      fwd[$c]+="$f "
      bwd[$c]+="$b "
    done
  done
  for c in "${ops[@]}"; do
    set -- $c
    f=$(echo "${fwd[$c]}" | tr ' ' '\n' | grep . | median)
    b=$(echo "${bwd[$c]}" | tr ' ' '\n' | grep . | median)
    echo "$PER_RANK,$1,$2,$((PER_RANK * $3)),$f,$b,${fwd[$c]% },${bwd[$c]% }"
  done
}

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" \
  "(family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | xargs)), $(nproc) cores," \
  "load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD)"
if [ "${RING_OPS_ONLY:-0}" = 1 ]; then
  [ -n "${BEFORE_BIN:-}" ] || { echo "RING_OPS_ONLY=1 needs BEFORE_BIN" >&2; exit 1; }
  ring_ops
  exit 0
fi
echo "memory (zero ${ZERO:-0} on ctx): budget_mib,ranks,strategy,longest_context,peak_mib_there"
for c in "1 -" "2 all_to_all" "2 ring" "4 all_to_all" "4 ring"; do
  set -- $c
  ctx=$(longest "$1" "$2")
  if [ "$ctx" = error ]; then
    echo "$BUDGET_MIB,$1,$2,refused,"
  else
    echo "$BUDGET_MIB,$1,$2,$ctx,$(peak_mib "$1" "$2" "$ctx")"
  fi
done
[ "$ROUNDS" -gt 0 ] || exit 0
echo "rate: tokens_per_rank,ranks,strategy,context,median_step_ms,tokens_per_s_per_rank,rounds_ms"
declare -A runs
rates=("1 - 1" "2 all_to_all 2" "2 ring 2" "4 ring 4" "1 - 2")
[ -z "${BEFORE_BIN:-}" ] || rates+=("2 ring@before 2" "4 ring@before 4")
for _ in $(seq "$ROUNDS"); do
  for c in "${rates[@]}"; do
    set -- $c
    runs[$c]+="$(step_ms "$1" "$2" $((PER_RANK * $3))) "
  done
done
for c in "${rates[@]}"; do
  set -- $c
  ms=$(echo "${runs[$c]}" | tr ' ' '\n' | grep . | median)
  tokens=$((PER_RANK * $3 / $1))
  echo "$tokens,$1,$2,$((PER_RANK * $3)),$ms,$(awk -v c="$tokens" -v ms="$ms" 'BEGIN {printf "%.1f", c / (ms / 1000)}'),${runs[$c]% }"
done
[ -n "${BEFORE_BIN:-}" ] || exit 0
ring_ops
