"""`bertkit finetune --search` (bertkit/recipes/search.py) at tiny sizes: the best dev trial ends
in OUT as a normal fine-tuned model, the table of trials is written, the budget cuts, --resume
skips finished trials, and the test split is never read."""

from __future__ import annotations

import csv
import json
import os
import signal
import warnings

import pytest

from bertkit.commands.cli import main
from bertkit.commands.options import longer_run
from bertkit.errors import ConfigError, RunInterrupted
from bertkit.recipes import finetune as finetune_recipe
from bertkit.recipes import search as search_recipe
from bertkit.tasks import SUMMARY_FILE, load_model, read_spec
from bertkit.train import trainer as trainer_module

from .helpers import topic_files

GRID = ["search.lr=[1e-3,3e-3]", "search.dropout=[0.1]", "search.pooling=[\"cls\",\"mean\"]", "search.epochs=1",
        "search.patience=0"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("search")
    return root, topic_files(root, 36, 5, ("goal", "bank"), train=28)


def count_trials(monkeypatch) -> list[str]:
    """The OUT of every fine-tune the search starts, in order."""
    calls, real = [], search_recipe.finetune
    monkeypatch.setattr(search_recipe, "finetune", lambda *a, **k: calls.append(a[4]) or real(*a, **k))
    return calls


def run_search(root, tiny, out, *extra) -> int:
    argv = ["finetune", "--search", "--task", "classification", "--model", tiny, "--train", str(root / "train.jsonl"),
            "--dev", str(root / "dev.jsonl"), "--out", out, "--no-progress",
            "--set", "train.batch_size=8", "data.max_length=16", *GRID, *extra]  # extra --set wins
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return main(argv)


def test_search_keeps_the_best_dev_trial_writes_the_table_and_resumes(files, tmp_path, monkeypatch, capsys):
    root, tiny = files
    out = str(tmp_path / "out")
    calls = count_trials(monkeypatch)
    assert run_search(root, tiny, out, "--set", "search.max_trials=3") == 0
    assert len(calls) == 3  # 2 lr x 2 pooling = 4 grid points, 3 allowed
    with open(os.path.join(out, "search", "trials.csv"), newline="") as f:
        table = list(csv.DictReader(f))
    assert [r["status"] for r in table] == ["done"] * 3 + ["not run (budget)"]
    assert [(r["lr"], r["pooling"]) for r in table] == [("0.001", "cls"), ("0.003", "cls"), ("0.001", "mean"),
                                                        ("0.003", "mean")]
    summary = json.load(open(os.path.join(out, SUMMARY_FILE)))
    # the best dev accuracy wins; a tie goes to the lower dev loss (as a fine-tune's checkpoints)
    dev = [json.load(open(os.path.join(out, "search", f"trial-00{i}", SUMMARY_FILE)))["best_dev"] for i in range(3)]
    best = max(range(3), key=lambda i: (dev[i]["accuracy"], -dev[i]["loss"]))
    assert summary["search"]["best_trial"] == best and summary["best_dev"] == dev[best]
    assert [float(r["dev_accuracy"]) for r in table[:3]] == [d["accuracy"] for d in dev]
    assert summary["tfidf_baseline"]["param"] == "C"  # fitted once, by trial 0
    # OUT is a normal fine-tuned model with the best trial's settings; the losers kept no weights
    spec = read_spec(out)
    assert load_model(out, spec.task).config.classifier_pooling == summary["search"]["settings"]["pooling"]
    trials = sorted(os.listdir(os.path.join(out, "search")))
    assert trials == ["search_config.json", "trial-000", "trial-001", "trial-002", "trials.csv", "trials.jsonl"]
    for name in trials[1:4]:
        assert not os.path.exists(os.path.join(out, "search", name, "model.safetensors"))
    assert os.path.isfile(os.path.join(out, "model.safetensors"))
    assert f"search: trial {best} of the 3 run is the best on dev" in capsys.readouterr().out
    assert longer_run(summary) == "longer trials (search.epochs, now 1)"  # OUT's summary names the search's length

    # a bigger budget with --resume runs only the trial not run yet
    calls.clear()
    assert run_search(root, tiny, out, "--resume", "--set", "search.max_trials=4") == 0
    assert calls == [os.path.join(out, "search", "trial-003")]
    summary = json.load(open(os.path.join(out, SUMMARY_FILE)))
    assert [r["status"] for r in summary["search"]["trials"]] == ["done"] * 4
    assert os.path.isfile(os.path.join(out, "model.safetensors"))

    capsys.readouterr()
    assert run_search(root, tiny, out, "--resume", "--set", "train.weight_decay=0.1") == 2  # not the same search
    assert "was started with other options (train.weight_decay: (unset) -> 0.1)" in capsys.readouterr().err
    assert run_search(root, tiny, out) == 2
    assert "pass --resume to continue it" in capsys.readouterr().err


def test_a_time_budget_stops_starting_trials(files, tmp_path):
    root, tiny = files
    out = str(tmp_path / "out")
    assert run_search(root, tiny, out, "--set", "search.max_minutes=0.0001") == 0
    summary = json.load(open(os.path.join(out, SUMMARY_FILE)))
    assert [r["status"] for r in summary["search"]["trials"]] == ["done"] + ["not run (budget)"] * 3
    first = summary["search"]["trials"][0]  # the clock, not patience, ended it: partial
    assert first["stopped_by"] == "train.max_minutes" and first["note"].startswith("partial: cut by the time budget")


def test_ctrl_c_during_trial_0s_baseline_stops_the_search_and_resume_fits_it(files, tmp_path, monkeypatch, capsys):
    """The fine-tune skips the baseline on Ctrl-C and ends normally; the search stops there instead
    of going on to trial 1. --resume fits the skipped baseline, then runs the other trials."""
    from bertkit.tasks import baseline

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    real = baseline.choose_on_dev
    monkeypatch.setattr(baseline, "choose_on_dev", interrupted)
    calls = count_trials(monkeypatch)
    root, tiny = files
    out = str(tmp_path / "out")
    assert run_search(root, tiny, out) == 130
    assert len(calls) == 1 and "during trial 0's TF-IDF baseline" in capsys.readouterr().err

    monkeypatch.setattr(baseline, "choose_on_dev", real)
    assert run_search(root, tiny, out, "--resume") == 0
    assert len(calls) == 4  # trial 0 was not trained again
    for summary_path in (os.path.join(out, SUMMARY_FILE), os.path.join(out, "search", "trial-000", SUMMARY_FILE)):
        entry = json.load(open(summary_path))["tfidf_baseline"]
        assert "note" not in entry and entry["select_metric"] == "accuracy"


def test_the_search_never_reads_the_test_split(files, tmp_path, monkeypatch):
    root, tiny = files
    read = []
    real = finetune_recipe.load_examples
    monkeypatch.setattr(finetune_recipe, "load_examples", lambda task, source, split, data: read.append(
        (source, split)) or real(task, source, split, data))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search_recipe.search("classification", tiny, "bbc", None, str(tmp_path / "out"),
                             {"data": {"max_length": 16, "max_train_examples": 30, "max_eval_examples": 10},
                              "train": {"batch_size": 8, "baseline": False},
                              "search": {"lr": [1e-3], "dropout": [0.0], "pooling": ["cls"], "epochs": 1}},
                             progress=False, log=lambda line: None)
    assert read == [("bbc", "train"), ("bbc:dev", "dev")]
    with pytest.raises(ConfigError, match="is a test split"):
        search_recipe.search("classification", tiny, "bbc", "bbc:test", str(tmp_path / "other"), {})


def test_bad_search_settings_are_refused(files, tmp_path, capsys):
    root, tiny = files
    assert run_search(root, tiny, str(tmp_path / "o"), "--set", "search.lr=1e-3") == 2
    assert "search.lr must be a list" in capsys.readouterr().err
    assert main(["finetune", "--task", "classification", "--model", tiny, "--train", str(root / "train.jsonl"),
                 "--dev", str(root / "dev.jsonl"), "--out", str(tmp_path / "p"), "--set", "search.max_trials=2"]) == 2
    assert "[search] settings are for --search" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "o") and not os.path.exists(tmp_path / "p")


