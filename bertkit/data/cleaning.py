"""Deduplication and simple quality filters of the training documents, after the held-out split.

    rules = CleaningRules(dedup=True, min_words=3, min_alpha_fraction=0.8)
    cleaned = clean_documents(docs, train_docs, eval_docs, rules, tokenizer.batch_decode)
    cleaned.docs[i], cleaned.train_docs, cleaned.stats

The rules act on tokenized documents (a `ShardedCorpus`: lists of sentence id arrays), after the
train/held-out split, so a run with them holds out the very documents a run without them holds
out (the split depends only on the seed and the number of documents), and scores them on the same
held-out examples: held-out documents are never changed. Only the training documents are cleaned:

* ``dedup``: whole documents. Two documents are duplicates when their token ids are equal, that
  is when their text is equal after the tokenizer's normalisation (for an uncased WordPiece:
  case, accents, whitespace and line breaks; sentence boundaries do not count). Held-out
  documents are registered first, then the training documents in corpus order: a training
  document equal to a held-out one (a copy of the held-out text in training) or to an earlier
  training one is dropped, so the first copy stays.
* ``min_words``: sentences (the corpus's unit: a line, or a sentence inside a line) with fewer
  words are dropped. C4 keeps only lines of at least 5 words (Raffel et al. 2020, section 2.2).
* ``min_alpha_fraction``: sentences in which a smaller share of the words hold an alphabetic
  character are dropped: Gopher's rule (Rae et al. 2021, appendix A: 80% of the words of a
  document must contain an alphabetic character), applied per sentence.

Words are the whitespace-separated pieces of a sentence, as the tokenizer decodes its ids, that
hold a letter or a digit: a punctuation mark the tokenizer splits off ("2 - 1", "( zool. )") is
not a word. A training document left without a sentence is dropped.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from bertkit.errors import ConfigError

__all__ = ["CleaningRules", "CleanedDocuments", "clean_documents", "sentence_passes", "word_counts"]

DECODE_BATCH = 4096  # sentences decoded per call: one Rust call per batch, bounded memory
_ALNUM = re.compile(r"[^\W_]")  # a letter or a digit (any script)
_ALPHA = re.compile(r"[^\W\d_]")  # a letter


@dataclass(frozen=True)
class CleaningRules:
    """What `clean_documents` drops (all off by default: the corpus as it is)."""

    dedup: bool = False  # drop training documents equal to an earlier or held-out one
    min_words: int = 0  # drop sentences with fewer words (0 = off; C4: 5 per line)
    min_alpha_fraction: float = 0.0  # drop sentences with a smaller share of alphabetic words (Gopher: 0.8)

    def __post_init__(self):
        if not isinstance(self.dedup, bool):
            raise ConfigError(f"data.dedup must be true or false, got {self.dedup!r}")
        if isinstance(self.min_words, bool) or not isinstance(self.min_words, int) or self.min_words < 0:
            raise ConfigError(f"data.min_words must be an integer >= 0 (0 = off; C4 keeps lines of >= 5 "
                              f"words), got {self.min_words!r}")
        fraction = self.min_alpha_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 <= fraction <= 1.0:
            raise ConfigError(f"data.min_alpha_fraction must be a number in [0, 1] (0 = off; Gopher uses 0.8), "
                              f"got {fraction!r}")

    @property
    def filters_sentences(self) -> bool:
        return self.min_words > 0 or self.min_alpha_fraction > 0.0

    @property
    def active(self) -> bool:
        return self.dedup or self.filters_sentences


def word_counts(text: str) -> tuple[int, int]:
    """(words, words holding a letter): whitespace-separated pieces holding a letter or a digit."""
    words = [w for w in text.split() if _ALNUM.search(w)]
    return len(words), sum(1 for w in words if _ALPHA.search(w))


def sentence_passes(text: str, rules: CleaningRules) -> bool:
    """True when the sentence has at least `min_words` words and at least `min_alpha_fraction`
    of them hold a letter (a sentence without words has an alphabetic share of 0)."""
    words, alphabetic = word_counts(text)
    if words < rules.min_words:
        return False
    share = alphabetic / words if words else 0.0
    return share >= rules.min_alpha_fraction


class CleanedDocuments:
    """`docs` with some sentences of some documents left out (a lazy view: nothing is copied).

    ``view[i]`` is document ``i`` without its dropped sentences; ``len(view) == len(docs)``, so
    document indices (and the split) are those of `docs`.
    """

    def __init__(self, docs, kept: dict[int, np.ndarray]):
        self.docs = docs
        self.kept = kept  # document index -> indices of its kept sentences (absent: all kept)

    def __len__(self) -> int:
        return len(self.docs)

    def __getitem__(self, i: int) -> list:
        doc = self.docs[i]
        keep = self.kept.get(int(i) % len(self.docs)) if len(self.docs) else None
        return doc if keep is None else [doc[int(s)] for s in keep]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def sentence_counts(self) -> np.ndarray:
        counts = (np.asarray(self.docs.sentence_counts()).copy() if hasattr(self.docs, "sentence_counts")
                  else np.array([len(d) for d in self.docs], dtype=np.int64))
        for i, keep in self.kept.items():
            counts[i] = len(keep)
        return counts


@dataclass
class Cleaned:
    """What `clean_documents` returns: the documents view, the training documents kept, counts."""

    docs: CleanedDocuments
    train_docs: np.ndarray
    stats: dict


def document_key(doc: Sequence) -> bytes:
    """A 128-bit digest of a document's token ids, sentence boundaries ignored."""
    ids = np.concatenate([np.asarray(s, dtype=np.int64) for s in doc]) if len(doc) else np.zeros(0, np.int64)
    return hashlib.blake2b(ids.tobytes(), digest_size=16).digest()


