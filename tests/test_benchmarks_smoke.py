"""Every benchmark script runs in --smoke mode (tiny sizes, one repeat) and prints its ratio."""

import glob
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
           ["bench_levers.py", "--lever", "adamw", "--workload", "recipe_update"],
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


@pytest.mark.slow
def test_serve_cli_bench_smoke():
    """Whole `bertkit predict` / `embed` processes against the pipeline and sentence-transformers, outputs equal."""
    pytest.importorskip("sentence_transformers")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_serve_cli.py"), "--smoke"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"^RATIO predict: bertkit / transformers pipeline = [0-9.]+x .*, 0 of 20 labels differ$",
                     proc.stdout, re.M), proc.stdout
    assert re.search(r"^RATIO embed: bertkit / sentence-transformers = [0-9.]+x", proc.stdout, re.M), proc.stdout


def test_embedding_training_bench_smoke():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_embedding_train.py"), "--smoke",
                           "--threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"equal losses .*\n(.*\n)*  bertkit / sentence-transformers speed: [0-9.]+x", proc.stdout), proc.stdout


def test_batch_build_micro_smoke():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "micro_batch_build.py"), "--rows", "8",
                           "--repeats", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"pad_rows [0-9.]+ ms, row by row [0-9.]+ ms: speed = [0-9.]+x", proc.stdout), proc.stdout


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


@pytest.mark.slow
def test_inference_headline_smoke():
    # The inference headline's own command at smoke size: bertkit fp32 against both anchors,
    # every vector within float error of bertkit's.
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_inference.py"), "--smoke",
                           "--threads", "1", "--sets", "mixed", "--runtimes", "bertkit fp32", "sentence-transformers",
                           "onnxruntime fp32"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for runtime in ("sentence-transformers", "onnxruntime fp32"):
        row = next(line for line in proc.stdout.splitlines() if line.startswith(f"| {runtime} |"))
        assert float(re.search(r"max diff ([0-9.e+-]+)", row).group(1)) < 1e-5, row


def test_loader_tiny():
    # The data loader alone (no model, no transformers): shards -> packing -> masking, --tiny sizes.
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_loader.py"), "--tiny"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    efficiency = float(re.search(r"packing efficiency ([0-9.]+)%", proc.stdout).group(1))
    assert efficiency >= 99.0, proc.stdout
    for stage in ("prepare", "pack", "load"):
        assert re.search(rf"^LOADER {stage} \(.*\): [0-9,]+ tokens/s", proc.stdout, re.M), proc.stdout


def test_loader_with_a_runs_own_tokenizer(tmp_path, bbc_dir):
    # The GPU machine has no MiniLM package: the loader reads the recipe run's own tokenizer
    # (--tokenizer) and writes its numbers (--json). A 300-piece vocabulary cuts the same articles
    # into more tokens than MiniLM's 30,522 pieces do.
    from bertkit.tokenizer import Tokenizer
    articles = sorted(glob.glob(os.path.join(bbc_dir, "business", "*.txt")))[:40]
    Tokenizer.train_wordpiece(articles, vocab_size=300, min_frequency=1, show_progress=False).save_pretrained(
        str(tmp_path / "tok"))
    results = {}
    for name, extra in (("own", ["--tokenizer", str(tmp_path / "tok")]), ("minilm", [])):
        out = tmp_path / f"{name}.json"
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_loader.py"), "--tiny",
                               "--json", str(out), *extra], capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        results[name] = json.loads(out.read_text())
    assert results["own"]["corpus_tokens"] > 1.5 * results["minilm"]["corpus_tokens"]
    assert results["own"]["documents"] == results["minilm"]["documents"]
    assert results["own"]["load_tokens_per_s"] > 0 and results["own"]["packing_efficiency"] >= 0.99


def _run_all_module():
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import run_all
    finally:
        sys.path.pop(0)
    return run_all


def test_run_all_table_only(tmp_path, monkeypatch):
    run_all = _run_all_module()
    monkeypatch.setattr(run_all, "DOC", str(tmp_path / "benchmarks.md"))
    monkeypatch.setattr(run_all, "PLOT", str(tmp_path / "img" / "benchmarks.png"))
    monkeypatch.setattr(run_all, "RESULTS", str(tmp_path / "results"))
    run_all.main(["--table-only"])  # no results yet: an empty table, no plot, no crash
    assert run_all.START in (tmp_path / "benchmarks.md").read_text()


