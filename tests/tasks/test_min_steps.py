"""train.min_steps: a small training set's run is stretched to a floor of optimizer steps, its
evaluations still train.epochs x train.evals_per_epoch; a user who names the epochs or the steps
gets them (bertkit/recipes/finetune.py, run_length)."""

import json

import pytest

from bertkit.commands.cli import main
from bertkit.commands.finetune import stretch_note, training_hints
from bertkit.commands.options import longer_run
from bertkit.errors import ConfigError
from bertkit.recipes.finetune import MIN_STEPS, build_recipe, length_line, run_length, stretched
from bertkit.tasks import SUMMARY_FILE, get_task

from .helpers import make_tiny_model


class Batches:
    """Stands in for LengthBucketedBatches: run_length reads only its length."""

    def __init__(self, count: int):
        self.count = count

    def __len__(self) -> int:
        return self.count


def length(train: dict, batches: int) -> tuple[int, int, bool]:
    recipe = build_recipe({"train": train})
    config, _ = run_length(recipe, Batches(batches), get_task("classification"))
    return config.max_steps, config.eval_every, stretched(recipe, batches)


def test_a_small_set_is_stretched_to_min_steps_in_as_many_evaluations():
    # 100 examples at batch 16: 7 steps an epoch, 42 in 6 epochs; stretched to 300 in 6 rounds of 50
    assert length({}, 7) == (MIN_STEPS, MIN_STEPS // 6, True)
    assert length({"evals_per_epoch": 2}, 7) == (300, 25, True)
    assert length({"min_steps": 120}, 7) == (120, 20, True)


def test_a_set_with_enough_steps_runs_its_epochs():
    assert length({}, 97) == (582, 97, False)  # BBC's 1,556 training articles
    assert length({}, 50) == (300, 50, False)  # exactly at the floor: nothing to stretch
    assert length({"min_steps": 0}, 7) == (42, 7, False)


def test_named_epochs_or_steps_are_kept():
    assert length({"epochs": 3}, 7) == (21, 7, False)
    assert length({"max_steps": 30}, 7) == (30, 7, False)
    # the epochs and the floor both named: both hold
    assert length({"epochs": 3, "min_steps": 90}, 7) == (90, 30, True)


def test_min_steps_must_be_a_whole_number():
    for bad in (-1, 2.5, True, "300"):
        with pytest.raises(ConfigError, match="train.min_steps must be an integer"):
            build_recipe({"train": {"min_steps": bad}})


def test_the_report_says_why_the_run_had_more_epochs():
    summary = {"stretched_to_min_steps": True, "options": {"epochs": 6.0, "min_steps": 300},
               "steps_per_epoch": 7, "train_config": {"max_steps": 300}}
    assert stretch_note(summary) == ": train.min_steps=300 stretched 6 epochs of 7 steps to 300"
    assert stretch_note({**summary, "stretched_to_min_steps": False}) == ""
    assert stretch_note({"options": {"epochs": 6.0}}) == ""  # a summary written before min_steps


def test_a_stretched_run_is_lengthened_by_min_steps():
    """Naming train.epochs alone turns the stretch off: 12 epochs of 7 steps is shorter than 300."""
    summary = {"stretched_to_min_steps": True, "options": {"epochs": 6.0, "min_steps": 300},
               "train_config": {"max_steps": 300}}
    assert longer_run(summary) == "a longer run (train.min_steps, now 300)"
    assert "train.epochs, now 6" in longer_run({**summary, "stretched_to_min_steps": False})


def test_a_stretched_fine_tune_says_so_first_and_in_its_report(tmp_path, capsys):
    texts = [f"the match ended {i} nil after a long afternoon" for i in range(6)] + \
            [f"shares fell {i} percent as the markets closed" for i in range(6)]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": "sport" if "match" in t else "business"}) + "\n"
                            for t in texts))
    model = make_tiny_model(tmp_path / "tiny", texts)
    out = tmp_path / "out"
    # 12 rows at batch 6: 2 steps an epoch, 12 in 6 epochs; a floor of 24 makes 6 rounds of 4 steps
    main(["finetune", "--task", "classification", "--model", model, "--train", str(data), "--dev", str(data),
          "--out", str(out), "--no-progress", "--no-baseline", "--set", "train.batch_size=6", "data.max_length=12",
          "train.min_steps=24", "train.patience=0"])
    printed = capsys.readouterr().out
    assert ("train.min_steps=24: 12 training rows make 2 steps an epoch, so the run is up to 24 steps (12.0 epochs), "
            "the dev set read every 4 (--set train.min_steps=0: 6 epochs)") in printed
    assert "the run trained 24 steps (12.00 epochs: train.min_steps=24 stretched 6 epochs of 2 steps to 24" in printed
    evaluations = [row["step"] for row in map(json.loads, open(out / "metrics.jsonl")) if row["split"] == "eval"]
    assert evaluations == [4, 8, 12, 16, 20, 24]
    with open(out / SUMMARY_FILE) as f:
        summary = json.load(f)
    assert summary["stretched_to_min_steps"] and summary["steps_per_epoch"] == 2


