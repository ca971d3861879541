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

from evalign.errors import InputError

Method = Literal["kendall", "pearson", "spearman"]
Level = Literal["system", "item"]
Grouping = Literal["none", "item", "system"]

METHODS = ("kendall", "pearson", "spearman")
LEVELS = ("system", "item")
GROUPINGS = ("none", "item", "system")
#: Kendall variants (mt-metrics-eval ``stats.KendallVariants`` names): "b" (tau-b, Kendall 1945), "c"
#: (Stuart's tau-c), "23" (tau_23 of Deutsch et al. 2023: ties count, a tie in both = concordant) and
#: "acc23" (acc_23 = pairwise accuracy with ties).
KENDALL_VARIANTS = ("b", "c", "23", "acc23")
AVERAGES = ("macro", "micro")

#: Groups of at most this many values use the vectorised O(n^2) Kendall; larger ones use scipy's
#: O(n log n) implementation one group at a time.
_KENDALL_VECTOR_MAX = 64
#: Elements of one broadcast block in the vectorised Kendall (memory bound, ~32 MB per float64 array).
_KENDALL_BLOCK = 4_000_000
#: A long group whose values take few distinct (human, metric) combinations (ratings on a scale, grades)
#: counts its pairs from the contingency table of the values when it has at most this many cells per
#: value: O(n log n + cells), far quicker than scipy's per-call overhead in a bootstrap
_KENDALL_TABLE_CELLS_PER_VALUE = 50


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
        system_score: at system level, what the system scores were: ``"mean of items"`` (a
            ``systems x items`` input averaged per system: for BLEU or chrF this is not their corpus
            score, see :func:`evalign.system_scores`) or ``"as given"`` (one value per system);
            ``""`` at item level.
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
    system_score: str = ""


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


def row_ranks(x: np.ndarray) -> np.ndarray:
    """``scipy.stats.rankdata(x, axis=1, nan_policy="omit")`` of a 2-D array (average ranks of ties per row,
    NaN where ``x`` is NaN), the same float64 values by the same arithmetic without scipy's per-call
    overhead (tests/meta/test_row_ranks.py pins it to scipy)."""
    x = np.asarray(x)
    if x.size == 0:
        return np.empty(x.shape, dtype=np.float64)
    m, k = x.shape
    order = np.argsort(x, axis=1, kind="stable")
    xs = np.take_along_axis(x, order, axis=1)
    new = np.ones(x.shape, dtype=bool)
    new[:, 1:] = xs[:, :-1] != xs[:, 1:]
    starts = np.flatnonzero(new.ravel())
    counts = np.diff(starts, append=x.size)
    ordinal = (starts % k + 1).astype(np.float64)
    ranks = np.empty(x.shape, dtype=np.float64)
    np.put_along_axis(ranks, order, np.repeat(ordinal + (counts.astype(np.float64) - 1) / 2, counts).reshape(m, k),
                      axis=1)
    ranks[np.isnan(x)] = np.nan
    return ranks


def _spearman_rows(x: np.ndarray, y: np.ndarray, valid: np.ndarray, n: np.ndarray) -> np.ndarray:
    r = row_ranks(np.concatenate([x, y]))
    return _pearson_rows(r[: x.shape[0]], r[x.shape[0]:], valid, n)


