"""Agreement against the human ceiling: does a judge agree with the annotators as well as they agree
with each other?

For each judge: its chance-corrected agreement with each annotator (on the items both labelled), and
the mean over the annotators; beside it, the same statistic between every two annotators and its mean
(the **ceiling**). The statistic (as "Judging the Judges", Thakur et al. 2024, argue: percent agreement
hides what kappa shows):

* ``kappa``: Cohen's kappa (Cohen 1960) for labels (preferences A / B / tie, categories);
* ``quadratic_kappa``: Cohen's weighted kappa with quadratic weights (Cohen 1968) for ordinal
  numbers, the weights being squared differences of the label values (with consecutive integer
  labels, as ``sklearn.metrics.cohen_kappa_score(weights="quadratic", labels=range(lo, hi + 1))``);
  it equals Lin's concordance correlation of the two raters' numbers, so judges with fractional
  scores (G-Eval's expected grade) are compared on the same scale.

**The rule.** Judge row ``d = mean kappa(judge, annotator) - mean kappa(annotator, annotator)``, with
a paired percentile bootstrap interval over items (both means on the same resamples, items resampled
as the trust table resamples them): ``above`` when the interval lies above 0, ``below`` when it lies
below 0, ``as humans`` when it holds 0 (the judge agrees with the annotators as well as they agree with
each other, within the interval's precision). Pure functions over arrays (NaN = no label).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse

from evalign.errors import InputError
from evalign.meta.agreement import disagreement_weights, kappa_from_counts
from evalign.meta.resampling import DEFAULT, Resampling

STATISTICS = ("kappa", "quadratic_kappa")
#: the verdicts of a judge row
VERDICTS = ("above", "as humans", "below")


@dataclass(frozen=True)
class PairAgreement:
    """The agreement of two raters ``a`` and ``b`` on the ``n`` items both labelled."""

    a: str
    b: str
    value: float
    n: int


@dataclass(frozen=True)
class JudgeCeiling:
    """One judge against the ceiling: ``value`` (its mean agreement with the annotators, interval
    ``low``-``high``), ``ceiling`` (the annotators' mean pairwise agreement on the same resamples),
    ``difference`` = value - ceiling with its interval, and ``verdict`` (:data:`VERDICTS`, or
    ``undefined`` when a value is not defined). ``with_annotators``: the judge with each annotator."""

    judge: str
    value: float
    low: float
    high: float
    ceiling: float
    difference: float
    difference_low: float
    difference_high: float
    verdict: str
    with_annotators: tuple[PairAgreement, ...] = ()


@dataclass(frozen=True, eq=False)
class CeilingReport:
    """Every judge's agreement against the human ceiling: ``judges`` (one :class:`JudgeCeiling`
    each), ``annotator_pairs`` (every two annotators), the ``ceiling`` with its interval, the
    ``statistic`` and the resampling settings; ``notes``: what to know."""

    statistic: str
    judges: tuple[JudgeCeiling, ...]
    annotator_pairs: tuple[PairAgreement, ...]
    ceiling: float
    ceiling_low: float
    ceiling_high: float
    annotators: tuple[str, ...]
    resampling: Resampling = field(default=DEFAULT)
    notes: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        name = "Cohen's kappa" if self.statistic == "kappa" else "quadratic-weighted kappa"
        pct = round(100 * self.resampling.confidence)
        return (f"Agreement against the human ceiling ({name}): each judge's mean with the {len(self.annotators)} "
                f"annotators vs their mean with each other = {self.ceiling:.3f} [{self.ceiling_low:.3f}, "
                f"{self.ceiling_high:.3f}]; {pct}% paired bootstrap interval of the difference, "
                f"{self.resampling.n_resamples} resamples over items")

    @property
    def short_title(self) -> str:
        """``human ceiling: the annotators' mean Cohen's kappa 0.86 [0.83, 0.88]``."""
        name = "Cohen's kappa" if self.statistic == "kappa" else "quadratic-weighted kappa"
        return (f"human ceiling: the {len(self.annotators)} annotators' mean {name} with each other "
                f"{self.ceiling:.3f} [{self.ceiling_low:.3f}, {self.ceiling_high:.3f}]")

    def table(self) -> pd.DataFrame:
        """One row per judge: ``judge, value, ci_low, ci_high, ceiling, difference, diff_low,
        diff_high, verdict``, then one column per annotator (``vs <annotator>``)."""
        rows = []
        for j in self.judges:
            row: dict[str, Any] = {"judge": j.judge, "value": j.value, "ci_low": j.low, "ci_high": j.high,
                                   "ceiling": j.ceiling, "difference": j.difference, "diff_low": j.difference_low,
                                   "diff_high": j.difference_high, "verdict": j.verdict}
            row.update({f"vs {p.b}": p.value for p in j.with_annotators})
            rows.append(row)
        return pd.DataFrame(rows)

    def pairs_table(self) -> pd.DataFrame:
        """The annotators' pairwise agreement: ``a, b, value, n``."""
        return pd.DataFrame([vars(p) for p in self.annotator_pairs], columns=["a", "b", "value", "n"])

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        r = self.resampling
        return {"title": self.title, "statistic": self.statistic, "ceiling": self.ceiling,
                "ceiling_low": self.ceiling_low, "ceiling_high": self.ceiling_high,
                "annotators": list(self.annotators), "confidence": r.confidence, "resamples": r.n_resamples,
                "seed": r.seed, "notes": list(self.notes),
                "judges": [{**{k: v for k, v in vars(j).items() if k != "with_annotators"},
                            "with_annotators": [vars(p) for p in j.with_annotators]} for j in self.judges],
                "annotator_pairs": [vars(p) for p in self.annotator_pairs]}


