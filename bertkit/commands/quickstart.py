"""`bertkit quickstart`: the main job on built-in defaults, end to end on real data.

Each stage runs the same `bertkit` command a user would type, and prints it first:

1. sentence similarity with the pretrained MiniLM encoder;
2. pre-train a tiny encoder (of the family configs/pretrain-tiny.toml names) from scratch on BBC
   News (vocabulary trained on the corpus too);
3. fill-mask with that model;
4. fine-tune MiniLM on BBC topic classification and evaluate it on the held-out test split.
"""

from __future__ import annotations

import argparse
import os
import shlex
import time

import numpy as np

from bertkit.commands import evaluate, fill_mask, finetune, pretrain
from bertkit.data.assets import minilm_dir
from bertkit.inference.encode import SentenceEncoder
from bertkit.errors import ConfigError
from bertkit.runtime.run_dir import latest_checkpoint
from bertkit.settings.config_io import BUILT_IN_CONFIGS
from bertkit.commands.options import add_device, device_of


PAIRS = [
    ("A man is eating food.", "A man is eating a piece of bread."),
    ("A man is eating food.", "The girl is carrying a baby."),
    ("Shares in the bank fell after the profit warning.", "The bank's stock dropped on weak earnings."),
    ("Shares in the bank fell after the profit warning.", "The striker scored twice in the final."),
]
FILL_MASK_TEXTS = [
    "the prime [MASK] said the government would act.",
    "shares in the [MASK] fell sharply on monday.",
    "the film won an [MASK] for best actress.",
]
PRETRAIN_CONFIG = os.path.join(BUILT_IN_CONFIGS, "pretrain-tiny.toml")


def add_arguments(parser) -> None:
    parser.add_argument("--out", default="runs/quickstart", help="where every stage writes its results")
    parser.add_argument("--pretrain-steps", type=int, default=None,
                        help="pre-training steps for the tiny model (default: configs/pretrain-tiny.toml's "
                             "2500, a few minutes on 2 cores)")
    parser.add_argument("--finetune-epochs", type=float, default=2.0, help="epochs of BBC fine-tuning")
    parser.add_argument("--max-length", type=int, default=128,
                        help="tokens per BBC article when fine-tuning (title and first paragraph: "
                             "0.980 test accuracy, docs/peft.md)")
    parser.add_argument("--skip", nargs="*", default=[], choices=("embed", "pretrain", "finetune"),
                        help="stages to leave out")
    add_device(parser)


STAGE_COMMANDS = {"pretrain": pretrain, "fill-mask": fill_mask, "finetune": finetune, "evaluate": evaluate}


def bertkit(name: str, *argv: str) -> None:
    """Run one bertkit command in this process, printing it as a user would type it. Its options
    are parsed by the command's own parser; an error propagates to quickstart's one-line report."""
    print(f"\n$ bertkit {shlex.join((name, *argv))}", flush=True)
    module = STAGE_COMMANDS[name]
    parser = argparse.ArgumentParser(prog=f"bertkit {name}")
    module.add_arguments(parser)
    code = module.run(parser.parse_args(argv))
    if code:
        raise SystemExit(code)


def embedding_stage(model_dir: str, device: str) -> None:
    print("\n== 1. sentence similarity with a pretrained encoder (MiniLM) ==")
    encoder = SentenceEncoder.from_pretrained(model_dir, device=device)
    texts = sorted({t for pair in PAIRS for t in pair})
    vectors = dict(zip(texts, encoder.encode(texts)))
    for a, b in PAIRS:
        print(f"  cosine {float(np.dot(vectors[a], vectors[b])):6.3f}  {a!r} ~ {b!r}")


def pretrain_stage(out: str, steps: int | None, device: str) -> None:
    print("\n== 2. pre-train a tiny encoder (configs/pretrain-tiny.toml) from scratch on BBC News ==")
    config = os.path.normpath(PRETRAIN_CONFIG)
    if not os.path.exists(config):
        raise ConfigError(f"{config} is missing; run quickstart from a bertkit checkout")
    run_dir = os.path.join(out, "pretrain-tiny")
    steps_option = ["--set", f"train.max_steps={steps}"] if steps else []
    bertkit("pretrain", "--config", config, "--out", run_dir, "--device", device, *steps_option,
            *(["--resume"] if latest_checkpoint(run_dir) else []))
    model_dir = latest_checkpoint(run_dir)
    print("\n== 3. fill-mask with the model just trained ==")
    for text in FILL_MASK_TEXTS:
        bertkit("fill-mask", "--model", model_dir, text, "--top-k", "5", "--device", device)
    print(f"\ncurves: {os.path.join(run_dir, 'curves.png')}  metrics: {os.path.join(run_dir, 'metrics.jsonl')}"
          f"  checkpoint: {model_dir}")


def finetune_stage(out: str, model_dir: str, epochs: float, max_length: int, device: str) -> None:
    print("\n== 4. fine-tune MiniLM on BBC topics (5 classes), evaluate on the test split ==")
    run_dir = os.path.join(out, "bbc-minilm")
    bertkit("finetune", "--task", "classification", "--model", model_dir, "--train", "bbc",
            "--out", run_dir, "--overwrite", "--device", device, "--set", f"train.epochs={epochs}",
            f"data.max_length={max_length}")
    bertkit("evaluate", "--model", run_dir, "--data", "bbc:test", "--device", device)


def run(args) -> int:
    started = time.time()
    device = str(device_of(args))  # checked before any stage starts
    os.makedirs(args.out, exist_ok=True)
    if "embed" not in args.skip:
        embedding_stage(minilm_dir(), device)
    if "pretrain" not in args.skip:
        pretrain_stage(args.out, args.pretrain_steps, device)
    if "finetune" not in args.skip:
        finetune_stage(args.out, minilm_dir(), args.finetune_epochs, args.max_length, device)
    print(f"\nquickstart done in {time.time() - started:.0f} s; everything is under {args.out}/")
    return 0
