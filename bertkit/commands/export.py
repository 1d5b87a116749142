"""`bertkit export --model DIR --out DIR --format onnx [--task TASK]`: a model for another runtime.

Writes DIR/model.onnx (dynamic batch and sequence axes), the tokenizer files and config.json,
then checks ONNX Runtime against bertkit on three batch shapes (bertkit/inference/onnx.py; the
graph of a task comes from its registry entry, bertkit/tasks/export.py).
Needs the optional extra: pip install bertkit[onnx].
"""

from __future__ import annotations

from bertkit.commands.options import add_task_module, resolve_models
from bertkit.tasks.export import export_directory, export_names


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


def run(args) -> int:
    resolve_models(args)  # ORG/NAME: its snapshot in the local Hugging Face cache
    result = export_directory(args.model, args.out, task=args.task, verify=not args.no_verify)
    print(f"wrote {result.task} graph to {result.path}")
    if result.max_difference is not None:
        print(f"ONNX Runtime vs bertkit on three batch shapes: max |difference| {result.max_difference:.1e}")
    return 0
