"""Where a training step's time goes on the GPU: kernels by kind, and the time the GPU sits idle.

    python benchmarks/profile_gpu.py                  on a CUDA GPU (about a minute)
    python benchmarks/profile_gpu.py --tiny           tiny sizes on any device (the CPU smoke test)

For each workload (bench_gpu.py's models and batches), bertkit's step and transformers' are run
under torch.profiler for `--steps` steps after `--warmup`. The table gives per step:

    wall      the steps' time over the steps (one synchronize ends each, as in bench_gpu.py)
    busy      the summed durations of the device's kernels, copies and memsets
    idle      wall - busy: the GPU waiting for the host (launches, syncs, Python)
    by kind   busy split by kernel name: matmul, attention, norm, dropout and random numbers,
              softmax and cross-entropy, optimizer, copies and casts, other elementwise

and the top kernels by time. Without CUDA the same table is built from the CPU's operator times
(busy = the operators' self time), so the script is tested anywhere; only a GPU run says what
binds the GPU. Writes OUT/gpu-profile.json and OUT/gpu-profile.md (OUT: --out, default
benchmarks/results).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

import bench_gpu
import harness

import bertkit
from bertkit.models.modern import ModernBertForMaskedLM

# Kernel name -> kind, first match wins (CUDA kernel names of cuBLAS/CUTLASS, flash attention,
# torch's ATen kernels; on the CPU the ATen operator names).
KINDS = [
    ("optimizer", r"adam|multi_tensor|fused_adamw"),
    ("attention", r"flash|fmha|attention|sdpa|efficient_attention"),
    ("matmul", r"gemm|cutlass|xmma|nvjet|cublas|sm\d+_|addmm|\bmm\b|aten::mm|aten::bmm|matmul|linear"),
    ("norm", r"layer_norm|layernorm|rms_norm"),
    ("dropout and random numbers", r"philox|dropout|bernoulli|rand|native_dropout"),
    ("softmax and cross-entropy", r"softmax|cross_entropy|nll_loss|logsumexp"),
    ("copies and casts", r"memcpy|memset|copy|to_copy|cast|index_select|index_copy|gather|scatter"),
]


def kind_of(name: str) -> str:
    lowered = name.lower()
    for kind, pattern in KINDS:
        if re.search(pattern, lowered):
            return kind
    return "other elementwise and reductions"


def device_events(prof) -> list[tuple[str, float]]:
    """(name, microseconds) of every kernel, copy and memset the device ran; on the CPU, every
    operator's self time."""
    if bench_gpu.DEVICE.type == "cuda":
        return [(e.name, e.time_range.elapsed_us()) for e in prof.events()
                if e.device_type == torch.autograd.DeviceType.CUDA]
    return [(e.key, e.self_cpu_time_total) for e in prof.key_averages() if e.self_cpu_time_total > 0]


def profile_call(call, steps: int, warmup: int) -> dict:
    """Profile `steps` calls of `call` (each ends with a synchronize) after `warmup` untimed ones."""
    for _ in range(warmup):
        call()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if bench_gpu.DEVICE.type == "cuda" else [])
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            call()
        wall = (time.perf_counter() - start) * 1e3 / steps
    events = device_events(prof)
    by_kind, by_name = defaultdict(float), defaultdict(float)
    for name, micros in events:
        by_kind[kind_of(name)] += micros / 1e3 / steps
        by_name[name] += micros / 1e3 / steps
    busy = sum(by_kind.values())
    top = sorted(by_name.items(), key=lambda item: -item[1])[:12]
    return {"wall_ms": round(wall, 3), "busy_ms": round(busy, 3), "idle_ms": round(max(0.0, wall - busy), 3),
            "kernels_per_step": round(len(events) / steps, 1) if bench_gpu.DEVICE.type == "cuda" else None,
            "by_kind_ms": {k: round(v, 3) for k, v in sorted(by_kind.items(), key=lambda item: -item[1])},
            "top_kernels_ms": [[name[:120], round(ms, 3)] for name, ms in top]}


def workloads(tiny: bool) -> dict:
    """name -> {variant: call}: the BERT-base MLM step (the farthest from issue 28's targets) and
    the GPU recipe's step, each bertkit's and transformers', and on a GPU bertkit's with compiled
    layers (what is left once the elementwise work is fused; the warm-up steps pay the compilation)."""
    def pair(make, shape_name):
        batch_size, length, _ = bench_gpu.shape(shape_name, tiny)
        bk, hf = make()
        batch = bench_gpu.mlm_batch(bench_gpu.lengths_for(batch_size, length, None), length, bk.config.vocab_size)
        calls = {"bertkit": bench_gpu.train_step(bk, batch), "transformers": bench_gpu.train_step(hf, batch)}
        if bench_gpu.DEVICE.type == "cuda":  # compiling takes minutes on a CPU
            compiled = make()[0]
            bench_gpu.compiled_layers(compiled)
            calls["bertkit_compiled"] = bench_gpu.train_step(compiled, batch)
        return calls

    preset, fields = bench_gpu.RECIPES["gpu_recipe"]
    return {"bert_base_mlm_train": pair(lambda: bench_gpu.bert_pair(tiny, bertkit.BertForMaskedLM, "BertForMaskedLM"),
                                        "bert_mlm"),
            "gpu_recipe_mlm_train": pair(lambda: bench_gpu.modern_pair(tiny, ModernBertForMaskedLM,
                                                                       "ModernBertForMaskedLM", preset, **fields),
                                         "gpu_recipe")}


def markdown(result: dict) -> str:
    info = result["info"]
    lines = [f"Step profile on {info['device_name']} ({info['precision']}, torch {info['torch']}); "
             f"ms per step, {info['steps']} profiled steps", ""]
    for name, variants in result["rows"].items():
        kinds = sorted({k for v in variants.values() for k in v["by_kind_ms"]})
        lines += [f"### {name}", "", "| | " + " | ".join(variants) + " |", "|---|" + "---|" * len(variants)]
        for field in ("wall_ms", "busy_ms", "idle_ms", "kernels_per_step"):
            lines.append(f"| {field} | " + " | ".join(str(v[field]) for v in variants.values()) + " |")
        for kind in kinds:
            lines.append(f"| {kind} | " + " | ".join(str(v["by_kind_ms"].get(kind, 0.0)) for v in variants.values())
                         + " |")
        for variant, v in variants.items():
            lines += ["", f"Top kernels, {variant}: " + "; ".join(f"`{n[:60]}` {ms}" for n, ms in v["top_kernels_ms"])]
        lines.append("")
    lines.append(f"Command: `{result['command']}`")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tiny", action="store_true", help="tiny sizes (any device, seconds): checks the script runs")
    p.add_argument("--out", default=harness.RESULTS_DIR, help="where gpu-profile.json and gpu-profile.md go")
    p.add_argument("--steps", type=int, default=5, help="profiled steps per variant")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per variant first")
    args = p.parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = True
    result = bench_gpu.run_record({}, steps=args.steps)
    for name, variants in workloads(args.tiny).items():
        result["rows"][name] = {variant: profile_call(call, args.steps, args.warmup) for variant, call in variants.items()}
        if bench_gpu.DEVICE.type == "cuda":
            torch.cuda.empty_cache()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gpu-profile.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(args.out, "gpu-profile.md"), "w") as f:
        f.write(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
