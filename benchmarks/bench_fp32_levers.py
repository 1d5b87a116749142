"""The inference levers of `SentenceEncoder.encode`, each on vs off alone, in one process.

Each lever is one switch; everything else is the shipped fp32 path (oneDNN-packed weights,
fastpath.py). Two encoders that differ only in that switch encode the same BBC texts
(benchmarks/bench_inference.py's sets, all-MiniLM-L6-v2), timed alternately with the order
flipped every repeat (harness.alternate); speed = time(off) / time(on) per repeat, median and
min-max. Before timing, the two encoders' vectors are compared (max |difference|).

  packed    oneDNN-packed weights + fused GELU        off: SentenceEncoder.pack_weights = False
  qkv       Q, K, V as one packed GEMM                off: pack_for_cpu(fuse_qkv=False)
  residual  residual add fused into the output GEMMs  off: pack_for_cpu(fuse_residual=False)
  batches   sorted texts cut where padding costs more than a call (data.batches.length_batches)
            off: fixed batches of 32 sorted texts; the padding share of both is printed
  int8-fused  (both arms int8, quantize="int8") the passes around the int8 products as one
            compiled kernel each (int8_kernels.py)    off: int8_kernels.FUSE = False

    python benchmarks/bench_fp32_levers.py [--levers packed qkv residual batches int8-fused] [--sets mixed short]
        [--repeats 5] [--threads 1]

`--forward B T`: instead of encode, one model forward on a fixed (B, T) batch of random ids
(less variance; the copy-level levers packed, qkv and residual only).
"""

from __future__ import annotations

import os
import sys

import harness

import numpy as np
import torch

from bench_inference import BATCH, SETS, cut_texts
from bertkit.inference import int8_kernels
from bertkit.data.assets import minilm_dir
from bertkit.inference.encode import SentenceEncoder
from bertkit.inference.fastpath import pack_for_cpu
from bertkit.data.batches import fixed_batches, length_batches
from bertkit.tokenizer import Tokenizer

LEVERS = ("packed", "qkv", "residual", "batches", "int8-fused")
COPY_LEVERS = ("packed", "qkv", "residual")  # what --forward measures


class Unfused:
    """An int8 encoder whose encode() runs int8_kernels' passes unfused (plain torch)."""

    def __init__(self, encoder: SentenceEncoder):
        self.encoder = encoder

    def encode(self, *args, **kwargs):
        int8_kernels.FUSE = False
        try:
            return self.encoder.encode(*args, **kwargs)
        finally:
            int8_kernels.FUSE = True


def encoders(lever: str) -> tuple[SentenceEncoder, SentenceEncoder]:
    """(on, off): the shipped encoder and one with only `lever` switched off."""
    on = SentenceEncoder.from_pretrained(minilm_dir(), quantize="int8" if lever == "int8-fused" else None)
    if lever == "int8-fused":
        off = Unfused(on)
    elif lever == "packed":
        off = type("Unpacked", (SentenceEncoder,), {"pack_weights": False})(on.model, on.tokenizer, on.layout)
    elif lever == "batches":
        off = type("FixedBatches", (SentenceEncoder,), {"cut_batches": False})(on.model, on.tokenizer, on.layout)
    else:
        off = SentenceEncoder(on.model, on.tokenizer, on.layout)
        off.runner = pack_for_cpu(on.model, **{f"fuse_{lever}": False})
    return on, off


