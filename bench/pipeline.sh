#!/usr/bin/env bash
# Pipeline schedules on pipe=2 (2 ranks x 1 thread), side by side in one run:
# for each schedule and micro-batch count, the measured bubble fraction
# (mean over ranks, steps after the first) next to the schedule's theory
# (unit costs F = BI = BW = 1), the median step time, and throughput relative
# to data=2 on the same model and batch; then each schedule's predicted peak
# memory (dry run) next to the measured peak RSS of rank 0.
#
# Usage: bench/pipeline.sh [STEPS] [CONFIG]
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-6}
CONFIG=${2:-examples/gpt-pipeline.json}
export OMPI_MCA_btl=self,vader OMPI_MCA_mpi_yield_when_idle=1
MPIRUN="mpirun --allow-run-as-root --oversubscribe -n 2"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
run() {  # name mesh extra-args...
  local name=$1 mesh=$2
  shift 2
  $MPIRUN build/tessel train --config "$CONFIG" --threads 1 --steps "$STEPS" --mesh "$mesh" \
    --out "$OUT/$name" --overwrite "$@" >"$OUT/$name.log" 2>&1 || { cat "$OUT/$name.log"; exit 1; }
}
summarise() {  # name -> "median_ms bubble theory rss_mib tracked_mib"
  /usr/bin/python3 - "$OUT/$1" <<'PY'
import json, statistics, sys
d = sys.argv[1]
steps = [json.loads(l) for l in open(d + "/metrics.jsonl")][1:]
s = json.load(open(d + "/summary.json"))
p = s.get("pipeline")
ms = statistics.median(x["step_ms"] for x in steps)
if p:
    b = statistics.mean(p["measured_bubble"]); t = statistics.mean(p["theoretical_bubble"])
else:
    b = t = float("nan")
r0 = s["memory_per_rank"][0]
print(f'{ms:.1f} {b:.3f} {t:.3f} {r0["peak_rss_bytes"] / 1048576:.1f} '
      f'{r0["measured_peak_tracked_bytes"] / 1048576:.2f}')
PY
}
run data2 data=2
read -r dp_ms _ <<<"$(summarise data2)"
printf 'data=2: %.1f ms/step\n' "$dp_ms"
printf '%-12s %3s %10s %9s %9s %14s\n' schedule m ms/step bubble theory "vs data=2"
for schedule in gpipe 1f1b interleaved zb-h1; do
  for m in 2 4 8 16; do
    extra=(--schedule "$schedule" --microbatches "$m")
    if [ "$schedule" = interleaved ]; then extra+=(--chunks 2); fi
    run "$schedule-$m" pipe=2 "${extra[@]}"
    read -r ms bubble theory _ <<<"$(summarise "$schedule-$m")"
    printf '%-12s %3d %10.1f %9.3f %9.3f %13.2fx\n' "$schedule" "$m" "$ms" "$bubble" "$theory" \
      "$(echo "$dp_ms / $ms" | bc -l)"
  done
done
echo
echo "memory at m=8 (rank 0): predicted total (dry run) vs measured peak of tensor storage, and peak RSS"
for schedule in gpipe 1f1b interleaved zb-h1; do
  extra=(--schedule "$schedule" --microbatches 8)
  if [ "$schedule" = interleaved ]; then extra+=(--chunks 2); fi
  predicted=$(build/tessel train --config "$CONFIG" --mesh pipe=2 "${extra[@]}" --dry-run |
    awk '$1 == "0" {print $(NF-1)}')
  read -r _ _ _ rss tracked <<<"$(summarise "$schedule-8")"
  printf '%-12s predicted %8s MiB   measured %8s MiB   peak RSS %8s MiB\n' "$schedule" \
    "$predicted" "$tracked" "$rss"
done
