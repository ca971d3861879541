"""Resampling by sufficient statistics (counts of each credit value) equals the item-index path in distribution.

Two kinds of check:

* **Exact, on tiny inputs.** Every bootstrap resample (all ``n**n`` index tuples) and every swap pattern
  (all ``2**n`` masks) is enumerated, giving the item-index path's exact distribution with rational
  probabilities; the sufficient path's exact distribution (:func:`bootstrap_law`,
  :func:`permutation_law`: the laws its samplers draw from, factorised as they draw) must be *equal*
  (``Fraction`` for ``Fraction``). Where the item path enumerates swap patterns (``2**n <= P``), both
  paths' p-values must be bit-identical.
* **Monte Carlo, over many seeds.** Both paths are run on the same moderate inputs with S seeds x R
  resamples. Every resample is an independent draw from one law, so pooled over seeds: the empirical
  CDF is within the Dvoretzky-Kiefer-Wolfowitz band ``sqrt(ln(2 / 1e-6) / (2N))`` of the exact CDF
  (N = S x R draws; P(exceeded) <= 1e-6); the mean is within ``Z = 5`` standard errors
  (``sd / sqrt(N)``, sd of the exact law); the per-seed interval ends (2.5% and 97.5% quantiles)
  of the two paths have means within ``Z`` standard errors of their difference (estimated from the
  seeds); a p-value's permutation hits are Binomial(P, p) with p exact, so the pooled hit rate is
  within ``Z * sqrt(p (1 - p) / (P S))`` of p. ``Z = 5``: a two-sided normal tail of 6e-7 per check.
  The tolerances follow from these standard errors; none was tuned on the outcomes.
"""

from __future__ import annotations

import itertools
import math
import tracemalloc
from fractions import Fraction

import numpy as np
import pytest

from evalign.meta import sufficient as S
from evalign.meta.resampling import Resampling
from evalign.meta.significance import bootstrap_ci, make_statistic, paired_permutation_test

Z = 5.0
ITEMS = Resampling(method="items")


def _law_of_values(values: list[Fraction | None], weight: Fraction) -> dict[Fraction | None, Fraction]:
    law: dict[Fraction | None, Fraction] = {}
    for v in values:
        law[v] = law.get(v, Fraction(0)) + weight
    return law


def _value(num: Fraction, den: Fraction) -> Fraction | None:
    return num / den if den != 0 else None


def _item_bootstrap_law(num: np.ndarray, den: np.ndarray) -> dict[Fraction | None, Fraction]:
    """The item-index bootstrap's exact law: every one of the n**n index tuples, probability n**-n each."""
    n = num.size
    fn, fd = [Fraction(float(x)) for x in num], [Fraction(float(x)) for x in den]
    vals = [_value(sum((fn[i] for i in idx), Fraction(0)), sum((fd[i] for i in idx), Fraction(0)))
            for idx in itertools.product(range(n), repeat=n)]
    return _law_of_values(vals, Fraction(1, n**n))


def _item_permutation_law(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
                          ) -> dict[Fraction | None, Fraction]:
    """The item swap test's exact law: every one of the 2**n masks, probability 2**-n each."""
    (na, da), (nb, db) = ([Fraction(float(x)) for x in v] for v in a), ([Fraction(float(x)) for x in v] for v in b)
    n = len(na)
    vals = []
    for mask in itertools.product((False, True), repeat=n):
        sa = sum(((nb[i] if s else na[i]) for i, s in enumerate(mask)), Fraction(0))
        sda = sum(((db[i] if s else da[i]) for i, s in enumerate(mask)), Fraction(0))
        sb = sum(((na[i] if s else nb[i]) for i, s in enumerate(mask)), Fraction(0))
        sdb = sum(((da[i] if s else db[i]) for i, s in enumerate(mask)), Fraction(0))
        va, vb = _value(sa, sda), _value(sb, sdb)
        vals.append(None if va is None or vb is None else va - vb)
    return _law_of_values(vals, Fraction(1, 2**n))


# tiny credit vectors: 0/1 accuracies with pairs that do not count (den 0), per-item accuracies in
# thirds, one category only, and values that are not small integers
TINY = [
    (np.array([1.0, 0.0, 1.0, 1.0, 0.0]), np.array([1.0, 1.0, 1.0, 0.0, 0.0])),
    (np.array([1 / 3, 2 / 3, 1.0, 0.0, 2 / 3]), np.ones(5)),
    (np.array([1.0, 1.0, 1.0]), np.ones(3)),
    (np.array([0.25, 0.5, 0.5, 0.0]), np.array([1.0, 1.0, 1.0, 0.0])),
]


