"""train.max_minutes: the run ends after the step whose training time crosses the budget, with
the final evaluation and checkpoint; the time is logged, saved, and carried over by a resume."""

import json
import os
import time

import pytest
from test_trainer import make_trainer

import bertkit.train.trainer as trainer_module
from bertkit.errors import ConfigError
from bertkit.train import TrainConfig, list_checkpoints
from bertkit.train.trainer import load_trainer_state


class SteppingClock:
    """perf_counter that advances `seconds` per call: a step (timed by two calls) takes exactly
    that long, whatever the machine's load."""

    def __init__(self, seconds: float):
        self.now, self.seconds = 0.0, seconds

    def perf_counter(self) -> float:
        self.now += self.seconds
        return self.now

    def __getattr__(self, name):
        return getattr(time, name)


def rows(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def test_the_budget_stops_the_run_and_resume_continues_it(tmp_path, bbc_tok_examples, monkeypatch):
    tok, _, examples = bbc_tok_examples
    monkeypatch.setattr(trainer_module, "time", SteppingClock(5.0))
    # 5 s per step, 0.25 min = 15 s: the budget is reached at step 3 (of 100)
    trainer = make_trainer(tmp_path, examples, tok.vocab_size, max_steps=100, max_minutes=0.25,
                           save_every=0, log_every=2, hidden=32)
    trainer.eval_fn = lambda model: {"probe": 1.0}
    trainer.train()
    assert trainer.step == 3
    assert [s for s, _ in list_checkpoints(str(tmp_path))] == [3]
    evals = [r for r in rows(tmp_path) if r["split"] == "eval"]
    assert [(r["step"], r["train_seconds"]) for r in evals] == [(3, 15.0)]
    assert [r["train_seconds"] for r in rows(tmp_path) if r["split"] == "train"] == [10.0, 15.0]
    assert load_trainer_state(str(tmp_path / "checkpoint-3"))["train_seconds"] == pytest.approx(15.0)

    # Resumed with a 30 s budget: 15 s are spent already, so three more steps.
    resumed = make_trainer(tmp_path, examples, tok.vocab_size, max_steps=100, max_minutes=0.5,
                           save_every=0, log_every=2, hidden=32)
    resumed.train(resume=True)
    assert resumed.step == 6 and resumed.train_seconds == pytest.approx(30.0)
    # max_steps still ends a run that has time left
    capped = make_trainer(tmp_path / "capped", examples, tok.vocab_size, max_steps=2, max_minutes=60.0,
                          save_every=0, hidden=32)
    capped.train()
    assert capped.step == 2


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), "30", True])
def test_a_bad_budget_is_refused(value):
    with pytest.raises(ConfigError, match="train.max_minutes"):
        TrainConfig(max_minutes=value)


def test_pretraining_in_budget_chunks_trains_as_one_run(tmp_path, monkeypatch, capsys):
    """What benchmarks/bench_time_to_quality.py relies on: `bertkit pretrain` stopped by the
    budget and resumed with a larger one takes the same steps as one run with the larger budget."""
    from test_recipe import CONFIG, SMALL, sets

    from tests.cli_checks import run_command

    settings = [*SMALL, "train.max_steps=100", "train.log_every=1", "train.eval_every=0", "train.save_every=0"]

    def run(out, minutes, resume=False):
        monkeypatch.setattr(trainer_module, "time", SteppingClock(5.0))
        args = ["--config", CONFIG, "--out", str(out), "--no-progress", *sets([*settings, f"train.max_minutes={minutes}"])]
        assert run_command("pretrain", args + (["--resume"] if resume else [])) == 0

    run(tmp_path / "one", 0.5)
    assert "the time budget (train.max_minutes) ended the run at step 6\n" in capsys.readouterr().out
    run(tmp_path / "chunks", 0.25)
    run(tmp_path / "chunks", 0.5, resume=True)
    one, chunks = ([(r["step"], r["loss"]) for r in rows(tmp_path / name) if r["split"] == "train"]
                   for name in ("one", "chunks"))
    assert [s for s, _ in chunks] == [1, 2, 3, 4, 5, 6] == [s for s, _ in one]
    assert [loss for _, loss in chunks] == pytest.approx([loss for _, loss in one], rel=1e-6)


def test_resuming_a_finished_run_says_there_is_nothing_to_train(tmp_path, capsys):
    """It had printed "resuming from ... (step 2)" and nothing after it."""
    from test_recipe import CONFIG, SMALL, sets

    from tests.cli_checks import run_command

    args = ["--config", CONFIG, "--out", str(tmp_path / "run"), "--no-progress", *sets([*SMALL, "train.max_steps=2"])]
    assert run_command("pretrain", args) == 0
    first = capsys.readouterr().out  # the tokenizer's training is said before it starts (a minute on 46 MB)
    assert first.startswith("pretrain: training a wordpiece tokenizer of ") and "tokens on data.corpus\n" in first
    assert run_command("pretrain", args + ["--resume"]) == 0
    out = capsys.readouterr().out
    assert f"nothing to train: the run in {tmp_path / 'run'} had reached train.max_steps\n" in out
    assert f"model saved in {tmp_path / 'run' / 'checkpoint-2'}\n" in out
    # with early stopping the resumed keeper replays its evaluations: still nothing to train (it printed "final: ")
    stopping = ["--config", CONFIG, "--out", str(tmp_path / "es"), "--no-progress",
                *sets([*SMALL, "train.max_steps=2", "train.eval_every=1", "early_stopping.patience=5"])]
    assert run_command("pretrain", stopping) == 0
    capsys.readouterr()
    assert run_command("pretrain", stopping + ["--resume"]) == 0
    out = capsys.readouterr().out
    assert "final:" not in out and "nothing to train" in out and "(early stopping kept step " in out


