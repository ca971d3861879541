"""Breakdowns by task / language / system against the stats module on hand-built subsets."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evalign.datasets import pairs_to_items
from evalign.errors import InputError
from evalign.meta.breakdown import ALL, breakdown, item_arrays, pair_scores
from evalign.meta.correlation import correlation, system_means
from evalign.meta.pairwise import calibrate_epsilon, pairwise_accuracy, pairwise_preference_accuracy

SYSTEMS = ("s1", "s2", "s3", "s4")


def _items(n_items: int = 24, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """An item table and its matrices built by hand (systems x items, sorted systems)."""
    rng = np.random.default_rng(seed)
    h = rng.integers(1, 6, size=(len(SYSTEMS), n_items)).astype(float)
    m1 = np.round(h + rng.normal(size=h.shape), 1)
    m2 = np.round(h + 3 * rng.normal(size=h.shape), 1)
    tasks = ["long" if i % 3 == 0 else "short" for i in range(n_items)]
    langs = ["en" if i < n_items - 2 else "de" for i in range(n_items)]
    rows = []
    for j in range(n_items):
        for i, s in enumerate(SYSTEMS):
            rows.append({"id": f"q{j}", "system": s, "response": "r", "task": tasks[j], "language": langs[j],
                         "human": h[i, j], "m1": m1[i, j], "m2": m2[i, j]})
    return pd.DataFrame(rows), h, m1, m2


def test_item_arrays_pivot() -> None:
    table, h, m1, _ = _items()
    arr = item_arrays(table.sample(frac=1.0, random_state=1), "human", ["m1"])  # row order does not matter
    assert arr.systems == SYSTEMS
    order = [int(i[1:]) for i in arr.items]
    np.testing.assert_array_equal(arr.human, h[:, order])
    np.testing.assert_array_equal(arr.metrics["m1"], m1[:, order])


def test_pairwise_accuracy_by_task_uses_pool_epsilon() -> None:
    table, h, m1, m2 = _items()
    out = breakdown(table, human="human", metrics=["m1", "m2"], by="task", min_group_size=2)
    assert list(out.columns) == [ALL, "long", "short"]
    long_cols = np.arange(24)[::3]
    short_cols = np.setdiff1d(np.arange(24), long_cols)
    for name, m in (("m1", m1), ("m2", m2)):
        eps = calibrate_epsilon(h, m, grouping="item").epsilon
        assert out.attrs["epsilon"][name] == eps
        assert out.loc[name, ALL] == pytest.approx(pairwise_accuracy(h, m, grouping="item").accuracy)
        for group, cols in (("long", long_cols), ("short", short_cols)):
            ref = pairwise_accuracy(h[:, cols], m[:, cols], grouping="item", epsilon=eps).accuracy
            assert out.loc[name, group] == pytest.approx(ref)
    assert out.attrs["n"] == {ALL: 24, "long": 8, "short": 16}
    assert out.attrs["too_small"] == []


def test_small_groups_are_reported_not_dropped() -> None:
    table, *_ = _items()
    out = breakdown(table, human="human", metrics=["m1"], by="language", min_group_size=5)
    assert list(out.columns) == [ALL, "de", "en"]
    assert np.isnan(out.loc["m1", "de"])
    assert out.attrs["too_small"] == ["de"] and out.attrs["n"]["de"] == 2
    long = breakdown(table, human="human", metrics=["m1"], by="language", min_group_size=5, wide=False)
    row = long[long["group"] == "de"].iloc[0]
    assert row["status"] == "too small" and row["n"] == 2


def test_correlations_by_group() -> None:
    table, h, m1, _ = _items()
    out = breakdown(table, human="human", metrics=["m1"], by="task", statistic="kendall", grouping="item",
                    min_group_size=2)
    cols = np.arange(24)[::3]
    assert out.loc["m1", "long"] == pytest.approx(correlation(h[:, cols], m1[:, cols], "kendall", "item", "item").value)
    sys_out = breakdown(table, human="human", metrics=["m1"], by="task", statistic="pearson", level="system",
                        min_group_size=2)
    ref = correlation(system_means(h[:, cols]), system_means(m1[:, cols]), "pearson", "system").value
    assert sys_out.loc["m1", "long"] == pytest.approx(ref)


def test_system_level_human_mapping_and_lower_is_better() -> None:
    table, _, m1, _ = _items()
    ranks = {"s1": 4.0, "s2": 1.0, "s3": 3.0, "s4": 2.0, "unused": 9.0}
    out = breakdown(table, human=ranks, metrics=["m1"], by=None, statistic="kendall", level="system",
                    human_higher_is_better=False)
    ref = correlation(-np.array([4.0, 1.0, 3.0, 2.0]), system_means(m1), "kendall", "system").value
    assert out.loc["m1", ALL] == pytest.approx(ref)
    flipped = table.assign(m1=-table["m1"])
    out2 = breakdown(flipped, human=ranks, metrics=["m1"], by=None, statistic="kendall", level="system",
                     human_higher_is_better=False, lower_is_better=["m1"])
    assert out2.loc["m1", ALL] == pytest.approx(ref)
    with pytest.raises(InputError, match="s4"):
        breakdown(table, human={"s1": 1.0, "s2": 2.0, "s3": 3.0}, metrics=["m1"], by=None, statistic="kendall",
                  level="system")


def test_accuracy_per_system_and_tie_rates() -> None:
    table, h, m1, _ = _items()
    out = breakdown(table, human="human", metrics=["m1"], by="system", statistic="pairwise_accuracy")
    eps = calibrate_epsilon(h, m1, grouping="item").epsilon
    for i, s in enumerate(SYSTEMS):  # pairs of items within the system, at the pool epsilon
        assert out.loc["m1", s] == pytest.approx(pairwise_accuracy(h[i], m1[i], epsilon=eps).accuracy)
    ties = breakdown(table, human="human", metrics=["m1", "m2"], by="task", statistic="tie_rate", min_group_size=2)
    ref = pairwise_accuracy(h, m1, grouping="item", epsilon=eps)
    assert ties.loc["m1", ALL] == pytest.approx(ref.metric_tie_rate)
    assert ties.loc["(human)", ALL] == pytest.approx(ref.human_tie_rate)


def _pairs(n: int = 80, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    systems = ["x", "y", "z"]
    truth = rng.choice([-1.0, 0.0, 1.0], size=n, p=[0.45, 0.1, 0.45])
    rows = []
    for i in range(n):
        a, b = rng.choice(systems, 2, replace=False)
        q = rng.normal()
        rows.append({
            "id": str(i), "instruction": f"do {i}", "input": "", "reference": "ref",
            "system_a": a, "system_b": b, "response_a": f"a{i}", "response_b": f"b{i}",
            "task": "t1" if i % 2 else "t2",
            **{f"pref_{k}": truth[i] if rng.random() < 0.9 else -truth[i] for k in (1, 2, 3)},
            "m_a": round(q + 0.7 * truth[i], 1), "m_b": round(q, 1),
        })
    return pd.DataFrame(rows)


def test_pair_table_by_system_and_task() -> None:
    pairs = _pairs()
    prefs = pairs[["pref_1", "pref_2", "pref_3"]].to_numpy()
    a, b = pairs["m_a"].to_numpy(), pairs["m_b"].to_numpy()
    eps = pairwise_preference_accuracy(prefs, a, b).epsilon
    out = breakdown(pairs, human=["pref_1", "pref_2", "pref_3"], metrics=["m"], by="system",
                    statistic="preference_accuracy")
    for s in ("x", "y", "z"):
        sel = ((pairs["system_a"] == s) | (pairs["system_b"] == s)).to_numpy()
        ref = pairwise_preference_accuracy(prefs[sel], a[sel], b[sel], epsilon=eps).accuracy_with_ties
        assert out.loc["m", s] == pytest.approx(ref)
        assert out.attrs["n"][s] == int(sel.sum())
    no_ties = breakdown(pairs, human=["pref_1", "pref_2", "pref_3"], metrics=["m"], by="task",
                        statistic="preference_accuracy_no_ties")
    sel = (pairs["task"] == "t1").to_numpy()
    ref = pairwise_preference_accuracy(prefs[sel], a[sel], b[sel], epsilon=0.0).accuracy_without_ties
    assert no_ties.loc["m", "t1"] == pytest.approx(ref)


def test_pair_scores_from_scored_items() -> None:
    pairs = _pairs(n=6).drop(columns=["m_a", "m_b"])
    items = pairs_to_items(pairs)
    items["len"] = items["response"].str.len().astype(float) + (items["side"] == "b") * 0.5
    out = pair_scores(pairs, items.sample(frac=1.0, random_state=0), ["len"])
    np.testing.assert_allclose(out["len_a"], pairs["response_a"].str.len())
    np.testing.assert_allclose(out["len_b"], pairs["response_b"].str.len() + 0.5)


def test_errors_name_the_column() -> None:
    table, *_ = _items()
    with pytest.raises(InputError, match="'nope'"):
        breakdown(table, human="human", metrics=["nope"], by="task")
    with pytest.raises(InputError, match="'genre'"):
        breakdown(table, human="human", metrics=["m1"], by="genre")
    with pytest.raises(InputError, match="'hum'"):
        breakdown(table, human="hum", metrics=["m1"], by=None)
    bad = _pairs(n=5)
    bad.loc[2, "pref_2"] = 2.0
    with pytest.raises(InputError, match="pref_2"):
        breakdown(bad, human=["pref_1", "pref_2"], metrics=["m"], by=None, statistic="preference_accuracy")
