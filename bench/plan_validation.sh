#!/usr/bin/env bash
# The planner against real runs on this machine: plans CONFIG for RANKS
# ranks (`tessel plan --json`, every costed plan), runs up to PLANS of them
# spread evenly over the ranking (the top plan always), each for STEPS steps,
# and compares the predicted step time and peak memory with the measured
# ones (median step_ms over the steps after the first two; the largest
# rank's measured tensor-storage peak from summary.json). Prints a table, the
# mean absolute percentage error, Spearman's rank correlation, how far the
# top plan is from the best measured one, and how many peaks match to the
# byte; writes everything to OUT/validation.json.
#
# Usage: bench/plan_validation.sh CONFIG RANKS [PLANS=20] [STEPS=8] [OUT=runs/plan-validation]
# Extra `tessel plan` flags (e.g. --threads 2, --profile F) go in $PLAN_FLAGS.
# REUSE_MEASURED=DIR runs nothing: it plans again (this binary, $PLAN_FLAGS) and
# compares the new predictions with the runs an earlier validation left in DIR
# (matched by command; plan-only, seconds), so a cost-model change can be
# checked against saved measurements without a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=$1
RANKS=$2
PLANS=${3:-20}
STEPS=${4:-8}
OUT=${5:-runs/plan-validation}
mkdir -p "$OUT"
export OMPI_MCA_btl=self,vader OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# shellcheck disable=SC2086
build/tessel plan --config "$CONFIG" --ranks "$RANKS" --json --top 100000 ${PLAN_FLAGS:-} \
  >"$OUT/plans.json"
if [[ -n ${REUSE_MEASURED:-} ]]; then
  exec /usr/bin/python3 bench/plan_validation.py "$OUT" "$REUSE_MEASURED"
fi
/usr/bin/python3 - "$OUT" "$PLANS" <<'PY'
import json, sys
out, want = sys.argv[1], int(sys.argv[2])
plans = json.load(open(out + "/plans.json"))["plans"]
n = len(plans)
k = min(want, n)
picked = sorted({round(i * (n - 1) / max(1, k - 1)) for i in range(k)})
with open(out + "/picked.txt", "w") as f:
    for i in picked:
        f.write(f"{i}\t{plans[i]['command']}\n")
PY
while IFS=$'\t' read -r index command; do
  dir="$OUT/plan-$index"
  rm -rf "$dir"
  cmd=${command/tessel train/build/tessel train}
  cmd=${cmd/mpirun -n/mpirun --allow-run-as-root --oversubscribe -n}
  echo "plan $index: $cmd"
  # shellcheck disable=SC2086
  $cmd --steps "$STEPS" --set eval_every=0 --set eval_batches=1 --out "$dir" </dev/null >"$OUT/plan-$index.log" 2>&1 ||
    { echo "plan $index failed; see $OUT/plan-$index.log"; exit 1; }
done <"$OUT/picked.txt"
/usr/bin/python3 bench/plan_validation.py "$OUT"
# The scatter on a page: the top plan's run with every plan's predicted vs measured time.
build/tessel report "$OUT/plan-0" --plan-validation "$OUT/plan_validation.json" \
  --out "$OUT/report.html"
