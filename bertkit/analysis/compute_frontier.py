"""Kaplan's L(C): the compute-efficient frontier of a sweep's learning curves and its power law.

Compute: C = 6 N D, with N the non-embedding parameters (the encoder layers, Kaplan's N) and
D the tokens seen so far (steps x batch x sequence length, padding included). The 6 is 2
FLOPs per parameter per token forward and 4 backward; like Kaplan et al. 2020 (section 2.1)
it leaves out the embeddings, the attention scores (4 L T H per token) and, here, the MLM head.

Each size of a sweep records its held-out loss every k steps, a learning curve of (C, L)
points. The frontier is their lower envelope over all sizes: a point is on it when no point of
any size reached a loss as low or lower with no more compute, i.e. the best loss any size
reached for that compute (the envelope of Kaplan's figure 1, right; his L(C_min)). Fitted by
the least squares of `fit_power_law`:

    L(C) = (C_c / C)^alpha_C + L_inf        (L_inf = 0 for Kaplan's form, eq. 1.3)

Kaplan et al. 2020 measured alpha_C^min = 0.050 (C_c^min = 3.1e8 PF-days; scaling.KAPLAN) on the frontier of
decoder language models, and found the compute-optimal size growing as N_opt ~ C^0.73;
Hoffmann et al. 2022's approach-3 law gives N_opt ~ C^(beta / (alpha + beta)) = C^0.45
(`optimal_size_exponent` reads this slope off the frontier).

The points of one curve are not independent draws (they share a run), so the least-squares
standard errors of a frontier fit are optimistic; read them as the fit's precision on these
points, not as a confidence interval for the law.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from bertkit.analysis.scaling import PowerLawFit, fit_power_law
from bertkit.errors import DataError


@dataclass(frozen=True)
class CurvePoint:
    """One held-out evaluation of one size: training compute so far and the loss there."""

    compute: float
    loss: float
    name: str
    n_params: float
    step: int


def training_compute(n_params, tokens):
    """C = 6 N D in FLOPs (N non-embedding parameters, D tokens seen)."""
    n, d = np.asarray(n_params, dtype=np.float64), np.asarray(tokens, dtype=np.float64)
    if np.any(~np.isfinite(n)) or np.any(n <= 0) or np.any(~np.isfinite(d)) or np.any(d < 0):
        raise DataError(f"compute needs N > 0 and D >= 0, got N = {n_params!r}, D = {tokens!r}")
    return 6.0 * n * d


def _run_name(record: dict, index: int) -> str:
    """A sweep record's name, its size, or (a file written by hand) its place among the finished runs."""
    return str(record.get("name") or record.get("size") or f"finished run {index + 1}")


def curve_points(records: Sequence[dict]) -> list[CurvePoint]:
    """Every learning-curve point of the finished ("ok") sweep records, step 0 left out."""
    ok = [r for r in records if r.get("status", "ok") == "ok"]
    if not ok:
        raise DataError("the sweep has no finished runs to draw a frontier from")
    missing = [_run_name(r, i) for i, r in enumerate(ok) if not r.get("curve")]
    if missing:
        raise DataError(f"runs without a learning curve: {missing[:3]}; the frontier needs the held-out loss at "
                        "several steps of each size (`bertkit scale sweep` records it every --eval-every steps)")
    points = []
    for i, r in enumerate(ok):
        name = _run_name(r, i)
        for p in r["curve"]:
            if p["step"] <= 0:
                continue
            if not (np.isfinite(p["loss"]) and p["loss"] > 0 and np.isfinite(p["compute"]) and p["compute"] > 0):
                raise DataError(f"{name} step {p['step']}: loss {p['loss']} at compute {p['compute']}; "
                                "losses and compute must be positive and finite (drop diverged runs)")
            points.append(CurvePoint(float(p["compute"]), float(p["loss"]), name, float(r["n_params"]), int(p["step"])))
    return points


def lower_envelope(points: Sequence[CurvePoint]) -> list[CurvePoint]:
    """The points no other point beats: lower loss than every point with less or equal compute.

    Sorted by compute (ties: lowest loss first), a point joins when it is strictly below the
    running minimum; the result is strictly decreasing in loss and increasing in compute.
    """
    if not points:
        raise DataError("no learning-curve points to take an envelope of")
    best = np.inf
    front = []
    for p in sorted(points, key=lambda p: (p.compute, p.loss)):
        if p.loss < best:
            if front and front[-1].compute == p.compute:  # same compute, lower loss: replace
                front.pop()
            front.append(p)
            best = p.loss
    return front


def fit_frontier(front: Sequence[CurvePoint], fit_offset: bool = True, min_compute: float = 0.0) -> PowerLawFit:
    """L(C) = (C_c/C)^alpha_C (+ L_inf) fitted to the frontier points at compute >= min_compute.

    The returned fit's "n" fields are the compute axis: `log_n_c` is ln C_c, `predict(C)`."""
    used = [p for p in front if p.compute >= min_compute]
    if len(used) < len(front) and len(used) < (4 if fit_offset else 3):
        raise DataError(f"--min-compute {min_compute:g} leaves {len(used)} frontier point(s); lower it")
    return fit_power_law([p.compute for p in used], [p.loss for p in used], fit_offset, what="frontier points")


@dataclass(frozen=True)
class OptimalRange:
    """A size that is compute-optimal (on the frontier) from compute `start` to `end`."""

    name: str
    n_params: float
    start: float
    end: float
    points: int


def optimal_sizes(front: Sequence[CurvePoint]) -> list[OptimalRange]:
    """Runs of consecutive frontier points of the same size: which size is best at each compute."""
    ranges: list[OptimalRange] = []
    for p in front:
        last = ranges[-1] if ranges else None
        if last is not None and last.name == p.name:
            ranges[-1] = OptimalRange(last.name, last.n_params, last.start, p.compute, last.points + 1)
        else:
            ranges.append(OptimalRange(p.name, p.n_params, p.compute, p.compute, 1))
    return ranges


def optimal_size_exponent(front: Sequence[CurvePoint], min_compute: float = 0.0) -> tuple[float, float]:
    """(slope, standard error) of ln N against ln C over the frontier points at compute >= min_compute:
    the b of N_opt ~ C^b (Kaplan: 0.73; Chinchilla's approach 3: beta / (alpha + beta) = 0.45).
    With a handful of sizes the frontier's N is a staircase, so this is a rough reading."""
    used = [p for p in front if p.compute >= min_compute]
    x, y = np.log([p.compute for p in used]), np.log([p.n_params for p in used])
    if len(used) < 3 or np.unique(y).size < 2:
        raise DataError("the frontier needs at least 3 points and 2 sizes to read how N_opt grows with C")
    (slope, intercept), cov = np.polyfit(x, y, 1, cov="unscaled")
    resid = y - (slope * x + intercept)
    return float(slope), float(math.sqrt(cov[0, 0] * (resid @ resid) / (len(used) - 2)))
