"""Examples -> model inputs for fine-tuning: sequence, token and span (QA) features.

A *feature* is one model input row as a dict of numpy arrays, unpadded:

* every feature: `input_ids`, `token_type_ids` (T,) and, in training, its labels;
* sequence classification: `labels` = class id (single-label), multi-hot float vector
  (multi-label) or a float (regression);
* token classification: `labels` (T,) from word tags by `align_labels_to_tokens` (first
  sub-word of each word, or all sub-words) and `word_ids` (T,) with -1 off-word, kept for
  mapping token predictions back to words;
* QA: a long context becomes several overlapping windows ("doc stride"); each window keeps
  `example_index`, `offsets` (T, 2) character spans in the context and `context_mask` (T,),
  and in training `start_positions`/`end_positions`: the answer's first/last token when the
  window holds the whole answer, else 0 ([CLS], "no answer in this window").

`Collator` pads a list of features into a batch (dynamic padding: to the longest row of the
batch, not to max_length), and `eval_order` gives length-sorted batches for evaluation, where
order does not matter and sorting removes most of the padding.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch

from bertkit.errors import ConfigError, DataError
from bertkit.tasks.alignment import IGNORE_INDEX, align_labels_to_tokens
from bertkit.tasks.formats import QAExample, TextExample, TokenExample

TASKS = ("classification", "regression", "token-classification", "qa")
# Model forward arguments; anything else in a feature is bookkeeping for evaluation.
MODEL_KEYS = ("input_ids", "token_type_ids", "attention_mask", "labels", "start_positions", "end_positions")


@dataclass
class DataConfig:
    """The `[data]` section of a fine-tuning recipe: how examples become model inputs."""

    max_length: int = 128  # tokens per row, specials included; longer texts are truncated
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

    def __post_init__(self) -> None:
        for name in ("max_length", "max_answer_length", "n_best", "eval_batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"data.{name} must be a positive integer, got {value!r}")
        for name in ("max_train_examples", "max_eval_examples", "doc_stride"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"data.{name} must be an integer >= 0, got {value!r}")
        if self.max_length < 8:
            raise ConfigError(f"data.max_length={self.max_length} leaves no room for text; use 64 or more")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------- checks
def _check_texts(texts: Sequence[str], what: str, name: str) -> None:
    for index, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"{name}: example {index + 1} has an empty {what}; fill it in or remove "
                            "that record")


def _truncation_warning(count: int, total: int, max_length: int, name: str, what: str) -> None:
    if count:
        warnings.warn(f"{name}: {count} of {total} {what} were cut to data.max_length={max_length} "
                      "tokens", stacklevel=3)


# ---------------------------------------------------------------------------- sequence tasks
def sequence_label_array(examples: Sequence[TextExample], kind: str, label2id: dict | None) -> np.ndarray:
    """Labels as the model takes them: class ids, multi-hot float rows, or floats."""
    if kind == "regression":
        return np.array([float(e.label) for e in examples], dtype=np.float32)
    if kind == "multilabel":
        out = np.zeros((len(examples), len(label2id)), dtype=np.float32)
        for row, e in enumerate(examples):
            for name in e.label:
                out[row, label2id[name]] = 1.0
        return out
    return np.array([label2id[e.label] for e in examples], dtype=np.int64)


def encode_texts(tokenizer, examples: Sequence[TextExample], max_length: int, kind: str | None = None,
                 label2id: dict | None = None, name: str = "data") -> list[dict]:
    """Sequence-classification features; labels are added when `kind` is given."""
    texts = [e.text for e in examples]
    _check_texts(texts, "text", name)
    with_pair = [e.text_pair is not None for e in examples]
    pairs = None
    if any(with_pair):
        if not all(with_pair):
            missing = with_pair.index(False) + 1
            raise DataError(f"{name}: example {missing} has no second text while others have one; "
                            "every example of a pair task needs both texts")
        pairs = [e.text_pair for e in examples]
        _check_texts(pairs, "second text (text pair)", name)
    with warnings.catch_warnings():  # one summary warning below instead of the tokenizer's
        warnings.simplefilter("ignore")
        enc = tokenizer(texts, pairs, padding=False, truncation=True, max_length=max_length,
                        return_tensors=None)
    labels = sequence_label_array(examples, kind, label2id) if kind is not None else None
    features, cut = [], 0
    for row, ids in enumerate(enc["input_ids"]):
        cut += len(ids) >= max_length
        feature = {"input_ids": np.asarray(ids, dtype=np.int64),
                   "token_type_ids": np.asarray(enc["token_type_ids"][row], dtype=np.int64)}
        if labels is not None:
            feature["labels"] = labels[row]
        features.append(feature)
    _truncation_warning(cut, len(features), max_length, name, "texts")
    return features


# ---------------------------------------------------------------------------- token tasks
def inside_label_map(label2id: dict) -> dict[int, int]:
    """{id of B-X: id of I-X} so continuation sub-words do not start new entities."""
    return {index: label2id["I-" + tag[2:]] for tag, index in label2id.items()
            if tag.startswith("B-") and "I-" + tag[2:] in label2id}


def word_char_spans(words: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """The words joined by single spaces, and each word's (start, end) in that text."""
    spans, cursor = [], 0
    for word in words:
        spans.append((cursor, cursor + len(word)))
        cursor += len(word) + 1
    return " ".join(words), spans


