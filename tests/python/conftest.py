"""Shared fixtures of the Python tests: where the CLI, mpirun and the
examples are (ctest sets TESSEL_CLI, TESSEL_MPIEXEC and TESSEL_SOURCE_DIR;
run by hand, the defaults assume the README's build in build/)."""

import os
import subprocess
import sys

import pytest

SOURCE_DIR = os.environ.get(
    "TESSEL_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
EXAMPLES = os.path.join(SOURCE_DIR, "examples", "python")
sys.path.insert(0, EXAMPLES)

CLI = os.environ.get("TESSEL_CLI", os.path.join(SOURCE_DIR, "build", "tessel"))
MPIEXEC = os.environ.get("TESSEL_MPIEXEC", "mpirun")

# A GPT small enough for a few seconds per run (as tests/layout's harness).
TINY_GPT = {
    "n_layer": 2, "n_head": 4, "d_model": 64, "context": 16, "batch": 8, "steps": 6,
    "lr": 3e-3, "warmup_steps": 2, "eval_every": 3, "eval_batches": 2, "threads": 1,
}


def run(cmd, **kw):
    """Runs cmd; fails the test with its output when it exits non-zero."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}"
    return p.stdout


def mpirun(ranks):
    return [MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-n", str(ranks)]


def rel_diff(a, b):
    import numpy as np

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


@pytest.fixture(scope="session")
def pygpt():
    import gpt

    return gpt.register()
