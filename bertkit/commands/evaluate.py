"""`bertkit evaluate --model DIR --data DATA`: metrics of a fine-tuned model, as JSON.

The task and the input settings (max_length, columns, QA windows) are read from the model's
finetune_summary.json, else from its config.json; `--task` and `--set data.key=value` override
them. The last line of stdout is one JSON object of metrics, e.g. {"accuracy": 0.97, ...}; for
classification and regression it also holds "baselines": the trivial one and the TF-IDF one,
fitted again on the fine-tune's training data with the C chosen on its dev split
(bertkit/tasks/baseline.py; `--no-baseline` skips them); for embedding, chance and BM25 on the same
queries and corpus; for the other tasks (multiple choice, seq2seq, tagging, QA) the task's own, named
by its method and refitted on the fine-tune's recorded training data. The line before it says the same in words, e.g.
`model on test.csv: accuracy=0.9686 (± 0.011, one standard error over 223 examples), macro_f1=...;
baselines' accuracy: TF-IDF 0.9641, trivial 0.2287`. `--task embedding --model DIR` scores any encoder (the one you would start from,
too) as a sentence-embedding model.
Under torchrun (`torchrun --nproc_per_node N -m bertkit evaluate ...`) each process scores
1/N of the examples and rank 0 prints the metrics of all of them.
"""

from __future__ import annotations

import json
import os
import sys
import warnings

from bertkit.errors import ConfigError, DataError
from bertkit.inference.quantize import inference_copy
from bertkit.tasks.baseline import describe, describe_reference, evaluation_baselines
from bertkit.tasks import (TASKS, check_model_labels, clean_metrics, inference_spec, load_examples,
                           load_inference_model, predict_examples, showing_progress, subsample)
from bertkit.settings.config_io import split_override
from bertkit.tasks.common import TruncationWarning
from bertkit.tasks.tfidf_blend import BLEND_FILE
from bertkit.tasks.metrics import proportion_standard_error
from bertkit.runtime.process_group import init_distributed, leave

from bertkit.commands.options import (add_device, add_int8, add_no_blend, add_precision, add_progress, add_seed,
                                      add_set, add_task_module, baseline_text, resolve_models, rounded, running_in)


def add_arguments(parser) -> None:
    parser.add_argument("--model", required=True, help="fine-tuned model directory")
    parser.add_argument("--data", required=True, help="labelled data file, built-in NAME[:split], or "
                                                       "a data set in the local Hugging Face datasets cache "
                                                       "(default split: test), e.g. bbc")
    parser.add_argument("--task", choices=TASKS, help="default: the task the model was fine-tuned for")
    add_task_module(parser)
    add_set(parser, "data.eval_batch_size=16")
    add_int8(parser)
    add_device(parser)
    add_precision(parser)
    add_progress(parser)
    add_no_blend(parser)
    parser.add_argument("--limit", type=int, default=0,
                        help="evaluate on a seeded random subset of this many examples (0 = all)")
    add_seed(parser, "of the --limit subset; default 0")
    parser.add_argument("--allow-unseen-labels", action="store_true",
                        help="score data holding labels the model never saw (they count as errors) "
                             "instead of refusing it")
    parser.add_argument("--per-class", action="store_true",
                        help="classification: also each class's precision, recall, F1 and support (token "
                             "classification: each entity type's); a table with the TF-IDF baseline's F1 beside "
                             "(a tagger: its word lookup's), and \"per_class\" in the JSON line")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the baselines (classification, regression: the trivial one and TF-IDF + a "
                             "linear model, fitted again on the fine-tune's training data; other tasks: the "
                             "trivial one)")


def run(args) -> int:
    resolve_models(args)  # ORG/NAME: its snapshot in the local Hugging Face cache
    if args.limit < 0:
        raise ConfigError(f"--limit must be >= 0, got {args.limit}")
    # the device is checked here, before anything loads; under torchrun each process scores 1/W of the examples
    ctx = init_distributed(args.device or "auto")
    try:
        metrics, spec, examples, predictions = score(args, ctx)
    except BaseException:
        leave(ctx, wait=False)  # a peer may have failed too: do not wait for it
        raise
    leave(ctx)
    if ctx.is_main:
        print(f"{spec.task.name} on {args.data}: {len(examples)} examples")
        note = blend_note(args.model, spec)
        if note:
            print(note)
        line = clean_metrics({k: float(v) for k, v in metrics.items()})
        line, rival = with_baselines(args, spec, examples, predictions, line)
        if args.per_class:
            theirs = (rival[0], spec.task.per_class(examples, rival[1])) if rival else None
            line = {**line, "per_class": per_class_table(spec.task.per_class(examples, predictions), theirs)}
        print(model_line(args.data, spec.task, line, len(examples)))
        paired = ((line.get("baselines") or {}).get("tfidf") or {}).get("paired")
        if paired:
            print(paired_line(paired, len(examples)))
        print(json.dumps(line, ensure_ascii=False))
    return 0


