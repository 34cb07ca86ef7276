#!/usr/bin/env bash
# The planner against real runs on this machine: plans CONFIG for RANKS
# ranks (`tessel plan --json`, every costed plan), runs up to PLANS of them
# spread evenly over the ranking (the top plan always), each for STEPS steps,
# and compares the predicted step time and peak memory with the measured
# ones; prints a table, the mean absolute percentage error, Spearman's rank
# correlation, how far the top plan is from the best measured one, and how
# many peaks match to the byte; writes everything to OUT/validation.json;
# exits 1 past the stated bounds (plan_validation.py's check_bounds).
#
# Noise: the picked plans run in PASSES passes (default 3), the order
# alternating (forward, backward, forward, ...), so a slow spell of the
# machine hits different plans in different passes. Each pass's figure for a
# plan is the median step_ms over the steps after the first WARMUP (default
# 2); the plan's measured time is the median over its passes (the table also
# shows the spread, max / min of the passes - 1). Pass 1 writes OUT/plan-I,
# pass k > 1 OUT/plan-I.pass-k (an older OUT with plan-I only is one pass).
#
# Usage: bench/plan_validation.sh CONFIG RANKS [PLANS=20] [STEPS=10] [OUT=runs/plan-validation]
# Extra `tessel plan` flags (e.g. --threads 2, --profile F) go in $PLAN_FLAGS;
# PASSES and WARMUP in the environment.
# REUSE_MEASURED=DIR runs nothing: it plans again (this binary, $PLAN_FLAGS) and
# compares the new predictions with the runs an earlier validation left in DIR
# (matched by command; plan-only, seconds), so a cost-model change can be
# checked against saved measurements without a quiet machine. Several saved
# runs of the same plans: REUSE_MEASURED="DIR1 DIR2" takes each plan's
# passes from all of them.
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=$1
RANKS=$2
PLANS=${3:-20}
STEPS=${4:-10}
PASSES=${PASSES:-3}
export WARMUP=${WARMUP:-2}
OUT=${5:-runs/plan-validation}
mkdir -p "$OUT"
export OMPI_MCA_btl=self,vader OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# shellcheck disable=SC2086
build/tessel plan --config "$CONFIG" --ranks "$RANKS" --json --top 100000 ${PLAN_FLAGS:-} \
  >"$OUT/plans.json"
if [[ -n ${REUSE_MEASURED:-} ]]; then
  # shellcheck disable=SC2086
  exec /usr/bin/python3 bench/plan_validation.py "$OUT" $REUSE_MEASURED
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
run_plan() {  # INDEX COMMAND DIR
  local index=$1 command=$2 dir=$3 cmd
  rm -rf "$dir"
  cmd=${command/tessel train/build/tessel train}
  cmd=${cmd/mpirun -n/mpirun --allow-run-as-root --oversubscribe -n}
  echo "plan $index: $cmd (-> $dir)"
  # shellcheck disable=SC2086
  $cmd --steps "$STEPS" --set eval_every=0 --set eval_batches=1 --out "$dir" </dev/null >"$dir.log" 2>&1 ||
    { echo "plan $index failed; see $dir.log"; exit 1; }
}
mapfile -t picked <"$OUT/picked.txt"
for ((pass = 1; pass <= PASSES; ++pass)); do
  order=$(seq 0 $((${#picked[@]} - 1)))
  ((pass % 2 == 0)) && order=$(seq $((${#picked[@]} - 1)) -1 0)
  for i in $order; do
    IFS=$'\t' read -r index command <<<"${picked[$i]}"
    dir="$OUT/plan-$index"
    ((pass > 1)) && dir="$dir.pass-$pass"
    run_plan "$index" "$command" "$dir"
  done
done
# Past the stated bounds (MAX_MAPE, MIN_SPEARMAN, MAX_TOP_VS_BEST in the
# environment; docs/planner.md) the script exits 1, after the report.
status=0
/usr/bin/python3 bench/plan_validation.py "$OUT" || status=$?
# The scatter on a page: the top plan's run with every plan's predicted vs measured time.
build/tessel report "$OUT/plan-0" --plan-validation "$OUT/plan_validation.json" \
  --out "$OUT/report.html"
exit "$status"
