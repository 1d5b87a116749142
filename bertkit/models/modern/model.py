"""The modern encoder (ModernBERT's architecture) in one file: embeddings, rotary attention with
alternating global / sliding-window layers, GeGLU feed-forward, pre-LN layers, final norm.

Why a sibling of bertkit/models/encoder.py and not switches on it: every part of the block differs.
BERT's layer is post-LN, LayerNorm(x + f(x)), with learned absolute positions added to the
input, separate biased Q/K/V maps and a GELU MLP; here the layer is pre-LN, x + f(norm(x)),
with a final norm after the last layer, no position embeddings (RoPE rotates q and k), one
fused bias-free Wqkv, a gated MLP and a per-layer attention window. Switches for all that
would touch every line of BertLayer; one small file per architecture reads better.

Shapes: B batch, T sequence, N real (non-padding) tokens, H hidden, h heads, d = H / h.
Module and parameter names equal transformers' ModernBert state-dict keys
(`embeddings.tok_embeddings.weight`, `layers.0.attn.Wqkv.weight`, `final_norm.weight`, ...).

The math of layer i (`attn_norm` is the identity in layer 0: the embeddings are normed already):

    x = x + Wo · attention(RoPE(q), RoPE(k), v),   q, k, v = Wqkv · attn_norm(x)
    x = x + Wo' · (act(a) * g),                     a, g = split(Wi · mlp_norm(x))

RoPE rotates each pair (x_j, x_{j+d/2}) of q and k at position t by the angle t / theta^(2j/d),
theta = global_rope_theta in global layers and local_rope_theta in sliding-window layers; a
sliding-window layer lets token i attend to token j only when |i - j| <= local_attention // 2.

Two ablation switches (config.py, ABLATION_SWITCHES) change one part of that each, so a run can
measure what the part is worth; neither is a second architecture, and transformers runs neither.
- position_embedding_type: "rope" (above); "absolute" / "sinusoidal" add a learned / fixed table
  to the token embeddings before their norm, x = norm(E[id] + P[t]), as BERT, and rotate
  nothing; "none" encodes no positions. Then, with every layer global, permuting the input
  tokens permutes the output states the same way: the model reads a bag of words. Only a
  sliding window narrower than the row still tells a token which tokens are near.
- norm_placement: "pre" (above) or "post", BERT's x = norm(x + f(x)) after each sublayer:
      x = attn_norm(x + Wo · attention(q, k, v)),   q, k, v = Wqkv · x
      x = mlp_norm(x + Wo' · (act(a) * g)),         a, g = split(Wi · x)
  Layer 0 then has an attn_norm too (its sum is not normed otherwise), and final_norm is the
  identity (the last sublayer ends in a norm; BERT has no final norm). The embedding norm stays:
  post-LN's first attention reads the embeddings unnormed otherwise, and BERT norms them too.

Unpadded execution: with padding in the batch, the embeddings, every linear map, the norms,
RoPE and the MLP run on the N real tokens only, as an (N, H) matrix. Attention runs per bucket
of up to 8 rows of similar length, each bucket padded only to its own longest row, one SDPA call
per bucket (see `Unpadding`; on BBC paragraph batches, attention forward + backward was 1.4x
faster than with the whole batch padded back to (B, T')). The padded path runs everything on
(B, T, H); both give the same numbers at the real positions (tests/modern). States at padding
positions carry no meaning (the unpadded path returns zeros there).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from bertkit.models import attention as kernels
from bertkit.models.checkpoint import PretrainedMixin
from bertkit.models.dropout import Dropout, drop_mask
from bertkit.errors import BertkitError
from bertkit.models.encoder import EncoderOutput, activation, check_tensors, check_token_ids
from bertkit.models.variants.sinusoidal import sinusoidal_table
from bertkit.models.modern.config import SLIDING, ModernBertConfig
from bertkit.runtime.compiling import compile_each


# ---------------------------------------------------------------------------- unpadding
BUCKET_ROWS = 8  # rows per attention bucket (measured: 4-8 beat 1, 2 and 32 at B = 32, T <= 128)


@dataclass
class Bucket:
    """Up to BUCKET_ROWS rows of similar length, laid out (b, L) for one attention call.

    `rows` (b, L): the token row (of the N real tokens) at each slot; padding slots repeat a
    real row and are masked as keys (their query outputs are dropped). `real` (b, L): which slots
    are real. `masks`: per layer type, a bool (b, 1, L, L) mask, or None where every slot may see
    every other.
    """

    rows: torch.Tensor
    real: torch.Tensor
    masks: dict[str, torch.Tensor | None]
    real_slots: torch.Tensor  # (n,) flat positions of the real slots in the (b * L) grid, row by row


def gather_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x[index] for a LongTensor index into dim 0, by index_select: 6x faster than advanced indexing
    on CPU for the bucket gathers (a (32, 180) index into (6000, 4, 64) rows: 90 us vs 569 us)."""
    return x.index_select(0, index.flatten()).view(*index.shape, *x.shape[1:])


