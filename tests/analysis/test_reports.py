"""The analysis behind `bertkit attention` and `bertkit scale formula|fit`, called from Python:
the report goes to `log` (nothing to stdout) and the returned values match what it says."""

import json

import numpy as np
import pytest

from bertkit.analysis.attention_report import attention_report
from bertkit.analysis.scaling_report import fit_sweep_file, report_formula
from bertkit.errors import ConfigError


def test_attention_report_logs_and_returns_the_attention(minilm_dir, tmp_path, capsys):
    lines = []
    stats = tmp_path / "heads.jsonl"
    result = attention_report(minilm_dir, "Dogs bark at night.", rollout=True, stats=str(stats), log=lines.append)
    assert capsys.readouterr().out == ""
    assert result.tokens == ["[CLS]", "dogs", "bark", "at", "night", ".", "[SEP]"]
    assert result.attn.shape == (6, 12, 7, 7) and result.rollout.shape == (6, 7, 7)
    np.testing.assert_allclose(result.attn.sum(-1), 1.0, atol=1e-4)
    assert lines[0].endswith("6 layers x 12 heads, 7 tokens: [CLS] dogs bark at night . [SEP]")
    # the top [CLS] head in the log is the arg-max of the returned statistics
    layer, head = np.unravel_index(np.nanargmax(result.stats["cls"]), result.stats["cls"].shape)
    assert lines[1].split(": ", 1)[1].startswith(f"L{layer}H{head} ")
    assert lines[-1] == f"wrote {stats} (72 heads)" and len(stats.read_text().splitlines()) == 72
    with pytest.raises(ConfigError, match="--top must be at least 1"):
        attention_report(minilm_dir, "Dogs bark.", top=0, log=lines.append)


def test_formula_and_fit_reports_go_to_log(tmp_path, capsys):
    lines = []
    result = report_formula(compute=5.76e23, log=lines.append)
    assert result["chinchilla_optimal"]["params"] == pytest.approx(3.2e10, rel=0.02)
    assert lines[0] == "compute C = 5.76e+23 FLOPs (C = 6 N D)" and "N = 3.22e+10" in lines[1]

    sizes = np.geomspace(1e5, 1e8, 6)
    losses = (2e12 / sizes) ** 0.12 + 1.5
    sweep = tmp_path / "sweep.jsonl"
    sweep.write_text("".join(json.dumps({"size": {"k": k}, "n_params": float(n), "loss": float(l)}) + "\n"
                             for k, (n, l) in enumerate(zip(sizes, losses))))
    lines.clear()
    fit = fit_sweep_file(str(sweep), log=lines.append)
    assert fit.alpha == pytest.approx(0.12, rel=1e-3) and fit.l_inf == pytest.approx(1.5, abs=1e-3)
    assert len(lines) == 1 + 6 + 2 and lines[7].startswith("fit L(N) = (N_c/N)^alpha + L_inf on 6 sizes")
    assert capsys.readouterr().out == ""
