"""Runs own their output directory and are honest on resume (issue 17): a lock refuses a second
run on one --out (and a stale lock is taken over), --out may not be --model, --overwrite keeps
the old model until the new run succeeded, --resume refuses changed options, SIGINT/SIGTERM
save a checkpoint that --resume continues bit-exactly, and --set values are checked for type
and range before any work. Each case runs the commands in-process on tiny models."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import pytest
import torch

from bertkit.cli import main
from bertkit.config import BertConfig
from bertkit.model import BertModel
from bertkit.runlock import LOCK_FILE, RunLock
from bertkit.tokenizer import Tokenizer
from bertkit.train import trainer as trainer_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRETRAIN_CONFIG = os.path.join(ROOT, "configs", "pretrain-tiny.toml")
# The smallest pre-training that still runs the whole recipe: 12 short documents, a 200-piece
# vocabulary, a 1-layer hidden-32 modern encoder.
PRETRAIN_SMALL = ["data.max_documents=12", "tokenizer.vocab_size=200", "data.max_length=32",
                  "model.hidden_size=32", "model.intermediate_size=64", "model.num_hidden_layers=1",
                  "model.num_attention_heads=2", "model.local_attention=16", "train.batch_size=8",
                  "train.warmup_steps=1", "train.log_every=1", "train.eval_every=3", "train.save_every=3",
                  "data.max_eval_examples=8", "train.max_steps=4"]
TEXTS = [("the striker scored a late goal in the match", "sport"), ("the bank cut interest rates", "business"),
         ("a late goal won the cup final", "sport"), ("shares fell as rates rose again", "business"),
         ("the keeper saved a penalty kick", "sport"), ("the firm reported record profits", "business")]
# Fine-tuning settings that keep a run under a second: 6 steps of batch 4, dev evaluated every 2.
FINETUNE_SMALL = ["train.max_steps=6", "train.batch_size=4", "train.eval_every=2", "train.log_every=1",
                  "data.max_length=32"]


@pytest.fixture(autouse=True)
def _no_plots(monkeypatch):
    """curves.png is drawn after every evaluation and checkpoint; matplotlib was 95% of these
    tiny runs (tests/train covers the plot), so here it writes a stand-in file."""
    monkeypatch.setattr(trainer_module, "plot_curves", lambda history, f, baseline=None: f.write(b"png"))


def sets(items):
    return [x for item in items for x in ("--set", item)]


def snapshot(root) -> dict[str, str]:
    """Every file under `root` with a hash of its bytes (a changed file shows too)."""
    out = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_refused(argv, capsys, workdir, *fragments):
    """Exit code 2, one stderr line holding every fragment, no new or changed file in workdir."""
    before = snapshot(workdir)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would be a second stderr line
        code, _, err = run(argv, capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    assert snapshot(workdir) == before


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    """A 1-layer, hidden-32 random encoder with a WordPiece vocabulary of the texts above."""
    root = tmp_path_factory.mktemp("encoder")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(t for t, _ in TEXTS) + "\n", encoding="utf-8")
    tokenizer = Tokenizer.train_wordpiece([str(corpus)], vocab_size=200, min_frequency=1, show_progress=False)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(root / "model", tokenizer=tokenizer)
    data = root / "train.csv"
    data.write_text("text,label\n" + "".join(f"{t},{label}\n" for t, label in TEXTS * 3), encoding="utf-8")
    return {"model": str(root / "model"), "data": str(data)}


def finetune_argv(encoder, out, *extra):
    return ["finetune", "--task", "classification", "--model", encoder["model"], "--train", encoder["data"],
            "--dev", encoder["data"], "--out", out, "--no-progress", *sets(FINETUNE_SMALL), *extra]


def pretrain_argv(out, *extra):
    return ["pretrain", "--config", PRETRAIN_CONFIG, "--out", out, "--no-progress", *sets(PRETRAIN_SMALL), *extra]


# ---------------------------------------------------------------------------- the lock
HOLD_LOCK = textwrap.dedent("""
    import sys, time
    from bertkit.runlock import RunLock
    lock = RunLock(sys.argv[1], "test holder")
    lock.acquire()
    print("locked", flush=True)
    time.sleep(120)
