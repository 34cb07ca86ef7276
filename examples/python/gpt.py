"""The GPT written in Python: the same graph as src/tessel/models/gpt.cc.

Same parameter names (wte, wpe, block0.attn.wq, ...), same labels, same
nodes in the same order, so `"model": "pygpt"` trains to the built-in
"gpt"'s losses bitwise on one process (tests/python/test_gpt.py checks the
graphs are identical and the losses equal), and on any mesh within the
layout tolerance.

    PYTHONPATH=build/python python3 examples/python/gpt.py --steps 20
    mpirun -n 4 --oversubscribe env PYTHONPATH=build/python \\
        python3 examples/python/gpt.py --mesh data=2,model=2 --steps 20 --out runs/pygpt
"""

import numpy as np

import tessel


def build_gpt(b, config, batch, training):
    """fn(builder, config, batch, training) -> (loss, logits), for register_model."""
    n_layer, n_head, d_model = config["n_layer"], config["n_head"], config["d_model"]
    context, vocab = config["context"], config["vocab"]
    dropout, seed = config["dropout"], config["seed"]
    probs_dropout = config["attention_dropout"] if training else 0.0
    fused = config["attention"] == "fused"
    D = {
        "batch": ("batch", batch),
        "seq": ("seq", context),
        "embed": ("embed", d_model),
        "heads": ("heads", n_head),
        "head": ("head", d_model // n_head),
        "hidden": ("hidden", 4 * d_model),
        "vocab": ("vocab", vocab),
    }

    def shape(*names):
        return [D[n] for n in names]

    def residual_dropout(x, key):
        if not training or dropout <= 0:
            return x
        return b.dropout(x, dropout, seed, key)

    def layernorm(x, name):
        with b.scope(name):
            gamma = b.param("gamma", shape("embed"), init="ones")
            beta = b.param("beta", shape("embed"), init="zeros")
            return b.layernorm(x, gamma, beta, "embed")

    def attention(x):
        with b.scope("attn"):
            # No key bias: it only shifts each query's scores by a constant
            # softmax ignores (see gpt.cc).
            def project(name, with_bias):
                w = b.param("w" + name, shape("embed", "heads", "head"))
                y = b.einsum(x, w, ["batch", "seq", "heads", "head"], name)
                if not with_bias:
                    return y
                bias = b.param("b" + name, shape("heads", "head"), init="zeros")
                return b.add(y, bias, name + "_bias")

            q = project("q", True)
            k = b.rename(project("k", False), "seq", "kseq")
            v = b.rename(project("v", True), "seq", "kseq")
            # In float32, as gpt.cc computes it (1.0f / std::sqrt(float)).
            scale = float(np.float32(1) / np.sqrt(np.float32(d_model // n_head)))
            if fused:
                mixed, _ = b.attention(q, k, v, "seq", "kseq", "head", True, scale, "core",
                                       probs_dropout, seed, "probs_dropout")
            else:
                scores = b.einsum(q, k, ["batch", "heads", "seq", "kseq"], "scores")
                probs = b.softmax(scores, "kseq", scale, "seq", "probs")
                if probs_dropout > 0:
                    probs = b.dropout(probs, probs_dropout, seed, "probs_dropout")
                mixed = b.einsum(probs, v, ["batch", "seq", "heads", "head"], "mix")
            wo = b.param("wo", shape("heads", "head", "embed"))
            bo = b.param("bo", shape("embed"), init="zeros")
            return b.add(b.einsum(mixed, wo, ["batch", "seq", "embed"], "o"), bo, "o_bias")

    def mlp(x):
        with b.scope("mlp"):
            w1 = b.param("w1", shape("embed", "hidden"))
            b1 = b.param("b1", shape("hidden"), init="zeros")
            w2 = b.param("w2", shape("hidden", "embed"))
            b2 = b.param("b2", shape("embed"), init="zeros")
            h = b.bias_gelu(b.einsum(x, w1, ["batch", "seq", "hidden"], "fc"), b1, "act")
            return b.add(b.einsum(h, w2, ["batch", "seq", "embed"], "proj"), b2, "proj_bias")

    tokens = b.input("tokens", shape("batch", "seq"), "i32")
    targets = b.input("targets", shape("batch", "seq"), "i32")
    wte = b.param("wte", shape("vocab", "embed"))
    wpe = b.param("wpe", [("pos", context), D["embed"]])
    # C++ (GCC) evaluates the two arguments of gpt.cc's add right to left:
    # the position rename is added before the token embedding.
    pos = b.rename(wpe, "pos", "seq", "pos_emb")
    tok = b.embedding(wte, tokens, "vocab", "tok_emb")
    x = b.add(tok, pos, "emb")
    x = residual_dropout(x, "emb_dropout")
    for layer in range(n_layer):
        with b.scope(f"block{layer}"):
            x = b.add(x, residual_dropout(attention(layernorm(x, "ln1")), "attn_dropout"),
                      "attn_residual")
            x = b.add(x, residual_dropout(mlp(layernorm(x, "ln2")), "mlp_dropout"),
                      "mlp_residual")
    h = layernorm(x, "ln_f")
    logits = b.einsum(h, wte, ["batch", "seq", "vocab"], "lm_head")
    loss = b.cross_entropy(logits, targets, "vocab", "loss")
    return loss, logits


def register(name="pygpt"):
    tessel.register_model(name, build_gpt)
    return name


if __name__ == "__main__":
    import runner

    runner.main(register(), "gpt-tiny.json")
