"""Data-parallel training across processes with DistributedDataParallel (DDP).

Launch with `torchrun --nproc_per_node N ...`: torchrun sets RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT, and `init_distributed` (bertkit/runtime/process_group.py) joins the process group from them
(gloo on CPU, nccl on GPU). Without those variables everything runs in one process.

How the pieces fit:
* every rank holds a full model copy; DDP broadcasts rank 0's weights at wrap time, then
  averages gradients over ranks during backward, so the update equals one process taking the
  mean of the per-rank losses: grad(1/W sum_r L_r);
* every rank reads its own share of the batches (see `LengthBucketedBatches(rank=, world_size=)`);
* with gradient accumulation the all-reduce is skipped (`no_sync`) on all but the last
  micro-batch of a step, so the network is used once per optimizer step;
* only rank 0 logs, evaluates and writes checkpoints; per-rank RNG states are gathered to it.

`train.strategy = "fsdp"` shards the model over the ranks instead of copying it (fsdp.py).
"""

from __future__ import annotations

from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from bertkit.runtime.process_group import DistContext  # the process group itself: joining, leaving, collectives


def wrap_model(model: nn.Module, ctx: DistContext, find_unused_parameters: bool = False) -> nn.Module:
    """DDP around `model` when there is more than one process, else the model itself.

    `find_unused_parameters=True` lets a step leave some parameters without a gradient (the
    absolute position table under relative positions; data-dependent MoE routing); it costs one
    walk of the autograd graph per step.
    """
    if not ctx.enabled:
        return model

    ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    return DDP(model, device_ids=ids, find_unused_parameters=find_unused_parameters)


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside a DDP wrapper (for saving, evaluation and generation)."""
    return getattr(model, "module", model)
