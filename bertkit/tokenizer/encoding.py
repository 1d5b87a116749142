"""The call API's inputs and outputs: the texts and options a call takes, checked before the
Rust tokenizer runs, and `BatchEncoding`, the arrays it returns."""

from __future__ import annotations

from typing import Iterable

import numpy as np
import torch

from bertkit.errors import ConfigError, DataError
from bertkit.tokenizer.kinds import check_positive


class BatchEncoding(dict):
    """The result of `Tokenizer.__call__`: a dict of arrays keyed like Hugging Face's.

    Keys: ``input_ids``, ``token_type_ids``, ``attention_mask`` and, when requested,
    ``word_ids`` (-1 on special and padding positions), ``offsets`` (B, T, 2 character spans,
    relative to the text the token came from), ``special_tokens_mask`` and
    ``overflow_to_sample_mapping``. ``encodings`` keeps the underlying Rust encodings, one per
    row, for anything else (e.g. `sequence_ids`).
    """

    def __init__(self, data: dict, encodings: list | None = None):
        super().__init__(data)
        self.encodings = encodings or []

    def __getattr__(self, name: str):
        """`enc.input_ids` as `enc["input_ids"]` (transformers' BatchEncoding allows both)."""
        if name.startswith("__") or name not in self:
            raise AttributeError(f"BatchEncoding has no key or attribute {name!r}; keys: {sorted(self)}")
        return self[name]

    def word_ids(self, row: int) -> list[int | None]:
        """Word index of each token in `row` (None for special tokens and padding)."""
        return self.encodings[row].word_ids

    def sequence_ids(self, row: int) -> list[int | None]:
        """0/1 for tokens of the first/second text of a pair in `row`, None for specials.

        Unlike token_type_ids this also tells the segments apart for RoBERTa, whose type ids
        are all 0 (QA needs it to find the context tokens).
        """
        return self.encodings[row].sequence_ids

    def to(self, device) -> "BatchEncoding":
        """Move every tensor to `device` (in place) and return self."""
        for key, value in self.items():
            if isinstance(value, torch.Tensor):
                self[key] = value.to(device)
        return self


TRUNCATION_STRATEGIES = ("longest_first", "only_first", "only_second")


def second_texts(pairs, text_pair):
    """The second texts, under our name (`pairs`) or transformers' (`text_pair`)."""
    if text_pair is None:
        return pairs
    if pairs is not None:
        raise ConfigError("pass the second texts as pairs or text_pair, not both")
    return text_pair


def check_call_options(return_tensors, padding, max_length: int, stride: int) -> None:
    if return_tensors not in ("pt", "np", None):
        raise ConfigError(f"return_tensors={return_tensors!r} is not supported; use 'pt', 'np' or None")
    if padding not in (True, False, "longest", "max_length", "do_not_pad"):
        raise ConfigError(f"padding={padding!r} is not supported; use True, False or 'max_length'")
    check_positive("max_length", max_length)
    if stride < 0:
        raise ConfigError(f"stride must be >= 0, got {stride}")



def check_window_room(backend, batch: list[str], pair_batch: list[str] | None, max_length: int, stride: int,
                      strategy: str) -> None:
    """Refuse, before the Rust tokenizer runs, a truncation it cannot do: a max_length the special tokens
    fill, or a text cut to `stride` tokens or fewer, where tokenizers panics (a PanicException with a
    backtrace, past `except Exception`). A pair's cut lengths follow tokenizers' rule (`pair_cut`)."""
    specials = backend.num_special_tokens_to_add(pair_batch is not None)
    budget = max_length - specials  # the text tokens of one row
    if budget < 1 + (pair_batch is not None):
        raise ConfigError(f"max_length={max_length} leaves no room for text: the {specials} special tokens fill it; "
                          f"use a max_length of at least {specials + 1 + (pair_batch is not None)}")
    if pair_batch is None:
        if stride >= budget:
            raise ConfigError(f"stride={stride} is too large for max_length={max_length}: the {specials} special "
                              f"tokens leave {budget} tokens of text per window; use a stride below {budget}")
        return
    if not stride:
        return
    for row, n1, n2 in _pair_lengths(backend, batch, pair_batch, budget - stride, strategy):
        for side, (kept, length) in enumerate(zip(pair_cut(n1, n2, budget, strategy), (n1, n2))):
            if 0 < kept <= stride and kept < length:
                whole, cut = ("second", "first") if side == 0 else ("first", "second")
                raise DataError(f"pair {row + 1}: its {whole} text has {(n1, n2)[1 - side]} tokens, which leaves "
                                f"{kept} of each max_length={max_length} window for the {cut}, not more than "
                                f"stride={stride}; shorten the {whole} text, raise max_length or lower the stride")


