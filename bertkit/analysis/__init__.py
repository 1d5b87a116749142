"""Analysis of BERT-family encoders: attention maps and viewer, probing, scaling laws.

Everything here works on plain arrays of the model's output contract: one example's attention
as (layers, heads, T, T) (see `stack_attentions` for `out.attentions`) and hidden states as a
tuple of (batch, T, hidden) tensors, so it does not depend on the model's internals.
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
from bertkit.analysis.compute_frontier import (
    curve_points,
    fit_frontier,
    lower_envelope,
    optimal_size_exponent,
    optimal_sizes,
    training_compute,
)
from bertkit.analysis.probing import (
    LinearProbe,
    collect_features,
    control_task_labels,
    plot_probe,
    probe_layers,
)
from bertkit.analysis.scaling import (
    PowerLawFit,
    chinchilla_loss,
    chinchilla_optimal,
    fit_power_law,
    fit_sweep,
    kaplan_loss,
    kaplan_loss_d,
    kaplan_loss_n,
    load_sweep,
    plot_scaling,
    run_sweep,
)
from bertkit.analysis.viewer import render_attention_html, write_attention_html

__all__ = [
    "LinearProbe",
    "PowerLawFit",
    "attention_flow",
    "attention_rollout",
    "chinchilla_loss",
    "chinchilla_optimal",
    "collect_features",
    "control_task_labels",
    "curve_points",
    "fit_frontier",
    "fit_power_law",
    "fit_sweep",
    "head_statistics",
    "kaplan_loss",
    "kaplan_loss_d",
    "kaplan_loss_n",
    "load_sweep",
    "lower_envelope",
    "max_flow",
    "optimal_size_exponent",
    "optimal_sizes",
    "plot_grid",
    "plot_head",
    "plot_probe",
    "plot_scaling",
    "probe_layers",
    "render_attention_html",
    "run_sweep",
    "stack_attentions",
    "statistics_records",
    "training_compute",
    "write_attention_html",
]
