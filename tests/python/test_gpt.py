"""The GPT written in Python (examples/python/gpt.py) against the built-in
GPT: the same graph node for node, and `tessel train`'s losses and weights
bitwise on one process; then checkpoints, evaluation and sampling."""

import json
import math
import os

import numpy as np
import pytest

import tessel
from conftest import CLI, TINY_GPT, run


def test_python_gpt_builds_the_builtin_graph(pygpt):
    cases = [(True, 0.0, "fused"), (True, 0.1, "fused"), (False, 0.1, "fused"),
             (True, 0.0, "unfused"), (True, 0.1, "unfused")]
    for training, dropout, attention in cases:
        config = dict(TINY_GPT, dropout=dropout, attention_dropout=dropout, attention=attention)
        want, got = tessel.Builder(), tessel.Builder()
        tessel.build_model(dict(config, model="gpt"), want, 8, training)
        tessel.build_model(dict(config, model=pygpt), got, 8, training)
        assert got.params() == want.params()
        assert got.graph_text() == want.graph_text()


@pytest.fixture(scope="module")
def runs(tmp_path_factory, pygpt):
    """The same config trained by the CLI's GPT and by the Python GPT."""
    tmp = tmp_path_factory.mktemp("gpt")
    config_file = tmp / "tiny.json"
    config_file.write_text(json.dumps(dict(TINY_GPT, model="gpt")))
    cli_out = tmp / "cli"
    run([CLI, "train", "--config", str(config_file), "--out", str(cli_out)])
    py_out = tmp / "python"
    trainer, lines = tessel.train(dict(TINY_GPT, model=pygpt), out=str(py_out))
    return {"cli": cli_out, "python": py_out, "lines": lines, "trainer": trainer}


def test_losses_and_weights_equal_the_cli_bitwise(runs):
    cli = tessel.read_metrics(str(runs["cli"]))
    py = tessel.read_metrics(str(runs["python"]))
    assert [m["step"] for m in py] == list(range(TINY_GPT["steps"]))
    assert [m["loss"] for m in py] == [m["loss"] for m in cli]
    assert [m["grad_norm"] for m in py] == [m["grad_norm"] for m in cli]
    assert [m.get("val_loss") for m in py] == [m.get("val_loss") for m in cli]
    assert py[-1]["loss"] < py[0]["loss"]
    want = tessel.read_safetensors(str(runs["cli"] / "checkpoint" / "model.safetensors"))
    got = tessel.read_safetensors(str(runs["python"] / "checkpoint" / "model.safetensors"))
    assert sorted(got) == sorted(want)
    for name in want:
        assert np.array_equal(got[name], want[name]), name
    # The trainer's own parameters (copies out of device memory) are the checkpoint's.
    params = runs["trainer"].params()
    assert np.array_equal(params["block1.mlp.w2"], got["block1.mlp.w2"])
    params["wte"][:] = 0  # a copy: the trainer's parameter is unchanged
    assert np.array_equal(runs["trainer"].params()["wte"], got["wte"])


def test_a_finished_python_run_reports_like_a_cli_run(runs):
    summary = json.loads((runs["python"] / "summary.json").read_text())
    lines = runs["lines"]
    assert summary["final_loss"] == lines[-1]["loss"]
    assert summary["final_val_loss"] == lines[-1]["val_loss"]
    assert summary["steps"] == TINY_GPT["steps"]
    cli = json.loads((runs["cli"] / "summary.json").read_text())
    for key in ("mesh", "layout", "precision", "baseline_loss"):
        assert summary[key] == cli[key], key
    out = run([CLI, "report", str(runs["python"]), str(runs["cli"]), "--out",
               str(runs["python"] / "report.html")])
    assert "did not finish" not in out, out


def test_checkpoint_resume_continues_exactly(runs, pygpt, tmp_path):
    config = dict(TINY_GPT, model=pygpt)
    first = tessel.Trainer(config)
    for _ in range(3):
        first.step()
    first.save_checkpoint(str(tmp_path / "step3"))
    assert tessel.read_checkpoint_info(str(tmp_path / "step3"))["step"] == 3
    resumed = tessel.Trainer(config)
    resumed.load_checkpoint(str(tmp_path / "step3"))
    assert resumed.steps_done == 3
    rest = [resumed.step()["loss"] for _ in range(3)]
    assert rest == [m["loss"] for m in runs["lines"][3:]]


def test_evaluate_and_sample_from_python(runs):
    trainer = runs["trainer"]
    val = trainer.evaluate()["val_loss"]
    assert val == runs["lines"][-1]["val_loss"]
    assert val < math.log(256)
    py_model = tessel.TextModel(str(runs["python"] / "checkpoint"))
    cli_model = tessel.TextModel(str(runs["cli"] / "checkpoint"))
    assert py_model.config["model"] == "pygpt" and py_model.step == TINY_GPT["steps"]
    text = py_model.sample("The ", 40, temperature=0.8, seed=7)
    assert isinstance(text, bytes) and len(text) == 40
    assert text == cli_model.sample("The ", 40, temperature=0.8, seed=7)
    score = py_model.score(b"The quick brown fox jumps over the lazy dog. " * 4)
    assert score["bytes_scored"] > 0 and 0 < score["nats_per_byte"] < 8
    # a byte-level model: one token per byte, so both rates agree
    assert score["tokens_scored"] == score["bytes_scored"]
    assert score["nats_per_token"] == pytest.approx(score["nats_per_byte"], rel=1e-12)
    assert score == cli_model.score(b"The quick brown fox jumps over the lazy dog. " * 4)


def test_errors_in_a_python_model_reach_python(pygpt):
    def broken(b, config, batch, training):
        x = b.input("tokens", {"batch": batch, "seq": config["context"]}, "i32")
        w = b.param("w", {"embed": 8, "vocab": 256})
        return b.einsum(x, w, ["batch", "seq", "vocab"], "bad_head"), None

    tessel.register_model("broken", broken)
    with pytest.raises(tessel.Error, match="bad_head") as e:
        tessel.Trainer(dict(TINY_GPT, model="broken"))
    assert "must be f32, got i32 (batch=8, seq=16)" in str(e.value), str(e.value)

    def raises(b, config, batch, training):
        raise KeyError("no such key in my model")

    tessel.register_model("raises", raises)
    with pytest.raises(KeyError, match="no such key"):
        tessel.Trainer(dict(TINY_GPT, model="raises"))
    with pytest.raises(tessel.Error, match="mesh data=3 has 3 ranks but 1 process"):
        tessel.Trainer(dict(TINY_GPT, model=pygpt, mesh="data=3"))


@pytest.mark.parametrize("extra", [{"recompute": "blocks"}, {"recompute": "selective"},
                                   {"microbatches": 2}, {"dropout": 0.1}],
                         ids=["recompute_blocks", "recompute_selective", "microbatches", "dropout"])
def test_python_gpt_equals_builtin_with_trainer_features(pygpt, extra):
    """Recomputation (which finds blocks by their labels), gradient
    accumulation and dropout treat the Python GPT as the built-in one."""
    losses = []
    for model in ("gpt", pygpt):
        trainer = tessel.Trainer(dict(TINY_GPT, model=model, **extra))
        losses.append([trainer.step()["loss"] for _ in range(3)])
    assert losses[0] == losses[1]
