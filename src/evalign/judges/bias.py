"""Bias audits of judge grades: length bias and position (order) bias.

Pure functions over arrays (scipy.stats for the rank correlations); every judge run reports them.

* :func:`length_bias`: Spearman's rho and Kendall's tau-b between a score and the response length
  (characters or whitespace-separated words), over all items and within each human grade (so a
  correlation that remains where humans gave the same grade points at the judge, not the data).
* :func:`pairwise_length_bias`: for pairs, the rank correlation between the verdict code
  (+1 = A better, -1 = B better, 0 = tie) and the length difference ``len(A) - len(B)``, and how
  often a decided verdict picks the longer response (``prefers_longer``).
* :func:`order_swap_agreement`: for pairs judged in both orders (A/B and B/A), the share of pairs
  whose two verdicts agree once mapped back (``position_agreement``), and how often the response
  shown first was picked (``prefers_first``).

The names and definitions of ``position_agreement``, ``prefers_first`` and ``prefers_longer`` are
those of the trust table's order diagnostics (:mod:`evalign.meta.order_diagnostics`).

NaN scores (unscored items) are left out; a statistic on fewer than 3 items, or on constant input,
is NaN.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from evalign.io.text import LENGTH_UNITS as LENGTH_UNITS  # the units of `evalign judge --length-unit`
from evalign.io.text import text_lengths


@dataclass(frozen=True)
class RankCorrelation:
    """Spearman's rho and Kendall's tau-b with their two-sided p-values over ``n`` items."""

    spearman: float
    spearman_p: float
    kendall: float
    kendall_p: float
    n: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return asdict(self)


def rank_correlation(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> RankCorrelation:
    """Spearman and Kendall (tau-b) correlation of the pairs where both values are finite."""
    from scipy import stats

    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    n = int(a.size)
    if n < 3 or np.all(a == a[0]) or np.all(b == b[0]):
        nan = float("nan")
        return RankCorrelation(nan, nan, nan, nan, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rho, rho_p = stats.spearmanr(a, b)
        tau, tau_p = stats.kendalltau(a, b)
    return RankCorrelation(float(rho), float(rho_p), float(tau), float(tau_p), n)


def length_bias(
    scores: Sequence[float] | np.ndarray,
    responses: Sequence[Any],
    *,
    unit: str = "chars",
    human: Sequence[float] | np.ndarray | None = None,
) -> dict[str, Any]:
    """Rank correlation between ``scores`` and response length, overall and within each distinct
    human grade (when ``human`` is given; items without a human grade are left out there).

    Returns ``{"unit", "overall": RankCorrelation dict, "by_human": {grade: dict}}``.
    """
    lengths = text_lengths(responses, unit)
    s = np.asarray(scores, dtype=float)
    out: dict[str, Any] = {"unit": unit, "overall": rank_correlation(s, lengths).as_dict()}
    if human is not None:
        h = np.asarray(human, dtype=float)
        groups: dict[str, Any] = {}
        for g in sorted(np.unique(h[np.isfinite(h)])):
            mask = h == g
            groups[_grade_key(g)] = rank_correlation(s[mask], lengths[mask]).as_dict()
        out["by_human"] = groups
    return out


def _grade_key(g: float) -> str:
    return str(int(g)) if float(g).is_integer() else f"{g:g}"


def pairwise_length_bias(
    codes: Sequence[float] | np.ndarray,
    responses_a: Sequence[Any],
    responses_b: Sequence[Any],
    *,
    unit: str = "chars",
    orders: Sequence[Sequence[str | None]] = (),
) -> dict[str, Any]:
    """Length bias of pairwise verdicts.

    ``codes``: +1 = A better, -1 = B better, 0 = tie (NaN = no verdict). Returns the rank
    correlation between the codes and ``len(A) - len(B)`` and ``prefers_longer``: among the
    decided verdicts (A or B) on pairs of different lengths, the share that picked the longer
    response (0.5 = no length preference), with its count ``n_decided``. ``orders``: the verdicts
    of each order (``"A"`` / ``"B"`` / ``"tie"`` / None, in the original orientation) of a judge
    run in both orders: ``prefers_longer`` then pools them (each single-order verdict counts once).
    """
    c = np.asarray(codes, dtype=float)
    diff = text_lengths(responses_a, unit) - text_lengths(responses_b, unit)
    picks = [np.array([{"A": 1.0, "B": -1.0}.get(str(v), np.nan) for v in o]) for o in orders] or [c]
    longer = n = 0
    for p in picks:
        decided = np.isfinite(p) & (p != 0) & np.isfinite(diff) & (diff != 0)
        longer += int((np.sign(p[decided]) == np.sign(diff[decided])).sum())
        n += int(decided.sum())
    return {
        "unit": unit,
        "overall": rank_correlation(c, diff).as_dict(),
        "prefers_longer": float(longer / n) if n else float("nan"),
        "n_decided": n,
    }


def order_swap_agreement(ab: Sequence[str | None], ba: Sequence[str | None]) -> dict[str, Any]:
    """Position-bias audit of pairs judged in both orders.

    ``ab`` / ``ba``: the verdict of each judged pair in the A-first and the B-first order, both
    mapped back to the original orientation (``"A"``, ``"B"``, ``"tie"``; None = no verdict).
    Returns ``position_agreement`` (share of the pairs whose two verdicts are equal; two missing
    verdicts count as equal, as LLMBar counts them), ``n_pairs``, ``prefers_first`` (share of the
    decided single-order verdicts, A or B, that picked the response shown first; 0.5 = no position
    preference) and ``n_verdicts``.
    """
    if len(ab) != len(ba):
        raise ValueError("ab and ba must have the same length")
    both = list(zip(ab, ba, strict=True))
    agree = sum(1 for x, y in both if x == y)
    first = 0
    decided = 0
    for x in ab:
        if x in ("A", "B"):
            decided += 1
            first += x == "A"
    for y in ba:
        if y in ("A", "B"):
            decided += 1
            first += y == "B"
    return {
        "position_agreement": agree / len(both) if both else float("nan"),
        "n_pairs": len(both),
        "prefers_first": first / decided if decided else float("nan"),
        "n_verdicts": decided,
    }