@pytest.mark.parametrize(("num", "den"), TINY)
def test_bootstrap_law_equals_enumeration_of_every_resample(num: np.ndarray, den: np.ndarray) -> None:
    cr = S.credits(num, den)
    assert cr is not None and cr.n == num.size and int(cr.counts.sum()) == num.size
    law = S.bootstrap_law(cr)
    assert law == _item_bootstrap_law(num, den)
    assert sum(law.values()) == 1


PAIRS = [
    ((np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0]), np.array([1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0])),
     (np.array([0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0]), np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]))),
    ((np.array([1 / 3, 2 / 3, 1.0, 0.0, 1 / 3, 2 / 3, 1.0, 1.0]), np.ones(8)),
     (np.array([2 / 3, 2 / 3, 0.0, 0.0, 1.0, 1 / 3, 1.0, 1 / 3]), np.ones(8))),
    ((np.array([1.0, 1.0, 0.0]), np.ones(3)), (np.array([1.0, 1.0, 0.0]), np.ones(3))),  # nothing moves
]


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_permutation_law_equals_enumeration_of_every_swap_pattern(a: tuple, b: tuple) -> None:
    ca, cb = S.credits(*a), S.credits(*b)
    assert ca is not None and cb is not None
    law = S.permutation_law(ca, cb)
    assert law == _item_permutation_law(a, b)
    # the enumerated differences are that law as a multiset of 2**n patterns
    mv = S.permutation_moves(ca, cb)
    deltas = S.enumerated_deltas(mv)
    assert deltas.size == 2 ** a[0].size
    counts: dict[float, int] = {}
    for d in deltas:
        counts[round(float(d), 12)] = counts.get(round(float(d), 12), 0) + 1
    expected: dict[float, int] = {}
    for k, v in law.items():  # values equal up to float rounding are one value of the float deltas
        if k is not None:
            expected[round(float(k), 12)] = expected.get(round(float(k), 12), 0) + int(v * 2 ** a[0].size)
    assert counts == expected