""")


def test_a_second_run_on_a_locked_out_is_refused_and_a_stale_lock_taken_over(encoder, tmp_path, capsys):
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(out)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": ROOT})
    try:
        assert holder.stdout.readline().strip() == "locked"
        for argv in (finetune_argv(encoder, out), pretrain_argv(out), pretrain_argv(out, "--resume")):
            assert_refused(argv, capsys, tmp_path, f"{out} is in use by another bertkit run (pid {holder.pid}",
                           "test holder", f"kill {holder.pid}", "choose another --out")
    finally:
        holder.kill()  # SIGKILL: no clean-up, the lock file stays behind
        holder.wait()
    assert os.path.exists(out / LOCK_FILE)
    with pytest.warns(UserWarning, match=f"taking over the lock of .* left by a run that no longer runs "
                                         f"\\(pid {holder.pid}"):
        code, _, err = run(finetune_argv(encoder, out), capsys)
    assert code == 0, err
    assert not os.path.exists(out / LOCK_FILE)  # released at the end
    assert (out / "finetune_summary.json").exists()


def test_the_lock_is_released_on_error_and_leaves_no_directory(encoder, tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("text,label\n", encoding="utf-8")  # no examples: refused after the lock was taken
    argv = ["finetune", "--task", "classification", "--model", encoder["model"], "--train", bad, "--dev", bad,
            "--out", tmp_path / "out", "--no-progress"]
    assert_refused(argv, capsys, tmp_path, "no training examples")
    assert not (tmp_path / "out").exists()
    # held in this process, a second lock is refused like another process's
    lock = RunLock(tmp_path / "held", "the first run")
    lock.acquire()
    try:
        assert_refused(finetune_argv(encoder, tmp_path / "held"), capsys, tmp_path, f"(pid {os.getpid()}",
                       "the first run")
    finally:
        lock.release()
    assert not (tmp_path / "held").exists()  # the lock made it, nothing else was written: removed


def test_out_naming_a_file_or_an_unwritable_directory_is_one_line(encoder, tmp_path, capsys):
    (tmp_path / "a-file").write_text("x")
    assert_refused(finetune_argv(encoder, tmp_path / "a-file"), capsys, tmp_path, "is a file, not a directory")
    assert_refused(pretrain_argv(tmp_path / "a-file"), capsys, tmp_path, "is a file, not a directory")
    if os.geteuid() == 0:
        return  # root writes anywhere: no permission to be denied
    locked = tmp_path / "read-only"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert_refused(finetune_argv(encoder, locked / "out"), capsys, tmp_path, "permission denied")
        assert_refused(finetune_argv(encoder, locked), capsys, tmp_path, "permission denied")
    finally:
        locked.chmod(0o700)


# ---------------------------------------------------------------------------- --out and --model
def test_out_equal_to_or_inside_model_is_refused_before_any_work(encoder, tmp_path, capsys):
    model = encoder["model"]
    before = snapshot(model)
    for out, relation in ((model, "is"), (os.path.join(model, "sub"), "lies inside"),
                          (os.path.dirname(model), "contains")):
        assert_refused(finetune_argv(encoder, out, "--overwrite"), capsys, tmp_path, f"--out {out} {relation} "
                       f"--model {model}", "choose an --out outside")
    assert snapshot(model) == before


# ---------------------------------------------------------------------------- --overwrite
def test_overwrite_keeps_the_old_model_until_the_new_run_succeeded(encoder, tmp_path, capsys):
    out = tmp_path / "out"
    assert run(finetune_argv(encoder, out), capsys)[0] == 0
    first = snapshot(out)
    assert "model.safetensors" in first and "finetune_summary.json" in first
    assert_refused(finetune_argv(encoder, out), capsys, tmp_path, "already holds a model", "--overwrite")
    # lr 1e30 makes the loss non-finite within a few steps: the new run fails mid-training
    code, _, err = run(finetune_argv(encoder, out, "--overwrite", *sets(["train.lr=1e30"])), capsys)
    assert code == 2 and "loss became" in err, err
    assert snapshot(out) == first  # the old model is intact
    assert sorted(os.listdir(tmp_path)) == ["out"]  # and the new run's directory is gone
    code, _, err = run(finetune_argv(encoder, out, "--overwrite", *sets(["train.seed=7"])), capsys)
    assert code == 0, err
    assert sorted(os.listdir(tmp_path)) == ["out"]
    second = snapshot(out)
    assert second["model.safetensors"] != first["model.safetensors"]
    summary = json.loads((out / "finetune_summary.json").read_text())
    assert summary["train_config"]["seed"] == 7 and summary["steps"] == 6
