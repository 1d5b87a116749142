"""Every `bertkit ...` command README.md and docs/*.md print still parses with today's options.

The docs print hundreds of commands and they went stale silently (a renamed flag, a `--set` key a
recipe no longer takes, a recipe file that moved). Nothing here runs a command: each is parsed by
bertkit's own parser (cli.build_parser, with its "did you mean" refusal) and its settings checked by
the functions a run calls first (settings/config_io.py: find_config, apply_overrides).

What counts as a command, and how much of it is checked:
- a *command*: a line of a code block (fenced, or indented four spaces) that, with backslash
  continuations joined and `$ `, `VAR=value` assignments, `.venv/bin/`, `time` and a `torchrun ... -m`
  / `python -m bertkit[.commands.cli]` prefix removed, starts with `bertkit ` (a `$F` that the block set
  as `F="bertkit ..."` is that command); it ends at the first shell operator or comment (`|`, `&&`,
  `;`, `>`, `#`). It must parse completely, required options included.
- a *fragment*: an inline code span in prose or a table that reads as a command the same way. Parsed
  the same, except that the options it leaves out are not demanded (it shows one option, not a whole
  command), and a last option may stand without its value (`bertkit tokenizer train --files`).
- a *synopsis*: a command or fragment written as syntax rather than to run: a token holding `...`,
  a `[optional]` group or an `a|b` alternative. Only the options it names are checked: each must be
  one its command takes, and where the option has choices, each alternative must be one of them;
  its `--config configs/...` and `--set section.key=...` words are checked as below.
Not read: `bertkit X: error: ...` (what a command printed), comments, Python.
Placeholders (MODEL, $MODEL, DIR, <BERT dir>, runs/x) parse as the strings they are: no data path
is looked for. A `--config configs/NAME.toml` must exist (bertkit's own, found from any folder as
load_toml finds it; another path is the reader's own file), and every `--set section.key=value` key
must be one the command takes (each command's key table, as its run passes it to apply_overrides).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from bertkit.commands.cli import build_parser
from bertkit.commands.probe import PROBE_KEYS
from bertkit.errors import ConfigError
from bertkit.recipes.finetune import section_keys
from bertkit.recipes.pretrain import pretrain_sections  # the keys parse_config checks --set against
from bertkit.recipes.search import SEARCH_KEYS
from bertkit.settings.config_io import apply_overrides, find_config
from bertkit.tasks.inference import INFERENCE_KEYS

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^\s*(```|~~~)")
PREFIX = re.compile(r"^(?:\$\s+)?(?:[A-Za-z_]\w*=\S*\s+)*"  # `$ `, OMP_NUM_THREADS=1
                    r"(?:(?:torchrun|python3?)\s(?:.*?\s)?-m\s+|\.venv/bin/|(?:/usr/bin/)?time\s+)?")
SHELL_OPERATORS = ("|", "||", "&&", ";", ">", ">>", "2>", "2>&1", "&")
PLACEHOLDER = re.compile(r"\$\{?\w+\}?|[A-Z][A-Z_]*|<\w[^<>]*>")  # $seed, N, COMMAND, <MiniLM>


@dataclass
class DocCommand:
    where: str  # FILE:LINE
    argv: list[str]  # after `bertkit`
    fragment: bool  # an inline span: options it leaves out are not demanded
    synopsis: bool  # syntax ([optional], a|b, ...): only the options it names are checked

    def __str__(self) -> str:
        return f"{self.where}: bertkit {shlex.join(self.argv)}"


# ---------------------------------------------------------------------------- reading the docs
def block_lines(text: str) -> list[tuple[int, str]]:
    """(line number, logical line) of every code block, fenced or indented by four spaces, backslash
    continuations joined."""
    out, inside, start, pending = [], False, 0, ""
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            inside, pending = not inside, ""
            continue
        if not (inside or pending or line.startswith("    ")):
            continue
        start = start if pending else number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    return out


def prose(text: str) -> str:
    """The text with every fenced block's lines blanked (line numbers kept)."""
    lines, inside = text.splitlines(), False
    for number, line in enumerate(lines):
        if FENCE.match(line):
            inside = not inside
        if inside or FENCE.match(line):
            lines[number] = ""
    return "\n".join(lines)


