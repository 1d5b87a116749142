"""Sinusoidal position encoding, the original Transformer's (Vaswani et al. 2017, section 3.5).

With `position_embedding_type="sinusoidal"` the learned absolute table is replaced by a fixed one,
added to the token embeddings at the same place:

    PE[pos, 2i]     = sin(pos / 10000^(2i / H))
    PE[pos, 2i + 1] = cos(pos / 10000^(2i / H))

H is the embedding width (E with factorised embeddings). Each pair of columns is a sinusoid of
wavelength 2 pi 10000^(2i/H), from 2 pi to 10000 * 2 pi, so PE[pos + k] is a linear function
(a rotation per column pair) of PE[pos] for every fixed offset k: relative positions are easy
for attention to read. Nothing here is learned, so the table is a buffer outside the state dict:
it is rebuilt from the config, never saved. transformers has no such option for BERT, so saving
warns (variants/keymaps.py: `warn_if_transformers_cannot_run`).
"""

from __future__ import annotations

import torch

from bertkit.errors import ConfigError


def sinusoidal_table(num_positions: int, width: int) -> torch.Tensor:
    """PE as a (num_positions, width) float32 tensor (computed in float64, then rounded)."""
    position = torch.arange(num_positions, dtype=torch.float64)[:, None]
    pair = torch.arange(width, dtype=torch.float64) // 2  # column j belongs to pair i = j // 2
    angle = position / 10000.0 ** (2 * pair / width)
    even = torch.arange(width) % 2 == 0
    return torch.where(even, torch.sin(angle), torch.cos(angle)).float()


def validate(config) -> None:
    """The table is added to the input, so the input must take positions."""
    if config.position_embedding_type == "sinusoidal" and not config.position_biased_input:
        raise ConfigError("sinusoidal positions are added to the input, which position_biased_input="
                          "False turns off; set position_biased_input=True or use absolute positions")
