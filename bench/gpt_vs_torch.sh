#!/usr/bin/env bash
# Tessel vs PyTorch on the same GPT training step, side by side in one run.
#
# Runs `tessel bench step` on examples/gpt-bench.json and the PyTorch baseline
# (../shared/baselines/torch_gpt_bench.py, the same model) alternately, at 1
# and 2 threads, `ROUNDS` times each, and prints the median ms/step of each
# and their ratio. PyTorch runs in its best environment on this machine:
# Debian's python3-torch over OpenBLAS (pthread build), with the allocator
# and OpenMP settings that help it. OPENBLAS_CORETYPE is chosen from the CPU:
# SkylakeX where AVX-512 exists, else Zen on AMD, else Haswell (SkylakeX
# kernels crash with SIGILL on a CPU without AVX-512).
#
# Usage: bench/gpt_vs_torch.sh [ROUNDS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
STEPS=${2:-8}
BASELINE=${BASELINE:-../shared/baselines/torch_gpt_bench.py}
scripts/install-deps.sh python3-torch libopenblas0-pthread >&2
scripts/build.sh >&2

if grep -q avx512f /proc/cpuinfo; then coretype=SkylakeX
elif grep -q AuthenticAMD /proc/cpuinfo; then coretype=Zen
else coretype=Haswell; fi

torch_ms() {  # threads -> median ms/step
  env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=$coretype MALLOC_MMAP_THRESHOLD_=1073741824 \
    MALLOC_TRIM_THRESHOLD_=4294967295 OMP_WAIT_POLICY=PASSIVE \
    OMP_NUM_THREADS=$1 OPENBLAS_NUM_THREADS=$1 \
    /usr/bin/python3 "$BASELINE" --model gpt --threads "$1" --steps "$STEPS" |
    sed -n 's/.*median=\([0-9.]*\) ms.*/\1/p'
}
tessel_ms() {  # threads -> median ms/step
  build/tessel bench step --config examples/gpt-bench.json --threads "$1" --steps "$STEPS" |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["ms_per_step_median"])'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), OPENBLAS_CORETYPE=$coretype"
for threads in 1 2; do
  t_runs=(); p_runs=()
  for ((r = 0; r < ROUNDS; r++)); do
    t_runs+=("$(tessel_ms "$threads")")
    p_runs+=("$(torch_ms "$threads")")
  done
  t=$(printf '%s\n' "${t_runs[@]}" | median)
  p=$(printf '%s\n' "${p_runs[@]}" | median)
  printf 'threads=%d  tessel %.1f ms/step (runs: %s)  pytorch %.1f ms/step (runs: %s)  speedup %.2fx\n' \
    "$threads" "$t" "${t_runs[*]}" "$p" "${p_runs[*]}" "$(echo "$p / $t" | bc -l)"
done
