"""Graphs with named dims from Python: shapes, errors that name the dims,
and NumPy in and out of a compiled program without copies."""

import numpy as np
import pytest

import tessel


def test_einsum_contracts_the_dims_absent_from_the_output():
    b = tessel.Builder()
    x = b.input("x", {"batch": 3, "embed": 4})
    w = b.param("w", [("embed", 4), ("hidden", 5)])
    y = b.einsum(x, w, ["batch", "hidden"], "fc")
    assert b.shape(y) == [("batch", 3), ("hidden", 5)]
    assert b.dtype(y) == "f32"
    with b.scope("block0"):
        g = b.param("gamma", {"hidden": 5}, init="ones")
    assert list(b.params()) == ["w", "block0.gamma"]


def test_shape_errors_are_tessel_errors_naming_the_dims():
    b = tessel.Builder()
    x = b.input("x", {"batch": 3, "embed": 4})
    w = b.param("w", {"hidden": 4, "out": 5})  # same size, different name
    with pytest.raises(tessel.Error) as e:
        b.einsum(x, w, ["batch", "out"], "fc")
    msg = str(e.value)
    assert "fc" in msg and "embed" in msg and "hidden" in msg, msg
    assert isinstance(e.value, RuntimeError)
    with pytest.raises(tessel.Error, match="seq"):
        b.softmax(x, "seq")


def test_bad_config_raises_naming_the_key():
    with pytest.raises(tessel.Error, match="n_layr.*n_layer"):
        tessel.resolve_config({"n_layr": 2})
    with pytest.raises(tessel.Error, match="model.*nope"):
        tessel.resolve_config({"model": "nope"})


def test_numpy_round_trip():
    b = tessel.Builder()
    x = b.input("x", {"batch": 2, "embed": 3})
    w = b.param("w", {"embed": 3, "hidden": 4})
    y = b.relu(b.einsum(x, w, ["batch", "hidden"]))
    s = b.reduce_sum(y, ["hidden"])
    prog = tessel.Program(b, [y, s])

    weight = np.arange(12, dtype=np.float32).reshape(3, 4) / 10 - 0.5
    prog.bind_param("w", weight)
    xs = np.array([[1, 2, 3], [-1, 0, 2]], dtype=np.float32)
    out_y, out_s = prog.run(x=xs)
    want = np.maximum(xs @ weight, 0)
    np.testing.assert_allclose(out_y, want, rtol=1e-6)
    np.testing.assert_allclose(out_s, want.sum(axis=1), rtol=1e-6)
    assert out_y.shape == (2, 4)
    assert prog.input("x").tolist() == xs.tolist()

    # The bound array is the parameter's storage: changing it changes the next run.
    weight *= 2
    prog.set_input("x", -xs)
    assert prog.input("x").tolist() == (-xs).tolist()
    out_y2, _ = prog.run()
    np.testing.assert_allclose(out_y2, np.maximum(-xs @ weight, 0), rtol=1e-6)
    # Outputs are copies out of the program's arena: the earlier ones keep their values.
    np.testing.assert_allclose(out_y, want, rtol=1e-6)
    np.testing.assert_allclose(prog.output(y), out_y2, rtol=0)


def test_bind_param_checks_dtype_and_sizes():
    b = tessel.Builder()
    x = b.input("x", {"embed": 3})
    w = b.param("w", {"embed": 3, "hidden": 4})
    prog = tessel.Program(b, [b.einsum(x, w, ["hidden"])])
    with pytest.raises(tessel.Error, match="float32"):
        prog.bind_param("w", np.zeros((3, 4)))  # float64
    with pytest.raises(tessel.Error, match="embed=3"):
        prog.bind_param("w", np.zeros((4, 3), dtype=np.float32))
    with pytest.raises(tessel.Error, match="no parameter named 'v'"):
        prog.bind_param("v", np.zeros((3, 4), dtype=np.float32))
    with pytest.raises(tessel.Error, match="'w' is not bound"):
        prog.run(x=np.ones(3))


def test_init_params_gives_the_trainers_initial_values(pygpt):
    b = tessel.Builder()
    config = tessel.resolve_config({"model": "gpt", "n_layer": 1, "d_model": 32, "n_head": 2,
                                    "context": 8})
    loss, logits = tessel.build_model(config, b, batch=2)
    prog = tessel.Program(b, [loss, logits])
    params = prog.init_params(config["seed"])
    assert params["wte"].shape == (256, 32) and params["block0.ln1.gamma"].tolist() == [1] * 32
    assert 0.01 < params["wte"].std() < 0.03  # normal(0, 0.02)
    tokens = np.arange(16, dtype=np.int32).reshape(2, 8)
    l, lg = prog.run(tokens=tokens, targets=(tokens + 1) % 256)
    assert lg.shape == (2, 8, 256)
    assert abs(float(l) - np.log(256)) < 0.05  # near chance at initialisation
    # The trainer starts from the same values (Philox keyed by name and index).
    trainer = tessel.Trainer(dict(config, threads=1))
    for name, value in trainer.params().items():
        assert np.array_equal(value, params[name]), name


