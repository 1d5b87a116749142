"""The README's main job, `bertkit quickstart`, end to end at smoke size on the real assets."""

import json
import os

import pytest

from bertkit.commands import cli
from bertkit.tasks import baseline


@pytest.mark.slow
def test_quickstart_runs_every_stage(tmp_path, capsys, monkeypatch):
    # The TF-IDF baseline beside the fine-tune and the evaluation still runs, on one C of its grid:
    # the four-point grid's fits were half of this test's time, and the grid search is
    # tests/tasks/test_tfidf_baseline.py's to check.
    name, param, _ = baseline.LINEAR_MODELS["classification"]
    monkeypatch.setitem(baseline.LINEAR_MODELS, "classification", (name, param, (1.0,)))
    out = str(tmp_path / "qs")
    code = cli.main(["quickstart", "--out", out, "--pretrain-steps", "3", "--finetune-epochs", "0.05",
                     "--max-length", "32"])
    assert code == 0
    printed = capsys.readouterr().out
    for stage in ("== 1.", "== 2.", "== 3.", "== 4."):
        assert stage in printed
    assert printed.count("mask 1:") == 3  # one fill-mask block per example sentence
    assert "$ bertkit pretrain --config" in printed and "$ bertkit evaluate" in printed
    # the evaluation's last line is its JSON metrics, before quickstart's closing line
    metrics = json.loads([line for line in printed.splitlines() if line.startswith('{"accuracy"')][-1])
    assert 0.0 <= metrics["accuracy"] <= 1.0
    assert os.path.isfile(os.path.join(out, "pretrain-tiny", "checkpoint-3", "model.safetensors"))
    assert os.path.isfile(os.path.join(out, "bbc-minilm", "config.json"))
