#!/usr/bin/env bash
# run.sh of the GPU bundle (scripts/gpu-check.sh copies this file into
# gpu-bundle/): on the GPU machine, prints the GPU, driver and CUDA version,
# runs tessel_cuda_tests with its JSON report in $OUT (default: out/ beside
# this file), checks that `tessel train --device cuda` refuses to train
# before any compute unless TESSEL_UNVERIFIED_CUDA=1, then trains gpt-tiny
# on both devices and compares (train.json). Exits non-zero when a test
# fails, when the tests skipped (no usable GPU: the probe's error is in the
# log), when a library is missing, or when a training run fails or
# disagrees. TESSEL_ALLOW_SKIP=1 accepts skips (to try the bundle on a
# machine without a GPU). After a failure, compute-sanitizer's memcheck
# reruns what failed, where the machine has it. Last, GPT-2 124M step times of Tessel and PyTorch
# on the GPU (perf.json), within what is left of 8 minutes.
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
# Without TESSEL_UNVERIFIED_CUDA=1 the trainer refuses CUDA before compute.
env -u TESSEL_UNVERIFIED_CUDA "$here/tessel" train --config "$here/gpt-tiny.json" --device cuda \
  --steps 1 --out "$out/train-refusal" \
  >"$out/train-refusal.log" 2>&1
train_rc=$?
echo "== run.sh: tessel train --device cuda exited $train_rc:"
tail -3 "$out/train-refusal.log"
if [ "$train_rc" -eq 0 ] || ! grep -q "device cuda" "$out/train-refusal.log"; then
  echo "run.sh: tessel train --device cuda did not refuse by name" >&2
  [ "$rc" -ne 0 ] || rc=4
fi

# Training on the GPU (the unverified path, docs/gpu.md): gpt-tiny in f32
# (unfused attention, synthetic tokens) for 20 steps on the CPU and on the
# GPU, the GPU run again, the GPU run stopped at step 10 and resumed, and
# its step-10 checkpoint resumed on the CPU; compared in train.json.
t=$out/train
mkdir -p "$t"
train() {  # NAME DEVICE STEPS [ARGS...]: one run into $t/NAME, logged beside it
  local name=$1 device=$2 steps=$3
  shift 3
  TESSEL_UNVERIFIED_CUDA=1 "$here/tessel" train --config "$here/gpt-tiny.json" \
    --set data=synthetic --set attention=unfused --set eval_every=0 --device "$device" \
    --steps "$steps" --out "$t/$name" "$@" >>"$t/$name.log" 2>&1
}
# A failed run skips the comparison, not the step times below (a GPU's
# minutes are scarce: PyTorch's figures are worth having regardless).
echo "== run.sh: training gpt-tiny on the CPU and the GPU"
trained=0
# The first GPU run's memory as the driver sees it (every 100 ms): beside
# what Tessel allocates (summary.json), the CUDA context and libraries'.
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -lms 100 \
  >"$t/gpu-smi.csv" 2>/dev/null &
smi=$!
train gpu cuda 20
gpu_rc=$?
kill "$smi" 2>/dev/null
if [ "$gpu_rc" -ne 0 ]; then
  tail -5 "$t/gpu.log"
  if grep -q "no usable GPU" "$t/gpu.log" && [ "${TESSEL_ALLOW_SKIP:-0}" = 1 ]; then
    echo "run.sh: no GPU: the training comparison is skipped"
    exit "$rc"
  fi
  echo "run.sh: training on the GPU failed: see $t/gpu.log" >&2
elif train cpu cpu 20 && train gpu2 cuda 20 && train gpu_half cuda 10 --checkpoint-every 10 &&
  train gpu_half cuda 20 --resume auto &&
  train cpu_from_gpu cpu 20 --resume "$t/gpu_half/checkpoints/step-10"; then
  trained=1
else
  echo "run.sh: a training run failed: see $t/*.log" >&2
fi
[ "$trained" = 1 ] || [ "$rc" -ne 0 ] || rc=5
[ "$trained" = 0 ] || python3 - "$t" <<'PY' || { [ "$rc" -ne 0 ] || rc=6; }
import json, os, sys
t = sys.argv[1]
def losses(name):
    return {m["step"]: m["loss"] for m in map(json.loads, open(f"{t}/{name}/metrics.jsonl"))}
cpu, gpu, gpu2, half, cross = map(losses, ["cpu", "gpu", "gpu2", "gpu_half", "cpu_from_gpu"])
def worst(a, b):
    return max(abs(a[s] - b[s]) / abs(b[s]) for s in a)
