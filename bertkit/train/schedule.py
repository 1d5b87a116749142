"""Learning-rate schedules: linear warmup, then linear or cosine decay to 0.

With W warmup steps, T total steps and s the number of optimizer steps taken so far, the
multiplier of the base lr is

    s < W:      s / W
    linear:     max(0, (T - s) / (T - W))
    cosine:     0.5 * (1 + cos(pi * min(1, (s - W) / (T - W))))

These are the formulas of `transformers.get_{linear,cosine}_schedule_with_warmup`, so the
same config gives the same lrs in both libraries (a test checks it).
"""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from ..errors import ConfigError

SCHEDULES = ("linear", "cosine", "constant")


class WarmupDecay:
    """The multiplier above as a picklable callable (LambdaLR saves its plain attributes)."""

    def __init__(self, warmup_steps: int, total_steps: int, kind: str = "linear"):
        if kind not in SCHEDULES:
            raise ConfigError(f"unknown schedule {kind!r}; use one of {', '.join(SCHEDULES)}")
        if total_steps <= 0:
            raise ConfigError(f"the schedule needs max_steps > 0, got {total_steps}")
        if not 0 <= warmup_steps <= total_steps:
            raise ConfigError(f"warmup_steps must be in [0, max_steps={total_steps}], got {warmup_steps}")
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.kind = kind

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return step / self.warmup_steps
        if self.kind == "constant":
            return 1.0
        span = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / span)
        if self.kind == "linear":
            return max(0.0, 1.0 - progress)
        return 0.5 * (1.0 + math.cos(math.pi * progress))


def build_scheduler(optimizer: Optimizer, warmup_steps: int, total_steps: int,
                    kind: str = "linear") -> LambdaLR:
    """A LambdaLR applying `WarmupDecay` to every param group's own base lr (keeps LLRD ratios)."""
    return LambdaLR(optimizer, WarmupDecay(warmup_steps, total_steps, kind))
