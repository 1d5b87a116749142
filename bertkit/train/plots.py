"""Training curves as a PNG: loss (train and eval), eval accuracies (and ranking scores), learning rate vs step.

With a pre-training run's baseline (OUT/baseline.json, see train/evaluate.unigram_baseline)
the context-free references are drawn as dashed lines: the unigram loss and the accuracy of
always predicting the most frequent token."""

from __future__ import annotations

from typing import IO

from bertkit.runtime.plotting import pyplot


def plot_curves(rows: list[dict], out: IO[bytes], baseline: dict | None = None) -> None:
    """Draw the metric rows of a run (metrics.jsonl) into `out` as PNG."""
    plt = pyplot()

    train = [r for r in rows if r.get("split") == "train"]
    evals = [r for r in rows if r.get("split") == "eval"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    ax = axes[0]
    if train:
        ax.plot([r["step"] for r in train], [r["loss"] for r in train], label="train loss")
    for key in ("mlm_loss", "loss"):
        points = [(r["step"], r[key]) for r in evals if key in r]
        if points:
            ax.plot(*zip(*points), "o-", label=f"eval {key}")
            break
    if baseline and "unigram_loss" in baseline:
        ax.axhline(baseline["unigram_loss"], color="grey", linestyle="--", label="unigram loss")
    ax.set_xlabel("step")
    ax.set_title("loss")
    if ax.get_legend_handles_labels()[0]:  # (an evaluation at step 0 comes before any train row)
        ax.legend()
    ax = axes[1]
    keys = sorted({k for r in evals for k in r
                   if k.endswith("accuracy") or k in ("f1", "exact") or k.startswith(("mrr@", "recall@"))})
    for key in keys:
        points = [(r["step"], r[key]) for r in evals if key in r]
        ax.plot(*zip(*points), "o-", label=key)
    if baseline and "most_frequent_token_accuracy" in baseline:
        ax.axhline(baseline["most_frequent_token_accuracy"], color="grey", linestyle="--",
                   label=f"most frequent token ({baseline.get('most_frequent_token', '?')})")
    ax.set_ylim(bottom=0)  # accuracies and their baseline on an honest scale
    ax.set_xlabel("step")
    ax.set_title("eval")
    if ax.get_legend_handles_labels()[0]:  # accuracies or the baseline were drawn
        ax.legend()
    ax = axes[2]
    if train:
        ax.plot([r["step"] for r in train], [r["lr"] for r in train])
    ax.set_xlabel("step")
    ax.set_title("learning rate")
    fig.tight_layout()
    fig.savefig(out, format="png", dpi=90)
    plt.close(fig)
