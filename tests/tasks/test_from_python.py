"""`bertkit.recipes.finetune.finetune` called from Python (a notebook), as walk AE met it: the errors a
caller of the function gets where the command line has its own checks and options."""

from __future__ import annotations

import json
import warnings

import pytest

from bertkit.errors import BertkitError, CheckpointError, ConfigError
from bertkit.recipes.finetune import build_recipe, finetune

from .helpers import make_tiny_model

ROWS = [(f"the match ended {i} nil", "sport") for i in range(6)] + [(f"shares fell {i} percent", "business")
                                                                    for i in range(6)]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A tiny random BERT and a labelled JSONL file of 12 rows."""
    root = tmp_path_factory.mktemp("from_python")
    make_tiny_model(root / "tiny", [text for text, _ in ROWS])
    (root / "train.jsonl").write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in ROWS))
    return root


def test_a_missing_model_is_refused_before_the_data_is_read(files, tmp_path):
    """The function read the training file first and then said "tokenizer path ... does not exist"; the
    command line said the model was missing, before any work: now both do, a typo with the name meant."""
    out = tmp_path / "out"
    with pytest.raises(CheckpointError, match=r"^/nonexistent/model does not exist; pass --model a model directory"):
        finetune("classification", "/nonexistent/model", "no-such-train.csv", None, str(out))
    with pytest.raises(CheckpointError, match=r"tiyn does not exist; did you mean .*tiny\?"):
        finetune("classification", str(files / "tiyn"), "no-such-train.csv", None, str(out))
    assert not out.exists()


def test_a_rerun_into_the_same_out_names_the_python_argument(files, tmp_path):
    """A notebook cell run twice: the second run is refused (the first model is kept) with the argument a
    Python caller passes, not only the command's --overwrite; overwrite=True then replaces the run (its
    paths given as pathlib.Path)."""
    out = str(tmp_path / "run")
    sections = {"train": {"max_steps": 2, "batch_size": 4}, "data": {"max_length": 16}}
    train = str(files / "train.jsonl")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        finetune("classification", str(files / "tiny"), train, train, out, sections, progress=False)
        with pytest.raises(BertkitError, match=r"already holds a model .*--overwrite \(from Python: "
                                               r"finetune\(\.\.\., overwrite=True\)\)$"):
            finetune("classification", str(files / "tiny"), train, train, out, sections, progress=False)
        # pathlib.Path, as a notebook writes paths: was "'PosixPath' object has no attribute 'partition'"
        summary = finetune("classification", files / "tiny", files / "train.jsonl", files / "train.jsonl",
                           tmp_path / "run", sections, progress=False, overwrite=True)
    assert summary["steps"] == 2


def test_threads_is_not_a_setting_and_says_what_sets_it():
    """sections={"train": {"threads": 1}} was "did you mean train.head_lr?"."""
    with pytest.raises(ConfigError, match=r"^train\.threads is not a recipe setting: .*torch\.set_num_threads\(N\)"):
        build_recipe({"train": {"threads": 1}})
    with pytest.raises(ConfigError, match=r"^data\.num_threads is not a recipe setting"):
        build_recipe({"data": {"num_threads": 1}})
