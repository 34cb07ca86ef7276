#!/usr/bin/env bash
# Fault benchmark: one long training run under `tessel launch --max-restarts`,
# with a random rank of the job killed (SIGKILL) at a random moment N times.
# Reports, per fault, the detection time (kill -> the launcher sees the job
# end), the restart time (-> the next attempt's first new step), the steps
# lost (steps finished past the checkpoint it resumed from), and at the end
# the launcher's ETTR (training time / wall time).
#
# Run from the repo root, under the bench lock:
#   flock /tmp/tessel-bench.lock bench/faults.sh [-n FAULTS] [-r RANKS] [-m MESH]
#       [-c CONFIG] [-s STEPS] [-e CHECKPOINT_EVERY] [-g MEAN_GAP_S] [-o OUT]
# Defaults: 20 faults, 2 ranks, mesh data=2, examples/gpt-tiny.json, 3000
# steps, a checkpoint every 20 steps, a fault every 10 s of training on
# average (uniform in [0.5, 1.5] x the gap, counted from the attempt's first
# new step; the first after the first checkpoint). Give enough steps for the
# faults: once they are done the run trains to the end, and the launcher
# prints its ETTR. If the run ends first, fewer faults are reported.
#
# Only processes this script started are killed, by pid: the rank processes
# are found as descendants of the launcher it runs. Needs python3.
set -euo pipefail

faults=20 ranks=2 mesh=data=2 config=examples/gpt-tiny.json steps=3000 every=20 gap=10
out=/tmp/tessel-faults
while getopts "n:r:m:c:s:e:g:o:" opt; do
  case $opt in
    n) faults=$OPTARG ;; r) ranks=$OPTARG ;; m) mesh=$OPTARG ;; c) config=$OPTARG ;;
    s) steps=$OPTARG ;; e) every=$OPTARG ;; g) gap=$OPTARG ;; o) out=$OPTARG ;;
    *) sed -n '2,22p' "$0"; exit 2 ;;
  esac
done
B=${TESSEL:-build/tessel}
[ -x "$B" ] || { echo "faults.sh: no executable $B (build first, or set TESSEL)" >&2; exit 2; }
rm -rf "$out" && mkdir -p "$out"
log=$out/launch.log metrics=$out/run/metrics.jsonl

now() { date +%s.%N; }
# The newest step in metrics.jsonl (-1 if none yet).
last_step() {
  [ -s "$metrics" ] || { echo -1; return; }
  tail -n 1 "$metrics" | python3 -c 'import json,sys
try: print(json.loads(sys.stdin.read())["step"])
except Exception: print(-1)'
}
# Every descendant of pid $1, then those that are training ranks.
descendants() {
  local kids
  kids=$(ps -o pid= --ppid "$1" 2>/dev/null || true)
  for k in $kids; do echo "$k"; descendants "$k"; done
}
# Rank processes: a `tessel` process whose arguments run `train` (not mpirun, not the launcher).
ranks_of() {
  for p in $(descendants "$1"); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = tessel ] || continue
    args=$(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null || true)
    case "$args" in *"tessel train "*) echo "$p" ;; esac
  done
}
# True once metrics.jsonl was written after time $1 and holds step $2 or later.
new_step_after() {
  python3 - "$metrics" "$1" "$2" <<'PY'
import json, os, sys
path, t, k = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
try:
    if os.stat(path).st_mtime <= t: sys.exit(1)
    last = open(path).read().strip().splitlines()[-1]
    sys.exit(0 if json.loads(last)["step"] >= k else 1)
except Exception:
    sys.exit(1)
PY
}
lines() { wc -l < "$log"; }
# Waits until the launch log has more than $1 lines and one of them matches $2;
# prints that line's timestamp. Fails after $3 seconds.
wait_line() {
  local from=$1 pattern=$2 limit=$3 t0
  t0=$(now)
  while :; do
    hit=$(tail -n +"$((from + 1))" "$log" | grep -m1 -E "$pattern" || true)
    [ -n "$hit" ] && { echo "${hit%% *}"; return 0; }
    python3 -c "import sys; sys.exit(0 if $(now) - $t0 < $limit else 1)" || return 1
    sleep 0.05
  done
}

# The launcher, its stdout line-buffered and every line timestamped.
(stdbuf -oL "$B" launch -n "$ranks" --max-restarts "$faults" -- train --config "$config" \
   --mesh "$mesh" --out "$out/run" --steps "$steps" --checkpoint-every "$every" --keep 2 2>&1 |
   while IFS= read -r line; do printf '%s %s\n' "$(now)" "$line"; done > "$log") &
job=$!
t_start=$(now)

results=$out/faults.tsv
printf 'fault\trank_pid\tkilled_at_step\tresumed_from\tsteps_lost\tdetect_s\trestart_s\n' > "$results"
for i in $(seq 1 "$faults"); do
  # Wait for training to be under way in this attempt (a step after the last restart).
  start=$(last_step)
  [ "$i" -gt 1 ] || start=$every
  while kill -0 "$job" 2>/dev/null && [ "$(last_step)" -le "$start" ]; do sleep 0.05; done
  sleep "$(python3 -c "import random; print(round(random.uniform(0.5, 1.5) * $gap, 2))")"
  mapfile -t pids < <(ranks_of "$job")
  [ "${#pids[@]}" -gt 0 ] || { echo "faults.sh: no rank processes found (the run ended?)" >&2; break; }
  victim=${pids[$((RANDOM % ${#pids[@]}))]}
  mark=$(lines)
  t_kill=$(now)
  kill -9 "$victim" 2>/dev/null || true
  # Read after the kill: the ranks run in lockstep, so no step completes past
  # it (reading before would lag by the reader's own start-up time).
  at_step=$(last_step)
  t_fail=$(wait_line "$mark" "attempt [0-9]+ failed" 120) || { echo "no failure seen" >&2; break; }
  kept=$(tail -n +"$((mark + 1))" "$log" | grep -m1 -oE "newest checkpoint at step [0-9]+" |
         grep -oE "[0-9]+$")
  # The next attempt's first step past the checkpoint.
  t_step=""
  for _ in $(seq 3000); do
    if new_step_after "$t_fail" "$kept"; then t_step=$(now); break; fi
    sleep 0.05
  done
  lost=$((at_step + 1 - kept))
  [ "$lost" -ge 0 ] || lost=0
  python3 -c "print('$i\t$victim\t$at_step\t$kept\t$lost\t%.2f\t%.2f' % ($t_fail - $t_kill, $t_step - $t_fail))" >> "$results"
done

# Done injecting: the run trains to its end; the launcher prints its ETTR.
wait "$job" || true
echo "wall $(python3 -c "print(round($(now) - $t_start, 1))") s"
column -t "$results"
python3 - "$results" "$log" <<'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
if rows:
    col = lambda k: [float(r[k]) for r in rows]
    print(f"faults {len(rows)}: detection median {statistics.median(col(5)):.2f} s "
          f"(max {max(col(5)):.2f}), restart median {statistics.median(col(6)):.2f} s "
          f"(max {max(col(6)):.2f}), steps lost mean {statistics.mean(col(4)):.1f} "
          f"(total {int(sum(col(4)))})")
for line in open(sys.argv[2]):
    if "ETTR" in line or "giving up" in line:
        print(line.split(" ", 1)[1].rstrip())
EOF
