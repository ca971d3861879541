"""Agreement statistics by name: the :class:`Statistic` of ``(human, metric)`` arrays (items on the last
axis) and the registry of the built-in ones (Kendall, Pearson, Spearman and mt-metrics-eval's Kendall
variants, pairwise accuracy with tie calibration, preference accuracy), built by :func:`make_statistic`.
Pure functions; resampling and permutation tests over them are in :mod:`evalign.meta.significance`."""

from __future__ import annotations

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
from evalign.registry import Registry

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
      weighted sums. ``discrete``: the credit pairs ``(num, den)`` take a handful of values by
      construction (accuracies: 0/1 per pair, a per-item accuracy over a few pairs), so resampling
      may draw the counts of each value (sufficient statistics, ``Resampling.method="auto"``);
      a mean of continuous values (per-item correlations) keeps the item indices.

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
    discrete: bool = False

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
        human, metric = as_arrays(human, metric)
        bound = self.bind(human, metric)
        return observed_value(bound, human, metric)


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
    if name not in STATISTIC_FACTORIES:
        raise InputError(f"unknown statistic '{name}' (use one of {', '.join(STATISTICS)})", field="statistic")
    return STATISTIC_FACTORIES.get(name)(level=level, grouping=grouping, variant=variant, epsilon=epsilon,
                                         average=average)


#: Kendall variants by mt-metrics-eval's ``KendallVariants`` names (see :func:`evalign.meta.correlation.correlation`)
KENDALL_NAMES = {"tau_b": "b", "tau_c": "c", "tau_23": "23", "acc_23": "acc23"}
STATISTICS = (*CORRELATIONS, *KENDALL_NAMES, "pairwise_accuracy", "preference_accuracy",
              "preference_accuracy_no_ties")


def as_statistic(stat_fn: str | Statistic | StatFn, **options: Any) -> Statistic:
    if isinstance(stat_fn, Statistic):
        return stat_fn
    if isinstance(stat_fn, str):
        return make_statistic(stat_fn, **options)
    if callable(stat_fn):
        return Statistic(getattr(stat_fn, "__name__", "statistic"), "generic", fn=stat_fn)
    raise TypeError(f"stat_fn must be a name, a Statistic or a callable, got {type(stat_fn).__name__}")


# --------------------------------------------------------------------------------------------
# the registered statistics: name -> factory(level=, grouping=, variant=, epsilon=, average=)

#: every statistic by name (:func:`make_statistic` builds one); register more with
#: ``@STATISTIC_FACTORIES.register("name")`` on a factory taking the keywords above
STATISTIC_FACTORIES: Registry[Callable[..., Statistic]] = Registry("statistic")


def _register_correlation(name: str) -> None:
    @STATISTIC_FACTORIES.register(name)
    def factory(*, level: str, grouping: str, variant: str | None, epsilon: float | None,
                average: str) -> Statistic:
        if epsilon is not None and name != "kendall" and epsilon > 0:
            raise InputError(f"a tie threshold epsilon applies to Kendall only, not {name}", field="epsilon")
        return _correlation_statistic(name, level, grouping, variant, epsilon, average)


def _register_kendall_variant(name: str, kendall_variant: str) -> None:
    @STATISTIC_FACTORIES.register(name)
    def factory(*, level: str, grouping: str, variant: str | None, epsilon: float | None,
                average: str) -> Statistic:
        if variant is not None and variant != kendall_variant:
            raise InputError(f"statistic '{name}' is Kendall variant {kendall_variant!r}, not {variant!r}",
                             field="variant")
        return replace(_correlation_statistic("kendall", level, grouping, kendall_variant, epsilon, average),
                       name=name)


for _name in CORRELATIONS:
    _register_correlation(_name)
for _name, _variant in KENDALL_NAMES.items():
    _register_kendall_variant(_name, _variant)


@STATISTIC_FACTORIES.register("pairwise_accuracy")
def _pairwise_factory(*, level: str, grouping: str, variant: str | None, epsilon: float | None,
                      average: str) -> Statistic:
    return _pairwise_statistic(level, grouping, epsilon)


@STATISTIC_FACTORIES.register("preference_accuracy")
def _preference_factory(*, level: str, grouping: str, variant: str | None, epsilon: float | None,
                        average: str) -> Statistic:
    return _preference_statistic(True, epsilon)


@STATISTIC_FACTORIES.register("preference_accuracy_no_ties")
def _preference_no_ties_factory(*, level: str, grouping: str, variant: str | None, epsilon: float | None,
                                average: str) -> Statistic:
    return _preference_statistic(False, epsilon)


# --------------------------------------------------------------------------------------------
# array helpers


def as_arrays(human: Any, metric: Any) -> tuple[np.ndarray, np.ndarray]:
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


def n_items_of(metric: np.ndarray) -> int:
    return int(metric.shape[-1])


def human_resampled(human: np.ndarray, metric: np.ndarray) -> bool:
    """Whether ``human`` has the item axis (else it is a fixed system-level vector)."""
    return not (human.ndim == 1 and metric.ndim == 2)


def take_items(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return a[..., idx]


def per_system(x: np.ndarray) -> np.ndarray:
    """Per-system means over the items present (the stats module's rule; a 1-D input is a
    per-system vector already)."""
    return system_means(x)


def observed_value(stat: Statistic, human: np.ndarray, metric: np.ndarray) -> float:
    if stat.kind == "units":
        assert stat.units is not None
        return units_ratio(*stat.units(human, metric))
    assert stat.fn is not None
    if stat.kind == "system":
        return safe_value(stat.fn, per_system(human), per_system(metric))
    return safe_value(stat.fn, human, metric)


def exact_small_integers(*vectors: np.ndarray) -> bool:
    """Whether the weighted sums of these vectors and of their differences are exact in float32 for
    any 0/1 or count weights that sum to at most the vectors' length (all partial sums are integers
    below 2**24)."""
    for v in vectors:
        if v.size and not (np.all(np.isfinite(v)) and np.all(v == np.round(v))):
            return False
        if 2 * v.size * (float(np.max(np.abs(v))) if v.size else 0.0) >= 2**24:
            return False
    return True


def units_ratio(num: np.ndarray, den: np.ndarray) -> float:
    """A units statistic on the full data (all weights 1), computed as the reference path does
    (integer units: any order of summation is exact)."""
    if exact_small_integers(num, den):
        return float(num.sum()) / float(den.sum()) if den.sum() else float("nan")
    ones = np.ones((1, num.size))
    with np.errstate(invalid="ignore", divide="ignore"):
        return float(((ones @ num) / (ones @ den))[0])


def safe_value(fn: StatFn, h: np.ndarray, m: np.ndarray) -> float:
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore")
        try:
            v = float(fn(h, m))
        except (ValueError, ZeroDivisionError, FloatingPointError):
            return float("nan")
    return v
