"""The L(C) report of a sweep: its frontier, the fit with standard errors, the compute-optimal
size at each compute, and the plot (what `bertkit scale frontier` runs and the sweep writes as
OUT/frontier.json and OUT/frontier.png; compute_frontier.py holds the envelope and the fit).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from typing import Callable, Sequence

import numpy as np

from bertkit.analysis.compute_frontier import (curve_points, fit_frontier, lower_envelope,
                                               optimal_size_exponent, optimal_sizes)
from bertkit.analysis.scaling import (CHINCHILLA, KAPLAN, PowerLawFit, chinchilla_compute_exponent, draw_references,
                                      load_sweep)
from bertkit.errors import DataError
from bertkit.runtime.plotting import pyplot, save_png


def frontier_result(records: Sequence[dict], fit_offset: bool = True, min_compute: float = 0.0) -> dict:
    """Points, frontier, fit and compute-optimal sizes of a sweep's records, as one JSON-able dict."""
    points = curve_points(records)
    front = lower_envelope(points)
    fit = fit_frontier(front, fit_offset, min_compute)
    try:
        size_slope = optimal_size_exponent(front, min_compute)
    except DataError:  # one size owns the whole frontier: no growth to read
        size_slope = None
    return {"compute_definition": "C = 6 N D (N non-embedding parameters, D tokens seen)",
            "points": [vars(p) for p in points], "frontier": [vars(p) for p in front],
            "min_compute": min_compute,
            "fit": {**fit.to_dict(), "c_c": fit.n_c, "note": "a fit of L against C: the n_c fields are C_c"},
            "optimal_sizes": [vars(r) for r in optimal_sizes(front)],
            "optimal_size_exponent": None if size_slope is None else {"value": size_slope[0], "se": size_slope[1]},
            "published": {"kaplan_alpha_c_min": KAPLAN["alpha_c_min"],
                          "chinchilla_compute_exponent": chinchilla_compute_exponent(),
                          "kaplan_n_opt_exponent": KAPLAN["n_opt_exponent"],
                          "chinchilla_n_opt_exponent": CHINCHILLA["beta"] / (CHINCHILLA["alpha"] + CHINCHILLA["beta"])}}


def frontier_lines(result: dict, fit: PowerLawFit) -> list[str]:
    """The compute-optimal sizes, the law with its standard errors, and the published exponents."""
    lines = [f"frontier: {len(result['frontier'])} of {len(result['points'])} learning-curve points "
             f"({result['compute_definition']})",
             f"{'compute-optimal size':>22}  {'N':>10}  {'from C':>9}  {'to C':>9}"]
    for r in result["optimal_sizes"]:
        lines.append(f"{r['name']:>22}  {round(r['n_params']):>10,}  {r['start']:9.3g}  {r['end']:9.3g}")
    law = "(C_c/C)^alpha_C + L_inf" if fit.fit_offset else "(C_c/C)^alpha_C"
    used = f" at C >= {result['min_compute']:.3g}" if result["min_compute"] else ""
    lines.append(f"fit L(C) = {law} on {fit.n_points} frontier points{used}: alpha_C = {fit.alpha:.3f} +/- "
                 f"{fit.alpha_se:.3f}, C_c = {fit.n_c:.3g} (ln C_c = {fit.log_n_c:.2f} +/- {fit.log_n_c_se:.2f})"
                 + (f", L_inf = {fit.l_inf:.3f} +/- {fit.l_inf_se:.3f}" if fit.fit_offset else ""))
    pub = result["published"]
    lines.append(f"published: Kaplan et al. 2020 alpha_C(min) = {pub['kaplan_alpha_c_min']:.3f} (no offset); "
                 "Chinchilla's law (approach 3) puts its reducible loss at "
                 f"C^-{pub['chinchilla_compute_exponent']:.3f} "
                 "along its compute-optimal path (offset form)")
    if result["optimal_size_exponent"]:
        b = result["optimal_size_exponent"]
        lines.append(f"compute-optimal size N_opt ~ C^b on the frontier: b = {b['value']:.2f} +/- {b['se']:.2f} "
                     f"(Kaplan {pub['kaplan_n_opt_exponent']:.2f}, Chinchilla {pub['chinchilla_n_opt_exponent']:.2f}; "
                     "a staircase of few sizes, a rough reading)")
    lines.append("(points of one learning curve share a run, so these standard errors are optimistic)")
    return lines


def plot_frontier(result: dict, fit: PowerLawFit, path: str | os.PathLike) -> None:
    """Each size's learning curve L(C) (log x), the frontier points, the fit, and the published
    compute exponents drawn through the fit (shapes only)."""
    fig, ax = pyplot().subplots(figsize=(6.4, 4.4), dpi=100)
    curves: dict[str, list] = defaultdict(list)
    for p in result["points"]:
        curves[(p["n_params"], p["name"])].append((p["compute"], p["loss"]))
    for k, ((n, name), pts) in enumerate(sorted(curves.items())):
        c, y = np.asarray(sorted(pts)).T
        ax.plot(c, y, "-", color=pyplot().cm.viridis(k / max(1, len(curves) - 1)), alpha=0.8, lw=1,
                label=f"{name} (N = {n:.3g})")
    front = np.asarray([(p["compute"], p["loss"]) for p in result["frontier"]])
    ax.scatter(front[:, 0], front[:, 1], s=14, color="k", zorder=3, label="frontier")
    used = front[front[:, 0] >= result["min_compute"], 0]
    xs = np.geomspace(used.min(), used.max(), 100)
    ax.plot(xs, fit.predict(xs), "-", color="C3", lw=2, label="fit")
    draw_references(ax, xs, fit, {"Kaplan α_C(min)": KAPLAN["alpha_c_min"],
                                  "Chinchilla αβ/(α+β)": chinchilla_compute_exponent()})
    ax.set_title(f"L = (C_c/C)^α_C{' + L_inf' if fit.fit_offset else ''}:  α_C = {fit.alpha:.3f} ± "
                 f"{fit.alpha_se:.3f}" + (f", L_inf = {fit.l_inf:.2f}" if fit.fit_offset else ""), fontsize=9)
    ax.set_xscale("log")
    ax.set_xlabel("training compute C = 6 N D (FLOPs)")
    ax.set_ylabel("held-out MLM loss (nats/token)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    save_png(fig, path)


def frontier_report(records: Sequence[dict], fit_offset: bool = True, min_compute: float = 0.0,
                    plot: str | None = None, as_json: bool = False,
                    log: Callable[[str], None] = print) -> dict:
    """`frontier_result` of the records, plotted if asked and logged as text (or one JSON object)."""
    result = frontier_result(records, fit_offset, min_compute)
    fit = PowerLawFit(**{k: result["fit"][k] for k in PowerLawFit.__dataclass_fields__})
    if plot:
        plot_frontier(result, fit, plot)
    for line in [json.dumps(result, ensure_ascii=False)] if as_json else frontier_lines(result, fit):
        log(line)
    if plot and not as_json:
        log(f"wrote {plot}")
    return result


def frontier_file(path: str, fit_offset: bool = True, min_compute: float = 0.0, plot: str | None = None,
                  as_json: bool = False, log: Callable[[str], None] = print) -> dict:
    """`frontier_report` on a sweep's JSON-lines file."""
    if not os.path.isfile(path):
        raise DataError(f"sweep file {path} does not exist; pass the sweep.jsonl a sweep wrote")
    return frontier_report(load_sweep(path), fit_offset, min_compute, plot, as_json, log)
