"""Inference, metrics and prediction rows for fine-tuned models.

One path serves dev evaluation during fine-tuning, `bertkit evaluate` and `bertkit predict`:

    examples --features.encode_*--> features --forward_features--> logits per feature
             --> task decoding (argmax / sigmoid / word tags / best span) --> metrics or rows

A fine-tuned model directory says what it is: `finetune_summary.json` (written by
`bertkit finetune`) holds the task and the data settings it was trained with; without it the
task is read from config.json (`architectures`, `problem_type`), with default data settings.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from bertkit.config import BertConfig
from bertkit.errors import CheckpointError, ConfigError
from bertkit.heads import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification
from bertkit.tasks.alignment import IGNORE_INDEX, word_predictions_from_tokens
from bertkit.tasks.features import (TASKS, Collator, DataConfig, encode_qa, encode_texts, encode_words,
                                    eval_order)
from bertkit.tasks.formats import QAExample, TextExample, TokenExample
from bertkit.tasks.metrics import (accuracy, entity_prf, entity_spans, macro_f1, micro_f1, pearson,
                                   spearman, squad_evaluate)
from bertkit.tasks.qa_spans import QAFeature, SpanPrediction, merge_features
from bertkit.tasks.realdata import tokenize_words

SUMMARY_FILE = "finetune_summary.json"
MODEL_CLASSES = {
    "classification": BertForSequenceClassification,
    "regression": BertForSequenceClassification,
    "token-classification": BertForTokenClassification,
    "qa": BertForQuestionAnswering,
}
ARCHITECTURE_TASKS = {
    "BertForSequenceClassification": "classification",
    "RobertaForSequenceClassification": "classification",
    "BertForTokenClassification": "token-classification",
    "RobertaForTokenClassification": "token-classification",
    "BertForQuestionAnswering": "qa",
    "RobertaForQuestionAnswering": "qa",
}
# The dev metric that picks the best checkpoint, per kind (higher is better for all).
DEFAULT_METRIC = {"classification": "accuracy", "multilabel": "micro_f1", "regression": "pearson",
                  "tagging": "f1", "qa": "f1"}
# Dev metrics each kind reports (QA also reports HasAns_/NoAns_ parts when both occur);
# all are "higher is better" except those in LOWER_IS_BETTER.
METRIC_NAMES = {"classification": ("accuracy", "macro_f1"), "multilabel": ("micro_f1", "macro_f1", "exact_match"),
                "regression": ("pearson", "spearman", "mse"),
                "tagging": ("f1", "precision", "recall", "tag_accuracy"), "qa": ("exact", "f1")}
LOWER_IS_BETTER = frozenset({"mse"})
PROBLEM_TYPES = {"classification": "single_label_classification",
                 "multilabel": "multi_label_classification", "regression": "regression"}


@dataclass
class TaskSpec:
    """What a fine-tuned model does and how its inputs are built.

    task  one of TASKS; kind  "classification" | "multilabel" | "regression" (sequence tasks),
    "tagging" (token classification) or "qa"; allow_no_answer  QA may answer "" (SQuAD 2.0).
    """

    task: str
    kind: str
    data: DataConfig = field(default_factory=DataConfig)
    allow_no_answer: bool = True

    def to_dict(self) -> dict:
        return {"task": self.task, "kind": self.kind, "data": self.data.to_dict(),
                "allow_no_answer": self.allow_no_answer}

    @classmethod
    def from_dict(cls, values: dict) -> "TaskSpec":
        data = DataConfig(**{k: v for k, v in values.get("data", {}).items()
                             if k in DataConfig.__dataclass_fields__})
        return cls(values["task"], values["kind"], data, bool(values.get("allow_no_answer", True)))


def kind_of_task(task: str, config: BertConfig | None = None) -> str:
    if task == "token-classification":
        return "tagging"
    if task == "qa":
        return "qa"
    if task == "regression":
        return "regression"
    if config is not None and config.problem_type == "multi_label_classification":
        return "multilabel"
    if config is not None and (config.problem_type == "regression" or
                               (config.problem_type is None and config.num_labels == 1)):
        return "regression"
    return "classification"


def check_task(task: str) -> str:
    if task not in TASKS:
        raise ConfigError(f"unknown task {task!r}; use one of {', '.join(TASKS)}")
    return task


# ---------------------------------------------------------------------------- loading
def read_spec(model_dir: str, task: str | None = None) -> TaskSpec:
    """The task of a model directory: its finetune_summary.json, else its config.json."""
    from bertkit.peft import adapter_task_config, is_adapter_dir

    config = adapter_task_config(model_dir) if is_adapter_dir(model_dir) else BertConfig.from_pretrained(model_dir)
    path = os.path.join(model_dir, SUMMARY_FILE)
    if os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as f:
                spec = TaskSpec.from_dict(json.load(f)["spec"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CheckpointError(f"{path} is unreadable ({e}); pass --task, or delete the file") from None
        if task is not None and check_task(task) != spec.task:
            raise ConfigError(f"--task {task} but {model_dir} was fine-tuned for {spec.task}; drop --task "
                              "or use a model fine-tuned for this task")
        return spec
    if task is None:
        found = [ARCHITECTURE_TASKS[a] for a in (config.architectures or []) if a in ARCHITECTURE_TASKS]
        if not found:
            raise ConfigError(f"{model_dir} has no {SUMMARY_FILE} and its config.json names no task head "
                              f"(architectures={config.architectures}); pass --task "
                              f"{'|'.join(TASKS)}")
        task = found[0]
    check_task(task)
    return TaskSpec(task, kind_of_task(task, config), DataConfig())


def load_model(model_dir: str, task: str) -> torch.nn.Module:
    """The task model of a fine-tuned directory, refusing one whose head was never trained."""
    import warnings

    from bertkit.peft import is_adapter_dir, load_peft_model

    cls = MODEL_CLASSES[task]
    if is_adapter_dir(model_dir):  # a PEFT adapter (`finetune --peft`): onto its recorded base
        model = load_peft_model(model_dir)
        if type(model.model) is not cls:
            raise ConfigError(f"{model_dir} is a {type(model.model).__name__} adapter, not a {task} model")
        return model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, report = cls.from_pretrained(model_dir, output_loading_info=True)
    head = [k for k in report.missing_keys if not k.startswith("bert.")]
    if head:
        raise CheckpointError(f"{model_dir} has no trained {task} head (missing {', '.join(head[:3])}); "
                              "fine-tune it first with `bertkit finetune`")
    return model


def model_labels(model) -> list[str]:
    """Label names in id order (LABEL_i when the config names none)."""
    config = model.config
    id2label = config.id2label or {}
    return [id2label.get(i, f"LABEL_{i}") for i in range(config.num_labels)]


# ---------------------------------------------------------------------------- forward
@torch.no_grad()
def forward_features(model, features: Sequence[dict], batch_size: int, pad_token_id: int) -> list:
    """Per feature, in input order: logits (C,) for sequence heads, (T, C) for token heads,
    or a (start, end) pair of (T,) arrays for QA, each cut to the feature's length."""
    collate = Collator(pad_token_id)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    outputs: list = [None] * len(features)
    try:
        for index in eval_order(features, batch_size):
            chunk = [features[i] for i in index]
            batch = collate([{k: f[k] for k in ("input_ids", "token_type_ids")} for f in chunk])
            out = model(**{k: v.to(device) for k, v in batch.items()})
            if hasattr(out, "start_logits"):  # QA (also through a PEFT wrapper)
                start = out.start_logits.float().cpu().numpy()
                end = out.end_logits.float().cpu().numpy()
                for row, i in enumerate(index):
                    n = len(features[i]["input_ids"])
                    outputs[i] = (start[row, :n], end[row, :n])
            else:
                logits = out.logits.float().cpu().numpy()
                token_level = logits.ndim == 3
                for row, i in enumerate(index):
                    outputs[i] = logits[row, :len(features[i]["input_ids"])] if token_level else logits[row]
    finally:
        model.train(was_training)
    return outputs