def _prefs(n: int, seed: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    truth = rng.choice([-1.0, 0.0, 1.0], size=n, p=[0.4, 0.2, 0.4])
    prefs = np.stack([np.where(rng.random(n) < 0.7, truth, rng.choice([-1.0, 0.0, 1.0], size=n)) for _ in range(3)])
    prefs[:, rng.random(n) < 0.05] = np.nan
    q = rng.normal(size=n)
    return prefs, {"good": np.stack([np.round(q + truth + rng.normal(size=n), 1), np.round(q, 1)]),
                   "weak": np.stack([np.round(q + 0.3 * truth + rng.normal(size=n), 1), np.round(q, 1)])}


@pytest.mark.parametrize("n", [6, 9, 11])
@pytest.mark.parametrize("name", ["preference_accuracy", "preference_accuracy_no_ties"])
def test_enumerated_p_values_are_bit_identical(n: int, name: str) -> None:
    """With 2**n <= P both paths count every swap pattern: the same p-value, bit for bit."""
    prefs, ms = _prefs(n, seed=n)
    for alternative in ("two-sided", "greater", "less"):
        fast = paired_permutation_test(name, prefs, ms["good"], ms["weak"], n_permutations=4096, seed=1,
                                       alternative=alternative)
        slow = paired_permutation_test(name, prefs, ms["good"], ms["weak"], n_permutations=4096, seed=1,
                                       alternative=alternative, resampling=ITEMS)
        assert (fast.resampling, slow.resampling) == ("sufficient", "items")
        assert fast.exact and slow.exact and fast.n_permutations == slow.n_permutations == 2**n
        assert (fast.p_value, fast.delta, fast.value_a, fast.value_b) == (slow.p_value, slow.delta, slow.value_a,
                                                                          slow.value_b)


def test_multinomial_sampler_draws_its_law() -> None:
    """The conditional-binomial sampler's frequencies of each composition agree with the exact
    multinomial probabilities (per composition: Z binomial standard errors of N draws)."""
    counts = np.array([2, 3, 1, 4])
    n_draws = 200_000
    draws = S.multinomial_counts(counts, n_draws, np.random.default_rng(0))
    assert draws.shape == (n_draws, 4) and np.all(draws.sum(axis=1) == counts.sum())
    n = int(counts.sum())
    comps, freq = np.unique(draws, axis=0, return_counts=True)
    seen = {tuple(map(int, c)): f for c, f in zip(comps, freq, strict=True)}
    for comp in (c for c in itertools.product(range(n + 1), repeat=4) if sum(c) == n):
        p = math.factorial(n) / math.prod(math.factorial(c) for c in comp) * math.prod(
            (k / n) ** c for k, c in zip(counts, comp, strict=True))
        got = seen.get(comp, 0) / n_draws
        assert abs(got - p) <= Z * math.sqrt(p * (1 - p) / n_draws) + 1e-12, (comp, got, p)


def _cdf_gap(draws: np.ndarray, law: dict[Fraction | None, Fraction]) -> float:
    """sup |empirical CDF - exact CDF| over the support (undefined values left out of both; values
    equal up to float rounding, e.g. 1/3 + 1/3 and 2/3, are one point)."""
    merged: dict[float, float] = {}
    for k, v in law.items():
        if k is not None:
            merged[round(float(k), 9)] = merged.get(round(float(k), 9), 0.0) + float(v)
    pts = np.array(sorted(merged))
    exact = np.cumsum([merged[p] for p in pts]) / sum(merged.values())
    d = np.sort(draws[np.isfinite(draws)])
    emp = np.searchsorted(d, pts + 1e-9, side="right") / d.size
    return float(np.max(np.abs(emp - exact)))


def _law_moments(law: dict[Fraction | None, Fraction]) -> tuple[float, float]:
    defined = {k: v for k, v in law.items() if k is not None}
    total = sum(defined.values())
    mean = sum(k * v for k, v in defined.items()) / total
    var = sum((k - mean) ** 2 * v for k, v in defined.items()) / total
    return float(mean), math.sqrt(float(var))


def _rated(n_items: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """3 systems x n items: pairwise accuracy grouped by item takes values in thirds."""
    rng = np.random.default_rng(seed)
    h = rng.integers(1, 5, size=(3, n_items)).astype(float)
    return h, np.round(h + rng.normal(size=h.shape), 1), np.round(h + 2 * rng.normal(size=h.shape), 1)


def _case(case: str) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    """(statistic, human, metric a, metric b): 60 preference pairs with ties and missing labels (credits
    (1, 1), (0, 1), (0, 0)), or 50 items x 3 systems (per-item accuracies in thirds)."""
    if case == "preference_accuracy":
        prefs, ms = _prefs(60, 3)
        return case, prefs, ms["good"], ms["weak"]
    return (case, *_rated(50, 4))


CASES = ("preference_accuracy", "pairwise_accuracy")


@pytest.mark.parametrize("case", CASES)
def test_bootstrap_equals_item_path_in_distribution(case: str) -> None:
    name, h, a, _ = _case(case)
    n_seeds, n_res = 100, 800
    stat = make_statistic(name).bind(h, a)
    assert stat.units is not None
    cr = S.credits(*stat.units(h, a))
    assert cr is not None and 2 < cr.k < 8
    law = S.bootstrap_law(cr)
    mean, sd = _law_moments(law)
    paths = {}
    for how, r in (("sufficient", Resampling(n_resamples=n_res)), ("items", Resampling(n_resamples=n_res,
                                                                                          method="items"))):
        res = [bootstrap_ci(stat, h, a, resampling=r, seed=s) for s in range(n_seeds)]
        assert {x.resampling for x in res} == {how}
        paths[how] = res
        pooled = np.concatenate([x.distribution for x in res])
        n_draws = pooled.size
        assert _cdf_gap(pooled, law) <= math.sqrt(math.log(2 / 1e-6) / (2 * n_draws))
        assert abs(float(np.mean(pooled)) - mean) <= Z * sd / math.sqrt(n_draws)
    # the interval ends (percentile quantiles) of the two paths: equal means over the seeds
    for end in ("low", "high"):
        x = np.array([getattr(r, end) for r in paths["sufficient"]])
        y = np.array([getattr(r, end) for r in paths["items"]])
        se = math.sqrt(x.var(ddof=1) / n_seeds + y.var(ddof=1) / n_seeds)
        assert abs(x.mean() - y.mean()) <= Z * se, (end, x.mean(), y.mean(), se)
    # the same observed value on both paths
    assert paths["sufficient"][0].value == paths["items"][0].value


@pytest.mark.parametrize("case", CASES)
def test_permutation_p_values_equal_item_path_in_distribution(case: str) -> None:
    name, h, a, b = _case(case)
    n_seeds, n_perm = 200, 400
    sa, sb = make_statistic(name).bind(h, a), make_statistic(name).bind(h, b)
    assert sa.units is not None and sb.units is not None
    ca, cb = S.credits(*sa.units(h, a)), S.credits(*sb.units(h, b))
    assert ca is not None and cb is not None
    law = S.permutation_law(ca, cb)
    delta = Fraction(float(sa(h, a))) - Fraction(float(sb(h, b)))
    # exact two-sided tail P(|D| >= |d|) (an undefined difference counts as 0, as the p-value does)
    p_exact = float(sum(v for k, v in law.items() if abs(k if k is not None else 0) >= abs(delta) - Fraction(1, 10**12)))
    assert 0.0 < p_exact < 1.0
    rates = {}
    for r in (Resampling(n_permutations=n_perm), Resampling(n_permutations=n_perm, method="items")):
        ps = np.array([paired_permutation_test(sa, h, a, b, resampling=r, seed=s, stat_b=sb).p_value
                       for s in range(n_seeds)])
        hits = ps * (n_perm + 1) - 1  # p = (1 + hits) / (P + 1)
        rates[r.method] = hits
        assert np.allclose(hits, np.round(hits))
        rate = float(hits.sum()) / (n_perm * n_seeds)
        assert abs(rate - p_exact) <= Z * math.sqrt(p_exact * (1 - p_exact) / (n_perm * n_seeds)), (r.method, rate)
    se = math.sqrt(2 * p_exact * (1 - p_exact) / (n_perm * n_seeds))
    assert abs(rates["auto"].mean() - rates["items"].mean()) / n_perm <= Z * se


def test_paired_bootstrap_uses_joint_counts() -> None:
    """Two statistics on the same resamples: the joint draw's marginals are each statistic's own
    bootstrap law, and the difference's law is that of the joint categories (checked on the mean and
    the variance of the difference, Z standard errors)."""
    prefs, ms = _prefs(80, 5)
    sa = make_statistic("preference_accuracy").bind(prefs, ms["good"])
    sb = make_statistic("preference_accuracy").bind(prefs, ms["weak"])
    ca, cb = S.credits(*sa.units(prefs, ms["good"])), S.credits(*sb.units(prefs, ms["weak"]))
    assert ca is not None and cb is not None
    ka, _, cnt = S.joint_counts(ca, cb)
    assert int(cnt.sum()) == 80 and np.array_equal(np.bincount(ka, weights=cnt, minlength=ca.k), ca.counts)
    n_res = 100_000
    (na, da), (nb, db) = S.paired_bootstrap_sums(ca, cb, n_res, np.random.default_rng(0))
    d = S.ratio(na, da) - S.ratio(nb, db)
    # the item path: the same per-item credits resampled by index, jointly
    num_a, den_a = sa.units(prefs, ms["good"])
    num_b, den_b = sb.units(prefs, ms["weak"])
    idx = np.random.default_rng(1).integers(0, 80, (n_res, 80))
    w = np.zeros((n_res, 80))
    np.add.at(w, (np.arange(n_res)[:, None], idx), 1.0)
    d_items = S.ratio(w @ num_a, w @ den_a) - S.ratio(w @ num_b, w @ den_b)
    se = math.sqrt(d.var() / n_res + d_items.var() / n_res)
    assert abs(d.mean() - d_items.mean()) <= Z * se
    # variance of a sample variance ~ (m4 - s^4) / N: compare the two variances within Z of that
    m4 = float(np.mean((d - d.mean()) ** 4))
    se_var = math.sqrt(2 * (m4 - d.var() ** 2) / n_res)
    assert abs(d.var() - d_items.var()) <= Z * se_var


def test_credits_refuses_what_it_cannot_count() -> None:
    assert S.credits(np.array([0.5, np.nan]), np.ones(2)) is None
    assert S.credits(np.arange(10.0), np.ones(10), max_categories=5) is None
    cr = S.credits(np.array([1.0, 0.0, 1.0, -0.0]), np.array([1.0, 1.0, 1.0, 1.0]))
    assert cr is not None and cr.k == 2 and list(cr.counts) == [2, 2]  # -0.0 and 0.0 are one value
    assert np.array_equal(cr.num[cr.codes], np.array([1.0, 0.0, 1.0, 0.0]))


def test_memory_is_items_plus_resamples_times_categories() -> None:
    """The sufficient path's memory: O(n) for the credits, O(R x K) for the resamples, never n x R
    (here n x R would be 1.6 GB at 8 bytes; the peak difference between 200 and 20,000 resamples
    must stay within a few R x K arrays)."""
    n = 200_000
    rng = np.random.default_rng(0)
    h = rng.choice([-1.0, 0.0, 1.0], size=(1, n))
    h[0, ::50] = np.nan  # pairs without a label: credits (0, 0)
    m = np.stack([np.round(rng.normal(size=n), 1), np.round(rng.normal(size=n), 1)])
    stat = make_statistic("preference_accuracy").bind(h, m)
    peaks = {}
    for n_res in (200, 20_000):
        tracemalloc.start()
        r = bootstrap_ci(stat, h, m, n_resamples=n_res)
        peaks[n_res] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert r.resampling == "sufficient" and r.credits is not None and r.credits.k == 3
    assert peaks[200] < 100 * n  # a few float64 vectors of the items
    assert peaks[20_000] - peaks[200] < 8 * 8 * 20_000 * 3  # R x K, not n x R
