"""Matplotlib for bertkit's PNG files: the Agg backend, and atomic PNG writes."""

from __future__ import annotations

import io
import os

from bertkit.io import atomic_write_bytes


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only: servers have no display)."""
    # imported here, not at the top: the backend must be chosen before pyplot is imported, and
    # only when bertkit draws, so importing bertkit leaves a user's backend alone
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after the backend choice above

    return plt


def save_png(fig, path: str | os.PathLike) -> None:
    """Render to memory, then write atomically, so a crash never leaves a truncated PNG; closes `fig`."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=fig.dpi)
    pyplot().close(fig)
    atomic_write_bytes(path, buf.getvalue())