# ------------------------------------------------------------------------------------------------
# the statistics of one pair of raters, on the full data and on every resample


def _pair_stats(statistic: str, w: np.ndarray, pairs: Sequence[tuple[np.ndarray, np.ndarray]],
                cats: np.ndarray | None) -> np.ndarray:
    """The agreement of each pair of raters ``(x, y)`` (NaN = no label) under each row of weights
    ``w`` ``(B, n)`` (a row of ones: the full data): ``(B, len(pairs))``. All pairs in one product
    with ``w`` (it is read once): Cohen's kappa from weighted contingency tables (``cats``: the
    category codes), or the quadratic-weighted kappa from weighted moments."""
    n = w.shape[1]
    if statistic == "kappa":
        assert cats is not None
        q = len(cats)
        rows_all, cols_all = [], []
        for p, (x, y) in enumerate(pairs):
            rows = np.flatnonzero(~(np.isnan(x) | np.isnan(y)))
            cell = np.searchsorted(cats, x[rows]) * q + np.searchsorted(cats, y[rows])
            rows_all.append(rows)
            cols_all.append(p * q * q + cell)
        r, c = np.concatenate(rows_all), np.concatenate(cols_all)
        onehot = sparse.csr_matrix((np.ones(r.size), (r, c)), shape=(n, len(pairs) * q * q))
        counts = np.asarray(w @ onehot).reshape(w.shape[0], len(pairs), q, q)
        return np.asarray(kappa_from_counts(counts, disagreement_weights(q)))
    cols = []
    for x, y in pairs:
        m = (~(np.isnan(x) | np.isnan(y))).astype(np.float64)
        xx, yy = np.where(m > 0, x, 0.0), np.where(m > 0, y, 0.0)
        cols += [m, xx, yy, xx * xx, yy * yy, xx * yy]
    sums = (w @ np.column_stack(cols)).reshape(w.shape[0], len(pairs), 6)
    cnt, sx, sy, sxx, syy, sxy = (sums[..., i] for i in range(6))
    with np.errstate(invalid="ignore", divide="ignore"):
        mx, my = sx / cnt, sy / cnt
        vx, vy, cov = sxx / cnt - mx**2, syy / cnt - my**2, sxy / cnt - mx * my
        denom = vx + vy + (mx - my) ** 2
        out = 2.0 * cov / denom
    return np.where((cnt >= 2) & (denom > 1e-12), out, np.nan)


