"""The import rules of docs/architecture.md, read from the code: components never import
recipes or commands, recipes never import commands, commands never import each other, and no
two modules import each other in a circle (imports inside functions count too)."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "bertkit"


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: pathlib.Path) -> set[str]:
    """bertkit modules `path` imports anywhere in its body (absolute or relative imports)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("bertkit"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("bertkit"):
                found.add(target)
                # `from bertkit.tasks import sequence` names a module too
                found.update(f"{target}.{a.name}" for a in node.names)
    return found


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def graph() -> dict[str, set[str]]:
    """module -> the bertkit modules it imports (names that are not modules are dropped)."""
    return {name: {t for t in imports_of(path) if t in MODULES and t != name} for name, path in MODULES.items()}


def layer(name: str) -> str:
    if name == "bertkit.__main__":  # `python -m bertkit`: the entry point, above every layer
        return "entry"
    for top in ("bertkit.commands", "bertkit.recipes"):
        if name == top or name.startswith(top + "."):
            return top.split(".")[1]
    return "component"


# Commands whose job is to run other commands: the CLI entry point (it loads every command by name)
# and quickstart (its stages are the commands a user would type, run through their own parsers).
COMPOSING_COMMANDS = {"bertkit.commands.cli", "bertkit.commands.quickstart"}


def test_layers_import_downwards_only():
    wrong = []
    for name, targets in graph().items():
        for target in targets:
            if layer(name) == "component" and layer(target) != "component" and name != "bertkit":
                wrong.append(f"{name} -> {target}")
            if layer(name) == "recipes" and layer(target) == "commands":
                wrong.append(f"{name} -> {target}")
            if (layer(name) == "commands" and layer(target) == "commands" and target != "bertkit.commands"
                    and target != "bertkit.commands.options" and name != "bertkit.commands"
                        and name not in COMPOSING_COMMANDS):
                wrong.append(f"{name} -> {target} (a command importing another)")
    assert not wrong, "imports against docs/architecture.md:\n" + "\n".join(sorted(wrong))


def test_no_module_circles():
    edges = graph()
    # package __init__ files re-export their modules: an __init__ -> own submodule edge is not a
    # dependency of the package on itself
    for name in edges:
        edges[name] = {t for t in edges[name] if not (MODULES[name].name == "__init__.py" and t.startswith(name + "."))}
    circles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == "open":
                circles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    assert not circles, "import circles:\n" + "\n".join(circles)


@pytest.mark.parametrize("name", ["bertkit.recipes.finetune", "bertkit.tasks.registry", "bertkit.models.attention"])
def test_the_rule_reader_sees_real_imports(name):
    # a reader that found nothing would pass the tests above vacuously
    assert graph()[name], f"no bertkit imports read from {name}"


def unit(name: str) -> str:
    """The package (bertkit.tasks, bertkit.train, ...) or top-level module a module belongs to."""
    parts = name.split(".")
    return ".".join(parts[:2])


def test_no_package_circles():
    edges: dict[str, set[str]] = {}
    for name, targets in graph().items():
        if name == "bertkit":  # the package's face re-exports everything
            continue
        edges.setdefault(unit(name), set()).update(unit(t) for t in targets if unit(t) != unit(name))
    circles = []
    for start in sorted(edges):
        seen, frontier = set(), [(start, [start])]
        while frontier:
            node, path = frontier.pop()
            for nxt in sorted(edges.get(node, ())):
                if nxt == start:
                    circles.append(" -> ".join(path + [start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    frontier.append((nxt, path + [nxt]))
    assert not circles, "package circles:\n" + "\n".join(sorted(set(circles)))


def test_peft_is_reachable_after_import_bertkit():
    """`import bertkit; bertkit.peft.PeftModel` (as bertkit.data.assets): the package's face
    imports bertkit.peft, which the package-circle test above allows (nothing imports the face)."""
    code = "import bertkit; print(bertkit.peft.PeftModel.__name__, bertkit.peft.LoraConfig.__name__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=ROOT.parent)
    assert done.returncode == 0 and done.stdout.split() == ["PeftModel", "LoraConfig"], done.stderr


def test_commands_that_train_nothing_import_no_training_code():
    """predict, embed and evaluate start without bertkit.train, whose FSDP imports (torch.distributed.tensor,
    sympy) took about 0.7 s of evaluate's 2.7 s start: evaluate joins a torchrun job through
    bertkit.runtime.process_group, not bertkit.train.distributed."""
    code = ("import sys; import bertkit.commands.cli as c\n"
            "for name in ('predict', 'embed', 'evaluate'): c.build_parser(only=name)\n"
            "print(sorted(m for m in sys.modules if m.startswith('bertkit.train') or m == 'torch.distributed.fsdp'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=ROOT.parent)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr
