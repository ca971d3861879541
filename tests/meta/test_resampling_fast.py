"""The item-index path of decomposable statistics equals the reference (pre-0.2) code exactly.

(``Resampling(method="items")``: the default resamples these statistics by sufficient statistics,
equal in distribution only; see ``test_sufficient.py``.)

The oracle below is the reference path as it was before the fast path (commit 3eab37a): per-pair
values from one :func:`pairwise_preference_accuracy` call per pair, bootstrap weights as a float64
count matrix of ``default_rng(seed).integers(0, n, (B, n))``, permutation swaps as float64
keep/swap matrices of ``default_rng(seed).random((P, n)) < 0.5`` (or every pattern when
``2**n <= P``). Results must be bit-identical (``array_equal``, ``==``), not approximately equal.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import evalign.meta.draws as draws
from evalign.meta.draws import bootstrap_counts, counts_of, enumerates, permutation_swaps
from evalign.meta.pairwise import pairwise_preference_accuracy, preference_units
from evalign.meta.resampling import Resampling
from evalign.meta.significance import bootstrap_ci, paired_permutation_test
from evalign.meta.trust import trust_table_pairs

ITEMS = Resampling(method="items")


def _old_units(prefs: np.ndarray, m: np.ndarray, eps: float, ties: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per-pair (num, den) as the reference code computed them: one call per pair."""
    attr = "accuracy_with_ties" if ties else "accuracy_without_ties"
    n = m.shape[1]
    num, den = np.zeros(n), np.zeros(n)
    for c in range(n):
        r = pairwise_preference_accuracy(prefs[:, c : c + 1].T, m[0, c : c + 1], m[1, c : c + 1], epsilon=eps)
        v = float(getattr(r, attr))
        if math.isfinite(v):
            num[c], den[c] = v, 1.0
    return num, den


