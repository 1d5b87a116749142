"""`Task`: everything bertkit knows about one fine-tuning task, in one declarative entry.

`bertkit finetune`, `evaluate`, `predict`, `distill` and `export` read a task only through its
entry (none of them tests a task's name), so a new task is one module that builds a `Task` plus
one line in `bertkit/tasks/registry.py` (or `register_task(...)` from your own code). The entry,
not its name, is what travels through the recipes. The life of an example:

    file --read--> examples --encode--> features --model--> outputs --decode--> predictions
    predictions --metrics--> {name: value}        predictions --rows--> JSON rows (predict)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from bertkit.models.checkpoint import read_config
from bertkit.models.families import family_of
from bertkit.tasks.common import DataConfig, PredictionInput, TaskSpec


@dataclass(frozen=True, eq=False)  # an entry is itself: compared and hashed by identity
class Task:
    """One fine-tuning task.

    name            what `--task` takes and what a fine-tuned model's summary records
    description     one line for `--help`
    model_class     the head class (`from_pretrained`, `save_pretrained`; HF-compatible)
    read            (path, data) -> labelled examples from a file
    read_inputs     (path, data) -> PredictionInput: unlabelled inputs for `bertkit predict`
    encode          (tokenizer, examples, data, label2id, training, name) -> features; training
                    features carry the targets (`label2id` maps label names to ids, or None)
    decode          (model, tokenizer, examples, spec, name, features=None) -> one prediction per
                    example, each from that example alone (`predict` decodes its inputs a chunk at
                    a time); `features` are the examples' `encode(..., training=False)` features when
                    the caller built them already (fine-tuning encodes the dev set once per run)
    metrics         (examples, predictions) -> {metric: value}
    baseline        (train examples, examples) -> the trivial predictor's metrics, with "method"
                    naming the predictor where the task chooses one (seq2seq: the lead or the
                    most frequent target)
    rows            (model, predictions, inputs) -> one JSON-ready dict per example
    metric_names    dev metrics; the first picks the best checkpoint unless told otherwise
    labels_of       examples -> every label they show (None: the task has no label set)
    head_config     labels -> config changes of the head (num_labels, id2label, problem_type)
    architectures   config.json `architectures` entries that mean a model of this task
    lower_is_better metrics where lower wins (mse, loss)
    refine          training examples -> the Task they really need (classification data with
                    lists of labels is multi-label); None: the task itself
    build_model     (model_dir, task, labels, model overrides) -> the model to fine-tune; None: the
                    checkpoint's encoder with a fresh `head_class` head (recipes/finetune.py)
    head_classes    config.json model_type -> the head class for that model family, where it is not
                    `model_class`'s own counterpart (the family's `head_for`, bertkit/models/families.py)
    variants        the tasks `refine` may turn this one into (`--task classification` also
                    names a model fine-tuned on multi-label data)
    class_weights   whether train.class_weights="balanced" applies (one softmax per label position)
    allows_no_answer training examples -> whether predictions may be "no answer" (SQuAD 2.0)
    model_keys      [model] keys `build_model` reads that are no config field (seq2seq's
                    decoder_layers); another task refuses them
    blank_row       an input example that is blank -> the row `predict` writes for it: the task's
                    keys with null values
    file_only       the reader takes files only, not a Hugging Face data set name
    distiller       (student, teacher, alpha, temperature) -> the module whose forward gives the
                    distillation loss (bertkit/distill); None: the task is not distillable
    export_outputs  ONNX graph outputs: output attribute of the model -> its dynamic axes, in order
                    ("batch", "sequence"); empty: no ONNX export (bertkit/inference/onnx.py)
    reference       examples -> {"method": name, **metrics} of the strongest simple method that
                    needs no training, on the evaluated examples (retrieval: BM25); reported beside
                    the score by finetune and evaluate. None: the task has none (classification's
                    TF-IDF baseline is fitted: bertkit/tasks/baseline.py)
    peft            whether `--peft` applies: an adapter file names its head class for PEFT (an
                    embedding model has none: it trains whole); or the methods that do, by name
                    (an encoder-decoder: ("lora",))
    freeze_encoder  whether `model.freeze_encoder` applies: the model has a head apart from its
                    encoder to train alone (a sentence model is its encoder: frozen, nothing trains;
                    an encoder-decoder freezes its encoder half, and its decoder trains)
    starts_trained  the checkpoint is already a model of this task (an embedding model): fine-tuning
                    scores it on dev before the first step (train.eval_at_start), and keeps it when
                    no later evaluation beats it
    per_class       (examples, predictions) -> {class: {"precision", "recall", "f1", "support"}}
                    (`evaluate --per-class`); None: the task has no classes to report
    check_data      what finetune's hint asks the user to look at when the model is not above the
                    trivial baseline on dev
    at_threshold    (predictions, t) -> the same predictions deciding at p >= t: finetune chooses t on
                    dev after training (multi-label: a class is in the set at p >= t; recipes/decision.py)
                    and records it in the spec; None: the task decides without a threshold
    pairs_by_name   the reader takes data.pair_column's second text, and finetune reads a training table's
                    column named "text_pair" as it when data.pair_column is unset (classification, regression)
    baseline_reads  (tokenizer, examples, data) -> keyword arguments of `baseline` that hold its
                    scores to what the model reads of `examples`, so both are scored on the same
                    words (token classification: the words truncation leaves); None: it needs none
    baseline_predict (train examples, examples, **baseline_reads) -> the predictions `baseline` scores, where
                    they are worth a per-class report: `evaluate --per-class` sets their F1 beside each class's
                    when no TF-IDF baseline is fitted (token classification: the word lookup's per type);
                    None: the trivial baseline's classes are not shown
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
    refine: Callable[[Sequence], "Task"] | None = None
    build_model: Callable[..., Any] | None = None
    head_classes: Mapping[str, type] = field(default_factory=dict)
    variants: tuple["Task", ...] = ()
    class_weights: bool = False
    allows_no_answer: Callable[[Sequence], bool] = field(default=lambda train: True)
    model_keys: tuple[str, ...] = ()
    blank_row: Callable[[Any], dict] = field(default=lambda example: {})
    file_only: bool = False
    distiller: Callable[..., Any] | None = None
    export_outputs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    reference: Callable[[Sequence], dict] | None = None
    peft: bool | tuple[str, ...] = True
    freeze_encoder: bool = True
    starts_trained: bool = False
    per_class: Callable[[Sequence, Sequence], dict] | None = None
    # (model, training examples): start a newly built head where the training data says (regression: its mean)
    init_head: Callable[[Any, Sequence], None] | None = None
    check_data: str = "check the labels"
    baseline_reads: Callable[[Any, Sequence, DataConfig], dict] | None = None
    baseline_predict: Callable[..., list] | None = None
    selected_by: str = ""  # the dev metric that keeps a checkpoint unless train.select_metric names one ("": the first)
    at_threshold: Callable[[Sequence, float], list] | None = None
    pairs_by_name: bool = False

    @property
    def default_metric(self) -> str:
        return self.selected_by or self.metric_names[0]

    def head_class(self, model_dir: str) -> type:
        """The head class for the checkpoint in `model_dir`: `head_classes[its model_type]`, else
        `model_class`'s counterpart in the checkpoint's family (`ModelFamily.head_for`)."""
        config = read_config(model_dir)
        own = self.head_classes.get(config.model_type) if self.head_classes else None
        if own or isinstance(config, self.model_class.config_class):  # (an encoder-decoder reads its own)
            return own or self.model_class
        return family_of(config).head_for(self.model_class)

    def names(self, recorded: "Task") -> bool:
        """`--task self` names a model fine-tuned for `recorded`: the same task or one of its variants."""
        return recorded is self or recorded in self.variants


def label_head_config(problem_type: str | None) -> Callable[[list | None], dict]:
    """head_config of a task with named labels: num_labels, id2label, label2id, problem_type."""

    def head_config(labels: list | None) -> dict:
        id2label = dict(enumerate(labels or []))
        return {"num_labels": len(id2label), "id2label": id2label,
                "label2id": {name: i for i, name in id2label.items()}, "problem_type": problem_type}

    return head_config


__all__ = ["Task", "TaskSpec", "label_head_config"]
