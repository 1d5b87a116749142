"""`bertkit <command>`: one entry point; each command lives in `bertkit/commands/<name>.py`.

A command module provides `add_arguments(parser)` and `run(args) -> int`; its one-line help is
its entry in COMMANDS. Adding a command is one line in COMMANDS plus its module.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
import warnings

import torch

from bertkit.runtime import job_warnings
from bertkit.errors import BertkitError, DataError, RunInterrupted
from bertkit.io import describe_os_error
from bertkit.runtime.run_dir import is_main_process
from bertkit.runtime.threads import default_threads
from bertkit.runtime.user_modules import TASK_MODULE, import_user_module, task_modules

# command name -> (module under bertkit.commands, its one-line help). The help lives here, not in
# the module, so that `bertkit --help` lists every command without importing one (each imports its
# recipe, and so most of bertkit), and `bertkit COMMAND` imports only COMMAND's module.
COMMANDS = {
    "quickstart": ("quickstart", "run the main job on the built-in defaults: embed, pre-train, fill-mask, fine-tune"),
    "info": ("info", "show a model directory's config and parameter counts by part"),
    "tokenize": ("tokenize", "show how a tokenizer splits a text (tokens, ids, segment ids, word ids, offsets)"),
    "embed": ("embed", "embed each line of a text file (the model's pooling; default mean + L2) into a .npy matrix"),
    "nearest": ("nearest", "search a corpus with a sentence-embedding model: the texts nearest each query, by "
                           "cosine"),
    "tokenizer": ("tokenizer", "train a WordPiece (BERT) or byte-level BPE (RoBERTa) tokenizer on text files"),
    "prepare": ("prepare", "tokenize a corpus into memory-mapped token shards for pre-training"),
    "pretrain": ("pretrain", "pre-train an encoder from a TOML recipe: MLM (+ NSP/SOP), ELECTRA or a registered "
                             "objective"),
    "fill-mask": ("fill_mask", "print the top-k tokens (with probabilities) a masked-LM model predicts for each [MASK]"),
    "peft": ("peft", "parameter-efficient adapters: merge a LoRA adapter into a plain checkpoint, show one"),
    "split": ("split", "split one labelled file into train, dev and test files (stratified, no text in two "
                       "splits) for finetune and evaluate"),
    "finetune": ("finetune", "fine-tune an encoder on a task (--task): classification, regression, "
                             "token-classification, qa, multiple-choice, seq2seq, embedding, similarity, ..."),
    "evaluate": ("evaluate", "evaluate a fine-tuned model on labelled data; the last stdout line is the metrics as JSON"),
    "predict": ("predict", "predict with a fine-tuned model: one JSON line per input (labels, entities, answers or "
                           "choices)"),
    "distill": ("distill", "distil a fine-tuned classifier, tagger or QA model (or, --stage pretrain, an MLM model) "
                           "into a student with fewer layers (DistilBERT-style)"),
    "attention": ("attention", "show a model's attention on a text: HTML viewer, PNG heatmaps, per-head statistics"),
    "probe": ("probe", "train linear probes on every layer of a frozen encoder (with control task and random "
                       "baseline)"),
    "scale": ("scale", "scaling laws: published formulas, power-law fits of sweeps, and a budgeted size sweep"),
    "export": ("export", "export a model (any task head, or the sentence encoder) to ONNX, with its tokenizer"),
}
# Commands that run a model get --threads (`scale` has its own, defaulting to torch's choice).
THREADED = ("quickstart", "embed", "nearest", "pretrain", "fill-mask", "finetune", "evaluate", "predict", "distill",
            "attention", "probe", "export")
CPU_ONLY = ("export",)  # traced and checked on the CPU (ONNX Runtime's CPU provider): no --device


def _thread_count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return int(text)


class _DefaultsFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default: "(default: X)", "(default: none)" when it is unset,
    added where the text does not already name it (flags and required options have none)."""

    def _get_help_string(self, action) -> str:
        text = action.help or ""
        if (action.required or not action.option_strings or action.nargs == 0
                or action.default is argparse.SUPPRESS or "default" in text.lower() or "required" in text.lower()):
            return text
        shown = "none" if action.default in (None, []) else "%(default)s"
        return f"{text} (default: {shown})".lstrip()


