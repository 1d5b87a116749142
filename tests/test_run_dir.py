"""The one run-directory module (bertkit/runtime/run_dir.py, issue 27.5): checkpoints found,
a run refused or continued, leftovers of a killed run cleared, an --overwrite run swapped in only
when it succeeds, the best model published; and every command that writes a run holds the lock.
The end-to-end behaviour through the commands is tests/test_run_safety.py."""

from __future__ import annotations

import json
import os

import pytest

from bertkit.errors import BertkitError, ConfigError, RunInterrupted
from bertkit.recipes.prepare import prepare
from bertkit.recipes.scaling_sweep import scaling_sweep
from bertkit.runtime.run_dir import (STATE_FILE, RunLock, check_saved_options, latest_checkpoint, list_checkpoints,
                                     publish_best, refuse_unresumed, remove_leftovers, replacing)


def checkpoint(out, step: int, complete: bool = True):
    path = out / f"checkpoint-{step}"
    path.mkdir(parents=True)
    if complete:
        (path / STATE_FILE).write_bytes(b"state")
    return path


def test_checkpoints_are_the_complete_ones_by_step(tmp_path):
    checkpoint(tmp_path, 10)
    checkpoint(tmp_path, 9)
    checkpoint(tmp_path, 12, complete=False)  # killed before its state file: not a checkpoint
    (tmp_path / "checkpoint-best").mkdir()  # a user's directory, not the trainer's
    assert [step for step, _ in list_checkpoints(str(tmp_path))] == [9, 10]  # by number, not by name
    assert latest_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-10")
    assert list_checkpoints(str(tmp_path / "absent")) == [] and latest_checkpoint(str(tmp_path / "absent")) is None


def test_a_checkpoint_is_continued_only_with_resume(tmp_path):
    existing = str(checkpoint(tmp_path, 4))
    with pytest.raises(BertkitError, match="already holds checkpoint-4; pass --resume to continue it, choose a new "
                       r"--out directory, or delete it to train again \(rm -r "):
        refuse_unresumed(str(tmp_path), existing, resume=False)
    refuse_unresumed(str(tmp_path), existing, resume=True)
    refuse_unresumed(str(tmp_path), None, resume=False)  # nothing there: a new run


def test_saved_options_must_match_on_resume(tmp_path):
    saved = {"train": {"lr": 0.001, "max_steps": 10}}
    (tmp_path / "run.json").write_text(json.dumps(saved), encoding="utf-8")
    check_saved_options(str(tmp_path), "run.json", {"train": {"lr": 0.001, "max_steps": 20}})  # may change
    with pytest.raises(ConfigError, match=r"train.lr: 0.001 -> 0.01"):
        check_saved_options(str(tmp_path), "run.json", {"train": {"lr": 0.01, "max_steps": 10}})
    # an option newer than the saved run passes at its default
    check_saved_options(str(tmp_path), "run.json", {"train": {"lr": 0.001, "max_steps": 10, "new": 1}},
                        defaults={"train": {"new": 1}})
    check_saved_options(str(tmp_path), "absent.json", {"train": {}})  # nothing saved: nothing to compare
    with pytest.raises(BertkitError, match="has checkpoints but no absent.json"):
        check_saved_options(str(tmp_path), "absent.json", {"train": {}}, required=True)


def make_leftovers(out):
    for name in (".tmp-checkpoint-6-x", ".tmp-checkpoint-pruned-checkpoint-2", ".tmp-best-y", ".best"):
        (out / name).mkdir()
    (out / ".tmp-abc-curves.png").write_bytes(b"half")
    (out / "metrics.jsonl").write_text("", encoding="utf-8")
    checkpoint(out, 4)


def test_leftovers_of_a_killed_run_are_cleared(tmp_path):
    make_leftovers(tmp_path)
    remove_leftovers(str(tmp_path))  # resuming: the run's checkpoints and best model stay
    assert sorted(os.listdir(tmp_path)) == [".best", "checkpoint-4", "metrics.jsonl"]
    remove_leftovers(str(tmp_path), keep_run=False)  # starting afresh: they go too
    assert os.listdir(tmp_path) == ["metrics.jsonl"]


