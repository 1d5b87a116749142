"""Every benchmark script runs in --smoke mode (tiny sizes, one repeat) and prints its ratio."""

import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = [["bench_mlm.py"], ["bench_finetune.py"], ["bench_encode.py"],
           ["bench_levers.py", "--lever", "prune", "--workload", "mlm_mini"],
           ["bench_levers.py", "--lever", "dropout", "--workload", "finetune"], ["bench_predict.py"],
           ["bench_fp32_levers.py", "--levers", "qkv", "int8-fused"]]
RATIO_LINE = r"^(RATIO \S+: bertkit / transformers|LEVER \S+ on \S+( \(.*\))?: on / off speed) = [0-9.]+x"

pytest.importorskip("transformers")


@pytest.mark.slow
def test_every_script_smoke():
    # All at once, one thread each: most of the time is interpreter start-up and imports.
    procs = [(script, subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "benchmarks", script[0]), *script[1:], "--smoke", "--threads", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)) for script in SCRIPTS]
    for script, proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{script}: {err[-3000:]}"
        assert re.search(RATIO_LINE, out, re.M), f"{script}: {out}"


def test_predict_anchors_smoke():
    # One call of each runtime on 8 short texts: the anchors load the saved classifier, the
    # ONNX export runs, and every probability check holds (fp32 runtimes agree with bertkit).
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_predict_anchors.py"), "--smoke",
                           "--threads", "1", "--lengths", "8", "32"], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for anchor in ("transformers sorted", "pipeline", "onnxruntime fp32"):
        assert re.search(rf"^ANCHOR predict-8-32: bertkit fp32 / {anchor} = [0-9.]+x", proc.stdout, re.M), proc.stdout
    for runtime in ("transformers", "transformers sorted", "pipeline", "onnxruntime fp32"):
        row = next(line for line in proc.stdout.splitlines() if line.startswith(f"| {runtime} |"))
        diff = float(re.search(r"max diff ([0-9.e+-]+), 0 labels differ", row).group(1))
        assert diff < 1e-4, row


def test_loader_tiny():
    # The data loader alone (no model, no transformers): shards -> packing -> masking, --tiny sizes.
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_loader.py"), "--tiny"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    efficiency = float(re.search(r"packing efficiency ([0-9.]+)%", proc.stdout).group(1))
    assert efficiency >= 99.0, proc.stdout
    for stage in ("prepare", "pack", "load"):
        assert re.search(rf"^LOADER {stage} \(.*\): [0-9,]+ tokens/s", proc.stdout, re.M), proc.stdout


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


@pytest.mark.slow
def test_gpu_bench_tiny(tmp_path):
    # The GPU benchmark at tiny sizes on whatever device is here: every workload runs, each row
    # has every variant against transformers, and the JSON and markdown tables are written.
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_gpu.py"), "--tiny", "--out",
                           str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "gpu-bench.json").read_text())
    variants = {row["workload"]: set(row["variants"]) for row in result["rows"]}
    assert variants["bert_base_mlm_train"] == {"bertkit", "transformers"}  # no compile with --tiny
    for name in ("modern_base_mlm_varied", "bert_base_finetune_varied", "bert_base_encode_varied",
                 "modern_base_encode_varied"):
        assert variants[name] == {"bertkit", "bertkit_padded", "transformers"}, name
    assert 0 < result["rows"][0]["variants"]["bertkit"]["fraction_of_probe"] < 1
    assert "| bert_base_mlm_train | bertkit |" in (tmp_path / "gpu-bench.md").read_text()
