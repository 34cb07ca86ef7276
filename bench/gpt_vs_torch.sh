#!/usr/bin/env bash
# Tessel vs PyTorch on the same GPT training step, side by side in one run,
# in f32 and in bf16 mixed precision.
#
# Runs `tessel bench step` on examples/gpt-bench.json and its PyTorch twin
# (bench/torch_gpt.py, the same model) alternately, at 1 and 2 threads,
# `ROUNDS` times each, in f32 and in bf16 (Tessel: --set precision=bf16;
# PyTorch: torch.autocast("cpu", torch.bfloat16)), and prints the median
# ms/step of each and the ratios: Tessel vs PyTorch at each precision, and
# Tessel bf16 vs Tessel f32. The CPU model and oneDNN's ISA head the output.
# PyTorch runs in its best environment on this machine: Debian's
# python3-torch over OpenBLAS (pthread build), with the allocator and OpenMP
# allocator settings that help it. OPENBLAS_CORETYPE is chosen from the CPU:
# SkylakeX where AVX-512 exists, else Zen on AMD, else Haswell (SkylakeX
# kernels crash with SIGILL on a CPU without AVX-512). Both sides wait at
# OpenMP barriers the same way: `tessel` sets GOMP_SPINCOUNT=10000 for itself
# (apps/tessel/openmp_wait.h), and PyTorch (libgomp too) is given the same
# value; WAIT="OMP_WAIT_POLICY=PASSIVE" (or any VAR=VALUE) sets another one
# for both.
#
# In bf16 both sides run their GEMMs through oneDNN's bf16 matmul. One more
# run of each with ONEDNN_VERBOSE=1 sums oneDNN's own execution times per
# timed step, and the script prints the ceiling they set: PyTorch's step over
# Tessel's matmul time alone, the Tessel-vs-PyTorch ratio Tessel would reach
# if it did nothing but its GEMMs (Tessel's matmul time taken as its share of
# the verbose run's step, applied to the plain runs' step). (f32 has no such
# line: Tessel's f32 GEMM is its own and PyTorch's is OpenBLAS. Below AVX-512
# Tessel's bf16 runs no oneDNN matmul either, and the line says so instead of
# a ceiling.)
#
# Usage: bench/gpt_vs_torch.sh [ROUNDS] [STEPS]   (SKIP_BUILD=1: use build/ as it is)
# Hold the machine-wide lock: flock /tmp/tessel-bench.lock bench/gpt_vs_torch.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
STEPS=${2:-8}
WAIT=${WAIT:-GOMP_SPINCOUNT=10000}
scripts/install-deps.sh python3-torch libopenblas0-pthread >&2
[ "${SKIP_BUILD:-0}" = 1 ] || scripts/build.sh >&2

if grep -q avx512f /proc/cpuinfo; then coretype=SkylakeX
elif grep -q AuthenticAMD /proc/cpuinfo; then coretype=Zen
else coretype=Haswell; fi

WARMUP=3  # untimed steps before the timed ones, on both sides
torch_run() {  # threads precision [VAR=VALUE] -> the script's output
  local flag=""
  [ "$2" = bf16 ] && flag=--bf16
  env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=$coretype MALLOC_MMAP_THRESHOLD_=1073741824 \
    MALLOC_TRIM_THRESHOLD_=4294967295 "$WAIT" ${3:+"$3"} \
    OMP_NUM_THREADS="$1" OPENBLAS_NUM_THREADS="$1" \
    /usr/bin/python3 bench/torch_gpt.py --threads "$1" --steps "$STEPS" --warmup "$WARMUP" $flag
}
torch_ms() {  # threads precision -> median ms/step
  torch_run "$1" "$2" | sed -n 's/.*median=\([0-9.]*\) ms.*/\1/p'
}
tessel_json() {  # threads precision [VAR=VALUE] -> the bench step JSON line
  env "$WAIT" ${3:+"$3"} build/tessel bench step --config examples/gpt-bench.json --threads "$1" \
    --steps "$STEPS" --warmup "$WARMUP" --set precision="$2"
}
matmul_ms() {  # ONEDNN_VERBOSE output on stdin -> oneDNN matmul ms per timed step
  # Every step runs the same matmuls, so the timed steps' are the last
  # STEPS/(STEPS+WARMUP) of them.
  awk -F, -v steps="$STEPS" -v all=$((STEPS + WARMUP)) '$2 == "exec" && $4 == "matmul" { t[++n] = $NF }
    END { for (i = n - int(n * steps / all) + 1; i <= n; i++) s += t[i]; printf "%.1f", s / steps }'
}
field() { /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)[\"$1\"])"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ratio() { echo "$1 / $2" | bc -l; }

isa=$(tessel_json 1 bf16 | field onednn_isa)
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "AVX-512/AMX flags: $(grep -m1 -o -w -E 'avx512[a-z_0-9]*|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | xargs)," \
  "oneDNN ISA $isa, OPENBLAS_CORETYPE=$coretype, OpenMP wait $WAIT"
for threads in 1 2; do
  declare -A med=()
  for precision in f32 bf16; do
    t_runs=(); p_runs=()
    for ((r = 0; r < ROUNDS; r++)); do
      t_runs+=("$(tessel_json "$threads" "$precision" | field ms_per_step_median)")
      p_runs+=("$(torch_ms "$threads" "$precision")")
    done
    med[t$precision]=$(printf '%s\n' "${t_runs[@]}" | median)
    med[p$precision]=$(printf '%s\n' "${p_runs[@]}" | median)
    printf 'threads=%d %-4s  tessel %.1f ms/step (runs: %s)  pytorch %.1f ms/step (runs: %s)  tessel vs pytorch %.2fx\n' \
      "$threads" "$precision" "${med[t$precision]}" "${t_runs[*]}" "${med[p$precision]}" \
      "${p_runs[*]}" "$(ratio "${med[p$precision]}" "${med[t$precision]}")"
  done
  printf 'threads=%d  tessel bf16 vs tessel f32 %.2fx, pytorch bf16 vs pytorch f32 %.2fx\n' "$threads" \
    "$(ratio "${med[tf32]}" "${med[tbf16]}")" "$(ratio "${med[pf32]}" "${med[pbf16]}")"
  verbose=$(tessel_json "$threads" bf16 ONEDNN_VERBOSE=1)
  t_mm=$(matmul_ms <<< "$verbose")
  t_step=$(grep '^{' <<< "$verbose" | field ms_per_step_median)
  p_mm=$(torch_run "$threads" bf16 ONEDNN_VERBOSE=1 | matmul_ms)
  printf 'threads=%d bf16  oneDNN matmul time: tessel %.1f of its %.1f ms/step, pytorch %.1f ms/step;' \
    "$threads" "$t_mm" "$t_step" "$p_mm"
  # The ceiling takes Tessel's matmul share of its step from the verbose
  # run, where both were timed together, and applies it to the plain runs'
  # step: the machine's speed moves between runs (up to 1.4x within minutes
  # on a shared host), and a share is not moved by it.
  if awk -v t="$t_mm" 'BEGIN { exit !(t > 0) }'; then
    printf ' ceiling for tessel vs pytorch (pytorch step / tessel matmuls) %.2fx\n' \
      "$(ratio "(${med[pbf16]} * $t_step)" "(${med[tbf16]} * $t_mm)")"
  else  # below AVX-512 Tessel's bf16 GEMMs are f32 GEMMs on rounded operands, not oneDNN's
    printf ' no ceiling: tessel ran no oneDNN matmul (bf16 emulated on this CPU)\n'
  fi
done
