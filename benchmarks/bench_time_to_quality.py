"""Time to quality: bertkit's default pre-training recipe against transformers' BertForMaskedLM
trained the way its run_mlm.py example trains by default, on the same corpus, split and
sequences, with the same wall budget and threads, one arm after the other.

    python benchmarks/bench_time_to_quality.py [--minutes 30] [--threads 2] [--eval-every 60] [--finetune]
    python benchmarks/bench_time_to_quality.py --bertkit-run runs/mini --minutes 60 ...
    python benchmarks/bench_time_to_quality.py --bertkit-run RUN --minutes 7 --device cuda --hf-precision bf16
        (on a GPU: RUN is a finished GPU-recipe run that kept checkpoints along the way, e.g.
        `bertkit pretrain --config configs/pretrain-gpu-10min.toml --out RUN --set
        train.save_every=500 train.keep_last=0`; its lr schedule follows its own clock, so it is
        scored from one run rather than trained in resumed chunks)

The arms
  bertkit       `bertkit pretrain --config configs/pretrain-mini.toml --set train.max_minutes=M`
                (the recipe as configured: the modern mini encoder, 30% masking, lr 2e-3, ...),
                run in chunks of --eval-every seconds: each chunk is the same command with
                --resume and a budget --eval-every seconds larger, and the newest checkpoint is
                evaluated between chunks. Resuming is exact (same batches, masks, RNG and lr;
                tests/train/test_trainer.py) and the budget counts training steps only, so the
                chunks train as one run would. Or --bertkit-run RUN: a finished `bertkit pretrain`
                run of the recipe (its pretrain_config.json fixes the recipe), each checkpoint it
                saved scored at the training time its trainer state recorded (the same clock;
                run it with `--set train.keep_last=0` so that it keeps every checkpoint).
  transformers  `BertForMaskedLM` from a `BertConfig` of the recipe's preset size (mini: 4 layers,
                hidden 256, 4 heads, intermediate 1024) and the tokenizer's vocabulary, trained
                with run_mlm.py's defaults (TrainingArguments 5.x): DataCollatorForLanguageModeling
                (15%, 80/10/10), fused torch AdamW lr 5e-5, betas (0.9, 0.999), eps 1e-8, weight
                decay 0, linear decay to 0 over 3 epochs with no warmup, batch 8, gradient norm
                clipped to 1.0, a new random order every epoch, seed 42. It is the loop
                transformers' Trainer runs, written out so that its training time is measured
                exactly as bertkit's.

What makes it a fair race
  * Data: the recipe's tokenizer (trained on the corpus by the first bertkit chunk), its
    train/held-out document split and its training sequences (max_length tokens, sentences
    packed): the transformers arm trains on exactly the sequences bertkit's recipe builds.
  * Clock: training time on both sides is the sum of the steps' wall times (drawing and masking
    the batch, forward, backward, clipping, update); evaluations, checkpoints and process starts
    are not counted. Each arm stops after the step that crosses --minutes, or earlier when its
    own recipe ends (bertkit: train.max_steps; transformers: 3 epochs).
  * Threads: torch.set_num_threads(--threads) and OMP_WAIT_POLICY=PASSIVE for both; the arms
    run one after the other, never at the same time.
  * Device: --device (default: the GPU when CUDA is available) for both arms' training and
    scoring. On a GPU each transformers step is timed to its end (a synchronisation), as
    bertkit's trainer reads its loss every step. Precision: bertkit's recipe as configured
    ("auto": bf16 on a bf16 GPU); transformers --hf-precision, fp32 by default as run_mlm.py
    (TrainingArguments' bf16=False), or bf16 autocast as with its --bf16 flag.
  * Yardstick: the same held-out sequences (the recipe's held-out documents, up to
    data.max_eval_examples sequences) masked once at BERT's 15% (80/10/10, the recipe's fixed
    evaluation seed), neither arm's training rate (bertkit trains at 30%), scored by bertkit's
    `evaluate_pretraining`: mlm_loss, mlm_accuracy and mlm_replaced_accuracy (where the input
    token was replaced).

Output: RESULTS/time_to_quality[-LABEL].json (the curves, settings and command) and
RESULTS/time_to_quality[-LABEL].png (held-out loss and accuracy against training minutes).
--finetune adds each arm's final checkpoint fine-tuned on BBC topics with
scripts/pretrain_downstream.sh's recipe (3 epochs, lr 1e-4, batch 16, 128 tokens; --seeds) and
its test accuracy, beside the TF-IDF + logistic regression baseline (scripts/tfidf_baseline.py).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import time
from types import SimpleNamespace

import bertkit  # noqa: F401  (first: sets OMP_WAIT_POLICY=PASSIVE before torch loads OpenMP)
import torch
from torch import nn

from bertkit.models.checkpoint import family_class
from bertkit.models.config import SIZE_PRESETS
from bertkit.data.masking import IGNORE_INDEX
from bertkit.models.heads import BertForMaskedLM as BertkitMaskedLM
from bertkit.runtime.plotting import NO_MATPLOTLIB, can_plot, pyplot, save_png
from bertkit.data.documents import CorpusDocuments
from bertkit.recipes.pretrain import build_data, load_config, make_model, parse_config, tokenizer_and_config, vocab_size_of
from bertkit.runtime.process_group import init_distributed
from bertkit.objectives.metrics import evaluate_pretraining
from bertkit.runtime.run_dir import latest_checkpoint
from bertkit.train.trainer import load_trainer_state

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(ROOT, "benchmarks", "results")
EVAL_RATE = 0.15  # the held-out masking rate of the yardstick (BERT's)
# run_mlm.py's defaults (transformers' TrainingArguments and the script's own)
HF_LR, HF_BATCH, HF_EPOCHS, HF_EPS, HF_CLIP, HF_SEED = 5e-5, 8, 3, 1e-8, 1.0, 42


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=30.0, help="training-time budget of each arm")
    p.add_argument("--threads", type=int, default=2, help="torch threads, the same for both arms")
    p.add_argument("--device", default="auto", help="auto (the GPU when CUDA is available), cpu or cuda[:N]")
    p.add_argument("--hf-precision", choices=("fp32", "bf16"), default="fp32",
                   help="the transformers arm: fp32 (run_mlm.py's default) or bf16 autocast (its --bf16)")
    p.add_argument("--eval-every", type=float, default=60.0, help="seconds of training between evaluations")
    p.add_argument("--config", default=os.path.join(ROOT, "configs", "pretrain-mini.toml"),
                   help="bertkit's recipe (its corpus, tokenizer, split and sequences are both arms')")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="recipe overrides (e.g. data.max_documents=200 for a quick run)")
    p.add_argument("--work", default="/tmp/time_to_quality", help="run directories (both arms' checkpoints)")
    p.add_argument("--bertkit-run", help="score this finished `bertkit pretrain` run as the bertkit arm "
                                         "instead of training it here (its recipe replaces --config/--set)")
    p.add_argument("--results", default=RESULTS_DIR, help="where the JSON and PNG go")
    p.add_argument("--label", default="", help="suffix of the result file names")
    p.add_argument("--finetune", action="store_true", help="then fine-tune each arm on BBC topics")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="fine-tuning seeds")
    p.add_argument("--finetune-set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="fine-tuning overrides after the recipe's (quick checks: data.max_train_examples=64)")
    return p.parse_args(argv)


# ---------------------------------------------------------------------------- shared data
def recipe_data(cfg, out: str):
    """(tokenizer, train examples, held-out batches masked at EVAL_RATE): the recipe's own
    build_data on the bertkit arm's run directory `out` (its tokenizer and shards)."""
    yardstick = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, mlm_probability=EVAL_RATE))
    ctx = init_distributed("cpu")
    d = yardstick.data
    corpus = CorpusDocuments(d.corpus, d.mode, d.max_documents)  # not read: the shards are there
    tokenizer, _ = tokenizer_and_config(yardstick, corpus, out, ctx)  # the one the first chunk trained
    data = build_data(d, yardstick.train, yardstick.objective, tokenizer, corpus, out, ctx)
    return tokenizer, data.batches.examples, data.eval_batches


