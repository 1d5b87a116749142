"""How long work shows its progress: a tqdm bar on a terminal, a plain line now and then elsewhere.

A bar redraws itself with carriage returns many times a second; written into a log file (stderr
redirected, a batch job, CI) that is thousands of fragments per minute. So `progress()` decides,
in one place: when stderr is a terminal, a tqdm bar; otherwise a `LogLines` object with the same
methods that writes one whole line at most every `LOG_EVERY_S` seconds, and one at the end.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, Iterable

from tqdm import tqdm

LOG_EVERY_S = 60.0  # seconds between progress lines in a log (not a terminal)
FIRST_LINE_S = 10.0  # the first one sooner: the total and the rate, before a minute of silence


def on_terminal() -> bool:
    """True when stderr (where progress goes) is an interactive terminal."""
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def progress(iterable: Iterable | None = None, *, total: int | None = None, desc: str = "",
             unit: str = "it", initial: int = 0, enabled: bool = True,
             time_left: Callable[[], float | None] | None = None):
    """A progress display for `iterable` (or for `update(n)` calls): None when not `enabled`, a tqdm
    bar on a terminal (its own time estimate), else LogLines. `time_left`: the seconds a time budget
    leaves (None: no budget), when it may end the work before `total`."""
    if not enabled:
        return None
    if on_terminal():
        return tqdm(iterable, total=total, desc=desc, unit=unit, initial=initial, dynamic_ncols=True)
    return LogLines(iterable, total=total, desc=desc, unit=unit, initial=initial, time_left=time_left)


def left_text(seconds: float) -> str:
    """A rough time to finish: "<1 min left", "~4 min left", "~2.5 h left"."""
    if seconds < 60:
        return "<1 min left"
    return f"~{seconds / 60:.0f} min left" if seconds < 90 * 60 else f"~{seconds / 3600:.1f} h left"


class LogLines:
    """tqdm's update / set_postfix / close / iteration, written as whole lines to stderr:
    "train: 120/1000 step (12%), 1.9 step/s, ~8 min left, loss=2.31" every LOG_EVERY_S seconds and
    at close (the time left from the rate so far, or the budget's when that ends sooner)."""

    def __init__(self, iterable: Iterable | None = None, total: int | None = None, desc: str = "",
                 unit: str = "it", initial: int = 0, time_left: Callable[[], float | None] | None = None):
        self.iterable, self.desc, self.unit, self.time_left = iterable, desc, unit, time_left
        self.total = len(iterable) if total is None and hasattr(iterable, "__len__") else total
        self.n = self.start_n = initial
        self.postfix = ""
        self.started = self.last_line = time.monotonic()
        self.closed = False

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.update(1)
        self.close()

    def update(self, n: int = 1) -> None:
        self.n += n
        wait = LOG_EVERY_S if self.last_line > self.started else min(FIRST_LINE_S, LOG_EVERY_S)
        if time.monotonic() - self.last_line >= wait:
            self._line()

    def set_postfix(self, refresh: bool = True, **values) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in values.items())

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._line()

    def _line(self) -> None:
        self.last_line = now = time.monotonic()
        done = f"{self.n}/{self.total}" if self.total else f"{self.n}"
        share = f" ({self.n / self.total:.0%})" if self.total else ""
        rate = (self.n - self.start_n) / max(now - self.started, 1e-9)
        tail = f", {self.postfix}" if self.postfix else ""
        print(f"{self.desc}: {done} {self.unit}{share}, {rate:.3g} {self.unit}/s{self._left(rate)}{tail}",
              file=sys.stderr, flush=True)

    def _left(self, rate: float) -> str:
        """", ~4 min left" while there is work left and a rate to judge it by, else nothing."""
        if self.closed or not self.total or self.n >= self.total or self.n <= self.start_n:
            return ""
        seconds = (self.total - self.n) / rate
        budget = self.time_left() if self.time_left is not None else None
        if budget is not None and budget < seconds:  # the budget ends the work before the last step
            return f", {left_text(max(budget, 0.0))} (the time budget)"
        return f", {left_text(seconds)}"
