"""Inference: sentence embeddings of ~400 real BBC texts with MiniLM (workload d).

bertkit: `SentenceEncoder.encode(texts, batch_size=32, max_length=256)`.
transformers: the plain way - `BertTokenizerFast` + `BertModel` (sdpa), batches of 32 in the
given order, each padded to its longest text (truncated at 256), mean pooling over real
tokens, L2 normalisation. Both under torch.inference_mode, tokenization included in the time.
The two outputs are checked equal within 1e-5 before timing.

Texts: 400 BBC paragraphs (titles and body paragraphs, 3 to ~380 tokens), a fixed sample.

    python benchmarks/bench_encode.py [--repeats N] [--smoke]
"""

from __future__ import annotations

import sys

import harness

import numpy as np
import torch
import torch.nn.functional as F
import transformers

from bertkit.data.assets import minilm_dir
from bertkit.models.config import BertConfig
from bertkit.inference.encode import SentenceEncoder

BATCH, MAX_LEN = 32, 256


def transformers_encoder(directory: str):
    tok = transformers.BertTokenizerFast.from_pretrained(directory)
    model = transformers.BertModel.from_pretrained(directory, attn_implementation="sdpa").eval()

    def encode(texts: list[str]) -> np.ndarray:
        out = []
        with torch.inference_mode():
            for i in range(0, len(texts), BATCH):
                batch = tok(texts[i:i + BATCH], padding=True, truncation=True, max_length=MAX_LEN,
                            return_tensors="pt")
                hidden = model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                out.append(F.normalize(mean, dim=-1))
        return torch.cat(out).numpy()

    return encode


def main(argv=None):
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--texts", type=int, default=400)
    args = p.parse_args(argv)
    args.warmup = max(0, args.warmup - 1)  # the equality check below is a warm-up call of each
    n_texts = 8 if args.smoke else args.texts
    texts = harness.bbc_paragraphs(n_texts, seed=0)
    directory = minilm_dir()

    def make_calls(only):
        calls = {}
        if only in (None, "bertkit"):
            encoder = SentenceEncoder.from_pretrained(directory)
            if args.compile:
                encoder.model.compile_layers()
            calls["bertkit"] = lambda: encoder.encode(texts, batch_size=BATCH, max_length=MAX_LEN,
                                                        show_progress=False)
        if only in (None, "transformers"):
            hf_encode = transformers_encoder(directory)
            calls["transformers"] = lambda: hf_encode(texts)
        if only is None:
            diff = float(np.abs(calls["bertkit"]() - calls["transformers"]()).max())
            assert diff < 1e-5, f"bertkit and transformers embeddings differ by {diff:.2e}"
            print(f"outputs agree: max |difference| = {diff:.1e}")
        return calls

    tok = transformers.BertTokenizerFast.from_pretrained(directory)
    lengths = [min(len(x), MAX_LEN) for x in tok(texts)["input_ids"]]
    cfg = BertConfig.from_pretrained(directory)
    flops = harness.encoder_flops(cfg, lengths)
    padded = sum(max(lengths[i:i + BATCH]) * len(lengths[i:i + BATCH]) for i in range(0, len(lengths), BATCH))
    name = "encode" + ("_smoke" if args.smoke else "") + ("_compiled" if args.compile else "")
    return harness.run(args, name, "tokens", sum(lengths), flops, make_calls,
                       notes=f"{n_texts} texts, {sum(lengths)} real tokens (min {min(lengths)}, max "
                             f"{max(lengths)}); in the given order batches of {BATCH} carry "
                             f"{100 * (1 - sum(lengths) / padded):.0f}% padding")


if __name__ == "__main__":
    main(sys.argv[1:])
