"""int8 inference: the encoder's linear maps as oneDNN int8 x int8 -> int32 GEMMs with the
dequantization, bias, GELU and residual add fused into the GEMM's output pass.

For y = x W^T + b with x (M, K) and W (N, K):

    y_mn ~= r s_n sum_k q(x / c)_mk q(W c)_nk + b_n

* weights: per output channel, s_n = max_k |W'_nk| / 127, quantized once;
* activations: one symmetric scale per tensor, r = max |x'| / 127, measured at every call
  (one reduction pass; oneDNN's int8 matmul takes one source scale, not one per token);
* smoothing (SmoothQuant, Xiao et al. 2023) of the maps that read a LayerNorm output (Q|K|V and
  the first feed-forward map): BERT's LayerNorm outputs have a few channels with large values,
  which would flatten the other channels to a few int8 levels under one scale per tensor. Column
  k of W is multiplied by c_k = a_k^alpha / w_k^(1 - alpha) (a_k = max |x_k| over calibration
  inputs, w_k = max_n |W_nk|, alpha 0.5) and x_k divided by it: exact in real numbers. The
  division rides on the quantizing multiply (x * (1 / (c r))), so it costs no pass of its own.
  It cannot be folded into the LayerNorm: that output is also the residual stream.

The transformer layer runs as (`Int8QKV`, `Int8Intermediate`, `Int8ResidualLinear`):

    q, k, v  = int8(x_smoothed) @ [Wq; Wk; Wv]          one GEMM, fp32 out, bias fused
    h        = LayerNorm(int8(context) @ Wo + residual)  the add fused (oneDNN binary post-op)
    a        = GELU(int8(h_smoothed) @ W1)              GELU fused, written as uint8 at a
                                                         calibrated scale: the second map's
                                                         input needs no quantization pass
    out      = LayerNorm(a @ W2 + h + u)                 the add fused

The GELU output has a few intermediate channels with large values (6-24 where the median channel
peaks at 1.3-1.6 in MiniLM), and the second map's weight columns for them are its outliers too.
The `OUTLIERS` channels with the largest a_k w_k are left out of int8 (their rows of W1 zeroed:
GELU(0) = 0) and computed in fp32 as a rank-r update u = GELU(h W1[O]^T + b1[O]) W2[:, O]^T,
added to the residual before the fused add.

Calibration needs no data: a_k and the GELU output's range are measured on seeded random token ids
(4 to 128 tokens, between [CLS] and [SEP]). Maps outside this pattern (separate Q, K, V when they
cannot be fused, a feed-forward activation oneDNN cannot fuse) are `Int8Linear`: the same
dynamic per-tensor int8 with fp32 output. Embeddings, LayerNorms, attention itself
(softmax(QK^T)V in fp32), the pooler and task heads stay fp32. Inference only, CPU only.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from .errors import ConfigError
from .fastpath import _FUSABLE, check_original, encoder_linears
from .model import BertIntermediate, BertLayer, BertOutput, BertSelfAttention, BertSelfOutput

QUANTIZE_MODES = ("int8",)  # the values of `quantize=` / what --int8 selects
_LEVELS = 127.0  # symmetric int8: -127..127
ALPHA = 0.5  # smoothing strength: how much of the activations' range moves into the weights
OUTLIERS = 4  # intermediate channels per feed-forward block kept in fp32
CALIBRATION_LENGTHS = (4, 8, 16, 32, 64, 128)  # random-id sequences, 8 of each length


def available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops, "onednn") \
        and hasattr(torch.ops.onednn, "qlinear_pointwise")


def quantize_tensor(x: torch.Tensor, inverse_smooth: torch.Tensor | None = None) -> tuple[torch.Tensor, float]:
    """x (..., K) float -> (int8 of x / c, r) with x / c ~= q * r, one scale r for the tensor;
    `inverse_smooth` is 1 / c (K,), or None for c = 1."""
    flat = x.reshape(-1, x.shape[-1])
    if inverse_smooth is None:
        peak = float(torch.linalg.vector_norm(flat, float("inf")))
        multiplier: torch.Tensor | float = _LEVELS / max(peak, 1e-12)
    else:  # max |x_k / c_k| from the per-channel maxima: one reduction pass over x
        peak = float((torch.linalg.vector_norm(flat, float("inf"), dim=0) * inverse_smooth).max())
        multiplier = inverse_smooth * (_LEVELS / max(peak, 1e-12))
    # |x / (c r)| <= 127 up to one rounding error, which round() takes back to 127: no clamp.
    return torch.mul(flat, multiplier).round_().to(torch.int8), max(peak, 1e-12) / _LEVELS


class Int8Weight(nn.Module):
    """W (N, K) as per-output-channel int8, packed once for oneDNN, and the GEMM on it:
    `run(q, r, zero_point, ...)` = post_op(r s_n q W_q^T + b), optionally + `other` and written
    as uint8 at a given scale."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        weight = weight.detach().float()
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]
        scale = weight.abs().amax(1).clamp(min=1e-12) / _LEVELS
        self.register_buffer("scale", scale)  # (N,) s_n
        self.register_buffer("zero_point", torch.zeros(len(scale), dtype=torch.long))
        self.register_buffer("packed", torch.ops.onednn.qlinear_prepack((weight / scale[:, None]).round().to(torch.int8), None))
        self.register_buffer("bias", None if bias is None else bias.detach().float().clone())

    def run(self, q: torch.Tensor, r: float, zero_point: int = 0, post_op: tuple = ("none", [], ""),
            out_scale: float = 1.0, out_zero_point: int = 0, out_dtype: torch.dtype = torch.float32,
            other: torch.Tensor | None = None) -> torch.Tensor:
        if other is None:
            return torch.ops.onednn.qlinear_pointwise(q, r, zero_point, self.packed, self.scale, self.zero_point,
                                                      self.bias, out_scale, out_zero_point, out_dtype, *post_op)
        return torch.ops.onednn.qlinear_pointwise.binary(q, r, zero_point, self.packed, self.scale, self.zero_point,
                                                         other, self.bias, out_scale, out_zero_point, out_dtype,
                                                         1.0, 0, "add", 1.0, *post_op)


