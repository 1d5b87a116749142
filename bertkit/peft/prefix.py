"""Prefix tuning (Li & Liang 2021, arXiv:2101.00190), native to the encoder.

Every layer l gets P learned key vectors K^p_l and value vectors V^p_l (per head), put before the
keys and values projected from the sequence:

    attention_l(x) = softmax(Q [K^p_l; K]^T / sqrt(d) + [0, bias]) [V^p_l; V]

The padding bias is widened with zeros in front, so every query always attends to the prefix and
padded keys stay masked. Nothing else changes: the fused SDPA kernel and the explicit path both
take the longer K/V and bias (see `BertSelfAttention.prefix` in bertkit/models/encoder.py), and no decoder
cache is involved. The base model stays frozen; only the prefixes (L * 2 * P * H numbers) train.

Reparameterisation (the paper's trick for stable training): instead of the prefixes themselves,
train a P x H embedding E and an MLP, and compute all layers' prefixes as
    [K^p_1, V^p_1, ..., K^p_L, V^p_L] = W_2 tanh(W_1 E + b_1) + b_2.
After training, `fold()` evaluates the MLP once and keeps only the resulting plain prefixes.

Initialisation ("vocab", the default): the prefixes start as the keys and values the frozen base
model itself computes, layer by layer, for P real vocabulary tokens; such keys and values are
in-distribution for every layer, which the paper found trains better than random vectors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.errors import ConfigError

PREFIX_INITS = ("vocab", "normal")


@dataclass
class PrefixConfig:
    method: ClassVar[str] = "prefix"

    num_virtual_tokens: int = 20  # P: prefix length per layer
    reparameterize: bool = False  # train through an MLP, fold() into plain prefixes afterwards
    projection_hidden: int = 64  # the MLP's hidden width when reparameterized (H -> 64 -> L * 2 * H)
    init: str = "vocab"  # "vocab": K/V of real tokens from the base model; "normal": N(0, 0.02)
    modules_to_save: list[str] | None = None  # None = the task head
    # True: the sequence's positions start at P, as PEFT's prefix tuning on transformers' BERT
    # has them (its prefixes enter as a key/value cache of length P); such prefixes are saved in
    # PEFT's format. False: positions start at 0 as without a prefix (the paper; bertkit's format).
    shift_positions: bool = False

    def __post_init__(self) -> None:
        for name in ("num_virtual_tokens", "projection_hidden"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"prefix {name} must be a positive integer, got {value!r}")
        if self.init not in PREFIX_INITS:
            raise ConfigError(f"prefix init {self.init!r} is not known; use one of {PREFIX_INITS}")
        if self.modules_to_save is not None and not isinstance(self.modules_to_save, str):
            self.modules_to_save = [str(m) for m in self.modules_to_save]


class PrefixEncoder(nn.Module):
    """One named prefix: all layers' key/value prefixes, as plain tensors or through an MLP."""

    def __init__(self, config: PrefixConfig, num_layers: int, hidden_size: int, std: float = 0.02):
        super().__init__()
        self.num_layers, self.hidden_size = num_layers, hidden_size
        self.num_tokens = config.num_virtual_tokens
        P = self.num_tokens
        if config.reparameterize:
            self.embedding = nn.Parameter(torch.randn(P, hidden_size) * std)
            self.mlp = nn.Sequential(nn.Linear(hidden_size, config.projection_hidden), nn.Tanh(),
                                     nn.Linear(config.projection_hidden, num_layers * 2 * hidden_size))
        else:
            # (L, 2, P, H): layer, key/value, prefix position, hidden
            self.key_values = nn.Parameter(torch.randn(num_layers, 2, P, hidden_size) * std)

    @property
    def reparameterized(self) -> bool:
        return hasattr(self, "mlp")

    def layer_key_values(self, layer: int) -> torch.Tensor:
        """(2, P, H): the key and value prefixes of one layer."""
        if not self.reparameterized:
            return self.key_values[layer]
        first, _, last = self.mlp
        hidden = torch.tanh(first(self.embedding))  # (P, hidden)
        rows = slice(layer * 2 * self.hidden_size, (layer + 1) * 2 * self.hidden_size)
        out = F.linear(hidden, last.weight[rows], last.bias[rows])  # only this layer's outputs
        return out.view(self.num_tokens, 2, self.hidden_size).transpose(0, 1)

    @torch.no_grad()
    def folded(self) -> torch.Tensor:
        """(L, 2, P, H) plain prefixes equal to what the MLP computes now."""
        return torch.stack([self.layer_key_values(i) for i in range(self.num_layers)]).detach().clone()

    def fold(self) -> None:
        """Replace the MLP by the plain prefixes it computes (same outputs, fewer parameters)."""
        if not self.reparameterized:
            return
        key_values = self.folded()
        del self.mlp, self.embedding
        self.key_values = nn.Parameter(key_values)