def test_the_grid_follows_the_model_family_and_size(files, tmp_path):
    """BERT: hidden_dropout_prob and its pooler; the modern encoder: mlp_dropout and its cls pooling;
    learning rates by hidden size; no pooling axis for a head that reads no pooled vector."""
    from bertkit.models.modern import ModernBertConfig, ModernBertModel

    _, tiny = files  # a BERT, hidden 32
    space = search_recipe.SearchSpace().resolved({})  # the fine-tune's defaults: 6 epochs, patience 2
    grid = search_recipe.trial_grid(space, tiny, "classification")
    assert len(grid) == 12 and [g["lr"] for g in grid[:3]] == list(search_recipe.SMALL_LRS)
    assert {g["pooling"] for g in grid} == {"pooler", "mean"} and grid[3]["dropout"] == 0.0
    assert {g["pooling"] for g in search_recipe.trial_grid(space, tiny, "token-classification")} == {None}
    sections = search_recipe.trial_sections({"train": {"seed": 3}}, grid[3], space, tiny, {"baseline": False})
    assert sections["model"] == {"hidden_dropout_prob": 0.0, "classifier_dropout": 0.0, "classifier_pooling": "pooler"}
    assert sections["train"] == {"seed": 3, "lr": grid[3]["lr"], "epochs": 6.0, "patience": 2, "min_steps": 300,
                                 "baseline": False}

    modern = tmp_path / "modern"
    ModernBertModel(ModernBertConfig(vocab_size=64, hidden_size=768, num_hidden_layers=1, num_attention_heads=12,
                                     intermediate_size=64, pad_token_id=0, cls_token_id=1, sep_token_id=2,
                                     bos_token_id=1, eos_token_id=2)).save_pretrained(modern)
    grid = search_recipe.trial_grid(space, str(modern), "classification")
    assert [g["lr"] for g in grid[:3]] == list(search_recipe.BASE_LRS)
    assert {g["pooling"] for g in grid} == {"cls", "mean"}
    model = search_recipe.trial_sections({}, grid[0], space, str(modern), {})["model"]
    assert model == {"mlp_dropout": 0.1, "classifier_dropout": 0.1, "classifier_pooling": "cls"}


