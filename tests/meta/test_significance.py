"""Bootstrap intervals, paired permutation tests and significance clusters against independent
implementations (scipy.stats.bootstrap / permutation_test, mt-metrics-eval's AssignRanks rule)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import scipy.stats as st

from evalign.errors import InputError
from evalign.meta.clusters import MetricComparison, compare_metrics, significance_clusters
from evalign.meta.correlation import correlation
from evalign.meta.resampling import Resampling
from evalign.meta.significance import (
    bootstrap_ci,
    make_statistic,
    paired_permutation_test,
)

#: the item-index path (scipy's draws) for the statistics the default resamples by sufficient statistics
ITEMS = Resampling(method="items")


def _data(n_sys: int = 5, n_items: int = 30, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(n_sys, n_items))
    a = h + rng.normal(size=h.shape)
    b = 40.0 * (h + 2.0 * rng.normal(size=h.shape)) + 7.0  # another scale
    return h, a, b


def _scipy_ci(fn, n_items: int, n_resamples: int, seed: int, confidence: float = 0.95):
    """scipy's percentile bootstrap over item indices (a single index sample, same draws as a paired one)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return st.bootstrap(
            (np.arange(n_items),),
            lambda i: fn(i.astype(int)),
            vectorized=False,
            n_resamples=n_resamples,
            confidence_level=confidence,
            method="percentile",
            rng=np.random.default_rng(seed),
        ).confidence_interval


@pytest.mark.parametrize(
    ("method", "level", "grouping"),
    [("kendall", "system", "none"), ("pearson", "system", "none"), ("kendall", "item", "item"),
     ("spearman", "item", "none"), ("pearson", "item", "system")],
)
def test_percentile_interval_equals_scipy_bootstrap(method: str, level: str, grouping: str) -> None:
    h, a, _ = _data()
    ours = bootstrap_ci(method, h, a, n_resamples=300, confidence=0.9, seed=7, level=level, grouping=grouping)

    def fn(i: np.ndarray) -> float:
        return correlation(h[:, i], a[:, i], method, level, grouping).value

    ci = _scipy_ci(fn, h.shape[1], 300, 7, 0.9)
    assert ours.value == pytest.approx(correlation(h, a, method, level, grouping).value, abs=1e-12)
    assert ours.low == pytest.approx(float(ci.low), abs=1e-9)
    assert ours.high == pytest.approx(float(ci.high), abs=1e-9)
    assert ours.n_valid == 300 and ours.low <= ours.value <= ours.high


def test_system_human_vector_is_fixed_and_interval_equals_scipy() -> None:
    _, a, _ = _data(n_sys=8)
    ranks = np.array([3.0, 4, 5, 6, 8, 9, 10, 11])
    human = -ranks  # higher is better
    ours = bootstrap_ci("kendall", human, a, n_resamples=200, seed=3, level="system")

    def fn(i: np.ndarray) -> float:
        return correlation(human, a[:, i].mean(axis=1), "kendall", "system").value

    ci = _scipy_ci(fn, a.shape[1], 200, 3)
    assert ours.low == pytest.approx(float(ci.low), abs=1e-9)
    assert ours.high == pytest.approx(float(ci.high), abs=1e-9)


def test_plain_callable_and_basic_method() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=50)
    y = x + rng.normal(size=50)

    def mean_diff(h: np.ndarray, m: np.ndarray) -> float:
        return float(np.mean(m - h))

    ours = bootstrap_ci(mean_diff, x, y, n_resamples=500, seed=11)
    ci = _scipy_ci(lambda i: float(np.mean(y[i] - x[i])), 50, 500, 11)
    assert (ours.low, ours.high) == pytest.approx((float(ci.low), float(ci.high)), abs=1e-12)
    basic = bootstrap_ci(mean_diff, x, y, n_resamples=500, seed=11, method="basic")
    assert basic.low == pytest.approx(2 * ours.value - ours.high)
    assert basic.high == pytest.approx(2 * ours.value - ours.low)


