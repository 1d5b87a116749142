"""The key/value cache of a decoder: what step-by-step generation keeps between forward calls.

A decoder's layer l computes, for every new position, keys K = x W_k + b_k and values
V = x W_v + b_v; causal attention never changes them afterwards, so generating token t + 1 needs
only the new position's query against the cached K, V of positions 1..t. Cross-attention's keys
and values come from the encoder's output, which is fixed for the whole generation: they are
computed at the first step and reused.

    cache = KVCache(num_layers)                  # empty; BertModel(..., use_cache=True) makes one
    out = decoder(ids, past_key_values=cache)    # fills it; the next call passes only new tokens
    cache.get_seq_length()                       # positions cached so far
    cache.reorder_cache(beam_idx)                # beam search: keep the chosen beams' rows

Tensors are (B, h, T, d), as the attention kernels take them. The method names are
transformers' (`get_seq_length`, `reorder_cache`), so code written against its cache reads the same.
"""

from __future__ import annotations

import torch


class KVSlot:
    """One attention sub-layer's cached keys and values (None until the first call)."""

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    def update(self, keys: torch.Tensor, values: torch.Tensor, append: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Store the new keys/values (appended along positions when `append`, else as they are)
        and return everything cached: what the attention attends to."""
        if append and self.keys is not None:
            keys = torch.cat([self.keys, keys], dim=2)
            values = torch.cat([self.values, values], dim=2)
        self.keys, self.values = keys, values
        return keys, values

    def select(self, rows: torch.Tensor) -> None:
        if self.keys is not None:
            self.keys = self.keys.index_select(0, rows)
            self.values = self.values.index_select(0, rows)


class LayerCache:
    """A decoder layer's cache: its self-attention's (growing) and cross-attention's (fixed)."""

    def __init__(self) -> None:
        self.self_attention = KVSlot()
        self.cross_attention = KVSlot()


class KVCache:
    """Per-layer key/value caches of a decoder (see the module docstring)."""

    def __init__(self, num_layers: int):
        self.layers = [LayerCache() for _ in range(num_layers)]

    def __len__(self) -> int:
        return len(self.layers)

    def get_seq_length(self) -> int:
        """Positions the self-attention caches hold (0 before the first call)."""
        keys = self.layers[0].self_attention.keys if self.layers else None
        return 0 if keys is None else keys.shape[2]

    def reorder_cache(self, beam_idx: torch.Tensor) -> None:
        """Keep row beam_idx[i] of every cached tensor as row i (beam search's surviving beams;
        the cross-attention rows too, so every row stays with its input's encoder states)."""
        for layer in self.layers:
            layer.self_attention.select(beam_idx)
            layer.cross_attention.select(beam_idx)
