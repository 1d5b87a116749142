"""One rule for files (issue 30): every way a file a user hands bertkit can be malformed (config,
tokenizer files, weights, shard index, trainer state) and every way a write can fail (no space,
no permission, a read-only file system) ends in one line naming the path and what to do, with
the files that existed before unchanged. Failed writes are simulated by making the low-level
call (fsync, replace, open) raise OSError with the errno; root ignores permissions, so a real
read-only directory is tried only when not root."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import warnings

import pytest
import torch

from bertkit.commands.cli import main
from bertkit.data.shards import ShardedCorpus, prepare_shards
from bertkit.errors import DataError, WriteError
from bertkit.io import atomic_directory, atomic_write_text
from bertkit.models.config import BertConfig
from bertkit.models.encoder import BertModel
from bertkit.tokenizer import Tokenizer

from tests.cli_checks import assert_refused, snapshot
from tests.test_run_safety import PRETRAIN_CONFIG, PRETRAIN_SMALL

TEXTS = [("the striker scored a late goal", "sport"), ("the bank cut interest rates", "business"),
         ("a late goal won the cup final", "sport"), ("shares fell as rates rose again", "business")]
FAILURES = {errno.ENOSPC: "no space left on the device (ENOSPC)",
            errno.EACCES: "no permission to write there (EACCES)",
            errno.EROFS: "the file system is read-only (EROFS)"}


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    """A 1-layer, hidden-32 random BERT encoder with its WordPiece tokenizer, and a CSV to tune it on."""
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
    return {"model": str(root / "model"), "data": str(data), "tokenizer": tokenizer}


def _copy(encoder, tmp_path):
    target = tmp_path / "model"
    shutil.copytree(encoder["model"], target)
    return target


def _embed(model, tmp_path):
    (tmp_path / "in.txt").write_text("goal\n", encoding="utf-8")
    return ["embed", "--model", model, "--input", tmp_path / "in.txt", "--output", tmp_path / "out.npy"]


# ---------------------------------------------------------------------------- malformed files
# file -> (content, fragments of the one error line); each breaks one file of a model directory
MALFORMED = {
    "config-a-list": ("config.json", "[1, 2]", ["config.json must hold a JSON object", "not a list", "restore it"]),
    "config-a-string": ("config.json", '"bert"', ["config.json must hold a JSON object", "not a string"]),
    "config-a-number": ("config.json", "3", ["config.json must hold a JSON object", "not a number"]),
    "config-not-json": ("config.json", "{oops", ["config.json: not valid JSON", "restore it"]),
    "tokenizer-a-list": ("tokenizer.json", "[]", ["tokenizer.json must hold a JSON object",
                                                  "save the tokenizer again"]),
    "tokenizer-model-a-list": ("tokenizer.json", '{"model": []}', ['"model" must be a JSON object']),
    "tokenizer-not-json": ("tokenizer.json", "{oops", ["tokenizer.json: not valid JSON"]),
    "tokenizer-config-a-list": ("tokenizer_config.json", "[]", ["tokenizer_config.json must hold a JSON object"]),
    "special-tokens-a-list": ("special_tokens_map.json", "[3]", ["special_tokens_map.json must hold a JSON object"]),
    "vocab-not-utf8": ("vocab.txt", b"[PAD]\n\xff\xfe\n", ["vocab.txt: line 2 is not UTF-8", "restore the tokenizer"]),
    "weights-cut": ("model.safetensors", b"\x10\x00\x00", ["model.safetensors is not a valid safetensors file"]),
    "weights-bin-garbage": ("pytorch_model.bin", b"not a zip", ["pytorch_model.bin as plain weights"]),
    "shard-index-a-list": ("model.safetensors.index.json", "[]", ["index.json must hold a JSON object", "not a list"]),
    "shard-index-no-map": ("model.safetensors.index.json", '{"weight_map": 3}', ['needs a "weight_map"']),
    "shard-index-not-json": ("model.safetensors.index.json", "{", ["model.safetensors.index.json: not valid JSON"]),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_model_file_is_one_line(case, encoder, tmp_path, capsys):
    name, content, fragments = MALFORMED[case]
    model = _copy(encoder, tmp_path)
    if name == "vocab.txt":
        (model / "tokenizer.json").unlink()  # vocab.txt is read when there is no tokenizer.json
    if name in ("pytorch_model.bin", "model.safetensors.index.json"):
        (model / "model.safetensors").unlink()  # read when there is no model.safetensors
    (model / name).write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    assert_refused(_embed(model, tmp_path), capsys, tmp_path, str(model / name), *fragments)


def test_a_malformed_shard_index_is_one_line(encoder, tmp_path):
    shards = tmp_path / "shards"
    prepare_shards([["the bank cut rates"], ["a late goal"]], encoder["tokenizer"], shards, progress=False)
    for content, fragment in (("[]", "must hold a JSON object ({...}), not a list"), ("{", "not valid JSON"),
                              (b"\xff", "not UTF-8")):
        (shards / "meta.json").write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        with pytest.raises(DataError) as caught:
            ShardedCorpus(shards)
        message = str(caught.value)
        assert str(shards / "meta.json") in message and fragment in message and "prepare it again" in message
        assert "\n" not in message


@pytest.fixture(scope="module")
def finetuned(encoder, tmp_path_factory):
    """A finished 4-step fine-tuning run: its model, to be replaced with --overwrite."""
    out = tmp_path_factory.mktemp("runs") / "run"
    assert main(_finetune(encoder, out)) == 0
    return out


def _finetune(encoder, out, *settings):
    sets = ["train.max_steps=4", "train.batch_size=4", "train.eval_every=2", "data.max_length=32", *settings]
    return ["finetune", "--task", "classification", "--model", encoder["model"], "--train", encoder["data"],
            "--dev", encoder["data"], "--out", str(out), "--no-progress", *[x for s in sets for x in ("--set", s)]]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """A finished 4-step pre-training run; it keeps its checkpoints (with trainer state) for --resume."""
    out = tmp_path_factory.mktemp("runs") / "pretrain"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(_pretrain(out)) == 0
    return out


def _pretrain(out):
    return ["pretrain", "--config", PRETRAIN_CONFIG, "--out", str(out), "--no-progress",
            *[x for s in PRETRAIN_SMALL for x in ("--set", s)]]


@pytest.mark.parametrize("state", ["garbage", "a-tensor"])
def test_a_malformed_trainer_state_is_one_line(state, pretrained, tmp_path, capsys):
    out = tmp_path / "run"
    shutil.copytree(pretrained, out)
    path = out / "checkpoint-4" / "trainer_state.pt"
    if state == "garbage":
        path.write_bytes(b"not a torch file")
    else:
        torch.save(torch.zeros(3), path)
    fragment = "cannot read" if state == "garbage" else "is not a bertkit trainer state"
    assert_refused([*_pretrain(out), "--resume"], capsys, tmp_path, str(path), fragment,
                   "delete this checkpoint directory")


# ---------------------------------------------------------------------------- failed writes
def _fail(monkeypatch, function: str, code: int, inside: str | None = None) -> None:
    """Make os.<function> raise OSError(code) (for paths under `inside` when given), as a full
    disk, a denied permission or a read-only file system would."""
    real = getattr(os, function)

    def failing(*args, **kwargs):
        if inside is None or any(isinstance(a, (str, os.PathLike)) and os.fspath(a).startswith(inside) for a in args):
            raise OSError(code, os.strerror(code))
        return real(*args, **kwargs)
    monkeypatch.setattr(os, function, failing)


@pytest.mark.parametrize("function", ["fsync", "replace"])
@pytest.mark.parametrize("code", FAILURES)
def test_a_failed_file_write_names_the_path_and_leaves_the_old_file(code, function, tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    path.write_text("earlier results\n", encoding="utf-8")
    _fail(monkeypatch, function, code)
    with pytest.raises(WriteError) as caught:
        atomic_write_text(path, "new results\n")
    monkeypatch.undo()
    assert str(caught.value).startswith(f"cannot write {path}: {FAILURES[code]}; ")
    assert caught.value.errno == code and isinstance(caught.value, OSError)
    assert path.read_text(encoding="utf-8") == "earlier results\n"
    assert os.listdir(tmp_path) == ["results.json"]  # no temporary file left


@pytest.mark.parametrize("code", FAILURES)
def test_a_model_save_that_fails_keeps_the_saved_model(code, encoder, tmp_path, monkeypatch):
    """The disk fills while a model is saved over an earlier one: one error naming the model
    directory; the earlier model is as it was."""
    model = _copy(encoder, tmp_path)
    before = snapshot(tmp_path)
    _fail(monkeypatch, "fsync", code)
    with pytest.raises(WriteError, match=re.escape(f"cannot write {model}: {FAILURES[code]}")):
        with atomic_directory(model) as tmp:
            BertModel.from_pretrained(encoder["model"]).save_pretrained(tmp)
    monkeypatch.undo()
    assert snapshot(tmp_path) == before


def test_a_failed_swap_puts_the_old_directory_back(encoder, tmp_path, monkeypatch):
    model = _copy(encoder, tmp_path)
    before = snapshot(tmp_path)
    real = os.replace

    def refuse_the_new_one(src, dst):  # the old directory moves aside, the new one cannot move in
        if os.path.basename(os.fspath(src)).startswith(".tmp-dir-") and not os.fspath(src).endswith("-old"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(src, dst)
    monkeypatch.setattr(os, "replace", refuse_the_new_one)
    with pytest.raises(WriteError, match="no space left"):
        with atomic_directory(model) as tmp:
            (open(os.path.join(tmp, "config.json"), "w")).close()
    monkeypatch.undo()
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("code", FAILURES)
def test_finetune_overwrite_on_a_failing_disk_is_one_line_and_keeps_the_model(code, encoder, finetuned, tmp_path,
                                                                              capsys, monkeypatch):
    out = tmp_path / "run"
    shutil.copytree(finetuned, out)
    before = snapshot(tmp_path)
    _fail(monkeypatch, "replace", code, inside=str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = main(_finetune(encoder, out) + ["--overwrite"])
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.count("\n") == 1 and f"error: cannot write {out}: {FAILURES[code]}; " in err, err
    assert snapshot(tmp_path) == before


def test_the_cli_prints_any_other_os_error_as_one_line(encoder, tmp_path, capsys, monkeypatch):
    """A write that does not go through the atomic writers (here: embed's, made a plain open)
    fails on a full disk: still one line naming the file, no traceback."""
    def plain_open(path, mode):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(path))
    monkeypatch.setattr("bertkit.commands.embed.atomic_open", plain_open)
    assert_refused(_embed(encoder["model"], tmp_path), capsys, tmp_path,
                   f"cannot write {tmp_path / 'out.npy'}: no space left on the device (ENOSPC)")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory anyway")
def test_a_real_read_only_directory(encoder, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "keep.txt").write_text("earlier", encoding="utf-8")
    locked.chmod(0o500)
    try:
        assert_refused(["embed", "--model", encoder["model"], "--input", encoder["data"], "--output",
                        locked / "out.npy"], capsys, tmp_path, str(locked / "out.npy"), "permission")
    finally:
        locked.chmod(0o700)


def test_a_denied_read_is_not_called_a_write(encoder, tmp_path, capsys, monkeypatch):
    def denied(path, mode="r"):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
    monkeypatch.setattr("bertkit.commands.embed.read_text_inputs", lambda path, column: denied(path))
    assert_refused(_embed(encoder["model"], tmp_path), capsys, tmp_path,
                   f"error: {tmp_path / 'in.txt'}: Permission denied; check its permissions")
