"""Running the bench's judges over its sampled sets: each judge's backend is opened once, each set
judged with the set's template (pairwise sets in both orders) through the judge runner, so every call
is cached as it returns and an interrupted bench resumes without repeating one."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from evalign.backends import returns_scores
from evalign.backends.batch import BatchSettings, batch_counts_since
from evalign.backends.batch_adapters import batch_backend
from evalign.bench.judges import BenchJudge, open_backend
from evalign.bench.load import LoadedSet
from evalign.cache import Cache
from evalign.evaluate.live_panel import early_stopping_calls
from evalign.judges.base import Judge
from evalign.judges.runner import JudgeRun, arun_judge
from evalign.judges.spec import make_judge
from evalign.judges.usage import price_book
from evalign.rank.panel import PanelSettings, judge_panel, verdict_votes

#: ``progress(judge, set key, counts)``: the runner's counts of the set being judged
BenchProgress = Callable[[str, str, Mapping[str, int]], None]


@dataclass(frozen=True)
class SetRun:
    """One judge on one set: the judge (its template, decoding, signature) and the runner's result."""

    judge: str
    set: str
    run: JudgeRun
    judge_obj: Judge
    #: with ``--batch-api``: the batches of this judge on this set (``{batches, lines, failed_lines,
    #: retried_lines, by_reason}``), else None
    batch: Mapping[str, Any] | None = None

    @property
    def higher_is_better(self) -> bool:
        return bool(self.judge_obj.higher_is_better)


def judge_columns(table: pd.DataFrame, name: str) -> list[str]:
    """The columns judge ``name`` wrote: ``name`` and ``name.*``."""
    return [c for c in table.columns if c == name or c.startswith(f"{name}.")]


async def _judge_all(spec: BenchJudge, backend: Any, sets: Sequence[LoadedSet], *, decoding: Mapping[str, Any],
                     constrain: str, cache: Cache, partial_dir: Path | None,
                     progress: BenchProgress | None) -> list[SetRun]:
    out: list[SetRun] = []
    price = price_book().for_model(spec.model)  # the price file's ($EVALIGN_PRICES), for the profile's cost
    try:
        for s in sets:
            judge = make_judge(spec.for_set(s.spec.recipe, kind=s.kind, decoding=decoding,
                                            scores=returns_scores(backend), constrain=constrain))
            partial = partial_dir / f"{s.key}.{spec.name}.partial.jsonl" if partial_dir else None

            def on_progress(c: dict[str, int], key: str = s.key) -> None:
                if progress is not None:
                    progress(spec.name, key, c)

            counts = getattr(backend, "batch_summary", None)  # a batch backend's counters (--batch-api)
            before = counts() if counts is not None else None
            run = await arun_judge(s.table, judge, backend, cache=cache, partial_path=partial,
                                   on_progress=on_progress, price=price)
            batch = batch_counts_since(before, counts()) if counts is not None else None
            out.append(SetRun(spec.name, s.key, run, judge, batch))
    finally:
        await backend.aclose()
    return out


def run_judges(specs: Sequence[BenchJudge], sets: Sequence[LoadedSet], *, decoding: Mapping[str, Any],
               constrain: str = "auto", cache: Cache | None = None, partial_dir: Path | None = None,
               progress: BenchProgress | None = None, batch: BatchSettings | None = None) -> list[SetRun]:
    """Every judge of ``specs`` on every set (in that order), its columns added to each set's table
    (in place). ``decoding``: the bench's decoding under each spec's own; ``constrain``: the bench's
    output constraint mode (see :meth:`~evalign.bench.judges.BenchJudge.for_set`); ``cache``: where calls are
    stored and looked up (default: the project cache); ``partial_dir``: where each run logs its
    finished calls as it goes; ``batch``: each judge's calls sent through its provider's batch API
    (``--batch-api``; a set's calls are one wave)."""
    cache = cache if cache is not None else Cache()
    runs: list[SetRun] = []
    for spec in specs:
        # the backend (a llama.cpp server the bench starts) opened outside the event loop, as `evalign judge`
        # does: a SIGTERM or Ctrl-C inside the loop then ends the command with its one line, the server stopped
        with open_backend(spec) as opened:
            backend = opened if batch is None else batch_backend(opened, batch, cache_path=cache.path)
            got = asyncio.run(_judge_all(spec, backend, sets, decoding=decoding, constrain=constrain, cache=cache,
                                         partial_dir=partial_dir, progress=progress))
        for r in got:
            s = next(x for x in sets if x.key == r.set)
            for c in judge_columns(r.run.table, spec.name):
                s.table[c] = r.run.table[c].to_numpy()
        runs += got
    return runs


