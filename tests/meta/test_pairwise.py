"""Pairwise accuracy and tie calibration against brute-force oracles written from the definition
(Deutsch, Foster & Freitag 2023, "Ties Matter"), on many small random cases with ties and gaps."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from evalign.errors import InputError
from evalign.meta import pairwise as pw
from evalign.meta.pairwise import (
    calibrate_epsilon,
    calibrate_epsilon_over,
    calibrate_preference_epsilon,
    pairwise_accuracy,
    pairwise_preference_accuracy,
)

# ------------------------------------------------------------------------------------------------
# Brute-force oracles: plain Python loops over pairs, exact fractions
# ------------------------------------------------------------------------------------------------


def oracle_groups(human: np.ndarray, metric: np.ndarray, grouping: str) -> list[list[tuple[float, float]]]:
    """The groups of (human, metric) points with both present, straight from the definition."""
    if human.ndim == 1:
        cells = [[(h, m) for h, m in zip(human.tolist(), metric.tolist(), strict=True)]]
    elif grouping == "none":
        cells = [[(h, m) for h, m in zip(human.ravel().tolist(), metric.ravel().tolist(), strict=True)]]
    elif grouping == "item":
        cells = [list(zip(human[:, j].tolist(), metric[:, j].tolist(), strict=True)) for j in range(human.shape[1])]
    else:
        cells = [list(zip(human[i].tolist(), metric[i].tolist(), strict=True)) for i in range(human.shape[0])]
    return [[(h, m) for h, m in g if h == h and m == m] for g in cells]


def pair_arrays(group: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair i < j of a group: human tie?, metric |difference|, same order?"""
    pairs = list(itertools.combinations(group, 2))
    htie = np.array([h1 == h2 for (h1, _), (h2, _) in pairs], dtype=bool)
    dist = np.array([abs(m1 - m2) for (_, m1), (_, m2) in pairs], dtype=np.float64)
    same = np.array([np.sign(h1 - h2) == np.sign(m1 - m2) for (h1, m1), (h2, m2) in pairs], dtype=bool)
    return htie, dist, same


def oracle_accuracies(groups: list[list[tuple[float, float]]], epsilons: list[float]) -> list[Fraction] | None:
    """Exact mean accuracy over groups with a pair, for every epsilon (brute force over all pairs)."""
    eps = np.asarray(epsilons, dtype=np.float64)[:, None]
    per_group = []
    for g in groups:
        if len(g) < 2:
            continue
        htie, dist, same = pair_arrays(g)
        mtie = dist[None, :] <= eps
        correct = (htie & mtie) | (~htie & ~mtie & same)
        per_group.append([Fraction(int(c), htie.size) for c in correct.sum(axis=1)])
    if not per_group:
        return None
    return [sum(col, Fraction(0)) / len(per_group) for col in zip(*per_group, strict=True)]


def oracle_accuracy(groups: list[list[tuple[float, float]]], eps: float) -> Fraction | None:
    accs = oracle_accuracies(groups, [eps])
    return None if accs is None else accs[0]


def oracle_candidates(groups: list[list[tuple[float, float]]]) -> list[float]:
    cands = {0.0}
    for g in groups:
        for (_, m1), (_, m2) in itertools.combinations(g, 2):
            cands.add(abs(m1 - m2))
    return sorted(cands)


def oracle_calibrate(groups: list[list[tuple[float, float]]]) -> tuple[float, Fraction]:
    cands = oracle_candidates(groups)
    accs = oracle_accuracies(groups, cands)
    assert accs is not None
    best = max(accs)
    i = accs.index(best)  # candidates increase: the first maximum is the smallest epsilon
    return cands[i], best


