"""`bertkit evaluate --model DIR --data DATA`: metrics of a fine-tuned model, as JSON.

The task and the input settings (max_length, columns, QA windows) are read from the model's
finetune_summary.json, else from its config.json; `--task` and `--set data.key=value` override
them. The last line of stdout is one JSON object of metrics, e.g. {"accuracy": 0.97, ...}.
"""

from __future__ import annotations

import json

HELP = "evaluate a fine-tuned model on labelled data; the last stdout line is the metrics as JSON"


def add_arguments(parser) -> None:
    from bertkit.tasks.features import TASKS

    parser.add_argument("--model", required=True, help="fine-tuned model directory")
    parser.add_argument("--data", required=True, help="labelled data file, or built-in NAME[:split] "
                                                       "(default split: test), e.g. bbc")
    parser.add_argument("--task", choices=TASKS, help="default: the task the model was fine-tuned for")
    parser.add_argument("--set", nargs="+", action="extend", default=[], metavar="data.KEY=VALUE",
                        help="override input settings, e.g. data.eval_batch_size=16")
    parser.add_argument("--int8", action="store_true",
                        help="int8 linear layers (faster on CPU; accuracy change measured in docs/inference.md)")
    parser.add_argument("--limit", type=int, default=0,
                        help="evaluate on a seeded random subset of this many examples (0 = all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the --limit subset")


def check_model_labels(model, spec, examples, source: str) -> list:
    """Labels in the data that the model cannot predict -> DataError listing them."""
    from bertkit.errors import DataError
    from bertkit.tasks.predict import model_labels

    if spec.kind in ("regression", "qa"):
        return examples
    known = set(model_labels(model))
    if spec.kind == "multilabel":
        import dataclasses
        examples = [dataclasses.replace(e, label=e.label if isinstance(e.label, list) else [e.label])
                    for e in examples]
    if spec.kind == "tagging":
        found = {tag for e in examples for tag in e.tags}
    else:
        found = set()
        for e in examples:
            found.update(e.label if isinstance(e.label, list) else [e.label])
    unknown = sorted(str(x) for x in found - known)
    if unknown:
        shown = ", ".join(repr(x) for x in unknown[:20]) + (f" and {len(unknown) - 20} more" if len(unknown) > 20 else "")
        raise DataError(f"{source} has {len(unknown)} label(s) the model never saw: {shown}; the model knows "
                        f"{len(known)} labels ({', '.join(sorted(known)[:10])}{', ...' if len(known) > 10 else ''}); "
                        "evaluate on data with the model's label set, or fine-tune on these labels")
    return examples


def load_for_inference(args):
    """(model, tokenizer, spec) of args.model with args.task / --set data overrides applied."""
    import dataclasses

    from bertkit.tasks.features import DataConfig
    from bertkit.tasks.predict import load_model, read_spec
    from bertkit.tokenizer import Tokenizer
    from bertkit.train.config_io import apply_overrides, dataclass_from_dict

    spec = read_spec(args.model, args.task)
    fields = [f.name for f in dataclasses.fields(DataConfig)]
    overrides = apply_overrides({}, args.set, {"data": fields}).get("data", {})
    if overrides:
        spec.data = dataclass_from_dict(DataConfig, {**spec.data.to_dict(), **overrides}, "data")
    model = load_model(args.model, spec.task)
    tokenizer = Tokenizer.from_pretrained(args.model)
    return model, tokenizer, spec


def run(args) -> int:
    from bertkit.errors import ConfigError, DataError
    from bertkit.fastpath import pack_for_cpu
    from bertkit.quantize import quantize_int8
    from bertkit.tasks.features import subsample
    from bertkit.tasks.finetune import load_examples
    from bertkit.tasks.predict import evaluate_examples, json_float

    model, tokenizer, spec = load_for_inference(args)
    # an inference copy: int8, or fp32 with oneDNN-packed weights (same numbers, faster on CPU)
    model = quantize_int8(model, tokenizer) if args.int8 else pack_for_cpu(model)
    examples = load_examples(spec.task, args.data, "test", spec.data)
    if not examples:
        raise DataError(f"{args.data}: no examples to evaluate")
    if args.limit < 0:
        raise ConfigError(f"--limit must be >= 0, got {args.limit}")
    examples = subsample(examples, args.limit, args.seed)
    examples = check_model_labels(model, spec, examples, args.data)
    metrics = evaluate_examples(model, tokenizer, spec, examples, name=args.data)
    print(f"{spec.task} ({spec.kind}) on {args.data}: {len(examples)} examples")
    print(json.dumps({k: json_float(v) for k, v in metrics.items()}))
    return 0
