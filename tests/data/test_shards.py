import json
import os

import numpy as np
import pytest

from bertkit.data import shards as S
from bertkit.data.shards import ShardedCorpus, prepare_shards, vocab_fingerprint
from bertkit.errors import DataError
from tests.data.helpers import bbc_documents, minilm_tokenizer


@pytest.fixture(scope="module")
def tok():
    return minilm_tokenizer()


@pytest.fixture(scope="module")
def docs():
    return [list(d) for d in bbc_documents(40)]


def direct(tok, docs):
    """What the shards must hold: every sentence tokenized on its own, empty ones dropped."""
    return [[np.array(ids) for ids in tok.encode_batch(d, add_special_tokens=False) if ids] for d in docs]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_round_trip_equals_direct_tokenization(tmp_path, tok, docs, num_workers):
    meta = prepare_shards(docs, tok, tmp_path, shard_tokens=5000, num_workers=num_workers,
                          progress=False, batch_docs=7)
    assert len(meta["shards"]) > 2  # several shards, documents kept whole
    corpus = ShardedCorpus(tmp_path, expected_vocab=tok)
    want = direct(tok, docs)
    assert len(corpus) == len(want) == meta["num_documents"]
    for got_doc, want_doc in zip(corpus, want):
        assert len(got_doc) == len(want_doc)
        for g, w in zip(got_doc, want_doc):
            np.testing.assert_array_equal(g, w)
    assert corpus.num_tokens == sum(len(s) for d in want for s in d)
    np.testing.assert_array_equal(corpus.sentence_counts(), [len(d) for d in want])
    np.testing.assert_array_equal(corpus.document_lengths(), [sum(map(len, d)) for d in want])
    assert corpus[-1][0].tolist() == want[-1][0].tolist()


def test_uint16_for_bert_vocab_and_uint32_above(tmp_path, tok, docs):
    assert tok.vocab_size == 30522
    meta = prepare_shards(docs[:2], tok, tmp_path, progress=False)
    assert meta["dtype"] == "uint16"
    assert os.path.getsize(tmp_path / "tokens-00000.bin") == 2 * meta["num_tokens"]
    assert ShardedCorpus(tmp_path)[0][0].dtype == np.uint16
    assert S.token_dtype(65535) == np.uint16 and S.token_dtype(65536) == np.uint32


def test_resume_after_interruption(tmp_path, tok, docs):
    full = tmp_path / "full"
    prepare_shards(docs, tok, full, shard_tokens=4000, progress=False)

    def interrupted():  # the corpus stream dies part way, as a killed process would
        for i, d in enumerate(docs):
            if i == 25:
                raise KeyboardInterrupt
            yield d

    part = tmp_path / "part"
    with pytest.raises(KeyboardInterrupt):
        prepare_shards(interrupted(), tok, part, shard_tokens=4000, progress=False, batch_docs=4)
    meta = json.loads((part / "meta.json").read_text())
    assert not meta["complete"] and 0 < meta["documents_read"] < 25 and meta["shards"]
    assert not list(part.glob("*.tmp"))  # the unfinished shard was cleaned up
    with pytest.raises(DataError, match="unfinished prepare run"):
        ShardedCorpus(part)

    seen = []

    def counting():
        for d in docs:
            seen.append(d)
            yield d

    resumed = prepare_shards(counting(), tok, part, shard_tokens=4000, progress=False, resume=True)
    assert resumed["complete"]
    assert resumed["shards"] == json.loads((full / "meta.json").read_text())["shards"]
    for name in sorted(os.listdir(full)):
        assert (part / name).read_bytes() == (full / name).read_bytes(), name
    # Resuming a finished directory does no work.
    again = prepare_shards(iter(()), tok, part, progress=False, resume=True)
    assert again == resumed


def test_fingerprint_mismatch(tmp_path, tok, docs):
    prepare_shards(docs[:3], tok, tmp_path, progress=False)
    other = dict(tok.get_vocab())
    other["zzz-new-token"] = len(other)
    assert vocab_fingerprint(other) != vocab_fingerprint(tok)
    with pytest.raises(DataError, match=r"different vocabulary.*--set tokenizer.path=DIR.*re-run bertkit prepare"):
        ShardedCorpus(tmp_path, expected_vocab=other)
    ShardedCorpus(tmp_path, expected_vocab=vocab_fingerprint(tok))  # a fingerprint string works too


def test_truncated_or_missing_files(tmp_path, tok, docs):
    prepare_shards(docs[:5], tok, tmp_path, shard_tokens=1000, progress=False)
    path = tmp_path / "tokens-00001.bin"
    data = path.read_bytes()
    path.write_bytes(data[:-2])
    with pytest.raises(DataError, match="tokens-00001.bin has .* bytes.*truncated"):
        ShardedCorpus(tmp_path)
    path.unlink()
    with pytest.raises(DataError, match="tokens-00001.bin is missing"):
        ShardedCorpus(tmp_path)
    (tmp_path / "meta.json").write_text("{not json")
    with pytest.raises(DataError, match="corrupt"):
        ShardedCorpus(tmp_path)
    with pytest.raises(DataError, match="not a shard directory"):
        ShardedCorpus(tmp_path / "nowhere")


def test_empty_input_raises(tmp_path, tok):
    with pytest.raises(DataError, match="no tokens"):
        prepare_shards([["   "], []], tok, tmp_path, progress=False)
