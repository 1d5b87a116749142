"""This process's place in a torchrun job: rank, world size, device, and joining and leaving the
process group (gloo on CPU, nccl on GPU). Without torchrun's variables everything runs in one process.

Apart from the training side (DDP wrapping, bertkit/train/distributed.py) so that a command that only
decodes split over ranks (evaluate under torchrun) needs none of the training code, and none of the
FSDP imports that `bertkit.train` brings (about 0.6 s of a process's start).
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from bertkit.runtime.devices import resolve_device


@dataclass
class DistContext:
    """Who this process is in the job: rank r of world_size W, on `device`."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    joined_here: bool = False  # init_distributed joined the process group, so leaving it is ours to do

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum of `tensor` over ranks (in place, also returned); a no-op in one process."""
        if self.enabled:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def gather(self, obj) -> list:
        """`obj` from every rank, in rank order, on every rank (small objects only)."""
        if not self.enabled:
            return [obj]
        out = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def broadcast(self, obj):
        """Rank 0's `obj` on every rank."""
        if not self.enabled:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]


def pick_device(name: str = "auto", local_rank: int = 0) -> torch.device:
    """"auto" -> cuda:<local_rank> when CUDA is available, else cpu; or an explicit device, checked
    against this build and machine (bertkit/runtime/devices.py)."""
    return resolve_device(name, local_rank)


def init_distributed(device: str = "auto") -> DistContext:
    """Join the torchrun process group if WORLD_SIZE > 1; return this process's context."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = pick_device(device, local_rank)
    joined = False
    if world_size > 1:
        if not dist.is_initialized():
            backend = "nccl" if dev.type == "cuda" else "gloo"
            if dev.type == "cuda":
                torch.cuda.set_device(dev)
            dist.init_process_group(backend=backend)  # env:// rendezvous from torchrun's variables
            joined = True
        rank, world_size = dist.get_rank(), dist.get_world_size()
    return DistContext(rank=rank, world_size=world_size, local_rank=local_rank, device=dev, joined_here=joined)


def shutdown(wait: bool = True) -> None:
    """Leave the process group. With `wait` every rank first waits for the others: a rank that
    tears its gloo connections down while a peer is still in a collective can abort that peer
    ("terminate called without an active exception", seen under load). After an error a peer
    may be gone for good, so the caller passes wait=False there. Collecting garbage first frees
    DDP wrappers caught in reference cycles while the process group still exists: freed later,
    at interpreter exit, their gloo threads abort the process."""
    if dist.is_available() and dist.is_initialized():
        gc.collect()
        if wait:
            dist.barrier()
        dist.destroy_process_group()


def leave(ctx: DistContext, wait: bool = True) -> None:
    """shutdown() when `ctx` joined the process group; a group the caller set up (a program that
    runs several bertkit commands under one torchrun) stays for the caller to leave."""
    if ctx.joined_here:
        shutdown(wait)
