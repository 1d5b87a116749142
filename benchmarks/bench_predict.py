"""`bertkit predict` on a classifier: one lever of the predict path on vs off, in one process.

The model is all-MiniLM-L6-v2's real encoder with a fresh, seeded 5-class head (BBC topics;
the head's values do not change the cost), or `--model DIR`, a fine-tuned classifier of either
family (BERT or the modern encoder), run as `predict` runs it on the CPU
(`quantize.inference_copy`). The texts are BBC articles cut at random token counts
(bench_inference.py's `cut_texts`, 8-256 tokens by default). One call is the whole predict path
after loading: tokenization, batches, forwards, decoding, JSON rows (`tasks.prediction_rows`),
with eval_batch_size 32. `--lever`:

  batches  on: batches cut where padding costs more than a forward call (data.batches.length_batches)
           off: fixed batches of 32 features sorted by length (what predict and evaluate ran before)
  packed   on: the oneDNN-packed fp32 copy (fastpath.py)   off: the model as loaded
  int8     on: the int8 copy (`--int8`, quantize.py)       off: the packed fp32 copy
  chunks   on: rows a chunk of inputs at a time (tasks.inference.PREDICT_FIRST_CHUNK, then PREDICT_CHUNK),
           as `bertkit predict` streams them   off: every input in one chunk (what predict ran before)

Timed alternately with the order flipped every repeat (harness.alternate); speed =
time(off) / time(on) per repeat, median and min-max, in wall time and in this process's CPU
time (one thread: the work done, less disturbed when other jobs hold the cores). Before timing, the two paths' class
probabilities are compared (max |difference|, predicted labels that differ).

    python benchmarks/bench_predict.py [--lever batches|packed|int8|chunks] [--model DIR] [--texts 96]
        [--lengths 8 256] [--repeats 5] [--threads 1]
"""

from __future__ import annotations

import os
import sys
import time
import warnings

import harness

import numpy as np
import torch

from bench_fp32_levers import padding_share
from bench_inference import BATCH, cut_texts
from bertkit.data.assets import minilm_dir
from bertkit.models.heads import BertForSequenceClassification
from bertkit.inference.quantize import inference_copy
from bertkit.tasks import eval_order, feature_length, get_task, inference, prediction_rows
from bertkit.tasks.inference import load_for_inference
from bertkit.tasks.common import DataConfig, PredictionInput, TaskSpec
from bertkit.tasks.formats import TextExample
from bertkit.tasks.sequence import encode_texts
from bertkit.tokenizer import Tokenizer

TOPICS = ("business", "entertainment", "politics", "sport", "tech")


def seeded_classifier() -> BertForSequenceClassification:
    """MiniLM's encoder with a fresh seeded 5-class head (fp32, as loaded)."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the head is new: its weights are missing from the checkpoint
        return BertForSequenceClassification.from_pretrained(minilm_dir(), id2label=dict(enumerate(TOPICS)))


def predict_spec(max_length: int, batching: str = "length") -> TaskSpec:
    """predict's settings for the classifier: batch 32, batches cut by padding cost ("length") or fixed."""
    return TaskSpec(get_task("classification"), DataConfig(max_length=max_length, eval_batch_size=BATCH,
                                                          eval_batching=batching))


