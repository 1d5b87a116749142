"""A multi-label model's decision threshold (bertkit/recipes/decision.py): chosen on dev after
fine-tuning from tasks/baseline.py's THRESHOLDS by the select metric, recorded in the run's spec, and
the threshold predict and evaluate decide at."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest

from bertkit.commands.cli import main
from bertkit.commands.finetune import threshold_line
from bertkit.errors import CheckpointError
from bertkit.recipes.decision import choose_threshold
from bertkit.tasks import baseline, builtin_splits, load_for_inference, subsample
from bertkit.tasks.common import TaskSpec
from bertkit.tasks.formats import TextExample
from bertkit.tasks.registry import get_task
from bertkit.tasks.sequence import label_set_predictions, label_sets_at
from bertkit.tokenizer import Tokenizer

from .helpers import make_tiny_model

MULTI_LABEL = get_task("multi-label-classification")
FAST = ["--no-progress", "--set", "train.max_steps=4", "train.batch_size=8", "data.max_length=16"]


def test_label_sets_at_decides_as_the_model_does_from_its_probabilities():
    probs = np.random.default_rng(0).random((30, 4))
    labels = ["a", "b", "c", "d"]
    for threshold in baseline.THRESHOLDS:
        assert label_sets_at(label_set_predictions(labels, probs), threshold) == \
            label_set_predictions(labels, probs, threshold)


def test_the_threshold_that_scores_best_on_dev_is_chosen_and_a_tie_keeps_the_earlier():
    """A model unsure of a rare label (p 0.3 where it holds, 0.1 where not) gets it right only below
    0.3: the first such threshold, 0.3, wins micro-F1, and 0.25 and 0.15 (equal scores) lose the tie."""
    dev = [TextExample(text=f"t{i}", label=["common", "rare"] if i % 3 == 0 else ["common"]) for i in range(12)]
    predictions = [([], {"common": 0.9, "rare": 0.3 if i % 3 == 0 else 0.1}) for i in range(12)]
    threshold, grid = choose_threshold(MULTI_LABEL, dev, predictions, "micro_f1", "loss")
    assert [row["threshold"] for row in grid] == list(baseline.THRESHOLDS)
    assert threshold == 0.3 and next(row for row in grid if row["threshold"] == 0.3)["micro_f1"] == 1.0
    assert next(row for row in grid if row["threshold"] == 0.5)["micro_f1"] < 1.0
    # nothing better than 0.5: it stays
    sure = [(labels, {"common": 0.9, "rare": 0.9 if "rare" in labels else 0.01}) for labels in (e.label for e in dev)]
    assert choose_threshold(MULTI_LABEL, dev, sure, "micro_f1", "loss")[0] == 0.5


def test_a_spec_records_its_threshold_and_an_older_summary_reads_as_0_5():
    spec = TaskSpec(MULTI_LABEL, threshold=0.25)
    assert TaskSpec.from_dict(spec.to_dict(), get_task).threshold == 0.25
    older = {k: v for k, v in spec.to_dict().items() if k != "threshold"}
    assert TaskSpec.from_dict(older, get_task).threshold == 0.5


@pytest.fixture(scope="module")
def topic_files(tmp_path_factory):
    """BBC articles as multi-label JSON lines: the topic, plus "news" for every second article (a
    label the tiny model cannot learn in 4 steps, so its threshold matters)."""
    splits, root = builtin_splits("bbc"), tmp_path_factory.mktemp("topics")
    sizes = {"train": 80, "dev": 40, "test": 40}
    files = {}
    for name, size in sizes.items():
        rows = subsample(splits[name], size, 0)
        path = root / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"text": e.text, "label": [e.label, "news"] if i % 2 else [e.label]}) + "\n"
                                for i, e in enumerate(rows)), encoding="utf-8")
        files[name] = str(path)
    files["model"] = make_tiny_model(root / "tiny", [e.text[:300] for e in subsample(splits["train"], 40, 0)])
    return files


def test_finetune_chooses_the_threshold_and_predict_and_evaluate_decide_at_it(topic_files, tmp_path, capsys):
    out = str(tmp_path / "ml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["finetune", "--task", "multi-label-classification", "--model", topic_files["model"],
                     "--train", topic_files["train"], "--dev", topic_files["dev"], "--out", out, *FAST]) == 0
    printed = capsys.readouterr().out
    summary = json.load(open(os.path.join(out, "finetune_summary.json")))
    entry, threshold = summary["decision_threshold"], summary["spec"]["threshold"]
    assert entry["threshold"] == threshold and summary["best_dev"] == entry["dev"]
    best = max(row["micro_f1"] for row in entry["grid"])
    assert entry["dev"]["micro_f1"] == best  # the first threshold to reach it (0.5 first)
    assert threshold == next(row["threshold"] for row in entry["grid"] if row["micro_f1"] == best)
    at_half = next(row for row in entry["grid"] if row["threshold"] == 0.5)  # the kept checkpoint's scores
    kept = next(row for row in summary["dev_history"] if row["step"] == summary["best_step"])
    assert at_half["micro_f1"] == pytest.approx(kept["micro_f1"]) and at_half["loss"] == pytest.approx(kept["loss"])
    line = ("decision threshold: 0.5 kept" if threshold == 0.5 else
            f"decision threshold {threshold:g}, chosen on dev: micro_f1")
    assert line in printed
    # predict decides at it, from the probabilities it writes
    model, tokenizer, spec = load_for_inference(out)
    assert spec.threshold == threshold
    assert main(["predict", "--model", out, "--input", topic_files["test"], "--output", str(tmp_path / "p.jsonl"),
                 "--no-progress"]) == 0
    rows = [json.loads(line) for line in open(tmp_path / "p.jsonl")]
    decisions = [[name for name, p in row["probabilities"].items() if p >= threshold] for row in rows]
    assert [row["labels"] for row in rows] == decisions
    # transformers' pipeline reads the same run: the same probabilities (a sigmoid per label), the threshold applied
    # to them gives predict's sets (docs/finetune.md)
    transformers = pytest.importorskip("transformers")
    texts = [json.loads(line)["text"] for line in open(topic_files["test"])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        classify = transformers.pipeline("text-classification", model=out, device="cpu", top_k=None,
                                         function_to_apply="sigmoid")
        theirs = classify(texts, truncation=True)
    for row, scores in zip(rows, theirs):
        probs = {item["label"]: item["score"] for item in scores}
        assert probs == pytest.approx(row["probabilities"], abs=1e-5)
        assert sorted(name for name, p in probs.items() if p >= threshold) == sorted(row["labels"])
    # evaluate on the dev file scores what finetune recorded for the saved model
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["evaluate", "--model", out, "--data", topic_files["dev"], "--no-baseline"]) == 0
    scores = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert scores["micro_f1"] == pytest.approx(entry["dev"]["micro_f1"])


def run_with_threshold(topic_files, out: str, threshold: float) -> str:
    """A multi-label fine-tune (no baseline) whose summary then records `threshold` as if chosen on dev."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["finetune", "--task", "multi-label-classification", "--model", topic_files["model"],
                     "--train", topic_files["train"], "--dev", topic_files["dev"], "--out", out, *FAST,
                     "--no-baseline"]) == 0
    path = os.path.join(out, "finetune_summary.json")
    summary = json.load(open(path))
    summary["spec"]["threshold"] = threshold
    json.dump(summary, open(path, "w"))
    return out


