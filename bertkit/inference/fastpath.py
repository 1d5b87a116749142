"""A faster fp32 inference copy of an encoder on CPU: oneDNN-packed linear weights, with the
feed-forward GELU, the residual adds and the Q, K, V projections fused.

`nn.Linear` on CPU runs MKL's sgemm on the weight as stored, every call. For inference the
weights do not change, so each transformer-layer linear map can be reordered once into
oneDNN's blocked layout (`torch.ops.mkldnn._reorder_linear_weight`, what torch.compile's
CPU freezing pass does) and run by oneDNN's matmul (`torch.ops.mkldnn._linear_pointwise`),
which also applies the feed-forward's GELU in the same pass over the output:

    BertIntermediate:  gelu(x W1^T + b1)   one oneDNN call instead of a GEMM and a GELU pass
    BertSelfOutput, BertOutput:  LayerNorm(x W^T + b + residual)   the add rides on the GEMM
    BertSelfAttention: [Q | K | V] = x [Wq | Wk | Wv]^T + [bq | bk | bv]   one GEMM, not three

The numbers are the same up to fp32 summation order (checked against the unpacked model and
transformers within 1e-5 in tests/test_fastpath.py). The copy has its modules swapped; the one
hook in model.py is `BertSelfAttention.qkv`, set only by inference copies (here and in quantize.py,
whose int8 copy swaps the same maps through `swap_layer_maps`). The fused and packed weights live in
the copy alone: the original model (what trains, what is saved) keeps its own three projections,
and a copy made after the weights changed packs the new ones (`weights_key` tells a holder of a
copy when to make a new one). Inference only (no gradients); falls back to the model as it is when
torch has no oneDNN.
"""

from __future__ import annotations

import copy
import re

import torch
from torch import nn

from bertkit.errors import ConfigError
from bertkit.models.encoder import BertOutput, BertSelfAttention, BertSelfOutput
from bertkit.models.families import families



def layer_linears() -> re.Pattern:
    """The transformer layers' own linear maps, by name: each model family's `layer_linears`
    (BERT's encoder.layer.N.{attention.self.{query,key,value}, attention.output.dense,
    intermediate.dense, output.dense}, ...). Other modules inside a layer (PEFT adapters, prefix
    encoders, MoE routers) may read `.weight` themselves and are left alone."""
    return re.compile(r"(^|\.)(" + "|".join(f"(?:{family.layer_linears})" for family in families()) + r")$")


# activation module type -> oneDNN post-op name and algorithm ("none": exact erf GELU): the
# activations an inference copy fuses into the map before them (quantize.py's int8 copy too)
FUSABLE = {nn.GELU: lambda m: ("gelu", [], m.approximate), nn.ReLU: lambda m: ("relu", [], "")}


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
            else FUSABLE[type(activation)](activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), self.weight, self.bias, self.post_op,
                                                  self.scalars, self.algorithm)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, oneDNN, post-op {self.post_op}"


class PackedResidualLinear(nn.Module):
    """Replaces BertSelfOutput / BertOutput: LayerNorm(x W^T + b + residual), the add done by
    oneDNN on the GEMM's output (a post-op) instead of a separate pass; dropout is off in inference."""

    def __init__(self, block: BertSelfOutput | BertOutput):
        super().__init__()
        self.dense = PackedLinear(block.dense)
        self.LayerNorm = block.LayerNorm

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        d = self.dense
        summed = torch.ops.mkldnn._linear_pointwise.binary(x.contiguous(), residual.contiguous(), d.weight,
                                                           d.bias, "add")
        return self.LayerNorm(summed)


class PackedQKV(nn.Module):
    """x (B, T, H) -> q, k, v (B, h, T, d) from one GEMM over the concatenated weights
    [Wq; Wk; Wv] (3H x H): one pass over x and one oneDNN call instead of three."""

    def __init__(self, attention: BertSelfAttention):
        super().__init__()
        self.num_heads, self.head_dim = attention.num_heads, attention.head_dim
        fused = nn.Linear(attention.query.in_features, 3 * attention.query.out_features)
        with torch.no_grad():
            fused.weight.copy_(torch.cat([attention.query.weight, attention.key.weight, attention.value.weight]))
            fused.bias.copy_(torch.cat([attention.query.bias, attention.key.bias, attention.value.bias]))
        self.linear = PackedLinear(fused)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return split_heads_qkv(self.linear(x), self.num_heads, self.head_dim)