def inline_spans(text: str) -> list[tuple[int, str]]:
    """(line number, text) of each inline code span that holds `bertkit `; a span may wrap onto the next
    line, and a table's `\\|` is the `|` it shows."""
    body, out = prose(text), []
    for paragraph in re.finditer(r"(?:.|\n(?!\s*\n))+", body):  # a span ends in its paragraph
        for span in re.finditer(r"(?<!`)`(?!`)([^`]+)`", paragraph.group(0)):
            if "bertkit " in span.group(1):
                out.append((body.count("\n", 0, paragraph.start() + span.start()) + 1,
                            span.group(1).replace("\n", " ").replace("\\|", "|")))
    return out


def without_substitutions(line: str) -> str:
    """`$(...)` (nested parentheses too) as the one word `$CMD`, and `<BERT dir>` as `<BERT_dir>`: placeholders
    that a shell reads as one word and shlex would split."""
    out, depth = "", 0
    for i, ch in enumerate(line):
        if ch == "(" and (depth or line[i - 1:i] == "$"):
            depth += 1
            out = out[:-1] + "$CMD" if depth == 1 else out
        elif ch == ")" and depth:
            depth -= 1
        elif not depth:
            out += ch
    return re.sub(r"<\w[^<>]*>", lambda m: m.group(0).replace(" ", "_"), out)


def words(line: str) -> tuple[list[str], bool] | None:
    """The arguments after `bertkit` of a shell line that runs it (None when it does not), up to the
    first shell operator or comment, and whether they are a synopsis."""
    line = PREFIX.sub("", without_substitutions(line.strip()), count=1)
    if not line.startswith(("bertkit ", "bertkit.commands.cli ")):
        return None
    try:
        argv = shlex.split(line, comments=True)[1:]
    except ValueError:  # an unclosed quote: a command a shell could not run either
        return [line], False
    if not argv or argv[0].endswith(":"):  # `bertkit embed: error: ...`: what a command printed
        return None
    cut = next((i for i, arg in enumerate(argv) if arg in SHELL_OPERATORS), len(argv))
    return argv[:cut], is_synopsis(argv)


def is_synopsis(argv: list[str]) -> bool:
    """Syntax, not a command: `...`, `[optional]`, `a|b` (`--compute C | --params N`), a COMMAND placeholder."""
    return (PLACEHOLDER.fullmatch(argv[0]) is not None
            or any("..." in arg or "…" in arg or arg.startswith("[") or arg.endswith("]") and "[" not in arg
                   or re.fullmatch(r"[\w.-]+(\|[\w.-]+)+", arg) for arg in argv)
            or any(arg == "|" and after.startswith("-") for arg, after in zip(argv, argv[1:])))


def commands_in(text: str, name: str) -> list[DocCommand]:
    """Every command, fragment and synopsis of one markdown text (`name`: its file, for the messages)."""
    found, held = [], {}  # F="bertkit finetune ...", run as `$F --out ...`: F's command
    for fragment, lines in ((False, block_lines(text)), (True, inline_spans(text))):
        for number, line in lines:
            if defined := re.fullmatch(r'\s*(\w+)="(bertkit [^"]*)"\s*', line):
                held[defined[1]] = defined[2]
            line = re.sub(r"^\s*\$(\w+)(?=\s)", lambda m: held.get(m[1], m[0]), line)
            for said in filter(None, map(words, line.split(" && "))):  # `bash scripts/setup.sh && bertkit ...`
                found.append(DocCommand(f"{name}:{number}", said[0], fragment, said[1]))
    return found


def doc_commands() -> list[DocCommand]:
    return [command for path in DOCS
            for command in commands_in(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())]