def smoothing(weight: torch.Tensor, input_max: torch.Tensor, alpha: float) -> torch.Tensor:
    """c_k = a_k^alpha / w_k^(1 - alpha) (ones for alpha = 0)."""
    return input_max.float().clamp(min=1e-5) ** alpha / weight.abs().amax(0).clamp(min=1e-5) ** (1 - alpha)


class Int8Linear(nn.Module):
    """y = act(x W^T + b) (act: none, or one oneDNN fuses) with dynamic per-tensor int8
    activations, smoothed by the calibrated input maxima `input_max` (K,)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, input_max: torch.Tensor,
                 alpha: float = ALPHA, activation: nn.Module | None = None):
        super().__init__()
        weight = weight.detach().float()
        smooth = smoothing(weight, input_max, alpha)
        self.weight = Int8Weight(weight * smooth, bias)
        self.register_buffer("inverse_smooth", None if alpha == 0 else 1 / smooth)
        self.post_op = ("none", [], "") if activation is None else _FUSABLE[type(activation)](activation)
        self.out_features, self.in_features = weight.shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, r = quantize_tensor(x, self.inverse_smooth)
        return self.weight.run(q, r, post_op=self.post_op).view(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8, post-op {self.post_op[0]}"


class Int8QKV(nn.Module):
    """x (B, T, H) -> q, k, v (B, h, T, d) from one int8 GEMM over [Wq; Wk; Wv] (the
    `BertSelfAttention.qkv` hook, as fastpath.PackedQKV): one quantization of the shared input."""

    def __init__(self, attention: BertSelfAttention, input_max: torch.Tensor, alpha: float = ALPHA):
        super().__init__()
        self.num_heads, self.head_dim = attention.num_heads, attention.head_dim
        maps = (attention.query, attention.key, attention.value)
        self.linear = Int8Linear(torch.cat([m.weight.detach() for m in maps]),
                                 torch.cat([m.bias.detach() for m in maps]), input_max, alpha)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        batch, seq_len, _ = x.shape
        return self.linear(x).view(batch, seq_len, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)


class QuantizedActivation:
    """The first feed-forward map's output as uint8 (`values`, value ~= scale (q - zero_point))
    and the fp32 rank-r part of the second map (`update`, (M, N)), for `Int8ResidualLinear`."""

    def __init__(self, values: torch.Tensor, scale: float, zero_point: int, update: torch.Tensor):
        self.values, self.scale, self.zero_point, self.update = values, scale, zero_point, update


class Int8Intermediate(nn.Module):
    """Replaces BertIntermediate: act(x W1^T + b1) with the activation fused into the int8 GEMM
    and written as uint8 at the calibrated range [low, high] of its output; the `outliers`
    channels go to fp32 (module docstring)."""

    def __init__(self, block: BertIntermediate, second: nn.Linear, input_max: torch.Tensor,
                 outliers: torch.Tensor, low: float, high: float, alpha: float = ALPHA):
        super().__init__()
        w1, b1 = block.dense.weight.detach().float().clone(), block.dense.bias.detach().float().clone()
        self.register_buffer("outlier_weight", w1[outliers].clone())  # (r, K)
        self.register_buffer("outlier_bias", b1[outliers].clone())
        self.register_buffer("outlier_second", second.weight.detach().float()[:, outliers].t().contiguous())  # (r, N)
        w1[outliers], b1[outliers] = 0, 0  # act(0) = 0 for GELU and ReLU: the int8 part leaves them out
        self.act = block.intermediate_act_fn
        self.linear = Int8Linear(w1, b1, input_max, alpha, self.act)
        self.scale = max(high - low, 1e-6) / 255
        self.zero_point = int(round(-low / self.scale))

    def forward(self, x: torch.Tensor) -> QuantizedActivation:
        flat = x.reshape(-1, x.shape[-1])
        q, r = quantize_tensor(flat, self.linear.inverse_smooth)
        values = self.linear.weight.run(q, r, post_op=self.linear.post_op, out_scale=self.scale,
                                        out_zero_point=self.zero_point, out_dtype=torch.uint8)
        kept = self.act(torch.addmm(self.outlier_bias, flat, self.outlier_weight.t()))
        return QuantizedActivation(values, self.scale, self.zero_point, kept @ self.outlier_second)


class Int8ResidualLinear(nn.Module):
    """Replaces BertSelfOutput / BertOutput: LayerNorm(x W^T + b + residual), the add done by
    oneDNN on the int8 GEMM's output. `x` is a float tensor (quantized here, per tensor) or the
    `QuantizedActivation` of `Int8Intermediate` (its fp32 update added to the residual first)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, layer_norm: nn.LayerNorm):
        super().__init__()
        self.weight = Int8Weight(weight, bias)
        self.LayerNorm = layer_norm

    def forward(self, x: torch.Tensor | QuantizedActivation, residual: torch.Tensor) -> torch.Tensor:
        shape = residual.shape
        residual = residual.reshape(-1, shape[-1])
        if isinstance(x, QuantizedActivation):
            q, r, zero_point, residual = x.values, x.scale, x.zero_point, x.update.add_(residual)
        else:
            (q, r), zero_point = quantize_tensor(x), 0
        return self.LayerNorm(self.weight.run(q, r, zero_point, other=residual.contiguous()).view(shape))


