"""Order diagnostics of a pairwise judge run in both orders: hand-made cases for every figure,
and the brute-force definition on random verdicts."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from evalign.meta.order_diagnostics import (
    OrderDiagnostics,
    accuracy,
    as_codes,
    both_order_judges,
    order_diagnostics,
    position_agreement,
    prefers_first,
    prefers_longer,
    table_order_diagnostics,
    text_lengths,
)

FIELDS = ("accuracy_original", "accuracy_swapped", "accuracy_mean", "accuracy_both", "position_agreement",
          "prefers_first", "prefers_longer", "n")


def test_result_fields_are_the_issues_names_and_frozen() -> None:
    d = order_diagnostics(["A"], ["A"], [1.0])
    assert tuple(d.as_dict()) == FIELDS
    with pytest.raises(AttributeError):
        d.n = 3  # type: ignore[misc]
    assert isinstance(d, OrderDiagnostics)


def test_a_perfect_judge() -> None:
    gold = [1.0, -1.0, 1.0, -1.0]
    v = ["A", "B", "A", "B"]
    d = order_diagnostics(v, v, gold, length_a=[10, 1, 10, 1], length_b=[1, 10, 1, 10])
    assert (d.accuracy_original, d.accuracy_swapped, d.accuracy_mean, d.accuracy_both) == (1, 1, 1, 1)
    assert d.position_agreement == 1 and d.prefers_first == 0.5 and d.prefers_longer == 1 and d.n == 4


def test_a_judge_that_always_picks_the_first_shown() -> None:
    # A first in the original order, B first in the swapped one (verdicts in the original orientation)
    gold = [1.0, -1.0, 1.0, -1.0]
    d = order_diagnostics(["A"] * 4, ["B"] * 4, gold, length_a=[5, 5, 1, 1], length_b=[1, 1, 5, 5])
    assert d.accuracy_original == 0.5 and d.accuracy_swapped == 0.5 and d.accuracy_mean == 0.5
    assert d.accuracy_both == 0  # never right in both orders
    assert d.position_agreement == 0 and d.prefers_first == 1
    assert d.prefers_longer == 0.5  # pooled over both orders: the first shown is longer half the time


def test_accuracy_per_order_by_hand() -> None:
    gold = [1.0, 1.0, -1.0, -1.0, 1.0]
    ab = ["A", "B", "B", "tie", None]
    ba = ["A", "A", "A", "B", "A"]
    d = order_diagnostics(ab, ba, gold)
    assert d.accuracy_original == 2 / 5  # right on 0, 2; tie and no verdict are wrong
    assert d.accuracy_swapped == 4 / 5  # wrong only on 2
    assert d.accuracy_mean == pytest.approx(3 / 5)
    assert d.accuracy_both == 1 / 5  # only pair 0
    assert d.position_agreement == 1 / 5
    assert accuracy(ab, gold) == d.accuracy_original


def test_a_judge_tie_is_right_only_on_a_gold_tie() -> None:
    d = order_diagnostics(["tie", "tie"], ["tie", "A"], [0.0, 1.0])
    assert d.accuracy_original == 0.5 and d.accuracy_swapped == 1.0 and d.accuracy_both == 0.5


def test_unlabelled_pairs_count_for_agreement_not_accuracy() -> None:
    d = order_diagnostics(["A", "B", "A"], ["A", "A", "A"], [1.0, np.nan, -1.0])
    assert d.accuracy_original == 0.5 and d.accuracy_swapped == 0.5
    assert d.position_agreement == 2 / 3 and d.n == 3
    nothing = order_diagnostics(["A"], ["A"], [np.nan])
    assert math.isnan(nothing.accuracy_original) and math.isnan(nothing.accuracy_mean)


def test_position_agreement_two_missing_verdicts_agree_as_in_llmbar() -> None:
    ab = ["A", None, None, "unparseable", "B"]
    ba = ["A", None, "A", float("nan"), "A"]
    assert position_agreement(ab, ba) == 3 / 5  # pairs 0, 1, 3
    assert position_agreement(ab, ba, nulls_agree=False) == 1 / 5
    d = order_diagnostics(ab, ba, [1.0] * 5)
    assert d.position_agreement == 3 / 5
    assert order_diagnostics(ab, ba, [1.0] * 5, nulls_agree=False).position_agreement == 1 / 5


def test_prefers_first_leaves_out_ties_and_missing_verdicts() -> None:
    ab = ["A", "A", "B", "tie", None]
    ba = ["B", "A", "tie", None, "B"]
    # decided: ab A (first), A (first), B (second); ba B (first), A (second), B (first)
    assert prefers_first(ab, ba) == 4 / 6
    assert math.isnan(prefers_first(["tie"], [None]))


def test_prefers_longer_leaves_out_equal_lengths_and_undecided() -> None:
    ab = ["A", "B", "A", "tie", "A"]
    ba = ["A", "A", "B", "A", None]
    la = [10, 10, 5, 10, 3]
    lb = [2, 2, 5, 2, 9]
    # pair 2: equal lengths, out; pair 3: ab tie out, ba A (longer); pair 4: ab A (shorter), ba none
    # decided on different lengths: ab: A(longer) B(shorter) A(shorter); ba: A(longer) A(longer) A(longer)
    assert prefers_longer([ab, ba], la, lb) == 4 / 6
    assert prefers_longer([ab], la, lb) == 1 / 3
    d = order_diagnostics(ab, ba, [1.0] * 5, length_a=la, length_b=lb)
    assert d.prefers_longer == 4 / 6
    assert math.isnan(order_diagnostics(ab, ba, [1.0] * 5).prefers_longer)  # no lengths given
    assert math.isnan(prefers_longer([], la, lb))


def test_verdict_forms_and_errors() -> None:
    codes = as_codes(["A", "b", " TIE ", 1, -1.0, 0, 0.3, None, "", "unparseable", float("nan")])
    assert codes[:7].tolist() == [1, -1, 0, 1, -1, 0, 1] and np.isnan(codes[7:]).all()
    with pytest.raises(ValueError, match="verdict must be"):
        as_codes(["C"])
    with pytest.raises(ValueError, match="verdict must be"):
        as_codes([True])
    with pytest.raises(ValueError, match="different lengths"):
        order_diagnostics(["A"], ["A", "B"], [1.0])
    with pytest.raises(ValueError, match="unit"):
        text_lengths(["x"], "tokens")
    assert text_lengths(["a bc", None, "x y z"], "words")[[0, 2]].tolist() == [2, 3]
    assert text_lengths(["a bc"])[0] == 4


def test_matches_the_definition_on_random_verdicts() -> None:
    rng = np.random.default_rng(7)
    choices = np.array(["A", "B", "tie", None], dtype=object)
    for _ in range(30):
        n = int(rng.integers(1, 40))
        ab = choices[rng.integers(0, 4, n)]
        ba = choices[rng.integers(0, 4, n)]
        gold = rng.choice([1.0, -1.0, 0.0], n)
        la = rng.integers(1, 6, n).astype(float)
        lb = rng.integers(1, 6, n).astype(float)
        d = order_diagnostics(list(ab), list(ba), gold, length_a=la, length_b=lb)
        word = {1.0: "A", -1.0: "B", 0.0: "tie"}
        ok_a = [a == word[g] for a, g in zip(ab, gold, strict=True)]
        ok_b = [b == word[g] for b, g in zip(ba, gold, strict=True)]
        assert d.accuracy_original == pytest.approx(sum(ok_a) / n)
        assert d.accuracy_swapped == pytest.approx(sum(ok_b) / n)
        assert d.accuracy_both == pytest.approx(sum(x and y for x, y in zip(ok_a, ok_b, strict=True)) / n)
        assert d.position_agreement == pytest.approx(sum(a == b for a, b in zip(ab, ba, strict=True)) / n)
        first = [a == "A" for a in ab if a in ("A", "B")] + [b == "B" for b in ba if b in ("A", "B")]
        assert (d.prefers_first == pytest.approx(sum(first) / len(first))) if first else math.isnan(d.prefers_first)
        longer = [(v == "A") == (x > y) for vs in (ab, ba) for v, x, y in zip(vs, la, lb, strict=True)
                  if v in ("A", "B") and x != y]
        assert (d.prefers_longer == pytest.approx(sum(longer) / len(longer))) if longer else \
            math.isnan(d.prefers_longer)
        for f in FIELDS[:-1]:
            v = getattr(d, f)
            assert math.isnan(v) or 0 <= v <= 1


def test_table_diagnostics_read_the_judge_layout() -> None:
    table = pd.DataFrame({
        "response_a": ["long answer here", "x", "same", "abc"],
        "response_b": ["short", "a longer one", "same", "abcdef"],
        "pref": [1.0, -1.0, 1.0, 1.0],
        "judge:j": ["A", "tie", "unparseable", None],
        "judge:j.ab": ["A", "A", None, None],
        "judge:j.ba": ["A", "B", "A", None],
        "judge:j.status": ["scored", "scored", "unscored", "skipped"],
    })
    d = table_order_diagnostics(table, "judge:j", "pref")
    assert d.n == 3  # the skipped row is left out
    assert d.accuracy_original == 1 / 3 and d.accuracy_swapped == 1 and d.accuracy_both == 1 / 3
    assert d.position_agreement == 1 / 3
    # decided: ab A (pair 0, shown first), A (pair 1, first); ba A (pair 0, shown second), B (pair 1,
    # first), A (pair 2, second)
    assert d.prefers_first == 3 / 5
    # pair 2 has equal lengths; A is longer in pair 0, B in pair 1: ab A, A -> 1 of 2; ba A, B -> 2 of 2
    assert d.prefers_longer == 3 / 4
    with pytest.raises(KeyError, match="both orders"):
        table_order_diagnostics(table.drop(columns=["judge:j.ba"]), "judge:j", "pref")


def test_both_order_judges_finds_the_judges_with_two_orders() -> None:
    cols = ["id", "judge:j", "judge:j.ab", "judge:j.ba", "judge:j.status", "judge:one", "judge:one.ab", "bleu",
            "prometheus_relative", "prometheus_relative.ab", "prometheus_relative.ba"]
    assert both_order_judges(cols) == ["judge:j", "prometheus_relative"]
    assert both_order_judges(pd.DataFrame(columns=cols).columns) == ["judge:j", "prometheus_relative"]
