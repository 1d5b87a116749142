"""`bertkit finetune --search`: the settings that matter most, chosen on the dev split, in a budget.

Defaults chosen on one data set do not carry to the next (issue 31: MiniLM's 3 epochs at 5e-5
scored below TF-IDF on a real two-class task; the one-hour from-scratch model gained 13 points
from other settings). So the search trains one fine-tune per grid point and keeps the best
dev score (`train.select_metric`; an exact tie goes to the lower dev loss, then to the earlier
trial, as a fine-tune picks its checkpoint):

    lr        learning rates; default by model size: hidden >= 768 Devlin et al.'s 2e-5, 3e-5, 5e-5;
              smaller encoders (MiniLM, the from-scratch models) 5e-5, 1e-4, 3e-4; with --peft the
              method's default lr, half of it and 2.5 times it (LoRA: 1e-3, 2e-3, 5e-3)
    dropout   the encoder's dropout (its model family's `dropout_key`: BERT's hidden_dropout_prob)
              and the classifier's; default 0.1, 0.0
    pooling   what a sequence head reads (model.classifier_pooling); default the checkpoint's
              own and "mean"; only for the tasks with a pooled head
    class_weights  train.class_weights, only when given (search.class_weights=[none,balanced]):
              for single-label or token classification whose small classes are missed; pair it
              with train.select_metric=macro_f1, or accuracy will choose "none"
    epochs    the most epochs of a trial; early stopping (`patience` evaluations) ends each trial
              at its best number of epochs. Both default to the fine-tune's own (train.epochs and
              train.patience: 6 and 2 unless --config or --set gives them), so a recipe's length
              (configs/finetune-bbc-scratch.toml: 8 epochs, no early stop) holds in its search
    min_steps the fewest steps of a full-length trial on a small set (train.min_steps, 300 unless
              epochs are named); a halving rung's trial of a third of the epochs gets a third

Trials run in the order lr, then dropout, then pooling, then class_weights vary (so a budget cut
still tried every learning rate first). `strategy` says how many epochs each gets:

    grid      every grid point for `epochs` (early stopping may end it sooner)
    halving   successive halving (Jamieson & Talwalkar 2016) in rungs: every grid point trains
              for epochs / 3^(R-1) epochs, the best third on dev trains again for 3 times the
              epochs, and so on until one trains for `epochs` (12 points: 12 trials of 2/3
              epoch, 4 of 2, 1 of 6: 22 epochs of training where the grid takes 72). Each trial
              is a whole fine-tune with its own schedule (a promoted point starts afresh, so its
              learning rate decays over its own epochs rather than being cut mid-schedule).

The budget: `max_trials` (0 = every trial of the strategy) and `max_minutes` (0 = none; a trial
that starts gets the rest of it as its train.max_minutes). A trial counts against it with all its
attempts: one that Ctrl-C (or an error) stopped and --resume continued spent the time of both (`time_s`
in the table; its wall_time_s is the last attempt's). A halving rung that the budget cut
promotes nobody: the best trial run so far is the result. The search prints its plan first, and
after trial 0 that trial's time and how many trials the budget fits at its pace. A trial the clock
cuts mid-schedule is said before it starts (when the pace so far says so) and noted "partial" in
the table: half-trained, its dev score is not comparable with a full trial's.
All settings are the `[search]` section (`--set search.lr=[1e-4,3e-4] search.max_minutes=30`);
every other section applies to every trial (the same seed: the settings alone differ).

OUT always holds the best trial so far as a normal fine-tuned model (weights, tokenizer,
finetune_summary.json with a `search` entry, metrics.jsonl); OUT/search/ holds the trials
(trial-NNN: summary and curves, weights only while it runs), `trials.jsonl` and `trials.csv`
(and `attempts.json`, the time of each stopped attempt, once one was stopped).
`--resume` skips finished trials and continues an interrupted one from its checkpoint; the
search settings must match the first run's (the budget may grow).

The test split cannot decide anything: the search reads the training source and the dev
source only, and refuses a dev source that names a test split.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import itertools
import json
import math
import os
import shutil
import signal
import time
from dataclasses import dataclass
from typing import Callable

from bertkit.errors import ConfigError, RunInterrupted
from bertkit.io import atomic_write_json, atomic_write_text, loads_json, read_text
from bertkit.models.checkpoint import read_config
from bertkit.models.families import family_of
from bertkit.models.heads import BertForMultipleChoice, BertForSequenceClassification
from bertkit.peft import DEFAULT_LR as PEFT_DEFAULT_LR
from bertkit.recipes.blend import check_blend
from bertkit.recipes.finetune import (BASELINE_SKIPPED, CLASS_WEIGHTS, FinetuneOptions, build_recipe, finetune,
                                      fit_skipped_baseline, floor_applies, refuse_head_only)
from bertkit.runtime.resume_check import changed_options, flatten
from bertkit.runtime.run_dir import LOCK_FILE, check_apart, list_checkpoints, run_lock
from bertkit.settings.config_io import dataclass_from_dict
from bertkit.tasks import SUMMARY_FILE, get_task, parse_source

SEARCH_DIR = "search"
SEARCH_FILE = "search_config.json"  # what a --resume must repeat
ATTEMPTS_FILE = "attempts.json"  # {trial index: [seconds of each attempt that left no summary]}
RECORD_FILES = (SUMMARY_FILE, "metrics.jsonl", "curves.png", "finetune_config.json")  # a trial's record
BUDGET_KEYS = ("max_trials", "max_minutes")  # may change on --resume
POOLED_HEADS = (BertForSequenceClassification, BertForMultipleChoice)  # heads that read classifier_pooling
SMALL_LRS, BASE_LRS = (5e-5, 1e-4, 3e-4), (2e-5, 3e-5, 5e-5)
PEFT_LR_FACTORS = (0.5, 1.0, 2.5)  # around the method's default (bertkit.peft.DEFAULT_LR): LoRA 1e-3, 2e-3, 5e-3
STRATEGIES = ("grid", "halving")
AXES = ("lr", "dropout", "pooling", "class_weights")  # a trial's settings, the fastest-varying first
HALVING_RATE = 3  # each rung keeps the best third and gives it 3x the epochs (Hyperband's eta)


@dataclass
class SearchSpace:
    """The `[search]` section (see the module doc)."""

    lr: list | None = None  # None: by the model's hidden size
    dropout: list = dataclasses.field(default_factory=lambda: [0.1, 0.0])
    pooling: list | None = None  # None: the checkpoint's pooling and "mean"
    class_weights: list | None = None  # None: not searched (the fine-tune's train.class_weights)
    epochs: float | None = None  # None: the fine-tune's train.epochs
    patience: int | None = None  # None: the fine-tune's train.patience
    # None: the fine-tune's train.min_steps where it applies (not to named epochs), for a trial of
    # `epochs`; a halving rung's shorter trial gets its share
    min_steps: int | None = None
    strategy: str = "grid"
    max_trials: int = 0  # 0 = every trial of the strategy
    max_minutes: float = 0.0  # 0 = no time limit

    def __post_init__(self) -> None:
        for name in AXES:
            values = getattr(self, name)
            if values is not None and (not isinstance(values, list) or not values):
                raise ConfigError(f"search.{name} must be a non-empty list, e.g. search.{name}=[...], got {values!r}")
        if self.lr is not None and not all(_number(v) and v > 0 for v in self.lr):
            raise ConfigError(f"search.lr must hold positive numbers, got {self.lr!r}")
        if self.class_weights is not None and not set(self.class_weights) <= set(CLASS_WEIGHTS):
            raise ConfigError(f"search.class_weights must hold {' and/or '.join(CLASS_WEIGHTS)}, e.g. "
                              f"search.class_weights=[none,balanced], got {self.class_weights!r}")
        if not all(_number(v) and 0 <= v < 1 for v in self.dropout):
            raise ConfigError(f"search.dropout must hold numbers in [0, 1), got {self.dropout!r}")
        if self.epochs is not None and not (_number(self.epochs) and self.epochs > 0):
            raise ConfigError(f"search.epochs must be a positive number, got {self.epochs!r}")
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"search.strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        for name, low in (("patience", 0), ("max_trials", 0), ("min_steps", 0)):
            value = getattr(self, name)
            if name in ("patience", "min_steps") and value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigError(f"search.{name} must be an integer >= {low}"
                                  f"{' (0: no limit)' if name == 'max_trials' else ''}, got {value!r}")
        if not (_number(self.max_minutes) and self.max_minutes >= 0):
            raise ConfigError(f"search.max_minutes must be a number >= 0 (0: no limit), got {self.max_minutes!r}")

    def resolved(self, train: dict) -> "SearchSpace":
        """epochs, patience and min_steps that were left unset, from the user's [train] or the
        fine-tune's defaults (min_steps as a fine-tune applies it: not to epochs the user named)."""
        defaults = FinetuneOptions()
        named_epochs = self.epochs is not None or "epochs" in train
        min_steps = train.get("min_steps", defaults.min_steps if floor_applies(named_epochs, False) else 0)
        return dataclasses.replace(
            self, epochs=self.epochs if self.epochs is not None else train.get("epochs", defaults.epochs),
            patience=self.patience if self.patience is not None else train.get("patience", defaults.patience),
            min_steps=self.min_steps if self.min_steps is not None else min_steps)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _epochs(count: float) -> str:
    return f"{count:g} epoch{'s' * (count != 1)}"


