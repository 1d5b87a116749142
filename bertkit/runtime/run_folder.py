"""A run folder (what `bertkit pretrain --out DIR` writes): checkpoint-N subfolders and, with early
stopping, best/. Which of them is the model a user asks for, and what to tell one who names the
folder itself where a model goes.

transformers' Trainer leaves the same layout, and `from_pretrained` on its output folder fails;
bertkit does not silently pick a checkpoint either (the newest is not always the one wanted, and a
run still going writes more), it names the one to pass.
"""

from __future__ import annotations

import os
import re

from bertkit.errors import CheckpointError

BEST = "best"  # early stopping's copy of the best model (train/early_stopping.py)
STATE_FILE = "trainer_state.pt"  # written last into a checkpoint (train/trainer.py): it is complete
CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")


def list_checkpoints(out_dir: str) -> list[tuple[int, str]]:
    """(step, path) of the complete checkpoints in `out_dir`, oldest first."""
    if not os.path.isdir(out_dir):
        return []
    found = []
    for name in os.listdir(out_dir):
        match = CHECKPOINT_RE.match(name)
        path = os.path.join(out_dir, name)
        # The state file is written last and the directory renamed into place after it, so a
        # directory with it is complete; the check also skips stray user-made directories.
        if match and os.path.isfile(os.path.join(path, STATE_FILE)):
            found.append((int(match.group(1)), path))
    return sorted(found)


def latest_checkpoint(out_dir: str) -> str | None:
    found = list_checkpoints(out_dir)
    return found[-1][1] if found else None


def final_model(run_dir: str) -> str | None:
    """The model a run ended with: run_dir/best when early stopping kept one, else the newest complete
    checkpoint; None when `run_dir` holds neither."""
    best = os.path.join(run_dir, BEST)
    if os.path.isfile(os.path.join(best, "config.json")):
        return best
    return latest_checkpoint(run_dir)


def refuse_run_folder(path: str, option: str) -> None:
    """A one-line CheckpointError when `path`, given to `--OPTION`, is a run folder rather than a model:
    it has no config.json of its own but a model inside (best/ or checkpoint-N/)."""
    if not os.path.isdir(path) or os.path.isfile(os.path.join(path, "config.json")):
        return
    model = final_model(path)
    if model is not None:
        raise CheckpointError(f"{path} is a run folder; the model is {model}: pass --{option} {model}")
