import json
import math

import numpy as np
import pytest

from bertkit.analysis.scaling import (
    CHINCHILLA_BUDGET,
    chinchilla_loss,
    chinchilla_optimal,
    fit_power_law,
    fit_sweep,
    kaplan_loss,
    kaplan_loss_d,
    kaplan_loss_n,
    load_sweep,
    plot_scaling,
    run_sweep,
)
from bertkit.errors import ConfigError, DataError

SIZES = np.geomspace(1e5, 1e9, 8)
TRUE = {"alpha": 0.3, "n_c": 2e6, "l_inf": 1.8}


def _synthetic(seed, noise=0.02):
    rng = np.random.default_rng(seed)
    clean = (TRUE["n_c"] / SIZES) ** TRUE["alpha"] + TRUE["l_inf"]
    return clean + rng.normal(0.0, noise, SIZES.size)


def test_kaplan_formulas_and_limits():
    assert kaplan_loss_n(8.8e13) == pytest.approx(1.0)
    assert kaplan_loss_d(5.4e13) == pytest.approx(1.0)
    # GPT-2-small-ish: 85M non-embedding params -> (8.8e13/8.5e7)^0.076
    assert kaplan_loss_n(8.5e7) == pytest.approx((8.8e13 / 8.5e7) ** 0.076)
    assert kaplan_loss(1e9, 1e30) == pytest.approx(kaplan_loss_n(1e9), rel=1e-6)
    assert kaplan_loss(1e30, 1e10) == pytest.approx(kaplan_loss_d(1e10), rel=1e-6)
    assert kaplan_loss(1e9, 1e10) > max(kaplan_loss_n(1e9), kaplan_loss_d(1e10))
    with pytest.raises(ConfigError, match="positive"):
        kaplan_loss_n(0)


def test_chinchilla_optimum_at_the_chinchilla_budget():
    n_opt, d_opt = chinchilla_optimal(CHINCHILLA_BUDGET)
    assert 6 * n_opt * d_opt == pytest.approx(CHINCHILLA_BUDGET)
    # What the published approach-3 constants give (see the module docstring): 32B params,
    # 3.0T tokens, 93 tokens/param -- not the paper's 70B / 1.4T / 20 (approaches 1 and 2).
    assert n_opt == pytest.approx(3.219e10, rel=1e-3)
    assert d_opt == pytest.approx(2.982e12, rel=1e-3)
    assert d_opt / n_opt == pytest.approx(92.6, rel=1e-3)
    # ...but the law is flat along the budget: Chinchilla's own 20:1 allocation is within
    # 0.01 nats of the formula's optimum, and the optimum is the true minimum of the loss.
    best = chinchilla_loss(n_opt, d_opt)
    assert 0 < chinchilla_loss(70e9, 1.4e12) - best < 0.01
    for factor in (0.5, 0.9, 1.1, 2.0):
        n = n_opt * factor
        assert chinchilla_loss(n, CHINCHILLA_BUDGET / (6 * n)) > best
    # N_opt grows as C^(beta/(alpha+beta)) = C^0.4516
    n10, _ = chinchilla_optimal(10 * CHINCHILLA_BUDGET)
    assert math.log10(n10 / n_opt) == pytest.approx(0.28 / 0.62)


def test_fit_recovers_exponent_within_reported_uncertainty():
    fit = fit_power_law(SIZES, _synthetic(seed=0))
    assert abs(fit.alpha - TRUE["alpha"]) < 3 * fit.alpha_se
    assert abs(fit.log_n_c - math.log(TRUE["n_c"])) < 3 * fit.log_n_c_se
    assert abs(fit.l_inf - TRUE["l_inf"]) < 3 * fit.l_inf_se
    assert 0 < fit.alpha_se < 0.05
    np.testing.assert_allclose(fit.predict(SIZES), (TRUE["n_c"] / SIZES) ** 0.3 + 1.8, atol=0.05)


def test_standard_errors_are_calibrated():
    # Over many noisy sweeps the spread of the estimates must match the reported errors:
    # too-small errors (e.g. forgetting s^2) or too-large ones would fail this.
    fits = [fit_power_law(SIZES, _synthetic(seed)) for seed in range(60)]
    alphas = np.array([f.alpha for f in fits])
    ses = np.array([f.alpha_se for f in fits])
    assert 0.6 < ses.mean() / alphas.std() < 1.6
    coverage = np.mean(np.abs(alphas - TRUE["alpha"]) < 2 * ses)
    assert 0.75 <= coverage <= 1.0  # ~0.9 expected with 5 residual degrees of freedom
    assert abs(alphas.mean() - TRUE["alpha"]) < 3 * alphas.std() / math.sqrt(len(fits))


