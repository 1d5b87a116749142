"""Fully sharded data parallel training with torch's `fully_shard` (FSDP2): `train.strategy = "fsdp"`.

Under DDP every rank holds the full weights, gradients and both AdamW moments. FSDP cuts each
parameter into W shards along its first dimension (torch.chunk: rank r holds rows
[r*ceil(n/W), (r+1)*ceil(n/W))) and keeps only its own shard of the weight, the gradient and the
moments. A unit's full weights exist only while it runs: its forward all-gathers them and frees
them after, its backward all-gathers them again and reduce-scatters the gradients, so rank r gets

    g_r = shard_r( 1/W sum_q grad L_q )

the same mean gradient as DDP, but only its shard. AdamW is elementwise, so each rank updates its
shard alone; gradient clipping takes the norm over every shard (`clip_grad_norm_` on DTensors:
one all-reduce), so it clips by the same global norm as one process.

Units: each transformer layer (a module its family's `layer_modules` names: BERT's `...encoder.layer.N`),
then the root with the rest (embeddings, pooler, heads; the MLM decoder reads the word-embedding
weight, so a tied pair is one parameter in the root's unit).

How it fits the Trainer, which outside `train()` holds an ordinary model, as under DDP:
* `ShardedTraining(model, optimizer, device)` (made when train() starts, after a resume has loaded
  the checkpoint) gives every rank rank 0's weights (as DDP does), shards a copy of the model and
  points the optimizer at the copy's parameters, each AdamW moment cut to the same shard as its
  parameter;
* `sync()` before every evaluation and checkpoint all-gathers the full weights into the plain
  model on every rank, so `eval_fn`, the best-model keeper and `save_pretrained` on rank 0 see an
  ordinary model and write the files one process writes;
* `optimizer_state()` gathers the moments to full tensors in the one-process layout (parameter
  ids, full `exp_avg`/`exp_avg_sq`), so `trainer_state.pt` is the file DDP or one process writes,
  and a resume cuts them into shards again. Chosen over a file of shards per rank: one file in
  one format, readable without torch.distributed; the price is a full copy of the moments on
  every rank while a checkpoint is written;
* `close(ok)` when train() ends: the trained weights and the full moments go back to the plain
  model and its optimizer, and the sharded copy is dropped. Like the DDP wrapper it must not
  live on to interpreter exit, where freeing it after the process group is gone can abort.

Memory per rank, in model-sized copies: DDP 4 (weights, gradients, 2 moments); here 1 + 4/W
(the plain model, kept for evaluation and saving, plus the shards), and one unit's full weights
while it runs.
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections import defaultdict

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor

from bertkit.models.config import BertConfig
from bertkit.models.families import families
from bertkit.errors import ConfigError

STRATEGIES = ("ddp", "fsdp")


def check_strategy(strategy: str, precision: str, world_size: int) -> None:
    """Raise ConfigError for an unknown train.strategy, or "fsdp" where it cannot run: one
    process, or fp16. `world_size` is torchrun's WORLD_SIZE (1 without torchrun)."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"train.strategy {strategy!r} is not known; use one of {STRATEGIES}")
    if strategy != "fsdp":
        return
    if world_size < 2:
        raise ConfigError('train.strategy = "fsdp" shards the model across processes, but this run is one '
                          "process: launch it with torchrun --nproc_per_node N (N >= 2), e.g. torchrun "
                          '--nproc_per_node 2 -m bertkit ..., or leave train.strategy = "ddp" (the default)')
    if precision == "fp16":
        raise ConfigError('train.strategy = "fsdp" does not support train.precision = "fp16": its gradient '
                          "scaler looks for inf in this rank's shard only, so the ranks could disagree on "
                          'skipping a step; use "bf16" or "fp32"')


def check_model(model: nn.Module) -> None:
    """Raise ConfigError naming what in `model` (or a model it wraps) FSDP cannot train here."""
    modules = list(model.modules())  # a wrapper (class-weighted loss, distillation) holds the model
    if any(hasattr(m, "load_adapter_weights") for m in modules):
        raise ConfigError('train.strategy = "fsdp" does not support PEFT models (LoRA, adapters and prefixes '
                          'train few parameters, so their optimizer state is small): use train.strategy = "ddp"')
    for config in {id(c): c for m in modules if isinstance(c := getattr(m, "config", None), BertConfig)}.values():
        if config.num_experts:
            raise ConfigError('train.strategy = "fsdp" does not support mixture-of-experts layers '
                              "(model.num_experts): routing is data-dependent, so an expert can get a gradient on "
                              "one rank and none on another, and the reduce-scatter would wait forever; use "
                              'train.strategy = "ddp", which looks for unused parameters')
        if config.position_embedding_type not in ("absolute", "sinusoidal", "t5_bias"):
            raise ConfigError(f'train.strategy = "fsdp" does not support model.position_embedding_type = '
                              f"{config.position_embedding_type!r} (not tried: it leaves the absolute position "
                              'table without a gradient); use train.strategy = "ddp"')


