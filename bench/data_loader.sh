#!/bin/sh
# The data loader's share of a training step on the main job
# (examples/gpt-fortunes.json on 4 ranks, data=2,model=2, as scripts/demo.sh
# runs it), side by side: the fortunes loader and data "tokens" reading the
# same text as a byte-level token file (the same model and batch). Run from
# the repo root, under the bench lock:
#   flock /tmp/tessel-bench.lock bench/data_loader.sh
# Environment: STEPS (60), TESSEL (build/tessel). Prints, per loader, rank
# 0's mean data_ms (filling the batch: metrics.jsonl) and step_ms over the
# steps after the first 5, and their ratio.
B=${TESSEL:-build/tessel}
STEPS=${STEPS:-60}
out=${OUT:-/tmp/tessel-data-loader}
mkdir -p "$out"
grep -m1 'model name' /proc/cpuinfo
grep -m1 'cpu family' /proc/cpuinfo
grep -m1 '^model[[:space:]]' /proc/cpuinfo
"$B" tokenize encode --input /usr/share/games/fortunes --separator % --out "$out/fortunes.tok" || exit 1
export OMPI_MCA_btl=self,vader OMPI_MCA_mpi_yield_when_idle=1
for data in fortunes tokens fortunes tokens; do
  extra=""
  [ $data = tokens ] && extra="--set data=tokens --set token_file=$out/fortunes.tok"
  mpirun --allow-run-as-root --oversubscribe -n 4 "$B" train --config examples/gpt-fortunes.json \
    --mesh data=2,model=2 --threads 1 --steps "$STEPS" --set eval_every=0 --set sample_chars=0 \
    $extra --out "$out/$data" --overwrite >"$out/$data.log" 2>&1 || { echo "FAIL (see $out/$data.log)"; continue; }
  python3 - "$out/$data/metrics.jsonl" $data <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])][5:]
data = sum(r["data_ms"] for r in rows) / len(rows)
step = sum(r["step_ms"] for r in rows) / len(rows)
print(sys.argv[2], "data_ms %.4f step_ms %.1f share %.4f%%" % (data, step, 100 * data / step))
PY
done
