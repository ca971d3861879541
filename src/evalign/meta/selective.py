"""Selective judging with a guarantee: on which items can a judge's verdict be taken, and which
must a person still read (Trust or Escalate: Jung, Brahman and Choi, ICLR 2025, arXiv 2407.18370).

Each verdict carries a confidence in [0, 1]. For a risk level ``alpha`` (at most this share of the
verdicts given may disagree with people) and an error level ``delta``, a judge gets a threshold
``lambda`` by **fixed-sequence testing** on a labelled calibration set:

* the candidates are the points of ``numpy.linspace(0, 1, grid)`` with at least ``min_items``
  calibration items whose confidence is at or above them;
* they are tested from the highest down; each gets the exact binomial (Clopper-Pearson) upper
  bound at level ``1 - delta`` of the disagreement rate among its items;
* the threshold is the lowest candidate reached before a bound exceeds ``alpha``.

Then, for a new item exchangeable with the calibration items, with probability at least
``1 - delta`` over the calibration set, the verdicts given (confidence >= threshold) disagree with
people at most ``alpha`` of the time. A **cascade** calibrates each judge on the items the earlier
ones left; the guarantee of the whole cascade follows by the union bound (``delta`` summed over
the stages).

Where upstream gives no guarantee, evalign **abstains** (threshold ``math.inf``: no verdict is
given, every item goes to people) and says why, in three cases: the highest candidate already fails
the bound (upstream keeps it), fewer than ``min_items`` items are there to calibrate on (upstream
accepts everything), and a later cascade stage with fewer than ``min_items`` items left (upstream
reuses the previous stage's threshold).

Pure functions over arrays; the bound of every candidate is computed at once from sorted counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evalign.errors import InputError
from evalign.meta.probes import exact_interval

#: why a judge abstains everywhere (``reason`` of a :class:`SelectiveCalibration`)
TOO_FEW = ("fewer than {min_items} calibration items ({n}): no threshold can be tested, every item goes to "
           "people (upstream accepts every verdict here, with no guarantee)")
TOO_FEW_STAGE = ("fewer than {min_items} items left for this stage ({n}): it decides nothing, they go to people "
                 "(upstream reuses the previous stage's threshold here, with no guarantee)")
TOP_FAILS = ("even the highest candidate threshold ({top:.4f}, {k} of {m} items) has a risk bound {bound:.4f} > "
             "alpha {alpha:g}: no threshold holds the guarantee, every item goes to people (upstream keeps that "
             "threshold, with no guarantee)")


@dataclass(frozen=True)
class SelectiveSettings:
    """The guarantee asked for: at most ``alpha`` disagreement with people among the verdicts given,
    with probability at least ``1 - delta``; candidates on ``numpy.linspace(0, 1, grid)`` with at
    least ``min_items`` calibration items at or above them."""

    alpha: float
    delta: float
    min_items: int = 30
    grid: int = 5000

    def __post_init__(self) -> None:
        for name in ("alpha", "delta"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
                raise InputError(f"must lie strictly between 0 and 1, got {v!r}", field=name)
        for name, low in (("min_items", 1), ("grid", 2)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                raise InputError(f"must be an integer >= {low}, got {v!r}", field=name)

    def promise(self, delta: float | None = None) -> str:
        """The guarantee in words ("with probability >= 0.9, at least 85% of the verdicts given
        agree with people"); ``delta`` for the union bound of a cascade."""
        d = self.delta if delta is None else delta
        return (f"with probability >= {_pct(1 - d, share=True)}, at least {_pct(1 - self.alpha)} of the verdicts "
                f"given agree with people")


def _pct(x: float, share: bool = False) -> str:
    """``0.85`` as ``85%`` (``share``: as ``0.85``), with no trailing zeros."""
    return f"{round(x, 6):g}" if share else f"{round(100 * x, 4):g}%"


@dataclass(frozen=True, eq=False)
class SelectiveCalibration:
    """One judge's threshold: ``threshold`` (``math.inf``: abstain on everything, ``reason`` says
    why), ``coverage`` (share of the ``n`` calibration items at or above it, a count over ``n``),
    ``selective_accuracy`` (agreement among them, NaN when none), ``risk_bound`` (the
    Clopper-Pearson upper bound of their disagreement rate at level ``1 - delta``; for an
    abstaining judge, the bound of the highest candidate, NaN without one), ``n_decided`` and
    ``n_correct``; ``candidates`` (the thresholds tested, highest first) with their ``coverages``
    and ``bounds`` (the risk-coverage curve), and ``risks`` (the disagreement rate among each
    candidate's items)."""

    threshold: float
    coverage: float
    selective_accuracy: float
    risk_bound: float
    n: int
    n_decided: int
    n_correct: int
    alpha: float
    delta: float
    candidates: np.ndarray = field(repr=False)
    coverages: np.ndarray = field(repr=False)
    bounds: np.ndarray = field(repr=False)
    reason: str | None = None
    risks: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)

    @property
    def abstains(self) -> bool:
        """No threshold holds the guarantee: every item goes to people."""
        return math.isinf(self.threshold)

    @property
    def n_candidates(self) -> int:
        """How many candidate thresholds were tested."""
        return len(self.candidates)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (``threshold`` null when abstaining; the curve left out)."""
        return {"threshold": None if self.abstains else self.threshold, "abstains": self.abstains,
                "coverage": self.coverage, "selective_accuracy": _num(self.selective_accuracy),
                "risk_bound": _num(self.risk_bound), "n": self.n, "n_decided": self.n_decided,
                "n_correct": self.n_correct, "alpha": self.alpha, "delta": self.delta,
                "n_candidates": self.n_candidates, "reason": self.reason}


@dataclass(frozen=True, eq=False)
class CascadeCalibration:
    """A cascade's thresholds, one per judge in ``order`` (each calibrated on the items the earlier
    ones left; ``math.inf``: the stage decides nothing); ``decided``: the share of all ``n`` items
    each judge decides; ``coverage`` and ``selective_accuracy`` of the cascade; ``stages``: each
    judge's :class:`SelectiveCalibration` on its items; ``delta_union``: the cascade's error level
    by the union bound (``delta`` times the stages that give verdicts)."""

    order: tuple[str, ...]
    thresholds: tuple[float, ...]
    decided: dict[str, float]
    coverage: float
    selective_accuracy: float
    n: int
    stages: tuple[SelectiveCalibration, ...] = field(repr=False)
    delta_union: float = 0.0

    @property
    def to_people(self) -> float:
        """The share of items no judge decides."""
        return 1.0 - self.coverage

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"order": list(self.order), "thresholds": [None if math.isinf(t) else t for t in self.thresholds],
                "decided": self.decided, "coverage": self.coverage, "to_people": self.to_people,
                "selective_accuracy": _num(self.selective_accuracy), "n": self.n, "delta_union": self.delta_union,
                "stages": [dict(s.to_json(), judge=j) for j, s in zip(self.order, self.stages, strict=True)]}


def _num(x: float) -> float | None:
    return None if not math.isfinite(x) else float(x)


def risk_upper_bound(errors: Any, n: Any, delta: float) -> np.ndarray:
    """The exact binomial (Clopper-Pearson) upper confidence bound at level ``1 - delta`` of a
    disagreement rate with ``errors`` disagreements in ``n`` items (element-wise): the rate ``r``
    with ``P(Binomial(n, r) <= errors) = delta``; 1 when ``errors == n``, NaN when ``n == 0``."""
    from scipy.stats import beta  # scipy: not at import

    k = np.asarray(errors, dtype=float)
    m = np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.asarray(beta.ppf(1.0 - delta, k + 1.0, m - k), dtype=float)
    out = np.where(k >= m, 1.0, out)
    return np.where(m <= 0, np.nan, out)


def accuracy_interval(correct: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The two-sided Clopper-Pearson interval of an accuracy (``correct`` of ``n``; NaN, NaN when
    ``n == 0``)."""
    return exact_interval(int(correct), int(n), confidence)


