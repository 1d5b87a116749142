"""Learning-rate schedules: linear warmup, then linear, cosine, polynomial, inverse-sqrt or
warmup-stable-decay.

With W warmup steps, T total steps and s the number of optimizer steps taken so far, the
multiplier of the base lr is

    s < W:       s / W
    linear:      max(0, (T - s) / (T - W))
    cosine:      0.5 * (1 + cos(pi * min(1, (s - W) / (T - W))))
    polynomial:  (1 - e) * (1 - min(1, (s - W) / (T - W)))^p + e,   e = lr_end / lr
    noam:        sqrt(W / s)                                        (s >= W; T plays no part)
    wsd:         1 until D = T - round(r T), then 1 - sqrt(min(1, (s - D) / (T - D)))
    constant:    1

linear, cosine and polynomial are the formulas of `transformers.get_{linear,cosine,polynomial_decay}
_schedule_with_warmup`, so the same config gives the same lrs in both libraries (tests check it).
BERT's own code decays polynomially with p = 1 and lr_end = 0, which is linear.

noam is the inverse square-root schedule of Vaswani et al. (2017),
lr = base * min(s^-0.5, s * W^-1.5), multiplied by sqrt(W) so that its peak (at s = W) is the
configured lr: min(s^-0.5, s W^-1.5) sqrt(W) = min(sqrt(W / s), s / W). The paper's base,
d_model^-0.5, becomes the configured lr times W^-0.5. It equals transformers'
`get_inverse_sqrt_schedule` with timescale W.

wsd is warmup-stable-decay (Hu et al. 2024, MiniCPM; Hagele et al. 2024): the peak lr is held
and only the last fraction r = `decay_ratio` (default 0.2) of the steps decays, with the
"1 - sqrt" shape that Hagele et al. measured ahead of a linear cool-down. Because the lr does
not depend on T before the cool-down, a run can be extended (resume with a larger max_steps)
without having decayed too early, and one long stable phase can branch into cool-downs.
"""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from bertkit.errors import ConfigError

SCHEDULES = ("linear", "cosine", "constant", "polynomial", "noam", "wsd")


class WarmupDecay:
    """The multiplier above as a picklable callable (LambdaLR saves its plain attributes).

    `power` (p) and `end_ratio` (e = lr_end / lr) are used by "polynomial" only, `decay_ratio`
    (r) by "wsd" only.
    """

    def __init__(self, warmup_steps: int, total_steps: int, kind: str = "linear",
                 power: float = 1.0, end_ratio: float = 0.0, decay_ratio: float = 0.2):
        if kind not in SCHEDULES:
            raise ConfigError(f"unknown schedule {kind!r}; use one of {', '.join(SCHEDULES)}")
        if total_steps <= 0:
            raise ConfigError(f"the schedule needs max_steps > 0, got {total_steps}")
        if not 0 <= warmup_steps <= total_steps:
            raise ConfigError(f"warmup_steps must be in [0, max_steps={total_steps}], got {warmup_steps}")
        if kind == "noam" and warmup_steps == 0:
            raise ConfigError("the noam schedule peaks at the end of the warmup (lr * sqrt(W / s) "
                              "after it): set train.warmup_steps or train.warmup_ratio above 0")
        if kind == "polynomial" and not (power > 0 and 0 <= end_ratio < 1):
            raise ConfigError(f"the polynomial schedule needs train.schedule_power > 0 (got {power}) and "
                              f"0 <= train.lr_end < train.lr (got lr_end / lr = {end_ratio})")
        if kind == "wsd" and not (0 < decay_ratio <= 1 and round(decay_ratio * total_steps) <= total_steps - warmup_steps):
            raise ConfigError(f"the wsd schedule decays over the last train.decay_ratio of the steps: it must be "
                              f"in (0, 1] and leave room for the warmup (got {decay_ratio} with {warmup_steps} "
                              f"of {total_steps} steps warming up)")
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.kind = kind
        self.power = power
        self.end_ratio = end_ratio
        self.decay_ratio = decay_ratio

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return step / self.warmup_steps
        if self.kind == "constant":
            return 1.0
        if self.kind == "noam":
            return math.sqrt(self.warmup_steps / step)
        if self.kind == "wsd":
            decay_steps = max(1, round(self.decay_ratio * self.total_steps))
            start = self.total_steps - decay_steps
            return 1.0 if step < start else 1.0 - math.sqrt(min(1.0, (step - start) / decay_steps))
        span = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / span)
        if self.kind == "linear":
            return max(0.0, 1.0 - progress)
        if self.kind == "polynomial":
            return (1.0 - self.end_ratio) * (1.0 - progress) ** self.power + self.end_ratio
        return 0.5 * (1.0 + math.cos(math.pi * progress))


def build_scheduler(optimizer: Optimizer, warmup_steps: int, total_steps: int,
                    kind: str = "linear", power: float = 1.0, end_ratio: float = 0.0,
                    decay_ratio: float = 0.2) -> LambdaLR:
    """A LambdaLR applying `WarmupDecay` to every param group's own base lr (keeps LLRD ratios)."""
    return LambdaLR(optimizer, WarmupDecay(warmup_steps, total_steps, kind, power, end_ratio, decay_ratio))
