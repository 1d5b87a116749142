"""The refusal contract both the bad-input and the run-safety tests check: a command a user got
wrong exits 2 with one stderr line naming the problem, and leaves no new or changed file."""

from __future__ import annotations

import hashlib
import os
import warnings

from bertkit.commands.cli import main


def snapshot(root) -> dict[str, str]:
    """Every file under `root` with a hash of its bytes (a changed file shows too); a FIFO, device
    or dangling link by name only (reading a FIFO would block: some tests put one there)."""
    out = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            if not os.path.isfile(path):
                out[os.path.relpath(path, root)] = "not a regular file"
                continue
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


def assert_refused(argv, capsys, workdir, *fragments):
    """Exit code 2, one stderr line holding every fragment, no new or changed file in workdir."""
    before = snapshot(workdir)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would be a second stderr line
        code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    assert snapshot(workdir) == before


def run_command(command: str, argv: list[str]) -> int:
    """`bertkit COMMAND ARGV...` in this process; returns its exit code."""
    return main([command, *argv])
