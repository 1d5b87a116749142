"""No package module outside bertkit/tasks/ tests a task by its name: recipes, inference, hub data
and export ask the task's entry (docs/architecture.md, "Add a task"). Read from the code: a string
literal equal to a registered task name, compared (==, !=, in, not in: also inside a tuple, list or
set) or used as a key of a dict display (a second task table)."""

from __future__ import annotations

import ast
import pathlib

from bertkit.tasks import TASKS

ROOT = pathlib.Path(__file__).resolve().parents[2] / "bertkit"
# A config's problem_type takes transformers' values ("regression", ...): the head's loss, not a task.
NOT_TASKS = ("problem",)


def literals(node: ast.AST) -> list[str]:
    """The string constants of a literal or of a tuple / list / set of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [value for element in node.elts for value in literals(element)]
    return []


def task_name_uses(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, task name) of each comparison with, or dict-display key of, a task name in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(word in ast.unparse(operand) for operand in operands for word in NOT_TASKS):
                continue
            found += [(node.lineno, value) for operand in operands for value in literals(operand) if value in names]
        elif isinstance(node, ast.Dict):
            found += [(node.lineno, value) for key in node.keys if key is not None
                      for value in literals(key) if value in names]
    return found


def test_the_check_sees_a_name_test():
    # a reader that found nothing would pass the test below vacuously
    code = 'if task.name == "qa": pass\nok = name in ("seq2seq", "x")\nTABLE = {"regression": 1}\n' \
           'if problem == "regression": pass\n'
    assert task_name_uses(code, set(TASKS)) == [(1, "qa"), (2, "seq2seq"), (3, "regression")]


def test_no_module_outside_the_tasks_compares_a_task_name():
    names = set(TASKS)
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.relative_to(ROOT).parts[0] == "tasks":
            continue
        for line, name in task_name_uses(path.read_text(encoding="utf-8"), names):
            wrong.append(f"{path.relative_to(ROOT.parent)}:{line} tests the task name {name!r}")
    assert not wrong, "ask the Task entry instead (bertkit/tasks/spec.py):\n" + "\n".join(wrong)