def test_a_lent_builder_dies_with_the_call():
    kept = []

    def model(b, config, batch, training):
        kept.append(b)
        x = b.input("images", {"batch": batch, "pixel": 784})
        y = b.input("labels", {"batch": batch}, dtype="i32")
        logits = b.einsum(x, b.param("w", {"pixel": 784, "class": 10}), ["batch", "class"])
        return b.cross_entropy(logits, y, "class"), logits

    tessel.register_model("lent_builder_probe", model)
    assert "lent_builder_probe" in tessel.registered_models()
    tessel.build_model({"model": "lent_builder_probe", "data": "fashion-mnist"}, tessel.Builder(), 4)
    with pytest.raises(tessel.Error, match="lent to a model function"):
        kept[0].input("z", {"batch": 1})


def test_llama_ops_match_numpy():
    """silu, sigmoid, sqrt, rsqrt, rmsnorm and rotary against NumPy in float64."""
    b = tessel.Builder()
    x = b.input("x", {"seq": 3, "heads": 2, "head": 4})
    pos = b.input("pos", {"seq": 3, "heads": 2, "head": 4})
    g = b.param("g", {"head": 4})
    outs = [b.silu(x), b.sigmoid(x), b.sqrt(pos), b.rsqrt(pos), b.rmsnorm(x, g, "head", 1e-5),
            b.rotary(x, "head", "seq", 10000.0)]
    prog = tessel.Program(b, outs)
    gamma = np.array([0.5, 1.0, 1.5, 2.0], dtype=np.float32)
    prog.bind_param("g", gamma)
    xs = np.linspace(-3, 3, 24, dtype=np.float32).reshape(3, 2, 4)
    ps = np.linspace(0.1, 5, 24, dtype=np.float32).reshape(3, 2, 4)
    silu, sigmoid, sqrt, rsqrt, rms, rot = prog.run(x=xs, pos=ps)
    xd = xs.astype(np.float64)
    sig = 1 / (1 + np.exp(-xd))
    np.testing.assert_allclose(sigmoid, sig, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(silu, xd * sig, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(sqrt, np.sqrt(ps), rtol=1e-6)
    np.testing.assert_allclose(rsqrt, 1 / np.sqrt(ps), rtol=1e-6)
    want_rms = xd / np.sqrt((xd ** 2).mean(axis=-1, keepdims=True) + 1e-5) * gamma
    np.testing.assert_allclose(rms, want_rms, rtol=1e-5, atol=1e-6)
    # Meta's convention: pairs (2i, 2i+1), angle p * theta^(-2i/4).
    angle = np.arange(3)[:, None] * 10000.0 ** (-np.arange(2) * 2 / 4)[None, :]  # (seq, pair)
    c, s = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    x0, x1 = xd[..., 0::2], xd[..., 1::2]
    want_rot = np.stack([x0 * c - x1 * s, x0 * s + x1 * c], axis=-1).reshape(3, 2, 4)
    np.testing.assert_allclose(rot, want_rot, rtol=1e-6, atol=1e-6)


def test_linear_cross_entropy_is_the_lm_heads_cross_entropy():
    """The fused LM head and loss against NumPy's logits and cross-entropy."""
    b = tessel.Builder()
    h = b.input("h", {"batch": 2, "seq": 3, "embed": 4})
    labels = b.input("labels", {"batch": 2, "seq": 3}, dtype="i32")
    w = b.param("w", {"vocab": 5, "embed": 4})
    loss = b.linear_cross_entropy(h, w, labels, "vocab", "embed")
    assert b.shape(loss) == []
    prog = tessel.Program(b, [loss])
    weight = np.linspace(-1, 1, 20, dtype=np.float32).reshape(5, 4)
    prog.bind_param("w", weight)
    hs = np.linspace(-2, 2, 24, dtype=np.float32).reshape(2, 3, 4)
    ys = np.array([[0, 4, 2], [1, 3, 0]], dtype=np.int32)
    (got,) = prog.run(h=hs, labels=ys)
    logits = hs.astype(np.float64) @ weight.T.astype(np.float64)
    lse = np.log(np.exp(logits).sum(axis=-1))
    want = (lse - np.take_along_axis(logits, ys[..., None], axis=-1)[..., 0]).mean()
    np.testing.assert_allclose(got, want, rtol=1e-6)