class PrefixTuning(nn.Module):
    """All named prefixes of one model and which one is active; each layer's hook asks it."""

    def __init__(self):
        super().__init__()
        self.encoders = nn.ModuleDict()
        self.active: str | None = None
        self.capture: dict[int, torch.Tensor] | None = None  # set while initialising from vocab

    def key_values(self, layer: int) -> torch.Tensor | None:
        if self.active is None or self.active not in self.encoders:
            return None
        return self.encoders[self.active].layer_key_values(layer)


class PrefixHook(nn.Module):
    """Set as `BertSelfAttention.prefix` of layer `layer`: prepends that layer's prefix K/V."""

    def __init__(self, prefixes: PrefixTuning, layer: int, num_heads: int):
        super().__init__()
        # A plain reference, not a submodule: the prefixes are owned (and saved) once, by the
        # PeftModel, not once per layer.
        self.__dict__["prefixes"] = prefixes
        self.layer = layer
        self.num_heads = num_heads

    def forward(self, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """k, v: (B, h, T, d); bias: None or broadcastable to (B, h, T_q, T). Returns T -> P + T."""
        if self.prefixes.capture is not None:  # initialising: record this layer's real K/V
            self.prefixes.capture[self.layer] = torch.stack([merge_heads(k[0]), merge_heads(v[0])])
            return k, v, bias
        kv = self.prefixes.key_values(self.layer)
        if kv is None:
            return k, v, bias
        batch, heads, _, head_dim = k.shape
        P = kv.shape[1]
        # (2, P, H) -> (2, h, P, d) -> each (B, h, P, d) without copying over the batch
        kv = kv.to(k.dtype).view(2, P, heads, head_dim).transpose(1, 2)
        k = torch.cat([kv[0].unsqueeze(0).expand(batch, -1, -1, -1), k], dim=2)
        v = torch.cat([kv[1].unsqueeze(0).expand(batch, -1, -1, -1), v], dim=2)
        if bias is not None:
            # Zeros in front of the key axis: the prefix is always attended; a (B, 1, 1, T) padding
            # bias stays broadcast-shaped, (B, 1, 1, P + T).
            bias = F.pad(bias, (P, 0), value=0.0)
        return k, v, bias


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(h, T, d) -> (T, h * d)"""
    heads, length, head_dim = x.shape
    return x.transpose(0, 1).reshape(length, heads * head_dim)


def vocab_init_ids(vocab_size: int, num_tokens: int, pad_token_id: int,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """P random token ids for "vocab" init. BERT-style vocabularies keep [PAD], [unusedN] and
    the other specials in their first ~1000 rows, whose embeddings are barely trained: skip them
    when the vocabulary is large enough to."""
    low = 1000 if vocab_size > 5000 else 0
    ids = torch.randint(low, vocab_size, (num_tokens,), generator=generator)
    return ids.masked_fill(ids == pad_token_id, low if low != pad_token_id else low + 1)
