"""`Tokenizer`: the call API (encode, decode, the special tokens) over a configured Rust
tokenizer; training is training.py, the files files.py, the arrays a call returns encoding.py."""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch
from tokenizers import Tokenizer as _RustTokenizer

from bertkit.errors import CheckpointError, ConfigError, DataError
from bertkit.io import atomic_write_text, make_output_dir
from bertkit.tokenizer.encoding import (BatchEncoding, as_id_list, check_call_options, check_texts, check_window_room,
                                        second_texts, truncation_strategy, with_overflow, word_ids_array)
from bertkit.tokenizer.files import read_tokenizer, sane_max_length, tokenizer_files
from bertkit.tokenizer.kinds import DEFAULT_MAX_LENGTH, REQUIRED_ROLES, ROLES, SPECIALS
from bertkit.tokenizer.training import bpe_backend, wordpiece_backend


class Tokenizer:
    """A WordPiece or byte-level BPE tokenizer with a Hugging Face-like interface.

    Build one with `train_wordpiece`, `train_bpe` or `from_pretrained`; the constructor wraps
    an already configured `tokenizers.Tokenizer` (its truncation/padding settings are
    cleared: each call chooses its own). A call sets those settings on the shared Rust object
    for its duration, so share one instance between threads only for `encode*`/`decode`;
    give each thread its own for `__call__`. (DataLoader worker processes are fine.)
    """

    def __init__(
        self,
        backend: _RustTokenizer,
        kind: str,
        special_tokens: dict[str, str] | None = None,
        model_max_length: int | None = None,
    ):
        if kind not in SPECIALS:
            raise ConfigError(f"unknown tokenizer kind {kind!r}; use 'wordpiece' or 'bpe'")
        self._backend = backend
        self.kind = kind
        self._backend.no_truncation()
        self._backend.no_padding()
        self._special = dict(SPECIALS[kind])
        self._special.update(special_tokens or {})
        missing = [self._special[r] for r in REQUIRED_ROLES if self._id_of(self._special[r]) is None]
        if missing:
            raise CheckpointError(
                f"special tokens {missing} are not in the vocabulary; add them to the vocab "
                f"or name the right ones in tokenizer_config.json"
            )
        self.model_max_length = sane_max_length(model_max_length)

    # ------------------------------------------------------------------ construction

    @classmethod
    def train_wordpiece(
        cls,
        files=None,
        vocab_size: int = 30522,
        min_frequency: int = 2,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        limit_alphabet: int = 1000,
        *,
        texts: Iterable[str] | None = None,
        show_progress: bool = True,
    ) -> "Tokenizer":
        """A BERT WordPiece tokenizer trained on text files or `texts` (training.py)."""
        backend = wordpiece_backend(files, vocab_size, min_frequency, lowercase, strip_accents, limit_alphabet,
                                    texts=texts, show_progress=show_progress)
        return cls(backend, "wordpiece", SPECIALS["wordpiece"], DEFAULT_MAX_LENGTH)

    @classmethod
    def train_bpe(
        cls,
        files=None,
        vocab_size: int = 50265,
        min_frequency: int = 2,
        add_prefix_space: bool = False,
        *,
        texts: Iterable[str] | None = None,
        show_progress: bool = True,
    ) -> "Tokenizer":
        """A RoBERTa-style byte-level BPE tokenizer trained on text files or `texts` (training.py)."""
        backend = bpe_backend(files, vocab_size, min_frequency, add_prefix_space, texts=texts,
                              show_progress=show_progress)
        return cls(backend, "bpe", SPECIALS["bpe"], DEFAULT_MAX_LENGTH)

    @classmethod
    def from_pretrained(cls, directory) -> "Tokenizer":
        """Load from a Hugging Face tokenizer directory, or from one tokenizer file (files.py)."""
        return cls(*read_tokenizer(directory))

    @property
    def backend_tokenizer(self) -> _RustTokenizer:
        """The Rust `tokenizers.Tokenizer` underneath (transformers' name): to read its normalizer,
        pre-tokenizer and model; a call sets its truncation and padding for its own duration."""
        return self._backend

    def with_backend(self, backend: _RustTokenizer) -> "Tokenizer":
        """A tokenizer of this kind, special tokens and length limit over another Rust tokenizer
        (e.g. this one's with a grown vocabulary: tokenizer/extend.py)."""
        return type(self)(backend, self.kind, self._special, self.model_max_length)

    def __call__(
        self,
        texts,
        pairs=None,
        *,
        text_pair=None,
        padding=True,
        truncation: bool | str = True,
        max_length: int | None = None,
        stride: int = 0,
        return_overflowing_tokens: bool = False,
        return_word_ids: bool = False,
        return_offsets: bool = False,
        return_offsets_mapping: bool = False,
        return_special_tokens_mask: bool = False,
        return_tensors: str | None = "pt",
    ) -> BatchEncoding:
        """Encode a text or a batch (optionally paired) into model inputs.

        A single string is treated as a batch of one, so outputs are always (B, T).
        `padding`: True/"longest" pads to the longest row, "max_length" to `max_length`,
        False leaves rows ragged (only allowed with `return_tensors=None` unless the rows
        happen to be equal). `max_length` defaults to `model_max_length` (or 512).

        Truncation keeps the first `max_length` tokens (specials included). With
        `return_overflowing_tokens` the rest becomes extra rows that overlap the previous
        window by `stride` tokens, and `overflow_to_sample_mapping` gives each row's input
        index; for pairs only the second text is windowed (question + context QA style).
        Without it, truncated texts raise one warning per call, never an error. A window with no room
        for text, or no more for a cut text than `stride`, is refused (the Rust tokenizer panics).

        transformers' spellings are accepted too: `text_pair=` for `pairs`, truncation
        strategies ("longest_first", "only_first", "only_second", "do_not_truncate"), and
        `return_offsets_mapping=True`, which returns the offsets under transformers' key
        `offset_mapping`. (The defaults differ from transformers': padding and truncation on.)
        """
        pairs = second_texts(pairs, text_pair)
        truncation, strategy = truncation_strategy(truncation)
        batch, pair_batch = check_texts(texts, pairs)
        if max_length is None:
            max_length = self.model_max_length or DEFAULT_MAX_LENGTH
        check_call_options(return_tensors, padding, max_length, stride)

        inputs = batch if pair_batch is None else list(zip(batch, pair_batch))
        # Pairs are windowed over the second text only when overflowing (QA); otherwise
        # trim the longer one first, as BERT pre-processing does.
        if strategy is None:
            strategy = "only_second" if (pair_batch is not None and return_overflowing_tokens) else "longest_first"
        if truncation:
            check_window_room(self._backend, batch, pair_batch, max_length, stride, strategy)
        with self._settings(truncation, max_length, stride, strategy, padding):
            encodings = self._backend.encode_batch(inputs, add_special_tokens=True)
        if return_overflowing_tokens:
            rows, sample_map = with_overflow(encodings)
        else:
            rows, sample_map = encodings, None
            self._warn_if_truncated(encodings, truncation, max_length)
        return self._to_batch(rows, sample_map, return_word_ids=return_word_ids, return_offsets=return_offsets,
                              return_offsets_mapping=return_offsets_mapping,
                              return_special_tokens_mask=return_special_tokens_mask, return_tensors=return_tensors)

    def tokenize(self, text: str, pair: str | None = None, add_special_tokens: bool = False) -> list[str]:
        """Token strings of one text (or pair), as transformers' `tokenize` (no specials by default)."""
        if not isinstance(text, str):
            raise DataError(f"tokenize takes one string, got {type(text).__name__}")
        check_texts(text, pair)
        return self._backend.encode(text, pair, add_special_tokens=add_special_tokens).tokens

    def encode(self, text: str, pair: str | None = None, add_special_tokens: bool = True) -> list[int]:
        """Ids of one text (or pair), without truncation or padding."""
        if not isinstance(text, str):
            raise DataError(f"encode takes one string, got {type(text).__name__}; use encode_batch for many")
        check_texts(text, pair)
        return self._backend.encode(text, pair, add_special_tokens=add_special_tokens).ids

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = False) -> list[list[int]]:
        """Ids for many texts at once (parallel, no padding/truncation, no offsets).

        Meant for building pre-training shards, so specials are off by default: the example
        builder adds [CLS]/[SEP] after packing segments.
        """
        batch, _ = check_texts(list(texts), None)
        encode = getattr(self._backend, "encode_batch_fast", self._backend.encode_batch)  # skips offsets
        return [enc.ids for enc in encode(batch, add_special_tokens=add_special_tokens)]

    def word_ids_batch(self, texts: Sequence[str]) -> list[list[int | None]]:
        """Word index of every token, aligned with `encode_batch(texts)` (no specials).

        Whole-word masking uses this to group the pieces of one word.
        """
        batch, _ = check_texts(list(texts), None)
        return [enc.word_ids for enc in self._backend.encode_batch(batch, add_special_tokens=False)]

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        """Text for one sequence of ids (list, numpy array or tensor)."""
        ids = as_id_list(ids)
        if ids and isinstance(ids[0], list):
            raise DataError("decode takes one sequence of ids; use batch_decode for a batch")
        return self._backend.decode(ids, skip_special_tokens=skip_special_tokens)

    def batch_decode(self, batch, skip_special_tokens: bool = True) -> list[str]:
        """Texts for a batch of id sequences (list of lists or a 2-D tensor)."""
        return self._backend.decode_batch(as_id_list(batch), skip_special_tokens=skip_special_tokens)

    def convert_ids_to_tokens(self, ids):
        """Token string(s) for an id or a sequence of ids (None for out-of-range ids)."""
        ids = as_id_list(ids)
        if isinstance(ids, int):
            return self._backend.id_to_token(ids)
        return [self._backend.id_to_token(i) for i in ids]

    def convert_tokens_to_ids(self, tokens):
        """Id(s) for a token or a list of tokens; unknown tokens map to the [UNK] id."""
        if isinstance(tokens, str):
            return self._id_or_unk(tokens)
        return [self._id_or_unk(t) for t in tokens]

    # ------------------------------------------------------------------ vocabulary

    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included (the embedding table needs this many rows)."""
        return self._backend.get_vocab_size(with_added_tokens=True)

    def __len__(self) -> int:
        return self.vocab_size

    def get_vocab(self) -> dict[str, int]:
        """Token -> id for the whole vocabulary, added tokens included."""
        return self._backend.get_vocab(with_added_tokens=True)

    @property
    def pad_token(self) -> str:
        return self._special["pad"]

    @property
    def unk_token(self) -> str:
        return self._special["unk"]

    @property
    def cls_token(self) -> str:
        return self._special["cls"]

    @property
    def sep_token(self) -> str:
        return self._special["sep"]

    @property
    def mask_token(self) -> str:
        return self._special["mask"]

    @property
    def pad_token_id(self) -> int:
        return self._id_of(self.pad_token)

    @property
    def unk_token_id(self) -> int:
        return self._id_of(self.unk_token)

    @property
    def cls_token_id(self) -> int:
        return self._id_of(self.cls_token)

    @property
    def sep_token_id(self) -> int:
        return self._id_of(self.sep_token)

    @property
    def mask_token_id(self) -> int | None:
        """Id of the mask token, or None if the vocabulary has none."""
        return self._id_of(self.mask_token)

    @property
    def all_special_ids(self) -> list[int]:
        """Sorted ids of the role tokens and any other added special tokens."""
        ids = {self._id_of(self._special[r]) for r in ROLES}
        ids.update(i for i, tok in self._backend.get_added_tokens_decoder().items() if tok.special)
        ids.discard(None)
        return sorted(ids)

    # ------------------------------------------------------------------ saving

    def save_pretrained(self, directory) -> None:
        """Write tokenizer.json, tokenizer_config.json, special_tokens_map.json and the
        vocabulary files (vocab.txt, or vocab.json + merges.txt) into `directory`.

        Each file is written to a temporary name and renamed, so an interrupted save never
        leaves a half-written file under the real name. The other kind's vocabulary files
        (vocab.json + merges.txt beside a WordPiece, vocab.txt beside a BPE) are removed: a
        reader that looks at them first would get another tokenizer's tokens.
        """
        out = Path(make_output_dir(directory))
        special_map = {f"{r}_token": self._special[r] for r in ROLES if self._id_of(self._special[r]) is not None}
        files = tokenizer_files(self._backend, self.kind, special_map, self.model_max_length)
        for name, text in files.items():
            atomic_write_text(out / name, text)  # 0644 under the umask, as transformers writes
        for name in {"vocab.txt", "vocab.json", "merges.txt"} - set(files):
            (out / name).unlink(missing_ok=True)

    # ------------------------------------------------------------------ internals

    def _id_of(self, token: str) -> int | None:
        return self._backend.token_to_id(token)

    def _id_or_unk(self, token: str) -> int:
        found = self._id_of(token)
        return self.unk_token_id if found is None else found

    @contextlib.contextmanager
    def _settings(self, truncation, max_length, stride, strategy, padding):
        """Apply one call's truncation/padding to the Rust tokenizer, then clear them, so
        `encode`/`encode_batch` never inherit a previous call's settings."""
        try:
            if truncation:
                self._backend.enable_truncation(max_length, stride=stride, strategy=strategy)
            if padding in (True, "longest", "max_length"):
                self._backend.enable_padding(
                    pad_id=self.pad_token_id,
                    pad_type_id=0,
                    pad_token=self.pad_token,
                    length=max_length if padding == "max_length" else None,
                )
            yield
        except Exception as err:  # the Rust library reports bad settings as plain Exceptions
            message = str(err).lower()
            if truncation and stride and "stride" in message:
                raise ConfigError(
                    f"stride={stride} is too large for max_length={max_length}; "
                    f"use a stride smaller than max_length minus the special tokens"
                ) from err
            if truncation and "truncat" in message:
                raise DataError(
                    f"cannot truncate to max_length={max_length} ({err}); "
                    f"raise max_length or shorten the first text of each pair"
                ) from err
            raise
        finally:
            self._backend.no_truncation()
            self._backend.no_padding()

    def _warn_if_truncated(self, encodings, truncation: bool, max_length: int) -> None:
        """One warning per call: silent truncation loses text, a crash would lose the run."""
        if truncation:
            # Only rows filled up to max_length can have been cut; reading `.overflowing`
            # builds Python objects for every leftover window, so skip the other rows.
            cut = sum(
                1
                for enc in encodings
                if len(enc) >= max_length and enc.attention_mask[max_length - 1] and enc.overflowing
            )
            if cut:
                warnings.warn(
                    f"{cut} of {len(encodings)} texts were truncated to max_length={max_length} tokens and their "
                    "ends not read; raise the maximum length or split long texts (from Python, "
                    "return_overflowing_tokens=True keeps the rest as extra windows)",
                    stacklevel=3,
                )
        elif self.model_max_length is not None:
            longest = max(len(enc.ids) for enc in encodings)
            if longest > self.model_max_length:
                warnings.warn(
                    f"a text has {longest} tokens, more than model_max_length={self.model_max_length}; "
                    f"the model cannot take it without truncation=True",
                    stacklevel=3,
                )

    def _to_batch(self, rows, sample_map, *, return_word_ids, return_offsets, return_offsets_mapping,
                  return_special_tokens_mask, return_tensors) -> BatchEncoding:
        """Stack per-row encodings into the requested array type."""
        columns = {
            "input_ids": [e.ids for e in rows],
            "token_type_ids": [e.type_ids for e in rows],
            "attention_mask": [e.attention_mask for e in rows],
        }
        if return_special_tokens_mask:
            columns["special_tokens_mask"] = [e.special_tokens_mask for e in rows]
        if return_offsets:
            columns["offsets"] = [e.offsets for e in rows]
        if return_offsets_mapping:  # the same spans under transformers' name
            columns["offset_mapping"] = [e.offsets for e in rows]
        if return_word_ids:
            columns["word_ids"] = [e.word_ids for e in rows]

        lengths = {len(ids) for ids in columns["input_ids"]}
        if return_tensors is not None and len(lengths) > 1:
            raise DataError(
                f"rows have different lengths ({min(lengths)}-{max(lengths)} tokens) so they cannot be "
                f"stacked; use padding=True, or truncation=True with padding='max_length', or return_tensors=None"
            )
        if sample_map is not None:
            columns["overflow_to_sample_mapping"] = sample_map

        data = {}
        for key, value in columns.items():
            if key == "word_ids":
                value = (word_ids_array(value) if return_tensors
                         else [[-1 if w is None else w for w in r] for r in value])
            if return_tensors is None:
                data[key] = [list(map(list, r)) for r in value] if key in ("offsets", "offset_mapping") else value
                continue
            array = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=np.int64)
            if key in ("offsets", "offset_mapping") and array.size == 0:
                array = array.reshape(len(rows), 0, 2)  # keep (B, T, 2) even for empty rows
            data[key] = torch.from_numpy(array) if return_tensors == "pt" else array
        return BatchEncoding(data, list(rows))


# ---------------------------------------------------------------------- helpers
