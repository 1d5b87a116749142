"""The shared benchmark harness: bertkit and transformers timed in the same run, as a ratio.

Method (the same for every benchmark script):

* Both libraries run in one process with the same `torch.set_num_threads(n)`, on the same
  inputs, with the same weights (bertkit loads the transformers model's state dict).
* Timing alternates the two and flips the order every repeat (B T, T B, B T, ...), after
  `warmup` untimed calls of each, so load from other processes on the machine hits both alike.
  Each repeat times `steps` calls; the speed ratio of a repeat is t_transformers / t_bertkit,
  and we report its median with the min and max over repeats.
* Peak memory: each library runs in a fresh subprocess (this script re-invoked with
  `--memory-child LIB`) that imports the same modules and builds the same inputs. After setup
  and the warmup calls (so optimizer state and model weights are resident), the kernel's
  high-water mark is reset (`echo 5 > /proc/self/clear_refs`); the timed calls run again and
  `VmHWM` from /proc/self/status is the steady-state peak resident set. The child's whole peak
  (imports, setup and warmup included, VmHWM before the reset) is reported too; not ru_maxrss,
  which a child inherits from its parent across fork and exec. tracemalloc is not used: it does not see
  torch's C++ allocations.
* MFU: a large fp32 matmul is timed in the same run (best of a few) as the achievable FLOP/s
  of this machine with these threads; a library's MFU is its model FLOP/s divided by that.
  Model FLOPs count the work the task needs (see `encoder_flops`), the same number for both
  libraries, so MFU_transformers = MFU_bertkit / ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import torch

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no progress bars from transformers
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
LIBS = ("bertkit", "transformers")


# ---------------------------------------------------------------------------- arguments
def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--repeats", type=int, default=7, help="timed repeats per library (alternating)")
    p.add_argument("--warmup", type=int, default=2, help="untimed calls per library before timing")
    p.add_argument("--steps", type=int, default=1, help="calls per timed repeat")
    p.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1),
                   help="torch intra-op threads, the same for both libraries")
    p.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat: checks the script runs")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    p.add_argument("--compile", action="store_true", help="bertkit with torch.compile (optional switch)")
    p.add_argument("--label", default="", help="suffix for the result file name (e.g. a lever name)")
    p.add_argument("--memory-child", choices=LIBS, help=argparse.SUPPRESS)
    return p


def setup_threads(n: int) -> None:
    torch.set_num_threads(n)


def adamw(model: torch.nn.Module, lr: float, weight_decay: float = 0.01) -> torch.optim.Optimizer:
    """The optimizer both libraries train with: torch's AdamW, fused (one kernel for all
    parameters) unless BENCH_ADAMW_FUSED=0. The same choice for both, so a model's speed is what
    the ratio compares; the unfused variant is measured in docs/benchmarks.md."""
    fused = os.environ.get("BENCH_ADAMW_FUSED", "1") != "0"
    return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, fused=fused)


# ---------------------------------------------------------------------------- FLOPs
def encoder_flops(config, lengths: list[int], padded_len: int | None = None) -> float:
    """Forward FLOPs of the encoder for sequences of the given real lengths.

    Per token and layer: 2 * (4 H^2 + 2 H I) for the Q, K, V, output and feed-forward matmuls;
    per sequence of length L and layer: 4 L^2 H for Q K^T and P V. Counted on real tokens only
    (padding is waste, not work). Embeddings, LayerNorm, softmax and GELU are left out.
    """
    H, I, n_layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    tokens = sum(lengths)
    per_layer = 2 * tokens * (4 * H * H + 2 * H * I) + sum(4 * L * L * H for L in lengths)
    return float(n_layers * per_layer)


def mlm_head_flops(config, n_labelled: int) -> float:
    """Forward FLOPs of the MLM head at the labelled positions: transform + vocabulary projection."""
    H, V = config.hidden_size, config.vocab_size
    return float(n_labelled * (2 * H * H + 2 * H * V))


def matmul_probe(n: int = 2048, repeats: int = 5) -> float:
    """Achievable fp32 FLOP/s: the best of `repeats` timings of an n x n x n matmul."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b  # warm up
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n ** 3 / best