def _arrays(confidence: Any, correct: Any, where: str = "") -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(confidence, dtype=float).ravel()
    y = np.asarray(correct)
    if y.dtype != bool:
        y = np.asarray(y, dtype=float).ravel()
        if np.any((y != 0) & (y != 1)):
            raise InputError("must be true/false (or 1/0) for every item", field=f"{where}correct")
        y = y.astype(bool)
    y = y.ravel()
    if len(c) != len(y):
        raise InputError(f"{len(c)} confidences but {len(y)} outcomes", field=f"{where}correct")
    bad = ~np.isfinite(c) | (c < 0) | (c > 1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"confidences must lie in [0, 1]; item {i + 1} has {c[i]!r}", field=f"{where}confidence")
    return c, y


def calibrate(confidence: Any, correct: Any, settings: SelectiveSettings) -> SelectiveCalibration:
    """The threshold of one judge: ``confidence`` of each calibration verdict (in [0, 1]) and
    whether it is ``correct`` (agrees with people), tested as the module doc says."""
    c, y = _arrays(confidence, correct)
    return _calibrate(c, y, settings, stage=False)


def _calibrate(c: np.ndarray, y: np.ndarray, s: SelectiveSettings, *, stage: bool) -> SelectiveCalibration:
    n = len(c)
    order = np.argsort(c, kind="stable")
    c_sorted = c[order]
    wrong_suffix = np.concatenate([np.cumsum((~y[order])[::-1])[::-1], [0]])  # errors among items i..n-1
    grid = np.linspace(0.0, 1.0, s.grid)
    first = np.searchsorted(c_sorted, grid, side="left")  # the first item at or above each grid point
    m = n - first
    keep = m >= s.min_items
    cand, m_c, k_c = grid[keep][::-1], m[keep][::-1], wrong_suffix[first[keep]][::-1]  # highest first
    bounds = risk_upper_bound(k_c, m_c, s.delta)
    coverages = m_c / n if n else m_c.astype(float)
    risks = k_c / np.maximum(m_c, 1)
    if not len(cand):
        reason = (TOO_FEW_STAGE if stage else TOO_FEW).format(min_items=s.min_items, n=n)
        return _abstain(n, s, cand, coverages, bounds, reason, bound=float("nan"), risks=risks)
    fails = np.flatnonzero(bounds > s.alpha)
    if len(fails) and fails[0] == 0:
        reason = TOP_FAILS.format(top=cand[0], k=int(k_c[0]), m=int(m_c[0]), bound=bounds[0], alpha=s.alpha)
        return _abstain(n, s, cand, coverages, bounds, reason, bound=float(bounds[0]), risks=risks)
    j = (fails[0] if len(fails) else len(cand)) - 1
    decided, errors = int(m_c[j]), int(k_c[j])
    return SelectiveCalibration(float(cand[j]), decided / n, (decided - errors) / decided, float(bounds[j]), n,
                                decided, decided - errors, s.alpha, s.delta, cand, coverages, bounds, risks=risks)


