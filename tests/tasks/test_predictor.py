"""bertkit.Predictor: a fine-tuned run predicts from Python with the rows `bertkit predict` writes,
the same reader's checks and one row per input."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

import bertkit
from bertkit.commands.cli import main
from bertkit.errors import ConfigError, DataError

from .helpers import make_tiny_model

TEXTS = ["the match ended 2 nil", "", "shares fell 3 percent\nthe bank cut rates"]


def finetune(argv) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["finetune", *argv, "--no-progress", "--set", "train.max_steps=4",
                     "train.batch_size=8", "data.max_length=16"]) == 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A classifier and a tagger fine-tuned for 4 steps from a tiny random BERT."""
    root = tmp_path_factory.mktemp("predictor")
    rows = [(f"the match ended {i} nil", "sport") for i in range(8)] + [(f"shares fell {i} percent", "business")
                                                                        for i in range(8)]
    model = make_tiny_model(root / "tiny", [text for text, _ in rows] + ["the bank cut rates"])
    (root / "train.jsonl").write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in rows))
    (root / "tags.conll").write_text("".join("the O\nbank B-ORG\ncut O\nrates O\n\nshares O\nfell O\n\n"
                                             for _ in range(4)))
    finetune(["--task", "classification", "--model", model, "--train", str(root / "train.jsonl"),
              "--dev", str(root / "train.jsonl"), "--out", str(root / "clf")])
    finetune(["--task", "token-classification", "--model", model, "--train", str(root / "tags.conll"),
              "--dev", str(root / "tags.conll"), "--out", str(root / "tagger")])
    return root


def test_rows_are_predicts_rows_without_the_line(runs, tmp_path):
    (tmp_path / "in.txt").write_text("the match ended 2 nil\n\nshares fell 3 percent the bank cut rates\n")
    assert main(["predict", "--model", str(runs / "clf"), "--input", str(tmp_path / "in.txt"), "--output",
                 str(tmp_path / "p.jsonl"), "--no-progress"]) == 0
    written = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    rows = bertkit.Predictor.from_pretrained(str(runs / "clf")).predict(TEXTS)
    assert rows == [{key: value for key, value in row.items() if key != "line"} for row in written]
    assert rows[1]["label"] is None and rows[0]["label"] in ("sport", "business")  # a blank input: its null row


def test_a_tagger_gives_entity_offsets_into_each_string(runs):
    predictor = bertkit.Predictor.from_pretrained(str(runs / "tagger"), device="cpu")
    rows = predictor.predict(TEXTS)
    assert len(rows) == 3 and rows[1]["words"] == []
    text = TEXTS[2]  # its newline became a space, one character for one: the offsets point into the string
    assert rows[2]["words"] == text.split()
    for entity in rows[2]["entities"]:
        assert text[entity["start"]:entity["end"]] == entity["text"]
    assert predictor.predict(TEXTS[2]) == [{**rows[2], "index": 0}]  # one string: a list of one row


def test_bad_inputs_are_named_by_position_not_by_a_temporary_file(runs):
    predictor = bertkit.Predictor.from_pretrained(str(runs / "clf"))
    with pytest.raises(DataError, match=r"^input 2 has no key 'text' \(keys: body\)") as info:
        predictor.predict([{"text": "the bank cut rates"}, {"body": "shares fell"}])
    assert "bertkit-predict-" not in str(info.value)
    pairs = bertkit.Predictor.from_pretrained(str(runs / "clf"), settings=["data.pair_column=text_pair"])
    with pytest.raises(DataError, match=r"this model reads text pairs.*\(strings are read as a \.txt file, one text "
                                        r"each; a task whose file holds several fields a line takes dicts of them"):
        pairs.predict(["the bank cut rates"])
    assert len(pairs.predict([{"text": "the bank", "text_pair": "cut rates"}])) == 1
    with pytest.raises(ConfigError, match="a list of strings or a list of dicts"):
        predictor.predict(["the bank", {"text": "shares"}])
    with pytest.raises(ConfigError, match="no inputs"):
        predictor.predict([])
    with pytest.raises(ConfigError, match="is not a directory"):
        bertkit.Predictor.from_pretrained(str(runs / "missing"))


