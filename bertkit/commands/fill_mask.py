"""`bertkit fill-mask --model DIR "text with [MASK]" [--top-k 5]`: the model's best fillers.

The inference is bertkit/inference/fill_mask.py.
"""

from __future__ import annotations

from bertkit.inference.fill_mask import TOP_K, fill_mask
from bertkit.commands.options import add_device, add_precision, device_of, resolve_models, running_in


def add_arguments(parser) -> None:
    parser.add_argument("--model", required=True, help="model directory with an MLM head and a tokenizer")
    parser.add_argument("text", help="text containing the tokenizer's mask token, e.g. [MASK]")
    parser.add_argument("--top-k", type=int, default=TOP_K, help="fillers per mask")
    add_device(parser)
    add_precision(parser)


def run(args) -> int:
    resolve_models(args)  # ORG/NAME: its snapshot in the local Hugging Face cache
    device = device_of(args)
    with running_in(args, device):
        found = fill_mask(args.model, args.text, args.top_k, device=device)
    for n, fillers in enumerate(found, 1):
        print(f"mask {n}:")
        for token, prob in fillers:
            print(f"  {token:<20} {prob:.4f}")
    return 0