def test_fast_paths_equal_the_generic_resampling() -> None:
    """The matrix-product paths (system means, per-item units) give the same distribution as
    recomputing the statistic on each resampled matrix."""
    h, a, _ = _data(n_items=40)
    a[1, 3] = np.nan  # a missing cell
    for method, level, grouping in [("kendall", "system", "none"), ("pearson", "item", "item")]:
        fast = bootstrap_ci(method, h, a, n_resamples=100, seed=5, level=level, grouping=grouping)

        def generic(hh: np.ndarray, mm: np.ndarray, method: str = method, level: str = level,
                    grouping: str = grouping) -> float:
            return correlation(hh, mm, method, level, grouping).value

        slow = bootstrap_ci(generic, h, a, n_resamples=100, seed=5)
        np.testing.assert_allclose(fast.distribution, slow.distribution, atol=1e-12)


def test_seeded_runs_reproduce_exactly() -> None:
    h, a, b = _data()
    r1 = bootstrap_ci("kendall", h, a, n_resamples=100, seed=42, level="system")
    r2 = bootstrap_ci("kendall", h, a, n_resamples=100, seed=42, level="system")
    r3 = bootstrap_ci("kendall", h, a, n_resamples=100, seed=43, level="system")
    assert r1 == r2
    np.testing.assert_array_equal(r1.distribution, r2.distribution)
    assert not np.array_equal(r1.distribution, r3.distribution)
    p1 = paired_permutation_test("pearson", h, a, b, n_permutations=200, seed=9, grouping="none")
    p2 = paired_permutation_test("pearson", h, a, b, n_permutations=200, seed=9, grouping="none")
    assert p1 == p2


@pytest.mark.parametrize(
    ("method", "level", "grouping"),
    [("pearson", "system", "none"), ("kendall", "item", "item"), ("spearman", "item", "none")],
)
def test_exact_permutation_p_equals_scipy_permutation_test(method: str, level: str, grouping: str) -> None:
    n = 7
    h, a, b = _data(n_sys=4, n_items=n, seed=3)
    ours = paired_permutation_test(method, h, a, b, n_permutations=1000, level=level, grouping=grouping)
    assert ours.exact and ours.n_permutations == 2**n

    # scipy swaps x_i and y_i per item; the values are z-scored per metric first (mt-metrics-eval)
    def z(x: np.ndarray) -> np.ndarray:
        return (x - x.mean()) / x.std()

    both = np.concatenate([z(a), z(b)], axis=1)

    def stat(x: np.ndarray, y: np.ndarray) -> float:
        return (correlation(h, both[:, x.astype(int)], method, level, grouping).value
                - correlation(h, both[:, y.astype(int)], method, level, grouping).value)

    ref = st.permutation_test((np.arange(n), np.arange(n) + n), stat, permutation_type="samples",
                              vectorized=False, n_resamples=10_000, alternative="two-sided")
    assert ours.delta == pytest.approx(ref.statistic, abs=1e-12)
    assert ours.p_value == pytest.approx(ref.pvalue, abs=1e-12)


@pytest.mark.parametrize("alternative", ["greater", "less"])
def test_one_sided_exact_p_equals_scipy_permutation_test(alternative: str) -> None:
    n = 7
    h, a, b = _data(n_sys=4, n_items=n, seed=5)
    ours = paired_permutation_test("kendall", h, a, b, n_permutations=1000, level="system", alternative=alternative)

    def z(x: np.ndarray) -> np.ndarray:
        return (x - x.mean()) / x.std()

    both = np.concatenate([z(a), z(b)], axis=1)

    def stat(x: np.ndarray, y: np.ndarray) -> float:
        return (correlation(h, both[:, x.astype(int)], "kendall", "system").value
                - correlation(h, both[:, y.astype(int)], "kendall", "system").value)

    ref = st.permutation_test((np.arange(n), np.arange(n) + n), stat, permutation_type="samples",
                              vectorized=False, n_resamples=10_000, alternative=alternative)
    assert ours.exact and ours.alternative == alternative
    assert ours.p_value == pytest.approx(ref.pvalue, abs=1e-12)
    rand = paired_permutation_test("kendall", h, a, b, n_permutations=50, level="system", alternative=alternative)
    assert not rand.exact and rand.p_value >= 1 / 51


