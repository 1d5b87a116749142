"""Every benchmark script runs in --smoke mode (tiny sizes, one repeat) and prints its ratio."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = [["bench_mlm.py"], ["bench_finetune.py"], ["bench_encode.py"]]

pytest.importorskip("transformers")


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda s: s[0])
def test_smoke(script):
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", script[0]), *script[1:], "--smoke"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"^RATIO \S+: bertkit / transformers = [0-9.]+x", proc.stdout, re.M), proc.stdout


def test_run_all_table_only(tmp_path, monkeypatch):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import run_all
    finally:
        sys.path.pop(0)
    monkeypatch.setattr(run_all, "DOC", str(tmp_path / "benchmarks.md"))
    monkeypatch.setattr(run_all, "PLOT", str(tmp_path / "img" / "benchmarks.png"))
    monkeypatch.setattr(run_all, "RESULTS", str(tmp_path / "results"))
    run_all.main(["--table-only"])  # no results yet: an empty table, no plot, no crash
    assert run_all.START in (tmp_path / "benchmarks.md").read_text()
