"""Commands and recipes read top to bottom: no function in bertkit/commands or bertkit/recipes
grows past 60 lines (docs/architecture.md). The import rules are tests/test_architecture.py."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "bertkit"
MAX_LINES = 60


def long_functions(source: str) -> list[str]:
    return [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)" for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_LINES]


@pytest.mark.parametrize("path", sorted((ROOT / "commands").glob("*.py")) + sorted((ROOT / "recipes").glob("*.py")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_functions_stay_short(path):
    long = long_functions(path.read_text(encoding="utf-8"))
    assert not long, f"{path.parent.name}/{path.name}: split {', '.join(long)} (at most {MAX_LINES} lines)"


def test_the_length_reader_counts_nested_functions_too():
    body = "".join(f"    x{k} = {k}\n" for k in range(MAX_LINES))
    source = f"def short():\n    pass\n\n\ndef outer():\n    def inner():\n{body.replace('    ', '        ')}\n"
    assert long_functions(source) == [f"outer ({MAX_LINES + 2} lines)", f"inner ({MAX_LINES + 1} lines)"]