def test_randomised_p_value_uses_plus_one_correction_and_tracks_exact() -> None:
    h, a, b = _data(n_sys=4, n_items=11, seed=4)
    exact = paired_permutation_test("kendall", h, a, b, n_permutations=4096, grouping="item")
    approx = paired_permutation_test("kendall", h, a, b, n_permutations=2000, seed=1, grouping="item")
    assert exact.exact and not approx.exact
    assert approx.p_value == pytest.approx(exact.p_value, abs=0.04)
    k = round(approx.p_value * 2001) - 1  # p = (1 + hits) / (n + 1)
    assert approx.p_value == pytest.approx((1 + k) / 2001)
    same = paired_permutation_test("kendall", h, a, a, n_permutations=50, grouping="item")
    assert same.delta == 0 and same.p_value == 1.0


def test_hand_computed_units_permutation() -> None:
    """Two items, one metric perfect (tau 1 on both items), the other reversed (tau -1):
    the four swap patterns give deltas 2, 0, 0, -2, so the exact two-sided p is 2/4."""
    h = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    good = h.copy()
    bad = -h
    r = paired_permutation_test("kendall", h, good, bad, n_permutations=100, grouping="item")
    assert r.exact and r.delta == pytest.approx(2.0) and r.p_value == pytest.approx(0.5)


def _assign_ranks(sig_matrix: np.ndarray, pval: float) -> list[int]:
    """mt-metrics-eval tasks.AssignRanks, restated from its definition as an oracle."""
    n = sig_matrix.shape[0]
    ranks, current, start = [0] * n, 1, 0
    for i in range(n):
        if any(sig_matrix[:, i][start:i] <= pval):
            current += 1
            start = i
        ranks[i] = current
    return ranks


def test_clusters_hand_case() -> None:
    values = {"a": 0.9, "b": 0.85, "c": 0.5, "d": 0.45}
    p = {("a", "b"): 0.3, ("a", "c"): 0.01, ("b", "c"): 0.2, ("a", "d"): 0.001, ("b", "d"): 0.01, ("c", "d"): 0.5}
    assert significance_clusters((values, p)) == {"a": 1, "b": 1, "c": 2, "d": 2}
    p[("a", "c")] = 0.2
    assert significance_clusters((values, p)) == {"a": 1, "b": 1, "c": 1, "d": 2}
    assert significance_clusters((values, p), alpha=0.0001) == {"a": 1, "b": 1, "c": 1, "d": 1}
    values["e"] = float("nan")
    p.update({(k, "e"): float("nan") for k in "abcd"})
    assert significance_clusters((values, p))["e"] == 3


def test_clusters_match_assign_ranks_oracle() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        k = 6
        names = [f"m{i}" for i in range(k)]
        vals = np.sort(rng.random(k))[::-1]
        pm = rng.random((k, k)) * 0.12
        pm = np.triu(pm, 1) + np.triu(pm, 1).T
        comp = MetricComparison("x", tuple(names), tuple(vals), pm)
        ours = significance_clusters(comp, alpha=0.05)
        assert [ours[n] for n in names] == _assign_ranks(np.triu(pm, 1) + np.tril(np.ones((k, k))), 0.05)