def test_run_all_check_flags_a_moved_ratio(tmp_path, monkeypatch, capsys):
    # --check compares each headline's recorded min-max range with a rerun's: overlapping ranges
    # held, disjoint ones moved; an inference anchor's speed is inverted to bertkit ÷ anchor.
    run_all = _run_all_module()
    monkeypatch.setattr(run_all, "RESULTS", str(tmp_path))

    def write(name, payload):
        (tmp_path / f"{name}.json").write_text(json.dumps(payload))

    def ratios(median, low, high):
        return {"ratio_median": median, "ratio_min": low, "ratio_max": high}

    write("mlm_mini", ratios(3.0, 2.8, 3.2))
    write("mlm_mini-check", ratios(3.1, 2.9, 3.3))  # overlaps: held
    write("encode", ratios(2.4, 2.2, 2.7))
    write("encode-check", ratios(1.6, 1.5, 1.7))  # below the recorded range: moved down
    anchor = {"speed_vs_bertkit_fp32": 0.5, "speed_min": 0.45, "speed_max": 0.55}
    write("inference-mixed-realistic", {"rows": {"sentence-transformers": anchor, "onnxruntime fp32": anchor}})
    write("inference-mixed-check", {"rows": {"sentence-transformers": anchor,
                                             "onnxruntime fp32": {"speed_vs_bertkit_fp32": 0.25, "speed_min": 0.24,
                                                                  "speed_max": 0.26}}})
    assert run_all.print_check() is False
    out = capsys.readouterr().out
    assert re.search(r"\| mlm_mini \| 3.00x \(2.80 – 3.20\) \| 3.10x \(2.90 – 3.30\) \| held \|", out)
    assert re.search(r"\| encode \| .* \| moved down \|", out)
    assert re.search(r"\| encode mixed ÷ sentence-transformers \| 2.00x \(1.82 – 2.22\) \| 2.00x .* \| held \|", out)
    assert re.search(r"\| encode mixed ÷ onnxruntime fp32 \| 2.00x .* \| 4.00x .* \| moved up \|", out)
    assert re.search(r"\| mlm_small \| - \| - \| not compared \|", out)
    for name in ("mlm_small", "finetune", "encode", "encode mixed ÷ sentence-transformers"):
        (tmp_path / f"{name}-check.json").unlink(missing_ok=True)
    write("encode-check", ratios(2.5, 2.3, 2.6))
    write("inference-mixed-check", {"rows": {"sentence-transformers": anchor, "onnxruntime fp32": anchor}})
    assert run_all.print_check() is True


@pytest.mark.slow
def test_gpu_bench_tiny(tmp_path):
    # The GPU benchmark at tiny sizes on whatever device is here: every workload runs, each row
    # has every variant against transformers, and the JSON and markdown tables are written.
    # One timed round per variant (--tiny's default is 2): the numbers are not checked here.
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_gpu.py"), "--tiny", "--rounds",
                           "1", "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "gpu-bench.json").read_text())
    variants = {row["workload"]: set(row["variants"]) for row in result["rows"]}
    assert variants["bert_base_mlm_train"] == {"bertkit", "bertkit_no_dropout", "transformers"}  # no compile with --tiny
    for name in ("modern_base_mlm_varied", "bert_base_encode_varied", "modern_base_encode_varied",
                 "bert_base_predict_varied", "modern_base_predict_varied"):
        assert variants[name] == {"bertkit", "bertkit_padded", "transformers"}, name
    assert variants["bert_base_finetune_varied"] == {"bertkit", "bertkit_packed", "bertkit_padded",
                                                     "bertkit_jagged_dropout", "transformers"}
    assert variants["bert_base_encode_texts"] == {"bertkit", "transformers"}
    assert variants["gpu_recipe_trainer_loop"] == {"bertkit_step", "bertkit_trainer", "bertkit_trainer_read_each_step",
                                                   "transformers"}
    # above 0; no upper bound here: on a busy CPU the probe can be timed slower than the model
    # (it measured 1.2 once beside a fine-tune), which a GPU run's table shows at once
    assert result["rows"][0]["variants"]["bertkit"]["fraction_of_probe"] > 0
    assert "| bert_base_mlm_train | bertkit |" in (tmp_path / "gpu-bench.md").read_text()


def test_gpu_profile_tiny(tmp_path):
    """profile_gpu.py runs anywhere with --tiny (on the CPU the kinds come from operator times)."""
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "profile_gpu.py"), "--tiny", "--steps", "2",
                           "--warmup", "1", "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "gpu-profile.json").read_text())
    assert set(result["rows"]) == {"bert_base_mlm_train", "gpu_recipe_mlm_train"}
    for variants in result["rows"].values():
        assert set(variants) == {"bertkit", "transformers"}
        for v in variants.values():
            assert v["busy_ms"] > 0 and v["wall_ms"] > 0 and "matmul" in v["by_kind_ms"]
            assert sum(v["by_kind_ms"].values()) == pytest.approx(v["busy_ms"], abs=0.01)
    assert "### bert_base_mlm_train" in (tmp_path / "gpu-profile.md").read_text()


def test_gpu_prepare_carries_every_package_pytest_needs():
    """benchmarks/gpu/prepare.sh copies pytest into .gpu/site for a GPU machine without a package
    registry: every package the installed pytest requires on this python must be copied with it
    (pytest 9 imports pygments at start; without it tests/gpu never ran)."""
    from importlib.metadata import requires
    from packaging.requirements import Requirement

    script = open(os.path.join(ROOT, "benchmarks", "gpu", "prepare.sh"), encoding="utf-8").read()
    copied = set(re.search(r"^for module in (.*); do$", script, re.M).group(1).split())
    needed = set()
    for req in map(Requirement, requires("pytest")):
        if req.marker is None or req.marker.evaluate({"extra": ""}):  # not its extras, nor other pythons' needs
            needed.add(req.name.lower().replace("-", "_"))
    assert needed <= copied, f"prepare.sh does not copy {sorted(needed - copied)}"
