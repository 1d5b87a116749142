"""Inference against the real anchors: sentence embeddings of BBC texts with all-MiniLM-L6-v2.

One process, the same texts and weights, timed in alternating order (the order reversed every
repeat), at `--threads` intra-op threads for every runtime (torch and ONNX Runtime alike):

  bertkit fp32        SentenceEncoder.encode (sorts by length itself; oneDNN-packed weights)
  bertkit fp32 unpacked  the same with SentenceEncoder.pack_weights = False (the lever off)
  bertkit int8        SentenceEncoder(quantize="int8") (bertkit/inference/quantize.py)
  transformers        BertTokenizerFast + BertModel (sdpa) in the given order, mean pool + L2
  transformers sorted the same, texts sorted by token count first
  sentence-transformers SentenceTransformer(dir).encode (sorts by length itself)
  onnxruntime fp32    bertkit's export of the sentence encoder (`bertkit export`), sorted batches
  onnxruntime int8    that graph through onnxruntime.quantization.quantize_dynamic (QInt8)

Batch 32. Texts: BBC articles cut at random token counts in each set's range (short 8-32,
mixed 8-256, long 256-512 tokens, [CLS]/[SEP] included), so no runtime truncates; a user's
batch in size (hundreds of texts: 512 short, 384 mixed, 128 long). Batches from a handful of
texts favour whoever sorts best and time start-up noise; `--texts N` overrides the count. Every
runtime's vectors are compared with bertkit fp32 before timing: max |difference| for fp32,
min cosine for int8. Every call is timed in wall seconds and in process CPU seconds (at one
thread the CPU ratio leaves out the waits for a shared machine's cores). Peak memory: each runtime again in a fresh interpreter (this script with
`--memory-runtime`), VmHWM reset after a warm-up call (benchmarks/harness.py).

    python benchmarks/bench_inference.py [--sets short mixed long] [--repeats 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import warnings

import harness

import numpy as np
import torch
import torch.nn.functional as F
import transformers

from bertkit.data.assets import minilm_dir
from bertkit.inference.encode import SentenceEncoder
from bertkit.inference.onnx import export_model, onnx_session
from bertkit.data.batches import fixed_batches
from bertkit.tokenizer import Tokenizer

BATCH = 32
# tokens lo, hi; number of texts (a user's batch: hundreds of texts, each set ~10-50k tokens)
SETS = {"short": (8, 32, 512), "mixed": (8, 256, 384), "long": (256, 512, 128)}
RUNTIMES = ("bertkit fp32", "bertkit fp32 unpacked", "bertkit int8", "transformers", "transformers sorted", "sentence-transformers",
            "onnxruntime fp32", "onnxruntime int8")


def cut_texts(tokenizer: Tokenizer, lo: int, hi: int, n: int, seed: int = 0) -> list[str]:
    """`n` BBC articles, each cut to a random number of tokens in [lo, hi] (with [CLS] and [SEP])
    at a token boundary, using the tokenizer's character offsets."""
    rng = random.Random(seed)
    files = harness.bbc_files()
    texts = []
    while len(texts) < n:
        text = " ".join(harness.read_text(rng.choice(files)).split())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # whole articles exceed the model's length: cut below
            enc = tokenizer([text], padding=False, truncation=False, return_offsets=True, return_tensors=None)
        offsets = [o for o in enc["offsets"][0] if o[1] > 0]  # real tokens only
        if len(offsets) + 2 < lo:
            continue
        keep = rng.randint(lo, min(hi, len(offsets) + 2)) - 2
        texts.append(text[:offsets[keep - 1][1]])
    return texts


def hf_batches(tok, texts: list[str], max_length: int, sort: bool):
    """(rows, tokenized batch) of BATCH texts the way a transformers user batches them: in the
    given order, or longest first when `sort` (as sentence-transformers does)."""
    order = list(range(len(texts)))
    if sort:
        lengths = [len(x) for x in tok(texts, truncation=True, max_length=max_length)["input_ids"]]
        order.sort(key=lambda i: -lengths[i])
    for i in range(0, len(order), BATCH):
        rows = order[i:i + BATCH]
        yield rows, tok([texts[j] for j in rows], padding=True, truncation=True, max_length=max_length,
                        return_tensors="pt")


def hf_encoder(directory: str, max_length: int, sort: bool):
    tok = transformers.BertTokenizerFast.from_pretrained(directory)
    model = transformers.BertModel.from_pretrained(directory, attn_implementation="sdpa").eval()

    def encode(texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), model.config.hidden_size), dtype=np.float32)
        with torch.inference_mode():
            for rows, batch in hf_batches(tok, texts, max_length, sort):
                hidden = model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                out[rows] = F.normalize((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9), dim=-1).numpy()
        return out

    return encode


