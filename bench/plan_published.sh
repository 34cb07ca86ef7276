#!/usr/bin/env bash
# The planner against published large training runs (examples/published/):
# for each, `tessel plan --config FILE --compare-published --json` predicts
# the run's published configuration (the knobs its `published` block
# states; the others searched) on its cluster file and compares it with the
# published throughput and the device's memory (the conversion, Narayanan
# et al.'s FLOP count, is the CLI's: plan/published_run.h). With
# FREE_SEARCH=1 the same call adds --free: a search of every knob for the
# run's GPU count and cluster, under the device's memory (FREE_IGNORE_MEMORY=1:
# without it, as before issue 30), whose best plan must fit and must not be
# rated slower than the published configuration where that fits the device;
# its CPU seconds are recorded. Prints a table; writes
# runs/plan-published/results.json. The context-parallel runs
# (llama3.1-8b-32k/256k-*: torchtitan's CP table) are among the files; the
# 256K one (ctx=8) fits with ZeRO 3 over the context axis.
#
# Usage: [FREE_SEARCH=1] [FREE_IGNORE_MEMORY=1] [FREE_TIMEOUT=600] bench/plan_published.sh [FILES...]
#        (default: examples/published/*.json)
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
ignore_memory = os.environ.get("FREE_IGNORE_MEMORY") == "1"
timeout = float(os.environ.get("FREE_TIMEOUT", "600"))
rows, failed = [], []
for path in files:
    cmd = ["build/tessel", "plan", "--config", path, "--compare-published", "--json", "--top", "1"]
    if free_search:
        cmd += ["--free"] + (["--ignore-device-memory"] if ignore_memory else [])
    t0, c0 = time.time(), os.times()
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        rows.append({"file": path, "timed_out_after_s": timeout})
        failed.append(f"{path} (timed out)")
        continue
    c1 = os.times()
    if run.stdout.strip() == "":
        sys.exit(f"{' '.join(cmd)} failed:\n{run.stderr}")
    got = json.loads(run.stdout)
    pub, pred = got["published"], got["predicted"]
    plan = pred["plan"]
    row = {"run": pub["run"], "gpus": pub["gpus"], "config": plan["flags"].strip(),
           "searched": pred["searched"], "published_s": pub["step_s"],
           "predicted_s": pred["step_s"], "error": pred["error"],
           "predicted_peak_gib": pred["peak_bytes"] / 2**30,
           "device_gib": pred["device_memory_bytes"] / 2**30, "fits": pred["fits"],
           "compute_ms": plan["compute_ms"], "bubble_ms": plan["bubble_ms"],
           "exposed_comm_ms": plan["exposed_comm_ms"], "published_search_s": pred["search_s"],
           "wall_s": time.time() - t0,
           "cpu_s": c1.children_user + c1.children_system - c0.children_user - c0.children_system}
    print(f"{pub['run']}: published {pub['step_s']:.2f} s/step, predicted {pred['step_s']:.2f} s "
          f"({100 * pred['error']:+.1f}%), peak {row['predicted_peak_gib']:.1f} GiB of "
          f"{row['device_gib']:.0f} GiB ({'fits' if pred['fits'] else 'does not fit'}); "
          f"{row['config']}", flush=True)
    if "free" in got:
        free = got["free"]
        row["free"] = free
        if "error" in free:
            failed.append(f"{pub['run']} (the free search found no plan that fits)")
            print(f"  free search: {free['error'].splitlines()[0]}", flush=True)
        else:
            print(f"  free search: {free['plan']['flags'].strip()}: {free['step_s']:.2f} s/step, "
                  f"peak {free['plan']['peak_bytes'] / 2**30:.1f} GiB; {free['considered']} "
                  f"configurations in {free['search_s']:.2f} s (the whole call: "
                  f"{row['cpu_s']:.2f} CPU s)", flush=True)
            # Only a published configuration that fits the device bounds the
            # free search (which keeps to the device's memory).
            if not free["no_slower"] and pred["fits"]:
                failed.append(f"{pub['run']} (the free search's plan is rated slower)")
            elif not free["no_slower"]:
                print("  (rated slower than the published configuration, which does not fit "
                      "the device: not a failure)", flush=True)
    rows.append(row)
json.dump(rows, open(f"{out}/results.json", "w"), indent=1)
if failed:
    sys.exit("failed: " + "; ".join(failed))
PY
