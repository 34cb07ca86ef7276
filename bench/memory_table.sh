#!/usr/bin/env bash
# Per-rank memory and step time of the GPT benchmark model (examples/gpt-bench.json)
# under ZeRO 0-3 x recompute none/blocks on data=2 and data=4, and the deepest
# GPT of that width that fits a fixed --memory-limit under each setting.
#
# Table 1: one short run per setting (STEPS steps, 1 evaluation batch, 1
# thread per rank): the largest per-rank predicted peak of tensor storage
# (`train --dry-run`'s total, also in summary.json), the largest measured peak
# (AlignedBuffer's high-water mark), the largest peak RSS, and the median
# ms/step of the steps after the first. data=4 runs 4 ranks on however many
# cores the machine has (oversubscribed on a 2-core VM), so its step times
# measure contention, not scaling.
# Table 2: for each setting, the largest n_layer (d_model and the rest as in
# the benchmark config) whose `--dry-run --memory-limit LIMIT` passes on
# every rank (doubling, then bisection; no training).
#
# Usage: bench/memory_table.sh [STEPS] [LIMIT]     (defaults: 4 1GiB)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-4}
LIMIT=${2:-1GiB}
CONFIG=examples/gpt-bench.json
export OMPI_MCA_btl=self,vader OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=1
MPIRUN="mpirun --allow-run-as-root --oversubscribe"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

echo "Command: bench/memory_table.sh $STEPS $LIMIT ($(date +%F))"
echo
echo "| mesh | zero | recompute | predicted peak MiB | measured peak MiB | measured / predicted | peak RSS MiB | ms/step |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for mesh in data=2 data=4; do
  ranks=${mesh#data=}
  for zero in 0 1 2 3; do
    for recompute in none blocks; do
      dir="$OUT/$mesh-$zero-$recompute"
      $MPIRUN -n "$ranks" build/tessel train --config "$CONFIG" --mesh "$mesh" --zero "$zero" \
        --recompute "$recompute" --steps "$STEPS" --threads 1 --set eval_batches=1 \
        --out "$dir" --overwrite >"$dir.log" 2>&1 || { echo "run failed: $dir.log" >&2; cat "$dir.log" >&2; exit 1; }
      /usr/bin/python3 - "$dir" "$mesh" "$zero" "$recompute" <<'EOF'
import json, statistics, sys
d, mesh, zero, recompute = sys.argv[1:]
s = json.load(open(d + "/summary.json"))
ranks = s["memory_per_rank"]
mib = 1048576.0
pred = max(r["predicted_bytes"]["total"] for r in ranks)
meas = max(r["measured_peak_tracked_bytes"] for r in ranks)
rss = max(r["peak_rss_bytes"] for r in ranks)
steps = [json.loads(l)["step_ms"] for l in open(d + "/metrics.jsonl")][1:]
print(f"| {mesh} | {zero} | {recompute} | {pred / mib:.2f} | {meas / mib:.2f} | "
      f"{meas / pred:.4f} | {rss / mib:.1f} | {statistics.median(steps):.0f} |")
EOF
    done
  done
done

fits() {  # mesh zero recompute n_layer -> exit status of the dry run under LIMIT
  build/tessel train --config "$CONFIG" --mesh "$1" --zero "$2" --recompute "$3" \
    --set "n_layer=$4" --memory-limit "$LIMIT" --dry-run >/dev/null 2>&1
}
echo
echo "Largest n_layer (d_model 384, 6 heads, context 128, batch 8) that fits --memory-limit $LIMIT per rank (--dry-run):"
echo
echo "| mesh | zero | recompute | n_layer | parameters (M) |"
echo "| --- | --- | --- | --- | --- |"
for mesh in data=2 data=4; do
  for zero in 0 1 2 3; do
    for recompute in none blocks; do
      # Double until it does not fit, then bisect (probes that do not fit are
      # the slow ones: the limit check predicts every alternative setting).
      lo=0 hi=4
      while ((hi <= 512)) && fits "$mesh" "$zero" "$recompute" "$hi"; do lo=$hi hi=$((hi * 2)); done
      while ((hi - lo > 1)); do
        mid=$(((lo + hi) / 2))
        if fits "$mesh" "$zero" "$recompute" "$mid"; then lo=$mid; else hi=$mid; fi
      done
      # 12 d^2 + 12 d per block, embeddings (vocab 256 + context 128) x d, final norm 2 d.
      params=$(echo "($lo * (12 * 384 ^ 2 + 12 * 384) + (256 + 128) * 384 + 2 * 384) / 10 ^ 6" | bc -l)
      printf '| %s | %s | %s | %s | %.1f |\n' "$mesh" "$zero" "$recompute" "$lo" "$params"
    done
  done
done
