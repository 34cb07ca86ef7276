#!/usr/bin/env bash
# Tessel's fused attention kernels alone (build/tessel_kernel_bench,
# bench/attention_bench.cc) against PyTorch 2's
# scaled_dot_product_attention(is_causal=True) (bench/sdpa_attention.py) on the
# same CPU, side by side in one run: the same shapes (6 heads of 64; batch 8 at
# context 128 as examples/gpt-bench.json, batch 1 at context 2048), f32 and
# bf16, THREADS threads each, ROUNDS alternating rounds, medians. Prints the
# CPU model, then one CSV row per case: forward and forward + backward ms of
# each and torch / tessel (above 1: Tessel faster). Not part of CI.
#
# Tessel's q, k, v are [batch, seq, heads, head] (as the GPT stores them) and
# its outputs f32; PyTorch's are (batch, heads, seq, head) contiguous (SDPA's
# own layout) in the inputs' dtype.
#
# Usage: bench/attention_vs_sdpa.sh [ROUNDS] [ITERS] [THREADS]
#   PYTHON: a Python with torch (default /work/venv-torch/bin/python)
# Hold the machine-wide lock: flock /tmp/tessel-bench.lock bench/attention_vs_sdpa.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
ITERS=${2:-10}
THREADS=${3:-2}
PYTHON=${PYTHON:-/work/venv-torch/bin/python}
BENCH=build/tessel_kernel_bench
# SDPA does not use OpenBLAS; a core type that does not match the CPU can crash it.
unset OPENBLAS_CORETYPE
export OMP_NUM_THREADS=$THREADS
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" \
  "(family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | xargs)), load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "commit $(git rev-parse --short HEAD), torch $("$PYTHON" -c 'import torch; print(torch.__version__)')," \
  "$ROUNDS rounds, $THREADS threads"
for ((r = 0; r < ROUNDS; r++)); do
  "$BENCH" --benchmark_filter='BM_Attention' --benchmark_min_time=0.3 --benchmark_format=json \
    >"$TMP/tessel.$r.json" 2>/dev/null
  "$PYTHON" bench/sdpa_attention.py "$ITERS" "$THREADS" >"$TMP/torch.$r.csv"
done
/usr/bin/python3 - "$TMP" "$ROUNDS" <<'PY'
import csv, json, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
names = {(8, 128): "gpt-bench", (1, 2048): "context2048_batch1"}
tessel, torch = {}, {}
for r in range(rounds):
    for b in json.load(open(f"{tmp}/tessel.{r}.json"))["benchmarks"]:
        kind, batch, seq, bf16 = b["name"].split("/")[:4]
        key = (names[(int(batch), int(seq))], "bf16" if bf16 == "1" else "f32",
               "fwd" if kind == "BM_AttentionForward" else "fwd_bwd")
        tessel.setdefault(key, []).append(b["real_time"])
    for row in csv.reader(open(f"{tmp}/torch.{r}.csv")):
        torch.setdefault((row[0], row[1], "fwd"), []).append(float(row[2]))
        torch.setdefault((row[0], row[1], "fwd_bwd"), []).append(float(row[3]))
print("case,precision,tessel_fwd_ms,torch_fwd_ms,fwd_torch_over_tessel,"
      "tessel_fwd_bwd_ms,torch_fwd_bwd_ms,fwd_bwd_torch_over_tessel")
for case in ("gpt-bench", "context2048_batch1"):
    for precision in ("f32", "bf16"):
        m = {f"{who}_{k}": statistics.median(d[(case, precision, k)])
             for who, d in (("tessel", tessel), ("torch", torch)) for k in ("fwd", "fwd_bwd")}
        print(f"{case},{precision},{m['tessel_fwd']:.2f},{m['torch_fwd']:.2f},"
              f"{m['torch_fwd'] / m['tessel_fwd']:.2f},{m['tessel_fwd_bwd']:.2f},"
              f"{m['torch_fwd_bwd']:.2f},{m['torch_fwd_bwd'] / m['tessel_fwd_bwd']:.2f}")
PY
