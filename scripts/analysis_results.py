"""Produce the analysis results of docs/analysis.md: run the commands, time them, print markdown.

    .venv/bin/python scripts/analysis_results.py --out runs/analysis [--only attention,probe,scale]

Steps (each is a plain `bertkit` command, printed with its wall time so it can be rerun alone):
  attention  MiniLM on a real sentence pair: viewer HTML, grid PNG, per-head statistics, and a
             headless-Chromium screenshot of the viewer -> docs/img/attention-viewer.png
  probe      MiniLM, WordNet supersense: sentence level (glosses) and token level (the lemma
             words of example sentences), each with the control task and a random-init baseline
  scale      a budgeted sweep of small modern encoders pre-trained on BBC News, the fitted L(N)
             and the L(C) compute frontier

Runs as one process per command with one torch thread (OMP_NUM_THREADS=1) under `nice`, so
it leaves the machine usable for others.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SENTENCE = "The chef who ran the small restaurant cooked a meal for the critics"
PAIR = "They praised the food and the service"


def bertkit(args: list[str], log: list) -> str:
    """Run `bertkit ARGS` niced with one thread; record the command and wall time; return stdout."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    cmd = ["nice", "-n", "10", sys.executable, "-m", "bertkit", *args]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    shown = "bertkit " + " ".join(a if " " not in a else f'"{a}"' for a in args)
    log.append((shown, seconds))
    print(f"$ {shown}   # {seconds:.0f} s", flush=True)
    print(proc.stdout, flush=True)
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        raise SystemExit(f"command failed ({proc.returncode}): {shown}")
    return proc.stdout


def screenshot(html: str, png: str, fragment: str, size=(1280, 1000)) -> None:
    """Headless Chromium screenshot of the viewer at `html#fragment` (no network, fresh profile)."""
    chromium = os.environ.get("BERTKIT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={profile}", "--hide-scrollbars", f"--window-size={size[0]},{size[1]}",
                        "--virtual-time-budget=2000", f"--screenshot={os.path.abspath(png)}",
                        f"file://{os.path.abspath(html)}#{fragment}"],
                       check=True, capture_output=True, timeout=120)


def attention(out: str, model: str, log: list) -> None:
    d = os.path.join(out, "attention")
    os.makedirs(d, exist_ok=True)
    bertkit(["attention", "--model", model, SENTENCE, "--pair", PAIR, "--html", f"{d}/viewer.html",
             "--png", f"{d}/grid.png", "--stats", f"{d}/heads.jsonl", "--rollout"], log)
    bertkit(["attention", "--model", model, SENTENCE, "--pair", PAIR, "--png", f"{d}/L1H8.png",
             "--head", "1", "8"], log)
    os.makedirs(os.path.join(ROOT, "docs", "img"), exist_ok=True)
    target = os.path.join(ROOT, "docs", "img", "attention-viewer.png")
    start = time.perf_counter()
    screenshot(f"{d}/viewer.html", target, "layer=1&heads=8,2&hover=10&side=left")
    log.append(("chromium --headless --screenshot ... viewer.html#layer=1&heads=8,2&hover=10", time.perf_counter() - start))
    print(f"wrote {target}")


def probe(out: str, model: str, limit_sentence: int, limit_token: int, log: list) -> None:
    for task, limit in (("wordnet-supersense", limit_sentence), ("wordnet-tokens", limit_token)):
        bertkit(["probe", "--model", model, "--task", task, "--limit", str(limit), "--control", "--random-init",
                 "--out", os.path.join(out, f"probe-{task}")], log)


def scale(out: str, sizes: str, tokens: str, budget: str, log: list) -> None:
    d = os.path.join(out, "sweep")
    # The default recipe (the modern encoder, 40% masking, lr 2e-3) at 64-token sequences: the
    # sizes leave the unigram plateau within the budget; an evaluation every 100 steps gives
    # each size's L(C) curve for the frontier.
    bertkit(["scale", "sweep", "--sizes", sizes, "--tokens", tokens, "--time-budget", budget, "--threads", "1",
             "--eval-every", "100", "--out", d], log)
    bertkit(["scale", "fit", f"{d}/sweep.jsonl", "--plot", f"{d}/scaling.png"], log)
    bertkit(["scale", "fit", f"{d}/sweep.jsonl", "--no-offset"], log)
    bertkit(["scale", "frontier", f"{d}/sweep.jsonl", "--plot", f"{d}/frontier.png"], log)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/analysis")
    p.add_argument("--only", default="attention,probe,scale")
    p.add_argument("--model", default=None, help="default: the MiniLM asset")
    p.add_argument("--probe-sentences", type=int, default=5000)
    p.add_argument("--probe-token-sentences", type=int, default=5000)
    p.add_argument("--sizes", default="1x64,2x64,2x96,2x128,3x160,4x192,4x256")  # two heads at least: the rerun in docs
    p.add_argument("--tokens", default="2048000")
    p.add_argument("--time-budget", default="4500")
    args = p.parse_args()
    if args.model is None:
        sys.path.insert(0, ROOT)
        from bertkit.data.assets import minilm_dir

        args.model = minilm_dir()
    log: list = []
    steps = set(args.only.split(","))
    if "attention" in steps:
        attention(args.out, args.model, log)
    if "probe" in steps:
        probe(args.out, args.model, args.probe_sentences, args.probe_token_sentences, log)
    if "scale" in steps:
        scale(args.out, args.sizes, args.tokens, args.time_budget, log)
    print("\n| command | wall time |\n|---|---|")
    for cmd, seconds in log:
        print(f"| `{cmd}` | {seconds:.0f} s |")
    with open(os.path.join(args.out, "timings.json"), "w") as f:
        json.dump([{"command": c, "seconds": round(s, 1)} for c, s in log], f, indent=1)


if __name__ == "__main__":
    main()
