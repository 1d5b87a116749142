"""`bertkit quickstart`: the main job on built-in defaults, end to end on real data.

1. Embed real sentences with the pretrained MiniLM encoder and compare them (cosine similarity).
Later stages (pre-training from scratch, fine-tuning) are added as the toolkit grows.
"""

from __future__ import annotations

import os

import numpy as np

HELP = "run the main job on the built-in defaults (real model, real data)"

PAIRS = [
    ("A man is eating food.", "A man is eating a piece of bread."),
    ("A man is eating food.", "The girl is carrying a baby."),
    ("Shares in the bank fell after the profit warning.", "The bank's stock dropped on weak earnings."),
    ("Shares in the bank fell after the profit warning.", "The striker scored twice in the final."),
]


def add_arguments(parser) -> None:
    parser.add_argument("--out", default="runs/quickstart", help="where results are written")
    parser.add_argument("--model", default=None, help="encoder directory (default: MiniLM)")


def embedding_demo(model_dir: str) -> None:
    from ..encode import SentenceEncoder

    encoder = SentenceEncoder.from_pretrained(model_dir)
    texts = sorted({t for pair in PAIRS for t in pair})
    vectors = dict(zip(texts, encoder.encode(texts)))
    print("== 1. sentence similarity with a pretrained encoder ==")
    print(f"model: {model_dir}")
    for a, b in PAIRS:
        cosine = float(np.dot(vectors[a], vectors[b]))
        print(f"  {cosine:6.3f}  {a!r} ~ {b!r}")


def run(args) -> int:
    from ..assets import minilm_dir

    os.makedirs(args.out, exist_ok=True)
    embedding_demo(args.model or minilm_dir())
    return 0
