"""Bad input, as a careful user tries it (issue 17): every case through `bertkit.commands.cli.main`
must exit 2 with exactly one stderr line naming the problem, and leave no file behind.
Cases that must be *accepted* (a UTF-8 byte-order mark, a CSV field over csv's default
131,072-character limit) are checked for the right result instead."""

from __future__ import annotations

import json
import os
import warnings

import pytest
import torch

from bertkit.commands.cli import main
from bertkit.models.config import BertConfig
from bertkit.models.heads import (BertForMultipleChoice, BertForQuestionAnswering, BertForSequenceClassification,
                                  BertForTokenClassification)
from bertkit.tokenizer import Tokenizer

from tests.cli_checks import assert_refused

WORDS = ["the striker scored a late goal", "the bank cut interest rates", "a new film opened today",
         "who scored the goal", "rates fell again", "caf au lait"]
LATIN1 = "caf\xe9 au lait".encode("latin-1")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Tiny random classification, tagging, QA and multiple-choice models sharing one 300-piece vocabulary."""
    root = tmp_path_factory.mktemp("models")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    tokenizer = Tokenizer.train_wordpiece([str(corpus)], vocab_size=300, min_frequency=1, show_progress=False)
    labels = {0: "sport", 1: "business"}
    tags = {0: "O", 1: "B-X"}
    out = {}
    for name, cls, id2label in (("clf", BertForSequenceClassification, labels),
                                ("tag", BertForTokenClassification, tags),
                                ("qa", BertForQuestionAnswering, None), ("mc", BertForMultipleChoice, None)):
        config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
                            num_attention_heads=2, intermediate_size=64, max_position_embeddings=128,
                            **({"id2label": id2label, "label2id": {v: k for k, v in id2label.items()}}
                               if id2label else {}))
        directory = root / name
        cls(config).save_pretrained(directory, tokenizer=tokenizer)
        out[name] = str(directory)
    return out


def run(argv, capsys, warnings_are_errors=True):
    with warnings.catch_warnings():
        # on a refusal a warning would be a second stderr line
        warnings.simplefilter("error" if warnings_are_errors else "ignore")
        code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---------------------------------------------------------------------------- data files
# (model, command, input name, content, fragments of the one error line)
DATA_CASES = {
    "latin1-txt-predict": ("clf", "predict", "in.txt", b"fine\n" + LATIN1 + b"\n", ["line 2", "not UTF-8", "iconv"]),
    "latin1-csv-predict": ("clf", "predict", "in.csv", b"text\nok\n" + LATIN1 + b"\n", ["in.csv: line 3", "not UTF-8"]),
    "latin1-csv-evaluate": ("clf", "evaluate", "in.csv", b"text,label\n" + LATIN1 + b",sport\n",
                            ["in.csv: line 2", "not UTF-8"]),
    "latin1-jsonl-predict": ("clf", "predict", "in.jsonl", b'{"text": "' + LATIN1 + b'"}\n',
                             ["in.jsonl: line 1", "not UTF-8"]),
    "latin1-conll-predict": ("tag", "predict", "in.conll", b"Paris O\n" + LATIN1 + b" O\n",
                             ["in.conll: line 2", "not UTF-8"]),
    "latin1-conll-evaluate": ("tag", "evaluate", "in.conll", b"Paris O\n\n" + LATIN1.replace(b" ", b"_") + b" O\n",
                              ["in.conll: line 3", "not UTF-8"]),
    "latin1-squad-predict": ("qa", "predict", "in.json",
                             b'{"data": [{"paragraphs": [\n{"context": "' + LATIN1 + b'", "qas": []}]}]}',
                             ["in.json: line 2", "not UTF-8"]),
    "latin1-csv-finetune": ("clf", "finetune", "in.csv", b"text,label\nok,sport\n" + LATIN1 + b",business\n",
                            ["in.csv: line 3", "not UTF-8"]),
    "duplicate-jsonl-key-finetune": ("clf", "finetune", "in.jsonl", b'{"text": "a", "label": "x", "label": "y"}\n',
                                     ["in.jsonl: line 1", "'label' twice"]),
    "latin1-embed": ("clf", "embed", "in.txt", b"ok\n\n" + LATIN1 + b"\n", ["line 3", "not UTF-8"]),
    "duplicate-csv-column": ("clf", "predict", "in.csv", b"text,id,text\na,1,b\n", ["in.csv: line 1", "'text' twice"]),
    "duplicate-csv-column-evaluate": ("clf", "evaluate", "in.csv", b"text,label,label\na,sport,business\n",
                                      ["'label' twice"]),
    "duplicate-jsonl-key": ("clf", "predict", "in.jsonl", b'{"text": "a"}\n{"text": "a", "text": "b"}\n',
                            ["in.jsonl: line 2", "'text' twice"]),
    "duplicate-squad-key": ("qa", "predict", "in.json", b'{"data": [], "data": []}', ["'data' twice"]),
    # two questions under one id: the scores (keyed by id) counted one of them, silently
    "duplicate-squad-id": ("qa", "evaluate", "in.json",
                           b'{"data": [{"paragraphs": [{"context": "the striker scored", "qas": ['
                           b'{"id": "a", "question": "who", "answers": [{"text": "the striker", "answer_start": 0}]},'
                           b'{"id": "a", "question": "what", "answers": [{"text": "scored", "answer_start": 12}]}]}]}]}',
                           ["in.json: data[0].paragraphs[0].qas[1] has the id 'a' of data[0].paragraphs[0].qas[0]"]),
    # UTF-16 (Windows "Unicode"): with its byte-order mark the advice was cp1252; without it, NULs read as text
    "utf16-bom-predict": ("clf", "predict", "in.txt", "the goal\n".encode("utf-16"), ["in.txt is UTF-16",
                                                                                   "iconv -f utf-16 -t utf-8"]),
    "utf16-no-bom-embed": ("clf", "embed", "in.txt", "the goal\n".encode("utf-16-le"),
                           ["in.txt: line 1 holds NUL bytes", "UTF-16", "iconv -f utf-16le"]),
    # old Mac line ends (CR alone): the whole file was one input
    "cr-only-predict": ("clf", "predict", "in.txt", b"the goal\rrates fell\r", ["line 1 holds a carriage return",
                                                                               "tr '\\r' '\\n'"]),
    "cr-inside-csv": ("clf", "predict", "in.csv", b"text,label\na\rb,x\n", ["in.csv: line 2 holds a carriage return",
                                                                        "tr -d"]),
    # an input with nothing to predict, in every format (a .txt was refused already)
    # one message for every command (reliability.md quotes it)
    "header-only-csv-predict": ("clf", "predict", "in.csv", b"text,label\n",
                                ["in.csv holds no non-blank input (a header only); put one input per line or row"]),
    "blank-jsonl-predict": ("clf", "predict", "in.jsonl", b"\n\n", ["in.jsonl holds no non-blank input (2 blank)"]),
    "blank-txt-predict": ("clf", "predict", "in.txt", b"\n \n", ["in.txt holds no non-blank input (2 blank)"]),
    "header-only-csv-embed": ("clf", "embed", "in.csv", b"text\n", ["in.csv holds no non-blank input (a header only)"]),
    "header-only-csv-nearest": ("clf", "nearest", "in.csv", b"text\n",
                                ["in.csv holds no non-blank input (a header only)"]),
    # a JSON array (a common export) or pretty-printed JSON is not JSON lines: say how to convert it
    "json-array-finetune": ("clf", "finetune", "in.json", b'[{"text": "a", "label": "x"}]',
                            ["in.json is one JSON array", "jq -c '.[]'"]),
    "json-array-predict": ("clf", "predict", "in.json", b'[{"text": "a"}]', ["in.json is one JSON array"]),
    "json-array-in-jsonl": ("clf", "predict", "in.jsonl", b'[{"text": "a"},\n{"text": "b"}]\n',
                            ["in.jsonl: line 1 opens a JSON array", "jq -c '.[]'"]),
    "pretty-printed-jsonl": ("clf", "finetune", "in.jsonl", b'{\n  "text": "a", "label": "x"\n}\n',
                             ["in.jsonl: line 1 is '{' alone", "jq -c ."]),
    # a TSV written by a CSV writer: the quoted field holding a tab cannot be read without quoting
    "quoted-tab-tsv": ("clf", "finetune", "in.tsv", b'text\tlabel\n"a\tb"\tsport\n',
                       ["line 2 has 3 fields", "without quoting", "save the file as .csv"]),
    # a classification table given to a tagger
    "csv-to-a-tagger": ("tag", "evaluate", "in.csv", b"text,label\nthe goal,sport\n",
                        ["in.csv is a .csv table, but token classification reads CoNLL"]),
}


def _data_argv(models, tmp_path, model, command, path):
    if command == "embed":
        return ["embed", "--model", models[model], "--input", path, "--output", tmp_path / "out.npy"]
    if command == "finetune":  # the file is both splits: refused before any output exists
        return ["finetune", "--task", "classification", "--model", models[model], "--train", path, "--dev", path,
                "--out", tmp_path / "out"]
    if command == "evaluate":
        return ["evaluate", "--model", models[model], "--data", path]
    if command == "nearest":
        return ["nearest", "--model", models[model], "--corpus", path, "a query"]
    return ["predict", "--model", models[model], "--input", path, "--output", tmp_path / "out.jsonl"]


@pytest.mark.parametrize("case", DATA_CASES)
def test_bad_data_file_is_one_line(case, models, tmp_path, capsys):
    model, command, name, content, fragments = DATA_CASES[case]
    path = tmp_path / name
    path.write_bytes(content)
    assert_refused(_data_argv(models, tmp_path, model, command, path), capsys, tmp_path, *fragments)


@pytest.mark.parametrize("command", ["predict", "evaluate", "embed"])
@pytest.mark.parametrize("kind", ["fifo", "symlink-to-fifo", "device", "directory"])
def test_non_regular_files_are_refused_before_reading(command, kind, models, tmp_path, capsys):
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)  # reading it would block forever: the test hanging is the failure
    path = {"fifo": fifo, "device": "/dev/zero", "directory": tmp_path / "dir.csv"}.get(kind)
    if kind == "symlink-to-fifo":
        path = tmp_path / "link.csv"
        path.symlink_to(fifo)
    if kind == "directory":
        path.mkdir()
    fragment = "is a directory" if kind == "directory" else "not a regular file"
    assert_refused(_data_argv(models, tmp_path, "clf", command, path), capsys, tmp_path, str(path), fragment)


def test_a_line_without_end_is_refused_not_read_without_bound(models, tmp_path, capsys):
    from bertkit.io import MAX_LINE_BYTES

    path = tmp_path / "huge.txt"
    with open(path, "wb") as f:
        f.truncate(MAX_LINE_BYTES + 10)  # a sparse file: NUL bytes and no newline
    assert_refused(_data_argv(models, tmp_path, "clf", "embed", path), capsys, tmp_path,
                   "line 1 is longer than 16,777,216 bytes")


def test_csv_field_over_the_raised_limit_is_reported(models, tmp_path, capsys):
    path = tmp_path / "in.csv"
    with open(path, "wb") as f:  # one quoted field of 17 MB over 17,000 lines: each line is short
        f.write(b'text\n"' + (b"a" * 1000 + b"\n") * 17_000 + b'"\n')
    assert_refused(_data_argv(models, tmp_path, "clf", "predict", path), capsys, tmp_path,
                   "in.csv: line", "not valid CSV (field larger than field limit")


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".txt"])
def test_utf8_byte_order_mark_is_dropped(suffix, models, tmp_path, capsys):
    path = tmp_path / f"in{suffix}"
    body = {".csv": "text\ngoal\nrates\n", ".jsonl": '{"text": "goal"}\n{"text": "rates"}\n',
            ".txt": "goal\nrates\n"}[suffix]
    path.write_bytes(b"\xef\xbb\xbf" + body.encode("utf-8"))
    out = tmp_path / "out.jsonl"
    code, _, err = run(["predict", "--model", models["clf"], "--input", path, "--output", out], capsys)
    assert code == 0, err
    assert len(out.read_text(encoding="utf-8").splitlines()) == 2


def test_csv_field_over_the_csv_module_default_is_read(models, tmp_path, capsys):
    long_text = "goal " * 40_000  # 200,000 characters > csv's 131,072
    path = tmp_path / "in.csv"
    path.write_text(f'text\n"{long_text}"\nrates\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    code, _, err = run(["predict", "--model", models["clf"], "--input", path, "--output", out], capsys,
                       warnings_are_errors=False)  # (the long text is cut to max_length, with a note)
    assert code == 0, err
    assert len(out.read_text(encoding="utf-8").splitlines()) == 2


def test_corpus_file_named_alone_is_refused_in_a_directory_skipped(tmp_path):
    from bertkit.data.corpus import open_corpus
    from bertkit.errors import DataError

    (tmp_path / "good.txt").write_text("Good text here.\n\nMore text.\n", encoding="utf-8")
    bad = tmp_path / "late.txt"
    bad.write_bytes(b"fine line\n" * 2000 + b"\n" + LATIN1 + b"\n")  # the bad byte is past 8 KiB
    with pytest.raises(DataError, match=r"late\.txt: line 2002 is not UTF-8"):
        list(open_corpus(bad, mode="blank"))
    with pytest.warns(UserWarning, match=r"late\.txt: line 2002"):
        docs = list(open_corpus(tmp_path, mode="blank"))
    assert docs == [["Good text here."], ["More text."]]  # nothing of the bad file, not even its start


# ---------------------------------------------------------------------------- one row per input
def _rows(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("model,name,content,lines,blank", [
    ("clf", "in.txt", "the goal\n\n   \nrates fell\n\t\n", [1, 2, 3, 4, 5], [1, 2, 4]),
    ("clf", "in.csv", 'text\nthe goal\n""\n"  "\nrates fell\n', [2, 3, 4, 5], [1, 2]),
    # an empty line is an input too (csv skips it); a quoted text over two lines is where it starts
    ("clf", "in.csv", 'text,label\nthe goal,x\n\n"rates\nfell",y\n   \nend,z\n', [2, 3, 4, 6, 7], [1, 3]),
    ("tag", "in.csv", 'text\nParis is nice\n\nRome too\n', [2, 3, 4], [1]),
    ("clf", "in.jsonl", '{"text": "goal"}\n\n{"text": " "}\n{"text": "rates"}\n', [1, 2, 3, 4], [1, 2]),
    ("tag", "in.txt", "Paris is nice\n\nRome too\n", [1, 2, 3], [1]),
    ("tag", "in.jsonl", '{"text": "Paris is nice"}\n\n{"text": "Rome too"}\n', [1, 2, 3], [1]),
    ("tag", "in.conll", "Paris O\nis O\n\n\nRome O\n", [1, 5], []),
    ("qa", "in.jsonl", '{"question": "who scored", "context": "the striker scored"}\n\n'
                       '{"question": " ", "context": "x"}\n', [1, 2, 3], [1, 2]),
    ("mc", "in.jsonl", '{"context": "the goal", "choices": ["a", "b"]}\n\n{"context": " ", "choices": ["a", "b"]}\n'
                       '{"context": "rates", "choices": ["c", "d"]}\n', [1, 2, 3, 4], [1, 2]),
])
def test_predict_gives_one_row_per_input_in_order(model, name, content, lines, blank, models, tmp_path, capsys):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    out = tmp_path / "out.jsonl"
    code, stdout, err = run(["predict", "--model", models[model], "--input", path, "--output", out], capsys)
    assert code == 0, err
    rows = _rows(out)
    assert [row["index"] for row in rows] == list(range(len(lines)))
    assert [row["line"] for row in rows] == lines
    nulls = [i for i, row in enumerate(rows)
             if row.get("label", 0) is None or row.get("answer", 0) is None or row.get("words") == []
             or row.get("choice", 0) is None]
    assert nulls == blank
    assert all(set(row) == set(rows[0]) for row in rows)  # blank rows: the task's keys, no prediction


def test_predict_keeps_squad_questions_whose_gold_answer_is_absent(models, tmp_path, capsys):
    squad = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": "the striker scored a goal", "qas": [
        {"id": "a", "question": "who scored", "answers": [{"text": "the striker", "answer_start": 0}]},
        {"id": "b", "question": "what rates", "answers": [{"text": "not in the context", "answer_start": 3}]},
        {"id": "c", "question": "what fell", "answers": [], "is_impossible": True}]}]}]}
    path = tmp_path / "in.json"
    path.write_text(json.dumps(squad), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    code, _, err = run(["predict", "--model", models["qa"], "--input", path, "--output", out], capsys,
                       warnings_are_errors=False)  # (a note that one gold answer is not in its context)
    assert code == 0, err
    assert [row["id"] for row in _rows(out)] == ["a", "b", "c"]


def test_embed_gives_one_row_per_line(models, tmp_path, capsys):
    import numpy as np

    path = tmp_path / "in.txt"
    path.write_text("the goal\n\n  \nrates fell\n", encoding="utf-8")
    out = tmp_path / "out.npy"
    with pytest.warns(UserWarning, match=r"2 blank line\(s\) got all-zero rows"):
        assert main(["embed", "--model", models["clf"], "--input", str(path), "--output", str(out)]) == 0
    vectors = np.load(out)
    assert vectors.shape == (4, 32)
    assert not vectors[[1, 2]].any()
    assert np.allclose(np.linalg.norm(vectors[[0, 3]], axis=1), 1.0, atol=1e-5)


# ---------------------------------------------------------------------------- model directories
def _model_copy(models, tmp_path, name="clf"):
    """A copy of a tiny model directory to break in one way."""
    import shutil

    target = tmp_path / "model"
    shutil.copytree(models[name], target)
    return target


CONFIG_CASES = {  # config.json field -> (raw JSON value, fragments of the error)
    "string-vocab": ("vocab_size", '"abc"', ["vocab_size must be an integer", "'abc'"]),
    "float-layers": ("num_hidden_layers", "2.5", ["num_hidden_layers must be an integer", "2.5"]),
    "bool-hidden": ("hidden_size", "true", ["hidden_size must be an integer", "True"]),
    "nan-init": ("initializer_range", "NaN", ["initializer_range must be a finite number", "nan"]),
    "string-dropout": ("hidden_dropout_prob", '"0.1"', ["hidden_dropout_prob must be a finite number"]),
    "negative-eps": ("layer_norm_eps", "-1", ["layer_norm_eps must be > 0", "-1"]),
    "zero-eps": ("layer_norm_eps", "0", ["layer_norm_eps must be > 0"]),
    "negative-init": ("initializer_range", "-0.02", ["initializer_range", ">= 0"]),
    "huge-vocab": ("vocab_size", "1000000000000", ["1,000,000,", "GiB of float32 weights", "vocab_size (1,000,000,000,000)"]),
    "million-layers": ("num_hidden_layers", "1000000", ["GiB of float32 weights", "mostly layers",
                                                        "num_hidden_layers (1,000,000)"]),
    "list-act": ("hidden_act", '["gelu"]', ["hidden_act must be a string"]),
    "bad-problem-type": ("problem_type", '"ranking"', ["problem_type 'ranking' is not known"]),
}


@pytest.mark.parametrize("command", ["info", "embed"])
@pytest.mark.parametrize("case", CONFIG_CASES)
def test_bad_config_json_is_refused_before_any_allocation(case, command, models, tmp_path, capsys):
    field, raw, fragments = CONFIG_CASES[case]
    model = _model_copy(models, tmp_path)
    text = (model / "config.json").read_text(encoding="utf-8")
    data = json.loads(text)
    data[field] = "@@"
    (model / "config.json").write_text(json.dumps(data).replace('"@@"', raw), encoding="utf-8")
    (tmp_path / "in.txt").write_text("goal\n", encoding="utf-8")
    argv = (["info", model] if command == "info" else
            ["embed", "--model", model, "--input", tmp_path / "in.txt", "--output", tmp_path / "out.npy"])
    assert_refused(argv, capsys, tmp_path, *fragments)


def test_config_json_with_a_key_twice_is_refused(models, tmp_path, capsys):
    model = _model_copy(models, tmp_path)
    text = (model / "config.json").read_text(encoding="utf-8")
    (model / "config.json").write_text(text.replace("{", '{"hidden_size": 64, ', 1), encoding="utf-8")
    assert_refused(["info", model], capsys, tmp_path, "config.json", "'hidden_size' twice")


def _shard_index(model, shard_name):
    (model / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": {"bert.embeddings.word_embeddings.weight": shard_name}}),
        encoding="utf-8")


@pytest.mark.parametrize("kind", ["parent", "absolute", "symlink-out", "fifo", "symlink-fifo", "not-a-map"])
def test_shard_index_cannot_reach_outside_or_hang(kind, models, tmp_path, capsys):
    model = _model_copy(models, tmp_path)
    outside = tmp_path / "outside.safetensors"
    os.replace(model / "model.safetensors", outside)  # real weights, but outside the model dir
    fragment = "outside the model directory"
    if kind == "parent":
        _shard_index(model, "../outside.safetensors")
    elif kind == "absolute":
        _shard_index(model, str(outside))
    elif kind == "symlink-out":
        (model / "shard.safetensors").symlink_to(outside)
        _shard_index(model, "shard.safetensors")
    elif kind == "fifo":
        os.mkfifo(model / "shard.safetensors")
        _shard_index(model, "shard.safetensors")
        fragment = "not a regular file"
    elif kind == "symlink-fifo":
        os.mkfifo(tmp_path / "pipe")
        (model / "model.safetensors").symlink_to(tmp_path / "pipe")
        fragment = "not a regular file"
    else:
        (model / "model.safetensors.index.json").write_text('{"weight_map": ["x"]}', encoding="utf-8")
        fragment = "needs a \"weight_map\""
    (tmp_path / "in.txt").write_text("goal\n", encoding="utf-8")
    for argv in (["info", model], ["embed", "--model", model, "--input", tmp_path / "in.txt",
                                   "--output", tmp_path / "o.npy"]):
        assert_refused(argv, capsys, tmp_path, fragment)


def test_config_json_behind_a_fifo_is_refused(models, tmp_path, capsys):
    model = _model_copy(models, tmp_path)
    (model / "config.json").unlink()
    os.mkfifo(model / "config.json")
    assert_refused(["info", model], capsys, tmp_path, "config.json is not a regular file")


@pytest.mark.parametrize("options,fragment", [
    (dict(batch_size=2.5), "batch_size must be a positive integer, got 2.5"),
    (dict(batch_size=0), "batch_size must be a positive integer, got 0"),
    (dict(max_length=1), "max_length must be an integer of at least 3"),
    (dict(max_length=64.0), "max_length must be an integer"),
])
def test_encode_refuses_bad_batch_size_and_max_length(options, fragment, models):
    from bertkit.inference.encode import SentenceEncoder
    from bertkit.errors import DataError

    encoder = SentenceEncoder.from_pretrained(models["clf"])
    with pytest.raises(DataError, match=fragment.replace("(", r"\(")):
        encoder.encode(["the goal"], **options)


def test_encode_max_length_is_honoured_and_capped_at_the_models_positions(models):
    from bertkit.inference.encode import SentenceEncoder

    encoder = SentenceEncoder.from_pretrained(models["clf"])
    text = ["the striker scored a late goal " * 40]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # truncation notes
        short, again = encoder.encode(text, max_length=3), encoder.encode(["the"], max_length=3)
        capped = encoder.encode(text, max_length=10_000)
        full = encoder.encode(text, max_length=128)
    assert abs(short - again).max() < 1e-5  # [CLS] the [SEP]: the limit was applied
    assert abs(capped - full).max() < 1e-6


def test_a_command_line_or_stdin_that_is_not_utf8_is_one_line(models, tmp_path, capsys, monkeypatch):
    """A Latin-1 terminal: Python decodes argv with stand-ins for the bytes, which reached the
    tokenizer (a TypeError traceback)."""
    import io
    import sys

    text = "caf\xe9".encode("latin-1").decode("utf-8", "surrogateescape")
    assert_refused(["tokenize", "--model", models["clf"], text], capsys, tmp_path, "the argument b'caf\\xe9' is not UTF-8",
                   "byte 0xe9 at character 4")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(LATIN1)))
    assert_refused(["tokenize", "--model", models["clf"]], capsys, tmp_path, "stdin is not UTF-8 (byte 0xe9 at byte 4)")


@pytest.mark.parametrize("length", ["1", "2"])
def test_tokenize_refuses_a_max_length_that_cannot_cut(length, models, tmp_path, capsys):
    """[CLS] and [SEP] take two places: below 3 nothing was cut, silently."""
    assert_refused(["tokenize", "--model", models["clf"], "--max-length", length, "the goal"], capsys, tmp_path,
                   f"--max-length must be at least 3 (the 2 special tokens and one of the text), got {length}")


def test_predict_warns_about_texts_that_are_all_unknown_tokens(models, tmp_path, capsys):
    """Emoji-only posts read as [CLS] [UNK] [SEP] each: one prediction for all, unsaid (embed and
    nearest warned)."""
    path = tmp_path / "in.txt"
    path.write_text("\U0001f389\U0001f389\nthe goal\n\U0001f60d\n", encoding="utf-8")
    with pytest.warns(UserWarning, match=r"2 of the 3 texts of .*in.txt are nothing but \[UNK\] tokens .*they get "
                                         r"one prediction"):
        assert main(["predict", "--model", models["clf"], "--input", str(path),
                     "--output", str(tmp_path / "o.jsonl")]) == 0
    assert len(_rows(tmp_path / "o.jsonl")) == 3


@pytest.mark.slow
def test_a_multiple_choice_model_predicts_in_int8(models, tmp_path, capsys):
    """int8 calibration fed (batch, length) ids to a head that reads (batch, choices, length)."""
    path = tmp_path / "in.jsonl"
    path.write_text('{"context": "the goal", "choices": ["a", "b"]}\n{"context": "rates", "choices": ["c", "d"]}\n',
                    encoding="utf-8")
    rows = {}
    for name, extra in (("fp32", []), ("int8", ["--int8"])):
        out = tmp_path / f"{name}.jsonl"
        code, _, err = run(["predict", "--model", models["mc"], "--input", path, "--output", out, *extra], capsys,
                           warnings_are_errors=False)  # (torch deprecation notes from the int8 kernels)
        assert code == 0, err
        rows[name] = _rows(out)
    # A random tiny model scores the two choices near 0.5 each, where int8's rounding may flip the argmax:
    # compare the probabilities, and the choice only where fp32's margin is wider than that rounding.
    for fp32, int8 in zip(rows["fp32"], rows["int8"]):
        assert int8["probabilities"] == pytest.approx(fp32["probabilities"], abs=0.01)
        if abs(fp32["probabilities"][0] - fp32["probabilities"][1]) > 0.02:
            assert int8["choice"] == fp32["choice"]


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_a_max_length_past_the_models_positions_is_refused_first(command, models, tmp_path, capsys):
    """finetune refused it up front; predict failed at the first long text, with advice for Python."""
    path = tmp_path / "in.csv"
    path.write_text("text,label\nthe goal,sport\n", encoding="utf-8")
    argv = (["predict", "--model", models["clf"], "--input", path, "--output", tmp_path / "o.jsonl"]
            if command == "predict" else ["evaluate", "--model", models["clf"], "--data", path])
    assert_refused([*argv, "--set", "data.max_length=100000"], capsys, tmp_path,
                   "data.max_length=100000 exceeds the model's 128 positions; use data.max_length=128 or less")


def test_a_tab_separated_file_named_csv_is_read_as_tsv(models, tmp_path, capsys):
    """Its header read as one column "text<TAB>label", then "no column 'text'"."""
    path = tmp_path / "in.csv"
    path.write_text("text\tlabel\nthe goal, late\tsport\nrates fell\tbusiness\n", encoding="utf-8")
    code, stdout, err = run(["evaluate", "--model", models["clf"], "--data", path], capsys,
                            warnings_are_errors=False)
    assert code == 0, err
    assert "2 examples" in stdout


def test_corpus_embeddings_that_lie_about_their_size_or_are_a_fifo_are_one_line(models, tmp_path, capsys):
    """A .npy header claiming 10^12 rows: numpy allocated for them (MemoryError traceback); a FIFO hung."""
    import io

    import numpy as np
    from numpy.lib import format as npy

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the goal\nrates fell\n", encoding="utf-8")
    header = io.BytesIO()
    npy.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (10 ** 12, 32)})
    lying = tmp_path / "lie.npy"
    lying.write_bytes(header.getvalue() + np.zeros(64, np.float32).tobytes())
    fifo = tmp_path / "fifo.npy"
    os.mkfifo(fifo)
    argv = ["nearest", "--model", models["clf"], "--corpus", corpus, "the goal", "--corpus-embeddings"]
    assert_refused([*argv, lying], capsys, tmp_path, "--corpus-embeddings", "not a .npy array that bertkit embed "
                   "writes")
    assert_refused([*argv, fifo], capsys, tmp_path, "is not a regular file")


def test_predict_and_evaluate_read_their_input_before_loading_the_model(models, tmp_path, capsys, monkeypatch):
    """The model (and its int8 copy) was loaded first: a bad file waited for it."""
    from bertkit.commands import evaluate, predict

    def loaded(*args, **kwargs):
        raise AssertionError("the model loaded before the input was read")
    monkeypatch.setattr(predict, "load_inference_model", loaded)
    monkeypatch.setattr(evaluate, "load_inference_model", loaded)
    path = tmp_path / "in.csv"
    path.write_bytes(b"text,label\n" + LATIN1 + b",sport\n")
    assert_refused(["predict", "--model", models["clf"], "--input", path, "--output", tmp_path / "o.jsonl", "--int8"],
                   capsys, tmp_path, "not UTF-8")
    assert_refused(["evaluate", "--model", models["clf"], "--data", path], capsys, tmp_path, "not UTF-8")



@pytest.mark.parametrize("how", ["task-module-file", "task-module-name", "objective-module-file"])
def test_a_user_module_with_a_syntax_error_is_one_line_naming_its_file_and_line(how, models, tmp_path, capsys,
                                                                                 monkeypatch):
    """A --task-module or data.objective_module that does not parse printed Python's whole traceback; it is
    one line: the option, then file:line: SyntaxError and Python's message."""
    path = tmp_path / "broken_user_module.py"
    path.write_text("from bertkit.tasks import register_task\n\n\ndef broken(:\n    pass\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    option, argv = {
        "task-module-file": ("--task-module", ["finetune", "--task-module", path]),
        "task-module-name": ("--task-module", ["finetune", "--task-module", "broken_user_module"]),
        "objective-module-file": ("data.objective_module", [
            "pretrain", "--config", os.path.join(os.path.dirname(__file__), "..", "configs", "pretrain-tiny-bert.toml"),
            "--no-progress", "--set", f"data.objective_module={path}"]),
    }[how]
    if argv[0] == "finetune":
        argv += ["--task", "classification", "--model", models["clf"], "--train", tmp_path / "train.csv"]
    assert_refused([*argv, "--out", tmp_path / "out"], capsys, tmp_path, option,
                   f"{path}:4: SyntaxError: invalid syntax")


@pytest.mark.skipif(torch.cuda.is_available(), reason="fp16 runs on a CUDA GPU")
@pytest.mark.parametrize("command", ["pretrain", "finetune"])
def test_fp16_without_a_gpu_is_refused_before_any_data_is_read(command, models, tmp_path, capsys):
    """train.precision=fp16 on a machine without a GPU failed only when the Trainer started: after
    pretrain had trained its tokenizer and written the shards (reliability.md, "Still open")."""
    (tmp_path / "train.csv").write_text("text,label\nthe match,sport\nthe bank,business\n", encoding="utf-8")
    argv = {"pretrain": ["pretrain", "--config", os.path.join(os.path.dirname(__file__), "..", "configs",
                                                               "pretrain-tiny.toml"), "--no-progress"],
            "finetune": ["finetune", "--task", "classification", "--model", models["clf"], "--train",
                         tmp_path / "train.csv", "--no-progress"]}[command]
    assert_refused([*argv, "--out", tmp_path / "out", "--set", "train.precision=fp16"], capsys, tmp_path,
                   "precision fp16 needs a CUDA GPU")