def shard_copy(model: nn.Module, device: torch.device) -> nn.Module:
    """A copy of `model` under `fully_shard` over all ranks: each transformer layer a unit, then the root."""
    # the mesh named explicitly: fully_shard's default picks CUDA whenever it exists, even for a CPU run
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    sharded = copy.deepcopy(model)
    layer = re.compile(r"(?:^|\.)(?:" + "|".join(family.layer_modules for family in families()) + r")$")
    for name, module in list(sharded.named_modules()):
        if layer.search(name):
            fully_shard(module, mesh=mesh)
    fully_shard(sharded, mesh=mesh)
    return sharded


def _rebind(optimizer: torch.optim.Optimizer, swap: dict, convert) -> None:
    """Point `optimizer` at `swap[p]` for each of its parameters p; every state value becomes
    `convert(value, swap[p])`, in the optimizer's own order (the same on every rank)."""
    state = {}
    for group in optimizer.param_groups:
        for param in group["params"]:
            if param in optimizer.state:
                state[swap[param]] = {k: convert(v, swap[param]) for k, v in optimizer.state[param].items()}
        group["params"] = [swap[param] for param in group["params"]]
    optimizer.state = defaultdict(dict, state)


def _to_shard(value, param: DTensor):
    """This rank's shard of a full moment (every rank holds the same one: no communication)."""
    if torch.is_tensor(value) and value.dim() and value.shape == param.shape:
        return distribute_tensor(value.to(param.device), param.device_mesh, param.placements, src_data_rank=None)
    return value  # AdamW's step count


def _to_full(value, param=None):
    return value.full_tensor() if isinstance(value, DTensor) else value  # an all-gather


class ShardedTraining:
    """The sharded copy of a Trainer's model and the optimizer pointed at it, while train() runs."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, device: torch.device):
        self.plain, self.optimizer = model, optimizer
        with torch.no_grad():  # rank 0's weights everywhere, as DDP starts (fully_shard keeps each rank's own)
            for tensor in [*model.parameters(), *model.buffers()]:
                dist.broadcast(tensor, src=0)
        self.module = shard_copy(model, device)
        sharded = dict(self.module.named_parameters())  # fully_shard keeps the parameter names
        self.pairs = [(param, sharded[name]) for name, param in model.named_parameters()]
        _rebind(optimizer, dict(self.pairs), _to_shard)

    def sync(self) -> None:
        """The full trained weights into the plain model, on every rank (collective)."""
        with torch.no_grad():
            for plain, sharded in self.pairs:
                plain.copy_(sharded.full_tensor())

    def optimizer_state(self) -> dict:
        """`optimizer.state_dict()` as one process has it: full moments (collective)."""
        state = self.optimizer.state_dict()
        state["state"] = {i: {k: _to_full(v) for k, v in state["state"][i].items()} for i in sorted(state["state"])}
        return state

    def close(self, ok: bool) -> None:
        """Give the plain model its trained weights and the optimizer its plain parameters back.
        After an error the peers may be gone, so nothing is gathered: the moments are dropped and
        the plain model keeps the weights of the last evaluation or checkpoint."""
        back = {sharded: plain for plain, sharded in self.pairs}
        if ok:
            self.sync()
            _rebind(self.optimizer, back, _to_full)
        else:
            _rebind(self.optimizer, back, lambda value, param: value)
            self.optimizer.state = defaultdict(dict)
        self.module = self.pairs = None


@contextlib.contextmanager
def local_gradients(model: nn.Module):
    """Context for a micro-batch whose gradients stay on this rank (all but the last of a step):
    DDP's `no_sync()`, or FSDP's gradient sync switched off (they accumulate unsharded until the
    last micro-batch reduce-scatters their sum)."""
    if not isinstance(model, FSDPModule):
        with model.no_sync():
            yield
        return
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)