def test_a_stretched_run_below_the_trivial_baseline_is_not_told_to_name_more_epochs():
    """walk W: the not-above-trivial line said "try more epochs", but train.epochs named alone turns
    the stretch off: 12 epochs of 13 steps (200 tagging sentences) is 156 steps, fewer than the 300
    the run had. It names train.min_steps there, and patience when patience ended the run."""
    summary = {"select_metric": "f1", "best_dev": {"step": 50, "f1": 0.0}, "best_step": 50,
               "dev_history": [{"step": 50, "f1": 0.0}, {"step": 100, "f1": 0.0}, {"step": 150, "f1": 0.0}],
               "stopped_early": True, "stopped_by": "patience", "dev_baseline": {"f1": 0.0093},
               "spec": {"task": "token-classification"}, "stretched_to_min_steps": True,
               "options": {"epochs": 6.0, "min_steps": 300}, "train_config": {"max_steps": 300}}
    (hint,) = [hint for hint in training_hints(summary) if "trivial" in hint]
    assert "more epochs" not in hint
    assert "try --set train.patience=0 with a longer run (train.min_steps, now 300) or a larger lr" in hint
    summary = {**summary, "stopped_early": False, "stopped_by": None, "stretched_to_min_steps": False}
    (hint,) = [hint for hint in training_hints(summary) if "trivial" in hint]
    assert "try a longer run (train.epochs, now 6; or train.max_steps, now 300) or a larger lr" in hint


def test_a_short_run_of_named_epochs_says_the_floor_was_not_applied():
    """walk W: configs/finetune-wordnet-tagging.toml names 3 epochs; with 200 training sentences
    that is 21 steps (dev f1 0.008) and nothing said that the floor, 300 steps by default, was off
    (with train.min_steps=300 as well: dev f1 0.434)."""
    def line(train: dict, batches: int) -> str | None:
        recipe = build_recipe({"train": train})
        config, steps_per_epoch = run_length(recipe, Batches(batches), get_task("token-classification"))
        return length_line(recipe, 200, steps_per_epoch, config)

    assert line({"epochs": 3}, 7) == (
        "train.epochs=3 is named, so train.min_steps=300 does not stretch the run: 200 training rows make 7 steps "
        "an epoch, 21 steps in all (--set train.min_steps=300 as well: that many steps in as many evaluations)")
    assert line({}, 7).startswith("train.min_steps=300: 200 training rows make 7 steps an epoch, so the run is up")
    assert line({"epochs": 3}, 100) is None  # 300 steps: at the floor
    assert line({"epochs": 3}, 97) is None  # 291 steps (configs/finetune-bbc.toml on BBC): near enough
    assert line({"max_steps": 30}, 7) is None  # steps named: the user's length
    assert line({"min_steps": 0}, 7) is None and line({"epochs": 3, "min_steps": 0}, 7) is None


