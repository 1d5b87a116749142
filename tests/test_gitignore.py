"""The repository's .gitignore keeps a virtual environment out of `git status`, whether `.venv` is a folder or a
symlink to one (a clone that shares another checkout's environment: `ln -s ../main/.venv .venv`). The pattern
`.venv/` matches only a folder, so the symlink showed as untracked and `git add -A` would commit it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("kind", ["folder", "symlink"])
def test_a_venv_folder_or_symlink_is_ignored(tmp_path, kind):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    shutil.copy(ROOT / ".gitignore", tmp_path / ".gitignore")
    (tmp_path / "elsewhere").mkdir()
    if kind == "folder":
        (tmp_path / ".venv").mkdir()
        (tmp_path / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    else:
        (tmp_path / ".venv").symlink_to(tmp_path / "elsewhere")
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path,
                            capture_output=True, text=True, check=True).stdout
    assert ".venv" not in status