def test_halving_rungs_shrink_by_three_and_grow_the_epochs():
    halving = search_recipe.SearchSpace(strategy="halving").resolved({})
    assert search_recipe.rungs(halving, 12) == [(12, 6 / 9), (4, 2.0), (1, 6.0)]  # 22 epochs, not the grid's 72
    assert search_recipe.rungs(halving, 2) == [(2, 2.0), (1, 6.0)]
    assert search_recipe.rungs(halving, 1) == [(1, 6.0)]
    assert search_recipe.rungs(search_recipe.SearchSpace().resolved({}), 12) == [(12, 6.0)]
    # a recipe's own length holds in its search unless search.epochs / search.patience say otherwise
    recipe = {"epochs": 8, "patience": 0}
    assert (search_recipe.SearchSpace().resolved(recipe).epochs, search_recipe.SearchSpace().resolved(recipe).patience) == (8, 0)
    assert search_recipe.SearchSpace(epochs=3.0, patience=1).resolved(recipe).epochs == 3.0
    with pytest.raises(ConfigError, match="search.strategy must be one of grid, halving"):
        search_recipe.SearchSpace(strategy="random")


def test_trials_keep_the_fine_tunes_min_steps_scaled_to_their_epochs(files):
    """A trial stretches a small set's run as a plain fine-tune would (train.min_steps), a halving
    rung's shorter trial by its share; epochs the user names are not stretched."""
    _, tiny = files
    space = search_recipe.SearchSpace(strategy="halving").resolved({})
    assert space.min_steps == 300
    short = search_recipe.trial_sections({}, {"lr": 1e-4, "dropout": 0.1, "pooling": None, "epochs": 2.0}, space,
                                         tiny, {})["train"]
    assert short["min_steps"] == 100 and finetune_recipe.build_recipe({"train": short}).stretch
    assert search_recipe.SearchSpace().resolved({"epochs": 3}).min_steps == 0
    assert search_recipe.SearchSpace(epochs=3.0).resolved({}).min_steps == 0
    assert search_recipe.SearchSpace().resolved({"epochs": 3, "min_steps": 90}).min_steps == 90
    with pytest.raises(ConfigError, match="search.min_steps must be an integer >= 0"):
        search_recipe.SearchSpace(min_steps=-1)


