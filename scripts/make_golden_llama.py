#!/usr/bin/env python3
"""Writes tests/golden/llama_tiny.safetensors: Tessel's Llama computed by PyTorch in float64.

Not needed by CI (the fixture is committed); run it only to regenerate the
fixture, with any Python that has PyTorch (Debian's python3-torch, or a venv):

  TESSEL_GOLDEN_EXPORT=/tmp/llama_init.safetensors build/tessel_tests \
      --gtest_also_run_disabled_tests --gtest_filter=GoldenLlama.DISABLED_ExportInitialParameters
  python3 scripts/make_golden_llama.py /tmp/llama_init.safetensors tests/golden/llama_tiny.safetensors

The input is Tessel's initial parameters (seed 1) for the config below. Tessel
initialises every RMSNorm gain to 1; so that the test also exercises the
gains, this script adds 0.1 * N(0, 1) noise (torch seed 0) to every
constant-initialised parameter, rounded to float32. The batch is drawn from
the same generator.

The model is written here from Meta's Llama 3 reference (model.py), not from
Tessel's code: token embedding; pre-RMSNorm blocks (x * rsqrt(mean(x^2) +
eps) * gain); grouped-query attention whose key/value heads are repeated
(repeat_interleave) to the query heads, query head h using key/value head
h // (n_head / n_kv_head); rotary positions as complex multiplication of
adjacent pairs (view_as_complex), frequencies theta^(-2i/head) rescaled by
Llama 3.1's apply_scaling; causal softmax of q.k / sqrt(head); SwiGLU
w2(silu(w1 x) * w3 x); final RMSNorm; untied head; mean cross-entropy over
batch * context positions. The rotary settings make all three of
apply_scaling's regimes occur at head size 6 (wavelengths 6.3, 29 and 135
against the bounds 8 and 32): kept, blended and divided by the factor.

Tessel's weight shapes are its named-dim ones (wq: embed x kv_heads x group
x head, wo: kv_heads x group x head x embed, w1: embed x hidden, output:
embed x vocab); they are reshaped here into plain matrices. The fixture holds
the batch ("tokens", "targets", I32), every parameter ("param.<name>", F32),
and in F64 the logits, the loss (a scalar) and every parameter's gradient
("grad.<name>"); the config is the file's metadata.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden import read_safetensors, write_safetensors  # noqa: E402

CONFIG = {
    "n_layer": 2,
    "n_head": 4,
    "n_kv_head": 2,
    "d_model": 24,
    "context": 8,
    "vocab": 64,
    "batch": 2,
    "multiple_of": 32,
    "norm_eps": 1e-5,
    "rope_theta": 100.0,
}
ROPE_SCALING = {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 32,
}


def hidden_size(c):
    hidden = 2 * (4 * c["d_model"]) // 3
    m = c["multiple_of"]
    return m * ((hidden + m - 1) // m)


def apply_scaling(freqs, s):
    # Llama 3.1's rule, as in Meta's reference.
    low_wavelen = s["original_max_position_embeddings"] / s["low_freq_factor"]
    high_wavelen = s["original_max_position_embeddings"] / s["high_freq_factor"]
    out = []
    for f in freqs.tolist():
        wavelen = 2 * math.pi / f
        if wavelen < high_wavelen:
            out.append(f)
        elif wavelen > low_wavelen:
            out.append(f / s["factor"])
        else:
            smooth = (s["original_max_position_embeddings"] / wavelen - s["low_freq_factor"]) / (
                s["high_freq_factor"] - s["low_freq_factor"]
            )
            out.append((1 - smooth) * f / s["factor"] + smooth * f)
    return torch.tensor(out, dtype=torch.float64)


def rotary_table(head, context, theta):
    freqs = 1.0 / (theta ** (torch.arange(0, head, 2, dtype=torch.float64) / head))
    freqs = apply_scaling(freqs, ROPE_SCALING)
    angles = torch.outer(torch.arange(context, dtype=torch.float64), freqs)
    return torch.polar(torch.ones_like(angles), angles)  # (context, head / 2) complex128


def rotate(x, table):  # x: (batch, seq, heads, head)
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * table[None, :, None, :]).flatten(3)


def rmsnorm(x, gain):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + CONFIG["norm_eps"]) * gain


def attention(p, b, h, table):
    c = CONFIG
    B, T, E = h.shape
    H, KV = c["n_head"], c["n_kv_head"]
    D = E // H
    q = (h @ p[b + "attn.wq"].reshape(E, H * D)).view(B, T, H, D)
    k = (h @ p[b + "attn.wk"].reshape(E, KV * D)).view(B, T, KV, D)
    v = (h @ p[b + "attn.wv"].reshape(E, KV * D)).view(B, T, KV, D)
    q, k = rotate(q, table), rotate(k, table)
    k = k.repeat_interleave(H // KV, dim=2)
    v = v.repeat_interleave(H // KV, dim=2)
    scores = torch.einsum("bshd,bthd->bhst", q, k) / math.sqrt(D)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    probs = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
    mixed = torch.einsum("bhst,bthd->bshd", probs, v).reshape(B, T, H * D)
    return mixed @ p[b + "attn.wo"].reshape(H * D, E)


def llama(p, tokens, targets):
    c = CONFIG
    table = rotary_table(c["d_model"] // c["n_head"], c["context"], c["rope_theta"])
    x = p["tok_embeddings"][tokens.long()]
    for layer in range(c["n_layer"]):
        b = f"block{layer}."
        x = x + attention(p, b, rmsnorm(x, p[b + "attn_norm.gamma"]), table)
        h = rmsnorm(x, p[b + "mlp_norm.gamma"])
        gate = torch.nn.functional.silu(h @ p[b + "mlp.w1"])
        x = x + (gate * (h @ p[b + "mlp.w3"])) @ p[b + "mlp.w2"]
    logits = rmsnorm(x, p["norm_f.gamma"]) @ p["output"]
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, c["vocab"]), targets.reshape(-1).long()
    )
    return logits, loss


def main(init_path, out_path):
    init = read_safetensors(init_path)
    gen = torch.Generator().manual_seed(0)
    params = {}
    for name, t in init.items():
        if t.dtype != torch.float32:
            sys.exit(f"{init_path}: parameter {name} is {t.dtype}, expected float32")
        if bool((t == t.flatten()[0]).all()):  # constant init: an RMSNorm gain
            t = (t.double() + 0.1 * torch.randn(t.shape, generator=gen, dtype=torch.float64)).float()
        params[name] = t
    want_hidden = hidden_size(CONFIG)
    if params["block0.mlp.w1"].shape[-1] != want_hidden:
        sys.exit(f"{init_path}: w1 has hidden {params['block0.mlp.w1'].shape[-1]}, "
                 f"expected {want_hidden}: does the config match?")
    shape = (CONFIG["batch"], CONFIG["context"])
    tokens = torch.randint(0, CONFIG["vocab"], shape, generator=gen, dtype=torch.int32)
    targets = torch.randint(0, CONFIG["vocab"], shape, generator=gen, dtype=torch.int32)

    p64 = {n: t.double().requires_grad_() for n, t in params.items()}
    logits, loss = llama(p64, tokens, targets)
    loss.backward()
    for n, t in p64.items():
        if t.grad is None:
            sys.exit(f"parameter {n} is not used by the model: does it match llama.cc?")

    tensors = [("tokens", tokens), ("targets", targets)]
    tensors += [("param." + n, t) for n, t in params.items()]
    tensors += [("logits", logits.detach()), ("loss", loss.detach())]
    tensors += [("grad." + n, t.grad) for n, t in p64.items()]
    metadata = {k: str(v) for k, v in CONFIG.items()}
    metadata["rope_scaling"] = str(ROPE_SCALING)
    metadata["generator"] = (
        "scripts/make_golden_llama.py, PyTorch " + torch.__version__ + ", float64"
    )
    write_safetensors(out_path, tensors, metadata)
    print(f"{out_path}: loss {loss.item():.10f}, {len(params)} parameters")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: make_golden_llama.py INIT.safetensors OUT.safetensors")
    main(sys.argv[1], sys.argv[2])
