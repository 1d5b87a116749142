"""`bertkit predict` against the real anchors: class probabilities of BBC texts from one classifier.

The classifier is bench_predict.py's (all-MiniLM-L6-v2's real encoder with a fresh seeded 5-class
head), saved once with save_pretrained into a temporary directory; every runtime loads it from
there, so all run the same weights. One process, the same texts (bench_inference.py's
`cut_texts`, 8-256 tokens by default), timed in alternating order (the order reversed every
repeat), at `--threads` intra-op threads for torch and ONNX Runtime alike, batch 32:

  bertkit fp32          the predict path as `bertkit predict` runs it: inference_copy (oneDNN-packed
                        fp32) and tasks.prediction_rows (batches cut by padding cost, JSON rows)
  bertkit int8          the same with `--int8` (inference_copy(..., int8=True))
  transformers          AutoTokenizer + AutoModelForSequenceClassification in the given order,
                        softmax probabilities and the label names
  transformers sorted   the same, texts sorted by token count first
  pipeline              transformers.pipeline("text-classification", top_k=None), batch_size 32
  onnxruntime fp32      bertkit's export of the classifier (`bertkit export --format onnx`),
                        sorted batches as bench_inference.py runs it, softmax and label names
  onnxruntime int8      that graph through onnxruntime.quantization.quantize_dynamic (QInt8)

Before timing, every runtime's probabilities are compared with bertkit fp32's: max |difference|
and the number of predicted labels that differ (the fresh head gives near-uniform
probabilities, so a label flips at a small difference). Every call is timed in wall seconds
and in process CPU seconds. No peak-memory column (bench_inference.py measures the encoders').

    python benchmarks/bench_predict_anchors.py [--texts 96] [--lengths 8 256] [--repeats 3] [--threads 2]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import harness

import numpy as np
import torch
import transformers

from bench_inference import BATCH, cut_texts, hf_batches, load, ort_encoder, table, timing_rows
from bench_predict import TOPICS, predict_spec, seeded_classifier
from bertkit.data.assets import minilm_dir
from bertkit.tasks import export_directory
from bertkit.models.heads import BertForSequenceClassification
from bertkit.inference.quantize import inference_copy
from bertkit.tasks import get_task, prediction_rows
from bertkit.tasks.common import PredictionInput
from bertkit.tasks.formats import TextExample
from bertkit.tokenizer import Tokenizer

RUNTIMES = ("bertkit fp32", "bertkit int8", "transformers", "transformers sorted", "pipeline",
            "onnxruntime fp32", "onnxruntime int8")


def softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def save_classifier(directory: str) -> str:
    """The seeded classifier and its tokenizer, saved once for every runtime to load."""
    seeded_classifier().save_pretrained(directory)
    Tokenizer.from_pretrained(minilm_dir()).save_pretrained(directory)
    return directory


def hf_classifier(directory: str, max_length: int, sort: bool):
    """What a transformers user writes: tokenize a batch, forward, softmax, label names."""
    tok = transformers.AutoTokenizer.from_pretrained(directory)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(directory).eval()
    names = model.config.id2label

    def predict(texts: list[str]) -> tuple[np.ndarray, list[str]]:
        probs = np.empty((len(texts), model.config.num_labels), dtype=np.float32)
        with torch.inference_mode():
            for rows, batch in hf_batches(tok, texts, max_length, sort):
                probs[rows] = model(**batch).logits.softmax(-1).numpy()
        return probs, [names[int(k)] for k in probs.argmax(-1)]

    return predict


def onnx_classifier(directory: str, workdir: str, int8: bool):
    """bertkit's ONNX export of the classifier (what `bertkit export --format onnx` writes), or its
    ONNX Runtime dynamic int8 version."""
    from onnxruntime.quantization import QuantType, quantize_dynamic  # optional: the [onnx] extra

    fp32, quantized = os.path.join(workdir, "model.onnx"), os.path.join(workdir, "model-int8.onnx")
    if not os.path.exists(fp32):
        export_directory(directory, workdir)
    if int8 and not os.path.exists(quantized):
        quantize_dynamic(fp32, quantized, weight_type=QuantType.QInt8)
    return quantized if int8 else fp32


def make_call(runtime: str, directory: str, texts: list[str], max_length: int, threads: int, workdir: str):
    """(the timed call, a function giving the runtime's probabilities (texts, labels) in TOPICS order)."""
    if runtime.startswith("bertkit"):
        tokenizer = Tokenizer.from_pretrained(directory)
        model = inference_copy(BertForSequenceClassification.from_pretrained(directory), tokenizer, "int8" in runtime)
        spec, examples = predict_spec(max_length), [TextExample(t) for t in texts]
        inputs = PredictionInput(examples)

        def probabilities():
            decoded = get_task("classification").decode(model, tokenizer, examples, spec)
            return np.array([[p[name] for name in TOPICS] for _, p in decoded]), [label for label, _ in decoded]

        return (lambda: prediction_rows(model, tokenizer, spec, inputs)), probabilities
    if runtime.startswith("transformers"):
        classify = hf_classifier(directory, max_length, sort="sorted" in runtime)
        return (lambda: classify(texts)), (lambda: classify(texts))
    if runtime == "pipeline":
        pipe = transformers.pipeline("text-classification", model=directory, top_k=None, device=-1)

        def run():
            return pipe(texts, batch_size=BATCH, truncation=True, max_length=max_length)

        def probabilities():
            scores = [{s["label"]: s["score"] for s in row} for row in run()]
            return np.array([[row[name] for name in TOPICS] for row in scores]), [max(r, key=r.get) for r in scores]

        return run, probabilities
    path = onnx_classifier(directory, workdir, "int8" in runtime)
    logits = ort_encoder(path, Tokenizer.from_pretrained(directory), max_length, threads, columns=len(TOPICS))

    def predict():
        probs = softmax(logits(texts))
        return probs, [TOPICS[k] for k in probs.argmax(-1)]

    return predict, predict


def main(argv=None):
    p = harness.parser(__doc__.splitlines()[0])
    p.set_defaults(repeats=3, warmup=1)
    p.add_argument("--texts", type=int, default=96)
    p.add_argument("--lengths", nargs=2, type=int, default=[8, 256], metavar=("LO", "HI"))
    p.add_argument("--runtimes", nargs="+", choices=RUNTIMES, default=list(RUNTIMES))
    args = p.parse_args(argv)
    if "bertkit fp32" not in args.runtimes:
        args.runtimes = ["bertkit fp32", *args.runtimes]
    torch.set_num_threads(args.threads)
    transformers.utils.logging.disable_progress_bar()
    lo, hi = args.lengths
    n = 8 if args.smoke else args.texts
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="bertkit-predict-anchors-") as tmp:
        directory = save_classifier(os.path.join(tmp, "classifier"))
        tokenizer = Tokenizer.from_pretrained(directory)
        texts = cut_texts(tokenizer, lo, hi, n, seed=0)
        lengths = [len(x) for x in tokenizer(texts, padding=False, truncation=False, return_tensors=None)["input_ids"]]
        made = {rt: make_call(rt, directory, texts, hi, args.threads, os.path.join(tmp, "onnx"))
                for rt in args.runtimes}
        reference, reference_labels = made["bertkit fp32"][1]()
        checks = {}
        for rt, (_, probabilities) in made.items():
            got, labels = probabilities()
            checks[rt] = {"max_abs_diff": float(np.abs(got - reference).max()),
                          "labels_differ": sum(a != b for a, b in zip(labels, reference_labels))}
        load_before = load()
        cpu_times: dict[str, list[float]] = {}
        times = harness.alternate({rt: call for rt, (call, _) in made.items()}, 1 if args.smoke else args.repeats,
                                  0 if args.smoke else args.warmup, 1, cpu_times)
        load_after = load()
    result = {"set": f"predict {lo}-{hi}", "texts": n, "tokens": sum(lengths), "min_tokens": min(lengths),
              "max_tokens": max(lengths), "median_tokens": float(np.median(lengths)), "threads": args.threads,
              "repeats": 1 if args.smoke else args.repeats, "load_before": load_before, "load_after": load_after,
              "rows": timing_rows(args.runtimes, times, cpu_times, checks, {}),
              "command": " ".join(["python", "benchmarks/bench_predict_anchors.py", *sys.argv[1:]])}
    print(table(result, "probabilities"), f"\n({time.time() - started:.0f} s)", flush=True)
    rows = result["rows"]
    for anchor in ("transformers sorted", "pipeline", "onnxruntime fp32"):
        if anchor in rows:  # the line the smoke test looks for: bertkit fp32's speed over each anchor
            speed = 1 / rows[anchor]["speed_vs_bertkit_fp32"]
            print(f"ANCHOR predict-{lo}-{hi}: bertkit fp32 / {anchor} = {speed:.2f}x", flush=True)
    if not args.smoke:
        harness.write_result(f"predict-anchors-{lo}-{hi}", args.label, result)


if __name__ == "__main__":
    main(sys.argv[1:])