def heldout(model, batches) -> dict:
    with torch.no_grad():
        model.eval()
        metrics = evaluate_pretraining(model, batches)
    return {k: metrics[k] for k in ("mlm_loss", "mlm_accuracy", "mlm_replaced_accuracy") if k in metrics}


class LabelledLogits(nn.Module):
    """transformers' MLM as evaluate_pretraining reads bertkit's: logits at the labelled
    positions only, in row-major order."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None, **_):
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits
        return SimpleNamespace(logits=logits[labels != IGNORE_INDEX])


# ---------------------------------------------------------------------------- bertkit arm
def run_bertkit(*arguments: str) -> str:
    """`bertkit ARGUMENTS` in a fresh interpreter (as a user runs it); its stdout."""
    command = [sys.executable, "-m", "bertkit", *arguments]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def pretrain_chunk(args, out: str, minutes: float, resume: bool) -> None:
    run_bertkit("pretrain", "--config", args.config, "--out", out, "--threads", str(args.threads), "--no-progress",
                "--device", str(args.device),
                "--set", *args.set, f"train.max_minutes={minutes!r}", *(["--resume"] if resume else []))


def bertkit_arm(args, cfg) -> tuple[list[dict], dict, tuple]:
    """Chunks of --eval-every seconds of training, each evaluated from the newest checkpoint;
    also returns the shared data (tokenizer, train examples, held-out batches)."""
    out = os.path.join(args.work, "bertkit")
    budget = 60.0 * args.minutes
    points, shared, chunk = [], None, 0
    while True:
        chunk += 1
        pretrain_chunk(args, out, min(chunk * args.eval_every, budget) / 60.0, resume=chunk > 1)
        if shared is None:  # the first chunk has trained the tokenizer and written the shards
            shared = recipe_data(cfg, out)
            tokenizer, _, batches = shared
            points.append({"step": 0, "train_seconds": 0.0,
                           **heldout(make_model(cfg, tokenizer).to(args.device), batches)})
        checkpoint = latest_checkpoint(out)
        state = load_trainer_state(checkpoint)
        model = family_class(BertkitMaskedLM, checkpoint).from_pretrained(checkpoint).to(args.device)
        step, seconds = int(state["step"]), float(state["train_seconds"])
        points.append({"step": step, "train_seconds": seconds, **heldout(model, batches)})
        print(f"bertkit       {seconds / 60:6.2f} min  step {step:6d}  {fmt(points[-1])}", flush=True)
        if step >= cfg.train.max_steps or seconds >= budget:
            break
    info = {"model": type(model).__name__, "parameters": sum(p.numel() for p in model.parameters()),
            "steps": step, "stopped_by": "clock" if seconds >= budget else "max_steps", "checkpoint": checkpoint,
            "recipe": recipe_info(cfg, {"config": os.path.relpath(args.config, ROOT), "set": args.set})}
    return points, info, shared


def recipe_info(cfg, source: dict) -> dict:
    return {**source, "batch_size": cfg.train.batch_size, "lr": cfg.train.lr,
            "mlm_probability": cfg.data.mlm_probability, "max_steps": cfg.train.max_steps}


def run_recipe(run: str):
    """The recipe a finished `bertkit pretrain` run trained with (its pretrain_config.json)."""
    with open(os.path.join(run, "pretrain_config.json"), encoding="utf-8") as f:
        return parse_config(json.load(f))


def finished_arm(args, cfg) -> tuple[list[dict], dict, tuple]:
    """The bertkit arm from a finished run: its checkpoints within the budget, in step order."""
    run = args.bertkit_run
    shared = recipe_data(cfg, run)
    tokenizer, _, batches = shared
    torch.manual_seed(cfg.train.seed)
    points = [{"step": 0, "train_seconds": 0.0, **heldout(make_model(cfg, tokenizer).to(args.device), batches)}]
    checkpoints = sorted((os.path.join(run, name) for name in os.listdir(run) if name.startswith("checkpoint-")),
                         key=lambda path: int(path.rsplit("-", 1)[1]))
    scored = None
    for checkpoint in checkpoints:
        state = load_trainer_state(checkpoint)
        step, seconds = int(state["step"]), float(state["train_seconds"])
        if seconds > 60.0 * args.minutes + args.eval_every:
            break  # past the budget (one evaluation interval of slack, as the chunks stop)
        model = family_class(BertkitMaskedLM, checkpoint).from_pretrained(checkpoint).to(args.device)
        points.append({"step": step, "train_seconds": seconds, **heldout(model, batches)})
        print(f"bertkit       {seconds / 60:6.2f} min  step {step:6d}  {fmt(points[-1])}", flush=True)
        scored = checkpoint, step
    if scored is None:
        raise SystemExit(f"{run} has no checkpoint-N directory within the budget to score")
    checkpoint, step = scored
    info = {"model": type(model).__name__, "parameters": sum(p.numel() for p in model.parameters()),
            "steps": step, "stopped_by": "max_steps" if step >= cfg.train.max_steps else "clock",
            "checkpoint": checkpoint, "recipe": recipe_info(cfg, {"run": os.path.basename(os.path.normpath(run))})}
    return points, info, shared


# ---------------------------------------------------------------------------- transformers arm
def hf_model(cfg, tokenizer):
    """BertForMaskedLM of the recipe's preset size, as run_mlm.py builds one from a config."""
    import transformers  # the reference library: a test-only dependency of bertkit

    layers, hidden, heads = SIZE_PRESETS[cfg.model["preset"]]
    config = transformers.BertConfig(vocab_size=vocab_size_of(tokenizer), hidden_size=hidden,
                                     num_hidden_layers=layers, num_attention_heads=heads,
                                     intermediate_size=4 * hidden, pad_token_id=tokenizer.pad_token_id)
    return transformers.BertForMaskedLM(config)


