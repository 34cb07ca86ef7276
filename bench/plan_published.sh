#!/usr/bin/env bash
# The planner against published large training runs (examples/published/):
# for each, `tessel plan` predicts the run's exact configuration (mesh,
# micro-batches, schedule, ZeRO, recomputation, bf16) on its cluster file,
# and the prediction is compared with the published throughput, as step
# time: the published FLOP/s per GPU over the FLOPs the authors counted per
# step (Narayanan et al.'s formula, which counts the recomputed forward pass
# for the Megatron and BLOOM runs; without it for Llama 3, whose MFU counts
# model FLOPs). Then a free search (same cluster, ranks and memory rules,
# every knob searched: screening, then the best 10 costed exactly;
# docs/planner.md) must not pick a plan its own model rates slower than the
# published configuration (predicted with every knob fixed); its CPU
# seconds are recorded.
# Prints a table; writes runs/plan-published/results.json.
# The free search runs only with FREE_SEARCH=1, each under FREE_TIMEOUT
# seconds (default 600); the check fails the script when the free search's
# top plan is rated slower than the published one.
#
# Usage: [FREE_SEARCH=1] bench/plan_published.sh [FILES...]   (default: examples/published/*.json)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=runs/plan-published
mkdir -p "$OUT"
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(examples/published/*.json)
/usr/bin/python3 - "$OUT" "${files[@]}" <<'PY'
import json, os, subprocess, sys, time
out, files = sys.argv[1], sys.argv[2:]
free_search = os.environ.get("FREE_SEARCH") == "1"
free_timeout = float(os.environ.get("FREE_TIMEOUT", "600"))
rows = []
failed = []
for path in files:
    spec = json.load(open(path))
    pub = spec.pop("published")
    spec["precision"] = "bf16"
    config = f"{out}/{path.split('/')[-1]}"
    json.dump(spec, open(config, "w"))
    mesh = pub["mesh"]
    mesh_text = f"pipe={mesh['pipe']},data={mesh['data']},model={mesh['model']}"
    micro = pub.get("microbatches") or spec["batch"] // mesh["data"]  # micro-batch size 1 when unstated
    recompute = pub.get("recompute") or ("none" if "Llama" in pub["run"] else "blocks")
    schedule = pub["schedule"]
    fixed = ["--mesh", mesh_text, "--microbatches", str(micro), "--schedule", schedule,
             "--zero", str(pub.get("zero", 0)), "--recompute", recompute,
             "--layout", "batch=data,heads=model,hidden=model,vocab=model,seq=model"]
    if schedule == "interleaved":
        fixed += ["--chunks", str(pub.get("chunks", 2))]
    base = ["build/tessel", "plan", "--config", config, "--cluster", pub["cluster"],
            "--ranks", str(pub["gpus"]), "--json", "--top", "1", "--ignore-device-memory"]
    t0 = time.time()
    got = json.loads(subprocess.check_output(base + fixed))
    seconds = time.time() - t0
    plan = got["plans"][0]
    B, s, l, h, V = spec["batch"], spec["context"], spec["n_layer"], spec["d_model"], spec["vocab"]
    if recompute == "blocks":  # Narayanan et al., eq. (3): forward counted twice
        flops = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    else:
        flops = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))
    published_ms = flops / (pub["tflops_per_gpu"] * 1e12 * pub["gpus"]) * 1e3
    row = {"run": pub["run"], "gpus": pub["gpus"], "config": " ".join(fixed),
           "published_ms": published_ms, "predicted_ms": plan["step_ms"],
           "error": plan["step_ms"] / published_ms - 1, "plan_s": seconds,
           "predicted_peak_gib": plan["peak_bytes"] / 2**30,
           "compute_ms": plan["compute_ms"], "bubble_ms": plan["bubble_ms"],
           "exposed_comm_ms": plan["exposed_comm_ms"]}
    if free_search:  # same cluster, ranks and memory rules; every knob searched
        t0, c0 = time.time(), os.times()
        try:
            free = json.loads(subprocess.check_output(base, timeout=free_timeout))
            c1 = os.times()
            top = free["plans"][0]
            row["free"] = {"search_s": time.time() - t0,
                           "cpu_s": c1.children_user + c1.children_system
                                    - c0.children_user - c0.children_system,
                           "considered": free["considered"], "pruned": free["pruned"],
                           "screened": free["screened"], "bounded": free["bounded"],
                           "exact": free["exact"], "costed": free["costed"],
                           "step_ms": top["step_ms"], "published_predicted_ms": plan["step_ms"],
                           "command": top["command"],
                           "no_slower": top["step_ms"] <= plan["step_ms"]}
            if not row["free"]["no_slower"]:
                failed.append(pub["run"])
        except subprocess.TimeoutExpired:
            row["free"] = {"search_s": None, "timed_out_after_s": free_timeout}
        print(f"  free search: {row['free']}", flush=True)
    rows.append(row)
    print(f"{pub['run']}: published {published_ms:.0f} ms/step, predicted {plan['step_ms']:.0f} ms "
          f"({100 * row['error']:+.1f}%), compute {plan['compute_ms']:.0f}, bubble {plan['bubble_ms']:.0f}, "
          f"exposed comm {plan['exposed_comm_ms']}, peak {row['predicted_peak_gib']:.1f} GiB, {seconds:.1f} s",
          flush=True)
json.dump(rows, open(f"{out}/results.json", "w"), indent=1)
if failed:
    sys.exit(f"the free search picked a plan its own model rates slower than the published "
             f"configuration for: {', '.join(failed)}")
PY