def test_halving_promotes_the_best_dev_point_to_the_full_epochs(files, tmp_path, monkeypatch, capsys):
    root, tiny = files
    out = str(tmp_path / "out")
    calls = count_trials(monkeypatch)
    assert run_search(root, tiny, out, "--set", "search.strategy=\"halving\"") == 0
    table = json.load(open(os.path.join(out, SUMMARY_FILE)))["search"]["trials"]
    assert len(calls) == 5 and [r["rung"] for r in table] == [0, 0, 0, 0, 1]  # 4 points: rungs of 4 and 1
    assert [r["epochs"] for r in table] == [1 / 3] * 4 + [1.0]
    trials = [json.load(open(os.path.join(out, "search", f"trial-00{i}", SUMMARY_FILE))) for i in range(5)]
    assert [t["train_config"]["max_steps"] for t in trials] == [2] * 4 + [4]  # 28 examples, batch 8: 4 steps/epoch
    # the promoted point is rung 0's best on dev (accuracy, then the lower loss, then the earlier trial)
    first = min(range(4), key=lambda i: (-trials[i]["best_dev"]["accuracy"], trials[i]["best_dev"]["loss"], i))
    assert {k: table[4][k] for k in ("lr", "dropout", "pooling")} == {k: table[first][k] for k in ("lr", "dropout", "pooling")}
    best = json.load(open(os.path.join(out, SUMMARY_FILE)))["search"]["best_trial"]
    assert trials[best]["best_dev"] == json.load(open(os.path.join(out, SUMMARY_FILE)))["best_dev"]

    calls.clear()  # a finished search resumed runs nothing; another strategy is another search
    assert run_search(root, tiny, out, "--resume", "--set", "search.strategy=\"halving\"") == 0 and calls == []
    capsys.readouterr()
    assert run_search(root, tiny, out, "--resume") == 2
    assert "was started with other options (search.strategy: \"halving\" -> \"grid\")" in capsys.readouterr().err

    # a budget that cuts rung 0 promotes nobody: the best trial run so far is the result
    cut = str(tmp_path / "cut")
    assert run_search(root, tiny, cut, "--set", "search.strategy=\"halving\"", "search.max_trials=3") == 0
    table = json.load(open(os.path.join(cut, SUMMARY_FILE)))["search"]["trials"]
    assert [(r["rung"], r["status"]) for r in table] == [(0, "done")] * 3 + [(0, "not run (budget)")]


def instant_trials(monkeypatch, minutes_per_epoch: float, scores: list[float], cut: tuple = ()) -> None:
    """finetune replaced by instant trials of a given pace and dev score (those in `cut` stopped by
    the clock halfway): what the search says about time, without training or a real clock."""
    def fake(task, model, train, dev, out, sections, progress=True, resume=False):
        os.makedirs(out, exist_ok=True)
        index, epochs = int(out[-3:]), sections["train"]["epochs"]
        ran = epochs / 2 if index in cut else epochs
        return {"spec": {"task": task}, "select_metric": "accuracy", "tie_metric": "loss",
                "best_dev": {"accuracy": scores[index], "loss": 1.0}, "best_step": 1, "epochs_run": ran,
                "stopped_early": index in cut, "stopped_by": "train.max_minutes" if index in cut else None,
                "wall_time_s": minutes_per_epoch * 60 * ran, "tfidf_baseline": None}
    monkeypatch.setattr(search_recipe, "finetune", fake)


