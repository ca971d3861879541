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
* **Fast resampling of decomposable statistics**: a ``units`` statistic whose per-unit numerators and
  denominators are small integers (preference accuracy at a fixed epsilon: 0/1 per pair) is
  resampled and permuted as float32 matrix products over a matrix of draws built once per
  ``(n, resamples or permutations, seed)`` (:func:`bootstrap_counts`, :func:`permutation_swaps`, the
  same draws as above). All sums are integers below 2**24, hence exact, so the results are
  bit-identical to recomputing the statistic per resample; other statistics take the direct path.
* **Significance clusters** follow mt-metrics-eval ``tasks.AssignRanks`` (WMT metrics task): metrics
  are sorted by decreasing statistic; walking down the list, metric *i* opens a new cluster when any
  metric from the start of the current cluster up to *i-1* is significantly better than it
  (two-sided ``p <= alpha`` with a positive difference).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from evalign.errors import InputError
from evalign.meta.correlation import correlation, system_means
from evalign.meta.pairwise import (
    calibrate_epsilon,
    pairwise_accuracy,
    pairwise_preference_accuracy,
    preference_units,
)
from evalign.meta.resampling import Resampling, with_settings

StatFn = Callable[[np.ndarray, np.ndarray], float]
UnitFn = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]

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
      weighted sums.

    ``prepare(human, metric)`` fixes per-metric parameters on the full data (the calibrated epsilon)
    and returns the statistic to use for that metric. ``standardize`` z-scores metric values before a
    permutation swap (``generic``/``system`` kinds).
    """

    name: str
    kind: str = "generic"
    fn: StatFn | None = None
    units: UnitFn | None = None
    prepare: Callable[[np.ndarray, np.ndarray], Statistic] | None = None
    standardize: bool = True
    params: Mapping[str, Any] = field(default_factory=dict)

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

    return Statistic(method, "generic", fn=fn_item, standardize=standardize,
                     params={"level": "item", "grouping": grouping, **opts})


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

            return Statistic("pairwise_accuracy", "units", units=units, params=params)

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
            return _memo_units(("preference", eps, with_ties), h, m, lambda: preference_units(h, m, eps, with_ties))

        return Statistic(name, "units", units=units, params={"epsilon": eps, "ties": with_ties})

    def prepare(h: np.ndarray, m: np.ndarray) -> Statistic:
        if epsilon is not None:
            return bound(float(epsilon))
        if not with_ties:
            return bound(0.0)  # without ties the metric must pick a side: only equal scores tie
        r = pairwise_preference_accuracy(h.T, m[0], m[1], epsilon=None)
        return bound(float(r.epsilon))

    return Statistic(name, "generic", fn=lambda h, m: float("nan"), prepare=prepare,
                     params={"epsilon": epsilon, "ties": with_ties})


#: per-unit vectors of the last few (statistic, human, metric) inputs, keyed by content digests: a
#: trust table asks for the same metric's vectors in its bootstrap and in each permutation test.
_UNITS_MEMO_SIZE = 16
_units_memo: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray]] = {}


def _digest(a: np.ndarray) -> tuple[Any, ...]:
    a = np.ascontiguousarray(a)
    return (a.shape, a.dtype.str, hashlib.blake2b(a.tobytes(), digest_size=16).digest())


def _memo_units(
    key: tuple[Any, ...], h: np.ndarray, m: np.ndarray, compute: Callable[[], tuple[np.ndarray, np.ndarray]]
) -> tuple[np.ndarray, np.ndarray]:
    """``compute()`` once per distinct (key, h, m) content; returns read-only arrays."""
    full = (*key, _digest(np.asarray(h)), _digest(np.asarray(m)))
    hit = _units_memo.get(full)
    if hit is None:
        num, den = compute()
        num.setflags(write=False)
        den.setflags(write=False)
        if len(_units_memo) >= _UNITS_MEMO_SIZE:
            _units_memo.pop(next(iter(_units_memo)))
        hit = _units_memo[full] = (num, den)
    return hit


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


def _counts(idx: np.ndarray, n: int) -> np.ndarray:
    """Multiplicity of each item in each resample: (B x N) from index draws (B x N)."""
    b = idx.shape[0]
    flat = (idx + n * np.arange(b)[:, None]).ravel()
    return np.bincount(flat, minlength=b * n).reshape(b, n).astype(float)


def _observed(stat: Statistic, human: np.ndarray, metric: np.ndarray) -> float:
    if stat.kind == "units":
        return float(_unit_values(stat, human, metric, np.ones((1, _n_items(metric))))[0])
    assert stat.fn is not None
    if stat.kind == "system":
        return _safe(stat.fn, _sys(human), _sys(metric))
    return _safe(stat.fn, human, metric)


def _unit_values(stat: Statistic, human: np.ndarray, metric: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """A ``units`` statistic for each row of item weights (B x N)."""
    assert stat.units is not None
    num, den = stat.units(human, metric)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weights @ num) / (weights @ den)


# --------------------------------------------------------------------------------------------
# fast resampling of decomposable ("units") statistics
#
# A units statistic is sum(w * num) / sum(w * den) over items, w = an item's multiplicity in a
# bootstrap resample (or 0/1 keep/swap masks in a permutation). When num and den are small integers
# (0/1 correctness of pairs: preference accuracy at a fixed epsilon), every such sum is an integer and
# is computed exactly in any order, also in float32 as long as it stays below 2**24. The weights are
# then built once per (seed, n, resamples) as a float32 matrix (the same draws as the reference
# path) and each statistic costs one matrix-vector product; the results are bit-identical to the
# float64 products of the reference path. Non-integer units (per-item accuracies or correlations)
# keep the reference path.

#: largest float32 matrix of draws kept between calls (bytes); larger ones are rebuilt per call.
_DRAW_CACHE_BYTES = 1 << 30
#: rows of draws made at a time (keeps the int32 index chunk small)
_DRAW_CHUNK_ELEMS = 4_000_000
_draw_cache: dict[str, tuple[tuple[int, int, int], np.ndarray]] = {}


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


def _cached(kind: str, key: tuple[int, int, int], build: Callable[[], np.ndarray]) -> np.ndarray:
    hit = _draw_cache.get(kind)
    if hit is not None and hit[0] == key:
        return hit[1]
    out = build()
    out.setflags(write=False)  # shared between calls: read-only
    if out.nbytes <= _DRAW_CACHE_BYTES:
        _draw_cache[kind] = (key, out)
    else:
        _draw_cache.pop(kind, None)
    return out


def bootstrap_counts(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """Multiplicity of each item in each bootstrap resample, ``(n_resamples, n)`` float32.

    Row ``b`` counts the draws of ``numpy.random.default_rng(seed).integers(0, n, (n_resamples, n))[b]``
    (the index draws of :func:`bootstrap_ci`), made in chunks of rows as int32 (the same stream).
    Counts are at most ``n``; the rows sum to ``n``. The array is read-only (kept for the next call
    with the same arguments when it is at most ``_DRAW_CACHE_BYTES``).
    """
    def build() -> np.ndarray:
        rng = np.random.default_rng(seed)
        out = np.empty((n_resamples, n), dtype=np.float32)
        rows = max(1, _DRAW_CHUNK_ELEMS // max(n, 1))
        for r0 in range(0, n_resamples, rows):
            r1 = min(n_resamples, r0 + rows)
            idx = rng.integers(0, n, (r1 - r0, n), dtype=np.int32)
            for k, row in enumerate(idx, start=r0):
                out[k] = np.bincount(row, minlength=n)
        return out

    return _cached("bootstrap", (n, n_resamples, seed), build)


def permutation_swaps(n: int, n_permutations: int, seed: int) -> tuple[np.ndarray, bool]:
    """The swap masks of :func:`paired_permutation_test` as a float32 ``(P, n)`` 0/1 matrix and
    whether they are the exact enumeration (all ``2**n`` patterns, when ``2**n <= n_permutations``).
    Otherwise row ``p`` is ``numpy.random.default_rng(seed).random((n_permutations, n))[p] < 0.5``."""
    if n <= 20 and 2**n <= n_permutations:
        masks, exact = _swap_masks(n, n_permutations, np.random.default_rng(seed))
        return masks.astype(np.float32), exact

    def build() -> np.ndarray:
        rng = np.random.default_rng(seed)
        out = np.empty((n_permutations, n), dtype=np.float32)
        rows = max(1, _DRAW_CHUNK_ELEMS // max(n, 1))
        for r0 in range(0, n_permutations, rows):
            r1 = min(n_permutations, r0 + rows)
            out[r0:r1] = rng.random((r1 - r0, n)) < 0.5
        return out

    return _cached("permutation", (n, n_permutations, seed), build), False


def _fast_bootstrap_units(num: np.ndarray, den: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """``(W @ num) / (W @ den)`` for the bootstrap count matrix W, exact (integer units only)."""
    w = bootstrap_counts(num.size, n_resamples, seed)
    sums = (w @ np.stack([num, den], axis=1).astype(np.float32)).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums[:, 0] / sums[:, 1]


def _fast_permutation_units(
    na: np.ndarray, da: np.ndarray, nb: np.ndarray, db: np.ndarray, n_permutations: int, seed: int
) -> tuple[np.ndarray, bool]:
    """Permutation deltas of two units statistics (integer units only), exact; and the exact flag.

    With swap mask s (1 = swap): a's numerator is ``sum(na) + s @ (nb - na)``, b's ``sum(nb) - s @ (nb - na)``,
    likewise for the denominators: integers, equal to the reference ``keep @ na + swap @ nb``."""
    s, exact = permutation_swaps(na.size, n_permutations, seed)
    diff = np.stack([nb - na, db - da], axis=1).astype(np.float32)
    moved = (s @ diff).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        pa = (na.sum() + moved[:, 0]) / (da.sum() + moved[:, 1])
        pb = (nb.sum() - moved[:, 0]) / (db.sum() - moved[:, 1])
    return pa - pb, exact


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
    settings (its ``n_resamples``, ``confidence`` and ``seed``; default 1000, 0.95, 0); ``n_resamples``,
    ``confidence`` and ``seed`` given one by one replace its values. ``confidence`` in (0, 1). ``method``:
    ``percentile`` (the ``confidence`` central quantiles of the bootstrap distribution, linear
    interpolation, as :func:`scipy.stats.bootstrap`) or ``basic`` (``2 * value - quantiles``). Per-metric
    parameters (a calibrated epsilon) are fixed on the full data and held in every resample. Returns a
    :class:`BootstrapResult`; low/high are NaN when no resample gave a defined value.
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
        value, dist = _bootstrap_units(stat, h, m, n, n_resamples, seed)
    else:
        value, dist = _observed(stat, h, m), _bootstrap_direct(stat, h, m, n, n_resamples, seed)
    return _interval(value, dist, confidence, method, n_resamples, seed, dict(stat.params))


def _bootstrap_units(
    stat: Statistic, h: np.ndarray, m: np.ndarray, n: int, n_resamples: int, seed: Any
) -> tuple[float, np.ndarray]:
    """The value and bootstrap distribution of a ``units`` statistic (weighted sums)."""
    assert stat.units is not None
    num, den = stat.units(h, m)
    value = _ratio(num, den)
    if _exact_small_integers(num, den):
        return value, _fast_bootstrap_units(num, den, n_resamples, seed)
    idx = np.random.default_rng(seed).integers(0, n, (n_resamples, n))
    with np.errstate(invalid="ignore", divide="ignore"):
        w = _counts(idx, n)
        return value, (w @ num) / (w @ den)


def _bootstrap_direct(
    stat: Statistic, h: np.ndarray, m: np.ndarray, n: int, n_resamples: int, seed: Any
) -> np.ndarray:
    """The bootstrap distribution of a ``system`` or ``generic`` statistic, one call per resample."""
    idx = np.random.default_rng(seed).integers(0, n, (n_resamples, n))
    assert stat.fn is not None
    fn = stat.fn
    if stat.kind == "system":
        # resampled items are averaged per system before the statistic (BOOT-INPUTS)
        h_fixed = None if _human_resampled(h, m) else h
        return np.array([_safe(fn, _sys(h[:, i]) if h_fixed is None else h_fixed, _sys(m[:, i])) for i in idx])
    resample_h = _human_resampled(h, m)
    return np.array([_safe(fn, _take(h, i) if resample_h else h, _take(m, i)) for i in idx])


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


# --------------------------------------------------------------------------------------------
# permutation test


def _zscore(x: np.ndarray) -> np.ndarray:
    ok = np.isfinite(x)
    if not ok.any():
        return x
    mu = float(np.mean(x[ok]))
    sd = float(np.std(x[ok]))
    return (x - mu) / sd if sd > 0 else x - mu


def _swap_masks(n: int, n_permutations: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """(P x N) boolean masks (True = swap the item); all 2**N patterns when that is at most P."""
    if n <= 20 and 2**n <= n_permutations:
        pats = ((np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)
        return pats, True
    return rng.random((n_permutations, n)) < 0.5, False


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

    ``resampling``: the :class:`~evalign.meta.resampling.Resampling` settings (its ``n_permutations``
    and ``seed``; default 1000 and 0); ``n_permutations`` and ``seed`` given one by one (also by
    position, as before) replace its values.
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
    (e.g. each metric's own pool-calibrated epsilon); by default ``stat_fn`` serves both.
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
        return _cell_permutation_test(stat, sa, sb, h, a, b, n_permutations, seed, alternative)
    if sa.kind == "units" and sb.kind == "units":
        va, vb, deltas, exact = _permute_units(sa, sb, h, a, b, n_permutations, seed)
    else:
        va, vb, deltas, exact = _permute_direct(stat, sa, sb, h, a, b, n_permutations, seed)
    delta = va - vb
    return PermutationResult(
        value_a=float(va),
        value_b=float(vb),
        delta=float(delta),
        p_value=_p_value(delta, deltas, exact, alternative),
        n_permutations=int(deltas.shape[0]),
        seed=seed,
        exact=exact,
        alternative=alternative,
    )


def _permute_units(
    sa: Statistic, sb: Statistic, h: np.ndarray, a: np.ndarray, b: np.ndarray, n_permutations: int, seed: Any
) -> tuple[float, float, np.ndarray, bool]:
    """Item swaps of two ``units`` statistics: (value a, value b, permutation deltas, exact)."""
    assert sa.units is not None and sb.units is not None
    na, da = sa.units(h, a)
    nb, db = sb.units(h, b)
    va, vb = _ratio(na, da), _ratio(nb, db)
    if _exact_small_integers(na, da, nb, db):
        deltas, exact = _fast_permutation_units(na, da, nb, db, n_permutations, seed)
        return va, vb, deltas, exact
    masks, exact = _swap_masks(_n_items(a), n_permutations, np.random.default_rng(seed))
    keep, swap = (~masks).astype(float), masks.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        pa = (keep @ na + swap @ nb) / (keep @ da + swap @ db)
        pb = (keep @ nb + swap @ na) / (keep @ db + swap @ da)
    return va, vb, pa - pb, exact


def _permute_direct(
    stat: Statistic, sa: Statistic, sb: Statistic, h: np.ndarray, a: np.ndarray, b: np.ndarray,
    n_permutations: int, seed: Any,
) -> tuple[float, float, np.ndarray, bool]:
    """Item swaps recomputing a ``system`` or ``generic`` statistic per permutation on the
    (z-scored) values: (value a, value b, permutation deltas, exact)."""
    masks, exact = _swap_masks(_n_items(a), n_permutations, np.random.default_rng(seed))
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
        deltas = np.array([
            _safe(fa_, hs, _sys(np.where(mk, zb, za))) - _safe(fb_, hs, _sys(np.where(mk, za, zb)))
            for mk in masks
        ])
        return va, vb, deltas, exact
    deltas = np.empty(masks.shape[0])
    for p, mk in enumerate(masks):
        xa = np.where(mk, zb, za)
        xb = np.where(mk, za, zb)
        deltas[p] = _safe(fa_, h, xa) - _safe(fb_, h, xb)
    return va, vb, deltas, exact


def _cell_permutation_test(
    stat: Statistic, sa: Statistic, sb: Statistic, h: np.ndarray, a: np.ndarray, b: np.ndarray,
    n_permutations: int, seed: int, alternative: str = "two-sided",
) -> PermutationResult:
    """Cell-level swaps (PERM-BOTH, mt-metrics-eval ``PermutationSigDiff``): every (system, item) cell
    of the two (z-scored) metrics is swapped independently with probability 1/2, and the statistic is
    recomputed on the swapped arrays (no per-item decomposition)."""
    if "epsilon" in sa.params and stat.name not in ("kendall", *KENDALL_NAMES):
        raise InputError(f"statistic '{stat.name}' holds a tie threshold per metric: cell-level swaps would mix "
                         "them; use scheme='item'", field="scheme")
    if sa.params.get("epsilon") != sb.params.get("epsilon"):
        raise InputError("cell-level swaps need the same epsilon for both metrics", field="scheme")
    za, zb = (_zscore(a), _zscore(b)) if stat.standardize else (a, b)
    cells = a.size
    rng = np.random.default_rng(seed)
    if cells <= 20 and 2**cells <= n_permutations:
        flat = ((np.arange(2**cells)[:, None] >> np.arange(cells)[None, :]) & 1).astype(bool)
        exact = True
    else:
        flat, exact = rng.random((n_permutations, cells)) < 0.5, False
    masks = flat.reshape((flat.shape[0], *a.shape))
    va, vb = _observed(sa, h, a), _observed(sb, h, b)
    deltas = np.empty(masks.shape[0])
    for p, mk in enumerate(masks):
        xa, xb = np.where(mk, zb, za), np.where(mk, za, zb)
        deltas[p] = _observed(sa, h, xa) - _observed(sb, h, xb)
    delta = va - vb
    return PermutationResult(
        value_a=float(va),
        value_b=float(vb),
        delta=float(delta),
        p_value=_p_value(delta, deltas, exact, alternative),
        n_permutations=int(deltas.shape[0]),
        seed=seed,
        exact=exact,
        alternative=alternative,
    )


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
    "bootstrap_ci",
    "bootstrap_counts",
    "compare_metrics",
    "make_statistic",
    "paired_permutation_test",
    "permutation_swaps",
    "significance_clusters",
]

