"""Runs own their output directory and are honest on resume (issue 17): a lock refuses a second
run on one --out (and a stale lock is taken over), --out may not be --model, --overwrite keeps
the old model until the new run succeeded, --resume refuses changed options, SIGINT/SIGTERM
save a checkpoint that --resume continues bit-exactly, and --set values are checked for type
and range before any work. Each case runs the commands in-process on tiny models."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from bertkit.commands.cli import main
from bertkit.models.config import BertConfig
from bertkit.models.encoder import BertModel
from bertkit.recipes import pretrain as pretrain_recipe
from bertkit.runtime.run_dir import LOCK_FILE, RunLock
from bertkit.tokenizer import Tokenizer
from bertkit.train import trainer as trainer_module

from tests.cli_checks import assert_refused, snapshot

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


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


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
    # as a checkpoint exported by transformers (MiniLM's) records: bertkit's own checkpoints do
    # not write it, which a resume's config check must not count as a difference
    saved = json.loads((root / "model" / "config.json").read_text())
    (root / "model" / "config.json").write_text(json.dumps({"_name_or_path": "org/base", **saved}))
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
    from bertkit.runtime.run_dir import RunLock
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
    assert_refused(finetune_argv(encoder, tmp_path / "a-file" / "out"), capsys, tmp_path, "cannot write to",
                   "not a directory")
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


def test_training_data_inside_out_is_refused_before_any_work(encoder, tmp_path, capsys):
    """--overwrite replaces OUT whole, so a --train or --dev file kept in it would be deleted."""
    out = tmp_path / "run"
    out.mkdir()
    shutil.copy(encoder["data"], out / "train.csv")
    argv = ["finetune", "--task", "classification", "--model", encoder["model"], "--train", out / "train.csv",
            "--dev", encoder["data"], "--out", out, "--overwrite", "--no-progress", *sets(FINETUNE_SMALL)]
    assert_refused(argv, capsys, tmp_path, f"--out {out} contains --train {out / 'train.csv'}",
                   "move", "out of it")


@pytest.mark.parametrize("command", ["predict", "embed", "nearest"])
def test_output_that_is_an_input_a_folder_or_inside_the_model_is_refused_first(command, encoder, tmp_path, capsys):
    """A file the command reads would be replaced by its rows, a folder would fail after the work."""
    texts = tmp_path / "texts.txt"
    texts.write_text("the goal\nrates fell\n", encoding="utf-8")
    model = encoder["model"]
    source = {"predict": "--input", "embed": "--input", "nearest": "--corpus"}[command]
    argv = [command, "--model", model, source, texts] + (["the goal"] if command == "nearest" else [])
    before = snapshot(model)
    assert_refused([*argv, "--output", texts], capsys, tmp_path, f"--output {texts} is {source} {texts}")
    assert_refused([*argv, "--output", tmp_path], capsys, tmp_path, f"--output {tmp_path} is a directory")
    inside = os.path.join(model, "config.json")
    assert_refused([*argv, "--output", inside], capsys, tmp_path, f"--output {inside} is a file of --model {model}")
    assert snapshot(model) == before
    if command != "predict":  # (this encoder has no task head to predict with)
        beside = os.path.join(model, "rows.out")  # a new file in the model's folder replaces nothing
        assert main([str(a) for a in [*argv, "--output", beside]]) == 0
        os.remove(beside)


def test_attention_outputs_on_one_file_or_over_a_model_file_are_refused(encoder, tmp_path, capsys):
    model, page = encoder["model"], tmp_path / "page.html"
    assert_refused(["attention", "--model", model, "the goal", "--html", page, "--stats", page], capsys, tmp_path,
                   "--html and --stats name the same file")
    config = os.path.join(model, "config.json")
    assert_refused(["attention", "--model", model, "the goal", "--html", config], capsys, tmp_path,
                   f"--html {config} is a file of --model {model}")


def test_a_model_option_given_a_file_names_the_directory(encoder, tmp_path, capsys):
    config = os.path.join(encoder["model"], "config.json")
    texts = tmp_path / "texts.txt"
    texts.write_text("the goal\n", encoding="utf-8")
    assert_refused(["embed", "--model", config, "--input", texts, "--output", tmp_path / "x.npy"], capsys, tmp_path,
                   f"{config} is a file; --model takes the model's directory ({encoder['model']})")


def test_out_inside_the_corpus_folder_is_refused_before_any_work(encoder, tmp_path, capsys):
    """The run's files (metrics.jsonl, vocab.txt, shards' meta.json) would be read as documents by
    the next run or resume on that corpus."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(12):
        (corpus / f"{i}.txt").write_text(f"document {i} about shares and goals.\n")
    for out in (corpus, corpus / "run"):
        assert_refused(pretrain_argv(str(out), *sets([f"data.corpus={corpus}"])), capsys, tmp_path,
                       f"--out {out} ", f"data.corpus {corpus}: the run would write into")
        tokenizer = encoder["model"]
        assert run(["prepare", "--corpus", str(corpus), "--tokenizer", tokenizer, "--out", str(out)], capsys)[0] == 2
    assert sorted(os.listdir(corpus)) == sorted(f"{i}.txt" for i in range(12))  # nothing written there


