"""The commands end to end on a few BBC articles: tokenizer train, pretrain (+ resume), fill-mask."""

import json
import os

import pytest

from tests.cli_checks import run_command
from bertkit.train import list_checkpoints

CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "pretrain-tiny.toml")
BERT_CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "pretrain-tiny-bert.toml")  # segments: NSP
SMALL = ["data.max_documents=40", "tokenizer.vocab_size=1000", "data.max_length=32",
         "model.max_position_embeddings=32", "model.hidden_size=64", "model.intermediate_size=128",
         "train.batch_size=16", "train.lr=1e-3", "train.warmup_steps=2", "train.log_every=2", "train.eval_every=4",
         "train.save_every=4", "data.max_eval_examples=32"]


def sets(items):
    return [x for item in items for x in ("--set", item)]


def test_pretrain_resume_and_fill_mask(tmp_path, capsys):
    out = str(tmp_path / "run")
    args = ["--config", CONFIG, "--out", out, "--no-progress", *sets(SMALL)]
    assert run_command("pretrain", args + sets(["train.max_steps=4"])) == 0
    # Continue the same run to 8 steps: resume picks up checkpoint-4.
    assert run_command("pretrain", args + sets(["train.max_steps=8"]) + ["--resume"]) == 0
    rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    assert [r["step"] for r in rows if r["split"] == "train"] == [2, 4, 6, 8]
    # the extended run follows the new 8-step schedule (not the finished 4-step one)
    assert [r["lr"] for r in rows if r["step"] == 6 and r["split"] == "train"][0] == pytest.approx(1e-3 * 3 / 6)
    evals = [r for r in rows if r["split"] == "eval"]
    assert {"mlm_loss", "mlm_accuracy", "perplexity"} <= set(evals[-1])
    assert evals[-1]["perplexity"] == pytest.approx(2.718281828 ** evals[-1]["mlm_loss"], rel=1e-6)
    assert [s for s, _ in list_checkpoints(out)] == [4, 8]
    capsys.readouterr()

    model_dir = os.path.join(out, "checkpoint-8")
    assert run_command("fill-mask", ["--model", model_dir, "the [MASK] said on monday", "--top-k", "3"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "mask 1:" and len(printed) == 4
    probs = [float(line.split()[-1]) for line in printed[1:]]
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1
    assert run_command("fill-mask", ["--model", model_dir, "no mask here"]) == 2
    assert "no [MASK]" in capsys.readouterr().err


def test_pretrain_rejects_typos_and_nsp_runs(tmp_path, capsys):
    out = str(tmp_path / "nsp")
    assert run_command("pretrain", ["--config", BERT_CONFIG, "--out", out, "--set", "train.max_step=3"]) == 2
    assert "did you mean train.max_steps?" in capsys.readouterr().err
    # one --set takes many values, and may repeat; --seed N is --set train.seed=N
    args = ["--config", BERT_CONFIG, "--out", out, "--no-progress", "--seed", "5", "--set", *SMALL,
            "data.objective=mlm+sop", "--set", "train.max_steps=2", "train.eval_every=2"]
    assert run_command("pretrain", args) == 0
    rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    assert "sop_accuracy" in rows[-1]
    saved = json.load(open(os.path.join(out, "pretrain_config.json")))
    assert (saved["train"]["seed"], saved["train"]["max_steps"], saved["data"]["objective"]) == (5, 2, "mlm+sop")
    assert json.load(open(os.path.join(out, "checkpoint-2", "config.json")))["architectures"] == ["BertForPreTraining"]


def test_tokenizer_train_command(tmp_path, bbc_dir, capsys):
    from helpers import bbc_files

    out = str(tmp_path / "tok")
    assert run_command("tokenizer", ["train", "--files", *bbc_files(bbc_dir, 10), "--vocab-size", "300", "--out", out]) == 0
    assert os.path.exists(os.path.join(out, "tokenizer.json"))
    assert "300 tokens" in capsys.readouterr().out
