"""The Alt-Test (:mod:`evalign.meta.alt_test`) on evalign's tables and files: which labels are the
annotators' and the judges', in what scale, and the epsilon of a dataset's annotators.

* a **pair table**: the annotator columns (``pref_1 .. pref_k``: +1 / -1 / 0) and the judges'
  verdict columns (A / B / tie; an unparseable verdict is a label no annotator gives, so it loses,
  as it counts as wrong in the trust table; a skipped pair is no label), scored by ``accuracy``;
* an **item table**: single-annotator rating columns and judge score columns on the annotators'
  scale (a judge whose scores fall outside the annotators' range, or whose direction differs, is
  left out with a note), scored by ``neg_rmse`` (``accuracy`` for text labels);
* **files** in the Alt-Test's own format (:mod:`evalign.io.annotations`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.datasets.catalogue import CATALOGUE
from evalign.errors import InputError
from evalign.evaluate.columns import verdict_array, verdict_codes
from evalign.io.annotations import read_annotations, read_judge_labels
from evalign.meta.alt_test import (
    AltTestReport,
    AltTestSettings,
    alt_test_coded,
    alt_test_dicts,
    alt_test_many,
    resolve_scoring,
    settings_for,
)

#: the code of an unparseable verdict: a label no annotator gives (+1 / -1 / 0 are theirs)
UNPARSEABLE = 9.0


def annotator_kind(dataset: str | None) -> str | None:
    """The declared kind of a catalogue dataset's annotators (``experts`` / ``skilled`` / ``crowd``;
    ``NAME`` or ``NAME:VARIANT``), or None when the dataset declares none."""
    if not dataset:
        return None
    entry = CATALOGUE.get(str(dataset).split(":", 1)[0])
    kind = getattr(entry, "annotator_kind", None)
    return str(kind) if kind else None


def dataset_settings(dataset: str | None, epsilon: float | None = None, **kw: Any) -> AltTestSettings:
    """The settings of an Alt-Test on ``dataset``: ``epsilon`` when given, else the paper's value for
    the dataset's declared annotator kind (the strictest, 0.1, when it declares none)."""
    kind = annotator_kind(dataset)
    s = settings_for(epsilon, kind, **kw)
    if epsilon is None and kind is not None and dataset:
        s = AltTestSettings(**{**vars(s), "epsilon_source": f"{dataset}'s annotators are {kind}"})
    return s


def verdict_labels(verdicts: np.ndarray) -> np.ndarray:
    """A judge's ``2 x pairs`` verdict array (:func:`evalign.evaluate.columns.verdict_array`) as
    Alt-Test labels: +1 A, -1 B, 0 tie, :data:`UNPARSEABLE`, NaN for a pair without a verdict."""
    a, b = np.asarray(verdicts, dtype=float)
    out = np.where(np.isnan(a), UNPARSEABLE, a - b)
    return np.where(np.isnan(a) & np.isnan(b), np.nan, out)


def pair_alt_test(prefs: np.ndarray, verdicts: Mapping[str, np.ndarray], annotators: Sequence[str], *,
                  settings: AltTestSettings, source: str = "") -> AltTestReport:
    """The Alt-Test of pairwise judges: ``prefs`` ``(annotators, pairs)`` codes (+1 / -1 / 0, NaN =
    none), each judge's ``2 x pairs`` verdict array; scored by accuracy (``settings.scoring`` ``auto``)."""
    labels = {j: verdict_labels(v) for j, v in verdicts.items()}
    n_bad = {j: int(np.sum(v == UNPARSEABLE)) for j, v in labels.items()}
    scoring = "accuracy" if settings.scoring == "auto" else settings.scoring
    results = alt_test_coded(np.asarray(prefs, dtype=float).T, labels, annotators=list(annotators), settings=settings,
                             scoring=scoring)
    notes = [f"{j}: {n} unparseable verdict(s) count as a label no annotator gave" for j, n in n_bad.items() if n]
    return AltTestReport(tuple(results.values()), settings, tuple(annotators), source, tuple(notes))


