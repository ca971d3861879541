"""The vectorised order matching and per-system counts equal the pandas reading they replaced
(groupby cumcount + merge; drop_duplicates + groupby mean), on random battle tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalign.rank import battle_arrays, combine_orders, position_agreement, system_counts
from evalign.rank.battles import SWAP_CODE, VERDICTS


def _reference_pairs(ba) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = np.minimum(ba.a, ba.b), np.maximum(ba.a, ba.b)
    frame = pd.DataFrame({"id": ba.ids, "lo": lo, "hi": hi, "fwd": ba.a < ba.b, "row": np.arange(ba.n)})
    frame["nth"] = frame.groupby(["id", "lo", "hi", "fwd"], sort=False).cumcount()
    m = frame[frame["fwd"]].merge(frame[~frame["fwd"]], on=["id", "lo", "hi", "nth"], suffixes=("_f", "_b"))
    return m["row_f"].to_numpy(), m["row_b"].to_numpy()


def _random_table(rng: np.random.Generator) -> pd.DataFrame:
    n, k = int(rng.integers(1, 60)), int(rng.integers(2, 5))
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    names = np.array(["w", "x", "y", "z"])
    return pd.DataFrame({
        "id": rng.integers(0, max(1, n // 3), n).astype(str), "system_a": names[a], "system_b": names[b],
        "verdict": rng.choice(["A", "B", "tie", "unparseable"], n),
        "len_a": np.where(rng.random(n) < 0.2, np.nan, rng.integers(1, 9, n)), "len_b": rng.integers(1, 9, n) * 1.0,
    })


def test_order_matching_and_counts_equal_the_pandas_reading() -> None:
    rng = np.random.default_rng(47)
    for _ in range(200):
        df = _random_table(rng)
        ba = battle_arrays(df)
        f, s = _reference_pairs(ba)
        cf, cs = ba.code[f], SWAP_CODE[ba.code[s]]
        both = (cf <= 2) & (cs <= 2)
        pos = position_agreement(ba)
        assert pos.n_pairs == int(both.sum()) and pos.n_unmatched == ba.n - 2 * f.size
        if both.any():
            assert pos.agreement == float(((cf == cs) & both).sum() / both.sum())
        want_df = df.copy()
        col = want_df["verdict"].astype(object).to_numpy(copy=True)
        col[f] = np.array(VERDICTS, dtype=object)[np.where(both, np.where(cf == cs, cf, 2), 3)]
        want_df["verdict"] = col
        want_df = want_df.drop(index=want_df.index[s]).reset_index(drop=True)
        pd.testing.assert_frame_equal(combine_orders(df), want_df)
        lens = pd.DataFrame({"s": np.r_[ba.a, ba.b], "len": np.r_[ba.len_a, ba.len_b], "id": np.r_[ba.ids, ba.ids]})
        per = lens.dropna(subset=["len"]).drop_duplicates(["s", "id"]).groupby("s")["len"].mean()
        got = system_counts(ba)["mean_length"].to_numpy()
        want = np.full(len(ba.systems), np.nan)
        want[per.index.to_numpy()] = per.to_numpy()
        np.testing.assert_array_equal(got, want)
