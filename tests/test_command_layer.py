"""The command layer's rules (docs: DESIGN.md "Layout"): a command parses arguments and calls one
recipe or analysis function, so it never imports another command, and no function in commands
or recipes grows past 60 lines."""

import ast
from pathlib import Path

import pytest

import bertkit

PACKAGE = Path(bertkit.__file__).parent
MAX_LINES = 60
SHARED = {"options"}  # the command-line conventions every command uses (commands/options.py)


def _modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).glob("*.py"))


def _imported_commands(path: Path) -> set[str]:
    """Names of bertkit.commands modules that `path` imports (relative or absolute)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 1:  # from .x import y / from . import x
                found |= {module.split(".")[0]} if module else {a.name for a in node.names}
            elif node.level == 0 and module.startswith("bertkit.commands"):
                rest = module[len("bertkit.commands"):].lstrip(".")
                found |= {rest.split(".")[0]} if rest else {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("bertkit.commands.")}
    return found


@pytest.mark.parametrize("path", _modules("commands"), ids=lambda p: p.name)
def test_a_command_imports_no_other_command(path):
    others = _imported_commands(path) - SHARED - {path.stem}
    assert not others, f"{path.name} imports the command(s) {sorted(others)}; move the shared logic below"


def test_the_import_check_sees_command_imports(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from .attention import load_encoder\nfrom .options import add_set\n"
                      "from bertkit.commands import probe\nimport bertkit.commands.scale\n")
    assert _imported_commands(sample) == {"attention", "options", "probe", "scale"}


@pytest.mark.parametrize("path", _modules("commands") + _modules("recipes"), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_functions_stay_short(path):
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_LINES]
    assert not long, f"{path.parent.name}/{path.name}: split {', '.join(long)} (at most {MAX_LINES} lines)"