def item_alt_test(ratings: Sequence[np.ndarray], scores: Mapping[str, np.ndarray], annotators: Sequence[str], *,
                  settings: AltTestSettings, source: str = "", notes: Sequence[str] = ()) -> AltTestReport:
    """The Alt-Test of item judges: each annotator's ratings and each judge's scores as arrays of
    the same shape (e.g. ``systems x items``; every cell an item of the test, NaN = none), on the
    annotators' scale. A judge with a score outside the annotators' range is left out, with a note."""
    humans = np.column_stack([np.asarray(r, dtype=float).ravel() for r in ratings])
    lo, hi = np.nanmin(humans), np.nanmax(humans)
    kept, out_notes = {}, list(notes)
    for j, v in scores.items():
        flat = np.asarray(v, dtype=float).ravel()
        outside = np.sum((flat < lo) | (flat > hi))
        if outside:
            out_notes.append(f"{j}: not on the annotators' scale ({int(outside)} score(s) outside "
                             f"[{lo:g}, {hi:g}]): no Alt-Test")
            continue
        kept[j] = flat
    if not kept:
        return AltTestReport((), settings, tuple(annotators), source, tuple(out_notes))
    results = alt_test_coded(humans, kept, annotators=list(annotators), settings=settings,
                             scoring=resolve_scoring(settings.scoring, True))
    return AltTestReport(tuple(results.values()), settings, tuple(annotators), source, tuple(out_notes))


def alt_test_table(table: pd.DataFrame, annotators: Sequence[str], judges: Sequence[str], *,
                   settings: AltTestSettings | None = None, pairs: bool | None = None) -> AltTestReport:
    """The Alt-Test of ``judges`` (columns of ``table``) against the annotator columns
    ``annotators``: a pair table (``pairs``; default: the table has ``response_a`` or ``system_a``)
    with +1 / -1 / 0 annotator codes and verdict columns, or a table with one row per item, its
    annotator and judge columns holding labels (text or numbers)."""
    s = settings or AltTestSettings()
    source = str(table.attrs.get("source", "<table>"))
    for c in [*annotators, *judges]:
        if c not in table.columns:
            raise InputError(f"no column '{c}'", file=source, field=c)
    if len(annotators) < 2:
        raise InputError("the Alt-Test needs at least 2 annotator columns", file=source, field="annotators")
    if pairs is None:
        pairs = "response_a" in table.columns or "system_a" in table.columns
    if pairs:
        prefs = np.vstack([pd.to_numeric(table[a], errors="raise").to_numpy(dtype=float) for a in annotators])
        verdicts = {j: verdict_array(*verdict_codes(table, j)) for j in judges}
        return pair_alt_test(prefs, verdicts, annotators, settings=s, source=source)
    humans = table[list(annotators)].to_numpy(dtype=object)
    labels = {j: table[j].to_numpy(dtype=object) for j in judges}
    results = alt_test_many(humans, labels, annotators=list(annotators), settings=s)
    return AltTestReport(tuple(results.values()), s, tuple(annotators), source)


def alt_test_files(humans: str | Path, judges: str | Path, *, settings: AltTestSettings | None = None,
                   only: Sequence[str] = ()) -> AltTestReport:
    """The Alt-Test of the judges of file ``judges`` against the annotators of file ``humans``, both
    in the Alt-Test's own format (:func:`evalign.io.annotations.read_annotations`); ``only``: the
    judges to test (default all)."""
    s = settings or AltTestSettings()
    h = read_annotations(humans)
    j = read_judge_labels(judges)
    if only:
        unknown = [x for x in only if x not in j]
        if unknown:
            raise InputError(f"no judge '{unknown[0]}' (judges: {', '.join(j)})", file=str(judges), field="judge")
        j = {k: j[k] for k in only}
    known = {i for anns in h.values() for i in anns}
    notes = []
    for name, labels in j.items():
        extra = sum(1 for i in labels if i not in known)
        if extra:
            notes.append(f"{name}: {extra} item(s) no annotator labelled (not tested)")
    results = alt_test_dicts(h, j, settings=s)
    return AltTestReport(tuple(results.values()), s, tuple(h), f"{humans} + {judges}", tuple(notes))


__all__ = ["UNPARSEABLE", "alt_test_files", "alt_test_table", "annotator_kind", "dataset_settings", "item_alt_test",
           "pair_alt_test", "verdict_labels"]
