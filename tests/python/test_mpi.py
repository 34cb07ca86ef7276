"""Python ranks under real mpirun: `mpirun -n 4 python3 examples/python/...`
on data=2,model=2 trains to one process's losses and weights within the
layout tolerance (relative 1e-5), each rank holding only its shards."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import tessel
from conftest import EXAMPLES, TINY_GPT, mpirun, rel_diff, run

REL_TOL = 1e-5


@pytest.mark.parametrize("example,model", [("gpt.py", "pygpt"), ("parallel_gpt.py", "parallel_gpt")])
def test_data2_model2_matches_one_process(tmp_path, example, model):
    config_file = tmp_path / "tiny.json"
    config_file.write_text(json.dumps(dict(TINY_GPT, model="gpt")))
    script = os.path.join(EXAMPLES, example)
    env_path = os.environ.get("PYTHONPATH", "")
    out = run(mpirun(4) + ["-x", f"PYTHONPATH={env_path}", sys.executable, script,
                           "--config", str(config_file), "--mesh", "data=2,model=2",
                           "--out", str(tmp_path / "mesh")])
    # Rank 0 reports its shard of the tied embedding: vocab split over `model`.
    assert "rank 0 holds wte as [('vocab', 128), ('embed', 64)]" in out, out
    one = run([sys.executable, script, "--config", str(config_file), "--out", str(tmp_path / "one")])
    assert "holds wte as [('vocab', 256), ('embed', 64)]" in one, one

    got = tessel.read_metrics(str(tmp_path / "mesh"))
    want = tessel.read_metrics(str(tmp_path / "one"))
    assert len(got) == len(want) == TINY_GPT["steps"]
    for g, w in zip(got, want):
        assert abs(g["loss"] - w["loss"]) <= REL_TOL * abs(w["loss"]), (g, w)
    assert abs(got[-1]["val_loss"] - want[-1]["val_loss"]) <= REL_TOL * want[-1]["val_loss"]
    want_w = tessel.read_safetensors(str(tmp_path / "one" / "checkpoint" / "model.safetensors"))
    got_w = tessel.read_safetensors(str(tmp_path / "mesh" / "checkpoint" / "model.safetensors"))
    assert sorted(got_w) == sorted(want_w)
    for name in want_w:
        assert rel_diff(got_w[name], want_w[name]) <= REL_TOL, name
    assert tessel.read_checkpoint_info(str(tmp_path / "mesh" / "checkpoint"))["config"]["model"] == model


def test_an_exception_on_one_rank_ends_every_rank(tmp_path):
    """Rank 1 raises while rank 0 waits in a step's collective: the package's
    excepthook aborts the job at once (MPI_Abort), naming the rank and the
    error, long before the comm watchdog."""
    script = tmp_path / "fails.py"
    script.write_text(
        "import tessel\n"
        f"t = tessel.Trainer(dict({TINY_GPT!r}, model='gpt', mesh='data=2'))\n"
        "if t.rank == 1:\n"
        "    raise ValueError('injected failure on rank 1')\n"
        "t.step()\n")
    start = time.monotonic()
    p = subprocess.run(mpirun(2) + ["-x", "PYTHONPATH", sys.executable, str(script)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
                       env=dict(os.environ, TESSEL_COMM_TIMEOUT_S="100"))
    assert p.returncode != 0, p.stdout
    assert time.monotonic() - start < 60, p.stdout
    assert "[rank 1] error: ValueError: injected failure on rank 1" in p.stdout, p.stdout
