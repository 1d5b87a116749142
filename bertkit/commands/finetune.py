"""`bertkit finetune --task T --model DIR --train DATA --dev DATA --out DIR`: fine-tune an encoder.

DATA is a file (CSV/TSV/JSONL for classification and regression, CoNLL for token
classification, SQuAD JSON for QA, JSONL for multiple choice) or a built-in real data set
(bbc, wordnet-supersense, wordnet-tagging, wordnet-qa, wordnet-usage-qa, wordnet-gloss-choice,
wordnet-reverse-dictionary, wordnet-definitions;
optionally NAME:train|dev|test), or a data set in the local Hugging Face datasets cache
(NAME[:SPLIT], NAME:CONFIG:SPLIT; bertkit/tasks/hub_datasets.py). Settings come from `--config FILE.toml` (sections [data],
[train], [model], [peft]) and `--set section.key=value`, e.g.
`--set train.epochs=3 train.lr=5e-5 train.patience=2 data.max_length=256`.
The recipe is bertkit/recipes/finetune.py; the tasks are bertkit/tasks/registry.py.
"""

from __future__ import annotations

import json

from bertkit.recipes.finetune import finetune, section_keys
from bertkit.tasks import BUILTIN_DATA, TASKS
from bertkit.settings.config_io import apply_overrides, load_toml

from bertkit.commands.options import add_device, add_progress, add_seed, add_set, metrics_text, resolve_models, rounded, typed_settings


def add_arguments(parser) -> None:
    parser.add_argument("--task", required=True, choices=TASKS)
    parser.add_argument("--model", required=True,
                        help="pre-trained model directory (weights + tokenizer), or ORG/NAME in the local Hugging "
                             "Face cache")
    parser.add_argument("--train", required=True, help="training data file, built-in: " + ", ".join(BUILTIN_DATA)
                        + ", or a data set in the local Hugging Face datasets cache (NAME[:SPLIT])")
    parser.add_argument("--dev", help="dev data file (picks the best checkpoint); default with built-in "
                                      "data: its dev split, with a cached data set: its validation split")
    parser.add_argument("--out", required=True, help="output directory: the best model ends here")
    parser.add_argument("--config", help="TOML recipe with [data], [train], [model] sections "
                                         "(e.g. configs/finetune-bbc.toml; default: the built-in settings)")
    add_set(parser, "train.epochs=3 data.max_length=128 train.llrd=0.9")
    add_seed(parser)
    add_device(parser, "train.device, else auto")
    parser.add_argument("--peft", choices=("lora", "adapter", "prefix"),
                        help="train only a LoRA / bottleneck adapter / prefix (and the head) on the frozen "
                             "model; OUT is then a small adapter directory. Settings: --set peft.r=16 "
                             "'peft.target_modules=[\"query\",\"value\"]' peft.kind=pfeiffer "
                             "peft.num_virtual_tokens=20 (see bertkit/peft)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a model already in --out (the old one stays until the new run succeeds)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --out from its newest checkpoint, with the same options")
    add_progress(parser)


def run(args) -> int:
    resolve_models(args)  # ORG/NAME: its snapshot in the local Hugging Face cache
    sections = load_toml(args.config) if args.config else {}
    assignments = list(args.set) + typed_settings(args) + ([("peft.method", args.peft)] if args.peft else [])
    sections = apply_overrides(sections, assignments, section_keys())
    summary = finetune(args.task, args.model, args.train, args.dev, args.out, sections,
                       overwrite=args.overwrite, progress=not args.no_progress, resume=args.resume)
    if not summary:  # a non-zero rank of a distributed run
        return 0
    best = summary["best_dev"]
    print(f"best dev {summary['select_metric']} = {rounded(best.get(summary['select_metric']))} at step "
          f"{summary['best_step']} of {summary['steps']} ({summary['epochs_run']:.2f} epochs, "
          f"{summary['wall_time_s']} s); trivial baseline: {metrics_text(summary['dev_baseline'])}")
    print(f"model saved in {args.out}")
    print(json.dumps(best))
    return 0