def calibration_inputs(config, tokenizer=None, seed: int = 0) -> list[torch.Tensor]:
    """Random token ids (no special tokens inside), 8 rows per length of CALIBRATION_LENGTHS,
    wrapped in [CLS] ... [SEP] when a tokenizer is given (those tokens carry BERT's largest
    activations, so calibration must see them)."""
    generator = torch.Generator().manual_seed(seed)
    special = set(tokenizer.all_special_ids) if tokenizer is not None else {config.pad_token_id}
    allowed = torch.tensor([i for i in range(config.vocab_size) if i not in special])
    batches = []
    for length in CALIBRATION_LENGTHS:
        length = min(length, config.max_sequence_length)
        ids = allowed[torch.randint(len(allowed), (8, length), generator=generator)]
        if tokenizer is not None and length >= 3:
            ids[:, 0], ids[:, -1] = tokenizer.cls_token_id, tokenizer.sep_token_id
        batches.append(ids)
    return batches


@torch.no_grad()
def input_ranges(model: nn.Module, linears: dict[str, nn.Linear], batches) -> dict[str, torch.Tensor]:
    """Per linear map, (2, K): max |x_k| and min x_k of its input over the calibration batches."""
    found: dict[str, torch.Tensor] = {}

    def record(name):
        def hook(module, inputs, output):
            rows = inputs[0].detach().reshape(-1, inputs[0].shape[-1]).float()
            value = torch.stack([rows.abs().amax(0), -rows.amin(0)])  # both as maxima
            found[name] = value if name not in found else torch.maximum(found[name], value)
        return hook

    handles = [linear.register_forward_hook(record(name)) for name, linear in linears.items()]
    try:
        for ids in batches:
            model(ids)
    finally:
        for handle in handles:
            handle.remove()
    return {name: torch.stack([v[0], -v[1]]) for name, v in found.items()}


def _fusable_layer(layer: BertLayer) -> bool:
    """A plain encoder layer: fused Q|K|V (as fastpath.fuse_qkv_projections allows), nn.Linear
    maps and an activation oneDNN fuses (GELU, ReLU: act(0) = 0)."""
    attention = layer.attention.self
    return layer.moe is None and layer.crossattention is None and not attention.causal \
        and attention.disentangled is None and attention.prefix is None \
        and all(type(getattr(attention, p)) is nn.Linear for p in ("query", "key", "value")) \
        and type(layer.attention.output) is BertSelfOutput and type(layer.output) is BertOutput \
        and type(layer.intermediate) is BertIntermediate \
        and all(type(m.dense) is nn.Linear for m in (layer.attention.output, layer.intermediate, layer.output)) \
        and type(layer.intermediate.intermediate_act_fn) in _FUSABLE


