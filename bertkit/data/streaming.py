"""Streamed pre-training batches: corpora larger than memory, with exact resume.

    [data] streaming = true      (bertkit pretrain; block_docs = documents per example block)

In-memory pre-training builds every example up front (`build_examples` over all training
documents) so that `LengthBucketedBatches` can shuffle and bucket them; memory grows with the
corpus. Streamed, the Trainer is fed from `bertkit.data.examples.PretrainingDataset` over the
memory-mapped `ShardedCorpus`: documents are read when their block is reached, one block of
`block_docs` documents' examples is held at a time, and one batch is collated at a time.

The stream (`StreamingBatches`) is endless: each rank walks its own documents epoch after
epoch (PretrainingDataset's seeded per-epoch order, rank r of W taking every W-th document),
and batches are always full (a batch may straddle an epoch boundary). The Trainer therefore
sees one long epoch (its `epoch` column stays 0; the data epoch is in the saved state), and
every rank draws the same number of batches per step, so ranks with fewer documents never stall
an all-reduce: they just start their next epoch sooner.

Exact resume. `StreamingBatches.state_dict()` is the collator's RNG plus the data position:
the example counter of the domain/general mix and each PretrainingDataset's (epoch, block,
offset). The recipe passes the stream as the Trainer's `collator=`, so this state is saved
per rank in `trainer_state.pt` and restored before the first batch after a resume (the
Trainer calls `skip(n)`, then `load_state_dict`; the exact state wins). When it cannot be
restored (a different number of processes) `skip(n)` falls back to drawing and dropping
n batches' examples, so positions hold but the run is not bit-exact (the Trainer warns).

A general corpus (`data.general_fraction = f`, see `bertkit/recipes/continued.py`) is a second endless stream;
`MixedExamples` takes example i from it exactly when floor((i + 1) f) > floor(i f).
"""

from __future__ import annotations

import math
import random
from typing import Callable, Iterator, Sequence

import numpy as np

from bertkit.data.examples import PretrainingDataset, build_examples
from bertkit.errors import DataError


class DocumentSubset:
    """The documents `indices` of `docs`, renumbered 0..n-1 (a lazy view, nothing copied)."""

    def __init__(self, docs, indices: Sequence[int]):
        self.docs = docs
        self.indices = np.asarray(indices, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int):
        return self.docs[int(self.indices[i])]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def sentence_counts(self) -> np.ndarray:
        if hasattr(self.docs, "sentence_counts"):
            return np.asarray(self.docs.sentence_counts())[self.indices]
        return np.array([len(self[i]) for i in range(len(self))], dtype=np.int64)


def take_examples(builder, docs, indices: Sequence[int], rng: random.Random, limit: int,
                  chunk_docs: int = 64) -> list[dict]:
    """The first `limit` examples of documents `indices`, built `chunk_docs` documents at a time
    (held-out data of a huge corpus: only what is kept is ever built)."""

    out: list[dict] = []
    for start in range(0, len(indices), chunk_docs):
        if len(out) >= limit:
            break
        out.extend(build_examples(builder, docs, indices[start:start + chunk_docs], rng))
    return out[:limit]


def _endless(dataset) -> Iterator[dict]:
    """Examples of `dataset` epoch after epoch (PretrainingDataset moves to the next epoch by itself)."""
    while True:
        state = dataset.state_dict()
        from_start = state["block"] == 0 and state["offset"] == 0
        produced = False
        for example in dataset:
            produced = True
            yield example
        if not produced and from_start:
            raise DataError("a whole epoch of the streamed corpus produced no example; the documents "
                            "are empty or too short for the example builder")