def word_ids_from_offsets(offsets: Sequence, special: Sequence[int], spans: Sequence[tuple[int, int]]
                          ) -> np.ndarray:
    """Word index of each token (-1 for special tokens): the word whose span holds its start.

    Words are given, not re-split by the tokenizer's own pre-tokenizer, so "U.S." stays one
    word even though the tokenizer splits it at the dots.
    """
    starts = np.array([s for s, _ in spans], dtype=np.int64)
    token_starts = np.array([o[0] for o in offsets], dtype=np.int64).reshape(-1)
    ids = np.searchsorted(starts, token_starts, side="right") - 1
    ids[np.asarray(special, dtype=bool)] = -1
    return ids


def encode_words(tokenizer, examples: Sequence[TokenExample], max_length: int,
                 label2id: dict | None = None, label_all_subwords: bool = False,
                 name: str = "data") -> list[dict]:
    """Token-classification features; `labels` when `label2id` is given, `word_ids` always."""
    texts, all_spans = [], []
    for index, example in enumerate(examples):
        if not example.tokens:
            raise DataError(f"{name}: sentence {index + 1} has no words; remove it")
        for word in example.tokens:
            if not word or any(ch.isspace() for ch in word):
                raise DataError(f"{name}: sentence {index + 1} has the word {word!r}, which is empty or "
                                "holds whitespace; split it into words")
        text, spans = word_char_spans(example.tokens)
        texts.append(text)
        all_spans.append(spans)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        enc = tokenizer(texts, padding=False, truncation=True, max_length=max_length,
                        return_offsets=True, return_special_tokens_mask=True, return_tensors=None)
    inside = inside_label_map(label2id) if label2id and label_all_subwords else None
    features, cut = [], 0
    for row, example in enumerate(examples):
        word_ids = word_ids_from_offsets(enc["offsets"][row], enc["special_tokens_mask"][row], all_spans[row])
        feature = {"input_ids": np.asarray(enc["input_ids"][row], dtype=np.int64),
                   "token_type_ids": np.asarray(enc["token_type_ids"][row], dtype=np.int64),
                   "word_ids": word_ids}
        cut += int(word_ids.max(initial=-1)) + 1 < len(example.tokens)
        if label2id is not None:
            word_labels = [label2id[tag] for tag in example.tags]
            aligned = align_labels_to_tokens([None if w < 0 else int(w) for w in word_ids], word_labels,
                                             label_all_subwords, inside)
            feature["labels"] = np.asarray(aligned, dtype=np.int64)
        features.append(feature)
    _truncation_warning(cut, len(features), max_length, name, "sentences (their last words are tagged O)")
    return features


# ---------------------------------------------------------------------------- QA
def encode_qa(tokenizer, examples: Sequence[QAExample], max_length: int, doc_stride: int,
              with_positions: bool = False, name: str = "data") -> list[dict]:
    """Windows over each (question, context); start/end token positions when `with_positions`."""
    if doc_stride >= max_length // 2:
        raise ConfigError(f"data.doc_stride={doc_stride} must be below half of data.max_length={max_length} "
                          f"(it is the overlap of neighbouring windows); e.g. doc_stride={max_length // 4}")
    questions = [e.question for e in examples]
    contexts = [e.context for e in examples]
    _check_texts(questions, "question", name)
    _check_texts(contexts, "context", name)
    enc = tokenizer(questions, contexts, padding=False, truncation=True, max_length=max_length,
                    stride=doc_stride, return_overflowing_tokens=True, return_offsets=True,
                    return_tensors=None)
    features = []
    for row, ids in enumerate(enc["input_ids"]):
        example_index = enc["overflow_to_sample_mapping"][row]
        sequence_ids = enc.sequence_ids(row)
        context_mask = np.array([s == 1 for s in sequence_ids], dtype=bool)
        if not context_mask.any():
            raise DataError(f"{name}: question {example_index + 1} leaves no room for its context in "
                            f"data.max_length={max_length} tokens; shorten it or raise max_length")
        offsets = np.asarray(enc["offsets"][row], dtype=np.int64).reshape(-1, 2)
        feature = {"input_ids": np.asarray(ids, dtype=np.int64),
                   "token_type_ids": np.asarray(enc["token_type_ids"][row], dtype=np.int64),
                   "example_index": example_index, "offsets": offsets, "context_mask": context_mask}
        if with_positions:
            start, end = answer_positions(examples[example_index], offsets, context_mask)
            feature["start_positions"] = np.int64(start)
            feature["end_positions"] = np.int64(end)
        features.append(feature)
    return features


