"""int8 quality: cosine of bertkit int8 sentence vectors to fp32 on BBC texts (MiniLM).

Texts: BBC articles cut at random token counts (8-256, as bench_inference.py's "mixed" set,
`--texts` of them) plus every article's title line among them (short texts are the hard case:
a mean over few tokens averages few errors away), then "Thanks!", "Hi" and "ok". Variants of bertkit/inference/quantize.py:
  plain     per-channel weights, per-token activations (alpha=0, no fp32 columns)
  smooth    + SmoothQuant smoothing (alpha 0.5)
  int8      + 8 fp32 outlier columns per linear map: what quantize="int8" runs

    python benchmarks/int8_quality.py [--texts 384] [--threads 1] [--variants plain smooth int8] [--label L]
"""

from __future__ import annotations

import argparse
import json
import sys

import harness
from bench_inference import cut_texts

import numpy as np
import torch

from bertkit.data.assets import minilm_dir
from bertkit.inference.encode import SentenceEncoder
from bertkit.inference.quantize import quantize_int8

VARIANTS = {"plain": {"alpha": 0.0, "outliers": 0}, "smooth": {"alpha": 0.5, "outliers": 0},
            "int8": {}}
SHORT_TEXTS = ("Thanks!", "Hi", "ok")  # appended to the titles: the hardest cases


def text_sets(tokenizer, texts: int, titles: int, extra_titles: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """{"mixed": `texts` BBC articles cut at 8-256 tokens (seed 1), "titles": the title lines of
    every 20th article, the first `titles` of them, then `extra_titles`}."""
    title_lines = [harness.read_text(f).strip().split("\n")[0] for f in harness.bbc_files()[::20]][:titles]
    return {"mixed": cut_texts(tokenizer, 8, 256, texts, seed=1), "titles": title_lines + list(extra_titles)}


def cosines(encoder: SentenceEncoder, sets: dict[str, list[str]], reference: dict[str, np.ndarray]
            ) -> dict[str, np.ndarray]:
    """Per set, the cosine of each text's vector from `encoder` to its row of `reference` (the fp32
    encoder's `encode_sets`): vectors are L2-normalised, so the row-wise dot product."""
    return {name: (vectors * reference[name]).sum(1) for name, vectors in encode_sets(encoder, sets).items()}


def encode_sets(encoder: SentenceEncoder, sets: dict[str, list[str]]) -> dict[str, np.ndarray]:
    """Per set, the encoder's vectors of its texts (max_length 256, no progress bar)."""
    return {name: encoder.encode(t, max_length=256, show_progress=False) for name, t in sets.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--texts", type=int, default=384)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    p.add_argument("--label", help="written to benchmarks/results/int8-quality-LABEL.json (default: no label)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    fp32 = SentenceEncoder.from_pretrained(minilm_dir())
    original = fp32.model  # the fp32 model itself (the encoder runs a packed copy of it)
    sets = text_sets(fp32.tokenizer, args.texts, args.texts // 3, SHORT_TEXTS)
    reference = encode_sets(fp32, sets)
    result = {"texts": {k: len(v) for k, v in sets.items()}, "variants": {},
              "command": " ".join(["python", "benchmarks/int8_quality.py", *sys.argv[1:]])}
    for variant in args.variants:
        options = VARIANTS[variant]
        encoder = SentenceEncoder(quantize_int8(original, fp32.tokenizer, **options), fp32.tokenizer)
        row = {}
        for name, cosine in cosines(encoder, sets, reference).items():
            row[name] = {"min": float(cosine.min()), "p01": float(np.percentile(cosine, 1)),
                         "mean": float(cosine.mean()), "below_0.99": int((cosine < 0.99).sum())}
        result["variants"][variant] = row
        print(variant, json.dumps(row), flush=True)
    harness.write_result("int8-quality", args.label, result)


if __name__ == "__main__":
    main(sys.argv[1:])
