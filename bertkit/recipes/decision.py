"""The fine-tune's decision threshold: for a task that decides at p >= t (multi-label: a class is in
a text's set when its sigmoid probability reaches t), t chosen on dev after training, on the model as
saved, from tasks/baseline.py's THRESHOLDS by the select metric (then the tie metric; 0.5 first, so
a tie keeps it), and recorded in the run's spec: predict and evaluate decide at it.

Why: a head trained with binary cross-entropy on rare labels is unsure of them, and at 0.5 it
leaves them out: TF-IDF's one-vs-rest regressions needed t = 0.15 on GCIDE subject fields
(docs/results.md, "Multi-label"); the fine-tuned model's own t is measured there too. Training,
and the checkpoint kept, do not depend on t. Ctrl-C while it is chosen keeps 0.5.
"""

from __future__ import annotations

import warnings
from typing import Sequence

from bertkit.tasks import load_for_inference, predict_examples
from bertkit.tasks.baseline import THRESHOLDS, better_result
from bertkit.tasks.common import TruncationWarning, clean_metrics, model_labels
from bertkit.tasks.spec import Task

SKIPPED = "decision threshold: 0.5 kept (Ctrl-C while it was chosen)"


def saved_dev_predictions(run_dir: str, dev: Sequence) -> tuple[list, list[str]]:
    """(the predictions of the model saved in `run_dir` for `dev`, its labels in order)."""
    model, tokenizer, spec = load_for_inference(run_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)  # said of the dev split once, in training
        predictions = predict_examples(model, tokenizer, spec, dev, name="dev")
    return predictions, model_labels(model)


def choose_threshold(task: Task, dev: Sequence, predictions: Sequence, metric: str,
                     tie: str | None) -> tuple[float, list[dict]]:
    """(the threshold of THRESHOLDS that scores best on dev by `metric` then `tie`, [{"threshold": t,
    **dev metrics}] for each t tried, in order)."""
    best, chosen, tried = None, 0.5, []
    for threshold in THRESHOLDS:
        metrics = task.metrics(dev, task.at_threshold(predictions, threshold))
        tried.append({"threshold": threshold, **clean_metrics(metrics)})
        if better_result(task, metric, tie, metrics, best):
            best, chosen = metrics, threshold
    return chosen, tried


def threshold_entry(run_dir: str, task: Task, dev: Sequence, metric: str, tie: str | None) -> dict:
    """The summary's `decision_threshold`: {"threshold": t, "select_metric", "dev": metrics at t,
    "grid": [{threshold, metrics}]}, or {"note": why 0.5 stays}."""
    try:
        predictions, _ = saved_dev_predictions(run_dir, dev)
        threshold, grid = choose_threshold(task, dev, predictions, metric, tie)
    except KeyboardInterrupt:
        return {"note": SKIPPED}
    chosen = next(row for row in grid if row["threshold"] == threshold)
    return {"threshold": threshold, "select_metric": metric,
            "dev": {k: v for k, v in chosen.items() if k != "threshold"}, "grid": grid}
