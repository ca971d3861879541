"""The bench's sets loaded and sampled: each set's sampled table with its labels and the published
judge columns that stand beside yours (on the same sampled units)."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from evalign.bench.sample import sample_set
from evalign.bench.settings import BenchSettings
from evalign.bench.suite import Suite, SuiteSet, set_kind
from evalign.datasets import CATALOGUE, has_texts, load_dataset_spec, parse_spec
from evalign.errors import EvalignError
from evalign.evaluate.prepare import dataset_human, dataset_title, judge_column_names
from evalign.evaluate.spec import Human
from evalign.judges.base import judge_class
from evalign.judges.prompts import load_template


@dataclass
class LoadedSet:
    """One set of the bench, sampled: ``table`` (the pair or item table of the sampled units, with
    the published columns kept), ``human`` (its labels), ``published`` (shown name -> column of
    ``table``), ``n_total`` (units in the whole set), ``title`` (the dataset's name as people write
    it), ``statistics`` (the set's own published statistics, e.g. JudgeBench's accuracy),
    ``annotator_kind`` (for the Alt-Test's epsilon), ``higher_is_better`` (published graded columns)."""

    spec: SuiteSet
    kind: str
    table: pd.DataFrame
    human: Human
    published: dict[str, str]
    n_total: int
    title: str
    statistics: tuple[Any, ...] = ()
    annotator_kind: str | None = None
    lower_is_better: tuple[str, ...] = ()
    template: str = ""
    template_hash: str = ""

    @property
    def key(self) -> str:
        return self.spec.key

    @property
    def category(self) -> str:
        return self.spec.category


@dataclass
class Loaded:
    """The sets that could be loaded, and why the others could not (``skipped``: key -> reason)."""

    sets: list[LoadedSet] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def template_tag(s: SuiteSet) -> tuple[str, str]:
    """The template a set's generative judges run (its name, or the judge mode's default) and its
    hash (the prompt texts: part of the bench's signature)."""
    name = s.recipe.template or getattr(judge_class(s.recipe.mode), "default_template", "")
    if not name:
        return "", ""
    t = load_template(name)
    return t.name, t.hash(False)


def published_columns(s: SuiteSet, table: pd.DataFrame, ds: Any, mode: str) -> dict[str, str]:
    """The published columns shown beside your judge: shown name -> column (``mode``: ``suite``:
    the set's ``published`` patterns, ``all``: every column the dataset ships, ``none``)."""
    shipped = [c for c in (getattr(ds, "judge_columns", None) or judge_column_names(table)) if c in table.columns]
    if mode == "none":
        return {}
    if mode == "all":
        return {c: c for c in shipped}
    out: dict[str, str] = {}
    for shown, pattern in s.published:
        if shown == pattern:
            out.update({c: c for c in shipped if fnmatch.fnmatchcase(c, pattern.replace("[", "[[]"))})
        elif pattern in table.columns:
            out[shown] = pattern
    return out


def _keep(table: pd.DataFrame, published: dict[str, str]) -> pd.DataFrame:
    """``table`` without the shipped judge columns that are not shown, the shown ones renamed."""
    shown = set(published.values())
    drop = []
    for c in judge_column_names(table):
        if c not in shown:
            drop += [x for x in table.columns if x == c or x.startswith(f"{c}.")]
    out = table.drop(columns=drop)
    renames = {}
    for name, col in published.items():
        if name != col:
            renames.update({x: name + x[len(col):] for x in out.columns if x == col or x.startswith(f"{col}.")})
    return out.rename(columns=renames)


def load_set(s: SuiteSet, settings: BenchSettings) -> LoadedSet:
    """The set ``s`` sampled (see :mod:`evalign.bench.sample`); raises EvalignError when its files are
    missing or it has no texts."""
    name, _ = parse_spec(s.dataset)
    if not has_texts(name):
        raise EvalignError(f"dataset '{s.dataset}' has no texts to judge")
    ds = load_dataset_spec(s.dataset, settings.data_dir)
    kind = set_kind(s)
    entry = CATALOGUE.get(name)
    ls = entry.label_sets.get(s.labels) if entry is not None and s.labels else None
    if kind == "pairwise":
        human = dataset_human(ds, pref=list(ls.pref) if ls is not None else list(ds.pref_columns))
        table = ds.pairs
    else:
        human = dataset_human(ds, column=ls.column if ls is not None else (s.labels or None))
        table = ds.items
    if table is None:
        raise EvalignError(f"dataset '{s.dataset}' has no {'pair' if kind == 'pairwise' else 'item'} table")
    src = f"bench set {s.key} ({s.dataset})"
    if human.column is not None:
        table = table[table[human.column].notna()].reset_index(drop=True)
    sample = sample_set(table, settings.per_set, seed=settings.seed, key=s.key, stratify=s.stratify,
                        pref=human.pref_columns, source=src)
    published = published_columns(s, sample, ds, settings.published)
    sample = _keep(sample, published)
    sample.attrs["source"] = src
    published = {n: n for n in published}
    tname, thash = template_tag(s)
    lower = tuple(n for n, c in published.items() if c in getattr(ds, "lower_is_better", []))
    return LoadedSet(spec=s, kind=kind, table=sample, human=human, published=published, n_total=len(table),
                     title=dataset_title(ds), statistics=tuple(getattr(ds, "statistics", ()) or ()),
                     annotator_kind=entry.annotator_kind if entry is not None else None, lower_is_better=lower,
                     template=tname, template_hash=thash)


def load_suite_sets(suite: Suite, settings: BenchSettings, keys: Sequence[str] = ()) -> Loaded:
    """Every set of ``suite`` (or of ``keys``) loaded and sampled; a set whose files are missing is
    skipped with its reason (a set that fails otherwise stops the bench)."""
    out = Loaded()
    for s in suite.sets:
        if keys and s.key not in keys:
            continue
        try:
            out.sets.append(load_set(s, settings))
        except EvalignError as e:
            msg = str(e).splitlines()[0]
            if not msg.startswith("dataset files not found"):
                raise
            out.skipped[s.key] = msg.split(". Get them")[0] + " (`evalign datasets` says where to get them)"
    return out


__all__ = ["Loaded", "LoadedSet", "load_set", "load_suite_sets", "published_columns", "template_tag"]
