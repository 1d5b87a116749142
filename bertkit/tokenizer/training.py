"""Training a tokenizer: WordPiece (BERT's) or byte-level BPE (RoBERTa's), on text files or on
lines of text already in memory, with the files checked before the slow training starts."""

from __future__ import annotations

import codecs
import json
import os
import re
import warnings
from collections import Counter
from pathlib import Path
from typing import Iterable

from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers import Tokenizer as _RustTokenizer

from bertkit.errors import ConfigError, DataError
from bertkit.tokenizer.kinds import (ROLES, SPECIALS, add_bpe_specials, bert_post_processor, check_positive,
                                     roberta_post_processor)


SMALL_VOCABULARY = 0.5  # a vocabulary under this share of the size asked: the text ran out of pieces


def small_vocabulary(got: int, asked: int, min_frequency: int, option: str) -> str | None:
    """Said when training gave far fewer tokens than asked (walk O #8: 60 for 2,000, unsaid): the
    merges stop when no pair of pieces occurs `min_frequency` times, so the text is what is short.
    `option`: the minimum frequency's name where the caller sets it."""
    if got >= SMALL_VOCABULARY * asked:
        return None
    lower = f", as may a lower {option}" if min_frequency > 1 else ""
    return (f"the vocabulary has {got:,} tokens of the {asked:,} asked: the text has only {got:,} distinct "
            f"pieces (its characters, the special tokens, and the merges of pieces seen {min_frequency}+ times); "
            f"a larger corpus gives a fuller vocabulary{lower}")


def wordpiece_backend(
    files=None,
    vocab_size: int = 30522,
    min_frequency: int = 2,
    lowercase: bool = True,
    strip_accents: bool | None = None,
    limit_alphabet: int = 1000,
    *,
    texts: Iterable[str] | None = None,
    show_progress: bool = True,
) -> _RustTokenizer:
    """Train a BERT WordPiece tokenizer on text files (one or more paths), or on `texts`
    (lines already in memory, read as the lines of a file are; an iterable that can be
    walked twice, e.g. a list: the alphabet is counted first).

    Specials get ids 0-4 in the order [PAD] [UNK] [CLS] [SEP] [MASK], so [PAD] is 0 as
    BERT's embedding padding_idx assumes. `strip_accents=None` follows `lowercase`
    (BERT's rule). `limit_alphabet` caps the initial characters kept, so rare scripts in
    a large corpus do not eat the vocabulary; a text that needs more to be read (Chinese) raises
    it, up to half the vocabulary (`alphabet_size`).
    """
    source = _training_source(files, texts)
    check_positive("vocab_size", vocab_size)
    check_min_frequency(min_frequency)
    specials = SPECIALS["wordpiece"]
    backend = _RustTokenizer(models.WordPiece(unk_token=specials["unk"], max_input_chars_per_word=100))
    bert = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=strip_accents,
                                      lowercase=lowercase)
    # NFC first where accents are kept: a vocabulary learnt from composed text read decomposed input
    # (macOS, some web text: "Ça" as C + U+0327) as [UNK]; stripping accents decomposes both alike
    strips = lowercase if strip_accents is None else strip_accents
    backend.normalizer = bert if strips else normalizers.Sequence([normalizers.NFC(), bert])
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece(prefix="##")
    alphabet, continuations = _wordpiece_alphabet(backend, _text_blocks(source), limit_alphabet, vocab_size)
    special_tokens = [specials[r] for r in ROLES]
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
    _train(backend, source, trainer)
    backend = _keep_added_tokens(backend, special_tokens)
    backend.post_processor = bert_post_processor(backend, specials)
    return backend