def test_prepare_keeps_earlier_shards_and_leaves_nothing_after_bad_input(encoder, tmp_path, capsys):
    """A second prepare into finished shards rewrote their index first: another corpus replaced
    them silently, and one that failed on its input left them unusable."""
    corpus, bad = tmp_path / "corpus.txt", tmp_path / "bad.jsonl"
    corpus.write_text("document one about shares.\n\ndocument two about goals.\n", encoding="utf-8")
    bad.write_text('{"text": "a b c"}\n{"text": "d e"\n', encoding="utf-8")
    shards = tmp_path / "shards"
    argv = ["prepare", "--corpus", corpus, "--mode", "blank", "--tokenizer", encoder["model"], "--out", shards]
    assert run(argv, capsys)[0] == 0
    meta = (shards / "meta.json").read_text()
    for corpus_argv in (argv, [*argv[:2], bad, "--mode", "jsonl", *argv[5:]]):
        assert_refused(corpus_argv, capsys, tmp_path, f"{shards} already holds complete shards (meta.json); "
                       "pass --resume")
    assert (shards / "meta.json").read_text() == meta
    fresh = tmp_path / "fresh"
    code, _, err = run([*argv[:2], bad, "--mode", "jsonl", *argv[5:8], fresh], capsys)
    assert code == 2 and "line 2 is not valid JSON" in err
    assert not fresh.exists()  # the folder it made, holding no shard, went with the refusal
    code, _, err = run([*argv[:8], fresh, "--shard-tokens", "0"], capsys)  # refused before meta.json exists
    assert code == 2 and "shard_tokens must be positive" in err and not fresh.exists()


# ---------------------------------------------------------------------------- --overwrite
def test_overwrite_keeps_the_old_model_until_the_new_run_succeeded(encoder, tmp_path, capsys, monkeypatch):
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
    signal_during_step(monkeypatch, 2, signal.SIGTERM)  # interrupted: nothing to resume, nothing lost
    code, _, err = run(finetune_argv(encoder, out, "--overwrite"), capsys)
    assert code == 143 and f"{out} is unchanged" in err and "the new run was discarded" in err, err
    monkeypatch.undo()
    assert snapshot(out) == first and sorted(os.listdir(tmp_path)) == ["out"]
    (tmp_path / ".out.new-k2j4").mkdir()  # the sibling a SIGKILLed --overwrite run leaves
    code, _, err = run(finetune_argv(encoder, out, "--overwrite", *sets(["train.seed=7"])), capsys)
    assert code == 0, err
    assert sorted(os.listdir(tmp_path)) == ["out"]
    second = snapshot(out)
    assert second["model.safetensors"] != first["model.safetensors"]
    summary = json.loads((out / "finetune_summary.json").read_text())
    assert summary["train_config"]["seed"] == 7 and summary["steps"] == 6


# ---------------------------------------------------------------------------- signals and resume
def signal_during_step(monkeypatch, step: int, signum: int) -> None:
    """Deliver `signum` to this process as training step `step` begins (the step then finishes)."""
    original = trainer_module.Trainer._train_step

    def step_with_signal(self, batches):
        if self.step + 1 == step:
            signal.raise_signal(signum)
        return original(self, batches)

    monkeypatch.setattr(trainer_module.Trainer, "_train_step", step_with_signal)


