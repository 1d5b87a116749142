"""Batches of token rows: inputs sorted by length and cut where padding costs more than a call.

A batch is padded to its longest row, so its compute is rows x longest token slots; sorting by
length puts similar lengths together, and cutting the sorted run into batches of different sizes
removes most of the padding that is left. `SentenceEncoder.encode` (inference/encode.py), the task
inference behind `bertkit predict` / `evaluate` (tasks/common.py `forward_features`) and the
sentence model's training step on the CPU (models/sentence_embedding.py) batch this way; the
caller puts each output back at its input's position.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

# What one more forward call costs, in padded token slots of compute (MiniLM on this CPU: a
# 1 x 8 batch took about as long as 10-20 tokens inside a large one; docs/inference.md).
BATCH_OVERHEAD_TOKENS = 16


def length_batches(lengths: Sequence[int], batch_size: int, overhead: float = BATCH_OVERHEAD_TOKENS
                   ) -> list[list[int]]:
    """Indices of `lengths` in batches of at most `batch_size`, longest first, cut where it pays.

    With the texts sorted by length, L_0 >= L_1 >= ... >= L_{n-1}, a batch is a run i..j-1 and
    computes (j - i) x L_i token slots (its rows padded to its longest). The cut points minimise

        sum over batches (overhead + (j - i) x L_i)

    the padded slots plus a fixed cost per forward call, by dynamic programming over the run
    starts (O(n x batch_size)): a batch is cut early where the padding it saves is worth more than
    `overhead` slots; among equal costs the longer batch comes first, so without padding to save
    these are fixed batches of `batch_size`, as overhead -> infinity gives.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    sorted_lengths = [lengths[i] for i in order]
    n = len(order)
    best = [float("inf")] * n + [0.0]  # best[i]: least cost of the texts i..n-1
    end_of = list(range(1, n + 1))
    for start in range(n - 1, -1, -1):
        for end in range(min(n, start + batch_size), start, -1):
            cost = overhead + (end - start) * sorted_lengths[start] + best[end]
            if cost < best[start]:
                best[start], end_of[start] = cost, end
    batches, start = [], 0
    while start < n:
        batches.append(order[start:end_of[start]])
        start = end_of[start]
    return batches


def fixed_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices of `lengths` sorted longest first, in batches of exactly `batch_size` (the last
    one smaller): what `length_batches` is measured against, and what generation uses, whose
    calls cost far more than a forward (tasks/seq2seq.py)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def inference_batches(lengths: Sequence[int], batch_size: int, device: torch.device | str, cut: bool = True
                      ) -> list[list[int]]:
    """Length-sorted batches for inference on `device`: on a CPU cut where padding costs more than a
    call (`length_batches`, when `cut`); else, and on every GPU, `fixed_batches` of `batch_size`. A
    GPU runs the real tokens only (unpadded flash attention), so padding costs it little and a call
    costs its kernel launches: cutting split 1,024 BBC paragraphs at batch 128 into 72 calls where 8
    do, and encoding ran at 0.37x a transformers loop on an H200 (bench_gpu.py, bert_base_encode_texts)."""
    if cut and torch.device(device).type == "cpu":
        return length_batches(lengths, batch_size)
    return fixed_batches(lengths, batch_size)


def pad_rows(rows: Sequence[Sequence[int]], width: int, value: int) -> np.ndarray:
    """Rows of ids (lists or arrays) as one (len(rows), width) int64 array, each padded with
    `value` after its end. A numpy copy per row: with the mask from the lengths, a batch of 128 BBC
    paragraphs of 4-256 tokens is built in 0.47 ms against 4.40 ms filling tensors row by row with
    `torch.tensor` (9.5x on this CPU: benchmarks/micro_batch_build.py), time a GPU would wait."""
    out = np.full((len(rows), width), value, dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out
