"""Relative position scores (Shaw et al. 2018; Huang et al. 2020), as `transformers` 4.x BERT.

With `position_embedding_type="relative_key"` every attention layer learns one vector per
signed distance, `D[l - r]` (a table of 2P - 1 rows of head size d, P = max_position_embeddings),
and the attention score of query l on key r becomes

    s[l, r] = (q_l . k_r + q_l . D[l - r]) / sqrt(d)                       relative_key
    s[l, r] = (q_l . k_r + q_l . D[l - r] + k_r . D[l - r]) / sqrt(d)       relative_key_query

The absolute position embedding is then not added to the input (its weights still exist, as in
transformers). The extra term is returned here already divided by sqrt(d), so it can be handed to
`scaled_dot_product_attention` as a float `attn_mask` (SDPA adds the mask after its own scaling).
"""

from __future__ import annotations

import math

import torch

RELATIVE_TYPES = ("relative_key", "relative_key_query")


def is_on(config) -> bool:
    return config.position_embedding_type in RELATIVE_TYPES


def relative_position_scores(q: torch.Tensor, k: torch.Tensor, distance_table: torch.Tensor,
                             kind: str, max_positions: int) -> torch.Tensor:
    """q, k: (B, h, T, d); distance_table: (2P - 1, d) -> score term (B, h, T, T), scaled by 1/sqrt(d).

    Instead of materialising the (T, T, d) tensor of D[l - r], project q on the 2T - 1 distances a
    sequence of length T can have, (B, h, T, 2T - 1), and pick entry l - r for every pair.
    """
    seq_len = q.shape[-2]
    # Rows of the table for distances -(T-1) .. T-1; distance 0 sits at row P - 1.
    table = distance_table[max_positions - seq_len: max_positions + seq_len - 1].to(q.dtype)
    positions = torch.arange(seq_len, device=q.device)
    index = (positions[:, None] - positions[None, :] + seq_len - 1)  # (T, T): l - r, shifted >= 0
    batch_heads = q.shape[:-2]
    scores = (q @ table.T).gather(-1, index.expand(*batch_heads, seq_len, seq_len))
    if kind == "relative_key_query":
        # k_r . D[l - r]: row r of (k @ table^T) at column l - r, then transpose to (l, r).
        by_key = (k @ table.T).gather(-1, index.T.expand(*batch_heads, seq_len, seq_len))
        scores = scores + by_key.transpose(-1, -2)
    return scores / math.sqrt(q.shape[-1])
