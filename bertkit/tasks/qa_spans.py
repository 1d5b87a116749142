"""From start/end logits to answer spans for extractive QA (SQuAD v1.1 and v2.0).

A long context is cut into overlapping windows ("features"); the model gives every token
i of a feature a start logit s_i and an end logit e_i. A span (i, j) scores s_i + e_j; it is
allowed when j >= i, j - i < max_answer_length and both tokens lie in the context. The
no-answer ("null") score of a feature is s_0 + e_0, the [CLS] position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from bertkit.errors import DataError
from bertkit.tasks.unicode_text import grapheme_span

__all__ = ["QAFeature", "SpanPrediction", "best_spans", "null_score", "merge_features"]


@dataclass
class QAFeature:
    """Model outputs and token-to-character offsets of one window over an example's context.

    offsets[t] = (start_char, end_char) of token t in the context (None or anything for
    non-context tokens); context_mask[t] is True for tokens of the context.
    """

    start_logits: np.ndarray
    end_logits: np.ndarray
    offsets: Sequence
    context_mask: Sequence[bool]


@dataclass
class SpanPrediction:
    """The answer chosen for one example: context[start_char:end_char], or "" with
    `is_impossible` True for no answer. `text` is None when merge_features got no context.
    `n_best` lists the pooled (score, start_char, end_char) candidates, best first;
    `window_losses` each window's training loss against the example's answer (qa.py `window_loss`;
    empty when not computed)."""

    text: str | None
    start_char: int
    end_char: int
    score: float
    null_score: float
    is_impossible: bool
    n_best: list[tuple[float, int, int]] = field(default_factory=list)
    window_losses: tuple[float, ...] = ()


def _offset_array(offsets: Sequence, length: int) -> tuple[np.ndarray, np.ndarray]:
    """(L, 2) int offsets and a mask of the tokens that have a real offset pair."""
    if isinstance(offsets, np.ndarray) and offsets.ndim == 2:
        array = offsets.astype(np.int64)
        present = np.ones(len(array), dtype=bool)
    else:
        present = np.array([o is not None for o in offsets], dtype=bool)
        array = np.array([o if o is not None else (0, 0) for o in offsets], dtype=np.int64).reshape(-1, 2)
    if len(array) != length:
        raise DataError(f"{len(array)} offsets for {length} logits; give one (start, end) per token")
    return array, present


def best_spans(
    start_logits,
    end_logits,
    offsets,
    context_mask,
    n_best: int = 20,
    max_answer_length: int = 30,
) -> list[tuple[float, int, int]]:
    """The `n_best` highest-scoring allowed spans of one feature, best first, as
    (score, start_char, end_char) with score = start_logits[i] + end_logits[j] and the answer
    `context[start_char:end_char]`.

    Only the band j in [i, i + max_answer_length) is scored: an (L, max_answer_length) matrix
    instead of (L, L).
    """
    start = np.asarray(start_logits, dtype=np.float64).reshape(-1)
    end = np.asarray(end_logits, dtype=np.float64).reshape(-1)
    length = start.size
    if end.size != length:
        raise DataError(f"{length} start logits but {end.size} end logits")
    mask = np.asarray(context_mask, dtype=bool).reshape(-1)
    if mask.size != length:
        raise DataError(f"context_mask has {mask.size} entries for {length} tokens")
    if max_answer_length < 1 or n_best < 1:
        raise DataError("n_best and max_answer_length must be at least 1")
    char_offsets, present = _offset_array(offsets, length)
    usable = mask & present

    width = min(max_answer_length, length)
    i = np.arange(length)[:, None]
    j = i + np.arange(width)[None, :]  # j - i in [0, width)
    inside = j < length
    j_clipped = np.where(inside, j, 0)
    scores = start[:, None] + end[j_clipped]
    allowed = inside & usable[:, None] & usable[j_clipped]
    scores = np.where(allowed, scores, -np.inf)

    flat = scores.ravel()
    n_allowed = int(allowed.sum())
    if n_allowed == 0:
        return []
    k = min(n_best, n_allowed)
    top = np.argpartition(-flat, k - 1)[:k]
    # sort by score (desc), then earlier start, then shorter span: deterministic ties
    top = top[np.lexsort((top % width, top // width, -flat[top]))]
    rows, cols = np.divmod(top, width)
    return [
        (float(flat[t]), int(char_offsets[r, 0]), int(char_offsets[r + c, 1]))
        for t, r, c in zip(top, rows, cols)
    ]


def null_score(start_logits, end_logits) -> float:
    """Score of "no answer": start_logits[0] + end_logits[0] (the [CLS] token)."""
    return float(np.asarray(start_logits).reshape(-1)[0] + np.asarray(end_logits).reshape(-1)[0])


def merge_features(
    example_features: Sequence,
    context: str | None = None,
    null_threshold: float = 0.0,
    allow_no_answer: bool = True,
    n_best: int = 20,
    max_answer_length: int = 30,
) -> SpanPrediction:
    """The answer of one example from all its overflow windows.

    Spans of all windows are pooled (a span found in two overlapping windows keeps its best
    score) and ranked. The example's null score is the minimum of the windows' null scores
    (as in the reference BERT SQuAD code). With `allow_no_answer` (SQuAD 2.0) the prediction
    is "no answer" when null_score - best_span_score > null_threshold, or when no window has
    an allowed span. `example_features` holds QAFeature objects or dicts with the same keys.
    Given the context, each span is widened to whole characters as a reader sees them
    (`unicode_text.grapheme_span`): token offsets end before an accent written as a combining
    mark or an emoji's U+FE0F, which the tokenizer's normalizer deletes.
    """
    if not example_features:
        raise DataError("merge_features needs at least one feature of the example")
    pooled: dict[tuple[int, int], float] = {}
    null = np.inf
    for feature in example_features:
        if isinstance(feature, dict):
            feature = QAFeature(**feature)
        for score, start_char, end_char in best_spans(
            feature.start_logits, feature.end_logits, feature.offsets, feature.context_mask,
            n_best=n_best, max_answer_length=max_answer_length,
        ):
            key = (start_char, end_char) if context is None else grapheme_span(context, start_char, end_char)
            pooled[key] = max(score, pooled.get(key, -np.inf))
        null = min(null, null_score(feature.start_logits, feature.end_logits))
    ranked = sorted(((score, s, e) for (s, e), score in pooled.items()), key=lambda t: (-t[0], t[1], t[2]))
    ranked = ranked[:n_best]
    if not ranked or (allow_no_answer and null - ranked[0][0] > null_threshold):
        return SpanPrediction("", 0, 0, null, null, True, ranked)
    score, start_char, end_char = ranked[0]
    text = context[start_char:end_char] if context is not None else None
    return SpanPrediction(text, start_char, end_char, score, null, False, ranked)
