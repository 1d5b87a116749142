"""train.report_to = "tensorboard": the logged rows read back from the event file with
TensorBoard's own reader equal metrics.jsonl; without the package, a clear error naming the pip line."""

import json
import shutil
import sys

import pytest
import torch
from helpers import tiny_config

from bertkit.errors import ConfigError
from bertkit.models.heads import BertForMaskedLM
from bertkit.recipes.finetune import build_recipe, section_keys
from bertkit.train import Trainer, TrainConfig
from bertkit.settings.config_io import apply_overrides

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


def tiny_batches(n=4, vocab=40, length=8):
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (n, 2, length), generator=gen)
    return [{"input_ids": x, "attention_mask": torch.ones_like(x), "labels": x} for x in ids]


def run(out, steps, resume=False, **overrides):
    torch.manual_seed(0)
    cfg = TrainConfig(max_steps=steps, lr=1e-3, batch_size=2, log_every=1, eval_every=2, save_every=2,
                      device="cpu", report_to="tensorboard", **overrides)
    model = BertForMaskedLM(tiny_config(40, dropout=0.0))
    trainer = Trainer(model, tiny_batches(), cfg, out_dir=str(out), progress=False,
                      eval_fn=lambda m: {"probe": float(m.bert.embeddings.word_embeddings.weight.norm())})
    trainer.train(resume=resume)


def scalars(out, tag):
    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)]


def test_event_file_holds_the_logged_loss_and_evaluations(tmp_path):
    run(tmp_path, 4)
    rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    train = [(r["step"], r["loss"]) for r in rows if r["split"] == "train"]
    logged = scalars(tmp_path, "train/loss")
    assert [s for s, _ in logged] == [s for s, _ in train] == [1, 2, 3, 4]
    assert [v for _, v in logged] == pytest.approx([v for _, v in train], rel=1e-6)  # stored as float32
    evals = [(r["step"], r["probe"]) for r in rows if r["split"] == "eval"]
    assert [(s, pytest.approx(v, rel=1e-6)) for s, v in scalars(tmp_path, "eval/probe")] == evals
    assert len(scalars(tmp_path, "train/lr")) == 4


def test_resume_drops_the_events_past_the_checkpoint(tmp_path):
    run(tmp_path, 4)
    shutil.rmtree(tmp_path / "checkpoint-4")  # as if killed after logging step 4, before its checkpoint
    run(tmp_path, 4, resume=True)  # from checkpoint-2: steps 3 and 4 again
    rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    logged = scalars(tmp_path, "train/loss")
    assert [s for s, _ in logged] == [1, 2, 3, 4]  # no duplicates of 3 and 4
    assert [v for _, v in logged] == pytest.approx([r["loss"] for r in rows if r["split"] == "train"], rel=1e-6)


def test_report_to_is_checked():
    assert TrainConfig().report_to == "none"
    with pytest.raises(ConfigError, match="train.report_to 'wandb' is not known; use one of none, tensorboard"):
        TrainConfig(report_to="wandb")
    recipe = build_recipe(apply_overrides({}, ["train.report_to=tensorboard"], section_keys()))
    assert recipe.train.report_to == "tensorboard"


def test_without_the_package_the_error_names_the_pip_line(monkeypatch):
    for name in list(sys.modules):
        if name == "tensorboard" or name.startswith(("tensorboard.", "torch.utils.tensorboard")):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # import tensorboard now fails
    with pytest.raises(ConfigError, match=r"needs the tensorboard package: pip install tensorboard"):
        TrainConfig(report_to="tensorboard")
