"""The fine-tune's last step with `train.blend_tfidf=true`: the saved classifier's dev
probabilities (a regression's values) blended with its TF-IDF baseline's, the weight chosen on dev, and the TF-IDF model
saved beside the encoder when the blend beats the encoder alone (bertkit/tasks/tfidf_blend.py).

It runs after the model and the baseline are saved, on the model as saved (the best checkpoint,
read back from the run's directory), and Ctrl-C while it runs skips it: the encoder stays, alone.
"""

from __future__ import annotations

from typing import Sequence

from bertkit.errors import ConfigError
from bertkit.recipes.decision import saved_dev_predictions
from bertkit.tasks.baseline import sklearn_available
from bertkit.tasks.common import clean_metrics
from bertkit.tasks.tfidf_blend import WEIGHTS, choose_blend

BLENDED_TASKS = ("classification", "multi-label-classification", "regression")
SKIPPED = "TF-IDF blend: skipped (Ctrl-C while it was chosen); the encoder is saved alone"


def check_blend(task_name: str, search: bool = False) -> None:
    """Before any work: train.blend_tfidf needs a classifier or a regression, scikit-learn and one run."""
    if task_name not in BLENDED_TASKS:
        raise ConfigError(f"train.blend_tfidf blends a classifier's probabilities or a regression's "
                          f"values; --task {task_name} has none to blend: drop train.blend_tfidf")
    if not sklearn_available():
        raise ConfigError("train.blend_tfidf fits the TF-IDF model with scikit-learn, which is missing: "
                          "pip install 'bertkit[baseline]'")
    if search:
        raise ConfigError("train.blend_tfidf with --search: the trials share one TF-IDF fit and compare the encoders "
                          "alone; run the search without it, then fine-tune its chosen settings once more with "
                          "--set train.blend_tfidf=true")


def blend_entry(run_dir: str, task_name: str, train: Sequence, dev: Sequence, tfidf: dict | None, metric: str,
                tie: str | None) -> dict:
    """The summary's `tfidf_blend`: {"weight", "dev": metrics of the blend, "grid": [{weight, metrics}]}
    with the blend saved in `run_dir` when its weight is above 0, or {"note": why none}."""
    if not tfidf or "value" not in tfidf:
        return {"note": "TF-IDF blend: none, " + (tfidf or {}).get("note", "no TF-IDF baseline was fitted")}
    try:
        predictions, labels = saved_dev_predictions(run_dir, dev)
        blend, grid = choose_blend(task_name, train, dev, tfidf["value"], predictions, labels, metric, tie)
        if blend.weight > 0:
            blend.save(run_dir)
    except KeyboardInterrupt:
        return {"note": SKIPPED}
    grid = [clean_metrics(row) for row in grid]
    chosen = next(row for row in grid if row["weight"] == blend.weight and row.get("threshold", 0.5) == blend.threshold)
    threshold = {"threshold": blend.threshold} if blend.multi_label else {}
    return {"weight": blend.weight, **threshold, "weights": list(WEIGHTS), "select_metric": metric,
            "dev": {k: v for k, v in chosen.items() if k not in ("weight", "threshold")}, "grid": grid}