def _softmax(x: np.ndarray) -> np.ndarray:
    z = x - x.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# ---------------------------------------------------------------------------- sequence tasks
@dataclass
class SequenceResult:
    """Predictions of a sequence model: `predictions[i]` is a label name (classification), a
    list of names (multi-label) or a float (regression); `scores` are probabilities (N, C)
    or the raw values (N,)."""

    predictions: list
    scores: np.ndarray


def predict_sequences(model, tokenizer, examples: Sequence[TextExample], spec: TaskSpec,
                      name: str = "data") -> SequenceResult:
    features = encode_texts(tokenizer, examples, spec.data.max_length, name=name)
    logits = np.stack(forward_features(model, features, spec.data.eval_batch_size, tokenizer.pad_token_id))
    labels = model_labels(model)
    if spec.kind == "regression":
        values = logits[:, 0].astype(np.float64)
        return SequenceResult([float(v) for v in values], values)
    if spec.kind == "multilabel":
        probs = _sigmoid(logits.astype(np.float64))
        return SequenceResult([[labels[j] for j in np.flatnonzero(p >= 0.5)] for p in probs], probs)
    probs = _softmax(logits.astype(np.float64))
    return SequenceResult([labels[j] for j in probs.argmax(axis=1)], probs)


def sequence_metrics(kind: str, gold: Sequence, predictions: Sequence) -> dict:
    if kind == "regression":
        gold_values = np.asarray(gold, dtype=np.float64)
        pred_values = np.asarray(predictions, dtype=np.float64)
        return {"pearson": pearson(gold_values, pred_values), "spearman": spearman(gold_values, pred_values),
                "mse": float(np.mean((gold_values - pred_values) ** 2))}
    if kind == "multilabel":
        return {"micro_f1": micro_f1(gold, predictions), "macro_f1": macro_f1(gold, predictions),
                "exact_match": accuracy(gold, predictions)}
    return {"accuracy": accuracy(gold, predictions), "macro_f1": macro_f1(gold, predictions)}


