"""``EvalSpec(overview=False)`` (what the cross-set table of ``evalign meta --published`` asks for)
leaves out the overview and the side statistics, and nothing else: the trust table's ranks, values,
intervals, baselines and tests are those of the full evaluation with the same seed, on random item
ratings and random pair labels."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from evalign.evaluate import Column, EvalSpec, Human, Resampling, TrustRequest, evaluate

RS = Resampling(n_resamples=200, n_permutations=200, seed=3)
#: the trust-table columns the cross-set table reads
SHARED = ["group", "n", "kind", "rank", "metric", "value", "ci_low", "ci_high", "beats_baselines"]


def _items(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for j in range(40):
        for s in range(4):
            h = float(rng.integers(1, 6))
            rows.append({"id": f"i{j}", "system": f"s{s}", "response": "r" * int(rng.integers(1, 30)), "h": h,
                         "good": h + rng.normal(0, 1.0), "noisy": rng.normal(), "coarse": float(round(h + rng.normal()))})
    return pd.DataFrame(rows)


def _pairs(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 120
    pref = rng.choice([1.0, -1.0, 0.0], n, p=[0.45, 0.4, 0.15])
    return pd.DataFrame({"id": [str(i) for i in range(n)], "instruction": ["q"] * n,
                         "response_a": ["x" * int(k) for k in rng.integers(1, 50, n)],
                         "response_b": ["y" * int(k) for k in rng.integers(1, 50, n)],
                         "pref_1": pref, "m_a": rng.random(n) + 0.3 * (pref > 0), "m_b": rng.random(n),
                         "w_a": rng.random(n), "w_b": rng.random(n)})


def _same_table(spec: EvalSpec) -> None:
    full, short = evaluate(spec), evaluate(replace(spec, overview=False))
    assert not full.overview.empty and short.overview.empty
    a, b = full.trust[0].rows, short.trust[0].rows
    assert len(a) == len(b) > 3
    pd.testing.assert_frame_equal(a[SHARED].reset_index(drop=True), b[SHARED].reset_index(drop=True))
    assert a["value"].notna().sum() > 3  # real values, not an empty comparison
    side = [c for c in a.columns if c not in b.columns]
    assert side  # the side statistics are what is left out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_item_ratings_rank_the_same_without_the_overview(seed: int) -> None:
    cols = (Column("good"), Column("noisy"), Column("coarse"))
    _same_table(EvalSpec(human=Human(column="h"), columns=cols, items=_items(seed), resampling=RS,
                         trust=(TrustRequest("pairwise_accuracy", "item", "item"),), clusters=False))
    _same_table(EvalSpec(human=Human(column="h"), columns=cols, items=_items(seed), resampling=RS,
                         trust=(TrustRequest("kendall", "item", "none"),), clusters=False))


@pytest.mark.parametrize("seed", [0, 1])
def test_pair_labels_rank_the_same_without_the_overview(seed: int) -> None:
    _same_table(EvalSpec(human=Human(pref_columns=("pref_1",)), columns=(Column("m"), Column("w")),
                         pairs=_pairs(seed), resampling=RS, clusters=False))
