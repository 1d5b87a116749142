"""The command-line conventions every command shares, each defined once.

`--set SECTION.KEY=VALUE [...]` (repeatable, several values per flag), `--seed N` wherever
randomness is involved, `--device` wherever a model runs, `--no-progress`, `--model` (also where a
positional DIR came first: `add_model_dir`); `typed_settings` passes the typed ones to a recipe as
values; `resolve_models` reads every option that names a model. A command module adds the ones it
takes. `say` is how a long run's report reaches the terminal, `metrics_text` how a summary reads,
and `stream_output` how a stream output reaches a file or, for `--output -`, stdout, as it is computed;
`stopped_by`, `longer_run`, `not_ahead` and `standing` read a fine-tuning run's summary (finetune, distill).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any, Iterator, TextIO

import torch

from bertkit.errors import CheckpointError, ConfigError
from bertkit.io import atomic_open
from bertkit.runtime.devices import DEVICES, resolve_device
from bertkit.runtime.precision import PRECISIONS, autocast, describe
from bertkit.models.hub_cache import existing_model_dir
from bertkit.runtime.user_modules import TASK_MODULE
from bertkit.settings.config_io import split_override


def add_set(parser, example: str = "train.epochs=3 train.lr=5e-5 data.max_length=128") -> None:
    parser.add_argument("--set", nargs="+", action="extend", default=[], metavar="SECTION.KEY=VALUE",
                        help=f"override settings (TOML literals), e.g. {example}; repeatable "
                             "(default: the recipe's values)")


def add_seed(parser, what: str = "sets train.seed; default: the recipe's") -> None:
    parser.add_argument("--seed", type=int, help=f"random seed ({what})")


def add_progress(parser) -> None:
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_no_blend(parser) -> None:
    parser.add_argument("--no-blend", action="store_true",
                        help="the encoder alone, without the TF-IDF model finetune --set train.blend_tfidf=true "
                             "saved beside it (tfidf_blend.*; docs/finetune.md, \"Blending with TF-IDF\")")


def add_int8(parser) -> None:
    parser.add_argument("--int8", action="store_true",
                        help="int8 linear layers on the CPU: forward passes 1.3-1.6x faster on large inputs, but "
                             "each process first spends 5-15 s building or loading its kernels (whole commands "
                             "on 1,000 texts measured 0.84-0.93x fp32); vectors at cosine >= 0.99 to fp32, "
                             "accuracy changes measured in docs/inference.md")


def add_device(parser, default: str = "auto") -> None:
    parser.add_argument("--device", default=None,
                        help=f"where the model runs: {DEVICES}; default {default} (auto: cuda when "
                             "available, else cpu)")


def device_of(args) -> torch.device:
    """`--device` checked against this build and machine: a one-line error before any model loads."""
    return resolve_device(args.device or "auto")


def typed_settings(args) -> list[tuple[str, Any]]:
    """`--seed N` and `--device D` (checked now) as (section.key, value) pairs for the recipe's settings:
    typed values, applied as they are after `--set` (settings/config_io.py `Override`), never text
    parsed again. Options not given set nothing."""
    settings: list[tuple[str, Any]] = []
    if getattr(args, "seed", None) is not None:
        settings.append(("train.seed", args.seed))
    if getattr(args, "device", None) is not None:
        device_of(args)
        settings.append(("train.device", args.device))
    refuse_disagreeing(getattr(args, "set", []), {f"--{key.split('.')[1]} {value}": (key, value)
                                                  for key, value in settings})
    return settings


def refuse_disagreeing(set_items, flags: dict[str, tuple[str, Any]]) -> None:
    """A flag and a `--set` naming one setting with different values (`--peft lora` and `--set
    peft.method=adapter`) are refused: the flag would win silently. `flags`: {flag as typed:
    (section.key, value)}."""
    given = dict(split_override(item) for item in set_items)
    for flag, (key, value) in flags.items():
        if key in given and given[key] != value:
            raise ConfigError(f"{flag} and --set {key}={given[key]} disagree; give one of them")


def add_model_dir(parser, what: str) -> None:
    """`--model DIR` as in every command, for a command that took the directory as its positional
    DIR before (still accepted; resolve_models reads it as --model)."""
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help=f"{what}, or ORG/NAME in the local Hugging Face cache (required, or DIR)")
    which.add_argument("model_dir", nargs="?", metavar="DIR", help="the same as --model DIR")


def add_precision(parser) -> None:
    parser.add_argument("--precision", default="auto", choices=PRECISIONS,
                        help="number format of the forward pass: auto = bf16 on a GPU with bf16 (fp16 on older "
                             "GPUs), fp32 on the CPU; weights stay fp32")


def precision_of(args, device: torch.device) -> str:
    """`--precision`, checked for `device` (a one-line error when it cannot run there, or with --int8,
    whose CPU kernels are fp32). A lower precision than the weights' fp32 is said on stderr (stdout
    stays the command's output; fp32, the CPU's, changes no number and adds no line)."""
    said = describe(args.precision, device)
    if said.startswith("fp32"):
        return args.precision
    if getattr(args, "int8", False):
        raise ConfigError(f"--int8 runs fp32 activations on the CPU, not {said}; leave --precision at auto or fp32")
    print(f"running on {device} in {said}", file=sys.stderr, flush=True)
    return args.precision


def running_in(args, device: torch.device):
    """The autocast context the command's model runs in (`precision_of`)."""
    return autocast(precision_of(args, device), device)


