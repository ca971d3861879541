"""Bootstrap confidence intervals and paired permutation tests for meta-evaluation statistics.

Conventions (all functions are pure and seeded: the same inputs and ``seed`` give the same result):

* Data are arrays with the **items on the last axis**. An item table becomes a ``systems x items``
  matrix (NaN = missing); a pair table becomes ``human`` = ``annotators x pairs`` preference codes and
  ``metric`` = ``2 x pairs`` (row 0 = the metric's score of response A, row 1 = of response B).
  A 1-D ``human`` next to a 2-D ``metric`` is a fixed system-level human vector (one value per system,
  e.g. Self-Instruct's human ranks) and is never resampled.
* **Bootstrap** (Efron & Tibshirani 1993; Deutsch et al. 2021, "A Statistical Analysis of Summarization
  Evaluation Metrics using Resampling Methods", TACL): items (columns) are resampled with replacement;
  at system level the resampled items are averaged per system *before* the statistic is computed
  (BOOT-INPUTS). The index draws are ``numpy.random.default_rng(seed).integers(0, n, (n_resamples, n))``,
  the draws of :func:`scipy.stats.bootstrap` with ``paired=True`` and the same generator, so the
  percentile interval equals scipy's. Every metric bootstrapped with the same seed over the same items
  sees the same resamples. Resamples where the statistic is undefined (NaN) are left out and counted.
* **Paired permutation test**, two schemes (``scheme=``), following the permutation tests of
  Deutsch et al. 2021:

  - ``"item"`` (default; the input-level analogue, PERM-INPUTS in Deutsch et al.'s naming): for each
    item (column) the two metrics' values are swapped with probability 1/2 *for all systems of that
    item at once*. This is evalign's scheme; it is **not** mt-metrics-eval's.
  - ``"cell"`` (PERM-BOTH, as mt-metrics-eval ``stats.PermutationSigDiff``): every (system, item) cell
    is swapped independently with probability 1/2 and the statistic is recomputed on the swapped
    arrays. For 1-D data (pairs, one value per item) the two schemes are the same.

  Because two metrics may live on different scales (BLEU 0-100, ROUGE 0-1), each metric's values are
  first z-scored over all its cells, as mt-metrics-eval does; correlations are invariant to this
  per-metric affine map, so the observed statistic is unchanged while the swapped vectors mix
  comparable values (a Kendall statistic with a fixed metric ``epsilon`` swaps raw values instead).
  Statistics with a tie threshold (pairwise accuracy, preference accuracy) are *decomposed per item /
  per pair* under the item scheme: each metric's per-item agreement counts are computed once with that
  metric's own calibrated epsilon (held fixed), and a swap exchanges those counts; no rescaling is
  needed (the cell scheme is refused for them: it would mix two metrics' thresholds). With
  ``grouping="item"`` a pair of systems lies within one item, so a per-item swap is a swap of whole
  groups of pairs; for preference accuracy each pair is its own unit. Pairwise accuracy pooled across
  items (``grouping`` ``none``/``system``) with a different epsilon per metric cannot be swapped per
  item and raises :class:`~evalign.errors.InputError`.

  **p-value (both schemes): two-sided with the +1 correction**,
  ``p = (1 + #{|d_perm| >= |d_obs|}) / (n_permutations + 1)``; when the swap patterns number at most
  ``n_permutations`` (``2**n_items``, or ``2**n_cells`` for the cell scheme) every pattern is
  enumerated and ``p = #{|d_perm| >= |d_obs|} / 2**n`` (exact, equal to
  :func:`scipy.stats.permutation_test` with ``permutation_type="samples"``). mt-metrics-eval's
  ``PermutationSigDiff`` reports instead the **one-sided** ``#{d_perm >= d_obs} / k`` (metric 2 better
  than metric 1) **without** +1 correction, with early stopping; the two-sided, +1-corrected form never
  returns 0 and does not presume which metric is better. ``alternative="greater"`` / ``"less"``
  gives the one-sided ``(1 + #{d_perm >= d_obs}) / (n_permutations + 1)`` / ``<=`` (with +1; exact
  enumeration without it), as :func:`scipy.stats.permutation_test`.
* **Resampling a mean of per-item credits by sufficient statistics** (``Resampling.method="auto"``,
  the default): a ``units`` statistic whose per-item credit pairs ``(num, den)`` take at most
  :data:`~evalign.meta.sufficient.MAX_CATEGORIES` distinct values (preference accuracy at a fixed
  epsilon: 0/1 per pair; pairwise accuracy grouped by item) is bootstrapped by one multinomial draw
  of the counts of each value per resample, and permuted by one binomial count of swapped items per
  joint value of the two statistics' credits (:mod:`evalign.meta.sufficient`). This is exact in
  distribution, but the same seed gives other draws than the item indices above (results agree
  within Monte-Carlo error, and exactly when every swap pattern is enumerated); the results say
  which way they were drawn (``resampling``: ``sufficient`` or ``items``). ``method="items"`` keeps
  the item indices for every statistic; other statistics always use them.
* **Item indices, block by block**: the draws above are made in blocks of resamples
  (:mod:`evalign.meta.draws`; never an items x resamples matrix). A ``units`` statistic whose
  credits are small integers is resampled as float32 matrix products of each block (all sums are
  integers below 2**24, hence exact and bit-identical to recomputing the statistic per resample); a
  statistic computed per resample (Kendall, Pearson, system level) shares its blocks out to
  ``Resampling.workers`` processes when the work is large (the same draws, in order: the results do
  not depend on the number of workers).
* **Significance clusters** follow mt-metrics-eval ``tasks.AssignRanks`` (WMT metrics task): metrics
  are sorted by decreasing statistic; walking down the list, metric *i* opens a new cluster when any
  metric from the start of the current cluster up to *i-1* is significantly better than it
  (two-sided ``p <= alpha`` with a positive difference).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from evalign.errors import InputError
from evalign.meta.draws import (
    block_rows,
    bootstrap_count_blocks,
    bootstrap_counts,
    bootstrap_index_blocks,
    enumerates,
    permutation_swaps,
    swap_mask_blocks,
)
from evalign.meta.resampling import Resampling, with_settings
from evalign.meta.statistics import (  # noqa: F401  (re-exported: the statistics by name)
    ALTERNATIVES,
    CORRELATIONS,
    KENDALL_NAMES,
    KINDS,
    SCHEMES,
    STATISTIC_FACTORIES,
    STATISTICS,
    StatFn,
    Statistic,
    SwapFn,
    UnitFn,
    as_arrays,
    as_statistic,
    exact_small_integers,
    human_resampled,
    make_statistic,
    n_items_of,
    observed_value,
    per_system,
    safe_value,
    take_items,
    units_ratio,
)
from evalign.meta.sufficient import (
    MAX_CATEGORIES,
    Credits,
    Moves,
    bootstrap_sums,
    credits,
    enumerated_deltas,
    paired_bootstrap_sums,
    permutation_deltas,
    permutation_moves,
    ratio,
)
from evalign.meta.workers import parallel_map, worker_count


@dataclass(frozen=True)
class BootstrapResult:
    """A bootstrap confidence interval: ``value`` on the full data, ``[low, high]`` at ``confidence``."""

    value: float
    low: float
    high: float
    n_resamples: int
    seed: int
    confidence: float = 0.95
    method: str = "percentile"
    #: resamples where the statistic was defined (the interval uses only these)
    n_valid: int = 0
    standard_error: float = float("nan")
    distribution: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False, compare=False)
    params: Mapping[str, Any] = field(default_factory=dict, compare=False)
    #: how the items were resampled: "sufficient" (counts of each credit value) or "items" (item indices)
    resampling: str = "items"
    #: the statistic's per-item credits grouped by value, when resampled by them (for paired tests)
    credits: Credits | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class PermutationResult:
    """A paired permutation test of ``statistic(metric_a) - statistic(metric_b)``."""

    value_a: float
    value_b: float
    #: observed difference value_a - value_b
    delta: float
    #: p-value of ``alternative`` (two-sided by default), with +1 correction unless ``exact``
    p_value: float
    n_permutations: int
    seed: int
    exact: bool = False
    #: "two-sided" (default), "greater" (metric_a better) or "less"
    alternative: str = "two-sided"
    #: how the swaps were drawn: "sufficient" (binomial counts per joint credit value) or "items" (swap masks)
    resampling: str = "items"


# --------------------------------------------------------------------------------------------
# resampling of decomposable ("units") statistics
#
# A units statistic is sum(w * num) / sum(w * den) over items, w = an item's multiplicity in a
# bootstrap resample (or 0/1 keep/swap masks in a permutation).
#
# * Sufficient statistics (method "auto", the credit pairs (num, den) take at most MAX_CATEGORIES
#   values): the resamples are drawn as counts of each value (evalign.meta.sufficient): O(R x K).
# * Item indices (method "items", or too many values): the draws of evalign.meta.draws, block by
#   block of resamples. When num and den are small integers (0/1 correctness of pairs), every
#   weighted sum is an integer, exact in any order and in float32 below 2**24: each block costs one
#   float32 matrix product and the results are bit-identical to the float64 reference products.

#: work (resamples x items) from which a per-resample statistic is computed by several processes
PARALLEL_MIN_WORK = 2_000_000


def _units_credits(stat: Statistic, num: np.ndarray, den: np.ndarray, method: str) -> Credits | None:
    """The credits of a ``discrete`` units statistic grouped by value when ``method`` allows it (None:
    item indices)."""
    return credits(num, den) if method == "auto" and stat.discrete else None


def _items_bootstrap_many(parts: Sequence[tuple[np.ndarray, np.ndarray]], n_resamples: int, seed: Any
                          ) -> list[np.ndarray]:
    """``(W @ num) / (W @ den)`` of every ``(num, den)`` (on the same items) for the bootstrap count
    matrix W, over one pass of its blocks of resamples: integer credits as float32 products (exact),
    others in float64."""
    n = parts[0][0].size
    exact = all(exact_small_integers(num, den) for num, den in parts)
    dtype = np.float32 if exact else np.float64
    cols = np.stack([v for pair in parts for v in pair], axis=1).astype(dtype)
    sums = [(w @ cols).astype(np.float64) for w in bootstrap_count_blocks(n, n_resamples, seed, dtype)]
    total = np.concatenate(sums) if sums else np.empty((0, cols.shape[1]))
    return [ratio(total[:, 2 * i], total[:, 2 * i + 1]) for i in range(len(parts))]


def _items_permutation_many(
    vectors: Sequence[tuple[np.ndarray, np.ndarray]], pairs: Sequence[tuple[int, int]], n_permutations: int, seed: Any,
) -> tuple[list[np.ndarray], bool]:
    """Permutation deltas of the pairs ``(i, j)`` of units statistics ``vectors`` (all on the same items)
    over one pass of the blocks of swap masks; and the exact flag. Each block costs one product with
    the statistics' columns (not one per pair).

    With swap mask s (1 = swap): a's numerator is ``sum(na) + s @ nb - s @ na``, b's ``sum(nb) - (s @ nb -
    s @ na)``, likewise for the denominators (integer units: float32 products, exact integers). Other
    units: the reference ``keep @ na + swap @ nb`` in float64."""
    n = vectors[0][0].size
    blocks, exact = swap_mask_blocks(n, n_permutations, seed)
    cols = np.stack([v for nd in vectors for v in nd], axis=1)
    totals = [(float(num.sum()), float(den.sum())) for num, den in vectors]
    parts: list[list[np.ndarray]] = [[] for _ in pairs]
    if all(exact_small_integers(num, den) for num, den in vectors):
        c32 = cols.astype(np.float32)
        for mk in blocks:
            sw = (mk.astype(np.float32) @ c32).astype(np.float64)
            for k, (i, j) in enumerate(pairs):
                mn, md = sw[:, 2 * j] - sw[:, 2 * i], sw[:, 2 * j + 1] - sw[:, 2 * i + 1]
                (na, da), (nb, db) = totals[i], totals[j]
                parts[k].append(ratio(na + mn, da + md) - ratio(nb - mn, db - md))
    else:
        for mk in blocks:
            kept, swapped = (~mk).astype(float) @ cols, mk.astype(float) @ cols
            for k, (i, j) in enumerate(pairs):
                a_num, a_den, b_num, b_den = 2 * i, 2 * i + 1, 2 * j, 2 * j + 1
                parts[k].append(ratio(kept[:, a_num] + swapped[:, b_num], kept[:, a_den] + swapped[:, b_den])
                                - ratio(kept[:, b_num] + swapped[:, a_num], kept[:, b_den] + swapped[:, a_den]))
    return [np.concatenate(p) for p in parts], exact


def _batch_or(values: Callable[[], np.ndarray], one_by_one: Callable[[], np.ndarray]) -> np.ndarray:
    """A batched statistic's values; where the batch cannot be computed, ``one_by_one`` (each
    value by :func:`~evalign.meta.statistics.safe_value`)."""
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore")
        try:
            return np.asarray(values(), dtype=np.float64)
        except (ValueError, ZeroDivisionError, FloatingPointError):
            pass
    return one_by_one()


def _workers_for(work: int, workers: int | None) -> int | None:
    """The processes for a per-resample computation of ``work`` (resamples x items): 1 below
    :data:`PARALLEL_MIN_WORK` (forking would cost more than it saves)."""
    return workers if work >= PARALLEL_MIN_WORK else 1


# --------------------------------------------------------------------------------------------
# ratio statistics from their per-item credits, several at once


@dataclass(frozen=True)
class Units:
    """A ``units`` statistic's per-item credits on one data set, ready to resample: its ``value``,
    and either its ``credits`` grouped by value (resampled by sufficient statistics; ``num`` / ``den``
    are then left out: they are ``credits.num[credits.codes]``) or the credit vectors ``num`` /
    ``den`` (resampled by item indices). ``params``: the statistic's fixed parameters."""

    value: float
    num: np.ndarray | None = field(default=None, repr=False)
    den: np.ndarray | None = field(default=None, repr=False)
    credits: Credits | None = field(default=None, repr=False)
    params: Mapping[str, Any] = field(default_factory=dict)

    def vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """The per-item ``(num, den)``."""
        if self.num is not None and self.den is not None:
            return self.num, self.den
        assert self.credits is not None
        if self.credits.codes is None:
            raise ValueError("credits counted without their items have no per-item vectors")
        return self.credits.num[self.credits.codes], self.credits.den[self.credits.codes]


