"""Comparing many metrics at once: every pair's paired permutation test (:func:`compare_metrics`) and the
significance clusters of mt-metrics-eval's ``tasks.AssignRanks`` (:func:`significance_clusters`). Pure
functions over the resampling of :mod:`evalign.meta.significance`."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evalign.errors import InputError
from evalign.meta.resampling import Resampling, with_settings
from evalign.meta.significance import paired_permutation_test
from evalign.meta.statistics import StatFn, Statistic, as_arrays, as_statistic, observed_value


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
    stat = as_statistic(stat_fn, **options)
    h = np.asarray(human, dtype=float)
    values = []
    for name in names:
        hh, mm = as_arrays(h, metrics[name])
        values.append(observed_value(stat.bind(hh, mm), hh, mm))
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
