"""Growing a trained vocabulary (WordPiece or byte-level BPE) with the words of the user's own text.

A model pre-trained on news splits a kernel manual's words into many pieces ("kmalloc" ->
"km ##all ##oc"): each passage then holds fewer words in the same number of tokens, and
continued pre-training cannot change the vocabulary. `words_to_add` ranks the words of new
text by the tokens they would save, count x (pieces - 1), and keeps the top `n` that occur at
least `min_frequency` times; `extended` appends them after the old ids, so every old id keeps its
meaning. WordPiece: each word is one whole-word entry, which longest-match-first picks wherever the
word occurs whole. Byte-level BPE (RoBERTa's) has no longest match: a token exists for the merges
that build it, so each word's pieces are joined left to right by new merges ranked after every old
one ("Ġk" + "mall" -> "Ġkmall", "Ġkmall" + "oc" -> "Ġkmalloc"): a text is split by the old merges
exactly as before, and only then do the new ones join what they name, so a word adds up to
pieces - 1 ids (its prefixes; `MergeGrowth`). The model's new rows start as the mean of the old
pieces' rows (recipes/continued.py, `grow_vocabulary`), the fast vocabulary transfer of Gee et al.
(2022).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from tokenizers import Tokenizer as _RustTokenizer

from bertkit.errors import ConfigError, DataError
from bertkit.tokenizer.core import Tokenizer


@dataclass(frozen=True)
class AddedWord:
    word: str
    count: int  # occurrences in the text
    pieces: tuple[str, ...]  # how the old vocabulary split it


def extension_spec(tokenizer: Tokenizer) -> dict:
    """The tokenizer's JSON description; refused unless its vocabulary is WordPiece (BERT's) or BPE whose
    merges join two pieces as they are (byte-level BPE: RoBERTa's, GPT-2's; no "##"-style prefix)."""
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    model = spec["model"]
    if model["type"] == "WordPiece" and tokenizer.kind == "wordpiece":
        return spec
    if model["type"] == "BPE" and not model.get("continuing_subword_prefix") and not model.get("end_of_word_suffix"):
        return spec
    raise ConfigError("tokenizer.extend_vocab grows WordPiece (BERT's) and byte-level BPE (RoBERTa's) vocabularies; "
                      f"this checkpoint's tokenizer is {tokenizer.kind} ({model['type']}): "
                      "--set tokenizer.extend_vocab=0")


@dataclass(frozen=True)
class VocabularyExtension:
    words: list[AddedWord]  # the words to add, those saving the most tokens first
    tokens_before: int  # the text's words in the old vocabulary's tokens
    tokens_after: int  # and with the words added


def words_to_add(tokenizer: Tokenizer, lines: Iterable[str], n: int, min_frequency: int = 2) -> VocabularyExtension:
    """Up to `n` words of `lines` that the vocabulary splits, those saving the most tokens first
    (count x (pieces - 1); ties by count, then alphabetically, so the choice is reproducible). BPE leaves
    out a word whose left-to-right joins would rebuild an old token by a new merge (old ids keep their
    merges) and one that other words' merges already make whole."""
    spec = extension_spec(tokenizer)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ConfigError(f"tokenizer.extend_vocab must be a positive number of words, got {n!r}")
    counts = word_counts(tokenizer, lines)
    vocab, backend = tokenizer.get_vocab(), tokenizer.backend_tokenizer
    # WordPiece turns a longer word into [UNK] whatever the vocabulary holds
    longest = spec["model"].get("max_input_chars_per_word") or float("inf")
    scored, tokens = [], 0
    for word, count in counts.items():
        pieces = (word,) if word in vocab else tuple(t.value for t in backend.model.tokenize(word))
        tokens += count * len(pieces)
        if len(pieces) > 1 and count >= min_frequency and len(word) <= longest:
            scored.append((count * (len(pieces) - 1), count, word, pieces))
    scored.sort(key=lambda s: (-s[0], -s[1], s[2]))
    candidates = [AddedWord(word, count, pieces) for _, count, word, pieces in scored]
    if spec["model"]["type"] == "WordPiece":
        words = candidates[:n]
    else:
        growth = MergeGrowth(vocab)
        words = [w for w in candidates if len(growth.words) < n and growth.add(w)]
    # Counted again with the words added: a word that is not added can change too ("kmallocs" ->
    # "kmalloc ##s" once "kmalloc" is in), so the saving is not simply the chosen words' own.
    grown = model_of(grown_spec(spec, words))
    after = sum(count * len(grown.tokenize(word)) for word, count in counts.items())
    return VocabularyExtension(words, tokens, after)


def word_counts(tokenizer: Tokenizer, lines: Iterable[str]) -> Counter:
    """How often each word of `lines` occurs, a word as the tokenizer's normalizer and pre-tokenizer
    cut it (byte-level BPE: "Ġkmalloc", the leading space a part of the word)."""
    backend = tokenizer.backend_tokenizer
    counts: Counter = Counter()
    for line in lines:
        text = backend.normalizer.normalize_str(line) if backend.normalizer else line
        counts.update(word for word, _ in backend.pre_tokenizer.pre_tokenize_str(text))
    if not counts:
        raise DataError("the corpus holds no words to extend the vocabulary with; check data.corpus")
    return counts


