"""JudgeBench's own accuracy (Tan et al. 2025, ICLR; upstream ``utils/metrics.py``).

A pair is judged twice, the second time with the responses swapped. Each game's decision (in the
pair's own frame) scores +1 when it equals the objective label, -1 when it is the opposite
verdict, 0 when it is a tie or missing; the pair is **correct when the sum is > 0** (both games
right, or one right and the other a tie or missing). Accuracy = correct pairs / all pairs.

It differs from evalign's ``preference_accuracy`` of the resolved verdict, which is right only
when both orders agree on the right response (one right and one tie resolves to a tie: wrong).
Upstream prints the accuracy in percent; here it is a share (0-1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["JudgeBenchAccuracy", "judgebench_accuracy", "judgebench_accuracy_by"]


@dataclass(frozen=True)
class JudgeBenchAccuracy:
    """JudgeBench's accuracy of one judge on some pairs: ``accuracy`` = ``n_correct / n`` (0-1;
    NaN for no pairs), with the pairs whose game scores sum to > 0 (``n_correct``), < 0
    (``n_incorrect``) and 0 (``n_undecided``: games split, both ties or missing)."""

    accuracy: float
    n: int
    n_correct: int
    n_incorrect: int
    n_undecided: int


def _game_points(label: np.ndarray, game: np.ndarray) -> np.ndarray:
    """+1 where a game's decision equals the label, -1 where it is the opposite, else 0."""
    with np.errstate(invalid="ignore"):
        return np.where(game == label, 1, np.where(game == -label, -1, 0))


def judgebench_accuracy(label: Sequence[float] | np.ndarray, game_1: Sequence[float] | np.ndarray,
                        game_2: Sequence[float] | np.ndarray) -> JudgeBenchAccuracy:
    """JudgeBench's accuracy of a judge on pairs (see the module doc).

    ``label``: per pair +1 (A is correct) or -1 (B is correct); ``game_1`` / ``game_2``: the judge's
    decision in each game, in the pair's frame (the second game flipped back): +1 A, -1 B, 0 tie,
    NaN no decision. Raises ValueError when the arrays differ in length or a label is not +1 / -1."""
    lab = np.asarray(label, dtype=float)
    g1 = np.asarray(game_1, dtype=float)
    g2 = np.asarray(game_2, dtype=float)
    if not lab.shape == g1.shape == g2.shape or lab.ndim != 1:
        raise ValueError(f"label and games must be 1-D of one length, got {lab.shape}, {g1.shape}, {g2.shape}")
    if not np.isin(lab, (1.0, -1.0)).all():
        raise ValueError("JudgeBench labels are +1 (A correct) or -1 (B correct); no ties or missing labels")
    total = _game_points(lab, g1) + _game_points(lab, g2)
    n = int(lab.size)
    correct, incorrect = int(np.sum(total > 0)), int(np.sum(total < 0))
    return JudgeBenchAccuracy(correct / n if n else float("nan"), n, correct, incorrect, n - correct - incorrect)


def judgebench_accuracy_by(label: Sequence[float] | np.ndarray, game_1: Sequence[float] | np.ndarray,
                           game_2: Sequence[float] | np.ndarray,
                           groups: Sequence[str] | np.ndarray) -> Mapping[str, JudgeBenchAccuracy]:
    """:func:`judgebench_accuracy` on all pairs (``"(all)"``) and on the pairs of each value of
    ``groups`` (e.g. JudgeBench's source categories), in order of first appearance."""
    lab, g1, g2 = (np.asarray(x, dtype=float) for x in (label, game_1, game_2))
    grp = np.asarray(groups, dtype=object)
    out = {"(all)": judgebench_accuracy(lab, g1, g2)}
    for g in dict.fromkeys(grp.tolist()):
        sel = grp == g
        out[str(g)] = judgebench_accuracy(lab[sel], g1[sel], g2[sel])
    return out
