"""A prediction-powered leaderboard: each system's win rate (against a baseline, or against all others)
and Bradley-Terry strength estimated from a judge's verdicts on every battle and human verdicts on a
subset, with intervals that account for the judge's errors and the number of human labels
(:mod:`evalign.rank.ppi`, PPI++). Beside each: the plain judge estimate (judge verdicts alone, interval
as if the judge were right) and the humans-only estimate (the labelled battles alone).

Conventions (see :mod:`evalign.rank`): a battle's score for system A is 1 (A wins), 1/2 (tie), 0 (B
wins). The human labels must be a random sample of the battles (PPI's assumption). A judge verdict that
is unparseable or missing predicts 1/2; a battle without a human verdict is unlabelled.

* Win rate of ``s`` against ``baseline``: the mean score of ``s`` over their battles; against all
  others (no baseline): the mean score of ``s`` over all its battles.
* Bradley-Terry: logistic regression of A's score on ``x = e_A - e_B`` without the reference system's
  column (``anchor``, else the first system), on the Elo-like scale ``R = scale / ln(base) * theta``
  shifted as :func:`evalign.rank.bradley_terry` does (the anchor at ``anchor_rating``, else the mean at
  ``init_rating``); intervals of the shifted ratings from the PPI covariance.
* ``n_to_halve``: human labels for an interval half as wide (:func:`evalign.rank.ppi.labels_to_halve`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from evalign.rank.battles import A_WINS, B_WINS, TIE, BattleArrays
from evalign.rank.bradley_terry import BTSettings, bradley_terry
from evalign.rank.ppi import PPILogistic, ppi_logistic, ppi_mean, z_value

#: a verdict code -> A's score (unparseable / missing: NaN)
_SCORE = {A_WINS: 1.0, B_WINS: 0.0, TIE: 0.5}


def scores(codes: np.ndarray) -> np.ndarray:
    """A's score per battle (1, 1/2, 0; NaN for unparseable and missing verdicts)."""
    c = np.asarray(codes).astype(np.int64)
    out = np.full(c.shape, np.nan)
    for code, value in _SCORE.items():
        out[c == code] = value
    return out


@dataclass(frozen=True)
class PPISettings:
    """Settings of :func:`ppi_leaderboard`: ``baseline`` (None: win rate against all others), ``alpha``
    (1 - the intervals' level) and the Bradley-Terry scale (``bt``: scale, base, anchor, ratings)."""

    baseline: str | None = None
    alpha: float = 0.05
    bt: BTSettings = BTSettings(n_bootstrap=0)  # noqa: RUF009 (frozen)


@dataclass(frozen=True)
class PPIBoard:
    """The prediction-powered leaderboard.

    ``win_rates`` columns: ``system, judge, judge_low, judge_high, ppi, ppi_low, ppi_high, humans,
    humans_low, humans_high, n_battles, n_human, lam, n_to_halve, n_effective`` (rates in [0, 1]) and
    ``judge_note, ppi_note, humans_note``: why that interval is not given (NaN) where the data cannot
    support one (one value, all values equal, a zero-width PPI interval), else None.
    ``bt`` columns: ``system, judge_bt, ppi_bt, ppi_low, ppi_high, humans_bt, n_to_halve, ppi_note`` (or None
    when the fit has no finite optimum: ``notes`` says why). ``target``: what the win rate is against.
    """

    win_rates: pd.DataFrame
    bt: pd.DataFrame | None
    target: str
    n_battles: int
    n_human: int
    notes: tuple[str, ...]
    settings: PPISettings


def interval_gap(y: np.ndarray, what: str = "labels") -> str | None:
    """Why the values ``y`` cannot support an interval, or None when they can: ``n < 2`` (one value has
    no spread to estimate) or ``all <what> equal`` (a spread of zero is no evidence of certainty)."""
    if y.size < 2:
        return f"n < 2: {y.size} {what.rstrip('s') if y.size == 1 else what}"
    if float(np.ptp(y)) == 0.0:
        return f"all {y.size} {what} equal"
    return None


def _normal(y: np.ndarray, z: float, what: str) -> tuple[float, float, float, str | None]:
    """Mean, normal interval and :func:`interval_gap`'s reason (the interval NaN when there is one)."""
    if y.size == 0:
        return math.nan, math.nan, math.nan, None
    m = float(y.mean())
    gap = interval_gap(y, what)
    if gap is not None:
        return m, math.nan, math.nan, gap
    se = float(np.std(y) / np.sqrt(y.size))
    return m, m - z * se, m + z * se, None


