"""Activation functions by their Hugging Face config names (`hidden_act`)."""

from __future__ import annotations

from torch import nn

from bertkit.errors import BertkitError


def activation(name: str):
    """The feed-forward non-linearity. "gelu" is the exact erf form BERT was trained with."""
    if name == "gelu":
        return nn.GELU()
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return nn.GELU(approximate="tanh")
    if name == "relu":
        return nn.ReLU()
    if name in ("silu", "swish"):
        return nn.SiLU()
    if name == "tanh":
        return nn.Tanh()
    raise BertkitError(f"unknown activation {name!r}")
