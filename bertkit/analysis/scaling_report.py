"""Scaling-law reports: the published formulas at a budget, and a fit of L(N) to a sweep's
results with its table and warnings (what `bertkit scale formula|fit` run; scaling.py holds
the laws and the fit itself).
"""

from __future__ import annotations

import json
import math
import os
from typing import Callable, Sequence

from bertkit.analysis.scaling import (PowerLawFit, chinchilla_loss, chinchilla_optimal, fit_sweep, kaplan_loss,
                                      load_sweep, plot_scaling)
from bertkit.errors import ConfigError, DataError


def check_positive(name: str, value) -> None:
    """An option (`--name`) that must be a positive finite number, if given."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise ConfigError(f"--{name} must be a positive number, got {value}")


# ----------------------------------------------------------------------------- formula
def formula(compute: float | None = None, params: float | None = None, tokens: float | None = None) -> dict:
    """Chinchilla's compute-optimal N and D at `compute` (default 6 N D of the given allocation),
    both papers' losses there, and (with params and tokens) the losses of that allocation."""
    for name, value in (("compute", compute), ("params", params), ("tokens", tokens)):
        check_positive(name, value)
    if (params is None) != (tokens is None):
        raise ConfigError("give --params and --tokens together (a model size and its training tokens)")
    if compute is None and params is None:
        raise ConfigError("give --compute FLOPS, or --params N --tokens D (or all three)")
    compute = compute if compute is not None else 6.0 * params * tokens
    n_opt, d_opt = (float(v) for v in chinchilla_optimal(compute))
    result = {
        "compute": compute,
        "chinchilla_optimal": {"params": n_opt, "tokens": d_opt, "tokens_per_param": d_opt / n_opt,
                               "chinchilla_loss": float(chinchilla_loss(n_opt, d_opt)),
                               "kaplan_loss": float(kaplan_loss(n_opt, d_opt))},
    }
    if params is not None:
        result["given"] = {"params": params, "tokens": tokens, "compute": 6.0 * params * tokens,
                           "chinchilla_loss": float(chinchilla_loss(params, tokens)),
                           "kaplan_loss": float(kaplan_loss(params, tokens))}
    return result


def formula_lines(result: dict) -> list[str]:
    """`formula`'s result as the lines `bertkit scale formula` prints."""
    opt = result["chinchilla_optimal"]
    lines = [f"compute C = {result['compute']:.3g} FLOPs (C = 6 N D)",
             f"Chinchilla optimum (Hoffmann et al. 2022, approach 3): N = {opt['params']:.3g} parameters, "
             f"D = {opt['tokens']:.3g} tokens ({opt['tokens_per_param']:.0f} tokens per parameter)",
             f"  loss there: Chinchilla L(N, D) = {opt['chinchilla_loss']:.3f}, "
             f"Kaplan L(N, D) = {opt['kaplan_loss']:.3f} nats/token"]
    if "given" in result:
        g = result["given"]
        lines.append(f"given N = {g['params']:.3g}, D = {g['tokens']:.3g} ({g['tokens'] / g['params']:.1f} tokens per "
                     f"parameter, C = {g['compute']:.3g}): Chinchilla L = {g['chinchilla_loss']:.3f}, "
                     f"Kaplan L = {g['kaplan_loss']:.3f} nats/token")
    lines.append("(the two papers' losses are on different data and tokenizers: compare shapes, not values)")
    return lines


def report_formula(compute: float | None = None, params: float | None = None, tokens: float | None = None,
                   as_json: bool = False, log: Callable[[str], None] = print) -> dict:
    """Log `formula`'s result as text (or one JSON object) and return it."""
    result = formula(compute, params, tokens)
    for line in [json.dumps(result, ensure_ascii=False)] if as_json else formula_lines(result):
        log(line)
    return result


# ----------------------------------------------------------------------------- fit
def fit_warnings(fit: PowerLawFit) -> list[str]:
    """Signs that the sizes do not pin the law down (the numbers are then not worth quoting)."""
    out = []
    if not fit.alpha_se < abs(fit.alpha):
        out.append(f"alpha is not determined: its standard error ({fit.alpha_se:.3g}) is at least its value; "
                   "the losses change too little over these sizes (train longer, or spread the sizes)")
    if fit.fit_offset and fit.l_inf < 0:
        out.append(f"the fitted L_inf = {fit.l_inf:.3g} is negative, which no loss can reach; "
                   "try --no-offset, or more sizes")
    return out


def fit_lines(ok: Sequence[dict], fit: PowerLawFit) -> list[str]:
    """Per size the loss, the fit and the residual; the law with its standard errors; warnings."""
    lines = [f"{'N (non-emb.)':>13}  {'loss':>7}  {'fit':>7}  {'resid.':>7}"]
    for r in sorted(ok, key=lambda r: r["n_params"]):
        pred = float(fit.predict(r["n_params"]))
        lines.append(f"{round(r['n_params']):>13,}  {r['loss']:7.4f}  {pred:7.4f}  {r['loss'] - pred:+7.4f}")
    law = "(N_c/N)^alpha + L_inf" if fit.fit_offset else "(N_c/N)^alpha"
    lines.append(f"fit L(N) = {law} on {fit.n_points} sizes: alpha = {fit.alpha:.3f} +/- {fit.alpha_se:.3f}, "
                 f"N_c = {fit.n_c:.3g} (ln N_c = {fit.log_n_c:.2f} +/- {fit.log_n_c_se:.2f})"
                 + (f", L_inf = {fit.l_inf:.3f} +/- {fit.l_inf_se:.3f}" if fit.fit_offset else ""))
    dof = fit.n_points - (3 if fit.fit_offset else 2)
    lines.append(f"(standard errors from the least-squares covariance with {dof} residual degree(s) of freedom; "
                 "few points make them rough)")
    return lines + [f"warning: {warning}" for warning in fit_warnings(fit)]


def fit_and_report(records: list[dict], fit_offset: bool, plot: str | None, as_json: bool = False,
                   log: Callable[[str], None] = print) -> PowerLawFit:
    """Fit L(N) to the records that finished ("ok"), plot it if asked, log the report."""
    ok = [r for r in records if r.get("status", "ok") == "ok"]
    for r in ok:
        r.setdefault("status", "ok")
    fit = fit_sweep(ok, fit_offset=fit_offset)
    if plot:
        plot_scaling(ok, fit, plot)
    if as_json:
        log(json.dumps(fit.to_dict(), ensure_ascii=False))
        return fit
    for line in fit_lines(ok, fit):
        log(line)
    if plot:
        log(f"wrote {plot}")
    return fit


def fit_sweep_file(path: str, fit_offset: bool = True, plot: str | None = None, as_json: bool = False,
                   log: Callable[[str], None] = print) -> PowerLawFit:
    """`fit_and_report` on a sweep's JSON-lines file (each finished record needs n_params and loss)."""
    if not os.path.isfile(path):
        raise DataError(f"sweep file {path} does not exist; pass the sweep.jsonl a sweep wrote")
    records = load_sweep(path)
    bad = [k + 1 for k, r in enumerate(records) if r.get("status", "ok") == "ok"
           and not ("n_params" in r and "loss" in r)]
    if bad:
        raise DataError(f"{path}: record {bad[0]} has no n_params/loss; each line needs both")
    return fit_and_report(records, fit_offset, plot, as_json, log)
