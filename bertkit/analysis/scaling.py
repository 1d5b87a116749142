"""Scaling laws: the published formulas, a power-law fit with standard errors, and a sweep driver.

Losses are cross-entropy in nats per token. N = non-embedding parameters, D = training tokens,
C = training compute in FLOPs.

Kaplan et al. 2020, "Scaling Laws for Neural Language Models" (eqs. 1.1, 1.2, 1.5):
    L(N)    = (N_c / N)^a_N                      a_N = 0.076, N_c = 8.8e13
    L(D)    = (D_c / D)^a_D                      a_D = 0.095, D_c = 5.4e13
    L(N, D) = [(N_c / N)^(a_N / a_D) + D_c / D]^a_D
    L(C_min) = (C_c / C_min)^a_C                 a_C = 0.050, C_c = 3.1e8 PF-days (eq. 1.3; the
                                                 compute frontier, compute_frontier.py), with
                                                 N_opt ~ C^0.73 along it

Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models" (approach 3):
    L(N, D) = E + A / N^alpha + B / D^beta       E = 1.69, A = 406.4, B = 410.7,
                                                 alpha = 0.34, beta = 0.28
Minimising it under C = 6 N D (Lagrange: alpha A / N^alpha = beta B / D^beta) gives
    G = (alpha A / (beta B))^(1 / (alpha + beta))
    N_opt(C) = G (C/6)^(beta / (alpha + beta)),   D_opt(C) = (C/6)^(alpha / (alpha + beta)) / G.

What these constants give at Chinchilla's budget, C = 5.76e23 FLOPs: N_opt = 3.2e10,
D_opt = 3.0e12, D/N = 93 tokens per parameter. The paper trained Chinchilla with 70e9
parameters on 1.4e12 tokens (20 tokens per parameter, the allocation of its approaches 1 and
2). The gap is a known property of the published, rounded approach-3 constants (Besiroglu et
al. 2024, "Chinchilla Scaling: A replication attempt", re-fit them and get ~20). The loss
surface is flat along C = 6 N D: the formula puts 70B/1.4T only 0.006 nats (0.3%) above its
own optimum, which is far inside the fit's accuracy. `chinchilla_optimal` reports what the
formula gives; it does not force the ratio to 20.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np

from bertkit.errors import ConfigError, DataError
from bertkit.runtime.plotting import pyplot, save_png

# ----------------------------------------------------------------------------- published laws
PF_DAY = 1e15 * 86400  # FLOPs in a petaflop/s-day, Kaplan's unit of compute
KAPLAN = {"alpha_n": 0.076, "n_c": 8.8e13, "alpha_d": 0.095, "d_c": 5.4e13,
          "alpha_c_min": 0.050, "c_c_min": 3.1e8 * PF_DAY, "n_opt_exponent": 0.73}
CHINCHILLA = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
CHINCHILLA_BUDGET = 5.76e23  # FLOPs of Gopher and of Chinchilla (70B params, 1.4T tokens)
_clock = time.monotonic  # the sweep's wall clock; a module attribute so tests can fake it


def _positive(name: str, x) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ConfigError(f"{name} must be positive and finite, got {x!r}")
    return a


def kaplan_loss_n(n_params):
    """Kaplan L(N) = (N_c/N)^a_N: loss of a model with N non-embedding params, trained to convergence."""
    n = _positive("n_params", n_params)
    return (KAPLAN["n_c"] / n) ** KAPLAN["alpha_n"]


def kaplan_loss_d(tokens):
    """Kaplan L(D) = (D_c/D)^a_D: loss of a large model trained with early stopping on D tokens."""
    d = _positive("tokens", tokens)
    return (KAPLAN["d_c"] / d) ** KAPLAN["alpha_d"]


def kaplan_loss(n_params, tokens):
    """Kaplan L(N, D) = [(N_c/N)^(a_N/a_D) + D_c/D]^a_D; tends to L(N) as D -> inf, L(D) as N -> inf."""
    n, d = _positive("n_params", n_params), _positive("tokens", tokens)
    k = KAPLAN
    return ((k["n_c"] / n) ** (k["alpha_n"] / k["alpha_d"]) + k["d_c"] / d) ** k["alpha_d"]


def chinchilla_loss(n_params, tokens):
    """Hoffmann et al. approach 3: L(N, D) = E + A/N^alpha + B/D^beta."""
    n, d = _positive("n_params", n_params), _positive("tokens", tokens)
    c = CHINCHILLA
    return c["E"] + c["A"] / n ** c["alpha"] + c["B"] / d ** c["beta"]


def chinchilla_optimal(compute_flops) -> tuple[np.ndarray, np.ndarray]:
    """(N_opt, D_opt) minimising `chinchilla_loss` subject to C = 6 N D (closed form above)."""
    c6 = _positive("compute_flops", compute_flops) / 6.0
    a, b = CHINCHILLA["alpha"], CHINCHILLA["beta"]
    g = (a * CHINCHILLA["A"] / (b * CHINCHILLA["B"])) ** (1.0 / (a + b))
    return g * c6 ** (b / (a + b)), c6 ** (a / (a + b)) / g


# ----------------------------------------------------------------------------- fitting
@dataclass
class PowerLawFit:
    """L(N) = (N_c/N)^alpha + l_inf, with standard errors from the least-squares covariance.

    Internally the model is exp(a - alpha (ln N - x_mean)) + l_inf (centering ln N makes the
    normal equations well conditioned); `covariance` is over (a, alpha, l_inf) and
    ln N_c = a/alpha + x_mean.
    """

    alpha: float
    alpha_se: float
    log_n_c: float
    log_n_c_se: float
    l_inf: float
    l_inf_se: float
    a: float
    x_mean: float
    covariance: list  # 3x3, over (a, alpha, l_inf)
    rss: float
    n_points: int
    fit_offset: bool

    @property
    def n_c(self) -> float:
        # alpha near 0 (an undetermined fit) puts ln N_c in the thousands: infinite, not an error
        return math.exp(self.log_n_c) if self.log_n_c < 709 else math.inf

    def predict(self, n_params) -> np.ndarray:
        x = np.log(_positive("n_params", n_params)) - self.x_mean
        return np.exp(self.a - self.alpha * x) + self.l_inf

    def predict_se(self, n_params) -> np.ndarray:
        """Standard error of the fitted curve at N (delta method: sqrt(g^T Cov g))."""
        x = np.log(_positive("n_params", n_params)) - self.x_mean
        e = np.exp(self.a - self.alpha * x)
        g = np.stack([e, -x * e, np.full_like(e, 1.0 if self.fit_offset else 0.0)], axis=-1)
        return np.sqrt(np.einsum("...i,ij,...j->...", g, np.asarray(self.covariance), g))

    def to_dict(self) -> dict:
        return {**asdict(self), "n_c": self.n_c}


def _model(p: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Values and Jacobian of f(x) = exp(a - alpha x) + l_inf with respect to (a, alpha, l_inf)."""
    e = np.exp(p[0] - p[1] * x)
    return e + p[2], np.stack([e, -x * e, np.ones_like(x)], axis=1)