def units_of(stat: Statistic, human: Any, metric: Any, resampling: Resampling | None = None) -> Units:
    """The :class:`Units` of a bound ``units`` statistic on ``(human, metric)``: grouped by value when
    ``resampling.method`` is ``auto``, the statistic is ``discrete`` and its credits take at most
    :data:`~evalign.meta.sufficient.MAX_CATEGORIES` values; else the per-item vectors."""
    if stat.kind != "units" or stat.units is None:
        raise ValueError(f"statistic '{stat.name}' is not a ratio of per-item credits")
    h, m = as_arrays(human, metric)
    num, den = stat.units(h, m)
    cr = _units_credits(stat, num, den, with_settings(resampling).method)
    if cr is not None:
        return Units(units_ratio(num, den), credits=cr, params=dict(stat.params))
    return Units(units_ratio(num, den), num, den, params=dict(stat.params))


def bootstrap_units(units: Sequence[Units], *, resampling: Resampling | None = None,
                    method: str = "percentile") -> list[BootstrapResult]:
    """Bootstrap intervals of ratio statistics on the same items (see :func:`bootstrap_ci`): those
    with credits grouped by value by sufficient statistics, one multinomial draw per resample each;
    the others over one shared pass of the item-index draws (the resamples of :func:`bootstrap_ci`,
    block by block), so many statistics cost one set of draws."""
    r = with_settings(resampling)
    out: list[BootstrapResult | None] = [None] * len(units)
    by_items = [i for i, u in enumerate(units) if u.credits is None]
    for i, u in enumerate(units):
        if u.credits is not None:
            dist = ratio(*bootstrap_sums(u.credits, r.n_resamples, np.random.default_rng(r.seed)))
            res = _interval(u.value, dist, r.confidence, method, r.n_resamples, r.seed, dict(u.params))
            out[i] = replace(res, resampling="sufficient", credits=u.credits)
    if by_items:
        dists = _items_bootstrap_many([units[i].vectors() for i in by_items], r.n_resamples, r.seed)
        for i, dist in zip(by_items, dists, strict=True):
            out[i] = _interval(units[i].value, dist, r.confidence, method, r.n_resamples, r.seed, dict(units[i].params))
    return [o for o in out if o is not None]