SEARCH_KEYS = [f.name for f in dataclasses.fields(SearchSpace)]


# ---------------------------------------------------------------------------- the grid
def trial_grid(space: SearchSpace, model_dir: str, task_name: str, peft_method: str | None = None) -> list[dict]:
    """Every trial's settings, lr varying fastest: [{"lr", "dropout", "pooling"(, "class_weights")}, ...]."""
    config = read_config(model_dir)
    if peft_method:  # a few trained parameters take a larger lr than the whole model
        defaults = [round(PEFT_DEFAULT_LR[peft_method] * factor, 12) for factor in PEFT_LR_FACTORS]
    else:
        defaults = list(BASE_LRS if getattr(config, "encoder", config).hidden_size >= 768 else SMALL_LRS)
    lrs = space.lr or defaults
    poolings = [None]
    if get_task(task_name).model_class in POOLED_HEADS:
        own = getattr(config, "classifier_pooling", "cls")
        poolings = space.pooling or list(dict.fromkeys([own, "mean"]))
    weights = space.class_weights or [None]
    if space.class_weights and not get_task(task_name).class_weights:
        raise ConfigError(f"search.class_weights is for single-label or token classification, not --task {task_name}; "
                          "leave it out")
    return [{"lr": lr, "dropout": dropout, "pooling": pooling, **({"class_weights": w} if w else {})}
            for w, pooling, dropout, lr in itertools.product(weights, poolings, space.dropout, lrs)]