def bpe_backend(
    files=None,
    vocab_size: int = 50265,
    min_frequency: int = 2,
    add_prefix_space: bool = False,
    *,
    texts: Iterable[str] | None = None,
    show_progress: bool = True,
) -> _RustTokenizer:
    """Train a RoBERTa-style byte-level BPE tokenizer on text files, or on `texts` (lines in
    memory, read as the lines of a file are).

    Specials: <s>=0 <pad>=1 </s>=2 <unk>=3 <mask>=4. The initial alphabet is all 256
    byte symbols, so any text is encodable even if a byte never occurs in training.
    """
    source = _training_source(files, texts)
    check_positive("vocab_size", vocab_size)
    check_min_frequency(min_frequency)
    specials = SPECIALS["bpe"]
    backend = _RustTokenizer(models.BPE())
    backend.normalizer = normalizers.NFC()  # one byte sequence, and so one set of ids, for "ö" and "o" + U+0308
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[specials[r] for r in ("cls", "pad", "sep", "unk", "mask")],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=show_progress,
    )
    _train(backend, source, trainer)
    add_bpe_specials(backend, specials)
    backend.post_processor = roberta_post_processor(backend, specials, add_prefix_space)
    return backend


def _check_training_files(files) -> list[str]:
    """Resolve training files and reject missing or blank ones before the slow training starts."""
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    paths = [Path(f) for f in files]
    if not paths:
        raise DataError("no training files given: pass one or more text file paths")
    for path in paths:
        check_training_file(path)
    return [str(p) for p in paths]


def check_training_file(path: Path) -> None:
    """Refuse (DataError) a training file that is a folder, missing, or without text, saying what to pass."""
    if path.is_dir():
        raise DataError(f"training file {path} is a directory; pass the files in it ({path}/*.txt), or "
                        f"`bertkit pretrain` with data.corpus={path}, which trains its tokenizer on a folder")
    if not path.is_file():
        raise DataError(f"training file {path} does not exist (or is not a file); check the path")
    if not _has_text(path):
        raise DataError(f"training file {path} is empty or whitespace-only; remove it from the list")


def check_min_frequency(min_frequency) -> None:
    """0 or more (the Rust trainer raised a bare OverflowError for a negative one)."""
    if not isinstance(min_frequency, int) or isinstance(min_frequency, bool) or min_frequency < 0:
        raise ConfigError(f"min_frequency must be an integer of 0 or more (merges of pairs seen fewer times are "
                          f"not made), got {min_frequency!r}")


def _has_text(path: Path, chunk: int = 1 << 16) -> bool:
    """True if the file has any non-whitespace byte (reads only until it finds one)."""
    with open(path, "rb") as f:
        while block := f.read(chunk):
            if block.strip():
                return True
    return False


class _Texts:
    """Training text held in memory: lines, as the trainer reads a file's lines (without their newline)."""

    def __init__(self, texts: Iterable[str]):
        self.texts = texts


def _training_source(files, texts) -> list[str] | _Texts:
    """The checked paths of `files`, or `texts` (exactly one of them), before the slow training."""
    if (files is None) == (texts is None):
        raise ConfigError("give the training text as files or as texts (one of them)")
    if files is not None:
        return _check_training_files(files)
    if iter(texts) is texts:
        raise ConfigError("texts must be a list (or another iterable that can be walked twice), not an iterator")
    if not any(text.strip() for text in texts):
        raise DataError("the training texts are empty or whitespace-only; give some text to train on")
    return _Texts(texts)


def _text_blocks(source: list[str] | _Texts) -> Iterable[str]:
    """The training text in blocks (a block of lines of a file, or one text)."""
    if isinstance(source, _Texts):
        yield from source.texts
        return
    for path in source:
        try:
            with open(path, encoding="utf-8") as f:
                while lines := f.readlines(1 << 20):
                    yield "".join(lines)
        except UnicodeDecodeError as err:
            raise _not_utf8(path) from err


def _train(backend: _RustTokenizer, source: list[str] | _Texts, trainer) -> None:
    """Run the Rust trainer, translating its file errors into DataError naming the file."""
    if isinstance(source, _Texts):
        backend.train_from_iterator(source.texts, trainer)
        return
    paths = source
    try:
        backend.train(paths, trainer)
    except Exception as err:
        bad = next((p for p in paths if not _is_utf8(Path(p))), None)
        if bad is not None:
            raise _not_utf8(bad) from err
        raise DataError(f"tokenizer training failed on {paths[0]}{' ...' if len(paths) > 1 else ''}: {err}") from err