def answer_positions(example: QAExample, offsets: np.ndarray, context_mask: np.ndarray) -> tuple[int, int]:
    """(first, last) token of the example's first answer in this window, or (0, 0) for [CLS]
    when the question has no answer or the answer is not wholly inside the window."""
    if example.is_impossible or not example.answers:
        return 0, 0
    answer = example.answers[0]
    start_char = answer["answer_start"]
    end_char = start_char + len(answer["text"])
    positions = np.flatnonzero(context_mask)
    first, last = positions[0], positions[-1]
    if not (offsets[first, 0] <= start_char and offsets[last, 1] >= end_char):
        return 0, 0
    context_offsets = offsets[positions]
    # the token holding start_char, and the token holding the answer's last character
    start = positions[np.searchsorted(context_offsets[:, 1], start_char, side="right")]
    end = positions[np.searchsorted(context_offsets[:, 1], end_char, side="left")]
    return int(start), int(max(end, start))


# ---------------------------------------------------------------------------- batching
class Collator:
    """Pad features to the longest row of the batch; model inputs only.

    input_ids pad with the tokenizer's pad id, token_type_ids with 0, per-token labels with
    -100 (no loss); attention_mask is 1 on real tokens.
    """

    def __init__(self, pad_token_id: int):
        self.pad_token_id = pad_token_id

    def __call__(self, features: Sequence[dict]) -> dict[str, torch.Tensor]:
        lengths = [len(f["input_ids"]) for f in features]
        width = max(lengths)
        batch_size = len(features)
        ids = np.full((batch_size, width), self.pad_token_id, dtype=np.int64)
        types = np.zeros((batch_size, width), dtype=np.int64)
        mask = np.zeros((batch_size, width), dtype=np.int64)
        for row, (feature, length) in enumerate(zip(features, lengths)):
            ids[row, :length] = feature["input_ids"]
            types[row, :length] = feature["token_type_ids"]
            mask[row, :length] = 1
        batch = {"input_ids": torch.from_numpy(ids), "token_type_ids": torch.from_numpy(types),
                 "attention_mask": torch.from_numpy(mask)}
        first = features[0]
        if "labels" in first:
            label = np.asarray(first["labels"])
            if label.ndim == 1 and "word_ids" in first:  # per-token labels
                labels = np.full((batch_size, width), IGNORE_INDEX, dtype=np.int64)
                for row, (feature, length) in enumerate(zip(features, lengths)):
                    labels[row, :length] = feature["labels"]
                batch["labels"] = torch.from_numpy(labels)
            else:
                batch["labels"] = torch.from_numpy(np.stack([np.asarray(f["labels"]) for f in features]))
        for key in ("start_positions", "end_positions"):
            if key in first:
                batch[key] = torch.tensor([int(f[key]) for f in features], dtype=torch.long)
        return batch


def eval_order(features: Sequence[dict], batch_size: int) -> Iterator[np.ndarray]:
    """Indices of `features` in batches of near-equal length (longest first, so a memory
    problem shows at once), for inference where order does not matter."""
    lengths = np.array([len(f["input_ids"]) for f in features], dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    for start in range(0, len(order), batch_size):
        yield order[start:start + batch_size]


def subsample(examples: list, limit: int, seed: int) -> list:
    """A seeded random subset of `limit` examples, in their original order (0 = all)."""
    if not limit or limit >= len(examples):
        return list(examples)
    rng = np.random.default_rng(seed)
    keep = np.sort(rng.choice(len(examples), size=limit, replace=False))
    return [examples[i] for i in keep]