def resample_counts(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """How many times each of ``n`` units is drawn in each bootstrap resample, ``(n_resamples, n)``:
    row ``b`` counts ``numpy.random.default_rng(seed).integers(0, n, (n_resamples, n))[b]`` (the
    index draws of :func:`evalign.meta.significance.bootstrap_ci`)."""
    if not n:
        return np.zeros((n_resamples, 0))
    idx = np.random.default_rng(seed).integers(0, n, (n_resamples, n))
    flat = (idx + np.arange(n_resamples)[:, None] * n).ravel()
    return np.bincount(flat, minlength=n_resamples * n).reshape(n_resamples, n).astype(np.float64)


def _interval(dist: np.ndarray, confidence: float) -> tuple[float, float]:
    ok = dist[np.isfinite(dist)]
    if not ok.size:
        return float("nan"), float("nan")
    a = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(ok, [a, 1.0 - a])
    return float(lo), float(hi)


def _mean(values: Sequence[float] | np.ndarray, axis: int | None = None) -> Any:
    arr = np.asarray(values, dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all NaN: NaN
        return np.nanmean(arr, axis=axis)


def _verdict(lo: float, hi: float) -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "undefined"
    return "above" if lo > 0 else "below" if hi < 0 else "as humans"


def agreement_ceiling(
    humans: np.ndarray,
    judges: Mapping[str, np.ndarray],
    *,
    annotators: Sequence[str] | None = None,
    statistic: str = "kappa",
    units: np.ndarray | None = None,
    resampling: Resampling = DEFAULT,
) -> CeilingReport:
    """Every judge's agreement with the annotators against theirs with each other.

    ``humans``: ``(n, k)`` labels coded as numbers (NaN = none; categories for ``kappa``, ordinal
    numbers for ``quadratic_kappa``); ``judges``: name -> ``(n,)`` labels on the same codes or scale.
    ``units``: ``(n,)`` the resampling unit of each row (e.g. the item of a ``(system, item)`` cell;
    default every row its own); ``resampling``: resamples, confidence and seed. Needs k >= 2.
    """
    h = np.asarray(humans, dtype=float)
    if h.ndim != 2 or h.shape[1] < 2:
        raise InputError("the human ceiling needs at least 2 annotators (items x annotators)", field="humans")
    if statistic not in STATISTICS:
        raise InputError(f"unknown statistic {statistic!r} (use {' or '.join(STATISTICS)})", field="statistic")
    names = [str(a) for a in annotators] if annotators is not None else [str(i) for i in range(h.shape[1])]
    js = {k: np.asarray(v, dtype=float).ravel() for k, v in judges.items()}
    n = h.shape[0]
    unit_ids = np.arange(n) if units is None else np.unique(np.asarray(units), return_inverse=True)[1]
    w = resample_counts(int(unit_ids.max()) + 1 if n else 0, resampling.n_resamples, resampling.seed)[:, unit_ids]
    cats = None
    if statistic == "kappa":
        cats = np.unique(np.concatenate([h[np.isfinite(h)], *(v[np.isfinite(v)] for v in js.values())]))
    k = h.shape[1]
    ann = list(combinations(range(k), 2))
    specs = [(h[:, a], h[:, b]) for a, b in ann] + [(v, h[:, a]) for v in js.values() for a in range(k)]
    full = _pair_stats(statistic, np.ones((1, n)), specs, cats)[0]
    boot = _pair_stats(statistic, w, specs, cats)
    counts = [int(np.sum(~(np.isnan(x) | np.isnan(y)))) for x, y in specs]
    ann_pairs = [PairAgreement(names[a], names[b], float(full[i]), counts[i]) for i, (a, b) in enumerate(ann)]
    ceiling = float(_mean(full[: len(ann)]))
    ceiling_dist = _mean(boot[:, : len(ann)], axis=1)
    c_lo, c_hi = _interval(ceiling_dist, resampling.confidence)
    rows = []
    for t, j in enumerate(js):
        cols = slice(len(ann) + t * k, len(ann) + (t + 1) * k)
        per = [PairAgreement(j, names[a], float(v), c) for a, v, c in zip(range(k), full[cols], counts[cols],
                                                                          strict=True)]
        value = float(_mean(full[cols]))
        dist = _mean(boot[:, cols], axis=1)
        lo, hi = _interval(dist, resampling.confidence)
        d_lo, d_hi = _interval(dist - ceiling_dist, resampling.confidence)
        rows.append(JudgeCeiling(j, value, lo, hi, ceiling, value - ceiling, d_lo, d_hi, _verdict(d_lo, d_hi),
                                 tuple(per)))
    return CeilingReport(statistic, tuple(rows), tuple(ann_pairs), ceiling, c_lo, c_hi, tuple(names), resampling)


__all__ = ["STATISTICS", "VERDICTS", "CeilingReport", "JudgeCeiling", "PairAgreement", "agreement_ceiling",
           "resample_counts"]