def rungs(space: SearchSpace, points: int) -> list[tuple[int, float]]:
    """(trials, most epochs of each) per rung: [(points, epochs)] for the grid; for halving the
    counts shrink by HALVING_RATE to 1 and the epochs grow by it to `epochs` (12 -> 12, 4, 1)."""
    if space.strategy == "grid":
        return [(points, space.epochs)]
    counts = [points]
    while counts[-1] > 1:
        counts.append(max(1, counts[-1] // HALVING_RATE))
    return [(count, space.epochs / HALVING_RATE ** (len(counts) - 1 - k)) for k, count in enumerate(counts)]


def trial_sections(sections: dict, settings: dict, space: SearchSpace, model_dir: str, extra: dict) -> dict:
    """The user's sections with one trial's settings (and `extra` train keys) in place."""
    family = family_of(read_config(model_dir))
    model = dict(sections.get("model", {}))
    for key in (family.dropout_key, "classifier_dropout"):
        if key in family.finetune_keys:
            model[key] = settings["dropout"]
    if settings["pooling"] is not None:
        model["classifier_pooling"] = settings["pooling"]
    epochs = settings.get("epochs", space.epochs)
    train = {**sections.get("train", {}), "lr": settings["lr"], "epochs": epochs, "patience": space.patience,
             "min_steps": math.ceil(space.min_steps * epochs / space.epochs), **extra}
    if "class_weights" in settings:
        train["class_weights"] = settings["class_weights"]
    return {**sections, "model": model, "train": train}


# ---------------------------------------------------------------------------- the search
def search(task: str, model_dir: str, train_source: str, dev_source: str | None, out_dir: str,
           sections: dict | None = None, resume: bool = False, progress: bool = True,
           log: Callable[[str], None] = print) -> dict:
    """Run the trials of `sections["search"]` into OUT/search and keep the best in OUT; returns
    OUT's summary (a fine-tune summary with a `search` entry: the trials, the best one)."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # trials share OUT's bookkeeping: one process runs them
        raise ConfigError("finetune --search runs in one process, not under torchrun; run the search without "
                          "torchrun, then fine-tune with its settings under torchrun if you need to")
    sections = dict(sections or {})
    space = dataclass_from_dict(SearchSpace, dict(sections.pop("search", {})), "search").resolved(
        sections.get("train", {}))
    check_dev_source(dev_source)
    if sections.get("train", {}).get("blend_tfidf"):
        check_blend(task, search=True)
    # before OUT/search is written: refused in trial 0, it left OUT "not empty" for the corrected command
    refuse_head_only(get_task(task), build_recipe(sections))
    check_apart(model_dir, out_dir)
    grid = trial_grid(space, model_dir, task, sections.get("peft", {}).get("method"))
    record = {"task": task, "model": os.path.abspath(model_dir), "train": train_source, "dev": dev_source,
              "sections": sections, "space": {k: v for k, v in dataclasses.asdict(space).items()
                                              if k not in BUDGET_KEYS}}
    record = json.loads(json.dumps(record))  # as it reads back from search_config.json (tuples are lists)
    with run_lock(out_dir, f"finetune --search --task {task}"):
        check_search_dir(out_dir, resume, record)
        run_trials(task, model_dir, (train_source, dev_source), out_dir, sections, space, grid, progress, log)
        summary = loads_json(read_text(os.path.join(out_dir, SUMMARY_FILE)), SUMMARY_FILE)
    return summary


def check_dev_source(dev_source: str | None) -> None:
    """The search chooses on dev: a dev source naming a test split (bbc:test) is refused."""
    if dev_source is not None and "test" in (parse_source(dev_source)[1], dev_source.rsplit(":", 1)[-1]):
        raise ConfigError(f"--dev {dev_source} is a test split: the search would choose its settings on test; "
                          f"pass a dev split (NAME:dev) or your own dev file")


def check_search_dir(out_dir: str, resume: bool, record: dict) -> None:
    """A new search needs an empty OUT; --resume needs the same search in OUT."""
    path = os.path.join(out_dir, SEARCH_DIR, SEARCH_FILE)
    if resume and os.path.isfile(path):
        changed = changed_options(search_options(loads_json(read_text(path), path)), search_options(record),
                                  may_change=(), defaults={"search.class_weights": None})  # (newer than the record)
        if changed:
            raise ConfigError(f"--resume: the search in {out_dir} was started with other options ("
                              f"{'; '.join(changed)}); repeat its options (only search.max_trials and "
                              "search.max_minutes may change)")
        return
    if [n for n in os.listdir(out_dir) if n != LOCK_FILE]:
        hint = "pass --resume to continue it, or " if os.path.isfile(path) else ""
        raise ConfigError(f"{out_dir} is not empty; {hint}choose a new --out for the search")
    os.makedirs(os.path.join(out_dir, SEARCH_DIR))
    atomic_write_json(path, record)


def search_options(record: dict) -> dict:
    """A search record by the names the user set: data.max_length, search.strategy, model, ..."""
    options = {k: v for k, v in record.items() if k not in ("sections", "space")}
    options.update(flatten(record.get("sections") or {}))
    options.update({f"search.{k}": v for k, v in (record.get("space") or {}).items()})
    return options


def run_trials(task: str, model_dir: str, sources: tuple, out_dir: str, sections: dict, space: SearchSpace,
               grid: list[dict], progress: bool, log) -> list[dict]:
    """`trials`, with Ctrl-C outside a trial's training (while a trial loads its data and model, or the
    best moves to OUT) said as a stop that --resume continues: it had ended in a bare "interrupted"."""
    try:
        return trials(task, model_dir, sources, out_dir, sections, space, grid, progress, log)
    except RunInterrupted:  # stopped in training: the message names the checkpoint and --resume
        raise
    except KeyboardInterrupt:
        raise RunInterrupted(f"stopped by SIGINT between trials (each finished trial is kept, the best so far "
                             f"in {out_dir}); run the same command with --resume for the other trials",
                             signal.SIGINT) from None


def trials(task: str, model_dir: str, sources: tuple, out_dir: str, sections: dict, space: SearchSpace,
           grid: list[dict], progress: bool, log) -> list[dict]:
    """Each rung's trials in turn within the budget; after each trial, OUT holds the best so far.
    The table rows. A trial finished by an earlier run is read back; its model, moved to OUT when
    it was the best, stays there until a better trial replaces it."""
    rows, summaries, best, points = [], {}, None, grid
    plan = rungs(space, len(grid))
    log(plan_text(space, grid, plan))
    for rung, (count, epochs) in enumerate(plan):
        if rung:  # the previous rung's best `count` points, each afresh with more epochs
            previous = [r["trial"] for r in rows if r["rung"] == rung - 1]
            if any(index not in summaries for index in previous):
                break  # the budget cut that rung: its ranking is incomplete, nobody is promoted
            ranked = sorted(previous, key=functools.cmp_to_key(
                lambda a, b: -1 if better(summaries[a], summaries[b]) else int(better(summaries[b], summaries[a]))))
            points = [{k: rows[index][k] for k in AXES if k in rows[index]} for index in ranked[:count]]
        for settings in points:
            index, settings = len(rows), {**settings, "epochs": epochs}
            spent = sum(trial_time(r) for r in rows)
            left = space.max_minutes * 60 - spent if space.max_minutes else None
            if (space.max_trials and index >= space.max_trials) or (left is not None and left <= 0):
                rows.append({"trial": index, "rung": rung, **settings, "status": "not run (budget)"})
                continue
            warning = cut_warning(index, epochs, left, rows)
            if warning:
                log(warning)
            trial_dir = os.path.join(out_dir, SEARCH_DIR, f"trial-{index:03d}")
            summary = timed_trial(out_dir, index, lambda: run_trial(task, model_dir, sources, trial_dir, sections,
                                                                    space, settings, left, progress))
            summaries[index] = summary
            rows.append(table_row(index, rung, settings, summary, read_attempts(out_dir).get(str(index), [])))
            log(" ".join(f"{k}={v}" for k, v in rows[-1].items()))
            if index == 0:
                log(pace_text(space, rows, plan))
            best = keep_best(best, index, summary, trial_dir, out_dir)
            write_out_summary(out_dir, best, rows)
    write_out_summary(out_dir, best, rows)
    if best is not None and "note" in rows[best[0]]:
        log(f"search: the best on dev, trial {best[0]}, was cut by the time budget before its "
            f"{_epochs(rows[best[0]]['epochs'])}: fine-tune its settings for the whole schedule for its full score")
    return rows


clock = time.monotonic  # what timed_trial reads (a test's own clock replaces it)


def timed_trial(out_dir: str, index: int, run: Callable[[], dict]) -> dict:
    """run() (a trial's attempt); an attempt that ends in an exception (Ctrl-C, SIGTERM, an error)
    before its trial's summary is written has its seconds added to OUT/search/attempts.json, so a
    --resume counts them against search.max_minutes (walk W: the resumed part's wall time alone did)."""
    started = clock()
    try:
        return run()
    except BaseException:
        trial_done = os.path.isfile(os.path.join(out_dir, SEARCH_DIR, f"trial-{index:03d}", SUMMARY_FILE))
        if not trial_done:  # a finished trial's wall_time_s holds this attempt already
            attempts = read_attempts(out_dir)
            attempts.setdefault(str(index), []).append(round(clock() - started, 1))
            atomic_write_json(os.path.join(out_dir, SEARCH_DIR, ATTEMPTS_FILE), attempts)
        raise


def read_attempts(out_dir: str) -> dict:
    """OUT/search/attempts.json: {"3": [seconds, ...]}, the attempts of each trial that left no summary."""
    path = os.path.join(out_dir, SEARCH_DIR, ATTEMPTS_FILE)
    return loads_json(read_text(path), path) if os.path.isfile(path) else {}


def trial_seconds(summary: dict, earlier: list[float]) -> float:
    """A trial's time over all its attempts: its last attempt's wall time (the summary's wall_time_s,
    since the resume when resumed) and the earlier attempts': the larger of their seconds as the
    search recorded them (`timed_trial`) and the checkpoint's clock at the resume (their training
    steps' time, all a killed attempt leaves)."""
    before = max(sum(earlier), summary.get("resumed_train_seconds") or 0.0)
    return round(summary["wall_time_s"] + before, 1)


def trial_time(row: dict) -> float:
    """What a table row's trial spent of search.max_minutes: every attempt's time."""
    return row.get("time_s", row.get("wall_time_s")) or 0.0


def keep_best(best: tuple | None, index: int, summary: dict, trial_dir: str, out_dir: str) -> tuple:
    """(index, summary) of the better of the best so far and this trial; the winner's model goes to OUT,
    a loser's weights are deleted."""
    wins = best is None or better(summary, best[1])
    if wins and os.path.isfile(os.path.join(trial_dir, "config.json")):  # its model is still in the trial
        publish(trial_dir, out_dir)
    elif not wins:
        drop_weights(trial_dir)
    return (index, summary) if wins else best


# ---------------------------------------------------------------------------- what the search says
def plan_text(space: SearchSpace, grid: list[dict], plan: list[tuple[int, float]]) -> str:
    """The plan before the first trial: how many trials, the grid, their length, the budget."""
    axes = [f"{name} {', '.join(dict.fromkeys(f'{g[name]:g}' if _number(g[name]) else str(g[name]) for g in grid))}"
            for name in AXES if grid[0].get(name) is not None]
    if space.strategy == "grid":
        length = f"each up to {_epochs(space.epochs)}"
    else:
        length = "successive halving: " + ", then ".join(f"{count} of {_epochs(round(epochs, 3))}"
                                                         for count, epochs in plan)
    limits = ([f"search.max_trials={space.max_trials}"] if space.max_trials else []) + (
        [f"search.max_minutes={space.max_minutes:g}"] if space.max_minutes else [])
    budget = f"budget {' and '.join(limits)}" if limits else "no budget (search.max_trials, search.max_minutes)"
    stopping = (f"early stopping after {space.patience} dev evaluations without a better score" if space.patience
                else "no early stopping")
    return (f"search: {sum(count for count, _ in plan)} trials ({' x '.join(axes)}), {length}, {stopping}; "
            f"{budget}; lr varies fastest")


def seconds_per_epoch(rows: list[dict]) -> float | None:
    """The pace of the trials run so far (their wall time over the epochs it timed: a resumed trial's
    wall time is the resumed part's), None before the first."""
    timed = [(r.get("wall_time_s"), r.get("epochs_timed", r.get("epochs_run"))) for r in rows]
    done = [(seconds, epochs) for seconds, epochs in timed if epochs]
    return sum(s for s, _ in done) / sum(e for _, e in done) if done else None


def pace_text(space: SearchSpace, rows: list[dict], plan: list[tuple[int, float]]) -> str:
    """After trial 0: its time, what the whole plan takes at that pace, and how many trials the budget fits."""
    pace, first = seconds_per_epoch(rows), rows[0]
    epochs = [e for count, e in plan for _ in range(count)][:space.max_trials or None]
    if pace is None or len(epochs) == 1:  # too short to measure (epochs_run rounds to 0), or nothing to plan
        return f"search: trial 0 took {trial_time(first) / 60:.1f} min"
    need = [trial_time(first)] + [pace * e for e in epochs[1:]]
    text = (f"search: trial 0 took {trial_time(first) / 60:.1f} min for {_epochs(first['epochs_run'])}; at that "
            f"pace the {len(need)} trials take up to {sum(need) / 60:.0f} min")
    if space.max_minutes:
        fits = sum(1 for k in range(len(need)) if sum(need[:k + 1]) <= space.max_minutes * 60)
        text += (f"; search.max_minutes={space.max_minutes:g} fits about {fits} of them in full (early "
                 "stopping may make room for more)")
    return text


def cut_warning(index: int, epochs: float, left: float | None, rows: list[dict]) -> str | None:
    """Said before a trial whose schedule the time left cannot fit at the pace so far."""
    pace = seconds_per_epoch(rows)
    if left is None or pace is None or pace * epochs <= left:
        return None
    return (f"search: trial {index}'s {_epochs(epochs)} take about {pace * epochs / 60:.1f} min at the pace so far and "
            f"{left / 60:.1f} min of search.max_minutes are left: the clock will likely cut it, and a trial cut "
            "mid-schedule (its learning rate not yet decayed) has a dev score not comparable with full trials'")


def run_trial(task: str, model_dir: str, sources: tuple, trial_dir: str, sections: dict, space: SearchSpace,
              settings: dict, seconds_left: float | None, progress: bool) -> dict:
    """The summary of one trial's fine-tune in trial_dir (read back when an earlier run finished
    it); an interrupted trial continues from its checkpoint."""
    first = trial_dir.endswith("trial-000")
    extra = {} if first else {"baseline": False}  # the TF-IDF baseline once: trial 0 fits it
    done = os.path.join(trial_dir, SUMMARY_FILE)
    if os.path.isfile(done) and not first:
        return loads_json(read_text(done), done)
    if os.path.isfile(done):  # trial 0's baseline, if an earlier run's Ctrl-C skipped it, is fitted now
        return fit_skipped_baseline(trial_dir, task, *sources, trial_sections(sections, settings, space, model_dir, {}))
    if seconds_left is not None:
        own = sections.get("train", {}).get("max_minutes")
        extra["max_minutes"] = min(seconds_left / 60, own) if own else seconds_left / 60
    resume = os.path.isdir(trial_dir) and bool(list_checkpoints(trial_dir))
    summary = finetune(task, model_dir, sources[0], sources[1], trial_dir,
                       trial_sections(sections, settings, space, model_dir, extra), progress=progress, resume=resume)
    if (summary.get("tfidf_baseline") or {}).get("note") == BASELINE_SKIPPED:  # Ctrl-C stops the search too
        raise RunInterrupted("stopped by SIGINT during trial 0's TF-IDF baseline (the trial is saved, without it); "
                             "run the same command with --resume for the other trials and the baseline", signal.SIGINT)
    return summary


def better(summary: dict, best: dict) -> bool:
    """A better dev result than the best trial's: the select metric (lower wins for mse and loss),
    then on an exact tie the fine-tune's tie metric (the dev loss), as a fine-tune picks its
    checkpoint; equal results keep the earlier trial."""
    task = get_task(summary["spec"]["task"])
    for name in (summary["select_metric"], summary.get("tie_metric")):
        new, old = (s["best_dev"].get(name) if name else None for s in (summary, best))
        if new == old or name is None:
            continue
        if new is None or old is None:
            return old is None
        return new < old if name in task.lower_is_better else new > old
    return False


def table_row(index: int, rung: int, settings: dict, summary: dict, earlier: list[float] = ()) -> dict:
    """A trial's row: its settings and dev score, and what ended it (stopped_by: patience, the clock
    as train.max_minutes, or None: every epoch ran); a clock cut is noted as partial. A trial of
    several attempts (`earlier`: the seconds of those that left no summary; or resumed) has time_s,
    its time over all of them (`trial_seconds`), beside wall_time_s, the last attempt's."""
    metric = summary["select_metric"]
    # a summary from before "stopped_by" was recorded says only whether it stopped early
    ended = summary.get("stopped_by", "patience" if summary["stopped_early"] else None)
    row = {"trial": index, "rung": rung, **settings, "status": "done", f"dev_{metric}": summary["best_dev"].get(metric),
           "best_step": summary["best_step"], "epochs_run": round(summary["epochs_run"], 2), "stopped_by": ended,
           "wall_time_s": summary["wall_time_s"]}
    if summary.get("resumed_at_step"):  # wall_time_s timed the resumed part only: the pace reads that part
        row["epochs_timed"] = round((summary["steps"] - summary["resumed_at_step"]) / summary["steps_per_epoch"], 2)
    if earlier or summary.get("resumed_at_step") is not None:
        row["time_s"] = trial_seconds(summary, list(earlier))
    if ended == "train.max_minutes":
        row["note"] = (f"partial: cut by the time budget at {row['epochs_run']:g} of {_epochs(settings['epochs'])}; "
                       "its dev score is not comparable with full trials'")
    return row


# ---------------------------------------------------------------------------- OUT and the table
def publish(trial_dir: str, out_dir: str) -> None:
    """Make OUT the trial's model: OUT's old files go, the trial's weights and tokenizer move
    there and its record is copied (the trial keeps its record); OUT's summary follows."""
    for name in os.listdir(out_dir):
        path = os.path.join(out_dir, name)
        if name not in (SEARCH_DIR, LOCK_FILE):
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    for name in os.listdir(trial_dir):
        source = os.path.join(trial_dir, name)
        if not os.path.isfile(source) or name in (SUMMARY_FILE, LOCK_FILE):
            continue
        if name in RECORD_FILES:
            shutil.copy2(source, os.path.join(out_dir, name))
        else:
            os.replace(source, os.path.join(out_dir, name))


def write_out_summary(out_dir: str, best: tuple, rows: list[dict]) -> None:
    """OUT's finetune_summary.json: the best trial's, with the search's table so far and the
    TF-IDF baseline trial 0 fitted (the same for every trial: same data, same dev)."""
    index, summary = best
    first = os.path.join(out_dir, SEARCH_DIR, "trial-000", SUMMARY_FILE)
    baseline = loads_json(read_text(first), first).get("tfidf_baseline") if os.path.isfile(first) else None
    settings = next(r for r in rows if r["trial"] == index)
    entry = {"best_trial": index, "settings": {k: settings[k] for k in (*AXES, "epochs") if k in settings},
             "trials": rows, "table": f"{SEARCH_DIR}/trials.csv"}
    write_table(os.path.join(out_dir, SEARCH_DIR), rows)
    atomic_write_json(os.path.join(out_dir, SUMMARY_FILE), {**summary, "tfidf_baseline": baseline, "search": entry})


def drop_weights(trial_dir: str) -> None:
    """A trial that lost keeps its record (summary, metrics, curves), not its model files."""
    for name in os.listdir(trial_dir):
        path = os.path.join(trial_dir, name)
        if os.path.isfile(path) and name not in RECORD_FILES:
            os.remove(path)


def write_table(search_dir: str, rows: list[dict]) -> None:
    """trials.jsonl (one row per trial) and trials.csv (the same, with every column)."""
    atomic_write_text(os.path.join(search_dir, "trials.jsonl"),
                      "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    columns = list(dict.fromkeys(k for r in rows for k in r))
    path = os.path.join(search_dir, "trials.csv")
    with open(path + ".tmp", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(path + ".tmp", path)
