#!/bin/bash
# A full disk under real mpirun (2 ranks, data=2, periodic checkpoints
# written in the background): the save that does not fit ends every rank
# with an error naming the checkpoint and the full device, leaves no
# temporary behind and the previous checkpoint intact; once there is space
# again, `--resume auto` on the same --out continues from that checkpoint.
# The disk is a tmpfs sized for one and a half checkpoints, so the test
# needs root; it exits 77 (skipped) where no tmpfs can be mounted.
#   disk_full_test.sh TESSEL MPIEXEC
set -u
tessel=$1 mpiexec=$2
dir=$(mktemp -d /tmp/tessel_disk_full_XXXXXX)
disk=$dir/disk
trap 'umount "$disk" 2>/dev/null; rm -rf "$dir"' EXIT
cat >"$dir/c.json" <<'JSON'
{"model": "gpt", "n_layer": 1, "n_head": 2, "d_model": 32, "context": 16, "batch": 4,
 "steps": 1000000, "eval_every": 0, "threads": 1, "sample_chars": 0}
JSON
fail() { echo "FAIL: $*"; cat "$dir/log"; exit 1; }
"$tessel" train --config "$dir/c.json" --steps 2 --checkpoint-every 2 --out "$dir/probe" \
  >"$dir/log" 2>&1 || fail "the run measuring one checkpoint failed"
one=$(du -sb "$dir/probe/checkpoints/step-2" | cut -f1)
mkdir -p "$disk"
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=$((one * 3 / 2 + 65536)) tmpfs "$disk"; then
  echo "SKIP: cannot mount a tmpfs here (needs root)"
  exit 77
fi
run() {  # ARGS...: the 2-rank job on the tmpfs, at most 60 s
  timeout 60 $mpiexec --allow-run-as-root --oversubscribe -n 2 "$tessel" train \
    --config "$dir/c.json" --mesh data=2 --checkpoint-every 5 --out "$disk/out" "$@" \
    >"$dir/log" 2>&1
}
run
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "exit code $rc (124: still running after 60 s)"
grep -qF "error: saving checkpoint '$disk/out/checkpoints/step-10' failed" "$dir/log" ||
  fail "the failed save is not named"
grep -qF "No space left on device); no checkpoint was written" "$dir/log" ||
  fail "the full device is not named"
grep -q "aborting every rank" "$dir/log" || fail "the job was not aborted"
[ -z "$(ls -d "$disk/out/checkpoints/"*.tmp-* 2>/dev/null)" ] || fail "a temporary was left"
[ "$(cat "$disk/out/checkpoints/latest")" = step-5 ] || fail "checkpoints/latest is not step-5"
mount -o remount,size=$((one * 8)) "$disk" || fail "cannot grow the tmpfs"
run --steps 12 --resume auto || fail "the resumed run failed"
grep -qF "resuming from $disk/out/checkpoints/step-5 at step 5" "$dir/log" ||
  fail "the run did not resume from step-5"
echo "PASS: the full disk ended the job; step-5 resumed"
