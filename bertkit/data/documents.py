"""Tokenized documents for a run: a corpus sharded once, the first N documents, a held-out split.

    docs = shard_documents("bbc", tokenizer, "runs/x/shards", max_documents=500)
    train_docs, eval_docs = split_documents(len(docs), eval_fraction=0.05, seed=0)

`shard_documents` tokenizes a corpus into memory-mapped shards (`shards.prepare_shards`) unless
the directory already holds a complete set, and opens them; a source that already is a shard
directory is opened as it is. Under several processes only the main one writes, the others
wait at `barrier` and then open what it wrote.
"""

from __future__ import annotations

import json
import os
from typing import Callable, Iterable, Iterator

import numpy as np

from bertkit.data.corpus import open_corpus
from bertkit.data.shards import META, ShardedCorpus, prepare_shards
from bertkit.errors import ConfigError

__all__ = ["first", "complete_shards", "shard_documents", "split_documents"]


def first(docs: Iterable, n: int) -> Iterator:
    """The first `n` documents of `docs` (all of them when n = 0)."""
    for i, doc in enumerate(docs):
        if n and i >= n:
            return
        yield doc


def complete_shards(directory: str) -> bool:
    """True when `directory` holds shards that `prepare_shards` finished (an interrupted run
    leaves meta.json without "complete", and is resumed)."""
    try:
        with open(os.path.join(directory, META), encoding="utf-8") as f:
            return bool(json.load(f).get("complete"))
    except (OSError, ValueError):
        return False


def shard_documents(source: str, tokenizer, directory: str, *, mode: str = "file", max_documents: int = 0,
                    is_main: bool = True, barrier: Callable[[], None] | None = None) -> ShardedCorpus:
    """A `ShardedCorpus` of `source` (its first `max_documents`, 0 = all), tokenized into
    `directory` once, or `source` itself when it already is a shard directory."""
    if os.path.isfile(os.path.join(source, META)):
        return ShardedCorpus(source, expected_vocab=tokenizer)
    if is_main and not complete_shards(directory):
        prepare_shards(first(open_corpus(source, mode), max_documents), tokenizer, directory,
                       progress=False, resume=os.path.isdir(directory))
    if barrier is not None:
        barrier()  # the other processes open the shards once the main one has written them
    return ShardedCorpus(directory, expected_vocab=tokenizer)


def split_documents(n: int, eval_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, held-out) document indices from a seeded shuffle; at least one of each."""
    if n < 2:
        raise ConfigError(f"the corpus has {n} document(s); pre-training needs at least 2 (one to train on, one "
                          "to hold out), and a text file is one document: separate its documents by blank lines "
                          "and --set data.mode=blank, or use JSONL, one {\"text\": ...} per line")
    order = np.random.default_rng([seed, 7]).permutation(n)
    n_eval = min(n - 1, max(1, round(eval_fraction * n)))
    return np.sort(order[n_eval:]), np.sort(order[:n_eval])