def test_compare_metrics_matrix() -> None:
    h, a, b = _data()
    c = a + np.random.default_rng(2).normal(size=a.shape) * 3
    comp = compare_metrics("kendall", h, {"a": a, "b": b, "c": c}, n_permutations=200, seed=0, grouping="item")
    assert comp.names == ("a", "b", "c")
    assert comp.p("a", "b") == comp.p("b", "a")
    assert comp.p("a", "a") == 1.0
    r = paired_permutation_test("kendall", h, a, c, n_permutations=200, seed=0, grouping="item")
    assert comp.p("a", "c") == r.p_value
    for i, j in itertools.combinations(range(3), 2):
        assert 0 < comp.p_values[i, j] <= 1


def test_bad_inputs_raise_clear_errors() -> None:
    h, a, _ = _data()
    with pytest.raises(InputError, match="items"):
        bootstrap_ci("kendall", h[:, :10], a)
    with pytest.raises(InputError, match="confidence"):
        bootstrap_ci("kendall", h, a, confidence=1.5)
    with pytest.raises(InputError, match="unknown statistic"):
        make_statistic("kendal")
    with pytest.raises(InputError, match="30 items but metric has 5"):
        paired_permutation_test("kendall", h, a, a[:, :5])


# ---------------------------------------------------------------------------------------------
# pairwise accuracy and preference accuracy


