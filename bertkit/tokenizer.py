"""Tokenizers for BERT-family encoders: a thin wrapper over the Rust `tokenizers` library.

Two kinds are supported, matching the two conventions checkpoints use in practice:

* ``"wordpiece"`` (BERT): Unicode cleanup + optional lowercasing, whitespace/punctuation
  pre-tokenization, WordPiece with ``##`` continuation pieces, and ``[CLS] A [SEP] B [SEP]``
  with token type ids 0 for the first segment and 1 for the second.
* ``"bpe"`` (RoBERTa): byte-level BPE (every byte string is encodable, so no unknowns in
  practice), and ``<s> A </s></s> B </s>`` with all token type ids 0.

All the per-token work (normalizing, splitting, truncating with stride, padding, offsets)
runs inside the Rust library; Python only validates inputs and stacks the results into
arrays. Files written by `Tokenizer.save_pretrained` load in `transformers`
(`BertTokenizerFast` / `RobertaTokenizerFast`) and vice versa.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import re
import warnings
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch
from tokenizers import AddedToken, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers import Tokenizer as _RustTokenizer
from tokenizers import trainers

from bertkit.errors import CheckpointError, ConfigError, DataError
from bertkit.models.hub_cache import resolve_model_dir
from bertkit.io import atomic_write_text, iter_text_lines, read_json_object

__all__ = ["Tokenizer", "BatchEncoding"]

# Default special tokens per kind, in the id order training assigns them.
_SPECIALS = {
    "wordpiece": {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"},
    # RoBERTa's order: <s>=0 <pad>=1 </s>=2 <unk>=3, <mask> last.
    "bpe": {"cls": "<s>", "pad": "<pad>", "sep": "</s>", "unk": "<unk>", "mask": "<mask>"},
}
_ROLES = ("pad", "unk", "cls", "sep", "mask")
_REQUIRED_ROLES = ("pad", "unk", "cls", "sep")  # a tokenizer without [MASK] is fine for fine-tuning
_DEFAULT_MAX_LENGTH = 512
# HF writes int(1e30) for "no limit"; anything this large is not a real position limit.
_ABSURD_MAX_LENGTH = 1_000_000
_EXPECTED_FILES = "tokenizer.json, or vocab.txt (WordPiece), or vocab.json + merges.txt (BPE)"


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
        if kind not in _SPECIALS:
            raise ConfigError(f"unknown tokenizer kind {kind!r}; use 'wordpiece' or 'bpe'")
        self._backend = backend
        self.kind = kind
        self._backend.no_truncation()
        self._backend.no_padding()
        self._special = dict(_SPECIALS[kind])
        self._special.update(special_tokens or {})
        missing = [self._special[r] for r in _REQUIRED_ROLES if self._id_of(self._special[r]) is None]
        if missing:
            raise CheckpointError(
                f"special tokens {missing} are not in the vocabulary; add them to the vocab "
                f"or name the right ones in tokenizer_config.json"
            )
        self.model_max_length = _sane_max_length(model_max_length)

    # ------------------------------------------------------------------ construction

    @classmethod
    def train_wordpiece(
        cls,
        files,
        vocab_size: int = 30522,
        min_frequency: int = 2,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        limit_alphabet: int = 1000,
        *,
        show_progress: bool = True,
    ) -> "Tokenizer":
        """Train a BERT WordPiece tokenizer on text files (one or more paths).

        Specials get ids 0-4 in the order [PAD] [UNK] [CLS] [SEP] [MASK], so [PAD] is 0 as
        BERT's embedding padding_idx assumes. `strip_accents=None` follows `lowercase`
        (BERT's rule). `limit_alphabet` caps the initial characters kept, so rare scripts in
        a large corpus do not eat the vocabulary.
        """
        paths = _check_training_files(files)
        _check_positive("vocab_size", vocab_size)
        specials = _SPECIALS["wordpiece"]
        backend = _RustTokenizer(models.WordPiece(unk_token=specials["unk"], max_input_chars_per_word=100))
        backend.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=strip_accents, lowercase=lowercase
        )
        backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        backend.decoder = decoders.WordPiece(prefix="##")
        alphabet, continuations = _wordpiece_alphabet(backend, paths, limit_alphabet)
        special_tokens = [specials[r] for r in _ROLES]
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            # the '##c' tokens ride along as specials only to get fixed ids (see _wordpiece_alphabet)
            special_tokens=special_tokens + continuations,
            initial_alphabet=alphabet,
            limit_alphabet=len(alphabet),
            continuing_subword_prefix="##",
            show_progress=show_progress,
        )
        _train(backend, paths, trainer)
        backend = _keep_added_tokens(backend, special_tokens)
        backend.post_processor = _bert_post_processor(backend, specials)
        return cls(backend, "wordpiece", specials, _DEFAULT_MAX_LENGTH)

    @classmethod
    def train_bpe(
        cls,
        files,
        vocab_size: int = 50265,
        min_frequency: int = 2,
        add_prefix_space: bool = False,
        *,
        show_progress: bool = True,
    ) -> "Tokenizer":
        """Train a RoBERTa-style byte-level BPE tokenizer on text files.

        Specials: <s>=0 <pad>=1 </s>=2 <unk>=3 <mask>=4. The initial alphabet is all 256
        byte symbols, so any text is encodable even if a byte never occurs in training.
        """
        paths = _check_training_files(files)
        _check_positive("vocab_size", vocab_size)
        specials = _SPECIALS["bpe"]
        backend = _RustTokenizer(models.BPE())
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
        backend.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=[specials[r] for r in ("cls", "pad", "sep", "unk", "mask")],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=show_progress,
        )
        _train(backend, paths, trainer)
        _add_bpe_specials(backend, specials)
        backend.post_processor = _roberta_post_processor(backend, specials, add_prefix_space)
        return cls(backend, "bpe", specials, _DEFAULT_MAX_LENGTH)

    @classmethod
    def from_pretrained(cls, directory) -> "Tokenizer":
        """Load from a Hugging Face tokenizer directory, or from one tokenizer file.

        Looks for tokenizer.json first, else vocab.txt (WordPiece, lowercasing per
        `do_lower_case` in tokenizer_config.json, default True), else vocab.json +
        merges.txt (byte-level BPE). tokenizer_config.json next to the file(s), when
        present, supplies special token names and `model_max_length`.
        """
        path = Path(resolve_model_dir(directory))  # a path, or ORG/NAME in the local HF cache
        if not path.exists():
            raise CheckpointError(f"tokenizer path {path} does not exist; expected a directory with {_EXPECTED_FILES}")
        folder = path if path.is_dir() else path.parent
        config = _read_json_config(folder / "tokenizer_config.json")
        config.update({k: v for k, v in _read_json_config(folder / "special_tokens_map.json").items() if k not in config})
        specials = {r: _token_content(config[f"{r}_token"]) for r in _ROLES if config.get(f"{r}_token")}

        if path.is_dir():
            file = next((path / n for n in ("tokenizer.json", "vocab.txt", "vocab.json") if (path / n).is_file()), None)
            if file is None:
                raise CheckpointError(f"no tokenizer files in {path}; expected {_EXPECTED_FILES}")
        else:
            file = path

        if file.name.endswith(".txt"):
            backend = _wordpiece_from_vocab(file, config, {**_SPECIALS["wordpiece"], **specials})
            kind = "wordpiece"
        else:
            data = _read_json_file(file)
            if "model" in data:  # a full tokenizer.json
                backend, kind = _from_tokenizer_json(file, data, config, specials)
            else:  # a BPE vocab.json; merges.txt must sit beside it
                backend = _bpe_from_vocab(file, config, {**_SPECIALS["bpe"], **specials})
                kind = "bpe"
        return cls(backend, kind, specials, config.get("model_max_length"))

    # ------------------------------------------------------------------ encoding

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
        Without it, truncated texts raise one warning per call, never an error.

        transformers' spellings are accepted too: `text_pair=` for `pairs`, truncation
        strategies ("longest_first", "only_first", "only_second", "do_not_truncate"), and
        `return_offsets_mapping=True`, which returns the offsets under transformers' key
        `offset_mapping`. (The defaults differ from transformers': padding and truncation on.)
        """
        if text_pair is not None:
            if pairs is not None:
                raise ConfigError("pass the second texts as pairs or text_pair, not both")
            pairs = text_pair
        truncation, strategy = _truncation_strategy(truncation)
        batch, pair_batch = _check_texts(texts, pairs)
        if return_tensors not in ("pt", "np", None):
            raise ConfigError(f"return_tensors={return_tensors!r} is not supported; use 'pt', 'np' or None")
        if padding not in (True, False, "longest", "max_length", "do_not_pad"):
            raise ConfigError(f"padding={padding!r} is not supported; use True, False or 'max_length'")
        if max_length is None:
            max_length = self.model_max_length or _DEFAULT_MAX_LENGTH
        _check_positive("max_length", max_length)
        if stride < 0:
            raise ConfigError(f"stride must be >= 0, got {stride}")

        inputs = batch if pair_batch is None else list(zip(batch, pair_batch))
        # Pairs are windowed over the second text only when overflowing (QA); otherwise
        # trim the longer one first, as BERT pre-processing does.
        if strategy is None:
            strategy = "only_second" if (pair_batch is not None and return_overflowing_tokens) else "longest_first"
        with self._settings(truncation, max_length, stride, strategy, padding):
            encodings = self._backend.encode_batch(inputs, add_special_tokens=True)

        if return_overflowing_tokens:
            rows, sample_map = [], []
            for i, enc in enumerate(encodings):
                pieces = [enc, *enc.overflowing]
                rows.extend(pieces)
                sample_map.extend([i] * len(pieces))
        else:
            rows, sample_map = encodings, None
            self._warn_if_truncated(encodings, truncation, max_length)

        return self._to_batch(
            rows,
            sample_map,
            return_word_ids=return_word_ids,
            return_offsets=return_offsets,
            return_offsets_mapping=return_offsets_mapping,
            return_special_tokens_mask=return_special_tokens_mask,
            return_tensors=return_tensors,
        )

    def tokenize(self, text: str, pair: str | None = None, add_special_tokens: bool = False) -> list[str]:
        """Token strings of one text (or pair), as transformers' `tokenize` (no specials by default)."""
        if not isinstance(text, str):
            raise DataError(f"tokenize takes one string, got {type(text).__name__}")
        _check_texts(text, pair)
        return self._backend.encode(text, pair, add_special_tokens=add_special_tokens).tokens

    def encode(self, text: str, pair: str | None = None, add_special_tokens: bool = True) -> list[int]:
        """Ids of one text (or pair), without truncation or padding."""
        if not isinstance(text, str):
            raise DataError(f"encode takes one string, got {type(text).__name__}; use encode_batch for many")
        _check_texts(text, pair)
        return self._backend.encode(text, pair, add_special_tokens=add_special_tokens).ids

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = False) -> list[list[int]]:
        """Ids for many texts at once (parallel, no padding/truncation, no offsets).

        Meant for building pre-training shards, so specials are off by default: the example
        builder adds [CLS]/[SEP] after packing segments.
        """
        batch, _ = _check_texts(list(texts), None)
        encode = getattr(self._backend, "encode_batch_fast", self._backend.encode_batch)  # skips offsets
        return [enc.ids for enc in encode(batch, add_special_tokens=add_special_tokens)]

    def word_ids_batch(self, texts: Sequence[str]) -> list[list[int | None]]:
        """Word index of every token, aligned with `encode_batch(texts)` (no specials).

        Whole-word masking uses this to group the pieces of one word.
        """
        batch, _ = _check_texts(list(texts), None)
        return [enc.word_ids for enc in self._backend.encode_batch(batch, add_special_tokens=False)]

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        """Text for one sequence of ids (list, numpy array or tensor)."""
        ids = _as_id_list(ids)
        if ids and isinstance(ids[0], list):
            raise DataError("decode takes one sequence of ids; use batch_decode for a batch")
        return self._backend.decode(ids, skip_special_tokens=skip_special_tokens)

    def batch_decode(self, batch, skip_special_tokens: bool = True) -> list[str]:
        """Texts for a batch of id sequences (list of lists or a 2-D tensor)."""
        return self._backend.decode_batch(_as_id_list(batch), skip_special_tokens=skip_special_tokens)

    def convert_ids_to_tokens(self, ids):
        """Token string(s) for an id or a sequence of ids (None for out-of-range ids)."""
        ids = _as_id_list(ids)
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
        ids = {self._id_of(self._special[r]) for r in _ROLES}
        ids.update(i for i, tok in self._backend.get_added_tokens_decoder().items() if tok.special)
        ids.discard(None)
        return sorted(ids)

    # ------------------------------------------------------------------ saving

    def save_pretrained(self, directory) -> None:
        """Write tokenizer.json, tokenizer_config.json, special_tokens_map.json and the
        vocabulary files (vocab.txt, or vocab.json + merges.txt) into `directory`.

        Each file is written to a temporary name and renamed, so an interrupted save never
        leaves a half-written file under the real name.
        """
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        data = json.loads(self._backend.to_str())
        files = {"tokenizer.json": self._backend.to_str(pretty=True)}
        special_map = {f"{r}_token": self._special[r] for r in _ROLES if self._id_of(self._special[r]) is not None}
        config = {**special_map, "tokenizer_class": "BertTokenizer" if self.kind == "wordpiece" else "RobertaTokenizer"}
        if self.model_max_length is not None:
            config["model_max_length"] = self.model_max_length
        vocab = data["model"]["vocab"]
        if self.kind == "wordpiece":
            lowercase, strip_accents = _wordpiece_normalization(data.get("normalizer"))
            config.update(do_lower_case=lowercase, strip_accents=strip_accents, tokenize_chinese_chars=True)
            files["vocab.txt"] = "".join(t + "\n" for t, _ in sorted(vocab.items(), key=lambda kv: kv[1]))
        else:
            # RoBERTa also names <s>/</s> as bos/eos; transformers reads them from here.
            config.update(bos_token=self.cls_token, eos_token=self.sep_token)
            config.update(add_prefix_space=_byte_level_prefix_space(data.get("pre_tokenizer")), trim_offsets=True)
            files["vocab.json"] = json.dumps(vocab, ensure_ascii=False)
            merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
            files["merges.txt"] = "#version: 0.2\n" + "".join(m + "\n" for m in merges)
        files["tokenizer_config.json"] = json.dumps(config, indent=2, ensure_ascii=False)
        files["special_tokens_map.json"] = json.dumps(special_map, indent=2, ensure_ascii=False)
        for name, text in files.items():
            atomic_write_text(out / name, text)  # 0644 under the umask, as transformers writes

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
                value = _word_ids_array(value) if return_tensors else [[-1 if w is None else w for w in r] for r in value]
            if return_tensors is None:
                data[key] = [list(map(list, r)) for r in value] if key in ("offsets", "offset_mapping") else value
                continue
            array = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=np.int64)
            if key in ("offsets", "offset_mapping") and array.size == 0:
                array = array.reshape(len(rows), 0, 2)  # keep (B, T, 2) even for empty rows
            data[key] = torch.from_numpy(array) if return_tensors == "pt" else array
        return BatchEncoding(data, list(rows))


