"""Correlations against scipy.stats on the same vectors, on random data with ties and NaNs."""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest
from scipy import stats

from evalign.errors import InputError
from evalign.meta.correlation import correlation, grouped_correlations, system_means

SCIPY = {
    "pearson": lambda x, y, v: stats.pearsonr(x, y).statistic,
    "spearman": lambda x, y, v: stats.spearmanr(x, y).statistic,
    "kendall": lambda x, y, v: stats.kendalltau(x, y, variant=v).statistic,
}


def reference(human: np.ndarray, metric: np.ndarray, method: str, level: str, grouping: str, variant: str) -> tuple[float, int, int, int]:
    """Loop over groups, call scipy on each vector: (mean, n_groups, n_constant, n_points)."""
    if level == "system":
        if human.ndim == 2:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                human, metric = np.nanmean(human, axis=1), np.nanmean(metric, axis=1)
        vectors = [(human, metric)]
    elif human.ndim == 1 or grouping == "none":
        vectors = [(human.ravel(), metric.ravel())]
    elif grouping == "item":
        vectors = [(human[:, j], metric[:, j]) for j in range(human.shape[1])]
    else:
        vectors = [(human[i], metric[i]) for i in range(human.shape[0])]
    vals, constant, points = [], 0, 0
    for x, y in vectors:
        both = ~(np.isnan(x) | np.isnan(y))
        x, y = x[both], y[both]
        if x.size < 2:
            continue
        if np.all(x == x[0]) or np.all(y == y[0]):
            constant += 1
            continue
        vals.append(SCIPY[method](x, y, variant))
        points += x.size
    return (float(np.mean(vals)) if vals else float("nan")), len(vals), constant, points


