"""Which torch device to run on: one name -> a `torch.device` this build and machine can use.

    auto     cuda:<local_rank> when CUDA is available, else cpu
    cpu
    cuda     cuda:<local_rank> (the GPU of this process under torchrun); cuda:N a given GPU
    mps      Apple's GPU (a macOS build of torch on Apple silicon)

A device this build of torch lacks (mps on Linux, cuda on a CPU-only build), one the machine
lacks (cuda:3 on a one-GPU machine) or a name torch does not know is a ConfigError saying which,
before any model is loaded, instead of a traceback from the first tensor moved there.
"""

from __future__ import annotations

import re

import torch

from bertkit.errors import ConfigError

DEVICES = "auto, cpu, cuda, cuda:N or mps"
DEVICE_NAME = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")  # what a config may name, before any lookup


def resolve_device(name: str = "auto", local_rank: int = 0) -> torch.device:
    """The torch.device `name` stands for, checked against this build and machine."""
    text = str(name).strip().lower()
    if text == "auto":
        return torch.device(f"cuda:{local_rank}") if torch.cuda.is_available() else torch.device("cpu")
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise ConfigError(f"unknown device {name!r}; use {DEVICES}") from None
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type == "cuda":
        return _cuda(device, name, local_rank)
    if device.type == "mps":
        if not torch.backends.mps.is_built():
            raise ConfigError(f"device {name!r}: this build of torch has no MPS support (MPS needs torch "
                              "for macOS on Apple silicon); use --device cpu")
        if not torch.backends.mps.is_available():
            raise ConfigError(f"device {name!r}: MPS is not available on this machine (macOS 12.3+ on Apple "
                              "silicon); use --device cpu")
        return torch.device("mps")
    raise ConfigError(f"device {name!r} is not one bertkit runs on; use {DEVICES}")


def _cuda(device: torch.device, name: str, local_rank: int) -> torch.device:
    if not torch.backends.cuda.is_built():
        raise ConfigError(f"device {name!r}: this build of torch has no CUDA support; install a CUDA build "
                          "of torch, or use --device cpu")
    if not torch.cuda.is_available():
        raise ConfigError(f"device {name!r}: no CUDA GPU is visible (check the driver and "
                          "CUDA_VISIBLE_DEVICES), or use --device cpu")
    index = local_rank if device.index is None else device.index
    count = torch.cuda.device_count()
    if index >= count:
        raise ConfigError(f"device {name!r}: this machine has {count} CUDA GPU(s), cuda:0..cuda:{count - 1}")
    return torch.device(f"cuda:{index}")


def copy_without_wait(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """`tensor.to(device)`, queued behind the work already on the device instead of waiting for it.

    A copy to a GPU from pageable host memory goes through a pinned staging buffer, and CUDA may
    wait for the stream to finish before it (the host then idles with the GPU); from pinned memory
    it is queued like a kernel. So a host tensor is pinned first (torch caches pinned blocks: no
    new allocation per call). Elsewhere it is a plain copy."""
    if device.type == "cuda" and tensor.device.type == "cpu" and not tensor.is_pinned():
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=True)
