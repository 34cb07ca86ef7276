#!/usr/bin/env python3
"""Writes tests/golden/rotate_half.json: Hugging Face's rotary convention in NumPy.

Not needed by CI (the file is committed); regenerate with any Python that has
NumPy: python3 scripts/make_rotate_half_reference.py tests/golden/rotate_half.json

Meta's Llama (and Tessel's rotary op) turns adjacent pairs (2i, 2i+1) of a
head; Hugging Face's LlamaForCausalLM turns (i, i + head/2) ("rotate_half"),
on q_proj and k_proj rows that transformers' conversion script
(convert_llama_weights_to_hf.py) permuted with
w.view(n_heads, head // 2, 2, dim).transpose(1, 2). This file holds, for one
head: that permutation ("hf_row_from_meta": HF row r holds Meta row
hf_row_from_meta[r]), random vectors x (positions x head, Meta's order), and
HF's rotary applied to the permuted x (float64), written from
transformers' apply_rotary_pos_emb: q * cos + rotate_half(q) * sin with
cos/sin of cat(freqs, freqs). tests/train/checkpoint/hf_llama_test.cc
checks that Tessel's rotary op followed by the export's permutation gives
the same numbers.
"""
import json
import sys

import numpy as np

HEAD, POSITIONS, THETA = 8, 6, 10000.0


def hf_permutation(head):
    rows = np.arange(head).reshape(1, head // 2, 2)  # one head, as view(n_heads, head // 2, 2, dim)
    return rows.transpose(0, 2, 1).reshape(head)


def hf_rotary(x, theta):
    d = x.shape[-1]
    inv_freq = 1.0 / (theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
    freqs = np.outer(np.arange(x.shape[0], dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    rotate_half = np.concatenate([-x[:, d // 2 :], x[:, : d // 2]], axis=-1)
    return x * np.cos(emb) + rotate_half * np.sin(emb)


def main(out_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((POSITIONS, HEAD)).astype(np.float32)
    perm = hf_permutation(HEAD)
    rotated = hf_rotary(x[:, perm].astype(np.float64), THETA)
    doc = {
        "generator": "scripts/make_rotate_half_reference.py, NumPy " + np.__version__,
        "head": HEAD,
        "theta": THETA,
        "hf_row_from_meta": perm.tolist(),
        "x": x.astype(np.float64).tolist(),
        "hf_rotated": rotated.tolist(),
    }
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"{out_path}: head {HEAD}, {POSITIONS} positions")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_rotate_half_reference.py OUT.json")
    main(sys.argv[1])