def sequence_baseline(kind: str, train: Sequence[TextExample], gold: Sequence) -> dict:
    """A trivial predictor from the training labels: the majority class (classification), the
    empty label set (multi-label) or the training mean (regression; its correlations are
    undefined, so only mse is given)."""
    labels = [e.label for e in train]
    if kind == "regression":
        mean = float(np.mean(labels))
        return {"mse": float(np.mean((np.asarray(gold, dtype=np.float64) - mean) ** 2))}
    if kind == "multilabel":
        return sequence_metrics(kind, gold, [[] for _ in gold])
    majority = Counter(labels).most_common(1)[0][0]
    return sequence_metrics(kind, gold, [majority] * len(gold))


# ---------------------------------------------------------------------------- token tasks
def predict_tags(model, tokenizer, examples: Sequence[TokenExample], spec: TaskSpec,
                 name: str = "data") -> list[list[str]]:
    """Per sentence, one predicted tag per word: the tag of the word's first sub-word (words cut
    off by truncation get "O")."""
    features = encode_words(tokenizer, examples, spec.data.max_length, name=name)
    outputs = forward_features(model, features, spec.data.eval_batch_size, tokenizer.pad_token_id)
    labels = model_labels(model)
    result = []
    for example, feature, logits in zip(examples, features, outputs):
        word_ids = [None if w < 0 else int(w) for w in feature["word_ids"]]
        words = word_predictions_from_tokens(word_ids, logits.argmax(axis=-1), num_words=len(example.tokens))
        result.append(["O" if p == IGNORE_INDEX else labels[p] for p in words])
    return result


