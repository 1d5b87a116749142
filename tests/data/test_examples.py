import random

import numpy as np
import pytest
import torch

from bertkit.data.examples import (DocSentencesBuilder, FullSentencesBuilder, NSPBuilder, PretrainingDataset,
                                   SOPBuilder, SpecialTokens, make_builder, truncate_seq_pair)
from bertkit.errors import ConfigError, DataError
from tests.data.helpers import bbc_documents, minilm_tokenizer

CLS, SEP = 101, 102
SPECIAL = SpecialTokens(CLS, SEP, "wordpiece")


@pytest.fixture(scope="module")
def docs():
    tok = minilm_tokenizer()
    return [[np.array(s) for s in tok.encode_batch(list(d)) if s] for d in bbc_documents(60)]


def segments(ex):
    """Split [CLS] A [SEP] B [SEP] back into A and B, checking the template and token types."""
    ids, types = ex["input_ids"].tolist(), ex["token_type_ids"].tolist()
    assert ids[0] == CLS and ids[-1] == SEP and ids.count(SEP) == 2
    cut = ids.index(SEP)
    assert types == [0] * (cut + 1) + [1] * (len(ids) - cut - 1)
    return ids[1:cut], ids[cut + 1:-1]


def find(haystack: bytes, needle) -> int:
    """Token position of `needle` (a token list) in `haystack` (int32 bytes), or -1."""
    pat = np.asarray(needle, dtype=np.int32).tobytes()
    at = haystack.find(pat)
    while at >= 0 and at % 4:
        at = haystack.find(pat, at + 1)
    return at // 4 if at >= 0 else -1


def contains(haystack: bytes, needle) -> bool:
    return find(haystack, needle) >= 0


def as_bytes(docs):
    return [np.concatenate(d).astype(np.int32).tobytes() for d in docs]


def test_truncate_seq_pair_trims_the_longer_from_both_ends():
    rng = random.Random(0)
    fronts = backs = 0
    for _ in range(200):
        a, b = list(range(10)), list(range(100, 104))
        truncate_seq_pair(a, b, 8, rng)
        assert len(a) + len(b) == 8 and b == [100, 101, 102, 103]
        assert a == list(range(a[0], a[0] + 4))  # a contiguous piece of the original
        fronts += a[0] > 0
        backs += a[-1] < 9
    assert fronts > 50 and backs > 50


def test_nsp_pairs(docs):
    builder = NSPBuilder(64, SPECIAL)
    examples = [ex for i in range(len(docs)) for ex in builder.build_document(docs, i, random.Random(i))]
    labels = np.array([int(ex["next_sentence_label"]) for ex in examples])
    assert len(examples) > 300
    # 50% random B, plus chunks of a single sentence, which always get a random B.
    assert 0.45 < labels.mean() < 0.62
    doc_text = as_bytes(docs)
    back_to_back = 0
    for ex in examples:
        assert len(ex["input_ids"]) <= 64
        a, b = segments(ex)
        assert a and b
        if ex["next_sentence_label"] == 0:  # IsNext: B follows A in the same document
            gaps = [find(d, b) - find(d, a) - len(a) for d in doc_text if contains(d, a) and contains(d, b)]
            # truncation may trim the end of A and the start of B: a gap below max_len remains
            assert any(0 <= g < 64 for g in gaps)
            back_to_back += 0 in gaps
    assert back_to_back > 0  # pairs that needed no truncation are exactly adjacent
    short = [ex for ex in examples if len(ex["input_ids"]) < 40]
    assert short  # short_seq_prob produces some short targets


