"""Fine-tuning end to end on small real subsets: the model learns, the best model is kept, and
the saved directory gives the same predictions in bertkit and in `transformers`' Auto classes."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest
import torch

from bertkit.models.heads import BertForQuestionAnswering, BertForSequenceClassification
from bertkit.recipes.finetune import finetune
from bertkit.tasks import SUMMARY_FILE, Collator, builtin_splits, evaluate_examples, load_model, read_spec
from bertkit.tasks.qa import encode_qa
from bertkit.tasks.sequence import encode_texts
from bertkit.tokenizer import Tokenizer

from .helpers import make_tiny_model


def train_rows(out_dir: str) -> list[dict]:
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if r["split"] == "train"]


def summary_of(out_dir: str) -> dict:
    with open(os.path.join(out_dir, SUMMARY_FILE)) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def bbc_run(tmp_path_factory, minilm_dir):
    out = str(tmp_path_factory.mktemp("bbc") / "model")
    sections = {"data": {"max_length": 40, "max_train_examples": 160, "max_eval_examples": 60},
                "train": {"epochs": 2, "lr": 2e-4, "batch_size": 16, "log_every": 2, "patience": 3}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = finetune("classification", minilm_dir, "bbc", None, out, sections, progress=False)
    return out, summary


def test_classification_learns_bbc_topics(bbc_run):
    out, summary = bbc_run
    rows = train_rows(out)
    assert rows[-1]["loss"] < rows[0]["loss"] - 0.3
    # 5 topics: the majority class gets about a fifth; the model must do far better
    assert summary["dev_baseline"]["accuracy"] < 0.3
    assert summary["best_dev"]["accuracy"] >= 0.7
    assert summary["best_dev"]["accuracy"] == max(r["accuracy"] for r in summary["dev_history"])
    assert summary["labels"] == ["business", "entertainment", "politics", "sports", "tech"]
    files = set(os.listdir(out))
    assert {"model.safetensors", "config.json", "tokenizer.json", SUMMARY_FILE, "metrics.jsonl"} <= files
    assert not [n for n in files if n.startswith(("checkpoint-", ".best", ".tmp"))]
    with open(os.path.join(out, "config.json")) as f:
        config = json.load(f)
    assert config["id2label"]["3"] == "sports" and config["label2id"]["tech"] == 4
    assert config["architectures"] == ["BertForSequenceClassification"]


def test_saved_model_is_the_best_one_and_reloads_with_the_same_score(bbc_run):
    out, summary = bbc_run
    spec = read_spec(out)
    assert spec.task.name == "classification" and spec.data.max_length == 40
    model = load_model(out, spec.task)
    dev = builtin_splits("bbc")["dev"]
    from bertkit.tasks import subsample

    dev = subsample(dev, 60, summary["train_config"]["seed"] + 1)
    metrics = evaluate_examples(model, Tokenizer.from_pretrained(out), spec, dev)
    assert metrics["accuracy"] == pytest.approx(summary["best_dev"]["accuracy"])


def test_classifier_reloads_in_transformers_auto_class(bbc_run):
    transformers = pytest.importorskip("transformers")
    out, _ = bbc_run
    ours = BertForSequenceClassification.from_pretrained(out)
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(out).eval()
    assert theirs.config.id2label == ours.config.id2label
    tokenizer = Tokenizer.from_pretrained(out)
    texts = [e for e in builtin_splits("bbc")["test"][:6]]
    batch = Collator(tokenizer.pad_token_id)(encode_texts(tokenizer, texts, 40))
    with torch.no_grad():
        a = ours(**batch).logits
        b = theirs(**batch).logits
    torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    hf_tokens = transformers.AutoTokenizer.from_pretrained(out)(texts[0].text, truncation=True, max_length=40)
    assert hf_tokens["input_ids"] == batch["input_ids"][0][batch["attention_mask"][0] == 1].tolist()


@pytest.mark.slow
def test_qa_learns_on_wordnet_glosses(tmp_path, minilm2_dir):
    out = str(tmp_path / "qa")
    sections = {"data": {"max_length": 96, "doc_stride": 24, "max_answer_length": 64,
                         "max_train_examples": 120, "max_eval_examples": 40},
                "train": {"epochs": 3, "lr": 3e-4, "batch_size": 16, "log_every": 3}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = finetune("qa", minilm2_dir, "wordnet-qa", None, out, sections, progress=False)
    rows = train_rows(out)
    assert rows[-1]["loss"] < 0.6 * rows[0]["loss"]
    assert summary["spec"]["allow_no_answer"]  # the built-in set has SQuAD 2.0 no-answer questions
    assert {"exact", "f1", "HasAns_f1", "NoAns_exact"} <= set(summary["best_dev"])
    # beats answering the first sentence of the context
    assert summary["best_dev"]["f1"] > summary["dev_baseline"]["f1"]

    from bertkit.commands.cli import main

    questions = builtin_splits("wordnet-qa")["test"][:3]
    write_jsonl(tmp_path / "q.jsonl", [{"id": q.id, "question": q.question, "context": q.context} for q in questions])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["predict", "--model", out, "--input", str(tmp_path / "q.jsonl"),
                     "--output", str(tmp_path / "a.jsonl")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [q.id for q in questions]
    for q, r in zip(questions, rows):
        assert r["no_answer"] or q.context[r["start"]:r["end"]] == r["answer"] != ""

    transformers = pytest.importorskip("transformers")
    ours = BertForQuestionAnswering.from_pretrained(out)
    theirs = transformers.AutoModelForQuestionAnswering.from_pretrained(out).eval()
    tokenizer = Tokenizer.from_pretrained(out)
    features = encode_qa(tokenizer, builtin_splits("wordnet-qa")["test"][:4], 96, 24)
    batch = Collator(tokenizer.pad_token_id)(features)
    with torch.no_grad():
        a, b = ours(**batch), theirs(**batch)
    torch.testing.assert_close(a.start_logits, b.start_logits, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(a.end_logits, b.end_logits, atol=1e-4, rtol=1e-4)


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def test_regression_and_multilabel_pairs_run_and_reload(tmp_path):
    """Regression on pairs (Pearson/Spearman) and multi-label (BCE, micro-F1): a few steps."""
    rng = np.random.default_rng(0)
    words = "market film vote match chip bank actor party goal phone".split()
    rows = []
    for i in range(48):
        a, b = rng.choice(words, 4), rng.choice(words, 4)
        rows.append({"text": " ".join(a), "text_pair": " ".join(b),
                     "score": float(len(set(a) & set(b))), "tags": sorted({w for w in a if w in words[:5]}) or ["none"]})
    tiny = make_tiny_model(tmp_path / "tiny", [r["text"] + " " + r["text_pair"] for r in rows])
    write_jsonl(tmp_path / "train.jsonl", rows[:40])
    write_jsonl(tmp_path / "dev.jsonl", rows[40:])
    common = {"max_length": 16, "pair_column": "text_pair"}
    train = {"max_steps": 4, "batch_size": 8, "lr": 1e-3}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg = finetune("regression", tiny, str(tmp_path / "train.jsonl"), str(tmp_path / "dev.jsonl"),
                       str(tmp_path / "reg"), {"data": {**common, "label_column": "score"}, "train": train},
                       progress=False)
        multi = finetune("classification", tiny, str(tmp_path / "train.jsonl"),
                         str(tmp_path / "dev.jsonl"), str(tmp_path / "multi"),
                         {"data": {**common, "label_column": "tags"}, "train": train}, progress=False)
    assert reg["spec"]["task"] == "regression" and reg["select_metric"] == "mse"
    assert {"pearson", "spearman", "mse"} <= set(reg["best_dev"])
    assert multi["spec"]["task"] == "multi-label-classification" and multi["select_metric"] == "micro_f1"
    assert "none" in multi["labels"]
    model = BertForSequenceClassification.from_pretrained(tmp_path / "multi")
    assert model.config.problem_type == "multi_label_classification"
    assert BertForSequenceClassification.from_pretrained(tmp_path / "reg").config.num_labels == 1


def test_a_new_multi_label_head_starts_at_the_label_frequencies(tmp_path, monkeypatch):
    """From p = 0.5 for every label, MiniLM on 20 GCIDE subject fields (6.7% held per row) ended 6
    epochs giving every text the same probabilities (micro-F1 0, walk Y); the head's bias starts at
    each label's log-odds in the training rows, so the first predictions are the label frequencies."""
    from bertkit.recipes import finetune as finetune_recipe

    texts = [f"market film vote {i}" for i in range(24)]
    sets = [["common"] + (["rare"] if i % 8 == 1 else []) if i % 4 else [] for i in range(24)]
    tiny = make_tiny_model(tmp_path / "tiny", texts)
    write_jsonl(tmp_path / "train.jsonl", [{"text": t, "label": s} for t, s in zip(texts[:16], sets[:16])])
    write_jsonl(tmp_path / "dev.jsonl", [{"text": t, "label": s} for t, s in zip(texts[16:], sets[16:])])
    built = []
    real = finetune_recipe.build_model
    monkeypatch.setattr(finetune_recipe, "build_model", lambda *a, **k: built.append(real(*a, **k)) or built[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        finetune("classification", tiny, str(tmp_path / "train.jsonl"), str(tmp_path / "dev.jsonl"),
                 str(tmp_path / "multi"), {"data": {"max_length": 16}, "train": {"max_steps": 1, "batch_size": 8}},
                 progress=False)
    labels = [built[0].config.id2label[i] for i in range(2)]
    held = {"common": 12, "rare": 2}  # of the 16 training rows
    start = [np.log((held[name] + 0.5) / (16 + 1 - held[name] - 0.5)) for name in labels]
    assert built[0].config.problem_type == "multi_label_classification"
    assert built[0].classifier.bias.detach().numpy() == pytest.approx(start, abs=0.05)  # one small step moved it


def test_a_new_regression_head_starts_at_the_training_mean(tmp_path, monkeypatch):
    """Targets far from 0 (word counts, mean 22) left a short run at a near-constant output far
    below them; the head's bias starts at the training mean, as transformers reads it."""
    from bertkit.recipes import finetune as finetune_recipe

    texts = [" ".join(["market film vote"] * (1 + i % 5)) for i in range(24)]
    rows = [{"text": text, "label": 100.0 + len(text.split())} for text in texts]
    tiny = make_tiny_model(tmp_path / "tiny", texts)
    write_jsonl(tmp_path / "train.jsonl", rows[:16])
    write_jsonl(tmp_path / "dev.jsonl", rows[16:])
    built = []
    real = finetune_recipe.build_model
    monkeypatch.setattr(finetune_recipe, "build_model", lambda *a, **k: built.append(real(*a, **k)) or built[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        finetune("regression", tiny, str(tmp_path / "train.jsonl"), str(tmp_path / "dev.jsonl"), str(tmp_path / "reg"),
                 {"data": {"max_length": 16}, "train": {"max_steps": 1, "batch_size": 8}}, progress=False)
    mean = float(np.mean([r["label"] for r in rows[:16]]))
    assert built and abs(built[0].classifier.bias.item() - mean) < 1.0  # one step of lr 2e-5-ish moved it a little
    saved = BertForSequenceClassification.from_pretrained(tmp_path / "reg")
    with torch.no_grad():
        out = saved(torch.tensor([[2, 5, 3]])).logits.item()
    assert abs(out - mean) < 5.0  # not about 0
