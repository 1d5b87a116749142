"""A command prints each distinct warning once per job, and only on rank 0: a fine-tuning run
printed "dev: N of N texts were cut to data.max_length" at every evaluation, and every torchrun
rank printed its own copy."""

import json
import warnings

from bertkit.runtime import job_warnings
from bertkit.commands.cli import main
from tests.tasks.helpers import make_tiny_model


def warn_three_times_with_filter_changes():
    for _ in range(3):
        warnings.warn("dev: 6 of 6 texts were cut to data.max_length=8 tokens")
        with warnings.catch_warnings():  # what readers and loaders do; it resets Python's memory
            warnings.simplefilter("ignore")


def shown(body):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        body()
    return [str(w.message) for w in caught]


def test_python_forgets_but_the_job_hook_does_not(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    assert len(shown(warn_three_times_with_filter_changes)) == 3  # why the hook is needed

    def with_hook():
        previous = job_warnings.install()
        try:
            warn_three_times_with_filter_changes()
            warnings.warn("another warning")
            warnings.warn("another warning", DeprecationWarning)  # another category: its own line
        finally:
            job_warnings.restore(previous)

    assert shown(with_hook) == ["dev: 6 of 6 texts were cut to data.max_length=8 tokens", "another warning",
                                "another warning"]
    assert len(shown(warn_three_times_with_filter_changes)) == 3  # restored: Python's behaviour again


def test_ranks_other_than_zero_show_none(monkeypatch):
    def with_hook():
        previous = job_warnings.install()
        try:
            warnings.warn("a note")
        finally:
            job_warnings.restore(previous)

    monkeypatch.setenv("RANK", "1")
    assert shown(with_hook) == []
    monkeypatch.setenv("RANK", "0")
    assert shown(with_hook) == ["a note"]


def test_a_finetune_run_warns_once_about_its_cut_dev_set(tmp_path, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    texts = [f"the match ended {i} nil after a long and tiring afternoon of football" for i in range(6)] + \
            [f"shares fell {i} percent as the markets closed lower for the third day" for i in range(6)]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": "sport" if "match" in t else "business"}) + "\n"
                            for t in texts))
    dev = tmp_path / "dev.jsonl"
    dev.write_text(data.read_text())
    model = make_tiny_model(tmp_path / "tiny", texts)
    out = tmp_path / "out"
    messages = shown(lambda: main(["finetune", "--task", "classification", "--model", model, "--train", str(data),
                                   "--dev", str(dev), "--out", str(out), "--no-progress", "--set", "train.epochs=3",
                                   "train.batch_size=6", "data.max_length=8"]))
    evaluations = [row for row in map(json.loads, open(out / "metrics.jsonl")) if row["split"] == "eval"]
    assert len(evaluations) == 3  # the dev set was encoded three times...
    assert sum(f"{dev}: 12 of 12 texts were cut to data.max_length=8" in m for m in messages) == 1  # ...one warning
