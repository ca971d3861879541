"""Pairwise accuracy with tie calibration (Deutsch, Foster & Freitag, 2023, "Ties Matter:
Meta-Evaluating Modern Metrics with Pairwise Accuracy and Tie Calibration", EMNLP).

Pairwise accuracy counts the pairs of scored outputs that a metric orders like the humans do, and
gives credit for predicting a tie: a human tie is exact equality of the human scores; a metric tie is
``|m_i - m_j| <= epsilon``. A pair is correct when both tie, or when neither ties and both orders
agree. Tie calibration picks the epsilon that maximises the accuracy (the smallest one when several
do). The paper's acc_eq statistic is this accuracy; mt-metrics-eval's ``tau_optimization.py`` is the
reference implementation of the search.

The search here is exact (no sampling) and needs neither a Python loop over pairs nor a sort of all
pair differences: pair differences are streamed in blocks, counted into fine buckets (the top bits
of their IEEE-754 representation, 1,024 buckets per power of two, which preserves order), and only the
few buckets whose upper bound can reach the best accuracy found so far are sorted. 10,000 items in
one group (~50 million pairs) take about 1.5 s of CPU time; see ``benchmarks/tie_calibration.py``.
Inputs of at most 100,000 pairs are sorted whole, and their curve lists every candidate epsilon.
Above :data:`SEARCH_MIN_PAIRS` pairs no pair is visited one by one: :mod:`evalign.meta.tie_search`
counts the pairs at any epsilon in O(n log n) and finds the same best epsilon by branch and bound
(100,000 items, 5 billion pairs: a few seconds).

``pairwise_preference_accuracy`` (and ``calibrate_preference_epsilon``) is the same idea for A-vs-B preference data (pairwise human labels,
e.g. PandaLM, MT-Bench human judgements), where a metric or judge scores each response separately.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from evalign.errors import InputError
from evalign.meta.agreement import majority_vote
from evalign.meta.correlation import GROUPINGS, as_scores, groups_matrix, paired_scores
from evalign.meta.tie_search import counts_at, search_curve

Grouping = Literal["none", "item", "system"]

#: pair-difference bucket: top 22 bits of the float64 (11 exponent + 10 mantissa bits) -> 1,024 per binade.
_BUCKET_SHIFT = np.uint64(42)
#: target number of pair slots per streamed block (memory: ~8 bytes x a few arrays each).
_BLOCK_ELEMS = 2_000_000
#: pair counts up to this are handled by one sort of all differences (the curve lists every candidate).
_EXACT_MAX_PAIRS = 100_000
#: pair counts above this are searched without visiting every pair (:mod:`evalign.meta.tie_search`).
SEARCH_MIN_PAIRS = 20_000_000

_OTHER, _HTIE, _CONC = 0, 1, 2
#: the codes of :func:`preference_pairs`: a human tie; the metric's sign agrees with a human preference
HUMAN_TIE, CONCORDANT = _HTIE, _CONC


@dataclass(frozen=True)
class PairwiseAccuracyResult:
    """Pairwise accuracy with ties (acc_eq of Deutsch et al., 2023).

    Attributes:
        accuracy: unweighted mean over groups of (correct pairs / pairs in the group), in [0, 1];
            NaN when no group has a pair.
        epsilon: metric tie threshold used (>= 0): ``|m_i - m_j| <= epsilon`` is a metric tie.
        n_pairs: pairs with both scores present, over all groups.
        n_groups: groups with at least one pair (the ones averaged).
        metric_tie_rate: fraction of all pairs that the metric ties at ``epsilon`` (pooled over groups).
        human_tie_rate: fraction of all pairs with equal human scores (pooled over groups).
        grouping: "none", "item" or "system".
        calibrated: True when ``epsilon`` was chosen here by tie calibration.
        n_skipped_groups: groups left out because they have fewer than two paired values.
        group_accuracies: accuracy of every group (NaN for skipped groups), in group order.
    """

    accuracy: float
    epsilon: float
    n_pairs: int
    n_groups: int
    metric_tie_rate: float
    human_tie_rate: float
    grouping: str = "none"
    calibrated: bool = False
    n_skipped_groups: int = 0
    group_accuracies: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False, compare=False)


@dataclass(frozen=True)
class EpsilonCalibration:
    """Result of tie calibration: the best epsilon and the accuracy-vs-epsilon curve.

    Attributes:
        epsilon: the smallest epsilon with the highest mean pairwise accuracy.
        accuracy: that accuracy, in [0, 1] (NaN when there are no pairs).
        epsilons: increasing epsilons of the curve (always starts with 0).
        accuracies: accuracy at each of ``epsilons`` (exact values).
        tie_rates: fraction of pairs the metric ties at each of ``epsilons``.
        n_pairs: number of pairs; n_groups: number of groups with a pair.
        n_human_ties: pairs with equal human scores.
        exhaustive: True when the curve lists every candidate (0 and every distinct pair
            difference). On large inputs the curve lists 0, the largest difference in each bucket
            of differences (1,024 buckets per power of two) and every candidate inside the buckets
            that were searched; above ``SEARCH_MIN_PAIRS`` pairs it lists 0, the epsilons the search
            evaluated and every candidate in the intervals it enumerated. Every listed point is
            still exact, and the best epsilon is exact.
    """

    epsilon: float
    accuracy: float
    epsilons: np.ndarray = field(repr=False, compare=False)
    accuracies: np.ndarray = field(repr=False, compare=False)
    tie_rates: np.ndarray = field(repr=False, compare=False)
    n_pairs: int = 0
    n_groups: int = 0
    exhaustive: bool = True
    n_human_ties: int = 0


@dataclass(frozen=True)
class PreferenceAccuracyResult:
    """Agreement of a metric's preference (higher score wins) with human A-vs-B preferences.

    Attributes:
        accuracy_with_ties: fraction of all labelled pairs where the metric's call (A, B or tie) equals
            the human one, tie being a class; in [0, 1].
        accuracy_without_ties: over the pairs where the human prefers one response only, the fraction
            where the metric prefers the same one; a metric tie counts as wrong there.
        epsilon: metric tie threshold: ``|score_a - score_b| <= epsilon`` is a metric tie.
        n: pairs with a human label and both scores; n_human_ties: those the humans call a tie.
        metric_tie_rate: fraction of the ``n`` pairs the metric calls a tie.
        n_missing: pairs left out (no human label, or a score missing).
        calibrated: True when ``epsilon`` was chosen here.
        n_metric_ties_on_preferences: metric ties among the pairs with a human preference.
        correct: per input pair, 1.0 if the metric's call equals the human label, 0.0 if not, NaN
            for pairs left out (lets a bootstrap over pairs resample without recomputing).
    """

    accuracy_with_ties: float
    accuracy_without_ties: float
    epsilon: float
    n: int
    n_human_ties: int
    metric_tie_rate: float
    n_missing: int = 0
    calibrated: bool = False
    n_metric_ties_on_preferences: int = 0
    correct: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False, compare=False)


# --------------------------------------------------------------------------------------------------
# Pair streaming
# --------------------------------------------------------------------------------------------------


@dataclass
class _Groups:
    """Groups sorted by metric score, NaN (absent) at the end of every row."""

    human: np.ndarray  # (G, n)
    metric: np.ndarray  # (G, n)
    sizes: np.ndarray  # (G,) paired values per group
    n_pairs: np.ndarray  # (G,) pairs per group
    weights: np.ndarray  # (G,) weight of one pair of the group in accuracy units
    units: float  # accuracy = units_sum / units
    exact: bool  # weights are integers: sums are exact
    group_index: np.ndarray  # (G,) index of each group in the caller's grouping

    @property
    def total_pairs(self) -> int:
        return int(self.n_pairs.sum())


def _prepare(mats: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[_Groups, int]:
    """Stack ``groups x members`` matrices (NaN = absent) into sorted, padded active groups."""
    width = max((x.shape[1] for x, _ in mats), default=0)
    hs, ms = [], []
    for x, y in mats:
        pad = width - x.shape[1]
        hs.append(np.pad(x, ((0, 0), (0, pad)), constant_values=np.nan))
        ms.append(np.pad(y, ((0, 0), (0, pad)), constant_values=np.nan))
    h = np.concatenate(hs, axis=0) if hs else np.empty((0, 0))
    m = np.concatenate(ms, axis=0) if ms else np.empty((0, 0))
    n_all = h.shape[0]
    sizes = np.sum(~np.isnan(m), axis=1).astype(np.int64)
    keep = np.flatnonzero(sizes >= 2)
    h, m, sizes = h[keep], m[keep], sizes[keep]
    if h.size:
        width = int(sizes.max())
        order = np.argsort(m, axis=1, kind="stable")[:, :width]
        h = np.take_along_axis(h, order, axis=1)
        m = np.take_along_axis(m, order, axis=1)
    n_pairs = sizes * (sizes - 1) // 2
    weights, units, exact = _weights(n_pairs)
    groups = _Groups(h, m, sizes, n_pairs, weights, units, exact, keep)
    return groups, n_all


def _weights(n_pairs: np.ndarray) -> tuple[np.ndarray, float, bool]:
    """Per-pair weights so that the mean over groups of (correct / pairs) = sum(weights) / units.

    Integer weights (lcm of the group sizes / size) keep every sum exact in float64 when they fit;
    otherwise the weights are 1 / pairs and sums are compared with a tolerance.
    """
    g = len(n_pairs)
    if g == 0:
        return np.empty(0), 1.0, True
    lcm = 1
    for p in np.unique(n_pairs).tolist():
        lcm = math.lcm(lcm, int(p))
        if lcm * g * 4 > 2**53:
            return 1.0 / n_pairs.astype(np.float64), float(g), False
    return (lcm // n_pairs).astype(np.float64), float(lcm * g), True


def _blocks(groups: _Groups) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """Yield (d, code, group) for every pair i < j of every group, in blocks.

    ``d = m_j - m_i >= 0`` (rows are sorted by metric, so this equals ``|m_i - m_j|`` bit for bit);
    ``code`` is 1 for a human tie, 2 for a concordant pair with different metric scores, else 0;
    ``group`` is the row index of each pair's group (None when there is one group).
    """
    h, m = groups.human, groups.metric
    g, n = m.shape
    block_elems = _BLOCK_ELEMS
    if g == 0 or n < 2:
        return
    full = bool(np.all(groups.sizes == n))
    row = 0
    while row < n - 1:
        cols = n - row - 1
        rows = max(1, min(n - 1 - row, block_elems // max(1, g * cols)))
        r1 = row + rows
        hs, ms = h[:, row:r1, None], m[:, row:r1, None]
        hc, mc = h[:, None, row + 1 :], m[:, None, row + 1 :]
        d = mc - ms
        d += 0.0  # -0.0 (from -0.0 - 0.0) becomes +0.0: one bit pattern for zero
        tri = np.arange(cols)[None, :] >= np.arange(rows)[:, None]
        sel = np.broadcast_to(tri, d.shape) if full else (tri & ~np.isnan(d))
        if full and rows == 1:
            dd = d.reshape(-1)
            code = (hc == hs).reshape(-1).astype(np.int8)
            code[(hc > hs).reshape(-1) & (dd > 0)] = _CONC
        else:
            dd = d[sel]
            code = (hc == hs)[sel].astype(np.int8)
            code[((hc > hs) & (d > 0))[sel]] = _CONC
        grp = None
        if g > 1:
            grp = np.broadcast_to(np.arange(g)[:, None, None], d.shape)[sel]
        yield dd, code, grp
        row = r1


def _bucket(d: np.ndarray, base_key: int) -> np.ndarray:
    """Order-preserving bucket of non-negative differences: 0 for 0, else the top bits of the float64
    minus ``base_key`` (the top bits of the smallest positive difference) plus 1."""
    key = (d.view(np.uint64) >> _BUCKET_SHIFT).astype(np.intp)
    key -= base_key - 1
    key[d == 0] = 0
    return key


def _key_range(groups: _Groups) -> tuple[int, int]:
    """(base_key, number of buckets) covering every pair difference of the groups.

    Rows are sorted, so the smallest positive pair difference is a positive gap between neighbours
    and the largest is max - min of a row.
    """
    gaps = np.diff(groups.metric, axis=1)
    pos = gaps[gaps > 0]
    if pos.size == 0:
        return 0, 1
    lo = np.array([pos.min()])
    hi = np.array([np.nanmax(np.nanmax(groups.metric, axis=1) - np.nanmin(groups.metric, axis=1))])
    klo = int((lo.view(np.uint64) >> _BUCKET_SHIFT)[0])
    khi = int((hi.view(np.uint64) >> _BUCKET_SHIFT)[0])
    return klo, khi - klo + 2


# --------------------------------------------------------------------------------------------------
# Calibration core
# --------------------------------------------------------------------------------------------------


def _exact_curve(
    d: np.ndarray, code: np.ndarray, w: np.ndarray, base: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(epsilons, accuracy units, metric tie counts) at 0 and every distinct ``d`` (one sort).

    ``d``: pair differences >= 0; ``code``: pair kinds (``_HTIE``, ``_CONC``, ``_OTHER``); ``w``: pair
    weights; ``base``: accuracy units with no metric tie (the weight of all concordant pairs).
    """
    order = np.argsort(d, kind="stable")
    ds = d[order]
    contrib = np.where(code[order] == _HTIE, w[order], np.where(code[order] == _CONC, -w[order], 0.0))
    cum = np.cumsum(contrib)
    last = np.flatnonzero(np.r_[ds[1:] != ds[:-1], True]) if ds.size else np.empty(0, dtype=np.intp)
    eps = ds[last]
    val = base + cum[last]
    ties = last + 1
    if eps.size == 0 or eps[0] != 0.0:
        eps = np.r_[0.0, eps]
        val = np.r_[base, val]
        ties = np.r_[0, ties]
    return eps, val, ties