class MergeGrowth:
    """New BPE merges ranked after every old merge. BPE joins, at each step, the adjacent pair of the
    lowest rank; every old merge ranks first, so a word is split as the old vocabulary split it before
    any new merge applies, and new merges then act on those pieces alone: `apply` replays them. A word
    added joins its pieces (as the new merges so far leave them) left to right, one merge and one new
    token per join, so it comes out whole; an earlier word's joins rank before a later word's, so it
    stays whole too."""

    def __init__(self, old_vocab: dict[str, int]):
        self.old = old_vocab
        self.ranks: dict[tuple[str, str], int] = {}  # the new merges, in rank order
        self.tokens: dict[str, None] = {}  # the new tokens, in the order their ids follow the old ones
        self.words: list[str] = []

    def apply(self, pieces: list[str]) -> list[str]:
        """`pieces` (the old split) joined by the new merges, lowest rank first (the leftmost on a tie)."""
        while len(pieces) > 1:
            ranked = [(self.ranks[pair], i) for i, pair in enumerate(zip(pieces, pieces[1:])) if pair in self.ranks]
            if not ranked:
                break
            _, i = min(ranked)
            pieces[i:i + 2] = [pieces[i] + pieces[i + 1]]
        return pieces

    def add(self, word: AddedWord) -> bool:
        """Add the merges that make `word` one token; False (nothing added) where no merge is needed or a
        join would rebuild a token of the old vocabulary."""
        pieces = self.apply(list(word.pieces))
        if len(pieces) == 1:
            return False
        joins, joined = [], pieces[0]
        for piece in pieces[1:]:
            joins.append((joined, piece))
            joined += piece
            if joined in self.old:
                return False
        for pair in joins:
            self.ranks.setdefault(pair, len(self.ranks))
            self.tokens.setdefault(pair[0] + pair[1], None)
        self.words.append(word.word)
        return True


def grown_spec(spec: dict, words: list[AddedWord]) -> dict:
    """`spec` (extension_spec's) with `words` added after every old id: WordPiece entries, or BPE merges and
    the tokens they make (`MergeGrowth`); a word that cannot be added is a DataError."""
    model = json.loads(json.dumps(spec["model"]))  # a copy: the caller's spec stays the old vocabulary
    vocab = model["vocab"]
    for word in words:
        if word.word in vocab:
            raise DataError(f"{word.word!r} is in the vocabulary already")
    if model["type"] == "WordPiece":
        new_tokens = [word.word for word in words]
    else:
        growth = MergeGrowth(vocab)
        for word in words:
            if not growth.add(word):
                raise DataError(f"{word.word!r} cannot be added by new merges after the old ones (its pieces "
                                f"{' '.join(word.pieces)} would rebuild an old token, or are joined already)")
        pairs = list(growth.ranks)  # merges written as the file writes its own: "a b" or ["a", "b"]
        as_text = bool(model["merges"]) and isinstance(model["merges"][0], str)
        model["merges"] += [" ".join(pair) if as_text else list(pair) for pair in pairs]
        new_tokens = list(growth.tokens)
    next_id = max(vocab.values()) + 1
    for offset, token in enumerate(new_tokens):
        vocab[token] = next_id + offset
    return {**spec, "model": model}


def model_of(spec: dict):
    """The tokenization model (WordPiece or BPE) `spec` describes, to split words as that vocabulary would."""
    return _RustTokenizer.from_str(json.dumps(spec)).model


def extended(tokenizer: Tokenizer, words: list[AddedWord]) -> Tokenizer:
    """A copy of `tokenizer` whose vocabulary also holds `words`, at ids after every old id."""
    spec = grown_spec(extension_spec(tokenizer), words)
    return tokenizer.with_backend(_RustTokenizer.from_str(json.dumps(spec)))


def old_pieces(tokenizer: Tokenizer, old_size: int) -> dict[int, list[int]]:
    """{new id: the old ids it was split into} for every id >= `old_size`: what an extended
    vocabulary's new rows are built from (recomputed from the tokenizer alone, so a resumed run
    and the run it continues agree). The old vocabulary is the ids below `old_size` and, for BPE, the
    merges that make them (every new merge makes a new token: `MergeGrowth.add`)."""
    spec = extension_spec(tokenizer)
    model = spec["model"]
    old = {piece: i for piece, i in model["vocab"].items() if i < old_size}
    unk = model.get("unk_token")
    if model["type"] == "WordPiece" and unk not in old:
        raise DataError(f"the first {old_size} ids lack the unknown token {unk}; this is not an extended vocabulary")
    old_model = {**model, "vocab": old}
    if model["type"] == "BPE":
        old_model["merges"] = [m for m in model["merges"] if "".join(m.split(" ") if isinstance(m, str) else m) in old]
    splitter = model_of({**spec, "model": old_model})
    return {i: [old[t.value] for t in splitter.tokenize(piece)] for piece, i in model["vocab"].items() if i >= old_size}