def train_rows(out) -> list[tuple]:
    with open(os.path.join(out, "metrics.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return [(r["step"], r["split"], r.get("loss"), r.get("lr"), r.get("accuracy")) for r in rows]


def weights(path) -> dict:
    from safetensors.torch import load_file

    return load_file(os.path.join(path, "model.safetensors"))


def assert_same_weights(a, b) -> None:
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for key in wa:  # the same code path on the same inputs: bit-identical is the claim
        assert torch.equal(wa[key], wb[key]), key


def test_finetune_sigterm_saves_a_checkpoint_and_resume_is_bit_identical(encoder, tmp_path, capsys, monkeypatch):
    reference, out = tmp_path / "reference", tmp_path / "out"
    assert run(finetune_argv(encoder, reference), capsys)[0] == 0
    before = signal.getsignal(signal.SIGTERM)
    signal_during_step(monkeypatch, 3, signal.SIGTERM)
    code, _, err = run(finetune_argv(encoder, out), capsys)
    assert code == 143, err
    assert f"stopped by SIGTERM after step 3 of 6; saved {out / 'checkpoint-3'}" in err
    assert "--resume to continue" in err
    assert signal.getsignal(signal.SIGTERM) is before  # the trainer put the handler back
    monkeypatch.undo()
    assert_refused(finetune_argv(encoder, out), capsys, tmp_path, "holds an unfinished run (checkpoint-3); "
                   "pass --resume to continue it")
    assert_refused(finetune_argv(encoder, out, "--resume", "--overwrite"), capsys, tmp_path, "pass one of them")
    changed = ["train.lr=1e-3", "model.hidden_dropout_prob=0.2", "train.seed=3", "data.max_length=24"]
    assert_refused(finetune_argv(encoder, out, "--resume", *sets(changed)), capsys, tmp_path,
                   "these differ: data.max_length: 32 -> 24; model.hidden_dropout_prob: (unset) -> 0.2; "
                   "train.lr: 5e-05 -> 0.001; train.seed: 0 -> 3;", "only train.baseline, train.compile, train.device, train.epochs")
    data = open(encoder["data"], encoding="utf-8").read()  # edited after the stop: other examples
    try:
        with open(encoder["data"], "w", encoding="utf-8") as f:
            f.write(data.replace("goal", "GOAL"))
        before = snapshot(out)
        code, _, err = run(finetune_argv(encoder, out, "--resume"), capsys)  # (the shared-texts warning first)
        assert code == 2 and snapshot(out) == before
        assert f"--resume: the train data {os.path.abspath(encoder['data'])} is not what the run started with" in err
    finally:
        with open(encoder["data"], "w", encoding="utf-8") as f:
            f.write(data)
    code, printed, err = run(finetune_argv(encoder, out, "--resume", *sets(["train.eval_every=2"])), capsys)
    assert code == 0, err
    assert train_rows(out) == train_rows(reference)
    assert_same_weights(out, reference)
    summary = json.loads((out / "finetune_summary.json").read_text())
    uninterrupted = json.loads((reference / "finetune_summary.json").read_text())
    assert summary["steps"] == 6 and summary["best_step"] == uninterrupted["best_step"]
    # the report's time: this attempt's since the resume, and the steps' time of both attempts
    assert summary["resumed_at_step"] == 3 and uninterrupted["resumed_at_step"] is None
    assert f"s since resuming at step 3, {summary['train_seconds']} s of training steps in all)" in printed
    assert_refused(finetune_argv(encoder, out, "--resume"), capsys, tmp_path, "holds a finished run")


def test_pretrain_sigint_saves_a_checkpoint_and_resume_is_bit_identical(tmp_path, capsys, monkeypatch):
    reference, out = tmp_path / "reference", tmp_path / "out"
    assert run(pretrain_argv(reference), capsys)[0] == 0
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN where the suite runs as a background job
    signal_during_step(monkeypatch, 2, signal.SIGINT)
    code, _, err = run(pretrain_argv(out), capsys)
    assert code == 130, err
    assert f"stopped by SIGINT after step 2 of 4; saved {out / 'checkpoint-2'}" in err
    assert signal.getsignal(signal.SIGINT) is before  # the trainer put the handler back
    monkeypatch.undo()
    assert_refused(pretrain_argv(out), capsys, tmp_path, "already holds checkpoint-2; pass --resume")
    changed = ["train.lr=1e-3", "train.seed=5", "train.batch_size=4", "model.embedding_dropout=0.1"]
    assert_refused(pretrain_argv(out, "--resume", *sets(changed)), capsys, tmp_path,
                   "model.embedding_dropout: (unset) -> 0.1; train.batch_size: 8 -> 4; train.lr: 0.002 -> 0.001; "
                   "train.seed: 0 -> 5;")
    # what a SIGKILL can leave: an atomic write's temporary, a checkpoint half pruned
    (out / ".tmp-k2j4-curves.png").write_bytes(b"half")
    (out / ".tmp-checkpoint-pruned-checkpoint-1").mkdir()
    code, _, err = run(pretrain_argv(out, "--resume", *sets(["train.keep_last=3"])), capsys)
    assert code == 0, err
    assert not [n for n in os.listdir(out) if n.startswith(".")]  # leftovers and the lock: gone
    assert [r[:3] for r in train_rows(out)] == [r[:3] for r in train_rows(reference)]
    assert_same_weights(out / "checkpoint-4", reference / "checkpoint-4")


@pytest.mark.filterwarnings("ignore:the lr schedule differs")  # max_steps 2 -> 3
def test_trainer_refuses_a_changed_train_config_on_resume(tmp_path):
    from bertkit.errors import ConfigError
    from bertkit.models.heads import BertForMaskedLM
    from bertkit.train import Trainer, TrainConfig

    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    ids = torch.randint(5, 50, (4, 8))
    batches = [{"input_ids": ids, "labels": ids}]

    def trainer(**settings):
        torch.manual_seed(0)
        cfg = TrainConfig(**{"max_steps": 2, "lr": 1e-3, "batch_size": 4, "log_every": 1, **settings})
        return Trainer(BertForMaskedLM(config), batches, cfg, tmp_path, progress=False)

    trainer().train()
    with pytest.raises(ConfigError, match=r"train.adam_eps: 1e-06 -> 1e-08; train.lr: 0.001 -> 0.002"):
        trainer(lr=2e-3, adam_eps=1e-8, max_steps=3).train(resume=True)
    assert trainer(max_steps=3, log_every=2).train(resume=True)["step"] == 3  # extending is allowed


def test_an_option_newer_than_the_checkpoint_passes_only_at_its_default():
    from bertkit.runtime.resume_check import changed_options

    saved = {"train": {"lr": 1e-3}}  # written before train.decay_ratio existed
    defaults = {"train": {"lr": 1e-4, "decay_ratio": 0.2}}
    assert changed_options(saved, {"train": {"lr": 1e-3, "decay_ratio": 0.2}}, defaults=defaults) == []
    assert changed_options(saved, {"train": {"lr": 1e-3, "decay_ratio": 0.5}}, defaults=defaults) == [
        "train.decay_ratio: (unset) -> 0.5"]
    assert changed_options(saved, {"train": {"lr": 1e-3, "decay_ratio": 0.2}}) == [
        "train.decay_ratio: (unset) -> 0.2"]  # without defaults nothing can be assumed


# ---------------------------------------------------------------------------- --set values
# (command, assignment, fragments of the one error line): the key, the value, the type or range
SET_CASES = [
    ("both", "train.adam_eps=abc", ["train.adam_eps must be a number, got 'abc'"]),
    ("both", "train.adam_eps=0", ["train.adam_eps must be a positive number", "got 0"]),
    ("both", "train.lr=inf", ["train.lr must be a positive number (e.g. 1e-4), got inf"]),  # walk V: was accepted
    ("both", "train.head_lr=inf", ["train.head_lr must be a positive number", "got inf"]),
    ("both", "train.seed=abc", ["train.seed must be an integer, got 'abc'"]),
    ("both", "train.seed=1.5", ["train.seed must be an integer, got 1.5"]),
    ("both", "train.seed=-1", ["train.seed must be an integer in [0, 2**63), got -1"]),
    ("both", "train.device=quantum", ["train.device must be one of auto, cpu, cuda, cuda:N or mps", "'quantum'"]),
    ("both", "train.beta2=2", ["unknown key train.beta2; did you mean train.adam_beta2?"]),
    ("both", "train.adam_beta2=2", ["train.adam_beta2 must be a number in [0, 1)", "got 2"]),
    ("both", "train.eval_every=true", ["train.eval_every must be an integer, got True"]),
    ("both", "train.save_every=true", ["train.save_every must be an integer, got True"]),
    ("both", "train.keep_last=-1", ["train.keep_last must be an integer >= 0", "0 to keep every checkpoint",
                                    "got -1"]),
    ("both", "train.grad_clip=nan", ["train.grad_clip must be a number >= 0", "got nan"]),
    ("both", "train.weight_decay=-1", ["train.weight_decay must be a number >= 0, got -1"]),
    ("both", "train.llrd=abc", ["train.llrd must be a number, got 'abc'"]),
    ("both", "train.lr_end=abc", ["train.lr_end must be a number, got 'abc'"]),
    ("both", "train.schedule=3", ["train.schedule must be a string, got 3"]),
    ("both", "data.max_length=abc", ["data.max_length must be an integer, got 'abc'"]),
    ("pretrain", "data.max_length=100000", ["data.max_length must be between 8 and 8192", "got 100000"]),
    ("pretrain", "data.mlm_probability=0", ["data.mlm_probability must be in (0, 1)", "got 0"]),
    ("pretrain", "data.masking=everything", ["data.masking 'everything' is not known", "whole_word"]),
    ("pretrain", "tokenizer.vocab_size=abc", ["tokenizer.vocab_size must be an integer, got 'abc'"]),
    ("pretrain", "model.num_hidden_layers=1.5", ["num_hidden_layers must be a positive integer, got 1.5"]),
    ("pretrain", "early_stopping.patience=true", ["early_stopping.patience must be an integer, got True"]),
    ("pretrain", "tokenizer.lowercase=1", ["tokenizer.lowercase must be true or false, got 1"]),
    ("pretrain", "data.keywords=3", ["data.keywords must be a list or a string, got 3"]),
    ("finetune", "train.epochs=abc", ["train.epochs must be a number, got 'abc'"]),
    ("finetune", "model.hidden_dropout_prob=2", ["model.hidden_dropout_prob must be a number in [0, 1), got 2"]),
    ("finetune", "model.classifier_dropout=abc", ["model.classifier_dropout must be a number in [0, 1), got 'abc'"]),
    ("finetune", "data.text_column=3", ["data.text_column must be a string, got 3", "quote it"]),
    ("finetune", 'data.text_column="label"', ["data.text_column and data.label_column both name the column 'label'",
                                              "(the model would read its label as its input)"]),
    ("finetune", 'data.pair_column="text"', ["data.text_column and data.pair_column both name the column 'text'",
                                             "(each text would be paired with itself)"]),
]


@pytest.mark.parametrize("command,assignment,fragments",
                         [pytest.param(c, a, f, id=f"{c}-{a}") for command, a, f in SET_CASES
                          for c in (("pretrain", "finetune") if command == "both" else (command,))])
def test_bad_set_values_are_one_line_before_any_work(command, assignment, fragments, encoder, tmp_path, capsys):
    out = tmp_path / "out"
    argv = finetune_argv(encoder, out) if command == "finetune" else pretrain_argv(out)
    assert_refused(argv + ["--set", assignment], capsys, tmp_path, *fragments)
    assert not out.exists()  # nothing built (no tokenizer/, shards/, metrics.jsonl)


@pytest.mark.parametrize("assignment,fragment", [
    ("model.num_hidden_layers=1.5", "num_hidden_layers must be a positive integer, got 1.5"),
    ("model.num_attention_heads=7", "must be divisible by num_attention_heads (7)"),
])
def test_a_bad_model_value_is_refused_before_a_tokenizer_is_trained(assignment, fragment, tmp_path, capsys,
                                                                    monkeypatch):
    """The [model] values were checked with the trained tokenizer's vocabulary: minutes of training
    on a large corpus came before the refusal."""
    monkeypatch.setattr(pretrain_recipe, "train_tokenizer", lambda *args: pytest.fail("a tokenizer was trained"))
    assert_refused(pretrain_argv(tmp_path / "out", "--set", assignment), capsys, tmp_path, fragment)


@pytest.mark.parametrize("recipe,fragment", [
    ("epochs = 2\n", "epochs is a key of [train], not a section: put it under [train] (train.epochs)"),
    ("[trian]\nepochs = 2\n", "unknown section [trian] in the recipe; did you mean [train]?"),
    ("[tokenizer]\nvocab_size = 100\n", "the recipe has a [tokenizer] section: it is a pre-training recipe"),
])
def test_a_recipe_key_outside_its_section_is_named_with_the_section(recipe, fragment, encoder, tmp_path, capsys):
    config = tmp_path / "recipe.toml"
    config.write_text(recipe, encoding="utf-8")
    assert_refused(finetune_argv(encoder, tmp_path / "out", "--config", config), capsys, tmp_path, fragment)


def test_pretrain_given_a_fine_tuning_recipe_says_so(tmp_path, capsys):
    """It said "unknown key data.eval_batch_size; did you mean data.eval_fraction?"."""
    config = tmp_path / "recipe.toml"
    config.write_text("[data]\nlabel_column = \"topic\"\n[train]\nepochs = 3\n", encoding="utf-8")
    assert_refused(["pretrain", "--config", config, "--out", tmp_path / "out"], capsys, tmp_path,
                   "the recipe sets data.label_column, a fine-tuning setting: it is a fine-tuning recipe")


def test_resume_of_a_folder_that_holds_no_run_is_refused(encoder, tmp_path, capsys):
    """A typo in --out with --resume started a fresh run from scratch beside the one meant."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "finetune_config.json").write_text("{}")
    for argv in (finetune_argv(encoder, tmp_path / "mien", "--resume"), pretrain_argv(tmp_path / "mien", "--resume")):
        assert_refused(argv, capsys, tmp_path, f"--resume: {tmp_path / 'mien'} holds no run to continue (did you mean "
                       f"{tmp_path / 'mine'}?)")
    assert not (tmp_path / "mien").exists()


def test_the_run_record_leaves_what_the_epochs_set_unset():
    """finetune_config.json holds the options as given: max_steps and eval_every come from
    train.epochs once the data is known, so the record says null rather than a placeholder step count."""
    from bertkit.recipes.finetune import build_recipe, run_record

    derived = run_record("classification", ".", "train.csv", "dev.csv", build_recipe({}))["train"]
    assert derived["max_steps"] is None and derived["eval_every"] is None and derived["epochs"] == 6.0
    given = run_record("classification", ".", "train.csv", "dev.csv",
                       build_recipe({"train": {"max_steps": 40, "eval_every": 10}}))["train"]
    assert (given["max_steps"], given["eval_every"]) == (40, 10)


def test_a_missing_general_corpus_is_named_by_its_key_before_any_work(tmp_path, capsys):
    """The DAPT configs name a general corpus the user may not have: refused before the tokenizer
    and shards are built, naming data.general_corpus and how to leave it out."""
    assert_refused(pretrain_argv(str(tmp_path / "out"), *sets([f"data.general_corpus={tmp_path / 'gone.jsonl'}"])),
                   capsys, tmp_path, "data.general_corpus: corpus path", "gone.jsonl does not exist",
                   "'data.general_corpus=\"\"'")


def test_a_single_text_file_corpus_is_refused_before_any_work(tmp_path, capsys):
    corpus = tmp_path / "all.txt"
    corpus.write_text("one long text.\n\nwith blank lines between its documents.\n")
    assert_refused(pretrain_argv(str(tmp_path / "out"), *sets([f"data.corpus={corpus}"])), capsys, tmp_path,
                   "the corpus has 1 document(s)", "--set data.mode=blank")
    assert not (tmp_path / "out").exists()  # no tokenizer/ or shards/ first


def test_prepare_refuses_a_one_document_corpus_before_tokenizing_as_pretrain_does(encoder, tmp_path, capsys):
    """prepare tokenized a one-article-per-line file as one document, and pretrain refused the shards
    only afterwards (walk O #4): the same check, with the same message, now runs first."""
    corpus = tmp_path / "lines.txt"
    corpus.write_text("".join(f"article {i} about shares.\n" for i in range(4)), encoding="utf-8")
    argv = ["prepare", "--corpus", corpus, "--tokenizer", encoder["model"], "--out", tmp_path / "shards"]
    assert_refused(argv, capsys, tmp_path, "the corpus has 1 document(s)", "--set data.mode=line", "--mode line")
    assert run([*argv, "--mode", "line"], capsys)[0] == 0
    assert json.loads((tmp_path / "shards" / "meta.json").read_text())["num_documents"] == 4


@pytest.mark.parametrize("name, content, fragment", [
    ("empty.txt", b"", "empty.txt is empty"), ("blank.txt", b" \n\n", "blank.txt is empty"),
    ("big.txt.gz", b"\x1f\x8b\x08\x00" + bytes(range(1, 200)), "big.txt.gz is gzip-compressed: gunzip it first")])
def test_an_empty_or_gzip_corpus_file_is_said_so_not_counted_as_one_document(name, content, fragment, tmp_path,
                                                                              capsys):
    """Both got "the corpus has 1 document(s) ... separate by blank lines" (walk O #6)."""
    corpus = tmp_path / name
    corpus.write_bytes(content)
    for mode in ("file", "blank"):
        assert_refused(pretrain_argv(str(tmp_path / "out"), *sets([f"data.corpus={corpus}", f"data.mode={mode}"])),
                       capsys, tmp_path, fragment)


def test_tokenizer_train_on_a_gzip_file_says_gunzip_not_re_encode(tmp_path, capsys):
    """It said "not valid UTF-8; re-encode it (iconv ...)" for a .gz file, after the trainer failed."""
    packed = tmp_path / "texts.txt.gz"
    packed.write_bytes(b"\x1f\x8b\x08\x00" + bytes(range(1, 200)))
    code, _, err = run(["tokenizer", "train", "--files", packed, "--vocab-size", "120", "--out", tmp_path / "tok"],
                       capsys)
    assert code == 2 and "gzip-compressed: gunzip it first" in err and "iconv" not in err
    assert not (tmp_path / "tok").exists()


def test_a_tokenizer_trained_into_out_tokenizer_is_refused_not_deleted(tmp_path, capsys):
    """walk O #1: `tokenizer train --out runs/mytext/tokenizer` then `pretrain --out runs/mytext`
    deleted the user's tokenizer (no record of a pretrain run's data) and trained another."""
    corpus = tmp_path / "texts.txt"
    corpus.write_text("\n\n".join(t for t, _ in TEXTS * 4) + "\n", encoding="utf-8")
    out, mine = tmp_path / "runs", tmp_path / "runs" / "tokenizer"
    code, _, err = run(["tokenizer", "train", "--files", corpus, "--vocab-size", "120", "--out", mine], capsys)
    assert code == 0, err
    before = (mine / "tokenizer.json").read_bytes()
    code, _, err = run(pretrain_argv(out), capsys)
    assert code == 2 and "holds a tokenizer that no pretrain run made" in err
    assert f"--set tokenizer.path={mine}" in err
    assert (mine / "tokenizer.json").read_bytes() == before  # kept as it was
    code, said, err = run(pretrain_argv(out, *sets([f"tokenizer.path={mine}"])), capsys)  # the fix the refusal names
    assert code == 0, err
    assert "held-out mlm_loss" in said and "the unigram loss" in said  # walk O #11: the last line compares them
    assert (mine / "tokenizer.json").read_bytes() == before


def test_a_pretrain_run_refuses_a_foreign_tokenizer_before_it_reads_the_corpus(tmp_path, capsys, monkeypatch):
    (tmp_path / "runs" / "tokenizer").mkdir(parents=True)
    (tmp_path / "runs" / "tokenizer" / "tokenizer.json").write_text("{}", encoding="utf-8")

    def no_work(*args, **kwargs):
        raise AssertionError("the run started before the refusal")

    monkeypatch.setattr(pretrain_recipe, "run_pretraining", no_work)
    code, _, err = run(pretrain_argv(tmp_path / "runs"), capsys)
    assert code == 2 and "holds a tokenizer that no pretrain run made" in err


def test_shards_the_user_prepared_into_out_shards_are_refused_not_rebuilt(tmp_path, capsys):
    """As the tokenizer of walk O #1: `prepare --out runs/shards` then `pretrain --out runs` on the
    text rebuilt the user's shards over (another origin) with only a warning."""
    corpus = tmp_path / "texts.txt"
    corpus.write_text("\n\n".join(t for t, _ in TEXTS * 4) + "\n", encoding="utf-8")
    tok, out = tmp_path / "tok", tmp_path / "runs"
    assert run(["tokenizer", "train", "--files", corpus, "--vocab-size", "120", "--out", tok], capsys)[0] == 0
    code, _, err = run(["prepare", "--corpus", corpus, "--mode", "blank", "--tokenizer", tok, "--out", out / "shards",
                        "--no-progress"], capsys)
    assert code == 0, err
    before = (out / "shards" / "meta.json").read_bytes()
    code, _, err = run(pretrain_argv(out, *sets([f"data.corpus={corpus}", "data.mode=blank"])), capsys)
    assert code == 2 and "holds shards made by bertkit prepare" in err and f"data.corpus={out / 'shards'}" in err
    assert (out / "shards" / "meta.json").read_bytes() == before
    code, _, err = run(pretrain_argv(out, *sets([f"data.corpus={out / 'shards'}", f"tokenizer.path={tok}"])), capsys)
    assert code == 0, err  # the way the refusal names


def test_a_pretrain_made_tokenizer_with_an_unreadable_record_is_said_so_and_retrained(tmp_path):
    made = tmp_path / "tokenizer"
    made.mkdir()
    (made / "tokenizer.json").write_text("{}", encoding="utf-8")
    (made / pretrain_recipe.TOKENIZER_ORIGIN).write_text("{not json", encoding="utf-8")
    with pytest.warns(UserWarning, match=f"its {pretrain_recipe.TOKENIZER_ORIGIN} is unreadable"):
        pretrain_recipe.drop_stale_tokenizer(str(made), {"corpus": "bbc"})  # not "an older bertkit"
    assert not made.exists()


def test_finetune_resume_before_the_first_checkpoint_says_it_starts_over(encoder, tmp_path, capsys):
    """walk T: `kill -9` before the first checkpoint left finetune_config.json and metrics.jsonl;
    `--resume` trained from step 0 again saying only that it took over a dead run's lock."""
    out = tmp_path / "run"
    assert run(finetune_argv(encoder, out), capsys)[0] == 0
    for name in os.listdir(out):  # what the killed run had written: its record, no checkpoint
        if name != "finetune_config.json":
            (shutil.rmtree if (out / name).is_dir() else os.remove)(out / name)
    # pytest records warnings rather than letting them reach stderr: catch it as a warning
    said = f"--resume: {out} holds no checkpoint yet (the run stopped before its first save): training from step 0"
    with pytest.warns(UserWarning, match=re.escape(said)):
        assert run(finetune_argv(encoder, out, "--resume"), capsys)[0] == 0


def test_a_resume_under_fewer_processes_skips_the_batches_all_ranks_drew_and_says_what_changes(tmp_path):
    """walk T: a run stopped under torchrun --nproc_per_node 2 and resumed by one process skipped
    only one rank's count of the epoch's batches (half of those trained on came again), and the
    warning named only the RNG, though each step's examples halve (train.batch_size is per process)."""
    from bertkit.models.heads import BertForMaskedLM
    from bertkit.runtime.run_dir import STATE_FILE
    from bertkit.train import Trainer, TrainConfig

    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)

    class Batches:  # an epoch of 8 batches that records where the Trainer asks it to start
        def __init__(self):
            self.skips = []

        def skip(self, n):
            self.skips.append(n)

        def __iter__(self):
            generator = torch.Generator().manual_seed(0)
            for _ in range(8 - (self.skips[-1] if self.skips else 0)):
                ids = torch.randint(5, 50, (4, 8), generator=generator)
                yield {"input_ids": ids, "labels": ids}

    def trainer(data, steps):
        cfg = TrainConfig(max_steps=steps, lr=1e-3, batch_size=4, log_every=1)
        return Trainer(BertForMaskedLM(config), data, cfg, tmp_path, progress=False)

    trainer(Batches(), 2).train()
    path = tmp_path / "checkpoint-2" / STATE_FILE
    state = torch.load(path, weights_only=True)
    state["ranks"] = state["ranks"] * 2  # as two processes write it: 2 batches drawn by each
    torch.save(state, path)
    data = Batches()
    with pytest.warns(UserWarning, match=r"written by 2 processes, this run has 1: each step now trains on 4 "
                                         r"examples, not 8 \(train.batch_size is per process\), the epoch goes on "
                                         r"after the 4 batches drawn.*--nproc_per_node 2"):
        trainer(data, 3).train(resume=True)
    assert data.skips == [4]


def test_a_signal_during_an_evaluation_announces_no_step_the_run_will_not_take(tmp_path, capsys):
    """walk T: Ctrl-C during finetune's evaluation after step 36 printed "finishing step 37", then
    "stopped by SIGINT after step 36": the run stops after the step done, so no number is promised."""
    from bertkit.models.heads import BertForMaskedLM
    from bertkit.train import Trainer, TrainConfig

    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    ids = torch.randint(5, 50, (4, 8), generator=torch.Generator().manual_seed(0))

    def evaluate(model):  # Ctrl-C arrives while the step-2 evaluation runs
        os.kill(os.getpid(), signal.SIGINT)
        return {"loss": 1.0}

    cfg = TrainConfig(max_steps=4, lr=1e-3, batch_size=4, log_every=1, eval_every=2)
    trainer = Trainer(BertForMaskedLM(config), [{"input_ids": ids, "labels": ids}] * 4, cfg, tmp_path,
                      eval_fn=evaluate, progress=False)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # SIG_IGN in a background job
    try:
        with pytest.raises(BaseException, match="after step 2 of 4"):
            trainer.train()
    finally:
        signal.signal(signal.SIGINT, before)
    out = capsys.readouterr().out
    assert "SIGINT: finishing the step in progress, then saving a checkpoint" in out
    assert "step 3" not in out


def test_pretrain_resume_before_the_first_checkpoint_says_it_starts_over(tmp_path, capsys):
    """walk T: pretrain killed (kill -9) after its tokenizer and shards, before checkpoint-N: `--resume`
    trained from step 0 saying only that it took over a dead run's lock (as finetune did)."""
    out = tmp_path / "run"
    assert run(pretrain_argv(out), capsys)[0] == 0
    for name in os.listdir(out):  # what the killed run had left: its record, tokenizer and shards
        if name.startswith("checkpoint-") or name == "metrics.jsonl":
            (shutil.rmtree if (out / name).is_dir() else os.remove)(out / name)
    said = f"--resume: {out} holds no checkpoint yet (the run stopped before its first save): training from step 0"
    with pytest.warns(UserWarning, match=re.escape(said)):
        assert run(pretrain_argv(out, "--resume"), capsys)[0] == 0
