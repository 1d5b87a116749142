"""Linformer's low-rank attention against dense SDPA at long inputs: encoder forward, same weights.

Two BertModels of the same shape and weights (the low-rank one also has its E, F projections,
`attention_low_rank` = k, headwise sharing) run a forward pass (eval, no_grad, batch 1) on the
same T random tokens; timing alternates the two with the order flipped each repeat
(harness.alternate) and the speed ratio t_dense / t_low_rank of each repeat is reported as its
median, min and max. Attention is a small share of a short input's work (the projections and the
feed-forward grow with T, attention with T^2), so the ratio is expected to grow with T.

Memory: each model's forward runs again in a fresh interpreter (`--memory-child`, harness) for
its peak resident set after the warm-up call (weights and allocator pools in place), and the
size of one layer's attention probabilities is printed as arithmetic: heads x T x T floats for
the dense formula, heads x T x k for the low-rank one (SDPA's fused CPU kernel need not hold the
dense matrix whole, which is why the measured peak is printed beside it).

    python benchmarks/bench_linformer.py [--lengths 512 2048] [--rank 128] [--repeats 7] [--threads 2]
                                         [--no-memory] [--label NAME]
    python benchmarks/bench_linformer.py --smoke     # tiny sizes, one repeat: checks the script runs

Without --smoke the numbers go to benchmarks/results/linformer[-NAME].json.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import harness

import torch

from bertkit.models.config import BertConfig
from bertkit.models.encoder import BertModel

VARIANTS = ("sdpa", "low_rank")


def models(length: int, rank: int, hidden: int, layers: int, heads: int) -> dict[str, BertModel]:
    shape = dict(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                 intermediate_size=4 * hidden, max_position_embeddings=length)
    torch.manual_seed(0)
    dense = BertModel(BertConfig(**shape)).eval()
    low_rank = BertModel(BertConfig(**shape, attention_low_rank=rank)).eval()
    missing, unexpected = low_rank.load_state_dict(dense.state_dict(), strict=False)
    assert not unexpected and all("low_rank" in key for key in missing), missing  # only E, F differ
    return {"sdpa": dense, "low_rank": low_rank}


def probabilities_mb(heads: int, length: int, columns: int) -> float:
    """One layer's attention probabilities at batch 1: heads x T x columns fp32 values, in MB."""
    return heads * length * columns * 4 / 2 ** 20


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[512, 2048])
    p.add_argument("--rank", type=int, default=128, help="Linformer's k (projected keys per head)")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat: checks the script runs")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    p.add_argument("--label", default="", help="suffix for the result file name (e.g. threads1)")
    p.add_argument("--memory-child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.smoke:
        args.lengths, args.rank, args.hidden, args.layers, args.heads, args.repeats = [64], 16, 32, 1, 2, 1
    harness.setup_threads(args.threads)
    rows = []
    for length in args.lengths:
        pair = models(length, args.rank, args.hidden, args.layers, args.heads)
        ids = torch.randint(1000, 30000, (1, length))

        def forward(model):
            with torch.no_grad():
                return model(ids).last_hidden_state

        if args.memory_child:  # one warm-up forward, then the measured one (prints a MEMORY line)
            harness.measure_memory_in_child(lambda: forward(pair[args.memory_child]), 1, 1)
            continue
        times = harness.alternate({name: (lambda m=m: forward(m)) for name, m in pair.items()},
                                  args.repeats, 1 if args.smoke else 2, 1)
        ratios = harness.speedups(times, "sdpa", "low_rank")
        row = {"length": length, "times": times, "ratio_median": statistics.median(ratios),
               "ratio_min": min(ratios), "ratio_max": max(ratios),
               "seconds_median": {name: statistics.median(t) for name, t in times.items()},
               "probabilities_mb_per_layer": {"sdpa": probabilities_mb(args.heads, length, length),
                                              "low_rank": probabilities_mb(args.heads, length, args.rank)}}
        print(f"LINFORMER T={length} k={args.rank} H={args.hidden} L={args.layers}: low_rank / sdpa speed = "
              f"{harness.ratio_text(ratios)}, {args.threads} thread(s); median seconds sdpa "
              f"{row['seconds_median']['sdpa']:.3f}, low_rank {row['seconds_median']['low_rank']:.3f}; "
              f"probabilities per layer {row['probabilities_mb_per_layer']['sdpa']:.1f} MB dense, "
              f"{row['probabilities_mb_per_layer']['low_rank']:.1f} MB low rank", flush=True)
        if not (args.no_memory or args.smoke):
            row["memory"] = harness.memory_in_subprocesses([*sys.argv, "--lengths", str(length)], VARIANTS)
            print("  peak RSS of a forward: " + ", ".join(
                f"{name} {m['steady_peak_mb']:.0f} MB (before it {m['rss_before_mb']:.0f} MB)"
                for name, m in row["memory"].items()), flush=True)
        rows.append(row)
    summary = {"command": " ".join(["python", "benchmarks/bench_linformer.py", *(argv or [])]),
               "threads": args.threads, "rank": args.rank, "hidden": args.hidden, "layers": args.layers,
               "heads": args.heads, "repeats": args.repeats, "torch": torch.__version__, "rows": rows}
    if not (args.smoke or args.memory_child):
        harness.write_result("linformer", args.label, summary)
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
