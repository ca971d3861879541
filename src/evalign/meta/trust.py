"""The trust report: which metric to trust, per task type, with intervals, clusters and cost.

For each group (the whole set, and each value of ``by`` when given) the metrics are ranked by
their agreement with humans; each value comes with a bootstrap confidence interval over items
(:func:`evalign.meta.significance.bootstrap_ci`), metrics are grouped into significance clusters
(paired permutation tests, :func:`evalign.meta.significance.significance_clusters`; cluster 1 holds
the metrics not significantly worse than the best), and the cost of each metric is shown as seconds
per 1,000 items as measured in the scoring run (:attr:`evalign.scoring.MetricRun.seconds_per_1000`).

Two entry points, both pure functions:

* :func:`trust_table_items` for item tables with item-level human ratings, or with system-level
  human values only (e.g. Self-Instruct's human ranks: system-level Kendall / Pearson / Spearman over
  the systems, items resampled on the metric side, the per-system metric score being the mean of its
  item scores);
* :func:`trust_table_pairs` for pair tables (e.g. PandaLM: preference accuracy with and without
  ties, each metric's tie threshold calibrated once on all pairs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from evalign.errors import InputError
from evalign.meta.breakdown import (
    ALL,
    ItemArrays,
    PairArrays,
    _group_index,
    _pool_epsilons,
    item_arrays,
    pair_arrays,
)
from evalign.meta.significance import (
    Statistic,
    bootstrap_ci,
    make_statistic,
    paired_permutation_test,
    significance_clusters,
)

COLUMNS = ("group", "n", "rank", "cluster", "metric", "value", "ci_low", "ci_high", "p_vs_best")


@dataclass(frozen=True)
class TrustReport:
    """Result of a trust table: ``table`` has one row per (group, metric) with the columns
    ``group, n, rank, cluster, metric, value, ci_low, ci_high, p_vs_best`` (two-sided permutation
    p-value against the top metric of the group), one column per extra statistic,
    ``epsilon`` and ``s_per_1000``; ``groups`` lists every group with its size and status."""

    table: pd.DataFrame
    groups: pd.DataFrame
    statistic: str
    level: str
    confidence: float
    alpha: float
    n_resamples: int
    n_permutations: int
    seed: int
    notes: tuple[str, ...] = ()

    def for_group(self, group: str = ALL) -> pd.DataFrame:
        """The ranked rows of one group."""
        return self.table[self.table["group"] == group].reset_index(drop=True)


def _costs(costs: Mapping[str, float] | Sequence[Any] | None) -> dict[str, float]:
    if costs is None:
        return {}
    if isinstance(costs, Mapping):
        return {str(k): float(v) for k, v in costs.items()}
    return {str(r.column): float(r.seconds_per_1000) for r in costs}


def trust_table_items(
    table: pd.DataFrame,
    human: str | Mapping[str, float],
    metric_cols: Sequence[str],
    *,
    statistic: str | None = None,
    also: Sequence[str] | None = None,
    level: str | None = None,
    grouping: str = "item",
    variant: str | None = None,
    by: str | None = None,
    n_resamples: int = 1000,
    n_permutations: int = 1000,
    confidence: float = 0.95,
    alpha: float = 0.05,
    seed: int = 0,
    min_group_size: int = 10,
    costs: Mapping[str, float] | Sequence[Any] | None = None,
    human_higher_is_better: bool = True,
    lower_is_better: Sequence[str] = (),
) -> TrustReport:
    """Trust table of an item table.

    ``human``: a human rating column, or ``{system: value}`` for system-level human data (then the
    defaults are ``level="system"``, ``statistic="kendall"``, ``also=("pearson", "spearman")``;
    otherwise ``level="item"``, ``statistic="pairwise_accuracy"`` with ``grouping``, ``also=("kendall",
    "pearson", "spearman")`` at the same level and grouping). ``costs``: ``{column: s/1000 items}`` or
    the :class:`~evalign.scoring.MetricRun` list of the scoring run. Human ranks: pass
    ``human_higher_is_better=False``.
    """
    system_human = not isinstance(human, str)
    level = level or ("system" if system_human else "item")
    if system_human and level != "system":
        raise InputError("system-level human values allow only level='system'", field="level")
    statistic = statistic or ("kendall" if level == "system" else "pairwise_accuracy")
    if also is None:
        also = [s for s in ("kendall", "pearson", "spearman") if s != statistic]
    arrays = item_arrays(table, human, metric_cols, human_higher_is_better=human_higher_is_better,
                         lower_is_better=lower_is_better)
    notes = []
    if system_human:
        notes.append(f"system-level human values over {len(arrays.systems)} systems; metric system score = "
                     "mean of item scores; bootstrap over items on the metric side")
    return _trust(table, arrays, False, statistic, list(also), level, grouping, variant, by, n_resamples,
                  n_permutations, confidence, alpha, seed, min_group_size, _costs(costs), tuple(notes))


def trust_table_pairs(
    pairs_scored: pd.DataFrame,
    pref_columns: Sequence[str],
    metric_cols: Sequence[str],
    *,
    statistic: str = "preference_accuracy",
    also: Sequence[str] | None = None,
    by: str | None = None,
    n_resamples: int = 1000,
    n_permutations: int = 1000,
    confidence: float = 0.95,
    alpha: float = 0.05,
    seed: int = 0,
    min_group_size: int = 30,
    costs: Mapping[str, float] | Sequence[Any] | None = None,
    lower_is_better: Sequence[str] = (),
) -> TrustReport:
    """Trust table of a pair table with ``<metric>_a`` / ``<metric>_b`` columns (see
    :func:`evalign.meta.breakdown.pair_scores`): preference accuracy with ties (ranking statistic)
    and without ties (``also``), each metric's epsilon calibrated once on all pairs."""
    if also is None:
        also = [s for s in ("preference_accuracy", "preference_accuracy_no_ties") if s != statistic]
    arrays = pair_arrays(pairs_scored, pref_columns, metric_cols, lower_is_better=lower_is_better)
    notes = (f"{len(pref_columns)} annotator column(s); pairs resampled; metric epsilon calibrated on all pairs",)
    return _trust(pairs_scored, arrays, True, statistic, list(also), "item", "item", None, by, n_resamples,
                  n_permutations, confidence, alpha, seed, min_group_size, _costs(costs), notes)