# ---------------------------------------------------------------------------- timing
@dataclass
class Result:
    name: str
    unit: str  # what `work` counts, e.g. "tokens"
    work: float  # units of work per call (e.g. real tokens per step)
    flops: float  # model FLOPs per call (see encoder_flops)
    times: dict[str, list[float]]  # library -> seconds per call, one entry per repeat
    matmul_flops: float = 0.0
    threads: int = 1
    memory: dict[str, dict[str, float]] = field(default_factory=dict)  # library -> MB figures
    notes: str = ""
    command: str = ""

    @property
    def ratios(self) -> list[float]:
        return speedups(self.times, "transformers", "bertkit")

    def rate(self, lib: str) -> float:
        return self.work / statistics.median(self.times[lib])

    def mfu(self, lib: str) -> float:
        return self.flops / statistics.median(self.times[lib]) / self.matmul_flops if self.matmul_flops else 0.0

    def summary(self) -> dict:
        r = self.ratios
        out = asdict(self)
        out.update(ratio_median=statistics.median(r), ratio_min=min(r), ratio_max=max(r),
                   rate={lib: self.rate(lib) for lib in LIBS}, mfu={lib: self.mfu(lib) for lib in LIBS},
                   python=platform.python_version(), torch=torch.__version__,
                   ld_preload=os.environ.get("LD_PRELOAD", ""))
        return out

    def report(self) -> str:
        r = self.ratios
        lines = [
            f"RATIO {self.name}: bertkit / transformers = {ratio_text(r)}",
            f"  {self.unit}/s: bertkit {self.rate('bertkit'):,.0f}, transformers {self.rate('transformers'):,.0f}"
            f"  | MFU vs matmul probe ({self.matmul_flops / 1e9:.0f} GFLOP/s, {self.threads} threads): "
            f"bertkit {100 * self.mfu('bertkit'):.1f}%, transformers {100 * self.mfu('transformers'):.1f}%",
        ]
        if self.memory:
            mem = ", ".join(f"{lib} {self.memory[lib]['steady_peak_mb']:.0f} MB "
                            f"(process max {self.memory[lib]['process_max_mb']:.0f} MB)"
                            for lib in LIBS if lib in self.memory)
            lines.append(f"  peak RSS during timed calls: {mem}")
        if self.notes:
            lines.append(f"  notes: {self.notes}")
        return "\n".join(lines)


