#!/usr/bin/env bash
# Offloaded against on the device (config key `offload`, docs/memory.md
# "Offloading the optimizer" and "Offloading activations"), side by side in
# one run: gpt-bench (10.8M parameters, batch 8, context 128), f32, at 2
# threads: ROUNDS alternating `bench step` runs with `offload: WHAT`
# (optimizer, optimizer,weights, activations or optimizer,activations;
# default optimizer) and
# without, the median ms/step of each and their ratio (offloaded / on the
# device: above 1 means the offloaded step is slower). On the CPU the
# offload's copies are memory copies, so this measures what the copies and
# staging cost, not a PCIe link.
# Prints the CPU model, then one CSV row (bench/results/offload.csv's
# columns, without the date).
#
# Usage: bench/offload.sh [ROUNDS] [WHAT]
# Hold the machine-wide lock: flock /tmp/tessel-bench.lock bench/offload.sh ...
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
WHAT=${2:-optimizer}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
step() {  # offload -> ms per step
  build/tessel bench step --config examples/gpt-bench.json --set data=synthetic \
    --offload "$1" --steps 5 --warmup 1 --threads 2 |
    tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["ms_per_step_median"])'
}
lscpu | awk -F: '/Model name|CPU family|^Model:/ {gsub(/^ +/, "", $2); printf "%s; ", $2} END {print ""}'
echo "commit,rounds,device_ms,offloaded_ms,offloaded_over_device,load"
device=() offloaded=()
for _ in $(seq "$ROUNDS"); do
  device+=("$(step none)")
  offloaded+=("$(step "$WHAT")")
done
d=$(printf '%s\n' "${device[@]}" | median)
o=$(printf '%s\n' "${offloaded[@]}" | median)
printf '%s,%s,%.1f,%.1f,%.3f,%s\n' "$(git rev-parse --short HEAD)" "$ROUNDS" "$d" "$o" \
  "$(echo "$o / $d" | bc -l)" "$(cut -d' ' -f1 /proc/loadavg)"
