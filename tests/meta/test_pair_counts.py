"""A pair table's trust table counted chunk by chunk (evalign.meta.pair_counts) is the trust table of the
whole arrays: the same values, epsilons, intervals and p-values with the same seed, on random tables read
in many small chunks, from a DataFrame and from a Parquet file, on one process or two."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evalign.errors import InputError
from evalign.meta.agreement import majority_vote
from evalign.meta.breakdown import group_index, pair_arrays
from evalign.meta.pair_counts import (
    PairTable,
    calibrated_epsilon,
    count_groups,
    distance_counts,
    epsilons,
    frame_chunks,
    group_units,
    merge_distance_counts,
)
from evalign.meta.pairwise import calibrate_preference_epsilon, preference_pairs
from evalign.meta.resampling import Resampling
from evalign.meta.significance import make_statistic, units_of
from evalign.meta.sufficient import joint_counts
from evalign.meta.trust import (
    CountedGroup,
    Predictor,
    rank_counted,
    rank_predictors,
    trust_table_pairs,
    trust_table_pairs_file,
)

PREFS = ["p1", "p2", "p3"]
ALSO = ["preference_accuracy_no_ties"]


def _pairs(n: int, n_metrics: int, seed: int, *, continuous: bool = False) -> tuple[pd.DataFrame, list[str]]:
    """Random pairs: three annotators (some labels missing), metrics of varied quality (some scores
    missing, rounded to 1 decimal so that ties and equal distances are common), a task column with gaps."""
    rng = np.random.default_rng(seed)
    truth = rng.choice([-1.0, 0.0, 1.0], size=n, p=[0.4, 0.2, 0.4])
    cols: dict[str, object] = {}
    for k, name in enumerate(PREFS):
        lab = np.where(rng.random(n) < 0.7 + 0.1 * k, truth, rng.choice([-1.0, 0.0, 1.0], size=n))
        lab[rng.random(n) < 0.05] = np.nan
        cols[name] = lab
    names = [f"m{i}" for i in range(n_metrics)]
    for i, m in enumerate(names):
        a = rng.normal(size=n) + (0.6 - 0.1 * i) * truth
        b = rng.normal(size=n)
        if not continuous:
            a, b = np.round(a, 1), np.round(b, 1)
        a[rng.random(n) < 0.02] = np.nan
        cols[f"{m}_a"], cols[f"{m}_b"] = a, b
    cols["task"] = rng.choice(np.array(["qa", "code", "math", None], dtype=object), size=n)
    return pd.DataFrame(cols), names


def _reference(pairs: pd.DataFrame, names: list[str], r: Resampling, *, by: str | None = None,
               lower: tuple[str, ...] = (), test: str = "permutation", statistic: str = "preference_accuracy",
               also: tuple[str, ...] = tuple(ALSO)) -> pd.DataFrame:
    """The unchunked path: every metric's whole arrays ranked by rank_predictors (calibrated on all pairs)."""
    arrays = pair_arrays(pairs, PREFS, names, lower_is_better=lower)
    groups = group_index(pairs, arrays, by, True)
    rows, _, _, _ = rank_predictors(arrays.human, [Predictor(m, x) for m, x in arrays.metrics.items()], groups,
                                    statistic=statistic, also=also, is_pairs=True, resampling=r,
                                    min_group_size=30, test=test)
    return rows.drop(columns=["kind", "beats_baselines"])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_chunked_trust_table_is_the_whole_arrays_table(seed: int) -> None:
    pairs, names = _pairs(10_000, 4, seed)
    r = Resampling(n_resamples=300, n_permutations=300, seed=seed + 7, workers=1)
    for by in (None, "task"):
        lower = ("m2",) if seed == 1 else ()
        counted = trust_table_pairs(pairs, PREFS, names, resampling=r, by=by, lower_is_better=lower, chunk_rows=1000)
        ref = _reference(pairs, names, r, by=by, lower=lower)
        pd.testing.assert_frame_equal(counted.table, ref)
        assert counted.resampling == "sufficient"
        assert counted.table["ci_low"].notna().all() and counted.table["p_vs_best"].notna().sum() >= 3
    assert set(counted.table["group"]) == {"(all)", "qa", "code", "math", "(none)"}


def test_chunked_table_with_many_metrics_and_small_chunks() -> None:
    """Eight metrics over chunks of 150 rows: the joint counts pair by pair (3**8 cells > a chunk's rows)."""
    pairs, names = _pairs(3_000, 8, 5)
    r = Resampling(n_resamples=200, n_permutations=200, seed=3, workers=1)
    counted = trust_table_pairs(pairs, PREFS, names, resampling=r, chunk_rows=150)
    pd.testing.assert_frame_equal(counted.table, _reference(pairs, names, r))


def test_ranked_without_ties_and_no_extra_statistic() -> None:
    pairs, names = _pairs(5_000, 3, 21)
    r = Resampling(n_resamples=200, n_permutations=200, seed=4, workers=1)
    got = trust_table_pairs(pairs, PREFS, names, statistic="preference_accuracy_no_ties", resampling=r,
                            chunk_rows=800)
    ref = _reference(pairs, names, r, statistic="preference_accuracy_no_ties", also=("preference_accuracy",))
    pd.testing.assert_frame_equal(got.table, ref)
    assert (got.table["epsilon"] == 0.0).all() and "preference_accuracy" in got.table.columns
    got = trust_table_pairs(pairs, PREFS, names, also=(), resampling=r, chunk_rows=800)
    pd.testing.assert_frame_equal(got.table, _reference(pairs, names, r, also=()))


