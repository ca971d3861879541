"""``item_arrays`` checks for a repeated (id, system) through the cells it places anyway (the pandas
check runs only when a cell repeats) and orders the items as they first appear, whatever the ids'
dtype: pinned to the plain definitions on random tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evalign.errors import InputError
from evalign.meta.breakdown import item_arrays

DTYPES = ["object", "string[pyarrow]", "int"]


def _table(rng: np.random.Generator, dtype: str) -> pd.DataFrame:
    rows = [(f"s{s}", int(i)) for s in range(4) for i in rng.permutation(30) if rng.random() > 0.25]
    t = pd.DataFrame(rows, columns=["system", "id"]).sample(frac=1, random_state=int(rng.integers(99))).reset_index(drop=True)
    t["id"] = t["id"].astype(dtype) if dtype == "int" else t["id"].map(lambda i: f"q{i}").astype(dtype)
    t["h"] = rng.integers(1, 6, len(t)).astype(float)
    t["m"] = rng.normal(size=len(t))
    return t


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", range(4))
def test_items_in_order_of_first_appearance(dtype: str, seed: int) -> None:
    t = _table(np.random.default_rng(seed), dtype)
    got = item_arrays(t, "h", ["m"])
    assert got.items == tuple(dict.fromkeys(map(str, t["id"])))
    assert got.systems == tuple(sorted(map(str, t["system"].unique())))
    for r in t.sample(5, random_state=seed).itertuples():
        assert got.metrics["m"][got.systems.index(r.system), got.items.index(str(r.id))] == r.m


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", range(3))
def test_a_repeated_id_and_system_names_the_first_repeat(dtype: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    t = _table(rng, dtype)
    k = int(rng.integers(1, len(t) - 1))
    j = int(rng.integers(0, k))
    t.loc[k, ["id", "system"]] = t.loc[j, ["id", "system"]].to_numpy()  # row k repeats row j's cell
    first = int(np.flatnonzero(t.duplicated(["id", "system"]).to_numpy())[0])
    t.attrs["source"] = "ratings.csv"
    with pytest.raises(InputError) as e:
        item_arrays(t, "h", ["m"])
    assert e.value.line == first + 1 and e.value.file == "ratings.csv" and e.value.field == "id"
    assert "duplicate (id, system)" in str(e.value)
