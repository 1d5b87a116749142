"""`bertkit <command>`: one entry point; each command lives in `bertkit/commands/<name>.py`.

A command module provides `HELP` (one line), `add_arguments(parser)` and `run(args) -> int`.
Adding a command is one line in COMMANDS plus its module.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings

import torch

from bertkit.runtime import job_warnings
from bertkit.errors import BertkitError
from bertkit.io import describe_os_error
from bertkit.runtime.threads import default_threads

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
# Commands that run a model get --threads (`scale` has its own, defaulting to torch's choice).
THREADED = ("quickstart", "embed", "pretrain", "fill-mask", "finetune", "evaluate", "predict", "distill",
            "attention", "probe")


def _thread_count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return int(text)


class _Parser(argparse.ArgumentParser):
    """Rejects unknown arguments itself. argparse hands a subcommand's leftovers up to the top-level
    parser, whose error would show `bertkit [-h] COMMAND ...` instead of the subcommand's usage.
    Sub-parsers inherit the class (add_subparsers defaults parser_class to the parent's)."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="bertkit", description="Toolkit for BERT-family encoders.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"bertkit.commands.{module_name}")
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
        if name in THREADED:
            command.add_argument("--threads", type=_thread_count, default=None,
                                 help="torch intra-op threads (default: OMP_NUM_THREADS if set, else the "
                                      "cores this process may use)")
    return parser


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """Warnings from a command are notes to its user: one line, without the source line that
    Python's default format echoes (`warnings.warn(...)` inside bertkit means nothing to them)."""
    return f"bertkit: {category.__name__}: {message}\n"


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit code (2 for a user error, printed as one line)."""
    args = build_parser().parse_args(argv)
    warnings.formatwarning = _one_line_warning
    before = torch.get_num_threads()
    if args.command in THREADED:
        torch.set_num_threads(args.threads or default_threads())
    shown_by = job_warnings.install()  # each warning once per job, rank 0 only
    try:
        return int(args._run(args) or 0)
    except BertkitError as e:  # a user mistake: one line that says what to do, no traceback
        print(f"bertkit {args.command}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # the disk or file system refused (full, read-only, no permission): one line too
        print(f"bertkit {args.command}: error: {describe_os_error(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # Ctrl-C; a training loop stopped by a signal says more (RunInterrupted)
        print(f"bertkit {args.command}: {e or 'interrupted'}", file=sys.stderr)
        return getattr(e, "exit_code", 130)
    finally:
        torch.set_num_threads(before)  # main() called in-process (tests) leaves torch as it was
        job_warnings.restore(shown_by)


if __name__ == "__main__":
    sys.exit(main())
