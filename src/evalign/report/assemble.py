"""Fill a :class:`ReportData` from :class:`~evalign.evaluate.EvalResult` objects: the report only
renders what :func:`evalign.evaluate.evaluate` computed (used by ``evalign report`` and
``evalign demo``)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from evalign.evaluate.result import EvalResult
from evalign.meta.significance import CORRELATIONS
from evalign.report.data import ReportData
from evalign.report.explorer import ExplorerSpec, item_explorer, pair_explorer

#: statistics shown in the accuracy section
ACCURACIES = ("pairwise_accuracy", "preference_accuracy")


def _tidy(rows: pd.DataFrame, **front: str) -> pd.DataFrame:
    """Trust rows for display: a constant ``group`` and all-NaN numeric columns dropped, labels in front."""
    t = rows.copy()
    if "group" in t.columns:
        t = t[t["group"] == "(all)"].drop(columns=["group"])
    t = t.drop(columns=[c for c in t.columns if c not in ("value", "ci_low", "ci_high")
                        and pd.api.types.is_numeric_dtype(t[c]) and t[c].isna().all()])
    for k, v in reversed(list(front.items())):
        t.insert(0, k, v)
    return t.reset_index(drop=True)


def from_results(
    results: Sequence[EvalResult],
    *,
    title: str = "evalign report",
    subtitle: str | None = None,
    item_table: pd.DataFrame | None = None,
    human_col: str | None = None,
    judge_cols: Sequence[str] = (),
    notes: Sequence[str] = (),
    by_task_label: str | None = None,
    pairs: pd.DataFrame | None = None,
    human_higher_is_better: bool = True,
) -> ReportData:
    """The report of one or more evaluation results: the leaderboard of the first result with a
    system table, every trust table (correlations and accuracies, baselines included), the
    breakdown by task, the tie-calibration curves, and the results' notes, warnings and signatures.
    ``item_table`` (scored items) feeds the score distributions per ``human_col`` grade and the
    score-vs-length plots of ``judge_cols``. The item explorer shows the first result with
    item-level labels: the rated ``item_table`` (``human_col``), or for a pair result the ``pairs``
    table with the scored sides in ``item_table``."""
    corr: list[pd.DataFrame] = []
    acc: list[pd.DataFrame] = []
    by_task = None
    label = by_task_label or "statistic"
    curves: dict[str, tuple[object, object, float]] = {}
    leaderboard = None
    human_system_col = None
    human_hib = True
    system_labels: dict[str, str] = {}
    hib: dict[str, bool] = {}
    metric_cols: list[str] = []
    all_notes: list[str] = []
    for r in results:
        for c in r.columns:
            metric_cols.append(str(c["name"]))
            hib[str(c["name"])] = bool(c["higher_is_better"])
            system_labels[str(c["name"])] = str(c["system_label"])
        if r.refused:
            all_notes.append(f"{r.source}: nothing ranked: {r.refused}")
            continue
        if leaderboard is None and r.systems is not None:
            lb = r.systems.rename(columns={c["system_label"]: c["name"] for c in r.columns})
            human_system_col = "human" if r.human == "system-level" else r.human
            leaderboard = lb.rename(columns={"human": human_system_col})
            human_hib = _human_hib(r)
        for t in r.trust:
            if t.statistic in CORRELATIONS:
                corr.append(_tidy(t.rows, level=t.level, statistic=t.statistic))
            elif t.statistic in ACCURACIES:
                what = f"{t.statistic} ({t.grouping} grouping)" if r.mode == "items" else f"{t.statistic} (with ties)"
                acc.append(_tidy(t.rows, table=r.mode, statistic=what))
            all_notes.append(f"signature ({t.statistic}, {t.level} level): {t.signature['text']}")
        if by_task is None and r.breakdown is not None and r.breakdown_by == "task":
            bt = r.breakdown[(r.breakdown["group"] != "(all)") & (r.breakdown["status"] == "ok")]
            if len(bt):
                by_task = bt.rename(columns={"group": "task"})[["task", "metric", "value"]]
                label = by_task_label or str(r.breakdown_statistic)
        for k, v in r.curves.items():
            curves.setdefault(k, v)
        all_notes += [f"warning: {w}" for w in r.warnings] + list(r.notes)
    return ReportData(
        explorer=_explorer(results, item_table, human_col, pairs, human_higher_is_better),
        title=title,
        subtitle=subtitle,
        leaderboard=leaderboard,
        human_system_col=human_system_col,
        human_system_higher_is_better=human_hib,
        correlations=pd.concat(corr, ignore_index=True) if corr else None,
        pair_accuracy=pd.concat(acc, ignore_index=True) if acc else None,
        by_task=by_task,
        by_task_label=label,
        item_table=item_table,
        metric_cols=list(dict.fromkeys(metric_cols)),
        human_col=human_col,
        epsilon_curves=curves or None,
        judge_cols=[j for j in judge_cols if item_table is not None and j in item_table.columns],
        higher_is_better=hib,
        system_labels=system_labels,
        notes=list(dict.fromkeys([*notes, *all_notes])),
    )


def _human_hib(r: EvalResult) -> bool:
    """Whether the result's human system values are better when higher (the system table is sorted
    best first)."""
    h = r.systems["human"].dropna().to_numpy() if r.systems is not None else []
    return not (len(h) > 1 and h[0] < h[-1])


def _explorer(results: Sequence[EvalResult], item_table: pd.DataFrame | None, human_col: str | None,
              pairs: pd.DataFrame | None, human_hib: bool) -> ExplorerSpec | None:
    """The explorer of the first result with item-level labels (see :func:`from_results`)."""
    for r in results:
        if r.refused:
            continue
        metrics = [str(c["name"]) for c in r.columns if c["kind"] == "metric"]
        judges = [str(c["name"]) for c in r.columns if c["kind"] == "judge"]
        lower = [str(c["name"]) for c in r.columns if not c["higher_is_better"]]
        label = r.title.removeprefix("Agreement with ")
        if r.mode == "pairs" and pairs is not None:
            return pair_explorer(pairs, item_table, pref_columns=[p.strip() for p in r.human.split(",")],
                                 metrics=metrics, judges=judges, lower_is_better=lower, label=label)
        if r.mode == "items" and item_table is not None and human_col and human_col in item_table.columns \
                and r.human == human_col:
            return item_explorer(item_table, human_col, metrics=metrics, judges=judges, lower_is_better=lower,
                                 human_higher_is_better=human_hib,
                                 label=label)
    return None