def test_system_groups_and_bootstrap_test_match() -> None:
    pairs, names = _pairs(4_000, 3, 11)
    rng = np.random.default_rng(0)
    pairs["system_a"] = rng.choice(["x", "y", "z"], size=len(pairs))
    pairs["system_b"] = rng.choice(["x", "y", "z"], size=len(pairs))
    r = Resampling(n_resamples=200, n_permutations=200, seed=1, workers=1)
    counted = trust_table_pairs(pairs, PREFS, names, resampling=r, by="system", chunk_rows=700)
    pd.testing.assert_frame_equal(counted.table, _reference(pairs, names, r, by="system"))
    # the paired bootstrap test draws the joint counts of two counted credits
    table = PairTable(PREFS, names)
    chunks = frame_chunks(pairs, 900)
    eps = epsilons(chunks, table, ["preference_accuracy", *ALSO])
    gc = count_groups(chunks, table, eps, "preference_accuracy")["(all)"]
    group = CountedGroup(gc.n, group_units(gc, eps, "preference_accuracy", names),
                         {m: {"preference_accuracy_no_ties": float("nan")} for m in names})
    rows, _, _, _ = rank_counted([Predictor(m, np.empty((2, 0))) for m in names], {"(all)": group},
                                 {m: [eps["preference_accuracy"][m], 0.0] for m in names},
                                 statistic="preference_accuracy", also=ALSO, resampling=r, min_group_size=30,
                                 test="bootstrap")
    ref = _reference(pairs, names, r, test="bootstrap")
    cols = ["metric", "value", "ci_low", "ci_high", "p_vs_best", "cluster", "epsilon"]
    pd.testing.assert_frame_equal(rows[rows["group"] == "(all)"][cols].reset_index(drop=True),
                                  ref[ref["group"] == "(all)"][cols].reset_index(drop=True))


def test_parquet_file_read_in_batches_is_the_frame_table(tmp_path) -> None:
    pairs, names = _pairs(6_000, 3, 3)
    path = tmp_path / "pairs.parquet"
    pairs.to_parquet(path, row_group_size=2_500, index=False)
    r1 = Resampling(n_resamples=200, n_permutations=200, seed=2, workers=1)
    r2 = Resampling(n_resamples=200, n_permutations=200, seed=2, workers=2)
    ref = trust_table_pairs(pairs, PREFS, names, resampling=r1, by="task")
    for r in (r1, r2):  # forked workers read the row groups: the same table
        got = trust_table_pairs_file(path, PREFS, names, resampling=r, by="task", chunk_rows=700)
        pd.testing.assert_frame_equal(got.table, ref.table)
        pd.testing.assert_frame_equal(got.groups, ref.groups)
        assert got.notes == ref.notes


def test_calibrated_epsilon_from_merged_counts_is_the_calibration() -> None:
    rng = np.random.default_rng(4)
    for trial in range(30):
        n = int(rng.integers(1, 400))
        labels = rng.choice([-1.0, 0.0, 1.0], size=n)
        a = rng.normal(size=n)
        b = rng.normal(size=n)
        if trial % 3:  # few distinct distances, with zeros
            a, b = np.round(a, 1), np.round(b, 1)
        _, _, dist, code = preference_pairs(labels, a, b)
        cut = sorted(rng.integers(0, n, size=3))
        parts = [distance_counts(dist[lo:hi], code[lo:hi]) for lo, hi in zip([0, *cut], [*cut, n], strict=True)]
        counts = merge_distance_counts(parts)
        assert np.all(np.diff(counts.values) > 0) and int(counts.total.sum()) == n
        assert int(counts.ties.sum()) == int((labels == 0).sum())
        assert calibrated_epsilon(counts) == calibrate_preference_epsilon(labels, a, b).epsilon


def test_counted_credits_pair_like_per_item_codes() -> None:
    pairs, names = _pairs(2_000, 3, 9)
    table = PairTable(PREFS, names)
    chunks = frame_chunks(pairs, 333)
    eps = epsilons(chunks, table, ["preference_accuracy"])
    units = group_units(count_groups(chunks, table, eps, "preference_accuracy")["(all)"], eps,
                        "preference_accuracy", names)
    arrays = pair_arrays(pairs, PREFS, names)
    human = majority_vote(arrays.human.T, fallback=0.0)[None, :]
    items = {m: units_of(make_statistic("preference_accuracy", epsilon=eps["preference_accuracy"][m]).bind(human, x),
                         human, x) for m, x in arrays.metrics.items()}
    for m in names:
        assert units[m].value == items[m].value
        assert units[m].credits.n == items[m].credits.n == len(pairs)
        np.testing.assert_array_equal(units[m].credits.counts, items[m].credits.counts)
        np.testing.assert_array_equal(units[m].credits.num, items[m].credits.num)
    for a, b in (("m0", "m1"), ("m2", "m0")):
        for got, want in zip(joint_counts(units[a].credits, units[b].credits),
                             joint_counts(items[a].credits, items[b].credits), strict=True):
            np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="per-item vectors"):
        units["m0"].vectors()


def test_errors_name_the_file_row_and_column(tmp_path) -> None:
    pairs, names = _pairs(3_000, 2, 8)
    pairs.loc[2_345, "p2"] = 2.0
    path = tmp_path / "bad.parquet"
    pairs.to_parquet(path, row_group_size=1_000, index=False)
    with pytest.raises(InputError) as e:
        trust_table_pairs_file(path, PREFS, names, chunk_rows=400)
    assert e.value.line == 2_346 and e.value.field == "p2" and str(path) in str(e.value)
    with pytest.raises(InputError) as e:
        trust_table_pairs_file(path, PREFS, ["m0", "nope"])
    assert e.value.field == "nope_a" and str(path) in str(e.value)
    with pytest.raises(InputError, match="method 'auto'"):
        trust_table_pairs_file(path, PREFS, names, resampling=Resampling(method="items"))