def ort_encoder(path: str, tokenizer: Tokenizer, max_length: int, threads: int, columns: int = 384):
    """The graph's first output (`columns` floats per text: 384 for the embedding, the label count
    for a classifier's logits) in input order, run as sorted batches of 32."""
    session = onnx_session(path, threads=threads)
    wanted = [i.name for i in session.get_inputs()]

    def encode(texts: list[str]) -> np.ndarray:
        enc = tokenizer(texts, padding=False, truncation=True, max_length=max_length, return_tensors=None)
        ids, types = enc["input_ids"], enc["token_type_ids"]
        out = np.empty((len(texts), columns), dtype=np.float32)
        for rows in fixed_batches([len(x) for x in ids], BATCH):  # sorted batches of 32, as the anchors batch
            width = max(len(ids[i]) for i in rows)
            feed = {name: np.zeros((len(rows), width), dtype=np.int64) for name in wanted}
            for j, i in enumerate(rows):
                n = len(ids[i])
                feed["input_ids"][j, :n] = ids[i]
                feed["attention_mask"][j, :n] = 1
                if "token_type_ids" in feed:
                    feed["token_type_ids"][j, :n] = types[i]
            out[rows] = session.run(None, feed)[0]
        return out

    return encode


def onnx_files(directory: str, workdir: str) -> tuple[str, str]:
    """bertkit's export of the sentence encoder and its ONNX Runtime dynamic int8 version."""
    from onnxruntime.quantization import QuantType, quantize_dynamic  # optional: the [onnx] extra

    fp32, int8 = os.path.join(workdir, "minilm.onnx"), os.path.join(workdir, "minilm-int8.onnx")
    if not os.path.exists(int8):
        from bertkit.models.encoder import BertModel

        export_model(BertModel.from_pretrained(directory), fp32, "embedding")
        quantize_dynamic(fp32, int8, weight_type=QuantType.QInt8)
    return fp32, int8


def make_call(runtime: str, texts: list[str], max_length: int, threads: int, workdir: str):
    directory = minilm_dir()
    if runtime.startswith("bertkit"):
        cls = type("Unpacked", (SentenceEncoder,), {"pack_weights": False}) if "unpacked" in runtime else SentenceEncoder
        encoder = cls.from_pretrained(directory, quantize="int8" if "int8" in runtime else None)
        return lambda: encoder.encode(texts, batch_size=BATCH, max_length=max_length, show_progress=False)
    if runtime.startswith("transformers"):
        encode = hf_encoder(directory, max_length, sort="sorted" in runtime)
        return lambda: encode(texts)
    if runtime == "sentence-transformers":
        from sentence_transformers import SentenceTransformer  # test-only reference

        model = SentenceTransformer(directory, device="cpu")
        model.max_seq_length = max_length
        return lambda: model.encode(texts, batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True,
                                    show_progress_bar=False)
    fp32, int8 = onnx_files(directory, workdir)
    encode = ort_encoder(int8 if "int8" in runtime else fp32, Tokenizer.from_pretrained(directory), max_length, threads)
    return lambda: encode(texts)


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def set_size(name: str, args) -> tuple[int, int, int]:
    """(lo, hi, number of texts) of a set: its own, `--texts`, or 8 for a smoke run."""
    lo, hi, n = SETS[name]
    return lo, hi, 8 if args.smoke else (args.texts or n)


