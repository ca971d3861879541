"""Calibration: hand-computed small cases, scikit-learn's ``calibration_curve`` / ``brier_score_loss`` on
random data, and alpaca_eval's scoring of a weighted judge."""

from __future__ import annotations

import importlib.metadata
import sys
import types

import numpy as np
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss

from evalign.errors import InputError
from evalign.meta.calibration import (
    brier_score,
    expected_calibration_error,
    graded_calibration,
    pairwise_calibration,
    reliability_bins,
    weighted_preference_accuracy,
)


def test_hand_case() -> None:
    p = np.array([0.05, 0.15, 0.85, 0.95, 0.9, 0.6])
    y = np.array([0.0, 1.0, 1.0, 1.0, 0.0, 1.0])
    # bins (2 of 10 left empty between): [0, .1]: .05 -> 0; (.1, .2]: .15 -> 1; (.5, .6]: .6 -> 1;
    # (.8, .9]: .85, .9 -> 1, 0; (.9, 1]: .95 -> 1
    b = reliability_bins(p, y)
    assert b["n"].tolist() == [1, 1, 1, 2, 1]
    assert b["observed"].tolist() == [0.0, 1.0, 1.0, 0.5, 1.0]
    ece = (abs(0 - 0.05) + abs(1 - 0.15) + abs(1 - 0.6) + 2 * abs(0.5 - 0.875) + abs(1 - 0.95)) / 6
    assert expected_calibration_error(p, y) == pytest.approx(ece)
    brier = np.mean((p - y) ** 2)
    assert brier_score(p, y) == pytest.approx(brier)
    with pytest.raises(InputError, match="in \\[0, 1\\]"):
        reliability_bins(np.array([1.2]), np.array([1.0]))


def test_bins_and_brier_equal_scikit_learn() -> None:
    rng = np.random.default_rng(0)
    for n_bins in (5, 10, 15):
        p = rng.random(500)
        p[:20] = np.round(p[:20], 1)  # values on the bin edges
        y = (rng.random(500) < p ** 1.5).astype(float)
        observed, mean_p = calibration_curve(y, p, n_bins=n_bins, strategy="uniform")
        b = reliability_bins(p, y, n_bins)
        assert b["observed"].to_numpy() == pytest.approx(observed, abs=1e-12)
        assert b["mean_p"].to_numpy() == pytest.approx(mean_p, abs=1e-12)
        assert brier_score(p, y) == pytest.approx(brier_score_loss(y, p), abs=1e-12)


def test_pairwise_and_graded_outcomes() -> None:
    c = pairwise_calibration(np.array([0.9, 0.2, 0.7, np.nan, 0.4]), np.array([1.0, -1.0, 0.0, 1.0, 1.0]))
    # the human tie and the missing probability are left out: (.9, 1), (.2, 0), (.4, 1)
    assert c.n == 3 and c.n_left_out == 2
    assert c.brier == pytest.approx((0.01 + 0.04 + 0.36) / 3)
    g = graded_calibration(np.array([0.8, 0.5, 0.6]), np.array([4.0, 2.0, 3.0]), np.array([4.2, 3.0, 2.4]))
    # the humans' grades 4, 3, 2: right, wrong, wrong
    assert g.brier == pytest.approx((0.04 + 0.25 + 0.36) / 3) and g.kind == "graded"


@pytest.fixture
def absolute_rule(monkeypatch: pytest.MonkeyPatch) -> object:
    """alpaca_eval's ``AbsoluteScoringRule`` (its default in analyze; pkg_resources stubbed)."""
    try:
        import pkg_resources  # noqa: F401
    except ImportError:
        from packaging.version import parse

        stub = types.ModuleType("pkg_resources")
        stub.parse_version = parse  # type: ignore[attr-defined]
        stub.get_distribution = lambda name: types.SimpleNamespace(version=importlib.metadata.version(name))  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "pkg_resources", stub)
    helpers = pytest.importorskip("alpaca_eval.metrics.helpers", reason="alpaca-eval is not installed")
    return helpers.AbsoluteScoringRule()


def test_weighted_verdict_is_alpaca_evals(absolute_rule: object) -> None:
    rng = np.random.default_rng(1)
    p_a = rng.random(200)
    labels = rng.choice([1.0, -1.0, 0.0], 200, p=[0.45, 0.45, 0.1])
    # alpaca_eval: preference 1 = first output better, 2 = second, 1.5 (or 0) = draw; a weighted
    # judge's preference is 2 - P(first better)
    prediction = 2.0 - p_a
    target = np.where(labels > 0, 1.0, np.where(labels < 0, 2.0, 1.5))
    assert weighted_preference_accuracy(p_a, labels) == pytest.approx(absolute_rule.score(prediction, target),  # type: ignore[attr-defined]
                                                                      abs=1e-12)
    # hard verdicts (p_a 1 / 0) score as preference accuracy on the decided pairs
    hard = np.where(labels != 0, (labels > 0).astype(float), 1.0)
    assert weighted_preference_accuracy(hard, labels) == pytest.approx(
        np.mean(np.where(labels != 0, 1.0, 0.5)))
