"""Inference batches queued one ahead (bertkit/inference/overlap.py): the order of the calls, and
the values that come back. The outputs of encode and predict are checked against transformers and
sentence-transformers in test_encode.py and the task tests; tests/gpu runs them on CUDA."""

import numpy as np
import torch

from bertkit.data.batches import pad_rows
from bertkit.inference.overlap import HostCopy, run_one_ahead


def test_each_batch_is_launched_before_the_one_before_is_read():
    calls = []
    run_one_ahead(["a", "b", "c"], lambda batch: calls.append(f"launch {batch}") or batch.upper(),
                  lambda batch, launched: calls.append(f"collect {batch} {launched}"))
    assert calls == ["launch a", "launch b", "collect a A", "launch c", "collect b B", "collect c C"]


def test_no_batches_calls_nothing():
    calls = []
    run_one_ahead([], calls.append, lambda *args: calls.append(args))
    assert calls == []


def test_a_host_copy_gives_the_values():
    values = torch.arange(12, dtype=torch.float32).view(3, 4)
    np.testing.assert_array_equal(HostCopy(values * 2).numpy(), values.numpy() * 2)


def test_pad_rows_pads_lists_and_arrays_alike():
    rows = [[5, 6, 7], [8], np.array([9, 10], dtype=np.int64)]
    expected = np.array([[5, 6, 7, 0], [8, 0, 0, 0], [9, 10, 0, 0]])
    np.testing.assert_array_equal(pad_rows(rows, 4, 0), expected)
    assert pad_rows(rows, 4, 0).dtype == np.int64
    np.testing.assert_array_equal(pad_rows([[1]], 2, -100), [[1, -100]])
