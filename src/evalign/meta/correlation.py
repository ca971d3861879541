"""Correlation of metric scores with human scores, at system and item level.

Pure functions over numpy arrays shaped ``systems x items`` (``NaN`` = missing). Conventions follow
mt-metrics-eval (``mt_metrics_eval/stats.py``) and the WMT metrics shared tasks:

* **System level** (Mathur et al., 2020, "Tangled up in BLEU", ACL; Freitag et al., 2021, WMT21
  metrics task): each system is summarised by its mean over the items it has, and the vector of system
  scores of the metric is correlated with the one of the humans. A 1-D input is taken as such a vector
  already (e.g. a given human ranking), one value per system.
* **Item level** (a.k.a. segment level, Freitag et al., 2023, WMT23 metrics task; Deutsch et al., 2023,
  "Ties Matter", EMNLP): ``grouping="item"`` correlates, for every item, the systems' scores and averages
  over items ("group by item"); ``grouping="system"`` correlates within each system across its items
  and averages over systems; ``grouping="none"`` pools every (system, item) cell into one vector.

Within each vector only positions where *both* the human and the metric score are present are used.
A group needs at least two such positions; a group where either vector is constant has no defined
correlation (``NaN``, as in ``scipy.stats``), is left out of the average and counted in
``n_skipped_constant``. Values equal ``scipy.stats.pearsonr`` / ``spearmanr`` / ``kendalltau`` on the same
vectors (Kendall tau-b by default, Stuart's tau-c with ``variant="c"``); the grouped computation is
vectorised so that many small groups (thousands of items x tens of systems) cost milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy import stats

from evalign.errors import InputError

Method = Literal["kendall", "pearson", "spearman"]
Level = Literal["system", "item"]
Grouping = Literal["none", "item", "system"]

METHODS = ("kendall", "pearson", "spearman")
LEVELS = ("system", "item")
GROUPINGS = ("none", "item", "system")
KENDALL_VARIANTS = ("b", "c")

#: Groups of at most this many values use the vectorised O(n^2) Kendall; larger ones use scipy's
#: O(n log n) implementation one group at a time.
_KENDALL_VECTOR_MAX = 64
#: Elements of one broadcast block in the vectorised Kendall (memory bound, ~32 MB per float64 array).
_KENDALL_BLOCK = 4_000_000


@dataclass(frozen=True)
class CorrelationResult:
    """A correlation between metric and human scores.

    Attributes:
        value: the correlation in [-1, 1], averaged over groups; ``NaN`` when no group has one.
        method: "kendall", "pearson" or "spearman".
        level: "system" or "item".
        grouping: "none", "item" or "system" (always "none" at system level).
        n_groups: groups that entered the average.
        n_skipped_constant: groups with >= 2 values left out because a vector was constant.
        n_pairs_or_points: number of (human, metric) points used, summed over averaged groups.
        variant: Kendall variant ("b" or "c"); "" for the other methods.
        n_skipped_small: groups left out because they had fewer than two points.
        group_values: the correlation of every group (``NaN`` where undefined), in group order
            (items for ``grouping="item"``, systems for ``grouping="system"``, one value otherwise).
    """

    value: float
    method: str
    level: str
    grouping: str
    n_groups: int
    n_skipped_constant: int
    n_pairs_or_points: int
    variant: str = ""
    n_skipped_small: int = 0
    group_values: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False, compare=False)


# --------------------------------------------------------------------------------------------------
# Input handling (shared by the other meta modules)
# --------------------------------------------------------------------------------------------------


def as_scores(values: object, name: str) -> np.ndarray:
    """Convert ``values`` to a float64 array (1-D or 2-D ``systems x items``); ``None`` becomes NaN.

    Raises:
        InputError: if the values are not numeric, have more than two dimensions, or contain +/-inf.
    """
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"scores must be numeric ({exc})", field=name) from None
    if arr.ndim == 0 or arr.ndim > 2:
        raise InputError(
            f"scores must be a 1-D vector or a 2-D systems x items array, got shape {arr.shape}", field=name
        )
    if np.isinf(arr).any():
        raise InputError("scores contain an infinite value; use NaN for a missing score", field=name)
    return arr


def paired_scores(human: object, metric: object) -> tuple[np.ndarray, np.ndarray]:
    """Validate a (human, metric) pair of score arrays and return them as float64 arrays of one shape.

    Both must be 1-D or 2-D (``systems x items``) with the same shape. NaN marks a missing score.

    Raises:
        InputError: naming the field ("human" or "metric") that is not numeric or has the wrong shape.
    """
    h = as_scores(human, "human")
    m = as_scores(metric, "metric")
    if h.shape != m.shape:
        raise InputError(f"human scores have shape {h.shape} but metric scores {m.shape}", field="metric")
    return h, m


def groups_matrix(
    human: np.ndarray, metric: np.ndarray, grouping: str
) -> tuple[np.ndarray, np.ndarray]:
    """Arrange paired scores as ``groups x members`` matrices with NaN wherever either score is missing.

    ``grouping="item"``: one row per item (column of the input), members are systems.
    ``grouping="system"``: one row per system, members are items.
    ``grouping="none"``: a single row with every cell where both scores are present.
    A 1-D input is one group whatever the grouping.
    """
    if grouping not in GROUPINGS:
        raise InputError(f"unknown grouping {grouping!r}; choose one of {', '.join(GROUPINGS)}", field="grouping")
    both = ~(np.isnan(human) | np.isnan(metric))
    if human.ndim == 1 or grouping == "none":
        return human[both].reshape(1, -1), metric[both].reshape(1, -1)
    h = np.where(both, human, np.nan)
    m = np.where(both, metric, np.nan)
    if grouping == "item":
        return np.ascontiguousarray(h.T), np.ascontiguousarray(m.T)
    return h, m


def system_means(scores: np.ndarray) -> np.ndarray:
    """Per-system mean over the items present (a 1-D input is returned as is); NaN if a system has none."""
    if scores.ndim == 1:
        return scores
    counts = np.sum(~np.isnan(scores), axis=1)
    sums = np.nansum(scores, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


# --------------------------------------------------------------------------------------------------
# Grouped correlations: rows of X and Y are groups, NaN in the same places in both
# --------------------------------------------------------------------------------------------------


def _constant_rows(x: np.ndarray, valid: np.ndarray) -> np.ndarray:
    lo = np.min(np.where(valid, x, np.inf), axis=1)
    hi = np.max(np.where(valid, x, -np.inf), axis=1)
    return lo == hi


def _pearson_rows(x: np.ndarray, y: np.ndarray, valid: np.ndarray, n: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        nn = np.maximum(n, 1)
        xm = np.where(valid, x - (np.where(valid, x, 0.0).sum(axis=1) / nn)[:, None], 0.0)
        ym = np.where(valid, y - (np.where(valid, y, 0.0).sum(axis=1) / nn)[:, None], 0.0)
        xn = np.sqrt((xm * xm).sum(axis=1))
        yn = np.sqrt((ym * ym).sum(axis=1))
        r = ((xm / xn[:, None]) * (ym / yn[:, None])).sum(axis=1)
    return np.clip(r, -1.0, 1.0)


def _spearman_rows(x: np.ndarray, y: np.ndarray, valid: np.ndarray, n: np.ndarray) -> np.ndarray:
    rx = stats.rankdata(x, axis=1, nan_policy="omit")
    ry = stats.rankdata(y, axis=1, nan_policy="omit")
    return _pearson_rows(rx, ry, valid, n)


def _distinct_counts(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Number of distinct values in each row (NaN = absent, sorted to the end)."""
    xs = np.sort(x, axis=1)
    new = np.diff(xs, axis=1) != 0  # NaN gaps count as "different" but lie past the valid values
    valid_gap = np.arange(1, x.shape[1])[None, :] < n[:, None]
    return np.where(n > 0, 1 + (new & valid_gap).sum(axis=1), 0)