def add_panels(sets: Sequence[LoadedSet], panels: Mapping[str, Sequence[str]],
               rules: Mapping[str, PanelSettings] | None = None) -> None:
    """Each panel as a judge column of every set where all its members are (in place): without a rule
    (the list form) pairwise sets the members' majority verdict (``.ab`` / ``.ba`` likewise, for the order
    diagnostics), graded sets the mean of their grades; with a rule (``rules``, the mapping form) that
    rule, and the panel's ``.confidence`` / ``.confidence_source`` from the votes
    (:mod:`evalign.rank.panel`); ``.status`` ``scored``."""
    rules = rules or {}
    for name, members in panels.items():
        rule = rules.get(name)
        for s in sets:
            t = s.table
            if not all(m in t.columns for m in members):
                continue
            values = "verdicts" if s.kind == "pairwise" else "grades"
            settings = rule or PanelSettings(rule="majority" if s.kind == "pairwise" else "mean")
            res = judge_panel(t, list(members), settings=settings, values=values)
            t[name] = res.combined
            if rule is not None:
                t[f"{name}.confidence"] = res.confidence
                t[f"{name}.confidence_source"] = [None if math.isnan(c) else res.confidence_source
                                                  for c in res.confidence]
            if s.kind == "pairwise" and all(f"{m}.ab" in t.columns and f"{m}.ba" in t.columns for m in members):
                for o in ("ab", "ba"):
                    t[f"{name}.{o}"] = judge_panel(t, [f"{m}.{o}" for m in members], settings=settings).combined
            t[f"{name}.status"] = "scored"


def panel_call_notes(sets: Sequence[LoadedSet], panels: Mapping[str, Sequence[str]],
                     rules: Mapping[str, PanelSettings] | None = None) -> list[str]:
    """One line per panel deciding pairwise sets by votes (majority, weighted): how many of its members'
    judgments a live panel with early stopping (``evalign judge --panel-member``) would have made on the
    bench's pairwise items, replayed from the members' verdicts (:func:`~evalign.evaluate.live_panel.early_stopping_calls`).
    The bench itself calls every member on every item: each member is a judge of the profile, evaluated on
    the same items as every other judge (an item a member was not called on would drop out of every
    judge's comparison)."""
    rules = rules or {}
    out = []
    for name, members in panels.items():
        settings = rules.get(name) or PanelSettings(rule="majority")
        if settings.rule not in ("majority", "weighted"):
            continue
        made = total = 0
        for s in sets:
            if s.kind != "pairwise" or not all(m in s.table.columns for m in members):
                continue
            called = early_stopping_calls(verdict_votes(s.table, list(members)), settings, list(members))
            made, total = made + int(called.sum()), total + called.size
        if total:
            out.append(f"panel {name}: early stopping (a live panel, evalign judge --panel-member) would judge "
                       f"{made} of the {total} member-pairs of the pairwise sets ({1 - made / total:.0%} of the member "
                       "calls saved); the bench calls every member on every item, as each member is also a judge "
                       "of the profile, compared on the same items")
    return out


__all__ = ["BenchProgress", "SetRun", "add_panels", "judge_columns", "panel_call_notes", "run_judges"]
