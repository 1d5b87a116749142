"""Moving word-level labels to sub-word tokens and token predictions back to words.

A tokenizer splits word w into sub-words t_k..t_m; `word_ids[t] = w` for each of them and
None for special tokens ([CLS], [SEP]) and padding. Training labels live on tokens, but
metrics are defined on words, so both directions are needed.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from bertkit.errors import DataError

from bertkit.data.masking import IGNORE_INDEX

__all__ = ["IGNORE_INDEX", "align_labels_to_tokens", "word_classes", "word_logits", "word_predictions"]


def _word_id_array(word_ids: Sequence[int | None]) -> np.ndarray:
    """word_ids as an int array with -1 for None."""
    return np.fromiter((-1 if w is None else w for w in word_ids), dtype=np.int64, count=len(word_ids))


def _first_subword_mask(ids: np.ndarray) -> np.ndarray:
    """True at the first token of each word: a real word id that differs from the previous token's."""
    previous = np.r_[-1, ids[:-1]] if ids.size else ids
    return (ids >= 0) & (ids != previous)


def align_labels_to_tokens(
    word_ids: Sequence[int | None],
    word_labels: Sequence[int],
    label_all_subwords: bool = False,
    inside_label: Mapping[int, int] | None = None,
) -> list[int]:
    """Token labels from word labels.

    label[t] = word_labels[word_ids[t]] at the first sub-word of each word, and -100 (ignored
    by the loss) at special tokens, padding and non-first sub-words. With
    `label_all_subwords=True` the non-first sub-words get their word's label too; pass
    `inside_label` (e.g. {id of B-PER: id of I-PER}) so continuation pieces do not start new
    entities.
    """
    ids = _word_id_array(word_ids)
    labels_by_word = np.asarray(word_labels, dtype=np.int64)
    if ids.size and ids.max(initial=-1) >= labels_by_word.size:
        raise DataError(
            f"word id {int(ids.max())} has no label: only {labels_by_word.size} word labels given; "
            "pass one label per word of the example"
        )
    if (ids < -1).any():
        raise DataError(f"negative word id {int(ids.min())} in word_ids; use None for special tokens")
    is_word = ids >= 0
    labels = np.full(ids.size, IGNORE_INDEX, dtype=np.int64)
    labels[is_word] = labels_by_word[ids[is_word]]
    continuation = is_word & ~_first_subword_mask(ids)
    if not label_all_subwords:
        labels[continuation] = IGNORE_INDEX
    elif inside_label:
        for position in np.flatnonzero(continuation):
            labels[position] = inside_label.get(int(labels[position]), int(labels[position]))
    return labels.tolist()


def word_logits(word_counts: Sequence[int], features: Sequence[Mapping], outputs: Sequence) -> list[np.ndarray]:
    """Per example, a (words, classes) array: each word's logits at its first sub-word, in the
    feature (window) where that sub-word is farthest from the ends, so a word is read with most
    context on both sides; a row of NaN for a word no feature holds (e.g. one cut off by
    truncation). `word_counts[i]`: example i's words; `features[j]["word_ids"]`: each token's word
    (None or -1 for special tokens and padding), `features[j]["example"]` its example (default j:
    one feature per example); `outputs[j]`: its logits, (tokens, classes)."""
    classes = next((np.shape(o)[-1] for o in outputs), 0)
    chosen = [np.full((n, classes), np.nan, dtype=np.float64) for n in word_counts]
    margins = [np.full(n, -1, dtype=np.int64) for n in word_counts]
    for index, (feature, logits) in enumerate(zip(features, outputs)):
        owner, word_ids = feature.get("example", index), _word_id_array(feature["word_ids"])
        logits = np.asarray(logits)
        if logits.shape[0] != word_ids.size:
            raise DataError(f"feature {index}: {word_ids.size} word ids but logits for {logits.shape[0]} tokens; "
                            "they must align")
        if word_ids.max(initial=-1) >= len(chosen[owner]):
            raise DataError(f"feature {index}: word id {int(word_ids.max())} is beyond example {owner}'s "
                            f"{len(chosen[owner])} words")
        words, first = np.unique(word_ids, return_index=True)  # each word's first sub-word in the feature
        words, first = words[words >= 0], first[words >= 0]
        margin = np.minimum(first, word_ids.size - 1 - first)
        better = margin > margins[owner][words]
        chosen[owner][words[better]] = logits[first[better]]
        margins[owner][words[better]] = margin[better]
    return chosen


def word_classes(logits: np.ndarray) -> np.ndarray:
    """Each word's predicted class id from its `word_logits` row: the argmax, IGNORE_INDEX for a NaN row."""
    held = ~np.isnan(logits).any(axis=-1) if logits.shape[-1] else np.zeros(len(logits), dtype=bool)
    classes = np.full(len(logits), IGNORE_INDEX, dtype=np.int64)
    classes[held] = logits[held].argmax(axis=-1)
    return classes


def word_predictions(word_counts: Sequence[int], features: Sequence[Mapping], outputs: Sequence) -> list[np.ndarray]:
    """Per example, each word's predicted class id (IGNORE_INDEX for a word no feature holds): the
    argmax of its `word_logits`."""
    return [word_classes(logits) for logits in word_logits(word_counts, features, outputs)]
