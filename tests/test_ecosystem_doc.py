"""docs/ecosystem.md keeps its promise: every row of a table with a "test" column names a test
that exists, the library versions it quotes are the pins of the test extra, and those pins are
what is installed, so that no neighbour test (they skip when their library is missing) can skip
quietly in CI."""

import ast
import importlib.metadata
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "ecosystem.md"


def tables(text: str) -> list[list[list[str]]]:
    """Each Markdown table as rows of cells (the header first, the |---| line left out)."""
    found, current = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            current = None
            continue
        if current is None:
            current = []
            found.append(current)
        if not set(line) <= set("|-: "):
            current.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return found


def named_tests(cell: str, current: str | None) -> tuple[list[tuple[str, str]], str | None]:
    """(file, test name or "") pairs a cell names: `tests/x.py::test_a`, `::test_b` (the file named
    last, in this row or above), `test_y.py` (beside the file named last)."""
    named = []
    for ref in re.findall(r"`([^`]+)`", cell):
        path, _, name = ref.partition("::")
        if path.endswith(".py") and (path.startswith("tests/") or (path.startswith("test_") and current)):
            current = path if path.startswith("tests/") else str(Path(current).parent / path)
        elif not (ref.startswith("::") and current):
            continue
        named.append((current, name))
    return named, current


def test_every_row_names_a_test_that_exists():
    rows = 0
    for table in tables(DOC.read_text(encoding="utf-8")):
        if table[0][-1] != "test":
            continue
        current = None
        for cells in table[1:]:
            rows += 1
            named, current = named_tests(cells[-1], current)
            assert named, f"docs/ecosystem.md: the row {cells[0][:60]!r} names no test"
            for path, name in named:
                assert (ROOT / path).is_file(), f"docs/ecosystem.md names {path}, which does not exist"
                if name:
                    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
                    defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
                    assert name in defined, f"docs/ecosystem.md names {path}::{name}, which does not exist"
    assert rows >= 40  # the tables were found


def pinned_in_the_test_extra() -> dict[str, str]:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    return dict(re.match(r"^([\w.-]+)==([\w.]+)$", pin).groups() for pin in extra["test"] if "==" in pin)


def test_the_quoted_versions_are_the_pins_and_the_pins_are_installed():
    pins = pinned_in_the_test_extra()
    quoted = re.findall(r"\b(transformers|peft|sentence-transformers|tensorboard|pyarrow|datasets) (\d+\.\d+\.\d+)",
                        DOC.read_text(encoding="utf-8"))
    assert len(quoted) >= 6
    for name, version in quoted:
        assert pins[name] == version, f"docs/ecosystem.md quotes {name} {version}; the test extra pins {pins[name]}"
    for name, version in pins.items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = "nothing"
        assert installed == version, (f"{name} {installed} is installed, the test extra pins {version}: "
                                      'pip install -e ".[test]"')
