"""`bertkit peft merge|info`: work with adapter directories (bertkit.peft).

    bertkit peft merge --model ADAPTER_DIR [--base BASE_DIR] --out DIR [--overwrite]
        LoRA only: fold W += (alpha / r) B A into the base weights and write a plain checkpoint
        (config.json, model.safetensors, tokenizer files) that loads in bertkit and in the
        matching transformers class. --base defaults to the base recorded in the adapter. --out
        must be empty or new (--overwrite replaces it whole) and apart from the adapter and base.
    bertkit peft info --model ADAPTER_DIR (or: bertkit peft info ADAPTER_DIR)
        method, settings, what it changes, its base and its size.
"""

from __future__ import annotations

import json
import os
import shutil

from bertkit.errors import CheckpointError
from bertkit.io import atomic_directory
from bertkit.peft import load_peft_model, read_adapter_config
from bertkit.runtime.run_dir import check_apart
from bertkit.tasks.common import SUMMARY_FILE
from bertkit.tasks.tfidf_blend import ARRAYS_FILE, BLEND_FILE
from bertkit.tokenizer import Tokenizer
from bertkit.commands.options import add_model_dir, resolve_models


TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json")


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="peft_command", metavar="ACTION", required=True)
    merge = sub.add_parser("merge", help="fold a LoRA adapter into its base: a plain model directory",
                           description="fold a LoRA adapter into its base: a plain model directory")
    merge.add_argument("--model", required=True, help="adapter directory (adapter_config.json + weights)")
    merge.add_argument("--base", help="base model directory (default: the one recorded in the adapter)")
    merge.add_argument("--out", required=True, help="where to write the merged model directory")
    merge.add_argument("--overwrite", action="store_true",
                       help="replace a non-empty --out whole (its old files go, once the merged model is written)")
    merge.add_argument("--no-check-base", action="store_true",
                       help="merge even if the base weights differ from those the adapter was trained on")
    info = sub.add_parser("info", help="show an adapter directory's method, settings, base and size",
                          description="show an adapter directory's method, settings, base and size")
    add_model_dir(info, "adapter directory")
    info.add_argument("--json", action="store_true", help="print one JSON object")


def run(args) -> int:
    resolve_models(args)  # ORG/NAME: its snapshot in the local Hugging Face cache
    if args.peft_command == "merge":
        return merge(args)
    return info(args)


def merge(args) -> int:
    check_apart(args.model, args.out)
    peft = load_peft_model(args.model, args.base, check_base=not args.no_check_base)
    peft._check_mergeable(peft.active_adapter)  # a clear message for adapters / prefixes, before work
    base = args.base or peft.base_model_path
    if base:  # the base is only read: writing over it would change every adapter trained on it
        check_apart(base, args.out, "base")
    _refuse_a_model_in(args.out, args.overwrite)
    tokenizer = _tokenizer(args.model) or _tokenizer(base)
    plain = peft.merge_and_unload()
    with atomic_directory(args.out, prefix=f".{os.path.basename(os.path.abspath(args.out))}.new-") as tmp:
        plain.save_pretrained(tmp, tokenizer=tokenizer)  # whole, or --out as it was
        summary = os.path.join(args.model, SUMMARY_FILE)
        if os.path.isfile(summary):  # the fine-tune's task and data settings (max_length, ...) that
            shutil.copy2(summary, tmp)  # evaluate and predict read: without them, other predictions
        for name in (ARRAYS_FILE, BLEND_FILE):  # a classifier's TF-IDF blend (train.blend_tfidf): the same
            if os.path.isfile(os.path.join(args.model, name)):  # predictions again
                shutil.copy2(os.path.join(args.model, name), tmp)
    size = os.path.getsize(os.path.join(args.out, "model.safetensors"))
    print(f"merged {peft.peft_configs[peft.active_adapter].method} adapter {args.model} and its base "
          f"{peft.base_model_path} into {os.path.abspath(args.out)}: {type(plain).__name__}, {size / 1e6:.1f} MB")
    if tokenizer is None:
        print("note: no tokenizer files in the adapter or base directory; copy them next to the model")
    return 0


def _refuse_a_model_in(out: str, overwrite: bool) -> None:
    """A non-empty --out (another model, a run's files) is replaced whole only with --overwrite."""
    held = sorted(os.listdir(out)) if os.path.isdir(out) else []
    if os.path.exists(out) and not os.path.isdir(out):
        raise CheckpointError(f"--out {out} is a file, not a directory; choose another --out")
    if held and not overwrite:
        raise CheckpointError(f"--out {out} is not empty ({', '.join(held[:3])}{', ...' if len(held) > 3 else ''}); "
                              "choose a new --out directory, or pass --overwrite to replace it whole")


def _tokenizer(directory):
    if not directory or not any(os.path.isfile(os.path.join(directory, f)) for f in TOKENIZER_FILES):
        return None
    return Tokenizer.from_pretrained(directory)


def info(args) -> int:
    meta, _ = read_adapter_config(args.model)
    size = os.path.getsize(meta["weights_file"])
    if args.json:
        print(json.dumps({**meta, "file_bytes": size}, ensure_ascii=False))
        return 0
    print(f"adapter: {args.model}")
    targets = meta["targets"]
    # the modules it changes and saves have lines of their own below: listed once, not also as settings
    shown_below = {"modules_to_save", "target_modules"} if targets else {"modules_to_save"}
    settings = {k: v for k, v in meta["peft_config"].items() if k not in shown_below}
    print(f"method: {meta['method']} ({', '.join(f'{k}={v}' for k, v in settings.items())})")
    print(f"task: {meta['task_class']}; saved modules: {', '.join(meta['modules_to_save']) or '(none)'}")
    if targets:  # (PEFT's prefix directories do not list them: every layer's attention)
        print(f"changes {len(targets)} modules: {', '.join(targets[:4])}{', ...' if len(targets) > 4 else ''}")
    fingerprint = meta["base_fingerprint"][:12] if meta["base_fingerprint"] else "not recorded"
    print(f"base: {meta['base_model'] or '(not recorded)'} (fingerprint {fingerprint})")
    print(f"parameters: {meta['parameters']:,} ({size / 1e6:.2f} MB on disk)")
    return 0