# ---------------------------------------------------------------------- helpers


TRUNCATION_STRATEGIES = ("longest_first", "only_first", "only_second")


def _truncation_strategy(truncation) -> tuple[bool, str | None]:
    """(truncate?, strategy or None for the default) from a bool or transformers' strategy name."""
    if isinstance(truncation, bool):
        return truncation, None
    if truncation == "do_not_truncate":
        return False, None
    if truncation in TRUNCATION_STRATEGIES:
        return True, truncation
    raise ConfigError(f"truncation={truncation!r} is not supported; use True, False or one of "
                      f"{TRUNCATION_STRATEGIES + ('do_not_truncate',)}")


def _check_texts(texts, pairs) -> tuple[list[str], list[str] | None]:
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


def _check_positive(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


def _check_training_files(files) -> list[str]:
    """Resolve training files and reject missing or blank ones before the slow training starts."""
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    paths = [Path(f) for f in files]
    if not paths:
        raise DataError("no training files given: pass one or more text file paths")
    for path in paths:
        if not path.is_file():
            raise DataError(f"training file {path} does not exist (or is not a file); check the path")
        if not _has_text(path):
            raise DataError(f"training file {path} is empty or whitespace-only; remove it from the list")
    return [str(p) for p in paths]


def _has_text(path: Path, chunk: int = 1 << 16) -> bool:
    """True if the file has any non-whitespace byte (reads only until it finds one)."""
    with open(path, "rb") as f:
        while block := f.read(chunk):
            if block.strip():
                return True
    return False


def _train(backend: _RustTokenizer, paths: list[str], trainer) -> None:
    """Run the Rust trainer, translating its file errors into DataError naming the file."""
    try:
        backend.train(paths, trainer)
    except Exception as err:
        bad = next((p for p in paths if not _is_utf8(Path(p))), None)
        if bad is not None:
            raise _not_utf8(bad) from err
        raise DataError(f"tokenizer training failed on {paths[0]}{' ...' if len(paths) > 1 else ''}: {err}") from err


_ASCII_SPACE = re.compile(r"[ \t\n\r]+")  # what every normaliser keeps as a word boundary


def _wordpiece_alphabet(backend: _RustTokenizer, paths: list[str], limit_alphabet: int
                        ) -> tuple[list[str], list[str]]:
    """The characters WordPiece training keeps, and their '##' continuation tokens that occur.

    tokenizers' trainer creates each '##c' the first time it meets c inside a word while walking
    a hash map, so the ids of these tokens change from run to run; the ids break ties between
    equally frequent merges, so the vocabulary did too (huggingface/tokenizers#1794). Passed
    to the trainer up front in sorted order, they get fixed ids and training is repeatable.
    The alphabet is what the trainer keeps, the `limit_alphabet` most frequent characters, with
    ties broken by code point rather than hash order. One pass over the text, through the
    tokenizer's own normaliser and pre-tokeniser, run once per distinct space-separated string
    (both work within such strings; calling them per line was 1.5 s per MB).
    """
    chunks: Counter[str] = Counter()
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                while lines := f.readlines(1 << 20):
                    chunks.update(_ASCII_SPACE.split("".join(lines)))
        except UnicodeDecodeError as err:
            raise _not_utf8(path) from err
    char_counts: Counter[str] = Counter()
    inside_words: set[str] = set()
    for chunk, count in chunks.items():
        normalized = backend.normalizer.normalize_str(chunk)
        for word, _ in backend.pre_tokenizer.pre_tokenize_str(normalized):
            for char in word:
                char_counts[char] += count
            inside_words.update(word[1:])
    by_frequency = sorted(char_counts, key=lambda c: (-char_counts[c], c))
    alphabet = sorted(by_frequency[:limit_alphabet])
    return alphabet, ["##" + c for c in alphabet if c in inside_words]


def _keep_added_tokens(backend: _RustTokenizer, keep: list[str]) -> _RustTokenizer:
    """The tokenizer without the added (special) tokens outside `keep`; they stay in the vocabulary
    as ordinary tokens."""
    state = json.loads(backend.to_str())
    state["added_tokens"] = [t for t in state["added_tokens"] if t["content"] in keep]
    return _RustTokenizer.from_str(json.dumps(state))


def _not_utf8(path) -> DataError:
    return DataError(f"training file {path} is not valid UTF-8; re-encode it as UTF-8 "
                     f"(e.g. iconv -f latin1 -t utf-8) and train again")


def _is_utf8(path: Path, chunk: int = 1 << 20) -> bool:
    """Check UTF-8 validity in chunks (an incremental decoder handles characters split across chunks)."""

    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with open(path, "rb") as f:
            while block := f.read(chunk):
                decoder.decode(block)
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _bert_post_processor(backend: _RustTokenizer, specials: dict[str, str]):
    """[CLS] A [SEP] (type 0) and [CLS] A [SEP] B [SEP] with B and its [SEP] as type 1."""
    cls, sep = specials["cls"], specials["sep"]
    return processors.TemplateProcessing(
        single=f"{cls} $A {sep}",
        pair=f"{cls} $A {sep} $B:1 {sep}:1",
        special_tokens=[(cls, backend.token_to_id(cls)), (sep, backend.token_to_id(sep))],
    )


def _roberta_post_processor(backend: _RustTokenizer, specials: dict[str, str], add_prefix_space: bool):
    """<s> A </s> and <s> A </s></s> B </s>, all type 0; trims the byte-level space from offsets."""
    cls, sep = specials["cls"], specials["sep"]
    return processors.RobertaProcessing(
        (sep, backend.token_to_id(sep)),  # positional: the binding rejects these as keywords
        (cls, backend.token_to_id(cls)),
        trim_offsets=True,
        add_prefix_space=add_prefix_space,
    )


def _add_bpe_specials(backend: _RustTokenizer, specials: dict[str, str]) -> None:
    """Mark RoBERTa specials as unsplittable; <mask> swallows the space before it, so
    "a <mask>" masks the word " x" the model was trained to predict."""
    tokens = [AddedToken(specials[r], special=True, normalized=False) for r in ("cls", "pad", "sep", "unk")]
    tokens.append(AddedToken(specials["mask"], special=True, lstrip=True, normalized=False))
    backend.add_special_tokens(tokens)


def _wordpiece_from_vocab(file: Path, config: dict, specials: dict[str, str]) -> _RustTokenizer:
    """Build BERT's pipeline around a vocab.txt, as transformers does for slow checkpoints."""
    try:  # checked: a regular file, UTF-8 (the line of a bad byte named)
        lines = list(iter_text_lines(file))
    except DataError as err:
        raise CheckpointError(f"{err}; restore the tokenizer files") from None
    # One token per line, id = line number; a repeated token keeps its last id (as HF does).
    vocab = {line: i for i, (_, line) in enumerate(lines)}
    if not vocab:
        raise CheckpointError(f"{file} is empty; a WordPiece vocab.txt needs one token per line")
    lowercase = bool(config.get("do_lower_case", True))
    backend = _RustTokenizer(models.WordPiece(vocab=vocab, unk_token=specials["unk"], max_input_chars_per_word=100))
    backend.normalizer = normalizers.BertNormalizer(
        clean_text=True,
        handle_chinese_chars=bool(config.get("tokenize_chinese_chars", True)),
        strip_accents=config.get("strip_accents"),
        lowercase=lowercase,
    )
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece(prefix="##")
    present = [specials[r] for r in _ROLES if specials[r] in vocab]
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in present])
    if specials["cls"] in vocab and specials["sep"] in vocab:
        backend.post_processor = _bert_post_processor(backend, specials)
    return backend


