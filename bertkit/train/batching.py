"""Batches of similar-length examples, resumable and shared out across ranks.

Padding is wasted compute: random batches of BERT pre-training examples carried 44% padding
here. Sorting the whole dataset by length would remove it but also make batches non-random
(all short texts first), so we bucket locally, as fairseq/HF `group_by_length` do:

1. shuffle the example indices with a generator seeded by (seed, epoch);
2. cut the shuffled list into chunks of `batch_size * bucket_size` examples;
3. sort each chunk by length and cut it into batches (so a batch holds near-equal lengths);
4. shuffle the order of all batches (so lengths do not rise and fall in a sawtooth);
5. rank r of W takes batches r, r + W, r + 2W, ..., and every rank gets the same count
   (the last < W batches are dropped), so no rank waits for another at the all-reduce.

Everything is a pure function of (seed, epoch), so the position in the data is just
(epoch, batches taken), and `skip(n)` resumes there in O(1) without re-reading anything.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from bertkit.errors import ConfigError, DataError


class LengthBucketedBatches:
    """An iterable of collated batches: `collate_fn([example, ...])` per batch.

    `examples` is any sized sequence; `lengths[i]` is example i's token count (by default
    `len(examples[i]["input_ids"])`). With one process and grad_accum A, batches 0..A-1 form
    step 0; with W processes and A = 1, rank r takes batch r of step 0 — the same examples,
    which is what makes a DDP run equal to a single-process run with accumulation.
    """

    def __init__(self, examples: Sequence, batch_size: int, collate_fn: Callable,
                 lengths: Sequence[int] | None = None, seed: int = 0, shuffle: bool = True,
                 bucket_size: int = 50, drop_last: bool = False, rank: int = 0, world_size: int = 1):
        if batch_size <= 0:
            raise ConfigError(f"batch_size must be positive, got {batch_size}")
        if not 0 <= rank < world_size:
            raise ConfigError(f"rank {rank} is outside world_size {world_size}")
        if len(examples) == 0:
            raise DataError("no training examples: the corpus is empty or every text is too short")
        self.examples = examples
        self.batch_size = batch_size
        self.collate_fn = collate_fn
        if lengths is None:
            lengths = [len(ex["input_ids"]) for ex in examples]
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.seed, self.shuffle, self.bucket_size = seed, shuffle, bucket_size
        self.drop_last, self.rank, self.world_size = drop_last, rank, world_size
        self.epoch = 0
        self._start = 0  # batch index the next __iter__ starts from (set by skip)
        if len(self) == 0:
            raise DataError(f"{len(examples)} examples make no full batch per rank (batch_size "
                            f"{batch_size}, {world_size} ranks); lower batch_size or add text")

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order the next iteration follows (and start it at batch 0)."""
        self.epoch = epoch
        self._start = 0

    def skip(self, n: int) -> None:
        """Make the next iteration start at this rank's batch n of the current epoch."""
        self._start = n

    def _all_batches(self) -> list[np.ndarray]:
        n = len(self.lengths)
        if not self.shuffle:  # evaluation: sorted by length, a fixed order
            order = np.argsort(self.lengths, kind="stable")
            batches = [order[i:i + self.batch_size] for i in range(0, n, self.batch_size)]
            if self.drop_last and len(batches[-1]) < self.batch_size:
                batches.pop()
            return batches
        rng = np.random.default_rng([self.seed, self.epoch])
        order = rng.permutation(n)
        chunk = self.batch_size * self.bucket_size
        batches = []
        for c in range(0, n, chunk):
            part = order[c:c + chunk]
            part = part[np.argsort(self.lengths[part], kind="stable")]
            batches.extend(part[i:i + self.batch_size] for i in range(0, len(part), self.batch_size))
        # Only the last chunk can end in a short batch; it is kept (shuffled in) unless drop_last.
        if self.drop_last and len(batches[-1]) < self.batch_size:
            batches.pop()
        return [batches[i] for i in rng.permutation(len(batches))]

    def _rank_batches(self) -> list[np.ndarray]:
        batches = self._all_batches()
        per_rank = len(batches) // self.world_size
        return batches[self.rank::self.world_size][:per_rank]

    def __len__(self) -> int:
        """Batches per epoch for this rank."""
        n_batches = len(self.lengths) // self.batch_size
        if not self.drop_last and len(self.lengths) % self.batch_size:
            n_batches += 1
        return n_batches // self.world_size

    def __iter__(self):
        start, self._start = self._start, 0
        for index in self._rank_batches()[start:]:
            yield self.collate_fn([self.examples[int(i)] for i in index])

    def padding_fraction(self) -> float:
        """Share of padded positions in this epoch's batches (a measure of the waste avoided)."""
        real = padded = 0
        for index in self._rank_batches():
            lengths = self.lengths[index]
            real += int(lengths.sum())
            padded += int(lengths.max()) * len(index)
        return 1.0 - real / max(1, padded)
