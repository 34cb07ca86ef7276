#!/usr/bin/env bash
# Bits per byte at equal compute: a small Llama on a BPE tokenizer of the
# fortunes text (examples/llama-fortunes-bpe.json, vocabulary 2000) against
# the same-size byte-level GPT and Llama, all three on token files of the
# same documents, so that the held-out documents are the same (the split is
# by documents, keyed by the seed). Equal compute: the byte-level runs get
# the BPE run's training FLOPs (its steps x its FLOPs per step, read from
# each run's progress line) in steps of their own FLOPs. Scores are
# `tessel eval --data` on the held-out documents: bits per byte.
# Run from the repo root: bench/bpe_vs_bytes.sh   (about 5 CPU minutes)
set -euo pipefail
B=${TESSEL:-build/tessel}
out=${OUT:-runs/bpe-vs-bytes}
mkdir -p "$out"
grep -m1 'model name' /proc/cpuinfo
"$B" tokenize train --input /usr/share/games/fortunes --separator % --vocab 2000 \
  --out "$out/fortunes.model" >/dev/null
"$B" tokenize encode --model "$out/fortunes.model" --input /usr/share/games/fortunes \
  --separator % --out "$out/fortunes.tok" >/dev/null
"$B" tokenize encode --input /usr/share/games/fortunes --separator % \
  --out "$out/fortunes-bytes.tok" >/dev/null
/usr/bin/python3 - "$B" "$out" <<'PY'
import json, re, subprocess, sys
tessel, out = sys.argv[1], sys.argv[2]
bpe = json.load(open("examples/llama-fortunes-bpe.json"))
bpe.update(token_file=f"{out}/fortunes.tok", tokenizer=f"{out}/fortunes.model")
def byte_level(model):
    c = dict(bpe, vocab=256, token_file=f"{out}/fortunes-bytes.tok", model=model)
    c.pop("tokenizer")
    if model == "gpt":
        c.pop("n_kv_head"), c.pop("multiple_of")
    return c
def train(name, config, steps):
    config = dict(config, steps=steps, eval_every=steps, sample_chars=0)
    path = f"{out}/{name}.json"
    json.dump(config, open(path, "w"))
    log = subprocess.run([tessel, "train", "--config", path, "--out", f"{out}/{name}", "--overwrite"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         check=True).stdout
    # FLOPs per token: the last progress line's GFLOP/s over its tokens/s.
    tps, gflops = re.findall(r"([\d.]+) tokens/s \| ([\d.]+) GFLOP/s", log)[-1]
    ev = subprocess.run([tessel, "eval", "--checkpoint", f"{out}/{name}/checkpoint", "--data",
                         config["token_file"]], capture_output=True, text=True, check=True).stdout
    score = json.loads(ev.strip().splitlines()[-1])
    return float(gflops) * 1e9 / float(tps), score["bits_per_byte"]
steps = bpe["steps"]
flops_bpe, bits_bpe = train("llama-bpe", bpe, steps)
rows = [("llama, BPE 2000", steps, flops_bpe, bits_bpe)]
for model in ("gpt", "llama"):
    probe, _ = train(f"{model}-probe", dict(byte_level(model), warmup_steps=5), 45)
    n = round(steps * flops_bpe / probe)
    f, bits = train(f"{model}-bytes", byte_level(model), n)
    rows.append((f"{model}, bytes", n, f, bits))
print(f"{'run':18} {'steps':>6} {'MFLOP/token':>12} {'bits/byte':>10}")
for name, n, f, bits in rows:
    print(f"{name:18} {n:6d} {f / 1e6:12.2f} {bits:10.3f}")
PY
