"""Bottleneck adapters (Houlsby et al. 2019, arXiv:1902.00751; Pfeiffer et al. 2021, arXiv:2005.00247).

An adapter is a small residual MLP applied to a sub-layer's output h (after its projection,
before dropout, the residual connection and the LayerNorm):

    h <- h + W_up act(W_down h + b_down) + b_up,     W_down: (m, H), W_up: (H, m), m = H / reduction

so a BERT sub-layer becomes  LayerNorm(dropout(h + adapter(h)) + x).  W_up starts near zero
(normal with std `init_scale`, bias 0), so a new adapter is close to the identity and the model
starts where the base model is.

Placement:
  houlsby   after the attention output projection (attention.output.dense) and after the
            feed-forward (output.dense): two adapters per layer;
  pfeiffer  after the feed-forward only: one adapter per layer, about half the parameters and
            reported as accurate as Houlsby's.
The base linear layer keeps its weights and names; the adapter rides on it (see
`bertkit.peft.model.PeftLinear`), so the encoder code is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from bertkit.models.activations import activation
from bertkit.errors import BertkitError, ConfigError

ADAPTER_KINDS = ("houlsby", "pfeiffer")
# The sub-layer projections each kind adapts, relative to one encoder layer (BertLayer).
ADAPTER_PLACES = {
    "houlsby": ("attention.output.dense", "output.dense"),
    "pfeiffer": ("output.dense",),
}


@dataclass
class AdapterConfig:
    """kind: "houlsby" or "pfeiffer"; bottleneck width m = hidden_size // reduction_factor."""

    method: ClassVar[str] = "adapter"

    kind: str = "houlsby"
    reduction_factor: int = 16  # MiniLM: 384 / 16 = 24 bottleneck units
    activation: str = "relu"
    init_scale: float = 1e-5  # std of W_up at init: the adapter starts within ~1e-4 of the identity
    modules_to_save: list[str] | None = None  # None = the task head

    def __post_init__(self) -> None:
        if self.kind not in ADAPTER_KINDS:
            raise ConfigError(f"adapter kind {self.kind!r} is not known; use one of {ADAPTER_KINDS}")
        if isinstance(self.reduction_factor, bool) or not isinstance(self.reduction_factor, int) \
                or self.reduction_factor < 1:
            raise ConfigError(f"adapter reduction_factor must be a positive integer (e.g. 16), "
                              f"got {self.reduction_factor!r}")
        if self.init_scale < 0:
            raise ConfigError(f"adapter init_scale must be >= 0, got {self.init_scale}")
        try:
            activation(self.activation)
        except BertkitError:
            raise ConfigError(f"adapter activation {self.activation!r} is not known; use relu, gelu, "
                              "gelu_new, silu or tanh") from None
        if self.modules_to_save is not None and not isinstance(self.modules_to_save, str):
            self.modules_to_save = [str(m) for m in self.modules_to_save]

    def bottleneck(self, hidden_size: int) -> int:
        return max(1, hidden_size // self.reduction_factor)


class Bottleneck(nn.Module):
    """adapter(h) = W_up act(W_down h + b_down) + b_up; the caller adds it to h."""

    def __init__(self, features: int, config: AdapterConfig):
        super().__init__()
        width = config.bottleneck(features)
        self.down = nn.Linear(features, width)
        self.act = activation(config.activation)
        self.up = nn.Linear(width, features)
        nn.init.normal_(self.up.weight, std=config.init_scale)
        nn.init.zeros_(self.up.bias)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.up(self.act(self.down(h)))