def random_case(rng: np.random.Generator, *, max_sys: int = 6, max_items: int = 9) -> tuple[np.ndarray, np.ndarray]:
    """Small systems x items arrays with many human ties, repeated metric differences and gaps."""
    s = int(rng.integers(1, max_sys + 1))
    n = int(rng.integers(1, max_items + 1))
    human = rng.integers(1, int(rng.integers(2, 5)) + 1, size=(s, n)).astype(np.float64)
    kind = rng.integers(3)
    if kind == 0:  # few distinct metric values: many exact metric ties and equal differences
        metric = rng.integers(0, 5, size=(s, n)) * 0.25
    elif kind == 1:  # continuous
        metric = human + rng.normal(scale=1.0, size=(s, n))
    else:  # continuous but rounded: some repeats
        metric = np.round(human * 0.3 + rng.normal(scale=0.5, size=(s, n)), 1)
    for arr in (human, metric):
        arr[rng.random(arr.shape) < rng.choice([0.0, 0.15, 0.4])] = np.nan
    if rng.random() < 0.15:  # a constant system / item
        metric[0, :] = 1.0
    return human, metric


GROUPINGS = ("none", "item", "system")


@pytest.fixture(params=["exact", "bucketed"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run each test through the one-sort path and through the bucketed streaming path (tiny blocks)."""
    if request.param == "bucketed":
        monkeypatch.setattr(pw, "_EXACT_MAX_PAIRS", 0)
        monkeypatch.setattr(pw, "_BLOCK_ELEMS", 7)
    return str(request.param)


# ------------------------------------------------------------------------------------------------
# Oracle comparisons
# ------------------------------------------------------------------------------------------------


def test_calibration_matches_oracle(path: str) -> None:
    rng = np.random.default_rng(1234)
    checked = 0
    for _ in range(120):
        human, metric = random_case(rng)
        for grouping in GROUPINGS:
            groups = oracle_groups(human, metric, grouping)
            if oracle_accuracy(groups, 0.0) is None:
                res = pairwise_accuracy(human, metric, grouping=grouping)
                assert np.isnan(res.accuracy) and res.n_pairs == 0 and res.n_groups == 0
                continue
            eps, acc = oracle_calibrate(groups)
            res = pairwise_accuracy(human, metric, grouping=grouping)
            assert res.epsilon == eps, (grouping, human, metric)
            assert res.accuracy == pytest.approx(float(acc), abs=1e-12)
            assert res.calibrated
            cal = calibrate_epsilon(human, metric, grouping=grouping)
            assert cal.epsilon == eps
            assert cal.accuracy == pytest.approx(float(acc), abs=1e-12)
            checked += 1
    assert checked > 200


def test_curve_points_are_exact(path: str) -> None:
    rng = np.random.default_rng(99)
    for _ in range(40):
        human, metric = random_case(rng)
        for grouping in GROUPINGS:
            groups = oracle_groups(human, metric, grouping)
            if oracle_accuracy(groups, 0.0) is None:
                continue
            cal = calibrate_epsilon(human, metric, grouping=grouping)
            cands = oracle_candidates(groups)
            assert cal.epsilons[0] == 0.0
            assert np.all(np.diff(cal.epsilons) > 0)
            assert set(cal.epsilons.tolist()) <= set(cands)
            if path == "exact":
                assert cal.exhaustive
                assert cal.epsilons.tolist() == cands
            n_pairs = sum(len(g) * (len(g) - 1) // 2 for g in groups)
            assert cal.n_pairs == n_pairs
            want = oracle_accuracies(groups, cal.epsilons.tolist())
            assert want is not None
            np.testing.assert_allclose(cal.accuracies, [float(w) for w in want], rtol=0, atol=1e-12)
            dists = np.concatenate([pair_arrays(g)[1] for g in groups if len(g) >= 2])
            ties = (dists[None, :] <= cal.epsilons[:, None]).sum(axis=1)
            np.testing.assert_allclose(cal.tie_rates, ties / n_pairs, rtol=0, atol=1e-15)
            assert cal.accuracy == pytest.approx(float(np.max(cal.accuracies)), abs=1e-12)


def test_fixed_epsilon_matches_oracle() -> None:
    rng = np.random.default_rng(7)
    for _ in range(80):
        human, metric = random_case(rng)
        grouping = GROUPINGS[int(rng.integers(3))]
        groups = oracle_groups(human, metric, grouping)
        want = oracle_accuracy(groups, 0.0)
        if want is None:
            continue
        for eps in (0.0, 0.1, 0.25, 0.5, 1.0, 100.0):
            res = pairwise_accuracy(human, metric, grouping=grouping, epsilon=eps)
            assert res.accuracy == pytest.approx(float(oracle_accuracy(groups, eps)), abs=1e-12)
            assert res.epsilon == eps and not res.calibrated
            pairs = [p for g in groups for p in itertools.combinations(g, 2)]
            assert res.n_pairs == len(pairs)
            assert res.human_tie_rate == pytest.approx(sum(a[0] == b[0] for a, b in pairs) / len(pairs))
            assert res.metric_tie_rate == pytest.approx(sum(abs(a[1] - b[1]) <= eps for a, b in pairs) / len(pairs))
            active = [g for g in groups if len(g) >= 2]
            assert res.n_groups == len(active)
            assert res.n_skipped_groups == len(groups) - len(active)


def test_group_accuracies_per_item() -> None:
    rng = np.random.default_rng(3)
    human, metric = random_case(rng, max_sys=7, max_items=12)
    human[:, 0] = np.nan  # an item without pairs
    res = pairwise_accuracy(human, metric, grouping="item", epsilon=0.2)
    groups = oracle_groups(human, metric, "item")
    assert res.group_accuracies.shape == (human.shape[1],)
    for j, g in enumerate(groups):
        want = oracle_accuracy([g], 0.2)
        if want is None:
            assert np.isnan(res.group_accuracies[j])
        else:
            assert res.group_accuracies[j] == pytest.approx(float(want))
    assert res.accuracy == pytest.approx(np.nanmean(res.group_accuracies))


def test_float_weight_path_matches_oracle(path: str) -> None:
    """Groups with many different pair counts (lcm too large for exact integer weights)."""
    rng = np.random.default_rng(5)
    sizes = list(range(2, 40))
    assert not pw._weights(np.array([k * (k - 1) // 2 for k in sizes]))[2]
    human = np.full((len(sizes), max(sizes)), np.nan)
    metric = np.full_like(human, np.nan)
    for i, k in enumerate(sizes):
        human[i, :k] = rng.integers(1, 4, size=k)
        metric[i, :k] = np.round(human[i, :k] * 0.5 + rng.normal(size=k), 1)
    groups = oracle_groups(human, metric, "system")
    eps, acc = oracle_calibrate(groups)
    res = pairwise_accuracy(human, metric, grouping="system")
    assert res.epsilon == eps
    assert res.accuracy == pytest.approx(float(acc), abs=1e-12)


def test_calibrate_over_tasks_matches_oracle(path: str) -> None:
    rng = np.random.default_rng(11)
    for _ in range(30):
        tasks = [random_case(rng) for _ in range(int(rng.integers(1, 4)))]
        for grouping in GROUPINGS:
            groups = [g for h, m in tasks for g in oracle_groups(h, m, grouping)]
            if oracle_accuracy(groups, 0.0) is None:
                continue
            eps, acc = oracle_calibrate(groups)
            cal = calibrate_epsilon_over(tasks, grouping=grouping)
            assert cal.epsilon == eps
            assert cal.accuracy == pytest.approx(float(acc), abs=1e-12)


def test_one_dimensional_input_is_one_group() -> None:
    human = np.array([1.0, 2.0, 2.0, 3.0, np.nan])
    metric = np.array([0.1, 0.5, 0.52, 0.9, 0.3])
    res = pairwise_accuracy(human, metric)
    # pairs: (1,2),(1,2),(1,3),(2,2)=tie with |.02|,(2,3),(2,3): calibrated epsilon 0.02 ties only the human tie
    assert res.n_pairs == 6
    assert res.accuracy == 1.0
    assert res.epsilon == pytest.approx(0.52 - 0.5)
    assert res.epsilon == abs(0.5 - 0.52)
    res0 = pairwise_accuracy(human, metric, epsilon=0.0)
    assert res0.accuracy == pytest.approx(5 / 6)


def test_large_single_group_bucketed_equals_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """Streaming path on a group of 1,500 items (1.1M pairs) gives the same answer as one sort."""
    rng = np.random.default_rng(0)
    human = rng.integers(1, 6, size=1500).astype(np.float64)
    metric = np.round(human + rng.normal(scale=1.5, size=human.size), 3)
    monkeypatch.setattr(pw, "_EXACT_MAX_PAIRS", 10**9)
    exact = calibrate_epsilon(human, metric)
    monkeypatch.setattr(pw, "_EXACT_MAX_PAIRS", 0)
    monkeypatch.setattr(pw, "_BLOCK_ELEMS", 100_000)
    fast = calibrate_epsilon(human, metric)
    assert not fast.exhaustive and exact.exhaustive
    assert fast.epsilon == exact.epsilon
    assert fast.accuracy == exact.accuracy
    # every point of the bucketed curve lies on the exhaustive curve
    idx = np.searchsorted(exact.epsilons, fast.epsilons)
    assert np.array_equal(exact.epsilons[idx], fast.epsilons)
    assert np.array_equal(exact.accuracies[idx], fast.accuracies)
    assert np.array_equal(exact.tie_rates[idx], fast.tie_rates)


def test_bad_input() -> None:
    with pytest.raises(InputError, match="shape"):
        pairwise_accuracy(np.zeros((2, 3)), np.zeros((3, 2)))
    with pytest.raises(InputError, match="grouping"):
        pairwise_accuracy(np.zeros((2, 3)), np.zeros((2, 3)), grouping="row")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="2-D"):
        pairwise_accuracy(np.zeros(3), np.zeros(3), grouping="item")
    with pytest.raises(InputError, match="epsilon"):
        pairwise_accuracy(np.zeros(3), np.zeros(3), epsilon=-1.0)
    with pytest.raises(InputError, match="infinite"):
        pairwise_accuracy(np.array([1.0, np.inf]), np.zeros(2))


# ------------------------------------------------------------------------------------------------
# Preference accuracy
# ------------------------------------------------------------------------------------------------


def oracle_majority(row: list[float]) -> float:
    votes = [v for v in row if v == v]
    if not votes:
        return float("nan")
    counts = {v: votes.count(v) for v in set(votes)}
    top = max(counts.values())
    winners = [v for v, c in counts.items() if c == top]
    return winners[0] if len(winners) == 1 else 0.0


def oracle_preference(prefs: list[float], a: list[float], b: list[float], eps: float) -> tuple[Fraction, Fraction | None]:
    both = [(p, x, y) for p, x, y in zip(prefs, a, b, strict=True) if p == p and x == x and y == y]
    correct_all = correct_pref = n_pref = 0
    for p, x, y in both:
        call = 0 if abs(x - y) <= eps else (1 if x > y else -1)
        correct_all += call == p
        if p != 0:
            n_pref += 1
            correct_pref += call == p
    return Fraction(correct_all, len(both)), (Fraction(correct_pref, n_pref) if n_pref else None)


def test_preference_accuracy_matches_oracle() -> None:
    rng = np.random.default_rng(21)
    for _ in range(150):
        n = int(rng.integers(1, 25))
        k = int(rng.choice([1, 2, 3, 4]))
        prefs = rng.choice([-1.0, 0.0, 1.0, np.nan], p=[0.35, 0.25, 0.35, 0.05], size=(n, k))
        a = np.round(rng.normal(size=n), int(rng.integers(0, 3)))
        b = np.round(rng.normal(size=n), int(rng.integers(0, 3)))
        a[rng.random(n) < 0.05] = np.nan
        labels = [oracle_majority(r) for r in prefs.tolist()]
        usable = [p == p and x == x and y == y for p, x, y in zip(labels, a.tolist(), b.tolist(), strict=True)]
        if not any(usable):
            continue
        cands = sorted({0.0} | {abs(x - y) for u, x, y in zip(usable, a.tolist(), b.tolist(), strict=True) if u})
        best = max(cands, key=lambda e: (oracle_preference(labels, a.tolist(), b.tolist(), e)[0], -e))
        res = pairwise_preference_accuracy(prefs if k > 1 else prefs[:, 0], a, b)
        assert res.epsilon == best
        cal = calibrate_preference_epsilon(prefs if k > 1 else prefs[:, 0], a, b)
        assert cal.epsilon == best and cal.epsilons.tolist() == cands
        want_curve = [float(oracle_preference(labels, a.tolist(), b.tolist(), e)[0]) for e in cands]
        np.testing.assert_allclose(cal.accuracies, want_curve, rtol=0, atol=1e-12)
        acc_all, acc_pref = oracle_preference(labels, a.tolist(), b.tolist(), best)
        assert res.accuracy_with_ties == pytest.approx(float(acc_all), abs=1e-12)
        if acc_pref is None:
            assert np.isnan(res.accuracy_without_ties)
        else:
            assert res.accuracy_without_ties == pytest.approx(float(acc_pref), abs=1e-12)
        assert res.n == sum(usable)
        assert res.n_missing == n - sum(usable)
        assert res.n_human_ties == sum(u and p == 0 for u, p in zip(usable, labels, strict=True))
        fixed = pairwise_preference_accuracy(prefs if k > 1 else prefs[:, 0], a, b, epsilon=0.3)
        assert fixed.accuracy_with_ties == pytest.approx(float(oracle_preference(labels, a.tolist(), b.tolist(), 0.3)[0]))


def test_preference_hand_case() -> None:
    prefs = np.array([[1, 1, -1], [0, 0, 1], [-1, 1, 0], [-1, -1, -1], [np.nan, np.nan, np.nan]])
    a = np.array([0.9, 0.5, 0.4, 0.1, 0.3])
    b = np.array([0.2, 0.45, 0.6, 0.1, 0.3])
    # majority: A, tie, tie (no majority), B, no label.  diffs: 0.7, 0.05, -0.2, 0.0
    res = pairwise_preference_accuracy(prefs, a, b, epsilon=0.1)
    assert res.n == 4 and res.n_missing == 1 and res.n_human_ties == 2
    # calls: A, tie, B, tie -> correct: A ok, tie ok, tie-vs-B wrong, B-vs-tie wrong
    assert res.accuracy_with_ties == 0.5
    assert res.accuracy_without_ties == 0.5  # A right; the metric tie on the B pair is wrong
    assert res.n_metric_ties_on_preferences == 1
    assert res.metric_tie_rate == 0.5
    assert res.correct[:4].tolist() == [1.0, 1.0, 0.0, 0.0] and np.isnan(res.correct[4])
    cal = pairwise_preference_accuracy(prefs, a, b)
    # epsilon 0.2 also ties item 3 (human tie): 3/4
    assert cal.epsilon == pytest.approx(0.2) and cal.accuracy_with_ties == 0.75 and cal.calibrated


def test_preference_bad_labels() -> None:
    with pytest.raises(InputError, match="human_prefs"):
        pairwise_preference_accuracy(np.array([2.0]), np.array([1.0]), np.array([0.0]))
    with pytest.raises(InputError, match="score_b"):
        pairwise_preference_accuracy(np.array([1.0, 0.0]), np.array([1.0, 2.0]), np.array([0.0]))


def test_negative_zero_and_reuse_of_epsilon(path: str) -> None:
    """-0.0 and 0.0 are one metric score; an epsilon calibrated elsewhere reproduces the accuracy."""
    human = np.array([[1.0, 2.0, 2.0, 3.0], [2.0, 2.0, 1.0, 3.0], [1.0, 1.0, 1.0, 2.0]])
    metric = np.array([[-0.0, 0.0, 0.5, 1.0], [0.0, -0.0, -0.5, 0.5], [0.25, -0.0, 0.0, 0.75]])
    for grouping in GROUPINGS:
        groups = oracle_groups(human, metric, grouping)
        eps, acc = oracle_calibrate(groups)
        cal = calibrate_epsilon(human, metric, grouping=grouping)
        assert cal.epsilon == eps and not np.signbit(cal.epsilons).any()
        assert cal.accuracy == pytest.approx(float(acc), abs=1e-12)
        again = pairwise_accuracy(human, metric, grouping=grouping, epsilon=cal.epsilon)
        assert again.accuracy == pytest.approx(cal.accuracy, abs=1e-12)
