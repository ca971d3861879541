"""New meta-evaluation statistics against mt-metrics-eval and brute force written from the definitions.

``MTME`` holds values computed by running mt-metrics-eval's own functions (github.com/google-research/
mt-metrics-eval, commit 68a481aea1a787392d55af8f76ac8ef40c5f4664, ``mt_metrics_eval/stats.py`` and
``pce.py``; numpy 2.4, scipy as installed here) outside this repository on the inputs of
:func:`_inputs` (the same seeded code): ``stats.KendallVariants(gold, metric, variant, epsilon=e)``,
``stats.AverageCorrelation(fn, num_sys=6, average_by=..., macro=...)`` on the row-major flattened
``h_missing`` (None where NaN) and ``m1``, ``stats.PairwiseConfidenceError(h, m, num_sys=6,
num_permutations=1000)``, ``pce.compute_pairwise_p_values(h, 1000)`` (upper triangle, row-major),
``stats.WilliamsTest`` / ``WilliamsSigDiff`` with ``scipy.stats.pearsonr``. No mt-metrics-eval code is
in this repository.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.stats

from evalign.errors import InputError
from evalign.meta.clusters import compare_metrics
from evalign.meta.correlation import correlation
from evalign.meta.significance import make_statistic, paired_permutation_test
from evalign.meta.soft_pairwise import pairwise_p_values, soft_pairwise_accuracy
from evalign.meta.williams import williams_p_value, williams_test

MTME = {
    'kendall_b_0.0': 0.562254259501966,
    'kendall_b_0.3': 0.5763837498705606,
    'kendall_b_1.0': 0.6148838662368639,
    'kendall_c_0.0': 0.556875,
    'kendall_23_0.0': 0.5102564102564102,
    'kendall_23_0.3': 0.4,
    'kendall_23_1.0': 0.09487179487179487,
    'kendall_acc23_0.0': 0.7551282051282051,
    'kendall_acc23_0.3': 0.7,
    'kendall_acc23_1.0': 0.5474358974358975,
    'avg_pearson_item_macro': 0.7047621195747427,
    'avg_pearson_item_micro': 0.6966645418467566,
    'avg_pearson_sys_macro': 0.7447902229894741,
    'avg_pearson_sys_micro': 0.7465742797473166,
    'avg_kendall_item_macro': 0.5217124696035143,
    'avg_kendall_item_micro': 0.5072534628148456,
    'avg_kendall_sys_macro': 0.5594638614528737,
    'avg_kendall_sys_micro': 0.5630294328903954,
    'avg_tau23_item_micro_eps0.5': 0.33180661577608145,
    'spa_m1': 0.8330666666666666,
    'spa_m2': 0.7513333333333333,
    'williams_one': 0.02876401753383595,
    'williams_two': 0.0575280350676719,
    'williams_sigdiff': [0.02876401753383595, 0.9267284876133756, 0.7139400276480797],
    'pvals_h_upper': [0.613, 0.963, 1.0, 0.996, 1.0, 0.947, 0.995, 1.0, 1.0, 0.913, 0.834, 1.0, 0.315, 0.986, 0.999],
}


def _inputs() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(2024)
    gold = np.round(rng.normal(size=40), 1)
    metric = np.round(gold + rng.normal(size=40), 1)
    h = np.round(rng.normal(size=(6, 25)) + np.arange(6)[:, None] * 0.3, 1)
    m1 = np.round(h + rng.normal(size=h.shape), 2)
    m2 = np.round(0.5 * h + rng.normal(size=h.shape), 2)
    h_missing = h.copy()
    h_missing[rng.random(h.shape) < 0.15] = np.nan
    sys_h = rng.normal(size=12)
    sys_a = sys_h + 0.5 * rng.normal(size=12)
    sys_b = sys_h + 1.0 * rng.normal(size=12)
    return gold, metric, h, m1, m2, h_missing, sys_h, sys_a, sys_b


def _brute_kendall(h: np.ndarray, m: np.ndarray, variant: str, eps: float) -> float:
    """Every pair i < j, from the definitions (metric tie: |dm| <= eps; human tie: dh == 0)."""
    con = dis = ht = mt = both = 0
    for i, j in itertools.combinations(range(len(h)), 2):
        dh, dm = h[j] - h[i], m[j] - m[i]
        htie, mtie = dh == 0, abs(dm) <= eps
        if htie and mtie:
            both += 1
        elif htie:
            ht += 1
        elif mtie:
            mt += 1
        elif (dh > 0) == (dm > 0):
            con += 1
        else:
            dis += 1
    tot = con + dis + ht + mt + both
    if variant == "b":
        if mt + both == tot or ht + both == tot:
            return float("nan")
        return (con - dis) / math.sqrt(tot - mt - both) / math.sqrt(tot - ht - both)
    if variant == "23":
        return (con + both - dis - ht - mt) / tot
    return (con + both) / tot


@pytest.mark.parametrize("variant", ["b", "c", "23", "acc23"])
@pytest.mark.parametrize("eps", [0.0, 0.3, 1.0])
def test_kendall_variants_equal_mt_metrics_eval(variant: str, eps: float) -> None:
    gold, metric, *_ = _inputs()
    if variant == "c" and eps > 0:
        with pytest.raises(InputError, match="tau-c"):
            correlation(gold, metric, "kendall", "item", variant="c", epsilon=eps)
        return
    got = correlation(gold, metric, "kendall", "item", variant=variant, epsilon=eps).value  # type: ignore[arg-type]
    assert got == pytest.approx(MTME[f"kendall_{variant}_{eps}"], abs=1e-12)
    if variant != "c":
        assert got == pytest.approx(_brute_kendall(gold, metric, variant, eps), abs=1e-12)
    if eps == 0 and variant in ("b", "c"):
        assert got == pytest.approx(scipy.stats.kendalltau(gold, metric, variant=variant).statistic, abs=1e-12)


@pytest.mark.parametrize("n", [10, 64, 65, 150])
def test_kendall_epsilon_grouped_and_long_vectors_equal_brute_force(n: int) -> None:
    # rows of at most 64 values take the vectorised path, longer ones the blocked pair count
    rng = np.random.default_rng(n)
    h = rng.integers(1, 5, size=(3, n)).astype(float)
    m = np.round(h + rng.normal(size=h.shape), 1)
    h[0, : n // 5] = np.nan
    for variant, eps in (("b", 0.25), ("23", 0.0), ("23", 0.5), ("acc23", 0.4)):
        r = correlation(h, m, "kendall", "item", "system", variant=variant, epsilon=eps)  # type: ignore[arg-type]
        want = []
        for g in range(3):
            ok = ~np.isnan(h[g])
            want.append(_brute_kendall(h[g, ok], m[g, ok], variant, eps))
        assert np.allclose(r.group_values, want, atol=1e-12)


def test_tau_23_defined_on_constant_vectors() -> None:
    h = np.array([1.0, 1.0, 1.0, 2.0])
    m = np.array([0.5, 0.5, 0.5, 0.5])  # constant metric: tau-b undefined, tau_23 and acc_23 are not
    assert math.isnan(correlation(h, m, "kendall", "item").value)
    assert correlation(h, m, "kendall", "item", variant="23").value == pytest.approx((3 - 3) / 6)
    assert correlation(h, m, "kendall", "item", variant="acc23").value == pytest.approx(3 / 6)


@pytest.mark.parametrize("method", ["pearson", "kendall"])
@pytest.mark.parametrize("grouping", ["item", "system"])
@pytest.mark.parametrize("average", ["macro", "micro"])
def test_micro_and_macro_averages_equal_mt_metrics_eval(method: str, grouping: str, average: str) -> None:
    _, _, _, m1, _, h_missing, *_ = _inputs()
    got = correlation(h_missing, m1, method, "item", grouping, average=average).value  # type: ignore[arg-type]
    key = f"avg_{method}_{'item' if grouping == 'item' else 'sys'}_{average}"
    assert got == pytest.approx(MTME[key], abs=1e-12)


def test_micro_average_is_size_weighted_by_hand() -> None:
    h = np.array([[1.0, 2.0, np.nan], [2.0, 1.0, 3.0], [3.0, 3.0, 1.0]])
    m = np.array([[1.0, 1.0, 2.0], [2.0, 2.0, 3.0], [3.0, 0.0, 1.0]])
    r = correlation(h, m, "pearson", "item", "item")
    counts = np.array([3, 3, 2])
    assert correlation(h, m, "pearson", "item", "item", average="micro").value == pytest.approx(
        np.sum(counts * r.group_values) / counts.sum())
    with pytest.raises(InputError, match="average"):
        correlation(h, m, "pearson", "item", "item", average="weighted")  # type: ignore[arg-type]


def test_tau_23_statistic_with_epsilon_and_micro_equals_mt_metrics_eval() -> None:
    _, _, _, m1, _, h_missing, *_ = _inputs()
    stat = make_statistic("tau_23", level="item", grouping="item", epsilon=0.5, average="micro")
    assert stat.name == "tau_23"
    assert stat(h_missing, m1) == pytest.approx(MTME["avg_tau23_item_micro_eps0.5"], abs=1e-12)
    with pytest.raises(InputError, match="Kendall only"):
        make_statistic("pearson", epsilon=0.5)


def test_soft_pairwise_accuracy_equals_mt_metrics_eval() -> None:
    _, _, h, m1, m2, *_ = _inputs()
    assert np.array_equal(pairwise_p_values(h, 1000)[np.triu_indices(6, 1)], MTME["pvals_h_upper"])
    for name, m in (("m1", m1), ("m2", m2)):
        r = soft_pairwise_accuracy(h, m)
        assert r.value == pytest.approx(MTME[f"spa_{name}"], abs=1e-12)
        assert (r.n_systems, r.n_items, r.n_items_dropped, r.seed) == (6, 25, 0, 4)


def test_soft_pairwise_accuracy_brute_force_exact_enumeration() -> None:
    # with all 2**n sign patterns, p[i, j] is the exact permutation p-value; SPA from the definition
    rng = np.random.default_rng(3)
    h = rng.normal(size=(4, 8))
    m = h + rng.normal(size=h.shape)
    m[2, 5] = np.nan  # an incomplete item is left out
    keep = [c for c in range(8) if c != 5]

    def exact_p(x: np.ndarray) -> np.ndarray:
        x = x[:, keep]
        signs = np.array(list(itertools.product([-1.0, 1.0], repeat=x.shape[1])))
        p = np.full((4, 4), np.nan)
        for i, j in itertools.combinations(range(4), 2):
            d = x[i] - x[j]
            p[i, j] = np.mean(signs @ d >= d.sum() - 1e-9)
        return p

    ph, pm = exact_p(h), exact_p(m)
    want = 1 - np.mean([abs(ph[i, j] - pm[i, j]) for i, j in itertools.combinations(range(4), 2)])
    r = soft_pairwise_accuracy(h, m, n_permutations=200_000, seed=0)
    assert r.n_items == 7 and r.n_items_dropped == 1
    assert r.value == pytest.approx(want, abs=0.01)
    assert soft_pairwise_accuracy(h, h).value == 1.0


def test_williams_equals_mt_metrics_eval() -> None:
    *_, sys_h, sys_a, sys_b = _inputs()
    one = williams_test(sys_h, sys_a, sys_b)
    assert one.p_value == pytest.approx(MTME["williams_one"], abs=1e-14)
    assert (one.r_a, one.r_b) == pytest.approx(tuple(MTME["williams_sigdiff"][1:]), abs=1e-14)
    assert one.n == 12 and one.t > 0 and one.one_sided
    two = williams_test(sys_h, sys_a, sys_b, one_sided=False)
    assert two.p_value == pytest.approx(MTME["williams_two"], abs=1e-14)
    # symmetric: swapping the metrics flips t, not the one-sided p-value of |t|
    back = williams_test(sys_h, sys_b, sys_a)
    assert back.t == pytest.approx(-one.t) and back.p_value == pytest.approx(one.p_value)
    assert math.isnan(williams_p_value(0.9, 0.8, 0.7, 3))


def test_williams_from_the_formula_and_system_means() -> None:
    rng = np.random.default_rng(11)
    h = rng.normal(size=(9, 30))
    a, b = h + rng.normal(size=h.shape), h + 2 * rng.normal(size=h.shape)
    r = williams_test(h, a, b)  # level="system": per-system means
    hs, as_, bs = h.mean(axis=1), a.mean(axis=1), b.mean(axis=1)
    r12, r13, r23 = (scipy.stats.pearsonr(x, y).statistic for x, y in ((hs, as_), (hs, bs), (as_, bs)))
    n = 9
    k = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23
    t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23)) / math.sqrt(
        2 * (n - 1) / (n - 3) * k + ((r12 + r13) / 2) ** 2 * (1 - r23) ** 3)
    assert r.t == pytest.approx(t, rel=1e-12)
    assert r.p_value == pytest.approx(scipy.stats.t.sf(abs(t), n - 3), rel=1e-12)
    assert williams_test(h, a, b, level="item").n == h.size


def _cell_brute_p(stat_name: str, h: np.ndarray, a: np.ndarray, b: np.ndarray, **opts: object) -> float:
    """Exact two-sided p-value over all 2**cells swap patterns of the z-scored metrics."""
    stat = make_statistic(stat_name, **opts)  # type: ignore[arg-type]

    def z(x: np.ndarray) -> np.ndarray:
        return (x - x.mean()) / x.std()

    za, zb = z(a), z(b)
    d_obs = stat(h, a) - stat(h, b)
    hits, total = 0, 0
    for bits in itertools.product([False, True], repeat=a.size):
        mk = np.array(bits).reshape(a.shape)
        d = stat(h, np.where(mk, zb, za)) - stat(h, np.where(mk, za, zb))
        hits += abs(d) >= abs(d_obs) - 1e-12 * max(1.0, abs(d_obs))
        total += 1
    return hits / total


@pytest.mark.parametrize(("name", "opts"), [("pearson", {"level": "system"}),
                                            ("kendall", {"level": "item", "grouping": "none"}),
                                            ("spearman", {"level": "item", "grouping": "item"})])
def test_cell_permutation_exact_equals_brute_force(name: str, opts: dict[str, str]) -> None:
    rng = np.random.default_rng(5)
    h = rng.normal(size=(3, 4))
    a, b = h + rng.normal(size=h.shape), 30 * (h + 2 * rng.normal(size=h.shape))
    r = paired_permutation_test(name, h, a, b, n_permutations=5000, scheme="cell", **opts)  # type: ignore[arg-type]
    assert r.exact and r.n_permutations == 2**12
    assert r.p_value == pytest.approx(_cell_brute_p(name, h, a, b, **opts), abs=1e-12)
    item = paired_permutation_test(name, h, a, b, n_permutations=5000, **opts)  # type: ignore[arg-type]
    assert item.n_permutations == 2**4  # the item scheme swaps whole columns
    cmp = compare_metrics(name, h, {"a": a, "b": b}, n_permutations=5000, scheme="cell", **opts)
    assert cmp.p("a", "b") == r.p_value


def test_cell_permutation_random_and_guards() -> None:
    rng = np.random.default_rng(8)
    h = rng.normal(size=(5, 40))
    a, b = h + 0.3 * rng.normal(size=h.shape), h + 3 * rng.normal(size=h.shape)
    r = paired_permutation_test("pearson", h, a, b, n_permutations=199, scheme="cell", level="item", grouping="none")
    assert not r.exact and r.p_value == pytest.approx(1 / 200)  # a is much better: no swap reaches it
    assert r.delta == pytest.approx(correlation(h, a, "pearson", "item").value - correlation(h, b, "pearson", "item").value)
    with pytest.raises(InputError, match="scheme"):
        paired_permutation_test("pearson", h, a, b, scheme="rows")
    with pytest.raises(InputError, match="tie threshold"):
        paired_permutation_test("pairwise_accuracy", h, a, b, n_permutations=10, scheme="cell")