# Options that name a model (or tokenizer) directory, in the commands that have them.
MODEL_OPTIONS = ("model", "teacher", "base", "tokenizer")


def resolve_models(args) -> None:
    """Each model option of `args` as a directory: a Hugging Face name (ORG/NAME) becomes its
    snapshot in the local Hugging Face cache, offline (bertkit/models/hub_cache.py); a name not cached is a
    one-line error, and so is a run folder (checkpoint-N/ inside), which names the model to pass
    (bertkit/runtime/run_dir.py). Every command's run() calls it first."""
    if getattr(args, "model_dir", None):  # the positional DIR of add_model_dir
        args.model = args.model_dir
    for name in MODEL_OPTIONS:
        value = getattr(args, name, None)
        if isinstance(value, str):  # runs/A/checkpoint-999 is no hub name: it failed later, as a "tokenizer path"
            setattr(args, name, existing_model_dir(value, name))
            if name != "tokenizer" and os.path.isfile(getattr(args, name)):  # a tokenizer may be one file
                raise CheckpointError(f"{value} is a file; --{name.replace('_', '-')} takes the model's directory "
                                      f"({os.path.dirname(value) or '.'})")


def rounded(value) -> str:
    """A number for a person to read: 4 significant digits (0.3333, 1.602, 4.155e+04); other values as they are."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def metrics_text(metrics: dict) -> str:
    """`name=value, ...` with rounded numbers: an end-of-run summary line (JSON lines keep every digit);
    a row within the row (QA's chance) as `name=(its method: name=value, ...)`."""
    return ", ".join(f"{name}=({value.get('method', name)}: "
                     f"{metrics_text({k: v for k, v in value.items() if k != 'method'})})"
                     if isinstance(value, dict) else f"{name}={rounded(value)}" for name, value in metrics.items())


def baseline_label(scores: dict) -> str:
    """The name a task's own baseline row is printed under: "baseline (METHOD)" where the task chose its
    predictor and says which ("method": multiple choice's TF-IDF cosine, seq2seq's retrieval, QA's sliding
    window), else "trivial baseline" (the majority class, the training mean). Walk AC and session 35: a
    TF-IDF cosine that picked 95% of the headlines was printed as "trivial baseline: method=TF-IDF ..."."""
    method = scores.get("method")
    return f"baseline ({method})" if method else "trivial baseline"


def baseline_text(scores: dict, form=None) -> str:
    """`LABEL: name=value, ...` for a task's baseline row (`baseline_label`), its method in the label only;
    `form` writes the rest (json.dumps for evaluate's exact digits; `metrics_text` by default)."""
    rest = {k: v for k, v in scores.items() if k != "method"}
    return f"{baseline_label(scores)}: {(form or metrics_text)(rest)}"


STDOUT = "-"  # `--output -`: a command whose output is a stream writes it to stdout


@contextlib.contextmanager
def stream_output(path: str) -> Iterator[TextIO]:
    """Where a stream output (JSON lines) is written piece by piece as it is computed: stdout for
    `-` (flush each piece, for the reader at the other end of a pipe), else a temporary sibling of
    the file `path` that replaces it when the block ends without error (`atomic_open`): a failed or
    interrupted run leaves no partial file, and an earlier file as it was."""
    if path == STDOUT:
        yield sys.stdout
        sys.stdout.flush()
    else:
        with atomic_open(path, "w", encoding="utf-8") as f:
            yield f


def check_output_files(args, outputs: tuple[str, ...] = ("output",),
                       reads: tuple[str, ...] = ("input", "model", "corpus", "query_file", "corpus_embeddings")
                       ) -> None:
    """The files a command writes (`outputs`, its options), checked before any work: a folder fails
    only once the work is done, and a file the command reads (its input, its corpus, a file of its
    model directory) would be replaced by what it writes."""
    given = {name: getattr(args, name, None) for name in outputs}
    given = {name: path for name, path in given.items() if path and path != STDOUT}
    targets = {name: os.path.realpath(path) for name, path in given.items()}
    twice = [f"--{name.replace('_', '-')}" for name, target in targets.items()
             if list(targets.values()).count(target) > 1]
    if twice:  # one file for two outputs: only the last written would stay
        raise ConfigError(f"{' and '.join(twice)} name the same file; give each output its own")
    for name, path in given.items():
        option, target = "--" + name.replace("_", "-"), targets[name]
        if os.path.isdir(path):
            raise ConfigError(f"{option} {path} is a directory; give the path of a file to write (in it, or "
                              "elsewhere)")
        for source_name in reads:
            source = getattr(args, source_name, None)
            if not isinstance(source, str) or not os.path.exists(source):
                continue
            real = os.path.realpath(source)
            read = f"--{source_name.replace('_', '-')} {source}"
            if target == real:
                raise ConfigError(f"{option} {path} is {read}: writing it would replace what the command reads; "
                                  "choose another file")
            if target.startswith(real + os.sep) and os.path.exists(target):  # a new file beside a model is fine
                raise ConfigError(f"{option} {path} is a file of {read}: writing it would replace part of what the "
                                  "command reads; choose another file")


def replacing_note(path: str) -> str:
    """" (it replaced the file that was there)" when the output `path` exists before the work: the
    command's last line says so, so a rerun that wrote over earlier results is not silent."""
    return " (it replaced the file that was there)" if path != STDOUT and os.path.isfile(path) else ""


def at_least(minimum: int):
    """An argparse type: an integer of at least `minimum`, refused while parsing (before any model
    loads) with the option's name, as argparse names it."""
    def integer(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return integer


def say(line: str) -> None:
    """Print one line of a long run's report now (flushed, so progress shows through a pipe)."""
    print(line, flush=True)


def add_task_module(parser) -> None:
    """--task-module: the user's module that registers a task (cli.main imports it before
    parsing, so that --task takes its name)."""
    parser.add_argument(TASK_MODULE, metavar="MODULE|FILE.py", action="append", default=[],
                        help="a module (dotted name, or a .py file) that registers a task of your own with "
                             "bertkit.tasks.register_task, imported first (docs/architecture.md)")


# ---------------------------------------------------------------------------- a run's summary
def stopped_by(summary: dict) -> str | None:
    """What ended the run early: "patience", "train.max_minutes" (the clock) or None (every step
    asked); a summary from before "stopped_by" was recorded says only whether it stopped early."""
    return summary.get("stopped_by", "patience" if summary.get("stopped_early") else None)


def longer_run(summary: dict) -> str:
    """The setting that lengthens the run: a search sets each trial's train.epochs from search.epochs
    (the last rung's, the most), so there train.epochs would change nothing; a run train.min_steps
    stretched is lengthened by it (train.epochs named alone turns the stretch off); a run of named
    epochs short of the floor is told the floor first (walk W: configs/finetune-wordnet-tagging.toml's
    3 epochs of 200 sentences, 21 steps, dev f1 0.008; with train.min_steps=300 as well, 0.434)."""
    if stopped_by(summary) == "train.max_minutes":  # the clock ended it before its epochs
        budget = "search.max_minutes" if "search" in summary else "train.max_minutes"
        return f"more time ({budget}; the run was stopped by the clock)"
    if "search" in summary:
        return f"longer trials (search.epochs, now {max(row['epochs'] for row in summary['search']['trials']):g})"
    if summary.get("stretched_to_min_steps"):  # its length came from the floor: named epochs alone would cut it
        return f"a longer run (train.min_steps, now {summary['options']['min_steps']})"
    options, steps = summary["options"], summary["train_config"]["max_steps"]
    if summary.get("epochs_named_alone") and options.get("min_steps", 0) > steps:
        return (f"a longer run (train.min_steps={options['min_steps']} as well, which train.epochs named alone turned "
                f"off: {options['min_steps']} steps, not {steps}; or train.epochs, now {options['epochs']:g})")
    return f"a longer run (train.epochs, now {options['epochs']:g}; or train.max_steps, now {steps})"


def not_ahead(summary: dict, theirs: float | None, metric: str | None = None) -> bool:
    """Whether the model's best dev `metric` (default: the select metric) is level with or behind
    `theirs` (False when either is unknown); lower is better for the task's loss-like metrics."""
    from bertkit.tasks import TASKS  # here: every command imports this module, few read a summary

    metric = metric or summary["select_metric"]
    ours = summary["best_dev"].get(metric)
    if ours is None or theirs is None:
        return False
    return ours >= theirs if metric in TASKS[summary["spec"]["task"]].lower_is_better else ours <= theirs


def standing(method: str, summary: dict, theirs: float, subject: str = "the model") -> str:
    """`method` is level with or ahead of `subject` on dev (select metric: theirs against ours)."""
    metric = summary["select_metric"]
    ours = summary["best_dev"][metric]
    return (f"{method} is {'level with' if ours == theirs else 'ahead of'} {subject} on dev ({metric} "
            f"{rounded(theirs)} against {rounded(ours)})")
