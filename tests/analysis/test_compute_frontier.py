"""Kaplan's L(C): C = 6 N D, the lower envelope of learning curves, its power-law fit, the
compute-optimal sizes, and the report `bertkit scale frontier` prints."""

import json
import math

import numpy as np
import pytest

from bertkit.analysis.compute_frontier import (CurvePoint, curve_points, fit_frontier, lower_envelope,
                                               optimal_size_exponent, optimal_sizes, training_compute)
from bertkit.analysis.frontier_report import frontier_file, frontier_report
from bertkit.analysis.scaling import CHINCHILLA, chinchilla_compute_exponent
from bertkit.commands.cli import main
from bertkit.errors import DataError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _record(name, n_params, curve, status="ok"):
    """A sweep record as `bertkit scale sweep` writes it: `curve` is [(step, tokens, loss), ...]."""
    return {"name": name, "n_params": n_params, "status": status, "loss": curve[-1][2],
            "curve": [{"step": s, "tokens": d, "compute": 6.0 * n_params * d, "loss": l} for s, d, l in curve]}


def _chinchilla_sweep(sizes, tokens):
    """Learning curves that follow Hoffmann et al.'s approach-3 law exactly: L = E + A/N^a + B/D^b."""
    c = CHINCHILLA
    return [_record(f"n{k}", float(n), [(j + 1, float(d), c["E"] + c["A"] / n ** c["alpha"] + c["B"] / d ** c["beta"])
                                        for j, d in enumerate(tokens)])
            for k, n in enumerate(sizes)]


def test_training_compute_is_six_n_d():
    assert training_compute(1e6, 2e9) == pytest.approx(6 * 1e6 * 2e9)
    # Chinchilla: 70B parameters on 1.4T tokens is the paper's 5.76e23 FLOPs
    assert training_compute(70e9, 1.4e12) == pytest.approx(5.88e23)
    np.testing.assert_allclose(training_compute([1.0, 2.0], [3.0, 0.0]), [18.0, 0.0])
    with pytest.raises(DataError, match="N > 0"):
        training_compute(0, 1e6)
    with pytest.raises(DataError, match="D >= 0"):
        training_compute(1e6, -1)


def test_envelope_picks_the_best_loss_for_each_compute():
    small = [CurvePoint(c, l, "small", 1, s) for s, (c, l) in enumerate([(1, 5.0), (2, 4.0), (4, 3.5), (8, 3.4)], 1)]
    large = [CurvePoint(c, l, "large", 4, s) for s, (c, l) in enumerate([(4, 4.5), (8, 3.2), (16, 2.8), (32, 2.8)], 1)]
    front = lower_envelope(large + small)
    # the small model leads up to C = 4; the large one overtakes it by C = 8; its flat last
    # point (no better than what C = 16 reached) is not on the frontier
    assert [(p.name, p.compute, p.loss) for p in front] == [
        ("small", 1, 5.0), ("small", 2, 4.0), ("small", 4, 3.5), ("large", 8, 3.2), ("large", 16, 2.8)]
    ranges = optimal_sizes(front)
    assert [(r.name, r.start, r.end, r.points) for r in ranges] == [("small", 1, 4, 3), ("large", 8, 16, 2)]
    # a tie in compute keeps the lower loss only
    assert [(p.name, p.loss) for p in lower_envelope([CurvePoint(2, 3.0, "a", 1, 1), CurvePoint(2, 2.5, "b", 2, 1)])] \
        == [("b", 2.5)]


def test_envelope_is_the_set_of_undominated_points():
    rng = np.random.default_rng(0)
    points = [CurvePoint(float(c), float(l), f"s{k % 5}", 1 + k % 5, k)
              for k, (c, l) in enumerate(zip(rng.lognormal(0, 2, 300), rng.uniform(1, 5, 300)))]
    front = set(lower_envelope(points))

    def dominated(p):
        return any(q is not p and q.compute <= p.compute and q.loss <= p.loss for q in points)

    assert front == {p for p in points if not dominated(p)}


