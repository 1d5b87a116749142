"""Every command that runs a model runs with --device cuda (precision auto: bf16 where the GPU has it):
pretrain (BERT and the modern encoder), finetune, evaluate, predict, embed, fill-mask, attention."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest

from bertkit.commands.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = ["data.max_documents=12", "tokenizer.vocab_size=300", "data.max_length=32", "model.hidden_size=64",
         "model.intermediate_size=128", "model.num_hidden_layers=2", "model.num_attention_heads=2",
         "train.batch_size=8", "train.warmup_steps=1", "train.log_every=1", "train.eval_every=4",
         "train.save_every=4", "data.max_eval_examples=8", "train.max_steps=8"]
TEXTS = [("the striker scored a late goal in the match", "sport"), ("the bank cut interest rates", "business"),
         ("a late goal won the cup final", "sport"), ("shares fell as rates rose again", "business")]


def run(argv, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-2000:]
    return captured.out, captured.err


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """A tiny BERT pre-trained on the GPU (absolute positions: the packed path runs)."""
    out = tmp_path_factory.mktemp("bert") / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["pretrain", "--config", os.path.join(ROOT, "configs", "pretrain-tiny-bert.toml"), "--out",
                     str(out), "--no-progress", "--device", "cuda", "--set", *SMALL,
                     'model.position_embedding_type="absolute"'])
    assert code == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert {r["precision"] for r in rows if r["split"] == "train"} <= {"bf16", "fp16"}
    return max(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))


def test_modern_pretrain_on_cuda(tmp_path, capsys):
    run(["pretrain", "--config", os.path.join(ROOT, "configs", "pretrain-tiny.toml"), "--out", tmp_path / "m",
         "--no-progress", "--device", "cuda", "--set", *SMALL, "model.local_attention=16"], capsys)


def test_inference_commands_on_cuda(pretrained, tmp_path, capsys):
    out, err = run(["fill-mask", "--model", pretrained, "the [MASK] scored", "--device", "cuda"], capsys)
    assert "mask 1:" in out and "running on cuda" in err
    (tmp_path / "in.txt").write_text("\n".join(t for t, _ in TEXTS) + "\n", encoding="utf-8")
    run(["embed", "--model", pretrained, "--input", tmp_path / "in.txt", "--output", tmp_path / "e.npy",
         "--device", "cuda"], capsys)
    assert np.isfinite(np.load(tmp_path / "e.npy")).all()
    run(["attention", "the striker scored", "--model", pretrained, "--device", "cuda", "--stats",
         tmp_path / "s.jsonl"], capsys)


def test_finetune_evaluate_predict_on_cuda(pretrained, tmp_path, capsys):
    data = tmp_path / "train.csv"
    data.write_text("text,label\n" + "".join(f"{t},{label}\n" for t, label in TEXTS * 6), encoding="utf-8")
    model = tmp_path / "clf"
    run(["finetune", "--task", "classification", "--model", pretrained, "--train", data, "--dev", data,
         "--out", model, "--no-progress", "--device", "cuda", "--set", "train.max_steps=6", "train.batch_size=8",
         "data.max_length=16"], capsys)
    out, _ = run(["evaluate", "--model", model, "--data", data, "--device", "cuda"], capsys)
    assert "accuracy" in json.loads(out.strip().splitlines()[-1])
    (tmp_path / "in.txt").write_text("a late goal\nrates rose\n", encoding="utf-8")
    run(["predict", "--model", model, "--input", tmp_path / "in.txt", "--output", tmp_path / "p.jsonl",
         "--device", "cuda"], capsys)
    assert len((tmp_path / "p.jsonl").read_text().splitlines()) == 2


def test_embedding_finetune_evaluate_predict_on_cuda(pretrained, tmp_path, capsys):
    """The sentence model trains in bf16 on the GPU (the loss in fp32), scores by ranking, and
    predict gives one finite vector per line."""
    pairs = [(a, b) for (a, _), (b, _) in zip(TEXTS, TEXTS[1:] + TEXTS[:1])]
    data = tmp_path / "pairs.csv"
    data.write_text("text,positive\n" + "".join(f"{a},{b}\n" for a, b in pairs * 3), encoding="utf-8")
    model = tmp_path / "emb"
    run(["finetune", "--task", "embedding", "--model", pretrained, "--train", data, "--dev", data, "--out", model,
         "--no-progress", "--device", "cuda", "--set", "train.max_steps=4", "train.batch_size=4",
         "data.max_length=16"], capsys)
    rows = [json.loads(line) for line in (model / "metrics.jsonl").read_text().splitlines()]
    assert {r["precision"] for r in rows if r["split"] == "train"} <= {"bf16", "fp16"}
    assert all(np.isfinite(r["loss"]) for r in rows if r["split"] == "train")
    out, _ = run(["evaluate", "--model", model, "--data", data, "--device", "cuda"], capsys)
    assert 0 < json.loads(out.strip().splitlines()[-1])["mrr@10"] <= 1
    (tmp_path / "in.txt").write_text("a late goal\nrates rose\n", encoding="utf-8")
    run(["predict", "--model", model, "--input", tmp_path / "in.txt", "--output", tmp_path / "p.jsonl",
         "--device", "cuda"], capsys)
    vectors = [json.loads(line)["embedding"] for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(vectors) == 2 and np.isfinite(vectors).all()
