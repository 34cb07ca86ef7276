#!/usr/bin/env bash
# Parallel scaling on the GPT benchmark model, side by side in one run:
# 1 rank x 1 thread, data=2 (2 ranks x 1 thread), model=2 (2 ranks x 1 thread),
# alternating for ROUNDS rounds. Prints each run's median ms/step, data
# parallel scaling efficiency (tokens/s per rank vs one rank) and tensor
# parallel step time with the share of it spent in collectives.
#
# Usage: bench/scaling.sh [ROUNDS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
STEPS=${2:-5}
export OMPI_MCA_btl=self,vader OMPI_MCA_mpi_yield_when_idle=1
MPIRUN="mpirun --allow-run-as-root --oversubscribe"
bench() {  # ranks mesh -> "ms comm_fraction"
  local cmd="build/tessel bench step --config examples/gpt-bench.json --threads 1 --steps $STEPS"
  if [ "$1" -gt 1 ]; then cmd="$MPIRUN -n $1 $cmd --mesh $2"; fi
  $cmd | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["ms_per_step_median"], d["comm_fraction"])'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
one=(); dp=(); tp=(); tpc=(); dpc=()
for ((r = 0; r < ROUNDS; r++)); do
  read -r ms _ <<<"$(bench 1 "")"; one+=("$ms")
  read -r ms c <<<"$(bench 2 data=2)"; dp+=("$ms"); dpc+=("$c")
  read -r ms c <<<"$(bench 2 model=2)"; tp+=("$ms"); tpc+=("$c")
done
m1=$(printf '%s\n' "${one[@]}" | median)
md=$(printf '%s\n' "${dp[@]}" | median)
mt=$(printf '%s\n' "${tp[@]}" | median)
cd_=$(printf '%s\n' "${dpc[@]}" | median)
ct=$(printf '%s\n' "${tpc[@]}" | median)
printf '1 rank:  %.1f ms/step (runs: %s)\n' "$m1" "${one[*]}"
printf 'data=2:  %.1f ms/step (runs: %s), collectives %.1f%% of step, scaling efficiency %.1f%%\n' \
  "$md" "${dp[*]}" "$(echo "$cd_ * 100" | bc -l)" "$(echo "$m1 / $md / 2 * 100" | bc -l)"
printf 'model=2: %.1f ms/step (runs: %s), collectives %.1f%% of step, speedup %.2fx\n' \
  "$mt" "${tp[*]}" "$(echo "$ct * 100" | bc -l)" "$(echo "$m1 / $mt" | bc -l)"