@dataclass
class Unpadding:
    """Where the N real tokens sit in a (B, T') grid, T' = 1 + the last real column of any row.

    `indices` (N,) are flat positions in the (B * T') grid; `unpad` gathers them, `pad` puts
    rows back (zeros elsewhere). Both are differentiable, so training runs unpadded too.
    Attention runs through torch's variable-length flash kernel where it runs (CUDA, half
    precision, no attention dropout: `attention.flash_varlen_runs`), with `cu_seqlens` (B+1,) the
    rows' cumulative lengths; elsewhere per bucket of rows sorted by length (`buckets`), each
    padded only to its own longest row (built on first use); `order` lists the token rows in
    bucket order.
    """

    indices: torch.Tensor
    batch: int
    length: int
    counts: torch.Tensor  # (B,) real tokens per row
    config: ModernBertConfig
    cu_seqlens: torch.Tensor | None = None  # None when a row has no real token (the buckets skip it)
    max_len: int = 0

    @classmethod
    def from_mask(cls, attention_mask: torch.Tensor, config: ModernBertConfig) -> "Unpadding":
        real = attention_mask.bool()
        columns = real.any(0).nonzero()
        length = int(columns.max()) + 1 if columns.numel() else 1
        real = real[:, :length]
        indices = real.flatten().nonzero().squeeze(1)
        if indices.numel() == 0:
            raise BertkitError("attention_mask marks no token as real (all 0); pass 1 at real tokens")
        counts = real.sum(1)
        cu_seqlens = None
        if bool(counts.all()):
            cu_seqlens = torch.zeros(real.shape[0] + 1, dtype=torch.int32, device=real.device)
            cu_seqlens[1:] = counts.cumsum(0)
        return cls(indices, real.shape[0], length, counts, config, cu_seqlens, int(counts.max()))

    @functools.cached_property
    def buckets(self) -> list[Bucket]:
        """The rows sorted by length in buckets of BUCKET_ROWS, built on first use: the flash
        kernel needs none, and building them reads the lengths on the host, bucket by bucket
        (each a wait for the GPU)."""
        counts = self.counts
        starts = torch.cumsum(counts, 0) - counts  # each row's first token row among the N
        column = self.indices % self.length  # distances for the sliding window are in columns
        buckets = []
        by_length = [r for r in counts.argsort().tolist() if counts[r] > 0]
        for i in range(0, len(by_length), BUCKET_ROWS):
            rows = torch.tensor(by_length[i:i + BUCKET_ROWS], device=counts.device)
            width = int(counts[rows].max())
            slot = torch.arange(width, device=counts.device)
            in_row = slot[None] < counts[rows, None]
            token = torch.where(in_row, starts[rows, None] + slot[None], starts[rows, None])
            buckets.append(Bucket(token, in_row, _bucket_masks(self.config, in_row, column[token]),
                                  in_row.flatten().nonzero().squeeze(1)))
        return buckets

    @functools.cached_property
    def order(self) -> torch.Tensor:
        """The token rows in bucket order."""
        return torch.cat([b.rows.flatten()[b.real_slots] for b in self.buckets])

    def unpad(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T'' >= T', ...) -> (N, ...)"""
        return x[:, :self.length].flatten(0, 1).index_select(0, self.indices)

    def pad(self, x: torch.Tensor, length: int | None = None) -> torch.Tensor:
        """(N, ...) -> (B, length or T', ...) with zeros at padding."""
        length = length or self.length
        out = x.new_zeros(self.batch * length, *x.shape[1:])
        indices = self.indices if length == self.length else self._regrid(length)
        return out.index_copy(0, indices, x).view(self.batch, length, *x.shape[1:])

    def _regrid(self, length: int) -> torch.Tensor:
        return self.indices // self.length * length + self.indices % self.length

    def attend(self, attention: "ModernBertAttention", q, k, v) -> torch.Tensor:
        """q, k, v (N, h, d) of the real tokens -> context (N, h * d), in one flash call or bucket by bucket."""
        dropout_p = attention.dropout_prob if attention.training else 0.0
        call = kernels.AttentionCall(1.0 / math.sqrt(q.shape[-1]), dropout_p)
        if self.cu_seqlens is not None and kernels.flash_varlen_runs(q, call, attention.window):
            return kernels.flash_varlen(q, k, v, self, self, call.scale, attention.window).flatten(1)
        pieces = []
        for bucket in self.buckets:
            qb, kb, vb = (gather_rows(x, bucket.rows).transpose(1, 2) for x in (q, k, v))  # (b, h, L, d)
            context, _ = attention.attend(qb, kb, vb, bucket.masks[attention.layer_type], False)
            slots = context.transpose(1, 2).flatten(0, 1)  # (b * L, h, d)
            pieces.append(slots.index_select(0, bucket.real_slots).flatten(1))
        packed = torch.cat(pieces)  # token rows in bucket order -> back to the N-row order
        return packed.new_empty(packed.shape).index_copy(0, self.order, packed)


def _bucket_masks(config: ModernBertConfig, in_row: torch.Tensor, column: torch.Tensor
                  ) -> dict[str, torch.Tensor | None]:
    """Per layer type, the (b, 1, L, L) mask of a bucket (see attention_masks), or None."""
    width = in_row.shape[1]
    diagonal = torch.eye(width, dtype=torch.bool, device=in_row.device)
    keys = None if bool(in_row.all()) else in_row[:, None, None, :] | diagonal
    masks: dict[str, torch.Tensor | None] = {"full_attention": keys, SLIDING: keys}
    if SLIDING in config.layer_types and width > config.sliding_window + 1:
        band = (column[:, :, None] - column[:, None, :]).abs() <= config.sliding_window
        masks[SLIDING] = band[:, None] if keys is None else (band[:, None] & keys) | diagonal
    return masks


# ---------------------------------------------------------------------------- rotary positions
def rotary_tables(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the angles t / theta^(2j/d), repeated for both halves: (..., T, d)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32,
                                             device=positions.device) / head_dim))
    angles = positions[..., None].float() * inv_freq
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (x_j, x_{j+d/2}) by its angle: x cos + (-x_2, x_1) sin."""
    first, second = x.chunk(2, dim=-1)
    return (x * cos + torch.cat((-second, first), dim=-1) * sin).to(x.dtype)


def rotate(q: torch.Tensor, k: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor] | None
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE on q and k, (B, h, T, d) with cos, sin (B or 1, T, d), or (N, h, d) with (N, d);
    rotary None (position_embedding_type other than "rope"): q and k as they are."""
    if rotary is None:
        return q, k
    cos, sin = rotary[0][:, None], rotary[1][:, None]  # broadcast over the heads
    return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)


