"""Flip statistics of the bias probes: counts written out by hand, the sign test equal to McNemar's exact
test (statsmodels) when no verdict is a tie, Clopper-Pearson intervals (statsmodels' ``proportion_confint``
with ``method="beta"``), missing verdicts left out and counted."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from evalign.meta.probes import flip_stats, own_wins, target_score


def test_counts_by_hand() -> None:
    before = ["A", "B", "tie", "A", "B", None, "A", "unparseable"]
    after = ["B", "B", "A", "tie", "A", "A", "A", "A"]
    target = ["B", "A", "A", "B", "A", "A", "A", "A"]
    f = flip_stats(before, after, target)
    # pair 0: A->B, target B: toward; 1: same; 2: tie->A, target A: toward; 3: A->tie, target B: toward;
    # 4: B->A, target A: toward; 5, 7: missing; 6: same
    assert (f.n_pairs, f.n, f.n_missing, f.n_changed, f.toward, f.away) == (8, 6, 2, 4, 4, 0)
    assert f.changed == pytest.approx(4 / 6) and f.net_shift == pytest.approx(4 / 6)
    assert f.p_value == pytest.approx(2 * 0.5**4) and f.robustness == pytest.approx(2 / 6)
    lo, hi = proportion_confint(4, 6, alpha=0.05, method="beta")
    assert (f.changed_low, f.changed_high) == pytest.approx((lo, hi))
    assert target_score(["A", "tie", "B", None], ["A", "A", "A", "A"]).tolist()[:3] == [1.0, 0.0, -1.0]


@pytest.mark.parametrize("seed", range(10))
def test_sign_test_is_mcnemar_exact_without_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(10, 80))
    target = rng.choice(["A", "B"], n)
    before = rng.choice(["A", "B"], n)
    after = np.where(rng.random(n) < rng.random(), np.where(rng.random(n) < 0.7, target, before), before)
    f = flip_stats(before.tolist(), after.tolist(), target.tolist())
    wins0, wins1 = before == target, after == target
    table = [[np.sum(wins0 & wins1), np.sum(wins0 & ~wins1)], [np.sum(~wins0 & wins1), np.sum(~wins0 & ~wins1)]]
    assert f.p_value == pytest.approx(mcnemar(table, exact=True).pvalue)
    assert (f.toward, f.away) == (table[1][0], table[0][1])


def test_own_wins_against_one_half() -> None:
    o = own_wins(["A", "A", "B", "tie", "A", None], ["A", "A", "A", "A", "B", "B"])
    assert (o.n, o.own) == (4, 2) and o.p_value == pytest.approx(1.0)
