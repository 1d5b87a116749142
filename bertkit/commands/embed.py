"""`bertkit embed --model DIR --input FILE --output FILE.npy`: sentence embeddings, one per line
(or, for a CSV, TSV or JSONL table, one per row of its text column: `--text-column`).

The pooling the model directory names (a sentence-transformers layout: cls, mean, max, ...,
with or without normalisation); a plain model directory gets mean pooling over real tokens and
L2 normalisation, so a dot product of two rows is their cosine similarity.

Row i of the output is line i + 1 of the input, always: a blank or whitespace-only line has
no tokens to pool, so its row is all zeros (cosine 0 with everything; a note says how many)
rather than being dropped, which would shift every later row. Lines are split at "\\n" only.
"""

from __future__ import annotations

import os
import warnings

import numpy as np

from bertkit.inference.encode import SentenceEncoder
from bertkit.io import atomic_open
from bertkit.tasks.formats import read_texts
from bertkit.tokenizer.coverage import warn_about_unknown_texts
from bertkit.commands.options import (add_device, add_int8, add_precision, at_least, check_output_files, device_of,
                                      precision_of, resolve_models)


def add_arguments(parser) -> None:
    parser.add_argument("--model", required=True, help="model directory (weights + tokenizer)")
    parser.add_argument("--input", required=True, help="UTF-8 text file, one text per line; or a .csv, .tsv or "
                                                       ".jsonl table: one text per row of --text-column")
    parser.add_argument("--text-column", default="text", help="the column a table's texts are in (default: text)")
    parser.add_argument("--output", required=True, help="where to write the (n, hidden) float32 .npy")
    parser.add_argument("--batch-size", type=at_least(1), default=32)
    parser.add_argument("--max-length", type=at_least(3), default=None,  # [CLS], [SEP] and one token
                        help="truncation length (default: the model's max_seq_length, else 256)")
    parser.add_argument("--no-normalize", action="store_true", help="keep the raw pooled vectors")
    add_int8(parser)
    add_device(parser)
    add_precision(parser)


def run(args) -> int:
    resolve_models(args)  # ORG/NAME: its snapshot in the local Hugging Face cache
    check_output_files(args)  # before any work: a folder, or a file the command reads
    texts = read_texts(args.input, args.text_column)  # before loading the model: bad input fails fast
    device = device_of(args)
    encoder = SentenceEncoder.from_pretrained(args.model, quantize="int8" if args.int8 else None, device=device,
                                              precision=args.precision)
    precision_of(args, device)  # checked for the device and said, before the model runs
    warn_about_unknown_texts(texts, encoder.tokenizer, args.model, f"texts of {args.input}")
    kept = [i for i, text in enumerate(texts) if text.strip()]
    found = encoder.encode([texts[i] for i in kept], batch_size=args.batch_size, max_length=args.max_length,
                           normalize=False if args.no_normalize else None)  # None: as the model says
    vectors = np.zeros((len(texts), found.shape[1]), dtype=found.dtype)
    vectors[kept] = found
    if len(kept) < len(texts):
        warnings.warn(f"{args.input}: {len(texts) - len(kept)} blank line(s) got all-zero rows "
                      "(row i is still line i + 1)")
    with atomic_open(args.output, "wb") as f:
        np.save(f, vectors.astype(np.float32))
    print(f"wrote {vectors.shape[0]} x {vectors.shape[1]} embeddings to {os.path.abspath(args.output)}")
    return 0
