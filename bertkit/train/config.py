"""`TrainConfig`: the `[train]` section of a recipe config, every field checked on construction.

Each option has one default, with the reason beside it where it is not obvious; a value out of
range is refused here, before any data is read or a model is built, with what to set instead.
What each field does in the loop is in trainer.py's module docstring (budgets, schedules over
minutes, checkpoints, resume).
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass

from bertkit.errors import ConfigError
from bertkit.runtime.devices import DEVICE_NAME, DEVICES
from bertkit.runtime.precision import check_precision, resolve_precision
from bertkit.settings.config_io import dataclass_from_dict
from bertkit.train.fsdp import check_strategy
from bertkit.train.reporting import check_report_to
from bertkit.train.schedule import SCHEDULES, WarmupDecay


@dataclass
class TrainConfig:
    """The `[train]` section of a recipe config. Steps count optimizer updates."""

    max_steps: int = 1000
    max_minutes: float | None = None  # wall-clock budget of training time (see the module doc); None = none
    lr: float = 1e-4
    weight_decay: float = 0.01
    warmup_steps: int = 0
    warmup_ratio: float = 0.0  # used when warmup_steps is 0: warmup = round(ratio * max_steps)
    schedule: str = "linear"  # "linear" | "cosine" | "polynomial" | "noam" | "wsd" | "constant" (schedule.py)
    schedule_over: str = "steps"  # "minutes": the schedule runs over max_minutes of training time (module doc)
    lr_end: float = 1e-7  # polynomial: the lr the decay ends at (transformers' default)
    schedule_power: float = 1.0  # polynomial: the exponent (1 = BERT's linear decay to lr_end)
    decay_ratio: float = 0.2  # wsd: the share of max_steps spent decaying (Hagele et al. 2024 use 0.2)
    grad_clip: float = 1.0  # max global L2 norm of the gradient; 0 turns clipping off
    grad_accum: int = 1  # micro-batches per optimizer step (per rank)
    batch_size: int = 32  # examples per micro-batch per rank
    precision: str = "auto"  # bf16 on a bf16 GPU, fp16 + grad scaler on older GPUs, fp32 on CPU (runtime/precision.py)
    llrd: float | None = None  # layer-wise lr decay factor, e.g. 0.8 for fine-tuning
    head_lr: float | None = None  # lr of the task head (outside the encoder); None = lr
    eval_every: int = 0  # steps between evaluations; 0 = only at the end
    eval_at_start: bool = False  # also evaluate before the first step (step 0): the score the start model brings
    save_every: int = 0  # steps between checkpoints; 0 = only at the end; -1 = never (no resume)
    keep_last: int = 2  # checkpoints kept on disk (older ones deleted); 0 = keep every one (a whole curve to score)
    log_every: int = 10  # steps averaged into one metrics row
    seed: int = 0
    device: str = "auto"  # "auto" = cuda when available, else cpu
    adam_eps: float = 1e-6
    adam_beta2: float = 0.999
    report_to: str = "none"  # "tensorboard": the metric rows also as TensorBoard scalars (reporting.py)
    strategy: str = "ddp"  # under torchrun: "ddp" = a full copy per process, "fsdp" = sharded (fsdp.py)
    compile: bool = False  # torch.compile each encoder layer (the model's compile_layers): measured on GPUs only

    def precision_on(self, device) -> str:
        """train.precision resolved for `device` (runtime/precision.py; FSDP has no gradient scaler, so no
        fp16 there). The recipes call it as soon as the device is known, before any data is read: fp16
        without a GPU used to fail only after the tokenizer and the shards were built."""
        return resolve_precision(self.precision, device, scaler_ok=self.strategy != "fsdp")

    def __post_init__(self) -> None:
        for name in ("max_steps", "grad_accum", "batch_size", "log_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"train.{name} must be a positive integer, got {value!r}")
        if not isinstance(self.keep_last, int) or isinstance(self.keep_last, bool) or self.keep_last < 0:
            raise ConfigError(f"train.keep_last must be an integer >= 0: how many of the newest checkpoints to "
                              f"keep, or 0 to keep every checkpoint; got {self.keep_last!r}")
        for name in ("eval_every", "save_every", "warmup_steps"):
            value = getattr(self, name)
            lowest = -1 if name == "save_every" else 0
            if not isinstance(value, int) or isinstance(value, bool) or value < lowest:
                raise ConfigError(f"train.{name} must be an integer >= {lowest}, got {value!r}")
        if self.max_minutes is not None and not (
                isinstance(self.max_minutes, (int, float)) and not isinstance(self.max_minutes, bool)
                and math.isfinite(self.max_minutes) and self.max_minutes > 0):
            raise ConfigError(f"train.max_minutes must be a positive number of minutes (or unset: no time "
                              f"limit), got {self.max_minutes!r}")
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):  # inf: NaN weights
            raise ConfigError(f"train.lr must be a positive number (e.g. 1e-4), got {self.lr!r}")
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"train.schedule {self.schedule!r} is not known; use one of {SCHEDULES}")
        if self.schedule_over not in ("steps", "minutes"):
            raise ConfigError(f"train.schedule_over must be \"steps\" (the lr schedule runs over train.max_steps) "
                              f"or \"minutes\" (over train.max_minutes of training time), got {self.schedule_over!r}")
        if self.schedule_over == "minutes" and self.max_minutes is None:
            raise ConfigError("train.schedule_over = \"minutes\" runs the lr schedule over the time budget: "
                              "set train.max_minutes too (e.g. --set train.max_minutes=10)")
        if self.schedule == "polynomial" and not (0 <= self.lr_end < self.lr and self.schedule_power > 0):
            raise ConfigError(f"the polynomial schedule decays from train.lr ({self.lr}) to train.lr_end "
                              f"({self.lr_end}) with exponent train.schedule_power ({self.schedule_power}): "
                              "lr_end must be in [0, lr) and schedule_power > 0")
        if not (isinstance(self.decay_ratio, (int, float)) and not isinstance(self.decay_ratio, bool)
                and 0 < self.decay_ratio <= 1):
            raise ConfigError(f"train.decay_ratio (the wsd schedule's share of steps spent decaying) must be "
                              f"in (0, 1], got {self.decay_ratio!r}")
        check_precision(self.precision, "train.precision")
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise ConfigError(f"train.warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.warmup_steps and self.warmup_ratio:
            raise ConfigError("set train.warmup_steps or train.warmup_ratio, not both")
        if self.llrd is not None and not 0.0 < self.llrd <= 1.0:
            raise ConfigError(f"train.llrd must be in (0, 1], got {self.llrd}")
        if self.head_lr is not None and not (isinstance(self.head_lr, (int, float)) and math.isfinite(self.head_lr)
                                             and self.head_lr > 0):
            raise ConfigError(f"train.head_lr must be a positive number (or unset: the head trains at train.lr), "
                              f"got {self.head_lr!r}")
        for name in ("compile", "eval_at_start"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"train.{name} must be true or false, got {getattr(self, name)!r}")
        if self.compile and self.strategy == "fsdp":
            raise ConfigError("train.compile compiles the layers of one full model: not with train.strategy = "
                              "\"fsdp\" (use ddp, or leave compile off)")
        check_report_to(self.report_to)  # an unknown target, or tensorboard without its package
        # fsdp needs torchrun (whose WORLD_SIZE init_distributed reads too): said before any work
        check_strategy(self.strategy, self.precision, int(os.environ.get("WORLD_SIZE", "1")))
        self._check_optimizer_and_seed()

    def _check_optimizer_and_seed(self) -> None:
        """Ranges of the AdamW settings, the seed and the device (NaN fails every comparison)."""
        def number(value) -> bool:
            return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

        if not (number(self.adam_eps) and self.adam_eps > 0):
            raise ConfigError(f"train.adam_eps must be a positive number (e.g. 1e-6), got {self.adam_eps!r}")
        if not (number(self.adam_beta2) and 0 <= self.adam_beta2 < 1):
            raise ConfigError(f"train.adam_beta2 must be a number in [0, 1) (e.g. 0.999), got {self.adam_beta2!r}")
        if not (number(self.weight_decay) and self.weight_decay >= 0):
            raise ConfigError(f"train.weight_decay must be a number >= 0, got {self.weight_decay!r}")
        if not (number(self.schedule_power) and self.schedule_power > 0 and number(self.lr_end) and self.lr_end >= 0):
            raise ConfigError(f"train.schedule_power must be a number > 0 and train.lr_end a number >= 0, got "
                              f"{self.schedule_power!r} and {self.lr_end!r}")
        if not (number(self.grad_clip) and self.grad_clip >= 0):
            raise ConfigError(f"train.grad_clip must be a number >= 0 (0 = off), got {self.grad_clip!r}")
        if not (isinstance(self.seed, int) and not isinstance(self.seed, bool) and 0 <= self.seed < 2**63):
            raise ConfigError(f"train.seed must be an integer in [0, 2**63), got {self.seed!r}")
        if not (isinstance(self.device, str) and DEVICE_NAME.match(self.device)):
            raise ConfigError(f"train.device must be one of {DEVICES}, got {self.device!r}")

    @property
    def warmup(self) -> int:
        steps = self.warmup_steps or round(self.warmup_ratio * self.max_steps)
        return min(steps, self.max_steps)

    def lr_schedule(self) -> WarmupDecay:
        """The lr multiplier of step s (schedule.py) these fields ask for; e = lr_end / lr."""
        return WarmupDecay(self.warmup, self.max_steps, self.schedule, self.schedule_power, self.lr_end / self.lr,
                           self.decay_ratio)

    @classmethod
    def from_dict(cls, values: dict) -> "TrainConfig":
        """From a TOML `[train]` table; unknown keys raise ConfigError with a suggestion."""
        return dataclass_from_dict(cls, values, "train")


def warn_if_warmup_fills_the_run(config: TrainConfig) -> None:
    """A short run that kept a long recipe's warm-up (max_steps=20, warmup_steps=100) only ever
    raises the lr and ends at its peak: say so, naming both numbers and the fix."""
    asked = config.warmup_steps or round(config.warmup_ratio * config.max_steps)
    if asked < config.max_steps:
        return
    setting = (f"train.warmup_steps={config.warmup_steps}" if config.warmup_steps
               else f"train.warmup_ratio={config.warmup_ratio} ({asked} steps)")
    warnings.warn(f"{setting} is at least the run's train.max_steps={config.max_steps}: the learning rate only "
                  f"rises and the run ends at its peak; lower the warm-up (e.g. --set train.warmup_steps="
                  f"{config.max_steps // 10}, a tenth of the run) or raise train.max_steps", stacklevel=3)