def _pair_lengths(backend, batch: list[str], pair_batch: list[str], room: int, strategy: str):
    """(row, first's tokens, second's tokens) of every pair that may be cut to the stride or fewer tokens.
    With only_first / only_second only the text kept whole is measured in every row (QA's questions: short),
    the other only where the whole one has `room` (the budget minus the stride) tokens or more."""
    encode = getattr(backend, "encode_batch_fast", backend.encode_batch)  # lengths only: no offsets

    def lengths(texts):
        return [len(e) for e in encode(texts, add_special_tokens=False)]

    if strategy == "longest_first":
        yield from zip(range(len(batch)), lengths(batch), lengths(pair_batch))
        return
    kept_whole = 0 if strategy == "only_second" else 1
    whole = lengths((batch, pair_batch)[kept_whole])
    rows = [i for i, n in enumerate(whole) if n >= room]
    cut = lengths([(pair_batch, batch)[kept_whole][i] for i in rows]) if rows else []
    for i, n in zip(rows, cut):
        yield (i, whole[i], n) if kept_whole == 0 else (i, n, whole[i])


def pair_cut(n1: int, n2: int, budget: int, strategy: str) -> tuple[int, int]:
    """The lengths tokenizers cuts a pair of n1 and n2 text tokens to, in `budget` tokens
    (tokenizers/src/utils/truncation.rs: longest_first keeps the shorter text whole when the longer
    can take the rest, else halves the budget)."""
    if n1 + n2 <= budget:
        return n1, n2
    if strategy == "only_first":
        return budget - n2, n2
    if strategy == "only_second":
        return n1, budget - n1
    short, long_ = sorted((n1, n2))
    long_ = short if short > budget else max(short, budget - short)
    if short + long_ > budget:
        short, long_ = budget // 2, budget // 2 + budget % 2
    return (short, long_) if n1 <= n2 else (long_, short)

def with_overflow(encodings) -> tuple[list, list[int]]:
    """(every encoding followed by its overflowing windows, the input index of each row)."""
    rows, sample_map = [], []
    for i, enc in enumerate(encodings):
        pieces = [enc, *enc.overflowing]
        rows.extend(pieces)
        sample_map.extend([i] * len(pieces))
    return rows, sample_map


def truncation_strategy(truncation) -> tuple[bool, str | None]:
    """(truncate?, strategy or None for the default) from a bool or transformers' strategy name."""
    if isinstance(truncation, bool):
        return truncation, None
    if truncation == "do_not_truncate":
        return False, None
    if truncation in TRUNCATION_STRATEGIES:
        return True, truncation
    raise ConfigError(f"truncation={truncation!r} is not supported; use True, False or one of "
                      f"{TRUNCATION_STRATEGIES + ('do_not_truncate',)}")


def check_texts(texts, pairs) -> tuple[list[str], list[str] | None]:
    """Validate call inputs and return them as lists (a lone string becomes a batch of one)."""
    if isinstance(texts, str):
        if pairs is not None and not isinstance(pairs, str):
            raise DataError(f"texts is one string but pairs is {type(pairs).__name__}; pass a string for pairs too")
        return [texts], None if pairs is None else [pairs]
    if not isinstance(texts, (list, tuple)):
        raise DataError(f"texts must be a string or a list of strings, got {type(texts).__name__}")
    if len(texts) == 0:
        raise DataError("no texts given: pass a non-empty string or list of strings")
    _check_all_str(texts, "texts")
    if pairs is None:
        return list(texts), None
    if isinstance(pairs, str) or not isinstance(pairs, (list, tuple)) or len(pairs) != len(texts):
        size = len(pairs) if isinstance(pairs, (list, tuple)) else type(pairs).__name__
        raise DataError(f"pairs must be a list of {len(texts)} strings (one per text), got {size}")
    _check_all_str(pairs, "pairs")
    return list(texts), list(pairs)


def _check_all_str(items, name: str) -> None:
    if not all(isinstance(t, str) for t in items):  # fast path; find the culprit only on failure
        index = next(i for i, t in enumerate(items) if not isinstance(t, str))
        raise DataError(
            f"{name}[{index}] is {type(items[index]).__name__}, not str; convert or drop it before tokenizing"
        )


def as_id_list(ids):
    """Plain Python ints from a tensor, numpy array or list."""
    if isinstance(ids, (torch.Tensor, np.ndarray)):
        return ids.tolist()
    if isinstance(ids, Iterable) and not isinstance(ids, (str, bytes)):
        return [as_id_list(i) if isinstance(i, (torch.Tensor, np.ndarray, list, tuple)) else int(i) for i in ids]
    return int(ids)


def word_ids_array(rows: list[list[int | None]]) -> np.ndarray:
    """(B, T) int64 word ids with -1 for None, converted in numpy rather than per token.

    None becomes NaN in a float array, and float64 holds every realistic word index exactly.
    """
    array = np.array(rows, dtype=np.float64)
    return np.nan_to_num(array, nan=-1.0).astype(np.int64)
