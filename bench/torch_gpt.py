#!/usr/bin/python3
"""PyTorch twin of Tessel's GPT, for bench/gpt_vs_torch.sh.

The same GPT as a Tessel config (--config, default examples/gpt-bench.json:
byte vocabulary 256, context 128, 6 pre-LayerNorm blocks of width 384 with 6
heads, batch 8): learned positions, a 4x GELU MLP, the output projection
tied to the token embedding, AdamW (lr 3e-4, betas 0.9/0.999, weight decay
0.1). The config's n_layer, n_head, d_model, context, vocab and batch set the
sizes (examples/gpt2-124m.json: GPT-2 124M). Attention is causal softmax over
stored scores (--attention manual, the default, as Tessel's unfused path) or
torch's fused scaled_dot_product_attention (--attention sdpa, as Tessel's
default fused op). It times whole training steps (zero_grad, forward, loss,
backward, update) on random tokens after warm-up and prints one line with
the median, e.g. `median=123.4 ms`.

--bf16 runs forward and loss under torch.autocast(device, torch.bfloat16):
PyTorch's mixed precision (f32 weights, gradients and optimizer; bf16
matmuls). Set OMP_NUM_THREADS / OPENBLAS_NUM_THREADS to --threads outside.

--device cuda runs it on the GPU (scripts/gpu-run.sh), TF32 off so that
f32 matmuls are f32 as Tessel's are; --compile wraps the model in
torch.compile. On the GPU a step's time ends at torch.cuda.synchronize().
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, CONTEXT, LAYERS, WIDTH, HEADS, BATCH = 256, 128, 6, 384, 6, 8
SDPA = False


def use_config(path, attention):
    """Sets the sizes from a Tessel config (its keys, with Tessel's defaults)."""
    global VOCAB, CONTEXT, LAYERS, WIDTH, HEADS, BATCH, SDPA
    c = json.load(open(path))
    VOCAB, CONTEXT = c.get("vocab", 256), c.get("context", CONTEXT)
    LAYERS, WIDTH, HEADS = c.get("n_layer", LAYERS), c.get("d_model", WIDTH), c.get("n_head", HEADS)
    BATCH = c.get("batch", BATCH)
    SDPA = attention == "sdpa"


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.out = nn.Linear(WIDTH, WIDTH)
        self.up = nn.Linear(WIDTH, 4 * WIDTH)
        self.down = nn.Linear(4 * WIDTH, WIDTH)
        causal = torch.ones(CONTEXT, CONTEXT, dtype=torch.bool).tril()
        self.register_buffer("causal", causal)

    def attend(self, h):
        b, t, _ = h.shape
        size = WIDTH // HEADS
        q, k, v = (z.reshape(b, t, HEADS, size).permute(0, 2, 1, 3)
                   for z in self.qkv(h).chunk(3, dim=-1))
        if SDPA:
            mixed = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.out(mixed.permute(0, 2, 1, 3).reshape(b, t, WIDTH))
        scores = q @ k.transpose(-1, -2) / math.sqrt(size)
        scores = scores.masked_fill(~self.causal[:t, :t], float("-inf"))
        mixed = scores.softmax(dim=-1) @ v
        return self.out(mixed.permute(0, 2, 1, 3).reshape(b, t, WIDTH))

    def forward(self, x):
        x = x + self.attend(self.norm1(x))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class Gpt(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, WIDTH)
        self.positions = nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.Sequential(*[Block() for _ in range(LAYERS)])
        self.norm = nn.LayerNorm(WIDTH)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, target):
        x = self.tokens(idx) + self.positions(torch.arange(idx.shape[1], device=idx.device))
        logits = self.norm(self.blocks(x)) @ self.tokens.weight.t()
        return F.cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--config", default="examples/gpt-bench.json")
    ap.add_argument("--attention", choices=["manual", "sdpa"], default="manual")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args()
    use_config(args.config, args.attention)
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    gpu = args.device == "cuda"
    if gpu:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    model = Gpt().to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.999), weight_decay=0.1)
    step_model = torch.compile(model) if args.compile else model
    idx = torch.randint(0, VOCAB, (BATCH, CONTEXT), device=args.device)
    target = torch.randint(0, VOCAB, (BATCH, CONTEXT), device=args.device)
    times = []
    for step in range(args.warmup + args.steps):
        sync()
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.bf16):
            loss = step_model(idx, target)
        loss.backward()
        opt.step()
        sync()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print(f"threads={args.threads} precision={'bf16' if args.bf16 else 'f32'} "
          f"median={median * 1e3:.1f} ms tokens_per_s={BATCH * CONTEXT / median:.0f} "
          f"loss={loss.item():.3f} torch={torch.__version__} attention={args.attention} "
          f"device={args.device} compile={int(args.compile)}"
          + (f" cuda={torch.version.cuda} gpu={torch.cuda.get_device_name()!r}" if gpu else ""),
          flush=True)


if __name__ == "__main__":
    main()