def _unit_curve(d: np.ndarray, code: np.ndarray, base: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_exact_curve` with every pair weighing 1, from sorted values and counts (no argsort): the
    same epsilons, accuracy units (integers, exact) and tie counts."""
    ds = np.sort(d)
    last = np.flatnonzero(np.r_[ds[1:] != ds[:-1], True]) if ds.size else np.empty(0, dtype=np.intp)
    eps = ds[last]
    ht, conc = np.sort(d[code == _HTIE]), np.sort(d[code == _CONC])
    gained = np.searchsorted(ht, eps, side="right") - np.searchsorted(conc, eps, side="right")
    val = base + gained.astype(np.float64)
    ties = last + 1
    if eps.size == 0 or eps[0] != 0.0:
        eps = np.r_[0.0, eps]
        val = np.r_[base, val]
        ties = np.r_[0, ties]
    return eps, val, ties


def _pair_weights(groups: _Groups, grp: np.ndarray | None, size: int) -> np.ndarray:
    if grp is None:
        return np.full(size, groups.weights[0] if groups.weights.size else 1.0)
    return groups.weights[grp]


def _calibrate(groups: _Groups) -> EpsilonCalibration:
    total = groups.total_pairs
    n_groups = len(groups.sizes)
    if total == 0:
        z = np.zeros(1)
        return EpsilonCalibration(0.0, float("nan"), z, np.full(1, np.nan), z, 0, 0, True)
    tol = 0.0 if groups.exact else 1e-10 * groups.units
    if total > SEARCH_MIN_PAIRS and not np.isnan(groups.human[~np.isnan(groups.metric)]).any():
        c = search_curve(groups.human, groups.metric, groups.sizes, groups.weights, tol)
        return _finish(c.epsilons, c.values, c.ties, groups, total, n_groups, tol, False, c.n_human_ties)
    if total <= _EXACT_MAX_PAIRS:
        parts = list(_blocks(groups))
        d = np.concatenate([p[0] for p in parts])
        code = np.concatenate([p[1] for p in parts])
        grps = [p[2] for p in parts if p[2] is not None]
        w = _pair_weights(groups, np.concatenate(grps) if grps else None, d.size)
        base = float(np.sum(np.where(code == _CONC, w, 0.0)))
        eps, val, ties = _exact_curve(d, code, w, base)
        n_ht = int(np.count_nonzero(code == _HTIE))
        return _finish(eps, val, ties, groups, total, n_groups, tol, True, n_ht)

    # Pass 1: per bucket, weighted human-tie and concordant sums, pair counts, min and max difference.
    base_key, nb = _key_range(groups)
    tw = np.zeros(nb)
    cw = np.zeros(nb)
    cnt = np.zeros(nb, dtype=np.int64)
    lo = np.full(nb, np.inf)
    hi = np.full(nb, -np.inf)
    n_ht = 0
    for d, code, grp in _blocks(groups):
        key = _bucket(d, base_key)
        if grp is None:
            c3 = np.bincount(key * 3 + code, minlength=3 * nb).reshape(nb, 3)
            tw += c3[:, _HTIE] * groups.weights[0]
            cw += c3[:, _CONC] * groups.weights[0]
            cnt += c3.sum(axis=1)
            n_ht += int(c3[:, _HTIE].sum())
        else:
            n_ht += int(np.count_nonzero(code == _HTIE))
            w = groups.weights[grp]
            tw += np.bincount(key, weights=np.where(code == _HTIE, w, 0.0), minlength=nb)
            cw += np.bincount(key, weights=np.where(code == _CONC, w, 0.0), minlength=nb)
            cnt += np.bincount(key, minlength=nb)
        np.minimum.at(lo, key, d)
        np.maximum.at(hi, key, d)
    base = float(cw.sum())
    s = tw - cw
    cum = np.cumsum(s)
    before = base + cum - s
    end = base + cum
    ccum = np.cumsum(cnt)
    nonempty = cnt > 0
    acc0 = float(end[0]) if cnt[0] else base  # epsilon 0 ties exactly the zero differences (bucket 0)
    best = max(float(end[nonempty].max()), acc0)
    # A bucket can hold a better (or equally good, smaller) epsilon than ``best`` only if its value
    # before it plus all its human-tie weight reaches ``best``; buckets of one distinct value need no sort.
    refine = nonempty & (lo < hi) & (before + tw >= best - tol)

    # Exact points: 0, the end of every non-empty bucket (its largest difference).
    eps_parts = [np.zeros(1), hi[nonempty & ~refine]]
    val_parts = [np.array([acc0]), end[nonempty & ~refine]]
    tie_parts = [np.array([cnt[0]]), ccum[nonempty & ~refine]]

    if refine.any():
        # Pass 2: collect the pairs of the buckets that may hold the best epsilon, sort only those.
        ds, codes, ws = [], [], []
        for d, code, grp in _blocks(groups):
            keep = refine[_bucket(d, base_key)]
            if keep.any():
                ds.append(d[keep])
                codes.append(code[keep])
                ws.append(_pair_weights(groups, None if grp is None else grp[keep], int(keep.sum())))
        d = np.concatenate(ds)
        code = np.concatenate(codes)
        w = np.concatenate(ws)
        order = np.argsort(d, kind="stable")
        d, code, w = d[order], code[order], w[order]
        key = _bucket(d, base_key)
        contrib = np.where(code == _HTIE, w, np.where(code == _CONC, -w, 0.0))
        cum_in = np.cumsum(contrib)
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        start_cum = np.repeat(cum_in[first] - contrib[first], np.diff(np.r_[first, d.size]))
        start_cnt = np.repeat(first, np.diff(np.r_[first, d.size]))
        last = np.flatnonzero(np.r_[d[1:] != d[:-1], True])
        eps_parts.append(d[last])
        val_parts.append(before[key[last]] + cum_in[last] - start_cum[last])
        tie_parts.append((ccum - cnt)[key[last]] + (last + 1 - start_cnt[last]))
    eps = np.concatenate(eps_parts)
    val = np.concatenate(val_parts)
    ties = np.concatenate(tie_parts)
    order = np.argsort(eps, kind="stable")
    eps, val, ties = eps[order], val[order], ties[order]
    dup = np.r_[False, eps[1:] == eps[:-1]]  # 0 listed twice when a zero difference exists
    return _finish(eps[~dup], val[~dup], ties[~dup], groups, total, n_groups, tol, False, n_ht)


def _finish(
    eps: np.ndarray,
    val: np.ndarray,
    ties: np.ndarray,
    groups: _Groups,
    total: int,
    n_groups: int,
    tol: float,
    exhaustive: bool,
    n_human_ties: int,
) -> EpsilonCalibration:
    top = val.max()
    i = int(np.flatnonzero(val >= top - tol)[0])
    acc = val / groups.units
    return EpsilonCalibration(
        epsilon=float(eps[i]),
        accuracy=float(acc[i]),
        epsilons=eps,
        accuracies=acc,
        tie_rates=ties / total,
        n_pairs=total,
        n_groups=n_groups,
        exhaustive=exhaustive,
        n_human_ties=n_human_ties,
    )


def _evaluate(groups: _Groups, epsilon: float) -> tuple[np.ndarray, int, int]:
    """Correct pairs per group at ``epsilon``, metric ties and human ties over all pairs."""
    if groups.total_pairs > SEARCH_MIN_PAIRS and not np.isnan(groups.human[~np.isnan(groups.metric)]).any():
        return counts_at(groups.human, groups.metric, groups.sizes, epsilon)
    g = len(groups.sizes)
    correct = np.zeros(g, dtype=np.int64)
    mties = 0
    hties = 0
    for d, code, grp in _blocks(groups):
        tie = d <= epsilon
        ok = np.where(tie, code == _HTIE, code == _CONC)
        mties += int(tie.sum())
        hties += int((code == _HTIE).sum())
        if grp is None:
            correct[0] += int(ok.sum())
        else:
            correct += np.bincount(grp[ok], minlength=g)
    return correct, mties, hties


def _check_grouping(grouping: str, ndim: int) -> None:
    if grouping not in GROUPINGS:
        raise InputError(f"unknown grouping {grouping!r}; choose one of {', '.join(GROUPINGS)}", field="grouping")
    if ndim == 1 and grouping != "none":
        raise InputError(f"grouping={grouping!r} needs a 2-D systems x items array", field="grouping")


def _check_epsilon(epsilon: float) -> float:
    try:
        e = float(epsilon)
    except (TypeError, ValueError):
        raise InputError(f"epsilon must be a number, got {epsilon!r}", field="epsilon") from None
    if not (e >= 0.0) or math.isinf(e):
        raise InputError(f"epsilon must be a finite number >= 0, got {epsilon!r}", field="epsilon")
    return e


def _groups_of(human: object, metric: object, grouping: str) -> tuple[_Groups, int]:
    h, m = paired_scores(human, metric)
    _check_grouping(grouping, h.ndim)
    return _prepare([groups_matrix(h, m, grouping)])


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def calibrate_epsilon(human: object, metric: object, grouping: Grouping = "none") -> EpsilonCalibration:
    """Tie calibration: the epsilon that maximises mean pairwise accuracy (Deutsch et al., 2023, sec. 5).

    Candidates are 0 and every distinct ``|m_i - m_j|`` over all pairs of all groups; the one with
    the highest mean accuracy over groups wins, the smallest on ties. One epsilon serves all groups.

    Args:
        human, metric: ``systems x items`` arrays (NaN = missing) or 1-D vectors (one group).
        grouping: "none" (all cells one group), "item" (pairs of systems within each item) or
            "system" (pairs of items within each system).

    Returns:
        :class:`EpsilonCalibration` with the epsilon, its accuracy and the accuracy-vs-epsilon curve.
    """
    groups, _ = _groups_of(human, metric, grouping)
    return _calibrate(groups)


def calibrate_epsilon_over(
    tasks: Sequence[tuple[object, object]], grouping: Grouping = "none"
) -> EpsilonCalibration:
    """Tie calibration over several tasks at once: one epsilon maximising the mean accuracy over
    the groups of all tasks (with ``grouping="none"`` each task is one group).

    Use it to calibrate on a whole benchmark and then report each task with
    ``pairwise_accuracy(h, m, epsilon=cal.epsilon)``.

    Args:
        tasks: (human, metric) pairs, each as for :func:`calibrate_epsilon`.
    """
    mats = []
    for h0, m0 in tasks:
        h, m = paired_scores(h0, m0)
        _check_grouping(grouping, h.ndim)
        mats.append(groups_matrix(h, m, grouping))
    groups, _ = _prepare(mats)
    return _calibrate(groups)


def pairwise_accuracy(
    human: object,
    metric: object,
    grouping: Grouping = "none",
    epsilon: float | None = None,
) -> PairwiseAccuracyResult:
    """Pairwise accuracy with ties, acc_eq (Deutsch, Foster & Freitag, 2023).

    Over all pairs i < j of a group with both scores present: a human tie is ``h_i == h_j``; a metric
    tie is ``|m_i - m_j| <= epsilon``. A pair is correct when both tie, or neither ties and
    ``sign(h_i - h_j) == sign(m_i - m_j)``. The accuracy of a group is correct / all its pairs; the
    result is the unweighted mean over groups with at least one pair. Both scores must have higher =
    better (negate ranks or error rates first).

    Args:
        human, metric: ``systems x items`` arrays (NaN = missing), or 1-D vectors (one group: e.g.
            per-system scores for system-level pairwise accuracy, Kocmi et al., 2021).
        grouping: "none" (pool all cells), "item" (pairs of systems within each item) or "system"
            (pairs of items within each system).
        epsilon: metric tie threshold (>= 0, in metric units). None: calibrate it here with
            :func:`calibrate_epsilon`. Pass an epsilon calibrated elsewhere (e.g. over all tasks with
            :func:`calibrate_epsilon_over`) to report per task. ``epsilon=0`` counts only exactly equal
            metric scores as ties.

    Returns:
        :class:`PairwiseAccuracyResult`.
    """
    groups, n_all = _groups_of(human, metric, grouping)
    calibrated = epsilon is None
    total = groups.total_pairs
    if epsilon is None:
        cal = _calibrate(groups)
        eps = cal.epsilon
        if len(groups.sizes) == 1:  # one group: the calibration already has the exact counts
            i = int(np.searchsorted(cal.epsilons, eps))
            correct = np.array([round(cal.accuracy * total)], dtype=np.int64)
            mties, hties = round(float(cal.tie_rates[i]) * total), cal.n_human_ties
        else:
            correct, mties, hties = _evaluate(groups, eps)
    else:
        eps = _check_epsilon(epsilon)
        correct, mties, hties = _evaluate(groups, eps)
    acc_g = correct / np.maximum(groups.n_pairs, 1)
    group_acc = np.full(n_all, np.nan)
    group_acc[groups.group_index] = acc_g
    return PairwiseAccuracyResult(
        accuracy=float(acc_g.mean()) if acc_g.size else float("nan"),
        epsilon=eps,
        n_pairs=total,
        n_groups=len(acc_g),
        metric_tie_rate=mties / total if total else float("nan"),
        human_tie_rate=hties / total if total else float("nan"),
        grouping=grouping,
        calibrated=calibrated,
        n_skipped_groups=n_all - len(acc_g),
        group_accuracies=group_acc,
    )


def preference_labels(human_prefs: object) -> np.ndarray:
    """The checked human label of each pair (``(n,)`` codes, or ``(n, k)`` annotators merged by
    majority vote, no majority = tie): +1, -1, 0 or NaN (no label)."""
    prefs = as_scores(human_prefs, "human_prefs")
    if prefs.ndim == 2:
        prefs = majority_vote(prefs, fallback=0.0)
    present = prefs[~np.isnan(prefs)]
    if not np.all(np.isin(present, (-1.0, 0.0, 1.0))):
        raise InputError("preference labels must be +1 (A better), -1 (B better), 0 (tie) or NaN", field="human_prefs")
    return prefs


def preference_pairs(
    human_prefs: object, score_a: object, score_b: object, *, labels: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(valid mask, human label, |a - b|, pair code) of the usable pairs of a preference data set
    (arguments as for :func:`pairwise_preference_accuracy`): the mask has one entry per pair, the
    others one per usable pair; code :data:`HUMAN_TIE`, :data:`CONCORDANT` or 0 (neither).
    ``labels``: :func:`preference_labels` of ``human_prefs`` when known (then ``human_prefs`` is not read)."""
    prefs = preference_labels(human_prefs) if labels is None else labels
    a = as_scores(score_a, "score_a")
    b = as_scores(score_b, "score_b")
    for name, arr in (("score_a", a), ("score_b", b)):
        if arr.shape != prefs.shape:
            raise InputError(f"expected {prefs.shape[0]} scores, one per pair, got shape {arr.shape}", field=name)
    valid = ~(np.isnan(prefs) | np.isnan(a) | np.isnan(b))
    if valid.all():
        p, diff = prefs, a - b
    else:
        p, diff = prefs[valid], a[valid] - b[valid]
    code = (diff * p > 0).view(np.int8) * np.int8(_CONC)  # p = +1 / -1: the metric's sign agrees
    code += (p == 0).view(np.int8) * np.int8(_HTIE)  # p = 0 (then diff * p is 0)
    return valid, p, np.abs(diff), code


def preference_units(
    human: object, metric: object, epsilon: float, ties: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Per-pair terms of preference accuracy at a fixed ``epsilon``, for resampling and permutation.

    Args:
        human: ``annotators x pairs`` preference codes (+1 A, -1 B, 0 tie, NaN none; merged by
            majority vote as in :func:`pairwise_preference_accuracy`) or a 1-D vector of codes.
        metric: ``2 x pairs``: row 0 = score of response A, row 1 = of response B (NaN = missing).
        epsilon: metric tie threshold (>= 0).
        ties: True for the accuracy with ties, False for the accuracy without ties (human ties do
            not count; a metric tie on a human preference is wrong).

    Returns:
        ``(num, den)``, float vectors of length ``pairs`` with values 0 or 1: ``den`` = the pair counts,
        ``num`` = it counts and the metric's call is right. The accuracy over any multiset of pairs
        with multiplicities ``w`` is ``w @ num / (w @ den)``; on one pair it equals
        :func:`pairwise_preference_accuracy` of that pair alone (``den = 0`` where that is NaN).
    """
    h = as_scores(human, "human_prefs")
    m = as_scores(metric, "metric")
    if m.ndim != 2 or m.shape[0] != 2:
        raise InputError(f"metric must be 2 x pairs (scores of A and B), got shape {m.shape}", field="metric")
    eps = _check_epsilon(epsilon)
    valid, p, dist, code = preference_pairs(h.T if h.ndim == 2 else h, m[0], m[1])
    correct = np.where(dist <= eps, code == _HTIE, code == _CONC)
    counts = np.ones(p.size, dtype=bool) if ties else p != 0
    num = np.zeros(valid.shape)
    den = np.zeros(valid.shape)
    num[valid] = correct & counts
    den[valid] = counts
    return num, den


def calibrate_preference_epsilon(human_prefs: object, score_a: object, score_b: object) -> EpsilonCalibration:
    """Tie calibration for A-vs-B preference data: the smallest epsilon maximising the accuracy with
    ties of :func:`pairwise_preference_accuracy`, and the accuracy-vs-epsilon curve (every candidate:
    0 and each distinct ``|score_a - score_b|``). Arguments as for :func:`pairwise_preference_accuracy`.
    """
    _, _, dist, code = preference_pairs(human_prefs, score_a, score_b)
    return _preference_calibration(dist, code)


def _preference_calibration(dist: np.ndarray, code: np.ndarray) -> EpsilonCalibration:
    """:func:`calibrate_preference_epsilon` of the usable pairs' ``|a - b|`` and codes."""
    n = int(dist.size)
    n_ht = int(np.count_nonzero(code == _HTIE))
    if n == 0:
        z = np.zeros(1)
        return EpsilonCalibration(0.0, float("nan"), z, np.full(1, np.nan), z, 0, 0, True, 0)
    eps, val, ties = _unit_curve(dist, code, base=float(np.count_nonzero(code == _CONC)))
    i = int(np.argmax(val))  # integer counts: exact; the first maximum is the smallest epsilon
    return EpsilonCalibration(
        epsilon=float(eps[i]),
        accuracy=float(val[i] / n),
        epsilons=eps,
        accuracies=val / n,
        tie_rates=ties / n,
        n_pairs=n,
        n_groups=1,
        exhaustive=True,
        n_human_ties=n_ht,
    )


def pairwise_preference_accuracy(
    human_prefs: object,
    score_a: object,
    score_b: object,
    epsilon: float | None = None,
) -> PreferenceAccuracyResult:
    """Accuracy of a metric's A-vs-B preference against human preference labels with ties.

    The metric prefers the response with the higher score, and calls a tie when
    ``|score_a - score_b| <= epsilon``. Several annotators are merged by majority vote
    (:func:`evalign.meta.agreement.majority_vote`; no majority = tie).

    * accuracy with ties: over all labelled pairs, the metric's call (A, B, tie) equals the human one
      (tie is a class, as in the pairwise accuracy of Deutsch et al., 2023);
    * accuracy without ties: over the pairs where the human label is A or B only; a metric tie counts
      as wrong there (it is not a preference for the right response).

    Args:
        human_prefs: shape (n,) or (n, k annotators); +1 = A better, -1 = B better, 0 = tie, NaN = no label.
        score_a, score_b: the metric's scores of response A and B, shape (n,); NaN = missing.
        epsilon: metric tie threshold >= 0; None calibrates it on these pairs (the smallest epsilon
            maximising accuracy with ties; candidates are 0 and every distinct ``|a - b|``).

    Returns:
        :class:`PreferenceAccuracyResult`.
    """
    valid, p, dist, code = preference_pairs(human_prefs, score_a, score_b)
    n = int(p.size)
    calibrated = epsilon is None
    eps = _preference_calibration(dist, code).epsilon if epsilon is None else _check_epsilon(epsilon)
    tie = dist <= eps
    correct = np.where(tie, code == _HTIE, code == _CONC)
    pref_mask = p != 0
    n_pref = int(pref_mask.sum())
    per_pair = np.full(valid.shape, np.nan)
    per_pair[valid] = correct
    return PreferenceAccuracyResult(
        accuracy_with_ties=float(correct.mean()) if n else float("nan"),
        accuracy_without_ties=float(correct[pref_mask].mean()) if n_pref else float("nan"),
        epsilon=eps,
        n=n,
        n_human_ties=n - n_pref,
        metric_tie_rate=float(tie.mean()) if n else float("nan"),
        n_missing=int(valid.size - n),
        calibrated=calibrated,
        n_metric_ties_on_preferences=int((tie & pref_mask).sum()),
        correct=per_pair,
    )
