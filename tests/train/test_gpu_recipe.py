"""The ten-minute GPU recipe (configs/pretrain-gpu-10min.toml): it parses to what docs/gpu-recipe.md
says, and the same file runs a few steps on the CPU with `--set` overrides that shrink it."""

from __future__ import annotations

import json
import os
import warnings

import pytest

from bertkit.commands.cli import main
from bertkit.data.corpus import NAMED_CORPORA, open_corpus
from bertkit.errors import DataError
from bertkit.recipes.pretrain import load_config

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
RECIPE = os.path.join(ROOT, "configs", "pretrain-gpu-10min.toml")

# The recipe at CPU-test size: the tiny modern encoder, 64-token rows, the first documents only.
SHRINK = ["model.preset=\"tiny\"", "model.local_attention=16", "tokenizer.vocab_size=800",
          "data.max_documents=60", "data.general_max_documents=120", "data.max_length=64",
          "data.max_eval_examples=8", "train.max_steps=4", "train.warmup_steps=1", "train.batch_size=4",
          "train.eval_every=4", "train.log_every=2", "train.precision=\"fp32\""]


def test_the_recipe_is_what_the_docs_say():
    cfg = load_config(RECIPE)
    assert cfg.model["model_type"] == "modernbert" and cfg.model["preset"] == "medium"
    assert cfg.data.builder == "packed" and cfg.data.mlm_probability == 0.3 and cfg.data.max_length == 512
    assert cfg.data.corpus == "bbc:train"  # the fine-tuning dev and test articles are never read
    assert all(name in NAMED_CORPORA for name in cfg.data.general_corpus.split("+"))
    assert (cfg.data.dedup, cfg.data.min_words, cfg.data.min_alpha_fraction) == (True, 3, 0.8)
    t = cfg.train
    assert (t.schedule, t.precision, t.max_minutes, t.batch_size) == ("wsd", "bf16", 7.5, 64)
    assert t.max_steps * t.batch_size * cfg.data.max_length == 196_608_000  # the tokens docs/gpu-recipe.md counts


def general_text_installed() -> bool:
    try:
        open_corpus(load_config(RECIPE).data.general_corpus)
        return True
    except DataError:
        return False


@pytest.mark.skipif(not general_text_installed(), reason="dict-gcide, python3-doc or linux-doc is not installed")
def test_the_recipe_runs_a_few_steps_on_the_cpu(tmp_path):
    out = tmp_path / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["pretrain", "--config", RECIPE, "--out", str(out), "--no-progress", "--device", "cpu",
                     "--set", *SHRINK]) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    final = [r for r in rows if r["split"] == "eval"][-1]
    assert final["step"] == 4 and "mlm_loss" in final and "general_mlm_loss" in final  # both held-out sets
    assert (out / "checkpoint-4" / "config.json").is_file()
    config = json.loads((out / "checkpoint-4" / "config.json").read_text())
    assert config["model_type"] == "modernbert"
    cleaning = json.loads((out / "cleaning.json").read_text())
    assert set(cleaning) == {"corpus", "general_corpus"}  # dedup and the filters ran on both
