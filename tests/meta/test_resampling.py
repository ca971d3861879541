"""One frozen Resampling travels whole to the trust table and the resampling kernels: the same
numbers as the settings given one by one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import evalign.evaluate
import evalign.evaluate.spec
import evalign.meta
from evalign.errors import InputError
from evalign.meta.clusters import compare_metrics
from evalign.meta.resampling import DEFAULT, Resampling, with_settings
from evalign.meta.significance import bootstrap_ci, paired_permutation_test
from evalign.meta.trust import trust_table_items, trust_table_pairs

R = Resampling(n_resamples=60, n_permutations=70, confidence=0.9, alpha=0.1, seed=5)


def _data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    h = rng.integers(1, 6, size=(4, 25)).astype(float)
    return h, h + rng.normal(size=h.shape), rng.normal(size=h.shape)


def test_one_class_everywhere() -> None:
    assert evalign.evaluate.Resampling is Resampling
    assert evalign.evaluate.spec.Resampling is Resampling
    assert evalign.meta.Resampling is Resampling


def test_settings_are_checked_as_before() -> None:
    with pytest.raises(InputError, match="must be an integer >= 1, got 0"):
        Resampling(n_resamples=0)
    with pytest.raises(InputError, match="must be between 0 and 1"):
        Resampling(alpha=1.5)
    h, a, _ = _data()
    with pytest.raises(InputError, match="n_resamples must be at least 1, got 0"):
        bootstrap_ci("kendall", h, a, n_resamples=0)
    with pytest.raises(InputError, match="confidence must be in"):
        bootstrap_ci("kendall", h, a, resampling=R, confidence=1.5)


def test_with_settings() -> None:
    assert with_settings(None) is DEFAULT
    assert with_settings(R, seed=None) is R
    r = with_settings(R, seed=9, n_resamples=3)
    assert (r.n_resamples, r.n_permutations, r.confidence, r.alpha, r.seed) == (3, 70, 0.9, 0.1, 9)
    with pytest.raises(TypeError):
        with_settings(R, resamples=3)


@pytest.mark.parametrize("statistic", ["kendall", "pearson", "pairwise_accuracy"])
@pytest.mark.parametrize("level", ["item", "system"])
def test_kernels_take_the_whole_object(statistic: str, level: str) -> None:
    h, a, b = _data()
    whole = bootstrap_ci(statistic, h, a, resampling=R, level=level)
    loose = bootstrap_ci(statistic, h, a, n_resamples=60, confidence=0.9, seed=5, level=level)
    assert (whole.value, whole.low, whole.high, whole.n_valid) == (loose.value, loose.low, loose.high, loose.n_valid)
    np.testing.assert_array_equal(whole.distribution, loose.distribution)
    pw = paired_permutation_test(statistic, h, a, b, resampling=R, level=level)
    assert pw == paired_permutation_test(statistic, h, a, b, 70, 5, level=level)
    cw = compare_metrics("kendall", h, {"a": a, "b": b}, resampling=R)
    cl = compare_metrics("kendall", h, {"a": a, "b": b}, n_permutations=70, seed=5)
    np.testing.assert_array_equal(cw.p_values, cl.p_values)
    assert (cw.n_permutations, cw.seed) == (70, 5)


def test_trust_tables_take_the_whole_object() -> None:
    h, a, b = _data()
    rows = [{"id": str(j), "system": f"s{i}", "human": h[i, j], "a": a[i, j], "b": b[i, j]}
            for j in range(h.shape[1]) for i in range(h.shape[0])]
    table = pd.DataFrame(rows)
    whole = trust_table_items(table, "human", ["a", "b"], resampling=R)
    loose = trust_table_items(table, "human", ["a", "b"], n_resamples=60, n_permutations=70, confidence=0.9,
                              alpha=0.1, seed=5)
    pd.testing.assert_frame_equal(whole.table, loose.table)
    assert (whole.n_resamples, whole.n_permutations, whole.confidence, whole.alpha, whole.seed) == (60, 70, 0.9, 0.1, 5)
    rng = np.random.default_rng(1)
    pairs = pd.DataFrame({"id": [str(i) for i in range(40)], "p1": rng.choice([-1.0, 0.0, 1.0], 40),
                          "m_a": rng.random(40), "m_b": rng.random(40)})
    pw = trust_table_pairs(pairs, ["p1"], ["m"], resampling=R)
    pl = trust_table_pairs(pairs, ["p1"], ["m"], n_resamples=60, n_permutations=70, confidence=0.9, alpha=0.1, seed=5)
    pd.testing.assert_frame_equal(pw.table, pl.table)
