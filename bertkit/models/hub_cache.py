"""Hugging Face model names ("org/name") found in the local Hugging Face cache, offline.

Where `transformers` or `huggingface_hub` downloaded a model, it lies in the hub cache as

    CACHE/models--ORG--NAME/refs/main               the commit hash of the revision "main"
    CACHE/models--ORG--NAME/snapshots/<hash>/...    that revision's files (symlinks into blobs/)

with CACHE = $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
~/.cache/huggingface/hub (huggingface_hub's order, read when a name is resolved).
`resolve_model_dir("org/name")` returns that snapshot directory, so every loader reads it as a
local model directory. bertkit never downloads: a name that is not in the cache is a
CheckpointError that says so and how to get it there. A path that exists is returned as it is,
so a local directory always wins over a cached name.
"""

from __future__ import annotations

import os
import re

from bertkit.errors import CheckpointError
from bertkit.io import nearest_sibling
from bertkit.runtime.run_dir import refuse_run_folder

# A hub repository id: NAME or ORG/NAME, letters, digits, "-", "_", "." (not leading, no "--" or "..").
_REPO_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*$")

_CHECKPOINT = re.compile(r"^checkpoint-\d+$")


def _natural(name: str) -> tuple:
    """checkpoint-50 before checkpoint-100."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def hub_cache_dir() -> str:
    """The directory huggingface_hub caches models in, read from the environment as it reads it
    (HUGGINGFACE_HUB_CACHE is its older name of HF_HUB_CACHE)."""
    home = os.getenv("HF_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", os.path.join("~", ".cache")), "huggingface"))
    cache = os.getenv("HF_HUB_CACHE", os.getenv("HUGGINGFACE_HUB_CACHE", os.path.join(home, "hub")))
    return os.path.expandvars(os.path.expanduser(cache))


def is_repo_id(text: str) -> bool:
    return bool(_REPO_ID.match(text)) and "--" not in text and ".." not in text


def cached_snapshot(repo_id: str, revision: str = "main") -> str | None:
    """The snapshot directory of `repo_id` at `revision` (a branch in refs/, or a commit hash) in
    the local cache, or None when it is not there."""
    repo = os.path.join(hub_cache_dir(), "models--" + repo_id.replace("/", "--"))
    ref = os.path.join(repo, "refs", revision)
    commit = revision
    if os.path.isfile(ref):
        with open(ref, encoding="utf-8") as f:
            commit = f.read().strip()
    snapshot = os.path.join(repo, "snapshots", commit)
    return snapshot if commit and os.path.isdir(snapshot) else None


def missing_local_path(path: str) -> CheckpointError | None:
    """The error for a local path that is not there, when it reads as one: a typo of a name beside
    it, or a name in a folder that exists (runs/bbc, runs/A/checkpoint-999: a checkpoint never
    written). None when neither holds (then it may be a hub name)."""
    step = _CHECKPOINT.match(os.path.basename(path))  # checkpoint-999's "nearest" name is any other step
    near = None if step else nearest_sibling(path)
    if near:  # "runs/mien" beside "runs/mine": a typo of a local folder, not a hub name
        return CheckpointError(f"{path} does not exist; did you mean {near}?")
    folder = os.path.dirname(path)
    if folder and os.path.isdir(folder):  # a folder not made yet, or a checkpoint the run never wrote
        held = sorted((name for name in os.listdir(folder) if not name.startswith(".")
                       and (not step or _CHECKPOINT.match(name))), key=_natural)
        shown = ", ".join(held[:8]) + (", ..." if len(held) > 8 else "") if held else "nothing"
        return CheckpointError(f"{path} does not exist ({folder}/ holds {shown}); make it first, or pass a "
                               "model directory that exists")
    return None


def resolve_model_dir(name: str | os.PathLike) -> str:
    """`name` itself when it exists (or cannot be a hub name); else its snapshot in the local
    Hugging Face cache; a hub name that is not cached raises CheckpointError (no network is used)."""
    path = os.fspath(name)
    if os.path.exists(path) or not is_repo_id(path):
        return path
    snapshot = cached_snapshot(path)
    if snapshot is None:
        local = missing_local_path(path)
        if local is not None:
            raise local
        raise CheckpointError(f"{path} is not a local directory, and not in the local Hugging Face cache "
                              f"({hub_cache_dir()}); bertkit does not download: fetch it where there is "
                              f"network (`hf download {path}`, or any transformers from_pretrained), set "
                              "HF_HOME / HF_HUB_CACHE to the cache that holds it, or pass a model directory")
    return snapshot


def existing_model_dir(value: str | os.PathLike, option: str = "model") -> str:
    """`value` (given to `--OPTION`, or to `finetune` from Python) as a model directory that exists:
    ORG/NAME becomes its snapshot in the local Hugging Face cache; a path that is not there (a typo
    says the name beside it) or a run folder is one CheckpointError before any work. `finetune()`
    called from Python read the training data first and then said "tokenizer path ... does not
    exist" for a model path mistyped (walk AE)."""
    path = resolve_model_dir(value)
    if not os.path.exists(path):
        raise missing_local_path(os.fspath(value)) or CheckpointError(
            f"{os.fspath(value)} does not exist; pass --{option.replace('_', '-')} a model directory that exists")
    refuse_run_folder(path, option)
    return path
