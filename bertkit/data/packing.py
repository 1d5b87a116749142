"""Greedy best-fit packing: whole document pieces into full rows (sequence packing, Warner et al. 2024).

    builder = PackedBuilder(512, SpecialTokens.from_tokenizer(tokenizer))   # data.builder = "packed"
    examples = builder.build(docs, train_docs)
    packing_efficiency(examples, 512)                                       # real tokens / row slots

Why not FULL-SENTENCES (examples.py): it streams the documents in order and closes a row where
the next sentence does not fit, so rows end short (89-97% of the slots filled on BBC and GCIDE)
and a short document is cut in two as often as not. DOC-SENTENCES keeps documents apart, but a
30-token dictionary entry then fills a 512-token row with 94% padding (13% filled on GCIDE).

1. Pieces. Each document's tokens are cut into pieces of ``max_len - 2`` tokens, the last one
   shorter (``document_pieces``): a document that fits a row is one piece, and only documents'
   tails share rows with other text. A piece never holds text of two documents.
2. Rows (``fill_rows``), one after another: the longest piece that still fits goes in (best fit,
   longest first), again and again; when none fits and at least 8 slots are left, the front of
   the longest piece fills them exactly and its rest goes back into the pool (Warner et al.'s greedy
   packer leaves such slots empty; cutting one more piece is what lifts BBC at 512 tokens from
   93% to 99.9%). Up to ``pack_pieces`` pieces are packed together.
3. Layout. A row is ``[CLS] piece [SEP] piece [SEP] ...``: every piece ends with ``[SEP]`` (the
   boundary a reader and a segment-aware attention can see: RoBERTa's separator between
   documents), one ``[CLS]`` starts the row. Rows come out in a seeded shuffle.

Efficiency (``packing_efficiency``) is the share of the rows' ``max_len`` slots holding a token,
specials included (what the GPU computes on; padding is the rest). Measured on real text in
tests/data/test_packing.py. The encoder still attends across the pieces of a row, as it does
across FULL-SENTENCES' documents; attention kept inside each piece needs the variable-length
attention path (its boundaries are the ``[SEP]`` positions).
"""

from __future__ import annotations

import bisect
import random
from typing import Sequence

import numpy as np

from bertkit.errors import ConfigError

__all__ = ["PackedBuilder", "document_pieces", "fill_rows", "packing_efficiency"]


def document_pieces(doc: Sequence, budget: int) -> list[np.ndarray]:
    """A document's tokens cut into pieces of `budget` tokens, the last one shorter: only a
    document's tail is ever packed beside other text, and a document that fits is one piece."""
    sentences = [np.asarray(s) for s in doc if len(s)]
    if not sentences:
        return []
    tokens = np.concatenate(sentences)
    return [tokens[i:i + budget] for i in range(0, len(tokens), budget)]


def fill_rows(pieces: list[np.ndarray], room: int, min_cut: int = 8) -> list[list[np.ndarray]]:
    """Rows of pieces, each row holding at most `room` tokens where a piece costs its length + 1
    (its [SEP]).

    Row by row: the longest piece that still fits goes in, again and again (best fit, longest
    first); when none fits and at least `min_cut` + 1 slots are left, the front of the longest
    piece fills them exactly and its rest goes back into the pool. Every row but the last few is
    therefore full, at the price of one more cut in a few long documents. The pool is a list
    sorted by length: each step is one bisection."""
    pool = sorted(pieces, key=len)
    lengths = [len(p) for p in pool]
    rows: list[list[np.ndarray]] = []
    while pool:
        row, left = [], room
        while pool and left >= 2:
            k = bisect.bisect_right(lengths, left - 1) - 1  # the longest piece with len + 1 <= left
            if k >= 0:
                piece = pool.pop(k)
                lengths.pop(k)
            elif left - 1 >= min_cut:  # nothing fits: cut the longest piece to the room left
                whole = pool.pop()
                lengths.pop()
                piece, rest = whole[:left - 1], whole[left - 1:]
                k = bisect.bisect_left(lengths, len(rest))
                pool.insert(k, rest)
                lengths.insert(k, len(rest))
            else:
                break
            row.append(piece)
            left -= len(piece) + 1
        rows.append(row)
    return rows


def packing_efficiency(examples: Sequence[dict], max_len: int) -> float:
    """Tokens (specials included) over the rows' slots: sum(len(row)) / (rows * max_len)."""
    if not examples:
        return 0.0
    return sum(len(ex["input_ids"]) for ex in examples) / (len(examples) * max_len)


class PackedBuilder:
    """Rows of whole document pieces packed by best fit (see the module docstring).

    ``pack_pieces``: pieces packed together (memory and time grow with it; larger packs leave
    fewer part-filled rows: one pack's last rows are the only ones short of the length).
    """

    needs_pairs = False

    def __init__(self, max_len: int, special, pack_pieces: int = 65536):
        if max_len < 3:
            raise ConfigError(f"max_len={max_len} is too short for a packed row; use at least 3")
        if pack_pieces < 1:
            raise ConfigError(f"pack_pieces must be positive, got {pack_pieces}")
        self.special, self.max_len, self.pack_pieces = special, max_len, pack_pieces
        self.budget = max_len - 2  # [CLS] + one piece + its [SEP]
        self.stats = {"examples": 0, "pieces": 0, "tokens": 0}

    def build(self, docs, indices: Sequence[int], rng: random.Random | None = None) -> list[dict]:
        rng = rng or random.Random(0)
        out: list[dict] = []
        pack: list[np.ndarray] = []
        for index in indices:
            pack.extend(document_pieces(docs[int(index)], self.budget))
            if len(pack) >= self.pack_pieces:
                out.extend(self._rows(pack))
                pack = []
        if pack:
            out.extend(self._rows(pack))
        rng.shuffle(out)
        self.stats["examples"] += len(out)
        return out

    def _rows(self, pieces: list[np.ndarray]) -> list[dict]:
        """One pack's rows: each piece ends with [SEP]; each row starts with one [CLS]."""
        sep = np.array([self.special.sep_id], dtype=np.int64)
        out = []
        for row in fill_rows(pieces, self.max_len - 1):
            parts = [np.array([self.special.cls_id], dtype=np.int64)]
            for piece in row:
                parts.extend((piece, sep))
            ids = np.concatenate(parts).astype(np.int64)
            out.append({"input_ids": ids, "token_type_ids": np.zeros(len(ids), np.int64)})
        self.stats["pieces"] += len(pieces)
        self.stats["tokens"] += sum(len(ex["input_ids"]) for ex in out)
        return out