def quantize_layer(layer: BertLayer, ranges: dict[str, torch.Tensor], prefix: str, alpha: float, outliers: int) -> None:
    """Swap a `_fusable_layer`'s modules for the int8 ones (module docstring); `ranges` by
    linear-map name under `prefix` (the layer's name + ".")."""
    attention = layer.attention.self
    attention.qkv = Int8QKV(attention, ranges[prefix + "attention.self.query"][0], alpha)
    attention.query = attention.key = attention.value = None
    second = layer.output.dense
    activation_max, activation_min = ranges[prefix + "output.dense"]
    chosen = (activation_max * second.weight.detach().abs().amax(0)).topk(min(outliers, len(activation_max))).indices
    kept = torch.ones(len(activation_max), dtype=torch.bool)
    kept[chosen] = False
    high, low = float(activation_max[kept].max()), min(float(activation_min[kept].min()), 0.0)
    layer.intermediate = Int8Intermediate(layer.intermediate, second, ranges[prefix + "intermediate.dense"][0],
                                          chosen, low, high, alpha)
    w2 = second.weight.detach().float().clone()
    w2[:, chosen] = 0  # computed in fp32 by Int8Intermediate
    layer.output = Int8ResidualLinear(w2, second.bias, layer.output.LayerNorm)
    block = layer.attention.output
    layer.attention.output = Int8ResidualLinear(block.dense.weight, block.dense.bias, block.LayerNorm)


def quantize_int8(model: nn.Module, tokenizer=None, alpha: float = ALPHA, outliers: int = OUTLIERS) -> nn.Module:
    """An inference copy of `model` (a BertModel or a model with heads) whose transformer
    layers run their linear maps in int8 (module docstring), calibrated on random ids (pass the
    model's tokenizer so they sit between [CLS] and [SEP]); `model` itself is unchanged.
    Returned in eval mode. `alpha=0, outliers=0`: no smoothing, no fp32 channels (for comparison)."""
    check_original(model)
    on = next(model.parameters()).device
    if on.type != "cpu":
        raise ConfigError(f"int8 inference runs on the CPU (its matrix products are oneDNN's), this model is on "
                          f"{on}; drop --int8 or use --device cpu")
    if not available():
        raise ConfigError("int8 inference needs torch built with oneDNN (torch.ops.onednn.qlinear_pointwise); "
                          "drop --int8 or install the standard CPU build of torch")
    copied = copy.deepcopy(model).eval()
    linears = encoder_linears(copied)
    if not linears:
        raise ConfigError(f"quantize_int8: {type(model).__name__} has no encoder layers "
                          "(expected a bertkit BertModel or a model with a `bert` encoder)")
    ranges = input_ranges(copied, linears, calibration_inputs(copied.config, tokenizer))
    for name, layer in list(copied.named_modules()):
        if type(layer) is BertLayer and f"{name}.attention.self.query" in ranges and _fusable_layer(layer):
            quantize_layer(layer, ranges, name + ".", alpha, outliers)
    for name, linear in encoder_linears(copied).items():  # what the fused layers did not take
        parent_name, _, child = name.rpartition(".")
        setattr(copied.get_submodule(parent_name), child, Int8Linear(linear.weight, linear.bias, ranges[name][0], alpha))
    for p in copied.parameters():
        p.requires_grad_(False)
    copied.inference_copy = "int8"
    return copied


def check_quantize(mode: str | None) -> str | None:
    """None (fp32) or a mode of QUANTIZE_MODES; anything else is a ConfigError."""
    if mode is not None and mode not in QUANTIZE_MODES:
        raise ConfigError(f"unknown quantize mode {mode!r}; use None (fp32) or one of {', '.join(QUANTIZE_MODES)}")
    return mode


def inference_copy(model: nn.Module, tokenizer=None, int8: bool = False,
                   device: torch.device | str = "cpu") -> nn.Module:
    """What `predict` and `evaluate` run: on the CPU an int8 copy, or an fp32 copy with
    oneDNN-packed weights (same numbers, faster); elsewhere the model itself on `device`."""
    from .fastpath import pack_for_cpu

    model = model.to(device)
    if int8:
        return quantize_int8(model, tokenizer)  # refuses a model off the CPU
    return pack_for_cpu(model) if torch.device(device).type == "cpu" else model.eval()
