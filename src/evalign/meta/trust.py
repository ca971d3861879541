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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from evalign.errors import InputError
from evalign.meta.breakdown import (
    ALL,
    ItemArrays,
    PairArrays,
    _group_index,
    calibrate_pool,
    item_arrays,
    pair_arrays,
)
from evalign.meta.significance import (
    STATISTICS,
    Statistic,
    bootstrap_ci,
    make_statistic,
    paired_permutation_test,
    significance_clusters,
)

COLUMNS = ("group", "n", "kind", "rank", "cluster", "metric", "value", "ci_low", "ci_high", "p_vs_best",
           "beats_baselines")


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


@dataclass(frozen=True)
class Predictor:
    """One row of a trust table: a metric, a judge or a baseline, with its data.

    ``data``: ``systems x items`` (item tables) or ``2 x pairs`` (pair tables), higher = better.
    ``epsilon``: a fixed tie threshold; None calibrates it once on all data (statistics with a
    threshold). ``statistics``: ``name -> Statistic`` for statistics this predictor computes its own
    way (a baseline's exact expectation, a judge's verdicts, a corpus system score); other names
    are made by :func:`~evalign.meta.significance.make_statistic`. ``ranked``: False for rows shown
    beside the ranking without a rank (the human ceiling). ``cost``: seconds per 1,000 items.
    """

    name: str
    data: np.ndarray
    kind: str = "metric"
    epsilon: float | None = None
    statistics: Mapping[str, Statistic] = field(default_factory=dict)
    ranked: bool = True
    cost: float = float("nan")


#: the significance tests a trust table can use
TESTS = ("permutation", "bootstrap")