def attention_masks(config: ModernBertConfig, length: int, key_mask: torch.Tensor | None,
                    device: torch.device) -> dict[str, torch.Tensor | None]:
    """Boolean masks (True = may attend) per layer type, broadcastable to (B, h, T, T).

    Global layers: every real key. Sliding-window layers: real keys with |i - j| <= window.
    With padding, every query may also see itself, so no row is empty (padding queries would
    otherwise get NaN, whose gradient reaches the real keys); real rows do not change.
    """
    masks: dict[str, torch.Tensor | None] = {"full_attention": None, SLIDING: None}
    keys = None if key_mask is None else key_mask.bool()[:, None, None, :length]
    position = torch.arange(length, device=device)
    diagonal = position[:, None] == position[None, :]  # not torch.eye: its bool form has no ONNX Runtime kernel
    if keys is not None:
        masks["full_attention"] = keys | diagonal
    if SLIDING in config.layer_types and length > config.sliding_window + 1:
        band = (position[:, None] - position[None, :]).abs() <= config.sliding_window
        masks[SLIDING] = band if keys is None else (band & keys) | diagonal
    elif keys is not None:
        masks[SLIDING] = masks["full_attention"]
    return masks


# ---------------------------------------------------------------------------- modules
def layer_norm(config: ModernBertConfig) -> nn.LayerNorm:
    return nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)


