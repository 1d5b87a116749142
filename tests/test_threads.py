"""Threads on a shared machine (issue 17): OMP_WAIT_POLICY=PASSIVE before torch loads unless the
user chose, and a --threads option whose default is the cores the process may use."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from bertkit.cli import THREADED, main
from bertkit.threads import available_cores, default_threads, passive_wait_policy

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
    assert "embed" in THREADED and "info" not in THREADED and "scale" not in THREADED
    before = torch.get_num_threads()
    argv = ["embed", "--model", "m", "--input", "i", "--output", "o"]
    assert main(argv + ["--threads", "3"]) == 0 and main(argv) == 0
    assert seen == [3, available_cores()]  # the option, then the default: the cores we may use
    assert torch.get_num_threads() == before  # in-process callers (tests) keep their setting


def test_a_command_run_inside_another_keeps_the_outer_threads(monkeypatch):
    import bertkit.commands.embed as embed
    import bertkit.commands.predict as predict

    seen = []
    monkeypatch.setattr(predict, "run", lambda args: seen.append(torch.get_num_threads()) or 0)
    inner = ["predict", "--model", "m", "--input", "i", "--output", "o"]
    monkeypatch.setattr(embed, "run", lambda args: main(inner))  # as quickstart runs its stages
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    outer = ["embed", "--model", "m", "--input", "i", "--output", "o"]
    assert main(outer + ["--threads", "3"]) == 0 and main(outer) == 0
    assert seen == [3, available_cores()]  # the inner command without --threads follows the outer one


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "many"])
def test_bad_threads_value_is_refused(value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["embed", "--model", "m", "--input", "i", "--output", "o", "--threads", value])
    assert exit_info.value.code == 2
    assert "--threads: must be a positive integer" in capsys.readouterr().err
