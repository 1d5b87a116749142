"""Where the metric rows go besides OUT/metrics.jsonl: `train.report_to` ("none" or "tensorboard").

With "tensorboard" every number of every row the Trainer logs is also written as a TensorBoard
scalar, tagged SPLIT/NAME (`train/loss`, `train/lr`, `eval/mlm_loss`, ...) at the row's step, in
OUT/tensorboard/ (view with `tensorboard --logdir OUT/tensorboard`). It uses torch's own writer,
`torch.utils.tensorboard.SummaryWriter`, which needs the `tensorboard` package (the optional
extra `bertkit[tensorboard]`). A resumed run purges the events past its checkpoint's step, as the
metrics file is cut there.
"""

from __future__ import annotations

import os

from bertkit.errors import ConfigError

REPORT_TO = ("none", "tensorboard")
TENSORBOARD_DIR = "tensorboard"


def check_report_to(value: str) -> None:
    """A ConfigError for an unknown target, or for tensorboard without its package."""
    if value not in REPORT_TO:
        raise ConfigError(f"train.report_to {value!r} is not known; use one of {', '.join(REPORT_TO)}")
    if value == "tensorboard":
        _summary_writer_class()


def _summary_writer_class():
    try:
        from torch.utils.tensorboard import SummaryWriter  # optional: needs the tensorboard package
    except ImportError:
        raise ConfigError('train.report_to = "tensorboard" needs the tensorboard package: pip install tensorboard '
                          '(or pip install "bertkit[tensorboard]")') from None
    return SummaryWriter


class TensorBoardReporter:
    """Writes each numeric field of a metrics row as the scalar SPLIT/FIELD at the row's step."""

    def __init__(self, out_dir: str, start_step: int = 0):
        writer_class = _summary_writer_class()
        # purge_step: on resume from step s, the events a killed run wrote past s are dropped
        purge = start_step + 1 if start_step else None
        self.writer = writer_class(os.path.join(out_dir, TENSORBOARD_DIR), purge_step=purge)

    def write(self, row: dict) -> None:
        split, step = row.get("split", "train"), row["step"]
        for name, value in row.items():
            if name not in ("step", "split") and isinstance(value, (int, float)) and not isinstance(value, bool):
                self.writer.add_scalar(f"{split}/{name}", value, global_step=step)

    def close(self) -> None:
        self.writer.close()


def open_reporter(report_to: str, out_dir: str, start_step: int = 0) -> TensorBoardReporter | None:
    """The reporter `report_to` names (None for "none")."""
    check_report_to(report_to)
    return TensorBoardReporter(out_dir, start_step) if report_to == "tensorboard" else None
