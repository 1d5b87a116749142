import numpy as np
import pytest

from bertkit.errors import DataError
from bertkit.train import LengthBucketedBatches


def examples(n=1000, seed=0):
    lengths = np.random.default_rng(seed).integers(5, 128, size=n)
    return [{"input_ids": np.arange(k), "id": i} for i, k in enumerate(lengths)]


def ids(batch):
    return [e["id"] for e in batch]


def test_bucketing_cuts_padding_and_covers_every_example():
    data = examples()
    bucketed = LengthBucketedBatches(data, 16, ids, seed=1)
    random_batches = LengthBucketedBatches(data, 16, ids, seed=1, bucket_size=1)  # no sorting
    assert bucketed.padding_fraction() < 0.1 < 0.3 < random_batches.padding_fraction()
    seen = [i for batch in bucketed for i in batch]
    assert sorted(seen) == list(range(len(data)))  # one epoch = each example once
    bucketed.set_epoch(1)
    assert [i for b in bucketed for i in b] != seen  # a new order each epoch


def test_ranks_get_disjoint_equal_shares_matching_one_process():
    data = examples(200)
    single = list(LengthBucketedBatches(data, 8, ids, seed=3))
    ranks = [list(LengthBucketedBatches(data, 8, ids, seed=3, rank=r, world_size=3)) for r in range(3)]
    assert len({len(r) for r in ranks}) == 1
    for step in range(len(ranks[0])):  # step s of rank r is batch W*s + r of one process
        for r in range(3):
            assert ranks[r][step] == single[3 * step + r]


def test_skip_resumes_mid_epoch():
    data = LengthBucketedBatches(examples(300), 10, ids, seed=5)
    data.set_epoch(2)
    full = list(data)
    data.set_epoch(2)
    data.skip(7)
    assert list(data) == full[7:]
    with pytest.raises(DataError):
        LengthBucketedBatches([], 4, ids)