def paired_bootstrap_p(dist_a: np.ndarray, dist_b: np.ndarray) -> float:
    """Two-sided paired bootstrap p-value of ``a - b`` from the two statistics' bootstrap
    distributions over the *same* resamples (the same seed and items): ``min(1, 2 * min(P(d <= 0),
    P(d >= 0)))`` with ``P(d <= 0) = (1 + #{d_b <= 0}) / (B + 1)`` over the B resamples where both
    are defined (Koehn 2004's paired bootstrap, two-sided with the +1 correction)."""
    d = np.asarray(dist_a, dtype=float) - np.asarray(dist_b, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return float("nan")
    lo = (1 + int(np.sum(d <= 0))) / (d.size + 1)
    hi = (1 + int(np.sum(d >= 0))) / (d.size + 1)
    return float(min(1.0, 2 * min(lo, hi)))


def rank_predictors(
    human: np.ndarray,
    predictors: Sequence[Predictor],
    groups: Mapping[str, np.ndarray],
    *,
    statistic: str,
    also: Sequence[str] = (),
    level: str = "item",
    grouping: str = "item",
    variant: str | None = None,
    is_pairs: bool = False,
    n_resamples: int = 1000,
    n_permutations: int = 1000,
    confidence: float = 0.95,
    alpha: float = 0.05,
    seed: int = 0,
    min_group_size: int = 10,
    test: str = "permutation",
    undefined: Callable[[np.ndarray, Mapping[str, np.ndarray]], str | None] | None = None,
    progress: Callable[[str, int, int | None], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, tuple[str, ...]]:
    """The rows of a trust table: per group, every predictor's value with a bootstrap interval; the
    ranked predictors (metrics, judges, baselines with ``ranked``) sorted by value; metrics and
    judges get ranks and significance clusters among themselves, and ``beats_baselines``: whether
    each is significantly better (``test`` at ``alpha``) than the best *trivial* baseline of its
    group (every baseline row with ``ranked``). ``test``: ``permutation``
    (:func:`~evalign.meta.significance.paired_permutation_test`) or ``bootstrap``
    (:func:`paired_bootstrap_p` on the interval's resamples). ``undefined(human, data)`` returns why
    the statistic is undefined in a group (then no rank, cluster or test; the reason is the group's
    status), or None. ``progress(stage, done, total)``: called after each bootstrap interval
    (``"bootstrap intervals"``, total known) and each paired test (``"permutation tests"`` or
    ``"bootstrap tests"``, total None).

    Returns (rows, groups, notes). Row columns: ``group, n, kind, rank, cluster, metric, value,
    ci_low, ci_high, p_vs_best, beats_baselines``, one per ``also``, ``epsilon``, ``s_per_1000``.
    """
    if test not in TESTS:
        raise InputError(f"unknown test {test!r} (use {' or '.join(TESTS)})", field="test")
    preds = {p.name: p for p in predictors}
    eps: dict[str, float | None] = {}
    for p in predictors:
        eps[p.name] = p.epsilon if p.epsilon is not None or statistic in p.statistics else calibrate_pool(
            human, p.data, statistic, grouping, is_pairs)
    also_eps = {
        s: {p.name: (p.epsilon if p.epsilon is not None or s in p.statistics else
                     calibrate_pool(human, p.data, s, grouping, is_pairs)) for p in predictors}
        for s in also
    }

    def stat_of(p: Predictor, name: str, e: float | None) -> Statistic | None:
        if name in p.statistics:
            return p.statistics[name]
        if name not in STATISTICS:
            return None
        return make_statistic(name, level=level, grouping=grouping, variant=variant, epsilon=e)

    rows: list[dict[str, Any]] = []
    group_rows: list[dict[str, Any]] = []
    notes: list[str] = []
    n_intervals = sum(len(preds) for sel in groups.values() if len(sel) >= min_group_size)
    done = {"intervals": 0, "tests": 0}
    test_stage = "permutation tests" if test == "permutation" else "bootstrap tests"
    for gname, sel in groups.items():
        n = len(sel)
        if n < min_group_size:
            group_rows.append({"group": gname, "n": n, "status": "too small"})
            continue
        h = human if (human.ndim == 1 and not is_pairs) else human[..., sel]
        data = {name: p.data[..., sel] for name, p in preds.items()}
        reason = undefined(h, data) if undefined is not None else None
        group_rows.append({"group": gname, "n": n, "status": "ok" if reason is None else f"undefined: {reason}"})
        stats = {name: stat_of(p, statistic, eps[name]) for name, p in preds.items()}
        cis = {}
        for name, st in stats.items():
            if st is None:
                continue
            cis[name] = bootstrap_ci(st, h, data[name], n_resamples=n_resamples, confidence=confidence, seed=seed)
            done["intervals"] += 1
            if progress is not None:
                progress("bootstrap intervals", done["intervals"], n_intervals)
        values = {name: (cis[name].value if name in cis else float("nan")) for name in preds}
        cache: dict[tuple[str, str], float] = {}

        def p_value(a: str, b: str, h: np.ndarray = h, data: dict[str, np.ndarray] = data,
                    stats: dict[str, Statistic | None] = stats, cache: dict[tuple[str, str], float] = cache,
                    cis: dict[str, Any] = cis) -> float:
            key = (min(a, b), max(a, b))
            if key not in cache:
                sa, sb = stats[key[0]], stats[key[1]]
                if sa is None or sb is None:
                    cache[key] = float("nan")
                elif test == "bootstrap":
                    cache[key] = paired_bootstrap_p(cis[key[0]].distribution, cis[key[1]].distribution)
                else:
                    cache[key] = paired_permutation_test(sa, h, data[key[0]], data[key[1]], n_permutations, seed,
                                                         stat_b=sb).p_value
                if progress is not None and sa is not None and sb is not None:
                    done["tests"] += 1
                    progress(test_stage, done["tests"], None)
            return cache[key]

        contenders = [name for name, p in preds.items() if p.kind != "baseline"]
        clusters: dict[str, Any] = dict.fromkeys(preds)
        p_best = {name: float("nan") for name in preds}
        beats: dict[str, Any] = dict.fromkeys(preds)
        if reason is None and contenders:
            try:
                clusters.update(significance_clusters(({m: values[m] for m in contenders}, p_value), alpha=alpha))
            except InputError as e:  # e.g. pairwise accuracy pooled over items with one epsilon per metric
                note = f"no significance clusters: {e}"
                if note not in notes:
                    notes.append(note)
            order_c = sorted(contenders, key=lambda m: (0, -values[m], m) if math.isfinite(values[m]) else (1, 0.0, m))
            if all(isinstance(clusters[m], int) for m in contenders):
                for m in order_c[1:]:
                    if math.isfinite(values[m]):
                        p_best[m] = p_value(order_c[0], m)
            trivial = [name for name, p in preds.items() if p.kind == "baseline" and p.ranked
                       and math.isfinite(values[name])]
            if trivial:
                best = max(trivial, key=lambda b: (values[b], b))
                for m in contenders:
                    if not math.isfinite(values[m]):
                        continue
                    if values[m] <= values[best]:
                        beats[m] = False
                        continue
                    try:
                        beats[m] = bool(p_value(m, best) <= alpha)
                    except InputError as e:
                        note = f"no test against the baselines: {e}"
                        if note not in notes:
                            notes.append(note)
        shown = sorted(preds, key=lambda m: (0, -values[m], m) if math.isfinite(values[m]) else (1, 0.0, m))
        rank = 0
        for m in shown:
            p = preds[m]
            is_contender = p.kind != "baseline"
            if is_contender and reason is None:
                rank += 1
            row: dict[str, Any] = {
                "group": gname,
                "n": n,
                "kind": p.kind,
                "rank": rank if is_contender and reason is None else None,
                "cluster": clusters[m] if is_contender and reason is None else None,
                "metric": m,
                "value": values[m],
                "ci_low": cis[m].low if m in cis and p.ranked else float("nan"),
                "ci_high": cis[m].high if m in cis and p.ranked else float("nan"),
                "p_vs_best": p_best[m],
                "beats_baselines": beats[m],
            }
            for s in also:
                st = stat_of(p, s, also_eps[s][m])
                row[s] = float(st(h, data[m])) if st is not None else float("nan")
            e = eps[m]
            row["epsilon"] = float("nan") if e is None else e
            row["s_per_1000"] = p.cost
            rows.append(row)
    cols = [*COLUMNS, *also, "epsilon", "s_per_1000"]
    return (pd.DataFrame(rows, columns=cols), pd.DataFrame(group_rows, columns=["group", "n", "status"]),
            tuple(notes))


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
    groups = _group_index(table, arrays, by, is_pairs)
    preds = [Predictor(m, arr, cost=costs.get(m, float("nan"))) for m, arr in arrays.metrics.items()]
    rows, group_rows, extra = rank_predictors(
        arrays.human, preds, groups, statistic=statistic, also=also, level=level, grouping=grouping,
        variant=variant, is_pairs=is_pairs, n_resamples=n_resamples, n_permutations=n_permutations,
        confidence=confidence, alpha=alpha, seed=seed, min_group_size=min_group_size)
    rows = rows.drop(columns=["kind", "beats_baselines"])
    return TrustReport(
        table=rows,
        groups=group_rows,
        statistic=statistic,
        level=level,
        confidence=confidence,
        alpha=alpha,
        n_resamples=n_resamples,
        n_permutations=n_permutations,
        seed=seed,
        notes=(*notes, *extra),
    )


__all__ = ["Predictor", "TrustReport", "paired_bootstrap_p", "rank_predictors", "trust_table_items", "trust_table_pairs"]