class ModernBertEmbeddings(nn.Module):
    """x = dropout(norm(E[id])): no position or segment embeddings (positions are rotary).
    position_embedding_type "absolute" / "sinusoidal": x = dropout(norm(E[id] + P[t]))."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        if config.position_embedding_type == "absolute":
            self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        elif config.position_embedding_type == "sinusoidal":  # fixed: rebuilt from the config, not saved
            self.register_buffer("sinusoidal_positions", sinusoidal_table(config.max_position_embeddings,
                                                                          config.hidden_size), persistent=False)
        self.norm = layer_norm(config)
        self.drop = Dropout(config.embedding_dropout)

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        """input_ids (B, T) with position_ids (B or 1, T), or the real tokens (N,) with theirs (N,)."""
        x = self.tok_embeddings(input_ids)
        if hasattr(self, "position_embeddings"):
            x = x + self.position_embeddings(position_ids)
        elif hasattr(self, "sinusoidal_positions"):
            x = x + self.sinusoidal_positions[position_ids]
        return self.drop(self.norm(x))


class ModernBertAttention(nn.Module):
    """Rotary multi-head self-attention, global or within a window; bias-free by default.

    SDPA is the fast path. The explicit path (returns the probabilities) runs when they are
    asked for, or when training on CPU with attention dropout (bertkit's cheaper mask, as in
    bertkit/models/encoder.py). HF applies attention_dropout to the probabilities and after Wo; so here.
    """

    def __init__(self, config: ModernBertConfig, index: int):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.Wqkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=config.attention_bias)
        self.Wo = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)
        self.dropout_prob = config.attention_dropout
        self.out_drop = Dropout(config.attention_dropout)
        self.layer_type = config.layer_types[index]
        # Keys a query may see, in positions either side (the sliding-window band); -1: all.
        self.window = config.sliding_window if self.layer_type == SLIDING else -1

    def forward(self, x: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor],
                mask: torch.Tensor | None, unpadding: Unpadding | None = None,
                output_attentions: bool = False, keep: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x: (B, T, H) with rotary cos, sin (B or 1, T, d); or the real tokens (N, H) with
        `unpadding` and cos, sin (N, d). `keep` (K,): the token rows (of x flattened to rows)
        whose output is wanted; Wo then runs on those K rows only and the result is (K, H)."""
        qkv = self.Wqkv(x)
        probs = None
        if unpadding is None:
            batch, length, _ = qkv.shape
            q, k, v = qkv.view(batch, length, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
            context, probs = self.attend(*rotate(q, k, rotary), v, mask, output_attentions)
            context = context.transpose(1, 2).reshape(batch, length, -1)
        else:
            q, k, v = qkv.view(-1, 3, self.num_heads, self.head_dim).unbind(1)
            context = unpadding.attend(self, *rotate(q, k, rotary), v)
        if keep is not None:
            context = context.flatten(0, -2)[keep]
        return self.out_drop(self.Wo(context)), probs

    def attend(self, q, k, v, mask, output_attentions):
        """(B, h, T, d) each -> context (B, h, T, d) and the probabilities if asked for."""
        cpu_dropout = self.training and self.dropout_prob > 0 and q.device.type == "cpu"
        if output_attentions or cpu_dropout:
            return self.explicit_attention(q, k, v, mask)
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout_prob if self.training else 0.0), None

    def explicit_attention(self, q, k, v, mask):
        """softmax(Q K^T / sqrt(d), masked), dropped out, times V; returns (context, probabilities)."""
        scores = (q / math.sqrt(self.head_dim)) @ k.transpose(-1, -2)
        if mask is not None:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        probs = scores.softmax(dim=-1)
        if self.training and self.dropout_prob > 0:
            dropped, scale = drop_mask(probs.shape, self.dropout_prob, probs.device)
            return (torch.where(dropped, 0.0, probs) @ v) * scale, probs
        return probs @ v, probs