def blend_note(model_dir: str, spec) -> str:
    """Whose scores follow: the encoder blended with its TF-IDF model, or the encoder alone (--no-blend, or no blend
    saved). Session 31 and walk Z scored the encoder alone from a copy of the run without tfidf_blend.*."""
    if spec.blend is not None:
        return (f"the model's scores are of its blend with TF-IDF ({spec.blend.settings}, chosen on dev by "
                "finetune --set train.blend_tfidf=true); --no-blend scores the encoder alone")
    if os.path.exists(os.path.join(model_dir, BLEND_FILE)):
        return "the encoder alone (--no-blend): its TF-IDF blend saved beside it is left out"
    return ""


def baseline_json(scores: dict) -> str:
    """A task's baseline row as evaluate prints it: its label (`baseline_label`), then JSON with every digit."""
    return baseline_text(scores, lambda rest: json.dumps(rest, ensure_ascii=False))


def with_baselines(args, spec, examples, predictions, line: dict) -> tuple[dict, tuple[str, list] | None]:
    """(the metrics line with "baselines" added, (name, predictions) of the baseline whose classes --per-class
    shows: TF-IDF's, else the task's own where it gives them (Task.baseline_predict), else None), each
    baseline printed (tasks/baseline.py `evaluation_baselines` fits them), or why it is missing."""
    if args.no_baseline:
        return line, None
    found = evaluation_baselines(args.model, spec, examples, predictions, line)
    if "trivial" in found.scores:
        print(baseline_json(found.scores["trivial"]))
    if "tfidf" in found.scores:
        print(describe({k: v for k, v in found.scores["tfidf"].items() if k != "paired"}))
    if "reference" in found.scores:
        print(describe_reference(found.scores["reference"]))
    if found.note:
        print(found.note)
    return ({**line, "baselines": found.scores} if found.scores else line), found.rival


# Metrics that are the share of examples scored right (QA's exact in percent): for these alone one
# standard error, sqrt(p(1-p)/n), says how far the score is from noise; F1, correlations and losses
# have no such simple formula.
PROPORTIONS = {"accuracy": 1.0, "exact_match": 1.0, "exact": 100.0}
# None: its "method" names it (the task's own baseline is a TF-IDF cosine for multiple choice, no trivial guess)
BASELINE_NAMES = {"tfidf": "TF-IDF", "reference": None, "trivial": None}


def _baseline_name(key: str, scores: dict) -> str:
    """A baseline's name in the model line: its key's, with its "method" beside, or the method alone
    (a task's own baseline: a tagger's word lookup, QA's sliding window; "trivial" where it names none)."""
    method = scores.get("method")
    if BASELINE_NAMES[key] is None:
        return method or key
    return f"{BASELINE_NAMES[key]} ({method})" if method else BASELINE_NAMES[key]


def model_line(data: str, task, line: dict, count: int) -> str:
    """The model's own score, labelled (the JSON line after it has the shape of finetune's dev
    scores, so the two were easy to mix up): the task's metrics, a proportion with its standard
    error over the `count` examples, then the baselines' value of the metric that selects the task's
    checkpoints (regression: mse, which the trivial mean has too; else the first)."""
    names = [name for name in task.metric_names if name in line] or [
        name for name, value in line.items() if isinstance(value, (int, float))]
    parts = []
    for name in names:
        value, scale = line[name], PROPORTIONS.get(name)
        error = ""
        if scale and isinstance(value, float) and count:
            error = (f" (± {scale * proportion_standard_error(value / scale, count):.2g}, one standard error "
                     f"over {count} examples)")
        parts.append(f"{name}={rounded(value)}{error}")
    first = task.default_metric if task.default_metric in names else (names[0] if names else None)
    baselines = line.get("baselines") or {}
    shown = [f"{_baseline_name(key, baselines[key])} {rounded(baselines[key][first])}"
             for key in BASELINE_NAMES if (baselines.get(key) or {}).get(first) is not None]
    chance = (baselines.get("trivial") or {}).get("chance") or {}  # QA: a random span's expected score
    if chance.get(first) is not None:
        shown.append(f"chance ({chance['method']}) {rounded(chance[first])}")
    return f"model on {data}: {', '.join(parts)}" + (f"; baselines' {first}: {', '.join(shown)}" if shown else "")


