"""Analysis of BERT-family encoders: attention maps and viewer, probing, scaling laws.

Everything here works on plain arrays of the model's output contract: one example's attention
as (layers, heads, T, T) and hidden states as a tuple of (batch, T, hidden) tensors, so it
does not depend on the model's internals.
"""

from bertkit.analysis.attention import (
    attention_flow,
    attention_rollout,
    head_statistics,
    max_flow,
    plot_grid,
    plot_head,
    stack_attentions,
    statistics_records,
)
from bertkit.analysis.viewer import render_attention_html, write_attention_html

__all__ = [
    "attention_flow",
    "attention_rollout",
    "head_statistics",
    "max_flow",
    "plot_grid",
    "plot_head",
    "render_attention_html",
    "stack_attentions",
    "statistics_records",
    "write_attention_html",
]
