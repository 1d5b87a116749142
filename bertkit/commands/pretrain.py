"""`bertkit pretrain --config FILE --out DIR [--set section.key=value ...] [--seed N] [--resume]`."""

from __future__ import annotations

import os

from bertkit.errors import BertkitError
from bertkit.io import read_json_object
from bertkit.recipes.pretrain import pretrain
from bertkit.runtime.run_dir import final_model, is_main_process, latest_checkpoint, not_a_model
from bertkit.commands.options import add_device, add_progress, add_seed, add_set, metrics_text, typed_settings


def add_arguments(parser) -> None:
    parser.add_argument("--config", required=True, help="recipe TOML, e.g. configs/pretrain-tiny.toml")
    parser.add_argument("--out", required=True, help="run directory: checkpoints, metrics.jsonl, curves.png")
    add_set(parser, "train.lr=5e-4 data.max_length=64 data.objective=mlm+sop")
    add_seed(parser)
    add_device(parser, "train.device, else auto")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest complete checkpoint in --out")
    add_progress(parser)


def run(args) -> int:
    overrides = list(args.set) + typed_settings(args)
    try:
        metrics = pretrain(args.config, args.out, overrides, resume=args.resume, progress=not args.no_progress)
    except KeyboardInterrupt as e:
        if str(e):  # the Trainer's RunInterrupted: it saved a checkpoint and says how to continue
            raise
        raise KeyboardInterrupt(interrupted_before_training(args.out)) from None
    if not is_main_process():  # a run under torchrun reports once (every rank returns its metrics)
        return 0
    best = {k: metrics.pop(k) for k in list(metrics) if k.startswith("best_")}  # (replayed on a resume too)
    clock = metrics.pop("stopped_by_clock_at", None)
    if not metrics:  # --resume of a run that had reached train.max_steps: no step, no evaluation
        print(f"nothing to train: the run in {args.out} had reached train.max_steps")
    else:
        print(f"final: {metrics_text(metrics)}")
        if clock is not None:
            print(f"the time budget (train.max_minutes) ended the run at step {clock:,}")
    kept, kept_loss = "", best.get("best_mlm_loss") if "best_step" in best else metrics.get("mlm_loss")
    if "best_step" in best:  # early stopping kept another step's model than the last
        tail = "; the final line is the last step's" if metrics else ""
        kept = f" (early stopping kept step {best.pop('best_step')}: {metrics_text(best)}{tail})"
    print(saved_line(args.out, final_model(args.out), kept))
    against = against_unigram(args.out, kept_loss)  # the kept model's loss, not the last step's
    if against:
        print(against)
    return 0


def saved_line(out: str, model: str | None, kept: str) -> str:
    """Where the model is; a run with train.save_every = -1 writes none, and said "model saved in None"
    (walk V)."""
    if model:
        return f"model saved in {model}{kept}{not_a_model(model)}"
    try:
        train = read_json_object(os.path.join(out, "pretrain_config.json"), "").get("train")
    except BertkitError:  # no readable run config: say only that nothing was saved
        train = None
    if isinstance(train, dict) and train.get("save_every") == -1:
        return (f"no model saved in {out}{kept}: train.save_every = -1 writes no checkpoint; run again with "
                "--set train.save_every=0 to save the model at the end")
    return f"no model saved in {out}{kept}"


def interrupted_before_training(out: str) -> str:
    """A Ctrl-C before the Trainer took over signals (tokenizer training, shard building: minutes
    on a large corpus) said only "interrupted" (walk O #12): what a rerun keeps and redoes."""
    checkpoint = latest_checkpoint(out)
    if checkpoint:  # only a --resume run gets this far with a checkpoint in --out
        return (f"interrupted before training resumed; run the same command again (with --resume) to continue "
                f"from {os.path.basename(checkpoint)}")
    return ("interrupted before the first checkpoint; run the same command again to start over (--resume is not "
            "needed): a tokenizer it finished and its finished token shards are reused, the rest is built again")


def against_unigram(out: str, loss: float | None) -> str | None:
    """The kept model's held-out MLM loss beside OUT/baseline.json's unigram loss (word frequencies,
    no context), said plainly when it is not below it (walk O #11: a too-high lr "kept" a model that
    predicted word frequencies, and the baseline was a line many screens up)."""
    path = os.path.join(out, "baseline.json")
    if loss is None or not os.path.isfile(path):
        return None
    try:  # the run has finished: a damaged file costs the line, not a traceback
        unigram = read_json_object(path, fix="").get("unigram_loss")
    except BertkitError:
        return None
    if not isinstance(unigram, (int, float)):
        return None
    if loss < unigram:
        return f"held-out mlm_loss {loss:.3f} against the unigram loss {unigram:.3f} (word frequencies, no context)"
    return (f"held-out mlm_loss {loss:.3f} is not below the unigram loss {unigram:.3f}: the model has not learnt "
            "beyond word frequencies; try a lower train.lr, more train.max_steps or more text")