def test_finetune_md_python_block_runs(runs, tmp_path, monkeypatch):
    """docs/finetune.md "From Python": fine-tune, read the summary, predict, evaluate; the tiny model, 3 steps."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "finetune.md").read_text(encoding="utf-8")
    block = re.search(r"## From Python\n.*?```python\n(.*?)```", text, flags=re.S).group(1)
    assert "bertkit.data.assets.minilm_dir()" in block and '"max_steps": 150' in block
    block = (block.replace("bertkit.data.assets.minilm_dir()", repr(str(runs / "tiny")))
             .replace('"max_steps": 150', '"max_steps": 3').replace('"max_length": 256', '"max_length": 16'))
    lines = "".join(f"the match ended {i} nil,sport\nshares fell {i} percent,business\n" for i in range(6))
    for name in ("train.csv", "dev.csv", "test.csv"):
        (tmp_path / name).write_text("text,label\n" + lines, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(block, "docs/finetune.md", "exec"), namespace)
    assert set(namespace["summary"]["best_dev"]) >= {"accuracy", "loss"}
    assert len(namespace["rows"]) == 1 and namespace["rows"][0]["label"] in ("sport", "business")
    assert set(namespace["metrics"]) >= {"accuracy", "macro_f1", "loss"}  # Predictor.evaluate (walk AE)


def test_numpy_strings_settings_as_one_string_and_missing_texts(runs):
    """Walk AE: np.array of texts (numpy's str_) was refused as "not str_"; settings="data.max_length=16"
    was read letter by letter ("got 'd'"); a pandas column's missing text (nan) was "not float, str"."""
    np = pytest.importorskip("numpy")
    predictor = bertkit.Predictor.from_pretrained(str(runs / "clf"), settings="data.max_length=16")
    assert predictor.spec.data.max_length == 16
    assert predictor.predict(np.array(TEXTS[:1] + TEXTS[2:])) == [predictor.predict(TEXTS)[i] | {"index": j}
                                                                   for j, i in enumerate((0, 2))]
    for missing, shown in ((None, "NoneType None"), (float("nan"), "float nan")):
        with pytest.raises(ConfigError, match=rf'^input 2 is {shown}, not a string; .*a missing text can be ""'):
            predictor.predict(["the bank", missing])
    with pytest.raises(ConfigError, match=r"settings are predict's --set strings, e\.g\. settings=\["):
        bertkit.Predictor.from_pretrained(str(runs / "clf"), settings={"data": {"max_length": 16}})


def test_evaluate_from_python_gives_the_commands_metrics(runs, tmp_path, capsys):
    """Walk AE: a run was scored only by `bertkit evaluate`; `Predictor.evaluate` gives its metrics from a
    file or from labelled dicts, and the errors speak Python (settings=, allow_unseen_labels=)."""
    rows = [{"text": "the match ended 3 nil", "label": "sport"}, {"text": "shares fell 5 percent", "label": "business"},
            {"text": "the bank cut rates", "label": "business"}]
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert main(["evaluate", "--model", str(runs / "clf"), "--data", str(tmp_path / "test.jsonl"),
                 "--no-progress"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    predictor = bertkit.Predictor.from_pretrained(str(runs / "clf"))
    found = predictor.evaluate(str(tmp_path / "test.jsonl"))  # the baselines too, refitted as the command does
    assert json.dumps(found, sort_keys=True) == json.dumps(printed, sort_keys=True)
    assert set(found["baselines"]) == {"trivial", "tfidf"} and "paired" in found["baselines"]["tfidf"]
    metrics = predictor.evaluate(str(tmp_path / "test.jsonl"), baselines=False)  # --no-baseline
    assert metrics == pytest.approx({k: v for k, v in printed.items() if k != "baselines"})
    assert set(metrics) >= {"accuracy", "loss"}
    assert predictor.evaluate(rows, baselines=False) == pytest.approx(metrics)
    unseen = rows + [{"text": "rain at noon", "label": "weather"}]
    with pytest.raises(DataError, match="label\\(s\\) the model never saw: 'weather'.*allow_unseen_labels=True"):
        predictor.evaluate(unseen)
    assert predictor.evaluate(unseen, allow_unseen_labels=True)["accuracy"] <= 0.75
    with pytest.raises(DataError, match=r'^input 1 has no key \'label\'.*settings=\["data.label_column=NAME"\]'):
        predictor.evaluate([{"text": "the bank"}])
    with pytest.raises(ConfigError, match="strings carry no label"):
        predictor.evaluate(["the bank"])
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        predictor.evaluate([{**row, "source": "a newspaper article about it"} for row in rows])
    shown = [str(w.message) for w in said]
    assert not any("bertkit-predict-" in text for text in shown), shown
    assert any(text.startswith("the inputs: column 'source'") for text in shown), shown
