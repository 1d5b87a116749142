"""The passes around an int8 matrix product, each fused into one loop nest by torch.compile.

An int8 linear map (quantize.py) is three steps: quantize the input, one scale per token; multiply
in int8 with int32 sums (`torch._int_mm`); turn the sums back into floats and apply what follows
the map (bias, GELU, residual add and LayerNorm). In plain torch the first and last steps are 4 to
8 passes over memory each, which together cost more than the int8 product (docs/inference.md). Each
function below is one step; `torch.compile` (Inductor, with dynamic shapes: one build for every
batch) turns it into one C++ loop nest over the data. The first call builds it (seconds; cached on
disk by torch for later processes).

Every function is plain torch, and runs unfused (same math) where it cannot be compiled (no C++
compiler, an unsupported platform: warned once) or when `FUSE` is False (to measure what fusing
buys: benchmarks/bench_fp32_levers.py --levers int8-fused). Inference only.

Notation: x (M, K) float rows, q (M, K) int8, y (M, N) int32 sums, r (M, 1) per-token scales,
s (N,) per-output-channel weight scales, and the fp32 part of the product (quantize.py's outlier
columns) as `kept` (M, |O|) inputs times `outlier_weight` (|O|, N).
"""

from __future__ import annotations

import functools
import warnings

import torch
import torch.nn.functional as F

LEVELS = 127.0  # symmetric int8: -127..127 (-128 unused, so negation never overflows)
FUSE = True  # False: every pass runs unfused, eagerly (the same numbers up to rounding order)


def fused(fn):
    """`fn` compiled on its first call, or `fn` itself where compiling fails (warned once). Each
    variant (dtypes, grad mode, thread count, the number of outlier columns) is built once; past
    torch's recompile limit (8), new variants run unfused while the built ones stay in use."""
    state = {"run": None}  # built on the first call: importing torch.compile's machinery takes seconds

    @functools.wraps(fn)
    def run(*args):
        if not FUSE:
            return fn(*args)
        if state["run"] is None:
            state["run"] = torch.compile(fn, dynamic=True)
        try:
            return state["run"](*args)
        except Exception as error:  # noqa: BLE001 - any build failure: the unfused pass is the same math
            if state["run"] is fn:
                raise
            warnings.warn(f"int8: torch.compile could not build {fn.__name__} ({type(error).__name__}: "
                          f"{str(error).splitlines()[0][:200]}); running it unfused: the same numbers, slower",
                          stacklevel=2)
            state["run"] = fn
            return fn(*args)

    return run


def _quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: r = max_k |x_k| / 127, q = round(x / r). |x / r| <= 127 up to one rounding error,
    which round() takes back to 127: no clamp."""
    scale = x.abs().amax(-1, keepdim=True).clamp(min=1e-12) / LEVELS
    return torch.round(x / scale).to(torch.int8), scale


@fused
def quantize_rows(x: torch.Tensor, input_scale: torch.Tensor, outlier_index: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x (M, K) -> q, r of x * input_scale (the smoothing 1/c, zero on the outlier columns) and
    `kept`, x's outlier columns as they are (the fp32 part of the product)."""
    q, scale = _quantize(x * input_scale)
    return q, scale, x.index_select(1, outlier_index)


def _dequantize(y, r, weight_scale, bias, kept, outlier_weight):
    """r s y + b + kept @ outlier_weight, the few fp32 columns as an unrolled sum (one pass)."""
    out = y.float() * r * weight_scale + bias
    for i in range(kept.shape[1]):
        out = out + kept[:, i:i + 1] * outlier_weight[i]
    return out


# One function per activation (not an argument): torch.compile builds and caches each apart, and
# a handful of variants per function stays far below its recompile limit.
@fused
def dequantize(y: torch.Tensor, r: torch.Tensor, weight_scale: torch.Tensor, bias: torch.Tensor,
               kept: torch.Tensor, outlier_weight: torch.Tensor) -> torch.Tensor:
    """x W^T + b from the int32 sums: one pass over y."""
    return _dequantize(y, r, weight_scale, bias, kept, outlier_weight)


@fused
def dequantize_gelu(y, r, weight_scale, bias, kept, outlier_weight):
    """GELU(x W^T + b), the exact erf form."""
    return F.gelu(_dequantize(y, r, weight_scale, bias, kept, outlier_weight))


@fused
def dequantize_gelu_tanh(y, r, weight_scale, bias, kept, outlier_weight):
    """GELU(x W^T + b), the tanh approximation."""
    return F.gelu(_dequantize(y, r, weight_scale, bias, kept, outlier_weight), approximate="tanh")


@fused
def dequantize_relu(y, r, weight_scale, bias, kept, outlier_weight):
    """ReLU(x W^T + b)."""
    return torch.relu(_dequantize(y, r, weight_scale, bias, kept, outlier_weight))


# the dequantizing pass for each activation a map can fuse (quantize.py's activation names)
DEQUANTIZE = {"none": dequantize, "gelu": dequantize_gelu, "gelu_tanh": dequantize_gelu_tanh,
              "relu": dequantize_relu}


@fused
def dequantize_add_layer_norm(y: torch.Tensor, r: torch.Tensor, weight_scale: torch.Tensor, bias: torch.Tensor,
                              kept: torch.Tensor, outlier_weight: torch.Tensor, residual: torch.Tensor,
                              norm_weight: torch.Tensor, norm_bias: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm(x W^T + b + residual) from the int32 sums (BERT's post-LN sub-layer end)."""
    out = _dequantize(y, r, weight_scale, bias, kept, outlier_weight) + residual
    return F.layer_norm(out, (out.shape[-1],), norm_weight, norm_bias, eps)
