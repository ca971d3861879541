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

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.datasets.catalogue import CATALOGUE
from evalign.errors import InputError
from evalign.evaluate.annotators import pair_labels, run_alt_test
from evalign.evaluate.columns import verdict_array, verdict_codes
from evalign.io.annotations import read_annotations, read_judge_labels
from evalign.meta.alt_test import AltTestReport, AltTestSettings, alt_test_dicts, alt_test_many, settings_for


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


def as_settings(alt_test: AltTestSettings | float | bool | None, dataset: str | None = None) -> AltTestSettings | None:
    """The Alt-Test settings an API argument asks for: None / False (no test), True (epsilon by the
    dataset's annotators, see :func:`dataset_settings`), a number (the epsilon) or the settings."""
    if alt_test is None or alt_test is False:
        return None
    if isinstance(alt_test, AltTestSettings):
        return alt_test
    if alt_test is True:
        return dataset_settings(dataset)
    return dataset_settings(dataset, float(alt_test))


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
        return run_alt_test(pair_labels(prefs, verdicts, annotators), s, source)
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


__all__ = ["alt_test_files", "alt_test_table", "annotator_kind", "as_settings", "dataset_settings"]
