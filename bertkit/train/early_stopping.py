"""Early stopping on an evaluation metric, with the best model kept (fine-tuning and pre-training).

After every evaluation `BestKeeper.update` compares the metric with the best value so far. With
sign = -1 when lower is better (a loss) and +1 otherwise, an evaluation improves when

    sign * value > sign * best + min_delta                                   (a better score)
    or, given a tie metric t (a loss: lower wins),
    sign * value == sign * best  and  t < t_best                             (a tie, settled by t)

and then the model is saved to the best directory (a complete model directory, swapped in
atomically). After `patience` evaluations in a row without improvement it answers "stop"
(patience 0: never). A NaN metric never improves, nor wins a tie; a tie metric that is missing or
NaN never wins a tie and loses one to any measured value. The `Trainer` calls it after each
evaluation when given one (`Trainer(..., keeper=...)`) and replays the logged evaluations of a
resumed run (metrics.jsonl holds each float exactly), so patience, the best value and every tie
decision survive an interruption.

Why a tie metric: a score counted over a small dev set ties often (accuracy over 223 BBC dev
articles moves in steps of 1/223; a fine-tune in docs/results.md kept its first-epoch checkpoint
because the later checkpoints only tied its score), and the first of equal scores is then a
barely trained model. The dev loss measures the same model more finely (how sure it is of the
right answers), so fine-tuning settles ties of its selected score by it (recipes/finetune.py).
A tie is exact equality, not "within min_delta": scores counted over the same examples tie
exactly, and a tolerance band would let a lower score win on the loss (a run of such wins could
walk the kept score down by a band each time). So with min_delta > 0 a gain smaller than
min_delta is neither an improvement nor a tie.

Pre-training sets it in an `[early_stopping]` section (`EarlyStoppingSection`): patience,
min_delta and the held-out metric (default `mlm_loss`); the best model lands in OUT/best.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from torch import nn

from bertkit.errors import ConfigError
from bertkit.io import atomic_directory


class BestKeeper:
    """Early stopping on `metric` and the best model kept in `best_dir` (default OUT/.best).

    `setting` names the config key that chose the metric, for the error when it is not measured.
    `tie_metric` (None: the first of equal values stays) is a lower-is-better metric that decides
    between evaluations whose `metric` is exactly equal; a tie won counts as an improvement (the
    model is saved, patience starts again).
    """

    def __init__(self, out_dir: str, metric: str, patience: int, tokenizer, lower_is_better: bool = False,
                 min_delta: float = 0.0, best_dir: str | None = None, setting: str = "train.select_metric",
                 tie_metric: str | None = None):
        self.out_dir = out_dir
        self.metric = metric
        self.sign = -1.0 if lower_is_better else 1.0  # compare sign * value, higher wins
        self.patience = patience
        self.min_delta = min_delta
        self.tokenizer = tokenizer
        self.best_dir = best_dir or os.path.join(out_dir, ".best")
        self.setting = setting
        self.tie_metric = tie_metric
        self.best_value = -math.inf
        self.best_tie = math.inf  # the tie metric of the best evaluation
        self.best_step: int | None = None
        self.best_metrics: dict = {}
        self.bad_evals = 0
        self.history: list[dict] = []

    def update(self, model: nn.Module, step: int, metrics: dict) -> bool:
        """Record one evaluation; save the model when it is the best so far. True = stop."""
        if self._record(step, metrics):
            self._save(model)
        return self.should_stop

    @property
    def should_stop(self) -> bool:
        return bool(self.patience) and self.bad_evals >= self.patience

    def replay(self, rows: list[dict]) -> None:
        """Take up the evaluations a resumed run logged before its checkpoint (rows of
        metrics.jsonl with split "eval"), without saving: the best model is already on disk."""
        for row in rows:
            if row.get("split") == "eval" and self.metric in row:
                # train_seconds: the trainer's clock in the row, not a measure; the live run never sees it
                self._record(row["step"], {k: v for k, v in row.items()
                                           if k not in ("step", "split", "train_seconds")})

    def _record(self, step: int, metrics: dict) -> bool:
        """Update the best value and the count of evaluations without gain; True = improved."""
        if self.metric not in metrics:
            measured = ", ".join(sorted(metrics)) or "none (is there held-out data?)"
            raise ConfigError(f"{self.setting}={self.metric!r} is not a metric of this evaluation; "
                              f"measured: {measured}")
        self.history.append({"step": step, **metrics})
        value = metrics[self.metric]
        value = -math.inf if _unmeasured(value) else self.sign * value
        tie = metrics.get(self.tie_metric) if self.tie_metric else None
        tie = math.inf if _unmeasured(tie) else tie
        better = value > self.best_value + self.min_delta
        won_tie = value == self.best_value and value > -math.inf and tie < self.best_tie
        if self.best_step is None or better or won_tie:
            self.best_value, self.best_tie, self.best_step, self.best_metrics = value, tie, step, dict(metrics)
            self.bad_evals = 0
            return True
        self.bad_evals += 1
        return False

    def _save(self, model: nn.Module) -> None:
        with atomic_directory(self.best_dir, prefix=".tmp-best-") as tmp:
            model.save_pretrained(tmp, tokenizer=self.tokenizer)


def _unmeasured(value) -> bool:
    return value is None or math.isnan(value)


@dataclass
class EarlyStoppingSection:
    """`[early_stopping]` of a pre-training config: stop when the held-out metric stops improving.

    Evaluations happen every `train.eval_every` steps; patience counts evaluations, not steps.
    """

    patience: int = 0  # evaluations without an improvement of at least min_delta; 0 = off
    min_delta: float = 0.0  # the least change of the metric that counts as an improvement
    metric: str = "mlm_loss"  # a held-out metric; losses and perplexity are minimised, others maximised

    def __post_init__(self) -> None:
        if not isinstance(self.patience, int) or isinstance(self.patience, bool) or self.patience < 0:
            raise ConfigError(f"early_stopping.patience must be an integer >= 0 (0 = off), got {self.patience!r}")
        if not (isinstance(self.min_delta, (int, float)) and self.min_delta >= 0):
            raise ConfigError(f"early_stopping.min_delta must be a number >= 0, got {self.min_delta!r}")
        named = [f"early_stopping.{key}" for key, unset in (("metric", "mlm_loss"), ("min_delta", 0))
                 if getattr(self, key) != unset]
        if named and not self.patience:  # walk X: metric=letter_accuracy alone ran on, no OUT/best, nothing said
            raise ConfigError(f"{' and '.join(named)} {'are' if len(named) > 1 else 'is'} read only by early "
                              "stopping, which early_stopping.patience = 0 (the default) leaves off: set "
                              "early_stopping.patience = N (evaluations without improvement before stopping; the "
                              f"best model is kept in OUT/best), or drop {' and '.join(named)}")

    @property
    def lower_is_better(self) -> bool:
        return self.metric.endswith(("loss", "perplexity"))

    def keeper(self, out_dir: str, tokenizer) -> BestKeeper | None:
        """The BestKeeper for a run into `out_dir` (best model in OUT/best), or None when off."""
        if not self.patience:
            return None
        return BestKeeper(out_dir, self.metric, self.patience, tokenizer, self.lower_is_better,
                          self.min_delta, os.path.join(out_dir, "best"), "early_stopping.metric")
