"""Micro-benchmark: fused QKV projection (one GEMM on concatenated weights) vs three GEMMs.

The attention block's projections + SDPA (training mode, dropout 0.1), forward and backward,
B=32, T=128; the fused variants concatenate the three HF-named weights at forward time, so the
state-dict keys would stay as they are. Timed alternately (harness.alternate), median ratio.

    python benchmarks/micro_qkv.py [--hidden 256] [--heads 4] [--repeats 15]
"""

from __future__ import annotations

import argparse
import sys

import harness

import torch
import torch.nn.functional as F


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    harness.setup_threads(args.threads)
    B, T, H, h = 32, 128, args.hidden, args.heads
    d = H // h
    torch.manual_seed(0)
    lin = [torch.nn.Linear(H, H) for _ in range(3)]
    x = torch.randn(B, T, H, requires_grad=True)

    def attend(q, k, v):
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
        out.transpose(1, 2).reshape(B, T, H).sum().backward()

    def three():
        attend(*[layer(x).view(B, T, h, d).transpose(1, 2) for layer in lin])

    def fused_split():
        w, b = torch.cat([m.weight for m in lin]), torch.cat([m.bias for m in lin])
        attend(*[t.view(B, T, h, d).transpose(1, 2) for t in F.linear(x, w, b).split(H, dim=-1)])

    def fused_permute():
        w, b = torch.cat([m.weight for m in lin]), torch.cat([m.bias for m in lin])
        attend(*F.linear(x, w, b).view(B, T, 3, h, d).permute(2, 0, 3, 1, 4).unbind(0))

    times = harness.alternate({"three": three, "fused_split": fused_split, "fused_permute": fused_permute},
                              args.repeats, 2, 3)
    for name in ("fused_split", "fused_permute"):
        ratios = harness.speedups(times, "three", name)
        print(f"QKV {name} vs three GEMMs (H={H}): speed = {harness.ratio_text(ratios)}")


if __name__ == "__main__":
    main(sys.argv[1:])
