"""Each distinct warning of a command printed once per job, by rank 0 only.

Python's own "default" action shows a warning once per code location, but it forgets what it
showed whenever any code changes the warning filters (every `warnings.catch_warnings()` block
does, and bertkit's readers and model loaders run such blocks), so a fine-tuning run printed its
"dev: N of N texts were cut to data.max_length" warning at every evaluation; and under torchrun
every rank printed it. `cli.main` installs `show_once` as `warnings.showwarning` for the job (the
outermost command; quickstart's stages share it): a warning whose category and text were shown
already is dropped, and a process that is not rank 0 shows none. Code that records warnings
(`catch_warnings(record=True)`) still records every one: it swaps the hook out while it records.
"""

from __future__ import annotations

import warnings

from bertkit.runtime.run_dir import is_main_process


def install():
    """Replace `warnings.showwarning` by one that shows each distinct warning once, on rank 0;
    returns what it replaced, for `restore`."""
    previous = warnings.showwarning
    shown: set[tuple[type, str]] = set()

    def show_once(message, category, filename, lineno, file=None, line=None):
        key = (category, str(message))
        if key in shown or not is_main_process():
            return
        shown.add(key)
        previous(message, category, filename, lineno, file, line)

    warnings.showwarning = show_once
    return previous


def restore(previous) -> None:
    warnings.showwarning = previous
