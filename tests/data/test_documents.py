"""data/documents.py: a corpus sharded once (and resumed, not redone), shard directories opened as
they are, the first N documents, and the seeded train/held-out split."""

import os

import numpy as np
import pytest

from bertkit.data import documents as documents_module
from bertkit.data.documents import CorpusDocuments, complete_shards, first, shard_documents, split_documents
from bertkit.errors import ConfigError

from tests.data.helpers import minilm_tokenizer


def test_first_takes_n_documents_or_all():
    assert list(first(iter("abcde"), 2)) == ["a", "b"]
    assert list(first(iter("abc"), 0)) == ["a", "b", "c"]


def test_a_corpus_is_sharded_once_and_a_shard_directory_opens_as_it_is(tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_text("First document. It has two sentences.\n\nSecond one here.\n\nA third document.\n")
    tok = minilm_tokenizer()
    waited = []
    directory = str(tmp_path / "shards")
    assert not complete_shards(directory)
    corpus = CorpusDocuments(str(text), mode="blank", max_documents=2)
    docs = shard_documents(corpus, tok, directory, barrier=lambda: waited.append(1))
    assert len(docs) == 2 and waited == [1] and complete_shards(directory)
    assert tok.decode(np.concatenate(docs[0]).tolist()) == "first document. it has two sentences."
    stamp = os.path.getmtime(os.path.join(directory, "meta.json"))
    again = shard_documents(corpus, tok, directory)
    assert len(again) == 2 and os.path.getmtime(os.path.join(directory, "meta.json")) == stamp  # not redone
    # a shard directory given as the source is opened, nothing is written to `directory`
    elsewhere = str(tmp_path / "unused")
    assert len(shard_documents(CorpusDocuments(directory), tok, elsewhere)) == 2 and not os.path.exists(elsewhere)


def counting_opens(monkeypatch) -> list:
    opened = []
    real = documents_module.open_corpus

    def open_corpus(source, mode="file"):
        opened.append(source)
        return real(source, mode)

    monkeypatch.setattr(documents_module, "open_corpus", open_corpus)
    return opened


def test_corpus_documents_are_read_once_when_kept_and_streamed_otherwise(tmp_path, monkeypatch):
    text = tmp_path / "corpus.txt"
    text.write_text("One. Two.\n\nThree.\n\nFour.\n", encoding="utf-8")
    opened = counting_opens(monkeypatch)
    kept = CorpusDocuments(str(text), mode="blank", max_documents=2)
    assert opened == []  # nothing read before the documents are walked
    assert list(kept) == list(kept) == [["One.", "Two."], ["Three."]]
    assert list(kept.lines()) == list(kept.lines()) == ["One.", "Two.", "Three."]
    assert len(opened) == 1
    streamed = CorpusDocuments(str(text), mode="blank", keep=False)
    assert list(streamed) == list(streamed) == [["One.", "Two."], ["Three."], ["Four."]]
    assert len(opened) == 3


def test_split_is_seeded_disjoint_and_keeps_one_of_each():
    train, held_out = split_documents(100, 0.1, seed=3)
    assert len(held_out) == 10 and not set(train) & set(held_out) and len(train) + len(held_out) == 100
    assert np.array_equal(held_out, split_documents(100, 0.1, seed=3)[1])
    assert not np.array_equal(held_out, split_documents(100, 0.1, seed=4)[1])
    assert [len(x) for x in split_documents(2, 0.9, seed=0)] == [1, 1]
    with pytest.raises(ConfigError, match="at least 2"):
        split_documents(1, 0.1, seed=0)
