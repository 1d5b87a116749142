"""`compile_layers()` and train.compile: each transformer layer of an encoder through torch.compile,
with room in dynamo's cache for every form a layer is called in.

A cache entry is per form of a layer's `forward` code, shared by every layer of its class in the
process: local and global attention layers, the last layer run on the labelled rows only,
training and evaluation (grad mode), packed and padded batches. One pre-training run with
evaluation reached torch's default of 8 entries on the CPU, and a layer called in a ninth form runs
eagerly without a word: on an H200 the compiled Trainer ran at the eager speed
(docs/benchmarks.md).
"""

from __future__ import annotations

from typing import Iterable

import torch
from torch import nn

RECOMPILE_LIMIT = 64  # cache entries per code object: the forms above, several models in one process


def compile_each(layers: Iterable[nn.Module], **options) -> None:
    """`layer.compile(**options)` for each layer, in place (state-dict keys unchanged), after
    raising dynamo's per-code cache limit to at least RECOMPILE_LIMIT."""
    config = torch._dynamo.config  # loaded here, not at import: it adds seconds to every command's start
    config.recompile_limit = max(config.recompile_limit, RECOMPILE_LIMIT)
    for layer in layers:
        layer.compile(**options)
