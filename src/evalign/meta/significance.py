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

import itertools
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from evalign.errors import InputError
from evalign.meta.correlation import correlation, kendall_resampled, kendall_swapped, system_means
from evalign.meta.draws import (
    block_rows,
    bootstrap_count_blocks,
    bootstrap_counts,
    bootstrap_index_blocks,
    enumerates,
    permutation_swaps,
    swap_mask_blocks,
)
from evalign.meta.pairwise import (
    calibrate_epsilon,
    pairwise_accuracy,
    pairwise_preference_accuracy,
    preference_units,
)
from evalign.meta.resampling import Resampling, with_settings
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

StatFn = Callable[[np.ndarray, np.ndarray], float]
UnitFn = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
#: ``(human, metric, idx) -> values``: a statistic of every resample at once
BatchFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
#: ``(human, a, b, masks) -> values``: a statistic of every swapped metric at once
SwapFn = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]

CORRELATIONS = ("kendall", "pearson", "spearman")
KINDS = ("generic", "system", "units")
#: permutation schemes: swap whole items (columns) or every (system, item) cell independently
SCHEMES = ("item", "cell")
#: permutation p-value alternatives (as scipy.stats.permutation_test)
ALTERNATIVES = ("two-sided", "greater", "less")


@dataclass(frozen=True)
class Statistic:
    """One agreement statistic of ``(human, metric)`` arrays (items on the last axis).

    ``kind`` says how resampling and swapping can be done fast and exactly:

    * ``"generic"``: ``fn(human, metric)`` on the (resampled) arrays; one call per resample.
    * ``"system"``: ``fn(human_sys, metric_sys)`` on 1-D per-system vectors (the per-system means
      over the items present, :func:`evalign.meta.correlation.system_means`, of each resample).
    * ``"units"``: the statistic is ``sum(num) / sum(den)`` over items, with
      ``units(human, metric) -> (num, den)`` (1-D, one entry per item); resamples and swaps are
      weighted sums. ``discrete``: the credit pairs ``(num, den)`` take a handful of values by
      construction (accuracies: 0/1 per pair, a per-item accuracy over a few pairs), so resampling
      may draw the counts of each value (sufficient statistics, ``Resampling.method="auto"``);
      a mean of continuous values (per-item correlations) keeps the item indices.

    ``prepare(human, metric)`` fixes per-metric parameters on the full data (the calibrated epsilon)
    and returns the statistic to use for that metric. ``standardize`` z-scores metric values before a
    permutation swap (``generic``/``system`` kinds).

    A ``generic`` statistic may compute many resamples or swaps at once, with the values ``fn`` gives
    one by one: ``resampled(human, metric, idx)`` the statistic of each resample ``idx[b]`` (``B x
    items`` indices) and ``swapped(human, a, b, masks)`` that of ``where(masks[k], b, a)`` for each
    row of ``masks`` (the Kendall correlations over pooled cells:
    :func:`~evalign.meta.correlation.kendall_resampled`).
    """

    name: str
    kind: str = "generic"
    fn: StatFn | None = None
    units: UnitFn | None = None
    prepare: Callable[[np.ndarray, np.ndarray], Statistic] | None = None
    standardize: bool = True
    params: Mapping[str, Any] = field(default_factory=dict)
    discrete: bool = False
    resampled: BatchFn | None = None
    swapped: SwapFn | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown statistic kind '{self.kind}' (use one of {', '.join(KINDS)})")
        if self.kind == "units" and self.units is None:
            raise ValueError("a 'units' statistic needs units=")
        if self.kind != "units" and self.fn is None:
            raise ValueError(f"a '{self.kind}' statistic needs fn=")

    def bind(self, human: np.ndarray, metric: np.ndarray) -> Statistic:
        """The statistic with its per-metric parameters fixed on the full data."""
        return self.prepare(human, metric) if self.prepare is not None else self

    def __call__(self, human: np.ndarray, metric: np.ndarray) -> float:
        """The statistic on the full data."""
        human, metric = _as_arrays(human, metric)
        bound = self.bind(human, metric)
        return _observed(bound, human, metric)


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


