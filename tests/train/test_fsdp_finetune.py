"""`bertkit finetune --set train.strategy=fsdp` under the real torchrun: two gloo processes, each
holding half of every parameter, train the classifier one process trains on the same batches (the
two ranks' batches as two accumulated micro-batches), with layer-wise lr decay and clipping on;
rank 0 evaluates, keeps the best model and publishes the files one process publishes."""

import json
import os

import pytest
import torch

from bertkit.models.checkpoint import read_state_dict
from tests.tasks.helpers import make_tiny_model
from tests.test_bad_inputs import assert_refused
from tests.train.test_ddp_finetune import TEXTS, torchrun, write_csv


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("fsdp-finetune")
    model = make_tiny_model(root / "tiny", [t.format(i) for ts in TEXTS.values() for t in ts for i in range(3)])
    return root, model, write_csv(root / "train.csv", 16), write_csv(root / "dev.csv", 6)


def finetune_args(model, train, dev, out, *settings):
    # no dropout: the ranks draw other masks than one process would; grad_clip 0.05 binds
    return ["finetune", "--task", "classification", "--model", model, "--train", train, "--dev", dev, "--out", out,
            "--no-progress", "--device", "cpu", "--set", "train.epochs=1", "train.batch_size=4", "train.lr=1e-3",
            "data.max_length=16", "train.llrd=0.8", "train.grad_clip=0.05", "model.hidden_dropout_prob=0",
            "model.attention_probs_dropout_prob=0", "model.classifier_dropout=0", *settings]


@pytest.mark.slow
def test_two_fsdp_processes_train_the_one_process_classifier(setup):
    root, model, train, dev = setup
    single, fsdp = str(root / "single"), str(root / "fsdp")
    torchrun(root, finetune_args(model, train, dev, fsdp, "train.strategy=fsdp"))
    from bertkit.commands.cli import main

    assert main(finetune_args(model, train, dev, single, "train.grad_accum=2")) == 0

    # the published directory holds the same files, a full model.safetensors among them
    assert sorted(os.listdir(fsdp)) == sorted(os.listdir(single))
    runs = {run: json.load(open(os.path.join(run, "finetune_summary.json"))) for run in (fsdp, single)}
    assert runs[fsdp]["steps"] == runs[single]["steps"] == 4  # 32 examples, 4 per rank and step, 2 ranks
    assert runs[fsdp]["train_config"]["strategy"] == "fsdp"  # the option reached the Trainer
    for name, value in runs[single]["best_dev"].items():
        assert runs[fsdp]["best_dev"][name] == pytest.approx(value, abs=1e-5), name
    weights = {run: read_state_dict(run) for run in (fsdp, single)}
    initial = read_state_dict(model)
    assert set(weights[fsdp]) == set(weights[single])
    for name, value in weights[single].items():
        torch.testing.assert_close(weights[fsdp][name], value, atol=1e-5, rtol=0, msg=name)
    moved = max(float((weights[single][f"bert.{n}"] - v).abs().max()) for n, v in initial.items())
    assert moved > 1e-4  # the encoder did train
    losses = [[row["loss"] for row in map(json.loads, open(os.path.join(run, "metrics.jsonl"))) if "loss" in row
               and row["split"] == "train"] for run in (fsdp, single)]
    assert losses[0] == pytest.approx(losses[1], abs=1e-5)


def test_fsdp_without_torchrun_is_refused_before_any_work(setup, capsys, monkeypatch):
    root, model, train, dev = setup
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    out = root / "alone"
    assert_refused(finetune_args(model, train, dev, str(out), "train.strategy=fsdp"), capsys, root,
                   'train.strategy = "fsdp"', "torchrun --nproc_per_node")
    assert not out.exists()


def test_transformers_fsdp_option_names_the_bertkit_key():
    from bertkit.errors import ConfigError
    from bertkit.recipes.finetune import build_recipe

    with pytest.raises(ConfigError, match="train.fsdp is transformers' TrainingArguments name; in bertkit use "
                                          'train.strategy = "fsdp"'):
        build_recipe({"train": {"fsdp": "full_shard auto_wrap"}})