def _bpe_from_vocab(file: Path, config: dict, specials: dict[str, str]) -> _RustTokenizer:
    """Build RoBERTa's byte-level pipeline around vocab.json + merges.txt."""
    merges = file.parent / "merges.txt"
    if not merges.is_file():
        raise CheckpointError(f"{merges} is missing; a BPE vocab.json needs merges.txt beside it")
    try:
        model = models.BPE.from_file(str(file), str(merges))
    except Exception as err:
        raise CheckpointError(f"cannot read BPE files {file} / {merges}: {err}; re-save the tokenizer") from err
    add_prefix_space = bool(config.get("add_prefix_space", False))
    backend = _RustTokenizer(model)
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    backend.decoder = decoders.ByteLevel()
    vocab = backend.get_vocab()
    if all(specials[r] in vocab for r in _REQUIRED_ROLES):
        _add_bpe_specials(backend, specials)
        backend.post_processor = _roberta_post_processor(backend, specials, add_prefix_space)
    return backend


def _from_tokenizer_json(file: Path, data: dict, config: dict, specials: dict[str, str]):
    """Load a full tokenizer.json; returns (backend, kind)."""
    kinds = {"WordPiece": "wordpiece", "BPE": "bpe"}
    if not isinstance(data["model"], dict):
        raise CheckpointError(f"{file}: \"model\" must be a JSON object with a \"type\"; restore the tokenizer files, "
                              "or save the tokenizer again")
    model_type = data["model"].get("type")
    if model_type not in kinds:
        raise CheckpointError(
            f"{file} holds a {model_type} model; bertkit supports WordPiece and BPE tokenizers only"
        )
    kind = kinds[model_type]
    try:
        backend = _RustTokenizer.from_str(json.dumps(data))
    except Exception as err:
        raise CheckpointError(f"cannot load {file}: {err}; re-save it with a recent `tokenizers`") from err
    if backend.post_processor is None:  # some exports omit it; without it no [CLS]/[SEP] get added
        names = {**_SPECIALS[kind], **specials}
        if kind == "wordpiece":
            backend.post_processor = _bert_post_processor(backend, names)
        else:
            prefix = _byte_level_prefix_space(data.get("pre_tokenizer"))
            backend.post_processor = _roberta_post_processor(backend, names, prefix)
    return backend, kind


