"""One training loop for pre-training and fine-tuning: `Trainer(model, data, TrainConfig)`.

Per optimizer step (A = grad_accum micro-batches per rank, W ranks):

    loss_step = 1/W sum_r 1/A sum_a L(batch_{r,a})        (DDP averages over r, we average over a)
    clip ||g||_2 to grad_clip, AdamW step, scheduler step (lr of the next step), zero grads

Around it: a progress bar (on a terminal; a line a minute in a log file); JSON-lines metrics
(`OUT/metrics.jsonl`), `OUT/curves.png` and, with `report_to = "tensorboard"`, TensorBoard scalars;
evaluation every `eval_every` steps; checkpoints every `save_every` steps and at the end.

A wall-clock budget (`max_minutes`) ends the run after the step at which the training time
reaches it, with the final evaluation and checkpoint as at `max_steps`. Training time is the sum
of the steps' wall times (drawing and masking the batch, forward, backward, update), not
evaluations or checkpoint writes, so how often a run evaluates does not change how far it
trains; it is saved in checkpoints (a resumed run continues the same budget) and logged as
`train_seconds` in every metrics row. By default the lr schedule stays defined over `max_steps`:
a decaying schedule (linear, cosine, polynomial, wsd) cut by the clock ends above its final lr,
without the last anneal. `schedule_over = "minutes"` runs the schedule over the budget instead
(Cramming's budgeted schedule): after each step the lr is the schedule's at step
max_steps * min(1, t / (60 max_minutes)), t the training time so far (under torchrun rank 0's,
as it came with the last step read: _shared_clock), so the
warmup is the first warmup_steps / max_steps of the minutes, the decay ends as they run out on any
hardware, and max_steps is only an upper bound on the steps. A resume with a larger max_minutes
then stretches the rest of the schedule over the new budget (no longer the run it continues).

A checkpoint `OUT/checkpoint-<step>/` is a Hugging Face model directory (config.json,
model.safetensors, tokenizer files) plus `trainer_state.pt`: optimizer, scheduler, grad
scaler, step, data position, the loss window being averaged for the log, and every rank's RNG
states (python, numpy, torch, cuda, the collator's). It is written into a temporary directory
renamed into place, so a killed run leaves only complete checkpoints, and `train(resume=True)`
continues from the newest one with the same loss at every later step as an uninterrupted run.

`trainer_state.pt` holds only tensors and plain containers and is read with
`torch.load(weights_only=True)`: resuming never unpickles code. A resume refuses a TrainConfig
that differs from the checkpoint's outside `resume_check.MAY_CHANGE` (e.g. lr, batch_size, seed).

The host reads a step's loss (which waits for the GPU to finish the step) only after it has queued
the next step, and at once where a log row, an evaluation or a checkpoint needs it: the GPU never
waits for the host between steps. A step whose loss is not finite must still never reach the
weights, so it is skipped on the device (the fused AdamW kernel's found_inf flag; fp16's gradient
scaler), and the run stops when the host reads it. Where the optimizer has no fused kernel, the
loss is read before each update, as it must be.

SIGINT (Ctrl-C) or SIGTERM (a scheduler's preemption) during `train()` let the current step
finish, write a checkpoint and raise `RunInterrupted` (the command exits 130 / 143); a second
signal stops at once. Every rank learns of a signal through the step's all-reduce, so all of
them stop after the same step.

The data protocol is small: `data` is an iterable of batches (dicts of tensors whose keys are
the model's forward arguments, including the labels). If it has `set_epoch(e)` it is told
the epoch before each pass (so a shuffle can depend on it), and if it has `skip(n)` a resume
jumps to batch n directly; otherwise n batches are drawn and dropped. Exact resume needs the
batch order to be a function of the epoch, and a collator with random masking to be passed as
`collator=` (anything with `state_dict()`/`load_state_dict()`) so its RNG is saved.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import shutil
import signal
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR
from tqdm import tqdm

from bertkit.models.checkpoint import load_into, read_state_dict
from bertkit.models.config import SOURCE_KEYS
from bertkit.models.families import FAMILIES
from bertkit.errors import BertkitError, CheckpointError, ConfigError, DataError, RunInterrupted
from bertkit.io import append_text, atomic_directory, atomic_open, atomic_write_text
from bertkit.runtime.devices import copy_without_wait
from bertkit.runtime.precision import autocast, describe
from bertkit.runtime.plotting import NO_MATPLOTLIB, can_plot
from bertkit.runtime.progress import progress
from bertkit.runtime.resume_check import check_resume_options
from bertkit.runtime.run_dir import STATE_FILE, latest_checkpoint, list_checkpoints, refuse_unresumed, remove_leftovers
from bertkit.train.config import TrainConfig, warn_if_warmup_fills_the_run
from bertkit.runtime.process_group import DistContext, init_distributed
from bertkit.train.distributed import unwrap, wrap_model
from bertkit.train.early_stopping import BestKeeper
from bertkit.train.fsdp import ShardedTraining, check_model, check_strategy, local_gradients
from bertkit.train.optim import build_optimizer, is_fused, load_optimizer_state, step_unless_non_finite
from bertkit.train.plots import plot_curves
from bertkit.train.prefetch import Prefetcher
from bertkit.train.reporting import open_reporter
from bertkit.train.rng import rng_state, seed_everything, set_rng_state

# What every trainer state holds (checked on resume; older files have them too).
STATE_KEYS = ("step", "optimizer", "scheduler", "train_config")


def compile_layers(model: nn.Module) -> None:
    """train.compile: the encoder's layers compiled in place (state-dict keys unchanged, so
    checkpoints are the same files); the first steps pay the compilation."""
    inner = unwrap(model)
    if not hasattr(inner, "compile_layers"):
        raise ConfigError(f"train.compile needs a bertkit encoder with compile_layers(); {type(inner).__name__} "
                          "has none: leave train.compile off for this model")
    inner.compile_layers()


# ---------------------------------------------------------------------------- checkpoints on disk
def load_trainer_state(checkpoint_dir: str) -> dict:
    path = os.path.join(checkpoint_dir, STATE_FILE)
    fix = "delete this checkpoint directory to resume from the one before"
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise CheckpointError(f"cannot read {path} ({type(e).__name__}: {str(e)[:200]}); {fix}") from None
    missing = [key for key in STATE_KEYS if not isinstance(state, dict) or key not in state]
    if missing:  # a readable file of something else (a tensor, another tool's state)
        raise CheckpointError(f"{path} is not a bertkit trainer state (no {', '.join(missing[:3])}); {fix}")
    return state


# ---------------------------------------------------------------------------- the trainer
@dataclass
class LaunchedStep:
    """An optimizer step queued on the device whose numbers the host has not read yet."""

    step: int
    totals: torch.Tensor  # Trainer._train_step's [loss sum, tokens, SIGINT, SIGTERM, rank 0's time, *log parts]


class Trainer:
    """Train `model` on `data` for `config.max_steps` optimizer steps.

    model      a bertkit model whose forward(**batch) returns an output with `.loss`
    data       an iterable of batches, or a callable `factory(ctx) -> iterable` that builds this
               rank's share once the distributed context is known
    eval_fn    `eval_fn(model) -> {name: float}`, run on rank 0 with the unwrapped model in
               eval mode under no_grad; rows go to metrics.jsonl with split "eval"
    collator   an object with state_dict()/load_state_dict() whose RNG is saved for resume
    tokenizer  saved into every checkpoint, so each one is a complete model directory
    log_outputs  scalar fields of the model's output (e.g. "generator_loss", "aux_loss")
               averaged into the train rows like the loss: names, or {row key: field name};
               a field that is None in a step counts as 0 there
    keeper     a `BestKeeper` (early_stopping.py) told every evaluation: it keeps the best model
               and stops the run after its patience; a resumed run replays the logged evaluations
    prefetch   draw each next batch in a background thread during the step (prefetch.py); None
               = on a CUDA device, where the GPU would otherwise wait for the host
    """

    def __init__(self, model: nn.Module, data: Iterable | Callable, config: TrainConfig,
                 out_dir: str, eval_fn: Callable[[nn.Module], dict] | None = None,
                 collator: Any = None, tokenizer: Any = None, ctx: DistContext | None = None,
                 progress: bool = True, log_outputs: Iterable[str] | dict[str, str] = (),
                 keeper: BestKeeper | None = None, prefetch: bool | None = None):
        self.config = config
        if keeper is not None and keeper.patience and not config.eval_every:
            raise ConfigError("early stopping counts evaluations, but train.eval_every = 0 evaluates only at "
                              "the end: set train.eval_every (e.g. 250)")
        self.keeper = keeper
        warn_if_warmup_fills_the_run(config)
        if not isinstance(log_outputs, dict):
            log_outputs = {name: name for name in log_outputs}
        self.log_outputs = dict(log_outputs)  # row key -> output field
        self.out_dir = os.fspath(out_dir)
        self.ctx = ctx or init_distributed(config.device)
        self.model = model.to(self.ctx.device)
        if config.compile:
            compile_layers(self.model)
        self.data = data(self.ctx) if callable(data) and not hasattr(data, "__iter__") else data
        self.eval_fn = eval_fn
        self.collator = collator
        self.tokenizer = tokenizer
        self.progress = progress and self.ctx.is_main
        self.device_type = self.ctx.device.type
        self.prefetch = self.device_type == "cuda" if prefetch is None else prefetch
        self.prefetcher: Prefetcher | None = None

        # What runs: "auto" resolved for this device (FSDP has no gradient scaler: no fp16 there).
        self.precision = config.precision_on(self.ctx.device)
        if config.strategy == "fsdp":
            check_strategy(config.strategy, self.precision, self.ctx.world_size)
            check_model(unwrap(self.model))

        self.optimizer = build_optimizer(unwrap(self.model), config.lr, config.weight_decay,
                                         config.llrd, betas=(0.9, config.adam_beta2), eps=config.adam_eps,
                                         head_lr=config.head_lr)
        # one multiplier for every param group's own base lr (keeps the LLRD ratios)
        self.scheduler = LambdaLR(self.optimizer, config.lr_schedule())
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.precision == "fp16")
        # A step whose loss is not finite must not reach the weights. fp16's scaler and the fused
        # AdamW kernel skip it on the device, so the host reads each loss one step later (and the
        # GPU never waits for it); the per-tensor loop needs the loss read before its update.
        self.reads_late = self.scaler.is_enabled() or is_fused(self.optimizer)
        self.ddp_model = None  # the DDP wrapper lives only inside train(): see there
        self.sharded: ShardedTraining | None = None  # train.strategy = "fsdp": likewise

        self.step = 0
        self.train_seconds = 0.0  # wall time spent in training steps (what max_minutes limits)
        self.resumed_at: int | None = None  # the checkpoint's step when this run was resumed
        self.resumed_seconds: float | None = None  # the checkpoint's train_seconds then (earlier attempts' steps)
        self.epoch = 0
        self.batches_in_epoch = 0
        self.window = self._empty_window()
        self.history: list[dict] = []
        # Set True (e.g. by eval_fn, for early stopping) to end train() after this step's
        # evaluation; the loop then writes its checkpoint and returns.
        self.stop_requested = False
        self._signal: int | None = None  # the first SIGINT/SIGTERM received during train()
        self._agreed_signal: int | None = None  # ... as all ranks agreed on after a step

    # ------------------------------------------------------------------ public
    def train(self, resume: bool = False) -> dict:
        """Run to `max_steps`; returns the last eval metrics (or the last train row)."""
        cfg = self.config
        batches = self._begin(resume)
        self._say_precision()
        bar = self._progress_bar()
        last_metrics: dict = {}
        handlers = self._catch_stop_signals()
        finished = False
        try:
            if cfg.eval_at_start and self.step == 0:  # (a resumed run logged it already)
                last_metrics = self._evaluate() or last_metrics
            unread: LaunchedStep | None = None  # the last step's numbers, still on the device
            while self.step < cfg.max_steps:
                started = time.perf_counter()
                launched = LaunchedStep(self.step + 1, self._train_step(batches))
                self.step += 1
                if bar is not None:
                    bar.update(1)
                if unread is not None:  # the step before: the device is done with it or nearly
                    self._settle(unread, bar)
                unread = launched
                logging, evaluating, saving = self._due()
                if logging or evaluating or saving or not self.reads_late or self._agreed_signal is not None:
                    self._settle(unread, bar)  # what follows needs this step's numbers
                    unread = None
                self._add_time(time.perf_counter() - started)
                spent = self._shared_clock()
                done = self.step == cfg.max_steps or (spent is not None and spent >= 60.0 * cfg.max_minutes)
                if done and unread is not None:  # the budget ended the run (this wait is not timed)
                    self._settle(unread, bar)
                if cfg.schedule_over == "minutes":
                    self._follow_clock(spent)
                logging, evaluating = logging or done, evaluating or done
                saving = cfg.save_every >= 0 and (saving or done)
                if logging:
                    last_metrics = self._log_window()
                if evaluating:
                    last_metrics = self._evaluate() or last_metrics
                    self.stop_requested = bool(self.ctx.broadcast(self.stop_requested))
                saving = saving or (cfg.save_every >= 0 and self.stop_requested)
                if saving:
                    self.save_checkpoint()
                if self.stop_requested or done:  # done early: the time budget is spent
                    break
                if self._agreed_signal is not None and not done:
                    self._stop_for_signal(saved=saving)
            finished = True
        finally:
            self._end(handlers, bar, finished)
        return last_metrics

    def _begin(self, resume: bool):
        """Restore the newest checkpoint (resume) or start afresh, open the reporter and wrap the
        model for DDP/FSDP; returns this rank's batches."""
        cfg = self.config
        existing = latest_checkpoint(self.out_dir) if self.ctx.is_main else None
        existing = self.ctx.broadcast(existing)
        refuse_unresumed(self.out_dir, existing, resume)  # on every rank: they stop together
        if self.ctx.is_main:
            os.makedirs(self.out_dir, exist_ok=True)
            remove_leftovers(self.out_dir)
        if existing:
            self._restore(existing)
        else:
            seed_everything(cfg.seed + self.ctx.rank)
            if self.ctx.is_main:
                atomic_write_text(self._metrics_path(), "")
        batches = self._batches()
        if self.prefetch:
            # the thread's snapshots are copies: the collator's state moves on with the next batch
            batches = self.prefetcher = Prefetcher(batches, lambda: copy.deepcopy(self._data_position()),
                                                   pin=self.device_type == "cuda")
        if self.ctx.is_main:
            self.reporter = open_reporter(cfg.report_to, self.out_dir, self.step)

        # DDP broadcasts rank 0's weights here. The wrapper is dropped when train() returns:
        # one still alive at interpreter exit frees its gloo worker threads during
        # finalization, which aborts the process ("terminate called without an active exception").
        if cfg.strategy == "fsdp":  # a sharded copy, given the optimizer (fsdp.py)
            self.sharded = ShardedTraining(self.model, self.optimizer, self.ctx.device)
            self.ddp_model = self.sharded.module
        else:
            self.ddp_model = wrap_model(self.model, self.ctx,
                                        find_unused_parameters=may_skip_parameters(unwrap(self.model)))
        return batches

    def _due(self) -> tuple[bool, bool, bool]:
        """Whether this step writes a log row, evaluates, saves a checkpoint, by its number."""
        cfg, step = self.config, self.step
        last = step == cfg.max_steps
        return (step % cfg.log_every == 0 or last, bool(cfg.eval_every and step % cfg.eval_every == 0) or last,
                cfg.save_every >= 0 and (bool(cfg.save_every and step % cfg.save_every == 0) or last))

    def _add_time(self, seconds: float) -> None:
        """Training time: into the budget's clock and the log window's speed."""
        self.train_seconds += seconds
        self.window["time"] += seconds

    def _settle(self, launched: "LaunchedStep", bar) -> None:
        """Read a launched step's numbers (waiting for the device to finish that step): the signal
        the ranks agreed on, the non-finite check, its loss, tokens and loss parts into the log
        window."""
        values = launched.totals.tolist()
        if values[2] or values[3]:
            self._agreed_signal = signal.SIGTERM if values[3] else signal.SIGINT
        world = self.ctx.world_size
        loss = values[0] / world
        self._check_finite(loss, launched.step)
        self.window["loss"] += loss
        self.window["steps"] += 1
        self.window["tokens"] += int(values[1])
        self._agreed_clock = values[4]
        for name, value in zip(self.log_outputs, values[5:]):
            self.window[name] = self.window.get(name, 0.0) + value / world
        if bar is not None:  # under a time budget the bar's step total is only an upper bound: say the time left
            left = {} if self.config.max_minutes is None else {
                "budget_left": f"{max(0.0, self.config.max_minutes - self._shared_clock() / 60):.1f}min"}
            bar.set_postfix(loss=f"{loss:.4f}", lr=f"{self._lr():.2e}", **left)

    def _check_finite(self, loss: float, step: int) -> None:
        if not math.isfinite(loss):
            last = latest_checkpoint(self.out_dir)
            kept = f"the last good checkpoint {last} is untouched" if last else "no checkpoint was written"
            raise BertkitError(f"loss became {loss} at step {step}; stopped ({kept}); "
                               "lower train.lr, raise warmup, or use precision=\"fp32\"")

    def _end(self, handlers: dict, bar, finished: bool) -> None:
        """Put the signal handlers back, close the bar and reporter, and drop the DDP/FSDP wrapper
        (an FSDP run's trained weights go back into the plain model when it `finished`)."""
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        if bar is not None:
            bar.close()
        if self.reporter is not None:
            self.reporter.close()
            self.reporter = None
        if self.sharded is not None:  # the trained weights back into the plain model
            self.sharded.close(ok=finished)
            self.sharded = None
        self.ddp_model = None
        if self.prefetcher is not None:  # the thread ran ahead: back to the batches trained on
            self.prefetcher.close()
            self._set_data_position(self.prefetcher.consumed)
            self.prefetcher = None

    # ------------------------------------------------------------------ signals
    def _catch_stop_signals(self) -> dict:
        """Route SIGINT and SIGTERM to `_on_signal`; returns the handlers to put back."""
        self._signal = self._agreed_signal = None
        previous = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                previous[signum] = signal.signal(signum, self._on_signal)
            except ValueError:  # not the main thread: signals stay with whoever handles them
                break
        return previous

    def _on_signal(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        if self._signal is not None:  # asked twice: the user does not want to wait for the step
            raise RunInterrupted(f"stopped at once by a second {name}, without saving this step; "
                                 f"the last checkpoint in {self.out_dir} is intact (--resume continues from it)",
                                 signum)
        self._signal = signum
        if not self.ctx.enabled:  # alone, no need to wait for the next step's all-reduce
            self._agreed_signal = signum
        if self.ctx.is_main:
            # no step number: a signal between steps (an evaluation, a save) stops after the step done,
            # under torchrun after the next one; "finishing step 37" then "stopped after step 36" misled
            tqdm.write(f"{name}: finishing the step in progress, then saving a checkpoint "
                       f"(send {name} again to stop at once)")

    def _stop_for_signal(self, saved: bool) -> None:
        """Save this step's checkpoint (unless saved already, or never wanted) and stop."""
        signum = self._agreed_signal
        if self.config.save_every < 0:
            where = "no checkpoint written (train.save_every = -1)"
        else:
            if not saved:
                self.save_checkpoint()  # collective: every rank takes part, rank 0 writes
            path = os.path.join(self.out_dir, f"checkpoint-{self.step}")
            where = f"saved {path}; run the same command with --resume to continue"
        raise RunInterrupted(f"stopped by {signal.Signals(signum).name} after step {self.step} of "
                             f"{self.config.max_steps}; {where}", signum)

    # ------------------------------------------------------------------ time budget
    def _shared_clock(self) -> float | None:
        """The training time in seconds that the budget and a clock-driven lr follow (None without
        train.max_minutes). With several ranks they must agree: rank 0's time, as it came with the
        last step read (`_train_step` adds it to the all-reduced numbers, so no extra
        communication and no wait for the GPU), one or two steps behind its own clock."""
        if self.config.max_minutes is None:
            return None
        return self._agreed_clock if self.ctx.enabled else self.train_seconds

    _said_no_plot = False  # the missing-matplotlib warning is given once per run

    _agreed_clock = 0.0  # rank 0's train_seconds as the ranks last agreed on it (with a step's numbers)

    def _follow_clock(self, spent: float) -> None:
        """schedule_over = "minutes": the next step's lr is the schedule's at the step that this
        share of the budget stands for (module doc)."""
        cfg = self.config
        position = cfg.max_steps * min(1.0, spent / (60.0 * cfg.max_minutes))
        self._set_lr_factor(self.scheduler.lr_lambdas[0](position))

    def _set_lr_factor(self, factor: float) -> None:
        """Every parameter group at its base lr times `factor` (LLRD keeps its per-group bases)."""
        for group, base in zip(self.optimizer.param_groups, self.scheduler.base_lrs):
            group["lr"] = base * factor
        self.scheduler._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    # ------------------------------------------------------------------ one step
    def _autocast(self):
        return autocast(self.precision, self.ctx.device)

    def _train_step(self, batches) -> torch.Tensor:
        """Queue one optimizer step on the device; returns its numbers, unread (see `_settle`):
        [loss sum, tokens, SIGINT, SIGTERM, rank 0's training time, *log parts], summed over ranks."""
        cfg = self.config
        self.ddp_model.train()
        accum = cfg.grad_accum
        loss_sum = torch.zeros((), device=self.ctx.device, dtype=torch.float64)
        tokens = torch.zeros((), device=self.ctx.device, dtype=torch.float64)
        parts = torch.zeros(len(self.log_outputs), device=self.ctx.device, dtype=torch.float64)
        for micro in range(accum):
            batch = {k: copy_without_wait(v, self.ctx.device) if torch.is_tensor(v) else v
                     for k, v in next(batches).items()}
            # Only the last micro-batch all-reduces gradients; the others accumulate locally.
            sync = (local_gradients(self.ddp_model) if self.ctx.enabled and micro < accum - 1
                    else contextlib.nullcontext())
            with sync:
                with self._autocast():
                    out = self.ddp_model(**batch)
                if out.loss is None:
                    raise DataError("the model returned no loss: the batches need labels")
                loss = out.loss.float() / accum
                self.scaler.scale(loss).backward()
            loss_sum += loss.detach().double()
            for i, name in enumerate(self.log_outputs.values()):
                value = getattr(out, name, None)
                if value is not None:
                    parts[i] += value.detach().double() / accum
            mask = batch.get("attention_mask")
            tokens += mask.sum() if mask is not None else batch["input_ids"].numel()
        # One all-reduce gives the global loss (mean over ranks) and token count for the log,
        # and lets every rank see a non-finite loss on any rank and stop together.
        # Two more say whether any rank got a SIGINT or a SIGTERM (see _on_signal), one more is
        # rank 0's training time (the budget's clock: _shared_clock).
        # Built on the host and queued behind the step: torch.tensor(..., device=cuda) would wait
        # for the GPU to finish this step first.
        flags = copy_without_wait(torch.tensor([self._signal == signal.SIGINT, self._signal == signal.SIGTERM,
                                                self.train_seconds if self.ctx.is_main else 0.0],
                                               dtype=torch.float64), self.ctx.device)
        totals = self.ctx.all_reduce_sum(torch.cat([torch.stack([loss_sum, tokens]), flags, parts]))
        if not self.reads_late:  # the per-tensor loop cannot skip an update: check before it
            self._check_finite(float(totals[0]) / self.ctx.world_size, self.step + 1)
        if cfg.grad_clip:
            self.scaler.unscale_(self.optimizer)
            nn.utils.clip_grad_norm_(self.ddp_model.parameters(), cfg.grad_clip)  # FSDP: over every shard
        self._step_lr = self.optimizer.param_groups[-1]["lr"]  # the lr this update uses, for the log
        if self.scaler.is_enabled() or not self.reads_late:  # fp16: the scaler skips non-finite gradients
            self.scaler.step(self.optimizer)
        else:
            step_unless_non_finite(self.optimizer, totals[0])
        self.scaler.update()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return totals

    _step_lr = 0.0

    def _lr(self) -> float:
        """The lr of the last group (full lr under LLRD) used by the last update."""
        return self._step_lr

    def _rescale_position(self, checkpoint_dir: str, written_by: int) -> None:
        """batches_in_epoch counts one rank's batches, and rank r of W takes every W-th batch of the
        epoch's order: W_old ranks had drawn n x W_old batches, so each of W_new ranks skips
        n x W_old / W_new (the same count of n had repeated or skipped part of the epoch: walk T)."""
        drawn = self.batches_in_epoch * written_by
        self.batches_in_epoch = drawn // self.ctx.world_size
        per_step = self.config.batch_size * self.config.grad_accum
        warnings.warn(f"{checkpoint_dir} was written by {written_by} processes, this run has {self.ctx.world_size}: "
                      f"each step now trains on {per_step * self.ctx.world_size} examples, not "
                      f"{per_step * written_by} (train.batch_size is per process), the epoch goes on after the "
                      f"{drawn} batches drawn, and RNG streams are re-seeded, so this is not the run "
                      f"{written_by} processes would make; resume under torchrun --nproc_per_node {written_by} "
                      "to continue it exactly")

    # ------------------------------------------------------------------ data position
    def _batches(self):
        """Endless batches across epochs; tracks (epoch, batches_in_epoch) for resume."""
        data = self.data
        skip = self.batches_in_epoch
        while True:
            if hasattr(data, "set_epoch"):
                data.set_epoch(self.epoch)
            if skip and hasattr(data, "skip"):
                data.skip(skip)
                iterator = iter(data)
            else:
                iterator = iter(data)
                for _ in range(skip):  # no fast skip: draw and drop (collator RNG restored after)
                    next(iterator)
            if skip and self._pending_rng is not None:
                self._apply_rank_state(self._pending_rng)
            self._pending_rng = None
            skip = 0
            produced = False
            for batch in iterator:
                produced = True
                self.batches_in_epoch += 1
                yield batch
            if not produced and self.batches_in_epoch == 0:
                raise DataError("the training data produced no batch; check the corpus and batch_size")
            self.epoch += 1
            self.batches_in_epoch = 0

    _pending_rng: dict | None = None

    def _data_position(self) -> dict:
        """Where the batches stand: epoch, batches drawn in it, the collator's RNG state."""
        collator = (self.collator.state_dict()
                    if self.collator is not None and hasattr(self.collator, "state_dict") else None)
        return {"epoch": self.epoch, "batches_in_epoch": self.batches_in_epoch, "collator": collator}

    def _set_data_position(self, position: dict) -> None:
        self.epoch, self.batches_in_epoch = position["epoch"], position["batches_in_epoch"]
        if position["collator"] is not None:
            self.collator.load_state_dict(position["collator"])

    def _trained_position(self) -> dict:
        """The data position of the last batch trained on (the prefetch thread may be ahead)."""
        return self.prefetcher.consumed if self.prefetcher is not None else self._data_position()

    # ------------------------------------------------------------------ logging
    def _metrics_path(self) -> str:
        return os.path.join(self.out_dir, "metrics.jsonl")

    def _write_row(self, row: dict) -> None:
        self.history.append(row)
        if not self.ctx.is_main:
            return
        # An append-only log: rewriting the whole file per row would cost O(rows^2). A crash can
        # at worst cut the last line, and resume rewrites the file atomically (_restore).
        append_text(self._metrics_path(), json.dumps(row, ensure_ascii=False) + "\n")
        if self.reporter is not None:
            self.reporter.write(row)

    reporter = None  # train.report_to's writer while train() runs (rank 0)

    def _empty_window(self) -> dict:
        return {"loss": 0.0, "steps": 0, "tokens": 0, "time": 0.0, **{n: 0.0 for n in self.log_outputs}}

    def _log_window(self) -> dict:
        w = self.window
        steps = max(1, w["steps"])
        row = {"step": self.step, "split": "train", "loss": w["loss"] / steps,
               **{name: w.get(name, 0.0) / steps for name in self.log_outputs},
               "lr": self._lr(), "tokens_per_s": w["tokens"] / max(w["time"], 1e-9),
               "epoch": self._trained_position()["epoch"], "train_seconds": round(self.train_seconds, 3),
               "precision": self.precision}
        self.window = self._empty_window()
        self._write_row(row)
        return row

    def _evaluate(self) -> dict | None:
        if self.eval_fn is None:
            return None
        metrics = None
        if self.sharded is not None:
            self.sharded.sync()  # collective: rank 0 evaluates the plain model
        if self.ctx.is_main:
            model = unwrap(self.model)
            was_training = model.training
            model.eval()
            # fork_rng: evaluation must not move the training RNG streams, or a run with
            # evaluation would train differently from one without.
            with torch.random.fork_rng(devices=[self.ctx.device] if self.device_type == "cuda" else []), \
                    torch.no_grad(), self._autocast():
                metrics = {k: float(v) for k, v in self.eval_fn(model).items()}
            model.train(was_training)
            if metrics:
                self._write_row({"step": self.step, "split": "eval", **metrics,
                                 "train_seconds": round(self.train_seconds, 3)})
            if self.keeper is not None and self.keeper.update(model, self.step, metrics or {}):
                self.stop_requested = True
            if self.ctx.is_main and metrics:  # a line of the run's report, with or without the bar
                tqdm.write("eval step {}: {}".format(
                    self.step, ", ".join(f"{k}={v:.4g}" for k, v in metrics.items())))
            self.plot()
        self.ctx.barrier()
        return metrics

    def plot(self) -> None:
        """Write OUT/curves.png: train/eval loss, eval accuracies and lr against step."""
        if self.ctx.is_main and self.history:
            if not can_plot():  # a picture of the metrics must not cost the run (metrics.jsonl has them)
                if not self._said_no_plot:
                    warnings.warn(f"{NO_MATPLOTLIB}: curves.png is not drawn; training and metrics.jsonl "
                                  "are unaffected", stacklevel=2)
                    self._said_no_plot = True
                return
            baseline = None  # written by the pre-training recipe before training starts
            with contextlib.suppress(OSError, ValueError):
                with open(os.path.join(self.out_dir, "baseline.json"), encoding="utf-8") as f:
                    baseline = json.load(f)
            with atomic_open(os.path.join(self.out_dir, "curves.png"), "wb") as f:
                plot_curves(self.history, f, baseline)

    def _say_precision(self) -> None:
        """A run below fp32 says so on stderr, as the inference commands do (fp32 adds no line);
        bf16 asked for on a CPU also hears that it is the slow choice there."""
        if not self.ctx.is_main or self.precision == "fp32":
            return
        slow = (" (slower than fp32 on most CPUs; train.precision=\"auto\" runs fp32 here)"
                if self.device_type == "cpu" else "")
        print(f"training on {self.ctx.device} in {describe(self.config.precision, self.ctx.device)}{slow}",
              file=sys.stderr, flush=True)

    def _progress_bar(self):
        # a bar on a terminal, a line a minute in a log file (bertkit/runtime/progress.py); under
        # train.max_minutes the clock may end the run before max_steps, so the line's time left heeds it
        budget = self.config.max_minutes
        left = None if budget is None else (lambda: 60.0 * budget - self._shared_clock())
        return progress(total=self.config.max_steps, initial=self.step, desc="train", unit="step",
                        enabled=self.progress, time_left=left)

    # ------------------------------------------------------------------ save / restore
    def _rank_state(self) -> dict:
        state = {"rng": rng_state()}
        collator = self._trained_position()["collator"]
        if collator is not None:
            state["collator"] = collator
        return state

    def _apply_rank_state(self, state: dict) -> None:
        set_rng_state(state["rng"])
        if "collator" in state and self.collator is not None:
            self.collator.load_state_dict(state["collator"])

    def save_checkpoint(self) -> str | None:
        """Write OUT/checkpoint-<step>/ atomically (rank 0) and prune to the last `keep_last`
        (keep_last = 0: prune nothing)."""
        rank_states = self.ctx.gather(self._rank_state())  # collective: every rank takes part
        optimizer_state = None
        if self.sharded is not None:  # collective too: full weights and moments, as one process saves them
            self.sharded.sync()
            optimizer_state = self.sharded.optimizer_state()
        path = None
        position = self._trained_position()
        if self.ctx.is_main:
            state = {
                "step": self.step, "epoch": position["epoch"], "batches_in_epoch": position["batches_in_epoch"],
                "train_seconds": self.train_seconds,
                "world_size": self.ctx.world_size, "window": dict(self.window),
                "optimizer": self.optimizer.state_dict() if optimizer_state is None else optimizer_state,
                "scheduler": self.scheduler.state_dict(),
                "scaler": self.scaler.state_dict(), "ranks": rank_states,
                "train_config": asdict(self.config),
            }
            path = os.path.join(self.out_dir, f"checkpoint-{self.step}")
            with atomic_directory(path, prefix=f".tmp-checkpoint-{self.step}-") as tmp:
                unwrap(self.model).save_pretrained(tmp, tokenizer=self.tokenizer)
                with atomic_open(os.path.join(tmp, STATE_FILE), "wb") as f:
                    torch.save(state, f)
            # keep_last = 0 keeps all; said here, not left to [:-0] happening to be empty
            doomed_paths = list_checkpoints(self.out_dir)[:-self.config.keep_last] if self.config.keep_last else []
            for _, old_path in doomed_paths:
                # renamed out of sight first: a kill in the middle of the delete leaves a .tmp-
                # directory the next start removes, not a checkpoint-N without its state file
                doomed = os.path.join(self.out_dir, f".tmp-checkpoint-pruned-{os.path.basename(old_path)}")
                shutil.rmtree(doomed, ignore_errors=True)
                os.replace(old_path, doomed)
                shutil.rmtree(doomed, ignore_errors=True)
            self.plot()
        self.ctx.barrier()
        return path

    def _restore(self, checkpoint_dir: str) -> None:
        """Load model, optimizer, scheduler, scaler, position and RNG from a checkpoint."""
        model = unwrap(self.model)
        check_same_config(model.config, checkpoint_dir)
        state = load_trainer_state(checkpoint_dir)
        if "train_config" in state:
            check_resume_options({"train": state["train_config"]}, {"train": asdict(self.config)}, checkpoint_dir,
                                 defaults={"train": asdict(TrainConfig())})
        if hasattr(model, "load_adapter_weights"):  # a PeftModel: its checkpoints hold the adapter only
            model.load_adapter_weights(checkpoint_dir)  # strict: every adapter tensor must fit
        else:
            report = load_into(model, read_state_dict(checkpoint_dir), model.base_model_prefix)
            if report.missing_keys or report.unexpected_keys:
                raise CheckpointError(f"{checkpoint_dir} does not hold this model's weights (missing "
                                      f"{report.missing_keys[:3]}, unused {report.unexpected_keys[:3]}); "
                                      "resume with the model class that wrote it")
        try:
            load_optimizer_state(self.optimizer, state["optimizer"])
        except (ValueError, KeyError) as e:
            raise CheckpointError(f"the optimizer state in {checkpoint_dir} does not fit this model "
                                  f"({e}); resume with the same model and train config") from None
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.step = int(state["step"])
        self.train_seconds = float(state.get("train_seconds", 0.0))  # absent in older checkpoints
        self._agreed_clock = self.train_seconds  # the same on every rank: read from the checkpoint
        self._apply_current_schedule(checkpoint_dir)
        if self.config.schedule_over == "minutes":  # the lr of the clock the run stopped at
            self._follow_clock(self.train_seconds)
        self.epoch = int(state["epoch"])
        self.batches_in_epoch = int(state["batches_in_epoch"])
        self.window = dict(state["window"])
        ranks = state["ranks"]
        if len(ranks) == self.ctx.world_size:
            self._pending_rng = ranks[self.ctx.rank]
        else:  # a different number of processes: the position is rescaled, randomness cannot be kept
            self._rescale_position(checkpoint_dir, len(ranks))
            seed_everything(self.config.seed + self.ctx.rank + self.step)
            self._pending_rng = None
        if self._pending_rng is not None and self.batches_in_epoch == 0:
            self._apply_rank_state(self._pending_rng)
            self._pending_rng = None
        if self.ctx.is_main:
            self._truncate_metrics(self.step)
            if self.keeper is not None:
                self.keeper.replay(self.history)
        self.resumed_at, self.resumed_seconds = self.step, self.train_seconds
        if self.ctx.is_main:
            tqdm.write(f"resuming from {checkpoint_dir} (step {self.step})")

    def _apply_current_schedule(self, checkpoint_dir: str) -> None:
        """Follow this run's schedule if max_steps/warmup/schedule changed since the checkpoint.

        LambdaLR restores the saved multiplier's settings; extending a run (a larger
        max_steps) must instead continue on the new schedule, or the lr would stay at 0.
        """
        current = self.config.lr_schedule()
        saved = self.scheduler.lr_lambdas[0]
        if vars(saved) == vars(current):
            return
        warnings.warn(f"the lr schedule differs from the one {checkpoint_dir} was trained with; "
                      f"from step {self.step} the lr follows the new one", stacklevel=3)
        self.scheduler.lr_lambdas = [current] * len(self.optimizer.param_groups)
        self._set_lr_factor(current(self.scheduler.last_epoch))

    def _truncate_metrics(self, step: int) -> None:
        """Keep the metric rows up to `step` (a killed run may have logged past its checkpoint)."""
        rows = []
        path = self._metrics_path()
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a line cut by the kill
                    if row.get("step", 0) <= step:
                        rows.append(row)
        self.history = rows
        atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def may_skip_parameters(model: nn.Module) -> bool:
    """True when a training step may leave some of `model`'s parameters without a gradient, so
    DDP has to look for them (`find_unused_parameters`) instead of waiting for them forever: the
    model's family says (e.g. BERT's mixture-of-experts routing; bertkit/models/families.py)."""
    config = getattr(model, "config", None)
    family = FAMILIES.get(getattr(config, "model_type", None))
    return family is not None and family.may_skip_parameters(config)


def check_same_config(config, checkpoint_dir: str) -> None:
    """Raise CheckpointError if the checkpoint was written for a model of another shape."""
    # Both sides go through the model's config class, so a field added to it since the checkpoint
    # was written takes its default on both and does not count as a difference.
    saved = type(config).from_pretrained(checkpoint_dir).to_dict()
    current = config.to_dict()
    # where the weights came from (a base exported by transformers records its hub name; bertkit's
    # checkpoints write none) and the file's writer are no part of the model's shape
    ignore = {"architectures", "torch_dtype", "dtype", *SOURCE_KEYS}
    keys = sorted((set(saved) | set(current)) - ignore)
    diff = [f"{k}={saved.get(k)!r} there, {current.get(k)!r} now" for k in keys
            if saved.get(k) != current.get(k)]
    if diff:
        raise CheckpointError(f"{checkpoint_dir} was trained with a different model config "
                              f"({'; '.join(diff[:4])}); resume with the config it was written with, "
                              "or train into a new --out directory")
