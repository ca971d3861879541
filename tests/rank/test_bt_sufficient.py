"""Bradley-Terry on sufficient statistics: the fit on the (system_a, system_b, outcome) counts equals a fit on
the battles one by one, and every bootstrap resample (a multinomial draw over those counts, or over items
with ``cluster=True``) equals the one-by-one fit of the battles that draw stands for, to 1e-9."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from evalign.rank import BTSettings, battle_arrays, bradley_terry
from evalign.rank.battles import SWAP_CODE

LN10 = math.log(10.0)


def random_battles(k: int, n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    strength = rng.normal(size=k)
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    p = 1.0 / (1.0 + np.exp(-(strength[a] - strength[b])))
    u = rng.random(n)
    verdict = np.where(u < 0.8 * p, "A", np.where(u < 0.8, "B", np.where(u < 0.95, "tie", "unparseable")))
    return pd.DataFrame({"id": [f"q{i}" for i in rng.integers(0, n // 3, n)], "system_a": [f"m{i}" for i in a],
                         "system_b": [f"m{i}" for i in b], "verdict": verdict})


def per_battle_fit(a: np.ndarray, b: np.ndarray, code: np.ndarray, k: int) -> np.ndarray:
    """The MLE from battle rows one by one (no aggregation): the log-likelihood summed over battles, a
    win 1, a tie half a win for each side; Newton on the dense per-battle design, centred ratings."""
    y = np.where(code == 0, 1.0, np.where(code == 2, 0.5, 0.0))
    X = np.zeros((a.size, k))
    X[np.arange(a.size), a] = 1.0
    X[np.arange(a.size), b] = -1.0
    th = np.zeros(k)
    for _ in range(100):
        mu = 1.0 / (1.0 + np.exp(-(X @ th)))
        grad = X.T @ (y - mu)
        H = (X.T * (mu * (1 - mu))) @ X + np.full((k, k), 1.0 / k)
        step = np.linalg.solve(H, grad)
        th += step
        th -= th.mean()
        if np.abs(step).max() < 1e-13:
            break
    return 400.0 / LN10 * th + 1000.0


def test_the_count_fit_equals_the_battle_by_battle_fit() -> None:
    for seed in range(5):
        df = random_battles(k=6, n=600, seed=seed)
        ba = battle_arrays(df)
        r = ba.resolved()
        ours = bradley_terry(df, settings=BTSettings(n_bootstrap=0))
        ref = per_battle_fit(ba.a[r], ba.b[r], ba.code[r].astype(np.int64), len(ba.systems))
        np.testing.assert_allclose(ours.rating, ref, atol=1e-9, rtol=0)


def _cells(ba: object) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each resolved battle's cell (one per unordered pair and outcome) and the cells' systems and outcome."""
    r = ba.resolved()
    k = len(ba.systems)
    a, b, code = ba.a[r], ba.b[r], ba.code[r].astype(np.int64)
    flip = a > b
    a, b, code = np.where(flip, b, a), np.where(flip, a, b), np.where(flip, SWAP_CODE[code], code)
    cells, inv = np.unique((a * k + b) * 3 + code, return_inverse=True)
    ca, rest = np.divmod(cells, 3 * k)
    cb, cc = np.divmod(rest, 3)
    return inv, ca, cb, cc


def test_every_battle_resample_equals_the_battle_by_battle_fit_of_its_draw() -> None:
    df = random_battles(k=5, n=500, seed=21)
    ba = battle_arrays(df)
    k = len(ba.systems)
    inv, ca, cb, cc = _cells(ba)
    n = inv.size
    res = bradley_terry(df, settings=BTSettings(n_bootstrap=6, seed=4))
    # the draw of resample i: multinomial counts of the cells, n battles (bootstrap(draw="counts"))
    draws = np.random.default_rng(4).multinomial(n, np.bincount(inv) / n, size=6)
    for i, counts in enumerate(draws):
        a, b, code = np.repeat(ca, counts), np.repeat(cb, counts), np.repeat(cc, counts)
        np.testing.assert_allclose(res.boot[i], per_battle_fit(a, b, code, k), atol=1e-9, rtol=0)


def test_every_item_resample_equals_the_battle_by_battle_fit_of_its_items() -> None:
    df = random_battles(k=5, n=500, seed=22)
    ba = battle_arrays(df)
    k = len(ba.systems)
    r = ba.resolved()
    items, item_of = np.unique(ba.ids[r], return_inverse=True)
    res = bradley_terry(df, settings=BTSettings(n_bootstrap=4, seed=9, cluster=True))
    draws = np.random.default_rng(9).multinomial(items.size, np.full(items.size, 1.0 / items.size), size=4)
    a0, b0, c0 = ba.a[r], ba.b[r], ba.code[r].astype(np.int64)
    for i, counts in enumerate(draws):
        times = counts[item_of]  # each battle comes as often as its item was drawn
        a, b, code = np.repeat(a0, times), np.repeat(b0, times), np.repeat(c0, times)
        np.testing.assert_allclose(res.boot[i], per_battle_fit(a, b, code, k), atol=1e-9, rtol=0)


def test_the_structured_style_fit_equals_the_dense_logistic_regression() -> None:
    from evalign.rank.style import fit_logistic, fit_style_bt, style_bootstrap

    rng = np.random.default_rng(5)
    k, n, d = 6, 800, 3
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    z = rng.normal(size=(n, d))
    eta = rng.normal(size=k)[a] - rng.normal(size=k)[b] + z @ np.array([0.5, -0.3, 0.1])
    u = rng.random(n)
    p = 1.0 / (1.0 + np.exp(-eta))
    y = np.where(u < 0.85 * p, 1.0, np.where(u < 0.85, 0.0, 0.5))
    for ref in (0, 3):
        X = np.zeros((n, k))
        X[np.arange(n), a] = 1.0
        X[np.arange(n), b] -= 1.0
        dense = np.hstack([np.delete(X, ref, axis=1), z])
        want, want_cov, ok = fit_logistic(dense, y)
        got, got_cov, conv = fit_style_bt(a, b, y, z, k, ref=ref)
        assert ok and conv
        np.testing.assert_allclose(got, want, atol=1e-9, rtol=0)
        np.testing.assert_allclose(got_cov, want_cov, atol=1e-9, rtol=1e-7)
    # a resample's weights are the battles repeated: the same fit as the repeated rows, warm start or not
    counts = np.bincount(np.random.default_rng(1).integers(0, n, n), minlength=n)
    rows = np.repeat(np.arange(n), counts)
    weighted = fit_style_bt(a, b, y, z, k, weights=counts, start=got)[0]
    repeated = fit_style_bt(a[rows], b[rows], y[rows], z[rows], k)[0]
    np.testing.assert_allclose(weighted, repeated, atol=1e-9, rtol=0)
    boot = style_bootstrap(a, b, y, z, k, n_bootstrap=3, seed=1)
    np.testing.assert_allclose(boot[0], fit_style_bt(a, b, y, z, k, weights=counts)[0], atol=1e-9, rtol=0)
    assert boot.shape == (3, k - 1 + d) and not np.allclose(boot[1], boot[0])
