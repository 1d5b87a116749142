"""Batches drawn one step ahead in a background thread, so the GPU need not wait for the host.

The trainer reads the loss of every step, which waits for the GPU to finish it; drawing, padding
and masking the next batch in the same thread then leaves the GPU idle for that long (the ten-minute
GPU recipe's loop ran at 83% of its step's speed alone on an H100, this wait a part of the gap:
docs/gpu-recipe.md). Here a
thread draws batch k+1 (and pins it, for an asynchronous copy) while step k runs.

Exact resume survives it: the thread runs ahead, so the data position and the collator's RNG it
leaves behind are those of batches not trained on yet. After drawing each batch the thread takes
a `snapshot()` of that state (the position after this batch, before the next), and hands it over
with the batch; `consumed` is the snapshot of the last batch the trainer took, which is what a
checkpoint saves. The batches, their order and their masks are those of drawing in the training
thread (tests/train/test_prefetch.py): the collators and samplers draw from their own generators,
never from the global RNG the model's dropout uses.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterator

import torch

_DONE = object()  # the source is exhausted


def pinned(batch: dict) -> dict:
    """The batch with its host tensors in pinned memory; tensors already on a device (a data
    source that yields GPU tensors) pass as they are: torch cannot pin them."""
    return {k: v.pin_memory() if torch.is_tensor(v) and v.device.type == "cpu" else v for k, v in batch.items()}


class Prefetcher:
    """Iterate `source` one batch (`depth` batches) ahead in a daemon thread.

    snapshot  called in the thread after each batch is drawn: the state to save if training
              stopped after that batch (taken before the thread draws the next one)
    pin       pin each tensor's memory (CUDA: `.to(device, non_blocking=True)` then copies
              asynchronously)
    """

    def __init__(self, source: Iterator[dict], snapshot: Callable[[], Any], pin: bool = False, depth: int = 1):
        self.consumed: Any = snapshot()  # before any batch: the state the run starts from
        self._source, self._snapshot, self._pin = source, snapshot, pin
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._fill, name="bertkit-prefetch", daemon=True)
        self._thread.start()

    def _fill(self) -> None:
        try:
            for batch in self._source:
                if self._pin:
                    batch = pinned(batch)
                if not self._put((batch, self._snapshot())):
                    return
            self._put((_DONE, None))
        except BaseException as error:  # handed to the training thread, which raises it
            self._put((error, None))

    def _put(self, item) -> bool:
        """Queue `item` unless closed meanwhile (then False)."""
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> "Prefetcher":
        return self

    def __next__(self) -> dict:
        item, state = self._queue.get()
        if item is _DONE:
            raise StopIteration
        if isinstance(item, BaseException):
            raise item
        self.consumed = state
        return item

    def close(self) -> None:
        """Stop the thread (it may hold a drawn batch, which is dropped) and wait for it."""
        self._stop.set()
        while self._thread.is_alive():
            try:
                self._queue.get(timeout=0.1)  # unblock a put
            except queue.Empty:
                pass
            self._thread.join(timeout=0.1)
