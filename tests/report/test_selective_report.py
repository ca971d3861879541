"""``evalign report --selective``: a section "Where can each judge be trusted?" with the selective table
and a risk-coverage figure per judge; the figure's data (coverage, disagreement and bound per candidate
threshold, the chosen threshold's point) is the calibration's, recomputed here by counting."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.cli import app
from evalign.meta.selective import SelectiveSettings, calibrate
from evalign.report.figures import risk_coverage_lines

runner = CliRunner()


def _pairs(n: int = 300, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    pref = rng.choice([1.0, -1.0], size=n)
    conf = rng.uniform(0.5, 1.0, n)
    verdict = np.where(rng.uniform(size=n) < 0.1 + 0.9 * conf, pref, -pref)
    return pd.DataFrame({"id": [f"p{i}" for i in range(n)], "instruction": [f"q{i}" for i in range(n)],
                         "response_a": "a", "response_b": "b", "pref_1": pref,
                         "judge:y": np.where(verdict > 0, "A", "B"), "judge:y.confidence": conf})


def test_report_has_the_risk_coverage_curve_of_the_calibration(tmp_path: Path) -> None:
    t = _pairs()
    path = tmp_path / "pairs.jsonl"
    t.to_json(path, orient="records", lines=True)
    out = tmp_path / "r.html"
    res = runner.invoke(app, ["report", str(path), "--pref", "pref_1", "-m", "judge:y", "--bootstrap", "20",
                              "--selective", "--risk", "0.2", "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    written = json.loads(res.stdout)
    png = Path(written["figure:risk_coverage"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = out.read_text()
    has_section = "Where can each judge be trusted?" in page
    has_figure = 'id="fig-risk_coverage"' in page and "the dot is the chosen threshold" in page
    assert has_section and has_figure
    sel = written["evaluation"]["selective"]
    conf = t["judge:y.confidence"].to_numpy()
    right = np.where(t["judge:y"] == "A", 1.0, -1.0) == t["pref_1"].to_numpy()
    cal = calibrate(conf, right, SelectiveSettings(alpha=0.2, delta=0.1))
    assert 0 < cal.coverage < 1
    lines = risk_coverage_lines(sel["curves"])["judge:y"]
    cand = np.asarray(sel["curves"]["judge:y"]["candidates"])
    assert cand == pytest.approx(cal.candidates)
    # counted here: per candidate, the share of items at or above it and the disagreement among them
    at = conf[None, :] >= cand[:, None]
    assert lines["coverage"] == pytest.approx(at.mean(axis=1))
    assert lines["risk"] == pytest.approx((at & ~right[None, :]).sum(axis=1) / at.sum(axis=1))
    assert lines["bound"] == pytest.approx(cal.bounds)
    assert lines["threshold"] == pytest.approx(cal.threshold)
    assert lines["chosen"] == pytest.approx((cal.coverage, 1 - cal.selective_accuracy))
