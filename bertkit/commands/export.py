"""`bertkit export --model DIR --out DIR --format onnx [--task TASK]`: a model for another runtime.

Writes DIR/model.onnx (dynamic batch and sequence axes), the tokenizer files and config.json,
then checks ONNX Runtime against bertkit on three batch shapes (bertkit/inference/onnx.py; the
graph of a task comes from its registry entry, bertkit/tasks/export.py).
Needs the optional extra: pip install bertkit[onnx].
"""

from __future__ import annotations

import os

from bertkit.commands.options import add_task_module, resolve_models
from bertkit.errors import ConfigError
from bertkit.models.checkpoint import WEIGHT_FILES
from bertkit.runtime.run_dir import check_apart
from bertkit.tasks.export import DECISION_FILE, export_directory, export_names
from bertkit.tasks.tfidf_blend import BLEND_FILE


def add_arguments(parser) -> None:
    parser.add_argument("--model", required=True, help="model directory (weights + tokenizer)")
    parser.add_argument("--out", required=True, help="output directory (model.onnx, tokenizer, config.json)")
    parser.add_argument("--format", choices=["onnx"], default="onnx", help="the target format")
    parser.add_argument("--task", choices=export_names(),
                        help="what the graph computes; default: the head the model was saved with "
                             "(a bare encoder: embedding = mean pooling + L2)")
    add_task_module(parser)
    parser.add_argument("--no-verify", action="store_true",
                        help="skip running the export in ONNX Runtime against bertkit")
    parser.add_argument("--overwrite", action="store_true", help="replace the files of a model already in --out")


# what a directory holding a model (or an earlier export) has: the export writes its own over them
MODEL_FILES = ("config.json", "model.onnx", "tokenizer.json") + WEIGHT_FILES


def check_out(args) -> None:
    """Before any work: --out apart from --model (it would rewrite the model's config and
    tokenizer), a directory, and not another model's (its config.json and tokenizer files would be
    replaced under its weights) unless --overwrite."""
    check_apart(args.model, args.out)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ConfigError(f"--out {args.out} is a file, not a directory; choose a directory for the export")
    held = [name for name in MODEL_FILES if os.path.isfile(os.path.join(args.out, name))]
    if held and not args.overwrite:
        raise ConfigError(f"--out {args.out} already holds a model or an export ({', '.join(held)}); choose a new "
                          "directory, or pass --overwrite to replace its files")


def run(args) -> int:
    resolve_models(args)  # ORG/NAME: its snapshot in the local Hugging Face cache
    check_out(args)
    result = export_directory(args.model, args.out, task=args.task, verify=not args.no_verify)
    print(f"wrote {result.task} graph to {result.path}")
    if os.path.isfile(os.path.join(args.model, BLEND_FILE)):
        print(f"note: the graph is the encoder alone; {args.model}'s TF-IDF blend ({BLEND_FILE}) is not in it, so its "
              "scores are those of the encoder, not of bertkit predict (docs/finetune.md, \"Blending with TF-IDF\")")
    if result.threshold is not None:
        print(f"note: the graph gives logits; bertkit predict puts a label in the set at sigmoid(logit) >= "
              f"{result.threshold:g} (chosen on dev), written beside the graph in {DECISION_FILE}: decide so too")
    if result.max_difference is not None:
        print(f"ONNX Runtime vs bertkit on three batch shapes: max |difference| {result.max_difference:.1e}")
    return 0
