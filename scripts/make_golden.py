#!/usr/bin/python3
"""Writes tests/golden/gpt_tiny.safetensors: Tessel's GPT computed by PyTorch in float64.

Not needed by CI (the fixture is committed); run it only to regenerate the
fixture, with Debian's python3-torch (apt-get install python3-torch):

  TESSEL_GOLDEN_EXPORT=/tmp/init.safetensors build/tessel_tests \
      --gtest_also_run_disabled_tests --gtest_filter=GoldenGpt.DISABLED_ExportInitialParameters
  /usr/bin/python3 scripts/make_golden.py /tmp/init.safetensors tests/golden/gpt_tiny.safetensors

The input is Tessel's initial parameters (seed 1) for the config below. Tessel
initialises biases and LayerNorm betas to 0 and gammas to 1; so that the test
also exercises those, this script adds 0.1 * N(0, 1) noise (torch seed 0) to
every such constant-initialised parameter, rounded to float32. The batch is
drawn from the same generator. The model mirrors src/tessel/models/gpt.cc:
learned positions, pre-LN blocks (LayerNorm eps 1e-5, biased variance),
causal multi-head attention whose key projection has no bias, scores scaled
by 1/sqrt(head), a 4x MLP with tanh GELU, a final LayerNorm and an LM head
tied to the token embedding; the loss is the mean cross-entropy over
batch * context positions. The fixture holds the batch ("tokens",
"targets", I32), every parameter ("param.<name>", F32), and in F64 the
logits, the loss (a scalar) and every parameter's gradient ("grad.<name>").
"""
import json
import math
import struct
import sys

import torch

CONFIG = {"n_layer": 2, "n_head": 2, "d_model": 16, "context": 8, "vocab": 64, "batch": 2}
DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int32: "I32"}
TORCH_DTYPES = {"F32": torch.float32, "F64": torch.float64, "I32": torch.int32}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        t = torch.frombuffer(bytearray(body[begin:end]), dtype=TORCH_DTYPES[entry["dtype"]])
        out[name] = t.reshape(entry["shape"]).clone()
    return out


def write_safetensors(path, tensors, metadata):
    header = {"__metadata__": metadata}
    chunks, offset = [], 0
    for name, t in tensors:
        raw = t.contiguous().numpy().tobytes()
        header[name] = {
            "dtype": DTYPES[t.dtype],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def layernorm(x, p, name):
    return torch.nn.functional.layer_norm(
        x, x.shape[-1:], p[name + ".gamma"], p[name + ".beta"], eps=1e-5
    )


def gpt(p, tokens, targets):
    c = CONFIG
    T, H = c["context"], c["n_head"]
    x = p["wte"][tokens.long()] + p["wpe"][:T]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for layer in range(c["n_layer"]):
        b = f"block{layer}."
        h = layernorm(x, p, b + "ln1")
        q = torch.einsum("bse,ehd->bshd", h, p[b + "attn.wq"]) + p[b + "attn.bq"]
        k = torch.einsum("bse,ehd->bshd", h, p[b + "attn.wk"])
        v = torch.einsum("bse,ehd->bshd", h, p[b + "attn.wv"]) + p[b + "attn.bv"]
        scores = torch.einsum("bshd,bkhd->bhsk", q, k) / math.sqrt(c["d_model"] // H)
        probs = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        mixed = torch.einsum("bhsk,bkhd->bshd", probs, v)
        x = x + torch.einsum("bshd,hde->bse", mixed, p[b + "attn.wo"]) + p[b + "attn.bo"]
        h = layernorm(x, p, b + "ln2")
        h = torch.nn.functional.gelu(h @ p[b + "mlp.w1"] + p[b + "mlp.b1"], approximate="tanh")
        x = x + h @ p[b + "mlp.w2"] + p[b + "mlp.b2"]
    logits = layernorm(x, p, "ln_f") @ p["wte"].T
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
        if bool((t == t.flatten()[0]).all()):  # constant init: a bias, gamma or beta
            t = (t.double() + 0.1 * torch.randn(t.shape, generator=gen, dtype=torch.float64)).float()
        params[name] = t
    shape = (CONFIG["batch"], CONFIG["context"])
    tokens = torch.randint(0, CONFIG["vocab"], shape, generator=gen, dtype=torch.int32)
    targets = torch.randint(0, CONFIG["vocab"], shape, generator=gen, dtype=torch.int32)

    p64 = {n: t.double().requires_grad_() for n, t in params.items()}
    logits, loss = gpt(p64, tokens, targets)
    loss.backward()
    for n, t in p64.items():
        if t.grad is None:
            sys.exit(f"parameter {n} is not used by the model: does it match gpt.cc?")

    tensors = [("tokens", tokens), ("targets", targets)]
    tensors += [("param." + n, t) for n, t in params.items()]
    tensors += [("logits", logits.detach()), ("loss", loss.detach())]
    tensors += [("grad." + n, t.grad) for n, t in p64.items()]
    metadata = {k: str(v) for k, v in CONFIG.items()}
    metadata["generator"] = "scripts/make_golden.py, PyTorch " + torch.__version__ + ", float64"
    write_safetensors(out_path, tensors, metadata)
    print(f"{out_path}: loss {loss.item():.10f}, {len(params)} parameters")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: make_golden.py INIT.safetensors OUT.safetensors")
    main(sys.argv[1], sys.argv[2])
