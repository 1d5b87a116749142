"""`bertkit distill --teacher DIR --out DIR --task classification --train DATA`: a smaller copy.

Task-specific distillation (DistilBERT's recipe on a fine-tuned teacher): the student is the
teacher with every other layer (`--layers N` or `--layer-map 1,3,5` to choose), trained with

    loss = alpha * CE(student, labels) + (1 - alpha) * T^2 * KL(teacher_T || student_T)

by the fine-tuning recipe (same data sources, `--config` / `--set` sections [data], [train],
[model], dev evaluation and best-model keeping as `bertkit finetune`). OUT is a fine-tuned
model like any other (evaluate/predict/transformers read it). `--test DATA` then compares
teacher and student on DATA (or a seeded subset of `--limit` examples): the task metrics and
the inference time (median of `--speed-repeats` alternating passes over the same inputs). Token
classification and QA (`--task token-classification|qa`) distil the teacher's per-token tag
distributions and its start/end distributions (bertkit/distill/tasks.py). See
bertkit/recipes/distill.py.
"""

from __future__ import annotations

import json
import os

from bertkit.errors import ConfigError, DataError
from bertkit.recipes.distill import DISTILLABLE, compare_on_test, distill_finetuned, distill_pretraining
from bertkit.recipes.finetune import section_keys
from bertkit.settings.config_io import apply_overrides, load_toml
from bertkit.tasks import SUMMARY_FILE, load_examples, read_spec
from bertkit.tasks.baseline import describe, recorded_result

from bertkit.commands.options import (add_device, add_progress, add_seed, add_set, baseline_text, longer_run,
                                      metrics_text, not_ahead, resolve_models, rounded, standing, stopped_by,
                                      typed_settings)

# --stage pretrain options and the [distil] keys they set
PRETRAIN_WEIGHTS = {"alpha_ce": "distil.alpha_ce", "alpha_mlm": "distil.alpha_mlm", "alpha_cos": "distil.alpha_cos"}


def add_arguments(parser) -> None:
    parser.add_argument("--stage", choices=("task", "pretrain"), default="task",
                        help="task: a fine-tuned teacher on labelled data; pretrain: an MLM teacher on a corpus "
                             "(DistilBERT's triple loss, the pre-training recipe)")
    parser.add_argument("--teacher", required=True, help="fine-tuned model directory (bertkit finetune output); "
                                                         "--stage pretrain: an MLM checkpoint")
    parser.add_argument("--out", required=True, help="output directory: the best student ends here")
    parser.add_argument("--task", choices=DISTILLABLE,
                        help="the teacher's task (default: the one it was fine-tuned for)")
    parser.add_argument("--train", help="training data file, or built-in: bbc, wordnet-supersense, "
                                        "wordnet-tagging, wordnet-qa (--stage task; required there)")
    parser.add_argument("--dev", help="dev data (picks the best checkpoint); default with built-in data: its dev split")
    layers = parser.add_mutually_exclusive_group()
    layers.add_argument("--layers", type=int, help="student layers, taken from every other teacher layer "
                                                   "(default: half the teacher's)")
    layers.add_argument("--layer-map", help="teacher layer of each student layer, e.g. 1,3,5")
    parser.add_argument("--student", help="--stage task: start from this fine-tuned model (same task and labels, "
                                          "e.g. a layer-distilled student) instead of the teacher's layers")
    parser.add_argument("--alpha", type=float, default=0.5, help="weight of the label loss (1 - alpha: the teacher's)")
    parser.add_argument("--temperature", type=float, help="softmax temperature of the KL term (default 2)")
    for name, key in PRETRAIN_WEIGHTS.items():
        parser.add_argument("--" + name.replace("_", "-"), type=float,
                            help=f"--stage pretrain: the weight {name} (default: the recipe's {key}; DistilBERT's 5, 2, 1)")
    parser.add_argument("--config", help="TOML recipe with [data], [train], [model] sections (as bertkit finetune); "
                                         "--stage pretrain: a pre-training recipe (as bertkit pretrain); default: the built-in settings")
    parser.add_argument("--resume", action="store_true", help="continue the stopped run in --out from its newest "
                                                              "checkpoint, with the same options")
    add_set(parser, "train.epochs=3 train.lr=1e-4 data.max_length=128")
    add_seed(parser)
    add_device(parser, "train.device, else auto")
    parser.add_argument("--test", help="labelled data to compare teacher and student on, e.g. bbc:test or "
                                       "wordnet-tagging:test")
    parser.add_argument("--limit", type=int, default=0,
                        help="--test on a seeded random subset of this many examples, as bertkit evaluate --limit "
                             "(0 = all)")
    parser.add_argument("--speed-repeats", type=int, default=3,
                        help="timed passes per model for the --test speed comparison (median reported)")
    parser.add_argument("--compare-only", action="store_true",
                        help="no training: compare the student already in --out with the teacher on --test")
    parser.add_argument("--overwrite", action="store_true", help="replace a model already in --out")
    add_progress(parser)


