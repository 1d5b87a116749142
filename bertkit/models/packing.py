"""The real tokens of a padded batch as one packed tensor, and the way back.

A (B, T) batch with attention mask m holds N = sum(m) real tokens. Packed, they are one (N, ...)
tensor, row b's tokens at rows cu_seqlens[b] : cu_seqlens[b + 1] in their order; every map that
acts on tokens one at a time (embeddings, linear maps, norms, the feed-forward block, heads) then
runs on N rows instead of B * T, and attention reads the row boundaries from cu_seqlens
(`attention.packed_attention`; torch's variable-length flash kernel takes exactly this layout).

    indices     (N,)    flat positions of the real tokens in the (B * T) grid, row by row
    cu_seqlens  (B+1,)  int32 cumulative lengths: 0, n_0, n_0 + n_1, ..., N
    unpad(x)    (B, T, ...) -> (N, ...)   = x.flatten(0, 1)[indices]
    pad(x)      (N, ...) -> (B, T, ...)   zeros at padding

Both maps are differentiable (a gather and a scatter), so training runs packed too.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bertkit.errors import BertkitError


@dataclass
class Packing:
    indices: torch.Tensor
    cu_seqlens: torch.Tensor
    max_len: int
    batch: int
    length: int
    real: torch.Tensor  # (B, T) bool: which grid positions hold a real token

    @classmethod
    def from_mask(cls, attention_mask: torch.Tensor) -> "Packing":
        """From a (B, T) 0/1 mask; real tokens may sit anywhere in a row (left padding too)."""
        real = attention_mask.bool()
        counts = real.sum(1)
        if not bool(counts.all()):
            raise BertkitError("attention_mask marks no token as real in some row (all 0); pass 1 at real tokens")
        indices = real.flatten().nonzero().squeeze(1)
        cu_seqlens = torch.zeros(real.shape[0] + 1, dtype=torch.int32, device=real.device)
        cu_seqlens[1:] = counts.cumsum(0)
        return cls(indices, cu_seqlens, int(counts.max()), real.shape[0], real.shape[1], real)

    @classmethod
    def full(cls, batch: int, length: int, device: torch.device) -> "Packing":
        """Every row holds `length` real tokens: the layout of B x M query positions."""
        real = torch.ones(batch, length, dtype=torch.bool, device=device)
        cu_seqlens = torch.arange(0, (batch + 1) * length, length, dtype=torch.int32, device=device)
        return cls(torch.arange(batch * length, device=device), cu_seqlens, length, batch, length, real)

    @property
    def tokens(self) -> int:
        return self.indices.numel()

    def unpad(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, ...) -> (N, ...)"""
        return x.flatten(0, 1).index_select(0, self.indices)

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """(N, ...) -> (B, T, ...) with zeros at padding."""
        out = x.new_zeros(self.batch * self.length, *x.shape[1:])
        return out.index_copy(0, self.indices, x).view(self.batch, self.length, *x.shape[1:])

    def rows_at(self, positions: torch.Tensor) -> torch.Tensor:
        """(B, M) grid positions -> (B * M,) packed rows of those tokens. A padding position has no
        row: it gets its sequence's first token (its output carries no meaning, as at padding)."""
        row_of = self.real.flatten().long().cumsum(0) - 1  # packed row of each real grid position
        flat = positions + torch.arange(self.batch, device=positions.device)[:, None] * self.length
        first = self.cu_seqlens[:-1].long()[:, None].expand_as(positions)
        return torch.where(self.real.flatten()[flat], row_of[flat], first).flatten()