def tagging_metrics(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict:
    """Entity P/R/F1 (conlleval / seqeval default) and word-level tag accuracy."""
    scores = entity_prf(gold, predicted)
    total = sum(len(g) for g in gold)
    same = sum(a == b for g, p in zip(gold, predicted) for a, b in zip(g, p))
    return {"f1": scores["f1"], "precision": scores["precision"], "recall": scores["recall"],
            "tag_accuracy": same / max(1, total)}


def tagging_baseline(train: Sequence[TokenExample], gold: Sequence[TokenExample]) -> dict:
    """Word lookup: each word gets its most frequent training tag (lowercased match), else O."""
    counts: dict[str, Counter] = {}
    for example in train:
        for word, tag in zip(example.tokens, example.tags):
            counts.setdefault(word.lower(), Counter())[tag] += 1
    lookup = {word: c.most_common(1)[0][0] for word, c in counts.items()}
    predicted = [[lookup.get(w.lower(), "O") for w in e.tokens] for e in gold]
    # A looked-up I- tag after O still opens an entity under conlleval; that is fine for a baseline.
    return tagging_metrics([e.tags for e in gold], predicted)


def entities_with_spans(tags: Sequence[str], spans: Sequence[tuple[int, int]], text: str) -> list[dict]:
    out = []
    for kind, first, last in entity_spans(tags):
        start, end = spans[first][0], spans[last][1]
        out.append({"type": kind, "start": start, "end": end, "text": text[start:end]})
    return out


def words_of_text(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Words of raw text (as `realdata.tokenize_words` splits them) with character spans."""
    words = tokenize_words(text)
    spans, cursor = [], 0
    for word in words:
        start = text.index(word, cursor)
        spans.append((start, start + len(word)))
        cursor = start + len(word)
    return words, spans


# ---------------------------------------------------------------------------- QA
def predict_answers(model, tokenizer, examples: Sequence[QAExample], spec: TaskSpec,
                    name: str = "data") -> list[SpanPrediction]:
    """The best span (or no answer) of each question, over all windows of its context."""
    data = spec.data
    features = encode_qa(tokenizer, examples, data.max_length, data.doc_stride, name=name)
    outputs = forward_features(model, features, data.eval_batch_size, tokenizer.pad_token_id)
    by_example: list[list[QAFeature]] = [[] for _ in examples]
    for feature, (start, end) in zip(features, outputs):
        by_example[feature["example_index"]].append(
            QAFeature(start, end, feature["offsets"], feature["context_mask"]))
    return [merge_features(windows, example.context, data.null_threshold, spec.allow_no_answer,
                           data.n_best, data.max_answer_length)
            for example, windows in zip(examples, by_example)]


def qa_metrics(examples: Sequence[QAExample], predictions: Sequence[SpanPrediction]) -> dict:
    """SQuAD exact match and F1 (percent), with HasAns/NoAns parts when both kinds occur."""
    scores = squad_evaluate(examples, {e.id: p.text or "" for e, p in zip(examples, predictions)})
    return {k: float(v) for k, v in scores.items() if k != "missing"}


_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def qa_baseline(examples: Sequence[QAExample]) -> dict:
    """The first sentence of the context as the answer of every question."""
    predictions = {e.id: _SENTENCE_END.split(e.context, maxsplit=1)[0] for e in examples}
    scores = squad_evaluate(examples, predictions)
    return {k: float(v) for k, v in scores.items() if k != "missing"}


# ---------------------------------------------------------------------------- one entry point
def evaluate_examples(model, tokenizer, spec: TaskSpec, examples: Sequence, name: str = "data") -> dict:
    """The task's metrics of `model` on labelled `examples` (flat {name: float})."""
    if spec.kind == "tagging":
        return tagging_metrics([e.tags for e in examples], predict_tags(model, tokenizer, examples, spec, name))
    if spec.kind == "qa":
        return qa_metrics(examples, predict_answers(model, tokenizer, examples, spec, name))
    result = predict_sequences(model, tokenizer, examples, spec, name)
    return sequence_metrics(spec.kind, [e.label for e in examples], result.predictions)


def baseline_metrics(spec: TaskSpec, train: Sequence, examples: Sequence) -> dict:
    """The trivial baseline's metrics on `examples` (see the *_baseline functions)."""
    if spec.kind == "tagging":
        return tagging_baseline(train, examples)
    if spec.kind == "qa":
        return qa_baseline(examples)
    return sequence_baseline(spec.kind, train, [e.label for e in examples])


def prediction_rows(model, tokenizer, spec: TaskSpec, examples: Sequence, texts: Sequence[str] | None = None,
                    spans: Sequence | None = None, name: str = "input") -> list[dict]:
    """One JSON-ready dict per example.

    classification: {"label", "probabilities": {label: p}}; multi-label: {"labels", ...};
    regression: {"value"}; tagging: {"words", "tags", "entities": [{"type", "start", "end",
    "text"}]} with character offsets into `texts[i]` (word spans `spans[i]`; by default the
    words joined by spaces); QA: {"id", "answer", "start", "end", "score", "no_answer"}.
    """
    if spec.kind == "tagging":
        from bertkit.tasks.features import word_char_spans

        tags = predict_tags(model, tokenizer, examples, spec, name)
        rows = []
        for i, (example, row_tags) in enumerate(zip(examples, tags)):
            text, word_spans = word_char_spans(example.tokens)
            if texts is not None:
                text, word_spans = texts[i], spans[i]
            rows.append({"words": list(example.tokens), "tags": row_tags,
                         "entities": entities_with_spans(row_tags, word_spans, text)})
        return rows
    if spec.kind == "qa":
        answers = predict_answers(model, tokenizer, examples, spec, name)
        return [{"id": e.id, "answer": a.text or "", "start": a.start_char, "end": a.end_char,
                 "score": json_float(a.score), "no_answer": a.is_impossible}
                for e, a in zip(examples, answers)]
    result = predict_sequences(model, tokenizer, examples, spec, name)
    if spec.kind == "regression":
        return [{"value": json_float(v)} for v in result.predictions]
    labels = model_labels(model)
    key = "labels" if spec.kind == "multilabel" else "label"
    return [{key: pred, "probabilities": {l: round(float(p), 6) for l, p in zip(labels, probs)}}
            for pred, probs in zip(result.predictions, result.scores)]


def json_float(value: float) -> float | None:
    """A float JSON can hold: None for NaN/inf."""
    value = float(value)
    return value if math.isfinite(value) else None