def _rated(n_sys: int = 6, n_items: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    h = rng.integers(1, 6, size=(n_sys, n_items)).astype(float)  # 1-5 ratings: human ties
    a = np.round(h + rng.normal(size=h.shape), 1)
    b = 100 * np.round(h + 2 * rng.normal(size=h.shape), 1)
    return h, a, b


def test_pairwise_accuracy_interval_equals_scipy_with_fixed_epsilon() -> None:
    from evalign.meta.pairwise import calibrate_epsilon, pairwise_accuracy

    h, a, _ = _rated()
    eps = calibrate_epsilon(h, a, grouping="item").epsilon
    # the item-index path draws scipy's resamples (the default resamples these credits by their counts)
    ours = bootstrap_ci("pairwise_accuracy", h, a, n_resamples=200, seed=2, resampling=ITEMS)
    assert ours.params["epsilon"] == eps and ours.resampling == "items"
    assert ours.value == pytest.approx(pairwise_accuracy(h, a, grouping="item").accuracy)
    ci = _scipy_ci(lambda i: pairwise_accuracy(h[:, i], a[:, i], grouping="item", epsilon=eps).accuracy,
                   h.shape[1], 200, 2)
    assert (ours.low, ours.high) == pytest.approx((float(ci.low), float(ci.high)), abs=1e-12)
    # grouping none goes through the generic path with the same fixed epsilon
    eps0 = calibrate_epsilon(h, a, grouping="none").epsilon
    flat = bootstrap_ci("pairwise_accuracy", h, a, n_resamples=50, seed=2, grouping="none")
    ci0 = _scipy_ci(lambda i: pairwise_accuracy(h[:, i], a[:, i], grouping="none", epsilon=eps0).accuracy,
                    h.shape[1], 50, 2)
    assert (flat.low, flat.high) == pytest.approx((float(ci0.low), float(ci0.high)), abs=1e-12)


def test_pairwise_accuracy_permutation_holds_each_epsilon_fixed() -> None:
    from evalign.meta.pairwise import calibrate_epsilon, pairwise_accuracy

    n = 8
    h, a, b = _rated(n_items=n, seed=5)
    ea = calibrate_epsilon(h, a, grouping="item").epsilon
    eb = calibrate_epsilon(h, b, grouping="item").epsilon
    ours = paired_permutation_test("pairwise_accuracy", h, a, b, n_permutations=1000)
    # per item accuracies of each metric at its own epsilon; a swap exchanges them
    acc = np.concatenate([pairwise_accuracy(h, a, grouping="item", epsilon=ea).group_accuracies,
                          pairwise_accuracy(h, b, grouping="item", epsilon=eb).group_accuracies])

    def stat(x: np.ndarray, y: np.ndarray) -> float:
        return float(np.nanmean(acc[x.astype(int)]) - np.nanmean(acc[y.astype(int)]))

    ref = st.permutation_test((np.arange(n), np.arange(n) + n), stat, permutation_type="samples",
                              vectorized=False, n_resamples=10_000, alternative="two-sided")
    assert ours.exact
    assert ours.value_a == pytest.approx(pairwise_accuracy(h, a, grouping="item").accuracy)
    assert ours.delta == pytest.approx(ref.statistic, abs=1e-12)
    assert ours.p_value == pytest.approx(ref.pvalue, abs=1e-12)
    with pytest.raises(InputError, match="grouping='item'"):
        paired_permutation_test("pairwise_accuracy", h, a, b, grouping="none")


def _prefs(n: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = rng.choice([-1.0, 0.0, 1.0], size=n, p=[0.45, 0.1, 0.45])
    prefs = np.stack([np.where(rng.random(n) < 0.85, truth, rng.choice([-1.0, 0.0, 1.0], size=n)) for _ in range(3)],
                     axis=1)
    prefs[0, 2] = np.nan
    qa = rng.normal(size=n)
    sa = np.round(qa + 0.8 * truth, 1)
    sb = np.round(qa + rng.normal(scale=0.5, size=n), 1)
    ta = np.round(30 * (qa + 0.2 * truth + rng.normal(size=n)))
    tb = np.round(30 * qa)
    return prefs, np.vstack([sa, sb]), np.vstack([ta, tb]), truth


@pytest.mark.parametrize("name", ["preference_accuracy", "preference_accuracy_no_ties"])
def test_preference_accuracy_interval_equals_scipy(name: str) -> None:
    from evalign.meta.pairwise import pairwise_preference_accuracy

    prefs, m, _, _ = _prefs()
    ours = bootstrap_ci(name, prefs.T, m, n_resamples=200, seed=4, resampling=ITEMS)
    eps = pairwise_preference_accuracy(prefs, m[0], m[1]).epsilon if name == "preference_accuracy" else 0.0
    assert ours.params["epsilon"] == eps
    attr = "accuracy_with_ties" if name == "preference_accuracy" else "accuracy_without_ties"
    full = getattr(pairwise_preference_accuracy(prefs, m[0], m[1], epsilon=eps), attr)
    assert ours.value == pytest.approx(full)
    ci = _scipy_ci(lambda i: getattr(pairwise_preference_accuracy(prefs[i], m[0, i], m[1, i], epsilon=eps), attr),
                   prefs.shape[0], 200, 4)
    assert (ours.low, ours.high) == pytest.approx((float(ci.low), float(ci.high)), abs=1e-12)


def test_preference_permutation_exact_small_case() -> None:
    from evalign.meta.pairwise import pairwise_preference_accuracy

    prefs, m1, m2, _ = _prefs(n=9, seed=3)
    ours = paired_permutation_test("preference_accuracy", prefs.T, m1, m2, n_permutations=1000)
    e1 = pairwise_preference_accuracy(prefs, m1[0], m1[1]).epsilon
    e2 = pairwise_preference_accuracy(prefs, m2[0], m2[1]).epsilon

    def correct(m: np.ndarray, e: float) -> np.ndarray:
        return np.array([pairwise_preference_accuracy(prefs[i : i + 1], m[0, i : i + 1], m[1, i : i + 1],
                                                      epsilon=e).accuracy_with_ties for i in range(9)])

    both = np.concatenate([correct(m1, e1), correct(m2, e2)])

    def stat(x: np.ndarray, y: np.ndarray) -> float:
        return float(both[x.astype(int)].mean() - both[y.astype(int)].mean())

    ref = st.permutation_test((np.arange(9), np.arange(9) + 9), stat, permutation_type="samples",
                              vectorized=False, n_resamples=10_000, alternative="two-sided")
    assert ours.exact and ours.n_permutations == 512
    assert ours.delta == pytest.approx(ref.statistic, abs=1e-12)
    assert ours.p_value == pytest.approx(ref.pvalue, abs=1e-12)
