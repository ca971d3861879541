"""One table across sets: every judge and metric a dataset ships, on every set it has verdicts for.

"Which judge for my task" as one offline table: for each registered dataset whose files are present
and whose entry ships judge or metric columns, for each of its label sets those columns rate (a set
with several aspects: each aspect's own columns), the columns are evaluated exactly as ``evalign
meta --dataset NAME`` evaluates them (:func:`evalign.evaluate.evaluate`: the dataset's labels,
grouping, item statistic and column directions), ranked by value without significance clusters,
and tested against the best trivial baseline; where the labels have >= 2 annotators, each judge's
Alt-Test (epsilon by the dataset's annotators unless given). Sets added to the catalogue appear
without any change here.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from evalign.datasets import CATALOGUE, load_dataset_spec, pairs_to_items
from evalign.errors import EvalignError
from evalign.evaluate.alt_test import dataset_settings
from evalign.evaluate.prepare import dataset_human, dataset_title, resolve_columns
from evalign.evaluate.result import EvalResult
from evalign.evaluate.run import evaluate
from evalign.evaluate.spec import EvalSpec, Human, TrustRequest
from evalign.meta.resampling import Resampling
from evalign.meta.workers import parallel_map
from evalign.rank.panel import add_panel_columns

#: the columns of :attr:`PublishedTable.rows`
COLUMNS = ("set", "labels", "column", "kind", "n", "statistic", "value", "ci_low", "ci_high", "rank", "of",
           "beats_baselines", "best_baseline", "best_baseline_value", "epsilon", "alt_winning_rate", "alt_advantage",
           "alt_passed")


@dataclass(frozen=True)
class PublishedSettings:
    """What the cross-set table evaluates: ``resampling`` (intervals and baseline tests),
    ``alt_test`` (each judge's Alt-Test where the labels have >= 2 annotators), ``epsilon`` (None:
    by each dataset's annotators), ``datasets`` (names; empty: every registered dataset) and
    ``data_dir`` (the folder of the sets that do not ship; None: the default data folder), ``panels``
    (:class:`~evalign.rank.panel.PanelSpec`: each a row of every set that has all its members)."""

    resampling: Resampling = field(default_factory=Resampling)
    alt_test: bool = True
    epsilon: float | None = None
    datasets: tuple[str, ...] = ()
    data_dir: Path | None = None
    panels: tuple[Any, ...] = ()


@dataclass(frozen=True, eq=False)
class PublishedTable:
    """The cross-set table: ``rows`` (one per set, label set and column: :data:`COLUMNS`; ``value``
    the set's ranking statistic, ``rank`` of ``of`` among the set's columns, ``beats_baselines``
    against the best trivial baseline ``best_baseline``), ``sets`` (per dataset and label set:
    ``set, labels, status, n, columns, annotators, epsilon, seconds``), the settings and notes."""

    rows: pd.DataFrame
    sets: pd.DataFrame
    settings: PublishedSettings
    notes: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        r = self.settings.resampling
        return (f"Every shipped judge and metric on every set: ranked by each set's statistic; {round(100 * r.confidence)}% "
                f"bootstrap interval ({r.n_resamples} resamples); beats baselines = significantly better than the best "
                f"trivial baseline (paired test, alpha {r.alpha}); Alt-Test where >= 2 annotators")

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        s = self.settings
        return {"title": self.title, "resamples": s.resampling.n_resamples, "seed": s.resampling.seed,
                "confidence": s.resampling.confidence, "alpha": s.resampling.alpha, "epsilon": s.epsilon,
                "rows": self.rows.to_dict("records"), "sets": self.sets.to_dict("records"), "notes": list(self.notes)}


@dataclass(frozen=True)
class _Job:
    """One evaluation of the table: a dataset's label set and the columns it ships for it."""

    name: str
    labels: str
    human: Human
    columns: tuple[str, ...]


def _label_jobs(name: str, ds: Any) -> Iterator[_Job]:
    """The (label set, shipped columns) of a loaded dataset: each label set of its catalogue entry
    with the columns that rate it (an item label: ``columns_for`` when the dataset has it, else
    every shipped column; preferences: the pair table's columns); without label sets, its own labels."""
    shipped = list(getattr(ds, "judge_columns", []) or [])
    if not shipped:
        return
    entry = CATALOGUE.get(name)
    sets = dict(entry.label_sets) if entry is not None else {}
    columns_for = getattr(ds, "columns_for", None)
    if not sets:
        human = dataset_human(ds)
        yield _Job(name, human.column or "preference", human, tuple(shipped))
        return
    for label, ls in sets.items():
        if ls.kind == "item" and ls.column is not None and ds.items is not None:
            cols = columns_for(ls.column) if callable(columns_for) else shipped
            cols = [c for c in cols if c in ds.items.columns]
            if cols:
                yield _Job(name, label, dataset_human(ds, column=ls.column), tuple(cols))
        elif ls.kind == "pairs" and ds.pairs is not None:
            cols = [c for c in shipped if c in ds.pairs.columns]
            if cols:
                yield _Job(name, label, dataset_human(ds, pref=list(ls.pref)), tuple(cols))


def _spec(job: _Job, ds: Any, settings: PublishedSettings) -> EvalSpec:
    """The evaluation of one job, with the dataset's declared defaults (as ``evalign meta --dataset``)."""
    pairs = ds.pairs if job.human.kind == "pairs" else None
    items = ds.items
    names = list(job.columns)
    for p in settings.panels:  # a panel where the set has every member: a row beside them
        if all(m in job.columns for m in p.members) and p.name not in names:
            if pairs is not None:
                pairs, _ = add_panel_columns(pairs, p, values="verdicts")
            else:
                items, _ = add_panel_columns(items, p, values="grades")
            names.append(p.name)
    items = pairs_to_items(pairs) if pairs is not None else items
    lower = [c for c in getattr(ds, "lower_is_better", []) if c in job.columns]
    items, cols, _ = resolve_columns(items, names, source=f"dataset {job.name}", pairs=pairs, lower_is_better=lower)
    grouping = getattr(ds, "grouping", "item") or "item"
    kw: dict[str, Any] = {}
    statistic = getattr(ds, "statistic", None)
    if statistic and job.human.kind == "item":
        kw["trust"] = (TrustRequest(statistic, "item", grouping),)
    if "statistics" in {f.name for f in dataclasses.fields(EvalSpec)}:
        kw["statistics"] = tuple(getattr(ds, "statistics", ()))
    many = len(job.human.pref_columns) >= 2 or len(job.human.annotators) >= 2
    alt = dataset_settings(job.name, settings.epsilon) if settings.alt_test and many else None
    return EvalSpec(human=job.human, columns=tuple(cols), items=items, pairs=pairs, grouping=grouping,
                    resampling=settings.resampling, source=f"dataset {job.name}", dataset=dataset_title(ds),
                    alt_test=alt, clusters=False, overview=False, **kw)


def _rows(job: _Job, r: EvalResult) -> list[dict[str, Any]]:
    """The table rows of one evaluated job: its columns in the order of the ranking."""
    if not r.trust:
        return []
    t = r.trust[0]
    main = t.rows[t.rows["group"] == "(all)"]
    trivial = main[(main["kind"] == "baseline") & (main["metric"] != "human_ceiling") & main["value"].notna()]
    best = trivial.sort_values("value", ascending=False, kind="stable").iloc[0] if len(trivial) else None
    ranked = main[main["kind"] != "baseline"]
    alt = {a.judge: a for a in r.alt_test.results} if r.alt_test is not None else {}
    out = []
    for row in ranked.itertuples(index=False):
        a = alt.get(str(row.metric))
        out.append({
            "set": job.name, "labels": job.labels, "column": row.metric, "kind": row.kind, "n": int(row.n),
            "statistic": t.statistic, "value": row.value, "ci_low": row.ci_low, "ci_high": row.ci_high,
            "rank": row.rank, "of": len(ranked), "beats_baselines": row.beats_baselines,
            "best_baseline": None if best is None else best["metric"],
            "best_baseline_value": float("nan") if best is None else float(best["value"]),
            "epsilon": r.alt_test.settings.epsilon if r.alt_test is not None else float("nan"),
            "alt_winning_rate": a.winning_rate if a else float("nan"),
            "alt_advantage": a.advantage_probability if a else float("nan"),
            "alt_passed": a.passed if a else None,
        })
    return out


def _evaluate_job(task: tuple[_Job, Any, PublishedSettings, float]) -> tuple[list[dict[str, Any]], dict[str, Any],
                                                                             list[str]]:
    """One job of the table: its rows, its entry of :attr:`PublishedTable.sets` and its notes
    (``load_seconds``: the dataset's loading time, counted in a set of one job)."""
    job, ds, settings, load_seconds = task
    t1 = time.perf_counter()
    r = evaluate(_spec(job, ds, settings))
    got = _rows(job, r)
    annotators = len(job.human.pref_columns) or len(job.human.annotators)
    entry = {"set": job.name, "labels": job.labels, "status": r.refused or f"{len(got)} column(s) ranked",
             "n": got[0]["n"] if got else None, "columns": len(got), "annotators": annotators,
             "epsilon": r.alt_test.settings.epsilon if r.alt_test is not None else None,
             "seconds": time.perf_counter() - t1 + load_seconds}
    notes = [f"{job.name} ({job.labels}): {n}" for n in (r.alt_test.dropped() if r.alt_test else [])]
    return got, entry, notes


def published_table(settings: PublishedSettings | None = None, *,
                    progress: Callable[[str], None] | None = None) -> PublishedTable:
    """The cross-set table (see the module doc). ``progress(message)`` is called as each set's
    evaluation starts. With more than one worker (``settings.resampling.workers``) the label sets are
    evaluated side by side, one per worker; the table is the same whatever the number of workers."""
    s = settings or PublishedSettings()
    names = list(s.datasets) or list(CATALOGUE)
    # each set's entry in order: a dict (not loaded, no columns) or the index of its job's result
    plan: list[dict[str, Any] | int] = []
    counter = itertools.count()

    def tasks() -> Iterator[tuple[_Job, Any, PublishedSettings, float]]:
        # the sets are read as the workers ask for work: the reading overlaps the evaluations
        for name in names:
            t0 = time.perf_counter()
            try:
                ds = load_dataset_spec(name, s.data_dir)
            except EvalignError as e:
                plan.append({"set": name, "labels": None, "status": f"not loaded: {str(e).splitlines()[0]}"})
                continue
            jobs = list(_label_jobs(name, ds))
            if not jobs:
                plan.append({"set": name, "labels": None, "status": "ships no judge or metric columns"})
                continue
            load_seconds = time.perf_counter() - t0 if len(jobs) == 1 else 0.0
            for job in jobs:
                if progress is not None:
                    progress(f"{name} ({job.labels}): {len(job.columns)} column(s)")
                plan.append(next(counter))
                yield job, ds, s, load_seconds

    # a set of one label set alone keeps the workers for its own resampling
    only = CATALOGUE.get(names[0]) if len(names) == 1 else None
    alone = only is not None and len(only.label_sets) <= 1
    done = parallel_map(_evaluate_job, tasks(), workers=1 if alone else s.resampling.workers)
    rows: list[dict[str, Any]] = []
    sets: list[dict[str, Any]] = []
    notes: list[str] = []
    for entry in plan:
        if isinstance(entry, dict):
            sets.append(entry)
            continue
        got, set_entry, job_notes = done[entry]
        rows += got
        sets.append(set_entry)
        notes += job_notes
    return PublishedTable(pd.DataFrame(rows, columns=list(COLUMNS)),
                          pd.DataFrame(sets, columns=["set", "labels", "status", "n", "columns", "annotators", "epsilon",
                                                      "seconds"]), s, tuple(notes))


def best_per_set(table: PublishedTable, top: int = 3) -> pd.DataFrame:
    """The ``top`` columns of each (set, labels) by rank: the short form of the table."""
    rows = table.rows
    if rows.empty:
        return rows
    return rows[rows["rank"] <= top].reset_index(drop=True)


__all__ = ["COLUMNS", "PublishedSettings", "PublishedTable", "best_per_set", "published_table"]
