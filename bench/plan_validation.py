"""Compares the planner's predictions with the runs bench/plan_validation.sh made.

Reads OUT/plans.json, OUT/picked.txt and each OUT/plan-I/{metrics.jsonl,summary.json};
prints one row per plan and the error statistics; writes OUT/validation.json and
OUT/plan_validation.json (the scatter `tessel report --plan-validation` draws).

`plan_validation.py OUT MEASURED` re-predicts runs made before: OUT/plans.json is a
new `tessel plan --json` (another binary or profile), MEASURED an earlier OUT with
its picked.txt and plan-I runs. Each measured run is matched to the new plan with
the same command; the index shown is the plan's rank in the new ranking, and the
top plan is the best-ranked of the measured plans (the new top plan itself may not
have been measured: the script says so).
"""
import json
import statistics
import sys


def ranks_of(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):  # average ranks over ties
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def spearman(a, b):
    ra, rb = ranks_of(a), ranks_of(b)
    ma, mb = statistics.mean(ra), statistics.mean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va > 0 and vb > 0 else float("nan")


def main(out, measured=None):
    plans = json.load(open(out + "/plans.json"))
    runs = measured or out
    by_command = {p["command"]: i for i, p in enumerate(plans["plans"])}
    rows = []
    for line in open(runs + "/picked.txt"):
        run_index, command = line.rstrip("\n").split("\t", 1)
        if measured:
            if command not in by_command:
                print(f"measured plan {run_index} is not among the new plans: {command}")
                continue
            index = by_command[command]
        else:
            index = int(run_index)
        plan = plans["plans"][index]
        steps = [json.loads(l) for l in open(f"{runs}/plan-{run_index}/metrics.jsonl")]
        timed = [s["step_ms"] for s in steps[2:]] or [s["step_ms"] for s in steps]
        summary = json.load(open(f"{runs}/plan-{run_index}/summary.json"))
        measured_peak = max(r["measured_peak_tracked_bytes"] for r in summary["memory_per_rank"])
        rows.append({"index": index, "flags": plan["command"].split("--config", 1)[1].split(" ", 2)[-1],
                     "predicted_ms": plan["step_ms"], "measured_ms": statistics.median(timed),
                     "predicted_peak": plan["peak_bytes"], "measured_peak": measured_peak})
    rows.sort(key=lambda r: r["index"])
    for r in rows:
        r["error"] = (r["predicted_ms"] - r["measured_ms"]) / r["measured_ms"]
    mape = statistics.mean(abs(r["error"]) for r in rows)
    rho = spearman([r["predicted_ms"] for r in rows], [r["measured_ms"] for r in rows])
    best = min(r["measured_ms"] for r in rows)
    if measured:  # the best-ranked plan that was measured
        top = rows[0]["measured_ms"]
        if rows[0]["index"] != 0:
            print(f"the new top plan was not measured; the best-ranked measured plan is #{rows[0]['index']}")
    else:
        top = rows[0]["measured_ms"] if rows[0]["index"] == 0 else float("nan")
    exact = sum(r["predicted_peak"] == r["measured_peak"] for r in rows)
    print(f"{'#':>4} {'predicted ms':>12} {'measured ms':>12} {'error':>7} {'peak pred MiB':>13} {'measured':>9}  plan")
    for r in rows:
        print(f"{r['index']:>4} {r['predicted_ms']:>12.1f} {r['measured_ms']:>12.1f} {100 * r['error']:>6.1f}% "
              f"{r['predicted_peak'] / 2**20:>13.2f} {r['measured_peak'] / 2**20:>9.2f}  {r['flags']}")
    print(f"plans run: {len(rows)} of {len(plans['plans'])} costed ({plans['considered']} considered, "
          f"{plans['pruned']} pruned, search {plans['search_s']:.3f} s)")
    print(f"step time: mean absolute percentage error {100 * mape:.1f}%, Spearman rank correlation {rho:.3f}")
    print(f"top plan measured {top:.1f} ms vs best measured {best:.1f} ms: {100 * (top / best - 1):+.1f}%")
    print(f"peak memory equal to the byte: {exact} of {len(rows)}")
    # The points `tessel report --plan-validation FILE` draws.
    json.dump([{"predicted_ms": r["predicted_ms"], "measured_ms": r["measured_ms"],
                "label": f"#{r['index']} {r['flags']}"} for r in rows],
              open(out + "/plan_validation.json", "w"), indent=1)
    json.dump({"rows": rows, "mape": mape, "spearman": rho, "top_vs_best": top / best - 1,
               "memory_exact": exact, "plans": len(rows), "search_s": plans["search_s"],
               "considered": plans["considered"], "pruned": plans["pruned"]},
              open(out + "/validation.json", "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