def measure_forward(lever: str, batch: int, length: int, args) -> dict:
    """The copy-level lever on one forward of a fixed (batch, length) batch."""
    on, off = encoders(lever)
    runners = {"on": on.runner, "off": off.runner if lever != "packed" else on.model}
    ids = torch.randint(1000, 20000, (batch, length), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1:, length - length // 8:] = 0  # some padding, as in a real batch
    with torch.inference_mode():
        calls = {k: (lambda r=r: r(ids, mask).last_hidden_state) for k, r in runners.items()}
        diff = float((calls["on"]() - calls["off"]()).abs().max())
        times = harness.alternate(calls, args.repeats, args.warmup, 1)
    speed = harness.speedups(times, "off", "on")
    return {"lever": lever, "forward": [batch, length], "speed_median": float(np.median(speed)),
            "speed_min": min(speed), "speed_max": max(speed), "max_abs_diff": diff, "threads": args.threads,
            "repeats": args.repeats}


def padding_share(lengths: list[int], batches: list[list[int]]) -> float:
    slots = sum(len(rows) * max(lengths[i] for i in rows) for rows in batches)
    return 1 - sum(lengths) / slots


def measure(lever: str, set_name: str, args) -> dict:
    lo, hi, n = SETS[set_name]
    tokenizer = Tokenizer.from_pretrained(minilm_dir())
    texts = cut_texts(tokenizer, lo, hi, 8 if args.smoke else n, seed=0)
    on, off = encoders(lever)
    calls = {"on": lambda: on.encode(texts, batch_size=BATCH, max_length=hi, show_progress=False),
             "off": lambda: off.encode(texts, batch_size=BATCH, max_length=hi, show_progress=False)}
    diff = float(np.abs(calls["on"]() - calls["off"]()).max())
    times = harness.alternate(calls, 1 if args.smoke else args.repeats, args.warmup, 1)
    speed = harness.speedups(times, "off", "on")
    lengths = [len(x) for x in tokenizer(texts, padding=False, truncation=True, max_length=hi,
                                         return_tensors=None)["input_ids"]]
    fixed = fixed_batches(lengths, BATCH)
    cut = length_batches(lengths, BATCH)
    return {"lever": lever, "set": set_name, "texts": len(texts), "tokens": sum(lengths),
            "speed_median": float(np.median(speed)), "speed_min": min(speed), "speed_max": max(speed),
            "seconds_on": float(np.median(times["on"])), "seconds_off": float(np.median(times["off"])),
            "max_abs_diff": diff, "threads": args.threads, "repeats": args.repeats,
            "padding_fixed": padding_share(lengths, fixed), "batches_fixed": len(fixed),
            "padding_cut": padding_share(lengths, cut), "batches_cut": len(cut)}


def main(argv=None):
    p = harness.parser(__doc__.splitlines()[0])
    p.set_defaults(threads=1, repeats=5, warmup=1)
    p.add_argument("--levers", nargs="+", choices=LEVERS, default=list(LEVERS))
    p.add_argument("--sets", nargs="+", choices=list(SETS), default=["mixed"])
    p.add_argument("--forward", nargs=2, type=int, metavar=("B", "T"))
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    results = []
    if args.forward:
        for lever in [x for x in args.levers if x in COPY_LEVERS]:
            r = measure_forward(lever, *args.forward, args)
            results.append(r)
            print(f"LEVER {lever} on one forward {tuple(args.forward)} ({args.threads} thread(s)): on / off speed = "
                  f"{r['speed_median']:.3f}x ({r['speed_min']:.3f}-{r['speed_max']:.3f}), max diff "
                  f"{r['max_abs_diff']:.1e}", flush=True)
        args.sets = []
    for set_name in args.sets:
        for lever in args.levers:
            r = measure(lever, set_name, args)
            results.append(r)
            print(f"LEVER {lever} on {set_name} ({r['texts']} texts, {r['tokens']} tokens, {args.threads} thread(s)): "
                  f"on / off speed = {r['speed_median']:.3f}x ({r['speed_min']:.3f}-{r['speed_max']:.3f}), "
                  f"max diff {r['max_abs_diff']:.1e}; padding fixed {r['padding_fixed']:.1%} in "
                  f"{r['batches_fixed']} batches, cut {r['padding_cut']:.1%} in {r['batches_cut']}", flush=True)
    if not args.smoke:
        harness.write_result("fp32-levers", args.label, {
            "command": " ".join(["python", "benchmarks/bench_fp32_levers.py", *sys.argv[1:]]),
            "load_average": os.getloadavg(), "results": results})


if __name__ == "__main__":
    main(sys.argv[1:])