def _kendall_small(x: np.ndarray, y: np.ndarray, valid: np.ndarray, variant: str) -> np.ndarray:
    """Kendall tau of each row from all pairs i < j at once (rows of at most ``_KENDALL_VECTOR_MAX``)."""
    g, k = x.shape
    out = np.empty(g)
    i, j = np.triu_indices(k, 1)
    step = max(1, _KENDALL_BLOCK // max(1, len(i)))
    for s in range(0, g, step):
        xs, ys, vs = x[s : s + step], y[s : s + step], valid[s : s + step]
        pair = vs[:, i] & vs[:, j]
        sx = np.sign(xs[:, j] - xs[:, i])
        sy = np.sign(ys[:, j] - ys[:, i])
        n = vs.sum(axis=1).astype(np.int64)
        tot = n * (n - 1) // 2
        cmd = np.where(pair, sx * sy, 0.0).sum(axis=1)
        xtie = (pair & (sx == 0)).sum(axis=1)
        ytie = (pair & (sy == 0)).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            if variant == "b":
                tau = cmd / np.sqrt(tot - xtie) / np.sqrt(tot - ytie)
            else:
                mc = np.minimum(_distinct_counts(xs, n), _distinct_counts(ys, n))
                tau = 2 * cmd / (n.astype(np.float64) ** 2 * (mc - 1) / mc)
        tau = np.where((xtie == tot) | (ytie == tot), np.nan, tau)
        out[s : s + step] = np.clip(tau, -1.0, 1.0)
    return out


def _kendall_rows(x: np.ndarray, y: np.ndarray, valid: np.ndarray, n: np.ndarray, variant: str) -> np.ndarray:
    if x.shape[1] <= _KENDALL_VECTOR_MAX:
        return _kendall_small(x, y, valid, variant)
    out = np.full(x.shape[0], np.nan)
    for g in range(x.shape[0]):
        if n[g] >= 2:
            v = valid[g]
            out[g] = stats.kendalltau(x[g, v], y[g, v], variant=variant).statistic
    return out


def grouped_correlations(
    x: np.ndarray, y: np.ndarray, method: str = "kendall", variant: str = "b"
) -> tuple[np.ndarray, np.ndarray]:
    """Correlation of every row of ``x`` with the same row of ``y`` (``NaN`` marks absent values,
    in the same places in both).

    Returns:
        (values, counts): the correlation per row (``NaN`` for fewer than two points or a constant row)
        and the number of points per row.
    """
    if method not in METHODS:
        raise InputError(f"unknown correlation method {method!r}; choose one of {', '.join(METHODS)}", field="method")
    if variant not in KENDALL_VARIANTS:
        raise InputError(f"unknown Kendall variant {variant!r}; choose 'b' or 'c'", field="variant")
    valid = ~np.isnan(x)
    n = valid.sum(axis=1)
    if x.shape[1] == 0:
        return np.full(x.shape[0], np.nan), n
    if method == "pearson":
        vals = _pearson_rows(x, y, valid, n)
    elif method == "spearman":
        vals = _spearman_rows(x, y, valid, n)
    else:
        vals = _kendall_rows(x, y, valid, n, variant)
    undefined = (n < 2) | _constant_rows(x, valid) | _constant_rows(y, valid)
    return np.where(undefined, np.nan, vals), n


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def correlation(
    human: object,
    metric: object,
    method: Method = "kendall",
    level: Level = "system",
    grouping: Grouping = "none",
    variant: Literal["b", "c"] = "b",
) -> CorrelationResult:
    """Correlation between human and metric scores.

    Args:
        human: human scores, ``systems x items`` (NaN = missing), or a 1-D vector of per-system scores
            (system level) / of paired points (item level). Higher or lower being better does not
            matter for the sign only if both agree: flip one (e.g. ranks) before calling.
        metric: metric scores of the same shape.
        method: "kendall" (tau-b, or tau-c with ``variant="c"``), "pearson" or "spearman".
        level: "system": correlate per-system means over items (NaN ignored); "item": correlate
            item-level scores according to ``grouping``.
        grouping: at item level, "item" (within each item across systems, averaged over items),
            "system" (within each system across items, averaged over systems) or "none" (all cells
            pooled). Must be "none" at system level.
        variant: Kendall variant, "b" (Kendall 1945) or "c" (Stuart 1953), as in ``scipy.stats.kendalltau``.

    Returns:
        :class:`CorrelationResult`; ``value`` is the unweighted mean over groups with a defined
        correlation, in [-1, 1], or ``NaN`` if there is none.

    Raises:
        InputError: unknown option, mismatched shapes, non-numeric scores.
    """
    if level not in LEVELS:
        raise InputError(f"unknown level {level!r}; choose 'system' or 'item'", field="level")
    if grouping not in GROUPINGS:
        raise InputError(f"unknown grouping {grouping!r}; choose one of {', '.join(GROUPINGS)}", field="grouping")
    h, m = paired_scores(human, metric)
    if level == "system":
        if grouping != "none":
            raise InputError("system-level correlation takes grouping='none'", field="grouping")
        h, m = system_means(h), system_means(m)
    elif h.ndim == 1 and grouping != "none":
        raise InputError(f"grouping={grouping!r} needs a 2-D systems x items array", field="grouping")
    x, y = groups_matrix(h, m, grouping)
    vals, counts = grouped_correlations(x, y, method, variant)
    ok = ~np.isnan(vals)
    big = counts >= 2
    value = float(np.mean(vals[ok])) if ok.any() else float("nan")
    return CorrelationResult(
        value=value,
        method=method,
        level=level,
        grouping=grouping,
        n_groups=int(ok.sum()),
        n_skipped_constant=int((big & ~ok).sum()),
        n_pairs_or_points=int(counts[ok].sum()),
        variant=variant if method == "kendall" else "",
        n_skipped_small=int((~big).sum()),
        group_values=vals,
    )
