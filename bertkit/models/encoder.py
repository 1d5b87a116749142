"""The BERT encoder in one file: embeddings, self-attention, feed-forward, layer, encoder, pooler.

Shapes: B = batch, T = sequence length, H = hidden size, h = number of heads, d = H / h.
Module and parameter names equal Hugging Face's (`encoder.layer.0.attention.self.query.weight`,
...), so a `transformers` state dict loads without renaming. Variants are switches on
`BertConfig`, not copies of this file.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from bertkit.models.checkpoint import PretrainedMixin
from bertkit.models.config import BertConfig
from bertkit.models.activations import activation
from bertkit.models.attention import (KERNELS, SETTINGS, AttentionCall, choose_kernel, default_scale,
                                      flash_varlen_available, packed_attention)
from bertkit.models.dropout import Dropout
from bertkit.errors import BertkitError
from bertkit.models.kv_cache import KVCache, KVSlot, LayerCache
from bertkit.models.packing import Packing
from bertkit.models.variants import deberta, linformer, moe
from bertkit.models.variants.albert import has_embedding_projection, layer_order, num_layer_modules
from bertkit.models.variants.relative import RELATIVE_TYPES, relative_position_scores
from bertkit.models.variants.sinusoidal import sinusoidal_table
from bertkit.models.variants.switches import build_switches, needs_every_query
from bertkit.models.variants.t5_bias import T5_BIAS, RelativePositionBias
from bertkit.runtime.compiling import compile_each


# ---------------------------------------------------------------------------- outputs
class ModelOutput:
    """Dataclass base whose fields can also be read by position, skipping None (like HF)."""

    def to_tuple(self) -> tuple:
        return tuple(v for v in (getattr(self, f.name) for f in fields(self)) if v is not None)

    def __getitem__(self, index: int | str) -> Any:
        if isinstance(index, str):
            return getattr(self, index)
        return self.to_tuple()[index]


@dataclass
class EncoderOutput(ModelOutput):
    last_hidden_state: torch.Tensor
    pooler_output: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None  # embeddings, then every layer
    attentions: tuple[torch.Tensor, ...] | None = None  # per layer, (B, h, T, T)
    aux_loss: torch.Tensor | None = None  # MoE load balancing x its coefficient (variants/moe.py)
    past_key_values: KVCache | None = None  # a decoder's cache, with use_cache=True (kv_cache.py)
    cross_attentions: tuple[torch.Tensor, ...] | None = None  # per layer, (B, h, T, S) over the encoder


# ---------------------------------------------------------------------------- embeddings
class BertEmbeddings(nn.Module):
    """x_t = LayerNorm(word[id_t] + position[t] + segment[type_t]), then dropout."""

    def __init__(self, config: BertConfig):
        super().__init__()
        width = config.embedding_dim  # H, or E < H with factorised embeddings (ALBERT, ELECTRA)
        self.word_embeddings = nn.Embedding(config.vocab_size, width, padding_idx=config.pad_token_id)
        # RoBERTa numbers positions after the pad row (see `roberta_position_ids`).
        self.pad_positions = config.model_type == "roberta"
        self.pad_token_id = config.pad_token_id
        # DeBERTa (position_biased_input=False) has no absolute positions; type_vocab_size=0: no segments.
        self.position_embeddings = nn.Embedding(
            config.max_position_embeddings, width, padding_idx=config.pad_token_id if self.pad_positions else None
        ) if config.position_biased_input and config.position_embedding_type not in ("sinusoidal", T5_BIAS) else None
        if config.position_embedding_type == "sinusoidal":  # fixed (variants/sinusoidal.py): not trained, not saved
            self.register_buffer("sinusoidal_positions", sinusoidal_table(config.max_position_embeddings, width),
                                 persistent=False)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, width) if config.type_vocab_size else None
        self.LayerNorm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)
        self.position_embedding_type = config.position_embedding_type

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None) -> torch.Tensor:
        seq_len = input_ids.shape[1]
        if position_ids is None and self.pad_positions:
            position_ids = roberta_position_ids(input_ids, self.pad_token_id)
        elif position_ids is None:
            position_ids = torch.arange(seq_len, device=input_ids.device).unsqueeze(0)
        x = self.word_embeddings(input_ids)
        if self.position_embedding_type == "absolute" and self.position_embeddings is not None:
            x = x + self.position_embeddings(position_ids)  # relative types add positions in attention
        elif self.position_embedding_type == "sinusoidal":
            x = x + self.sinusoidal_positions[position_ids]
        if self.token_type_embeddings is not None:  # without token_type_ids all are in segment 0
            x = x + (self.token_type_embeddings.weight[0] if token_type_ids is None
                     else self.token_type_embeddings(token_type_ids))
        return self.dropout(self.LayerNorm(x))


def roberta_position_ids(input_ids: torch.Tensor, pad_token_id: int) -> torch.Tensor:
    """RoBERTa's positions: pad + (number of real tokens so far) at real tokens, pad at padding.

    [<s> a b </s> <pad>] with pad id 1 -> [2 3 4 5 1]: left or right padding gives the same
    positions to the same tokens, and padding always reads the (zero-initialised) pad row.
    """
    real = (input_ids != pad_token_id).long()
    return torch.cumsum(real, dim=1) * real + pad_token_id


# ---------------------------------------------------------------------------- attention
class BertSelfAttention(nn.Module):
    """softmax(Q K^T / sqrt(d) + mask) V for h heads in parallel.

    The projections and position scores are here; how the formula is computed (torch's fused
    SDPA, the explicit formula with probabilities, block-sparse) is chosen per call by
    `attention.choose_kernel`, and every kernel gives the same result (Linformer's low rank,
    `attention_low_rank`, is a model of its own and always takes its kernel).
    """

    def __init__(self, config: BertConfig, cross: bool = False):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        # A decoder's self-attention is causal; its cross-attention sees every encoder position.
        self.causal = config.is_decoder and not cross
        hidden = config.hidden_size
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        # An inference copy's fused projection (fastpath.PackedQKV, quantize.Int8QKV): x -> (q, k, v) in one product.
        self.qkv: nn.Module | None = None
        self.dropout_prob = config.attention_probs_dropout_prob
        self.position_embedding_type = config.position_embedding_type
        self.max_positions = config.max_position_embeddings
        if self.position_embedding_type in RELATIVE_TYPES:  # one vector per signed distance
            self.distance_embedding = nn.Embedding(2 * config.max_position_embeddings - 1, self.head_dim)
        # Prefix tuning (bertkit.peft.prefix) sets a module here: prefix(k, v, bias) -> (k, v, bias)
        # with P learned key/value tokens put before the sequence's and the bias widened to match.
        self.prefix: nn.Module | None = None
        # Block-sparse local attention (variants/sparse.py); None = dense.
        self.block_size = config.attention_block_size
        self.window_blocks = config.attention_window_blocks
        self.global_cls = config.attention_global_cls
        # Linformer's E, F (variants/linformer.py); "layerwise" sharing sets the encoder's one here.
        self.low_rank: nn.Module | None = None
        if config.attention_low_rank is not None:
            linformer.add_low_rank(self, config)
        # DeBERTa's disentangled attention (variants/deberta.py): q.k is scaled by
        # 1/sqrt(d * (1 + number of c2p/p2c terms)) and the terms come as a bias.
        self.disentangled: BertConfig | None = None
        self.scale_factor = 1
        if config.relative_attention:
            deberta.add_disentangled(self, config)
            self.scale_factor = 1 + len(config.pos_att_type or [])

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, H) -> (B, h, T, d)"""
        batch, seq_len, _ = x.shape
        return x.view(batch, seq_len, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, hidden: torch.Tensor, attention_bias: torch.Tensor | None = None,
                head_mask: torch.Tensor | None = None, output_attentions: bool = False,
                queries: torch.Tensor | None = None, memory: torch.Tensor | None = None,
                slot: KVSlot | None = None, packing: Packing | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`queries` (B, M, H): states to compute queries (and so outputs) for, default `hidden`.
        `memory` (B, S, H): states the keys and values come from instead of `hidden` (cross-attention:
        the encoder's output). `slot`: this sub-layer's KV cache entry (kv_cache.py). `packing`: hidden
        (N, H) holds a batch's real tokens packed (packing.py; queries then (B * M, H))."""
        if packing is not None:
            return self.packed_forward(hidden, attention_bias, queries, packing), None
        if self.qkv is not None:  # set on encoders only: no memory, no cache
            q, k, v = self.qkv(hidden)
            if queries is not None:  # the pruned last layer: queries at a few positions
                q = self.qkv(queries)[0]
        else:
            q = self.split_heads(self.query(hidden if queries is None else queries))
            k, v = self.keys_values(hidden if memory is None else memory, slot, fixed=memory is not None)
        bias = self.position_scores(q, k, attention_bias)
        if self.prefix is not None:
            k, v, bias = self.prefix(k, v, bias)
        dropout_p = self.dropout_prob if self.training else 0.0
        kernel = choose_kernel(output_attentions or head_mask is not None,
                               dropout_p > 0 and q.device.type == "cpu", self.block_size, self.low_rank is not None)
        call = AttentionCall(default_scale(self.head_dim, self.scale_factor), dropout_p, head_mask,
                             self.block_size, self.window_blocks, self.global_cls, self.low_rank,
                             causal=self.causal)
        context, probs = KERNELS[kernel](q, k, v, bias, call)
        batch, _, seq_len, _ = context.shape
        context = context.transpose(1, 2).reshape(batch, seq_len, self.num_heads * self.head_dim)
        return context, probs

    def packed_forward(self, hidden: torch.Tensor, bias: torch.Tensor | None, queries: torch.Tensor | None,
                       packing: Packing) -> torch.Tensor:
        """Attention over packed tokens (N, H) -> context (N or B * M, H). BertModel packs only
        models whose scores need no position bias, prefix or cache (`BertModel.runs_packed`)."""
        def heads(x: torch.Tensor) -> torch.Tensor:
            return x.view(x.shape[0], self.num_heads, self.head_dim)

        q = heads(self.query(hidden if queries is None else queries))
        k, v = heads(self.key(hidden)), heads(self.value(hidden))
        dropout_p = self.dropout_prob if self.training else 0.0
        call = AttentionCall(default_scale(self.head_dim, self.scale_factor), dropout_p)
        return packed_attention(q, k, v, bias, packing, call).flatten(1)

    def keys_values(self, source: torch.Tensor, slot: KVSlot | None, fixed: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, h, T, d) keys and values of `source`; with a cache, the cached ones too: self-attention
        appends the new positions' to its slot, cross-attention (`fixed`) computes the encoder's once."""
        if fixed and slot is not None and slot.keys is not None:
            return slot.keys, slot.values
        k, v = self.split_heads(self.key(source)), self.split_heads(self.value(source))
        return (k, v) if slot is None else slot.update(k, v, append=not fixed)

    def position_scores(self, q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor | None:
        """The attention bias plus the scores that depend on relative positions (relative_key[_query],
        DeBERTa's disentangled c2p/p2c terms), so every kernel sees them as one additive bias."""
        if self.position_embedding_type in RELATIVE_TYPES:
            relative = relative_position_scores(q, k, self.distance_embedding.weight,
                                                self.position_embedding_type, self.max_positions)
            bias = relative if bias is None else relative + bias
        if self.disentangled is not None:
            relative = deberta.disentangled_scores(self, q, k)
            bias = relative if bias is None else relative + bias
        return bias


class BertSelfOutput(nn.Module):
    """Project the heads back to H, then the residual connection and LayerNorm (post-LN)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, context: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(context)) + residual)


class BertAttention(nn.Module):
    def __init__(self, config: BertConfig, cross: bool = False):
        super().__init__()
        self.self = BertSelfAttention(config, cross)  # HF's name, kept for state-dict compatibility
        self.output = BertSelfOutput(config)

    def forward(self, hidden, attention_bias=None, head_mask=None, output_attentions=False, queries=None,
                memory=None, slot=None, packing=None):
        context, probs = self.self(hidden, attention_bias, head_mask, output_attentions, queries, memory, slot, packing)
        return self.output(context, hidden if queries is None else queries), probs


# ---------------------------------------------------------------------------- feed-forward
class BertIntermediate(nn.Module):
    """The widening half of the feed-forward block: act(x W1 + b1), H -> intermediate."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = activation(config.hidden_act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.intermediate_act_fn(self.dense(x))


class BertOutput(nn.Module):
    """The narrowing half: LayerNorm(dropout(a W2 + b2) + x)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, intermediate: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(intermediate)) + residual)


class BertLayer(nn.Module):
    """One transformer block: self-attention sub-layer, (in a decoder with add_cross_attention:
    cross-attention over the encoder's output,) then feed-forward sub-layer."""

    def __init__(self, config: BertConfig, index: int = 0):
        super().__init__()
        self.attention = BertAttention(config)
        # transformers' name: queries from the decoder, keys and values from the encoder.
        self.crossattention = BertAttention(config, cross=True) if config.add_cross_attention else None
        # A mixture of experts replaces the feed-forward sub-layer in MoE layers (variants/moe.py).
        self.moe = moe.MoEFeedForward(config) if moe.is_moe_layer(config, index) else None
        if self.moe is None:
            self.intermediate = BertIntermediate(config)
            self.output = BertOutput(config)

    def forward(self, hidden, attention_bias=None, head_mask=None, output_attentions=False, queries=None,
                encoder_hidden=None, encoder_bias=None, cache: LayerCache | None = None,
                packing: Packing | None = None):
        """Returns (states, self-attention probabilities, cross-attention probabilities); the
        probabilities are None unless asked for, cross-attention's also without `encoder_hidden`.
        With `packing`, hidden is (N, H): the batch's real tokens (packing.py)."""
        attended, probs = self.attention(hidden, attention_bias, head_mask, output_attentions, queries,
                                         slot=None if cache is None else cache.self_attention, packing=packing)
        cross_probs = None
        if encoder_hidden is not None:
            attended, cross_probs = self.crossattention(attended, encoder_bias, None, output_attentions, None,
                                                        encoder_hidden, None if cache is None else cache.cross_attention)
        if self.moe is not None:
            return self.moe(attended), probs, cross_probs
        return self.output(self.intermediate(attended), attended), probs, cross_probs


class BertEncoder(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        # Factorised embeddings (ALBERT, ELECTRA): project E up to H before the first layer.
        self.embedding_hidden_mapping_in = (nn.Linear(config.embedding_dim, config.hidden_size)
                                            if has_embedding_projection(config) else None)
        self.layer = nn.ModuleList(BertLayer(config, i) for i in range(num_layer_modules(config)))
        # Which layer runs at each step: 0..L-1, or ALBERT's shared groups (variants/albert.py).
        self.layer_order = layer_order(config)
        self.steps_per_layer = config.inner_group_num if config.num_hidden_groups else 1
        if config.relative_attention:  # DeBERTa: one relative-position table for every layer
            deberta.add_relative_embeddings(self, config)
        # T5's scalar relative bias (variants/t5_bias.py): one table for every layer.
        self.relative_attention_bias = (RelativePositionBias(
            config.relative_attention_num_buckets, config.num_attention_heads, config.relative_attention_max_distance)
            if config.position_embedding_type == T5_BIAS else None)
        linformer.share_across_layers(self, config)  # Linformer's "layerwise" E = F, if configured
        self.gradient_checkpointing = False  # recompute activations in backward to save memory

    def forward(self, hidden, attention_bias=None, head_mask=None, output_attentions=False,
                output_hidden_states=False, output_positions=None, encoder_hidden=None, encoder_bias=None,
                cache: KVCache | None = None, packing: Packing | None = None):
        """`output_positions` (B, M): the last layer runs only at these positions (see BertModel).
        `encoder_hidden` (B, S, H) and its bias: what cross-attention attends to; `cache`: a decoder's
        KV cache; `packing`: hidden is (N, H), the real tokens (packing.py), and the last layer's
        output at output_positions is (B * M, H). Returns (states, all hidden states, all attentions,
        all cross-attentions)."""
        if self.embedding_hidden_mapping_in is not None:
            hidden = self.embedding_hidden_mapping_in(hidden)
        if self.relative_attention_bias is not None:  # computed once, added in every layer (as T5)
            position_bias = self.relative_attention_bias(hidden.shape[1], hidden.shape[1]).to(hidden.dtype)
            attention_bias = position_bias if attention_bias is None else position_bias + attention_bias
        all_hidden = [hidden] if output_hidden_states else None
        all_attn = [] if output_attentions else None
        all_cross = [] if output_attentions and encoder_hidden is not None else None
        for step, index in enumerate(self.layer_order):
            layer = self.layer[index]
            layer_head_mask = None if head_mask is None else head_mask[step // self.steps_per_layer]
            last = step == len(self.layer_order) - 1
            queries = None
            if last and output_positions is not None:
                queries = (gather_positions(hidden, output_positions) if packing is None
                           else hidden.index_select(0, packing.rows_at(output_positions)))
            layer_cache = None if cache is None else cache.layers[index]
            if self.gradient_checkpointing and self.training:
                hidden, probs, cross_probs = checkpoint(layer, hidden, attention_bias, layer_head_mask, output_attentions,
                                                        queries, encoder_hidden, encoder_bias, layer_cache, packing,
                                                        use_reentrant=False)
            else:
                hidden, probs, cross_probs = layer(hidden, attention_bias, layer_head_mask, output_attentions, queries,
                                                   encoder_hidden, encoder_bias, layer_cache, packing)
            if output_hidden_states:
                all_hidden.append(hidden)
            if output_attentions:
                all_attn.append(probs)
            if all_cross is not None:
                all_cross.append(cross_probs)
        return (hidden, None if all_hidden is None else tuple(all_hidden),
                None if all_attn is None else tuple(all_attn), None if all_cross is None else tuple(all_cross))


class BertPooler(nn.Module):
    """tanh(W h_[CLS] + b): the sentence vector BERT's NSP head was trained on.

    ELECTRA has no pooler; its classification head is the same map with GELU, so for
    model_type="electra" this module plays that role (checkpoint names: variants/keymaps.py).
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = activation("gelu") if config.model_type == "electra" else nn.Tanh()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(hidden[:, 0]))


# ---------------------------------------------------------------------------- the model
class BertModel(PretrainedMixin, nn.Module):
    """The bare encoder: token ids in, contextual vectors (and the pooled [CLS] vector) out."""

    # Padded batches run on their real tokens only (`packed_forward`): True, False, or None = where
    # it pays (`unpadding_pays`), on CUDA with torch's variable-length flash kernel (on the CPU the
    # padded path is kept: its speed is what docs/benchmarks.md measured). Set it on a model or on the class.
    unpad: bool | None = None

    def __init__(self, config: BertConfig, add_pooling_layer: bool | None = None):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        if add_pooling_layer is None:  # by default as transformers' bare model of the family
            add_pooling_layer = config.model_type not in ("electra", "deberta-v2")
        self.pooler = BertPooler(config) if add_pooling_layer else None
        build_switches(self, config)  # a registered switch's effect (variants/switches.py), before the init
        self.init_weights()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                head_mask: torch.Tensor | None = None, output_attentions: bool = False,
                output_hidden_states: bool = False, output_positions: torch.Tensor | None = None,
                encoder_hidden_states: torch.Tensor | None = None, encoder_attention_mask: torch.Tensor | None = None,
                past_key_values: KVCache | None = None, use_cache: bool = False) -> EncoderOutput:
        """`output_positions` (B, M) of positions: last_hidden_state is then (B, M, H), the final
        states at those positions only (what a head reads: [CLS], the masked tokens). The last
        layer then computes queries, attention output and feed-forward only there (keys and
        values still come from every position): the same numbers, less work.

        The decoder side (config.is_decoder): self-attention is causal; `encoder_hidden_states`
        (B, S, H) with its 0/1 `encoder_attention_mask` (B, S) feed the cross-attention layers;
        `past_key_values` (a KVCache) holds earlier positions, so input_ids are only the new ones,
        attention_mask covers cached + new positions and positions continue after the cached
        ones; `use_cache=True` starts a cache. The cache in use is returned as past_key_values."""
        cache = self.decoder_cache(past_key_values, use_cache, encoder_hidden_states, encoder_attention_mask)
        past = 0 if cache is None else cache.get_seq_length()
        self.check_inputs(input_ids, attention_mask, past)
        if self.runs_packed(attention_mask, head_mask, output_attentions, output_hidden_states, cache,
                            encoder_hidden_states):
            return self.packed_forward(input_ids, attention_mask, token_type_ids, position_ids, output_positions)
        if position_ids is None and past:
            position_ids = torch.arange(past, past + input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        hidden = self.embeddings(input_ids, token_type_ids, position_ids)
        bias = attention_bias(attention_mask, hidden.dtype)
        encoder_bias = None if encoder_hidden_states is None else attention_bias(encoder_attention_mask, hidden.dtype)
        if self.config.num_experts:  # MoE layers route real tokens only and report their aux loss
            moe.begin_forward(self, attention_mask)
        prune = output_positions is not None and self.last_layer_prunable(
            head_mask, output_attentions, output_hidden_states)
        hidden, all_hidden, all_attn, all_cross = self.encoder(
            hidden, bias, self.expand_head_mask(head_mask), output_attentions, output_hidden_states,
            output_positions if prune else None, encoder_hidden_states, encoder_bias, cache)
        if output_positions is not None and not prune:
            hidden = gather_positions(hidden, output_positions)
        pooled = self.pooler(hidden) if self.pooler is not None else None
        aux = moe.collect_aux_loss(self, self.config.moe_aux_loss_coef) if self.config.num_experts else None
        return EncoderOutput(hidden, pooled, all_hidden, all_attn, aux, cache, all_cross)

    def runs_packed(self, attention_mask, head_mask, output_attentions, output_hidden_states, cache,
                    encoder_hidden_states) -> bool:
        """Whether this call runs packed: unpadding on (`unpad`), padding in the batch, and nothing
        that needs the padded layout (the conditions of a prunable last layer, and no Linformer,
        prefix tuning or fused inference copy)."""
        unpad = self.unpad if self.unpad is not None else self.unpadding_pays()
        if not unpad or attention_mask is None or cache is not None or encoder_hidden_states is not None:
            return False
        plain = all(layer.attention.self.prefix is None and layer.attention.self.qkv is None
                    and layer.attention.self.low_rank is None for layer in self.encoder.layer)
        # padding to drop, and a real token in every row (an all-padding row stays on the padded path)
        return (plain and self.last_layer_prunable(head_mask, output_attentions, output_hidden_states)
                and not bool(attention_mask.all()) and bool(attention_mask.any(1).all()))

    def unpadding_pays(self) -> bool:
        """`unpad` None: packed where the attention takes torch's varlen flash kernel (CUDA), which has
        no dropout: training with attention dropout would pad and unpad every layer's q, k, v around a
        dense kernel, which measured 0.84x the padded step (BERT-base fine-tuning on lengths 16-256, an
        H200; 1.0x on an H100), unless attention dropout runs inside the kernel (`jagged_dropout`)."""
        drops = self.training and self.config.attention_probs_dropout_prob > 0 and not SETTINGS.jagged_dropout
        return flash_varlen_available(self.embeddings.word_embeddings.weight.device) and not drops

    def packed_forward(self, input_ids, attention_mask, token_type_ids, position_ids, output_positions
                       ) -> EncoderOutput:
        """forward on the real tokens only (packing.py): the embeddings, every layer and the pooler
        read N rows instead of B * T, attention takes the row boundaries. Same numbers at real
        tokens; last_hidden_state is zero at padding (the padded path leaves meaningless values)."""
        packing = Packing.from_mask(attention_mask)
        if position_ids is None:  # the padded path's positions, taken at the real tokens
            embeddings = self.embeddings
            position_ids = (roberta_position_ids(input_ids, embeddings.pad_token_id) if embeddings.pad_positions
                            else torch.arange(input_ids.shape[1], device=input_ids.device))

        def packed(x: torch.Tensor | None) -> torch.Tensor | None:  # (B, T) -> one row of the N real tokens
            return None if x is None else packing.unpad(x.expand_as(input_ids))[None]

        hidden = self.embeddings(packed(input_ids), packed(token_type_ids), packed(position_ids))[0]
        bias = attention_bias(attention_mask, hidden.dtype)  # what attention uses where flash cannot run
        hidden = self.encoder(hidden, bias, output_positions=output_positions, packing=packing)[0]
        hidden = packing.pad(hidden) if output_positions is None else hidden.view(*output_positions.shape, -1)
        return EncoderOutput(hidden, self.pooler(hidden) if self.pooler is not None else None)

    def decoder_cache(self, past_key_values, use_cache: bool, encoder_hidden_states, encoder_attention_mask
                      ) -> KVCache | None:
        """The KV cache this call reads and fills: the one passed in, a new one (use_cache), or
        none; and the decoder-only inputs refused, with what to do, when the model is not one."""
        config, layers = self.config, len(self.encoder.layer)
        if encoder_hidden_states is not None and not config.add_cross_attention:
            raise BertkitError("encoder_hidden_states were given but this model has no cross-attention layers; "
                               "build it with is_decoder=True and add_cross_attention=True")
        if encoder_hidden_states is not None and encoder_attention_mask is not None and \
                encoder_attention_mask.shape != encoder_hidden_states.shape[:2]:
            raise BertkitError(f"encoder_attention_mask shape {tuple(encoder_attention_mask.shape)} differs from "
                               f"the encoder states' (batch, length) {tuple(encoder_hidden_states.shape[:2])}")
        if (use_cache or past_key_values is not None) and not config.is_decoder:
            raise BertkitError("use_cache and past_key_values are for decoders (is_decoder=True): an encoder's "
                               "positions attend to later ones, so nothing can be cached")
        if past_key_values is None:
            return KVCache(layers) if use_cache else None
        if not isinstance(past_key_values, KVCache) or len(past_key_values) != layers:
            raise BertkitError(f"past_key_values must be the bertkit KVCache this {layers}-layer decoder returned "
                               "(pass use_cache=True on the first call)")
        return past_key_values

    def check_inputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, past: int = 0) -> None:
        """Turn the usual user mistakes into messages instead of index errors deep in torch.
        `past`: positions already in a decoder's KV cache (they count towards the length)."""
        check_tensors(input_ids, attention_mask)
        if input_ids.dim() != 2:
            raise BertkitError(f"input_ids must have shape (batch, sequence), got {tuple(input_ids.shape)}")
        if past + input_ids.shape[1] > self.config.max_sequence_length:
            raise BertkitError(
                f"sequence length {past + input_ids.shape[1]} exceeds max_position_embeddings "
                f"({self.config.max_position_embeddings} rows: at most {self.config.max_sequence_length} "
                f"tokens); tokenize with truncation and max_length={self.config.max_sequence_length}")
        check_token_ids(input_ids, self.config.vocab_size)
        if attention_mask is not None and attention_mask.shape != (input_ids.shape[0], past + input_ids.shape[1]):
            raise BertkitError(f"attention_mask shape {tuple(attention_mask.shape)} differs from "
                               f"input_ids shape {tuple(input_ids.shape)}"
                               + (f" plus the {past} cached positions" if past else ""))

    def last_layer_prunable(self, head_mask, output_attentions, output_hidden_states) -> bool:
        """Whether the last layer may run on a subset of query positions: not when every
        position's output is returned, nor for switches whose attention or feed-forward depends
        on all query positions (each switch says: relative positions, DeBERTa, block-sparse, MoE
        routing, ...), nor for a decoder (its causal mask places queries by their position among
        the last M)."""
        return (head_mask is None and not output_attentions and not output_hidden_states
                and not self.config.is_decoder and not needs_every_query(self.config))

    def expand_head_mask(self, head_mask: torch.Tensor | None) -> torch.Tensor | None:
        """(h,) or (layers, h) of 0/1 -> (layers, 1, h, 1, 1), broadcastable over probabilities."""
        if head_mask is None:
            return None
        if head_mask.dim() == 1:
            head_mask = head_mask.unsqueeze(0).expand(self.config.num_hidden_layers, -1)
        return head_mask[:, None, :, None, None].to(self.embeddings.word_embeddings.weight.dtype)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.word_embeddings

    def set_gradient_checkpointing(self, enabled: bool = True) -> None:
        self.encoder.gradient_checkpointing = enabled

    def compile_layers(self, **options) -> None:
        """`torch.compile` each transformer layer (options go to it), so the LayerNorms, GELU,
        dropouts and residual adds around the matmuls run fused. Embeddings, input checks and
        heads stay eager: they branch on data and see varying shapes (labelled positions).
        Same numbers; the first calls pay the compilation (about a minute on a CPU)."""
        compile_each(self.encoder.layer, **options)


def gather_positions(hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """(B, T, H) states, (B, M) positions -> (B, M, H): hidden[b, positions[b, j]]."""
    return hidden.gather(1, positions.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))


def check_tensors(input_ids: Any, attention_mask: Any) -> None:
    """input_ids (and attention_mask, when given) are integer torch tensors: a list or an array
    failed deep inside as "'list' object has no attribute 'dim'". Cheap on every call: an
    isinstance and a dtype test each."""
    for name, value in (("input_ids", input_ids), ("attention_mask", attention_mask)):
        if value is None and name == "attention_mask":
            continue
        if not isinstance(value, torch.Tensor):
            raise BertkitError(f"{name} must be a torch tensor of shape (batch, sequence), got {type(value).__name__}; "
                               "tokenize with bertkit's Tokenizer (tok(texts) returns tensors) or transformers' with "
                               f"return_tensors='pt', or wrap it: torch.tensor({name})")
        if value.is_floating_point() and name == "input_ids":
            raise BertkitError(f"input_ids must hold integer token ids, got a {value.dtype} tensor; "
                               "pass the tokenizer's ids (torch.long)")


def check_token_ids(input_ids: torch.Tensor, vocab_size: int) -> None:
    """Every id in [0, vocab_size), else a message naming a bad one (an index error deep in torch
    otherwise, a device-side assert on a GPU). The range is read in one host read: on a GPU each
    read waits for the work queued before it."""
    if not input_ids.numel():
        return
    low, high = torch.stack(torch.aminmax(input_ids)).tolist()
    if low < 0 or high >= vocab_size:
        raise BertkitError(f"token id {low if low < 0 else high} is outside the model's vocabulary of "
                           f"{vocab_size}; the tokenizer does not fit this model")


def attention_bias(attention_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """0/1 padding mask (B, T) -> additive bias (B, 1, 1, T): 0 to attend, a huge negative to skip.

    Returns None when nothing is padded, which lets SDPA pick its fastest kernel.
    """
    if attention_mask is None or bool(attention_mask.all()):
        return None
    bias = torch.zeros(attention_mask.shape, dtype=dtype, device=attention_mask.device)
    bias.masked_fill_(attention_mask == 0, torch.finfo(dtype).min)
    return bias[:, None, None, :]
