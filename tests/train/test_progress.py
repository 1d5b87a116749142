"""Progress bars only on a terminal: a log file (stderr not a terminal) gets whole lines now and
then, never a bar's carriage-return redraws. One helper (bertkit/runtime/progress.py) decides."""

import io
import re
import sys

import numpy as np
import pytest
import torch
from helpers import tiny_config

from bertkit.runtime import progress as progress_module
from bertkit.inference.encode import SentenceEncoder
from bertkit.models.heads import BertForMaskedLM
from bertkit.train import Trainer, TrainConfig

STEPS = 6


class Terminal(io.StringIO):
    def isatty(self):
        return True


def tiny_batches(n=4, vocab=40, length=8):
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (n, 2, length), generator=gen)
    return [{"input_ids": x, "attention_mask": torch.ones_like(x), "labels": x} for x in ids]


def train(out, **overrides):
    torch.manual_seed(0)
    cfg = TrainConfig(**{"max_steps": STEPS, "lr": 1e-3, "batch_size": 2, "log_every": 2, "save_every": -1,
                         "device": "cpu", **overrides})
    trainer = Trainer(BertForMaskedLM(tiny_config(40)), tiny_batches(), cfg, out_dir=str(out), progress=True)
    trainer.train()
    return trainer


def test_a_log_file_gets_one_line_at_the_end_and_no_bar(tmp_path, capsys):
    train(tmp_path / "run")
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = [line for line in err.splitlines() if line.startswith("train:")]
    assert len(lines) == 1 and lines[0].startswith(f"train: {STEPS}/{STEPS} step (100%), ")
    assert "loss=" in lines[0] and "lr=" in lines[0]


def test_a_time_budget_shows_the_minutes_left(tmp_path, capsys):
    """With train.max_minutes the step total is an upper bound the clock may cut: the line says
    how much of the budget is left."""
    train(tmp_path / "run", max_minutes=30.0)
    line = [line for line in capsys.readouterr().err.splitlines() if line.startswith("train:")][-1]
    assert ", budget_left=" in line and line.endswith("min") and float(line.split("budget_left=")[1][:-3]) > 29


def test_a_log_file_gets_periodic_lines(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(progress_module, "LOG_EVERY_S", 0.0)  # a line per update
    train(tmp_path / "run")
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("train:")]
    assert [line.split()[1] for line in lines] == [f"{i}/{STEPS}" for i in range(1, STEPS + 1)] + [f"{STEPS}/{STEPS}"]


def test_the_first_log_line_comes_after_ten_seconds_the_others_every_minute(monkeypatch, capsys):
    """A 100,000-line embed printed its first line after 87 s (the first minute had passed mid-batch)."""
    now = [0.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: now[0])
    bar = progress_module.LogLines(total=100, desc="encode", unit="batch")
    for seconds in (5, 11, 30, 70, 72):
        now[0] = seconds
        bar.update(1)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split()[1] for line in lines] == ["2/100", "5/100"]  # at 11 s, then 60 s after it (72 s)


LEFT = r"(<1 min|~\d+ min|~\d+\.\d h) left"  # the time-left estimate's form (its value is the machine's)


def test_log_lines_say_the_time_left_until_the_end(tmp_path, capsys, monkeypatch):
    """Walk P #9: a log line gave step/s and N/M steps but no time to finish. Each line before the
    last says it, for pretrain and finetune alike (both train through Trainer); the last has none."""
    monkeypatch.setattr(progress_module, "LOG_EVERY_S", 0.0)
    train(tmp_path / "run")
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("train:")]
    assert len(lines) == STEPS + 1 and all(re.search(rf"step/s, {LEFT}(, |$)", line) for line in lines[:STEPS - 1])
    assert not [line for line in lines[STEPS - 1:] if "left" in line]  # at the last step and at close: done


def test_the_time_left_comes_from_the_rate_or_the_budget_when_that_ends_sooner(monkeypatch, capsys):
    """A faked clock: no real timing in the test, only which estimate is given and its form."""
    now, budget = [0.0], [None]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(progress_module, "LOG_EVERY_S", 0.0)  # a line per update
    bar = progress_module.LogLines(total=100, desc="train", unit="step", time_left=lambda: budget[0])
    for seconds, left in ((10, None), (20, 60.0)):  # the rate's estimate, then a budget that ends sooner
        now[0], budget[0] = seconds, left
        bar.update(1)
    bar.close()
    rate_line, budget_line, last = capsys.readouterr().err.splitlines()
    assert re.fullmatch(rf"train: \d+/100 step \(\d+%\), [\d.]+ step/s, {LEFT}", rate_line)
    assert re.fullmatch(rf"train: \d+/100 step \(\d+%\), [\d.]+ step/s, {LEFT} \(the time budget\)", budget_line)
    assert "left" not in last  # closed: the work is over, even before the total (a budget stop)
    assert [progress_module.left_text(s) for s in (30, 240, 7200)] == ["<1 min left", "~4 min left", "~2.0 h left"]


def test_a_terminal_gets_the_bar(tmp_path, monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert progress_module.on_terminal()
    train(tmp_path / "run")
    shown = terminal.getvalue()
    assert "\r" in shown and f"{STEPS}/{STEPS}" in shown


def test_no_progress_writes_nothing(tmp_path, capsys):
    torch.manual_seed(0)
    cfg = TrainConfig(max_steps=2, lr=1e-3, batch_size=2, save_every=-1, device="cpu")
    Trainer(BertForMaskedLM(tiny_config(40)), tiny_batches(), cfg, out_dir=str(tmp_path), progress=False).train()
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("terminal", [False, True])
def test_encoding_shows_a_bar_only_on_a_terminal(minilm_dir, capsys, monkeypatch, terminal):
    encoder = SentenceEncoder.from_pretrained(minilm_dir)
    stream = Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    vectors = encoder.encode(["one", "two words", "three more words"], batch_size=1, show_progress=True)
    assert vectors.shape == (3, 384) and np.isfinite(vectors).all()
    shown = stream.getvalue()
    if terminal:
        assert "\r" in shown and "encode" in shown
    else:
        assert "\r" not in shown and shown.splitlines() == [shown.splitlines()[0]]
        assert shown.startswith("encode: 3/3 batch (100%)")


def test_no_matplotlib_costs_the_curves_not_the_run(tmp_path, monkeypatch):
    """A bare GPU image without matplotlib: the run trains and saves, curves.png is skipped with
    one warning (it had ended in an ImportError at the first evaluation, with no model saved)."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.warns(UserWarning, match="matplotlib is not installed") as caught:
        trainer = train(tmp_path / "run", save_every=3)  # a plot after each checkpoint
    assert sum("matplotlib" in str(w.message) for w in caught) == 1
    assert (tmp_path / "run" / f"checkpoint-{STEPS}").is_dir() and trainer.step == STEPS
    assert not (tmp_path / "run" / "curves.png").exists()


def test_a_run_below_fp32_says_so_and_fp32_adds_no_line(tmp_path, capsys):
    """Training in bf16 says it on stderr, as embed/predict/evaluate do; on the CPU, that it is
    the slow choice there. The default on the CPU (auto: fp32) prints nothing."""
    train(tmp_path / "bf16", precision="bf16")
    err = capsys.readouterr().err
    assert "training on cpu in bf16 (slower than fp32 on most CPUs" in err
    train(tmp_path / "auto")
    assert "training on" not in capsys.readouterr().err
