"""The batched Kendall (:func:`kendall_resampled`, :func:`kendall_swapped`) on the shape of the
published sets' item ratings: a rating scale (few human levels) against a metric whose values are
nearly all distinct, pinned to ``scipy.stats.kendalltau`` row by row, whatever the block size of
the batch (the count of concordant minus discordant pairs runs over the human levels), with every
value present (no mask) or some missing, on long rows (counted from tables) and short ones (one by
one)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from scipy import stats

C = importlib.import_module("evalign.meta.correlation")  # the module (evalign.meta exports the function)


def _tau(x: np.ndarray, y: np.ndarray) -> float:
    ok = ~(np.isnan(x) | np.isnan(y))
    return float(stats.kendalltau(x[ok], y[ok]).statistic)


@pytest.mark.parametrize("cells", [C._KENDALL_BATCH_CELLS, 1])
@pytest.mark.parametrize("levels", [2, 11])
@pytest.mark.parametrize(("n", "missing"), [(400, 0.0), (400, 0.05), (30, 0.0)])
def test_batched_tau_b_equals_scipy_on_a_rating_scale(monkeypatch: pytest.MonkeyPatch, cells: int, levels: int,
                                                      n: int, missing: float) -> None:
    rng = np.random.default_rng(1000 * levels + cells % 997 + n)
    x = rng.integers(0, levels, n).astype(float)
    y = np.round(rng.normal(size=n) + 1.5 * x, 2)  # ties in y too, a positive association
    y2 = np.round(rng.normal(size=n), 2)
    y[rng.random(n) < missing] = np.nan
    idx = rng.integers(0, n, (12, n))
    masks = rng.random((12, n)) < 0.5
    monkeypatch.setattr(C, "_KENDALL_BATCH_CELLS", cells)
    got = C.kendall_resampled(x, y, idx)
    np.testing.assert_allclose(got, [_tau(x[i], y[i]) for i in idx], rtol=0, atol=1e-12)
    assert np.all(np.asarray(got) > 0.2)  # the association is found, not a constant
    got = C.kendall_swapped(x, y, y2, masks)
    np.testing.assert_allclose(got, [_tau(x, np.where(m, y2, y)) for m in masks], rtol=0, atol=1e-12)
