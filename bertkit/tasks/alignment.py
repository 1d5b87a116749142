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

__all__ = ["IGNORE_INDEX", "align_labels_to_tokens", "word_predictions_from_tokens"]


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


def word_predictions_from_tokens(
    word_ids: Sequence[int | None],
    token_pred: Sequence[int],
    num_words: int | None = None,
    missing: int = IGNORE_INDEX,
) -> list[int]:
    """Per-word predictions: the prediction of each word's first sub-word.

    The result has `num_words` entries (default: largest word id + 1); a word with no token
    (e.g. cut off by truncation) gets `missing`.
    """
    ids = _word_id_array(word_ids)
    predictions = np.asarray(token_pred)
    if predictions.shape[0] != ids.size:
        raise DataError(f"{ids.size} word ids but {predictions.shape[0]} token predictions; they must align")
    if num_words is None:
        num_words = int(ids.max(initial=-1)) + 1
    first = _first_subword_mask(ids)
    if first.any() and ids[first].max() >= num_words:
        raise DataError(f"word id {int(ids[first].max())} is beyond num_words={num_words}")
    words = np.full(num_words, missing, dtype=np.int64)
    positions = np.flatnonzero(first)
    # np.unique's return_index is the first occurrence: a word's first piece wins even if a
    # special token were to split the word into two runs
    word_ids_seen, first_index = np.unique(ids[positions], return_index=True)
    words[word_ids_seen] = predictions[positions[first_index]]
    return words.tolist()