def _trust(
    table: pd.DataFrame,
    arrays: ItemArrays | PairArrays,
    is_pairs: bool,
    statistic: str,
    also: list[str],
    level: str,
    grouping: str,
    variant: str | None,
    by: str | None,
    n_resamples: int,
    n_permutations: int,
    confidence: float,
    alpha: float,
    seed: int,
    min_group_size: int,
    costs: dict[str, float],
    notes: tuple[str, ...],
) -> TrustReport:
    if by == "system":
        raise InputError("a trust table cannot be split by system (use breakdown(by='system'))", field="by")
    eps = _pool_epsilons(arrays, statistic, grouping, None, is_pairs)
    also_eps = {s: _pool_epsilons(arrays, s, grouping, None, is_pairs) for s in also}
    groups = _group_index(table, arrays, by, is_pairs)
    rows: list[dict[str, Any]] = []
    group_rows = []
    extra_notes: list[str] = []
    for gname, sel in groups.items():
        n = len(sel)
        if n < min_group_size:
            group_rows.append({"group": gname, "n": n, "status": "too small"})
            continue
        group_rows.append({"group": gname, "n": n, "status": "ok"})
        h = arrays.human if (arrays.human.ndim == 1 and not is_pairs) else arrays.human[..., sel]
        data = {m: arr[..., sel] for m, arr in arrays.metrics.items()}
        stats = {m: make_statistic(statistic, level=level, grouping=grouping, variant=variant, epsilon=eps[m])
                 for m in data}
        cis = {m: bootstrap_ci(stats[m], h, data[m], n_resamples=n_resamples, confidence=confidence, seed=seed)
               for m in data}
        values = {m: cis[m].value for m in data}
        cache: dict[tuple[str, str], float] = {}

        def p_value(a: str, b: str, h: np.ndarray = h, data: dict[str, np.ndarray] = data,
                    stats: dict[str, Statistic] = stats, cache: dict[tuple[str, str], float] = cache) -> float:
            # computed only for the pairs the cluster rule asks for; each metric keeps its pool epsilon
            key = (min(a, b), max(a, b))
            if key not in cache:
                r = paired_permutation_test(stats[key[0]], h, data[key[0]], data[key[1]], n_permutations, seed,
                                            stat_b=stats[key[1]])
                cache[key] = r.p_value
            return cache[key]

        try:
            clusters: dict[str, Any] = significance_clusters((values, p_value), alpha=alpha)
        except InputError as e:  # e.g. pairwise accuracy pooled over items with one epsilon per metric
            clusters = dict.fromkeys(data, float("nan"))
            note = f"no significance clusters: {e}"
            if note not in extra_notes:
                extra_notes.append(note)
        order = sorted(data, key=lambda m: (0, -values[m], m) if math.isfinite(values[m]) else (1, 0.0, m))
        p_best = {m: float("nan") for m in data}
        if clusters and all(isinstance(c, int) for c in clusters.values()):
            for m in order[1:]:
                if math.isfinite(values[m]):
                    p_best[m] = p_value(order[0], m)
        for rank, m in enumerate(order, start=1):
            row: dict[str, Any] = {
                "group": gname,
                "n": n,
                "rank": rank,
                "cluster": clusters[m],
                "metric": m,
                "value": values[m],
                "ci_low": cis[m].low,
                "ci_high": cis[m].high,
                "p_vs_best": p_best[m],
            }
            for s in also:
                st = make_statistic(s, level=level, grouping=grouping, variant=variant, epsilon=also_eps[s][m])
                row[s] = float(st(h, data[m]))
            row["epsilon"] = float("nan") if eps[m] is None else eps[m]
            row["s_per_1000"] = costs.get(m, float("nan"))
            rows.append(row)
    cols = [*COLUMNS, *also, "epsilon", "s_per_1000"]
    return TrustReport(
        table=pd.DataFrame(rows, columns=cols),
        groups=pd.DataFrame(group_rows, columns=["group", "n", "status"]),
        statistic=statistic,
        level=level,
        confidence=confidence,
        alpha=alpha,
        n_resamples=n_resamples,
        n_permutations=n_permutations,
        seed=seed,
        notes=(*notes, *extra_notes),
    )


__all__ = ["TrustReport", "trust_table_items", "trust_table_pairs"]

