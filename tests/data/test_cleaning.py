"""Deduplication and quality filters of the training documents (bertkit/data/cleaning.py) and
their [data] options in the pre-training recipe: what is dropped, and that the held-out
documents and batches stay those of a run without them."""

import json

import numpy as np
import pytest

from bertkit.data.cleaning import CleaningRules, clean_documents, sentence_passes, word_counts
from bertkit.data.documents import CorpusDocuments, split_documents
from bertkit.errors import ConfigError
from bertkit.recipes.pretrain import build_data, parse_config
from bertkit.runtime.process_group import DistContext

from .helpers import minilm_tokenizer

WORDS = {1: "the", 2: "cat", 3: "sat", 4: "hello", 5: "down", 6: "2", 7: "-", 8: "1", 9: "on", 10: "(", 11: ")",
         12: "zool."}


def decode(batch):
    return [" ".join(WORDS[i] for i in ids) for ids in batch]


def doc(*sentences):
    return [np.array(s, dtype=np.uint16) for s in sentences]


def test_words_are_pieces_with_a_letter_or_digit():
    # counted by hand: "2 - 1" has the words 2 and 1 (none alphabetic); "( zool. )" one, alphabetic
    assert word_counts("hearts 2 - 1 livingston") == (4, 2)
    assert word_counts("( zool. )") == (1, 1)
    assert word_counts("only 16 % of £50, 000") == (5, 2)
    assert word_counts("  ") == (0, 0)
    assert word_counts("café naïve") == (2, 2)


def test_sentence_rules_at_their_thresholds():
    three = CleaningRules(min_words=3)
    assert sentence_passes("the cat sat", three)
    assert not sentence_passes("the cat .", three)  # "." is not a word: 2 words
    alpha = CleaningRules(min_alpha_fraction=0.5)
    assert sentence_passes("hearts 2 - 1 livingston", alpha)  # 2 of 4 = 0.5, not below
    assert not sentence_passes("hearts 2 - 1 3", alpha)  # 1 of 4
    assert not sentence_passes("- -", alpha)  # no word: share 0
    assert sentence_passes("- -", CleaningRules())  # the rules off: everything passes


def test_dedup_drops_later_copies_and_copies_of_held_out_documents():
    docs = [doc([1, 2, 3]),           # 0 kept (first copy)
            doc([1, 2, 3]),           # 1 equal to 0
            doc([1, 2], [3]),         # 2 the same ids, another sentence boundary: equal to 0
            doc([4], [1, 2, 3, 5]),   # 3 kept
            doc([9, 9, 9]),           # 4 held out
            doc([9], [9, 9]),         # 5 equal to held-out 4
            doc([4])]                 # 6 held out, no training copy
    cleaned = clean_documents(docs, [0, 1, 2, 3, 5], [4, 6], CleaningRules(dedup=True))
    assert cleaned.train_docs.tolist() == [0, 3]
    s = cleaned.stats
    assert (s["duplicate_documents"], s["held_out_copies"], s["kept_documents"], s["train_documents"]) == (3, 1, 2, 5)
    assert (s["train_tokens"], s["kept_tokens"]) == (3 + 3 + 3 + 5 + 3, 3 + 5)
    assert len(cleaned.docs) == len(docs)
    assert [x.tolist() for x in cleaned.docs[5]] == [[9], [9, 9]]  # the view still serves every document


def test_sentence_filters_drop_sentences_and_emptied_documents_but_never_held_out_ones():
    docs = [doc([1, 2, 3], [4], [1, 2, 3, 5]),  # "hello" (1 word) goes
            doc([10, 12, 11]),                   # "( zool. )": 1 word, the document empties
            doc([6, 7, 8, 1, 2]),                # "2 - 1 the cat": 4 words, 2 alphabetic
            doc([4])]                            # held out: kept whole though it fails
    rules = CleaningRules(min_words=3, min_alpha_fraction=0.6)
    cleaned = clean_documents(docs, [0, 1, 2], [3], rules, decode)
    assert cleaned.train_docs.tolist() == [0]
    assert [x.tolist() for x in cleaned.docs[0]] == [[1, 2, 3], [1, 2, 3, 5]]
    assert cleaned.docs[1] == [] and [x.tolist() for x in cleaned.docs[3]] == [[4]]
    assert cleaned.docs.sentence_counts().tolist() == [2, 0, 0, 1]
    s = cleaned.stats
    assert (s["filtered_sentences"], s["emptied_documents"], s["kept_sentences"], s["kept_tokens"]) == (3, 2, 2, 7)
    with pytest.raises(ConfigError, match="tokenizer"):
        clean_documents(docs, [0], [3], rules)


@pytest.mark.parametrize("key, value, message", [
    ("dedup", "yes", "data.dedup"),
    ("min_words", -1, "data.min_words must be an integer >= 0"),
    ("min_alpha_fraction", 1.5, r"data.min_alpha_fraction must be a number in \[0, 1\]"),
])
def test_bad_options_are_refused_with_what_to_write(key, value, message):
    with pytest.raises(ConfigError, match=message):
        parse_config({"data": {key: value}})


def _data(tmp_path, name, texts, **cleaning):
    """build_data on a corpus of one document per text (a tiny mini recipe)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir(exist_ok=True)
    for i, text in enumerate(texts):
        (corpus / f"{i:03d}.txt").write_text(text)
    cfg = parse_config({"data": {"corpus": str(corpus), "max_length": 16, "eval_fraction": 0.25, **cleaning},
                        "train": {"batch_size": 4, "max_steps": 1}})
    out = tmp_path / name
    documents = CorpusDocuments(cfg.data.corpus, cfg.data.mode, cfg.data.max_documents)
    return build_data(cfg.data, cfg.train, cfg.objective, minilm_tokenizer(), documents, str(out), DistContext()), out


def test_the_recipe_cleans_training_documents_and_holds_out_the_same_ones(tmp_path):
    texts = [f"Article {i} says the cat sat on mat number {i} today." for i in range(6)]
    texts += [texts[0], texts[1].upper(), "Scores: 2-1. Then the cat sat down on the mat again."]
    assert split_documents(9, 0.25, 0)[1].tolist() == [3, 7]  # the texts are placed for this split
    plain, _ = _data(tmp_path, "plain", texts)
    clean, out = _data(tmp_path, "clean", texts, dedup=True, min_words=4)
    assert plain.train_docs.tolist() == [0, 1, 2, 4, 5, 6, 8]
    # documents 6 and 7 repeat 0 and 1 (7 in capitals: the uncased tokenizer makes it equal); 7
    # is held out, so 1 (its copy in training) is the one dropped; "scores : 2 - 1." (3 words) goes
    assert clean.train_docs.tolist() == [0, 2, 4, 5, 8]
    stats = json.loads((out / "cleaning.json").read_text())["corpus"]
    assert (stats["duplicate_documents"], stats["held_out_copies"], stats["filtered_sentences"]) == (2, 1, 1)
    assert len(clean.docs[8]) == len(plain.docs[8]) - 1
    for a, b in zip(plain.eval_batches, clean.eval_batches, strict=True):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