def paired_line(paired: dict, count: int) -> str:
    """Whether the lead over TF-IDF is more than the draw of examples, in words."""
    return (f"model - TF-IDF accuracy: {paired['difference']:+.4g} (± {paired['standard_error']:.2g}, one standard "
            f"error of the paired difference over {count} examples; right where the other is wrong: the model on "
            f"{paired['only_ours']}, TF-IDF on {paired['only_theirs']})")


def per_class_table(report: dict, rival: tuple[str, dict] | None = None) -> dict:
    """The task's per-class report (precision, recall, F1, support = gold count) printed as a
    table, most frequent class first, with a baseline's F1 beside it when `rival` (its name, its
    report) is given (TF-IDF, a tagger's word lookup), then the classes of the file the model never
    gets right; returned as JSON holds it."""
    order = sorted(report, key=lambda label: (-report[label]["support"], str(label)))
    width = max(len(str(label)) for label in order)
    name, theirs = rival or ("", None)
    header = f"  {name} f1" if theirs is not None else ""
    print(f"{'class':<{width}}  precision  recall     f1  support{header}")
    for label in order:
        row = report[label]
        scores = f"{row['precision']:9.3f}  {row['recall']:6.3f}  {row['f1']:5.3f}"
        beside = f"  {theirs.get(label, {}).get('f1', 0.0):{len(header) - 2}.3f}" if theirs is not None else ""
        print(f"{label!s:<{width}}  {scores}  {row['support']:7d}{beside}")
    present = [label for label in order if report[label]["support"]]
    missed = [label for label in present if report[label]["recall"] == 0]
    if missed:
        shown = ", ".join(f"{label} ({report[label]['support']})" for label in missed[:10])
        print(f"{len(missed)} of the {len(present)} classes in the file never right (recall 0; gold count): "
              f"{shown}{', ...' if len(missed) > 10 else ''}")
    return {str(label): clean_metrics(report[label]) for label in order}


def score(args, ctx):
    """(metrics, spec, examples, predictions) of the model on the data; under torchrun from this
    rank's share."""
    spec = inference_spec(args.model, args.task, args.set)
    if args.no_blend:
        spec.blend = None
    if args.per_class and spec.task.per_class is None:
        raise ConfigError(f"--per-class scores the classes of (multi-label) classification and the entity types "
                          f"of token classification; this is a {spec.task.name} model: drop --per-class")
    examples = load_examples(spec.task, args.data, "test", spec.data)  # bad data refused before the model loads
    if not examples:
        raise DataError(f"{args.data}: no examples to evaluate")
    model, tokenizer = load_inference_model(args.model, spec)
    model = inference_copy(model, tokenizer, args.int8, ctx.device, args.precision)
    examples = subsample(examples, args.limit, args.seed or 0)
    unseen = check_model_labels(model, spec, examples, args.data, allow=args.allow_unseen_labels)
    if unseen and ctx.is_main:
        print(f"{len(unseen)} label(s) the model never saw ({', '.join(unseen[:10])}"
              f"{', ...' if len(unseen) > 10 else ''}): counted as errors", file=sys.stderr)
    bar = "evaluate" if ctx.is_main and not args.no_progress else None  # one bar, rank 0's
    with running_in(args, ctx.device), warnings.catch_warnings(), showing_progress(bar):
        if not any(split_override(item)[0] == "data.max_length" for item in args.set):
            # the length the model was fine-tuned at: texts are cut as they were in training
            warnings.simplefilter("ignore", TruncationWarning)
        predictions = predict_examples(model, tokenizer, spec, examples, name=args.data, ctx=ctx)
    return spec.task.metrics(examples, predictions), spec, examples, predictions