def permutation_test_units(pairs: Sequence[tuple[Units, Units]], *, resampling: Resampling | None = None,
                           alternative: str = "two-sided") -> list[PermutationResult]:
    """Paired permutation tests (item swaps, see :func:`paired_permutation_test`) of pairs of ratio
    statistics on the same items: a pair whose both sides have credits grouped by value by sufficient
    statistics (a ``Binomial(n_c, 1/2)`` count of swapped items per joint value, every swap pattern
    counted when ``2**n <= n_permutations``), the others over one shared pass of the swap masks."""
    if alternative not in ALTERNATIVES:
        raise InputError(f"unknown alternative '{alternative}' (use {', '.join(ALTERNATIVES)})",
                         field="alternative")
    r = with_settings(resampling)
    out: list[PermutationResult | None] = [None] * len(pairs)
    by_items = []
    for i, (a, b) in enumerate(pairs):
        mv = permutation_moves(a.credits, b.credits) if a.credits is not None and b.credits is not None else None
        if mv is None or mv.counts.size > MAX_CATEGORIES:
            by_items.append(i)
            continue
        deltas, exact = _credit_deltas(mv, a.credits.n if a.credits is not None else 0, r)
        out[i] = _permutation_result(a.value, b.value, deltas, exact, r.seed, alternative, "sufficient")
    if by_items:
        distinct: dict[int, int] = {}  # each statistic's columns once, whatever the number of its pairs
        stats: list[Units] = []
        for i in by_items:
            for u in pairs[i]:
                if id(u) not in distinct:
                    distinct[id(u)] = len(stats)
                    stats.append(u)
        dl, exact = _items_permutation_many([u.vectors() for u in stats],
                                            [(distinct[id(pairs[i][0])], distinct[id(pairs[i][1])]) for i in by_items],
                                            r.n_permutations, r.seed)
        for i, deltas in zip(by_items, dl, strict=True):
            out[i] = _permutation_result(pairs[i][0].value, pairs[i][1].value, deltas, exact, r.seed, alternative,
                                         "items")
    return [o for o in out if o is not None]