# ---------------------------------------------------------------------------- checking one
def lenient(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`parser` with no option required, recursively: a fragment is checked for what it says."""
    for action in parser._actions:
        action.required = False
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                lenient(sub)
    for group in parser._mutually_exclusive_groups:
        group.required = False
    return parser


def numbered(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`argv` with a placeholder given to an option that takes a number (`--seed S`, `--limit N`) as 1."""
    own = command_parser(parser, argv)._option_string_actions
    return [("1" if PLACEHOLDER.fullmatch(arg) and own.get(before) and own[before].type not in (None, str) else arg)
            for before, arg in zip([""] + argv, argv)]


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace | str:
    """The parsed arguments, or the parser's error line (what `bertkit` would print before exiting 2);
    `--help` gives empty arguments."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            return parser.parse_args(numbered(parser, argv))
    except SystemExit as e:
        return stderr.getvalue().strip().splitlines()[-1] if e.code else argparse.Namespace()


def command_parser(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The (sub-)command parser `argv`'s leading words name (`scale fit` -> scale's fit parser)."""
    for arg in argv:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or arg not in subs[0].choices:
            break
        parser = subs[0].choices[arg]
    return parser


def synopsis_problems(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """Options a synopsis names that its command lacks, and alternatives an option with choices refuses."""
    if "|" in argv[0]:  # `bertkit evaluate|predict --model DIR`: each command
        return [p for name in argv[0].split("|") for p in synopsis_problems(parser, [name, *argv[1:]])]
    own, found = command_parser(parser, argv)._option_string_actions, []
    for arg, value in zip(argv, argv[1:] + [""]):
        for option in re.findall(r"--[\w-]+", arg):
            if option not in own:
                found.append(f"no option {option}")
            elif own[option].choices and "|" in value and option in arg.split("|")[-1]:
                found += [f"{option} {choice}: not one of its choices" for choice in value.strip("[]").split("|")
                          if choice not in own[option].choices]
    return found + settings_problems(named_settings(argv))


def named_settings(argv: list[str]) -> argparse.Namespace:
    """The --config, --stage and `--set section.key=value` words a synopsis names, brackets taken off."""
    named: dict[str, list[str]] = {"--config": [], "--stage": [], "--set": []}
    option = None
    for word in (arg.strip("[]") for arg in argv[1:]):
        if word.startswith("-"):
            option = word if word in named else None
        elif option == "--set" and re.match(r"[\w-]+\.\w+=", word) or option in ("--config", "--stage"):
            named[option].append(word)
            option = option if option == "--set" else None
    return argparse.Namespace(command=argv[0], config=next(iter(named["--config"]), None),
                              stage=next(iter(named["--stage"]), None), set=named["--set"])


def set_keys(args: argparse.Namespace) -> dict:
    """The sections and keys `--set` takes in this command, as its run passes them to apply_overrides."""
    if args.command == "finetune":
        return {**section_keys(), "search": SEARCH_KEYS}
    if args.command == "distill" and getattr(args, "stage", None) != "pretrain":
        return section_keys()
    if args.command in ("evaluate", "predict"):
        return INFERENCE_KEYS
    if args.command == "probe":
        return PROBE_KEYS
    return pretrain_sections()  # pretrain, scale sweep, distill --stage pretrain


def settings_problems(args: argparse.Namespace) -> list[str]:
    """A bertkit recipe --config that does not exist; a --set key the command does not take."""
    found = []
    config = getattr(args, "config", None)
    if config and Path(config).parent.as_posix() == "configs":
        try:
            with contextlib.redirect_stderr(io.StringIO()):  # "reading bertkit's own configs/..."
                find_config(config)
        except ConfigError as e:
            found.append(str(e))
    if getattr(args, "set", None):
        try:
            apply_overrides({}, args.set, set_keys(args))
        except ConfigError as e:
            found.append(str(e))
    return found


def problems(command: DocCommand, parsers: dict) -> list[str]:
    """What is wrong with one doc command (empty when nothing is)."""
    if command.synopsis:
        return synopsis_problems(parsers[True], command.argv)
    argv, named = command.argv, []
    if command.fragment and argv[-1].startswith("--"):  # prose naming an option, its value left out
        argv, named = argv[:-1], synopsis_problems(parsers[True], argv)
    args = parse(parsers[command.fragment], argv)
    return named + ([args] if isinstance(args, str) else settings_problems(args))


@pytest.fixture(scope="module")
def parsers() -> dict:
    """{fragment?: parser}: bertkit's, and one that demands no option."""
    return {False: build_parser(), True: lenient(build_parser())}


# ---------------------------------------------------------------------------- the tests
def test_every_doc_command_parses(parsers):
    found = doc_commands()
    wrong = [f"{command}\n    {'; '.join(said)}" for command in found for said in [problems(command, parsers)] if said]
    assert not wrong, f"{len(wrong)} of the docs' {len(found)} bertkit commands are stale:\n" + "\n".join(wrong)
    assert len(found) >= 300  # a reader that found nothing would pass vacuously


SAMPLE = """Run `bertkit finetune --task qa`, or `bertkit pretrain --config
configs/pretrain-tiny.toml --out runs/x`; `bertkit embed: error: ...` is what it printed.

```bash
$ OMP_NUM_THREADS=1 .venv/bin/bertkit evaluate --model runs/x \\
    --data test.csv --limit N | head -3   # a comment
torchrun --nproc_per_node 2 -m bertkit predict --model OUT --input in.txt --output -
bertkit pretrain --config configs/dapt-minilm-head.toml --out o --set model.init=$(python -c "print(1)")
```

    bertkit finetune ... --set model.classifier_pooling=mean

| `bertkit export --model DIR --out DIR [--task embedding\\|encoder]` | a table row |
"""


def test_the_reader_finds_every_form():
    found = commands_in(SAMPLE, "x.md")
    assert [(c.where, c.argv[0], c.fragment, c.synopsis) for c in found] == [
        ("x.md:5", "evaluate", False, False), ("x.md:7", "predict", False, False), ("x.md:8", "pretrain", False, False),
        ("x.md:11", "finetune", False, True), ("x.md:1", "finetune", True, False), ("x.md:1", "pretrain", True, False),
        ("x.md:13", "export", True, True)]
    assert found[0].argv == ["evaluate", "--model", "runs/x", "--data", "test.csv", "--limit", "N"]
    assert found[2].argv[-1] == "model.init=$CMD"
    assert found[5].argv == ["pretrain", "--config", "configs/pretrain-tiny.toml", "--out", "runs/x"]


@pytest.mark.parametrize("line,said", [
    ("bertkit finetune --task qa --model M --train t --out o --trian x", "did you mean --train?"),
    ("bertkit finetune --task qa --model M --train t --out o --set train.lerning_rate=1", "unknown key train.lerning"),
    ("bertkit finetune --task qa --model M --train t", "the following arguments are required: --out"),
    ("bertkit pretrain --config configs/no-such-recipe.toml --out o", "does not exist"),
    ("bertkit pretrain --config configs/pretrain-tiny.toml --out o --set train.epochs=3", "train.epochs is not a key of this recipe"),
    ("bertkit scale sweep --sizes 1x64 --tokens 1e6 --time-budget 60 --out o --set train.num_train_epochs=1",
     "use train.max_steps"),  # transformers' name, pre-training's keys
    ("bertkit evaluate --model m --data d --set train.lr=1", "unknown section [train]"),
    ("bertkit evaluate --model m --data d --limit lots", "invalid int value: 'lots'"),
    ("bertkit evaluate --model DIR [--per-clas]", "no option --per-clas"),
    ("bertkit export --model DIR --out DIR [--task embedding|encoders]", "--task encoders: not one of its choices"),
    ("bertkit finetune ... --set model.clasifier_pooling=mean", "did you mean model.classifier_pooling?"),
])
def test_a_stale_command_is_named(parsers, line, said):
    (command,) = commands_in(f"```\n{line}\n```\n", "x.md")
    assert any(said in problem for problem in problems(command, parsers)), problems(command, parsers)


@pytest.mark.parametrize("text", [
    "`bertkit finetune --task qa`",  # a fragment: what it leaves out is not demanded
    "`bertkit tokenizer train --files`",  # prose naming an option
    "```\nbertkit finetune --task qa --model M --train t --out o --set train.learning_rate=3e-5 --seed S\n```",
    "```\nbertkit distill --stage pretrain --teacher T --out o --set distil.temperature=2\n```",
])
def test_what_the_docs_may_write(parsers, text):
    (command,) = commands_in(text, "x.md")
    assert problems(command, parsers) == []