def _win_rate_row(system: str, mine: np.ndarray, yj: np.ndarray, yh: np.ndarray, alpha: float) -> dict[str, Any]:
    """One system's row: ``mine`` selects its battles, ``yj`` / ``yh`` its scores there by judge / humans.
    ``*_note``: why an interval is not given (:func:`interval_gap`), else None."""
    z = z_value(alpha)
    j, h = yj[mine], yh[mine]
    jf = np.where(np.isnan(j), 0.5, j)
    lab = ~np.isnan(h)
    row: dict[str, Any] = {"system": system}
    row["judge"], row["judge_low"], row["judge_high"], row["judge_note"] = _normal(j[~np.isnan(j)], z, "verdicts")
    row["humans"], row["humans_low"], row["humans_high"], row["humans_note"] = _normal(h[lab], z, "human labels")
    row.update(n_battles=int(mine.sum()), n_human=int(lab.sum()))
    if lab.sum() >= 2 and (~lab).sum() >= 2:
        r = ppi_mean(h[lab], jf[lab], jf[~lab], alpha=alpha)
        row.update(ppi=r.estimate, ppi_low=r.low, ppi_high=r.high, lam=r.lam, n_to_halve=r.n_to_halve,
                   n_effective=r.n_effective, ppi_note=None)
        if r.high - r.low == 0.0:  # every human label equal and lambda 0: no spread, no interval
            row.update(ppi_low=math.nan, ppi_high=math.nan,
                       ppi_note=f"zero width: {interval_gap(h[lab], 'human labels') or 'no spread'}, "
                                f"lambda {r.lam:g}")
    else:
        row.update(ppi=math.nan, ppi_low=math.nan, ppi_high=math.nan, lam=math.nan, n_to_halve=math.nan,
                   n_effective=math.nan, ppi_note="fewer than 2 battles with and 2 without a human label")
    return row


def ppi_win_rates(ba: BattleArrays, human: np.ndarray, settings: PPISettings) -> pd.DataFrame:
    """Per system, the plain judge, PPI++ and humans-only win rate (module doc); ``human``: verdict codes
    aligned with the battles (MISSING where unlabelled)."""
    yj, yh = scores(ba.code), scores(human)
    rows = []
    base = ba.index(settings.baseline, "baseline") if settings.baseline is not None else None
    for i, s in enumerate(ba.systems):
        if base is not None:
            if i == base:
                continue
            mine_a, mine_b = (ba.a == i) & (ba.b == base), (ba.b == i) & (ba.a == base)
        else:
            mine_a, mine_b = ba.a == i, ba.b == i
        mine = mine_a | mine_b
        sj = np.where(mine_b, 1.0 - yj, yj)  # the score of system i
        sh = np.where(mine_b, 1.0 - yh, yh)
        rows.append(_win_rate_row(s, mine, sj, sh, settings.alpha))
    cols = ["system", "judge", "judge_low", "judge_high", "ppi", "ppi_low", "ppi_high", "humans", "humans_low",
            "humans_high", "n_battles", "n_human", "lam", "n_to_halve", "n_effective", "judge_note", "ppi_note",
            "humans_note"]
    return pd.DataFrame(rows)[cols].sort_values("ppi", ascending=False, kind="stable").reset_index(drop=True)