_ASCII_SPACE = re.compile(r"[ \t\n\r]+")  # what every normaliser keeps as a word boundary


def _wordpiece_alphabet(backend: _RustTokenizer, blocks: Iterable[str], limit_alphabet: int, vocab_size: int
                        ) -> tuple[list[str], list[str]]:
    """The characters WordPiece training keeps, and their '##' continuation tokens that occur.

    tokenizers' trainer creates each '##c' the first time it meets c inside a word while walking
    a hash map, so the ids of these tokens change from run to run; the ids break ties between
    equally frequent merges, so the vocabulary did too (huggingface/tokenizers#1794). Passed
    to the trainer up front in sorted order, they get fixed ids and training is repeatable.
    The alphabet is what the trainer keeps, the most frequent characters (`alphabet_size`), with
    ties broken by code point rather than hash order. One pass over the text, through the
    tokenizer's own normaliser and pre-tokeniser, run once per distinct space-separated string
    (both work within such strings; calling them per line was 1.5 s per MB).
    """
    chunks: Counter[str] = Counter()
    for block in blocks:
        chunks.update(_ASCII_SPACE.split(block))
    char_counts: Counter[str] = Counter()
    inside_words: set[str] = set()
    for chunk, count in chunks.items():
        normalized = backend.normalizer.normalize_str(chunk)
        for word, _ in backend.pre_tokenizer.pre_tokenize_str(normalized):
            for char in word:
                char_counts[char] += count
            inside_words.update(word[1:])
    by_frequency = sorted(char_counts, key=lambda c: (-char_counts[c], c))
    alphabet = sorted(by_frequency[:alphabet_size(by_frequency, char_counts, limit_alphabet, vocab_size)])
    total = sum(char_counts.values())
    dropped = total - sum(char_counts[c] for c in alphabet)
    if dropped > ALPHABET_COVERAGE_GAP * total:
        warnings.warn(f"{len(char_counts) - len(alphabet)} rare characters ({dropped / total:.2%} "
                      f"of the text) are left out of the vocabulary and read as [UNK]: raise vocab_size (now "
                      f"{vocab_size}) to keep them")
    return alphabet, ["##" + c for c in alphabet if c in inside_words]


# The share of the text's characters an alphabet may leave out (as [UNK]) before it grows past
# limit_alphabet. English corpora have 60-115 distinct characters here; the Linux manuals' 2,567
# (translations included) leave 0.14% out at 1,000 (unchanged); a Chinese text of 2,500 left 19%.
ALPHABET_COVERAGE_GAP = 0.005


def alphabet_size(by_frequency: list[str], char_counts: Counter, limit_alphabet: int, vocab_size: int) -> int:
    """How many of the most frequent characters WordPiece keeps: `limit_alphabet`, raised (to at
    most half the vocabulary) until they cover all but ALPHABET_COVERAGE_GAP of the text. A fixed
    1,000 left a Chinese text of 2,500 characters 19% [UNK] with a vocabulary of 1,005 where 8,000
    were asked (each ideograph is its own word: no merge could make up for them)."""
    total, covered, needed = sum(char_counts.values()), 0, 0
    for needed, char in enumerate(by_frequency, 1):
        covered += char_counts[char]
        if covered >= (1 - ALPHABET_COVERAGE_GAP) * total:
            break
    return max(limit_alphabet, min(needed, vocab_size // 2))


def _keep_added_tokens(backend: _RustTokenizer, keep: list[str]) -> _RustTokenizer:
    """The tokenizer without the added (special) tokens outside `keep`; they stay in the vocabulary
    as ordinary tokens."""
    state = json.loads(backend.to_str())
    state["added_tokens"] = [t for t in state["added_tokens"] if t["content"] in keep]
    return _RustTokenizer.from_str(json.dumps(state))


def _not_utf8(path) -> DataError:
    return DataError(f"training file {path} is not valid UTF-8; re-encode it as UTF-8 "
                     f"(e.g. iconv -f cp1252 -t utf-8, for a Windows or Excel file) and train again")


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