def test_an_overwrite_replaces_out_only_when_it_succeeds(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.safetensors").write_text("old", encoding="utf-8")
    (tmp_path / ".out.new-k2j4").mkdir()  # what a SIGKILLed --overwrite run leaves
    with pytest.raises(RuntimeError), replacing(str(out), replace=True) as work:
        assert work != str(out)
        (tmp_path / work / "model.safetensors").write_text("new", encoding="utf-8")
        raise RuntimeError("the new run failed")
    assert (out / "model.safetensors").read_text(encoding="utf-8") == "old"
    with pytest.raises(RunInterrupted, match=f"{out} is unchanged"), replacing(str(out), replace=True):
        raise RunInterrupted("stopped", 2)
    with replacing(str(out), replace=True) as work:
        (tmp_path / work / "model.safetensors").write_text("new", encoding="utf-8")
    assert (out / "model.safetensors").read_text(encoding="utf-8") == "new"
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no sibling left, the stale one included
    with replacing(str(out), replace=False) as work:
        assert work == str(out)


def test_publishing_moves_the_best_model_in_and_drops_checkpoints(tmp_path):
    checkpoint(tmp_path, 2)
    best = tmp_path / ".best"
    best.mkdir()
    (best / "config.json").write_text("{}", encoding="utf-8")
    publish_best(str(tmp_path), str(best))
    assert os.listdir(tmp_path) == ["config.json"]


@pytest.mark.parametrize("command", ["prepare", "scale sweep"])
def test_prepare_and_the_scale_sweep_hold_the_lock_of_their_out(command, tmp_path, minilm_dir):
    held = RunLock(tmp_path / "out", "the first run")
    held.acquire()
    try:
        with pytest.raises(BertkitError, match="is in use by another bertkit run .*the first run"):
            if command == "prepare":
                corpus = tmp_path / "corpus.txt"
                corpus.write_text("One sentence. Another one.\nA second document.\n", encoding="utf-8")
                prepare(str(corpus), minilm_dir, str(tmp_path / "out"), mode="line", progress=False)
            else:
                scaling_sweep("1x32,2x32,2x64", 1e3, 60, str(tmp_path / "out"), log=lambda line: None)
    finally:
        held.release()
    assert not (tmp_path / "out" / "meta.json").exists()


def test_the_python_loaders_say_what_a_run_folder_or_an_adapter_is(tmp_path, minilm_dir):
    """from_pretrained / Tokenizer.from_pretrained on a folder with no model of its own: the loader's
    "no config / weights / tokenizer files" line ends with what the folder is, as the commands say."""
    import bertkit
    from bertkit.errors import CheckpointError
    from bertkit.peft import LoraConfig, get_peft_model

    run = tmp_path / "run"
    checkpoint(run, 60)
    (run / "checkpoint-60" / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"no config file at .*config.json; .*run is a run folder: the model is .*checkpoint-60"):
        bertkit.BertModel.from_pretrained(run)
    with pytest.raises(CheckpointError, match=r"no tokenizer files in .*is a run folder: the model is .*checkpoint-60"):
        bertkit.Tokenizer.from_pretrained(run)

    model = bertkit.BertForSequenceClassification.from_pretrained(minilm_dir, num_labels=2)
    get_peft_model(model, LoraConfig(r=2), base_model_path=minilm_dir).save_pretrained(tmp_path / "lora")
    for load in (bertkit.BertForSequenceClassification.from_pretrained, bertkit.SentenceEncoder.from_pretrained):
        with pytest.raises(BertkitError, match=r"lora is a PEFT adapter, not a whole model: load it with "
                                               r"bertkit.peft.PeftModel.from_pretrained, or fold it"):
            load(tmp_path / "lora")
