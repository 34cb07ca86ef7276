"""A model Tessel does not ship, written in Python: a GPT with parallel
blocks and a gated MLP.

Each block reads one LayerNorm of its input and adds attention and MLP side
by side, x + attn(ln(x)) + mlp(ln(x)) (the GPT-J / PaLM block), and the MLP
is gated, gelu(x W1) * (x W3) W2 (GEGLU). Heads, hidden and vocab carry the
same dim names as the GPT, so the default layouts (`model` gets heads,
hidden, vocab) shard it with no extra code.

    PYTHONPATH=build/python python3 examples/python/parallel_gpt.py --steps 50
    mpirun -n 4 --oversubscribe env PYTHONPATH=build/python \\
        python3 examples/python/parallel_gpt.py --mesh data=2,model=2 --steps 50
"""

import numpy as np

import tessel


def build_parallel_gpt(b, config, batch, training):
    d_model, n_head, context = config["d_model"], config["n_head"], config["context"]
    B, S, E = ("batch", batch), ("seq", context), ("embed", d_model)
    H, K = ("heads", n_head), ("head", d_model // n_head)
    F, V = ("hidden", 2 * d_model), ("vocab", config["vocab"])

    tokens = b.input("tokens", [B, S], "i32")
    targets = b.input("targets", [B, S], "i32")
    wte = b.param("wte", [V, E])
    wpe = b.param("wpe", [("pos", context), E])
    x = b.add(b.embedding(wte, tokens, "vocab", "tok_emb"), b.rename(wpe, "pos", "seq"), "emb")
    scale = float(np.float32(1) / np.sqrt(np.float32(K[1])))
    for layer in range(config["n_layer"]):
        with b.scope(f"block{layer}"):
            gamma = b.param("ln.gamma", [E], init="ones")
            beta = b.param("ln.beta", [E], init="zeros")
            h = b.layernorm(x, gamma, beta, "embed")
            with b.scope("attn"):
                q = b.einsum(h, b.param("wq", [E, H, K]), ["batch", "seq", "heads", "head"], "q")
                k = b.einsum(h, b.param("wk", [E, H, K]), ["batch", "seq", "heads", "head"], "k")
                v = b.einsum(h, b.param("wv", [E, H, K]), ["batch", "seq", "heads", "head"], "v")
                k, v = b.rename(k, "seq", "kseq"), b.rename(v, "seq", "kseq")
                scores = b.einsum(q, k, ["batch", "heads", "seq", "kseq"], "scores")
                probs = b.softmax(scores, "kseq", scale, "seq", "probs")
                mixed = b.einsum(probs, v, ["batch", "seq", "heads", "head"], "mix")
                attn = b.einsum(mixed, b.param("wo", [H, K, E]), ["batch", "seq", "embed"], "o")
            with b.scope("mlp"):
                gate = b.gelu(b.einsum(h, b.param("w1", [E, F]), ["batch", "seq", "hidden"]))
                up = b.einsum(h, b.param("w3", [E, F]), ["batch", "seq", "hidden"], "up")
                down = b.einsum(b.mul(gate, up, "gated"), b.param("w2", [F, E]),
                                ["batch", "seq", "embed"], "down")
            x = b.add(x, b.add(attn, down, "branches"), "residual")
    gamma = b.param("ln_f.gamma", [E], init="ones")
    beta = b.param("ln_f.beta", [E], init="zeros")
    logits = b.einsum(b.layernorm(x, gamma, beta, "embed"), wte, ["batch", "seq", "vocab"],
                      "lm_head")
    return b.cross_entropy(logits, targets, "vocab", "loss"), logits


def register(name="parallel_gpt"):
    tessel.register_model(name, build_parallel_gpt)
    return name


if __name__ == "__main__":
    import runner

    runner.main(register(), "gpt-tiny.json")