def split_heads_qkv(qkv: torch.Tensor, num_heads: int, head_dim: int
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(B, T, 3H) [Q | K | V] -> q, k, v (B, h, T, d): strided views, which SDPA reads as they are."""
    batch, seq_len, _ = qkv.shape
    return qkv.view(batch, seq_len, 3, num_heads, head_dim).permute(2, 0, 3, 1, 4).unbind(0)


def encoder_linears(model: nn.Module) -> dict[str, nn.Linear]:
    """name -> module of the transformer layers' linear maps (exactly nn.Linear: not wrappers)."""
    pattern = layer_linears()
    return {name: m for name, m in model.named_modules() if pattern.search(name) and type(m) is nn.Linear}


def check_original(model: nn.Module) -> None:
    """Inference copies (packed or int8: `inference_copy` set) hold weights that cannot be
    copied or re-quantized; they are made from the original model."""
    if getattr(model, "inference_copy", None):
        raise ConfigError(f"this {type(model).__name__} is already an inference copy "
                          f"({model.inference_copy}); make it from the original model, e.g. a fresh "
                          "from_pretrained")


def weights_key(model: nn.Module) -> tuple:
    """Changes whenever a parameter or buffer of `model` is changed in place (an optimizer step,
    load_state_dict, `with torch.no_grad(): w += ...`: each bumps the tensor's version counter)
    or replaced: what a packed copy was made from, to compare with the model now. An opaque
    oneDNN tensor (a packed copy's weight, when a copy is what the caller gave) has no data
    pointer: its identity stands in."""
    return tuple((t.data_ptr() if t.layout == torch.strided else id(t), t._version)
                 for t in [*model.parameters(), *model.buffers()])


def pack_for_cpu(model: nn.Module, fuse_qkv: bool = True, fuse_residual: bool = True) -> nn.Module:
    """An fp32 inference copy of `model` (an encoder of any family, or a model with heads) with its
    transformer layers' linear maps as `PackedLinear`, the feed-forward activation fused where oneDNN has
    it, the residual add fused into the output projections (`fuse_residual`) and Q, K, V as one
    GEMM (`fuse_qkv`; encoders only, not decoders with a KV cache); `model` is unchanged. The
    switches exist to measure each fusion alone (benchmarks/bench_fp32_levers.py). Returned in
    eval mode, with `packed_from = weights_key(model)`; without oneDNN, a plain eval copy."""
    check_original(model)
    copied = copy.deepcopy(model).eval()
    copied.inference_copy = "packed"
    copied.packed_from = weights_key(model)
    if not available():
        return copied
    swap_layer_maps(copied,
                    make_qkv=(lambda attention, name: PackedQKV(attention)) if fuse_qkv else None,
                    make_residual=(lambda block, name: PackedResidualLinear(block)) if fuse_residual else None,
                    make_linear=lambda linear, activation, name: PackedLinear(linear, activation))
    for p in copied.parameters():
        p.requires_grad_(False)
    return copied


def swap_layer_maps(model: nn.Module, make_qkv, make_residual, make_linear) -> None:
    """Replace the transformer layers' linear maps of `model` (an inference copy), in place:
    each fusable self-attention's Q, K, V by `make_qkv(attention, name)` (set as its `qkv`; see
    `fuse_qkv_projections`), each BertSelfOutput / BertOutput by `make_residual(block, name)`
    (LayerNorm(x W^T + b + residual)), and every other map by `make_linear(linear, activation,
    name)`, with `activation` the feed-forward's GELU/ReLU module when it can ride on the map (the
    layer's own activation then becomes Identity), else None. None for make_qkv or make_residual
    leaves those maps to make_linear. `name` is the module's name in `model` (the original map's
    name: query's for Q, K, V, the block's dense for a residual block)."""
    if make_qkv is not None:
        fuse_qkv_projections(model, make_qkv)
    if make_residual is not None:
        pattern = layer_linears()
        for name, block in list(model.named_modules()):
            if type(block) in (BertSelfOutput, BertOutput) and type(block.dense) is nn.Linear \
                    and pattern.search(name + ".dense"):
                parent_name, _, child = name.rpartition(".")
                setattr(model.get_submodule(parent_name), child, make_residual(block, name + ".dense"))
    for name, linear in encoder_linears(model).items():
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        act = getattr(parent, "intermediate_act_fn", None)
        if child == "dense" and type(act) in FUSABLE:  # BertIntermediate: act(dense(x)), fused
            parent.dense, parent.intermediate_act_fn = make_linear(linear, act, name), nn.Identity()
        else:
            setattr(parent, child, make_linear(linear, None, name))


def fuse_qkv_projections(model: nn.Module, make_qkv=lambda attention, name: PackedQKV(attention)) -> None:
    """Give every encoder self-attention whose three projections are plain nn.Linear (not LoRA
    wrappers) a fused projection `make_qkv(attention, name of its query)` and drop the three: the
    copy holds the weights once. Not for DeBERTa's disentangled attention, which projects relative
    positions with the query and key maps."""
    pattern = layer_linears()
    for name, attention in list(model.named_modules()):
        if type(attention) is BertSelfAttention and not attention.causal and attention.disentangled is None \
                and pattern.search(name + ".query") \
                and all(type(getattr(attention, p)) is nn.Linear for p in ("query", "key", "value")):
            attention.qkv = make_qkv(attention, name + ".query")
            attention.query = attention.key = attention.value = None