def _credit_deltas(mv: Moves, n: int, r: Resampling) -> tuple[np.ndarray, bool]:
    """The permuted differences of two credit tables' moves and whether they are exact (enumerated)."""
    if enumerates(n, r.n_permutations):
        return enumerated_deltas(mv), True
    return permutation_deltas(mv, r.n_permutations, np.random.default_rng(r.seed)), False


# --------------------------------------------------------------------------------------------
# bootstrap


def bootstrap_ci(
    stat_fn: str | Statistic | StatFn,
    human: Any,
    metric: Any,
    *,
    resampling: Resampling | None = None,
    n_resamples: int | None = None,
    confidence: float | None = None,
    seed: Any = None,
    level: str = "item",
    method: str = "percentile",
    grouping: str = "item",
    variant: str | None = None,
    epsilon: float | None = None,
) -> BootstrapResult:
    """Bootstrap confidence interval of an agreement statistic, resampling items (columns).

    ``stat_fn``: a statistic name (see :func:`make_statistic`; ``level``, ``grouping``, ``variant`` and
    ``epsilon`` apply to names only), a :class:`Statistic`, or any ``f(human, metric) -> float`` on
    arrays with items on the last axis. ``resampling``: the :class:`~evalign.meta.resampling.Resampling`
    settings (its ``n_resamples``, ``confidence``, ``seed``, ``method`` and ``workers``; default 1000,
    0.95, 0, ``auto``, every core); ``n_resamples``, ``confidence`` and ``seed`` given one by one replace
    its values. ``confidence`` in (0, 1). ``method``: ``percentile`` (the ``confidence`` central
    quantiles of the bootstrap distribution, linear interpolation, as :func:`scipy.stats.bootstrap`) or
    ``basic`` (``2 * value - quantiles``). Per-metric parameters (a calibrated epsilon) are fixed on
    the full data and held in every resample. A ratio of per-item credits taking few values is
    resampled by the counts of each value when ``resampling.method`` is ``auto`` (the result's
    ``resampling`` says ``sufficient``; exact in distribution, other draws than the item indices),
    anything else by item indices (``items``). Returns a :class:`BootstrapResult`; low/high are NaN
    when no resample gave a defined value.
    """
    r = with_settings(resampling, n_resamples=n_resamples, confidence=confidence, seed=seed)
    n_resamples, confidence, seed = r.n_resamples, r.confidence, r.seed
    if not 0.0 < confidence < 1.0:
        raise InputError(f"confidence must be in (0, 1), got {confidence}", field="confidence")
    if n_resamples < 1:
        raise InputError(f"n_resamples must be at least 1, got {n_resamples}", field="n_resamples")
    if method not in ("percentile", "basic"):
        raise InputError(f"unknown bootstrap method '{method}' (use percentile or basic)", field="method")
    h, m = as_arrays(human, metric)
    stat = as_statistic(stat_fn, level=level, grouping=grouping, variant=variant, epsilon=epsilon).bind(h, m)
    n = n_items_of(m)
    if stat.kind == "system" and m.ndim != 2:
        raise InputError("a system-level statistic needs a systems x items metric array")
    if stat.kind == "units":
        return bootstrap_units([units_of(stat, h, m, r)], resampling=r, method=method)[0]
    value, dist = observed_value(stat, h, m), _bootstrap_direct(stat, h, m, n, n_resamples, seed, r.workers)
    return _interval(value, dist, confidence, method, n_resamples, seed, dict(stat.params))