class _Parser(argparse.ArgumentParser):
    """Rejects unknown arguments itself. argparse hands a subcommand's leftovers up to the top-level
    parser, whose error would show `bertkit [-h] COMMAND ...` instead of the subcommand's usage.
    Sub-parsers inherit the class (add_subparsers defaults parser_class to the parent's), so every
    parser refuses abbreviations (`--thread` is not `--threads`: a later option could make it ambiguous)
    and names the nearest option to a misspelt one."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", _DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        unknown = self._first_unknown_option(sys.argv[1:] if args is None else args)
        if unknown:  # before argparse's check of required options, whose error would hide the typo
            close = difflib.get_close_matches(unknown.split("=", 1)[0], self._option_string_actions, n=1)
            self.error(f"unrecognized arguments: {unknown}" + (f"; did you mean {close[0]}?" if close else ""))
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras

    def _first_unknown_option(self, args) -> str | None:
        """The first argument that looks like an option this parser lacks, up to its subcommand's name
        (what follows belongs to the subcommand's parser) or `--`."""
        commands = {name for action in self._actions if isinstance(action, argparse._SubParsersAction)
                    for name in action.choices}
        for arg in args:
            if arg == "--" or arg in commands:
                return None
            if (arg.startswith("-") and arg != "-" and not self._negative_number_matcher.match(arg)
                    and arg.split("=", 1)[0] not in self._option_string_actions):
                return arg
        return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command. With `only` (a command's name, or "" for none), only that
    command's module is imported for its options; the others are listed by name and help line alone."""
    parser = _Parser(prog="bertkit", description="Toolkit for BERT-family encoders.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, about) in COMMANDS.items():
        command = sub.add_parser(name, help=about, description=about)
        if only is None or name == only:
            module = importlib.import_module(f"bertkit.commands.{module_name}")
            module.add_arguments(command)
            command.set_defaults(_run=module.run)
            if name in THREADED:
                command.add_argument("--threads", type=_thread_count, default=None,
                                     help="torch intra-op threads (default: OMP_NUM_THREADS if set, else the "
                                          "cores this process may use)")
    return parser


def chosen_command(argv: list[str]) -> str:
    """The command `argv` names: its first word that is not an option (the top-level parser has
    none that take a value); "" when there is none (`bertkit --help`, or a misspelt command)."""
    first = next((arg for arg in argv if not arg.startswith("-")), "")
    return first if first in COMMANDS else ""


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """Warnings from a command are notes to its user: one line, without the source line that
    Python's default format echoes (`warnings.warn(...)` inside bertkit means nothing to them)."""
    return f"bertkit: {category.__name__}: {message}\n"


def check_utf8_arguments(argv: list[str]) -> None:
    """Python decodes a command line that is not UTF-8 (a Latin-1 terminal) with stand-ins for the
    bytes it cannot read; they would reach the tokenizer as text it refuses with a traceback."""
    for arg in argv:
        bad = next((i for i, ch in enumerate(arg) if "\udc80" <= ch <= "\udcff"), None)
        if bad is not None:
            raise DataError(f"the argument {arg.encode('utf-8', 'surrogateescape')!r} is not UTF-8 (byte "
                            f"0x{ord(arg[bad]) - 0xDC00:02x} at character {bad + 1}); set the terminal to UTF-8, "
                            "or put the text in a UTF-8 file")


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit code (2 for a user error, printed as one line)."""
    argv = sys.argv[1:] if argv is None else argv
    try:  # a task of the user's is registered before the parser lists the --task choices
        check_utf8_arguments(argv)
        for module in task_modules(argv):
            import_user_module(module, TASK_MODULE, "registers your task (bertkit.tasks.register_task)")
    except BertkitError as e:
        print(f"{' '.join(filter(None, ('bertkit', chosen_command(argv))))}: error: {e}", file=sys.stderr)
        return 2
    args = build_parser(only=chosen_command(argv)).parse_args(argv)
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
    except BrokenPipeError:  # `bertkit ... | head`: the reader has what it wanted; no error to report
        # stdout's buffered rest would fail again at exit: point it at /dev/null (Python's docs, signal)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a command stopped by a closed pipe
    except OSError as e:  # the disk or file system refused (full, read-only, no permission): one line too
        print(f"bertkit {args.command}: error: {describe_os_error(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # Ctrl-C; a training loop stopped by a signal says more (RunInterrupted)
        # under torchrun all ranks stop after the same step with the same message: rank 0 says it once
        if is_main_process() or not isinstance(e, RunInterrupted):
            print(f"bertkit {args.command}: {str(e) or 'interrupted'}", file=sys.stderr)
        return getattr(e, "exit_code", 130)
    finally:
        torch.set_num_threads(before)  # main() called in-process (tests) leaves torch as it was
        job_warnings.restore(shown_by)


if __name__ == "__main__":
    sys.exit(main())
