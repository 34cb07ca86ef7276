"""Ctrl-C while Tessel computes for Python: SIGINT and SIGTERM are blocked in
every thread Tessel's calls start (OpenMP's team among them), since a Python
handler run on a thread inside a oneDNN JIT GEMM would write its frame over
the heap (docs/failures.md); the calling thread blocks them only for the
call, so Ctrl-C still raises KeyboardInterrupt, after the step."""

import json
import os
import subprocess
import sys

from conftest import TINY_GPT

SCRIPT = r"""
import json, os, signal, sys, threading, time
import tessel

def blocked(tid):
    with open(f"/proc/self/task/{tid}/status") as f:
        for line in f:
            if line.startswith("SigBlk:"):
                bits = int(line.split()[1], 16)
                return bool(bits & (1 << (signal.SIGINT - 1))), bool(bits & (1 << (signal.SIGTERM - 1)))

before = set(os.listdir("/proc/self/task"))
trainer = tessel.Trainer(json.loads(sys.argv[1]))
trainer.step()
trainer.evaluate()
started = sorted(set(os.listdir("/proc/self/task")) - before)
main = str(os.getpid())
report = {"started": {t: blocked(t) for t in started}, "main": blocked(main)}
threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    for _ in range(100000):
        trainer.step()
    report["interrupted"] = False
except KeyboardInterrupt:
    report["interrupted"] = True
report["main_after"] = blocked(main)
print(json.dumps(report))
"""


def test_threads_tessel_starts_block_the_stop_signals_and_ctrl_c_still_interrupts():
    config = dict(TINY_GPT, model="gpt", threads=2, steps=100000)
    p = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(config)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=dict(os.environ), timeout=240)
    assert p.returncode == 0, p.stdout
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["started"], "the trainer started no thread (OpenMP's team at 2 threads)"
    for tid, (sigint, sigterm) in report["started"].items():
        assert sigint and sigterm, f"thread {tid} started by Tessel has SIGINT/SIGTERM unblocked"
    assert report["main"] == [False, False], "the calling thread's mask must be restored"
    assert report["main_after"] == [False, False]
    assert report["interrupted"], "SIGINT during steps did not raise KeyboardInterrupt"
