"""Fill a :class:`ReportData` from :class:`~evalign.evaluate.EvalResult` objects: the report only
renders what :func:`evalign.evaluate.evaluate` computed (used by ``evalign report`` and
``evalign demo``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from evalign.evaluate.result import EvalResult, TrustTable
from evalign.meta.significance import CORRELATIONS
from evalign.report.data import MERGED_TASK, ReportData
from evalign.report.explorer import ExplorerSpec, item_explorer, pair_explorer

#: statistics shown in the accuracy section
ACCURACIES = ("pairwise_accuracy", "preference_accuracy")


def _tidy(rows: pd.DataFrame, **front: str) -> pd.DataFrame:
    """Trust rows for display: a constant ``group`` and all-NaN numeric columns dropped, labels in front."""
    t = rows.drop(columns=[c for c in ("definition",) if c in rows.columns])
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
    runs: Mapping[str, Sequence[object]] | None = None,
    min_group_size: int | None = None,
    human_scale: str | None = None,
) -> ReportData:
    """The report of one or more evaluation results: the leaderboard of the first result with a
    system table, every trust table (correlations and accuracies, baselines included), the
    breakdown by task, the tie-calibration curves, and the results' notes, warnings and signatures.
    ``item_table`` (scored items) feeds the score distributions per ``human_col`` grade and the
    score-vs-length plots of ``judge_cols``. The item explorer shows the first result with
    item-level labels: the rated ``item_table`` (``human_col``), or for a pair result the ``pairs``
    table with the scored sides in ``item_table``. ``runs`` (result source -> the
    :class:`~evalign.scoring.MetricRun` of the metrics computed for it) give the truncated-text counts of
    the coverage table; ``min_group_size`` is the breakdown's (default 30 pairs, 10 items);
    ``human_scale`` says what a human system rank is a rank among."""
    parts = _Parts(label=by_task_label or "statistic")
    # several pair results (the demo's PandaLM and LLMBar) are told apart by their source
    parts.name_pairs = sum(r.mode == "pairs" and not r.refused for r in results) > 1
    for r in results:
        parts.add_result(r, by_task_label, min_group_size)
    ok = [r for r in results if not r.refused]
    return ReportData(
        labels=ok[0].title.removeprefix("Agreement with ") if ok else "humans",
        rater=ok[0].rater if ok else "human",
        confidence=parts.confidence,
        human_scale=human_scale,
        by_task_n=parts.task_n,
        by_task_left_out=parts.left_out,
        min_group_size=parts.min_size,
        coverage=coverage(results, runs),
        annotator_results=[r for r in ok if r.alt_test is not None or r.ceiling is not None],
        calibration=[c for r in ok for c in r.calibration],
        selective=[r.selective for r in ok if r.selective is not None],
        explorer=_explorer(results, item_table, human_col, pairs, human_higher_is_better),
        title=title,
        subtitle=subtitle,
        leaderboard=parts.leaderboard,
        human_system_col=parts.human_system_col,
        human_system_higher_is_better=parts.human_hib,
        correlations=pd.concat(parts.corr, ignore_index=True) if parts.corr else None,
        pair_accuracy=pd.concat(parts.acc, ignore_index=True) if parts.acc else None,
        by_task=parts.by_task,
        by_task_label=parts.label,
        item_table=item_table,
        metric_cols=list(dict.fromkeys(parts.metric_cols)),
        human_col=human_col,
        epsilon_curves=parts.curves or None,
        judge_cols=[j for j in judge_cols if item_table is not None and j in item_table.columns],
        higher_is_better=parts.hib,
        system_labels=parts.system_labels,
        table_notes=parts.table_notes,
        notes=list(dict.fromkeys([*notes, *parts.notes])),
    )


@dataclass
class _Parts:
    """What :func:`from_results` gathers from the results, in their order."""

    label: str
    corr: list[pd.DataFrame] = field(default_factory=list)
    acc: list[pd.DataFrame] = field(default_factory=list)
    by_task: pd.DataFrame | None = None
    curves: dict[str, tuple[object, object, float]] = field(default_factory=dict)
    leaderboard: pd.DataFrame | None = None
    human_system_col: str | None = None
    human_hib: bool = True
    system_labels: dict[str, str] = field(default_factory=dict)
    hib: dict[str, bool] = field(default_factory=dict)
    metric_cols: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    confidence: float = 0.95
    task_n: dict[str, int] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)
    min_size: int | None = None
    table_notes: dict[str, list[str]] = field(default_factory=dict)
    #: whether a pair result's rows are labelled ``pairs (<source>)`` rather than ``pairs``
    name_pairs: bool = False


    def add_result(self, r: EvalResult, by_task_label: str | None, min_group_size: int | None) -> None:
        """Gather one result's columns, leaderboard, trust tables, breakdown, curves and notes."""
        self.add_columns(r)
        if r.refused:
            self.notes.append(f"{r.source}: nothing ranked: {r.refused}")
            return
        if self.leaderboard is None and r.systems is not None:
            self.add_leaderboard(r)
        self.add_trust(r)
        if self.by_task is None and r.breakdown is not None and str(r.breakdown_by) in ("task", MERGED_TASK):
            self.add_breakdown(r, by_task_label, min_group_size)
        for k, v in r.curves.items():
            self.curves.setdefault(k, v)
        own = {w for t in r.trust for w in t.warnings}
        self.notes += [f"warning: {w}" for w in r.warnings if w not in own] + list(r.notes)
    def add_columns(self, r: EvalResult) -> None:
        for c in r.columns:
            self.metric_cols.append(str(c["name"]))
            self.hib[str(c["name"])] = bool(c["higher_is_better"])
            self.system_labels.setdefault(str(c["name"]), str(c["system_label"]))

    def add_leaderboard(self, r: EvalResult) -> None:
        assert r.systems is not None
        # the leaderboard's headers are its own result's (a pair table's bleu is a mean of items, the
        # Self-Instruct leaderboard's a corpus score)
        self.system_labels.update({str(c["name"]): str(c["system_label"]) for c in r.columns})
        lb = r.systems.rename(columns={c["system_label"]: c["name"] for c in r.columns})
        self.human_system_col = "human" if r.human == "system-level" else r.human
        self.leaderboard = lb.rename(columns={"human": self.human_system_col})
        self.human_hib = _human_hib(r)

    def add_trust(self, r: EvalResult) -> None:
        """The result's correlation and accuracy tables, their confidence and signatures."""
        unit = "n pairs" if r.mode == "pairs" else "n items"
        for t in r.trust:
            if t.statistic in CORRELATIONS:
                rows = _tidy(t.rows, level=t.level, statistic=t.statistic).rename(columns={"n": unit})
                if t.level == "system":  # the statistic is over the systems; n items is what each mean is over
                    rows.insert(rows.columns.get_loc(unit), "n systems", r.n_systems)
                self.corr.append(rows)
                self.add_table_notes("correlations", t)
            elif t.statistic in ACCURACIES:
                what = f"{t.statistic} ({t.grouping} grouping)" if r.mode == "items" else f"{t.statistic} (with ties)"
                table = f"pairs ({r.source})" if r.mode == "pairs" and self.name_pairs else r.mode
                self.acc.append(_tidy(t.rows, table=table, statistic=what).rename(columns={"n": unit}))
                self.add_table_notes("pair_accuracy", t)
            self.confidence = float(t.signature.get("confidence", self.confidence))
            self.notes.append(f"signature ({t.statistic}, {t.level} level): {t.signature['text']}")

    def add_table_notes(self, key: str, t: TrustTable) -> None:
        """A trust table's headline and warnings, shown under the report table it goes into."""
        notes = self.table_notes.setdefault(key, [])
        main = t.rows[t.rows["group"] == "(all)"] if "group" in t.rows.columns else t.rows
        legend = [] if "definition" not in main.columns else [
            f"{m}: {d}" for m, d in zip(main["metric"], main["definition"], strict=True) if isinstance(d, str)]
        new = [*([t.headline] if t.headline else []), *(f"warning: {w}" for w in t.warnings), *legend]
        notes.extend(n for n in new if n not in notes)

    def add_breakdown(self, r: EvalResult, by_task_label: str | None, min_group_size: int | None) -> None:
        """The breakdown by task: its groups, their sizes and the groups left out as too small."""
        assert r.breakdown is not None
        groups = r.breakdown[r.breakdown["group"] != "(all)"]
        bt = groups[groups["status"] == "ok"]
        small = groups[groups["status"] == "too small"].drop_duplicates("group")
        self.task_n = {str(g): int(n) for g, n in zip(bt["group"], bt["n"], strict=True)}
        self.left_out = {str(g): int(n) for g, n in zip(small["group"], small["n"], strict=True)}
        self.min_size = min_group_size or (30 if r.mode == "pairs" else 10)
        if len(bt):
            self.by_task = bt.rename(columns={"group": "task"})[["task", "metric", "value"]]
            self.label = by_task_label or str(r.breakdown_statistic)


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