def _abstain(n: int, s: SelectiveSettings, cand: np.ndarray, coverages: np.ndarray, bounds: np.ndarray,
             reason: str, *, bound: float, risks: np.ndarray) -> SelectiveCalibration:
    return SelectiveCalibration(math.inf, 0.0, float("nan"), bound, n, 0, 0, s.alpha, s.delta, cand, coverages,
                                bounds, reason, risks)


def calibrate_cascade(judges: Mapping[str, tuple[Any, Any]], order: Sequence[str],
                      settings: SelectiveSettings) -> CascadeCalibration:
    """A cascade of judges in ``order`` (cheap first), ``judges`` giving each judge's
    ``(confidence, correct)`` on the same calibration items in the same order: each judge is
    calibrated on the items the earlier ones left (a stage that abstains decides nothing); the rest
    go to people."""
    order = tuple(order)
    if not order:
        raise InputError("name at least one judge", field="order")
    if len(set(order)) != len(order):
        raise InputError(f"a judge is named twice: {', '.join(order)}", field="order")
    missing = [j for j in order if j not in judges]
    if missing:
        raise InputError(f"no confidences for {', '.join(missing)}", field="order")
    arrays = [_arrays(*judges[j], where=f"{j}: ") for j in order]
    n = len(arrays[0][0])
    if any(len(c) != n for c, _ in arrays):
        raise InputError("every judge needs a confidence on the same items: lengths "
                         + ", ".join(f"{j} {len(c)}" for j, (c, _) in zip(order, arrays, strict=True)), field="order")
    left = np.ones(n, dtype=bool)
    thresholds: list[float] = []
    stages: list[SelectiveCalibration] = []
    decided: dict[str, float] = {}
    n_decided = n_correct = 0
    for j, (c, y) in zip(order, arrays, strict=True):
        cal = _calibrate(c[left], y[left], settings, stage=len(stages) > 0)
        takes = left & (c >= cal.threshold)
        thresholds.append(cal.threshold)
        stages.append(cal)
        decided[j] = int(takes.sum()) / n if n else 0.0
        n_decided += int(takes.sum())
        n_correct += int(y[takes].sum())
        left &= ~takes
    giving = sum(not s.abstains for s in stages)
    return CascadeCalibration(order, tuple(thresholds), decided, n_decided / n if n else 0.0,
                              n_correct / n_decided if n_decided else float("nan"), n, tuple(stages),
                              min(1.0, giving * settings.delta))


def apply_thresholds(confidences: Sequence[Any], thresholds: Sequence[float]) -> np.ndarray:
    """Which stage decides each item: the index of the first judge whose confidence is at or above
    its threshold (``-1``: none, the item goes to people). NaN confidences never decide."""
    if len(confidences) != len(thresholds):
        raise InputError(f"{len(confidences)} judges but {len(thresholds)} thresholds", field="thresholds")
    arrays = [np.asarray(c, dtype=float).ravel() for c in confidences]
    n = len(arrays[0]) if arrays else 0
    who = np.full(n, -1, dtype=int)
    for i, (c, t) in enumerate(zip(arrays, thresholds, strict=True)):
        with np.errstate(invalid="ignore"):
            takes = (who < 0) & np.isfinite(c) & (c >= t)
        who[takes] = i
    return who


__all__ = ["CascadeCalibration", "SelectiveCalibration", "SelectiveSettings", "accuracy_interval",
           "apply_thresholds", "calibrate", "calibrate_cascade", "risk_upper_bound"]
