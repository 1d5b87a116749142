"""A tagger reading a sentence longer than max_length: data.long_text="chunks" tags every word from
overlapping windows (bertkit/tasks/tagging.py `_windows`, alignment.py `word_predictions`), where truncation tags
the cut words "O"; predict reads a folder of .txt files, each file one text."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

from bertkit.commands.cli import main
from bertkit.errors import ConfigError
from bertkit.models.config import BertConfig
from bertkit.models.heads import BertForTokenClassification
from bertkit.recipes.finetune import finetune
from bertkit.tasks import DataConfig, TaskSpec, get_task, read_prediction_input
from bertkit.tasks.inference import inference_spec
from bertkit.tasks.alignment import IGNORE_INDEX, word_predictions
from bertkit.tasks.formats import TokenExample
from bertkit.tasks.tagging import encode_words
from bertkit.tokenizer import Tokenizer

from .helpers import make_tiny_model

WORDS = "market film vote match chip bank actor party goal phone unbelievably".split()
TAGS = ["O", "B-X", "I-X"]
SPLIT = ["goalmatch", "phonebank"]  # not in the vocabulary as words: several sub-words each


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tag") / "tiny", [" ".join(WORDS)] * 3)


def _long_sentence(count: int = 70) -> TokenExample:
    words = [(WORDS + SPLIT)[i % (len(WORDS) + 2)] for i in range(count)]
    return TokenExample(words, [TAGS[i % 3] for i in range(count)])


def test_windows_hold_every_word_once_as_a_first_sub_word(tiny):
    tokenizer = Tokenizer.from_pretrained(tiny)
    example = _long_sentence()
    label2id = {tag: i for i, tag in enumerate(TAGS)}
    windows = encode_words(tokenizer, [example], 24, label2id, long_text="chunks", stride=6)
    whole = encode_words(tokenizer, [example], 10_000)[0]
    assert len(windows) > 3 and all(len(w["input_ids"]) <= 24 and w["example"] == 0 for w in windows)
    assert all(w["input_ids"][0] == whole["input_ids"][0] and w["input_ids"][-1] == whole["input_ids"][-1]
               for w in windows)
    seen = set()
    for window in windows:
        ids = window["word_ids"]
        # a word's pieces in a window start with its first sub-word, or it has no id there at all
        for word in set(ids[ids >= 0].tolist()):
            first = int(np.flatnonzero(whole["word_ids"] == word)[0])
            assert window["input_ids"][int(np.flatnonzero(ids == word)[0])] == whole["input_ids"][first]
        seen.update(ids[ids >= 0].tolist())
        # labels sit on the first sub-word of each word the window holds, nowhere else
        labelled = window["labels"] != IGNORE_INDEX
        assert labelled.sum() == len(set(ids[ids >= 0].tolist()))
        assert [TAGS[label] for label in window["labels"][labelled]] == [example.tags[w] for w in
                                                                         sorted(set(ids[ids >= 0].tolist()))]
    assert seen == set(range(len(example.tokens)))


def test_each_word_takes_the_window_where_it_sits_farthest_from_the_ends():
    example = TokenExample(["a", "b", "c", "d"], ["O"] * 4)
    # window 0 holds words 0-2 (positions 1-3), window 1 words 1-3; one class per window
    features = [{"word_ids": np.array([-1, 0, 1, 2, -1]), "example": 0},
                {"word_ids": np.array([-1, 1, 2, 3, -1]), "example": 0}]
    outputs = [np.tile([5.0, 0.0], (5, 1)), np.tile([0.0, 5.0], (5, 1))]
    # word 1: position 2 of 5 in window 0 (2 from an end) against 1 in window 1; word 2 the reverse
    assert word_predictions([len(example.tokens)], features, outputs)[0].tolist() == [0, 0, 1, 1]


def _context_free_tagger(tokenizer) -> BertForTokenClassification:
    """A tagger whose logits at a token depend on that token alone: no position embeddings and an
    attention that adds nothing, so a word's tag must be the same whichever window reads it."""
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, id2label=dict(enumerate(TAGS)))
    model = BertForTokenClassification(config)
    with torch.no_grad():
        model.bert.embeddings.position_embeddings.weight.zero_()
        output = model.bert.encoder.layer[0].attention.output.dense
        output.weight.zero_()
        output.bias.zero_()
        model.bert.embeddings.word_embeddings.weight.normal_(0, 1.0)  # tokens apart, above what they share
    return model.eval()


def test_chunks_tag_each_word_as_it_is_tagged_alone(tiny):
    tokenizer = Tokenizer.from_pretrained(tiny)
    model = _context_free_tagger(tokenizer)
    task = get_task("token-classification")
    example = _long_sentence()
    chunked = task.decode(model, tokenizer, [example], TaskSpec(task, DataConfig(max_length=24, long_text="chunks",
                                                                                   doc_stride=6)))[0].tags
    alone = task.decode(model, tokenizer, [TokenExample([w], ["O"]) for w in example.tokens],
                        TaskSpec(task, DataConfig(max_length=24)))
    assert chunked == [prediction.tags[0] for prediction in alone]
    assert len(set(chunked)) == 3  # the classes differ by word: the check can tell windows apart
    with pytest.warns(UserWarning, match="long_text=chunks"):  # truncated: a hint names the setting
        cut = task.decode(model, tokenizer, [example], TaskSpec(task, DataConfig(max_length=24)))[0]
    assert cut.tags[:10] == chunked[:10] and set(cut.tags[30:]) == {"O"}
    assert np.isnan(cut.probs[30:]).all() and not np.isnan(cut.probs[:10]).any()  # cut words are not read


def test_a_folder_of_documents_is_tagged_whole_one_row_per_file(tiny, tmp_path, capsys):
    rng = np.random.default_rng(0)
    conll = "".join(f"{w} {TAGS[i % 3]}\n" + ("\n" if i % 8 == 7 else "") for i, w in enumerate(rng.choice(WORDS, 96)))
    (tmp_path / "train.conll").write_text(conll, encoding="utf-8")
    out = str(tmp_path / "tagger")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        finetune("token-classification", tiny, str(tmp_path / "train.conll"), str(tmp_path / "train.conll"), out,
                 {"data": {"max_length": 24, "long_text": "chunks", "doc_stride": 6},
                  "train": {"max_steps": 2, "batch_size": 4, "baseline": False}}, progress=False)
    docs = tmp_path / "docs"
    (docs / "2024").mkdir(parents=True)
    (docs / "a.txt").write_text(" ".join(rng.choice(WORDS, 80)) + "\n", encoding="utf-8")
    (docs / "2024" / "b.txt").write_text("goal match\nbank", encoding="utf-8")
    assert main(["predict", "--model", out, "--input", str(docs), "--output", str(tmp_path / "p.jsonl")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [row["file"] for row in rows] == ["2024/b.txt", "a.txt"]
    assert [len(row["tags"]) for row in rows] == [3, 80] and rows[0]["words"] == ["goal", "match", "bank"]
    assert all(e["text"] == (docs / row["file"]).read_text(encoding="utf-8")[e["start"]:e["end"]]
               for row in rows for e in row["entities"])
    inputs = read_prediction_input("token-classification", str(docs), DataConfig())
    assert [example.file for example in inputs.examples] == ["2024/b.txt", "a.txt"]


def test_chunks_are_refused_for_qa_at_predict_too(tiny):
    with pytest.raises(ConfigError, match='long_text="chunks" is for .*token-classification, not qa'):
        inference_spec(tiny, "qa", ["data.long_text=chunks"])