def parse_layer_map(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--layer-map expects comma-separated layer numbers such as 1,3,5, got {text!r}") from None


def run(args) -> int:
    resolve_models(args)  # ORG/NAME: its snapshot in the local Hugging Face cache
    if args.layers is not None and args.layers < 1:  # (0 read as "not given": the default 3 layers, silently)
        raise ConfigError(f"--layers must be at least 1, got {args.layers}")
    if args.stage == "pretrain":
        return run_pretrain_stage(args)
    if not args.train:
        raise ConfigError("--stage task needs --train DATA (the data the teacher was fine-tuned on)")
    given = [name for name in PRETRAIN_WEIGHTS if getattr(args, name) is not None]
    if given:
        raise ConfigError(f"--{', --'.join(n.replace('_', '-') for n in given)} belong to --stage pretrain; "
                          "task distillation weighs its terms with --alpha")
    if args.temperature is None:
        args.temperature = 2.0
    if args.limit < 0:
        raise ConfigError(f"--limit must be >= 0, got {args.limit}")
    if args.speed_repeats < 1:  # else refused by compare_speed only after the whole distillation
        raise ConfigError(f"--speed-repeats must be at least 1, got {args.speed_repeats}")
    if args.compare_only:
        if not args.test:
            raise ConfigError("--compare-only needs --test DATA (e.g. bbc:test)")
        # else "no config file at OUT", the student unnamed
        if not os.path.isfile(os.path.join(args.out, SUMMARY_FILE)):
            raise ConfigError(f"--compare-only compares the student already in --out, and {args.out} holds no "
                              "distilled model; run the same command without --compare-only first")
        report_test(args)
        return 0
    if args.test:
        check_test_data(args)
    sections = load_toml(args.config) if args.config else {}
    assignments = list(args.set) + typed_settings(args)
    sections = apply_overrides(sections, assignments, section_keys())
    task = args.task or read_spec(args.teacher).task  # the teacher's own task
    summary = distill_finetuned(task, args.teacher, args.train, args.dev, args.out, sections,
                                num_layers=args.layers, layer_map=parse_layer_map(args.layer_map),
                                alpha=args.alpha, temperature=args.temperature, overwrite=args.overwrite,
                                progress=not args.no_progress, student_dir=args.student, resume=args.resume)
    if not summary:  # a non-zero rank of a distributed run
        return 0
    report_student(summary, args.out)
    if args.test:
        report_test(args)
    return 0


def report_student(summary: dict, out: str) -> None:
    """The student's best dev score beside the dev baselines finetune fitted (trivial, TF-IDF), and
    the hints a newcomer needs: the run printed the score alone, so a student behind TF-IDF on dev,
    or one still improving at its last evaluation, was not said (finetune says both)."""
    info, metric = summary["distillation"], summary["select_metric"]
    ours = summary["best_dev"].get(metric)
    print(f"student: teacher layers {info['layer_map']} of {info['teacher_layers']}, "
          f"{info['student_parameters'] / 1e6:.1f}M of the teacher's {info['teacher_parameters'] / 1e6:.1f}M "
          f"parameters; best dev {metric} = {rounded(ours)} at step {summary['best_step']} "
          f"({summary['wall_time_s']} s)" + (f"; {baseline_text(summary['dev_baseline'])}"
                                              if summary.get("dev_baseline") else ""))
    tfidf = summary.get("tfidf_baseline")
    if tfidf is not None:
        print(tfidf.get("note") or describe(recorded_result(tfidf)))
    theirs = (recorded_result(tfidf) or {}).get(metric)
    if not_ahead(summary, theirs):
        print(f"{standing('TF-IDF', summary, theirs, 'the student')}: try a longer run or more student layers "
              "(--layers)")
    trained = [row for row in summary.get("dev_history") or [] if row["step"] > 0]
    if trained and summary["best_step"] == trained[-1]["step"] and stopped_by(summary) != "patience":
        print(f"the best dev {metric} came at the last evaluation, so the student may still be improving: try "
              f"{longer_run(summary)}")
    print(f"model saved in {out}")


def run_pretrain_stage(args) -> int:
    """--stage pretrain: the options become [distil] overrides for the pre-training recipe."""
    unused = [flag for flag, value in (("--train", args.train), ("--dev", args.dev), ("--test", args.test),
                                       ("--compare-only", args.compare_only), ("--overwrite", args.overwrite),
                                       ("--student", args.student), ("--limit", args.limit))
              if value] + (["--task"] if args.task is not None else [])
    if unused:
        raise ConfigError(f"{', '.join(unused)} belong to --stage task; the pre-training stage reads its corpus "
                          "from [data] (e.g. --set data.corpus=bbc) and continues a run with --resume")
    assignments = list(args.set) + typed_settings(args)
    for name, key in PRETRAIN_WEIGHTS.items():
        if getattr(args, name) is not None:
            assignments.append((key, getattr(args, name)))
    if args.temperature is not None:
        assignments.append(("distil.temperature", args.temperature))
    if args.layers is not None:
        assignments.append(("distil.student_layers", args.layers))
    if args.layer_map is not None:
        assignments.append(("distil.layer_map", parse_layer_map(args.layer_map)))
    result = distill_pretraining(args.teacher, args.out, args.config, assignments, resume=args.resume,
                                 progress=not args.no_progress)
    metrics = result["metrics"]
    if metrics:
        print(f"final: {metrics_text(metrics)}")
    print(f"student saved in {result['student']}")
    return 0


def check_test_data(args) -> None:
    """--test read before the distillation, as the teacher's task reads it: a typo or a bad file
    there was reported only after hours of training, the student already saved."""
    spec = read_spec(args.teacher)
    if not load_examples(args.task or spec.task, args.test, "test", spec.data):
        raise DataError(f"--test {args.test}: no examples to compare teacher and student on")


def report_test(args) -> None:
    result = compare_on_test(args.teacher, args.out, args.test, args.speed_repeats, limit=args.limit,
                             seed=args.seed or 0)
    for name in ("teacher", "student"):
        print(f"{name:>8} on {args.test}: {json.dumps(result[name], ensure_ascii=False)}; "
              f"{result['median_seconds'][name]:.2f} s per pass (median of {args.speed_repeats})")
    retained = ", ".join(f"{k} {v:.3f}" for k, v in result.get("retained", {}).items())
    pair = result["speedup_per_pair"]
    print(f"student/teacher: {retained}; speed-up {result['speedup']:.2f}x (ratio of medians; per "
          f"alternating pair: median {pair['median']:.2f}x, range {pair['min']:.2f}-{pair['max']:.2f}x) over "
          f"{result['examples']} examples ({result['features']} inputs), batch {result['batch_size']}, "
          f"max_length {result['max_length']}, "
          f"{result['threads']} thread(s)")
    own = read_spec(args.teacher).data.max_length
    if own != result["max_length"]:  # the teacher's score above is then not the one evaluate gives it
        print(f"both were scored and timed at the student's data.max_length {result['max_length']}; the teacher was "
              f"fine-tuned at {own}: its own score is `bertkit evaluate --model {args.teacher} --data {args.test}`")
