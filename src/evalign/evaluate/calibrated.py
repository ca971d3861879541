"""The calibration of the judges that state a probability, in an evaluation (see
:mod:`evalign.meta.calibration`): pairwise judges with a ``J.p_a`` column against the humans'
majority label of each compared pair, graded judges with ``J.p`` and ``J.grade`` against the
human rating column (rounded to the nearest grade), on the rows where both are present."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from evalign.errors import InputError
from evalign.meta.calibration import (
    Calibration,
    graded_calibration,
    pairwise_calibration,
    weighted_preference_accuracy,
)

#: the trust-table column of the probability-weighted verdict (alpaca_eval's weighted judges)
WEIGHTED = "accuracy_weighted"


def _numbers(table: pd.DataFrame, col: str) -> np.ndarray:
    return pd.to_numeric(table[col], errors="coerce").to_numpy(dtype=float)


def _blank(v: object) -> bool:
    """Whether a cell holds no value: None, NaN, or a text that is empty or ``nan``."""
    if isinstance(v, str):
        return v.strip().lower() in ("", "nan")
    return v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA or v is pd.NaT


def unit_column(table: pd.DataFrame, col: str, *, source: str | None = None, what: str = "a probability") -> np.ndarray:
    """The column ``col`` of a judge's stated probability or confidence (``J.p_a``, ``J.p``,
    ``J.confidence``) as numbers in [0, 1], NaN where a row has none (an empty cell, null, NaN: as the
    Trust-or-Escalate files write it). A text, a boolean, an infinity or a number outside [0, 1] is an
    :class:`~evalign.errors.InputError` naming ``source``, the row (1-based) and the column; ``what``
    names the value in it ("a confidence")."""
    raw = table[col]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    text = np.fromiter(((np.isnan(x) and not _blank(v)) or isinstance(v, bool | np.bool_)
                        for x, v in zip(values, raw, strict=True)), dtype=bool, count=len(raw))
    bad = text | np.isinf(values) | (values < 0) | (values > 1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        got = raw.iloc[i]
        shown = got if isinstance(got, str | bool | np.bool_) else float(values[i])
        raise InputError(f"{what} must lie in [0, 1] (a number; empty or NaN: none), got {shown!r}", file=source,
                         line=i + 1, field=col, line_word="row")
    return values


def pair_probabilities(table: pd.DataFrame, judges: Sequence[str], *, source: str | None = None) -> dict[str, np.ndarray]:
    """Each judge's ``J.p_a`` column (P(A is better)) where the pair table has one (checked by
    :func:`unit_column`; ``source`` names the table in an error)."""
    return {j: unit_column(table, f"{j}.p_a", source=source) for j in judges if f"{j}.p_a" in table.columns}


def pair_calibrations(p_a: dict[str, np.ndarray], labels: np.ndarray, keep: np.ndarray) -> list[Calibration]:
    """Calibration of each judge's ``J.p_a`` against the humans' labels (+1 / -1 / 0) on the pairs ``keep``."""
    return [pairwise_calibration(p[keep], labels[keep], judge=j) for j, p in p_a.items()]


def weighted_accuracy(p_a: np.ndarray, labels: np.ndarray, keep: np.ndarray) -> float:
    """The probability-weighted verdict's agreement with the humans on the pairs ``keep``."""
    return weighted_preference_accuracy(p_a[keep], labels[keep])


def item_calibrations(table: pd.DataFrame, judges: Sequence[str], human: str, *,
                      source: str | None = None) -> list[Calibration]:
    """Calibration of each graded judge's ``J.p`` (with its ``J.grade``) against the rating column
    ``human`` of the item table (``J.p`` checked by :func:`unit_column`; ``source`` names the table)."""
    out = []
    for j in judges:
        if f"{j}.p" in table.columns and f"{j}.grade" in table.columns and human in table.columns:
            out.append(graded_calibration(unit_column(table, f"{j}.p", source=source), _numbers(table, f"{j}.grade"),
                                          _numbers(table, human), judge=j))
    return out


__all__ = ["WEIGHTED", "item_calibrations", "pair_calibrations", "pair_probabilities", "unit_column", "weighted_accuracy"]