def main(argv=None):
    p = harness.parser(__doc__.splitlines()[0])
    p.set_defaults(threads=1, repeats=5, warmup=1)
    p.add_argument("--texts", type=int, default=96)
    p.add_argument("--lengths", nargs=2, type=int, default=[8, 256], metavar=("LO", "HI"))
    p.add_argument("--lever", choices=("batches", "packed", "int8", "chunks"), default="batches")
    p.add_argument("--model", help="a fine-tuned classifier directory (default: MiniLM with a seeded head)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    lo, hi = args.lengths
    if args.model:
        loaded, tokenizer, _ = load_for_inference(args.model, "classification", [])
    else:
        loaded, tokenizer = seeded_classifier(), Tokenizer.from_pretrained(minilm_dir())
    packed = inference_copy(loaded, tokenizer)
    examples = [TextExample(t) for t in cut_texts(tokenizer, lo, hi, 8 if args.smoke else args.texts, seed=0)]
    # the lever on and off: (model, batching) of each arm
    arms = {"batches": {"on": (packed, "length"), "off": (packed, "fixed")},
            "packed": {"on": (packed, "length"), "off": (loaded.eval(), "length")},
            "int8": {"on": (inference_copy(loaded, tokenizer, int8=True), "length"), "off": (packed, "length")},
            "chunks": {"on": (packed, "length"), "off": (packed, "length")},
            }[args.lever]
    model = {key: arm[0] for key, arm in arms.items()}
    spec = {key: predict_spec(hi, arm[1]) for key, arm in arms.items()}
    inputs = PredictionInput(examples)

    decoded = {k: get_task("classification").decode(model[k], tokenizer, examples, spec[k])
               for k in ("on", "off")}
    diff = max(float(np.abs(np.subtract(list(a[1].values()), list(b[1].values()))).max())
               for a, b in zip(decoded["on"], decoded["off"]))
    labels_differ = sum(a[0] != b[0] for a, b in zip(decoded["on"], decoded["off"]))
    cpu = {"on": [], "off": []}  # this process's CPU seconds per call: less disturbed by other jobs

    first_chunk = inference.PREDICT_FIRST_CHUNK
    one_chunk = {"on": False, "off": args.lever == "chunks"}

    def call(key: str) -> None:
        inference.PREDICT_FIRST_CHUNK = len(examples) if one_chunk[key] else first_chunk
        started = time.process_time()
        prediction_rows(model[key], tokenizer, spec[key], inputs)
        cpu[key].append(time.process_time() - started)

    times = harness.alternate({k: (lambda k=k: call(k)) for k in ("on", "off")},
                              1 if args.smoke else args.repeats, args.warmup, 1)
    speed = [f / o for o, f in zip(times["on"], times["off"])]
    cpu = {k: v[args.warmup:] for k, v in cpu.items()}
    cpu_speed = [f / o for o, f in zip(cpu["on"], cpu["off"])]

    features = encode_texts(tokenizer, examples, hi)
    lengths = [feature_length(f) for f in features]
    cut, fixed = eval_order(features, BATCH), eval_order(features, BATCH, cut=False)
    result = {"lever": args.lever, "model": args.model or "MiniLM, seeded 5-class head", "texts": len(examples),
              "lengths": [lo, hi], "tokens": sum(lengths), "batch_size": BATCH,
              "speed_median": float(np.median(speed)), "speed_min": min(speed), "speed_max": max(speed),
              "seconds_on": float(np.median(times["on"])), "seconds_off": float(np.median(times["off"])),
              "cpu_speed_median": float(np.median(cpu_speed)), "cpu_speed_min": min(cpu_speed),
              "cpu_speed_max": max(cpu_speed), "cpu_seconds_on": float(np.median(cpu["on"])),
              "cpu_seconds_off": float(np.median(cpu["off"])),
              "max_abs_diff_probabilities": diff, "labels_differ": labels_differ,
              "padding_cut": padding_share(lengths, cut), "batches_cut": len(cut),
              "padding_fixed": padding_share(lengths, fixed), "batches_fixed": len(fixed),
              "threads": args.threads, "repeats": args.repeats,
              "load_average_before": load_before, "load_average_after": os.getloadavg()}
    print(f"LEVER {args.lever} on predict-{lo}-{hi}: on / off speed = {result['speed_median']:.3f}x "
          f"({result['speed_min']:.3f}-{result['speed_max']:.3f}) on {result['texts']} texts, {result['tokens']} "
          f"tokens, {args.threads} thread(s); CPU time {result['cpu_speed_median']:.3f}x "
          f"({result['cpu_speed_min']:.3f}-{result['cpu_speed_max']:.3f}); probabilities max diff {diff:.1e}, "
          f"{labels_differ} labels differ; padding fixed {result['padding_fixed']:.1%} in {len(fixed)} batches, "
          f"cut {result['padding_cut']:.1%} in {len(cut)}", flush=True)
    if not args.smoke:
        harness.write_result(f"predict-{args.lever}", args.label, {
            "command": " ".join(["python", "benchmarks/bench_predict.py", *sys.argv[1:]]), "result": result})


if __name__ == "__main__":
    main(sys.argv[1:])