checks = [
    {"check": "GPU against CPU, losses of 20 steps", "max_rel": worst(gpu, cpu), "limit": 1e-5},
    {"check": "GPU run twice, bitwise", "ok": gpu == gpu2},
    {"check": "GPU resumed at step 10, bitwise", "ok": half == gpu},
    {"check": "GPU checkpoint resumed on the CPU, steps 10-19", "max_rel": worst(cross, cpu),
     "limit": 1e-5},
]
for c in checks:
    c.setdefault("ok", c.get("max_rel", 1) <= c.get("limit", 0))
    print("== run.sh:", json.dumps(c))
# The driver's peak for the run's process, less what Tessel counted on the device.
smi = open(f"{t}/gpu-smi.csv").read().splitlines() if os.path.exists(f"{t}/gpu-smi.csv") else []
used = [float(f[1]) for f in (l.split(",") for l in smi) if len(f) == 2 and f[1].strip().isdigit()]
tessel = json.load(open(f"{t}/gpu/summary.json"))["memory_per_rank"][0]["measured_peak_device_bytes"]
memory = {"driver_peak_mib": max(used, default=None), "tessel_device_mib": tessel / 2**20}
if used:
    memory["context_and_libraries_mib"] = max(used) - tessel / 2**20
print("== run.sh: GPU memory", json.dumps(memory))
json.dump({"checks": checks, "steps": {"cpu": cpu, "gpu": gpu}, "memory": memory},
          open(f"{t}.json", "w"), indent=1)
sys.exit(0 if all(c["ok"] for c in checks) else 1)
PY

# When the tests or the GPU training failed: the failed tests (every test
# when the report is missing: a crash) and one GPU training step again under
# compute-sanitizer's memcheck (out-of-bounds and misaligned accesses, CUDA
# API errors), where the machine has it (Firecracker machines do, gVisor
# ones do not): sanitizer/*.log. Diagnosis only; it does not change rc.
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null |
  head -1)
if [ "$rc" -ne 0 ] && [ -n "$sanitizer" ]; then
  s=$out/sanitizer
  mkdir -p "$s"
  failed=$(python3 - "$out/tessel_cuda_tests.json" <<'PY' 2>/dev/null || echo '*'
import json, sys
r = json.load(open(sys.argv[1]))
print(":".join(f"{s['name']}.{t['name']}" for s in r["testsuites"] for t in s["testsuite"]
               if t.get("failures")))
PY
  )
  if [ -n "$failed" ]; then
    timeout 120 "$sanitizer" --tool memcheck --error-exitcode 9 "$here/tessel_cuda_tests" \
      --gtest_filter="$failed" >"$s/tests.log" 2>&1
    echo "== run.sh: memcheck of tests '$failed' exited $?: see $s/tests.log"
    grep -m 5 -E "^========= (Invalid|Program hit|ERROR SUMMARY)" "$s/tests.log"
  fi
  if [ "$gpu_rc" -ne 0 ]; then
    TESSEL_UNVERIFIED_CUDA=1 timeout 120 "$sanitizer" --tool memcheck --error-exitcode 9 \
      "$here/tessel" train --config "$here/gpt-tiny.json" --set data=synthetic \
      --set attention=unfused --set eval_every=0 --device cuda --steps 1 --out "$s/train" \
      >"$s/train.log" 2>&1
    echo "== run.sh: memcheck of one GPU training step exited $?: see $s/train.log"
    grep -m 5 -E "^========= (Invalid|Program hit|ERROR SUMMARY)" "$s/train.log"
  fi
fi

