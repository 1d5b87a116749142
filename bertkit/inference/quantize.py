"""int8 inference: the encoder's linear layers as int8 x int8 -> int32 matrix products.

For y = x W^T + b with x (M, K) and W (N, K), three measures keep the error small:

1. Smoothing (SmoothQuant, Xiao et al. 2023). BERT's activations have a few input channels
   with large values, and its weights a few columns with large values (MiniLM's feed-forward
   output: one column at 7.9 where the median column peaks at 0.14). Both flatten the other
   channels to a few int8 levels. With a_k = max |x_k| over calibration inputs and
   w_k = max_n |W_nk|, the columns are rescaled by c_k = a_k^alpha / w_k^(1 - alpha):
   x W^T = (x / c)(W c)^T exactly, and both factors have flatter ranges (alpha = 0.5).
2. Outlier columns in fp32 (as LLM.int8 does at run time, here chosen once): the
   `outliers` input channels with the largest a_k w_k are left out of the int8 product and
   added back as a small fp32 product x[:, O] W[:, O]^T (OUTLIERS of them).
3. Fine scales: per output channel for the weights, s_n = max_k |W'_nk| / 127, once; per
   token for the activations, r_m = max_k |x'_mk| / 127, at every call. A scale per token
   (not one per tensor, as `torch.ao` dynamic quantization and ONNX Runtime's
   `quantize_dynamic` use) keeps a token with large values from flattening its neighbours.

    y_mn ~= r_m s_n sum_k q(x')_mk q(W')_nk  +  sum_{k in O} x_mk W_nk  +  b_n

with x' = x / c and W' = W c outside O (zero on O). The int32 sums are exact; they run in
`torch._int_mm` (oneDNN's VNNI kernels on CPUs that have them). The passes before and after
(quantizing x, and turning the sums into act(y) or LayerNorm(y + residual)) are one fused
kernel each (int8_kernels.py), and Q, K, V are one product sharing one quantization of their
input, as in fastpath.py's fp32 copy.

Calibration needs no data: a_k is measured on random token ids (seeded, 4 to 128 tokens,
between the tokenizer's [CLS] and [SEP]). On MiniLM that gave the same quality as BBC text
(min cosine 0.9939 vs 0.9946 on 124 short held-out texts; docs/inference.md).

Only the transformer layers' linear maps are quantized (Q, K, V, attention output, the two
feed-forward maps; each family's `layer_linears`: nearly all of an encoder's FLOPs). Embeddings, LayerNorms, attention
itself (softmax(QK^T)V in fp32), the pooler and task heads stay fp32. Inference only.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from bertkit.inference import int8_kernels as kernels
from bertkit.errors import ConfigError
from bertkit.inference.fastpath import FUSABLE, check_original, encoder_linears, pack_for_cpu, split_heads_qkv, swap_layer_maps
from bertkit.models.encoder import BertOutput, BertSelfAttention, BertSelfOutput
from bertkit.models.families import families
from bertkit.models.family import ModelFamily
from bertkit.runtime.precision import resolve_precision

QUANTIZE_MODES = ("int8",)  # the values of `quantize=` / what --int8 selects
ALPHA = 0.5  # smoothing strength: how much of the activations' range moves into the weights
# Input channels kept in fp32 per linear map. Measured on MiniLM (docs/inference.md, "A fourth
# attempt"): 4 keeps the worst short-text cosine at 0.993 and a fine-tuned BBC classifier's
# largest probability change at 0.06 (none: 0.11); each one is one more multiply-add per output
# in the dequantizing pass.
OUTLIERS = 4
CALIBRATION_LENGTHS = (4, 8, 16, 32, 64, 128)  # random-id sequences, 8 of each length


def activation_name(activation: nn.Module | None) -> str:
    """The int8_kernels.DEQUANTIZE pass of a fusable activation module (fastpath.FUSABLE's):
    its oneDNN post-op name, "gelu_tanh" for the tanh GELU."""
    if activation is None:
        return "none"
    post_op, _, algorithm = FUSABLE[type(activation)](activation)
    return "gelu_tanh" if algorithm == "tanh" else post_op


class Int8Map(nn.Module):
    """y = x W^T + b in int8 for inference, given the calibrated max |x_k| of its inputs
    (`input_max`, (K,)); the math is in the module docstring. Subclasses say what follows the
    product (`Int8Linear`: an activation; `Int8ResidualLinear`: residual add and LayerNorm;
    `Int8QKV`: the split into heads)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, input_max: torch.Tensor,
                 alpha: float = ALPHA, outliers: int = OUTLIERS):
        super().__init__()
        weight = weight.detach().float()
        self.out_features, self.in_features = weight.shape
        column_max = weight.abs().amax(0).clamp(min=1e-5)
        input_max = input_max.float().clamp(min=1e-5)
        smooth = input_max ** alpha / column_max ** (1 - alpha)  # c_k
        outlier_index = (input_max * column_max).topk(min(outliers, self.in_features)).indices
        smoothed = weight * smooth
        smoothed[:, outlier_index] = 0
        weight_scale = smoothed.abs().amax(1, keepdim=True).clamp(min=1e-12) / kernels.LEVELS
        input_scale = 1 / smooth
        input_scale[outlier_index] = 0  # x' = x / c, zero on O: one multiply does both
        self.register_buffer("input_scale", input_scale)
        # (N, K); its .t() view feeds _int_mm as (K, N)
        self.register_buffer("weight_int8", torch.round(smoothed / weight_scale).to(torch.int8))
        self.register_buffer("weight_scale", weight_scale.view(-1))  # (N,)
        self.register_buffer("outlier_index", outlier_index)  # O
        self.register_buffer("outlier_weight", weight[:, outlier_index].t().contiguous())  # (|O|, N)
        self.register_buffer("bias", torch.zeros(self.out_features) if bias is None else bias.detach().float().clone())

    def product(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """x (..., K) -> the int32 sums (M, N) and the rest of `kernels.dequantize`'s arguments."""
        q, row_scale, kept = kernels.quantize_rows(x.reshape(-1, self.in_features).float(), self.input_scale,
                                                   self.outlier_index)
        sums = torch._int_mm(q, self.weight_int8.t())
        return sums, row_scale, self.weight_scale, self.bias, kept, self.outlier_weight

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, int8, "
                f"{self.outlier_index.numel()} fp32 columns")


