"""``evalign.meta.correlation.row_ranks`` (the Spearman rows' ranking) equals scipy's ``rankdata(axis=1,
nan_policy="omit")`` bit for bit on many random inputs: ties, NaN, infinities, one column, one row."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from evalign.meta.correlation import row_ranks


@pytest.mark.parametrize("seed", range(40))
def test_row_ranks_equal_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m, k = int(rng.integers(1, 12)), int(rng.integers(1, 40))
    levels = int(rng.integers(1, 8))
    x = rng.integers(0, levels, size=(m, k)).astype(np.float64) if seed % 2 else rng.normal(size=(m, k))
    x[rng.random((m, k)) < 0.2] = np.nan
    if seed % 5 == 0:
        x[rng.random((m, k)) < 0.1] = np.inf
        x[rng.random((m, k)) < 0.1] = -np.inf
    got = row_ranks(x)
    want = stats.rankdata(x, axis=1, nan_policy="omit")
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.isnan(got), np.isnan(x))


def test_row_ranks_known_values() -> None:
    got = row_ranks(np.array([[3.0, 1.0, 3.0, np.nan, 2.0], [1.0, 1.0, 1.0, 1.0, 1.0]]))
    np.testing.assert_array_equal(got, [[3.5, 1.0, 3.5, np.nan, 2.0], [3.0, 3.0, 3.0, 3.0, 3.0]])
    assert row_ranks(np.empty((0, 3))).shape == (0, 3)
