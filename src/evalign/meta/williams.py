"""Williams test for two dependent correlations that share one variable (Williams 1959; Steiger
1980, eq. 7), as used for metric comparison by Graham & Baldwin (2014, EMNLP) and WMT, and
implemented by mt-metrics-eval ``stats.WilliamsTest`` / ``WilliamsSigDiff``.

With ``r12`` = corr(human, metric A), ``r13`` = corr(human, metric B), ``r23`` = corr(A, B) over the
same ``n`` points::

    K = 1 - r12^2 - r13^2 - r23^2 + 2 r12 r13 r23
    t = (r12 - r13) sqrt((n - 1)(1 + r23)) / sqrt(2 K (n - 1)/(n - 3) + ((r12 + r13)/2)^2 (1 - r23)^3)

with ``n - 3`` degrees of freedom. The **one-sided** p-value (default, as mt-metrics-eval) is
``P(T >= |t|)``: the probability of a difference this large in the observed direction; the
two-sided p-value is twice that. No resampling, no +1 correction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from evalign.errors import InputError
from evalign.meta.correlation import correlation, paired_scores, system_means


@dataclass(frozen=True)
class WilliamsResult:
    """Williams test of corr(human, A) vs corr(human, B).

    Attributes:
        p_value: one-sided (``one_sided``) or two-sided p-value; NaN when undefined (n <= 3 or a
            correlation undefined).
        r_a, r_b: correlation of metric A / B with the humans; r_ab: of A with B.
        n: points used (systems at system level, cells at item level) where all three are present.
        t: the test statistic (positive when A correlates better).
        one_sided: which p-value ``p_value`` is.
        method: "pearson" (the test's assumption), "spearman" or "kendall" (as mt-metrics-eval
            allows; the interpretation is then approximate).
    """

    p_value: float
    r_a: float
    r_b: float
    r_ab: float
    n: int
    t: float
    one_sided: bool
    method: str


def williams_t(r12: float, r13: float, r23: float, n: int) -> float:
    """Williams' t statistic for corr(1, 2) - corr(1, 3), given corr(2, 3) and n points (NaN if n <= 3)."""
    if n <= 3:
        return float("nan")
    k = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r23 * r13
    rbar = (r12 + r13) / 2
    num = (r12 - r13) * math.sqrt((n - 1) * (1 + r23))
    den2 = 2 * (n - 1) / (n - 3) * k + rbar**2 * (1 - r23) ** 3
    if den2 <= 0:
        return float("nan") if num == 0 else math.copysign(float("inf"), num)
    return num / math.sqrt(den2)


def williams_p_value(r12: float, r13: float, r23: float, n: int, one_sided: bool = True) -> float:
    """p-value of Williams' test: ``P(T_{n-3} >= |t|)`` one-sided, twice that two-sided."""
    t = williams_t(r12, r13, r23, n)
    if math.isnan(t):
        return float("nan")
    from scipy import stats  # scipy.stats (~1 s to import): when a test is run, not at import

    p = float(stats.t.sf(abs(t), n - 3))
    return p if one_sided else min(1.0, 2 * p)


def williams_test(
    human: object,
    metric_a: object,
    metric_b: object,
    method: str = "pearson",
    level: str = "system",
    one_sided: bool = True,
) -> WilliamsResult:
    """Williams test: does metric A correlate with the humans better than metric B (or vice versa)?

    Args:
        human, metric_a, metric_b: ``systems x items`` arrays (NaN = missing) or 1-D vectors of one
            value per point. ``level="system"``: per-system means over the items present, then the
            systems where all three are present; ``level="item"``: every cell where all three are present.
        method: correlation used for the three coefficients ("pearson" by default).
        one_sided: one-sided p-value (default, mt-metrics-eval) or two-sided.

    Returns:
        :class:`WilliamsResult`.
    """
    h, a = paired_scores(human, metric_a)
    _, b = paired_scores(human, metric_b)
    if level not in ("system", "item"):
        raise InputError(f"unknown level {level!r}; choose 'system' or 'item'", field="level")
    if level == "system":
        h, a, b = system_means(h), system_means(a), system_means(b)
    h, a, b = h.ravel(), a.ravel(), b.ravel()
    ok = ~(np.isnan(h) | np.isnan(a) | np.isnan(b))
    h, a, b = h[ok], a[ok], b[ok]
    n = int(h.size)

    def r(x: np.ndarray, y: np.ndarray) -> float:
        return correlation(x, y, method, "item", "none").value if n >= 2 else float("nan")  # type: ignore[arg-type]

    r_a, r_b, r_ab = r(h, a), r(h, b), r(a, b)
    if any(math.isnan(v) for v in (r_a, r_b, r_ab)):
        t = p = float("nan")
    else:
        t = williams_t(r_a, r_b, r_ab, n)
        p = williams_p_value(r_a, r_b, r_ab, n, one_sided)
    return WilliamsResult(p, r_a, r_b, r_ab, n, t, one_sided, method)


__all__ = ["WilliamsResult", "williams_p_value", "williams_t", "williams_test"]
