"""The user-registered objective of docs/objectives.md, run exactly as the page shows it: the code
block is read from the page, saved as a module and named in data.objective_module."""

import json
import math
import os
import re
import shutil

import pytest

from bertkit.commands import cli
ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
DOC = os.path.join(ROOT, "docs", "objectives.md")
CONFIG = os.path.join(ROOT, "configs", "pretrain-tiny-bert.toml")  # the example builds a BERT
SMALL = ["data.max_documents=40", "tokenizer.vocab_size=1000", "data.max_length=32",
         "model.max_position_embeddings=32", "model.hidden_size=64", "model.intermediate_size=128",
         "train.batch_size=16", "train.lr=2e-3", "train.warmup_steps=2", "train.log_every=5",
         "train.eval_every=15", "train.save_every=15", "data.max_eval_examples=64", "train.max_steps=30"]


def doc_module(tmp_path) -> str:
    """The page's `my_objectives.py` block, written to a file; returns its path."""
    blocks = re.findall(r"```python\n(.*?)```", open(DOC, encoding="utf-8").read(), flags=re.S)
    code = [b for b in blocks if b.startswith("# my_objectives.py")]
    assert len(code) == 1, "docs/objectives.md must hold one ```python block starting '# my_objectives.py'"
    path = tmp_path / "my_objectives.py"
    path.write_text(code[0], encoding="utf-8")
    return str(path)


def test_the_documented_objective_registers_trains_and_resumes(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("bertkit.train.trainer.Trainer.plot", lambda self: None)  # PNGs: 3/4 of the time, not tested here
    module = doc_module(tmp_path)
    out = tmp_path / "run"
    argv = ["pretrain", "--config", CONFIG, "--out", str(out), "--no-progress", "--seed", "0",
            "--set", "data.objective=first-letter", f"data.objective_module={module}", *SMALL]
    assert cli.main(argv) == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in open(out / "metrics.jsonl")]
    train = [r["loss"] for r in rows if r["split"] == "train"]
    evals = [r for r in rows if r["split"] == "eval"]
    # 27 classes: an untrained model scores about ln 27 = 3.30. In 30 steps it learns how often
    # each letter starts a masked piece (measured: 2.9-3.0, where MLM's frequency plateau is too)
    assert train[0] > 3.1 and max(train[-2:]) < train[0] - 0.2, train
    assert evals[-1]["letter_loss"] < math.log(27) - 0.2, evals
    assert 1.5 / 27 < evals[-1]["letter_accuracy"] <= 1.0  # above chance
    assert not (out / "baseline.json").exists()  # its labels are letters, not token ids
    saved = json.load(open(out / "checkpoint-30" / "config.json"))
    assert saved["architectures"] == ["FirstLetterModel"]
    assert json.load(open(out / "pretrain_config.json"))["data"]["objective_module"] == module

    # --resume from step 15 repeats the uninterrupted run's step 30 (the collator state is saved)
    resumed = tmp_path / "resumed"
    shutil.copytree(out, resumed)
    shutil.rmtree(resumed / "checkpoint-30")
    argv[argv.index(str(out))] = str(resumed)
    assert cli.main(argv + ["--resume"]) == 0, capsys.readouterr().err
    again = [json.loads(line) for line in open(resumed / "metrics.jsonl")]
    assert again[-1]["step"] == 30 and again[-1]["letter_loss"] == pytest.approx(evals[-1]["letter_loss"], rel=1e-5)
