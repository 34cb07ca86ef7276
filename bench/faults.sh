#!/usr/bin/env bash
# Fault benchmark: one long run of the main job (scripts/demo.sh's: the GPT of
# examples/gpt-fortunes.json on 4 ranks, data=2,model=2, one thread each)
# under `tessel launch --standby --max-restarts N`, with a random rank of the
# running job killed (SIGKILL) at a random moment N times, a failure every
# GAP seconds of training on average (uniform in [0.5, 1.5] x GAP, counted
# from the attempt's first new step). After the last fault the run trains
# one more GAP, then the launcher is stopped (SIGTERM) and prints its ETTR:
# the training time (steps and evaluations) of the steps a checkpoint kept,
# over the launcher's wall time.
#
# Per fault: detection (kill -> the launcher sees the job end), restart (->
# the next attempt's first new step in metrics.jsonl, as this script's
# polling sees it; under load the polling itself, a python3 start per poll,
# adds up to a second or more), the steps lost (steps finished past the
# checkpoint it resumed from, the killed one included), and rank 0's own
# figure (go -> its first step done). The summary adds the restart from the
# log's own timestamps: the launcher's "failed" line to the next attempt's
# "first step done" line.
#
# Run from the repo root, under the bench lock:
#   flock /tmp/tessel-bench.lock bench/faults.sh [-n FAULTS] [-r RANKS] [-m MESH]
#       [-c CONFIG] [-s STEPS] [-e CHECKPOINT_EVERY] [-g MEAN_GAP_S] [-o OUT] [-x]
# Defaults: 20 faults, 4 ranks, mesh data=2,model=2, examples/gpt-fortunes.json,
# 1000000 steps (the bench stops the run), a checkpoint every 5 steps, a fault
# every 60 s of training; -x restarts cold (no --standby).
#
# Only processes this script started are signalled, by pid: the launcher it
# runs, and ranks of the job that launcher names as running. Needs python3.
set -euo pipefail

faults=20 ranks=4 mesh=data=2,model=2 config=examples/gpt-fortunes.json steps=1000000 every=5
gap=60 standby=--standby out=/tmp/tessel-faults
while getopts "n:r:m:c:s:e:g:o:x" opt; do
  case $opt in
    n) faults=$OPTARG ;; r) ranks=$OPTARG ;; m) mesh=$OPTARG ;; c) config=$OPTARG ;;
    s) steps=$OPTARG ;; e) every=$OPTARG ;; g) gap=$OPTARG ;; o) out=$OPTARG ;; x) standby="" ;;
    *) sed -n '2,24p' "$0"; exit 2 ;;
  esac
done
B=${TESSEL:-build/tessel}
[ -x "$B" ] || { echo "faults.sh: no executable $B (build first, or set TESSEL)" >&2; exit 2; }
rm -rf "$out" && mkdir -p "$out"
log=$out/launch.log metrics=$out/run/metrics.jsonl
# One host, as scripts/demo.sh: shared memory, yield while waiting.
export OMPI_MCA_btl=self,vader OMPI_MCA_mpi_yield_when_idle=1

now() { date +%s.%N; }
# The newest step in metrics.jsonl (-1 if none yet).
last_step() {
  [ -s "$metrics" ] || { echo -1; return; }
  tail -n 1 "$metrics" | python3 -c 'import json,sys
try: print(json.loads(sys.stdin.read())["step"])
except Exception: print(-1)'
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
# The running attempt's mpirun, as the launcher names it.
active_mpirun() {
  grep -oE "launch: attempt [0-9]+ \(from step [0-9]+, mpirun pid [0-9]+\)" "$log" | tail -n 1 |
    grep -oE "[0-9]+\)$" | tr -d ')'
}
# Its rank processes: children of that mpirun running `tessel train`.
ranks_of() {
  for p in $(ps -o pid= --ppid "$1" 2>/dev/null || true); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = tessel ] && echo "$p"
  done
}

