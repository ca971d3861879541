"""The judges against the individual annotators, in an evaluation: the Alt-Test
(:mod:`evalign.meta.alt_test`) and the agreement against the human ceiling (:mod:`evalign.meta.ceiling`).

Both read one :class:`AnnotatorLabels`: each annotator's labels and each judge's, one row per unit
compared (a pair; a ``(system, item)`` cell), on the evaluation's aligned data. Pair tables give
preference codes (+1 / -1 / 0) and verdicts (an unparseable verdict is a label no annotator gives);
item tables give the annotators' ratings and the judges' scores on their scale (a judge off the
scale, or with the other direction, is left out with a note).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from evalign.meta.alt_test import AltTestReport, AltTestSettings, alt_test_coded, resolve_scoring
from evalign.meta.ceiling import STATISTICS, CeilingReport, agreement_ceiling
from evalign.meta.resampling import Resampling

#: the code of an unparseable verdict: a label no annotator gives (+1 / -1 / 0 are theirs)
UNPARSEABLE = 9.0
#: the columns a trust table's judge rows get (group ``(all)``)
ALT_COLUMNS = ("alt_winning_rate", "alt_advantage", "alt_passed")
CEILING_COLUMNS = ("kappa_with_humans", "human_ceiling_kappa", "vs_ceiling")


@dataclass(frozen=True)
class AnnotatorLabels:
    """Labels coded as numbers, one row per unit: ``humans`` ``(n, k)`` (NaN = none), ``judges``
    name -> ``(n,)``; ``categorical``: codes of categories (pairs) rather than ordinal numbers;
    ``units``: the resampling unit of each row (None: each row its own); ``notes``: judges left out
    and why; ``unparseable``: per judge, how many of its labels are unparseable verdicts."""

    humans: np.ndarray
    judges: Mapping[str, np.ndarray]
    annotators: tuple[str, ...]
    categorical: bool
    units: np.ndarray | None = None
    notes: tuple[str, ...] = ()
    unparseable: Mapping[str, int] = field(default_factory=dict)


def verdict_labels(verdicts: np.ndarray) -> np.ndarray:
    """A judge's ``2 x pairs`` verdict array (:func:`evalign.evaluate.columns.verdict_array`) as
    labels: +1 A, -1 B, 0 tie, :data:`UNPARSEABLE`, NaN for a pair without a verdict."""
    a, b = np.asarray(verdicts, dtype=float)
    out = np.where(np.isnan(a), UNPARSEABLE, a - b)
    return np.where(np.isnan(a) & np.isnan(b), np.nan, out)


def pair_labels(prefs: np.ndarray, verdicts: Mapping[str, np.ndarray], annotators: Sequence[str],
                keep: np.ndarray | None = None) -> AnnotatorLabels:
    """The labels of a pair table: ``prefs`` ``(annotators, pairs)`` codes, each judge's ``2 x pairs``
    verdicts; ``keep``: the pairs compared (default all)."""
    sel = np.ones(np.asarray(prefs).shape[1], dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    judges = {j: verdict_labels(v)[sel] for j, v in verdicts.items()}
    bad = {j: int(np.sum(v == UNPARSEABLE)) for j, v in judges.items()}
    return AnnotatorLabels(np.asarray(prefs, dtype=float)[:, sel].T, judges, tuple(annotators), True,
                           unparseable={j: n for j, n in bad.items() if n})


def on_scale(humans: np.ndarray, scores: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], list[str]]:
    """The judges whose scores lie within the range of the annotators' labels, and a note for each
    one left out."""
    finite = humans[np.isfinite(humans)]
    if not finite.size:
        return {}, ["no annotator label"]
    lo, hi = float(finite.min()), float(finite.max())
    kept, notes = {}, []
    for j, v in scores.items():
        outside = int(np.sum((v < lo) | (v > hi)))
        if outside:
            notes.append(f"{j}: not on the annotators' scale ({outside} score(s) outside [{lo:g}, {hi:g}]): "
                         "not compared with the annotators")
        else:
            kept[j] = v
    return kept, notes


def item_labels(ratings: Sequence[np.ndarray], scores: Mapping[str, np.ndarray], annotators: Sequence[str], *,
                keep: np.ndarray | None = None, units: np.ndarray | None = None,
                notes: Sequence[str] = ()) -> AnnotatorLabels:
    """The labels of an item table: each annotator's ratings and each judge's scores as arrays of the
    same shape (``systems x items``), on the cells ``keep`` (default all); ``units``: the unit of
    each cell, same shape (default the column, i.e. the item). Judges off the annotators' scale
    are left out (:func:`on_scale`)."""
    shape = np.asarray(ratings[0]).shape
    sel = np.ones(shape, dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    if units is None and len(shape) == 2:
        units = np.broadcast_to(np.arange(shape[1]), shape)
    humans = np.column_stack([np.asarray(r, dtype=float)[sel] for r in ratings])
    kept, off = on_scale(humans, {j: np.asarray(v, dtype=float)[sel] for j, v in scores.items()})
    return AnnotatorLabels(humans, kept, tuple(annotators), False,
                           units=None if units is None else np.asarray(units)[sel], notes=(*notes, *off))


def _unparseable_note(judge: str, n: int) -> str:
    return f"{judge}: {n} unparseable verdict(s) count as a label no annotator gave"


def run_alt_test(labels: AnnotatorLabels, settings: AltTestSettings, source: str = "") -> AltTestReport:
    """The Alt-Test of every judge of ``labels`` (scoring ``auto``: accuracy for pairs, neg_rmse for
    ratings)."""
    scoring = "accuracy" if labels.categorical and settings.scoring == "auto" else resolve_scoring(settings.scoring,
                                                                                                    True)
    results = alt_test_coded(labels.humans, labels.judges, annotators=list(labels.annotators), settings=settings,
                             scoring=scoring) if labels.judges else {}
    notes = [*labels.notes, *(_unparseable_note(j, n) for j, n in labels.unparseable.items())]
    return AltTestReport(tuple(results.values()), settings, labels.annotators, source, tuple(notes))


def ceiling_statistic(name: str, categorical: bool) -> str:
    """``auto`` -> ``kappa`` for categories, ``quadratic_kappa`` for ordinal numbers."""
    if name == "auto":
        return "kappa" if categorical else "quadratic_kappa"
    if name not in STATISTICS:
        raise ValueError(f"unknown agreement statistic {name!r} (use auto, {', '.join(STATISTICS)})")
    return name


def run_ceiling(labels: AnnotatorLabels, statistic: str, resampling: Resampling) -> CeilingReport:
    """Every judge's agreement with the annotators against theirs with each other."""
    r = agreement_ceiling(labels.humans, labels.judges, annotators=labels.annotators,
                          statistic=ceiling_statistic(statistic, labels.categorical), units=labels.units,
                          resampling=resampling)
    notes = [*labels.notes, *(_unparseable_note(j, n) for j, n in labels.unparseable.items())]
    return CeilingReport(r.statistic, r.judges, r.annotator_pairs, r.ceiling, r.ceiling_low, r.ceiling_high,
                         r.annotators, r.resampling, tuple(notes))


def add_judge_columns(rows: pd.DataFrame, alt: AltTestReport | None, ceiling: CeilingReport | None) -> None:
    """The judges' Alt-Test (:data:`ALT_COLUMNS`) and ceiling (:data:`CEILING_COLUMNS`) figures on
    their rows of group ``(all)`` of a trust table (NaN / None elsewhere), in place."""
    def fill(names: Sequence[str], by_judge: Mapping[str, Sequence[Any]]) -> None:
        for k, name in enumerate(names):
            rows[name] = [by_judge[m][k] if g == "(all)" and m in by_judge else None
                          for g, m in zip(rows["group"], rows["metric"], strict=True)]

    if alt is not None:
        fill(ALT_COLUMNS, {r.judge: (r.winning_rate, r.advantage_probability, r.passed) for r in alt.results})
    if ceiling is not None:
        fill(CEILING_COLUMNS, {j.judge: (j.value, j.ceiling, j.verdict) for j in ceiling.judges})


__all__ = ["ALT_COLUMNS", "CEILING_COLUMNS", "UNPARSEABLE", "AnnotatorLabels", "add_judge_columns",
           "ceiling_statistic", "item_labels", "on_scale", "pair_labels", "run_alt_test",
           "run_ceiling", "verdict_labels"]
