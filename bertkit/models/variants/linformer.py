"""Linformer's low-rank attention (Wang et al. 2020): keys and values projected along the sequence.

With `attention_low_rank = k` each attention layer learns two matrices E, F of shape (k, N),
N = max_position_embeddings, and attends over k projected rows instead of T tokens:

    head_i = softmax(Q_i (E_i K_i)^T / sqrt(d)) (F_i V_i)          Q_i (M, d); K_i, V_i (T, d)

A T-token input uses the first T columns of E and F (fairseq's Linformer does the same), so the
length is bounded by N, fixed at construction. Padded keys are zeroed before the projection,
E (K * m): the k rows are then sums over real tokens only (after projecting, no key can be masked
any more). The cost is O(T k d) instead of O(T^2 d) in time and memory; the probabilities are
(M, k), not (M, T), and that is what `output_attentions` returns. (fairseq projects the layer's
input before the key and value maps and leaves padding in; projecting K = X W + b instead differs
only in the bias term, E 1 b rather than b, and keeps padded tokens out.)

`attention_low_rank_sharing` picks the paper's parameter sharing (section 4):
"none" (E_i, F_i per head and layer), "headwise" (one E, F per layer for all heads), "key_value"
(one E = F per layer) and "layerwise" (one E = F for every layer). The projections are
initialised as fairseq's (Xavier-uniform, gain 1/sqrt(2)), so E K keeps about K's scale. Added to
a pre-trained dense encoder, random E, F would replace every pre-trained attention pattern by one
over random mixtures of tokens; `init_segment_means` starts them as averages of consecutive
positions instead, so attention begins as a coarse (segment-level) copy of the dense one.
Position scores that need the (M, T) score matrix (relative_key, T5's bias, DeBERTa, block-sparse
patterns) cannot be projected and are refused by the config. The kernel is
`attention.low_rank_attention`: project, then the explicit formula over the k rows.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from bertkit.errors import BertkitError, ConfigError



class LowRankProjection(nn.Module):
    """E (and F unless shared with E), each (heads or 1, k, N); `forward(k, v, bias)` projects."""

    def __init__(self, max_length: int, rank: int, heads: int = 1, share_key_value: bool = False):
        super().__init__()
        self.key_projection = nn.Parameter(torch.empty(heads, rank, max_length))
        self.value_projection = None if share_key_value else nn.Parameter(torch.empty(heads, rank, max_length))
        bound = math.sqrt(6.0 / (rank + max_length)) / math.sqrt(2.0)  # xavier_uniform_, gain 1/sqrt(2)
        for weight in (self.key_projection, self.value_projection):
            if weight is not None:
                nn.init.uniform_(weight, -bound, bound)

    def forward(self, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """k, v (B, h, T, d); bias None or the key padding bias (B, 1, 1, T) -> E K, F V (B, h, k, d)."""
        seq_len = k.shape[-2]
        if seq_len > self.key_projection.shape[-1]:
            raise BertkitError(f"low-rank attention projects at most {self.key_projection.shape[-1]} keys "
                               f"(max_position_embeddings), got {seq_len}; shorten the input")
        if bias is not None:
            if bias.dim() != 4 or bias.shape[-2] != 1 or bias.shape[1] != 1:
                raise BertkitError("low-rank attention takes a key padding bias (B, 1, 1, T) only: scores that "
                                   "depend on the query (relative positions, causal masks) cannot be projected")
            keep = (bias > torch.finfo(bias.dtype).min / 2).transpose(-1, -2).to(k.dtype)  # (B, 1, T, 1)
            k, v = k * keep, v * keep
        e = self.key_projection[..., :seq_len].to(k.dtype)
        f = e if self.value_projection is None else self.value_projection[..., :seq_len].to(v.dtype)
        return e @ k, f @ v


def segment_means(rank: int, length: int, columns: int) -> torch.Tensor:
    """(rank, columns): row r averages positions [r L / k, (r + 1) L / k) of the first L = `length`
    (the other columns zero). Each projected key is then the mean key of a segment, so
    q . (E K)_r is the mean score over that segment, and (F V)_r its mean value."""
    if not 0 < rank <= length <= columns:
        raise BertkitError(f"segment means need 0 < attention_low_rank ({rank}) <= length ({length}) <= "
                           f"max_position_embeddings ({columns}); use a length of at least the rank")
    bounds = [r * length // rank for r in range(rank + 1)]
    weights = torch.zeros(rank, columns)
    for r in range(rank):
        weights[r, bounds[r]:bounds[r + 1]] = 1.0 / (bounds[r + 1] - bounds[r])
    return weights


def init_segment_means(model: nn.Module, length: int) -> int:
    """Set every E, F of `model` to `segment_means` over the first `length` positions (the length
    the model will be trained at: rows past the input length would project nothing). Returns how
    many projections were set."""
    projections = {id(m): m for m in model.modules() if isinstance(m, LowRankProjection)}.values()
    with torch.no_grad():
        for projection in projections:
            heads, rank, columns = projection.key_projection.shape
            weights = segment_means(rank, length, columns)
            for weight in (projection.key_projection, projection.value_projection):
                if weight is not None:
                    weight.copy_(weights.expand(heads, rank, columns))
    return len(projections)


def add_low_rank(attention: nn.Module, config) -> None:
    """Give one BertSelfAttention its own E, F (every sharing mode but "layerwise")."""
    sharing = config.attention_low_rank_sharing
    if sharing != "layerwise":
        heads = config.num_attention_heads if sharing == "none" else 1
        attention.low_rank = LowRankProjection(config.max_position_embeddings, config.attention_low_rank,
                                               heads, share_key_value=sharing == "key_value")


def share_across_layers(encoder: nn.Module, config) -> None:
    """"layerwise": one E = F, held by the encoder (`encoder.low_rank`, saved once) and read by
    every layer through a plain reference (not a submodule, so not saved or counted again)."""
    if config.attention_low_rank is None or config.attention_low_rank_sharing != "layerwise":
        return
    encoder.low_rank = LowRankProjection(config.max_position_embeddings, config.attention_low_rank, 1,
                                         share_key_value=True)
    for layer in encoder.layer:
        object.__setattr__(layer.attention.self, "low_rank", encoder.low_rank)


LOW_RANK_SHARING = ("none", "headwise", "key_value", "layerwise")  # Linformer's options (section 4)


def validate(config) -> None:
    """Linformer projects keys along the sequence: only key padding survives the projection, so
    scores that depend on the (query, key) pair cannot be combined with it."""
    rank = config.attention_low_rank
    if rank is None:
        return
    if rank < 1:
        raise ConfigError(f"attention_low_rank must be a positive integer (Linformer uses 128-256) or unset "
                          f"for dense attention, got {rank}")
    if rank >= config.max_position_embeddings:  # E, F would map N positions to k >= N rows: no saving
        raise ConfigError(f"attention_low_rank ({rank}) must be below max_position_embeddings "
                          f"({config.max_position_embeddings}): it projects that many positions to k rows, and "
                          f"k >= N saves nothing (Linformer uses k = 128-256 at N = 512); lower it or unset it")
    if config.attention_low_rank_sharing not in LOW_RANK_SHARING:
        raise ConfigError(f"attention_low_rank_sharing {config.attention_low_rank_sharing!r} is not known; use one "
                          f"of {LOW_RANK_SHARING}")
    if config.position_embedding_type not in ("absolute", "sinusoidal") or config.relative_attention \
            or config.attention_block_size is not None:
        raise ConfigError("low-rank attention (attention_low_rank) projects the keys, so per-pair scores cannot "
                          "be added: use absolute or sinusoidal positions, no relative_attention and no "
                          "attention_block_size with it")