def _bootstrap_direct(
    stat: Statistic, h: np.ndarray, m: np.ndarray, n: int, n_resamples: int, seed: Any, workers: int | None = 1
) -> np.ndarray:
    """The bootstrap distribution of a ``system`` or ``generic`` statistic, one call per resample; the
    blocks of resamples are shared out to ``workers`` processes (the same draws, in order)."""
    assert stat.fn is not None
    fn = stat.fn
    if stat.kind == "system":
        # resampled items are averaged per system before the statistic (BOOT-INPUTS)
        h_fixed = None if human_resampled(h, m) else h

        def block(idx: np.ndarray) -> np.ndarray:
            return np.array([safe_value(fn, per_system(h[:, i]) if h_fixed is None else h_fixed, per_system(m[:, i])) for i in idx])
    else:
        resample_h = human_resampled(h, m)
        many = stat.resampled if resample_h and h.shape == m.shape else None

        def one_by_one(idx: np.ndarray) -> np.ndarray:
            return np.array([safe_value(fn, take_items(h, i) if resample_h else h, take_items(m, i)) for i in idx])

        def block(idx: np.ndarray) -> np.ndarray:
            if many is not None:
                return _batch_or(lambda: many(h, m, idx), lambda: one_by_one(idx))
            return one_by_one(idx)

    w = _workers_for(n_resamples * n, workers)
    rows = block_rows(n, n_resamples, 4 * worker_count(w))
    parts = parallel_map(block, bootstrap_index_blocks(n, n_resamples, seed, rows), w)
    return np.concatenate(parts) if parts else np.empty(0)


