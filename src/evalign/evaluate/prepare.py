"""Getting an evaluation's inputs ready: a dataset's labels (resolved here and nowhere else), the
columns to evaluate (existing metric and judge columns, or metrics computed on the fly)."""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from evalign.errors import InputError, unknown_name
from evalign.evaluate.columns import JUDGE_PREFIX, STATUS, is_judge_column, judge_higher_is_better
from evalign.evaluate.spec import Column, Human
from evalign.meta.system_level import corpus_metric, registered_metric
from evalign.metrics.base import get_metric
from evalign.scoring import score


def dataset_human(ds: Any, *, column: str | None = None, pref: Sequence[str] = ()) -> Human:
    """The labels of a :class:`~evalign.datasets.HumanDataset` as a :class:`Human`: the annotator
    columns ``pref`` of its pair table, an item rating ``column``, or by default its first human
    rating column, else its system-level values, else its pair table's preference columns. The
    labels' source (human or model grades) and annotator columns (those of the chosen rating
    column, :meth:`~evalign.datasets.HumanDataset.annotators_of`) come from the dataset."""
    common = {"source": getattr(ds, "label_source", "human"), "label": getattr(ds, "label_name", "humans")}
    if pref:
        if ds.pairs is None:
            raise InputError(f"dataset '{ds.name}' has no pair table for preference columns", field="pref")
        return Human(pref_columns=tuple(pref), **common)
    if column is not None:
        if ds.items is None:
            raise InputError(f"dataset '{ds.name}' has no item table (it has pairs: use its preference columns)",
                             field="human")
        if column not in ds.items.columns:
            hint = difflib.get_close_matches(column, [str(c) for c in ds.items.columns], n=1)
            raise InputError(f"dataset '{ds.name}' has no human rating column '{column}'"
                             + (f"; did you mean '{hint[0]}'?" if hint else ""), field="human")
        hib = ds.human_higher_is_better
        return Human(column=column, higher_is_better=hib, annotators=tuple(ds.annotators_of(column)), **common)
    if ds.items is not None and ds.human_columns:
        return Human(column=ds.human_columns[0], higher_is_better=ds.human_higher_is_better,
                     annotators=tuple(ds.annotators_of(ds.human_columns[0])), **common)
    if ds.items is not None and ds.system_human:
        return Human(system=dict(ds.system_human), higher_is_better=ds.system_human_higher_is_better, **common)
    if ds.pairs is not None and ds.pref_columns:
        return Human(pref_columns=tuple(ds.pref_columns), **common)
    raise InputError(f"dataset '{ds.name}' has no human labels", field="dataset")


def dataset_title(ds: Any) -> str:
    """A dataset's name as people write it (the start of its description, e.g. ``LLMBar``)."""
    head = str(getattr(ds, "description", "") or "").split(":", 1)[0].strip()
    return head or str(ds.name)


def attach_labels(items: pd.DataFrame, ds: Any, human: Human) -> pd.DataFrame:
    """``items`` with the dataset's item-level label and annotator columns joined on (id, system)
    where ``items`` lacks them (a scored file without its human columns)."""
    if human.column is None:
        return items
    want = [c for c in (human.column, *human.annotators) if c not in items.columns]
    if not want or ds.items is None:
        return items
    keep = ds.items[["id", "system", *want]].astype({"id": str, "system": str})
    out = items.astype({"id": str, "system": str}).merge(keep, on=["id", "system"], how="left", validate="one_to_one")
    out.attrs.update(items.attrs)
    return out


def is_glob(name: str) -> bool:
    """Whether a ``-m`` name is a glob (it holds ``*`` or ``?``; ``[`` is part of column names
    such as ``prometheus[rubric]`` and is matched literally)."""
    return "*" in name or "?" in name


def _glob_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern.replace("[", "[[]")))


def judge_column_names(*tables: pd.DataFrame | None) -> list[str]:
    """The judge columns of ``tables`` (see :mod:`evalign.evaluate.columns`), without their
    companions ``J.ab`` / ``J.ba`` / ``J.status`` / ... (a column ``X.suffix`` beside a column
    ``X``), in column order, each once."""
    out: dict[str, None] = {}
    for t in tables:
        if t is None:
            continue
        cols = set(map(str, t.columns))
        for c in map(str, t.columns):
            if c.rpartition(".")[0] in cols:
                continue
            if is_judge_column(t, c):
                out[c] = None
    return list(out)


def expand_names(names: Sequence[str], *, table: pd.DataFrame | None, pairs: pd.DataFrame | None = None,
                 default: Sequence[str] = (), source: str = "") -> list[str]:
    """The column names to evaluate: each glob of ``names`` (``judge:gpt-4/*``; see :func:`is_glob`)
    replaced by the judge columns of ``pairs`` / ``table`` it matches (in column order), other names
    kept; without names, ``default`` (a dataset's shipped judge columns). Raises InputError for a
    glob that matches no judge column, or when there are neither names nor defaults."""
    if not names:
        if not default:
            raise InputError("name the metric or judge columns (or metrics to compute)", file=source or None,
                             field="metric")
        return list(default)
    judges: list[str] | None = None
    out: dict[str, None] = {}
    for n in names:
        if not is_glob(n):
            out[n] = None
            continue
        if judges is None:
            judges = judge_column_names(pairs, table)
        rx = _glob_regex(n)
        hits = [j for j in judges if rx.fullmatch(j)]
        if not hits:
            shown = ", ".join(judges[:5]) + (", ..." if len(judges) > 5 else "")
            raise InputError(f"'{n}' matches no judge column" + (f" (judge columns: {shown})" if judges else
                                                                 " (the table has no judge columns)"),
                             file=source or None, field="metric")
        out.update(dict.fromkeys(hits))
    return list(out)


