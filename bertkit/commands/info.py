"""`bertkit info --model DIR` (or `bertkit info DIR`): what a model directory holds: its config and parameter counts by part."""

from __future__ import annotations

import json
import os
import re
from collections import Counter

from bertkit.models.checkpoint import read_config, read_state_dict
from bertkit.models.families import families
from bertkit.peft import refuse_adapter_dir
from bertkit.commands.options import add_model_dir, resolve_models


def add_arguments(parser) -> None:
    add_model_dir(parser, "model directory (config.json + weights)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def parameter_counts(state: dict) -> dict[str, int]:
    """Parameters grouped by part: embeddings, each encoder layer (named as its family names its
    layers, `layer_modules`: BERT's `encoder.layer.N`), pooler, heads."""
    layer = re.compile("|".join(f"(?:{family.layer_modules})" for family in families()))
    counts: Counter[str] = Counter()
    for key, tensor in state.items():
        parts = key.split(".")
        if parts[0] in ("bert", "roberta", "albert", "electra", "model"):
            parts = parts[1:]
        found = layer.match(".".join(parts))
        if found:
            part = found.group(0)
        elif parts[0] in ("embeddings", "encoder", "pooler", "final_norm"):
            part = parts[0]
        else:
            part = "head:" + parts[0]
        counts[part] += tensor.numel()
    return dict(counts)


def run(args) -> int:
    resolve_models(args)  # ORG/NAME: its snapshot in the local Hugging Face cache
    refuse_adapter_dir(args.model, "inspect")
    config = read_config(args.model)  # of the family its config.json names
    counts = parameter_counts(read_state_dict(args.model))
    total = sum(counts.values())
    files = sorted(os.listdir(args.model))
    if args.json:
        print(json.dumps({"config": config.to_dict(), "parameters": counts, "total": total, "files": files},
                         ensure_ascii=False))
        return 0
    print(f"model: {args.model}")
    print(f"architecture: {', '.join(config.architectures or ['?'])} ({config.model_type})")
    print(f"shape: {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
          f"{config.num_attention_heads} heads, intermediate {config.intermediate_size}, "
          f"vocabulary {config.vocab_size}, positions {config.max_position_embeddings}")
    print("parameters:")
    for part, n in counts.items():
        print(f"  {part:<24} {n:>12,}")
    print(f"  {'total':<24} {total:>12,}")
    print(f"files: {', '.join(files)}")
    return 0