def test_a_summary_with_a_threshold_out_of_range_is_refused_by_predict(topic_files, tmp_path):
    out = run_with_threshold(topic_files, str(tmp_path / "ml"), 0)
    with pytest.raises(CheckpointError, match="finetune_summary.json: spec.threshold 0 is not between 0 and 1; set it"):
        load_for_inference(out)


def test_the_report_line_names_the_threshold_its_gain_and_the_scores_it_cost():
    """GCIDE subject fields, seed 0 (docs/results.md): 0.3 won dev micro-F1 and cost exact match."""
    half = {"threshold": 0.5, "micro_f1": 0.6544, "macro_f1": 0.2302, "exact_match": 0.464, "loss": 0.1292}
    low = {"micro_f1": 0.6651, "macro_f1": 0.2518, "exact_match": 0.452, "loss": 0.1292}
    summary = {"spec": {"task": "multi-label-classification"}, "decision_threshold": {
        "threshold": 0.3, "select_metric": "micro_f1", "dev": low, "grid": [half, {"threshold": 0.3, **low}]}}
    assert threshold_line(summary) == (
        "decision threshold 0.3, chosen on dev: micro_f1 0.6651 (at 0.5: 0.6544; worse than at 0.5 on exact_match "
        "0.452 against 0.464); a class is in a text's set at p >= 0.3 in predict and evaluate")
    summary["decision_threshold"].update(threshold=0.5, dev=half)
    assert threshold_line(summary) == "decision threshold: 0.5 kept, no lower one scored better on dev micro_f1"


def test_an_onnx_export_carries_the_threshold_and_its_logits_decide_as_predict_does(topic_files, tmp_path, capsys):
    """The graph gives logits; predict decides at the threshold chosen on dev. The export writes it beside the
    graph (decision.json) and says so; applied to ONNX Runtime's logits it gives predict's sets. An export
    without a threshold (the encoder alone) over it leaves no stale decision.json."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")

    out, onnx_dir = run_with_threshold(topic_files, str(tmp_path / "ml"), 0.3), str(tmp_path / "onnx")
    capsys.readouterr()
    assert main(["export", "--model", out, "--out", onnx_dir]) == 0
    assert "sigmoid(logit) >= 0.3 (chosen on dev), written beside the graph in decision.json" in capsys.readouterr().out
    decision = json.load(open(os.path.join(onnx_dir, "decision.json")))
    assert decision["threshold"] == 0.3 and decision["task"] == "multi-label-classification"
    assert main(["predict", "--model", out, "--input", topic_files["test"], "--output", str(tmp_path / "p.jsonl"),
                 "--no-progress"]) == 0
    rows = [json.loads(line) for line in open(tmp_path / "p.jsonl")]
    labels = json.load(open(os.path.join(onnx_dir, "config.json")))["id2label"]
    tokenizer, session = Tokenizer.from_pretrained(onnx_dir), ort.InferenceSession(os.path.join(onnx_dir, "model.onnx"))
    for line, row in zip(open(topic_files["test"]), rows):
        enc = tokenizer([json.loads(line)["text"]], truncation=True, max_length=16, return_tensors="np")
        feed = {i.name: np.asarray(enc[i.name], dtype=np.int64) for i in session.get_inputs()}
        [logits] = session.run(None, feed)[0]
        chosen = {labels[str(j)] for j, z in enumerate(logits) if 1 / (1 + np.exp(-z)) >= decision["threshold"]}
        assert chosen == set(row["labels"])
    assert main(["export", "--model", out, "--out", onnx_dir, "--task", "encoder", "--overwrite"]) == 0
    assert not os.path.exists(os.path.join(onnx_dir, "decision.json"))
