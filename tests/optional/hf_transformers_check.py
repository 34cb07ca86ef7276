#!/usr/bin/env python3
"""Optional check (not in CI, which has no PyTorch): Hugging Face transformers
reads Tessel's Llama export and Tessel reads transformers' checkpoints.

Run with a Python that has torch, transformers and numpy, from the
repository root after building `tessel_cli` and the Python module `_tessel`:

  python tests/optional/hf_transformers_check.py [--tessel build/tessel]
      [--pythonpath build/python] [--tessel-python /usr/bin/python3] [--work DIR]

1. Export: `tessel train` a small Llama (grouped-query attention, Llama 3.1
   rotary scaling) for a few steps, `tessel export --format hf`, load it
   with LlamaForCausalLM.from_pretrained and compare its logits on a random
   batch with Tessel's (computed from the checkpoint by the `tessel` Python
   module, in a subprocess under --tessel-python, the interpreter the module
   was built for): max |diff| / max |tessel| must be at most 1e-5.
2. Import: a randomly initialised LlamaForCausalLM saved by transformers
   (save_pretrained, safetensors) is imported with `tessel import --format
   hf`; Tessel's logits from the imported checkpoint must match
   transformers' (1e-5), and `tessel train --resume` continues training
   from it (3 steps, finite losses, a checkpoint at step 3).
Prints each figure; exits non-zero on the first failure.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers

TOLERANCE = 1e-5

TESSEL_CONFIG = {
    "model": "llama", "n_layer": 2, "n_head": 4, "n_kv_head": 2, "d_model": 64,
    "context": 32, "multiple_of": 32, "rope_theta": 500000,
    "rope_scaling": {"factor": 8, "low_freq_factor": 1, "high_freq_factor": 4,
                     "original_max_position_embeddings": 16},
    "batch": 4, "steps": 20, "lr": 1e-2, "warmup_steps": 2, "eval_every": 0, "eval_batches": 1,
}

# Runs under the interpreter the tessel module was built for: the checkpoint's
# logits for tokens.npy, written to logits.npy.
TESSEL_LOGITS = r"""
import sys, numpy as np, tessel
ckpt, tokens_path, out_path = sys.argv[1:]
config = tessel.read_checkpoint_info(ckpt)["config"]
tokens = np.load(tokens_path).astype(np.int32)
b = tessel.Builder()
loss, logits = tessel.build_model(config, b, tokens.shape[0], False)
p = tessel.Program(b, [logits])
params = tessel.read_safetensors(ckpt + "/model.safetensors")
for name in b.params():
    p.bind_param(name, np.ascontiguousarray(params[name], dtype=np.float32))
(out,) = p.run(tokens=tokens, targets=tokens)
np.save(out_path, out)
"""


def run(cmd, **kw):
    print("+", " ".join("<script>" if "\n" in c else c for c in cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def tessel_logits(args, ckpt, tokens, work):
    np.save(os.path.join(work, "tokens.npy"), tokens)
    out = os.path.join(work, "logits.npy")
    env = dict(os.environ, PYTHONPATH=args.pythonpath)
    run([args.tessel_python, "-c", TESSEL_LOGITS, ckpt, os.path.join(work, "tokens.npy"), out],
        env=env)
    return np.load(out).astype(np.float64)


def hf_logits(model, tokens):
    with torch.no_grad():
        return model(torch.from_numpy(tokens.astype(np.int64))).logits.double().numpy()


def compare(what, tessel, hf):
    err = np.abs(tessel - hf).max() / np.abs(tessel).max()
    print(f"{what}: max|tessel - transformers| / max|tessel| = {err:.3g} "
          f"(logits {tessel.shape}, limit {TOLERANCE})")
    if not err <= TOLERANCE:
        sys.exit(f"FAIL: {what}")


def check_export(args, work):
    config_path = os.path.join(work, "tiny.json")
    with open(config_path, "w") as f:
        json.dump(TESSEL_CONFIG, f)
    run([args.tessel, "train", "--config", config_path, "--out", os.path.join(work, "run"),
         "--threads", "2"])
    ckpt, hf = os.path.join(work, "run", "checkpoint"), os.path.join(work, "hf")
    run([args.tessel, "export", "--format", "hf", ckpt, "--out", hf])
    model = transformers.LlamaForCausalLM.from_pretrained(
        hf, dtype=torch.float32, attn_implementation="eager").eval()
    tokens = np.random.default_rng(0).integers(0, 256, (3, TESSEL_CONFIG["context"]))
    compare("export (Tessel -> transformers)", tessel_logits(args, ckpt, tokens, work),
            hf_logits(model, tokens))


def check_import(args, work):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=32,
        rms_norm_eps=1e-5, tie_word_embeddings=False,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 16},
        rope_theta=500000.0)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():  # sharper attention than the 0.02 init: positions then matter
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(10)
            layer.self_attn.k_proj.weight.mul_(10)
    hf = os.path.join(work, "hf_saved")
    model.save_pretrained(hf, safe_serialization=True)
    ckpt = os.path.join(work, "imported")
    run([args.tessel, "import", "--format", "hf", hf, "--out", ckpt])
    tokens = np.random.default_rng(1).integers(0, 256, (2, 32))
    compare("import (transformers -> Tessel)", tessel_logits(args, ckpt, tokens, work),
            hf_logits(model, tokens))
    out = os.path.join(work, "resumed")
    run([args.tessel, "train", "--config", os.path.join(ckpt, "tessel_config.json"), "--resume",
         ckpt, "--out", out, "--set", "steps=3", "--set", "warmup_steps=1", "--set",
         "eval_every=0", "--set", "eval_batches=1", "--set", "batch=4", "--threads", "2"])
    with open(os.path.join(out, "metrics.jsonl")) as f:
        losses = [d["loss"] for d in map(json.loads, f) if "loss" in d]
    with open(os.path.join(out, "checkpoint", "manifest.json")) as f:
        step = json.load(f)["step"]
    print(f"imported checkpoint trained on: losses {losses}, checkpoint step {step}")
    if len(losses) != 3 or not all(np.isfinite(losses)) or step != 3:
        sys.exit("FAIL: training from the imported checkpoint")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tessel", default="build/tessel")
    parser.add_argument("--pythonpath", default="build/python")
    parser.add_argument("--tessel-python", default="/usr/bin/python3")
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    args.tessel, args.pythonpath = os.path.abspath(args.tessel), os.path.abspath(args.pythonpath)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    work = args.work or tempfile.mkdtemp(prefix="tessel_hf_check_")
    os.makedirs(work, exist_ok=True)
    check_export(args, work)
    check_import(args, work)
    print("OK: transformers and Tessel agree both ways")


if __name__ == "__main__":
    main()