def _distinct(a: np.ndarray, b: np.ndarray, y: np.ndarray, yhat: np.ndarray, k: int
              ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """The distinct (a, b, y, yhat) rows of battles (scores in {0, 1/2, 1}) and how many battles each is."""
    key = ((a.astype(np.int64) * k + b) * 3 + np.rint(2 * y).astype(np.int64)) * 3 + np.rint(2 * yhat).astype(np.int64)
    uniq, counts = np.unique(key, return_counts=True)
    ab, yi = np.divmod(uniq, 9)
    return (ab // k, ab % k, (yi // 3) / 2.0, (yi % 3) / 2.0), counts


def _design(a: np.ndarray, b: np.ndarray, k: int, ref: int) -> np.ndarray:
    """Bradley-Terry rows: +1 for system a, -1 for system b, the column of ``ref`` left out."""
    X = np.zeros((a.size, k))
    X[np.arange(a.size), a] = 1.0
    X[np.arange(a.size), b] -= 1.0
    return np.delete(X, ref, axis=1)


def _shift(k: int, ref: int, bt: BTSettings, anchor: int | None) -> tuple[np.ndarray, float]:
    """The matrix ``W`` (k x (k-1)) and offset with ratings ``= W @ theta * c + offset`` (``c`` the scale)."""
    W = np.delete(np.eye(k), ref, axis=1)
    if anchor is None:
        W = W - W.mean(axis=0, keepdims=True)
        return W, bt.init_rating
    return W, bt.anchor_rating


def ppi_bradley_terry(ba: BattleArrays, human: np.ndarray, settings: PPISettings) -> tuple[pd.DataFrame | None, str | None]:
    """Per system, the plain judge, PPI++ and humans-only Bradley-Terry rating (module doc); a note
    instead when the PPI fit has no finite optimum."""
    bt = settings.bt
    k = len(ba.systems)
    anchor = ba.index(bt.anchor, "anchor") if bt.anchor is not None else None
    ref = anchor if anchor is not None else 0
    yj, yh = scores(ba.code), scores(human)
    yj = np.where(np.isnan(yj), 0.5, yj)
    lab = ~np.isnan(yh)
    # sufficient statistics: a battle's gradient depends only on (a, b, human score, judge score)
    rows, w = _distinct(ba.a[lab], ba.b[lab], yh[lab], yj[lab], k)
    rows_u, w_u = _distinct(ba.a[~lab], ba.b[~lab], yj[~lab], yj[~lab], k)
    try:
        fit: PPILogistic = ppi_logistic(_design(rows[0], rows[1], k, ref), rows[2], rows[3],
                                        _design(rows_u[0], rows_u[1], k, ref), rows_u[3], alpha=settings.alpha,
                                        weights=w, weights_unlabeled=w_u)
    except (ValueError, np.linalg.LinAlgError) as e:
        return None, f"no PPI Bradley-Terry: {e}"
    c = bt.scale / math.log(bt.base)
    W, offset = _shift(k, ref, bt, anchor)
    est = c * (W @ fit.coef) + offset
    center = c * (W @ fit.center) + offset
    se = c * np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", W, fit.cov, W), 0.0))
    z = z_value(settings.alpha)
    plain = bradley_terry(ba, settings=BTSettings(scale=bt.scale, base=bt.base, init_rating=bt.init_rating,
                                                  anchor=bt.anchor, anchor_rating=bt.anchor_rating, n_bootstrap=0))
    humans = np.full(k, np.nan)
    if lab.sum():
        hb = BattleArrays(ba.systems, ba.a[lab], ba.b[lab], human[lab])
        humans = bradley_terry(hb, settings=BTSettings(scale=bt.scale, base=bt.base, init_rating=bt.init_rating,
                                                       anchor=bt.anchor, anchor_rating=bt.anchor_rating,
                                                       n_bootstrap=0)).rating
    halve = [fit.n_to_halve(W[i]) if np.any(W[i]) else math.nan for i in range(k)]
    low, high = center - z * se, center + z * se
    gap = interval_gap(yh[lab], "human labels")
    note = None if gap is None else f"zero width: {gap}"
    if note is not None:  # every human label equal: the rectified fit has no spread to estimate
        low, high = np.full(k, np.nan), np.full(k, np.nan)
    table = pd.DataFrame({"system": ba.systems, "judge_bt": plain.rating, "ppi_bt": est, "ppi_low": low,
                          "ppi_high": high, "humans_bt": humans, "n_to_halve": halve, "ppi_note": note})
    return table.sort_values("ppi_bt", ascending=False, kind="stable").reset_index(drop=True), None


def ppi_leaderboard(ba: BattleArrays, human: np.ndarray, settings: PPISettings = PPISettings()) -> PPIBoard:
    """The prediction-powered leaderboard of the judge's battles ``ba`` with the human verdict codes
    ``human`` (aligned with the battles; MISSING where a battle has no human label)."""
    human = np.asarray(human)
    if human.shape != ba.code.shape:
        raise ValueError(f"human verdicts ({human.size}) and battles ({ba.n}) differ in number")
    notes: list[str] = []
    n_h = int(np.isin(human, (A_WINS, B_WINS, TIE)).sum())
    wr = ppi_win_rates(ba, human, settings)
    short = wr.loc[wr["ppi"].isna(), "system"].tolist()
    if short:
        notes.append(f"no PPI win rate for {', '.join(short)}: fewer than 2 battles with and 2 without a human label")
    for col, what in (("humans", "humans-only"), ("ppi", "PPI"), ("judge", "judge")):
        gaps = [f"{r['system']} ({r[col + '_note']})" for r in wr.to_dict("records")
                if isinstance(r[col + "_note"], str) and not (col == "ppi" and r["system"] in short)]
        if gaps:
            notes.append(f"no {what} interval for {', '.join(gaps)}: the data cannot support one")
    bt, note = ppi_bradley_terry(ba, human, settings)
    if note:
        notes.append(note)
    elif bt is not None and isinstance(bt["ppi_note"].iloc[0], str):
        notes.append(f"no PPI Bradley-Terry interval ({bt['ppi_note'].iloc[0]}): the data cannot support one")
    target = f"against {settings.baseline}" if settings.baseline else "against all other systems (every battle)"
    return PPIBoard(wr, bt, target, ba.n, n_h, tuple(notes), settings)


__all__ = ["PPIBoard", "PPISettings", "ppi_bradley_terry", "ppi_leaderboard", "ppi_win_rates", "scores"]
