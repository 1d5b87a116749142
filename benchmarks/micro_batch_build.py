"""Micro-benchmark: building one padded inference batch on the host (ids, segments, mask).

What a GPU waits for between batches unless the host builds the next one while it runs
(bertkit/inference/overlap.py). Real BBC paragraphs tokenized with MiniLM's vocabulary, the 128
first of a fixed random sample, cut at 256 tokens (the GPU benchmark's encode shape: varied lengths), built the way
`SentenceEncoder.encode` did before (a tensor filled row by row with `torch.tensor`) and with
`data.batches.pad_rows` (a numpy copy per row, the mask from the lengths). Same arrays;
timed alternately (harness.alternate), median ratio.

    python benchmarks/micro_batch_build.py [--rows 128] [--repeats 15]
"""

from __future__ import annotations

import argparse
import sys
import warnings

import harness

import numpy as np
import torch

from bertkit.data.assets import minilm_dir
from bertkit.data.batches import pad_rows
from bertkit.tokenizer import Tokenizer


def row_by_row(ids, types, pad_id):
    width = max(len(row) for row in ids)
    input_ids = torch.full((len(ids), width), pad_id, dtype=torch.long)
    token_types = torch.zeros((len(ids), width), dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for j in range(len(ids)):
        n = len(ids[j])
        input_ids[j, :n] = torch.tensor(ids[j])
        token_types[j, :n] = torch.tensor(types[j])
        mask[j, :n] = 1
    return input_ids, token_types, mask


def padded_rows(ids, types, pad_id):
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    width = int(lengths.max())
    mask = torch.from_numpy((np.arange(width) < lengths[:, None]).astype(np.int64))
    return (torch.from_numpy(pad_rows(ids, width, pad_id)), torch.from_numpy(pad_rows(types, width, 0)), mask)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=128)
    p.add_argument("--repeats", type=int, default=15)
    args = p.parse_args(argv)
    harness.setup_threads(1)
    tokenizer = Tokenizer.from_pretrained(minilm_dir())
    # as SentenceEncoder.encode tokenizes: lists of ids, unpadded
    with warnings.catch_warnings():  # a few paragraphs are cut at 256: expected here
        warnings.simplefilter("ignore")
        encoded = tokenizer(harness.bbc_paragraphs(args.rows, seed=0), padding=False, truncation=True,
                            max_length=256, return_tensors=None)
    ids, types = encoded["input_ids"], encoded["token_type_ids"]
    assert all(torch.equal(a, b) for a, b in zip(row_by_row(ids, types, 0), padded_rows(ids, types, 0)))
    times = harness.alternate({"row_by_row": lambda: row_by_row(ids, types, 0),
                               "pad_rows": lambda: padded_rows(ids, types, 0)}, args.repeats, 2, 20)
    ratios = harness.speedups(times, "row_by_row", "pad_rows")
    median = {name: sorted(t)[len(t) // 2] * 1e3 for name, t in times.items()}
    print(f"batch of {args.rows} rows, {min(map(len, ids))}-{max(map(len, ids))} tokens: pad_rows "
          f"{median['pad_rows']:.2f} ms, row by row {median['row_by_row']:.2f} ms: speed = {harness.ratio_text(ratios)}")


if __name__ == "__main__":
    main(sys.argv[1:])
