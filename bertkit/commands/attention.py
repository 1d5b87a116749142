"""`bertkit attention --model DIR "text" [--pair TEXT] [--html F] [--png F] [--head L H] [--stats F] [--rollout]`.

Runs the model once with output_attentions=True, cuts padding off (stack_attentions), and
writes any of: the self-contained HTML viewer, a PNG heatmap (the layers x heads grid, or one
head with --head), per-head statistics as JSON lines. It always prints a short summary: the
heads that attend most to [CLS] / [SEP], the most local heads (smallest mean distance) and
the previous/next-token heads (Clark et al. 2019's categories). --rollout adds attention
rollout (Abnar & Zuidema 2020): which input tokens [CLS] at the last layer draws on.
The analysis is bertkit/analysis/attention_report.py.
"""

from __future__ import annotations

from bertkit.analysis.attention_report import TOP_HEADS, attention_report
from bertkit.commands.options import (add_device, add_precision, check_output_files, device_of, resolve_models,
                                      running_in)


def add_arguments(parser) -> None:
    parser.add_argument("text", help="the text to run (the first sentence of a pair)")
    parser.add_argument("--model", required=True, help="model directory (weights + tokenizer)")
    parser.add_argument("--pair", help="a second text: the input becomes [CLS] text [SEP] pair [SEP]")
    parser.add_argument("--html", metavar="FILE", help="write the interactive viewer (one self-contained file)")
    parser.add_argument("--png", metavar="FILE", help="write heatmaps: every head as a grid, or one head with --head")
    parser.add_argument("--head", nargs=2, type=int, metavar=("LAYER", "HEAD"),
                        help="plot only this head (0-based) in --png")
    parser.add_argument("--stats", metavar="FILE", help="write per-head statistics, one JSON line per (layer, head)")
    parser.add_argument("--rollout", action="store_true",
                        help="also compute attention rollout; with --png writes FILE-rollout.png")
    parser.add_argument("--max-length", type=int, default=None,
                        help="cut the input to this many tokens (default: the model's limit)")
    parser.add_argument("--top", type=int, default=TOP_HEADS, help="heads listed per category in the summary")
    add_device(parser)
    add_precision(parser)


def run(args) -> int:
    resolve_models(args)  # ORG/NAME: its snapshot in the local Hugging Face cache
    check_output_files(args, ("html", "png", "stats"))  # before any work: a folder, or a file in the model
    device = device_of(args)
    with running_in(args, device):
        attention_report(args.model, args.text, args.pair, max_length=args.max_length, top=args.top,
                         head=args.head, rollout=args.rollout, html=args.html, png=args.png, stats=args.stats,
                         device=device)
    return 0
