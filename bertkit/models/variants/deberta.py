"""DeBERTa's disentangled attention (He et al. 2021; v2/v3 as in transformers' DebertaV2Model).

Positions enter as relative distances only (no absolute position embedding is added to the input
when `position_biased_input=False`). The encoder owns one table of 2k relative-position vectors,
P (`encoder.rel_embeddings`, optionally LayerNorm-ed: `norm_rel_ebd="layer_norm"`), shared by all
layers. Each layer projects it with its own key/query maps (`share_att_key=True`; otherwise with
separate `pos_key_proj` / `pos_query_proj`) and adds, for query i and key j with bucketed distance
delta(i, j):

    c2p: q_i . Pk[k + delta(i, j)]        (content of i looks at the position of j)
    p2c: k_j . Pq[k - delta(j, i)]        (position of i as seen from the content of j)
    score(i, j) = (q_i . k_j + c2p + p2c) / sqrt(d * (1 + number of terms))

with indices clamped to [0, 2k - 1]. Distances beyond k/2 share logarithmic buckets
(`position_buckets` k; max_relative_positions is the distance that maps to the last bucket).
The term is handed to SDPA as a float bias, like relative_key's.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from bertkit.errors import ConfigError
from bertkit.models.dropout import Dropout


def relative_span(config) -> int:
    """k: the number of relative positions on each side the table holds."""
    if config.position_buckets > 0:
        return config.position_buckets
    return max_distance(config)


def max_distance(config) -> int:
    return config.max_relative_positions if config.max_relative_positions > 0 else config.max_position_embeddings


def log_buckets(distance: torch.Tensor, buckets: int, max_position: int) -> torch.Tensor:
    """Exact distances inside (-k/2, k/2), logarithmically wider buckets outside, sign kept."""
    mid = buckets // 2
    sign = torch.sign(distance)
    size = torch.where(distance.abs() < mid, torch.full_like(distance, mid - 1), distance.abs())
    logarithmic = torch.ceil(torch.log(size / mid) / math.log((max_position - 1) / mid) * (mid - 1)) + mid
    return torch.where(size <= mid, distance.to(logarithmic.dtype), logarithmic * sign).long()


def relative_positions(seq_len: int, config, device=None) -> torch.Tensor:
    """(T, T) bucketed distance i - j."""
    positions = torch.arange(seq_len, device=device)
    distance = positions[:, None] - positions[None, :]
    if config.position_buckets > 0:
        distance = log_buckets(distance, config.position_buckets, max_distance(config))
    return distance


def add_relative_embeddings(encoder: nn.Module, config) -> None:
    """Give the encoder the shared table (transformers' names) and let every attention read it."""
    encoder.rel_embeddings = nn.Embedding(2 * relative_span(config), config.hidden_size)
    if "layer_norm" in [x.strip() for x in config.norm_rel_ebd.lower().split("|")]:
        encoder.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
    for layer in encoder.layer:
        layer.attention.self.__dict__["relative_table"] = encoder  # a reference, not a submodule


def relative_table(encoder: nn.Module) -> torch.Tensor:
    table = encoder.rel_embeddings.weight
    norm = getattr(encoder, "LayerNorm", None)
    return norm(table) if norm is not None else table


def add_disentangled(attention: nn.Module, config) -> None:
    """Switch one attention module to disentangled scores (position projections when unshared)."""
    attention.disentangled = config  # read by `disentangled_scores`
    attention.pos_dropout = Dropout(config.hidden_dropout_prob)
    if not config.share_att_key:  # transformers' names, on the attention module
        if "c2p" in config.pos_att_type:
            attention.pos_key_proj = nn.Linear(config.hidden_size, config.hidden_size)
        if "p2c" in config.pos_att_type:
            attention.pos_query_proj = nn.Linear(config.hidden_size, config.hidden_size)


def disentangled_scores(attention: nn.Module, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """q, k (B, h, T, d) of `attention` -> the (B, h, T, T) c2p + p2c term, already scaled."""
    config = attention.disentangled
    kinds, span = config.pos_att_type, relative_span(config)
    seq_len, dim = q.shape[-2], q.shape[-1]
    table = attention.pos_dropout(relative_table(attention.relative_table)[: 2 * span]).to(q.dtype)
    delta = relative_positions(seq_len, config, q.device)
    scale = math.sqrt(dim * (1 + len(kinds)))
    batch_heads = q.shape[:-2]
    score = torch.zeros((), dtype=q.dtype, device=q.device)
    if "c2p" in kinds:
        key_map = attention.key if config.share_att_key else attention.pos_key_proj
        pos_key = attention.split_heads(key_map(table)[None])[0]  # (h, 2k, d)
        index = (delta + span).clamp(0, 2 * span - 1)
        score = score + (q @ pos_key.transpose(-1, -2)).gather(
            -1, index.expand(*batch_heads, seq_len, seq_len)) / scale
    if "p2c" in kinds:
        query_map = attention.query if config.share_att_key else attention.pos_query_proj
        pos_query = attention.split_heads(query_map(table)[None])[0]
        index = (-delta + span).clamp(0, 2 * span - 1)  # row j (key), column i (query)
        by_key = (k @ pos_query.transpose(-1, -2)).gather(-1, index.expand(*batch_heads, seq_len, seq_len))
        score = score + by_key.transpose(-1, -2) / scale
    return score


def validate(config) -> None:
    """relative_attention brings its own positions: dense attention, no factorised embeddings, and
    buckets that fit the longest distance."""
    if not config.relative_attention:
        return
    unknown = set(config.pos_att_type or []) - {"c2p", "p2c"}
    if unknown:
        raise ConfigError(f"pos_att_type may hold 'c2p' and 'p2c', got {sorted(unknown)}")
    if config.position_embedding_type != "absolute" or config.attention_block_size is not None:
        raise ConfigError("relative_attention (DeBERTa) brings its own relative positions: use "
                          "position_embedding_type='absolute' and dense attention with it")
    if config.embedding_dim != config.hidden_size:
        raise ConfigError("relative_attention with factorised embeddings is not supported "
                          "(DeBERTa projects before its LayerNorm); unset embedding_size")
    longest = max_distance(config)
    if config.position_buckets > 0 and longest <= config.position_buckets // 2 + 1:
        raise ConfigError(f"position_buckets ({config.position_buckets}) needs max_position_embeddings "
                          f"(or max_relative_positions) above {config.position_buckets // 2 + 1}")