def coverage(results: Sequence[EvalResult], runs: Mapping[str, Sequence[object]] | None = None) -> pd.DataFrame | None:
    """Per metric or judge column: the cells it was evaluated on (``rows``), the cells without a
    value (``missing``) and, for metrics with a model, the distinct texts truncated to the model's
    longest input (``truncated`` of ``texts``; from the runs' ``info``). None when no result has a
    missing-value table."""
    frames = [r.missing.assign(result=r.source) for r in results if r.missing is not None and len(r.missing)]
    if not frames:
        return None
    m = pd.concat(frames, ignore_index=True)
    out = m.groupby(["result", "metric"], sort=False)[["n", "missing"]].sum().reset_index()
    out = out.rename(columns={"result": "data", "n": "cells"})
    trunc: dict[tuple[str, str], str] = {}
    for source, rs in (runs or {}).items():
        for run in rs:
            info = getattr(run, "info", {}) or {}
            if "truncated" in info:
                texts = info.get("texts")
                trunc[(source, str(getattr(run, "column", "")))] = \
                    f"{info['truncated']} of {texts}" if texts else str(info["truncated"])
    out["truncated texts"] = [trunc.get((str(d), str(c)), "-") for d, c in zip(out["data"], out["metric"], strict=True)]
    if out["data"].nunique() == 1:
        out = out.drop(columns=["data"])
    return out
