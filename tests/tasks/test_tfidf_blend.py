"""A classifier or regressor blended with its TF-IDF baseline (bertkit/tasks/tfidf_blend.py,
bertkit/recipes/blend.py): the saved TF-IDF model gives scikit-learn's probabilities (a ridge's
values) without scikit-learn, the weight is chosen on dev, and predict / evaluate use what finetune
saved."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings

import numpy as np
import pytest

from bertkit.commands.cli import main
from bertkit.commands.finetune import blend_line
from bertkit.errors import CheckpointError, ConfigError
from bertkit.recipes.blend import check_blend
from bertkit.tasks import baseline, builtin_splits, load_for_inference, subsample
from bertkit.tasks.formats import TextExample
from bertkit.tasks.registry import get_task
from bertkit.tasks.tfidf_blend import (ARRAYS_FILE, BLEND_FILE, WEIGHTS, TfidfBlend, blended_predictions, choose_blend,
                                       load_blend, remove_blend)

from .helpers import make_tiny_model, write_csv

FAST = ["--no-progress", "--set", "train.max_steps=2", "train.batch_size=8", "data.max_length=16"]


@pytest.fixture(scope="module")
def bbc():
    splits = builtin_splits("bbc")
    return {"train": subsample(splits["train"], 120, 0), "dev": subsample(splits["dev"], 40, 0),
            "test": subsample(splits["test"], 50, 0)}


@pytest.mark.parametrize("binary", [False, True], ids=["five-classes", "binary"])
def test_the_saved_tfidf_model_gives_scikit_learns_probabilities(bbc, binary, tmp_path):
    topics = sorted({e.label for e in bbc["train"]})[:2 if binary else None]
    keep = lambda rows: [e for e in rows if e.label in topics]
    train, test = keep(bbc["train"]), keep(bbc["test"])
    fitted = baseline.fit_tfidf("classification", train, 10.0)
    TfidfBlend.from_fitted(fitted, 0.5).save(str(tmp_path))
    loaded = load_blend(str(tmp_path), "classification")
    pair = TextExample(text=test[0].text, text_pair="Shares fell as the match ended", label=None)
    unknown = TextExample(text="zzzq qqqz", label=None)  # no known word: the intercept alone
    rows = [*test, pair, unknown]
    expected = fitted.linear.predict_proba(fitted.vectorizer.transform([baseline.baseline_text(e) for e in rows]))
    got = loaded.probabilities([baseline.baseline_text(e) for e in rows])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9)
    assert loaded.weight == 0.5 and loaded.classes == [str(c) for c in fitted.linear.classes_]
    # the blend is the weighted mean, columns aligned by class name to the model's label order
    labels = list(reversed(loaded.classes))
    encoder = np.full((len(rows), len(labels)), 1.0 / len(labels))
    mixed = loaded.mix(encoder, labels, rows)
    np.testing.assert_allclose(mixed, 0.5 * encoder + 0.5 * expected[:, ::-1], atol=1e-9)
    remove_blend(str(tmp_path))  # (finetune drops a blend a killed attempt left before choosing its own)
    assert load_blend(str(tmp_path), "classification") is None and not os.listdir(tmp_path)


def test_the_weight_is_chosen_on_dev_by_the_select_metric_then_the_loss(bbc):
    train, dev = bbc["train"], bbc["dev"]
    labels = sorted({e.label for e in train})
    sure = [(e.label, {name: float(name == e.label) for name in labels}) for e in dev]  # always right
    blend, grid = choose_blend("classification", train, dev, 10.0, sure, labels, "accuracy", "loss")
    assert [row["weight"] for row in grid] == list(WEIGHTS)
    assert blend.weight == 0.0  # the encoder alone is right with the least loss
    unsure = [(labels[0], {name: 1.0 / len(labels) for name in labels}) for _ in dev]  # knows nothing
    blend, grid = choose_blend("classification", train, dev, 10.0, unsure, labels, "accuracy", "loss")
    best = max(grid, key=lambda row: (row["accuracy"], -row["loss"]))
    assert blend.weight == best["weight"] > 0 and grid[0]["accuracy"] < best["accuracy"]


def test_finetune_blends_and_predict_and_evaluate_use_the_blend(bbc, tmp_path, capsys):
    files = {name: write_csv(tmp_path / f"{name}.csv", rows) for name, rows in bbc.items()}
    tiny = make_tiny_model(tmp_path / "tiny", [e.text[:300] for e in bbc["train"][:40]])
    out = str(tmp_path / "clf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["finetune", "--task", "classification", "--model", tiny, "--train", files["train"],
                     "--dev", files["dev"], "--out", out, *FAST, "train.blend_tfidf=true"]) == 0
    printed = capsys.readouterr().out
    record = json.load(open(os.path.join(out, "finetune_summary.json")))["tfidf_blend"]
    # two steps of a tiny random encoder know little: TF-IDF carries the blend
    assert record["weight"] > 0 and os.path.isfile(os.path.join(out, BLEND_FILE))
    assert f"TF-IDF blend (weight {record['weight']:g}, chosen on dev): accuracy" in printed
    assert json.loads(printed.splitlines()[-1])["tfidf_blend"] == {"weight": record["weight"], **record["dev"]}
    alone = next(row for row in record["grid"] if row["weight"] == 0)
    assert record["dev"]["accuracy"] > alone["accuracy"]

    model, tokenizer, spec = load_for_inference(out)
    assert spec.blend is not None and spec.blend.weight == record["weight"]
    encoder = get_task("classification").decode(model, tokenizer, bbc["test"], _without_blend(spec))
    labels = list(encoder[0][1])
    expected = spec.blend.mix(np.array([[p[name] for name in labels] for _, p in encoder]), labels, bbc["test"])
    assert main(["predict", "--model", out, "--input", files["test"], "--output", str(tmp_path / "p.jsonl"),
                 "--no-progress"]) == 0
    assert f"(the model blended with TF-IDF, weight {record['weight']:g})" in capsys.readouterr().out
    rows = [json.loads(line) for line in open(tmp_path / "p.jsonl")]
    got = np.array([[row["probabilities"][name] for name in labels] for row in rows])
    np.testing.assert_allclose(got, expected, atol=1e-6)  # (rows round to 6 digits)
    assert [row["label"] for row in rows] == [labels[j] for j in expected.argmax(1)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["evaluate", "--model", out, "--data", files["test"], "--no-baseline"]) == 0
    printed = capsys.readouterr().out
    assert "the model's scores are of its blend with TF-IDF" in printed
    gold = [e.label for e in bbc["test"]]
    assert json.loads(printed.splitlines()[-1])["accuracy"] == pytest.approx(
        np.mean([labels[j] == g for j, g in zip(expected.argmax(1), gold)]))

    with open(os.path.join(out, ARRAYS_FILE), "wb") as f:
        f.write(b"not safetensors")
    with pytest.raises(CheckpointError, match="TF-IDF blend is unreadable.*delete tfidf_blend.json"):
        load_for_inference(out)


def write_jsonl(path, examples, label_lists: bool) -> str:
    """{"text", "label"} lines, the label a list of one or two topics when `label_lists` (multi-label)."""
    label = (lambda i, e: [e.label, "news"] if i % 2 else [e.label]) if label_lists else (lambda i, e: e.label)
    path.write_text("".join(json.dumps({"text": e.text, "label": label(i, e)}) + "\n" for i, e in enumerate(examples)),
                    encoding="utf-8")
    return str(path)


def _without_blend(spec):
    return dataclasses.replace(spec, blend=None)


def words(example) -> float:
    return float(len(example.text.split()))


def test_the_saved_ridge_gives_scikit_learns_values_and_the_weight_is_chosen_by_mse(bbc, tmp_path):
    train = [dataclasses.replace(e, label=words(e)) for e in bbc["train"]]
    dev = [dataclasses.replace(e, label=words(e)) for e in bbc["dev"]]
    fitted = baseline.fit_tfidf("regression", train, 1.0)
    TfidfBlend.from_fitted(fitted, 0.25).save(str(tmp_path))
    loaded = load_blend(str(tmp_path), "regression")
    with pytest.raises(CheckpointError, match="blend is a regression model's, but the model is a classification model"):
        load_blend(str(tmp_path), "classification")  # copied in from another run: it would be ignored
    rows = [*bbc["test"], TextExample(text="zzzq qqqz", label=None)]  # no known word: the intercept alone
    expected = fitted.linear.predict(fitted.vectorizer.transform([baseline.baseline_text(e) for e in rows]))
    np.testing.assert_allclose(loaded.values(rows), expected, rtol=0, atol=1e-9)
    assert loaded.classes == [] and loaded.weight == 0.25
    encoder = np.full(len(rows), 400.0)
    np.testing.assert_allclose(loaded.mix_values(encoder, rows), 0.75 * encoder + 0.25 * expected, atol=1e-9)
    # a regression's weight is chosen by the select metric, mse lowest
    exact = [e.label for e in dev]  # an encoder that is always right: alone is best
    assert choose_blend("regression", train, dev, 1.0, exact, [], "mse")[0].weight == 0.0
    constant = [float(np.mean([e.label for e in train]))] * len(dev)  # the training mean: TF-IDF helps
    blend, grid = choose_blend("regression", train, dev, 1.0, constant, [], "mse")
    assert blend.weight == min(grid, key=lambda row: row["mse"])["weight"] > 0 and [r["weight"] for r in grid] == list(
        WEIGHTS)


def test_finetune_blends_a_regression_and_predict_and_evaluate_use_it(bbc, tmp_path, capsys):
    files = {name: write_csv(tmp_path / f"{name}.csv", rows, words) for name, rows in bbc.items()}
    tiny = make_tiny_model(tmp_path / "tiny", [e.text[:300] for e in bbc["train"][:40]])
    out = str(tmp_path / "rg")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["finetune", "--task", "regression", "--model", tiny, "--train", files["train"],
                     "--dev", files["dev"], "--out", out, *FAST, "train.blend_tfidf=true",
                     "train.select_metric=mse"]) == 0
    printed = capsys.readouterr().out
    record = json.load(open(os.path.join(out, "finetune_summary.json")))["tfidf_blend"]
    assert f"TF-IDF blend (weight {record['weight']:g}, chosen on dev): mse" in printed
    assert record["weight"] > 0 and record["dev"]["mse"] < next(r for r in record["grid"] if r["weight"] == 0)["mse"]
    model, tokenizer, spec = load_for_inference(out)
    assert spec.blend is not None and spec.blend.weight == record["weight"]
    task = get_task("regression")
    encoder = np.array(task.decode(model, tokenizer, bbc["test"], _without_blend(spec)))
    expected = spec.blend.mix_values(encoder, bbc["test"])
    assert main(["predict", "--model", out, "--input", files["test"], "--output", str(tmp_path / "p.jsonl"),
                 "--no-progress"]) == 0
    capsys.readouterr()
    got = [json.loads(line)["value"] for line in open(tmp_path / "p.jsonl")]
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["evaluate", "--model", out, "--data", files["test"], "--no-baseline"]) == 0
    printed = capsys.readouterr().out
    assert "--no-blend scores the encoder alone" in printed
    gold = np.array([words(e) for e in bbc["test"]])
    assert json.loads(printed.splitlines()[-1])["mse"] == pytest.approx(np.mean((expected - gold) ** 2))
    # the encoder alone, as a copy of the run without tfidf_blend.* scored it (session 31, walk Z)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["evaluate", "--model", out, "--data", files["test"], "--no-baseline", "--no-blend"]) == 0
    printed = capsys.readouterr().out
    assert "the encoder alone (--no-blend)" in printed
    assert json.loads(printed.splitlines()[-1])["mse"] == pytest.approx(np.mean((encoder - gold) ** 2))
    assert main(["predict", "--model", out, "--input", files["test"], "--output", str(tmp_path / "alone.jsonl"),
                 "--no-progress", "--no-blend"]) == 0
    assert "blended" not in capsys.readouterr().out
    got = [json.loads(line)["value"] for line in open(tmp_path / "alone.jsonl")]
    np.testing.assert_allclose(got, encoder, rtol=1e-6)


@pytest.mark.parametrize("argv, message", [
    (["--task", "classification", "--no-baseline", "--set", "train.blend_tfidf=true"],
     "train.baseline=false .* switches off"),
    (["--task", "classification", "--search", "--set", "train.blend_tfidf=true"], "with --search"),
])
def test_blend_tfidf_is_refused_where_it_cannot_run(bbc, tmp_path, argv, message, capsys):
    write = lambda name, rows: write_jsonl(tmp_path / f"{name}.jsonl", rows, False)
    train, dev = write("train", bbc["train"][:20]), write("dev", bbc["dev"][:10])
    tiny = make_tiny_model(tmp_path / "tiny", [e.text[:200] for e in bbc["train"][:20]])
    assert main(["finetune", *argv, "--model", tiny, "--train", train, "--dev", dev, "--out", str(tmp_path / "o"),
                 "--no-progress"]) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not os.path.exists(tmp_path / "o" / "model.safetensors")


def test_a_lora_classifier_blends_and_its_merged_copy_predicts_the_same(bbc, tmp_path, capsys):
    files = {name: write_csv(tmp_path / f"{name}.csv", rows) for name, rows in bbc.items()}
    tiny = make_tiny_model(tmp_path / "tiny", [e.text[:300] for e in bbc["train"][:40]])
    lora, merged = str(tmp_path / "lora"), str(tmp_path / "merged")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["finetune", "--task", "classification", "--model", tiny, "--train", files["train"],
                     "--dev", files["dev"], "--out", lora, "--peft", "lora", *FAST, "train.blend_tfidf=true"]) == 0
        assert main(["peft", "merge", "--model", lora, "--out", merged]) == 0
        for model in (lora, merged):
            assert main(["predict", "--model", model, "--input", files["test"], "--output", f"{model}.jsonl",
                         "--no-progress"]) == 0
    assert os.path.isfile(os.path.join(lora, BLEND_FILE)) and os.path.isfile(os.path.join(merged, BLEND_FILE))
    rows = {model: [json.loads(line) for line in open(f"{model}.jsonl")] for model in (lora, merged)}
    for ours, theirs in zip(rows[lora], rows[merged]):
        assert ours["label"] == theirs["label"]
        assert ours["probabilities"] == pytest.approx(theirs["probabilities"], abs=1e-5)


def test_blend_tfidf_is_refused_for_a_task_without_probabilities_or_values():
    for task in ("token-classification", "qa", "seq2seq"):
        with pytest.raises(ConfigError, match=f"--task {task} has none to blend: drop train.blend_tfidf"):
            check_blend(task)


def topic_sets(examples) -> list:
    """BBC articles as multi-label rows: the topic, "long" for articles over 400 words, and "news"
    for every one (a class every training text holds: one-vs-rest's constant)."""
    return [dataclasses.replace(e, label=[e.label, "news"] + (["long"] if len(e.text.split()) > 400 else []))
            for e in examples]


def test_the_saved_one_vs_rest_model_gives_scikit_learns_probabilities(bbc, tmp_path):
    train, test = topic_sets(bbc["train"]), topic_sets(bbc["test"])
    fitted = baseline.fit_tfidf("multi-label-classification", train, 10.0)
    TfidfBlend.from_fitted(fitted, 0.25).save(str(tmp_path))
    with pytest.raises(CheckpointError, match=r"blend is a multi-label-classification model's \(7 classes\), but "
                                              "the model is a classification model"):
        load_blend(str(tmp_path), "classification")
    loaded = load_blend(str(tmp_path), "multi-label-classification")
    rows = [*test, TextExample(text="zzzq qqqz", label=None)]  # no known word: the intercepts alone
    expected = fitted.linear.predict_proba(fitted.vectorizer.transform([baseline.baseline_text(e) for e in rows]))
    np.testing.assert_allclose(loaded.probabilities([baseline.baseline_text(e) for e in rows]), expected,
                               rtol=0, atol=1e-9)
    assert loaded.multi_label and loaded.classes == fitted.classes and "news" in loaded.classes
    # each class blended on its own; the set is every class at p >= 0.5
    labels = list(reversed(loaded.classes))
    encoder = np.full((len(rows), len(labels)), 0.4)
    predict = blended_predictions(loaded, rows, [([], dict(zip(labels, row))) for row in encoder], labels)
    mixed = 0.75 * encoder + 0.25 * expected[:, ::-1]
    for (chosen, probs), row in zip(predict(0.25, 0.3), mixed):
        assert chosen == [name for name, p in zip(labels, row) if p >= 0.3]
        np.testing.assert_allclose([probs[name] for name in labels], row, atol=1e-9)


def test_a_multi_label_blend_chooses_its_threshold_with_its_weight(bbc):
    """Every weight is tried at each threshold (w = 0, the model alone, too); the saved threshold is
    the chosen point's and predictions decide at it. An encoder sure of nothing (0.3 for every label)
    is beaten by TF-IDF's own probabilities, whose sets need a threshold below 0.5 here."""
    train, dev = topic_sets(bbc["train"]), topic_sets(bbc["dev"])
    labels = sorted({name for e in train for name in e.label})
    unsure = [([], {name: 0.3 for name in labels}) for _ in dev]
    blend, tried = choose_blend("multi-label-classification", train, dev, 10.0, unsure, labels, "micro_f1", "loss")
    assert [(row["weight"], row["threshold"]) for row in tried] == [(w, t) for w in WEIGHTS for t in baseline.THRESHOLDS]
    best = next(row for row in tried if row["weight"] == blend.weight and row["threshold"] == blend.threshold)
    assert best["micro_f1"] == max(row["micro_f1"] for row in tried) > tried[0]["micro_f1"]
    assert blend.threshold < 0.5 and blend.settings == f"weight {blend.weight:g}, threshold {blend.threshold:g}"


def test_finetune_blends_a_multi_label_classifier_and_predict_and_evaluate_use_it(bbc, tmp_path, capsys):
    files = {name: write_jsonl(tmp_path / f"{name}.jsonl", rows, True) for name, rows in bbc.items()}
    tiny = make_tiny_model(tmp_path / "tiny", [e.text[:300] for e in bbc["train"][:40]])
    out = str(tmp_path / "ml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["finetune", "--task", "classification", "--model", tiny, "--train", files["train"],
                     "--dev", files["dev"], "--out", out, *FAST, "train.blend_tfidf=true"]) == 0
    printed = capsys.readouterr().out
    summary = json.load(open(os.path.join(out, "finetune_summary.json")))
    record = summary["tfidf_blend"]
    assert summary["spec"]["task"] == "multi-label-classification" and record["weight"] > 0
    assert (f"{files['train']}: the labels give a set of classes per text or text pair, so --task classification "
            "runs as multi-label-classification") in printed  # said, not silent (walk Y)
    assert f"TF-IDF blend (weight {record['weight']:g}, threshold {record['threshold']:g}, chosen on dev): " \
           "micro_f1" in printed
    own = summary["spec"]["threshold"]  # the model alone, at the threshold chosen for it (recipes/decision.py)
    assert record["dev"]["micro_f1"] >= next(r for r in record["grid"] if r["weight"] == 0 and r["threshold"] == own)[
        "micro_f1"] == summary["decision_threshold"]["dev"]["micro_f1"]
    model, tokenizer, spec = load_for_inference(out)
    assert spec.blend is not None and spec.blend.multi_label
    encoder = get_task("multi-label-classification").decode(model, tokenizer, bbc["test"], _without_blend(spec))
    labels = list(encoder[0][1])
    expected = spec.blend.mix(np.array([[p[name] for name in labels] for _, p in encoder]), labels, bbc["test"])
    assert main(["predict", "--model", out, "--input", files["test"], "--output", str(tmp_path / "p.jsonl"),
                 "--no-progress"]) == 0
    capsys.readouterr()
    rows = [json.loads(line) for line in open(tmp_path / "p.jsonl")]
    np.testing.assert_allclose([[row["probabilities"][name] for name in labels] for row in rows], expected, atol=1e-6)
    threshold = spec.blend.threshold
    assert [row["labels"] for row in rows] == [[n for n, p in zip(labels, row) if p >= threshold] for row in expected]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["evaluate", "--model", out, "--data", files["test"], "--no-baseline"]) == 0
    assert "the model's scores are of its blend with TF-IDF" in capsys.readouterr().out


