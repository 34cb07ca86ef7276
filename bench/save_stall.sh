#!/bin/sh
# Run from the repo root: flock /tmp/tessel-bench.lock bench/save_stall.sh
# Save stall sync vs async, side by side (alternating), on one process.
B=${TESSEL:-build/tessel}; mkdir -p /tmp/ft
for mode in sync async sync async; do
  flag=""; [ $mode = sync ] && flag="--sync-save"
  rm -rf /tmp/ft/bench_$mode
  $B train --config examples/gpt-bench.json --steps 12 --threads 2 --checkpoint-every 3 --keep 2 $flag --out /tmp/ft/bench_$mode >/dev/null 2>&1 || echo FAIL
  python3 -c "
import json,statistics
L=[json.loads(l) for l in open('/tmp/ft/bench_$mode/metrics.jsonl')]
st=[l['save_stall_ms'] for l in L if 'save_stall_ms' in l]
sm=statistics.median([l['step_ms'] for l in L[1:]])
print('$mode', 'stalls_ms', [round(x,1) for x in st], 'median_step_ms', round(sm,1))"
done