class ModernBertMLP(nn.Module):
    """GeGLU: Wo(dropout(act(a) * g)) with (a, g) the two halves of Wi x."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.Wi = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=config.mlp_bias)
        self.act = activation(config.hidden_activation)
        self.drop = Dropout(config.mlp_dropout)
        self.Wo = nn.Linear(config.intermediate_size, config.hidden_size, bias=config.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, g = self.Wi(x).chunk(2, dim=-1)
        return self.Wo(self.drop(self.act(a) * g))


class ModernBertEncoderLayer(nn.Module):
    """Pre-LN block: x + attn(attn_norm(x)), then x + mlp(mlp_norm(x)).
    norm_placement "post" (BERT's): attn_norm(x + attn(x)), then mlp_norm(x + mlp(x))."""

    def __init__(self, config: ModernBertConfig, index: int):
        super().__init__()
        self.post_norm = config.norm_placement == "post"
        # Pre-LN layer 0 reads the embeddings, which end in a norm already (as transformers);
        # post-LN norms each sublayer's sum, layer 0's included.
        self.attn_norm = nn.Identity() if index == 0 and not self.post_norm else layer_norm(config)
        self.attn = ModernBertAttention(config, index)
        self.mlp_norm = layer_norm(config)
        self.mlp = ModernBertMLP(config)

    def forward(self, x, rotary, mask, unpadding=None, output_attentions=False, keep=None):
        """`keep` (K,): rows of x (flattened to token rows) to compute the output for: keys and
        values still come from every token, the rest of the layer runs on K rows -> (K, H)."""
        attn_input = x if self.post_norm else self.attn_norm(x)
        attended, probs = self.attn(attn_input, rotary, mask, unpadding, output_attentions, keep)
        x = (x if keep is None else x.flatten(0, -2)[keep]) + attended
        if self.post_norm:
            x = self.attn_norm(x)
            return self.mlp_norm(x + self.mlp(x)), probs
        return x + self.mlp(self.mlp_norm(x)), probs


# ---------------------------------------------------------------------------- the model
class ModernBertModel(PretrainedMixin, nn.Module):
    """The bare modern encoder: token ids in, contextual vectors out (after the final norm)."""

    config_class = ModernBertConfig
    base_model_prefix = "model"
    unpad = True  # False: run padded batches padded (the reference path the tests compare with)

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.config = config
        self.embeddings = ModernBertEmbeddings(config)
        self.layers = nn.ModuleList(ModernBertEncoderLayer(config, i) for i in range(config.num_hidden_layers))
        # Post-LN's last sublayer ends in a norm already: a second one would only re-scale it.
        self.final_norm = nn.Identity() if config.norm_placement == "post" else layer_norm(config)
        self.gradient_checkpointing = False  # recompute each layer in backward to save memory
        self.init_weights()

    def positions(self, input_ids: torch.Tensor, position_ids: torch.Tensor | None, length: int,
                  unpadding) -> tuple[torch.Tensor, dict]:
        """(the position of each token the layers see: the column index by default, one per real
        token when unpadded; the rotary tables of each attention kind, none without rope)."""
        config = self.config
        if position_ids is None:
            position_ids = torch.arange(length, device=input_ids.device).unsqueeze(0)
        position_ids = position_ids[:, :length]
        if unpadding is not None:  # one position per real token
            position_ids = unpadding.unpad(position_ids.expand(input_ids.shape[0], -1))
        rotary = {kind: rotary_tables(position_ids, config.head_dim, theta) for kind, theta in
                  (("full_attention", config.global_rope_theta), (SLIDING, config.local_rope_theta))
                  } if config.position_embedding_type == "rope" else {}
        return position_ids, rotary

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                head_mask: torch.Tensor | None = None, output_attentions: bool = False,
                output_hidden_states: bool = False, output_mask: torch.Tensor | None = None
                ) -> EncoderOutput:
        """Same call as bertkit's BertModel. `token_type_ids` is accepted and ignored (the
        architecture has no segments); `position_ids` (B, T) default to the column index, as in
        transformers. hidden_states = (embeddings, the outputs of layers 0..L-2, last_hidden_state),
        as transformers: the last entry is after the final norm.

        `output_mask` (B, T) bool: last_hidden_state is then (K, H), the final states at the K
        True positions in row-major order (= full_states[output_mask]), which must be real
        tokens. The last layer then runs its output map and MLP on those K rows only (what a
        head reads: the masked tokens, [CLS]); the same numbers, less work.
        """
        self.check_inputs(input_ids, attention_mask, head_mask)
        if output_mask is not None and (output_attentions or output_hidden_states):
            return self.select(self(input_ids, attention_mask, None, position_ids, None, output_attentions,
                                    output_hidden_states), output_mask)
        config = self.config
        padded = attention_mask is not None and not bool(attention_mask.all())
        unpadding = (Unpadding.from_mask(attention_mask, config)
                     if padded and self.unpad and not output_attentions else None)
        length = input_ids.shape[1] if unpadding is None else unpadding.length
        position_ids, rotary = self.positions(input_ids, position_ids, length, unpadding)
        masks = ({} if unpadding is not None else
                 attention_masks(config, length, attention_mask if padded else None, input_ids.device))

        ids = input_ids if unpadding is None else unpadding.unpad(input_ids)
        keep = None if output_mask is None else self.kept_rows(output_mask, attention_mask, unpadding, length)
        hidden = self.embeddings(ids, position_ids)
        all_hidden = [hidden] if output_hidden_states else None
        all_attn = [] if output_attentions else None
        for i, layer in enumerate(self.layers):
            kind = layer.attn.layer_type
            last = i == len(self.layers) - 1
            args = (hidden, rotary.get(kind), masks.get(kind), unpadding, output_attentions, keep if last else None)
            if self.gradient_checkpointing and self.training:
                hidden, probs = checkpoint(layer, *args, use_reentrant=False)
            else:
                hidden, probs = layer(*args)
            if output_hidden_states and i < len(self.layers) - 1:
                all_hidden.append(hidden)
            if output_attentions:
                all_attn.append(probs)
        hidden = self.final_norm(hidden)
        if output_hidden_states:
            all_hidden.append(hidden)
        if keep is not None:
            return EncoderOutput(hidden)
        if unpadding is not None:  # back to (B, T, H), zeros at padding
            width = input_ids.shape[1]
            hidden = unpadding.pad(hidden, width)
            all_hidden = None if all_hidden is None else [unpadding.pad(h, width) for h in all_hidden]
        return EncoderOutput(hidden, None, None if all_hidden is None else tuple(all_hidden),
                             None if all_attn is None else tuple(all_attn))

    @staticmethod
    def kept_rows(output_mask: torch.Tensor, attention_mask: torch.Tensor | None,
                  unpadding: Unpadding | None, length: int) -> torch.Tensor:
        """The token rows (of the (B*T, H) or unpadded (N, H) states) at output_mask's positions."""
        if attention_mask is not None and bool((output_mask & ~attention_mask.bool()).any()):
            raise BertkitError("output positions (e.g. MLM labels other than -100) fall on padding "
                               "(attention_mask 0); label real tokens only")
        if unpadding is None:
            return output_mask.flatten().nonzero().squeeze(1)
        return output_mask[:, :length].flatten()[unpadding.indices].nonzero().squeeze(1)

    @staticmethod
    def select(out: EncoderOutput, output_mask: torch.Tensor) -> EncoderOutput:
        return EncoderOutput(out.last_hidden_state[output_mask], None, out.hidden_states, out.attentions)

    def check_inputs(self, input_ids, attention_mask, head_mask) -> None:
        """Turn the usual user mistakes into messages instead of index errors deep in torch."""
        check_tensors(input_ids, attention_mask)
        if input_ids.dim() != 2:
            raise BertkitError(f"input_ids must have shape (batch, sequence), got {tuple(input_ids.shape)}")
        if input_ids.shape[1] > self.config.max_position_embeddings:
            raise BertkitError(f"sequence length {input_ids.shape[1]} exceeds max_position_embeddings "
                               f"({self.config.max_position_embeddings}); tokenize with truncation and "
                               f"max_length={self.config.max_position_embeddings}")
        check_token_ids(input_ids, self.config.vocab_size)
        if attention_mask is not None and attention_mask.shape != input_ids.shape:
            raise BertkitError(f"attention_mask shape {tuple(attention_mask.shape)} differs from "
                               f"input_ids shape {tuple(input_ids.shape)}")
        refuse_head_mask(head_mask)

    # ----------------------------------------------------------- initialisation
    def _init_module(self, module: nn.Module) -> None:
        init_modern(self.config, module)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.tok_embeddings

    def set_gradient_checkpointing(self, enabled: bool = True) -> None:
        self.gradient_checkpointing = enabled

    def compile_layers(self, **options) -> None:
        """`torch.compile` each encoder layer (options go to it): the norms, GeGLU, dropouts and
        residual adds around the matmuls run fused (2.31x transformers on packed ModernBERT-base
        rows on an H100, 1.22x uncompiled: docs/benchmarks.md). Same numbers and state-dict keys."""
        compile_each(self.layers, **options)


