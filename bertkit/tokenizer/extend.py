"""Growing a trained WordPiece vocabulary with the words of the user's own text.

A model pre-trained on news splits a kernel manual's words into many pieces ("kmalloc" ->
"km ##all ##oc"): each passage then holds fewer words in the same number of tokens, and
continued pre-training cannot change the vocabulary. `words_to_add` ranks the words of new
text by the tokens they would save, count x (pieces - 1), and keeps the top `n` that occur at
least `min_frequency` times; `extended` appends them as whole-word WordPiece entries after the
old ids, so every old id keeps its meaning and WordPiece's longest-match-first picks a new word
wherever it occurs whole. The model's new rows start as the mean of the old pieces' rows
(recipes/continued.py, `grow_vocabulary`), the fast vocabulary transfer of Gee et al. (2022).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from tokenizers import Tokenizer as _RustTokenizer
from tokenizers import models

from bertkit.errors import ConfigError, DataError
from bertkit.tokenizer.core import Tokenizer


@dataclass(frozen=True)
class AddedWord:
    word: str
    count: int  # occurrences in the text
    pieces: tuple[str, ...]  # how the old vocabulary split it


def check_wordpiece(tokenizer: Tokenizer) -> dict:
    """The tokenizer's JSON description; refused unless it is a WordPiece vocabulary."""
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    if tokenizer.kind != "wordpiece" or spec["model"]["type"] != "WordPiece":
        raise ConfigError("tokenizer.extend_vocab grows WordPiece vocabularies (BERT's); this checkpoint's "
                          f"tokenizer is {tokenizer.kind} ({spec['model']['type']}): --set tokenizer.extend_vocab=0")
    return spec


@dataclass(frozen=True)
class VocabularyExtension:
    words: list[AddedWord]  # the words to add, those saving the most tokens first
    tokens_before: int  # the text's words in the old vocabulary's tokens
    tokens_after: int  # and with the words added


def words_to_add(tokenizer: Tokenizer, lines: Iterable[str], n: int, min_frequency: int = 2) -> VocabularyExtension:
    """Up to `n` words of `lines` that the vocabulary splits, those saving the most tokens first
    (count x (pieces - 1); ties by count, then alphabetically, so the choice is reproducible)."""
    spec = check_wordpiece(tokenizer)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ConfigError(f"tokenizer.extend_vocab must be a positive number of words, got {n!r}")
    backend = tokenizer.backend_tokenizer
    counts: Counter = Counter()
    for line in lines:
        text = backend.normalizer.normalize_str(line) if backend.normalizer else line
        counts.update(word for word, _ in backend.pre_tokenizer.pre_tokenize_str(text))
    if not counts:
        raise DataError("the corpus holds no words to extend the vocabulary with; check data.corpus")
    vocab = tokenizer.get_vocab()
    scored, tokens = [], 0
    for word, count in counts.items():
        pieces = (word,) if word in vocab else tuple(t.value for t in backend.model.tokenize(word))
        tokens += count * len(pieces)
        # WordPiece turns a longer word into [UNK] whatever the vocabulary holds
        if len(pieces) > 1 and count >= min_frequency and len(word) <= spec["model"]["max_input_chars_per_word"]:
            scored.append((count * (len(pieces) - 1), count, word, pieces))
    scored.sort(key=lambda s: (-s[0], -s[1], s[2]))
    words = [AddedWord(word, count, pieces) for _, count, word, pieces in scored[:n]]
    # Counted again with the words added: a word that is not added can change too ("kmallocs" ->
    # "kmalloc ##s" once "kmalloc" is in), so the saving is not simply the chosen words' own.
    grown = wordpiece_model(spec, {**vocab, **{w.word: len(vocab) + i for i, w in enumerate(words)}})
    after = sum(count * len(grown.tokenize(word)) for word, count in counts.items())
    return VocabularyExtension(words, tokens, after)


def extended(tokenizer: Tokenizer, words: list[AddedWord]) -> Tokenizer:
    """A copy of `tokenizer` whose vocabulary also holds `words`, at ids after every old id."""
    spec = check_wordpiece(tokenizer)
    vocab = spec["model"]["vocab"]
    next_id = max(vocab.values()) + 1
    for word in words:
        if word.word in vocab:
            raise DataError(f"{word.word!r} is in the vocabulary already")
        vocab[word.word] = next_id
        next_id += 1
    return tokenizer.with_backend(_RustTokenizer.from_str(json.dumps(spec)))


def old_pieces(tokenizer: Tokenizer, old_size: int) -> dict[int, list[int]]:
    """{new id: the old ids it was split into} for every id >= `old_size`: what an extended
    vocabulary's new rows are built from (recomputed from the tokenizer alone, so a resumed run
    and the run it continues agree)."""
    spec = check_wordpiece(tokenizer)
    vocab = spec["model"]["vocab"]
    old = {piece: i for piece, i in vocab.items() if i < old_size}
    unk = spec["model"]["unk_token"]
    if unk not in old:
        raise DataError(f"the first {old_size} ids lack the unknown token {unk}; this is not an extended vocabulary")
    model = wordpiece_model(spec, old)
    return {i: [old[t.value] for t in model.tokenize(piece)] for piece, i in vocab.items() if i >= old_size}


def wordpiece_model(spec: dict, vocab: dict[str, int]) -> models.WordPiece:
    """A WordPiece model with `spec`'s settings over `vocab`: to split words as another vocabulary would."""
    return models.WordPiece(vocab, unk_token=spec["model"]["unk_token"],
                            continuing_subword_prefix=spec["model"]["continuing_subword_prefix"],
                            max_input_chars_per_word=spec["model"]["max_input_chars_per_word"])
