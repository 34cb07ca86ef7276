#!/usr/bin/env bash
# Checks that two `tessel` binaries plan alike: the same `tessel plan --json`
# output, byte for byte, apart from the search's wall time (`search_s`), for
#   - gpt-bench on 2 and on 8 ranks (--oversubscribe, --threads 1) on a
#     machine profile ($PROFILE; default: the cached one), every plan shown;
#   - the free searches of GPT-3 175B on 1,024 A100s and Megatron 1T on
#     3,072 A100s (as `FREE_SEARCH=1 bench/plan_published.sh` runs them,
#     with --top 10 so that the ten best plans are compared, not only the
#     first: --top 10 costs exactly the same candidates as --top 1);
#   - every exact published configuration (examples/published/*.json, every
#     knob fixed, as bench/plan_published.sh predicts them).
# Used to show that a change to the planner's speed changes no result. Each
# request's CPU seconds (user + sys) are printed for both binaries (not a
# benchmark: the runs are not repeated or alternated; use
# `flock /tmp/tessel-bench.lock` and several runs for timings).
#
# Usage: [PROFILE=FILE] [SKIP_1T=1] [REUSE_OLD=1] bench/plan_equivalence.sh OLD NEW [OUT]
#   OLD, NEW: paths of the two tessel binaries; OUT (default
#   runs/plan-equivalence) receives each output as OUT/{old,new}/NAME.json.
#   REUSE_OLD=1 keeps OLD's outputs from an earlier run when present;
#   SKIP_1T=1 leaves out the Megatron 1T free search (minutes with an old binary).
# Exits non-zero when any output differs.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$(realpath "$1")
NEW=$(realpath "$2")
OUT=${3:-runs/plan-equivalence}
mkdir -p "$OUT/old" "$OUT/new" "$OUT/configs"
profile=()
[ -n "${PROFILE:-}" ] && profile=(--profile "$PROFILE")

# The published runs' model keys as configs (what plan_published.sh writes).
/usr/bin/python3 - "$OUT/configs" examples/published/*.json <<'PY'
import json, sys
out = sys.argv[1]
for path in sys.argv[2:]:
    spec = json.load(open(path))
    pub = spec.pop("published")
    spec["precision"] = "bf16"
    json.dump(spec, open(f"{out}/{path.split('/')[-1]}", "w"))
    mesh = pub["mesh"]
    micro = pub.get("microbatches") or spec["batch"] // mesh["data"]
    recompute = pub.get("recompute") or ("none" if "Llama" in pub["run"] else "blocks")
    fixed = [f"--mesh pipe={mesh['pipe']},data={mesh['data']},model={mesh['model']}",
             f"--microbatches {micro}", f"--schedule {pub['schedule']}",
             f"--zero {pub.get('zero', 0)}", f"--recompute {recompute}",
             "--layout batch=data,heads=model,hidden=model,vocab=model,seq=model"]
    if pub["schedule"] == "interleaved":
        fixed.append(f"--chunks {pub.get('chunks', 2)}")
    base = f"--cluster {pub['cluster']} --ranks {pub['gpus']} --ignore-device-memory"
    with open(f"{out}/{path.split('/')[-1]}.args", "w") as f:
        f.write(base + "\n" + " ".join(fixed) + "\n")
PY

# NAME then the plan arguments.
requests=()
add() { requests+=("$*"); }
add bench-2 --config examples/gpt-bench.json --ranks 2 --threads 1 --top 100000 "${profile[@]}"
add bench-8 --config examples/gpt-bench.json --ranks 8 --oversubscribe --threads 1 --top 100000 \
  "${profile[@]}"
for path in examples/published/*.json; do
  name=$(basename "$path" .json)
  config="$OUT/configs/$name.json"
  { read -r base; read -r fixed; } <"$config.args"
  # shellcheck disable=SC2086
  add "exact-$name" --config "$config" $base $fixed --top 1
  case $name in
    megatron-gpt3-175b-1024-a100) add "free-$name" --config "$config" $base --top 10 ;;
    megatron-1t-3072-a100) [ "${SKIP_1T:-0}" = 1 ] || add "free-$name" --config "$config" $base --top 10 ;;
  esac
done

cpu() {  # CPU seconds (user + sys) of a command, its stdout to $1
  local out=$1
  shift
  /usr/bin/time -f '%U %S' -o "$out.time" "$@" >"$out"
  awk '{printf "%.2f", $1 + $2}' "$out.time"
}
strip() { sed -E '/^  "search_s": /d' "$1"; }

failed=0
printf '%-44s %9s %9s  %s\n' request "old CPU s" "new CPU s" result
for request in "${requests[@]}"; do
  read -r name args <<<"$request"
  # shellcheck disable=SC2086
  if [ "${REUSE_OLD:-0}" = 1 ] && [ -s "$OUT/old/$name.json" ]; then
    old_s="(kept)"
  else
    old_s=$(cpu "$OUT/old/$name.json" "$OLD" plan $args --json)
  fi
  # shellcheck disable=SC2086
  new_s=$(cpu "$OUT/new/$name.json" "$NEW" plan $args --json)
  if cmp -s <(strip "$OUT/old/$name.json") <(strip "$OUT/new/$name.json"); then
    result="identical ($(grep -c '"command"' "$OUT/new/$name.json") plans)"
  else
    result="DIFFERENT (diff $OUT/old/$name.json $OUT/new/$name.json)"
    failed=1
  fi
  printf '%-44s %9s %9s  %s\n' "$name" "$old_s" "$new_s" "$result"
done
exit $failed