class MixedExamples:
    """An endless example stream: the domain dataset, with a share `fraction` taken from a general one.

    Example i (counted from the start of training) comes from `general` exactly when
    floor((i + 1) f) > floor(i f): a fixed, exact interleaving whose position is one counter.
    """

    def __init__(self, domain, general=None, fraction: float = 0.0):
        if fraction and general is None:
            raise DataError("a general fraction needs a general dataset")
        if not 0.0 <= fraction < 1.0:
            raise DataError(f"the general fraction must be in [0, 1), got {fraction}")
        self.domain, self.general, self.fraction = domain, general, float(fraction)
        self.count = 0

    def is_general(self, i: int) -> bool:
        f = self.fraction
        # The small epsilon keeps e.g. 10 * 0.1 from rounding below 1 in floating point.
        return f > 0 and math.floor((i + 1) * f + 1e-9) > math.floor(i * f + 1e-9)

    def __iter__(self) -> Iterator[dict]:
        domain = _endless(self.domain)
        general = _endless(self.general) if self.general is not None else None
        while True:
            source = general if self.is_general(self.count) else domain
            example = next(source)
            self.count += 1
            yield example

    def state_dict(self) -> dict:
        state = {"count": self.count, "domain": self.domain.state_dict()}
        if self.general is not None:
            state["general"] = self.general.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        if ("general" in state) != (self.general is not None):
            raise DataError("the saved data position was written with a different data.general_fraction "
                            "setting; resume with the config the run started with")
        self.count = int(state["count"])
        self.domain.load_state_dict(state["domain"])
        if self.general is not None:
            self.general.load_state_dict(state["general"])


class StreamingBatches:
    """Endless collated batches of `batch_size` examples drawn lazily from `examples`.

    `examples` has `__iter__` and `state_dict`/`load_state_dict` (a `MixedExamples`);
    `collator` turns a list of examples into a batch and may have RNG state. The object's own
    `state_dict` covers both, which is what the Trainer saves per rank when the stream is
    passed as its `collator=`. It has no `set_epoch`: its position is its state.
    """

    def __init__(self, examples, batch_size: int, collator: Callable):
        if batch_size < 1:
            raise DataError(f"batch_size must be positive, got {batch_size}")
        self.examples, self.batch_size, self.collator = examples, batch_size, collator
        self._skip = 0
        self.batches_drawn = 0

    def skip(self, n: int) -> None:
        """Start the next iteration n batches further on (overridden by `load_state_dict`)."""
        self._skip = int(n)

    def __iter__(self) -> Iterator[dict]:
        # A generator: nothing below runs before the first next(), i.e. after a resume's
        # load_state_dict, so the example iterator starts from the restored position.
        source = iter(self.examples)
        for _ in range(self._skip * self.batch_size):
            next(source)
        self._skip = 0
        while True:
            batch = [next(source) for _ in range(self.batch_size)]
            self.batches_drawn += 1
            yield self.collator(batch)

    def state_dict(self) -> dict:
        state = {"data": self.examples.state_dict()}
        if hasattr(self.collator, "state_dict"):
            state["collator"] = self.collator.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.examples.load_state_dict(state["data"])
        if "collator" in state and hasattr(self.collator, "load_state_dict"):
            self.collator.load_state_dict(state["collator"])
        self._skip = 0  # the exact position replaces a pending skip


def streaming_batches(builder, docs, train_docs, batch_size: int, collator: Callable, seed: int,
                      rank: int = 0, world_size: int = 1, block_docs: int = 256,
                      general=None, general_fraction: float = 0.0) -> StreamingBatches:
    """The recipe's streamed training data: PretrainingDataset(s) -> MixedExamples -> batches.

    `docs` / `train_docs`: the domain corpus and its training document indices; `general`:
    a `continued.GeneralCorpus` or None (its training documents feed `general_fraction`).
    """

    domain = PretrainingDataset(DocumentSubset(docs, train_docs), builder, seed=seed, rank=rank,
                                world_size=world_size, block_docs=block_docs)
    general_ds = None
    if general is not None and general_fraction > 0:
        general_ds = PretrainingDataset(DocumentSubset(general.docs, general.train_docs), builder,
                                        seed=seed + 1, rank=rank, world_size=world_size,
                                        block_docs=block_docs)
    return StreamingBatches(MixedExamples(domain, general_ds, general_fraction), batch_size, collator)
