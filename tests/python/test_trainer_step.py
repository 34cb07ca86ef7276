"""Trainer.step(batch) on the user's own NumPy batch, gradients after a step,
the learning rate set between steps, AdamW's options and weight-decay
exclusions, and the learning-rate schedules (docs/python.md)."""

import json
import math
import os
import sys

import numpy as np
import pytest

import tessel
from conftest import TINY_GPT, mpirun, rel_diff, run

SGD = dict(TINY_GPT, model="gpt", optimizer="sgd", weight_decay=0.0, grad_clip=0.0,
           warmup_steps=0, lr_schedule="constant", lr=0.1)


def batch_for(trainer, seed=0):
    rng = np.random.default_rng(seed)
    (shape, dtype), = [v for k, v in trainer.inputs().items() if k == "tokens"]
    sizes = [size for _, size in shape]
    return {"tokens": rng.integers(0, 256, sizes), "targets": rng.integers(0, 256, sizes)}


def copies(params):
    return {name: np.array(a) for name, a in params.items()}


def forward_loss(config, params, batch):
    """The loss of `batch` under `params`, by a forward-only Program."""
    b = tessel.Builder()
    loss, _ = tessel.build_model(tessel.resolve_config(config), b, config["batch"], False)
    p = tessel.Program(b, [loss])
    for name in b.params():
        p.bind_param(name, np.ascontiguousarray(params[name], dtype=np.float32))
    (out,) = p.run(tokens=batch["tokens"].astype(np.int32),
                   targets=batch["targets"].astype(np.int32))
    return float(out)


def test_step_trains_on_the_batch_given():
    t = tessel.Trainer(SGD)
    assert set(t.inputs()) == {"tokens", "targets"}
    batch = batch_for(t)
    before = copies(t.params())
    r = t.step(batch)
    # The step's loss is this batch's loss under the weights before the step.
    assert r["loss"] == pytest.approx(forward_loss(SGD, before, batch), rel=1e-5)
    assert r["step"] == 0 and t.steps_done == 1
    other = t.step(batch_for(t, seed=1))["loss"]
    assert other != pytest.approx(t.step(batch)["loss"], rel=1e-3)


def test_gradients_are_the_ones_the_update_applied():
    t = tessel.Trainer(SGD)
    assert t.gradients() == {}
    t.keep_gradients()
    before = copies(t.params())
    r = t.step(batch_for(t))
    grads = t.gradients()
    after = t.params()
    assert set(grads) == set(before)
    for name, g in grads.items():
        assert g.shape == before[name].shape, name
        # plain SGD without decay or clipping: w' = w - lr * g
        np.testing.assert_allclose(before[name] - r["lr"] * g, after[name], rtol=1e-5,
                                   atol=1e-7, err_msg=name)
    norm = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads.values()))
    assert norm == pytest.approx(r["grad_norm"], rel=1e-5)


def test_learning_rate_set_between_steps():
    t = tessel.Trainer(dict(SGD, lr_schedule="cosine", warmup_steps=2, lr=0.2, min_lr=0.02))
    batch = batch_for(t)
    assert t.step(batch)["lr"] == pytest.approx(0.1)  # warm-up: (0 + 1) / 2 * 0.2
    t.set_lr(0.5)
    t.keep_gradients()
    before = copies(t.params())
    assert t.step(batch)["lr"] == 0.5
    g = t.gradients()["wte"]
    np.testing.assert_allclose(before["wte"] - 0.5 * g, t.params()["wte"], rtol=1e-5, atol=1e-7)
    t.set_lr(None)  # back on the cosine from step 2 of 6: progress 0, then 1/4
    assert t.step(batch)["lr"] == pytest.approx(0.2)
    assert t.step(batch)["lr"] == pytest.approx(0.02 + 0.09 * (1 + math.cos(math.pi / 4)))
    with pytest.raises(tessel.Error, match="learning rate must be >= 0"):
        t.set_lr(-1.0)


