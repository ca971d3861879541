"""Calibration of a judge's stated probabilities: does "70% sure" come true 70% of the time?

Two kinds of stated probability (the column convention of :mod:`evalign.evaluate.columns`):

* pairwise ``J.p_a`` = P(response A is better); the outcome is the humans' majority, 1 = A, 0 = B
  (pairs the humans call a tie are left out and counted);
* graded ``J.p`` = the probability of the grade the judge chose; the outcome is 1 when that grade is
  the humans' grade (the rating column rounded to the nearest grade), else 0.

Statistics (pure functions over arrays, NaN = none):

* **Brier score** (Brier 1950): mean of ``(p - y)^2``, 0 best;
* **expected calibration error** (ECE; Naeini et al. 2015, Guo et al. 2017): the stated
  probabilities binned into ``n_bins`` (default 10) **equal-width bins on [0, 1]** as
  scikit-learn's ``calibration_curve(strategy="uniform")`` bins them (bin ``k`` holds ``k/n < p <=
  (k+1)/n``, the first bin also ``p = 0``); ``ECE = sum_k (n_k / n) |mean(y in k) - mean(p in k)|``,
  empty bins left out; the per-bin figures are the **reliability diagram**;
* the **probability-weighted verdict** (alpaca_eval's weighted judges, Dubois et al. 2024): the
  judge's preference is the expected one, ``P(B better)``; its agreement with the humans is
  alpaca_eval's default ``AbsoluteScoringRule``, ``1 - |P(B) - t|`` averaged over pairs, ``t`` = 0
  (humans: A), 1 (B), 1/2 (tie) - the soft counterpart of preference accuracy with ties.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from evalign.errors import InputError

DEFAULT_BINS = 10


@dataclass(frozen=True)
class Calibration:
    """A judge's calibration: ``n`` outcomes used (``n_left_out``: with no probability or, for
    pairs, a human tie), ``brier``, ``ece`` over ``n_bins`` equal-width bins on [0, 1], and ``bins``
    (the reliability diagram: ``bin_low, bin_high, n, mean_p, observed``; empty bins left out).
    ``kind``: ``pairwise`` (P(A better) vs the humans' A/B) or ``graded`` (P(chosen grade) vs
    whether it is the humans' grade)."""

    judge: str
    kind: str
    n: int
    brier: float
    ece: float
    n_bins: int
    bins: pd.DataFrame = field(repr=False)
    n_left_out: int = 0

    @property
    def binning(self) -> str:
        return f"{self.n_bins} equal-width bins on [0, 1], weighted by their counts"

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"judge": self.judge, "kind": self.kind, "n": self.n, "n_left_out": self.n_left_out,
                "brier": self.brier, "ece": self.ece, "binning": self.binning, "bins": self.bins.to_dict("records")}


def brier_score(p: np.ndarray, y: np.ndarray) -> float:
    """Mean squared difference of probabilities ``p`` and outcomes ``y`` (0 / 1, or a share), over
    the entries where both are finite; NaN when there is none."""
    p, y = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(p) & np.isfinite(y)
    return float(np.mean((p[ok] - y[ok]) ** 2)) if ok.any() else float("nan")


def reliability_bins(p: np.ndarray, y: np.ndarray, n_bins: int = DEFAULT_BINS) -> pd.DataFrame:
    """The reliability diagram: per equal-width bin of ``p`` on [0, 1] (right-closed, the first also
    holding 0: scikit-learn's uniform bins), its ``bin_low``, ``bin_high``, ``n``, ``mean_p`` and
    ``observed`` (mean outcome); empty bins left out."""
    if n_bins < 1:
        raise InputError(f"must be at least 1, got {n_bins}", field="n_bins")
    p, y = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(p) & np.isfinite(y)
    p, y = p[ok], y[ok]
    if np.any((p < 0) | (p > 1)):
        raise InputError("probabilities must lie in [0, 1]", field="p")
    k = np.searchsorted(np.linspace(0.0, 1.0, n_bins + 1)[1:-1], p)
    rows = []
    for b in range(n_bins):
        sel = k == b
        if sel.any():
            rows.append({"bin_low": b / n_bins, "bin_high": (b + 1) / n_bins, "n": int(sel.sum()),
                         "mean_p": float(p[sel].mean()), "observed": float(y[sel].mean())})
    return pd.DataFrame(rows, columns=["bin_low", "bin_high", "n", "mean_p", "observed"])


