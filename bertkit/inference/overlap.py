"""Inference batches queued one ahead: the host builds batch k+1 while the GPU runs batch k.

A plain loop (build a batch, copy it, run the model, read the result) leaves a GPU idle while the
host builds and copies every next batch, because reading a result waits for the GPU to finish it.
Here each batch's result is copied back without waiting (into pinned memory, a CUDA event marking
the end of the copy) and read only after the next batch has been queued:

    build 0, run 0 | build 1, run 1, read 0 | build 2, run 2, read 1 | ... | read n-1

The results are the same as the plain loop's, in the same order; on the CPU nothing runs ahead
(every operation finishes before the next starts), and the order of the calls is the only change.
The models' own host reads (the token-id check, the packing of a padded batch) wait for the batch
before, but they come before their first layer, when the next batch is already built and copied.
"""

from __future__ import annotations

from typing import Callable, Iterable, TypeVar

import numpy as np
import torch

Batch = TypeVar("Batch")


class HostCopy:
    """A device tensor's copy to the host, queued now and read (waited for) by `numpy()`."""

    def __init__(self, tensor: torch.Tensor):
        self._done = None
        if tensor.device.type == "cuda":  # pinned: the copy is queued behind the kernels, not waited for
            self._host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
            self._host.copy_(tensor, non_blocking=True)
            self._done = torch.cuda.Event()
            self._done.record()
        else:
            self._host = tensor.cpu()

    def numpy(self) -> np.ndarray:
        if self._done is None:
            return self._host.numpy()
        self._done.synchronize()
        # a copy: views kept by the caller (one row per input) would hold the pinned block, which
        # torch's allocator could otherwise give to the next batch's copy
        return self._host.numpy().copy()


def run_one_ahead(batches: Iterable[Batch], launch: Callable[[Batch], object],
                  collect: Callable[[Batch, object], None]) -> None:
    """For each batch, `launch(batch)` (build, copy, run: returns HostCopy objects, unread), then
    `collect(batch, launched)` of the batch before it; the last batch is collected at the end."""
    pending = None
    for batch in batches:
        launched = launch(batch)
        if pending is not None:
            collect(*pending)
        pending = (batch, launched)
    if pending is not None:
        collect(*pending)
