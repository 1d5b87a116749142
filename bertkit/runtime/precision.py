"""Which number format a model runs in, and the one autocast context every caller uses.

    auto   bf16 on a CUDA GPU with bf16 support (Ampere and later), fp16 on older CUDA GPUs,
           fp32 elsewhere (CPUs: bf16 matmuls measured 5x slower than fp32 on the AVX-512
           machines without bf16 units, docs/benchmarks.md)
    fp32   no autocast
    bf16   torch.autocast(dtype=bfloat16): matmuls in bf16, softmax, norms and losses in fp32
    fp16   torch.autocast(dtype=float16); training needs a gradient scaler (CUDA only)

Weights and optimizer state stay fp32 in every format (autocast casts copies of the weights for
each matmul), so checkpoints are the same files whatever precision trained them. "auto" is the
default of training (`train.precision`) and of every command that runs a model (`--precision`).
"""

from __future__ import annotations

import contextlib

import torch

from bertkit.errors import ConfigError

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def check_precision(name: str, where: str = "precision") -> str:
    """`name` if it is one of PRECISIONS, else a ConfigError naming `where` (e.g. train.precision)."""
    if name not in PRECISIONS:
        raise ConfigError(f"{where} {name!r} is not known; use one of {PRECISIONS}")
    return name


def resolve_precision(name: str, device: torch.device | str, scaler_ok: bool = True) -> str:
    """The precision `name` stands for on `device`: "auto" becomes fp32, bf16 or fp16 (fp16 only
    when `scaler_ok`: FSDP's sharded gradients have no scaler, so there "auto" falls back to fp32);
    an explicit one is checked against the device, with a one-line error when it cannot run there."""
    check_precision(name)
    device = torch.device(device)
    cuda = device.type == "cuda"
    if name == "auto":
        if not cuda:
            return "fp32"
        if torch.cuda.is_bf16_supported():
            return "bf16"
        return "fp16" if scaler_ok else "fp32"
    if name == "fp16" and not cuda:
        raise ConfigError("precision fp16 needs a CUDA GPU (training relies on its gradient scaler); "
                          "use precision \"auto\", \"bf16\" or \"fp32\" on this device")
    if name == "bf16" and cuda and not torch.cuda.is_bf16_supported():
        raise ConfigError("this GPU has no bf16 support; use precision \"auto\", \"fp16\" or \"fp32\"")
    return name


def autocast(precision: str, device: torch.device | str):
    """The context a forward pass runs in for a resolved `precision` ("auto" is resolved here too)."""
    device = torch.device(device)
    precision = resolve_precision(precision, device)
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=DTYPES[precision])


def describe(name: str, device: torch.device | str) -> str:
    """What a run log says, e.g. "bf16 (auto on cuda:0)" or "fp32"."""
    resolved = resolve_precision(name, device)
    return f"{resolved} (auto on {device})" if name == "auto" else resolved