def _distinct_counts(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Number of distinct values in each row (NaN = absent, sorted to the end)."""
    xs = np.sort(x, axis=1)
    new = np.diff(xs, axis=1) != 0  # NaN gaps count as "different" but lie past the valid values
    valid_gap = np.arange(1, x.shape[1])[None, :] < n[:, None]
    return np.where(n > 0, 1 + (new & valid_gap).sum(axis=1), 0)


def _kendall_small(
    x: np.ndarray, y: np.ndarray, valid: np.ndarray, variant: str, epsilon: float = 0.0
) -> np.ndarray:
    """Kendall tau of each row from all pairs i < j at once (rows of at most ``_KENDALL_VECTOR_MAX``).
    ``x`` = human, ``y`` = metric; a metric pair with ``|y_i - y_j| <= epsilon`` is a tie."""
    g, k = x.shape
    out = np.empty(g)
    i, j = np.triu_indices(k, 1)
    step = max(1, _KENDALL_BLOCK // max(1, len(i)))
    for s in range(0, g, step):
        xs, ys, vs = x[s : s + step], y[s : s + step], valid[s : s + step]
        pair = vs[:, i] & vs[:, j]
        sx = np.sign(xs[:, j] - xs[:, i])
        dy = ys[:, j] - ys[:, i]
        sy = np.where(np.abs(dy) <= epsilon, 0.0, np.sign(dy)) if epsilon > 0 else np.sign(dy)
        n = vs.sum(axis=1).astype(np.int64)
        out[s : s + step] = _tau_from_counts(*_pair_counts(sx, sy, pair), n, variant, xs, ys)
    return out


def _pair_counts(
    sx: np.ndarray, sy: np.ndarray, pair: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(concordant, discordant, human-only ties, metric-only ties, ties in both) per row."""
    prod = np.where(pair, sx * sy, 0.0)
    con = (prod > 0).sum(axis=1)
    dis = (prod < 0).sum(axis=1)
    xt, yt = pair & (sx == 0), pair & (sy == 0)
    return con, dis, (xt & ~yt).sum(axis=1), (yt & ~xt).sum(axis=1), (xt & yt).sum(axis=1)


def _tau_from_counts(
    con: np.ndarray, dis: np.ndarray, xt_only: np.ndarray, yt_only: np.ndarray, both: np.ndarray,
    n: np.ndarray, variant: str, xs: np.ndarray | None = None, ys: np.ndarray | None = None,
) -> np.ndarray:
    """The Kendall variant from the pair counts (formulas of mt-metrics-eval ``KendallVariants``)."""
    tot = con + dis + xt_only + yt_only + both
    xtie, ytie = xt_only + both, yt_only + both
    with np.errstate(invalid="ignore", divide="ignore"):
        if variant == "b":
            tau = (con - dis) / np.sqrt(tot - xtie) / np.sqrt(tot - ytie)
        elif variant == "c":
            assert xs is not None and ys is not None
            mc = np.minimum(_distinct_counts(xs, n), _distinct_counts(ys, n))
            tau = 2 * (con - dis) / (n.astype(np.float64) ** 2 * (mc - 1) / mc)
        elif variant == "23":
            tau = (con + both - dis - xt_only - yt_only) / tot
        else:  # acc23
            tau = (con + both) / tot
    if variant in ("b", "c"):
        tau = np.where((xtie == tot) | (ytie == tot), np.nan, tau)
    tau = np.where(tot > 0, tau, np.nan)
    return np.clip(tau, -1.0, 1.0)


def _kendall_large(x: np.ndarray, y: np.ndarray, variant: str, epsilon: float) -> float:
    """A Kendall variant of two long vectors (no NaN), pairs counted in blocks of rows."""
    n = x.size
    counts = np.zeros(5, dtype=np.int64)
    rows = max(1, _KENDALL_BLOCK // max(1, n))
    for r0 in range(0, n - 1, rows):
        r1 = min(n - 1, r0 + rows)
        sx = np.sign(x[None, :] - x[r0:r1, None])
        dy = y[None, :] - y[r0:r1, None]
        sy = np.where(np.abs(dy) <= epsilon, 0.0, np.sign(dy))
        pair = np.arange(n)[None, :] > np.arange(r0, r1)[:, None]
        for c, v in enumerate(_pair_counts(sx.reshape(1, -1), sy.reshape(1, -1), pair.reshape(1, -1))):
            counts[c] += int(v[0])
    return float(_tau_from_counts(*(counts[c : c + 1] for c in range(5)), np.array([n]), variant)[0])


def _kendall_table(x: np.ndarray, y: np.ndarray, variant: str) -> float | None:
    """A Kendall variant (not tau-c) of two long vectors (no NaN, no tie threshold) from the
    contingency table of their distinct values: concordant / discordant pairs from the table's
    cumulative sums, ties from its margins and cells. None when the table would have more than
    :data:`_KENDALL_TABLE_CELLS_PER_VALUE` cells per value (values nearly all distinct)."""
    xu, xi = np.unique(x, return_inverse=True)
    yu, yi = np.unique(y, return_inverse=True)
    k1, k2 = len(xu), len(yu)
    if k1 * k2 > _KENDALL_TABLE_CELLS_PER_VALUE * x.size:
        return None
    c = np.bincount(xi.ravel() * k2 + yi.ravel(), minlength=k1 * k2).reshape(k1, k2).astype(np.float64)
    above = np.zeros_like(c)  # above[i, j]: values with x > x_i and y > y_j
    above[:-1, :-1] = c[::-1, ::-1].cumsum(0).cumsum(1)[::-1, ::-1][1:, 1:]
    across = np.zeros_like(c)  # across[i, j]: values with x > x_i and y < y_j
    across[:-1, 1:] = c[::-1, :].cumsum(0)[::-1, :].cumsum(1)[1:, :-1]
    rows, cols = c.sum(axis=1), c.sum(axis=0)
    both = float(np.sum(c * (c - 1)) / 2)
    xt, yt = float(np.sum(rows * (rows - 1)) / 2), float(np.sum(cols * (cols - 1)) / 2)
    counts = (np.array([float(np.sum(c * above))]), np.array([float(np.sum(c * across))]),
              np.array([xt - both]), np.array([yt - both]), np.array([both]))
    return float(_tau_from_counts(*counts, np.array([x.size]), variant)[0])


#: elements of one block of resampled contingency tables in :func:`kendall_rows_batch`
_KENDALL_BATCH_CELLS = 250_000
#: rows of at most this many pairs are counted in 32-bit integers (n^2 < 2^31)
_KENDALL_INT32_MAX_N = 46_000


def kendall_rows_batch(x: np.ndarray, y: np.ndarray, variant: str = "b") -> np.ndarray:
    """The Kendall variant of each row of ``x`` (human) and ``y`` (metric), ``B x n`` arrays with NaN
    where a score is absent (pairs present in both count): one value per row, equal to
    ``correlation(x[b], y[b], method="kendall", level="item", variant=variant).value`` (tie
    threshold 0, not tau-c).

    Every row's contingency table is counted at once over the distinct values of all rows (one
    ``bincount``) and the pair counts of all tables come from their cumulative sums, as
    :func:`_kendall_table` does for one row: the integer counts, hence the values, are those of the
    one-row path. Rows that path would not count from a table (64 values or fewer, or too many
    distinct values) are computed one by one by :func:`grouped_correlations`. The bootstrap and the
    permutation test use :func:`kendall_resampled` and :func:`kendall_swapped`, which code the
    values once instead of per row."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or x.shape != y.shape:
        raise InputError(f"x and y must be B x n arrays of one shape, got {x.shape} and {y.shape}", field="metric")
    valid = ~(np.isnan(x) | np.isnan(y))
    xu, xi = _codes(x, valid)
    yu, yi = _codes(y, valid)
    return _kendall_coded(xi, yi, valid, xu, yu, variant)


def kendall_resampled(x: np.ndarray, y: np.ndarray, idx: np.ndarray, variant: str = "b") -> np.ndarray:
    """:func:`kendall_rows_batch` of the resamples ``x[..., idx[b]]``, ``y[..., idx[b]]`` (``x``,
    ``y``: 1-D or ``systems x items``, every cell pooled; ``idx``: ``B x items`` indices)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    valid = ~(np.isnan(x) | np.isnan(y))
    xu, xi = _codes(x, valid)
    yu, yi = _codes(y, valid)

    def take(a: np.ndarray) -> np.ndarray:
        return np.moveaxis(a[..., idx], -2, 0).reshape(idx.shape[0], -1)

    return _kendall_coded(take(xi), take(yi), None if valid.all() else take(valid), xu, yu, variant)


def kendall_swapped(x: np.ndarray, ya: np.ndarray, yb: np.ndarray, masks: np.ndarray,
                    variant: str = "b") -> np.ndarray:
    """:func:`kendall_rows_batch` of ``x`` against ``where(masks[b], yb, ya)`` for each row of
    ``masks`` (``B x items``, over the last axis of ``x``, ``ya``, ``yb``: 1-D or ``systems x
    items``, every cell pooled): the swapped metric of a permutation test."""
    x, ya, yb = (np.asarray(a, dtype=np.float64) for a in (x, ya, yb))
    va, vb = ~(np.isnan(x) | np.isnan(ya)), ~(np.isnan(x) | np.isnan(yb))
    xu, xi = _codes(x, va | vb)
    yu = np.unique(np.concatenate([ya[va], yb[vb]]))
    ia = _small(np.searchsorted(yu, np.where(va, ya, yu[0] if yu.size else 0.0)))
    ib = _small(np.searchsorted(yu, np.where(vb, yb, yu[0] if yu.size else 0.0)))
    mk = masks[:, None, :] if x.ndim == 2 else masks
    rows = masks.shape[0]
    valid = None if va.all() and vb.all() else np.where(mk, vb, va).reshape(rows, -1)
    return _kendall_coded(np.broadcast_to(xi, np.broadcast_shapes(mk.shape, xi.shape)).reshape(rows, -1),
                          np.where(mk, ib, ia).reshape(rows, -1), valid, xu, yu, variant)


def _codes(a: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct values of ``a`` where ``valid``, and each entry's index among them
    (0 where not valid)."""
    levels = np.unique(a[valid])
    return levels, _small(np.searchsorted(levels, np.where(valid, a, levels[0] if levels.size else 0.0)))


def _small(codes: np.ndarray) -> np.ndarray:
    """Codes into fewer than 2**31 values as int32: half the memory traffic when rows are gathered."""
    return codes.astype(np.int32, copy=False)


def _kendall_coded(xi: np.ndarray, yi: np.ndarray, valid: np.ndarray | None, xu: np.ndarray, yu: np.ndarray,
                   variant: str) -> np.ndarray:
    """:func:`kendall_rows_batch` of rows given as indices ``xi``, ``yi`` (``B x n``) into the
    distinct values ``xu``, ``yu``; ``valid`` (``B x n``): the entries that count (None: all)."""
    if variant not in KENDALL_VARIANTS or variant == "c":
        raise InputError(f"the batched Kendall takes variant b, 23 or acc23, not {variant!r}", field="variant")
    rows = xi.shape[0]
    out = np.full(rows, np.nan)
    k1, k2 = len(xu), len(yu)
    if k1 == 0 or k2 == 0:
        return out
    n = valid.sum(axis=1) if valid is not None else np.full(rows, xi.shape[1], dtype=np.int64)
    small = int(n.max(initial=0)) <= _KENDALL_INT32_MAX_N
    step = max(1, _KENDALL_BATCH_CELLS // (k1 * k2))
    for s in range(0, rows, step):
        e = min(rows, s + step)
        v = valid[s:e] if valid is not None else None
        # each entry's cell among the block's tables (in 32 bits when they fit)
        at = np.arange(e - s, dtype=np.int32 if (e - s) * k1 * k2 < 2**31 else np.int64)[:, None]
        codes = (at * k1 + xi[s:e]) * k2 + yi[s:e]
        codes = codes.reshape(-1) if valid is None else codes[v]
        c = np.bincount(codes, minlength=(e - s) * k1 * k2).reshape(e - s, k1, k2)
        if small:  # every sum below is at most n^2 / 2 < 2^31: exact in 32 bits, half the memory traffic
            c = c.astype(np.int32)
        # g[b, i, j]: values of x-row i with y > y_j minus those with y < y_j; weighted by the cells
        # of the x-rows below i and summed: concordant minus discordant pairs (exact integers). One
        # pass over the x-rows (few: a rating scale) with the running sum of the rows below, not a
        # cumulative sum along that short, strided axis
        prefix = np.cumsum(c, axis=2, dtype=c.dtype)
        below = np.zeros((e - s, k2), dtype=c.dtype)
        con_minus_dis_int = np.zeros(e - s, dtype=np.int64)
        for i in range(k1):
            g = prefix[:, i, -1:] - 2 * prefix[:, i, :] + c[:, i, :]
            con_minus_dis_int += np.einsum("bj,bj->b", g, below)
            below += c[:, i, :]
        con_minus_dis = con_minus_dis_int.astype(np.float64)
        margin_x, margin_y = prefix[:, :, -1].astype(np.float64), below.astype(np.float64)
        both = (np.einsum("bij,bij->b", c, c).astype(np.float64) - n[s:e]) / 2
        xt = np.sum(margin_x * (margin_x - 1), axis=1) / 2
        yt = np.sum(margin_y * (margin_y - 1), axis=1) / 2
        nb = n[s:e]
        untied = nb.astype(np.float64) * (nb - 1) / 2 - xt - yt + both  # concordant + discordant
        con = (untied + con_minus_dis) / 2
        tau = _tau_from_counts(con, untied - con, xt - both, yt - both, both, nb, variant)
        dx, dy = (margin_x > 0).sum(axis=1), (margin_y > 0).sum(axis=1)
        undefined = nb < 2
        if variant not in ("23", "acc23"):  # (as grouped_correlations: a constant row is undefined)
            undefined = undefined | (dx == 1) | (dy == 1)
        out[s:e] = np.where(undefined, np.nan, tau)
        # rows the one-row path does not count from a table: as it does, one by one
        table = (nb > _KENDALL_VECTOR_MAX) & (dx * dy <= _KENDALL_TABLE_CELLS_PER_VALUE * nb)
        for b in np.flatnonzero(~undefined & ~table):
            vb = v[b] if v is not None else slice(None)
            out[s + b] = grouped_correlations(xu[xi[s + b, vb]].reshape(1, -1), yu[yi[s + b, vb]].reshape(1, -1),
                                              "kendall", variant)[0][0]
    return out


def _kendall_rows(
    x: np.ndarray, y: np.ndarray, valid: np.ndarray, n: np.ndarray, variant: str, epsilon: float = 0.0
) -> np.ndarray:
    if x.shape[1] <= _KENDALL_VECTOR_MAX:
        return _kendall_small(x, y, valid, variant, epsilon)
    out = np.full(x.shape[0], np.nan)
    for g in range(x.shape[0]):
        if n[g] >= 2:
            v = valid[g]
            fast = _kendall_table(x[g, v], y[g, v], variant) if variant != "c" and epsilon == 0 else None
            if fast is not None:
                out[g] = fast
            elif variant in ("b", "c") and epsilon == 0:
                from scipy import stats  # scipy.stats (~1 s to import): only on this path

                out[g] = stats.kendalltau(x[g, v], y[g, v], variant=variant).statistic
            else:
                out[g] = _kendall_large(x[g, v], y[g, v], variant, epsilon)
    return out


def _check_kendall(method: str, variant: str, epsilon: float) -> float:
    if variant not in KENDALL_VARIANTS:
        raise InputError(f"unknown Kendall variant {variant!r}; choose one of {', '.join(KENDALL_VARIANTS)}",
                         field="variant")
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise InputError(f"epsilon must be a number, got {epsilon!r}", field="epsilon") from None
    if not eps >= 0 or np.isinf(eps):
        raise InputError(f"epsilon must be a finite number >= 0, got {epsilon!r}", field="epsilon")
    if eps > 0 and method != "kendall":
        raise InputError(f"a tie threshold epsilon applies to Kendall only, not {method}", field="epsilon")
    if eps > 0 and variant == "c":
        raise InputError("tau-c is not defined with a tie threshold epsilon (as in mt-metrics-eval)", field="epsilon")
    return eps


def grouped_correlations(
    x: np.ndarray, y: np.ndarray, method: str = "kendall", variant: str = "b", epsilon: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Correlation of every row of ``x`` (human) with the same row of ``y`` (metric) (``NaN`` marks
    absent values, in the same places in both).

    ``variant`` and ``epsilon`` apply to Kendall: see :func:`correlation`.

    Returns:
        (values, counts): the correlation per row (``NaN`` for fewer than two points, or, except for
        the ``23``/``acc23`` variants, a constant row) and the number of points per row.
    """
    if method not in METHODS:
        raise InputError(f"unknown correlation method {method!r}; choose one of {', '.join(METHODS)}", field="method")
    epsilon = _check_kendall(method, variant, epsilon)
    valid = ~np.isnan(x)
    n = valid.sum(axis=1)
    if x.shape[1] == 0:
        return np.full(x.shape[0], np.nan), n
    if method == "pearson":
        vals = _pearson_rows(x, y, valid, n)
    elif method == "spearman":
        vals = _spearman_rows(x, y, valid, n)
    else:
        vals = _kendall_rows(x, y, valid, n, variant, epsilon)
    undefined = n < 2
    if not (method == "kendall" and variant in ("23", "acc23")):  # tau_23 / acc_23 are defined on constants
        undefined = undefined | _constant_rows(x, valid) | _constant_rows(y, valid)
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
    variant: Literal["b", "c", "23", "acc23"] = "b",
    *,
    epsilon: float = 0.0,
    average: Literal["macro", "micro"] = "macro",
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
        variant: Kendall variant, by mt-metrics-eval's ``KendallVariants`` names: "b" (Kendall 1945) or
            "c" (Stuart 1953), as in ``scipy.stats.kendalltau``; "23" (tau_23 of Deutsch et al. 2023:
            ``(con + both_tied - dis - human_only_tied - metric_only_tied) / pairs``) or "acc23"
            (``(con + both_tied) / pairs``, pairwise accuracy with ties). tau_23 / acc_23 are
            defined on constant vectors too.
        epsilon: metric tie threshold for Kendall (>= 0, metric units): a metric pair with
            ``|m_i - m_j| <= epsilon`` is a tie (mt-metrics-eval ``KendallVariants(epsilon=...)``);
            human ties are exact equality. 0 (default) = only equal scores tie. Not with tau-c.
        average: how group values are averaged: "macro" (unweighted mean over groups, default) or
            "micro" (weighted by each group's number of points, mt-metrics-eval
            ``AverageCorrelation(macro=False)``).

    Returns:
        :class:`CorrelationResult`; ``value`` is the mean (``average``) over groups with a defined
        correlation, in [-1, 1] ([0, 1] for acc23), or ``NaN`` if there is none.

    Raises:
        InputError: unknown option, mismatched shapes, non-numeric scores.
    """
    if level not in LEVELS:
        raise InputError(f"unknown level {level!r}; choose 'system' or 'item'", field="level")
    if grouping not in GROUPINGS:
        raise InputError(f"unknown grouping {grouping!r}; choose one of {', '.join(GROUPINGS)}", field="grouping")
    h, m = paired_scores(human, metric)
    system_score = "" if level != "system" else ("mean of items" if h.ndim == 2 else "as given")
    if level == "system":
        if grouping != "none":
            raise InputError("system-level correlation takes grouping='none'", field="grouping")
        h, m = system_means(h), system_means(m)
    elif h.ndim == 1 and grouping != "none":
        raise InputError(f"grouping={grouping!r} needs a 2-D systems x items array", field="grouping")
    if average not in AVERAGES:
        raise InputError(f"unknown average {average!r}; choose 'macro' or 'micro'", field="average")
    x, y = groups_matrix(h, m, grouping)
    vals, counts = grouped_correlations(x, y, method, variant, epsilon)
    ok = ~np.isnan(vals)
    big = counts >= 2
    if not ok.any():
        value = float("nan")
    elif average == "micro":
        value = float(np.sum(counts[ok] * vals[ok]) / np.sum(counts[ok]))
    else:
        value = float(np.mean(vals[ok]))
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
        system_score=system_score,
    )