# Step times of GPT-2 124M (gpt2-124m.json: batch 4, context 1024, vocab
# 50304) on this GPU: Tessel's f32 path (unfused attention, the only one
# the CUDA backend has), and PyTorch on the same GPU (torch_gpt.py, the same
# model): f32 with the same attention (TF32 off, as Tessel's cuBLASLt), f32
# and bf16 with scaled_dot_product_attention, and bf16 under torch.compile.
# Measurements only: they do not change the exit status. Each run gets what
# is left of the script's 8 minutes; perf.json has every median, Tessel's
# breakdown by instruction kind (each einsum shape's GFLOP/s alone), PyTorch's
# 8192^3 matmul rate (the chip's reachable ceiling, bf16 and f32 without
# TF32), and each run's MFU against the datasheet's dense peak (H100 SXM and
# H200: 989 TFLOP/s bf16, 67 f32; none for another GPU).
p=$out/perf
mkdir -p "$p"
left() { echo $((470 - SECONDS)); }
perf_run() {  # NAME SECONDS CAP COMMAND...: skipped when less than SECONDS are left; at most CAP s
  local name=$1 need=$2 cap=$3
  shift 3
  if [ "$(left)" -lt "$need" ]; then
    echo "== run.sh: $name skipped, $(left) s left" | tee "$p/$name.log"
    return
  fi
  echo "== run.sh: $name"
  timeout "$(( $(left) < cap ? $(left) : cap ))" "$@" >"$p/$name.out" 2>"$p/$name.log" ||
    echo "== run.sh: $name failed ($?)"
}
# Tessel's first-cut kernels are untuned (one thread per row or output): capped so
# that PyTorch's runs keep their time.
perf_run matmul_peak 30 60 python3 -c '
import time, torch
for name, dtype in (("bf16", torch.bfloat16), ("f32", torch.float32)):
    torch.backends.cuda.matmul.allow_tf32 = False
    a, b = (torch.randn(8192, 8192, device="cuda", dtype=dtype) for _ in range(2))
    for _ in range(3): a @ b
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(10): a @ b
    torch.cuda.synchronize()
    print(f"matmul_{name}_tflops={2 * 8192**3 * 10 / (time.perf_counter() - t) / 1e12:.1f}")'
perf_run tessel_f32_unfused 60 150 env TESSEL_UNVERIFIED_CUDA=1 "$here/tessel" bench step \
  --config "$here/gpt2-124m.json" --set attention=unfused --device cuda --steps 5 --warmup 1 \
  --breakdown
torch_args=(python3 "$here/torch_gpt.py" --config "$here/gpt2-124m.json" --device cuda --steps 10)
perf_run torch_f32_manual 60 120 "${torch_args[@]}"
perf_run torch_f32_sdpa 60 120 "${torch_args[@]}" --attention sdpa
perf_run torch_bf16_sdpa 60 120 "${torch_args[@]}" --attention sdpa --bf16
perf_run torch_bf16_compile 120 240 "${torch_args[@]}" --attention sdpa --bf16 --compile
python3 - "$p" <<'PY'
import glob, json, os, re, shutil, subprocess, sys
p = sys.argv[1]
runs = {}
for out in sorted(glob.glob(f"{p}/*.out")):
    name, text = os.path.basename(out)[:-4], open(out).read()
    if rates := re.findall(r"(\w+_tflops)=([\d.]+)", text):
        runs[name] = {k: float(v) for k, v in rates}
    elif name.startswith("tessel") and text.strip():
        r = json.loads(text.strip().splitlines()[-1])
        runs[name] = {k: r.get(k) for k in ("ms_per_step_median", "tokens_per_s", "arena_mib",
                                            "breakdown")}
    elif m := re.search(r"median=([\d.]+) ms tokens_per_s=(\d+)", text):
        runs[name] = {"ms_per_step_median": float(m[1]), "tokens_per_s": float(m[2]),
                      "line": text.strip()}
    else:  # failed: the last line of its log
        log = open(out[:-4] + ".log").read().strip().splitlines()
        runs[name] = {"ms_per_step_median": None, "tokens_per_s": None,
                      "error": log[-1] if log else "no output"}
smi = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
gpu = subprocess.run(smi, capture_output=True, text=True).stdout.strip() if shutil.which(smi[0]) else "?"
peak = {"bf16": 989e12, "f32": 67e12} if re.search(r"H200(?! NVL)|H100 80GB HBM3", gpu) else None
# Per token: 6 N (N with the tied embedding: the LM head is a GEMM) + 12 L T d (attention).
flop = 6 * 124e6 + 12 * 12 * 1024 * 768
for name, r in runs.items():
    if peak and r.get("tokens_per_s"):
        r["mfu"] = r["tokens_per_s"] * flop / peak["bf16" if "bf16" in name else "f32"]
json.dump({"gpu": gpu, "peak_flops_datasheet": peak, "runs": runs}, open(f"{p}.json", "w"), indent=1)
for name, r in runs.items():
    print(f"== run.sh: {name:22s} {r.get('ms_per_step_median')} ms/step, "
          f"{r.get('tokens_per_s')} tokens/s, MFU {r.get('mfu')}",
          {k: v for k, v in r.items() if k.endswith("_tflops")} or "")
PY
exit "$rc"
