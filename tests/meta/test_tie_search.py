"""The pair-free tie-calibration search (meta/tie_search.py) equals the pair sweep it replaces.

Every test runs the same input twice: once through the pair sweep (the code path used below
``SEARCH_MIN_PAIRS``) and once forced through the search, with its bisection thresholds lowered so
that branch and bound, splitting and enumeration all run on small inputs.
"""

from __future__ import annotations

import numpy as np
import pytest

from evalign.meta import pairwise, tie_search
from evalign.meta.pairwise import calibrate_epsilon, calibrate_epsilon_over, pairwise_accuracy


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Run a callable once with the pair sweep and once with the search (small leaves)."""

    def run(fn, *args, **kw):  # type: ignore[no-untyped-def]
        monkeypatch.setattr(pairwise, "SEARCH_MIN_PAIRS", 10**18)
        old = fn(*args, **kw)
        monkeypatch.setattr(pairwise, "SEARCH_MIN_PAIRS", 0)
        monkeypatch.setattr(tie_search, "LEAF_PAIRS", 40)
        monkeypatch.setattr(tie_search, "ENUM_PAIRS", 60)
        new = fn(*args, **kw)
        return old, new

    return run


def _data(rng: np.random.Generator, shape: tuple[int, ...], kind: int) -> tuple[np.ndarray, np.ndarray]:
    if kind == 0:  # few human levels, metric on a coarse grid: many ties in both
        h = rng.integers(1, 4, size=shape).astype(float)
        m = np.round(0.3 * h + rng.normal(size=shape), 1)
    elif kind == 1:  # continuous human, rounded metric
        h = rng.normal(size=shape)
        m = np.round(h + rng.normal(size=shape), 2)
    elif kind == 2:  # sums of decimals: differences that are equal in real numbers but not in floats
        h = rng.integers(0, 6, size=shape).astype(float)
        m = rng.integers(0, 30, size=shape) * 0.1 + rng.integers(0, 3, size=shape) * 0.01
    else:  # continuous both, some missing values
        h = np.round(rng.normal(size=shape), 1)
        m = 0.5 * h + rng.normal(size=shape)
        m[rng.random(shape) < 0.1] = np.nan
    return h, m


def _same(old, new) -> None:  # type: ignore[no-untyped-def]
    assert new.epsilon == old.epsilon
    assert new.accuracy == old.accuracy
    assert new.n_pairs == old.n_pairs and new.n_groups == old.n_groups
    assert new.n_human_ties == old.n_human_ties
    i_old = int(np.searchsorted(old.epsilons, old.epsilon))
    i_new = int(np.searchsorted(new.epsilons, new.epsilon))
    assert new.tie_rates[i_new] == old.tie_rates[i_old]
    # every point the search lists is exact: it equals the sweep's value at that epsilon
    j = np.searchsorted(old.epsilons, new.epsilons, side="right") - 1
    np.testing.assert_array_equal(new.accuracies, old.accuracies[j])
    np.testing.assert_array_equal(new.tie_rates, old.tie_rates[j])


@pytest.mark.parametrize("kind", [0, 1, 2, 3])
@pytest.mark.parametrize("seed", range(6))
def test_one_group_equals_the_sweep(forced, kind: int, seed: int) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(100 * kind + seed)
    h, m = _data(rng, (int(rng.integers(30, 160)),), kind)
    old, new = forced(calibrate_epsilon, h, m)
    _same(old, new)
    assert not new.exhaustive


@pytest.mark.parametrize("grouping", ["item", "system", "none"])
@pytest.mark.parametrize("kind", [0, 2, 3])
def test_groups_equal_the_sweep(forced, grouping: str, kind: int) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(7 + kind)
    h, m = _data(rng, (6, 40), kind)
    old, new = forced(calibrate_epsilon, h, m, grouping=grouping)
    _same(old, new)
    old_pa, new_pa = forced(pairwise_accuracy, h, m, grouping=grouping)
    assert (new_pa.epsilon, new_pa.accuracy) == (old_pa.epsilon, old_pa.accuracy)
    assert new_pa.metric_tie_rate == old_pa.metric_tie_rate
    assert new_pa.human_tie_rate == old_pa.human_tie_rate
    np.testing.assert_array_equal(new_pa.group_accuracies, old_pa.group_accuracies)


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.30000000000000004, 1.5, 100.0])
def test_accuracy_at_a_given_epsilon(forced, epsilon: float) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(3)
    h, m = _data(rng, (5, 50), 2)
    old, new = forced(pairwise_accuracy, h, m, grouping="system", epsilon=epsilon)
    assert new.accuracy == old.accuracy
    assert (new.metric_tie_rate, new.human_tie_rate) == (old.metric_tie_rate, old.human_tie_rate)
    np.testing.assert_array_equal(new.group_accuracies, old.group_accuracies)


def test_tasks_of_different_sizes(forced) -> None:  # type: ignore[no-untyped-def]
    """Groups of different sizes weigh their pairs differently (integer weights: exact sums)."""
    rng = np.random.default_rng(11)
    tasks = [_data(rng, (n,), k) for n, k in [(37, 0), (90, 2), (15, 1), (64, 0)]]
    old, new = forced(calibrate_epsilon_over, tasks)
    _same(old, new)


def test_against_the_bucketed_sweep_at_medium_size(forced) -> None:  # type: ignore[no-untyped-def]
    """Above 100,000 pairs today's code buckets the differences: the search gives the same answer."""
    rng = np.random.default_rng(5)
    for kind in (0, 2):
        h, m = _data(rng, (700,), kind)
        old, new = forced(calibrate_epsilon, h, m)
        assert not old.exhaustive
        assert (new.epsilon, new.accuracy, new.n_human_ties) == (old.epsilon, old.accuracy, old.n_human_ties)


def test_all_metric_scores_equal(forced) -> None:  # type: ignore[no-untyped-def]
    h = np.array([1.0, 2.0, 2.0, 3.0, 1.0])
    old, new = forced(calibrate_epsilon, h, np.full(5, 0.5))
    _same(old, new)
    assert new.epsilon == 0.0 and new.accuracy == 0.2  # only the two human ties are right


def test_many_small_intervals_are_split_until_the_enumeration_is_small(forced, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(tie_search, "LEAF_PAIRS", 10**9)  # no interval is "large": all small ones are split
    rng = np.random.default_rng(21)
    h, m = _data(rng, (120,), 1)
    monkeypatch.setattr(pairwise, "SEARCH_MIN_PAIRS", 10**18)
    old = calibrate_epsilon(h, m)
    monkeypatch.setattr(pairwise, "SEARCH_MIN_PAIRS", 0)
    monkeypatch.setattr(tie_search, "ENUM_PAIRS", 30)
    new = calibrate_epsilon(h, m)
    _same(old, new)


def test_groups_with_non_integer_weights(forced) -> None:  # type: ignore[no-untyped-def]
    """Many groups of different sizes: the weights are 1 / pairs (floats) and sums are compared with a
    tolerance; the search picks the same epsilon, its accuracy equal up to float rounding."""
    rng = np.random.default_rng(13)
    tasks = [_data(rng, (n,), 0) for n in range(20, 60, 3)]
    old, new = forced(calibrate_epsilon_over, tasks)
    assert new.epsilon == old.epsilon
    assert new.accuracy == pytest.approx(old.accuracy, rel=1e-12)
    assert new.n_human_ties == old.n_human_ties
