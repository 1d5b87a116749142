"""transformers' TrainingArguments names in [train]: read as bertkit's keys where they mean the
same, refused with the right key where they do not; other unknown keys get the nearest key."""

import dataclasses
import inspect
import os

import pytest

from bertkit.commands import cli
from bertkit.errors import ConfigError
from bertkit.recipes.finetune import build_recipe, section_keys
from bertkit.recipes.pretrain import load_config
from bertkit.train import TrainConfig
from bertkit.settings.config_io import apply_overrides
from bertkit.settings.hf_names import ALIASES, REFUSED

CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "pretrain-tiny.toml")

# one value per alias, different from bertkit's default, so a dropped alias shows
VALUES = {"learning_rate": "3e-5", "num_train_epochs": "2.5", "per_device_train_batch_size": "8",
          "gradient_accumulation_steps": "4", "max_grad_norm": "0.5", "adam_epsilon": "1e-8", "logging_steps": "7",
          "eval_steps": "50", "save_steps": "100", "save_total_limit": "3", "metric_for_best_model": '"macro_f1"',
          "early_stopping_patience": "2"}


def finetune_recipe(assignments):
    return build_recipe(apply_overrides({}, assignments, section_keys()))


def test_the_table_names_transformers_fields_and_bertkit_keys():
    transformers = pytest.importorskip("transformers")
    fields = {f.name for f in dataclasses.fields(transformers.TrainingArguments)}
    callback = set(inspect.signature(transformers.EarlyStoppingCallback).parameters)
    assert set(ALIASES) <= fields | callback
    assert set(REFUSED) <= fields
    ours = set(section_keys()["train"])
    assert set(ALIASES.values()) <= ours
    assert not (set(ALIASES) | set(REFUSED)) & ours  # a shared name needs no entry
    assert set(VALUES) == set(ALIASES)


def test_each_alias_equals_bertkit_key_in_finetune():
    by_alias = finetune_recipe([f"train.{hf}={v}" for hf, v in VALUES.items()])
    by_ours = finetune_recipe([f"train.{ALIASES[hf]}={v}" for hf, v in VALUES.items()])
    assert by_alias == by_ours
    assert by_ours != finetune_recipe([])  # the values differ from the defaults
    assert (by_alias.train.lr, by_alias.options.epochs, by_alias.train.grad_accum) == (3e-5, 2.5, 4)


def test_aliases_in_a_toml_section_and_from_python():
    from_file = build_recipe({"train": {"learning_rate": 1e-5, "per_device_train_batch_size": 4}})
    assert (from_file.train.lr, from_file.train.batch_size) == (1e-5, 4)
    assert TrainConfig.from_dict({"max_grad_norm": 0.0, "seed": 3}).grad_clip == 0.0
    # a --set alias overrides the file's bertkit key (the same setting)
    merged = apply_overrides({"train": {"lr": 1e-3}}, ["train.learning_rate=2e-4"], section_keys())
    assert merged["train"] == {"lr": 2e-4}


def test_the_same_setting_twice_is_refused():
    with pytest.raises(ConfigError, match="train.lr is given twice, as train.lr and as train.learning_rate"):
        build_recipe({"train": {"lr": 1e-5, "learning_rate": 2e-5}})


def test_pretraining_takes_the_aliases_its_train_section_has():
    cfg = load_config(CONFIG, ["train.learning_rate=1e-4", "train.gradient_accumulation_steps=2"])
    assert (cfg.train.lr, cfg.train.grad_accum) == (1e-4, 2)
    # pre-training counts steps: num_train_epochs names what it means and what to use
    with pytest.raises(ConfigError, match=r"transformers' name for train.epochs, which this recipe does not "
                                          r"take; use train.max_steps"):
        load_config(CONFIG, ["train.num_train_epochs=3"])
    # and so does fine-tuning's own name for it (the nearest key was train.adam_eps)
    with pytest.raises(ConfigError, match=r"^train.epochs is not a key of this recipe; use train.max_steps"):
        load_config(CONFIG, ["train.epochs=3"])


@pytest.mark.parametrize("name, right", [("bf16", 'train.precision = "bf16"'),
                                         ("per_device_eval_batch_size", "data.eval_batch_size"),
                                         ("lr_scheduler_type", "train.schedule")])
def test_names_that_mean_something_else_are_refused_with_the_right_key(name, right):
    with pytest.raises(ConfigError, match=f"train.{name} is transformers' TrainingArguments name; "
                                          f"in bertkit use {right}"):
        finetune_recipe([f"train.{name}=1"])


def test_an_unknown_key_gets_the_nearest_key_not_the_list(tmp_path, capsys):
    code = cli.main(["pretrain", "--config", CONFIG, "--out", str(tmp_path), "--set", "train.warmup_stepz=3"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == "bertkit pretrain: error: unknown key train.warmup_stepz; did you mean train.warmup_steps?"
    # far from every key still names one key, never the whole list
    with pytest.raises(ConfigError) as info:
        finetune_recipe(["train.qqqqqqq=1"])
    assert str(info.value).count("train.") == 2 and "did you mean train." in str(info.value)


def test_a_misspelt_transformers_name_is_nearest_that_name():
    # difflib over bertkit's keys alone said "did you mean train.min_steps?"
    with pytest.raises(ConfigError, match=r"did you mean train.learning_rate \(transformers' name for train.lr\)\?"):
        finetune_recipe(["train.lerning_rate=1e-4"])
    with pytest.raises(ConfigError, match=r"did you mean train.lr\?"):
        finetune_recipe(["train.lrr=1e-4"])
