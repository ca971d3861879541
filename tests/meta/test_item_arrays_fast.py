"""``item_arrays`` places every row's value by indices found once for all columns (issue 39: the cross-set
table spent seconds in one pandas unstack per column of HANNA's 92): the matrices equal pandas' pivot."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalign.meta.breakdown import item_arrays


def test_item_arrays_equal_a_pandas_pivot_with_missing_cells_and_shuffled_rows() -> None:
    rng = np.random.default_rng(4)
    rows = [(f"s{s}", i) for s in range(5) for i in range(40) if rng.random() > 0.2]
    t = pd.DataFrame(rows, columns=["system", "id"]).sample(frac=1, random_state=1).reset_index(drop=True)
    t["human"] = rng.integers(1, 6, len(t)).astype(float)
    t["m1"] = rng.normal(size=len(t))
    t["m2"] = np.where(rng.random(len(t)) < 0.1, np.nan, rng.normal(size=len(t)))
    got = item_arrays(t, "human", ["m1", "m2"], lower_is_better=["m2"])
    items = list(dict.fromkeys(map(str, t["id"])))
    systems = sorted(t["system"].unique())

    def pivot(col: str) -> np.ndarray:
        wide = t.assign(id=t["id"].astype(str)).pivot(index="system", columns="id", values=col)
        return wide.reindex(index=systems, columns=items).to_numpy(dtype=float)

    assert list(got.items) == items and list(got.systems) == systems
    np.testing.assert_array_equal(got.human, pivot("human"))
    np.testing.assert_array_equal(got.metrics["m1"], pivot("m1"))
    np.testing.assert_array_equal(got.metrics["m2"], -pivot("m2"))
    assert np.isnan(got.human).sum() == 5 * 40 - len(t)
