"""Which columns of a table are metrics, judges and judge verdicts: the column convention.

The convention (what ``evalign judge`` writes and ``evalign meta`` / ``evalign report`` read, with
no renaming):

* A column ``J`` is a **judge** column when the table also has ``J.status`` (``scored`` /
  ``unscored`` / ``skipped``, written by ``evalign judge``) or when its name starts with ``judge:``
  (verdicts of a judge run elsewhere, e.g. the upstream ``judge:gpt-3.5-turbo`` of PandaLM).
  Every other column named is a **metric** column.
* In a pair table, a judge column is a **verdict** column: its verdict per pair is ``J.verdict``
  when that column exists, else ``J`` itself; a verdict is ``A`` / ``B`` / ``tie`` (any case) or a
  code ``+1`` (A better) / ``-1`` (B better) / ``0`` (tie) (the sign of a mean code over samples);
  ``unparseable`` (what ``evalign judge`` writes) or an empty cell is no verdict.
  A pair without a verdict is **unparseable** (the judge answered, nothing could be read; it
  counts as wrong) unless ``J.status`` is ``skipped`` (then the pair is missing for that judge).
* An absolute judge's score column is used like a metric column; its direction is declared by the
  judge (``higher_is_better`` of the registered judge named by the column's part before ``[``,
  e.g. ``geval``: 1 = best), else higher is better.

Verdicts become a ``2 x pairs`` array like a metric's scores: A = (1, 0), B = (0, 1), tie =
(0, 0), unparseable = (NaN, 0), missing = (NaN, NaN); see :func:`verdict_statistics`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from evalign.errors import InputError
from evalign.judges import judge_class
from evalign.meta.agreement import majority_vote
from evalign.meta.significance import Statistic

JUDGE_PREFIX = "judge:"
STATUS = ".status"
VERDICT = ".verdict"
_WORDS = {"a": 1.0, "b": -1.0, "tie": 0.0}
#: verdict texts meaning "no verdict" (``evalign judge`` writes ``unparseable``)
_NO_VERDICT = {"unparseable", ""}


def is_judge_column(table: pd.DataFrame, name: str) -> bool:
    """Whether ``name`` is a judge column of ``table`` (see the module doc)."""
    return name.startswith(JUDGE_PREFIX) or f"{name}{STATUS}" in table.columns


def judge_higher_is_better(name: str) -> bool:
    """The direction a registered judge declares for its score column ``name`` (True if unknown)."""
    base = name.split("[", 1)[0]
    try:
        return bool(judge_class(base).higher_is_better)
    except Exception:  # not a registered judge (or judges unavailable): higher is better
        return True


def verdict_codes(table: pd.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Per pair of ``table``: the verdict code (+1 A, -1 B, 0 tie; NaN without one) and whether the
    pair is missing for this judge (status ``skipped``). Raises InputError naming the row of a
    value that is not a verdict."""
    src = f"{name}{VERDICT}" if f"{name}{VERDICT}" in table.columns else name
    if src not in table.columns:
        raise InputError(f"no verdict column '{name}'", file=table.attrs.get("source"), field=name)
    codes = np.full(len(table), np.nan)
    for i, v in enumerate(table[src].tolist()):
        if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
            continue
        if isinstance(v, str):
            key = v.strip().lower()
            if key in _NO_VERDICT:  # the judge answered but no verdict could be read
                continue
            if key not in _WORDS:
                raise InputError(f"verdict must be A, B or tie, got {v!r:.40}", file=table.attrs.get("source"),
                                 line=i + 1, field=src)
            codes[i] = _WORDS[key]
        elif isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
            raise InputError(f"verdict must be A, B, tie or a code +1/-1/0, got {v!r:.40}",
                             file=table.attrs.get("source"), line=i + 1, field=src)
        else:
            codes[i] = float(np.sign(float(v)))
    status = f"{name}{STATUS}"
    skipped = (table[status].astype(str).str.lower() == "skipped").to_numpy() if status in table.columns else \
        np.zeros(len(table), dtype=bool)
    return codes, skipped


def verdict_array(codes: np.ndarray, skipped: np.ndarray) -> np.ndarray:
    """The ``2 x pairs`` array of verdicts (see the module doc)."""
    a = np.where(codes > 0, 1.0, 0.0)
    b = np.where(codes < 0, 1.0, 0.0)
    a[np.isnan(codes)] = np.nan
    b[skipped] = np.nan
    a[skipped] = np.nan
    return np.vstack([a, b])


def _verdict_units(with_ties: bool, parsed_only: bool) -> Any:
    def units(h: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        label = majority_vote(np.asarray(h, dtype=float).T, fallback=0.0)
        a, b = m[0], m[1]
        present = np.isfinite(label) & ~(np.isnan(a) & np.isnan(b))
        unparseable = np.isnan(a) & ~np.isnan(b)
        with np.errstate(invalid="ignore"):
            call = np.sign(a - b)
        correct = present & ~unparseable & (call == label)
        den = present & (label != 0 if not with_ties else True)
        if parsed_only:
            den = den & ~unparseable
        return correct.astype(float) * den, den.astype(float)

    return units


def verdict_statistics() -> dict[str, Statistic]:
    """The statistics of a verdict column: ``preference_accuracy`` (unparseable = wrong),
    ``preference_accuracy_no_ties`` (human ties left out; a judge tie or unparseable = wrong),
    ``accuracy_parsed`` (with ties, unparseable verdicts left out). Each is a per-pair ``units``
    statistic, so the bootstrap and paired permutation tests work as for metrics."""
    return {
        "preference_accuracy": Statistic("preference_accuracy", "units", units=_verdict_units(True, False),
                                         discrete=True),
        "preference_accuracy_no_ties": Statistic("preference_accuracy_no_ties", "units",
                                                 units=_verdict_units(False, False), discrete=True),
        "accuracy_parsed": Statistic("accuracy_parsed", "units", units=_verdict_units(True, True), discrete=True),
    }


def n_unparseable(array: np.ndarray) -> int:
    """Unparseable verdicts in a verdict array."""
    return int(np.sum(np.isnan(array[0]) & ~np.isnan(array[1])))