def run_set(name: str, args, workdir: str) -> dict:
    lo, hi, n = set_size(name, args)
    tokenizer = Tokenizer.from_pretrained(minilm_dir())
    texts = cut_texts(tokenizer, lo, hi, n, seed=0)
    lengths = [len(x) for x in tokenizer(texts, padding=False, truncation=False, return_tensors=None)["input_ids"]]
    calls = {rt: make_call(rt, texts, hi, args.threads, workdir) for rt in args.runtimes}
    reference = calls["bertkit fp32"]()
    checks = {}
    for rt, call in calls.items():  # also the first warm-up call of each
        got = call()
        checks[rt] = ({"min_cosine": float((got * reference).sum(1).min())} if "int8" in rt
                      else {"max_abs_diff": float(np.abs(got - reference).max())})
    load_before = load()
    cpu_times: dict[str, list[float]] = {}
    times = harness.alternate(calls, 1 if args.smoke else args.repeats, max(0, args.warmup - 1), 1, cpu_times)
    load_after = load()
    memory = {}
    if not (args.no_memory or args.smoke):
        for rt in args.runtimes:
            cmd = [sys.executable, os.path.abspath(__file__), "--memory-runtime", rt, "--sets", name,
                   "--threads", str(args.threads), "--workdir", workdir, "--texts", str(n)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            line = next((x for x in proc.stdout.splitlines() if x.startswith("MEMORY ")), None)
            if proc.returncode or line is None:
                raise RuntimeError(f"memory child {rt} failed:\n{proc.stderr[-2000:]}")
            memory[rt] = json.loads(line[len("MEMORY "):])["steady_peak_mb"]
    rows = timing_rows(args.runtimes, times, cpu_times, checks, memory)
    return {"set": name, "texts": n, "tokens": sum(lengths), "min_tokens": min(lengths),
            "max_tokens": max(lengths), "median_tokens": float(np.median(lengths)), "threads": args.threads,
            "repeats": args.repeats, "load_before": load_before, "load_after": load_after, "rows": rows,
            "command": " ".join(["python", "benchmarks/bench_inference.py", *sys.argv[1:]])}


def timing_rows(runtimes, times: dict, cpu_times: dict, checks: dict, memory: dict) -> dict:
    """One table row per runtime: seconds per call and speed against "bertkit fp32" (per repeat,
    wall and CPU time), with the runtime's output check and peak memory (None: not measured)."""
    rows = {}
    for rt in runtimes:
        speed = harness.speedups(times, "bertkit fp32", rt)  # per repeat: >1 = faster than bertkit fp32
        cpu_speed = harness.speedups(cpu_times, "bertkit fp32", rt)
        rows[rt] = {"median_s": float(np.median(times[rt])), "speed_vs_bertkit_fp32": float(np.median(speed)),
                    "speed_min": min(speed), "speed_max": max(speed), "median_cpu_s": float(np.median(cpu_times[rt])),
                    "cpu_speed_vs_bertkit_fp32": float(np.median(cpu_speed)), "cpu_speed_min": min(cpu_speed),
                    "cpu_speed_max": max(cpu_speed), **checks[rt], "peak_mb": memory.get(rt)}
    return rows


def check_text(row: dict) -> str:
    """A row's output check: min cosine (int8 vectors) or max |difference|, and the predicted
    labels that differ when the outputs are class probabilities."""
    text = (f"min cosine {row['min_cosine']:.4f}" if "min_cosine" in row
            else f"max diff {row['max_abs_diff']:.1e}")
    return text + (f", {row['labels_differ']} labels differ" if "labels_differ" in row else "")


def table(result: dict, checked: str = "vectors") -> str:
    lines = [f"**{result['set']}**: {result['texts']} texts, {result['tokens']:,} tokens "
             f"({result['min_tokens']}-{result['max_tokens']}, median {result['median_tokens']:.0f}); "
             f"{result['threads']} threads, {result['repeats']} alternating repeats; load average "
             f"{result['load_before']} before, {result['load_after']} after",
             "",
             "| runtime | s per call (median) | speed vs bertkit fp32 (median, min-max) | CPU s per call | "
             f"CPU-time speed vs bertkit fp32 | {checked} vs bertkit fp32 | peak RSS MB |",
             "|---|---|---|---|---|---|---|"]
    for rt, row in result["rows"].items():
        check = check_text(row)
        peak = "-" if row["peak_mb"] is None else f"{row['peak_mb']:.0f}"
        lines.append(f"| {rt} | {row['median_s']:.2f} | **{row['speed_vs_bertkit_fp32']:.2f}x** "
                     f"({row['speed_min']:.2f}-{row['speed_max']:.2f}) | {row['median_cpu_s']:.2f} | "
                     f"**{row['cpu_speed_vs_bertkit_fp32']:.2f}x** ({row['cpu_speed_min']:.2f}-{row['cpu_speed_max']:.2f}) "
                     f"| {check} | {peak} |")
    return "\n".join(lines)


def main(argv=None):
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--sets", nargs="+", choices=list(SETS), default=list(SETS))
    p.add_argument("--runtimes", nargs="+", choices=RUNTIMES, default=list(RUNTIMES))
    p.add_argument("--texts", type=int, default=None, help="texts per set (default: the set's own count)")
    p.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "bertkit-bench-inference"))
    p.add_argument("--memory-runtime", choices=RUNTIMES, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if "bertkit fp32" not in args.runtimes:
        args.runtimes = ["bertkit fp32", *args.runtimes]
    torch.set_num_threads(args.threads)
    transformers.utils.logging.disable_progress_bar()
    os.makedirs(args.workdir, exist_ok=True)
    if args.memory_runtime:
        lo, hi, n = set_size(args.sets[0], args)
        texts = cut_texts(Tokenizer.from_pretrained(minilm_dir()), lo, hi, n, seed=0)
        harness.measure_memory_in_child(make_call(args.memory_runtime, texts, hi, args.threads, args.workdir), 1, 1)
        return
    for name in args.sets:
        started = time.time()
        result = run_set(name, args, args.workdir)
        print(table(result), f"\n({time.time() - started:.0f} s)\n", flush=True)
        if not args.smoke:
            harness.write_result(f"inference-{name}", args.label, result)


if __name__ == "__main__":
    main(sys.argv[1:])
