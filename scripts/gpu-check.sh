#!/usr/bin/env bash
# The prepared GPU check (docs/gpu.md): run HERE, on the build machine (no
# GPU needed). Builds Tessel Release with the CUDA backend for a portable
# CPU target (-march=x86-64-v3) into build-gpu/, then bundles into
# gpu-bundle/ (ignored by git):
#   tessel_cuda_tests, tessel   the binaries (stripped)
#   lib/                        every shared library they need that a bare
#                               CUDA machine may lack: oneDNN (libdnnl.so.2,
#                               with libOpenCL), Open MPI's, hwloc, libevent,
#                               libgomp, libstdc++, libgcc_s, zlib, libudev,
#                               and libcudart (small); never libc's family, the
#                               driver (libcuda) or cuBLASLt (over 500 MB: the
#                               GPU machine's CUDA 13 toolkit provides it)
#   run.sh                      what the GPU machine runs (scripts/gpu-run.sh)
#   gpt-tiny.json               a config for run.sh's `tessel train --device cuda`
#   gpt2-124m.json, torch_gpt.py  GPT-2 124M step times, Tessel against PyTorch
# and prints the bundle's size (it must stay under 64 MiB).
# On the GPU machine: `gpu-bundle/run.sh` (OUT=dir for the JSON report).
# Options: JOBS (default 2), TESSEL_GPU_BUILD_DIR (default build-gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TESSEL_GPU_BUILD_DIR:-build-gpu}
bundle=gpu-bundle
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTESSEL_CUDA=ON -DTESSEL_WERROR=ON \
  -DTESSEL_MARCH=x86-64-v3 "${launcher[@]}" >/dev/null
cmake --build "$build" -j "${JOBS:-2}" --target tessel_cuda_tests tessel_cli

rm -rf "$bundle"
mkdir -p "$bundle/lib"
cp "$build/tessel_cuda_tests" "$build/tessel" "$bundle/"
strip --strip-unneeded "$bundle/tessel_cuda_tests" "$bundle/tessel"
# Libraries by ldd, resolved here; the C library's family, the dynamic
# loader, the driver and cuBLASLt are the GPU machine's own.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libresolv|libcuda\.so|libcublas)'
for lib in $(ldd "$build/tessel_cuda_tests" "$build/tessel" | awk '$3 ~ /^\// {print $3}' | sort -u); do
  name=$(basename "$lib")
  [[ $name =~ $skip ]] && continue
  cp -L "$lib" "$bundle/lib/$name"
done
cp scripts/gpu-run.sh "$bundle/run.sh"
cp examples/gpt-tiny.json "$bundle/"  # the trainer's refusal is checked with it
cp examples/gpt2-124m.json bench/torch_gpt.py "$bundle/"
chmod +x "$bundle/run.sh"
missing=$(ldd "$build/tessel_cuda_tests" | awk '/not found/ {print $1}')
[ -z "$missing" ] || { echo "gpu-check: unresolved here: $missing" >&2; exit 1; }
du -sh --apparent-size "$bundle"
ls -la "$bundle" "$bundle/lib"
size=$(du -sb --apparent-size "$bundle" | cut -f1)
if [ "$size" -ge $((64 << 20)) ]; then
  echo "gpu-check: the bundle is $size bytes, over 64 MiB" >&2
  exit 1
fi
echo "gpu-check: $bundle is ready ($size bytes); on a GPU machine run $bundle/run.sh"