def random_case(rng: np.random.Generator, s: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    human = rng.integers(1, int(rng.integers(2, 6)) + 1, size=(s, n)).astype(np.float64)
    if rng.random() < 0.5:
        metric = human + rng.normal(size=(s, n))
    else:
        metric = rng.integers(0, 4, size=(s, n)).astype(np.float64)  # heavy ties
    for arr in (human, metric):
        arr[rng.random(arr.shape) < rng.choice([0.0, 0.1, 0.3])] = np.nan
    if rng.random() < 0.3:
        human[:, int(rng.integers(n))] = 2.0  # a constant item
    return human, metric


CASES = [
    (method, level, grouping, variant)
    for method in ("kendall", "pearson", "spearman")
    for level, grouping in (("system", "none"), ("item", "none"), ("item", "item"), ("item", "system"))
    for variant in (("b", "c") if method == "kendall" else ("b",))
]


@pytest.mark.parametrize(("method", "level", "grouping", "variant"), CASES)
def test_matches_scipy(method: str, level: str, grouping: str, variant: str) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{method}{level}{grouping}{variant}".encode()))
    for _ in range(25):
        human, metric = random_case(rng, int(rng.integers(2, 9)), int(rng.integers(2, 12)))
        want, n_groups, constant, points = reference(human, metric, method, level, grouping, variant)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no RuntimeWarning from NaN handling
            res = correlation(human, metric, method=method, level=level, grouping=grouping, variant=variant)  # type: ignore[arg-type]
        if np.isnan(want):
            assert np.isnan(res.value)
        else:
            assert res.value == pytest.approx(want, abs=1e-12)
        assert res.n_groups == n_groups
        assert res.n_skipped_constant == constant
        assert res.n_pairs_or_points == points
        assert (res.method, res.level, res.grouping) == (method, level, grouping)


@pytest.mark.parametrize("method", ["kendall", "pearson", "spearman"])
@pytest.mark.parametrize("variant", ["b", "c"])
def test_large_groups_match_scipy(method: str, variant: str) -> None:
    """Groups larger than the vectorised Kendall limit (scipy's O(n log n) path) and many small groups."""
    rng = np.random.default_rng(42)
    human = rng.integers(1, 6, size=(3, 300)).astype(np.float64)
    metric = np.round(human + rng.normal(size=human.shape), 1)
    human[rng.random(human.shape) < 0.1] = np.nan
    for grouping in ("system", "item", "none"):
        want = reference(human, metric, method, "item", grouping, variant)[0]
        got = correlation(human, metric, method=method, level="item", grouping=grouping, variant=variant)  # type: ignore[arg-type]
        assert got.value == pytest.approx(want, abs=1e-12)


def test_group_values_and_one_dimensional_input() -> None:
    rng = np.random.default_rng(0)
    human, metric = random_case(rng, 5, 8)
    res = correlation(human, metric, level="item", grouping="item")
    assert res.group_values.shape == (8,)
    assert res.value == pytest.approx(np.nanmean(res.group_values))
    # 1-D per-system inputs (e.g. a given ranking) at system level
    ranks = np.array([1.0, 2.0, 3.0, 4.0])
    scores = np.array([0.9, 0.7, 0.8, 0.1])
    got = correlation(-ranks, scores, method="spearman")
    assert got.value == pytest.approx(stats.spearmanr(-ranks, scores).statistic)
    assert got.n_pairs_or_points == 4 and got.n_groups == 1
    # a system without any item is left out
    h = np.array([[1.0, 2.0], [np.nan, np.nan], [3.0, 3.0], [2.0, 5.0]])
    m = np.array([[0.1, 0.3], [0.5, 0.5], [0.2, 0.9], [0.4, 0.4]])
    sys_res = correlation(h, m, method="pearson")
    assert sys_res.value == pytest.approx(stats.pearsonr([1.5, 3.0, 3.5], [0.2, 0.55, 0.4]).statistic)
    assert sys_res.n_pairs_or_points == 3


def test_hand_computed_kendall() -> None:
    # 4 systems, concordant pairs: 5, discordant: 1 -> tau = (5 - 1) / 6
    res = correlation([1.0, 2.0, 3.0, 4.0], [0.1, 0.3, 0.2, 0.4])
    assert res.value == pytest.approx(4 / 6)


def test_constant_and_empty() -> None:
    res = correlation(np.ones((3, 4)), np.arange(12.0).reshape(3, 4), level="item", grouping="item")
    assert np.isnan(res.value) and res.n_groups == 0 and res.n_skipped_constant == 4
    one = correlation(np.array([[1.0, np.nan], [np.nan, 2.0]]), np.ones((2, 2)), level="item", grouping="item")
    assert one.n_skipped_small == 2 and np.isnan(one.value)


def test_grouped_correlations_rows() -> None:
    x = np.array([[1.0, 2.0, 3.0, np.nan], [3.0, 1.0, 2.0, 4.0]])
    y = np.array([[2.0, 1.0, 3.0, np.nan], [1.0, 2.0, 3.0, 4.0]])
    vals, counts = grouped_correlations(x, y, "kendall")
    assert counts.tolist() == [3, 4]
    assert vals[0] == pytest.approx(stats.kendalltau([1, 2, 3], [2, 1, 3]).statistic)
    assert vals[1] == pytest.approx(stats.kendalltau([3, 1, 2, 4], [1, 2, 3, 4]).statistic)
    assert system_means(np.array([[1.0, np.nan, 3.0]])).tolist() == [2.0]


def test_bad_input() -> None:
    with pytest.raises(InputError, match="metric"):
        correlation(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(InputError, match="method"):
        correlation(np.zeros(3), np.zeros(3), method="tau")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="grouping"):
        correlation(np.zeros((2, 3)), np.zeros((2, 3)), grouping="item")
    with pytest.raises(InputError, match="level"):
        correlation(np.zeros(3), np.zeros(3), level="segment")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="numeric"):
        correlation(["a", "b"], [1.0, 2.0])
    with pytest.raises(InputError, match="variant"):
        correlation(np.zeros(3), np.zeros(3), variant="a")  # type: ignore[arg-type]