# The launcher, every line of its output (and the job's) timestamped.
"$B" launch -n "$ranks" $standby --max-restarts "$faults" -- train --config "$config" \
  --mesh "$mesh" --threads 1 --out "$out/run" --steps "$steps" --checkpoint-every "$every" \
  --keep 2 > >(while IFS= read -r line; do printf '%s %s\n' "$(now)" "$line"; done > "$log") 2>&1 &
launcher=$!
t_start=$(now)

results=$out/faults.tsv
printf 'fault\trank_pid\tkilled_at_step\tresumed_from\tsteps_lost\tdetect_s\trestart_s\tgo_to_step_s\n' \
  > "$results"
for i in $(seq 1 "$faults"); do
  # Wait for training to be under way in this attempt (a step after the last restart).
  start=$(last_step)
  [ "$i" -gt 1 ] || start=$every
  while kill -0 "$launcher" 2>/dev/null && [ "$(last_step)" -le "$start" ]; do sleep 0.05; done
  sleep "$(python3 -c "import random; print(round(random.uniform(0.5, 1.5) * $gap, 2))")"
  mp=$(active_mpirun)
  mapfile -t pids < <(ranks_of "$mp")
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
  for _ in $(seq 6000); do
    if new_step_after "$t_fail" "$kept"; then t_step=$(now); break; fi
    sleep 0.05
  done
  [ -n "$t_step" ] || { echo "faults.sh: no step after the restart" >&2; break; }
  go=$(tail -n +"$((mark + 1))" "$log" | grep -m1 -oE "first step done [0-9.]+ s after the go" |
       grep -oE "[0-9.]+" || echo nan)
  lost=$((at_step + 1 - kept))
  [ "$lost" -ge 0 ] || lost=0
  python3 -c "print('$i\t$victim\t$at_step\t$kept\t$lost\t%.2f\t%.2f\t$go' % ($t_fail - $t_kill, $t_step - $t_fail))" >> "$results"
done

# Done injecting: one more gap of training, then stop the launcher (it
# prints its ETTR over the steps a checkpoint kept).
sleep "$gap"
kill -TERM "$launcher" 2>/dev/null || true
wait "$launcher" || true
sleep 0.5  # the log's last lines
echo "wall $(python3 -c "print(round($(now) - $t_start, 1))") s"
column -t "$results"
python3 - "$results" "$log" "$metrics" <<'EOF'
import json, re, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
steps = [json.loads(l) for l in open(sys.argv[3]) if l.strip()]
ms = sorted(s["step_ms"] for s in steps)
if ms:
    print(f"step time median {ms[len(ms) // 2]:.0f} ms over {len(ms)} steps; "
          f"save stall per periodic save median "
          f"{statistics.median([s['save_stall_ms'] for s in steps if 'save_stall_ms' in s] or [0]):.1f} ms")
if rows:
    col = lambda k: [float(r[k]) for r in rows]
    go = [float(r[7]) for r in rows if r[7] != "nan"]
    print(f"faults {len(rows)}: detection median {statistics.median(col(5)):.2f} s "
          f"(max {max(col(5)):.2f}), restart median {statistics.median(col(6)):.2f} s "
          f"(max {max(col(6)):.2f}), steps lost mean {statistics.mean(col(4)):.1f} "
          f"(total {int(sum(col(4)))})" +
          (f", standby go -> first step median {statistics.median(go):.2f} s" if go else ""))
log = [l.rstrip("\n") for l in open(sys.argv[2])]
stamp = lambda l: float(l.split(" ", 1)[0])
fails = [stamp(l) for l in log if re.search(r"launch: attempt [0-9]+ failed", l)]
firsts = [stamp(l) for l in log if "first step done" in l]
gaps = [min([f for f in firsts if f > t], default=t) - t for t in fails]
if gaps:
    print(f"restart from the log (failed line -> next first-step-done line): median "
          f"{statistics.median(gaps):.2f} s (max {max(gaps):.2f})")
for line in log:
    if "ETTR" in line or "giving up" in line:
        print(line.split(" ", 1)[1].rstrip())
EOF
