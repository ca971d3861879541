"""PPI++ on sufficient statistics: the logistic fit with rows given once and a count equals the fit of
the rows repeated, and the prediction-powered Bradley-Terry board (battles aggregated to distinct
(system A, system B, human score, judge score) rows) equals the fit of the battles one by one, to 1e-9."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalign.rank import BTSettings, battle_arrays, ppi_board
from evalign.rank.battles import MISSING
from evalign.rank.ppi import ppi_logistic
from evalign.rank.ppi_board import PPISettings, ppi_bradley_terry, scores


def _fields(fit) -> list[np.ndarray]:
    return [fit.coef, fit.center, fit.low, fit.high, fit.cov, fit.rectifier, fit.imputed,
            np.array([fit.lam, fit.lam_ci, fit.n, fit.N])]


def test_counted_rows_equal_the_rows_repeated():
    rng = np.random.default_rng(0)
    for trial in range(6):
        d, m, mu = 3, 25, 30
        X, Xu = rng.normal(size=(m, d)), rng.normal(size=(mu, d))
        y = rng.choice([0.0, 0.5, 1.0], m)
        yhat = np.where(rng.random(m) < 0.7, y, rng.choice([0.0, 0.5, 1.0], m))
        yhu = rng.choice([0.0, 0.5, 1.0], mu)
        w, w_u = rng.integers(1, 5, m), rng.integers(1, 5, mu) * (trial != 5)  # the last: every item labelled
        keep_u = w_u > 0
        ours = ppi_logistic(X, y, yhat, Xu[keep_u], yhu[keep_u], weights=w, weights_unlabeled=w_u[keep_u])
        rep, rep_u = np.repeat(np.arange(m), w), np.repeat(np.arange(mu), w_u)
        theirs = ppi_logistic(X[rep], y[rep], yhat[rep], Xu[rep_u], yhu[rep_u])
        assert ours.fallback == theirs.fallback
        for a, b in zip(_fields(ours), _fields(theirs), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


def _battles(k: int, n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    skill = rng.normal(size=k)
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    u = rng.random(n)
    p = 1 / (1 + np.exp(-(skill[a] - skill[b])))
    human = np.where(u < 0.85 * p, 0, np.where(u < 0.85, 1, 2))  # codes: A, B, tie
    judge = np.where(rng.random(n) < 0.75, human, rng.integers(0, 4, n))  # some unparseable (3)
    human = np.where(rng.random(n) < 0.3, human, MISSING)  # 30% labelled
    verdict = np.array(["A", "B", "tie", "unparseable"])[judge]
    return pd.DataFrame({"system_a": [f"m{i}" for i in a], "system_b": [f"m{i}" for i in b], "verdict": verdict}), human


def _one_by_one(a, b, y, yhat, k):
    """``_distinct`` without the aggregation: every battle its own row, count 1."""
    return (a, b, y, yhat), np.ones(a.size, dtype=np.int64)


def test_ppi_bradley_terry_equals_the_battles_one_by_one(monkeypatch):
    for seed, anchor in ((1, None), (2, "m2"), (3, None)):
        df, human = _battles(6, 600, seed)
        ba = battle_arrays(df)
        settings = PPISettings(bt=BTSettings(n_bootstrap=0, anchor=anchor))
        with monkeypatch.context() as m:
            m.setattr(ppi_board, "_distinct", _one_by_one)
            ref, ref_note = ppi_bradley_terry(ba, human, settings)
        table, note = ppi_bradley_terry(ba, human, settings)
        assert note is None and ref_note is None and table is not None and ref is not None
        assert table["system"].tolist() == ref["system"].tolist()
        for col in ("judge_bt", "ppi_bt", "ppi_low", "ppi_high", "humans_bt", "n_to_halve"):
            np.testing.assert_allclose(table[col], ref[col], rtol=1e-9, atol=1e-9)
        assert table["ppi_low"].notna().all() and np.ptp(table["ppi_bt"]) > 10
        lab = human != MISSING
        yj = np.where(np.isnan(scores(ba.code)), 0.5, scores(ba.code))
        _, w = ppi_board._distinct(ba.a[lab], ba.b[lab], scores(human)[lab], yj[lab], 6)
        assert w.sum() == lab.sum() and w.size < 0.6 * lab.sum()  # the labelled battles collapse to fewer rows


def test_scores_of_verdict_codes():
    np.testing.assert_array_equal(scores(np.array([0, 1, 2, 3, 4, 2])), [1.0, 0.0, 0.5, np.nan, np.nan, 0.5])