def refuse_head_mask(head_mask) -> None:
    if head_mask is not None:
        raise BertkitError("head_mask is not supported by the modern encoder (nor by transformers' "
                           "ModernBert); leave it unset")


def truncated_normal_(weight: torch.Tensor, std: float, config: ModernBertConfig) -> None:
    cutoff = config.initializer_cutoff_factor * std
    nn.init.trunc_normal_(weight, mean=0.0, std=std, a=-cutoff, b=cutoff)


def init_modern(config: ModernBertConfig, module: nn.Module) -> None:
    """transformers' ModernBert init: truncated normals with std initializer_range for the
    embeddings and input maps (Wqkv, Wi), range / sqrt(2 L) for the output maps (Wo, the head's
    dense layer), H^-0.5 for task classifiers; biases 0; norms 1 and 0."""
    std_in = config.initializer_range
    std_out = config.initializer_range / math.sqrt(2.0 * config.num_hidden_layers)
    if isinstance(module, ModernBertEmbeddings):
        truncated_normal_(module.tok_embeddings.weight, std_in, config)
        if hasattr(module, "position_embeddings"):  # as the token table (BERT inits both alike)
            truncated_normal_(module.position_embeddings.weight, std_in, config)
    elif isinstance(module, (ModernBertAttention, ModernBertMLP)):
        first = module.Wqkv if isinstance(module, ModernBertAttention) else module.Wi
        for linear, std in ((first, std_in), (module.Wo, std_out)):
            truncated_normal_(linear.weight, std, config)
            if linear.bias is not None:
                nn.init.zeros_(linear.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
