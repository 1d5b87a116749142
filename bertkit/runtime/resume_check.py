"""A resumed run trains with the options it was started with, or says which ones differ.

Resuming restores the optimizer, schedule, data position and RNG streams of a checkpoint; a
changed learning rate, batch size, seed or sequence length would either be ignored (the
restored state wins) or silently make a different run than the one the checkpoint and the
saved config describe. So `check_resume_options(saved, current)` compares the two configs
(nested dicts, flattened to `section.key`) and refuses any difference outside `MAY_CHANGE`,
listing every changed key as `old -> new`.

`MAY_CHANGE` holds what does not change the optimisation of the steps already planned:
the length of the run (extend it: `train.max_steps`, `train.max_minutes`, fine-tuning's
`train.epochs` and `train.min_steps`; the lr
schedule then follows the new length, see `Trainer._apply_current_schedule`), how often it
evaluates, saves and logs, how many checkpoints it keeps, early-stopping patience, and the
device (moving a run to another machine; exactness across devices is not promised).

An option the saved config lacks (one a later bertkit added, e.g. `train.decay_ratio`) passes
when the resumed run leaves it at its default: the old run trained with that behaviour.
"""

from __future__ import annotations

import json
import math
from typing import Any

from bertkit.errors import ConfigError

MAY_CHANGE = frozenset({
    "train.max_steps", "train.epochs", "train.min_steps", "train.max_minutes",  # extend (or shorten) the run
    "train.eval_every", "train.evals_per_epoch", "train.save_every", "train.log_every", "train.keep_last",
    "train.eval_at_start",  # read at step 0 only: a resumed run logged that evaluation, or never will
    "train.patience", "early_stopping.patience",  # wait longer (or less) before stopping early
    "train.device", "train.compile",  # where and how the same steps run
    # ddp <-> fsdp: both save one process's layout (tests/train/test_fsdp.py), so an FSDP run can
    # go on in one process, which FSDP refuses; like a changed process count, not bit-exact
    "train.strategy",
    "train.baseline",  # the TF-IDF baseline beside the score: computed after training, changes no step
})

# Fingerprints of what a run read, known only once the data is read (after this check): the
# command compares them itself then (bertkit/recipes/finetune.py, check_same_data).
CHECKED_LATER = frozenset({"run.train_sha256", "run.dev_sha256"})

# Options whose "auto" picks a value per device, as train.device may change: a run started with
# an explicit value (train.precision = "fp32", the default before "auto") resumes at the default.
FOLLOWS_DEVICE = frozenset({"train.precision"})


def flatten(config: dict, prefix: str = "") -> dict[str, Any]:
    """{"train": {"lr": 1e-3}} -> {"train.lr": 1e-3}; values as JSON would store them."""
    out = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and prefix == "":
            out.update(flatten(value, name + "."))
        else:
            out[name] = json.loads(json.dumps(value))  # tuples -> lists, as read back from a file
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b and isinstance(a, bool) == isinstance(b, bool)  # true is not 1


def changed_options(saved: dict, current: dict, may_change=MAY_CHANGE, defaults: dict | None = None) -> list[str]:
    """`key: old -> new` for every option that differs and may not change on resume."""
    old, new, default = flatten(saved), flatten(current), flatten(defaults or {})
    missing = object()
    lines = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key, missing), new.get(key, missing)
        if key in may_change or key in CHECKED_LATER or _same(a, b) or (key in FOLLOWS_DEVICE and b == "auto"):
            continue
        if a is missing and key in default and _same(default[key], b):
            continue  # an option newer than the checkpoint, left at its default
        lines.append(f"{key}: {'(unset)' if a is missing else json.dumps(a, ensure_ascii=False)} -> "
                     f"{'(unset)' if b is missing else json.dumps(b, ensure_ascii=False)}")
    return lines


def check_resume_options(saved: dict, current: dict, where: str, defaults: dict | None = None) -> None:
    """Raise ConfigError listing the options that differ from the run being resumed (`where`);
    `defaults` (the same layout) lets options newer than the checkpoint pass at their defaults."""
    lines = changed_options(saved, current, defaults=defaults)
    if lines:
        allowed = sorted(MAY_CHANGE & set(flatten(current)))  # the ones this kind of run has
        raise ConfigError(f"--resume continues {where} with the options it was started with, but these "
                          f"differ: {'; '.join(lines)}; pass the original values (only "
                          f"{', '.join(allowed)} may change), or start a new run in another --out")
