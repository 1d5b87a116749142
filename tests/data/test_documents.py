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


def counting_reads(monkeypatch) -> list:
    """Every walk over a corpus's files appends to the list returned."""
    reads = []
    real = documents_module.open_corpus

    class Counted:
        def __init__(self, corpus):
            self.corpus = corpus

        def __iter__(self):
            reads.append(1)
            return iter(self.corpus)

        def __getattr__(self, name):  # the rest (mode, fingerprint) is the corpus's
            return getattr(self.corpus, name)

    monkeypatch.setattr(documents_module, "open_corpus",
                        lambda source, mode="file", text_field="text": Counted(real(source, mode, text_field)))
    return reads


def test_corpus_documents_are_read_once_when_kept_and_streamed_otherwise(tmp_path, monkeypatch):
    text = tmp_path / "corpus.txt"
    text.write_text("One. Two.\n\nThree.\n\nFour.\n", encoding="utf-8")
    reads = counting_reads(monkeypatch)
    kept = CorpusDocuments(str(text), mode="blank", max_documents=2)
    assert reads == []  # nothing read before the documents are walked
    assert list(kept) == list(kept) == [["One.", "Two."], ["Three."]]
    assert list(kept.lines()) == list(kept.lines()) == ["One.", "Two.", "Three."]
    assert len(reads) == 1
    streamed = CorpusDocuments(str(text), mode="blank", keep=False)
    assert list(streamed) == list(streamed) == [["One.", "Two."], ["Three."], ["Four."]]
    assert len(reads) == 3