def clean_documents(docs, train_docs: Sequence[int], eval_docs: Sequence[int], rules: CleaningRules,
                    decode: Callable[[list], list[str]] | None = None) -> Cleaned:
    """Apply `rules` to the training documents `train_docs` of `docs` (see the module docstring).

    `decode` turns a list of sentence id lists into strings (``tokenizer.batch_decode``); it is
    needed only by the sentence filters. ``stats`` counts documents, sentences and tokens before
    and after, and what each rule dropped (``held_out_copies``: the duplicates that copy a held-out
    document).
    """
    if rules.filters_sentences and decode is None:
        raise ConfigError("data.min_words / data.min_alpha_fraction need the tokenizer to read the sentences")
    train = [int(i) for i in train_docs]
    stats = {"train_documents": len(train), "duplicate_documents": 0, "held_out_copies": 0, "filtered_sentences": 0,
             "emptied_documents": 0, "train_sentences": 0, "train_tokens": 0, "kept_sentences": 0, "kept_tokens": 0}
    if rules.dedup:
        held_out = {document_key(docs[int(i)]) for i in eval_docs}
        seen = set(held_out)
        unique = []
        for i in train:
            key = document_key(docs[i])
            if key in seen:
                stats["duplicate_documents"] += 1
                stats["held_out_copies"] += key in held_out
            else:
                seen.add(key)
                unique.append(i)
    else:
        unique = train
    for i in train:
        doc = docs[i]
        stats["train_sentences"] += len(doc)
        stats["train_tokens"] += sum(len(s) for s in doc)
    kept: dict[int, np.ndarray] = {}
    if rules.filters_sentences:
        kept = _filter_sentences(docs, unique, rules, decode)
    view = CleanedDocuments(docs, kept)
    survivors = []
    for i in unique:
        doc = view[i]
        if not doc:
            stats["emptied_documents"] += 1
            continue
        survivors.append(i)
        stats["kept_sentences"] += len(doc)
        stats["kept_tokens"] += sum(len(s) for s in doc)
    stats["filtered_sentences"] = sum(len(docs[i]) - len(k) for i, k in kept.items())
    stats["kept_documents"] = len(survivors)
    return Cleaned(view, np.asarray(survivors, dtype=np.int64), stats)


def _filter_sentences(docs, indices: list[int], rules: CleaningRules, decode) -> dict[int, np.ndarray]:
    """{document: kept sentence indices} for the documents that lose at least one sentence;
    sentences are decoded about DECODE_BATCH at a time, whole documents per batch."""
    kept: dict[int, np.ndarray] = {}
    pending: list[tuple[int, list]] = []  # (document, sentence ids)

    def flush() -> None:
        texts = decode([ids for _, ids in pending])
        passed: dict[int, list[bool]] = {}
        for (doc, _), text in zip(pending, texts):
            passed.setdefault(doc, []).append(sentence_passes(text, rules))
        for doc, verdicts in passed.items():
            if not all(verdicts):
                kept[doc] = np.flatnonzero(verdicts).astype(np.int64)
        pending.clear()

    for i in indices:
        pending.extend((i, np.asarray(ids)) for ids in docs[i])  # arrays: the decoder lists each in C
        if len(pending) >= DECODE_BATCH:
            flush()
    if pending:
        flush()
    return kept