def fit_power_law(n_params: Sequence[float], losses: Sequence[float], fit_offset: bool = True,
                  what: str = "model sizes") -> PowerLawFit:
    """Least-squares fit of L(N) = (N_c/N)^alpha + l_inf (l_inf = 0 if not fit_offset); N may be
    any positive abscissa, e.g. compute for L(C) (`what` names it in errors).

    1. Start: for each l_inf on a grid below min(L), ln(L - l_inf) = a - alpha x is a straight
       line in x = ln N, fitted by linear least squares; keep the grid point whose curve has
       the smallest squared error in L.
    2. Refine all parameters by Levenberg–Marquardt on the squared error in L.
    3. Covariance s^2 (J^T J)^-1 with s^2 = RSS / (n - p), J the Jacobian at the optimum;
       standard errors are the square roots of its diagonal (delta method for ln N_c).

    Needs at least p + 1 distinct sizes (4 with the offset) to leave a residual degree of
    freedom for the error estimate.
    """
    n, y = _fit_points(n_params, losses, 3 if fit_offset else 2, what)
    n_par = 3 if fit_offset else 2
    x_mean = float(np.log(n).mean())
    x = np.log(n) - x_mean
    free = slice(0, n_par)  # without the offset, l_inf stays at 0 and is not a parameter
    p, rss = _levenberg_marquardt(x, y, *_grid_start(x, y, fit_offset), free)
    cov = _covariance(p, x, y, rss, free)
    a, alpha = p[0], p[1]
    g = np.array([1.0 / alpha, -a / alpha**2, 0.0])  # gradient of ln N_c = a/alpha + x_mean
    return PowerLawFit(
        alpha=float(alpha),
        alpha_se=float(math.sqrt(cov[1, 1])),
        log_n_c=float(a / alpha + x_mean),
        log_n_c_se=float(math.sqrt(g @ cov @ g)),
        l_inf=float(p[2]),
        l_inf_se=float(math.sqrt(cov[2, 2])),
        a=float(a),
        x_mean=x_mean,
        covariance=cov.tolist(),
        rss=rss,
        n_points=int(y.size),
        fit_offset=fit_offset,
    )


