"""The ten-minute GPU recipe (configs/pretrain-gpu-10min.toml): it parses to what docs/gpu-recipe.md
says, and scripts/gpu_recipe_check.sh runs the same file a few steps on the CPU with `--set`
overrides that shrink it, fine-tunes and prints the table."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bertkit.data.corpus import NAMED_CORPORA, open_corpus
from bertkit.errors import DataError
from bertkit.recipes.pretrain import load_config

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
RECIPE = os.path.join(ROOT, "configs", "pretrain-gpu-10min.toml")

def test_the_recipe_is_what_the_docs_say():
    cfg = load_config(RECIPE)
    assert cfg.model["model_type"] == "modernbert" and cfg.model["preset"] == "medium"
    assert cfg.data.builder == "packed" and cfg.data.mlm_probability == 0.3 and cfg.data.max_length == 512
    assert cfg.data.corpus == "bbc:train"  # the fine-tuning dev and test articles are never read
    assert all(name in NAMED_CORPORA for name in cfg.data.general_corpus.split("+"))
    assert (cfg.data.dedup, cfg.data.min_words, cfg.data.min_alpha_fraction) == (True, 3, 0.8)
    t = cfg.train
    assert (t.schedule, t.precision, t.max_minutes, t.batch_size) == ("wsd", "auto", 7.0, 64)
    assert (t.schedule_over, t.warmup_ratio) == ("minutes", 0.05)  # the schedule fits the budget on any GPU


def general_text_installed() -> bool:
    try:
        open_corpus(load_config(RECIPE).data.general_corpus)
        return True
    except DataError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not general_text_installed(), reason="dict-gcide, python3-doc or linux-doc is not installed")
def test_the_check_script_runs_the_recipe_shrunk_on_the_cpu(tmp_path):
    """`gpu_recipe_check.sh smoke`: the recipe with `--set` overrides that shrink it (the tiny
    encoder, 64-token rows, the first documents), 4 steps on the CPU, one fine-tuning seed, the table,
    then two ablation rows of about a second each from the run's tokenizer and shards."""
    out = tmp_path / "out"
    returned = tmp_path / "device-out"  # the device tool's $OUT: only what lies there comes back
    env = {**os.environ, "RESULTS": str(out), "SEEDS": "0", "PY": sys.executable, "OMP_NUM_THREADS": "1",
           "OUT": str(returned)}
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu_recipe_check.sh"), "smoke"], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    run = out / "pretrain"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    final = [r for r in rows if r["split"] == "eval"][-1]
    assert final["step"] == 4 and "mlm_loss" in final and "general_mlm_loss" in final  # both held-out sets
    assert json.loads((run / "checkpoint-4" / "config.json").read_text())["model_type"] == "modernbert"
    cleaning = json.loads((run / "cleaning.json").read_text())
    assert set(cleaning) == {"corpus", "general_corpus"}  # dedup and the filters ran on both
    result = json.loads((out / "gpu_recipe.json").read_text())
    assert result["pretraining"]["steps"] == 4 and result["pretraining"]["passes_shards"] > 0
    assert [s["seed"] for s in result["finetuning"]] == [0] and 0 <= result["finetuning"][0]["test"] <= 1
    assert "| seed 0 |" in proc.stdout and "TF-IDF" in proc.stdout
    loader = json.loads((out / "loader.json").read_text())  # the loader alone, timed beside the seeds
    assert loader["packing_efficiency"] >= 0.99 and loader["load_tokens_per_s"] > 0
    assert "LOADER load" in proc.stdout
    ablation = json.loads((out / "ablation" / "ablation.json").read_text())  # `ablate`, from the run's shards
    assert [r["row"] for r in ablation] == ["base", "lr-2e-3"] and all(r["steps"] > 0 for r in ablation)
    assert "| lr-2e-3 |" in (out / "ablation.md").read_text()
    kept = {str(p.relative_to(returned / "results")) for p in returned.rglob("*") if p.is_file()}
    assert {"gpu_recipe.json", "table.md", "pretrain.log", "pretrain/metrics.jsonl", "ablation.md"} <= kept
    assert not any("checkpoint-" in name or name.endswith((".safetensors", ".bin", ".npy", ".pt")) for name in kept)