def test_nsp_not_next_comes_from_another_document():
    # Documents of distinct token ranges: the source of every segment is visible.
    docs = [[np.arange(1000 * d + 10 * s, 1000 * d + 10 * s + 6) for s in range(8)] for d in range(1, 6)]
    builder = NSPBuilder(40, SPECIAL, short_seq_prob=0.0)
    for i in range(len(docs)):
        for ex in builder.build_document(docs, i, random.Random(i)):
            a, b = segments(ex)
            same = {t // 1000 for t in a} == {t // 1000 for t in b} == {i + 1}
            assert same == (ex["next_sentence_label"] == 0)


def test_sop_swaps_half_of_consecutive_pairs(docs):
    builder = SOPBuilder(64, SPECIAL)
    examples = [ex for i in range(len(docs)) for ex in builder.build_document(docs, i, random.Random(i))]
    labels = np.array([int(ex["next_sentence_label"]) for ex in examples])
    assert 0.4 < labels.mean() < 0.6
    doc_text = as_bytes(docs)
    for ex in examples:
        a, b = segments(ex)
        first, second = (b, a) if ex["next_sentence_label"] == 1 else (a, b)
        gaps = [find(d, second) - find(d, first) - len(first) for d in doc_text
                if contains(d, first) and contains(d, second)]
        assert any(0 <= g < 64 for g in gaps)  # in order, up to truncation


def test_full_sentences_packs_across_documents_and_fills():
    docs = [[np.full(n, 1000 + 10 * d + s) for s, n in enumerate(lens)]
            for d, lens in enumerate([[5, 7, 3], [9], [4, 4, 4, 4], [30], [2, 6]])]
    builder = FullSentencesBuilder(16, SPECIAL)
    examples = builder.build(docs, range(len(docs)))
    stream = [t for ex in examples for t in ex["input_ids"][1:-1].tolist()]
    want = []
    for d, doc in enumerate(docs):
        if d:
            want.append(SEP)  # document separator
        want += [int(t) for s in doc for t in s]
    assert stream == want  # nothing lost, nothing reordered
    for ex, nxt in zip(examples, examples[1:]):
        ids = ex["input_ids"].tolist()
        assert ids[0] == CLS and ids[-1] == SEP and len(ids) <= 16
        # The example closed because the next sentence (first unit of the next one) did not fit.
        first_unit = 1 + next(i for i, t in enumerate(nxt["input_ids"][2:].tolist() + [None])
                              if t != nxt["input_ids"][1])
        assert len(ids) + first_unit > 16 or len(ids) == 16
    exact = FullSentencesBuilder(16, SPECIAL, exact_fill=True).build(docs, range(len(docs)))
    assert all(len(ex["input_ids"]) == 16 for ex in exact[:-1])
    assert [t for ex in exact for t in ex["input_ids"][1:-1].tolist()] == want


def test_doc_sentences_never_cross_documents(docs):
    examples = DocSentencesBuilder(64, SPECIAL).build(docs, range(len(docs)))
    doc_text = as_bytes(docs)
    assert len(examples) > len(docs)
    for ex in examples:
        body = ex["input_ids"][1:-1].tolist()
        assert len(ex["input_ids"]) <= 64 and SEP not in body
        assert any(contains(d, body) for d in doc_text)


def test_roberta_template():
    sp = SpecialTokens(0, 2, "bpe")
    ex = sp.pair(np.array([5, 6]), np.array([7]), 1)
    assert ex["input_ids"].tolist() == [0, 5, 6, 2, 2, 7, 2] and not ex["token_type_ids"].any()
    assert NSPBuilder(10, sp).max_tokens == 6


def test_unusable_corpora_raise():
    one_sentence_docs = [[np.array([5, 6])], [np.array([7])]]
    with pytest.raises(DataError, match="no document has two sentences"):
        PretrainingDataset(one_sentence_docs, NSPBuilder(32, SPECIAL))
    with pytest.raises(DataError, match="at least two non-empty documents"):
        PretrainingDataset([[np.array([5]), np.array([6])]], NSPBuilder(32, SPECIAL))
    with pytest.raises(ConfigError, match="unknown example kind"):
        make_builder("mlm", 32, SPECIAL)
    ds = PretrainingDataset(one_sentence_docs + [[np.array([8]), np.array([9])]], NSPBuilder(32, SPECIAL), seed=0)
    examples = list(ds)
    assert examples and ds.builder.stats["skipped_short_docs"] == 2


def test_dataset_deterministic_and_resumes_exactly(docs):
    def make(seed=3):
        return PretrainingDataset(docs, NSPBuilder(64, SPECIAL), seed=seed, block_docs=8)

    ds = make()
    epoch0 = list(ds)
    assert ds.state_dict()["epoch"] == 1  # finishing an epoch moves to the next
    epoch1 = list(ds)
    again = list(make())
    key = lambda exs: [e["input_ids"].tobytes() for e in exs]  # noqa: E731
    assert key(epoch0) == key(again)
    assert key(epoch0) != key(epoch1)
    assert key(epoch0) != key(list(make(seed=4)))

    ds = make()
    it = iter(ds)
    head = [next(it) for _ in range(77)]  # stop mid-block
    state = ds.state_dict()
    resumed = make()
    resumed.load_state_dict(state)
    resumed.set_epoch(0)  # a trainer calling set_epoch at the top of the epoch keeps the position
    assert key(head + list(resumed)) == key(epoch0)


def test_rank_sharding_is_disjoint_and_complete(docs):
    world = 3
    seen = []
    for rank in range(world):
        ds = PretrainingDataset(docs, FullSentencesBuilder(64, SPECIAL), seed=1, rank=rank, world_size=world)
        seen.append(set(ds.rank_documents().tolist()))
        assert list(ds)
    assert sum(map(len, seen)) == len(docs) and set.union(*seen) == set(range(len(docs)))
    with pytest.raises(ConfigError):
        PretrainingDataset(docs, FullSentencesBuilder(64, SPECIAL), rank=3, world_size=3)


def test_dataloader_with_workers_is_refused(docs, monkeypatch):
    ds = PretrainingDataset(docs[:4], FullSentencesBuilder(64, SPECIAL))
    # Inside a DataLoader worker get_worker_info() returns the worker's info (not None).
    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: object())
    with pytest.raises(DataError, match="num_workers=0"):
        next(iter(ds))
