"""Trust tables: ranking, intervals, clusters and costs, rebuilt from the underlying statistics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evalign.meta.clusters import significance_clusters
from evalign.meta.correlation import correlation, system_means
from evalign.meta.pairwise import calibrate_epsilon, pairwise_accuracy, pairwise_preference_accuracy
from evalign.meta.significance import bootstrap_ci, make_statistic, paired_permutation_test
from evalign.meta.trust import trust_table_items, trust_table_pairs
from evalign.scoring import MetricRun

SYSTEMS = ("a", "b", "c", "d", "e")


def _table(n_items: int = 40, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    h = rng.integers(1, 6, size=(len(SYSTEMS), n_items)).astype(float)
    ms = {
        "good": np.round(h + 0.5 * rng.normal(size=h.shape), 1),
        "fair": np.round(h + 1.5 * rng.normal(size=h.shape), 1),
        "noise": np.round(rng.normal(size=h.shape), 1),
    }
    rows = []
    for j in range(n_items):
        for i, s in enumerate(SYSTEMS):
            rows.append({"id": str(j), "system": s, "task": "open" if j % 4 else "closed", "human": h[i, j],
                         **{k: v[i, j] for k, v in ms.items()}})
    return pd.DataFrame(rows), h, ms


def _run(col: str, seconds: float, n: int) -> MetricRun:
    return MetricRun(column=col, name=col, higher_is_better=True, signature=col, seconds=seconds, n_items=n)


def test_item_trust_table_rebuilt_from_statistics() -> None:
    table, h, ms = _table()
    runs = [_run("good", 2.0, 200), _run("fair", 0.1, 200)]
    rep = trust_table_items(table, "human", list(ms), n_resamples=100, n_permutations=100, seed=3, costs=runs)
    t = rep.for_group()
    assert rep.statistic == "pairwise_accuracy" and rep.level == "item"
    assert list(t["rank"]) == [1, 2, 3]
    assert list(t["value"]) == sorted(t["value"], reverse=True)
    assert list(t["metric"]) == ["good", "fair", "noise"]
    eps = {k: calibrate_epsilon(h, m, grouping="item").epsilon for k, m in ms.items()}
    values = {}
    for row in t.itertuples():
        m = ms[row.metric]
        assert row.value == pytest.approx(pairwise_accuracy(h, m, grouping="item").accuracy)
        assert row.epsilon == eps[row.metric]
        ci = bootstrap_ci("pairwise_accuracy", h, m, n_resamples=100, seed=3)
        assert (row.ci_low, row.ci_high) == (ci.low, ci.high)
        assert row.kendall == pytest.approx(correlation(h, m, "kendall", "item", "item").value)
        values[row.metric] = row.value
    p = {}
    for x, y in [("fair", "good"), ("fair", "noise"), ("good", "noise")]:
        p[(x, y)] = paired_permutation_test(make_statistic("pairwise_accuracy", epsilon=eps[x]), h, ms[x], ms[y],
                                            100, 3, stat_b=make_statistic("pairwise_accuracy", epsilon=eps[y])).p_value
    clusters = significance_clusters((values, p))
    assert dict(zip(t["metric"], t["cluster"], strict=True)) == clusters
    assert clusters["noise"] > clusters["good"]
    pb = t.set_index("metric")["p_vs_best"]
    assert np.isnan(pb["good"]) and pb["noise"] == p[("good", "noise")] and pb["fair"] == p[("fair", "good")]
    assert t.set_index("metric")["s_per_1000"].to_dict()["good"] == pytest.approx(10.0)
    assert np.isnan(t.set_index("metric").loc["noise", "s_per_1000"])


def test_trust_by_task_and_reproducible() -> None:
    table, h, ms = _table()
    kw = {"by": "task", "n_resamples": 50, "n_permutations": 50, "seed": 1, "min_group_size": 15}
    rep = trust_table_items(table, "human", ["good", "fair"], **kw)
    groups = rep.groups.set_index("group")
    assert groups.loc["closed", "status"] == "too small" and groups.loc["closed", "n"] == 10
    assert groups.loc["open", "status"] == "ok" and groups.loc["open", "n"] == 30
    assert set(rep.table["group"]) == {"(all)", "open"}
    open_cols = np.array([j for j in range(40) if j % 4])
    eps = calibrate_epsilon(h, ms["good"], grouping="item").epsilon  # the pool epsilon, not the group's
    row = rep.for_group("open").set_index("metric").loc["good"]
    assert row["value"] == pytest.approx(
        pairwise_accuracy(h[:, open_cols], ms["good"][:, open_cols], grouping="item", epsilon=eps).accuracy)
    again = trust_table_items(table, "human", ["good", "fair"], **kw)
    pd.testing.assert_frame_equal(rep.table, again.table)


def test_system_level_human_ranks() -> None:
    table, _, ms = _table()
    ranks = {"a": 5.0, "b": 4.0, "c": 1.0, "d": 3.0, "e": 2.0}
    rep = trust_table_items(table, ranks, ["good", "noise"], human_higher_is_better=False,
                            n_resamples=100, n_permutations=100)
    assert rep.level == "system" and rep.statistic == "kendall"
    t = rep.for_group().set_index("metric")
    hs = -np.array([ranks[s] for s in SYSTEMS])
    for name in ("good", "noise"):
        assert t.loc[name, "value"] == pytest.approx(correlation(hs, system_means(ms[name]), "kendall", "system").value)
        assert t.loc[name, "pearson"] == pytest.approx(
            correlation(hs, system_means(ms[name]), "pearson", "system").value)
        ci = bootstrap_ci("kendall", hs, ms[name], n_resamples=100, level="system")
        assert (t.loc[name, "ci_low"], t.loc[name, "ci_high"]) == (ci.low, ci.high)
    assert rep.notes and "system-level" in rep.notes[0]


def test_pair_trust_table() -> None:
    rng = np.random.default_rng(0)
    n = 120
    truth = rng.choice([-1.0, 0.0, 1.0], size=n, p=[0.45, 0.1, 0.45])
    q = rng.normal(size=n)
    pairs = pd.DataFrame({
        "id": [str(i) for i in range(n)],
        "task": ["t"] * n,
        "pref_1": truth,
        "pref_2": np.where(rng.random(n) < 0.8, truth, 0.0),
        "good_a": np.round(q + truth, 1), "good_b": np.round(q, 1),
        "weak_a": np.round(q + 0.2 * truth + rng.normal(size=n), 1), "weak_b": np.round(q, 1),
        "dist_a": -np.round(q + truth, 1), "dist_b": -np.round(q, 1),  # lower is better
    })
    rep = trust_table_pairs(pairs, ["pref_1", "pref_2"], ["good", "weak", "dist"], n_resamples=50,
                            n_permutations=50, lower_is_better=["dist"])
    t = rep.for_group().set_index("metric")
    prefs = pairs[["pref_1", "pref_2"]].to_numpy()
    ref = pairwise_preference_accuracy(prefs, pairs["good_a"], pairs["good_b"])
    assert t.loc["good", "value"] == pytest.approx(ref.accuracy_with_ties)
    assert t.loc["good", "epsilon"] == ref.epsilon
    ref0 = pairwise_preference_accuracy(prefs, pairs["good_a"], pairs["good_b"], epsilon=0.0)
    assert t.loc["good", "preference_accuracy_no_ties"] == pytest.approx(ref0.accuracy_without_ties)
    assert t.loc["dist", "value"] == pytest.approx(t.loc["good", "value"])
    assert t.loc["good", "cluster"] == 1 and t.loc["weak", "cluster"] == 2


def test_no_clusters_when_swaps_cannot_hold_each_epsilon() -> None:
    table, h, ms = _table()
    rep = trust_table_items(table, "human", ["good", "fair"], grouping="none", n_resamples=20, n_permutations=20)
    t = rep.for_group().set_index("metric")
    assert t["cluster"].isna().all()
    assert any("no significance clusters" in n for n in rep.notes)
    assert t.loc["good", "value"] == pytest.approx(pairwise_accuracy(h, ms["good"], grouping="none").accuracy)
