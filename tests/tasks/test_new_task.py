"""A task bertkit does not ship, added as docs/architecture.md's "Add a task" says: one new module
plus one registry line, in a package of its own (written to tmp_path). `bertkit finetune`,
`evaluate`, `predict` and `export` then run it with no bertkit file changed, and fine-tuning
encodes its dev set once however often it evaluates."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import sys
import warnings

import pytest

from bertkit.commands.cli import main
from bertkit.models.heads import BertForSequenceClassification, BertForTokenClassification
from bertkit.tasks import TASKS, get_task
from bertkit.tasks.spec import Task

from .helpers import make_tiny_model

TASK_MODULE = '''
"""Review polarity: is a product review positive? JSONL records {"review": TEXT, "stars": 1..5};
4 or 5 stars is "positive", 1 or 2 "negative" (3 stars say neither: left out)."""

import json

import numpy as np

from bertkit.models.heads import BertForSequenceClassification
from bertkit.tasks import PredictionInput, Task, forward_features, model_labels
from bertkit.tasks.common import softmax
from bertkit.tasks.formats import TextExample
from bertkit.tasks.sequence import class_ids, encode_texts
from bertkit.tasks.spec import label_head_config

DEV_ENCODINGS = []  # how often the dev set was encoded for inference (the recipe's promise: once)


def _records(path):
    with open(path, encoding="utf-8") as f:
        return [(n, json.loads(line)) for n, line in enumerate(f, 1) if line.strip()]


def read(path, data):
    return [TextExample(r["review"], label="positive" if r["stars"] >= 4 else "negative", line=n)
            for n, r in _records(path) if r["stars"] != 3]


def read_inputs(path, data):
    return PredictionInput([TextExample(r["review"], line=n) for n, r in _records(path)])


def encode(tokenizer, examples, data, label2id, training, name):
    if not training and name.endswith("dev.jsonl"):  # the dev file, named as finetune names it
        DEV_ENCODINGS.append(len(examples))
    return encode_texts(tokenizer, examples, data.max_length, class_ids if training else None, label2id, name)


def decode(model, tokenizer, examples, spec, name="data", features=None):
    """P(positive) per review."""
    if features is None:
        features = encode(tokenizer, examples, spec.data, None, False, name)
    logits = np.stack(forward_features(model, features, spec.data.eval_batch_size, tokenizer.pad_token_id))
    return [float(p) for p in softmax(logits.astype(np.float64))[:, model_labels(model).index("positive")]]


def metrics(examples, predictions):
    gold = np.array([e.label == "positive" for e in examples])
    said = np.array([p >= 0.5 for p in predictions])
    return {"accuracy": float(np.mean(gold == said)),
            "positive_recall": float(np.sum(gold & said) / max(1, np.sum(gold)))}


def baseline(train, examples):
    share = sum(e.label == "positive" for e in train) / len(train)
    return metrics(examples, [share] * len(examples))


def rows(model, predictions, inputs):
    return [{"positive": p >= 0.5, "p_positive": round(p, 6)} for p in predictions]


POLARITY = Task(
    name="review-polarity", description="is a product review positive (4-5 stars)?",
    model_class=BertForSequenceClassification, read=read, read_inputs=read_inputs, encode=encode,
    decode=decode, metrics=metrics, baseline=baseline, rows=rows, metric_names=("accuracy", "positive_recall"),
    labels_of=lambda examples: [e.label for e in examples],
    head_config=label_head_config("single_label_classification"), class_weights=True,
    blank_row=lambda example: {"positive": None, "p_positive": None}, export_outputs={"logits": ("batch",)},
)
'''

REGISTRY_MODULE = '''
from bertkit.tasks import register_task
from reviews import polarity

register_task(polarity.POLARITY)
'''

GOOD = ["great product works well", "love it , works great", "excellent value and great quality", "works well"]
BAD = ["broken after a day", "poor quality , broken", "awful , it stopped working", "poor value"]


def write_reviews(path, count: int, offset: int = 0) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for i in range(offset, offset + count):
            texts = GOOD if i % 2 == 0 else BAD
            stars = 3 if i % 5 == 4 else (4 + i // 2 % 2 if i % 2 == 0 else 1)  # 3 stars: no label
            f.write(json.dumps({"review": texts[i // 2 % len(texts)] + f" {i}", "stars": stars}) + "\n")
    return str(path)


def write_reviews_package(tmp_path, monkeypatch) -> None:
    """The reviews package on the Python path (not imported): polarity.py (the task) and
    registry.py (its one registry line)."""
    package = tmp_path / "pkg" / "reviews"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "polarity.py").write_text(TASK_MODULE)
    (package / "registry.py").write_text(REGISTRY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))


def forget_reviews_package() -> None:
    TASKS.pop("review-polarity", None)
    for name in ("reviews.registry", "reviews.polarity", "reviews"):
        sys.modules.pop(name, None)


@pytest.fixture
def polarity(tmp_path, monkeypatch):
    """The reviews package, imported: its task registered."""
    write_reviews_package(tmp_path, monkeypatch)
    importlib.import_module("reviews.registry")
    yield sys.modules["reviews.polarity"]
    forget_reviews_package()


def run_cli(argv, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def test_a_new_task_runs_through_every_command(polarity, tmp_path, capsys):
    texts = GOOD + BAD + [f"{i}" for i in range(60)]
    model = make_tiny_model(tmp_path / "tiny", texts)
    train = write_reviews(tmp_path / "train.jsonl", 40)
    dev = write_reviews(tmp_path / "dev.jsonl", 10, offset=40)
    out = str(tmp_path / "out")
    run_cli(["finetune", "--task", "review-polarity", "--model", model, "--train", train, "--dev", dev,
             "--out", out, "--no-progress", "--seed", "0", "--set", "data.max_length=16", "train.epochs=2",
             "train.evals_per_epoch=2", "train.class_weights=balanced", "train.batch_size=8",
             "train.patience=0"], capsys)  # all four evaluations, even without a better one
    with open(os.path.join(out, "finetune_summary.json")) as f:
        summary = json.load(f)
    assert summary["spec"]["task"] == "review-polarity" and summary["select_metric"] == "accuracy"
    assert summary["labels"] == ["negative", "positive"]
    assert len(summary["dev_history"]) >= 4  # evaluated four times ...
    assert polarity.DEV_ENCODINGS == [8]  # ... on a dev set encoded once (the 3-star reviews left out)

    printed = run_cli(["evaluate", "--model", out, "--data", dev], capsys).splitlines()
    assert printed[0] == f"review-polarity on {dev}: 8 examples"
    assert printed[1].startswith("trivial baseline: ")  # its own baseline, refitted on the recorded training data
    assert printed[2].startswith(f"model on {dev}: accuracy=")  # a task of one's own gets the labelled line too
    assert set(json.loads(printed[3])) == {"accuracy", "positive_recall", "baselines"}
    assert json.loads(printed[3])["baselines"]["trivial"] == json.loads(printed[1][len("trivial baseline: "):])

    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text(json.dumps({"review": "great product"}) + "\n" + json.dumps({"review": "  "}) + "\n")
    run_cli(["predict", "--model", out, "--input", str(inputs), "--output", str(tmp_path / "rows.jsonl")], capsys)
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert set(rows[0]) == {"index", "line", "positive", "p_positive"} and 0 <= rows[0]["p_positive"] <= 1
    assert rows[1] == {"index": 1, "line": 2, "positive": None, "p_positive": None}  # the task's blank row

    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    printed = run_cli(["export", "--model", out, "--out", str(tmp_path / "onnx")], capsys)
    assert "wrote review-polarity graph" in printed  # the task read from the directory
    assert "max |difference|" in printed  # checked against bertkit in ONNX Runtime
    assert (tmp_path / "onnx" / "model.onnx").is_file()


def test_a_task_names_its_head_class_per_family(tmp_path):
    directory = make_tiny_model(tmp_path / "tiny", ["a few words", "and a few more"])
    classification = get_task("classification")
    assert classification.head_class(directory) is BertForSequenceClassification  # the family's counterpart
    own = dataclasses.replace(classification, name="tags-as-classes",
                              head_classes={"bert": BertForTokenClassification, "other-family": Task})
    assert own.head_class(directory) is BertForTokenClassification


def test_the_command_line_imports_a_task_module(tmp_path, monkeypatch, capsys):
    """`--task-module reviews.registry` registers the task before --task is read: the `bertkit`
    command runs a user's task without a Python wrapper; a module that is not there is one line."""
    write_reviews_package(tmp_path, monkeypatch)
    model = make_tiny_model(tmp_path / "tiny", GOOD + BAD + [f"{i}" for i in range(60)])
    train, dev = write_reviews(tmp_path / "train.jsonl", 20), write_reviews(tmp_path / "dev.jsonl", 10, offset=20)
    try:
        run_cli(["finetune", "--task-module", "reviews.registry", "--task", "review-polarity", "--model", model,
                 "--train", train, "--dev", dev, "--out", str(tmp_path / "out"), "--no-progress",
                 "--set", "data.max_length=16", "train.max_steps=2"], capsys)
        printed = run_cli(["evaluate", "--task-module", "reviews.registry", "--model", str(tmp_path / "out"),
                           "--data", dev], capsys)
        assert printed.startswith(f"review-polarity on {dev}")
    finally:
        forget_reviews_package()
    assert main(["evaluate", "--task-module", str(tmp_path / "absent.py"), "--model", model, "--data", dev]) == 2
    assert "--task-module" in capsys.readouterr().err.splitlines()[-1]
