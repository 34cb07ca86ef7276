#!/usr/bin/env bash
# Browser test of `tessel report` (ctest: report_browser). Trains three short
# real runs (one process; data=2 and pipe=2 with a trace under mpirun), writes
# their report, loads it in headless Chromium and checks: no console errors,
# every chart's canvas has drawn and coloured pixels (the page's own
# self-check, read back from the DOM), and a screenshot can be taken.
# Exits 77 (skipped) with a message when Chromium is not installed.
# Usage: browser_test.sh TESSEL_BINARY MPIEXEC
set -euo pipefail
tessel=$1
mpiexec=$2
here=$(cd "$(dirname "$0")" && pwd)
config="$here/../../examples/gpt-tiny.json"

chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
  echo "SKIPPED: Chromium is not installed (apt-get install chromium, or scripts/test.sh installs it)"
  exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }

short=(--config "$config" --steps 6 --set eval_every=3 --set eval_batches=1 --threads 1)
"$tessel" train "${short[@]}" --out one > one.log 2>&1 || { cat one.log; fail "single-process run"; }
"$mpiexec" --allow-run-as-root --oversubscribe -n 2 "$tessel" train "${short[@]}" \
  --mesh data=2 --out data2 > data2.log 2>&1 || { cat data2.log; fail "data=2 run"; }
"$mpiexec" --allow-run-as-root --oversubscribe -n 2 "$tessel" train "${short[@]}" \
  --mesh pipe=2 --microbatches 2 --trace pipe2/trace.json --out pipe2 > pipe2.log 2>&1 ||
  { cat pipe2.log; fail "pipe=2 run"; }

"$tessel" report one data2 pipe2 --plan-validation "$here/plan_validation_fixture.json" \
  --out report.html || fail "tessel report"

browser=("$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars
         --user-data-dir="$work/profile" --window-size=1280,2600 --enable-logging=stderr --v=0)
"${browser[@]}" --dump-dom "file://$work/report.html" > dom.html 2> chromium.log ||
  { tail -20 chromium.log; fail "chromium --dump-dom"; }
check=$(grep -o '<pre id="tessel-selfcheck"[^>]*>[^<]*</pre>' dom.html | sed 's/<[^>]*>//g' || true)
[ -n "$check" ] || { tail -20 chromium.log; fail "the page's self-check did not run (script error?)"; }
echo "self-check: $check"
case "$check" in
  *'"errors":[]'*) ;;
  *) fail "errors in the page: $check" ;;
esac
if grep -E 'CONSOLE.*(Uncaught|Error)' chromium.log; then fail "console errors (above)"; fi
for id in chart-loss chart-lr chart-grad-norm chart-step-ms chart-tokens chart-comm chart-memory \
          chart-bubble chart-timeline-2 chart-plan; do
  case "$check" in
    *"\"id\":\"$id\""*) ;;
    *) fail "chart $id is missing" ;;
  esac
done
if echo "$check" | grep -qE '"(drawn|coloured)":0[,}]'; then fail "a chart drew nothing: $check"; fi

"${browser[@]}" --screenshot="$work/shot.png" "file://$work/report.html" > /dev/null 2>> chromium.log ||
  fail "chromium --screenshot"
[ -s shot.png ] || fail "no screenshot written"
[ "$(head -c 4 shot.png | od -An -tx1 | tr -d ' ')" = "89504e47" ] || fail "screenshot is not a PNG"
echo "PASS: report of 3 real runs drew $(echo "$check" | grep -o '"id"' | wc -l) charts; screenshot $(stat -c %s shot.png) bytes"
