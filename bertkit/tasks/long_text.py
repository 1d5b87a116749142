"""Texts longer than the model's window: `data.long_text` chooses what the encoder reads.

- "truncate"  (default) the first max_length tokens, as before.
- "head_tail" the first quarter of the budget from the start of the text and the rest from
              its end: Sun et al. 2019 ("How to Fine-Tune BERT for Text Classification?")
              found head+tail (128 + 382 of 510 tokens) better than the head or the tail alone
              on long reviews and news, since openings and conclusions carry the gist.
- "chunks"    the whole text as overlapping windows of max_length tokens, neighbours sharing
              `data.doc_stride` tokens (as QA's windows do); each window is a row of its own and
              the text's prediction is the mean of its windows' logits. In training each window
              is an example with its text's label (its loss counts once per window). For token
              classification (a document given to a tagger) each word is tagged from the window
              in which its first sub-word is farthest from the window's ends (tagging.py).

Single texts only: a text pair is cut as before (both texts matter, and a window of the first
text alone would drop the second).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from bertkit.errors import ConfigError

LONG_TEXT_MODES = ("truncate", "head_tail", "chunks")
SEQUENCE_TASKS = ("classification", "multi-label-classification", "regression")  # tasks whose rows are texts
TAGGING_TASK = "token-classification"  # chunks only: a word's tag needs its neighbours, not the text's ends
HEAD_SHARE = 0.25  # head_tail: Sun et al.'s 128 of 510 tokens from the start


def check_long_text(mode: str, max_length: int, stride: int) -> None:
    if mode not in LONG_TEXT_MODES:
        raise ConfigError(f"data.long_text must be one of {', '.join(LONG_TEXT_MODES)}, got {mode!r}")
    if mode == "chunks" and stride >= max_length - 2:
        raise ConfigError(f"data.long_text=\"chunks\" needs data.doc_stride (the tokens neighbouring windows "
                          f"share, {stride}) below data.max_length - 2 = {max_length - 2}; lower doc_stride")


def check_long_text_task(task_name: str, mode: str) -> None:
    """head_tail and chunks fit texts of the sequence tasks, chunks a tagger's sentences too (each
    word tagged in the window where it has most context); QA has its own windows."""
    tasks = SEQUENCE_TASKS + (TAGGING_TASK,) if mode == "chunks" else SEQUENCE_TASKS
    if mode != "truncate" and task_name not in tasks:
        raise ConfigError(f"data.long_text=\"{mode}\" is for {', '.join(tasks)}, not {task_name}; "
                          "leave data.long_text=\"truncate\"")


def head_tail(ids: Sequence[int], max_length: int) -> list[int]:
    """[CLS] head ... tail [SEP] in `max_length` tokens: ids is one encoded text, specials at both ends."""
    ids = list(ids)
    body, budget = ids[1:-1], max_length - 2
    if len(body) <= budget:
        return ids
    head = int(budget * HEAD_SHARE)
    return [ids[0], *body[:head], *body[len(body) - (budget - head):], ids[-1]]


def window_starts(body_length: int, max_length: int, stride: int) -> list[int]:
    """Where each window of a text's `body_length` tokens (specials left out) starts: windows of
    max_length - 2 tokens covering them all, each starting max_length - 2 - stride tokens after the
    previous one (so neighbours share `stride`); one window when the body fits."""
    budget = max_length - 2
    if body_length <= budget:
        return [0]
    return list(range(0, max(1, body_length - stride), budget - stride))


def chunk_windows(ids: Sequence[int], max_length: int, stride: int) -> list[list[int]]:
    """Windows [CLS] w [SEP] of at most `max_length` tokens covering the whole text (`window_starts`)."""
    ids = list(ids)
    body, budget = ids[1:-1], max_length - 2
    return [[ids[0], *body[start:start + budget], ids[-1]] for start in window_starts(len(body), max_length, stride)]


def fit_to_window(encoded: Sequence[Sequence[int]], mode: str, max_length: int,
                  stride: int) -> tuple[list[list[int]], list[int]]:
    """(rows, the input index of each row) for mode "head_tail" (one row per text) or "chunks"
    (one per window). `encoded` are the texts tokenised whole, specials included."""
    rows, owners = [], []
    for index, ids in enumerate(encoded):
        pieces = chunk_windows(ids, max_length, stride) if mode == "chunks" else [head_tail(ids, max_length)]
        rows.extend(pieces)
        owners.extend([index] * len(pieces))
    return rows, owners


def mean_by_owner(outputs: Sequence[np.ndarray], owners: Sequence[int], count: int) -> np.ndarray:
    """(count, C): row i is the mean of the outputs whose owner is i (one text's windows)."""
    outputs = np.stack(outputs).astype(np.float64)
    sums = np.zeros((count, outputs.shape[1]))
    np.add.at(sums, np.asarray(owners), outputs)
    return sums / np.bincount(owners, minlength=count)[:, None]
