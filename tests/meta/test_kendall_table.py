"""Kendall's tau of long vectors with few distinct values, counted from their contingency table, equals
scipy's ``kendalltau`` (tau-b) and the pair-by-pair count (tau_23, acc_23) on random inputs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from evalign.meta.correlation import _kendall_large, correlation


def test_contingency_table_kendall_equals_scipy_and_pair_counts() -> None:
    rng = np.random.default_rng(0)
    for trial in range(200):
        n = int(rng.integers(65, 1500))
        x = rng.integers(0, int(rng.integers(1, 30)), n).astype(float) / 3
        y = rng.integers(0, int(rng.integers(1, 50)), n) * 0.7
        if trial % 4 == 0:
            y = rng.random(n)  # a continuous metric against a few human grades
        got = correlation(x, y, "kendall", "item", "none").value
        ref = stats.kendalltau(x, y).statistic
        assert (np.isnan(got) and np.isnan(ref)) or got == pytest.approx(ref, abs=1e-12)
        for variant in ("23", "acc23"):
            v = correlation(x, y, "kendall", "item", "none", variant=variant).value
            assert v == pytest.approx(_kendall_large(x, y, variant, 0.0), abs=1e-12)
