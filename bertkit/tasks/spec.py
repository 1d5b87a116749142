"""`Task`: everything bertkit knows about one fine-tuning task, in one declarative entry.

`bertkit finetune`, `evaluate`, `predict` and `distill` read a task only through its entry, so
a new task is one module that builds a `Task` plus one line in `bertkit/tasks/registry.py`
(or `register_task(...)` from your own code). The life of an example:

    file --read--> examples --encode--> features --model--> outputs --decode--> predictions
    predictions --metrics--> {name: value}        predictions --rows--> JSON rows (predict)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from bertkit.tasks.common import DataConfig, PredictionInput, TaskSpec


@dataclass(frozen=True)
class Task:
    """One fine-tuning task.

    name            what `--task` takes and what a fine-tuned model's summary records
    description     one line for `--help`
    model_class     the head class (`from_pretrained`, `save_pretrained`; HF-compatible)
    read            (path, data) -> labelled examples from a file
    read_inputs     (path, data) -> PredictionInput: unlabelled inputs for `bertkit predict`
    encode          (tokenizer, examples, data, label2id, training, name) -> features; training
                    features carry the targets (`label2id` maps label names to ids, or None)
    decode          (model, tokenizer, examples, spec, name) -> one prediction per example
    metrics         (examples, predictions) -> {metric: value}
    baseline        (train examples, examples) -> the trivial predictor's metrics
    rows            (model, predictions, inputs) -> one JSON-ready dict per example
    metric_names    dev metrics; the first picks the best checkpoint unless told otherwise
    labels_of       examples -> every label they show (None: the task has no label set)
    head_config     labels -> config changes of the head (num_labels, id2label, problem_type)
    architectures   config.json `architectures` entries that mean a model of this task
    lower_is_better metrics where lower wins (mse, loss)
    refine          training examples -> the task they really need (classification data with
                    lists of labels is multi-label); None: the task itself
    build_model     (model_dir, task, labels, model overrides) -> the model to fine-tune; None: the
                    checkpoint's encoder with a fresh `model_class` head (recipes/finetune.py)
    """

    name: str
    description: str
    model_class: type
    read: Callable[[str, DataConfig], list]
    read_inputs: Callable[[str, DataConfig], PredictionInput]
    encode: Callable[..., list[dict]]
    decode: Callable[..., list]
    metrics: Callable[[Sequence, Sequence], dict]
    baseline: Callable[[Sequence, Sequence], dict]
    rows: Callable[[Any, Sequence, PredictionInput], list[dict]]
    metric_names: tuple[str, ...]
    labels_of: Callable[[Sequence], list] | None = None
    head_config: Callable[[list | None], dict] = field(default=lambda labels: {})
    architectures: tuple[str, ...] = ()
    lower_is_better: frozenset = frozenset()
    refine: Callable[[Sequence], str] | None = None
    build_model: Callable[..., Any] | None = None

    @property
    def default_metric(self) -> str:
        return self.metric_names[0]


def label_head_config(problem_type: str | None) -> Callable[[list | None], dict]:
    """head_config of a task with named labels: num_labels, id2label, label2id, problem_type."""

    def head_config(labels: list | None) -> dict:
        id2label = dict(enumerate(labels or []))
        return {"num_labels": len(id2label), "id2label": id2label,
                "label2id": {name: i for i, name in id2label.items()}, "problem_type": problem_type}

    return head_config


__all__ = ["Task", "TaskSpec", "label_head_config"]