def _old_bootstrap(num: np.ndarray, den: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    n = num.size
    idx = np.random.default_rng(seed).integers(0, n, (n_resamples, n))
    w = np.zeros((n_resamples, n))
    for b in range(n_resamples):
        np.add.at(w[b], idx[b], 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (w @ num) / (w @ den)


def _old_permutation_p(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], n_perm: int,
                       seed: int) -> tuple[float, float]:
    (na, da), (nb, db) = a, b
    n = na.size
    rng = np.random.default_rng(seed)
    if n <= 20 and 2**n <= n_perm:
        masks = ((np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)
        exact = True
    else:
        masks, exact = rng.random((n_perm, n)) < 0.5, False
    keep, swap = (~masks).astype(float), masks.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        deltas = (keep @ na + swap @ nb) / (keep @ da + swap @ db) - (keep @ nb + swap @ na) / (keep @ db + swap @ da)
        delta = na.sum() / da.sum() - nb.sum() / db.sum()
    d = np.where(np.isfinite(deltas), np.abs(deltas), 0.0)
    hits = int(np.sum(d >= abs(delta) - 1e-12 * max(1.0, abs(delta))))
    return delta, (hits / len(deltas) if exact else (1 + hits) / (len(deltas) + 1))


def _pairs(n: int, seed: int, k: int = 3) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    truth = rng.choice([-1.0, 0.0, 1.0], size=n, p=[0.4, 0.2, 0.4])
    prefs = np.stack([np.where(rng.random(n) < 0.7, truth, rng.choice([-1.0, 0.0, 1.0], size=n)) for _ in range(k)])
    prefs[0, rng.random(n) < 0.05] = np.nan  # some annotators gave no label
    prefs[:, rng.random(n) < 0.02] = np.nan  # some pairs have no label at all
    q = rng.normal(size=n)
    ms = {
        "good": np.stack([np.round(q + truth + rng.normal(size=n), 1), np.round(q, 1)]),
        "weak": np.stack([np.round(q + 0.3 * truth + rng.normal(size=n), 1), np.round(q, 1)]),
    }
    ms["weak"][0, rng.random(n) < 0.03] = np.nan  # missing scores
    return prefs, ms


@pytest.mark.parametrize("ties", [True, False])
@pytest.mark.parametrize("eps", [0.0, 0.3])
def test_preference_units_equal_one_call_per_pair(ties: bool, eps: float) -> None:
    prefs, ms = _pairs(300, seed=2)
    for m in ms.values():
        num, den = preference_units(prefs, m, eps, ties)
        onum, oden = _old_units(prefs, m, eps, ties)
        assert np.array_equal(num, onum) and np.array_equal(den, oden)
        assert 0 < den.sum() < 300  # missing labels / human ties really are left out


def test_preference_units_one_annotator_vector() -> None:
    prefs, ms = _pairs(50, seed=4, k=1)
    num, den = preference_units(prefs[0], ms["good"], 0.2)
    assert np.array_equal(num, _old_units(prefs, ms["good"], 0.2, True)[0])
    assert np.array_equal(den, _old_units(prefs, ms["good"], 0.2, True)[1])


@pytest.mark.parametrize("n", [1, 2, 3, 7, 1000, 4099])
@pytest.mark.parametrize("seed", [0, 11])
def test_bootstrap_counts_are_the_reference_draws(n: int, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(draws, "BLOCK_ELEMS", 3 * n + 1)  # several blocks of rows: the same stream
    idx = np.random.default_rng(seed).integers(0, n, (37, n))
    ref = np.zeros((37, n))
    for b in range(37):
        np.add.at(ref[b], idx[b], 1.0)
    got = bootstrap_counts(n, 37, seed)
    assert got.dtype == np.float32 and np.array_equal(got, ref)
    assert np.array_equal(got, counts_of(idx, n))
    blocks = list(draws.bootstrap_count_blocks(n, 37, seed))
    rows = (3 * n + 1) // n
    assert len(blocks) == -(-37 // rows) and max(b.size for b in blocks) <= 3 * n + 1  # never the whole matrix


@pytest.mark.parametrize(("n", "p"), [(5, 32), (5, 31), (6, 100), (1000, 50)])
def test_permutation_swaps_are_the_reference_masks(n: int, p: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(draws, "BLOCK_ELEMS", 2 * n + 1)
    if 2**n <= p:
        ref = ((np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)
    else:
        ref = np.random.default_rng(5).random((p, n)) < 0.5
    got, got_exact = permutation_swaps(n, p, 5)
    assert got_exact == enumerates(n, p) == (2**n <= p)
    assert np.array_equal(got, ref.astype(np.float32))


@pytest.mark.parametrize("name", ["preference_accuracy", "preference_accuracy_no_ties"])
@pytest.mark.parametrize("n", [12, 400])
def test_fast_bootstrap_identical_to_reference(name: str, n: int) -> None:
    prefs, ms = _pairs(n, seed=n)
    ties = name == "preference_accuracy"
    for m in ms.values():
        r = bootstrap_ci(name, prefs, m, n_resamples=500, seed=3, confidence=0.9, resampling=ITEMS)
        assert r.resampling == "items"
        eps = r.params["epsilon"]
        num, den = _old_units(prefs, m, eps, ties)
        dist = _old_bootstrap(num, den, 500, 3)
        assert np.array_equal(r.distribution, dist, equal_nan=True)
        ok = np.isfinite(dist)
        lo, hi = np.quantile(dist[ok], [0.05, 0.95])
        assert (r.low, r.high, r.n_valid) == (lo, hi, int(ok.sum()))
        assert r.value == num.sum() / den.sum()


@pytest.mark.parametrize("n", [9, 12, 300])
def test_fast_permutation_identical_to_reference(n: int) -> None:
    prefs, ms = _pairs(n, seed=100 + n)
    a, b = ms["good"], ms["weak"]
    for name, ties in (("preference_accuracy", True), ("preference_accuracy_no_ties", False)):
        for seed in (0, 1):
            r = paired_permutation_test(name, prefs, a, b, n_permutations=600, seed=seed, resampling=ITEMS)
            assert r.resampling == "items"
            ea = pairwise_preference_accuracy(prefs.T, a[0], a[1]).epsilon if ties else 0.0
            eb = pairwise_preference_accuracy(prefs.T, b[0], b[1]).epsilon if ties else 0.0
            # the same statistic object serves both metrics: each is bound to its own epsilon
            delta, p = _old_permutation_p(_old_units(prefs, a, ea, ties), _old_units(prefs, b, eb, ties), 600, seed)
            assert r.delta == delta and r.p_value == p
            assert r.exact == (2**n <= 600)


def test_trust_table_identical_to_reference_statistics() -> None:
    """Every value, interval and p-value of a pair trust table equals the reference computation."""
    prefs, ms = _pairs(250, seed=9, k=2)
    pairs = pd.DataFrame({"id": [str(i) for i in range(250)], "p1": prefs[0], "p2": prefs[1],
                          **{f"{k}_{s}": v[i] for k, v in ms.items() for i, s in enumerate("ab")}})
    rep = trust_table_pairs(pairs, ["p1", "p2"], list(ms), n_resamples=300, n_permutations=300, seed=4,
                            resampling=ITEMS)
    t = rep.for_group().set_index("metric")
    units = {k: _old_units(prefs, v, float(t.loc[k, "epsilon"]), True) for k, v in ms.items()}
    for k, (num, den) in units.items():
        dist = _old_bootstrap(num, den, 300, 4)
        lo, hi = np.quantile(dist[np.isfinite(dist)], [0.025, 0.975])
        assert (t.loc[k, "value"], t.loc[k, "ci_low"], t.loc[k, "ci_high"]) == (num.sum() / den.sum(), lo, hi)
    best, other = t.index[0], t.index[1]
    assert t.loc[other, "p_vs_best"] == _old_permutation_p(units[best], units[other], 300, 4)[1]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_preference_calibration_curve_equals_the_accuracy_at_every_candidate(seed: int) -> None:
    """The tie-calibration curve of preference data (sorted values and counts, no argsort) lists every
    candidate epsilon (0 and each distinct |a - b|) with the accuracy and tie rate found by scoring
    the pairs at that epsilon."""
    from evalign.meta.agreement import majority_vote
    from evalign.meta.pairwise import calibrate_preference_epsilon

    prefs, ms = _pairs(200, seed=seed)
    labels = prefs.T
    for m in ms.values():
        cal = calibrate_preference_epsilon(labels, m[0], m[1])
        ok = ~(np.isnan(m[0]) | np.isnan(m[1]) | np.isnan(majority_vote(labels)))
        cands = np.unique(np.r_[0.0, np.abs(m[0] - m[1])[ok]])
        assert np.array_equal(cal.epsilons, cands)
        for e, acc, tie in zip(cal.epsilons, cal.accuracies, cal.tie_rates, strict=True):
            r = pairwise_preference_accuracy(labels, m[0], m[1], epsilon=float(e))
            assert (acc, tie) == (r.accuracy_with_ties, r.metric_tie_rate)
        best = int(np.argmax(cal.accuracies))
        assert cal.epsilon == cal.epsilons[best] == pairwise_preference_accuracy(labels, m[0], m[1]).epsilon