def test_learning_rate_set_from_python_survives_a_checkpoint(tmp_path):
    config = dict(SGD, lr_schedule="cosine", warmup_steps=0, lr=0.2, min_lr=0.02)
    t = tessel.Trainer(config)
    batch = batch_for(t)
    t.set_lr(0.5)
    t.step(batch)
    t.save_checkpoint(str(tmp_path / "ckpt"))
    manifest = json.loads((tmp_path / "ckpt" / "manifest.json").read_text())
    assert manifest["state"]["lr_schedule"]["override"] == 0.5
    resumed = tessel.Trainer(config)
    resumed.load_checkpoint(str(tmp_path / "ckpt"))
    assert resumed.step(batch)["lr"] == 0.5
    # without an override the manifest has none and a resumed run follows the schedule
    t.set_lr(None)
    t.save_checkpoint(str(tmp_path / "plain"))
    manifest = json.loads((tmp_path / "plain" / "manifest.json").read_text())
    assert "override" not in manifest["state"]["lr_schedule"]
    again = tessel.Trainer(config)
    again.load_checkpoint(str(tmp_path / "plain"))
    assert again.step(batch)["lr"] == pytest.approx(0.02 + 0.09 * (1 + math.cos(math.pi / 6)))
    manifest["state"]["lr_schedule"]["override"] = -1
    (tmp_path / "plain" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(tessel.Error, match="lr_schedule.override must be a number > 0"):
        tessel.Trainer(config).load_checkpoint(str(tmp_path / "plain"))


def expected_lr(c, step):
    if step < c["warmup_steps"]:
        return c["lr"] * (step + 1) / c["warmup_steps"]
    start = c["warmup_steps"]
    if c["lr_schedule"] == "constant":
        return c["lr"]
    if c["lr_schedule"] == "wsd":
        start = max(start, c["steps"] - round(c["decay_fraction"] * c["steps"]))
        if step < start:
            return c["lr"]
    progress = min(1.0, (step - start) / max(1, c["steps"] - start))
    if c["lr_schedule"] == "cosine":
        return c["min_lr"] + 0.5 * (c["lr"] - c["min_lr"]) * (1 + math.cos(math.pi * progress))
    return c["lr"] + (c["min_lr"] - c["lr"]) * progress


@pytest.mark.parametrize("schedule", ["cosine", "linear", "constant", "wsd"])
def test_schedules(schedule):
    c = dict(SGD, lr_schedule=schedule, steps=10, warmup_steps=2, lr=0.1, min_lr=0.01,
             decay_fraction=0.4, n_layer=1, d_model=32)
    t = tessel.Trainer(c)
    batch = batch_for(t)
    lrs = [t.step(batch)["lr"] for _ in range(c["steps"])]
    assert lrs == pytest.approx([expected_lr(c, s) for s in range(c["steps"])], rel=1e-12)
    assert tessel.resolve_config(c)["lr_schedule"] == schedule
    assert "lr_schedule" in tessel.config_keys() and "decay_fraction" in tessel.config_keys()


def test_adamw_options_and_weight_decay_exclusions():
    base = dict(TINY_GPT, model="gpt", weight_decay=0.5, beta1=0.8, beta2=0.99, eps=1e-6,
                lr=1e-2, warmup_steps=0)
    params = {}
    for decay_all in (False, True):
        t = tessel.Trainer(dict(base, decay_norms_and_biases=decay_all))
        t.step(batch_for(t))
        params[decay_all] = copies(t.params())
    assert t.config["beta1"] == 0.8 and t.config["eps"] == 1e-6
    # After one step only the LayerNorm gains (ones) differ: the matrices are
    # decayed either way, and the biases start at 0, where decay does nothing.
    for name, a in params[False].items():
        same = np.array_equal(a, params[True][name])
        assert same == (not name.endswith(".gamma")), name
    assert sum(name.endswith(".gamma") for name in params[False]) == 2 * TINY_GPT["n_layer"] + 1


def test_bad_batches_are_refused_before_any_compute():
    t = tessel.Trainer(SGD)
    good = batch_for(t)
    with pytest.raises(tessel.Error, match="batch lacks input 'targets'"):
        t.step({"tokens": good["tokens"]})
    with pytest.raises(tessel.Error, match="batch has 'images', which is not an input"):
        t.step(dict(good, images=np.zeros(3)))
    with pytest.raises(tessel.Error, match=r"input 'tokens' has shape .*; the array's sizes are"):
        t.step(dict(good, tokens=good["tokens"][:, :5]))
    with pytest.raises(tessel.Error, match="must be an array of integers"):
        t.step(dict(good, tokens=good["tokens"].astype(np.float32)))
    bad = good["targets"].copy()
    bad[1, 2] = 256
    outside = r"input 'targets': id 256 at element 18 is outside \[0, 256\)"
    with pytest.raises(tessel.Error, match=outside):
        t.step(dict(good, targets=bad))
    bad[1, 2] = 2**32 + 5  # would wrap to 5 in int32
    with pytest.raises(tessel.Error, match=r"holds 4294967301 at flat index 18, outside"):
        t.step(dict(good, targets=bad))
    assert t.steps_done == 0


MESH_SCRIPT = """
import json, sys, numpy as np, tessel
config, out = json.loads(sys.argv[1]), sys.argv[2]
t = tessel.Trainer(config)
rng = np.random.default_rng(5)
losses = []
for step in range(3):
    ids = rng.integers(0, 256, (config["batch"], config["context"] + 1))
    losses.append(t.step({"tokens": ids[:, :-1], "targets": ids[:, 1:]})["loss"])
t.save_checkpoint(out)
if t.is_root:
    print("LOSSES", json.dumps(losses))
"""


def test_own_batches_train_alike_on_a_mesh_and_one_process(tmp_path):
    """The same NumPy batches on data=2,model=2 (every rank passes the whole
    batch) train a Llama to one process's losses and weights (rel 1e-5).
    SGD, so that the weights differ as the gradients do: AdamW's first
    steps move every element by about lr whatever its gradient's size, so
    on these random tokens the small output projections' summation-order
    noise reaches 1e-5 of their norm (AdamW's invariance is the layout
    matrix's, tests/layout)."""
    config = dict(TINY_GPT, model="llama", n_kv_head=2, multiple_of=32, optimizer="sgd", lr=0.1)
    script = tmp_path / "own_batches.py"
    script.write_text(MESH_SCRIPT)
    env_path = os.environ.get("PYTHONPATH", "")
    mesh = run(mpirun(4) + ["-x", f"PYTHONPATH={env_path}", sys.executable, str(script),
                            json.dumps(dict(config, mesh="data=2,model=2")), str(tmp_path / "m")])
    one = run([sys.executable, str(script), json.dumps(config), str(tmp_path / "o")])

    def losses(out):
        return json.loads(next(line for line in out.splitlines() if line.startswith("LOSSES"))[7:])

    assert rel_diff(losses(mesh), losses(one)) <= 1e-5, (mesh, one)
    got = tessel.read_safetensors(str(tmp_path / "m" / "model.safetensors"))
    want = tessel.read_safetensors(str(tmp_path / "o" / "model.safetensors"))
    assert sorted(got) == sorted(want)
    for name in want:
        assert rel_diff(got[name], want[name]) <= 1e-5, name