def expected_calibration_error(p: np.ndarray, y: np.ndarray, n_bins: int = DEFAULT_BINS) -> float:
    """ECE over ``n_bins`` equal-width bins on [0, 1] (see the module doc); NaN without outcomes."""
    bins = reliability_bins(p, y, n_bins)
    n = bins["n"].sum()
    if not n:
        return float("nan")
    return float(np.sum(bins["n"] / n * np.abs(bins["observed"] - bins["mean_p"])))


def calibration(p: np.ndarray, y: np.ndarray, *, judge: str = "judge", kind: str = "pairwise",
                n_bins: int = DEFAULT_BINS, n_left_out: int = 0) -> Calibration:
    """The :class:`Calibration` of probabilities ``p`` against outcomes ``y`` (NaN = none)."""
    p, y = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(p) & np.isfinite(y)
    return Calibration(judge, kind, int(ok.sum()), brier_score(p, y), expected_calibration_error(p, y, n_bins),
                       n_bins, reliability_bins(p, y, n_bins), n_left_out + int((~ok).sum()))


def pairwise_outcomes(labels: np.ndarray) -> np.ndarray:
    """The outcome of each pair for ``J.p_a``: 1 when the humans' label (+1 A, -1 B, 0 tie) is A, 0
    when B, NaN for a tie or no label."""
    lab = np.asarray(labels, dtype=float)
    return np.where(lab > 0, 1.0, np.where(lab < 0, 0.0, np.nan))


def pairwise_calibration(p_a: np.ndarray, labels: np.ndarray, *, judge: str = "judge",
                         n_bins: int = DEFAULT_BINS) -> Calibration:
    """Calibration of ``J.p_a`` against the humans' pair labels (+1 / -1 / 0; ties left out)."""
    y = pairwise_outcomes(labels)
    ties = int(np.sum(np.asarray(labels, dtype=float) == 0))
    p = np.asarray(p_a, dtype=float)
    keep = np.isfinite(y)
    return calibration(p[keep], y[keep], judge=judge, kind="pairwise", n_bins=n_bins, n_left_out=ties)


def graded_calibration(p_grade: np.ndarray, grade: np.ndarray, human: np.ndarray, *, judge: str = "judge",
                       n_bins: int = DEFAULT_BINS) -> Calibration:
    """Calibration of ``J.p`` (the probability of the chosen ``grade``) against whether the chosen
    grade is the humans' (``human`` rounded to the nearest grade)."""
    g, h = np.asarray(grade, dtype=float), np.asarray(human, dtype=float)
    y = np.where(np.isfinite(g) & np.isfinite(h), (np.rint(h) == g).astype(float), np.nan)
    return calibration(p_grade, y, judge=judge, kind="graded", n_bins=n_bins)


def weighted_preference_accuracy(p_a: np.ndarray, labels: np.ndarray) -> float:
    """The probability-weighted verdict's agreement with the humans' pair labels (+1 / -1 / 0), as
    alpaca_eval scores a weighted judge (``AbsoluteScoringRule``): the mean over pairs with both of
    ``1 - |P(B) - t|``, ``P(B) = 1 - p_a``, ``t`` = 0 / 1 / 0.5 for A / B / tie. NaN without pairs."""
    p, lab = np.asarray(p_a, dtype=float), np.asarray(labels, dtype=float)
    ok = np.isfinite(p) & np.isfinite(lab)
    if not ok.any():
        return float("nan")
    t = np.where(lab[ok] > 0, 0.0, np.where(lab[ok] < 0, 1.0, 0.5))
    return float(np.mean(1.0 - np.abs((1.0 - p[ok]) - t)))


__all__ = ["DEFAULT_BINS", "Calibration", "brier_score", "calibration", "expected_calibration_error",
           "graded_calibration", "pairwise_calibration", "pairwise_outcomes", "reliability_bins",
           "weighted_preference_accuracy"]
