"""The calibration of the judges that state a probability, in an evaluation (see
:mod:`evalign.meta.calibration`): pairwise judges with a ``J.p_a`` column against the humans'
majority label of each compared pair, graded judges with ``J.p`` and ``J.grade`` against the
human rating column (rounded to the nearest grade), on the rows where both are present."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

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


def pair_probabilities(table: pd.DataFrame, judges: Sequence[str]) -> dict[str, np.ndarray]:
    """Each judge's ``J.p_a`` column (P(A is better)) where the pair table has one."""
    return {j: _numbers(table, f"{j}.p_a") for j in judges if f"{j}.p_a" in table.columns}


def pair_calibrations(p_a: dict[str, np.ndarray], labels: np.ndarray, keep: np.ndarray) -> list[Calibration]:
    """Calibration of each judge's ``J.p_a`` against the humans' labels (+1 / -1 / 0) on the pairs ``keep``."""
    return [pairwise_calibration(p[keep], labels[keep], judge=j) for j, p in p_a.items()]


def weighted_accuracy(p_a: np.ndarray, labels: np.ndarray, keep: np.ndarray) -> float:
    """The probability-weighted verdict's agreement with the humans on the pairs ``keep``."""
    return weighted_preference_accuracy(p_a[keep], labels[keep])


def item_calibrations(table: pd.DataFrame, judges: Sequence[str], human: str) -> list[Calibration]:
    """Calibration of each graded judge's ``J.p`` (with its ``J.grade``) against the rating column
    ``human`` of the item table."""
    out = []
    for j in judges:
        if f"{j}.p" in table.columns and f"{j}.grade" in table.columns and human in table.columns:
            out.append(graded_calibration(_numbers(table, f"{j}.p"), _numbers(table, f"{j}.grade"),
                                          _numbers(table, human), judge=j))
    return out


__all__ = ["WEIGHTED", "item_calibrations", "pair_calibrations", "pair_probabilities", "weighted_accuracy"]
