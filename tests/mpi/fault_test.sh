#!/bin/bash
# Failure semantics of `tessel train` under real mpirun (2 ranks, data=2).
#   fault_test.sh kill9 TESSEL MPIEXEC   kill -9 of rank 1 mid-run: every rank ends within 10 s
#                                        and the output names rank 1
#   fault_test.sh stop  TESSEL MPIEXEC   SIGSTOP of rank 1: the watchdog (TESSEL_COMM_TIMEOUT_S=4)
#                                        ends the job, naming rank 1 as not arrived / not responding
#   fault_test.sh out   TESSEL MPIEXEC   an --out only rank 0 uses, and cannot create: rank 0's
#                                        error aborts every rank within 10 s of its message
#   fault_test.sh stop_shared ...        as `stop`, with the heartbeats of a job across hosts
#                                        forced (TESSEL_HEARTBEAT_SHARED=1: files in OUT/.heartbeat,
#                                        written by pwrite, liveness timed by the reader's clock)
#   fault_test.sh stop_staged ...        as `stop`, with collectives staged through pinned host
#                                        memory (the staged communicator's inner call blocks)
# Exits 0 when the expectation holds, 1 (with the output) otherwise.
set -u
mode=$1 tessel=$2 mpiexec=$3
dir=$(mktemp -d /tmp/tessel_fault_XXXXXX)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/c.json" <<'JSON'
{"model": "gpt", "n_layer": 1, "n_head": 2, "d_model": 32, "context": 16, "batch": 4,
 "steps": 1000000, "eval_every": 0, "threads": 1, "sample_chars": 0}
JSON
[ "$mode" = stop_staged ] && sed -i 's/^{/{"collectives": "staged", /' "$dir/c.json"
out="$dir/out"
[ "$mode" = out ] && { touch "$dir/file"; out="$dir/file/out"; }
case $mode in stop | stop_shared | stop_staged) export TESSEL_COMM_TIMEOUT_S=4 ;; esac
[ "$mode" = stop_shared ] && export TESSEL_HEARTBEAT_SHARED=1
fail() { echo "FAIL ($mode): $*"; cat "$dir/log"; exit 1; }

start=$(date +%s.%N)
$mpiexec --allow-run-as-root --oversubscribe -n 2 "$tessel" train --config "$dir/c.json" \
  --mesh data=2 --out "$out" >"$dir/log" 2>&1 &
job=$!
victim=""
if [ "$mode" != out ]; then
  for _ in $(seq 600); do [ -s "$dir/out/metrics.jsonl" ] && break; sleep 0.1; done
  [ -s "$dir/out/metrics.jsonl" ] || { kill -9 $job; fail "training never started"; }
  for p in $(pgrep -P $job); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && victim=$p
  done
  [ -n "$victim" ] || { kill -9 $job; fail "rank 1 not found"; }
  start=$(date +%s.%N)
  if [ "$mode" = kill9 ]; then kill -9 "$victim"; else kill -STOP "$victim"; fi
  [ "$mode" = stop_shared ] && { ls "$out/.heartbeat/"tessel-heartbeat-*-rank1 >/dev/null 2>&1 ||
    fail "no heartbeat file of rank 1 under OUT/.heartbeat"; }
else
  # The fault is rank 0's error: the clock starts when it is printed, not at
  # launch (start-up under AddressSanitizer on a loaded machine alone can
  # take seconds).
  for _ in $(seq 600); do grep -q "error:" "$dir/log" 2>/dev/null && break; sleep 0.1; done
  start=$(date +%s.%N)
fi
limit=10
[ "$mode" != kill9 ] && [ "$mode" != out ] && limit=20
# Wait for the job, at most `limit` seconds after the fault.
for _ in $(seq $((limit * 10))); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
if kill -0 $job 2>/dev/null; then
  [ -n "$victim" ] && kill -CONT "$victim" 2>/dev/null
  kill -9 $job; pkill -9 -P $job 2>/dev/null
  fail "the job still runs $limit s after the fault (hang)"
fi
wait $job
rc=$?
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
[ -n "$victim" ] && kill -CONT "$victim" 2>/dev/null
echo "mode $mode: job ended ${elapsed} s after the fault, exit code $rc"
[ $rc -ne 0 ] || fail "exit code 0"
case $mode in
  kill9) grep -q "process rank 1 .*exited on signal 9" "$dir/log" || fail "rank 1 not named" ;;
  stop | stop_shared | stop_staged)
    grep -q "Rank(s) that did not arrive: 1\." "$dir/log" || fail "rank 1 not named"
    grep -q "rank 1: NOT RESPONDING" "$dir/log" || fail "rank 1 not reported as stopped"
    grep -qE "rank 0: [a-z_ ()]+ on group '[a-z]+' \(op '[^']+', [0-9]+ elements\) blocked" \
      "$dir/log" || fail "the collective not named" ;;
  out)
    grep -q "\[rank 0\] error: cannot create the output directory --out" "$dir/log" ||
      fail "no error message"
    grep -q "aborting every rank" "$dir/log" || fail "not aborted" ;;
esac
grep -E "did not arrive|NOT RESPONDING|process rank|error:" "$dir/log"
echo "PASS ($mode)"
