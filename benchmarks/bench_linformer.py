"""Linformer's low-rank attention against dense SDPA at long inputs: encoder forward, same weights.

Two BertModels of the same shape and weights (the low-rank one also has its E, F projections,
`attention_low_rank` = k, headwise sharing) run a forward pass (eval, no_grad, batch 1) on the
same T random tokens; timing alternates the two with the order flipped each repeat
(harness.alternate) and the speed ratio t_dense / t_low_rank of each repeat is reported as its
median, min and max. Attention is a small share of a short input's work (the projections and the
feed-forward grow with T, attention with T^2), so the ratio is expected to grow with T.

    python benchmarks/bench_linformer.py [--lengths 512 2048] [--rank 128] [--repeats 7] [--threads 2]
    python benchmarks/bench_linformer.py --smoke     # tiny sizes, one repeat: checks the script runs
"""

from __future__ import annotations

import argparse
import statistics
import sys

import harness

import torch

from bertkit.config import BertConfig
from bertkit.model import BertModel


def models(length: int, rank: int, hidden: int, layers: int, heads: int) -> dict[str, BertModel]:
    shape = dict(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                 intermediate_size=4 * hidden, max_position_embeddings=length)
    torch.manual_seed(0)
    dense = BertModel(BertConfig(**shape)).eval()
    low_rank = BertModel(BertConfig(**shape, attention_low_rank=rank)).eval()
    missing, unexpected = low_rank.load_state_dict(dense.state_dict(), strict=False)
    assert not unexpected and all("low_rank" in key for key in missing), missing  # only E, F differ
    return {"sdpa": dense, "low_rank": low_rank}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[512, 2048])
    p.add_argument("--rank", type=int, default=128, help="Linformer's k (projected keys per head)")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat: checks the script runs")
    args = p.parse_args(argv)
    if args.smoke:
        args.lengths, args.rank, args.hidden, args.layers, args.heads, args.repeats = [64], 16, 32, 1, 2, 1
    harness.setup_threads(args.threads)
    for length in args.lengths:
        pair = models(length, args.rank, args.hidden, args.layers, args.heads)
        ids = torch.randint(1000, 30000, (1, length))

        def forward(model):
            with torch.no_grad():
                return model(ids).last_hidden_state

        times = harness.alternate({name: (lambda m=m: forward(m)) for name, m in pair.items()},
                                  args.repeats, 1 if args.smoke else 2, 1)
        ratios = harness.speedups(times, "sdpa", "low_rank")
        print(f"LINFORMER T={length} k={args.rank} H={args.hidden} L={args.layers}: low_rank / sdpa speed = "
              f"{harness.ratio_text(ratios)}, {args.threads} thread(s); median seconds sdpa "
              f"{statistics.median(times['sdpa']):.3f}, low_rank {statistics.median(times['low_rank']):.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
