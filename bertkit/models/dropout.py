"""Dropout with a random mask that is cheap to draw on CPU.

torch's CPU dropout draws one Bernoulli sample per element from a serial generator and keeps
the mask as floats. Profiled on these machines that was 17% of a mini MLM step and 24% of a
MiniLM fine-tuning step (most of it the B x heads x T x T attention probabilities).

Here one 64-bit draw from torch's generator gives four 16-bit uniforms u in [0, 2^16), and an
element is dropped where u < k, k = round(p * 2^16): the drop rate p' = k / 2^16 is p to within
2^-17, and kept values are scaled by 1 / (1 - p'), so E[output] = input exactly. The mask stays
bool (1 byte per element, not 4) for the backward pass. The draws come from the default
generator, so `torch.manual_seed` makes them repeatable as with torch's dropout.

On other devices torch's fused dropout kernels are faster, and `Dropout` uses them.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.errors import ConfigError

_LEVELS = 1 << 16  # 16-bit uniforms
_INT16_MIN = -(1 << 15)


def drop_mask(shape: torch.Size | tuple[int, ...], p: float, device: torch.device | str = "cpu"
              ) -> tuple[torch.Tensor, float]:
    """A bool mask of `shape`, True where an element is dropped (rate p, 0 <= p < 1), and
    the scale 1 / (1 - p') that keeps the expectation of the kept values."""
    if not 0.0 <= p < 1.0:
        raise ConfigError(f"drop_mask: p must be in [0, 1), got {p}")
    numel = math.prod(shape)
    threshold = round(p * _LEVELS)
    bits = torch.empty((numel + 3) // 4, dtype=torch.int64, device=device).random_(-(1 << 63), None)
    # Each int64 holds four independent uniform int16s; comparing signed int16 against
    # INT16_MIN + k drops the k smallest of the 2^16 values.
    uniforms = bits.view(torch.int16)[:numel].view(shape)
    return uniforms < _INT16_MIN + threshold, _LEVELS / (_LEVELS - threshold)


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """`F.dropout(x, p, training)` with the cheap mask on CPU."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or p >= 1.0:
        return F.dropout(x, p, training)
    dropped, scale = drop_mask(x.shape, p, x.device)
    return torch.where(dropped, 0.0, x) * scale


class Dropout(nn.Module):
    """Drop-in for `nn.Dropout` (same `p`, no parameters, so state dicts are unchanged)."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ConfigError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