def transformers_arm(args, cfg, tokenizer, tokenizer_dir: str, examples, batches) -> tuple[list[dict], dict]:
    """run_mlm.py's default training on the recipe's sequences, evaluated every --eval-every s."""
    import transformers  # the reference library: a test-only dependency of bertkit

    torch.manual_seed(HF_SEED)  # run_mlm.py: set_seed(training_args.seed) before the model
    device = torch.device(args.device)
    model = hf_model(cfg, tokenizer).to(device)
    cuda = device.type == "cuda"
    precision = (torch.autocast("cuda", dtype=torch.bfloat16) if cuda and args.hf_precision == "bf16"
                 else contextlib.nullcontext())
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    collator = transformers.DataCollatorForLanguageModeling(hf_tokenizer, mlm_probability=0.15)
    per_epoch = math.ceil(len(examples) / HF_BATCH)
    total = HF_EPOCHS * per_epoch
    optimizer = torch.optim.AdamW(model.parameters(), lr=HF_LR, betas=(0.9, 0.999), eps=HF_EPS,
                                  weight_decay=0.0, fused=True)  # the Trainer's default optimizer (adamw_torch_fused)
    scheduler = transformers.get_linear_schedule_with_warmup(optimizer, 0, total)
    order_rng = torch.Generator().manual_seed(HF_SEED)
    rows = [{"input_ids": [int(t) for t in e["input_ids"]]} for e in examples]
    budget, seconds, step = 60.0 * args.minutes, 0.0, 0
    evaluator = LabelledLogits(model)
    points = [{"step": 0, "train_seconds": 0.0, **heldout(evaluator, batches)}]
    next_eval = args.eval_every
    while step < total and seconds < budget:
        start = time.perf_counter()
        if step % per_epoch == 0:  # a new epoch: a new random order (the Trainer's RandomSampler)
            order = torch.randperm(len(rows), generator=order_rng)
        model.train()
        first = (step % per_epoch) * HF_BATCH
        batch = collator([rows[int(i)] for i in order[first:first + HF_BATCH]])
        batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        with precision:
            loss = model(**batch).loss
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), HF_CLIP)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        if cuda:  # the step's kernels have finished before its time is read
            torch.cuda.synchronize(device)
        seconds += time.perf_counter() - start
        step += 1
        if seconds >= next_eval or step == total or seconds >= budget:
            points.append({"step": step, "train_seconds": seconds, **heldout(evaluator, batches)})
            print(f"transformers  {seconds / 60:6.2f} min  step {step:6d}  {fmt(points[-1])}", flush=True)
            next_eval = (math.floor(seconds / args.eval_every) + 1) * args.eval_every
    out = os.path.join(args.work, "transformers")
    model.save_pretrained(out)
    hf_tokenizer.save_pretrained(out)
    info = {"model": type(model).__name__, "parameters": sum(p.numel() for p in model.parameters()),
            "steps": step, "stopped_by": "epochs" if step == total else "clock", "checkpoint": out,
            "recipe": {"batch_size": HF_BATCH, "lr": HF_LR, "schedule": f"linear over {total} steps (3 epochs)",
                       "precision": args.hf_precision if cuda else "fp32",
                       "mlm_probability": 0.15, "weight_decay": 0.0, "adam_eps": HF_EPS, "grad_clip": HF_CLIP}}
    return points, info


