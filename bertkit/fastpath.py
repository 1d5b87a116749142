"""A faster fp32 inference copy of an encoder on CPU: oneDNN-packed linear weights, GELU fused.

`nn.Linear` on CPU runs MKL's sgemm on the weight as stored, every call. For inference the
weights do not change, so each transformer-layer linear map can be reordered once into
oneDNN's blocked layout (`torch.ops.mkldnn._reorder_linear_weight`, what torch.compile's
CPU freezing pass does) and run by oneDNN's matmul (`torch.ops.mkldnn._linear_pointwise`),
which also applies the feed-forward's GELU in the same pass over the output:

    BertIntermediate:  gelu(x W1^T + b1)   one oneDNN call instead of a GEMM and a GELU pass

The numbers are the same up to fp32 summation order (checked against transformers within
1e-5 in tests/test_fastpath.py). The model's code (model.py) is untouched: the copy has its
linear modules swapped. Inference only (no gradients); falls back to the model as it is when
torch has no oneDNN.
"""

from __future__ import annotations

import copy
import re

import torch
from torch import nn

from .errors import ConfigError

# The transformer layers' own linear maps, by name; other modules inside a layer (PEFT adapters,
# prefix encoders, MoE routers) may read `.weight` themselves and are left alone.
ENCODER_LINEAR = re.compile(r"(^|\.)encoder\.layer\.\d+\.(attention\.self\.(query|key|value)|"
                            r"attention\.output\.dense|intermediate\.dense|output\.dense)$")
# activation module type -> oneDNN post-op name and algorithm ("none": exact erf GELU)
_FUSABLE = {nn.GELU: lambda m: ("gelu", [], m.approximate), nn.ReLU: lambda m: ("relu", [], "")}


def available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


class PackedLinear(nn.Module):
    """y = act(x W^T + b) with W reordered once for oneDNN (act: none, or a fused GELU/ReLU)."""

    def __init__(self, linear: nn.Linear, activation: nn.Module | None = None):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        weight = linear.weight.detach().float().contiguous()
        self.register_buffer("weight", torch.ops.mkldnn._reorder_linear_weight(weight, None))
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().float().clone())
        self.post_op, self.scalars, self.algorithm = ("none", [], "") if activation is None \
            else _FUSABLE[type(activation)](activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), self.weight, self.bias, self.post_op,
                                                  self.scalars, self.algorithm)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, oneDNN, post-op {self.post_op}"


def encoder_linears(model: nn.Module) -> dict[str, nn.Linear]:
    """name -> module of the transformer layers' linear maps (exactly nn.Linear: not wrappers)."""
    return {name: m for name, m in model.named_modules() if ENCODER_LINEAR.search(name) and type(m) is nn.Linear}


def check_original(model: nn.Module) -> None:
    """Inference copies (packed or int8: `inference_copy` set) hold weights that cannot be
    copied or re-quantized; they are made from the original model."""
    if getattr(model, "inference_copy", None):
        raise ConfigError(f"this {type(model).__name__} is already an inference copy "
                          f"({model.inference_copy}); make it from the original model, e.g. a fresh "
                          "from_pretrained")


def pack_for_cpu(model: nn.Module) -> nn.Module:
    """An fp32 inference copy of `model` (BertModel or a model with heads) with its transformer
    layers' linear maps as `PackedLinear`, the feed-forward activation fused where oneDNN has
    it; `model` is unchanged. Returned in eval mode; without oneDNN, a plain eval copy."""
    check_original(model)
    copied = copy.deepcopy(model).eval()
    copied.inference_copy = "packed"
    if not available():
        return copied
    linears = encoder_linears(copied)
    for name, linear in linears.items():
        parent_name, _, child = name.rpartition(".")
        parent = copied.get_submodule(parent_name)
        act = getattr(parent, "intermediate_act_fn", None)
        if child == "dense" and type(act) in _FUSABLE:  # BertIntermediate: act(dense(x)), fused
            parent.dense, parent.intermediate_act_fn = PackedLinear(linear, act), nn.Identity()
        else:
            setattr(parent, child, PackedLinear(linear))
    for p in copied.parameters():
        p.requires_grad_(False)
    return copied