def _read_json_file(path: Path) -> dict:
    return read_json_object(path, "restore the tokenizer files, or save the tokenizer again", CheckpointError)


def _read_json_config(path: Path) -> dict:
    """A side config file (tokenizer_config.json etc.) or {} if absent."""
    return _read_json_file(path) if path.is_file() else {}


def _token_content(value) -> str:
    """Special tokens appear as plain strings or as AddedToken dicts {"content": ...}."""
    return value["content"] if isinstance(value, dict) else str(value)


def _sane_max_length(value) -> int | None:
    if value is None:
        return None
    try:
        value = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return value if 0 < value < _ABSURD_MAX_LENGTH else None


def _wordpiece_normalization(normalizer: dict | None) -> tuple[bool, bool | None]:
    """(lowercase, strip_accents) implied by a tokenizer.json normalizer, for tokenizer_config.json."""
    if not normalizer:
        return False, None
    if normalizer.get("type") == "BertNormalizer":
        return bool(normalizer.get("lowercase")), normalizer.get("strip_accents")
    parts = normalizer.get("normalizers", [normalizer])
    types = {p.get("type") for p in parts}
    return "Lowercase" in types, (True if "StripAccents" in types else None)


def _byte_level_prefix_space(pre_tokenizer: dict | None) -> bool:
    if not pre_tokenizer:
        return False
    parts = pre_tokenizer.get("pretokenizers", [pre_tokenizer])
    return any(p.get("type") == "ByteLevel" and p.get("add_prefix_space") for p in parts)


def _as_id_list(ids):
    """Plain Python ints from a tensor, numpy array or list."""
    if isinstance(ids, (torch.Tensor, np.ndarray)):
        return ids.tolist()
    if isinstance(ids, Iterable) and not isinstance(ids, (str, bytes)):
        return [_as_id_list(i) if isinstance(i, (torch.Tensor, np.ndarray, list, tuple)) else int(i) for i in ids]
    return int(ids)


def _word_ids_array(rows: list[list[int | None]]) -> np.ndarray:
    """(B, T) int64 word ids with -1 for None, converted in numpy rather than per token.

    None becomes NaN in a float array, and float64 holds every realistic word index exactly.
    """
    array = np.array(rows, dtype=np.float64)
    return np.nan_to_num(array, nan=-1.0).astype(np.int64)
