"""Mixture-of-experts feed-forward (Shazeer et al. 2017; GShard; Switch Transformer).

`num_experts` E feed-forward networks replace the layer's one; a linear router scores each
token, p = softmax(x W_r) over the E experts, and the token goes to its top `moe_top_k` experts
with the chosen probabilities renormalised to sum to 1 (gates g):

    ffn(x) = sum_{e in topk(p)} g_e * (act(x W1_e + b1_e) W2_e + b2_e)
    out    = LayerNorm(dropout(ffn(x)) + x)                  (the post-LN sub-layer, as BERT's)

Capacity: with `moe_capacity_factor` c every expert takes at most C = ceil(c * N * k / E) of the
N real tokens' N*k assignments, first choices before second choices, earlier tokens first. An
assignment past C is dropped; a token whose every assignment is dropped gets ffn(x) = 0, so it
passes through on the residual. c = None: no limit (no token is ever dropped).

Load balancing (Switch eq. 4, over real tokens, before capacity):

    aux = E * sum_e f_e * P_e,   f_e = share of the N*k assignments routed to e,
                                 P_e = mean router probability of e

It is 1 when routing is uniform and grows as it collapses; the model output carries
`moe_aux_loss_coef * sum over MoE layers of aux`, which the heads add to their loss.

Padding tokens are not routed (they take no capacity and do not count in the aux loss):
`BertModel.forward` hands the attention mask to every MoE layer through `begin_forward`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.models.activations import activation
from bertkit.models.dropout import Dropout
from bertkit.errors import ConfigError


def validate(config) -> None:
    """Experts, top-k, capacity, the aux-loss weight and which layers: each in its range."""
    if config.num_experts is None:
        return
    if not isinstance(config.num_experts, int) or config.num_experts < 1:
        raise ConfigError(f"num_experts must be a positive integer (or unset for a dense "
                          f"feed-forward), got {config.num_experts!r}")
    if not 1 <= config.moe_top_k <= config.num_experts:
        raise ConfigError(f"moe_top_k ({config.moe_top_k}) must be between 1 and num_experts "
                          f"({config.num_experts}): a token cannot go to more experts than exist")
    if config.moe_capacity_factor is not None and config.moe_capacity_factor <= 0:
        raise ConfigError(f"moe_capacity_factor must be > 0 (1.0-1.25 is usual) or unset for "
                          f"no limit, got {config.moe_capacity_factor}")
    if config.moe_aux_loss_coef < 0:
        raise ConfigError(f"moe_aux_loss_coef must be >= 0, got {config.moe_aux_loss_coef}")
    if not 1 <= config.moe_every <= config.num_hidden_layers:
        raise ConfigError(f"moe_every ({config.moe_every}) must be between 1 (every layer) and "
                          f"num_hidden_layers ({config.num_hidden_layers})")
    if config.moe_every > 1 and config.shares_layers:
        raise ConfigError(
            "shared layers must all have the same shape, but moe_every > 1 mixes MoE and dense "
            "layers; use moe_every = 1 with num_hidden_groups, or drop the sharing")


def is_moe_layer(config, index: int) -> bool:
    """MoE in every `moe_every`-th layer (1 = all layers), counting from the first."""
    return bool(config.num_experts) and (index + 1) % config.moe_every == 0


class MoEFeedForward(nn.Module):
    """Experts' weights are stacked: w_in (E, I, H), w_out (E, H, I), laid out as nn.Linear's."""

    def __init__(self, config):
        super().__init__()
        experts, hidden, inner = config.num_experts, config.hidden_size, config.intermediate_size
        self.num_experts, self.top_k = experts, config.moe_top_k
        self.capacity_factor = config.moe_capacity_factor
        self.router = nn.Linear(hidden, experts, bias=False)
        std = config.initializer_range
        self.w_in = nn.Parameter(torch.randn(experts, inner, hidden) * std)
        self.b_in = nn.Parameter(torch.zeros(experts, inner))
        self.w_out = nn.Parameter(torch.randn(experts, hidden, inner) * std)
        self.b_out = nn.Parameter(torch.zeros(experts, hidden))
        self.act = activation(config.hidden_act)
        self.dropout = Dropout(config.hidden_dropout_prob)
        self.LayerNorm = nn.LayerNorm(hidden, eps=config.layer_norm_eps)
        self.token_mask: torch.Tensor | None = None  # (B, T) 1 = real token, set per forward
        self.aux_losses: list[torch.Tensor] = []  # one per application (shared layers: several)
        self.dropped_fraction: float = 0.0  # share of assignments dropped by capacity, last call

    def capacity(self, num_tokens: int) -> int:
        if self.capacity_factor is None:
            return num_tokens  # an expert can never receive more than every token once
        return max(1, math.ceil(self.capacity_factor * num_tokens * self.top_k / self.num_experts))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        batch, seq_len, width = hidden.shape
        x = hidden.reshape(-1, width)
        real = (torch.ones(x.shape[0], dtype=torch.bool, device=x.device) if self.token_mask is None
                else self.token_mask.reshape(-1).bool())
        probs = self.router(x).float().softmax(dim=-1)  # (N, E); fp32 routing, as Switch
        top_p, top_e = probs.topk(self.top_k, dim=-1)  # (N, k)
        gates = (top_p / top_p.sum(-1, keepdim=True)).to(x.dtype)

        # Assignments in priority order: every token's 1st choice, then every 2nd choice, ...
        expert = top_e.T.reshape(-1)  # (k*N,)
        token = torch.arange(x.shape[0], device=x.device).repeat(self.top_k)
        gate = gates.T.reshape(-1)
        routed = real.repeat(self.top_k)
        onehot = F.one_hot(expert, self.num_experts) * routed[:, None]  # padding takes no slot
        slot = (onehot.cumsum(dim=0) * onehot).sum(-1) - 1  # position in its expert's queue
        keep = routed & (slot < self.capacity(int(real.sum())))
        self.dropped_fraction = 1.0 - float(keep.sum()) / max(1, int(routed.sum()))

        out = torch.zeros_like(x)
        for e in range(self.num_experts):
            chosen = keep & (expert == e)
            rows = token[chosen]
            h = F.linear(self.act(F.linear(x[rows], self.w_in[e], self.b_in[e])), self.w_out[e], self.b_out[e])
            out.index_add_(0, rows, h * gate[chosen, None])

        self.aux_losses.append(load_balancing_loss(probs[real], onehot[routed].float(), self.top_k))
        return self.LayerNorm(self.dropout(out.view(batch, seq_len, width)) + hidden)


def load_balancing_loss(probs: torch.Tensor, assignments: torch.Tensor, top_k: int) -> torch.Tensor:
    """E * sum_e f_e P_e. probs (N, E) router softmax; assignments (k*N, E) one-hot choices."""
    num_experts = probs.shape[-1]
    if probs.shape[0] == 0:
        return probs.sum() * 0.0
    f = assignments.sum(0) / assignments.shape[0]  # share of the N*k assignments per expert
    p = probs.mean(0)
    return num_experts * (f * p).sum()


def begin_forward(model: nn.Module, attention_mask: torch.Tensor | None) -> None:
    """Give every MoE layer this batch's padding mask and clear its aux losses."""
    for module in model.modules():
        if isinstance(module, MoEFeedForward):
            module.token_mask = attention_mask
            module.aux_losses = []


def collect_aux_loss(model: nn.Module, coef: float) -> torch.Tensor | None:
    """coef * the sum of every MoE layer's load-balancing losses of this forward (None: no MoE)."""
    losses = [loss for m in model.modules() if isinstance(m, MoEFeedForward) for loss in m.aux_losses]
    for m in model.modules():
        if isinstance(m, MoEFeedForward):
            # the mask stays: gradient checkpointing re-runs the layers in backward
            m.aux_losses = []
    return coef * torch.stack(losses).sum() if losses else None
