"""How a judge's pairwise verdicts move under a perturbation: changed verdicts, the shift toward the
perturbed response, exact intervals and an exact sign test (arrays in, a frozen result out, no I/O).

Each pair has a verdict before and after (``"A"``, ``"B"``, ``"tie"``; anything else, e.g. None or
``"unparseable"``, leaves the pair out and is counted) and a *target*: the side that was perturbed.
A verdict's score for the target is +1 (target wins), 0 (tie), -1 (target loses). A changed verdict
moved *toward* the target when its score rose and *away* when it fell; every change is one or the other.

* ``changed``: the share of pairs whose verdict changed, with its Clopper-Pearson (exact) interval.
  CALM (Ye et al. 2024, arXiv 2410.02736) reports the complement as the *robustness rate*.
* ``net_shift = (toward - away) / n``: in [-1, 1]; 0 = no pull either way.
* ``p_value``: the exact two-sided sign test of "no effect" (a change is as likely toward the target as
  away: ``scipy.stats.binomtest(toward, toward + away, 0.5)``). With no tie on either side this is
  McNemar's exact test on the paired binary outcome "the target wins".
* ``toward_share = toward / changed`` with its exact interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

#: the verdicts a pair can have (others leave it out)
VERDICTS = ("A", "B", "tie")


@dataclass(frozen=True)
class FlipStats:
    """Verdicts before and after a perturbation (see the module doc).

    ``n_pairs``: pairs given; ``n``: pairs with a verdict on both sides (the statistics' base);
    ``n_missing``: the rest. ``changed``, ``changed_low``, ``changed_high``: share in [0, 1] and its
    exact interval; ``toward``, ``away``: counts; ``toward_share`` (+ interval) over the changed ones;
    ``net_shift`` in [-1, 1]; ``p_value``: exact sign test (1.0 without a change); ``confidence``.
    """

    n_pairs: int
    n: int
    n_missing: int
    n_changed: int
    changed: float
    changed_low: float
    changed_high: float
    toward: int
    away: int
    toward_share: float
    toward_low: float
    toward_high: float
    net_shift: float
    p_value: float
    confidence: float

    @property
    def robustness(self) -> float:
        """CALM's robustness rate: the share of verdicts that did not change."""
        return 1.0 - self.changed if self.n else float("nan")

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (NaN -> None)."""
        out = asdict(self)
        out["robustness"] = self.robustness
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in out.items()}


def target_score(verdicts: Sequence[Any], target: Sequence[Any]) -> np.ndarray:
    """+1 / 0 / -1 per pair: the target side wins / tie / loses; NaN without a verdict."""
    out = np.full(len(verdicts), np.nan)
    for i, (v, t) in enumerate(zip(verdicts, target, strict=True)):
        if v in VERDICTS and t in ("A", "B"):
            out[i] = 0.0 if v == "tie" else (1.0 if v == t else -1.0)
    return out


def exact_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval of ``k`` successes in ``n`` trials (NaN, NaN when n = 0)."""
    if n == 0:
        return float("nan"), float("nan")
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


def sign_test(up: int, down: int) -> float:
    """Two-sided exact sign test of ``up`` vs ``down`` (1.0 when both are 0)."""
    if up + down == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(up, up + down, 0.5, alternative="two-sided").pvalue)


def flip_stats(before: Sequence[Any], after: Sequence[Any], target: Sequence[Any], *,
               confidence: float = 0.95) -> FlipStats:
    """Changed verdicts and the shift toward ``target`` between ``before`` and ``after`` (aligned per
    pair; see the module doc)."""
    if not len(before) == len(after) == len(target):
        raise ValueError(f"before, after and target differ in length ({len(before)}, {len(after)}, {len(target)})")
    s0, s1 = target_score(before, target), target_score(after, target)
    ok = np.isfinite(s0) & np.isfinite(s1)
    n = int(ok.sum())
    d = s1[ok] - s0[ok]
    toward, away = int((d > 0).sum()), int((d < 0).sum())
    changed = toward + away
    lo, hi = exact_interval(changed, n, confidence)
    tlo, thi = exact_interval(toward, changed, confidence)
    return FlipStats(
        n_pairs=len(before), n=n, n_missing=len(before) - n, n_changed=changed,
        changed=changed / n if n else float("nan"), changed_low=lo, changed_high=hi,
        toward=toward, away=away, toward_share=toward / changed if changed else float("nan"),
        toward_low=tlo, toward_high=thi, net_shift=(toward - away) / n if n else float("nan"),
        p_value=sign_test(toward, away), confidence=confidence,
    )  # fmt: skip


@dataclass(frozen=True)
class OwnWins:
    """The judge's verdicts on pairs with its own answer, without a human reference: ``n`` decisive
    verdicts (ties and missing left out), ``own`` of them for its own side, ``share`` with its exact
    interval, ``p_value`` of the exact binomial test against one half."""

    n: int
    own: int
    share: float
    low: float
    high: float
    p_value: float
    confidence: float

    def as_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in asdict(self).items()}


def own_wins(verdicts: Sequence[Any], own: Sequence[Any], *, confidence: float = 0.95) -> OwnWins:
    """How often the judge picks its own side (``own``: ``"A"`` / ``"B"`` per pair) among its decisive
    verdicts, against one half (exact)."""
    s = target_score(verdicts, own)
    decisive = s[np.isfinite(s) & (s != 0)]
    n, k = int(decisive.size), int((decisive > 0).sum())
    lo, hi = exact_interval(k, n, confidence)
    return OwnWins(n, k, k / n if n else float("nan"), lo, hi, sign_test(k, n - k), confidence)


__all__ = ["VERDICTS", "FlipStats", "OwnWins", "exact_interval", "flip_stats", "own_wins", "sign_test", "target_score"]
