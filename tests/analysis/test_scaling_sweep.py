"""The sweep recipe on the modern encoder: N counted right (against the real models), each
size's config, the default recipe, the learning curve read back from a run."""

import json

import pytest
import torch

from bertkit.errors import ConfigError
from bertkit.models.modern.heads import ModernBertForMaskedLM
from bertkit.recipes.scaling_sweep import (SWEEP_DEFAULTS, base_config, calibrate, layer_stack, learning_curve,
                                           non_embedding_params, parse_sizes, plan_sweep, run_config, spec_params)

SIZES = parse_sizes("1x16,2x64,3x96x2,4x128x4")


def _count(model) -> int:
    return sum(p.numel() for p in layer_stack(model).parameters())


@pytest.mark.parametrize("spec", SIZES, ids=lambda s: f"{s['layers']}x{s['hidden']}")
def test_modern_non_embedding_params_match_the_model(spec):
    from bertkit.recipes.pretrain import build_model

    cfg = base_config(None)
    model = build_model(run_config(cfg, spec, 1), 500)
    assert isinstance(model, ModernBertForMaskedLM)
    assert model.config.intermediate_size == spec["hidden"] * 3 // 2  # the modern presets' GeGLU width
    assert spec_params(cfg, spec) == _count(model)
    # and by hand for one layer of width 16 (GeGLU width 24, no biases, no attention norm in layer 0)
    if spec["hidden"] == 16:
        assert _count(model) == 16 * 48 + 16 * 16 + 16 * 48 + 24 * 16 + 16
    # N leaves out the embeddings and the MLM head, which the total counts
    assert _count(model) < sum(p.numel() for p in model.parameters())


def test_bert_non_embedding_params_match_the_model():
    from bertkit.recipes.pretrain import build_model, parse_config

    # BERT's layer (biases, 4 H feed-forward) through the same sweep code, via a recipe without model_type
    cfg = parse_config(json.loads(json.dumps({**SWEEP_DEFAULTS, "model": {"preset": "tiny"}})))
    for spec in SIZES:
        model = build_model(run_config(cfg, spec, 1), 500)
        assert model.config.intermediate_size == 4 * spec["hidden"]
        assert spec_params(cfg, spec) == _count(model) == non_embedding_params(
            spec["layers"], spec["hidden"], 4 * spec["hidden"])


def test_the_default_recipe_is_the_modern_mini_recipe():
    cfg = base_config(None)
    assert cfg.model["model_type"] == "modernbert" and cfg.data.mlm_probability == 0.4
    assert (cfg.train.lr, cfg.train.schedule, cfg.train.batch_size) == (2e-3, "linear", 32)
    assert cfg.train.warmup_ratio > 0


def test_run_config_keeps_the_data_and_sets_the_evaluations():
    cfg = base_config(None)
    one = run_config(cfg, SIZES[1], 300, "tok", "shards", eval_every=30)
    assert (one.train.max_steps, one.train.eval_every, one.train.save_every) == (300, 30, 0)
    assert (one.tokenizer.path, one.data.corpus) == ("tok", "shards")
    assert one.model["num_hidden_layers"] == 2 and one.model["local_attention"] == 64


def test_plan_spaces_the_evaluations(minilm_dir):
    tok = minilm_dir  # any tokenizer directory: the plan reads its vocabulary size
    plan = plan_sweep("1x16,1x32,2x32,2x64", 32 * 64 * 200, 60, overrides=[f"tokenizer.path='{tok}'"])
    assert plan.steps == 200 and plan.eval_every == 20
    assert plan_sweep("1x16,1x32,2x32,2x64", 32 * 64 * 200, 60, overrides=[f"tokenizer.path='{tok}'"],
                      eval_every=50).eval_every == 50
    with pytest.raises(ConfigError, match="--eval-every must be at least 1"):
        plan_sweep("1x16,1x32,2x32,2x64", 1e4, 60, overrides=[f"tokenizer.path='{tok}'"], eval_every=0)


def test_calibrate_times_a_modern_size():
    cfg = base_config(None, ["data.max_length=16", "train.batch_size=2"])
    assert 0 < calibrate(cfg, SIZES[0], 200, steps=1) < 10


def test_learning_curve_reads_the_held_out_rows(tmp_path):
    rows = [{"step": 10, "split": "train", "loss": 9.0},
            {"step": 10, "split": "eval", "mlm_loss": 7.0, "mlm_accuracy": 0.1, "train_seconds": 1.0},
            {"step": 20, "split": "eval", "mlm_loss": 6.5, "mlm_accuracy": 0.2, "train_seconds": 2.0},
            {"step": 20, "split": "eval", "mlm_loss": 6.4, "mlm_accuracy": 0.2, "train_seconds": 2.1}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    curve = learning_curve(str(tmp_path), n_params=1000, tokens_per_step=64)
    assert [(p["step"], p["tokens"], p["loss"]) for p in curve] == [(10, 640, 7.0), (20, 1280, 6.4)]
    assert curve[1]["compute"] == 6 * 1000 * 1280


def test_default_heads_are_at_least_two_where_the_width_splits():
    assert [s["heads"] for s in parse_sizes("1x64,2x96,2x128,3x192,4x256,1x9,1x8")] == [2, 2, 2, 3, 4, 1, 2]
    assert parse_sizes("2x96x1")[0]["heads"] == 1  # an explicit count wins


def test_layer_stack_refuses_a_model_without_layers():
    with pytest.raises(ConfigError, match="cannot find the encoder layers"):
        layer_stack(torch.nn.Linear(2, 2))



def test_a_resumed_sweep_times_and_budgets_only_what_is_left(tmp_path, minilm_dir, monkeypatch):
    import bertkit.recipes.scaling_sweep as sweep

    timed = []
    monkeypatch.setattr(sweep, "calibrate", lambda cfg, spec, vocab: timed.append(spec["hidden"]) or 1.0)
    plan = plan_sweep("1x16,1x32,2x32,2x64", 32 * 64 * 100, 600, overrides=[f"tokenizer.path='{minilm_dir}'"])
    # the 1x16 already in OUT/sweep.jsonl is not timed and costs nothing in the budget
    (tmp_path / "sweep.jsonl").write_text(json.dumps({"size": SIZES[0], "status": "ok", "loss": 5.0}) + "\n")
    assert sweep.finished_sizes(str(tmp_path)) == {"1x16x2"}
    per_step = sweep.time_sizes(plan, lambda line: None, sweep.finished_sizes(str(tmp_path)))
    assert per_step == {"1x16x2": 0.0, "1x32x2": 1.0, "2x32x2": 1.0, "2x64x2": 1.0} and timed == [32, 32, 64]
    assert sweep.finished_sizes(str(tmp_path / "new")) == set()
