#!/usr/bin/env bash
# run.sh of the GPU bundle (scripts/gpu-check.sh copies this file into
# gpu-bundle/): on the GPU machine, prints the GPU, driver and CUDA version,
# runs tessel_cuda_tests with its JSON report in $OUT (default: out/ beside
# this file), and checks that `tessel train --device cuda` refuses to train
# before any compute. Exits non-zero when a test fails, when the tests
# skipped (no usable GPU: the probe's error is in the log), or when a
# library is missing. TESSEL_ALLOW_SKIP=1 accepts skips (to try the bundle
# on a machine without a GPU). Runs in well under 8 minutes.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
# cuBLASLt (CUDA 13) from the machine's toolkit, else from python3's
# NVIDIA wheels (nvidia-cublas), which PyTorch's images carry.
cuda_lib=""
wheel_dirs=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null || true)
for d in ${CUDA_HOME:+$CUDA_HOME/lib64} /usr/local/cuda/lib64 /usr/local/cuda-13*/lib64 \
  /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu \
  $(for w in $wheel_dirs; do echo "$w"/nvidia/cublas/lib "$w"/nvidia/cu13/lib; done); do
  if [ -e "$d/libcublasLt.so.13" ]; then
    cuda_lib=$d
    break
  fi
done
export LD_LIBRARY_PATH="$here/lib${cuda_lib:+:$cuda_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "== run.sh: bundle $here, cuBLASLt from ${cuda_lib:-nowhere found}"
nvidia-smi || echo "run.sh: nvidia-smi failed (no driver or no GPU?)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null || true
missing=$(ldd "$here/tessel_cuda_tests" | awk '/not found/ {print $1}')
if [ -n "$missing" ]; then
  echo "run.sh: missing shared libraries: $missing" >&2
  exit 2
fi
log=$out/tessel_cuda_tests.log
timeout 420 "$here/tessel_cuda_tests" --gtest_output="json:$out/tessel_cuda_tests.json" 2>&1 |
  tee "$log"
rc=${PIPESTATUS[0]}
echo "== run.sh: tessel_cuda_tests exited $rc"
if [ "$rc" -eq 0 ] && grep -q '^\[  SKIPPED \]' "$log" && [ "${TESSEL_ALLOW_SKIP:-0}" != 1 ]; then
  echo "run.sh: tests skipped (no usable GPU?): see $log" >&2
  rc=3
fi
# The trainer refuses CUDA before compute, naming the device.
"$here/tessel" train --config "$here/gpt-tiny.json" --device cuda --steps 1 --out "$out/train-refusal" \
  >"$out/train-refusal.log" 2>&1
train_rc=$?
echo "== run.sh: tessel train --device cuda exited $train_rc:"
tail -3 "$out/train-refusal.log"
if [ "$train_rc" -eq 0 ] || ! grep -q "device cuda" "$out/train-refusal.log"; then
  echo "run.sh: tessel train --device cuda did not refuse by name" >&2
  [ "$rc" -ne 0 ] || rc=4
fi
exit "$rc"
