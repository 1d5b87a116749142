"""pretrain's last lines: the kept model's held-out MLM loss beside the context-free unigram loss
(bertkit/commands/pretrain.py `against_unigram`), said plainly when it is not below it; and what
a Ctrl-C before training says."""

from __future__ import annotations

import json

import bertkit.commands.pretrain as command
from bertkit.commands.cli import main
from bertkit.commands.pretrain import against_unigram
from bertkit.errors import RunInterrupted
from bertkit.runtime.run_dir import STATE_FILE


def test_a_model_at_the_unigram_loss_is_said_to_have_learnt_nothing_beyond_word_frequencies(tmp_path):
    (tmp_path / "baseline.json").write_text(json.dumps({"unigram_loss": 6.87}), encoding="utf-8")
    stuck = against_unigram(str(tmp_path), 6.895)  # walk O #11: lr 2e-2 kept at step 225
    assert stuck == ("held-out mlm_loss 6.895 is not below the unigram loss 6.870: the model has not learnt beyond "
                     "word frequencies; try a lower train.lr, more train.max_steps or more text")
    assert against_unigram(str(tmp_path), 4.2) == ("held-out mlm_loss 4.200 against the unigram loss 6.870 (word "
                                                   "frequencies, no context)")
    assert against_unigram(str(tmp_path), None) is None  # no evaluation (a resume with nothing to train)
    assert against_unigram(str(tmp_path / "elsewhere"), 4.2) is None  # no baseline (ELECTRA, no held-out set)
    for damaged in ("{", "[6.87]", '{"unigram_loss": "6.87"}', "\udcff"):  # after a finished run: no traceback
        (tmp_path / "baseline.json").write_text(damaged, encoding="utf-8", errors="surrogateescape")
        assert against_unigram(str(tmp_path), 4.2) is None


def test_a_ctrl_c_before_training_says_what_a_rerun_keeps(tmp_path, capsys, monkeypatch):
    """walk O #12: a Ctrl-C while the tokenizer or the shards were built said only "interrupted"."""
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "pretrain", interrupted)
    code = main(["pretrain", "--config", "configs/pretrain-tiny.toml", "--out", str(tmp_path / "run")])
    assert code == 130
    assert capsys.readouterr().err.strip() == (
        "bertkit pretrain: interrupted before the first checkpoint; run the same command again to start over "
        "(--resume is not needed): a tokenizer it finished and its finished token shards are reused, the rest is "
        "built again")
    (tmp_path / "run" / "checkpoint-40").mkdir(parents=True)  # a --resume run stopped before the Trainer took over
    (tmp_path / "run" / "checkpoint-40" / STATE_FILE).write_bytes(b"")
    assert command.interrupted_before_training(str(tmp_path / "run")).endswith("continue from checkpoint-40")


def test_the_unigram_line_reads_the_kept_models_loss_not_the_last_steps(tmp_path, capsys, monkeypatch):
    """Early stopping on mlm_accuracy kept step 200; the line compared step 400's loss."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "baseline.json").write_text(json.dumps({"unigram_loss": 6.87}), encoding="utf-8")
    finals = {"mlm_loss": 7.5, "mlm_accuracy": 0.1, "best_step": 200, "best_mlm_accuracy": 0.3}
    for kept, line in (({"best_mlm_loss": 4.2}, "held-out mlm_loss 4.200 against the unigram loss 6.870"),
                       ({}, None)):  # the kept step's loss unknown: no line rather than another step's
        monkeypatch.setattr(command, "pretrain", lambda *args, **kwargs: {**finals, **kept})
        assert main(["pretrain", "--config", "configs/pretrain-tiny.toml", "--out", str(out)]) == 0
        said = capsys.readouterr().out
        assert "early stopping kept step 200" in said and "7.500 against" not in said
        assert (line in said) if line else "unigram loss" not in said  # (the run's path names the test)


def test_a_stop_under_torchrun_is_reported_once_by_rank_0(tmp_path, capsys, monkeypatch):
    """walk T: Ctrl-C on `torchrun --nproc_per_node 2 ... pretrain` printed "stopped by SIGINT after
    step 22 of 40; saved ..." once per rank; every rank stops after the same step with the same words."""
    def stopped(*args, **kwargs):
        raise RunInterrupted("stopped by SIGINT after step 22 of 40; saved run/checkpoint-22", 2)

    monkeypatch.setattr(command, "pretrain", stopped)
    said = {}
    for rank in ("0", "1"):
        monkeypatch.setenv("RANK", rank)
        code = main(["pretrain", "--config", "configs/pretrain-tiny.toml", "--out", str(tmp_path / f"run{rank}")])
        assert code == 130
        said[rank] = capsys.readouterr().err
    assert said["0"].strip() == "bertkit pretrain: stopped by SIGINT after step 22 of 40; saved run/checkpoint-22"
    assert said["1"] == ""


def test_a_run_that_saves_no_checkpoint_says_so_not_model_saved_in_none(tmp_path, capsys, monkeypatch):
    """walk V: train.save_every = -1 printed "model saved in None"."""
    out = tmp_path / "run"
    out.mkdir()
    monkeypatch.setattr(command, "pretrain", lambda *args, **kwargs: {"mlm_loss": 7.5})
    (out / "pretrain_config.json").write_text(json.dumps({"train": {"save_every": -1}}), encoding="utf-8")
    assert main(["pretrain", "--config", "configs/pretrain-tiny.toml", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "None" not in said
    assert (f"no model saved in {out}: train.save_every = -1 writes no checkpoint; run again with --set "
            "train.save_every=0 to save the model at the end") in said
    (out / "pretrain_config.json").unlink()  # no run config to read: only that nothing was saved
    assert main(["pretrain", "--config", "configs/pretrain-tiny.toml", "--out", str(out)]) == 0
    assert f"no model saved in {out}\n" in capsys.readouterr().out
