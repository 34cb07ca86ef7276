"""PyTorch 2's scaled_dot_product_attention (is_causal=True) on the CPU, timed
forward alone and forward + backward, at the shapes of bench/attention_bench.cc
(6 heads of 64; batch 8 at context 128, batch 1 at context 2048), f32 and
bf16 tensors, q, k, v as (batch, heads, seq, head) (contiguous: SDPA's own
layout). Prints one CSV row per case: case,precision,fwd_ms,fwd_bwd_ms
(medians over ITERS timed iterations after WARMUP). Run by
bench/attention_vs_sdpa.sh beside Tessel's kernels; not part of CI.

Usage: python sdpa_attention.py [ITERS] [THREADS]
"""
import statistics
import sys
import time

import torch
import torch.nn.functional as F

HEADS, HEAD = 6, 64
CASES = [("gpt-bench", 8, 128), ("context2048_batch1", 1, 2048)]
WARMUP = 3


def median_ms(fn, iters):
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
    gen = torch.Generator().manual_seed(0)
    for name, batch, seq in CASES:
        for precision, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
            shape = (batch, HEADS, seq, HEAD)
            q, k, v, dout = (torch.rand(shape, generator=gen).mul(2).sub(1).to(dtype)
                             for _ in range(4))
            for t in (q, k, v):
                t.requires_grad_(True)

            def forward():
                with torch.no_grad():
                    F.scaled_dot_product_attention(q, k, v, is_causal=True)

            def forward_backward():
                for t in (q, k, v):
                    t.grad = None
                F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(dout)

            print(f"{name},{precision},{median_ms(forward, iters):.3f},"
                  f"{median_ms(forward_backward, iters):.3f}", flush=True)


if __name__ == "__main__":
    main()