def test_fit_recovers_kaplan_exponent_without_offset():
    rng = np.random.default_rng(1)
    n = np.geomspace(1e6, 1e10, 6)
    y = kaplan_loss_n(n) * np.exp(rng.normal(0, 0.002, n.size))
    fit = fit_power_law(n, y, fit_offset=False)
    assert fit.l_inf == 0.0 and fit.l_inf_se == 0.0
    assert abs(fit.alpha - 0.076) < 3 * fit.alpha_se and fit.alpha_se < 0.01
    assert abs(fit.log_n_c - math.log(8.8e13)) < 3 * fit.log_n_c_se


def test_too_few_sizes_and_bad_points_raise():
    with pytest.raises(DataError, match="too few points to fit: 3 distinct"):
        fit_power_law([1e6, 1e6, 1e7, 1e8, 1e8], [3.0, 3.1, 2.5, 2.2, 2.1])
    with pytest.raises(DataError, match="2 model sizes but 1 losses; give one loss per point"):
        fit_power_law([1e6, 1e7], [3.0])
    with pytest.raises(DataError, match="positive finite"):
        fit_power_law([1e6, 1e7, 1e8, 1e9], [3.0, float("nan"), 2.0, 1.9])


def test_run_sweep_records_resumes_and_respects_budget(tmp_path):
    out = tmp_path / "sweep.jsonl"
    specs = [{"name": f"s{k}", "n_params": int(n)} for k, n in enumerate(SIZES[:6])]
    losses = dict(zip((s["name"] for s in specs), _synthetic(seed=2)))
    calls = []

    def train_fn(spec, max_tokens):
        calls.append(spec["name"])
        return losses[spec["name"]]

    recs = run_sweep(train_fn, specs[:5], 1000, time_budget_s=60, out_path=out)
    assert [r["status"] for r in recs] == ["ok"] * 5 and calls == ["s0", "s1", "s2", "s3", "s4"]
    assert [r["size"] for r in load_sweep(out)] == specs[:5]
    # resume: only the new size is trained; the results file now holds all six
    recs = run_sweep(train_fn, specs, 1000, time_budget_s=60, out_path=out)
    assert calls[5:] == ["s5"] and len(recs) == 6 and len(load_sweep(out)) == 6
    fit = fit_sweep(load_sweep(out))
    assert fit.n_points == 6 and abs(fit.alpha - TRUE["alpha"]) < 4 * fit.alpha_se
    plot_scaling(recs, fit, tmp_path / "scaling.png")
    assert (tmp_path / "scaling.png").stat().st_size > 5000

    # a torn last line (crash while writing) is ignored
    with open(out, "a") as f:
        f.write('{"size": {"na')
    assert len(load_sweep(out)) == 6


def test_run_sweep_stops_cleanly_when_budget_runs_out(tmp_path, monkeypatch):
    import bertkit.analysis.scaling as scaling

    clock = {"t": 0.0}
    monkeypatch.setattr(scaling, "_clock", lambda: clock["t"])

    def train_fn(spec, max_tokens):
        clock["t"] += 1e-6 * spec["n_params"]  # 1 s per million parameters
        return {"loss": 3.0, "steps": 7}

    specs = [{"n_params": n} for n in (1e6, 2e6, 4e6, 8e6, 16e6)]
    recs = run_sweep(train_fn, specs, 100, time_budget_s=10, out_path=tmp_path / "s.jsonl")
    # 1 + 2 + 4 = 7 s used; the next run is estimated at 8 s > 3 s left: skipped, sweep stops
    assert [r["status"] for r in recs] == ["ok", "ok", "ok", "skipped"]
    assert "time budget" in recs[-1]["reason"] and recs[0]["steps"] == 7
    assert json.loads((tmp_path / "s.jsonl").read_text().splitlines()[-1])["status"] == "skipped"


def test_run_sweep_marks_divergence_and_checks_options():
    recs = run_sweep(lambda s, t: float("nan"), [1, 2], [10, 20], time_budget_s=5)
    assert [r["status"] for r in recs] == ["diverged", "diverged"] and recs[1]["tokens"] == 20
    with pytest.raises(ConfigError, match="2 sizes"):
        run_sweep(lambda s, t: 1.0, [1, 2], [10], time_budget_s=5)
    with pytest.raises(ConfigError, match="'loss'"):
        run_sweep(lambda s, t: {"oops": 1}, [1], 10, time_budget_s=5)
