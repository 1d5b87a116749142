"""Matplotlib for bertkit's PNG files: the Agg backend, and atomic PNG writes."""

from __future__ import annotations

import io
import os

from bertkit.errors import BertkitError
from bertkit.io import atomic_write_bytes

NO_MATPLOTLIB = "matplotlib is not installed (pip install matplotlib)"


def can_plot() -> bool:
    """Whether matplotlib can be imported: a declared dependency, which a bare GPU image with
    only torch and its friends may still lack."""
    try:
        import matplotlib  # noqa: F401  (optional in practice: see above; no backend chosen here)
    except ImportError:
        return False
    return True


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only: servers have no display)."""
    if not can_plot():
        raise BertkitError(f"{NO_MATPLOTLIB}: bertkit draws its PNG files with it")
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