def alternate(calls: dict[str, Callable[[], object]], repeats: int, warmup: int, steps: int,
              cpu_times: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """Seconds per call for each library, timed alternately with the order flipped every repeat.
    `cpu_times`, if given, receives the process CPU seconds of the same calls: at one thread, the
    time the work took with the waits for a loaded machine's cores left out."""
    for _ in range(warmup):
        for fn in calls.values():
            fn()
    times: dict[str, list[float]] = {lib: [] for lib in calls}
    order = list(calls)
    for r in range(repeats):
        for lib in (order if r % 2 == 0 else order[::-1]):
            t, cpu = time.perf_counter(), time.process_time()
            for _ in range(steps):
                calls[lib]()
            times[lib].append((time.perf_counter() - t) / steps)
            if cpu_times is not None:
                cpu_times.setdefault(lib, []).append((time.process_time() - cpu) / steps)
    return times


def speedups(times: dict[str, list[float]], baseline: str, candidate: str) -> list[float]:
    """t_baseline / t_candidate of each repeat (> 1: the candidate is faster). The two of a repeat
    were timed back to back (`alternate`), so a ratio sees the machine's load of that moment."""
    return [b / c for b, c in zip(times[baseline], times[candidate])]


def ratio_text(ratios: list[float]) -> str:
    """How every benchmark prints a ratio: "1.23x (min 1.10, max 1.31, 7 repeats)"."""
    return (f"{statistics.median(ratios):.2f}x (min {min(ratios):.2f}, max {max(ratios):.2f}, "
            f"{len(ratios)} repeats)")


# ---------------------------------------------------------------------------- memory
def _status_kb(field_name: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return float(line.split()[1])
    return float("nan")


def measure_memory_in_child(fn: Callable[[], object], warmup: int, steps: int) -> None:
    """Run in the `--memory-child` process: warm up, reset the high-water mark, run, print JSON."""
    for _ in range(warmup):
        fn()
    before_kb = _status_kb("VmRSS")
    # VmHWM, not ru_maxrss: ru_maxrss survives fork+exec, so it would report the parent's peak.
    setup_peak_kb = _status_kb("VmHWM")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM (peak RSS) to the current RSS
        reset = True
    except OSError:
        reset = False
    for _ in range(steps):
        fn()
    peak_kb = _status_kb("VmHWM")
    print("MEMORY " + json.dumps({
        "steady_peak_mb": peak_kb / 1024, "rss_before_mb": before_kb / 1024,
        "process_max_mb": max(setup_peak_kb, peak_kb) / 1024,
        "hwm_reset": reset}))


def memory_in_subprocesses(argv: list[str], libs: tuple[str, ...] = LIBS) -> dict[str, dict[str, float]]:
    """Peak memory of each library (or variant), each in a fresh interpreter running this same script."""
    out = {}
    for lib in libs:
        cmd = [sys.executable, *argv, "--memory-child", lib, "--no-memory"]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
        line = next((x for x in proc.stdout.splitlines() if x.startswith("MEMORY ")), None)
        if proc.returncode or line is None:
            raise RuntimeError(f"memory child for {lib} failed:\n{proc.stderr[-2000:]}")
        out[lib] = json.loads(line[len("MEMORY "):])
    return out


# ---------------------------------------------------------------------------- driver
def run(args, name: str, unit: str, work: float, flops: float,
        make_calls: Callable[[str | None], dict[str, Callable[[], object]]], notes: str = "") -> Result:
    """The common main: memory child, or alternating timing + memory subprocesses + report.

    `make_calls(only)` builds the per-library zero-argument calls; with `only` set (memory
    child) it builds just that library's.
    """
    setup_threads(args.threads)
    import transformers

    transformers.utils.logging.disable_progress_bar()
    repeats = 1 if args.smoke else args.repeats
    warmup = 0 if args.smoke else args.warmup
    if args.memory_child:
        calls = make_calls(args.memory_child)
        # One warm-up call (weights, optimizer state and allocator pools in place), one measured.
        measure_memory_in_child(calls[args.memory_child], 1, 1)
        sys.exit(0)
    calls = make_calls(None)
    probe = matmul_probe(512 if args.smoke else 2048, 2 if args.smoke else 5)
    times = alternate(calls, repeats, warmup, args.steps)
    if not args.smoke:  # probe again after timing: the machine's load drifts
        probe = max(probe, matmul_probe(2048, 5))
    result = Result(name + (f"[{args.label}]" if args.label else ""), unit, work, flops, times,
                    matmul_flops=probe, threads=args.threads, notes=notes,
                    command=" ".join(["python", *sys.argv]))
    if not (args.no_memory or args.smoke):  # smoke mode: three interpreters would be too slow for CI
        result.memory = memory_in_subprocesses(sys.argv)
    print(result.report(), flush=True)
    if not args.smoke:
        write_result(name, args.label, result.summary())
    return result


def write_result(name: str, label: str | None, payload: dict) -> str:
    """Write `payload` to RESULTS_DIR/NAME[-LABEL].json, the file the docs cite; return its path."""
    os.makedirs(RESULTS_DIR, exist_ok=True)
    path = os.path.join(RESULTS_DIR, name + (f"-{label}" if label else "") + ".json")
    with open(path, "w") as f:
        json.dump(payload, f, indent=1)
    return path


# ---------------------------------------------------------------------------- real text
def bbc_files() -> list[str]:
    import glob

    from bertkit.data.assets import bbc_dir

    return sorted(glob.glob(os.path.join(bbc_dir(), "*", "*.txt")))


def read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def bbc_paragraphs(n: int, seed: int = 0) -> list[str]:
    """`n` BBC paragraphs (titles and body paragraphs: 3 to ~380 tokens), a fixed random sample."""
    import random

    paragraphs = [p.strip() for path in bbc_files() for p in read_text(path).split("\n") if p.strip()]
    return random.Random(seed).sample(paragraphs, n)


def bbc_articles(n: int, seed: int = 0) -> tuple[list[str], list[int]]:
    """`n` whole BBC articles and their topic ids (0-4), a fixed random sample."""
    import random

    files = random.Random(seed).sample(bbc_files(), n)
    topics = sorted({os.path.basename(os.path.dirname(f)) for f in bbc_files()})
    return [read_text(f) for f in files], [topics.index(os.path.basename(os.path.dirname(f))) for f in files]