def test_a_finished_run_scores_as_the_benchmark_arm(tmp_path, monkeypatch):
    """bench_time_to_quality.py --bertkit-run: a finished run's checkpoints, each at the training
    time its trainer state recorded, on the 15%-masked yardstick; those past the budget left out."""
    import sys
    from argparse import Namespace

    from test_recipe import CONFIG, SMALL, sets

    from tests.cli_checks import run_command

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    try:
        import bench_time_to_quality as bench
    finally:
        sys.path.pop(0)
    monkeypatch.setattr(trainer_module, "time", SteppingClock(5.0))  # 5 s per step
    out = tmp_path / "run"
    settings = [*SMALL, "train.max_steps=6", "train.eval_every=0", "train.save_every=2", "train.keep_last=10"]
    assert run_command("pretrain", ["--config", CONFIG, "--out", str(out), "--no-progress", *sets(settings)]) == 0
    cfg = bench.run_recipe(str(out))
    assert cfg.train.max_steps == 6 and cfg.data.max_length == 32  # the run's recipe, not the config file's
    args = Namespace(bertkit_run=str(out), minutes=20 / 60, eval_every=4.0, device="cpu")  # 20 s (+4 s): steps 2 and 4
    points, info, (tokenizer, examples, batches) = bench.finished_arm(args, cfg)
    assert [(p["step"], p["train_seconds"]) for p in points] == [(0, 0.0), (2, 10.0), (4, 20.0)]
    assert info["steps"] == 4 and info["stopped_by"] == "clock"
    assert points[2]["mlm_loss"] < points[0]["mlm_loss"]  # trained weights, not the random start
    assert examples and sum(len(b["input_ids"]) for b in batches) > 0


def test_schedule_over_minutes_decays_as_the_budget_runs_out(tmp_path, bbc_tok_examples, monkeypatch):
    """schedule_over = "minutes": after a step at training time t the lr is the schedule's at step
    max_steps * t / budget, so the warmup and the decay follow the clock, not the step count, and a
    resumed run takes the same lrs and losses as one that never stopped."""
    tok, _, examples = bbc_tok_examples
    settings = dict(max_steps=100, max_minutes=0.5, warmup_steps=10, schedule="linear", lr=1e-3,
                    schedule_over="minutes", save_every=0, log_every=1, hidden=32)

    def lrs_and_losses(out):
        return [(r["step"], r["lr"], r["loss"]) for r in rows(out) if r["split"] == "train"]

    monkeypatch.setattr(trainer_module, "time", SteppingClock(5.0))  # 5 s a step: 30 s = 6 steps
    one = make_trainer(tmp_path / "one", examples, tok.vocab_size, **settings)
    one.train()
    assert one.step == 6  # the budget ended it, far before max_steps
    # step k+1 runs at the schedule's step 100 * 5k / 30: warmup 10 steps = the first 3 s
    expected = [0.0] + [1e-3 * (100 - 100 * 5 * k / 30) / 90 for k in range(1, 6)]
    got = lrs_and_losses(tmp_path / "one")
    assert [lr for _, lr, _ in got] == pytest.approx(expected)
    assert one.optimizer.param_groups[0]["lr"] == pytest.approx(0.0)  # fully decayed as time ran out

    monkeypatch.setattr(trainer_module, "time", SteppingClock(5.0))
    first = make_trainer(tmp_path / "two", examples, tok.vocab_size, **settings)

    def stop_at_three(model):
        first.stop_requested = first.step == 3
        return {"probe": 1.0}

    first.eval_fn = stop_at_three
    first.config.eval_every = 1
    first.train()
    assert first.step == 3
    rest = make_trainer(tmp_path / "two", examples, tok.vocab_size, **settings)
    rest.train(resume=True)
    assert rest.step == 6
    resumed = lrs_and_losses(tmp_path / "two")
    assert [s for s, *_ in resumed] == [1, 2, 3, 4, 5, 6]
    assert [lr for _, lr, _ in resumed] == pytest.approx(expected)
    assert [loss for *_, loss in resumed] == pytest.approx([loss for *_, loss in got], rel=1e-6)


def test_schedule_over_minutes_needs_a_budget():
    with pytest.raises(ConfigError, match="train.max_minutes"):
        TrainConfig(schedule_over="minutes")
    with pytest.raises(ConfigError, match="schedule_over"):
        TrainConfig(schedule_over="hours", max_minutes=1.0)