def _interval(
    value: float, dist: np.ndarray, confidence: float, method: str, n_resamples: int, seed: int, params: dict[str, Any]
) -> BootstrapResult:
    ok = np.isfinite(dist)
    alpha = (1.0 - confidence) / 2.0
    if ok.any():
        lo, hi = np.quantile(dist[ok], [alpha, 1.0 - alpha])
        if method == "basic":
            lo, hi = 2 * value - hi, 2 * value - lo
        se = float(np.std(dist[ok], ddof=1)) if ok.sum() > 1 else float("nan")
    else:
        lo = hi = se = float("nan")
    return BootstrapResult(
        value=float(value),
        low=float(lo),
        high=float(hi),
        n_resamples=n_resamples,
        seed=seed,
        confidence=confidence,
        method=method,
        n_valid=int(ok.sum()),
        standard_error=se,
        distribution=dist,
        params=params,
    )


def paired_bootstrap_distributions(
    a: BootstrapResult, b: BootstrapResult, *, resampling: Resampling | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The bootstrap distributions of two statistics over the *same* resamples of the same items,
    for a paired bootstrap test. Item-index intervals drawn with the same seed share their resamples
    already: their distributions are returned as they are. Two intervals resampled by sufficient
    statistics draw the joint counts of their credit pairs (one multinomial over the at most
    ``K_a x K_b`` joint values per resample, ``resampling``'s ``n_resamples`` and ``seed``)."""
    if a.credits is None or b.credits is None:
        if a.resampling != b.resampling:
            raise InputError("a paired bootstrap needs both statistics resampled the same way (method 'items')")
        return a.distribution, b.distribution
    r = with_settings(resampling)
    (na, da), (nb, db) = paired_bootstrap_sums(a.credits, b.credits, r.n_resamples, np.random.default_rng(r.seed))
    return ratio(na, da), ratio(nb, db)


# --------------------------------------------------------------------------------------------
# permutation test


def _zscore(x: np.ndarray) -> np.ndarray:
    ok = np.isfinite(x)
    if not ok.any():
        return x
    mu = float(np.mean(x[ok]))
    sd = float(np.std(x[ok]))
    return (x - mu) / sd if sd > 0 else x - mu


def paired_permutation_test(
    stat_fn: str | Statistic | StatFn,
    human: Any,
    metric_a: Any,
    metric_b: Any,
    n_permutations: int | None = None,
    seed: Any = None,
    *,
    resampling: Resampling | None = None,
    level: str = "item",
    grouping: str = "item",
    variant: str | None = None,
    epsilon: float | None = None,
    stat_b: str | Statistic | StatFn | None = None,
    scheme: str = "item",
    alternative: str = "two-sided",
) -> PermutationResult:
    """Paired permutation test of the difference ``stat(metric_a) - stat(metric_b)``.

    ``resampling``: the :class:`~evalign.meta.resampling.Resampling` settings (its ``n_permutations``,
    ``seed``, ``method`` and ``workers``; default 1000, 0, ``auto``, every core); ``n_permutations`` and
    ``seed`` given one by one (also by position, as before) replace its values.
    ``scheme="item"`` (default, evalign's scheme, PERM-INPUTS): per item (column) the two metrics'
    values are swapped for all systems at once with probability 1/2. ``scheme="cell"`` (PERM-BOTH,
    mt-metrics-eval ``PermutationSigDiff``'s scheme): every (system, item) cell is swapped
    independently. See the module doc for standardisation and fixed epsilons. Returns the
    **two-sided** p-value **with the +1 correction**, ``(1 + #{|d_perm| >= |d_obs|}) /
    (n_permutations + 1)``, or the exact p-value ``#{|d_perm| >= |d_obs|} / 2**n`` when the ``2**n``
    swap patterns (n items, or n cells) number at most ``n_permutations`` (all enumerated). This
    differs from mt-metrics-eval, which reports one-sided ``#{d_perm >= d_obs} / k`` without +1.
    ``alternative="greater"`` (is metric_a better?) counts ``d_perm >= d_obs`` instead, ``"less"``
    ``d_perm <= d_obs``, one-sided with the same +1 correction (as :func:`scipy.stats.permutation_test`).
    ``stat_b``: the statistic of ``metric_b`` when its fixed parameters differ from ``metric_a``'s
    (e.g. each metric's own pool-calibrated epsilon); by default ``stat_fn`` serves both. Two ratios
    of per-item credits taking few values are permuted by sufficient statistics when
    ``resampling.method`` is ``auto`` (binomial counts of swapped items per joint value; the result's
    ``resampling`` says ``sufficient``), everything else by item swap masks (``items``).
    """
    r = with_settings(resampling, n_permutations=n_permutations, seed=seed)
    n_permutations, seed = r.n_permutations, r.seed
    if n_permutations < 1:
        raise InputError(f"n_permutations must be at least 1, got {n_permutations}", field="n_permutations")
    if scheme not in SCHEMES:
        raise InputError(f"unknown permutation scheme '{scheme}' (use item or cell)", field="scheme")
    if alternative not in ALTERNATIVES:
        raise InputError(f"unknown alternative '{alternative}' (use {', '.join(ALTERNATIVES)})",
                         field="alternative")
    h, a = as_arrays(human, metric_a)
    _, b = as_arrays(human, metric_b)
    if a.shape != b.shape:
        raise InputError(f"metric_a has shape {a.shape} but metric_b has {b.shape}")
    options = {"level": level, "grouping": grouping, "variant": variant, "epsilon": epsilon}
    stat = as_statistic(stat_fn, **options)
    other = stat if stat_b is None else as_statistic(stat_b, **options)
    sa, sb = stat.bind(h, a), other.bind(h, b)
    if scheme == "cell" and a.ndim == 2:
        va, vb, deltas, exact = _cell_permutation(stat, sa, sb, h, a, b, r)
    elif sa.kind == "units" and sb.kind == "units":
        return permutation_test_units([(units_of(sa, h, a, r), units_of(sb, h, b, r))], resampling=r,
                                      alternative=alternative)[0]
    else:
        va, vb, deltas, exact = _permute_direct(stat, sa, sb, h, a, b, r)
    return _permutation_result(va, vb, deltas, exact, seed, alternative, "items")


def _permutation_result(va: float, vb: float, deltas: np.ndarray, exact: bool, seed: Any, alternative: str,
                        how: str) -> PermutationResult:
    delta = va - vb
    return PermutationResult(value_a=float(va), value_b=float(vb), delta=float(delta),
                             p_value=_p_value(delta, deltas, exact, alternative), n_permutations=int(deltas.shape[0]),
                             seed=seed, exact=exact, alternative=alternative, resampling=how)


def _permute_direct(
    stat: Statistic, sa: Statistic, sb: Statistic, h: np.ndarray, a: np.ndarray, b: np.ndarray, r: Resampling
) -> tuple[float, float, np.ndarray, bool]:
    """Item swaps recomputing a ``system`` or ``generic`` statistic per permutation on the
    (z-scored) values: (value a, value b, permutation deltas, exact). Blocks of swap masks are
    shared out to ``r.workers`` processes (the same masks, in order)."""
    va, vb = observed_value(sa, h, a), observed_value(sb, h, b)
    if sa.kind != sb.kind or sa.fn is None or sb.fn is None:
        raise InputError(f"statistic '{stat.name}' cannot be permutation-tested with these settings")
    if sa.params.get("epsilon") != sb.params.get("epsilon"):
        raise InputError(f"statistic '{stat.name}' with a different epsilon per metric needs grouping='item' "
                         "(swaps are per item)")
    za, zb = (_zscore(a), _zscore(b)) if stat.standardize else (a, b)
    fa_, fb_ = sa.fn, sb.fn
    if sa.kind == "system":
        if a.ndim != 2:
            raise InputError("a system-level statistic needs systems x items metric arrays")
        hs = per_system(h)

        def block(masks: np.ndarray) -> np.ndarray:
            return np.array([safe_value(fa_, hs, per_system(np.where(mk, zb, za))) - safe_value(fb_, hs, per_system(np.where(mk, za, zb)))
                             for mk in masks])
    else:
        same = h.shape == za.shape == zb.shape

        def side(fn: StatFn, many: SwapFn | None, x: np.ndarray, y: np.ndarray, masks: np.ndarray) -> np.ndarray:
            """The statistic of where(mask, y, x) for each mask: batched when the statistic can."""
            def one_by_one() -> np.ndarray:
                return np.array([safe_value(fn, h, np.where(mk, y, x)) for mk in masks])

            if many is not None and same:
                return _batch_or(lambda: many(h, x, y, masks), one_by_one)
            return one_by_one()

        def block(masks: np.ndarray) -> np.ndarray:
            return side(fa_, sa.swapped, za, zb, masks) - side(fb_, sb.swapped, zb, za, masks)

    deltas, exact = _map_masks(block, n_items_of(a), r)
    return va, vb, deltas, exact


def _map_masks(block: Callable[[np.ndarray], np.ndarray], n: int, r: Resampling) -> tuple[np.ndarray, bool]:
    """``block`` over the blocks of swap masks of ``n`` items (or cells), in ``r.workers`` processes
    when the work is large: (the permuted differences in order, exact)."""
    w = _workers_for(r.n_permutations * n, r.workers)
    blocks, exact = swap_mask_blocks(n, r.n_permutations, r.seed, block_rows(n, r.n_permutations, 4 * worker_count(w)))
    parts = parallel_map(block, blocks, w)
    return (np.concatenate(parts) if parts else np.empty(0)), exact


def _cell_permutation(
    stat: Statistic, sa: Statistic, sb: Statistic, h: np.ndarray, a: np.ndarray, b: np.ndarray, r: Resampling
) -> tuple[float, float, np.ndarray, bool]:
    """Cell-level swaps (PERM-BOTH, mt-metrics-eval ``PermutationSigDiff``): every (system, item) cell
    of the two (z-scored) metrics is swapped independently with probability 1/2, and the statistic is
    recomputed on the swapped arrays (no per-item decomposition): (value a, value b, deltas, exact)."""
    if "epsilon" in sa.params and stat.name not in ("kendall", *KENDALL_NAMES):
        raise InputError(f"statistic '{stat.name}' holds a tie threshold per metric: cell-level swaps would mix "
                         "them; use scheme='item'", field="scheme")
    if sa.params.get("epsilon") != sb.params.get("epsilon"):
        raise InputError("cell-level swaps need the same epsilon for both metrics", field="scheme")
    za, zb = (_zscore(a), _zscore(b)) if stat.standardize else (a, b)
    shape = a.shape

    def block(flat: np.ndarray) -> np.ndarray:
        return np.array([observed_value(sa, h, np.where(mk, zb, za)) - observed_value(sb, h, np.where(mk, za, zb))
                         for mk in flat.reshape((flat.shape[0], *shape))])

    deltas, exact = _map_masks(block, a.size, r)
    return observed_value(sa, h, a), observed_value(sb, h, b), deltas, exact


def _p_value(delta: float, deltas: np.ndarray, exact: bool, alternative: str = "two-sided") -> float:
    if not math.isfinite(delta):
        return float("nan")
    tol = 1e-12 * max(1.0, abs(delta))
    d = np.where(np.isfinite(deltas), deltas, 0.0)  # an undefined resample counts as no difference
    if alternative == "greater":
        hits = int(np.sum(d >= delta - tol))
    elif alternative == "less":
        hits = int(np.sum(d <= delta + tol))
    else:
        hits = int(np.sum(np.abs(d) >= abs(delta) - tol))
    if exact:
        return hits / len(deltas)
    return (1 + hits) / (len(deltas) + 1)


__all__ = [
    "ALTERNATIVES",
    "KENDALL_NAMES",
    "SCHEMES",
    "STATISTICS",
    "BootstrapResult",
    "PermutationResult",
    "Resampling",
    "Statistic",
    "Units",
    "bootstrap_ci",
    "bootstrap_counts",
    "bootstrap_units",
    "make_statistic",
    "paired_bootstrap_distributions",
    "paired_permutation_test",
    "permutation_swaps",
    "permutation_test_units",
    "units_of",
]
