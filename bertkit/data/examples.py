"""Pre-training examples from tokenized documents: NSP pairs, SOP pairs, packed sequences.

A *document* is a list of sentences, each a 1-D array of token ids without special tokens
(what `ShardedCorpus[i]` returns; in-memory lists of id lists work as well). Builders turn a
list of documents into examples: dicts of int64 numpy arrays ``input_ids`` and
``token_type_ids`` (plus ``next_sentence_label`` for NSP/SOP).

Templates (``SpecialTokens``): WordPiece ``[CLS] A [SEP]`` / ``[CLS] A [SEP] B [SEP]`` with
token types 0 for ``[CLS] A [SEP]`` and 1 for ``B [SEP]``; byte-level BPE (RoBERTa)
``<s> A </s>`` / ``<s> A </s></s> B </s>`` with all token types 0 (RoBERTa has one type).

`PretrainingDataset` walks the documents of one epoch in a seeded random order, builds
examples a block of documents at a time, shuffles within the block and yields them; its
position (epoch, block, offset) can be saved and restored exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch

from bertkit.data.packing import PackedBuilder
from bertkit.errors import ConfigError, DataError

__all__ = [
    "SpecialTokens", "NSPBuilder", "SOPBuilder", "FullSentencesBuilder", "DocSentencesBuilder",
    "truncate_seq_pair", "make_builder", "PretrainingDataset", "BUILDERS",
]

Document = Sequence[np.ndarray]


@dataclass(frozen=True)
class SpecialTokens:
    """The ids and template needed to wrap segments into model inputs."""

    cls_id: int
    sep_id: int
    kind: str = "wordpiece"  # "wordpiece": BERT template; "bpe": RoBERTa template

    @classmethod
    def from_tokenizer(cls, tok) -> "SpecialTokens":
        return cls(int(tok.cls_token_id), int(tok.sep_token_id), getattr(tok, "kind", "wordpiece"))

    @property
    def pair_extra(self) -> int:
        """Special tokens added around a pair: 3 for BERT, 4 for RoBERTa."""
        return 4 if self.kind == "bpe" else 3

    def single(self, a: np.ndarray) -> dict:
        ids = np.concatenate([[self.cls_id], a, [self.sep_id]]).astype(np.int64)
        return {"input_ids": ids, "token_type_ids": np.zeros(len(ids), np.int64)}

    def pair(self, a: np.ndarray, b: np.ndarray, label: int) -> dict:
        if self.kind == "bpe":
            ids = np.concatenate([[self.cls_id], a, [self.sep_id, self.sep_id], b, [self.sep_id]])
            types = np.zeros(len(ids), np.int64)
        else:
            ids = np.concatenate([[self.cls_id], a, [self.sep_id], b, [self.sep_id]])
            types = np.zeros(len(ids), np.int64)
            types[len(a) + 2:] = 1
        return {"input_ids": ids.astype(np.int64), "token_type_ids": types,
                "next_sentence_label": np.int64(label)}


def truncate_seq_pair(a: list[int], b: list[int], max_tokens: int, rng: random.Random) -> None:
    """Shorten ``a`` and ``b`` in place until ``len(a) + len(b) <= max_tokens``.

    One token at a time is removed from the longer segment, from its front or its back with
    equal probability (so the model does not learn that segments always end cleanly).
    """
    while len(a) + len(b) > max_tokens:
        longer = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def _concat(sentences) -> list[int]:
    """Sentences joined into one Python list (lists: cheap front/back trimming)."""
    return np.concatenate(sentences).tolist() if len(sentences) else []


def _sentence_counts(docs) -> np.ndarray:
    if hasattr(docs, "sentence_counts"):
        return np.asarray(docs.sentence_counts())
    return np.array([len(d) for d in docs], dtype=np.int64)


class _PairBuilder:
    """Shared chunking of BERT's create_pretraining_data.

    target length: ``max_len - specials``, or with probability ``short_seq_prob`` a random
    length in [2, target] (so the model also sees short inputs). Sentences of a document are
    accumulated into a chunk until it reaches the target (or the document ends); the chunk is
    split at a random sentence boundary into A and B.
    """

    needs_pairs = True

    def __init__(self, max_len: int, special: SpecialTokens, short_seq_prob: float = 0.1):
        self.special = special
        self.max_len = max_len
        self.max_tokens = max_len - special.pair_extra
        if self.max_tokens < 2:
            raise ConfigError(f"max_len={max_len} is too short for a sentence pair; use at least {special.pair_extra + 2}")
        if not 0 <= short_seq_prob <= 1:
            raise ConfigError(f"short_seq_prob must be in [0, 1], got {short_seq_prob}")
        self.short_seq_prob = short_seq_prob
        self.stats = {"examples": 0, "skipped_short_docs": 0, "skipped_chunks": 0}

    def _target(self, rng: random.Random) -> int:
        if rng.random() < self.short_seq_prob:
            return rng.randint(2, self.max_tokens)
        return self.max_tokens


class NSPBuilder(_PairBuilder):
    """BERT next-sentence-prediction pairs (label 0 = IsNext, 1 = NotNext).

    For each chunk (see `_PairBuilder`): with probability 1/2 B is the rest of the chunk (the
    true continuation); otherwise B is read from a random position of a random *other*
    document up to the remaining target length, and the chunk's sentences after the split
    point are put back so that they start the next chunk. A chunk of a single sentence always
    gets a random B (there is no continuation inside it), so NotNext is slightly above 1/2
    (54.8% measured on BBC News at max_len=128, as in BERT's own data). Documents with fewer than two
    sentences are skipped as sources of A (``stats["skipped_short_docs"]``) but can supply B.
    """

    def __init__(self, max_len: int, special: SpecialTokens, short_seq_prob: float = 0.1, nsp_prob: float = 0.5):
        super().__init__(max_len, special, short_seq_prob)
        self.nsp_prob = nsp_prob

    def build_document(self, docs, index: int, rng: random.Random) -> list[dict]:
        doc = docs[index]
        if len(doc) < 2:
            self.stats["skipped_short_docs"] += 1
            return []
        out = []
        target = self._target(rng)
        chunk: list = []
        length = 0
        i = 0
        while i < len(doc):
            chunk.append(doc[i])
            length += len(doc[i])
            if i == len(doc) - 1 or length >= target:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                a = _concat(chunk[:a_end])
                if len(chunk) == 1 or rng.random() < self.nsp_prob:
                    label = 1
                    b = self._random_b(docs, index, max(1, target - len(a)), rng)
                    i -= len(chunk) - a_end  # unused sentences start the next chunk
                else:
                    label = 0
                    b = _concat(chunk[a_end:])
                truncate_seq_pair(a, b, self.max_tokens, rng)
                if a and b:
                    out.append(self.special.pair(np.asarray(a), np.asarray(b), label))
                else:
                    self.stats["skipped_chunks"] += 1
                chunk, length = [], 0
                target = self._target(rng)
            i += 1
        self.stats["examples"] += len(out)
        return out

    def _random_b(self, docs, index: int, want: int, rng: random.Random) -> list[int]:
        n = len(docs)
        for _ in range(10):  # a uniformly drawn *other* document that has a sentence
            j = (index + 1 + rng.randrange(n - 1)) % n
            if len(docs[j]):
                break
        else:  # mostly empty documents around: take the next non-empty one
            j = next(k % n for k in range(index + 1, index + n) if len(docs[k % n]))
        other = docs[j]
        start = rng.randrange(len(other))
        b: list[int] = []
        for s in other[start:]:
            b.extend(s.tolist() if hasattr(s, "tolist") else s)
            if len(b) >= want:
                break
        return b


class SOPBuilder(_PairBuilder):
    """ALBERT sentence-order prediction (label 0 = in order, 1 = swapped).

    A and B are consecutive spans of the same chunk (split at a random sentence boundary);
    with probability 1/2 they are swapped. Chunks of one sentence cannot be split and are
    skipped (``stats["skipped_chunks"]``), as are documents of one sentence.
    """

    def build_document(self, docs, index: int, rng: random.Random) -> list[dict]:
        doc = docs[index]
        if len(doc) < 2:
            self.stats["skipped_short_docs"] += 1
            return []
        out = []
        target = self._target(rng)
        chunk: list = []
        length = 0
        for i, sent in enumerate(doc):
            chunk.append(sent)
            length += len(sent)
            if i == len(doc) - 1 or length >= target:
                if len(chunk) >= 2:
                    a_end = rng.randint(1, len(chunk) - 1)
                    a, b = _concat(chunk[:a_end]), _concat(chunk[a_end:])
                    truncate_seq_pair(a, b, self.max_tokens, rng)
                    label = int(rng.random() < 0.5)
                    if label:
                        a, b = b, a
                    out.append(self.special.pair(np.asarray(a), np.asarray(b), label))
                else:
                    self.stats["skipped_chunks"] += 1
                chunk, length = [], 0
                target = self._target(rng)
        self.stats["examples"] += len(out)
        return out


class FullSentencesBuilder:
    """RoBERTa FULL-SENTENCES: contiguous sentences packed up to ``max_len - 2`` tokens.

    Sentences are taken in order across document boundaries, with a separator token between
    documents. An example closes when the next sentence would not fit; a sentence longer
    than the whole budget is cut into budget-sized pieces. With ``exact_fill=True`` sentences
    are instead cut at the budget so that every example but the last is exactly ``max_len``.
    """

    needs_pairs = False
    cross_documents = True

    def __init__(self, max_len: int, special: SpecialTokens, exact_fill: bool = False):
        if max_len < 3:
            raise ConfigError(f"max_len={max_len} is too short; use at least 3")
        self.special, self.max_len, self.exact_fill = special, max_len, exact_fill
        self.budget = max_len - 2
        self.stats = {"examples": 0}

    def build(self, docs, indices: Sequence[int], rng: random.Random | None = None) -> list[dict]:
        out: list[dict] = []
        buf: list[np.ndarray] = []
        used = 0
        for n, index in enumerate(indices):
            units = list(docs[index])
            if self.cross_documents and n > 0 and buf:
                units.insert(0, np.array([self.special.sep_id]))  # document separator
            for unit in units:
                while len(unit):
                    room = self.budget - used
                    if len(unit) <= room:
                        buf.append(unit)
                        used += len(unit)
                        break
                    if self.exact_fill or used == 0:  # cut: fill the room, keep the rest
                        buf.append(unit[:room])
                        unit = unit[room:]
                    out.append(self.special.single(np.concatenate(buf)))
                    buf, used = [], 0
            if not self.cross_documents and buf:
                out.append(self.special.single(np.concatenate(buf)))
                buf, used = [], 0
        if buf:
            out.append(self.special.single(np.concatenate(buf)))
        self.stats["examples"] += len(out)
        return out


class DocSentencesBuilder(FullSentencesBuilder):
    """RoBERTa DOC-SENTENCES: like FULL-SENTENCES but an example never crosses a document."""

    cross_documents = False


BUILDERS = {"nsp": NSPBuilder, "sop": SOPBuilder, "full_sentences": FullSentencesBuilder,
            "doc_sentences": DocSentencesBuilder, "packed": PackedBuilder}


def make_builder(kind: str, max_len: int, special: SpecialTokens, **kwargs):
    """A builder by name: ``nsp``, ``sop``, ``full_sentences``, ``doc_sentences`` or ``packed``
    (best-fit packing of whole document pieces: bertkit/data/packing.py)."""
    if kind not in BUILDERS:
        raise ConfigError(f"unknown example kind {kind!r}; use one of {', '.join(BUILDERS)}")
    return BUILDERS[kind](max_len, special, **kwargs)


def build_examples(builder, docs, indices: Sequence[int], rng: random.Random) -> list[dict]:
    """Examples from the documents ``indices`` of ``docs``, in document order."""
    if builder.needs_pairs:
        out = []
        for i in indices:
            out.extend(builder.build_document(docs, int(i), rng))
        return out
    return builder.build(docs, [int(i) for i in indices], rng)


class PretrainingDataset(torch.utils.data.IterableDataset):
    """A seeded, resumable, rank-sharded stream of pre-training examples.

    Epoch ``e``: the document indices are permuted with seed ``(seed, e)``; rank ``r`` of
    ``world_size`` takes every ``world_size``-th document of that order (so ranks read
    disjoint documents that together cover the corpus). Its documents are cut into blocks of
    ``block_docs``; each block's examples are built with an RNG seeded by
    ``(seed, e, r, block)``, shuffled, and yielded. Memory is one block of examples.

    ``state_dict()`` is ``{epoch, block, offset}`` (offset = examples of the block already
    yielded); after ``load_state_dict`` the next example is exactly the one that would have
    followed. One iteration runs from the current position to the end of the epoch and then
    moves the position to the start of the next epoch. Example building is cheap (memory-map
    slices), so it runs in the main process: a DataLoader with worker processes would copy
    the position into each worker and lose it, and is refused.

    Ranks generally get different numbers of examples; a distributed trainer should stop all
    ranks at the shortest (or cap steps per epoch).
    """

    def __init__(self, docs, builder, seed: int = 0, rank: int = 0, world_size: int = 1,
                 block_docs: int = 256, shuffle: bool = True):
        if not 0 <= rank < world_size:
            raise ConfigError(f"rank must be in [0, world_size={world_size}), got {rank}")
        if block_docs < 1:
            raise ConfigError(f"block_docs must be positive, got {block_docs}")
        if len(docs) == 0:
            raise DataError("the corpus has no documents; prepare shards from a non-empty corpus")
        if builder.needs_pairs:
            counts = _sentence_counts(docs)
            if not (counts >= 2).any():
                raise DataError(
                    "no document has two sentences, so no NSP/SOP pair can be built; use a "
                    "corpus with multi-sentence documents or the full_sentences objective"
                )
            if (counts >= 1).sum() < 2:
                raise DataError("NSP needs at least two non-empty documents for random next sentences; add documents")
        self.docs, self.builder = docs, builder
        self.seed, self.rank, self.world_size = int(seed), rank, world_size
        self.block_docs, self.shuffle = block_docs, shuffle
        self.epoch, self.block, self.offset = 0, 0, 0
        self._order_cache: tuple = (None, None)

    def set_epoch(self, epoch: int) -> None:
        """Move to the start of epoch ``epoch``; no-op when already in it.

        The no-op keeps a position restored by `load_state_dict` (or reached by finishing
        the previous epoch, which advances to the next one) when a trainer calls
        ``set_epoch(e)`` at the top of every epoch.
        """
        if int(epoch) != self.epoch:
            self.epoch, self.block, self.offset = int(epoch), 0, 0

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "block": self.block, "offset": self.offset, "seed": self.seed,
                "rank": self.rank, "world_size": self.world_size}

    def load_state_dict(self, state: dict) -> None:
        if (state["seed"], state["world_size"]) != (self.seed, self.world_size):
            raise ConfigError(
                f"data state was saved with seed={state['seed']}, world_size={state['world_size']}; "
                f"resume with the same values (have seed={self.seed}, world_size={self.world_size})"
            )
        self.epoch, self.block, self.offset = state["epoch"], state["block"], state["offset"]

    def rank_documents(self, epoch: int | None = None) -> np.ndarray:
        """Indices of the documents this rank reads in ``epoch`` (default: the current one)."""
        epoch = self.epoch if epoch is None else epoch
        if self._order_cache[0] != epoch:
            n = len(self.docs)
            order = np.random.default_rng([self.seed, epoch]).permutation(n) if self.shuffle else np.arange(n)
            self._order_cache = (epoch, order[self.rank::self.world_size])
        return self._order_cache[1]

    def _block_rng(self, block: int) -> random.Random:
        # One integer from a SeedSequence over (seed, epoch, rank, block): independent streams.
        s = np.random.SeedSequence([self.seed, self.epoch, self.rank, block]).generate_state(1)[0]
        return random.Random(int(s))

    def build_block(self, block: int) -> list[dict]:
        """The examples of one block, in the order they are yielded."""
        mine = self.rank_documents()
        indices = mine[block * self.block_docs:(block + 1) * self.block_docs]
        rng = self._block_rng(block)
        examples = build_examples(self.builder, self.docs, indices, rng)
        if self.shuffle:
            rng.shuffle(examples)
        return examples

    def num_blocks(self) -> int:
        return -(-len(self.rank_documents()) // self.block_docs)

    def __iter__(self) -> Iterator[dict]:
        if torch.utils.data.get_worker_info() is not None:
            raise DataError(
                "PretrainingDataset keeps its position in the main process; use "
                "DataLoader(num_workers=0) (examples are cheap memory-map slices)"
            )
        while self.block < self.num_blocks():
            examples = self.build_block(self.block)
            while self.offset < len(examples):
                ex = examples[self.offset]
                self.offset += 1  # advanced before yielding: a saved state points past ex
                yield ex
            self.block, self.offset = self.block + 1, 0
        self.epoch, self.block, self.offset = self.epoch + 1, 0, 0  # finished: next epoch
