"""The before/after table of judges run in both orders: figures by hand, baselines, published columns,
n = 0 never ranked, and the paired test equal to an exact sign-flip enumeration."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from evalign.errors import EvalignError
from evalign.train.before_after import (
    before_after_table,
    pair_scores,
    paired_change,
    score_change,
    table_before_after,
)

GOLD = np.array([1, -1, 1, -1, 1, -1, 1, -1, 1, -1.0])
#: the base answers "Output (a)" every time: A in the A-first order, B in the B-first order
BASE = (["A"] * 10, ["B"] * 10)
TRAINED = (["A", "B", "A", "B", "A", "B", "A", "B", "B", "A"], ["A", "B", "A", "B", "A", "B", "A", "A", "B", None])


def test_figures_by_hand_and_ranking() -> None:
    res = before_after_table({"base": BASE, "trained": TRAINED, "dead": ([None] * 10, [None] * 10)}, GOLD,
                             length_a=np.arange(10), length_b=np.arange(10)[::-1], reasons={"dead": "truncated: 20"})
    t = res.table.set_index("judge")
    # base = pure position bias: 0.5 in each order, never right in both, orders never agree, always the first
    assert t.loc["base", ["accuracy_ab", "accuracy_ba", "accuracy_both", "position_agreement", "prefers_first"]
                 ].tolist() == [0.5, 0.5, 0.0, 0.0, 1.0]
    # trained: A-first right on 8 of 10 (pairs 8, 9 wrong), B-first on 7 (7, 8 wrong; 9 missing = wrong)
    assert t.loc["trained", "accuracy_ab"] == 0.8 and t.loc["trained", "accuracy_ba"] == 0.7
    assert t.loc["trained", "accuracy_mean"] == pytest.approx(0.75) and t.loc["trained", "accuracy_both"] == 0.7
    assert t.loc["trained", "position_agreement"] == pytest.approx(0.8)  # pairs 7 and 9 (missing) disagree
    assert t.loc["trained", "prefers_first"] == pytest.approx(9 / 19)  # 19 decided verdicts, 9 for the first shown
    assert t.loc["trained", "note"] == "1 labelled pairs lack a verdict in at least one order (counted wrong)"
    # n = 0: listed with its reason, never ranked
    assert t.loc["dead", "n"] == 0 and pd.isna(t.loc["dead", "rank"]) and np.isnan(t.loc["dead", "accuracy_mean"])
    assert t.loc["dead", "note"] == "n = 0: no verdict (truncated: 20); not ranked"
    # baselines beside the judges
    assert t.loc["always_first", ["accuracy_mean", "position_agreement", "prefers_first"]].tolist() == [0.5, 0.0, 1.0]
    assert t.loc["always_a", ["accuracy_mean", "position_agreement"]].tolist() == [0.5, 1.0]
    assert t.loc["longer", "accuracy_mean"] == pytest.approx(0.4)  # longer = A on pairs 0-4, B on 5-9
    assert t.loc["trained", "rank"] == 1 and t.loc["base", "rank"] == 2 and t.loc["longer", "rank"] == 5
    assert res.table["kind"].tolist() == ["judge", "judge", "judge", "baseline", "baseline", "baseline"]


def test_paired_test_is_the_exact_sign_flip() -> None:
    res = before_after_table({"base": BASE, "trained": TRAINED}, GOLD)
    ch = res.change
    assert ch is not None and (ch.before, ch.after, ch.n) == ("base", "trained", 10)
    d = pair_scores(*TRAINED, GOLD) - pair_scores(*BASE, GOLD)
    assert ch.difference == pytest.approx(d.mean()) == pytest.approx(0.25)
    flips = [abs(np.dot(s, d)) >= abs(d.sum()) - 1e-12 for s in itertools.product([1, -1], repeat=10)]
    assert ch.p_value == pytest.approx(np.mean(flips))
    assert ch.significant == (ch.p_value < 0.05)
    assert "paired permutation p =" in ch.sentence()


def test_a_large_change_is_significant_and_n0_is_not_tested() -> None:
    gold = np.tile([1.0, -1.0], 20)
    right = (["A" if g > 0 else "B" for g in gold],) * 2
    ch = paired_change((["A"] * 40, ["B"] * 40), right, gold, before="base", after="trained")
    assert ch.difference == pytest.approx(0.5) and ch.p_value < 1e-3 and ch.significant
    none = paired_change(([None] * 40, [None] * 40), right, gold, before="base", after="trained")
    assert np.isnan(none.p_value) and not none.significant and none.note == "n = 0 for base"


def test_score_change_on_parse_indicators_is_the_exact_permutation_test() -> None:
    """score_change on 1/0 per-unit scores (e.g. parsed or not): the exact two-sided sign-flip p-value
    (8 units: all 2^8 flips enumerated by the test), the statistic named in the sentence."""
    before = np.array([0, 0, 1, 0, 0, 0, 1, 0], dtype=float)
    after = np.array([1, 1, 1, 0, 1, 1, 1, 1], dtype=float)
    ch = score_change(before, after, before="base", after="trained", statistic="parse rate", n_permutations=10000)
    d = after - before
    flips = [abs(np.dot(s, d)) >= abs(d.sum()) - 1e-12 for s in itertools.product([1, -1], repeat=8)]
    assert ch.p_value == pytest.approx(np.mean(flips)) and ch.difference == pytest.approx(0.625)
    assert ch.sentence().startswith("trained vs base: parse rate 0.250 -> 0.875 (+0.625), paired permutation p =")
    none = score_change(before, after, judged=(False, True), before="base", after="trained")
    assert np.isnan(none.p_value) and none.note == "n = 0 for base"


def test_table_columns_and_published_judges() -> None:
    table = pd.DataFrame({"pref_1": GOLD, "response_a": ["x" * (i + 1) for i in range(10)],
                          "response_b": ["y" * (10 - i) for i in range(10)],
                          "judge:base.ab": BASE[0], "judge:base.ba": BASE[1],
                          "judge:trained.ab": TRAINED[0], "judge:trained.ba": TRAINED[1],
                          "judge:gpt-4/vanilla": "A", "judge:gpt-4/vanilla.ab": [1.0, -1.0] * 5,
                          "judge:gpt-4/vanilla.ba": [1.0, -1.0] * 5})
    res = table_before_after(table, ["judge:base", "judge:trained"], "pref_1")
    t = res.table.set_index("judge")
    assert t.loc["judge:gpt-4/vanilla", "kind"] == "published" and t.loc["judge:gpt-4/vanilla", "accuracy_mean"] == 1.0
    assert t.loc["judge:gpt-4/vanilla", "rank"] == 1 and "longer" in t.index
    with pytest.raises(EvalignError, match=r"judge:other\.ab"):
        table_before_after(table, ["judge:other"], "pref_1")
