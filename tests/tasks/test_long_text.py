"""data.long_text (bertkit/tasks/long_text.py): head_tail keeps both ends of a long text, chunks
cover it with overlapping windows and still give one prediction per input row, in training and
in prediction."""

from __future__ import annotations

import warnings

import pytest

from bertkit.errors import ConfigError
from bertkit.recipes.finetune import finetune
from bertkit.tasks import DataConfig, TaskSpec, load_model, prediction_rows, read_prediction_input, read_spec
from bertkit.tasks.formats import TextExample
from bertkit.tasks.long_text import chunk_windows, head_tail
from bertkit.tasks.sequence import class_ids, encode_texts
from bertkit.tokenizer import Tokenizer

from .helpers import TOPIC_WORDS, topic_files


def test_head_tail_keeps_the_first_and_last_tokens():
    ids = [101, *range(1000, 1100), 102]  # [CLS] 100 tokens [SEP]
    kept = head_tail(ids, 42)  # 40 tokens of text: 10 from the head, 30 from the tail
    assert kept == [101, *range(1000, 1010), *range(1070, 1100), 102]
    assert head_tail(ids[:20], 42) == ids[:20]  # a short text stays whole


def test_chunks_cover_the_text_with_windows_sharing_the_stride():
    body = list(range(1000, 1100))
    windows = chunk_windows([101, *body, 102], 22, 5)  # 20 tokens a window, each 15 after the last
    assert all(w[0] == 101 and w[-1] == 102 and len(w) <= 22 for w in windows)
    inner = [w[1:-1] for w in windows]
    assert [w[0] for w in inner] == list(range(1000, 1100 - 5, 15))
    assert inner[-1][-1] == 1099 and sorted(set(t for w in inner for t in w)) == body
    assert all(a[-5:] == b[:5] for a, b in zip(inner, inner[1:]))
    assert chunk_windows([101, 5, 6, 102], 22, 5) == [[101, 5, 6, 102]]


def test_bad_settings_are_refused_in_one_line():
    with pytest.raises(ConfigError, match="data.long_text must be one of truncate, head_tail, chunks"):
        DataConfig(long_text="middle")
    with pytest.raises(ConfigError, match="doc_stride"):
        DataConfig(long_text="chunks", max_length=16, doc_stride=32)


@pytest.fixture(scope="module")
def long_files(tmp_path_factory):
    """Long two-class texts: the label is decided by words at the very end of each text."""
    root = tmp_path_factory.mktemp("long")
    return root, topic_files(root, 40, 60, ("goal match", "bank market"), train=32)


def test_features_of_each_mode(long_files):
    _, tiny = long_files
    tokenizer = Tokenizer.from_pretrained(tiny)
    examples = [TextExample(" ".join(TOPIC_WORDS * 6) + " goal", label="sport"),
                TextExample("film", label="business")]
    chunked = encode_texts(tokenizer, examples, 24, class_ids, {"sport": 0, "business": 1},
                           long_text="chunks", stride=4)
    assert [f["example"] for f in chunked] == [0, 0, 0, 0, 1]
    assert all(len(f["input_ids"]) <= 24 for f in chunked) and [int(f["labels"]) for f in chunked] == [0] * 4 + [1]
    ends = encode_texts(tokenizer, examples, 24, long_text="head_tail")
    whole = tokenizer.encode(examples[0].text)
    assert list(ends[0]["input_ids"][:6]) == whole[:6] and list(ends[0]["input_ids"][-6:]) == whole[-6:]
    # a text pair keeps the truncation it always had
    pair = encode_texts(tokenizer, [TextExample("a b", "c d")], 24, long_text="chunks", stride=4)
    assert "example" not in pair[0] and 0 < pair[0]["token_type_ids"].sum()


def test_chunks_train_and_predict_one_row_per_input(long_files):
    root, tiny = long_files
    out = str(root / "chunks")
    sections = {"data": {"max_length": 24, "long_text": "chunks", "doc_stride": 4},
                "train": {"max_steps": 3, "batch_size": 8, "lr": 1e-3, "baseline": False}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = finetune("classification", tiny, str(root / "train.jsonl"), str(root / "dev.jsonl"), out,
                           sections, progress=False)
    assert summary["train_examples"] == 32 and summary["train_features"] > 32  # windows of each text
    spec = read_spec(out)
    assert spec.data.long_text == "chunks"
    model, tokenizer = load_model(out, spec.task), Tokenizer.from_pretrained(out)
    inputs = read_prediction_input(spec.task, str(root / "dev.jsonl"), spec.data)
    rows = prediction_rows(model, tokenizer, spec, inputs)
    assert len(rows) == 8 and [r["index"] for r in rows] == list(range(8))
    # the prediction is the mean of the windows' logits: a text of one window keeps its own
    short = TaskSpec(spec.task, DataConfig(max_length=24, long_text="chunks", doc_stride=4))
    single = prediction_rows(model, tokenizer, short, type(inputs)([TextExample("goal match")]))
    truncated = prediction_rows(model, tokenizer, TaskSpec(spec.task, DataConfig(max_length=24)),
                                type(inputs)([TextExample("goal match")]))
    assert single[0]["probabilities"] == truncated[0]["probabilities"]


def test_long_text_is_refused_for_tasks_with_their_own_windows(tmp_path, long_files):
    _, tiny = long_files
    (tmp_path / "t.conll").write_text("goal B-X\nmatch O\n\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="data.long_text=\"head_tail\" is for classification"):
        finetune("token-classification", tiny, str(tmp_path / "t.conll"), str(tmp_path / "t.conll"),
                 str(tmp_path / "out"), {"data": {"long_text": "head_tail"}}, progress=False)