def test_the_search_says_its_plan_its_pace_and_marks_a_trial_the_clock_cut(files, tmp_path, monkeypatch):
    """Walk P #3: a 14-minute search ran 2 of 12 trials without a word, and its clock-cut trial read
    stopped_early=True like a patience stop. Trials of 4 epochs at 2 min each, 25 minutes: 3 fit."""
    _, tiny = files
    instant_trials(monkeypatch, 2.0, scores=[0.5, 0.6, 0.55, 0.7], cut=(3,))
    said = []
    search_recipe.search("classification", tiny, "train.jsonl", "dev.jsonl", str(tmp_path / "out"),
                         {"search": {"lr": [1e-3, 3e-3], "dropout": [0.1], "pooling": ["cls", "mean"], "epochs": 4,
                                     "patience": 1, "max_minutes": 25}}, progress=False, log=said.append)
    assert said[0] == ("search: 4 trials (lr 0.001, 0.003 x dropout 0.1 x pooling cls, mean), each up to 4 epochs, "
                       "early stopping after 1 dev evaluations without a better score; budget search.max_minutes=25; "
                       "lr varies fastest")
    assert said[2] == ("search: trial 0 took 8.0 min for 4 epochs; at that pace the 4 trials take up to 32 min; "
                       "search.max_minutes=25 fits about 3 of them in full (early stopping may make room for more)")
    # 24 minutes spent, 1 left: trial 3 is said to be cut before it starts
    warned = [line for line in said if "the clock will likely cut it" in line]
    assert len(warned) == 1 and warned[0].startswith("search: trial 3's 4 epochs take about 8.0 min")
    with open(tmp_path / "out" / "search" / "trials.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert "stopped_early" not in table[0]
    assert [r["stopped_by"] for r in table] == ["", "", "", "train.max_minutes"]
    assert [r["note"] for r in table[:3]] == ["", "", ""]
    assert table[3]["note"].startswith("partial: cut by the time budget at 2 of 4 epochs; its dev score is not comparable")
    # the search still picks the best dev score, and says when that one is partial
    summary = json.load(open(tmp_path / "out" / SUMMARY_FILE))
    assert summary["search"]["best_trial"] == 3
    assert said[-1].startswith("search: the best on dev, trial 3, was cut by the time budget before its 4 epochs")


def test_a_search_without_a_budget_gives_its_length_and_no_cut_warning(files, tmp_path, monkeypatch):
    _, tiny = files
    instant_trials(monkeypatch, 1.0, scores=[0.5] * 6)
    said = []
    search_recipe.search("classification", tiny, "train.jsonl", "dev.jsonl", str(tmp_path / "out"),
                         {"search": {"lr": [1e-3, 3e-3, 1e-2], "dropout": [0.1], "pooling": ["cls"], "epochs": 3,
                                     "strategy": "halving"}}, progress=False, log=said.append)
    assert said[0].startswith("search: 4 trials (lr 0.001, 0.003, 0.01 x dropout 0.1 x pooling cls), successive "
                              "halving: 3 of 1 epoch, then 1 of 3 epochs,")
    assert "no budget (search.max_trials, search.max_minutes)" in said[0]
    assert said[2] == "search: trial 0 took 1.0 min for 1 epoch; at that pace the 4 trials take up to 6 min"
    assert not [line for line in said if "cut" in line]


def test_class_weights_is_an_axis_only_when_asked(files, tmp_path, monkeypatch, capsys):
    """walk P: balanced class weights were worth 14 macro-F1 points on dev, and --search could not try them."""
    root, tiny = files
    space = search_recipe.SearchSpace().resolved({})
    assert all("class_weights" not in g for g in search_recipe.trial_grid(space, tiny, "classification"))
    weighed = search_recipe.SearchSpace(class_weights=["none", "balanced"]).resolved({})
    grid = search_recipe.trial_grid(weighed, tiny, "classification")
    assert len(grid) == 24 and [g["class_weights"] for g in grid[11:13]] == ["none", "balanced"]  # varied last
    assert search_recipe.trial_sections({}, grid[12], weighed, tiny, {})["train"]["class_weights"] == "balanced"
    with pytest.raises(ConfigError, match="search.class_weights is for single-label or token classification"):
        search_recipe.trial_grid(weighed, tiny, "regression")
    with pytest.raises(ConfigError, match="search.class_weights must hold none and/or balanced"):
        search_recipe.SearchSpace(class_weights=["inverse"])

    out = str(tmp_path / "out")
    calls = count_trials(monkeypatch)
    assert run_search(root, tiny, out, "--set", "search.pooling=[\"cls\"]", "search.lr=[1e-3]",
                      "search.class_weights=[\"none\",\"balanced\"]", "train.select_metric=macro_f1") == 0
    said = capsys.readouterr().out
    assert len(calls) == 2 and "class_weights none, balanced" in said
    summary = json.load(open(os.path.join(out, SUMMARY_FILE)))
    assert [r["class_weights"] for r in summary["search"]["trials"]] == ["none", "balanced"]
    best = summary["search"]["best_trial"]
    assert summary["search"]["settings"]["class_weights"] == ["none", "balanced"][best]
    trial = json.load(open(os.path.join(out, "search", "trial-001", SUMMARY_FILE)))
    assert trial["options"]["class_weights"] == "balanced"


def test_a_lora_search_tries_lora_learning_rates_and_keeps_the_best_adapter(files, tmp_path, monkeypatch, capsys):
    """peft.md sent LoRA users to try 1e-3 / 2e-3 / 5e-3 by hand: --search refused --peft."""
    root, tiny = files
    lora = search_recipe.trial_grid(search_recipe.SearchSpace().resolved({}), tiny, "classification", "lora")
    assert [g["lr"] for g in lora[:3]] == [1e-3, 2e-3, 5e-3]
    out = str(tmp_path / "out")
    calls = count_trials(monkeypatch)
    argv = ["finetune", "--search", "--peft", "lora", "--task", "classification", "--model", tiny, "--train",
            str(root / "train.jsonl"), "--dev", str(root / "dev.jsonl"), "--out", out, "--no-progress", "--set",
            "train.batch_size=8", "data.max_length=16", "search.dropout=[0.1]", "search.pooling=[\"cls\"]",
            "search.epochs=1", "search.patience=0", "search.max_trials=2"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(argv) == 0
    assert len(calls) == 2 and "lr 0.001, 0.002, 0.005" in capsys.readouterr().out
    summary = json.load(open(os.path.join(out, SUMMARY_FILE)))
    assert summary["peft"]["method"] == "lora" and summary["search"]["settings"]["lr"] in (1e-3, 2e-3)
    assert os.path.isfile(os.path.join(out, "adapter_config.json"))  # OUT is the best trial's adapter
    assert main(["evaluate", "--model", out, "--data", str(root / "dev.jsonl"), "--no-baseline"]) == 0
    scored = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert scored["accuracy"] == pytest.approx(summary["best_dev"]["accuracy"])  # the kept adapter, reloaded


def test_ctrl_c_while_a_trial_starts_says_how_to_go_on_and_resume_runs_the_rest(files, tmp_path, monkeypatch, capsys):
    """walk T: Ctrl-C after trial 0, while trial 1 loaded its data, ended in a bare
    "bertkit finetune: interrupted" though --resume continues the search."""
    calls, real = [], search_recipe.finetune

    def interrupted_at_trial_1(*args, **kwargs):
        calls.append(args[4])
        if len(calls) == 2:
            raise KeyboardInterrupt  # as Python raises it outside the Trainer's signal handler
        return real(*args, **kwargs)
    monkeypatch.setattr(search_recipe, "finetune", interrupted_at_trial_1)
    root, tiny = files
    out = str(tmp_path / "out")
    assert run_search(root, tiny, out) == 130
    err = capsys.readouterr().err
    assert f"stopped by SIGINT between trials (each finished trial is kept, the best so far in {out}); run the " \
           "same command with --resume for the other trials" in err and err.count("\n") == 1, err
    assert run_search(root, tiny, out, "--resume") == 0
    assert len(calls) == 5  # trial 0 read back, trials 1-3 run


def test_a_resumed_trials_pace_is_its_resumed_part_over_the_epochs_that_part_ran():
    """After --resume a trial's wall_time_s times the steps since the resume only (walk W): its pace is
    that time over those steps' epochs, not over the whole trial's."""
    summary = {"select_metric": "accuracy", "best_dev": {"accuracy": 0.9}, "best_step": 60, "stopped_early": False,
               "stopped_by": None, "epochs_run": 6.0, "steps": 60, "steps_per_epoch": 10, "wall_time_s": 30.0,
               "resumed_at_step": 30}
    row = search_recipe.table_row(0, 0, {"lr": 1e-4, "epochs": 6.0}, summary)
    assert row["epochs_timed"] == 3.0
    assert search_recipe.seconds_per_epoch([row]) == 10.0  # 30 s for the 3 epochs after the resume, not 5 s
    plain = search_recipe.table_row(1, 0, {"lr": 3e-4, "epochs": 6.0}, {**summary, "resumed_at_step": None})
    assert "epochs_timed" not in plain and search_recipe.seconds_per_epoch([plain]) == 5.0


def test_a_trials_time_counts_every_attempt():
    """Walk W: after --resume a trial's wall_time_s is the resumed part's; the budget counts the earlier
    attempts too: their recorded seconds, or at least the checkpoint's clock (a killed attempt records none)."""
    summary = {"select_metric": "accuracy", "best_dev": {"accuracy": 0.9}, "best_step": 60, "stopped_early": False,
               "stopped_by": None, "epochs_run": 6.0, "steps": 60, "steps_per_epoch": 10, "wall_time_s": 30.0,
               "resumed_at_step": 30, "resumed_train_seconds": 50.0}
    settings = {"lr": 1e-4, "epochs": 6.0}
    assert search_recipe.table_row(0, 0, settings, summary, [70.0])["time_s"] == 100.0  # 30 + the stopped 70
    assert search_recipe.table_row(0, 0, settings, summary)["time_s"] == 80.0  # killed: 30 + the clock's 50
    row = search_recipe.table_row(0, 0, settings, summary, [20.0, 25.0])
    assert row["time_s"] == 80.0 and row["wall_time_s"] == 30.0 and search_recipe.trial_time(row) == 80.0
    fresh = {**summary, "resumed_at_step": None, "resumed_train_seconds": None}
    # stopped before its first checkpoint, then run afresh: both attempts count
    assert search_recipe.table_row(0, 0, settings, fresh, [12.0])["time_s"] == 42.0
    plain = search_recipe.table_row(0, 0, settings, fresh)
    assert "time_s" not in plain and search_recipe.trial_time(plain) == 30.0


def test_a_resumed_search_spends_its_budget_on_every_attempt(files, tmp_path, monkeypatch):
    """Trials of 8 minutes, a 24-minute budget: trial 1, stopped after 6 minutes and resumed for 2 more,
    spent 8, so trial 3 does not start (counting the resumed 2 minutes alone, it did)."""
    _, tiny = files
    now, attempts = [0.0], []
    monkeypatch.setattr(search_recipe, "clock", lambda: now[0])

    def fake(task, model, train, dev, out, sections, progress=True, resume=False):
        os.makedirs(out, exist_ok=True)
        index = int(out[-3:])
        attempts.append(index)
        if attempts == [0, 1]:  # trial 1's first attempt: Ctrl-C after 6 minutes (checkpoint at 5 of them)
            now[0] += 360.0
            raise RunInterrupted(f"stopped by SIGINT after step 30 of 60; saved {out}/checkpoint-30", signal.SIGINT)
        resumed = index == 1
        now[0] += 120.0 if resumed else 480.0
        summary = {"spec": {"task": task}, "select_metric": "accuracy", "tie_metric": "loss",
                   "best_dev": {"accuracy": 0.5 + index / 10, "loss": 1.0}, "best_step": 60, "epochs_run": 4.0,
                   "steps": 60, "steps_per_epoch": 15, "stopped_early": False, "stopped_by": None,
                   "wall_time_s": 120.0 if resumed else 480.0, "resumed_at_step": 30 if resumed else None,
                   "resumed_train_seconds": 300.0 if resumed else None, "tfidf_baseline": None}
        with open(os.path.join(out, SUMMARY_FILE), "w", encoding="utf-8") as f:  # finished: --resume reads it back
            json.dump(summary, f)
        return summary
    monkeypatch.setattr(search_recipe, "finetune", fake)
    args = ("classification", tiny, "train.jsonl", "dev.jsonl", str(tmp_path / "out"),
            {"search": {"lr": [1e-3, 3e-3], "dropout": [0.1], "pooling": ["cls", "mean"], "epochs": 4,
                        "patience": 1, "max_minutes": 24}})
    with pytest.raises(RunInterrupted):
        search_recipe.search(*args, progress=False, log=lambda line: None)
    assert json.load(open(tmp_path / "out" / "search" / search_recipe.ATTEMPTS_FILE)) == {"1": [360.0]}
    search_recipe.search(*args, resume=True, progress=False, log=lambda line: None)
    table = json.load(open(tmp_path / "out" / SUMMARY_FILE))["search"]["trials"]
    assert [r["status"] for r in table] == ["done"] * 3 + ["not run (budget)"]
    assert table[1]["wall_time_s"] == 120.0 and table[1]["time_s"] == 480.0
    assert attempts == [0, 1, 1, 2]


def test_ctrl_c_in_a_trial_then_resume_counts_both_attempts(files, tmp_path, monkeypatch, capsys):
    """The CLI: Ctrl-C at trial 1's second step saves its checkpoint; --resume continues it, and its row's
    time_s holds both attempts (the stopped one as attempts.json recorded it), wall_time_s the resumed one."""
    root, tiny = files
    out = str(tmp_path / "out")
    original, trial_steps = trainer_module.Trainer._train_step, []

    def step_with_signal(self, batches):
        trial_steps.append(self.out_dir)
        if self.out_dir.endswith("trial-001") and self.step + 1 == 2 and trial_steps.count(self.out_dir) == 2:
            signal.raise_signal(signal.SIGINT)
        return original(self, batches)
    monkeypatch.setattr(trainer_module.Trainer, "_train_step", step_with_signal)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # SIG_IGN in a background job
    try:
        assert run_search(root, tiny, out, "--set", "search.max_trials=2") == 130
    finally:
        signal.signal(signal.SIGINT, before)
    assert "stopped by SIGINT after step 2" in capsys.readouterr().err
    stopped = json.load(open(os.path.join(out, "search", search_recipe.ATTEMPTS_FILE)))["1"]
    assert run_search(root, tiny, out, "--resume", "--set", "search.max_trials=2") == 0
    row = json.load(open(os.path.join(out, SUMMARY_FILE)))["search"]["trials"][1]
    trial = json.load(open(os.path.join(out, "search", "trial-001", SUMMARY_FILE)))
    assert trial["resumed_at_step"] == 2 and row["wall_time_s"] == trial["wall_time_s"]
    assert row["time_s"] == pytest.approx(trial["wall_time_s"] + max(stopped[0], trial["resumed_train_seconds"]),
                                          abs=0.11)


@pytest.mark.parametrize("setting", [["--peft", "lora"], ["--set", "model.freeze_encoder=true"]])
def test_a_head_only_setting_on_a_whole_model_task_is_refused_before_the_search_writes(files, tmp_path, setting,
                                                                                         capsys):
    """--peft or model.freeze_encoder with --task embedding: refused before OUT/search is written, so the
    corrected command runs in the same --out (it had met "OUT is not empty")."""
    root, tiny = files
    pairs = root / "pairs.csv"
    pairs.write_text("text,positive\nthe goal,a goal\nthe bank,rates cut\nparis team,london team\n", encoding="utf-8")
    out = tmp_path / "out"
    argv = ["finetune", "--search", "--task", "embedding", "--model", tiny, "--train", str(pairs), "--dev", str(pairs),
            "--out", str(out), "--no-progress", *setting]
    assert main(argv) == 2
    assert "is not available for --task embedding" in capsys.readouterr().err
    assert not out.exists() or os.listdir(out) == []
