"""Import a module of the user's that registers something (an objective, a task) before bertkit
looks it up: a dotted module name on the Python path, or the path of a .py file."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

from bertkit.errors import ConfigError

TASK_MODULE = "--task-module"  # the commands' option naming a module that registers a task


def import_user_module(spec: str, option: str, registers: str) -> None:
    """Import `spec` once per process; `option` names where it was given and `registers` what the
    module is for, in the one-line errors of a module that cannot be found or does not parse."""
    if not spec:
        return
    try:
        _import(spec, option, registers)
    except SyntaxError as e:  # the user's file (or one it imports) does not parse: where and why, not a traceback
        where = ":".join(str(part) for part in (e.filename, e.lineno) if part is not None) or "<unknown>"
        raise ConfigError(f"{option} {spec!r} cannot be imported: {where}: {type(e).__name__}: {e.msg}; "
                          "fix that line and run again") from None


def _import(spec: str, option: str, registers: str) -> None:
    """import_user_module's work: a dotted name through importlib, a .py file under its own key."""
    if not spec.endswith(".py"):
        try:
            importlib.import_module(spec)
        except ModuleNotFoundError as e:
            if e.name and spec.startswith(e.name):  # the module itself, not one it imports
                raise ConfigError(f"{option} {spec!r} cannot be imported (no module {e.name!r} on the Python "
                                  "path); give a .py file path or add its folder to PYTHONPATH") from None
            raise
        return
    path = os.path.abspath(spec)
    if not os.path.isfile(path):
        raise ConfigError(f"{option} {spec!r} does not exist; give the path of the .py file that {registers}")
    key = f"bertkit_user_module:{path}"  # its name in sys.modules: a second import is a no-op
    if key in sys.modules:
        return
    module_spec = importlib.util.spec_from_file_location(key, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[key] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[key]  # a failed import is tried again, not remembered as done
        raise


def task_modules(argv: list[str]) -> list[str]:
    """The --task-module values in a command line, read before argparse reads it (`--task-module X`
    or `--task-module=X`): the task must be registered before the parser lists --task's choices."""
    found = []
    for i, arg in enumerate(argv):
        if arg == TASK_MODULE and i + 1 < len(argv):
            found.append(argv[i + 1])
        elif arg.startswith(TASK_MODULE + "="):
            found.append(arg.split("=", 1)[1])
    return found
