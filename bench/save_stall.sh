#!/bin/sh
# Save stall, synchronous vs asynchronous, side by side (alternating, twice
# each), on one process. Run from the repo root, under the bench lock:
#   flock /tmp/tessel-bench.lock bench/save_stall.sh [TRAIN ARGS...]
# Environment: CONFIG (examples/gpt-bench.json), STEPS (12), EVERY (3),
# THREADS (2), TESSEL (build/tessel). Extra arguments go to `tessel train`,
# e.g. a GPT of 101M parameters:
#   STEPS=6 EVERY=2 bench/save_stall.sh --set d_model=1024 --set n_layer=8 \
#     --set n_head=16 --set context=64 --set batch=4
# Prints, per run, the stall of each save (save_stall_ms: the time the
# training loop waited for it) and the median step.
B=${TESSEL:-build/tessel}
CONFIG=${CONFIG:-examples/gpt-bench.json} STEPS=${STEPS:-12} EVERY=${EVERY:-3} THREADS=${THREADS:-2}
out=${OUT:-/tmp/tessel-save-stall}
mkdir -p "$out"
grep -m1 'model name' /proc/cpuinfo
for mode in sync async sync async; do
  flag=""
  [ $mode = sync ] && flag="--sync-save"
  rm -rf "$out/$mode"
  "$B" train --config "$CONFIG" --steps "$STEPS" --threads "$THREADS" --checkpoint-every "$EVERY" \
    --keep 2 $flag --out "$out/$mode" "$@" >"$out/$mode.log" 2>&1 || { echo "FAIL (see $out/$mode.log)"; continue; }
  python3 - "$out/$mode/metrics.jsonl" $mode <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
stalls = [r["save_stall_ms"] for r in rows if "save_stall_ms" in r]
print(sys.argv[2], "stalls_ms", [round(x, 1) for x in stalls],
      "median_step_ms", round(statistics.median(r["step_ms"] for r in rows[1:]), 1))
PY
done
