"""Best-fit packing (bertkit/data/packing.py): rows filled to the length, no piece across two
documents, and the efficiency measured on real text (BBC News training articles, MiniLM's vocabulary)."""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest

from bertkit.data.corpus import open_corpus
from bertkit.data.examples import FullSentencesBuilder, SpecialTokens, make_builder
from bertkit.data.packing import PackedBuilder, document_pieces, fill_rows, packing_efficiency
from bertkit.errors import ConfigError

from tests.data.helpers import minilm_tokenizer

SPECIAL = SpecialTokens(cls_id=1, sep_id=2)


def synthetic_documents(n: int, seed: int = 0) -> list[list[np.ndarray]]:
    """Documents of 1-12 sentences of 1-40 tokens; document d's tokens are 1000 * (d + 1) + k,
    so every token says which document it came from and where."""
    rng = random.Random(seed)
    docs = []
    for d in range(n):
        k, doc = 0, []
        for _ in range(rng.randint(1, 12)):
            length = rng.randint(1, 40)
            doc.append(np.arange(k, k + length) + 1000 * (d + 1))
            k += length
        docs.append(doc)
    return docs


def pieces_of(row: np.ndarray) -> list[np.ndarray]:
    """The pieces of a packed row: [CLS] piece [SEP] piece [SEP] ..."""
    assert row[0] == SPECIAL.cls_id and row[-1] == SPECIAL.sep_id
    cuts = np.flatnonzero(row == SPECIAL.sep_id)
    return [row[a + 1:b] for a, b in zip(np.concatenate([[0], cuts[:-1]]), cuts)]


def test_a_document_becomes_pieces_of_the_budget_and_a_tail():
    doc = [np.arange(0, 30), np.arange(30, 35), np.arange(35, 70)]
    pieces = document_pieces(doc, 32)
    assert [len(p) for p in pieces] == [32, 32, 6]
    assert np.array_equal(np.concatenate(pieces), np.arange(70))
    assert document_pieces([np.arange(5)], 32)[0].tolist() == list(range(5))  # fits: one piece
    assert document_pieces([], 32) == []


def test_rows_hold_at_most_their_room_and_cut_only_to_fill_one():
    pieces = [np.arange(n) for n in (20, 20, 5, 3, 30)]
    rows = fill_rows(pieces, 32, min_cut=4)
    assert all(sum(len(p) + 1 for p in row) <= 32 for row in rows)
    assert sorted(np.concatenate([np.concatenate(r) for r in rows]).tolist()) == sorted(
        np.concatenate(pieces).tolist())
    # 30 tokens: the longest piece opens row 0 alone (31 slots) and 1 slot is left: below min_cut
    assert [len(p) for p in rows[0]] == [30]


@pytest.mark.parametrize("max_len", [32, 128])
def test_every_token_lands_once_in_order_and_no_piece_spans_documents(max_len):
    docs = synthetic_documents(300)
    examples = PackedBuilder(max_len, SPECIAL).build(docs, range(len(docs)), random.Random(0))
    assert all(len(ex["input_ids"]) <= max_len for ex in examples)
    seen = {d: [] for d in range(len(docs))}
    for ex in examples:
        for piece in pieces_of(ex["input_ids"]):
            owners = set((piece // 1000 - 1).tolist())
            assert len(owners) == 1  # a piece is text of one document
            seen[owners.pop()].append(piece)
    for d, doc in enumerate(docs):  # each document's tokens, all of them, exactly once
        got = np.sort(np.concatenate(seen[d]))
        assert np.array_equal(got, np.concatenate(doc))
    assert packing_efficiency(examples, max_len) >= 0.99


def test_rows_are_shuffled_by_the_seed_and_the_builder_is_registered():
    docs = synthetic_documents(200)
    a = PackedBuilder(64, SPECIAL).build(docs, range(200), random.Random(1))
    b = PackedBuilder(64, SPECIAL).build(docs, range(200), random.Random(1))
    c = PackedBuilder(64, SPECIAL).build(docs, range(200), random.Random(2))
    assert all(np.array_equal(x["input_ids"], y["input_ids"]) for x, y in zip(a, b))
    assert any(not np.array_equal(x["input_ids"], y["input_ids"]) for x, y in zip(a, c))
    assert isinstance(make_builder("packed", 64, SPECIAL), PackedBuilder)
    with pytest.raises(ConfigError, match="too short"):
        PackedBuilder(2, SPECIAL)


def bbc_training_documents(tokenizer) -> list[list[np.ndarray]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        texts = list(open_corpus("bbc:train"))
    flat = [s for doc in texts for s in doc]
    ids = iter(tokenizer.encode_batch(flat, add_special_tokens=False))
    return [[np.asarray(i) for i in (next(ids) for _ in doc) if i] for doc in texts]


def test_packing_efficiency_on_real_text_is_above_99_percent():
    """The 1,556 BBC training articles (about 500 tokens each) at 128 and 512 tokens: above 99%
    of the slots hold a token; FULL-SENTENCES, which closes a row where the next sentence does
    not fit, stays under it."""
    tokenizer = minilm_tokenizer()
    docs = bbc_training_documents(tokenizer)
    special = SpecialTokens.from_tokenizer(tokenizer)
    for max_len in (128, 512):
        packed = PackedBuilder(max_len, special).build(docs, range(len(docs)))
        full = FullSentencesBuilder(max_len, special).build(docs, range(len(docs)))
        assert packing_efficiency(packed, max_len) >= 0.99
        assert packing_efficiency(full, max_len) < 0.99
        tokens = sum(len(s) for doc in docs for s in doc)
        assert sum(len(ex["input_ids"]) for ex in packed) >= tokens  # nothing dropped
