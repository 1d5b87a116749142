"""scripts/pretrain_ablation.py: every row is a valid recipe, and the length-phases row keeps
base's tokens and lr schedule across its two runs."""

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from bertkit.recipes.pretrain import model_config, parse_config
from bertkit.train.schedule import WarmupDecay

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pretrain_ablation.py"


@pytest.fixture(scope="module")
def ablation():
    spec = importlib.util.spec_from_file_location("pretrain_ablation", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def base(ablation):
    return ablation.load_base()


ARGS = SimpleNamespace(tokenizer="tok", shards="shards", general_shards="general-shards", out="out")


def test_every_row_parses(ablation, base):
    for name, changes in ablation.ROWS.items():
        cfg = parse_config(ablation.row_config(base, changes, 300, ARGS))
        assert cfg.train.max_steps in (150, 300, 600), name
    cleaned = parse_config(ablation.row_config(base, ablation.ROWS["dedup-filter"], 300, ARGS)).data
    assert (cleaned.dedup, cleaned.min_words, cleaned.min_alpha_fraction) == (True, 3, 0.8)
    sinusoidal = ablation.row_config(base, ablation.ROWS["bert-sinusoidal"], 300, ARGS)["model"]
    assert sinusoidal["position_embedding_type"] == "sinusoidal"


def lr(train: dict, step: int) -> float:
    schedule = WarmupDecay(train["warmup_steps"], train["max_steps"], train["schedule"],
                           train.get("schedule_power", 1.0), train.get("lr_end", 0.0) / train["lr"])
    return train["lr"] * schedule(step)


def test_length_phases_follow_base_schedule_with_the_same_tokens(ablation, base):
    one, two = ablation.phase_configs(base, 300, ARGS, "out/length-phases")
    plain = ablation.row_config(base, {}, 300, ARGS)["train"]
    assert (one["train"]["max_steps"], two["train"]["max_steps"]) == (270, 30)
    for step in range(270):
        assert lr(one["train"], step) == pytest.approx(lr(plain, step), rel=1e-9, abs=1e-12)
    for step in range(30):
        assert lr(two["train"], step) == pytest.approx(lr(plain, 270 + step), rel=1e-9, abs=1e-12)
    tokens = lambda cfg: cfg["train"]["batch_size"] * cfg["data"]["max_length"]  # noqa: E731
    assert tokens(one) == tokens(two) == 32 * 128 and two["data"]["max_length"] == 512
    assert two["model"]["init"].endswith("phase-128/checkpoint-270")
    assert one["model"]["max_position_embeddings"] == 512  # room for phase 2's positions
    parse_config(one), parse_config({**two, "model": {"model_type": "modernbert"}})


def test_modern_block_rows_change_one_switch_of_the_recipe(ablation, base):
    """post-ln and the position rows keep the recipe's modern encoder and change one switch."""
    recipe = model_config(parse_config(ablation.row_config(base, {}, 300, ARGS)), 8000, 0).to_dict()
    expected = {"post-ln": {"norm_placement": "post"},
                "learned-positions": {"position_embedding_type": "absolute"},
                "sinusoidal-positions": {"position_embedding_type": "sinusoidal"},
                "no-positions": {"position_embedding_type": "none"}}
    for name, change in expected.items():
        config = model_config(parse_config(ablation.row_config(base, ablation.ROWS[name], 300, ARGS)), 8000, 0)
        row = config.to_dict()
        assert {k: v for k, v in row.items() if recipe.get(k) != v} == change, name
        assert config.max_position_embeddings == 128  # a learned table of the trained length only


def test_the_gpu_recipe_rows_train_minutes_on_its_clock(ablation):
    gpu = ablation.load_base(str(SCRIPT.parents[1] / "configs" / "pretrain-gpu-10min.toml"))
    assert gpu["train"]["batch_size"] == 64  # its own batch: only the mini recipe's is set to 32
    args = SimpleNamespace(**vars(ARGS), minutes=1.0)
    for name in ("base", "mask-15", "mask-40", "lr-5e-4", "lr-2e-3", "batch-32", "batch-128", "seq-128", "linear"):
        cfg = parse_config(ablation.row_config(gpu, ablation.ROWS[name], 300, args))
        assert cfg.train.max_minutes == 1.0 and cfg.train.schedule_over == "minutes", name
        assert cfg.train.max_steps == gpu["train"]["max_steps"], name  # an upper bound, not cut
    seq = parse_config(ablation.row_config(gpu, ablation.ROWS["seq-128"], 300, args))
    assert seq.train.batch_size * seq.data.max_length == 64 * 512  # the same tokens a step
    by_steps = parse_config(ablation.row_config(gpu, ablation.ROWS["batch-128"], 300, ARGS))
    assert by_steps.train.max_steps == 150 and by_steps.train.warmup_steps == 15