# ---------------------------------------------------------------------------- fine-tuning
def finetune_scores(args, checkpoint: str, name: str) -> list[float]:
    """scripts/pretrain_downstream.sh's recipe on BBC topics, test accuracy per seed."""
    scores = []
    for seed in args.seeds:
        out = os.path.join(args.work, f"finetune-{name}-seed{seed}")
        run_bertkit("finetune", "--task", "classification", "--model", checkpoint, "--train", "bbc", "--out", out,
                    "--overwrite", "--no-progress", "--threads", str(args.threads), "--seed", str(seed),
                    "--device", str(args.device),
                    "--set", "train.epochs=3", "train.lr=1e-4", "train.batch_size=16", "data.max_length=128",
                    *args.finetune_set)
        report = run_bertkit("evaluate", "--model", out, "--data", "bbc:test", "--threads", str(args.threads),
                             "--device", str(args.device))
        scores.append(json.loads(report.strip().splitlines()[-1])["accuracy"])
        print(f"fine-tuned {name} seed {seed}: BBC test accuracy {scores[-1]:.3f}", flush=True)
    return scores


def tfidf_rows() -> dict:
    """scripts/tfidf_baseline.py's scores (C = 1, 10, 100) on whole articles and 100 words."""
    spec = importlib.util.spec_from_file_location("tfidf_baseline", os.path.join(ROOT, "scripts", "tfidf_baseline.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from bertkit.tasks import builtin_splits

    splits = builtin_splits("bbc")
    return {f"C={c:g}": {"whole_articles": module.score(splits["train"], splits["test"], None, c),
                         "first_100_words": module.score(splits["train"], splits["test"], 100, c)}
            for c in (1.0, 10.0, 100.0)}


# ---------------------------------------------------------------------------- report
def device_name(device: str) -> str:
    return torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else "cpu"


def fmt(point: dict) -> str:
    return (f"loss {point['mlm_loss']:.3f}  accuracy {point['mlm_accuracy']:.3f}  "
            f"where replaced {point.get('mlm_replaced_accuracy', float('nan')):.3f}")


def plot(curves: dict, path: str, minutes: float, where: str) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for name, points in curves.items():
        x = [p["train_seconds"] / 60 for p in points]
        line, = axes[0].plot(x, [p["mlm_loss"] for p in points], "o-", ms=3, label=name)
        axes[1].plot(x, [p["mlm_accuracy"] for p in points], "o-", ms=3, color=line.get_color(),
                     label=f"{name}: all masked positions")
        axes[1].plot(x, [p.get("mlm_replaced_accuracy", float("nan")) for p in points], "s--", ms=3,
                     color=line.get_color(), label=f"{name}: where replaced")
    axes[0].set_title("held-out MLM loss (15% masked)")
    axes[1].set_title("held-out MLM accuracy")
    axes[1].set_ylim(bottom=0)
    for ax in axes:
        ax.set_xlabel(f"training minutes ({where}, budget {minutes:g})")
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path)


def main(argv=None) -> dict:
    args = parse_args(argv)
    args.config = os.path.abspath(args.config)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.set_num_threads(args.threads)
    if any(os.path.exists(os.path.join(args.work, arm)) for arm in ("bertkit", "transformers")):
        raise SystemExit(f"{args.work} holds an earlier run; remove it or pass another --work")
    started = time.time()
    if args.bertkit_run:
        cfg = run_recipe(args.bertkit_run)
        bertkit_points, bertkit_info, (tokenizer, examples, batches) = finished_arm(args, cfg)
        tokenizer_dir = os.path.join(args.bertkit_run, "tokenizer")
    else:
        cfg = load_config(args.config, args.set)
        bertkit_points, bertkit_info, (tokenizer, examples, batches) = bertkit_arm(args, cfg)
        tokenizer_dir = os.path.join(args.work, "bertkit", "tokenizer")
    hf_points, hf_info = transformers_arm(args, cfg, tokenizer, tokenizer_dir, examples, batches)
    result = {
        "command": " ".join(["python benchmarks/bench_time_to_quality.py",
                             *(sys.argv[1:] if argv is None else argv)]),
        "minutes": args.minutes, "threads": args.threads, "eval_every_s": args.eval_every, "device": device_name(args.device),
        "train_sequences": len(examples), "heldout_sequences": sum(len(b["input_ids"]) for b in batches),
        "heldout_masking": EVAL_RATE, "torch": torch.__version__,
        "arms": {"bertkit": {**bertkit_info, "curve": bertkit_points},
                 "transformers": {**hf_info, "curve": hf_points}},
    }
    if args.finetune:
        for name in ("bertkit", "transformers"):
            scores = finetune_scores(args, result["arms"][name]["checkpoint"], name)
            result["arms"][name]["bbc_test_accuracy"] = {
                "seeds": args.seeds, "scores": scores, "mean": statistics.mean(scores),
                "spread": max(scores) - min(scores)}
        result["tfidf_logistic_regression"] = tfidf_rows()
    result["wall_time_s"] = round(time.time() - started, 1)
    os.makedirs(args.results, exist_ok=True)
    stem = os.path.join(args.results, "time_to_quality" + (f"-{args.label}" if args.label else ""))
    write_results(result, stem, {"bertkit (default recipe)": bertkit_points, "transformers (run_mlm defaults)": hf_points},
                  args.minutes, f"{args.threads} threads" if args.device == "cpu" else result["device"])
    return result


def write_results(result: dict, stem: str, curves: dict, minutes: float, where: str) -> None:
    """STEM.json, then STEM.png where matplotlib is installed: a bare GPU image may lack it, and
    the run it took minutes of the GPU to make must not end in a traceback (the JSON has the curves)."""
    with open(stem + ".json", "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    if not can_plot():
        print(f"wrote {stem}.json; no {stem}.png: {NO_MATPLOTLIB}", flush=True)
        return
    plot(curves, stem + ".png", minutes, where)
    print(f"wrote {stem}.json and {stem}.png", flush=True)


if __name__ == "__main__":
    main()
