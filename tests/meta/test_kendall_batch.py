"""The batched Kendall of the bootstrap and the permutation test (issue 39): every resample's and
every swap's value equals the one-row path's (``correlation``), which equals
``scipy.stats.kendalltau``; the intervals and p-values with the batch equal those computed one
resample at a time."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats

from evalign.meta.correlation import correlation, kendall_resampled, kendall_rows_batch, kendall_swapped
from evalign.meta.resampling import Resampling
from evalign.meta.significance import Statistic, bootstrap_ci, make_statistic, paired_permutation_test


def _one(x: np.ndarray, y: np.ndarray, variant: str) -> float:
    return correlation(x, y, method="kendall", level="item", variant=variant).value


def _data(rng: np.random.Generator, shape: tuple[int, ...], kx: int, ky: int) -> tuple[np.ndarray, ...]:
    x = rng.integers(0, kx, shape).astype(float)
    y = rng.integers(0, ky, shape).astype(float) / 7
    y2 = rng.integers(0, ky, shape).astype(float) / 7
    y[rng.random(shape) < 0.1] = np.nan
    x[rng.random(shape) < 0.03] = np.nan
    return x, y, y2


CASES = [(n, s, kx, ky) for n in (6, 64, 65, 300) for s in (1, 3) for kx, ky in ((1, 4), (3, 5), (6, 40), (5, 10**6))]


@pytest.mark.parametrize(("n", "systems", "kx", "ky"), CASES)
def test_batched_kendall_equals_the_one_row_path(n: int, systems: int, kx: int, ky: int) -> None:
    rng = np.random.default_rng(n * 31 + systems * 7 + kx + ky % 97)
    shape = (systems, n) if systems > 1 else (n,)
    x, y, y2 = _data(rng, shape, kx, ky)
    idx = rng.integers(0, n, (9, n))
    masks = rng.random((9, n)) < 0.5
    mk = masks[:, None, :] if systems > 1 else masks
    for variant in ("b", "23", "acc23"):
        got = kendall_resampled(x, y, idx, variant)
        want = [_one(x[..., idx[b]], y[..., idx[b]], variant) for b in range(9)]
        np.testing.assert_array_equal(got, want)
        got = kendall_swapped(x, y, y2, masks, variant)
        np.testing.assert_array_equal(got, [_one(x, np.where(mk[b], y2, y), variant) for b in range(9)])
    rows_x, rows_y = x.reshape(-1)[None, :].repeat(3, 0), y.reshape(-1)[None, :].repeat(3, 0)
    np.testing.assert_array_equal(kendall_rows_batch(rows_x, rows_y), [_one(x, y, "b")] * 3)


def test_batched_tau_b_equals_scipy_on_ties() -> None:
    rng = np.random.default_rng(5)
    x = rng.integers(0, 5, 2000).astype(float)
    y = np.round(rng.normal(size=2000) + x / 3, 1)
    idx = rng.integers(0, 2000, (20, 2000))
    got = kendall_resampled(x, y, idx)
    want = [stats.kendalltau(x[i], y[i]).statistic for i in idx]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    assert len(set(np.round(got, 12))) > 1


@pytest.mark.parametrize("systems", [1, 4])
def test_bootstrap_and_permutation_test_equal_the_one_by_one_path(systems: int) -> None:
    rng = np.random.default_rng(11 + systems)
    shape = (systems, 150) if systems > 1 else (150,)
    h, a, b = _data(rng, shape, 5, 12)
    r = Resampling(n_resamples=200, n_permutations=200, seed=3, workers=1)
    stat = make_statistic("kendall", level="item", grouping="none")
    assert stat.resampled is not None and stat.swapped is not None
    plain = dataclasses.replace(stat, resampled=None, swapped=None)
    fast, slow = bootstrap_ci(stat, h, a, resampling=r), bootstrap_ci(plain, h, a, resampling=r)
    assert (fast.value, fast.low, fast.high) == (slow.value, slow.low, slow.high)
    fast_p = paired_permutation_test(stat, h, a, b, resampling=r, grouping="none")
    slow_p = paired_permutation_test(plain, h, a, b, resampling=r, grouping="none")
    assert fast_p.p_value == slow_p.p_value and fast_p.delta == slow_p.delta
    const = Statistic("random", "generic", fn=lambda h, m: 0.05)  # a baseline without a batch (as the trust table's)
    fast_c = paired_permutation_test(stat, h, a, a, resampling=r, grouping="none", stat_b=const)
    slow_c = paired_permutation_test(plain, h, a, a, resampling=r, grouping="none", stat_b=const)
    assert fast_c.p_value == slow_c.p_value and fast_c.delta == slow_c.delta
    assert 0 < fast_p.p_value <= 1 and fast.low < fast.value < fast.high


def test_32_and_64_bit_counts_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows of at most ``_KENDALL_INT32_MAX_N`` pairs are counted in 32-bit integers: the values are
    those of 64-bit counts (here on 2,000 items of 11 human levels and ~1,900 metric values)."""
    import importlib

    module = importlib.import_module("evalign.meta.correlation")
    rng = np.random.default_rng(11)
    n = 2000
    x = rng.integers(0, 11, n).astype(float)
    y = rng.normal(size=n).round(3)
    idx = rng.integers(0, n, (40, n))
    masks = rng.random((30, n)) < 0.5
    y2 = rng.normal(size=n).round(2)
    small = kendall_resampled(x, y, idx), kendall_swapped(x, y, y2, masks)
    monkeypatch.setattr(module, "_KENDALL_INT32_MAX_N", 0)
    wide = kendall_resampled(x, y, idx), kendall_swapped(x, y, y2, masks)
    for a, b in zip(small, wide, strict=True):
        assert np.isfinite(a).all() and np.array_equal(a, b)
    assert np.isclose(wide[0][0], stats.kendalltau(x[idx[0]], y[idx[0]]).statistic, rtol=0, atol=1e-12)