@dataclass(frozen=True)
class MetricComparison:
    """All metrics' statistics and the two-sided p-values of every pair (``p_values[i, j]``)."""

    statistic: str
    names: tuple[str, ...]
    values: tuple[float, ...]
    p_values: np.ndarray = field(repr=False, compare=False)
    n_permutations: int = 0
    seed: int = 0

    def p(self, a: str, b: str) -> float:
        """Two-sided p-value of the difference between metrics ``a`` and ``b``."""
        return float(self.p_values[self.names.index(a), self.names.index(b)])


# --------------------------------------------------------------------------------------------
# statistics registry


def _corr_value(human: np.ndarray, metric: np.ndarray, **kw: Any) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(correlation(human, metric, **kw).value)


def _correlation_statistic(
    method: str, level: str, grouping: str, variant: str | None, epsilon: float | None = None,
    average: str = "macro",
) -> Statistic:
    opts: dict[str, Any] = {"method": method}
    if variant is not None:
        opts["variant"] = variant
    if epsilon is not None and epsilon > 0:
        opts["epsilon"] = float(epsilon)
    if average != "macro":
        opts["average"] = average
    # a metric tie threshold is in metric units: swapped values must not be rescaled
    standardize = "epsilon" not in opts
    if level == "system":

        def fn_sys(h: np.ndarray, m: np.ndarray) -> float:
            return _corr_value(h, m, level="system", **opts)

        return Statistic(method, "system", fn=fn_sys, standardize=standardize, params={"level": "system", **opts})
    if grouping == "item":
        micro = average == "micro"
        group_opts = {k: v for k, v in opts.items() if k != "average"}

        def units(h: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            # per item, the correlation across systems; undefined items are left out of the mean;
            # micro averaging weights each item by its number of (human, metric) points
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                vals = np.asarray(correlation(h, m, level="item", grouping="item", **group_opts).group_values,
                                  dtype=float)
            ok = np.isfinite(vals)
            w = np.sum(~(np.isnan(h) | np.isnan(m)), axis=0).astype(float) if micro else np.ones(vals.size)
            return np.where(ok, w * np.where(ok, vals, 0.0), 0.0), np.where(ok, w, 0.0)

        return Statistic(method, "units", units=units, standardize=standardize,
                         params={"level": "item", "grouping": "item", **opts})

    def fn_item(h: np.ndarray, m: np.ndarray) -> float:
        return _corr_value(h, m, level="item", grouping=grouping, **opts)

    batched: dict[str, Any] = {}
    if method == "kendall" and grouping == "none" and "epsilon" not in opts and (variant or "b") != "c":
        var = variant or "b"  # every cell pooled: the resamples' contingency tables counted at once
        batched = {"resampled": lambda h, m, idx: kendall_resampled(h, m, idx, var),
                   "swapped": lambda h, a, b, masks: kendall_swapped(h, a, b, masks, var)}
    return Statistic(method, "generic", fn=fn_item, standardize=standardize,
                     params={"level": "item", "grouping": grouping, **opts}, **batched)


def _pairwise_statistic(level: str, grouping: str, epsilon: float | None) -> Statistic:
    def bound(eps: float) -> Statistic:
        params = {"level": level, "grouping": grouping, "epsilon": eps}
        if level == "system":

            def fn_sys(h: np.ndarray, m: np.ndarray) -> float:
                return float(pairwise_accuracy(h, m, grouping="none", epsilon=eps).accuracy)

            return Statistic("pairwise_accuracy", "system", fn=fn_sys, params=params)
        if grouping == "item":

            def units(h: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                # the accuracy is the unweighted mean over items with a pair of the per-item accuracies
                acc = np.asarray(pairwise_accuracy(h, m, grouping="item", epsilon=eps).group_accuracies, dtype=float)
                ok = np.isfinite(acc)
                return np.where(ok, acc, 0.0), ok.astype(float)

            return Statistic("pairwise_accuracy", "units", units=units, params=params, discrete=True)

        def fn(h: np.ndarray, m: np.ndarray) -> float:
            return float(pairwise_accuracy(h, m, grouping=grouping, epsilon=eps).accuracy)  # type: ignore[arg-type]

        return Statistic("pairwise_accuracy", "generic", fn=fn, params=params)

    def prepare(h: np.ndarray, m: np.ndarray) -> Statistic:
        if epsilon is not None:
            return bound(float(epsilon))
        if level == "system":
            return bound(0.0)
        return bound(float(calibrate_epsilon(h, m, grouping=grouping).epsilon))  # type: ignore[arg-type]

    return Statistic("pairwise_accuracy", "generic", fn=lambda h, m: float("nan"), prepare=prepare,
                     params={"level": level, "grouping": grouping, "epsilon": epsilon})


def _preference_statistic(with_ties: bool, epsilon: float | None) -> Statistic:
    name = "preference_accuracy" if with_ties else "preference_accuracy_no_ties"

    def bound(eps: float) -> Statistic:
        def units(h: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            # per pair: 1/0 = the metric's call is right/wrong, den 0 = the pair does not count
            # (vectorised; equal to pairwise_preference_accuracy on each pair alone)
            return preference_units(h, m, eps, with_ties)

        return Statistic(name, "units", units=units, params={"epsilon": eps, "ties": with_ties}, discrete=True)

    def prepare(h: np.ndarray, m: np.ndarray) -> Statistic:
        if epsilon is not None:
            return bound(float(epsilon))
        if not with_ties:
            return bound(0.0)  # without ties the metric must pick a side: only equal scores tie
        r = pairwise_preference_accuracy(h.T, m[0], m[1], epsilon=None)
        return bound(float(r.epsilon))

    return Statistic(name, "generic", fn=lambda h, m: float("nan"), prepare=prepare,
                     params={"epsilon": epsilon, "ties": with_ties})


def make_statistic(
    name: str,
    *,
    level: str = "item",
    grouping: str = "item",
    variant: str | None = None,
    epsilon: float | None = None,
    average: str = "macro",
) -> Statistic:
    """A :class:`Statistic` by name.

    ``name``: ``kendall`` / ``pearson`` / ``spearman`` (``level`` ``system`` = over per-system mean
    scores; ``item`` = over items with ``grouping`` ``none`` (all cells), ``item`` (across systems
    within each item, then averaged) or ``system``; ``variant`` is passed to the correlation, e.g. a
    Kendall variant; for ``kendall`` a positive ``epsilon`` is a fixed metric tie threshold in metric
    units (then permutation swaps exchange raw values: both metrics must share a scale);
    ``average`` ``macro`` / ``micro`` = unweighted / size-weighted mean over groups), ``tau_b`` /
    ``tau_c`` / ``tau_23`` / ``acc_23`` (Kendall with that variant, mt-metrics-eval's names),
    ``pairwise_accuracy`` (Deutsch et al. 2023 accuracy with tie calibration;
    ``epsilon=None`` calibrates each metric's epsilon once on its full data), ``preference_accuracy``
    / ``preference_accuracy_no_ties`` (pair tables: human ``annotators x pairs`` codes +1/-1/0,
    metric ``2 x pairs``; with ties ``epsilon=None`` calibrates, without ties it means 0: human ties
    are left out and the metric must pick a side).
    """
    if level not in ("system", "item"):
        raise InputError(f"unknown level '{level}' (use system or item)", field="level")
    if grouping not in ("none", "item", "system"):
        raise InputError(f"unknown grouping '{grouping}' (use none, item or system)", field="grouping")
    if name in CORRELATIONS:
        if epsilon is not None and name != "kendall" and epsilon > 0:
            raise InputError(f"a tie threshold epsilon applies to Kendall only, not {name}", field="epsilon")
        return _correlation_statistic(name, level, grouping, variant, epsilon, average)
    if name in KENDALL_NAMES:
        if variant is not None and variant != KENDALL_NAMES[name]:
            raise InputError(f"statistic '{name}' is Kendall variant {KENDALL_NAMES[name]!r}, not {variant!r}",
                             field="variant")
        return replace(_correlation_statistic("kendall", level, grouping, KENDALL_NAMES[name], epsilon, average),
                       name=name)
    if name == "pairwise_accuracy":
        return _pairwise_statistic(level, grouping, epsilon)
    if name in ("preference_accuracy", "preference_accuracy_no_ties"):
        return _preference_statistic(name == "preference_accuracy", epsilon)
    raise InputError(
        f"unknown statistic '{name}' (use one of {', '.join(STATISTICS)})",
        field="statistic",
    )


#: Kendall variants by mt-metrics-eval's ``KendallVariants`` names (see :func:`evalign.meta.correlation.correlation`)
KENDALL_NAMES = {"tau_b": "b", "tau_c": "c", "tau_23": "23", "acc_23": "acc23"}
STATISTICS = (*CORRELATIONS, *KENDALL_NAMES, "pairwise_accuracy", "preference_accuracy",
              "preference_accuracy_no_ties")


def _as_statistic(stat_fn: str | Statistic | StatFn, **options: Any) -> Statistic:
    if isinstance(stat_fn, Statistic):
        return stat_fn
    if isinstance(stat_fn, str):
        return make_statistic(stat_fn, **options)
    if callable(stat_fn):
        return Statistic(getattr(stat_fn, "__name__", "statistic"), "generic", fn=stat_fn)
    raise TypeError(f"stat_fn must be a name, a Statistic or a callable, got {type(stat_fn).__name__}")


# --------------------------------------------------------------------------------------------
# array helpers


def _as_arrays(human: Any, metric: Any) -> tuple[np.ndarray, np.ndarray]:
    h = np.asarray(human, dtype=float)
    m = np.asarray(metric, dtype=float)
    if m.ndim not in (1, 2) or h.ndim not in (1, 2):
        raise InputError(f"human and metric must be 1-D or 2-D arrays, got {h.ndim}-D and {m.ndim}-D")
    if h.ndim == 2 and h.shape[-1] != m.shape[-1]:
        raise InputError(f"human has {h.shape[-1]} items but metric has {m.shape[-1]} (items on the last axis)")
    if h.ndim == 1 and m.ndim == 2 and h.shape[0] != m.shape[0]:
        raise InputError(f"system-level human has {h.shape[0]} systems but metric has {m.shape[0]} rows")
    if h.ndim == 1 and m.ndim == 1 and h.shape[0] != m.shape[0]:
        raise InputError(f"human has {h.shape[0]} items but metric has {m.shape[0]}")
    return h, m


def _n_items(metric: np.ndarray) -> int:
    return int(metric.shape[-1])


def _human_resampled(human: np.ndarray, metric: np.ndarray) -> bool:
    """Whether ``human`` has the item axis (else it is a fixed system-level vector)."""
    return not (human.ndim == 1 and metric.ndim == 2)


def _take(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return a[..., idx]


def _sys(x: np.ndarray) -> np.ndarray:
    """Per-system means over the items present (the stats module's rule; a 1-D input is a
    per-system vector already)."""
    return system_means(x)


def _observed(stat: Statistic, human: np.ndarray, metric: np.ndarray) -> float:
    if stat.kind == "units":
        assert stat.units is not None
        return _ratio(*stat.units(human, metric))
    assert stat.fn is not None
    if stat.kind == "system":
        return _safe(stat.fn, _sys(human), _sys(metric))
    return _safe(stat.fn, human, metric)


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


def _exact_small_integers(*vectors: np.ndarray) -> bool:
    """Whether the weighted sums of these vectors and of their differences are exact in float32 for
    any 0/1 or count weights that sum to at most the vectors' length (all partial sums are integers
    below 2**24)."""
    for v in vectors:
        if v.size and not (np.all(np.isfinite(v)) and np.all(v == np.round(v))):
            return False
        if 2 * v.size * (float(np.max(np.abs(v))) if v.size else 0.0) >= 2**24:
            return False
    return True


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
    exact = all(_exact_small_integers(num, den) for num, den in parts)
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
    if all(_exact_small_integers(num, den) for num, den in vectors):
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


def _ratio(num: np.ndarray, den: np.ndarray) -> float:
    """A units statistic on the full data (all weights 1), computed as the reference path does
    (integer units: any order of summation is exact)."""
    if _exact_small_integers(num, den):
        return float(num.sum()) / float(den.sum()) if den.sum() else float("nan")
    ones = np.ones((1, num.size))
    with np.errstate(invalid="ignore", divide="ignore"):
        return float(((ones @ num) / (ones @ den))[0])


def _safe(fn: StatFn, h: np.ndarray, m: np.ndarray) -> float:
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore")
        try:
            v = float(fn(h, m))
        except (ValueError, ZeroDivisionError, FloatingPointError):
            return float("nan")
    return v


def _batch_or(values: Callable[[], np.ndarray], one_by_one: Callable[[], np.ndarray]) -> np.ndarray:
    """A batched statistic's values; where the batch cannot be computed, ``one_by_one`` (each
    value by :func:`_safe`)."""
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
        return self.credits.num[self.credits.codes], self.credits.den[self.credits.codes]


def units_of(stat: Statistic, human: Any, metric: Any, resampling: Resampling | None = None) -> Units:
    """The :class:`Units` of a bound ``units`` statistic on ``(human, metric)``: grouped by value when
    ``resampling.method`` is ``auto``, the statistic is ``discrete`` and its credits take at most
    :data:`~evalign.meta.sufficient.MAX_CATEGORIES` values; else the per-item vectors."""
    if stat.kind != "units" or stat.units is None:
        raise ValueError(f"statistic '{stat.name}' is not a ratio of per-item credits")
    h, m = _as_arrays(human, metric)
    num, den = stat.units(h, m)
    cr = _units_credits(stat, num, den, with_settings(resampling).method)
    if cr is not None:
        return Units(_ratio(num, den), credits=cr, params=dict(stat.params))
    return Units(_ratio(num, den), num, den, params=dict(stat.params))


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
    h, m = _as_arrays(human, metric)
    stat = _as_statistic(stat_fn, level=level, grouping=grouping, variant=variant, epsilon=epsilon).bind(h, m)
    n = _n_items(m)
    if stat.kind == "system" and m.ndim != 2:
        raise InputError("a system-level statistic needs a systems x items metric array")
    if stat.kind == "units":
        return bootstrap_units([units_of(stat, h, m, r)], resampling=r, method=method)[0]
    value, dist = _observed(stat, h, m), _bootstrap_direct(stat, h, m, n, n_resamples, seed, r.workers)
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
        h_fixed = None if _human_resampled(h, m) else h

        def block(idx: np.ndarray) -> np.ndarray:
            return np.array([_safe(fn, _sys(h[:, i]) if h_fixed is None else h_fixed, _sys(m[:, i])) for i in idx])
    else:
        resample_h = _human_resampled(h, m)
        many = stat.resampled if resample_h and h.shape == m.shape else None

        def one_by_one(idx: np.ndarray) -> np.ndarray:
            return np.array([_safe(fn, _take(h, i) if resample_h else h, _take(m, i)) for i in idx])

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
    h, a = _as_arrays(human, metric_a)
    _, b = _as_arrays(human, metric_b)
    if a.shape != b.shape:
        raise InputError(f"metric_a has shape {a.shape} but metric_b has {b.shape}")
    options = {"level": level, "grouping": grouping, "variant": variant, "epsilon": epsilon}
    stat = _as_statistic(stat_fn, **options)
    other = stat if stat_b is None else _as_statistic(stat_b, **options)
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
    va, vb = _observed(sa, h, a), _observed(sb, h, b)
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
        hs = _sys(h)

        def block(masks: np.ndarray) -> np.ndarray:
            return np.array([_safe(fa_, hs, _sys(np.where(mk, zb, za))) - _safe(fb_, hs, _sys(np.where(mk, za, zb)))
                             for mk in masks])
    else:
        same = h.shape == za.shape == zb.shape

        def side(fn: StatFn, many: SwapFn | None, x: np.ndarray, y: np.ndarray, masks: np.ndarray) -> np.ndarray:
            """The statistic of where(mask, y, x) for each mask: batched when the statistic can."""
            def one_by_one() -> np.ndarray:
                return np.array([_safe(fn, h, np.where(mk, y, x)) for mk in masks])

            if many is not None and same:
                return _batch_or(lambda: many(h, x, y, masks), one_by_one)
            return one_by_one()

        def block(masks: np.ndarray) -> np.ndarray:
            return side(fa_, sa.swapped, za, zb, masks) - side(fb_, sb.swapped, zb, za, masks)

    deltas, exact = _map_masks(block, _n_items(a), r)
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
        return np.array([_observed(sa, h, np.where(mk, zb, za)) - _observed(sb, h, np.where(mk, za, zb))
                         for mk in flat.reshape((flat.shape[0], *shape))])

    deltas, exact = _map_masks(block, a.size, r)
    return _observed(sa, h, a), _observed(sb, h, b), deltas, exact


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


def compare_metrics(
    stat_fn: str | Statistic | StatFn,
    human: Any,
    metrics: Mapping[str, Any],
    n_permutations: int | None = None,
    seed: Any = None,
    *,
    resampling: Resampling | None = None,
    **options: Any,
) -> MetricComparison:
    """The statistic of every metric and the paired permutation p-value of every pair of metrics
    (each pair tested with the same ``seed``). ``resampling``: its ``n_permutations`` and ``seed``
    (default 1000 and 0), replaced by those given one by one. ``options`` as for :func:`make_statistic`."""
    r = with_settings(resampling, n_permutations=n_permutations, seed=seed)
    names = tuple(metrics)
    scheme = options.pop("scheme", "item")
    stat = _as_statistic(stat_fn, **options)
    h = np.asarray(human, dtype=float)
    values = []
    for name in names:
        hh, mm = _as_arrays(h, metrics[name])
        values.append(_observed(stat.bind(hh, mm), hh, mm))
    k = len(names)
    pv = np.ones((k, k))
    for i, j in itertools.combinations(range(k), 2):
        test = paired_permutation_test(stat, h, metrics[names[i]], metrics[names[j]], resampling=r, scheme=scheme)
        pv[i, j] = pv[j, i] = test.p_value
    return MetricComparison(stat.name, names, tuple(values), pv, r.n_permutations, r.seed)


def significance_clusters(
    results: MetricComparison
    | tuple[Mapping[str, float], Mapping[tuple[str, str], float] | Callable[[str, str], float]],
    alpha: float = 0.05,
) -> dict[str, int]:
    """Rank metrics and group them into clusters that are not significantly different.

    ``results``: a :class:`MetricComparison`, or ``(values, p_values)`` with ``values[name]`` (higher =
    better) and ``p_values[(a, b)]`` two-sided (a mapping, or a function ``(a, b) -> p`` called only for the
    pairs the rule needs). Rule (mt-metrics-eval ``AssignRanks``, WMT metrics
    task): sort by decreasing value (ties by name); the first metric gets cluster 1;
    metric *i* opens a new cluster (rank + 1) when any metric from the first of the current cluster
    to *i-1* has a higher value and ``p <= alpha`` against it. Metrics whose value is NaN get one
    last cluster of their own. Returns name -> cluster (1 = best).
    """
    if isinstance(results, MetricComparison):
        values = dict(zip(results.names, results.values, strict=True))

        def pval(x: str, y: str) -> float:
            return results.p(x, y)
    else:
        values = dict(results[0])
        pmap = results[1]

        def pval(x: str, y: str) -> float:
            if callable(pmap):
                return float(pmap(x, y))
            if (x, y) in pmap:
                return float(pmap[(x, y)])
            if (y, x) in pmap:
                return float(pmap[(y, x)])
            raise InputError(f"no p-value for metrics '{x}' and '{y}'")

    def key(name: str) -> tuple[int, float, str]:
        v = values[name]
        return (0, -v, name) if math.isfinite(v) else (1, 0.0, name)

    order = sorted(values, key=key)
    defined = [n for n in order if math.isfinite(values[n])]
    clusters: dict[str, int] = {}
    current, start = 1, 0
    for i, name in enumerate(defined):
        if any(values[defined[j]] > values[name] and pval(defined[j], name) <= alpha for j in range(start, i)):
            current += 1
            start = i
        clusters[name] = current
    for name in order:  # undefined statistics come last, in a cluster of their own
        clusters.setdefault(name, current + 1 if defined else 1)
    return clusters


__all__ = [
    "ALTERNATIVES",
    "KENDALL_NAMES",
    "SCHEMES",
    "STATISTICS",
    "BootstrapResult",
    "MetricComparison",
    "PermutationResult",
    "Resampling",
    "Statistic",
    "Units",
    "bootstrap_ci",
    "bootstrap_counts",
    "bootstrap_units",
    "compare_metrics",
    "make_statistic",
    "paired_bootstrap_distributions",
    "paired_permutation_test",
    "permutation_swaps",
    "permutation_test_units",
    "significance_clusters",
    "units_of",
]

