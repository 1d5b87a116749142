"""LoRA (Hu et al. 2021, arXiv:2106.09685): a frozen linear layer plus a trainable low-rank update.

For a wrapped layer y = x W^T + b with W of shape (out, in):

    y = x W^T + b + s * dropout(x) A^T B^T,      A: (r, in), B: (out, r), s = alpha / r

A starts random (Kaiming-uniform as nn.Linear's own init, or normal with std 1/r) and B starts at
zero, so B A = 0 and the model computes exactly what the base model computes before the first
step. Only A and B (r * (in + out) numbers per layer) are trained.

Merging folds the update into the weight, W <- W + s B A, so inference costs nothing extra and
the result is a plain checkpoint; unmerging subtracts it again (exact up to float rounding).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import nn

from bertkit.models.dropout import Dropout
from bertkit.errors import ConfigError

LORA_INITS = ("kaiming", "normal")


@dataclass
class LoraConfig:
    """Which linear layers get a LoRA update, and its rank, scale and dropout.

    target_modules   names or one regex. A list of names matches a module whose dotted path ends
                     with the name ("query" matches bert.encoder.layer.3.attention.self.query);
                     a single string is a regex that must match the whole path
                     (r".*layer\\.(4|5)\\..*(query|value)"). Only nn.Linear layers of the encoder.
    modules_to_save  modules trained in full and saved with the adapter (names matched like
                     target_modules); None = the task head (classifier, qa_outputs, cls, ...).
    """

    method: ClassVar[str] = "lora"

    r: int = 8
    alpha: float = 16.0  # the update is scaled by alpha / r, so changing r keeps its size
    dropout: float = 0.0  # on the LoRA branch's input only; the base path keeps its own dropout
    target_modules: list[str] | str = field(default_factory=lambda: ["query", "value"])  # as in the paper
    init: str = "kaiming"  # how A starts: "kaiming" (uniform, as nn.Linear) or "normal" (std 1/r)
    modules_to_save: list[str] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.r, bool) or not isinstance(self.r, int) or self.r < 1:
            raise ConfigError(f"LoRA rank r must be a positive integer (e.g. 8), got {self.r!r}")
        if not isinstance(self.alpha, (int, float)) or self.alpha <= 0:
            raise ConfigError(f"LoRA alpha must be a positive number (e.g. 2 * r), got {self.alpha!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"LoRA dropout must be in [0, 1), got {self.dropout}")
        if self.init not in LORA_INITS:
            raise ConfigError(f"LoRA init {self.init!r} is not known; use one of {LORA_INITS}")
        self.target_modules = _names_or_regex(self.target_modules, "target_modules")
        if self.modules_to_save is not None:
            self.modules_to_save = _names_or_regex(self.modules_to_save, "modules_to_save")

    @property
    def scaling(self) -> float:
        return self.alpha / self.r


# PEFT's LoraConfig names for bertkit's fields: refused naming bertkit's (one name per option;
# a peft.LoraConfig itself is converted by get_peft_model).
PEFT_NAMES = {"lora_alpha": "alpha", "lora_dropout": "dropout", "init_lora_weights": "init"}
_dataclass_init = LoraConfig.__init__


@functools.wraps(_dataclass_init)  # keeps the dataclass's signature for help() and inspect
def _init_naming_fields(self, *args, **kwargs) -> None:
    fields = [f.name for f in dataclasses.fields(LoraConfig)]
    for name, value in kwargs.items():
        if name in PEFT_NAMES:
            raise ConfigError(f"{name} is PEFT's name; bertkit.peft.LoraConfig calls it {PEFT_NAMES[name]} "
                              f"(LoraConfig({PEFT_NAMES[name]}={value!r}))")
        if name not in fields:
            near = difflib.get_close_matches(name, fields, n=1, cutoff=0.5)
            hint = f"did you mean {near[0]}? " if near else ""
            raise ConfigError(f"LoraConfig has no setting {name!r}; {hint}it takes {', '.join(fields)}")
    _dataclass_init(self, *args, **kwargs)


LoraConfig.__init__ = _init_naming_fields  # type: ignore[method-assign]


def _names_or_regex(value, what: str) -> list[str] | str:
    if isinstance(value, str):
        if not value:
            raise ConfigError(f"{what} is empty; give module names (e.g. query,value) or a regex")
        return value
    names = [str(v) for v in value]
    if not names and what == "target_modules":
        raise ConfigError(f"{what} is empty; give module names (e.g. query,value) or a regex")
    return names


class LoraUpdate(nn.Module):
    """One named low-rank update s * B A for a layer with `in_features` -> `out_features`."""

    def __init__(self, in_features: int, out_features: int, config: LoraConfig):
        super().__init__()
        self.A = nn.Parameter(torch.empty(config.r, in_features))
        self.B = nn.Parameter(torch.zeros(out_features, config.r))
        self.scaling = config.scaling
        self.dropout = Dropout(config.dropout) if config.dropout else nn.Identity()
        if config.init == "kaiming":
            nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))  # nn.Linear's own init for a weight
        else:
            nn.init.normal_(self.A, std=1.0 / config.r)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """s * dropout(x) A^T B^T: two thin matmuls, never the (out, in) product."""
        return (self.dropout(x) @ self.A.t()) @ self.B.t() * self.scaling

    def delta_weight(self) -> torch.Tensor:
        """s * B A, the (out, in) change merging adds to the weight."""
        return (self.B @ self.A) * self.scaling
