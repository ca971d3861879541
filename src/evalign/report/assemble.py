"""Fill a :class:`ReportData` from scored tables by calling :mod:`evalign.meta` (the report itself
only renders). Used by ``evalign report``; ``evalign demo`` and users may call it too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from evalign.errors import InputError
from evalign.report.data import ReportData

#: at most this many points of an accuracy-vs-epsilon curve are plotted (the curve is thinned evenly)
MAX_CURVE_POINTS = 2000
#: epsilons tried for the curve of a pair table (quantiles of |score_a - score_b|)
PAIR_CURVE_POINTS = 60


def _tidy(trust: pd.DataFrame, **front: str) -> pd.DataFrame:
    """A trust table for display: constant ``group`` and all-NaN columns dropped, labels in front."""
    t = trust.copy()
    if "group" in t.columns and t["group"].nunique() <= 1:
        t = t.drop(columns="group")
    t = t.drop(columns=[c for c in t.columns if c != "value" and pd.api.types.is_numeric_dtype(t[c]) and t[c].isna().all()])
    for k, v in reversed(list(front.items())):
        t.insert(0, k, v)
    return t.reset_index(drop=True)


def _thin(eps: np.ndarray, acc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(eps) <= MAX_CURVE_POINTS:
        return eps, acc
    keep = np.unique(np.r_[np.linspace(0, len(eps) - 1, MAX_CURVE_POINTS).astype(int), int(np.nanargmax(acc))])
    return eps[keep], acc[keep]


def report_data(
    items: pd.DataFrame | None,
    metrics: Sequence[str],
    *,
    human: str | None = None,
    human_higher_is_better: bool = True,
    system_human: Mapping[str, float] | None = None,
    system_human_higher_is_better: bool = True,
    pairs: pd.DataFrame | None = None,
    pref_columns: Sequence[str] = (),
    judges: Sequence[str] = (),
    lower_is_better: Sequence[str] = (),
    by: str | None = "task",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    title: str = "evalign report",
    subtitle: str | None = None,
    notes: Sequence[str] = (),
    costs: Any = None,
) -> ReportData:
    """Compute the report's tables with :mod:`evalign.meta` and return them as :class:`ReportData`.

    ``items``: scored item table (metric and judge columns; for ``pairs`` it must hold the scored
    sides made by :func:`evalign.datasets.pairs_to_items`, column ``side``). ``human``: item-level
    human rating column; ``system_human``: ``{system: value}`` (e.g. ranks, then
    ``system_human_higher_is_better=False``). ``costs``: ``{column: seconds per 1,000 items}`` or the
    :class:`~evalign.scoring.MetricRun` list of the scoring run (a ``s_per_1000`` column). ``pairs`` + ``pref_columns``: a pair table with human
    preferences. ``metrics`` includes the judge columns of ``judges``. Confidence intervals are
    percentile bootstrap intervals over items (``n_resamples``, ``seed``) from
    :mod:`evalign.meta.trust`; ranks and clusters come from its paired permutation tests.
    """
    from evalign.meta.breakdown import breakdown, item_arrays, pair_scores
    from evalign.meta.correlation import system_means
    from evalign.meta.pairwise import calibrate_epsilon, pairwise_preference_accuracy
    from evalign.meta.trust import trust_table_items, trust_table_pairs

    metrics = list(dict.fromkeys([*metrics, *judges]))
    if not metrics:
        raise InputError("no metric columns to report (give --metric)", field="metric")
    if items is None and pairs is None:
        raise InputError("nothing to report: give a scored item table or a pair table")
    lower = list(lower_is_better)
    hib = {m: m not in lower for m in metrics}
    common = {"n_resamples": n_resamples, "n_permutations": n_resamples, "confidence": confidence, "seed": seed,
              "costs": costs}
    corr_parts: list[pd.DataFrame] = []
    acc_parts: list[pd.DataFrame] = []
    by_task: pd.DataFrame | None = None
    by_task_label = "statistic"
    curves: dict[str, tuple[np.ndarray, np.ndarray, float]] = {}
    leaderboard = None
    human_system_col = None
    all_notes = list(notes)

    is_side_table = items is not None and "side" in items.columns and pairs is not None
    if items is not None and not is_side_table:
        missing = [m for m in metrics if m not in items.columns]
        if missing:
            raise InputError(f"no metric column(s) {', '.join(missing)} in the scored items", file=items.attrs.get("source"), field=missing[0])
        # the leaderboard: per-system mean of item scores (as the system-level statistics use)
        target: str | Mapping[str, float] | None = human if human else system_human
        if target is not None:
            arr = item_arrays(items, target, metrics)  # not re-oriented: raw values
            leaderboard = pd.DataFrame({"system": list(arr.systems)})
            if human:
                leaderboard[human] = system_means(arr.human)
                human_system_col = human
                system_hib = human_higher_is_better
            else:
                assert system_human is not None
                leaderboard["human"] = [float(system_human[s]) for s in arr.systems]
                human_system_col = "human"
                system_hib = system_human_higher_is_better
            for m in metrics:
                leaderboard[m] = system_means(arr.metrics[m])
        else:
            system_hib = True
        if human:
            kw = {"human_higher_is_better": human_higher_is_better, "lower_is_better": lower, **common}
            for level in ("item", "system"):
                t = trust_table_items(items, human, metrics, statistic="kendall", also=["pearson", "spearman"], level=level, **kw)
                corr_parts.append(_tidy(t.table, level=level, statistic="kendall"))
                all_notes += list(t.notes)
            t = trust_table_items(items, human, metrics, statistic="pairwise_accuracy", also=[], level="item", **kw)
            acc_parts.append(_tidy(t.table, table="items", statistic="pairwise_accuracy (item grouping)"))
            oriented = item_arrays(items, human, metrics, human_higher_is_better=human_higher_is_better, lower_is_better=lower)
            for m in metrics:
                cal = calibrate_epsilon(oriented.human, oriented.metrics[m], grouping="item")
                e, a = _thin(np.asarray(cal.epsilons, dtype=float), np.asarray(cal.accuracies, dtype=float))
                curves[m] = (e, a, float(cal.epsilon))
            if by and by in items.columns and items[by].nunique() > 1:
                by_task = breakdown(items, human=human, metrics=metrics, by=by, statistic="kendall", grouping="item",
                                    human_higher_is_better=human_higher_is_better, lower_is_better=lower, wide=False)
                by_task_label = "Kendall tau (item grouping)"
        elif system_human is not None:
            t = trust_table_items(items, system_human, metrics, human_higher_is_better=system_human_higher_is_better,
                                  lower_is_better=lower, **common)
            corr_parts.append(_tidy(t.table, level="system", statistic="kendall"))
            all_notes += list(t.notes)
        leaderboard_hib = system_hib
    else:
        leaderboard_hib = True

    if pairs is not None:
        if not pref_columns:
            raise InputError("a pair table needs its preference columns (pref_1 ...)", field="pref")
        scored = pairs
        if not all(f"{m}_a" in pairs.columns and f"{m}_b" in pairs.columns for m in metrics):
            if items is None or "side" not in items.columns:
                raise InputError("pair table without <metric>_a/_b columns: give the scored sides (pairs_to_items) as items")
            scored = pair_scores(pairs, items, metrics)
        t = trust_table_pairs(scored, list(pref_columns), metrics, lower_is_better=lower, **common)
        acc_parts.append(_tidy(t.table, table="pairs", statistic="preference_accuracy (with ties)"))
        all_notes += list(t.notes)
        prefs = scored[list(pref_columns)].to_numpy(dtype=float)
        for m in metrics:
            sign = -1.0 if m in lower else 1.0
            a = sign * scored[f"{m}_a"].to_numpy(dtype=float)
            b = sign * scored[f"{m}_b"].to_numpy(dtype=float)
            diffs = np.abs(a - b)
            diffs = diffs[np.isfinite(diffs)]
            if not diffs.size:
                continue
            best = pairwise_preference_accuracy(prefs, a, b).epsilon
            grid = np.unique(np.r_[0.0, best, np.quantile(diffs, np.linspace(0, 0.95, PAIR_CURVE_POINTS))])
            accs = np.array([pairwise_preference_accuracy(prefs, a, b, epsilon=float(e)).accuracy_with_ties for e in grid])
            if m not in curves:
                curves[m] = (grid, accs, float(best))
        if by and by in scored.columns and scored[by].nunique() > 1 and by_task is None:
            by_task = breakdown(scored, human=list(pref_columns), metrics=metrics, by=by,
                                statistic="preference_accuracy", lower_is_better=lower, wide=False, min_group_size=10)
            by_task_label = "preference accuracy (with ties)"
        if leaderboard is None and items is not None and is_side_table:
            lb = items.groupby("system")[metrics].mean(numeric_only=True).reset_index()  # presentation only
            leaderboard = lb

    if by_task is not None:
        by_task = by_task[by_task["group"] != "(all)"].rename(columns={"group": "task"})[["task", "metric", "value"]]
        shown = by_task.groupby("task", sort=False)["value"].transform(lambda v: v.notna().any())
        by_task = by_task[shown.astype(bool)] if shown.any() else None  # groups too small for a value: left out
    corr = pd.concat(corr_parts, ignore_index=True) if corr_parts else None
    acc = pd.concat(acc_parts, ignore_index=True) if acc_parts else None
    item_table = items  # a side table too: its judge columns give the score-vs-length plots
    return ReportData(
        title=title,
        subtitle=subtitle,
        leaderboard=leaderboard,
        human_system_col=human_system_col,
        human_system_higher_is_better=leaderboard_hib,
        correlations=corr,
        pair_accuracy=acc,
        by_task=by_task,
        by_task_label=by_task_label,
        item_table=item_table,
        metric_cols=metrics,
        human_col=human,
        epsilon_curves=curves or None,
        judge_cols=[j for j in judges if item_table is not None and j in item_table.columns],
        higher_is_better=hib,
        notes=list(dict.fromkeys(all_notes)),
    )