def test_the_first_line_says_the_examples_beside_their_rows_when_they_differ():
    """walk W: 200 wordnet-qa questions made 204 rows (a context too long for one window makes two):
    the line said "204 training rows" to a user who asked for 200."""
    recipe = build_recipe({})
    config, steps_per_epoch = run_length(recipe, Batches(13), get_task("qa"))
    assert length_line(recipe, 204, steps_per_epoch, config, 200).startswith(
        "train.min_steps=300: 204 training rows (from 200 examples) make 13 steps an epoch, so the run is up to 300")
    assert length_line(recipe, 200, steps_per_epoch, config, 200).startswith(
        "train.min_steps=300: 200 training rows make 13 steps an epoch")


def test_a_short_run_of_named_epochs_is_told_the_floor_in_its_advice(tmp_path, capsys):
    """walk W: configs/finetune-wordnet-tagging.toml's 3 epochs of 200 sentences (21 steps, dev f1 0.008)
    were told "a longer run (train.epochs, now 3; or train.max_steps, now 21)": the first line named
    train.min_steps, the advice did not (the summary did not say the epochs were named). With
    train.min_steps=300 as well that run made dev f1 0.434."""
    summary = {"select_metric": "f1", "best_dev": {"step": 3, "f1": 0.0}, "best_step": 3,
               "dev_history": [{"step": 3, "f1": 0.0}, {"step": 6, "f1": 0.0}, {"step": 9, "f1": 0.0}],
               "stopped_early": True, "stopped_by": "patience", "dev_baseline": {"f1": 0.0093},
               "spec": {"task": "token-classification"}, "stretched_to_min_steps": False, "epochs_named_alone": True,
               "options": {"epochs": 3.0, "min_steps": 300}, "train_config": {"max_steps": 21}}
    assert longer_run(summary) == ("a longer run (train.min_steps=300 as well, which train.epochs named alone turned "
                                   "off: 300 steps, not 21; or train.epochs, now 3)")
    (hint,) = [hint for hint in training_hints(summary) if "trivial" in hint]
    assert "try --set train.patience=0 with a longer run (train.min_steps=300 as well" in hint
    # at or past the floor, or the floor off (0), or steps named: the epochs and steps as before
    for changed in ({"train_config": {"max_steps": 300}}, {"options": {"epochs": 3.0, "min_steps": 0}},
                    {"epochs_named_alone": False}):
        assert longer_run({**summary, **changed}).startswith("a longer run (train.epochs, now 3; or train.max_steps")
    # the summary records it: 12 rows at batch 6, 2 epochs named: 4 steps, the floor of 300 off
    texts = [f"the match ended {i} nil" for i in range(6)] + [f"shares fell {i} percent" for i in range(6)]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": "sport" if "match" in t else "business"}) + "\n"
                            for t in texts))
    model = make_tiny_model(tmp_path / "tiny", texts)
    runs = {}
    for name, extra in (("named", []), ("floor", ["train.min_steps=8"]), ("steps", ["train.max_steps=4"])):
        out = tmp_path / name
        assert main(["finetune", "--task", "classification", "--model", model, "--train", str(data), "--dev",
                     str(data), "--out", str(out), "--no-progress", "--no-baseline", "--set", "train.batch_size=6",
                     "data.max_length=12", "train.epochs=2", *extra]) == 0
        with open(out / SUMMARY_FILE) as f:
            runs[name] = json.load(f)
    capsys.readouterr()
    assert runs["named"]["epochs_named_alone"] and runs["named"]["train_config"]["max_steps"] == 4
    assert longer_run(runs["named"]).startswith("a longer run (train.min_steps=300 as well")
    assert not runs["floor"]["epochs_named_alone"] and runs["floor"]["stretched_to_min_steps"]
    assert not runs["steps"]["epochs_named_alone"]