def resolve_columns(
    table: pd.DataFrame | None,
    names: Sequence[str],
    *,
    source: str,
    pairs: pd.DataFrame | None = None,
    lower_is_better: Sequence[str] = (),
    options: Mapping[str, Mapping[str, Any]] | None = None,
    on_scoring: Callable[[list[str]], Any] | None = None,
    lower_option: str = "lower_is_better",
    judges: Sequence[str] = (),
) -> tuple[pd.DataFrame | None, list[Column], list[Any]]:
    """The :class:`Column` of each name, computing registered metrics the table lacks.

    ``table``: the item table (or the scored sides of a pair table); ``pairs``: the pair table,
    whose judge columns are verdict columns and whose ``<name>_a``/``_b`` columns are pair scores
    (see :mod:`evalign.evaluate.columns` for the convention). A column that names a registered
    corpus metric with its default options, in a table with the texts, is recomputed from corpus
    statistics at system level. ``options``: metric name -> constructor options for metrics computed
    here. ``on_scoring(names)``: returns a context manager shown while scoring (a spinner).
    ``judges``: the names given as judges: a column of ``pairs`` among them is a verdict column
    whatever its name. ``lower_is_better`` must name columns of ``names`` (else a :class:`~evalign.errors.UsageError`
    naming ``lower_option``, the argument as the caller calls it, with a "did you mean").
    Returns (table with the computed columns, columns, the :class:`~evalign.scoring.MetricRun` list).
    """
    lower = set(lower_is_better)
    for name in lower_is_better:  # a typo would leave every direction as it was, silently
        if name not in names:
            raise unknown_name("metric or judge column", name, names, where=lower_option)
    options = options or {}
    cols: list[Column] = []
    to_compute: list[Any] = []
    for n in names:
        if pairs is not None and n in pairs.columns and (n in judges or is_judge_column(pairs, n)):
            cols.append(Column(n, "judge", True, verdict=True))
            continue
        in_pairs = pairs is not None and f"{n}_a" in pairs.columns and f"{n}_b" in pairs.columns
        if (table is not None and n in table.columns) or in_pairs:
            cols.append(_existing_column(n, table, in_pairs, lower))
            continue
        if registered_metric(n) is not None:
            m = get_metric(n, **dict(options.get(n, {})))
            to_compute.append(m)
            cols.append(Column(m.column, "metric", m.higher_is_better and m.column not in lower,
                               system_level=getattr(m, "system_level", "mean") if pairs is None else "mean",
                               metric=m))
            continue
        raise _unknown_column(n, table, pairs, source)
    runs: list[Any] = []
    if to_compute:
        table, runs = _score_missing(table, to_compute, source, on_scoring)
    return table, cols, runs


def _existing_column(name: str, table: pd.DataFrame | None, in_pairs: bool, lower: set[str]) -> Column:
    """The :class:`Column` of a score column the table (or the pair table, ``in_pairs``) has: a
    judge's column (its declared direction) or a metric's; a registered corpus metric with its
    default options, in a table with the texts, is scored at system level from corpus statistics."""
    judge = is_judge_column(table, name) if table is not None and name in table.columns else False
    cls = None if judge else registered_metric(name)
    hib = judge_higher_is_better(name) if judge else (bool(cls.higher_is_better) if cls is not None else True)
    metric = None if judge or in_pairs else corpus_metric(name, table)
    return Column(name, "judge" if judge else "metric", hib and name not in lower,
                  system_level="corpus" if metric is not None else "mean", metric=metric)


def _unknown_column(name: str, table: pd.DataFrame | None, pairs: pd.DataFrame | None, source: str) -> InputError:
    """The error for a name that is neither a column nor a registered metric (with a close match)."""
    known = [] if table is None else [str(c) for c in table.columns]
    if pairs is not None:
        known += [str(c) for c in pairs.columns]
        if name in pairs.columns:  # there, but not a column that can be ranked as it is
            return InputError(f"the pair table's column '{name}' is neither a judge's verdict column (A / B / tie: "
                              f"named {JUDGE_PREFIX}NAME, or with a '{name}{STATUS}' column, or given as a judge: "
                              f"-j {name} / judges=[...]) nor a metric's pair scores ('{name}_a' and '{name}_b')",
                              file=source, field=name)
    hint = difflib.get_close_matches(name, known, n=1)
    return InputError(f"no metric or judge column '{name}' and no metric of that name"
                      + (f"; did you mean '{hint[0]}'?" if hint else ""), file=source, field=name)


def _score_missing(
    table: pd.DataFrame | None, metrics: list[Any], source: str, on_scoring: Callable[[list[str]], Any] | None
) -> tuple[pd.DataFrame, list[Any]]:
    """``table`` scored with the metrics it lacks (under ``on_scoring``'s context, if given)."""
    if table is None or "response" not in table.columns:
        raise InputError(f"cannot compute {', '.join(m.name for m in metrics)} without responses",
                         file=source, field="response")
    if on_scoring is None:
        return score(table, metrics)
    with on_scoring([m.name for m in metrics]):
        return score(table, metrics)
