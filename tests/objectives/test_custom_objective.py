"""The user-registered objective of docs/objectives.md, run exactly as the page shows it: the code
block is read from the page, saved as a module and named in data.objective_module."""

import json
import math
import os
import re
import shutil
import sys

import pytest

from bertkit.commands import cli
from bertkit.objectives import OBJECTIVES
from bertkit.recipes.pretrain import load_config

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
    # walk X: fill-mask said to use "a masked-LM checkpoint such as one from bertkit pretrain", which this is
    assert cli.main(["fill-mask", "--model", str(out / "checkpoint-30"), "the [MASK] ran"]) == 2
    assert "has no trained MLM head (cls.predictions.bias ...) (its config.json names FirstLetterModel, " \
           "not a masked-LM model); fill-mask needs" in capsys.readouterr().err


def test_an_objective_is_one_module_plus_one_registry_line_in_a_package_of_its_own(tmp_path, capsys, monkeypatch):
    # issue 27's done-when: the documented module, unchanged, as a module of a temporary package on
    # the Python path (named by its dotted name), holds the whole objective and exactly one
    # registry line; `bertkit pretrain` trains it with no file of bertkit changed
    monkeypatch.setattr("bertkit.train.trainer.Trainer.plot", lambda self: None)
    code = open(doc_module(tmp_path), encoding="utf-8").read()
    assert len(re.findall(r"^register_objective\(", code, flags=re.M)) == 1
    package = tmp_path / "user_objectives"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "first_letter.py").write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "user_objectives.first_letter", raising=False)
    assert "first-letter" not in OBJECTIVES
    out = tmp_path / "run"
    small = [s for s in SMALL if not s.startswith(("train.max_steps", "train.eval_every", "train.save_every"))]
    argv = ["pretrain", "--config", CONFIG, "--out", str(out), "--no-progress", "--seed", "0", "--set",
            "data.objective=first-letter", "data.objective_module=user_objectives.first_letter", *small,
            "train.max_steps=6", "train.eval_every=6", "train.save_every=6"]
    try:
        assert cli.main(argv) == 0, capsys.readouterr().err
    finally:
        sys.modules.pop("user_objectives.first_letter", None)
        sys.modules.pop("user_objectives", None)
    evals = [json.loads(line) for line in open(out / "metrics.jsonl") if '"eval"' in line]
    assert evals and math.isfinite(evals[-1]["letter_loss"])
    assert json.load(open(out / "checkpoint-6" / "config.json"))["architectures"] == ["FirstLetterModel"]


def test_the_documented_objective_on_a_modern_recipe_is_refused_before_any_work(tmp_path, capsys):
    """walk V D3: the page's objective (a BertModel) on the default modern recipe died with an
    AttributeError traceback after the tokenizer and shards were built; its model_type="bert" now
    refuses the recipe as the config is read."""
    out = tmp_path / "run"
    modern = os.path.join(ROOT, "configs", "pretrain-tiny.toml")
    argv = ["pretrain", "--config", modern, "--out", str(out), "--no-progress",
            "--set", "data.objective=first-letter", f"data.objective_module={doc_module(tmp_path)}"]
    assert cli.main(argv) == 2
    assert "trains a model_type \"bert\" model (got 'modernbert'): use a recipe of that family, or set " \
           "model.model_type = \"bert\"" in capsys.readouterr().err
    assert not out.exists()


def test_an_objective_registered_without_model_type_is_refused_before_any_work_where_it_cannot_build(tmp_path,
                                                                                                       capsys):
    """Session 30: the page's objective registered without model_type="bert", on the modern recipe, died
    with an AttributeError traceback after the tokenizer and shards were built. Its module is now built
    once (on the meta device) as the config is read: the error names the objective, the config's family
    and the fix; on a BERT recipe, which its BertModel reads, it is accepted."""
    code = open(doc_module(tmp_path), encoding="utf-8").read()
    registration = 'model_type="bert", '
    assert registration in code, "the page's registration line changed: update this test"
    path = tmp_path / "untyped_objectives.py"
    path.write_text(code.replace(registration, "").replace('"first-letter"', '"first-letter-untyped"'),
                    encoding="utf-8")
    out = tmp_path / "run"
    modern = os.path.join(ROOT, "configs", "pretrain-tiny.toml")
    argv = ["pretrain", "--config", modern, "--out", str(out), "--no-progress",
            "--set", "data.objective=first-letter-untyped", f"data.objective_module={path}"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "data.objective = \"first-letter-untyped\" cannot build its model from this recipe's 'modernbert' config " \
           "(AttributeError: 'ModernBertConfig' object has no attribute" in err
    assert "Objective(..., model_type=\"bert\") for a BertModel) and pre-train with a recipe of that family " \
           "(configs/pretrain-tiny-bert.toml), or set model.model_type" in err and "Traceback" not in err
    assert not out.exists()  # refused before the tokenizer, the shards or OUT
    cfg = load_config(CONFIG, [f"data.objective_module={path}", "data.objective=first-letter-untyped"])
    assert cfg.objective.model_type is None  # BERT's config: its module builds, nothing refused


def test_the_documented_objective_refuses_a_misspelt_early_stopping_metric_before_any_work(tmp_path, capsys):
    """Walk X: the page's registration named no `metrics`, so `early_stopping.metric=letter_acc`
    was refused only at the first evaluation, after the tokenizer, the shards and eval_every steps."""
    out = tmp_path / "run"
    argv = ["pretrain", "--config", CONFIG, "--out", str(out), "--no-progress", "--set", "data.objective=first-letter",
            f"data.objective_module={doc_module(tmp_path)}", "early_stopping.patience=2",
            "early_stopping.metric=letter_acc"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "early_stopping.metric 'letter_acc' is not a held-out metric" in err and "letter_accuracy" in err
    assert not out.exists()