def test_the_blend_line_names_the_dev_scores_the_blend_lost():
    """The blend is chosen by one metric: a lower threshold that wins micro-F1 can cost exact match, and the line
    says so (walk AB, WordNet verb frames, seed 0: exact match 0.368 -> 0.252 went unmentioned)."""
    alone = {"weight": 0.0, "threshold": 0.5, "micro_f1": 0.5991, "macro_f1": 0.2909, "exact_match": 0.368,
             "loss": 0.2407}
    dev = {"micro_f1": 0.6108, "macro_f1": 0.3395, "exact_match": 0.252, "loss": 0.2369}
    summary = {"spec": {"task": "multi-label-classification"}, "tfidf_baseline": None,
               "tfidf_blend": {"weight": 0.5, "threshold": 0.25, "weights": list(WEIGHTS), "select_metric": "micro_f1",
                               "dev": dev, "grid": [alone, {"weight": 0.5, "threshold": 0.25, **dev}]}}
    line = blend_line(summary)
    assert "micro_f1 0.6108 (the model alone 0.5991" in line
    assert "; worse than the model alone on dev exact_match 0.252 against 0.368; saved beside" in line
    assert "macro_f1" not in line and "loss" not in line  # better (loss: lower) is not listed
    summary["tfidf_blend"]["dev"] = {**dev, "exact_match": 0.4, "loss": 0.25}
    assert "worse than the model alone on dev loss 0.25 against 0.2407; saved" in blend_line(summary)