def test_frontier_of_chinchillas_law_recovers_its_compute_exponent():
    # Along the compute-optimal path of L = E + A/N^a + B/D^b the reducible loss falls as
    # C^-(a b / (a + b)) = C^-0.1535; the envelope of 41 sizes' curves, fitted with an offset,
    # must recover that exponent and E.
    sweep = _chinchilla_sweep(np.geomspace(1e6, 1e10, 41), np.geomspace(1e8, 1e13, 120))
    front = lower_envelope(curve_points(sweep))
    fit = fit_frontier(front, fit_offset=True, min_compute=front[0].compute * 1e3)
    assert chinchilla_compute_exponent() == pytest.approx(0.34 * 0.28 / 0.62)
    assert fit.alpha == pytest.approx(chinchilla_compute_exponent(), rel=0.02)
    assert fit.l_inf == pytest.approx(CHINCHILLA["E"], abs=0.02)
    # the compute-optimal size grows as N_opt ~ C^(b / (a + b)) = C^0.45 (the largest of the 41
    # sizes caps the staircase at the top, hence the tolerance)
    slope, se = optimal_size_exponent(front, min_compute=front[0].compute * 1e3)
    assert slope == pytest.approx(CHINCHILLA["beta"] / (CHINCHILLA["alpha"] + CHINCHILLA["beta"]), abs=0.05)
    assert 0 < se < 0.01
    ranges = optimal_sizes(front)
    assert ranges[0].n_params == 1e6 and ranges[-1].n_params > 1e9 and len(ranges) > 10


def test_fit_recovers_a_known_exponent_from_noisy_curves():
    # each size follows L = (C_c/C)^0.05 until its own floor; the envelope is the power law
    rng = np.random.default_rng(1)
    alpha, c_c = 0.05, 1e30
    records = []
    for k, n in enumerate(np.geomspace(1e5, 1e8, 6)):
        tokens = np.geomspace(1e6, 1e9, 25)
        law = (c_c / (6 * n * tokens)) ** alpha
        floor = (c_c / (6 * n * 3e7)) ** alpha  # each size stops improving after 3e7 tokens
        losses = np.maximum(law, floor) + rng.normal(0, 0.002, tokens.size)
        records.append(_record(f"s{k}", float(n), list(zip(range(1, 26), tokens, losses))))
    fit = fit_frontier(lower_envelope(curve_points(records)), fit_offset=False)
    assert abs(fit.alpha - alpha) < 4 * fit.alpha_se and fit.alpha_se < 0.005
    assert fit.log_n_c == pytest.approx(math.log(c_c), rel=0.05)


def test_bad_sweeps_are_refused_with_the_reason():
    with pytest.raises(DataError, match="no finished runs"):
        curve_points([{"name": "a", "status": "diverged"}])
    with pytest.raises(DataError, match="without a learning curve.*--eval-every"):
        curve_points([{"name": "old", "n_params": 10, "loss": 3.0, "status": "ok"}])
    with pytest.raises(DataError, match=r"\['finished run 1', 'finished run 2'\]"):  # unnamed: not [None, None]
        curve_points([{"n_params": 10, "loss": 3.0}, {"n_params": 20, "loss": 2.0}])
    with pytest.raises(DataError, match="positive and finite"):
        curve_points([_record("a", 10.0, [(1, 100.0, float("nan"))])])
    with pytest.raises(DataError, match="no learning-curve points"):
        lower_envelope([])
    front = lower_envelope(curve_points(_chinchilla_sweep([1e6, 1e7], np.geomspace(1e8, 1e10, 5))))
    with pytest.raises(DataError, match="--min-compute .* leaves 1 frontier point"):
        fit_frontier(front, min_compute=front[-1].compute)
    with pytest.raises(DataError, match="distinct frontier points"):
        fit_frontier(front[:3], fit_offset=True)
    with pytest.raises(DataError, match="2 sizes"):
        optimal_size_exponent([p for p in front if p.n_params == 1e6])
    # step 0 (the untrained model, no compute yet) is not a point of the frontier
    assert [p.step for p in curve_points([_record("a", 10.0, [(0, 0.0, 9.0), (1, 64.0, 8.0)])])] == [1]


def test_report_and_command_agree(tmp_path, capsys):
    records = _chinchilla_sweep(np.geomspace(1e6, 1e9, 6), np.geomspace(1e8, 1e12, 30))
    lines = []
    result = frontier_report(records, fit_offset=True, plot=str(tmp_path / "f.png"), log=lines.append)
    assert capsys.readouterr().out == ""
    assert (tmp_path / "f.png").read_bytes()[:8] == PNG_MAGIC
    assert lines[0].startswith(f"frontier: {len(result['frontier'])} of {6 * 30} learning-curve points")
    assert any(f"alpha_C = {result['fit']['alpha']:.3f} +/- " in line for line in lines)
    assert any("Kaplan et al. 2020 alpha_C(min) = 0.050" in line for line in lines)
    # the same numbers through the command, from a sweep file, as JSON
    sweep = tmp_path / "sweep.jsonl"
    sweep.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["scale", "frontier", str(sweep), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["fit"]["alpha"] == pytest.approx(result["fit"]["alpha"])
    assert printed["fit"]["c_c"] == pytest.approx(math.exp(printed["fit"]["log_n_c"]))
    assert frontier_file(str(sweep), fit_offset=False, log=lines.append)["fit"]["fit_offset"] is False
    assert main(["scale", "frontier", str(tmp_path / "missing.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err