def _fit_points(n_params, losses, n_par: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(N, L) as float arrays, refused unless positive, finite, paired and with at least
    n_par + 1 distinct N (a residual degree of freedom for the error estimate)."""
    n = np.asarray(n_params, dtype=np.float64).reshape(-1)
    y = np.asarray(losses, dtype=np.float64).reshape(-1)
    if n.shape != y.shape:
        raise DataError(f"got {n.size} {what} but {y.size} losses; give one loss per point")
    if not (np.all(np.isfinite(n)) and np.all(n > 0) and np.all(np.isfinite(y)) and np.all(y > 0)):
        raise DataError("sizes and losses must be positive finite numbers (drop diverged runs)")
    distinct = np.unique(n).size
    if distinct < n_par + 1:
        raise DataError(
            f"too few points to fit: {distinct} distinct {what}, need at least {n_par + 1} to fit "
            f"{n_par} parameters and estimate their errors; add sizes (or a larger sweep budget)"
        )
    return n, y


def _grid_start(x: np.ndarray, y: np.ndarray, fit_offset: bool) -> tuple[np.ndarray, float]:
    """Step 1, (parameters, RSS): a grid over the offset, a straight-line fit in log space for each."""
    grid = np.linspace(0.0, y.min() * 0.999, 200) if fit_offset else np.array([0.0])
    best = None
    for l_inf in grid:
        slope, intercept = np.polyfit(x, np.log(y - l_inf), 1)
        p = np.array([intercept, -slope, l_inf])
        rss = float(((y - _model(p, x)[0]) ** 2).sum())
        if best is None or rss < best[0]:
            best = (rss, p)
    return best[1], best[0]


def _levenberg_marquardt(x: np.ndarray, y: np.ndarray, p: np.ndarray, rss: float, free: slice
                         ) -> tuple[np.ndarray, float]:
    """Step 2: solve (J^T J + lam diag(J^T J)) step = J^T r, adapting lam; (parameters, RSS)."""
    n_par = free.stop
    lam = 1e-3
    for _ in range(500):
        f, J = _model(p, x)
        J = J[:, free]
        r = y - f
        JtJ = J.T @ J
        step = np.linalg.solve(JtJ + lam * np.diag(np.diag(JtJ)) + 1e-300 * np.eye(n_par), J.T @ r)
        cand = p.copy()
        cand[free] += step
        new_rss = float(((y - _model(cand, x)[0]) ** 2).sum())
        if new_rss < rss:
            converged = rss - new_rss <= 1e-14 * max(rss, 1e-300)
            p, rss, lam = cand, new_rss, lam / 10
            if converged:
                break
        else:
            lam *= 10
            if lam > 1e12:  # no step improves: at a minimum (to machine precision)
                break
    return p, rss


def _covariance(p: np.ndarray, x: np.ndarray, y: np.ndarray, rss: float, free: slice) -> np.ndarray:
    """Step 3: s^2 (J^T J)^-1 with s^2 = RSS / (n - p), J the Jacobian at the optimum (3 x 3,
    zero for a parameter not fitted)."""
    J = _model(p, x)[1][:, free]
    s2 = rss / (y.size - free.stop)
    try:
        cov_free = s2 * np.linalg.inv(J.T @ J)
    except np.linalg.LinAlgError:
        raise DataError("the sizes do not constrain the fit (singular Jacobian); spread sizes wider") from None
    cov = np.zeros((3, 3))
    cov[free, free] = cov_free
    return cov


# ----------------------------------------------------------------------------- plot
def _points_arrays(points) -> tuple[np.ndarray, np.ndarray]:
    """(N, L) arrays from [(n, loss), ...] or sweep records with "n_params" and "loss"."""
    pts = list(points)
    if pts and isinstance(pts[0], dict):
        pts = [(r["n_params"], r["loss"]) for r in pts if r.get("status", "ok") == "ok"]
    if not pts:
        raise DataError("no points to plot")
    arr = np.asarray(pts, dtype=np.float64)
    return arr[:, 0], arr[:, 1]


def chinchilla_compute_exponent() -> float:
    """The exponent of Chinchilla's reducible loss along its compute-optimal path:
    A/N_opt^alpha and B/D_opt^beta both fall as C^-(alpha beta / (alpha + beta)) = C^-0.154."""
    a, b = CHINCHILLA["alpha"], CHINCHILLA["beta"]
    return a * b / (a + b)


def draw_references(ax, x: np.ndarray, fit: PowerLawFit, references: dict[str, float]) -> None:
    """Published exponents as dotted shape references through the fit at the middle of `x`:
    (L - L_inf) ~ x^-alpha_ref with the fit's L_inf (0 without an offset, or when the fit's is
    negative), so only the slopes compare (the papers' losses are on other data). The y range
    stays the data's: a steep reference must not squash the measured points."""
    mid = float(np.exp(np.log(x).mean()))
    floor = max(fit.l_inf, 0.0) if fit.fit_offset else 0.0
    excess = float(fit.predict(mid)) - floor
    low, high = ax.get_ylim()
    for k, (label, alpha) in enumerate(references.items()):
        ax.plot(x, floor + excess * (x / mid) ** -alpha, ":", color=f"C{k + 2}", label=f"{label} = {alpha:.3g}")
    ax.set_ylim(low, high)


def plot_scaling(points, fit: PowerLawFit | None, path: str | os.PathLike, extrapolate: float = 10.0) -> None:
    """Loss against model size (log x) with the fitted law, a 2-SE band, and an extrapolation,
    beside Kaplan's and Chinchilla's size exponents drawn through the fit (shapes only).

    The curve is solid over the measured sizes and dashed up to `extrapolate` x the largest.
    """
    n, y = _points_arrays(points)
    fig, ax = pyplot().subplots(figsize=(6, 4.2), dpi=100)
    ax.scatter(n, y, color="k", zorder=3, label="runs")
    if fit is not None:
        inside = np.geomspace(n.min(), n.max(), 100)
        beyond = np.geomspace(n.max(), n.max() * extrapolate, 50)
        for xs, style, label in ((inside, "-", "fit"), (beyond, "--", f"extrapolation (x{extrapolate:g})")):
            f, se = fit.predict(xs), fit.predict_se(xs)
            ax.plot(xs, f, style, color="C0", label=label)
            ax.fill_between(xs, f - 2 * se, f + 2 * se, color="C0", alpha=0.15, linewidth=0)
        if fit.fit_offset:
            ax.axhline(fit.l_inf, color="C1", linestyle=":", label=f"L_inf = {fit.l_inf:.3f}")
        draw_references(ax, inside, fit, {"Kaplan α_N": KAPLAN["alpha_n"], "Chinchilla α": CHINCHILLA["alpha"]})
        ax.set_title(
            f"L = (N_c/N)^α{' + L_inf' if fit.fit_offset else ''}:  α = {fit.alpha:.3f} ± {fit.alpha_se:.3f}, "
            f"N_c = {fit.n_c:.3g}",
            fontsize=9,
        )
    ax.set_xscale("log")
    ax.set_xlabel("non-embedding parameters N")
    ax.set_ylabel("loss (nats/token)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path)


# ----------------------------------------------------------------------------- sweep driver
def _spec_key(spec) -> str:
    return json.dumps(spec, sort_keys=True)


def load_sweep(path: str | os.PathLike) -> list[dict]:
    """Records of a sweep's JSON-lines file (a torn last line from a crash is ignored)."""
    records = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if k == len(lines) - 1:
                break  # interrupted while writing the last line
            raise DataError(f"{path}:{k + 1}: not a JSON line; is this a sweep results file?") from None
    return records


def run_sweep(
    train_fn: Callable[[Any, int], Any],
    sizes: Sequence[Any],
    tokens_per_size: int | Sequence[int] | Callable[[Any], int],
    time_budget_s: float,
    out_path: str | os.PathLike | None = None,
    resume: bool = True,
    cost_fn: Callable[[Any, int], float] | None = None,
) -> list[dict]:
    """Train one model per size spec, smallest first, within a wall-clock budget.

    `train_fn(size_spec, max_tokens)` trains a model and returns its final loss (a float), or a
    dict with "loss" and any extra fields (e.g. "n_params", the non-embedding parameter count
    the fit needs; it may also be a key of a dict size spec). Each result is appended to
    `out_path` as one JSON line as soon as it is known, so a crash loses at most the run in
    progress; with `resume`, specs already recorded as "ok" there are not trained again.

    Before each run the driver estimates its duration from the previous run, scaled by the
    ratio of their costs: `cost_fn(spec, tokens)` if given (e.g. measured seconds per step x
    steps), else tokens x the spec's "flops_per_token" (else its "n_params"; else tokens alone). If it would not finish inside
    the budget, that run is recorded as "skipped" and the sweep stops: later specs are
    assumed to be larger. A run is never interrupted mid-way.
    """
    if time_budget_s <= 0:
        raise ConfigError(f"time_budget_s must be positive, got {time_budget_s}")
    sizes = list(sizes)
    tokens = _token_budgets(sizes, tokens_per_size)
    done: dict[str, dict] = {}
    if out_path is not None and resume and os.path.exists(out_path):
        done = {_spec_key(r["size"]): r for r in load_sweep(out_path) if r.get("status") == "ok"}

    def cost(spec, n_tokens):
        # Only what is known before a run may enter its cost, or the ratio between the next
        # run and the last one mixes units (params known for the last run only -> ~0 s).
        if cost_fn is not None:
            return max(float(cost_fn(spec, n_tokens)), 1e-12)
        per_token = (spec.get("flops_per_token") or spec.get("n_params")) if isinstance(spec, dict) else None
        return n_tokens * (per_token or 1)

    records: list[dict] = []
    start = _clock()
    last = None  # (cost, seconds) of the previous run, for the duration estimate
    for spec, n_tokens in zip(sizes, tokens):
        if _spec_key(spec) in done:
            records.append(done[_spec_key(spec)])
            continue
        elapsed = _clock() - start
        estimate = 0.0 if last is None else last[1] * cost(spec, n_tokens) / last[0]
        if elapsed + estimate > time_budget_s:
            record = {"size": spec, "tokens": n_tokens, "status": "skipped",
                      "reason": f"time budget: {elapsed:.0f}s used of {time_budget_s:.0f}s, "
                                f"this run estimated at {estimate:.0f}s"}
            records.append(record)
            _append(out_path, record)
            break
        record, seconds = _timed_run(train_fn, spec, n_tokens)
        records.append(record)
        _append(out_path, record)
        last = (cost(spec, n_tokens), max(seconds, 1e-6))
    return records


def _token_budgets(sizes: list, tokens_per_size) -> list[int]:
    """One positive token budget per size: a callable of the spec, one number, or a list."""
    if callable(tokens_per_size):
        tokens = [int(tokens_per_size(s)) for s in sizes]
    elif isinstance(tokens_per_size, (int, np.integer)):
        tokens = [int(tokens_per_size)] * len(sizes)
    else:
        tokens = [int(t) for t in tokens_per_size]
        if len(tokens) != len(sizes):
            raise ConfigError(f"tokens_per_size has {len(tokens)} entries for {len(sizes)} sizes")
    if any(t <= 0 for t in tokens):
        raise ConfigError("every size needs a positive token budget")
    return tokens


def _timed_run(train_fn, spec, n_tokens: int) -> tuple[dict, float]:
    """(the sweep record of one run of `train_fn`: its loss and extra fields, seconds, status;
    the seconds it took, unrounded)."""
    t0 = _clock()
    result = train_fn(spec, n_tokens)
    seconds = _clock() - t0
    extra = dict(result) if isinstance(result, dict) else {"loss": result}
    if "loss" not in extra:
        raise ConfigError("train_fn must return the final loss, or a dict with a 'loss' key")
    loss = float(extra.pop("loss"))
    record = {"size": spec, "tokens": n_tokens, "loss": loss, "seconds": round(seconds, 3), **extra}
    if "n_params" not in record and isinstance(spec, dict) and "n_params" in spec:
        record["n_params"] = spec["n_params"]
    record["status"] = "ok" if math.isfinite(loss) else "diverged"
    return record, seconds


def _append(path, record: dict) -> None:
    """Append one JSON line and fsync it: results survive a crash of a later run."""
    if path is None:
        return
    os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, allow_nan=True, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def fit_sweep(records: Sequence[dict], fit_offset: bool = True) -> PowerLawFit:
    """Fit L(N) to the "ok" records of a sweep (each needs "n_params" and "loss")."""
    ok = [r for r in records if r.get("status") == "ok"]
    missing = [r["size"] for r in ok if "n_params" not in r]
    if missing:
        raise DataError(f"runs without n_params cannot be fitted: {missing[:3]}; have train_fn return it")
    return fit_power_law([r["n_params"] for r in ok], [r["loss"] for r in ok], fit_offset)
