"""T5's scalar relative position bias (Raffel et al. 2020, section 2.1), bidirectional as in T5's encoder.

With `position_embedding_type="t5_bias"` no position vector is added to the input; instead every
attention score gets one learned scalar that depends on the head and on the bucket of the signed
distance from the query to the key:

    s[l, r] = q_l . k_r / sqrt(d) + b[bucket(r - l), head]

`b` is one (num_buckets x heads) table (`encoder.relative_attention_bias`) shared by every layer,
as T5 computes its bias in the first layer and reuses it in all the others. The buckets
(`relative_position_bucket`, T5's `_relative_position_bucket` with bidirectional=True): half of
them for keys after the query, half for keys before (or at) it; within each half, with
n = num_buckets / 2 and e = n / 2, distances 0 .. e - 1 get a bucket each and longer ones share
logarithmically wider buckets up to `max_distance`, beyond which all distances share the last:

    bucket(x) = n * [x > 0] + (|x|                                          if |x| < e
                               min(n - 1, e + floor(log(|x| / e) / log(max_distance / e) * (n - e)))  otherwise)

Unlike T5, BERT's 1 / sqrt(d) scaling of q . k is kept (T5 folds it into its initialisation);
the bias is added after it, as a float mask for every attention kernel. transformers' BERT has no
such bias, so saving warns (variants/keymaps.py: `warn_if_transformers_cannot_run`).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from bertkit.errors import ConfigError

T5_BIAS = "t5_bias"


def relative_position_bucket(relative_position: torch.Tensor, num_buckets: int = 32,
                             max_distance: int = 128) -> torch.Tensor:
    """Signed distances (key position - query position, any shape, integer) -> bucket ids in
    [0, num_buckets): the formula in the module docstring."""
    half = num_buckets // 2
    buckets = (relative_position > 0).long() * half
    distance = relative_position.abs()
    exact = half // 2
    # The log branch is only read where distance >= exact; clamping keeps log(0) out of it.
    far = exact + (torch.log(distance.clamp(min=exact).float() / exact) / math.log(max_distance / exact)
                   * (half - exact)).long()
    far = far.clamp(max=half - 1)
    return buckets + torch.where(distance < exact, distance, far)


class RelativePositionBias(nn.Embedding):
    """The shared table b: an embedding of num_buckets rows with one column per head (its state-dict
    key `encoder.relative_attention_bias.weight` is T5's name); called with two lengths, it gives
    the (1, heads, M, T) bias of M queries on T keys."""

    def __init__(self, num_buckets: int, num_heads: int, max_distance: int):
        super().__init__(num_buckets, num_heads)
        self.max_distance = max_distance

    def forward(self, query_length: int, key_length: int) -> torch.Tensor:  # type: ignore[override]
        """b[bucket(r - l), head] as (1, heads, query_length, key_length), in the weights' dtype."""
        query = torch.arange(query_length, device=self.weight.device)[:, None]
        key = torch.arange(key_length, device=self.weight.device)[None, :]
        buckets = relative_position_bucket(key - query, self.num_embeddings, self.max_distance)
        return self.weight[buckets].permute(2, 0, 1).unsqueeze(0)


def validate(config) -> None:
    """T5's buckets (position_embedding_type="t5_bias"): two halves (one per direction), each half
    exact for its first half of distances, so the log-spaced rest needs num_buckets >= 4 and
    max_distance beyond the exact ones."""
    if config.position_embedding_type != T5_BIAS:
        return
    buckets, distance = config.relative_attention_num_buckets, config.relative_attention_max_distance
    if buckets < 4 or buckets % 2:
        raise ConfigError(f"relative_attention_num_buckets must be an even number >= 4 (half per direction; "
                          f"T5 uses 32), got {buckets}")
    if distance <= buckets // 4:
        raise ConfigError(f"relative_attention_max_distance ({distance}) must exceed the {buckets // 4} "
                          f"distances that get exact buckets; T5 uses 128 with 32 buckets")
