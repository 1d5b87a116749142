"""Threads on a shared machine (issue 17): OMP_WAIT_POLICY=PASSIVE before torch loads unless the
user chose, and a --threads option whose default is the cores the process may use."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from bertkit.commands.cli import THREADED, main
from bertkit.runtime.threads import available_cores, default_threads, passive_wait_policy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _policy_after_import(env_policy: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if env_policy is not None:
        env["OMP_WAIT_POLICY"] = env_policy
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    code = "import bertkit, os; print(os.environ.get('OMP_WAIT_POLICY'))"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True, timeout=120).stdout.strip()


def test_importing_bertkit_first_sets_passive_but_never_overrides_the_user():
    assert _policy_after_import(None) == "PASSIVE"
    assert _policy_after_import("ACTIVE") == "ACTIVE"


def test_no_policy_once_torch_is_loaded(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert "torch" in sys.modules
    assert passive_wait_policy() is False  # too late to take effect: not pretended
    assert "OMP_WAIT_POLICY" not in os.environ


def test_default_threads_follow_omp_num_threads_else_the_affinity(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert default_threads() == 3
    for value in ("", "0", "two"):
        monkeypatch.setenv("OMP_NUM_THREADS", value)
        assert default_threads() == available_cores()
    assert 1 <= available_cores() <= len(os.sched_getaffinity(0))


def test_threads_option_applies_during_the_command_and_is_restored(monkeypatch):
    import bertkit.commands.embed as embed

    seen = []
    monkeypatch.setattr(embed, "run", lambda args: seen.append(torch.get_num_threads()) or 0)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert "embed" in THREADED and "export" in THREADED and "info" not in THREADED and "scale" not in THREADED
    before = torch.get_num_threads()
    argv = ["embed", "--model", "m", "--input", "i", "--output", "o"]
    assert main(argv + ["--threads", "3"]) == 0 and main(argv) == 0
    assert seen == [3, available_cores()]  # the option, then the default: the cores we may use
    assert torch.get_num_threads() == before  # in-process callers (tests) keep their setting


def test_quickstart_stages_keep_the_outer_threads(monkeypatch):
    """quickstart runs its stages through the stage's own parser, not through main(): the thread
    count main() set for quickstart (--threads 3) holds inside every stage."""
    import bertkit.commands.quickstart as quickstart

    seen = []
    monkeypatch.setattr(quickstart.evaluate, "run", lambda args: seen.append(torch.get_num_threads()) or 0)
    monkeypatch.setattr(quickstart, "run", lambda args: quickstart.bertkit("evaluate", "--model", "m", "--data", "d"))
    assert main(["quickstart", "--threads", "3"]) == 0
    assert seen == [3]


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "many"])
def test_bad_threads_value_is_refused(value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["embed", "--model", "m", "--input", "i", "--output", "o", "--threads", value])
    assert exit_info.value.code == 2
    assert "--threads: must be a positive integer" in capsys.readouterr().err
