"""What every fine-tuning task shares: input settings, the spec of a fine-tuned model, padding,
batched inference, and small numeric helpers.

A *feature* is one model input row as a dict of numpy arrays, unpadded: `input_ids` and
`token_type_ids` (T,), in training the task's targets (`labels`, or QA's `start_positions` /
`end_positions`), plus bookkeeping a task's decoder needs (`word_ids`, `offsets`, ...).
A multiple-choice feature holds one row per choice (`input_ids` is a list of C arrays).
`Collator` pads a list of features into a batch (dynamic padding: to the longest row of the
batch, not to max_length); `eval_order` gives length-sorted batches for inference, cut where
padding costs more than a forward call (`data.batches.length_batches`, as
`SentenceEncoder.encode` does), and `forward_features` puts the outputs back in input order.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
import torch

from bertkit.data.masking import IGNORE_INDEX
from bertkit.errors import ConfigError, DataError
from bertkit.data.batches import inference_batches, pad_rows
from bertkit.inference.overlap import HostCopy, run_one_ahead
from bertkit.runtime.devices import copy_without_wait
from bertkit.runtime.progress import progress
from bertkit.tasks.long_text import check_long_text

SUMMARY_FILE = "finetune_summary.json"  # written last by `bertkit finetune`: marks a finished run
# Model forward arguments; anything else in a feature is bookkeeping for evaluation.
MODEL_KEYS = ("input_ids", "token_type_ids", "attention_mask", "labels", "start_positions", "end_positions")
EVAL_BATCHINGS = ("length", "fixed")


@dataclass
class DataConfig:
    """The `[data]` section of a fine-tuning recipe: how examples become model inputs."""

    max_length: int = 128  # tokens per row, specials included; longer texts are truncated (see long_text)
    # texts longer than max_length (classification, regression): "truncate" | "head_tail" | "chunks"
    # (windows sharing doc_stride tokens, their logits averaged); bertkit/tasks/long_text.py
    long_text: str = "truncate"
    text_column: str = "text"
    pair_column: str = ""  # "" = single texts; else the column holding the second text of a pair
    label_column: str = "label"
    multilabel_sep: str = "|"  # CSV/TSV cells "a|b" are multi-label
    label_all_subwords: bool = False  # token tasks: label every sub-word, not just the first
    token_col: int = 0  # CoNLL column of the words
    tag_col: int = -1  # CoNLL column of the tags
    doc_stride: int = 32  # QA: tokens shared by neighbouring windows of a long context
    max_answer_length: int = 30  # QA: longest answer, in tokens
    n_best: int = 20  # QA: candidate spans kept per example
    null_threshold: float = 0.0  # QA (SQuAD 2.0): answer "" when null - best span > this
    max_train_examples: int = 0  # 0 = all; else a seeded random subset
    max_eval_examples: int = 0  # 0 = all; the same for the dev / evaluation data
    eval_batch_size: int = 64
    # inference batches of length-sorted inputs: "length" cuts them where the padding saved is
    # worth more than a forward call (at most eval_batch_size rows; on a CPU: a GPU runs fixed
    # batches, data/batches.py `inference_batches`); "fixed": eval_batch_size each
    eval_batching: str = "length"
    source_column: str = "source"  # seq2seq: JSONL field of the input text
    target_column: str = "target"  # seq2seq: JSONL field of the text to generate
    positive_column: str = "positive"  # embedding: the text each row's text should be near
    negative_column: str = "negative"  # embedding: an optional hard negative per row (read when present)
    max_target_length: int = 32  # seq2seq: target tokens trained on ([SEP] included) and generated at most
    num_beams: int = 1  # seq2seq: beam width of generation; 1 = greedy
    no_repeat_ngram_size: int = 0  # seq2seq: > 0, no n-gram of this size generated twice (0 = off)

    def __post_init__(self) -> None:
        for name in ("max_length", "max_answer_length", "n_best", "eval_batch_size", "max_target_length", "num_beams"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"data.{name} must be a positive integer, got {value!r}")
        for name in ("max_train_examples", "max_eval_examples", "doc_stride", "no_repeat_ngram_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"data.{name} must be an integer >= 0, got {value!r}")
        if self.eval_batching not in EVAL_BATCHINGS:
            raise ConfigError(f"data.eval_batching must be one of {', '.join(EVAL_BATCHINGS)}, got {self.eval_batching!r}")
        if self.max_length < 8:
            raise ConfigError(f"data.max_length={self.max_length} leaves no room for text; use 64 or more")
        check_long_text(self.long_text, self.max_length, self.doc_stride)
        self._check_columns_apart()

    def _check_columns_apart(self) -> None:
        """Two roles read from one column: the label as the input (a model that reads its answer),
        or a text paired with itself."""
        roles = {"data.text_column": self.text_column, "data.pair_column": self.pair_column,
                 "data.label_column": self.label_column}
        named = [(key, column) for key, column in roles.items() if column]
        for i, (key, column) in enumerate(named):
            other = next((k for k, c in named[i + 1:] if c == column), None)
            if other:  # the reason that applies to these two roles, not both
                harm = ("the model would read its label as its input" if other == "data.label_column"
                        else "each text would be paired with itself")
                raise ConfigError(f"{key} and {other} both name the column {column!r}; each role needs its own "
                                  f"column ({harm})")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# The `kind` field of summaries written before the task registry: kind -> task name.
_LEGACY_KINDS = {"multilabel": "multi-label-classification", "regression": "regression",
                 "tagging": "token-classification", "qa": "qa"}


@dataclass
class TaskSpec:
    """What a fine-tuned model does and how its inputs are built.

    task  the `Task` entry (bertkit/tasks/spec.py); allow_no_answer  QA may answer "" (SQuAD 2.0).
    finetune_summary.json records the task by its name.
    """

    task: Any
    data: DataConfig = field(default_factory=DataConfig)
    allow_no_answer: bool = True
    blend: Any = None  # a classifier's TF-IDF blend (tasks/tfidf_blend.py), read from its directory; not recorded
    # multi-label: a class is in the set at p >= threshold, chosen on dev after fine-tuning (recipes/decision.py)
    threshold: float = 0.5

    def to_dict(self) -> dict:
        return {"task": self.task.name, "data": self.data.to_dict(), "allow_no_answer": self.allow_no_answer,
                "threshold": self.threshold}

    @classmethod
    def from_dict(cls, values: dict, find_task: Callable[[str], Any]) -> "TaskSpec":
        """The spec `to_dict` wrote; `find_task` turns the recorded name into its entry (get_task)."""
        data = DataConfig(**{k: v for k, v in values.get("data", {}).items()
                             if k in DataConfig.__dataclass_fields__})
        task = _LEGACY_KINDS.get(values.get("kind"), values["task"])
        threshold = float(values.get("threshold", 0.5))  # a summary written before thresholds were chosen: 0.5
        return cls(find_task(task), data, bool(values.get("allow_no_answer", True)), threshold=threshold)


@dataclass
class PredictionInput:
    """Inputs to predict: examples, and for tagging of raw text the text and word spans."""

    examples: list
    texts: list[str] | None = None
    spans: list | None = None


# ---------------------------------------------------------------------------- checks
def check_texts(texts: Sequence[str], what: str, name: str) -> None:
    for index, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"{name}: example {index + 1} has an empty {what}; fill it in or remove "
                            "that record")


class TruncationWarning(UserWarning):
    """Inputs were cut to data.max_length: news when the length is new, expected at the length the
    model was fine-tuned with (evaluate then leaves it out)."""


# Set within `summing_truncations`: (max_length, name, what, hint) -> [cut, total] of the calls so far.
_TRUNCATIONS: contextvars.ContextVar[dict | None] = contextvars.ContextVar("truncations", default=None)


def truncation_warning(count: int, total: int, max_length: int, name: str, what: str, hint: str = "") -> None:
    """Warn that `count` of `total` inputs were cut to max_length; `hint` (what to do) is added when a
    tenth or more were. Within `summing_truncations` the counts are added up instead."""
    tally = _TRUNCATIONS.get()
    if tally is not None:
        counts = tally.setdefault((max_length, name, what, hint), [0, 0])
        counts[0] += count
        counts[1] += total
    elif count:
        warnings.warn(f"{name}: {count} of {total} {what} were cut to data.max_length={max_length} "
                      f"tokens{hint if count * 10 >= total else ''}", TruncationWarning, stacklevel=3)


@contextlib.contextmanager
def summing_truncations():
    """Within it, the truncation warnings of the encode calls are summed: one warning per kind
    when the block ends, over all its calls (`bertkit predict` encodes its input in chunks, and
    "3 of 1024 texts" per chunk would hide the file's total). Nothing when the block fails: the
    error is the one line to read."""
    tally: dict = {}
    token = _TRUNCATIONS.set(tally)
    try:
        yield
    finally:
        _TRUNCATIONS.reset(token)
    for (max_length, name, what, hint), (count, total) in tally.items():
        truncation_warning(count, total, max_length, name, what, hint)


# ---------------------------------------------------------------------------- batching
def feature_length(feature: dict) -> int:
    """Tokens in a feature's longest row (a multiple-choice feature has one row per choice)."""
    ids = feature["input_ids"]
    return max(len(row) for row in ids) if isinstance(ids, list) else len(ids)


def batching_length(feature: dict) -> int:
    """What training batches are bucketed by: `feature_length`, plus the target's tokens for a
    decoder target (both the encoder's and the decoder's rows are padded per batch)."""
    return feature_length(feature) + (len(feature["labels"]) if feature.get("decoder_target") else 0)


class Collator:
    """Pad features to the longest row of the batch; model inputs only.

    input_ids pad with the tokenizer's pad id, token_type_ids with 0, per-token labels with
    -100 (no loss); attention_mask is 1 on real tokens. Multiple-choice features become
    (B, C, T) tensors.
    """

    def __init__(self, pad_token_id: int):
        self.pad_token_id = pad_token_id

    def __call__(self, features: Sequence[dict]) -> dict[str, torch.Tensor]:
        width = max(feature_length(f) for f in features)
        choices = isinstance(features[0]["input_ids"], list)
        rows = [row for f in features for row in (f["input_ids"] if choices else [f["input_ids"]])]
        types = [row for f in features for row in (f["token_type_ids"] if choices else [f["token_type_ids"]])]
        ids = pad_rows(rows, width, self.pad_token_id)
        mask = pad_rows([np.ones(len(r), dtype=np.int64) for r in rows], width, 0)
        shape = (len(features), -1, width) if choices else (len(features), width)
        batch = {"input_ids": torch.from_numpy(ids.reshape(shape)),
                 "token_type_ids": torch.from_numpy(pad_rows(types, width, 0).reshape(shape)),
                 "attention_mask": torch.from_numpy(mask.reshape(shape))}
        first = features[0]
        if "labels" in first:
            label = np.asarray(first["labels"])
            if label.ndim == 1 and "word_ids" in first:  # per-token labels
                batch["labels"] = torch.from_numpy(pad_rows([f["labels"] for f in features], width, IGNORE_INDEX))
            elif "decoder_target" in first:  # a decoder's target ids: padded to the longest target
                longest = max(len(f["labels"]) for f in features)
                batch["labels"] = torch.from_numpy(pad_rows([f["labels"] for f in features], longest, IGNORE_INDEX))
            else:
                batch["labels"] = torch.from_numpy(np.stack([np.asarray(f["labels"]) for f in features]))
        for key in ("start_positions", "end_positions"):
            if key in first:
                batch[key] = torch.tensor([int(f[key]) for f in features], dtype=torch.long)
        return batch


def eval_order(features: Sequence[dict], batch_size: int, cut: bool = True, device: torch.device | str = "cpu"
               ) -> list[np.ndarray]:
    """Indices of `features` in batches of near-equal length (longest first, so a memory
    problem shows at once), for inference where order does not matter: at most `batch_size`
    each, on a CPU cut where the padding saved is worth more than a forward call (`length_batches`,
    measured 1.2-1.4x on predict, docs/inference.md). `cut=False`, and on a GPU: batches of exactly
    `batch_size` sorted features (`data.batches.inference_batches` says why)."""
    lengths = [feature_length(f) for f in features]
    return [np.asarray(rows, dtype=np.int64) for rows in inference_batches(lengths, batch_size, device, cut)]


def subsample(examples: list, limit: int, seed: int) -> list:
    """A seeded random subset of `limit` examples, in their original order (0 = all)."""
    if not limit or limit >= len(examples):
        return list(examples)
    rng = np.random.default_rng(seed)
    keep = np.sort(rng.choice(len(examples), size=limit, replace=False))
    return [examples[i] for i in keep]


BASELINE_CHOICE_EXAMPLES = 2_000  # training examples a task's baseline chooses its predictor on


def baseline_choice_rows(count: int) -> range:
    """The positions, spread evenly over `count` training examples, of the up to ~BASELINE_CHOICE_EXAMPLES
    a task's baseline chooses among its predictors on (seq2seq, multiple choice)."""
    return range(0, count, max(1, count // BASELINE_CHOICE_EXAMPLES))


# ---------------------------------------------------------------------------- inference
class InputsBar:
    """One bar over a command's `total` inputs, run in parts (`bertkit predict`'s chunks): the
    forward_features calls within a `part` move it in proportion to their batches done, and the
    part's end to its last input (its blank inputs, a task whose decode runs no batches). Drawn
    from the first call of more than one batch on (where a bar per call was drawn), or from the
    second part on."""

    def __init__(self, desc: str, total: int):
        self.desc, self.total, self.bar = desc, total, None
        self.n = self.start = self.end = 0

    @contextlib.contextmanager
    def part(self, count: int) -> Iterator[None]:
        self.start, self.end = self.n, self.n + count
        if self.n:
            self._draw()
        yield
        self._move(self.end)

    def through(self, batches: Sequence[np.ndarray]) -> Iterator[np.ndarray]:
        """`batches`, each counted done when the next is asked for (as tqdm counts)."""
        if len(batches) > 1:
            self._draw()
        size, done = sum(len(batch) for batch in batches), 0
        for batch in batches:
            yield batch
            done += len(batch)
            self._move(self.start + (self.end - self.start) * done // size)

    def _draw(self) -> None:
        if self.bar is None:
            self.bar = progress(total=self.total, desc=self.desc, unit="input", initial=self.n)

    def _move(self, n: int) -> None:
        if n > self.n:  # never back: a second call within a part starts at the part's start again
            if self.bar is not None:
                self.bar.update(n - self.n)
            self.n = n

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# The bar `forward_features` shows: named by a command that runs a model over a whole file
# (predict, evaluate), None inside training, whose dev evaluations run beside the training bar.
_PROGRESS: contextvars.ContextVar[str | InputsBar | None] = contextvars.ContextVar("forward_progress", default=None)


@contextlib.contextmanager
def showing_progress(desc: str | None, inputs: int | None = None) -> Iterator[None]:
    """Within it, `forward_features` shows a progress bar named `desc` (the tasks' decode calls it),
    over each call's batches; with `inputs`, one bar over that many inputs for the whole block,
    which `progress_part` moves on part by part (`InputsBar`)."""
    shown = InputsBar(desc, inputs) if desc and inputs else desc
    token = _PROGRESS.set(shown)
    try:
        yield
    finally:
        _PROGRESS.reset(token)
        if isinstance(shown, InputsBar):
            shown.close()


def progress_part(count: int) -> contextlib.AbstractContextManager:
    """Within it, the next `count` inputs of the bar over the inputs (`showing_progress(desc,
    inputs)`) are run; without that bar it does nothing."""
    shown = _PROGRESS.get()
    return shown.part(count) if isinstance(shown, InputsBar) else contextlib.nullcontext()


def _shown(batches: list) -> Iterable:
    """`batches` as `forward_features` runs them: through the bar the caller asked for, if any."""
    desc = _PROGRESS.get()
    if isinstance(desc, InputsBar):
        return desc.through(batches)
    return progress(batches, desc=desc, unit="batch") if desc and len(batches) > 1 else batches


@torch.no_grad()
def forward_features(model, features: Sequence[dict], batch_size: int, pad_token_id: int,
                     batching: str = "length") -> list:
    """Per feature, in input order: logits (C,) for sequence and multiple-choice heads, (T, C)
    for token heads, a (start, end) pair of (T,) arrays for QA, or a sentence-embedding model's
    vector (D,), each cut to the feature's length. `batching` is `data.eval_batching` (see
    `eval_order`)."""
    collate = Collator(pad_token_id)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    outputs: list = [None] * len(features)

    def launch(index: np.ndarray) -> tuple[HostCopy, ...]:
        batch = collate([{k: features[i][k] for k in ("input_ids", "token_type_ids")} for i in index])
        out = model(**{k: copy_without_wait(v, device) for k, v in batch.items()})
        if hasattr(out, "start_logits"):  # QA (also through a PEFT wrapper)
            return HostCopy(out.start_logits.float()), HostCopy(out.end_logits.float())
        scores = out.logits if getattr(out, "logits", None) is not None else out.embeddings  # a sentence model's
        return (HostCopy(scores.float()),)

    def collect(index: np.ndarray, launched: tuple[HostCopy, ...]) -> None:
        if len(launched) == 2:
            start, end = (copy.numpy() for copy in launched)
            for row, i in enumerate(index):
                n = len(features[i]["input_ids"])
                outputs[i] = (start[row, :n], end[row, :n])
            return
        logits = launched[0].numpy()
        token_level = logits.ndim == 3
        for row, i in enumerate(index):
            outputs[i] = logits[row, :len(features[i]["input_ids"])] if token_level else logits[row]

    batches = eval_order(features, batch_size, cut=batching == "length", device=device)
    shown = _shown(batches)
    try:
        run_one_ahead(shown, launch, collect)
    finally:
        model.train(was_training)
        if shown is not batches:
            shown.close()
    return outputs


def model_labels(model) -> list[str]:
    """Label names in id order (LABEL_i when the config names none)."""
    config = model.config
    id2label = config.id2label or {}
    return [id2label.get(i, f"LABEL_{i}") for i in range(config.num_labels)]


def softmax(x: np.ndarray) -> np.ndarray:
    z = x - x.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def json_float(value: float) -> float | None:
    """A float JSON can hold: None for NaN/inf."""
    value = float(value)
    return value if math.isfinite(value) else None


def clean_metrics(metrics: dict) -> dict:
    """Metrics as JSON can hold them (NaN/inf -> None)."""
    return {k: json_float(v) if isinstance(v, float) else v for k, v in metrics.items()}
