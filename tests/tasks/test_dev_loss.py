"""The dev loss of single-label classification (mean cross-entropy of the gold class) and what
fine-tuning does with it: a tie of the selected score goes to the lower dev loss, and
`train.select_metric=loss` keeps the lowest dev loss."""

from __future__ import annotations

import math
import os
import warnings

import pytest
import torch

from bertkit.models.config import BertConfig
from bertkit.models.heads import BertForSequenceClassification
from bertkit.recipes.finetune import finetune
from bertkit.tasks import (Collator, DataConfig, TaskSpec, evaluate_examples, get_task, load_examples,
                           load_for_inference)
from bertkit.tasks.formats import TextExample
from bertkit.tasks.sequence import classification_metrics, encode_texts, majority_baseline
from bertkit.tokenizer import Tokenizer

from .helpers import make_tiny_model

SPORT = [f"the match ended {i} nil" for i in range(16)]
BUSINESS = [f"shares fell {i} percent" for i in range(16)]


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("dev-loss")
    model = make_tiny_model(root / "tiny", SPORT + BUSINESS)
    rows = [(t, "sport") for t in SPORT[:12]] + [(t, "business") for t in BUSINESS[:12]]
    dev = [(t, "sport") for t in SPORT[12:]] + [(t, "business") for t in BUSINESS[12:]]
    for name, data in (("train.csv", rows), ("dev.csv", dev)):
        (root / name).write_text("text,label\n" + "".join(f"{t},{label}\n" for t, label in data), encoding="utf-8")
    return model, str(root / "train.csv"), str(root / "dev.csv"), root


def run(tiny_data, name, **train):
    model, train_file, dev_file, root = tiny_data
    sections = {"data": {"max_length": 16},
                "train": {"max_steps": 30, "eval_every": 3, "batch_size": 8, "lr": 1e-2, "seed": 0, **train}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return finetune("classification", model, train_file, dev_file, str(root / name), sections, progress=False)


def test_dev_loss_is_the_cross_entropy_of_the_model_logits(tiny_data):
    # labels not in alphabetical order: the gold class is found by name, not by position
    labels = {0: "sport", 1: "business", 2: "film"}
    torch.manual_seed(0)
    tokenizer = Tokenizer.from_pretrained(tiny_data[0])
    config = BertConfig.from_pretrained(tiny_data[0]).replace(num_labels=3, id2label=labels)
    model = BertForSequenceClassification(config).eval()
    examples = [TextExample(text, label=label) for text, label in
                [("the match ended", "sport"), ("shares fell", "business"), ("good film", "film"),
                 ("bank cut rates", "sport"), ("goal in last minute", "film")]]
    metrics = evaluate_examples(model, tokenizer, TaskSpec(get_task("classification"), DataConfig(max_length=64)), examples)
    batch = Collator(tokenizer.pad_token_id)(encode_texts(tokenizer, examples, 64))
    with torch.no_grad():
        logits = model(**batch).logits.double()
    gold = torch.tensor([{v: k for k, v in labels.items()}[e.label] for e in examples])
    assert metrics["loss"] == pytest.approx(torch.nn.functional.cross_entropy(logits, gold).item(), rel=1e-5)
    assert list(metrics) == ["accuracy", "macro_f1", "loss"]
    task = get_task("classification")
    assert "loss" in task.metric_names and "loss" in task.lower_is_better


def test_majority_baseline_predicts_the_training_frequencies():
    train = [TextExample("x", label=label) for label in "aaab"]
    dev = [TextExample("x", label=label) for label in "ab"]
    metrics = majority_baseline(train, dev)
    assert metrics["accuracy"] == 0.5
    assert metrics["loss"] == pytest.approx(-(math.log(0.75) + math.log(0.25)) / 2)
    # labels alone (a reference that gives no probabilities): no loss rather than a made-up one
    assert set(classification_metrics(dev, [("a", None)] * 2)) == {"accuracy", "macro_f1"}


def test_finetune_settles_accuracy_ties_by_the_dev_loss(tiny_data):
    summary = run(tiny_data, "by-accuracy")
    history = summary["dev_history"]
    assert summary["select_metric"] == "accuracy" and summary["tie_metric"] == "loss"
    assert set(summary["best_dev"]) >= {"accuracy", "macro_f1", "loss"}
    assert summary["dev_baseline"]["loss"] == pytest.approx(math.log(2))  # balanced training classes
    top = max(r["accuracy"] for r in history)
    tied = [r for r in history if r["accuracy"] == top]
    kept = min(tied, key=lambda r: r["loss"])
    assert summary["best_step"] == kept["step"] and summary["best_dev"]["loss"] == kept["loss"]
    # accuracy reached 1.0 early and the loss went on falling (measured: 1.0 from step 15, loss 0.60 at 15,
    # 0.086 at 30): the first of equal scores, the old rule, would have kept an earlier model
    assert len(tied) > 1 and kept["step"] != tied[0]["step"]
    # the model in OUT is the one kept: it scores the recorded dev loss again
    out = os.path.join(tiny_data[3], "by-accuracy")
    model, tok, spec = load_for_inference(out)
    again = evaluate_examples(model, tok, spec, load_examples("classification", tiny_data[2], "dev", spec.data))
    assert again["loss"] == pytest.approx(kept["loss"], rel=1e-5)


def test_finetune_can_select_the_lowest_dev_loss(tiny_data):
    summary = run(tiny_data, "by-loss", select_metric="loss")
    assert summary["select_metric"] == "loss" and summary["tie_metric"] is None
    assert summary["best_dev"]["loss"] == min(r["loss"] for r in summary["dev_history"])
