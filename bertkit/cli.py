"""`bertkit <command>`: one entry point; each command lives in `bertkit/commands/<name>.py`.

A command module provides `HELP` (one line), `add_arguments(parser)` and `run(args) -> int`.
Adding a command is one line in COMMANDS plus its module.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .errors import BertkitError

# command name -> module under bertkit.commands
COMMANDS = {
    "quickstart": "quickstart",
    "info": "info",
    "tokenize": "tokenize",
    "embed": "embed",
    "tokenizer": "tokenizer",
    "prepare": "prepare",
    "pretrain": "pretrain",
    "fill-mask": "fill_mask",
    "peft": "peft",
    "finetune": "finetune",
    "evaluate": "evaluate",
    "predict": "predict",
    "distill": "distill",
    "attention": "attention",
    "probe": "probe",
    "scale": "scale",
    "export": "export",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bertkit", description="Toolkit for BERT-family encoders.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"bertkit.commands.{module_name}")
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """Warnings from a command are notes to its user: one line, without the source line that
    Python's default format echoes (`warnings.warn(...)` inside bertkit means nothing to them)."""
    return f"bertkit: {category.__name__}: {message}\n"


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit code (2 for a user error, printed as one line)."""
    import warnings

    args = build_parser().parse_args(argv)
    warnings.formatwarning = _one_line_warning
    try:
        return int(args._run(args) or 0)
    except BertkitError as e:  # a user mistake: one line that says what to do, no traceback
        print(f"bertkit {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"bertkit {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