class Int8Linear(Int8Map):
    """act(x W^T + b) for an `nn.Linear` and an optional fused activation (GELU, ReLU)."""

    def __init__(self, linear: nn.Linear, input_max: torch.Tensor, alpha: float = ALPHA, outliers: int = OUTLIERS,
                 activation: nn.Module | None = None):
        super().__init__(linear.weight, linear.bias, input_max, alpha, outliers)
        self.activation = activation_name(activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = kernels.DEQUANTIZE[self.activation](*self.product(x))
        return y.to(x.dtype).view(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, activation {self.activation}"


class Int8ResidualLinear(Int8Map):
    """Replaces BertSelfOutput / BertOutput: LayerNorm(x W^T + b + residual), one pass after the
    int8 product (dropout is off in inference)."""

    def __init__(self, block: BertSelfOutput | BertOutput, input_max: torch.Tensor, alpha: float = ALPHA,
                 outliers: int = OUTLIERS):
        super().__init__(block.dense.weight, block.dense.bias, input_max, alpha, outliers)
        self.LayerNorm = block.LayerNorm

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        norm = self.LayerNorm
        y = kernels.dequantize_add_layer_norm(*self.product(x), residual.reshape(-1, self.out_features).float(),
                                              norm.weight, norm.bias, norm.eps)
        return y.to(x.dtype).view(residual.shape)


class Int8QKV(Int8Map):
    """x (B, T, H) -> q, k, v (B, h, T, d) from one int8 product with [Wq; Wk; Wv]: the three maps
    share one quantization of their common input (fastpath.PackedQKV's int8 form)."""

    def __init__(self, attention: BertSelfAttention, input_max: torch.Tensor, alpha: float = ALPHA,
                 outliers: int = OUTLIERS):
        maps = (attention.query, attention.key, attention.value)
        super().__init__(torch.cat([m.weight for m in maps]), torch.cat([m.bias for m in maps]), input_max,
                         alpha, outliers)
        self.num_heads, self.head_dim = attention.num_heads, attention.head_dim

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = kernels.dequantize(*self.product(x)).to(x.dtype)
        return split_heads_qkv(y.view(*x.shape[:-1], self.out_features), self.num_heads, self.head_dim)


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
def input_maxima(model: nn.Module, linears: dict[str, nn.Linear], batches) -> dict[str, torch.Tensor]:
    """max |x_k| of each linear map's input over the calibration batches (forward hooks)."""
    found: dict[str, torch.Tensor] = {}

    def record(name):
        def hook(module, inputs, output):
            value = inputs[0].detach().reshape(-1, inputs[0].shape[-1]).abs().amax(0).float()
            found[name] = value if name not in found else torch.maximum(found[name], value)
        return hook

    handles = [linear.register_forward_hook(record(name)) for name, linear in linears.items()]
    try:
        for ids in batches:
            model(ids)
    finally:
        for handle in handles:
            handle.remove()
    return found


def quantize_int8(model: nn.Module, tokenizer=None, alpha: float = ALPHA, outliers: int = OUTLIERS) -> nn.Module:
    """An inference copy of `model` (an encoder of any family, or a model with heads) whose
    transformer layers' linear maps run in int8 (BERT's Q, K, V as one `Int8QKV`, its output maps
    as `Int8ResidualLinear`, its first feed-forward map with the GELU fused; other families' maps
    as `Int8Linear`), calibrated on random
    ids (pass the model's tokenizer so they sit between [CLS] and [SEP]); `model` itself is
    unchanged. Returned in eval mode. `alpha=0, outliers=0` is plain per-channel / per-token int8
    (for comparison)."""
    check_original(model)
    if getattr(getattr(model, "config", None), "model_type", None) == "encoder-decoder":
        raise ConfigError("int8 inference quantizes an encoder and its heads; a seq2seq (encoder-decoder) model also "
                          "generates with its decoder, which has no int8 path: drop --int8")
    on = next(model.parameters()).device
    if on.type != "cpu":
        raise ConfigError(f"int8 inference runs on the CPU (its matrix products are oneDNN's), this model is on "
                          f"{on}; drop --int8 or use --device cpu")
    copied = copy.deepcopy(model).eval()
    linears = encoder_linears(copied)
    if not linears:
        raise ConfigError(f"quantize_int8: {type(model).__name__} has no encoder layers "
                          f"(expected a bertkit {' or '.join(f.base_class.__name__ for f in families())}, or a "
                          "model with heads on one)")
    batches = calibration_inputs(copied.config, tokenizer)
    if ModelFamily.role(type(copied)) == "ForMultipleChoice":  # any family's multiple-choice head
        batches = [ids[:, None] for ids in batches]  # (batch, choices, length): one choice per row
    maxima = input_maxima(copied, linears, batches)
    swap_layer_maps(copied,
                    make_qkv=lambda attention, name: Int8QKV(attention, maxima[name], alpha, outliers),
                    make_residual=lambda block, name: Int8ResidualLinear(block, maxima[name], alpha, outliers),
                    make_linear=lambda linear, activation, name: Int8Linear(linear, maxima[name], alpha, outliers,
                                                                            activation))
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
                   device: torch.device | str = "cpu", precision: str = "auto") -> nn.Module:
    """What `predict` and `evaluate` run: on the CPU an int8 copy, or (running in fp32) a copy with
    oneDNN-packed weights (same numbers, faster; its fused kernels take fp32 only); elsewhere the
    model itself on `device`."""
    model = model.to(device)
    if int8:
        return quantize_int8(model, tokenizer)  # refuses a model off the CPU
    fp32_cpu = torch.device(device).type == "cpu" and resolve_precision(precision, device) == "fp32"
    return pack_for_cpu(model) if fp32_cpu else model.eval()
